/* draft_head.c - GPU benchmark of the assistant drafter's head at E4B's
 * shape: fg_k_centroid_select (top 32 of 2048 cluster scores, 128 token ids
 * each) and fg_k_gather_matvec (4096 rows of 256 from a [262144][256] bf16
 * table, 2 MB a launch). Each launch reads one of 64 precomputed id sets
 * (128 MB in all, so rows mostly come from HBM, not L2). Prints µs per call
 * back to back (programmatic dependent launch, FG_BENCH_STEPS, default 200,
 * launches between two events), µs of one call alone (an event pair around
 * it), and the two chained, median of FG_BENCH_REPS (default 7) runs.
 * Built by `make BUILD=build build/bench/draft_head` where nvcc exists. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fg_kernels.h"

#define BENCH_NAME "draft_head"
#include "bench/bench.h"

enum { NC = 2048, TOPK = 32, PER = 128, VOCAB = NC * PER, K = 256, M = TOPK * PER, SETS = 64, MAXR = 32 };

static struct fg_kctx *ctx;

static void *dalloc(size_t n)
{
	void *d;

	CK(fg_kmem_alloc(ctx, &d, n, &err));
	return d;
}

static void *dput_b(const void *h, size_t n)
{
	void *d = dalloc(n);

	CK(fg_kmem_upload(ctx, d, h, n, &err));
	return d;
}

static float frnd(void)
{
	return (float)(rnd() & 0xffff) / 32768.0f - 1.0f;
}

int main(void)
{
	int steps = bench_env_int("FG_BENCH_STEPS", 200, 1, 100000), reps = bench_env_int("FG_BENCH_REPS", 7, 1, MAXR);
	size_t tb = (size_t)VOCAB * K * 2;
	uint16_t *ht = malloc(tb);
	int32_t *hids = malloc(sizeof(int32_t) * (size_t)SETS * M), *ho = malloc(sizeof(int32_t) * VOCAB);
	float hx[K], *hz = malloc(sizeof(float) * (size_t)SETS * NC);
	double t[5][MAXR];
	static const char *name[5] = {
		"gather matvec 4096 x 256 bf16, back to back", "gather matvec, one call alone",
		"centroid select 32 of 2048 x 128, back to back", "centroid select, one call alone",
		"select + gather chained, back to back"};
	char *dt;
	float *dx, *dz, *dy;
	int32_t *dids, *dorder, *dsel;

	if (fg_kctx_new(&ctx, &err)) {
		printf("draft_head: skipped: %s\n", err.msg);
		return 0;
	}
	printf("device: %s\n", fg_kctx_device_name(ctx));
	for (size_t i = 0; i < tb / 2; i++) {
		float f = 0.05f * frnd();
		uint32_t u;

		memcpy(&u, &f, 4);
		ht[i] = (uint16_t)(u >> 16);
	}
	for (int i = 0; i < SETS * M; i++)
		hids[i] = (int32_t)(rnd() % VOCAB);
	for (int i = 0; i < VOCAB; i++)
		ho[i] = (int32_t)(rnd() % VOCAB);
	for (int i = 0; i < K; i++)
		hx[i] = frnd();
	for (int i = 0; i < SETS * NC; i++)
		hz[i] = frnd();
	dt = dput_b(ht, tb), dx = dput_b(hx, sizeof(hx)), dids = dput_b(hids, sizeof(int32_t) * (size_t)SETS * M);
	dorder = dput_b(ho, sizeof(int32_t) * VOCAB), dz = dput_b(hz, sizeof(float) * (size_t)SETS * NC);
	dy = dalloc(sizeof(float) * M), dsel = dalloc(sizeof(int32_t) * M);
	CK(fg_k_gather_matvec(ctx, dy, dt, 1, dids, M, dx, K, &err)); /* warm up */
	CK(fg_k_centroid_select(ctx, dsel, dz, NC, TOPK, dorder, PER, &err));
	CK(fg_kctx_sync(ctx, &err));
	for (int r = 0; r < reps; r++)
		for (int c = 0; c < 5; c++) {
			int n = c == 1 || c == 3 ? 1 : steps;

			CK(fg_ktimer_start(ctx, &err));
			for (int s = 0; s < n; s++) {
				int set = (s + r * 7) % SETS;

				if (c == 0 || c == 1)
					CK(fg_k_gather_matvec(ctx, dy, dt, 1, dids + (size_t)set * M, M, dx, K, &err));
				if (c == 2 || c == 3 || c == 4)
					CK(fg_k_centroid_select(ctx, dsel, dz + (size_t)set * NC, NC, TOPK, dorder, PER,
								&err));
				if (c == 4)
					CK(fg_k_gather_matvec(ctx, dy, dt, 1, dsel, M, dx, K, &err));
			}
			CK(fg_ktimer_stop(ctx, &t[c][r], &err));
			t[c][r] *= 1000.0 / n;
		}
	for (int c = 0; c < 5; c++)
		printf("%-48s %8.2f us\n", name[c], median(t[c], reps));
	fg_kmem_free(ctx, dt), fg_kmem_free(ctx, dx), fg_kmem_free(ctx, dids), fg_kmem_free(ctx, dorder);
	fg_kmem_free(ctx, dz), fg_kmem_free(ctx, dy), fg_kmem_free(ctx, dsel);
	fg_kctx_free(ctx);
	free(ht), free(hids), free(ho), free(hz);
	return 0;
}
