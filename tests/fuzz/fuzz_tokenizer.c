/* fuzz_tokenizer.c - fuzz target for lib/tokenizer.
 * Input starting with '{': a tokenizer.json to load (must fail cleanly or
 * load and then encode and decode a fixed text). Anything else: text encoded
 * with tests/fixtures/tokenizer_tiny.json (found from the working directory or
 * $FG_TOP), which must give in-range ids, the same ids with a reused scratch as
 * with a fresh one, and decode back to the very same bytes (the fixture's
 * decoder inverts its normalizer; texts holding "▁" or the stripping token
 * <r> are exempt from that last check). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

static struct fg_tokenizer *tiny;
static struct fg_tok_scratch *shared;

static void load_tiny(void)
{
	const char *top = getenv("FG_TOP");
	char path[4096];

	snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer_tiny.json", top ? top : ".");
	if (fg_tokenizer_load(&tiny, path, NULL) || fg_tok_scratch_new(&shared, NULL)) {
		fprintf(stderr, "fuzz_tokenizer: cannot load %s\n", path);
		abort();
	}
}

static void check_text(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const uint8_t *data, size_t size,
		       int roundtrip)
{
	int32_t *a = NULL, *b = NULL;
	size_t na = 0, nb = 0, cap = 0, i;
	struct fg_buf back = FG_BUF_INIT;
	struct fg_err err = { 0, "" };

	if (fg_tokenizer_encode(t, (const char *)data, size, 0, &a, &na, &err)) {
		if (!err.msg[0])
			abort();
		return;
	}
	if (fg_tokenizer_encode_append(t, s, (const char *)data, size, 0, &b, &nb, &cap, &err) || na != nb ||
	    (na && memcmp(a, b, na * sizeof(*a))))
		abort();
	for (i = 0; i < na; i++)
		if (a[i] < 0 || a[i] >= fg_tokenizer_vocab_size(t))
			abort();
	if (fg_tokenizer_decode(t, a, na, &back, &err))
		abort();
	if (roundtrip && (back.len != size || (size && memcmp(back.data, data, size))))
		abort();
	/* as transformers decodes, with the fixture (whose pieces are UTF-8):
	 * always valid UTF-8, and the plain decode whenever that one is (every
	 * byte run then is) */
	if (t == tiny) {
		struct fg_buf hf = FG_BUF_INIT, v1 = FG_BUF_INIT, v2 = FG_BUF_INIT;

		if (fg_tokenizer_decode_ex(t, a, na, FG_TOK_DECODE_REPLACE, &hf, &err) ||
		    fg_utf8_lossy(&v1, hf.data ? hf.data : "", hf.len, &err) ||
		    fg_utf8_lossy(&v2, back.data ? back.data : "", back.len, &err))
			abort();
		if (v1.len != hf.len || (hf.len && memcmp(v1.data, hf.data, hf.len)))
			abort();
		if (v2.len == back.len && (!back.len || !memcmp(v2.data, back.data, back.len)) &&
		    (hf.len != back.len || (back.len && memcmp(hf.data, back.data, back.len))))
			abort();
		fg_buf_release(&hf);
		fg_buf_release(&v1);
		fg_buf_release(&v2);
	}
	/* a tokenizer whose decoding splits (what a streaming server relies
	 * on): the two halves' texts, cut outside a byte run, are the whole's */
	if (fg_tokenizer_decode_splits(t) && na > 1) {
		struct fg_buf whole = FG_BUF_INIT, parts = FG_BUF_INIT;
		size_t cut = na / 2;

		while (cut > 0 && (fg_tokenizer_token_flags(t, a[cut - 1]) & FG_TOK_F_BYTE) &&
		       (fg_tokenizer_token_flags(t, a[cut]) & FG_TOK_F_BYTE))
			cut--;
		for (int fl = 0; fl <= FG_TOK_DECODE_REPLACE; fl += FG_TOK_DECODE_REPLACE) {
			fg_buf_reset(&whole);
			fg_buf_reset(&parts);
			if (fg_tokenizer_decode_ex(t, a, na, fl, &whole, &err) ||
			    fg_tokenizer_decode_ex(t, a, cut, fl, &parts, &err) ||
			    fg_tokenizer_decode_ex(t, a + cut, na - cut, fl, &parts, &err) || whole.len != parts.len ||
			    (whole.len && memcmp(whole.data, parts.data, whole.len)))
				abort();
		}
		fg_buf_release(&whole);
		fg_buf_release(&parts);
	}
	fg_buf_release(&back);
	free(a);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!tiny)
		load_tiny();
	if (size && data[0] == '{') {
		struct fg_tokenizer *t = NULL;
		struct fg_tok_scratch *s = NULL;
		struct fg_err err = { 0, "" };
		static const char text[] = "hello  world <b>\n\n\xff\xc3\xa9 abc";

		if (fg_tokenizer_load_mem(&t, (const char *)data, size, "fuzz", &err)) {
			if (t || !err.msg[0])
				abort();
			return 0;
		}
		if (fg_tok_scratch_new(&s, NULL))
			abort();
		check_text(t, s, (const uint8_t *)text, sizeof(text) - 1, 0);
		fg_tok_scratch_free(s);
		fg_tokenizer_free(t);
		return 0;
	}
	check_text(tiny, shared, data, size,
		   !memmem(data, size, "\xe2\x96\x81", 3) && !memmem(data, size, "<r>", 3));
	return 0;
}
