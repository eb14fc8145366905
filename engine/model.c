/* model.c - binds a checkpoint's tensors to struct fg_g4_model (model.h). */
#include "engine/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "buf.h"
#include "fsutil.h"
#include "safetensors.h"

#define CONFIG_MAX ((size_t)4 << 20)

static const struct fg_st_tensor *find(const struct fg_g4_model *m, const char *suffix)
{
	char name[512];

	if ((size_t)snprintf(name, sizeof(name), "%s%s", m->prefix, suffix) >= sizeof(name))
		return NULL;
	return fg_st_find(m->st, name);
}

static int shape_is(const struct fg_st_tensor *t, int ndim, uint64_t a, uint64_t b)
{
	if (t->ndim != ndim)
		return 0;
	if (ndim >= 1 && t->shape[0] != a)
		return 0;
	if (ndim == 2 && t->shape[1] != b)
		return 0;
	return 1;
}

static void shape_str(const struct fg_st_tensor *t, char *buf, size_t n)
{
	size_t used = 0;
	int i;

	buf[0] = 0;
	for (i = 0; i < t->ndim && used < n; i++)
		used += (size_t)snprintf(buf + used, n - used, "%s%llu", i ? " x " : "",
					 (unsigned long long)t->shape[i]);
}

/* A head pruned to a keepset: "lm_head.keep_ids" (I32 [K], sorted, unique,
 * below vocab) copied into m->keep; absent: m->keep stays NULL. Call with the
 * top-level (empty) prefix. */
static int bind_keep(struct fg_g4_model *m, struct fg_err *err)
{
	const struct fg_st_tensor *t = find(m, "lm_head.keep_ids");
	const uint8_t *b;
	uint64_t i;

	if (!t)
		return 0;
	if (t->dtype != FG_ST_I32 || t->ndim != 1 || t->nelem < 1 || t->nelem > (uint64_t)m->cfg.vocab)
		return fg_err_set(err, FG_EFORMAT, "%s: tensor lm_head.keep_ids: expected I32 [K] with 1 <= K <= %d",
				  t->file, m->cfg.vocab);
	if (!(m->keep = malloc(sizeof(int32_t) * (size_t)t->nelem)))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	b = t->data; /* the mapping need not be aligned */
	for (i = 0; i < t->nelem; i++) {
		m->keep[i] = (int32_t)fg_le32(b + 4 * i);
		if (m->keep[i] < 0 || m->keep[i] >= m->cfg.vocab || (i && m->keep[i] <= m->keep[i - 1]))
			return fg_err_set(err, FG_EFORMAT,
					  "%s: tensor lm_head.keep_ids: id %d at %llu is out of range (vocab %d) or "
					  "not above the one before",
					  t->file, (int)m->keep[i], (unsigned long long)i, m->cfg.vocab);
	}
	m->n_keep = (int)t->nelem;
	return 0;
}

/* *fmt = the FG_W_* format of float tensor t (shown as prefix + name in the
 * error), or FG_EUNSUPPORTED for a dtype the engine does not read. */
static int float_format(const struct fg_st_tensor *t, const char *prefix, const char *name, int *fmt,
			struct fg_err *err)
{
	if (t->dtype != FG_ST_BF16 && t->dtype != FG_ST_F16 && t->dtype != FG_ST_F32)
		return fg_err_set(err, FG_EUNSUPPORTED, "%s: tensor %s%s: dtype %s is not supported (BF16, F16, F32)",
				  t->file, prefix, name, fg_st_dtype_name(t->dtype));
	*fmt = t->dtype == FG_ST_BF16 ? FG_W_BF16 : t->dtype == FG_ST_F16 ? FG_W_F16 : FG_W_F32;
	return 0;
}

/* Binds linear <name> of shape [rows][cols]; optional: absent is fine. */
static int bind_lin(struct fg_g4_model *m, struct fg_lin *l, const char *name, int rows, int cols,
		    int optional, struct fg_err *err)
{
	char key[512], sh[96];
	const struct fg_st_tensor *t, *sc, *shp;

	memset(l, 0, sizeof(*l));
	l->rows = rows;
	l->cols = cols;
	snprintf(key, sizeof(key), "%s.weight", name);
	if ((t = find(m, key))) {
		int rc = float_format(t, m->prefix, key, &l->fmt, err);

		if (rc)
			return rc;
		if (!shape_is(t, 2, (uint64_t)rows, (uint64_t)cols)) {
			shape_str(t, sh, sizeof(sh));
			return fg_err_set(err, FG_EFORMAT, "%s: tensor %s%s has shape %s, expected %d x %d", t->file,
					  m->prefix, key, sh, rows, cols);
		}
		l->w = t->data;
		return 0;
	}
	snprintf(key, sizeof(key), "%s.weight_packed", name);
	if ((t = find(m, key))) {
		char k2[512];
		int32_t dims[2];
		uint64_t ngroups;

		snprintf(k2, sizeof(k2), "%s.weight_scale", name);
		sc = find(m, k2);
		if (!sc)
			return fg_err_set(err, FG_ENOTFOUND, "%s: tensor %s%s is missing (beside %s)", t->file, m->prefix,
					  k2, key);
		snprintf(k2, sizeof(k2), "%s.weight_shape", name);
		shp = find(m, k2);
		if (shp) {
			/* compressed-tensors writes int64 (torch.tensor(shape)); accept int32 too */
			const uint8_t *b = shp->data;
			int wide = shp->dtype == FG_ST_I64;

			if ((shp->dtype != FG_ST_I32 && !wide) || shp->nelem != 2)
				return fg_err_set(err, FG_EFORMAT, "%s: tensor %s%s: expected 2 I64 (or I32) values",
						  shp->file, m->prefix, k2);
			if (wide) {
				uint64_t d0 = fg_le32(b) | (uint64_t)fg_le32(b + 4) << 32;
				uint64_t d1 = fg_le32(b + 8) | (uint64_t)fg_le32(b + 12) << 32;

				dims[0] = d0 > 0x7fffffff ? -1 : (int32_t)d0;
				dims[1] = d1 > 0x7fffffff ? -1 : (int32_t)d1;
			} else {
				dims[0] = (int32_t)fg_le32(b);
				dims[1] = (int32_t)fg_le32(b + 4);
			}
			if (dims[0] != rows || dims[1] != cols)
				return fg_err_set(err, FG_EFORMAT, "%s: tensor %s%s says %d x %d, expected %d x %d",
						  shp->file, m->prefix, k2, dims[0], dims[1], rows, cols);
		}
		if (t->dtype != FG_ST_I32 || cols % 8 || !shape_is(t, 2, (uint64_t)rows, (uint64_t)cols / 8)) {
			shape_str(t, sh, sizeof(sh));
			return fg_err_set(err, FG_EFORMAT, "%s: tensor %s%s has dtype %s shape %s, expected I32 %d x %d",
					  t->file, m->prefix, key, fg_st_dtype_name(t->dtype), sh, rows, cols / 8);
		}
		snprintf(k2, sizeof(k2), "%s.weight_scale", name);
		ngroups = sc->ndim == 2 ? sc->shape[1] : 0;
		if (sc->dtype != FG_ST_BF16 || sc->ndim != 2 || sc->shape[0] != (uint64_t)rows || ngroups == 0 ||
		    (uint64_t)cols % ngroups || ((uint64_t)cols / ngroups) % 8) {
			shape_str(sc, sh, sizeof(sh));
			return fg_err_set(err, FG_EFORMAT,
					  "%s: tensor %s%s has dtype %s shape %s: expected BF16 %d x (%d / group), group a "
					  "multiple of 8", sc->file, m->prefix, k2, fg_st_dtype_name(sc->dtype), sh, rows,
					  cols);
		}
		l->fmt = FG_W_INT4;
		l->w = t->data;
		l->scale = sc->data;
		l->group = (int)((uint64_t)cols / ngroups);
		return 0;
	}
	if (optional)
		return 0;
	return fg_err_set(err, FG_ENOTFOUND, "%s: tensor %s%s.weight is missing from the checkpoint", m->dir,
			  m->prefix, name);
}

/* A vector [n] widened to a new fp32 array. */
static int bind_vec(struct fg_g4_model *m, float **out, const char *name, int n, struct fg_err *err)
{
	const struct fg_st_tensor *t = find(m, name);
	char sh[96];
	int i;

	*out = NULL;
	if (!t)
		return fg_err_set(err, FG_ENOTFOUND, "%s: tensor %s%s is missing from the checkpoint", m->dir,
				  m->prefix, name);
	if ((t->dtype != FG_ST_BF16 && t->dtype != FG_ST_F16 && t->dtype != FG_ST_F32) || t->nelem != (uint64_t)n ||
	    t->ndim > 1) {
		shape_str(t, sh, sizeof(sh));
		return fg_err_set(err, FG_EFORMAT, "%s: tensor %s%s has dtype %s shape [%s], expected BF16/F16/F32 [%d]",
				  t->file, m->prefix, name, fg_st_dtype_name(t->dtype), sh, n);
	}
	if (!(*out = malloc(sizeof(float) * (size_t)n)))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (i = 0; i < n; i++)
		(*out)[i] = fg_st_f32_at(t->data, t->dtype, (size_t)i);
	return 0;
}

static void note_format(struct fg_g4_model *m, const struct fg_lin *l, int *seen)
{
	int key = l->fmt == FG_W_INT4 ? 1000 + l->group : l->fmt;

	if (!l->w)
		return;
	if (*seen == 0)
		*seen = key;
	else if (*seen != key)
		*seen = -1;
	(void)m;
}

/* A gemma4_assistant's own tensors (top-level names): lm_head (only when
 * untied: transformers ties it to embed_tokens otherwise), pre_projection,
 * post_projection and, with use_ordered_embeddings, the masked embedding's
 * centroids and token_ordering. A pruned head (lm_head.keep_ids) is refused:
 * the masked head reads rows by token id. Restores m->prefix. */
static int bind_assistant(struct fg_g4_model *m, int *seen, struct fg_err *err)
{
	const struct fg_g4_config *c = &m->cfg;
	const struct fg_st_tensor *t;
	char saved[64];
	uint64_t i;
	int rc;

	memcpy(saved, m->prefix, sizeof(saved));
	m->prefix[0] = 0;
	if (find(m, "lm_head.keep_ids")) {
		rc = fg_err_set(err, FG_EUNSUPPORTED, "%s: tensor lm_head.keep_ids: a pruned head is not supported in a "
				"gemma4_assistant", find(m, "lm_head.keep_ids")->file);
		goto out;
	}
	if (!c->tie_embeddings) {
		if ((rc = bind_lin(m, &m->head, "lm_head", c->vocab, c->hidden, 0, err)))
			goto out;
	}
	if ((rc = bind_lin(m, &m->pre_proj, "pre_projection", c->hidden, 2 * c->backbone, 0, err)) ||
	    (rc = bind_lin(m, &m->post_proj, "post_projection", c->backbone, c->hidden, 0, err)))
		goto out;
	note_format(m, &m->pre_proj, seen);
	note_format(m, &m->post_proj, seen);
	if (!c->ordered_emb) {
		rc = 0;
		goto out;
	}
	if ((rc = bind_lin(m, &m->centroids, "masked_embedding.centroids", c->n_centroids, c->hidden, 0, err)))
		goto out;
	note_format(m, &m->centroids, seen);
	/* an nn.Buffer of torch.long: I64 as transformers saves it (I32 read too) */
	t = find(m, "masked_embedding.token_ordering");
	if (!t) {
		rc = fg_err_set(err, FG_ENOTFOUND, "%s: tensor masked_embedding.token_ordering is missing from the "
				"checkpoint", m->dir);
		goto out;
	}
	if ((t->dtype != FG_ST_I64 && t->dtype != FG_ST_I32) || t->ndim != 1 || t->nelem != (uint64_t)c->vocab) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: tensor masked_embedding.token_ordering: expected I64 (or I32) [%d], "
				"found %s with %llu values", t->file, c->vocab, fg_st_dtype_name(t->dtype),
				(unsigned long long)t->nelem);
		goto out;
	}
	if (!(m->ordering = malloc(sizeof(int32_t) * (size_t)c->vocab))) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < t->nelem; i++) {
		const uint8_t *b = (const uint8_t *)t->data + i * (t->dtype == FG_ST_I64 ? 8 : 4);
		int64_t id = t->dtype == FG_ST_I64 ? (int64_t)(fg_le32(b) | (uint64_t)fg_le32(b + 4) << 32)
						   : (int64_t)(int32_t)fg_le32(b);

		if (id < 0 || id >= c->vocab) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: tensor masked_embedding.token_ordering: id %lld at %llu is "
					"out of range (vocab %d)", t->file, (long long)id, (unsigned long long)i, c->vocab);
			goto out;
		}
		m->ordering[i] = (int32_t)id;
	}
	rc = 0;
out:
	memcpy(m->prefix, saved, sizeof(saved));
	return rc;
}

/* One 3-D expert tensor, as transformers saves it: a float dtype the engine
 * reads and shape [E][a][b]; *fmt gets its FG_W_* format, *esz its element size. */
static int expert_tensor(const struct fg_st_tensor *t, int E, int a, int b, int *fmt, size_t *esz,
			 struct fg_err *err)
{
	char sh[96];
	int rc = float_format(t, "", t->name, fmt, err);

	if (rc)
		return rc;
	if (t->ndim != 3 || t->shape[0] != (uint64_t)E || t->shape[1] != (uint64_t)a || t->shape[2] != (uint64_t)b) {
		shape_str(t, sh, sizeof(sh));
		return fg_err_set(err, FG_EFORMAT, "%s: tensor %s has shape %s, expected %d x %d x %d", t->file, t->name,
				  sh, E, a, b);
	}
	*esz = fg_st_dtype_size(t->dtype);
	return 0;
}

/* Layer li's router, experts and extra norms (struct fg_g4_moe, model.h). */
static int bind_moe(struct fg_g4_model *m, struct fg_g4_layer *L, int li, int *seen, struct fg_err *err)
{
	const struct fg_g4_config *c = &m->cfg;
	int E = c->n_experts, I = c->moe_inter, H = c->hidden, ex, rc, gfmt = 0, dfmt = 0;
	const struct fg_st_tensor *gu, *dn;
	struct fg_g4_moe *x;
	char name[160], dname[160];
	size_t gsz = 0, dsz = 0;

	if (!(x = L->moe = calloc(1, sizeof(*x))) || !(x->gate = calloc((size_t)E, sizeof(*x->gate))) ||
	    !(x->up = calloc((size_t)E, sizeof(*x->up))) || !(x->down = calloc((size_t)E, sizeof(*x->down))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
#define MVEC(field, nm, n)                                                            \
	snprintf(name, sizeof(name), "layers.%d.%s", li, nm);                          \
	if ((rc = bind_vec(m, &x->field, name, n, err)))                               \
		return rc
	snprintf(name, sizeof(name), "layers.%d.router.proj", li);
	if ((rc = bind_lin(m, &x->router, name, E, H, 0, err)))
		return rc;
	MVEC(router_scale, "router.scale", H);
	MVEC(expert_scale, "router.per_expert_scale", E);
	MVEC(pre_norm_2, "pre_feedforward_layernorm_2.weight", H);
	MVEC(post_norm_1, "post_feedforward_layernorm_1.weight", H);
	MVEC(post_norm_2, "post_feedforward_layernorm_2.weight", H);
#undef MVEC
	snprintf(name, sizeof(name), "layers.%d.experts.gate_up_proj", li);
	snprintf(dname, sizeof(dname), "layers.%d.experts.down_proj", li);
	gu = find(m, name);
	dn = find(m, dname);
	if (gu || dn) {
		if (!gu || !dn)
			return fg_err_set(err, FG_ENOTFOUND, "%s: tensor %s%s is missing from the checkpoint (beside %s%s)",
					  (gu ? gu : dn)->file, m->prefix, gu ? dname : name, m->prefix, gu ? name : dname);
		if ((rc = expert_tensor(gu, E, 2 * I, H, &gfmt, &gsz, err)) ||
		    (rc = expert_tensor(dn, E, H, I, &dfmt, &dsz, err)))
			return rc;
		for (ex = 0; ex < E; ex++) {
			const uint8_t *g = (const uint8_t *)gu->data + (size_t)ex * 2 * (size_t)I * (size_t)H * gsz;
			const struct fg_lin gate = { gfmt, I, H, g, NULL, 0 };
			const struct fg_lin up = { gfmt, I, H, g + (size_t)I * (size_t)H * gsz, NULL, 0 };
			const struct fg_lin down = { dfmt, H, I,
						     (const uint8_t *)dn->data + (size_t)ex * (size_t)H * (size_t)I * dsz,
						     NULL, 0 };

			x->gate[ex] = gate;
			x->up[ex] = up;
			x->down[ex] = down;
		}
	} else {
		/* per-expert 2-D linears; say which tensor is missing in the
		 * layout transformers writes when there are none at all */
		char k0[200], k1[200];

		snprintf(k0, sizeof(k0), "layers.%d.experts.0.gate_proj.weight", li);
		snprintf(k1, sizeof(k1), "layers.%d.experts.0.gate_proj.weight_packed", li);
		if (!find(m, k0) && !find(m, k1))
			return fg_err_set(err, FG_ENOTFOUND, "%s: tensor %s%s is missing from the checkpoint", m->dir,
					  m->prefix, name);
		for (ex = 0; ex < E; ex++) {
			snprintf(name, sizeof(name), "layers.%d.experts.%d.gate_proj", li, ex);
			if ((rc = bind_lin(m, &x->gate[ex], name, I, H, 0, err)))
				return rc;
			snprintf(name, sizeof(name), "layers.%d.experts.%d.up_proj", li, ex);
			if ((rc = bind_lin(m, &x->up[ex], name, I, H, 0, err)))
				return rc;
			snprintf(name, sizeof(name), "layers.%d.experts.%d.down_proj", li, ex);
			if ((rc = bind_lin(m, &x->down[ex], name, H, I, 0, err)))
				return rc;
		}
	}
	for (ex = 0; ex < E; ex++) {
		note_format(m, &x->gate[ex], seen);
		note_format(m, &x->up[ex], seen);
		note_format(m, &x->down[ex], seen);
	}
	return 0;
}

static void free_moe(struct fg_g4_moe *x)
{
	if (!x)
		return;
	free(x->router_scale);
	free(x->expert_scale);
	free(x->gate);
	free(x->up);
	free(x->down);
	free(x->pre_norm_2);
	free(x->post_norm_1);
	free(x->post_norm_2);
	free(x);
}

/* dir/config.json into *cfg, then dir/generation_config.json when present. */
static int load_config(struct fg_g4_config *cfg, const char *dir, struct fg_err *err)
{
	struct fg_buf path = FG_BUF_INIT, text = FG_BUF_INIT;
	int rc;

	if ((rc = fg_path_join(&path, dir, "config.json", err)) ||
	    (rc = fg_file_read(path.data, CONFIG_MAX, &text, err)) ||
	    (rc = fg_g4_config_parse(cfg, text.data, text.len, path.data, err)))
		goto out;
	/* generation_config.json beside it, as transformers' from_pretrained
	 * loads it (GenerationMixin.adjust_generation_fn): when present it is
	 * the generation config, config.json's ids are not consulted */
	fg_buf_reset(&path);
	fg_buf_reset(&text);
	if ((rc = fg_path_join(&path, dir, "generation_config.json", err)))
		goto out;
	rc = fg_file_read(path.data, CONFIG_MAX, &text, err);
	if (rc == FG_ENOTFOUND) {
		fg_err_clear(err);
		rc = 0;
	} else if (!rc)
		rc = fg_g4_gen_parse(cfg, text.data, text.len, path.data, err);
out:
	fg_buf_release(&path);
	fg_buf_release(&text);
	return rc;
}

/* Binds every tensor the model reads from m->st, checking each against
 * m->cfg; m->dir names the folder in messages. */
static int bind_all(struct fg_g4_model *m, struct fg_err *err)
{
	const struct fg_g4_config *c = &m->cfg;
	const char *dir = m->dir;
	char name[160];
	int rc, i, seen = 0;

	if (fg_st_find(m->st, "model.language_model.embed_tokens.weight"))
		snprintf(m->prefix, sizeof(m->prefix), "model.language_model.");
	else if (fg_st_find(m->st, "model.embed_tokens.weight"))
		snprintf(m->prefix, sizeof(m->prefix), "model.");
	else {
		return fg_err_set(err, FG_ENOTFOUND,
				  "%s: tensor model.language_model.embed_tokens.weight (or model.embed_tokens.weight) is "
				  "missing from the checkpoint", dir);
	}
	if ((rc = bind_lin(m, &m->embed, "embed_tokens", c->vocab, c->hidden, 0, err)))
		goto fail;
	if (m->embed.fmt == FG_W_INT4) {
		rc = fg_err_set(err, FG_EUNSUPPORTED, "%s: tensor %sembed_tokens: an INT4 embedding is not supported",
				dir, m->prefix);
		goto fail;
	}
	m->head = m->embed;
	if (c->assistant) {
		if ((rc = bind_assistant(m, &seen, err)))
			goto fail;
	} else {
		/* an untied (possibly INT4) head is "lm_head.*" at the top level */
		char saved[64];

		memcpy(saved, m->prefix, sizeof(saved));
		m->prefix[0] = 0;
		if ((rc = bind_keep(m, err)) == 0)
			rc = bind_lin(m, &m->head, "lm_head", m->keep ? m->n_keep : c->vocab, c->hidden,
				      c->tie_embeddings && !m->keep, err);
		memcpy(m->prefix, saved, sizeof(saved));
		if (rc)
			goto fail;
		if (!m->head.w)
			m->head = m->embed;
	}
	if ((rc = bind_vec(m, &m->final_norm, "norm.weight", c->hidden, err)))
		goto fail;
	if (c->ple_dim) {
		if ((rc = bind_lin(m, &m->ple_embed, "embed_tokens_per_layer", c->ple_vocab, c->n_layers * c->ple_dim,
				   0, err)) ||
		    (rc = bind_lin(m, &m->ple_model_proj, "per_layer_model_projection", c->n_layers * c->ple_dim,
				   c->hidden, 0, err)) ||
		    (rc = bind_vec(m, &m->ple_proj_norm, "per_layer_projection_norm.weight", c->ple_dim, err)))
			goto fail;
		if (m->ple_embed.fmt == FG_W_INT4) {
			rc = fg_err_set(err, FG_EUNSUPPORTED, "%s: tensor %sembed_tokens_per_layer: INT4 is not supported",
					dir, m->prefix);
			goto fail;
		}
		note_format(m, &m->ple_model_proj, &seen);
	}
	if (!(m->layers = calloc((size_t)c->n_layers, sizeof(*m->layers)))) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto fail;
	}
	for (i = 0; i < c->n_layers; i++) {
		struct fg_g4_layer *L = &m->layers[i];
		int d = fg_g4_layer_head_dim(c, i), own = i < fg_g4_first_shared(c);
		int H = c->hidden, qd = c->n_heads * d, kvd = fg_g4_layer_kv_heads(c, i) * d;

		L->type = c->layer_type[i];
		L->kv_heads = fg_g4_layer_kv_heads(c, i);
		L->v_is_k = fg_g4_layer_v_is_k(c, i);
		L->head_dim = d;
		L->inter = fg_g4_layer_inter(c, i);
		L->kv_src = fg_g4_kv_source(c, i);
#define LIN(field, nm, r, cc)                                                        \
	snprintf(name, sizeof(name), "layers.%d.%s", i, nm);                          \
	if ((rc = bind_lin(m, &L->field, name, r, cc, 0, err)))                       \
		goto fail;                                                            \
	note_format(m, &L->field, &seen)
#define VEC(field, nm, n)                                                            \
	snprintf(name, sizeof(name), "layers.%d.%s", i, nm);                          \
	if ((rc = bind_vec(m, &L->field, name, n, err)))                              \
		goto fail
		LIN(q, "self_attn.q_proj", qd, H);
		LIN(o, "self_attn.o_proj", H, qd);
		VEC(q_norm, "self_attn.q_norm.weight", d);
		if (own) {
			LIN(k, "self_attn.k_proj", kvd, H);
			if (L->v_is_k)
				L->v = L->k; /* attention_k_eq_v: values from k_proj, before k_norm and RoPE */
			else {
				LIN(v, "self_attn.v_proj", kvd, H);
			}
			VEC(k_norm, "self_attn.k_norm.weight", d);
		}
		if (c->attn_bias) { /* nn.Linear(..., bias=config.attention_bias) */
			VEC(bq, "self_attn.q_proj.bias", qd);
			VEC(bo, "self_attn.o_proj.bias", H);
			if (own) {
				VEC(bk, "self_attn.k_proj.bias", kvd);
				if (L->v_is_k)
					L->bv = L->bk; /* v is k_proj's whole output, bias included */
				else {
					VEC(bv, "self_attn.v_proj.bias", kvd);
				}
			}
		}
		LIN(gate, "mlp.gate_proj", L->inter, H);
		LIN(up, "mlp.up_proj", L->inter, H);
		LIN(down, "mlp.down_proj", H, L->inter);
		if (c->ple_dim) {
			LIN(ple_gate, "per_layer_input_gate", c->ple_dim, H);
			LIN(ple_proj, "per_layer_projection", H, c->ple_dim);
			VEC(post_ple_norm, "post_per_layer_input_norm.weight", H);
		}
		VEC(in_norm, "input_layernorm.weight", H);
		VEC(post_attn_norm, "post_attention_layernorm.weight", H);
		VEC(pre_ffw_norm, "pre_feedforward_layernorm.weight", H);
		VEC(post_ffw_norm, "post_feedforward_layernorm.weight", H);
		{
			float *s = NULL;

			snprintf(name, sizeof(name), "layers.%d.layer_scalar", i);
			if ((rc = bind_vec(m, &s, name, 1, err)))
				goto fail;
			L->scalar = s[0];
			free(s);
		}
		if (c->n_experts && (rc = bind_moe(m, L, i, &seen, err)))
			goto fail;
#undef LIN
#undef VEC
	}
	if (seen == FG_W_BF16)
		m->format = "bf16";
	else if (seen == FG_W_F32)
		m->format = "f32";
	else if (seen == FG_W_F16)
		m->format = "f16";
	else if (seen >= 1000) {
		snprintf(m->format_buf, sizeof(m->format_buf), "int4-g%d", seen - 1000);
		m->format = m->format_buf;
	} else
		m->format = "mixed";
	return 0;
fail:
	return rc;
}

int fg_g4_model_load(struct fg_g4_model **out, const char *dir, struct fg_err *err)
{
	struct fg_g4_model *m;
	int rc;

	*out = NULL;
	if (!(m = calloc(1, sizeof(*m))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	m->dir = dir;
	if (!(rc = load_config(&m->cfg, dir, err)) && !(rc = fg_st_open(&m->st, dir, err)))
		rc = bind_all(m, err);
	m->dir = NULL;
	if (rc) {
		fg_g4_model_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

int fg_g4_model_check(const char *dir, struct fg_st_set *st, struct fg_err *err)
{
	struct fg_g4_model *m;
	int rc;

	if (!(m = calloc(1, sizeof(*m))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	m->dir = dir;
	if (!(rc = load_config(&m->cfg, dir, err))) {
		m->st = st; /* borrowed: not freed with m */
		rc = bind_all(m, err);
		m->st = NULL;
	}
	fg_g4_model_free(m);
	return rc;
}

void fg_g4_model_free(struct fg_g4_model *m)
{
	int i;

	if (!m)
		return;
	if (m->layers)
		for (i = 0; i < m->cfg.n_layers; i++) {
			struct fg_g4_layer *L = &m->layers[i];

			free(L->q_norm);
			free(L->k_norm);
			free(L->bq);
			free(L->bk);
			if (L->bv != L->bk)
				free(L->bv);
			free(L->bo);
			free(L->in_norm);
			free(L->post_attn_norm);
			free(L->pre_ffw_norm);
			free(L->post_ffw_norm);
			free(L->post_ple_norm);
			free_moe(L->moe);
		}
	free(m->layers);
	free(m->ple_proj_norm);
	free(m->final_norm);
	free(m->keep);
	free(m->ordering);
	fg_st_free(m->st);
	free(m);
}
