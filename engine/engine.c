/* engine.c - placeholder bodies for engine.h until the CPU path lands: every
 * entry point that could do work says so with FG_EUNSUPPORTED. */
#include "engine/engine.h"

#include <math.h>

int fg_engine_load(struct fg_engine **out, const char *model_dir, const struct fg_engine_opts *opts,
		   struct fg_err *err)
{
	(void)opts;
	*out = NULL;
	return fg_err_set(err, FG_EUNSUPPORTED, "%s: the engine is not built yet", model_dir);
}

void fg_engine_free(struct fg_engine *e) { (void)e; }
int fg_engine_vocab_size(const struct fg_engine *e) { (void)e; return 0; }
int fg_engine_max_seq(const struct fg_engine *e) { (void)e; return 0; }
int fg_engine_max_position(const struct fg_engine *e) { (void)e; return 0; }
int fg_engine_sliding_window(const struct fg_engine *e) { (void)e; return 0; }
int fg_engine_bos_id(const struct fg_engine *e) { (void)e; return -1; }
const int32_t *fg_engine_eos_ids(const struct fg_engine *e, int *n) { (void)e; *n = 0; return NULL; }
int fg_engine_is_eos(const struct fg_engine *e, int32_t token) { (void)e; (void)token; return 0; }
int fg_engine_pos(const struct fg_engine *e) { (void)e; return 0; }
int fg_engine_threads(const struct fg_engine *e) { (void)e; return 1; }
const char *fg_engine_weight_format(const struct fg_engine *e) { (void)e; return "none"; }
void fg_engine_reset(struct fg_engine *e) { (void)e; }

int fg_engine_forward_logits(struct fg_engine *e, const int32_t *ids, size_t n, int last_only,
			     float *logits, struct fg_err *err)
{
	(void)e; (void)ids; (void)n; (void)last_only; (void)logits;
	return fg_err_set(err, FG_EUNSUPPORTED, "the engine is not built yet");
}

int fg_engine_generate(struct fg_engine *e, const int32_t *prompt, size_t n_prompt, int max_new,
		       fg_engine_token_cb cb, void *user, struct fg_err *err)
{
	(void)e; (void)prompt; (void)n_prompt; (void)max_new; (void)cb; (void)user;
	return fg_err_set(err, FG_EUNSUPPORTED, "the engine is not built yet");
}

int32_t fg_engine_argmax(const float *logits, int n)
{
	int32_t best = 0;
	int i;

	for (i = 1; i < n; i++)
		if (logits[i] > logits[best] || (isnan(logits[best]) && !isnan(logits[i])))
			best = i;
	return best;
}
