/* stage_gpu.cu - what staging a vector after the PDL wait costs, and by
 * which load path (docs/gpu.md, "Left": a matvec of the decode step takes
 * 1.4-3.3 us after its griddepcontrol.wait to stage its slice of x, several
 * times an L2 round trip, while weights loaded before the wait are in
 * flight, its own and those of the kernels launched early after it).
 *
 * A chain of N phases launched under programmatic dependent launch in one
 * CUDA graph, as the engine's step is. Each phase's blocks:
 *   1. load PRE 16-byte words a thread of the weight buffer (larger than
 *      the L2) into registers, before the wait, as the matvecs load their
 *      first units;
 *   2. griddepcontrol.wait;
 *   3. stage a slice of KB floats of the vector the phase before wrote into
 *      shared memory, by one of five paths: plain loads (ld.global), loads
 *      cached in L2 only (ld.global.cg), the read-only path (ld.global.nc),
 *      cp.async (16 bytes a thread), or one bulk copy by the tensor memory
 *      accelerator (cp.async.bulk, completed on an mbarrier; sm_90);
 *   4. stream the rest of the phase's share of weights;
 *   5. write its part of the next vector, from what it staged and loaded.
 * So both the weights in flight before the wait (this phase's, and the next
 * phases' blocks that are resident early) and the path of the stage can be
 * varied, and the stage timed inside the chain: thread 0 of every block
 * reads %globaltimer when its wait returns and once its slice is staged;
 * the phase's stage is the last block's staged time less the first
 * block's wait return.
 *
 * Build: make build/bench/stage_gpu (where nvcc exists)
 * Run:   build/bench/stage_gpu [phases] [MB a phase] [blocks] [delay us]
 *        (defaults 470, 4.33, 2 per SM, 0: the launches of an E4B decode step
 *        and its mean bytes a launch; phases even)
 * Prints, for each load path and PRE, the median of 20 graph replays
 * (after 5) as us a phase and GB/s, the median stage and wait-to-wait of
 * the phases in one more replay, and checks the last vector. */
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#define BENCH_NAME "stage_gpu"
#include "gpubench.cuh"

#define THREADS 256
#define KB 1280     /* floats a block stages: the i8 matvec's most (ISTAGE) */
#define K 2560      /* the vector: E4B's hidden size */
#define MAXPRE 8    /* 16-byte words a thread loads before the wait, at most */

enum { LD, CG, NC, CPASYNC, BULK, MODES };
static const char *const mode_name[MODES] = {"ld.global", "ld.global.cg", "ld.global.nc", "cp.async 16 B",
					     "cp.async.bulk (TMA)"};

struct sargs {
	float *x;                   /* [2][K]: phase p reads x[p & 1], writes x[(p + 1) & 1] */
	const uint4 *w;             /* the weights, walked in order, phase after phase */
	size_t per_phase16;         /* uint4 a phase */
	unsigned long long *t;      /* [phases][2]: first wait return (min), last slice staged (max) */
	unsigned *sink;
	unsigned long long delay_ns; /* each block waits this long after it starts before its first loads */
	int phase, pre, timed;
};

/* the block's slice of src (KB floats, 16-byte aligned) into sx */
template <int MODE>
__device__ __forceinline__ void stage(float *sx, const float *src, unsigned long long *mbar)
{
	if (MODE == LD || MODE == CG || MODE == NC) {
		for (int i = threadIdx.x; i < KB / 4; i += blockDim.x) {
			float4 v = MODE == LD   ? ((const float4 *)src)[i]
				   : MODE == CG ? __ldcg((const float4 *)src + i)
						: __ldg((const float4 *)src + i);
			((float4 *)sx)[i] = v;
		}
	} else if (MODE == CPASYNC) {
		for (int i = threadIdx.x; i < KB / 4; i += blockDim.x)
			asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(saddr(sx + 4 * i)), "l"(src + 4 * i)
				     : "memory");
		asm volatile("cp.async.wait_all;" ::: "memory");
	} else {
		if (threadIdx.x == 0)
			bulk_load(sx, src, KB * 4, mbar);
		bar_wait(mbar, 0);
	}
	__syncthreads();
}

template <int MODE>
__global__ void __launch_bounds__(THREADS) phase(struct sargs a)
{
	__shared__ __align__(16) float sx[KB];
	__shared__ __align__(8) unsigned long long mbar;
	const float *src = a.x + (a.phase & 1) * K + (blockIdx.x % (K / KB)) * KB;
	float *dst = a.x + ((a.phase + 1) & 1) * K;
	size_t per_block = a.per_phase16 / gridDim.x, n = per_block / THREADS;
	const uint4 *w = a.w + (size_t)a.phase * a.per_phase16 + blockIdx.x * per_block + threadIdx.x;
	uint4 r[MAXPRE];
	unsigned acc = 0;

	pdl_trigger();
	if (MODE == BULK && threadIdx.x == 0)
		bar_init(&mbar, 1);
	/* a block resident early (PDL) holds its first loads back this long,
	 * so that they are not in flight while the grid before stages x */
	if (a.delay_ns)
		for (unsigned long long t0 = gtime(); gtime() - t0 < a.delay_ns;)
			;
	/* the first words before the wait, into registers */
#pragma unroll
	for (int i = 0; i < MAXPRE; i++)
		if (i < a.pre && (size_t)i < n)
			r[i] = w[(size_t)i * THREADS];
	if (MODE == BULK)
		__syncthreads(); /* the mbarrier's init seen by every thread */
	pdl_wait();
	if (a.timed && threadIdx.x == 0)
		atomicMin(a.t + 2 * a.phase, gtime());
	stage<MODE>(sx, src, &mbar);
	if (a.timed && threadIdx.x == 0)
		atomicMax(a.t + 2 * a.phase + 1, gtime());
#pragma unroll
	for (int i = 0; i < MAXPRE; i++)
		if (i < a.pre && (size_t)i < n)
			acc ^= r[i].x ^ r[i].y ^ r[i].z ^ r[i].w;
	for (size_t i = a.pre; i < n; i++) {
		uint4 v = w[i * THREADS];

		acc ^= v.x ^ v.y ^ v.z ^ v.w;
	}
	if (acc == 0x9e3779b9u) /* never, for these weights: keeps the loads */
		a.sink[0] = acc;
	/* the next vector: element j from this block's slice, +1 */
	for (int j = blockIdx.x * THREADS + threadIdx.x; j < K; j += gridDim.x * THREADS)
		dst[j] = sx[j % KB] + 1.0f;
}


template <int MODE>
static cudaGraphExec_t capture(cudaStream_t s, struct sargs a, int phases, int nb)
{
	cudaGraph_t g;
	cudaGraphExec_t ge;
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];

	cfg.gridDim = dim3(nb);
	cfg.blockDim = dim3(THREADS);
	cfg.stream = s;
	at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[0].val.programmaticStreamSerializationAllowed = 1;
	cfg.attrs = at;
	cfg.numAttrs = 1;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	for (int p = 0; p < phases; p++) {
		a.phase = p;
		CK(cudaLaunchKernelEx(&cfg, phase<MODE>, a));
	}
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&ge, g, 0));
	CK(cudaGraphDestroy(g));
	return ge;
}

/* one load path at one PRE: timing, then one replay with the stage times */
template <int MODE>
static void run(cudaStream_t s, struct sargs a, int phases, int nb, double bytes)
{
	std::vector<float> st, ww;
	std::vector<unsigned long long> t((size_t)2 * phases);
	std::vector<float> hx(2 * K);
	cudaGraphExec_t plain, timed;
	float m;

	a.timed = 0;
	plain = capture<MODE>(s, a, phases, nb);
	a.timed = 1;
	timed = capture<MODE>(s, a, phases, nb);
	CK(cudaMemset(a.x, 0, sizeof(float) * 2 * K));
	m = time_graph(plain, s); /* 25 replays in all */
	/* every element went up by one a phase, from zero */
	CK(cudaMemcpy(hx.data(), a.x + (phases & 1) * K, sizeof(float) * K, cudaMemcpyDeviceToHost));
	for (int j = 0; j < K; j++)
		if (hx[j] != 25.0f * phases) {
			fprintf(stderr, "stage_gpu: %s: element %d is %g, not %g\n", mode_name[MODE], j, hx[j],
				25.0f * phases);
			exit(1);
		}
	for (int p = 0; p < phases; p++)
		t[2 * p] = ~0ull, t[2 * p + 1] = 0;
	CK(cudaMemcpy(a.t, t.data(), sizeof(t[0]) * t.size(), cudaMemcpyHostToDevice));
	CK(cudaGraphLaunch(timed, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaMemcpy(t.data(), a.t, sizeof(t[0]) * t.size(), cudaMemcpyDeviceToHost));
	for (int p = 1; p + 1 < phases; p++) { /* the first and last phases have no neighbour on one side */
		st.push_back((float)(t[2 * p + 1] - t[2 * p]) / 1e3f);
		ww.push_back((float)(t[2 * p + 2] - t[2 * p]) / 1e3f);
	}
	printf("  %-20s PRE %d (%5.2f MB before the wait): %6.2f us a phase, %5.0f GB/s; stage %5.2f us, "
	       "wait to wait %5.2f us (medians)\n",
	       mode_name[MODE], a.pre,
	       (double)std::min((size_t)a.pre, a.per_phase16 / nb / THREADS) * 16 * THREADS * nb / 1e6, m * 1e3 / phases,
	       bytes / (m / 1e3) / 1e9, median(st), median(ww));
	CK(cudaGraphExecDestroy(plain));
	CK(cudaGraphExecDestroy(timed));
}

int main(int argc, char **argv)
{
	int phases = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 470, dev = 0, sms = 0, nb;
	double mb = argc > 2 ? strtod(argv[2], NULL) : 4.33, delay_us;
	struct sargs a = {};
	cudaStream_t s;
	cudaDeviceProp pr;
	const int pres[] = {0, 2, 4, 8};

	CK(cudaGetDevice(&dev));
	CK(cudaGetDeviceProperties(&pr, dev));
	sms = pr.multiProcessorCount;
	nb = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 2 * sms;
	delay_us = argc > 4 ? strtod(argv[4], NULL) : 0.0;
	/* an even count: a replay ends with the vector where the next begins */
	if (phases < 4 || phases % 2 || mb < 0 || nb * THREADS < K || !(delay_us >= 0.0 && delay_us <= 1000.0)) {
		fprintf(stderr, "usage: stage_gpu [phases, even, >= 4] [MB a phase] [blocks >= %d] [delay us, 0-1000]\n",
			K / THREADS);
		return 2;
	}
	a.delay_ns = (unsigned long long)(delay_us * 1e3);
	/* a share of whole 16-byte words a thread, at least one (a PRE past
	 * the share loads the whole share before the wait: the kernel stops at
	 * n; the fifty-sixth session's first run had a floor of MAXPRE words
	 * here, which doubled the bytes of a phase at 2 blocks an SM) */
	{
		size_t per_thread = (size_t)(mb * 1e6 / 16 / THREADS / nb);

		if (per_thread < 1)
			per_thread = 1;
		a.per_phase16 = per_thread * THREADS * nb;
	}
	CK(cudaMalloc((void **)&a.w, a.per_phase16 * 16 * phases));
	CK(cudaMemset((void *)a.w, 0x5a, a.per_phase16 * 16 * phases));
	CK(cudaMalloc((void **)&a.x, sizeof(float) * 2 * K));
	CK(cudaMalloc((void **)&a.t, sizeof(unsigned long long) * 2 * phases));
	CK(cudaMalloc((void **)&a.sink, 4));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	printf("device: %s, %d SMs, L2 %d MB; %d phases of %d blocks x %d threads, %.2f MB of weights a phase "
	       "(%.2f GB in all), a slice of %d floats staged a block; first loads %.2f us after a block starts\n",
	       pr.name, sms, pr.l2CacheSize >> 20, phases, nb, THREADS, a.per_phase16 * 16 / 1e6,
	       a.per_phase16 * 16.0 * phases / 1e9, KB, a.delay_ns / 1e3);
	for (int i = 0; i < 4; i++) {
		double bytes = (double)a.per_phase16 * 16 * phases;

		a.pre = pres[i];
		run<LD>(s, a, phases, nb, bytes);
		run<CG>(s, a, phases, nb, bytes);
		run<NC>(s, a, phases, nb, bytes);
		run<CPASYNC>(s, a, phases, nb, bytes);
		if (pr.major >= 9)
			run<BULK>(s, a, phases, nb, bytes);
	}
	return 0;
}
