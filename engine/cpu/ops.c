/* ops.c - CPU reference operations (see ops.h for shapes and math). */
#include "engine/cpu/ops.h"

#include <math.h>
#include <string.h>

#include "bf16.h"

float fg_cpu_dot(const float *a, const float *b, int n)
{
	float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	int i = 0, j;

	for (; i + 8 <= n; i += 8)
		for (j = 0; j < 8; j++)
			acc[j] += a[i + j] * b[i + j];
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
	case FG_W_BF16:
		row_bf16((const uint8_t *)w->w + (size_t)r * cols * 2, w->cols, out);
		break;
	case FG_W_INT4: {
		const uint8_t *pk = (const uint8_t *)w->w + (size_t)r * (cols / 8) * 4;
		const uint8_t *sc = (const uint8_t *)w->scale + (size_t)r * (cols / (size_t)w->group) * 2;
		size_t c, g, ngroups = cols / (size_t)w->group;

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

void fg_cpu_matmul_rows(const struct fg_lin *w, const float *x, int T, float *y, int r0, int r1,
			float *row_buf)
{
	int r, t;

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
			float p = (float)pow(theta, (double)e);

			inv[i] = 1.0f / p;
		} else {
			inv[i] = 0.0f;
		}
		if (factor != 1.0)
			inv[i] = inv[i] / (float)factor;
	}
}

void fg_cpu_rope(float *x, int d, const float *inv, int pos)
{
	int half = d / 2, i;

	for (i = 0; i < half; i++) {
		float a = (float)pos * inv[i];
		float c = (float)cos((double)a), s = (float)sin((double)a);
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
