/* test_int4.c - the INT4 quantizer: hand-computed known answers (zero groups,
 * ±max, ties at .5, subnormals, NaN/Inf), the half-step property on random
 * matrices, row-split invariance, F16/F32 input, and which tensor names are
 * quantized. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bake/int4.h"
#include "bf16.h"
#include "safetensors.h"
#include "tap.h"

#define G 32

/* One row of G bf16 values -> (first packed word, scale bits); -1 on error. */
static int q1(const uint16_t *h, uint32_t words[G / 8], uint16_t *scale, size_t *bad)
{
	uint8_t w[G * 2], p[G / 2], s[2];
	int i, rc;

	for (i = 0; i < G; i++)
		fg_put_le16(w + 2 * i, h[i]);
	rc = fg_int4_quant_rows(p, s, w, 1, G, G, bad);
	for (i = 0; i < G / 8; i++)
		words[i] = fg_le32(p + 4 * i);
	*scale = fg_le16(s);
	return rc;
}

static void fill(uint16_t *h, uint16_t v)
{
	int i;

	for (i = 0; i < G; i++)
		h[i] = v;
}

static void test_known_answers(void)
{
	uint16_t h[G], sc;
	uint32_t wd[G / 8];
	size_t bad = 0;
	int i;

	fill(h, 0);
	ok(q1(h, wd, &sc, &bad) == 0 && sc == 0x3c00 && wd[0] == 0x88888888u && wd[3] == 0x88888888u,
	   "all-zero group: scale 2^-7 (bf16 eps), every nibble 8 (got %04x %08x)", sc, wd[0]);
	fill(h, 0x8000);
	ok(q1(h, wd, &sc, &bad) == 0 && sc == 0x3c00 && wd[0] == 0x88888888u,
	   "negative-zero group quantizes like zero");

	/* 1.0 alone: s = bf16(1/7.5) = 0x3e09 (0.13378906); 1/s = 7.4745 -> bf16 7.46875 -> 7 -> nibble 15. */
	fill(h, 0);
	h[0] = 0x3f80;
	ok(q1(h, wd, &sc, &bad) == 0 && sc == 0x3e09 && wd[0] == 0x8888888fu,
	   "+max: scale 0x3e09, q = 7 (got %04x %08x)", sc, wd[0]);
	h[0] = 0xbf80;
	ok(q1(h, wd, &sc, &bad) == 0 && sc == 0x3e09 && wd[0] == 0x88888881u,
	   "-max: q = -7, nibble 1 (got %08x)", wd[0]);

	/* amax 7.5 -> s = 1 exactly; ties round half to even; +7.5 clamps to 7, -7.5 rounds to -8. */
	{
		static const float v[8] = { 7.5f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 3.5f, -7.5f };

		for (i = 0; i < G; i++)
			h[i] = fg_f32_to_bf16(v[i % 8]);
		ok(q1(h, wd, &sc, &bad) == 0 && sc == 0x3f80 && wd[0] == 0x0c68aa8fu && wd[2] == 0x0c68aa8fu,
		   "ties at .5 to even, +7.5 clamps to 7, -7.5 to -8 (got %04x %08x)", sc, wd[0]);
	}

	/* Smallest subnormal 2^-133: amax/7.5 rounds to bf16 zero -> eps scale, q = 0. */
	fill(h, 0x0001);
	ok(q1(h, wd, &sc, &bad) == 0 && sc == 0x3c00 && wd[0] == 0x88888888u,
	   "subnormal 2^-133: scale falls back to eps (got %04x %08x)", sc, wd[0]);
	/* 2^-127 (bf16 0x0040): s = bf16(2^-127/7.5) = 9 * 2^-133 (0x0009), w/s = 7.11 -> 7.125 -> 7. */
	fill(h, 0x0040);
	ok(q1(h, wd, &sc, &bad) == 0 && sc == 0x0009 && wd[0] == 0xffffffffu,
	   "subnormal 2^-127: subnormal scale 0x0009, q = 7 (got %04x %08x)", sc, wd[0]);

	/* Largest finite bf16 magnitudes stay finite. */
	for (i = 0; i < G; i++)
		h[i] = (i & 1) ? 0x7f7f : 0xff7f;
	ok(q1(h, wd, &sc, &bad) == 0 && sc == fg_f32_to_bf16(fg_bf16_to_f32(0x7f7f) / 7.5f) &&
	   wd[0] == 0xf0f0f0f0u, "±largest finite: -max to -8, +max to 7 (got %04x %08x)", sc, wd[0]);

	fill(h, 0x3f80);
	h[5] = 0x7fc0;
	ok(q1(h, wd, &sc, &bad) == -1 && bad == 5, "NaN refused with its index (%zu)", bad);
	fill(h, 0x3f80);
	h[17] = 0xff80;
	ok(q1(h, wd, &sc, &bad) == -1 && bad == 17, "-Inf refused with its index (%zu)", bad);
	{
		uint8_t w[4 * 64 * 2], p[4 * 32], s[4 * 2 * 2]; /* 2 groups of 2-byte scales per row */

		for (i = 0; i < 4 * 64; i++)
			fg_put_le16(w + 2 * i, 0x3f80);
		fg_put_le16(w + 2 * (2 * 64 + 40), 0x7f80);
		ok(fg_int4_quant_rows(p, s, w, 4, 64, 32, &bad) == -1 && bad == 2 * 64 + 40,
		   "+Inf in row 2 column 40 reported at index %zu", bad);
	}
}

static uint64_t rng = 88172645463325252ULL;

static double urand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static void test_property(void)
{
	static const size_t groups[3] = { 32, 64, 128 };
	size_t rows = 48, cols = 512, gi, i, bad = 0, n = rows * cols;
	uint8_t *w = malloc(n * 2), *p = malloc(n / 2), *s = malloc(n / 32 * 2);
	uint8_t *p2 = malloc(n / 2), *s2 = malloc(n / 32 * 2);
	double worst = 0, bound = 0.5 + 7.6 / 256.0;
	int split_ok = 1, k;

	for (gi = 0; gi < 3; gi++) {
		size_t g = groups[gi], ng = cols / g;

		for (k = 0; k < 4; k++) {
			/* Gaussian-ish, uniform, heavy-tailed and mixed-magnitude rows. */
			for (i = 0; i < n; i++) {
				double u = urand() * 2 - 1, x;

				switch (k) {
				case 0: x = (urand() + urand() + urand() - 1.5) * 0.03; break;
				case 1: x = u; break;
				case 2: x = u * u * u * 40; break;
				default: x = u * pow(10.0, (double)((i / 64) % 12) - 8); break;
				}
				fg_put_le16(w + 2 * i, fg_f32_to_bf16((float)x));
			}
			ok(fg_int4_quant_rows(p, s, w, rows, cols, g, &bad) == 0, "random g%zu kind %d", g, k);
			for (i = 0; i < n; i++) {
				uint32_t word = fg_le32(p + (i / 8) * 4);
				int q = (int)((word >> (4 * (i % 8))) & 15) - 8;
				float sc = fg_bf16_to_f32(fg_le16(s + ((i / cols) * ng + (i % cols) / g) * 2));
				double e = fabs((double)q * sc - fg_bf16_to_f32(fg_le16(w + 2 * i))) / sc;

				if (sc >= ldexpf(1.0f, -126) && e > worst)
					worst = e;
			}
			/* Any split of rows gives the same bytes. */
			fg_int4_quant_rows(p2, s2, w, 7, cols, g, &bad);
			fg_int4_quant_rows(p2 + 7 * cols / 2, s2 + 7 * ng * 2, w + 7 * cols * 2, rows - 7,
					   cols, g, &bad);
			if (memcmp(p, p2, n / 2) || memcmp(s, s2, rows * ng * 2))
				split_ok = 0;
		}
	}
	ok(worst <= bound, "dequantized within %.4f scale steps everywhere (worst %.4f)", bound, worst);
	ok(worst >= 0.45, "the bound is approached (worst %.4f), so the check can fail", worst);
	ok(split_ok, "row splits give identical bytes");
	free(w);
	free(p);
	free(s);
	free(p2);
	free(s2);
}

/* The dispatched kernel (AVX2 here) against the plain C reference, on every
 * finite bf16 bit pattern (denormals, +-0, +-max included) laid out in order
 * (groups of neighbouring magnitudes, so every rounding case and the
 * all-denormal groups whose scale falls back to eps occur) and shuffled, and
 * on crafted ties (w / s = k + 0.5 exactly), for each group size. */
static void test_simd_agrees(void)
{
	size_t n = 0, i, gi, cols = 1024, rows, bad = 0;
	uint8_t *w = malloc(2 * 66560), *p1, *p2, *s1, *s2;
	static const float ties[16] = { 0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 7.5f,
					-0.5f, -1.5f, -2.5f, -3.5f, -4.5f, -5.5f, -6.5f, -7.5f };
	int same = 1, layout;

	for (layout = 0; layout < 3; layout++) {
		n = 0;
		if (layout < 2)
			for (i = 0; i < 65536; i++)
				if ((i & 0x7f80u) != 0x7f80u) /* finite */
					fg_put_le16(w + 2 * n++, (uint16_t)i);
		if (layout == 1)
			for (i = n - 1; i > 0; i--) { /* Fisher-Yates with the test's xorshift */
				size_t j = (size_t)(urand() * (double)(i + 1));
				uint8_t t0 = w[2 * i], t1 = w[2 * i + 1];

				w[2 * i] = w[2 * j];
				w[2 * i + 1] = w[2 * j + 1];
				w[2 * j] = t0;
				w[2 * j + 1] = t1;
			}
		if (layout == 2) /* ties at scales 2^-130 .. 2^3: amax 7.5 s makes the scale exactly s */
			for (n = 0; n < 65536; n++) {
				float sc = ldexpf(1.0f, (int)((n / 32) % 134) - 130);

				fg_put_le16(w + 2 * n, fg_f32_to_bf16(ties[n % 16] * sc));
			}
		while (n % cols)
			fg_put_le16(w + 2 * n++, 0);
		rows = n / cols;
		for (gi = 32; gi <= 128; gi *= 2) {
			size_t ns = rows * (cols / gi) * 2;

			p1 = malloc(n / 2);
			p2 = malloc(n / 2);
			s1 = malloc(ns);
			s2 = malloc(ns);
			if (fg_int4_quant_rows(p1, s1, w, rows, cols, gi, &bad) ||
			    fg_int4_quant_rows_scalar(p2, s2, w, rows, cols, gi, &bad) || memcmp(p1, p2, n / 2) ||
			    memcmp(s1, s2, ns))
				same = 0;
			free(p1);
			free(p2);
			free(s1);
			free(s2);
		}
	}
	ok(same, "%s kernel gives the scalar reference's bytes on every finite bf16, shuffled, and ties",
	   fg_int4_simd() ? "the SIMD" : "(no SIMD on this CPU) the dispatched");
	free(w);
}

/* The quantizer written out once more, from the spec (docs/formats/int4.md),
 * on fp32 input: s = bf16(a / 7.5) (2^-7 when 0), q = rint(clamp(bf16(w / s),
 * -8, 7)) with rintf in the default round-to-nearest-even mode. */
static void ref_rows_f32(uint8_t *packed, uint8_t *scales, const float *w, size_t rows, size_t cols,
			 size_t group)
{
	size_t r, g, i, ng = cols / group;

	memset(packed, 0, rows * cols / 2);
	for (r = 0; r < rows; r++)
		for (g = 0; g < ng; g++) {
			const float *x = w + r * cols + g * group;
			float a = 0, s;
			uint16_t sb;

			for (i = 0; i < group; i++)
				a = fabsf(x[i]) > a ? fabsf(x[i]) : a;
			sb = fg_f32_to_bf16(a / 7.5f);
			if (!sb)
				sb = 0x3c00;
			s = fg_bf16_to_f32(sb);
			fg_put_le16(scales + (r * ng + g) * 2, sb);
			for (i = 0; i < group; i++) {
				float v = fg_bf16_to_f32(fg_f32_to_bf16(x[i] / s));
				int q = (int)rintf(v < -8 ? -8 : v > 7 ? 7 : v);
				size_t e = r * cols + g * group + i;

				packed[e / 2] |= (uint8_t)((unsigned)(q + 8) << (4 * (e % 2)));
			}
		}
}

/* F16 and F32 input (fg_int4_quant_rows_dtype): bf16 values given as F32
 * give the bf16 kernel's bytes; halves given as F16 give the bytes of the
 * same values as F32; random F32 values (not bf16-representable) give the
 * spec's bytes above; any row split the same bytes; a NaN or Inf is found
 * and placed. Groups 32, 64, 128. */
static void test_dtypes(void)
{
	size_t rows = 24, cols = 1024, n = rows * cols, i, gi, bad = 0;
	uint8_t *w16 = malloc(2 * n), *w32 = malloc(4 * n), *h16 = malloc(2 * n);
	uint8_t *p1 = malloc(n / 2), *p2 = malloc(n / 2), *s1 = malloc(n / 16), *s2 = malloc(n / 16);
	float *f = malloc(4 * n);
	int bf_same = 1, h_same = 1, ref_same = 1, split_same = 1, k;
	double worst = 0;

	for (k = 0; k < 4; k++) {
		for (i = 0; i < n; i++) {
			double u = urand() * 2 - 1, x;
			uint16_t hb;

			switch (k) {
			case 0: x = (urand() + urand() + urand() - 1.5) * 0.03; break;
			case 1: x = u; break;
			case 2: x = u * u * u * 40; break;
			default: x = u * pow(10.0, (double)((i / 64) % 12) - 8); break;
			}
			fg_put_le16(w16 + 2 * i, fg_f32_to_bf16((float)x));
			f[i] = (float)x; /* not bf16-representable in general */
			do /* a random finite half */
				hb = (uint16_t)(urand() * 65536.0);
			while ((hb & 0x7c00u) == 0x7c00u);
			fg_put_le16(h16 + 2 * i, hb);
		}
		for (gi = 32; gi <= 128; gi *= 2) {
			size_t ns = rows * (cols / gi) * 2;

			/* bf16 values as F32 */
			for (i = 0; i < n; i++) {
				float v = fg_bf16_to_f32(fg_le16(w16 + 2 * i));

				memcpy(w32 + 4 * i, &v, 4);
			}
			if (fg_int4_quant_rows(p1, s1, w16, rows, cols, gi, &bad) ||
			    fg_int4_quant_rows_dtype(p2, s2, w32, FG_ST_F32, rows, cols, gi, &bad) ||
			    memcmp(p1, p2, n / 2) || memcmp(s1, s2, ns))
				bf_same = 0;
			/* halves as F16 and as F32 */
			for (i = 0; i < n; i++) {
				float v = fg_f16_to_f32(fg_le16(h16 + 2 * i));

				memcpy(w32 + 4 * i, &v, 4);
			}
			if (fg_int4_quant_rows_dtype(p1, s1, h16, FG_ST_F16, rows, cols, gi, &bad) ||
			    fg_int4_quant_rows_dtype(p2, s2, w32, FG_ST_F32, rows, cols, gi, &bad) ||
			    memcmp(p1, p2, n / 2) || memcmp(s1, s2, ns))
				h_same = 0;
			/* arbitrary F32 against the spec, and split in two */
			memcpy(w32, f, 4 * n);
			ref_rows_f32(p2, s2, f, rows, cols, gi);
			if (fg_int4_quant_rows_dtype(p1, s1, w32, FG_ST_F32, rows, cols, gi, &bad) ||
			    memcmp(p1, p2, n / 2) || memcmp(s1, s2, ns))
				ref_same = 0;
			for (i = 0; i < n; i++) {
				int q = (int)((fg_le32(p1 + (i / 8) * 4) >> (4 * (i % 8))) & 15) - 8;
				float sc = fg_bf16_to_f32(fg_le16(s1 + ((i / cols) * (cols / gi) + (i % cols) / gi) * 2));
				double e = fabs((double)q * sc - f[i]) / sc;

				if (sc >= ldexpf(1.0f, -126) && e > worst)
					worst = e;
			}
			if (fg_int4_quant_rows_dtype(p2, s2, w32, FG_ST_F32, 7, cols, gi, &bad) ||
			    fg_int4_quant_rows_dtype(p2 + 7 * cols / 2, s2 + 7 * (cols / gi) * 2, w32 + 7 * cols * 4,
						     FG_ST_F32, rows - 7, cols, gi, &bad) ||
			    memcmp(p1, p2, n / 2) || memcmp(s1, s2, ns))
				split_same = 0;
		}
	}
	ok(bf_same, "bf16 values given as F32 quantize to the bf16 kernel's bytes");
	ok(h_same, "random finite halves give the same bytes as F16 and as their F32 values");
	ok(ref_same, "F32 values (not bf16-representable) give the bytes of the spec written out in the test");
	ok(split_same, "F32: row splits give identical bytes");
	ok(worst <= 0.5 + 7.6 / 256 && worst >= 0.45, "F32: dequantized within %.4f scale steps (worst %.4f)",
	   0.5 + 7.6 / 256, worst);
	{
		float nan = NAN;

		memcpy(w32 + 4 * (2 * cols + 77), &nan, 4);
		bad = 0;
		ok(fg_int4_quant_rows_dtype(p1, s1, w32, FG_ST_F32, rows, cols, 32, &bad) == -1 && bad == 2 * cols + 77,
		   "F32: a NaN is refused and placed at [2, 77] (%zu)", bad);
		fg_put_le16(h16 + 2 * (5 * cols + 1000), 0xfc00); /* -inf */
		bad = 0;
		ok(fg_int4_quant_rows_dtype(p1, s1, h16, FG_ST_F16, rows, cols, 128, &bad) == -1 &&
			   bad == 5 * cols + 1000,
		   "F16: -Inf is refused and placed at [5, 1000] (%zu)", bad);
	}
	free(w16);
	free(w32);
	free(h16);
	free(p1);
	free(p2);
	free(s1);
	free(s2);
	free(f);
}

static void test_targets(void)
{
	ok(fg_int4_is_target("model.language_model.layers.0.self_attn.q_proj.weight"), "target: q_proj");
	ok(fg_int4_is_target("model.language_model.layers.41.mlp.down_proj.weight"), "target: down_proj");
	ok(fg_int4_is_target("model.language_model.layers.7.per_layer_input_gate.weight"), "target: ple gate");
	ok(fg_int4_is_target("model.language_model.layers.7.per_layer_projection.weight"), "target: ple proj");
	ok(fg_int4_is_target("model.language_model.per_layer_model_projection.weight"), "target: model projection");
	ok(fg_int4_is_target("model.layers.3.self_attn.o_proj.weight"), "target: text-only prefix");
	ok(!fg_int4_is_target("model.language_model.embed_tokens.weight"), "not: embeddings");
	ok(!fg_int4_is_target("model.language_model.embed_tokens_per_layer.weight"), "not: PLE table");
	ok(!fg_int4_is_target("model.language_model.layers.0.self_attn.q_norm.weight"), "not: q_norm");
	ok(!fg_int4_is_target("model.language_model.layers.0.layer_scalar"), "not: layer scalar");
	ok(!fg_int4_is_target("model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight"),
	   "not: vision tower");
	ok(!fg_int4_is_target("model.audio_tower.layers.0.self_attn.q_proj.linear.weight"), "not: audio tower");
	ok(!fg_int4_is_target("model.language_model.layers.x.mlp.up_proj.weight"), "not: bad layer index");
	ok(!fg_int4_is_target("model.language_model.layers.1.mlp.up_proj.weight_scale"), "not: already packed");
	ok(!fg_int4_is_target("lm_head.weight"), "not: lm_head (only with --head int4)");
}

int main(void)
{
	test_known_answers();
	test_property();
	test_simd_agrees();
	test_dtypes();
	test_targets();
	return tap_done();
}
