/* cuda.h - the Gemma 4 decode step on the GPU, for the engine's
 * FG_DEVICE_CUDA path: the loaded model's weights copied to the device (INT4
 * repacked into the kernels' tile layout, q|k|v and gate|up concatenated),
 * a device KV cache, and one token's forward pass built from the kernels of
 * kernels/fg_kernels.h, captured once as a CUDA graph and replayed.
 *
 * The math is engine/cpu's, operation for operation (fp32 activations and
 * accumulation, the same RoPE table); sums run in another order, so logits
 * agree with the CPU path within rounding, and bit for bit between runs. */
#ifndef FG_ENGINE_CUDA_H
#define FG_ENGINE_CUDA_H

#include <stdint.h>

#include "engine/draft.h"
#include "engine/model.h"
#include "err.h"

struct fg_g4_gpu;

/* Uploads m (borrowed; must outlive the result). inv[2] are the RoPE inverse
 * frequency tables by layer type (fg_g4_rope_table), window the sliding
 * window in use, max_seq the cache size. Embedding tables in F16 or F32 are
 * widened to f32 on the device (4 bytes an element). FG_EUNSUPPORTED names
 * what this path cannot run; FG_EDEVICE when there is no GPU, FG_ENOMEM when
 * the GPU lacks the memory (the error names the tensor). */
int fg_g4_gpu_new(struct fg_g4_gpu **out, const struct fg_g4_model *m, const float *const inv[2], int window,
		  int max_seq, struct fg_err *err);
void fg_g4_gpu_free(struct fg_g4_gpu *g);

/* One token id at position pos (the cache holds positions < pos); a
 * multimodal placeholder id is embedded as pad (fg_g4_input_id). When
 * logits is not NULL it receives the softcapped logits [vocab]; *best (may be
 * NULL) the argmax, lowest id on ties. */
int fg_g4_gpu_step(struct fg_g4_gpu *g, int32_t id, int pos, float *logits, int32_t *best, struct fg_err *err);
/* The step with the head, its argmax into *best (may be NULL), and the
 * log-probabilities of its row into *lp (kernels/fg_kernels.h
 * fg_k_row_logprobs: the lse, the argmax's log-probability, the k <=
 * FG_K_LP_TOP_MAX best), computed on the GPU: no logits leave it. */
struct fg_klp;
/* Greedy steps chained on the GPU from id at pos: up to n steps, each
 * one's token passed to cb in order until cb returns nonzero; *done
 * receives the steps counted (positions pos .. pos + *done - 1 consumed).
 * The tokens are fg_g4_gpu_step's, but the next step is queued before the
 * host reads a token (so the GPU does not wait for the host between
 * steps). Only once fg_g4_gpu_chain_ready: the step's graphs captured
 * (after a first step) and mapped host memory to hand the tokens over
 * (FG_CHAIN=0 turns chaining off). */
int fg_g4_gpu_chain_ready(const struct fg_g4_gpu *g);
long long fg_g4_gpu_chained(const struct fg_g4_gpu *g); /* steps counted by fg_g4_gpu_chain so far */
int fg_g4_gpu_chain(struct fg_g4_gpu *g, int32_t id, int pos, int n, int (*cb)(void *user, int32_t tok), void *user,
		    int *done, struct fg_err *err);
int fg_g4_gpu_step_lp(struct fg_g4_gpu *g, int32_t id, int pos, int k, int32_t *best, struct fg_klp *lp,
		      struct fg_err *err);

/* n prompt tokens at positions pos, pos + 1, ... whose logits nobody reads
 * (the cache holds positions < pos): in chunks of up to FG_PREFILL_CHUNK rows
 * (default 64; 0 = one fg_g4_gpu_step each), each chunk's matrices read once
 * (a mixture of experts' experts row by row). The caches end up with the
 * same bits as n steps would leave (fg_kernels.h, "prompt chunks"). */
int fg_g4_gpu_prefill(struct fg_g4_gpu *g, const int32_t *ids, int n, int pos, struct fg_err *err);
/* The rows per chunk in use (0: token by token). */
int fg_g4_gpu_chunk(const struct fg_g4_gpu *g);

/* ---- speculative decoding (engine/draft.h has the method) ----
 *
 * The target's verify pass: rows ids[0..T) (1 <= T <= FG_DRAFT_MAX_K + 1)
 * at positions pos, pos + 1, ... (the cache holds positions < pos), the head
 * on every row: best[r] = the argmax after row r, the bits fg_g4_gpu_step
 * gives at that position after rows 0..r. The caches are NOT written:
 * fg_g4_gpu_accept(g, n) then stores rows 0..n-1 (1 <= n <= T) as n steps
 * would have, and leaves row n-1's final-normed hidden state where the
 * drafter reads it (as a step with the head does). Anything but accept
 * after verify forgets the verify. */
int fg_g4_gpu_verify(struct fg_g4_gpu *g, const int32_t *ids, int T, int pos, int32_t *best, struct fg_err *err);
/* fg_g4_gpu_verify, and (lp not NULL) lp[r] the log-probabilities of row
 * r with its argmax as the wanted id and k alternatives, computed on the
 * GPU (fg_g4_gpu_step_lp's figures for that row). */
struct fg_klp;
int fg_g4_gpu_verify_lp(struct fg_g4_gpu *g, const int32_t *ids, int T, int pos, int k, int32_t *best,
			struct fg_klp *lp, struct fg_err *err);
int fg_g4_gpu_accept(struct fg_g4_gpu *g, int n, struct fg_err *err);
/* Scores T (1 <= T <= fg_g4_gpu_score_rows) rows: ids[0..T) at positions
 * pos, pos + 1, ... in one prompt chunk with the head on every row (or,
 * prompts running token by token, one verify pass), then lp[r] = the
 * log-probabilities of the row after ids[r] (the bits a step there gives),
 * next[r] its wanted token id (rank and log-probability; -inf when a
 * pruned head lacks it) and its k best; the rows go into the caches, as T
 * steps. The first call allocates the chunk's logits (chunk x head rows
 * floats). */
int fg_g4_gpu_score_rows(const struct fg_g4_gpu *g);
int fg_g4_gpu_score(struct fg_g4_gpu *g, const int32_t *ids, int T, int pos, const int32_t *next, int k,
		    struct fg_klp *lp, struct fg_err *err);

/* An assistant drafter on the GPU, reading target g's device caches and its
 * last final-normed hidden state (of the last fg_g4_gpu_step with the head,
 * or of fg_g4_gpu_accept): what fg_draft_cpu_propose computes, within
 * rounding. a must outlive the result; checks as fg_draft_cpu_new. */
struct fg_g4_gpu_draft;
int fg_g4_gpu_draft_new(struct fg_g4_gpu_draft **out, struct fg_g4_gpu *g, const struct fg_g4_model *a,
			struct fg_err *err);
void fg_g4_gpu_draft_free(struct fg_g4_gpu_draft *d);
/* k drafts after `last` (the token at position pos, which the target has
 * not run) into out [k]. */
int fg_g4_gpu_draft(struct fg_g4_gpu_draft *d, int32_t last, int pos, int k, int32_t *out, struct fg_err *err);
/* The logits [vocab] of the last round's last draft step, as
 * fg_draft_cpu_propose gives them (the masked head's unselected tokens at
 * min(selected) - 1), for tests. The drafter copies the target's sliding
 * keys and values it reads from fg_g4_gpu_draft_new on: make it before the
 * sequences it drafts for. */
int fg_g4_gpu_draft_logits(struct fg_g4_gpu_draft *d, float *out, struct fg_err *err);

/* "NVIDIA H200 (sm_90, ...)"; borrowed. */
const char *fg_g4_gpu_device(const struct fg_g4_gpu *g);
/* The device's identity (name, compute capability, SMs, driver and CUDA
 * versions); see fg_kctx_device_info. */
struct fg_kdevice;
int fg_g4_gpu_info(const struct fg_g4_gpu *g, struct fg_kdevice *out, struct fg_err *err);

#endif
