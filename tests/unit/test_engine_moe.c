/* test_engine_moe.c - the CPU engine on Gemma 4 mixture-of-experts models
 * (enable_moe_block, the 26B-A4B structure) made by transformers'
 * save_pretrained: tests/fixtures/oracle/variants/moe (bf16, 6 experts, top
 * 2) and moe-f32 (fp32, 4 experts, top 3, PLE, a KV-shared layer). Their
 * logits and greedy tokens against transformers' are checked by
 * test_engine.c with every variant; here: determinism (threads, chunks,
 * SIMD), the two expert layouts giving the same bits (3-D as transformers
 * saves them, per-expert 2-D as vLLM loads quantized ones), F32 = BF16 bits,
 * the one-line errors of a broken checkpoint or config, `bake int4` /
 * `bake prune-head` on an MoE checkpoint with the engine running what they
 * write, and --device cuda on those checkpoints against the CPU engine
 * (where there is a GPU; test_engine_cuda holds the fixtures to
 * transformers there). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "engine_test.h"
#include "rewrite_test.h"

#include "bake/int4.h"
#include "bf16.h"
#include "engine/config.h"
#include "engine/cpu/ops.h"
#include "engine/cuda.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "fsutil.h"
#include "json.h"
#include "safetensors.h"

#define MOE "tests/fixtures/oracle/variants/moe"
#define MOE32 "tests/fixtures/oracle/variants/moe-f32"

static struct fg_engine *load(const char *dir, int threads, int device, struct fg_err *err)
{
	struct fg_engine_opts o = { threads, 0, 0, device };
	struct fg_engine *e = NULL;

	if (fg_engine_load(&e, dir, &o, err))
		return NULL;
	return e;
}

/* Logits of the fixed sequence (seq_logits): the whole sequence at once
 * (prefill in chunks) or one token at a time. */
static float *run_seq(const char *dir, int threads, int one_by_one, int *n_out)
{
	struct fg_err err = { 0 };
	struct fg_engine *e = load(dir, threads, FG_DEVICE_CPU, &err);

	if (!e)
		printf("# load %s: %s\n", dir, err.msg);
	return seq_logits(e, dir, one_by_one, n_out);
}

static int same_bits(const float *a, const float *b, int na, int nb)
{
	return a && b && na == nb && na > 0 && !memcmp(a, b, sizeof(float) * (size_t)na);
}

static double max_diff(const float *a, const float *b, int n)
{
	double m = 0;
	int i;

	for (i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]);

		if (!(d <= m))
			m = isnan(d) ? INFINITY : d;
	}
	return m;
}

static void check_determinism(const char *dir, const char *label)
{
	int n1, n2, n3, n4, n5, n6, was;
	float *a = run_seq(dir, 1, 0, &n1), *b = run_seq(dir, 2, 0, &n2), *c = run_seq(dir, 3, 0, &n3);
	float *d = run_seq(dir, 2, 1, &n4), *e5, *e6;

	ok(same_bits(a, b, n1, n2), "%s: -j1 and -j2 logits bit-identical", label);
	ok(same_bits(a, c, n1, n3), "%s: -j1 and -j3 logits bit-identical", label);
	ok(same_bits(a, d, n1, n4), "%s: prefill in chunks and one-token decode bit-identical", label);
	was = fg_cpu_set_simd(0);
	e5 = run_seq(dir, 2, 0, &n5);
	e6 = run_seq(dir, 1, 1, &n6);
	fg_cpu_set_simd(was);
	ok(same_bits(a, e5, n1, n5), "%s: plain C loops and the SIMD path bit-identical (prefill)", label);
	ok(same_bits(a, e6, n1, n6), "%s: plain C loops and the SIMD path bit-identical (decode)", label);
	free(a), free(b), free(c), free(d), free(e5), free(e6);
}

/* ---- the checks ------------------------------------------------------------ */

static char tmp[] = "/tmp/fg_test_moe_XXXXXX";

/* A fresh, empty sub-folder of tmp. */
static const char *sub(const char *name)
{
	static char p[600];
	struct fg_err err = { 0 };

	snprintf(p, sizeof(p), "%s/%s", tmp, name);
	fg_rm_tree(p);
	fg_mkdir_p(p, 0755, &err);
	return p;
}

static void check_layouts(void)
{
	int n0, n1, n2;
	float *a = run_seq(MOE, 2, 0, &n0), *b, *c;
	const char *dir;

	dir = sub("f32");
	ok(rewrite(MOE, dir, TO_F32, NULL, NULL, NULL) == 0, "moe: exact F32 copy written");
	b = run_seq(dir, 2, 0, &n1);
	ok(same_bits(a, b, n0, n1), "moe: F32 experts (and the rest in F32) give the BF16 logits bit for bit");
	dir = sub("split");
	ok(rewrite(MOE, dir, SPLIT, NULL, NULL, NULL) == 0, "moe: per-expert 2-D copy written");
	c = run_seq(dir, 2, 0, &n2);
	ok(same_bits(a, c, n0, n2), "moe: per-expert 2-D experts (vLLM's layout) give the 3-D layout's logits bit for bit");
	free(a), free(b), free(c);
}

/* Loading dir fails with code (0: any) in one line holding want. */
static void refused(const char *dir, int code, const char *want, const char *what)
{
	struct fg_err err = { 0 };
	struct fg_engine *e = load(dir, 1, FG_DEVICE_CPU, &err);

	ok(!e && (!code || err.code == code) && strstr(err.msg, want) && !strchr(err.msg, '\n'),
	   "%s refused in one line naming it: %s", what, err.msg);
	fg_engine_free(e);
}

static void check_errors(void)
{
	const char *dir;
	char file[700];

	dir = sub("topk");
	rewrite(MOE, dir, AS_IS, NULL, "top_k_experts", cJSON_CreateNumber(7));
	refused(dir, FG_EUNSUPPORTED, "top_k_experts = 7 exceeds num_experts = 6", "top_k_experts > num_experts");
	dir = sub("noexperts");
	rewrite(MOE, dir, AS_IS, NULL, "num_experts", NULL);
	refused(dir, FG_EFORMAT, "missing key num_experts", "enable_moe_block without num_experts");
	dir = sub("inter");
	rewrite(MOE, dir, AS_IS, NULL, "moe_intermediate_size", cJSON_CreateNumber(31));
	refused(dir, FG_EFORMAT, "tensor model.layers.0.experts.gate_up_proj has shape 6 x 64 x 64, expected 6 x 62 x 64",
		"3-D experts of the wrong shape");
	dir = sub("nexp");
	rewrite(MOE, dir, AS_IS, NULL, "num_experts", cJSON_CreateNumber(5));
	refused(dir, FG_EFORMAT, "tensor model.layers.0.router.proj.weight has shape 6 x 64, expected 5 x 64",
		"a router of the wrong shape");
	dir = sub("down");
	rewrite(MOE, dir, DROP, "model.layers.1.experts.down_proj", NULL, NULL);
	refused(dir, FG_ENOTFOUND, "tensor model.layers.1.experts.down_proj is missing", "a missing experts.down_proj");
	dir = sub("scale");
	rewrite(MOE, dir, DROP, "model.layers.0.router.per_expert_scale", NULL, NULL);
	refused(dir, FG_ENOTFOUND, "tensor model.layers.0.router.per_expert_scale is missing",
		"a missing router.per_expert_scale");
	dir = sub("norm2");
	rewrite(MOE, dir, DROP, "model.layers.3.post_feedforward_layernorm_2.weight", NULL, NULL);
	refused(dir, FG_ENOTFOUND, "tensor model.layers.3.post_feedforward_layernorm_2.weight is missing",
		"a missing post_feedforward_layernorm_2");
	dir = sub("i32");
	rewrite(MOE, dir, TO_I32, "model.layers.2.experts.gate_up_proj", NULL, NULL);
	snprintf(file, sizeof(file), "%s/model.safetensors: tensor model.layers.2.experts.gate_up_proj: dtype I32", dir);
	refused(dir, FG_EUNSUPPORTED, file, "3-D experts of dtype I32");
	dir = sub("split-missing");
	rewrite(MOE, dir, SPLIT, "model.layers.2.experts.3.up_proj.weight", NULL, NULL);
	refused(dir, FG_ENOTFOUND, "tensor model.layers.2.experts.3.up_proj.weight is missing",
		"a missing per-expert tensor");
}

/* What the CUDA path still refuses, in one line, before it looks for a GPU
 * (so checked everywhere): INT4 experts (one expert's down_proj marked INT4
 * in the loaded model; per-expert weight_packed linears load that way) and
 * more than FG_MOE_MAX_K experts per token. */
static void check_cuda_refusals(void)
{
	struct fg_err err = { 0 };
	struct fg_g4_model *m = NULL;
	struct fg_g4_gpu *g = NULL;
	const float *inv[2] = { NULL, NULL };
	int fmt, k;

	if (fg_g4_model_load(&m, MOE, &err)) {
		ok(0, "moe loads: %s", err.msg);
		return;
	}
	fmt = m->layers[2].moe->down[4].fmt;
	m->layers[2].moe->down[4].fmt = FG_W_INT4;
	ok(fg_g4_gpu_new(&g, m, inv, 4, 64, &err) == FG_EUNSUPPORTED && !g &&
		   strstr(err.msg, "INT4 experts (layer 2)") && strstr(err.msg, "--device cpu") && !strchr(err.msg, '\n'),
	   "--device cuda refuses INT4 experts in one line naming the layer: %s", err.msg);
	m->layers[2].moe->down[4].fmt = fmt;
	k = m->cfg.top_k;
	m->cfg.top_k = 33;
	ok(fg_g4_gpu_new(&g, m, inv, 4, 64, &err) == FG_EUNSUPPORTED && !g &&
		   strstr(err.msg, "top_k_experts = 33") && !strchr(err.msg, '\n'),
	   "--device cuda refuses more than 32 experts per token in one line: %s", err.msg);
	m->cfg.top_k = k;
	fg_g4_model_free(m);
}

/* --device cuda: the fixed sequence's logits of the MoE checkpoints (as
 * saved, F32, per-expert 2-D, baked INT4 with bf16 experts) within 2.5e-3
 * of the CPU engine (test_engine_cuda's tolerance for GPU summation orders),
 * two GPU runs bit-identical (the second replays the captured graph);
 * without a usable GPU, a one-line error naming CUDA. Runs after
 * check_layouts and check_bake, whose copies it reads. */
static void check_cuda(void)
{
	check_cuda_refusals();
	static const char *const subs[] = { "f32", "split", "int4" };
	struct fg_err err = { 0 };
	struct fg_engine *e = load(MOE, 1, FG_DEVICE_CUDA, &err);
	char dirs[5][700];
	size_t i;

	if (!e) {
		const char *req = getenv("FG_REQUIRE_CUDA");

		ok((err.code == FG_EDEVICE || err.code == FG_EUNSUPPORTED) && strstr(err.msg, "CUDA") &&
			   !strchr(err.msg, '\n'),
		   "--device cuda on an MoE model without a usable GPU fails in one line: %s", err.msg);
		if (req && !strcmp(req, "1"))
			ok(0, "FG_REQUIRE_CUDA=1 but: %s", err.msg);
		return;
	}
	fg_engine_free(e);
	snprintf(dirs[0], sizeof(dirs[0]), "%s", MOE);
	snprintf(dirs[1], sizeof(dirs[1]), "%s", MOE32);
	for (i = 0; i < 3; i++)
		snprintf(dirs[2 + i], sizeof(dirs[2 + i]), "%s/%s", tmp, subs[i]);
	for (i = 0; i < 5; i++) {
		int nc = 0, n1 = 0, n2 = 0;
		struct fg_engine *gc = load(dirs[i], 2, FG_DEVICE_CPU, &err);
		float *c = seq_logits(gc, dirs[i], 0, &nc);
		struct fg_engine *g1 = load(dirs[i], 1, FG_DEVICE_CUDA, &err);
		float *a = seq_logits(g1, dirs[i], 0, &n1);
		struct fg_engine *g2 = load(dirs[i], 1, FG_DEVICE_CUDA, &err);
		float *b = seq_logits(g2, dirs[i], 0, &n2);
		double d = c && a && nc == n1 ? max_diff(a, c, nc) : INFINITY;

		ok(d <= 2.5e-3, "%s on cuda: logits within 2.5e-3 of the cpu engine (max %.3g) %s", dirs[i], d,
		   a ? "" : err.msg);
		ok(same_bits(a, b, n1, n2), "%s on cuda: two runs bit-identical", dirs[i]);
		free(c), free(a), free(b);
	}
}

/* fgpack bake int4 on the MoE checkpoint: attention and dense MLP in INT4,
 * router and experts passed through and listed in the quantization_config
 * ignore list; the engine runs the result (deterministically) close to the
 * bf16 original; a head pruned from it keeps the kept logits bit for bit. */
static void check_bake(void)
{
	char out[600];
	struct fg_int4_opts o;
	struct fg_int4_report rep;
	struct fg_err err = { 0 };
	struct fg_st_set *a = NULL, *b = NULL;
	char p[700];
	int rc, n0 = 0, n1 = 0, n2 = 0, same = 1, seen = 0;
	size_t i;
	float *ref, *q1, *q2;

	snprintf(out, sizeof(out), "%s", sub("int4"));
	memset(&o, 0, sizeof(o));
	o.group = 32;
	o.threads = 2;
	o.no_sync = 1;
	o.rehash = 1;
	rc = fg_int4_bake(MOE, out, &o, &rep, &err);
	ok(rc == 0, "bake int4 --group 32 of the MoE checkpoint: %s", rc ? err.msg : "ok");
	if (rc)
		return;
	printf("# bake: %zu quantized, %zu passed through\n", rep.n_quantized, rep.n_passed);
	snprintf(p, sizeof(p), "%s/config.json", out);
	{
		struct fg_buf t = FG_BUF_INIT;
		cJSON *cfg = NULL;
		const cJSON *it;
		int router = 0, experts = 0;

		if (!fg_file_read(p, 1 << 20, &t, &err) && !fg_json_parse(&cfg, t.data, t.len, p, &err))
			cJSON_ArrayForEach(it, fg_json_arr(fg_json_obj(cfg, "quantization_config"), "ignore")) {
				router |= cJSON_IsString(it) && !strcmp(it->valuestring, "re:.*\\.router\\.proj$");
				experts |= cJSON_IsString(it) && !strcmp(it->valuestring, "re:.*\\.experts\\..*");
			}
		ok(router && experts, "baked config: router.proj and the experts in quantization_config.ignore");
		cJSON_Delete(cfg);
		fg_buf_release(&t);
	}
	snprintf(p, sizeof(p), "%s/model.safetensors", MOE);
	rc = fg_st_open(&a, p, &err);
	if (!rc)
		rc = fg_st_open(&b, out, &err);
	for (i = 0; !rc && i < fg_st_count(a); i++) {
		const struct fg_st_tensor *t = fg_st_at(a, i), *u;

		if (!strstr(t->name, ".experts.") && !strstr(t->name, ".router."))
			continue;
		seen++;
		u = fg_st_find(b, t->name);
		same &= u && u->dtype == t->dtype && u->nbytes == t->nbytes && !memcmp(u->data, t->data, t->nbytes);
	}
	ok(!rc && seen == 4 * 5 && same, "baked: all %d router and expert tensors passed through byte for byte", seen);
	fg_st_free(a);
	fg_st_free(b);
	ref = run_seq(MOE, 2, 0, &n0);
	q1 = run_seq(out, 1, 0, &n1);
	q2 = run_seq(out, 2, 1, &n2);
	ok(same_bits(q1, q2, n1, n2), "baked MoE: -j1 prefill and -j2 decode bit-identical");
	if (ref && q1 && n0 == n1) {
		double d = max_diff(ref, q1, n0);

		/* INT4 attention and dense MLP (group 32) move the logits (range
		 * about +-25); a broken binding moves them by far more */
		ok(d < 4.0, "baked MoE runs: max |logit diff| to the bf16 original %.3g (< 4)", d);
	} else
		ok(0, "baked MoE runs");
	{
		/* the same weights written out in F32: the engine's INT4 rows are
		 * q * scale exactly, so only summation order (INT4 dots scale each
		 * group's sum) may differ */
		const char *dq = sub("int4-f32");
		int n3 = 0;
		float *f = NULL;

		rc = rewrite(out, dq, DEQUANT, NULL, "quantization_config", NULL);
		f = rc ? NULL : run_seq(dq, 2, 0, &n3);
		ok(f && q1 && n3 == n1 && max_diff(f, q1, n1) < 1e-4,
		   "baked MoE = its weights dequantized to F32 (max |logit diff| %.3g < 1e-4)",
		   f && q1 && n3 == n1 ? max_diff(f, q1, n1) : -1.0);
		free(f);
	}
	{
		struct fg_engine *e = load(out, 1, FG_DEVICE_CPU, &err);
		static const int32_t pr[] = { 2, 17, 99, 5, 201 };
		struct gen g = { { 0 }, 0 }, g2 = { { 0 }, 0 };

		ok(e && !strcmp(fg_engine_weight_format(e), "mixed"),
		   "baked MoE: weight format \"mixed\" (INT4 linears, bf16 experts): %s",
		   e ? fg_engine_weight_format(e) : err.msg);
		rc = !e || fg_engine_generate(e, pr, 5, 16, on_token, &g, &err) ||
		     fg_engine_generate_ids(e, pr, 5, 16, on_token, &g2, &err);
		ok(!rc && g.n == 16 && g2.n == 16 && !memcmp(g.ids, g2.ids, sizeof(g.ids)),
		   "baked MoE: greedy 16 tokens, generate_ids = generate %s", rc ? err.msg : "");
		fg_engine_free(e);
	}
	free(ref), free(q1), free(q2);
}

/* fgpack bake prune-head on an MoE checkpoint (bf16, and its INT4 bake):
 * the kept tokens' logits are the full head's bit for bit, the others -inf. */
static void check_pruned(const char *src, const char *label)
{
	char dir[300], out[400];
	struct fg_err err = { 0 };
	struct fg_engine *full, *pr;
	int32_t seq[12] = { 2, 17, 99, 4, 250, 31, 7, 200, 12, 88, 5, 60 };
	int n = 12, same = 1, inf = 1, rc;

	snprintf(dir, sizeof(dir), "%s", sub(label));
	full = load(src, 1, FG_DEVICE_CPU, &err);
	if (!full || prune_fixture(out, sizeof(out), dir, src, fg_engine_vocab_size(full), 0)) {
		ok(0, "%s: pruned copy written", label);
		fg_engine_free(full);
		return;
	}
	pr = load(out, 1, FG_DEVICE_CPU, &err);
	ok(pr != NULL, "%s: the pruned MoE checkpoint loads %s", label, pr ? "" : err.msg);
	rc = !pr || compare_pruned(full, pr, seq, n, &same, &inf, &err);
	ok(!rc && same && inf, "%s: pruned head: kept logits bit-identical to the full head's, the rest -inf", label);
	fg_engine_free(full);
	fg_engine_free(pr);
}

/* The text_config of a 26B-A4B checkpoint as public ports of it quote it (MoE with
 * attention_k_eq_v, no PLE, global_head_dim and num_global_key_value_heads
 * of transformers before 5.15): parsed, with the derived structure. */
static void check_26b_config(void)
{
	static const char *json =
		"{\"architectures\": [\"Gemma4ForConditionalGeneration\"], \"model_type\": \"gemma4\","
		" \"eos_token_id\": [1, 106], \"text_config\": {\"model_type\": \"gemma4_text\","
		" \"attention_k_eq_v\": true, \"enable_moe_block\": true, \"final_logit_softcapping\": 30.0,"
		" \"global_head_dim\": 512, \"head_dim\": 256, \"hidden_activation\": \"gelu_pytorch_tanh\","
		" \"hidden_size\": 2816, \"hidden_size_per_layer_input\": 0, \"intermediate_size\": 2112,"
		" \"max_position_embeddings\": 262144, \"moe_intermediate_size\": 704, \"num_attention_heads\": 16,"
		" \"num_experts\": 128, \"num_global_key_value_heads\": 2, \"num_hidden_layers\": 30,"
		" \"num_key_value_heads\": 8, \"num_kv_shared_layers\": 0, \"rms_norm_eps\": 1e-06,"
		" \"rope_parameters\": {\"full_attention\": {\"partial_rotary_factor\": 0.25,"
		" \"rope_theta\": 1000000.0, \"rope_type\": \"proportional\"}, \"sliding_attention\":"
		" {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}, \"sliding_window\": 1024,"
		" \"tie_word_embeddings\": true, \"top_k_experts\": 8, \"vocab_size\": 262144,"
		" \"use_double_wide_mlp\": false}}";
	struct fg_g4_config c;
	struct fg_err err = { 0 };
	int rc = fg_g4_config_parse(&c, json, strlen(json), "26b", &err);

	is_int(rc, 0, "26B-A4B-style config (MoE + attention_k_eq_v) parses: %s", err.msg);
	if (rc)
		return;
	ok(c.n_experts == 128 && c.top_k == 8 && c.moe_inter == 704 && c.inter == 2112,
	   "26B-A4B: 128 experts, top 8, expert width 704, dense MLP 2112");
	ok(c.ple_dim == 0 && c.k_eq_v && fg_g4_layer_kv_heads(&c, 5) == 2 && fg_g4_layer_kv_heads(&c, 4) == 8 &&
		   fg_g4_layer_head_dim(&c, 5) == 512 && fg_g4_layer_head_dim(&c, 4) == 256,
	   "26B-A4B: no PLE, k_eq_v, full layers 2 KV heads of 512, sliding 8 of 256");
}

int main(void)
{
	(void)ids_of; /* engine_test.h helpers this suite does not need */
	(void)for_each_variant;
	(void)logits_of;
	(void)greedy_want;
	if (access(MOE "/model.safetensors", R_OK) || access(MOE32 "/model.safetensors", R_OK)) {
		ok(0, "MoE fixtures present (tests/fixtures/oracle/variants/moe, moe-f32)");
		return tap_done();
	}
	if (!mkdtemp(tmp)) {
		ok(0, "mkdtemp");
		return tap_done();
	}
	check_26b_config();
	check_determinism(MOE, "moe");
	check_determinism(MOE32, "moe-f32");
	check_layouts();
	check_errors();
	check_bake();
	check_pruned(MOE, "moe-pruned");
	{
		char baked[700];

		snprintf(baked, sizeof(baked), "%s/int4", tmp);
		check_pruned(baked, "moe-int4-pruned");
	}
	check_cuda();
	fg_rm_tree(tmp);
	return tap_done();
}
