/* stubs.c - weak fallbacks for verbs whose cmd_<verb>.c is not written yet.
 * A real definition anywhere in cmd/ replaces the one here at link time; until
 * then the verb says plainly that this build lacks it and exits 1. */
#include <stdio.h>

#include "cmd.h"
#include "err.h"

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

/* verify --url lives in cmd/verify_url.c (libcurl), which the engine build
 * leaves out */
__attribute__((weak)) int fg_cmd_verify_url(const char *url, const char *bundle_id,
					    const struct cJSON *transcript, const struct cJSON *eval_ids,
					    int warmup, int max_new, int max_new_given, int no_bench,
					    struct cJSON *sum, const char **verdict, int *exit_code,
					    struct fg_err *err)
{
	(void)url, (void)bundle_id, (void)transcript, (void)eval_ids, (void)warmup, (void)max_new, (void)no_bench;
	(void)max_new_given;
	(void)sum, (void)verdict, (void)exit_code;
	return fg_err_set(err, FG_EINVAL, "--url is not in the engine build (use the full fgpack)");
}
FG_WEAK_VERB(bake_int4, "")
FG_WEAK_VERB(bake_keepset, "")
FG_WEAK_VERB(bake_prune_head, "")
