/* engine.c - the Gemma 4 text decoder on the CPU (engine.h): KV cache,
 * prefill and decode in chunks of up to CHUNK tokens, greedy generation.
 *
 * The math is transformers' Gemma4ForCausalLM in fp32 (docs/engine.md has
 * it step by step). Work is split across the pool's workers by output row
 * (matmuls) or by (token, head) pair (attention); every output element is
 * computed by the same code whichever worker runs it, so results are
 * bit-identical for any thread count. A token's numbers also do not depend
 * on how the sequence was chunked: prefill and decode agree bit for bit.
 *
 * KV cache: a layer that owns K/V keeps them per position, head by head,
 * fp32 [cap][kv_heads][d]. Full layers keep every position (cap = max_seq);
 * sliding layers keep a ring of window + CHUNK - 1 slots (position p in slot
 * p % cap), enough for a whole chunk's queries to still see their window.
 * KV-shared layers own no cache: they read their source layer's. */
#include "engine/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cpu/ops.h"
#include "engine/cpu/pool.h"
#include "engine/cuda.h"
#include "engine/draft.h"
#include "engine/model.h"
#include "engine/rope.h"
#include "kernels/fg_kernels.h"

#define CHUNK 16
#define DEFAULT_MAX_SEQ 8192

struct kv {
	float *k, *v; /* [cap][kv_heads][d]; NULL for shared layers */
	int cap;
};

/* Drafting on the CUDA path is measured against plain steps in epochs of
 * SPEC_EPOCH tokens, the slower way re-measured every SPEC_PROBE epochs. */
#define SPEC_EPOCH 16
#define SPEC_PROBE 32
struct fg_engine_adapt {
	int adapt;        /* 0: FG_SPEC_ADAPT=0, draft every round */
	int drafting;     /* the way the current epoch runs: 1 draft, 0 plain steps */
	double rate[2];   /* tokens per second measured, [0] plain, [1] drafting; 0 = none yet */
	double t0;        /* when the current epoch's time was last added up */
	double elapsed;   /* its decoding seconds so far (requests' gaps left out) */
	int tokens;       /* its tokens so far */
	int since_probe;
	int warm;         /* the first epoch (graph captures) is over */
};

struct fg_engine {
	struct fg_g4_model *m;
	struct fg_pool *pool;
	int window, max_seq, pos;
	struct kv *kv;        /* [n_layers] */
	float *inv[2];        /* RoPE inverse frequencies by layer type, [d/2] */
	/* chunk scratch, T <= CHUNK tokens */
	float *x, *a, *o, *t1;   /* [T][hidden] */
	float *q, *att;          /* [T][heads * max d] */
	float *k, *v;            /* [T][kv_heads * max d] */
	float *g, *u;            /* [T][max inter] */
	float *ple;              /* [T][layers * ple] */
	float *pg;               /* [T][ple] */
	float *logits;           /* [vocab]: the last step's, for generate */
	float *hlast;            /* [hidden]: the final-normed state of the newest position with logits */
	int has_hlast;
	float *hk;               /* [CHUNK][n_keep]: a pruned head's logits */
	int nw;                  /* workers */
	float **row_buf;         /* [nw][max cols] */
	float **scores;          /* [nw][max_seq] */
	const float ***kp, ***vp; /* [nw][max_seq] */
	int n_eos_cache;
	struct fg_g4_gpu *gpu;   /* FG_DEVICE_CUDA: the decode step on the GPU (engine/cuda.c) */
	struct moe_scratch *ms;  /* enable_moe_block only */
	/* speculative decoding (fg_engine_set_drafter) */
	struct fg_g4_model *dm;          /* the assistant */
	struct fg_draft_cpu *dcpu;       /* its CPU side (CPU path) */
	struct fg_g4_gpu_draft *dgpu;    /* its GPU side (CUDA path) */
	int dk;                          /* drafts per round; 0 = no drafter */
	struct fg_engine_spec_stats ss;
	struct fg_engine_adapt sa;       /* CUDA path: drafting or plain steps, measured */
};

/* Chunk scratch of the mixture-of-experts block (T <= CHUNK tokens). */
struct moe_scratch {
	float *rin, *h2, *xs, *ys; /* [T][hidden]: router input, experts' sum, an expert's inputs and outputs */
	float *logits;             /* [T][E] */
	float *gs, *us;            /* [T][moe_inter] */
	int *idx;                  /* [T][top_k] experts chosen, best first */
	float *w;                  /* [T][top_k] their weights */
	int *rows;                 /* [T] tokens routed to the expert at hand */
	float *rw;                 /* [T] and their weights */
};

/* ---- parallel helpers --------------------------------------------------- */

struct mm_job {
	struct fg_engine *e;
	const struct fg_lin *w;
	const float *x;
	int T;
	float *y;
};

static void mm_fn(void *ctx, int b, int end, int worker)
{
	struct mm_job *j = ctx;

	fg_cpu_matmul_rows(j->w, j->x, j->T, j->y, b, end, j->e->row_buf[worker]);
}

/* y [T][w->rows] = x [T][w->cols] W^T */
static void matmul(struct fg_engine *e, const struct fg_lin *w, const float *x, int T, float *y)
{
	struct mm_job j = { e, w, x, T, y };

	fg_pool_run(e->pool, w->rows, mm_fn, &j);
}

struct att_job {
	struct fg_engine *e;
	const struct fg_g4_layer *L;
	const struct kv *c;
	int T, p0;
};

static void att_fn(void *ctx, int b, int end, int worker)
{
	struct att_job *j = ctx;
	struct fg_engine *e = j->e;
	const struct fg_g4_config *cfg = &e->m->cfg;
	int d = j->L->head_dim, nh = cfg->n_heads, nkv = j->L->kv_heads, group = nh / nkv;
	int item;

	for (item = b; item < end; item++) {
		int t = item / nh, h = item % nh, kvh = h / group;
		int p = j->p0 + t, lo = 0, n, s;

		if (j->L->type == FG_G4_SLIDING && p - e->window + 1 > 0)
			lo = p - e->window + 1;
		n = p - lo + 1;
		for (s = 0; s < n; s++) {
			size_t slot = (size_t)((lo + s) % j->c->cap);
			size_t off = (slot * (size_t)nkv + (size_t)kvh) * (size_t)d;

			e->kp[worker][s] = j->c->k + off;
			e->vp[worker][s] = j->c->v + off;
		}
		fg_cpu_attend(e->att + ((size_t)t * (size_t)nh + (size_t)h) * (size_t)d,
			      e->q + ((size_t)t * (size_t)nh + (size_t)h) * (size_t)d, d, e->kp[worker], e->vp[worker],
			      n, e->scores[worker]);
	}
}

/* ---- load / free ------------------------------------------------------- */

static void *alloc_f(size_t n, int *bad);

static void moe_scratch_free(struct moe_scratch *ms)
{
	if (!ms)
		return;
	free(ms->rin);
	free(ms->h2);
	free(ms->xs);
	free(ms->ys);
	free(ms->logits);
	free(ms->gs);
	free(ms->us);
	free(ms->idx);
	free(ms->w);
	free(ms->rows);
	free(ms->rw);
	free(ms);
}

static struct moe_scratch *moe_scratch_new(const struct fg_g4_config *c)
{
	struct moe_scratch *ms = calloc(1, sizeof(*ms));
	size_t H = (size_t)c->hidden, K = (size_t)c->top_k;
	int bad = !ms;

	if (bad)
		return NULL;
	ms->rin = alloc_f(CHUNK * H, &bad);
	ms->h2 = alloc_f(CHUNK * H, &bad);
	ms->xs = alloc_f(CHUNK * H, &bad);
	ms->ys = alloc_f(CHUNK * H, &bad);
	ms->logits = alloc_f(CHUNK * (size_t)c->n_experts, &bad);
	ms->gs = alloc_f(CHUNK * (size_t)c->moe_inter, &bad);
	ms->us = alloc_f(CHUNK * (size_t)c->moe_inter, &bad);
	ms->w = alloc_f(CHUNK * K, &bad);
	ms->rw = alloc_f(CHUNK, &bad);
	ms->idx = calloc(CHUNK * K, sizeof(int));
	ms->rows = calloc(CHUNK, sizeof(int));
	if (bad || !ms->idx || !ms->rows) {
		moe_scratch_free(ms);
		return NULL;
	}
	return ms;
}

static int max_i(int a, int b)
{
	return a > b ? a : b;
}

static void *alloc_f(size_t n, int *bad)
{
	void *p = calloc(n ? n : 1, sizeof(float));

	if (!p)
		*bad = 1;
	return p;
}

int fg_engine_load(struct fg_engine **out, const char *model_dir, const struct fg_engine_opts *opts,
		   struct fg_err *err)
{
	struct fg_engine_opts o = { 0, 0, 0, FG_DEVICE_CPU };
	struct fg_engine *e;
	const struct fg_g4_config *c;
	int rc, i, bad = 0, maxd, maxi = 0, maxcols, maxkv;
	size_t H;

	*out = NULL;
	if (opts)
		o = *opts;
	if (o.device != FG_DEVICE_CPU && o.device != FG_DEVICE_CUDA)
		return fg_err_set(err, FG_EUNSUPPORTED, "device %d: not a device this engine knows", o.device);
	if (o.sliding_window < 0 || o.max_seq < 0 || o.threads < 0 || o.threads > 1024)
		return fg_err_set(err, FG_EINVAL, "engine options out of range");
	if (!(e = calloc(1, sizeof(*e))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	/* settle the SIMD choice (CPU, FG_NO_AVX2) here, before worker threads read it */
	fg_cpu_set_simd(fg_cpu_set_simd(1));
	if ((rc = fg_g4_model_load(&e->m, model_dir, err)))
		goto fail;
	c = &e->m->cfg;
	if (c->assistant) { /* its layers own no KV: it only drafts for a target (engine/draft.h) */
		rc = fg_err_set(err, FG_EINVAL, "%s is a gemma4_assistant drafter; use it as a drafter (--drafter)",
				model_dir);
		goto fail;
	}
	e->window = o.sliding_window ? o.sliding_window : c->sliding_window;
	e->max_seq = o.max_seq ? o.max_seq : (c->max_position < DEFAULT_MAX_SEQ ? c->max_position : DEFAULT_MAX_SEQ);
	if (e->max_seq > c->max_position) {
		rc = fg_err_set(err, FG_EINVAL, "max sequence %d exceeds the model's max_position_embeddings %d",
				e->max_seq, c->max_position);
		goto fail;
	}
	if ((rc = fg_pool_new(&e->pool, o.threads ? o.threads : 1, err)))
		goto fail;
	e->nw = fg_pool_size(e->pool);
	maxd = max_i(c->head_dim, c->global_head_dim);
	maxkv = max_i(c->n_kv_heads * c->head_dim, c->global_kv_heads * c->global_head_dim); /* floats per token */
	for (i = 0; i < c->n_layers; i++)
		maxi = max_i(maxi, fg_g4_layer_inter(c, i));
	maxcols = max_i(max_i(c->hidden, c->n_heads * maxd), max_i(maxi, max_i(c->ple_dim, c->n_layers * c->ple_dim)));
	maxcols = max_i(maxcols, c->moe_inter); /* an expert's down_proj */
	if (c->n_experts && !(e->ms = moe_scratch_new(c)))
		bad = 1;
	H = (size_t)c->hidden;
	e->x = alloc_f(CHUNK * H, &bad);
	e->a = alloc_f(CHUNK * H, &bad);
	e->o = alloc_f(CHUNK * H, &bad);
	e->t1 = alloc_f(CHUNK * H, &bad);
	e->q = alloc_f((size_t)CHUNK * (size_t)(c->n_heads * maxd), &bad);
	e->att = alloc_f((size_t)CHUNK * (size_t)(c->n_heads * maxd), &bad);
	e->k = alloc_f((size_t)CHUNK * (size_t)maxkv, &bad);
	e->v = alloc_f((size_t)CHUNK * (size_t)maxkv, &bad);
	e->g = alloc_f((size_t)CHUNK * (size_t)maxi, &bad);
	e->u = alloc_f((size_t)CHUNK * (size_t)maxi, &bad);
	e->ple = alloc_f((size_t)CHUNK * (size_t)(c->n_layers * c->ple_dim), &bad);
	e->pg = alloc_f((size_t)CHUNK * (size_t)c->ple_dim, &bad);
	e->logits = alloc_f((size_t)c->vocab, &bad);
	e->hlast = alloc_f(H, &bad);
	e->hk = alloc_f((size_t)CHUNK * (size_t)e->m->n_keep, &bad);
	e->inv[FG_G4_SLIDING] = alloc_f((size_t)c->head_dim / 2, &bad);
	e->inv[FG_G4_FULL] = alloc_f((size_t)c->global_head_dim / 2, &bad);
	e->row_buf = calloc((size_t)e->nw, sizeof(*e->row_buf));
	e->scores = calloc((size_t)e->nw, sizeof(*e->scores));
	e->kp = calloc((size_t)e->nw, sizeof(*e->kp));
	e->vp = calloc((size_t)e->nw, sizeof(*e->vp));
	e->kv = calloc((size_t)c->n_layers, sizeof(*e->kv));
	if (bad || !e->row_buf || !e->scores || !e->kp || !e->vp || !e->kv) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto fail;
	}
	for (i = 0; i < e->nw; i++) {
		e->row_buf[i] = alloc_f((size_t)maxcols, &bad);
		e->scores[i] = alloc_f((size_t)e->max_seq, &bad);
		e->kp[i] = calloc((size_t)e->max_seq, sizeof(float *));
		e->vp[i] = calloc((size_t)e->max_seq, sizeof(float *));
		if (!e->kp[i] || !e->vp[i])
			bad = 1;
	}
	for (i = 0; i < c->n_layers && !bad; i++) {
		const struct fg_g4_layer *L = &e->m->layers[i];
		size_t per;

		if (L->kv_src != i)
			continue;
		e->kv[i].cap = e->max_seq;
		if (L->type == FG_G4_SLIDING && e->window + CHUNK - 1 < e->max_seq)
			e->kv[i].cap = e->window + CHUNK - 1;
		per = (size_t)e->kv[i].cap * (size_t)L->kv_heads * (size_t)L->head_dim;
		e->kv[i].k = alloc_f(per, &bad);
		e->kv[i].v = alloc_f(per, &bad);
	}
	if (bad) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory for the KV cache (max sequence %d)", e->max_seq);
		goto fail;
	}
	for (i = 0; i < 2; i++)
		fg_g4_rope_table(e->inv[i], &c->rope[i], i == FG_G4_FULL ? c->global_head_dim : c->head_dim);
	if (o.device == FG_DEVICE_CUDA &&
	    (rc = fg_g4_gpu_new(&e->gpu, e->m, (const float *const *)e->inv, e->window, e->max_seq, err)))
		goto fail;
	*out = e;
	return 0;
fail:
	fg_engine_free(e);
	return rc;
}

void fg_engine_free(struct fg_engine *e)
{
	int i;

	if (!e)
		return;
	fg_draft_cpu_free(e->dcpu);
	fg_g4_gpu_draft_free(e->dgpu); /* before the GPU it reads */
	fg_g4_model_free(e->dm);
	fg_g4_gpu_free(e->gpu);
	if (e->kv && e->m)
		for (i = 0; i < e->m->cfg.n_layers; i++) {
			free(e->kv[i].k);
			free(e->kv[i].v);
		}
	free(e->kv);
	for (i = 0; i < e->nw; i++) {
		if (e->row_buf)
			free(e->row_buf[i]);
		if (e->scores)
			free(e->scores[i]);
		if (e->kp)
			free((void *)e->kp[i]);
		if (e->vp)
			free((void *)e->vp[i]);
	}
	free(e->row_buf);
	free(e->scores);
	free(e->kp);
	free(e->vp);
	free(e->x);
	free(e->a);
	free(e->o);
	free(e->t1);
	free(e->q);
	free(e->att);
	free(e->k);
	free(e->v);
	free(e->g);
	free(e->u);
	free(e->ple);
	free(e->pg);
	free(e->logits);
	free(e->hlast);
	free(e->hk);
	free(e->inv[0]);
	free(e->inv[1]);
	moe_scratch_free(e->ms);
	fg_pool_free(e->pool);
	fg_g4_model_free(e->m);
	free(e);
}

/* ---- accessors ---------------------------------------------------------- */

int fg_engine_vocab_size(const struct fg_engine *e) { return e->m->cfg.vocab; }
int fg_engine_max_seq(const struct fg_engine *e) { return e->max_seq; }
int fg_engine_max_position(const struct fg_engine *e) { return e->m->cfg.max_position; }
int fg_engine_sliding_window(const struct fg_engine *e) { return e->window; }
int fg_engine_bos_id(const struct fg_engine *e) { return e->m->cfg.bos; }
int fg_engine_pos(const struct fg_engine *e) { return e->pos; }
int fg_engine_threads(const struct fg_engine *e) { return e->nw; }
const char *fg_engine_weight_format(const struct fg_engine *e) { return e->m->format; }
const struct fg_g4_model *fg_engine_model(const struct fg_engine *e) { return e->m; }
const char *fg_engine_device(const struct fg_engine *e) { return e->gpu ? fg_g4_gpu_device(e->gpu) : "cpu"; }
int fg_engine_prefill_chunk(const struct fg_engine *e) { return e->gpu ? fg_g4_gpu_chunk(e->gpu) : 0; }

long long fg_engine_chained_steps(const struct fg_engine *e) { return e->gpu ? fg_g4_gpu_chained(e->gpu) : 0; }

int fg_engine_gpu_info(const struct fg_engine *e, struct fg_kdevice *out, struct fg_err *err)
{
	if (!e->gpu)
		return fg_err_set(err, FG_EUNSUPPORTED, "the engine runs on the CPU");
	return fg_g4_gpu_info(e->gpu, out, err);
}

const int32_t *fg_engine_eos_ids(const struct fg_engine *e, int *n)
{
	*n = e->m->cfg.n_eos;
	return e->m->cfg.eos;
}

int fg_engine_is_eos(const struct fg_engine *e, int32_t token)
{
	int i;

	for (i = 0; i < e->m->cfg.n_eos; i++)
		if (e->m->cfg.eos[i] == token)
			return 1;
	return 0;
}

int fg_engine_has_gen_config(const struct fg_engine *e)
{
	return e->m->cfg.gen.present;
}

const char *fg_engine_gen_unapplied(const struct fg_engine *e)
{
	return e->m->cfg.gen.note;
}

long long fg_engine_gen_max_new(const struct fg_engine *e, size_t n_prompt)
{
	const struct fg_g4_gen *g = &e->m->cfg.gen;

	/* transformers' _prepare_generated_length: max_new_tokens wins over
	 * max_length (the prompt included) */
	if (!g->present)
		return -1;
	if (g->max_new_tokens >= 0)
		return g->max_new_tokens;
	if (g->max_length >= 0)
		return (long long)g->max_length > (long long)n_prompt ? (long long)g->max_length - (long long)n_prompt
								     : 0;
	return -1;
}

void fg_engine_reset(struct fg_engine *e)
{
	e->pos = 0;
	e->has_hlast = 0;
}

int32_t fg_engine_argmax(const float *logits, int n)
{
	int32_t best = 0;
	int i;

	for (i = 1; i < n; i++)
		if (logits[i] > logits[best] || (isnan(logits[best]) && !isnan(logits[i])))
			best = i;
	return best;
}

void fg_engine_row_logprobs(const float *row, int nv, int32_t id, int k, float *lp, struct fg_engine_alt *top,
			    int32_t *rank)
{
	float mx = -INFINITY, me = row[id];
	double sum = 0, lse;
	int v, n = 0, a, above = 0;

	/* one pass for the maximum, the rank and the top k; one for the sum
	 * (expf per logit, summed in double: bench/logprob_row.c times it
	 * against exp in double) */
	for (v = 0; v < nv; v++) {
		float x = row[v];

		if (x > mx)
			mx = x;
		above += x > me;
		if (k <= 0 || (n == k && !(x > top[k - 1].lp)))
			continue;
		a = n < k ? n++ : k - 1;
		while (a > 0 && x > top[a - 1].lp) {
			top[a] = top[a - 1];
			a--;
		}
		top[a].id = v;
		top[a].lp = x;
	}
	if (rank)
		*rank = above + 1;
	for (v = 0; v < nv; v++)
		sum += (double)expf(row[v] - mx);
	lse = (double)mx + log(sum);
	*lp = (float)((double)me - lse);
	for (a = 0; a < n; a++)
		top[a].lp = (float)((double)top[a].lp - lse);
}

/* ---- the forward pass --------------------------------------------------- */

/* Embeddings and per-layer inputs of T tokens into e->x, e->ple. */
static void embed(struct fg_engine *e, const int32_t *ids, int T)
{
	const struct fg_g4_config *c = &e->m->cfg;
	const float scale = (float)sqrt((double)c->hidden);
	int H = c->hidden, LP = c->n_layers * c->ple_dim, t, i;

	for (t = 0; t < T; t++) {
		float *x = e->x + (size_t)t * (size_t)H;

		fg_cpu_lin_row(&e->m->embed, fg_g4_input_id(c, ids[t]), x);
		for (i = 0; i < H; i++)
			x[i] *= scale;
	}
	if (!c->ple_dim)
		return;
	{
		const float tok_scale = (float)sqrt((double)c->ple_dim);
		const float proj_scale = (float)pow((double)c->hidden, -0.5);
		const float mix = (float)pow(2.0, -0.5);
		float *ctx = e->ple; /* [T][LP], projected in place */
		int l;

		matmul(e, &e->m->ple_model_proj, e->x, T, ctx);
		for (t = 0; t < T; t++) {
			float *p = ctx + (size_t)t * (size_t)LP;
			float *tok = e->row_buf[0]; /* the calling thread is worker 0 */

			for (i = 0; i < LP; i++)
				p[i] *= proj_scale;
			for (l = 0; l < c->n_layers; l++)
				fg_cpu_rmsnorm(p + (size_t)l * (size_t)c->ple_dim, p + (size_t)l * (size_t)c->ple_dim,
					       e->m->ple_proj_norm, c->ple_dim, c->eps);
			fg_cpu_lin_row(&e->m->ple_embed, fg_g4_input_id(c, ids[t]), tok);
			for (i = 0; i < LP; i++)
				p[i] = (p[i] + tok[i] * tok_scale) * mix;
		}
	}
}

/* y[t][i] += b[i] for T rows of n (attention_bias); nothing when b is NULL */
static void add_bias(float *y, const float *b, int T, int n)
{
	int t, i;

	if (!b)
		return;
	for (t = 0; t < T; t++)
		for (i = 0; i < n; i++)
			y[(size_t)t * (size_t)n + (size_t)i] += b[i];
}

static void add_normed(float *x, const float *y, const float *w, int T, int H, float eps, float *tmp)
{
	int t, i;

	for (t = 0; t < T; t++) {
		fg_cpu_rmsnorm(tmp, y + (size_t)t * (size_t)H, w, H, eps);
		for (i = 0; i < H; i++)
			x[(size_t)t * (size_t)H + (size_t)i] += tmp[i];
	}
}

/* y = down(gelu_tanh(gate(x)) * up(x)) for T rows, the Gemma MLP (the dense
 * one and each expert); g and u [T][I] are scratch. */
static void geglu(struct fg_engine *e, const struct fg_lin *gate, const struct fg_lin *up, const struct fg_lin *down,
		  const float *x, int T, int I, float *g, float *u, float *y)
{
	int i;

	matmul(e, gate, x, T, g);
	matmul(e, up, x, T, u);
	fg_cpu_gelu_tanh(g, T * I);
	for (i = 0; i < T * I; i++)
		g[i] *= u[i];
	matmul(e, down, g, T, y);
}

/* Gemma4TextRouter on one token's router logits [E]: softmax in fp32, the
 * top k probabilities (on an exact tie the lower expert index first, see
 * docs/engine.md), renormalised to sum to 1 (summed best first, as torch sums
 * topk's output), each times its expert's per_expert_scale. */
static void route(const float *logits, int E, int k, const float *expert_scale, int *idx, float *w)
{
	float mx = logits[0], sum = 0, ksum = 0;
	int i, j;

	for (i = 1; i < E; i++)
		if (logits[i] > mx)
			mx = logits[i];
	for (j = 0; j < k; j++) {
		int best = -1;

		for (i = 0; i < E; i++) {
			int taken = 0, q;

			for (q = 0; q < j; q++)
				taken |= idx[q] == i;
			if (!taken && (best < 0 || logits[i] > logits[best]))
				best = i;
		}
		idx[j] = best;
	}
	for (i = 0; i < E; i++)
		sum += expf(logits[i] - mx);
	for (j = 0; j < k; j++) {
		w[j] = expf(logits[idx[j]] - mx) / sum;
		ksum += w[j];
	}
	for (j = 0; j < k; j++)
		w[j] = w[j] / ksum * expert_scale[idx[j]];
}

/* The mixture-of-experts half of a layer's feed-forward block
 * (Gemma4TextDecoderLayer.forward with enable_moe_block). On entry e->x is
 * the residual (the hidden state before the MLP) and e->o the dense MLP's
 * output; on exit e->o = post_feedforward_layernorm_1(mlp) +
 * post_feedforward_layernorm_2(experts(pre_feedforward_layernorm_2(x))),
 * which the caller normalises with post_feedforward_layernorm and adds.
 * Experts run one at a time in index order over the tokens routed to them
 * (each token's sum is thus taken in expert order, as transformers'
 * index_add_ loop), with matmuls whose rows do not depend on how many
 * tokens share them: prefill and decode agree bit for bit. */
static void moe_block(struct fg_engine *e, const struct fg_g4_layer *L, int T)
{
	const struct fg_g4_config *c = &e->m->cfg;
	const struct fg_g4_moe *x = L->moe;
	struct moe_scratch *ms = e->ms;
	int H = c->hidden, E = c->n_experts, K = c->top_k, I = c->moe_inter, t, i, ex;
	const float root = (float)pow((double)H, -0.5);

	/* router: RMSNorm without weight, * scale * hidden^-0.5, proj */
	for (t = 0; t < T; t++) {
		float *r = ms->rin + (size_t)t * (size_t)H;

		fg_cpu_rmsnorm(r, e->x + (size_t)t * (size_t)H, NULL, H, c->eps);
		for (i = 0; i < H; i++)
			r[i] = r[i] * x->router_scale[i] * root;
	}
	matmul(e, &x->router, ms->rin, T, ms->logits);
	for (t = 0; t < T; t++)
		route(ms->logits + (size_t)t * (size_t)E, E, K, x->expert_scale, ms->idx + (size_t)t * (size_t)K,
		      ms->w + (size_t)t * (size_t)K);
	/* experts read pre_feedforward_layernorm_2(residual) */
	for (t = 0; t < T; t++)
		fg_cpu_rmsnorm(ms->rin + (size_t)t * (size_t)H, e->x + (size_t)t * (size_t)H, x->pre_norm_2, H, c->eps);
	memset(ms->h2, 0, sizeof(float) * (size_t)T * (size_t)H);
	for (ex = 0; ex < E; ex++) {
		int n = 0, j;

		for (t = 0; t < T; t++)
			for (j = 0; j < K; j++)
				if (ms->idx[(size_t)t * (size_t)K + (size_t)j] == ex) {
					ms->rows[n] = t;
					ms->rw[n] = ms->w[(size_t)t * (size_t)K + (size_t)j];
					memcpy(ms->xs + (size_t)n * (size_t)H, ms->rin + (size_t)t * (size_t)H,
					       sizeof(float) * (size_t)H);
					n++;
				}
		if (!n)
			continue;
		geglu(e, &x->gate[ex], &x->up[ex], &x->down[ex], ms->xs, n, I, ms->gs, ms->us, ms->ys);
		for (j = 0; j < n; j++) {
			float *h = ms->h2 + (size_t)ms->rows[j] * (size_t)H;
			const float *y = ms->ys + (size_t)j * (size_t)H;

			for (i = 0; i < H; i++)
				h[i] += y[i] * ms->rw[j];
		}
	}
	for (t = 0; t < T; t++) {
		float *o = e->o + (size_t)t * (size_t)H, *h = ms->h2 + (size_t)t * (size_t)H;

		fg_cpu_rmsnorm(o, o, x->post_norm_1, H, c->eps);
		fg_cpu_rmsnorm(h, h, x->post_norm_2, H, c->eps);
		for (i = 0; i < H; i++)
			o[i] += h[i];
	}
}

static void layer(struct fg_engine *e, int li, int T)
{
	const struct fg_g4_config *c = &e->m->cfg;
	const struct fg_g4_layer *L = &e->m->layers[li];
	int H = c->hidden, d = L->head_dim, nh = c->n_heads, nkv = L->kv_heads, I = L->inter;
	int P = c->ple_dim, t, h, i;
	const float *inv = e->inv[L->type];
	float rs = (float)c->rope[L->type].attention; /* cos and sin x attention factor (yarn) */
	float *tmp = e->row_buf[0];

	/* attention */
	for (t = 0; t < T; t++)
		fg_cpu_rmsnorm(e->a + (size_t)t * (size_t)H, e->x + (size_t)t * (size_t)H, L->in_norm, H, c->eps);
	matmul(e, &L->q, e->a, T, e->q);
	add_bias(e->q, L->bq, T, nh * d);
	for (t = 0; t < T; t++)
		for (h = 0; h < nh; h++) {
			float *qh = e->q + ((size_t)t * (size_t)nh + (size_t)h) * (size_t)d;

			fg_cpu_rmsnorm(qh, qh, L->q_norm, d, c->eps);
			fg_cpu_rope_scaled(qh, d, inv, e->pos + t, rs);
		}
	if (L->kv_src == li) {
		struct kv *cache = &e->kv[li];

		matmul(e, &L->k, e->a, T, e->k);
		add_bias(e->k, L->bk, T, nkv * d);
		if (L->v_is_k) /* attention_k_eq_v: v is k_proj's output, before k_norm and RoPE */
			memcpy(e->v, e->k, sizeof(float) * (size_t)T * (size_t)nkv * (size_t)d);
		else {
			matmul(e, &L->v, e->a, T, e->v);
			add_bias(e->v, L->bv, T, nkv * d);
		}
		for (t = 0; t < T; t++) {
			size_t slot = (size_t)((e->pos + t) % cache->cap);

			for (h = 0; h < nkv; h++) {
				size_t off = ((size_t)t * (size_t)nkv + (size_t)h) * (size_t)d;
				float *kh = e->k + off, *vh = e->v + off;

				fg_cpu_rmsnorm(kh, kh, L->k_norm, d, c->eps);
				fg_cpu_rope_scaled(kh, d, inv, e->pos + t, rs);
				fg_cpu_rmsnorm(vh, vh, NULL, d, c->eps);
			}
			memcpy(cache->k + slot * (size_t)nkv * (size_t)d, e->k + (size_t)t * (size_t)nkv * (size_t)d,
			       sizeof(float) * (size_t)nkv * (size_t)d);
			memcpy(cache->v + slot * (size_t)nkv * (size_t)d, e->v + (size_t)t * (size_t)nkv * (size_t)d,
			       sizeof(float) * (size_t)nkv * (size_t)d);
		}
	}
	{
		struct att_job j = { e, L, &e->kv[L->kv_src], T, e->pos };

		fg_pool_run(e->pool, T * nh, att_fn, &j);
	}
	matmul(e, &L->o, e->att, T, e->o);
	add_bias(e->o, L->bo, T, H);
	add_normed(e->x, e->o, L->post_attn_norm, T, H, c->eps, tmp);

	/* MLP */
	for (t = 0; t < T; t++)
		fg_cpu_rmsnorm(e->a + (size_t)t * (size_t)H, e->x + (size_t)t * (size_t)H, L->pre_ffw_norm, H, c->eps);
	geglu(e, &L->gate, &L->up, &L->down, e->a, T, I, e->g, e->u, e->o);
	if (L->moe)
		moe_block(e, L, T);
	add_normed(e->x, e->o, L->post_ffw_norm, T, H, c->eps, tmp);

	/* per-layer input */
	if (P) {
		matmul(e, &L->ple_gate, e->x, T, e->pg);
		fg_cpu_gelu_tanh(e->pg, T * P);
		for (t = 0; t < T; t++)
			for (i = 0; i < P; i++)
				e->pg[(size_t)t * (size_t)P + (size_t)i] *=
					e->ple[((size_t)t * (size_t)c->n_layers + (size_t)li) * (size_t)P + (size_t)i];
		matmul(e, &L->ple_proj, e->pg, T, e->o);
		add_normed(e->x, e->o, L->post_ple_norm, T, H, c->eps, tmp);
	}
	for (i = 0; i < T * H; i++)
		e->x[i] *= L->scalar;
}

/* Runs T tokens at positions pos.. and, when out is not NULL, writes logits
 * of the positions [from, T) to out [(T - from)][vocab]. */
static void forward_chunk(struct fg_engine *e, const int32_t *ids, int T, int from, float *out)
{
	const struct fg_g4_config *c = &e->m->cfg;
	int li, t, H = c->hidden;

	embed(e, ids, T);
	for (li = 0; li < c->n_layers; li++)
		layer(e, li, T);
	e->pos += T;
	if (!out)
		return;
	for (t = from; t < T; t++)
		fg_cpu_rmsnorm(e->a + (size_t)(t - from) * (size_t)H, e->x + (size_t)t * (size_t)H, e->m->final_norm,
			       H, c->eps);
	memcpy(e->hlast, e->a + (size_t)(T - 1 - from) * (size_t)H, sizeof(float) * (size_t)H);
	e->has_hlast = 1;
	if (!e->m->keep) {
		matmul(e, &e->m->head, e->a, T - from, out);
		fg_cpu_softcap(out, (T - from) * c->vocab, c->softcap);
		return;
	}
	/* a pruned head: K logits per token, scattered; the rest are -inf */
	matmul(e, &e->m->head, e->a, T - from, e->hk);
	fg_cpu_softcap(e->hk, (T - from) * e->m->n_keep, c->softcap);
	for (t = 0; t < T - from; t++)
		fg_engine_scatter_keep(out + (size_t)t * (size_t)c->vocab, c->vocab,
				       e->hk + (size_t)t * (size_t)e->m->n_keep, e->m->keep, e->m->n_keep);
}

void fg_engine_scatter_keep(float *logits, int vocab, const float *kept, const int32_t *keep, int n_keep)
{
	int i;

	for (i = 0; i < vocab; i++)
		logits[i] = -INFINITY;
	for (i = 0; i < n_keep; i++)
		logits[keep[i]] = kept[i];
}

int fg_engine_forward_logits(struct fg_engine *e, const int32_t *ids, size_t n, int last_only,
			     float *logits, struct fg_err *err)
{
	const struct fg_g4_config *c = &e->m->cfg;
	size_t i, done = 0;

	if (n > (size_t)(e->max_seq - e->pos))
		return fg_err_set(err, FG_EINVAL, "%zu more tokens at position %d exceed the maximum sequence of %d",
				  n, e->pos, e->max_seq);
	for (i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= c->vocab)
			return fg_err_set(err, FG_EINVAL, "token id %d at index %zu is out of range (vocab %d)",
					  (int)ids[i], i, c->vocab);
	if (e->gpu) { /* tokens nobody reads in prompt chunks, the others through the decode step */
		size_t quiet = !logits ? n : last_only && n ? n - 1 : 0;

		if (quiet) {
			int rc = fg_g4_gpu_prefill(e->gpu, ids, (int)quiet, e->pos, err);

			if (rc)
				return rc;
			e->pos += (int)quiet;
		}
		for (i = quiet; i < n; i++) {
			int want = logits && (!last_only || i + 1 == n);
			float *out = want ? logits + (last_only ? 0 : i * (size_t)c->vocab) : NULL;
			int rc = fg_g4_gpu_step(e->gpu, ids[i], e->pos, out, NULL, err);

			if (rc)
				return rc;
			e->pos++;
		}
		return 0;
	}
	while (done < n) {
		int T = n - done > CHUNK ? CHUNK : (int)(n - done);
		float *out = NULL;
		int from = 0;

		if (logits && !last_only)
			out = logits + done * (size_t)c->vocab;
		else if (logits && done + (size_t)T == n) {
			out = logits;
			from = T - 1;
		}
		forward_chunk(e, ids + done, T, from, out);
		done += (size_t)T;
	}
	return 0;
}

int fg_engine_score(struct fg_engine *e, const int32_t *ids, size_t n, fg_engine_score_cb cb, void *user,
		    struct fg_err *err)
{
	int nv = e->m->cfg.vocab, rc = 0;
	size_t done = 0, i;
	float *lg;

	if (n < 2)
		return 0;
	if (!(lg = malloc(FG_ENGINE_SCORE_CHUNK * (size_t)nv * sizeof(float))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	fg_engine_reset(e);
	/* the logits after ids[done + i] are the ones ids[done + i + 1] follows */
	while (!rc && done < n - 1) {
		size_t take = n - 1 - done < FG_ENGINE_SCORE_CHUNK ? n - 1 - done : FG_ENGINE_SCORE_CHUNK;

		rc = fg_engine_forward_logits(e, ids + done, take, 0, lg, err);
		for (i = 0; !rc && i < take; i++)
			rc = cb(user, done + i + 1, lg + i * (size_t)nv);
		done += take;
	}
	free(lg);
	return rc;
}

/* A request for log-probabilities (fg_engine_generate_lp, fg_engine_score_lp). */
struct lp_req {
	int k;
	fg_engine_lp_cb cb;
	void *user;
	size_t i;             /* generation: the next token's index */
	const int32_t *ids;   /* scoring: the ids scored */
	const struct fg_engine *e;
};

static void lp_from_gpu(struct fg_engine_lp *o, const struct fg_klp *l)
{
	int a;

	o->lp = l->lp;
	o->rank = l->rank;
	o->n_top = l->n_top;
	for (a = 0; a < l->n_top; a++) {
		o->top[a].id = l->top_id[a];
		o->top[a].lp = l->top_lp[a];
	}
}

/* One token through the GPU step; *tok receives the argmax taken there and,
 * with lr, *l its log-probabilities. */
static int gpu_next(struct fg_engine *e, int32_t id, int32_t *tok, const struct lp_req *lr, struct fg_klp *l,
		    struct fg_err *err)
{
	int rc = lr ? fg_g4_gpu_step_lp(e->gpu, id, e->pos, lr->k, tok, l, err)
		    : fg_g4_gpu_step(e->gpu, id, e->pos, NULL, tok, err);

	if (!rc)
		e->pos++;
	return rc;
}

/* Drafts for the round that starts with tok at position e->pos, at most
 * `room` of them (the rows the round may still use); 0 when there is no
 * drafter or no room. */
static int draft_round(struct fg_engine *e, int32_t tok, int room, int32_t *out, struct fg_err *err)
{
	int k = e->dk < room ? e->dk : room, rc;

	if (k <= 0 || e->pos < 1)
		return 0;
	if (e->gpu)
		rc = fg_g4_gpu_draft(e->dgpu, tok, e->pos, k, out, err);
	else {
		struct fg_draft_kv kv;
		const float *h = fg_engine_last_hidden(e);

		if (!h)
			return 0;
		rc = fg_engine_draft_kv(e, &kv, err);
		if (!rc)
			rc = fg_draft_cpu_propose(e->dcpu, &kv, h, tok, e->pos, k, out, NULL, err);
	}
	if (rc)
		return -1;
	e->ss.rounds++;
	e->ss.drafted += k;
	return k;
}

/* Counts a round's leading accepted drafts (n of k). */
static void count_round(struct fg_engine *e, int n)
{
	int j;

	e->ss.accepted += n;
	for (j = 0; j < n && j < FG_ENGINE_MAX_DRAFT; j++)
		e->ss.at[j]++;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* After an epoch of SPEC_EPOCH tokens in one way (drafting or plain steps),
 * its tokens per second; then the way to run the next epoch: the faster one
 * measured, the other when it has no figure yet or every SPEC_PROBE epochs. */
static void spec_epoch(struct fg_engine *e, int tokens)
{
	struct fg_engine_adapt *a = &e->sa;
	double t = mono_s();

	a->tokens += tokens;
	a->elapsed += t - a->t0; /* decoding time only: t0 restarts with each request */
	a->t0 = t;
	if (a->tokens < SPEC_EPOCH)
		return;
	if (!a->warm) { /* the first epoch pays the drafter's graph captures: not a figure */
		a->warm = 1;
		a->tokens = 0;
		a->elapsed = 0;
		return;
	}
	if (a->elapsed > 0)
		a->rate[a->drafting] = a->tokens / a->elapsed;
	a->tokens = 0;
	a->elapsed = 0;
	if (!a->rate[!a->drafting] || ++a->since_probe >= SPEC_PROBE) {
		a->drafting = !a->drafting;
		a->since_probe = 0;
	} else {
		a->drafting = a->rate[1] >= a->rate[0];
	}
}

/* Hands tok (with its log-probabilities *l when lr) to the caller's
 * callback; nonzero: stop. */
static int emit(struct fg_engine *e, int32_t tok, fg_engine_token_cb cb, void *user, struct lp_req *lr,
		const struct fg_klp *l)
{
	if (lr) {
		struct fg_engine_lp lp;

		lp_from_gpu(&lp, l);
		return lr->cb(lr->user, lr->i++, tok, &lp);
	}
	return cb && cb(user, tok, NULL, e->m->cfg.vocab);
}

/* generate() on the CUDA path with a drafter: rounds of draft, verify (one
 * pass over tok and the drafts), accept. The tokens are plain greedy's: row
 * r's argmax is what the decode step gives after rows 0..r, and a draft is
 * kept only when it equals the argmax before it. Whether a round drafts at
 * all is measured (spec_epoch; FG_SPEC_ADAPT=0 always drafts): drafting pays
 * only when the drafter is right often enough for what a verify pass costs on
 * this GPU, and a plain step gives the same token. With lr, l holds tok's
 * log-probabilities, overwritten as the rounds go. */
static int generate_spec_gpu(struct fg_engine *e, int32_t tok, int max_new, fg_engine_token_cb cb, void *user,
			     struct lp_req *lr, struct fg_klp *l, struct fg_err *err)
{
	int32_t rows[FG_ENGINE_MAX_DRAFT + 1], best[FG_ENGINE_MAX_DRAFT + 1];
	struct fg_klp rl[FG_ENGINE_MAX_DRAFT + 1];
	int i = 0, rc;

	e->sa.t0 = mono_s(); /* the time between requests is not decoding */
	for (;;) {
		int k, n, j;

		if (emit(e, tok, cb, user, lr, l))
			return 0;
		if (++i == max_new)
			return 0;
		if (e->sa.adapt && !e->sa.drafting) { /* a plain step: the same token */
			if ((rc = gpu_next(e, tok, &tok, lr, l, err)))
				return rc;
			e->ss.steps++;
			spec_epoch(e, 1);
			continue;
		}
		/* rows of this round: tok + k drafts; no more than the tokens still
		 * wanted need, nor than the cache holds */
		k = draft_round(e, tok, max_new - i - 1 < e->max_seq - e->pos - 1 ? max_new - i - 1
										: e->max_seq - e->pos - 1,
				rows + 1, err);
		if (k < 0)
			return err->code;
		rows[0] = tok;
		if ((rc = fg_g4_gpu_verify_lp(e->gpu, rows, k + 1, e->pos, lr ? lr->k : 0, best, lr ? rl : NULL, err)))
			return rc;
		for (n = 1; n <= k && rows[n] == best[n - 1]; n++)
			;
		if ((rc = fg_g4_gpu_accept(e->gpu, n, err)))
			return rc;
		e->pos += n;
		if (k)
			count_round(e, n - 1);
		if (e->sa.adapt)
			spec_epoch(e, n);
		for (j = 1; j < n; j++) { /* the accepted drafts (row j - 1's argmax), then best[n - 1] */
			if (emit(e, rows[j], cb, user, lr, &rl[j - 1]))
				return 0;
			if (++i == max_new)
				return 0;
		}
		tok = best[n - 1];
		if (lr)
			*l = rl[n - 1];
	}
}

/* fg_g4_gpu_chain's callback: a token to emit (ids only). */
struct chain_emit {
	struct fg_engine *e;
	fg_engine_token_cb cb;
	void *user;
};

static int chain_emit(void *user, int32_t tok)
{
	const struct chain_emit *c = user;

	return emit(c->e, tok, c->cb, c->user, NULL, NULL);
}

/* The token loop of the ids-only (and log-probabilities) path on the GPU:
 * tok was just chosen (with *l when lr). Ids only, once the step's graphs
 * exist, the rest of the steps run chained (fg_g4_gpu_chain): the same
 * tokens, without the GPU waiting for the host between steps. */
static int generate_gpu(struct fg_engine *e, int32_t tok, int max_new, fg_engine_token_cb cb, void *user,
			struct lp_req *lr, struct fg_klp *l, struct fg_err *err)
{
	int rc, i;

	for (i = 0; i < max_new; i++) {
		if (emit(e, tok, cb, user, lr, l))
			break;
		if (i + 1 == max_new)
			break;
		if (!lr && fg_g4_gpu_chain_ready(e->gpu)) {
			struct chain_emit c = {e, cb, user};
			int done = 0;

			rc = fg_g4_gpu_chain(e->gpu, tok, e->pos, max_new - 1 - i, chain_emit, &c, &done, err);
			e->pos += done;
			return rc;
		}
		if ((rc = gpu_next(e, tok, &tok, lr, l, err)))
			return rc;
	}
	return 0;
}

/* want_logits: cb gets every step's logits; else with lr (CUDA path only)
 * lr->cb gets each token's log-probabilities, else cb only ids. */
static int generate(struct fg_engine *e, const int32_t *prompt, size_t n_prompt, int max_new, fg_engine_token_cb cb,
		    void *user, int want_logits, struct lp_req *lr, struct fg_err *err)
{
	int32_t queue[FG_ENGINE_MAX_DRAFT];
	int nq = 0, qi = 0;
	int rc, i, V = e->m->cfg.vocab;

	if (n_prompt == 0)
		return fg_err_set(err, FG_EINVAL, "empty prompt");
	if (max_new < 0)
		return fg_err_set(err, FG_EINVAL, "negative token count");
	if (n_prompt > (size_t)e->max_seq)
		return fg_err_set(err, FG_EINVAL, "prompt of %zu tokens is longer than the maximum sequence of %d",
				  n_prompt, e->max_seq);
	if (max_new > 1 && n_prompt + (size_t)max_new - 1 > (size_t)e->max_seq)
		return fg_err_set(err, FG_EINVAL,
				  "prompt of %zu tokens plus %d new ones exceeds the maximum sequence of %d", n_prompt,
				  max_new, e->max_seq);
	fg_engine_reset(e);
	if (e->gpu && !want_logits) {
		int32_t tok;
		struct fg_klp l;

		if ((rc = fg_engine_forward_logits(e, prompt, n_prompt - 1, 1, NULL, err)))
			return rc;
		/* forward_logits checked all ids but the last */
		if (prompt[n_prompt - 1] < 0 || prompt[n_prompt - 1] >= V)
			return fg_err_set(err, FG_EINVAL, "token id %d at index %zu is out of range (vocab %d)",
					  (int)prompt[n_prompt - 1], n_prompt - 1, V);
		if ((rc = gpu_next(e, prompt[n_prompt - 1], &tok, lr, &l, err)))
			return rc;
		if (e->dk && max_new > 0)
			return generate_spec_gpu(e, tok, max_new, cb, user, lr, &l, err);
		return generate_gpu(e, tok, max_new, cb, user, lr, &l, err);
	}
	if ((rc = fg_engine_forward_logits(e, prompt, n_prompt, 1, e->logits, err)))
		return rc;
	for (i = 0; i < max_new; i++) {
		int32_t tok = fg_engine_argmax(e->logits, V);

		if (cb && cb(user, tok, want_logits ? e->logits : NULL, V))
			break;
		if (i + 1 == max_new)
			break;
		/* with a drafter (CPU path, or CUDA with logits wanted): a round's
		 * drafts are checked one row at a time, the same forward passes as
		 * plain greedy; a disagreement ends the round */
		if (e->dk && qi == nq && !e->gpu) {
			nq = draft_round(e, tok, max_new - 1 - i, queue, err);
			if (nq < 0)
				return err->code;
			qi = 0;
		}
		if ((rc = fg_engine_forward_logits(e, &tok, 1, 1, e->logits, err)))
			return rc;
		if (qi < nq) {
			int32_t next = fg_engine_argmax(e->logits, V);

			if (queue[qi] == next) {
				e->ss.accepted++;
				e->ss.at[qi]++;
				qi++;
			} else {
				qi = nq;
			}
		}
	}
	return 0;
}

int fg_engine_generate(struct fg_engine *e, const int32_t *prompt, size_t n_prompt, int max_new,
		       fg_engine_token_cb cb, void *user, struct fg_err *err)
{
	return generate(e, prompt, n_prompt, max_new, cb, user, 1, NULL, err);
}

int fg_engine_generate_ids(struct fg_engine *e, const int32_t *prompt, size_t n_prompt, int max_new,
			   fg_engine_token_cb cb, void *user, struct fg_err *err)
{
	return generate(e, prompt, n_prompt, max_new, cb, user, 0, NULL, err);
}

/* One row's log-probabilities on the CPU, for id. */
static void row_lp(const float *row, int nv, int32_t id, int k, struct fg_engine_lp *o)
{
	o->n_top = k < nv ? k : nv;
	fg_engine_row_logprobs(row, nv, id, o->n_top, &o->lp, o->top, &o->rank);
}

static int gen_lp_row(void *user, int32_t token, const float *logits, int n_vocab)
{
	struct lp_req *lr = user;
	struct fg_engine_lp lp;

	row_lp(logits, n_vocab, token, lr->k, &lp);
	return lr->cb(lr->user, lr->i++, token, &lp);
}

static int score_lp_row(void *user, size_t i, const float *logits)
{
	struct lp_req *lr = user;
	struct fg_engine_lp lp;

	row_lp(logits, lr->e->m->cfg.vocab, lr->ids[i], lr->k, &lp);
	return lr->cb(lr->user, i, lr->ids[i], &lp);
}

/* The GPU computes a row's log-probabilities when its head has at least k
 * rows (a pruned head's k best may need ids it lacks: the CPU pass gives
 * them). FG_LP_CPU=1 makes the CPU pass them all, over every row's
 * downloaded logits, as before the GPU could (bench/serve_logprobs.sh
 * compares the two). */
static int lp_on_gpu(const struct fg_engine *e, int k)
{
	const char *v = getenv("FG_LP_CPU");

	return e->gpu && k <= (e->m->keep ? e->m->n_keep : e->m->cfg.vocab) && !(v && !strcmp(v, "1"));
}

int fg_engine_generate_lp(struct fg_engine *e, const int32_t *prompt, size_t n_prompt, int max_new, int k,
			  fg_engine_lp_cb cb, void *user, struct fg_err *err)
{
	struct lp_req lr = {k, cb, user, 0, NULL, e};

	if (k < 0 || k > FG_ENGINE_LP_TOP_MAX)
		return fg_err_set(err, FG_EINVAL, "%d alternatives asked, at most %d", k, FG_ENGINE_LP_TOP_MAX);
	if (lp_on_gpu(e, k))
		return generate(e, prompt, n_prompt, max_new, NULL, NULL, 0, &lr, err);
	return generate(e, prompt, n_prompt, max_new, gen_lp_row, &lr, 1, NULL, err);
}

int fg_engine_score_lp(struct fg_engine *e, const int32_t *ids, size_t n, int k, fg_engine_lp_cb cb, void *user,
		       struct fg_err *err)
{
	struct fg_klp l[FG_K_LP_ROWS_MAX];
	int rows;
	struct fg_engine_lp lp;
	size_t done = 0;
	int rc = 0, r;

	if (k < 0 || k > FG_ENGINE_LP_TOP_MAX)
		return fg_err_set(err, FG_EINVAL, "%d alternatives asked, at most %d", k, FG_ENGINE_LP_TOP_MAX);
	if (!lp_on_gpu(e, k)) {
		struct lp_req lr = {k, cb, user, 0, ids, e};

		return fg_engine_score(e, ids, n, score_lp_row, &lr, err);
	}
	if (n < 2)
		return 0;
	if (n - 1 > (size_t)e->max_seq)
		return fg_err_set(err, FG_EINVAL, "%zu tokens to score exceed the maximum sequence of %d", n - 1,
				  e->max_seq);
	fg_engine_reset(e);
	rows = fg_g4_gpu_score_rows(e->gpu);
	while (!rc && done < n - 1) {
		int T = n - 1 - done < (size_t)rows ? (int)(n - 1 - done) : rows;

		if ((rc = fg_g4_gpu_score(e->gpu, ids + done, T, e->pos, ids + done + 1, k, l, err)))
			break;
		e->pos += T;
		for (r = 0; !rc && r < T; r++) {
			lp_from_gpu(&lp, &l[r]);
			rc = cb(user, done + (size_t)r + 1, ids[done + (size_t)r + 1], &lp);
		}
		done += (size_t)T;
	}
	return rc;
}

/* ---- speculative decoding: the CPU engine's side (engine/draft.h) ---------- */

int fg_engine_draft_kv(const struct fg_engine *e, struct fg_draft_kv *out, struct fg_err *err)
{
	const struct fg_g4_config *c = &e->m->cfg;
	int t, n = 0;

	memset(out, 0, sizeof(*out));
	out->window = e->window;
	for (t = 0; t < 2; t++) {
		int src = fg_g4_type_source(c, t);

		if (src < 0 || !e->kv[src].k)
			continue;
		out->k[t] = e->kv[src].k;
		out->v[t] = e->kv[src].v;
		out->cap[t] = e->kv[src].cap;
		n++;
	}
	if (!n)
		return fg_err_set(err, FG_EINVAL, "the target model has no layer whose cache a drafter could read");
	return 0;
}

const float *fg_engine_last_hidden(const struct fg_engine *e)
{
	return e->has_hlast && !e->gpu ? e->hlast : NULL;
}

_Static_assert(FG_ENGINE_MAX_CENTROID_TOP_K == FG_G4_CENTROID_MAX_K, "centroid top-k bounds differ");

int fg_engine_set_drafter(struct fg_engine *e, const char *dir, int k, int top_k, struct fg_err *err)
{
	struct fg_g4_model *dm = NULL;
	struct fg_draft_cpu *dcpu = NULL;
	struct fg_g4_gpu_draft *dgpu = NULL;
	int rc;

	if (k < 0 || k > FG_ENGINE_MAX_DRAFT || k > FG_DRAFT_MAX_K)
		return fg_err_set(err, FG_EINVAL, "draft tokens %d: want 1..%d", k, FG_ENGINE_MAX_DRAFT);
	if (dir && k) {
		if ((rc = fg_g4_model_load(&dm, dir, err)))
			return rc;
		if (!dm->cfg.assistant) {
			fg_g4_model_free(dm);
			return fg_err_set(err, FG_EINVAL, "%s: not a Gemma 4 assistant drafter (config model_type is not "
					  "gemma4_assistant)", dir);
		}
		/* the override goes into the drafter's own copy of its config
		 * before either side sizes its head's buffers by it */
		if ((rc = fg_g4_set_centroid_top_k(&dm->cfg, top_k, err))) {
			fg_g4_model_free(dm);
			return fg_err_wrap(err, "drafter %s", dir);
		}
		rc = e->gpu ? fg_g4_gpu_draft_new(&dgpu, e->gpu, dm, err) : fg_draft_cpu_new(&dcpu, dm, e->m, err);
		if (rc) {
			fg_g4_model_free(dm);
			return fg_err_wrap(err, "drafter %s", dir);
		}
	}
	fg_draft_cpu_free(e->dcpu);
	fg_g4_gpu_draft_free(e->dgpu);
	fg_g4_model_free(e->dm);
	e->dm = dm;
	e->dcpu = dcpu;
	e->dgpu = dgpu;
	e->dk = dm ? k : 0;
	fg_engine_spec_reset(e);
	memset(&e->sa, 0, sizeof(e->sa));
	e->sa.drafting = 1;
	{
		const char *v = getenv("FG_SPEC_ADAPT");

		e->sa.adapt = !(v && !strcmp(v, "0"));
	}
	return 0;
}

int fg_engine_draft_tokens(const struct fg_engine *e) { return e->dk; }

int fg_engine_draft_top_k(const struct fg_engine *e)
{
	return e->dm && fg_g4_centroid_top_k_max(&e->dm->cfg) ? e->dm->cfg.centroid_top_k : 0;
}

void fg_engine_spec_stats(const struct fg_engine *e, struct fg_engine_spec_stats *out) { *out = e->ss; }

double fg_engine_spec_tokens_per_round(const struct fg_engine_spec_stats *s)
{
	return s->rounds ? 1.0 + (double)s->accepted / (double)s->rounds : 1.0;
}

void fg_engine_spec_reset(struct fg_engine *e) { memset(&e->ss, 0, sizeof(e->ss)); }
