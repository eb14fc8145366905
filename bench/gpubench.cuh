/* gpubench.cuh - what the standalone GPU microbenchmarks (the .cu files of
 * bench/, with no fgpack code in them) share: CK, which ends the program
 * at the first CUDA error and names it with BENCH_NAME (defined before this
 * header); programmatic dependent launch's two instructions; shared-memory
 * addresses, the global timer, counters released and acquired, mbarriers
 * and bulk copies; and the timing of a graph's replays. */
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

/* a shared-memory pointer as the 32-bit address PTX takes */
__device__ __forceinline__ unsigned saddr(const void *p)
{
	return (unsigned)__cvta_generic_to_shared(p);
}

/* the GPU's global timer, ns */
__device__ __forceinline__ unsigned long long gtime(void)
{
	unsigned long long t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* ctr += 1, ordered after this thread's writes (and the block's, after a
 * barrier) */
__device__ __forceinline__ void release_add(unsigned *ctr)
{
	asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(ctr) : "memory");
}

/* spins until *ctr >= target (an acquire load: what was written before the
 * adds that made it so is seen after); NAP: a short sleep between loads */
template <bool NAP>
__device__ __forceinline__ void acquire_at_least(const unsigned *ctr, unsigned target)
{
	unsigned v;

	for (;;) {
		asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(ctr) : "memory");
		if (v >= target)
			break;
		if (NAP)
			__nanosleep(32);
	}
}

/* An mbarrier in shared memory (sm_90; nothing below it): bar_init by one
 * thread, then a barrier before anyone waits on it; bulk_load (one thread)
 * copies bytes from global src into shared dst by the tensor memory
 * accelerator, completing the barrier's phase; bar_wait spins until the
 * phase of that parity has completed. */
__device__ __forceinline__ void bar_init(unsigned long long *bar, unsigned count)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(bar)), "r"(count) : "memory");
	asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#else
	(void)bar;
	(void)count;
#endif
}

__device__ __forceinline__ void bulk_load(void *dst, const void *src, unsigned bytes, unsigned long long *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(bar)), "r"(bytes) : "memory");
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
			     saddr(dst)),
		     "l"(src), "r"(bytes), "r"(saddr(bar))
		     : "memory");
#else
	(void)dst;
	(void)src;
	(void)bytes;
	(void)bar;
#endif
}

__device__ __forceinline__ void bar_wait(unsigned long long *bar, unsigned parity)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	for (unsigned done = 0; !done;)
		asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
			     "selp.u32 %0, 1, 0, p;\n}"
			     : "=r"(done)
			     : "r"(saddr(bar)), "r"(parity)
			     : "memory");
#else
	(void)bar;
	(void)parity;
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
