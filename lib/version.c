/* version.c - the build id, set by the Makefile on this file alone. */
#include "version.h"

#ifndef FG_BUILD_ID
#define FG_BUILD_ID "unknown"
#endif

const char fg_build_id[] = FG_BUILD_ID;
