/* ops.cu - the decode step's other kernels: bf16 / f32 matvec (LM head,
 * keepset rows), RMSNorm (plain and fused with the residual add and layer scale),
 * RoPE, GeGLU, embedding and per-layer inputs (bf16 or f32 tables), KV store,
 * split decode attention, softcap + argmax. Every reduction has a fixed order (fixed xor trees inside
 * a warp, then warps and blocks in index order); no float atomics. */
#include <cooperative_groups.h>
#include <math.h>

#include "kernels/kcommon.cuh"

namespace cg = cooperative_groups;

/* ---- bf16 / f32 matvec: a warp per row, 16-byte loads, x staged in shared memory */

#define MV_WARPS 8
#define MV_ROWS 4 /* rows per warp, so each block's staged x serves 32 rows */

__device__ __forceinline__ float fg_wval(const uint16_t *w, size_t i)
{
	return fg_bf16f(w[i]);
}

__device__ __forceinline__ float fg_wval(const float *w, size_t i)
{
	return w[i];
}

/* y[r] = W[rows ? rows[r] : r] . x for r < n, W row-major [*, k] of T (bf16
 * bits or f32); a warp per row, a fixed xor tree. VEC: lanes over 16-byte
 * pieces (k a whole number of them, rows 16-byte aligned). Otherwise any k
 * (a width that is not a whole number of pieces, as tiny models have: a head
 * of 12, per-layer inputs of 4): element loads, each lane summing elements
 * lane, lane + 32, ... in order. */
template <typename T, bool VEC>
__global__ void __launch_bounds__(MV_WARPS * 32) row_matvec(float *__restrict__ y, const T *__restrict__ w,
							    const float *__restrict__ x,
							    const int32_t *__restrict__ rows, int n, int k)
{
	constexpr int PER = 16 / sizeof(T); /* elements per 16-byte piece */

	fg_pdl_trigger(); /* the next kernel may launch and wait for us */
	fg_pdl_wait();    /* everything earlier kernels wrote is visible */
	extern __shared__ __align__(16) float sx[];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

	for (int i = threadIdx.x; i < k; i += blockDim.x)
		sx[i] = x[i];
	__syncthreads();
	for (int rr = 0; rr < MV_ROWS; rr++) {
		int r = (blockIdx.x * MV_WARPS + warp) * MV_ROWS + rr;

		if (r >= n)
			break;
		size_t base = (size_t)(rows ? rows[r] : r) * k;
		float acc = 0.0f;

		if constexpr (VEC) {
			const uint4 *row = (const uint4 *)(w + base);

#pragma unroll 4
			for (int e = lane; e < k / PER; e += 32)
				acc = fg_dot16(w, __ldcs(row + e), sx + e * PER, acc);
		} else {
			for (int e = lane; e < k; e += 32)
				acc = fmaf(fg_wval(w, base + e), sx[e], acc);
		}
		acc = fg_warp_sum(acc);
		if (lane == 0)
			y[r] = acc;
	}
}

/* Whether the 16-byte kernels (VEC) can read these rows. */
static int mv_vec(const void *w, int k, int per)
{
	return k % per == 0 && (uintptr_t)w % 16 == 0;
}

extern "C" int fg_k_f32_matvec(struct fg_kctx *ctx, float *d_y, const float *d_w, const float *d_x, int n, int k,
			       struct fg_err *err)
{
	int per = MV_WARPS * MV_ROWS;

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n < 1 || k < 1 || k > 12288)
		return fg_err_set(err, FG_EINVAL, "f32 matvec %d x %d: need k from 1 to 12288", n, k);
	fg_launch_pdl(ctx, mv_vec(d_w, k, 4) ? row_matvec<float, true> : row_matvec<float, false>,
		      dim3((n + per - 1) / per), dim3(MV_WARPS * 32), sizeof(float) * k, d_y, d_w, d_x,
		      (const int32_t *)NULL, n, k);
	return fg_launched("f32 matvec", err);
}

extern "C" int fg_k_bf16_matvec(struct fg_kctx *ctx, float *d_y, const uint16_t *d_w, const float *d_x,
				const int32_t *d_rows, int n, int k, struct fg_err *err)
{
	int per = MV_WARPS * MV_ROWS;

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n < 1 || k < 1 || k > 12288)
		return fg_err_set(err, FG_EINVAL, "bf16 matvec %d x %d: need k from 1 to 12288", n, k);
	fg_launch_pdl(ctx, mv_vec(d_w, k, 8) ? row_matvec<uint16_t, true> : row_matvec<uint16_t, false>,
		      dim3((n + per - 1) / per), dim3(MV_WARPS * 32), sizeof(float) * k, d_y, d_w, d_x, d_rows, n, k);
	return fg_launched("bf16 matvec", err);
}

/* The same for the rows of a prompt chunk: y[t][r] = W[r] . x[t] for t < nt,
 * each warp's weight pieces loaded once for up to MV_T rows of x (read
 * through L1/L2, not staged: the values, hence the sums, are row_matvec's)
 * and each row of x summed exactly as row_matvec sums it (a lane's pieces in
 * order, then the xor tree): row_matvec's bits, row by row. blockIdx.y: the
 * group of MV_T rows. */
#define MV_T 8

template <typename T, bool VEC>
__global__ void __launch_bounds__(MV_WARPS * 32) rows_matvec(float *__restrict__ y, const T *__restrict__ w,
							     const float *__restrict__ x, int n, int k, int nt)
{
	constexpr int PER = 16 / sizeof(T);

	fg_pdl_trigger();
	fg_pdl_wait();
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t0 = blockIdx.y * MV_T;
	int cnt = min(MV_T, nt - t0);

	x += (size_t)t0 * k;
	y += (size_t)t0 * n;
	for (int rr = 0; rr < MV_ROWS; rr++) {
		int r = (blockIdx.x * MV_WARPS + warp) * MV_ROWS + rr;

		if (r >= n)
			break;
		float acc[MV_T];

#pragma unroll
		for (int t = 0; t < MV_T; t++)
			acc[t] = 0.0f;
		if constexpr (VEC) {
			const uint4 *row = (const uint4 *)(w + (size_t)r * k);

			for (int e = lane; e < k / PER; e += 32) {
				uint4 q = __ldcs(row + e);

#pragma unroll
				for (int t = 0; t < MV_T; t++)
					if (t < cnt)
						acc[t] = fg_dot16(w, q, x + (size_t)t * k + e * PER, acc[t]);
			}
		} else {
			for (int e = lane; e < k; e += 32) {
				float f = fg_wval(w, (size_t)r * k + e);

#pragma unroll
				for (int t = 0; t < MV_T; t++)
					if (t < cnt)
						acc[t] = fmaf(f, x[(size_t)t * k + e], acc[t]);
			}
		}
#pragma unroll
		for (int t = 0; t < MV_T; t++)
			if (t < cnt) {
				float v = fg_warp_sum(acc[t]);

				if (lane == 0)
					y[(size_t)t * n + r] = v;
			}
	}
}

extern "C" int fg_k_rows_matvec(struct fg_kctx *ctx, float *d_y, const void *d_w, int bf16, const float *d_x, int rows,
				int n, int k, struct fg_err *err)
{
	int per = MV_WARPS * MV_ROWS, pe = bf16 ? 8 : 4, vec;
	dim3 grid((n + per - 1) / per, (rows + MV_T - 1) / MV_T);

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (rows < 1 || n < 1 || k < 1 || k > 12288 || grid.y > 65535)
		return fg_err_set(err, FG_EINVAL, "%s matvec of %d rows, %d x %d: need k from 1 to 12288",
				  bf16 ? "bf16" : "f32", rows, n, k);
	/* the one-row launch's kernel family, so each row gets its bits */
	vec = mv_vec(d_w, k, pe);
	if (vec && (uintptr_t)d_x % 16)
		return fg_err_set(err, FG_EINVAL, "%s matvec: inputs not 16-byte aligned", bf16 ? "bf16" : "f32");
	if (bf16)
		fg_launch_pdl(ctx, vec ? rows_matvec<uint16_t, true> : rows_matvec<uint16_t, false>, grid,
			      dim3(MV_WARPS * 32), 0, d_y, (const uint16_t *)d_w, d_x, n, k, rows);
	else
		fg_launch_pdl(ctx, vec ? rows_matvec<float, true> : rows_matvec<float, false>, grid, dim3(MV_WARPS * 32),
			      0, d_y, (const float *)d_w, d_x, n, k, rows);
	return fg_launched(bf16 ? "bf16 matvec" : "f32 matvec", err);
}

/* ---- RMSNorm ---------------------------------------------------------------*/

#define NORM_THREADS 256
#define ATT_MAX_DIM_POST 1024

__global__ void rmsnorm(float *y, const float *x, const float *__restrict__ w, int n, float eps)
{
	fg_pdl_trigger(); /* the next kernel may launch and wait for us */
	fg_pdl_wait();    /* everything earlier kernels wrote is visible */
	__shared__ float sh[33];
	const float *xr = x + (size_t)blockIdx.x * n;
	float *yr = y + (size_t)blockIdx.x * n;
	float ss = 0.0f;

	for (int i = threadIdx.x; i < n; i += blockDim.x)
		ss = fmaf(xr[i], xr[i], ss);
	ss = fg_block_sum(ss, sh);
	float s = 1.0f / sqrtf(ss / (float)n + eps);
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		yr[i] = xr[i] * s * (w ? w[i] : 1.0f);
}

/* Elements per thread that the one-block norms below hold in registers: up
 * to 1024 * RN_PER wide, every load issued at once (the norm weights before
 * waiting for the previous kernel, since no kernel writes them) instead of
 * one dependent round trip per loop pass. Wider rows take the plain loops.
 * Both paths compute the same expressions in the same order: same bits. */
#define RN_PER 4

/* Threads for a one-block norm of a row n wide: 1024 where the row takes the
 * plain loops, else the warps that hold it RN_PER a thread, so that its two
 * block sums meet over fewer warps (E4B's 2560: 20 warps, not 32). The sums'
 * order follows the block's width: the same bits every run for a width.
 * FG_NORM_WIDE=1 launches 1024 whatever the row (measurements). */
static unsigned rn_threads(const struct fg_kctx *ctx, int n)
{
	int t = (n + RN_PER - 1) / RN_PER;

	return ctx->norm_wide || t > 1024 ? 1024u : (unsigned)((t + 31) / 32 * 32);
}

/* The register path's common start: after the PDL wait (everything earlier
 * kernels wrote is visible), x and h into registers, and 1 / rms(x) summed in
 * element order per thread, then fg_block_sum. */
__device__ __forceinline__ float rn_rows(float xv[RN_PER], float hv[RN_PER], const float *x, const float *h, int n,
					 float eps, float *sh)
{
	float ss = 0.0f;

	fg_pdl_wait();
#pragma unroll
	for (int u = 0; u < RN_PER; u++) {
		int i = threadIdx.x + u * blockDim.x;

		xv[u] = i < n ? x[i] : 0.0f;
		hv[u] = i < n ? h[i] : 0.0f;
	}
#pragma unroll
	for (int u = 0; u < RN_PER; u++)
		if ((int)threadIdx.x + u * (int)blockDim.x < n)
			ss = fmaf(xv[u], xv[u], ss);
	ss = fg_block_sum(ss, sh);
	return 1.0f / sqrtf(ss / (float)n + eps);
}

template <bool R> /* R: a prompt chunk's rows, block r row r (else the step's one row) */
__global__ void rmsnorm_residual(float *h, const float *x, const float *__restrict__ w, int n, float eps,
				 float scale)
{
	fg_pdl_trigger(); /* the next kernel may launch and wait for us */
	__shared__ float sh[33];
	float ss = 0.0f;

	if (R) {
		h += (size_t)blockIdx.x * n;
		x += (size_t)blockIdx.x * n;
	}

	if (n <= (int)blockDim.x * RN_PER) {
		float xv[RN_PER], hv[RN_PER], wv[RN_PER];

#pragma unroll
		for (int u = 0; u < RN_PER; u++) {
			int i = threadIdx.x + u * blockDim.x;

			wv[u] = i < n ? w[i] : 0.0f;
		}
		float s = rn_rows(xv, hv, x, h, n, eps, sh);
#pragma unroll
		for (int u = 0; u < RN_PER; u++) {
			int i = threadIdx.x + u * blockDim.x;

			if (i < n)
				h[i] = (hv[u] + xv[u] * s * wv[u]) * scale;
		}
		return;
	}
	fg_pdl_wait();
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		ss = fmaf(x[i], x[i], ss);
	ss = fg_block_sum(ss, sh);
	float s = 1.0f / sqrtf(ss / (float)n + eps);
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		h[i] = (h[i] + x[i] * s * w[i]) * scale;
}

/* h = (h + rmsnorm(x) * w) * scale, then a = rmsnorm(h) * w2: the end of one
 * sublayer and the input norm of the next in one pass. One block a row. */
template <bool R> /* R: a prompt chunk's rows, block r row r (else the step's one row) */
__global__ void residual_norm(float *h, const float *x, const float *__restrict__ w, float scale, float *a,
			      const float *__restrict__ w2, int n, float eps)
{
	fg_pdl_trigger();
	__shared__ float sh[33];
	float ss = 0.0f;

	if (R) {
		h += (size_t)blockIdx.x * n;
		x += (size_t)blockIdx.x * n;
		a += (size_t)blockIdx.x * n;
	}

	if (n <= (int)blockDim.x * RN_PER) {
		float xv[RN_PER], hv[RN_PER], wv[RN_PER], w2v[RN_PER];

#pragma unroll
		for (int u = 0; u < RN_PER; u++) {
			int i = threadIdx.x + u * blockDim.x;

			wv[u] = i < n ? w[i] : 0.0f;
			w2v[u] = i < n ? w2[i] : 0.0f;
		}
		float s = rn_rows(xv, hv, x, h, n, eps, sh);
		fg_kt_mark(2); /* a measuring build's (KTRACE=1) marks: x, h read and x's norm summed */
		float s2 = 0.0f;
#pragma unroll
		for (int u = 0; u < RN_PER; u++) {
			int i = threadIdx.x + u * blockDim.x;

			if (i < n) {
				float v = (hv[u] + xv[u] * s * wv[u]) * scale;

				hv[u] = v;
				h[i] = v;
				s2 = fmaf(v, v, s2);
			}
		}
		s2 = fg_block_sum(s2, sh);
		float r = 1.0f / sqrtf(s2 / (float)n + eps);
#pragma unroll
		for (int u = 0; u < RN_PER; u++) {
			int i = threadIdx.x + u * blockDim.x;

			if (i < n)
				a[i] = hv[u] * r * w2v[u];
		}
		fg_kt_mark(3); /* h and a written */
		return;
	}
	fg_pdl_wait();
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		ss = fmaf(x[i], x[i], ss);
	ss = fg_block_sum(ss, sh);
	float s = 1.0f / sqrtf(ss / (float)n + eps);
	float s2 = 0.0f;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float v = (h[i] + x[i] * s * w[i]) * scale;

		h[i] = v;
		s2 = fmaf(v, v, s2);
	}
	s2 = fg_block_sum(s2, sh);
	float r = 1.0f / sqrtf(s2 / (float)n + eps);
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		a[i] = h[i] * r * w2[i]; /* h[i] was written by this same thread */
}

extern "C" int fg_k_residual_norm_rows(struct fg_kctx *ctx, float *d_h, const float *d_x, const float *d_w,
				       float scale, float *d_a, const float *d_w2, int rows, int n, float eps,
				       struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (rows < 1 || n < 1 || !d_w || !d_w2)
		return fg_err_set(err, FG_EINVAL, "residual norm: %d rows of %d or weight missing", rows, n);
	fg_launch_pdl(ctx, rows > 1 ? residual_norm<true> : residual_norm<false>, dim3(rows), dim3(rn_threads(ctx, n)), 0,
		      d_h, d_x, d_w, scale, d_a, d_w2, n, eps);
	return fg_launched("residual norm", err);
}

extern "C" int fg_k_residual_norm(struct fg_kctx *ctx, float *d_h, const float *d_x, const float *d_w, float scale,
				  float *d_a, const float *d_w2, int n, float eps, struct fg_err *err)
{
	return fg_k_residual_norm_rows(ctx, d_h, d_x, d_w, scale, d_a, d_w2, 1, n, eps, err);
}

extern "C" int fg_k_rmsnorm(struct fg_kctx *ctx, float *d_y, const float *d_x, const float *d_w, int rows, int n,
			    float eps, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (rows < 1 || n < 1)
		return fg_err_set(err, FG_EINVAL, "rmsnorm %d x %d: empty", rows, n);
	fg_launch_pdl(ctx, rmsnorm, dim3(rows), dim3(NORM_THREADS), 0, d_y, d_x, d_w, n, eps);
	return fg_launched("rmsnorm", err);
}

extern "C" int fg_k_rmsnorm_residual_rows(struct fg_kctx *ctx, float *d_h, const float *d_x, const float *d_w,
					  int rows, int n, float eps, float scale, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (rows < 1 || n < 1 || !d_w)
		return fg_err_set(err, FG_EINVAL, "rmsnorm residual: %d rows of %d, weight %s", rows, n,
				  d_w ? "given" : "missing");
	fg_launch_pdl(ctx, rows > 1 ? rmsnorm_residual<true> : rmsnorm_residual<false>, dim3(rows), dim3(rn_threads(ctx, n)),
		      0, d_h, d_x, d_w, n, eps, scale);
	return fg_launched("rmsnorm residual", err);
}

extern "C" int fg_k_rmsnorm_residual(struct fg_kctx *ctx, float *d_h, const float *d_x, const float *d_w, int n,
				     float eps, float scale, struct fg_err *err)
{
	return fg_k_rmsnorm_residual_rows(ctx, d_h, d_x, d_w, 1, n, eps, scale, err);
}

/* ---- RoPE ------------------------------------------------------------------*/

/* RoPE's turn (cos, sin) at position pos for a pair of inverse frequency
 * inv: the one expression of every kernel here that rotates by inv, so the
 * table of them (fg_k_rope_table) holds the floats those kernels compute.
 * Angle in fp32, cos and sin in double, then rounded, as engine/cpu's
 * fg_cpu_rope_scaled; the decode step reads its turns from the table
 * (double runs at 1/64 of the float rate on the A10G). */
__device__ __forceinline__ float2 rope_turn(int pos, float inv)
{
	float a = (float)pos * inv;

	return make_float2((float)cos((double)a), (float)sin((double)a));
}

__global__ void rope_table(float2 *t, const float *__restrict__ inv, int half, int rows)
{
	size_t n = (size_t)rows * (size_t)half;

	fg_pdl_trigger();
	fg_pdl_wait();
	for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x)
		t[e] = rope_turn((int)(e / (size_t)half), inv[e % (size_t)half]);
}

extern "C" int fg_k_rope_table(struct fg_kctx *ctx, float *d_turns, const float *d_inv, int half, int rows,
			       struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (!d_turns || !d_inv || half < 1 || rows < 1 || (size_t)rows * (size_t)half > ((size_t)1 << 34))
		return fg_err_set(err, FG_EINVAL, "rope table: %d pairs x %d positions", half, rows);
	fg_launch_pdl(ctx, rope_table, dim3(1024), dim3(256), 0, (float2 *)d_turns, d_inv, half, rows);
	return fg_launched("rope table", err);
}

__global__ void rope(float *x, int heads, int head_dim, int rot_pairs, float theta, const int32_t *pos_p)
{
	fg_pdl_trigger(); /* the next kernel may launch and wait for us */
	fg_pdl_wait();    /* everything earlier kernels wrote is visible */
	int i = blockIdx.x * blockDim.x + threadIdx.x, half = head_dim / 2;

	if (i >= rot_pairs || i >= half)
		return;
	float inv = (float)(1.0 / pow((double)theta, (double)(2 * i) / (double)head_dim));
	float ang = (float)*pos_p * inv;
	float c = cosf(ang), s = sinf(ang);
	for (int h = 0; h < heads; h++) {
		float *xh = x + (size_t)h * head_dim;
		float a = xh[i], b = xh[i + half];

		xh[i] = a * c - b * s;
		xh[i + half] = b * c + a * s;
	}
}

extern "C" int fg_k_rope(struct fg_kctx *ctx, float *d_x, int heads, int head_dim, int rot_pairs, float theta,
			 const int32_t *d_pos, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (heads < 1 || head_dim < 2 || head_dim % 2 || rot_pairs < 0 || rot_pairs > head_dim / 2)
		return fg_err_set(err, FG_EINVAL, "rope: heads %d, head_dim %d, rotated pairs %d", heads, head_dim,
				  rot_pairs);
	if (rot_pairs == 0)
		return 0;
	fg_launch_pdl(ctx, rope, dim3((rot_pairs + 127) / 128), dim3(128), 0, d_x, heads, head_dim, rot_pairs, theta, d_pos);
	return fg_launched("rope", err);
}

__global__ void rope_inv(float *x, int heads, int head_dim, const float *__restrict__ inv, const int32_t *pos_p)
{
	fg_pdl_trigger();
	fg_pdl_wait();
	int i = blockIdx.x * blockDim.x + threadIdx.x, half = head_dim / 2;

	if (i >= half)
		return;
	float2 t = rope_turn(*pos_p, inv[i]);
	for (int h = 0; h < heads; h++) {
		float *xh = x + (size_t)h * head_dim;
		float x0 = xh[i], x1 = xh[i + half];

		xh[i] = x0 * t.x + (-x1) * t.y;
		xh[i + half] = x1 * t.x + x0 * t.y;
	}
}

extern "C" int fg_k_rope_inv(struct fg_kctx *ctx, float *d_x, int heads, int head_dim, const float *d_inv,
			     const int32_t *d_pos, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (heads < 1 || head_dim < 2 || head_dim % 2)
		return fg_err_set(err, FG_EINVAL, "rope: heads %d, head_dim %d", heads, head_dim);
	fg_launch_pdl(ctx, rope_inv, dim3((head_dim / 2 + 127) / 128), dim3(128), 0, d_x, heads, head_dim, d_inv, d_pos);
	return fg_launched("rope", err);
}

#define QP_THREADS 128
#define QP_PER (ATT_MAX_DIM_POST / QP_THREADS) /* elements of a head per thread */

/* After the q|k|v projection: per-head RMSNorm (q with q_norm, k with
 * k_norm, v without weight), RoPE of q and k from the table, and k, v stored
 * in cache slot pos % cap. Block b: q head b < heads, then k heads, then v
 * heads (kv_heads = 0: only q, for KV-shared layers). A prompt chunk
 * (pos_p NULL): block row r takes row r of qkv at position pos0 + r and
 * stores nothing (kc NULL: k and v stay in their rows). */
template <bool R> /* R: a prompt chunk (rows at (pos_p ? *pos_p : pos0) + r, kc NULL) */
__global__ void qkv_post(float *qkv, int heads, int kv_heads, int d, const float *__restrict__ qw,
			 const float *__restrict__ kw, const float *__restrict__ inv, const int32_t *pos_p, float *kc,
			 float *vc, int cap, float eps, int pos0)
{
	fg_pdl_trigger();
	__shared__ float sh[33];
	__shared__ float sv[ATT_MAX_DIM_POST];
	int b = blockIdx.x, half = d / 2, pos, g = 0, kind;
	float *x = qkv + (size_t)b * d;
	const float *w;
	float ss = 0.0f, xv[QP_PER], wv[QP_PER];

	if (R) /* row blockIdx.y of the chunk */
		x += (size_t)blockIdx.y * (heads + 2 * kv_heads) * d;
	kind = b < heads ? 0 : b < heads + kv_heads ? 1 : 2;
	w = kind == 0 ? qw : kind == 1 ? kw : NULL;
	if (kind)
		g = kind == 1 ? b - heads : b - heads - kv_heads;
	/* the norm weights before waiting (no kernel writes them), then the
	 * row, all loads at once; the same sums in the same order as a loop */
#pragma unroll
	for (int u = 0; u < QP_PER; u++) {
		int i = threadIdx.x + u * QP_THREADS;

		wv[u] = w && i < d ? w[i] : 0.0f;
	}
	fg_pdl_wait();
	pos = R ? (pos_p ? *pos_p : pos0) + (int)blockIdx.y : *pos_p;
#pragma unroll
	for (int u = 0; u < QP_PER; u++) {
		int i = threadIdx.x + u * QP_THREADS;

		xv[u] = i < d ? x[i] : 0.0f;
	}
#pragma unroll
	for (int u = 0; u < QP_PER; u++)
		if ((int)threadIdx.x + u * QP_THREADS < d)
			ss = fmaf(xv[u], xv[u], ss);
	ss = fg_block_sum(ss, sh);
	float s = 1.0f / sqrtf(ss / (float)d + eps);
#pragma unroll
	for (int u = 0; u < QP_PER; u++) {
		int i = threadIdx.x + u * QP_THREADS;

		if (i < d)
			sv[i] = w ? (xv[u] * s) * wv[u] : xv[u] * s;
	}
	__syncthreads();
	if (kind < 2)
		for (int i = threadIdx.x; i < half; i += blockDim.x) {
			float2 t = rope_turn(pos, inv[i]);
			float x0 = sv[i], x1 = sv[i + half];

			sv[i] = x0 * t.x + (-x1) * t.y;
			sv[i + half] = x1 * t.x + x0 * t.y;
		}
	__syncthreads();
	float *dst = kind == 0 ? x : (kind == 1 ? kc : vc) + ((size_t)g * cap + pos % cap) * d;

	if (R) /* a chunk stores nothing: k and v stay in their rows */
		dst = x;
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		dst[i] = sv[i];
		if (kind)
			x[i] = sv[i];
	}
}

extern "C" int fg_k_qkv_post(struct fg_kctx *ctx, float *d_qkv, int heads, int kv_heads, int head_dim,
			     const float *d_qnorm, const float *d_knorm, const float *d_inv, const int32_t *d_pos,
			     float *d_kcache, float *d_vcache, int cap, float eps, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (heads < 1 || kv_heads < 0 || head_dim < 2 || head_dim % 2 || head_dim > ATT_MAX_DIM_POST || cap < 1 ||
	    (kv_heads && (!d_knorm || !d_kcache || !d_vcache)))
		return fg_err_set(err, FG_EINVAL, "qkv post: heads %d, kv heads %d, head_dim %d", heads, kv_heads,
				  head_dim);
	fg_launch_pdl(ctx, qkv_post<false>, dim3(heads + 2 * kv_heads), dim3(QP_THREADS), 0, d_qkv, heads, kv_heads,
		      head_dim,
		      d_qnorm, d_knorm, d_inv, d_pos, d_kcache, d_vcache, cap, eps, 0);
	return fg_launched("qkv post", err);
}

static int qkv_post_rows(struct fg_kctx *ctx, float *d_qkv, int rows, int heads, int kv_heads, int head_dim,
			 const float *d_qnorm, const float *d_knorm, const float *d_inv, int pos0, const int32_t *d_pos0,
			 float eps, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (rows < 1 || rows > 65535 || pos0 < 0 || heads < 1 || kv_heads < 0 || head_dim < 2 || head_dim % 2 ||
	    head_dim > ATT_MAX_DIM_POST || (kv_heads && !d_knorm))
		return fg_err_set(err, FG_EINVAL, "qkv post: %d rows at %d, heads %d, kv heads %d, head_dim %d", rows,
				  pos0, heads, kv_heads, head_dim);
	fg_launch_pdl(ctx, qkv_post<true>, dim3(heads + 2 * kv_heads, rows), dim3(QP_THREADS), 0, d_qkv, heads, kv_heads,
		      head_dim, d_qnorm, d_knorm, d_inv, d_pos0, (float *)NULL, (float *)NULL, 1, eps, pos0);
	return fg_launched("qkv post", err);
}

extern "C" int fg_k_qkv_post_rows(struct fg_kctx *ctx, float *d_qkv, int rows, int heads, int kv_heads, int head_dim,
				  const float *d_qnorm, const float *d_knorm, const float *d_inv, int pos0, float eps,
				  struct fg_err *err)
{
	return qkv_post_rows(ctx, d_qkv, rows, heads, kv_heads, head_dim, d_qnorm, d_knorm, d_inv, pos0, NULL, eps, err);
}

extern "C" int fg_k_qkv_post_rows_at(struct fg_kctx *ctx, float *d_qkv, int rows, int heads, int kv_heads,
				     int head_dim, const float *d_qnorm, const float *d_knorm, const float *d_inv,
				     const int32_t *d_pos0, float eps, struct fg_err *err)
{
	if (!d_pos0)
		return fg_err_set(err, FG_EINVAL, "qkv post: no position");
	return qkv_post_rows(ctx, d_qkv, rows, heads, kv_heads, head_dim, d_qnorm, d_knorm, d_inv, 0, d_pos0, eps,
			     err);
}

/* ---- GeGLU, embedding, per-layer inputs -------------------------------------*/

__global__ void geglu(float *out, const float *gate, const float *up, int n)
{
	fg_pdl_trigger(); /* the next kernel may launch and wait for us */
	fg_pdl_wait();    /* everything earlier kernels wrote is visible */
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		out[i] = fg_gelu_tanh(gate[i]) * up[i];
}

extern "C" int fg_k_geglu(struct fg_kctx *ctx, float *d_out, const float *d_gate, const float *d_up, int n,
			  struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n < 1)
		return fg_err_set(err, FG_EINVAL, "geglu: n = %d", n);
	fg_launch_pdl(ctx, geglu, dim3((n + 255) / 256), dim3(256), 0, d_out, d_gate, d_up, n);
	return fg_launched("geglu", err);
}

/* A table element as f32: bf16 bits widened, or an f32 table's own value
 * (an F16 / F32 checkpoint's table, widened to f32 at upload). */
__device__ __forceinline__ float tab_f(uint16_t b)
{
	return fg_bf16f(b);
}

__device__ __forceinline__ float tab_f(float f)
{
	return f;
}

/* R: row r (blockIdx.y) of out is the table row of id_p[r] (a prompt
 * chunk), else the step's one row. */
template <typename T, bool R>
__global__ void embed(float *out, const T *__restrict__ table, const int32_t *id_p, int n, float scale)
{
	fg_pdl_trigger(); /* the next kernel may launch and wait for us */
	fg_pdl_wait();    /* everything earlier kernels wrote is visible */
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		out[(R ? (size_t)blockIdx.y * n : 0) + i] = tab_f(table[(size_t)id_p[R ? blockIdx.y : 0] * n + i]) * scale;
}

template <typename T>
static int embed_launch(struct fg_kctx *ctx, float *d_out, const T *d_table, const int32_t *d_id, int rows, int n,
			float scale, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n < 1 || rows < 1 || rows > 65535)
		return fg_err_set(err, FG_EINVAL, "embed: %d rows of %d", rows, n);
	fg_launch_pdl(ctx, rows > 1 ? embed<T, true> : embed<T, false>, dim3((n + 255) / 256, rows), dim3(256), 0, d_out,
		      d_table, d_id, n, scale);
	return fg_launched("embed", err);
}

extern "C" int fg_k_embed(struct fg_kctx *ctx, float *d_out, const uint16_t *d_table, const int32_t *d_id, int n,
			  float scale, struct fg_err *err)
{
	return embed_launch(ctx, d_out, d_table, d_id, 1, n, scale, err);
}

extern "C" int fg_k_embed_f32(struct fg_kctx *ctx, float *d_out, const float *d_table, const int32_t *d_id, int n,
			      float scale, struct fg_err *err)
{
	return embed_launch(ctx, d_out, d_table, d_id, 1, n, scale, err);
}

extern "C" int fg_k_embed_rows(struct fg_kctx *ctx, float *d_out, const void *d_table, int f32, const int32_t *d_ids,
			       int rows, int n, float scale, struct fg_err *err)
{
	return f32 ? embed_launch(ctx, d_out, (const float *)d_table, d_ids, rows, n, scale, err)
		   : embed_launch(ctx, d_out, (const uint16_t *)d_table, d_ids, rows, n, scale, err);
}

template <typename T, bool R> /* R: a prompt chunk's rows (blockIdx.y), else the step's one row */
__global__ void ple(float *out, const T *__restrict__ table, const int32_t *id_p, const float *proj,
		    const float *__restrict__ norm_w, int layers, int dim, float tok_scale, float proj_scale, float eps)
{
	fg_pdl_trigger(); /* the next kernel may launch and wait for us */
	fg_pdl_wait();    /* everything earlier kernels wrote is visible */
	__shared__ float sh[33];
	int l = blockIdx.x;
	const float *p = proj + ((R ? (size_t)blockIdx.y * layers : 0) + l) * dim;
	const T *t = table + (size_t)id_p[R ? blockIdx.y : 0] * layers * dim + (size_t)l * dim;
	float ss = 0.0f;

	if (R)
		out += (size_t)blockIdx.y * layers * dim;

	for (int i = threadIdx.x; i < dim; i += blockDim.x) {
		float v = p[i] * proj_scale;

		ss = fmaf(v, v, ss);
	}
	ss = fg_block_sum(ss, sh);
	float s = 1.0f / sqrtf(ss / (float)dim + eps);
	for (int i = threadIdx.x; i < dim; i += blockDim.x)
		out[(size_t)l * dim + i] =
			(tab_f(t[i]) * tok_scale + p[i] * proj_scale * s * norm_w[i]) * 0.70710678118654752f;
}

template <typename T>
static int ple_launch(struct fg_kctx *ctx, float *d_out, const T *d_table, const int32_t *d_id, const float *d_proj,
		      const float *d_norm_w, int rows, int layers, int dim, float tok_scale, float proj_scale,
		      float eps, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (layers < 1 || dim < 1 || rows < 1 || rows > 65535)
		return fg_err_set(err, FG_EINVAL, "ple: %d rows, layers %d, dim %d", rows, layers, dim);
	fg_launch_pdl(ctx, rows > 1 ? ple<T, true> : ple<T, false>, dim3(layers, rows), dim3(NORM_THREADS), 0, d_out,
		      d_table, d_id, d_proj, d_norm_w, layers, dim, tok_scale, proj_scale, eps);
	return fg_launched("ple", err);
}

extern "C" int fg_k_ple(struct fg_kctx *ctx, float *d_out, const uint16_t *d_table, const int32_t *d_id,
			const float *d_proj, const float *d_norm_w, int layers, int dim, float tok_scale,
			float proj_scale, float eps, struct fg_err *err)
{
	return ple_launch(ctx, d_out, d_table, d_id, d_proj, d_norm_w, 1, layers, dim, tok_scale, proj_scale, eps,
			  err);
}

extern "C" int fg_k_ple_f32(struct fg_kctx *ctx, float *d_out, const float *d_table, const int32_t *d_id,
			    const float *d_proj, const float *d_norm_w, int layers, int dim, float tok_scale,
			    float proj_scale, float eps, struct fg_err *err)
{
	return ple_launch(ctx, d_out, d_table, d_id, d_proj, d_norm_w, 1, layers, dim, tok_scale, proj_scale, eps,
			  err);
}

extern "C" int fg_k_ple_rows(struct fg_kctx *ctx, float *d_out, const void *d_table, int f32, const int32_t *d_ids,
			     const float *d_proj, const float *d_norm_w, int rows, int layers, int dim, float tok_scale,
			     float proj_scale, float eps, struct fg_err *err)
{
	return f32 ? ple_launch(ctx, d_out, (const float *)d_table, d_ids, d_proj, d_norm_w, rows, layers, dim,
				tok_scale, proj_scale, eps, err)
		   : ple_launch(ctx, d_out, (const uint16_t *)d_table, d_ids, d_proj, d_norm_w, rows, layers, dim,
				tok_scale, proj_scale, eps, err);
}

/* ---- KV cache and decode attention -------------------------------------------*/

/* k, v [kv_heads][head_dim] into slot pos % cap; a prompt chunk (pos_p
 * NULL): block row r stores row r (k + r * kv_row) at position pos0 + r,
 * unless a newer row of the chunk lands in the same slot. */
__global__ void kv_store(float *kc, float *vc, const float *k, const float *v, int head_dim, int cap,
			 const int32_t *pos_p, size_t kv_row, int pos0, int rows)
{
	fg_pdl_trigger(); /* the next kernel may launch and wait for us */
	fg_pdl_wait();    /* everything earlier kernels wrote is visible */
	int g = blockIdx.x, r = blockIdx.y, slot = (pos_p ? *pos_p : pos0 + r) % cap;

	if (rows - r > cap)
		return;
	k += r * kv_row;
	v += r * kv_row;
	for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
		kc[((size_t)g * cap + slot) * head_dim + i] = k[(size_t)g * head_dim + i];
		vc[((size_t)g * cap + slot) * head_dim + i] = v[(size_t)g * head_dim + i];
	}
}

extern "C" int fg_k_kv_store(struct fg_kctx *ctx, float *d_kcache, float *d_vcache, const float *d_k,
			     const float *d_v, int kv_heads, int head_dim, int cap, const int32_t *d_pos,
			     struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (kv_heads < 1 || head_dim < 1 || cap < 1)
		return fg_err_set(err, FG_EINVAL, "kv store: kv heads %d, head_dim %d, cap %d", kv_heads, head_dim, cap);
	fg_launch_pdl(ctx, kv_store, dim3(kv_heads), dim3(128), 0, d_kcache, d_vcache, d_k, d_v, head_dim, cap, d_pos,
		      (size_t)0, 0, 1);
	return fg_launched("kv store", err);
}

extern "C" int fg_k_kv_store_rows(struct fg_kctx *ctx, float *d_kcache, float *d_vcache, const float *d_knew,
				  const float *d_vnew, size_t kv_row, int rows, int kv_heads, int head_dim, int cap,
				  int pos0, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (rows < 1 || rows > 65535 || pos0 < 0 || kv_heads < 1 || head_dim < 1 || cap < 1)
		return fg_err_set(err, FG_EINVAL, "kv store: %d rows at %d, kv heads %d, head_dim %d, cap %d", rows, pos0,
				  kv_heads, head_dim, cap);
	fg_launch_pdl(ctx, kv_store, dim3(kv_heads, rows), dim3(128), 0, d_kcache, d_vcache, d_knew, d_vnew, head_dim,
		      cap, (const int32_t *)NULL, kv_row, pos0, rows);
	return fg_launched("kv store", err);
}

#define ATT_THREADS 256
#define ATT_WARPS (ATT_THREADS / 32)
#define ATT_MAX_DIM 512
#ifndef ATT_MAX_GRP /* -D4 for measurements only (E4B's group): launches of more are refused */
#define ATT_MAX_GRP 8 /* query heads per kv head */
#endif
/* Keys per attention block (more where the cache needs over 1024 chunks)
 * and keys a warp scores at once: 16 and 2 measured best on an H200 at
 * every position from 16 to 4000 (docs/bench.md, fourteenth session); both
 * set the order of the sums, so a change re-records the golden transcript.
 * -D overrides are for such measurements only. */
#ifndef ATT_CHUNK
#define ATT_CHUNK 16
#endif
#ifndef ATT_KEYS
#define ATT_KEYS 2
#endif
#define ATT_GEN 1024u /* a decode launch's count of arrivals a kv head (>= its chunks, divides 2^32) */
#define ATT_WREG 4  /* chunk maxima and sums a lane of the combine loads at once */
#define ATT_CREG 32 /* chunk outputs a thread of the combine loads at once (a 512-key window) */
#define AP_PER (ATT_MAX_DIM / QP_THREADS)        /* elements of a row per thread of a 128-thread half */
#define AP_ROWS ((ATT_MAX_GRP + 2 + 1) / 2)       /* rows per thread: grp q heads + k + v over two halves */

/* What the attention needs to do qkv_post's work itself (attn_fused<true>):
 * the raw q | k | v rows of the projection, the norm weights, the RoPE table
 * and the cache, read and (own) written. */
struct attn_post {
	const float *qkv, *qw, *kw, *inv;
	float *kc, *vc;
	int own;
	float eps;
	const float2 *turns; /* fg_k_rope_table's: positions below turn_rows (others computed) */
	int turn_rows;
};

/* What the attention of a prompt chunk needs (attn_fused<false, true>,
 * fg_k_attn_prefill): the chunk's k, v rows (row i at knew + i kv_row), the
 * q row stride, the chunk's first position and the launch's first row. */
struct attn_pre {
	const float *knew, *vnew;
	size_t kv_row, q_row;
	int pos0, r0;
	const int32_t *pos_p; /* non-NULL: pos0 from device memory (a captured verify) */
};

/* qkv_post's work for block (g, c) of the fused attention: the grp query
 * heads of kv head g normed (q_norm) and rotated into sq, and, when mk (own
 * cache and slot pos % cap lies in this block's chunk), k (k_norm, rotated)
 * and v (no weight) of kv head g into the cache slot. The same expressions
 * in the same order as qkv_post, so the same bits: each row's squares are
 * summed by two 128-thread halves as qkv_post's 128 threads do (element
 * i = t + 128u in thread t, u in order, fg_warp_sum, then the four warps'
 * sums as fg_block_sum adds them: (w0 + w2) + (w1 + w3)). wq, wk, inv:
 * this thread's norm weights and inverse frequency (pair threadIdx.x; d <=
 * 512 so one pair per thread), loaded before the PDL wait; with tab,
 * turn is that pair's (cos, sin) from the table, loaded there too. */
__device__ __forceinline__ void attn_post_rows(float *sq, float *snew, float *shs, const struct attn_post &ap,
					       const float wq[AP_PER], const float wk[AP_PER], float inv, float2 turn,
					       bool tab, int g, int grp, int d, int pos, int slot, int mk, int cap)
{
	int nr = grp + 2 * mk, hf = threadIdx.x >> 7, vt = threadIdx.x & (QP_THREADS - 1);
	int w4 = (threadIdx.x >> 5) & 3, half = d / 2;
	const float *qr = ap.qkv + (size_t)g * grp * d;
	const float *kr = ap.qkv + ((size_t)gridDim.x * grp + g) * d;
	const float *vr = ap.qkv + ((size_t)gridDim.x * (grp + 1) + g) * d;
	float xv[AP_ROWS][AP_PER];

#pragma unroll
	for (int k = 0; k < AP_ROWS; k++) {
		int r = hf + 2 * k;
		const float *x = r < grp ? qr + (size_t)r * d : r == grp ? kr : vr;

#pragma unroll
		for (int u = 0; u < AP_PER; u++) {
			int i = vt + u * QP_THREADS;

			xv[k][u] = r < nr && i < d ? x[i] : 0.0f;
		}
	}
	if ((int)threadIdx.x < half && !tab) /* this thread's pair's turn, while the loads fly */
		turn = rope_turn(pos, inv);
	float c = turn.x, sn = turn.y;

#pragma unroll
	for (int k = 0; k < AP_ROWS; k++) {
		int r = hf + 2 * k;
		float ss = 0.0f;

		if (r >= nr) /* the same for the whole half: warp-uniform */
			continue;
#pragma unroll
		for (int u = 0; u < AP_PER; u++)
			if (vt + u * QP_THREADS < d)
				ss = fmaf(xv[k][u], xv[k][u], ss);
		ss = fg_warp_sum(ss);
		if ((threadIdx.x & 31) == 0)
			shs[r * 4 + w4] = ss;
	}
	__syncthreads();
#pragma unroll
	for (int k = 0; k < AP_ROWS; k++) {
		int r = hf + 2 * k;

		if (r >= nr)
			continue;
		const float *sr = shs + r * 4;
		float ss = (sr[0] + sr[2]) + (sr[1] + sr[3]);
		float s = 1.0f / sqrtf(ss / (float)d + ap.eps);
		float *dst = r < grp ? sq + (size_t)r * d : snew + (size_t)(r - grp) * d;
		const float *w = r < grp ? ap.qw : r == grp ? ap.kw : NULL;

#pragma unroll
		for (int u = 0; u < AP_PER; u++) {
			int i = vt + u * QP_THREADS;

			if (i < d)
				dst[i] = w ? (xv[k][u] * s) * (r < grp ? wq[u] : wk[u]) : xv[k][u] * s;
		}
	}
	__syncthreads();
	if ((int)threadIdx.x < half) {
		int i = threadIdx.x;

		for (int r = 0; r < grp + mk; r++) {
			float *x = r < grp ? sq + (size_t)r * d : snew;
			float x0 = x[i], x1 = x[i + half];

			x[i] = x0 * c + (-x1) * sn;
			x[i + half] = x1 * c + x0 * sn;
		}
	}
	__syncthreads();
	if (mk) {
		float *kd = ap.kc + ((size_t)g * cap + slot) * d, *vd = ap.vc + ((size_t)g * cap + slot) * d;

		for (int i = threadIdx.x; i < d; i += blockDim.x) {
			kd[i] = snew[i];
			vd[i] = snew[d + i];
		}
		__syncthreads(); /* the block's own stores are visible to its loads below */
	}
}

/* Where attn_combine finds chunk cc's piece of query head h (element 0 its
 * max m, 1 its sum l, 2 + i its output i): in global memory, written by the
 * kv head's chunk blocks (read through L2), ... */
struct attn_parts_global {
	static constexpr bool near = true; /* attn_combine loads past used (chunk used - 1 again) unconditionally */
	const float *pg;
	size_t stride;
	int nch;
	__device__ __forceinline__ float operator()(int h, int cc, int e) const
	{
		return __ldcg(pg + ((size_t)h * nch + cc) * stride + e);
	}
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 /* clusters */
/* ... or in the shared memory of the cluster's block of rank cc (the chunk
 * blocks of one kv head form one cluster, chunk c at rank c), its pieces at
 * spart [grp][stride] */
struct attn_parts_cluster {
	static constexpr bool near = false; /* ... and here only below used: a load is a remote read */
	float *spart;
	size_t stride;
	__device__ __forceinline__ float operator()(int h, int cc, int e) const
	{
		return cg::this_cluster().map_shared_rank(spart, cc)[(size_t)h * stride + e];
	}
};
#endif

/* load(k), then use(k, value), for k from k0 to n - 1 in that order: the
 * loads in rounds of 16, then one round each of 8, 4, 2 and 1 as the rest
 * needs, every load of a round issued before its first use. A loop
 * unrolled by 16 leaves the rest of a count that is no multiple of 16 to a
 * loop of one load a round trip (a chunk of 13 keys: 13 round trips, here
 * 3; measured on the H200, docs/bench.md, thirty-ninth session). Rounds of
 * 16 loads under a condition (j < cnt) measured slower than both. */
template <int R, class L, class U>
__device__ __forceinline__ void attn_round(int k, const L &load, const U &use)
{
	float v[R];

#pragma unroll
	for (int u = 0; u < R; u++)
		v[u] = load(k + u);
#pragma unroll
	for (int u = 0; u < R; u++)
		use(k + u, v[u]);
}

template <class L, class U>
__device__ __forceinline__ void attn_rounds(int k, int n, const L &load, const U &use)
{
	for (; k + 16 <= n; k += 16)
		attn_round<16>(k, load, use);
	if (n - k >= 8) {
		attn_round<8>(k, load, use);
		k += 8;
	}
	if (n - k >= 4) {
		attn_round<4>(k, load, use);
		k += 4;
	}
	if (n - k >= 2) {
		attn_round<2>(k, load, use);
		k += 2;
	}
	if (n - k >= 1)
		attn_round<1>(k, load, use);
}

/* part(h, cc, e) for a chunk cc of the combine's first round of loads, to
 * be counted only below used: from global memory (P::near) loaded whatever
 * cc is, past used chunk used - 1 again (under a condition those loads went
 * one at a time, measured, docs/bench.md, thirty-ninth session); through a
 * cluster only below used (a load there is a remote read), else 0. */
template <class P>
__device__ __forceinline__ float part_first(const P &part, int h, int cc, int e, int used)
{
	return P::near ? part(h, min(cc, used - 1), e) : cc < used ? part(h, cc, e) : 0.0f;
}

/* The combine of kv head g's used chunks (attn_fused, decode): per query
 * head, M = max of the chunks' maxima, chunk weights e^(m_c - M) (into sp),
 * L = sum of weights * l_c, then outputs [e0, e1) of [grp][head_dim], each
 * the chunks' outputs summed in chunk order, over L. Every block that runs
 * it computes the same M, weights and L, so any partition of the outputs
 * gives the same bits. part (attn_parts_global, attn_parts_cluster) is read
 * in one round where it can: a lane loads its first ATT_WREG chunks' m_c and
 * l_c together, and where the block has one output a thread, that thread
 * loads its output's first ATT_CREG chunk outputs with them (part_first). */
template <class P>
__device__ __forceinline__ void attn_combine(float *out, const P &part, float *sp, float (*sml)[2], int g, int grp,
					     int head_dim, int spn, int used, int e0, int e1)
{
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const bool one = e1 - e0 <= ATT_THREADS;
	float ov[ATT_CREG];

	if (one && e0 + (int)threadIdx.x < e1) {
		int t = e0 + (int)threadIdx.x, h = t / head_dim, i = t - h * head_dim;

#pragma unroll
		for (int cc = 0; cc < ATT_CREG; cc++)
			ov[cc] = part_first(part, h, cc, 2 + i, used);
	}
	if (warp < grp) {
		float *w = sp + warp * spn, m = -INFINITY, l = 0.0f, mv[ATT_WREG], lv[ATT_WREG];

#pragma unroll
		for (int k = 0; k < ATT_WREG; k++) {
			int cc = lane + 32 * k;

			float a = part_first(part, warp, cc, 0, used), b = part_first(part, warp, cc, 1, used);

			mv[k] = cc < used ? a : -INFINITY;
			lv[k] = cc < used ? b : 0.0f;
		}
#pragma unroll
		for (int k = 0; k < ATT_WREG; k++)
			m = fmaxf(m, mv[k]); /* -inf past used: leaves m as it is */
		for (int cc = lane + 32 * ATT_WREG; cc < used; cc += 32)
			m = fmaxf(m, part(warp, cc, 0));
		for (int o = 16; o > 0; o >>= 1)
			m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
#pragma unroll
		for (int k = 0; k < ATT_WREG; k++) {
			int cc = lane + 32 * k;

			if (cc < used) {
				float e = expf(mv[k] - m);

				w[cc] = e;
				l = fmaf(e, lv[k], l);
			}
		}
		for (int cc = lane + 32 * ATT_WREG; cc < used; cc += 32) {
			float e = expf(part(warp, cc, 0) - m);

			w[cc] = e;
			l = fmaf(e, part(warp, cc, 1), l);
		}
		l = fg_warp_sum(l);
		if (lane == 0)
			sml[warp][1] = l;
	}
	__syncthreads();
	for (int t = e0 + (int)threadIdx.x; t < e1; t += ATT_THREADS) {
		int h = t / head_dim, i = t - h * head_dim, cc = 0;
		const float *w = sp + h * spn;
		float acc = 0.0f;

		if (one)
#pragma unroll
			for (; cc < ATT_CREG; cc++)
				if (cc < used)
					acc = fmaf(w[cc], ov[cc], acc);
#pragma unroll 16
		for (; cc < used; cc++)
			acc = fmaf(w[cc], part(h, cc, 2 + i), acc);
		out[((size_t)g * grp + h) * head_dim + i] = acc / sml[h][1];
	}
}

/* Decode attention in one launch. Block (g, c) takes kv head g and keys
 * [c * chunk, +chunk): all grp query heads that share g are scored against
 * the chunk's keys (each K and V row read once), and the chunk's softmax
 * pieces (max m, sum of exp l, unnormalized output o) go to part as
 * [m, l, o...] per (query head, chunk). Then the chunks are combined in
 * chunk order (attn_combine): the last np chunk blocks of kv head g to
 * finish (an integer counter gives each its arrival, in generations of
 * ATT_GEN) wait for the rest and combine a share of the outputs each,
 * np = min(used, spread / kv heads),
 * so that all the launch's waiting blocks fit on the GPU at once with room
 * to spare (spread: attn_spread_max) and the blocks they wait for can
 * still be scheduled; with spread 0 the last block combines them all.
 * Either way each output gets the same bits. With clus > 0 (a cluster
 * launch of clus blocks along the chunks, attn_cluster_size) and used <=
 * clus, the chunk blocks of kv head g are its first cluster instead: each
 * leaves its pieces in its shared memory, and after a cluster barrier each
 * combines a share from the others' (no global pieces, fence or counter);
 * the cluster's blocks past the keys stay for its two barriers. Scores: lanes take dims i,
 * i + 32, ... with four keys in flight, then a fixed xor tree; weights and
 * outputs sum keys in slot order.
 * POST: qkv_post is done here too (attn_post_rows): every block norms and
 * rotates the q rows it needs from the raw projection, and the one block
 * whose chunk holds slot pos % cap makes the new k, v row, stores it and then
 * reads it back like any other; no other block of the launch reads that slot
 * (its keys are other slots), so no block sees the slot's old key. The cache
 * is then read through ap.kc (written in this kernel: plain coherent loads).
 * PRE (a prompt chunk, fg_k_attn_prefill): block (x, g, c) serves the query
 * row r = pre.r0 + x at position pre.pos0 + r (rows vary fastest, so the
 * blocks reading a chunk of keys run together and share it in L2), and each
 * key row comes from the cache or from the chunk (the slot's newest
 * position up to r's, its address kept in shared memory per key of the
 * block's chunk); the scores and the chunk's pieces are the same code, and
 * attn_pre_combine then does the last block's combine over many blocks, so
 * row r gets the decode launch's bits at its position. part holds gridDim.x
 * rows; nch is the launch's chunk count (a stride only: the partition of
 * the keys is fixed by chunk).
 * G, D (where not 0): the launch's group and head size, known when it is
 * compiled, so the unrolled loops over the group and the head lose their
 * tests; CL 0: no cluster combine in the kernel (launches that are no
 * clusters); CL 2: the cluster combine alone (short launches, whose chunks
 * all fit their cluster), so no global combine. None of these changes a sum
 * or its order; each makes the kernel's code smaller (attn_pick;
 * docs/gpu.md, "Speed"). */
template <bool POST, bool PRE, int G = 0, int D = 0, int CL = 1>
__global__ void __launch_bounds__(ATT_THREADS)
	attn_fused(float *out, float *part, unsigned *counters, const float *__restrict__ q,
		   const float *__restrict__ kc, const float *__restrict__ vc, int grp, int head_dim, int cap,
		   const int32_t *pos_p, float scale, int chunk, int nch, int kvpf, int spread, int clus,
		   const struct fg_kpf pf, const struct attn_post ap, const struct attn_pre pre)
{
	const float *kcr = POST ? ap.kc : kc, *vcr = POST ? ap.vc : vc;
	constexpr int GM = G ? G : ATT_MAX_GRP; /* the unrolled loops' bound over the group */

	if (G)
		grp = G; /* the launch's group, known here: its tests fold away */
	if (D)
		head_dim = D; /* and its head size */
#if !(defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
	clus = 0; /* no clusters: the host never asks for them here (fg_kctx_code_arch) */
#endif
	float wq[AP_PER], wk[AP_PER], inv = 0.0f;
	float2 turn = make_float2(1.0f, 0.0f);
	bool tab = false;

	fg_pdl_trigger();
	fg_pf_issue(pf); /* a later kernel's weights into L2 (fg_kctx_prefetch) */
	/* a decode block past the valid keys leaves before the wait, so the
	 * grid sized for the whole cache costs little at short positions (the
	 * position comes from the host's upload, as for the prefetch below) */
#ifndef ATT_LATE_EXIT /* -D for measurements only: such blocks then leave after the wait */
	/* (except, where the kv head's chunks fit one cluster, its first
	 * cluster's blocks: they meet the others at its barriers) */
	if (!PRE && (int)blockIdx.y * chunk >= min(*pos_p + 1, cap) &&
	    !((int)blockIdx.y < clus && (min(*pos_p + 1, cap) + chunk - 1) / chunk <= clus))
		return;
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	/* this block's K and V rows into L2 while the kernel before still runs
	 * (a hint: lines written later are updated in L2; the position comes from
	 * the host's upload, done before the graph's first kernel began) */
	if (!PRE && kvpf && threadIdx.x < 2 && head_dim % 4 == 0) { /* rows 16-byte aligned */
		int pnv = min(*pos_p + 1, cap), pj0 = blockIdx.y * chunk, pcnt = min(chunk, pnv - pj0);

		if (pcnt > 0 && pcnt * head_dim >= 4)
			asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(
					     (threadIdx.x ? vcr : kcr) + ((size_t)blockIdx.x * cap + pj0) * head_dim),
				     "r"((unsigned)(pcnt * head_dim * 4) & ~15u)
				     : "memory");
	}
#endif
	if (POST) { /* norm weights before the wait: no kernel writes them */
#pragma unroll
		for (int u = 0; u < AP_PER; u++) {
			int i = (threadIdx.x & (QP_THREADS - 1)) + u * QP_THREADS;

			wq[u] = ap.qw && i < head_dim ? ap.qw[i] : 0.0f;
			wk[u] = ap.kw && i < head_dim ? ap.kw[i] : 0.0f;
		}
		/* the pair's turn from the table where it holds the position (the
		 * host's upload, as above), else its frequency, to compute it */
		tab = ap.turns && *pos_p < ap.turn_rows;
		if ((int)threadIdx.x < head_dim / 2) {
			if (tab)
				turn = ap.turns[(size_t)*pos_p * (head_dim / 2) + threadIdx.x];
			else
				inv = ap.inv[threadIdx.x];
		}
	}
	fg_pdl_wait();
	extern __shared__ __align__(16) float sm[];
	float *sq = sm;                   /* [grp][head_dim] */
	float *sp = sm + grp * head_dim;  /* [grp][max(chunk, nch)]: scores, weights */
	int spn = chunk > nch ? chunk : nch;
	__shared__ float sml[GM][2];
	__shared__ int last;
	int g = PRE ? blockIdx.y : blockIdx.x, c = PRE ? blockIdx.z : blockIdx.y, r = PRE ? pre.r0 + (int)blockIdx.x : 0;
	int pos = PRE ? (pre.pos_p ? *pre.pos_p : pre.pos0) + r : *pos_p, nv = min(pos + 1, cap);
	int used = (nv + chunk - 1) / chunk;
	int j0 = c * chunk, cnt = min(chunk, nv - j0);
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	size_t stride = (size_t)head_dim + 2;
	float *pg = part + (size_t)g * grp * nch * stride; /* this kv head's query heads */
	/* PRE: key j's K and V rows, after the scores and weights (8-byte aligned) */
	const float **kp = (const float **)(sm + (((size_t)grp * head_dim + (size_t)grp * spn + 1) & ~(size_t)1));
	const float **vp = kp + spn;

	/* the kv head's chunk blocks combine through the cluster's shared memory
	 * (its block of rank c holds chunk c), not through global memory */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	const bool clm = !PRE && (CL == 2 || (CL && clus > 0 && used <= clus));
#else
	const bool clm = false; /* no clusters here (CL 2 is only launched as one) */
#endif

	if (!PRE && used > (int)gridDim.y)
		__trap(); /* a short launch (fg_kctx_set_attn_short) at a later position: a fault, not a wrong answer */
	float *spart = sp + (size_t)grp * spn + (POST ? 2 * (size_t)head_dim + 4 * (ATT_MAX_GRP + 2) : 0);

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	if (clm && cnt <= 0) { /* in the cluster, past the valid keys: at its two barriers only */
		cg::this_cluster().sync();
		cg::this_cluster().sync();
		return;
	}
#endif
	if (cnt <= 0)
		return; /* past the valid keys (a prompt row's; decode blocks left before the wait): not counted, never read */
	if (PRE) { /* row r's q rows and partial sums */
		q += (size_t)r * pre.q_row;
		pg += (size_t)blockIdx.x * gridDim.y * grp * nch * stride;
	}
	if (POST) {
		int slot = pos % cap;
		float *snew = sp + (size_t)grp * spn; /* [2][head_dim]: the new k, v */

		attn_post_rows(sq, snew, snew + 2 * head_dim, ap, wq, wk, inv, turn, tab, g, grp, head_dim, pos, slot,
			       ap.own && slot / chunk == c, cap);
	} else {
		for (int i = threadIdx.x; i < grp * head_dim; i += ATT_THREADS)
			sq[i] = q[(size_t)g * grp * head_dim + i];
		if (PRE) { /* slot s: the chunk's row of position pos - d, d = (pos - s) mod cap, if in the chunk */
			int sp0 = pos % cap;

			for (int j = threadIdx.x; j < cnt; j += ATT_THREADS) {
				int s = j0 + j, d = sp0 - s < 0 ? sp0 - s + cap : sp0 - s, i = r - d;

				kp[j] = i >= 0 ? pre.knew + (size_t)i * pre.kv_row + (size_t)g * head_dim
					       : kc + ((size_t)g * cap + s) * head_dim;
				vp[j] = i >= 0 ? pre.vnew + (size_t)i * pre.kv_row + (size_t)g * head_dim
					       : vc + ((size_t)g * cap + s) * head_dim;
			}
		}
		__syncthreads();
	}
	fg_kt_mark(2); /* a measuring build's (KTRACE=1) marks: q (and k, v) made */
	const float *kb = kcr + ((size_t)g * cap + j0) * head_dim;
	const float *vb = vcr + ((size_t)g * cap + j0) * head_dim;
	for (int j = warp * ATT_KEYS; j < cnt; j += ATT_WARPS * ATT_KEYS) {
		float acc[ATT_KEYS][GM];
		const float *kr[ATT_KEYS];

		if (PRE)
#pragma unroll
			for (int u = 0; u < ATT_KEYS; u++)
				kr[u] = kp[j + u < cnt ? j + u : j];

#pragma unroll
		for (int u = 0; u < ATT_KEYS; u++)
#pragma unroll
			for (int h = 0; h < GM; h++)
				acc[u][h] = 0.0f;
#pragma unroll 8
		for (int i = lane; i < head_dim; i += 32) {
			float kv[ATT_KEYS];

#pragma unroll
			for (int u = 0; u < ATT_KEYS; u++)
				kv[u] = j + u < cnt ? (PRE ? kr[u][i] : kb[(size_t)(j + u) * head_dim + i]) : 0.0f;
#pragma unroll
			for (int h = 0; h < GM; h++)
				if (h < grp) {
					float qv = sq[h * head_dim + i];

#pragma unroll
					for (int u = 0; u < ATT_KEYS; u++)
						acc[u][h] = fmaf(qv, kv[u], acc[u][h]);
				}
		}
#pragma unroll
		for (int h = 0; h < GM; h++)
			if (h < grp)
#pragma unroll
				for (int u = 0; u < ATT_KEYS; u++) {
					float d = fg_warp_sum(acc[u][h]);

					if (lane == 0 && j + u < cnt)
						sp[h * spn + j + u] = d * scale;
				}
	}
	__syncthreads();
	fg_kt_mark(4); /* the chunk's scores */
	if (warp < grp) { /* warp h: the chunk's max and weights for query head h */
		float *s = sp + warp * spn, m = -INFINITY, l = 0.0f;

		for (int j = lane; j < cnt; j += 32)
			m = fmaxf(m, s[j]);
		for (int o = 16; o > 0; o >>= 1)
			m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
		for (int j = lane; j < cnt; j += 32) {
			float e = expf(s[j] - m);

			s[j] = e;
			l += e;
		}
		l = fg_warp_sum(l);
		if (lane == 0) {
			sml[warp][0] = m;
			sml[warp][1] = l;
		}
	}
	__syncthreads();
	fg_kt_mark(5); /* its weights */
	/* chunk c's piece of query head h: at pw + h * hs */
	float *pw = clm ? spart : pg + (size_t)c * stride;
	size_t hs = clm ? stride : (size_t)nch * stride;

	for (int i = threadIdx.x; i < head_dim; i += ATT_THREADS) {
		float o[GM];

#pragma unroll
		for (int h = 0; h < GM; h++)
			o[h] = 0.0f;
		attn_rounds(
			0, cnt, [&](int j) { return PRE ? vp[j][i] : vb[(size_t)j * head_dim + i]; },
			[&](int j, float v) {
#pragma unroll
				for (int h = 0; h < GM; h++)
					if (h < grp)
						o[h] = fmaf(sp[h * spn + j], v, o[h]);
			});
#pragma unroll
		for (int h = 0; h < GM; h++)
			if (h < grp)
				pw[h * hs + 2 + i] = o[h];
	}
	if (threadIdx.x < grp) {
		pw[threadIdx.x * hs] = sml[threadIdx.x][0];
		pw[threadIdx.x * hs + 1] = sml[threadIdx.x][1];
	}
	fg_kt_mark(3); /* the chunk's pieces written */
	if (PRE)
		return; /* attn_pre_combine combines, over many blocks */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	if (clm) { /* every chunk block combines a share, reading the others' pieces */
		cg::this_cluster().sync();
		fg_kt_mark(6); /* the combine begins */
		attn_combine(out, attn_parts_cluster{spart, stride}, sp, sml, g, grp, head_dim, spn, used,
			     (int)((long long)grp * head_dim * c / used), (int)((long long)grp * head_dim * (c + 1) / used));
		fg_kt_mark(7); /* its share combined */
		cg::this_cluster().sync(); /* no block leaves while another reads its pieces */
		return;
	}
#endif
	__syncthreads(); /* the pieces stored, then published by thread 0's acq_rel add (fg_arrive's pattern) */
	/* counters[g] counts arrivals in generations of ATT_GEN: this launch's
	 * chunk blocks take [base, base + used), and the last to arrive adds
	 * ATT_GEN - used, so the next launch starts at base + ATT_GEN; no
	 * block has to reset it (no round trip after the combine) */
	int np = 1; /* the blocks that combine; this one's share: last */

	if (spread >= (int)gridDim.x) { /* the last np chunk blocks to finish combine a share each */
		np = min(used, spread / (int)gridDim.x);

		if (threadIdx.x == 0) {
			unsigned long long t0 = fg_gtimer_ns();
			unsigned a = fg_atom_add_acq_rel(&counters[g], 1u), base = a & ~(ATT_GEN - 1u);

			last = (int)(a & (ATT_GEN - 1u)) - (used - np); /* rank among the combining blocks, < 0: not one */
			if (last == np - 1)
				atomicAdd(&counters[g], ATT_GEN - (unsigned)used);
			/* the acquiring reads see every piece published before the arrivals they count */
			while (last >= 0 && fg_ld_acquire(&counters[g]) - base < (unsigned)used) {
				__nanosleep(32);
				if (fg_gtimer_ns() - t0 > 2000000000ull)
					__trap(); /* blocks that cannot all run at once: a launch error, not a hang */
			}
		}
		__syncthreads();
		if (last < 0)
			return;
	} else { /* the last chunk block to finish combines them all */
		if (threadIdx.x == 0) {
			unsigned a = fg_atom_add_acq_rel(&counters[g], 1u);

			last = (a & (ATT_GEN - 1u)) == (unsigned)(used - 1) ? 0 : -1;
			if (!last)
				atomicAdd(&counters[g], ATT_GEN - (unsigned)used);
		}
		__syncthreads();
		if (last < 0)
			return;
	}
	fg_kt_mark(6); /* the combine begins */
	/* one call (it is inlined): the block's share [last / np, (last + 1) / np) of the outputs */
	attn_combine(out, attn_parts_global{pg, stride, nch}, sp, sml, g, grp, head_dim, spn, used,
		     (int)((long long)grp * head_dim * last / np), (int)((long long)grp * head_dim * (last + 1) / np));
	fg_kt_mark(7); /* its share combined */
}

/* The most chunk blocks (all kv heads together) that may wait for the
 * others of their kv head and then share its combine: the waiters must fit
 * on the GPU at once and leave room for the blocks they wait for, so half
 * of what the device holds of the kernel alone (the rest a margin for those
 * and for other work); 0 (the last block combines alone) with
 * FG_ATTN_SPREAD=0. */
static int attn_spread_max(const void *k, size_t smem, const struct fg_kctx *ctx)
{
	static int on = -1;
	int per = 0;

	if (on < 0) {
		const char *e = getenv("FG_ATTN_SPREAD");

		on = !(e && *e == '0');
	}
	if (!on || fg_kocc(ctx, &per, k, ATT_THREADS, smem) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	return per * fg_kctx_sm_count(ctx) / 2;
}

/* The keys a chunk block takes for a cache of cap slots: ATT_CHUNK, doubled
 * until at most ATT_GEN chunks (*nch of them) cover the cache. The decode
 * step and the prompt chunks both partition by it, so their sums agree. */
static int attn_chunk(int cap, int *nch)
{
	int chunk = ATT_CHUNK;

	while ((*nch = (cap + chunk - 1) / chunk) > (int)ATT_GEN)
		chunk *= 2;
	return chunk;
}

/* The chunk blocks of one kv head as one thread-block cluster (16 blocks
 * where the GPU schedules them, else 8; 0: none, or not asked for,
 * fg_kctx_set_attn_cluster):
 * where a position's chunks fit in it, they combine through distributed
 * shared memory instead of global memory, a fence and a counter. *spread:
 * the blocks that may wait for the others of their kv head at longer
 * positions, as attn_spread_max but counted in whole clusters (a cluster
 * is only scheduled where one GPC has room for all its blocks; counting
 * blocks alone let the waiters leave no GPC room, measured on the H200). */
static int attn_cluster_size(struct fg_kctx *ctx, const void *k, int kv_heads, int nch, size_t smem, int *spread)
{
	static const int sizes[] = {16, 8};

	if (!ctx->sm90 || !ctx->attn_cluster)
		return 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int cl = sizes[i], n = fg_kclusters(k, dim3(kv_heads, (nch + cl - 1) / cl * cl), dim3(ATT_THREADS), smem,
						    dim3(1, cl, 1));

		if (n > 0) {
			if (*spread > n * cl / 2)
				*spread = n * cl / 2;
			return cl;
		}
	}
	return 0;
}

/* A short launch's cluster (fg_kctx_set_attn_short): the fewest blocks, 8
 * or 16, that hold the chunks of short_keys keys, where the GPU schedules
 * one such cluster a kv head; 0: none (the full launch then). */
static int attn_short_size(const struct fg_kctx *ctx, const void *k, int kv_heads, int cap, int chunk, size_t smem)
{
	static const int sizes[] = {8, 16};
	int need = ((cap < ctx->short_keys ? cap : ctx->short_keys) + chunk - 1) / chunk;

	if (!ctx->sm90 || !ctx->attn_short)
		return 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (sizes[i] >= need && fg_kclusters(k, dim3(kv_heads, sizes[i]), dim3(ATT_THREADS), smem,
						     dim3(1, sizes[i], 1)) > 0)
			return sizes[i];
	return 0;
}

typedef void (*attn_kernel)(float *, float *, unsigned *, const float *, const float *, const float *, int, int, int,
			    const int32_t *, float, int, int, int, int, int, const struct fg_kpf,
			    const struct attn_post, const struct attn_pre);

/* The decode attention kernel for the launch's shape: CL 1, the one that
 * can combine through a cluster or through global memory; 0, the one built
 * without the cluster path (launches that are no clusters); 2, the one
 * built with the cluster path alone (short launches: all their chunks fit
 * the cluster). With POST and E4B's group (4) and head sizes (256, 512), one
 * built for that shape (the unrolled loops lose their tests), as
 * ctx->attn_grp allows. The same sums in each. */
template <int CL>
static attn_kernel attn_pick(const struct fg_kctx *ctx, bool post, int grp, int head_dim)
{
	if (!post)
		return attn_fused<false, false, 0, 0, CL>;
	if (grp != 4 || !ctx->attn_grp)
		return attn_fused<true, false, 0, 0, CL>;
	if (ctx->attn_grp >= 2 && head_dim == 256)
		return attn_fused<true, false, 4, 256, CL>;
	if (ctx->attn_grp >= 2 && head_dim == 512)
		return attn_fused<true, false, 4, 512, CL>;
	return attn_fused<true, false, 4, 0, CL>;
}

/* Launches attn_fused<POST> (shapes checked by the caller). */
static int attn_launch(struct fg_kctx *ctx, bool post, float *d_out, const float *d_q, const float *d_kcache,
		       const float *d_vcache, int heads, int kv_heads, int head_dim, int cap, const int32_t *d_pos,
		       float scale, const struct attn_post &ap, struct fg_err *err)
{
	int chunk, nch, grp = heads / kv_heads, spn, clus, spread, nblk;
	size_t smem;
	/* k: sized and checked for clusters; the launch takes kn where it is
	 * none, ks where it is a short launch */
	attn_kernel k = attn_pick<1>(ctx, post, grp, head_dim), kn = attn_pick<0>(ctx, post, grp, head_dim),
		    ks = attn_pick<2>(ctx, post, grp, head_dim);

	/* the grid covers the whole cache so one captured graph serves every
	 * position (attn_chunk) */
	chunk = attn_chunk(cap, &nch);
	spn = chunk > nch ? chunk : nch;
	/* q rows, scores; POST also the new k and v rows and the row sums */
	smem = sizeof(float) * ((size_t)grp * head_dim + (size_t)grp * spn +
				(post ? 2 * (size_t)head_dim + 4 * (ATT_MAX_GRP + 2) : 0) +
				(ctx->sm90 && (ctx->attn_cluster || ctx->attn_short) ? (size_t)grp * (head_dim + 2)
										      : 0)); /* + the pieces */
	if ((size_t)heads * nch * (head_dim + 2) * sizeof(float) > ctx->scratch_bytes)
		return fg_err_set(err, FG_EINVAL, "attention: cache of %d slots too large for scratch", cap);
	if (smem > 48 * 1024) {
		cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);

		if (e == cudaSuccess)
			e = cudaFuncSetAttribute(kn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		if (e == cudaSuccess)
			e = cudaFuncSetAttribute(ks, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		if (e != cudaSuccess) {
			cudaGetLastError();
			return fg_err_set(err, FG_EINVAL, "attention: %zu bytes of shared memory: %s", smem,
					  cudaGetErrorString(e));
		}
	}
	spread = attn_spread_max((const void *)k, smem, ctx);
	/* a short launch: one cluster a kv head, no blocks for the later keys
	 * (the kernel with the cluster path alone: every chunk is in it) */
	if ((clus = attn_short_size(ctx, (const void *)ks, kv_heads, cap, chunk, smem))) {
		nblk = clus;
		k = ks;
	} else if ((clus = attn_cluster_size(ctx, (const void *)k, kv_heads, nch, smem, &spread))) {
		nblk = (nch + clus - 1) / clus * clus;
	} else {
		nblk = nch;
	}
	/* without clusters, the kernel without their path, with the fewer
	 * waiters of its own count and k's (the same in the builds measured) */
	if (!clus) {
		int sn = attn_spread_max((const void *)kn, smem, ctx);

		spread = sn < spread ? sn : spread;
	}
	fg_launch_pdl_cluster(ctx, clus ? k : kn, dim3(kv_heads, nblk), dim3(ATT_THREADS),
			      smem, dim3(1, clus ? clus : 1, 1), d_out, (float *)ctx->scratch, ctx->counters, d_q, d_kcache,
			      d_vcache, grp, head_dim, cap, d_pos, scale, chunk, nch, ctx->pf_on >= 1, spread, clus,
			      fg_pf_take(ctx), ap, attn_pre());
	return fg_launched("attention", err);
}

static int attn_shape_ok(int heads, int kv_heads, int head_dim, int cap)
{
	return heads >= 1 && kv_heads >= 1 && heads % kv_heads == 0 && heads / kv_heads <= ATT_MAX_GRP &&
	       kv_heads <= FG_CTX_COUNTERS && head_dim >= 1 && head_dim <= ATT_MAX_DIM && cap >= 1 && cap <= (1 << 20);
}

extern "C" int fg_k_attn_decode(struct fg_kctx *ctx, float *d_out, const float *d_q, const float *d_kcache,
				const float *d_vcache, int heads, int kv_heads, int head_dim, int cap,
				const int32_t *d_pos, float scale, struct fg_err *err)
{
	struct attn_post none = {};

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (!attn_shape_ok(heads, kv_heads, head_dim, cap))
		return fg_err_set(err, FG_EINVAL,
				  "attention: heads %d, kv heads %d, head_dim %d, cap %d (at most %d heads per kv head)",
				  heads, kv_heads, head_dim, cap, ATT_MAX_GRP);
	return attn_launch(ctx, false, d_out, d_q, d_kcache, d_vcache, heads, kv_heads, head_dim, cap, d_pos, scale,
			   none, err);
}

extern "C" int fg_k_attn_decode_post(struct fg_kctx *ctx, float *d_out, float *d_qkv, int heads, int kv_heads,
				     int head_dim, const float *d_qnorm, const float *d_knorm, const float *d_inv,
				     const float *d_turns, int turn_rows, const int32_t *d_pos, float *d_kcache,
				     float *d_vcache, int cap, int own, float eps, float scale, struct fg_err *err)
{
	struct attn_post ap = {d_qkv, d_qnorm, d_knorm, d_inv, d_kcache, d_vcache, own ? 1 : 0, eps,
			       (const float2 *)d_turns, d_turns ? turn_rows : 0};

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (!attn_shape_ok(heads, kv_heads, head_dim, cap) || head_dim < 2 || head_dim % 2 || !d_qkv || !d_inv ||
	    !d_kcache || !d_vcache || (own && !d_knorm))
		return fg_err_set(err, FG_EINVAL,
				  "attention with qkv post: heads %d, kv heads %d, head_dim %d (even), cap %d, "
				  "k norm %s (at most %d heads per kv head)",
				  heads, kv_heads, head_dim, cap, d_knorm ? "given" : "missing", ATT_MAX_GRP);
	if (!ctx->attn_fused) /* the two launches (FG_ATTN_FUSED=0) */
		return fg_k_qkv_post(ctx, d_qkv, heads, own ? kv_heads : 0, head_dim, d_qnorm, d_knorm, d_inv, d_pos,
				     d_kcache, d_vcache, cap, eps, err)
			       ? err->code
			       : fg_k_attn_decode(ctx, d_out, d_qkv, d_kcache, d_vcache, heads, kv_heads, head_dim, cap,
						  d_pos, scale, err);
	return attn_launch(ctx, true, d_out, NULL, NULL, NULL, heads, kv_heads, head_dim, cap, d_pos, scale, ap, err);
}

/* The combine of attn_fused (the last block's part) for the rows of a
 * prompt chunk, spread over blocks: block (x, g, z) makes elements [z * 256,
 * +256) of kv head g's query heads [grp][head_dim] for row r0 + x. Its warp
 * w takes the w-th query head those elements touch and computes that head's
 * maximum, chunk weights and sum exactly as the last block does (every block
 * that touches a head gets the same bits); each thread then sums its
 * element's chunks in chunk order. */
__global__ void __launch_bounds__(ATT_THREADS)
	attn_pre_combine(float *out, const float *part, int grp, int head_dim, int cap, int pos0, int r0, int chunk,
			 int nch, const int32_t *pos_p)
{
	fg_pdl_trigger();
	fg_pdl_wait();
	extern __shared__ __align__(16) float sw[]; /* [heads of the block][nch] */
	__shared__ float sl[ATT_WARPS];
	int x = blockIdx.x, g = blockIdx.y, kvh = gridDim.y, qn = grp * head_dim;
	int e0 = blockIdx.z * ATT_THREADS, e1 = min(e0 + ATT_THREADS, qn), h0 = e0 / head_dim;
	int nh = (e1 - 1) / head_dim - h0 + 1;
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int nv = min((pos_p ? *pos_p : pos0) + r0 + x + 1, cap), used = (nv + chunk - 1) / chunk;
	size_t stride = (size_t)head_dim + 2;
	const float *pg = part + ((size_t)x * kvh + g) * grp * nch * stride;

	if (warp < nh) { /* nh <= 8 (256 elements, head_dim >= 32) or grp <= 8 */
		const float *ph = pg + (size_t)(h0 + warp) * nch * stride;
		float *w = sw + warp * nch, m = -INFINITY, l = 0.0f;

		for (int cc = lane; cc < used; cc += 32)
			m = fmaxf(m, ph[(size_t)cc * stride]);
		for (int o = 16; o > 0; o >>= 1)
			m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
		for (int cc = lane; cc < used; cc += 32) {
			float e = expf(ph[(size_t)cc * stride] - m);

			w[cc] = e;
			l = fmaf(e, ph[(size_t)cc * stride + 1], l);
		}
		l = fg_warp_sum(l);
		if (lane == 0)
			sl[warp] = l;
	}
	__syncthreads();
	int e = e0 + threadIdx.x;

	if (e < e1) {
		int h = e / head_dim, i = e - h * head_dim;
		const float *ph = pg + (size_t)h * nch * stride + 2 + i;
		const float *w = sw + (h - h0) * nch;
		float acc = 0.0f;

#pragma unroll 16
		for (int cc = 0; cc < used; cc++)
			acc = fmaf(w[cc], ph[(size_t)cc * stride], acc);
		out[((size_t)(r0 + x) * kvh + g) * qn + e] = acc / sl[h - h0];
	}
}

/* The chunk's attention over the positions the chunk uses (chunks of keys
 * as the decode launch cuts cap, the grid only as deep as the newest row
 * needs, or the whole cache when the position comes from d_pos0 at run
 * time: blocks past a row's keys return at once): attn_fused<false, true>
 * then attn_pre_combine, the rows in launches whose partial sums fit the
 * scratch. */
static int attn_prefill(struct fg_kctx *ctx, float *d_out, const float *d_q, size_t q_row, const float *d_knew,
			const float *d_vnew, size_t kv_row, const float *d_kcache, const float *d_vcache, int rows,
			int heads, int kv_heads, int head_dim, int cap, int pos0, const int32_t *d_pos0, float scale,
			struct fg_err *err)
{
	int chunk, nch, nchu, nvmax, grp, spn, per, nz;
	size_t smem, row_bytes;
	struct attn_post none = {};
	attn_kernel k = attn_fused<false, true>;

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (!attn_shape_ok(heads, kv_heads, head_dim, cap) || rows < 1 || pos0 < 0 || pos0 > 0x7fffffff - rows ||
	    q_row < (size_t)heads * head_dim || kv_row < (size_t)kv_heads * head_dim || !d_out || !d_q || !d_knew ||
	    !d_vnew || ((pos0 > 0 || d_pos0) && (!d_kcache || !d_vcache)))
		return fg_err_set(err, FG_EINVAL,
				  "chunk attention: %d rows at %d, heads %d, kv heads %d, head_dim %d, cap %d, "
				  "q row %zu, kv row %zu floats (at most %d heads per kv head)",
				  rows, pos0, heads, kv_heads, head_dim, cap, q_row, kv_row, ATT_MAX_GRP);
	chunk = attn_chunk(cap, &nch); /* attn_launch's partition of the cache */
	grp = heads / kv_heads;
	nvmax = d_pos0 || pos0 + rows >= cap ? cap : pos0 + rows;
	nchu = (nvmax + chunk - 1) / chunk;
	spn = chunk > nchu ? chunk : nchu;
	nz = (grp * head_dim + ATT_THREADS - 1) / ATT_THREADS;
	/* q rows, scores, then two key-row addresses per key (8-byte aligned) */
	smem = sizeof(float) * (((size_t)grp * head_dim + (size_t)grp * spn + 1) & ~(size_t)1) +
	       2 * sizeof(float *) * (size_t)spn;
	row_bytes = (size_t)heads * nchu * (head_dim + 2) * sizeof(float);
	per = (int)(ctx->scratch_bytes / row_bytes);
	if (per > 65535)
		per = 65535;
	if (per < 1)
		return fg_err_set(err, FG_EINVAL, "chunk attention: %d chunks of keys too many for scratch", nchu);
	if (smem > 48 * 1024) {
		cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);

		if (e != cudaSuccess) {
			cudaGetLastError();
			return fg_err_set(err, FG_EINVAL, "chunk attention: %zu bytes of shared memory: %s", smem,
					  cudaGetErrorString(e));
		}
	}
	for (int r0 = 0; r0 < rows; r0 += per) {
		int n = rows - r0 < per ? rows - r0 : per;
		struct attn_pre pre = {d_knew, d_vnew, kv_row, q_row, pos0, r0, d_pos0};

		fg_launch_pdl(ctx, k, dim3(n, kv_heads, nchu), dim3(ATT_THREADS), smem, d_out, (float *)ctx->scratch,
			      ctx->counters, d_q, d_kcache, d_vcache, grp, head_dim, cap, (const int32_t *)NULL, scale,
			      chunk, nchu, 0, 0, 0, r0 ? fg_kpf() : fg_pf_take(ctx), none, pre);
		if (fg_launched("chunk attention", err))
			return err->code;
		fg_launch_pdl(ctx, attn_pre_combine, dim3(n, kv_heads, nz), dim3(ATT_THREADS),
			      sizeof(float) * ATT_WARPS * (size_t)nchu, d_out, (const float *)ctx->scratch, grp, head_dim,
			      cap, pos0, r0, chunk, nchu, d_pos0);
		if (fg_launched("chunk attention combine", err))
			return err->code;
	}
	return 0;
}

extern "C" int fg_k_attn_prefill(struct fg_kctx *ctx, float *d_out, const float *d_q, size_t q_row,
				 const float *d_knew, const float *d_vnew, size_t kv_row, const float *d_kcache,
				 const float *d_vcache, int rows, int heads, int kv_heads, int head_dim, int cap,
				 int pos0, float scale, struct fg_err *err)
{
	return attn_prefill(ctx, d_out, d_q, q_row, d_knew, d_vnew, kv_row, d_kcache, d_vcache, rows, heads, kv_heads,
			    head_dim, cap, pos0, NULL, scale, err);
}

extern "C" int fg_k_attn_prefill_at(struct fg_kctx *ctx, float *d_out, const float *d_q, size_t q_row,
				    const float *d_knew, const float *d_vnew, size_t kv_row, const float *d_kcache,
				    const float *d_vcache, int rows, int heads, int kv_heads, int head_dim, int cap,
				    const int32_t *d_pos0, float scale, struct fg_err *err)
{
	if (!d_pos0)
		return fg_err_set(err, FG_EINVAL, "chunk attention: no position");
	return attn_prefill(ctx, d_out, d_q, q_row, d_knew, d_vnew, kv_row, d_kcache, d_vcache, rows, heads, kv_heads,
			    head_dim, cap, 0, d_pos0, scale, err);
}

/* ---- softcap + argmax --------------------------------------------------------*/

#define AM_THREADS 256
#define AM_BLOCKS_MAX 1024

/* (v, i) beats (bv, bi): larger value, or equal value and lower index; NaN never
 * wins. A total order, so the result does not depend on the reduction order. */
__device__ __forceinline__ bool beats(float v, int i, float bv, int bi)
{
	if (v != v)
		return false;
	if (bi < 0 || bv != bv)
		return true;
	return v > bv || (v == bv && i < bi);
}

__device__ void block_best(float *v, int *i, float *sv, int *si)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;

	for (int o = 16; o > 0; o >>= 1) {
		float ov = __shfl_xor_sync(0xffffffffu, *v, o);
		int oi = __shfl_xor_sync(0xffffffffu, *i, o);

		if (oi >= 0 && beats(ov, oi, *v, *i)) {
			*v = ov;
			*i = oi;
		}
	}
	if (lane == 0) {
		sv[warp] = *v;
		si[warp] = *i;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int w = 1; w < nw; w++)
			if (si[w] >= 0 && beats(sv[w], si[w], *v, *i)) {
				*v = sv[w];
				*i = si[w];
			}
	}
}

__global__ void softcap_best(float *pv, int *pi, float *z, int n, float cap)
{
	fg_pdl_trigger(); /* the next kernel may launch and wait for us */
	fg_pdl_wait();    /* everything earlier kernels wrote is visible */
	__shared__ float sv[32];
	__shared__ int si[32];
	float bv = -INFINITY;
	int bi = -1;

	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		float v = z[i];

		if (cap > 0.0f) {
			v = cap * tanhf(v / cap);
			z[i] = v;
		}
		if (beats(v, i, bv, bi)) {
			bv = v;
			bi = i;
		}
	}
	block_best(&bv, &bi, sv, si);
	if (threadIdx.x == 0) {
		pv[blockIdx.x] = bv;
		pi[blockIdx.x] = bi;
	}
}

__global__ void best_final(int32_t *best, const float *pv, const int *pi, int nb, const int32_t *ids,
			   const struct fg_kchain ch)
{
	fg_pdl_trigger(); /* the next kernel may launch and wait for us */
	fg_pdl_wait();    /* everything earlier kernels wrote is visible */
	__shared__ float sv[32];
	__shared__ int si[32];
	float bv = -INFINITY;
	int bi = -1;

	for (int b = threadIdx.x; b < nb; b += blockDim.x)
		if (pi[b] >= 0 && beats(pv[b], pi[b], bv, bi)) {
			bv = pv[b];
			bi = pi[b];
		}
	block_best(&bv, &bi, sv, si);
	if (threadIdx.x == 0) {
		int32_t t = bi < 0 ? -1 : ids ? ids[bi] : bi;

		*best = t;
		if (ch.idpos) { /* fg_kctx_chain: the next step's input, as the host makes it */
			int32_t pos = ch.idpos[1];

			t = t < 0 ? 0 : t; /* every logit NaN: fg_engine_argmax's answer */
			ch.ring[pos & ch.mask] = t;
			for (int i = 0; i < ch.n_mm; i++)
				if (t == ch.mm[i])
					t = ch.pad; /* fg_g4_input_id: a multimodal placeholder embeds as pad */
			ch.idpos[0] = t;
			ch.idpos[1] = pos + 1;
		}
	}
}

extern "C" int fg_k_softcap_argmax(struct fg_kctx *ctx, int32_t *d_best, float *d_z, const int32_t *d_ids, int n,
				   float cap, struct fg_err *err)
{
	int nb;
	struct fg_kchain ch;

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	ch = ctx->chain; /* fg_kctx_chain's, for this launch only */
	ctx->chain = fg_kchain();
	if (n < 1 || n >= (1 << 30))
		return fg_err_set(err, FG_EINVAL, "softcap argmax: n = %d", n);
	nb = (n + AM_THREADS * 8 - 1) / (AM_THREADS * 8);
	if (nb > AM_BLOCKS_MAX)
		nb = AM_BLOCKS_MAX;
	float *pv = (float *)ctx->scratch;
	int *pi = (int *)(pv + AM_BLOCKS_MAX);
	fg_launch_pdl(ctx, softcap_best, dim3(nb), dim3(AM_THREADS), 0, pv, pi, d_z, n, cap);
	if (fg_launched("softcap argmax", err))
		return FG_EDEVICE;
	fg_launch_pdl(ctx, best_final, dim3(1), dim3(AM_THREADS), 0, d_best, pv, pi, nb, d_ids, ch);
	return fg_launched("argmax final", err);
}

/* ---- log-probabilities of rows -------------------------------------------------
 *
 * Three launches over rows x blocks, each block a slice of LP_SLICE columns:
 * lp_part (slice maximum, the columns above the wanted one, the slice's k
 * best by repeated block argmax: each round takes the best after the last
 * one taken in the row's total order, so nothing is marked), lp_sum (expf(z
 * - row max) summed in double over the slice), lp_final (one block a row:
 * the slices' sums in a fixed tree, the top k of the slices' lists). */

#define LP_THREADS 256
#define LP_SLICE 2048

/* the row's maximum from the nb slice maxima, in every thread */
__device__ float lp_row_max(const float *pm, int nb, float *sf)
{
	float m = -INFINITY;

	for (int b = threadIdx.x; b < nb; b += blockDim.x)
		m = fmaxf(m, pm[b]);
	for (int o = 16; o > 0; o >>= 1)
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
	if ((threadIdx.x & 31) == 0)
		sf[threadIdx.x >> 5] = m;
	__syncthreads();
	m = sf[0];
	for (int w = 1; w < (int)(blockDim.x >> 5); w++)
		m = fmaxf(m, sf[w]);
	__syncthreads();
	return m;
}

/* a block's double sum in a fixed order, in thread 0 */
__device__ double lp_block_sum(double s, double *sd)
{
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	if ((threadIdx.x & 31) == 0)
		sd[threadIdx.x >> 5] = s;
	__syncthreads();
	if (threadIdx.x == 0)
		for (int w = 1; w < (int)(blockDim.x >> 5); w++)
			s += sd[w];
	return s;
}

/* The k best candidates in the row's order into ov/og; returns how many
 * (every thread). Candidates c < nc: with per 0, value v[c] and id g[c]
 * (g NULL: g0 + c); else c is entry c % per of list c / per (lists per
 * apart), of which only the first cnt[list] count. */
__device__ int lp_block_topk(const float *v, const int *g, int g0, int nc, int per, const int *cnt, int k,
			     float *ov, int *og, float *sv, int *si)
{
	__shared__ float pv;
	__shared__ int pg, got;
	int t;

	for (t = 0; t < k; t++) {
		float bv = -INFINITY;
		int bi = -1;

		for (int c = threadIdx.x; c < nc; c += blockDim.x) {
			float x;
			int id;

			if (per && c % per >= cnt[c / per])
				continue;
			x = v[c];
			id = g ? g[c] : g0 + c;
			if (t > 0 && !beats(pv, pg, x, id))
				continue; /* taken in an earlier round */
			if (beats(x, id, bv, bi)) {
				bv = x;
				bi = id;
			}
		}
		block_best(&bv, &bi, sv, si);
		if (threadIdx.x == 0) {
			pv = bv;
			pg = bi;
			if (bi >= 0) {
				ov[t] = bv;
				og[t] = bi;
			}
		}
		__syncthreads();
		if (pg < 0)
			break;
	}
	if (threadIdx.x == 0)
		got = t;
	__syncthreads();
	return got;
}

__global__ void __launch_bounds__(LP_THREADS) lp_part(const float *z, size_t stride, int n, const int32_t *ids,
						       const int32_t *want, int k, int nb, float *pm, int *pc, float *ptv,
						       int *pti, int *ptn)
{
	fg_pdl_trigger();
	fg_pdl_wait();
	__shared__ float sv[32];
	__shared__ int si[32];
	__shared__ int sc[32];
	int row = blockIdx.y, b = blockIdx.x, lo = b * LP_SLICE, hi = min(n, lo + LP_SLICE);
	const float *zr = z + (size_t)row * stride;
	size_t pb = (size_t)row * nb + b;
	float m = -INFINITY, zw = INFINITY;
	int cnt = 0;

	if (want)
		zw = want[row] >= 0 ? zr[want[row]] : -INFINITY;
	for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
		float x = zr[i];

		if (x > m)
			m = x;
		cnt += x > zw;
	}
	for (int o = 16; o > 0; o >>= 1) {
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
		cnt += __shfl_xor_sync(0xffffffffu, cnt, o);
	}
	if ((threadIdx.x & 31) == 0) {
		sv[threadIdx.x >> 5] = m;
		sc[threadIdx.x >> 5] = cnt;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int w = 1; w < (int)(blockDim.x >> 5); w++) {
			m = fmaxf(m, sv[w]);
			cnt += sc[w];
		}
		pm[pb] = m;
		pc[pb] = cnt;
	}
	__syncthreads();
	if (k > 0) {
		int got = lp_block_topk(zr + lo, ids ? ids + lo : NULL, lo, hi - lo, 0, NULL, k, ptv + pb * k,
					pti + pb * k, sv, si);

		if (threadIdx.x == 0)
			ptn[pb] = got;
	}
}

__global__ void __launch_bounds__(LP_THREADS) lp_sum(const float *z, size_t stride, int n, int nb, const float *pm,
						      double *ps)
{
	fg_pdl_trigger();
	fg_pdl_wait();
	__shared__ float sf[32];
	__shared__ double sd[32];
	int row = blockIdx.y, b = blockIdx.x, lo = b * LP_SLICE, hi = min(n, lo + LP_SLICE);
	const float *zr = z + (size_t)row * stride;
	float m = lp_row_max(pm + (size_t)row * nb, nb, sf);
	double s = 0;

	for (int i = lo + threadIdx.x; i < hi; i += blockDim.x)
		s += (double)expf(zr[i] - m);
	s = lp_block_sum(s, sd);
	if (threadIdx.x == 0)
		ps[(size_t)row * nb + b] = s;
}

__global__ void __launch_bounds__(LP_THREADS) lp_final(struct fg_klp *out, const float *z, size_t stride,
							const int32_t *want, int k, int nb, const float *pm,
							const int *pc, const double *ps, const float *ptv, const int *pti,
							const int *ptn)
{
	fg_pdl_trigger();
	fg_pdl_wait();
	__shared__ float sf[32], sv[32], tv[FG_K_LP_TOP_MAX];
	__shared__ int si[32], ti[FG_K_LP_TOP_MAX];
	__shared__ double sd[32];
	__shared__ int sc[32];
	int row = blockIdx.x;
	size_t p0 = (size_t)row * nb;
	float m = lp_row_max(pm + p0, nb, sf);
	double s = 0;
	int cnt = 0, got;

	for (int b = threadIdx.x; b < nb; b += blockDim.x) {
		s += ps[p0 + b];
		cnt += pc[p0 + b];
	}
	s = lp_block_sum(s, sd);
	for (int o = 16; o > 0; o >>= 1)
		cnt += __shfl_xor_sync(0xffffffffu, cnt, o);
	if ((threadIdx.x & 31) == 0)
		sc[threadIdx.x >> 5] = cnt;
	__syncthreads();
	got = lp_block_topk(ptv + p0 * k, pti + p0 * k, 0, nb * k, k, ptn + p0, k, tv, ti, sv, si);
	if (threadIdx.x == 0) {
		struct fg_klp *o = &out[row];
		const float *zr = z + (size_t)row * stride;
		double lse;
		float zw;

		for (int w = 1; w < (int)(blockDim.x >> 5); w++)
			cnt += sc[w];
		lse = (double)m + log(s);
		zw = !want ? m : want[row] >= 0 ? zr[want[row]] : -INFINITY;
		o->lse = lse;
		o->lp = (float)((double)zw - lse);
		o->rank = want ? 1 + cnt : 1;
		o->n_top = got;
		o->pad_ = 0;
		for (int t = 0; t < FG_K_LP_TOP_MAX; t++) {
			o->top_id[t] = t < got ? ti[t] : -1;
			o->top_lp[t] = t < got ? (float)((double)tv[t] - lse) : 0.0f;
		}
	}
}

extern "C" int fg_k_row_logprobs(struct fg_kctx *ctx, struct fg_klp *d_out, const float *d_z, size_t stride, int rows,
				 const int32_t *d_ids, int n, const int32_t *d_want, int k, struct fg_err *err)
{
	int nb;
	size_t need;

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n < 1 || n >= (1 << 30) || rows < 1 || rows > FG_K_LP_ROWS_MAX || k < 0 || k > FG_K_LP_TOP_MAX ||
	    (rows > 1 && stride < (size_t)n))
		return fg_err_set(err, FG_EINVAL, "row log-probabilities: %d rows of %d, stride %zu, top %d", rows, n,
				  stride, k);
	nb = (n + LP_SLICE - 1) / LP_SLICE;
	/* per row and slice: max, count, sum, then k values, ids and a count */
	size_t cells = (size_t)rows * nb;
	char *sp = (char *)ctx->scratch;
	double *ps = (double *)sp;
	float *pm = (float *)(ps + cells);
	int *pc = (int *)(pm + cells);
	int *ptn = pc + cells;
	float *ptv = (float *)(ptn + cells);
	int *pti = (int *)(ptv + cells * (k ? k : 1));
	need = (size_t)((char *)(pti + cells * (k ? k : 1)) - sp);
	if (need > ctx->scratch_bytes)
		return fg_err_set(err, FG_EINVAL, "row log-probabilities: %d rows of %d need %zu bytes of scratch", rows,
				  n, need);
	fg_launch_pdl(ctx, lp_part, dim3(nb, rows), dim3(LP_THREADS), 0, d_z, stride, n, d_ids, d_want, k, nb, pm, pc,
		      ptv, pti, ptn);
	if (fg_launched("log-probabilities (slices)", err))
		return FG_EDEVICE;
	fg_launch_pdl(ctx, lp_sum, dim3(nb, rows), dim3(LP_THREADS), 0, d_z, stride, n, nb, (const float *)pm, ps);
	if (fg_launched("log-probabilities (sums)", err))
		return FG_EDEVICE;
	fg_launch_pdl(ctx, lp_final, dim3(rows), dim3(LP_THREADS), 0, d_out, d_z, stride, d_want, k, nb,
		      (const float *)pm, (const int *)pc, (const double *)ps, (const float *)ptv, (const int *)pti,
		      (const int *)ptn);
	return fg_launched("log-probabilities (rows)", err);
}

/* ---- read bandwidth probe ------------------------------------------------------*/

__global__ void read_sweep(uint32_t *sink, const uint4 *__restrict__ p, size_t n16)
{
	uint32_t acc = 0;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
		uint4 v = __ldcs(p + i);

		acc ^= v.x ^ v.y ^ v.z ^ v.w;
	}
	if (acc == 0x9e3779b9u) /* practically never: keeps the loads alive */
		sink[0] = acc;
}

/* One matrix's share of the step's read floor: loads issued before the
 * dependency wait, as the matvecs issue theirs, RF_U 16-byte loads in flight
 * per thread, the checksum written after the wait. */
#define RF_U 8
__global__ void __launch_bounds__(256) read_floor(uint32_t *sink, const uint4 *__restrict__ p, size_t n16)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	uint32_t acc = 0;

	fg_pdl_trigger();
	for (; i + (RF_U - 1) * stride < n16; i += RF_U * stride) {
		uint4 v[RF_U];

#pragma unroll
		for (int u = 0; u < RF_U; u++)
			v[u] = __ldcs(p + i + u * stride);
#pragma unroll
		for (int u = 0; u < RF_U; u++)
			acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
	}
	for (; i < n16; i += stride) {
		uint4 v = __ldcs(p + i);

		acc ^= v.x ^ v.y ^ v.z ^ v.w;
	}
	fg_pdl_wait();
	if (acc == 0x9e3779b9u)
		sink[0] = acc;
}

extern "C" int fg_k_read_floor(struct fg_kctx *ctx, uint32_t *d_sink, const void *d_buf, size_t n, int blocks,
			       struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n % 16 || (uintptr_t)d_buf % 16 || blocks < 1)
		return fg_err_set(err, FG_EINVAL, "read floor: %zu bytes, %d blocks", n, blocks);
	fg_launch_pdl(ctx, read_floor, dim3(blocks), dim3(256), 0, d_sink, (const uint4 *)d_buf, n / 16);
	return fg_launched("read floor", err);
}

extern "C" int fg_k_read(struct fg_kctx *ctx, uint32_t *d_sink, const void *d_buf, size_t n, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n % 16 || (uintptr_t)d_buf % 16)
		return fg_err_set(err, FG_EINVAL, "read sweep: %zu bytes, need a multiple of 16, aligned", n);
	read_sweep<<<ctx->prop.multiProcessorCount * 8, 256, 0, ctx->stream>>>(d_sink, (const uint4 *)d_buf, n / 16);
	return fg_launched("read sweep", err);
}

FG_KTRACE_TU(ops)
