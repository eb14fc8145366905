/* fg_kernels.h - the CUDA kernels of a Gemma 4 decode step, behind C calls.
 *
 * Every launcher takes a context (one CUDA stream plus scratch memory) and
 * returns 0 or a negative FG_E* code with a message in err: FG_EUNSUPPORTED
 * when fgpack was built without nvcc, FG_EDEVICE when there is no usable GPU
 * or a launch / kernel failed, FG_EINVAL for bad shapes. Launchers only queue
 * work on the context's stream; fg_kctx_sync waits and reports a kernel fault
 * that happened meanwhile. Pointers named d_* are device memory.
 *
 * Determinism: no float atomics anywhere; every reduction (split-K matvec,
 * attention over key chunks, argmax over blocks) runs in a fixed order, so a
 * fixed input gives the same bits on every run on the same GPU model.
 *
 * Per-step values that change while a captured CUDA graph is replayed (the
 * token id, the position) are read from device memory (d_id, d_pos), never
 * passed by value.
 *
 * The CPU twin of each operation is in kernels/cpu_twin.h. */
#ifndef FG_KERNELS_H
#define FG_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "lib/err.h"

struct fg_kctx; /* opaque: device, stream, scratch */

/* 1 when this build has the CUDA kernels compiled in (nvcc was present). */
int fg_cuda_built(void);

/* Opens device 0, makes a stream and scratch memory. Fails with
 * FG_EUNSUPPORTED (no CUDA in this build) or FG_EDEVICE (no device, driver
 * missing, out of memory) and says which. With FG_EMULATE_SM86=1 on an sm_90
 * GPU the context reports an A10G's limits (80 SMs, 99 KB of shared memory
 * a block, sm_86) to every plan and to fg_kctx_device_info, for tests of the
 * A10G's code paths (docs/gpu.md, "Building"). */
int fg_kctx_new(struct fg_kctx **out, struct fg_err *err);
void fg_kctx_free(struct fg_kctx *ctx);
/* "NVIDIA H200 (sm_90, 132 SMs, 143 GB)"-style description; borrowed. */
const char *fg_kctx_device_name(const struct fg_kctx *ctx);
int fg_kctx_sm_count(const struct fg_kctx *ctx);
/* The virtual arch the driver runs this build's kernels from (cudaFuncAttributes
 * .ptxVersion: 86 for an sm_86 PTX-only build, 90 for sm_90 code); PDL, the L2
 * prefetches and clusters are used only where both it and the GPU are 90 or
 * newer. 0 without CUDA. */
int fg_kctx_code_arch(const struct fg_kctx *ctx);

/* The device's identity as a golden transcript records it. */
struct fg_kdevice {
	char name[256];          /* "NVIDIA H200" (cudaDeviceProp.name) */
	int cc_major, cc_minor;  /* compute capability */
	int sm_count;
	unsigned long long mem_bytes;
	int driver_api;          /* cudaDriverGetVersion: newest CUDA the driver serves, 12080 = 12.8; 0 unknown */
	int runtime;             /* cudaRuntimeGetVersion: the CUDA runtime built in; 0 unknown */
	char driver[96];         /* NVML's driver version ("550.54.15"), or "unknown" when
				  * libnvidia-ml.so.1 (FG_NVML_LIBRARY overrides the name)
				  * cannot be loaded or answers nothing */
};
/* Fills out for ctx's device; never fails for a missing NVML (FG_EUNSUPPORTED
 * only without CUDA in this build). */
int fg_kctx_device_info(const struct fg_kctx *ctx, struct fg_kdevice *out, struct fg_err *err);
/* Programmatic dependent launch of the matvec (on by default where the GPU and
 * the kernels' code have it, sm_90+: fg_kctx_code_arch): returns whether it
 * is on after the call. For benchmarks. */
int fg_kctx_set_pdl(struct fg_kctx *ctx, int on);
/* L2 prefetches (cp.async.bulk.prefetch.L2, sm_90), only hints: no result
 * changes. Level 1: the attention asks L2 for its blocks' keys and values
 * before it waits for the kernel before it. Level 2 also: the next INT4
 * matvec or attention launched on ctx asks L2 for the ranges queued by
 * fg_kctx_prefetch (up to FG_PF_RANGES, more are dropped; that launch takes
 * them all), spread over its blocks before it waits for its inputs, so that
 * a later matvec's weights stream in meanwhile. The level comes from
 * FG_PREFETCH (0, 1, 2; default 1) when the context is made; 0 before sm_90.
 * fg_kctx_set_prefetch returns the level in force after the call. */
#define FG_PF_RANGES 4
int fg_kctx_set_prefetch(struct fg_kctx *ctx, int level);
int fg_kctx_prefetch_level(const struct fg_kctx *ctx);
void fg_kctx_prefetch(struct fg_kctx *ctx, const void *d_p, size_t bytes);
/* fg_k_attn_decode_post in one launch (1) or as fg_k_qkv_post + fg_k_attn_decode
 * (0); 1 is the default (measured faster on the H200 with 16-key chunks);
 * the same bits either way.
 * The context starts with FG_ATTN_FUSED (0 or 1) or the build's default
 * (FG_ATTN_FUSED_DEFAULT); on < 0 leaves it.
 * Returns the setting in force after the call. */
int fg_kctx_set_attn_fused(struct fg_kctx *ctx, int on);
/* The decode attention's chunk blocks of one kv head launched as one
 * thread-block cluster (16 blocks where the GPU schedules them, else 8;
 * sm_90 code on an sm_90 GPU only): at positions whose chunks fit in one
 * cluster they combine through its distributed shared memory instead of
 * global memory, a fence and a counter. The same bits either way. Off by
 * default (measured on the H200: 1.6-2.0 % off the step at positions below
 * 256, 0.2-1.8 % slower above, docs/bench.md); FG_ATTN_CLUSTER=1 turns it
 * on when the context is made; on < 0 leaves it. Returns whether it is in
 * force after the call. */
int fg_kctx_set_attn_cluster(struct fg_kctx *ctx, int on);
/* Short decode attention launches (on 1; 0 the default, any position; on
 * < 0 leaves it): the fg_k_attn_decode and fg_k_attn_decode_post launches
 * that follow serve only positions below fg_kctx_attn_short_keys, and each
 * kv head's chunks launch as one thread-block cluster that combines them
 * through its shared memory (as FG_ATTN_CLUSTER=1 does there) instead of a
 * grid covering the whole cache. The same bits as the full launch. A
 * caller that knows the position (the engine's step graphs: one captured
 * for short positions, one for the rest) gets the cluster's gain below that
 * bound without the slower cluster launch above it. Where no cluster of
 * the kernel fits, a launch is the full one. A short launch run at a later
 * position fails as a kernel fault (FG_EDEVICE at the next sync; the
 * context is then unusable, as after any fault), never a wrong answer.
 * The engine's step and drafter graphs choose by position, so they never
 * do that. Returns the setting in force after the call (0 where
 * fg_kctx_attn_short_keys is 0). */
int fg_kctx_set_attn_short(struct fg_kctx *ctx, int on);
/* The decode attention with qkv post built for the launch's exact shape,
 * where one is built (group 4, Gemma 4 E4B's; head sizes 256 and 512): the
 * unrolled loops lose their tests. on 2 (the default): group and head size;
 * 1: the group only; 0: the kernel for any shape, as FG_ATTN_GRP=<0|1|2>
 * when the context was made (measurements); on < 0 leaves it. The same bits
 * at every level. Returns the level in force after the call (0 without
 * CUDA). */
int fg_kctx_set_attn_grp(struct fg_kctx *ctx, int on);
/* The keys (position + 1) a short decode attention launch serves: 256 with
 * sm_90 code on an sm_90 GPU; 0 (no short launches) elsewhere or with
 * FG_ATTN_SHORT=0 when the context was made (FG_ATTN_SHORT=N, 1 to 256:
 * N, for measurements). */
int fg_kctx_attn_short_keys(const struct fg_kctx *ctx);
/* The keys a short decode attention launch serves: one cluster of 16
 * blocks of (at least) 16 keys a kv head. */
#define FG_ATTN_SHORT_KEYS 256
/* Waits for everything queued on the context's stream; a kernel fault or
 * launch failure since the last sync comes back here as FG_EDEVICE. */
int fg_kctx_sync(struct fg_kctx *ctx, struct fg_err *err);

/* Device memory. fg_kmem_free accepts NULL. Copies are synchronous. */
int fg_kmem_alloc(struct fg_kctx *ctx, void **d_out, size_t n, struct fg_err *err);
void fg_kmem_free(struct fg_kctx *ctx, void *d);
int fg_kmem_upload(struct fg_kctx *ctx, void *d_dst, const void *src, size_t n, struct fg_err *err);
int fg_kmem_download(struct fg_kctx *ctx, void *dst, const void *d_src, size_t n, struct fg_err *err);
int fg_kmem_fill(struct fg_kctx *ctx, void *d_dst, int byte, size_t n, struct fg_err *err);
/* height rows of width bytes from d_src (rows spitch apart) to d_dst (dpitch
 * apart), device to device, queued on the context's stream (not synchronous). */
int fg_kmem_copy2d(struct fg_kctx *ctx, void *d_dst, size_t dpitch, const void *d_src, size_t spitch, size_t width,
		   size_t height, struct fg_err *err);

/* Host memory the GPU writes into (pinned and mapped): *host is also the
 * address kernels use. fg_kmem_free_mapped accepts NULL. */
int fg_kmem_alloc_mapped(struct fg_kctx *ctx, void **host, size_t n, struct fg_err *err);
void fg_kmem_free_mapped(void *host);
/* Marks in the context's stream: fg_kctx_mark(i) records mark i (i <
 * FG_KCTX_MARKS) after what is queued so far; fg_kctx_wait(i) waits until the
 * GPU has passed it, not for what was queued after (a kernel fault shows
 * here as FG_EDEVICE, as in fg_kctx_sync). */
int fg_kctx_mark(struct fg_kctx *ctx, int i, struct fg_err *err);
int fg_kctx_wait(struct fg_kctx *ctx, int i, struct fg_err *err);
/* Chained greedy steps: the next fg_k_softcap_argmax launched on ctx (and so
 * every replay of a graph that captured it) also writes its answer t (0
 * where every logit was NaN) into d_ring[pos & mask], pos = d_idpos[1], and
 * then sets d_idpos to {t as an input id (one of the n_mm <= 3 ids in mm:
 * pad), pos + 1}, so the next step can start without the host. */
void fg_kctx_chain(struct fg_kctx *ctx, int32_t *d_idpos, int32_t *d_ring, int mask, const int32_t *mm, int n_mm,
		   int32_t pad);

/* CUDA graphs: everything launched on ctx between begin and end is captured
 * (not run) into a graph that fg_kgraph_launch replays on ctx's stream. */
struct fg_kgraph;
int fg_kgraph_begin(struct fg_kctx *ctx, struct fg_err *err);
int fg_kgraph_end(struct fg_kctx *ctx, struct fg_kgraph **out, struct fg_err *err);
int fg_kgraph_launch(struct fg_kctx *ctx, struct fg_kgraph *g, struct fg_err *err);
void fg_kgraph_free(struct fg_kgraph *g);

/* A measuring build's record of one block (make KTRACE=1, kernels/kcommon.cuh):
 * with FG_KTRACE_OUT=PATH set, the FG_KTRACE_AT-th graph replay (default
 * 100) runs with every block's marks recorded, and fg_kgraph_launch writes
 * its launches, in order, to PATH as tab-separated rows and a summary by
 * kernel to stderr (docs/gpu.md, "Where a step's time goes"). */
struct fg_ktrec {
	unsigned long long grid; /* %gridid: the launch */
	unsigned long long t[8]; /* global timer, ns: started, its wait returned, the kernel's marks 2-7; 0: none */
	unsigned dims[2];        /* blocks in the launch, threads a block */
	unsigned sm, pad;        /* the SM it ran on */
};

/* Timing with device events: fg_ktimer_start / fg_ktimer_stop return the
 * milliseconds between them (stop synchronizes). */
int fg_ktimer_start(struct fg_kctx *ctx, struct fg_err *err);
int fg_ktimer_stop(struct fg_kctx *ctx, double *out_ms, struct fg_err *err);

/* ---- INT4 weights, group 32 / 64 / 128 / 256 -------------------------------
 *
 * Standard input (compressed-tensors pack-quantized, symmetric, group G):
 *   packed int32 [n, k/8]: nibble i (bits 4i..4i+3) of word j = element 8j+i, as q+8
 *   scale  bf16  [n, ceil(k/G)]
 * Engine layout ("fg-int4-tile32-v1"), made by fg_int4_repack:
 *   rows padded to a multiple of 32 (tiles), k padded to a multiple of G;
 *   words  uint32 [tiles][k/32 chunks][32 rows][4 words]: the 16 bytes lane r of
 *          a warp loads for chunk c are row 32t+r's elements 32c..32c+31, in the
 *          standard nibble order; a warp's 32 lanes read 512 contiguous bytes and
 *          all need the same 32 activations (a shared-memory broadcast);
 *   scales bf16 [tiles][k/G groups][32 rows].
 * Padding words are 0x88888888 (q = 0) and padding scales 0. */
#define FG_INT4_TILE 32
#define FG_INT4_MAX_M 8

/* Bytes of the engine layout for an n x k matrix. */
void fg_int4_layout_size(size_t *words_bytes, size_t *scales_bytes, int n, int k, int group);
/* Repacks into caller buffers of the sizes above (host memory, pure C). k must
 * be a positive multiple of 8, n positive, group 32, 64, 128 or 256
 * (else FG_EUNSUPPORTED). */
int fg_int4_repack(uint32_t *words, uint16_t *scales, const int32_t *packed, const uint16_t *scale_bf16,
		   int n, int k, int group, struct fg_err *err);
/* Inverse of fg_int4_repack, for tests. */
int fg_int4_unpack(int32_t *packed, uint16_t *scale_bf16, const uint32_t *words, const uint16_t *scales,
		   int n, int k, int group, struct fg_err *err);

/* The tensor-core layout ("fg-int4-mma8-v1"), made by fg_int4_mma_repack,
 * built for the bf16 instruction mma.m16n8k16 with the weights as its B
 * operand:
 *   rows padded to a multiple of 8 (row blocks), k padded to a multiple of
 *   max(G, 128) (chunks of 128 elements);
 *   words  uint32 [chunk][row block][32 lanes][4 words]: lane l = 4 * r + j
 *          holds row 8 * rb + r; nibble i of its word w is element
 *          128 * chunk + fg_int4_chunk_offset(j, w, i) of that row, so that
 *          the nibble pairs (i, i + 4) of a word are, as bf16 pairs, the lane's
 *          B fragment registers of mma 2w (i = 0, 1) and 2w + 1 (i = 2, 3), mma
 *          s covering elements 16s .. 16s + 15 of the chunk. A warp reads
 *          512 contiguous bytes per (chunk, row block);
 *   scales bf16 [k/G groups][padded rows].
 * Padding nibbles are 8 (q = 0) and padding scales 0. */
#define FG_INT4_RB 8      /* rows per row block */
#define FG_INT4_CHUNK 128 /* elements per chunk */

struct fg_int4_mma_dims {
	int rblocks, npad, kpad, chunks, groups;
};
void fg_int4_mma_dims(struct fg_int4_mma_dims *d, int n, int k, int group);
/* Element offset inside a chunk of nibble i (0..7) of word w (0..3) of lane part j (0..3). */
int fg_int4_chunk_offset(int j, int w, int i);
void fg_int4_mma_layout_size(size_t *words_bytes, size_t *scales_bytes, int n, int k, int group);
int fg_int4_mma_repack(uint32_t *words, uint16_t *scales, const int32_t *packed, const uint16_t *scale_bf16,
		       int n, int k, int group, struct fg_err *err);
int fg_int4_mma_unpack(int32_t *packed, uint16_t *scale_bf16, const uint32_t *words, const uint16_t *scales,
		       int n, int k, int group, struct fg_err *err);

/* The INT8 tensor-core layout ("fg-int4-i8-v1"), made by fg_int4_i8_repack,
 * built for mma.m16n8k32 (u8 weights as the A operand, s8 activation parts
 * as B):
 *   rows padded to a multiple of 16 (tiles), k padded to a multiple of
 *   max(G, 64) (a unit: one scale group, or two of 32);
 *   words  uint32 [tile][k/64 chunks][32 lanes][4 words]: lane l = 4 * g + t,
 *          word j holds row 16 * tile + g + 8 * (j & 1); its nibble i is
 *          element 64 * chunk + fg_int4_i8_offset(t, j, i) of that row, so
 *          that w & 0x0F0F0F0F and (w >> 4) & 0x0F0F0F0F are, byte by byte,
 *          the lane's A registers of k-step j >> 1 (the nibble value q + 8
 *          as an unsigned byte). A warp reads 512 contiguous bytes per
 *          (tile, chunk);
 *   scales bf16 [tile][k/G groups][8][2]: rows g and g + 8 of the tile side
 *          by side (one 32-bit load per lane and group).
 * Padding nibbles are 8 (q = 0) and padding scales 0. */
#define FG_INT4_I8_TILE 16
#define FG_INT4_I8_CHUNK 64

struct fg_int4_i8_dims {
	int tiles, npad, kpad, chunks, groups, unit, units;
};
void fg_int4_i8_dims(struct fg_int4_i8_dims *d, int n, int k, int group);
/* Element offset inside a chunk of nibble i (0..7) of word j (0..3) of lane part t (0..3). */
int fg_int4_i8_offset(int t, int j, int i);
void fg_int4_i8_layout_size(size_t *words_bytes, size_t *scales_bytes, int n, int k, int group);
int fg_int4_i8_repack(uint32_t *words, uint16_t *scales, const int32_t *packed, const uint16_t *scale_bf16, int n,
		      int k, int group, struct fg_err *err);
/* fg_int4_i8_repack on `threads` threads (1..16; its tiles split in
 * order among them), the same bytes whatever their number; 0 (what
 * fg_int4_i8_repack passes): the CPUs online, at most 16, with at least 64
 * tiles each (docs/gpu.md, "The repack at load"). */
int fg_int4_i8_repack_threads(uint32_t *words, uint16_t *scales, const int32_t *packed, const uint16_t *scale_bf16,
			      int n, int k, int group, int threads, struct fg_err *err);
int fg_int4_i8_unpack(int32_t *packed, uint16_t *scale_bf16, const uint32_t *words, const uint16_t *scales, int n,
		      int k, int group, struct fg_err *err);

/* Which INT4 kernel (and so layout) fg_kint4_new prepares a matrix for:
 * the CUDA-core kernel on the tile layout (fp32 dequantization and sums),
 * the bf16 tensor-core kernel on the row-block layout (bf16 mma, each fp32
 * activation split into three bf16 parts, fp32 sums), or the INT8
 * tensor-core kernel on the i8 layout (integer mma on the nibbles and a
 * four-part int8 split of the activations, exact integer sums per group:
 * kernels/i8split.h; the default: docs/bench.md measured it 2.8 % faster
 * on the E4B step than the CUDA-core kernel). A context starts with
 * FG_INT4_I8, or with the kernel FG_INT4_KERNEL names ("fma", "mma" or
 * "i8"). */
enum { FG_INT4_FMA = 0, FG_INT4_MMA = 1, FG_INT4_I8 = 2 };
/* The kind a kernel's name gives ("fma", "mma" or "i8", as FG_INT4_KERNEL
 * takes them); -1 for any other name or NULL. */
static inline int fg_int4_kind_named(const char *name)
{
	if (name && !strcmp(name, "fma"))
		return FG_INT4_FMA;
	if (name && !strcmp(name, "mma"))
		return FG_INT4_MMA;
	if (name && !strcmp(name, "i8"))
		return FG_INT4_I8;
	return -1;
}
/* Sets the kind for matrices made after the call; returns the kind now in use. */
int fg_kctx_set_int4_kind(struct fg_kctx *ctx, int kind);
int fg_kctx_int4_kind(const struct fg_kctx *ctx);

/* An INT4 matrix on the device, in one of the engine layouts, with its own
 * split-K counters. splits = 0 picks the K split from the shape and the GPU. */
struct fg_kint4 {
	uint32_t *d_words;
	uint16_t *d_scales;
	uint32_t *d_counters; /* one per tile (fma) or per 8 row blocks (mma), zero between launches */
	float *d_partial;     /* split-K partial sums */
	unsigned long long *d_pairs; /* i8: a slot per output for launches of two splits, or NULL */
	int kind;             /* FG_INT4_FMA or FG_INT4_MMA */
	int n, k, kpad, tiles, group;
	int splits;
	int npad, rblocks, chunks, max_splits; /* mma (and i8: chunks, max_splits) */
	int units, wave, sms, stage;           /* i8: units of k (one group, or two of 32), blocks per wave, SMs, activations a block stages at most */
	int pair_stage;                        /* i8: ... or at most in a launch of two splits (i8_plan) */
	int pair, pair_fill;                   /* i8: two splits meet in d_pairs (FG_I8_PAIR); FG_I8_PAIR_FILL=1 fills the SMs instead */
};
/* Device bytes of the matrix's words and scales. */
size_t fg_kint4_bytes(const struct fg_kint4 *w);
/* Repacks a standard-format matrix and uploads it. */
int fg_kint4_new(struct fg_kctx *ctx, struct fg_kint4 **out, const int32_t *packed, const uint16_t *scale_bf16,
		 int n, int k, int group, int splits, struct fg_err *err);
void fg_kint4_free(struct fg_kctx *ctx, struct fg_kint4 *w);
/* fg_kctx_prefetch of the part [from, to) (fractions of its bytes, 16-byte
 * multiples) of w's words, and of its scales when from is 0; w NULL: nothing. */
void fg_kint4_prefetch(struct fg_kctx *ctx, const struct fg_kint4 *w, double from, double to);
/* d_y[m][n] = sum_k W[n][k] * d_x[m][k] for m < M, 1 <= M <= FG_INT4_MAX_M
 * (fp32 activations, fp32 accumulation; the dequantized weight q*scale is
 * exact). FG_INT4_MMA: x = hi + mid + lo in bf16 (to fp32 precision), exact
 * products on the tensor cores, fp32 sums per group; M <= 2 with the weights
 * as the A operand, M = 3..5 as the B operand, M > 5 is two launches.
 * d_x (and d_gate, d_up below) must be 16-byte aligned (FG_EINVAL). */
int fg_k_int4_matvec(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x, int m,
		     struct fg_err *err);
/* FG_INT4_I8 matrices: the K slice (in units) and warps per block a launch
 * with m vectors uses (what fg_ref_int4_i8_matvec needs to give the same
 * bits); 0 when w is not an i8 matrix. */
int fg_kint4_i8_plan(const struct fg_kint4 *w, int m, int *slice, int *warps);

/* Whether fg_k_int4_matvec_red adds into its d_y (an i8 matrix whose
 * one-vector launch takes two K splits): 1, else 0. */
int fg_k_int4_red(const struct fg_kint4 *w);
/* d_y = W . d_x (M = 1, fg_k_int4_matvec's bits), or with d_up W .
 * (gelu_tanh(d_x) * d_up) (fg_k_int4_matvec_geglu's), for a decode step
 * whose outputs alternate between two buffers. Where fg_k_int4_red(w), each of
 * the two K splits adds its partial sum into d_y by a reduction, with no
 * round trip, so d_y must hold zeros before the launch (the same bits but
 * for subnormal partial sums, which the reduction flushes to zero); else
 * d_y is written. Either way, after the launch waits for the kernel before it,
 * its threads zero d_clr[0..nclr) (NULL: nothing), the other buffer, for
 * the next launch of the kind; its readers must have finished before this
 * launch. FG_EINVAL where w is not an INT4 i8 matrix. */
int fg_k_int4_matvec_red(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			 const float *d_up, float *d_clr, int nclr, struct fg_err *err);

/* d_y = W . (gelu_tanh(d_gate) * d_up), M = 1: GeGLU fused into the matvec's
 * input staging (the same gelu as fg_k_geglu). */
int fg_k_int4_matvec_geglu(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_gate,
			   const float *d_up, struct fg_err *err);

/* The end of an E-model decoder layer after its MLP in one launch of one
 * thread-block cluster (kernels/ple.cu; sm_90 and later):
 *   d_h = d_h + rmsnorm(d_x) * d_w1
 *   u   = gelu_tanh(G . d_h) * d_pl       G [p][n], INT4
 *   y   = Pr . u                          Pr [n][p], INT4
 *   d_h = (d_h + rmsnorm(y) * d_w2) * scale
 *   d_a = rmsnorm(d_h) * d_w3
 * what fg_k_rmsnorm_residual, two INT4 matvecs (the second with GeGLU) and
 * fg_k_residual_norm give in four launches, in the order fg_ref_ple_tail
 * gives (its arithmetic up to gelu's tanhf). fg_kple_new takes both
 * matrices in the standard packed format (same group), words and bf16
 * scales as the checkpoint's bytes (any alignment); FG_EUNSUPPORTED on
 * a GPU without clusters or for shapes it does not take: then the four
 * launches stay. fg_kple_cluster: the blocks of the launch (16 or 8). */
struct fg_kple;
int fg_kple_new(struct fg_kctx *ctx, struct fg_kple **out, const void *g_packed, const void *g_scale,
		const void *p_packed, const void *p_scale, int n, int p, int group, struct fg_err *err);
void fg_kple_free(struct fg_kctx *ctx, struct fg_kple *w);
int fg_kple_cluster(const struct fg_kple *w);
int fg_k_ple_tail(struct fg_kctx *ctx, float *d_h, float *d_a, const float *d_x, const struct fg_kple *w,
		  const float *d_pl, const float *d_w1, const float *d_w2, float scale, const float *d_w3, float eps,
		  struct fg_err *err);
/* fg_k_ple_tail on each of rows rows (a prompt chunk: d_h, d_a, d_x
 * [rows][n], row r's per-layer input at d_pl + r pl_stride), each row the
 * step's bits: one cluster a row. */
int fg_k_ple_tail_rows(struct fg_kctx *ctx, float *d_h, float *d_a, const float *d_x, const struct fg_kple *w,
		       const float *d_pl, size_t pl_stride, int rows, const float *d_w1, const float *d_w2, float scale,
		       const float *d_w3, float eps, struct fg_err *err);

/* ---- other operations -------------------------------------------------------*/

/* d_y[r][i] = bf16 W[rows ? rows[r] : r][i] . d_x  for r < n: a bf16 matrix
 * (row-major [*, k]) times one fp32 vector; rows (device, may be NULL) picks
 * rows, e.g. a keepset of the tied LM head. */
int fg_k_bf16_matvec(struct fg_kctx *ctx, float *d_y, const uint16_t *d_w, const float *d_x, const int32_t *d_rows,
		     int n, int k, struct fg_err *err);

/* The same for an f32 matrix [n][k] (no row subset). Both take any k up to
 * 12288: a k of whole 16-byte pieces with 16-byte aligned weights goes
 * through 16-byte loads, any other (tiny models' odd widths) through
 * element loads, in a fixed order either way. */
int fg_k_f32_matvec(struct fg_kctx *ctx, float *d_y, const float *d_w, const float *d_x, int n, int k,
		    struct fg_err *err);

/* RMSNorm over rows of n: y = x * rsqrt(mean(x^2) + eps) * w (w may be NULL
 * = no weight; Gemma 4 has no +1 offset). y may equal x. */
int fg_k_rmsnorm(struct fg_kctx *ctx, float *d_y, const float *d_x, const float *d_w, int rows, int n, float eps,
		 struct fg_err *err);
/* Fused residual: d_h = (d_h + rmsnorm(d_x) * w) * scale, one row of n. */
int fg_k_rmsnorm_residual(struct fg_kctx *ctx, float *d_h, const float *d_x, const float *d_w, int n, float eps,
			  float scale, struct fg_err *err);

/* End of a sublayer and the next input norm in one pass (n values, one row):
 * h = (h + rmsnorm(x) * w) * scale; a = rmsnorm(h) * w2. */
int fg_k_residual_norm(struct fg_kctx *ctx, float *d_h, const float *d_x, const float *d_w, float scale, float *d_a,
		       const float *d_w2, int n, float eps, struct fg_err *err);

/* After the q|k|v projection (d_qkv = q [heads][d] | k [kv_heads][d] |
 * v [kv_heads][d]): per-head RMSNorm of q (d_qnorm), k (d_knorm), v (no
 * weight), table RoPE (fg_k_rope_inv) of q and k, and k, v stored into slot
 * (*d_pos % cap) of the caches [kv_heads][cap][d] (also left normed in
 * d_qkv). kv_heads = 0: q only (a layer reading another layer's cache).
 * head_dim <= 1024. */
int fg_k_qkv_post(struct fg_kctx *ctx, float *d_qkv, int heads, int kv_heads, int head_dim, const float *d_qnorm,
		  const float *d_knorm, const float *d_inv, const int32_t *d_pos, float *d_kcache, float *d_vcache,
		  int cap, float eps, struct fg_err *err);

/* Rotate-half RoPE in place on x [heads][head_dim] at position *d_pos: pair
 * (i, i + head_dim/2) turns by pos * theta^(-2i/head_dim) for i < rot_pairs;
 * pairs at and past rot_pairs pass through ("proportional" RoPE with
 * rot_pairs = partial_rotary_factor * head_dim / 2; default RoPE with
 * rot_pairs = head_dim / 2). Angles in fp32 as transformers computes them. */
int fg_k_rope(struct fg_kctx *ctx, float *d_x, int heads, int head_dim, int rot_pairs, float theta,
	      const int32_t *d_pos, struct fg_err *err);

/* RoPE from a table of head_dim/2 inverse frequencies (d_inv, device; a 0
 * leaves its pair unrotated), angle = pos * inv[i] in fp32, cos and sin of it
 * in double then rounded: engine/cpu's fg_cpu_rope exactly. */
int fg_k_rope_inv(struct fg_kctx *ctx, float *d_x, int heads, int head_dim, const float *d_inv, const int32_t *d_pos,
		  struct fg_err *err);

/* The turns of that RoPE for positions 0 .. rows - 1, for
 * fg_k_attn_decode_post: d_turns[2 (p half + i)] = cos and [.. + 1] = sin of
 * pair i at position p (half = head_dim / 2 pairs of d_inv), the floats the
 * kernels compute themselves (the same expression, so the same bits).
 * d_turns holds 2 rows half floats. */
int fg_k_rope_table(struct fg_kctx *ctx, float *d_turns, const float *d_inv, int half, int rows, struct fg_err *err);

/* d_out[i] = gelu_tanh(d_gate[i]) * d_up[i], i < n (d_out may alias either). */
int fg_k_geglu(struct fg_kctx *ctx, float *d_out, const float *d_gate, const float *d_up, int n, struct fg_err *err);

/* d_out[i] = bf16 table[*d_id][i] * scale, i < n. */
int fg_k_embed(struct fg_kctx *ctx, float *d_out, const uint16_t *d_table, const int32_t *d_id, int n, float scale,
	       struct fg_err *err);
/* The same over an f32 table (an F16 / F32 checkpoint's, widened at upload):
 * the same arithmetic, so a bf16 table widened gives the same bits. */
int fg_k_embed_f32(struct fg_kctx *ctx, float *d_out, const float *d_table, const int32_t *d_id, int n, float scale,
		   struct fg_err *err);

/* Per-layer inputs: for each layer l < layers, with D = dim,
 *   out[l] = (table[*d_id][l*D .. +D] * tok_scale
 *             + rmsnorm(proj[l] * proj_scale) * norm_w) * rsqrt(2)
 * where d_proj = W_plp . x was computed before (layers*D floats). */
int fg_k_ple(struct fg_kctx *ctx, float *d_out, const uint16_t *d_table, const int32_t *d_id, const float *d_proj,
	     const float *d_norm_w, int layers, int dim, float tok_scale, float proj_scale, float eps,
	     struct fg_err *err);
/* fg_k_ple over an f32 table, as fg_k_embed_f32. */
int fg_k_ple_f32(struct fg_kctx *ctx, float *d_out, const float *d_table, const int32_t *d_id, const float *d_proj,
		 const float *d_norm_w, int layers, int dim, float tok_scale, float proj_scale, float eps,
		 struct fg_err *err);

/* Writes this step's k and v ([kv_heads][head_dim]) into slot (*d_pos % cap)
 * of the caches [kv_heads][cap][head_dim]: a ring buffer when cap is the
 * sliding window, a plain cache when cap >= the sequence length. */
int fg_k_kv_store(struct fg_kctx *ctx, float *d_kcache, float *d_vcache, const float *d_k, const float *d_v,
		  int kv_heads, int head_dim, int cap, const int32_t *d_pos, struct fg_err *err);

/* Decode attention of one query position *d_pos over min(*d_pos + 1, cap)
 * cached slots: out[h] = softmax(scale * q[h] . K[g]) V[g] with g = h /
 * (heads / kv_heads). Split over chunks of keys; the chunks combine in slot
 * order. head_dim <= 512; cap may be up to 1 << 20. *d_pos is read before
 * the kernel waits for the one before it (to prefetch its keys and values
 * into L2, and so that blocks past the valid keys leave at once): it must
 * come from the host (fg_kmem_upload), not from a kernel queued just before. */
int fg_k_attn_decode(struct fg_kctx *ctx, float *d_out, const float *d_q, const float *d_kcache,
		     const float *d_vcache, int heads, int kv_heads, int head_dim, int cap, const int32_t *d_pos,
		     float scale, struct fg_err *err);

/* fg_k_qkv_post followed by fg_k_attn_decode, as those two launches or, when
 * fg_kctx_set_attn_fused / FG_ATTN_FUSED=1 asks, in one: d_qkv = raw q [heads][d] | k
 * [kv_heads][d] | v [kv_heads][d] of the projection (q only needed when
 * !own). own: the layer owns the caches, so k and v are normed (k_norm / no
 * weight), k rotated, and both stored into slot *d_pos % cap before the
 * attention reads them; !own: the caches (another layer's) are only read.
 * In one launch every attention block norms and rotates the query heads it
 * serves, and the block whose chunk holds the slot makes the new row: the
 * same bits as the two launches. d_qkv's contents afterwards are unspecified (the two launches
 * leave the normed rows there). head_dim even, <= 512; the d_pos rule of
 * fg_k_attn_decode applies. d_turns (may be NULL): fg_k_rope_table's turns
 * for d_inv, turn_rows positions; the one launch reads a position's turns
 * there, before its wait, instead of computing them in double after it
 * (the same bits); at and past turn_rows it computes them. */
int fg_k_attn_decode_post(struct fg_kctx *ctx, float *d_out, float *d_qkv, int heads, int kv_heads, int head_dim,
			  const float *d_qnorm, const float *d_knorm, const float *d_inv, const float *d_turns,
			  int turn_rows, const int32_t *d_pos, float *d_kcache, float *d_vcache, int cap, int own,
			  float eps, float scale, struct fg_err *err);

/* Final softcap and greedy choice: z[i] = cap * tanh(z[i] / cap) in place
 * (cap <= 0: unchanged), then *d_best = ids ? ids[j] : j for the j with the
 * largest z (lowest j on ties; NaN never wins). ids (device, may be NULL)
 * maps a keepset's rows back to vocabulary ids. n < 1 << 30. */
int fg_k_softcap_argmax(struct fg_kctx *ctx, int32_t *d_best, float *d_z, const int32_t *d_ids, int n, float cap,
			struct fg_err *err);

/* Log-probabilities of rows of logits, computed where they are: rows r in
 * [0, rows) at d_z + r * stride, n values each (already softcapped), d_ids
 * (device, may be NULL) the vocabulary id of each column (a keepset's rows;
 * the columns' ids ascending). Per row, into d_out[r] (device):
 *   lse   = max + log(sum of expf(z - max))  (the sum in double, its order
 *           fixed), max over the non-NaN values (a NaN makes lse NaN);
 *   lp    = (float)(z[w] - lse) and rank = 1 + #{j : z[j] > z[w]} for the
 *           column w = d_want[r] (device; -1: an id the row lacks, z[w] =
 *           -inf); d_want NULL: w = the row's largest value (rank 1);
 *   top   = the k (0..FG_K_LP_TOP_MAX) largest values, largest first, the
 *           lower id on ties, NaN never, as (id, (float)(z - lse)); n_top =
 *           min(k, non-NaN values).
 * The same bits on every run; fg_ref_row_logprobs is the twin.
 * 1 <= n < 1 << 30, 1 <= rows <= FG_K_LP_ROWS_MAX. */
#define FG_K_LP_TOP_MAX 20
#define FG_K_LP_ROWS_MAX 64
struct fg_klp {
	double lse;
	float lp;
	int32_t rank, n_top, pad_;
	int32_t top_id[FG_K_LP_TOP_MAX];
	float top_lp[FG_K_LP_TOP_MAX];
};
int fg_k_row_logprobs(struct fg_kctx *ctx, struct fg_klp *d_out, const float *d_z, size_t stride, int rows,
		      const int32_t *d_ids, int n, const int32_t *d_want, int k, struct fg_err *err);

/* ---- prompt chunks (prefill) ------------------------------------------------
 *
 * A chunk of `rows` prompt tokens at positions pos0, pos0 + 1, ... runs each
 * operation once over all its rows (the weights read once per chunk, not
 * once per token). Every row gets the same bits as the one-token operation
 * of the decode step above at that row's position: the chunk is an exact
 * reordering of token-by-token prefill, not an approximation. Row r of a
 * [rows][n] array starts at r * n. pos0 is passed by value (chunks are not
 * captured in graphs). */

/* Row r of d_y [rows][w->n] = what fg_k_int4_matvec (m = 1) gives for row r
 * of d_x [rows][w->k]; with d_x2 (non-NULL), what fg_k_int4_matvec_geglu
 * gives for gate row r of d_x and up row r of d_x2. Every INT4 kind; the i8
 * kind as one tensor-core GEMM whose fp32 sums follow the m = 1 launch plan
 * (fg_kint4_i8_plan), the others as rows one-vector launches. d_x, d_x2
 * 16-byte aligned, w->k a multiple of 4. */
int fg_k_int4_gemm(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x, const float *d_x2,
		   int rows, struct fg_err *err);
/* Experiments (bench/int4_gemm.c): reads the FG_I8_GEMM_* settings that
 * override the i8 GEMM's launch shape again (they are read once otherwise). */
void fg_kint4_i8_gemm_env(void);

/* Row r of d_y [rows][n] = what fg_k_bf16_matvec (bf16, no row subset) or
 * fg_k_f32_matvec gives for row r of d_x [rows][k]; each weight piece loaded
 * once for up to 8 rows; the same kernel family as the one-row launch for
 * that k and d_w (d_x then 16-byte aligned on the 16-byte path). */
int fg_k_rows_matvec(struct fg_kctx *ctx, float *d_y, const void *d_w, int bf16, const float *d_x, int rows, int n,
		     int k, struct fg_err *err);
/* fg_k_embed / fg_k_embed_f32 for rows ids d_ids [rows] (device) into d_out
 * [rows][n]; f32: d_table is float, else bf16. */
int fg_k_embed_rows(struct fg_kctx *ctx, float *d_out, const void *d_table, int f32, const int32_t *d_ids, int rows,
		    int n, float scale, struct fg_err *err);
/* fg_k_ple / fg_k_ple_f32 for rows: d_out, d_proj [rows][layers * dim]. */
int fg_k_ple_rows(struct fg_kctx *ctx, float *d_out, const void *d_table, int f32, const int32_t *d_ids,
		  const float *d_proj, const float *d_norm_w, int rows, int layers, int dim, float tok_scale,
		  float proj_scale, float eps, struct fg_err *err);
/* fg_k_residual_norm and fg_k_rmsnorm_residual over rows: d_h, d_x, d_a [rows][n]. */
int fg_k_residual_norm_rows(struct fg_kctx *ctx, float *d_h, const float *d_x, const float *d_w, float scale,
			    float *d_a, const float *d_w2, int rows, int n, float eps, struct fg_err *err);
int fg_k_rmsnorm_residual_rows(struct fg_kctx *ctx, float *d_h, const float *d_x, const float *d_w, int rows, int n,
			       float eps, float scale, struct fg_err *err);
/* fg_k_qkv_post for rows of d_qkv [rows][(heads + 2 kv_heads) head_dim] at
 * positions pos0 + r, without storing: k and v are left normed (and k
 * rotated) in their rows, for fg_k_attn_prefill and fg_k_kv_store_rows. */
int fg_k_qkv_post_rows(struct fg_kctx *ctx, float *d_qkv, int rows, int heads, int kv_heads, int head_dim,
		       const float *d_qnorm, const float *d_knorm, const float *d_inv, int pos0, float eps,
		       struct fg_err *err);
/* The same with the first row's position read at run time from d_pos0 (a
 * CUDA graph replayed at any position). */
int fg_k_qkv_post_rows_at(struct fg_kctx *ctx, float *d_qkv, int rows, int heads, int kv_heads, int head_dim,
			  const float *d_qnorm, const float *d_knorm, const float *d_inv, const int32_t *d_pos0,
			  float eps, struct fg_err *err);
/* Attention of the chunk's queries (row r: heads q rows at d_q + r * q_row,
 * position pos0 + r) over a cache whose slots hold positions below pos0 (as
 * the decode step left it) and the chunk's own k, v rows (row r at d_knew +
 * r * kv_row, d_vnew + r * kv_row, [kv_heads][head_dim] each). Row r of
 * d_out [rows][heads * head_dim] has the bits fg_k_attn_decode gives at
 * position pos0 + r after the chunk's rows 0..r were stored into slots
 * (pos0 + i) % cap: the keys it sees are the slots' newest positions up to
 * its own, from the cache or from the chunk. */
int fg_k_attn_prefill(struct fg_kctx *ctx, float *d_out, const float *d_q, size_t q_row, const float *d_knew,
		      const float *d_vnew, size_t kv_row, const float *d_kcache, const float *d_vcache, int rows,
		      int heads, int kv_heads, int head_dim, int cap, int pos0, float scale, struct fg_err *err);
/* The same with pos0 read at run time from d_pos0: the grid covers the
 * whole cache (blocks past a row's keys return at once), so one launch, or
 * one captured graph, serves every position; the same bits per row. */
int fg_k_attn_prefill_at(struct fg_kctx *ctx, float *d_out, const float *d_q, size_t q_row, const float *d_knew,
			 const float *d_vnew, size_t kv_row, const float *d_kcache, const float *d_vcache, int rows,
			 int heads, int kv_heads, int head_dim, int cap, const int32_t *d_pos0, float scale,
			 struct fg_err *err);
/* Stores the chunk's k, v rows (as fg_k_attn_prefill reads them) into slots
 * (pos0 + r) % cap; where rows > cap only the newest row of a slot lands. */
int fg_k_kv_store_rows(struct fg_kctx *ctx, float *d_kcache, float *d_vcache, const float *d_knew,
		       const float *d_vnew, size_t kv_row, int rows, int kv_heads, int head_dim, int cap, int pos0,
		       struct fg_err *err);

/* ---- attention_bias and mixture of experts (kernels/moe.cu) ------------------*/

/* d_y[i] += d_b[i], i < n: a projection's bias (attention_bias) added after
 * its matvec, as the CPU engine adds it (the same fp32 sums). */
int fg_k_add_bias(struct fg_kctx *ctx, float *d_y, const float *d_b, int n, struct fg_err *err);

/* Mixture of experts (enable_moe_block), one token; a captured graph serves
 * every token since the routed expert ids stay in device memory. */
#define FG_MOE_MAX_K 32 /* the most experts per token (top_k_experts) the router kernel takes */

/* Gemma4TextRouter on router logits d_logits [E], engine/engine.c's route()
 * step for step on one thread: softmax in fp32, the K largest (on an exact
 * tie the lower expert index first), divided by their sum (summed best
 * first), each times d_escale[e] (per_expert_scale). Writes the K experts in
 * ascending index order to d_idx [K] (the order their outputs are summed in)
 * and their weights to d_w [K]. 1 <= K <= min(E, FG_MOE_MAX_K). */
int fg_k_moe_route(struct fg_kctx *ctx, int32_t *d_idx, float *d_w, const float *d_logits, const float *d_escale,
		   int E, int K, struct fg_err *err);
/* The experts' matvec: d_y[j][r] = W_e[r] . x_j for slots j < slots, r < n,
 * where e = d_idx[j] (device), W_e = rows [e n, e n + n) of d_w [E n][k]
 * (bf16 when bf16, else f32; any alignment), x_j = d_x + j * x_stride
 * (x_stride 0: one input for every slot). An id outside [0, E) gives NaN
 * rows. A warp per 4 rows, 16-byte loads where a row is 16-byte aligned
 * (the same sum where it is not), a fixed xor tree (fg_ref_moe_matvec gives
 * the same bits); k <= 12288. */
int fg_k_moe_matvec(struct fg_kctx *ctx, float *d_y, const void *d_w, int bf16, const int32_t *d_idx, int E,
		    const float *d_x, size_t x_stride, int slots, int n, int k, struct fg_err *err);
/* d_gu [slots][2 inter], gate | up per slot: gate = gelu_tanh(gate) * up in
 * place (fg_k_geglu's expression). */
int fg_k_moe_geglu(struct fg_kctx *ctx, float *d_gu, int slots, int inter, struct fg_err *err);
/* The block's end, one row of n: h = sum_j d_y[j] * d_wt[j] over slots in
 * order (from 0, each product and sum rounded on its own, as the CPU
 * engine), then d_o = rmsnorm(d_o) * d_w1 + rmsnorm(h) * d_w2
 * (post_feedforward_layernorm_1 on the dense MLP's output, _2 on the
 * experts'). One block, h kept in its shared memory (n floats). */
int fg_k_moe_combine(struct fg_kctx *ctx, float *d_o, const float *d_y, const float *d_wt, int slots,
		     const float *d_w1, const float *d_w2, int n, float eps, struct fg_err *err);

/* ---- the assistant drafter's head (engine/draft.h) ---------------------------
 *
 * use_ordered_embeddings: centroids(y) [n] scores clusters of `per` tokens
 * each; the top_k best clusters' tokens are the only candidates. */

#define FG_CENTROID_MAX_K 64    /* top_k of fg_k_centroid_select at most */
#define FG_CENTROID_MAX_N 65536 /* its clusters at most */
#define FG_GATHER_MAX_K (1 << 20)

/* The top_k (1..64) largest of d_z [n] (n <= 65536; the larger value first,
 * the lower index first among equals, -0 equal to +0; NaN never chosen before
 * a number), and for the i-th chosen cluster c its tokens d_order[c * per ..
 * c * per + per) written to d_ids[i * per ..] (top_k * per ids in all). One
 * block. */
int fg_k_centroid_select(struct fg_kctx *ctx, int32_t *d_ids, const float *d_z, int n, int top_k,
			 const int32_t *d_order, int per, struct fg_err *err);
/* d_y[j] = table row d_ids[j] . d_x for j < n_ids: table [*][k] (bf16 when
 * bf16, else f32), fp32 products summed in a fixed order (fg_ref_gather_matvec
 * gives the same bits); a negative id gives NaN. d_x 16-byte aligned; k from
 * 1 to FG_GATHER_MAX_K (a width that is not whole 16-byte pieces sums its
 * tail as fg_k_moe_matvec does); the table aligned to its element (read 16
 * bytes a load where it and its rows are 16-byte aligned). n_ids 0 launches
 * nothing. */
int fg_k_gather_matvec(struct fg_kctx *ctx, float *d_y, const void *d_table, int bf16, const int32_t *d_ids,
		       int n_ids, const float *d_x, int k, struct fg_err *err);

/* Benchmark helper: reads n bytes (a multiple of 16) at d_buf with 16-byte
 * loads over the whole GPU and writes a checksum to *d_sink: the device's read
 * bandwidth, the ceiling the matvec is measured against. */
int fg_k_read(struct fg_kctx *ctx, uint32_t *d_sink, const void *d_buf, size_t n, struct fg_err *err);
/* Benchmark helper: one launch of `blocks` blocks reading n bytes at d_buf as
 * a matvec reads its weights (loads before the programmatic-dependent-launch
 * wait, nothing computed): a chain of these over the step's matrices is the
 * read floor of one launch per matrix. */
int fg_k_read_floor(struct fg_kctx *ctx, uint32_t *d_sink, const void *d_buf, size_t n, int blocks,
		    struct fg_err *err);

#ifdef __cplusplus
}
#endif

#endif
