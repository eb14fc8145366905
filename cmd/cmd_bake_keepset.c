/* cmd_bake_keepset.c - `fgpack bake keepset`: count a corpus in tokens and
 * write the K-token LM-head keepset it calls for, with its coverage and a
 * provenance statement, as deterministic JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cmd.h"
#include "fsutil.h"
#include "json.h"
#include "provenance.h"
#include "bake/keepset.h"
#include "sha256.h"
#include "tokenizer.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fgpack bake keepset --tokenizer PATH --size K [--always IDS] [--full-vocab N]\n"
		"                           -o KEEPSET.json CORPUS...\n\n"
		"Counts the tokens of every CORPUS file (UTF-8 text, or .jsonl with one JSON\n"
		"array of token ids per line) and keeps K ids: always the special tokens (not\n"
		"the <unusedN> placeholders), the chat-turn tokens, the 256 byte-fallback tokens\n"
		"and the ids given with --always (comma-separated, repeatable); the rest by\n"
		"frequency, ties broken by the lower id. The output keeps the challenge's\n"
		"pck04_keepset.json fields (keep_ids, pruned_vocab_K, full_vocab) and adds the\n"
		"corpus digests, parameters, coverage and an in-toto/SLSA provenance statement.\n"
		"Same inputs, same bytes.\n\n"
		"  --full-vocab N  rows of the full LM head (default: the tokenizer's vocabulary)\n");
}

static int parse_ids(const char *s, int32_t **v, size_t *n)
{
	while (*s) {
		const char *e = strchr(s, ',');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		char tmp[24];
		int val;
		int32_t *p;

		if (!len || len >= sizeof(tmp))
			return -1;
		memcpy(tmp, s, len);
		tmp[len] = 0;
		if (fg_parse_int(tmp, 0, (1 << 26), &val))
			return -1;
		p = realloc(*v, (*n + 1) * sizeof(**v));
		if (!p)
			return -1;
		p[(*n)++] = val;
		*v = p;
		s = e ? e + 1 : s + len;
	}
	return 0;
}

static void pct(char *out, size_t cap, unsigned long long a, unsigned long long b)
{
	snprintf(out, cap, "%.4f", b ? 100.0 * (double)a / (double)b : 0.0);
}

int cmd_bake_keepset(int argc, char **argv)
{
	const char *tok_path = NULL, *out_path = NULL;
	const char **corpus = NULL;
	int32_t *always = NULL, *always_all = NULL, *keep = NULL;
	size_t n_always = 0, n_all = 0, n_corpus = 0, ns = 0, nc = 0, nb = 0, i;
	int k = 0, full_vocab = 0, rc = FG_EXIT_OK;
	struct fg_err err = { 0, "" };
	struct fg_tokenizer *tok = NULL;
	struct fg_tok_scratch *scr = NULL;
	struct fg_kcount cnt = { 0 };
	struct fg_kinput *inputs = NULL;
	struct fg_buf out = FG_BUF_INIT, ids_text = FG_BUF_INIT;
	cJSON *root = NULL, *arr, *o, *params, *stmt = NULL;
	struct fg_prov_item *deps = NULL, subject;
	struct fg_prov prov;
	char tok_sha[FG_SHA256_HEX_LEN + 1], keep_sha[FG_SHA256_HEX_LEN + 1], p1[32];
	uint8_t dg[FG_SHA256_LEN];
	unsigned long long tok_size, inside = 0, seen = 0, seen_in = 0;

	if (fg_cmd_wants_help(argc, argv)) {
		usage(stdout);
		return FG_EXIT_OK;
	}
	corpus = calloc((size_t)argc + 1, sizeof(*corpus));
	if (!corpus)
		return FG_EXIT_FAIL;
	for (i = 1; i < (size_t)argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--tokenizer") && i + 1 < (size_t)argc)
			tok_path = argv[++i];
		else if (!strcmp(a, "-o") && i + 1 < (size_t)argc)
			out_path = argv[++i];
		else if (!strcmp(a, "--size") && i + 1 < (size_t)argc) {
			if (fg_parse_int(argv[++i], 1, 1 << 26, &k)) {
				free(corpus);
				return fg_cmd_usage_error("bake keepset", "--size wants a positive integer, not '%s'", argv[i]);
			}
		} else if (!strcmp(a, "--full-vocab") && i + 1 < (size_t)argc) {
			if (fg_parse_int(argv[++i], 1, 1 << 26, &full_vocab)) {
				free(corpus);
				return fg_cmd_usage_error("bake keepset", "--full-vocab wants a positive integer");
			}
		} else if (!strcmp(a, "--always") && i + 1 < (size_t)argc) {
			if (parse_ids(argv[++i], &always, &n_always)) {
				free(corpus);
				free(always);
				return fg_cmd_usage_error("bake keepset", "--always wants comma-separated token ids, not '%s'", argv[i]);
			}
		} else if (a[0] == '-' && a[1]) {
			free(corpus);
			free(always);
			return fg_cmd_usage_error("bake keepset", "unknown option '%s'", a);
		} else
			corpus[n_corpus++] = a;
	}
	if (!tok_path || !out_path || !k || !n_corpus) {
		free(corpus);
		free(always);
		return fg_cmd_usage_error("bake keepset", "needs --tokenizer, --size, -o and at least one CORPUS file");
	}
	/* a folder, block device or socket at -o: refused before the counting */
	if (fg_out_check(out_path, &err) || fg_tokenizer_load(&tok, tok_path, &err) ||
	    fg_sha256_file(tok_path, dg, &tok_size, &err))
		goto fail;
	fg_hex_encode(dg, sizeof(dg), tok_sha);
	if (!full_vocab)
		full_vocab = fg_tokenizer_vocab_size(tok);
	if (k > full_vocab) {
		fg_err_set(&err, FG_EINVAL, "--size %d is larger than the vocabulary (%d)", k, full_vocab);
		goto fail;
	}
	if (fg_keepset_always(&always_all, &n_all, tok, full_vocab, always, n_always, &ns, &nc, &nb, &err))
		goto fail;
	if (fg_tok_scratch_new(&scr, &err) || fg_kcount_init(&cnt, fg_tokenizer_vocab_size(tok), &err))
		goto fail;
	inputs = calloc(n_corpus, sizeof(*inputs));
	if (!inputs) {
		fg_err_set(&err, FG_ENOMEM, "out of memory");
		goto fail;
	}
	for (i = 0; i < n_corpus; i++)
		if (fg_kcount_file(&cnt, tok, scr, corpus[i], &inputs[i], &err))
			goto fail;
	if (!cnt.tokens) {
		fg_err_set(&err, FG_EINVAL, "the corpus is empty: no tokens in %zu file(s)", n_corpus);
		goto fail;
	}
	if (fg_keepset_select(&keep, tok, cnt.counts, full_vocab, k, always_all, n_all, &err))
		goto fail;
	for (i = 0; i < (size_t)k; i++)
		inside += cnt.counts[keep[i]];
	for (i = 0; i < (size_t)cnt.vocab; i++)
		if (cnt.counts[i])
			seen++;
	for (i = 0; i < (size_t)k; i++)
		if (cnt.counts[keep[i]])
			seen_in++;

	root = cJSON_CreateObject();
	arr = cJSON_AddArrayToObject(root, "keep_ids");
	for (i = 0; i < (size_t)k; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber(keep[i]));
	if (fg_json_write(&ids_text, arr, 0, &err) || fg_sha256_mem(ids_text.data, ids_text.len, dg, &err))
		goto fail;
	fg_hex_encode(dg, sizeof(dg), keep_sha);
	cJSON_AddStringToObject(root, "schema", FG_KEEPSET_SCHEMA);
	cJSON_AddNumberToObject(root, "pruned_vocab_K", k);
	cJSON_AddNumberToObject(root, "full_vocab", full_vocab);
	cJSON_AddStringToObject(root, "source_keepset", "fgpack bake keepset");
	cJSON_AddStringToObject(root, "note",
				"always kept: special tokens (not <unusedN>), chat-turn tokens, byte-fallback "
				"tokens, --always ids; the rest by corpus frequency, ties by lower id");
	cJSON_AddStringToObject(root, "keep_ids_sha256", keep_sha);
	o = cJSON_AddObjectToObject(root, "tokenizer");
	cJSON_AddStringToObject(o, "path", tok_path);
	cJSON_AddStringToObject(o, "sha256", tok_sha);
	cJSON_AddNumberToObject(o, "vocab_size", fg_tokenizer_vocab_size(tok));
	arr = cJSON_AddArrayToObject(root, "corpus");
	for (i = 0; i < n_corpus; i++) {
		cJSON *c = cJSON_CreateObject();

		cJSON_AddItemToArray(arr, c);
		cJSON_AddStringToObject(c, "path", corpus[i]);
		cJSON_AddStringToObject(c, "sha256", inputs[i].sha256);
		cJSON_AddNumberToObject(c, "bytes", (double)inputs[i].bytes);
		cJSON_AddStringToObject(c, "kind", inputs[i].jsonl ? "token-ids" : "text");
		cJSON_AddNumberToObject(c, "tokens", (double)inputs[i].tokens);
		cJSON_AddNumberToObject(c, "lines", (double)inputs[i].lines);
	}
	params = cJSON_AddObjectToObject(root, "parameters");
	cJSON_AddNumberToObject(params, "size", k);
	cJSON_AddNumberToObject(params, "full_vocab", full_vocab);
	arr = cJSON_AddArrayToObject(params, "always");
	for (i = 0; i < n_always; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber(always[i]));
	o = cJSON_AddObjectToObject(root, "always_kept");
	cJSON_AddNumberToObject(o, "special", (double)ns);
	cJSON_AddNumberToObject(o, "chat_turn", (double)nc);
	cJSON_AddNumberToObject(o, "byte_fallback", (double)nb);
	cJSON_AddNumberToObject(o, "given", (double)n_always);
	cJSON_AddNumberToObject(o, "total", (double)n_all);
	o = cJSON_AddObjectToObject(root, "coverage");
	cJSON_AddNumberToObject(o, "tokens", (double)cnt.tokens);
	cJSON_AddNumberToObject(o, "tokens_inside", (double)inside);
	pct(p1, sizeof(p1), inside, cnt.tokens);
	cJSON_AddStringToObject(o, "token_coverage_percent", p1);
	cJSON_AddNumberToObject(o, "lines", (double)cnt.lines);
	cJSON_AddNumberToObject(o, "distinct_tokens_seen", (double)seen);
	cJSON_AddNumberToObject(o, "distinct_tokens_seen_inside", (double)seen_in);
	/* the statement's subject is keep_ids itself (its compact JSON text), so
	 * it can live inside the file it describes; no times, for equal bytes */
	deps = calloc(n_corpus + 1, sizeof(*deps));
	if (!deps) {
		fg_err_set(&err, FG_ENOMEM, "out of memory");
		goto fail;
	}
	deps[0] = (struct fg_prov_item){ tok_path, NULL, tok_sha };
	for (i = 0; i < n_corpus; i++)
		deps[i + 1] = (struct fg_prov_item){ corpus[i], NULL, inputs[i].sha256 };
	subject = (struct fg_prov_item){ "keep_ids", NULL, keep_sha };
	memset(&prov, 0, sizeof(prov));
	prov.build_type = "https://github.com/fgpack/fgpack/bake/keepset/v1";
	prov.subjects = &subject;
	prov.n_subjects = 1;
	prov.deps = deps;
	prov.n_deps = n_corpus + 1;
	prov.external_params = params;
	if (fg_prov_statement(&stmt, &prov, &err))
		goto fail;
	cJSON_AddItemToObject(root, "provenance", stmt);
	if (fg_json_write(&out, root, 1, &err) || fg_file_write_out(out_path, out.data, out.len, 0644, &err))
		goto fail;
	fprintf(stderr, "keepset: %d of %d ids (%zu always kept), %s%% of %llu corpus tokens inside -> %s\n", k,
		full_vocab, n_all, p1, (unsigned long long)cnt.tokens, out_path);
	goto done;
fail:
	rc = fg_cmd_fail("bake keepset", &err);
done:
	cJSON_Delete(root);
	fg_buf_release(&out);
	fg_buf_release(&ids_text);
	free(deps);
	free(inputs);
	free(keep);
	free(always);
	free(always_all);
	free(corpus);
	fg_kcount_release(&cnt);
	fg_tok_scratch_free(scr);
	fg_tokenizer_free(tok);
	return rc;
}
