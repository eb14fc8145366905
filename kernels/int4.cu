/* int4.cu - INT4 (group 32..256) matrix times 1..8 fp32 vectors (decode
 * M = 1, speculative verify M <= 8), by one of two kernels, each on its own
 * layout (fg_kernels.h), chosen per matrix when it is made: a CUDA-core
 * kernel (fp32 dequantization and sums) and a tensor-core kernel (bf16 mma
 * on exact weights and a three-part bf16 split of the fp32 activations; for
 * M <= 2 the weights are mma's A operand, for M = 3..5 its B operand).
 *
 * CUDA-core kernel, tile layout: a block owns one tile of 32 rows and one K
 * slice; its 8 warps take the slice's 32-element chunks in turn. For a chunk,
 * lane r loads row r's 16 bytes (the warp reads 512 contiguous bytes) and all
 * lanes read the same 32 activations from shared memory (a broadcast).
 * Dequantization without integer-to-float conversions: (w & (15 << 4i)) |
 * 0x4B000000 is the float 2^23 + n * 16^i exactly, so one subtraction of 2^23
 * + 8 * 16^i gives (n - 8) * 16^i, accumulated per nibble position i in its
 * own fp32 sum and scaled back by 16^-i once per chunk (powers of two:
 * exact). Nibbles 5..7 are shifted down by 20 bits first and join the sums of
 * positions 0..2.
 *
 * Both kernels: programmatic dependent launch (sm_90) lets a kernel start
 * while the one before it in the stream still runs; it loads its first
 * weights, then waits (griddepcontrol.wait) before touching activations,
 * outputs or counters. When there are too few row groups to fill the GPU,
 * blockIdx.y splits K; each split writes its partial, and the last block of a
 * row group to finish (an integer counter) adds the partials in split order:
 * no float atomics, the same bits every run. */
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>

#include "kernels/kcommon.cuh"

/* ---- the CUDA-core kernel on the tile layout ----------------------------------*/

#define WARPS 8
#define UNROLL 8 /* chunks each lane has in flight: 128 bytes */
#define SMEM_FLOATS (36 * 1024 / 4) /* activations staged per block (dynamic; + 8 KB static <= 48 KB) */

/* (a & mask) | v as one LOP3: written as `&` then `|` with two constants,
 * the compiler emitted two logic instructions per weight (SASS takes one
 * 32-bit immediate per instruction); here v sits in a register. */
template <uint32_t MASK>
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t v)
{
	uint32_t r;

	asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(a), "n"(MASK), "r"(v));
	return r;
}

template <uint32_t MASK>
__device__ __forceinline__ float nib(uint32_t w, uint32_t magic, float bias)
{
	return __uint_as_float(and_or<MASK>(w, magic)) - bias;
}

/* Four activations from element e (a multiple of 4) on, zero at and past k
 * (a multiple of 8); GG: gelu_tanh(x) * x2. x and x2 are 16-byte aligned.
 * Staging loops issue STAGE_U of these before storing any, so a block waits
 * for one round trip to L2, not one per element. */
#define STAGE_U 4

template <bool GG>
__device__ __forceinline__ float4 in4(const float *x, const float *x2, int e, int k)
{
	float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

	if (e < k) {
		v = *(const float4 *)(x + e);
		if (GG) {
			float4 u = *(const float4 *)(x2 + e);

			v.x = fg_gelu_tanh(v.x) * u.x;
			v.y = fg_gelu_tanh(v.y) * u.y;
			v.z = fg_gelu_tanh(v.z) * u.z;
			v.w = fg_gelu_tanh(v.w) * u.w;
		}
	}
	return v;
}

/* Accumulates one word (8 elements at x) into the five position sums. */
template <int M>
__device__ __forceinline__ void word(uint32_t w, const float *x, int xstride, float (*a)[5])
{
	const float B0 = 8388608.0f + 8.0f, B1 = 8388608.0f + 128.0f, B2 = 8388608.0f + 2048.0f;
	const float B3 = 8388608.0f + 32768.0f, B4 = 8388608.0f + 524288.0f;
	const uint32_t MAG = 0x4B000000u;
	uint32_t h = w >> 20;
	float v0 = nib<0xFu>(w, MAG, B0), v1 = nib<0xF0u>(w, MAG, B1), v2 = nib<0xF00u>(w, MAG, B2);
	float v3 = nib<0xF000u>(w, MAG, B3), v4 = nib<0xF0000u>(w, MAG, B4);
	float v5 = nib<0xFu>(h, MAG, B0), v6 = nib<0xF0u>(h, MAG, B1), v7 = nib<0xF00u>(h, MAG, B2);

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
__global__ void __launch_bounds__(WARPS * 32) int4_fma(float *__restrict__ y, const uint4 *__restrict__ words,
							  const uint16_t *__restrict__ scales,
							  const float *__restrict__ x, const float *__restrict__ x2,
							  float *__restrict__ partial,
							  unsigned *__restrict__ counters, int n, int k, int kc, int gc,
							  int gshift, int slice, int splits, int npad,
							  const struct fg_kpf pf)
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
	fg_pf_issue(pf); /* a later kernel's weights into L2 (fg_kctx_prefetch) */
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
		for (int b = threadIdx.x * 4; b < len; b += WARPS * 32 * 4 * STAGE_U) {
			float4 v[STAGE_U];

#pragma unroll
			for (int u = 0; u < STAGE_U; u++)
				v[u] = in4<GG>(x + (size_t)m * k, x2, c0 * 32 + b + u * WARPS * 32 * 4, k);
#pragma unroll
			for (int u = 0; u < STAGE_U; u++)
				if (b + u * WARPS * 32 * 4 < len)
					*(float4 *)(sx + m * xs + b + u * WARPS * 32 * 4) = v[u];
		}
	__syncthreads();
#pragma unroll
	for (int m = 0; m < M; m++)
		acc[m] = 0.0f;
	for (int c = c0 + warp; c < c1; c += WARPS * UNROLL) {
		const uint4 *wc = wp + (size_t)c * 32; /* chunk c + j at wc + 32 j: an immediate offset */

#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			int cc = c + u * WARPS, cn = cc + WARPS * UNROLL;

			if (cc < c1) {
				const float *xc = sx + (cc - c0) * 32;
				uint4 cw = w[u];
				float cs = sc[u], a[M][5];

				if (cn < c1) { /* the chunk UNROLL rounds ahead, into the freed registers */
					w[u] = __ldcs(wc + (u * WARPS + WARPS * UNROLL) * 32);
					sc[u] = fg_bf16f(__ldg(sp + ((cn >> gshift) << 5)));
				}
#pragma unroll
				for (int m = 0; m < M; m++)
#pragma unroll
					for (int i = 0; i < 5; i++)
						a[m][i] = 0.0f;
				word<M>(cw.x, xc, xs, a);
				word<M>(cw.y, xc + 8, xs, a);
				word<M>(cw.z, xc + 16, xs, a);
				word<M>(cw.w, xc + 24, xs, a);
#pragma unroll
				for (int m = 0; m < M; m++) {
					float t = a[m][0] + a[m][1] * 0.0625f + a[m][2] * 0.00390625f +
						  a[m][3] * 0.000244140625f + a[m][4] * 0.0000152587890625f;

					acc[m] = fmaf(t, cs, acc[m]);
				}
			}
		}
	}
#pragma unroll
	for (int m = 0; m < M; m++)
		red[warp][m][lane] = acc[m];
	__syncthreads();
	for (int i = threadIdx.x; i < M * 32; i += WARPS * 32) { /* one pass while M <= WARPS */
		int m = i >> 5, r = i & 31, row = tile * 32 + r;
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
	for (int i = threadIdx.x; i < M * 32; i += WARPS * 32) {
		int m = i >> 5, r = i & 31, row = tile * 32 + r;
		float t = fg_split_sum(partial + (size_t)m * npad + row, (size_t)M * npad, splits);

		if (row < n)
			y[(size_t)m * n + row] = t;
	}
	if (threadIdx.x == 0)
		counters[tile] = 0; /* ready for the next launch (stream-ordered) */
}

/* Splits and slice length (in 32-element chunks) for a launch with m vectors. */
static void fma_plan(const struct fg_kint4 *w, int m, int *splits, int *slice)
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


/* The start and the end every layout shares (kcommon.cuh). */
int fg_kint4_start(struct fg_kint4 **w, uint32_t **hw, uint16_t **hs, size_t wb, size_t sb, int kind, int n, int k,
		   int group, struct fg_err *err)
{
	*w = (struct fg_kint4 *)calloc(1, sizeof(**w));
	*hw = (uint32_t *)malloc(wb);
	*hs = (uint16_t *)malloc(sb);
	if (!*w || !*hw || !*hs) {
		free(*w);
		free(*hw);
		free(*hs);
		return fg_err_set(err, FG_ENOMEM, "out of memory repacking a %d x %d int4 matrix", n, k);
	}
	(*w)->kind = kind;
	(*w)->n = n;
	(*w)->k = k;
	(*w)->group = group;
	return 0;
}

int fg_kint4_upload(struct fg_kctx *ctx, struct fg_kint4 **out, struct fg_kint4 *w, int rc, uint32_t *hw, size_t wb,
		    uint16_t *hs, size_t sb, int ncounters, size_t partial_bytes, struct fg_err *err)
{
	if (!rc)
		rc = fg_kmem_alloc(ctx, (void **)&w->d_words, wb, err);
	if (!rc)
		rc = fg_kmem_alloc(ctx, (void **)&w->d_scales, sb, err);
	if (!rc)
		rc = fg_kmem_alloc(ctx, (void **)&w->d_counters, sizeof(uint32_t) * ncounters, err);
	if (!rc)
		rc = fg_kmem_alloc(ctx, (void **)&w->d_partial, partial_bytes, err);
	if (!rc)
		rc = fg_kmem_upload(ctx, w->d_words, hw, wb, err);
	if (!rc)
		rc = fg_kmem_upload(ctx, w->d_scales, hs, sb, err);
	if (!rc)
		rc = fg_kmem_fill(ctx, w->d_counters, 0, sizeof(uint32_t) * ncounters, err);
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

static int fma_new(struct fg_kctx *ctx, struct fg_kint4 **out, const int32_t *packed, const uint16_t *scale_bf16,
		   int n, int k, int group, int splits, struct fg_err *err)
{
	struct fg_kint4 *w;
	size_t wb, sb;
	uint32_t *hw = NULL;
	uint16_t *hs = NULL;
	int rc, kc;

	fg_int4_layout_size(&wb, &sb, n, k, group);
	rc = fg_kint4_start(&w, &hw, &hs, wb, sb, FG_INT4_FMA, n, k, group, err);
	if (rc)
		return rc;
	w->kpad = (k + group - 1) / group * group;
	w->tiles = (n + 31) / 32;
	kc = w->kpad / 32;
	if (splits <= 0) {
		/* where the tiles leave room for two splits or more: as many as
		 * fit one wave of resident blocks (a second, partly empty wave
		 * cost more than it saved: docs/bench.md); else enough blocks for
		 * ~4 per SM; at least 2 chunks per warp. FG_INT4_WAVE=0: always
		 * the ~4 per SM rule (the one before) */
		const char *wv = getenv("FG_INT4_WAVE");
		int target = 4 * fg_kctx_sm_count(ctx), per = 0;

		splits = (target + w->tiles - 1) / w->tiles;
		if (!(wv && !strcmp(wv, "0")) &&
		    fg_kocc(ctx, &per, (const void *)int4_fma<1, true>, WARPS * 32, SMEM_FLOATS * sizeof(float)) ==
			    cudaSuccess &&
		    per > 0 && per * fg_kctx_sm_count(ctx) >= 2 * w->tiles)
			splits = per * fg_kctx_sm_count(ctx) / w->tiles;
		cudaGetLastError();
		if (splits > kc / (2 * WARPS))
			splits = kc / (2 * WARPS);
		if (splits < 1)
			splits = 1;
	}
	w->splits = splits;
	rc = fg_int4_repack(hw, hs, packed, scale_bf16, n, k, group, err);
	return fg_kint4_upload(ctx, out, w, rc, hw, wb, hs, sb, w->tiles,
		      sizeof(float) * (size_t)max_splits(kc, splits) * FG_INT4_MAX_M * w->tiles * 32, err);
}


static int fma_gshift(int group)
{
	return group == 32 ? 0 : group == 64 ? 1 : group == 128 ? 2 : 3;
}

template <int M, bool GG = false>
static cudaError_t fma_launch(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			  const float *d_x2 = NULL)
{
	int splits, slice, kc = w->kpad / 32;
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];

	fma_plan(w, M, &splits, &slice);
	cfg.gridDim = dim3(w->tiles, splits);
	cfg.blockDim = dim3(WARPS * 32);
	cfg.dynamicSmemBytes = sizeof(float) * M * slice * 32;
	cfg.stream = ctx->stream;
	at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[0].val.programmaticStreamSerializationAllowed = 1;
	cfg.attrs = at;
	cfg.numAttrs = ctx->pdl ? 1 : 0;
	return cudaLaunchKernelEx(&cfg, int4_fma<M, GG>, d_y, (const uint4 *)w->d_words,
				  (const uint16_t *)w->d_scales, d_x, d_x2, w->d_partial, (unsigned *)w->d_counters, w->n, w->k, kc,
				  w->kpad / w->group, fma_gshift(w->group), slice, splits, w->tiles * 32, fg_pf_take(ctx));
}


/* ---- the tensor-core kernel on the row-block layout ----------------------------
 *
 * mma.m16n8k16 (bf16 in, fp32 sums) with the weights as the B operand (8
 * rows x 16 elements) and the activations as A (16 x 16): A row 3m + p holds
 * part p of vector m, the fp32 x split into bf16 hi, mid and lo (hi + mid +
 * lo = x to fp32 precision). Products of the exact weights (-8..7, exact in
 * bf16) and bf16 parts are exact; the tensor cores add them in fp32 per
 * group (two chains, even and odd mma, added in that order), each group's
 * sum is scaled in fp32, and the three parts are added at the end.
 *
 * A block of 4 warps owns 8 row blocks (64 rows) and a slice of K; its warps
 * take the slice's 128-element chunks in turn. For a chunk a warp holds, for
 * each row block, 16 bytes per lane (512 contiguous bytes per warp) and,
 * as soon as a row block's words are unpacked, loads the same row block of
 * its next chunk into the freed registers, so loads stay in flight while it
 * computes. A word becomes four bf16 pairs with no conversion instruction:
 * (w >> 4i) & 0x000F000F | 0x43004300 is the pair 128 + n, and one bf16x2
 * fma subtracts 136. The slice's activation parts are staged once per block
 * in shared memory. */
#define MWARPS 4
#define RBB 8                 /* row blocks per block */
#define MMA_M 5               /* vectors per launch: 3 parts each fill <= 16 A rows */
#define MSMEM_MAX (40 * 1024) /* staged activation parts per block (+ <= 4 KB static) */
#define MRESIDENT 4           /* blocks per SM the launch bounds ask for */

__device__ __forceinline__ uint32_t bf2_fma(uint32_t a, uint32_t b, uint32_t c)
{
	uint32_t r;

	asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
	return r;
}

/* One word: nibble pairs (0,4) (1,5) (2,6) (3,7) as bf16 pairs q = n - 8. */
__device__ __forceinline__ void dequant(uint32_t w, uint32_t *b)
{
	constexpr uint32_t MASK = 0x000F000Fu;
	const uint32_t EXP = 0x43004300u, ONE = 0x3F803F80u, BIAS = 0xC308C308u; /* -136 */

	b[0] = bf2_fma(and_or<MASK>(w, EXP), ONE, BIAS);
	b[1] = bf2_fma(and_or<MASK>(w >> 4, EXP), ONE, BIAS);
	b[2] = bf2_fma(and_or<MASK>(w >> 8, EXP), ONE, BIAS);
	b[3] = bf2_fma(and_or<MASK>(w >> 12, EXP), ONE, BIAS);
}

__device__ __forceinline__ void mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
	    "{%0,%1,%2,%3};"
	    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t bf16_bits(float f)
{
	__nv_bfloat16 h = __float2bfloat16_rn(f);

	return (uint32_t)*(uint16_t *)&h;
}

/* x = hi + mid + lo, each bf16 (round to nearest), to fp32 precision */
__device__ __forceinline__ void split3(float x, uint32_t *p)
{
	p[0] = bf16_bits(x);
	x -= __uint_as_float(p[0] << 16);
	p[1] = bf16_bits(x);
	x -= __uint_as_float(p[1] << 16);
	p[2] = bf16_bits(x);
}

/* Stages chunks c0..c1 of M activation vectors (or of gelu_tanh(x) * x2,
 * GG) as their three bf16 parts in shared memory: xs[(3m + p) * xw + e / 2]
 * holds part p of elements e, e + 1 of the slice, zero past k (padding
 * weights are q = 0 too). */
template <int M, bool GG>
__device__ __forceinline__ void stage_parts(uint32_t *xs, const float *__restrict__ x, const float *__restrict__ x2,
					    int k, int c0, int c1, int xw, int xstride)
{
	int len = (c1 - c0) * 128, step = blockDim.x * 4;

	for (int m = 0; m < M; m++)
		for (int b = threadIdx.x * 4; b < len; b += step * STAGE_U) {
			float4 v[STAGE_U];

#pragma unroll
			for (int u = 0; u < STAGE_U; u++)
				v[u] = in4<GG>(x + (size_t)m * xstride, x2, c0 * 128 + b + u * step, k);
#pragma unroll
			for (int u = 0; u < STAGE_U; u++) {
				int i = b + u * step;
				uint32_t q0[3], q1[3], q2[3], q3[3];

				if (i >= len)
					break;
				split3(v[u].x, q0);
				split3(v[u].y, q1);
				split3(v[u].z, q2);
				split3(v[u].w, q3);
#pragma unroll
				for (int p = 0; p < 3; p++)
					*(uint2 *)(xs + (3 * m + p) * xw + i / 2) =
						make_uint2(q0[p] | q1[p] << 16, q2[p] | q3[p] << 16);
			}
		}
}

/* The end of a split-K launch of either tensor-core kernel: every block has
 * written its partial rows; the block that arrives last for row group rg adds
 * the splits' partials in split order (a fixed order, so the same bits every
 * run), writes y and resets the group's counter for the next launch. */
template <int M>
static __device__ __forceinline__ void mma_splitk_finish(float *__restrict__ y, int ystride,
							 const float *__restrict__ partial, unsigned *counters,
							 int rg, int nrbb, int n, int npad, int splits)
{
	__shared__ int last;
	int rb0 = rg * RBB;

	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0)
		last = atomicAdd(&counters[rg], 1u) == (unsigned)(splits - 1);
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	for (int t = threadIdx.x; t < M * RBB * 8; t += blockDim.x) {
		int m = t / (RBB * 8), rr = t % (RBB * 8);
		int row = rb0 * 8 + rr;

		if (rr >= nrbb * 8)
			continue;
		float v = fg_split_sum(partial + (size_t)m * npad + row, (size_t)MMA_M * npad, splits);

		if (row < n)
			y[(size_t)m * ystride + row] = v;
	}
	if (threadIdx.x == 0)
		counters[rg] = 0; /* ready for the next launch (stream-ordered) */
}

/* M vectors (<= 5); GG: the input is gelu_tanh(x) * x2 (GeGLU fused into the
 * staging), M = 1; G1: one scale group per chunk (group >= 128). */
template <int M, bool GG, bool G1>
__global__ void __launch_bounds__(MWARPS * 32, MRESIDENT)
	int4_mma(float *__restrict__ y, const uint4 *__restrict__ words, const uint32_t *__restrict__ scales,
		 const float *__restrict__ x, const float *__restrict__ x2, float *__restrict__ partial,
		 unsigned *__restrict__ counters, int n, int k, int npad, int nrb, int nch, int gs, int slice,
		 int splits, int xstride, int ystride, const struct fg_kpf pf)
{
	constexpr int AR = 3 * M; /* A rows in use */
	extern __shared__ __align__(16) uint32_t xs[]; /* [AR][xw] bf16 pairs */
	__shared__ float red[RBB][AR][8];
	int rg = blockIdx.x, sp = blockIdx.y;
	int nw = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int g = lane >> 2, j = lane & 3;
	int c0 = sp * slice, c1 = min(nch, c0 + slice);
	int rb0 = rg * RBB, nrbb = min(RBB, nrb - rb0);
	int xw = slice * 64 + 4;
	uint4 wv[RBB];
	uint32_t sc[RBB];
	float tot[RBB][4];
	int c = c0 + warp;

	fg_pdl_trigger();
	fg_pf_issue(pf); /* a later kernel's weights into L2 (fg_kctx_prefetch) */
	/* The weights do not depend on earlier kernels: start loading the first
	 * chunk before waiting for the kernel that writes x. */
	if (c < c1) {
#pragma unroll
		for (int r = 0; r < RBB; r++)
			if (r < nrbb) {
				wv[r] = __ldcs(words + ((size_t)c * nrb + rb0 + r) * 32 + lane);
				sc[r] = __ldg(scales + ((size_t)((c * 8) >> gs) * npad + (rb0 + r) * 8) / 2 + j);
			}
	}
	fg_pdl_wait();
	stage_parts<M, GG>(xs, x, x2, k, c0, c1, xw, xstride);
	__syncthreads();
#pragma unroll
	for (int r = 0; r < RBB; r++)
#pragma unroll
		for (int q = 0; q < 4; q++)
			tot[r][q] = 0.0f;
	for (; c < c1; c += nw) {
		uint32_t a[8][4];
		int kb = (c - c0) * 64, cn = c + nw;

#pragma unroll
		for (int s = 0; s < 8; s++) {
			a[s][0] = g < AR ? xs[g * xw + kb + 8 * s + j] : 0u;
			a[s][2] = g < AR ? xs[g * xw + kb + 8 * s + 4 + j] : 0u;
			a[s][1] = AR > 8 && g + 8 < AR ? xs[(g + 8) * xw + kb + 8 * s + j] : 0u;
			a[s][3] = AR > 8 && g + 8 < AR ? xs[(g + 8) * xw + kb + 8 * s + 4 + j] : 0u;
		}
#pragma unroll
		for (int r = 0; r < RBB; r++) {
			if (r < nrbb) {
				uint32_t b[16], scv = sc[r];
				uint4 cur = wv[r];
				float ae[4] = {0.0f, 0.0f, 0.0f, 0.0f}, ao[4] = {0.0f, 0.0f, 0.0f, 0.0f};

				if (cn < c1) { /* this row block of the next chunk, into the freed registers */
					wv[r] = __ldcs(words + ((size_t)cn * nrb + rb0 + r) * 32 + lane);
					sc[r] = __ldg(scales + ((size_t)((cn * 8) >> gs) * npad + (rb0 + r) * 8) / 2 + j);
				}
				dequant(cur.x, b);
				dequant(cur.y, b + 4);
				dequant(cur.z, b + 8);
				dequant(cur.w, b + 12);
#pragma unroll
				for (int s = 0; s < 8; s++) {
					/* word s / 2: mma 2w takes its pairs 0, 1, mma 2w + 1 pairs 2, 3 */
					mma(s & 1 ? ao : ae, a[s], b[(s >> 1) * 4 + (s & 1) * 2], b[(s >> 1) * 4 + (s & 1) * 2 + 1]);
					if (G1 ? s == 7 : (s & 1) && (s == 7 || ((s + 1) & ((1 << gs) - 1)) == 0)) {
						float s0 = __uint_as_float(scv << 16), s1 = __uint_as_float(scv & 0xffff0000u);

						tot[r][0] = fmaf(ae[0] + ao[0], s0, tot[r][0]);
						tot[r][1] = fmaf(ae[1] + ao[1], s1, tot[r][1]);
						if (AR > 8) {
							tot[r][2] = fmaf(ae[2] + ao[2], s0, tot[r][2]);
							tot[r][3] = fmaf(ae[3] + ao[3], s1, tot[r][3]);
						}
						if (!G1 && s != 7) { /* the chunk's next group (group < 128) */
#pragma unroll
							for (int q = 0; q < 4; q++)
								ae[q] = ao[q] = 0.0f;
							scv = __ldg(scales + ((size_t)((c * 8 + s + 1) >> gs) * npad + (rb0 + r) * 8) / 2 + j);
						}
					}
				}
			}
		}
	}
	/* warps add into red in warp order */
	for (int v = 0; v < nw; v++) {
		if (warp == v) {
#pragma unroll
			for (int r = 0; r < RBB; r++)
#pragma unroll
				for (int h = 0; h < 2; h++) {
					int ar = g + 8 * h;

					if (ar < AR)
#pragma unroll
						for (int q = 0; q < 2; q++) {
							float t = tot[r][2 * h + q];

							if (v == 0)
								red[r][ar][2 * j + q] = t;
							else
								red[r][ar][2 * j + q] += t;
						}
				}
		}
		__syncthreads();
	}
	/* out[m][row] = part 0 + part 1 + part 2 */
	for (int t = threadIdx.x; t < M * RBB * 8; t += blockDim.x) {
		int m = t / (RBB * 8), rr = t % (RBB * 8), r = rr / 8, col = rr % 8;
		int row = (rb0 + r) * 8 + col;

		if (r >= nrbb)
			continue;
		float v = red[r][3 * m][col] + red[r][3 * m + 1][col] + red[r][3 * m + 2][col];

		if (splits == 1) {
			if (row < n)
				y[(size_t)m * ystride + row] = v;
		} else {
			partial[((size_t)sp * MMA_M + m) * npad + row] = v;
		}
	}
	if (splits > 1)
		mma_splitk_finish<M>(y, ystride, partial, counters, rg, nrbb, n, npad, splits);
}

/* ---- the tensor-core kernel for M <= 2: the weights as the A operand ----------
 *
 * The same row-block layout, read the other way round: two row blocks are
 * the 16 rows of an A tile (a lane's 16 bytes of row block rb hold its A
 * registers 0 and 2, rows g; those of rb + 1 its registers 1 and 3, rows g +
 * 8) and the activation parts are the B operand, column 3m + p = part p of
 * vector m (3M of the 8 columns in use). One mma covers 16 rows x 16
 * elements: half the mma count of the kernel above at M = 1, and M = 2 for
 * free. C gives lane (g, j) rows g and g + 8 at columns 2j, 2j + 1; each
 * group's sums are scaled per row in fp32 and the parts are added
 * (hi + mid) + lo at the end. Blocks, slices, splits and counters are the
 * kernel above's (a block owns 8 row blocks), so mma_plan serves both. */
#define APAIRS (RBB / 2) /* row-block pairs (A tiles) per block */

__device__ __forceinline__ uint32_t u4_at(uint4 v, int i)
{
	return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

template <int M, bool GG, bool G1>
__global__ void __launch_bounds__(MWARPS * 32, MRESIDENT)
	int4_mma_a(float *__restrict__ y, const uint4 *__restrict__ words, const uint16_t *__restrict__ scales,
		   const float *__restrict__ x, const float *__restrict__ x2, float *__restrict__ partial,
		   unsigned *__restrict__ counters, int n, int k, int npad, int nrb, int nch, int gs, int slice,
		   int splits, int xstride, int ystride, const struct fg_kpf pf)
{
	constexpr int BC = 3 * M; /* B columns in use */
	extern __shared__ __align__(16) uint32_t xs[]; /* [BC][xw] bf16 pairs */
	__shared__ float red[MWARPS][RBB * 8][BC];
	const uint4 Q0 = make_uint4(0x88888888u, 0x88888888u, 0x88888888u, 0x88888888u); /* q = 0 */
	int rg = blockIdx.x, sp = blockIdx.y;
	int nw = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int g = lane >> 2, j = lane & 3;
	int c0 = sp * slice, c1 = min(nch, c0 + slice);
	int rb0 = rg * RBB, nrbb = min(RBB, nrb - rb0);
	int xw = slice * 64 + 4;
	uint4 wv[RBB];
	uint32_t sc[RBB];
	float tot[APAIRS][4];
	int c = c0 + warp;

	fg_pdl_trigger();
	fg_pf_issue(pf); /* a later kernel's weights into L2 (fg_kctx_prefetch) */
	/* the first chunk's weights before waiting for the kernel that writes x */
#pragma unroll
	for (int r = 0; r < RBB; r++) {
		wv[r] = Q0;
		sc[r] = 0;
		if (r < nrbb && c < c1) {
			wv[r] = __ldcs(words + ((size_t)c * nrb + rb0 + r) * 32 + lane);
			sc[r] = __ldg(scales + (size_t)((c * 8) >> gs) * npad + (rb0 + r) * 8 + g);
		}
	}
	fg_pdl_wait();
	stage_parts<M, GG>(xs, x, x2, k, c0, c1, xw, xstride);
	__syncthreads();
#pragma unroll
	for (int p = 0; p < APAIRS; p++)
#pragma unroll
		for (int q = 0; q < 4; q++)
			tot[p][q] = 0.0f;
	for (; c < c1; c += nw) {
		uint32_t bx[8][2];
		int kb = (c - c0) * 64, cn = c + nw;

#pragma unroll
		for (int s = 0; s < 8; s++) {
			bx[s][0] = g < BC ? xs[g * xw + kb + 8 * s + j] : 0u;
			bx[s][1] = g < BC ? xs[g * xw + kb + 8 * s + 4 + j] : 0u;
		}
#pragma unroll
		for (int p = 0; p < APAIRS; p++) {
			if (2 * p < nrbb) {
				uint4 w0 = wv[2 * p], w1 = wv[2 * p + 1];
				uint32_t s0 = sc[2 * p], s1 = sc[2 * p + 1];
				float ae[4] = {0.0f, 0.0f, 0.0f, 0.0f}, ao[4] = {0.0f, 0.0f, 0.0f, 0.0f};

				if (cn < c1) { /* this pair of the next chunk, into the freed registers */
#pragma unroll
					for (int h = 0; h < 2; h++)
						if (2 * p + h < nrbb) {
							wv[2 * p + h] = __ldcs(words + ((size_t)cn * nrb + rb0 + 2 * p + h) * 32 + lane);
							sc[2 * p + h] = __ldg(scales + (size_t)((cn * 8) >> gs) * npad +
									      (rb0 + 2 * p + h) * 8 + g);
						}
				}
#pragma unroll
				for (int wi = 0; wi < 4; wi++) {
					uint32_t d0[4], d1[4];

					dequant(u4_at(w0, wi), d0);
					dequant(u4_at(w1, wi), d1);
#pragma unroll
					for (int e = 0; e < 2; e++) {
						int s = 2 * wi + e;
						uint32_t a[4] = {d0[2 * e], d1[2 * e], d0[2 * e + 1], d1[2 * e + 1]};

						mma(e ? ao : ae, a, bx[s][0], bx[s][1]);
						if (G1 ? s == 7 : e && (s == 7 || ((s + 1) & ((1 << gs) - 1)) == 0)) {
							float f0 = __uint_as_float(s0 << 16), f1 = __uint_as_float(s1 << 16);

							tot[p][0] = fmaf(ae[0] + ao[0], f0, tot[p][0]);
							tot[p][1] = fmaf(ae[1] + ao[1], f0, tot[p][1]);
							tot[p][2] = fmaf(ae[2] + ao[2], f1, tot[p][2]);
							tot[p][3] = fmaf(ae[3] + ao[3], f1, tot[p][3]);
							if (!G1 && s != 7) { /* the chunk's next group (group < 128) */
								size_t go = (size_t)((c * 8 + s + 1) >> gs) * npad;

#pragma unroll
								for (int q = 0; q < 4; q++)
									ae[q] = ao[q] = 0.0f;
								s0 = __ldg(scales + go + (rb0 + 2 * p) * 8 + g);
								s1 = 2 * p + 1 < nrbb ? __ldg(scales + go + (rb0 + 2 * p + 1) * 8 + g) : 0u;
							}
						}
					}
				}
			}
		}
	}
	/* C of A tile p: rows (2p + h) * 8 + g, columns (parts) 2j, 2j + 1 */
#pragma unroll
	for (int p = 0; p < APAIRS; p++)
#pragma unroll
		for (int h = 0; h < 2; h++)
#pragma unroll
			for (int q = 0; q < 2; q++)
				if (2 * j + q < BC)
					red[warp][(2 * p + h) * 8 + g][2 * j + q] = tot[p][2 * h + q];
	__syncthreads();
	/* out[m][row] = (part 0 + part 1) + part 2, each summed over warps in order */
	for (int t = threadIdx.x; t < M * RBB * 8; t += blockDim.x) {
		int m = t / (RBB * 8), rl = t % (RBB * 8), row = rb0 * 8 + rl;
		float v0 = 0.0f, v1 = 0.0f, v2 = 0.0f;

		if (rl >= nrbb * 8)
			continue;
		for (int v = 0; v < nw; v++) {
			v0 += red[v][rl][3 * m];
			v1 += red[v][rl][3 * m + 1];
			v2 += red[v][rl][3 * m + 2];
		}
		if (splits == 1) {
			if (row < n)
				y[(size_t)m * ystride + row] = v0 + v1 + v2;
		} else {
			partial[((size_t)sp * MMA_M + m) * npad + row] = v0 + v1 + v2;
		}
	}
	if (splits > 1)
		mma_splitk_finish<M>(y, ystride, partial, counters, rg, nrbb, n, npad, splits);
}

/* Shared memory (bytes) of the staged parts for m vectors and a slice. */
static size_t mma_smem(int m, int slice)
{
	return sizeof(uint32_t) * 3 * (size_t)m * (slice * 64 + 4);
}

static int mma_max_slice(int m)
{
	return (int)((MSMEM_MAX / (sizeof(uint32_t) * 3 * m) - 4) / 64);
}

/* Splits of K and slice length (chunks) for a launch with m vectors: the
 * fewest (waves of resident blocks) x (chunk rounds per warp + 1 for a
 * block's staging and reduction), then the fewest splits. */
static void mma_plan(const struct fg_kctx *ctx, const struct fg_kint4 *w, int m, int *splits, int *slice)
{
	int rg = (w->rblocks + RBB - 1) / RBB, nch = w->chunks, ms = mma_max_slice(m);
	int cap = MRESIDENT * fg_kctx_sm_count(ctx), best = 0;
	long best_cost = 0;

	if (w->splits > 0) {
		int s = w->splits > nch ? nch : w->splits;

		*slice = (nch + s - 1) / s;
		if (*slice > ms)
			*slice = ms;
		*splits = (nch + *slice - 1) / *slice;
		return;
	}
	for (int s = 1; s <= nch && s <= w->max_splits; s++) {
		int sl = (nch + s - 1) / s, sp = (nch + sl - 1) / sl;
		long waves, per, cost;

		if (sl > ms || sp != s)
			continue;
		waves = ((long)rg * sp + cap - 1) / cap;
		per = (sl + MWARPS - 1) / MWARPS;
		cost = 4 * waves * (per + 1) + (sp > 1 ? 1 : 0);
		if (!best || cost < best_cost) {
			best = s;
			best_cost = cost;
		}
	}
	if (!best)
		best = (nch + ms - 1) / ms;
	*slice = (nch + best - 1) / best;
	*splits = (nch + *slice - 1) / *slice;
}

static int mma_new(struct fg_kctx *ctx, struct fg_kint4 **out, const int32_t *packed, const uint16_t *scale_bf16,
		   int n, int k, int group, int splits, struct fg_err *err)
{
	struct fg_kint4 *w;
	struct fg_int4_mma_dims d;
	size_t wb, sb, nrg;
	uint32_t *hw = NULL;
	uint16_t *hs = NULL;
	int rc, need;

	fg_int4_mma_layout_size(&wb, &sb, n, k, group);
	fg_int4_mma_dims(&d, n, k, group);
	rc = fg_kint4_start(&w, &hw, &hs, wb, sb, FG_INT4_MMA, n, k, group, err);
	if (rc)
		return rc;
	w->kpad = d.kpad;
	w->npad = d.npad;
	w->rblocks = d.rblocks;
	w->chunks = d.chunks;
	w->splits = splits > 0 ? splits : 0;
	/* the partial sums hold the most splits a launch can pick */
	need = (d.chunks + mma_max_slice(MMA_M) - 1) / mma_max_slice(MMA_M);
	w->max_splits = d.chunks < 64 ? d.chunks : 64;
	if (w->max_splits < need)
		w->max_splits = need;
	if (w->splits > w->max_splits)
		w->max_splits = w->splits < d.chunks ? w->splits : d.chunks;
	nrg = (size_t)(d.rblocks + RBB - 1) / RBB;
	rc = fg_int4_mma_repack(hw, hs, packed, scale_bf16, n, k, group, err);
	return fg_kint4_upload(ctx, out, w, rc, hw, wb, hs, sb, (int)nrg, sizeof(float) * (size_t)w->max_splits * MMA_M * d.npad,
		      err);
}

static int mma_gshift(int group)
{
	return group == 32 ? 1 : group == 64 ? 2 : group == 128 ? 3 : 4; /* log2(group / 16) */
}

template <int M, bool GG = false>
static cudaError_t mma_launch(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			      const float *d_x2, int xstride, int ystride)
{
	int splits, slice, nw;
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];

	mma_plan(ctx, w, M, &splits, &slice);
	nw = slice < MWARPS ? slice : MWARPS;
	cfg.gridDim = dim3((w->rblocks + RBB - 1) / RBB, splits);
	cfg.blockDim = dim3(nw * 32);
	cfg.dynamicSmemBytes = mma_smem(M, slice);
	cfg.stream = ctx->stream;
	at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[0].val.programmaticStreamSerializationAllowed = 1;
	cfg.attrs = at;
	cfg.numAttrs = ctx->pdl ? 1 : 0;
	if constexpr (M <= 2) { /* weights as the A operand */
		if (w->group >= 128)
			return cudaLaunchKernelEx(&cfg, int4_mma_a<M, GG, true>, d_y, (const uint4 *)w->d_words,
						  (const uint16_t *)w->d_scales, d_x, d_x2, w->d_partial,
						  (unsigned *)w->d_counters, w->n, w->k, w->npad, w->rblocks, w->chunks,
						  mma_gshift(w->group), slice, splits, xstride, ystride, fg_pf_take(ctx));
		return cudaLaunchKernelEx(&cfg, int4_mma_a<M, GG, false>, d_y, (const uint4 *)w->d_words,
					  (const uint16_t *)w->d_scales, d_x, d_x2, w->d_partial, (unsigned *)w->d_counters,
					  w->n, w->k, w->npad, w->rblocks, w->chunks, mma_gshift(w->group), slice, splits,
					  xstride, ystride, fg_pf_take(ctx));
	}
	if (w->group >= 128)
		return cudaLaunchKernelEx(&cfg, int4_mma<M, GG, true>, d_y, (const uint4 *)w->d_words,
					  (const uint32_t *)w->d_scales, d_x, d_x2, w->d_partial,
					  (unsigned *)w->d_counters, w->n, w->k, w->npad, w->rblocks, w->chunks,
					  mma_gshift(w->group), slice, splits, xstride, ystride, fg_pf_take(ctx));
	return cudaLaunchKernelEx(&cfg, int4_mma<M, GG, false>, d_y, (const uint4 *)w->d_words,
				  (const uint32_t *)w->d_scales, d_x, d_x2, w->d_partial, (unsigned *)w->d_counters,
				  w->n, w->k, w->npad, w->rblocks, w->chunks, mma_gshift(w->group), slice, splits,
				  xstride, ystride, fg_pf_take(ctx));
}

static cudaError_t mma_launch_m(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x, int m)
{
	int k = w->k, n = w->n;

	switch (m) {
	case 1: return mma_launch<1>(ctx, d_y, w, d_x, NULL, k, n);
	case 2: return mma_launch<2>(ctx, d_y, w, d_x, NULL, k, n);
	case 3: return mma_launch<3>(ctx, d_y, w, d_x, NULL, k, n);
	case 4: return mma_launch<4>(ctx, d_y, w, d_x, NULL, k, n);
	default: return mma_launch<5>(ctx, d_y, w, d_x, NULL, k, n);
	}
}

/* ---- the calls ------------------------------------------------------------------*/

extern "C" int fg_kint4_new(struct fg_kctx *ctx, struct fg_kint4 **out, const int32_t *packed,
			    const uint16_t *scale_bf16, int n, int k, int group, int splits, struct fg_err *err)
{
	*out = NULL;
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n < 1 || k < 8 || k % 8)
		return fg_err_set(err, FG_EINVAL, "int4 matrix %d x %d: need n >= 1 and k a positive multiple of 8", n, k);
	if (group != 32 && group != 64 && group != 128 && group != 256)
		return fg_err_set(err, FG_EUNSUPPORTED, "int4 group size %d: the kernels take 32, 64, 128 or 256", group);
	if (ctx->int4_kind == FG_INT4_MMA)
		return mma_new(ctx, out, packed, scale_bf16, n, k, group, splits, err);
	if (ctx->int4_kind == FG_INT4_I8)
		return fg_kint4_i8_new(ctx, out, packed, scale_bf16, n, k, group, splits, err);
	return fma_new(ctx, out, packed, scale_bf16, n, k, group, splits, err);
}

extern "C" void fg_kint4_free(struct fg_kctx *ctx, struct fg_kint4 *w)
{
	if (!w)
		return;
	fg_kmem_free(ctx, w->d_words);
	fg_kmem_free(ctx, w->d_scales);
	fg_kmem_free(ctx, w->d_counters);
	fg_kmem_free(ctx, w->d_partial);
	fg_kmem_free(ctx, w->d_pairs);
	free(w);
}

/* Bytes of w's words and scales in its layout. */
static void layout_size(const struct fg_kint4 *w, size_t *wb, size_t *sb)
{
	if (w->kind == FG_INT4_MMA)
		fg_int4_mma_layout_size(wb, sb, w->n, w->k, w->group);
	else if (w->kind == FG_INT4_I8)
		fg_int4_i8_layout_size(wb, sb, w->n, w->k, w->group);
	else
		fg_int4_layout_size(wb, sb, w->n, w->k, w->group);
}

extern "C" void fg_kint4_prefetch(struct fg_kctx *ctx, const struct fg_kint4 *w, double from, double to)
{
	size_t wb, sb, a, b;

	if (!ctx || !w || ctx->pf_on < 2)
		return;
	layout_size(w, &wb, &sb);
	a = (size_t)(from * (double)wb) & ~(size_t)15;
	b = to >= 1.0 ? wb : (size_t)(to * (double)wb) & ~(size_t)15;
	if (b > a)
		fg_kctx_prefetch(ctx, (const char *)w->d_words + a, b - a);
	if (from <= 0.0)
		fg_kctx_prefetch(ctx, w->d_scales, sb);
}

extern "C" size_t fg_kint4_bytes(const struct fg_kint4 *w)
{
	size_t wb, sb;

	if (!w)
		return 0;
	layout_size(w, &wb, &sb);
	return wb + sb;
}

static cudaError_t fma_launch_m(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x, int m)
{
	switch (m) {
	case 1: return fma_launch<1>(ctx, d_y, w, d_x);
	case 2: return fma_launch<2>(ctx, d_y, w, d_x);
	case 3: return fma_launch<3>(ctx, d_y, w, d_x);
	case 4: return fma_launch<4>(ctx, d_y, w, d_x);
	case 5: return fma_launch<5>(ctx, d_y, w, d_x);
	case 6: return fma_launch<6>(ctx, d_y, w, d_x);
	case 7: return fma_launch<7>(ctx, d_y, w, d_x);
	default: return fma_launch<8>(ctx, d_y, w, d_x);
	}
}

extern "C" int fg_k_int4_matvec(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x, int m,
				struct fg_err *err)
{
	cudaError_t e;

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (!w || m < 1 || m > FG_INT4_MAX_M)
		return fg_err_set(err, FG_EINVAL, "int4 matvec: m = %d, need 1..%d", m, FG_INT4_MAX_M);
	if ((uintptr_t)d_x % 16)
		return fg_err_set(err, FG_EINVAL, "int4 matvec: the activations must be 16-byte aligned");
	if (w->kind == FG_INT4_I8) {
		e = fg_kint4_i8_matvec(ctx, d_y, w, d_x, m);
	} else if (w->kind == FG_INT4_MMA) {
		/* up to 5 vectors per launch; the rest in a second launch */
		e = mma_launch_m(ctx, d_y, w, d_x, m < MMA_M ? m : MMA_M);
		if (e == cudaSuccess && m > MMA_M)
			e = mma_launch_m(ctx, d_y + (size_t)MMA_M * w->n, w, d_x + (size_t)MMA_M * w->k, m - MMA_M);
	} else {
		e = fma_launch_m(ctx, d_y, w, d_x, m);
	}
	if (e != cudaSuccess) {
		cudaGetLastError();
		return fg_err_set(err, FG_EDEVICE, "int4 matvec %d x %d, m %d: launch: %s", w->n, w->k, m,
				  cudaGetErrorString(e));
	}
	return fg_launched("int4 matvec", err);
}

extern "C" int fg_k_int4_matvec_red(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
				    const float *d_up, float *d_clr, int nclr, struct fg_err *err)
{
	cudaError_t e;

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (!w || w->kind != FG_INT4_I8 || nclr < 0 || (nclr && !d_clr))
		return fg_err_set(err, FG_EINVAL, "int4 matvec into alternating buffers: %s",
				  !w ? "no matrix" : w->kind != FG_INT4_I8 ? "not an i8 matrix" : "bad buffer to clear");
	if ((uintptr_t)d_x % 16 || (uintptr_t)d_up % 16)
		return fg_err_set(err, FG_EINVAL, "int4 matvec: the activations must be 16-byte aligned");
	e = fg_kint4_i8_matvec_red(ctx, d_y, w, d_x, d_up, d_clr, nclr);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return fg_err_set(err, FG_EDEVICE, "int4 matvec %d x %d into alternating buffers: launch: %s", w->n,
				  w->k, cudaGetErrorString(e));
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
	if ((uintptr_t)d_gate % 16 || (uintptr_t)d_up % 16)
		return fg_err_set(err, FG_EINVAL, "int4 geglu matvec: the activations must be 16-byte aligned");
	if (w->kind == FG_INT4_I8)
		e = fg_kint4_i8_geglu(ctx, d_y, w, d_gate, d_up);
	else if (w->kind == FG_INT4_MMA)
		e = mma_launch<1, true>(ctx, d_y, w, d_gate, d_up, w->k, w->n);
	else
		e = fma_launch<1, true>(ctx, d_y, w, d_gate, d_up);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return fg_err_set(err, FG_EDEVICE, "int4 geglu matvec %d x %d: launch: %s", w->n, w->k,
				  cudaGetErrorString(e));
	}
	return fg_launched("int4 geglu matvec", err);
}

/* Prompt chunks: i8 matrices as one tensor-core GEMM (int4_i8.cu) whose
 * fp32 sums follow the m = 1 plan; every other kind, a single row, and a
 * GEMM that does not fit the device (its shared memory, the scratch) as
 * rows one-vector launches (the same bits by construction). */
extern "C" int fg_k_int4_gemm(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			      const float *d_x2, int rows, struct fg_err *err)
{
	cudaError_t e;

	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (!w)
		return fg_err_set(err, FG_EINVAL, "int4 gemm: no matrix");
	if (rows < 1)
		return fg_err_set(err, FG_EINVAL, "int4 gemm %d x %d: rows = %d, need at least 1", w->n, w->k, rows);
	if ((uintptr_t)d_x % 16 || (uintptr_t)d_x2 % 16)
		return fg_err_set(err, FG_EINVAL, "int4 gemm: the activations must be 16-byte aligned");
	if (rows > 1 && w->k % 4)
		return fg_err_set(err, FG_EINVAL, "int4 gemm: k = %d is not a multiple of 4 (rows must stay aligned)",
				  w->k);
	e = w->kind == FG_INT4_I8 && rows > 1 ? fg_kint4_i8_rows(ctx, d_y, w, d_x, d_x2, rows) : cudaErrorNotSupported;
	if (e == cudaErrorNotSupported && w->kind == FG_INT4_I8 && rows > 1)
		e = fg_kint4_i8_gemm(ctx, d_y, w, d_x, d_x2, rows);
	if (e == cudaErrorNotSupported) { /* the other kinds, one row, or a GEMM the device cannot take */
		for (int r = 0; r < rows; r++) {
			float *y = d_y + (size_t)r * w->n;
			const float *x = d_x + (size_t)r * w->k;
			int rc = d_x2 ? fg_k_int4_matvec_geglu(ctx, y, w, x, d_x2 + (size_t)r * w->k, err)
				      : fg_k_int4_matvec(ctx, y, w, x, 1, err);

			if (rc)
				return rc;
		}
		return 0;
	}
	if (e != cudaSuccess) {
		cudaGetLastError();
		return fg_err_set(err, FG_EDEVICE, "int4 gemm %d x %d, %d rows: launch: %s", w->n, w->k, rows,
				  cudaGetErrorString(e));
	}
	return fg_launched("int4 gemm", err);
}

FG_KTRACE_TU(int4)
