/* draft.h - the CPU side of speculative decoding with a Gemma 4 assistant
 * drafter (Gemma4AssistantForCausalLM, config model_type "gemma4_assistant",
 * transformers 5.17: models/gemma4_assistant and generation/
 * candidate_generator.py SinglePositionMultiTokenCandidateGenerator).
 *
 * The drafter owns no KV cache. Every one of its layers attends over the
 * target's cache of its layer type (fg_g4_type_source of the target's
 * config). All k drafts of one round sit at the same position pos: the
 * position of `last`, the newest token, which the target has not run yet.
 * Draft step j:
 *   x   = pre_projection(concat(emb(last_j), h_j))        [2 backbone] -> [hidden]
 *   y   = the assistant's decoder layers on x at position pos (RoPE of its
 *         own config), attending to the target's cache positions < pos
 *         (sliding layers: the newest W + 1 of them, W the ASSISTANT's
 *         sliding_window: transformers' flipped bidirectional sliding mask
 *         is inclusive, |q - kv| <= W; tests/oracle/assistant.py measured
 *         it), then its final norm
 *   tok = argmax of lm_head(y) (tied to its embed_tokens) or, with
 *         use_ordered_embeddings, of the centroid-masked head (the top
 *         cfg.centroid_top_k of centroids(y), their tokens only: the
 *         config's centroid_intermediate_top_k, or the override that
 *         fg_g4_set_centroid_top_k put in the assistant's config before
 *         fg_draft_cpu_new, the challenge's CENTROID_TOP_K)
 *   h_{j+1} = post_projection(y), last_{j+1} = tok
 * emb() is the target's scaled input embedding (embed_tokens row x
 * sqrt(target hidden)); h_1 is the target's final-normed hidden state of
 * position pos - 1 (the input of its head there).
 *
 * The engine (engine.c) runs the rounds: drafts, the target's verify of
 * [last, d1..dk], and keeps the longest prefix the target agrees with plus
 * its own next token. The tokens are plain greedy's whatever the drafter
 * says; the drafter only decides how many come per round. */
#ifndef FG_ENGINE_DRAFT_H
#define FG_ENGINE_DRAFT_H

#include <stdint.h>

#include "engine/model.h"
#include "err.h"

#define FG_DRAFT_MAX_K 16 /* drafts per round at most */

/* The target's caches an assistant reads, by layer type (FG_G4_SLIDING,
 * FG_G4_FULL): k, v [cap][kv_heads][head_dim] as engine.c stores them (slot
 * = position % cap), NULL when the target has no layer of that type. */
struct fg_draft_kv {
	const float *k[2], *v[2];
	int cap[2];
	int window; /* the target's sliding window in use: the drafter's sliding
		     * layers read the newest min(its own window, this) + 1
		     * positions (see above) */
};

struct fg_draft_cpu;

/* Checks that assistant a can draft for target t (a->cfg.assistant;
 * backbone_hidden_size = t's hidden; the same vocabulary; for each layer type
 * the assistant uses, a target source layer with the same head_dim and
 * kv_heads) and makes its scratch. FG_EINVAL naming the mismatch. */
int fg_draft_cpu_new(struct fg_draft_cpu **out, const struct fg_g4_model *a, const struct fg_g4_model *t,
		     struct fg_err *err);
void fg_draft_cpu_free(struct fg_draft_cpu *d);

/* k (1..FG_DRAFT_MAX_K) draft tokens after `last` at position pos (> 0),
 * as above (emb() from the target t given to fg_draft_cpu_new): h
 * [backbone] the target's final-normed hidden state at pos - 1. out [k]; logits
 * (NULL or [k][vocab]) each step's logits as transformers returns them (the
 * masked head's unselected tokens at its mask value, min(selected) - 1). */
int fg_draft_cpu_propose(struct fg_draft_cpu *d, const struct fg_draft_kv *kv, const float *h, int32_t last, int pos,
			 int k, int32_t *out, float *logits, struct fg_err *err);

/* The CPU engine's side (engine.c), for the rounds and for tests. */
struct fg_engine;
/* The caches of target engine e (CPU path) an assistant reads. FG_EINVAL
 * when the target has no source layer of either type. */
int fg_engine_draft_kv(const struct fg_engine *e, struct fg_draft_kv *out, struct fg_err *err);
/* The final-normed hidden state [hidden] of the newest position the CPU path
 * computed logits for (fg_engine_forward_logits with logits); NULL before
 * any, after fg_engine_reset, and on the GPU path. */
const float *fg_engine_last_hidden(const struct fg_engine *e);

#endif
