/* test_keepset.c - bake/keepset on a toy corpus whose figures were worked out
 * by hand with tests/fixtures/tokenizer_tiny.json (see test_tokenizer.c for
 * its ids):
 *   c1.txt   "hello hello\nabc\nhello x\n"  -> lines [280 281 8] [275 8]
 *            [280 266 285 8]: 9 tokens, 3 lines
 *   c2.jsonl "[280, 267]\n\n[267]\n"         -> 3 tokens, 2 lines
 * counts: 280:3 8:3 267:2 266:1 275:1 281:1 285:1 (12 tokens, 5 lines).
 * Always kept: specials 0-5 and bytes 10-265 (262 ids), plus --always 270.
 * K = 266 keeps those 263 and then 8, 280 (3 each, lower id first) and 267:
 * 8 of 12 tokens inside; lines wholly inside: the two .jsonl lines (2 of 5). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bake/keepset.h"
#include "fsutil.h"
#include "json.h"
#include "tap.h"

static char dir[] = "/tmp/fgtest_keepset.XXXXXX";

static const char *path_of(const char *name)
{
	static char p[4][256];
	static int k;

	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
	return p[k];
}

static void put(const char *name, const char *text)
{
	fg_file_write_atomic(path_of(name), text, strlen(text), 0644, NULL);
}

static int contains(const int32_t *v, size_t n, int32_t id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] == id)
			return 1;
	return 0;
}

int main(void)
{
	struct fg_err err = { 0, "" };
	struct fg_tokenizer *tok = NULL;
	struct fg_tok_scratch *s = NULL;
	struct fg_kcount c;
	struct fg_kinput info;
	int32_t *always = NULL, *keep = NULL, *keep2 = NULL, extra = 270;
	size_t n_always = 0, ns = 0, nc = 0, nb = 0, i;
	int rc;

	if (!mkdtemp(dir))
		return 1;
	rc = fg_tokenizer_load(&tok, "tests/fixtures/tokenizer_tiny.json", &err);
	is_int(rc, 0, "load the tiny tokenizer (%s)", err.msg);
	if (rc)
		return tap_done();
	fg_tok_scratch_new(&s, NULL);
	put("c1.txt", "hello hello\nabc\nhello x\n");
	put("c2.jsonl", "[280, 267]\n\n[267]\n");
	put("empty.txt", "");
	put("bad.jsonl", "[1, 2]\n[3, 290]\n");
	put("bad2.jsonl", "[1, 2\n");

	is_int(fg_kcount_init(&c, fg_tokenizer_vocab_size(tok), &err), 0, "count init");
	rc = fg_kcount_file(&c, tok, s, path_of("c1.txt"), &info, &err);
	is_int(rc, 0, "count a text file (%s)", err.msg);
	is_int(info.tokens, 9, "text: 9 tokens");
	is_int(info.lines, 3, "text: 3 lines");
	is_int(info.bytes, 24, "text: 24 bytes");
	ok(!info.jsonl && fg_sha256_hex_valid(info.sha256), "text: kind and digest");
	rc = fg_kcount_file(&c, tok, s, path_of("c2.jsonl"), &info, &err);
	is_int(rc, 0, "count a .jsonl file (%s)", err.msg);
	is_int(info.tokens, 3, "jsonl: 3 tokens");
	is_int(info.lines, 2, "jsonl: 2 lines (the blank one skipped)");
	ok(info.jsonl, "jsonl: kind");
	is_int(c.tokens, 12, "12 tokens in all");
	is_int(c.lines, 5, "5 lines in all");
	is_int(c.counts[280], 3, "count of 'hello'");
	is_int(c.counts[8], 3, "count of newline");
	is_int(c.counts[267], 2, "count of 'a'");
	is_int(c.counts[281] + c.counts[275] + c.counts[266] + c.counts[285], 4, "the four singletons");

	rc = fg_keepset_always(&always, &n_always, tok, 290, &extra, 1, &ns, &nc, &nb, &err);
	is_int(rc, 0, "always-kept set");
	is_int(n_always, 263, "263 always kept");
	is_int(ns, 6, "6 special tokens (no <unusedN>)");
	is_int(nc, 2, "2 chat-turn tokens found by name");
	is_int(nb, 256, "256 byte tokens");
	ok(!contains(always, n_always, 6) && !contains(always, n_always, 7), "<unused0>, <unused1> not kept");
	ok(contains(always, n_always, 270), "--always id kept");

	rc = fg_keepset_select(&keep, tok, c.counts, 290, 266, always, n_always, &err);
	is_int(rc, 0, "select K=266 (%s)", err.msg);
	if (!rc) {
		ok(contains(keep, 266, 8) && contains(keep, 266, 280) && contains(keep, 266, 267),
		   "the 3 most frequent: newline, hello, a");
		ok(!contains(keep, 266, 281) && !contains(keep, 266, 266), "singletons left out");
		for (i = 1; i < 266 && keep[i - 1] < keep[i]; i++)
			;
		is_int(i, 266, "keep_ids sorted and unique");
	}
	rc = fg_keepset_select(&keep2, tok, c.counts, 290, 266, always, n_always, &err);
	ok(!rc && !memcmp(keep, keep2, 266 * sizeof(*keep)), "deterministic");
	free(keep2);
	keep2 = NULL;
	rc = fg_keepset_select(&keep2, tok, c.counts, 290, 267, always, n_always, &err);
	ok(!rc && contains(keep2, 267, 266) && !contains(keep2, 267, 275), "K=267: ties by lower id (266)");
	free(keep2);
	keep2 = NULL;
	rc = fg_keepset_select(&keep2, tok, c.counts, 290, 288, always, n_always, &err);
	ok(!rc && !contains(keep2, 288, 6), "K=288 fills with unseen tokens, never <unusedN>");
	free(keep2);
	keep2 = NULL;
	rc = fg_keepset_select(&keep2, tok, c.counts, 290, 289, always, n_always, &err);
	ok(rc == FG_EINVAL && strstr(err.msg, "288"), "K=289 refused: only 288 can be kept (%s)", err.msg);
	rc = fg_keepset_select(&keep2, tok, c.counts, 290, 291, always, n_always, &err);
	ok(rc == FG_EINVAL && strstr(err.msg, "full vocabulary"), "K above the vocabulary refused");
	rc = fg_keepset_select(&keep2, tok, c.counts, 290, 262, always, n_always, &err);
	ok(rc == FG_EINVAL && strstr(err.msg, "always kept"), "K below the always-kept count refused");
	fg_kcount_release(&c);

	/* the report's figures on the same corpus */
	{
		unsigned char member[290] = { 0 };
		unsigned long long inside = 0;

		for (i = 0; i < 266; i++)
			member[keep[i]] = 1;
		fg_kcount_init(&c, 290, NULL);
		c.member = member;
		fg_kcount_file(&c, tok, s, path_of("c1.txt"), NULL, NULL);
		fg_kcount_file(&c, tok, s, path_of("c2.jsonl"), NULL, NULL);
		for (i = 0; i < 290; i++)
			if (member[i])
				inside += c.counts[i];
		is_int(inside, 8, "8 of 12 tokens inside");
		is_int(c.lines_inside, 2, "2 of 5 lines wholly inside");
		fg_kcount_release(&c);
	}

	/* newline cuts give the ids of the whole text */
	{
		static const char text[] = "hello\n\n\nabc x\n hello\n\n<b>a\n";
		int32_t *ids = NULL;
		size_t n = 0;
		uint64_t whole[290] = { 0 };
		int same = 1;

		put("nl.txt", text);
		fg_tokenizer_encode(tok, text, sizeof(text) - 1, 0, &ids, &n, NULL);
		for (i = 0; i < n; i++)
			whole[ids[i]]++;
		fg_kcount_init(&c, 290, NULL);
		fg_kcount_file(&c, tok, s, path_of("nl.txt"), NULL, NULL);
		for (i = 0; i < 290; i++)
			same &= c.counts[i] == whole[i];
		ok(same && c.tokens == n, "line-by-line counting equals whole-text encoding");
		is_int(c.lines, 4, "4 lines (newline runs end a line)");
		free(ids);
		fg_kcount_release(&c);
	}

	/* bad corpora */
	fg_kcount_init(&c, 290, NULL);
	rc = fg_kcount_file(&c, tok, s, path_of("bad.jsonl"), NULL, &err);
	ok(rc == FG_EINVAL && strstr(err.msg, ":2:") && strstr(err.msg, "290"), "id outside the vocabulary refused with its line (%s)", err.msg);
	rc = fg_kcount_file(&c, tok, s, path_of("bad2.jsonl"), NULL, &err);
	ok(rc == FG_EFORMAT, "malformed .jsonl refused (%s)", err.msg);
	rc = fg_kcount_file(&c, tok, s, path_of("missing.txt"), NULL, &err);
	ok(rc == FG_EIO, "missing file refused");
	fg_kcount_release(&c);
	fg_kcount_init(&c, 290, NULL);
	rc = fg_kcount_file(&c, tok, s, path_of("empty.txt"), NULL, &err);
	ok(rc == 0 && c.tokens == 0 && c.lines == 0, "an empty file counts nothing");
	fg_kcount_release(&c);

	/* reading keepsets */
	{
		unsigned char *m = NULL;
		int32_t k = 0, fv = 0;

		put("pck.json", "{\"keep_ids\": [0, 2, 5], \"pruned_vocab_K\": 3, \"full_vocab\": 290, \"note\": \"x\"}");
		rc = fg_keepset_read(&m, &k, &fv, path_of("pck.json"), 290, &err);
		ok(!rc && k == 3 && fv == 290 && m[0] && !m[1] && m[2] && m[5], "read a pck04-style keepset");
		free(m);
		m = NULL;
		put("unsorted.json", "{\"keep_ids\": [0, 5, 2], \"full_vocab\": 290}");
		rc = fg_keepset_read(&m, &k, &fv, path_of("unsorted.json"), 290, &err);
		ok(rc == FG_EFORMAT && strstr(err.msg, "sorted"), "unsorted keep_ids refused");
		put("kbad.json", "{\"keep_ids\": [0, 2], \"pruned_vocab_K\": 3, \"full_vocab\": 290}");
		rc = fg_keepset_read(&m, &k, &fv, path_of("kbad.json"), 290, &err);
		ok(rc == FG_EFORMAT && strstr(err.msg, "pruned_vocab_K"), "K that disagrees with keep_ids refused");
		put("range.json", "{\"keep_ids\": [0, 300], \"full_vocab\": 290}");
		rc = fg_keepset_read(&m, &k, &fv, path_of("range.json"), 290, &err);
		ok(rc == FG_EFORMAT, "id beyond full_vocab refused");
	}

	free(keep);
	free(always);
	fg_tok_scratch_free(s);
	fg_tokenizer_free(tok);
	{
		const char *names[] = { "c1.txt", "c2.jsonl", "empty.txt", "bad.jsonl", "bad2.jsonl", "nl.txt",
					"pck.json", "unsorted.json", "kbad.json", "range.json" };

		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			unlink(path_of(names[i]));
		rmdir(dir);
	}
	return tap_done();
}
