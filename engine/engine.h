/* engine.h - the embedded Gemma 4 text decoder: load a checkpoint folder,
 * run prompts through it, decode greedily.
 *
 * One engine is one model plus one sequence's KV cache (one stream). The CPU
 * path (engine/cpu/) computes everything in fp32 from bf16 / f32 / INT4
 * (compressed-tensors pack-quantized) weights mapped from safetensors, and
 * gives bit-identical results for any thread count. The math follows the
 * Hugging Face transformers Gemma 4 implementation; docs/engine.md has it.
 *
 *   struct fg_engine_opts o = { .threads = 4 };
 *   struct fg_engine *e;
 *   if (fg_engine_load(&e, "model/", &o, &err)) ...;
 *   fg_engine_generate(e, prompt, n, 32, on_token, user, &err);
 *   fg_engine_free(e);
 *
 * Positions: the engine appends tokens to its cache; fg_engine_reset starts
 * a new sequence. A sequence may hold at most fg_engine_max_seq tokens;
 * going past it is FG_EINVAL, never a crash. */
#ifndef FG_ENGINE_H
#define FG_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define FG_DEVICE_CPU 0
#define FG_DEVICE_CUDA 1

struct fg_engine; /* opaque */

struct fg_engine_opts {
	int threads;        /* worker threads for the CPU path; 0 or 1 = calling thread only */
	int sliding_window; /* 0 = the config's; else overrides it (e.g. 188) */
	int max_seq;        /* 0 = min(config max_position_embeddings, 8192); the KV cache size */
	int device;         /* FG_DEVICE_CPU or FG_DEVICE_CUDA */
};

/* Loads model_dir: config.json (text keys at top level or under
 * "text_config"), generation_config.json when present (the stop set, as
 * transformers' generate() reads it) and model.safetensors (or a sharded
 * index). Weights stay
 * mapped, not copied. opts may be NULL (all defaults). Errors name the
 * config key that is unsupported or the tensor that is missing or has the
 * wrong shape. */
int fg_engine_load(struct fg_engine **out, const char *model_dir, const struct fg_engine_opts *opts,
		   struct fg_err *err);
void fg_engine_free(struct fg_engine *e);

/* Config accessors. */
int fg_engine_vocab_size(const struct fg_engine *e);
int fg_engine_max_seq(const struct fg_engine *e);        /* tokens one sequence may hold */
int fg_engine_max_position(const struct fg_engine *e);   /* config's max_position_embeddings */
int fg_engine_sliding_window(const struct fg_engine *e); /* the window in use */
int fg_engine_bos_id(const struct fg_engine *e);         /* -1 when the config has none */
/* The stop set (borrowed array, *n set): generation_config.json's
 * eos_token_id when the model folder has that file (transformers'
 * generate() uses it instead of config.json's), else config.json's
 * eos_token_id; fg_engine_is_eos tests one. docs/engine.md "Generation
 * config". */
const int32_t *fg_engine_eos_ids(const struct fg_engine *e, int *n);
int fg_engine_is_eos(const struct fg_engine *e, int32_t token);
/* 1 when the model folder has a generation_config.json (read at load). */
int fg_engine_has_gen_config(const struct fg_engine *e);
/* "" or the generation_config.json keys that would change the tokens and
 * that the engine does not apply, as "key=value, ..." (do_sample=true with
 * its temperature/top_k/top_p, num_beams, repetition_penalty, ...): callers
 * report them as not applied, FG_ENGINE_GREEDY_WHY. Borrowed. */
const char *fg_engine_gen_unapplied(const struct fg_engine *e);
#define FG_ENGINE_GREEDY_WHY "the engine decodes greedily (the argmax at every step)"
/* New tokens generation_config.json asks for after a prompt of n_prompt
 * tokens: max_new_tokens, else max_length - n_prompt (0 at least); -1 when
 * it names neither (or there is no such file). */
long long fg_engine_gen_max_new(const struct fg_engine *e, size_t n_prompt);
/* Tokens in the current sequence (the next token's position). */
int fg_engine_pos(const struct fg_engine *e);
/* Threads in use; the result never depends on it. */
int fg_engine_threads(const struct fg_engine *e);
/* Rows per prompt chunk on --device cuda (FG_PREFILL_CHUNK, engine/cuda.h);
 * 0 on the CPU or when prompts run token by token. */
int fg_engine_prefill_chunk(const struct fg_engine *e);
/* Greedy steps run chained on the GPU since the engine was loaded (engine/cuda.h
 * fg_g4_gpu_chain); 0 on the CPU or with FG_CHAIN=0. */
long long fg_engine_chained_steps(const struct fg_engine *e);
/* "bf16", "f32", "int4-g<group>" or "mixed": the body's linear weight format. */
const char *fg_engine_weight_format(const struct fg_engine *e);
/* "cpu", or the GPU's description when opts.device was FG_DEVICE_CUDA. */
const char *fg_engine_device(const struct fg_engine *e);
/* The GPU's identity (kernels/fg_kernels.h struct fg_kdevice: name, compute
 * capability, SMs, driver and CUDA versions) on the CUDA path;
 * FG_EUNSUPPORTED on the CPU path. */
struct fg_kdevice;
int fg_engine_gpu_info(const struct fg_engine *e, struct fg_kdevice *out, struct fg_err *err);

/* The bound model (config and mapped weights, engine/model.h), borrowed:
 * for the CUDA path and tools that need the weights the engine runs. */
struct fg_g4_model;
const struct fg_g4_model *fg_engine_model(const struct fg_engine *e);

/* Forgets the sequence: the next token is at position 0. */
void fg_engine_reset(struct fg_engine *e);

/* Appends n tokens to the sequence (prefill) and, when logits is not NULL,
 * writes the fp32 logits (after the final softcap) of every one of them:
 * logits[i * n_vocab + v]. When only the last position's logits are wanted,
 * pass last_only = 1 and a buffer of n_vocab floats. Fails with FG_EINVAL
 * when the sequence would exceed fg_engine_max_seq or an id is out of range. */
int fg_engine_forward_logits(struct fg_engine *e, const int32_t *ids, size_t n, int last_only,
			     float *logits, struct fg_err *err);

/* Scores ids: resets the sequence, feeds ids[0..n-1) in chunks of
 * FG_ENGINE_SCORE_CHUNK and calls cb(user, i, logits) for i = 1..n-1 with the
 * n_vocab logits (after the final softcap; borrowed) that ids[i] follows. A
 * nonzero cb return stops it and is returned. fg_engine_score_lp (verify's
 * perplexity, a server's prompt log-probabilities) passes over these rows
 * on the CPU path; on the GPU it computes the figures there instead. */
#define FG_ENGINE_SCORE_CHUNK 32
typedef int (*fg_engine_score_cb)(void *user, size_t i, const float *logits);
int fg_engine_score(struct fg_engine *e, const int32_t *ids, size_t n, fg_engine_score_cb cb, void *user,
		    struct fg_err *err);

/* Greedy generation. Resets the sequence, prefills prompt, then emits up to
 * max_new tokens, each the argmax of the previous step's logits (lowest id
 * wins a tie). cb gets each new token and the raw fp32 logits it was chosen
 * from (n_vocab floats, borrowed until cb returns) and returns nonzero to
 * stop early; cb may be NULL. The engine never stops by itself on an eos
 * token: callers that want that test fg_engine_is_eos in cb. */
typedef int (*fg_engine_token_cb)(void *user, int32_t token, const float *logits, int n_vocab);
int fg_engine_generate(struct fg_engine *e, const int32_t *prompt, size_t n_prompt, int max_new,
		       fg_engine_token_cb cb, void *user, struct fg_err *err);

/* Greedy generation as fg_engine_generate (same tokens), for callers that
 * need only the ids: cb gets logits = NULL. On the CUDA path the softcap and
 * the argmax (lowest id on ties, NaN never wins, as fg_engine_argmax) run on
 * the GPU and only the token id comes back; no logits leave the device. */
int fg_engine_generate_ids(struct fg_engine *e, const int32_t *prompt, size_t n_prompt, int max_new,
			   fg_engine_token_cb cb, void *user, struct fg_err *err);

/* Speculative decoding with a Gemma 4 assistant drafter (engine/draft.h;
 * docs/engine.md "Speculative decoding"). fg_engine_set_drafter loads the
 * assistant folder dir (config model_type "gemma4_assistant"), checks that it
 * fits this model, and from then on fg_engine_generate and
 * fg_engine_generate_ids decode in rounds: the drafter proposes up to k
 * (1..FG_ENGINE_MAX_DRAFT) tokens, the model checks them and keeps the
 * longest prefix it agrees with plus its own next token. The tokens are
 * exactly those of plain greedy decoding, whatever the drafter proposes;
 * only how many tokens one pass of the model yields changes. On the CUDA
 * path the check is one pass over all k + 1 rows (fg_g4_gpu_verify); on the
 * CPU path the model runs the rows one at a time and stops at the first
 * disagreement (the same work as plain greedy, plus the drafter's). dir NULL
 * or k 0 detaches the drafter.
 * top_k overrides the drafter's centroid top-k (the challenge's
 * CENTROID_TOP_K): with use_ordered_embeddings its head keeps the top_k best
 * of num_centroids token clusters and scores only their tokens. 0 keeps the
 * config's centroid_intermediate_top_k; else 1..min(num_centroids,
 * FG_ENGINE_MAX_CENTROID_TOP_K). It changes the drafts, never the tokens.
 * FG_EINVAL in one line when top_k is out of that range, or is given for a
 * drafter without a centroid head; the engine then keeps the drafter it had. */
#define FG_ENGINE_MAX_DRAFT 16
#define FG_ENGINE_MAX_CENTROID_TOP_K 64 /* engine/config.h FG_G4_CENTROID_MAX_K */
int fg_engine_set_drafter(struct fg_engine *e, const char *dir, int k, int top_k, struct fg_err *err);
/* Drafts per round in use; 0 without a drafter. */
int fg_engine_draft_tokens(const struct fg_engine *e);
/* The drafter's centroid top-k in use (its config's, or the override); 0
 * without a drafter or when the drafter has no centroid head. */
int fg_engine_draft_top_k(const struct fg_engine *e);
/* On the CUDA path the engine measures, in epochs of 16 tokens, whether
 * drafting or plain decode steps give more tokens per second here, runs the
 * faster, and re-measures the other every 32 epochs (the tokens are the same
 * either way); FG_SPEC_ADAPT=0 drafts every round. Counters since the drafter
 * was attached (or reset with fg_engine_spec_reset): rounds of drafting,
 * tokens drafted, drafts the model accepted, at[j] the rounds whose draft j +
 * 1 was accepted, and steps: plain decode steps taken instead of drafting. */
struct fg_engine_spec_stats {
	long long rounds, drafted, accepted, steps;
	long long at[FG_ENGINE_MAX_DRAFT];
};
void fg_engine_spec_stats(const struct fg_engine *e, struct fg_engine_spec_stats *out);
/* Tokens a drafting round yielded on average: 1 + accepted / rounds (1 before any round). */
double fg_engine_spec_tokens_per_round(const struct fg_engine_spec_stats *s);
void fg_engine_spec_reset(struct fg_engine *e);

/* logits[0..vocab) = -inf, then logits[keep[i]] = kept[i]: a pruned head's
 * K logits (fg_g4_model keep) as the full vocabulary's. */
void fg_engine_scatter_keep(float *logits, int vocab, const float *kept, const int32_t *keep, int n_keep);

/* Index of the largest value (lowest index on ties; NaN never wins). */
int32_t fg_engine_argmax(const float *logits, int n);

/* One alternative: an id and its log-probability. */
struct fg_engine_alt {
	int32_t id;
	float lp;
};
/* From one row of nv logits: the log-probability of id in *lp and the k most
 * likely ids in top[0..k) (most likely first, the lower id on ties), each as
 * logit - logsumexp (the exponentials in float, summed and subtracted in
 * double), and (rank not NULL) 1 + the number of ids more likely than id. A
 * logit of -inf (an id a pruned head cannot give) has -inf. */
void fg_engine_row_logprobs(const float *row, int nv, int32_t id, int k, float *lp, struct fg_engine_alt *top,
			    int32_t *rank);

/* Log-probabilities of one token, as fg_engine_row_logprobs gives them: lp
 * of the token, its rank, and the n_top (= min(k, vocabulary)) most likely
 * ids. */
#define FG_ENGINE_LP_TOP_MAX 20
struct fg_engine_lp {
	float lp;
	int32_t rank;
	int n_top;
	struct fg_engine_alt top[FG_ENGINE_LP_TOP_MAX];
};
/* cb(user, i, token, lp): the i-th new token of a generation, or ids[i] of a
 * scoring; nonzero stops and is returned. */
typedef int (*fg_engine_lp_cb)(void *user, size_t i, int32_t token, const struct fg_engine_lp *lp);
/* Greedy generation as fg_engine_generate_ids (the same tokens), each with
 * its log-probabilities and k (0..FG_ENGINE_LP_TOP_MAX) alternatives. On
 * the CUDA path they are computed beside the argmax (fg_k_row_logprobs):
 * only they leave the GPU, not the logits; with a drafter, over the
 * speculative verify's rows (the step's bits, so the same figures). */
int fg_engine_generate_lp(struct fg_engine *e, const int32_t *prompt, size_t n_prompt, int max_new, int k,
			  fg_engine_lp_cb cb, void *user, struct fg_err *err);
/* fg_engine_score's rows as log-probabilities: cb(user, i, ids[i], lp) for
 * i = 1..n-1, lp's rank being ids[i]'s. On the CUDA path the rows run in
 * prompt chunks with the head on every row (up to 64 rows; the bits of
 * decode steps; with FG_PREFILL_CHUNK=0 the speculative verify's 17), their
 * log-probabilities computed on the GPU. */
int fg_engine_score_lp(struct fg_engine *e, const int32_t *ids, size_t n, int k, fg_engine_lp_cb cb, void *user,
		       struct fg_err *err);

#endif
