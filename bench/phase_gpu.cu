/* phase_gpu.cu - what a dependent phase costs on the GPU: a chain of kernel
 * launches (plain, or with programmatic dependent launch as the engine's
 * step uses) against one persistent kernel whose blocks meet at a grid
 * barrier between phases (docs/bench.md, "phases"), and against the PDL
 * chain with no griddepcontrol.wait, each phase waiting instead for a
 * counter the blocks of the phase before add to once written (an acquire
 * load against release adds), so that no phase waits for the grid before
 * it to complete and flush.
 *
 * Each of N phases reads a value every block wrote in the phase before (so
 * the chain is real) and, with bytes > 0, streams its share of bytes of a
 * weight buffer larger than the L2 (as a decode step's matvecs do): phases
 * of bytes / N each, the buffer walked in order. The persistent kernel
 * issues the next phase's loads before it waits at the barrier, as the PDL
 * kernels issue theirs before griddepcontrol.wait.
 *
 * Build: make build/bench/phase_gpu (where nvcc exists)
 * Run:   build/bench/phase_gpu [phases] [total MB]    (defaults 470 and 2065: the
 *        launches and bytes of an E4B decode step)
 * Prints, for each grid, median ms of 20 replays (after 5) per variant, the
 * per-phase cost and GB/s, and checks every phase's result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#define BENCH_NAME "phase_gpu"
#include "gpubench.cuh"

#define THREADS 256

struct args {
	unsigned *val;        /* [2][nb]: phase p writes val[p & 1][b] */
	const uint4 *w;       /* the weights */
	size_t per_phase16;   /* uint4 per phase */
	unsigned *ctr;        /* the barrier's counter; the flag chain's, one a phase */
	unsigned *sink;
	int nb, phases;
};

/* U uint4 per thread of phase p's slice into r */
template <int U>
__device__ __forceinline__ void fetch(uint4 *r, const struct args &a, int p)
{
	size_t base = (size_t)p * a.per_phase16, i0 = (size_t)blockIdx.x * THREADS + threadIdx.x;
	size_t stride = (size_t)a.nb * THREADS;

#pragma unroll
	for (int u = 0; u < U; u++) {
		size_t i = i0 + u * stride;

		r[u] = i < a.per_phase16 ? __ldcs(a.w + base + i) : make_uint4(0, 0, 0, 0);
	}
}

template <int U>
__device__ __forceinline__ unsigned fold(const uint4 *r)
{
	unsigned s = 0;

#pragma unroll
	for (int u = 0; u < U; u++)
		s ^= r[u].x ^ r[u].y ^ r[u].z ^ r[u].w;
	return s;
}

/* phase p's dependent step: the value block b + 1 wrote in phase p - 1 */
__device__ __forceinline__ void step(const struct args &a, int p, unsigned s)
{
	if (threadIdx.x == 0) {
		unsigned prev = p ? __ldcg(a.val + ((p - 1) & 1) * a.nb + (blockIdx.x + 1) % a.nb) : 0u;

		a.val[(p & 1) * a.nb + blockIdx.x] = prev + 1;
	}
	if (s == 0x9e3779b9u) /* never, in practice: keeps the loads */
		a.sink[0] = s;
}

/* pdl 0: a plain launch; 1: PDL, griddepcontrol.wait; 2: PDL with no
 * griddepcontrol.wait at all: each block waits for ctr[p - 1] to count
 * every block of the phase before (an acquire load), and counts itself in
 * ctr[p] (a release add) once its step is written */
template <int U>
__global__ void __launch_bounds__(THREADS) one_phase(struct args a, int p, int pdl)
{
	uint4 r[U > 0 ? U : 1];

	if (pdl)
		pdl_trigger();
	if (U > 0)
		fetch<U>(r, a, p);
	if (pdl == 1)
		pdl_wait();
	if (pdl == 2 && p) {
		if (threadIdx.x == 0)
			acquire_at_least<true>(a.ctr + p - 1, (unsigned)a.nb);
		__syncthreads();
	}
	step(a, p, U > 0 ? fold<U>(r) : 1u);
	if (pdl == 2) {
		__syncthreads();
		if (threadIdx.x == 0)
			release_add(a.ctr + p);
	}
}

__device__ __forceinline__ void grid_barrier(unsigned *ctr, unsigned target)
{
	__syncthreads();
	if (threadIdx.x == 0) {
		release_add(ctr);
		acquire_at_least<false>(ctr, target);
	}
	__syncthreads();
}

template <int U>
__global__ void __launch_bounds__(THREADS) persistent(struct args a)
{
	uint4 r[U > 0 ? U : 1];

	if (U > 0)
		fetch<U>(r, a, 0);
	for (int p = 0; p < a.phases; p++) {
		unsigned s = U > 0 ? fold<U>(r) : 1u;

		if (U > 0 && p + 1 < a.phases) /* the next phase's weights before the barrier */
			fetch<U>(r, a, p + 1);
		if (p)
			grid_barrier(a.ctr, (unsigned)p * a.nb);
		step(a, p, s);
	}
}

static void check(struct args &a, const char *what)
{
	std::vector<unsigned> h(a.nb);

	CK(cudaMemcpy(h.data(), a.val + ((a.phases - 1) & 1) * a.nb, sizeof(unsigned) * a.nb, cudaMemcpyDeviceToHost));
	for (int b = 0; b < a.nb; b++)
		if (h[b] != (unsigned)a.phases) {
			printf("  %s: WRONG: block %d holds %u, not %d\n", what, b, h[b], a.phases);
			exit(1);
		}
}

template <int U>
static void run(struct args a, cudaStream_t st, double mb)
{
	const char *names[4] = {"launch chain", "launch chain + PDL", "persistent + barrier", "PDL + flags, no wait"};
	float ms[4];

	for (int v = 0; v < 4; v++) {
		cudaGraph_t g;
		cudaGraphExec_t ge;

		CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
		if (v != 2) {
			if (v == 3)
				CK(cudaMemsetAsync(a.ctr, 0, sizeof(unsigned) * a.phases, st));
			for (int p = 0; p < a.phases; p++) {
				cudaLaunchConfig_t cfg = {};
				cudaLaunchAttribute at[1];

				cfg.gridDim = dim3(a.nb);
				cfg.blockDim = dim3(THREADS);
				cfg.stream = st;
				at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
				at[0].val.programmaticStreamSerializationAllowed = 1;
				cfg.attrs = at;
				cfg.numAttrs = v ? 1 : 0;
				CK(cudaLaunchKernelEx(&cfg, one_phase<U>, a, p, v == 3 ? 2 : v));
			}
		} else {
			CK(cudaMemsetAsync(a.ctr, 0, sizeof(unsigned), st));
			persistent<U><<<a.nb, THREADS, 0, st>>>(a);
			CK(cudaGetLastError());
		}
		CK(cudaStreamEndCapture(st, &g));
		CK(cudaGraphInstantiate(&ge, g, 0));
		CK(cudaMemset(a.val, 0, sizeof(unsigned) * 2 * a.nb));
		ms[v] = time_graph(ge, st);
		check(a, names[v]);
		cudaGraphExecDestroy(ge);
		cudaGraphDestroy(g);
	}
	for (int v = 0; v < 4; v++)
		printf("  %-22s %8.3f ms  %6.2f us/phase  %7.0f GB/s  %5.2fx chain+PDL\n", names[v], ms[v],
		       1000.0 * ms[v] / a.phases, mb > 0 ? mb / 1000.0 / (ms[v] / 1000.0) : 0.0, ms[1] / ms[v]);
}

int main(int argc, char **argv)
{
	int phases = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 470;
	double mb = argc > 2 ? strtod(argv[2], NULL) : 2065.0;
	int sms, per = 0;
	cudaDeviceProp prop;
	cudaStream_t st;
	struct args a;
	uint4 *w;
	size_t n16 = (size_t)(mb * 1e6 / 16.0) + 1;

	if (phases < 1 || phases > 100000 || !(mb >= 0.0 && mb <= 1e6)) {
		fprintf(stderr, "usage: phase_gpu [phases 1..100000] [total MB 0..1e6]\n");
		return 2;
	}

	CK(cudaGetDeviceProperties(&prop, 0));
	sms = prop.multiProcessorCount;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaMalloc(&w, n16 * 16));
	CK(cudaMemset(w, 0x5a, n16 * 16));
	memset(&a, 0, sizeof a);
	a.w = w;
	a.phases = phases;
	CK(cudaMalloc(&a.val, sizeof(unsigned) * 2 * 8 * sms));
	CK(cudaMalloc(&a.ctr, sizeof(unsigned) * phases));
	CK(cudaMalloc(&a.sink, sizeof(unsigned)));
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, persistent<8>, THREADS, 0));
	printf("%s, %d SMs, %d resident blocks of %d threads per SM; %d phases, %.0f MB streamed in all\n", prop.name,
	       sms, per, THREADS, phases, mb);
	for (int k = 1; k <= 3 && k <= per; k++) {
		a.nb = k * sms;
		a.per_phase16 = 0;
		printf("grid %d blocks (%d per SM), no bytes:\n", a.nb, k);
		run<0>(a, st, 0.0);
		a.per_phase16 = std::min((size_t)(mb * 1e6 / 16.0) / phases, (size_t)a.nb * THREADS * (k == 1 ? 8 : k == 2 ? 4 : 3));
		printf("grid %d blocks (%d per SM), %.2f MB per phase:\n", a.nb, k, a.per_phase16 * 16.0 / 1e6);
		switch (k) {
		case 1: run<8>(a, st, a.per_phase16 * 16.0 * phases / 1e6); break;
		case 2: run<4>(a, st, a.per_phase16 * 16.0 * phases / 1e6); break;
		default: run<3>(a, st, a.per_phase16 * 16.0 * phases / 1e6); break;
		}
	}
	return 0;
}
