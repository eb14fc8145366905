/* int4_i8.cu - the INT8 tensor-core INT4 kernel (FG_INT4_I8): INT4 matrix
 * times 1 or 2 fp32 vectors per launch on the i8 layout (fg_kernels.h), with
 * mma.m16n8k32 on integers.
 *
 * The weights' nibbles n = q + 8 are the A operand as unsigned bytes, with
 * one logic instruction per four of them (w & 0x0F0F0F0F, (w >> 4) &
 * 0x0F0F0F0F) and no conversion. The activations are the B operand: each
 * scale group of x is split into four int8 parts with a power-of-two scale
 * (kernels/i8split.h), B column 4m + p = part p of vector m. The tensor
 * cores sum n * a_p over the group exactly in int32; 8 * sum a_p (the nibble
 * offset) is subtracted in integers, so each group's sum of q * a_p is
 * exact, and only then does fp32 arithmetic begin: lane (g, t) holds rows g
 * and g + 8 at columns 2t, 2t + 1 and adds, per group,
 *     fma(fma(c1, 2^(e-7(p+1)), c0 * 2^(e-7p)), scale, acc),
 * then the two lanes of a vector add their accumulators (parts 0-1 +
 * parts 2-3), the warps theirs in warp order, the K splits theirs in split
 * order: a fixed order, the same bits every run, and kernels/cpu_twin.c's
 * fg_ref_int4_i8_matvec gives them too.
 *
 * A block owns one tile of 16 rows and a slice of K units (a unit: one
 * scale group, or two of 32; at least 64 elements); its warps take the
 * slice's units in turn, each keeping IU units of weights in flight. Before
 * waiting for the kernel that writes x (programmatic dependent launch), a
 * block loads its first weights; after, it splits its slice of x into
 * shared memory, one warp per group. Split-K partials and the last-block
 * reduction are int4.cu's. */
#include <stdlib.h>
#include <string.h>

#include "kernels/i8split.h"
#include "kernels/kcommon.cuh"

#define IW 8                /* warps per block at most */
#define IU 4                /* units each warp keeps in flight */
#define IM 2                /* vectors per launch */
#define ISMEM (46 * 1024)   /* staged parts and group data per block, at most */
#define ISTAGE 1280         /* activations a block stages at most (i8_plan; docs/bench.md) */

__device__ __forceinline__ void mma_u8s8(int *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
		     "{%0,%1,%2,%3};"
		     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Shared bytes per unit of a slice: the parts (4 per element per vector)
 * and, per group, 8 column multipliers and 8 column offsets. */
static __host__ __device__ int i8_unit_bytes(int m, int group)
{
	int unit = group > FG_INT4_I8_CHUNK ? group : FG_INT4_I8_CHUNK;

	return unit * FG_I8_PARTS * m + unit / group * 8 * 8;
}

/* Lane's EPL consecutive inputs from element e (a multiple of 4 when EPL is),
 * zero at and past k; GG: gelu_tanh(x) * x2. */
template <int EPL, bool GG>
__device__ __forceinline__ void i8_load(float *v, const float *x, const float *x2, int e, int k)
{
	if (EPL >= 4) {
#pragma unroll
		for (int i = 0; i < EPL; i += 4) {
			float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

			if (e + i < k) {
				a = *(const float4 *)(x + e + i);
				if (GG) {
					float4 b = *(const float4 *)(x2 + e + i);

					a.x = fg_gelu_tanh(a.x) * b.x;
					a.y = fg_gelu_tanh(a.y) * b.y;
					a.z = fg_gelu_tanh(a.z) * b.z;
					a.w = fg_gelu_tanh(a.w) * b.w;
				}
			}
			v[i] = a.x, v[i + 1] = a.y, v[i + 2] = a.z, v[i + 3] = a.w;
		}
	} else {
#pragma unroll
		for (int i = 0; i < EPL; i++)
			v[i] = e + i < k ? (GG ? fg_gelu_tanh(x[e + i]) * x2[e + i] : x[e + i]) : 0.0f;
	}
}

/* The slice's groups (ngl of them, from element e0) of M vectors into shared
 * memory, one warp per group: parts at sm[s * 128M + t * 32M + (4m + p) * 8
 * + j] for element 32s + 4t + j (j < 4) or 32s + 16 + 4t + (j - 4) of the
 * slice, so that lane (g, t) finds its B registers of k-step s at one 8-byte
 * offset; per group gl, mult[gl * 8 + col] and bias[gl * 8 + col] (8 * the
 * sum of the column's parts), columns 4M..7 zero. */
template <int M, int G>
__device__ __forceinline__ void i8_group(unsigned char *sm, float *mult, int *bias, const float *v, int gl, int m,
					 int lane)
{
	constexpr int EPL = G / 32;
	uint32_t amax = 0;
	int sum[FG_I8_PARTS] = {0, 0, 0, 0}, ex, mine = 0;

#pragma unroll
	for (int i = 0; i < EPL; i++)
		amax = max(amax, fg_i8_abs_bits(v[i]));
	amax = __reduce_max_sync(0xffffffffu, amax);
	ex = fg_i8_exp(amax);
#pragma unroll
	for (int i = 0; i < EPL; i++) {
		int8_t a[FG_I8_PARTS];
		int el = gl * G + lane * EPL + i, e32 = el & 31;
		unsigned char *dst = sm + (el >> 5) * (128 * M) + ((e32 & 15) >> 2) * (32 * M) + m * 32 + (e32 & 3) +
				     (e32 >= 16 ? 4 : 0);

		fg_i8_split(v[i], ex, a);
#pragma unroll
		for (int p = 0; p < FG_I8_PARTS; p++) {
			dst[p * 8] = (unsigned char)a[p];
			sum[p] += a[p];
		}
	}
#pragma unroll
	for (int p = 0; p < FG_I8_PARTS; p++) {
		int s = __reduce_add_sync(0xffffffffu, sum[p]);

		mine = lane == p ? s : mine;
	}
	if (lane < FG_I8_PARTS) {
		mult[gl * 8 + 4 * m + lane] = fg_i8_mult(amax, ex, lane);
		bias[gl * 8 + 4 * m + lane] = 8 * mine;
	}
	if (m == 0 && lane >= 4 * M && lane < 8) {
		mult[gl * 8 + lane] = 0.0f;
		bias[gl * 8 + lane] = 0;
	}
}

/* The slice's groups (ngl of them, from element e0) of M vectors into shared
 * memory, one warp per group, ISU groups of a warp at a time (their loads
 * first): parts at sm[s * 128M + t * 32M + (4m + p) * 8 + j] for element
 * 32s + 4t + j (j < 4) or 32s + 16 + 4t + (j - 4) of the slice, so that lane
 * (g, t) finds its B registers of k-step s at one 8-byte offset; per group
 * gl, mult[gl * 8 + col] and bias[gl * 8 + col] (8 * the sum of the
 * column's parts), columns 4M..7 zero. */
#define ISU 2

template <int M, bool GG, int G>
__device__ __forceinline__ void i8_stage(unsigned char *sm, float *mult, int *bias, const float *x, const float *x2,
					 int k, int e0, int ngl, int xstride, int warp, int nw, int lane)
{
	constexpr int EPL = G / 32;

	for (int g0 = warp; g0 < ngl; g0 += nw * ISU)
#pragma unroll
		for (int m = 0; m < M; m++) {
			float v[ISU][EPL];

#pragma unroll
			for (int b = 0; b < ISU; b++)
				if (g0 + b * nw < ngl)
					i8_load<EPL, GG>(v[b], x + (size_t)m * xstride, x2, e0 + (g0 + b * nw) * G + lane * EPL, k);
#pragma unroll
			for (int b = 0; b < ISU; b++)
				if (g0 + b * nw < ngl)
					i8_group<M, G>(sm, mult, bias, v[b], g0 + b * nw, m, lane);
		}
}

/* Unit u of a warp's tile into registers: its NC chunks of weights (this
 * lane's 16 bytes of each, streamed) and its GU groups' scales. */
template <int NC, int GU>
__device__ __forceinline__ void i8_fetch(uint4 *wv, uint32_t *sv, const uint4 *wp, const uint32_t *sq, int u)
{
#pragma unroll
	for (int c = 0; c < NC; c++)
		wv[c] = __ldcs(wp + (size_t)(u * NC + c) * 32);
#pragma unroll
	for (int q = 0; q < GU; q++)
		sv[q] = __ldg(sq + (size_t)(u * GU + q) * 8);
}

/* M vectors (1 or 2); GG: the input is gelu_tanh(x) * x2 (M = 1); G: the
 * scale group. */
template <int M, bool GG, int G>
__global__ void __launch_bounds__(IW * 32) int4_i8(float *__restrict__ y, const uint4 *__restrict__ words,
						   const uint32_t *__restrict__ scales, const float *__restrict__ x,
						   const float *__restrict__ x2, float *__restrict__ partial,
						   unsigned *__restrict__ counters, int n, int k, int ntiles, int nch,
						   int ngr, int units, int slice, int splits, int tpb, int npad,
						   int xstride, int ystride, const struct fg_kpf pf)
{
	constexpr int UE = G > FG_INT4_I8_CHUNK ? G : FG_INT4_I8_CHUNK; /* elements per unit */
	constexpr int NC = UE / FG_INT4_I8_CHUNK;                       /* chunks per unit */
	constexpr int GU = UE / G;                                      /* groups per unit */
	constexpr int SB = 128 * M;                                     /* shared bytes per k-step */
	extern __shared__ __align__(16) unsigned char sm[];
	__shared__ float red[IW][16][M];
	__shared__ int last;
	int sp = blockIdx.y, nw = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int g = lane >> 2, t = lane & 3, wpt = nw / tpb, wi = warp / tpb;
	int tile = blockIdx.x * tpb + warp % tpb; /* this warp's tile */
	int u0 = sp * slice, nu = tile < ntiles ? min(units, u0 + slice) - u0 : 0;
	float *mult = (float *)(sm + (size_t)slice * UE * FG_I8_PARTS * M);
	int *bias = (int *)(mult + slice * GU * 8);
	const uint4 *wp = words + ((size_t)tile * nch + (size_t)u0 * NC) * 32 + lane;
	const uint32_t *sq = scales + ((size_t)tile * ngr + (size_t)u0 * GU) * 8 + g;
	uint4 wv[IU][NC];
	uint32_t sv[IU][GU];
	float acc0 = 0.0f, acc1 = 0.0f;

	fg_pdl_trigger();
	fg_pf_issue(pf); /* a later kernel's weights into L2 (fg_kctx_prefetch) */
	/* the first units' weights before waiting for the kernel that writes x */
#pragma unroll
	for (int uu = 0; uu < IU; uu++)
		if (wi + uu * wpt < nu)
			i8_fetch<NC, GU>(wv[uu], sv[uu], wp, sq, wi + uu * wpt);
	fg_pdl_wait();
	i8_stage<M, GG, G>(sm, mult, bias, x, x2, k, u0 * UE, (min(units, u0 + slice) - u0) * GU, xstride, warp, nw,
			   lane);
	__syncthreads();
	for (int base = wi; base < nu; base += wpt * IU) {
#pragma unroll
		for (int uu = 0; uu < IU; uu++) {
			int u = base + uu * wpt, un = u + wpt * IU;

			if (u < nu) {
				uint4 cur[NC];
				uint32_t cs[GU];
				int c4[4] = {0, 0, 0, 0};

#pragma unroll
				for (int c = 0; c < NC; c++)
					cur[c] = wv[uu][c];
#pragma unroll
				for (int q = 0; q < GU; q++)
					cs[q] = sv[uu][q];
				if (un < nu) /* the unit IU rounds ahead, into the freed registers */
					i8_fetch<NC, GU>(wv[uu], sv[uu], wp, sq, un);
#pragma unroll
				for (int c = 0; c < NC; c++)
#pragma unroll
					for (int h = 0; h < 2; h++) {
						int s = (u * NC + c) * 2 + h;
						uint32_t w0 = h ? cur[c].z : cur[c].x, w1 = h ? cur[c].w : cur[c].y;
						uint32_t a[4] = {w0 & 0x0F0F0F0Fu, w1 & 0x0F0F0F0Fu, (w0 >> 4) & 0x0F0F0F0Fu,
								 (w1 >> 4) & 0x0F0F0F0Fu};
						uint2 b = make_uint2(0u, 0u);

						if (g < 4 * M)
							b = *(const uint2 *)(sm + s * SB + t * (32 * M) + g * 8);
						mma_u8s8(c4, a, b.x, b.y);
						if (G == 32 || (c == NC - 1 && h == 1)) { /* the end of a group */
							int q = G == 32 ? h : 0, gl = u * GU + q;
							float2 mu = *(const float2 *)(mult + gl * 8 + 2 * t);
							int2 bi = *(const int2 *)(bias + gl * 8 + 2 * t);
							float s0 = __uint_as_float(cs[q] << 16);
							float s1 = __uint_as_float(cs[q] & 0xffff0000u);

							acc0 = fmaf(fmaf((float)(c4[1] - bi.y), mu.y, (float)(c4[0] - bi.x) * mu.x),
								    s0, acc0);
							acc1 = fmaf(fmaf((float)(c4[3] - bi.y), mu.y, (float)(c4[2] - bi.x) * mu.x),
								    s1, acc1);
							c4[0] = c4[1] = c4[2] = c4[3] = 0;
						}
					}
			}
		}
	}
	{ /* parts 0-1 + parts 2-3 of each vector, lane 4m of a row's quad keeps it */
		float o0 = acc0 + __shfl_xor_sync(0xffffffffu, acc0, 1);
		float o1 = acc1 + __shfl_xor_sync(0xffffffffu, acc1, 1);

		if (!(t & 1) && (t >> 1) < M) {
			red[warp][g][t >> 1] = o0;
			red[warp][g + 8][t >> 1] = o1;
		}
	}
	__syncthreads();
	if (threadIdx.x < 16 * M * tpb) { /* per tile, its warps in order */
		int r = threadIdx.x & 15, m = (threadIdx.x >> 4) % M, tl = (threadIdx.x >> 4) / M;
		int row = (blockIdx.x * tpb + tl) * 16 + r;
		float v = 0.0f;

		for (int w = 0; w < wpt && row < npad; w++)
			v += red[w * tpb + tl][r][m];
		if (splits == 1) {
			if (row < n)
				y[(size_t)m * ystride + row] = v;
		} else if (row < npad) {
			partial[((size_t)sp * IM + m) * npad + row] = v;
			__threadfence();
		}
	}
	if (splits == 1)
		return;
	__syncthreads();
	if (threadIdx.x == 0)
		last = atomicAdd(&counters[blockIdx.x], 1u) == (unsigned)(splits - 1);
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	if (threadIdx.x < 16 * M * tpb) {
		int r = threadIdx.x & 15, m = (threadIdx.x >> 4) % M, tl = (threadIdx.x >> 4) / M;
		int row = (blockIdx.x * tpb + tl) * 16 + r;
		float v = 0.0f;

		for (int s = 0; s < splits && row < npad; s++)
			v += __ldcg(partial + ((size_t)s * IM + m) * npad + row);
		if (row < n)
			y[(size_t)m * ystride + row] = v;
	}
	if (threadIdx.x == 0)
		counters[blockIdx.x] = 0; /* ready for the next launch (stream-ordered) */
}

/* The launch plan: tiles per block (tpb: 1, 2, 4 or 8, the block's warps
 * shared among them), K splits of slice units, warps per tile (wpt). A
 * matrix made with splits > 0 takes that many (as far as shared memory
 * allows) and one tile per block. Otherwise: K splits so that a block
 * stages at most w->stage activations (every block splits its own slice of
 * x, so a long K in one block is a long serial chain), then the fewest
 * tiles per block that keep the blocks within one wave of resident blocks
 * (w->wave), then more K splits only where the blocks would leave SMs idle,
 * just enough to cover them. */
static void i8_plan(const struct fg_kint4 *w, int m, int *splits, int *slice, int *wpt, int *tpb)
{
	int max_slice = ISMEM / i8_unit_bytes(m, w->group), s = w->splits, t = 1;

	if (s <= 0) {
		int unit = w->kpad / w->units, blocks;

		s = (w->units * unit + w->stage - 1) / w->stage;
		while (t < IW && (w->tiles + t - 1) / t * s > w->wave)
			t *= 2;
		blocks = (w->tiles + t - 1) / t;
		if (blocks * s < w->sms)
			s = (w->sms + blocks - 1) / blocks;
		if (s > w->units)
			s = w->units;
	}
	*slice = (w->units + s - 1) / s;
	if (*slice > max_slice)
		*slice = max_slice;
	*splits = (w->units + *slice - 1) / *slice;
	*tpb = t;
	*wpt = *slice < IW / t ? *slice : IW / t;
}

extern "C" int fg_kint4_i8_plan(const struct fg_kint4 *w, int m, int *slice, int *warps)
{
	int splits, tpb;

	*slice = *warps = 0;
	if (!w || w->kind != FG_INT4_I8 || m < 1 || m > IM)
		return 0;
	i8_plan(w, m, &splits, slice, warps, &tpb);
	return splits;
}

int fg_kint4_i8_new(struct fg_kctx *ctx, struct fg_kint4 **out, const int32_t *packed, const uint16_t *scale_bf16,
		    int n, int k, int group, int splits, struct fg_err *err)
{
	struct fg_kint4 *w;
	struct fg_int4_i8_dims d;
	size_t wb, sb;
	uint32_t *hw = NULL;
	uint16_t *hs = NULL;
	int rc;

	fg_int4_i8_layout_size(&wb, &sb, n, k, group);
	fg_int4_i8_dims(&d, n, k, group);
	rc = fg_kint4_start(&w, &hw, &hs, wb, sb, FG_INT4_I8, n, k, group, err);
	if (rc)
		return rc;
	w->kpad = d.kpad;
	w->npad = d.npad;
	w->tiles = d.tiles;
	w->chunks = d.chunks;
	w->units = d.units;
	/* the plan's inputs (i8_plan): a wave of resident blocks and the SMs */
	{
		int per = 0, need = (d.units + ISMEM / i8_unit_bytes(IM, group) - 1) / (ISMEM / i8_unit_bytes(IM, group));

		if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, int4_i8<1, true, 128>, IW * 32, ISMEM) !=
			    cudaSuccess ||
		    per < 1)
			per = 1;
		cudaGetLastError();
		w->sms = fg_kctx_sm_count(ctx);
		w->wave = per * w->sms;
		w->stage = ISTAGE;
		if (getenv("FG_I8_WAVE")) /* experiments: the blocks a wave holds */
			w->wave = (int)strtol(getenv("FG_I8_WAVE"), NULL, 10);
		if (getenv("FG_I8_STAGE")) /* experiments: activations a block stages at most */
			w->stage = (int)strtol(getenv("FG_I8_STAGE"), NULL, 10);
		if (w->stage < 64)
			w->stage = 64;
		/* the partial sums hold the most splits a launch can take */
		w->splits = splits > 0 ? splits : 0;
		w->max_splits = splits > 0 ? splits : w->sms + (d.kpad + w->stage - 1) / w->stage;
		if (w->max_splits > d.units)
			w->max_splits = d.units;
		if (w->max_splits < need)
			w->max_splits = need;
	}
	rc = fg_int4_i8_repack(hw, hs, packed, scale_bf16, n, k, group, err);
	return fg_kint4_upload(ctx, out, w, rc, hw, wb, hs, sb, d.tiles,
			       sizeof(float) * (size_t)w->max_splits * IM * d.npad, err);
}

template <int M, bool GG, int G>
static cudaError_t i8_launch_g(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			       const float *d_x2)
{
	int splits, slice, wpt, tpb;
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];

	i8_plan(w, M, &splits, &slice, &wpt, &tpb);
	cfg.gridDim = dim3((w->tiles + tpb - 1) / tpb, splits);
	cfg.blockDim = dim3(wpt * tpb * 32);
	cfg.dynamicSmemBytes = (size_t)slice * i8_unit_bytes(M, w->group);
	cfg.stream = ctx->stream;
	at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[0].val.programmaticStreamSerializationAllowed = 1;
	cfg.attrs = at;
	cfg.numAttrs = ctx->pdl ? 1 : 0;
	return cudaLaunchKernelEx(&cfg, int4_i8<M, GG, G>, d_y, (const uint4 *)w->d_words,
				  (const uint32_t *)w->d_scales, d_x, d_x2, w->d_partial, (unsigned *)w->d_counters, w->n,
				  w->k, w->tiles, w->chunks, w->kpad / w->group, w->units, slice, splits, tpb, w->npad,
				  w->k, w->n, fg_pf_take(ctx));
}

template <int M, bool GG>
static cudaError_t i8_launch(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			     const float *d_x2)
{
	switch (w->group) {
	case 32: return i8_launch_g<M, GG, 32>(ctx, d_y, w, d_x, d_x2);
	case 64: return i8_launch_g<M, GG, 64>(ctx, d_y, w, d_x, d_x2);
	case 128: return i8_launch_g<M, GG, 128>(ctx, d_y, w, d_x, d_x2);
	default: return i8_launch_g<M, GG, 256>(ctx, d_y, w, d_x, d_x2);
	}
}

cudaError_t fg_kint4_i8_matvec(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x, int m)
{
	cudaError_t e = cudaSuccess;

	/* two vectors per launch, the odd one alone */
	for (int b = 0; b < m && e == cudaSuccess; b += IM) {
		if (m - b >= 2)
			e = i8_launch<2, false>(ctx, d_y + (size_t)b * w->n, w, d_x + (size_t)b * w->k, NULL);
		else
			e = i8_launch<1, false>(ctx, d_y + (size_t)b * w->n, w, d_x + (size_t)b * w->k, NULL);
	}
	return e;
}

cudaError_t fg_kint4_i8_geglu(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_gate,
			      const float *d_up)
{
	return i8_launch<1, true>(ctx, d_y, w, d_gate, d_up);
}

/* ---- prompt chunks: fg_k_int4_gemm on i8 matrices ---------------------------
 *
 * Many tokens per launch, each token's outputs bit-identical to the m = 1
 * launch above. The integers are the same whatever the grouping (the mma
 * sums exactly), so only the fp32 part must follow the m = 1 plan
 * (i8_plan(w, 1)): per K split sp (slice units from sp * slice), per warp
 * wi < wpt of that split, a chain of units u0 + wi, u0 + wi + wpt, ...
 * accumulated by the fma above from 0; the two lanes of a token add; the
 * chains of a split add in warp order from 0 (an empty chain adds 0 + 0);
 * the splits add in split order from 0 (one split: its sum as it is).
 *
 * First every token's activations are split once (i8_split_rows, one warp
 * per group and token, i8_load and i8_group as the matvec stages them) into
 * the context's scratch memory, two tokens side by side as i8_group lays out
 * M = 2: for token pair P, the 256 bytes of k-step s at parts + P * kpad * 8
 * + s * 256 are the B fragments of the 32 lanes (column 4m + p: part p of
 * token 2P + m), and mult, bias [P][group][8]. Then int4_i8_gemm: a block
 * of GW warps owns GW tiles of 16 rows and TP token pairs; it walks the
 * tiles' units in the plan's chain order (i8_unit_at, a table in shared
 * memory), its threads copying each stage of units (the tiles' weights and
 * scales, the pairs' parts, mult and bias) into shared memory with cp.async
 * GNS - 1 stages ahead; each warp runs one mma per pair and k-step on its
 * tile's A fragment. The token blocks of a tile are neighbours in
 * blockIdx.x, so their weight reads meet in L2. */
#define GW 4 /* warps (tiles) per GEMM block */

template <bool GG, int G>
__global__ void __launch_bounds__(256) i8_split_rows(unsigned char *__restrict__ parts, float *__restrict__ mult,
						     int *__restrict__ bias, const float *__restrict__ x,
						     const float *__restrict__ x2, int k, int kpad, int ngr, int rows)
{
	constexpr int EPL = G / 32;
	int lane = threadIdx.x & 31, gl = blockIdx.x * 8 + (threadIdx.x >> 5), r = blockIdx.y, pr = r >> 1;
	float v[EPL];

	fg_pdl_trigger();
	fg_pdl_wait(); /* x comes from the kernel before; the scratch is read by the one before */
	if (gl >= ngr)
		return;
	if (r < rows) {
		i8_load<EPL, GG>(v, x + (size_t)r * k, GG ? x2 + (size_t)r * k : NULL, gl * G + lane * EPL, k);
	} else { /* the pair's missing second token */
#pragma unroll
		for (int i = 0; i < EPL; i++)
			v[i] = 0.0f;
	}
	i8_group<2, G>(parts + (size_t)pr * kpad * 8, mult + (size_t)pr * ngr * 8, bias + (size_t)pr * ngr * 8, v, gl,
		       r & 1, lane);
}

/* The i-th unit (i < units) of a tile in the m = 1 plan's order: split
 * i / slice; in it (nu units) chain wi holds wi, wi + wpt, ...: the first
 * nu % wpt chains q + 1 units, the others q = nu / wpt. *end: 1 at a
 * chain's last unit, 2 more at the split's last. */
__device__ __forceinline__ int i8_unit_at(int i, int units, int slice, int wpt, int *end)
{
	int sp = i / slice, j = i - sp * slice, nu = min(units - sp * slice, slice);
	int q = nu / wpt, r = nu - q * wpt, wi, jj, cnt;

	if (j < r * (q + 1)) {
		wi = j / (q + 1), jj = j - wi * (q + 1), cnt = q + 1;
	} else {
		int j2 = j - r * (q + 1);

		wi = r + j2 / q, jj = j2 - (wi - r) * q, cnt = q;
	}
	*end = (jj == cnt - 1) | (j == nu - 1 ? 2 : 0);
	return sp * slice + wi + jj * wpt;
}

/* Shared memory of the GEMM: NS stages of DU units each; a stage holds, per
 * unit d and token pair p, the pair's B fragments of the unit (UE * 8
 * bytes), its mult and bias (GU groups x 8 columns each), and, per tile of
 * the block, the tile's weights of the unit (NC chunks x 512 bytes) and
 * scales (GU x 32 bytes). All of it moves by cp.async, NS - 1 stages ahead
 * of the mma. */
#define GNS 4 /* stages */

template <int G>
struct i8g {
	static constexpr int UE = G > FG_INT4_I8_CHUNK ? G : FG_INT4_I8_CHUNK; /* elements per unit */
	static constexpr int NC = UE / FG_INT4_I8_CHUNK;                       /* chunks per unit */
	static constexpr int GU = UE / G;                                      /* groups per unit */
	static constexpr int DU = NC >= 4 ? 1 : 4 / NC;                        /* units per stage */
	static constexpr int BP = UE * 8 + GU * 64;                            /* bytes per unit and pair */
	static constexpr int AP = NC * 512 + GU * 32;                          /* bytes per unit and tile */
	static constexpr __host__ __device__ int stage(int tp) { return DU * (tp * BP + GW * AP); }
};

__device__ __forceinline__ void i8_cp16(void *dst, const void *src)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
		     : "memory");
}

__device__ __forceinline__ void i8_cp_commit(void)
{
	asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N>
__device__ __forceinline__ void i8_cp_wait(void)
{
	asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* Stage st's weights and scales (a) or activation parts (!a) into sm,
 * copied by the whole block; ord: the units in the plan's order. */
template <int G, int TP>
__device__ __forceinline__ void i8_gemm_issue(unsigned char *sm, bool a, int st, const unsigned *ord,
					      const unsigned char *words, const unsigned char *scales,
					      const unsigned char *parts, const unsigned char *mult,
					      const unsigned char *bias, int tile0, int ntiles, int nch, int ngr, int units,
					      int np, size_t bst, size_t mst)
{
	typedef i8g<G> C;

#pragma unroll
	for (int d = 0; d < C::DU; d++) {
		int i = st * C::DU + d, u;

		if (i >= units)
			break;
		u = (int)(ord[i] & 0x0fffffffu);
		if (a) { /* the block's tiles: NC * 32 weight pieces, then GU * 2 scale pieces each */
			constexpr int PP = C::AP / 16;

			for (int x = threadIdx.x; x < GW * PP; x += GW * 32) {
				int tw = x / PP, pc = x - tw * PP, tile = tile0 + tw;
				unsigned char *dst = sm + C::DU * TP * C::BP + (tw * C::DU + d) * C::AP + pc * 16;

				if (tile >= ntiles)
					continue;
				if (pc < C::NC * 32)
					i8_cp16(dst, words + ((size_t)tile * nch + (size_t)u * C::NC) * 512 + pc * 16);
				else
					i8_cp16(dst, scales + ((size_t)tile * ngr + (size_t)u * C::GU) * 32 + (pc - C::NC * 32) * 16);
			}
		} else { /* the pairs: UE / 2 part pieces, GU * 2 mult pieces, GU * 2 bias pieces each */
			constexpr int PP = C::BP / 16, P1 = C::UE / 2, P2 = P1 + C::GU * 2;

			for (int x = threadIdx.x; x < TP * PP; x += GW * 32) {
				int p = x / PP, pc = x - p * PP;
				unsigned char *dst = sm + (d * TP + p) * C::BP + pc * 16;

				if (p >= np)
					continue;
				if (pc < P1)
					i8_cp16(dst, parts + p * bst + (size_t)u * C::UE * 8 + pc * 16);
				else if (pc < P2)
					i8_cp16(dst, mult + p * mst + (size_t)u * C::GU * 32 + (pc - P1) * 16);
				else
					i8_cp16(dst, bias + p * mst + (size_t)u * C::GU * 32 + (pc - P2) * 16);
			}
		}
	}
}

template <int G, int TP>
__global__ void __launch_bounds__(GW * 32) int4_i8_gemm(float *__restrict__ y, const unsigned char *__restrict__ words,
							const unsigned char *__restrict__ scales,
							const unsigned char *__restrict__ parts,
							const unsigned char *__restrict__ mult,
							const unsigned char *__restrict__ bias, int n, int ntiles, int nch,
							int ngr, int units, int slice, int splits, int wpt, int npairs,
							int rows, int kpad)
{
	typedef i8g<G> C;
	constexpr int SB = C::stage(TP);
	extern __shared__ __align__(16) unsigned char sm[];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	int tile0 = blockIdx.y * GW, tile = tile0 + warp, pr0 = blockIdx.x * TP, np = min(TP, npairs - pr0);
	int nst = (units + C::DU - 1) / C::DU;
	size_t bst = (size_t)kpad * 8, mst = (size_t)ngr * 32; /* bytes per pair */
	const unsigned char *pp = parts + pr0 * bst, *mp = mult + pr0 * mst, *bp = bias + pr0 * mst;
	unsigned *ord = (unsigned *)(sm + GNS * SB); /* unit | end flags << 28, in the plan's order */
	float acc[TP][2], v[TP][2], yt[TP][2];

	fg_pdl_trigger();
#pragma unroll
	for (int p = 0; p < TP; p++)
		acc[p][0] = acc[p][1] = v[p][0] = v[p][1] = yt[p][0] = yt[p][1] = 0.0f;
	for (int i = threadIdx.x; i < units; i += GW * 32) {
		int e, u = i8_unit_at(i, units, slice, wpt, &e);

		ord[i] = (unsigned)u | (unsigned)e << 28;
	}
	__syncthreads();
	/* the first stages' weights before waiting for the kernel that splits x
	 * (they join the first stage's group) */
	for (int s = 0; s < GNS - 1 && s < nst; s++)
		i8_gemm_issue<G, TP>(sm + s * SB, true, s, ord, words, scales, pp, mp, bp, tile0, ntiles, nch, ngr,
				     units, np, bst, mst);
	fg_pdl_wait();
	for (int s = 0; s < GNS - 1; s++) {
		if (s < nst)
			i8_gemm_issue<G, TP>(sm + s * SB, false, s, ord, words, scales, pp, mp, bp, tile0, ntiles, nch,
					     ngr, units, np, bst, mst);
		i8_cp_commit();
	}
	for (int st = 0; st < nst; st++) {
		const unsigned char *ss = sm + (st % GNS) * SB;

		i8_cp_wait<GNS - 2>();
		__syncthreads();
		{ /* the stage GNS - 1 ahead, into the buffer every warp finished with */
			int s2 = st + GNS - 1;

			if (s2 < nst) {
				unsigned char *sd = sm + (s2 % GNS) * SB;

				i8_gemm_issue<G, TP>(sd, true, s2, ord, words, scales, pp, mp, bp, tile0, ntiles, nch, ngr,
						     units, np, bst, mst);
				i8_gemm_issue<G, TP>(sd, false, s2, ord, words, scales, pp, mp, bp, tile0, ntiles, nch, ngr,
						     units, np, bst, mst);
			}
			i8_cp_commit();
		}
		if (tile >= ntiles)
			continue;
#pragma unroll
		for (int d = 0; d < C::DU; d++) {
			int i = st * C::DU + d, end;
			const unsigned char *sa = ss + C::DU * TP * C::BP + (warp * C::DU + d) * C::AP;
			const unsigned char *sb = ss + d * TP * C::BP;
			int c4[TP][4];

			if (i >= units)
				break;
			end = (int)(ord[i] >> 28);
#pragma unroll
			for (int p = 0; p < TP; p++)
				c4[p][0] = c4[p][1] = c4[p][2] = c4[p][3] = 0;
#pragma unroll
			for (int c = 0; c < C::NC; c++) {
				uint4 cur = *(const uint4 *)(sa + c * 512 + lane * 16);

#pragma unroll
				for (int h = 0; h < 2; h++) {
					uint32_t w0 = h ? cur.z : cur.x, w1 = h ? cur.w : cur.y;
					uint32_t a[4] = {w0 & 0x0F0F0F0Fu, w1 & 0x0F0F0F0Fu, (w0 >> 4) & 0x0F0F0F0Fu,
							 (w1 >> 4) & 0x0F0F0F0Fu};

#pragma unroll
					for (int p = 0; p < TP; p++)
						if (p < np) {
							uint2 b = *(const uint2 *)(sb + p * C::BP + (c * 2 + h) * 256 + t * 64 + g * 8);

							mma_u8s8(c4[p], a, b.x, b.y);
						}
					if (G == 32 || (c == C::NC - 1 && h == 1)) { /* the end of a group */
						int q = G == 32 ? h : 0;
						uint32_t cs = *(const uint32_t *)(sa + C::NC * 512 + q * 32 + g * 4);
						float s0 = __uint_as_float(cs << 16);
						float s1 = __uint_as_float(cs & 0xffff0000u);

#pragma unroll
						for (int p = 0; p < TP; p++)
							if (p < np) {
								const unsigned char *gp = sb + p * C::BP + C::UE * 8 + q * 32 + t * 8;
								float2 mu = *(const float2 *)gp;
								int2 bi = *(const int2 *)(gp + C::GU * 32);

								acc[p][0] = fmaf(fmaf((float)(c4[p][1] - bi.y), mu.y,
										      (float)(c4[p][0] - bi.x) * mu.x),
										 s0, acc[p][0]);
								acc[p][1] = fmaf(fmaf((float)(c4[p][3] - bi.y), mu.y,
										      (float)(c4[p][2] - bi.x) * mu.x),
										 s1, acc[p][1]);
								c4[p][0] = c4[p][1] = c4[p][2] = c4[p][3] = 0;
							}
					}
				}
			}
			if (end & 1) { /* a chain's end: parts 0-1 + parts 2-3, then into its split's sum */
#pragma unroll
				for (int p = 0; p < TP; p++)
					if (p < np) {
						v[p][0] += acc[p][0] + __shfl_xor_sync(0xffffffffu, acc[p][0], 1);
						v[p][1] += acc[p][1] + __shfl_xor_sync(0xffffffffu, acc[p][1], 1);
						acc[p][0] = acc[p][1] = 0.0f;
					}
			}
			if (end & 2) { /* a split's end: its empty chains (0 + 0 each), then into the total */
				int sp = i / slice, nu = min(units - sp * slice, slice);

#pragma unroll
				for (int p = 0; p < TP; p++) {
					for (int w = nu; w < wpt; w++) {
						v[p][0] += 0.0f + 0.0f;
						v[p][1] += 0.0f + 0.0f;
					}
					yt[p][0] = splits == 1 ? v[p][0] : yt[p][0] + v[p][0];
					yt[p][1] = splits == 1 ? v[p][1] : yt[p][1] + v[p][1];
					v[p][0] = v[p][1] = 0.0f;
				}
			}
		}
	}
	i8_cp_wait<0>();
	if (tile >= ntiles || (t & 1)) /* lanes 0 and 2 of a quad write tokens 2P and 2P + 1 */
		return;
#pragma unroll
	for (int p = 0; p < TP; p++) {
		int tok = 2 * (pr0 + p) + (t >> 1), row = tile * 16 + g;

		if (p < np && tok < rows) {
			if (row < n)
				y[(size_t)tok * n + row] = yt[p][0];
			if (row + 8 < n)
				y[(size_t)tok * n + row + 8] = yt[p][1];
		}
	}
}

/* Token pairs per warp: the most (up to 4) that still give every SM 4 warps. */
static int i8_gemm_tp(const struct fg_kint4 *w, int pairs)
{
	static int forced = -1;
	int tp = 4;

	if (forced < 0) { /* experiments: FG_I8_GEMM_TP=1, 2 or 4 */
		const char *e = getenv("FG_I8_GEMM_TP");

		forced = e ? (int)strtol(e, NULL, 10) : 0;
	}
	if (forced == 1 || forced == 2 || forced == 4)
		return forced;
	while (tp > 1 && (long)w->tiles * ((pairs + tp - 1) / tp) < 4L * w->sms)
		tp /= 2;
	return tp;
}

template <int G, int TP>
static cudaError_t i8_gemm_launch_t(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w,
				    const unsigned char *parts, const unsigned char *mult, const unsigned char *bias,
				    int pairs, int rows, int splits, int slice, int wpt)
{
	static size_t allowed; /* the dynamic shared memory the kernel may take */
	size_t smem = (size_t)GNS * i8g<G>::stage(TP) + ((size_t)w->units * 4 + 15) / 16 * 16;

	if (smem > allowed) {
		if (cudaFuncSetAttribute(int4_i8_gemm<G, TP>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
		    cudaSuccess) {
			cudaGetLastError();
			return cudaErrorNotSupported; /* more than the device has: one-vector launches */
		}
		allowed = smem;
	}
	fg_launch_pdl(ctx, int4_i8_gemm<G, TP>, dim3((pairs + TP - 1) / TP, (w->tiles + GW - 1) / GW), dim3(GW * 32),
		      smem, d_y, (const unsigned char *)w->d_words, (const unsigned char *)w->d_scales, parts, mult, bias,
		      w->n, w->tiles, w->chunks, w->kpad / w->group, w->units, slice, splits, wpt, pairs, rows, w->kpad);
	return cudaGetLastError();
}

template <int G>
static cudaError_t i8_gemm_g(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			     const float *d_x2, int rows)
{
	int splits, slice, wpt, tpb, ngr = w->kpad / G;
	size_t per = (size_t)w->kpad * 8 + (size_t)ngr * 8 * (sizeof(float) + sizeof(int)); /* scratch per pair */
	size_t fit = ctx->scratch_bytes / per;
	int maxpairs = fit > 16384 ? 16384 : (int)fit; /* the split's grid: 2 * pairs blocks in y */

	i8_plan(w, 1, &splits, &slice, &wpt, &tpb); /* the m = 1 launch's order */
	if (maxpairs < 1)
		return cudaErrorNotSupported;
	for (int r0 = 0; r0 < rows; r0 += 2 * maxpairs) {
		int nr = rows - r0 < 2 * maxpairs ? rows - r0 : 2 * maxpairs, pairs = (nr + 1) / 2;
		unsigned char *parts = (unsigned char *)ctx->scratch;
		unsigned char *mult = parts + (size_t)pairs * w->kpad * 8;
		unsigned char *bias = mult + (size_t)pairs * ngr * 8 * sizeof(float);
		const float *x = d_x + (size_t)r0 * w->k, *x2 = d_x2 ? d_x2 + (size_t)r0 * w->k : NULL;
		float *y = d_y + (size_t)r0 * w->n;
		cudaError_t e;

		if (x2)
			fg_launch_pdl(ctx, i8_split_rows<true, G>, dim3((ngr + 7) / 8, 2 * pairs), dim3(256), 0, parts,
				      (float *)mult, (int *)bias, x, x2, w->k, w->kpad, ngr, nr);
		else
			fg_launch_pdl(ctx, i8_split_rows<false, G>, dim3((ngr + 7) / 8, 2 * pairs), dim3(256), 0, parts,
				      (float *)mult, (int *)bias, x, x2, w->k, w->kpad, ngr, nr);
		if ((e = cudaGetLastError()) != cudaSuccess)
			return e;
		switch (i8_gemm_tp(w, pairs)) {
		case 1: e = i8_gemm_launch_t<G, 1>(ctx, y, w, parts, mult, bias, pairs, nr, splits, slice, wpt); break;
		case 2: e = i8_gemm_launch_t<G, 2>(ctx, y, w, parts, mult, bias, pairs, nr, splits, slice, wpt); break;
		default: e = i8_gemm_launch_t<G, 4>(ctx, y, w, parts, mult, bias, pairs, nr, splits, slice, wpt); break;
		}
		if (e != cudaSuccess)
			return e;
	}
	return cudaSuccess;
}

cudaError_t fg_kint4_i8_gemm(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			     const float *d_x2, int rows)
{
	switch (w->group) {
	case 32: return i8_gemm_g<32>(ctx, d_y, w, d_x, d_x2, rows);
	case 64: return i8_gemm_g<64>(ctx, d_y, w, d_x, d_x2, rows);
	case 128: return i8_gemm_g<128>(ctx, d_y, w, d_x, d_x2, rows);
	default: return i8_gemm_g<256>(ctx, d_y, w, d_x, d_x2, rows);
	}
}
