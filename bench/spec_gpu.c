/* spec_gpu.c - GPU benchmark of speculative decoding's parts (engine/cuda.h):
 * on a target checkpoint, one decode step with the head (the argmax only
 * downloaded) against the verify pass of T rows (T = 1, 2, 4, 8, 16:
 * fg_g4_gpu_verify alone, and followed by fg_g4_gpu_accept of all T rows),
 * at one position after a prompt; with an assistant checkpoint, one round of
 * k drafts (fg_g4_gpu_draft) for k = 1, 4, 8 (FG_CUDA_GRAPH=0: launched one
 * by one, else replayed as a CUDA graph per k). Every figure is the median
 * wall time of FG_BENCH_REPS (default 21) calls after warm-ups; each call
 * ends synchronized (an int downloaded). It also checks that the verify's
 * first row chose what the step chose at that position.
 *
 * usage: spec_gpu TARGET_DIR [ASSISTANT_DIR [PROMPT_TOKENS]]  (default 256)
 * Built by `make build/bench/spec_gpu` where nvcc exists; run it by hand on
 * a GPU machine (bench/engine_gpu.sh's checkpoint serves as the target). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cuda.h"
#include "engine/model.h"
#include "engine/rope.h"

#define BENCH_NAME "spec_gpu"
#include "bench/bench.h"

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : NULL, *adir = argc > 2 && *argv[2] ? argv[2] : NULL;
	int n = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 256, reps, i, r;
	static const int Ts[] = {1, 2, 4, 8, 16}, ks[] = {1, 4, 8};
	struct fg_g4_model *m, *am = NULL;
	struct fg_g4_gpu *g;
	struct fg_g4_gpu_draft *d = NULL;
	float *inv[2];
	int32_t *prompt, ids[FG_DRAFT_MAX_K + 1], best[FG_DRAFT_MAX_K + 1], b = 0, last;
	double t[64], step_ms;

	if (!dir || n < 2 || n > 4000) {
		fprintf(stderr, "usage: spec_gpu TARGET_DIR [ASSISTANT_DIR [PROMPT_TOKENS]]\n");
		return 2;
	}
	reps = bench_env_int("FG_BENCH_REPS", 21, 1, 63);
	CK(fg_g4_model_load(&m, dir, &err));
	inv[0] = malloc(sizeof(float) * (size_t)m->cfg.head_dim);
	inv[1] = malloc(sizeof(float) * (size_t)m->cfg.global_head_dim);
	fg_g4_rope_table(inv[0], &m->cfg.rope[0], m->cfg.head_dim);
	fg_g4_rope_table(inv[1], &m->cfg.rope[1], m->cfg.global_head_dim);
	CK(fg_g4_gpu_new(&g, m, (const float *const *)inv, m->cfg.sliding_window, 4096, &err));
	if (adir) { /* before the sequence: it copies the sliding keys it reads from then on */
		CK(fg_g4_model_load(&am, adir, &err));
		if (fg_g4_gpu_draft_new(&d, g, am, &err))
			printf("drafter %s: %s\n", adir, err.msg);
	}
	prompt = malloc(sizeof(int32_t) * (size_t)n);
	for (i = 0; i < n; i++)
		prompt[i] = 2 + (int32_t)(((unsigned)i * 7919u) % (unsigned)(m->cfg.vocab - 2));
	CK(fg_g4_gpu_prefill(g, prompt, n - 1, 0, &err));
	last = prompt[n - 1];
	/* warm-up: module load, the graph's capture */
	for (i = 0; i < 5; i++)
		CK(fg_g4_gpu_step(g, last, n - 1, NULL, &b, &err));
	for (r = 0; r < reps; r++) {
		double t0 = bench_now();

		CK(fg_g4_gpu_step(g, last, n - 1, NULL, &b, &err));
		t[r] = bench_now() - t0;
	}
	step_ms = 1e3 * median(t, reps);
	printf("target %s (%s) on %s, position %d, median of %d\n", dir, m->format, fg_g4_gpu_device(g), n - 1, reps);
	printf("  decode step (head, argmax)            %8.3f ms\n", step_ms);
	ids[0] = last;
	for (i = 1; i <= FG_DRAFT_MAX_K; i++)
		ids[i] = 2 + (int32_t)(((unsigned)i * 104729u) % (unsigned)(m->cfg.vocab - 2));
	for (size_t s = 0; s < sizeof(Ts) / sizeof(Ts[0]); s++) {
		int T = Ts[s];
		double va, vb;

		for (i = 0; i < 3; i++)
			CK(fg_g4_gpu_verify(g, ids, T, n - 1, best, &err));
		for (r = 0; r < reps; r++) {
			double t0 = bench_now();

			CK(fg_g4_gpu_verify(g, ids, T, n - 1, best, &err));
			t[r] = bench_now() - t0;
		}
		va = 1e3 * median(t, reps);
		for (r = 0; r < reps; r++) {
			double t0 = bench_now();

			CK(fg_g4_gpu_verify(g, ids, T, n - 1, best, &err));
			CK(fg_g4_gpu_accept(g, T, &err));
			t[r] = bench_now() - t0;
		}
		vb = 1e3 * median(t, reps);
		printf("  verify %2d rows %8.3f ms (%5.2f steps), + accept %8.3f ms (%5.2f steps), %6.3f ms a row; "
		       "row 0 %s the step's token\n",
		       T, va, va / step_ms, vb, vb / step_ms, vb / T, best[0] == b ? "chose" : "DIFFERS from");
	}
	/* the position's own row back in the caches for the drafter */
	CK(fg_g4_gpu_step(g, last, n - 1, NULL, &b, &err));
	if (d) {
		int32_t out[FG_DRAFT_MAX_K];

		printf("  drafter %s (%s): hidden %d, %d layers, %s head\n", adir, am->format, am->cfg.hidden,
		       am->cfg.n_layers, am->cfg.ordered_emb ? "centroid-masked" : "full");
		for (size_t s = 0; s < sizeof(ks) / sizeof(ks[0]); s++) {
			int k = ks[s];
			double ms;

			for (i = 0; i < 3; i++)
				CK(fg_g4_gpu_draft(d, b, n, k, out, &err));
			for (r = 0; r < reps; r++) {
				double t0 = bench_now();

				CK(fg_g4_gpu_draft(d, b, n, k, out, &err));
				t[r] = bench_now() - t0;
			}
			ms = 1e3 * median(t, reps);
			printf("  draft %d tokens %8.3f ms (%6.3f ms a draft step, %5.3f decode steps)\n", k, ms, ms / k,
			       ms / k / step_ms);
		}
	}
	fg_g4_gpu_draft_free(d);
	fg_g4_gpu_free(g);
	fg_g4_model_free(am);
	fg_g4_model_free(m);
	free(inv[0]), free(inv[1]), free(prompt);
	return 0;
}
