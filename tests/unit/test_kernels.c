/* test_kernels.c - the CUDA kernels against their CPU twins.
 *
 * Always (CPU only): the INT4 tile layout round-trips and pads with q = 0; the
 * twins agree with double-precision references and keep their promises (RoPE
 * pass-through, argmax tie-break). With a GPU: every kernel against its twin
 * on awkward shapes (1, tile +- 1, non-multiples) within the stated
 * tolerance, two runs bit-identical, a captured graph identical to direct
 * launches, and a kernel fault reported as an error. Without a GPU the GPU
 * part prints one "ok ... # skip" line, unless FG_REQUIRE_CUDA=1 asks for a
 * failure instead. `test_kernels --moe` runs only the attention_bias and
 * mixture-of-experts kernels' GPU checks, `--lp` only the row
 * log-probabilities' (short enough for compute-sanitizer). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bf16.h"
#include "engine/cpu/ops.h"
#include "engine/engine.h"
#include "kernels/cpu_twin.h"
#include "kernels/fg_kernels.h"
#include "kernels/i8split.h"
#include "tap.h"
#include "gpu_test.h"

/* sum |s q x| per output: the scale of the rounding error of a dot product */
static void int4_abs(float *a, const int32_t *packed, const uint16_t *scale, const float *x, int m, int n, int k,
		     int g)
{
	for (int b = 0; b < m; b++)
		for (int r = 0; r < n; r++) {
			double t = 0;

			for (int e = 0; e < k; e++) {
				uint32_t w = (uint32_t)packed[(size_t)r * (k / 8) + e / 8];
				int q = (int)((w >> (4 * (e % 8))) & 15u) - 8;

				t += fabs(q * (double)fg_ref_bf16(scale[(size_t)r * ((k + g - 1) / g) + e / g]) *
					  x[(size_t)b * k + e]);
			}
			a[(size_t)b * n + r] = (float)t;
		}
}

/* ---- CPU-only checks ---------------------------------------------------------*/

typedef int (*pack_fn)(uint32_t *, uint16_t *, const int32_t *, const uint16_t *, int, int, int, struct fg_err *);
typedef int (*unpack_fn)(int32_t *, uint16_t *, const uint32_t *, const uint16_t *, int, int, int, struct fg_err *);
typedef void (*size_fn)(size_t *, size_t *, int, int, int);

/* Repacks a random n x k matrix into a layout (*tw, *ts: its words and
 * scales, of *wb and *sb bytes; the caller frees them) and checks that it
 * unpacks to the same matrix. */
static void layout_roundtrip(const char *name, pack_fn pack, unpack_fn unpack, size_fn size, int n, int k, int G,
			     uint32_t **tw, uint16_t **ts, size_t *wb, size_t *sb)
{
	int32_t *p, *p2;
	uint16_t *sc, *sc2;
	size_t words = (size_t)n * (k / 8), groups = (size_t)n * ((k + G - 1) / G);
	struct fg_err err = {0};

	int4_rand(&p, &sc, n, k, G);
	size(wb, sb, n, k, G);
	*tw = malloc(*wb);
	*ts = malloc(*sb);
	p2 = calloc(words, 4);
	sc2 = calloc(groups, 2);
	ok(pack(*tw, *ts, p, sc, n, k, G, &err) == 0 && unpack(p2, sc2, *tw, *ts, n, k, G, &err) == 0 &&
		   !memcmp(p, p2, 4 * words) && !memcmp(sc, sc2, 2 * groups),
	   "int4 %slayout %d x %d group %d round-trips", name, n, k, G);
	free(p), free(p2), free(sc), free(sc2);
}

static void test_layout(void)
{
	static const int shapes[][3] = {{1, 8, 128}, {1, 128, 128}, {31, 136, 128}, {32, 256, 32},
					{33, 384, 64},  {65, 1000, 128}, {7, 96, 32},   {5, 520, 256}};

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int n = shapes[s][0], k = shapes[s][1], G = shapes[s][2];
		uint16_t *ts;
		uint32_t *tw;
		size_t wb, sb;
		int pad_ok = 1;

		layout_roundtrip("", fg_int4_repack, fg_int4_unpack, fg_int4_layout_size, n, k, G, &tw, &ts, &wb, &sb);
		/* padding: rows past n and words past k/8 hold q = 0 (0x88888888), scales 0 */
		{
			int kpad = (k + G - 1) / G * G, kc = kpad / 32, tiles = (n + 31) / 32;

			for (int t = 0; t < tiles; t++)
				for (int c = 0; c < kc; c++)
					for (int r = 0; r < 32; r++)
						for (int j = 0; j < 4; j++) {
							int row = t * 32 + r, wj = c * 4 + j;

							if ((row >= n || wj >= k / 8) &&
							    tw[(((size_t)t * kc + c) * 32 + r) * 4 + j] != 0x88888888u)
								pad_ok = 0;
						}
			for (int t = 0; t < tiles; t++)
				for (int g = 0; g < kpad / G; g++)
					for (int r = 0; r < 32; r++)
						if (t * 32 + r >= n && ts[((size_t)t * (kpad / G) + g) * 32 + r])
							pad_ok = 0;
			ok(pad_ok && wb == (size_t)tiles * 32 * kpad / 2 && sb == (size_t)tiles * 32 * kpad / G * 2,
			   "int4 layout %d x %d group %d pads with q = 0 and scale 0, sizes right", n, k, G);
		}
		free(tw), free(ts);
	}
	{
		struct fg_err err = {0};
		uint32_t w[4];
		uint16_t s[1];
		int32_t p[1] = {0};

		is_int(fg_int4_repack(w, s, p, s, 1, 12, 128, &err), FG_EINVAL, "int4 repack refuses k not a multiple of 8");
		is_int(fg_int4_repack(w, s, p, s, 0, 8, 128, &err), FG_EINVAL, "int4 repack refuses n = 0");
		is_int(fg_int4_repack(w, s, p, s, 1, 8, 48, &err), FG_EUNSUPPORTED, "int4 repack refuses group 48");
	}
}

/* The tensor-core layout: round trip, padding, sizes, the chunk offsets. */
static void test_layout_mma(void)
{
	static const int shapes[][3] = {{1, 8, 128}, {1, 128, 128}, {31, 136, 128}, {32, 256, 32},
					{33, 384, 64},  {65, 1000, 128}, {7, 96, 32},   {5, 520, 256}};
	int seen[128] = {0}, once = 1;

	for (int j = 0; j < 4; j++)
		for (int w = 0; w < 4; w++)
			for (int i = 0; i < 8; i++)
				seen[fg_int4_chunk_offset(j, w, i)]++;
	for (int e = 0; e < 128; e++)
		once &= seen[e] == 1;
	ok(once, "int4 mma layout: the 4 x 32 nibbles of a row's chunk are its 128 elements, each once");
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int n = shapes[s][0], k = shapes[s][1], G = shapes[s][2], pad_ok = 1;
		uint16_t *ts;
		uint32_t *tw;
		size_t wb, sb;
		struct fg_int4_mma_dims d;

		layout_roundtrip("mma ", fg_int4_mma_repack, fg_int4_mma_unpack, fg_int4_mma_layout_size, n, k, G, &tw, &ts,
				 &wb, &sb);
		fg_int4_mma_dims(&d, n, k, G);
		/* padding: rows past n and elements past k hold q = 0 (nibble 8), scales 0 */
		for (int c = 0; c < d.chunks; c++)
			for (int rb = 0; rb < d.rblocks; rb++)
				for (int l = 0; l < 32; l++)
					for (int w = 0; w < 4; w++)
						for (int i = 0; i < 8; i++) {
							int row = rb * 8 + l / 4, e = c * 128 + fg_int4_chunk_offset(l % 4, w, i);
							uint32_t v = tw[(((size_t)c * d.rblocks + rb) * 32 + l) * 4 + w];

							if ((row >= n || e >= k) && ((v >> (4 * i)) & 15u) != 8u)
								pad_ok = 0;
						}
		for (int g = 0; g < d.groups; g++)
			for (int r = 0; r < d.npad; r++)
				if ((r >= n || g >= (k + G - 1) / G) && ts[(size_t)g * d.npad + r])
					pad_ok = 0;
		ok(pad_ok && d.npad % 8 == 0 && d.npad >= n && d.kpad % 128 == 0 && d.kpad % G == 0 && d.kpad >= k &&
			   wb == (size_t)d.npad * d.kpad / 2 && sb == (size_t)d.npad * (d.kpad / G) * 2,
		   "int4 mma layout %d x %d group %d pads with q = 0 and scale 0, sizes right", n, k, G);
		free(tw), free(ts);
	}
}

/* The INT8 tensor-core layout: the offsets, round trip, padding, sizes. */
static void test_layout_i8(void)
{
	static const int shapes[][3] = {{1, 8, 128}, {1, 64, 32},   {15, 136, 128}, {16, 256, 32},
					{17, 384, 64}, {65, 1000, 128}, {7, 96, 32},    {5, 520, 256}};
	int seen[64] = {0}, once = 1;

	for (int t = 0; t < 4; t++)
		for (int j = 0; j < 4; j += 2) /* words 0 and 2 hold row g, 1 and 3 row g + 8 */
			for (int i = 0; i < 8; i++)
				seen[fg_int4_i8_offset(t, j, i)]++;
	for (int e = 0; e < 64; e++)
		once &= seen[e] == 1;
	ok(once, "int4 i8 layout: a row's 4 lanes x 2 words x 8 nibbles are its 64 chunk elements, each once");
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int n = shapes[s][0], k = shapes[s][1], G = shapes[s][2], pad_ok = 1;
		uint16_t *ts;
		uint32_t *tw;
		size_t wb, sb;
		struct fg_int4_i8_dims d;

		layout_roundtrip("i8 ", fg_int4_i8_repack, fg_int4_i8_unpack, fg_int4_i8_layout_size, n, k, G, &tw, &ts, &wb,
				 &sb);
		fg_int4_i8_dims(&d, n, k, G);
		for (int t = 0; t < d.tiles; t++)
			for (int c = 0; c < d.chunks; c++)
				for (int l = 0; l < 32; l++)
					for (int j = 0; j < 4; j++)
						for (int i = 0; i < 8; i++) {
							int row = t * 16 + l / 4 + 8 * (j & 1), e = c * 64 + fg_int4_i8_offset(l % 4, j, i);
							uint32_t v = tw[(((size_t)t * d.chunks + c) * 32 + l) * 4 + j];

							if ((row >= n || e >= k) && ((v >> (4 * i)) & 15u) != 8u)
								pad_ok = 0;
						}
		for (int r = 0; r < d.npad; r++)
			for (int g = 0; g < d.groups; g++)
				if ((r >= n || g >= (k + G - 1) / G) &&
				    ts[(((size_t)(r / 16) * d.groups + g) * 8 + r % 8) * 2 + (r % 16) / 8])
					pad_ok = 0;
		ok(pad_ok && d.npad % 16 == 0 && d.npad >= n && d.kpad % 64 == 0 && d.kpad % G == 0 && d.kpad >= k &&
			   d.units * d.unit == d.kpad && wb == (size_t)d.npad * d.kpad / 2 &&
			   sb == (size_t)d.npad * (d.kpad / G) * 2,
		   "int4 i8 layout %d x %d group %d pads with q = 0 and scale 0, sizes right", n, k, G);
		free(tw), free(ts);
	}
	/* the repack on threads: slices of tiles in order, the same bytes on 1, 2,
	 * 3 or 16 threads (more threads than tiles too) and by default, on a
	 * matrix whose k is no multiple of a chunk (the word's slow path) */
	{
		static const int ts3[][3] = {{1000, 200, 32}, {2053, 1032, 128}, {40, 520, 256}};

		for (size_t s = 0; s < sizeof(ts3) / sizeof(ts3[0]); s++) {
			int n = ts3[s][0], k = ts3[s][1], G = ts3[s][2], same = 1, rc;
			size_t wb, sb;
			int32_t *p;
			uint16_t *sc, *s1, *s2;
			uint32_t *w1, *w2;
			struct fg_err err = {0};
			static const int threads[] = {2, 3, 16, 0};

			int4_rand(&p, &sc, n, k, G);
			fg_int4_i8_layout_size(&wb, &sb, n, k, G);
			w1 = malloc(wb), w2 = malloc(wb), s1 = malloc(sb), s2 = malloc(sb);
			rc = fg_int4_i8_repack_threads(w1, s1, p, sc, n, k, G, 1, &err);
			for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
				memset(w2, 0x5a, wb), memset(s2, 0x5a, sb);
				rc |= threads[t] ? fg_int4_i8_repack_threads(w2, s2, p, sc, n, k, G, threads[t], &err)
						 : fg_int4_i8_repack(w2, s2, p, sc, n, k, G, &err);
				same &= !memcmp(w1, w2, wb) && !memcmp(s1, s2, sb);
			}
			ok(!rc && same, "int4 i8 repack %d x %d group %d: the same bytes on 1, 2, 3 and 16 threads and by default",
			   n, k, G);
			free(p), free(sc), free(w1), free(w2), free(s1), free(s2);
		}
	}
}

/* The activation split of the i8 kernel (kernels/i8split.h) and its twin. */
static void test_i8(void)
{
	/* every part in [-64, 64]; the parts give x back to 2^(e - 22) */
	{
		int parts_ok = 1, close = 1;

		for (int g = 0; g < 400; g++) {
			float x[64];
			uint32_t amax = 0;
			float mag = ldexpf(1.0f, (int)(rnd() % 80) - 40);
			int e;

			for (int i = 0; i < 64; i++) {
				x[i] = frand(-1, 1) * mag * (i % 7 == 0 ? 1.0f : ldexpf(1.0f, -(int)(rnd() % 30)));
				amax = fg_i8_abs_bits(x[i]) > amax ? fg_i8_abs_bits(x[i]) : amax;
			}
			e = fg_i8_exp(amax);
			for (int i = 0; i < 64; i++) {
				int8_t a[FG_I8_PARTS];
				double back = 0;

				fg_i8_split(x[i], e, a);
				for (int p = 0; p < FG_I8_PARTS; p++) {
					parts_ok &= a[p] >= -64 && a[p] <= 64;
					back += a[p] * ldexp(1.0, e - 7 * p);
				}
				close &= fabs(back - x[i]) <= ldexp(1.0, e - 22);
			}
		}
		ok(parts_ok, "i8 split: every part of 400 random groups (magnitudes 2^-70..2^40) lies in [-64, 64]");
		ok(close, "i8 split: the four parts give x back to within 2^(e-22), e the group's exponent");
	}
	{
		int8_t a[FG_I8_PARTS];
		float big = 100.0f;

		fg_i8_split(big, fg_i8_exp(fg_i8_abs_bits(big)), a);
		ok(a[0] == 50 && a[1] == 0 && fg_i8_exp(0) == 0 && isnan(fg_i8_mult(fg_i8_abs_bits(INFINITY), 0, 1)) &&
			   isnan(fg_i8_mult(fg_i8_abs_bits(NAN), 0, 0)) && fg_i8_mult(fg_i8_abs_bits(big), 1, 1) == 0.015625f,
		   "i8 split: 100 = 2^1 * 50 exactly; Inf or NaN in a group makes its multipliers NaN");
	}
	/* the twin against a double dot product, for several launch plans */
	{
		static const int cases[][5] = {/* n, k, group, slice, warps */
					       {5, 264, 128, 3, 8}, {17, 1000, 32, 2, 2}, {9, 2560, 128, 4, 4},
					       {3, 520, 256, 1, 1}, {20, 96, 64, 1, 1},   {4, 640, 64, 10, 8}};

		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
			int n = cases[c][0], k = cases[c][1], G = cases[c][2], m = 2;
			int32_t *p;
			uint16_t *sc;
			float *x = fvec((size_t)m * k, -3, 3), *y = malloc(sizeof(float) * m * n),
			      *a = malloc(sizeof(float) * m * n);
			double worst = 0;

			int4_rand(&p, &sc, n, k, G);
			x[3] *= 1e-6f;
			x[k + 5] = 0.0f;
			fg_ref_int4_i8_matvec(y, p, sc, x, m, n, k, G, cases[c][3], cases[c][4]);
			int4_abs(a, p, sc, x, m, n, k, G);
			for (int b = 0; b < m; b++)
				for (int r = 0; r < n; r++) {
					double t = 0;

					for (int e = 0; e < k; e++) {
						uint32_t w = (uint32_t)p[(size_t)r * (k / 8) + e / 8];

						t += ((int)((w >> (4 * (e % 8))) & 15u) - 8) *
						     (double)fg_ref_bf16(sc[(size_t)r * ((k + G - 1) / G) + e / G]) * x[(size_t)b * k + e];
					}
					worst = fmax(worst, fabs(y[b * n + r] - t) / a[b * n + r]);
				}
			ok(worst < 2e-6, "i8 twin %d x %d group %d, slice %d, %d warps: within 2e-6 sum|wx| of a double dot product (worst %.2g)",
			   n, k, G, cases[c][3], cases[c][4], worst);
			free(p), free(sc), free(x), free(y), free(a);
		}
	}
	{
		int n = 3, k = 256;
		int32_t *p;
		uint16_t *sc;
		float *x = fvec(k, -1, 1), y[3];

		int4_rand(&p, &sc, n, k, 128);
		x[200] = NAN;
		fg_ref_int4_i8_matvec(y, p, sc, x, 1, n, k, 128, 2, 2);
		ok(isnan(y[0]) && isnan(y[1]) && isnan(y[2]), "i8 twin: a NaN input makes every output NaN");
		free(p), free(sc), free(x);
	}
}

static void test_twins(void)
{
	/* int4 twin against a double-precision dot product */
	{
		int n = 5, k = 264, m = 2;
		int32_t *p;
		uint16_t *sc;
		float *x = fvec((size_t)m * k, -2, 2), y[10], a[10];
		double worst = 0;

		int4_rand(&p, &sc, n, k, 128);
		fg_ref_int4_matvec(y, p, sc, x, m, n, k, 128);
		int4_abs(a, p, sc, x, m, n, k, 128);
		for (int b = 0; b < m; b++)
			for (int r = 0; r < n; r++) {
				double t = 0;

				for (int e = 0; e < k; e++) {
					uint32_t w = (uint32_t)p[r * (k / 8) + e / 8];

					t += ((int)((w >> (4 * (e % 8))) & 15u) - 8) *
					     (double)fg_ref_bf16(sc[r * 3 + e / 128]) * x[b * k + e];
				}
				worst = fmax(worst, fabs(y[b * n + r] - t) / a[b * n + r]);
			}
		ok(worst < 1e-5, "int4 twin matches a double dot product (worst %.2g of sum|wx|)", worst);
		free(p), free(sc), free(x);
	}
	/* RoPE: pos 0 is the identity; pairs past rot_pairs pass through; each rotated pair keeps its length */
	{
		int hd = 16, heads = 2;
		float *x = fvec((size_t)hd * heads, -1, 1), y[32], z[32];
		int pass = 1, norm = 1;

		memcpy(y, x, sizeof(y));
		fg_ref_rope(y, heads, hd, 3, 10000.0f, 0);
		ok(!memcmp(x, y, sizeof(y)), "rope twin: position 0 changes nothing");
		memcpy(z, x, sizeof(z));
		fg_ref_rope(z, heads, hd, 3, 10000.0f, 17);
		for (int h = 0; h < heads; h++)
			for (int i = 0; i < hd / 2; i++) {
				float *a = x + h * hd, *b = z + h * hd;
				double l0 = a[i] * a[i] + a[i + 8] * a[i + 8], l1 = b[i] * b[i] + b[i + 8] * b[i + 8];

				if (i >= 3 && (a[i] != b[i] || a[i + 8] != b[i + 8]))
					pass = 0;
				if (fabs(l0 - l1) > 1e-5)
					norm = 0;
			}
		ok(pass, "rope twin: pairs past rot_pairs pass through (proportional rope)");
		ok(norm && z[1] != x[1], "rope twin: rotated pairs keep their length and do move");
		free(x);
	}
	/* softcap + argmax: lowest index wins a tie, NaN never wins, ids map back */
	{
		float z[6] = {1, 5, NAN, 5, -3, 2};
		int32_t ids[6] = {10, 20, 30, 40, 50, 60};
		float z2[6];

		memcpy(z2, z, sizeof(z));
		is_int(fg_ref_softcap_argmax(z, NULL, 6, 30.0f), 1, "argmax twin: tie goes to the lowest index, NaN skipped");
		ok(fabsf(z[1] - 30.0f * tanhf(5.0f / 30.0f)) < 1e-6f && z[4] > -30.0f, "softcap twin: 30 tanh(z / 30)");
		is_int(fg_ref_softcap_argmax(z2, ids, 6, 0.0f), 20, "argmax twin: keepset ids map back; cap 0 = no softcap");
	}
	/* row log-probabilities: the twin against the engine's CPU pass (the
	 * server's until the GPU computed them), a keepset's row against the
	 * full vocabulary's row it stands for */
	{
		int n = 3000, k = 7, V = 9000, same = 1;
		float *z = fvec(n, -20, 20), *full = malloc(sizeof(float) * V);
		int32_t ids[3000], want[3] = {17, -1, 2999};
		struct fg_klp o[3];
		struct fg_engine_alt top[7];
		float lp;
		int32_t rank;

		z[5] = z[900] = 25; /* a tie at the top: the lower id first */
		z[17] = z[2000];
		for (int i = 0; i < n; i++)
			ids[i] = 3 * i;
		fg_ref_row_logprobs(o, z, 0, 1, NULL, n, NULL, k);
		fg_engine_row_logprobs(z, n, 5, k, &lp, top, &rank);
		for (int a = 0; a < k; a++)
			same &= o[0].top_id[a] == top[a].id && fabsf(o[0].top_lp[a] - top[a].lp) <= 1e-6f;
		ok(same && o[0].n_top == k && o[0].rank == 1 && rank == 1 && fabsf(o[0].lp - lp) <= 1e-6f &&
			   o[0].top_id[0] == 5 && o[0].top_id[1] == 900,
		   "row logprobs twin = the engine's CPU pass (want NULL: the argmax, rank 1; tie: lower id first)");
		for (int v = 0; v < V; v++)
			full[v] = -INFINITY;
		for (int i = 0; i < n; i++)
			full[ids[i]] = z[i];
		same = 1;
		for (int r = 0; r < 3; r++) {
			int32_t wid = r == 1 ? 1 : ids[want[r]]; /* 1: no id of the keepset */

			fg_ref_row_logprobs(&o[r], z, 0, 1, ids, n, &want[r], k);
			fg_engine_row_logprobs(full, V, wid, k, &lp, top, &rank);
			same &= o[r].rank == rank && (o[r].lp == lp || fabsf(o[r].lp - lp) <= 1e-6f);
			for (int a = 0; a < k; a++)
				same &= o[r].top_id[a] == top[a].id && fabsf(o[r].top_lp[a] - top[a].lp) <= 1e-6f;
		}
		ok(same && isinf(o[1].lp) && o[1].lp < 0 && o[1].rank == n + 1,
		   "row logprobs twin on a keepset = the engine's pass on the full row (ids mapped, a missing id -inf, last rank)");
		free(z);
		free(full);
	}
	/* attention twin against double precision, window ring fully valid */
	{
		int heads = 4, kvh = 2, hd = 8, cap = 6, pos = 9;
		float *q = fvec(heads * hd, -1, 1), *kc = fvec(kvh * cap * hd, -1, 1), *vc = fvec(kvh * cap * hd, -1, 1);
		float o[32];
		double worst = 0;

		fg_ref_attn_decode(o, q, kc, vc, heads, kvh, hd, cap, pos, 0.7f);
		for (int h = 0; h < heads; h++) {
			double sc[6], mx = -1e30, sum = 0;

			for (int j = 0; j < cap; j++) {
				double d = 0;

				for (int i = 0; i < hd; i++)
					d += (double)q[h * hd + i] * kc[((h / 2) * cap + j) * hd + i];
				sc[j] = d * 0.7;
				mx = fmax(mx, sc[j]);
			}
			for (int j = 0; j < cap; j++)
				sum += sc[j] = exp(sc[j] - mx);
			for (int i = 0; i < hd; i++) {
				double t = 0;

				for (int j = 0; j < cap; j++)
					t += sc[j] * vc[((h / 2) * cap + j) * hd + i];
				worst = fmax(worst, fabs(t / sum - o[h * hd + i]));
			}
		}
		ok(worst < 1e-6, "attention twin matches double precision (worst %.2g)", worst);
		free(q), free(kc), free(vc);
	}
	{
		float g[3] = {-1, 0, 2}, u[3] = {2, 3, 0.5f}, o[3];
		double want = 0.5 * 2 * (1 + tanh(sqrt(2 / M_PI) * (2 + 0.044715 * 8))) * 0.5;

		fg_ref_geglu(o, g, u, 3);
		ok(o[1] == 0.0f && fabs(o[2] - want) < 1e-6 && o[0] < 0, "geglu twin: gelu tanh approximation");
	}
}

/* ---- GPU against the twins ----------------------------------------------------*/

static const char *kind_name = "fma"; /* the int4 kernel under test */

static void *dnew(size_t n)
{
	void *d = NULL;

	if (fg_kmem_alloc(ctx, &d, n ? n : 4, &gerr))
		return NULL;
	fg_kmem_fill(ctx, d, 0xff, n, &gerr); /* NaN poison: an unwritten output fails */
	return d;
}

/* worst |a - b| / (atol + rtol * scale_i) over n; scale NULL = |b_i| */
static double worst_rel(const float *a, const float *b, const float *scale, size_t n, double atol, double rtol)
{
	double w = 0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]), s = scale ? scale[i] : fabs(b[i]);

		if (a[i] != a[i] || b[i] != b[i])
			return INFINITY;
		w = fmax(w, d / (atol + rtol * s));
	}
	return w;
}

/* The PLE tail the long way (the four launches' twins): h, a [n]. */
static void ple_tail_plain(float *h, float *a, const float *x, const int32_t *gp, const uint16_t *gs, const int32_t *pp,
			   const uint16_t *ps, const float *pl, const float *w1, const float *w2, float scale,
			   const float *w3, int n, int p, int group, float eps)
{
	float *g = malloc(sizeof(float) * p), *u = malloc(sizeof(float) * p), *y = malloc(sizeof(float) * n);

	fg_ref_rmsnorm_residual(h, x, w1, n, eps, 1.0f);
	fg_ref_int4_matvec(g, gp, gs, h, 1, p, n, group);
	fg_ref_geglu(u, g, pl, p);
	fg_ref_int4_matvec(y, pp, ps, u, 1, n, p, group);
	fg_ref_rmsnorm_residual(h, y, w2, n, eps, scale);
	fg_ref_rmsnorm(a, h, w3, 1, n, eps);
	free(g), free(u), free(y);
}

/* One PLE-tail case's random inputs. */
struct ple_case {
	int n, p, group;
	int32_t *gp, *pp;
	uint16_t *gs, *ps;
	float *x, *h, *pl, *w1, *w2, *w3;
};

static void ple_case_new(struct ple_case *c, int n, int p, int group)
{
	c->n = n, c->p = p, c->group = group;
	int4_rand(&c->gp, &c->gs, p, n, group);
	int4_rand(&c->pp, &c->ps, n, p, group);
	c->x = fvec(n, -4, 4), c->h = fvec(n, -2, 2), c->pl = fvec(p, -1.5f, 1.5f);
	c->w1 = fvec(n, 0.5f, 1.5f), c->w2 = fvec(n, 0.5f, 1.5f), c->w3 = fvec(n, 0.5f, 1.5f);
}

static void ple_case_free(struct ple_case *c)
{
	free(c->gp), free(c->pp), free(c->gs), free(c->ps);
	free(c->x), free(c->h), free(c->pl), free(c->w1), free(c->w2), free(c->w3);
}

/* fg_ref_ple_tail (the fused kernel's order) against the four twins it
 * replaces, on E4B's and E2B's shapes and small awkward ones. */
static void twin_ple_tail(void)
{
	static const int cs[][4] = {{2560, 256, 128, 16}, {1536, 256, 128, 8}, {64, 32, 32, 16}, {1544, 24, 8, 16},
				    {256, 512, 256, 8}};

	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		struct ple_case c;
		int n = cs[i][0], p = cs[i][1];
		float *h1 = malloc(sizeof(float) * n), *h2 = malloc(sizeof(float) * n), *a1 = malloc(sizeof(float) * n),
		      *a2 = malloc(sizeof(float) * n);
		double wh, wa;

		ple_case_new(&c, n, p, cs[i][2]);
		memcpy(h1, c.h, sizeof(float) * n), memcpy(h2, c.h, sizeof(float) * n);
		ple_tail_plain(h1, a1, c.x, c.gp, c.gs, c.pp, c.ps, c.pl, c.w1, c.w2, 0.75f, c.w3, n, p, cs[i][2], 1e-6f);
		fg_ref_ple_tail(h2, a2, c.x, c.gp, c.gs, c.pp, c.ps, c.pl, c.w1, c.w2, 0.75f, c.w3, n, p, cs[i][2], 1e-6f,
				cs[i][3]);
		wh = worst_rel(h2, h1, NULL, n, 1e-5, 1e-4);
		wa = worst_rel(a2, a1, NULL, n, 1e-5, 1e-4);
		ok(wh <= 1 && wa <= 1,
		   "ple tail twin %d x %d group %d, cluster %d: h and a within 1e-5 + 1e-4 rel of the four twins "
		   "(worst %.2g, %.2g of it)",
		   n, p, cs[i][2], cs[i][3], wh, wa);
		ple_case_free(&c);
		free(h1), free(h2), free(a1), free(a2);
	}
}

static void gpu_int4(void)
{
	static const int cases[][5] = {/* n, k, m, splits (0 = auto), group */
				       {1, 8, 1, 0, 128},      {1, 128, 1, 0, 128},   {31, 136, 1, 0, 128},
				       {32, 256, 2, 0, 128},   {33, 384, 3, 0, 128},  {65, 1032, 8, 0, 128},
				       {40, 520, 5, 3, 128},   {100, 2560, 1, 0, 128}, {257, 10240, 1, 0, 128},
				       {96, 10240, 8, 0, 128}, {2560, 256, 1, 0, 128}, {300, 2048, 4, 7, 128},
				       {80, 10240, 8, 1, 128}, {64, 10240, 1, 1, 128}, {97, 96, 1, 0, 32},
				       {33, 200, 2, 0, 32},    {70, 2560, 1, 0, 64},  {40, 1000, 3, 2, 256},
				       /* more M = 1 shapes: k short of a group, 8 chunks a row,
					* group 32 with the one-wave split rule's 2 splits */
				       {200, 264, 1, 0, 128},  {1285, 256, 1, 0, 128}, {45, 1000, 1, 0, 32}};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int n = cases[c][0], k = cases[c][1], m = cases[c][2], splits = cases[c][3], G = cases[c][4];
		int32_t *p;
		uint16_t *sc;
		float *x = fvec((size_t)m * k, -3, 3), *ref = malloc(sizeof(float) * m * n);
		float *a = malloc(sizeof(float) * m * n), *g1 = malloc(sizeof(float) * m * n),
		      *g2 = malloc(sizeof(float) * m * n);
		struct fg_kint4 *w = NULL;
		float *dx, *dy;
		int rc;

		int4_rand(&p, &sc, n, k, G);
		fg_ref_int4_matvec(ref, p, sc, x, m, n, k, G);
		int4_abs(a, p, sc, x, m, n, k, G);
		dx = dput(x, sizeof(float) * m * k);
		dy = dnew(sizeof(float) * m * n);
		rc = fg_kint4_new(ctx, &w, p, sc, n, k, G, splits, &gerr);
		if (!rc)
			rc = fg_k_int4_matvec(ctx, dy, w, dx, m, &gerr) || dget(g1, dy, sizeof(float) * m * n);
		fg_kmem_fill(ctx, dy, 0xff, sizeof(float) * m * n, &gerr);
		if (!rc)
			rc = fg_k_int4_matvec(ctx, dy, w, dx, m, &gerr) || dget(g2, dy, sizeof(float) * m * n);
		if (rc) {
			ok(0, "int4 matvec %d x %d, m %d: %s", n, k, m, gerr.msg);
		} else {
			double wr = worst_rel(g1, ref, a, (size_t)m * n, 1e-30, 2e-6);

			ok(wr <= 1.0,
			   "int4 %s matvec n %d k %d m %d group %d splits %d vs twin: |d| <= 2e-6 sum|wx| (worst %.2f of it)",
			   kind_name, n, k, m, G, w->splits, wr);
			ok(!memcmp(g1, g2, sizeof(float) * m * n), "int4 %s matvec n %d k %d m %d: two runs bit-identical",
			   kind_name, n, k, m);
			if (w->kind == FG_INT4_I8) {
				int slice, warps, same = 1;

				/* two vectors per launch: the plan of each launch */
				for (int b = 0; b < m; b += 2) {
					int mb = m - b >= 2 ? 2 : 1;

					fg_kint4_i8_plan(w, mb, &slice, &warps);
					fg_ref_int4_i8_matvec(ref + (size_t)b * n, p, sc, x + (size_t)b * k, mb, n, k, G, slice, warps);
				}
				same = !memcmp(g1, ref, sizeof(float) * m * n);
				ok(same, "int4 i8 matvec n %d k %d m %d group %d: bit-identical to its twin (slice %d, %d warps)", n,
				   k, m, G, slice, warps);
			}
		}
		fg_kint4_free(ctx, w);
		fg_kmem_free(ctx, dx);
		fg_kmem_free(ctx, dy);
		free(p), free(sc), free(x), free(ref), free(a), free(g1), free(g2);
	}
	{
		struct fg_kint4 *w = NULL;
		int32_t p[1] = {0};
		uint16_t s[1] = {0};

		fg_kint4_new(ctx, &w, p, s, 1, 8, 128, 0, &gerr);
		is_int(fg_k_int4_matvec(ctx, NULL, w, NULL, 9, &gerr), FG_EINVAL, "int4 matvec refuses m = 9");
		is_int(fg_k_int4_matvec(ctx, NULL, w, (const float *)(uintptr_t)4, 1, &gerr), FG_EINVAL,
		       "int4 matvec refuses activations not 16-byte aligned");
		is_int(fg_k_int4_matvec_geglu(ctx, NULL, w, (const float *)(uintptr_t)16, (const float *)(uintptr_t)8,
					      &gerr), FG_EINVAL, "int4 geglu matvec refuses activations not 16-byte aligned");
		fg_kint4_free(ctx, w);
	}
}

/* The i8 kernel's launches of two K splits meet in a slot per output
 * (i8_pair): the same bits as the counted path (FG_I8_PAIR=0) and the twin,
 * an output of +0 (a row of zero scales) and NaN (a NaN in either split's
 * slice) included, and each launch leaves its slots clear for the next
 * (inputs that differ from launch to launch). */
static void gpu_int4_pair(void)
{
	const int n = 200, k = 2560, G = 128;
	int32_t *p;
	uint16_t *sc;
	struct fg_kint4 *w = NULL, *w0 = NULL;
	float *x = malloc(sizeof(float) * 2 * k), *ref = malloc(sizeof(float) * 2 * n);
	float *g = malloc(sizeof(float) * 2 * n), *g0 = malloc(sizeof(float) * 2 * n);
	float *dx = dnew(sizeof(float) * 2 * k), *dy = dnew(sizeof(float) * 2 * n);
	int rc, twin = 1, same = 1, zero = 1, nan = 1, splits[2], slice[2], warps[2];

	int4_rand(&p, &sc, n, k, G);
	for (int j = 0; j < k / G; j++)
		sc[(size_t)7 * (k / G) + j] = 0; /* row 7: every scale 0, so +0 */
	rc = fg_kint4_new(ctx, &w, p, sc, n, k, G, 2, &gerr);
	setenv("FG_I8_PAIR", "0", 1);
	if (!rc)
		rc = fg_kint4_new(ctx, &w0, p, sc, n, k, G, 2, &gerr);
	unsetenv("FG_I8_PAIR");
	for (int m = 1; m <= 2 && !rc; m++)
		splits[m - 1] = fg_kint4_i8_plan(w, m, &slice[m - 1], &warps[m - 1]);
	ok(!rc && w->d_pairs && !w0->d_pairs && splits[0] == 2 && splits[1] == 2,
	   "i8 pair: two splits get slots, FG_I8_PAIR=0 none (%s)", rc ? gerr.msg : "made");
	for (int r = 0; r < 6 && !rc; r++) {
		int m = r < 4 ? 1 : 2;

		for (int i = 0; i < m * k; i++)
			x[i] = frand(-3, 3);
		if (r == 2 || r == 5)
			x[100] = NAN; /* split 0's slice */
		if (r == 3)
			x[2000] = NAN; /* split 1's */
		rc = fg_kmem_upload(ctx, dx, x, sizeof(float) * m * k, &gerr) ||
		     fg_k_int4_matvec(ctx, dy, w, dx, m, &gerr) || dget(g, dy, sizeof(float) * m * n) ||
		     fg_k_int4_matvec(ctx, dy, w0, dx, m, &gerr) || dget(g0, dy, sizeof(float) * m * n);
		if (rc)
			break;
		fg_ref_int4_i8_matvec(ref, p, sc, x, m, n, k, G, slice[m - 1], warps[m - 1]);
		same &= !memcmp(g, g0, sizeof(float) * m * n);
		for (int v = 0; v < m; v++) {
			int has_nan = r == 2 || r == 3 || (r == 5 && v == 0);

			zero &= has_nan || (g[v * n + 7] == 0.0f && !signbit(g[v * n + 7]));
			for (int i = 0; i < n; i++)
				nan &= !has_nan == !isnan(g[v * n + i]);
			if (!has_nan)
				twin &= !memcmp(g + v * n, ref + v * n, sizeof(float) * n);
		}
	}
	ok(!rc && same, "i8 pair: slots and the counted path give the same bits, NaN outputs included (%s)",
	   rc ? gerr.msg : "6 launches");
	ok(!rc && twin, "i8 pair: each launch bit-identical to the twin, its inputs new every launch");
	ok(!rc && zero && nan, "i8 pair: a row of zero scales gives +0, a NaN in either split's slice NaN");
	fg_kint4_free(ctx, w);
	fg_kint4_free(ctx, w0);
	fg_kmem_free(ctx, dx);
	fg_kmem_free(ctx, dy);
	free(p), free(sc), free(x), free(ref), free(g), free(g0);
}

/* Float bits equal, any NaN equal to any NaN. */
static int same_bits(const float *a, const float *b, int n)
{
	for (int i = 0; i < n; i++)
		if (isnan(a[i]) ? !isnan(b[i]) : memcmp(a + i, b + i, sizeof(float)))
			return 0;
	return 1;
}

/* fg_k_int4_matvec_red, the decode step's launches into two alternating
 * buffers: a matrix of two K splits adds into a zeroed buffer and gives
 * fg_k_int4_matvec's bits (and the twin's), a NaN in either split's slice
 * and a row of zero scales (+0) included, and with an up vector
 * fg_k_int4_matvec_geglu's; each launch zeroes the other buffer for the
 * next; a matrix of one split writes its buffer whatever it held, and
 * zeroes the other too. */
static void gpu_int4_red(void)
{
	const int n = 200, k = 2560, G = 128;
	int32_t *p;
	uint16_t *sc;
	struct fg_kint4 *w = NULL, *w1 = NULL;
	float *x = malloc(sizeof(float) * k), *ref = malloc(sizeof(float) * n), *g = malloc(sizeof(float) * n);
	float *g0 = malloc(sizeof(float) * n), *z = malloc(sizeof(float) * n);
	float *dx = dnew(sizeof(float) * k), *dy = dnew(sizeof(float) * n), *du = dnew(sizeof(float) * k), *db[2];
	int rc, twin = 1, same = 1, cleared = 1, zero = 1, slice, warps;

	db[0] = dnew(sizeof(float) * n), db[1] = dnew(sizeof(float) * n);
	int4_rand(&p, &sc, n, k, G);
	for (int j = 0; j < k / G; j++)
		sc[(size_t)7 * (k / G) + j] = 0; /* row 7: every scale 0, so +0 */
	rc = fg_kint4_new(ctx, &w, p, sc, n, k, G, 2, &gerr) || fg_kint4_new(ctx, &w1, p, sc, n, k, G, 1, &gerr) ||
	     fg_kmem_fill(ctx, db[0], 0, sizeof(float) * n, &gerr) || fg_kmem_fill(ctx, db[1], 0, sizeof(float) * n, &gerr);
	ok(!rc && fg_k_int4_red(w) && !fg_k_int4_red(w1) && fg_kint4_i8_plan(w, 1, &slice, &warps) == 2,
	   "i8 red: a matrix of two splits adds into its outputs, one of one split does not (%s)",
	   rc ? gerr.msg : "made");
	for (int r = 0; r < 8 && !rc; r++) {
		float *y = db[r & 1], *other = db[(r + 1) & 1];
		struct fg_kint4 *mw = r >= 6 ? w1 : w;
		const float *up = r == 4 || r == 7 ? du : NULL; /* GeGLU: gelu_tanh(x) * up */

		for (int i = 0; i < k; i++)
			x[i] = frand(-3, 3);
		if (r == 2)
			x[100] = NAN; /* split 0's slice */
		if (r == 3)
			x[2000] = NAN; /* split 1's */
		if (r == 6) /* one split writes whatever the buffer holds */
			rc = fg_kmem_upload(ctx, y, x, sizeof(float) * n, &gerr);
		rc = rc || fg_kmem_upload(ctx, dx, x, sizeof(float) * k, &gerr) ||
		     (up && fg_kmem_upload(ctx, du, x + 1, sizeof(float) * (k - 1), &gerr)) ||
		     fg_kmem_upload(ctx, other, x + 300, sizeof(float) * n, &gerr) ||
		     fg_k_int4_matvec_red(ctx, y, mw, dx, up, other, n, &gerr) || dget(g, y, sizeof(float) * n) ||
		     dget(z, other, sizeof(float) * n) ||
		     (up ? fg_k_int4_matvec_geglu(ctx, dy, mw, dx, up, &gerr) : fg_k_int4_matvec(ctx, dy, mw, dx, 1, &gerr)) ||
		     dget(g0, dy, sizeof(float) * n);
		if (rc)
			break;
		fg_kint4_i8_plan(mw, 1, &slice, &warps);
		fg_ref_int4_i8_matvec(ref, p, sc, x, 1, n, k, G, slice, warps);
		same &= same_bits(g, g0, n);
		if (r != 2 && r != 3 && !up)
			twin &= !memcmp(g, ref, sizeof(float) * n), zero &= g[7] == 0.0f && !signbit(g[7]);
		for (int i = 0; i < n; i++) /* the next launch adds into it */
			cleared &= z[i] == 0.0f && !signbit(z[i]);
	}
	ok(!rc && same,
	   "i8 red: fg_k_int4_matvec's bits (two splits: its slots), with up fg_k_int4_matvec_geglu's, NaN outputs NaN "
	   "(%s)",
	   rc ? gerr.msg : "8 launches");
	ok(!rc && twin && zero, "i8 red: bit-identical to the twin, a row of zero scales +0");
	ok(!rc && cleared, "i8 red: every launch zeroes the other buffer after its wait");
	is_int(fg_k_int4_matvec_red(ctx, dy, w, dx, NULL, NULL, 5, &gerr), FG_EINVAL, "i8 red refuses a count with no buffer");
	fg_kint4_free(ctx, w);
	fg_kint4_free(ctx, w1);
	fg_kmem_free(ctx, dx), fg_kmem_free(ctx, dy), fg_kmem_free(ctx, du), fg_kmem_free(ctx, db[0]);
	fg_kmem_free(ctx, db[1]);
	free(p), free(sc), free(x), free(ref), free(g), free(g0), free(z);
}

/* i8_plan's two splits of up to 2048 activations: K 4096 (o of E4B's
 * full-attention layers) takes two where a block's stage of 1280 would take
 * four (FG_I8_PAIR_STAGE=0), K 10240 (down) keeps more than two, and the
 * two-split launch gives the twin's bits. */
static void gpu_int4_pair_stage(void)
{
	const int n = 2560, G = 128, ks[3] = {4096, 4096, 10240};
	int rc = 0, got[3] = {0, 0, 0}, twin = 0;

	for (int c = 0; c < 3 && !rc; c++) {
		int32_t *p;
		uint16_t *sc;
		struct fg_kint4 *w = NULL;
		int slice, warps;

		int4_rand(&p, &sc, n, ks[c], G);
		if (c == 1)
			setenv("FG_I8_PAIR_STAGE", "0", 1);
		rc = fg_kint4_new(ctx, &w, p, sc, n, ks[c], G, 0, &gerr);
		unsetenv("FG_I8_PAIR_STAGE");
		if (!rc)
			got[c] = fg_kint4_i8_plan(w, 1, &slice, &warps);
		if (!rc && c == 0) {
			float *x = fvec(ks[c], -3, 3), *ref = malloc(sizeof(float) * n), *g = malloc(sizeof(float) * n);
			float *dx = dput(x, sizeof(float) * ks[c]), *dy = dnew(sizeof(float) * n);

			rc = fg_k_int4_matvec(ctx, dy, w, dx, 1, &gerr) || dget(g, dy, sizeof(float) * n);
			fg_ref_int4_i8_matvec(ref, p, sc, x, 1, n, ks[c], G, slice, warps);
			twin = !rc && !memcmp(g, ref, sizeof(float) * n);
			fg_kmem_free(ctx, dx), fg_kmem_free(ctx, dy);
			free(x), free(ref), free(g);
		}
		fg_kint4_free(ctx, w);
		free(p), free(sc);
	}
	ok(!rc && got[0] == 2 && got[1] > 2 && got[2] > 2,
	   "i8 plan: K 4096 in 2 splits (FG_I8_PAIR_STAGE=0: %d), K 10240 in %d (%s)", got[1], got[2],
	   rc ? gerr.msg : "made");
	ok(!rc && twin, "i8 plan: K 4096 in two splits bit-identical to the twin");
}

/* The i8 kernel's ways of meeting its K splits: slots, alternating
 * buffers, the two-split plan (the full run and --i8 alike). */
static void gpu_i8_splits(void)
{
	gpu_int4_pair();
	gpu_int4_red();
	gpu_int4_pair_stage();
}

/* Dependent matvecs back to back (y2 = W2 (W1 x), y3 = W3 y2): with
 * programmatic dependent launch each starts before the previous ends and must
 * still read finished inputs; PDL on and off give the same bits. */
static void gpu_int4_chain(void)
{
	int dims[4] = {2560, 10240, 2560, 2048};
	struct fg_kint4 *w[3] = {0};
	int32_t *p[3];
	uint16_t *sc[3];
	float *x = fvec(dims[0], -1, 1), *h[4], *g_on = malloc(4 * dims[3]), *g_off = malloc(4 * dims[3]),
	      *g_pf = malloc(4 * dims[3]);
	void *d[4];
	int rc = 0;

	h[0] = x;
	d[0] = dput(x, 4 * dims[0]);
	for (int i = 0; i < 3; i++) {
		int32_t *pp;
		uint16_t *ss;

		int4_rand(&pp, &ss, dims[i + 1], dims[i], 128);
		p[i] = pp, sc[i] = ss;
		h[i + 1] = malloc(4 * dims[i + 1]);
		fg_ref_int4_matvec(h[i + 1], pp, ss, h[i], 1, dims[i + 1], dims[i], 128);
		d[i + 1] = dnew(4 * dims[i + 1]);
		rc = rc || fg_kint4_new(ctx, &w[i], pp, ss, dims[i + 1], dims[i], 128, 0, &gerr);
	}
	/* pass 2: each matvec also prefetches the next ones' weights into L2
	 * (more ranges than a launch takes: the rest are dropped) */
	int lv0 = fg_kctx_prefetch_level(ctx), pf_got = 0;

	for (int pass = 0; pass < 3 && !rc; pass++) {
		int pf_on = fg_kctx_set_prefetch(ctx, pass == 2 ? 2 : lv0) == 2;

		if (pass == 2)
			pf_got = pf_on;

		fg_kctx_set_pdl(ctx, pass != 1);
		for (int rep = 0; rep < 3 && !rc; rep++)
			for (int i = 0; i < 3 && !rc; i++) {
				if (pf_on) {
					fg_kint4_prefetch(ctx, w[(i + 1) % 3], 0, 0.5);
					fg_kint4_prefetch(ctx, w[(i + 1) % 3], 0.5, 1);
					fg_kint4_prefetch(ctx, w[(i + 2) % 3], 0, 1);
				}
				rc = fg_k_int4_matvec(ctx, d[i + 1], w[i], d[i], 1, &gerr);
			}
		rc = rc || dget(pass == 0 ? g_on : pass == 1 ? g_off : g_pf, d[3], 4 * dims[3]);
		fg_kmem_fill(ctx, d[1], 0xff, 4 * dims[1], &gerr);
		fg_kmem_fill(ctx, d[2], 0xff, 4 * dims[2], &gerr);
		fg_kmem_fill(ctx, d[3], 0xff, 4 * dims[3], &gerr);
	}
	fg_kctx_set_pdl(ctx, 1);
	{
		double mx = 0, md = 0;

		for (int i = 0; i < dims[3]; i++) {
			mx = fmax(mx, fabs(h[3][i]));
			md = fmax(md, fabs((double)g_on[i] - h[3][i]));
		}
		ok(!rc && !memcmp(g_on, g_off, 4 * dims[3]),
		   "three dependent int4 %s matvecs: PDL on and off give identical bits %s", kind_name, rc ? gerr.msg : "");
		ok(!rc && !memcmp(g_on, g_pf, 4 * dims[3]),
		   "... and with L2 prefetches of the other matrices queued on each launch (prefetch %s here)",
		   pf_got ? "on" : "off: before sm_90");
		fg_kctx_set_prefetch(ctx, lv0);
		ok(!rc && md <= 1e-5 * mx, "... and match the twins within 1e-5 of max|y| (max |d| %.3g, max|y| %.3g)", md,
		   mx);
	}
	for (int i = 0; i < 3; i++) {
		fg_kint4_free(ctx, w[i]);
		free(p[i]), free(sc[i]), free(h[i + 1]);
	}
	for (int i = 0; i < 4; i++)
		fg_kmem_free(ctx, d[i]);
	free(x), free(g_on), free(g_off), free(g_pf);
}

static void gpu_bf16_matvec(void)
{
	static const int cases[][3] = {{1, 8, 0},    {31, 264, 0}, {33, 2560, 1}, {130, 1000, 1}, {4099, 64, 0},
				       {48, 12, 0},  {64, 4, 1},   {7, 13, 0},    {33, 1, 0}};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int n = cases[c][0], k = cases[c][1], use_rows = cases[c][2], total = n + 7;
		uint16_t *w = bvec((size_t)total * k, -0.1f, 0.1f);
		float *x = fvec(k, -2, 2), *ref = malloc(4 * n), *g1 = malloc(4 * n), *g2 = malloc(4 * n), *a = malloc(4 * n);
		int32_t *rows = malloc(4 * n);
		void *dw, *dx, *dy, *dr = NULL;
		int rc;

		for (int r = 0; r < n; r++)
			rows[r] = (r * 7 + 3) % total;
		fg_ref_bf16_matvec(ref, w, x, use_rows ? rows : NULL, n, k);
		for (int r = 0; r < n; r++) {
			double t = 0;

			for (int e = 0; e < k; e++)
				t += fabs(fg_ref_bf16(w[(size_t)(use_rows ? rows[r] : r) * k + e]) * x[e]);
			a[r] = (float)t;
		}
		dw = dput(w, (size_t)2 * total * k);
		dx = dput(x, 4 * k);
		dy = dnew(4 * n);
		if (use_rows)
			dr = dput(rows, 4 * n);
		rc = fg_k_bf16_matvec(ctx, dy, dw, dx, dr, n, k, &gerr) || dget(g1, dy, 4 * n) ||
		     fg_k_bf16_matvec(ctx, dy, dw, dx, dr, n, k, &gerr) || dget(g2, dy, 4 * n);
		if (rc)
			ok(0, "bf16 matvec %d x %d: %s", n, k, gerr.msg);
		else {
			double wr = worst_rel(g1, ref, a, n, 1e-30, 2e-6);

			ok(wr <= 1.0 && !memcmp(g1, g2, 4 * n),
			   "bf16 matvec n %d k %d%s vs twin (|d| <= 2e-6 sum|wx|, worst %.2f), two runs identical", n, k,
			   use_rows ? " rows subset" : "", wr);
		}
		fg_kmem_free(ctx, dw), fg_kmem_free(ctx, dx), fg_kmem_free(ctx, dy), fg_kmem_free(ctx, dr);
		free(w), free(x), free(ref), free(g1), free(g2), free(a), free(rows);
	}
}

/* fg_k_rows_matvec (a prompt chunk's rows through a bf16 / f32 matrix):
 * every row's bytes equal the one-row fg_k_bf16_matvec / fg_k_f32_matvec
 * launch on that row. */
static void gpu_rows_matvec(void)
{
	static const int cases[][4] = {{1, 8, 1, 1},   {31, 264, 3, 1}, {33, 2560, 8, 1},  {130, 1000, 9, 1},
				       {300, 64, 17, 1}, {5, 4, 2, 0},   {33, 260, 8, 0},   {129, 2560, 11, 0},
				       {48, 12, 5, 1},   {64, 4, 9, 1},  {9, 6, 4, 0},      {70, 3, 17, 0}};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int n = cases[c][0], k = cases[c][1], T = cases[c][2], bf = cases[c][3], same = 1, rc = 0;
		size_t wb = (size_t)n * k * (bf ? 2 : 4);
		void *w = bf ? (void *)bvec((size_t)n * k, -0.1f, 0.1f) : (void *)fvec((size_t)n * k, -0.1f, 0.1f);
		float *x = fvec((size_t)T * k, -2, 2), *ga = malloc(4 * (size_t)T * n), *gb = malloc(4 * (size_t)T * n);
		void *dw = dput(w, wb), *dx = dput(x, 4 * (size_t)T * k), *dy = dnew(4 * (size_t)T * n);

		if (T % 3 == 0) /* a row of zeros, a row of huge values */
			memset(x, 0, 4 * (size_t)k), x[(size_t)(T - 1) * k] = 3e30f;
		rc = fg_kmem_upload(ctx, dx, x, 4 * (size_t)T * k, &gerr);
		for (int t = 0; t < T && !rc; t++)
			rc = (bf ? fg_k_bf16_matvec(ctx, (float *)dy + (size_t)t * n, dw, (float *)dx + (size_t)t * k, NULL,
						    n, k, &gerr)
				 : fg_k_f32_matvec(ctx, (float *)dy + (size_t)t * n, dw, (float *)dx + (size_t)t * k, n, k,
						   &gerr));
		rc = rc || dget(ga, dy, 4 * (size_t)T * n) || fg_kmem_fill(ctx, dy, 0x7f, 4 * (size_t)T * n, &gerr) ||
		     fg_k_rows_matvec(ctx, dy, dw, bf, dx, T, n, k, &gerr) || dget(gb, dy, 4 * (size_t)T * n);
		if (rc)
			ok(0, "rows matvec %d x %d, %d rows: %s", n, k, T, gerr.msg);
		else {
			same = !memcmp(ga, gb, 4 * (size_t)T * n);
			ok(same, "%s rows matvec n %d k %d, %d rows: every row bit-identical to its one-row launch",
			   bf ? "bf16" : "f32", n, k, T);
		}
		fg_kmem_free(ctx, dw), fg_kmem_free(ctx, dx), fg_kmem_free(ctx, dy);
		free(w), free(x), free(ga), free(gb);
	}
	ok(fg_k_rows_matvec(ctx, NULL, NULL, 1, NULL, 0, 8, 8, &gerr) == FG_EINVAL && strstr(gerr.msg, "0 rows"),
	   "rows matvec with 0 rows: FG_EINVAL (%s)", gerr.msg);
}

static void gpu_norms(void)
{
	static const int cases[][2] = {{1, 1}, {3, 7}, {8, 256}, {2, 1000}, {1, 2560}, {1, 4097}};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int rows = cases[c][0], n = cases[c][1];
		size_t tot = (size_t)rows * n;
		float *x = fvec(tot, -4, 4), *w = fvec(n, 0.5f, 2), *ref = malloc(4 * tot), *g1 = malloc(4 * tot),
		      *g2 = malloc(4 * tot), *refn = malloc(4 * tot);
		void *dx = dput(x, 4 * tot), *dw = dput(w, 4 * n), *dy = dnew(4 * tot);
		int rc;

		fg_ref_rmsnorm(ref, x, w, rows, n, 1e-6f);
		fg_ref_rmsnorm(refn, x, NULL, rows, n, 1e-6f);
		rc = fg_k_rmsnorm(ctx, dy, dx, dw, rows, n, 1e-6f, &gerr) || dget(g1, dy, 4 * tot) ||
		     fg_k_rmsnorm(ctx, dy, dx, NULL, rows, n, 1e-6f, &gerr) || dget(g2, dy, 4 * tot);
		ok(!rc && worst_rel(g1, ref, NULL, tot, 1e-6, 1e-5) <= 1 && worst_rel(g2, refn, NULL, tot, 1e-6, 1e-5) <= 1,
		   "rmsnorm %d rows x %d, with and without weight, vs twin (1e-5 rel + 1e-6) %s", rows, n,
		   rc ? gerr.msg : "");
		if (rows == 1) {
			float *h = fvec(n, -1, 1), *hr = malloc(4 * n);
			void *dh = dput(h, 4 * n);

			memcpy(hr, h, 4 * n);
			fg_ref_rmsnorm_residual(hr, x, w, n, 1e-6f, 0.75f);
			rc = fg_k_rmsnorm_residual(ctx, dh, dx, dw, n, 1e-6f, 0.75f, &gerr) || dget(g1, dh, 4 * n);
			ok(!rc && worst_rel(g1, hr, NULL, n, 1e-6, 1e-5) <= 1,
			   "rmsnorm + residual + layer scale, n %d, vs twin %s", n, rc ? gerr.msg : "");
			fg_kmem_free(ctx, dh);
			free(h), free(hr);
		}
		fg_kmem_free(ctx, dx), fg_kmem_free(ctx, dw), fg_kmem_free(ctx, dy);
		free(x), free(w), free(ref), free(g1), free(g2), free(refn);
	}
}

static void gpu_rope(void)
{
	static const int cases[][4] = {/* heads, head_dim, rot_pairs, pos */
				       {1, 2, 1, 1},      {3, 256, 128, 0},    {8, 256, 128, 511},
				       {2, 512, 64, 1000}, {1, 512, 64, 30000}, {4, 6, 0, 7}};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int heads = cases[c][0], hd = cases[c][1], rp = cases[c][2], pos = cases[c][3];
		size_t n = (size_t)heads * hd;
		float *x = fvec(n, -2, 2), *ref = malloc(4 * n), *g = malloc(4 * n);
		float theta = hd == 512 ? 1e6f : 1e4f;
		void *dx = dput(x, 4 * n), *dp = dput(&pos, 4);
		int rc;

		memcpy(ref, x, 4 * n);
		fg_ref_rope(ref, heads, hd, rp, theta, pos);
		rc = fg_k_rope(ctx, dx, heads, hd, rp, theta, dp, &gerr) || dget(g, dx, 4 * n);
		ok(!rc && worst_rel(g, ref, NULL, n, 4e-6, 4e-6) <= 1,
		   "rope heads %d dim %d rotated pairs %d pos %d vs twin (4e-6 abs + rel) %s", heads, hd, rp, pos,
		   rc ? gerr.msg : "");
		fg_kmem_free(ctx, dx), fg_kmem_free(ctx, dp);
		free(x), free(ref), free(g);
	}
	/* fg_k_rope_table: E4B's two frequency tables (default RoPE over 128
	 * pairs; proportional over 256, a quarter rotating) and odd sizes, each
	 * turn against the host's (engine/cpu's fg_cpu_rope_scaled turning a
	 * (1, 0) pair at scale 1 leaves its cos and sin as they are): exact, or
	 * at most one float ulp away where the host's and CUDA's double cos
	 * round differently; the count is printed */
	static const int tc[][3] = {/* head_dim, proportional, rows */
				    {256, 0, 9000}, {512, 1, 9000}, {6, 0, 1}, {2, 0, 70000}};

	for (size_t c = 0; c < sizeof(tc) / sizeof(tc[0]); c++) {
		int d = tc[c][0], half = d / 2, rows = tc[c][2];
		size_t n = (size_t)half * rows * 2, exact = 0, near = 0;
		float *inv = malloc(4 * half), *t = malloc(4 * n), *u = malloc(4 * d);
		void *dinv, *dt = dnew(4 * n);
		int rc;

		fg_cpu_rope_freqs(inv, d, tc[c][1] ? 1e6 : 1e4, tc[c][1], 0.25, 1.0);
		dinv = dput(inv, 4 * half);
		rc = fg_k_rope_table(ctx, dt, dinv, half, rows, &gerr) || dget(t, dt, 4 * n);
		for (int p = 0; p < rows && !rc; p++) {
			/* pair i of (1, 0) turned by engine/cpu: (cos, sin) at u[i], u[i + half] */
			for (int i = 0; i < d; i++)
				u[i] = i < half ? 1.0f : 0.0f;
			fg_cpu_rope_scaled(u, d, inv, p, 1.0f);
			for (int i = 0; i < half; i++)
				for (int j = 0; j < 2; j++) {
					float gv = t[((size_t)p * half + i) * 2 + j], h = u[i + j * half];

					exact += !memcmp(&gv, &h, 4);
					near += gv == nextafterf(h, INFINITY) || gv == nextafterf(h, -INFINITY);
				}
		}
		printf("# rope table dim %d: %zu of %zu turns exact, %zu one ulp away\n", d, exact, n, near);
		ok(!rc && exact + near == n, "rope table head_dim %d%s, %d positions = the host's cos and sin (<= 1 ulp) %s",
		   d, tc[c][1] ? " (proportional)" : "", rows, rc ? gerr.msg : "");
		fg_kmem_free(ctx, dinv), fg_kmem_free(ctx, dt);
		free(inv), free(t), free(u);
	}
	{
		int rc = fg_k_rope_table(ctx, NULL, NULL, 0, 5, &gerr);

		ok(rc == FG_EINVAL, "rope table refuses 0 pairs: %s", gerr.msg);
	}
}

static void gpu_small_ops(void)
{
	static const int ns[] = {1, 255, 257, 10240};

	for (size_t c = 0; c < sizeof(ns) / sizeof(ns[0]); c++) {
		int n = ns[c];
		float *gt = fvec(n, -6, 6), *up = fvec(n, -3, 3), *ref = malloc(4 * n), *g = malloc(4 * n);
		void *dg = dput(gt, 4 * n), *du = dput(up, 4 * n), *dy = dnew(4 * n);
		int rc;

		fg_ref_geglu(ref, gt, up, n);
		rc = fg_k_geglu(ctx, dy, dg, du, n, &gerr) || dget(g, dy, 4 * n);
		ok(!rc && worst_rel(g, ref, NULL, n, 1e-6, 4e-6) <= 1, "geglu n %d vs twin (4e-6 rel + 1e-6) %s", n,
		   rc ? gerr.msg : "");
		fg_kmem_free(ctx, dg), fg_kmem_free(ctx, du), fg_kmem_free(ctx, dy);
		free(gt), free(up), free(ref), free(g);
	}
	{
		int v = 5, n = 100, id = 3;
		uint16_t *t = bvec((size_t)v * n, -1, 1);
		float ref[100], g[100];
		void *dt = dput(t, 2 * v * n), *did = dput(&id, 4), *dy = dnew(4 * n);
		int rc;

		float *tf = malloc(4 * (size_t)v * n), g32[100];
		void *dtf;

		fg_ref_embed(ref, t, id, n, 50.596443f);
		rc = fg_k_embed(ctx, dy, dt, did, n, 50.596443f, &gerr) || dget(g, dy, 4 * n);
		ok(!rc && !memcmp(g, ref, sizeof(g)), "embedding lookup + scale identical to twin %s", rc ? gerr.msg : "");
		/* the f32-table variant (F16 / F32 checkpoints): the table widened
		 * exactly gives the bf16 kernel's bits */
		for (int i = 0; i < v * n; i++)
			tf[i] = fg_bf16_to_f32(t[i]);
		dtf = dput(tf, 4 * (size_t)v * n);
		rc = fg_k_embed_f32(ctx, dy, dtf, did, n, 50.596443f, &gerr) || dget(g32, dy, 4 * n);
		ok(!rc && !memcmp(g32, g, sizeof(g)), "f32-table embedding = bf16 embedding bit for bit %s",
		   rc ? gerr.msg : "");
		fg_kmem_free(ctx, dt), fg_kmem_free(ctx, dtf), fg_kmem_free(ctx, did), fg_kmem_free(ctx, dy);
		free(t), free(tf);
	}
	{
		static const int cases[][2] = {{1, 7}, {3, 256}, {42, 256}};

		for (size_t c = 0; c < 3; c++) {
			int layers = cases[c][0], dim = cases[c][1], v = 4, id = 2;
			size_t n = (size_t)layers * dim;
			uint16_t *t = bvec(v * n, -1, 1);
			float *proj = fvec(n, -20, 20), *nw = fvec(dim, 0.5f, 1.5f), *ref = malloc(4 * n), *g = malloc(4 * n);
			void *dt = dput(t, 2 * v * n), *did = dput(&id, 4), *dp = dput(proj, 4 * n), *dn = dput(nw, 4 * dim),
			     *dy = dnew(4 * n);
			int rc;

			float *tf = malloc(4 * v * n), *g32 = malloc(4 * n);
			void *dtf;

			fg_ref_ple(ref, t, id, proj, nw, layers, dim, 16.0f, 1.0f / 50.596443f, 1e-6f);
			rc = fg_k_ple(ctx, dy, dt, did, dp, dn, layers, dim, 16.0f, 1.0f / 50.596443f, 1e-6f, &gerr) ||
			     dget(g, dy, 4 * n);
			ok(!rc && worst_rel(g, ref, NULL, n, 1e-5, 1e-5) <= 1,
			   "per-layer inputs %d layers x %d vs twin (1e-5 rel + abs) %s", layers, dim, rc ? gerr.msg : "");
			for (size_t i = 0; i < v * n; i++)
				tf[i] = fg_bf16_to_f32(t[i]);
			dtf = dput(tf, 4 * v * n);
			rc = fg_k_ple_f32(ctx, dy, dtf, did, dp, dn, layers, dim, 16.0f, 1.0f / 50.596443f, 1e-6f, &gerr) ||
			     dget(g32, dy, 4 * n);
			ok(!rc && !memcmp(g32, g, 4 * n), "per-layer inputs %d x %d: f32 table = bf16 table bit for bit %s",
			   layers, dim, rc ? gerr.msg : "");
			fg_kmem_free(ctx, dt), fg_kmem_free(ctx, dtf), fg_kmem_free(ctx, did), fg_kmem_free(ctx, dp),
				fg_kmem_free(ctx, dn), fg_kmem_free(ctx, dy);
			free(t), free(tf), free(g32), free(proj), free(nw), free(ref), free(g);
		}
	}
}

/* attention_bias's add: the same fp32 additions as the twin, so the same bits */
static void gpu_add_bias(void)
{
	static const int ns[] = {1, 255, 257, 4099};

	for (size_t c = 0; c < sizeof(ns) / sizeof(ns[0]); c++) {
		int n = ns[c];
		float *y = fvec(n, -30, 30), *b = fvec(n, -2, 2), *ref = malloc(4 * n), *g = malloc(4 * n);
		void *dy = dput(y, 4 * n), *db = dput(b, 4 * n);
		int rc;

		memcpy(ref, y, 4 * n);
		fg_ref_add_bias(ref, b, n);
		rc = !dy || !db || fg_k_add_bias(ctx, dy, db, n, &gerr) || dget(g, dy, 4 * n);
		ok(!rc && !memcmp(g, ref, 4 * n), "bias add n %d identical to twin %s", n, rc ? gerr.msg : "");
		fg_kmem_free(ctx, dy), fg_kmem_free(ctx, db);
		free(y), free(b), free(ref), free(g);
	}
}

/* The mixture-of-experts kernels against their twins: the router's choice
 * (ids exactly, an exact tie to the lower index, weights within 1e-6 rel),
 * the routed matvec on bf16 and f32 rows (the twin's bits, the twin within
 * 2e-6 sum|wx| of a double sum; awkward n and k, rows off 16 bytes, one
 * input for all slots or one per slot at an odd stride, two runs identical,
 * an id out of range giving NaN rows), GeGLU per slot, the weighted sum with its norms. */
static void gpu_moe(void)
{
	static const int routes[][2] = {{1, 1}, {6, 2}, {5, 5}, {128, 8}, {33, 32}, {7, 3},
					/* many experts a lane; a tie across lanes; -inf logits; NaN and
					 * more than 1024 experts (the one-thread path) */
					{1000, 32}, {70, 3}, {40, 6}, {9, 3}, {1100, 4}};
	static const int mvs[][5] = {/* E, slots, n, k, bf16 (k % 8 or k % 4: rows off 16 bytes) */
				     {1, 1, 1, 1, 1},       {5, 2, 33, 24, 0},     {6, 3, 129, 100, 1},
				     {4, 8, 64, 704, 1},    {3, 2, 31, 7, 0},      {9, 4, 300, 2816, 1},
				     {2, 3, 1, 2820, 0},    {7, 2, 1, 13, 1},      {5, 3, 77, 1001, 0},
				     {3, 5, 1408, 2816, 1}, {4, 8, 2816, 704, 1},  {2, 2, 45, 262, 1},
				     {3, 2, 500, 1028, 0}};
	static const int combs[][2] = {{1, 1}, {2, 64}, {8, 2816}, {3, 1025}};

	for (size_t c = 0; c < sizeof(routes) / sizeof(routes[0]); c++) {
		int E = routes[c][0], K = routes[c][1], rc;
		float *lg = fvec(E, -4, 4), *es = fvec(E, 0.5f, 2), rw[FG_MOE_MAX_K], gw[FG_MOE_MAX_K];
		int32_t ri[FG_MOE_MAX_K], gi[FG_MOE_MAX_K];
		void *dl, *de, *di = dnew(4 * K), *dw = dnew(4 * K);

		if (E == 6) /* an exact three-way tie at the top: experts 1 and 3 win, not 4 */
			lg[1] = lg[3] = lg[4] = 9.0f;
		if (E == 7) /* a tie at the k-th place: 2 beats 5 */
			lg[0] = 8.0f, lg[2] = lg[5] = 5.0f, lg[6] = 6.0f;
		if (E == 70) /* a tie across lanes: 37 beats 69, both beat the rest */
			lg[69] = lg[37] = lg[5] = 7.0f, lg[1] = 9.0f;
		if (E == 40) /* -inf logits: chosen last, weight 0 */
			for (int i = 0; i < E; i++)
				lg[i] = i < 4 ? (float)i : -INFINITY;
		if (E == 9) /* a NaN: the one-thread path, ids as the twin's */
			lg[4] = NAN;
		dl = dput(lg, 4 * E), de = dput(es, 4 * E);
		fg_ref_moe_route(ri, rw, lg, es, E, K);
		rc = !dl || !de || !di || !dw || fg_k_moe_route(ctx, di, dw, dl, de, E, K, &gerr) ||
		     dget(gi, di, 4 * K) || dget(gw, dw, 4 * K);
		ok(!rc && !memcmp(gi, ri, 4 * K) && (E == 9 || worst_rel(gw, rw, NULL, K, 1e-7, 1e-6) <= 1) &&
			   (E != 6 || (gi[0] == 1 && gi[1] == 3)) && (E != 7 || (gi[0] == 0 && gi[1] == 2 && gi[2] == 6)) &&
			   (E != 70 || (gi[0] == 1 && gi[1] == 5 && gi[2] == 37)) &&
			   (E != 40 || (gi[4] < 4 ? 0 : gw[4] == 0.0f)),
		   "moe route %d experts top %d: ids (ascending) = twin's, weights within 1e-6 rel %s", E, K,
		   rc ? gerr.msg : "");
		fg_kmem_free(ctx, dl), fg_kmem_free(ctx, de), fg_kmem_free(ctx, di), fg_kmem_free(ctx, dw);
		free(lg), free(es);
	}
	for (size_t c = 0; c < sizeof(mvs) / sizeof(mvs[0]); c++) {
		int E = mvs[c][0], S = mvs[c][1], n = mvs[c][2], k = mvs[c][3], bf = mvs[c][4], rc;
		size_t ne = (size_t)E * n * k, stride = c % 2 ? 0 : (size_t)k + 3, ny = (size_t)S * n;
		void *w = bf ? (void *)bvec(ne, -0.1f, 0.1f) : (void *)fvec(ne, -0.1f, 0.1f);
		float *x = fvec((stride ? (size_t)S : 1) * ((size_t)k + 3), -2, 2), *ref = malloc(4 * ny), *g1 = malloc(4 * ny),
		      *g2 = malloc(4 * ny), *a = malloc(4 * ny), *ex = malloc(4 * ny);
		int32_t idx[8];
		void *dw, *dx, *di, *dy;

		for (int j = 0; j < S; j++)
			idx[j] = (2 * j + 1) % E;
		fg_ref_moe_matvec(ref, w, bf, idx, E, x, stride, S, n, k);
		for (int j = 0; j < S; j++)
			for (int r = 0; r < n; r++) {
				double t = 0, d = 0;
				size_t row = ((size_t)idx[j] * n + r) * k;

				for (int e = 0; e < k; e++) {
					double p = (bf ? fg_ref_bf16(((uint16_t *)w)[row + e]) : ((float *)w)[row + e]) *
						   (double)x[j * stride + e];

					t += fabs(p), d += p;
				}
				a[(size_t)j * n + r] = (float)t;
				ex[(size_t)j * n + r] = (float)d;
			}
		dw = dput(w, ne * (bf ? 2 : 4));
		dx = dput(x, 4 * (stride ? (size_t)S : 1) * ((size_t)k + 3));
		di = dput(idx, 4 * S);
		dy = dnew(4 * ny);
		rc = !dw || !dx || !di || !dy ||
		     fg_k_moe_matvec(ctx, dy, dw, bf, di, E, dx, stride, S, n, k, &gerr) || dget(g1, dy, 4 * ny) ||
		     fg_k_moe_matvec(ctx, dy, dw, bf, di, E, dx, stride, S, n, k, &gerr) || dget(g2, dy, 4 * ny);
		ok(worst_rel(ref, ex, a, ny, 1e-30, 2e-6) <= 1,
		   "moe matvec twin %d experts, %d slots, %d x %d %s: within 2e-6 sum|wx| of a double sum", E, S, n, k,
		   bf ? "bf16" : "f32");
		if (!rc && memcmp(g1, ref, 4 * ny))
			for (size_t i = 0; i < ny; i++)
				if (memcmp(g1 + i, ref + i, 4)) {
					printf("# first difference at slot %zu row %zu: %.9g, twin %.9g\n", i / n, i % n,
					       g1[i], ref[i]);
					break;
				}
		ok(!rc && !memcmp(g1, ref, 4 * ny) && !memcmp(g1, g2, 4 * ny),
		   "moe matvec %d experts, %d slots, %d x %d %s, %s input: the twin's bits, two runs identical %s", E, S,
		   n, k, bf ? "bf16" : "f32", stride ? "strided" : "shared", rc ? gerr.msg : "");
		if (!rc && S > 1) {
			int nan0 = 1;

			idx[0] = E; /* out of range: NaN rows for that slot only */
			rc = fg_kmem_upload(ctx, di, idx, 4, &gerr) ||
			     fg_k_moe_matvec(ctx, dy, dw, bf, di, E, dx, stride, S, n, k, &gerr) || dget(g2, dy, 4 * ny);
			for (int r = 0; r < n; r++)
				nan0 &= isnan(g2[r]);
			ok(!rc && nan0 && !memcmp(g1 + n, g2 + n, 4 * (ny - n)),
			   "moe matvec: expert id %d of %d gives NaN rows, the other slots unchanged %s", E, E,
			   rc ? gerr.msg : "");
		}
		fg_kmem_free(ctx, dw), fg_kmem_free(ctx, dx), fg_kmem_free(ctx, di), fg_kmem_free(ctx, dy);
		free(w), free(x), free(ref), free(g1), free(g2), free(a), free(ex);
	}
	for (int I = 1; I <= 257; I += 128) {
		int S = 3, rc;
		size_t nt = (size_t)S * 2 * I;
		float *gu = fvec(nt, -6, 6), *ref = malloc(4 * nt), *g = malloc(4 * nt);
		void *d = dput(gu, 4 * nt);

		memcpy(ref, gu, 4 * nt);
		for (int j = 0; j < S; j++)
			fg_ref_geglu(ref + (size_t)j * 2 * I, gu + (size_t)j * 2 * I, gu + (size_t)j * 2 * I + I, I);
		rc = !d || fg_k_moe_geglu(ctx, d, S, I, &gerr) || dget(g, d, 4 * nt);
		ok(!rc && worst_rel(g, ref, NULL, nt, 1e-6, 4e-6) <= 1,
		   "moe geglu %d slots of %d vs twin (4e-6 rel + 1e-6), up halves untouched %s", S, I, rc ? gerr.msg : "");
		fg_kmem_free(ctx, d);
		free(gu), free(ref), free(g);
	}
	for (size_t c = 0; c < sizeof(combs) / sizeof(combs[0]); c++) {
		int S = combs[c][0], n = combs[c][1], rc;
		float *y = fvec((size_t)S * n, -3, 3), *wt = fvec(S, 0, 1), *o = fvec(n, -5, 5), *w1 = fvec(n, 0.5f, 2),
		      *w2 = fvec(n, 0.5f, 2), *ref = malloc(4 * n), *g = malloc(4 * n);
		void *dy = dput(y, 4 * (size_t)S * n), *dwt = dput(wt, 4 * S), *d_o = dput(o, 4 * n), *d1 = dput(w1, 4 * n),
		     *d2 = dput(w2, 4 * n);

		memcpy(ref, o, 4 * n);
		fg_ref_moe_combine(ref, y, wt, S, w1, w2, n, 1e-6f);
		rc = !dy || !dwt || !d_o || !d1 || !d2 || fg_k_moe_combine(ctx, d_o, dy, dwt, S, d1, d2, n, 1e-6f, &gerr) ||
		     dget(g, d_o, 4 * n);
		ok(!rc && worst_rel(g, ref, NULL, n, 1e-5, 1e-5) <= 1,
		   "moe combine %d slots, n %d vs twin (1e-5 rel + abs) %s", S, n, rc ? gerr.msg : "");
		fg_kmem_free(ctx, dy), fg_kmem_free(ctx, dwt), fg_kmem_free(ctx, d_o), fg_kmem_free(ctx, d1),
			fg_kmem_free(ctx, d2);
		free(y), free(wt), free(o), free(w1), free(w2), free(ref), free(g);
	}
}

static void gpu_attention(void)
{
	static const int cases[][5] = {/* heads, kv heads, head_dim, cap, pos */
				       {8, 2, 256, 512, 0},   {8, 2, 256, 512, 5},    {8, 2, 256, 512, 600},
				       {8, 2, 512, 1000, 999}, {3, 1, 33, 70, 130},    {1, 1, 1, 1, 4},
				       {8, 2, 256, 8192, 4000}, {2, 2, 512, 65, 64}, {8, 2, 256, 512, 200},
				       {8, 2, 256, 512, 255},  {8, 2, 256, 512, 256},  {8, 2, 512, 4096, 127},
				       {8, 2, 512, 4096, 700}, {8, 2, 512, 4096, 1023}, {2, 1, 64, 20000, 900},
				       /* last chunks of 15 and 7 keys: the V pass's rounds of 8, 4, 2 and 1 together */
				       {8, 2, 256, 512, 14},   {8, 2, 512, 4096, 310}};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int heads = cases[c][0], kvh = cases[c][1], hd = cases[c][2], cap = cases[c][3], pos = cases[c][4];
		size_t cn = (size_t)kvh * cap * hd;
		float *q = fvec((size_t)heads * hd, -0.3f, 0.3f), *kc = fvec(cn, -1, 1), *vc = fvec(cn, -1, 1);
		float *k = fvec((size_t)kvh * hd, -1, 1), *v = fvec((size_t)kvh * hd, -1, 1);
		float *ref = malloc(4 * heads * hd), *g1 = malloc(4 * heads * hd), *g2 = malloc(4 * heads * hd);
		float *kc2 = malloc(4 * cn);
		void *dq = dput(q, 4 * heads * hd), *dk = dput(kc, 4 * cn), *dv = dput(vc, 4 * cn);
		void *dnk = dput(k, 4 * kvh * hd), *dnv = dput(v, 4 * kvh * hd), *dp = dput(&pos, 4);
		void *dy = dnew(4 * heads * hd);
		int rc;

		fg_ref_kv_store(kc, vc, k, v, kvh, hd, cap, pos);
		fg_ref_attn_decode(ref, q, kc, vc, heads, kvh, hd, cap, pos, 1.0f);
		rc = fg_k_kv_store(ctx, dk, dv, dnk, dnv, kvh, hd, cap, dp, &gerr) || dget(kc2, dk, 4 * cn);
		ok(!rc && !memcmp(kc2, kc, 4 * cn), "kv store slot pos %% cap (cap %d pos %d) %s", cap, pos,
		   rc ? gerr.msg : "");
		rc = fg_k_attn_decode(ctx, dy, dq, dk, dv, heads, kvh, hd, cap, dp, 1.0f, &gerr) ||
		     dget(g1, dy, 4 * heads * hd);
		fg_kmem_fill(ctx, dy, 0xff, 4 * heads * hd, &gerr);
		rc = rc || fg_k_attn_decode(ctx, dy, dq, dk, dv, heads, kvh, hd, cap, dp, 1.0f, &gerr) ||
		     dget(g2, dy, 4 * heads * hd);
		ok(!rc && worst_rel(g1, ref, NULL, (size_t)heads * hd, 2e-6, 2e-5) <= 1 &&
			   !memcmp(g1, g2, 4 * heads * hd),
		   "decode attention heads %d/%d dim %d cap %d pos %d vs twin (2e-5 rel + 2e-6), runs identical %s",
		   heads, kvh, hd, cap, pos, rc ? gerr.msg : "");
		{ /* the chunks combined through a cluster or through global memory: the same bits */
			int in_force = fg_kctx_set_attn_cluster(ctx, -1);

			fg_kctx_set_attn_cluster(ctx, !in_force);
			fg_kmem_fill(ctx, dy, 0xff, 4 * heads * hd, &gerr);
			rc = rc || fg_k_attn_decode(ctx, dy, dq, dk, dv, heads, kvh, hd, cap, dp, 1.0f, &gerr) ||
			     dget(g2, dy, 4 * heads * hd);
			fg_kctx_set_attn_cluster(ctx, in_force);
			ok(!rc && !memcmp(g1, g2, 4 * heads * hd), "... with the chunk blocks as clusters %s: the same bits %s",
			   in_force ? "off" : "on", rc ? gerr.msg : "");
		}
		if (pos < fg_kctx_attn_short_keys(ctx)) { /* a short launch (one cluster a kv head): the same bits */
			fg_kctx_set_attn_short(ctx, 1);
			fg_kmem_fill(ctx, dy, 0xff, 4 * heads * hd, &gerr);
			rc = rc || fg_k_attn_decode(ctx, dy, dq, dk, dv, heads, kvh, hd, cap, dp, 1.0f, &gerr) ||
			     dget(g2, dy, 4 * heads * hd);
			fg_kctx_set_attn_short(ctx, 0);
			ok(!rc && !memcmp(g1, g2, 4 * heads * hd), "... as a short launch: the same bits %s",
			   rc ? gerr.msg : "");
		}
		fg_kmem_free(ctx, dq), fg_kmem_free(ctx, dk), fg_kmem_free(ctx, dv), fg_kmem_free(ctx, dnk);
		fg_kmem_free(ctx, dnv), fg_kmem_free(ctx, dp), fg_kmem_free(ctx, dy);
		free(q), free(kc), free(vc), free(k), free(v), free(ref), free(g1), free(g2), free(kc2);
	}
}

/* One attention launch that also does qkv_post's work (fg_k_attn_decode_post)
 * must give the bits of the two launches (fg_k_qkv_post + fg_k_attn_decode):
 * output and both caches, on shapes where the new row's slot is the first
 * key, inside a chunk, at a chunk's start or end, past the ring's wrap (the
 * slot's old key must not be used), for KV-shared layers (q only, caches
 * read as they are), head dims 2..512 (odd multiples of 2 too: no K/V
 * prefetch), 1..8 query heads per kv head, chunks of 16, 32 and 64 keys. Also:
 * a second fused launch gives the same bits, FG_ATTN_FUSED=0's path
 * (fg_kctx_set_attn_fused(0)) is the two launches, the fused launch reading
 * its RoPE turns from fg_k_rope_table's table (which holds the position,
 * or ends just before it: computed then) gives the same bits, and the
 * result is close to engine/cpu's norms + RoPE and the attention twin. */
struct apc {
	int heads, kvh, d, cap, pos, own, prop;
};

static void attn_post_case(const struct apc *t)
{
	int nh = t->heads, nkv = t->kvh, d = t->d, cap = t->cap, pos = t->pos, own = t->own, in_force;
	size_t nq = (size_t)(nh + 2 * nkv) * d, cn = (size_t)nkv * cap * d, no = (size_t)nh * d;
	float *qkv = fvec(nq, -2, 2), *qw = fvec(d, 0.5f, 1.5f), *kw = fvec(d, 0.5f, 1.5f), *inv = malloc(4 * (d / 2));
	float *kc = fvec(cn, -1, 1), *vc = fvec(cn, -1, 1), *x = malloc(4 * nq), *ref = malloc(4 * no);
	float *kcr = malloc(4 * cn), *vcr = malloc(4 * cn), *o[6], *k[5], *v[5];
	void *dqw = dput(qw, 4 * d), *dkw = dput(kw, 4 * d), *dinv, *dp = dput(&pos, 4), *dy = dnew(4 * no);
	int rc = 0, same = 1, close;
	size_t ndiff = 0;
	double maxd = 0;

	fg_cpu_rope_freqs(inv, d, t->prop ? 1e6 : 1e4, t->prop, 0.25, 1.0);
	dinv = dput(inv, 4 * (d / 2));
	for (int i = 0; i < 6; i++)
		o[i] = malloc(4 * no);
	for (int i = 0; i < 5; i++)
		k[i] = malloc(4 * cn), v[i] = malloc(4 * cn);
	in_force = fg_kctx_set_attn_fused(ctx, -1);
	/* run 0: the two launches; 1: fused (then 3: fused again); 2: the entry with fusing off */
	for (int r = 0; r < 3 && !rc; r++) {
		void *dq = dput(qkv, 4 * nq), *dk = dput(kc, 4 * cn), *dv = dput(vc, 4 * cn);

		if (r == 0)
			rc = fg_k_qkv_post(ctx, dq, nh, own ? nkv : 0, d, dqw, own ? dkw : NULL, dinv, dp, own ? dk : NULL,
					   own ? dv : NULL, cap, 1e-6f, &gerr) ||
			     fg_k_attn_decode(ctx, dy, dq, dk, dv, nh, nkv, d, cap, dp, 1.0f, &gerr);
		else
			rc = fg_kctx_set_attn_fused(ctx, r == 1) != (r == 1) ||
			     fg_k_attn_decode_post(ctx, dy, dq, nh, nkv, d, dqw, own ? dkw : NULL, dinv, NULL, 0, dp, dk, dv,
						   cap, own, 1e-6f, 1.0f, &gerr);
		rc = rc || dget(o[r], dy, 4 * no) || dget(k[r], dk, 4 * cn) || dget(v[r], dv, 4 * cn);
		if (r == 1) { /* fused again on the caches it wrote: the slot is made anew */
			fg_kmem_fill(ctx, dy, 0xff, 4 * no, &gerr);
			rc = rc ||
			     fg_k_attn_decode_post(ctx, dy, dq, nh, nkv, d, dqw, own ? dkw : NULL, dinv, NULL, 0, dp, dk, dv,
						   cap, own, 1e-6f, 1.0f, &gerr) ||
			     dget(o[3], dy, 4 * no);
		}
		fg_kmem_free(ctx, dq), fg_kmem_free(ctx, dk), fg_kmem_free(ctx, dv);
	}
	/* fused with the turns from a table: rows past pos (read), then rows = pos (computed) */
	for (int r = 3; r < 5 && !rc; r++) {
		int rows = r == 3 ? pos + 3 : pos;
		void *dq = dput(qkv, 4 * nq), *dk = dput(kc, 4 * cn), *dv = dput(vc, 4 * cn);
		void *dt = rows ? dnew(8 * (size_t)(d / 2) * rows) : NULL;

		fg_kmem_fill(ctx, dy, 0xff, 4 * no, &gerr);
		rc = fg_kctx_set_attn_fused(ctx, 1) != 1 || (rows && (!dt || fg_k_rope_table(ctx, dt, dinv, d / 2, rows, &gerr))) ||
		     fg_k_attn_decode_post(ctx, dy, dq, nh, nkv, d, dqw, own ? dkw : NULL, dinv, dt, rows, dp, dk, dv, cap,
					   own, 1e-6f, 1.0f, &gerr) ||
		     dget(o[r + 1], dy, 4 * no) || dget(k[r], dk, 4 * cn) || dget(v[r], dv, 4 * cn);
		fg_kmem_free(ctx, dq), fg_kmem_free(ctx, dk), fg_kmem_free(ctx, dv), fg_kmem_free(ctx, dt);
	}
	fg_kctx_set_attn_fused(ctx, in_force);
	ok(!rc && !memcmp(o[4], o[1], 4 * no) && !memcmp(o[5], o[1], 4 * no) && !memcmp(k[3], k[1], 4 * cn) &&
		   !memcmp(v[3], v[1], 4 * cn) && !memcmp(k[4], k[1], 4 * cn) && !memcmp(v[4], v[1], 4 * cn),
	   "attention with qkv post, turns from a table (holding pos / ending at it) = computed (bits: out, caches) "
	   "heads %d/%d dim %d cap %d pos %d %s",
	   nh, nkv, d, cap, pos, rc ? gerr.msg : "");
	for (size_t i = 0; i < no && !rc; i++)
		if (memcmp(&o[0][i], &o[1][i], 4)) {
			ndiff++;
			maxd = fmax(maxd, fabs((double)o[0][i] - o[1][i]));
		}
	same = !rc && !ndiff && !memcmp(o[1], o[3], 4 * no) && !memcmp(o[0], o[2], 4 * no) &&
	       !memcmp(k[0], k[1], 4 * cn) && !memcmp(v[0], v[1], 4 * cn) && !memcmp(k[0], k[2], 4 * cn) &&
	       !memcmp(v[0], v[2], 4 * cn);
	ok(same,
	   "attention with qkv post in one launch = qkv post + attention (bits: out, k and v caches; rerun; "
	   "FG_ATTN_FUSED=0 path) heads %d/%d dim %d cap %d pos %d %s%s",
	   nh, nkv, d, cap, pos, own ? "own cache" : "shared cache", rc ? gerr.msg : "");
	if (!same && !rc)
		printf("# out differs in %zu of %zu values (max |diff| %g); k cache %s, v cache %s, rerun %s, unfused entry %s\n",
		       ndiff, no, maxd, memcmp(k[0], k[1], 4 * cn) ? "differs" : "same",
		       memcmp(v[0], v[1], 4 * cn) ? "differs" : "same", memcmp(o[1], o[3], 4 * no) ? "differs" : "same",
		       memcmp(o[0], o[2], 4 * no) ? "differs" : "same");
	/* the CPU's answer: engine/cpu's norms and RoPE, the slot written, the twin */
	memcpy(x, qkv, 4 * nq);
	memcpy(kcr, kc, 4 * cn);
	memcpy(vcr, vc, 4 * cn);
	for (int b = 0; b < nh + (own ? 2 * nkv : 0); b++) {
		float *xb = x + (size_t)b * d;

		fg_cpu_rmsnorm(xb, xb, b < nh ? qw : b < nh + nkv ? kw : NULL, d, 1e-6f);
		if (b < nh + nkv)
			fg_cpu_rope_scaled(xb, d, inv, pos, 1.0f);
		if (b >= nh)
			memcpy((b < nh + nkv ? kcr : vcr) + ((size_t)(b < nh + nkv ? b - nh : b - nh - nkv) * cap + pos % cap) * d,
			       xb, 4 * d);
	}
	fg_ref_attn_decode(ref, x, kcr, vcr, nh, nkv, d, cap, pos, 1.0f);
	close = !rc && worst_rel(o[1], ref, NULL, no, 1e-4, 1e-3) <= 1 && worst_rel(k[1], kcr, NULL, cn, 1e-5, 1e-5) <= 1 &&
		worst_rel(v[1], vcr, NULL, cn, 1e-5, 1e-5) <= 1;
	ok(close, "attention with qkv post heads %d/%d dim %d cap %d pos %d vs engine/cpu ops + twin (1e-3 rel + 1e-4) %s",
	   nh, nkv, d, cap, pos, rc ? gerr.msg : "");
	fg_kmem_free(ctx, dqw), fg_kmem_free(ctx, dkw), fg_kmem_free(ctx, dinv), fg_kmem_free(ctx, dp);
	fg_kmem_free(ctx, dy);
	for (int i = 0; i < 6; i++)
		free(o[i]);
	for (int i = 0; i < 5; i++)
		free(k[i]), free(v[i]);
	free(qkv), free(qw), free(kw), free(inv), free(kc), free(vc), free(x), free(ref), free(kcr), free(vcr);
}

static void gpu_attn_post(void)
{
	static const struct apc cases[] = {
		/* heads, kv heads, d, cap, pos, own, proportional RoPE */
		{8, 2, 256, 512, 0, 1, 0},     {8, 2, 256, 512, 5, 1, 0},      {8, 2, 256, 512, 31, 1, 0},
		{8, 2, 256, 512, 32, 1, 0},    {8, 2, 256, 512, 600, 1, 0},    {8, 2, 256, 512, 544, 1, 0},
		{8, 2, 256, 512, 1023, 1, 0},  {8, 2, 512, 4096, 1000, 1, 1},  {8, 2, 512, 4096, 1000, 0, 1},
		{4, 2, 256, 512, 700, 0, 0},   {3, 1, 16, 70, 130, 1, 0},      {8, 1, 512, 40, 100, 1, 1},
		{2, 2, 18, 33, 32, 1, 0},      {1, 1, 2, 1, 4, 1, 0},          {5, 5, 64, 8192, 4000, 1, 0},
		{1, 1, 16, 40000, 45000, 1, 0}, {4, 2, 510, 100, 250, 1, 1},   {6, 3, 128, 512, 513, 1, 0},
		{8, 2, 512, 2000, 1999, 1, 1},  {8, 2, 256, 512, 15, 1, 0},     {8, 2, 256, 512, 16, 1, 0},
		{2, 1, 64, 20000, 20500, 1, 0}, {2, 1, 64, 20000, 600, 1, 0}, {8, 2, 512, 4096, 300, 1, 1}};

	int in_force = fg_kctx_set_attn_cluster(ctx, -1);

	for (int pass = 0; pass < 2; pass++) { /* the chunk blocks as clusters or not (fg_kctx_set_attn_cluster) */
		printf("# chunk blocks as clusters: %s\n", fg_kctx_set_attn_cluster(ctx, pass ? !in_force : in_force) ? "on" : "off");
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
			attn_post_case(&cases[c]);
	}
	fg_kctx_set_attn_cluster(ctx, in_force);
	/* the group-4 cases again at the other levels of fg_kctx_set_attn_grp
	 * (the general kernel, the group only), against the same two-launch path */
	{
		int grp_on = fg_kctx_set_attn_grp(ctx, -1);

		for (int lv = 0; lv <= 2; lv++) {
			if (lv == grp_on || !grp_on)
				continue;
			printf("# the kernel for the exact group: level %d\n", fg_kctx_set_attn_grp(ctx, lv));
			for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
				if (cases[c].heads / cases[c].kvh == 4)
					attn_post_case(&cases[c]);
		}
		fg_kctx_set_attn_grp(ctx, grp_on);
	}
	/* short launches (fg_kctx_set_attn_short) at the positions they serve */
	if (fg_kctx_set_attn_short(ctx, 1)) {
		printf("# short attention launches: positions below %d\n", fg_kctx_attn_short_keys(ctx));
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
			if (cases[c].pos < fg_kctx_attn_short_keys(ctx))
				attn_post_case(&cases[c]);
		fg_kctx_set_attn_short(ctx, 0);
	} else {
		ok(fg_kctx_attn_short_keys(ctx) == 0, "attention with qkv post, short launches # skip: none on this GPU");
	}
	{ /* an odd head size is refused */
		int rc = fg_k_attn_decode_post(ctx, NULL, NULL, 2, 1, 33, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL, 8, 1, 1e-6f,
					       1.0f, &gerr);

		ok(rc == FG_EINVAL, "attention with qkv post refuses head_dim 33: %s", gerr.msg);
	}
}

/* fg_k_row_logprobs against its twin: rows of awkward widths (1, a slice
 * +- 1, E4B's vocabulary, a keepset), several rows at a stride, wanted ids
 * (one missing), ties, a NaN, k from 0 to the most; twice the same bits. */
static void gpu_row_logprobs(void)
{
	static const struct {
		int n, rows, k, keep, want, nan;
	} cs[] = {{1, 1, 1, 0, 0, 0},	{2047, 1, 5, 0, 1, 0},	{2049, 3, 20, 0, 1, 0},
		  {262144, 1, 20, 0, 0, 0}, {262144, 2, 0, 0, 1, 1}, {12288, 17, 20, 1, 1, 0},
		  {5000, 4, 3, 1, 0, 1},	{40, 2, 20, 0, 1, 0}};

	for (size_t c = 0; c < sizeof(cs) / sizeof(cs[0]); c++) {
		int n = cs[c].n, R = cs[c].rows, k = cs[c].k;
		size_t stride = (size_t)n + 3;
		float *z = fvec(stride * R, -30, 30);
		int32_t *ids = malloc(sizeof(int32_t) * n), want[17];
		struct fg_klp ref[17], got[17], again[17];
		void *dz, *dids = NULL, *dw = NULL, *dout = dnew(sizeof(struct fg_klp) * R);
		double worst = 0;
		int same = 1, rc;

		for (int i = 0; i < n; i++)
			ids[i] = 2 * i + (i & 1);
		for (int r = 0; r < R; r++) {
			float *zr = z + (size_t)r * stride;

			want[r] = r == 1 ? -1 : (int32_t)(rnd() % (uint32_t)n);
			if (n > 10) { /* a tie at the top, and the wanted id tied with another */
				zr[n / 3] = zr[n / 2] = 31;
				zr[n - 1] = zr[want[r] >= 0 ? want[r] : 0];
			}
			if (cs[c].nan)
				zr[n / 4] = NAN;
		}
		fg_ref_row_logprobs(ref, z, stride, R, cs[c].keep ? ids : NULL, n, cs[c].want ? want : NULL, k);
		dz = dput(z, sizeof(float) * stride * R);
		if (cs[c].keep)
			dids = dput(ids, sizeof(int32_t) * n);
		if (cs[c].want)
			dw = dput(want, sizeof(int32_t) * R);
		rc = fg_k_row_logprobs(ctx, dout, dz, stride, R, dids, n, dw, k, &gerr) ||
		     dget(got, dout, sizeof(struct fg_klp) * R) ||
		     fg_k_row_logprobs(ctx, dout, dz, stride, R, dids, n, dw, k, &gerr) ||
		     dget(again, dout, sizeof(struct fg_klp) * R);
		for (int r = 0; !rc && r < R; r++) {
			const struct fg_klp *a = &ref[r], *b = &got[r];
			int nan_row = cs[c].nan;

			same &= !memcmp(b, &again[r], sizeof(*b));
			if (nan_row) { /* a NaN makes the sum NaN; the order still skips it */
				same &= isnan(b->lse) && isnan(a->lse) && b->rank == a->rank && b->n_top == a->n_top;
				for (int t = 0; t < b->n_top; t++)
					same &= b->top_id[t] == a->top_id[t];
				continue;
			}
			same &= b->rank == a->rank && b->n_top == a->n_top;
			if (fabs(b->lse - a->lse) > worst)
				worst = fabs(b->lse - a->lse);
			if (!(isinf(a->lp) && isinf(b->lp)) && fabsf(b->lp - a->lp) > worst)
				worst = fabsf(b->lp - a->lp);
			for (int t = 0; t < b->n_top; t++) {
				same &= b->top_id[t] == a->top_id[t];
				if (fabsf(b->top_lp[t] - a->top_lp[t]) > worst)
					worst = fabsf(b->top_lp[t] - a->top_lp[t]);
			}
		}
		ok(!rc && same && worst <= 1e-5,
		   "row logprobs n %d x %d rows, k %d%s%s%s: ids, ranks and counts = twin, values within 1e-5 (max %.2g), "
		   "two runs bit-identical %s",
		   n, R, k, cs[c].keep ? ", keepset" : "", cs[c].want ? ", wanted ids" : "", cs[c].nan ? ", NaN" : "",
		   worst, rc ? gerr.msg : "");
		fg_kmem_free(ctx, dz), fg_kmem_free(ctx, dids), fg_kmem_free(ctx, dw), fg_kmem_free(ctx, dout);
		free(z), free(ids);
	}
	{
		int rc = fg_k_row_logprobs(ctx, NULL, NULL, 10, 2, NULL, 20, NULL, 3, &gerr);

		ok(rc == FG_EINVAL, "row logprobs refuses a stride shorter than the row: %s", gerr.msg);
		rc = fg_k_row_logprobs(ctx, NULL, NULL, 10, 1, NULL, 10, NULL, FG_K_LP_TOP_MAX + 1, &gerr);
		ok(rc == FG_EINVAL, "row logprobs refuses k above %d: %s", FG_K_LP_TOP_MAX, gerr.msg);
	}
}

/* fg_k_ple_tail against fg_ref_ple_tail with the launch's cluster size:
 * E4B's and E2B's shapes and small awkward ones; two runs the same bits; on a
 * GPU without clusters (or a shape it does not take) fg_kple_new says so. */
static void gpu_ple_tail(void)
{
	static const int cs[][3] = {{2560, 256, 128}, {1536, 256, 128}, {64, 32, 32}, {1544, 24, 8}, {256, 512, 256}};

	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		struct ple_case c;
		struct fg_kple *w = NULL;
		int n = cs[i][0], p = cs[i][1], rc, C;
		float *h = malloc(sizeof(float) * n), *a = malloc(sizeof(float) * n), *gh = malloc(sizeof(float) * n),
		      *ga = malloc(sizeof(float) * n), *gh2 = malloc(sizeof(float) * n), *ga2 = malloc(sizeof(float) * n);
		void *dh, *da, *dx, *dpl, *d1, *d2, *d3;
		double wh = 0, wa = 0;

		ple_case_new(&c, n, p, cs[i][2]);
		rc = fg_kple_new(ctx, &w, c.gp, c.gs, c.pp, c.ps, n, p, cs[i][2], &gerr);
		if (rc == FG_EUNSUPPORTED) {
			ok(1, "ple tail %d x %d: # skip %s", n, p, gerr.msg);
			ple_case_free(&c);
			free(h), free(a), free(gh), free(ga), free(gh2), free(ga2);
			continue;
		}
		C = fg_kple_cluster(w);
		dh = dput(c.h, sizeof(float) * n), da = dnew(sizeof(float) * n), dx = dput(c.x, sizeof(float) * n);
		dpl = dput(c.pl, sizeof(float) * p), d1 = dput(c.w1, sizeof(float) * n);
		d2 = dput(c.w2, sizeof(float) * n), d3 = dput(c.w3, sizeof(float) * n);
		memcpy(h, c.h, sizeof(float) * n);
		if (!rc)
			fg_ref_ple_tail(h, a, c.x, c.gp, c.gs, c.pp, c.ps, c.pl, c.w1, c.w2, 0.75f, c.w3, n, p, cs[i][2], 1e-6f, C);
		rc = rc || fg_k_ple_tail(ctx, dh, da, dx, w, dpl, d1, d2, 0.75f, d3, 1e-6f, &gerr) ||
		     dget(gh, dh, sizeof(float) * n) || dget(ga, da, sizeof(float) * n) ||
		     fg_kmem_upload(ctx, dh, c.h, sizeof(float) * n, &gerr) ||
		     fg_k_ple_tail(ctx, dh, da, dx, w, dpl, d1, d2, 0.75f, d3, 1e-6f, &gerr) ||
		     dget(gh2, dh, sizeof(float) * n) || dget(ga2, da, sizeof(float) * n);
		if (!rc) {
			wh = worst_rel(gh, h, NULL, n, 1e-6, 1e-5);
			wa = worst_rel(ga, a, NULL, n, 1e-6, 1e-5);
		}
		ok(!rc && wh <= 1 && wa <= 1 && !memcmp(gh, gh2, sizeof(float) * n) && !memcmp(ga, ga2, sizeof(float) * n),
		   "ple tail %d x %d group %d, cluster %d: h and a = twin within 1e-6 + 1e-5 rel (worst %.2g, %.2g of "
		   "it), two runs bit-identical %s",
		   n, p, cs[i][2], C, wh, wa, rc ? gerr.msg : "");
		fg_kmem_free(ctx, dh), fg_kmem_free(ctx, da), fg_kmem_free(ctx, dx), fg_kmem_free(ctx, dpl);
		fg_kmem_free(ctx, d1), fg_kmem_free(ctx, d2), fg_kmem_free(ctx, d3);
		fg_kple_free(ctx, w);
		ple_case_free(&c);
		free(h), free(a), free(gh), free(ga), free(gh2), free(ga2);
	}
	{
		struct fg_kple *w = NULL;
		int rc = fg_kple_new(ctx, &w, NULL, NULL, NULL, NULL, 2560, 520, 8, &gerr);

		ok(rc == FG_EUNSUPPORTED && !w, "ple tail refuses a per-layer dim of 520: %s", gerr.msg);
	}
}

static void gpu_argmax(void)
{
	static const int ns[] = {1, 257, 262144, 12000, 600000};

	for (size_t c = 0; c < sizeof(ns) / sizeof(ns[0]); c++) {
		int n = ns[c], with_ids = n == 12000;
		float *z = fvec(n, -60, 60), *zr = malloc(4 * n), *g = malloc(4 * n);
		int32_t *ids = malloc(4 * n), best = -2, ref;
		void *dz, *dids = NULL, *db = dnew(4);
		int rc;

		for (int i = 0; i < n; i++)
			ids[i] = i * 3 + 1;
		if (n > 300) { /* a tie at the top and a NaN: lowest index must win */
			z[n / 2] = 1000;
			z[n / 3] = 1000;
			z[n / 5] = NAN;
		}
		memcpy(zr, z, 4 * n);
		ref = fg_ref_softcap_argmax(zr, with_ids ? ids : NULL, n, 30.0f);
		dz = dput(z, 4 * n);
		if (with_ids)
			dids = dput(ids, 4 * n);
		rc = fg_k_softcap_argmax(ctx, db, dz, dids, n, 30.0f, &gerr) || dget(&best, db, 4) || dget(g, dz, 4 * n);
		int same = 1;
		for (int i = 0; i < n; i++)
			if (!(fabsf(g[i] - zr[i]) <= 2e-6f * 30) && !(g[i] != g[i] && zr[i] != zr[i]))
				same = 0;
		ok(!rc && best == ref && same, "softcap + argmax n %d%s: id %d (twin %d), capped values within 6e-5 %s",
		   n, with_ids ? " keepset" : "", best, ref, rc ? gerr.msg : "");
		fg_kmem_free(ctx, dz), fg_kmem_free(ctx, dids), fg_kmem_free(ctx, db);
		free(z), free(zr), free(g), free(ids);
	}
}

/* The fused kernels against the composition of their parts' twins. */
static void gpu_fused(void)
{
	static const int ns[] = {1, 96, 2560, 3000};

	for (size_t c = 0; c < sizeof(ns) / sizeof(ns[0]); c++) {
		int n = ns[c];
		float *h = fvec(n, -2, 2), *x = fvec(n, -3, 3), *w = fvec(n, 0.5f, 1.5f), *w2 = fvec(n, 0.5f, 1.5f);
		float *hr = malloc(4 * n), *ar = malloc(4 * n), *hg = malloc(4 * n), *ag = malloc(4 * n);
		void *dh = dput(h, 4 * n), *dx = dput(x, 4 * n), *dw = dput(w, 4 * n), *dw2 = dput(w2, 4 * n), *da = dnew(4 * n);
		int rc;

		memcpy(hr, h, 4 * n);
		fg_ref_rmsnorm_residual(hr, x, w, n, 1e-6f, 0.8f);
		fg_ref_rmsnorm(ar, hr, w2, 1, n, 1e-6f);
		rc = fg_k_residual_norm(ctx, dh, dx, dw, 0.8f, da, dw2, n, 1e-6f, &gerr) || dget(hg, dh, 4 * n) ||
		     dget(ag, da, 4 * n);
		ok(!rc && worst_rel(hg, hr, NULL, n, 1e-6, 1e-5) <= 1 && worst_rel(ag, ar, NULL, n, 1e-6, 2e-5) <= 1,
		   "residual + next norm fused, n %d, vs twins (1e-5 / 2e-5 rel) %s", n, rc ? gerr.msg : "");
		fg_kmem_free(ctx, dh), fg_kmem_free(ctx, dx), fg_kmem_free(ctx, dw), fg_kmem_free(ctx, dw2), fg_kmem_free(ctx, da);
		free(h), free(x), free(w), free(w2), free(hr), free(ar), free(hg), free(ag);
	}
	{
		static const int cases[][3] = {{100, 10240, 128}, {33, 128, 32}, {2560, 256, 128}};

		for (size_t c = 0; c < 9; c++) {
			int n = cases[c % 3][0], k = cases[c % 3][1], G = cases[c % 3][2];
			int32_t *p;
			uint16_t *sc;
			float *gt = fvec(k, -4, 4), *up = fvec(k, -2, 2), *x = malloc(4 * k), *ref = malloc(4 * n),
			      *a = malloc(4 * n), *gg = malloc(4 * n);
			struct fg_kint4 *w = NULL;
			void *dg = dput(gt, 4 * k), *du = dput(up, 4 * k), *dy = dnew(4 * n);
			int rc;

			kind_name = c < 3 ? "fma" : c < 6 ? "mma" : "i8";
			fg_kctx_set_int4_kind(ctx, c < 3 ? FG_INT4_FMA : c < 6 ? FG_INT4_MMA : FG_INT4_I8);
			int4_rand(&p, &sc, n, k, G);
			fg_ref_geglu(x, gt, up, k);
			fg_ref_int4_matvec(ref, p, sc, x, 1, n, k, G);
			int4_abs(a, p, sc, x, 1, n, k, G);
			rc = fg_kint4_new(ctx, &w, p, sc, n, k, G, 0, &gerr) ||
			     fg_k_int4_matvec_geglu(ctx, dy, w, dg, du, &gerr) || dget(gg, dy, 4 * n);
			ok(!rc && worst_rel(gg, ref, a, n, 1e-30, 3e-6) <= 1,
			   "int4 %s matvec with GeGLU input n %d k %d group %d vs twins (3e-6 sum|wx|) %s", kind_name, n, k,
			   G, rc ? gerr.msg : "");
			fg_kint4_free(ctx, w);
			fg_kmem_free(ctx, dg), fg_kmem_free(ctx, du), fg_kmem_free(ctx, dy);
			free(p), free(sc), free(gt), free(up), free(x), free(ref), free(a), free(gg);
		}
		fg_kctx_set_int4_kind(ctx, FG_INT4_FMA);
	}
	{
		static const int cases[][6] = {/* heads, kv heads, d, cap, pos, proportional */
					       {8, 2, 256, 512, 700, 0}, {8, 2, 512, 4096, 1000, 1}, {4, 0, 32, 8, 3, 0},
					       {3, 1, 6, 5, 0, 1}};

		for (size_t c = 0; c < 4; c++) {
			int nh = cases[c][0], nkv = cases[c][1], d = cases[c][2], cap = cases[c][3], pos = cases[c][4];
			size_t nq = (size_t)(nh + 2 * nkv) * d, cn = (size_t)(nkv ? nkv : 1) * cap * d;
			float *qkv = fvec(nq, -2, 2), *qw = fvec(d, 0.5f, 1.5f), *kw = fvec(d, 0.5f, 1.5f);
			float *inv = malloc(4 * (d / 2)), *ref = malloc(4 * nq), *got = malloc(4 * nq);
			float *kc = fvec(cn, -1, 1), *vc = fvec(cn, -1, 1), *kcr = malloc(4 * cn), *vcr = malloc(4 * cn);
			float *kcg = malloc(4 * cn), *vcg = malloc(4 * cn);
			void *dq = dput(qkv, 4 * nq), *dqw = dput(qw, 4 * d), *dkw = dput(kw, 4 * d), *dinv, *dp = dput(&pos, 4);
			void *dk = dput(kc, 4 * cn), *dv = dput(vc, 4 * cn);
			int rc, same_cache = 1;

			fg_cpu_rope_freqs(inv, d, cases[c][5] ? 1e6 : 1e4, cases[c][5], 0.25, 1.0);
			dinv = dput(inv, 4 * (d / 2));
			memcpy(ref, qkv, 4 * nq);
			memcpy(kcr, kc, 4 * cn);
			memcpy(vcr, vc, 4 * cn);
			for (int b = 0; b < nh + 2 * nkv; b++) {
				float *x = ref + (size_t)b * d;

				fg_cpu_rmsnorm(x, x, b < nh ? qw : b < nh + nkv ? kw : NULL, d, 1e-6f);
				if (b < nh + nkv)
					fg_cpu_rope_scaled(x, d, inv, pos, 1.0f);
				if (b >= nh)
					memcpy((b < nh + nkv ? kcr : vcr) +
						       ((size_t)(b < nh + nkv ? b - nh : b - nh - nkv) * cap + pos % cap) * d,
					       x, 4 * d);
			}
			rc = fg_k_qkv_post(ctx, dq, nh, nkv, d, dqw, nkv ? dkw : NULL, dinv, dp, nkv ? dk : NULL,
					   nkv ? dv : NULL, cap, 1e-6f, &gerr) ||
			     dget(got, dq, 4 * nq) || dget(kcg, dk, 4 * cn) || dget(vcg, dv, 4 * cn);
			for (size_t i = 0; i < cn && !rc; i++)
				if (fabsf(kcg[i] - kcr[i]) > 1e-5f * (1 + fabsf(kcr[i])) ||
				    fabsf(vcg[i] - vcr[i]) > 1e-5f * (1 + fabsf(vcr[i])))
					same_cache = 0;
			ok(!rc && worst_rel(got, ref, NULL, nq, 1e-5, 1e-5) <= 1 && same_cache,
			   "qkv post (head norms, table rope, kv store) heads %d/%d dim %d cap %d pos %d vs engine/cpu ops %s",
			   nh, nkv, d, cap, pos, rc ? gerr.msg : "");
			fg_kmem_free(ctx, dq), fg_kmem_free(ctx, dqw), fg_kmem_free(ctx, dkw), fg_kmem_free(ctx, dinv);
			fg_kmem_free(ctx, dp), fg_kmem_free(ctx, dk), fg_kmem_free(ctx, dv);
			free(qkv), free(qw), free(kw), free(inv), free(ref), free(got), free(kc), free(vc), free(kcr);
			free(vcr), free(kcg), free(vcg);
		}
	}
}

/* A little decode-like chain captured as a graph must give the same bits as
 * the same launches made directly, for ids changed between replays. */
static void gpu_graph(void)
{
	int v = 300, h = 256, n = 300;
	uint16_t *emb = bvec((size_t)v * h, -1, 1);
	int32_t *p;
	uint16_t *sc;
	float *w = fvec(h, 0.5f, 1.5f);
	int32_t id = 7, got_direct[3], got_graph[3];
	struct fg_kint4 *m = NULL;
	struct fg_kgraph *g = NULL;
	void *de = dput(emb, 2 * v * h), *dw = dput(w, 4 * h), *did = dput(&id, 4), *dx = dnew(4 * h),
	     *dy = dnew(4 * n), *db = dnew(4);
	int rc;

	int4_rand(&p, &sc, n, h, 128);
	rc = fg_kint4_new(ctx, &m, p, sc, n, h, 128, 0, &gerr);
#define CHAIN()                                                                              \
	(fg_k_embed(ctx, dx, de, did, h, 16.0f, &gerr) ||                                    \
	 fg_k_rmsnorm(ctx, dx, dx, dw, 1, h, 1e-6f, &gerr) ||                                \
	 fg_k_int4_matvec(ctx, dy, m, dx, 1, &gerr) ||                                       \
	 fg_k_softcap_argmax(ctx, db, dy, NULL, n, 30.0f, &gerr))
	for (int s = 0; s < 3 && !rc; s++) {
		id = 7 + 50 * s;
		rc = fg_kmem_upload(ctx, did, &id, 4, &gerr) || CHAIN() || dget(&got_direct[s], db, 4);
	}
	rc = rc || fg_kgraph_begin(ctx, &gerr) || CHAIN() || fg_kgraph_end(ctx, &g, &gerr);
	for (int s = 0; s < 3 && !rc; s++) {
		id = 7 + 50 * s;
		rc = fg_kmem_upload(ctx, did, &id, 4, &gerr) || fg_kgraph_launch(ctx, g, &gerr) ||
		     dget(&got_graph[s], db, 4);
	}
#undef CHAIN
	ok(!rc && !memcmp(got_direct, got_graph, sizeof(got_graph)) &&
		   (got_direct[0] != got_direct[1] || got_direct[1] != got_direct[2]),
	   "captured graph replays (%s int4) give the direct launches' tokens (%d %d %d) %s", kind_name,
	   rc ? -1 : got_graph[0],
	   rc ? -1 : got_graph[1], rc ? -1 : got_graph[2], rc ? gerr.msg : "");
	fg_kgraph_free(g);
	fg_kint4_free(ctx, m);
	fg_kmem_free(ctx, de), fg_kmem_free(ctx, dw), fg_kmem_free(ctx, did), fg_kmem_free(ctx, dx);
	fg_kmem_free(ctx, dy), fg_kmem_free(ctx, db);
	free(emb), free(p), free(sc), free(w);
}

/* The sm_90 features follow the code the kernels run from, not only the GPU:
 * kernels from sm_86 PTX have no griddepcontrol.wait, so PDL must stay off
 * for them even on an sm_90 GPU (docs/gpu.md, "Building"). */
static void gpu_code_arch(void)
{
	struct fg_kdevice d;
	struct fg_err e = {0};
	int code = fg_kctx_code_arch(ctx), cc, pf = fg_kctx_prefetch_level(ctx), pdl, pf2;

	ok(fg_kctx_device_info(ctx, &d, &e) == 0, "device info: %s", e.msg);
	cc = d.cc_major * 10 + d.cc_minor;
	printf("# kernels run from compute_%d code on %s\n", code, fg_kctx_device_name(ctx));
	ok(code >= 50, "the kernels' virtual arch is known: %d", code);
	pdl = fg_kctx_set_pdl(ctx, 1);
	pf2 = fg_kctx_set_prefetch(ctx, 2);
	if (code < 90 || cc < 90) {
		ok(!pdl, "no PDL with compute_%d code on sm_%d", code, cc);
		ok(!pf2, "no L2 prefetch with compute_%d code on sm_%d", code, cc);
	} else {
		ok(pdl, "PDL with compute_%d code on sm_%d", code, cc);
		ok(pf2 == 2, "L2 prefetch level 2 with compute_%d code on sm_%d", code, cc);
	}
	fg_kctx_set_prefetch(ctx, pf);
}

/* A kernel fault (a wild pointer) must come back as FG_EDEVICE, not a hang or
 * a crash. It runs in a fresh process (this binary again, with --fault-child)
 * because a fault ruins the CUDA context and CUDA does not survive fork. */
static int fault_child(void)
{
	struct fg_kctx *c = NULL;
	struct fg_err e = {0};
	int rc = fg_kctx_new(&c, &e);

	if (!rc)
		rc = fg_k_geglu(c, (float *)(uintptr_t)0x10, (const float *)(uintptr_t)0x10,
				(const float *)(uintptr_t)0x10, 1 << 20, &e);
	if (!rc)
		rc = fg_kctx_sync(c, &e);
	printf("# fault child: rc %d: %s\n", rc, e.msg);
	return rc == FG_EDEVICE && strstr(e.msg, "CUDA") ? 0 : 1;
}

/* A short attention launch (fg_kctx_set_attn_short) run at a position past
 * the keys it serves: a kernel fault at the sync, not a wrong answer; exit
 * 2 where the GPU has no short launches. */
static int short_child(void)
{
	struct fg_kctx *c = NULL;
	struct fg_err e = {0};
	int rc = fg_kctx_new(&c, &e), pos, kvh = 2, hd = 256, cap;
	void *dq = NULL, *dk = NULL, *dv = NULL, *dy = NULL, *dp = NULL;

	if (rc || !fg_kctx_set_attn_short(c, 1))
		return rc ? 1 : 2;
	pos = fg_kctx_attn_short_keys(c);
	cap = 2 * pos;
	rc = fg_kmem_alloc(c, &dq, 4 * 8 * hd, &e) || fg_kmem_alloc(c, &dk, 4 * (size_t)kvh * cap * hd, &e) ||
	     fg_kmem_alloc(c, &dv, 4 * (size_t)kvh * cap * hd, &e) || fg_kmem_alloc(c, &dy, 4 * 8 * hd, &e) ||
	     fg_kmem_alloc(c, &dp, 4, &e) || fg_kmem_fill(c, dq, 0, 4 * 8 * hd, &e) ||
	     fg_kmem_fill(c, dk, 0, 4 * (size_t)kvh * cap * hd, &e) || fg_kmem_fill(c, dv, 0, 4 * (size_t)kvh * cap * hd, &e) ||
	     fg_kmem_upload(c, dp, &pos, 4, &e) || fg_kctx_sync(c, &e);
	if (rc) {
		printf("# short child: setup failed: %s\n", e.msg);
		return 1;
	}
	rc = fg_k_attn_decode(c, dy, dq, dk, dv, 8, kvh, hd, cap, dp, 1.0f, &e);
	if (!rc)
		rc = fg_kctx_sync(c, &e);
	printf("# short child: position %d: rc %d: %s\n", pos, rc, e.msg);
	return rc == FG_EDEVICE && strstr(e.msg, "CUDA") ? 0 : 1;
}

/* Runs this program again with arg in a child; its exit status. */
static int child_status(const char *arg)
{
	pid_t pid;
	int st = 0;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", "test_kernels", arg, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	return pid > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void gpu_fault(void)
{
	int st;

	if (getenv("FG_NO_FAULT_TEST")) {
		ok(1, "kernel fault test # skip: FG_NO_FAULT_TEST set (memcheck run)");
		return;
	}
	ok(child_status("--fault-child") == 0, "a kernel fault comes back as FG_EDEVICE naming CUDA");
	st = child_status("--short-child");
	if (st == 2)
		ok(1, "a short attention launch past its keys # skip: no short launches on this GPU");
	else
		ok(st == 0, "a short attention launch at a position past its keys: FG_EDEVICE, not a wrong answer");
}

int main(int argc, char **argv)
{
	struct fg_err err = {0};

	if (argc > 1 && !strcmp(argv[1], "--fault-child"))
		return fault_child();
	if (argc > 1 && !strcmp(argv[1], "--short-child"))
		return short_child();

	test_layout();
	test_layout_mma();
	test_layout_i8();
	test_i8();
	test_twins();
	twin_ple_tail();
#ifdef FG_HAVE_CUDA
	ok(fg_cuda_built() == 1, "built with CUDA kernels (nvcc present)");
#else
	ok(fg_cuda_built() == 0, "built without CUDA kernels (no nvcc)");
#endif
	if (!(ctx = gpu_test_open("gpu kernels vs cpu twins", &err)))
		return tap_done();
	gpu_code_arch();
	if (argc > 1 && !strcmp(argv[1], "--ple")) { /* only the fused PLE tail (for compute-sanitizer) */
		gpu_ple_tail();
		fg_kctx_free(ctx);
		return tap_done();
	}
	if (argc > 1 && !strcmp(argv[1], "--lp")) { /* only the row log-probabilities (for compute-sanitizer) */
		gpu_row_logprobs();
		fg_kctx_free(ctx);
		return tap_done();
	}
	if (argc > 1 && !strcmp(argv[1], "--attn")) { /* only the decode attention (for compute-sanitizer) */
		gpu_attention();
		gpu_attn_post();
		fg_kctx_free(ctx);
		return tap_done();
	}
	if (argc > 1 && !strcmp(argv[1], "--i8")) { /* only the i8 matvec's launches (for compute-sanitizer) */
		fg_kctx_set_int4_kind(ctx, FG_INT4_I8);
		kind_name = "i8";
		gpu_int4();
		gpu_int4_chain();
		gpu_i8_splits();
		fg_kctx_free(ctx);
		return tap_done();
	}
	if (argc > 1 && !strcmp(argv[1], "--moe")) { /* only the bias and MoE kernels (for compute-sanitizer) */
		gpu_add_bias();
		gpu_moe();
		fg_kctx_free(ctx);
		return tap_done();
	}
	for (int kind = FG_INT4_FMA; kind <= FG_INT4_I8; kind++) {
		kind_name = kind == FG_INT4_I8 ? "i8" : kind == FG_INT4_MMA ? "mma" : "fma";
		fg_kctx_set_int4_kind(ctx, kind);
		gpu_int4();
		gpu_int4_chain();
		gpu_graph();
	}
	fg_kctx_set_int4_kind(ctx, FG_INT4_I8);
	gpu_i8_splits();
	fg_kctx_set_int4_kind(ctx, FG_INT4_FMA);
	gpu_bf16_matvec();
	gpu_rows_matvec();
	gpu_norms();
	gpu_rope();
	gpu_small_ops();
	gpu_add_bias();
	gpu_moe();
	gpu_attention();
	gpu_attn_post();
	gpu_argmax();
	gpu_row_logprobs();
	gpu_ple_tail();
	gpu_fused();
	fg_kctx_free(ctx);
	gpu_fault();
	return tap_done();
}
