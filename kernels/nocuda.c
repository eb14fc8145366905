/* nocuda.c - fg_kernels.h for a build without nvcc: no context can be made,
 * so every other call is unreachable but still answers FG_EUNSUPPORTED. */
#include <stddef.h>

#include "kernels/fg_kernels.h"

#define NO_CUDA(err) fg_err_set(err, FG_EUNSUPPORTED, "this fgpack was built without CUDA (no nvcc at build time)")

int fg_cuda_built(void)
{
	return 0;
}

int fg_kctx_new(struct fg_kctx **out, struct fg_err *err)
{
	*out = NULL;
	return NO_CUDA(err);
}

void fg_kctx_free(struct fg_kctx *ctx)
{
	(void)ctx;
}

const char *fg_kctx_device_name(const struct fg_kctx *ctx)
{
	(void)ctx;
	return "none";
}

int fg_kctx_sm_count(const struct fg_kctx *ctx)
{
	(void)ctx;
	return 0;
}

int fg_kctx_code_arch(const struct fg_kctx *ctx)
{
	(void)ctx;
	return 0;
}

int fg_kctx_device_info(const struct fg_kctx *ctx, struct fg_kdevice *out, struct fg_err *err)
{
	(void)ctx, (void)out;
	return NO_CUDA(err);
}

int fg_kctx_set_pdl(struct fg_kctx *ctx, int on)
{
	(void)ctx, (void)on;
	return 0;
}

int fg_kctx_set_prefetch(struct fg_kctx *ctx, int level)
{
	(void)ctx, (void)level;
	return 0;
}

int fg_kctx_set_attn_fused(struct fg_kctx *ctx, int on)
{
	(void)ctx, (void)on;
	return 0;
}

int fg_kctx_set_attn_cluster(struct fg_kctx *ctx, int on)
{
	(void)ctx, (void)on;
	return 0;
}

int fg_kctx_set_attn_short(struct fg_kctx *ctx, int on)
{
	(void)ctx, (void)on;
	return 0;
}

int fg_kctx_set_attn_grp(struct fg_kctx *ctx, int on)
{
	(void)ctx, (void)on;
	return 0;
}

int fg_kctx_attn_short_keys(const struct fg_kctx *ctx)
{
	(void)ctx;
	return 0;
}

int fg_kctx_prefetch_level(const struct fg_kctx *ctx)
{
	(void)ctx;
	return 0;
}

void fg_kctx_prefetch(struct fg_kctx *ctx, const void *d_p, size_t bytes)
{
	(void)ctx, (void)d_p, (void)bytes;
}

void fg_kint4_prefetch(struct fg_kctx *ctx, const struct fg_kint4 *w, double from, double to)
{
	(void)ctx, (void)w, (void)from, (void)to;
}

int fg_kctx_set_int4_kind(struct fg_kctx *ctx, int kind)
{
	(void)ctx, (void)kind;
	return FG_INT4_I8;
}

int fg_kctx_int4_kind(const struct fg_kctx *ctx)
{
	(void)ctx;
	return FG_INT4_I8;
}

int fg_kint4_i8_plan(const struct fg_kint4 *w, int m, int *slice, int *warps)
{
	(void)w, (void)m;
	*slice = *warps = 0;
	return 0;
}

size_t fg_kint4_bytes(const struct fg_kint4 *w)
{
	(void)w;
	return 0;
}

int fg_kctx_sync(struct fg_kctx *ctx, struct fg_err *err)
{
	(void)ctx;
	return NO_CUDA(err);
}

int fg_kmem_alloc(struct fg_kctx *ctx, void **d_out, size_t n, struct fg_err *err)
{
	(void)ctx;
	(void)n;
	*d_out = NULL;
	return NO_CUDA(err);
}

void fg_kmem_free(struct fg_kctx *ctx, void *d)
{
	(void)ctx;
	(void)d;
}

int fg_kmem_upload(struct fg_kctx *ctx, void *d_dst, const void *src, size_t n, struct fg_err *err)
{
	(void)ctx, (void)d_dst, (void)src, (void)n;
	return NO_CUDA(err);
}

int fg_kmem_download(struct fg_kctx *ctx, void *dst, const void *d_src, size_t n, struct fg_err *err)
{
	(void)ctx, (void)dst, (void)d_src, (void)n;
	return NO_CUDA(err);
}

int fg_kmem_fill(struct fg_kctx *ctx, void *d_dst, int byte, size_t n, struct fg_err *err)
{
	(void)ctx, (void)d_dst, (void)byte, (void)n;
	return NO_CUDA(err);
}

int fg_kmem_copy2d(struct fg_kctx *ctx, void *d_dst, size_t dpitch, const void *d_src, size_t spitch, size_t width,
		   size_t height, struct fg_err *err)
{
	(void)ctx, (void)d_dst, (void)dpitch, (void)d_src, (void)spitch, (void)width, (void)height;
	return NO_CUDA(err);
}

int fg_kgraph_begin(struct fg_kctx *ctx, struct fg_err *err)
{
	(void)ctx;
	return NO_CUDA(err);
}

int fg_kgraph_end(struct fg_kctx *ctx, struct fg_kgraph **out, struct fg_err *err)
{
	(void)ctx;
	*out = NULL;
	return NO_CUDA(err);
}

int fg_kgraph_launch(struct fg_kctx *ctx, struct fg_kgraph *g, struct fg_err *err)
{
	(void)ctx, (void)g;
	return NO_CUDA(err);
}

void fg_kgraph_free(struct fg_kgraph *g)
{
	(void)g;
}

int fg_ktimer_start(struct fg_kctx *ctx, struct fg_err *err)
{
	(void)ctx;
	return NO_CUDA(err);
}

int fg_ktimer_stop(struct fg_kctx *ctx, double *out_ms, struct fg_err *err)
{
	(void)ctx;
	*out_ms = 0;
	return NO_CUDA(err);
}

int fg_kint4_new(struct fg_kctx *ctx, struct fg_kint4 **out, const int32_t *packed, const uint16_t *scale_bf16,
		 int n, int k, int group, int splits, struct fg_err *err)
{
	(void)ctx, (void)packed, (void)scale_bf16, (void)n, (void)k, (void)group, (void)splits;
	*out = NULL;
	return NO_CUDA(err);
}

void fg_kint4_free(struct fg_kctx *ctx, struct fg_kint4 *w)
{
	(void)ctx, (void)w;
}

int fg_k_int4_matvec(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x, int m,
		     struct fg_err *err)
{
	(void)ctx, (void)d_y, (void)w, (void)d_x, (void)m;
	return NO_CUDA(err);
}

int fg_k_int4_red(const struct fg_kint4 *w)
{
	(void)w;
	return 0;
}

int fg_k_int4_matvec_red(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x,
			 const float *d_up, float *d_clr, int nclr, struct fg_err *err)
{
	(void)ctx, (void)d_y, (void)w, (void)d_x, (void)d_up, (void)d_clr, (void)nclr;
	return NO_CUDA(err);
}

int fg_k_bf16_matvec(struct fg_kctx *ctx, float *d_y, const uint16_t *d_w, const float *d_x, const int32_t *d_rows,
		     int n, int k, struct fg_err *err)
{
	(void)ctx, (void)d_y, (void)d_w, (void)d_x, (void)d_rows, (void)n, (void)k;
	return NO_CUDA(err);
}

int fg_k_rmsnorm(struct fg_kctx *ctx, float *d_y, const float *d_x, const float *d_w, int rows, int n, float eps,
		 struct fg_err *err)
{
	(void)ctx, (void)d_y, (void)d_x, (void)d_w, (void)rows, (void)n, (void)eps;
	return NO_CUDA(err);
}

int fg_k_rmsnorm_residual(struct fg_kctx *ctx, float *d_h, const float *d_x, const float *d_w, int n, float eps,
			  float scale, struct fg_err *err)
{
	(void)ctx, (void)d_h, (void)d_x, (void)d_w, (void)n, (void)eps, (void)scale;
	return NO_CUDA(err);
}

int fg_k_rope(struct fg_kctx *ctx, float *d_x, int heads, int head_dim, int rot_pairs, float theta,
	      const int32_t *d_pos, struct fg_err *err)
{
	(void)ctx, (void)d_x, (void)heads, (void)head_dim, (void)rot_pairs, (void)theta, (void)d_pos;
	return NO_CUDA(err);
}

int fg_k_geglu(struct fg_kctx *ctx, float *d_out, const float *d_gate, const float *d_up, int n, struct fg_err *err)
{
	(void)ctx, (void)d_out, (void)d_gate, (void)d_up, (void)n;
	return NO_CUDA(err);
}

int fg_k_embed(struct fg_kctx *ctx, float *d_out, const uint16_t *d_table, const int32_t *d_id, int n, float scale,
	       struct fg_err *err)
{
	(void)ctx, (void)d_out, (void)d_table, (void)d_id, (void)n, (void)scale;
	return NO_CUDA(err);
}

int fg_k_ple(struct fg_kctx *ctx, float *d_out, const uint16_t *d_table, const int32_t *d_id, const float *d_proj,
	     const float *d_norm_w, int layers, int dim, float tok_scale, float proj_scale, float eps,
	     struct fg_err *err)
{
	(void)ctx, (void)d_out, (void)d_table, (void)d_id, (void)d_proj, (void)d_norm_w, (void)layers, (void)dim;
	(void)tok_scale, (void)proj_scale, (void)eps;
	return NO_CUDA(err);
}

int fg_k_embed_f32(struct fg_kctx *ctx, float *d_out, const float *d_table, const int32_t *d_id, int n, float scale,
		   struct fg_err *err)
{
	(void)ctx, (void)d_out, (void)d_table, (void)d_id, (void)n, (void)scale;
	return NO_CUDA(err);
}

int fg_k_ple_f32(struct fg_kctx *ctx, float *d_out, const float *d_table, const int32_t *d_id, const float *d_proj,
		 const float *d_norm_w, int layers, int dim, float tok_scale, float proj_scale, float eps,
		 struct fg_err *err)
{
	(void)ctx, (void)d_out, (void)d_table, (void)d_id, (void)d_proj, (void)d_norm_w, (void)layers, (void)dim;
	(void)tok_scale, (void)proj_scale, (void)eps;
	return NO_CUDA(err);
}

int fg_k_kv_store(struct fg_kctx *ctx, float *d_kcache, float *d_vcache, const float *d_k, const float *d_v,
		  int kv_heads, int head_dim, int cap, const int32_t *d_pos, struct fg_err *err)
{
	(void)ctx, (void)d_kcache, (void)d_vcache, (void)d_k, (void)d_v, (void)kv_heads, (void)head_dim, (void)cap;
	(void)d_pos;
	return NO_CUDA(err);
}

int fg_k_attn_decode(struct fg_kctx *ctx, float *d_out, const float *d_q, const float *d_kcache,
		     const float *d_vcache, int heads, int kv_heads, int head_dim, int cap, const int32_t *d_pos,
		     float scale, struct fg_err *err)
{
	(void)ctx, (void)d_out, (void)d_q, (void)d_kcache, (void)d_vcache, (void)heads, (void)kv_heads;
	(void)head_dim, (void)cap, (void)d_pos, (void)scale;
	return NO_CUDA(err);
}

int fg_kmem_alloc_mapped(struct fg_kctx *ctx, void **host, size_t n, struct fg_err *err)
{
	(void)ctx, (void)n;
	*host = NULL;
	return NO_CUDA(err);
}

void fg_kmem_free_mapped(void *host)
{
	(void)host;
}

int fg_kctx_mark(struct fg_kctx *ctx, int i, struct fg_err *err)
{
	(void)ctx, (void)i;
	return NO_CUDA(err);
}

int fg_kctx_wait(struct fg_kctx *ctx, int i, struct fg_err *err)
{
	(void)ctx, (void)i;
	return NO_CUDA(err);
}

void fg_kctx_chain(struct fg_kctx *ctx, int32_t *d_idpos, int32_t *d_ring, int mask, const int32_t *mm, int n_mm,
		   int32_t pad)
{
	(void)ctx, (void)d_idpos, (void)d_ring, (void)mask, (void)mm, (void)n_mm, (void)pad;
}

int fg_k_softcap_argmax(struct fg_kctx *ctx, int32_t *d_best, float *d_z, const int32_t *d_ids, int n, float cap,
			struct fg_err *err)
{
	(void)ctx, (void)d_best, (void)d_z, (void)d_ids, (void)n, (void)cap;
	return NO_CUDA(err);
}

int fg_k_row_logprobs(struct fg_kctx *ctx, struct fg_klp *d_out, const float *d_z, size_t stride, int rows,
		      const int32_t *d_ids, int n, const int32_t *d_want, int k, struct fg_err *err)
{
	(void)ctx, (void)d_out, (void)d_z, (void)stride, (void)rows, (void)d_ids, (void)n, (void)d_want, (void)k;
	return NO_CUDA(err);
}

int fg_k_read(struct fg_kctx *ctx, uint32_t *d_sink, const void *d_buf, size_t n, struct fg_err *err)
{
	(void)ctx, (void)d_sink, (void)d_buf, (void)n;
	return NO_CUDA(err);
}

int fg_k_read_floor(struct fg_kctx *ctx, uint32_t *d_sink, const void *d_buf, size_t n, int blocks,
		    struct fg_err *err)
{
	(void)ctx, (void)d_sink, (void)d_buf, (void)n, (void)blocks;
	return NO_CUDA(err);
}

int fg_k_f32_matvec(struct fg_kctx *ctx, float *d_y, const float *d_w, const float *d_x, int n, int k,
		    struct fg_err *err)
{
	(void)ctx, (void)d_y, (void)d_w, (void)d_x, (void)n, (void)k;
	return NO_CUDA(err);
}

int fg_k_rope_inv(struct fg_kctx *ctx, float *d_x, int heads, int head_dim, const float *d_inv, const int32_t *d_pos,
		  struct fg_err *err)
{
	(void)ctx, (void)d_x, (void)heads, (void)head_dim, (void)d_inv, (void)d_pos;
	return NO_CUDA(err);
}

int fg_k_rope_table(struct fg_kctx *ctx, float *d_turns, const float *d_inv, int half, int rows, struct fg_err *err)
{
	(void)ctx, (void)d_turns, (void)d_inv, (void)half, (void)rows;
	return NO_CUDA(err);
}

int fg_k_int4_matvec_geglu(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_gate,
			   const float *d_up, struct fg_err *err)
{
	(void)ctx, (void)d_y, (void)w, (void)d_gate, (void)d_up;
	return NO_CUDA(err);
}

int fg_kple_new(struct fg_kctx *ctx, struct fg_kple **out, const void *g_packed, const void *g_scale,
		const void *p_packed, const void *p_scale, int n, int p, int group, struct fg_err *err)
{
	(void)ctx, (void)g_packed, (void)g_scale, (void)p_packed, (void)p_scale, (void)n, (void)p, (void)group;
	*out = NULL;
	return NO_CUDA(err);
}

void fg_kple_free(struct fg_kctx *ctx, struct fg_kple *w)
{
	(void)ctx, (void)w;
}

int fg_kple_cluster(const struct fg_kple *w)
{
	(void)w;
	return 0;
}

int fg_k_ple_tail_rows(struct fg_kctx *ctx, float *d_h, float *d_a, const float *d_x, const struct fg_kple *w,
		       const float *d_pl, size_t pl_stride, int rows, const float *d_w1, const float *d_w2, float scale,
		       const float *d_w3, float eps, struct fg_err *err)
{
	(void)ctx, (void)d_h, (void)d_a, (void)d_x, (void)w, (void)d_pl, (void)pl_stride, (void)rows, (void)d_w1;
	(void)d_w2, (void)scale, (void)d_w3, (void)eps;
	return NO_CUDA(err);
}

int fg_k_ple_tail(struct fg_kctx *ctx, float *d_h, float *d_a, const float *d_x, const struct fg_kple *w,
		  const float *d_pl, const float *d_w1, const float *d_w2, float scale, const float *d_w3, float eps,
		  struct fg_err *err)
{
	(void)ctx, (void)d_h, (void)d_a, (void)d_x, (void)w, (void)d_pl, (void)d_w1, (void)d_w2, (void)scale;
	(void)d_w3, (void)eps;
	return NO_CUDA(err);
}

int fg_k_residual_norm(struct fg_kctx *ctx, float *d_h, const float *d_x, const float *d_w, float scale, float *d_a,
		       const float *d_w2, int n, float eps, struct fg_err *err)
{
	(void)ctx, (void)d_h, (void)d_x, (void)d_w, (void)scale, (void)d_a, (void)d_w2, (void)n, (void)eps;
	return NO_CUDA(err);
}

int fg_k_qkv_post(struct fg_kctx *ctx, float *d_qkv, int heads, int kv_heads, int head_dim, const float *d_qnorm,
		  const float *d_knorm, const float *d_inv, const int32_t *d_pos, float *d_kcache, float *d_vcache,
		  int cap, float eps, struct fg_err *err)
{
	(void)ctx, (void)d_qkv, (void)heads, (void)kv_heads, (void)head_dim, (void)d_qnorm, (void)d_knorm;
	(void)d_inv, (void)d_pos, (void)d_kcache, (void)d_vcache, (void)cap, (void)eps;
	return NO_CUDA(err);
}

int fg_k_attn_decode_post(struct fg_kctx *ctx, float *d_out, float *d_qkv, int heads, int kv_heads, int head_dim,
			  const float *d_qnorm, const float *d_knorm, const float *d_inv, const float *d_turns,
			  int turn_rows, const int32_t *d_pos, float *d_kcache, float *d_vcache, int cap, int own,
			  float eps, float scale, struct fg_err *err)
{
	(void)ctx, (void)d_out, (void)d_qkv, (void)heads, (void)kv_heads, (void)head_dim, (void)d_qnorm;
	(void)d_knorm, (void)d_inv, (void)d_turns, (void)turn_rows, (void)d_pos, (void)d_kcache, (void)d_vcache;
	(void)cap, (void)own, (void)eps, (void)scale;
	return NO_CUDA(err);
}

int fg_k_add_bias(struct fg_kctx *ctx, float *d_y, const float *d_b, int n, struct fg_err *err)
{
	(void)ctx, (void)d_y, (void)d_b, (void)n;
	return NO_CUDA(err);
}

int fg_k_moe_route(struct fg_kctx *ctx, int32_t *d_idx, float *d_w, const float *d_logits, const float *d_escale,
		   int E, int K, struct fg_err *err)
{
	(void)ctx, (void)d_idx, (void)d_w, (void)d_logits, (void)d_escale, (void)E, (void)K;
	return NO_CUDA(err);
}

int fg_k_moe_matvec(struct fg_kctx *ctx, float *d_y, const void *d_w, int bf16, const int32_t *d_idx, int E,
		    const float *d_x, size_t x_stride, int slots, int n, int k, struct fg_err *err)
{
	(void)ctx, (void)d_y, (void)d_w, (void)bf16, (void)d_idx, (void)E, (void)d_x, (void)x_stride, (void)slots;
	(void)n, (void)k;
	return NO_CUDA(err);
}

int fg_k_moe_geglu(struct fg_kctx *ctx, float *d_gu, int slots, int inter, struct fg_err *err)
{
	(void)ctx, (void)d_gu, (void)slots, (void)inter;
	return NO_CUDA(err);
}

int fg_k_moe_combine(struct fg_kctx *ctx, float *d_o, const float *d_y, const float *d_wt, int slots,
		     const float *d_w1, const float *d_w2, int n, float eps, struct fg_err *err)
{
	(void)ctx, (void)d_o, (void)d_y, (void)d_wt, (void)slots, (void)d_w1, (void)d_w2, (void)n, (void)eps;
	return NO_CUDA(err);
}

int fg_k_int4_gemm(struct fg_kctx *ctx, float *d_y, const struct fg_kint4 *w, const float *d_x, const float *d_x2,
		   int rows, struct fg_err *err)
{
	(void)ctx, (void)d_y, (void)w, (void)d_x, (void)d_x2, (void)rows;
	return NO_CUDA(err);
}

void fg_kint4_i8_gemm_env(void)
{
}

int fg_k_embed_rows(struct fg_kctx *ctx, float *d_out, const void *d_table, int f32, const int32_t *d_ids, int rows,
		    int n, float scale, struct fg_err *err)
{
	(void)ctx, (void)d_out, (void)d_table, (void)f32, (void)d_ids, (void)rows, (void)n, (void)scale;
	return NO_CUDA(err);
}

int fg_k_ple_rows(struct fg_kctx *ctx, float *d_out, const void *d_table, int f32, const int32_t *d_ids,
		  const float *d_proj, const float *d_norm_w, int rows, int layers, int dim, float tok_scale,
		  float proj_scale, float eps, struct fg_err *err)
{
	(void)ctx, (void)d_out, (void)d_table, (void)f32, (void)d_ids, (void)d_proj, (void)d_norm_w, (void)rows;
	(void)layers, (void)dim, (void)tok_scale, (void)proj_scale, (void)eps;
	return NO_CUDA(err);
}

int fg_k_residual_norm_rows(struct fg_kctx *ctx, float *d_h, const float *d_x, const float *d_w, float scale,
			    float *d_a, const float *d_w2, int rows, int n, float eps, struct fg_err *err)
{
	(void)ctx, (void)d_h, (void)d_x, (void)d_w, (void)scale, (void)d_a, (void)d_w2, (void)rows, (void)n, (void)eps;
	return NO_CUDA(err);
}

int fg_k_rmsnorm_residual_rows(struct fg_kctx *ctx, float *d_h, const float *d_x, const float *d_w, int rows, int n,
			       float eps, float scale, struct fg_err *err)
{
	(void)ctx, (void)d_h, (void)d_x, (void)d_w, (void)rows, (void)n, (void)eps, (void)scale;
	return NO_CUDA(err);
}

int fg_k_qkv_post_rows(struct fg_kctx *ctx, float *d_qkv, int rows, int heads, int kv_heads, int head_dim,
		       const float *d_qnorm, const float *d_knorm, const float *d_inv, int pos0, float eps,
		       struct fg_err *err)
{
	(void)ctx, (void)d_qkv, (void)rows, (void)heads, (void)kv_heads, (void)head_dim, (void)d_qnorm, (void)d_knorm;
	(void)d_inv, (void)pos0, (void)eps;
	return NO_CUDA(err);
}

int fg_k_attn_prefill(struct fg_kctx *ctx, float *d_out, const float *d_q, size_t q_row, const float *d_knew,
		      const float *d_vnew, size_t kv_row, const float *d_kcache, const float *d_vcache, int rows,
		      int heads, int kv_heads, int head_dim, int cap, int pos0, float scale, struct fg_err *err)
{
	(void)ctx, (void)d_out, (void)d_q, (void)q_row, (void)d_knew, (void)d_vnew, (void)kv_row, (void)d_kcache;
	(void)d_vcache, (void)rows, (void)heads, (void)kv_heads, (void)head_dim, (void)cap, (void)pos0, (void)scale;
	return NO_CUDA(err);
}

int fg_k_qkv_post_rows_at(struct fg_kctx *ctx, float *d_qkv, int rows, int heads, int kv_heads, int head_dim,
			  const float *d_qnorm, const float *d_knorm, const float *d_inv, const int32_t *d_pos0,
			  float eps, struct fg_err *err)
{
	(void)ctx, (void)d_qkv, (void)rows, (void)heads, (void)kv_heads, (void)head_dim, (void)d_qnorm, (void)d_knorm;
	(void)d_inv, (void)d_pos0, (void)eps;
	return NO_CUDA(err);
}

int fg_k_attn_prefill_at(struct fg_kctx *ctx, float *d_out, const float *d_q, size_t q_row, const float *d_knew,
			 const float *d_vnew, size_t kv_row, const float *d_kcache, const float *d_vcache, int rows,
			 int heads, int kv_heads, int head_dim, int cap, const int32_t *d_pos0, float scale,
			 struct fg_err *err)
{
	(void)ctx, (void)d_out, (void)d_q, (void)q_row, (void)d_knew, (void)d_vnew, (void)kv_row, (void)d_kcache;
	(void)d_vcache, (void)rows, (void)heads, (void)kv_heads, (void)head_dim, (void)cap, (void)d_pos0, (void)scale;
	return NO_CUDA(err);
}

int fg_k_kv_store_rows(struct fg_kctx *ctx, float *d_kcache, float *d_vcache, const float *d_knew,
		       const float *d_vnew, size_t kv_row, int rows, int kv_heads, int head_dim, int cap, int pos0,
		       struct fg_err *err)
{
	(void)ctx, (void)d_kcache, (void)d_vcache, (void)d_knew, (void)d_vnew, (void)kv_row, (void)rows, (void)kv_heads;
	(void)head_dim, (void)cap, (void)pos0;
	return NO_CUDA(err);
}

int fg_k_rows_matvec(struct fg_kctx *ctx, float *d_y, const void *d_w, int bf16, const float *d_x, int rows, int n,
		     int k, struct fg_err *err)
{
	(void)ctx, (void)d_y, (void)d_w, (void)bf16, (void)d_x, (void)rows, (void)n, (void)k;
	return NO_CUDA(err);
}

int fg_k_centroid_select(struct fg_kctx *ctx, int32_t *d_ids, const float *d_z, int n, int top_k,
			 const int32_t *d_order, int per, struct fg_err *err)
{
	(void)ctx, (void)d_ids, (void)d_z, (void)n, (void)top_k, (void)d_order, (void)per;
	return NO_CUDA(err);
}

int fg_k_gather_matvec(struct fg_kctx *ctx, float *d_y, const void *d_table, int bf16, const int32_t *d_ids,
		       int n_ids, const float *d_x, int k, struct fg_err *err)
{
	(void)ctx, (void)d_y, (void)d_table, (void)bf16, (void)d_ids, (void)n_ids, (void)d_x, (void)k;
	return NO_CUDA(err);
}
