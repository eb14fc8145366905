/* engine_test.h - helpers shared by the engine tests (CPU and CUDA): oracle id
 * arrays, a token collector for fg_engine_generate, scratch model folders
 * with an edited config. */
#ifndef FG_ENGINE_TEST_H
#define FG_ENGINE_TEST_H

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <math.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bake/prune_head.h"
#include "fsutil.h"
#include "json.h"
#include "engine/engine.h"

/* A scratch model folder dir: config.json written from config, and
 * model.safetensors a link to the one in fixture folder fix (relative to
 * the working directory). Returns 0, or -1 (said on stderr). */
static inline int scratch_model(const char *dir, const char *fix, const char *config)
{
	char p[512], target[512], cwd[400];
	FILE *f;

	snprintf(p, sizeof(p), "%s/config.json", dir);
	if (!(f = fopen(p, "w")) || fputs(config, f) < 0 || fclose(f)) {
		perror(p);
		return -1;
	}
	snprintf(p, sizeof(p), "%s/model.safetensors", dir);
	unlink(p);
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = 0;
	snprintf(target, sizeof(target), "%s/%s/model.safetensors", cwd, fix);
	if (symlink(target, p)) {
		perror("symlink");
		return -1;
	}
	return 0;
}

/* config.json of fixture folder fix with one edit applied to text_config
 * (value taken), or the text_config flattened to the top level when key
 * is NULL; NULL if the file is unreadable. */
static inline char *edited_config(const char *fix, const char *key, cJSON *value)
{
	char path[512], *out;
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err = {0};
	cJSON *root, *tc;

	snprintf(path, sizeof(path), "%s/config.json", fix);
	if (fg_file_read(path, 1 << 20, &b, &err)) {
		cJSON_Delete(value);
		return NULL;
	}
	root = cJSON_ParseWithLength((const char *)b.data, b.len);
	fg_buf_release(&b);
	tc = cJSON_GetObjectItem(root, "text_config");
	if (!key) {
		cJSON *flat = cJSON_Duplicate(tc, 1);

		cJSON_Delete(root);
		out = cJSON_Print(flat);
		cJSON_Delete(flat);
		return out;
	}
	cJSON_ReplaceItemInObject(tc, key, value);
	out = cJSON_Print(root);
	cJSON_Delete(root);
	return out;
}

/* The ids of a JSON array of numbers, in a new array (one spare slot); *n gets the count. */
static int32_t *ids_of(const cJSON *arr, int *n)
{
	int32_t *ids = malloc(sizeof(int32_t) * (size_t)(cJSON_GetArraySize(arr) + 1));
	const cJSON *it;
	int i = 0;

	cJSON_ArrayForEach(it, arr) ids[i++] = (int32_t)it->valuedouble;
	*n = i;
	return ids;
}

/* The greedy continuation an engine must give for the oracle's prompt entry
 * p: transformers' cached generate ("generated"), or, where transformers'
 * cached steps disagree with its own uncached pass on that prompt, the
 * uncached pass's greedy ("generated_full", tests/oracle/variants.py): the
 * model as its attention masks define it. transformers 5.17 keeps every past
 * key in a sliding layer of window 1 (docs/engine.md, "Sliding window 1"). */
static int32_t *greedy_want(const cJSON *p, int *n)
{
	const cJSON *full = fg_json_arr(p, "generated_full");

	return ids_of(full ? full : fg_json_arr(p, "generated"), n);
}

/* Collects up to 64 generated ids. */
struct gen {
	int32_t ids[64];
	int n;
};

static int on_token(void *user, int32_t tok, const float *logits, int n_vocab)
{
	struct gen *g = user;

	(void)logits;
	(void)n_vocab;
	g->ids[g->n++] = tok;
	return g->n >= 64;
}

/* Writes a keepset of the ids i < vocab with i % 3 != 1 (plus id 1) into
 * dir/k.json and prunes the model folder src to it into dir/out (INT4 head
 * when head_int4); returns 0 and the pruned folder in out, or -1. */
static int prune_fixture(char *out, size_t n_out, const char *dir, const char *src, int vocab, int head_int4)
{
	char kpath[512];
	struct fg_prune_report rep;
	struct fg_err e = {0};
	cJSON *o = cJSON_CreateObject(), *ids = cJSON_AddArrayToObject(o, "keep_ids");
	char *txt;
	int i, k = 0, rc;

	for (i = 0; i < vocab; i++)
		if (i % 3 != 1 || i == 1) {
			cJSON_AddItemToArray(ids, cJSON_CreateNumber(i));
			k++;
		}
	cJSON_AddNumberToObject(o, "pruned_vocab_K", k);
	cJSON_AddNumberToObject(o, "full_vocab", vocab);
	txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	snprintf(kpath, sizeof(kpath), "%s/k.json", dir);
	snprintf(out, n_out, "%s/out%d", dir, head_int4);
	rc = !txt || fg_file_write_atomic(kpath, txt, strlen(txt), 0644, &e) ||
	     fg_prune_head(src, kpath, out, head_int4, 1, &rep, &e);
	if (rc)
		printf("# prune %s: %s\n", src, e.msg);
	free(txt);
	return rc ? -1 : 0;
}

/* Runs seq (n tokens) through the full model and through its prune_fixture
 * copy pr: *same = 1 when every kept token's logit is the full head's bit for
 * bit, *inf = 1 when every pruned one is -inf. Returns 0, or the engine's
 * error code (err set). */
static int compare_pruned(struct fg_engine *full, struct fg_engine *pr, const int32_t *seq, int n, int *same,
			  int *inf, struct fg_err *err)
{
	int V = fg_engine_vocab_size(full), i, rc;
	float *lf = malloc(sizeof(float) * (size_t)n * (size_t)V), *lp = malloc(sizeof(float) * (size_t)n * (size_t)V);

	*same = *inf = 1;
	rc = !lf || !lp || fg_engine_forward_logits(full, seq, (size_t)n, 0, lf, err) ||
	     fg_engine_forward_logits(pr, seq, (size_t)n, 0, lp, err);
	for (i = 0; !rc && i < n * V; i++) {
		int v = i % V;

		if (v % 3 != 1 || v == 1)
			*same &= !memcmp(&lf[i], &lp[i], sizeof(float));
		else
			*inf &= isinf(lp[i]) && lp[i] < 0;
	}
	free(lf);
	free(lp);
	return rc;
}

/* Logits [30][vocab] of a fixed 30-token sequence (ids folded into the
 * vocabulary) from engine e, loaded from dir (freed here; NULL gives NULL):
 * the whole sequence at once (prefill in chunks) or, one_by_one, a token at
 * a time. *n_out: how many floats (0 on failure). */
static float *seq_logits(struct fg_engine *e, const char *dir, int one_by_one, int *n_out)
{
	static const int32_t seq[] = { 2, 17, 300, 5, 88, 410, 9, 9, 120, 311, 47, 260, 501, 3, 77, 190,
				       64, 128, 255, 256, 100, 2, 400, 33, 34, 35, 480, 12, 6, 70 };
	int n = (int)(sizeof(seq) / sizeof(seq[0])), V, i, rc = 0;
	int32_t ids[sizeof(seq) / sizeof(seq[0])];
	struct fg_err err = { 0 };
	float *lg;

	*n_out = 0;
	if (!e)
		return NULL;
	V = fg_engine_vocab_size(e);
	lg = malloc(sizeof(float) * (size_t)n * (size_t)V);
	for (i = 0; i < n; i++)
		ids[i] = seq[i] % V;
	if (!one_by_one)
		rc = fg_engine_forward_logits(e, ids, (size_t)n, 0, lg, &err);
	else
		for (i = 0; i < n && !rc; i++)
			rc = fg_engine_forward_logits(e, ids + i, 1, 0, lg + (size_t)i * (size_t)V, &err);
	fg_engine_free(e);
	if (rc) {
		printf("# forward %s: %s\n", dir, err.msg);
		free(lg);
		return NULL;
	}
	*n_out = n * V;
	return lg;
}

/* Logits [n][vocab] of the first n (<= 20) tokens of a fixed sequence of
 * ids below 256 from the model folder dir on device (2 threads), in a new
 * array; NULL with err set on failure. */
static float *logits_of(const char *dir, int device, int n, struct fg_err *err)
{
	static const int32_t seq[] = { 2, 17, 99, 5, 201, 250, 3, 3, 40, 41, 42, 7, 128, 64, 9, 33, 180, 77, 12, 6 };
	struct fg_engine_opts o = { 2, 0, 0, device };
	struct fg_engine *e = NULL;
	float *lg = NULL;

	if (fg_engine_load(&e, dir, &o, err))
		return NULL;
	lg = malloc(sizeof(float) * (size_t)n * (size_t)fg_engine_vocab_size(e));
	if (fg_engine_forward_logits(e, seq, (size_t)n, 0, lg, err)) {
		free(lg);
		lg = NULL;
	}
	fg_engine_free(e);
	return lg;
}

/* Calls fn for every tiny model made by transformers' own save_pretrained
 * (tests/oracle/variants.py) under root: root/<name>/{config.json,
 * model.safetensors, oracle.json, logits.bin}, with the model's own window
 * (0). Returns how many. */
static int for_each_variant(const char *root,
			    void (*fn)(const char *dir, const char *json, const char *bin, int window,
				       const char *label))
{
	DIR *d = opendir(root);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d))) {
		char dir[512], js[600], bin[600];

		if (de->d_name[0] == '.')
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", root, de->d_name);
		snprintf(js, sizeof(js), "%s/oracle.json", dir);
		snprintf(bin, sizeof(bin), "%s/logits.bin", dir);
		fn(dir, js, bin, 0, de->d_name);
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

#endif
