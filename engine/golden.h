/* golden.h - golden transcripts: record a fixed prompt set decoded greedily,
 * replay it and say how closely this machine reproduces it; measure tokens/s
 * and perplexity the way verify reports them.
 *
 * Transcript (golden/transcript.json, canonical JSON):
 *   { "schema": 1, "max_new": N, "device": {...},
 *     "eos_token_ids": [the engine's stop set when recorded (fg_engine_eos_ids);
 *                       informational: every prompt runs N steps past it],
 *     "prompts": [ { "text": "..." (text prompts only), "ids": [prompt ids],
 *                    "tokens": [N generated ids],
 *                    "chain": [N hex digests] } ],
 *     "digest": "<hex>" }
 * chain[k] = sha256(chain[k-1] || the raw fp32 logits bytes of step k), with
 * chain[-1] = 32 zero bytes; the logits are the n_vocab floats (host byte
 * order, little-endian on every supported machine) the token was chosen from.
 * digest = sha256 over the concatenated last chain values of all prompts
 * (zeros for a prompt with no steps). */
#ifndef FG_GOLDEN_H
#define FG_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "engine/engine.h"
#include "err.h"

#define FG_GOLDEN_SCHEMA 1

/* A fixed, documented prompt set for a vocabulary of n_vocab ids: n prompts
 * of lengths 1, 7, 16, 33, ... made of ids from a fixed linear congruential
 * sequence (bos first when bos >= 0). Returns a JSON array of {"ids": [...]}. */
int fg_golden_default_prompts(cJSON **out, int n_vocab, int bos, int n, struct fg_err *err);

/* The same set with the first prompts (up to 8) as fixed English/code text,
 * encoded by tok (BOS first): {"text": "...", "ids": [...]}; the rest as in
 * fg_golden_default_prompts. FG_EINVAL when the tokenizer gives ids beyond
 * n_vocab (it does not belong to this model). Replays use the ids alone. */
struct fg_tokenizer;
int fg_golden_text_prompts(cJSON **out, const struct fg_tokenizer *tok, int n_vocab, int bos, int n,
			   struct fg_err *err);

/* Device identity for the engine's path: CPU: {"kind": "cpu", "cpu": model
 * name from /proc/cpuinfo, "arch", "engine_build"}; CUDA: {"kind": "cuda",
 * "gpu": fg_engine_device(e), "gpu_name", "compute_capability" ("9.0"),
 * "sm_count", "memory_bytes", "driver_version" (NVML's, or "unknown"),
 * "cuda_driver_api" and "cuda_runtime" ("12.8", or "unknown"),
 * "engine_build"}. */
int fg_golden_device(cJSON **out, const struct fg_engine *e, struct fg_err *err);

/* Whether two device identities are the same device class
 * (docs/formats/bundle.md): the same kind and, for CUDA, GPU name, compute
 * capability and SM count (read from "gpu" in transcripts older than those
 * fields); for the CPU, the arch (its result does not depend on AVX2).
 * CPU model, driver, CUDA versions and engine build are identity only. diffs (may be NULL) gets every differing field
 * as "field: recorded -> here", "; "-separated. */
struct fg_buf;
int fg_golden_device_compare(int *same, struct fg_buf *diffs, const cJSON *recorded,
			     const cJSON *here, struct fg_err *err);

/* Runs every prompt greedily for max_new tokens and returns the transcript. */
int fg_golden_record(cJSON **out, struct fg_engine *e, const cJSON *prompts, int max_new,
		     struct fg_err *err);

enum {
	FG_GOLDEN_MISMATCH = 0, /* a token differs */
	FG_GOLDEN_TOKENS = 1,   /* every token equal, some logits differ */
	FG_GOLDEN_LOGITS = 2,   /* every token and every logits chain equal */
};

struct fg_golden_result {
	int level;        /* FG_GOLDEN_* */
	int prompt;       /* first difference: prompt index (-1 when none) */
	int step;         /* ... and step within it */
	int chain_prompt; /* first logits-chain difference (-1 when none) */
	int chain_step;
	int32_t want, got;/* the tokens at the first token difference */
	size_t steps;     /* steps compared */
	int eos_same;     /* the transcript's eos_token_ids = this engine's stop set:
			   * 1 yes, 0 no, -1 not recorded (older transcripts) */
};

/* Replays transcript on e: same prompts, same max_new. Malformed
 * transcripts are FG_EFORMAT. */
int fg_golden_replay(struct fg_golden_result *res, struct fg_engine *e, const cJSON *transcript,
		     struct fg_err *err);

struct fg_golden_speed {
	double tps_median;  /* median over prompts of max_new / seconds */
	int completed;      /* prompts that produced all max_new tokens */
	int requests;       /* prompts timed */
	int max_new;
	int warmup;         /* one-token prompts run before timing */
};

/* The median of v[0..n) (sorted in place); 0 when n is 0. */
double fg_golden_median(double *v, int n);

/* Runs warmup one-token prompts, then times every prompt for max_new new
 * tokens; only prompts that completed count in the median. */
int fg_golden_speed(struct fg_golden_speed *s, struct fg_engine *e, const cJSON *prompts,
		    int warmup, int max_new, struct fg_err *err);

/* Perplexity of ids (teacher-forced: exp of the mean of -log softmax, each
 * from fg_engine_score_lp, summed in double) over at most
 * fg_engine_max_seq tokens; *scored gets the tokens scored. On the GPU the
 * rows and their log-softmax are computed there (the verify pass), as a
 * server's echo/logprobs request does. */
int fg_golden_perplexity(double *ppl, size_t *scored, struct fg_engine *e, const int32_t *ids,
			 size_t n, struct fg_err *err);

/* Reads a JSON array of integers into a new array (caller frees). */
int fg_golden_ids(int32_t **out, size_t *n, const cJSON *arr, struct fg_err *err);

#endif
