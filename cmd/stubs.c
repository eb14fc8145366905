/* stubs.c - weak fallbacks for verbs whose cmd_<verb>.c is not written yet.
 * A real definition anywhere in cmd/ replaces the one here at link time; until
 * then the verb says plainly that this build lacks it and exits 1. */
#include <stdio.h>

#include "cmd.h"

static int not_built(const char *verb)
{
#ifdef FG_ENGINE_BUILD
	/* static/engine.mk: the bundle's engine carries run, serve and verify only */
	fprintf(stderr, "fgpack %s: not in the engine build (use the full fgpack)\n", verb);
#else
	fprintf(stderr, "fgpack %s: not implemented in this build yet\n", verb);
#endif
	return FG_EXIT_FAIL;
}

#define FG_WEAK_VERB(name, help)                                  \
	__attribute__((weak)) int cmd_##name(int argc, char **argv) \
	{                                                           \
		(void)argc;                                         \
		(void)argv;                                         \
		return not_built(#name);                            \
	}
FG_VERBS(FG_WEAK_VERB)
FG_WEAK_VERB(bake_int4, "")
FG_WEAK_VERB(bake_keepset, "")
FG_WEAK_VERB(bake_prune_head, "")
