/* test_config.c - generation_config.json (engine/config.c fg_g4_gen_parse)
 * over the tiny Gemma 4 fixture's config.json (tests/fixtures/oracle/bf16),
 * and the engine loading it from a model folder: an id, a list, absent,
 * null, malformed files and keys, the keys the engine does not apply, the
 * default length. The list case is google/gemma-4-E4B-it's own
 * generation_config.json; the mm-* variants' were written by transformers
 * 5.17's save_pretrained. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "engine/config.h"
#include "engine/engine.h"
#include "fsutil.h"
#include "tap.h"

#define FIX "tests/fixtures/oracle"

/* google/gemma-4-E4B-it generation_config.json (transformers 5.5.0.dev0) */
static const char *const E4B_IT =
	"{\n  \"bos_token_id\": 2,\n  \"do_sample\": true,\n  \"eos_token_id\": [\n    1,\n    106,\n    50\n  ],\n"
	"  \"pad_token_id\": 0,\n  \"temperature\": 1.0,\n  \"top_k\": 64,\n  \"top_p\": 0.95,\n"
	"  \"transformers_version\": \"5.5.0.dev0\",\n  \"trust_remote_code\": false\n}\n";

static struct fg_buf fixture_config;

/* config.json of the fixture, then gen as generation_config.json; returns
 * fg_g4_gen_parse's code */
static int parse(struct fg_g4_config *c, const char *gen, struct fg_err *err)
{
	int rc = fg_g4_config_parse(c, fixture_config.data, fixture_config.len, "config.json", err);

	if (rc)
		return rc;
	return fg_g4_gen_parse(c, gen, strlen(gen), "m/generation_config.json", err);
}

static int has_eos(const struct fg_g4_config *c, int32_t id)
{
	int i;

	for (i = 0; i < c->n_eos; i++)
		if (c->eos[i] == id)
			return 1;
	return 0;
}

static void test_parse(void)
{
	struct fg_g4_config c;
	struct fg_err err = { 0 };
	char big[512];
	size_t used;
	int i, rc;

	rc = fg_g4_config_parse(&c, fixture_config.data, fixture_config.len, "config.json", &err);
	is_int(rc, 0, "fixture config.json parses: %s", err.msg);
	ok(c.n_eos == 2 && has_eos(&c, 1) && has_eos(&c, 106), "without generation_config.json: config.json's [1, 106]");
	is_int(c.gen.present, 0, "no generation config");

	/* an id: replaces config.json's list, as generate() would use it */
	is_int(parse(&c, "{\"eos_token_id\": 298}", &err), 0, "an id: %s", err.msg);
	ok(c.n_eos == 1 && c.eos[0] == 298, "an id: the stop set is {298}, config.json's 1 and 106 gone");
	is_int(c.gen.present, 1, "present");
	is_int(c.bos, 2, "no bos_token_id: config.json's 2 kept");
	is_str(c.gen.note, "", "nothing unapplied");

	/* a list: Gemma 4 E4B-it's */
	is_int(parse(&c, E4B_IT, &err), 0, "E4B-it's file: %s", err.msg);
	ok(c.n_eos == 3 && c.eos[0] == 1 && c.eos[1] == 106 && c.eos[2] == 50, "list [1, 106, 50] in order");
	is_int(c.gen.do_sample, 1, "do_sample true");
	ok(strstr(c.gen.note, "do_sample=true") && strstr(c.gen.note, "temperature=1") &&
		   strstr(c.gen.note, "top_k=64") && strstr(c.gen.note, "top_p=0.95"),
	   "sampling reported as not applied: %s", c.gen.note);
	ok(!strstr(c.gen.note, "eos") && !strstr(c.gen.note, "pad") && !strstr(c.gen.note, "trust_remote_code"),
	   "applied and unrelated keys not in the note");
	is_int(c.gen.max_new_tokens, -1, "no max_new_tokens");
	is_int(c.gen.max_length, -1, "no max_length");

	/* absent, null, empty: generate() has no eos to stop at */
	is_int(parse(&c, "{\"max_new_tokens\": 5, \"bos_token_id\": 7}", &err), 0, "no eos key: %s", err.msg);
	is_int(c.n_eos, 0, "no eos_token_id in the file: empty stop set (not config.json's)");
	is_int(c.gen.max_new_tokens, 5, "max_new_tokens 5");
	is_int(c.bos, 7, "bos_token_id 7 replaces config.json's");
	is_int(parse(&c, "{\"eos_token_id\": null}", &err), 0, "null");
	is_int(c.n_eos, 0, "null: empty stop set");
	is_int(parse(&c, "{\"eos_token_id\": []}", &err), 0, "[]");
	is_int(c.n_eos, 0, "[]: empty stop set");
	is_int(parse(&c, "{\"eos_token_id\": [1, 1, 106, 1]}", &err), 0, "duplicates");
	is_int(c.n_eos, 2, "duplicates counted once");
	is_int(parse(&c, "{}", &err), 0, "{}");
	is_int(c.gen.do_sample, -1, "do_sample absent");

	/* greedy: sampling numbers without do_sample change nothing; other
	 * strategies are reported */
	is_int(parse(&c, "{\"temperature\": 0.7, \"top_k\": 5, \"do_sample\": false, \"repetition_penalty\": 1.0, "
			 "\"num_beams\": 1, \"max_length\": 30}", &err), 0, "greedy file");
	is_str(c.gen.note, "", "do_sample false: temperature/top_k ignored, neutral keys not reported");
	is_int(c.gen.max_length, 30, "max_length 30");
	is_int(parse(&c, "{\"num_beams\": 4, \"repetition_penalty\": 1.1, \"no_repeat_ngram_size\": 3}", &err), 0,
	       "beams");
	is_str(c.gen.note, "num_beams=4, repetition_penalty=1.1, no_repeat_ngram_size=3", "beams and penalties reported");

	/* malformed: one line naming the file and the key */
#define BADGEN(text, key, what)                                                                          \
	do {                                                                                           \
		rc = parse(&c, text, &err);                                                            \
		ok(rc == FG_EFORMAT && strstr(err.msg, "m/generation_config.json") && strstr(err.msg, key) && \
			   !strchr(err.msg, '\n'),                                                     \
		   "%s refused: %s", what, err.msg);                                                   \
	} while (0)
	BADGEN("{\"eos_token_id\": \"1\"}", "eos_token_id", "a string id");
	BADGEN("{\"eos_token_id\": [1, -3]}", "eos_token_id", "a negative id in a list");
	BADGEN("{\"eos_token_id\": [1, 2.5]}", "eos_token_id", "a fractional id in a list");
	BADGEN("{\"eos_token_id\": [1, [2]]}", "eos_token_id", "a nested list");
	BADGEN("{\"eos_token_id\": -1}", "eos_token_id", "a negative id");
	BADGEN("{\"eos_token_id\": {\"a\": 1}}", "eos_token_id", "an object");
	BADGEN("{\"bos_token_id\": \"2\"}", "bos_token_id", "a string bos");
	BADGEN("{\"pad_token_id\": -5}", "pad_token_id", "a negative pad");
	BADGEN("{\"do_sample\": \"yes\"}", "do_sample", "a string do_sample");
	BADGEN("{\"max_new_tokens\": 0}", "max_new_tokens", "max_new_tokens 0");
	BADGEN("{\"max_length\": 1.5}", "max_length", "fractional max_length");
	BADGEN("{\"do_sample\": true, \"top_k\": \"64\"}", "top_k", "a string top_k");
	BADGEN("{\"num_beams\": \"4\"}", "num_beams", "a string num_beams");
	rc = parse(&c, "[1, 106]", &err);
	ok(rc == FG_EFORMAT && strstr(err.msg, "m/generation_config.json") && strstr(err.msg, "not a JSON object"),
	   "a list at the top refused: %s", err.msg);
	rc = parse(&c, "{\"eos_token_id\": [1,", &err);
	ok(rc && strstr(err.msg, "m/generation_config.json") && !strchr(err.msg, '\n'), "truncated JSON refused: %s",
	   err.msg);
	used = (size_t)snprintf(big, sizeof(big), "{\"eos_token_id\": [");
	for (i = 0; i <= FG_G4_MAX_EOS; i++)
		used += (size_t)snprintf(big + used, sizeof(big) - used, "%s%d", i ? "," : "", 300 + i);
	snprintf(big + used, sizeof(big) - used, "]}");
	rc = parse(&c, big, &err);
	ok(rc && strstr(err.msg, "eos_token_id holds more than"), "%d ids refused: %s", FG_G4_MAX_EOS + 1, err.msg);
}

static int write_text(const char *dir, const char *name, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (!(f = fopen(p, "w")))
		return -1;
	fputs(text, f);
	return fclose(f);
}

static void test_engine_load(void)
{
	char dir[] = "/tmp/fg_test_config_XXXXXX", p[512], q[512], cwd[256];
	struct fg_engine *e = NULL;
	struct fg_err err = { 0 };
	int rc, n;

	if (!mkdtemp(dir) || !getcwd(cwd, sizeof(cwd))) {
		ok(0, "setup: mkdtemp/getcwd");
		return;
	}
	/* the fixture's config and weights, linked into a folder of its own */
	snprintf(p, sizeof(p), "%s/" FIX "/bf16/config.json", cwd);
	snprintf(q, sizeof(q), "%s/config.json", dir);
	rc = symlink(p, q);
	snprintf(p, sizeof(p), "%s/" FIX "/bf16/model.safetensors", cwd);
	snprintf(q, sizeof(q), "%s/model.safetensors", dir);
	if (rc || symlink(p, q)) {
		ok(0, "setup: symlinks");
		return;
	}

	/* absent: today's behaviour */
	rc = fg_engine_load(&e, dir, NULL, &err);
	is_int(rc, 0, "load without generation_config.json: %s", err.msg);
	if (!rc) {
		fg_engine_eos_ids(e, &n);
		ok(n == 2 && fg_engine_is_eos(e, 1) && fg_engine_is_eos(e, 106), "config.json's eos 1, 106");
		is_int(fg_engine_has_gen_config(e), 0, "no generation config");
		is_int(fg_engine_gen_max_new(e, 24), -1, "no default length");
		is_str(fg_engine_gen_unapplied(e), "", "nothing unapplied");
	}
	fg_engine_free(e);
	e = NULL;

	/* E4B-it's file */
	write_text(dir, "generation_config.json", E4B_IT);
	rc = fg_engine_load(&e, dir, NULL, &err);
	is_int(rc, 0, "load with E4B-it's generation_config.json: %s", err.msg);
	if (!rc) {
		fg_engine_eos_ids(e, &n);
		ok(n == 3 && fg_engine_is_eos(e, 50) && fg_engine_is_eos(e, 106) && fg_engine_is_eos(e, 1),
		   "stop set 1, 106, 50");
		is_int(fg_engine_has_gen_config(e), 1, "generation config read");
		ok(strstr(fg_engine_gen_unapplied(e), "do_sample=true") != NULL, "do_sample reported: %s",
		   fg_engine_gen_unapplied(e));
	}
	fg_engine_free(e);
	e = NULL;

	/* an id the greedy continuation produces; the length keys */
	write_text(dir, "generation_config.json", "{\"eos_token_id\": 298, \"max_length\": 30}");
	rc = fg_engine_load(&e, dir, NULL, &err);
	is_int(rc, 0, "load with eos 298: %s", err.msg);
	if (!rc) {
		ok(fg_engine_is_eos(e, 298) && !fg_engine_is_eos(e, 1) && !fg_engine_is_eos(e, 106),
		   "stop set {298}: replaces config.json's");
		is_int(fg_engine_gen_max_new(e, 24), 6, "max_length 30 after 24 prompt tokens: 6 new");
		is_int(fg_engine_gen_max_new(e, 40), 0, "max_length 30 after 40: none");
	}
	fg_engine_free(e);
	e = NULL;
	write_text(dir, "generation_config.json", "{\"eos_token_id\": 298, \"max_new_tokens\": 5, \"max_length\": 30}");
	rc = fg_engine_load(&e, dir, NULL, &err);
	if (!rc)
		is_int(fg_engine_gen_max_new(e, 24), 5, "max_new_tokens wins over max_length");
	fg_engine_free(e);
	e = NULL;

	/* malformed: the load fails in one line naming the file and key */
	write_text(dir, "generation_config.json", "{\"eos_token_id\": [1, \"106\"]}");
	rc = fg_engine_load(&e, dir, NULL, &err);
	ok(rc == FG_EFORMAT && strstr(err.msg, "generation_config.json: key eos_token_id") && !strchr(err.msg, '\n'),
	   "malformed eos refused at load: %s", err.msg);
	fg_engine_free(e);
	e = NULL;
	write_text(dir, "generation_config.json", "");
	rc = fg_engine_load(&e, dir, NULL, &err);
	ok(rc && strstr(err.msg, "generation_config.json"), "empty file refused: %s", err.msg);
	fg_engine_free(e);
	e = NULL;
	snprintf(p, sizeof(p), "%s/generation_config.json", dir);
	unlink(p);
	if (mkdir(p, 0755) == 0) {
		rc = fg_engine_load(&e, dir, NULL, &err);
		ok(rc && strstr(err.msg, "generation_config.json"), "a folder in its place refused: %s", err.msg);
		fg_engine_free(e);
		e = NULL;
		rmdir(p);
	}

	/* transformers 5.17's own files (from_model_config: the same ids) */
	{
		static const char *const v[] = { "mm-e4b", "mm-tie-top" };
		static const int want[] = { 1, 2 };
		size_t i;

		for (i = 0; i < 2; i++) {
			snprintf(p, sizeof(p), FIX "/variants/%s", v[i]);
			rc = fg_engine_load(&e, p, NULL, &err);
			is_int(rc, 0, "%s loads: %s", v[i], err.msg);
			if (!rc) {
				fg_engine_eos_ids(e, &n);
				ok(n == want[i] && fg_engine_is_eos(e, 1) && fg_engine_has_gen_config(e) &&
					   !fg_engine_gen_unapplied(e)[0] && fg_engine_gen_max_new(e, 4) == -1,
				   "%s: transformers' generation_config.json read, %d eos ids, nothing unapplied", v[i],
				   want[i]);
			}
			fg_engine_free(e);
			e = NULL;
		}
	}
	snprintf(p, sizeof(p), "%s/config.json", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/model.safetensors", dir);
	unlink(p);
	rmdir(dir);
}

/* The plain assistant fixture's config.json (transformers 5.17's
 * save_pretrained of a Gemma4AssistantConfig) with key (under text_config
 * when in_text) set to the JSON value val, or removed when val is NULL;
 * returns fg_g4_config_parse's code. */
static int parse_assistant(struct fg_g4_config *c, const struct fg_buf *base, int in_text, const char *key,
			   const char *val, struct fg_err *err)
{
	cJSON *root = cJSON_ParseWithLength(base->data, base->len), *obj;
	char *txt;
	int rc;

	if (!root)
		return fg_err_set(err, FG_EFORMAT, "test: the fixture does not parse");
	obj = in_text ? cJSON_GetObjectItemCaseSensitive(root, "text_config") : root;
	if (key) {
		cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
		if (val)
			cJSON_AddItemToObject(obj, key, cJSON_Parse(val));
	}
	txt = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	rc = txt ? fg_g4_config_parse(c, txt, strlen(txt), "a/config.json", err) : FG_ENOMEM;
	free(txt);
	return rc;
}

static void test_assistant(void)
{
	struct fg_buf plain = FG_BUF_INIT, ordered = FG_BUF_INIT;
	struct fg_g4_config c;
	struct fg_err err = { 0 };
	int rc;

	if (fg_file_read(FIX "/assistant/plain/config.json", 1 << 20, &plain, &err) ||
	    fg_file_read(FIX "/assistant/ordered/config.json", 1 << 20, &ordered, &err)) {
		ok(0, "read the assistant fixtures' config.json: %s", err.msg);
		return;
	}
	rc = fg_g4_config_parse(&c, plain.data, plain.len, "plain/config.json", &err);
	is_int(rc, 0, "the plain assistant's config parses: %s", err.msg);
	ok(c.assistant == 1 && c.backbone == 96 && !c.ordered_emb && c.n_kv_shared == 4 && c.n_layers == 4 &&
		   c.hidden == 48 && c.vocab == 512 && c.ple_dim == 0 && c.tie_embeddings == 1,
	   "assistant, backbone 96, 4 layers all KV-shared, hidden 48, no per-layer input, tied");
	ok(c.head_dim == 32 && c.global_head_dim == 64 && c.n_kv_heads == 2 && c.global_kv_heads == 2 &&
		   c.layer_type[0] == FG_G4_SLIDING && c.layer_type[1] == FG_G4_FULL && c.sliding_window == 8,
	   "per_layer_config head dims 32/64, 2 KV heads, S F S F, window 8");
	is_int(fg_g4_first_shared(&c), 0, "no layer owns KV");
	ok(fg_g4_kv_source(&c, 0) == -1 && fg_g4_kv_source(&c, 3) == -1, "kv source -1: the target's caches");
	ok(c.softcap == 30.0f, "the text config's softcap is parsed (the drafter applies none)");
	rc = fg_g4_config_parse(&c, ordered.data, ordered.len, "ordered/config.json", &err);
	is_int(rc, 0, "the ordered assistant's config parses: %s", err.msg);
	ok(c.assistant && c.ordered_emb && c.n_centroids == 32 && c.centroid_top_k == 4,
	   "use_ordered_embeddings, 32 centroids, top 4");

	/* Gemma4AssistantConfig.__post_init__: unset or 0 means every layer */
	is_int(parse_assistant(&c, &plain, 1, "num_kv_shared_layers", NULL, &err), 0, "num_kv_shared_layers absent");
	is_int(c.n_kv_shared, 4, "absent: all 4 layers shared");
	is_int(parse_assistant(&c, &plain, 1, "num_kv_shared_layers", "0", &err), 0, "num_kv_shared_layers 0");
	is_int(c.n_kv_shared, 4, "0: all 4 layers shared");
	/* the defaults of Gemma4AssistantConfig */
	rc = parse_assistant(&c, &plain, 0, "backbone_hidden_size", NULL, &err);
	ok(!rc && c.backbone == 1536 && c.n_centroids == 2048 && c.centroid_top_k == 32 && !c.ordered_emb,
	   "defaults: backbone 1536, 2048 centroids, top 32, no ordered embeddings (%s)", err.msg);
	rc = parse_assistant(&c, &plain, 0, "tie_word_embeddings", "false", &err);
	ok(!rc && !c.tie_embeddings, "top-level tie_word_embeddings false read");

	/* validate_architecture and the engine's own bounds: one line each,
	 * naming the key */
#define BADA(buf, in_text, key, val, want)                                                               	do {                                                                                             		rc = parse_assistant(&c, buf, in_text, key, val, &err);                                  		ok(rc == FG_EUNSUPPORTED && strstr(err.msg, "a/config.json") && strstr(err.msg, want) &&  			   !strchr(err.msg, '\n'),                                                      		   "%s = %s refused: %s", key, val ? val : "(absent)", err.msg);                         	} while (0)
	BADA(&plain, 1, "hidden_size_per_layer_input", "32", "key hidden_size_per_layer_input = 32 must be 0");
	BADA(&plain, 1, "hidden_size_per_layer_input", NULL, "key hidden_size_per_layer_input = 256 must be 0");
	BADA(&plain, 1, "vocab_size_per_layer_input", "512", "key vocab_size_per_layer_input = 512 must be 0");
	BADA(&plain, 1, "vocab_size_per_layer_input", NULL, "key vocab_size_per_layer_input = 262144 must be 0");
	BADA(&plain, 1, "enable_moe_block", "true", "key enable_moe_block must be false");
	BADA(&plain, 1, "use_double_wide_mlp", "true", "key use_double_wide_mlp must be false");
	BADA(&plain, 1, "num_kv_shared_layers", "2", "key num_kv_shared_layers = 2 must be num_hidden_layers = 4");
	BADA(&ordered, 0, "num_centroids", "30", "key num_centroids = 30 does not divide vocab_size = 512");
	BADA(&ordered, 0, "centroid_intermediate_top_k", "0", "key centroid_intermediate_top_k = 0 is out of");
	BADA(&ordered, 0, "centroid_intermediate_top_k", "33", "key centroid_intermediate_top_k = 33 is out of the "
	     "supported range 1..32");
	BADA(&ordered, 0, "text_config", NULL, "key text_config is missing");
	/* 64: the GPU kernel's bound, said in the message */
	{
		struct fg_buf many = FG_BUF_INIT;
		const char *at = strstr(ordered.data, "\"num_centroids\": 32");

		if (at && !fg_buf_append(&many, ordered.data, (size_t)(at - ordered.data), NULL) &&
		    !fg_buf_puts(&many, "\"num_centroids\": 128", NULL) &&
		    !fg_buf_puts(&many, at + strlen("\"num_centroids\": 32"), NULL)) {
			BADA(&many, 0, "centroid_intermediate_top_k", "65", "1..64 (num_centroids, and at most 64: the GPU");
			rc = parse_assistant(&c, &many, 0, "centroid_intermediate_top_k", "64", &err);
			ok(!rc && c.centroid_top_k == 64, "top 64 of 128 centroids parses: %s", err.msg);
		} else
			ok(0, "setup: 128 centroids");
		fg_buf_release(&many);
	}
	/* ordered-embedding keys are not checked without ordered embeddings */
	rc = parse_assistant(&c, &plain, 0, "num_centroids", "30", &err);
	is_int(rc, 0, "num_centroids 30 without use_ordered_embeddings: not read, %s", err.msg);
	/* a plain Gemma 4 text model may not share every layer's KV */
	{
		cJSON *root = cJSON_ParseWithLength(fixture_config.data, fixture_config.len);
		cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "text_config");
		char *txt;

		cJSON_ReplaceItemInObjectCaseSensitive(t, "num_kv_shared_layers", cJSON_CreateNumber(8));
		txt = cJSON_PrintUnformatted(root);
		rc = fg_g4_config_parse(&c, txt, strlen(txt), "config.json", &err);
		ok(rc == FG_EUNSUPPORTED && strstr(err.msg, "num_kv_shared_layers = 8 leaves no layer"),
		   "a gemma4 model with every layer KV-shared is still refused: %s", err.msg);
		free(txt);
		cJSON_Delete(root);
	}
#undef BADA
	fg_buf_release(&plain);
	fg_buf_release(&ordered);
}

int main(void)
{
	struct fg_err err = { 0 };

	if (fg_file_read(FIX "/bf16/config.json", 1 << 20, &fixture_config, &err)) {
		ok(0, "read the fixture config: %s", err.msg);
		return tap_done();
	}
	test_parse();
	test_engine_load();
	test_assistant();
	fg_buf_release(&fixture_config);
	return tap_done();
}
