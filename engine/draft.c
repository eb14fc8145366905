/* draft.c - the Gemma 4 assistant drafter on the CPU (draft.h): the math of
 * transformers 5.17's Gemma4AssistantForCausalLM.forward inside
 * SinglePositionMultiTokenCandidateGenerator's loop, in fp32, one position.
 *
 * Each draft step runs the assistant's decoder layers on one query row at
 * position pos. A layer is a Gemma 4 decoder layer (engine.c's layer(): the
 * same norms, q_norm, RoPE, o_proj, post norms, GeGLU MLP and layer_scalar)
 * without k/v projections and without per-layer inputs: its keys and values
 * are the target's cached ones of the same layer type, up to position pos - 1.
 *
 * Which cached positions a layer sees is what the assistant's masks let
 * through (Gemma4AssistantForCausalLM.create_attention_masks, measured by
 * tests/oracle/assistant.py): full layers every position 0..pos-1; sliding
 * layers a bidirectional sliding window mask of the ASSISTANT's
 * sliding_window W flipped onto the newest keys, and transformers'
 * sliding_window_bidirectional_overlay is inclusive (|q - kv| <= W), so the
 * newest W + 1 positions, max(0, pos - W - 1)..pos-1, one more than the
 * target's own sliding layers see. W is the smaller of the assistant's window
 * and the target's window in use (struct fg_draft_kv window): a target run
 * with a shorter window (--sliding-window 188, as the challenge does) keeps
 * no older keys, and transformers' drafter then sees only what that cache
 * holds. */
#include "engine/draft.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/ops.h"
#include "engine/rope.h"

struct fg_draft_cpu {
	const struct fg_g4_model *a, *t; /* borrowed: the assistant, the target */
	float *inv[2];   /* the assistant's RoPE inverse frequencies by layer type, [d/2] */
	int used[2];     /* 1 when an assistant layer has that type */
	float *in;       /* [2 backbone]: concat(emb(last), h) */
	float *h;        /* [backbone]: the hidden state fed to the next step */
	float *x, *xn, *o, *y; /* [hidden] */
	float *q, *att;  /* [heads * max d] */
	float *g, *u;    /* [max inter] */
	float *row;      /* [max cols]: fg_cpu_matmul_rows scratch */
	float *lg;       /* [vocab]: a step's logits when the caller keeps none */
	float *cl;       /* [n_centroids]: centroid logits (ordered head) */
	int *top;        /* [top_k]: the chosen centroids, best first */
	float *sel;      /* [top_k * per]: their tokens' logits */
	float *scores;   /* [n_att]: attention scratch */
	const float **kp, **vp; /* [n_att] */
	int n_att;
};

static int max_i(int a, int b)
{
	return a > b ? a : b;
}

static float *alloc_f(size_t n, int *bad)
{
	float *p = calloc(n ? n : 1, sizeof(float));

	if (!p)
		*bad = 1;
	return p;
}

static const char *type_name(int t)
{
	return t == FG_G4_FULL ? "full" : "sliding";
}

int fg_draft_cpu_new(struct fg_draft_cpu **out, const struct fg_g4_model *a, const struct fg_g4_model *t,
		     struct fg_err *err)
{
	const struct fg_g4_config *ac = &a->cfg, *tc = &t->cfg;
	struct fg_draft_cpu *d;
	int i, ty, bad = 0, maxd = 0, maxi = 0, maxcols;

	*out = NULL;
	if (!ac->assistant)
		return fg_err_set(err, FG_EINVAL, "the drafter is not a gemma4_assistant model");
	if (tc->assistant)
		return fg_err_set(err, FG_EINVAL, "the target is a gemma4_assistant drafter, not a model to draft for");
	if (ac->backbone != tc->hidden)
		return fg_err_set(err, FG_EINVAL, "drafter backbone_hidden_size %d differs from the target's hidden_size %d",
				  ac->backbone, tc->hidden);
	if (ac->vocab != tc->vocab)
		return fg_err_set(err, FG_EINVAL, "drafter vocab_size %d differs from the target's vocab_size %d",
				  ac->vocab, tc->vocab);
	for (i = 0; i < ac->n_layers; i++) {
		const struct fg_g4_layer *L = &a->layers[i];
		int src = fg_g4_type_source(tc, L->type);

		if (src < 0)
			return fg_err_set(err, FG_EINVAL, "drafter layer %d is a %s layer, and the target has no %s layer "
					  "with its own KV cache", i, type_name(L->type), type_name(L->type));
		if (fg_g4_layer_head_dim(tc, src) != L->head_dim)
			return fg_err_set(err, FG_EINVAL, "drafter %s layers have head_dim %d, the target's layer %d (their "
					  "KV source) %d", type_name(L->type), L->head_dim, src,
					  fg_g4_layer_head_dim(tc, src));
		if (fg_g4_layer_kv_heads(tc, src) != L->kv_heads)
			return fg_err_set(err, FG_EINVAL, "drafter %s layers have %d KV heads, the target's layer %d (their "
					  "KV source) %d", type_name(L->type), L->kv_heads, src,
					  fg_g4_layer_kv_heads(tc, src));
		maxd = max_i(maxd, L->head_dim);
		maxi = max_i(maxi, L->inter);
	}
	if (!(d = calloc(1, sizeof(*d))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	d->a = a;
	d->t = t;
	maxcols = max_i(max_i(2 * ac->backbone, ac->hidden), max_i(ac->n_heads * maxd, maxi));
	d->in = alloc_f((size_t)2 * (size_t)ac->backbone, &bad);
	d->h = alloc_f((size_t)ac->backbone, &bad);
	d->x = alloc_f((size_t)ac->hidden, &bad);
	d->xn = alloc_f((size_t)ac->hidden, &bad);
	d->o = alloc_f((size_t)ac->hidden, &bad);
	d->y = alloc_f((size_t)ac->hidden, &bad);
	d->q = alloc_f((size_t)ac->n_heads * (size_t)maxd, &bad);
	d->att = alloc_f((size_t)ac->n_heads * (size_t)maxd, &bad);
	d->g = alloc_f((size_t)maxi, &bad);
	d->u = alloc_f((size_t)maxi, &bad);
	d->row = alloc_f((size_t)maxcols, &bad);
	d->lg = alloc_f((size_t)ac->vocab, &bad);
	if (ac->ordered_emb) {
		d->cl = alloc_f((size_t)ac->n_centroids, &bad);
		d->sel = alloc_f((size_t)ac->centroid_top_k * (size_t)(ac->vocab / ac->n_centroids), &bad);
		if (!(d->top = calloc((size_t)ac->centroid_top_k, sizeof(int))))
			bad = 1;
	}
	for (ty = 0; ty < 2; ty++) {
		int dim = ty == FG_G4_FULL ? ac->global_head_dim : ac->head_dim;

		for (i = 0; i < ac->n_layers; i++)
			d->used[ty] |= a->layers[i].type == ty;
		d->inv[ty] = alloc_f((size_t)dim / 2, &bad);
		if (!bad)
			fg_g4_rope_table(d->inv[ty], &ac->rope[ty], dim);
	}
	if (bad) {
		fg_draft_cpu_free(d);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	*out = d;
	return 0;
}

void fg_draft_cpu_free(struct fg_draft_cpu *d)
{
	if (!d)
		return;
	free(d->inv[0]);
	free(d->inv[1]);
	free(d->in);
	free(d->h);
	free(d->x);
	free(d->xn);
	free(d->o);
	free(d->y);
	free(d->q);
	free(d->att);
	free(d->g);
	free(d->u);
	free(d->row);
	free(d->lg);
	free(d->cl);
	free(d->top);
	free(d->sel);
	free(d->scores);
	free(d->kp);
	free(d->vp);
	free(d);
}

/* The first cached position a layer of type ty attends to from pos. */
static int first_pos(const struct fg_draft_cpu *d, const struct fg_draft_kv *kv, int ty, int pos)
{
	int w = d->a->cfg.sliding_window;

	if (kv->window > 0 && kv->window < w)
		w = kv->window;

	if (ty == FG_G4_SLIDING && pos - w - 1 > 0)
		return pos - w - 1;
	return 0;
}

static int grow_att(struct fg_draft_cpu *d, int n, struct fg_err *err)
{
	float *s;
	const float **k, **v;

	if (n <= d->n_att)
		return 0;
	s = realloc(d->scores, sizeof(float) * (size_t)n);
	if (s)
		d->scores = s;
	k = realloc(d->kp, sizeof(*k) * (size_t)n);
	if (k)
		d->kp = k;
	v = realloc(d->vp, sizeof(*v) * (size_t)n);
	if (v)
		d->vp = v;
	if (!s || !k || !v)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	d->n_att = n;
	return 0;
}

static void add_bias(float *y, const float *b, int n)
{
	int i;

	for (i = 0; b && i < n; i++)
		y[i] += b[i];
}

/* x += rmsnorm(o, w) */
static void add_normed(struct fg_draft_cpu *d, const float *w)
{
	const struct fg_g4_config *c = &d->a->cfg;
	int i;

	fg_cpu_rmsnorm(d->xn, d->o, w, c->hidden, c->eps);
	for (i = 0; i < c->hidden; i++)
		d->x[i] += d->xn[i];
}

/* Assistant layer li on d->x at position pos, keys and values from kv. */
static void layer(struct fg_draft_cpu *d, int li, const struct fg_draft_kv *kv, int pos)
{
	const struct fg_g4_config *c = &d->a->cfg;
	const struct fg_g4_layer *L = &d->a->layers[li];
	int H = c->hidden, dim = L->head_dim, nh = c->n_heads, nkv = L->kv_heads, group = nh / nkv;
	int ty = L->type, lo = first_pos(d, kv, ty, pos), n = pos - lo, h, s, i;
	float rs = (float)c->rope[ty].attention;

	fg_cpu_rmsnorm(d->xn, d->x, L->in_norm, H, c->eps);
	fg_cpu_matmul_rows(&L->q, d->xn, 1, d->q, 0, L->q.rows, d->row);
	add_bias(d->q, L->bq, nh * dim);
	for (h = 0; h < nh; h++) {
		float *qh = d->q + (size_t)h * (size_t)dim;

		fg_cpu_rmsnorm(qh, qh, L->q_norm, dim, c->eps);
		fg_cpu_rope_scaled(qh, dim, d->inv[ty], pos, rs);
	}
	for (h = 0; h < nh; h++) {
		for (s = 0; s < n; s++) {
			size_t slot = (size_t)((lo + s) % kv->cap[ty]);
			size_t off = (slot * (size_t)nkv + (size_t)(h / group)) * (size_t)dim;

			d->kp[s] = kv->k[ty] + off;
			d->vp[s] = kv->v[ty] + off;
		}
		fg_cpu_attend(d->att + (size_t)h * (size_t)dim, d->q + (size_t)h * (size_t)dim, dim, d->kp, d->vp, n,
			      d->scores);
	}
	fg_cpu_matmul_rows(&L->o, d->att, 1, d->o, 0, H, d->row);
	add_bias(d->o, L->bo, H);
	add_normed(d, L->post_attn_norm);

	fg_cpu_rmsnorm(d->xn, d->x, L->pre_ffw_norm, H, c->eps);
	fg_cpu_matmul_rows(&L->gate, d->xn, 1, d->g, 0, L->inter, d->row);
	fg_cpu_matmul_rows(&L->up, d->xn, 1, d->u, 0, L->inter, d->row);
	fg_cpu_gelu_tanh(d->g, L->inter);
	for (i = 0; i < L->inter; i++)
		d->g[i] *= d->u[i];
	fg_cpu_matmul_rows(&L->down, d->g, 1, d->o, 0, H, d->row);
	add_normed(d, L->post_ffw_norm);
	for (i = 0; i < H; i++)
		d->x[i] *= L->scalar;
}

/* The whole-vocabulary head: lg = lm_head(y), no softcap (the assistant's
 * forward applies none); the first largest logit's token, as torch.argmax. */
static int32_t plain_head(struct fg_draft_cpu *d, float *lg)
{
	const struct fg_g4_model *a = d->a;
	int32_t best = 0;
	int v;

	fg_cpu_matmul_rows(&a->head, d->y, 1, lg, 0, a->cfg.vocab, d->row);
	for (v = 1; v < a->cfg.vocab; v++)
		if (lg[v] > lg[best])
			best = v;
	return best;
}

/* Gemma4AssistantMaskedEmbedder: the top_k centroids of centroids(y) (the
 * largest first; on an exact tie the lower index, where torch.topk promises
 * no order), their tokens ordering[c * per .. c * per + per), logits
 * only for those; lg (may be NULL) gets them scattered over min(selected) - 1.
 * The token is the first largest in vocabulary order, as torch.argmax over
 * the scattered row. */
static int32_t masked_head(struct fg_draft_cpu *d, float *lg)
{
	const struct fg_g4_model *a = d->a;
	const struct fg_g4_config *c = &a->cfg;
	int K = c->centroid_top_k, per = c->vocab / c->n_centroids, i, j, n = 0;
	int32_t best = -1;
	float mn = INFINITY, bv = 0;

	fg_cpu_matmul_rows(&a->centroids, d->y, 1, d->cl, 0, c->n_centroids, d->row);
	for (i = 0; i < K; i++) {
		int b = -1, q;

		for (j = 0; j < c->n_centroids; j++) {
			int taken = 0;

			for (q = 0; q < i; q++)
				taken |= d->top[q] == j;
			if (!taken && (b < 0 || d->cl[j] > d->cl[b]))
				b = j;
		}
		d->top[i] = b;
	}
	for (i = 0; i < K; i++)
		for (j = 0; j < per; j++, n++) {
			int32_t tok = a->ordering[(size_t)d->top[i] * (size_t)per + (size_t)j];

			fg_cpu_lin_row(&a->head, tok, d->row);
			d->sel[n] = fg_cpu_dot(d->row, d->y, c->hidden);
			if (d->sel[n] < mn)
				mn = d->sel[n];
			if (best < 0 || d->sel[n] > bv || (d->sel[n] == bv && tok < best)) {
				best = tok;
				bv = d->sel[n];
			}
		}
	if (lg) {
		for (i = 0; i < c->vocab; i++)
			lg[i] = mn - 1.0f;
		for (i = 0, n = 0; i < K; i++)
			for (j = 0; j < per; j++, n++)
				lg[a->ordering[(size_t)d->top[i] * (size_t)per + (size_t)j]] = d->sel[n];
	}
	return best;
}

int fg_draft_cpu_propose(struct fg_draft_cpu *d, const struct fg_draft_kv *kv, const float *h, int32_t last, int pos,
			 int k, int32_t *out, float *logits, struct fg_err *err)
{
	const struct fg_g4_model *a = d->a, *t = d->t;
	const struct fg_g4_config *ac = &a->cfg, *tc = &t->cfg;
	int B = ac->backbone, j, i, ty, rc, need = 0;
	const float scale = (float)sqrt((double)tc->hidden);

	if (k < 1 || k > FG_DRAFT_MAX_K)
		return fg_err_set(err, FG_EINVAL, "drafts per round %d: out of the range 1..%d", k, FG_DRAFT_MAX_K);
	if (pos < 1)
		return fg_err_set(err, FG_EINVAL, "draft position %d: the target must have run a token first", pos);
	if (last < 0 || last >= tc->vocab)
		return fg_err_set(err, FG_EINVAL, "draft token %d is not below the vocabulary size %d", (int)last,
				  tc->vocab);
	for (ty = 0; ty < 2; ty++) {
		int n;

		if (!d->used[ty])
			continue;
		n = pos - first_pos(d, kv, ty, pos);
		if (!kv->k[ty] || !kv->v[ty] || kv->cap[ty] < n)
			return fg_err_set(err, FG_EINVAL, "the target's %s cache %s (the drafter reads %d positions)",
					  type_name(ty), kv->k[ty] && kv->v[ty] ? "is too short" : "is missing", n);
		need = max_i(need, n);
	}
	if ((rc = grow_att(d, need, err)))
		return rc;
	memcpy(d->h, h, sizeof(float) * (size_t)B);
	for (j = 0; j < k; j++) {
		float *lg = logits ? logits + (size_t)j * (size_t)ac->vocab : NULL;

		/* x = pre_projection(concat(target embedding of last, h)) */
		fg_cpu_lin_row(&t->embed, fg_g4_input_id(tc, last), d->in);
		for (i = 0; i < B; i++)
			d->in[i] *= scale;
		memcpy(d->in + B, d->h, sizeof(float) * (size_t)B);
		fg_cpu_matmul_rows(&a->pre_proj, d->in, 1, d->x, 0, ac->hidden, d->row);
		for (i = 0; i < ac->n_layers; i++)
			layer(d, i, kv, pos);
		fg_cpu_rmsnorm(d->y, d->x, a->final_norm, ac->hidden, ac->eps);
		last = ac->ordered_emb ? masked_head(d, lg) : plain_head(d, lg ? lg : d->lg);
		out[j] = last;
		fg_cpu_matmul_rows(&a->post_proj, d->y, 1, d->h, 0, B, d->row);
	}
	return 0;
}
