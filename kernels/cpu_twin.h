/* cpu_twin.h - plain-C twins of the CUDA kernels in fg_kernels.h: the same
 * operation on host memory, fp32 with a straightforward summation order.
 * tests/unit/test_kernels.c holds each kernel to its twin. These are the
 * readable definitions; the engine's own CPU path lives in engine/cpu/. */
#ifndef FG_CPU_TWIN_H
#define FG_CPU_TWIN_H

#include <stddef.h>
#include <stdint.h>

float fg_ref_bf16(uint16_t b);
uint16_t fg_ref_to_bf16(float f); /* round to nearest even */

/* y[m][n] = sum_k s[n][k/group] * (q[n][k]) * x[m][k] on the standard packed format. */
void fg_ref_int4_matvec(float *y, const int32_t *packed, const uint16_t *scale_bf16, const float *x, int m, int n,
			int k, int group);
/* The INT8 tensor-core kernel's arithmetic (kernels/int4_i8.cu,
 * kernels/i8split.h) in its order, for a launch that takes K in splits of
 * slice units (one unit: max(group, 64) elements) and warps warps per block
 * (fg_kint4_i8_plan): the kernel's output, bit for bit. */
void fg_ref_int4_i8_matvec(float *y, const int32_t *packed, const uint16_t *scale_bf16, const float *x, int m, int n,
			   int k, int group, int slice, int warps);
void fg_ref_bf16_matvec(float *y, const uint16_t *w, const float *x, const int32_t *rows, int n, int k);
void fg_ref_rmsnorm(float *y, const float *x, const float *w, int rows, int n, float eps);
void fg_ref_rmsnorm_residual(float *h, const float *x, const float *w, int n, float eps, float scale);
/* fg_k_ple_tail (kernels/ple.cu) in its order for a cluster of C blocks:
 * h, a [n]; G (g_packed, g_scale) [p][n] and Pr (p_packed, p_scale) [n][p]
 * in the standard packed format. */
void fg_ref_ple_tail(float *h, float *a, const float *x, const int32_t *g_packed, const uint16_t *g_scale,
		     const int32_t *p_packed, const uint16_t *p_scale, const float *pl, const float *w1, const float *w2,
		     float scale, const float *w3, int n, int p, int group, float eps, int C);
void fg_ref_rope(float *x, int heads, int head_dim, int rot_pairs, float theta, int pos);
float fg_ref_gelu_tanh(float x);
void fg_ref_geglu(float *out, const float *gate, const float *up, int n);
void fg_ref_embed(float *out, const uint16_t *table, int id, int n, float scale);
void fg_ref_ple(float *out, const uint16_t *table, int id, const float *proj, const float *norm_w, int layers,
		int dim, float tok_scale, float proj_scale, float eps);
void fg_ref_kv_store(float *kcache, float *vcache, const float *k, const float *v, int kv_heads, int head_dim,
		     int cap, int pos);
void fg_ref_attn_decode(float *out, const float *q, const float *kcache, const float *vcache, int heads,
			int kv_heads, int head_dim, int cap, int pos, float scale);
void fg_ref_add_bias(float *y, const float *b, int n);
/* Mixture of experts (fg_k_moe_*): the router's choice in ascending expert
 * order, the routed experts' matvec (bf16 or f32 rows; the kernel's bits:
 * its lanes' sums and xor tree), the weighted sum with the two norms (sums
 * in element order). */
void fg_ref_moe_route(int32_t *idx, float *w, const float *logits, const float *escale, int E, int K);
void fg_ref_moe_matvec(float *y, const void *w, int bf16, const int32_t *idx, int E, const float *x, size_t x_stride,
		       int slots, int n, int k);
void fg_ref_moe_combine(float *o, const float *y, const float *wt, int slots, const float *w1, const float *w2, int n,
			float eps);
/* The assistant drafter's head (fg_k_centroid_select, fg_k_gather_matvec):
 * the top_k of z in the kernel's order (numbers before NaN, larger first,
 * lower index first among equals) and their clusters' ids; the gathered
 * rows' dot products in fg_ref_moe_matvec's order (the kernel's bits). */
void fg_ref_centroid_select(int32_t *ids, const float *z, int n, int top_k, const int32_t *order, int per);
void fg_ref_gather_matvec(float *y, const void *table, int bf16, const int32_t *ids, int n_ids, const float *x, int k);
/* Softcaps z in place (cap > 0) and returns the chosen id (see fg_kernels.h). */
int32_t fg_ref_softcap_argmax(float *z, const int32_t *ids, int n, float cap);
/* fg_k_row_logprobs on host memory (want NULL: each row's largest value);
 * the sums in column order. */
struct fg_klp;
void fg_ref_row_logprobs(struct fg_klp *out, const float *z, size_t stride, int rows, const int32_t *ids, int n,
			 const int32_t *want, int k);

#endif
