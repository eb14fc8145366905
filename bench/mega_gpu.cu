/* mega_gpu.cu - whether a persistent kernel whose weights stream apart from
 * its phase barriers beats the engine's PDL launch chain, with the
 * dependency of a real matvec chain (docs/gpu.md, "Left": the launch
 * count). phase_gpu.cu measured both structures with a trivial dependency
 * and each phase's weights loaded at most one phase ahead; here every phase
 * is an INT4 matvec of R rows by K = 2560 whose input is the output of the
 * phase before (all of it, from every block), and the persistent kernel's
 * weights run up to S phases ahead.
 *
 * The same work three ways, in one CUDA graph each:
 *   - pdl: one launch a phase under programmatic dependent launch. Thread 0
 *     of each block starts a bulk copy (TMA, cp.async.bulk) of the block's
 *     rows into shared memory before griddepcontrol.wait, as the engine's
 *     matvecs load their first weights before it; after the wait the block
 *     stages x (the phase before's y, int32, to int8), computes its rows and
 *     writes them.
 *   - pdl, registers: the same launches, each lane's units of its warp's
 *     rows loaded into registers before the wait (plain loads, as the
 *     engine's i8 matvec loads its first units); where a block has at most
 *     32 rows.
 *   - persistent: one block an SM for all phases. A producer warp streams
 *     the block's rows of phase after phase into a ring of S stages (bulk
 *     copies, an mbarrier each way), held back only by the ring's room. The
 *     8 consumer warps wait for a counter that every block of the phase
 *     before adds to once its rows are written (a release add against an
 *     acquire spin), stage x, wait for their stage, compute, write, count.
 *
 * Each row is K 4-bit weights (0..15, two a byte) dotted with K int8
 * activations by dp4a; x is the low byte of each of the phase before's K
 * first outputs. Integer sums: every form gives the same bits, checked
 * against each other and, for a short chain, against the CPU.
 *
 * Build: make build/bench/mega_gpu (where nvcc exists; the persistent
 *        kernel needs sm_90)
 * Run:   build/bench/mega_gpu [phases] [rows a phase] [stages] [indep] [split4]
 *        (defaults 470 and 3392: an E4B step's launches and, at 1280 bytes a
 *        row, its 2.04 GB; rows below 2560: x repeats the outputs, so that
 *        a phase's products and bytes shrink and its chain stays; stages
 *        0: 1, 2, 4 and as many as fit; indep 1:
 *        every phase reads x0 and nothing waits for the phase before, so
 *        that only the weights' streaming is left to time; split4 1: the
 *        register form stages x as the engine does, four bytes an element
 *        with a group's max and sums, stage_x4)
 * Prints the median of 20 graph replays (after 5) per variant: ms, us a
 * phase, GB/s, and the ratio to the PDL chain with one block an SM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <algorithm>
#include <vector>

#define BENCH_NAME "mega_gpu"
#include "gpubench.cuh"

#define K 2560         /* the input: E4B's hidden size */
#define ROWB (K / 2)   /* bytes a row */
#define UNITS (ROWB / 16)
#define CWARPS 8       /* consumer warps */
#define MAXS 16

struct margs {
	const unsigned char *w; /* [phases][rows][ROWB] */
	const int *x0;          /* [K]: phase 0's input */
	int *y;                 /* [2][rows]: phase p writes y[p & 1] */
	int *ysink;             /* [rows]: where phases before the last write with indep */
	unsigned *ctr;          /* [phases]: blocks done with each phase (persistent) */
	int rows, phases, nb, stages;
	int indep;              /* 1: every phase's x is x0 and nothing waits (the streaming alone) */
	unsigned slot;          /* bytes a ring stage (the most rows a block has, 128-byte multiple) */
	unsigned psmem;         /* the persistent kernel's shared memory: all a block may have, so one an SM */
	int split4;             /* the register form stages x as the engine does (stage_x4) */
	int timed;              /* the register form records t */
	unsigned long long *t;  /* [phases][3]: the first wait returned, the last x staged, the last rows written */
};

/* block b's rows of a phase: [r0, r1) */
__device__ __forceinline__ void rows_of(const struct margs &a, int b, int &r0, int &r1)
{
	r0 = (int)((long long)a.rows * b / a.nb);
	r1 = (int)((long long)a.rows * (b + 1) / a.nb);
}

/* the consumers' barrier (named barrier 1, CWARPS warps) */
__device__ __forceinline__ void cbar(void)
{
	asm volatile("bar.sync 1, %0;" ::"r"(CWARPS * 32) : "memory");
}

/* where phase p writes its rows */
__device__ __forceinline__ int *y_of(const struct margs &a, int p)
{
	return a.indep && p < a.phases - 1 ? a.ysink : a.y + (p & 1) * a.rows;
}

/* x for phase p into xs (two planes of K / 2 bytes: the even and the odd
 * elements, so that a weight word's low and high nibbles meet a word each);
 * with fewer rows than K, the phase before's outputs repeat */
__device__ __forceinline__ void stage_x(const struct margs &a, int p, signed char *xs)
{
	bool dep = p && !a.indep;
	const int *src = dep ? a.y + ((p - 1) & 1) * a.rows : a.x0;
	int n = dep ? a.rows : K;

	for (int i = threadIdx.x; i < K; i += CWARPS * 32)
		xs[(i & 1) * (K / 2) + i / 2] = (signed char)(__ldcg(src + (i < n ? i : i % n)) & 0xff);
}

/* one 16-byte unit of a row (32 weights) against x's two planes, into a
 * lane's four partial sums (four in flight, not one chain of dp4a) */
__device__ __forceinline__ void unit_dot(uint4 v, int4 l4, int4 h4, int *part)
{
	unsigned q[4] = {v.x, v.y, v.z, v.w};
	int lo[4] = {l4.x, l4.y, l4.z, l4.w}, hi[4] = {h4.x, h4.y, h4.z, h4.w};

#pragma unroll
	for (int k = 0; k < 4; k++) {
		part[k] = __dp4a((int)(q[k] & 0x0f0f0f0fu), lo[k], part[k]);
		part[k] = __dp4a((int)((q[k] >> 4) & 0x0f0f0f0fu), hi[k], part[k]);
	}
}

/* the warp's row: every lane's four partial sums added up */
__device__ __forceinline__ int warp_total(const int *part)
{
	int acc = (part[0] + part[1]) + (part[2] + part[3]);

#pragma unroll
	for (int o = 16; o; o >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, o);
	return acc;
}

#define XG 128 /* elements a group of stage_x4 */

/* stage_x with the engine's split (kernels/int4_i8.cu, i8_stage): a warp a
 * group of XG, each lane's 4 elements loaded for all its groups first,
 * then per group the largest magnitude (a warp max), each element's four
 * bytes into four planes (the products read the first, the low bytes, as
 * stage_x leaves them) and the four planes' sums (four warp sums), kept
 * with the max in aux as the engine keeps its mult and bias */
__device__ __forceinline__ void stage_x4(const struct margs &a, int p, signed char *xs, volatile signed char *hi3,
					 volatile int *aux)
{
	constexpr int GW = (K / XG + CWARPS - 1) / CWARPS; /* groups a warp, at most */
	bool dep = p && !a.indep;
	const int *src = dep ? a.y + ((p - 1) & 1) * a.rows : a.x0;
	int n = dep ? a.rows : K, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int v[GW][4];

#pragma unroll
	for (int b = 0; b < GW; b++)
#pragma unroll
		for (int i = 0; i < 4; i++) {
			int g = warp + b * CWARPS, e = g * XG + lane * 4 + i;

			v[b][i] = g < K / XG ? __ldcg(src + (e < n ? e : e % n)) : 0;
		}
#pragma unroll
	for (int b = 0; b < GW; b++) {
		int g = warp + b * CWARPS, sum[4] = {0, 0, 0, 0};
		unsigned amax = 0;

		if (g >= K / XG)
			break;
#pragma unroll
		for (int i = 0; i < 4; i++)
			amax = max(amax, (unsigned)abs(v[b][i]));
		amax = __reduce_max_sync(0xffffffffu, amax);
#pragma unroll
		for (int i = 0; i < 4; i++) {
			int e = g * XG + lane * 4 + i;

#pragma unroll
			for (int q = 0; q < 4; q++) {
				signed char c = (signed char)((unsigned)v[b][i] >> (8 * q));

				if (q)
					hi3[(q - 1) * K + e] = c;
				else
					xs[(e & 1) * (K / 2) + e / 2] = c;
				sum[q] += c;
			}
		}
#pragma unroll
		for (int q = 0; q < 4; q++) {
			int t = __reduce_add_sync(0xffffffffu, sum[q]);

			if (lane == q)
				aux[g * 8 + q] = t + (int)amax;
		}
	}
}

/* the block's n rows of a phase, from ws, into y; warp w takes rows w, w + 8, ... */
__device__ __forceinline__ void rows_dot(const unsigned char *ws, const signed char *xs, int *y, int n)
{
	/* x read 16 bytes a lane, as the weights: lanes u and u + 8 reading
	 * single words 16 bytes apart would meet in one bank */
	const int4 *xl = (const int4 *)xs, *xh = (const int4 *)(xs + K / 2);
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

	for (int j = warp; j < n; j += CWARPS) {
		const uint4 *row = (const uint4 *)(ws + (size_t)j * ROWB);
		int part[4] = {0, 0, 0, 0}, acc;

		for (int u = lane; u < UNITS; u += 32)
			unit_dot(row[u], xl[u], xh[u], part);
		acc = warp_total(part);
		if (!lane)
			y[j] = acc;
	}
}

/* one phase, one launch (pdl: launched with programmatic stream
 * serialization) */
__global__ void __launch_bounds__(CWARPS * 32) one_phase(struct margs a, int p)
{
	extern __shared__ __align__(128) unsigned char sm[];
	signed char *xs = (signed char *)sm + a.slot;
	unsigned long long *full = (unsigned long long *)(sm + a.slot + K);
	int r0, r1;

	pdl_trigger();
	rows_of(a, blockIdx.x, r0, r1);
	if (threadIdx.x == 0) {
		bar_init(full, 1);
		bulk_load(sm, a.w + ((size_t)p * a.rows + r0) * ROWB, (unsigned)(r1 - r0) * ROWB, full);
	}
	__syncthreads(); /* the mbarrier's init seen by every thread */
	if (!a.indep)
		pdl_wait();
	stage_x(a, p, xs);
	__syncthreads();
	bar_wait(full, 0);
	rows_dot(sm, xs, y_of(a, p) + r0, r1 - r0);
}

#define RMAX 4 /* rows a warp for the register form: 32 rows a block at most */

/* the same phase with the engine's way of loading: each lane's units of
 * its warp's rows into registers before griddepcontrol.wait (plain loads,
 * as the i8 matvec loads its first units), x into shared memory after it */
__global__ void __launch_bounds__(CWARPS * 32) one_phase_regs(struct margs a, int p)
{
	__shared__ __align__(16) signed char xs[K];
	__shared__ signed char hi3[3 * K];
	__shared__ int aux[K / XG * 8];
	const int4 *xl = (const int4 *)xs, *xh = (const int4 *)(xs + K / 2);
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r0, r1, n;
	uint4 wr[RMAX][3];
	const uint4 *base;

	pdl_trigger();
	rows_of(a, blockIdx.x, r0, r1);
	n = r1 - r0;
	base = (const uint4 *)(a.w + ((size_t)p * a.rows + r0) * ROWB);
#pragma unroll
	for (int i = 0; i < RMAX; i++)
#pragma unroll
		for (int t = 0; t < 3; t++) {
			int j = warp + i * CWARPS, u = lane + 32 * t;

			wr[i][t] = j < n && u < UNITS ? __ldcs(base + (size_t)j * UNITS + u) : make_uint4(0, 0, 0, 0);
		}
	if (!a.indep)
		pdl_wait();
	if (a.timed && threadIdx.x == 0)
		atomicMin(a.t + 3 * p, gtime());
	if (a.split4)
		stage_x4(a, p, xs, hi3, aux);
	else
		stage_x(a, p, xs);
	__syncthreads();
	if (a.timed && threadIdx.x == 0)
		atomicMax(a.t + 3 * p + 1, gtime());
#pragma unroll
	for (int i = 0; i < RMAX; i++) {
		int j = warp + i * CWARPS, part[4] = {0, 0, 0, 0}, acc;

		if (j >= n)
			break;
#pragma unroll
		for (int t = 0; t < 3; t++) {
			int u = lane + 32 * t;

			if (u < UNITS)
				unit_dot(wr[i][t], xl[u], xh[u], part);
		}
		acc = warp_total(part);
		if (!lane)
			y_of(a, p)[r0 + j] = acc;
	}
	if (a.timed) {
		__syncthreads();
		if (threadIdx.x == 0)
			atomicMax(a.t + 3 * p + 2, gtime());
	}
}

/* every phase, one block an SM: warps 0..7 consume, warp 8's lane 0 produces */
__global__ void __launch_bounds__((CWARPS + 1) * 32, 1) persistent(struct margs a)
{
	extern __shared__ __align__(128) unsigned char sm[];
	signed char *xs = (signed char *)sm + (size_t)a.stages * a.slot;
	unsigned long long *full = (unsigned long long *)(xs + K), *empty = full + MAXS;
	int r0, r1, S = a.stages;

	rows_of(a, blockIdx.x, r0, r1);
	if (threadIdx.x == 0)
		for (int s = 0; s < S; s++) {
			bar_init(full + s, 1);
			bar_init(empty + s, 1);
		}
	__syncthreads();
	if (threadIdx.x >= CWARPS * 32) {
		if (threadIdx.x == CWARPS * 32)
			for (int p = 0; p < a.phases; p++) {
				int s = p % S;

				if (p >= S)
					bar_wait(empty + s, ((p / S) - 1) & 1);
				bulk_load(sm + (size_t)s * a.slot, a.w + ((size_t)p * a.rows + r0) * ROWB,
					  (unsigned)(r1 - r0) * ROWB, full + s);
			}
		return;
	}
	for (int p = 0; p < a.phases; p++) {
		int s = p % S;

		if (p && !a.indep) {
			if (threadIdx.x == 0)
				acquire_at_least<false>(a.ctr + p - 1, (unsigned)a.nb);
			cbar();
		}
		stage_x(a, p, xs);
		cbar();
		bar_wait(full + s, (p / S) & 1);
		rows_dot(sm + (size_t)s * a.slot, xs, y_of(a, p) + r0, r1 - r0);
		cbar(); /* every warp's rows written, the stage and x read */
		if (threadIdx.x == 0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
			asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(saddr(empty + s)) : "memory");
#endif
			release_add(a.ctr + p);
		}
	}
}

__global__ void fill(unsigned char *w, size_t n, int *x0)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		unsigned long long h = (i + 1) * 0x9e3779b97f4a7c15ull;

		h ^= h >> 29;
		w[i] = (unsigned char)(h * 0xbf58476d1ce4e5b9ull >> 56);
		if (i < K)
			x0[i] = (int)(h >> 40) - (1 << 23);
	}
}

static unsigned slot_bytes(int rows, int nb)
{
	unsigned most = (unsigned)((rows + nb - 1) / nb) * ROWB;

	return (most + 127) & ~127u;
}

enum { PDL_BULK, PERSISTENT, PDL_REGS };

/* the variant's graph */
static cudaGraphExec_t capture(struct margs a, int how, cudaStream_t st)
{
	cudaGraph_t g;
	cudaGraphExec_t ge;

	CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
	if (how == PERSISTENT) {
		CK(cudaMemsetAsync(a.ctr, 0, sizeof(unsigned) * a.phases, st));
		persistent<<<a.nb, (CWARPS + 1) * 32, a.psmem, st>>>(a);
		CK(cudaGetLastError());
	} else {
		for (int p = 0; p < a.phases; p++) {
			cudaLaunchConfig_t cfg = {};
			cudaLaunchAttribute at[1];

			cfg.gridDim = dim3(a.nb);
			cfg.blockDim = dim3(CWARPS * 32);
			cfg.dynamicSmemBytes = how == PDL_REGS ? 0 : a.slot + K + 8;
			cfg.stream = st;
			at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
			at[0].val.programmaticStreamSerializationAllowed = 1;
			cfg.attrs = at;
			cfg.numAttrs = 1;
			if (how == PDL_REGS)
				CK(cudaLaunchKernelEx(&cfg, one_phase_regs, a, p));
			else
				CK(cudaLaunchKernelEx(&cfg, one_phase, a, p));
		}
	}
	CK(cudaStreamEndCapture(st, &g));
	CK(cudaGraphInstantiate(&ge, g, 0));
	cudaGraphDestroy(g);
	return ge;
}

/* the variant's graph, timed; its last y into out */
static float run(struct margs a, int how, cudaStream_t st, std::vector<int> &out)
{
	cudaGraphExec_t ge = capture(a, how, st);
	float ms;

	CK(cudaMemset(a.y, 0, sizeof(int) * 2 * a.rows));
	ms = time_graph(ge, st);
	out.resize(a.rows);
	CK(cudaMemcpy(out.data(), a.y + ((a.phases - 1) & 1) * a.rows, sizeof(int) * a.rows, cudaMemcpyDeviceToHost));
	cudaGraphExecDestroy(ge);
	return ms;
}

/* one replay of the register form recording its times: the medians over
 * the phases (the first and last left out) of x staged and the rows written
 * after the phase's first wait, and of the next phase's first wait after
 * them, in us */
static void trace_regs(struct margs a, cudaStream_t st)
{
	std::vector<unsigned long long> h(3 * (size_t)a.phases);
	std::vector<float> stg, wr, nx;
	cudaGraphExec_t ge;

	a.timed = 1;
	ge = capture(a, PDL_REGS, st);
	for (int p = 0; p < a.phases; p++) {
		h[3 * p] = ~0ull;
		h[3 * p + 1] = h[3 * p + 2] = 0;
	}
	CK(cudaMemcpy(a.t, h.data(), sizeof(h[0]) * h.size(), cudaMemcpyHostToDevice));
	CK(cudaGraphLaunch(ge, st));
	CK(cudaStreamSynchronize(st));
	CK(cudaMemcpy(h.data(), a.t, sizeof(h[0]) * h.size(), cudaMemcpyDeviceToHost));
	cudaGraphExecDestroy(ge);
	for (int p = 1; p + 1 < a.phases; p++) {
		stg.push_back((float)(h[3 * p + 1] - h[3 * p]) / 1000.0f);
		wr.push_back((float)(h[3 * p + 2] - h[3 * p]) / 1000.0f);
		nx.push_back((float)((long long)h[3 * p + 3] - (long long)h[3 * p + 2]) / 1000.0f);
	}
	printf("    one replay timed, medians after the first wait: x staged %.2f us, rows written %.2f us; the next "
	       "wait %.2f us after those\n",
	       median(stg), median(wr), median(nx));
}

/* the CPU's y after n phases (indep: the last phase's on x0) */
static std::vector<int> cpu_chain(const unsigned char *d_w, const int *d_x0, int rows, int n, int indep)
{
	std::vector<unsigned char> w((size_t)n * rows * ROWB);
	std::vector<int> x(K), y(rows);

	CK(cudaMemcpy(w.data(), d_w, w.size(), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(x.data(), d_x0, sizeof(int) * K, cudaMemcpyDeviceToHost));
	for (int p = indep ? n - 1 : 0; p < n; p++) {
		if (p && !indep)
			for (int i = 0; i < K; i++)
				x[i] = (signed char)(y[i % rows] & 0xff);
		else
			for (int i = 0; i < K; i++)
				x[i] = (signed char)(x[i] & 0xff);
		for (int r = 0; r < rows; r++) {
			const unsigned char *row = w.data() + ((size_t)p * rows + r) * ROWB;
			int acc = 0;

			for (int b = 0; b < ROWB; b++)
				acc += (row[b] & 15) * x[2 * b] + (row[b] >> 4) * x[2 * b + 1];
			y[r] = acc;
		}
	}
	return y;
}

int main(int argc, char **argv)
{
	int phases = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 470;
	int rows = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 3392;
	int stages = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 0;
	int indep = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 0;
	int split4 = argc > 5 ? (int)strtol(argv[5], NULL, 10) : 0;
	int sms, optin, fit, per = 0;
	cudaDeviceProp prop;
	cudaStream_t st;
	struct margs a;
	unsigned char *w;
	size_t wbytes;
	std::vector<int> ref, got;

	if (phases < 2 || phases > 100000 || rows < 512 || rows > 65536 || stages < 0 || stages > MAXS || indep < 0 ||
	    indep > 1 || split4 < 0 || split4 > 1) {
		fprintf(stderr, "usage: mega_gpu [phases 2..100000] [rows 512..65536] [stages 0..%d] [indep 0|1] [split4 0|1]\n",
			MAXS);
		return 2;
	}
	CK(cudaGetDeviceProperties(&prop, 0));
	if (prop.major < 9) {
		fprintf(stderr, "mega_gpu: needs sm_90 (bulk copies, PDL); this GPU is sm_%d%d\n", prop.major, prop.minor);
		return 2;
	}
	sms = prop.multiProcessorCount;
	if (rows < sms) {
		fprintf(stderr, "mega_gpu: %d rows, fewer than the %d SMs\n", rows, sms);
		return 2;
	}
	optin = (int)prop.sharedMemPerBlockOptin;
	wbytes = (size_t)phases * rows * ROWB;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaMalloc(&w, wbytes));
	memset(&a, 0, sizeof a);
	CK(cudaMalloc((void **)&a.x0, sizeof(int) * K));
	CK(cudaMalloc(&a.y, sizeof(int) * 2 * rows));
	CK(cudaMalloc(&a.ysink, sizeof(int) * rows));
	CK(cudaMalloc(&a.ctr, sizeof(unsigned) * phases));
	CK(cudaMalloc(&a.t, sizeof(unsigned long long) * 3 * phases));
	fill<<<4 * sms, 256>>>(w, wbytes, (int *)a.x0);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	a.w = w;
	a.rows = rows;
	a.indep = indep;
	a.split4 = split4;
	CK(cudaFuncSetAttribute(persistent, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
	CK(cudaFuncSetAttribute(one_phase, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
	printf("%s, %d SMs, %d KB of shared memory a block; %d phases of %d x %d 4-bit rows (%.2f MB a phase, %.0f MB "
	       "in all)%s%s\n",
	       prop.name, sms, optin >> 10, phases, rows, K, rows * (double)ROWB / 1e6, wbytes / 1e6,
	       indep ? "; independent phases (x0 each, no waits)" : "", split4 ? "; x staged in four bytes" : "");

	/* the bits: a short chain of each against the CPU */
	a.phases = std::min(phases, 6);
	a.nb = sms;
	a.slot = slot_bytes(rows, a.nb);
	a.stages = 2;
	a.psmem = (unsigned)optin;
	if (2 * (size_t)a.slot + K + 2 * MAXS * 8 > (size_t)optin) {
		printf("  a block's rows (%u bytes) do not fit twice in %d KB\n", a.slot, optin >> 10);
		return 1;
	}
	ref = cpu_chain(w, a.x0, rows, a.phases, indep);
	run(a, PDL_BULK, st, got);
	if (got != ref) {
		printf("  WRONG: the PDL chain's y after %d phases is not the CPU's\n", a.phases);
		return 1;
	}
	if (rows <= RMAX * CWARPS * sms) {
		run(a, PDL_REGS, st, got);
		if (got != ref) {
			printf("  WRONG: the PDL chain's y (weights in registers) after %d phases is not the CPU's\n",
			       a.phases);
			return 1;
		}
	}
	run(a, PERSISTENT, st, got);
	if (got != ref) {
		printf("  WRONG: the persistent kernel's y after %d phases is not the CPU's\n", a.phases);
		return 1;
	}
	printf("  %d phases: every form gives the CPU's y\n", a.phases);

	a.phases = phases;
	float base = 0;
	for (int k = 1; k <= 3 && k * sms <= rows; k++) {
		a.nb = k * sms;
		a.slot = slot_bytes(rows, a.nb);
		float ms = run(a, PDL_BULK, st, got);

		if (k == 1) {
			base = ms;
			ref = got;
		} else if (got != ref) {
			printf("  WRONG: the PDL chain's y differs with %d blocks\n", a.nb);
			return 1;
		}
		printf("  pdl chain, %d block%s an SM     %8.3f ms  %6.2f us a phase  %6.0f GB/s  %5.3fx\n", k,
		       k > 1 ? "s" : " ", ms, 1000.0 * ms / phases, wbytes / 1e6 / ms, base / ms);
	}
	for (int k = 1; k <= 3 && k * sms <= rows; k++) {
		a.nb = k * sms;
		if (rows > RMAX * CWARPS * a.nb)
			continue;
		float ms = run(a, PDL_REGS, st, got);

		if (got != ref) {
			printf("  WRONG: the PDL chain's y (weights in registers) differs with %d blocks\n", a.nb);
			return 1;
		}
		printf("  pdl, registers, %d an SM      %8.3f ms  %6.2f us a phase  %6.0f GB/s  %5.3fx\n", k, ms,
		       1000.0 * ms / phases, wbytes / 1e6 / ms, base / ms);
		if (!indep)
			trace_regs(a, st);
	}
	a.nb = sms;
	a.slot = slot_bytes(rows, a.nb);
	fit = (optin - K - 2 * MAXS * 8) / (int)a.slot;
	fit = std::min(fit, MAXS);
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, persistent, (CWARPS + 1) * 32, a.psmem));
	if (fit < 1 || per < 1) {
		printf("  persistent: no stage of %u bytes fits (%d KB a block)\n", a.slot, optin >> 10);
		return 0;
	}
	int list[4] = {1, 2, 4, fit}, nl = 4;
	if (stages) {
		list[0] = std::min(stages, fit);
		nl = 1;
	}
	for (int i = 0; i < nl; i++) {
		if (list[i] > fit || (i && list[i] <= list[i - 1]))
			continue;
		a.stages = list[i];
		float ms = run(a, PERSISTENT, st, got);

		if (got != ref) {
			printf("  WRONG: the persistent kernel's y with %d stages differs from the PDL chain's\n", a.stages);
			return 1;
		}
		printf("  persistent, %2d stage%s of %3u KB %8.3f ms  %6.2f us a phase  %6.0f GB/s  %5.3fx\n", a.stages,
		       a.stages > 1 ? "s" : " ", a.slot >> 10, ms, 1000.0 * ms / phases, wbytes / 1e6 / ms, base / ms);
	}
	return 0;
}
