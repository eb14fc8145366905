/* fuzz_keepset.c - fuzz target for what fgpack reads of keepsets and
 * corpora, through a file as the real path does ($TMPDIR). The first byte
 * picks: a keepset file (fg_keepset_read, ours or the challenge's form,
 * against a vocabulary of 0 or 300), a .jsonl corpus of token-id arrays or a
 * text corpus (fg_kcount_file, tokenizer tests/fixtures/tokenizer_tiny.json
 * from the working directory or $FG_TOP). A keepset read either fails with a
 * one-line message and no member table, or gives K >= 1 ids, all below
 * full_vocab, that the member table holds exactly; a corpus either fails in
 * one line or adds as many tokens to the counts as it says it did. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bake/keepset.h"
#include "fsutil.h"

static struct fg_tokenizer *tiny;
static struct fg_tok_scratch *scratch;
static char dir[4096];

/* the private folder goes when the run ends (make test replays every time) */
static void cleanup(void)
{
	fg_rm_tree(dir);
}

static void setup(void)
{
	const char *top = getenv("FG_TOP"), *tmp = getenv("TMPDIR");
	char path[4096];

	snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer_tiny.json", top ? top : ".");
	snprintf(dir, sizeof(dir), "%s/fuzz_keepset.XXXXXX", tmp ? tmp : "/tmp");
	if (fg_tokenizer_load(&tiny, path, NULL) || fg_tok_scratch_new(&scratch, NULL) || !mkdtemp(dir) ||
	    atexit(cleanup)) {
		fprintf(stderr, "fuzz_keepset: cannot load %s or make a folder\n", path);
		abort();
	}
}

static void put(const char *path, const uint8_t *data, size_t size)
{
	FILE *f = fopen(path, "wb");

	if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f))
		abort();
}

static void keepset(const char *path, int32_t vocab)
{
	unsigned char *member = NULL;
	int32_t k = -1, fv = -1, i, n = 0;
	struct fg_err err = { 0, "" };

	if (fg_keepset_read(&member, &k, &fv, path, vocab, &err)) {
		if (member || !err.msg[0] || strchr(err.msg, '\n'))
			abort();
		return;
	}
	if (!member || k < 1 || fv < 1 || fv > (1 << 26) || k > fv)
		abort();
	for (i = 0; i < (vocab > fv ? vocab : fv); i++)
		if (member[i]) {
			if (i >= fv)
				abort();
			n++;
		}
	if (n != k)
		abort();
	free(member);
}

static void corpus(const char *path)
{
	struct fg_kcount c;
	struct fg_kinput info;
	struct fg_err err = { 0, "" };
	uint64_t sum = 0;
	int32_t i;

	if (fg_kcount_init(&c, fg_tokenizer_vocab_size(tiny), NULL))
		abort();
	if (fg_kcount_file(&c, tiny, scratch, path, &info, &err)) {
		if (!err.msg[0] || strchr(err.msg, '\n'))
			abort();
	} else {
		for (i = 0; i < c.vocab; i++)
			sum += c.counts[i];
		if (sum != c.tokens || info.tokens != c.tokens || info.lines != c.lines ||
		    (c.tokens && !c.lines))
			abort();
	}
	fg_kcount_release(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[4200];
	uint8_t sel;

	if (!tiny)
		setup();
	if (size < 1)
		return 0;
	sel = data[0] % 4;
	snprintf(path, sizeof(path), "%s/in%s", dir, sel < 2 ? ".json" : sel == 2 ? ".jsonl" : ".txt");
	put(path, data + 1, size - 1);
	if (sel < 2)
		keepset(path, sel ? 300 : 0);
	else
		corpus(path);
	unlink(path);
	return 0;
}
