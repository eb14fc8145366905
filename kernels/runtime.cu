/* runtime.cu - the CUDA context behind fg_kernels.h: device, stream, scratch,
 * memory copies, graphs and event timers, each CUDA error turned into an
 * fgpack error that says what failed. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kcommon.cuh"
extern "C" {
#include "lib/buf.h"
}

extern "C" int fg_cuda_built(void)
{
	return 1;
}

/* A kernel of this build, asked which code the driver runs it from: every
 * .cu file is compiled for the same archs, so it speaks for all of them. */
__global__ void fg_k_arch_probe(void)
{
}

/* fg_kocc under FG_EMULATE_SM86: occupancy from the limits in ctx->prop
 * (an A10G's, set in fg_kctx_new) and the kernel's registers and static
 * shared memory, as the CUDA occupancy calculator counts them. */
cudaError_t fg_kocc(const struct fg_kctx *ctx, int *per, const void *f, int threads, size_t smem)
{
	const cudaDeviceProp *p = &ctx->prop;
	struct cudaFuncAttributes a;
	cudaError_t e;
	int warps = (threads + 31) / 32, rw, n;
	size_t sb;

	*per = 0;
	if (!ctx->emu86)
		return cudaOccupancyMaxActiveBlocksPerMultiprocessor(per, f, threads, smem);
	e = cudaFuncGetAttributes(&a, f);
	if (e != cudaSuccess)
		return e;
	sb = a.sharedSizeBytes + smem;
	if (threads < 1 || threads > a.maxThreadsPerBlock || sb > p->sharedMemPerBlockOptin)
		return cudaSuccess; /* none fits */
	rw = ((a.numRegs * 32 + 255) / 256) * 256; /* registers a warp, in units of 256 */
	n = p->maxThreadsPerMultiProcessor / (warps * 32);
	if (n > p->maxBlocksPerMultiProcessor)
		n = p->maxBlocksPerMultiProcessor;
	if (rw > 0 && p->regsPerMultiprocessor / (rw * warps) < n)
		n = p->regsPerMultiprocessor / (rw * warps);
	if ((int)(p->sharedMemPerMultiprocessor / (sb + p->reservedSharedMemPerBlock)) < n)
		n = (int)(p->sharedMemPerMultiprocessor / (sb + p->reservedSharedMemPerBlock));
	*per = n;
	return cudaSuccess;
}

int fg_kclusters(const void *f, dim3 grid, dim3 block, size_t smem, dim3 cl)
{
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];
	int n = 0;

	if (cl.x * cl.y * cl.z > 8 &&
	    cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.dynamicSmemBytes = smem;
	at[0].id = cudaLaunchAttributeClusterDimension;
	at[0].val.clusterDim.x = cl.x;
	at[0].val.clusterDim.y = cl.y;
	at[0].val.clusterDim.z = cl.z;
	cfg.attrs = at;
	cfg.numAttrs = 1;
	if (cudaOccupancyMaxActiveClusters(&n, f, &cfg) != cudaSuccess) {
		cudaGetLastError();
		n = 0;
	}
	return n;
}

extern "C" int fg_kctx_new(struct fg_kctx **out, struct fg_err *err)
{
	struct fg_kctx *c;
	int n = 0;
	cudaError_t e;

	*out = NULL;
	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		cudaGetLastError(); /* clear it */
		return fg_err_set(err, FG_EDEVICE, "no CUDA device: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
	}
	if (n < 1)
		return fg_err_set(err, FG_EDEVICE, "no CUDA device: none found");
	c = (struct fg_kctx *)calloc(1, sizeof(*c));
	if (!c)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	c->dev = 0;
#define FAIL_IF(call, what)                                                                              \
	do {                                                                                             \
		cudaError_t e_ = (call);                                                                 \
		if (e_ != cudaSuccess) {                                                                 \
			fg_err_set(err, FG_EDEVICE, "%s: %s (%s)", what, cudaGetErrorString(e_), cudaGetErrorName(e_)); \
			fg_kctx_free(c);                                                                 \
			return FG_EDEVICE;                                                               \
		}                                                                                        \
	} while (0)
	FAIL_IF(cudaSetDevice(0), "select CUDA device 0");
	FAIL_IF(cudaGetDeviceProperties(&c->prop, 0), "read CUDA device properties");
	{
		const char *k = getenv("FG_EMULATE_SM86");

		c->emu86 = k && !strcmp(k, "1") && c->prop.major >= 9;
	}
	if (c->emu86) {
		/* the plans see an A10G (sm_86, GA102): 80 SMs; an SM holds 1536
		 * threads, 16 blocks, 65536 registers and 100 KB of shared memory,
		 * 1 KB of it reserved a block, 99 KB at most a block (CUDA
		 * programming guide, compute capability 8.6). The device stays
		 * what it is. */
		size_t n = strlen(c->prop.name);

		snprintf(c->prop.name + n, sizeof(c->prop.name) - n, " as sm_86");
		c->prop.major = 8;
		c->prop.minor = 6;
		c->prop.multiProcessorCount = 80;
		c->prop.maxThreadsPerMultiProcessor = 1536;
		c->prop.maxBlocksPerMultiProcessor = 16;
		c->prop.regsPerMultiprocessor = 65536;
		c->prop.sharedMemPerMultiprocessor = 100 * 1024;
		c->prop.reservedSharedMemPerBlock = 1024;
		c->prop.sharedMemPerBlockOptin = 99 * 1024;
		c->prop.l2CacheSize = 6 << 20;
	}
	{
		/* Kernels compiled for a virtual arch below sm_90 have no
		 * griddepcontrol.wait, no bulk prefetch and no clusters (their
		 * bodies are #if'd out): a PTX-only sm_86 build that the driver
		 * JIT-compiles for an sm_90 GPU must not be launched with PDL, or
		 * a kernel would read its inputs while the kernel before still
		 * writes them. */
		struct cudaFuncAttributes fa;

		FAIL_IF(cudaFuncGetAttributes(&fa, (const void *)fg_k_arch_probe),
			"find this build's kernel code for the GPU (the archs it was built for: NVCC_ARCH, docs/gpu.md)");
		c->code_arch = fa.ptxVersion;
		c->sm90 = c->prop.major >= 9 && c->code_arch >= 90;
	}
	snprintf(c->name, sizeof(c->name), "%s (sm_%d%d, %d SMs, %.0f GB)", c->prop.name, c->prop.major,
		 c->prop.minor, c->prop.multiProcessorCount, (double)c->prop.totalGlobalMem / 1e9);
	FAIL_IF(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "create CUDA stream");
	FAIL_IF(cudaEventCreate(&c->ev0), "create CUDA event");
	FAIL_IF(cudaEventCreate(&c->ev1), "create CUDA event");
	FAIL_IF(cudaMalloc(&c->scratch, FG_SCRATCH_BYTES), "allocate 64 MB of CUDA scratch memory");
	c->scratch_bytes = FG_SCRATCH_BYTES;
	FAIL_IF(cudaMalloc((void **)&c->counters, sizeof(unsigned) * FG_CTX_COUNTERS), "allocate CUDA counters");
	FAIL_IF(cudaMemset(c->counters, 0, sizeof(unsigned) * FG_CTX_COUNTERS), "zero CUDA counters");
	c->pdl = c->sm90;
	{
		const char *k = getenv("FG_INT4_KERNEL");
		int kind = fg_int4_kind_named(k);

		c->int4_kind = kind < 0 ? FG_INT4_I8 : kind;
		k = getenv("FG_PREFETCH");
		c->pf_on = !c->sm90 ? 0 : k && *k >= '0' && *k <= '2' && !k[1] ? *k - '0' : FG_PF_DEFAULT;
		k = getenv("FG_NORM_WIDE");
		c->norm_wide = k && !strcmp(k, "1");
		k = getenv("FG_ATTN_CLUSTER");
		c->attn_cluster = k && !strcmp(k, "1"); /* off by default: docs/gpu.md, "Speed" */
		/* FG_ATTN_SHORT=0: no short launches; 1 to 256: that bound on their
		 * keys instead of FG_ATTN_SHORT_KEYS (measurements) */
		k = getenv("FG_ATTN_SHORT");
		if (!k || fg_parse_int(k, 0, FG_ATTN_SHORT_KEYS, &c->short_keys))
			c->short_keys = FG_ATTN_SHORT_KEYS;
		if (!c->sm90)
			c->short_keys = 0;
		k = getenv("FG_ATTN_FUSED");
		c->attn_fused = k && (!strcmp(k, "0") || !strcmp(k, "1")) ? *k - '0' : FG_ATTN_FUSED_DEFAULT;
		k = getenv("FG_ATTN_GRP");
		c->attn_grp = k && *k >= '0' && *k <= '2' && !k[1] ? *k - '0' : 2;
	}
#undef FAIL_IF
	*out = c;
	return 0;
}

extern "C" void fg_kctx_free(struct fg_kctx *c)
{
	if (!c)
		return;
	if (c->stream)
		cudaStreamSynchronize(c->stream);
	cudaFree(c->scratch);
	cudaFree(c->counters);
	if (c->ev0)
		cudaEventDestroy(c->ev0);
	if (c->ev1)
		cudaEventDestroy(c->ev1);
	for (int i = 0; i < FG_KCTX_MARKS; i++)
		if (c->mark[i])
			cudaEventDestroy(c->mark[i]);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	free(c);
}

extern "C" int fg_kctx_set_pdl(struct fg_kctx *c, int on)
{
	if (!c)
		return 0;
	c->pdl = on && c->sm90;
	return c->pdl;
}

extern "C" int fg_kctx_set_prefetch(struct fg_kctx *c, int level)
{
	if (!c)
		return 0;
	c->pf_on = !c->sm90 || level < 0 ? 0 : level > 2 ? 2 : level;
	if (c->pf_on < 2)
		c->pf = fg_kpf();
	return c->pf_on;
}

extern "C" int fg_kctx_set_attn_fused(struct fg_kctx *c, int on)
{
	if (!c)
		return 0;
	if (on >= 0)
		c->attn_fused = on ? 1 : 0;
	return c->attn_fused;
}

extern "C" int fg_kctx_set_attn_cluster(struct fg_kctx *c, int on)
{
	if (!c)
		return 0;
	if (on >= 0)
		c->attn_cluster = on ? 1 : 0;
	return c->attn_cluster && c->sm90;
}

extern "C" int fg_kctx_set_attn_short(struct fg_kctx *c, int on)
{
	if (!c)
		return 0;
	if (on >= 0)
		c->attn_short = on && c->short_keys;
	return c->attn_short;
}

extern "C" int fg_kctx_set_attn_grp(struct fg_kctx *c, int on)
{
	if (!c)
		return 0;
	if (on >= 0)
		c->attn_grp = on > 2 ? 2 : on;
	return c->attn_grp;
}

extern "C" int fg_kctx_attn_short_keys(const struct fg_kctx *c)
{
	return c ? c->short_keys : 0;
}

extern "C" int fg_kctx_prefetch_level(const struct fg_kctx *c)
{
	return c ? c->pf_on : 0;
}

extern "C" void fg_kctx_prefetch(struct fg_kctx *c, const void *d_p, size_t bytes)
{
	bytes &= ~(size_t)15;
	if (!c || c->pf_on < 2 || !d_p || !bytes || (uintptr_t)d_p % 16)
		return;
	for (int r = 0; r < FG_PF_RANGES; r++)
		if (!c->pf.n[r]) {
			c->pf.p[r] = (const char *)d_p;
			c->pf.n[r] = bytes;
			return;
		}
}

extern "C" int fg_kctx_set_int4_kind(struct fg_kctx *c, int kind)
{
	if (!c)
		return FG_INT4_I8;
	if (kind == FG_INT4_FMA || kind == FG_INT4_MMA || kind == FG_INT4_I8)
		c->int4_kind = kind;
	return c->int4_kind;
}

extern "C" int fg_kctx_int4_kind(const struct fg_kctx *c)
{
	return c ? c->int4_kind : FG_INT4_I8;
}

extern "C" const char *fg_kctx_device_name(const struct fg_kctx *c)
{
	return c ? c->name : "none";
}

/* The driver's version string from NVML, loaded at run time (the engine
 * binary links no NVIDIA library but the static CUDA runtime); "unknown"
 * when the library or its answer is missing. */
static void nvml_driver_version(char *out, size_t cap)
{
	typedef int (*init_fn)(void);
	typedef int (*ver_fn)(char *, unsigned);
	const char *lib = getenv("FG_NVML_LIBRARY");
	void *h = dlopen(lib && *lib ? lib : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	char v[96];

	snprintf(out, cap, "unknown");
	if (!h)
		return;
	{
		init_fn init = (init_fn)dlsym(h, "nvmlInit_v2");
		init_fn shut = (init_fn)dlsym(h, "nvmlShutdown");
		ver_fn ver = (ver_fn)dlsym(h, "nvmlSystemGetDriverVersion");

		if (init && ver && init() == 0) {
			memset(v, 0, sizeof(v));
			if (ver(v, sizeof(v) - 1) == 0 && v[0])
				snprintf(out, cap, "%s", v);
			if (shut)
				shut();
		}
	}
	dlclose(h);
}

extern "C" int fg_kctx_device_info(const struct fg_kctx *c, struct fg_kdevice *out, struct fg_err *err)
{
	int v = 0;

	memset(out, 0, sizeof(*out));
	if (!c)
		return fg_err_set(err, FG_EINVAL, "no CUDA context");
	snprintf(out->name, sizeof(out->name), "%s", c->prop.name);
	out->cc_major = c->prop.major;
	out->cc_minor = c->prop.minor;
	out->sm_count = c->prop.multiProcessorCount;
	out->mem_bytes = (unsigned long long)c->prop.totalGlobalMem;
	if (cudaDriverGetVersion(&v) == cudaSuccess)
		out->driver_api = v;
	v = 0;
	if (cudaRuntimeGetVersion(&v) == cudaSuccess)
		out->runtime = v;
	cudaGetLastError(); /* neither failure is the caller's */
	nvml_driver_version(out->driver, sizeof(out->driver));
	return 0;
}

extern "C" int fg_kctx_code_arch(const struct fg_kctx *c)
{
	return c ? c->code_arch : 0;
}

extern "C" int fg_kctx_sm_count(const struct fg_kctx *c)
{
	return c ? c->prop.multiProcessorCount : 0;
}

extern "C" int fg_kctx_sync(struct fg_kctx *c, struct fg_err *err)
{
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	FG_CK(cudaStreamSynchronize(c->stream), "CUDA kernel");
	FG_CK(cudaGetLastError(), "CUDA kernel");
	return 0;
}

extern "C" int fg_kmem_alloc(struct fg_kctx *c, void **d_out, size_t n, struct fg_err *err)
{
	cudaError_t e;

	*d_out = NULL;
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	e = cudaMalloc(d_out, n ? n : 1);
	if (e != cudaSuccess) {
		*d_out = NULL;
		cudaGetLastError();
		return fg_err_set(err, e == cudaErrorMemoryAllocation ? FG_ENOMEM : FG_EDEVICE,
				  "allocate %zu bytes of GPU memory: %s", n, cudaGetErrorString(e));
	}
	return 0;
}

extern "C" void fg_kmem_free(struct fg_kctx *c, void *d)
{
	(void)c;
	if (d)
		cudaFree(d);
}

extern "C" int fg_kmem_alloc_mapped(struct fg_kctx *c, void **host, size_t n, struct fg_err *err)
{
	void *d = NULL;
	cudaError_t e;

	*host = NULL;
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	e = cudaHostAlloc(host, n ? n : 1, cudaHostAllocMapped);
	if (e == cudaSuccess && ((e = cudaHostGetDevicePointer(&d, *host, 0)) != cudaSuccess || d != *host)) {
		cudaFreeHost(*host);
		*host = NULL;
		if (e == cudaSuccess) /* no unified addressing: not a GPU this engine runs on */
			return fg_err_set(err, FG_EDEVICE, "mapped host memory has another address on the GPU");
	}
	if (e != cudaSuccess) {
		*host = NULL;
		cudaGetLastError();
		return fg_err_set(err, e == cudaErrorMemoryAllocation ? FG_ENOMEM : FG_EDEVICE,
				  "allocate %zu bytes of mapped host memory: %s", n, cudaGetErrorString(e));
	}
	return 0;
}

extern "C" void fg_kmem_free_mapped(void *host)
{
	if (host)
		cudaFreeHost(host);
}

extern "C" int fg_kctx_mark(struct fg_kctx *c, int i, struct fg_err *err)
{
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	if (i < 0 || i >= FG_KCTX_MARKS)
		return fg_err_set(err, FG_EINVAL, "stream mark %d: need 0..%d", i, FG_KCTX_MARKS - 1);
	if (!c->mark[i])
		FG_CK(cudaEventCreateWithFlags(&c->mark[i], cudaEventDisableTiming), "create CUDA event");
	FG_CK(cudaEventRecord(c->mark[i], c->stream), "record CUDA event");
	return 0;
}

extern "C" int fg_kctx_wait(struct fg_kctx *c, int i, struct fg_err *err)
{
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	if (i < 0 || i >= FG_KCTX_MARKS || !c->mark[i])
		return fg_err_set(err, FG_EINVAL, "stream mark %d was never recorded", i);
	FG_CK(cudaEventSynchronize(c->mark[i]), "CUDA kernel");
	return 0;
}

extern "C" void fg_kctx_chain(struct fg_kctx *c, int32_t *d_idpos, int32_t *d_ring, int mask, const int32_t *mm,
			      int n_mm, int32_t pad)
{
	if (!c)
		return;
	c->chain = fg_kchain();
	if (!d_idpos || !d_ring || n_mm < 0 || n_mm > 3)
		return;
	c->chain.idpos = d_idpos;
	c->chain.ring = d_ring;
	c->chain.mask = mask;
	c->chain.n_mm = n_mm;
	for (int i = 0; i < n_mm; i++)
		c->chain.mm[i] = mm[i];
	c->chain.pad = pad;
}

extern "C" int fg_kmem_upload(struct fg_kctx *c, void *d_dst, const void *src, size_t n, struct fg_err *err)
{
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	FG_CK(cudaMemcpyAsync(d_dst, src, n, cudaMemcpyHostToDevice, c->stream), "copy to GPU");
	FG_CK(cudaStreamSynchronize(c->stream), "copy to GPU");
	return 0;
}

extern "C" int fg_kmem_download(struct fg_kctx *c, void *dst, const void *d_src, size_t n, struct fg_err *err)
{
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	FG_CK(cudaMemcpyAsync(dst, d_src, n, cudaMemcpyDeviceToHost, c->stream), "copy from GPU");
	FG_CK(cudaStreamSynchronize(c->stream), "copy from GPU");
	return 0;
}

extern "C" int fg_kmem_fill(struct fg_kctx *c, void *d_dst, int byte, size_t n, struct fg_err *err)
{
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	FG_CK(cudaMemsetAsync(d_dst, byte, n, c->stream), "fill GPU memory");
	return 0;
}

extern "C" int fg_kmem_copy2d(struct fg_kctx *c, void *d_dst, size_t dpitch, const void *d_src, size_t spitch,
			      size_t width, size_t height, struct fg_err *err)
{
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	FG_CK(cudaMemcpy2DAsync(d_dst, dpitch, d_src, spitch, width, height, cudaMemcpyDeviceToDevice, c->stream),
	      "copy GPU memory");
	return 0;
}

struct fg_kgraph {
	cudaGraph_t graph;
	cudaGraphExec_t exec;
};

extern "C" int fg_kgraph_begin(struct fg_kctx *c, struct fg_err *err)
{
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	FG_CK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "begin CUDA graph capture");
	return 0;
}

extern "C" int fg_kgraph_end(struct fg_kctx *c, struct fg_kgraph **out, struct fg_err *err)
{
	struct fg_kgraph *g;
	cudaError_t e;

	*out = NULL;
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	g = (struct fg_kgraph *)calloc(1, sizeof(*g));
	if (!g)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	e = cudaStreamEndCapture(c->stream, &g->graph);
	if (e == cudaSuccess)
		e = cudaGraphInstantiate(&g->exec, g->graph, 0);
	if (e != cudaSuccess) {
		fg_kgraph_free(g);
		cudaGetLastError();
		return fg_err_set(err, FG_EDEVICE, "CUDA graph capture: %s", cudaGetErrorString(e));
	}
	*out = g;
	return 0;
}

#ifdef FG_KTRACE
#include <cxxabi.h>

#include <algorithm>
#include <string>
#include <vector>

extern "C" int fg_kt_set_int4(struct fg_ktrec *buf, unsigned slots, unsigned maxb);
extern "C" int fg_kt_set_int4_i8(struct fg_ktrec *buf, unsigned slots, unsigned maxb);
extern "C" int fg_kt_set_ops(struct fg_ktrec *buf, unsigned slots, unsigned maxb);
extern "C" int fg_kt_set_ple(struct fg_ktrec *buf, unsigned slots, unsigned maxb);
extern "C" int fg_kt_set_moe(struct fg_ktrec *buf, unsigned slots, unsigned maxb);
extern "C" int fg_kt_set_draft(struct fg_ktrec *buf, unsigned slots, unsigned maxb);

#define KT_SLOTS 2048u /* launches told apart (%gridid modulo this) */
#define KT_MAXB 2048u  /* blocks a launch recorded */

static int kt_set(struct fg_ktrec *b)
{
	return fg_kt_set_int4(b, KT_SLOTS, KT_MAXB) || fg_kt_set_int4_i8(b, KT_SLOTS, KT_MAXB) ||
	       fg_kt_set_ops(b, KT_SLOTS, KT_MAXB) || fg_kt_set_ple(b, KT_SLOTS, KT_MAXB) ||
	       fg_kt_set_moe(b, KT_SLOTS, KT_MAXB) || fg_kt_set_draft(b, KT_SLOTS, KT_MAXB);
}

/* One launch of the traced replay: its blocks' marks folded. */
struct kt_launch {
	unsigned long long grid, t0, t1, t1x, tx[8]; /* t0, t1 the first; t1x, tx[i] the last */
	unsigned blocks, threads, seen, late, sms;
	std::string name;
};

static std::string kt_name(const void *func)
{
	const char *raw = NULL;
	std::string n = "?";
	int st = 0;

	if (cudaFuncGetName(&raw, func) != cudaSuccess || !raw) {
		cudaGetLastError();
		return n;
	}
	char *dm = abi::__cxa_demangle(raw, NULL, NULL, &st);
	n = dm && st == 0 ? dm : raw;
	free(dm);
	size_t par = n.find('(');
	if (par != std::string::npos && par > 0)
		n.resize(par); /* the template's arguments stay, the parameters go */
	if (n.compare(0, 5, "void ") == 0)
		n.erase(0, 5);
	return n;
}

static unsigned long long kt_med(std::vector<unsigned long long> v)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

/* Replays g once with the marks recorded; writes PATH and the summary. */
static int kt_trace(struct fg_kctx *c, struct fg_kgraph *g, const char *path, struct fg_err *err)
{
	size_t nrec = (size_t)KT_SLOTS * KT_MAXB, nn = 0;
	struct fg_ktrec *d = NULL;
	std::vector<struct fg_ktrec> h(nrec);
	std::vector<kt_launch> L;
	std::vector<cudaGraphNode_t> nodes;
	std::vector<std::string> names;
	std::vector<unsigned> ngrid;
	unsigned collide = 0;
	FILE *f;

	FG_CK(cudaStreamSynchronize(c->stream), "trace: finish the work before");
	FG_CK(cudaMalloc(&d, nrec * sizeof(*d)), "trace: allocate the records");
	if (cudaMemset(d, 0, nrec * sizeof(*d)) != cudaSuccess || kt_set(d) ||
	    cudaGraphLaunch(g->exec, c->stream) != cudaSuccess || cudaStreamSynchronize(c->stream) != cudaSuccess ||
	    cudaMemcpy(h.data(), d, nrec * sizeof(*d), cudaMemcpyDeviceToHost) != cudaSuccess || kt_set(NULL)) {
		cudaError_t e = cudaGetLastError();

		kt_set(NULL);
		cudaFree(d);
		return fg_err_set(err, FG_EDEVICE, "trace the step: %s", cudaGetErrorString(e));
	}
	cudaFree(d);
	for (size_t s = 0; s < KT_SLOTS; s++) {
		kt_launch l = {};

		for (size_t b = 0; b < KT_MAXB; b++) {
			const struct fg_ktrec *r = &h[s * KT_MAXB + b];

			if (!r->grid)
				continue;
			if (l.seen && r->grid != l.grid) {
				collide++;
				continue;
			}
			if (!l.seen++) {
				l.grid = r->grid;
				l.blocks = r->dims[0];
				l.threads = r->dims[1];
			}
			if (r->t[0] && (!l.t0 || r->t[0] < l.t0))
				l.t0 = r->t[0];
			if (r->t[1] && (!l.t1 || r->t[1] < l.t1))
				l.t1 = r->t[1];
			l.t1x = std::max(l.t1x, r->t[1]);
			for (int m = 2; m < 8; m++)
				l.tx[m] = std::max(l.tx[m], r->t[m]);
		}
		if (l.seen)
			L.push_back(l);
	}
	for (auto &l : L) { /* blocks that started after the launch's first wait returned */
		std::vector<unsigned> sm(1024, 0);

		for (size_t b = 0; b < KT_MAXB; b++) {
			const struct fg_ktrec *r = &h[(size_t)(l.grid % KT_SLOTS) * KT_MAXB + b];

			if (r->grid != l.grid)
				continue;
			if (r->t[0] > l.t1 && l.t1)
				l.late++;
			if (r->sm < 1024 && !sm[r->sm]++)
				l.sms++;
		}
	}
	std::sort(L.begin(), L.end(), [](const kt_launch &a, const kt_launch &b) {
		unsigned long long ka = a.t1 ? a.t1 : a.t0, kb = b.t1 ? b.t1 : b.t0;
		return ka < kb;
	});
	/* the graph's kernel nodes in the order captured, named */
	if (cudaGraphGetNodes(g->graph, NULL, &nn) == cudaSuccess && nn) {
		nodes.resize(nn);
		if (cudaGraphGetNodes(g->graph, nodes.data(), &nn) == cudaSuccess)
			for (size_t i = 0; i < nn; i++) {
				cudaGraphNodeType ty;
				cudaKernelNodeParams p;

				if (cudaGraphNodeGetType(nodes[i], &ty) != cudaSuccess || ty != cudaGraphNodeTypeKernel ||
				    cudaGraphKernelNodeGetParams(nodes[i], &p) != cudaSuccess)
					continue;
				names.push_back(kt_name(p.func));
				ngrid.push_back(p.gridDim.x * p.gridDim.y * p.gridDim.z);
			}
	}
	cudaGetLastError();
	bool named = names.size() == L.size();
	for (size_t i = 0; named && i < L.size(); i++)
		if (ngrid[i] != L[i].blocks)
			named = false;
	for (size_t i = 0; i < L.size(); i++)
		L[i].name = named ? names[i] : "?";
	if (!(f = fopen(path, "w")))
		return fg_err_set(err, FG_EIO, "trace: open %s", path);
	unsigned long long z = L.empty() ? 0 : L[0].t0;
	for (auto &l : L)
		z = std::min(z, l.t0 ? l.t0 : z);
	fprintf(f, "seq\tname\tblocks\tthreads\trecorded\tsms\tlate\tstart\twait\twait_last\tmark2_last\tmark3_last\t"
		   "mark4_last\tmark5_last\tmark6_last\tmark7_last\tchain\n");
	for (size_t i = 0; i < L.size(); i++) {
		const kt_launch &l = L[i];
		long long chain = i + 1 < L.size() && L[i + 1].t1 && l.t1 ? (long long)(L[i + 1].t1 - l.t1) : -1;
		auto rel = [z](unsigned long long t) { return t ? (long long)(t - z) : -1LL; };

		fprintf(f, "%zu\t%s\t%u\t%u\t%u\t%u\t%u\t%lld\t%lld\t%lld", i, l.name.c_str(), l.blocks, l.threads,
			l.seen, l.sms, l.late, rel(l.t0), rel(l.t1), rel(l.t1x));
		for (int m = 2; m < 8; m++)
			fprintf(f, "\t%lld", rel(l.tx[m]));
		fprintf(f, "\t%lld\n", chain);
	}
	fclose(f);
	/* the summary: per kernel, the chain it adds (its first wait to the next's) */
	std::vector<std::string> keys;
	for (auto &l : L)
		if (std::find(keys.begin(), keys.end(), l.name) == keys.end())
			keys.push_back(l.name);
	struct row {
		std::string k;
		size_t n;
		double sum;
		unsigned long long chain, lead, spread, mk[8], late;
	};
	std::vector<row> rows;
	double total = 0;
	for (auto &k : keys) {
		std::vector<unsigned long long> ch, ld, sp, mk[8], lt;
		double sum = 0;

		for (size_t i = 0; i < L.size(); i++) {
			const kt_launch &l = L[i];

			if (l.name != k || i + 1 >= L.size() || !l.t1 || !L[i + 1].t1)
				continue;
			unsigned long long cc = L[i + 1].t1 - l.t1;
			ch.push_back(cc);
			sum += cc;
			ld.push_back(l.t0 && l.t0 < l.t1 ? l.t1 - l.t0 : 0);
			sp.push_back(l.t1x - l.t1);
			for (int m = 2; m < 8; m++)
				mk[m].push_back(l.tx[m] > l.t1 ? l.tx[m] - l.t1 : 0);
			lt.push_back(l.late);
		}
		total += sum;
		row rw = {k, ch.size(), sum, kt_med(ch), kt_med(ld), kt_med(sp), {0}, kt_med(lt)};
		for (int m = 2; m < 8; m++)
			rw.mk[m] = kt_med(mk[m]);
		rows.push_back(rw);
	}
	std::sort(rows.begin(), rows.end(), [](const row &a, const row &b) { return a.sum > b.sum; });
	fprintf(stderr, "trace: %zu launches%s, %u records in a shared slot dropped, chain %.3f ms (first wait to last)\n",
		L.size(), named ? "" : " (not matched to the graph's nodes: unnamed)", collide, total / 1e6);
	fprintf(stderr, "trace: %-44s %4s %7s %6s %6s %6s   marks after the first wait, us: 2-7 %4s\n", "kernel", "n",
		"sum ms", "chain", "lead", "waits", "late");
	for (auto &r : rows) {
		fprintf(stderr, "trace: %-44.44s %4zu %7.3f %6.2f %6.2f %6.2f  ", r.k.c_str(), r.n, r.sum / 1e6,
			r.chain / 1e3, r.lead / 1e3, r.spread / 1e3);
		for (int m = 2; m < 8; m++)
			fprintf(stderr, " %5.2f", r.mk[m] / 1e3);
		fprintf(stderr, " %4llu\n", r.late);
	}
	return 0;
}
#endif

extern "C" int fg_kgraph_launch(struct fg_kctx *c, struct fg_kgraph *g, struct fg_err *err)
{
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
#ifdef FG_KTRACE
	{
		static long n;
		const char *out = getenv("FG_KTRACE_OUT"), *at = getenv("FG_KTRACE_AT");

		if (out && ++n == (at ? strtol(at, NULL, 10) : 100))
			return kt_trace(c, g, out, err);
	}
#endif
	FG_CK(cudaGraphLaunch(g->exec, c->stream), "CUDA graph launch");
	return 0;
}

extern "C" void fg_kgraph_free(struct fg_kgraph *g)
{
	if (!g)
		return;
	if (g->exec)
		cudaGraphExecDestroy(g->exec);
	if (g->graph)
		cudaGraphDestroy(g->graph);
	free(g);
}

extern "C" int fg_ktimer_start(struct fg_kctx *c, struct fg_err *err)
{
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	FG_CK(cudaEventRecord(c->ev0, c->stream), "record CUDA event");
	return 0;
}

extern "C" int fg_ktimer_stop(struct fg_kctx *c, double *out_ms, struct fg_err *err)
{
	float ms = 0;

	*out_ms = 0;
	if (fg_need_ctx(c, err))
		return FG_EINVAL;
	FG_CK(cudaEventRecord(c->ev1, c->stream), "record CUDA event");
	FG_CK(cudaEventSynchronize(c->ev1), "CUDA kernel");
	FG_CK(cudaEventElapsedTime(&ms, c->ev0, c->ev1), "read CUDA event");
	*out_ms = ms;
	return 0;
}
