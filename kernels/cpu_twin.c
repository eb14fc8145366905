/* cpu_twin.c - plain-C twins of the CUDA kernels (see cpu_twin.h). */
#include "kernels/cpu_twin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fg_kernels.h"
#include "kernels/i8split.h"
#include "kernels/moeroute.h"

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

/* One group of vector xv (elements e0 .. e0 + group - 1, zero at and past
 * k): its multipliers and parts (kernels/i8split.h). */
static void i8_group(float *mult, int8_t (*a)[FG_I8_PARTS], const float *xv, int k, int e0, int group)
{
	uint32_t amax = 0;
	int e;

	for (int i = 0; i < group; i++) {
		uint32_t b = e0 + i < k ? fg_i8_abs_bits(xv[e0 + i]) : 0;

		amax = b > amax ? b : amax;
	}
	e = fg_i8_exp(amax);
	for (int p = 0; p < FG_I8_PARTS; p++)
		mult[p] = fg_i8_mult(amax, e, p);
	for (int i = 0; i < group; i++)
		fg_i8_split(e0 + i < k ? xv[e0 + i] : 0.0f, e, a[i]);
}

void fg_ref_int4_i8_matvec(float *y, const int32_t *packed, const uint16_t *scale_bf16, const float *x, int m, int n,
			   int k, int group, int slice, int warps)
{
	int unit = group > 64 ? group : 64, kw = k / 8, gk = (k + group - 1) / group;
	int units = (k + unit - 1) / unit, gpu = unit / group, ngroups = units * gpu;
	float *mult = malloc(sizeof(float) * FG_I8_PARTS * (size_t)ngroups);
	int8_t (*a)[FG_I8_PARTS] = malloc(sizeof(*a) * (size_t)ngroups * group);

	if (!mult || !a) {
		free(mult), free(a);
		for (size_t i = 0; i < (size_t)m * n; i++)
			y[i] = nanf("");
		return;
	}
	for (int b = 0; b < m; b++) {
		const float *xv = x + (size_t)b * k;

		for (int gi = 0; gi < ngroups; gi++)
			i8_group(mult + FG_I8_PARTS * gi, a + (size_t)gi * group, xv, k, gi * group, group);
		for (int r = 0; r < n; r++) {
			const int32_t *row = packed + (size_t)r * kw;
			float out = 0.0f;
			int splits = (units + slice - 1) / slice;

			for (int sp = 0; sp < splits; sp++) {
				int u0 = sp * slice, u1 = u0 + slice < units ? u0 + slice : units;
				float blk = 0.0f;

				for (int v = 0; v < warps; v++) {
					float acc01 = 0.0f, acc23 = 0.0f;

					for (int u = u0 + v; u < u1; u += warps)
						for (int gi = u * gpu; gi < (u + 1) * gpu; gi++) {
							int32_t c[FG_I8_PARTS] = {0, 0, 0, 0};
							float s = gi < gk ? fg_ref_bf16(scale_bf16[(size_t)r * gk + gi]) : 0.0f;
							const float *mu = mult + FG_I8_PARTS * gi;

							for (int i = 0; i < group; i++) {
								int e = gi * group + i;
								int32_t q = e < k ? (int32_t)(((uint32_t)row[e / 8] >> (4 * (e % 8))) & 15u) - 8 : 0;

								for (int p = 0; p < FG_I8_PARTS; p++)
									c[p] += q * a[(size_t)gi * group + i][p];
							}
							acc01 = fmaf(fmaf((float)c[1], mu[1], (float)c[0] * mu[0]), s, acc01);
							acc23 = fmaf(fmaf((float)c[3], mu[3], (float)c[2] * mu[2]), s, acc23);
						}
					blk += acc01 + acc23;
				}
				out = splits == 1 ? blk : out + blk;
			}
			y[(size_t)b * n + r] = out;
		}
	}
	free(mult);
	free(a);
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

/* ---- the kernels' xor tree; fg_ref_ple_tail's sums in its kernel's order ---- */

#define PLE_T 512 /* kernels/ple.cu's PLE_THREADS */

/* The xor tree of fg_warp_sum over 32 lanes (v is overwritten). */
static float warp_tree(float *v)
{
	float t[32];

	for (int o = 16; o > 0; o >>= 1) {
		for (int l = 0; l < 32; l++)
			t[l] = v[l] + v[l ^ o];
		memcpy(v, t, sizeof(t));
	}
	return v[0];
}

/* fg_block_sum over PLE_T threads' values. */
static float block_tree(float *v)
{
	float w[32] = {0};

	for (int i = 0; i < PLE_T / 32; i++)
		w[i] = warp_tree(v + 32 * i);
	return warp_tree(w);
}

/* fg_block_sum of squares of v[0..n) taken as thread t takes t, t + PLE_T, ... */
static float block_squares(const float *v, int n)
{
	float part[PLE_T] = {0};

	for (int i = 0; i < n; i++)
		part[i % PLE_T] = fmaf(v[i], v[i], part[i % PLE_T]);
	return block_tree(part);
}

/* ple_row: one packed row of k elements against v, over a warp's lanes. */
static float ple_dot(const int32_t *row, const uint16_t *sc, const float *v, int k, int group)
{
	float acc[32] = {0};

	for (int j = 0; j < k / 8; j++) {
		uint32_t q = (uint32_t)row[j];
		float d = 0.0f;

		for (int i = 0; i < 8; i++)
			d = fmaf((float)((int)((q >> (4 * i)) & 15u) - 8), v[8 * j + i], d);
		acc[j % 32] = fmaf(d, fg_ref_bf16(sc[8 * j / group]), acc[j % 32]);
	}
	return warp_tree(acc);
}

void fg_ref_ple_tail(float *h, float *a, const float *x, const int32_t *g_packed, const uint16_t *g_scale,
		     const int32_t *p_packed, const uint16_t *p_scale, const float *pl, const float *w1, const float *w2,
		     float scale, const float *w3, int n, int p, int group, float eps, int C)
{
	float *u = malloc(sizeof(float) * (size_t)p), *y = malloc(sizeof(float) * (size_t)n);
	int hr = (n + C - 1) / C;
	float s1, tot = 0.0f, s2, s3;

	if (!u || !y) {
		free(u), free(y);
		return;
	}
	s1 = 1.0f / sqrtf(block_squares(x, n) / (float)n + eps);
	for (int i = 0; i < n; i++)
		h[i] = fmaf(x[i] * s1, w1[i], h[i]);
	for (int r = 0; r < p; r++)
		u[r] = fg_ref_gelu_tanh(ple_dot(g_packed + (size_t)r * (n / 8), g_scale + (size_t)r * (n / group), h, n,
						group)) *
		       pl[r];
	for (int i = 0; i < n; i++)
		y[i] = ple_dot(p_packed + (size_t)i * (p / 8), p_scale + (size_t)i * (p / group), u, p, group);
	for (int b = 0; b < C; b++) /* each block's rows, then the blocks in order */
		if (b * hr < n)
			tot += block_squares(y + (size_t)b * hr, n - b * hr < hr ? n - b * hr : hr);
	s2 = 1.0f / sqrtf(tot / (float)n + eps);
	for (int i = 0; i < n; i++)
		h[i] = fmaf(y[i] * s2, w2[i], h[i]) * scale;
	tot = 0.0f;
	for (int b = 0; b < C; b++)
		if (b * hr < n)
			tot += block_squares(h + (size_t)b * hr, n - b * hr < hr ? n - b * hr : hr);
	s3 = 1.0f / sqrtf(tot / (float)n + eps);
	for (int i = 0; i < n; i++)
		a[i] = h[i] * s3 * w3[i];
	free(u), free(y);
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

void fg_ref_add_bias(float *y, const float *b, int n)
{
	for (int i = 0; i < n; i++)
		y[i] += b[i];
}

void fg_ref_moe_route(int32_t *idx, float *w, const float *logits, const float *escale, int E, int K)
{
	fg_moe_route_one(idx, w, logits, escale, E, K);
}

/* Row r of expert e times x in fg_k_moe_matvec's order: lane l of 32 sums
 * the PER-element pieces l, l + 32, ... (PER = 8 bf16 or 4 f32), each in
 * element order, then the tail element k - k % PER + l if there is one; the
 * lanes' sums meet in the warp's xor tree (16, 8, 4, 2, 1), read at lane 0. */
static float moe_row_dot(const void *w, int bf16, size_t row, const float *x, int k)
{
	int per = bf16 ? 8 : 4, kp = k / per, kt = kp * per;
	float v[32];

	for (int l = 0; l < 32; l++) {
		float acc = 0.0f;

		for (int p = l; p < kp; p += 32)
			for (int i = p * per; i < p * per + per; i++)
				acc = fmaf(bf16 ? fg_ref_bf16(((const uint16_t *)w)[row + i]) : ((const float *)w)[row + i],
					   x[i], acc);
		if (kt + l < k)
			acc = fmaf(bf16 ? fg_ref_bf16(((const uint16_t *)w)[row + kt + l]) : ((const float *)w)[row + kt + l],
				   x[kt + l], acc);
		v[l] = acc;
	}
	return warp_tree(v);
}

void fg_ref_moe_matvec(float *y, const void *w, int bf16, const int32_t *idx, int E, const float *x, size_t x_stride,
		       int slots, int n, int k)
{
	for (int j = 0; j < slots; j++)
		for (int r = 0; r < n; r++) {
			if (idx[j] < 0 || idx[j] >= E)
				y[(size_t)j * n + r] = NAN;
			else
				y[(size_t)j * n + r] = moe_row_dot(w, bf16, ((size_t)idx[j] * (size_t)n + (size_t)r) * (size_t)k,
								   x + (size_t)j * x_stride, k);
		}
}

/* a comes before b in fg_k_centroid_select's order: numbers before NaN,
 * then the larger value, then the lower index (-0 == +0 as floats compare) */
static int cs_before(const float *z, int a, int b)
{
	if (z[a] != z[a] || z[b] != z[b])
		return z[b] != z[b] && (z[a] == z[a] || a < b);
	return z[a] > z[b] || (z[a] == z[b] && a < b);
}

void fg_ref_centroid_select(int32_t *ids, const float *z, int n, int top_k, const int32_t *order, int per)
{
	int prev = -1;

	for (int r = 0; r < top_k; r++) { /* the best of those after the previous choice */
		int best = -1;

		for (int i = 0; i < n; i++)
			if ((prev < 0 || cs_before(z, prev, i)) && (best < 0 || cs_before(z, i, best)))
				best = i;
		if (best < 0)
			return;
		memcpy(ids + (size_t)r * (size_t)per, order + (size_t)best * (size_t)per, sizeof(int32_t) * (size_t)per);
		prev = best;
	}
}

void fg_ref_gather_matvec(float *y, const void *table, int bf16, const int32_t *ids, int n_ids, const float *x, int k)
{
	for (int j = 0; j < n_ids; j++)
		y[j] = ids[j] < 0 ? NAN : moe_row_dot(table, bf16, (size_t)ids[j] * (size_t)k, x, k);
}

void fg_ref_moe_combine(float *o, const float *y, const float *wt, int slots, const float *w1, const float *w2, int n,
			float eps)
{
	float *h = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
	float s1 = 0.0f, s2 = 0.0f;

	if (!h)
		return;
	for (int i = 0; i < n; i++) {
		h[i] = 0.0f;
		for (int j = 0; j < slots; j++)
			h[i] += y[(size_t)j * n + i] * wt[j];
		s1 += o[i] * o[i];
		s2 += h[i] * h[i];
	}
	s1 = 1.0f / sqrtf(s1 / (float)n + eps);
	s2 = 1.0f / sqrtf(s2 / (float)n + eps);
	for (int i = 0; i < n; i++)
		o[i] = o[i] * s1 * w1[i] + h[i] * s2 * w2[i];
	free(h);
}

/* (v, g) comes before (bv, bg) in a row's order: larger value, then lower
 * id; NaN never; anything comes before "none" (bg < 0). */
static int lp_before(float v, int32_t g, float bv, int32_t bg)
{
	if (v != v)
		return 0;
	return bg < 0 || v > bv || (v == bv && g < bg);
}

void fg_ref_row_logprobs(struct fg_klp *out, const float *z, size_t stride, int rows, const int32_t *ids, int n,
			 const int32_t *want, int k)
{
	for (int r = 0; r < rows; r++) {
		const float *zr = z + (size_t)r * stride;
		struct fg_klp *o = &out[r];
		float mx = -INFINITY, zw, pv = 0;
		int32_t pg = -1;
		double sum = 0;
		int j;

		memset(o, 0, sizeof(*o));
		for (j = 0; j < n; j++)
			if (zr[j] > mx)
				mx = zr[j];
		zw = !want ? mx : want[r] >= 0 ? zr[want[r]] : -INFINITY;
		o->rank = 1;
		for (j = 0; j < n; j++) {
			sum += (double)expf(zr[j] - mx);
			o->rank += zr[j] > zw;
		}
		o->lse = (double)mx + log(sum);
		o->lp = (float)((double)zw - o->lse);
		for (int t = 0; t < k; t++) { /* the next in the row's order after (pv, pg) */
			float bv = 0;
			int32_t bg = -1;

			for (j = 0; j < n; j++) {
				int32_t g = ids ? ids[j] : j;

				if ((t == 0 || lp_before(pv, pg, zr[j], g)) && lp_before(zr[j], g, bv, bg)) {
					bv = zr[j];
					bg = g;
				}
			}
			if (bg < 0)
				break;
			o->top_id[t] = bg;
			o->top_lp[t] = (float)((double)bv - o->lse);
			o->n_top = t + 1;
			pv = bv;
			pg = bg;
		}
	}
}
