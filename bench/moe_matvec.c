/* moe_matvec.c - GPU benchmark of fg_k_moe_matvec on Gemma 4 26B-A4B's expert
 * shapes (128 experts of 704, hidden 2816, top 8; bf16): one layer's gate|up
 * ([128 * 1408][2816]) and down ([128 * 2816][704]) resident, each launch
 * reading 8 experts of a different precomputed set (64 sets, so the 95 MB a
 * layer reads is mostly not in L2 from the launch before). Prints the read
 * bandwidth (fg_k_read over the gate|up matrix, the ceiling), then ms per
 * launch and GB/s of weights for gate|up, down, and the pair, as the engine
 * launches them (back to back, programmatic dependent launch), median of
 * FG_BENCH_REPS (default 5) runs of FG_BENCH_STEPS (default 200) launches.
 * Then the whole mixture as engine/cuda.c's moe_step launches it (router
 * norm, router matvec over bf16 [128][2816], fg_k_moe_route, norm, gate|up,
 * GeGLU, down, fg_k_moe_combine; each step from one of 64 inputs, so the
 * router picks different experts), and each of its other kernels alone.
 * Built by `make BUILD=build build/bench/moe_matvec` where nvcc exists. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fg_kernels.h"

#define BENCH_NAME "moe_matvec"
#include "bench/bench.h"

enum { E = 128, K = 8, H = 2816, MI = 704, SETS = 64 };

static struct fg_kctx *ctx;
static void *dalloc(size_t n)
{
	void *d;

	CK(fg_kmem_alloc(ctx, &d, n, &err));
	return d;
}

/* n bytes of bf16 in [-0.05, 0.05), a 16 MiB random block repeated */
static void *dfill_bf16(size_t n)
{
	size_t blk = (size_t)16 << 20;
	uint16_t *h = malloc(blk);
	char *d = dalloc(n);

	for (size_t i = 0; i < blk / 2; i++) {
		float f = 0.05f * ((float)(rnd() & 0xffff) / 32768.0f - 1.0f);
		uint32_t u;

		memcpy(&u, &f, 4);
		h[i] = (uint16_t)(u >> 16);
	}
	for (size_t o = 0; o < n; o += blk)
		CK(fg_kmem_upload(ctx, d + o, h, n - o < blk ? n - o : blk, &err));
	free(h);
	return d;
}

static void *dput_f(int n, float lo, float hi)
{
	float *h = malloc(sizeof(float) * (size_t)n);
	void *d = dalloc(sizeof(float) * (size_t)n);

	for (int i = 0; i < n; i++)
		h[i] = lo + (hi - lo) * (float)(rnd() & 0xffff) / 65536.0f;
	CK(fg_kmem_upload(ctx, d, h, sizeof(float) * (size_t)n, &err));
	free(h);
	return d;
}

/* The mixture of one layer as moe_step launches it, and its parts alone. */
static void chain(void *gu, void *dn, int steps, int reps)
{
	static const char *name[6] = {"whole mixture (8 launches)", "rmsnorm (router input)", "router matvec bf16 [128][2816]",
				      "moe route (128 experts, top 8)", "moe geglu (8 x 704)", "moe combine (8 x 2816)"};
	float *xs = dput_f(64 * H, -2, 2), *rs = dput_f(H, 0.5f, 1.5f), *pre2 = dput_f(H, 0.5f, 1.5f),
	      *p1 = dput_f(H, 0.5f, 1.5f), *p2 = dput_f(H, 0.5f, 1.5f), *es = dput_f(E, 0.5f, 1.5f),
	      *o = dput_f(H, -1, 1);
	void *rw = dfill_bf16((size_t)E * H * 2), *mx = dalloc(4 * H), *rlog = dalloc(4 * E), *midx = dalloc(4 * K),
	     *mw = dalloc(4 * K), *mgu = dalloc(4 * K * 2 * MI), *my = dalloc(4 * K * H);
	double t[6][32];

	for (int r = 0; r < reps; r++)
		for (int c = 0; c < 6; c++) {
			CK(fg_ktimer_start(ctx, &err));
			for (int s = 0; s < steps; s++) {
				const float *xi = xs + (size_t)(s % 64) * H;

				if (c == 0 || c == 1)
					CK(fg_k_rmsnorm(ctx, mx, xi, rs, 1, H, 1e-6f, &err));
				if (c == 0 || c == 2)
					CK(fg_k_bf16_matvec(ctx, rlog, rw, mx, NULL, E, H, &err));
				if (c == 0 || c == 3)
					CK(fg_k_moe_route(ctx, midx, mw, rlog, es, E, K, &err));
				if (c == 0)
					CK(fg_k_rmsnorm(ctx, mx, xi, pre2, 1, H, 1e-6f, &err));
				if (c == 0)
					CK(fg_k_moe_matvec(ctx, mgu, gu, 1, midx, E, mx, 0, K, 2 * MI, H, &err));
				if (c == 0 || c == 4)
					CK(fg_k_moe_geglu(ctx, mgu, K, MI, &err));
				if (c == 0)
					CK(fg_k_moe_matvec(ctx, my, dn, 1, midx, E, mgu, 2 * MI, K, H, MI, &err));
				if (c == 0 || c == 5)
					CK(fg_k_moe_combine(ctx, o, my, mw, K, p1, p2, H, 1e-6f, &err));
			}
			CK(fg_ktimer_stop(ctx, &t[c][r], &err));
			t[c][r] /= steps;
		}
	for (int c = 0; c < 6; c++)
		printf("%-32s %.4f ms\n", name[c], median(t[c], reps));
	fg_kmem_free(ctx, xs), fg_kmem_free(ctx, rs), fg_kmem_free(ctx, pre2), fg_kmem_free(ctx, p1),
		fg_kmem_free(ctx, p2), fg_kmem_free(ctx, es), fg_kmem_free(ctx, o), fg_kmem_free(ctx, rw),
		fg_kmem_free(ctx, mx), fg_kmem_free(ctx, rlog), fg_kmem_free(ctx, midx), fg_kmem_free(ctx, mw),
		fg_kmem_free(ctx, mgu), fg_kmem_free(ctx, my);
}

int main(void)
{
	int steps = 200, reps = 5, which;
	const char *e;
	size_t gu_b = (size_t)E * 2 * MI * H * 2, dn_b = (size_t)E * H * MI * 2;
	double per_read = 0, ms[3][32], rd[32];
	int32_t ids[SETS][K];
	void *gu, *dn, *x, *ygu, *ydn, *di, *sink;

	if ((e = getenv("FG_BENCH_STEPS")))
		steps = (int)strtol(e, NULL, 10);
	if ((e = getenv("FG_BENCH_REPS")))
		reps = (int)strtol(e, NULL, 10);
	if (steps < 1 || reps < 1 || reps > 32) {
		fprintf(stderr, "moe_matvec: bad FG_BENCH_* settings\n");
		return 2;
	}
	if (fg_kctx_new(&ctx, &err)) {
		printf("moe_matvec: skipped: %s\n", err.msg);
		return 0;
	}
	printf("device: %s\n", fg_kctx_device_name(ctx));
	gu = dfill_bf16(gu_b), dn = dfill_bf16(dn_b);
	for (int s = 0; s < SETS; s++) /* K distinct ids, ascending, as fg_k_moe_route writes them */
		for (int j = 0, q; j < K; j++) {
			int32_t v;

			do {
				v = (int32_t)(rnd() % E);
				for (q = 0; q < j && ids[s][q] != v; q++)
					;
			} while (q < j);
			for (q = j; q > 0 && ids[s][q - 1] > v; q--)
				ids[s][q] = ids[s][q - 1];
			ids[s][q] = v;
		}
	di = dalloc(sizeof(ids));
	CK(fg_kmem_upload(ctx, di, ids, sizeof(ids), &err));
	{
		float *hx = malloc(sizeof(float) * H);

		for (int i = 0; i < H; i++)
			hx[i] = (float)(rnd() & 0xffff) / 32768.0f - 1.0f;
		x = dalloc(sizeof(float) * H);
		CK(fg_kmem_upload(ctx, x, hx, sizeof(float) * H, &err));
		free(hx);
	}
	ygu = dalloc(sizeof(float) * K * 2 * MI), ydn = dalloc(sizeof(float) * K * H), sink = dalloc(64);
	CK(fg_k_moe_matvec(ctx, ygu, gu, 1, di, E, x, 0, K, 2 * MI, H, &err));
	CK(fg_k_moe_matvec(ctx, ydn, dn, 1, di, E, ygu, 2 * MI, K, H, MI, &err));
	CK(fg_kctx_sync(ctx, &err));
	for (int r = 0; r < reps; r++) {
		CK(fg_ktimer_start(ctx, &err));
		for (int t = 0; t < 4; t++)
			CK(fg_k_read(ctx, sink, gu, gu_b, &err));
		CK(fg_ktimer_stop(ctx, &rd[r], &err));
		rd[r] /= 4;
		for (which = 0; which < 3; which++) {
			CK(fg_ktimer_start(ctx, &err));
			for (int t = 0; t < steps; t++) {
				const int32_t *ix = (const int32_t *)di + (size_t)(t % SETS) * K;

				if (which != 1)
					CK(fg_k_moe_matvec(ctx, ygu, gu, 1, ix, E, x, 0, K, 2 * MI, H, &err));
				if (which != 0)
					CK(fg_k_moe_matvec(ctx, ydn, dn, 1, ix, E, ygu, 2 * MI, K, H, MI, &err));
			}
			CK(fg_ktimer_stop(ctx, &ms[which][r], &err));
			ms[which][r] /= steps;
		}
	}
	CK(fg_kctx_sync(ctx, &err));
	qsort(rd, (size_t)reps, sizeof(double), cmp_d);
	per_read = rd[reps / 2];
	printf("read sweep (fg_k_read, %.2f GB): %.3f ms, %.0f GB/s\n", gu_b / 1e9, per_read, gu_b / per_read / 1e6);
	for (which = 0; which < 3; which++) {
		static const char *name[3] = {"gate|up 8 x [1408][2816]", "down    8 x [2816][704] ",
					      "gate|up + down          "};
		double b = (which != 1 ? (double)K * 2 * MI * H * 2 : 0) + (which != 0 ? (double)K * H * MI * 2 : 0), m;

		qsort(ms[which], (size_t)reps, sizeof(double), cmp_d);
		m = ms[which][reps / 2];
		printf("%s: %.4f ms a launch%s, %.1f MB of weights, %.0f GB/s (%.0f %% of the sweep)\n", name[which], m,
		       which == 2 ? " pair" : "", b / 1e6, b / m / 1e6, 100.0 * (b / m) / (gu_b / per_read));
	}
	chain(gu, dn, steps, reps);
	fg_kmem_free(ctx, gu), fg_kmem_free(ctx, dn), fg_kmem_free(ctx, x), fg_kmem_free(ctx, ygu),
		fg_kmem_free(ctx, ydn), fg_kmem_free(ctx, di), fg_kmem_free(ctx, sink);
	fg_kctx_free(ctx);
	return 0;
}
