/* ops.c - CPU reference operations (see ops.h for shapes and math). */
#include "engine/cpu/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"

/* The canonical summation order of every dot product: lane j (j < 8) sums
 * the products of elements i = j mod 8 in increasing i; the lanes combine as
 * (((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7))); the tail (n mod 8 elements)
 * is added last, in order. The AVX2 versions below keep exactly this order
 * (one 8-wide accumulator = the 8 lanes, no FMA), so every path gives the
 * same bits as the scalar one. */
static float combine(float *acc, const float *a, const float *b, int i, int n)
{
	acc[0] += acc[4];
	acc[1] += acc[5];
	acc[2] += acc[6];
	acc[3] += acc[7];
	acc[0] += acc[2];
	acc[1] += acc[3];
	acc[0] += acc[1];
	for (; i < n; i++)
		acc[0] += a[i] * b[i];
	return acc[0];
}

static float dot_scalar(const float *a, const float *b, int n)
{
	float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	int i = 0, j;

	for (; i + 8 <= n; i += 8)
		for (j = 0; j < 8; j++)
			acc[j] += a[i + j] * b[i + j];
	return combine(acc, a, b, i, n);
}

/* bf16 row w (n values, unaligned bytes) . x, as dot(widen(w), x) */
static float dot_bf16_scalar(const uint8_t *w, const float *x, int n, float *tailbuf)
{
	float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	int i = 0, j;

	for (; i + 8 <= n; i += 8)
		for (j = 0; j < 8; j++) {
			uint16_t h;

			memcpy(&h, w + 2 * (size_t)(i + j), 2);
			acc[j] += fg_bf16_to_f32(h) * x[i + j];
		}
	for (j = i; j < n; j++) {
		uint16_t h;

		memcpy(&h, w + 2 * (size_t)j, 2);
		tailbuf[j - i] = fg_bf16_to_f32(h);
	}
	return combine(acc, tailbuf, x + i, 0, n - i);
}

/* INT4 row (packed words, bf16 scales, group columns per scale) . x, as
 * dot(widen(w), x); n and group are multiples of 8 */
static float dot_int4_scalar(const uint8_t *pk, const uint8_t *sc, int group, const float *x, int n)
{
	float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	int i, j;

	for (i = 0; i < n; i += 8) {
		uint32_t word;
		uint16_t h;
		float s;

		memcpy(&word, pk + (size_t)i / 2, 4);
		memcpy(&h, sc + 2 * (size_t)(i / group), 2);
		s = fg_bf16_to_f32(h);
		for (j = 0; j < 8; j++)
			acc[j] += ((float)((int)((word >> (4 * j)) & 15u) - 8) * s) * x[i + j];
	}
	return combine(acc, x, x, n, n);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_AVX2_PATH 1

__attribute__((target("avx2"))) static float dot_avx2(const float *a, const float *b, int n)
{
	__m256 acc = _mm256_setzero_ps();
	float lanes[8];
	int i = 0;

	for (; i + 8 <= n; i += 8)
		acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
	_mm256_storeu_ps(lanes, acc);
	return combine(lanes, a, b, i, n);
}

__attribute__((target("avx2"))) static float dot_bf16_avx2(const uint8_t *w, const float *x, int n,
							  float *tailbuf)
{
	__m256 acc = _mm256_setzero_ps();
	float lanes[8];
	int i = 0, j;

	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(const void *)(w + 2 * (size_t)i));
		__m256 wf = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));

		acc = _mm256_add_ps(acc, _mm256_mul_ps(wf, _mm256_loadu_ps(x + i)));
	}
	_mm256_storeu_ps(lanes, acc);
	for (j = i; j < n; j++) {
		uint16_t hh;

		memcpy(&hh, w + 2 * (size_t)j, 2);
		tailbuf[j - i] = fg_bf16_to_f32(hh);
	}
	return combine(lanes, tailbuf, x + i, 0, n - i);
}

/* Eight INT4 weights from element i (a multiple of 8) of a packed row,
 * (q - 8) * s as floats: the step both AVX2 loops below take. */
__attribute__((target("avx2"), always_inline)) static inline __m256 int4_w8_avx2(const uint8_t *pk, int i, __m256 s)
{
	const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
	uint32_t word;
	__m256i q;

	memcpy(&word, pk + (size_t)i / 2, 4);
	q = _mm256_srlv_epi32(_mm256_set1_epi32((int)word), shifts);
	q = _mm256_sub_epi32(_mm256_and_si256(q, _mm256_set1_epi32(15)), _mm256_set1_epi32(8));
	return _mm256_mul_ps(_mm256_cvtepi32_ps(q), s);
}

__attribute__((target("avx2"))) static float dot_int4_avx2(const uint8_t *pk, const uint8_t *sc, int group,
							  const float *x, int n)
{
	__m256 acc = _mm256_setzero_ps();
	float lanes[8];
	int g, i;

	for (g = 0; g < n; g += group) {
		uint16_t h;
		__m256 s;

		memcpy(&h, sc + 2 * (size_t)(g / group), 2);
		s = _mm256_set1_ps(fg_bf16_to_f32(h));
		for (i = g; i < g + group; i += 8)
			acc = _mm256_add_ps(acc, _mm256_mul_ps(int4_w8_avx2(pk, i, s), _mm256_loadu_ps(x + i)));
	}
	_mm256_storeu_ps(lanes, acc);
	return combine(lanes, x, x, n, n);
}

/* widening is exact, so these match the scalar loops bit for bit */
__attribute__((target("avx2"))) static void row_bf16_avx2(const uint8_t *src, int n, float *out)
{
	int i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * (size_t)i));

		_mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
	}
	for (; i < n; i++) {
		uint16_t h;

		memcpy(&h, src + 2 * (size_t)i, 2);
		out[i] = fg_bf16_to_f32(h);
	}
}

__attribute__((target("avx2"))) static void row_int4_avx2(const uint8_t *pk, const uint8_t *sc, int group, int n,
							 float *out)
{
	int g, i;

	for (g = 0; g < n; g += group) {
		uint16_t h;
		__m256 s;

		memcpy(&h, sc + 2 * (size_t)(g / group), 2);
		s = _mm256_set1_ps(fg_bf16_to_f32(h));
		for (i = g; i < g + group; i += 8)
			_mm256_storeu_ps(out + i, int4_w8_avx2(pk, i, s));
	}
}

/* F16C's vcvtph2ps widens 8 halves at once, to the bits of fg_f16_to_f32
 * (tests/unit/test_safetensors.c checks all 65536) */
__attribute__((target("avx2,f16c"))) static void row_f16_f16c(const uint8_t *src, int n, float *out)
{
	int i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i,
				 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + 2 * (size_t)i))));
	fg_f16_row_to_f32(out + i, src + 2 * (size_t)i, (size_t)(n - i));
}

static int simd = -1;

static int use_avx2(void)
{
	if (simd < 0)
		simd = __builtin_cpu_supports("avx2") && !getenv("FG_NO_AVX2");
	return simd;
}

/* F16C (CPUID leaf 1, ECX bit 29): read with cpuid.h, which gcc and clang
 * both have; clang's __builtin_cpu_supports does not know "f16c" (make fuzz
 * builds with clang). */
static int has_f16c(void)
{
	static int f16c = -1;
	unsigned a, b, c, d;

	if (f16c < 0)
		f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
	return f16c;
}
#endif

int fg_cpu_set_simd(int on)
{
#ifdef HAVE_AVX2_PATH
	int was = use_avx2();

	simd = on && __builtin_cpu_supports("avx2");
	return was;
#else
	(void)on;
	return 0;
#endif
}

float fg_cpu_dot(const float *a, const float *b, int n)
{
#ifdef HAVE_AVX2_PATH
	if (use_avx2())
		return dot_avx2(a, b, n);
#endif
	return dot_scalar(a, b, n);
}

static void row_bf16(const uint8_t *src, int n, float *out)
{
	int i;

	for (i = 0; i < n; i++) {
		uint16_t h;

		memcpy(&h, src + 2 * (size_t)i, 2);
		out[i] = fg_bf16_to_f32(h);
	}
}

void fg_cpu_lin_row(const struct fg_lin *w, int r, float *out)
{
	size_t cols = (size_t)w->cols;

	switch (w->fmt) {
	case FG_W_F32:
		memcpy(out, (const uint8_t *)w->w + (size_t)r * cols * 4, cols * 4);
		break;
	case FG_W_F16:
#ifdef HAVE_AVX2_PATH
		if (use_avx2() && has_f16c()) {
			row_f16_f16c((const uint8_t *)w->w + (size_t)r * cols * 2, w->cols, out);
			break;
		}
#endif
		fg_f16_row_to_f32(out, (const uint8_t *)w->w + (size_t)r * cols * 2, (size_t)w->cols);
		break;
	case FG_W_BF16:
#ifdef HAVE_AVX2_PATH
		if (use_avx2()) {
			row_bf16_avx2((const uint8_t *)w->w + (size_t)r * cols * 2, w->cols, out);
			break;
		}
#endif
		row_bf16((const uint8_t *)w->w + (size_t)r * cols * 2, w->cols, out);
		break;
	case FG_W_INT4: {
		const uint8_t *pk = (const uint8_t *)w->w + (size_t)r * (cols / 8) * 4;
		const uint8_t *sc = (const uint8_t *)w->scale + (size_t)r * (cols / (size_t)w->group) * 2;
		size_t c, g, ngroups = cols / (size_t)w->group;

#ifdef HAVE_AVX2_PATH
		if (use_avx2()) {
			row_int4_avx2(pk, sc, w->group, w->cols, out);
			break;
		}
#endif

		for (g = 0; g < ngroups; g++) {
			uint16_t h;
			float s;

			memcpy(&h, sc + 2 * g, 2);
			s = fg_bf16_to_f32(h);
			for (c = g * (size_t)w->group; c < (g + 1) * (size_t)w->group; c += 8) {
				uint32_t word;
				int i;

				memcpy(&word, pk + c / 2, 4);
				for (i = 0; i < 8; i++)
					out[c + (size_t)i] = (float)((int)((word >> (4 * i)) & 15u) - 8) * s;
			}
		}
		break;
	}
	default:
		memset(out, 0, cols * 4);
	}
}

/* One output of a single-token matvec straight from the stored row: the same
 * bits as fg_cpu_dot(widened row, x), without the widened copy. */
static float row_dot(const struct fg_lin *w, int r, const float *x, float *tailbuf)
{
	size_t cols = (size_t)w->cols;

	switch (w->fmt) {
	case FG_W_BF16: {
		const uint8_t *row = (const uint8_t *)w->w + (size_t)r * cols * 2;
#ifdef HAVE_AVX2_PATH
		if (use_avx2())
			return dot_bf16_avx2(row, x, w->cols, tailbuf);
#endif
		return dot_bf16_scalar(row, x, w->cols, tailbuf);
	}
	case FG_W_INT4: {
		const uint8_t *pk = (const uint8_t *)w->w + (size_t)r * (cols / 8) * 4;
		const uint8_t *sc = (const uint8_t *)w->scale + (size_t)r * (cols / (size_t)w->group) * 2;
#ifdef HAVE_AVX2_PATH
		if (use_avx2())
			return dot_int4_avx2(pk, sc, w->group, x, w->cols);
#endif
		return dot_int4_scalar(pk, sc, w->group, x, w->cols);
	}
	default:
		fg_cpu_lin_row(w, r, tailbuf);
		return fg_cpu_dot(tailbuf, x, w->cols);
	}
}

void fg_cpu_matmul_rows(const struct fg_lin *w, const float *x, int T, float *y, int r0, int r1,
			float *row_buf)
{
	int r, t;

	if (T == 1) {
		for (r = r0; r < r1; r++)
			y[r] = row_dot(w, r, x, row_buf);
		return;
	}
	for (r = r0; r < r1; r++) {
		fg_cpu_lin_row(w, r, row_buf);
		for (t = 0; t < T; t++)
			y[(size_t)t * (size_t)w->rows + (size_t)r] =
				fg_cpu_dot(row_buf, x + (size_t)t * (size_t)w->cols, w->cols);
	}
}

void fg_cpu_rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
	float ms = fg_cpu_dot(x, x, n) / (float)n;
	float inv = 1.0f / sqrtf(ms + eps);
	int i;

	for (i = 0; i < n; i++)
		y[i] = w ? (x[i] * inv) * w[i] : x[i] * inv;
}

void fg_cpu_gelu_tanh(float *x, int n)
{
	/* torch: kBeta = sqrt(2) * (2/sqrt(pi)) * 0.5, kKappa = 0.044715 */
	const float beta = (float)(M_SQRT2 * M_2_SQRTPI * 0.5);
	const float kappa = 0.044715f;
	int i;

	for (i = 0; i < n; i++) {
		float v = x[i];
		float inner = beta * (v + kappa * v * v * v);

		x[i] = 0.5f * v * (1.0f + tanhf(inner));
	}
}

void fg_cpu_rope_freqs(float *inv, int d, double theta, int proportional, double partial,
		       double factor)
{
	int half = d / 2, i, angles = half;

	if (proportional)
		angles = (int)floor(partial * d / 2.0);
	for (i = 0; i < half; i++) {
		if (i < angles) {
			float e = (float)(2 * i) / (float)d; /* fp32, as torch's arange / dim */
			float p = (float)pow((double)(float)theta, (double)e); /* the base meets torch as fp32 */

			inv[i] = 1.0f / p;
		} else {
			inv[i] = 0.0f;
		}
		if (factor != 1.0)
			inv[i] = inv[i] / (float)factor;
	}
}

void fg_cpu_rope_scaled(float *x, int d, const float *inv, int pos, float scale)
{
	int half = d / 2, i;

	for (i = 0; i < half; i++) {
		float a = (float)pos * inv[i];
		float c = (float)cos((double)a) * scale, s = (float)sin((double)a) * scale;
		float x0 = x[i], x1 = x[i + half];

		x[i] = x0 * c + (-x1) * s;
		x[i + half] = x1 * c + x0 * s;
	}
}

void fg_cpu_attend(float *out, const float *q, int d, const float *const *k, const float *const *v,
		   int n, float *scores)
{
	float mx = -INFINITY, sum = 0.0f;
	int j, i;

	for (j = 0; j < n; j++) {
		scores[j] = fg_cpu_dot(q, k[j], d);
		if (scores[j] > mx)
			mx = scores[j];
	}
	for (j = 0; j < n; j++) {
		scores[j] = expf(scores[j] - mx);
		sum += scores[j];
	}
	for (i = 0; i < d; i++)
		out[i] = 0.0f;
	for (j = 0; j < n; j++) {
		float p = scores[j] / sum;

		for (i = 0; i < d; i++)
			out[i] += p * v[j][i];
	}
}

void fg_cpu_softcap(float *x, int n, float cap)
{
	int i;

	if (cap <= 0.0f)
		return;
	for (i = 0; i < n; i++)
		x[i] = tanhf(x[i] / cap) * cap;
}
