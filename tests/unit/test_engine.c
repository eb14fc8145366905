/* test_engine.c - the CPU engine against transformers' answers for the tiny
 * Gemma 4 fixtures (tests/fixtures/oracle/, made by tests/oracle/), plus
 * thread-count and chunking determinism and the errors a user can cause. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "engine_test.h"

#include "engine/cpu/ops.h"
#include "engine/config.h"
#include "engine/engine.h"
#include "fsutil.h"
#include "json.h"
#include "safetensors.h"
#include "bf16.h"

#define FIX "tests/fixtures/oracle"
/* fp32 logits (range about +-25 after the softcap) may differ from
 * transformers' by summation order only; on these fixtures transformers'
 * own cached and uncached passes differ by up to 9.3e-4 and its GPU and CPU
 * runs by up to 1.9e-3 (docs/engine.md). */
#define TOL 5e-3

struct oracle {
	cJSON *json;
	float *logits;
	size_t n_floats;
	int vocab;
};

static int load_oracle(struct oracle *o, const char *json_path, const char *bin_path)
{
	struct fg_buf b = FG_BUF_INIT, l = FG_BUF_INIT;
	struct fg_err err = { 0 };
	long long v;

	memset(o, 0, sizeof(*o));
	if (fg_file_read(json_path, 1 << 24, &b, &err) || fg_json_parse(&o->json, b.data, b.len, json_path, &err) ||
	    fg_file_read(bin_path, 1 << 28, &l, &err)) {
		printf("# %s\n", err.msg);
		fg_buf_release(&b);
		fg_buf_release(&l);
		return -1;
	}
	fg_json_int(o->json, "vocab", &v);
	o->vocab = (int)v;
	o->n_floats = l.len / 4;
	o->logits = (float *)(void *)fg_buf_detach(&l, NULL);
	fg_buf_release(&b);
	return 0;
}

static void free_oracle(struct oracle *o)
{
	cJSON_Delete(o->json);
	free(o->logits);
}

static struct fg_engine *load(const char *dir, int threads, int window)
{
	struct fg_engine_opts o = { threads, window, 0, FG_DEVICE_CPU };
	struct fg_engine *e = NULL;
	struct fg_err err = { 0 };

	if (fg_engine_load(&e, dir, &o, &err))
		printf("# load %s: %s\n", dir, err.msg);
	return e;
}

/* Every prompt of an oracle file: logits at all positions within TOL, and
 * greedy continuation identical. */
static void check_oracle(const char *dir, const char *json, const char *bin, int window, const char *label)
{
	struct oracle o;
	struct fg_engine *e;
	const cJSON *p;
	double worst = 0;

	if (load_oracle(&o, json, bin)) {
		ok(0, "%s: oracle files readable", label);
		return;
	}
	e = load(dir, 2, window);
	ok(e != NULL, "%s: engine loads %s", label, dir);
	if (!e) {
		free_oracle(&o);
		return;
	}
	is_int(fg_engine_vocab_size(e), o.vocab, "%s: vocab", label);
	cJSON_ArrayForEach(p, fg_json_arr(o.json, "prompts")) {
		int np, ng, nw, i, npos;
		int32_t *pr = ids_of(fg_json_arr(p, "prompt"), &np);
		int32_t *gen = ids_of(fg_json_arr(p, "generated"), &ng), *want = greedy_want(p, &nw);
		int32_t *seq = malloc(sizeof(int32_t) * (size_t)(np + ng));
		long long off;
		float *lg;
		double maxd = 0;
		struct fg_err err = { 0 };
		struct gen g = { { 0 }, 0 };
		int same = 1;

		memcpy(seq, pr, sizeof(int32_t) * (size_t)np);
		memcpy(seq + np, gen, sizeof(int32_t) * (size_t)ng);
		npos = np + ng;
		fg_json_int(p, "logits_offset", &off);
		lg = malloc(sizeof(float) * (size_t)npos * (size_t)o.vocab);
		fg_engine_reset(e);
		if (fg_engine_forward_logits(e, seq, (size_t)npos, 0, lg, &err) ||
		    (size_t)off + (size_t)npos * (size_t)o.vocab > o.n_floats) {
			ok(0, "%s: forward prompt of %d: %s", label, np, err.msg);
		} else {
			for (i = 0; i < npos * o.vocab; i++) {
				double d = fabs((double)lg[i] - (double)o.logits[off + i]);

				if (!(d <= maxd))
					maxd = isnan(d) ? INFINITY : d;
			}
			ok(maxd <= TOL, "%s: prompt of %d + %d generated: logits at every position within %g (max |diff| %.3g)",
			   label, np, ng, TOL, maxd);
			if (maxd > worst)
				worst = maxd;
		}
		if (fg_engine_generate(e, pr, (size_t)np, ng, on_token, &g, &err))
			printf("# generate: %s\n", err.msg);
		for (i = 0; i < nw; i++)
			if (i >= g.n || g.ids[i] != want[i])
				same = 0;
		ok(same && g.n == nw, "%s: prompt of %d: greedy %d tokens identical to transformers'%s", label, np, nw,
		   fg_json_arr(p, "generated_full") ? " (its uncached pass)" : "");
		{
			struct gen g2 = {{0}, 0};

			if (fg_engine_generate_ids(e, pr, (size_t)np, ng, on_token, &g2, &err))
				printf("# generate_ids: %s\n", err.msg);
			ok(g2.n == g.n && !memcmp(g2.ids, g.ids, sizeof(int32_t) * (size_t)g.n),
			   "%s: prompt of %d: generate_ids gives generate's %d tokens", label, np, g.n);
		}
		if (!same)
			for (i = 0; i < g.n && i < nw; i++)
				if (g.ids[i] != want[i]) {
					printf("#   first difference at step %d: %d vs %d\n", i, g.ids[i], want[i]);
					break;
				}
		free(pr);
		free(gen);
		free(want);
		free(seq);
		free(lg);
	}
	printf("# %s: worst |logit diff| %.3g\n", label, worst);
	fg_engine_free(e);
	free_oracle(&o);
}

/* Logits of the fixed sequence (seq_logits) for a thread count; one_by_one
 * feeds one token at a time (decode), else the whole sequence (prefill). */
static float *run_seq(const char *dir, int threads, int one_by_one, int *n_out)
{
	return seq_logits(load(dir, threads, 0), dir, one_by_one, n_out);
}

static void check_determinism(const char *dir, const char *label)
{
	int n1 = 0, n2 = 0, n3 = 0, n4 = 0;
	float *a = run_seq(dir, 1, 0, &n1), *b = run_seq(dir, 2, 0, &n2), *c = run_seq(dir, 3, 0, &n3);
	float *d = run_seq(dir, 2, 1, &n4);

	ok(a && b && n1 == n2 && !memcmp(a, b, sizeof(float) * (size_t)n1), "%s: -j1 and -j2 logits bit-identical",
	   label);
	ok(a && c && n1 == n3 && !memcmp(a, c, sizeof(float) * (size_t)n1), "%s: -j1 and -j3 logits bit-identical",
	   label);
	ok(a && d && n1 == n4 && !memcmp(a, d, sizeof(float) * (size_t)n1),
	   "%s: prefill in chunks and one-token decode bit-identical", label);
	{
		int was = fg_cpu_set_simd(0), n5 = 0, n6 = 0;
		float *e5 = run_seq(dir, 2, 0, &n5), *e6 = run_seq(dir, 1, 1, &n6);

		fg_cpu_set_simd(was);
		ok(e5 && n5 == n1 && !memcmp(a, e5, sizeof(float) * (size_t)n1),
		   "%s: plain C loops and the SIMD path bit-identical (prefill)", label);
		ok(e6 && n6 == n1 && !memcmp(a, e6, sizeof(float) * (size_t)n1),
		   "%s: plain C loops and the SIMD path bit-identical (decode)", label);
		free(e5);
		free(e6);
	}
	free(a);
	free(b);
	free(c);
	free(d);
}

static char *read_text(const char *path)
{
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err = { 0 };

	fg_file_read(path, 1 << 20, &b, &err);
	return fg_buf_detach(&b, NULL);
}

static void check_errors(void)
{
	char dir[] = "/tmp/fg_test_engine_XXXXXX";
	struct fg_engine *e = NULL;
	struct fg_err err = { 0 };
	char *cfg;
	int rc;

	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp");
		return;
	}
	/* flat config (no text_config) gives the same logits as nested */
	cfg = edited_config(FIX "/bf16", NULL, NULL);
	scratch_model(dir, FIX "/bf16", cfg);
	free(cfg);
	{
		int n1 = 0, n2 = 0;
		float *a = run_seq(FIX "/bf16", 1, 0, &n1), *b = run_seq(dir, 1, 0, &n2);

		ok(a && b && n1 == n2 && !memcmp(a, b, sizeof(float) * (size_t)n1),
		   "config.json without text_config loads and gives the same logits");
		free(a);
		free(b);
	}
	cfg = edited_config(FIX "/bf16", "hidden_activation", cJSON_CreateString("silu"));
	scratch_model(dir, FIX "/bf16", cfg);
	free(cfg);
	rc = fg_engine_load(&e, dir, NULL, &err);
	ok(rc == FG_EUNSUPPORTED && strstr(err.msg, "hidden_activation"), "unsupported config value names the key: %s",
	   err.msg);
	cfg = edited_config(FIX "/bf16", "enable_moe_block", cJSON_CreateTrue());
	scratch_model(dir, FIX "/bf16", cfg);
	free(cfg);
	rc = fg_engine_load(&e, dir, NULL, &err);
	ok(rc == FG_EFORMAT && strstr(err.msg, "missing key num_experts"),
	   "enable_moe_block without num_experts refused by key (test_engine_moe.c has the rest): %s", err.msg);
	cfg = edited_config(FIX "/bf16", "num_kv_shared_layers", cJSON_CreateNumber(2));
	scratch_model(dir, FIX "/bf16", cfg);
	free(cfg);
	rc = fg_engine_load(&e, dir, NULL, &err);
	ok(rc == FG_ENOTFOUND && strstr(err.msg, "layers.5.self_attn.k_proj.weight"),
	   "a missing tensor is named: %s", err.msg);
	cfg = edited_config(FIX "/bf16", "hidden_size", cJSON_CreateNumber(64));
	scratch_model(dir, FIX "/bf16", cfg);
	free(cfg);
	rc = fg_engine_load(&e, dir, NULL, &err);
	ok(rc == FG_EFORMAT && strstr(err.msg, "embed_tokens.weight has shape 512 x 96"),
	   "a misshapen tensor is named: %s", err.msg);

	/* sequence limits */
	e = load(FIX "/bf16", 1, 0);
	if (e) {
		int32_t *ids = calloc(200, sizeof(int32_t));
		int i;

		for (i = 0; i < 200; i++)
			ids[i] = 3 + i;
		is_int(fg_engine_max_seq(e), 128, "max sequence defaults to max_position_embeddings");
		rc = fg_engine_generate(e, ids, 129, 4, NULL, NULL, &err);
		ok(rc == FG_EINVAL && strstr(err.msg, "longer than the maximum"), "too long prompt refused: %s", err.msg);
		rc = fg_engine_generate(e, ids, 100, 40, NULL, NULL, &err);
		ok(rc == FG_EINVAL && strstr(err.msg, "exceeds the maximum"), "prompt + new tokens past the max refused: %s",
		   err.msg);
		fg_engine_reset(e);
		rc = fg_engine_forward_logits(e, ids, 120, 1, NULL, &err);
		is_int(rc, 0, "120 tokens fit");
		rc = fg_engine_forward_logits(e, ids, 9, 1, NULL, &err);
		ok(rc == FG_EINVAL, "forward past the cache refused: %s", err.msg);
		ids[0] = 512;
		fg_engine_reset(e);
		rc = fg_engine_forward_logits(e, ids, 1, 1, NULL, &err);
		ok(rc == FG_EINVAL && strstr(err.msg, "out of range"), "token id out of range refused: %s", err.msg);
		is_int(fg_engine_is_eos(e, 1), 1, "eos 1");
		is_int(fg_engine_is_eos(e, 106), 1, "eos 106 (top-level config)");
		is_int(fg_engine_bos_id(e), 2, "bos 2");
		free(ids);
		fg_engine_free(e);
	}
	{
		char p[512];

		snprintf(p, sizeof(p), "%s/config.json", dir);
		unlink(p);
		snprintf(p, sizeof(p), "%s/model.safetensors", dir);
		unlink(p);
		rmdir(dir);
	}
}

/* The bf16 fixture rewritten with every BF16 tensor as F32 (exact) must give
 * the same logits bit for bit: the F32 binding and row paths agree. */
static int copy_as(const char *src, const char *dir, const char *only, int dtype);

static void check_f32(void)
{
	char dir[] = "/tmp/fg_test_engine_f32_XXXXXX", p[512];
	int rc = -1, n1 = 0, n2 = 0;
	float *a, *b;

	if (!mkdtemp(dir)) {
		ok(0, "f32 checkpoint: setup: mkdtemp failed");
		return;
	}
	rc = copy_as(FIX "/bf16", dir, NULL, FG_ST_F32);
	ok(rc == 0, "f32 copy of the bf16 fixture written");
	a = run_seq(FIX "/bf16", 2, 0, &n1);
	b = run_seq(dir, 2, 0, &n2);
	ok(a && b && n1 == n2 && !memcmp(a, b, sizeof(float) * (size_t)n1),
	   "an F32 checkpoint gives the same logits as its BF16 original, bit for bit");
	free(a);
	free(b);
	snprintf(p, sizeof(p), "%s/config.json", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/model.safetensors", dir);
	unlink(p);
	rmdir(dir);
}

/* src's model folder copied to dir with its float tensors (only the one
 * named `only`, when not NULL) rewritten as dtype: F32 and F64 exactly, I32
 * rounded (for the error cases). */
static int copy_as(const char *src, const char *dir, const char *only, int dtype)
{
	struct fg_st_set *set = NULL;
	struct fg_st_writer *w = NULL;
	struct fg_st_desc *d;
	struct fg_err err = { 0 };
	char p[600];
	size_t i, n;
	uint64_t k;
	char *cfg;
	FILE *f;
	int rc;

	snprintf(p, sizeof(p), "%s/model.safetensors", src);
	if (fg_st_open(&set, p, &err)) {
		printf("# %s\n", err.msg);
		return -1;
	}
	n = fg_st_count(set);
	d = calloc(n, sizeof(*d));
	for (i = 0; i < n; i++) {
		const struct fg_st_tensor *t = fg_st_at(set, i);
		int fl = t->dtype == FG_ST_BF16 || t->dtype == FG_ST_F16 || t->dtype == FG_ST_F32;

		d[i].name = t->name;
		d[i].dtype = fl && (!only || !strcmp(only, t->name)) ? dtype : t->dtype;
		d[i].ndim = t->ndim;
		memcpy(d[i].shape, t->shape, sizeof(d[i].shape));
	}
	rc = fg_st_writer_new(&w, dir, d, n, 0, NULL, &err);
	if (!rc)
		fg_st_writer_no_sync(w);
	for (i = 0; i < n && !rc; i++) {
		const struct fg_st_tensor *t = fg_st_at(set, i);

		if (d[i].dtype == t->dtype) {
			rc = fg_st_writer_write(w, t->data, t->nbytes, &err);
			continue;
		}
		for (k = 0; k < t->nelem && !rc; k++) {
			double v = fg_st_f32_at(t->data, t->dtype, k);
			float vf = (float)v;
			int32_t vi = (int32_t)lrint(v);

			rc = dtype == FG_ST_F64 ? fg_st_writer_write(w, &v, 8, &err)
			     : dtype == FG_ST_F32 ? fg_st_writer_write(w, &vf, 4, &err)
						 : fg_st_writer_write(w, &vi, 4, &err);
		}
	}
	if (!rc)
		rc = fg_st_writer_finish(w, &err);
	if (rc)
		printf("# copy %s: %s\n", src, err.msg);
	fg_st_writer_free(w);
	fg_st_free(set);
	free(d);
	snprintf(p, sizeof(p), "%s/config.json", src);
	cfg = read_text(p);
	snprintf(p, sizeof(p), "%s/config.json", dir);
	f = fopen(p, "w");
	if (f && cfg)
		fputs(cfg, f);
	if (f)
		fclose(f);
	free(cfg);
	return rc;
}

static void rm_model(const char *dir)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/config.json", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/model.safetensors", dir);
	unlink(p);
}

/* The F16 checkpoint made by transformers (variants/f16-untied): as
 * deterministic as bf16 (threads, chunks, SIMD or not), the same logits bit
 * for bit as its exact F32 copy, and a tensor of a dtype the engine does not
 * read (F64, I32) refused in one line naming the file and the tensor. */
static void check_f16(void)
{
	static const char *const f16 = FIX "/variants/f16-untied";
	static const struct {
		const char *name;
		int dtype;
	} bad[] = {
		{ "model.layers.0.mlp.up_proj.weight", FG_ST_F64 },
		{ "model.embed_tokens.weight", FG_ST_F64 },
		{ "lm_head.weight", FG_ST_I32 },
		{ "model.layers.1.input_layernorm.weight", FG_ST_I32 },
		{ "model.per_layer_projection_norm.weight", FG_ST_F64 },
	};
	char dir[] = "/tmp/fg_test_f16_XXXXXX", file[600];
	struct fg_engine *e = NULL;
	struct fg_err err = { 0 };
	int n1 = 0, n2 = 0;
	float *a, *b;
	size_t i;

	check_determinism(f16, "f16");
	e = load(f16, 1, 0);
	is_str(e ? fg_engine_weight_format(e) : "", "f16", "f16: weight format reported as f16");
	fg_engine_free(e);
	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp");
		return;
	}
	is_int(copy_as(f16, dir, NULL, FG_ST_F32), 0, "f16: exact F32 copy written");
	a = run_seq(f16, 2, 0, &n1);
	b = run_seq(dir, 2, 0, &n2);
	ok(a && b && n1 == n2 && !memcmp(a, b, sizeof(float) * (size_t)n1),
	   "an F16 checkpoint gives the same logits as its F32 copy, bit for bit");
	free(a);
	free(b);
	snprintf(file, sizeof(file), "%s/model.safetensors", dir);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *dn = fg_st_dtype_name(bad[i].dtype);
		int rc;

		rm_model(dir);
		memset(&err, 0, sizeof(err));
		rc = copy_as(f16, dir, bad[i].name, bad[i].dtype);
		e = NULL;
		if (!rc)
			rc = fg_engine_load(&e, dir, NULL, &err) == 0 ? -1 : 0;
		fg_engine_free(e);
		ok(rc == 0 && strstr(err.msg, file) && strstr(err.msg, bad[i].name) && strstr(err.msg, dn) &&
			   !strchr(err.msg, '\n'),
		   "%s as %s refused in one line naming file and tensor: %s", bad[i].name, dn, err.msg);
	}
	rm_model(dir);
	rmdir(dir);
}

/* An E4B-shaped config.json (text_config nested, as google/gemma-4-E4B ships
 * it): the derived structure the engine and the CUDA path rely on. */
static const char *e4b_json =
		"{\"architectures\": [\"Gemma4ForConditionalGeneration\"], \"model_type\": \"gemma4\","
		" \"eos_token_id\": [1, 106], \"vision_config\": {\"hidden_size\": 768},"
		" \"text_config\": {\"model_type\": \"gemma4_text\", \"vocab_size\": 262144,"
		" \"hidden_size\": 2560, \"intermediate_size\": 10240, \"num_hidden_layers\": 42,"
		" \"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"head_dim\": 256,"
		" \"global_head_dim\": 512, \"hidden_size_per_layer_input\": 256,"
		" \"vocab_size_per_layer_input\": 262144, \"sliding_window\": 512,"
		" \"num_kv_shared_layers\": 18, \"final_logit_softcapping\": 30.0, \"rms_norm_eps\": 1e-06,"
		" \"hidden_activation\": \"gelu_pytorch_tanh\", \"max_position_embeddings\": 131072,"
		" \"use_double_wide_mlp\": false, \"attention_k_eq_v\": false, \"enable_moe_block\": false,"
		" \"num_global_key_value_heads\": null, \"tie_word_embeddings\": true, \"eos_token_id\": 1,"
		" \"bos_token_id\": 2, \"pad_token_id\": 0,"
		" \"rope_parameters\": {\"full_attention\": {\"partial_rotary_factor\": 0.25,"
		" \"rope_theta\": 1000000.0, \"rope_type\": \"proportional\"}, \"sliding_attention\":"
		" {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}}}";

static void check_e4b_config(void)
{
	const char *json = e4b_json;
	struct fg_g4_config c;
	struct fg_err err = { 0 };
	int rc = fg_g4_config_parse(&c, json, strlen(json), "e4b", &err), i, full = 0, ok_src = 1;
	float inv[256];

	is_int(rc, 0, "E4B config parses: %s", err.msg);
	if (rc)
		return;
	for (i = 0; i < 42; i++)
		full += c.layer_type[i] == FG_G4_FULL;
	is_int(full, 7, "E4B: 7 full layers (layer_types defaulted 5:1)");
	ok(c.layer_type[5] == FG_G4_FULL && c.layer_type[41] == FG_G4_FULL && c.layer_type[40] == FG_G4_SLIDING,
	   "E4B: full at 5 and 41");
	is_int(fg_g4_first_shared(&c), 24, "E4B: layers 24..41 share KV");
	for (i = 24; i < 42; i++)
		if (fg_g4_kv_source(&c, i) != (c.layer_type[i] == FG_G4_FULL ? 23 : 22))
			ok_src = 0;
	ok(ok_src, "E4B: shared sliding layers read layer 22, shared full layers layer 23");
	is_int(fg_g4_layer_head_dim(&c, 23), 512, "E4B: full head dim 512");
	is_int(fg_g4_layer_head_dim(&c, 22), 256, "E4B: sliding head dim 256");
	is_int(c.n_eos, 2, "E4B: eos ids 1 and 106");
	fg_cpu_rope_freqs(inv, 512, c.rope[FG_G4_FULL].theta, c.rope[FG_G4_FULL].proportional,
			  c.rope[FG_G4_FULL].partial, c.rope[FG_G4_FULL].factor);
	ok(inv[63] > 0 && inv[64] == 0 && inv[255] == 0 && inv[0] == 1.0f,
	   "E4B: proportional RoPE rotates 64 of 256 pairs");
	ok(fabsf(inv[1] - (float)pow(1e6, -2.0 / 512)) < 1e-9f, "E4B: full-layer exponent divides by 512");
}

/* The E4B config with its "global_head_dim": 512 replaced by repl; parsed
 * into c; returns the parse's code (message in err). */
static int e4b_with(const char *repl, struct fg_g4_config *c, struct fg_err *err)
{
	static const char key[] = "\"global_head_dim\": 512,";
	const char *at = strstr(e4b_json, key);
	char *j = malloc(strlen(e4b_json) + strlen(repl) + 1);
	size_t head, rl = strlen(repl), tail;
	int rc;

	if (!at || !j) {
		free(j);
		return -1;
	}
	head = (size_t)(at - e4b_json);
	tail = strlen(at + strlen(key));

	memcpy(j, e4b_json, head);
	memcpy(j + head, repl, rl);
	memcpy(j + head + rl, at + strlen(key), tail + 1);
	rc = fg_g4_config_parse(c, j, strlen(j), "e4b", err);
	free(j);
	return rc;
}

/* Head sizes as transformers >= 5.15 writes them (per_layer_config, no
 * global_head_dim), as before, and what the engine refuses. */
static void check_per_layer_config(void)
{
	static const char *full5 = "\"per_layer_config\": {\"5\": {\"head_dim\": 512}, \"11\": {\"head_dim\": 512},"
				   " \"17\": {\"head_dim\": 512}, \"23\": {\"head_dim\": 512}, \"29\": {\"head_dim\": 512},"
				   " \"35\": {\"head_dim\": 512}, \"41\": {\"head_dim\": 512, \"num_key_value_heads\": 2}},";
	static const struct {
		const char *repl, *msg;
	} bad[] = {
		{ "\"per_layer_config\": {\"5\": {\"head_dim\": 512}},", "full layer 11 has head_dim 256, another 512" },
		{ "\"per_layer_config\": {\"3\": {\"num_key_value_heads\": 4}},", "sliding layer 3 has num_key_value_heads 4, another 2" },
		{ "\"per_layer_config\": {\"3\": {\"num_key_value_heads\": 3}},", "sliding layer 3 has 3 KV heads, which do not divide" },
		{ "\"per_layer_config\": {\"3\": {\"num_attention_heads\": 4}},", "per_layer_config.3.num_attention_heads differs" },
		{ "\"per_layer_config\": {\"3\": {\"sliding_window\": 4}},", "per_layer_config.3.sliding_window is not supported" },
		{ "\"per_layer_config\": {\"42\": {\"head_dim\": 8}},", "per_layer_config.42 is not a layer index 0..41" },
		{ "\"per_layer_config\": {\"x\": {}},", "per_layer_config.x is not a layer index" },
		{ "\"per_layer_config\": [],", "per_layer_config is not an object" },
		{ "\"global_head_dim\": 513,", "must be even" },
	};
	struct fg_g4_config c;
	struct fg_err err = { 0 };
	size_t i;

	is_int(e4b_with(full5, &c, &err), 0, "per_layer_config (transformers >= 5.15) parses: %s", err.msg);
	ok(fg_g4_layer_head_dim(&c, 5) == 512 && fg_g4_layer_head_dim(&c, 41) == 512 &&
		   fg_g4_layer_head_dim(&c, 4) == 256,
	   "per_layer_config: full layers 512, sliding 256");
	is_int(e4b_with("", &c, &err), 0, "no global_head_dim, no per_layer_config: parses");
	is_int(fg_g4_layer_head_dim(&c, 5), 512, "no global_head_dim, no per_layer_config: full layers 512 (transformers' default)");
	is_int(e4b_with("\"per_layer_config\": {},", &c, &err), 0, "per_layer_config {}: parses");
	is_int(fg_g4_layer_head_dim(&c, 5), 256, "per_layer_config without entries: full layers keep head_dim");
	is_int(e4b_with("\"per_layer_config\": {}, \"global_head_dim\": 128,", &c, &err), 0,
	       "per_layer_config beside global_head_dim: parses");
	is_int(fg_g4_layer_head_dim(&c, 5), 256, "per_layer_config present: global_head_dim not read (as transformers)");
	is_int(e4b_with("\"num_global_key_value_heads\": 4,", &c, &err), 0,
	       "num_global_key_value_heads without attention_k_eq_v: ignored, as transformers");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		ok(e4b_with(bad[i].repl, &c, &err) != 0 && strstr(err.msg, bad[i].msg) && !strchr(err.msg, '\n'),
		   "refused in one line: %s (%s)", bad[i].msg, err.msg);
	}
}

/* use_bidirectional_attention as transformers 5.17 reads it: null and
 * "vision" (bidirectional among image tokens only) leave text causal and
 * load; "all" (every token both ways) and anything else are refused in one
 * line naming the key. The bidir-vision variant checks "vision" against
 * transformers' own logits. */
static void check_bidirectional(void)
{
	static const char *const good[] = { "\"use_bidirectional_attention\": null,",
					    "\"use_bidirectional_attention\": \"vision\"," };
	static const char *const bad[] = { "\"use_bidirectional_attention\": \"all\",",
					   "\"use_bidirectional_attention\": \"Vision\",",
					   "\"use_bidirectional_attention\": \"text\",",
					   "\"use_bidirectional_attention\": true,",
					   "\"use_bidirectional_attention\": 1,",
					   "\"use_bidirectional_attention\": [\"vision\"]," };
	struct fg_g4_config c, ref;
	struct fg_err err = { 0 };
	size_t i;

	is_int(e4b_with("", &ref, &err), 0, "E4B config without the key parses");
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		memset(&err, 0, sizeof(err));
		is_int(e4b_with(good[i], &c, &err), 0, "accepted: %s %s", good[i], err.msg);
		ok(!memcmp(&c, &ref, sizeof(c)), "%s gives the config of a model without the key", good[i]);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		ok(e4b_with(bad[i], &c, &err) == FG_EUNSUPPORTED && strstr(err.msg, "use_bidirectional_attention") &&
			   !strchr(err.msg, '\n'),
		   "refused in one line: %s (%s)", bad[i], err.msg);
	}
}

/* e4b_json with its first occurrence of from replaced by to, parsed into c. */
static int e4b_edit(const char *from, const char *to, struct fg_g4_config *c, struct fg_err *err)
{
	const char *at = strstr(e4b_json, from);
	size_t head = at ? (size_t)(at - e4b_json) : 0, fl = strlen(from), tl = strlen(to);
	char *j = malloc(strlen(e4b_json) + tl + 1);
	int rc;

	if (!at || !j) {
		free(j);
		return -1;
	}
	memcpy(j, e4b_json, head);
	memcpy(j + head, to, tl);
	memcpy(j + head + tl, at + fl, strlen(at + fl) + 1);
	rc = fg_g4_config_parse(c, j, strlen(j), "e4b", err);
	free(j);
	return rc;
}

/* A Gemma4ForConditionalGeneration config (text_config nested) read as
 * transformers 5.17 reads it (tests/fixtures/oracle/mm-probes.json, the mm-*
 * variants): the head's tying from the top-level tie_word_embeddings only
 * (default true), bos/eos from the top level first, then text_config (as
 * GenerationConfig.from_model_config), and the image/video/audio
 * placeholder ids embedded as text_config's pad_token_id. */
static void check_mm_config(void)
{
	static const char tie_top[] = "\"model_type\": \"gemma4\",";
	static const char tie_text[] = "\"tie_word_embeddings\": true,";
	struct fg_g4_config c;
	struct fg_err err = { 0 };

	is_int(e4b_edit(tie_top, "\"model_type\": \"gemma4\", \"tie_word_embeddings\": false,", &c, &err), 0,
	       "top-level tie_word_embeddings false parses");
	is_int(c.tie_embeddings, 0, "top-level tie_word_embeddings false, text_config true: untied (as transformers)");
	is_int(e4b_edit(tie_text, "\"tie_word_embeddings\": false,", &c, &err), 0, "text_config tie false parses");
	is_int(c.tie_embeddings, 1, "text_config tie_word_embeddings false, none at the top: tied (Gemma4Config's default)");
	is_int(e4b_edit(tie_text, "", &c, &err), 0, "no tie_word_embeddings anywhere parses");
	is_int(c.tie_embeddings, 1, "no tie_word_embeddings: tied");

	is_int(e4b_edit("", "", &c, &err), 0, "E4B config parses");
	ok(c.n_eos == 2 && c.eos[0] == 1 && c.eos[1] == 106 && c.bos == 2, "eos [1, 106] from the top level, bos 2 from text_config");
	is_int(e4b_edit("\"eos_token_id\": [1, 106],", "\"eos_token_id\": [106], \"bos_token_id\": 5,", &c, &err), 0,
	       "top-level eos [106] and bos 5 parse");
	ok(c.n_eos == 1 && c.eos[0] == 106 && c.bos == 5, "top-level eos and bos win over text_config's (eos %d ids, bos %d)",
	   c.n_eos, c.bos);
	is_int(e4b_edit("\"eos_token_id\": [1, 106],", "\"eos_token_id\": null,", &c, &err), 0, "top-level eos null parses");
	ok(c.n_eos == 1 && c.eos[0] == 1, "top-level eos null: text_config's 1");

	is_int(e4b_edit("", "", &c, &err), 0, "E4B config parses");
	ok(c.n_mm_ids == 3 && c.pad == 0 && fg_g4_input_id(&c, 258880) == 0 && fg_g4_input_id(&c, 258881) == 0 &&
		   fg_g4_input_id(&c, 258884) == 0 && fg_g4_input_id(&c, 258882) == 258882 && fg_g4_input_id(&c, 7) == 7,
	   "E4B: image/audio/video placeholders (Gemma4Config defaults) read as pad 0, other ids as themselves");
	is_int(e4b_edit(tie_top, "\"model_type\": \"gemma4\", \"image_token_id\": null, \"audio_token_id\": 9,",
			&c, &err), 0, "placeholder ids null / 9 parse");
	ok(c.n_mm_ids == 2 && fg_g4_input_id(&c, 258880) == 258880 && fg_g4_input_id(&c, 9) == 0 &&
		   fg_g4_input_id(&c, 258881) == 258881 && fg_g4_input_id(&c, 258884) == 0,
	   "image_token_id null: none; audio_token_id 9: 9 read as pad");
	is_int(e4b_edit("\"pad_token_id\": 0", "\"pad_token_id\": 3", &c, &err), 0, "pad_token_id 3 parses");
	is_int(fg_g4_input_id(&c, 258880), 3, "placeholders read as text_config's pad_token_id");
	memset(&err, 0, sizeof(err));
	ok(e4b_edit("\"pad_token_id\": 0", "\"pad_token_id\": 262144", &c, &err) == FG_EUNSUPPORTED &&
		   strstr(err.msg, "pad_token_id") && !strchr(err.msg, '\n'),
	   "pad_token_id past the vocabulary refused in one line (%s)", err.msg);
	memset(&err, 0, sizeof(err));
	ok(e4b_edit(tie_top, "\"model_type\": \"gemma4\", \"video_token_id\": \"x\",", &c, &err) == FG_EFORMAT &&
		   strstr(err.msg, "video_token_id"), "video_token_id not a number refused (%s)", err.msg);
	{
		/* a flat config (Gemma4ForCausalLM): no placeholders */
		const char *flat = "{\"model_type\": \"gemma4_text\", \"vocab_size\": 300000, \"hidden_size\": 8,"
				   " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 1,"
				   " \"num_key_value_heads\": 1, \"head_dim\": 4, \"image_token_id\": 5}";

		is_int(fg_g4_config_parse(&c, flat, strlen(flat), "flat", &err), 0, "flat config parses");
		ok(c.n_mm_ids == 0 && fg_g4_input_id(&c, 258880) == 258880 && fg_g4_input_id(&c, 5) == 5,
		   "flat config: every id embeds as itself");
	}
}

/* A head pruned to a keepset (fgpack bake prune-head, bf16 rows): the kept
 * tokens' logits are the full head's bit for bit, every other one is -inf,
 * and greedy decoding picks the best kept token. */
static void check_pruned(const char *src, int V, const char *label)
{
	char dir[] = "/tmp/fg_prune_XXXXXX", out[600];
	struct fg_err err = {0};
	struct fg_engine *full = NULL, *pr = NULL;
	int32_t seq[12] = {2, 17, 99, 4, 250, 31, 7, 400, 12, 88, 5, 60};
	int n = 12, i, same = 1, inf = 1, rc;

	for (i = 0; i < n; i++)
		seq[i] %= V;
	if (!mkdtemp(dir) || prune_fixture(out, sizeof(out), dir, src, V, 0)) {
		ok(0, "%s: pruned copy written", label);
		return;
	}
	full = load(src, 1, 0);
	rc = fg_engine_load(&pr, out, NULL, &err);
	ok(rc == 0 && full, "%s: the pruned checkpoint loads %s", label, err.msg);
	if (rc || !full)
		goto done;
	rc = compare_pruned(full, pr, seq, n, &same, &inf, &err);
	ok(!rc && same, "%s: pruned head: kept tokens' logits bit-identical to the full head's", label);
	ok(!rc && inf, "%s: pruned head: every other token's logit is -inf", label);
	{
		struct gen g = {{0}, 0}, g2 = {{0}, 0};
		int kept = 1;

		rc = fg_engine_generate(pr, seq, 4, 16, on_token, &g, &err) ||
		     fg_engine_generate_ids(pr, seq, 4, 16, on_token, &g2, &err);
		for (i = 0; i < g.n; i++)
			kept &= g.ids[i] % 3 != 1 || g.ids[i] == 1;
		ok(!rc && g.n == 16 && kept && g2.n == g.n && !memcmp(g.ids, g2.ids, sizeof(int32_t) * (size_t)g.n),
		   "%s: pruned head: greedy tokens all kept, generate_ids = generate %s", label, err.msg);
	}
done:
	fg_engine_free(full);
	fg_engine_free(pr);
	fg_rm_tree(dir);
}

int main(void)
{
	(void)logits_of; /* engine_test.h: the bake suites' logits */
	check_oracle(FIX "/bf16", FIX "/bf16/oracle.json", FIX "/bf16/logits.bin", 0, "bf16");
	check_oracle(FIX "/int4", FIX "/int4/oracle.json", FIX "/int4/logits.bin", 0, "int4");
	check_oracle(FIX "/bf16", FIX "/bf16/oracle-window5.json", FIX "/bf16/logits-window5.bin", 5,
		     "bf16 --sliding-window 5");
	check_determinism(FIX "/bf16", "bf16");
	check_determinism(FIX "/int4", "int4");
	check_determinism(FIX "/variants/kveq-shared", "kveq-shared (attention_k_eq_v)");
	check_errors();
	check_f32();
	check_f16();
	check_e4b_config();
	check_per_layer_config();
	check_bidirectional();
	check_mm_config();
	ok(for_each_variant(FIX "/variants", check_oracle) >= 3, "the models made by transformers checked");
	check_pruned(FIX "/bf16", 512, "bf16");
	check_pruned(FIX "/int4", 512, "int4");
	/* transformers' multimodal checkpoints: tied (PLE, placeholders) and an untied lm_head */
	check_pruned(FIX "/variants/mm-e4b", 256, "mm-e4b");
	check_pruned(FIX "/variants/mm-tie-top", 256, "mm-tie-top");
	check_pruned(FIX "/variants/mm-tie-text", 256, "mm-tie-text");
	return tap_done();
}
