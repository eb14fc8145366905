/* moe.cu - the kernels that attention_bias and mixture-of-experts layers
 * (enable_moe_block) add to the decode step: a bias add after a projection;
 * the router's top-k, the experts' matvec on the rows of the experts the
 * router chose (their ids read from device memory, so one captured graph
 * serves every token), their GeGLU, and the weighted sum of their outputs
 * with the block's two norms. Every sum in a fixed order; no float atomics.
 * The experts' weights are bf16 or f32 rows, read 16 bytes a lane. */
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

#define MR_LANE 32 /* experts a lane of the router's warp holds: up to 32 * 32 */

/* The router's choice for one token, fg_moe_route_one's result with one warp
 * (kernels/moeroute.h): every lane holds experts lane, lane + 32, ...; the
 * largest logit and each of the top k come from a warp-wide argmax (larger
 * value, then lower index: the order of the one-thread loop, which without
 * NaN picks the same expert every time), the exponentials from every lane
 * into shared memory, added by lane 0 in expert order, which then finishes
 * as the one-thread code does. NaN among the logits, or more than 1024
 * experts: lane 0 runs fg_moe_route_one itself. */
__global__ void moe_route(int32_t *idx_out, float *w_out, const float *__restrict__ logits,
			  const float *__restrict__ escale, int E, int K)
{
	__shared__ float se[32 * MR_LANE];
	int32_t idx[FG_MOE_MAX_K];
	float w[FG_MOE_MAX_K], v[MR_LANE], mx = 0.0f;
	int lane = threadIdx.x, nan = 0;
	unsigned taken = 0;

	fg_pdl_trigger();
	fg_pdl_wait();
	if (E <= 32 * MR_LANE) {
#pragma unroll
		for (int t = 0; t < MR_LANE; t++) {
			int i = lane + 32 * t;

			v[t] = i < E ? logits[i] : 0.0f;
			nan |= v[t] != v[t];
		}
	}
	if (E > 32 * MR_LANE || __any_sync(0xffffffffu, nan)) {
		if (lane == 0) {
			fg_moe_route_one(idx, w, logits, escale, E, K);
			for (int j = 0; j < K; j++)
				idx_out[j] = idx[j], w_out[j] = w[j];
		}
		return;
	}
	for (int j = 0; j < K; j++) {
		float bv = 0.0f;
		int bi = -1;

#pragma unroll
		for (int t = 0; t < MR_LANE; t++)
			if (lane + 32 * t < E && !(taken >> t & 1) && (bi < 0 || v[t] > bv))
				bv = v[t], bi = lane + 32 * t;
		for (int o = 16; o > 0; o >>= 1) {
			float ov = __shfl_xor_sync(0xffffffffu, bv, o);
			int oi = __shfl_xor_sync(0xffffffffu, bi, o);

			if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi)))
				bv = ov, bi = oi;
		}
		if (bi % 32 == lane)
			taken |= 1u << (bi / 32);
		idx[j] = bi;
		if (j == 0)
			mx = bv; /* the largest, the first of equals: the one-thread loop's */
	}
	if (K == 0)
		return;
#pragma unroll
	for (int t = 0; t < MR_LANE; t++)
		if (lane + 32 * t < E)
			se[lane + 32 * t] = expf(v[t] - mx);
	__syncwarp();
	if (lane == 0) {
		float sum = 0.0f;

		for (int i = 0; i < E; i++)
			sum += se[i];
		fg_moe_route_finish(idx, w, logits, escale, mx, sum, K);
		for (int j = 0; j < K; j++)
			idx_out[j] = idx[j], w_out[j] = w[j];
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

/* rows per warp, read side by side, and pieces of each per unrolled step;
 * -D at build for experiments (bench/moe_matvec.c) */
#ifndef MM_WARPS
#define MM_WARPS 8
#endif
#ifndef MM_ROWS
#define MM_ROWS 4
#endif
#ifndef MM_UNROLL
#define MM_UNROLL 2
#endif

__device__ __forceinline__ float elem_f(uint16_t b)
{
	return fg_bf16f(b);
}

__device__ __forceinline__ float elem_f(float f)
{
	return f;
}

/* The same sum as fg_dot16 from element loads, for a row that does not
 * start on a 16-byte boundary. */
template <typename T>
__device__ __forceinline__ float moe_dot_any(const T *p, const float *x, float acc)
{
	constexpr int PER = 16 / sizeof(T);

#pragma unroll
	for (int t = 0; t < PER; t++)
		acc = fmaf(elem_f(__ldg(p + t)), x[t], acc);
	return acc;
}

/* Block (b, j): rows [32b, 32b + 32) of the expert in slot j; warp w takes
 * rows 32b + 4w .. + 3 together (their loads in flight at once; 8 warps of 4
 * rows unless built otherwise). In each row
 * lane l sums, in order, the 16-byte pieces l, l + 32, l + 64, ... (PER
 * elements each, in element order), then, if k is not a multiple of PER, the
 * tail element k - k % PER + l; then a fixed xor tree. The order does not
 * depend on a row's alignment (fg_ref_moe_matvec is the same sum). */
template <typename T>
__global__ void __launch_bounds__(MM_WARPS * 32)
	moe_matvec(float *__restrict__ y, const T *__restrict__ w, const int32_t *__restrict__ idx, int E,
		   const float *__restrict__ x, long long x_stride, int n, int k)
{
	constexpr int PER = 16 / sizeof(T), UNROLL = MM_UNROLL;

	fg_pdl_trigger();
	fg_pdl_wait(); /* the router wrote idx: no weight load can come earlier */
	extern __shared__ __align__(16) float sx[];
	int j = blockIdx.y, e = idx[j], warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int r0 = (blockIdx.x * MM_WARPS + warp) * MM_ROWS, kp = k / PER, kt = kp * PER;
	const float *xj = x + (size_t)j * (size_t)x_stride;

	for (int i = threadIdx.x; i < k; i += blockDim.x)
		sx[i] = xj[i];
	__syncthreads();
	if (r0 >= n)
		return;
	if (e < 0 || e >= E) { /* the same for the whole block: a bad expert id shows as NaN rows */
		if (lane < MM_ROWS && r0 + lane < n)
			y[(size_t)j * n + r0 + lane] = __int_as_float(0x7fc00000);
		return;
	}
	float acc[MM_ROWS];
	const T *row[MM_ROWS];
	bool vec = true;

#pragma unroll
	for (int q = 0; q < MM_ROWS; q++) {
		int r = r0 + q < n ? r0 + q : n - 1; /* past the end: the last row again, not stored */

		acc[q] = 0.0f;
		row[q] = w + ((size_t)e * n + r) * k;
		vec = vec && ((uintptr_t)row[q] & 15) == 0;
	}
	if (vec) {
#pragma unroll UNROLL
		for (int p = lane; p < kp; p += 32) {
			uint4 v[MM_ROWS];

#pragma unroll
			for (int q = 0; q < MM_ROWS; q++)
				v[q] = __ldcs((const uint4 *)row[q] + p);
#pragma unroll
			for (int q = 0; q < MM_ROWS; q++)
				acc[q] = fg_dot16(w, v[q], sx + p * PER, acc[q]);
		}
	} else {
		for (int p = lane; p < kp; p += 32)
#pragma unroll
			for (int q = 0; q < MM_ROWS; q++)
				acc[q] = moe_dot_any(row[q] + p * PER, sx + p * PER, acc[q]);
	}
	if (kt + lane < k)
#pragma unroll
		for (int q = 0; q < MM_ROWS; q++)
			acc[q] = fmaf(elem_f(__ldg(row[q] + kt + lane)), sx[kt + lane], acc[q]);
#pragma unroll
	for (int q = 0; q < MM_ROWS; q++) {
		float s = fg_warp_sum(acc[q]);

		if (lane == 0 && r0 + q < n)
			y[(size_t)j * n + r0 + q] = s;
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

/* One block: o = rmsnorm(o) * w1 + rmsnorm(h) * w2, h the experts' sum,
 * made once per element and kept in shared memory (n floats) */
__global__ void moe_combine(float *o, const float *__restrict__ y, const float *__restrict__ wt, int slots,
			    const float *__restrict__ w1, const float *__restrict__ w2, int n, float eps)
{
	fg_pdl_trigger();
	fg_pdl_wait();
	extern __shared__ float hs[];
	__shared__ float sh[33];
	float s1 = 0.0f, s2 = 0.0f;

	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float h = moe_sum(y, wt, slots, n, i);

		hs[i] = h;
		s1 = fmaf(o[i], o[i], s1);
		s2 = fmaf(h, h, s2);
	}
	s1 = fg_block_sum(s1, sh);
	s2 = fg_block_sum(s2, sh);
	float r1 = 1.0f / sqrtf(s1 / (float)n + eps), r2 = 1.0f / sqrtf(s2 / (float)n + eps);
	for (int i = threadIdx.x; i < n; i += blockDim.x) /* each thread reads back its own elements */
		o[i] = __fadd_rn(__fmul_rn(__fmul_rn(o[i], r1), w1[i]), __fmul_rn(__fmul_rn(hs[i], r2), w2[i]));
}

extern "C" int fg_k_moe_combine(struct fg_kctx *ctx, float *d_o, const float *d_y, const float *d_wt, int slots,
				const float *d_w1, const float *d_w2, int n, float eps, struct fg_err *err)
{
	size_t smem = sizeof(float) * (size_t)n; /* the experts' sum, h */

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (slots < 1 || n < 1 || !d_w1 || !d_w2)
		return fg_err_set(err, FG_EINVAL, "moe combine: %d slots, n = %d, norm weights %s", slots, n,
				  d_w1 && d_w2 ? "given" : "missing");
	if (smem > 48 * 1024) {
		cudaError_t e = cudaFuncSetAttribute(moe_combine, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);

		if (e != cudaSuccess) {
			cudaGetLastError();
			return fg_err_set(err, FG_EINVAL, "moe combine: n = %d needs %zu bytes of shared memory: %s", n,
					  smem, cudaGetErrorString(e));
		}
	}
	fg_launch_pdl(ctx, moe_combine, dim3(1), dim3(1024), smem, d_o, d_y, d_wt, slots, d_w1, d_w2, n, eps);
	return fg_launched("moe combine", err);
}

FG_KTRACE_TU(moe)
