/* test_engine_kveq.c - attention_k_eq_v (the 26B/31B attention) beyond the
 * oracle comparison of test_engine.c: the config forms transformers reads
 * (per_layer_config, or num_global_key_value_heads before 5.15), what is
 * refused, checkpoints that do not match their config, an extra v_proj
 * ignored as transformers ignores it, and the INT4 bake and prune-head of
 * such a model (k_proj quantized, no v_proj asked for); on a machine with a
 * GPU, the baked model on the CUDA path against the CPU one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#pragma GCC diagnostic ignored "-Wunused-function" /* engine_test.h helpers this file does not need */
#include "engine_test.h"

#include "bake/int4.h"
#include "engine/config.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "fsutil.h"
#include "json.h"
#include "safetensors.h"

#define KVEQ "tests/fixtures/oracle/variants/kveq"
#define SHARED "tests/fixtures/oracle/variants/kveq-shared"

static char tmp[] = "/tmp/fg_test_kveq_XXXXXX";

/* The config.json of dir as cJSON (caller frees). */
static cJSON *config_of(const char *dir)
{
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err = { 0 };
	char p[512];
	cJSON *j = NULL;

	snprintf(p, sizeof(p), "%s/config.json", dir);
	if (!fg_file_read(p, 1 << 20, &b, &err))
		j = cJSON_ParseWithLength(b.data, b.len);
	fg_buf_release(&b);
	return j;
}

static int parse(const cJSON *j, struct fg_g4_config *c, struct fg_err *err)
{
	char *t = cJSON_PrintUnformatted(j);
	int rc = fg_g4_config_parse(c, t, strlen(t), "config.json", err);

	free(t);
	return rc;
}

/* The kveq config in transformers' older form: global_head_dim and, when
 * kv > 0, num_global_key_value_heads instead of per_layer_config. */
static cJSON *old_form(int kv, int k_eq_v)
{
	cJSON *j = config_of(KVEQ);

	cJSON_DeleteItemFromObject(j, "per_layer_config");
	cJSON_AddNumberToObject(j, "global_head_dim", 32);
	if (kv)
		cJSON_AddNumberToObject(j, "num_global_key_value_heads", kv);
	cJSON_ReplaceItemInObject(j, "attention_k_eq_v", cJSON_CreateBool(k_eq_v));
	return j;
}

static void check_config(void)
{
	struct fg_g4_config c, c2;
	struct fg_err err = { 0 };
	cJSON *j = config_of(KVEQ);
	int i, vk = 1;

	is_int(parse(j, &c, &err), 0, "kveq config (per_layer_config, as transformers 5.17 saves it) parses %s", err.msg);
	ok(c.k_eq_v && c.n_kv_heads == 2 && c.global_kv_heads == 1 && c.head_dim == 16 && c.global_head_dim == 32,
	   "k_eq_v, 2 KV heads on sliding layers and 1 on full ones, head dims 16/32");
	for (i = 0; i < c.n_layers; i++)
		vk &= fg_g4_layer_v_is_k(&c, i) == (c.layer_type[i] == FG_G4_FULL) &&
		      fg_g4_layer_kv_heads(&c, i) == (c.layer_type[i] == FG_G4_FULL ? 1 : 2);
	ok(vk, "values are k_proj's on the full layers only; KV heads by layer type");
	cJSON_Delete(j);

	j = old_form(1, 1);
	is_int(parse(j, &c2, &err), 0, "the older form (global_head_dim, num_global_key_value_heads) parses %s", err.msg);
	ok(!memcmp(&c, &c2, sizeof(c)), "the older form gives the same config as per_layer_config");
	cJSON_Delete(j);
	j = old_form(0, 1);
	is_int(parse(j, &c2, &err), 0, "k_eq_v without num_global_key_value_heads parses %s", err.msg);
	is_int(c2.global_kv_heads, 2, "k_eq_v without num_global_key_value_heads: full layers keep num_key_value_heads");
	cJSON_Delete(j);
	j = old_form(1, 0);
	is_int(parse(j, &c2, &err), 0, "num_global_key_value_heads without k_eq_v parses %s", err.msg);
	ok(c2.global_kv_heads == 2 && !fg_g4_layer_v_is_k(&c2, 1),
	   "num_global_key_value_heads without k_eq_v is not read (as transformers): 2 KV heads, own v_proj");
	cJSON_Delete(j);

	/* refused in one line naming the key */
	j = old_form(3, 1);
	memset(&err, 0, sizeof(err));
	ok(parse(j, &c2, &err) == FG_EUNSUPPORTED && strstr(err.msg, "full layer 1 has 3 KV heads, which do not divide") &&
		   !strchr(err.msg, '\n'),
	   "num_global_key_value_heads not dividing the query heads: refused (%s)", err.msg);
	cJSON_Delete(j);
	j = config_of(KVEQ);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "per_layer_config"), "4"),
				  "num_key_value_heads", cJSON_CreateNumber(2));
	memset(&err, 0, sizeof(err));
	ok(parse(j, &c2, &err) == FG_EUNSUPPORTED &&
		   strstr(err.msg, "full layer 4 has num_key_value_heads 2, another 1: not supported") &&
		   !strchr(err.msg, '\n'),
	   "full layers with different KV head counts: refused (%s)", err.msg);
	cJSON_Delete(j);
	j = config_of(KVEQ);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "per_layer_config"), "4"),
				  "num_key_value_heads", cJSON_CreateString("1"));
	memset(&err, 0, sizeof(err));
	ok(parse(j, &c2, &err) == FG_EUNSUPPORTED &&
		   strstr(err.msg, "per_layer_config.4.num_key_value_heads is not an integer") && !strchr(err.msg, '\n'),
	   "a KV head count that is not a number: refused (%s)", err.msg);
	cJSON_Delete(j);
	j = old_form(0, 1);
	cJSON_ReplaceItemInObject(j, "attention_k_eq_v", cJSON_CreateString("yes"));
	memset(&err, 0, sizeof(err));
	ok(parse(j, &c2, &err) == FG_EFORMAT && strstr(err.msg, "attention_k_eq_v is not a boolean"),
	   "attention_k_eq_v not a boolean: refused (%s)", err.msg);
	cJSON_Delete(j);
}

/* tmp/name/ with config j (NULL: src's) and src's tensors rewritten into
 * one model.safetensors: tensor `drop` left out, and n_extra tensors added,
 * extra[i] with the data of tensor from[i]. */
static int scratch_n(char *out, size_t n, const char *name, const char *src, const cJSON *j, const char *drop,
		     const char *const *extra, const char *const *from, int n_extra)
{
	struct fg_st_set *set = NULL;
	struct fg_st_writer *w = NULL;
	struct fg_st_desc *d;
	struct fg_err err = { 0 };
	char p[600];
	size_t i, k = 0, cnt;
	const struct fg_st_tensor *ft[8] = { 0 };
	cJSON *cj = j ? NULL : config_of(src);
	char *txt;
	int rc = 0, x;

	snprintf(out, n, "%s/%s", tmp, name);
	if (n_extra > 8 || mkdir(out, 0755) || fg_st_open(&set, src, &err))
		return -1;
	cnt = fg_st_count(set);
	d = calloc(cnt + (size_t)n_extra, sizeof(*d));
	for (i = 0; i < cnt; i++) {
		const struct fg_st_tensor *t = fg_st_at(set, i);

		if (drop && !strcmp(t->name, drop))
			continue;
		d[k].name = t->name;
		d[k].dtype = t->dtype;
		d[k].ndim = t->ndim;
		memcpy(d[k].shape, t->shape, sizeof(d[k].shape));
		k++;
	}
	for (x = 0; x < n_extra; x++) {
		if (!(ft[x] = fg_st_find(set, from[x]))) {
			rc = fg_err_set(&err, FG_ENOTFOUND, "no tensor %s", from[x]);
			break;
		}
		d[k].name = extra[x];
		d[k].dtype = ft[x]->dtype;
		d[k].ndim = ft[x]->ndim;
		memcpy(d[k].shape, ft[x]->shape, sizeof(d[k].shape));
		k++;
	}
	if (!rc)
		rc = fg_st_writer_new(&w, out, d, k, 0, NULL, &err);
	if (!rc)
		fg_st_writer_no_sync(w);
	for (i = 0; i < cnt && !rc; i++) {
		const struct fg_st_tensor *t = fg_st_at(set, i);

		if (!drop || strcmp(t->name, drop))
			rc = fg_st_writer_write(w, t->data, t->nbytes, &err);
	}
	for (x = 0; x < n_extra && !rc; x++)
		rc = fg_st_writer_write(w, ft[x]->data, ft[x]->nbytes, &err);
	if (!rc)
		rc = fg_st_writer_finish(w, &err);
	fg_st_writer_free(w);
	fg_st_free(set);
	free(d);
	txt = cJSON_Print(j ? j : cj);
	snprintf(p, sizeof(p), "%s/config.json", out);
	if (!rc)
		rc = fg_file_write_atomic(p, txt, strlen(txt), 0644, &err);
	free(txt);
	cJSON_Delete(cj);
	if (rc)
		printf("# scratch %s: %s\n", name, err.msg);
	return rc ? -1 : 0;
}

static int scratch(char *out, size_t n, const char *name, const char *src, const cJSON *j, const char *drop,
		   const char *extra, const char *from)
{
	return scratch_n(out, n, name, src, j, drop, &extra, &from, extra ? 1 : 0);
}

/* tmp/name: src with attention_k_eq_v false and every full layer's v_proj
 * written out as a copy of its k_proj (suffixes: ".weight", or the three
 * INT4 parts): the same model through the engine's ordinary path. */
static int explicit_v(char *out, size_t n, const char *name, const char *src, int int4)
{
	static const char *const bf[] = { ".weight" }, *const q4[] = { ".weight_packed", ".weight_scale", ".weight_shape" };
	const char *const *suf = int4 ? q4 : bf;
	char names[2][3][2][96];
	const char *extra[6], *from[6];
	cJSON *j = config_of(KVEQ);
	int li, s, ns = int4 ? 3 : 1, k = 0, rc;
	static const int full[2] = { 1, 4 };

	for (li = 0; li < 2; li++)
		for (s = 0; s < ns; s++) {
			snprintf(names[li][s][0], 96, "model.layers.%d.self_attn.v_proj%s", full[li], suf[s]);
			snprintf(names[li][s][1], 96, "model.layers.%d.self_attn.k_proj%s", full[li], suf[s]);
			extra[k] = names[li][s][0];
			from[k++] = names[li][s][1];
		}
	cJSON_ReplaceItemInObject(j, "attention_k_eq_v", cJSON_CreateFalse());
	if (int4) { /* the baked config: its quantization_config */
		cJSON *bj = config_of(src);

		cJSON_ReplaceItemInObject(bj, "attention_k_eq_v", cJSON_CreateFalse());
		cJSON_Delete(j);
		j = bj;
	}
	rc = scratch_n(out, n, name, src, j, NULL, extra, from, k);
	cJSON_Delete(j);
	return rc;
}

static void check_checkpoints(void)
{
	struct fg_engine *e = NULL;
	struct fg_err err = { 0 };
	char dir[600];
	cJSON *j;
	int rc;

	/* the config says there is a v_proj (k_eq_v false) but the file has none */
	j = config_of(KVEQ);
	cJSON_ReplaceItemInObject(j, "attention_k_eq_v", cJSON_CreateFalse());
	rc = scratch(dir, sizeof(dir), "no-kveq", KVEQ, j, NULL, NULL, NULL);
	rc = rc ? rc : fg_engine_load(&e, dir, NULL, &err);
	ok(rc == FG_ENOTFOUND && strstr(err.msg, "tensor model.layers.1.self_attn.v_proj.weight is missing") &&
		   !strchr(err.msg, '\n'),
	   "a k_eq_v checkpoint read without k_eq_v: the missing v_proj named (%s)", err.msg);
	cJSON_Delete(j);
	/* k_eq_v, but the full layer's k_proj is missing */
	memset(&err, 0, sizeof(err));
	rc = scratch(dir, sizeof(dir), "no-k", KVEQ, NULL, "model.layers.4.self_attn.k_proj.weight", NULL, NULL);
	rc = rc ? rc : fg_engine_load(&e, dir, NULL, &err);
	ok(rc == FG_ENOTFOUND && strstr(err.msg, "tensor model.layers.4.self_attn.k_proj.weight is missing") &&
		   !strchr(err.msg, '\n'),
	   "k_eq_v with no k_proj in a full layer: the tensor named (%s)", err.msg);
	/* KV heads in the config that k_proj's shape does not have */
	j = config_of(KVEQ);
	{
		cJSON *plc = cJSON_GetObjectItem(j, "per_layer_config");

		cJSON_ReplaceItemInObject(cJSON_GetObjectItem(plc, "1"), "num_key_value_heads", cJSON_CreateNumber(2));
		cJSON_ReplaceItemInObject(cJSON_GetObjectItem(plc, "4"), "num_key_value_heads", cJSON_CreateNumber(2));
	}
	memset(&err, 0, sizeof(err));
	rc = scratch(dir, sizeof(dir), "kv2", KVEQ, j, NULL, NULL, NULL);
	rc = rc ? rc : fg_engine_load(&e, dir, NULL, &err);
	ok(rc == FG_EFORMAT &&
		   strstr(err.msg, "tensor model.layers.1.self_attn.k_proj.weight has shape 32 x 64, expected 64 x 64") &&
		   !strchr(err.msg, '\n'),
	   "KV heads that k_proj's shape does not have: the tensor named (%s)", err.msg);
	cJSON_Delete(j);
	/* a v_proj in a k_eq_v full layer is not read, as transformers ignores it */
	memset(&err, 0, sizeof(err));
	rc = scratch(dir, sizeof(dir), "extra-v", KVEQ, NULL, NULL, "model.layers.1.self_attn.v_proj.weight",
		     "model.layers.0.self_attn.v_proj.weight");
	{
		float *a = rc ? NULL : logits_of(KVEQ, FG_DEVICE_CPU, 20, &err);
		float *b = a ? logits_of(dir, FG_DEVICE_CPU, 20, &err) : NULL;

		ok(a && b && !memcmp(a, b, sizeof(float) * 20 * 256),
		   "an extra v_proj in a k_eq_v full layer is ignored: logits bit-identical %s", err.msg);
		free(b);
		/* v := k_proj's output, before k_norm and RoPE: the same model with
		 * v_proj = k_proj written out and k_eq_v off gives the same bits */
		b = explicit_v(dir, sizeof(dir), "explicit-v", KVEQ, 0) ? NULL : logits_of(dir, FG_DEVICE_CPU, 20, &err);
		ok(a && b && !memcmp(a, b, sizeof(float) * 20 * 256),
		   "k_eq_v = v_proj written out as a copy of k_proj (k_eq_v off): logits bit-identical %s", err.msg);
		free(a);
		free(b);
	}
}

/* fgpack bake int4 of a k_eq_v model: the full layers' k_proj quantized, no
 * v_proj asked for or made; the baked model runs, on the CPU and, when
 * there is a GPU, on CUDA within rounding of the CPU. prune-head on it. */
static void check_bake(void)
{
	struct fg_int4_opts o;
	struct fg_int4_report rep;
	struct fg_err err = { 0 };
	struct fg_st_set *set = NULL;
	char out[600], pruned[700], xv[600];
	float *b = NULL, *q = NULL, *g = NULL;
	struct fg_engine *e = NULL;
	double d = 0;
	int i, rc, n = 20, V = 256;

	memset(&o, 0, sizeof(o));
	o.group = 32;
	o.threads = 2;
	o.no_sync = 1;
	o.rehash = 1;
	snprintf(out, sizeof(out), "%s/int4", tmp);
	rc = fg_int4_bake(KVEQ, out, &o, &rep, &err);
	is_int(rc, 0, "bake int4 of kveq (no v_proj in full layers) %s", err.msg);
	if (rc)
		return;
	if (!fg_st_open(&set, out, &err)) {
		ok(fg_st_find(set, "model.layers.1.self_attn.k_proj.weight_packed") &&
			   fg_st_find(set, "model.layers.4.self_attn.k_proj.weight_packed") &&
			   fg_st_find(set, "model.layers.2.self_attn.v_proj.weight_packed") &&
			   !fg_st_find(set, "model.layers.1.self_attn.v_proj.weight_packed") &&
			   !fg_st_find(set, "model.layers.1.self_attn.k_proj.weight"),
		   "baked: full layers' k_proj INT4, sliding v_proj INT4, no v_proj made for full layers");
		fg_st_free(set);
	} else
		ok(0, "baked output opens: %s", err.msg);
	rc = fg_engine_load(&e, out, NULL, &err);
	ok(!rc && !strcmp(fg_engine_weight_format(e), "int4-g32"), "the INT4 k_eq_v model loads: %s %s",
	   rc ? "" : fg_engine_weight_format(e), err.msg);
	fg_engine_free(e);
	b = logits_of(KVEQ, FG_DEVICE_CPU, n, &err);
	q = logits_of(out, FG_DEVICE_CPU, n, &err);
	for (i = 0; b && q && i < n * V; i++)
		if (!(fabs((double)b[i] - (double)q[i]) <= d))
			d = fabs((double)b[i] - (double)q[i]);
	printf("# kveq int4-g32 vs bf16: max |logit diff| %.3g (quantization of random tiny weights)\n", d);
	{
		float *x = explicit_v(xv, sizeof(xv), "int4-explicit-v", out, 1) ? NULL
										  : logits_of(xv, FG_DEVICE_CPU, n, &err);

		ok(q && x && !memcmp(q, x, sizeof(float) * (size_t)n * (size_t)V),
		   "INT4 k_eq_v = its INT4 k_proj written out as v_proj (k_eq_v off): logits bit-identical %s", err.msg);
		free(x);
	}
	/* prune-head keeps the attention as it is */
	if (prune_fixture(pruned, sizeof(pruned), tmp, KVEQ, V, 0) == 0) {
		float *a = logits_of(KVEQ, FG_DEVICE_CPU, n, &err), *pr = logits_of(pruned, FG_DEVICE_CPU, n, &err);
		int same = 1;

		for (i = 0; a && pr && i < n * V; i++)
			if (i % V % 3 != 1 || i % V == 1)
				same &= !memcmp(&a[i], &pr[i], sizeof(float));
		ok(a && pr && same, "prune-head of kveq: kept logits bit-identical %s", err.msg);
		free(a);
		free(pr);
	} else
		ok(0, "prune-head of kveq");
	/* CUDA, when a GPU is there: the INT4 and bf16 k_eq_v models, KV sharing too */
	memset(&err, 0, sizeof(err));
	g = logits_of(out, FG_DEVICE_CUDA, n, &err);
	if (!g && (err.code == FG_EDEVICE || err.code == FG_EUNSUPPORTED) && !(getenv("FG_REQUIRE_CUDA") &&
									      !strcmp(getenv("FG_REQUIRE_CUDA"), "1"))) {
		ok(1, "k_eq_v on cuda # skip: no CUDA device (%s)", err.msg);
	} else {
		const char *src[3] = { out, KVEQ, SHARED };
		int s;

		for (s = 0; s < 3; s++) {
			float *c = s == 0 ? q : s == 1 ? b : logits_of(SHARED, FG_DEVICE_CPU, n, &err);
			float *gg = s == 0 ? g : logits_of(src[s], FG_DEVICE_CUDA, n, &err);

			d = 0;
			for (i = 0; gg && c && i < n * V; i++)
				if (!(fabs((double)c[i] - (double)gg[i]) <= d))
					d = fabs((double)c[i] - (double)gg[i]);
			ok(gg && c && d < 1e-3, "%s on cuda: logits within 1e-3 of the cpu engine (max %.3g) %s", src[s], d,
			   err.msg);
			printf("# %s: cuda vs cpu max |logit diff| %.3g\n", src[s], d);
			if (s == 2)
				free(c);
			if (s)
				free(gg);
		}
		{
			float *x = logits_of(xv, FG_DEVICE_CUDA, n, &err);

			ok(g && x && !memcmp(g, x, sizeof(float) * (size_t)n * (size_t)V),
			   "INT4 k_eq_v on cuda = its k_proj written out as v_proj: logits bit-identical %s", err.msg);
			free(x);
		}
	}
	free(g);
	free(b);
	free(q);
}

int main(void)
{
	(void)seq_logits; /* engine_test.h: the CPU suites' fixed-sequence logits */
	if (!mkdtemp(tmp)) {
		ok(0, "mkdtemp");
		return tap_done();
	}
	check_config();
	check_checkpoints();
	check_bake();
	fg_rm_tree(tmp);
	return tap_done();
}
