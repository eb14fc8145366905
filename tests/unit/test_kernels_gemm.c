/* test_kernels_gemm.c - fg_k_int4_gemm (prompt chunks) against the decode
 * step's one-vector launches, bit for bit.
 *
 * For every INT4 kind (fma, mma, i8) and group (32, 64, 128, 256), awkward
 * shapes (n and k off the tile sizes, K splits picked and explicit) and row
 * counts 1, 2, 3, 8, 17, 64: row r of one fg_k_int4_gemm call must equal,
 * byte for byte, fg_k_int4_matvec (m = 1) on row r, and in the GeGLU form
 * fg_k_int4_matvec_geglu on gate and up row r. The activations hold a row
 * of zeros, one of huge and tiny (subnormal) magnitudes, one with a NaN and
 * one with an Inf. A chain of two GEMMs (the second reads the first's
 * output) checks that the split kernel waits for its input. Bad arguments
 * give FG_EINVAL with a message. Without a GPU the GPU part prints one
 * "ok ... # skip" line, unless FG_REQUIRE_CUDA=1 asks for a failure
 * instead. `test_kernels_gemm --small` runs only the small shapes (for
 * compute-sanitizer). The i8 kind's small shapes run again under launch
 * shapes forced by FG_I8_GEMM_* (fg_kint4_i8_gemm_env). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fg_kernels.h"
#include "tap.h"
#define GPU_TEST_SEED 0x2545F4914F6CDD1Dull
#include "gpu_test.h"

static const char *kind_name;

/* rows of k activations: row r % 6 == 1 zeros, == 2 huge and tiny
 * (subnormal) magnitudes, == 3 one NaN, == 4 one Inf, else uniform in
 * [-3, 3). */
static float *acts(int rows, int k)
{
	float *x = malloc(sizeof(float) * (size_t)rows * k);

	for (int r = 0; r < rows; r++) {
		float *v = x + (size_t)r * k;

		for (int e = 0; e < k; e++) {
			switch (r % 6) {
			case 1: v[e] = 0.0f; break;
			case 2: {
				uint32_t s = rnd() % 4;

				v[e] = s == 0 ? frand(-1e30f, 1e30f) : s == 1 ? frand(-1e-39f, 1e-39f)
							 : s == 2 ? frand(-1e-20f, 1e-20f) : frand(-3, 3);
				break;
			}
			default: v[e] = frand(-3, 3); break;
			}
		}
		if (r % 6 == 3)
			v[rnd() % k] = nanf("");
		if (r % 6 == 4)
			v[rnd() % k] = (rnd() & 1) ? INFINITY : -INFINITY;
	}
	return x;
}

/* "" or where the first difference is */
static const char *first_diff(char *buf, size_t len, const float *a, const float *b, int rows, int n)
{
	buf[0] = 0;
	for (size_t i = 0; i < (size_t)rows * n; i++)
		if (memcmp(a + i, b + i, 4)) {
			snprintf(buf, len, " (first at row %zu col %zu: %.9g vs %.9g)", i / n, i % n, a[i], b[i]);
			break;
		}
	return buf;
}

/* The GEMM against rows one-vector launches on matrix w, plain and (gg) GeGLU. */
static void check_rows(const struct fg_kint4 *w, int rows, int gg, const char *what)
{
	int n = w->n, k = w->k;
	size_t ny = (size_t)rows * n;
	float *x = acts(rows, k), *x2 = gg ? acts(rows, k) : NULL;
	float *got = malloc(sizeof(float) * ny), *want = malloc(sizeof(float) * ny);
	float *dx = dput(x, sizeof(float) * (size_t)rows * k), *dx2 = gg ? dput(x2, sizeof(float) * (size_t)rows * k) : NULL;
	float *dy = NULL, *dr = NULL;
	int rc = !dx || (gg && !dx2);
	char buf[160];

	if (!rc)
		rc = fg_kmem_alloc(ctx, (void **)&dy, sizeof(float) * ny, &gerr) ||
		     fg_kmem_alloc(ctx, (void **)&dr, sizeof(float) * ny, &gerr) ||
		     fg_kmem_fill(ctx, dy, 0xff, sizeof(float) * ny, &gerr) ||
		     fg_kmem_fill(ctx, dr, 0xfe, sizeof(float) * ny, &gerr);
	for (int r = 0; r < rows && !rc; r++)
		rc = gg ? fg_k_int4_matvec_geglu(ctx, dr + (size_t)r * n, w, dx + (size_t)r * k, dx2 + (size_t)r * k, &gerr)
			: fg_k_int4_matvec(ctx, dr + (size_t)r * n, w, dx + (size_t)r * k, 1, &gerr);
	if (!rc)
		rc = fg_k_int4_gemm(ctx, dy, w, dx, dx2, rows, &gerr) || fg_kctx_sync(ctx, &gerr) ||
		     fg_kmem_download(ctx, got, dy, sizeof(float) * ny, &gerr) ||
		     fg_kmem_download(ctx, want, dr, sizeof(float) * ny, &gerr);
	if (rc)
		ok(0, "int4 %s gemm%s %s rows %d: %s", kind_name, gg ? " geglu" : "", what, rows, gerr.msg);
	else
		ok(!memcmp(got, want, sizeof(float) * ny), "int4 %s gemm%s %s rows %d: bit-identical to %d one-vector launches%s",
		   kind_name, gg ? " geglu" : "", what, rows, rows, first_diff(buf, sizeof(buf), got, want, rows, n));
	fg_kmem_free(ctx, dx), fg_kmem_free(ctx, dx2), fg_kmem_free(ctx, dy), fg_kmem_free(ctx, dr);
	free(x), free(x2), free(got), free(want);
}

static void gpu_gemm(int small)
{
	/* n, k, group, splits (0: the plan's own), big */
	static const int cases[][5] = {
		{1, 64, 32, 0, 0},       {15, 136, 64, 0, 0},     {16, 64, 128, 0, 0},      {17, 136, 256, 0, 0},
		{33, 2560, 32, 0, 0},    {17, 2560, 64, 3, 0},    {47, 1024, 128, 5, 0},    {16, 2048, 256, 2, 0},
		{2568, 2560, 128, 0, 1}, {2560, 10240, 128, 0, 1}, {10240, 2560, 32, 0, 1}, {2563, 10240, 64, 7, 1},
		{1000, 2560, 256, 0, 1}, {256, 2560, 128, 0, 1},   {2560, 256, 128, 0, 1},
	};
	static const int rowset[] = {1, 2, 3, 8, 17, 64};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int n = cases[c][0], k = cases[c][1], G = cases[c][2], splits = cases[c][3], big = cases[c][4];
		int32_t *p;
		uint16_t *sc;
		struct fg_kint4 *w = NULL;
		char what[96];

		if (big && small)
			continue;
		/* the loop kinds are the one-vector launch by construction: fewer shapes */
		if (fg_kctx_int4_kind(ctx) != FG_INT4_I8 && c % 3)
			continue;
		int4_rand(&p, &sc, n, k, G);
		if (fg_kint4_new(ctx, &w, p, sc, n, k, G, splits, &gerr)) {
			ok(0, "int4 %s matrix %d x %d group %d: %s", kind_name, n, k, G, gerr.msg);
			free(p), free(sc);
			continue;
		}
		{
			int slice = 0, warps = 0, sp = fg_kint4_i8_plan(w, 1, &slice, &warps);

			snprintf(what, sizeof(what), "n %d k %d group %d splits %d (m = 1 plan: %d x %d units, %d warps)", n, k,
				 G, splits, sp, slice, warps);
		}
		for (size_t r = 0; r < sizeof(rowset) / sizeof(rowset[0]); r++) {
			if (big && (rowset[r] == 2 || rowset[r] == 8))
				continue;
			check_rows(w, rowset[r], 0, what);
			if (rowset[r] == 3 || rowset[r] == 17 || (rowset[r] == 64 && !small))
				check_rows(w, rowset[r], 1, what);
		}
		fg_kint4_free(ctx, w);
		free(p), free(sc);
	}
}

/* y2 = W2 (W1 x) as two GEMMs back to back against the one-vector chain. */
static void gpu_chain(void)
{
	int rows = 17, n1 = 256, k1 = 2560, n2 = 2560;
	int32_t *p1, *p2;
	uint16_t *s1, *s2;
	struct fg_kint4 *w1 = NULL, *w2 = NULL;
	float *x = acts(rows, k1), *got = malloc(sizeof(float) * rows * n2), *want = malloc(sizeof(float) * rows * n2);
	float *dx = dput(x, sizeof(float) * rows * k1), *dh = NULL, *dy = NULL, *dh1 = NULL, *dy1 = NULL;
	int rc;
	char buf[160];

	int4_rand(&p1, &s1, n1, k1, 128);
	int4_rand(&p2, &s2, n2, n1, 64);
	rc = !dx || fg_kint4_new(ctx, &w1, p1, s1, n1, k1, 128, 0, &gerr) ||
	     fg_kint4_new(ctx, &w2, p2, s2, n2, n1, 64, 0, &gerr) ||
	     fg_kmem_alloc(ctx, (void **)&dh, sizeof(float) * rows * n1, &gerr) ||
	     fg_kmem_alloc(ctx, (void **)&dy, sizeof(float) * rows * n2, &gerr) ||
	     fg_kmem_alloc(ctx, (void **)&dh1, sizeof(float) * rows * n1, &gerr) ||
	     fg_kmem_alloc(ctx, (void **)&dy1, sizeof(float) * rows * n2, &gerr);
	for (int r = 0; r < rows && !rc; r++)
		rc = fg_k_int4_matvec(ctx, dh1 + (size_t)r * n1, w1, dx + (size_t)r * k1, 1, &gerr) ||
		     fg_k_int4_matvec(ctx, dy1 + (size_t)r * n2, w2, dh1 + (size_t)r * n1, 1, &gerr);
	if (!rc)
		rc = fg_k_int4_gemm(ctx, dh, w1, dx, NULL, rows, &gerr) || fg_k_int4_gemm(ctx, dy, w2, dh, NULL, rows, &gerr) ||
		     fg_kctx_sync(ctx, &gerr) || fg_kmem_download(ctx, got, dy, sizeof(float) * rows * n2, &gerr) ||
		     fg_kmem_download(ctx, want, dy1, sizeof(float) * rows * n2, &gerr);
	if (rc)
		ok(0, "int4 %s gemm chain: %s", kind_name, gerr.msg);
	else
		ok(!memcmp(got, want, sizeof(float) * rows * n2),
		   "int4 %s gemm chain (256 x 2560 then 2560 x 256, 17 rows): bit-identical to the one-vector chain%s",
		   kind_name, first_diff(buf, sizeof(buf), got, want, rows, n2));
	fg_kint4_free(ctx, w1), fg_kint4_free(ctx, w2);
	fg_kmem_free(ctx, dx), fg_kmem_free(ctx, dh), fg_kmem_free(ctx, dy), fg_kmem_free(ctx, dh1),
		fg_kmem_free(ctx, dy1);
	free(p1), free(p2), free(s1), free(s2), free(x), free(got), free(want);
}

static void gpu_errors(void)
{
	struct fg_kint4 *w = NULL;
	int32_t p[2] = {0, 0};
	uint16_t s[1] = {0};
	int rc;

	if (fg_kint4_new(ctx, &w, p, s, 1, 16, 32, 0, &gerr)) {
		ok(0, "int4 matrix 1 x 16: %s", gerr.msg);
		return;
	}
	gerr.msg[0] = 0;
	rc = fg_k_int4_gemm(ctx, NULL, w, NULL, NULL, 0, &gerr);
	ok(rc == FG_EINVAL && strstr(gerr.msg, "rows"), "int4 %s gemm refuses rows = 0 (FG_EINVAL): %s", kind_name,
	   gerr.msg);
	gerr.msg[0] = 0;
	rc = fg_k_int4_gemm(ctx, NULL, w, NULL, NULL, -3, &gerr);
	ok(rc == FG_EINVAL && gerr.msg[0], "int4 %s gemm refuses rows = -3 (FG_EINVAL): %s", kind_name, gerr.msg);
	gerr.msg[0] = 0;
	rc = fg_k_int4_gemm(ctx, NULL, w, (const float *)(uintptr_t)8, NULL, 2, &gerr);
	ok(rc == FG_EINVAL && gerr.msg[0], "int4 %s gemm refuses activations not 16-byte aligned: %s", kind_name,
	   gerr.msg);
	gerr.msg[0] = 0;
	rc = fg_k_int4_gemm(ctx, NULL, NULL, NULL, NULL, 2, &gerr);
	ok(rc == FG_EINVAL && gerr.msg[0], "int4 gemm refuses no matrix: %s", gerr.msg);
	fg_kint4_free(ctx, w);
}

/* FG_I8_GEMM_TP, _W, _TW, _NS, _KS of the i8 GEMM's launch shapes that the
 * plan does not pick on these shapes by itself ("-1": the plan's choice). */
static const char *const shape_env[5] = {"FG_I8_GEMM_TP", "FG_I8_GEMM_W", "FG_I8_GEMM_TW", "FG_I8_GEMM_NS",
					 "FG_I8_GEMM_KS"};
static const char *const shapes[][5] = {
	{"-1", "4", "1", "4", "0"}, /* gemm13's: 4 warps, one block walks all of K */
	{"-1", "8", "2", "-1", "1"}, /* two tiles per warp */
	{"8", "4", "2", "2", "1"},
	{"1", "8", "1", "3", "0"},
};
static const char *const shape_name[] = {"i8 (w 4, ks 0)", "i8 (tw 2)", "i8 (tp 8, w 4, tw 2, ns 2)",
					 "i8 (tp 1, ns 3, ks 0)"};

int main(int argc, char **argv)
{
	int small = argc > 1 && !strcmp(argv[1], "--small");

	ok(fg_k_int4_gemm(NULL, NULL, NULL, NULL, NULL, 1, &gerr) < 0, "int4 gemm without a context is an error");
	if (!(ctx = gpu_test_open("int4 gemm vs one-vector launches", &gerr)))
		return tap_done();
	for (int kind = FG_INT4_FMA; kind <= FG_INT4_I8; kind++) {
		kind_name = kind == FG_INT4_I8 ? "i8" : kind == FG_INT4_MMA ? "mma" : "fma";
		fg_kctx_set_int4_kind(ctx, kind);
		gpu_gemm(small);
		gpu_errors();
		if (kind == FG_INT4_I8 || !small)
			gpu_chain();
	}
	/* the i8 GEMM's other launch shapes (FG_I8_GEMM_*), small shapes */
	for (size_t v = 0; v < sizeof(shapes) / sizeof(shapes[0]); v++) {
		for (int f = 0; f < 5; f++)
			setenv(shape_env[f], shapes[v][f], 1);
		fg_kint4_i8_gemm_env();
		kind_name = shape_name[v];
		gpu_gemm(1);
		gpu_chain();
		for (int f = 0; f < 5; f++)
			unsetenv(shape_env[f]);
		fg_kint4_i8_gemm_env();
	}
	fg_kctx_free(ctx);
	return tap_done();
}
