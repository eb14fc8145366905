/* attn_prefill.c - GPU benchmark of the prompt chunk's attention
 * (fg_k_attn_prefill) against the decode step's, on Gemma 4 E4B's shapes (8
 * query heads over 2 kv heads; sliding layers head_dim 256 with a ring of
 * 512, full layers head_dim 512 with a cache of 32768). For a chunk of
 * FG_BENCH_ROWS (default 64) rows at several starting positions: ms for one
 * fg_k_attn_prefill launch over the whole chunk, and ms for the decode
 * step's way, rows x (fg_k_kv_store + fg_k_attn_decode) back to back (the
 * positions uploaded beforehand, one per row), median of FG_BENCH_REPS
 * (default 7) runs each, and their ratio. Built by
 * `make BUILD=build build/bench/attn_prefill` where nvcc exists. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fg_kernels.h"

#define BENCH_NAME "attn_prefill"
#include "bench/bench.h"

int main(void)
{
	struct fg_kctx *ctx;
	const int heads = 8, kvh = 2, rows = bench_env_int("FG_BENCH_ROWS", 64, 1, 100000);
	const int reps = bench_env_int("FG_BENCH_REPS", 7, 1, 100000);
	static const struct {
		int cap, hd, pos0;
		const char *what;
	} cases[] = {
		{512, 256, 0, "sliding, ring 512"},      {512, 256, 448, "sliding, ring 512"},
		{512, 256, 4096, "sliding, ring 512"},   {32768, 512, 0, "full, cache 32768"},
		{32768, 512, 1024, "full, cache 32768"}, {32768, 512, 4096, "full, cache 32768"},
		{32768, 512, 16384, "full, cache 32768"},
	};
	double *t = malloc(sizeof(double) * reps);

	CK(fg_kctx_new(&ctx, &err));
	printf("# %s, %d rows a chunk, %d/%d heads, median of %d\n", fg_kctx_device_name(ctx), rows, heads, kvh, reps);
	printf("%-20s %5s %6s %12s %12s %7s\n", "layer", "d", "pos0", "chunk ms", "decode ms", "ratio");
	for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
		int cap = cases[ci].cap, hd = cases[ci].hd, pos0 = cases[ci].pos0;
		size_t row = (size_t)(heads + 2 * kvh) * hd, on = (size_t)heads * hd, cn = (size_t)kvh * cap * hd;
		float *h = malloc(sizeof(float) * (cn > row * rows ? cn : row * rows)), *dk, *dv, *dqkv, *dout;
		int32_t *pos = malloc(sizeof(int32_t) * rows), *dp;
		double chunk_ms, dec_ms, ms;

		for (size_t i = 0; i < (cn > row * rows ? cn : row * rows); i++)
			h[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
		for (int r = 0; r < rows; r++)
			pos[r] = pos0 + r;
		CK(fg_kmem_alloc(ctx, (void **)&dk, 4 * cn, &err) || fg_kmem_alloc(ctx, (void **)&dv, 4 * cn, &err) ||
		   fg_kmem_alloc(ctx, (void **)&dqkv, 4 * row * rows, &err) ||
		   fg_kmem_alloc(ctx, (void **)&dout, 4 * on * rows, &err) ||
		   fg_kmem_alloc(ctx, (void **)&dp, 4 * rows, &err) || fg_kmem_upload(ctx, dk, h, 4 * cn, &err) ||
		   fg_kmem_upload(ctx, dv, h, 4 * cn, &err) || fg_kmem_upload(ctx, dqkv, h, 4 * row * rows, &err) ||
		   fg_kmem_upload(ctx, dp, pos, 4 * rows, &err));
		for (int pass = 0; pass < 2; pass++) {
			for (int k = -1; k < reps; k++) { /* k = -1: warm-up */
				CK(fg_ktimer_start(ctx, &err));
				if (pass == 0)
					CK(fg_k_attn_prefill(ctx, dout, dqkv, row, dqkv + on, dqkv + on + (size_t)kvh * hd, row,
							     dk, dv, rows, heads, kvh, hd, cap, pos0, 0.0625f, &err));
				else
					for (int r = 0; r < rows; r++) {
						const float *q = dqkv + (size_t)r * row;

						CK(fg_k_kv_store(ctx, dk, dv, q + on, q + on + (size_t)kvh * hd, kvh, hd, cap,
								 dp + r, &err) ||
						   fg_k_attn_decode(ctx, dout + (size_t)r * on, q, dk, dv, heads, kvh, hd, cap,
								    dp + r, 0.0625f, &err));
					}
				CK(fg_ktimer_stop(ctx, &ms, &err));
				if (k >= 0)
					t[k] = ms;
			}
			qsort(t, reps, sizeof(double), cmp_d);
			if (pass == 0)
				chunk_ms = t[reps / 2];
			else
				dec_ms = t[reps / 2];
		}
		printf("%-20s %5d %6d %12.4f %12.4f %7.2f\n", cases[ci].what, hd, pos0, chunk_ms, dec_ms, dec_ms / chunk_ms);
		fg_kmem_free(ctx, dk), fg_kmem_free(ctx, dv), fg_kmem_free(ctx, dqkv), fg_kmem_free(ctx, dout);
		fg_kmem_free(ctx, dp);
		free(h), free(pos);
	}
	fg_kctx_free(ctx);
	free(t);
	return 0;
}
