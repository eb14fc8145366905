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
 * shared memory, one warp per group. A launch of two K splits meets in a
 * slot per output (i8_pair); with more, split-K partials and the last-block
 * reduction are int4.cu's. */
#include <stdlib.h>
#include <string.h>

#include "kernels/i8split.h"
#include "kernels/kcommon.cuh"

#define IW 8                /* warps per block at most */
#define IU 4                /* units each warp keeps in flight */
#define IM 2                /* vectors per launch (rows split before: up to IMV) */
#define IMV 8               /* rows per launch at most (int4_i8_rows) */
#define ISMEM (46 * 1024)   /* staged parts and group data per block, at most */
#define ISTAGE 1280         /* activations a block stages at most (i8_plan; docs/bench.md) */
#define IPSTAGE 2048        /* ... or in two splits, where that avoids more (i8_plan) */

/* An experiment's switch: its integer value, -1 where it is unset. */
static int i8_env(const char *name)
{
	const char *e = getenv(name);

	return e ? (int)strtol(e, NULL, 10) : -1;
}

__device__ __forceinline__ void mma_u8s8(int *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
		     "{%0,%1,%2,%3};"
		     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* B columns per group for m vectors (4 parts each, in n-tiles of 8). */
static __host__ __device__ constexpr int i8_cols(int m)
{
	return 8 * ((m + 1) / 2);
}

/* Shared bytes per unit of a slice: the parts (4 per element per vector)
 * and, per group, i8_cols(m) column multipliers and column offsets. */
static __host__ __device__ int i8_unit_bytes(int m, int group)
{
	int unit = group > FG_INT4_I8_CHUNK ? group : FG_INT4_I8_CHUNK;

	return unit * FG_I8_PARTS * m + unit / group * i8_cols(m) * 8;
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

__device__ __forceinline__ void i8_cp16(void *dst, const void *src)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
		     : "memory");
}

/* Unit u's registers out of the ring into cur, cs, and the unit IU rounds
 * ahead (un) fetched into the freed ones. */
template <int NC, int GU>
__device__ __forceinline__ void i8_take(uint4 *cur, uint32_t *cs, uint4 *wv, uint32_t *sv, const uint4 *wp,
					const uint32_t *sq, int un, int nu)
{
#pragma unroll
	for (int c = 0; c < NC; c++)
		cur[c] = wv[c];
#pragma unroll
	for (int q = 0; q < GU; q++)
		cs[q] = sv[q];
	if (un < nu)
		i8_fetch<NC, GU>(wv, sv, wp, sq, un);
}

/* Half h of a lane's 16 bytes as its A fragment: the nibbles n = q + 8 as
 * unsigned bytes, one logic instruction per four. */
__device__ __forceinline__ void i8_afrag(uint32_t *a, uint4 w, int h)
{
	uint32_t w0 = h ? w.z : w.x, w1 = h ? w.w : w.y;

	a[0] = w0 & 0x0F0F0F0Fu;
	a[1] = w1 & 0x0F0F0F0Fu;
	a[2] = (w0 >> 4) & 0x0F0F0F0Fu;
	a[3] = (w1 >> 4) & 0x0F0F0F0Fu;
}

/* A group's end for rows g and g + 8: acc += (c1 - b1) mu1 + (c0 - b0) mu0
 * times the row's scale (the bf16 halves of cs), then the counts cleared. */
__device__ __forceinline__ void i8_group_end(float *acc0, float *acc1, int *c4, float2 mu, int2 bi, uint32_t cs)
{
	float s0 = __uint_as_float(cs << 16);
	float s1 = __uint_as_float(cs & 0xffff0000u);

	*acc0 = fmaf(fmaf((float)(c4[1] - bi.y), mu.y, (float)(c4[0] - bi.x) * mu.x), s0, *acc0);
	*acc1 = fmaf(fmaf((float)(c4[3] - bi.y), mu.y, (float)(c4[2] - bi.x) * mu.x), s1, *acc1);
	c4[0] = c4[1] = c4[2] = c4[3] = 0;
}

/* Split-K: whether this block is its tile group's last split to finish
 * (its partial sums written by the caller's threads; fg_arrive publishes
 * them and, in the last block, acquires the others'). */
__device__ __forceinline__ bool i8_last_split(unsigned *counters, int splits, unsigned *old)
{
	return fg_arrive(&counters[blockIdx.x], old) == (unsigned)(splits - 1);
}

/* Two K splits of one output meet in a 64-bit slot (pairs, zero between
 * launches): each ORs its partial sum, as ~bits (never 0: a NaN is made the
 * canonical one, which the sum gives anyway), into its half. The one whose
 * OR finds the other half there adds 0.0f + p0 + p1 in split order, as the
 * last block of the counted path does, writes y and clears the slot; one
 * atomic round trip, no counter and no second pass over the partials. */
__device__ __forceinline__ void i8_pair(float *y, unsigned long long *slot, float v, int sp, bool store)
{
	unsigned mine = v != v ? ~0x7fffffffu : ~__float_as_uint(v);
	unsigned long long old;

	asm volatile("atom.relaxed.gpu.global.or.b64 %0, [%1], %2;"
		     : "=l"(old)
		     : "l"(slot), "l"((unsigned long long)mine << (32 * sp))
		     : "memory");
	if (unsigned other = (unsigned)(old >> (32 * (1 - sp)))) {
		float o = __uint_as_float(~other), sum = 0.0f;

		sum += sp ? o : v;
		sum += sp ? v : o;
		if (store)
			*y = sum;
		*slot = 0ull; /* ready for the next launch (stream-ordered) */
	}
}

/* A launch of two K splits that adds into y (red): each split's partial
 * sum goes to its output by one reduction, with no answer to wait for, onto
 * a y that is zero (the caller's promise, fg_k_int4_matvec_red). Two
 * addends onto +0.0f: 0.0f + p0 + p1 or 0.0f + p1 + p0, and an IEEE sum of
 * two is the same whatever their order, so these are i8_pair's bits, every
 * run, whichever split comes first; except that red.add.f32 on global
 * memory flushes a subnormal partial or sum (below 2^-126) to a zero of
 * its sign (PTX ISA; its .noftz needs PTX 9.4, newer than CUDA 13.0's). */
__device__ __forceinline__ void i8_red(float *y, float v)
{
	asm volatile("red.relaxed.gpu.global.add.f32 [%0], %1;" ::"l"(y), "f"(v) : "memory");
}

/* clr[0..n) zeroed by the grid's threads together, after its wait: the
 * other of a pair of buffers that launches adding into y take in turn, for
 * the launch after this one (fg_k_int4_matvec_red). */
__device__ __forceinline__ void i8_clear(float *clr, int n)
{
	int nt = gridDim.x * gridDim.y * blockDim.x;

	for (int i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += nt)
		clr[i] = 0.0f;
}

#ifdef FG_I8_DELAY
/* make I8DLY=1, a measuring build: the blocks of an M = 1 or 2 launch whose
 * linear index is below dly_blocks wait dly_ns after they start before
 * loading their first weights (FG_I8_DELAY ns, FG_I8_DELAY_BLOCKS; read
 * once by fg_kint4_i8_new and passed as kernel arguments, so that a delay
 * of 0 costs no load), so that the blocks resident early issue their loads
 * later, while the launch before them stages its x (docs/gpu.md, "Left"). */
#define I8_DLY_PARAMS , unsigned dly_ns, unsigned dly_blocks
#define I8_DLY_ARGS , i8_dly[0], i8_dly[1]
static unsigned i8_dly[2];

__device__ __forceinline__ void i8_delay(unsigned ns, unsigned blocks)
{
	if (!ns || blockIdx.y * gridDim.x + blockIdx.x >= blocks)
		return;
	for (unsigned long long t0 = fg_gtimer_ns(); fg_gtimer_ns() - t0 < ns;)
		;
}
#else
#define I8_DLY_PARAMS
#define I8_DLY_ARGS
#endif

/* M vectors (1 or 2); GG: the input is gelu_tanh(x) * x2 (M = 1); G: the
 * scale group. pairs: a slot per output for launches of two splits
 * (i8_pair), or NULL. radd: a launch of two splits adds into y instead
 * (i8_red; y zero before it). clr: nclr floats zeroed after the wait, or
 * NULL. */
template <int M, bool GG, int G>
__global__ void __launch_bounds__(IW * 32) int4_i8(float *__restrict__ y, const uint4 *__restrict__ words,
						   const uint32_t *__restrict__ scales, const float *__restrict__ x,
						   const float *__restrict__ x2, float *__restrict__ partial,
						   unsigned *__restrict__ counters, unsigned long long *__restrict__ pairs,
						   int n, int k, int ntiles, int nch, int ngr, int units, int slice,
						   int splits, int tpb, int npad, int xstride, int ystride,
						   const struct fg_kpf pf, float *__restrict__ clr, int nclr,
						   int radd I8_DLY_PARAMS)
{
	constexpr int UE = G > FG_INT4_I8_CHUNK ? G : FG_INT4_I8_CHUNK; /* elements per unit */
	constexpr int NC = UE / FG_INT4_I8_CHUNK;                       /* chunks per unit */
	constexpr int GU = UE / G;                                      /* groups per unit */
	constexpr int SB = 128 * M;                                     /* shared bytes per k-step */
	extern __shared__ __align__(16) unsigned char sm[];
	__shared__ float red[IW][16][M];
	__shared__ unsigned last;
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
#ifdef FG_I8_DELAY
	i8_delay(dly_ns, dly_blocks);
#endif
	/* the first units' weights before waiting for the kernel that writes x */
#pragma unroll
	for (int uu = 0; uu < IU; uu++)
		if (wi + uu * wpt < nu)
			i8_fetch<NC, GU>(wv[uu], sv[uu], wp, sq, wi + uu * wpt);
	fg_pdl_wait();
	i8_stage<M, GG, G>(sm, mult, bias, x, x2, k, u0 * UE, (min(units, u0 + slice) - u0) * GU, xstride, warp, nw,
			   lane);
	__syncthreads();
	fg_kt_mark(2); /* a measuring build's (KTRACE=1) marks: x staged */
	for (int base = wi; base < nu; base += wpt * IU) {
#pragma unroll
		for (int uu = 0; uu < IU; uu++) {
			int u = base + uu * wpt, un = u + wpt * IU;

			if (u < nu) {
				uint4 cur[NC];
				uint32_t cs[GU];
				int c4[4] = {0, 0, 0, 0};

				i8_take<NC, GU>(cur, cs, wv[uu], sv[uu], wp, sq, un, nu);
#pragma unroll
				for (int c = 0; c < NC; c++)
#pragma unroll
					for (int h = 0; h < 2; h++) {
						int s = (u * NC + c) * 2 + h;
						uint32_t a[4];
						uint2 b = make_uint2(0u, 0u);

						i8_afrag(a, cur[c], h);
						if (g < 4 * M)
							b = *(const uint2 *)(sm + s * SB + t * (32 * M) + g * 8);
						mma_u8s8(c4, a, b.x, b.y);
						if (G == 32 || (c == NC - 1 && h == 1)) { /* the end of a group */
							int q = G == 32 ? h : 0, gl = u * GU + q;

							i8_group_end(&acc0, &acc1, c4, *(const float2 *)(mult + gl * 8 + 2 * t),
								     *(const int2 *)(bias + gl * 8 + 2 * t), cs[q]);
						}
					}
			}
		}
	}
	fg_kt_mark(3); /* thread 0's products summed */
	{ /* parts 0-1 + parts 2-3 of each vector, lane 4m of a row's quad keeps it */
		float o0 = acc0 + __shfl_xor_sync(0xffffffffu, acc0, 1);
		float o1 = acc1 + __shfl_xor_sync(0xffffffffu, acc1, 1);

		if (!(t & 1) && (t >> 1) < M) {
			red[warp][g][t >> 1] = o0;
			red[warp][g + 8][t >> 1] = o1;
		}
	}
	__syncthreads();
	fg_kt_mark(4); /* every warp's products summed */
	if (threadIdx.x < 16 * M * tpb) { /* per tile, its warps in order */
		int r = threadIdx.x & 15, m = (threadIdx.x >> 4) % M, tl = (threadIdx.x >> 4) / M;
		int row = (blockIdx.x * tpb + tl) * 16 + r;
		float v = 0.0f;

		for (int w = 0; w < wpt && row < npad; w++)
			v += red[w * tpb + tl][r][m];
		if (splits == 1) {
			if (row < n)
				y[(size_t)m * ystride + row] = v;
		} else if (splits == 2 && radd) {
			if (row < n)
				i8_red(y + (size_t)m * ystride + row, v);
		} else if (splits == 2 && pairs) {
			if (row < npad)
				i8_pair(y + (size_t)m * ystride + row, pairs + (size_t)m * npad + row, v, sp, row < n);
		} else if (row < npad) {
			partial[((size_t)sp * IM + m) * npad + row] = v;
		}
	}
	fg_kt_mark(5); /* thread 0's outputs or partial sums written */
	if (clr)
		i8_clear(clr, nclr);
	if (splits == 1 || (splits == 2 && (pairs || radd)) || !i8_last_split(counters, splits, &last))
		return;
	fg_kt_mark(6); /* the last split to finish */
	if (threadIdx.x < 16 * M * tpb) {
		int r = threadIdx.x & 15, m = (threadIdx.x >> 4) % M, tl = (threadIdx.x >> 4) / M;
		int row = (blockIdx.x * tpb + tl) * 16 + r;
		float v = row < npad ? fg_split_sum(partial + (size_t)m * npad + row, (size_t)IM * npad, splits) : 0.0f;

		if (row < n)
			y[(size_t)m * ystride + row] = v;
	}
	fg_kt_mark(7); /* its outputs written */
	if (threadIdx.x == 0)
		counters[blockIdx.x] = 0; /* ready for the next launch (stream-ordered) */
}

/* int4_i8 on M = 2, 4 or 8 rows split before (mv of them given, the rest
 * not stored), in the m = 1 plan: parts holds the rows as i8_split_rows
 * leaves them (pair j's parts at parts + j * kpad * 8), pm their mult and
 * then their bias ([pair][group][8] each). The block copies its slice of
 * them into shared memory instead of splitting x, and runs one mma per row
 * pair (an n-tile of 8 B columns) on each A fragment, so every row's sums
 * are the M = 1 launch's. */
template <int M, int G>
__global__ void __launch_bounds__(IW * 32) int4_i8_rows(float *__restrict__ y, const uint4 *__restrict__ words,
							const uint32_t *__restrict__ scales,
							const unsigned char *__restrict__ parts, const float *__restrict__ pm,
							float *__restrict__ partial, unsigned *__restrict__ counters, int n,
							int kpad, int ntiles, int nch, int ngr, int units, int slice,
							int splits, int tpb, int npad, int mv, int ystride,
							const struct fg_kpf pf)
{
	constexpr int UE = G > FG_INT4_I8_CHUNK ? G : FG_INT4_I8_CHUNK; /* elements per unit */
	constexpr int NC = UE / FG_INT4_I8_CHUNK;                       /* chunks per unit */
	constexpr int GU = UE / G;                                      /* groups per unit */
	constexpr int NT = M / 2;                                       /* n-tiles: row pairs */
	extern __shared__ __align__(16) unsigned char sm[];
	__shared__ float red[IW][16][M];
	__shared__ unsigned last;
	int sp = blockIdx.y, nw = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int g = lane >> 2, t = lane & 3, wpt = nw / tpb, wi = warp / tpb;
	int tile = blockIdx.x * tpb + warp % tpb; /* this warp's tile */
	int u0 = sp * slice, nu = tile < ntiles ? min(units, u0 + slice) - u0 : 0;
	/* the slice's units; pair j's parts at sm + j * nus * UE * 8, mult and bias [j][group][8] */
	int nus = min(units, u0 + slice) - u0, np = (mv + 1) / 2;
	float *mult = (float *)(sm + (size_t)nus * UE * FG_I8_PARTS * M);
	int *bias = (int *)(mult + nus * GU * 8 * NT);
	const uint4 *wp = words + ((size_t)tile * nch + (size_t)u0 * NC) * 32 + lane;
	const uint32_t *sq = scales + ((size_t)tile * ngr + (size_t)u0 * GU) * 8 + g;
	uint4 wv[IU][NC];
	uint32_t sv[IU][GU];
	float acc0[NT], acc1[NT];

#pragma unroll
	for (int j = 0; j < NT; j++)
		acc0[j] = acc1[j] = 0.0f;

	fg_pdl_trigger();
	fg_pf_issue(pf); /* a later kernel's weights into L2 (fg_kctx_prefetch) */
	/* the first units' weights before waiting for the kernel that writes x */
#pragma unroll
	for (int uu = 0; uu < IU; uu++)
		if (wi + uu * wpt < nu)
			i8_fetch<NC, GU>(wv[uu], sv[uu], wp, sq, wi + uu * wpt);
	fg_pdl_wait();
	{ /* each pair's slice of the split rows, as it lies */
		const int *pb = (const int *)(pm + (size_t)np * ngr * 8);
		int nb = nus * UE * 8, ng = nus * GU * 8;

		for (int j = 0; j < np; j++) {
			const unsigned char *src = parts + ((size_t)j * kpad + (size_t)u0 * UE) * 8;

			for (int o = threadIdx.x * 16; o < nb; o += blockDim.x * 16)
				i8_cp16(sm + (size_t)j * nb + o, src + o);
			for (int o = threadIdx.x * 4; o < ng; o += blockDim.x * 4) {
				size_t at = (size_t)j * ngr * 8 + (size_t)u0 * GU * 8 + o;

				i8_cp16(mult + j * ng + o, pm + at);
				i8_cp16(bias + j * ng + o, pb + at);
			}
		}
		asm volatile("cp.async.wait_all;" ::: "memory");
	}
	__syncthreads();
	for (int base = wi; base < nu; base += wpt * IU) {
#pragma unroll
		for (int uu = 0; uu < IU; uu++) {
			int u = base + uu * wpt, un = u + wpt * IU;

			if (u < nu) {
				uint4 cur[NC];
				uint32_t cs[GU];
				int c4[NT][4];

#pragma unroll
				for (int j = 0; j < NT; j++)
					c4[j][0] = c4[j][1] = c4[j][2] = c4[j][3] = 0;
				i8_take<NC, GU>(cur, cs, wv[uu], sv[uu], wp, sq, un, nu);
#pragma unroll
				for (int c = 0; c < NC; c++)
#pragma unroll
					for (int h = 0; h < 2; h++) {
						int s = (u * NC + c) * 2 + h;
						uint32_t a[4];

						i8_afrag(a, cur[c], h);
#pragma unroll
						for (int j = 0; j < NT; j++) {
							uint2 b = make_uint2(0u, 0u);

							if (j < np) {
								b = *(const uint2 *)(sm + (size_t)j * nus * UE * 8 + s * 256 + t * 64 +
										     g * 8);
								mma_u8s8(c4[j], a, b.x, b.y);
							}
						}
						if (G == 32 || (c == NC - 1 && h == 1)) { /* the end of a group */
							int q = G == 32 ? h : 0, gl = u * GU + q;

#pragma unroll
							for (int j = 0; j < NT; j++) {
								int mo = j * nus * GU * 8 + gl * 8 + 2 * t;

								i8_group_end(&acc0[j], &acc1[j], c4[j], *(const float2 *)(mult + mo),
									     *(const int2 *)(bias + mo), cs[q]);
							}
						}
					}
			}
		}
	}
#pragma unroll
	for (int j = 0; j < NT; j++) { /* parts 0-1 + parts 2-3 of each vector, lane 4m of a pair's quad keeps it */
		float o0 = acc0[j] + __shfl_xor_sync(0xffffffffu, acc0[j], 1);
		float o1 = acc1[j] + __shfl_xor_sync(0xffffffffu, acc1[j], 1);
		int m = 2 * j + (t >> 1);

		if (!(t & 1) && m < M) {
			red[warp][g][m] = o0;
			red[warp][g + 8][m] = o1;
		}
	}
	__syncthreads();
	/* per tile, its warps in order (more outputs than threads: in turn) */
	for (int i = threadIdx.x; i < 16 * M * tpb; i += blockDim.x) {
		int r = i & 15, m = (i >> 4) % M, tl = (i >> 4) / M;
		int row = (blockIdx.x * tpb + tl) * 16 + r;
		float v = 0.0f;

		for (int w = 0; w < wpt && row < npad; w++)
			v += red[w * tpb + tl][r][m];
		if (splits == 1) {
			if (row < n && m < mv)
				y[(size_t)m * ystride + row] = v;
		} else if (row < npad) {
			partial[((size_t)sp * M + m) * npad + row] = v;
		}
	}
	if (splits == 1 || !i8_last_split(counters, splits, &last))
		return;
	for (int i = threadIdx.x; i < 16 * M * tpb; i += blockDim.x) {
		int r = i & 15, m = (i >> 4) % M, tl = (i >> 4) / M;
		int row = (blockIdx.x * tpb + tl) * 16 + r;
		float v = row < npad ? fg_split_sum(partial + (size_t)m * npad + row, (size_t)M * npad, splits) : 0.0f;

		if (row < n && m < mv)
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
 * x, so a long K in one block is a long serial chain), or two splits of at
 * most w->pair_stage where that is enough (two splits meet without a
 * counted tail: i8_pair, i8_red) whose groups a block stages in one round
 * of loads a warp (2048 activations in groups of 128), then the fewest
 * tiles per block that keep the blocks within one wave of resident blocks
 * (w->wave), then more K splits only where the blocks would leave SMs idle,
 * just enough to cover them. */
static void i8_plan(const struct fg_kint4 *w, int m, int *splits, int *slice, int *wpt, int *tpb)
{
	int max_slice = ISMEM / i8_unit_bytes(m, w->group), s = w->splits, t = 1;

	if (s <= 0) {
		int unit = w->kpad / w->units, blocks;

		s = (w->units * unit + w->stage - 1) / w->stage;
		if (s > 2 && w->units * unit <= 2 * w->pair_stage &&
		    (w->units * unit / 2 + w->group - 1) / w->group <= IW * ISU)
			s = 2;
		while (t < IW && (w->tiles + t - 1) / t * s > w->wave)
			t *= 2;
		blocks = (w->tiles + t - 1) / t;
		/* fill the SMs with more splits, but not a launch of two that
		 * meets in i8_pair's slots (1.2-1.4 % a token on an H100: the PLE
		 * gate, 7 -> 2 splits; docs/bench.md) */
		if (blocks * s < w->sms && !(s == 2 && w->pair && !w->pair_fill))
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

/* The slots of i8_pair for a matrix whose launches of one or two vectors
 * take two splits (FG_I8_PAIR=0: none, every split launch counts its
 * blocks); on a failure the matrix is freed. */
static int i8_pairs_new(struct fg_kctx *ctx, struct fg_kint4 *w, struct fg_err *err)
{
	size_t bytes = sizeof(unsigned long long) * IM * (size_t)w->npad;
	int splits[IM], slice, wpt, tpb, rc = 0, want = 0;

	for (int m = 1; m <= IM; m++) {
		i8_plan(w, m, &splits[m - 1], &slice, &wpt, &tpb);
		want |= splits[m - 1] == 2;
	}
	if (!want || !w->pair)
		return 0;
	rc = fg_kmem_alloc(ctx, (void **)&w->d_pairs, bytes, err);
	if (!rc)
		rc = fg_kmem_fill(ctx, w->d_pairs, 0, bytes, err);
	if (!rc)
		rc = fg_kctx_sync(ctx, err);
	if (rc)
		fg_kint4_free(ctx, w);
	return rc;
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

		if (fg_kocc(ctx, &per, (const void *)int4_i8<1, true, 128>, IW * 32, ISMEM) != cudaSuccess || per < 1)
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
		w->pair_stage = i8_env("FG_I8_PAIR_STAGE"); /* 0: never (measurements) */
		if (w->pair_stage < 0)
			w->pair_stage = IPSTAGE;
		/* two splits meet in i8_pair's slots unless FG_I8_PAIR=0;
		 * FG_I8_PAIR_FILL=1 fills the SMs with more splits as before */
		w->pair = !(getenv("FG_I8_PAIR") && !strcmp(getenv("FG_I8_PAIR"), "0"));
		w->pair_fill = getenv("FG_I8_PAIR_FILL") && !strcmp(getenv("FG_I8_PAIR_FILL"), "1");
		/* the partial sums hold the most splits a launch can take */
		w->splits = splits > 0 ? splits : 0;
		w->max_splits = splits > 0 ? splits : w->sms + (d.kpad + w->stage - 1) / w->stage;
		if (w->max_splits > d.units)
			w->max_splits = d.units;
		if (w->max_splits < need)
			w->max_splits = need;
	}
#ifdef FG_I8_DELAY
	{
		int ns = i8_env("FG_I8_DELAY"), blocks = i8_env("FG_I8_DELAY_BLOCKS");

		i8_dly[0] = ns > 0 ? (unsigned)ns : 0u;
		i8_dly[1] = blocks >= 0 ? (unsigned)blocks : ~0u; /* unset: every block */
	}
#endif
	rc = fg_int4_i8_repack(hw, hs, packed, scale_bf16, n, k, group, err);
	rc = fg_kint4_upload(ctx, out, w, rc, hw, wb, hs, sb, d.tiles,
			     sizeof(float) * (size_t)w->max_splits * IM * d.npad, err);
	if (!rc) {
		rc = i8_pairs_new(ctx, *out, err);
		if (rc)
			*out = NULL; /* i8_pairs_new freed it */
	}
	return rc;
}

template <int M, bool GG, int G>
static cudaError_t i8_launch_g(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			       const float *d_x2, float *clr = NULL, int nclr = 0, int red = 0)
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
				  (const uint32_t *)w->d_scales, d_x, d_x2, w->d_partial, (unsigned *)w->d_counters,
				  w->d_pairs, w->n, w->k, w->tiles, w->chunks, w->kpad / w->group, w->units, slice, splits,
				  tpb, w->npad, w->k, w->n, fg_pf_take(ctx), clr, nclr, red I8_DLY_ARGS);
}

template <int M, bool GG>
static cudaError_t i8_launch(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			     const float *d_x2, float *clr = NULL, int nclr = 0, int red = 0)
{
	switch (w->group) {
	case 32: return i8_launch_g<M, GG, 32>(ctx, d_y, w, d_x, d_x2, clr, nclr, red);
	case 64: return i8_launch_g<M, GG, 64>(ctx, d_y, w, d_x, d_x2, clr, nclr, red);
	case 128: return i8_launch_g<M, GG, 128>(ctx, d_y, w, d_x, d_x2, clr, nclr, red);
	default: return i8_launch_g<M, GG, 256>(ctx, d_y, w, d_x, d_x2, clr, nclr, red);
	}
}

extern "C" int fg_k_int4_red(const struct fg_kint4 *w)
{
	int slice, warps;

	return fg_kint4_i8_plan(w, 1, &slice, &warps) == 2;
}

cudaError_t fg_kint4_i8_matvec_red(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
				   const float *d_up, float *clr, int nclr)
{
	if (d_up)
		return i8_launch<1, true>(ctx, d_y, w, d_x, d_up, clr, nclr, 1);
	return i8_launch<1, false>(ctx, d_y, w, d_x, NULL, clr, nclr, 1);
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
 * of W warps owns W * TW tiles of 16 rows (TW per warp) and TP token pairs;
 * it walks the tiles' units in the plan's chain order (i8_unit_at, a table
 * in shared memory), its threads copying each stage of units (the tiles'
 * weights and scales, the pairs' parts, mult and bias) into shared memory
 * with cp.async ns - 1 stages ahead; each warp runs one mma per tile, pair
 * and k-step. Where the plan splits K, each split is a block of its own
 * (blockIdx.z, ks) that writes its split's sum into the scratch, and
 * i8_gemm_fold adds the splits in order, as the one block would (i8_gemm_cfg
 * picks the shape). The token blocks of a tile are neighbours in
 * blockIdx.x, so their weight reads meet in L2. */

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

/* Shared memory of the GEMM: ns stages of DU units each; a stage holds, per
 * unit d and token pair p, the pair's B fragments of the unit (UE * 8
 * bytes), its mult and bias (GU groups x 8 columns each), and, per tile of
 * the block, the tile's weights of the unit (NC chunks x 512 bytes) and
 * scales (GU x 32 bytes). All of it moves by cp.async, ns - 1 stages ahead
 * of the mma. */

template <int G>
struct i8g {
	static constexpr int UE = G > FG_INT4_I8_CHUNK ? G : FG_INT4_I8_CHUNK; /* elements per unit */
	static constexpr int NC = UE / FG_INT4_I8_CHUNK;                       /* chunks per unit */
	static constexpr int GU = UE / G;                                      /* groups per unit */
	static constexpr int DU = NC >= 4 ? 1 : 4 / NC;                        /* units per stage */
	static constexpr int BP = UE * 8 + GU * 64;                            /* bytes per unit and pair */
	static constexpr int AP = NC * 512 + GU * 32;                          /* bytes per unit and tile */
	static constexpr __host__ __device__ int stage(int tp, int nw) { return DU * (tp * BP + nw * AP); }
};

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
template <int G, int TP, int W, int TW>
__device__ __forceinline__ void i8_gemm_issue(unsigned char *sm, bool a, int st, const unsigned *ord,
					      const unsigned char *words, const unsigned char *scales,
					      const unsigned char *parts, const unsigned char *mult,
					      const unsigned char *bias, int tile0, int ntiles, int nch, int ngr, int i0, int i1,
					      int np, size_t bst, size_t mst)
{
	typedef i8g<G> C;

#pragma unroll
	for (int d = 0; d < C::DU; d++) {
		int i = i0 + st * C::DU + d, u;

		if (i >= i1)
			break;
		u = (int)(ord[i] & 0x0fffffffu);
		if (a) { /* the block's tiles: NC * 32 weight pieces, then GU * 2 scale pieces each */
			constexpr int PP = C::AP / 16;

			for (int x = threadIdx.x; x < W * TW * PP; x += W * 32) {
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

			for (int x = threadIdx.x; x < TP * PP; x += W * 32) {
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

template <int G, int TP, int W, int TW>
__global__ void __launch_bounds__(W * 32) int4_i8_gemm(float *__restrict__ y, const unsigned char *__restrict__ words,
							const unsigned char *__restrict__ scales,
							const unsigned char *__restrict__ parts,
							const unsigned char *__restrict__ mult,
							const unsigned char *__restrict__ bias, int n, int ntiles, int nch,
							int ngr, int units, int slice, int splits, int wpt, int npairs,
							int rows, int kpad, int ks, int ns)
{
	typedef i8g<G> C;
	constexpr int SB = C::stage(TP, W * TW);
	extern __shared__ __align__(16) unsigned char sm[];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	/* this warp's tiles: tile .. tile + TW - 1 */
	int tile0 = blockIdx.y * W * TW, tile = tile0 + warp * TW, pr0 = blockIdx.x * TP, np = min(TP, npairs - pr0);
	/* ks: block z walks split z only and writes its sum to y + z * rows * n */
	int i0 = ks ? blockIdx.z * slice : 0, i1 = ks ? min(units, i0 + slice) : units;
	int nst = (i1 - i0 + C::DU - 1) / C::DU;
	size_t bst = (size_t)kpad * 8, mst = (size_t)ngr * 32; /* bytes per pair */
	const unsigned char *pp = parts + pr0 * bst, *mp = mult + pr0 * mst, *bp = bias + pr0 * mst;
	unsigned *ord = (unsigned *)(sm + ns * SB); /* unit | end flags << 28, in the plan's order */
	float acc[TW][TP][2], v[TW][TP][2], yt[TW][TP][2];

	fg_pdl_trigger();
#pragma unroll
	for (int j = 0; j < TW; j++)
#pragma unroll
		for (int p = 0; p < TP; p++)
			acc[j][p][0] = acc[j][p][1] = v[j][p][0] = v[j][p][1] = yt[j][p][0] = yt[j][p][1] = 0.0f;
	for (int i = i0 + threadIdx.x; i < i1; i += W * 32) {
		int e, u = i8_unit_at(i, units, slice, wpt, &e);

		ord[i] = (unsigned)u | (unsigned)e << 28;
	}
	__syncthreads();
	/* the first stages' weights before waiting for the kernel that splits x
	 * (they join the first stage's group) */
	for (int s = 0; s < ns - 1 && s < nst; s++)
		i8_gemm_issue<G, TP, W, TW>(sm + s * SB, true, s, ord, words, scales, pp, mp, bp, tile0, ntiles, nch,
					    ngr, i0, i1, np, bst, mst);
	fg_pdl_wait();
	for (int s = 0; s < ns - 1; s++) {
		if (s < nst)
			i8_gemm_issue<G, TP, W, TW>(sm + s * SB, false, s, ord, words, scales, pp, mp, bp, tile0, ntiles,
						    nch, ngr, i0, i1, np, bst, mst);
		i8_cp_commit();
	}
	for (int st = 0; st < nst; st++) {
		const unsigned char *ss = sm + (st % ns) * SB;

		if (ns == 4) /* the stage st has landed: at most ns - 2 newer groups pending */
			i8_cp_wait<2>();
		else if (ns == 3)
			i8_cp_wait<1>();
		else
			i8_cp_wait<0>();
		__syncthreads();
		{ /* the stage ns - 1 ahead, into the buffer every warp finished with */
			int s2 = st + ns - 1;

			if (s2 < nst) {
				unsigned char *sd = sm + (s2 % ns) * SB;

				i8_gemm_issue<G, TP, W, TW>(sd, true, s2, ord, words, scales, pp, mp, bp, tile0, ntiles, nch,
							    ngr, i0, i1, np, bst, mst);
				i8_gemm_issue<G, TP, W, TW>(sd, false, s2, ord, words, scales, pp, mp, bp, tile0, ntiles,
							    nch, ngr, i0, i1, np, bst, mst);
			}
			i8_cp_commit();
		}
		if (tile >= ntiles)
			continue;
#pragma unroll
		for (int d = 0; d < C::DU; d++) {
			int i = i0 + st * C::DU + d, end;
			const unsigned char *sa = ss + C::DU * TP * C::BP + (warp * TW * C::DU + d) * C::AP;
			const unsigned char *sb = ss + d * TP * C::BP;
			int c4[TW][TP][4];

			if (i >= i1)
				break;
			end = (int)(ord[i] >> 28);
#pragma unroll
			for (int j = 0; j < TW; j++)
#pragma unroll
				for (int p = 0; p < TP; p++)
					c4[j][p][0] = c4[j][p][1] = c4[j][p][2] = c4[j][p][3] = 0;
#pragma unroll
			for (int c = 0; c < C::NC; c++) {
				uint4 cur[TW];

#pragma unroll
				for (int j = 0; j < TW; j++)
					cur[j] = *(const uint4 *)(sa + j * C::DU * C::AP + c * 512 + lane * 16);
#pragma unroll
				for (int h = 0; h < 2; h++) {
					uint32_t a[TW][4];

#pragma unroll
					for (int j = 0; j < TW; j++) {
						uint32_t w0 = h ? cur[j].z : cur[j].x, w1 = h ? cur[j].w : cur[j].y;

						a[j][0] = w0 & 0x0F0F0F0Fu, a[j][1] = w1 & 0x0F0F0F0Fu;
						a[j][2] = (w0 >> 4) & 0x0F0F0F0Fu, a[j][3] = (w1 >> 4) & 0x0F0F0F0Fu;
					}
#pragma unroll
					for (int p = 0; p < TP; p++)
						if (p < np) {
							uint2 b = *(const uint2 *)(sb + p * C::BP + (c * 2 + h) * 256 + t * 64 + g * 8);

#pragma unroll
							for (int j = 0; j < TW; j++)
								mma_u8s8(c4[j][p], a[j], b.x, b.y);
						}
					if (G == 32 || (c == C::NC - 1 && h == 1)) { /* the end of a group */
						int q = G == 32 ? h : 0;
						float s0[TW], s1[TW];

#pragma unroll
						for (int j = 0; j < TW; j++) {
							uint32_t cs = *(const uint32_t *)(sa + j * C::DU * C::AP + C::NC * 512 + q * 32 +
											  g * 4);

							s0[j] = __uint_as_float(cs << 16);
							s1[j] = __uint_as_float(cs & 0xffff0000u);
						}
#pragma unroll
						for (int p = 0; p < TP; p++)
							if (p < np) {
								const unsigned char *gp = sb + p * C::BP + C::UE * 8 + q * 32 + t * 8;
								float2 mu = *(const float2 *)gp;
								int2 bi = *(const int2 *)(gp + C::GU * 32);

#pragma unroll
								for (int j = 0; j < TW; j++) {
									int *cc = c4[j][p];

									acc[j][p][0] = fmaf(fmaf((float)(cc[1] - bi.y), mu.y,
												 (float)(cc[0] - bi.x) * mu.x),
											    s0[j], acc[j][p][0]);
									acc[j][p][1] = fmaf(fmaf((float)(cc[3] - bi.y), mu.y,
												 (float)(cc[2] - bi.x) * mu.x),
											    s1[j], acc[j][p][1]);
									cc[0] = cc[1] = cc[2] = cc[3] = 0;
								}
							}
					}
				}
			}
			if (end & 1) { /* a chain's end: parts 0-1 + parts 2-3, then into its split's sum */
#pragma unroll
				for (int j = 0; j < TW; j++)
#pragma unroll
					for (int p = 0; p < TP; p++)
						if (p < np) {
							v[j][p][0] += acc[j][p][0] + __shfl_xor_sync(0xffffffffu, acc[j][p][0], 1);
							v[j][p][1] += acc[j][p][1] + __shfl_xor_sync(0xffffffffu, acc[j][p][1], 1);
							acc[j][p][0] = acc[j][p][1] = 0.0f;
						}
			}
			if (end & 2) { /* a split's end: its empty chains (0 + 0 each), then into the total */
				int sp = i / slice, nu = min(units - sp * slice, slice);

#pragma unroll
				for (int j = 0; j < TW; j++)
#pragma unroll
					for (int p = 0; p < TP; p++) {
						for (int w = nu; w < wpt; w++) {
							v[j][p][0] += 0.0f + 0.0f;
							v[j][p][1] += 0.0f + 0.0f;
						}
						yt[j][p][0] = splits == 1 || ks ? v[j][p][0] : yt[j][p][0] + v[j][p][0];
						yt[j][p][1] = splits == 1 || ks ? v[j][p][1] : yt[j][p][1] + v[j][p][1];
						v[j][p][0] = v[j][p][1] = 0.0f;
					}
			}
		}
	}
	i8_cp_wait<0>();
	if (tile >= ntiles || (t & 1)) /* lanes 0 and 2 of a quad write tokens 2P and 2P + 1 */
		return;
	y += (size_t)blockIdx.z * rows * n;
#pragma unroll
	for (int j = 0; j < TW; j++)
#pragma unroll
		for (int p = 0; p < TP; p++) {
			int tok = 2 * (pr0 + p) + (t >> 1), row = (tile + j) * 16 + g;

			if (p < np && tok < rows) {
				if (row < n)
					y[(size_t)tok * n + row] = yt[j][p][0];
				if (row + 8 < n)
					y[(size_t)tok * n + row + 8] = yt[j][p][1];
			}
		}
}

/* The splits' sums of a K-split GEMM (ks) in split order from 0, as the
 * kernel adds them when one block walks every split: y[i] = ((0 + p[0][i])
 * + p[1][i]) + ...; p: splits arrays of count floats. */
__global__ void __launch_bounds__(256) i8_gemm_fold(float *__restrict__ y, const float *__restrict__ p,
						    size_t count, int splits)
{
	size_t i = (size_t)blockIdx.x * 256 + threadIdx.x;

	fg_pdl_trigger();
	fg_pdl_wait();
	if (i < count) {
		float v = 0.0f;

		for (int s = 0; s < splits; s++)
			v += p[(size_t)s * count + i];
		y[i] = v;
	}
}

/* Experiments: FG_I8_GEMM_TP=1|2|4|8, _KS=0|1, _W=4|8, _TW=1|2, _NS=2|3|4
 * (-1: the plan's choice), read once and again by fg_kint4_i8_gemm_env. */
static int i8_ftp, i8_fks, i8_fnw, i8_ftw, i8_fns, i8_fread;

extern "C" void fg_kint4_i8_gemm_env(void)
{
	i8_ftp = i8_env("FG_I8_GEMM_TP");
	i8_fks = i8_env("FG_I8_GEMM_KS");
	i8_fnw = i8_env("FG_I8_GEMM_W");
	i8_ftw = i8_env("FG_I8_GEMM_TW");
	i8_fns = i8_env("FG_I8_GEMM_NS");
	i8_fread = 1;
}

/* A GEMM launch's shape: token pairs per warp (tp), warps per block (nw),
 * tiles per warp (tw), cp.async stages (ns), blocks split K (ks: one block
 * per split of the m = 1 plan, i8_gemm_fold adds the splits). */
struct i8_gcfg {
	int tp, nw, tw, ns, ks;
};

/* Dynamic shared memory of a GEMM launch (i8g<G>::stage, ns of them, and
 * the unit table). */
static size_t i8_gemm_smem(const struct fg_kint4 *w, const struct i8_gcfg *c)
{
	int ue = w->group > FG_INT4_I8_CHUNK ? w->group : FG_INT4_I8_CHUNK, nc = ue / FG_INT4_I8_CHUNK;
	int gu = ue / w->group, du = nc >= 4 ? 1 : 4 / nc;
	size_t stage = (size_t)du * (c->tp * (ue * 8 + gu * 64) + c->nw * c->tw * (nc * 512 + gu * 32));

	return (size_t)c->ns * stage + ((size_t)w->units * 4 + 15) / 16 * 16;
}

/* Blocks of 8 warps, one tile each; K split across blocks where the m = 1
 * plan splits it; token pairs per warp: the most (up to 8, no more than the
 * pairs) that still give every SM 4 warps; 3 stages for 8 pairs (2 blocks of
 * 8 warps per SM on sm_90), else 4; then fewer pairs and stages until a
 * block fits the device's shared memory (sm_86: 99 KB). Measured on an H200
 * (docs/bench.md, gemm14). */
static void i8_gemm_cfg(struct i8_gcfg *c, const struct fg_kctx *ctx, const struct fg_kint4 *w, int pairs,
			int splits)
{
	size_t limit = ctx->prop.sharedMemPerBlockOptin;
	int ftp, fks, fnw, ftw, fns;
	long segs;

	if (!i8_fread)
		fg_kint4_i8_gemm_env();
	ftp = i8_ftp, fks = i8_fks, fnw = i8_fnw, ftw = i8_ftw, fns = i8_fns;
	c->ks = splits > 1 && (fks == 0 || fks == 1 ? fks : 1);
	c->nw = fnw == 4 ? 4 : 8;
	c->tw = ftw == 2 ? 2 : 1;
	segs = c->ks ? splits : 1;
	if (ftp == 1 || ftp == 2 || ftp == 4 || ftp == 8) {
		c->tp = ftp;
	} else {
		c->tp = 8;
		while (c->tp > 1 && (c->tp / 2 >= pairs ||
				     (long)(w->tiles + c->tw - 1) / c->tw * ((pairs + c->tp - 1) / c->tp) * segs <
					     4L * w->sms))
			c->tp /= 2;
	}
	c->ns = fns >= 2 && fns <= 4 ? fns : c->tp >= 8 ? 3 : 4;
	while (i8_gemm_smem(w, c) > limit && (c->tp > 1 || c->ns > 2)) {
		if (c->tp > 1)
			c->tp /= 2;
		else
			c->ns--;
	}
}

template <int G, int TP, int W, int TW>
static cudaError_t i8_gemm_launch_t(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w,
				    const unsigned char *parts, const unsigned char *mult, const unsigned char *bias,
				    int pairs, int rows, int splits, int slice, int wpt, const struct i8_gcfg *cfg,
				    float *part)
{
	static size_t allowed; /* the dynamic shared memory the kernel may take */
	static int per[5];     /* resident blocks per SM with ns stages (0: not asked yet) */
	struct i8_gcfg cc = *cfg, *c = &cc;
	dim3 grid((pairs + TP - 1) / TP, (w->tiles + W * TW - 1) / (W * TW), c->ks ? splits : 1);
	long blocks = (long)grid.x * grid.y * grid.z;
	size_t smem;

	/* fewer stages where that brings the whole grid into one wave of
	 * resident blocks (gate|up at 8 rows: 320 blocks of 8 warps, 2 per SM
	 * with 4 stages, 4 with 2); the stages do not change the sums */
	for (int ns = cfg->ns; ns >= 2 && i8_fns < 2; ns--) {
		cc.ns = ns;
		smem = i8_gemm_smem(w, c);
		if (!per[ns]) {
			if (smem > allowed) {
				if (cudaFuncSetAttribute(int4_i8_gemm<G, TP, W, TW>,
							 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
					break;
				allowed = smem;
			}
			if (fg_kocc(ctx, &per[ns], (const void *)int4_i8_gemm<G, TP, W, TW>, W * 32, smem) != cudaSuccess)
				per[ns] = -1;
		}
		if (blocks <= (long)per[ns] * w->sms)
			break;
		cc.ns = cfg->ns; /* none does: the plan's */
	}
	cudaGetLastError();
	smem = i8_gemm_smem(w, c);
	if (smem > allowed) {
		if (cudaFuncSetAttribute(int4_i8_gemm<G, TP, W, TW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
					 (int)smem) != cudaSuccess) {
			cudaGetLastError();
			return cudaErrorNotSupported; /* more than the device has: one-vector launches */
		}
		allowed = smem;
	}
	fg_launch_pdl(ctx, int4_i8_gemm<G, TP, W, TW>, grid, dim3(W * 32), smem, c->ks ? part : d_y,
		      (const unsigned char *)w->d_words, (const unsigned char *)w->d_scales, parts, mult, bias, w->n, w->tiles, w->chunks, w->kpad / w->group, w->units, slice, splits, wpt,
		      pairs, rows, w->kpad, c->ks, c->ns);
	if (c->ks) {
		size_t count = (size_t)rows * w->n;

		fg_launch_pdl(ctx, i8_gemm_fold, dim3((unsigned)((count + 255) / 256)), dim3(256), 0, d_y,
			      (const float *)part, count, splits);
	}
	return cudaGetLastError();
}

template <int G, int W, int TW>
static cudaError_t i8_gemm_launch_w(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w,
				    const unsigned char *parts, const unsigned char *mult, const unsigned char *bias,
				    int pairs, int rows, int splits, int slice, int wpt, const struct i8_gcfg *c,
				    float *part)
{
	switch (c->tp) {
	case 1: return i8_gemm_launch_t<G, 1, W, TW>(ctx, d_y, w, parts, mult, bias, pairs, rows, splits, slice, wpt, c, part);
	case 2: return i8_gemm_launch_t<G, 2, W, TW>(ctx, d_y, w, parts, mult, bias, pairs, rows, splits, slice, wpt, c, part);
	case 4: return i8_gemm_launch_t<G, 4, W, TW>(ctx, d_y, w, parts, mult, bias, pairs, rows, splits, slice, wpt, c, part);
	default: return i8_gemm_launch_t<G, 8, W, TW>(ctx, d_y, w, parts, mult, bias, pairs, rows, splits, slice, wpt, c, part);
	}
}

template <int G>
static cudaError_t i8_gemm_g(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			     const float *d_x2, int rows)
{
	int splits, slice, wpt, tpb, ngr = w->kpad / G, maxpairs;
	/* scratch per pair: parts, mult, bias; with ks the splits' sums of its two tokens */
	size_t per = (size_t)w->kpad * 8 + (size_t)ngr * 8 * (sizeof(float) + sizeof(int)), fit;
	struct i8_gcfg c;

	i8_plan(w, 1, &splits, &slice, &wpt, &tpb); /* the m = 1 launch's order */
	i8_gemm_cfg(&c, ctx, w, (rows + 1) / 2, splits);
	if (c.ks)
		per += (size_t)splits * 2 * w->n * sizeof(float);
	fit = ctx->scratch_bytes / (per + 16);
	maxpairs = fit > 16384 ? 16384 : (int)fit; /* the split's grid: 2 * pairs blocks in y */
	if (maxpairs < 1)
		return cudaErrorNotSupported;
	for (int r0 = 0; r0 < rows; r0 += 2 * maxpairs) {
		int nr = rows - r0 < 2 * maxpairs ? rows - r0 : 2 * maxpairs, pairs = (nr + 1) / 2;
		unsigned char *parts = (unsigned char *)ctx->scratch;
		unsigned char *mult = parts + (size_t)pairs * w->kpad * 8;
		unsigned char *bias = mult + (size_t)pairs * ngr * 8 * sizeof(float);
		float *part = (float *)(bias + ((size_t)pairs * ngr * 8 * sizeof(int) + 15) / 16 * 16);
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
		i8_gemm_cfg(&c, ctx, w, pairs, splits);
		if (c.nw == 8 && c.tw == 1)
			e = i8_gemm_launch_w<G, 8, 1>(ctx, y, w, parts, mult, bias, pairs, nr, splits, slice, wpt, &c, part);
		else if (c.nw == 8)
			e = i8_gemm_launch_w<G, 8, 2>(ctx, y, w, parts, mult, bias, pairs, nr, splits, slice, wpt, &c, part);
		else if (c.tw == 1)
			e = i8_gemm_launch_w<G, 4, 1>(ctx, y, w, parts, mult, bias, pairs, nr, splits, slice, wpt, &c, part);
		else
			e = i8_gemm_launch_w<G, 4, 2>(ctx, y, w, parts, mult, bias, pairs, nr, splits, slice, wpt, &c, part);
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

/* ---- a few rows: the matvec on rows split once ------------------------------
 *
 * 2..FG_I8_ROWS_MAX rows (a speculative verify, a short chunk):
 * i8_split_rows splits each row once into the scratch, as for the GEMM;
 * then one launch of int4_i8_rows in the m = 1 plan: the weights read once,
 * one mma per row pair on each A fragment, each row the m = 1 launch's
 * bits. Where the plan's slice of the rows would not fit I8_MV_SMEM of
 * shared memory (a bound below every supported device's, so the choice is
 * the same everywhere) or its splits' partial sums the matrix's buffer,
 * the GEMM takes them. */
#define I8_MV_SMEM (96 * 1024)

static int i8_mv_m(int m)
{
	return m <= 2 ? 2 : m <= 4 ? 4 : 8;
}

static int i8_rows_ok(const struct fg_kint4 *w, int m)
{
	int splits, slice, wpt, tpb, mm = i8_mv_m(m);

	if (m < 2 || m > IMV)
		return 0;
	i8_plan(w, 1, &splits, &slice, &wpt, &tpb);
	return (size_t)slice * i8_unit_bytes(mm, w->group) <= I8_MV_SMEM && splits * mm <= w->max_splits * IM;
}

template <int M, int G>
static cudaError_t i8_rows_launch(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w,
				  const unsigned char *parts, const float *pm, int rows)
{
	static size_t allowed = 48 * 1024; /* the dynamic shared memory the kernel may take */
	int splits, slice, wpt, tpb;
	size_t smem;

	i8_plan(w, 1, &splits, &slice, &wpt, &tpb); /* the m = 1 launch's order */
	smem = (size_t)slice * i8_unit_bytes(M, w->group);
	if (smem > allowed) {
		if (cudaFuncSetAttribute(int4_i8_rows<M, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
		    cudaSuccess) {
			cudaGetLastError();
			return cudaErrorNotSupported;
		}
		allowed = smem;
	}
	fg_launch_pdl(ctx, int4_i8_rows<M, G>, dim3((w->tiles + tpb - 1) / tpb, splits), dim3(wpt * tpb * 32), smem,
		      d_y, (const uint4 *)w->d_words, (const uint32_t *)w->d_scales, parts, pm, w->d_partial,
		      (unsigned *)w->d_counters, w->n, w->kpad, w->tiles, w->chunks, w->kpad / w->group, w->units, slice,
		      splits, tpb, w->npad, rows, w->n, fg_pf_take(ctx));
	return cudaGetLastError();
}

template <int G>
static cudaError_t i8_rows_g(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			     const float *d_x2, int rows)
{
	int ngr = w->kpad / G, pairs = (rows + 1) / 2;
	unsigned char *parts = (unsigned char *)ctx->scratch;
	unsigned char *mult = parts + (size_t)pairs * w->kpad * 8;
	unsigned char *bias = mult + (size_t)pairs * ngr * 8 * sizeof(float);
	cudaError_t e;

	if ((size_t)pairs * ((size_t)w->kpad * 8 + (size_t)ngr * 8 * 8) > ctx->scratch_bytes)
		return cudaErrorNotSupported;
	if (d_x2)
		fg_launch_pdl(ctx, i8_split_rows<true, G>, dim3((ngr + 7) / 8, 2 * pairs), dim3(256), 0, parts,
			      (float *)mult, (int *)bias, d_x, d_x2, w->k, w->kpad, ngr, rows);
	else
		fg_launch_pdl(ctx, i8_split_rows<false, G>, dim3((ngr + 7) / 8, 2 * pairs), dim3(256), 0, parts,
			      (float *)mult, (int *)bias, d_x, d_x2, w->k, w->kpad, ngr, rows);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	switch (i8_mv_m(rows)) {
	case 2: return i8_rows_launch<2, G>(ctx, d_y, w, parts, (const float *)mult, rows);
	case 4: return i8_rows_launch<4, G>(ctx, d_y, w, parts, (const float *)mult, rows);
	default: return i8_rows_launch<8, G>(ctx, d_y, w, parts, (const float *)mult, rows);
	}
}

/* FG_I8_ROWS_MAX: the most rows that go this way (default 4: at 8 rows the
 * GEMM measured as fast, docs/bench.md; 0: none) */
static int i8_rows_max = -1;

cudaError_t fg_kint4_i8_rows(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			     const float *d_x2, int rows)
{
	if (i8_rows_max < 0) {
		const char *e = getenv("FG_I8_ROWS_MAX");

		i8_rows_max = e ? (int)strtol(e, NULL, 10) : 4;
	}
	if (rows > i8_rows_max || !i8_rows_ok(w, rows))
		return cudaErrorNotSupported;
	switch (w->group) {
	case 32: return i8_rows_g<32>(ctx, d_y, w, d_x, d_x2, rows);
	case 64: return i8_rows_g<64>(ctx, d_y, w, d_x, d_x2, rows);
	case 128: return i8_rows_g<128>(ctx, d_y, w, d_x, d_x2, rows);
	default: return i8_rows_g<256>(ctx, d_y, w, d_x, d_x2, rows);
	}
}

FG_KTRACE_TU(int4_i8)
