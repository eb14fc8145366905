/* config.c - config.json -> struct fg_g4_config (see config.h). */
#include "engine/config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define BAD(key, ...) fg_err_set(err, FG_EUNSUPPORTED, "%s: " key, what, __VA_ARGS__)

static const cJSON *get(const cJSON *text, const cJSON *top, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(text, key);

	if (!v && top && top != text)
		v = cJSON_GetObjectItemCaseSensitive(top, key);
	return v;
}

static int is_null(const cJSON *v)
{
	return !v || cJSON_IsNull(v);
}

/* Integer key: required (def < 0 means required) or default def. */
static int get_int(const cJSON *text, const cJSON *top, const char *key, long long def, long long lo,
		   long long hi, int *out, const char *what, struct fg_err *err)
{
	const cJSON *v = get(text, top, key);
	double d;

	if (is_null(v)) {
		if (def < 0)
			return fg_err_set(err, FG_EFORMAT, "%s: missing key %s", what, key);
		*out = (int)def;
		return 0;
	}
	if (!cJSON_IsNumber(v))
		return fg_err_set(err, FG_EFORMAT, "%s: key %s is not a number", what, key);
	d = v->valuedouble;
	if (d != floor(d) || d < (double)lo || d > (double)hi)
		return fg_err_set(err, FG_EUNSUPPORTED, "%s: key %s = %g is out of the supported range %lld..%lld",
				  what, key, d, lo, hi);
	*out = (int)d;
	return 0;
}

static int get_bool(const cJSON *text, const cJSON *top, const char *key, int def, int *out,
		    const char *what, struct fg_err *err)
{
	const cJSON *v = get(text, top, key);

	if (is_null(v)) {
		*out = def;
		return 0;
	}
	if (!cJSON_IsBool(v))
		return fg_err_set(err, FG_EFORMAT, "%s: key %s is not a boolean", what, key);
	*out = cJSON_IsTrue(v);
	return 0;
}

/* an integer id a token can have (0 .. INT32_MAX) */
static int is_token_id(const cJSON *v)
{
	return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && v->valuedouble >= 0 &&
	       v->valuedouble <= (double)INT32_MAX;
}

static int add_eos(struct fg_g4_config *c, const cJSON *v, const char *what, struct fg_err *err)
{
	const cJSON *it;
	int i;

	if (is_null(v))
		return 0;
	if (cJSON_IsNumber(v)) {
		if (!is_token_id(v))
			return fg_err_set(err, FG_EFORMAT, "%s: key eos_token_id holds %g, not a token id (an integer >= 0)",
					  what, v->valuedouble);
		for (i = 0; i < c->n_eos; i++)
			if (c->eos[i] == (int32_t)v->valuedouble)
				return 0;
		if (c->n_eos == FG_G4_MAX_EOS)
			return fg_err_set(err, FG_EUNSUPPORTED, "%s: key eos_token_id holds more than %d ids", what, FG_G4_MAX_EOS);
		c->eos[c->n_eos++] = (int32_t)v->valuedouble;
		return 0;
	}
	if (!cJSON_IsArray(v))
		return fg_err_set(err, FG_EFORMAT, "%s: key eos_token_id is not a number or list", what);
	cJSON_ArrayForEach(it, v) {
		if (!cJSON_IsNumber(it))
			return fg_err_set(err, FG_EFORMAT, "%s: key eos_token_id holds a non-number", what);
		if (add_eos(c, it, what, err))
			return err ? err->code : FG_EFORMAT;
	}
	return 0;
}

/* A number key of one rope_parameters entry: *out set when present and a
 * number; 1 if absent or null, 0 if set, -1 if present but not a number. */
static int rope_num(const cJSON *p, const char *key, double *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, key);

	if (is_null(v))
		return 1;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return -1;
	*out = v->valuedouble;
	return 0;
}

/* yarn's get_mscale (transformers' modeling_rope_utils), in double */
static double yarn_mscale(double scale, double m)
{
	return scale <= 1 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

/* One layer type's rope_parameters, as transformers 5.17 reads them for
 * Gemma 4 (Gemma4TextRotaryEmbedding: "default" is its own function, which
 * ignores factor and partial_rotary_factor; other types go through
 * ROPE_INIT_FUNCTIONS). max_pos: max_position_embeddings. */
static int parse_rope(struct fg_g4_rope *r, const cJSON *params, const char *type, int full, int max_pos,
		      const char *what, struct fg_err *err)
{
	static const char *const req[][5] = {
		[FG_ROPE_LINEAR] = {"factor", NULL},
		[FG_ROPE_DYNAMIC] = {"factor", NULL},
		[FG_ROPE_YARN] = {"original_max_position_embeddings", NULL},
		[FG_ROPE_LLAMA3] = {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings",
				    NULL},
	};
	const cJSON *p = params ? cJSON_GetObjectItemCaseSensitive(params, type) : NULL;
	const cJSON *v;
	const char *rt;
	double ms = 0, msa = 0, x;
	int i, af_absent;

	/* transformers' defaults when rope_parameters is absent */
	memset(r, 0, sizeof(*r));
	r->theta = full ? 1e6 : 1e4;
	r->proportional = full;
	r->type = full ? FG_ROPE_PROPORTIONAL : FG_ROPE_DEFAULT;
	r->partial = full ? 0.25 : 1.0;
	r->factor = 1.0;
	r->attention = 1.0;
	r->max_position = max_pos;
	if (!params)
		return 0;
	if (!p || !cJSON_IsObject(p))
		return BAD("key rope_parameters.%s is missing", type);
	/* "type" is the old name of "rope_type" (transformers' validate_rope) */
	rt = fg_json_str(p, "rope_type");
	if (!rt && is_null(cJSON_GetObjectItemCaseSensitive(p, "rope_type")))
		rt = fg_json_str(p, "type");
	if (!rt || !strcmp(rt, "default"))
		r->type = FG_ROPE_DEFAULT;
	else if (!strcmp(rt, "proportional"))
		r->type = FG_ROPE_PROPORTIONAL;
	else if (!strcmp(rt, "linear"))
		r->type = FG_ROPE_LINEAR;
	else if (!strcmp(rt, "dynamic"))
		r->type = FG_ROPE_DYNAMIC;
	else if (!strcmp(rt, "yarn"))
		r->type = FG_ROPE_YARN;
	else if (!strcmp(rt, "llama3"))
		r->type = FG_ROPE_LLAMA3;
	else if (!strcmp(rt, "longrope"))
		return BAD("key rope_parameters.%s.rope_type = \"longrope\" is not supported (transformers 5.17 "
			   "cannot build a Gemma 4 config with it: its validation reads the per-layer head_dim)", type);
	else
		return BAD("key rope_parameters.%s.rope_type = \"%s\" is not supported (default, proportional, "
			   "linear, dynamic, yarn, llama3)", type, rt);
	r->proportional = r->type == FG_ROPE_PROPORTIONAL;
	v = cJSON_GetObjectItemCaseSensitive(p, "rope_theta");
	if (!v || !cJSON_IsNumber(v) || v->valuedouble <= 0)
		return BAD("key rope_parameters.%s.rope_theta is missing or not positive", type);
	r->theta = v->valuedouble;
	for (i = 0; r->type < (int)(sizeof(req) / sizeof(req[0])) && i < 5 && req[r->type][i]; i++)
		if (rope_num(p, req[r->type][i], &x))
			return BAD("key rope_parameters.%s.%s is missing or not a number (rope_type %s)", type,
				   req[r->type][i], rt);
	r->partial = 1.0;
	if (rope_num(p, "partial_rotary_factor", &r->partial) < 0)
		return BAD("key rope_parameters.%s.partial_rotary_factor is not a number", type);
	if (r->type == FG_ROPE_DEFAULT)
		r->partial = 1.0; /* Gemma 4's own default rotates the whole head */
	else if (r->type == FG_ROPE_PROPORTIONAL) {
		if (r->partial <= 0 || r->partial > 1)
			return BAD("key rope_parameters.%s.partial_rotary_factor = %g is out of range", type,
				   r->partial);
	} else if (r->partial != 1.0)
		/* int(head_dim * partial) frequencies: cos/sin shorter than the
		 * head, which transformers' apply_rotary_pos_emb cannot broadcast */
		return BAD("key rope_parameters.%s.partial_rotary_factor = %g needs rope_type proportional", type,
			   r->partial);
	if (r->type == FG_ROPE_DEFAULT)
		return 0; /* factor ignored, as Gemma4TextRotaryEmbedding does */
	if (rope_num(p, "factor", &r->factor) < 0)
		return BAD("key rope_parameters.%s.factor is not a number", type);
	if (r->type == FG_ROPE_YARN || r->type == FG_ROPE_LLAMA3) {
		rope_num(p, "original_max_position_embeddings", &x);
		if (x <= 0)
			return BAD("key rope_parameters.%s.original_max_position_embeddings = %g is not positive", type,
				   x);
		r->orig_max = x;
	}
	if (r->type == FG_ROPE_YARN && !cJSON_GetObjectItemCaseSensitive(p, "factor"))
		return BAD("key rope_parameters.%s.factor is missing (rope_type yarn)", type);
	if (r->type == FG_ROPE_YARN && is_null(cJSON_GetObjectItemCaseSensitive(p, "factor")))
		r->factor = (double)max_pos / r->orig_max; /* transformers: factor None */
	if (r->factor <= 0)
		return BAD("key rope_parameters.%s.factor = %g is not positive", type, r->factor);
	if (r->type == FG_ROPE_LLAMA3) {
		rope_num(p, "low_freq_factor", &r->low_freq);
		rope_num(p, "high_freq_factor", &r->high_freq);
		if (r->low_freq <= 0 || r->high_freq == r->low_freq)
			return BAD("key rope_parameters.%s.low_freq_factor/high_freq_factor = %g/%g must be positive and "
				   "differ", type, r->low_freq, r->high_freq);
	}
	if (r->type != FG_ROPE_YARN)
		return 0;
	/* beta_fast/beta_slow: `or 32` / `or 1` (null and 0 give the default) */
	r->beta_fast = 32;
	r->beta_slow = 1;
	if (rope_num(p, "beta_fast", &x) < 0 || rope_num(p, "beta_slow", &x) < 0 ||
	    rope_num(p, "mscale", &x) < 0 || rope_num(p, "mscale_all_dim", &x) < 0)
		return BAD("key rope_parameters.%s: beta_fast, beta_slow, mscale, mscale_all_dim must be numbers", type);
	if (!rope_num(p, "beta_fast", &x) && x != 0)
		r->beta_fast = x;
	if (!rope_num(p, "beta_slow", &x) && x != 0)
		r->beta_slow = x;
	if (r->beta_fast <= 0 || r->beta_slow <= 0)
		return BAD("key rope_parameters.%s.beta_fast/beta_slow = %g/%g must be positive", type, r->beta_fast,
			   r->beta_slow);
	rope_num(p, "mscale", &ms);
	rope_num(p, "mscale_all_dim", &msa);
	af_absent = rope_num(p, "attention_factor", &r->attention);
	if (af_absent < 0)
		return BAD("key rope_parameters.%s.attention_factor is not a number", type);
	if (af_absent)
		r->attention = ms != 0 && msa != 0 ? yarn_mscale(r->factor, ms) / yarn_mscale(r->factor, msa)
						   : yarn_mscale(r->factor, 1);
	/* "truncate" is read by transformers 5.17 from the whole rope_parameters
	 * (config.rope_parameters.get("truncate", True)), which for Gemma 4 is
	 * keyed by layer type: a per-type truncate is ignored, always true */
	return 0;
}

static int parse_quant(struct fg_g4_config *c, const cJSON *q, const char *what, struct fg_err *err)
{
	const cJSON *groups, *g;
	const char *s;

	if (is_null(q))
		return 0;
	s = fg_json_str(q, "quant_method");
	if (!s || strcmp(s, "compressed-tensors"))
		return BAD("key quantization_config.quant_method = \"%s\" is not supported (compressed-tensors)",
			   s ? s : "");
	s = fg_json_str(q, "format");
	if (s && strcmp(s, "pack-quantized"))
		return BAD("key quantization_config.format = \"%s\" is not supported (pack-quantized)", s);
	groups = fg_json_obj(q, "config_groups");
	if (!groups)
		return BAD("key %s is missing", "quantization_config.config_groups");
	cJSON_ArrayForEach(g, groups) {
		const cJSON *w = fg_json_obj(g, "weights");
		long long bits, gs;
		const cJSON *sym;

		if (!w)
			return BAD("key quantization_config.config_groups.%s.weights is missing", g->string);
		if (fg_json_int(w, "num_bits", &bits) || bits != 4)
			return BAD("key quantization_config.config_groups.%s.weights.num_bits is not 4", g->string);
		sym = cJSON_GetObjectItemCaseSensitive(w, "symmetric");
		if (!cJSON_IsTrue(sym))
			return BAD("key quantization_config.config_groups.%s.weights.symmetric must be true",
				   g->string);
		s = fg_json_str(w, "strategy");
		if (!s || strcmp(s, "group"))
			return BAD("key quantization_config.config_groups.%s.weights.strategy = \"%s\" is not "
				   "supported (group)", g->string, s ? s : "");
		s = fg_json_str(w, "type");
		if (s && strcmp(s, "int"))
			return BAD("key quantization_config.config_groups.%s.weights.type = \"%s\" is not "
				   "supported (int)", g->string, s);
		if (!is_null(cJSON_GetObjectItemCaseSensitive(w, "actorder")))
			return BAD("key quantization_config.config_groups.%s.weights.actorder is not supported",
				   g->string);
		if (fg_json_int(w, "group_size", &gs) || gs < 8 || gs % 8)
			return BAD("key quantization_config.config_groups.%s.weights.group_size is not a multiple "
				   "of 8", g->string);
		c->quant_group = (int)gs;
	}
	return 0;
}

/* enable_moe_block and, when true, num_experts / top_k_experts /
 * moe_intermediate_size (Gemma4TextConfig has no defaults for them: None).
 * Without it the three keys are not read, as in transformers. */
static int parse_moe(struct fg_g4_config *c, const cJSON *text, const char *what, struct fg_err *err)
{
	int on, rc;

	if ((rc = get_bool(text, NULL, "enable_moe_block", 0, &on, what, err)))
		return rc;
	if (!on)
		return 0;
	if ((rc = get_int(text, NULL, "num_experts", -1, 1, 4096, &c->n_experts, what, err)) ||
	    (rc = get_int(text, NULL, "top_k_experts", -1, 1, 4096, &c->top_k, what, err)) ||
	    (rc = get_int(text, NULL, "moe_intermediate_size", -1, 1, 1 << 20, &c->moe_inter, what, err)))
		return rc;
	if (c->top_k > c->n_experts)
		return BAD("key top_k_experts = %d exceeds num_experts = %d", c->top_k, c->n_experts);
	return 0;
}

/* The placeholders of a nested (Gemma4Config) config: Gemma4Model's forward
 * replaces image_token_id, video_token_id and audio_token_id in input_ids by
 * text_config.pad_token_id before the embedding and the per-layer inputs.
 * An absent key takes Gemma4Config's default, null means none; a flat
 * (Gemma4TextConfig, Gemma4ForCausalLM) config has none. */
static int mm_ids(struct fg_g4_config *c, const cJSON *text, const cJSON *top, const char *what,
		  struct fg_err *err)
{
	static const struct { const char *key; int32_t def; } ph[] = {
		{ "image_token_id", 258880 }, { "video_token_id", 258884 }, { "audio_token_id", 258881 } };
	const cJSON *v = get(text, NULL, "pad_token_id");
	double id;
	size_t i;

	c->n_mm_ids = 0;
	c->pad = -1;
	if (text == top || c->assistant) /* an assistant never embeds its own inputs */
		return 0;
	if (v && !cJSON_IsNull(v) && (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= c->vocab ||
				      v->valuedouble != floor(v->valuedouble)))
		return BAD("key pad_token_id is not a token id below vocab_size %d", c->vocab);
	c->pad = !v ? 0 : cJSON_IsNull(v) ? -1 : (int32_t)v->valuedouble; /* Gemma4TextConfig: 0 */
	if (c->pad < 0)
		return 0;
	for (i = 0; i < sizeof(ph) / sizeof(ph[0]); i++) {
		v = cJSON_GetObjectItemCaseSensitive(top, ph[i].key);
		if (v && cJSON_IsNull(v))
			continue;
		if (v && (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble)))
			return fg_err_set(err, FG_EFORMAT, "%s: key %s is not an integer", what, ph[i].key);
		id = v ? v->valuedouble : (double)ph[i].def;
		if (id >= 0 && id < c->vocab) /* else no input id can be it */
			c->mm_ids[c->n_mm_ids++] = (int32_t)id;
	}
	return 0;
}

/* A per-layer integer override that the engine can only take when it equals
 * the model-wide value. */
static int same_or_bad(const cJSON *o, const char *key, int want, const char *layer, const char *what,
		       struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (is_null(v) || (cJSON_IsNumber(v) && v->valuedouble == (double)want))
		return 0;
	return BAD("key per_layer_config.%s.%s differs from the model's %d: per-layer %s is not supported",
		   layer, key, want, key);
}

/* A per-layer integer override: absent/null (keep def), or an integer lo..hi. */
static int layer_int(const cJSON *o, const char *key, int def, int lo, int hi, int *out, const char *layer,
		     const char *what, struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	*out = def;
	if (is_null(v))
		return 0;
	if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
	    v->valuedouble > hi)
		return BAD("key per_layer_config.%s.%s is not an integer %d..%d", layer, key, lo, hi);
	*out = (int)v->valuedouble;
	return 0;
}

/* Head sizes and KV head counts per layer. Configs written by transformers
 * before 5.15 carry global_head_dim (full layers) and, for attention_k_eq_v
 * models, num_global_key_value_heads; from 5.15 on, per_layer_config maps a
 * layer index to the values where that layer differs from the model-wide
 * head_dim / num_key_value_heads / num_attention_heads, and those two keys
 * are gone. The engine holds one head size and one KV head count per layer
 * type and one query head count: anything else is refused. */
static int per_layer(struct fg_g4_config *c, const cJSON *text, const char *what, struct fg_err *err)
{
	const cJSON *plc = get(text, NULL, "per_layer_config"), *e;
	int hd[FG_G4_MAX_LAYERS], kvh[FG_G4_MAX_LAYERS], first[2] = { -1, -1 }, li, rc, def_full, def_kv;

	if (!is_null(plc) && !cJSON_IsObject(plc))
		return BAD("key per_layer_config is not an object%s", "");
	/* as Gemma4TextConfig.__post_init__ (5.17): without per_layer_config,
	 * full layers take global_head_dim (512 when absent) and, when
	 * attention_k_eq_v is set, num_global_key_value_heads (when given);
	 * with it, neither key is read and a layer without an entry keeps
	 * head_dim and num_key_value_heads */
	def_full = is_null(plc) ? (c->global_head_dim ? c->global_head_dim : 512) : c->head_dim;
	def_kv = is_null(plc) && c->k_eq_v && c->global_kv_heads ? c->global_kv_heads : c->n_kv_heads;
	for (li = 0; li < c->n_layers; li++) {
		int full = c->layer_type[li] == FG_G4_FULL;

		hd[li] = full ? def_full : c->head_dim;
		kvh[li] = full ? def_kv : c->n_kv_heads;
	}
	if (is_null(plc))
		plc = NULL;
	cJSON_ArrayForEach(e, plc) {
		const char *k = e->string;
		const cJSON *f;
		char *end = NULL;
		long i = strtol(k, &end, 10);

		if (!*k || *end || i < 0 || i >= c->n_layers)
			return BAD("key per_layer_config.%s is not a layer index 0..%d", k, c->n_layers - 1);
		if (!cJSON_IsObject(e))
			return BAD("key per_layer_config.%s is not an object", k);
		cJSON_ArrayForEach(f, e)
			if (strcmp(f->string, "head_dim") && strcmp(f->string, "num_key_value_heads") &&
			    strcmp(f->string, "num_attention_heads"))
				return BAD("key per_layer_config.%s.%s is not supported", k, f->string);
		if ((rc = same_or_bad(e, "num_attention_heads", c->n_heads, k, what, err)) ||
		    (rc = layer_int(e, "head_dim", hd[i], 2, 4096, &hd[i], k, what, err)) ||
		    (rc = layer_int(e, "num_key_value_heads", kvh[i], 1, 1024, &kvh[i], k, what, err)))
			return rc;
	}
	/* the engine holds one head size and KV head count per layer type: all
	 * of a type must agree */
	for (li = 0; li < c->n_layers; li++) {
		int t = c->layer_type[li];
		const char *tn = t == FG_G4_FULL ? "full" : "sliding";

		if (c->n_heads % kvh[li])
			return BAD("key per_layer_config: %s layer %d has %d KV heads, which do not divide "
				   "num_attention_heads = %d", tn, li, kvh[li], c->n_heads);
		if (first[t] < 0)
			first[t] = li;
		else if (hd[li] != hd[first[t]])
			return BAD("key per_layer_config: %s layer %d has head_dim %d, another %d: not supported", tn,
				   li, hd[li], hd[first[t]]);
		else if (kvh[li] != kvh[first[t]])
			return BAD("key per_layer_config: %s layer %d has num_key_value_heads %d, another %d: not "
				   "supported", tn, li, kvh[li], kvh[first[t]]);
	}
	if (first[FG_G4_SLIDING] >= 0) {
		c->head_dim = hd[first[FG_G4_SLIDING]];
		c->n_kv_heads = kvh[first[FG_G4_SLIDING]];
	}
	c->global_head_dim = hd[first[FG_G4_FULL]]; /* the last layer is always full */
	c->global_kv_heads = kvh[first[FG_G4_FULL]];
	return 0;
}

/* Gemma4AssistantConfig's keys and its validate_architecture (transformers
 * 5.17): every layer KV-shared (num_kv_shared_layers unset or 0 means all of
 * them), no per-layer embeddings, no mixture of experts, no double-wide MLP.
 * Called after the text config's integer keys. */
static int parse_assistant(struct fg_g4_config *c, const cJSON *top, const cJSON *text, const char *what,
			   struct fg_err *err)
{
	int rc, flag;

	if ((rc = get_int(top, NULL, "backbone_hidden_size", 1536, 1, 1 << 16, &c->backbone, what, err)) ||
	    (rc = get_bool(top, NULL, "use_ordered_embeddings", 0, &c->ordered_emb, what, err)) ||
	    (rc = get_int(top, NULL, "num_centroids", 2048, 1, 1 << 24, &c->n_centroids, what, err)) ||
	    (rc = get_int(top, NULL, "centroid_intermediate_top_k", 32, 0, 1 << 24, &c->centroid_top_k, what, err)))
		return rc;
	if (!c->n_kv_shared)
		c->n_kv_shared = c->n_layers; /* Gemma4AssistantConfig.__post_init__ */
	if (c->ple_dim)
		return BAD("key hidden_size_per_layer_input = %d must be 0 in a gemma4_assistant config", c->ple_dim);
	if (c->ple_vocab)
		return BAD("key vocab_size_per_layer_input = %d must be 0 in a gemma4_assistant config", c->ple_vocab);
	if ((rc = get_bool(text, NULL, "enable_moe_block", 0, &flag, what, err)))
		return rc;
	if (flag)
		return BAD("key enable_moe_block must be false in a gemma4_assistant config%s", "");
	if ((rc = get_bool(text, NULL, "use_double_wide_mlp", 0, &flag, what, err)))
		return rc;
	if (flag)
		return BAD("key use_double_wide_mlp must be false in a gemma4_assistant config%s", "");
	if (c->n_kv_shared != c->n_layers)
		return BAD("key num_kv_shared_layers = %d must be num_hidden_layers = %d in a gemma4_assistant config "
			   "(every layer reads the target's KV)", c->n_kv_shared, c->n_layers);
	if (!c->ordered_emb)
		return 0;
	if (c->vocab % c->n_centroids)
		return BAD("key num_centroids = %d does not divide vocab_size = %d (use_ordered_embeddings)",
			   c->n_centroids, c->vocab);
	if (c->centroid_top_k < 1 || c->centroid_top_k > fg_g4_centroid_top_k_max(c))
		return BAD("key centroid_intermediate_top_k = %d is out of the supported range 1..%d (num_centroids, "
			   "and at most %d: the GPU drafter's bound)", c->centroid_top_k, fg_g4_centroid_top_k_max(c),
			   FG_G4_CENTROID_MAX_K);
	return 0;
}

int fg_g4_config_parse(struct fg_g4_config *c, const char *json, size_t len, const char *what,
		       struct fg_err *err)
{
	cJSON *root = NULL;
	const cJSON *text, *top, *v, *it;
	const char *s;
	int rc, i;

	memset(c, 0, sizeof(*c));
	if ((rc = fg_json_parse(&root, json, len, what, err)))
		return rc;
	rc = FG_EFORMAT;
	if (!cJSON_IsObject(root)) {
		fg_err_set(err, FG_EFORMAT, "%s: not a JSON object", what);
		goto out;
	}
	top = root;
	text = fg_json_obj(root, "text_config");
	if (!text)
		text = root;
	/* Gemma4AssistantConfig: the drafter's own keys at the top level, a
	 * Gemma 4 text config under text_config */
	s = fg_json_str(top, "model_type");
	if (s && !strcmp(s, "gemma4_assistant")) {
		if (text == top) {
			rc = BAD("key text_config is missing (model_type %s)", s);
			goto out;
		}
		c->assistant = 1;
	}
	s = fg_json_str(text, "model_type");
	if (s && strcmp(s, "gemma4_text") && strcmp(s, "gemma4")) {
		rc = BAD("key model_type = \"%s\" is not supported (gemma4_text)", s);
		goto out;
	}
#define INT(key, def, lo, hi, dst) \
	if ((rc = get_int(text, text == top ? NULL : top, key, def, lo, hi, dst, what, err))) goto out
	INT("vocab_size", -1, 1, 1 << 24, &c->vocab);
	INT("hidden_size", -1, 1, 1 << 16, &c->hidden);
	INT("intermediate_size", -1, 1, 1 << 20, &c->inter);
	INT("num_hidden_layers", -1, 1, FG_G4_MAX_LAYERS, &c->n_layers);
	INT("num_attention_heads", -1, 1, 1024, &c->n_heads);
	INT("num_key_value_heads", -1, 1, 1024, &c->n_kv_heads);
	INT("head_dim", -1, 2, 4096, &c->head_dim);
	INT("global_head_dim", 0, 0, 4096, &c->global_head_dim);
	INT("num_global_key_value_heads", 0, 1, 1024, &c->global_kv_heads);
	INT("hidden_size_per_layer_input", 256, 0, 1 << 16, &c->ple_dim);
	/* an assistant must say 0 (transformers' default is 262144) */
	INT("vocab_size_per_layer_input", c->assistant ? 262144 : c->vocab, c->assistant ? 0 : 1, 1 << 24,
	    &c->ple_vocab);
	INT("sliding_window", 512, 1, 1 << 24, &c->sliding_window);
	INT("num_kv_shared_layers", 0, 0, FG_G4_MAX_LAYERS, &c->n_kv_shared);
	INT("max_position_embeddings", 131072, 1, 1 << 30, &c->max_position);
#undef INT
	if (c->n_heads % c->n_kv_heads) {
		rc = BAD("key num_key_value_heads = %d does not divide num_attention_heads = %d", c->n_kv_heads,
			 c->n_heads);
		goto out;
	}
	if (c->assistant) {
		if ((rc = parse_assistant(c, top, text, what, err)))
			goto out;
	} else if (c->n_kv_shared >= c->n_layers) {
		rc = BAD("key num_kv_shared_layers = %d leaves no layer with its own KV", c->n_kv_shared);
		goto out;
	}
	v = get(text, NULL, "rms_norm_eps");
	c->eps = 1e-6f;
	if (!is_null(v)) {
		if (!cJSON_IsNumber(v) || v->valuedouble <= 0) {
			rc = BAD("key rms_norm_eps is not a positive number%s", "");
			goto out;
		}
		c->eps = (float)v->valuedouble;
	}
	v = get(text, NULL, "final_logit_softcapping");
	if (!is_null(v)) {
		if (!cJSON_IsNumber(v) || v->valuedouble < 0) {
			rc = BAD("key final_logit_softcapping is not a non-negative number%s", "");
			goto out;
		}
		c->softcap = (float)v->valuedouble;
	}
	s = fg_json_str(text, "hidden_activation");
	if (s && strcmp(s, "gelu_pytorch_tanh")) {
		rc = BAD("key hidden_activation = \"%s\" is not supported (gelu_pytorch_tanh)", s);
		goto out;
	}
	if ((rc = parse_moe(c, text, what, err)))
		goto out;
	if ((rc = get_bool(text, NULL, "attention_k_eq_v", 0, &c->k_eq_v, what, err)))
		goto out;
	if ((rc = get_bool(text, NULL, "attention_bias", 0, &c->attn_bias, what, err)))
		goto out;
	if ((rc = get_bool(text, NULL, "use_double_wide_mlp", 0, &c->double_wide_mlp, what, err)))
		goto out;
	/* Gemma4ForConditionalGeneration ties its head by the top-level
	 * tie_word_embeddings (Gemma4Config, default true); text_config's is
	 * not read (transformers 5.17, variants mm-tie-top / mm-tie-text) */
	if ((rc = get_bool(top, NULL, "tie_word_embeddings", 1, &c->tie_embeddings, what, err)))
		goto out;
	/* transformers 5.17: "vision" makes image tokens attend to each other
	 * both ways and leaves text causal (Gemma4Model builds its vision mask
	 * only from mm_token_type_ids; Gemma4TextAttention.is_causal is
	 * `!= "all"`), so a text-only engine runs it as null; "all" makes every
	 * layer bidirectional (and halves the sliding window) */
	v = get(text, NULL, "use_bidirectional_attention");
	if (!is_null(v) && !(cJSON_IsString(v) && !strcmp(v->valuestring, "vision"))) {
		char *shown = cJSON_PrintUnformatted(v);

		rc = BAD("key use_bidirectional_attention = %s is not supported (null or \"vision\": causal text)",
			 shown ? shown : "?");
		free(shown);
		goto out;
	}
	/* as GenerationConfig.from_model_config: a top-level id first, the
	 * text config's where the top level has none (or null) */
	v = get(top, NULL, "bos_token_id");
	if (is_null(v))
		v = get(text, NULL, "bos_token_id");
	/* an integer: a token id, or a negative one for none (the range is
	 * checked first: converting 3e124 to int is undefined) */
	if (v && cJSON_IsNumber(v) && !(v->valuedouble >= (double)INT32_MIN && v->valuedouble <= (double)INT32_MAX &&
					 v->valuedouble == floor(v->valuedouble))) {
		rc = BAD("key bos_token_id = %g is not a token id (an integer)", v->valuedouble);
		goto out;
	}
	c->bos = (v && cJSON_IsNumber(v) && v->valuedouble >= 0) ? (int)v->valuedouble : -1;
	v = get(top, NULL, "eos_token_id");
	if (is_null(v))
		v = get(text, NULL, "eos_token_id");
	if ((rc = add_eos(c, v, what, err)))
		goto out;
	if ((rc = mm_ids(c, text, top, what, err)))
		goto out;

	/* layer_types: as transformers, 5 sliding then 1 full when absent, and
	 * the last layer always full */
	v = get(text, NULL, "layer_types");
	if (is_null(v)) {
		for (i = 0; i < c->n_layers; i++)
			c->layer_type[i] = ((i + 1) % 6) ? FG_G4_SLIDING : FG_G4_FULL;
	} else {
		if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != c->n_layers) {
			rc = BAD("key layer_types must list num_hidden_layers = %d entries", c->n_layers);
			goto out;
		}
		i = 0;
		cJSON_ArrayForEach(it, v) {
			if (cJSON_IsString(it) && !strcmp(it->valuestring, "sliding_attention"))
				c->layer_type[i] = FG_G4_SLIDING;
			else if (cJSON_IsString(it) && !strcmp(it->valuestring, "full_attention"))
				c->layer_type[i] = FG_G4_FULL;
			else {
				rc = BAD("key layer_types[%d] is not sliding_attention or full_attention", i);
				goto out;
			}
			i++;
		}
	}
	c->layer_type[c->n_layers - 1] = FG_G4_FULL;
	if ((rc = per_layer(c, text, what, err)))
		goto out;
	if ((c->head_dim | c->global_head_dim) & 1 || c->global_head_dim < 2) {
		rc = BAD("key head_dim/global_head_dim = %d/%d must be even", c->head_dim, c->global_head_dim);
		goto out;
	}
	v = get(text, NULL, "rope_parameters");
	if (!is_null(v) && !cJSON_IsObject(v)) {
		rc = BAD("key rope_parameters is not an object%s", "");
		goto out;
	}
	if ((rc = parse_rope(&c->rope[FG_G4_SLIDING], is_null(v) ? NULL : v, "sliding_attention", 0,
			      c->max_position, what, err)) ||
	    (rc = parse_rope(&c->rope[FG_G4_FULL], is_null(v) ? NULL : v, "full_attention", 1, c->max_position,
			      what, err)))
		goto out;
	if ((rc = parse_quant(c, cJSON_GetObjectItemCaseSensitive(top, "quantization_config"), what, err)))
		goto out;
	for (i = 0; i < c->n_layers && !c->assistant; i++)
		if (fg_g4_kv_source(c, i) < 0) {
			rc = BAD("key num_kv_shared_layers = %d: shared layer %d has no earlier layer of its type",
				 c->n_kv_shared, i);
			goto out;
		}
	rc = 0;
out:
	cJSON_Delete(root);
	return rc;
}

/* ---- generation_config.json ---- */

/* A key that must be an integer lo..1<<30 (or null/absent: -1). */
static int gen_int(const cJSON *root, const char *key, long long lo, int *out, const char *what,
		   struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);

	*out = -1;
	if (is_null(v))
		return 0;
	if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
	    v->valuedouble > (double)(1 << 30))
		return fg_err_set(err, FG_EFORMAT, "%s: key %s is not an integer >= %lld", what, key, lo);
	*out = (int)v->valuedouble;
	return 0;
}

/* Keys of GenerationConfig that would change what greedy decoding emits (or
 * how it stops) and that the engine does not apply, with the value that
 * leaves greedy decoding as it is ("" = only null does). sampling: the key
 * acts only when do_sample is true. */
static const struct {
	const char *key;
	const char *neutral;
	int sampling;
} unapplied_keys[] = {
	{ "do_sample", "false", 0 },     { "temperature", "", 1 },       { "top_k", "", 1 },
	{ "top_p", "", 1 },              { "min_p", "", 1 },             { "typical_p", "", 1 },
	{ "epsilon_cutoff", "", 1 },     { "eta_cutoff", "", 1 },        { "num_beams", "1", 0 },
	{ "num_beam_groups", "1", 0 },   { "penalty_alpha", "", 0 },     { "dola_layers", "", 0 },
	{ "repetition_penalty", "1", 0 }, { "no_repeat_ngram_size", "0", 0 }, { "bad_words_ids", "[]", 0 },
	{ "min_length", "0", 0 },        { "min_new_tokens", "0", 0 },   { "suppress_tokens", "[]", 0 },
	{ "begin_suppress_tokens", "[]", 0 }, { "forced_bos_token_id", "", 0 }, { "forced_eos_token_id", "", 0 },
	{ "sequence_bias", "", 0 },      { "guidance_scale", "1", 0 },   { "exponential_decay_length_penalty", "", 0 },
	{ "stop_strings", "[]", 0 },     { "max_time", "", 0 },          { "watermarking_config", "", 0 },
};

static int neutral(const cJSON *v, const char *n)
{
	if (!strcmp(n, "false"))
		return cJSON_IsFalse(v);
	if (!strcmp(n, "[]"))
		return cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0;
	if (*n)
		return cJSON_IsNumber(v) && v->valuedouble == (n[0] == '1' ? 1.0 : 0.0);
	return 0;
}

/* Appends "key=value" (value as JSON, cut at 40 bytes) to c->gen.note. */
static void note_key(struct fg_g4_config *c, const char *key, const cJSON *v)
{
	char *js = cJSON_PrintUnformatted(v);
	size_t used = strlen(c->gen.note);
	int n;

	if (used + 8 >= sizeof(c->gen.note)) {
		free(js);
		return;
	}
	n = snprintf(c->gen.note + used, sizeof(c->gen.note) - used, "%s%s=%.40s%s", used ? ", " : "", key,
		     js ? js : "?", js && strlen(js) > 40 ? "..." : "");
	if (n < 0 || (size_t)n >= sizeof(c->gen.note) - used)
		memcpy(c->gen.note + sizeof(c->gen.note) - 4, "...", 4);
	free(js);
}

int fg_g4_gen_parse(struct fg_g4_config *c, const char *json, size_t len, const char *what,
		    struct fg_err *err)
{
	cJSON *root = NULL;
	const cJSON *v, *it;
	int rc, sample, bos, pad;
	size_t i;

	if ((rc = fg_json_parse(&root, json, len, what, err)))
		return rc;
	if (!cJSON_IsObject(root)) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: not a JSON object", what);
		goto out;
	}
	memset(&c->gen, 0, sizeof(c->gen));
	c->gen.present = 1;
	/* the stop set: what generate() builds its EosTokenCriteria from
	 * (_prepare_special_tokens: an id or a list; any of them stops) */
	v = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
	if (!is_null(v) && !cJSON_IsNumber(v) && !cJSON_IsArray(v)) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: key eos_token_id is not a token id or a list of them", what);
		goto out;
	}
	cJSON_ArrayForEach(it, (cJSON_IsArray(v) ? v : NULL))
		if (!is_token_id(it)) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: key eos_token_id holds an entry that is not a token id "
					"(an integer >= 0)", what);
			goto out;
		}
	if (cJSON_IsNumber(v) && !is_token_id(v)) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: key eos_token_id = %g is not a token id (an integer >= 0)",
				what, v->valuedouble);
		goto out;
	}
	c->n_eos = 0;
	if ((rc = add_eos(c, v, what, err)))
		goto out;
	if ((rc = gen_int(root, "bos_token_id", 0, &bos, what, err)) ||
	    (rc = gen_int(root, "pad_token_id", 0, &pad, what, err)) ||
	    (rc = gen_int(root, "max_new_tokens", 1, &c->gen.max_new_tokens, what, err)) ||
	    (rc = gen_int(root, "max_length", 1, &c->gen.max_length, what, err)) ||
	    (rc = get_bool(root, NULL, "do_sample", -1, &c->gen.do_sample, what, err)))
		goto out;
	if (bos >= 0)
		c->bos = bos;
	/* the numbers sampling and the other strategies read: checked for their
	 * type only (torch would fail on a string where a number goes) */
	for (i = 0; i < sizeof(unapplied_keys) / sizeof(unapplied_keys[0]); i++) {
		v = cJSON_GetObjectItemCaseSensitive(root, unapplied_keys[i].key);
		if (is_null(v))
			continue;
		if ((unapplied_keys[i].sampling || unapplied_keys[i].neutral[0] == '0' ||
		     unapplied_keys[i].neutral[0] == '1') && !cJSON_IsNumber(v)) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: key %s is not a number", what, unapplied_keys[i].key);
			goto out;
		}
	}
	sample = c->gen.do_sample == 1;
	for (i = 0; i < sizeof(unapplied_keys) / sizeof(unapplied_keys[0]); i++) {
		v = cJSON_GetObjectItemCaseSensitive(root, unapplied_keys[i].key);
		if (is_null(v) || neutral(v, unapplied_keys[i].neutral) || (unapplied_keys[i].sampling && !sample))
			continue;
		note_key(c, unapplied_keys[i].key, v);
	}
	rc = 0;
out:
	cJSON_Delete(root);
	return rc;
}

int fg_g4_first_shared(const struct fg_g4_config *c)
{
	return c->n_layers - c->n_kv_shared;
}

int32_t fg_g4_input_id(const struct fg_g4_config *c, int32_t id)
{
	int i;

	for (i = 0; i < c->n_mm_ids; i++)
		if (id == c->mm_ids[i])
			return c->pad;
	return id;
}

int fg_g4_layer_head_dim(const struct fg_g4_config *c, int i)
{
	return c->layer_type[i] == FG_G4_FULL ? c->global_head_dim : c->head_dim;
}

int fg_g4_layer_kv_heads(const struct fg_g4_config *c, int i)
{
	return c->layer_type[i] == FG_G4_FULL ? c->global_kv_heads : c->n_kv_heads;
}

int fg_g4_layer_v_is_k(const struct fg_g4_config *c, int i)
{
	return c->k_eq_v && c->layer_type[i] == FG_G4_FULL;
}

int fg_g4_layer_inter(const struct fg_g4_config *c, int i)
{
	int shared = c->n_kv_shared > 0 && i >= fg_g4_first_shared(c);

	return c->inter * ((c->double_wide_mlp && shared) ? 2 : 1);
}

int fg_g4_kv_source(const struct fg_g4_config *c, int i)
{
	int fs = fg_g4_first_shared(c), j;

	if (i < fs)
		return i;
	for (j = fs - 1; j >= 0; j--)
		if (c->layer_type[j] == c->layer_type[i])
			return j;
	return -1;
}

int fg_g4_type_source(const struct fg_g4_config *c, int type)
{
	int j;

	for (j = fg_g4_first_shared(c) - 1; j >= 0; j--)
		if (c->layer_type[j] == type)
			return j;
	return -1;
}

int fg_g4_centroid_top_k_max(const struct fg_g4_config *c)
{
	if (!c->assistant || !c->ordered_emb)
		return 0;
	return c->n_centroids < FG_G4_CENTROID_MAX_K ? c->n_centroids : FG_G4_CENTROID_MAX_K;
}

int fg_g4_set_centroid_top_k(struct fg_g4_config *c, int top_k, struct fg_err *err)
{
	int max = fg_g4_centroid_top_k_max(c);

	if (top_k && !max)
		return fg_err_set(err, FG_EINVAL, "centroid top-k %d given, but the drafter has no centroid head "
				  "(use_ordered_embeddings is off)", top_k);
	if (top_k < 0 || top_k > max)
		return fg_err_set(err, FG_EINVAL, "centroid top-k %d is out of the range 1..%d (num_centroids %d, "
				  "and at most %d)", top_k, max, c->n_centroids, FG_G4_CENTROID_MAX_K);
	if (top_k)
		c->centroid_top_k = top_k;
	return 0;
}
