/* version.h - fgpack's version; FG_BUILD_ID is set by the Makefile from git. */
#ifndef FG_VERSION_H
#define FG_VERSION_H

#define FG_VERSION "0.1.0"
#ifndef FG_BUILD_ID
#define FG_BUILD_ID "unknown"
#endif

#endif
