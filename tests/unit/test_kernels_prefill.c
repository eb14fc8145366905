/* test_kernels_prefill.c - the prompt chunk's attention (fg_k_attn_prefill)
 * against the decode step's, bit for bit.
 *
 * Reference built from the decode kernels on the device: a cache holding
 * random rows for the positions below pos0 (as a ring when cap is a sliding
 * window), a chunk of random q | k | v rows laid out as the projection
 * leaves them; for each row r in order, fg_k_kv_store of row r at position
 * pos0 + r, then fg_k_attn_decode at pos0 + r (so the cache then holds rows
 * 0..r and not the later ones). Row r of fg_k_attn_prefill over the
 * untouched cache must have the same bytes. Cases cover rings before and
 * after they wrapped, chunks that wrap them and chunks longer than the
 * ring, full caches, head groupings, head_dim up to 512, and caps large
 * enough for the key chunks to double and for the rows to go in several
 * launches. Without a GPU the GPU part prints one "ok ... # skip" line,
 * unless FG_REQUIRE_CUDA=1 asks for a failure instead. `--small` runs only
 * the small cases (short enough for compute-sanitizer). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fg_kernels.h"
#include "tap.h"
#define GPU_TEST_SEED 0x2545F4914F6CDD1Dull
#include "gpu_test.h"


struct pcase {
	int cap, pos0, rows, heads, kvh, hd;
	const char *what;
};

/* One case: ok when every row's bytes match (the first element that does
 * not is printed). */
static void one_case(const struct pcase *c)
{
	int cap = c->cap, rows = c->rows, heads = c->heads, kvh = c->kvh, hd = c->hd, pos0 = c->pos0;
	size_t row = (size_t)(heads + 2 * kvh) * hd, on = (size_t)heads * hd, cn = (size_t)kvh * cap * hd;
	float *kc = fvec(cn, -1.0f, 1.0f), *vc = fvec(cn, -1.0f, 1.0f), *qkv = fvec(row * rows, -1.0f, 1.0f);
	float *ref = malloc(sizeof(float) * on * rows), *got = malloc(sizeof(float) * on * rows);
	float *dk = dput(kc, 4 * cn), *dv = dput(vc, 4 * cn), *dk0 = dput(kc, 4 * cn), *dv0 = dput(vc, 4 * cn);
	float *dqkv = dput(qkv, 4 * row * rows), *dref = dput(NULL, 4 * on), *dout = dput(NULL, 4 * on * rows);
	int32_t *dp = dput(NULL, 4);
	int rc = !dk || !dv || !dk0 || !dv0 || !dqkv || !dref || !dout || !dp, bad = -1;
	const float scale = 0.125f;

	/* the decode step, row by row */
	for (int r = 0; !rc && r < rows; r++) {
		int32_t pos = pos0 + r;
		const float *q = dqkv + (size_t)r * row;

		rc = fg_kmem_upload(ctx, dp, &pos, 4, &gerr) ||
		     fg_k_kv_store(ctx, dk, dv, q + on, q + on + (size_t)kvh * hd, kvh, hd, cap, dp, &gerr) ||
		     fg_k_attn_decode(ctx, dref, q, dk, dv, heads, kvh, hd, cap, dp, scale, &gerr) ||
		     dget(ref + (size_t)r * on, dref, 4 * on);
	}
	/* the chunk at once, over the cache as it was; NaN poison first */
	rc = rc || fg_kmem_fill(ctx, dout, 0xff, 4 * on * rows, &gerr) ||
	     fg_k_attn_prefill(ctx, dout, dqkv, row, dqkv + on, dqkv + on + (size_t)kvh * hd, row, dk0, dv0, rows,
			       heads, kvh, hd, cap, pos0, scale, &gerr) ||
	     dget(got, dout, 4 * on * rows);
	for (int r = 0; !rc && r < rows && bad < 0; r++)
		if (memcmp(ref + (size_t)r * on, got + (size_t)r * on, 4 * on))
			bad = r;
	ok(!rc && bad < 0, "chunk attention = decode bits: %s (cap %d, pos0 %d, %d rows, %d/%d heads, d %d)%s%s",
	   c->what, cap, pos0, rows, heads, kvh, hd, rc ? ": " : "", rc ? gerr.msg : "");
	if (bad >= 0)
		for (size_t i = 0; i < on; i++)
			if (memcmp(ref + bad * on + i, got + bad * on + i, 4)) {
				printf("#   row %d, element %zu: decode %.9g, chunk %.9g\n", bad, i, ref[bad * on + i],
				       got[bad * on + i]);
				break;
			}
	fg_kmem_free(ctx, dk), fg_kmem_free(ctx, dv), fg_kmem_free(ctx, dk0), fg_kmem_free(ctx, dv0);
	fg_kmem_free(ctx, dqkv), fg_kmem_free(ctx, dref), fg_kmem_free(ctx, dout), fg_kmem_free(ctx, dp);
	free(kc), free(vc), free(qkv), free(ref), free(got);
}

static const struct pcase small_cases[] = {
	{8, 0, 5, 8, 2, 64, "ring, first chunk"},
	{8, 3, 5, 8, 2, 64, "ring filled by the chunk"},
	{8, 5, 5, 8, 2, 64, "chunk wraps the ring"},
	{8, 13, 5, 8, 2, 64, "ring wrapped, chunk wraps again"},
	{8, 6, 20, 8, 2, 64, "chunk longer than the ring"},
	{8, 0, 20, 4, 4, 64, "chunk longer than the ring, from 0"},
	{16, 30, 64, 8, 1, 256, "ring of 16, 64 rows"},
	{16, 9, 7, 3, 1, 33, "odd head_dim and grouping"},
	{64, 0, 1, 8, 2, 64, "one row at 0"},
	{64, 40, 1, 8, 2, 64, "one row"},
	{512, 100, 5, 4, 4, 64, "full cache"},
	{40, 7, 33, 2, 1, 512, "head_dim 512"},
	{16, 20, 9, 8, 1, 8, "head_dim 8"},
	{8, 3, 4, 2, 1, 1, "head_dim 1"},
};

static const struct pcase big_cases[] = {
	{512, 0, 64, 8, 2, 256, "E4B sliding, first chunk"},
	{512, 480, 64, 8, 2, 256, "E4B sliding, chunk wraps the ring"},
	{512, 1000, 64, 8, 2, 256, "E4B sliding, wrapped"},
	{512, 700, 1, 8, 2, 256, "E4B sliding, one row"},
	{2048, 0, 64, 8, 2, 512, "E4B full, first chunk"},
	{2048, 300, 64, 8, 2, 512, "E4B full"},
	{4096, 3000, 64, 8, 2, 512, "full, rows in several launches"},
	{40000, 39000, 64, 8, 2, 64, "cap 40000: doubled key chunks, several launches"},
	{40000, 39990, 20, 8, 1, 64, "cap 40000, chunk wraps it"},
};

static void errors(void)
{
	float *d = dput(NULL, 4096);
	struct {
		int rows, heads, kvh, hd, cap, pos0;
		size_t q_row, kv_row;
		const char *what;
	} bad[] = {
		{0, 8, 2, 64, 16, 0, 512, 128, "no rows"},
		{-3, 8, 2, 64, 16, 0, 512, 128, "negative rows"},
		{2, 8, 3, 64, 16, 0, 512, 192, "heads not a multiple of kv heads"},
		{2, 18, 2, 64, 16, 0, 1152, 128, "more than 8 heads per kv head"},
		{2, 8, 2, 513, 16, 0, 8 * 513, 2 * 513, "head_dim over 512"},
		{2, 8, 2, 64, 0, 0, 512, 128, "no cache slots"},
		{2, 8, 2, 64, 16, -1, 512, 128, "negative position"},
		{2, 8, 2, 64, 16, 0x7fffffff, 512, 128, "positions overflow"},
		{2, 8, 2, 64, 16, 0, 511, 128, "q rows too short"},
		{2, 8, 2, 64, 16, 0, 512, 127, "kv rows too short"},
	};

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct fg_err e = {0};
		int rc = fg_k_attn_prefill(ctx, d, d, bad[i].q_row, d, d, bad[i].kv_row, d, d, bad[i].rows, bad[i].heads,
					   bad[i].kvh, bad[i].hd, bad[i].cap, bad[i].pos0, 1.0f, &e);

		ok(rc == FG_EINVAL && e.msg[0], "chunk attention refuses %s: %s", bad[i].what, e.msg);
	}
	fg_kmem_free(ctx, d);
}

int main(int argc, char **argv)
{
	struct fg_err err = {0};
	int small = argc > 1 && !strcmp(argv[1], "--small"), rc;

	rc = fg_k_attn_prefill(NULL, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, 1, 1, 1, 1, 1, 0, 1.0f, &err);
	ok(rc == (fg_cuda_built() ? FG_EINVAL : FG_EUNSUPPORTED) && err.msg[0], "no context: %s", err.msg);
	err = (struct fg_err){0};
	if (!(ctx = gpu_test_open("chunk attention vs decode attention", &err)))
		return tap_done();
	errors();
	for (size_t i = 0; i < sizeof small_cases / sizeof small_cases[0]; i++)
		one_case(&small_cases[i]);
	for (size_t i = 0; !small && i < sizeof big_cases / sizeof big_cases[0]; i++)
		one_case(&big_cases[i]);
	fg_kctx_free(ctx);
	return tap_done();
}
