/* cmd_keepset.c - `fgpack keepset report`: how much of a corpus a keepset
 * covers (tokens, whole lines) and which missing tokens matter most. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bake/keepset.h"
#include "buf.h"
#include "cmd.h"
#include "json.h"
#include "tokenizer.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fgpack keepset report KEEPSET --tokenizer PATH CORPUS... [--json]\n"
		"                             [--threshold PERCENT] [--top N]\n\n"
		"Counts the tokens of every CORPUS file (UTF-8 text, or .jsonl with one JSON array\n"
		"of token ids per line) and reports the share inside the keepset, the share of\n"
		"lines wholly inside, and the N (default 20) most frequent tokens outside it with\n"
		"their text. Warns on stderr when token coverage is below PERCENT (default 99.9).\n"
		"--json prints one JSON document (schema fgpack.keepset-report/1).\n");
}

struct miss {
	uint64_t count;
	int32_t id;
};

static int cmp_miss(const void *a, const void *b)
{
	const struct miss *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* A token's text for people: its decoded text when that is valid UTF-8,
 * else its piece (a lone byte token shows as "<0xE2>"). */
static void missing_text(const struct fg_tokenizer *tok, int32_t id, struct fg_buf *t)
{
	struct fg_buf chk = FG_BUF_INIT;
	size_t pl;
	const char *p;

	fg_tokenizer_decode(tok, &id, 1, t, NULL);
	fg_utf8_lossy(&chk, t->data ? t->data : "", t->len, NULL);
	if (chk.len != t->len || (t->len && memcmp(chk.data, t->data, t->len))) {
		p = fg_tokenizer_id_to_piece(tok, id, &pl);
		fg_buf_reset(t);
		fg_buf_append(t, p ? p : "", p ? pl : 0, NULL);
	}
	fg_buf_release(&chk);
}

static double pctd(unsigned long long a, unsigned long long b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static int report(int argc, char **argv)
{
	const char *ks_path = NULL, *tok_path = NULL;
	const char **corpus;
	size_t n_corpus = 0, i, n_miss = 0;
	int as_json = 0, top = 20, rc = FG_EXIT_OK;
	double threshold = 99.9;
	struct fg_err err = { 0, "" };
	struct fg_tokenizer *tok = NULL;
	struct fg_tok_scratch *scr = NULL;
	struct fg_kcount cnt = { 0 };
	unsigned char *member = NULL;
	int32_t k = 0, full_vocab = 0;
	unsigned long long inside = 0, seen = 0;
	struct miss *miss = NULL;
	struct fg_buf out = FG_BUF_INIT;
	char pbuf[32];

	corpus = calloc((size_t)argc + 1, sizeof(*corpus));
	if (!corpus)
		return FG_EXIT_FAIL;
	for (i = 1; i < (size_t)argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--tokenizer") && i + 1 < (size_t)argc)
			tok_path = argv[++i];
		else if (!strcmp(a, "--json"))
			as_json = 1;
		else if (!strcmp(a, "--top") && i + 1 < (size_t)argc) {
			if (fg_parse_int(argv[++i], 0, 100000, &top)) {
				free(corpus);
				return fg_cmd_usage_error("keepset", "--top wants a count");
			}
		} else if (!strcmp(a, "--threshold") && i + 1 < (size_t)argc) {
			char *end;

			threshold = strtod(argv[++i], &end);
			if (*end || end == argv[i] || threshold < 0 || threshold > 100) {
				free(corpus);
				return fg_cmd_usage_error("keepset", "--threshold wants a percentage 0..100");
			}
		} else if (a[0] == '-' && a[1]) {
			free(corpus);
			return fg_cmd_usage_error("keepset", "unknown option '%s'", a);
		} else if (!ks_path)
			ks_path = a;
		else
			corpus[n_corpus++] = a;
	}
	if (!ks_path || !tok_path || !n_corpus) {
		free(corpus);
		return fg_cmd_usage_error("keepset", "report needs KEEPSET, --tokenizer and at least one CORPUS file");
	}
	if (fg_tokenizer_load(&tok, tok_path, &err) ||
	    fg_keepset_read(&member, &k, &full_vocab, ks_path, fg_tokenizer_vocab_size(tok), &err) ||
	    fg_tok_scratch_new(&scr, &err) || fg_kcount_init(&cnt, fg_tokenizer_vocab_size(tok), &err))
		goto fail;
	cnt.member = member;
	for (i = 0; i < n_corpus; i++)
		if (fg_kcount_file(&cnt, tok, scr, corpus[i], NULL, &err))
			goto fail;
	if (!cnt.tokens) {
		fg_err_set(&err, FG_EINVAL, "the corpus is empty: no tokens in %zu file(s)", n_corpus);
		goto fail;
	}
	miss = malloc((size_t)cnt.vocab * sizeof(*miss));
	if (!miss) {
		fg_err_set(&err, FG_ENOMEM, "out of memory");
		goto fail;
	}
	for (i = 0; i < (size_t)cnt.vocab; i++) {
		if (!cnt.counts[i])
			continue;
		seen++;
		if (member[i])
			inside += cnt.counts[i];
		else
			miss[n_miss++] = (struct miss){ cnt.counts[i], (int32_t)i };
	}
	qsort(miss, n_miss, sizeof(*miss), cmp_miss);
	if (as_json) {
		cJSON *root = cJSON_CreateObject(), *arr;

		cJSON_AddStringToObject(root, "schema", "fgpack.keepset-report/1");
		cJSON_AddStringToObject(root, "keepset", ks_path);
		cJSON_AddNumberToObject(root, "keepset_size", k);
		cJSON_AddNumberToObject(root, "full_vocab", full_vocab);
		cJSON_AddNumberToObject(root, "tokens", (double)cnt.tokens);
		cJSON_AddNumberToObject(root, "tokens_inside", (double)inside);
		snprintf(pbuf, sizeof(pbuf), "%.4f", pctd(inside, cnt.tokens));
		cJSON_AddStringToObject(root, "token_coverage_percent", pbuf);
		cJSON_AddNumberToObject(root, "lines", (double)cnt.lines);
		cJSON_AddNumberToObject(root, "lines_inside", (double)cnt.lines_inside);
		snprintf(pbuf, sizeof(pbuf), "%.4f", pctd(cnt.lines_inside, cnt.lines));
		cJSON_AddStringToObject(root, "line_coverage_percent", pbuf);
		cJSON_AddNumberToObject(root, "distinct_tokens_seen", (double)seen);
		cJSON_AddNumberToObject(root, "distinct_tokens_missing", (double)n_miss);
		snprintf(pbuf, sizeof(pbuf), "%.4f", threshold);
		cJSON_AddStringToObject(root, "threshold_percent", pbuf);
		cJSON_AddBoolToObject(root, "below_threshold", pctd(inside, cnt.tokens) < threshold);
		arr = cJSON_AddArrayToObject(root, "top_missing");
		for (i = 0; i < n_miss && i < (size_t)top; i++) {
			cJSON *m = cJSON_CreateObject();
			struct fg_buf t = FG_BUF_INIT;

			missing_text(tok, miss[i].id, &t);
			cJSON_AddNumberToObject(m, "id", miss[i].id);
			cJSON_AddNumberToObject(m, "count", (double)miss[i].count);
			cJSON_AddStringToObject(m, "text", t.data ? t.data : "");
			cJSON_AddItemToArray(arr, m);
			fg_buf_release(&t);
		}
		rc = fg_json_write(&out, root, 1, &err);
		cJSON_Delete(root);
		if (rc)
			goto fail;
	} else {
		fg_buf_printf(&out, NULL, "keepset           %s (%ld of %ld ids)\n", ks_path, (long)k, (long)full_vocab);
		fg_buf_printf(&out, NULL, "tokens            %llu, inside %llu (%.4f%%)\n",
			      (unsigned long long)cnt.tokens, inside, pctd(inside, cnt.tokens));
		fg_buf_printf(&out, NULL, "lines             %llu, wholly inside %llu (%.4f%%)\n",
			      (unsigned long long)cnt.lines, (unsigned long long)cnt.lines_inside,
			      pctd(cnt.lines_inside, cnt.lines));
		fg_buf_printf(&out, NULL, "distinct tokens   %llu seen, %zu missing\n", seen, n_miss);
		if (n_miss && top)
			fg_buf_printf(&out, NULL, "most frequent missing tokens:\n%10s %10s  %s\n", "count", "id", "text");
		for (i = 0; i < n_miss && i < (size_t)top; i++) {
			struct fg_buf t = FG_BUF_INIT;

			missing_text(tok, miss[i].id, &t);
			fg_buf_printf(&out, NULL, "%10llu %10ld  ", (unsigned long long)miss[i].count, (long)miss[i].id);
			fg_buf_json_str(&out, t.data ? t.data : "", t.len, NULL);
			fg_buf_putc(&out, '\n', NULL);
			fg_buf_release(&t);
		}
	}
	fwrite(out.data, 1, out.len, stdout);
	if (pctd(inside, cnt.tokens) < threshold)
		fprintf(stderr, "fgpack keepset: warning: token coverage %.4f%% is below %.4f%%: %zu distinct tokens of this corpus can never be emitted\n",
			pctd(inside, cnt.tokens), threshold, n_miss);
	goto done;
fail:
	rc = fg_cmd_fail("keepset", &err);
done:
	fg_buf_release(&out);
	free(miss);
	free(member);
	free(corpus);
	fg_kcount_release(&cnt);
	fg_tok_scratch_free(scr);
	fg_tokenizer_free(tok);
	return rc;
}

int cmd_keepset(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? FG_EXIT_USAGE : FG_EXIT_OK;
	}
	if (strcmp(argv[1], "report"))
		return fg_cmd_usage_error("keepset", "unknown subcommand '%s' (try 'report')", argv[1]);
	if (fg_cmd_wants_help(argc - 1, argv + 1)) {
		usage(stdout);
		return FG_EXIT_OK;
	}
	return report(argc - 1, argv + 1);
}
