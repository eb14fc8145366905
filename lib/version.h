/* version.h - fgpack's version and the build id (git describe of the tree it
 * was built from). The id lives in one object, lib/version.c, which the
 * Makefile rebuilds whenever the id changes, so no incremental build carries
 * a stale id into a transcript, a provenance statement or a bundle. */
#ifndef FG_VERSION_H
#define FG_VERSION_H

#define FG_VERSION "0.1.0"

extern const char fg_build_id[];

#endif
