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
 * Run:   build/bench/mega_gpu [phases] [rows a phase] [stages] [indep] [split4] [late]
 *        (defaults 470 and 3392: an E4B step's launches and, at 1280 bytes a
 *        row, its 2.04 GB; rows below 2560: x repeats the outputs, so that
 *        a phase's products and bytes shrink and its chain stays; stages
 *        0: 1, 2, 4 and as many as fit; indep 1:
 *        every phase reads x0 and nothing waits for the phase before, so
 *        that only the weights' streaming is left to time; split4 1: the
 *        register form stages x as the engine does, four bytes an element
 *        with a group's max and sums, stage_x4; late 1: the register
 *        form loads its weights after x is staged, so that none are in
 *        flight when x loads)
 *        build/bench/mega_gpu apart [phases] [rows a phase]
 *        (the apart suite, apart() below: the register form's chain beside
 *        SMs that stream from DRAM or are only held, its weights from DRAM
 *        or from a pool in L2, loaded after x with or without a prefetch
 *        into L2, and where a phase's stage goes: trivial phases, copies
 *        of x, loads probed after the wait; with MEGA_TRIV_ONLY set, only
 *        the trivial phases and the register form's loading variants)
 * Prints the median of 20 graph replays (after 5) per variant: ms, us a
 * phase, GB/s, and the ratio to the PDL chain with one block an SM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
	int late;               /* the register form loads its weights after x is staged, not before the wait */
	int pool;               /* phase p reads the weights of phase p % pool (a pool that fits in L2: weights from L2) */
	int timed;              /* the register form records t */
	int probe;              /* timed: block 0's thread 0 first loads three lines of x one after another (probe_x) */
	int touch;              /* before the wait, each thread loads (and drops) the first word of x it stages */
	int l2pre;              /* with late: the block's rows prefetched into L2 (a bulk prefetch) before the wait */
	int triv;               /* triv_phase: 1 thread 0 loads one word of x, 2 every thread stages x first */
	int copies;             /* the register form and triv_phase write y that many times, cstride ints apart,
				 * and block b reads copy b % copies: x's lines in more L2 slices */
	int cstride;            /* ints between copies (rows where copies is 1) */
	unsigned long long *t;  /* [phases][TN]: the first wait returned, the last x staged, the last rows written,
				 * the most a block took from its own wait to x staged, the last wait returned; with
				 * probe, block 0's three loads of x: the first after its wait, each next after the
				 * one before */
};

#define TN 8 /* times recorded a phase */
#define MAXC 32 /* copies of y at most */

/* ints between copies of y: a multiple of 1 KB plus one 128-byte line, so
 * that copy c's lines start c lines further round the L2's hashing */
static int cstride_of(int rows)
{
	return (rows + 255) / 256 * 256 + 32;
}

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
	return a.indep && p < a.phases - 1 ? a.ysink : a.y + (size_t)(p & 1) * a.copies * a.cstride;
}

/* phase p's x: the phase before's y (this block's copy of it) or x0 */
__device__ __forceinline__ const int *x_src(const struct margs &a, int p)
{
	return p && !a.indep ? a.y + (size_t)((p - 1) & 1) * a.copies * a.cstride + (blockIdx.x % a.copies) * a.cstride
			     : a.x0;
}

/* x's element i (the low byte of word v) into xs's plane of its parity */
__device__ __forceinline__ void put_x(signed char *xs, int i, int v)
{
	xs[(i & 1) * (K / 2) + i / 2] = (signed char)(v & 0xff);
}

/* x for phase p into xs (two planes of K / 2 bytes: the even and the odd
 * elements, so that a weight word's low and high nibbles meet a word each);
 * with fewer rows than K, the phase before's outputs repeat. Each thread's
 * K / 256 loads are all issued before any of its stores. */
__device__ __forceinline__ void stage_x(const struct margs &a, int p, signed char *xs)
{
	constexpr int NB = K / (CWARPS * 32);
	bool dep = p && !a.indep;
	const int *src = x_src(a, p);
	int n = dep ? a.rows : K, v[NB];

#pragma unroll
	for (int k = 0; k < NB; k++) {
		int i = threadIdx.x + k * CWARPS * 32;

		v[k] = __ldcg(src + (i < n ? i : i % n));
	}
#pragma unroll
	for (int k = 0; k < NB; k++) {
		int i = threadIdx.x + k * CWARPS * 32;

		put_x(xs, i, v[k]);
	}
}

/* stage_x as the sixtieth session's runs had it: one load and its store a
 * step of a loop, which the compiler keeps in order, so that a thread's ten
 * loads make ten round trips one after another (kept for triv_phase 3) */
__device__ __forceinline__ void stage_x_serial(const struct margs &a, int p, signed char *xs)
{
	bool dep = p && !a.indep;
	const int *src = x_src(a, p);
	int n = dep ? a.rows : K;

	for (int i = threadIdx.x; i < K; i += CWARPS * 32)
		put_x(xs, i, __ldcg(src + (i < n ? i : i % n)));
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
	const int *src = x_src(a, p);
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

/* bytes from src (16-byte multiples) into L2 by one bulk prefetch: no
 * data comes back to the SM */
__device__ __forceinline__ void l2_prefetch(const void *src, unsigned bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
#else
	(void)src;
	(void)bytes;
#endif
}

/* a timed block's thread 0, at the block's end: its wait return (own), x
 * staged (stg) and rows written (wr) into phase p's slots of a.t (the
 * first and last waits, the last x staged and rows written, the most from
 * own to stg) */
__device__ __forceinline__ void record_times(const struct margs &a, int p, unsigned long long own,
					     unsigned long long stg, unsigned long long wr)
{
	atomicMax(a.t + TN * p + 2, wr);
	atomicMin(a.t + TN * p, own);
	atomicMax(a.t + TN * p + 4, own);
	atomicMax(a.t + TN * p + 1, stg);
	atomicMax(a.t + TN * p + 3, stg - own);
}

/* a word loaded and dropped (kept by the asm) */
__device__ __forceinline__ void touch_word(const int *q)
{
	int v = __ldcg(q);

	asm volatile("" ::"r"(v));
}

/* block 0's thread 0, timed: three loads of x's lines 0, 1 and 2, each
 * address made from the value before (an inline asm and with 0, which the
 * compiler cannot see through), each time taken once its value is in; so
 * the first is a load's round trip just after the wait, the next two the
 * same load's round trip a moment later (each value stored to a volatile
 * shared word before the timer is read, as latency probes do), before the
 * thread's other work after the wait. probe 2: the first load is of x0
 * (never written in the chain) instead; probe 3: x's line 0 was loaded
 * before the wait too; probe 4: x0's line 0 was; probe 5: the last
 * block's thread 0 probes instead of block 0's; probe 6 and 7: the
 * thread spins 1 or 2 us after its wait before the first load (the time
 * counts from the wait). Where the block stages x, the probing thread's
 * warp-mates run their stage first (the branch diverges), so the first
 * time is about the stage's, not one load's (docs/bench.md, sixty-first
 * session). */
__device__ __noinline__ void probe_x(const int *first, const int *src, int spin, unsigned long long t0,
				    unsigned long long *out)
{
	__shared__ volatile int seen; /* each value stored before the time is read */
	unsigned long long tt[3];
	int v = 0;

	while (gtime() < t0 + (unsigned long long)spin)
		;
#pragma unroll
	for (int k = 0; k < 3; k++) {
		int z;

		asm("and.b32 %0, %1, 0;" : "=r"(z) : "r"(v));
		v = __ldcg((k ? src : first) + 32 * k + z);
		seen = v;
		tt[k] = gtime();
	}
	out[0] = tt[0] - t0;
	out[1] = tt[1] - tt[0];
	out[2] = tt[2] - tt[1];
}

#define RMAX 4 /* rows a warp for the register form: 32 rows a block at most */

/* each lane's units of its warp's rows (of the block's n) into wr */
__device__ __forceinline__ void regs_load(uint4 (&wr)[RMAX][3], const uint4 *base, int n, int warp, int lane)
{
#pragma unroll
	for (int i = 0; i < RMAX; i++)
#pragma unroll
		for (int t = 0; t < 3; t++) {
			int j = warp + i * CWARPS, u = lane + 32 * t;

			wr[i][t] = j < n && u < UNITS ? __ldcs(base + (size_t)j * UNITS + u) : make_uint4(0, 0, 0, 0);
		}
}

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
	unsigned long long own = 0, stg = 0; /* timed: thread 0's wait return and x staged */

	pdl_trigger();
	rows_of(a, blockIdx.x, r0, r1);
	n = r1 - r0;
	base = (const uint4 *)(a.w + ((size_t)(p % a.pool) * a.rows + r0) * ROWB);
	if (!a.late)
		regs_load(wr, base, n, warp, lane);
	if (a.l2pre && threadIdx.x == 0)
		l2_prefetch(base, (unsigned)n * ROWB);
	if (a.touch)
		touch_word(x_src(a, p) + (a.split4 ? (threadIdx.x >> 5) * XG + (threadIdx.x & 31) * 4 : threadIdx.x) %
						 (p && !a.indep ? a.rows : K));
	if (a.timed && (a.probe == 3 || a.probe == 4) && blockIdx.x == 0 && threadIdx.x == 0)
		touch_word(a.probe == 3 ? x_src(a, p) : a.x0);
	if (!a.indep)
		pdl_wait();
	if (a.timed && threadIdx.x == 0) {
		own = gtime();
		if (a.probe && blockIdx.x == (a.probe == 5 ? a.nb - 1 : 0))
			probe_x(a.probe == 2 ? a.x0 : x_src(a, p), x_src(a, p), a.probe >= 6 ? (a.probe - 5) * 1000 : 0,
				own, a.t + TN * p + 5);
	}
	if (a.split4)
		stage_x4(a, p, xs, hi3, aux);
	else
		stage_x(a, p, xs);
	__syncthreads();
	if (a.timed && threadIdx.x == 0)
		stg = gtime();
	if (a.late)
		regs_load(wr, base, n, warp, lane);
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
		if (lane < a.copies)
			y_of(a, p)[lane * a.cstride + r0 + j] = acc;
	}
	if (a.timed) {
		__syncthreads();
		if (threadIdx.x == 0) { /* the atomics last, off the chain's path until here */
			record_times(a, p, own, stg, gtime());
		}
	}
}

/* x's words as 16-byte units (rows >= K: no wrap), units u0, u0 + step, ...
 * below K / 4, all loaded before any is stored */
template <int N>
__device__ __forceinline__ void stage_vec(const int *src, signed char *xs, int u0, int step)
{
	int4 v[N];

#pragma unroll
	for (int k = 0; k < N; k++) {
		int u = u0 + k * step;

		v[k] = u < K / 4 ? __ldcg((const int4 *)src + u) : make_int4(0, 0, 0, 0);
	}
#pragma unroll
	for (int k = 0; k < N; k++) {
		int u = u0 + k * step, e[4] = {v[k].x, v[k].y, v[k].z, v[k].w};

		if (u < K / 4)
#pragma unroll
			for (int q = 0; q < 4; q++) {
				int i = 4 * u + q;

				put_x(xs, i, e[q]);
			}
	}
}

/* phase_gpu's trivial phase in this harness (no weights): after the wait
 * thread 0 loads one word of x and writes one output (triv 1), or the
 * block stages all of x first and thread 0 writes from it: stage_x (2),
 * each load then its store, as the sixtieth session's stage_x had them
 * (3, stage_x_serial), 16-byte loads,
 * three a thread (4), warp 0 alone with twenty 16-byte loads a lane (5),
 * stage_x in the odd blocks only (6), stage_x twice, x staged timed after
 * the first (7), stage_x in block 0 only (8), every thread spinning 2 us
 * after its wait before stage_x (9), stage_x run on x0 before the wait as
 * well, so that its code has run in this block (10). Timed as the
 * register form is. */
__global__ void __launch_bounds__(CWARPS * 32) triv_phase(struct margs a, int p)
{
	__shared__ __align__(16) signed char xs[K];
	unsigned long long own = 0, stg = 0;

	pdl_trigger();
	if (a.triv == 10) {
		struct margs b = a;

		b.indep = 1; /* x0 */
		stage_x(b, p, xs);
		__syncthreads();
	}
	pdl_wait();
	if (a.timed && threadIdx.x == 0) {
		own = gtime();
		if (a.probe && blockIdx.x == 0)
			probe_x(x_src(a, p), x_src(a, p), 0, own, a.t + TN * p + 5);
	}
	if (a.triv == 9) {
		unsigned long long t0 = gtime();

		while (gtime() < t0 + 2000)
			;
	}
	if (a.triv >= 2) {
		const int *src = x_src(a, p);

		if (a.triv == 3) {
			stage_x_serial(a, p, xs);
		} else if (a.triv == 4) {
			stage_vec<(K / 4 + CWARPS * 32 - 1) / (CWARPS * 32)>(src, xs, threadIdx.x, CWARPS * 32);
		} else if (a.triv == 5) {
			if (threadIdx.x < 32)
				stage_vec<K / 4 / 32>(src, xs, threadIdx.x, 32);
		} else if ((a.triv != 6 || (blockIdx.x & 1)) && (a.triv != 8 || blockIdx.x == 0)) {
			stage_x(a, p, xs);
		}
		__syncthreads();
		if (a.timed && threadIdx.x == 0)
			stg = gtime();
		if (a.triv == 7) {
			stage_x(a, p, xs);
			__syncthreads();
		}
	}
	if (threadIdx.x == 0) {
		int v = a.triv >= 2 ? xs[blockIdx.x % K] : __ldcg(x_src(a, p) + blockIdx.x % (p ? a.rows : K));

		for (int c = 0; c < a.copies; c++)
			y_of(a, p)[c * a.cstride + blockIdx.x % a.rows] = v + 1;
	}
	if (a.timed) {
		__syncthreads();
		if (threadIdx.x == 0) {
			unsigned long long now = gtime();

			record_times(a, p, own, a.triv < 2 ? now : stg, now);
		}
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

enum { PDL_BULK, PERSISTENT, PDL_REGS, PDL_TRIV };

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
			cfg.dynamicSmemBytes = how == PDL_REGS || how == PDL_TRIV ? 0 : a.slot + K + 8;
			cfg.stream = st;
			at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
			at[0].val.programmaticStreamSerializationAllowed = 1;
			cfg.attrs = at;
			cfg.numAttrs = 1;
			if (how == PDL_REGS)
				CK(cudaLaunchKernelEx(&cfg, one_phase_regs, a, p));
			else if (how == PDL_TRIV)
				CK(cudaLaunchKernelEx(&cfg, triv_phase, a, p));
			else
				CK(cudaLaunchKernelEx(&cfg, one_phase, a, p));
		}
	}
	CK(cudaStreamEndCapture(st, &g));
	CK(cudaGraphInstantiate(&ge, g, 0));
	cudaGraphDestroy(g);
	return ge;
}

/* the last phase's y (copy 0) into out */
static void last_y(const struct margs &a, std::vector<int> &out)
{
	out.resize(a.rows);
	CK(cudaMemcpy(out.data(), a.y + (size_t)((a.phases - 1) & 1) * a.copies * a.cstride, sizeof(int) * a.rows,
		      cudaMemcpyDeviceToHost));
}

/* the variant's graph, timed; its last y into out */
static float run(struct margs a, int how, cudaStream_t st, std::vector<int> &out)
{
	cudaGraphExec_t ge = capture(a, how, st);
	float ms;

	CK(cudaMemset(a.y, 0, sizeof(int) * 2 * a.copies * a.cstride));
	ms = time_graph(ge, st);
	last_y(a, out);
	cudaGraphExecDestroy(ge);
	return ms;
}

/* one replay of the register form recording its times, as medians over
 * the phases (the first and last left out), in us: x staged and the rows
 * written after the phase's first wait, the next phase's first wait after
 * those, the most any block took from its own wait to x staged, and the
 * spread of the blocks' waits (the last return after the first) */
struct rtimes {
	float staged, written, next, own, spread;
	float probe[3]; /* with a.probe: block 0's three loads of x (probe_x) */
};

static struct rtimes trace_regs(struct margs a, cudaStream_t st, int how = PDL_REGS)
{
	std::vector<unsigned long long> h(TN * (size_t)a.phases);
	std::vector<float> v[8];
	struct rtimes r;
	cudaGraphExec_t ge;

	a.timed = 1;
	ge = capture(a, how, st);
	for (int p = 0; p < a.phases; p++) {
		h[TN * p] = ~0ull;
		for (int i = 1; i < TN; i++)
			h[TN * p + i] = 0;
	}
	CK(cudaMemcpy(a.t, h.data(), sizeof(h[0]) * h.size(), cudaMemcpyHostToDevice));
	CK(cudaGraphLaunch(ge, st));
	CK(cudaStreamSynchronize(st));
	CK(cudaMemcpy(h.data(), a.t, sizeof(h[0]) * h.size(), cudaMemcpyDeviceToHost));
	cudaGraphExecDestroy(ge);
	for (int p = 1; p + 1 < a.phases; p++) {
		const unsigned long long *q = &h[TN * p];

		v[0].push_back((float)(q[1] - q[0]) / 1000.0f);
		v[1].push_back((float)(q[2] - q[0]) / 1000.0f);
		v[2].push_back((float)((long long)q[TN] - (long long)q[2]) / 1000.0f);
		v[3].push_back((float)q[3] / 1000.0f);
		v[4].push_back((float)(q[4] - q[0]) / 1000.0f);
		for (int i = 0; i < 3; i++)
			v[5 + i].push_back((float)q[5 + i] / 1000.0f);
	}
	r.staged = median(v[0]);
	r.written = median(v[1]);
	r.next = median(v[2]);
	r.own = median(v[3]);
	r.spread = median(v[4]);
	for (int i = 0; i < 3; i++)
		r.probe[i] = median(v[5 + i]);
	return r;
}

static void print_probe(struct rtimes r)
{
	printf("    probe (block 0, one thread, medians): x's first load back %.2f us after its wait, the next two "
	       "loads %.2f and %.2f us each\n",
	       r.probe[0], r.probe[1], r.probe[2]);
}

static void print_trace(struct rtimes r)
{
	printf("    one replay timed, medians after the first wait: x staged %.2f us, rows written %.2f us; the next "
	       "wait %.2f us after those; a block's own wait to x staged at most %.2f us; waits spread over %.2f us\n",
	       r.staged, r.written, r.next, r.own, r.spread);
}

/* the CPU's y after n phases (indep: the last phase's on x0) */
static std::vector<int> cpu_chain(const unsigned char *d_w, const int *d_x0, int rows, int n, int indep, int pool)
{
	std::vector<unsigned char> w((size_t)std::min(n, pool) * rows * ROWB);
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
			const unsigned char *row = w.data() + ((size_t)(p % pool) * rows + r) * ROWB;
			int acc = 0;

			for (int b = 0; b < ROWB; b++)
				acc += (row[b] & 15) * x[2 * b] + (row[b] >> 4) * x[2 * b + 1];
			y[r] = acc;
		}
	}
	return y;
}

/* Streaming apart from the chain (the "apart" suite): S blocks, each
 * owning an SM (all its shared memory and 1024 threads, so that no chain
 * block lands there), read a buffer of 2^lg 16-byte units round and round
 * with 8 streaming loads a thread in flight (mode 1), or only sleep (mode
 * 0: the SMs taken, nothing streamed), until the host sets *stop. Every 64
 * rounds thread 0 polls stop and publishes its block's bytes in cnt[b].
 * Its launch asks for (nearly) all of an SM's shared memory as dynamic
 * shared memory, which the kernel never touches: that is what holds the SM. */
#define SROUND 64
__global__ void __launch_bounds__(1024, 1)
	streamer(const uint4 *buf, int lg, const volatile int *stop, volatile int *started, unsigned long long *cnt,
		 unsigned *sink, int mode)
{
	__shared__ int quit;
	size_t mask = ((size_t)1 << lg) - 1, stride = (size_t)gridDim.x * blockDim.x;
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned acc = 0;
	unsigned long long rounds = 0;

	if (threadIdx.x == 0) {
		started[blockIdx.x] = 1;
		__threadfence_system();
	}
	for (;;) {
		if (threadIdx.x == 0) {
			quit = *stop;
			((volatile unsigned long long *)cnt)[blockIdx.x] = rounds * blockDim.x * 8 * sizeof(uint4);
		}
		__syncthreads();
		if (quit)
			break;
		__syncthreads(); /* quit read by all before thread 0 writes it again */
		for (int r = 0; r < SROUND; r++) {
			if (mode == 1) {
				uint4 v[8];

#pragma unroll
				for (int k = 0; k < 8; k++)
					v[k] = __ldcs(buf + ((i + k * stride) & mask));
#pragma unroll
				for (int k = 0; k < 8; k++)
					acc ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
				i = (i + 8 * stride) & mask;
			} else {
				__nanosleep(1000);
			}
		}
		if (mode == 1)
			rounds += SROUND;
	}
	if (acc == 0x9e3779b9u) /* never in practice; keeps the loads */
		sink[0] = acc;
}

struct streaming {
	int S, mode, lg;
	uint4 *buf;
	volatile int *hflag;     /* host-mapped: [0] stop, [1 + b] block b started */
	int *dflag;              /* the same, as the device sees them */
	unsigned long long *cnt; /* [S] on the device */
	unsigned long long *hcnt;
	unsigned *sink;
	cudaStream_t st, snap;
};

static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the streamer's bytes so far, all blocks */
static unsigned long long stream_bytes(struct streaming *z)
{
	unsigned long long n = 0;

	CK(cudaMemcpyAsync(z->hcnt, z->cnt, sizeof(unsigned long long) * z->S, cudaMemcpyDeviceToHost, z->snap));
	CK(cudaStreamSynchronize(z->snap));
	for (int b = 0; b < z->S; b++)
		n += z->hcnt[b];
	return n;
}

static void stream_start(struct streaming *z, int optin)
{
	z->hflag[0] = 0;
	for (int b = 0; b < z->S; b++)
		z->hflag[1 + b] = 0;
	CK(cudaMemsetAsync(z->cnt, 0, sizeof(unsigned long long) * z->S, z->st));
	streamer<<<z->S, 1024, optin - 1024, z->st>>>(z->buf, z->lg, z->dflag, z->dflag + 1, z->cnt, z->sink,
						      z->mode);
	CK(cudaGetLastError());
	for (double t0 = wall_s();;) {
		int n = 0;

		for (int b = 0; b < z->S; b++)
			n += z->hflag[1 + b];
		if (n == z->S)
			break;
		if (wall_s() - t0 > 10) {
			fprintf(stderr, BENCH_NAME ": the streamer's %d blocks did not all start\n", z->S);
			exit(1);
		}
	}
}

static void stream_stop(struct streaming *z)
{
	z->hflag[0] = 1;
	CK(cudaStreamSynchronize(z->st));
}

/* The apart suite: the register form's dependent chain (one graph, the
 * blocks spread over the SMs the streamer leaves) with S SMs streaming
 * from DRAM beside it or only held, its weights from DRAM (every phase its
 * own) or from L2 (a pool of 4 phases), and the streamer's GB/s while the
 * chain's timed replays run and alone. The question: does DRAM streaming on
 * other SMs slow a chain of dependent phases, and by how much at what rate
 * (docs/gpu.md, "Left": weights streamed apart from the phase barriers)? */
static const int apart_sms[4] = {0, 16, 33, 66}; /* S: the SMs a streamer takes */

/* the trivial phases (triv_phase), every kind, with one copy of x and,
 * for stage_x, four */
static void apart_triv(struct margs a, int sms, cudaStream_t st)
{
	std::vector<int> got;

	for (int tv = 1; tv <= 10; tv++)
		for (int c = 1; c <= (tv == 2 ? 4 : 1); c *= 4) {
			static const char *what[] = {"thread 0 loads a word of x", "x staged by every thread",
						     "x staged, each load then its store", "x staged by 16-byte loads",
						     "x staged by warp 0 alone", "x staged in odd blocks only",
						     "x staged twice", "x staged in block 0 only",
						     "x staged after a 2 us spin", "x staged before the wait too"};
			struct margs b = a;
			float ms;

			b.nb = sms;
			b.triv = tv;
			b.copies = c;
			if ((tv == 4 || tv == 5) && a.rows < K) /* 16-byte units of x: no wrap */
				continue;
			b.cstride = c > 1 ? cstride_of(a.rows) : a.rows;
			ms = run(b, PDL_TRIV, st, got);
			printf("  trivial phases (%s), %d blocks, %2d cop%s of y: %8.3f ms  %5.2f us a phase\n",
			       what[tv - 1], b.nb, c,
			       c > 1 ? "ies" : "y  ", ms, 1000.0 * ms / b.phases);
			print_trace(trace_regs(b, st, PDL_TRIV));
			b.probe = 1;
			print_probe(trace_regs(b, st, PDL_TRIV));
		}
}

/* the register form at one and two blocks an SM: its weights loaded
 * before the wait, after x with an L2 prefetch before the wait, or after x */
static void apart_loading(struct margs a, int sms, cudaStream_t st)
{
	std::vector<int> got;

	for (int k = 1; k <= 2; k++)
		for (int v = 0; v < 3; v++) {
			/* the register form at k blocks an SM: weights into registers before
			 * the wait (0), prefetched into L2 before it and loaded after x (1),
			 * loaded after x with no prefetch (2) */
			struct margs b = a;
			float ms;

			b.nb = k * sms;
			b.late = v > 0;
			b.l2pre = v == 1;
			ms = run(b, PDL_REGS, st, got);
			printf("  registers, %d an SM, %-36s %8.3f ms  %5.2f us a phase\n", k,
			       v == 0 ? "loaded before the wait:" : v == 1 ? "prefetched into L2, loaded after x:"
									 : "loaded after x:",
			       ms, 1000.0 * ms / b.phases);
			print_trace(trace_regs(b, st));
		}
}

/* the register form with its x in 1 to MAXC copies, weights from DRAM
 * (w 0) and from L2 (w 1); refs[w] gets the one-copy chain's y */
static int apart_copies(struct margs a, int sms, cudaStream_t st, std::vector<int> *refs)
{
	std::vector<int> got;

	for (int wi = 0; wi < 2; wi++)
		for (int c = 1; c <= MAXC; c *= 2) {
			/* the register form with every block's x in one of c copies */
			struct margs b = a;
			std::vector<int> one;
			float ms;

			b.nb = sms;
			b.pool = wi ? 4 : a.phases;
			b.copies = c;
			b.cstride = c > 1 ? cstride_of(a.rows) : a.rows;
			ms = run(b, PDL_REGS, st, c == 1 ? one : got);
			if (c == 1)
				refs[wi] = one;
			else if (got != refs[wi]) {
				printf("  WRONG: the chain's y differs with %d copies\n", c);
				return 1;
			}
			printf("  weights from %s, %2d cop%s of y, chain of %3d blocks: %8.3f ms  %5.2f us a phase\n",
			       wi ? "L2 " : "DRAM", c, c > 1 ? "ies" : "y  ", b.nb, ms, 1000.0 * ms / b.phases);
			print_trace(trace_regs(b, st));
			b.probe = 1;
			print_probe(trace_regs(b, st));
			if (wi == 0 && c == 8) {
				b.split4 = 1;
				b.probe = 0;
				ms = run(b, PDL_REGS, st, got);
				printf("  weights from DRAM,  8 copies of y, x in four bytes:          %8.3f ms  %5.2f us a "
				       "phase%s\n",
				       ms, 1000.0 * ms / b.phases, got == refs[wi] ? "" : " WRONG y");
				print_trace(trace_regs(b, st));
			}
		}
	return 0;
}

/* the streamer alone on each S of apart_sms, 50 ms each */
static void apart_alone(struct streaming &z, int optin)
{
	for (int i = 1; i < 4; i++) {
		double t0, t1;
		unsigned long long b0, b1;

		z.S = apart_sms[i];
		z.mode = 1;
		stream_start(&z, optin);
		b0 = stream_bytes(&z);
		t0 = wall_s();
		while (wall_s() - t0 < 0.05)
			;
		b1 = stream_bytes(&z);
		t1 = wall_s();
		stream_stop(&z);
		printf("  streamer alone, %2d SMs: %6.0f GB/s\n", z.S, (b1 - b0) / (t1 - t0) / 1e9);
	}
}

/* the chain beside S SMs held or streaming (every S of apart_sms), its
 * weights from DRAM and from L2; at S = 0 also the probes and the loading
 * and staging variants; every y checked against refs */
static int apart_beside(struct margs a, struct streaming &z, int sms, int optin, cudaStream_t st,
			std::vector<int> *refs)
{
	std::vector<int> got;

	for (int wi = 0; wi < 2; wi++)
		for (int i = 0; i < 4; i++)
			for (int mode = 0; mode < 2; mode++) {
				int S = apart_sms[i], free = sms - S, k = 1;
				cudaGraphExec_t ge;
				unsigned long long b0 = 0, b1 = 0;
				double t0, t1;
				float ms;
				struct rtimes r, rp;

				if (S == 0 && mode == 1)
					continue;
				while (a.rows > RMAX * CWARPS * k * free)
					k++;
				a.nb = k * free;
				a.pool = wi ? 4 : a.phases;
				a.late = 0;
				z.S = S;
				z.mode = mode;
				ge = capture(a, PDL_REGS, st);
				if (S)
					stream_start(&z, optin);
				b0 = S ? stream_bytes(&z) : 0;
				t0 = wall_s();
				ms = time_graph(ge, st);
				t1 = wall_s();
				b1 = S ? stream_bytes(&z) : 0;
				r = trace_regs(a, st);
				a.probe = 1;
				rp = trace_regs(a, st);
				a.probe = 0;
				if (S)
					stream_stop(&z);
				cudaGraphExecDestroy(ge);
				last_y(a, got);
				if (refs[wi].empty())
					refs[wi] = got;
				else if (got != refs[wi]) {
					printf("  WRONG: the chain's y differs with %d SMs streaming\n", S);
					return 1;
				}
				printf("  weights from %s, %2d SMs %s, chain of %3d blocks: %8.3f ms  %5.2f us a phase  "
				       "streamer %5.0f GB/s\n",
				       wi ? "L2 " : "DRAM", S, S == 0 ? "none     " : mode ? "streaming" : "held     ",
				       a.nb, ms, 1000.0 * ms / a.phases, S && mode ? (b1 - b0) / (t1 - t0) / 1e9 : 0.0);
				print_trace(r);
				print_probe(rp);
				for (int pm = 2; S == 0 && pm <= 7; pm++) {
					static const char *what[] = {"x0 first, then x", "x's line touched before the wait",
								     "x0's line touched before the wait",
								     "the last block", "1 us after the wait",
								     "2 us after the wait"};

					a.probe = pm;
					printf("    probe %d (%s):\n", pm, what[pm - 2]);
					print_probe(trace_regs(a, st));
					a.probe = 0;
				}
				for (int vi = 1; S == 0 && vi < 7; vi++) {
					/* weights loaded after x (1), x staged in four bytes as the engine
					 * does (2), both (3); x's words touched before the wait (4), and
					 * staged in four bytes (5); weights prefetched into L2 before the
					 * wait and loaded after x (6) */
					a.late = vi == 1 || vi == 3 || vi == 6;
					a.split4 = vi == 2 || vi == 3 || vi == 5;
					a.touch = vi == 4 || vi == 5;
					a.l2pre = vi == 6;
					ms = run(a, PDL_REGS, st, got);
					if (got != refs[wi]) {
						printf("  WRONG: the chain's y differs with late %d, split4 %d\n", a.late,
						       a.split4);
						return 1;
					}
					printf("  weights from %s, %s, chain of %3d blocks: %8.3f ms  %5.2f us a phase\n",
					       wi ? "L2 " : "DRAM",
					       vi == 1   ? "loaded after x"
					       : vi == 2 ? "x in four bytes (stage_x4)"
					       : vi == 3 ? "both"
					       : vi == 4 ? "x touched before the wait"
					       : vi == 5 ? "x touched, in four bytes"
							 : "prefetched into L2, loaded after x",
					       a.nb, ms, 1000.0 * ms / a.phases);
					print_trace(trace_regs(a, st));
					a.probe = 1;
					print_probe(trace_regs(a, st));
					a.probe = 0;
				}
				a.late = 0;
				a.split4 = 0;
				a.touch = 0;
				a.l2pre = 0;
			}
	return 0;
}

static int apart(struct margs a, int sms, int optin, cudaStream_t st)
{
	struct streaming z;
	std::vector<int> refs[2], got;

	{
		struct margs b = a;

		b.phases = 6;
		b.pool = 4;
		b.nb = sms;
		b.late = 0;
		run(b, PDL_REGS, st, got);
		if (got != cpu_chain(a.w, a.x0, a.rows, b.phases, 0, b.pool)) {
			printf("  WRONG: the chain's y with a pool of 4 phases is not the CPU's\n");
			return 1;
		}
	}
	memset(&z, 0, sizeof z);
	z.lg = 27; /* 2 GiB */
	CK(cudaMalloc(&z.buf, sizeof(uint4) << z.lg));
	CK(cudaMemset(z.buf, 0x5a, sizeof(uint4) << z.lg));
	CK(cudaHostAlloc((void **)&z.hflag, sizeof(int) * (1 + sms), cudaHostAllocMapped));
	CK(cudaHostGetDevicePointer((void **)&z.dflag, (void *)z.hflag, 0));
	CK(cudaMalloc(&z.cnt, sizeof(unsigned long long) * sms));
	CK(cudaHostAlloc((void **)&z.hcnt, sizeof(unsigned long long) * sms, cudaHostAllocDefault));
	CK(cudaMalloc(&z.sink, sizeof(unsigned)));
	CK(cudaStreamCreateWithFlags(&z.st, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&z.snap, cudaStreamNonBlocking));
	CK(cudaFuncSetAttribute(streamer, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - 1024));
	printf("apart: the register form's chain of %d phases beside S SMs that stream a 2 GiB buffer (8 streaming "
	       "loads a thread in flight) or only hold their SM\n",
	       a.phases);
	apart_triv(a, sms, st);
	apart_loading(a, sms, st);
	if (getenv("MEGA_TRIV_ONLY"))
		return 0;
	if (apart_copies(a, sms, st, refs))
		return 1;
	apart_alone(z, optin);
	return apart_beside(a, z, sms, optin, st, refs);
}

int main(int argc, char **argv)
{
	int suite = argc > 1 && !strcmp(argv[1], "apart");

	if (suite) {
		argc--;
		argv++;
	}
	int phases = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 470;
	int rows = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 3392;
	int stages = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 0;
	int indep = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 0;
	int split4 = argc > 5 ? (int)strtol(argv[5], NULL, 10) : 0;
	int late = argc > 6 ? (int)strtol(argv[6], NULL, 10) : 0;
	int sms, optin, fit, per = 0;
	cudaDeviceProp prop;
	cudaStream_t st;
	struct margs a;
	unsigned char *w;
	size_t wbytes;
	std::vector<int> ref, got;

	if (phases < 2 || phases > 100000 || rows < 512 || rows > 65536 || stages < 0 || stages > MAXS || indep < 0 ||
	    indep > 1 || split4 < 0 || split4 > 1 || late < 0 || late > 1) {
		fprintf(stderr, "usage: mega_gpu [apart] [phases 2..100000] [rows 512..65536] [stages 0..%d] [indep 0|1] [split4 0|1] "
				"[late 0|1]\n",
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
	CK(cudaMalloc(&a.y, sizeof(int) * 2 * MAXC * cstride_of(rows)));
	CK(cudaMalloc(&a.ysink, sizeof(int) * rows));
	CK(cudaMalloc(&a.ctr, sizeof(unsigned) * phases));
	CK(cudaMalloc(&a.t, sizeof(unsigned long long) * TN * phases));
	fill<<<4 * sms, 256>>>(w, wbytes, (int *)a.x0);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	a.w = w;
	a.rows = rows;
	a.copies = 1;
	a.cstride = rows;
	a.indep = indep;
	a.split4 = split4;
	a.late = late;
	a.pool = phases;
	CK(cudaFuncSetAttribute(persistent, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
	CK(cudaFuncSetAttribute(one_phase, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
	printf("%s, %d SMs, %d KB of shared memory a block; %d phases of %d x %d 4-bit rows (%.2f MB a phase, %.0f MB "
	       "in all)%s%s%s\n",
	       prop.name, sms, optin >> 10, phases, rows, K, rows * (double)ROWB / 1e6, wbytes / 1e6,
	       indep ? "; independent phases (x0 each, no waits)" : "", split4 ? "; x staged in four bytes" : "",
	       late ? "; the register form's weights loaded after x" : "");

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
	ref = cpu_chain(w, a.x0, rows, a.phases, indep, a.phases);
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
	if (suite) {
		a.phases = phases;
		return apart(a, sms, optin, st);
	}

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
			print_trace(trace_regs(a, st));
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
