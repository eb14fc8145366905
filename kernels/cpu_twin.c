/* cpu_twin.c - plain-C twins of the CUDA kernels (see cpu_twin.h). */
#include "kernels/cpu_twin.h"

#include <math.h>
#include <string.h>

float fg_ref_bf16(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

uint16_t fg_ref_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return 0x7fc0;
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

void fg_ref_int4_matvec(float *y, const int32_t *packed, const uint16_t *scale_bf16, const float *x, int m, int n,
			int k, int group)
{
	int kw = k / 8, gk = (k + group - 1) / group;

	for (int b = 0; b < m; b++) {
		for (int r = 0; r < n; r++) {
			float acc = 0.0f;

			for (int e = 0; e < k; e++) {
				uint32_t w = (uint32_t)packed[(size_t)r * kw + e / 8];
				int q = (int)((w >> (4 * (e % 8))) & 15u) - 8;
				float s = fg_ref_bf16(scale_bf16[(size_t)r * gk + e / group]);

				acc += (float)q * s * x[(size_t)b * k + e];
			}
			y[(size_t)b * n + r] = acc;
		}
	}
}

void fg_ref_bf16_matvec(float *y, const uint16_t *w, const float *x, const int32_t *rows, int n, int k)
{
	for (int r = 0; r < n; r++) {
		const uint16_t *row = w + (size_t)(rows ? rows[r] : r) * k;
		float acc = 0.0f;

		for (int e = 0; e < k; e++)
			acc += fg_ref_bf16(row[e]) * x[e];
		y[r] = acc;
	}
}

static float inv_rms(const float *x, int n, float eps)
{
	float ss = 0.0f;

	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	return 1.0f / sqrtf(ss / (float)n + eps);
}

void fg_ref_rmsnorm(float *y, const float *x, const float *w, int rows, int n, float eps)
{
	for (int r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * n;
		float *yr = y + (size_t)r * n;
		float s = inv_rms(xr, n, eps);

		for (int i = 0; i < n; i++)
			yr[i] = xr[i] * s * (w ? w[i] : 1.0f);
	}
}

void fg_ref_rmsnorm_residual(float *h, const float *x, const float *w, int n, float eps, float scale)
{
	float s = inv_rms(x, n, eps);

	for (int i = 0; i < n; i++)
		h[i] = (h[i] + x[i] * s * w[i]) * scale;
}

void fg_ref_rope(float *x, int heads, int head_dim, int rot_pairs, float theta, int pos)
{
	int half = head_dim / 2;

	for (int i = 0; i < rot_pairs && i < half; i++) {
		/* transformers: inv_freq = 1 / theta^(2i/d) in fp32, angle = pos * inv_freq */
		float inv = (float)(1.0 / pow((double)theta, (double)(2 * i) / (double)head_dim));
		float ang = (float)pos * inv;
		float c = cosf(ang), s = sinf(ang);

		for (int h = 0; h < heads; h++) {
			float *xh = x + (size_t)h * head_dim;
			float a = xh[i], b = xh[i + half];

			xh[i] = a * c - b * s;
			xh[i + half] = b * c + a * s;
		}
	}
}

float fg_ref_gelu_tanh(float x)
{
	const float k0 = 0.7978845608028654f; /* sqrt(2 / pi) */

	return 0.5f * x * (1.0f + tanhf(k0 * (x + 0.044715f * x * x * x)));
}

void fg_ref_geglu(float *out, const float *gate, const float *up, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = fg_ref_gelu_tanh(gate[i]) * up[i];
}

void fg_ref_embed(float *out, const uint16_t *table, int id, int n, float scale)
{
	for (int i = 0; i < n; i++)
		out[i] = fg_ref_bf16(table[(size_t)id * n + i]) * scale;
}

void fg_ref_ple(float *out, const uint16_t *table, int id, const float *proj, const float *norm_w, int layers,
		int dim, float tok_scale, float proj_scale, float eps)
{
	const float r2 = 0.70710678118654752f;
	size_t row = (size_t)layers * dim;

	for (int l = 0; l < layers; l++) {
		const float *p = proj + (size_t)l * dim;
		float ss = 0.0f, s;

		for (int i = 0; i < dim; i++) {
			float v = p[i] * proj_scale;

			ss += v * v;
		}
		s = 1.0f / sqrtf(ss / (float)dim + eps);
		for (int i = 0; i < dim; i++) {
			float tok = fg_ref_bf16(table[(size_t)id * row + (size_t)l * dim + i]) * tok_scale;

			out[(size_t)l * dim + i] = (tok + p[i] * proj_scale * s * norm_w[i]) * r2;
		}
	}
}

void fg_ref_kv_store(float *kcache, float *vcache, const float *k, const float *v, int kv_heads, int head_dim,
		     int cap, int pos)
{
	int slot = pos % cap;

	for (int g = 0; g < kv_heads; g++) {
		memcpy(kcache + ((size_t)g * cap + slot) * head_dim, k + (size_t)g * head_dim, sizeof(float) * head_dim);
		memcpy(vcache + ((size_t)g * cap + slot) * head_dim, v + (size_t)g * head_dim, sizeof(float) * head_dim);
	}
}

static float dot(const float *a, const float *b, int n)
{
	float d = 0.0f;

	for (int i = 0; i < n; i++)
		d += a[i] * b[i];
	return d;
}

void fg_ref_attn_decode(float *out, const float *q, const float *kcache, const float *vcache, int heads,
			int kv_heads, int head_dim, int cap, int pos, float scale)
{
	int nv = pos + 1 < cap ? pos + 1 : cap;
	int grp = heads / kv_heads;

	for (int h = 0; h < heads; h++) {
		const float *qh = q + (size_t)h * head_dim;
		const float *kb = kcache + (size_t)(h / grp) * cap * head_dim;
		const float *vb = vcache + (size_t)(h / grp) * cap * head_dim;
		float *oh = out + (size_t)h * head_dim;
		float mx = -INFINITY, sum = 0.0f;

		/* two passes over the keys (max, then weights) keep no score array */
		for (int j = 0; j < nv; j++) {
			float sc = dot(qh, kb + (size_t)j * head_dim, head_dim) * scale;

			if (sc > mx)
				mx = sc;
		}
		for (int i = 0; i < head_dim; i++)
			oh[i] = 0.0f;
		for (int j = 0; j < nv; j++) {
			float p = expf(dot(qh, kb + (size_t)j * head_dim, head_dim) * scale - mx);

			sum += p;
			for (int i = 0; i < head_dim; i++)
				oh[i] += p * vb[(size_t)j * head_dim + i];
		}
		for (int i = 0; i < head_dim; i++)
			oh[i] /= sum;
	}
}

int32_t fg_ref_softcap_argmax(float *z, const int32_t *ids, int n, float cap)
{
	int best = -1;

	for (int i = 0; i < n; i++) {
		if (cap > 0.0f)
			z[i] = cap * tanhf(z[i] / cap);
		if (z[i] != z[i])
			continue;
		if (best < 0 || z[i] > z[best])
			best = i;
	}
	if (best < 0)
		return -1;
	return ids ? ids[best] : best;
}
