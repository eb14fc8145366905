/* int4.cu - INT4 (group 32..256) matrix times 1..8 fp32 vectors on the tile layout
 * of fg_kernels.h (decode M = 1, speculative verify M <= 8).
 *
 * A block owns one tile of 32 rows and one K slice; its 8 warps take the
 * slice's 32-element chunks in turn. For a chunk, lane r loads row r's 16
 * bytes (the warp reads 512 contiguous bytes) and all lanes read the same 32
 * activations from shared memory (a broadcast). Dequantization without
 * integer-to-float conversions: (w & (15 << 4i)) | 0x4B000000 is the float
 * 2^23 + n * 16^i exactly, so one subtraction of 2^23 + 8 * 16^i gives
 * (n - 8) * 16^i, accumulated per nibble position i in its own fp32 sum and
 * scaled back by 16^-i once per chunk (powers of two: exact). Nibbles 5..7 are
 * shifted down by 20 bits first and join the sums of positions 0..2.
 *
 * Programmatic dependent launch (sm_90): the kernel may start while the one
 * before it in the stream still runs; it loads its first weights, then waits
 * (griddepcontrol.wait) before touching activations, outputs or counters.
 *
 * K splits: when there are too few tiles to fill the GPU, blockIdx.y splits K;
 * each split writes its partial, and the last block of a tile to finish (an
 * integer counter) adds the partials in split order: no float atomics, the
 * same bits every run. */
#include <stdlib.h>

#include "kernels/kcommon.cuh"

#define WARPS 8
#define UNROLL 8 /* chunks each lane has in flight: 128 bytes */
#define SMEM_FLOATS (36 * 1024 / 4) /* activations staged per block (dynamic; + 8 KB static <= 48 KB) */

__device__ __forceinline__ float nib(uint32_t w, uint32_t mask, float bias)
{
	return __uint_as_float((w & mask) | 0x4B000000u) - bias;
}

/* Accumulates one word (8 elements at x) into the five position sums. */
template <int M>
__device__ __forceinline__ void word(uint32_t w, const float *x, int xstride, float (*a)[5])
{
	const float B0 = 8388608.0f + 8.0f, B1 = 8388608.0f + 128.0f, B2 = 8388608.0f + 2048.0f;
	const float B3 = 8388608.0f + 32768.0f, B4 = 8388608.0f + 524288.0f;
	uint32_t h = w >> 20;
	float v0 = nib(w, 0xFu, B0), v1 = nib(w, 0xF0u, B1), v2 = nib(w, 0xF00u, B2);
	float v3 = nib(w, 0xF000u, B3), v4 = nib(w, 0xF0000u, B4);
	float v5 = nib(h, 0xFu, B0), v6 = nib(h, 0xF0u, B1), v7 = nib(h, 0xF00u, B2);

#pragma unroll
	for (int m = 0; m < M; m++) {
		float4 xa = *(const float4 *)(x + m * xstride);
		float4 xb = *(const float4 *)(x + m * xstride + 4);

		a[m][0] = fmaf(v0, xa.x, a[m][0]);
		a[m][1] = fmaf(v1, xa.y, a[m][1]);
		a[m][2] = fmaf(v2, xa.z, a[m][2]);
		a[m][3] = fmaf(v3, xa.w, a[m][3]);
		a[m][4] = fmaf(v4, xb.x, a[m][4]);
		a[m][0] = fmaf(v5, xb.y, a[m][0]);
		a[m][1] = fmaf(v6, xb.z, a[m][1]);
		a[m][2] = fmaf(v7, xb.w, a[m][2]);
	}
}

/* GG: the input is gelu_tanh(x) * x2 (GeGLU fused into the staging), M = 1 */
template <int M, bool GG>
__global__ void __launch_bounds__(WARPS * 32) int4_matvec(float *__restrict__ y, const uint4 *__restrict__ words,
							  const uint16_t *__restrict__ scales,
							  const float *__restrict__ x, const float *__restrict__ x2,
							  float *__restrict__ partial,
							  unsigned *__restrict__ counters, int n, int k, int kc, int gc,
							  int gshift, int slice, int splits, int npad)
{
	extern __shared__ __align__(16) float sx[]; /* [M][slice * 32] */
	__shared__ float red[WARPS][M][32];
	__shared__ int last;
	int tile = blockIdx.x, s = blockIdx.y;
	int c0 = s * slice, c1 = min(kc, c0 + slice);
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int len = (c1 - c0) * 32, xs = slice * 32;
	const uint4 *wp = words + (size_t)tile * kc * 32 + lane;
	const uint16_t *sp = scales + (size_t)tile * gc * 32 + lane;
	uint4 w[UNROLL];
	float sc[UNROLL], acc[M];

	fg_pdl_trigger();
	/* The weights do not depend on earlier kernels: start loading the first
	 * batch before waiting for the kernel that writes x (programmatic
	 * dependent launch lets this block run while that one finishes). */
#pragma unroll
	for (int u = 0; u < UNROLL; u++) {
		int cc = c0 + warp + u * WARPS;

		if (cc < c1) {
			w[u] = __ldcs(wp + (size_t)cc * 32);
			sc[u] = fg_bf16f(__ldg(sp + (size_t)(cc >> gshift) * 32));
		}
	}
	fg_pdl_wait();
	/* this slice's activations, zero past k (padding weights are q = 0 too) */
	for (int m = 0; m < M; m++)
		for (int i = threadIdx.x; i < len; i += WARPS * 32) {
			int e = c0 * 32 + i;

			float v = 0.0f;

			if (e < k)
				v = GG ? fg_gelu_tanh(x[e]) * x2[e] : x[(size_t)m * k + e];
			sx[m * xs + i] = v;
		}
	__syncthreads();
#pragma unroll
	for (int m = 0; m < M; m++)
		acc[m] = 0.0f;
	for (int c = c0 + warp; c < c1; c += WARPS * UNROLL) {
		if (c != c0 + warp) {
#pragma unroll
			for (int u = 0; u < UNROLL; u++) {
				int cc = c + u * WARPS;

				if (cc < c1) {
					w[u] = __ldcs(wp + (size_t)cc * 32);
					sc[u] = fg_bf16f(__ldg(sp + (size_t)(cc >> gshift) * 32));
				}
			}
		}
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			int cc = c + u * WARPS;

			if (cc < c1) {
				const float *xc = sx + (cc - c0) * 32;
				float a[M][5];

#pragma unroll
				for (int m = 0; m < M; m++)
#pragma unroll
					for (int i = 0; i < 5; i++)
						a[m][i] = 0.0f;
				word<M>(w[u].x, xc, xs, a);
				word<M>(w[u].y, xc + 8, xs, a);
				word<M>(w[u].z, xc + 16, xs, a);
				word<M>(w[u].w, xc + 24, xs, a);
#pragma unroll
				for (int m = 0; m < M; m++) {
					float t = a[m][0] + a[m][1] * 0.0625f + a[m][2] * 0.00390625f +
						  a[m][3] * 0.000244140625f + a[m][4] * 0.0000152587890625f;

					acc[m] = fmaf(t, sc[u], acc[m]);
				}
			}
		}
	}
#pragma unroll
	for (int m = 0; m < M; m++)
		red[warp][m][lane] = acc[m];
	__syncthreads();
	if (threadIdx.x < M * 32) {
		int m = threadIdx.x >> 5, r = threadIdx.x & 31, row = tile * 32 + r;
		float t = 0.0f;

		for (int v = 0; v < WARPS; v++)
			t += red[v][m][r];
		if (splits == 1) {
			if (row < n)
				y[(size_t)m * n + row] = t;
		} else {
			partial[((size_t)s * M + m) * npad + row] = t;
			__threadfence();
		}
	}
	if (splits == 1)
		return;
	__syncthreads();
	if (threadIdx.x == 0)
		last = atomicAdd(&counters[tile], 1u) == (unsigned)(splits - 1);
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	if (threadIdx.x < M * 32) {
		int m = threadIdx.x >> 5, r = threadIdx.x & 31, row = tile * 32 + r;
		float t = 0.0f;

		for (int v = 0; v < splits; v++)
			t += __ldcg(partial + ((size_t)v * M + m) * npad + row);
		if (row < n)
			y[(size_t)m * n + row] = t;
	}
	if (threadIdx.x == 0)
		counters[tile] = 0; /* ready for the next launch (stream-ordered) */
}

/* Splits and slice length (in 32-element chunks) for a launch with m vectors. */
static void plan(const struct fg_kint4 *w, int m, int *splits, int *slice)
{
	int kc = w->kpad / 32;
	int max_slice = SMEM_FLOATS / 32 / m; /* chunks of m activations that fit shared memory */
	int s = w->splits;
	int min_s = (kc + max_slice - 1) / max_slice;

	if (s < min_s)
		s = min_s;
	*slice = (kc + s - 1) / s;
	*splits = (kc + *slice - 1) / *slice;
}

static int max_splits(int kc, int splits)
{
	int min_s = (kc + (SMEM_FLOATS / 32 / FG_INT4_MAX_M) - 1) / (SMEM_FLOATS / 32 / FG_INT4_MAX_M);

	return splits > min_s ? splits : min_s;
}

extern "C" int fg_kint4_new(struct fg_kctx *ctx, struct fg_kint4 **out, const int32_t *packed,
			    const uint16_t *scale_bf16, int n, int k, int group, int splits, struct fg_err *err)
{
	struct fg_kint4 *w;
	size_t wb, sb;
	uint32_t *hw = NULL;
	uint16_t *hs = NULL;
	int rc, kc;

	*out = NULL;
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n < 1 || k < 8 || k % 8)
		return fg_err_set(err, FG_EINVAL, "int4 matrix %d x %d: need n >= 1 and k a positive multiple of 8", n, k);
	if (group != 32 && group != 64 && group != 128 && group != 256)
		return fg_err_set(err, FG_EUNSUPPORTED, "int4 group size %d: the kernels take 32, 64, 128 or 256", group);
	fg_int4_layout_size(&wb, &sb, n, k, group);
	w = (struct fg_kint4 *)calloc(1, sizeof(*w));
	hw = (uint32_t *)malloc(wb);
	hs = (uint16_t *)malloc(sb);
	if (!w || !hw || !hs) {
		free(w);
		free(hw);
		free(hs);
		return fg_err_set(err, FG_ENOMEM, "out of memory repacking a %d x %d int4 matrix", n, k);
	}
	w->n = n;
	w->k = k;
	w->group = group;
	w->kpad = (k + group - 1) / group * group;
	w->tiles = (n + 31) / 32;
	kc = w->kpad / 32;
	if (splits <= 0) {
		/* enough blocks for ~4 per SM, but at least 2 chunks per warp */
		int target = 4 * fg_kctx_sm_count(ctx);

		splits = (target + w->tiles - 1) / w->tiles;
		if (splits > kc / (2 * WARPS))
			splits = kc / (2 * WARPS);
		if (splits < 1)
			splits = 1;
	}
	w->splits = splits;
	rc = fg_int4_repack(hw, hs, packed, scale_bf16, n, k, group, err);
	if (!rc)
		rc = fg_kmem_alloc(ctx, (void **)&w->d_words, wb, err);
	if (!rc)
		rc = fg_kmem_alloc(ctx, (void **)&w->d_scales, sb, err);
	if (!rc)
		rc = fg_kmem_alloc(ctx, (void **)&w->d_counters, sizeof(uint32_t) * w->tiles, err);
	if (!rc)
		rc = fg_kmem_alloc(ctx, (void **)&w->d_partial,
				   sizeof(float) * (size_t)max_splits(kc, splits) * FG_INT4_MAX_M * w->tiles * 32, err);
	if (!rc)
		rc = fg_kmem_upload(ctx, w->d_words, hw, wb, err);
	if (!rc)
		rc = fg_kmem_upload(ctx, w->d_scales, hs, sb, err);
	if (!rc)
		rc = fg_kmem_fill(ctx, w->d_counters, 0, sizeof(uint32_t) * w->tiles, err);
	if (!rc)
		rc = fg_kctx_sync(ctx, err);
	free(hw);
	free(hs);
	if (rc) {
		fg_kint4_free(ctx, w);
		return rc;
	}
	*out = w;
	return 0;
}

extern "C" void fg_kint4_free(struct fg_kctx *ctx, struct fg_kint4 *w)
{
	if (!w)
		return;
	fg_kmem_free(ctx, w->d_words);
	fg_kmem_free(ctx, w->d_scales);
	fg_kmem_free(ctx, w->d_counters);
	fg_kmem_free(ctx, w->d_partial);
	free(w);
}

static int gshift(int group)
{
	return group == 32 ? 0 : group == 64 ? 1 : group == 128 ? 2 : 3;
}

template <int M, bool GG = false>
static cudaError_t launch(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			  const float *d_x2 = NULL)
{
	int splits, slice, kc = w->kpad / 32;
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];

	plan(w, M, &splits, &slice);
	cfg.gridDim = dim3(w->tiles, splits);
	cfg.blockDim = dim3(WARPS * 32);
	cfg.dynamicSmemBytes = sizeof(float) * M * slice * 32;
	cfg.stream = ctx->stream;
	at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[0].val.programmaticStreamSerializationAllowed = 1;
	cfg.attrs = at;
	cfg.numAttrs = ctx->pdl ? 1 : 0;
	return cudaLaunchKernelEx(&cfg, int4_matvec<M, GG>, d_y, (const uint4 *)w->d_words,
				  (const uint16_t *)w->d_scales, d_x, d_x2, w->d_partial, (unsigned *)w->d_counters, w->n, w->k, kc,
				  w->kpad / w->group, gshift(w->group), slice, splits, w->tiles * 32);
}

extern "C" int fg_k_int4_matvec(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x, int m,
				struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (!w || m < 1 || m > FG_INT4_MAX_M)
		return fg_err_set(err, FG_EINVAL, "int4 matvec: m = %d, need 1..%d", m, FG_INT4_MAX_M);
	cudaError_t e;

	switch (m) {
	case 1: e = launch<1>(ctx, d_y, w, d_x); break;
	case 2: e = launch<2>(ctx, d_y, w, d_x); break;
	case 3: e = launch<3>(ctx, d_y, w, d_x); break;
	case 4: e = launch<4>(ctx, d_y, w, d_x); break;
	case 5: e = launch<5>(ctx, d_y, w, d_x); break;
	case 6: e = launch<6>(ctx, d_y, w, d_x); break;
	case 7: e = launch<7>(ctx, d_y, w, d_x); break;
	default: e = launch<8>(ctx, d_y, w, d_x); break;
	}
	if (e != cudaSuccess) {
		cudaGetLastError();
		return fg_err_set(err, FG_EDEVICE, "int4 matvec %d x %d, m %d: launch: %s", w->n, w->k, m,
				  cudaGetErrorString(e));
	}
	return fg_launched("int4 matvec", err);
}

extern "C" int fg_k_int4_matvec_geglu(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_gate,
				      const float *d_up, struct fg_err *err)
{
	cudaError_t e;

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (!w)
		return fg_err_set(err, FG_EINVAL, "int4 matvec: no matrix");
	e = launch<1, true>(ctx, d_y, w, d_gate, d_up);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return fg_err_set(err, FG_EDEVICE, "int4 geglu matvec %d x %d: launch: %s", w->n, w->k,
				  cudaGetErrorString(e));
	}
	return fg_launched("int4 geglu matvec", err);
}
