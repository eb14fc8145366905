/* int4_gemm.c - GPU benchmark of fg_k_int4_gemm (prompt chunks) on Gemma 4
 * E4B's INT4 g128 matrices: q|k|v [3072][2560], o [2560][2048], gate|up
 * [20480][2560], down [2560][10240] (GeGLU input, as the engine runs it),
 * the per-layer input gate [256][2560] and projection [2560][256]. For rows
 * = 1, 8, 16, 32, 64 tokens: one fg_k_int4_gemm call against rows
 * one-vector launches (fg_k_int4_matvec m = 1, or fg_k_int4_matvec_geglu),
 * as token-by-token prefill runs them. Each matrix is uploaded in enough
 * copies (>= 160 MB together) that consecutive launches read different
 * copies, so the weights come from memory, not from the 50 MB L2, as they
 * do in a real step. Prints microseconds per token of each and their ratio,
 * the median of FG_BENCH_REPS (default 7) timings of FG_BENCH_ITERS
 * (default 20) calls. FG_BENCH_KIND=fma|mma|i8 (default i8) picks the INT4
 * kernel. FG_BENCH_SWEEP="tp,w,ns,ks,tw ..." (experiments) also times
 * the GEMM under each of those FG_I8_GEMM_TP, _W, _NS, _KS, _TW settings
 * ("d" or left out: the default), one line each; FG_BENCH_MAT=i and FG_BENCH_ROWS=r run only
 * matrix i (0..5) and r rows (for profilers). Built by `make BUILD=build build/bench/int4_gemm` where nvcc
 * exists. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fg_kernels.h"

#define BENCH_NAME "int4_gemm"
#include "bench/bench.h"

#define MAXC 600 /* copies of a matrix at most */

static struct fg_kctx *ctx;
static float *dput_f(size_t n, float lo, float hi)
{
	float *h = malloc(sizeof(float) * n);
	void *d;

	for (size_t i = 0; i < n; i++)
		h[i] = lo + (hi - lo) * (float)(rnd() & 0xffff) / 65536.0f;
	CK(fg_kmem_alloc(ctx, &d, sizeof(float) * n, &err));
	CK(fg_kmem_upload(ctx, d, h, sizeof(float) * n, &err));
	free(h);
	return d;
}

int main(void)
{
	static const struct {
		const char *name;
		int n, k, gg;
	} mats[] = {
		{"q|k|v 3072 x 2560", 3072, 2560, 0},     {"o 2560 x 2048", 2560, 2048, 0},
		{"gate|up 20480 x 2560", 20480, 2560, 0}, {"down 2560 x 10240 (geglu)", 2560, 10240, 1},
		{"ple gate 256 x 2560", 256, 2560, 0},    {"ple proj 2560 x 256", 2560, 256, 0},
	};
	static const int rowset[] = {1, 8, 16, 32, 64};
	int iters = 20, reps = 7, kind;
	const char *e;
	double tot_g[5] = {0}, tot_1[5] = {0}, tot_s[16][5] = {{0}};
	char sweep[16][32];
	int nsw = 0, only_m = -1, only_r = -1;

	if ((e = getenv("FG_BENCH_ITERS")))
		iters = (int)strtol(e, NULL, 10);
	if ((e = getenv("FG_BENCH_REPS")))
		reps = (int)strtol(e, NULL, 10);
	if ((kind = fg_int4_kind_named(getenv("FG_BENCH_KIND"))) < 0)
		kind = FG_INT4_I8; /* unset, or a name of no kernel */
	if ((e = getenv("FG_BENCH_MAT")))
		only_m = (int)strtol(e, NULL, 10);
	if ((e = getenv("FG_BENCH_ROWS")))
		only_r = (int)strtol(e, NULL, 10);
	if ((e = getenv("FG_BENCH_SWEEP"))) {
		while (*e && nsw < 16) {
			size_t l = strcspn(e, " ");

			if (l > 0 && l < sizeof(sweep[0])) {
				memcpy(sweep[nsw], e, l);
				sweep[nsw++][l] = 0;
			}
			e += l + (e[l] != 0);
		}
	}
	if (iters < 1 || reps < 1 || reps > 64) {
		fprintf(stderr, "int4_gemm: bad FG_BENCH_* settings\n");
		return 2;
	}
	if (fg_kctx_new(&ctx, &err)) {
		printf("int4_gemm: skipped: %s\n", err.msg);
		return 0;
	}
	fg_kctx_set_int4_kind(ctx, kind);
	printf("device: %s, int4 kind %s, g128, median of %d x %d calls\n", fg_kctx_device_name(ctx),
	       kind == FG_INT4_I8 ? "i8" : kind == FG_INT4_MMA ? "mma" : "fma", reps, iters);
	printf("%-26s %4s %12s %12s %7s\n", "matrix", "rows", "gemm us/tok", "m=1 us/tok", "ratio");
	for (size_t mi = 0; mi < sizeof(mats) / sizeof(mats[0]); mi++) {
		int n = mats[mi].n, k = mats[mi].k, gg = mats[mi].gg, G = 128, nc;
		size_t words = (size_t)n * (k / 8), groups = (size_t)n * (k / G);
		int32_t *p;
		uint16_t *sc;
		struct fg_kint4 **w;
		float *x, *x2, *y;

		if (only_m >= 0 && (int)mi != only_m)
			continue;
		p = malloc(4 * words), sc = malloc(2 * groups);
		for (size_t i = 0; i < words; i++)
			p[i] = (int32_t)(rnd() ^ (rnd() << 16));
		for (size_t i = 0; i < groups; i++)
			sc[i] = (uint16_t)(0x3c00 + (rnd() & 0x3ff)); /* bf16 in [0.0078, 0.0156) */
		nc = (int)(((size_t)160 << 20) / (words * 4 + groups * 2)) + 1;
		if (nc > MAXC)
			nc = MAXC;
		w = calloc((size_t)nc, sizeof(*w));
		for (int c = 0; c < nc; c++)
			CK(fg_kint4_new(ctx, &w[c], p, sc, n, k, G, 0, &err));
		x = dput_f((size_t)64 * k, -2, 2), x2 = dput_f((size_t)64 * k, -2, 2);
		CK(fg_kmem_alloc(ctx, (void **)&y, sizeof(float) * 64 * (size_t)n, &err));
		for (size_t ri = 0; ri < sizeof(rowset) / sizeof(rowset[0]); ri++) {
			int rows = rowset[ri], c = 0;
			double tg[64], t1[64], mg, m1;

			if (only_r > 0 && rows != only_r)
				continue;

			for (int r = 0; r < reps; r++) {
				for (int which = 0; which < 2; which++) {
					double ms;

					CK(fg_ktimer_start(ctx, &err));
					for (int it = 0; it < iters; it++) {
						if (which == 0) {
							CK(fg_k_int4_gemm(ctx, y, w[c], x, gg ? x2 : NULL, rows, &err));
							c = (c + 1) % nc;
							continue;
						}
						for (int t = 0; t < rows; t++) {
							float *yt = y + (size_t)t * n;
							const float *xt = x + (size_t)t * k, *x2t = x2 + (size_t)t * k;

							if (gg)
								CK(fg_k_int4_matvec_geglu(ctx, yt, w[c], xt, x2t, &err));
							else
								CK(fg_k_int4_matvec(ctx, yt, w[c], xt, 1, &err));
							c = (c + 1) % nc;
						}
					}
					CK(fg_ktimer_stop(ctx, &ms, &err));
					(which ? t1 : tg)[r] = ms * 1000.0 / iters / rows;
				}
			}
			mg = median(tg, reps), m1 = median(t1, reps);
			tot_g[ri] += mg, tot_1[ri] += m1;
			printf("%-26s %4d %12.3f %12.3f %6.2fx\n", mats[mi].name, rows, mg, m1, m1 / mg);
			fflush(stdout);
			for (int si = 0; si < nsw && rows > 1; si++) {
				static const char *names[5] = {"FG_I8_GEMM_TP", "FG_I8_GEMM_W", "FG_I8_GEMM_NS", "FG_I8_GEMM_KS",
							       "FG_I8_GEMM_TW"};
				const char *q = sweep[si];

				for (int f = 0; f < 5; f++) {
					char v[8];
					size_t l = strcspn(q, ",");

					snprintf(v, sizeof(v), "%.*s", (int)(l < 7 ? l : 7), q);
					if (!strcmp(v, "d") || !*v)
						unsetenv(names[f]);
					else
						setenv(names[f], v, 1);
					q += l + (q[l] != 0);
				}
				fg_kint4_i8_gemm_env();
				for (int r = 0; r < reps; r++) {
					double ms;

					CK(fg_ktimer_start(ctx, &err));
					for (int it = 0; it < iters; it++) {
						CK(fg_k_int4_gemm(ctx, y, w[c], x, gg ? x2 : NULL, rows, &err));
						c = (c + 1) % nc;
					}
					CK(fg_ktimer_stop(ctx, &ms, &err));
					tg[r] = ms * 1000.0 / iters / rows;
				}
				mg = median(tg, reps);
				tot_s[si][ri] += mg;
				printf("%-26s %4d %12.3f   sweep %s\n", mats[mi].name, rows, mg, sweep[si]);
				fflush(stdout);
				for (int f = 0; f < 5; f++)
					unsetenv(names[f]);
				fg_kint4_i8_gemm_env();
			}
		}
		for (int c = 0; c < nc; c++)
			fg_kint4_free(ctx, w[c]);
		free(w), free(p), free(sc);
		fg_kmem_free(ctx, x), fg_kmem_free(ctx, x2), fg_kmem_free(ctx, y);
	}
	printf("%-26s %4s %12s %12s %7s\n", "sum of the six (a layer)", "rows", "gemm us/tok", "m=1 us/tok", "ratio");
	for (size_t ri = 0; ri < sizeof(rowset) / sizeof(rowset[0]); ri++)
		printf("%-26s %4d %12.3f %12.3f %6.2fx\n", "", rowset[ri], tot_g[ri], tot_1[ri], tot_1[ri] / tot_g[ri]);
	for (int si = 0; si < nsw; si++)
		for (size_t ri = 1; ri < sizeof(rowset) / sizeof(rowset[0]); ri++)
			printf("%-26s %4d %12.3f   sweep %s\n", "", rowset[ri], tot_s[si][ri], sweep[si]);
	fg_kctx_free(ctx);
	return 0;
}
