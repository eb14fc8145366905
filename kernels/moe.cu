/* moe.cu - the kernels that attention_bias and mixture-of-experts layers
 * (enable_moe_block) add to the decode step: a bias add after a projection;
 * the router's top-k, the experts' matvec on the rows of the experts the
 * router chose (their ids read from device memory, so one captured graph
 * serves every token), their GeGLU, and the weighted sum of their outputs
 * with the block's two norms. Every sum in a fixed order; no float atomics.
 * Simple rather than fast: the experts' weights are bf16 or f32 rows. */
#include <math.h>

#include "kernels/kcommon.cuh"
#include "kernels/moeroute.h"

__global__ void add_bias(float *y, const float *__restrict__ b, int n)
{
	fg_pdl_trigger(); /* the next kernel may launch and wait for us */
	fg_pdl_wait();    /* everything earlier kernels wrote is visible */
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] += b[i];
}

extern "C" int fg_k_add_bias(struct fg_kctx *ctx, float *d_y, const float *d_b, int n, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n < 1 || !d_b)
		return fg_err_set(err, FG_EINVAL, "bias add: n = %d, bias %s", n, d_b ? "given" : "missing");
	fg_launch_pdl(ctx, add_bias, dim3((n + 255) / 256), dim3(256), 0, d_y, d_b, n);
	return fg_launched("bias add", err);
}

/* ---- mixture of experts ------------------------------------------------------*/

/* The router's choice for one token on one thread (kernels/moeroute.h, the
 * twin's code too). */
__global__ void moe_route(int32_t *idx_out, float *w_out, const float *__restrict__ logits,
			  const float *__restrict__ escale, int E, int K)
{
	fg_pdl_trigger();
	fg_pdl_wait();
	if (threadIdx.x != 0)
		return;
	int32_t idx[FG_MOE_MAX_K];
	float w[FG_MOE_MAX_K];

	fg_moe_route_one(idx, w, logits, escale, E, K);
	for (int j = 0; j < K; j++) {
		idx_out[j] = idx[j];
		w_out[j] = w[j];
	}
}

extern "C" int fg_k_moe_route(struct fg_kctx *ctx, int32_t *d_idx, float *d_w, const float *d_logits,
			      const float *d_escale, int E, int K, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (E < 1 || K < 1 || K > E || K > FG_MOE_MAX_K || !d_escale)
		return fg_err_set(err, FG_EINVAL, "moe route: %d experts, top %d (at most %d)", E, K, FG_MOE_MAX_K);
	fg_launch_pdl(ctx, moe_route, dim3(1), dim3(32), 0, d_idx, d_w, d_logits, d_escale, E, K);
	return fg_launched("moe route", err);
}

#define MM_WARPS 8
#define MM_ROWS 4 /* rows per warp */

__device__ __forceinline__ float elem_f(uint16_t b)
{
	return fg_bf16f(b);
}

__device__ __forceinline__ float elem_f(float f)
{
	return f;
}

/* Block (b, j): rows [32b, 32b + 32) of the expert in slot j, a warp per row,
 * lanes over elements i = lane, lane + 32, ..., then a fixed xor tree. */
template <typename T>
__global__ void __launch_bounds__(MM_WARPS * 32)
	moe_matvec(float *__restrict__ y, const T *__restrict__ w, const int32_t *__restrict__ idx, int E,
		   const float *__restrict__ x, long long x_stride, int n, int k)
{
	fg_pdl_trigger();
	fg_pdl_wait();
	extern __shared__ __align__(16) float sx[];
	int j = blockIdx.y, e = idx[j], warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const float *xj = x + (size_t)j * (size_t)x_stride;

	for (int i = threadIdx.x; i < k; i += blockDim.x)
		sx[i] = xj[i];
	__syncthreads();
	for (int rr = 0; rr < MM_ROWS; rr++) {
		int r = (blockIdx.x * MM_WARPS + warp) * MM_ROWS + rr;
		float acc = 0.0f;

		if (r >= n)
			break;
		if (e >= 0 && e < E) { /* the same for the whole block */
			const T *row = w + ((size_t)e * n + r) * k;

#pragma unroll 4
			for (int i = lane; i < k; i += 32)
				acc = fmaf(elem_f(row[i]), sx[i], acc);
			acc = fg_warp_sum(acc);
		} else {
			acc = __int_as_float(0x7fc00000); /* a bad expert id shows as NaN */
		}
		if (lane == 0)
			y[(size_t)j * n + r] = acc;
	}
}

extern "C" int fg_k_moe_matvec(struct fg_kctx *ctx, float *d_y, const void *d_w, int bf16, const int32_t *d_idx,
			       int E, const float *d_x, size_t x_stride, int slots, int n, int k, struct fg_err *err)
{
	int per = MM_WARPS * MM_ROWS;

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (E < 1 || slots < 1 || slots > 65535 || n < 1 || k < 1 || k > 12288 || !d_w || !d_idx)
		return fg_err_set(err, FG_EINVAL, "moe matvec: %d experts, %d slots, %d x %d (k up to 12288)", E, slots,
				  n, k);
	if (bf16)
		fg_launch_pdl(ctx, moe_matvec<uint16_t>, dim3((n + per - 1) / per, slots), dim3(MM_WARPS * 32),
			      sizeof(float) * k, d_y, (const uint16_t *)d_w, d_idx, E, d_x, (long long)x_stride, n, k);
	else
		fg_launch_pdl(ctx, moe_matvec<float>, dim3((n + per - 1) / per, slots), dim3(MM_WARPS * 32),
			      sizeof(float) * k, d_y, (const float *)d_w, d_idx, E, d_x, (long long)x_stride, n, k);
	return fg_launched("moe matvec", err);
}

/* Slot blockIdx.y of gu [slots][2I]: gate = gelu_tanh(gate) * up in place */
__global__ void moe_geglu(float *gu, int inter)
{
	fg_pdl_trigger();
	fg_pdl_wait();
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float *g = gu + (size_t)blockIdx.y * 2 * inter;

	if (i < inter)
		g[i] = fg_gelu_tanh(g[i]) * g[inter + i];
}

extern "C" int fg_k_moe_geglu(struct fg_kctx *ctx, float *d_gu, int slots, int inter, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (slots < 1 || slots > 65535 || inter < 1)
		return fg_err_set(err, FG_EINVAL, "moe geglu: %d slots of %d", slots, inter);
	fg_launch_pdl(ctx, moe_geglu, dim3((inter + 255) / 256, slots), dim3(256), 0, d_gu, inter);
	return fg_launched("moe geglu", err);
}

/* Element i of the experts' weighted sum, slots in order from 0, each
 * product and sum rounded on its own as the CPU engine's loop does. */
__device__ __forceinline__ float moe_sum(const float *y, const float *wt, int slots, int n, int i)
{
	float h = 0.0f;

	for (int j = 0; j < slots; j++)
		h = __fadd_rn(h, __fmul_rn(y[(size_t)j * n + i], wt[j]));
	return h;
}

/* One block: o = rmsnorm(o) * w1 + rmsnorm(h) * w2, h the experts' sum */
__global__ void moe_combine(float *o, const float *__restrict__ y, const float *__restrict__ wt, int slots,
			    const float *__restrict__ w1, const float *__restrict__ w2, int n, float eps)
{
	fg_pdl_trigger();
	fg_pdl_wait();
	__shared__ float sh[33];
	float s1 = 0.0f, s2 = 0.0f;

	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float h = moe_sum(y, wt, slots, n, i);

		s1 = fmaf(o[i], o[i], s1);
		s2 = fmaf(h, h, s2);
	}
	s1 = fg_block_sum(s1, sh);
	s2 = fg_block_sum(s2, sh);
	float r1 = 1.0f / sqrtf(s1 / (float)n + eps), r2 = 1.0f / sqrtf(s2 / (float)n + eps);
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float h = moe_sum(y, wt, slots, n, i);

		o[i] = __fadd_rn(__fmul_rn(__fmul_rn(o[i], r1), w1[i]), __fmul_rn(__fmul_rn(h, r2), w2[i]));
	}
}

extern "C" int fg_k_moe_combine(struct fg_kctx *ctx, float *d_o, const float *d_y, const float *d_wt, int slots,
				const float *d_w1, const float *d_w2, int n, float eps, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (slots < 1 || n < 1 || !d_w1 || !d_w2)
		return fg_err_set(err, FG_EINVAL, "moe combine: %d slots, n = %d, norm weights %s", slots, n,
				  d_w1 && d_w2 ? "given" : "missing");
	fg_launch_pdl(ctx, moe_combine, dim3(1), dim3(1024), 0, d_o, d_y, d_wt, slots, d_w1, d_w2, n, eps);
	return fg_launched("moe combine", err);
}
