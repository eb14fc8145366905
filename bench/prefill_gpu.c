/* prefill_gpu.c - GPU benchmark of prompt prefill with --device cuda: the
 * same N-token prompt read token by token through the decode step
 * (FG_PREFILL_CHUNK=0) and in chunks of each size given, side by side in one
 * process. For each setting the engine is loaded with that chunk size, runs
 * the prompt once as warm-up (module load, graph capture, first touch), then
 * FG_BENCH_REPS (default 5) times: fg_engine_forward_logits over the prompt
 * asking for the last position's logits only (the first N - 1 tokens are
 * prefill, the last one a decode step, as generation starts), median wall
 * time. Prints prompt tokens per second and the ratio to token by token,
 * and whether the last logits are bit-identical to the token-by-token run
 * (they must be: fg_kernels.h, "prompt chunks").
 *
 * usage: prefill_gpu MODEL_DIR [N [CHUNK ...]]  (defaults: 512; 16 64 128)
 * Built by `make build/bench/prefill_gpu` where nvcc exists; run through
 * bench/engine_gpu.sh or by hand on a GPU machine. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/model.h"

#define BENCH_NAME "prefill_gpu"
#include "bench/bench.h"

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : NULL;
	int n = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 512, nset = 0, reps = 5, vocab = 0;
	int chunks[16];
	double tps[16];
	float *ref = NULL, *lg = NULL;
	int32_t *prompt;

	if (!dir || n < 2) {
		fprintf(stderr, "usage: prefill_gpu MODEL_DIR [N [CHUNK ...]]\n");
		return 2;
	}
	reps = bench_env_int("FG_BENCH_REPS", 5, 1, 31);
	chunks[nset++] = 0;
	for (int i = 3; i < argc && nset < 16; i++)
		chunks[nset++] = (int)strtol(argv[i], NULL, 10);
	if (argc <= 3) {
		chunks[nset++] = 16;
		chunks[nset++] = 64;
		chunks[nset++] = 128;
	}
	prompt = malloc(sizeof(int32_t) * (size_t)n);
	for (int i = 0; i < n; i++)
		prompt[i] = 2 + (int32_t)(((unsigned)i * 7919u) % 200000u);
	printf("prefill of a %d-token prompt on %s (median of %d, after one warm-up run):\n", n, dir, reps);
	for (int s = 0; s < nset; s++) {
		struct fg_engine_opts o = {1, 0, 0, FG_DEVICE_CUDA};
		struct fg_engine *eng;
		double t[32];
		char v[16], lbl[32];

		snprintf(v, sizeof(v), "%d", chunks[s]);
		setenv("FG_PREFILL_CHUNK", v, 1);
		CK(fg_engine_load(&eng, dir, &o, &err));
		if (!vocab) {
			vocab = fg_engine_model(eng)->cfg.vocab;
			ref = malloc(sizeof(float) * (size_t)vocab);
			lg = malloc(sizeof(float) * (size_t)vocab);
		}
		for (int r = -1; r < reps; r++) {
			double t0;

			fg_engine_reset(eng);
			t0 = bench_now();
			CK(fg_engine_forward_logits(eng, prompt, (size_t)n, 1, s ? lg : ref, &err));
			if (r >= 0)
				t[r] = bench_now() - t0;
		}
		tps[s] = n / median(t, reps);
		if (chunks[s])
			snprintf(lbl, sizeof(lbl), "chunks of %d", fg_engine_prefill_chunk(eng));
		else
			snprintf(lbl, sizeof(lbl), "token by token");
		printf("  %-22s %9.1f prompt tokens/s  %7.3f ms/token  %6.2fx token by token%s (%s)\n", lbl, tps[s],
		       1e3 / tps[s], tps[s] / tps[0],
		       s ? (memcmp(lg, ref, sizeof(float) * (size_t)vocab) ? ", last logits DIFFER"
								     : ", last logits bit-identical")
			 : "",
		       fg_engine_device(eng));
		fg_engine_free(eng);
	}
	unsetenv("FG_PREFILL_CHUNK");
	free(prompt), free(ref), free(lg);
	return 0;
}
