/* cuda.c - the Gemma 4 decode step on the GPU (see cuda.h). Plain C over
 * kernels/fg_kernels.h; built with or without nvcc (without, fg_g4_gpu_new
 * fails with the kernels' FG_EUNSUPPORTED). */
#include "engine/cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "engine/engine.h"
#include "engine/rope.h"
#include "kernels/fg_kernels.h"

/* A linear layer on the device: INT4 in the tile layout, or bf16 / f32 rows
 * (an F16 checkpoint's rows are widened to f32 while staged: exact, and the
 * f32 matvec serves them; docs/engine.md). */
struct dlin {
	int fmt, rows, cols;
	struct fg_kint4 *q4;
	void *d;
};

/* A layer's mixture of experts on the device (enable_moe_block, model.h's
 * struct fg_g4_moe): every expert uploaded once, at load. */
struct gmoe {
	struct dlin router;     /* router.proj [E][hidden] */
	struct dlin gu, down;   /* all experts, bf16 or f32 rows: gu [E][2 moe_inter][hidden] (expert e's gate
				 * rows, then its up rows), down [E][hidden][moe_inter] */
	float *rscale;          /* router.scale * hidden^-0.5 [hidden] */
	float *escale;          /* router.per_expert_scale [E] */
	float *pre2, *post1, *post2; /* pre_feedforward_layernorm_2, post_feedforward_layernorm_1/_2 [hidden] */
};

struct glayer {
	struct dlin qkv, o, gu, down, pg, pp; /* qkv: q|k|v rows (q only when KV is shared; with
					       * attention_k_eq_v a full layer's v rows are k's again) */
	float *in_norm, *post_attn, *pre_ffw, *post_ffw, *post_ple, *q_norm, *k_norm;
	float *kc, *vc; /* [kv_heads][cap][d] when the layer owns a cache (kv_heads of its type) */
	int cap;        /* slots of the cache this layer reads */
	float *bqkv, *bo; /* attention_bias: the biases of qkv's rows and of o, else NULL */
	struct gmoe *moe; /* enable_moe_block, else NULL */
	struct fg_kple *ple; /* pg and pp for the fused PLE tail of a step (fg_k_ple_tail), else NULL */
	float *cqkv;      /* an owning layer's q|k|v rows of a prompt chunk [chunk][qkv.rows] */
};

/* The decode step reads RoPE's turns from a table for positions below
 * min(max_seq, TURN_ROWS_MAX) and computes later ones: the table is rows x
 * (head_dim + global_head_dim) / 2 x 8 bytes, 25 MB for E4B at 8192. */
#define TURN_ROWS_MAX 16384

#define CHAIN_RING 64 /* tokens the ring of chained steps holds (a power of two) */
#define CHAIN_AHEAD 2 /* chained steps queued at most (FG_KCTX_MARKS) */

/* The step's matvecs whose outputs alternate between two buffers by layer
 * parity (fg_k_int4_matvec_red): q|k|v, o, gate|up, down and the PLE gate. */
enum { RB_QKV, RB_O, RB_GU, RB_DN, RB_PG, RB_KINDS };

struct fg_g4_gpu {
	const struct fg_g4_model *m;
	struct fg_kctx *ctx;
	struct glayer *L;
	struct dlin ple_proj, head;
	void *emb, *ple_emb; /* bf16 tables, or f32 (an F16 / F32 checkpoint's, widened) */
	int emb_fmt, ple_fmt; /* FG_W_BF16 or FG_W_F32 */
	float *final_norm, *ple_norm, *inv[2];
	float *turns[2]; /* RoPE's turns for positions below turn_rows (fg_k_rope_table), or NULL */
	int turn_rows;
	float *x, *a, *qkv, *att, *o, *gu, *pl, *plp, *pg, *logits;
	/* the step's two-split matvecs add into zeroed outputs, without a
	 * round trip (fg_k_int4_matvec_red): per kind, two buffers of rbn
	 * floats, layer li's in rb[kind][li & 1], the other zeroed by that
	 * launch for the next layer; NULL where the kind writes g's buffer
	 * (FG_I8_RED=0, an odd layer count, a matrix not i8) */
	float *rb[RB_KINDS][2];
	size_t rbn[RB_KINDS];
	int32_t *idpos, *best; /* idpos: [id, pos] */
	/* chained steps (fg_g4_gpu_chain): each step's token at ring[pos &
	 * (CHAIN_RING - 1)], host memory the GPU writes (NULL: no chaining) */
	int32_t *ring;
	long long chained; /* the steps fg_g4_gpu_chain counted */
	/* enable_moe_block scratch: an input [hidden], router logits [E], the
	 * chosen experts [top_k] and weights [top_k], gate|up [top_k][2 moe_inter]
	 * and outputs [top_k][hidden] of the chosen experts */
	float *mx, *rlog, *mw, *mgu, *my;
	int32_t *midx;
	int32_t *keep;         /* a pruned head's token ids [n_keep] (model.h), else NULL */
	float *hk;             /* host: a pruned head's logits as downloaded */
	/* the step; without the head (prompt tokens whose logits nobody reads);
	 * [1]: with short attention launches, for positions below short_keys
	 * (fg_kctx_set_attn_short; 0: none) */
	struct fg_kgraph *graph[2], *graph_body[2];
	int use_graph, steps, short_keys;
	/* prompt chunks (fg_g4_gpu_prefill): rows per chunk (0: token by token)
	 * and the step's buffers with that many rows: ids, x, a, q (a reading
	 * layer's q rows), att, o, gate|up, gate and up apart, per-layer inputs
	 * and their projection, the per-layer gate */
	int chunk;
	int32_t *cids;
	float *cx, *ca, *cq, *catt, *co, *cgu, *cg, *cup, *cpl, *cplp, *cpg;
	/* speculative verify (fg_g4_gpu_verify): the chunk buffers hold at
	 * least FG_DRAFT_MAX_K + 1 rows whatever the chunk; the rows' logits
	 * [FG_DRAFT_MAX_K + 1][head rows] and argmaxes; the pending verify's
	 * rows and first position (vT 0: none to accept) */
	float *vlog;
	int32_t *vbest, *vposd; /* vposd: the verify's first position, on the device */
	/* log-probabilities of the step's row, the verify's rows or a scored
	 * chunk's (fg_g4_gpu_step_lp, fg_g4_gpu_verify_lp, fg_g4_gpu_score):
	 * their results and the column each row's wanted id is in, as many as
	 * the chunk buffers' rows */
	struct fg_klp *dlp;
	int32_t *dwant;
	/* scoring in prompt chunks (fg_g4_gpu_score): the rows' logits
	 * [chunk][head rows] and argmaxes, made at the first scoring */
	float *slog;
	int32_t *sbest;
	int vT, vpos;
	/* a verify of T rows as a CUDA graph (after one direct run of T rows) */
	struct fg_kgraph *vgraph[FG_DRAFT_MAX_K + 2];
	unsigned char vran[FG_DRAFT_MAX_K + 2];
	int use_vgraph;
	int max_seq, window; /* fg_g4_gpu_new's */
	/* an assistant drafter's copy of the sliding type-source layer's keys
	 * and values (struct fg_g4_gpu_draft): [kv_heads][scap][d] each, slot =
	 * position % scap, written beside that layer's own ring by every step,
	 * prompt chunk and accept while a drafter exists; NULL without one */
	float *sk, *sv;
	int scap, slayer, sref; /* sref: the drafters sharing it */
};

static size_t lin_bytes(const struct fg_lin *l)
{
	switch (l->fmt) {
	case FG_W_INT4: return (size_t)l->rows * (size_t)(l->cols / 8) * 4;
	case FG_W_BF16:
	case FG_W_F16: return (size_t)l->rows * (size_t)l->cols * 2;
	default: return (size_t)l->rows * (size_t)l->cols * 4;
	}
}

/* Bytes of l as uploaded: F16 rows become f32. */
static size_t dev_bytes(const struct fg_lin *l)
{
	return l->fmt == FG_W_F16 ? (size_t)l->rows * (size_t)l->cols * 4 : lin_bytes(l);
}

static size_t lin_scale_bytes(const struct fg_lin *l)
{
	return l->fmt == FG_W_INT4 ? (size_t)l->rows * (size_t)((l->cols + l->group - 1) / l->group) * 2 : 0;
}

/* Uploads the row-concatenation of n layers with equal format and columns. */
static int dlin_new(struct fg_g4_gpu *g, struct dlin *out, const struct fg_lin *const *parts, int n, const char *what,
		    struct fg_err *err)
{
	size_t wb = 0, sb = 0, wo = 0, so = 0;
	int rows = 0, i, rc;
	char *hw, *hs = NULL;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < n; i++) {
		const struct fg_lin *l = parts[i];

		if (!l->w)
			return fg_err_set(err, FG_EINVAL, "%s: weight missing", what);
		if (l->fmt != parts[0]->fmt || l->cols != parts[0]->cols ||
		    (l->fmt == FG_W_INT4 && l->group != parts[0]->group))
			return fg_err_set(err, FG_EUNSUPPORTED, "%s: parts differ in format or shape", what);
		rows += l->rows;
		wb += dev_bytes(l);
		sb += lin_scale_bytes(l);
	}
	out->fmt = parts[0]->fmt == FG_W_F16 ? FG_W_F32 : parts[0]->fmt;
	out->rows = rows;
	out->cols = parts[0]->cols;
	hw = malloc(wb ? wb : 1);
	if (sb)
		hs = malloc(sb);
	if (!hw || (sb && !hs)) {
		free(hw);
		free(hs);
		return fg_err_set(err, FG_ENOMEM, "out of memory staging %s", what);
	}
	/* the checkpoint mapping need not be aligned: copy bytes */
	for (i = 0; i < n; i++) {
		if (parts[i]->fmt == FG_W_F16) {
			const uint8_t *src = parts[i]->w;
			size_t k, ne = (size_t)parts[i]->rows * (size_t)parts[i]->cols;

			for (k = 0; k < ne; k++) {
				float f = fg_f16_to_f32(fg_le16(src + 2 * k));

				memcpy(hw + wo + 4 * k, &f, 4);
			}
		} else {
			memcpy(hw + wo, parts[i]->w, lin_bytes(parts[i]));
		}
		wo += dev_bytes(parts[i]);
		if (sb) {
			memcpy(hs + so, parts[i]->scale, lin_scale_bytes(parts[i]));
			so += lin_scale_bytes(parts[i]);
		}
	}
	if (out->fmt == FG_W_INT4)
		rc = fg_kint4_new(g->ctx, &out->q4, (const int32_t *)hw, (const uint16_t *)hs, rows, out->cols,
				  parts[0]->group, 0, err);
	else if ((rc = fg_kmem_alloc(g->ctx, &out->d, wb, err)) == 0)
		rc = fg_kmem_upload(g->ctx, out->d, hw, wb, err);
	free(hw);
	free(hs);
	if (rc)
		fg_err_wrap(err, "%s", what);
	return rc;
}

/* dlin_new with the INT4 kernel `kind` (FG_INT4_*) for this matrix only;
 * kind < 0: the context's. Each INT4 matrix carries its own kind, and the
 * launches dispatch on it. */
static int dlin_new_kind(struct fg_g4_gpu *g, struct dlin *out, const struct fg_lin *const *parts, int n,
			 const char *what, int kind, struct fg_err *err)
{
	int was = fg_kctx_int4_kind(g->ctx), rc;

	if (kind >= 0)
		fg_kctx_set_int4_kind(g->ctx, kind);
	rc = dlin_new(g, out, parts, n, what, err);
	fg_kctx_set_int4_kind(g->ctx, was);
	return rc;
}

static void dlin_free(struct fg_g4_gpu *g, struct dlin *l)
{
	fg_kint4_free(g->ctx, l->q4);
	fg_kmem_free(g->ctx, l->d);
	memset(l, 0, sizeof(*l));
}

static int mv(struct fg_g4_gpu *g, float *y, const struct dlin *l, const float *x, struct fg_err *err)
{
	switch (l->fmt) {
	case FG_W_INT4: return fg_k_int4_matvec(g->ctx, y, l->q4, x, 1, err);
	case FG_W_BF16: return fg_k_bf16_matvec(g->ctx, y, l->d, x, NULL, l->rows, l->cols, err);
	default: return fg_k_f32_matvec(g->ctx, y, l->d, x, l->rows, l->cols, err);
	}
}

/* y = W (gelu(gate) * up): fused into the INT4 matvec, else GeGLU in place
 * in gate, then the matvec. */
static int mv_geglu(struct fg_g4_gpu *g, float *y, const struct dlin *l, float *gate, const float *up, int n,
		    struct fg_err *err)
{
	if (l->fmt == FG_W_INT4)
		return fg_k_int4_matvec_geglu(g->ctx, y, l->q4, gate, up, err);
	if (fg_k_geglu(g->ctx, gate, gate, up, n, err))
		return err->code;
	return mv(g, y, l, gate, err);
}

/* Layer li's matvec of kind r in the step, of x or with up of gelu(x) *
 * up (mv_geglu, which may overwrite x): into rb[r][li & 1] (zeroed there
 * by the launch of layer li - 1, or at allocation) with the other buffer
 * zeroed for layer li + 1, where the kind alternates; else into y. *out:
 * where the outputs are. */
static int mv_alt(struct fg_g4_gpu *g, int r, int li, float *y, const struct dlin *l, float *x, const float *up,
		  float **out, struct fg_err *err)
{
	if (!g->rb[r][0]) {
		*out = y;
		return up ? mv_geglu(g, y, l, x, up, l->cols, err) : mv(g, y, l, x, err);
	}
	*out = g->rb[r][li & 1];
	return fg_k_int4_matvec_red(g->ctx, *out, l->q4, x, up, g->rb[r][(li + 1) & 1], (int)g->rbn[r], err);
}

static int up_floats(struct fg_g4_gpu *g, float **d, const float *h, size_t n, struct fg_err *err)
{
	int rc;

	*d = NULL;
	if (!h)
		return 0;
	if ((rc = fg_kmem_alloc(g->ctx, (void **)d, n * sizeof(float), err)))
		return rc;
	return fg_kmem_upload(g->ctx, *d, h, n * sizeof(float), err);
}

/* A q_norm/k_norm weight times the layer type's RoPE attention factor (yarn):
 * RoPE is linear, so norm(x) * (w * s) rotated is s * (cos, sin) applied to
 * norm(x) * w, as transformers scales cos and sin (within fp32 rounding);
 * v has its own norm and is not scaled. s == 1: the weight as it is. */
static int up_norm_scaled(struct fg_g4_gpu *g, float **d, const float *h, size_t n, float s,
			  struct fg_err *err)
{
	float *t;
	size_t i;
	int rc;

	if (s == 1.0f || !h)
		return up_floats(g, d, h, n, err);
	if (!(t = malloc(n * sizeof(float))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (i = 0; i < n; i++)
		t[i] = h[i] * s;
	rc = up_floats(g, d, t, n, err);
	free(t);
	return rc;
}

/* attention_bias: the biases of a layer's qkv rows in their order, q | k | v
 * (q alone when the layer reads another's cache; v's is k's with
 * attention_k_eq_v, model.h), uploaded as one vector; NULL without biases. */
static int up_bias_qkv(struct fg_g4_gpu *g, float **d, const struct fg_g4_layer *ml, int own, struct fg_err *err)
{
	size_t nq = (size_t)ml->q.rows, nk = own ? (size_t)ml->k.rows : 0, nv = own ? (size_t)ml->v.rows : 0;
	float *t;
	int rc;

	*d = NULL;
	if (!ml->bq)
		return 0;
	if (own && (!ml->bk || !ml->bv))
		return fg_err_set(err, FG_EINVAL, "k_proj or v_proj bias missing");
	if (!(t = malloc(sizeof(float) * (nq + nk + nv))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	memcpy(t, ml->bq, sizeof(float) * nq);
	if (own) {
		memcpy(t + nq, ml->bk, sizeof(float) * nk);
		memcpy(t + nq + nk, ml->bv, sizeof(float) * nv);
	}
	rc = up_floats(g, d, t, nq + nk + nv, err);
	free(t);
	return rc;
}

static int zeros(struct fg_g4_gpu *g, float **d, size_t n, struct fg_err *err)
{
	int rc = fg_kmem_alloc(g->ctx, (void **)d, (n ? n : 1) * sizeof(float), err);

	return rc ? rc : fg_kmem_fill(g->ctx, *d, 0, (n ? n : 1) * sizeof(float), err);
}

/* The layers' matrix of kind r (RB_*). */
static const struct dlin *rb_lin(const struct glayer *L, int r)
{
	return r == RB_QKV ? &L->qkv : r == RB_O ? &L->o : r == RB_GU ? &L->gu : r == RB_DN ? &L->down : &L->pg;
}

/* The step's alternating buffers (struct fg_g4_gpu's rb) for each kind
 * whose matrices are all INT4 on the i8 kernel and one at least adds into
 * its outputs (fg_k_int4_red), with an even layer count so that the last
 * layer zeroes the first layer's buffer for the next step; FG_I8_RED=0:
 * none (measurements); FG_I8_RED=1: a load where no kind can fails (tests).
 * Buffers start zero. */
static int rb_new(struct fg_g4_gpu *g, struct fg_err *err)
{
	const struct fg_g4_config *c = &g->m->cfg;
	const char *e = getenv("FG_I8_RED");
	int r, i, rc, any = 0, need = e && !strcmp(e, "1");

	if (e && !strcmp(e, "0"))
		return 0;
	if (c->n_layers % 2)
		return need ? fg_err_set(err, FG_EUNSUPPORTED, "FG_I8_RED=1: %d layers, not even", c->n_layers) : 0;
	for (r = 0; r < RB_KINDS; r++) {
		size_t n = 0;
		int adds = 0, ok = r != RB_PG || c->ple_dim;

		for (i = 0; i < c->n_layers && ok; i++) {
			const struct dlin *l = rb_lin(&g->L[i], r);

			ok = l->fmt == FG_W_INT4 && l->q4 && l->q4->kind == FG_INT4_I8 && !(r == RB_PG && g->L[i].ple) &&
			     !(r == RB_O && g->L[i].bo) && !(r == RB_QKV && g->L[i].bqkv);
			if (ok) {
				adds |= fg_k_int4_red(l->q4);
				n = n > (size_t)l->rows ? n : (size_t)l->rows;
			}
		}
		if (!ok || !adds)
			continue;
		g->rbn[r] = n;
		any = 1;
		if ((rc = zeros(g, &g->rb[r][0], n, err)) || (rc = zeros(g, &g->rb[r][1], n, err)))
			return rc;
	}
	if (!any && need)
		return fg_err_set(err, FG_EUNSUPPORTED, "FG_I8_RED=1: no matvec of the step takes two K splits");
	return 0;
}

/* Uploads an embedding table: BF16 as it is; F16 and F32 as f32 (F16
 * widened exactly, a slice at a time, so the host needs no second copy of
 * the table): 4 bytes per element on the GPU. *fmt: the format uploaded. */
static int emb_table(struct fg_g4_gpu *g, void **d, int *fmt, const struct fg_lin *l, const char *what,
		     struct fg_err *err)
{
	enum { SLICE = 1 << 20 }; /* elements widened per upload */
	size_t ne = (size_t)l->rows * (size_t)l->cols, k, n;
	float *hw;
	int rc;

	*d = NULL;
	*fmt = l->fmt == FG_W_BF16 ? FG_W_BF16 : FG_W_F32;
	if (l->fmt != FG_W_BF16 && l->fmt != FG_W_F16 && l->fmt != FG_W_F32)
		return fg_err_set(err, FG_EUNSUPPORTED, "%s: the CUDA path reads BF16, F16 or F32 embedding tables",
				  what);
	if ((rc = fg_kmem_alloc(g->ctx, d, dev_bytes(l), err)))
		return fg_err_wrap(err, "%s (%s)", what,
				   l->fmt == FG_W_BF16 ? "BF16" : l->fmt == FG_W_F16 ? "F16 widened to F32" : "F32");
	if (l->fmt != FG_W_F16) {
		rc = fg_kmem_upload(g->ctx, *d, l->w, lin_bytes(l), err);
	} else if (!(hw = malloc(sizeof(float) * (ne < SLICE ? ne : SLICE)))) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	} else {
		const uint8_t *src = l->w;

		for (k = 0; k < ne && !rc; k += n) {
			n = ne - k < SLICE ? ne - k : SLICE;
			fg_f16_row_to_f32(hw, src + 2 * k, n);
			rc = fg_kmem_upload(g->ctx, (char *)*d + 4 * k, hw, 4 * n, err);
		}
		free(hw);
	}
	return rc ? fg_err_wrap(err, "%s", what) : 0;
}

static void gmoe_free(struct fg_g4_gpu *g, struct gmoe *x)
{
	if (!x)
		return;
	dlin_free(g, &x->router), dlin_free(g, &x->gu), dlin_free(g, &x->down);
	fg_kmem_free(g->ctx, x->rscale), fg_kmem_free(g->ctx, x->escale), fg_kmem_free(g->ctx, x->pre2);
	fg_kmem_free(g->ctx, x->post1), fg_kmem_free(g->ctx, x->post2);
	free(x);
}

/* The experts of a layer in INT4 (per-expert weight_packed linears, model.h)
 * are not read by the CUDA path: the index of the first such layer, or -1. */
static int int4_experts(const struct fg_g4_model *m)
{
	int i, e;

	for (i = 0; i < m->cfg.n_layers; i++)
		for (e = 0; m->layers[i].moe && e < m->cfg.n_experts; e++)
			if (m->layers[i].moe->gate[e].fmt == FG_W_INT4 || m->layers[i].moe->up[e].fmt == FG_W_INT4 ||
			    m->layers[i].moe->down[e].fmt == FG_W_INT4)
				return i;
	return -1;
}

/* Uploads layer li's router, experts and norms (x: the model's). */
static int gmoe_new(struct fg_g4_gpu *g, struct gmoe **out, const struct fg_g4_moe *x, int li, struct fg_err *err)
{
	const struct fg_g4_config *c = &g->m->cfg;
	int E = c->n_experts, H = c->hidden, e, rc = 0;
	const struct fg_lin **gu = calloc(2 * (size_t)E, sizeof(*gu)), **dn = calloc((size_t)E, sizeof(*dn));
	const struct fg_lin *rp = &x->router;
	const float root = (float)pow((double)H, -0.5);
	struct gmoe *d = calloc(1, sizeof(*d));
	float *rs = malloc(sizeof(float) * (size_t)H);
	char what[64];

	*out = NULL;
	snprintf(what, sizeof(what), "layer %d experts", li);
	if (!gu || !dn || !d || !rs) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto done;
	}
	for (e = 0; e < E; e++) {
		gu[2 * e] = &x->gate[e];
		gu[2 * e + 1] = &x->up[e];
		dn[e] = &x->down[e];
	}
	for (e = 0; e < H; e++)
		rs[e] = x->router_scale[e] * root;
	if ((rc = dlin_new(g, &d->router, &rp, 1, what, err)) || (rc = dlin_new(g, &d->gu, gu, 2 * E, what, err)) ||
	    (rc = dlin_new(g, &d->down, dn, E, what, err)) || (rc = up_floats(g, &d->rscale, rs, (size_t)H, err)) ||
	    (rc = up_floats(g, &d->escale, x->expert_scale, (size_t)E, err)) ||
	    (rc = up_floats(g, &d->pre2, x->pre_norm_2, (size_t)H, err)) ||
	    (rc = up_floats(g, &d->post1, x->post_norm_1, (size_t)H, err)) ||
	    (rc = up_floats(g, &d->post2, x->post_norm_2, (size_t)H, err)))
		goto done;
	*out = d;
	d = NULL;
done:
	gmoe_free(g, d);
	free(gu);
	free(dn);
	free(rs);
	return rc;
}

void fg_g4_gpu_free(struct fg_g4_gpu *g)
{
	int i;

	if (!g)
		return;
	if (g->L)
		for (i = 0; i < g->m->cfg.n_layers; i++) {
			struct glayer *L = &g->L[i];
			float *fs[] = {L->in_norm, L->post_attn, L->pre_ffw, L->post_ffw, L->post_ple,
				       L->q_norm,  L->k_norm,    L->kc,      L->vc,       L->bqkv,
				       L->bo,      L->cqkv};

			dlin_free(g, &L->qkv), dlin_free(g, &L->o), dlin_free(g, &L->gu);
			dlin_free(g, &L->down), dlin_free(g, &L->pg), dlin_free(g, &L->pp);
			fg_kple_free(g->ctx, L->ple);
			gmoe_free(g, L->moe);
			for (size_t j = 0; j < sizeof(fs) / sizeof(fs[0]); j++)
				fg_kmem_free(g->ctx, fs[j]);
		}
	free(g->L);
	dlin_free(g, &g->ple_proj);
	if (g->head.d == g->emb)
		g->head.d = NULL; /* tied: freed once below */
	dlin_free(g, &g->head);
	{
		void *ds[] = {g->emb,   g->ple_emb, g->final_norm, g->ple_norm, g->inv[0], g->inv[1], g->x,
			      g->a,     g->qkv,     g->att,        g->o,        g->gu,     g->pl,     g->plp,
			      g->turns[0], g->turns[1],
			      g->pg,    g->logits,  g->idpos,      g->best,     g->keep,   g->mx,     g->rlog,
			      g->mw,    g->mgu,     g->my,         g->midx,     g->cids,   g->cx,     g->ca,
			      g->cq,    g->catt,    g->co,         g->cgu,      g->cg,     g->cup,    g->cpl,
			      g->cplp,  g->cpg,     g->vlog,       g->vbest,    g->sk,     g->sv,
			      g->vposd, g->dlp,     g->dwant,      g->slog,     g->sbest};

		for (size_t j = 0; j < sizeof(ds) / sizeof(ds[0]); j++)
			fg_kmem_free(g->ctx, ds[j]);
		for (int r = 0; r < RB_KINDS; r++)
			fg_kmem_free(g->ctx, g->rb[r][0]), fg_kmem_free(g->ctx, g->rb[r][1]);
	}
	for (size_t j = 0; j < sizeof(g->vgraph) / sizeof(g->vgraph[0]); j++)
		fg_kgraph_free(g->vgraph[j]);
	for (int v = 0; v < 2; v++)
		fg_kgraph_free(g->graph[v]), fg_kgraph_free(g->graph_body[v]);
	fg_kctx_free(g->ctx); /* its stream drained before the ring goes */
	fg_kmem_free_mapped(g->ring);
	free(g->hk);
	free(g);
}

/* The prompt-chunk buffers (fg_g4_gpu_prefill) for FG_PREFILL_CHUNK rows
 * (default FG_CHUNK_ROWS; 0 runs prompts token by token), and never fewer
 * than a speculative verify's FG_DRAFT_MAX_K + 1 rows. */
#define FG_CHUNK_ROWS 64
#define FG_CHUNK_MAX 1024
#define VROWS (FG_DRAFT_MAX_K + 1) /* a verify's rows at most */

static int chunk_new(struct fg_g4_gpu *g, int maxi, size_t qkv_n, size_t att_n, struct fg_err *err)
{
	const struct fg_g4_config *c = &g->m->cfg;
	const char *e = getenv("FG_PREFILL_CHUNK");
	size_t T, H = (size_t)c->hidden, P = (size_t)c->ple_dim, LP = (size_t)c->n_layers * P;
	size_t I = (size_t)maxi, up = I > P ? I : P;
	int rc, i;

	g->chunk = FG_CHUNK_ROWS;
	if (e && *e) {
		char *end;
		long v = strtol(e, &end, 10);

		if (*end || v < 0 || v > FG_CHUNK_MAX)
			return fg_err_set(err, FG_EINVAL, "FG_PREFILL_CHUNK=%s: want 0 (token by token) to %d rows", e,
					  FG_CHUNK_MAX);
		g->chunk = (int)v;
	}
	if (g->chunk < 2)
		g->chunk = 0;
	T = (size_t)(g->chunk > VROWS ? g->chunk : VROWS);
	if ((rc = fg_kmem_alloc(g->ctx, (void **)&g->cids, T * sizeof(int32_t), err)) ||
	    (rc = zeros(g, &g->cx, T * H, err)) || (rc = zeros(g, &g->ca, T * H, err)) ||
	    (rc = zeros(g, &g->cq, T * qkv_n, err)) || (rc = zeros(g, &g->catt, T * att_n, err)) ||
	    (rc = zeros(g, &g->co, T * H, err)) || (rc = zeros(g, &g->cgu, T * 2 * I, err)) ||
	    (rc = zeros(g, &g->cg, T * up, err)) || (rc = zeros(g, &g->cup, T * up, err)))
		return rc;
	if (P && ((rc = zeros(g, &g->cpl, T * LP, err)) || (rc = zeros(g, &g->cplp, T * LP, err)) ||
		  (rc = zeros(g, &g->cpg, T * P, err))))
		return rc;
	for (i = 0; i < c->n_layers; i++)
		if (g->m->layers[i].kv_src == i && (rc = zeros(g, &g->L[i].cqkv, T * (size_t)g->L[i].qkv.rows, err)))
			return rc;
	if ((rc = zeros(g, &g->vlog, (size_t)VROWS * (size_t)g->head.rows, err)) ||
	    (rc = fg_kmem_alloc(g->ctx, (void **)&g->vbest, VROWS * sizeof(int32_t), err)) ||
	    (rc = fg_kmem_alloc(g->ctx, (void **)&g->vposd, sizeof(int32_t), err)) ||
	    (rc = fg_kmem_alloc(g->ctx, (void **)&g->dlp, T * sizeof(struct fg_klp), err)) ||
	    (rc = fg_kmem_alloc(g->ctx, (void **)&g->dwant, T * sizeof(int32_t), err)))
		return rc;
	return 0;
}

/* With FG_PLE_FUSED=1, the fused PLE tail's copy of a layer's per-layer
 * gate and projection (fg_kple_new) where both are INT4 of one group and
 * the GPU has clusters; *out stays NULL otherwise: the step launches the
 * four kernels. Off by default: measured 2.5-3 % slower on the H200's E4B
 * step (docs/gpu.md, thirty-first session). Only a failure to allocate
 * fails. */
static int ple_new(struct fg_g4_gpu *g, struct fg_kple **out, const struct fg_lin *pg, const struct fg_lin *pp,
		   struct fg_err *err)
{
	const char *e = getenv("FG_PLE_FUSED");
	struct fg_err e2 = {0};
	int rc;

	*out = NULL;
	if (!(e && !strcmp(e, "1")) || pg->fmt != FG_W_INT4 || pp->fmt != FG_W_INT4 || pg->group != pp->group ||
	    pg->cols != pp->rows || pg->rows != pp->cols)
		return 0;
	/* straight from the checkpoint's mapping: fg_kple_new copies bytes */
	rc = fg_kple_new(g->ctx, out, pg->w, pg->scale, pp->w, pp->scale, pg->cols, pg->rows, pg->group, &e2);
	if (rc == FG_EUNSUPPORTED)
		return 0;
	if (rc)
		*err = e2;
	return rc;
}

int fg_g4_gpu_new(struct fg_g4_gpu **out, const struct fg_g4_model *m, const float *const inv[2], int window,
		  int max_seq, struct fg_err *err)
{
	const struct fg_g4_config *c = &m->cfg;
	struct fg_g4_gpu *g;
	int rc, i, maxi = 0, small;
	/* q|k|v floats of one token, the larger of the two layer types */
	size_t qkv_s = (size_t)(c->n_heads + 2 * c->n_kv_heads) * (size_t)c->head_dim;
	size_t qkv_f = (size_t)(c->n_heads + 2 * c->global_kv_heads) * (size_t)c->global_head_dim;
	size_t att_n = (size_t)c->n_heads * (size_t)(c->head_dim > c->global_head_dim ? c->head_dim : c->global_head_dim);
	size_t H = (size_t)c->hidden, LP = (size_t)c->n_layers * (size_t)c->ple_dim;
	const char *e;

	*out = NULL;
	if (c->n_experts && (i = int4_experts(m)) >= 0) /* the CPU engine runs them (docs/engine.md) */
		return fg_err_set(err, FG_EUNSUPPORTED,
				  "--device cuda: INT4 experts (layer %d) are not supported on CUDA; use --device cpu", i);
	if (c->n_experts && c->top_k > FG_MOE_MAX_K)
		return fg_err_set(err, FG_EUNSUPPORTED,
				  "--device cuda: top_k_experts = %d exceeds the %d the CUDA router takes; use --device cpu",
				  c->top_k, FG_MOE_MAX_K);
	if (!(g = calloc(1, sizeof(*g))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	g->m = m;
	e = getenv("FG_CUDA_GRAPH");
	g->use_graph = !(e && !strcmp(e, "0"));
	e = getenv("FG_VERIFY_GRAPH"); /* 0: the verify launched kernel by kernel (measurements) */
	g->use_vgraph = g->use_graph && !(e && !strcmp(e, "0"));
	if ((rc = fg_kctx_new(&g->ctx, err)))
		goto fail;
	/* FG_INT4_SMALL=fma|mma|i8: that INT4 kernel for the small matrices
	 * only (q|k|v, o, the PLE gate and projection; measurements); -1,
	 * the context's */
	small = fg_int4_kind_named(getenv("FG_INT4_SMALL"));
	e = getenv("FG_CHAIN"); /* 0: every step waits for the host (measurements) */
	if (g->use_graph && !(e && !strcmp(e, "0"))) {
		struct fg_err e2 = {0};

		if (fg_kmem_alloc_mapped(g->ctx, (void **)&g->ring, CHAIN_RING * sizeof(int32_t), &e2))
			g->ring = NULL; /* no mapped memory: steps wait for the host, as before */
	}
	g->short_keys = fg_kctx_attn_short_keys(g->ctx);
	if (!(g->L = calloc((size_t)c->n_layers, sizeof(*g->L)))) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto fail;
	}
	for (i = 0; i < c->n_layers; i++)
		maxi = maxi > fg_g4_layer_inter(c, i) ? maxi : fg_g4_layer_inter(c, i);
	if ((rc = emb_table(g, &g->emb, &g->emb_fmt, &m->embed, "embed_tokens", err)))
		goto fail;
	if (c->ple_dim) {
		const struct fg_lin *pp = &m->ple_model_proj;

		if ((rc = emb_table(g, &g->ple_emb, &g->ple_fmt, &m->ple_embed, "embed_tokens_per_layer", err)) ||
		    (rc = dlin_new(g, &g->ple_proj, &pp, 1, "per_layer_model_projection", err)) ||
		    (rc = up_floats(g, &g->ple_norm, m->ple_proj_norm, (size_t)c->ple_dim, err)))
			goto fail;
	}
	if (m->head.w == m->embed.w && m->head.fmt == m->embed.fmt) {
		/* tied: the head reads the uploaded table (bf16 or f32 rows) */
		g->head.fmt = g->emb_fmt;
		g->head.rows = m->head.rows;
		g->head.cols = m->head.cols;
		g->head.d = g->emb;
	} else {
		const struct fg_lin *hp = &m->head;

		if ((rc = dlin_new(g, &g->head, &hp, 1, "lm_head", err)))
			goto fail;
	}
	if (m->keep) {
		if (!(g->hk = malloc(sizeof(float) * (size_t)m->n_keep))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto fail;
		}
		if ((rc = fg_kmem_alloc(g->ctx, (void **)&g->keep, sizeof(int32_t) * (size_t)m->n_keep, err)) ||
		    (rc = fg_kmem_upload(g->ctx, g->keep, m->keep, sizeof(int32_t) * (size_t)m->n_keep, err)))
			goto fail;
	}
	if ((rc = up_floats(g, &g->final_norm, m->final_norm, H, err)) ||
	    (rc = up_floats(g, &g->inv[0], inv[0], (size_t)c->head_dim / 2, err)) ||
	    (rc = up_floats(g, &g->inv[1], inv[1], (size_t)c->global_head_dim / 2, err)))
		goto fail;
	/* the step's RoPE turns from a table, not computed in double in every
	 * attention block (FG_ROPE_TABLE=0: computed, for measurements) */
	e = getenv("FG_ROPE_TABLE");
	g->turn_rows = e && !strcmp(e, "0") ? 0 : max_seq < TURN_ROWS_MAX ? max_seq : TURN_ROWS_MAX;
	for (i = 0; i < 2 && g->turn_rows > 0; i++) {
		int half = (i ? c->global_head_dim : c->head_dim) / 2;
		size_t n = 2 * (size_t)half * (size_t)g->turn_rows;

		if (half > 0 && ((rc = fg_kmem_alloc(g->ctx, (void **)&g->turns[i], sizeof(float) * n, err)) ||
				 (rc = fg_k_rope_table(g->ctx, g->turns[i], g->inv[i], half, g->turn_rows, err))))
			goto fail;
	}
	for (i = 0; i < c->n_layers; i++) {
		const struct fg_g4_layer *ml = &m->layers[i];
		struct glayer *L = &g->L[i];
		const struct fg_lin *qkv[3] = {&ml->q, &ml->k, &ml->v}, *gu[2] = {&ml->gate, &ml->up};
		const struct fg_lin *o = &ml->o, *down = &ml->down, *pg = &ml->ple_gate, *pp = &ml->ple_proj;
		int own = ml->kv_src == i, d = ml->head_dim;
		char what[64];

		snprintf(what, sizeof(what), "layer %d", i);
		if ((rc = dlin_new_kind(g, &L->qkv, qkv, own ? 3 : 1, what, small, err)) ||
		    (rc = dlin_new_kind(g, &L->o, &o, 1, what, small, err)) ||
		    (rc = dlin_new(g, &L->gu, gu, 2, what, err)) ||
		    (rc = dlin_new(g, &L->down, &down, 1, what, err)))
			goto fail;
		if (ml->moe && (rc = gmoe_new(g, &L->moe, ml->moe, i, err)))
			goto fail;
		if (c->ple_dim && ((rc = dlin_new_kind(g, &L->pg, &pg, 1, what, small, err)) ||
				   (rc = dlin_new_kind(g, &L->pp, &pp, 1, what, small, err)) ||
				   (rc = ple_new(g, &L->ple, pg, pp, err))))
			goto fail;
		if ((rc = up_floats(g, &L->in_norm, ml->in_norm, H, err)) ||
		    (rc = up_floats(g, &L->post_attn, ml->post_attn_norm, H, err)) ||
		    (rc = up_floats(g, &L->pre_ffw, ml->pre_ffw_norm, H, err)) ||
		    (rc = up_floats(g, &L->post_ffw, ml->post_ffw_norm, H, err)) ||
		    (rc = up_floats(g, &L->post_ple, ml->post_ple_norm, H, err)) ||
		    (rc = up_norm_scaled(g, &L->q_norm, ml->q_norm, (size_t)d, (float)c->rope[ml->type].attention,
					 err)) ||
		    (rc = up_norm_scaled(g, &L->k_norm, ml->k_norm, (size_t)d, (float)c->rope[ml->type].attention,
					 err)) ||
		    (rc = up_bias_qkv(g, &L->bqkv, ml, own, err)) || (rc = up_floats(g, &L->bo, ml->bo, H, err)))
			goto fail;
		/* a sliding layer needs the last `window` positions only: a ring */
		L->cap = ml->type == FG_G4_SLIDING && window < max_seq ? window : max_seq;
		if (own) {
			size_t n = (size_t)ml->kv_heads * (size_t)L->cap * (size_t)d;

			if ((rc = zeros(g, &L->kc, n, err)) || (rc = zeros(g, &L->vc, n, err)))
				goto fail;
		}
	}
	for (i = 0; i < c->n_layers; i++)
		g->L[i].cap = g->L[m->layers[i].kv_src].cap;
	g->max_seq = max_seq;
	g->window = window;
	if ((rc = zeros(g, &g->x, H, err)) || (rc = zeros(g, &g->a, H, err)) ||
	    (rc = zeros(g, &g->qkv, qkv_s > qkv_f ? qkv_s : qkv_f, err)) ||
	    (rc = zeros(g, &g->att, att_n, err)) || (rc = zeros(g, &g->o, H, err)) ||
	    (rc = zeros(g, &g->gu, 2 * (size_t)maxi, err)) || (rc = zeros(g, &g->pl, LP, err)) ||
	    (rc = zeros(g, &g->plp, LP, err)) || (rc = zeros(g, &g->pg, (size_t)c->ple_dim, err)) ||
	    (rc = zeros(g, &g->logits, (size_t)c->vocab, err)) ||
	    (rc = fg_kmem_alloc(g->ctx, (void **)&g->idpos, 2 * sizeof(int32_t), err)) ||
	    (rc = fg_kmem_alloc(g->ctx, (void **)&g->best, sizeof(int32_t), err)))
		goto fail;
	if (c->n_experts) {
		size_t K = (size_t)c->top_k;

		if ((rc = zeros(g, &g->mx, H, err)) || (rc = zeros(g, &g->rlog, (size_t)c->n_experts, err)) ||
		    (rc = zeros(g, &g->mw, K, err)) || (rc = zeros(g, &g->mgu, K * 2 * (size_t)c->moe_inter, err)) ||
		    (rc = zeros(g, &g->my, K * H, err)) ||
		    (rc = fg_kmem_alloc(g->ctx, (void **)&g->midx, K * sizeof(int32_t), err)) ||
		    (rc = fg_kmem_fill(g->ctx, g->midx, 0, K * sizeof(int32_t), err)))
			goto fail;
	}
	if ((rc = chunk_new(g, maxi, qkv_s > qkv_f ? qkv_s : qkv_f, att_n, err)) || (rc = rb_new(g, err)))
		goto fail;
	*out = g;
	return 0;
fail:
	fg_err_wrap(err, "cuda engine");
	fg_g4_gpu_free(g);
	return rc;
}

/* The mixture-of-experts half of the feed-forward block (engine.c's
 * moe_block for one token): hx holds the residual, o the dense MLP's
 * output (g->x and g->o in the step, a chunk's row in a prompt chunk); on
 * return o = post_feedforward_layernorm_1(dense) +
 * post_feedforward_layernorm_2(experts), ready for post_feedforward_layernorm
 * and the residual. The router's choice stays on the device: the expert
 * matvecs read the ids it wrote. */
static int moe_step(struct fg_g4_gpu *g, const struct gmoe *x, const float *hx, float *o, struct fg_err *err)
{
	const struct fg_g4_config *c = &g->m->cfg;
	struct fg_kctx *k = g->ctx;
	int H = c->hidden, E = c->n_experts, K = c->top_k, I = c->moe_inter;

	/* router input: RMSNorm without weight, * scale * hidden^-0.5 (folded into rscale) */
	if (fg_k_rmsnorm(k, g->mx, hx, x->rscale, 1, H, c->eps, err) || mv(g, g->rlog, &x->router, g->mx, err) ||
	    fg_k_moe_route(k, g->midx, g->mw, g->rlog, x->escale, E, K, err) ||
	    fg_k_rmsnorm(k, g->mx, hx, x->pre2, 1, H, c->eps, err) ||
	    fg_k_moe_matvec(k, g->mgu, x->gu.d, x->gu.fmt == FG_W_BF16, g->midx, E, g->mx, 0, K, 2 * I, H, err) ||
	    fg_k_moe_geglu(k, g->mgu, K, I, err) ||
	    fg_k_moe_matvec(k, g->my, x->down.d, x->down.fmt == FG_W_BF16, g->midx, E, g->mgu, 2 * (size_t)I, K, H, I,
			    err) ||
	    fg_k_moe_combine(k, o, g->my, g->mw, K, x->post1, x->post2, H, c->eps, err))
		return err->code;
	return 0;
}

/* Queues the part [a, b) of an INT4 matrix's weights for L2 prefetch by the
 * next matvec or attention launch (fg_kctx_prefetch). */
static void pf(struct fg_g4_gpu *g, const struct dlin *l, double a, double b)
{
	if (l->fmt == FG_W_INT4)
		fg_kint4_prefetch(g->ctx, l->q4, a, b);
}

/* The forward pass of the token at idpos[0], position idpos[1]: only
 * launches, so it can be captured as a graph. Mirrors engine.c's layer(),
 * with the input norm of each sublayer fused into the residual that ends the
 * previous one, and GeGLU into the matvec that consumes it. At prefetch level
 * 2 (fg_kctx_set_prefetch) a matvec asks L2 for the weights of a later one:
 * q|k|v for o, gate|up for down, down for the next layer's q|k|v (or the
 * head). */
static int forward(struct fg_g4_gpu *g, int head, struct fg_err *err)
{
	const struct fg_g4_model *m = g->m;
	const struct fg_g4_config *c = &m->cfg;
	struct fg_kctx *k = g->ctx;
	const int32_t *id = g->idpos, *pos = g->idpos + 1;
	int H = c->hidden, P = c->ple_dim, nh = c->n_heads, li;
	float eps = c->eps;

	if ((g->emb_fmt == FG_W_BF16 ? fg_k_embed(k, g->x, g->emb, id, H, (float)sqrt((double)H), err)
				     : fg_k_embed_f32(k, g->x, g->emb, id, H, (float)sqrt((double)H), err)))
		return err->code;
	pf(g, &g->L[0].qkv, 0, 1);
	if (P && mv(g, g->plp, &g->ple_proj, g->x, err))
		return err->code;
	if (P && (g->ple_fmt == FG_W_BF16
			  ? fg_k_ple(k, g->pl, g->ple_emb, id, g->plp, g->ple_norm, c->n_layers, P, (float)sqrt((double)P),
				     (float)pow((double)H, -0.5), eps, err)
			  : fg_k_ple_f32(k, g->pl, g->ple_emb, id, g->plp, g->ple_norm, c->n_layers, P,
					 (float)sqrt((double)P), (float)pow((double)H, -0.5), eps, err)))
		return err->code;
	if (fg_k_rmsnorm(k, g->a, g->x, g->L[0].in_norm, 1, H, eps, err))
		return err->code;
	for (li = 0; li < c->n_layers; li++) {
		const struct fg_g4_layer *ml = &m->layers[li];
		struct glayer *L = &g->L[li];
		const struct glayer *src = &g->L[ml->kv_src];
		int d = ml->head_dim, I = ml->inter, own = ml->kv_src == li;
		const float *next = li + 1 < c->n_layers ? g->L[li + 1].in_norm : g->final_norm;
		float *qkv, *o, *gu, *dn, *pg; /* where this layer's matvecs put their outputs (mv_alt) */

		pf(g, &L->o, 0, 1);
		/* attention_bias: q|k|v's biases before the norms and RoPE, o's before post_attn */
		if (mv_alt(g, RB_QKV, li, g->qkv, &L->qkv, g->a, NULL, &qkv, err) ||
		    (L->bqkv && fg_k_add_bias(k, qkv, L->bqkv, L->qkv.rows, err)) ||
		    fg_k_attn_decode_post(k, g->att, qkv, nh, ml->kv_heads, d, L->q_norm, L->k_norm, g->inv[ml->type],
					  g->turns[ml->type], g->turn_rows, pos,
					  src->kc, src->vc, src->cap, own, eps, 1.0f, err) ||
		    mv_alt(g, RB_O, li, g->o, &L->o, g->att, NULL, &o, err) || (L->bo && fg_k_add_bias(k, o, L->bo, H, err)) ||
		    fg_k_residual_norm(k, g->x, o, L->post_attn, 1.0f, g->a, L->pre_ffw, H, eps, err))
			return err->code;
		pf(g, &L->down, 0, 1);
		if (mv_alt(g, RB_GU, li, g->gu, &L->gu, g->a, NULL, &gu, err))
			return err->code;
		if (li + 1 < c->n_layers)
			pf(g, &g->L[li + 1].qkv, 0, 1);
		else if (head) /* no head: nothing of it into L2 */
			pf(g, &g->head, 0, 1);
		if (mv_alt(g, RB_DN, li, g->o, &L->down, gu, gu + I, &dn, err) ||
		    (L->moe && moe_step(g, L->moe, g->x, dn, err)))
			return err->code;
		if (P && L->ple) {
			if (fg_k_ple_tail(k, g->x, g->a, dn, L->ple, g->pl + (size_t)li * P, L->post_ffw, L->post_ple,
					  ml->scalar, next, eps, err))
				return err->code;
		} else if (P) {
			if (fg_k_rmsnorm_residual(k, g->x, dn, L->post_ffw, H, eps, 1.0f, err) ||
			    mv_alt(g, RB_PG, li, g->pg, &L->pg, g->x, NULL, &pg, err) ||
			    mv_geglu(g, g->o, &L->pp, pg, g->pl + (size_t)li * P, P, err) ||
			    fg_k_residual_norm(k, g->x, g->o, L->post_ple, ml->scalar, g->a, next, H, eps, err))
				return err->code;
		} else if (fg_k_residual_norm(k, g->x, dn, L->post_ffw, ml->scalar, g->a, next, H, eps, err)) {
			return err->code;
		}
	}
	/* g->a holds the final norm of the last layer's output; a prompt token
	 * whose logits nobody reads (head 0) stops here: its KV rows are written */
	if (!head)
		return 0;
	if (mv(g, g->logits, &g->head, g->a, err))
		return err->code;
	if (g->ring) /* the argmax also makes the next step's input (fg_g4_gpu_chain) */
		fg_kctx_chain(k, g->idpos, g->ring, CHAIN_RING - 1, c->mm_ids, c->n_mm_ids, c->pad);
	if (fg_k_softcap_argmax(k, g->best, g->logits, g->keep, m->keep ? m->n_keep : c->vocab, c->softcap, err))
		return err->code;
	return 0;
}

/* The drafter's sliding copy after a step at pos: the slot the step wrote
 * in the source layer's ring, k and v ([kv_heads] rows of d floats each),
 * copied; queued after the step. */
static int shadow_step(struct fg_g4_gpu *g, int pos, struct fg_err *err)
{
	const struct glayer *L;
	size_t d, rb;
	int kvh;

	if (!g->sk)
		return 0;
	L = &g->L[g->slayer];
	d = (size_t)g->m->layers[g->slayer].head_dim;
	kvh = g->m->layers[g->slayer].kv_heads;
	rb = sizeof(float) * d;
	if (fg_kmem_copy2d(g->ctx, g->sk + (size_t)(pos % g->scap) * d, rb * (size_t)g->scap,
			   L->kc + (size_t)(pos % L->cap) * d, rb * (size_t)L->cap, rb, (size_t)kvh, err) ||
	    fg_kmem_copy2d(g->ctx, g->sv + (size_t)(pos % g->scap) * d, rb * (size_t)g->scap,
			   L->vc + (size_t)(pos % L->cap) * d, rb * (size_t)L->cap, rb, (size_t)kvh, err))
		return err->code;
	return 0;
}

/* Ends a capture begun by fg_kgraph_begin, rc being what the captured
 * launches returned: the graph into *gp when they went well; otherwise
 * the capture is dropped and rc, with its message in err, stands. */
static int capture_end(struct fg_kctx *ctx, struct fg_kgraph **gp, int rc, struct fg_err *err)
{
	struct fg_err e2 = {0};
	int rc2 = fg_kgraph_end(ctx, gp, rc ? &e2 : err);

	return rc ? rc : rc2;
}

/* A launch sequence (fn(arg)) whose graph comes in two forms: [0] with the
 * full attention launches, [1] with short ones (fg_kctx_set_attn_short),
 * for positions below short_keys (sh). With ready (one direct run went
 * cleanly) the missing forms are captured, both at once: a capture runs
 * nothing, so neither form's first use costs a capture inside a decode.
 * Then form sh is replayed, or, before there is one, fn runs directly
 * with the launches that form uses. A failed capture comes back wrapped
 * as "capture WHAT as a CUDA graph", WHAT being what (a printf format
 * taking at most the one int n), formatted only then. */
static int run_forms(struct fg_g4_gpu *g, struct fg_kgraph *forms[2], int ready, int sh,
		     int (*fn)(void *arg, struct fg_err *err), void *arg, const char *what, int n, struct fg_err *err)
{
	char w[64];
	int rc;

	for (int v = 0; g->use_graph && ready && v < (g->short_keys ? 2 : 1); v++) {
		if (forms[v])
			continue;
		if ((rc = fg_kgraph_begin(g->ctx, err)))
			return rc;
		fg_kctx_set_attn_short(g->ctx, v);
		rc = capture_end(g->ctx, &forms[v], fn(arg, err), err);
		fg_kctx_set_attn_short(g->ctx, 0);
		if (rc) {
			snprintf(w, sizeof(w), what, n);
			return fg_err_wrap(err, "capture %s%s as a CUDA graph", w, v ? " with short attention launches" : "");
		}
	}
	if (forms[sh])
		return fg_kgraph_launch(g->ctx, forms[sh], err);
	fg_kctx_set_attn_short(g->ctx, sh);
	rc = fn(arg, err);
	fg_kctx_set_attn_short(g->ctx, 0);
	return rc;
}

/* forward() for run_forms: arg a struct step_arg */
struct step_arg {
	struct fg_g4_gpu *g;
	int head;
};

static int step_forward(void *arg, struct fg_err *err)
{
	const struct step_arg *a = arg;

	return forward(a->g, a->head, err);
}

/* fg_g4_gpu_step, and with lp not NULL the k-best log-probabilities of the
 * step's row into *lp (fg_k_row_logprobs, the row's largest as the wanted). */
static int step(struct fg_g4_gpu *g, int32_t id, int pos, float *logits, int32_t *best, int k, struct fg_klp *lp,
		struct fg_err *err)
{
	int32_t ip[2] = {fg_g4_input_id(&g->m->cfg, id), pos}; /* multimodal placeholders embed as pad */
	int rc, head = logits || best || lp; /* none: a prompt token, the head and argmax left out */
	struct step_arg sa = {g, head};

	if ((rc = fg_kmem_upload(g->ctx, g->idpos, ip, sizeof(ip), err)))
		return rc;
	/* the short attention launches serve positions below short_keys */
	rc = run_forms(g, head ? g->graph : g->graph_body, g->steps > 0, pos < g->short_keys, step_forward, &sa,
		       "the decode step", 0, err);
	if (!rc)
		rc = shadow_step(g, pos, err);
	if (!rc && lp)
		rc = fg_k_row_logprobs(g->ctx, g->dlp, g->logits, (size_t)g->head.rows, 1, g->keep, g->head.rows, NULL, k,
				       err);
	if (!rc)
		rc = fg_kctx_sync(g->ctx, err);
	if (!rc && lp)
		rc = fg_kmem_download(g->ctx, lp, g->dlp, sizeof(*lp), err);
	if (!rc && logits && !g->keep)
		rc = fg_kmem_download(g->ctx, logits, g->logits, sizeof(float) * (size_t)g->m->cfg.vocab, err);
	if (!rc && logits && g->keep &&
	    !(rc = fg_kmem_download(g->ctx, g->hk, g->logits, sizeof(float) * (size_t)g->m->n_keep, err)))
		fg_engine_scatter_keep(logits, g->m->cfg.vocab, g->hk, g->m->keep, g->m->n_keep);
	if (!rc && best) {
		rc = fg_kmem_download(g->ctx, best, g->best, sizeof(int32_t), err);
		if (!rc && *best < 0)
			*best = 0; /* every logit NaN: fg_engine_argmax's answer */
	}
	if (rc)
		return fg_err_wrap(err, "cuda decode step at position %d", pos);
	g->steps++;
	return 0;
}

int fg_g4_gpu_step(struct fg_g4_gpu *g, int32_t id, int pos, float *logits, int32_t *best, struct fg_err *err)
{
	return step(g, id, pos, logits, best, 0, NULL, err);
}

/* Chained greedy steps. Each step's argmax (best_final) writes its token
 * into the ring and makes it the next step's input on the GPU, so the next
 * step is queued before the host has read this one's: the GPU goes from one
 * step's graph to the next with no host round trip between them, and the
 * host's handling of a token (cb) overlaps the next step. At most CHAIN_AHEAD
 * steps are queued; when cb stops, the one queued past it is waited for, its
 * position not counted (it wrote the KV rows of the token cb stopped on at
 * that position, which a later step there writes again). */
int fg_g4_gpu_chain_ready(const struct fg_g4_gpu *g)
{
	return g && g->ring && g->steps > 0 && g->graph[0] && (!g->short_keys || g->graph[1]);
}

long long fg_g4_gpu_chained(const struct fg_g4_gpu *g)
{
	return g ? g->chained : 0;
}

int fg_g4_gpu_chain(struct fg_g4_gpu *g, int32_t id, int pos, int n, int (*cb)(void *user, int32_t tok), void *user,
		    int *done, struct fg_err *err)
{
	int32_t ip[2] = {fg_g4_input_id(&g->m->cfg, id), pos};
	int rc = 0, sent = 0, got = 0, stop = 0;

	*done = 0;
	if (!fg_g4_gpu_chain_ready(g))
		return fg_err_set(err, FG_EINVAL, "chained steps before the step's graphs exist");
	if (n < 1)
		return 0;
	if ((rc = fg_kmem_upload(g->ctx, g->idpos, ip, sizeof(ip), err)))
		return fg_err_wrap(err, "cuda decode step at position %d", pos);
	while (!stop && got < n) {
		for (; !rc && sent < n && sent - got < CHAIN_AHEAD; sent++) {
			int p = pos + sent;

			if (!(rc = fg_kgraph_launch(g->ctx, g->graph[p < g->short_keys], err)) &&
			    !(rc = shadow_step(g, p, err)))
				rc = fg_kctx_mark(g->ctx, sent % CHAIN_AHEAD, err);
		}
		if (rc || (rc = fg_kctx_wait(g->ctx, got % CHAIN_AHEAD, err)))
			break;
		g->steps++;
		g->chained++;
		stop = cb(user, ((volatile int32_t *)g->ring)[(pos + got++) & (CHAIN_RING - 1)]);
	}
	*done = got;
	if (sent > got) { /* the step queued past the last one counted */
		struct fg_err e2 = {0};
		int rc2 = fg_kctx_sync(g->ctx, rc ? &e2 : err);

		rc = rc ? rc : rc2;
	}
	return rc ? fg_err_wrap(err, "cuda decode step at position %d", pos + got) : 0;
}

int fg_g4_gpu_step_lp(struct fg_g4_gpu *g, int32_t id, int pos, int k, int32_t *best, struct fg_klp *lp,
		      struct fg_err *err)
{
	return step(g, id, pos, NULL, best, k, lp, err);
}

/* ---- prompt chunks -----------------------------------------------------------
 *
 * forward() over T prompt tokens at once, for tokens whose logits nobody
 * reads: each operation runs over the T rows (an INT4 matrix's weights read
 * once per chunk by fg_k_int4_gemm), and every row gets the bits the decode
 * step gives that token (fg_kernels.h, "prompt chunks"). The layers' caches
 * are written only after the last layer: until then they hold positions
 * below pos0, what fg_k_attn_prefill expects (a KV-shared layer reads its
 * source's cache and the source's chunk rows). */

/* y [T][rows] = W x for the T rows of x [T][cols]: row r the bits of mv on row r. */
static int mv_rows(struct fg_g4_gpu *g, float *y, const struct dlin *l, const float *x, int T, struct fg_err *err)
{
	if (l->fmt == FG_W_INT4)
		return fg_k_int4_gemm(g->ctx, y, l->q4, x, NULL, T, err);
	return fg_k_rows_matvec(g->ctx, y, l->d, l->fmt == FG_W_BF16, x, T, l->rows, l->cols, err);
}

/* y [T][rows] = W (gelu(gate) * up), gate and up [T][n]; mv_geglu per row. */
static int mv_geglu_rows(struct fg_g4_gpu *g, float *y, const struct dlin *l, float *gate, const float *up, int n,
			 int T, struct fg_err *err)
{
	if (l->fmt == FG_W_INT4)
		return fg_k_int4_gemm(g->ctx, y, l->q4, gate, up, T, err);
	if (fg_k_geglu(g->ctx, gate, gate, up, n * T, err))
		return err->code;
	return mv_rows(g, y, l, gate, T, err);
}

/* d_dst [T][n] = the n floats at d_src + r * stride, r < T. */
static int gather(struct fg_g4_gpu *g, float *d_dst, const float *d_src, size_t stride, int n, int T,
		  struct fg_err *err)
{
	return fg_kmem_copy2d(g->ctx, d_dst, sizeof(float) * (size_t)n, d_src, sizeof(float) * stride,
			      sizeof(float) * (size_t)n, (size_t)T, err);
}

/* T rows' biases (attention_bias): fg_k_add_bias per row, as the step adds them. */
static int bias_rows(struct fg_g4_gpu *g, float *y, const float *b, int n, int T, struct fg_err *err)
{
	int r;

	for (r = 0; r < T && b; r++)
		if (fg_k_add_bias(g->ctx, y + (size_t)r * n, b, n, err))
			return err->code;
	return 0;
}

/* The drafter's sliding copy of a chunk's (or an accepted verify's) first
 * n rows, as the source layer's ring gets them. */
static int shadow_rows(struct fg_g4_gpu *g, int n, int pos0, struct fg_err *err)
{
	const struct fg_g4_layer *ml;
	const struct glayer *L;
	size_t nh = (size_t)g->m->cfg.n_heads, d;

	if (!g->sk)
		return 0;
	ml = &g->m->layers[g->slayer];
	L = &g->L[g->slayer];
	d = (size_t)ml->head_dim;
	return fg_k_kv_store_rows(g->ctx, g->sk, g->sv, L->cqkv + nh * d, L->cqkv + (nh + (size_t)ml->kv_heads) * d,
				  (size_t)L->qkv.rows, n, ml->kv_heads, (int)d, g->scap, pos0, err);
}

/* store 0 (a speculative verify) leaves the caches as they were: the rows'
 * keys and values stay in the owning layers' cqkv for fg_g4_gpu_accept.
 * d_pos non-NULL: the first row's position is read from it at run time
 * (pos0 unused), so the launches can be captured once for every position. */
static int forward_chunk(struct fg_g4_gpu *g, int T, int pos0, const int32_t *d_pos, int store, struct fg_err *err)
{
	const struct fg_g4_model *m = g->m;
	const struct fg_g4_config *c = &m->cfg;
	struct fg_kctx *k = g->ctx;
	int H = c->hidden, P = c->ple_dim, nh = c->n_heads, LP = c->n_layers * c->ple_dim, li;
	float eps = c->eps;

	if (fg_k_embed_rows(k, g->cx, g->emb, g->emb_fmt != FG_W_BF16, g->cids, T, H, (float)sqrt((double)H), err))
		return err->code;
	if (P && (mv_rows(g, g->cplp, &g->ple_proj, g->cx, T, err) ||
		  fg_k_ple_rows(k, g->cpl, g->ple_emb, g->ple_fmt != FG_W_BF16, g->cids, g->cplp, g->ple_norm, T,
				c->n_layers, P, (float)sqrt((double)P), (float)pow((double)H, -0.5), eps, err)))
		return err->code;
	if (fg_k_rmsnorm(k, g->ca, g->cx, g->L[0].in_norm, T, H, eps, err))
		return err->code;
	for (li = 0; li < c->n_layers; li++) {
		const struct fg_g4_layer *ml = &m->layers[li];
		struct glayer *L = &g->L[li];
		const struct glayer *src = &g->L[ml->kv_src];
		int d = ml->head_dim, I = ml->inter, own = ml->kv_src == li, kvh = ml->kv_heads;
		const float *next = li + 1 < c->n_layers ? g->L[li + 1].in_norm : g->final_norm;
		float *q = own ? L->cqkv : g->cq;
		size_t srow = (size_t)src->qkv.rows; /* the source's q|k|v row: its k and v follow nh q heads */

		if (mv_rows(g, q, &L->qkv, g->ca, T, err) || bias_rows(g, q, L->bqkv, L->qkv.rows, T, err) ||
		    (d_pos ? fg_k_qkv_post_rows_at(k, q, T, nh, own ? kvh : 0, d, L->q_norm, L->k_norm, g->inv[ml->type],
						   d_pos, eps, err)
			   : fg_k_qkv_post_rows(k, q, T, nh, own ? kvh : 0, d, L->q_norm, L->k_norm, g->inv[ml->type],
						pos0, eps, err)) ||
		    (d_pos ? fg_k_attn_prefill_at(k, g->catt, q, (size_t)L->qkv.rows, src->cqkv + (size_t)nh * d,
						  src->cqkv + (size_t)(nh + kvh) * d, srow, src->kc, src->vc, T, nh, kvh, d,
						  src->cap, d_pos, 1.0f, err)
			   : fg_k_attn_prefill(k, g->catt, q, (size_t)L->qkv.rows, src->cqkv + (size_t)nh * d,
					       src->cqkv + (size_t)(nh + kvh) * d, srow, src->kc, src->vc, T, nh, kvh, d,
					       src->cap, pos0, 1.0f, err)) ||
		    mv_rows(g, g->co, &L->o, g->catt, T, err) || bias_rows(g, g->co, L->bo, H, T, err) ||
		    fg_k_residual_norm_rows(k, g->cx, g->co, L->post_attn, 1.0f, g->ca, L->pre_ffw, T, H, eps, err) ||
		    mv_rows(g, g->cgu, &L->gu, g->ca, T, err) || gather(g, g->cg, g->cgu, 2 * (size_t)I, I, T, err) ||
		    gather(g, g->cup, g->cgu + I, 2 * (size_t)I, I, T, err) ||
		    mv_geglu_rows(g, g->co, &L->down, g->cg, g->cup, I, T, err))
			return err->code;
		for (int r = 0; r < T && L->moe; r++) /* the experts take one token: row by row */
			if (moe_step(g, L->moe, g->cx + (size_t)r * H, g->co + (size_t)r * H, err))
				return err->code;
		if (P && L->ple) { /* the step's fused tail, row by row: the step's bits */
			if (fg_k_ple_tail_rows(k, g->cx, g->ca, g->co, L->ple, g->cpl + (size_t)li * P, (size_t)LP, T,
					       L->post_ffw, L->post_ple, ml->scalar, next, eps, err))
				return err->code;
		} else if (P) {
			if (fg_k_rmsnorm_residual_rows(k, g->cx, g->co, L->post_ffw, T, H, eps, 1.0f, err) ||
			    mv_rows(g, g->cpg, &L->pg, g->cx, T, err) ||
			    gather(g, g->cup, g->cpl + (size_t)li * P, (size_t)LP, P, T, err) ||
			    mv_geglu_rows(g, g->co, &L->pp, g->cpg, g->cup, P, T, err) ||
			    fg_k_residual_norm_rows(k, g->cx, g->co, L->post_ple, ml->scalar, g->ca, next, T, H, eps, err))
				return err->code;
		} else if (fg_k_residual_norm_rows(k, g->cx, g->co, L->post_ffw, ml->scalar, g->ca, next, T, H, eps,
						   err)) {
			return err->code;
		}
	}
	/* the chunk's keys and values into the caches, now that no layer reads them */
	for (li = 0; li < c->n_layers && store; li++) {
		const struct fg_g4_layer *ml = &m->layers[li];
		struct glayer *L = &g->L[li];
		int d = ml->head_dim, kvh = ml->kv_heads;

		if (ml->kv_src == li &&
		    fg_k_kv_store_rows(k, L->kc, L->vc, L->cqkv + (size_t)nh * d, L->cqkv + (size_t)(nh + kvh) * d,
				       (size_t)L->qkv.rows, T, kvh, d, L->cap, pos0, err))
			return err->code;
	}
	return store ? shadow_rows(g, T, pos0, err) : 0;
}

/* ids[0..T) (T <= the chunk buffers' rows) into cids as the step embeds
 * them (a multimodal placeholder as pad). */
static int upload_rows(struct fg_g4_gpu *g, const int32_t *ids, int T, struct fg_err *err)
{
	int32_t buf[FG_CHUNK_MAX > VROWS ? FG_CHUNK_MAX : VROWS];

	for (int r = 0; r < T; r++)
		buf[r] = fg_g4_input_id(&g->m->cfg, ids[r]);
	return fg_kmem_upload(g->ctx, g->cids, buf, sizeof(int32_t) * (size_t)T, err);
}

int fg_g4_gpu_prefill(struct fg_g4_gpu *g, const int32_t *ids, int n, int pos, struct fg_err *err)
{
	int done = 0, rc = 0;

	if (n < 0 || pos < 0)
		return fg_err_set(err, FG_EINVAL, "prefill: %d tokens at position %d", n, pos);
	while (done < n && !rc) {
		int T = n - done < g->chunk ? n - done : g->chunk;

		/* before any step has run, the last prompt token goes through the
		 * step: the step after it (the prompt's last, with the head) then
		 * captures its graph inside the prefill, as token by token did,
		 * not in the first decode step's time */
		if (T == n - done && g->use_graph && !g->steps && T > 1)
			T--;
		if (T < 2) { /* no chunks, or one token left: the step */
			rc = fg_g4_gpu_step(g, ids[done], pos + done, NULL, NULL, err);
			done++;
			continue;
		}
		if ((rc = upload_rows(g, ids + done, T, err)) || (rc = forward_chunk(g, T, pos + done, NULL, 1, err)) ||
		    (rc = fg_kctx_sync(g->ctx, err)))
			return fg_err_wrap(err, "cuda prefill of %d tokens at position %d", T, pos + done);
		done += T;
	}
	return rc;
}

int fg_g4_gpu_chunk(const struct fg_g4_gpu *g)
{
	return g->chunk;
}

const char *fg_g4_gpu_device(const struct fg_g4_gpu *g)
{
	return fg_kctx_device_name(g->ctx);
}

int fg_g4_gpu_info(const struct fg_g4_gpu *g, struct fg_kdevice *out, struct fg_err *err)
{
	return fg_kctx_device_info(g->ctx, out, err);
}

/* ---- speculative decoding ---------------------------------------------------- */

/* The verify pass is a prompt chunk (forward_chunk: every row the decode
 * step's bits) that keeps its keys and values aside, with the head on every
 * row (mv_rows: row r the bits of the step's head matvec) and the step's
 * softcap and argmax per row. Its ids and first position come from device
 * memory, so after one direct run of T rows the launches of T rows are
 * captured as a CUDA graph and replayed at any position. It uses none of
 * the step's buffers but g->a (written by accept only), so the step's
 * graphs stay valid around it, and the step's none of its. */
static int verify_forward(struct fg_g4_gpu *g, int T, struct fg_err *err)
{
	int n = g->head.rows, r;

	if (forward_chunk(g, T, 0, g->vposd, 0, err) || mv_rows(g, g->vlog, &g->head, g->ca, T, err))
		return err->code;
	for (r = 0; r < T; r++)
		if (fg_k_softcap_argmax(g->ctx, g->vbest + r, g->vlog + (size_t)r * (size_t)n, g->keep, n,
					g->m->cfg.softcap, err))
			return err->code;
	return 0;
}

/* Queues the verify of rows ids[0..T) at pos (verify_forward, as a graph
 * when one is captured); the caller syncs. */
static int verify_launch(struct fg_g4_gpu *g, const int32_t *ids, int T, int pos, struct fg_err *err)
{
	const struct fg_g4_config *c = &g->m->cfg;
	int32_t p0 = pos;
	int r, rc;

	g->vT = 0;
	if (T < 1 || T > VROWS || pos < 0)
		return fg_err_set(err, FG_EINVAL, "cuda verify: %d rows at position %d (1 to %d rows)", T, pos, VROWS);
	for (r = 0; r < T; r++)
		if (ids[r] < 0 || ids[r] >= c->vocab)
			return fg_err_set(err, FG_EINVAL, "cuda verify: token id %d outside the vocabulary of %d",
					  (int)ids[r], c->vocab);
	if ((rc = upload_rows(g, ids, T, err)) ||
	    (rc = fg_kmem_upload(g->ctx, g->vposd, &p0, sizeof(p0), err)))
		return fg_err_wrap(err, "cuda verify of %d rows at position %d", T, pos);
	if (g->use_vgraph && !g->vgraph[T] && g->vran[T]) {
		/* capture after one direct run of T rows went cleanly */
		if ((rc = fg_kgraph_begin(g->ctx, err)))
			return fg_err_wrap(err, "cuda verify of %d rows at position %d", T, pos);
		if ((rc = capture_end(g->ctx, &g->vgraph[T], verify_forward(g, T, err), err)))
			return fg_err_wrap(err, "capture the verify of %d rows as a CUDA graph", T);
	}
	rc = g->vgraph[T] ? fg_kgraph_launch(g->ctx, g->vgraph[T], err) : verify_forward(g, T, err);
	if (rc)
		return fg_err_wrap(err, "cuda verify of %d rows at position %d", T, pos);
	g->vran[T] = 1;
	return 0;
}

int fg_g4_gpu_verify(struct fg_g4_gpu *g, const int32_t *ids, int T, int pos, int32_t *best, struct fg_err *err)
{
	return fg_g4_gpu_verify_lp(g, ids, T, pos, 0, best, NULL, err);
}

int fg_g4_gpu_verify_lp(struct fg_g4_gpu *g, const int32_t *ids, int T, int pos, int k, int32_t *best,
			struct fg_klp *lp, struct fg_err *err)
{
	int r, rc;

	if ((rc = verify_launch(g, ids, T, pos, err)))
		return rc;
	if ((lp && (rc = fg_k_row_logprobs(g->ctx, g->dlp, g->vlog, (size_t)g->head.rows, T, g->keep, g->head.rows,
					   NULL, k, err))) ||
	    (rc = fg_kctx_sync(g->ctx, err)) ||
	    (rc = fg_kmem_download(g->ctx, best, g->vbest, sizeof(int32_t) * (size_t)T, err)) ||
	    (lp && (rc = fg_kmem_download(g->ctx, lp, g->dlp, sizeof(*lp) * (size_t)T, err))))
		return fg_err_wrap(err, "cuda verify of %d rows at position %d", T, pos);
	for (r = 0; r < T; r++)
		if (best[r] < 0)
			best[r] = 0; /* every logit NaN: the step's answer */
	g->vT = T;
	g->vpos = pos;
	return 0;
}

/* The column of token id in the head's rows: id itself, or its place in a
 * pruned head's keepset (ascending), -1 when the keepset lacks it. */
static int32_t head_column(const struct fg_g4_model *m, int32_t id)
{
	int lo = 0, hi;

	if (!m->keep)
		return id;
	hi = m->n_keep;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (m->keep[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->n_keep && m->keep[lo] == id ? lo : -1;
}

int fg_g4_gpu_score_rows(const struct fg_g4_gpu *g)
{
	if (g->chunk < 2)
		return VROWS;
	return g->chunk < FG_K_LP_ROWS_MAX ? g->chunk : FG_K_LP_ROWS_MAX;
}

/* T rows of a prompt chunk with the head on each (the step's bits, as the
 * verify's rows), their log-softmax, the caches written. */
static int score_chunk(struct fg_g4_gpu *g, int T, int pos, int k, struct fg_err *err)
{
	size_t n = (size_t)g->head.rows;
	int r, rc;

	if (!g->slog && ((rc = fg_kmem_alloc(g->ctx, (void **)&g->slog, sizeof(float) * n * (size_t)g->chunk, err)) ||
			 (rc = fg_kmem_alloc(g->ctx, (void **)&g->sbest, sizeof(int32_t) * (size_t)g->chunk, err))))
		return rc;
	if ((rc = forward_chunk(g, T, pos, NULL, 1, err)) || (rc = mv_rows(g, g->slog, &g->head, g->ca, T, err)))
		return rc;
	for (r = 0; r < T; r++)
		if ((rc = fg_k_softcap_argmax(g->ctx, g->sbest + r, g->slog + (size_t)r * n, g->keep, (int)n,
					      g->m->cfg.softcap, err)))
			return rc;
	return fg_k_row_logprobs(g->ctx, g->dlp, g->slog, n, T, g->keep, (int)n, g->dwant, k, err);
}

int fg_g4_gpu_score(struct fg_g4_gpu *g, const int32_t *ids, int T, int pos, const int32_t *next, int k,
		    struct fg_klp *lp, struct fg_err *err)
{
	int32_t col[FG_K_LP_ROWS_MAX];
	int r, rc, chunked = g->chunk >= 2;

	if (T < 1 || T > fg_g4_gpu_score_rows(g) || pos < 0)
		return fg_err_set(err, FG_EINVAL, "cuda score: %d rows at position %d (1 to %d rows)", T, pos,
				  fg_g4_gpu_score_rows(g));
	for (r = 0; r < T; r++) {
		if (next[r] < 0 || next[r] >= g->m->cfg.vocab || ids[r] < 0 || ids[r] >= g->m->cfg.vocab)
			return fg_err_set(err, FG_EINVAL, "cuda score: token id %d outside the vocabulary of %d",
					  (int)(next[r] < 0 || next[r] >= g->m->cfg.vocab ? next[r] : ids[r]),
					  g->m->cfg.vocab);
		col[r] = head_column(g->m, next[r]);
	}
	if ((rc = fg_kmem_upload(g->ctx, g->dwant, col, sizeof(int32_t) * (size_t)T, err)))
		return fg_err_wrap(err, "cuda scoring of %d rows at position %d", T, pos);
	if (chunked)
		rc = upload_rows(g, ids, T, err) || score_chunk(g, T, pos, k, err);
	else /* prompts token by token: the verify's rows, then accepted */
		rc = verify_launch(g, ids, T, pos, err) ||
		     fg_k_row_logprobs(g->ctx, g->dlp, g->vlog, (size_t)g->head.rows, T, g->keep, g->head.rows,
				       g->dwant, k, err);
	if (rc || (rc = fg_kctx_sync(g->ctx, err)) ||
	    (rc = fg_kmem_download(g->ctx, lp, g->dlp, sizeof(*lp) * (size_t)T, err)))
		return fg_err_wrap(err, "cuda scoring of %d rows at position %d", T, pos);
	if (chunked)
		return 0;
	g->vT = T;
	g->vpos = pos;
	return fg_g4_gpu_accept(g, T, err);
}

/* Rows 0..n-1 of the verify into the caches (slot = position % cap, the
 * newest row of a slot wins: what n steps leave), and row n-1's
 * final-normed hidden state into g->a, where a step with the head leaves
 * it. */
int fg_g4_gpu_accept(struct fg_g4_gpu *g, int n, struct fg_err *err)
{
	const struct fg_g4_config *c = &g->m->cfg;
	size_t hb = sizeof(float) * (size_t)c->hidden;
	int li, rc, nh = c->n_heads;

	if (!g->vT)
		return fg_err_set(err, FG_EINVAL, "cuda accept: no verify to accept");
	if (n < 1 || n > g->vT)
		return fg_err_set(err, FG_EINVAL, "cuda accept: %d rows of a verify of %d", n, g->vT);
	g->vT = 0;
	for (li = 0; li < c->n_layers; li++) {
		const struct fg_g4_layer *ml = &g->m->layers[li];
		struct glayer *L = &g->L[li];
		int d = ml->head_dim, kvh = ml->kv_heads;

		if (ml->kv_src == li &&
		    (rc = fg_k_kv_store_rows(g->ctx, L->kc, L->vc, L->cqkv + (size_t)nh * d,
					     L->cqkv + (size_t)(nh + kvh) * d, (size_t)L->qkv.rows, n, kvh, d, L->cap,
					     g->vpos, err)))
			return fg_err_wrap(err, "cuda accept of %d rows at position %d", n, g->vpos);
	}
	if ((rc = shadow_rows(g, n, g->vpos, err)) ||
	    (rc = fg_kmem_copy2d(g->ctx, g->a, hb, g->ca + (size_t)(n - 1) * (size_t)c->hidden, hb, hb, 1, err)) ||
	    (rc = fg_kctx_sync(g->ctx, err)))
		return fg_err_wrap(err, "cuda accept of %d rows at position %d", n, g->vpos);
	return 0;
}

/* ---- the assistant drafter (engine/draft.h has the method) --------------------
 *
 * Its weights are uploaded to the target's context (the same stream, so a
 * round queues behind the target's work with no extra sync). A round of k
 * drafts is only launches: the tokens chain on the device (draft j's argmax
 * is draft j + 1's embedding id), the position comes from device memory, so
 * after one direct round of k drafts the next ones replay a CUDA graph of
 * that k. One download of k ids per round.
 *
 * The layers attend over the target's caches of their type at position pos
 * - 1 (fg_k_attn_decode with the range from pos - 1), the query rotated at
 * pos. Full layers read the source layer's cache (cap = the sequence size).
 * A sliding layer sees the newest W + 1 positions (W the smaller of the
 * assistant's sliding_window and the target's window in use, draft.h), one
 * more than the target's own ring of its window keeps:
 * so the drafter reads its own copy of the source layer's sliding keys and
 * values, a ring of W + 1 slots that every step, prompt chunk and accept
 * writes beside the target's (g->sk, g->sv), shared by the target's drafters.
 * That copy starts with the first drafter: a sequence begun before it
 * misses what the target's ring had already dropped, until the window
 * passes. */

struct dlayer {
	struct dlin q, o, gu, down;          /* q [heads d][hidden]; o [hidden][heads d]; gate|up; down */
	float *in_norm, *post_attn, *pre_ffw, *post_ffw, *q_norm, *bq, *bo;
	float scalar;
	int type, d, inter;
};

struct fg_g4_gpu_draft {
	struct fg_g4_gpu *g;           /* borrowed: the target */
	const struct fg_g4_model *a;   /* borrowed: the assistant */
	struct dlayer *L;
	struct dlin pre, post, head, cent; /* pre_projection, post_projection, lm_head, centroids (ordered) */
	float *final_norm, *inv[2];
	float *cat;                    /* [2 backbone]: target embedding of the token | h */
	float *x, *xa, *q, *att, *o, *gu; /* [hidden] x2, [heads max d] x2, [hidden], [2 max inter] */
	float *logits;                 /* [vocab], or with ordered_emb the selected tokens' [top_k per] */
	float *cz;                     /* [n_centroids] (ordered) */
	int32_t *ids, *order;          /* selected tokens [top_k per]; token_ordering [vocab] (ordered) */
	int32_t *toks;                 /* [1 + FG_DRAFT_MAX_K]: last, then the drafts */
	int32_t *pos;                  /* [2]: pos (RoPE), pos - 1 (the attention's range) */
	const float *kc[2], *vc[2];    /* what each layer type reads, [kv_heads][cap][d] */
	int cap[2], kvh[2];
	/* a round of k drafts, in the two forms of run_forms ([1]: short
	 * attention launches, for rounds attending below the target's short_keys) */
	struct fg_kgraph *graph[FG_DRAFT_MAX_K + 1][2];
	int ran[FG_DRAFT_MAX_K + 1];
	int shadow;                    /* 1: this drafter reads (and holds a reference to) g->sk, g->sv */
};

void fg_g4_gpu_draft_free(struct fg_g4_gpu_draft *d)
{
	struct fg_g4_gpu *g;
	int i;

	if (!d)
		return;
	g = d->g;
	for (i = 0; d->L && i < d->a->cfg.n_layers; i++) {
		struct dlayer *L = &d->L[i];
		float *fs[] = {L->in_norm, L->post_attn, L->pre_ffw, L->post_ffw, L->q_norm, L->bq, L->bo};

		dlin_free(g, &L->q), dlin_free(g, &L->o), dlin_free(g, &L->gu), dlin_free(g, &L->down);
		for (size_t j = 0; j < sizeof(fs) / sizeof(fs[0]); j++)
			fg_kmem_free(g->ctx, fs[j]);
	}
	free(d->L);
	dlin_free(g, &d->pre), dlin_free(g, &d->post), dlin_free(g, &d->head), dlin_free(g, &d->cent);
	{
		void *ds[] = {d->final_norm, d->inv[0], d->inv[1], d->cat,  d->x,     d->xa,    d->q,
			      d->att,        d->o,      d->gu,     d->logits, d->cz,   d->ids,   d->order,
			      d->toks,       d->pos};

		for (size_t j = 0; j < sizeof(ds) / sizeof(ds[0]); j++)
			fg_kmem_free(g->ctx, ds[j]);
	}
	for (i = 0; i <= FG_DRAFT_MAX_K; i++)
		fg_kgraph_free(d->graph[i][0]), fg_kgraph_free(d->graph[i][1]);
	if (d->shadow && !--g->sref) { /* the sliding copy goes with its last drafter: steps stop writing it */
		fg_kmem_free(g->ctx, g->sk), fg_kmem_free(g->ctx, g->sv);
		g->sk = g->sv = NULL;
	}
	free(d);
}

/* the centroid top-k an assistant config or an override may ask for
 * (fg_g4_set_centroid_top_k) is what fg_k_centroid_select takes */
_Static_assert(FG_G4_CENTROID_MAX_K == FG_CENTROID_MAX_K, "centroid top-k bounds differ");

/* What fg_draft_cpu_new checks, for assistant a on target t, plus what this
 * path cannot run. */
static int draft_check(const struct fg_g4_model *a, const struct fg_g4_model *t, struct fg_err *err)
{
	const struct fg_g4_config *ac = &a->cfg, *tc = &t->cfg;
	int i;

	if (!ac->assistant)
		return fg_err_set(err, FG_EINVAL, "the drafter's config is not a gemma4_assistant");
	if (ac->backbone != tc->hidden)
		return fg_err_set(err, FG_EINVAL, "assistant backbone_hidden_size %d, target hidden_size %d", ac->backbone,
				  tc->hidden);
	if (ac->vocab != tc->vocab)
		return fg_err_set(err, FG_EINVAL, "assistant vocabulary %d, target %d", ac->vocab, tc->vocab);
	if (ac->ple_dim || ac->n_experts)
		return fg_err_set(err, FG_EUNSUPPORTED, "cuda drafter: per-layer inputs or experts in the assistant");
	if (ac->ordered_emb &&
	    (ac->n_centroids < 1 || ac->n_centroids > 65536 || ac->centroid_top_k < 1 || ac->centroid_top_k > 64 ||
	     ac->centroid_top_k > ac->n_centroids || ac->vocab % ac->n_centroids || !a->ordering ||
	     a->head.fmt == FG_W_INT4))
		return fg_err_set(err, FG_EUNSUPPORTED,
				  "cuda drafter: ordered head with %d centroids, top %d, vocabulary %d (want top 1..64, "
				  "at most 65536 centroids dividing the vocabulary, a bf16/f16/f32 head)",
				  ac->n_centroids, ac->centroid_top_k, ac->vocab);
	for (i = 0; i < ac->n_layers; i++) {
		const struct fg_g4_layer *L = &a->layers[i];
		int src = fg_g4_type_source(tc, L->type);

		if (src < 0)
			return fg_err_set(err, FG_EINVAL, "assistant layer %d: the target has no %s layer to read", i,
					  L->type == FG_G4_FULL ? "full" : "sliding");
		if (t->layers[src].head_dim != L->head_dim || t->layers[src].kv_heads != L->kv_heads)
			return fg_err_set(err, FG_EINVAL,
					  "assistant layer %d: head_dim %d, %d kv heads; the target's layer %d: %d, %d", i,
					  L->head_dim, L->kv_heads, src, t->layers[src].head_dim, t->layers[src].kv_heads);
		if (L->head_dim > 512 || ac->n_heads % L->kv_heads)
			return fg_err_set(err, FG_EUNSUPPORTED, "cuda drafter: layer %d head_dim %d, %d heads over %d",
					  i, L->head_dim, ac->n_heads, L->kv_heads);
	}
	return 0;
}

int fg_g4_gpu_draft_new(struct fg_g4_gpu_draft **out, struct fg_g4_gpu *g, const struct fg_g4_model *a,
			struct fg_err *err)
{
	const struct fg_g4_config *ac = &a->cfg, *tc = &g->m->cfg;
	struct fg_g4_gpu_draft *d;
	size_t Ha = (size_t)ac->hidden, B = (size_t)ac->backbone, maxd = 0, maxi = 0, nsel;
	int rc, i, ty, used[2] = {0, 0};
	float *inv = NULL;

	*out = NULL;
	if ((rc = draft_check(a, g->m, err)))
		return rc;
	for (i = 0; i < ac->n_layers; i++)
		used[a->layers[i].type] = 1;
	if (!(d = calloc(1, sizeof(*d))) || !(d->L = calloc((size_t)ac->n_layers, sizeof(*d->L))) ||
	    !(inv = malloc(sizeof(float) * (size_t)(ac->head_dim > ac->global_head_dim ? ac->head_dim
											: ac->global_head_dim)))) {
		free(d ? d->L : NULL);
		free(d);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	d->g = g;
	d->a = a;
	for (i = 0; i < ac->n_layers; i++) {
		maxd = maxd > (size_t)a->layers[i].head_dim ? maxd : (size_t)a->layers[i].head_dim;
		maxi = maxi > (size_t)a->layers[i].inter ? maxi : (size_t)a->layers[i].inter;
	}
	nsel = ac->ordered_emb ? (size_t)ac->centroid_top_k * (size_t)(ac->vocab / ac->n_centroids) : (size_t)ac->vocab;
	{
		const struct fg_lin *pre = &a->pre_proj, *post = &a->post_proj, *head = &a->head, *cent = &a->centroids;

		if ((rc = dlin_new(g, &d->pre, &pre, 1, "assistant pre_projection", err)) ||
		    (rc = dlin_new(g, &d->post, &post, 1, "assistant post_projection", err)) ||
		    (rc = dlin_new(g, &d->head, &head, 1, "assistant lm_head", err)) ||
		    (ac->ordered_emb && (rc = dlin_new(g, &d->cent, &cent, 1, "assistant centroids", err))))
			goto fail;
	}
	for (ty = 0; ty < 2; ty++) {
		int hd = ty == FG_G4_FULL ? ac->global_head_dim : ac->head_dim;

		fg_g4_rope_table(inv, &ac->rope[ty], hd);
		if ((rc = up_floats(g, &d->inv[ty], inv, (size_t)hd / 2, err)))
			goto fail;
	}
	for (i = 0; i < ac->n_layers; i++) {
		const struct fg_g4_layer *ml = &a->layers[i];
		struct dlayer *L = &d->L[i];
		const struct fg_lin *q = &ml->q, *o = &ml->o, *gu[2] = {&ml->gate, &ml->up}, *down = &ml->down;
		char what[64];

		snprintf(what, sizeof(what), "assistant layer %d", i);
		L->type = ml->type;
		L->d = ml->head_dim;
		L->inter = ml->inter;
		L->scalar = ml->scalar;
		if ((rc = dlin_new(g, &L->q, &q, 1, what, err)) || (rc = dlin_new(g, &L->o, &o, 1, what, err)) ||
		    (rc = dlin_new(g, &L->gu, gu, 2, what, err)) || (rc = dlin_new(g, &L->down, &down, 1, what, err)) ||
		    (rc = up_floats(g, &L->in_norm, ml->in_norm, Ha, err)) ||
		    (rc = up_floats(g, &L->post_attn, ml->post_attn_norm, Ha, err)) ||
		    (rc = up_floats(g, &L->pre_ffw, ml->pre_ffw_norm, Ha, err)) ||
		    (rc = up_floats(g, &L->post_ffw, ml->post_ffw_norm, Ha, err)) ||
		    (rc = up_norm_scaled(g, &L->q_norm, ml->q_norm, (size_t)L->d, (float)ac->rope[ml->type].attention,
					 err)) ||
		    (rc = up_floats(g, &L->bq, ml->bq, (size_t)ml->q.rows, err)) ||
		    (rc = up_floats(g, &L->bo, ml->bo, Ha, err)))
			goto fail;
	}
	if ((rc = up_floats(g, &d->final_norm, a->final_norm, Ha, err)) || (rc = zeros(g, &d->cat, 2 * B, err)) ||
	    (rc = zeros(g, &d->x, Ha, err)) || (rc = zeros(g, &d->xa, Ha, err)) ||
	    (rc = zeros(g, &d->q, (size_t)ac->n_heads * maxd, err)) ||
	    (rc = zeros(g, &d->att, (size_t)ac->n_heads * maxd, err)) || (rc = zeros(g, &d->o, Ha, err)) ||
	    (rc = zeros(g, &d->gu, 2 * maxi, err)) || (rc = zeros(g, &d->logits, nsel, err)) ||
	    (rc = fg_kmem_alloc(g->ctx, (void **)&d->toks, sizeof(int32_t) * (FG_DRAFT_MAX_K + 1), err)) ||
	    (rc = fg_kmem_fill(g->ctx, d->toks, 0, sizeof(int32_t) * (FG_DRAFT_MAX_K + 1), err)) ||
	    (rc = fg_kmem_alloc(g->ctx, (void **)&d->pos, sizeof(int32_t) * 2, err)))
		goto fail;
	if (ac->ordered_emb &&
	    ((rc = zeros(g, &d->cz, (size_t)ac->n_centroids, err)) ||
	     (rc = fg_kmem_alloc(g->ctx, (void **)&d->ids, sizeof(int32_t) * nsel, err)) ||
	     (rc = fg_kmem_alloc(g->ctx, (void **)&d->order, sizeof(int32_t) * (size_t)ac->vocab, err)) ||
	     (rc = fg_kmem_upload(g->ctx, d->order, a->ordering, sizeof(int32_t) * (size_t)ac->vocab, err))))
		goto fail;
	/* the caches each layer type reads */
	for (ty = 0; ty < 2; ty++) {
		int src = fg_g4_type_source(tc, ty);
		const struct glayer *S;

		if (src < 0 || !used[ty])
			continue;
		S = &g->L[src];
		d->kvh[ty] = g->m->layers[src].kv_heads;
		d->kc[ty] = S->kc, d->vc[ty] = S->vc, d->cap[ty] = S->cap;
		if (ty == FG_G4_SLIDING) {
			/* W + 1 slots (at most the sequence size), unless the ring is
			 * that already; W the smaller of the assistant's window and the
			 * target's in use, as fg_draft_cpu_propose */
			int w = ac->sliding_window < g->window ? ac->sliding_window : g->window;
			int w1 = w + 1 < g->max_seq ? w + 1 : g->max_seq;
			size_t n = (size_t)d->kvh[ty] * (size_t)w1 * (size_t)g->m->layers[src].head_dim;

			if (w1 == S->cap)
				continue;
			if (g->sk && g->scap != w1) {
				rc = fg_err_set(err, FG_EINVAL,
						"another drafter of this target reads %d sliding positions, this one %d",
						g->scap, w1);
				goto fail;
			}
			if (!g->sk) { /* else another drafter's copy, kept up to date already */
				if ((rc = zeros(g, &g->sk, n, err)) || (rc = zeros(g, &g->sv, n, err))) {
					fg_kmem_free(g->ctx, g->sk), fg_kmem_free(g->ctx, g->sv);
					g->sk = g->sv = NULL;
					goto fail;
				}
				g->scap = w1;
				g->slayer = src;
			}
			g->sref++;
			d->shadow = 1;
			d->kc[ty] = g->sk, d->vc[ty] = g->sv, d->cap[ty] = w1;
		}
	}
	free(inv);
	*out = d;
	return 0;
fail:
	free(inv);
	fg_err_wrap(err, "cuda drafter");
	fg_g4_gpu_draft_free(d);
	return rc;
}

/* A round of k drafts, launches only (see above): toks[0] and pos[] are set. */
static int draft_forward(struct fg_g4_gpu_draft *d, int k, struct fg_err *err)
{
	struct fg_g4_gpu *g = d->g;
	const struct fg_g4_config *ac = &d->a->cfg;
	struct fg_kctx *kc = g->ctx;
	int B = ac->backbone, H = ac->hidden, nh = ac->n_heads, j, li;
	int per = ac->ordered_emb ? ac->vocab / ac->n_centroids : 0, nsel = ac->ordered_emb ? ac->centroid_top_k * per : 0;
	size_t hb = sizeof(float) * (size_t)B;
	float eps = ac->eps, escale = (float)sqrt((double)g->m->cfg.hidden);

	/* h_1: the target's final-normed state of pos - 1 */
	if (fg_kmem_copy2d(kc, d->cat + B, hb, g->a, hb, hb, 1, err))
		return err->code;
	for (j = 0; j < k; j++) {
		const int32_t *tok = d->toks + j;

		if ((g->emb_fmt == FG_W_BF16 ? fg_k_embed(kc, d->cat, g->emb, tok, B, escale, err)
					     : fg_k_embed_f32(kc, d->cat, g->emb, tok, B, escale, err)) ||
		    mv(g, d->x, &d->pre, d->cat, err) || fg_k_rmsnorm(kc, d->xa, d->x, d->L[0].in_norm, 1, H, eps, err))
			return err->code;
		for (li = 0; li < ac->n_layers; li++) {
			const struct dlayer *L = &d->L[li];
			int t = L->type;
			const float *next = li + 1 < ac->n_layers ? d->L[li + 1].in_norm : d->final_norm;

			if (mv(g, d->q, &L->q, d->xa, err) || (L->bq && fg_k_add_bias(kc, d->q, L->bq, L->q.rows, err)) ||
			    fg_k_qkv_post(kc, d->q, nh, 0, L->d, L->q_norm, NULL, d->inv[t], d->pos, NULL, NULL, 1, eps,
					  err) ||
			    fg_k_attn_decode(kc, d->att, d->q, d->kc[t], d->vc[t], nh, d->kvh[t], L->d, d->cap[t],
					     d->pos + 1, 1.0f, err) ||
			    mv(g, d->o, &L->o, d->att, err) || (L->bo && fg_k_add_bias(kc, d->o, L->bo, H, err)) ||
			    fg_k_residual_norm(kc, d->x, d->o, L->post_attn, 1.0f, d->xa, L->pre_ffw, H, eps, err) ||
			    mv(g, d->gu, &L->gu, d->xa, err) ||
			    mv_geglu(g, d->o, &L->down, d->gu, d->gu + L->inter, L->inter, err) ||
			    fg_k_residual_norm(kc, d->x, d->o, L->post_ffw, L->scalar, d->xa, next, H, eps, err))
				return err->code;
		}
		/* d->xa: the final-normed state y; the head's argmax is the next token */
		if (ac->ordered_emb) {
			if (mv(g, d->cz, &d->cent, d->xa, err) ||
			    fg_k_centroid_select(kc, d->ids, d->cz, ac->n_centroids, ac->centroid_top_k, d->order, per,
						 err) ||
			    fg_k_gather_matvec(kc, d->logits, d->head.d, d->head.fmt == FG_W_BF16, d->ids, nsel, d->xa, H,
					       err) ||
			    fg_k_softcap_argmax(kc, d->toks + j + 1, d->logits, d->ids, nsel, 0.0f, err))
				return err->code;
		} else if (mv(g, d->logits, &d->head, d->xa, err) ||
			   fg_k_softcap_argmax(kc, d->toks + j + 1, d->logits, NULL, ac->vocab, 0.0f, err)) {
			return err->code;
		}
		if (j + 1 < k && mv(g, d->cat + B, &d->post, d->xa, err)) /* h_{j+1} */
			return err->code;
	}
	return 0;
}

/* draft_forward() for run_forms: arg a struct draft_arg */
struct draft_arg {
	struct fg_g4_gpu_draft *d;
	int k;
};

static int draft_forward_arg(void *arg, struct fg_err *err)
{
	const struct draft_arg *a = arg;

	return draft_forward(a->d, a->k, err);
}

int fg_g4_gpu_draft(struct fg_g4_gpu_draft *d, int32_t last, int pos, int k, int32_t *out, struct fg_err *err)
{
	struct fg_g4_gpu *g = d->g;
	const struct fg_g4_config *tc = &g->m->cfg;
	int32_t pp[2] = {pos, pos - 1}, id;
	int rc = 0, i;
	struct draft_arg da = {d, k};

	if (k < 1 || k > FG_DRAFT_MAX_K)
		return fg_err_set(err, FG_EINVAL, "drafts per round %d: out of the range 1..%d", k, FG_DRAFT_MAX_K);
	if (pos < 1 || pos >= g->max_seq)
		return fg_err_set(err, FG_EINVAL, "draft position %d: want 1..%d", pos, g->max_seq - 1);
	if (last < 0 || last >= tc->vocab)
		return fg_err_set(err, FG_EINVAL, "draft token %d is not below the vocabulary size %d", (int)last,
				  tc->vocab);
	id = fg_g4_input_id(tc, last); /* as fg_draft_cpu_propose embeds it */
	if ((rc = fg_kmem_upload(g->ctx, d->pos, pp, sizeof(pp), err)) ||
	    (rc = fg_kmem_upload(g->ctx, d->toks, &id, sizeof(id), err)))
		return fg_err_wrap(err, "cuda draft at position %d", pos);
	/* the round attends at position pos - 1 */
	rc = run_forms(g, d->graph[k], d->ran[k], pos - 1 < g->short_keys, draft_forward_arg, &da, "a round of %d drafts",
		       k, err);
	if (!rc && !(rc = fg_kctx_sync(g->ctx, err)))
		rc = fg_kmem_download(g->ctx, out, d->toks + 1, sizeof(int32_t) * (size_t)k, err);
	if (rc)
		return fg_err_wrap(err, "cuda draft at position %d", pos);
	for (i = 0; i < k; i++)
		if (out[i] < 0)
			out[i] = 0; /* every logit NaN */
	d->ran[k] = 1;
	return 0;
}

int fg_g4_gpu_draft_logits(struct fg_g4_gpu_draft *d, float *out, struct fg_err *err)
{
	const struct fg_g4_config *ac = &d->a->cfg;
	struct fg_kctx *kc = d->g->ctx;
	int nsel, i, rc;
	float *sel, mn = INFINITY;
	int32_t *ids;

	if (!ac->ordered_emb)
		return fg_kmem_download(kc, out, d->logits, sizeof(float) * (size_t)ac->vocab, err);
	nsel = ac->centroid_top_k * (ac->vocab / ac->n_centroids);
	sel = malloc(sizeof(float) * (size_t)nsel);
	ids = malloc(sizeof(int32_t) * (size_t)nsel);
	if (!sel || !ids) {
		free(sel), free(ids);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!(rc = fg_kmem_download(kc, sel, d->logits, sizeof(float) * (size_t)nsel, err)) &&
	    !(rc = fg_kmem_download(kc, ids, d->ids, sizeof(int32_t) * (size_t)nsel, err))) {
		for (i = 0; i < nsel; i++)
			mn = sel[i] < mn ? sel[i] : mn;
		for (i = 0; i < ac->vocab; i++)
			out[i] = mn - 1.0f;
		for (i = 0; i < nsel; i++)
			if (ids[i] >= 0 && ids[i] < ac->vocab)
				out[ids[i]] = sel[i];
	}
	free(sel), free(ids);
	return rc;
}
