/* kcommon.cuh - what the kernel files share: the context's inside, error
 * helpers that turn CUDA errors into fgpack errors, bf16 and block-reduction
 * helpers with a fixed order. */
#ifndef FG_KCOMMON_CUH
#define FG_KCOMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/fg_kernels.h"

/* Byte ranges for a kernel to prefetch into L2 (fg_kctx_prefetch). */
struct fg_kpf {
	const char *p[FG_PF_RANGES];
	unsigned long long n[FG_PF_RANGES];
};

/* A greedy step's answer kept for the next step (fg_kctx_chain): best_final
 * writes it into ring[pos & mask] and makes it, as an input, idpos's id at
 * pos + 1. idpos NULL: nothing chained. */
struct fg_kchain {
	int32_t *idpos, *ring;
	int mask, n_mm;
	int32_t mm[3], pad;
};

#define FG_KCTX_MARKS 2 /* events fg_kctx_mark records */

struct fg_kctx {
	int dev;
	cudaStream_t stream;
	cudaDeviceProp prop;
	char name[192];
	void *scratch; /* per-op temporaries between an op's kernels (stream-ordered) */
	size_t scratch_bytes;
	cudaEvent_t ev0, ev1;
	cudaEvent_t mark[FG_KCTX_MARKS]; /* fg_kctx_mark, fg_kctx_wait (made at first use) */
	struct fg_kchain chain;          /* for the next fg_k_softcap_argmax (fg_kctx_chain) */
	int pdl; /* launch the matvec with programmatic dependent launch (sm_90+) */
	int int4_kind;      /* FG_INT4_FMA, FG_INT4_MMA or FG_INT4_I8 for new matrices */
	unsigned *counters; /* FG_CTX_COUNTERS integers: the decode attention's arrivals a kv head (attn_fused) */
	int pf_on;          /* L2 prefetch level (fg_kctx_set_prefetch): 0, 1 or 2 */
	struct fg_kpf pf;   /* ranges for the next launch that takes them */
	int attn_fused;     /* fg_k_attn_decode_post in one launch (fg_kctx_set_attn_fused) */
	int emu86;          /* FG_EMULATE_SM86=1: plans made for an A10G's limits (fg_kocc) */
	int code_arch;      /* the virtual arch the kernels run from (86, 90): cudaFuncAttributes.ptxVersion */
	int sm90;           /* an sm_90+ GPU running sm_90+ code: PDL, the L2 prefetches and clusters */
	int attn_cluster;   /* the decode attention's chunk blocks as clusters where they fit (FG_ATTN_CLUSTER) */
	int short_keys;     /* the keys a short decode attention launch serves (fg_kctx_attn_short_keys), 0: none */
	int attn_short;     /* decode attention launches for positions below short_keys only (fg_kctx_set_attn_short) */
	int attn_grp;       /* the step's attention built for its exact group where there is one (fg_kctx_set_attn_grp) */
	int norm_wide;      /* FG_NORM_WIDE=1: the one-block norms launch 1024 threads whatever the row (measurements) */
};

/* Blocks of f (threads a block, smem bytes of dynamic shared memory)
 * resident on one SM, for the plans: the CUDA runtime's answer for this GPU,
 * or under FG_EMULATE_SM86 an A10G's (sm_86) limits. */
cudaError_t fg_kocc(const struct fg_kctx *ctx, int *per, const void *f, int threads, size_t smem);

/* Clusters of shape cl (more than 8 blocks allowed where the GPU takes
 * them) of f with this grid, block and dynamic shared memory that the GPU
 * holds at once (cudaOccupancyMaxActiveClusters); 0 where none fits or the
 * question fails (the error cleared). */
int fg_kclusters(const void *f, dim3 grid, dim3 block, size_t smem, dim3 cl);

/* The queued prefetch ranges, for a launch; the queue is empty after. */
static inline struct fg_kpf fg_pf_take(struct fg_kctx *ctx)
{
	struct fg_kpf r = ctx->pf;

	ctx->pf = fg_kpf();
	return r;
}

#define FG_PF_PIECE (16u << 10) /* bytes per prefetch instruction */
#ifndef FG_PF_DEFAULT
#define FG_PF_DEFAULT 1 /* the prefetch level without FG_PREFETCH */
#endif

/* This block's share of each range, in FG_PF_PIECE pieces over its threads.
 * Blocks split a range evenly; pointers and lengths stay 16-byte multiples. */
__device__ __forceinline__ void fg_pf_issue(const struct fg_kpf &pf)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	unsigned long long nb = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
	unsigned long long b = blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);

#pragma unroll
	for (int r = 0; r < FG_PF_RANGES; r++) {
		unsigned long long n = pf.n[r], per, s, e;

		if (!n)
			continue;
		per = ((n + nb - 1) / nb + 15) & ~15ull;
		s = b * per;
		e = s + per < n ? s + per : n;
		for (unsigned long long o = s + (unsigned long long)threadIdx.x * FG_PF_PIECE; o < e;
		     o += (unsigned long long)blockDim.x * FG_PF_PIECE) {
			unsigned len = (unsigned)(e - o < FG_PF_PIECE ? e - o : FG_PF_PIECE) & ~15u;

			if (len)
				asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(pf.p[r] + o), "r"(len)
					     : "memory");
		}
	}
#else
	(void)pf;
#endif
}

#ifndef FG_ATTN_FUSED_DEFAULT
/* without FG_ATTN_FUSED: qkv_post inside the attention, one launch (with
 * 16-key chunks it measured 0.025-0.029 ms per E4B step faster than the
 * two launches at every position on an H200; with 32-key chunks it was
 * not: docs/bench.md, fourteenth session) */
#define FG_ATTN_FUSED_DEFAULT 1
#endif

#define FG_SCRATCH_BYTES ((size_t)64 << 20)
#define FG_CTX_COUNTERS 4096

/* Returns FG_EDEVICE naming what failed when call does not succeed. */
#define FG_CK(call, what)                                                                         \
	do {                                                                                      \
		cudaError_t e_ = (call);                                                          \
		if (e_ != cudaSuccess)                                                            \
			return fg_err_set(err, FG_EDEVICE, "%s: %s (%s)", what, cudaGetErrorString(e_), \
					  cudaGetErrorName(e_));                                  \
	} while (0)

/* After a launch: a bad configuration or an earlier sticky fault shows here. */
static inline int fg_launched(const char *what, struct fg_err *err)
{
	cudaError_t e = cudaGetLastError();

	if (e != cudaSuccess)
		return fg_err_set(err, FG_EDEVICE, "%s kernel: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
	return 0;
}

static inline int fg_need_ctx(const struct fg_kctx *ctx, struct fg_err *err)
{
	if (!ctx)
		return fg_err_set(err, FG_EINVAL, "no CUDA context");
	return 0;
}

/* Nanoseconds of the GPU's global timer. */
__device__ __forceinline__ unsigned long long fg_gtimer_ns(void)
{
	unsigned long long t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* Programmatic dependent launch: every kernel lets the next one start early
 * (its blocks then wait in fg_pdl_wait until this grid has finished and its
 * writes are visible); a kernel launched with the PDL attribute calls
 * fg_pdl_wait before reading anything an earlier kernel wrote. No-ops before
 * sm_90 and for kernels launched normally. */
#ifdef FG_KTRACE
/* A measuring build (make KTRACE=1; docs/gpu.md, "Where a step's time
 * goes"): thread 0 of every block stores the GPU's global timer when the
 * block starts (fg_pdl_trigger), when its wait returns (fg_pdl_wait) and at
 * the kernel's marks (fg_kt_mark), into the slot of its launch (%gridid
 * modulo the slots) and block; plain stores, no atomics, so the chain
 * measured is the step's own. Each kernel file has its own copy of the
 * buffer's address, set by its fg_kt_set_<file> (FG_KTRACE_TU). */
static __device__ struct fg_ktrec *fg_kt_buf;
static __device__ unsigned fg_kt_slots, fg_kt_maxb;

/* This block's record (thread 0 only, else NULL), its launch's %gridid in *gid */
__device__ __forceinline__ struct fg_ktrec *fg_kt_rec(unsigned long long *gid)
{
	unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);

	if (!fg_kt_buf || threadIdx.x | threadIdx.y | threadIdx.z || b >= fg_kt_maxb)
		return NULL;
	asm volatile("mov.u64 %0, %%gridid;" : "=l"(*gid));
	return fg_kt_buf + (size_t)(*gid % fg_kt_slots) * fg_kt_maxb + b;
}

/* Mark i (0: started, 1: its wait returned, 2-7: the kernel's own). */
__device__ __forceinline__ void fg_kt_mark(int i)
{
	unsigned long long gid;
	struct fg_ktrec *r = fg_kt_rec(&gid);

	if (r) {
		r->t[i] = fg_gtimer_ns();
		if (i < 2) { /* a kernel may wait without a trigger */
			unsigned sm;

			asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
			r->grid = gid;
			r->dims[0] = gridDim.x * gridDim.y * gridDim.z;
			r->dims[1] = blockDim.x * blockDim.y * blockDim.z;
			r->sm = sm;
		}
	}
}

#define FG_KTRACE_TU(file)                                                                                  \
	extern "C" int fg_kt_set_##file(struct fg_ktrec *buf, unsigned slots, unsigned maxb)                \
	{                                                                                                   \
		if (cudaMemcpyToSymbol(fg_kt_buf, &buf, sizeof(buf)) != cudaSuccess ||                      \
		    cudaMemcpyToSymbol(fg_kt_slots, &slots, sizeof(slots)) != cudaSuccess ||                \
		    cudaMemcpyToSymbol(fg_kt_maxb, &maxb, sizeof(maxb)) != cudaSuccess)                     \
			return -1;                                                                          \
		return 0;                                                                                   \
	}
#else
#define fg_kt_mark(i) ((void)0)
#define FG_KTRACE_TU(file)
#endif

__device__ __forceinline__ void fg_pdl_trigger(void)
{
	fg_kt_mark(0);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void fg_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
	fg_kt_mark(1);
}

__device__ __forceinline__ float fg_bf16f(uint16_t b)
{
	return __uint_as_float((uint32_t)b << 16);
}

/* acc plus 16 bytes of a row (8 bf16 or 4 f32; the pointer's type picks)
 * times the activations at x, element by element in order: the bf16/f32
 * matvec (ops.cu) and the experts' (moe.cu) */
__device__ __forceinline__ float fg_dot16(const uint16_t *, uint4 q, const float *x, float acc)
{
	float4 xa = ((const float4 *)x)[0], xb = ((const float4 *)x)[1];

	acc = fmaf(__uint_as_float(q.x << 16), xa.x, acc);
	acc = fmaf(__uint_as_float(q.x & 0xffff0000u), xa.y, acc);
	acc = fmaf(__uint_as_float(q.y << 16), xa.z, acc);
	acc = fmaf(__uint_as_float(q.y & 0xffff0000u), xa.w, acc);
	acc = fmaf(__uint_as_float(q.z << 16), xb.x, acc);
	acc = fmaf(__uint_as_float(q.z & 0xffff0000u), xb.y, acc);
	acc = fmaf(__uint_as_float(q.w << 16), xb.z, acc);
	return fmaf(__uint_as_float(q.w & 0xffff0000u), xb.w, acc);
}

__device__ __forceinline__ float fg_dot16(const float *, uint4 q, const float *x, float acc)
{
	float4 xv = *(const float4 *)x;

	acc = fmaf(__uint_as_float(q.x), xv.x, acc);
	acc = fmaf(__uint_as_float(q.y), xv.y, acc);
	acc = fmaf(__uint_as_float(q.z), xv.z, acc);
	return fmaf(__uint_as_float(q.w), xv.w, acc);
}

/* gelu with the tanh approximation, as torch's approximate="tanh" */
__device__ __forceinline__ float fg_gelu_tanh(float x)
{
	const float k0 = 0.7978845608028654f;

	return 0.5f * x * (1.0f + tanhf(k0 * (x + 0.044715f * x * x * x)));
}

/* A split-K pass's sum: p[0] + p[stride] + ... + p[(n - 1) stride], added
 * in that order from 0.0f (the bits of a plain loop), the partial sums
 * (other blocks wrote them) read through L2 sixteen at a time so that each
 * sixteen share one round trip instead of one each. */
#define FG_SUM_BATCH 16
__device__ __forceinline__ float fg_split_sum(const float *p, size_t stride, int n)
{
	float v = 0.0f;

	for (int s0 = 0; s0 < n; s0 += FG_SUM_BATCH) {
		float t[FG_SUM_BATCH];

#pragma unroll
		for (int u = 0; u < FG_SUM_BATCH; u++)
			t[u] = s0 + u < n ? __ldcg(p + (size_t)(s0 + u) * stride) : 0.0f;
#pragma unroll
		for (int u = 0; u < FG_SUM_BATCH; u++)
			if (s0 + u < n) /* no + 0.0f past n: it would turn -0 into +0 */
				v += t[u];
	}
	return v;
}

/* An atomic add at gpu scope with acquire and release semantics (fg_arrive). */
__device__ __forceinline__ unsigned fg_atom_add_acq_rel(unsigned *p, unsigned v)
{
	unsigned old;

	asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
	return old;
}

/* A counter read with acquire semantics at gpu scope (a spin on arrivals). */
__device__ __forceinline__ unsigned fg_ld_acquire(const unsigned *p)
{
	unsigned v;

	asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

/* Split arrivals without full fences. A block's threads store their
 * partial results, the block meets at a barrier, then thread 0 adds to the
 * launch's counter at gpu scope with acquire and release semantics: the
 * release publishes every store the barrier ordered before it, and in the
 * block that arrives last the acquire makes every other block's visible; a
 * second barrier hands them to its threads (the split-K semaphore's pattern,
 * in place of a __threadfence, a full fence, by each storing thread and again
 * by the last block). Returns the count before the add, to every thread. */
__device__ __forceinline__ unsigned fg_arrive(unsigned *counter, unsigned *shared_old)
{
	__syncthreads();
	if (threadIdx.x == 0)
		*shared_old = fg_atom_add_acq_rel(counter, 1u);
	__syncthreads();
	return *shared_old;
}

/* Sum over a warp by a fixed xor tree: the same bits for the same inputs. */
__device__ __forceinline__ float fg_warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* Block sum (blockDim.x a multiple of 32, <= 1024) in a fixed order; sh holds
 * 33 floats. Every thread gets the result. */
__device__ __forceinline__ float fg_block_sum(float v, float *sh)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;

	v = fg_warp_sum(v);
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < nw ? sh[lane] : 0.0f;
		v = fg_warp_sum(v);
		if (lane == 0)
			sh[32] = v;
	}
	__syncthreads();
	v = sh[32];
	__syncthreads();
	return v;
}

/* INT4 matrices (int4.cu, int4_i8.cu): a new matrix of the kind, its
 * fields n, k, group set, with host buffers of wb and sb bytes for the
 * repacked words and scales (all freed on failure); the upload every layout shares
 * (device memory for the repacked words hw and scales hs, freed here,
 * ncounters zeroed split-K counters, partial_bytes of partial sums; rc is the
 * repack's result; on failure w is freed, on success it goes to *out), and
 * the INT8 tensor-core kernel's constructor and launches. */
int fg_kint4_start(struct fg_kint4 **w, uint32_t **hw, uint16_t **hs, size_t wb, size_t sb, int kind, int n, int k,
		   int group, struct fg_err *err);
int fg_kint4_upload(struct fg_kctx *ctx, struct fg_kint4 **out, struct fg_kint4 *w, int rc, uint32_t *hw, size_t wb,
		    uint16_t *hs, size_t sb, int ncounters, size_t partial_bytes, struct fg_err *err);
int fg_kint4_i8_new(struct fg_kctx *ctx, struct fg_kint4 **out, const int32_t *packed, const uint16_t *scale_bf16,
		    int n, int k, int group, int splits, struct fg_err *err);
cudaError_t fg_kint4_i8_matvec(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x, int m);
cudaError_t fg_kint4_i8_geglu(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_gate,
			      const float *d_up);
cudaError_t fg_kint4_i8_matvec_red(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
				   const float *d_up, float *clr, int nclr);
/* fg_k_int4_gemm of an i8 matrix, 2..8 rows as one matvec launch (the
 * weights read once, each row the m = 1 launch's bits); d_x2 NULL or the up
 * rows; cudaErrorNotSupported (nothing launched) where the m = 1 plan does
 * not fit it (or FG_I8_ROWS_MAX says no): the GEMM below then */
cudaError_t fg_kint4_i8_rows(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			     const float *d_x2, int rows);
/* fg_k_int4_gemm of an i8 matrix: rows >= 2 tokens, d_x2 NULL or the up rows;
 * cudaErrorNotSupported (nothing written) where the GEMM does not fit the
 * device or the scratch: the caller runs one-vector launches instead */
cudaError_t fg_kint4_i8_gemm(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			     const float *d_x2, int rows);

/* Launches kernel k on ctx's stream, with programmatic dependent launch when
 * ctx->pdl (the kernel then overlaps its launch with the previous kernel's
 * tail; every kernel calls fg_pdl_wait before reading), as thread-block
 * clusters of the given shape when it has more than one block. A failure
 * is kept as the last error, which fg_launched reports. */
template <typename... KArgs, typename... Args>
static inline void fg_launch_pdl_cluster(const struct fg_kctx *ctx, void (*k)(KArgs...), dim3 grid, dim3 block,
					 size_t smem, dim3 cluster, Args... args)
{
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[2];
	unsigned n = 0;

	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.dynamicSmemBytes = smem;
	cfg.stream = ctx->stream;
	if (ctx->pdl) {
		at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		at[n++].val.programmaticStreamSerializationAllowed = 1;
	}
	if (cluster.x * cluster.y * cluster.z > 1) {
		at[n].id = cudaLaunchAttributeClusterDimension;
		at[n].val.clusterDim.x = cluster.x;
		at[n].val.clusterDim.y = cluster.y;
		at[n++].val.clusterDim.z = cluster.z;
	}
	cfg.attrs = at;
	cfg.numAttrs = n;
	cudaLaunchKernelEx(&cfg, k, (KArgs)args...);
}

template <typename... KArgs, typename... Args>
static inline void fg_launch_pdl(const struct fg_kctx *ctx, void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem,
				 Args... args)
{
	fg_launch_pdl_cluster(ctx, k, grid, block, smem, dim3(1, 1, 1), args...);
}

#endif
