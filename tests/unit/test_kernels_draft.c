/* test_kernels_draft.c - the assistant drafter's head: fg_k_centroid_select
 * and fg_k_gather_matvec against their CPU twins, bit for bit.
 *
 * Without a GPU: the twins against plain references (the selection against
 * a sort of the indices by the stated rules, a known answer with NaN, ±Inf
 * and ±0; the dot products within 2e-6 sum|wx| of a double sum). With a
 * GPU: bad arguments refused; the selection for top_k 1, 4, 32, 64 over
 * n = top_k .. 65536 scores, random, with many ties, with NaN and ±Inf, all
 * NaN, all equal, and ties that straddle the cut, 1 and 128 ids per cluster;
 * the dot products of bf16 and f32 rows (16-byte aligned and not), k 8, 256
 * and 2560, 1 .. 4096 rows in random order, a negative id; both written over
 * poison, the twin's bytes, and the same bytes on a second run; then the two
 * chained at E4B's shape (2048 clusters, top 32 of 128 tokens each, rows of
 * 256 from a [262144][256] bf16 table) in a captured graph replayed over
 * new scores. Without a GPU the GPU part prints one "ok ... # skip" line,
 * unless FG_REQUIRE_CUDA=1 asks for a failure instead. `--small` leaves out
 * the 65536-score and E4B cases (short enough for compute-sanitizer). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fg_kernels.h"
#include "tap.h"
#define GPU_TEST_SEED 0x5851F42D4C957F2Dull
#include "gpu_test.h"

enum { KIND_RANDOM, KIND_TIES, KIND_SPECIAL, KIND_NAN, KIND_EQUAL, KIND_STRADDLE };
static const char *kind_name[] = {"random", "many ties", "NaN, +-Inf, +-0", "all NaN", "all equal",
				  "ties straddle the cut"};

/* n scores of a kind */
static float *scores(int n, int kind)
{
	float *z = fvec((size_t)n, -4.0f, 4.0f);

	for (int i = 0; i < n; i++) {
		switch (kind) {
		case KIND_TIES:
			z[i] = (float)(rnd() % 3);
			break;
		case KIND_SPECIAL: {
			uint32_t r = rnd() % 8;

			z[i] = r == 0 ? NAN : r == 1 ? INFINITY : r == 2 ? -INFINITY : r == 3 ? -0.0f : r == 4 ? 0.0f : z[i];
			break;
		}
		case KIND_NAN:
			z[i] = NAN;
			break;
		case KIND_EQUAL:
			z[i] = 0.5f;
			break;
		case KIND_STRADDLE: /* a few larger ones, then a long run of one value from index n / 3 */
			z[i] = i % 97 == 5 ? 2.0f + (float)(i % 5) : i >= n / 3 ? 1.0f : -1.0f;
			break;
		}
	}
	return z;
}

/* ---- the twins against plain references (no GPU needed) ------------------------*/

static const float *cmp_z;

/* numbers before NaN, then larger first, then lower index */
static int plain_cmp(const void *pa, const void *pb)
{
	int a = *(const int *)pa, b = *(const int *)pb;
	float x = cmp_z[a], y = cmp_z[b];

	if (isnan(x) != isnan(y))
		return isnan(x) ? 1 : -1;
	if (!isnan(x) && x != y)
		return x > y ? -1 : 1;
	return (a > b) - (a < b);
}

static void plain_select(int32_t *ids, const float *z, int n, int k, const int32_t *order, int per)
{
	int *ix = malloc(sizeof(int) * (size_t)n);

	for (int i = 0; i < n; i++)
		ix[i] = i;
	cmp_z = z;
	qsort(ix, (size_t)n, sizeof(int), plain_cmp);
	for (int r = 0; r < k; r++)
		for (int t = 0; t < per; t++)
			ids[(size_t)r * per + t] = order[(size_t)ix[r] * per + t];
	free(ix);
}

static int32_t *order_new(int n, int per)
{
	size_t m = (size_t)n * (size_t)per;
	int32_t *o = malloc(sizeof(int32_t) * m);

	for (size_t i = 0; i < m; i++)
		o[i] = (int32_t)(rnd() & 0x3ffff);
	return o;
}

static void twin_select(void)
{
	/* a known answer: +Inf, 3 (first of two), 3, 1, +0, -0 (equal: index order), -Inf, NaN */
	static const float z[8] = {1.0f, NAN, 3.0f, 3.0f, -INFINITY, 0.0f, -0.0f, INFINITY};
	static const int32_t want[8] = {7, 2, 3, 0, 5, 6, 4, 1};
	int32_t order[8], got[8];
	static const int ks[] = {1, 4, 32, 64}, ns[] = {1, 4, 32, 64, 65, 100, 1000, 2048, 4097};

	for (int i = 0; i < 8; i++)
		order[i] = i;
	fg_ref_centroid_select(got, z, 8, 8, order, 1);
	ok(!memcmp(got, want, sizeof(want)), "select twin: +Inf, 3, 3 (lower index), 1, +0, -0, -Inf, NaN last");
	for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++)
		for (int kind = 0; kind <= KIND_STRADDLE; kind++) {
			int bad = 0, cases = 0;

			for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
				int k = ks[a], n = ns[b], per = b % 2 ? 3 : 1;
				float *zz;
				int32_t *o, *r1, *r2;

				if (n < k)
					continue;
				zz = scores(n, kind), o = order_new(n, per);
				r1 = malloc(sizeof(int32_t) * (size_t)k * per), r2 = malloc(sizeof(int32_t) * (size_t)k * per);
				fg_ref_centroid_select(r1, zz, n, k, o, per);
				plain_select(r2, zz, n, k, o, per);
				bad += memcmp(r1, r2, sizeof(int32_t) * (size_t)k * per) != 0;
				cases++;
				free(zz), free(o), free(r1), free(r2);
			}
			ok(cases && !bad, "select twin = a sort by the rules: top %d, %s, %d sizes (%d differ)", ks[a],
			   kind_name[kind], cases, bad);
		}
}

static void twin_gather(void)
{
	static const int ks[] = {8, 256, 2560, 12, 259};

	for (int bf16 = 0; bf16 < 2; bf16++)
		for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++) {
			int k = ks[a], rows = 300, n_ids = 50;
			void *t = bf16 ? (void *)bvec((size_t)rows * k, -1, 1) : (void *)fvec((size_t)rows * k, -1, 1);
			float *x = fvec((size_t)k, -2, 2), y[50];
			int32_t ids[50];
			double worst = 0;

			for (int j = 0; j < n_ids; j++)
				ids[j] = (int32_t)(rnd() % rows);
			ids[7] = -1;
			fg_ref_gather_matvec(y, t, bf16, ids, n_ids, x, k);
			for (int j = 0; j < n_ids; j++) {
				double s = 0, sa = 0;

				if (ids[j] < 0)
					continue;
				for (int i = 0; i < k; i++) {
					size_t e = (size_t)ids[j] * k + i;
					double w = bf16 ? fg_ref_bf16(((uint16_t *)t)[e]) : ((float *)t)[e];

					s += w * x[i], sa += fabs(w * x[i]);
				}
				if (fabs(y[j] - s) / sa > worst)
					worst = fabs(y[j] - s) / sa;
			}
			ok(worst < 2e-6 && isnan(y[7]),
			   "gather twin %s k %d: within 2e-6 sum|wx| of a double sum (worst %.2g), id -1 gives NaN",
			   bf16 ? "bf16" : "f32", k, worst);
			free(t), free(x);
		}
}

/* ---- the kernels against the twins ------------------------------------------------*/

static void errors(void)
{
	float *d = dput(NULL, 1 << 16);
	int32_t *di = (int32_t *)d;
	struct {
		int n, k, per;
		const char *what;
	} bs[] = {
		{100, 0, 1, "top_k 0"},         {100, 65, 1, "top_k 65"}, {10, 11, 1, "top_k above n"},
		{0, 1, 1, "no scores"},         {65537, 4, 1, "65537 scores"}, {100, 4, 0, "no ids per cluster"},
	};
	struct {
		int n_ids, k, bf16, xoff, toff;
		const char *what;
	} bg[] = {
		{4, 0, 1, 0, 0, "k 0"},
		{4, (1 << 20) + 8, 1, 0, 0, "k above the limit"}, {-1, 8, 1, 0, 0, "-1 rows"},
		{4, 8, 0, 1, 0, "x off 16-byte alignment"},       {4, 8, 1, 0, 1, "bf16 table at an odd byte"},
		{4, 8, 0, 0, 2, "f32 table at 2 bytes"},
	};
	struct fg_err e = {0};
	int rc;

	for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) {
		e = (struct fg_err){0};
		rc = fg_k_centroid_select(ctx, di, d, bs[i].n, bs[i].k, di, bs[i].per, &e);
		ok(rc == FG_EINVAL && e.msg[0], "centroid select refuses %s: %s", bs[i].what, e.msg);
	}
	e = (struct fg_err){0};
	rc = fg_k_centroid_select(ctx, di, d, 100, 4, NULL, 1, &e);
	ok(rc == FG_EINVAL && e.msg[0], "centroid select refuses a missing order: %s", e.msg);
	for (size_t i = 0; i < sizeof bg / sizeof bg[0]; i++) {
		e = (struct fg_err){0};
		rc = fg_k_gather_matvec(ctx, d, (const char *)d + bg[i].toff, bg[i].bf16, di, bg[i].n_ids,
					(const float *)((const char *)d + 4 * bg[i].xoff), bg[i].k, &e);
		ok(rc == FG_EINVAL && e.msg[0], "gather matvec refuses %s: %s", bg[i].what, e.msg);
	}
	e = (struct fg_err){0};
	rc = fg_k_gather_matvec(ctx, d, d, 1, NULL, 4, d, 8, &e);
	ok(rc == FG_EINVAL && e.msg[0], "gather matvec refuses missing ids: %s", e.msg);
	e = (struct fg_err){0};
	rc = fg_k_gather_matvec(ctx, d, d, 1, di, 0, d, 8, &e);
	ok(rc == 0 && !fg_kctx_sync(ctx, &e), "gather matvec of 0 rows: nothing to do %s", e.msg);
	fg_kmem_free(ctx, d);
}

/* One selection: poison, launch, download, twice; ok when both runs have
 * the twin's bytes. */
static void gpu_select_case(int n, int k, int per, int kind)
{
	size_t m = (size_t)k * per;
	float *z = scores(n, kind);
	int32_t *o = order_new(n, per), *ref = malloc(4 * m), *g1 = malloc(4 * m), *g2 = malloc(4 * m);
	float *dz = dput(z, 4 * (size_t)n);
	int32_t *dorder = dput(o, 4 * (size_t)n * per), *dids = dput(NULL, 4 * m);
	int rc = !dz || !dorder || !dids;

	fg_ref_centroid_select(ref, z, n, k, o, per);
	rc = rc || fg_kmem_fill(ctx, dids, 0xff, 4 * m, &gerr) ||
	     fg_k_centroid_select(ctx, dids, dz, n, k, dorder, per, &gerr) || dget(g1, dids, 4 * m) ||
	     fg_kmem_fill(ctx, dids, 0xff, 4 * m, &gerr) ||
	     fg_k_centroid_select(ctx, dids, dz, n, k, dorder, per, &gerr) || dget(g2, dids, 4 * m);
	ok(!rc && !memcmp(ref, g1, 4 * m) && !memcmp(g1, g2, 4 * m),
	   "centroid select top %d of %d, %d per cluster, %s: the twin's ids, two runs identical %s", k, n, per,
	   kind_name[kind], rc ? gerr.msg : "");
	if (!rc && memcmp(ref, g1, 4 * m))
		for (size_t i = 0; i < m; i++)
			if (ref[i] != g1[i]) {
				printf("#   first difference at %zu (cluster %zu): %d, twin %d\n", i, i / per, g1[i],
				       ref[i]);
				break;
			}
	fg_kmem_free(ctx, dz), fg_kmem_free(ctx, dorder), fg_kmem_free(ctx, dids);
	free(z), free(o), free(ref), free(g1), free(g2);
}

static void gpu_select(int small)
{
	static const int ks[] = {1, 4, 32, 64};

	for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++) {
		int k = ks[a];

		if (k == 1)
			gpu_select_case(1, 1, 1, KIND_RANDOM);
		gpu_select_case(k, k, 1, KIND_RANDOM);
		gpu_select_case(k, k, 128, KIND_SPECIAL);
		for (int kind = 0; kind <= KIND_STRADDLE; kind++) {
			gpu_select_case(2048, k, 128, kind);
			gpu_select_case(4097, k, 1, kind);
			if (!small)
				gpu_select_case(65536, k, 1, kind);
		}
		gpu_select_case(777, k, 3, KIND_TIES);
		if (!small)
			gpu_select_case(65536, k, 2, KIND_STRADDLE);
	}
}

/* One gather: rows random ids of `rows` rows (one -1 when n_ids > 3), the
 * table toff elements past a 16-byte boundary. */
static void gpu_gather_case(int bf16, int k, int n_ids, int rows, int toff)
{
	size_t es = bf16 ? 2 : 4, tb = ((size_t)rows * k + toff) * es;
	void *t = bf16 ? (void *)bvec((size_t)rows * k + toff, -1, 1) : (void *)fvec((size_t)rows * k + toff, -1, 1);
	float *x = fvec((size_t)k, -2, 2), *ref = malloc(4 * (size_t)n_ids), *g1 = malloc(4 * (size_t)n_ids),
	      *g2 = malloc(4 * (size_t)n_ids);
	int32_t *ids = malloc(4 * (size_t)n_ids);
	char *dt = dput(t, tb);
	float *dx, *dy;
	int32_t *di;
	int rc;

	for (int j = 0; j < n_ids; j++)
		ids[j] = (int32_t)(rnd() % (uint32_t)rows);
	if (n_ids > 3)
		ids[n_ids / 2] = -1;
	dx = dput(x, 4 * (size_t)k), dy = dput(NULL, 4 * (size_t)n_ids), di = dput(ids, 4 * (size_t)n_ids);
	rc = !dt || !dx || !dy || !di;
	fg_ref_gather_matvec(ref, (const char *)t + toff * es, bf16, ids, n_ids, x, k);
	rc = rc || fg_kmem_fill(ctx, dy, 0xff, 4 * (size_t)n_ids, &gerr) ||
	     fg_k_gather_matvec(ctx, dy, dt + toff * es, bf16, di, n_ids, dx, k, &gerr) ||
	     dget(g1, dy, 4 * (size_t)n_ids) || fg_kmem_fill(ctx, dy, 0xff, 4 * (size_t)n_ids, &gerr) ||
	     fg_k_gather_matvec(ctx, dy, dt + toff * es, bf16, di, n_ids, dx, k, &gerr) ||
	     dget(g2, dy, 4 * (size_t)n_ids);
	ok(!rc && !memcmp(ref, g1, 4 * (size_t)n_ids) && !memcmp(g1, g2, 4 * (size_t)n_ids),
	   "gather matvec %s k %d, %d of %d rows%s: the twin's bits, two runs identical %s", bf16 ? "bf16" : "f32", k,
	   n_ids, rows, toff ? ", table off 16-byte alignment" : "", rc ? gerr.msg : "");
	if (!rc && memcmp(ref, g1, 4 * (size_t)n_ids))
		for (int j = 0; j < n_ids; j++)
			if (memcmp(ref + j, g1 + j, 4)) {
				printf("#   first difference at row %d (id %d): %.9g, twin %.9g\n", j, ids[j], g1[j],
				       ref[j]);
				break;
			}
	fg_kmem_free(ctx, dt), fg_kmem_free(ctx, dx), fg_kmem_free(ctx, dy), fg_kmem_free(ctx, di);
	free(t), free(x), free(ref), free(g1), free(g2), free(ids);
}

static void gpu_gather(void)
{
	static const int ks[] = {8, 256, 2560}, ns[] = {1, 5, 33, 4096};

	for (int bf16 = 0; bf16 < 2; bf16++)
		for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++)
			for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
				gpu_gather_case(bf16, ks[a], ns[b], ks[a] > 256 ? 700 : 5000, 0);
	gpu_gather_case(1, 256, 100, 300, 1);
	gpu_gather_case(0, 256, 100, 300, 1);
	gpu_gather_case(1, 2560, 33, 300, 3);
	gpu_gather_case(0, 8, 33, 300, 2);
	/* widths that are not whole 16-byte pieces: the tail, as the moe rows */
	gpu_gather_case(1, 4, 33, 300, 0);
	gpu_gather_case(1, 12, 33, 300, 0);
	gpu_gather_case(0, 13, 33, 300, 0);
	gpu_gather_case(1, 259, 100, 300, 1);
	gpu_gather_case(0, 1, 5, 300, 0);
}

/* E4B's head: select then gather, captured once, replayed over new scores */
static void gpu_e4b_chain(void)
{
	enum { NC = 2048, TOPK = 32, PER = 128, VOCAB = NC * PER, K = 256, M = TOPK * PER, ROUNDS = 3 };
	uint16_t *t = bvec((size_t)VOCAB * K, -1, 1);
	int32_t *o = malloc(4 * (size_t)VOCAB), *ids = malloc(4 * M);
	float *x = fvec(K, -2, 2), *ref = malloc(4 * M), *got = malloc(4 * M);
	void *dt = dput(t, 2 * (size_t)VOCAB * K), *dorder, *dz = dput(NULL, 4 * NC), *dx = dput(x, 4 * K),
	     *dids = dput(NULL, 4 * M), *dy = dput(NULL, 4 * M);
	struct fg_kgraph *g = NULL;
	int rc, same = 1;

	for (int i = 0; i < VOCAB; i++) /* a permutation of the vocabulary, as token_ordering is */
		o[i] = i;
	for (int i = VOCAB - 1; i > 0; i--) {
		int j = (int)(rnd() % (uint32_t)(i + 1));
		int32_t s = o[i];

		o[i] = o[j], o[j] = s;
	}
	dorder = dput(o, 4 * (size_t)VOCAB);
	rc = !dt || !dorder || !dz || !dx || !dids || !dy;
	rc = rc || fg_kgraph_begin(ctx, &gerr) ||
	     fg_k_centroid_select(ctx, dids, dz, NC, TOPK, dorder, PER, &gerr) ||
	     fg_k_gather_matvec(ctx, dy, dt, 1, dids, M, dx, K, &gerr) || fg_kgraph_end(ctx, &g, &gerr);
	for (int r = 0; !rc && r < ROUNDS; r++) {
		float *z = scores(NC, r == 1 ? KIND_TIES : KIND_RANDOM);

		rc = fg_kmem_upload(ctx, dz, z, 4 * NC, &gerr) || fg_kgraph_launch(ctx, g, &gerr) || dget(got, dy, 4 * M);
		fg_ref_centroid_select(ids, z, NC, TOPK, o, PER);
		fg_ref_gather_matvec(ref, t, 1, ids, M, x, K);
		same = same && !memcmp(ref, got, 4 * M);
		free(z);
	}
	ok(!rc && same, "E4B head (top 32 of 2048 clusters of 128, rows of 256 from [262144][256] bf16), a graph "
			"replayed %d times: the twins' bits %s",
	   ROUNDS, rc ? gerr.msg : "");
	fg_kgraph_free(g);
	fg_kmem_free(ctx, dt), fg_kmem_free(ctx, dorder), fg_kmem_free(ctx, dz), fg_kmem_free(ctx, dx);
	fg_kmem_free(ctx, dids), fg_kmem_free(ctx, dy);
	free(t), free(o), free(ids), free(x), free(ref), free(got);
}

int main(int argc, char **argv)
{
	struct fg_err err = {0};
	int small = argc > 1 && !strcmp(argv[1], "--small"), rc;

	twin_select();
	twin_gather();
	rc = fg_k_centroid_select(NULL, NULL, NULL, 1, 1, NULL, 1, &err);
	ok(rc == (fg_cuda_built() ? FG_EINVAL : FG_EUNSUPPORTED) && err.msg[0], "select, no context: %s", err.msg);
	err = (struct fg_err){0};
	rc = fg_k_gather_matvec(NULL, NULL, NULL, 1, NULL, 1, NULL, 8, &err);
	ok(rc == (fg_cuda_built() ? FG_EINVAL : FG_EUNSUPPORTED) && err.msg[0], "gather, no context: %s", err.msg);
	err = (struct fg_err){0};
	if (!(ctx = gpu_test_open("drafter head kernels vs twins", &err)))
		return tap_done();
	errors();
	gpu_select(small);
	gpu_gather();
	if (!small)
		gpu_e4b_chain();
	fg_kctx_free(ctx);
	return tap_done();
}
