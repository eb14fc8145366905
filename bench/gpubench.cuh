/* gpubench.cuh - what the standalone GPU microbenchmarks (the .cu files of
 * bench/, with no fgpack code in them) share: CK, which ends the program
 * at the first CUDA error and names it with BENCH_NAME (defined before this
 * header); programmatic dependent launch's two instructions; and the timing
 * of a graph's replays. */
#ifndef FG_GPUBENCH_CUH
#define FG_GPUBENCH_CUH

#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                                                  \
	do {                                                                                                   \
		cudaError_t e_ = (x);                                                                          \
		if (e_ != cudaSuccess) {                                                                       \
			fprintf(stderr, BENCH_NAME ": %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
			exit(1);                                                                               \
		}                                                                                              \
	} while (0)

/* PDL's two instructions exist from sm_90 on: without the guards, make's
 * default NVCC_ARCH (sm_86 and sm_90) could not build these files. Their
 * sm_86 code has not run on an sm_86 GPU. */
__device__ __forceinline__ void pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

static float median(std::vector<float> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

/* ge replayed on st: the median ms of 20 replays, after 5 */
static float time_graph(cudaGraphExec_t ge, cudaStream_t st)
{
	cudaEvent_t e0, e1;
	std::vector<float> t;

	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int i = 0; i < 5; i++)
		CK(cudaGraphLaunch(ge, st));
	for (int i = 0; i < 20; i++) {
		float ms;

		CK(cudaEventRecord(e0, st));
		CK(cudaGraphLaunch(ge, st));
		CK(cudaEventRecord(e1, st));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		t.push_back(ms);
	}
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return median(t);
}

#endif
