/* test_manifest.c - the challenge manifest model: the real example manifest
 * (tests/fixtures/manifests/precache-kenyan.json, a copy of
 * shared/examples/challenge-manifest-precache-kenyan.json), component and
 * target extraction rules, and one-line errors for malformed input. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "manifest.h"
#include "tap.h"

static struct fg_manifest *parse(const char *json, struct fg_err *err)
{
	struct fg_manifest *m = NULL;

	fg_manifest_parse(&m, json, strlen(json), "m.json", err);
	return m;
}

static void bad(const char *json, const char *needle)
{
	struct fg_err err = { 0, "" };
	struct fg_manifest *m = parse(json, &err);

	ok(!m && strstr(err.msg, needle) && !strchr(err.msg, '\n') && !strncmp(err.msg, "m.json: ", 8),
	   "refused: %s", err.msg);
	fg_manifest_free(m);
}

static const struct fg_target *target(const struct fg_manifest *m, const char *key)
{
	size_t i;

	for (i = 0; i < m->n_targets; i++)
		if (!strcmp(m->targets[i].key, key))
			return &m->targets[i];
	return NULL;
}

static void test_example(void)
{
	struct fg_manifest *m = NULL;
	struct fg_err err = { 0, "" };
	const struct fg_component *c;
	const struct fg_target *t;
	int rc = fg_manifest_load(&m, "tests/fixtures/manifests/precache-kenyan.json", &err);

	ok(rc == 0 && m, "example: loads (%s)", err.msg);
	if (!m)
		return;
	/* sha256sum tests/fixtures/manifests/precache-kenyan.json */
	is_str(m->sha256, "4b4b7ea8b3efebb5b8a63863eb0ed79275977873926b430394b4f229ebc91715",
	       "example: sha256 of the bytes");
	is_str(m->name, "osoi5-feopt2-w20-e1-lmhead12k-fa2sw-precache-kduma-v1", "example: name");
	is_str(m->model_id, "google/gemma-4-E4B-it", "example: model_id");
	is_str(m->served_model_name, "gemma-4-e4b-it", "example: served_model_name");
	is_int(m->port, 8000, "example: port");
	is_int(m->n_dependencies, 7, "example: 7 dependencies");
	is_str(m->dependencies[1], "transformers==5.9.0", "example: dependency order kept");
	is_int(m->n_serve, 2, "example: serve argv");
	is_int(m->n_env, 47, "example: every env key kept");
	is_str(m->env[0].key, "WEIGHTS_BUCKET", "example: env order kept");
	is_str(fg_manifest_env_get(m, "ONEGRAPH"), "1", "example: unknown env keys kept");
	is_int(m->n_components, 4, "example: 4 components");
	is_str(m->components[0].key, "model_id", "example: model_id first");
	is_str(m->components[0].role, "model", "example: model_id role");

	c = fg_manifest_component(m, "WEIGHTS_BUCKET");
	ok(c && !strcmp(c->role, "weights") && c->ref->kind == FG_REF_BUCKET &&
		   !strcmp(c->ref->path, "weights/osoi5-v0-baked"),
	   "example: weights bucket");
	ok(c && c->target && !strcmp(c->target, "/tmp/osoi5-v0-baked") &&
		   !strcmp(c->target_key, "LOCAL_MODEL_DIR") && !c->pin_sha256,
	   "example: weights -> LOCAL_MODEL_DIR, unpinned");

	c = fg_manifest_component(m, "DRAFTER_BUCKET");
	ok(c && !strcmp(c->role, "drafter"), "example: drafter bucket");
	ok(c && c->pin_sha256 &&
		   !strcmp(c->pin_sha256, "ed159e334999fd6b5f2d0dbad026346d4efac89eb7c6f55c5cdb042eca5dd18e") &&
		   !strcmp(c->pin_key, "DRAFTER_SHA256"),
	   "example: DRAFTER_SHA256 pins the drafter");
	ok(c && c->target && !strcmp(c->target, "/tmp/qat-assistant") &&
		   !strcmp(c->target_key, "SPECULATIVE_CONFIG.model"),
	   "example: drafter -> SPECULATIVE_CONFIG.model");

	c = fg_manifest_component(m, "LM_HEAD_KEEPSET_BUCKET");
	ok(c && !strcmp(c->role, "keepset") && c->target && !strcmp(c->target, "/tmp/osoi5-12k-baked"),
	   "example: keepset -> LM_HEAD_PRUNE_DST");

	ok(m->spec.present && m->spec.method && !strcmp(m->spec.method, "mtp") &&
		   !strcmp(m->spec.model, "/tmp/qat-assistant") && m->spec.num_speculative_tokens == 7,
	   "example: SPECULATIVE_CONFIG parsed");
	t = target(m, "PCK04_KEEPSET");
	ok(t && t->rule == FG_TARGET_INSIDE && t->component >= 0 &&
		   !strcmp(m->components[t->component].key, "WEIGHTS_BUCKET"),
	   "example: PCK04_KEEPSET lies inside the weights folder");
	ok(cJSON_GetObjectItemCaseSensitive(m->json, "serve") != NULL, "example: document kept");
	fg_manifest_free(m);
}

static void test_rules(void)
{
	struct fg_err err = { 0, "" };
	struct fg_manifest *m;
	const struct fg_component *c;
	const struct fg_target *t;

	m = parse("{\"env\":{\"PATCHES_BUCKET\":\"hf://buckets/a/b/p\",\"LOCAL_PATCHES_DIR\":\"/w/p\","
		  "\"TOKENIZER_BUCKET\":\"hf://buckets/a/t\",\"TOKENIZER_DST\":\"/w/t\","
		  "\"TOKENIZER_SHA256\":\"ED159E334999FD6B5F2D0DBAD026346D4EFAC89EB7C6F55C5CDB042ECA5DD18E\","
		  "\"UNUSED_BUCKET\":\"\",\"OTHER_SHA256\":\"not hex at all\","
		  "\"DRAFTER_MODEL\":\"google/gemma-4-E4B-it-assistant\",\"SPECULATIVE_CONFIG\":"
		  "\"{\\\"model\\\":\\\"/w/d\\\"}\"}}",
		  &err);
	ok(m != NULL, "rules: parses (%s)", err.msg);
	if (!m)
		return;
	is_int(m->n_components, 3, "rules: empty *_BUCKET skipped");
	c = fg_manifest_component(m, "PATCHES_BUCKET");
	ok(c && !strcmp(c->role, "patches") && c->target && !strcmp(c->target, "/w/p"),
	   "rules: patches role, target by stem");
	c = fg_manifest_component(m, "TOKENIZER_BUCKET");
	ok(c && !strcmp(c->role, "tokenizer") && c->target && !strcmp(c->target, "/w/t"),
	   "rules: role from stem, *_DST by stem");
	ok(c && c->pin_sha256 && !strncmp(c->pin_sha256, "ed159e33", 8), "rules: pin lowercased");
	c = fg_manifest_component(m, "DRAFTER_MODEL");
	ok(c && c->ref->kind == FG_REF_MODEL && !strcmp(c->role, "drafter") && c->target &&
		   !strcmp(c->target, "/w/d"),
	   "rules: DRAFTER_MODEL is a repo placed at SPECULATIVE_CONFIG.model");
	fg_manifest_free(m);

	/* a pin named after the whole key (<KEY>_SHA256) pins that component */
	m = parse("{\"env\":{\"DRAFTER_BUCKET\":\"hf://buckets/a/d\",\"DRAFTER_BUCKET_SHA256\":"
		  "\"ed159e334999fd6b5f2d0dbad026346d4efac89eb7c6f55c5cdb042eca5dd18e\","
		  "\"WEIGHTS_BUCKET\":\"hf://buckets/a/w\"}}",
		  &err);
	ok(m != NULL, "rules: <KEY>_SHA256 parses (%s)", err.msg);
	c = m ? fg_manifest_component(m, "DRAFTER_BUCKET") : NULL;
	ok(c && c->pin_key && !strcmp(c->pin_key, "DRAFTER_BUCKET_SHA256") && c->pin_sha256 &&
		   !strncmp(c->pin_sha256, "ed159e33", 8),
	   "rules: DRAFTER_BUCKET_SHA256 pins DRAFTER_BUCKET");
	c = m ? fg_manifest_component(m, "WEIGHTS_BUCKET") : NULL;
	ok(c && !c->pin_key, "rules: and nothing else");
	fg_manifest_free(m);
	bad("{\"env\":{\"DRAFTER_BUCKET\":\"hf://buckets/a/b\",\"DRAFTER_SHA256\":"
	    "\"ed159e334999fd6b5f2d0dbad026346d4efac89eb7c6f55c5cdb042eca5dd18e\",\"DRAFTER_BUCKET_SHA256\":"
	    "\"ed159e334999fd6b5f2d0dbad026346d4efac89eb7c6f55c5cdb042eca5dd18e\"}}",
	    "env.DRAFTER_BUCKET_SHA256: DRAFTER_BUCKET is already pinned by DRAFTER_SHA256");

	m = parse("{\"env\":{\"SPECULATIVE_CONFIG\":\"{\\\"method\\\":\\\"mtp\\\",\\\"model\\\":"
		  "\\\"google/gemma-4-E4B-it-assistant\\\"}\"}}",
		  &err);
	c = m ? fg_manifest_component(m, "SPECULATIVE_CONFIG.model") : NULL;
	ok(c && c->ref->kind == FG_REF_MODEL && !strcmp(c->role, "drafter"),
	   "rules: SPECULATIVE_CONFIG.model repo id becomes the drafter");
	fg_manifest_free(m);

	m = parse("{\"env\":{\"SPECULATIVE_CONFIG\":\" \",\"X\":\"1\"}}", &err);
	ok(m && !m->spec.present && m->n_components == 0 && m->n_env == 2,
	   "rules: a blank SPECULATIVE_CONFIG sets no speculative decoding (env kept)");
	fg_manifest_free(m);
	m = parse("{\"env\":{\"SPECULATIVE_CONFIG\":\"null\"}}", &err);
	ok(m && !m->spec.present, "rules: SPECULATIVE_CONFIG null sets no speculative decoding");
	fg_manifest_free(m);

	/* the wider target keys: X_DIR, X_PATH, X_DEST, a keepset or a drafter
	 * named by its path; a search list and a URL are not places */
	m = parse("{\"env\":{\"DRAFTER_DIR\":\"/w/early\",\"DRAFTER_BUCKET\":\"hf://buckets/a/d\","
		  "\"DRAFTER_MODEL\":\"/w/d\",\"ROUTER_BUCKET\":\"hf://buckets/a/r\","
		  "\"ROUTER_TABLE_PATH\":\"/w/r/table.bin\",\"ROUTER_PATH\":\"/w/r\","
		  "\"VOCAB_KEEPSET_BUCKET\":\"hf://buckets/a/k\",\"VOCAB_KEEPSET\":\"/w/k/keep.json\","
		  "\"VOCAB_KEEPSET_SHARD\":\"/w/k/s0\",\"VOCAB_KEEPSET_DIR\":\"/w/k\","
		  "\"ORPHAN_FILE\":\"/x/y.bin\","
		  "\"PATCHES_BUCKET\":\"hf://buckets/a/p\",\"PATCHES_DEST\":\"./p\","
		  "\"LD_LIBRARY_PATH\":\"/a:/b\",\"MIRROR_PATH\":\"https://x/y\",\"TRITON_CACHE_DIR\":\"/c\"}}",
		  &err);
	ok(m != NULL, "targets: parses (%s)", err.msg);
	c = m ? fg_manifest_component(m, "DRAFTER_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/w/d") && !strcmp(c->target_key, "DRAFTER_MODEL"),
	   "targets: DRAFTER_MODEL as a path is the drafter's, before an earlier DRAFTER_DIR by stem");
	c = m ? fg_manifest_component(m, "ROUTER_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/w/r") && !strcmp(c->target_key, "ROUTER_PATH"),
	   "targets: X_PATH whose stem is the component's own, over an earlier ROUTER_TABLE_PATH");
	t = m ? target(m, "ROUTER_TABLE_PATH") : NULL;
	ok(t && t->rule == FG_TARGET_STEM && m->components[t->component].target == c->target,
	   "targets: ROUTER_TABLE_PATH is still the router's, a file in it");
	c = m ? fg_manifest_component(m, "VOCAB_KEEPSET_BUCKET") : NULL;
	ok(c && !strcmp(c->role, "keepset") && c->target && !strcmp(c->target, "/w/k") &&
		   !strcmp(c->target_key, "VOCAB_KEEPSET_DIR"),
	   "targets: the keepset's folder is its target, not the later file path");
	t = m ? target(m, "VOCAB_KEEPSET") : NULL;
	ok(t && t->rule == FG_TARGET_INSIDE && m->components[t->component].target == c->target,
	   "targets: a *_KEEPSET path is a file in the folder that holds it");
	t = m ? target(m, "ORPHAN_FILE") : NULL;
	ok(t && t->component < 0, "targets: an X_FILE in no component's folder is placed by nothing");
	t = m ? target(m, "VOCAB_KEEPSET_SHARD") : NULL;
	ok(!t, "targets: a key of no target suffix is not a target, path or not");
	c = m ? fg_manifest_component(m, "PATCHES_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "./p"), "targets: X_DEST, relative");
	ok(m && !target(m, "LD_LIBRARY_PATH") && !target(m, "MIRROR_PATH"),
	   "targets: a ':' search list and a URL are not targets");
	t = m ? target(m, "TRITON_CACHE_DIR") : NULL;
	ok(t && t->component < 0 && t->rule == FG_TARGET_UNASSIGNED,
	   "targets: a folder no component shares a word with stays unassigned");
	fg_manifest_free(m);

	/* rules 1 and 2 with a one-file source: a path ending in the file's
	 * name is that file (its folder the target); a *_DIR is a folder
	 * whatever its name; a folder source of a dotted name stays a folder */
	m = parse("{\"env\":{\"ROUTER_BUCKET\":\"hf://buckets/a/b/r/table.bin\",\"ROUTER_PATH\":\"/w/r/table.bin\","
		  "\"WEIGHTS_BUCKET\":\"hf://buckets/a/b/m.baked\",\"LOCAL_MODEL_DIR\":\"/tmp/m.baked\","
		  "\"PATCHES_BUCKET\":\"https://h.example/p/fix.patch?dl=1\",\"PATCHES_DST\":\"/w/p/fix.patch\","
		  "\"DRAFT_BUCKET\":\"hf://buckets/a/b/ft-v1\",\"DRAFT_PATH\":\"/w/ft-v1\","
		  "\"TABLES_BUCKET\":\"hf://buckets/a/b/t.bin\",\"TABLES_PATH\":\"/w/t/other.bin\"}}",
		  &err);
	ok(m != NULL, "file targets: parses (%s)", err.msg);
	c = m ? fg_manifest_component(m, "ROUTER_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/w/r") && !strcmp(c->target_key, "ROUTER_PATH"),
	   "file targets: ROUTER_PATH naming the bucket's one file is that file, in /w/r (%s)",
	   c && c->target ? c->target : "none");
	c = m ? fg_manifest_component(m, "WEIGHTS_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/tmp/m.baked"),
	   "file targets: LOCAL_MODEL_DIR is a folder, dotted name or not (%s)", c && c->target ? c->target : "none");
	c = m ? fg_manifest_component(m, "PATCHES_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/w/p"),
	   "file targets: a URL's file named by PATCHES_DST is that file, in /w/p (%s)",
	   c && c->target ? c->target : "none");
	c = m ? fg_manifest_component(m, "DRAFT_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/w/ft-v1"),
	   "file targets: a bucket folder's name without extension stays a folder (%s)",
	   c && c->target ? c->target : "none");
	c = m ? fg_manifest_component(m, "TABLES_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/w/t/other.bin"),
	   "file targets: a path of another name is placed as before, a folder (%s)",
	   c && c->target ? c->target : "none");
	fg_manifest_free(m);

	/* rule 4: a keepset shared as one file, and the file path the serve
	 * script reads it from outside every folder target: the file's folder */
	m = parse("{\"env\":{\"LM_HEAD_KEEPSET_BUCKET\":\"hf://buckets/a/b/k12/pck04_keepset.json\","
		  "\"PCK04_KEEPSET\":\"/tmp/keep/pck04_keepset.json\",\"WEIGHTS_BUCKET\":\"hf://buckets/a/b/w\","
		  "\"LOCAL_MODEL_DIR\":\"/tmp/w\",\"ROUTER_BUCKET\":\"https://h.example/r/table.bin?dl=1\","
		  "\"ROUTER_FILE\":\"/r/table.bin\",\"ORPHAN_FILE\":\"/x/nothing.bin\"}}",
		  &err);
	ok(m != NULL, "rule 4: parses (%s)", err.msg);
	c = m ? fg_manifest_component(m, "LM_HEAD_KEEPSET_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/tmp/keep") && !strcmp(c->target_key, "PCK04_KEEPSET"),
	   "rule 4: PCK04_KEEPSET naming the one file of the keepset places it in that file's folder");
	t = m ? target(m, "PCK04_KEEPSET") : NULL;
	ok(t && t->rule == FG_TARGET_FILE && m->components[t->component].target == c->target,
	   "rule 4: the target is the keepset's, by rule 4");
	c = m ? fg_manifest_component(m, "ROUTER_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/r"), "rule 4: a URL's file name, its query left out");
	t = m ? target(m, "ORPHAN_FILE") : NULL;
	ok(t && t->component < 0, "rule 4: a file no source names is still placed by nothing");
	fg_manifest_free(m);
	m = parse("{\"env\":{\"A_BUCKET\":\"hf://buckets/a/b/x/keep.json\",\"B_BUCKET\":\"hf://buckets/a/b/y/keep.json\","
		  "\"KEEP_FILE\":\"/k/keep.json\",\"C_BUCKET\":\"hf://buckets/a/b/keep.json\",\"LOCAL_C_DIR\":\"/c\","
		  "\"ROOT_FILE\":\"/keep.json\"}}",
		  &err);
	t = m ? target(m, "KEEP_FILE") : NULL;
	ok(t && t->component < 0 && !fg_manifest_component(m, "A_BUCKET")->target,
	   "rule 4: two sources of that file name (C has a folder of its own): neither is guessed");
	t = m ? target(m, "ROOT_FILE") : NULL;
	ok(t && t->component < 0, "rule 4: a file at the root names no folder to place in");
	fg_manifest_free(m);

	/* rule 5: a folder or path key naming the component by its last words
	 * (KEEPSET_PATH for LM_HEAD_KEEPSET_BUCKET), the leading words not shared */
	m = parse("{\"env\":{\"LM_HEAD_KEEPSET_BUCKET\":\"hf://buckets/a/b/k12/pck04_keepset.json\","
		  "\"KEEPSET_PATH\":\"/tmp/keep/pck04_keepset.json\",\"WEIGHTS_BUCKET\":\"hf://buckets/a/b/w\","
		  "\"LOCAL_MODEL_DIR\":\"/tmp/w\",\"MTP_DRAFTER_BUCKET\":\"hf://buckets/a/b/ft-v1\","
		  "\"DRAFTER_DIR\":\"/tmp/ft-v1\",\"EVAL_PROMPTS_BUCKET\":\"https://h.example/d/get?id=7\","
		  "\"PROMPTS_PATH\":\"/data/get\"}}",
		  &err);
	ok(m != NULL, "rule 5: parses (%s)", err.msg);
	c = m ? fg_manifest_component(m, "LM_HEAD_KEEPSET_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/tmp/keep") && !strcmp(c->target_key, "KEEPSET_PATH"),
	   "rule 5: KEEPSET_PATH naming the keepset's one file places it in that file's folder");
	t = m ? target(m, "KEEPSET_PATH") : NULL;
	ok(t && t->rule == FG_TARGET_TRAILING && c && m->components[t->component].target == c->target,
	   "rule 5: KEEPSET_PATH is the keepset's, by rule 5");
	c = m ? fg_manifest_component(m, "MTP_DRAFTER_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/tmp/ft-v1") && !strcmp(c->target_key, "DRAFTER_DIR"),
	   "rule 5: DRAFTER_DIR named like the source folder is that folder");
	c = m ? fg_manifest_component(m, "EVAL_PROMPTS_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/data"),
	   "rule 5: a URL is one file: a path ending in its name is that file");
	c = m ? fg_manifest_component(m, "WEIGHTS_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/tmp/w"), "rule 5: the weights keep LOCAL_MODEL_DIR");
	fg_manifest_free(m);
	m = parse("{\"env\":{\"LM_HEAD_KEEPSET_BUCKET\":\"hf://buckets/a/b/int4-pck04c-12k\","
		  "\"KEEPSET_PATH\":\"/tmp/keepset-12k\"}}",
		  &err);
	c = m ? fg_manifest_component(m, "LM_HEAD_KEEPSET_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target, "/tmp/keepset-12k"),
	   "rule 5: a path of another name is the component's folder");
	fg_manifest_free(m);
	/* what must not pair: two components ending in the words, a last word
	 * shared but not the whole stem, a key of a fixed pair, a component with
	 * a target already, a file path of another name, a path inside a folder */
	m = parse("{\"env\":{\"LM_HEAD_KEEPSET_BUCKET\":\"hf://buckets/a/b/k/keepset.json\","
		  "\"VOCAB_KEEPSET_BUCKET\":\"hf://buckets/a/c/k/keepset.json\",\"KEEPSET_PATH\":\"/k/keepset.json\","
		  "\"KV_CACHE_BUCKET\":\"hf://buckets/a/b/kv\",\"TRITON_CACHE_DIR\":\"/c\","
		  "\"DRAFT_MODEL_BUCKET\":\"hf://buckets/a/b/d\",\"MODEL_PATH\":\"/m\"}}",
		  &err);
	ok(m != NULL, "rule 5, not: parses (%s)", err.msg);
	t = m ? target(m, "KEEPSET_PATH") : NULL;
	ok(t && t->component < 0 && !fg_manifest_component(m, "LM_HEAD_KEEPSET_BUCKET")->target &&
		   !fg_manifest_component(m, "VOCAB_KEEPSET_BUCKET")->target,
	   "rule 5, not: two components ending in KEEPSET: neither is guessed");
	t = m ? target(m, "TRITON_CACHE_DIR") : NULL;
	ok(t && t->component < 0 && !fg_manifest_component(m, "KV_CACHE_BUCKET")->target,
	   "rule 5, not: TRITON_CACHE_DIR is not KV_CACHE's (only the last word is shared)");
	t = m ? target(m, "MODEL_PATH") : NULL;
	ok(t && t->component < 0 && !fg_manifest_component(m, "DRAFT_MODEL_BUCKET")->target,
	   "rule 5, not: MODEL_PATH (a fixed pair's key) is not DRAFT_MODEL's");
	fg_manifest_free(m);
	m = parse("{\"env\":{\"LM_HEAD_KEEPSET_BUCKET\":\"hf://buckets/a/b/k12\",\"LM_HEAD_PRUNE_DST\":\"/tmp/12k\","
		  "\"KEEPSET_PATH\":\"/tmp/elsewhere\",\"ROUTER_TABLE_BUCKET\":\"hf://buckets/a/b/r/table.bin\","
		  "\"TABLE_PATH\":\"/r/other.bin\",\"PATCH_SET_BUCKET\":\"hf://buckets/a/b/p\",\"SET_PATH\":\"/w/p\","
		  "\"WEIGHTS_BUCKET\":\"hf://buckets/a/b/w\",\"LOCAL_MODEL_DIR\":\"/w\"}}",
		  &err);
	ok(m != NULL, "rule 5, not: parses (%s)", err.msg);
	c = m ? fg_manifest_component(m, "LM_HEAD_KEEPSET_BUCKET") : NULL;
	t = m ? target(m, "KEEPSET_PATH") : NULL;
	ok(c && c->target && !strcmp(c->target_key, "LM_HEAD_PRUNE_DST") && t && t->component < 0,
	   "rule 5, not: a component with a target of its own keeps it; KEEPSET_PATH stays unplaced");
	t = m ? target(m, "TABLE_PATH") : NULL;
	ok(t && t->component < 0 && !fg_manifest_component(m, "ROUTER_TABLE_BUCKET")->target,
	   "rule 5, not: a file path of another name than the source's file (no renaming)");
	t = m ? target(m, "SET_PATH") : NULL;
	ok(t && t->rule == FG_TARGET_INSIDE && !fg_manifest_component(m, "PATCH_SET_BUCKET")->target,
	   "rule 5, not: a path inside another component's folder stays that folder's (rule 3)");
	fg_manifest_free(m);

	/* a repo id in MODEL_PATH (vLLM-style scripts take either) is no target */
	m = parse("{\"model_id\":\"google/gemma-4-E4B-it\",\"env\":{\"MODEL_PATH\":\"google/gemma-4-E4B-it\"}}",
		  &err);
	c = m ? fg_manifest_component(m, "model_id") : NULL;
	ok(c && !c->target && !target(m, "MODEL_PATH"), "targets: MODEL_PATH holding a repo id is not a target");
	fg_manifest_free(m);

	/* two fixed targets of the weights: LOCAL_MODEL_DIR wins wherever it stands */
	m = parse("{\"env\":{\"MODEL_PATH\":\"/w/b\",\"WEIGHTS_BUCKET\":\"hf://buckets/a/w\","
		  "\"LOCAL_MODEL_DIR\":\"/w/a\"}}",
		  &err);
	c = m ? fg_manifest_component(m, "WEIGHTS_BUCKET") : NULL;
	ok(c && c->target && !strcmp(c->target_key, "LOCAL_MODEL_DIR"),
	   "targets: LOCAL_MODEL_DIR before an earlier MODEL_PATH");
	t = m ? target(m, "MODEL_PATH") : NULL;
	ok(t && t->rule == FG_TARGET_FIXED && m->components[t->component].target == c->target,
	   "targets: MODEL_PATH still the weights'");
	fg_manifest_free(m);

	m = parse("{\"name\":\"x\",\"future_field\":{\"a\":[1,2]}}", &err);
	ok(m && m->n_components == 0 && m->n_env == 0 && m->port == -1 &&
		   cJSON_GetObjectItemCaseSensitive(m->json, "future_field"),
	   "rules: no env, unknown top-level keys kept");
	fg_manifest_free(m);
}

static void test_errors(void)
{
	struct fg_err err = { 0, "" };
	struct fg_manifest *m = NULL;
	size_t big = FG_MANIFEST_MAX_BYTES + 1;
	char *junk;
	FILE *f;

	bad("not json", "not valid JSON");
	bad("[1,2]", "expected a JSON object at the top, got array");
	bad("{\"env\":{\"PORT\":8000}}", "env.PORT: expected a string, got number");
	bad("{\"env\":[]}", "env: expected an object");
	bad("{\"env\":{\"WEIGHTS_BUCKET\":\"hf://buckets/x\"}}", "env.WEIGHTS_BUCKET: hf://buckets/x: missing bucket name");
	bad("{\"env\":{\"WEIGHTS_BUCKET\":\"hf://google/gemma\"}}", "env.WEIGHTS_BUCKET: expected hf://buckets/");
	bad("{\"env\":{\"WEIGHTS_BUCKET\":\"hf://buckets/a/b/../c\"}}", "not a safe relative path");
	bad("{\"model_id\":\"hf://buckets/a/b\"}", "model_id: expected a Hub model repo");
	bad("{\"model_id\":7}", "model_id: expected a string, got number");
	bad("{\"model_id\":\"/models/gemma-4-E4B-it\"}",
	    "model_id: \"/models/gemma-4-E4B-it\" is a local path, not a Hub model repo");
	bad("{\"env\":{\"WEIGHTS_BUCKET\":\"/tmp/osoi5-v0-baked\"}}",
	    "env.WEIGHTS_BUCKET: \"/tmp/osoi5-v0-baked\" is a local path; write file:///absolute/path");
	bad("{\"env\":{\"WEIGHTS_BUCKET\":\"./w\"}}", "env.WEIGHTS_BUCKET: \"./w\" is a local path");
	bad("{\"env\":{\"WEIGHTS_BUCKET\":\"buckets/gemma-challenge/gemma-x/w\"}}",
	    "env.WEIGHTS_BUCKET: \"buckets/gemma-challenge/gemma-x/w\": write hf://buckets/gemma-challenge/gemma-x/w");
	bad("{\"env\":{\"WEIGHTS_BUCKET\":\"gemma-challenge/gemma-x\"}}",
	    "env.WEIGHTS_BUCKET: \"gemma-challenge/gemma-x\": write hf://buckets/gemma-challenge/gemma-x for a bucket "
	    "(hf://gemma-challenge/gemma-x for the model repo)");
	bad("{\"env\":{\"WEIGHTS_BUCKET\":\"gemma-challenge/gemma-x/w\"}}",
	    "env.WEIGHTS_BUCKET: \"gemma-challenge/gemma-x/w\": write hf://buckets/gemma-challenge/gemma-x/w");
	bad("{\"dependencies\":[\"ok\",3]}", "dependencies[1]: expected a string, got number");
	bad("{\"serve\":\"python serve.py\"}", "serve: expected an array of strings, got string");
	bad("{\"port\":\"80a\"}", "port: expected an integer");
	bad("{\"port\":\"\"}", "port: expected an integer");
	bad("{\"port\":\"-1\"}", "port: expected an integer");
	bad("{\"port\":\"70000\"}", "port: expected an integer 0..65535");
	bad("{\"port\":8000.5}", "port: expected an integer");
	bad("{\"port\":70000}", "port: expected an integer 0..65535");
	bad("{\"env\":{\"DRAFTER_BUCKET\":\"hf://buckets/a/b\",\"DRAFTER_SHA256\":\"abc\"}}",
	    "env.DRAFTER_SHA256: expected 64 hex digits");
	bad("{\"env\":{\"SPECULATIVE_CONFIG\":\"{nope\"}}", "env.SPECULATIVE_CONFIG: not valid JSON");
	bad("{\"env\":{\"SPECULATIVE_CONFIG\":\"{\\\"num_speculative_tokens\\\":\\\"seven\\\"}\"}}",
	    "env.SPECULATIVE_CONFIG.num_speculative_tokens");
	bad("{\"env\":{\"SPECULATIVE_CONFIG\":\"{\\\"num_speculative_tokens\\\":\\\"2000\\\"}\"}}",
	    "env.SPECULATIVE_CONFIG.num_speculative_tokens: expected an integer 0..1024");
	bad("{\"env\":{\"SPECULATIVE_CONFIG\":{\"method\":\"mtp\"}}}",
	    "env.SPECULATIVE_CONFIG: expected a string holding JSON (an environment variable, as vLLM "
	    "reads it), got object");
	bad("{\"env\":{\"MAX_NUM_SEQS\":1}}", "env.MAX_NUM_SEQS: expected a string, got number");
	bad("{\"env\":{\"DRAFTER_MODEL\":\"org/mtp@v2\"}}",
	    "env.DRAFTER_MODEL: org/mtp@v2: a bare repo id takes no revision (write hf://org/mtp@v2");
	bad("{\"dependencies\":[\"--extra-index-url https://download.pytorch.org/whl/cu129\"]}",
	    "dependencies[0]: \"--extra-index-url https://download.pytorch.org/whl/cu129\": a pip option");
	/* numbers written as strings, as env-minded authors do and as Python's
	 * int() and pydantic's lax mode (vLLM's SpeculativeConfig) read them */
	{
		struct fg_err e2 = { 0, "" };
		struct fg_manifest *m2 = parse("{\"port\":\"8000\",\"env\":{\"SPECULATIVE_CONFIG\":"
					     "\"{\\\"model\\\":\\\"/tmp/d\\\",\\\"num_speculative_tokens\\\":\\\"7\\\"}\"}}",
					     &e2);

		ok(m2 && m2->port == 8000 && m2->spec.num_speculative_tokens == 7,
		   "port \"8000\" and num_speculative_tokens \"7\" read as numbers: %s", m2 ? "" : e2.msg);
		fg_manifest_free(m2);
	}
	bad("{\"env\":{\"A\":\"1\",\"A\":\"2\"}}", "env.A: key appears twice");
	{
		/* a large env (5000 keys) with LOCAL_MODEL_DIR twice: refused
		 * as a small one is; Python's json keeps the second, we the first */
		struct fg_buf b = FG_BUF_INIT;
		int i, brc = fg_buf_puts(&b, "{\"env\":{\"LOCAL_MODEL_DIR\":\"/tmp/a\"", NULL);

		for (i = 0; i < 5000 && !brc; i++)
			brc = fg_buf_printf(&b, NULL, ",\"K%05d\":\"v\"", i);
		if (!brc)
			brc = fg_buf_puts(&b, ",\"LOCAL_MODEL_DIR\":\"/tmp/b\"}}", NULL);
		ok(!brc, "a 5000-key env built");
		if (!brc)
			bad(b.data, "env.LOCAL_MODEL_DIR: key appears twice");
		fg_buf_release(&b);
	}
	bad("{\"name\":\"a\"} trailing", "trailing data");
	/* Latin-1 (a file saved by an editor in a legacy locale), a UTF-16
	 * byte-order mark, a lone continuation byte, an overlong '/' */
	bad("{\"name\":\"caf\xe9\"}", "not UTF-8 text (line 1, byte 12: 0xe9)");
	bad("\xff\xfe{", "not UTF-8 text (line 1, byte 0: 0xff)");
	bad("{\"env\":\n{\"W_BUCKET\":\"hf://buckets/a/b/\x80\"}}", "not UTF-8 text (line 2");
	bad("{\"env\":{\"W_BUCKET\":\"hf://buckets/a/b\xc0\xaf..\"}}", "not UTF-8 text");
	{
		struct fg_err e2 = { 0, "" };
		struct fg_manifest *m2 = parse("\xef\xbb\xbf{\"name\":\"caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x98\x80\"}", &e2);

		ok(m2 && m2->name && !strcmp(m2->name, "caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x98\x80"),
		   "UTF-8 of 2, 3 and 4 bytes after a UTF-8 byte-order mark read: %s", m2 ? "" : e2.msg);
		fg_manifest_free(m2);
	}

	junk = malloc(big);
	if (junk) {
		memset(junk, 'x', big);
		ok(fg_manifest_parse(&m, junk, big, "m.json", &err) == FG_EFORMAT &&
			   strstr(err.msg, "larger than 16 MiB"),
		   "refused: oversize buffer (%s)", err.msg);
		f = fopen("build/test-manifest-big.json", "wb");
		if (f) {
			/* 112 MiB: 16 MiB of garbage then a sparse tail */
			fwrite(junk, 1, big - 1, f);
			fclose(f);
			if (truncate("build/test-manifest-big.json", (off_t)7 * (big - 1)))
				printf("# truncate failed\n");
			ok(fg_manifest_load(&m, "build/test-manifest-big.json", &err) == FG_EFORMAT &&
				   strstr(err.msg, "larger than 16 MiB"),
			   "refused: 112 MiB file (%s)", err.msg);
			remove("build/test-manifest-big.json");
		}
		free(junk);
	}
	ok(fg_manifest_load(&m, "build/no-such-manifest.json", &err) == FG_ENOTFOUND,
	   "missing file: not found");
}

static void dep(const char *spec, int kind, const char *name, const char *version, const char *url,
		const char *sha)
{
	struct fg_dependency d;
	struct fg_err err = { 0, "" };
	int rc = fg_dependency_parse(&d, spec, &err);

#define SAMEOPT(a, b) ((!(a) && !(b)) || ((a) && (b) && !strcmp((a), (b))))
	ok(rc == 0 && d.kind == kind && SAMEOPT(d.name, name) && SAMEOPT(d.version, version) &&
		   SAMEOPT(d.url, url) && SAMEOPT(d.sha256, sha),
	   "dependency %s -> %s", spec, fg_dep_kind_name(kind));
#undef SAMEOPT
	if (!rc)
		fg_dependency_release(&d);
}

static void test_deps(void)
{
	struct fg_dependency d;
	struct fg_err err = { 0, "" };
	const char *h = "ab00000000000000000000000000000000000000000000000000000000000001";

	dep("transformers==5.9.0", FG_DEP_PIN, "transformers", "5.9.0", NULL, NULL);
	dep("jinja2[i18n] === 3.1.6 ; python_version > '3.8'", FG_DEP_PIN, "jinja2", "3.1.6", NULL, NULL);
	dep("torch", FG_DEP_UNPINNED, "torch", NULL, NULL, NULL);
	dep("x>=1.0", FG_DEP_UNPINNED, "x", NULL, NULL, NULL);
	dep("x==1.*", FG_DEP_UNPINNED, "x", NULL, NULL, NULL);
	dep("x==1.0,<2", FG_DEP_UNPINNED, "x", NULL, NULL, NULL);
	dep("https://w.example/a%2Bb.whl", FG_DEP_URL, NULL, NULL, "https://w.example/a%2Bb.whl", NULL);
	dep("pkg @ https://w.example/p.whl#sha256=AB00000000000000000000000000000000000000000000000000000000000001",
	    FG_DEP_URL, "pkg", NULL, "https://w.example/p.whl", h);
	/* git: only a full commit id pins it */
	dep("git+https://g.example/r.git@v1", FG_DEP_UNPINNED, NULL, NULL, "git+https://g.example/r.git@v1", NULL);
	dep("git+https://g.example/r.git", FG_DEP_UNPINNED, NULL, NULL, "git+https://g.example/r.git", NULL);
	dep("p @ git+https://g.example/r.git@main#egg=p", FG_DEP_UNPINNED, "p", NULL,
	    "git+https://g.example/r.git@main", NULL);
	dep("p @ git+https://u@g.example/r.git@0123456789ABCDEF0123456789abcdef01234567", FG_DEP_URL, "p", NULL,
	    "git+https://u@g.example/r.git@0123456789ABCDEF0123456789abcdef01234567", NULL);
	ok(!fg_dependency_parse(&d, "git+https://g.example/r.git@0123456789abcdef0123456789abcdef01234567", &err) &&
		   d.commit && !strcmp(d.commit, "0123456789abcdef0123456789abcdef01234567"),
	   "git dependency: the commit id is kept");
	fg_dependency_release(&d);
	ok(!fg_dependency_parse(&d, "git+https://g.example/r.git@0123456789abcdef0123456789abcdef0123456", &err) &&
		   d.kind == FG_DEP_UNPINNED && !d.commit,
	   "git dependency: 39 hex digits are no commit id (unpinned)");
	fg_dependency_release(&d);
	ok(fg_dependency_parse(&d, "-e .", &err) == FG_EFORMAT && strstr(err.msg, "not a requirement"),
	   "dependency: option refused (%s)", err.msg);
	ok(fg_dependency_parse(&d, "", &err) == FG_EFORMAT, "dependency: empty refused");
	ok(fg_dependency_parse(&d, "https://w.example/p.whl#sha256=12", &err) == FG_EFORMAT &&
		   strstr(err.msg, "64 hex"),
	   "dependency: short #sha256= refused");
	ok(fg_dependency_parse(&d, "p @ nowhere", &err) == FG_EFORMAT, "dependency: '@' needs a URL");
	bad("{\"dependencies\": [\"ok==1\", \"--index-url x\"]}", "dependencies[1]: \"--index-url x\": a pip option, not a requirement");
}

int main(void)
{
	test_deps();
	test_example();
	test_rules();
	test_errors();
	return tap_done();
}
