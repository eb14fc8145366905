/* ple.cu - the end of a Gemma 4 E-model decoder layer after its MLP (the
 * per-layer input, "PLE") in one launch of one thread-block cluster:
 *
 *   h  = h + rmsnorm(x) * w1            post_feedforward_layernorm (x: the MLP's output)
 *   u  = gelu_tanh(G . h) * pl          per_layer_input_gate [p][n], INT4
 *   y  = Pr . u                         per_layer_projection [n][p], INT4
 *   h  = (h + rmsnorm(y) * w2) * scale  post_per_layer_input_norm, layer_scalar
 *   a  = rmsnorm(h) * w3                the next sublayer's input norm
 *
 * Four launches of the plain step (a norm, two small matvecs and a norm)
 * each pay a kernel boundary and their own chain of round trips for almost
 * no bytes (0.66 MB at E4B's shapes). Here C blocks of one cluster (16 where
 * the GPU allows it, else 8) share the work and meet at cluster barriers,
 * exchanging the gate's outputs and the norms' partial sums through
 * distributed shared memory: block b owns rows [b pr, (b+1) pr) of G and
 * [b hr, (b+1) hr) of Pr (pr = ceil(p / C), hr = ceil(n / C)) and loads its
 * rows of both matrices into shared memory before waiting for the kernel
 * that writes x (programmatic dependent launch). Every block computes the
 * first norm over the whole row itself (the same bits in every block).
 *
 * Order of every sum (kernels/cpu_twin.c's fg_ref_ple_tail repeats it):
 * a matrix row belongs to one warp; lane l takes the packed words l, l + 32,
 * ...; per word d = sum of q_i x_i over its 8 elements in order (fma from
 * 0), then acc = fma(d, scale of the word's group, acc); the lanes' accs
 * summed by the xor tree (fg_warp_sum). A norm's sum of squares: thread t
 * of PLE_THREADS takes elements t, t + PLE_THREADS, ... (fma from 0), then
 * fg_block_sum; across blocks the partial sums are added in block order.
 * Only gelu's tanhf may differ from the host's by an ulp.
 *
 * Needs sm_90 (clusters); fg_kple_new says FG_EUNSUPPORTED elsewhere and
 * the engine keeps its four launches. The engine uses it only with
 * FG_PLE_FUSED=1: on the H200's E4B step it measured 2.5-3 % slower than
 * the four launches (ncu: 19 us a launch alone, most of it the blocks'
 * weight loads; docs/gpu.md, thirty-first session). FG_PLE_CLUSTER=8 keeps
 * clusters to 8 blocks (measurements). */
#include <cooperative_groups.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "kernels/kcommon.cuh"

namespace cg = cooperative_groups;

#define PLE_THREADS 512
#define PLE_WARPS (PLE_THREADS / 32)
#define PLE_SMEM_MAX (200 * 1024)
#define PLE_PER 8 /* elements of the row each thread holds: hidden <= PLE_THREADS * PLE_PER */

/* The two matrices, cut into C block slices of `slice` bytes each (16-byte
 * multiples): G's pr rows of n / 8 words, their pr * (n / group) fp32
 * scales, Pr's hr rows of p / 8 words, their hr * (p / group) scales, each
 * part padded to 16 bytes; rows past the matrix are zero. */
struct fg_kple {
	unsigned char *d;
	int n, p, group, cluster, pr, hr;
	size_t off_gs, off_pw, off_ps, slice;
};

static __host__ __device__ size_t up16(size_t v)
{
	return (v + 15) / 16 * 16;
}

/* Shared bytes of a launch: the slice, h after the first norm [n], all of
 * u [p], this block's u [pr], y [hr], the partial sums [2] and the block
 * sum's 33 floats. */
static size_t ple_smem(const struct fg_kple *w)
{
	return w->slice + up16(sizeof(float) * (size_t)w->n) + up16(sizeof(float) * (size_t)w->p) +
	       up16(sizeof(float) * (size_t)w->pr) + up16(sizeof(float) * (size_t)w->hr) + up16(sizeof(float) * 4) +
	       up16(sizeof(float) * 33);
}

/* One row's dot product over k elements (k / 8 packed words at wr, scales
 * at sc, the vector v in shared memory), summed over the warp: the order
 * of the file's comment. */
__device__ __forceinline__ float ple_row(const uint32_t *wr, const float *sc, const float *v, int k, int group)
{
	int lane = threadIdx.x & 31;
	float acc = 0.0f;

	for (int j = lane; j < k / 8; j += 32) {
		uint32_t q = wr[j];
		float4 a = *(const float4 *)(v + 8 * j), b = *(const float4 *)(v + 8 * j + 4);
		float d = 0.0f;

		d = __fmaf_rn((float)((int)(q & 15u) - 8), a.x, d);
		d = __fmaf_rn((float)((int)((q >> 4) & 15u) - 8), a.y, d);
		d = __fmaf_rn((float)((int)((q >> 8) & 15u) - 8), a.z, d);
		d = __fmaf_rn((float)((int)((q >> 12) & 15u) - 8), a.w, d);
		d = __fmaf_rn((float)((int)((q >> 16) & 15u) - 8), b.x, d);
		d = __fmaf_rn((float)((int)((q >> 20) & 15u) - 8), b.y, d);
		d = __fmaf_rn((float)((int)((q >> 24) & 15u) - 8), b.z, d);
		d = __fmaf_rn((float)((int)(q >> 28) - 8), b.w, d);
		acc = __fmaf_rn(d, sc[8 * j / group], acc);
	}
	return fg_warp_sum(acc);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 /* clusters */
/* The partial sums slot k of the C blocks in block order (lane c of each
 * warp reads block c's, then every lane adds them in order): the same
 * order as one thread adding them in a loop, one round trip instead of C. */
__device__ __forceinline__ float ple_parts(cg::cluster_group &cl, float *spart, int k, int C)
{
	int lane = threadIdx.x & 31;
	float v = lane < C ? cl.map_shared_rank(spart, lane)[k] : 0.0f, tot = 0.0f;

	for (int c = 0; c < C; c++)
		tot += __shfl_sync(0xffffffffu, v, c);
	return tot;
}
#endif

__global__ void __launch_bounds__(PLE_THREADS) ple_tail(float *h, float *a, const float *x, const unsigned char *wts,
						       const float *pl, const float *__restrict__ w1,
						       const float *__restrict__ w2, float scale,
						       const float *__restrict__ w3, struct fg_kple w, size_t pls, float eps)
{
	fg_pdl_trigger();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	extern __shared__ uint4 ple_sm[];
	cg::cluster_group cl = cg::this_cluster();
	const int C = (int)cl.num_blocks(), b = (int)cl.block_rank(), t = threadIdx.x, warp = t >> 5;
	const int n = w.n, p = w.p, pr = w.pr, hr = w.hr;
	const size_t row = blockIdx.x / (unsigned)C; /* a prompt chunk's row: one cluster each */

	h += row * n, a += row * n, x += row * n, pl += row * pls;
	unsigned char *sm = (unsigned char *)ple_sm;
	const uint32_t *gw = (const uint32_t *)sm, *pw = (const uint32_t *)(sm + w.off_pw);
	const float *gs = (const float *)(sm + w.off_gs), *ps = (const float *)(sm + w.off_ps);
	float *sh = (float *)(sm + w.slice);
	float *sua = sh + up16(sizeof(float) * (size_t)n) / 4;
	float *su = sua + up16(sizeof(float) * (size_t)p) / 4;
	float *sy = su + up16(sizeof(float) * (size_t)pr) / 4;
	float *spart = sy + up16(sizeof(float) * (size_t)hr) / 4;
	float *sred = spart + 4;
	const int r0 = b * hr, mine = t < hr && r0 + t < n; /* thread t owns row r0 + t of h and a */
	float xv[PLE_PER], hv[PLE_PER], w1v[PLE_PER], w2v = 0.0f, w3v = 0.0f, plv = 0.0f;

	/* this block's weights and the norm weights: no kernel writes them, so
	 * before the wait */
	{
		const uint4 *src = (const uint4 *)(wts + (size_t)b * w.slice);
		const size_t nv = w.slice / 16;

		for (size_t i0 = t; i0 < nv; i0 += 8 * PLE_THREADS) { /* 8 loads in flight a thread */
			uint4 r[8];

#pragma unroll
			for (int u = 0; u < 8; u++)
				if (i0 + u * PLE_THREADS < nv)
					r[u] = src[i0 + u * PLE_THREADS];
#pragma unroll
			for (int u = 0; u < 8; u++)
				if (i0 + u * PLE_THREADS < nv)
					ple_sm[i0 + u * PLE_THREADS] = r[u];
		}
	}
#pragma unroll
	for (int u = 0; u < PLE_PER; u++) {
		int i = t + u * PLE_THREADS;

		w1v[u] = i < n ? w1[i] : 0.0f;
	}
	if (mine)
		w2v = w2[r0 + t], w3v = w3[r0 + t];
	fg_pdl_wait();
	/* 1: h + rmsnorm(x) * w1, the whole row in every block, every load at once */
#pragma unroll
	for (int u = 0; u < PLE_PER; u++) {
		int i = t + u * PLE_THREADS;

		xv[u] = i < n ? x[i] : 0.0f;
		hv[u] = i < n ? h[i] : 0.0f;
	}
	if (t < pr && b * pr + t < p)
		plv = pl[b * pr + t];
	float ss = 0.0f;

#pragma unroll
	for (int u = 0; u < PLE_PER; u++)
		if (t + u * PLE_THREADS < n)
			ss = __fmaf_rn(xv[u], xv[u], ss);
	ss = fg_block_sum(ss, sred);
	float s1 = 1.0f / sqrtf(ss / (float)n + eps);

#pragma unroll
	for (int u = 0; u < PLE_PER; u++) {
		int i = t + u * PLE_THREADS;

		if (i < n)
			sh[i] = __fmaf_rn(__fmul_rn(xv[u], s1), w1v[u], hv[u]);
	}
	if (t < pr)
		su[t] = plv; /* the per-layer inputs of this block's gate rows, for now */
	__syncthreads();
	/* 2: this block's gate rows, gelu times the per-layer input */
	for (int r = warp; r < pr; r += PLE_WARPS) {
		float g = ple_row(gw + (size_t)r * (n / 8), gs + (size_t)r * (n / w.group), sh, n, w.group);

		if ((t & 31) == 0)
			su[r] = b * pr + r < p ? fg_gelu_tanh(g) * su[r] : 0.0f;
	}
	cl.sync();
	/* 3: every block's u, then this block's projection rows */
	if (t < p)
		sua[t] = cl.map_shared_rank(su, t / pr)[t % pr];
	__syncthreads();
	for (int r = warp; r < hr; r += PLE_WARPS) {
		float y = ple_row(pw + (size_t)r * (p / 8), ps + (size_t)r * (p / w.group), sua, p, w.group);

		if ((t & 31) == 0)
			sy[r] = y;
	}
	__syncthreads();
	float yv = mine ? sy[t] : 0.0f;
	float sq = fg_block_sum(__fmul_rn(yv, yv), sred);

	if (t == 0)
		spart[0] = sq;
	cl.sync();
	/* 4: h = (h + rmsnorm(y) * w2) * scale on this block's rows */
	float s2 = 1.0f / sqrtf(ple_parts(cl, spart, 0, C) / (float)n + eps);
	float v = __fmul_rn(__fmaf_rn(__fmul_rn(yv, s2), w2v, mine ? sh[r0 + t] : 0.0f), scale);

	if (mine)
		h[r0 + t] = v;
	float sq3 = fg_block_sum(mine ? __fmul_rn(v, v) : 0.0f, sred);

	if (t == 0)
		spart[1] = sq3;
	cl.sync();
	/* 5: a = rmsnorm(h) * w3 on this block's rows */
	float s3 = 1.0f / sqrtf(ple_parts(cl, spart, 1, C) / (float)n + eps);

	if (mine)
		a[r0 + t] = __fmul_rn(__fmul_rn(v, s3), w3v);
	cl.sync(); /* no block leaves while another may read its shared memory */
#else
	(void)h, (void)a, (void)x, (void)wts, (void)pl, (void)w1, (void)w2, (void)scale, (void)w3, (void)w, (void)pls;
	(void)eps;
	__trap();
#endif
}

/* The plan of a slice for C blocks. */
static void ple_plan(struct fg_kple *w, int n, int p, int group, int C)
{
	w->n = n, w->p = p, w->group = group, w->cluster = C;
	w->pr = (p + C - 1) / C;
	w->hr = (n + C - 1) / C;
	w->off_gs = up16((size_t)w->pr * (size_t)n / 2);
	w->off_pw = w->off_gs + up16(sizeof(float) * (size_t)w->pr * (size_t)(n / group));
	w->off_ps = w->off_pw + up16((size_t)w->hr * (size_t)p / 2);
	w->slice = w->off_ps + up16(sizeof(float) * (size_t)w->hr * (size_t)(p / group));
}

/* The largest cluster (16, else 8; FG_PLE_CLUSTER=8: never 16, for
 * measurements) whose plan for n, p, group fits this GPU: *w planned for
 * it and the kernel's shared memory set; 0 when the GPU has no clusters or
 * none fits. */
static int ple_cluster(struct fg_kctx *ctx, struct fg_kple *w, int n, int p, int group)
{
	static const int sizes[] = {16, 8};
	const char *e = getenv("FG_PLE_CLUSTER");

	if (!ctx->sm90) /* no clusters, or kernels built without them */
		return 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t smem;

		if (e && !strcmp(e, "8") && sizes[i] == 16)
			continue;
		ple_plan(w, n, p, group, sizes[i]);
		smem = ple_smem(w);
		if (smem > PLE_SMEM_MAX || w->hr > PLE_THREADS ||
		    cudaFuncSetAttribute(ple_tail, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess) {
			cudaGetLastError();
			continue;
		}
		if (fg_kclusters((const void *)ple_tail, dim3(sizes[i]), dim3(PLE_THREADS), smem, dim3(sizes[i], 1, 1)) > 0)
			return sizes[i];
	}
	return 0;
}


/* Rows [r0, r0 + rows) of a standard-format matrix (k columns; its words
 * and bf16 scales as bytes, any alignment) into a slice's words and fp32
 * scales; rows past nrows stay zero. */
static void ple_put(unsigned char *wd, float *sd, const void *packed, const void *scale, int nrows, int k, int group,
		    int r0, int rows)
{
	const unsigned char *pb = (const unsigned char *)packed, *sb = (const unsigned char *)scale;
	size_t ng = (size_t)(k / group);

	for (int r = 0; r < rows && r0 + r < nrows; r++) {
		memcpy(wd + (size_t)r * (k / 2), pb + (size_t)(r0 + r) * (k / 2), (size_t)k / 2);
		for (size_t g = 0; g < ng; g++)
			sd[(size_t)r * ng + g] = fg_bf16_to_f32(fg_le16(sb + 2 * ((size_t)(r0 + r) * ng + g)));
	}
}

extern "C" int fg_kple_new(struct fg_kctx *ctx, struct fg_kple **out, const void *g_packed, const void *g_scale,
			   const void *p_packed, const void *p_scale, int n, int p, int group, struct fg_err *err)
{
	struct fg_kple plan, *w;
	unsigned char *hb;
	int C, rc;

	*out = NULL;
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n < 8 || p < 8 || n % 8 || p % 8 || group < 8 || group % 8 || n % group || p % group ||
	    p > PLE_THREADS || n > PLE_THREADS * PLE_PER)
		return fg_err_set(err, FG_EUNSUPPORTED,
				  "fused PLE tail: hidden %d, per-layer dim %d, group %d (multiples of the group, "
				  "itself of 8; per-layer dim at most %d, hidden at most %d)",
				  n, p, group, PLE_THREADS, PLE_THREADS * PLE_PER);
	if (!(C = ple_cluster(ctx, &plan, n, p, group)))
		return fg_err_set(err, FG_EUNSUPPORTED, "fused PLE tail: no thread-block cluster of 8 or 16 on %s%s",
				  ctx->name, ctx->prop.major >= 9 && !ctx->sm90 ? " with kernels built from code below sm_90" : "");
	if (!(w = (struct fg_kple *)malloc(sizeof(*w))) || !(hb = (unsigned char *)calloc(C, plan.slice))) {
		free(w);
		return fg_err_set(err, FG_ENOMEM, "out of memory staging the fused PLE tail");
	}
	*w = plan;
	for (int b = 0; b < C; b++) {
		unsigned char *s = hb + (size_t)b * w->slice;

		ple_put(s, (float *)(s + w->off_gs), g_packed, g_scale, p, n, group, b * w->pr, w->pr);
		ple_put(s + w->off_pw, (float *)(s + w->off_ps), p_packed, p_scale, n, p, group, b * w->hr, w->hr);
	}
	w->d = NULL;
	rc = fg_kmem_alloc(ctx, (void **)&w->d, (size_t)C * w->slice, err);
	if (!rc)
		rc = fg_kmem_upload(ctx, w->d, hb, (size_t)C * w->slice, err);
	free(hb);
	if (rc) {
		fg_kple_free(ctx, w);
		return rc;
	}
	*out = w;
	return 0;
}

extern "C" void fg_kple_free(struct fg_kctx *ctx, struct fg_kple *w)
{
	if (!w)
		return;
	fg_kmem_free(ctx, w->d);
	free(w);
}

extern "C" int fg_kple_cluster(const struct fg_kple *w)
{
	return w ? w->cluster : 0;
}

extern "C" int fg_k_ple_tail_rows(struct fg_kctx *ctx, float *d_h, float *d_a, const float *d_x,
				  const struct fg_kple *w, const float *d_pl, size_t pl_stride, int rows,
				  const float *d_w1, const float *d_w2, float scale, const float *d_w3, float eps,
				  struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (!w || !d_h || !d_a || !d_x || !d_pl || !d_w1 || !d_w2 || !d_w3 || rows < 1 ||
	    (rows > 1 && pl_stride < (size_t)w->p))
		return fg_err_set(err, FG_EINVAL, "fused PLE tail: %d rows, a buffer or weight missing or a short stride",
				  rows);
	fg_launch_pdl_cluster(ctx, ple_tail, dim3((unsigned)w->cluster * (unsigned)rows), dim3(PLE_THREADS), ple_smem(w),
			      dim3((unsigned)w->cluster, 1, 1), d_h, d_a, d_x, (const unsigned char *)w->d, d_pl, d_w1, d_w2,
			      scale, d_w3, *w, pl_stride, eps);
	return fg_launched("fused PLE tail", err);
}

extern "C" int fg_k_ple_tail(struct fg_kctx *ctx, float *d_h, float *d_a, const float *d_x, const struct fg_kple *w,
			     const float *d_pl, const float *d_w1, const float *d_w2, float scale, const float *d_w3,
			     float eps, struct fg_err *err)
{
	return fg_k_ple_tail_rows(ctx, d_h, d_a, d_x, w, d_pl, 0, 1, d_w1, d_w2, scale, d_w3, eps, err);
}

FG_KTRACE_TU(ple)
