/* test_tokenizer.c - lib/tokenizer on the hand-made tests/fixtures/tokenizer_tiny.json
 * (290 ids: specials 0-5, <unused0/1> 6-7, "\n" 8, "\n\n" 9, <0x00>..<0xFF>
 * 10-265, then ▁ a b c h e l o ab abc ▁a he ll hell hello ▁hello > < >▁ x é
 * <b> ▁▁ <r> = 266..289; merges ab, abc, ▁a, he, ll, hell, hello, ▁hello, >▁,
 * ▁▁ in that rank order). Expected ids were worked out by hand from those
 * merge ranks; the real Gemma file is compared with the JavaScript reference
 * in tests/integration/tokenizer_ref.sh. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "tap.h"
#include "tokenizer.h"

static struct fg_tokenizer *tok;

/* Encodes text and compares with the expected ids (terminated by -1). */
static int enc_is(const char *text, size_t len, int flags, const int32_t *want)
{
	int32_t *ids = NULL;
	size_t n = 0, i, wn = 0;
	struct fg_err err = { 0, "" };
	int same;

	while (want[wn] >= 0)
		wn++;
	if (fg_tokenizer_encode(tok, text, len, flags, &ids, &n, &err)) {
		printf("#   encode failed: %s\n", err.msg);
		return 0;
	}
	same = n == wn;
	for (i = 0; same && i < n; i++)
		same = ids[i] == want[i];
	if (!same) {
		printf("#   got");
		for (i = 0; i < n; i++)
			printf(" %d", ids[i]);
		printf("\n");
	}
	free(ids);
	return same;
}

#define ENC(text, flags, ...)                                                                    \
	do {                                                                                     \
		static const int32_t w_[] = { __VA_ARGS__, -1 };                                 \
		ok(enc_is(text, sizeof(text) - 1, flags, w_), "encode %s", #text);                \
	} while (0)

static int dec_flags;

static int dec_is(const int32_t *ids, size_t n, const char *want, size_t wlen)
{
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	int same;

	if (fg_tokenizer_decode_ex(tok, ids, n, dec_flags, &b, &err)) {
		printf("#   decode failed: %s\n", err.msg);
		return 0;
	}
	same = b.len == wlen && !memcmp(b.data, want, wlen);
	if (!same)
		printf("#   got \"%.*s\"\n", (int)b.len, b.data);
	fg_buf_release(&b);
	return same;
}

#define DEC(want, ...)                                                                           \
	do {                                                                                     \
		static const int32_t i_[] = { __VA_ARGS__ };                                     \
		ok(dec_is(i_, sizeof(i_) / sizeof(i_[0]), want, sizeof(want) - 1), "decode to %s", #want); \
	} while (0)

static int load_inline(struct fg_tokenizer **t, const char *json, struct fg_err *err)
{
	return fg_tokenizer_load_mem(t, json, strlen(json), "inline", err);
}

static void *thread_main(void *arg)
{
	static const char text[] = "hello hello abc <b>x\n\nhello é ü \xff";
	int32_t *first = NULL;
	size_t n0 = 0, i;
	long bad = 0;

	(void)arg;
	if (fg_tokenizer_encode(tok, text, sizeof(text) - 1, 0, &first, &n0, NULL))
		return (void *)1;
	for (i = 0; i < 2000; i++) {
		int32_t *ids = NULL;
		size_t n = 0;

		if (fg_tokenizer_encode(tok, text, sizeof(text) - 1, 0, &ids, &n, NULL) || n != n0 ||
		    memcmp(ids, first, n * sizeof(*ids)))
			bad++;
		free(ids);
	}
	free(first);
	return (void *)bad;
}

int main(void)
{
	struct fg_err err = { 0, "" };
	struct fg_tokenizer *t2 = NULL;
	int rc;

	rc = fg_tokenizer_load(&tok, "tests/fixtures/tokenizer_tiny.json", &err);
	is_int(rc, 0, "load the tiny fixture (%s)", err.msg);
	if (rc)
		return tap_done();
	is_int(fg_tokenizer_vocab_size(tok), 290, "vocabulary size");
	is_int(fg_tokenizer_merge_count(tok), 10, "merges");
	is_int(fg_tokenizer_bos_id(tok), 2, "bos from the template");
	is_int(fg_tokenizer_eos_id(tok), 1, "eos");
	is_int(fg_tokenizer_unk_id(tok), 3, "unk");
	is_int(fg_tokenizer_byte_id(tok, 0x41), 10 + 0x41, "byte token <0x41>");
	is_int(fg_tokenizer_piece_to_id(tok, "hello", 5), 280, "piece to id");
	is_int(fg_tokenizer_token_flags(tok, 4), FG_TOK_F_ADDED | FG_TOK_F_SPECIAL, "<start_of_turn> flags");
	is_int(fg_tokenizer_token_flags(tok, 6), FG_TOK_F_ADDED, "<unused0> is added, not special");
	is_int(fg_tokenizer_token_flags(tok, 10), FG_TOK_F_BYTE, "<0x00> is a byte token");
	ok(fg_tokenizer_newline_cuts(tok), "newline runs are safe cut points");
	/* but <r> strips what precedes it, newline runs too: "x\n<r>" is x <r>
	 * whole (x \n alone), so fgpack tokenize does not stream this one */
	ok(fg_tokenizer_lstrip_any(tok), "an added token strips what precedes it");
	ENC("x\n<r>", 0, 285, 289);
	{
		size_t len = 0;
		const char *p = fg_tokenizer_id_to_piece(tok, 281, &len);

		ok(p && len == 8 && !memcmp(p, "\xe2\x96\x81hello", 8), "id to piece");
		ok(!fg_tokenizer_id_to_piece(tok, 290, NULL), "no piece beyond the vocabulary");
		ok(!fg_tokenizer_id_to_piece(tok, -1, NULL), "no piece for a negative id");
	}

	/* merges by rank */
	ENC("hello", 0, 280);
	ENC(" hello", 0, 281);
	ENC("abc", 0, 275);
	ENC("ab", 0, 274);
	ENC("cab", 0, 269, 274);
	ENC(" a", 0, 276);
	{
		static const int32_t none[] = { -1 };

		ok(enc_is("", 0, 0, none), "encode the empty text: no ids");
	}
	/* byte fallback: w, r, d are not in the vocabulary */
	ENC("hello world", 0, 280, 266, 10 + 'w', 273, 10 + 'r', 272, 10 + 'd');
	ENC("\xc3\xa9", 0, 286);                 /* é is a token */
	ENC("\xc3\xbc", 0, 10 + 0xc3, 10 + 0xbc); /* ü falls back to its bytes */
	ENC("\xff", 0, 10 + 0xff);               /* invalid UTF-8 keeps its byte */
	ENC("a\xe2\x96", 0, 267, 10 + 0xe2, 10 + 0x96);
	/* added tokens: longest match first, before normalization */
	ENC("<b>x", 0, 287, 285);
	ENC("a\n\nb", 0, 267, 9, 268);
	ENC("a\n\n\nb", 0, 267, 9, 8, 268);
	ENC("<start_of_turn>hello<end_of_turn>", 0, 4, 280, 5);
	ENC("<bos", 0, 283, 268, 273, 10 + 's');
	ENC("\xe2\x96\x81\xe2\x96\x81", 0, 288); /* raw "▁▁" */
	/* lstrip / rstrip of <r> eat the whitespace beside it */
	ENC("a  <r>  b", 0, 267, 289, 268);
	ENC("a \t<r>\n", 0, 267, 289); /* as the reference: the "\n" token is trimmed away too */
	ENC("a<r> \n\nb", 0, 267, 289, 9, 268);
	/* a ">" glues to the "▁" after it (merge ">▁"), an "x" does not */
	ENC(">  a", 0, 284, 276);
	ENC("x a", 0, 285, 276);
	ENC("a  a", 0, 267, 266, 276);
	/* template */
	ENC("abc", FG_TOK_ADD_SPECIAL, 2, 275);
	ENC("", FG_TOK_ADD_SPECIAL, 2);

	DEC("hello", 280);
	DEC(" hello", 281);
	DEC("w", 10 + 'w');
	DEC("\xc3\xbc", 10 + 0xc3, 10 + 0xbc);
	DEC("\xff", 10 + 0xff);
	DEC("<bos> hello<end_of_turn>\n\n", 2, 281, 5, 9);
	DEC("  a", 288, 267);
	/* as transformers decodes: a byte run that is not UTF-8 gives one
	 * U+FFFD per byte token, valid bytes of it included; a valid run its
	 * bytes; any other token ends a run */
	dec_flags = FG_TOK_DECODE_REPLACE;
	DEC("\xc3\xbc", 10 + 0xc3, 10 + 0xbc);
	DEC("\xef\xbf\xbd", 10 + 0xff);
	DEC("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 10 + 0xc3, 10 + 0xbc, 10 + 0xff);
	DEC("\xef\xbf\xbdhello\xc3\xbc", 10 + 0xc3, 280, 10 + 0xc3, 10 + 0xbc);
	DEC("\xef\xbf\xbd<bos>\xef\xbf\xbd", 10 + 0xc3, 2, 10 + 0xbc);
	DEC("\xef\xbf\xbd\xef\xbf\xbd", 10 + 0xf0, 10 + 0x9f);
	DEC("w\0", 10 + 'w', 10);
	dec_flags = 0;
	/* decoding splits (what a streaming server relies on): the text of a
	 * sequence is the text of its two parts, cut anywhere but inside a run
	 * of byte tokens, with and without the U+FFFD rule */
	{
		uint32_t x = 12345;
		int cuts = 0, bad = 0;

		ok(fg_tokenizer_decode_splits(tok) == 1, "Replace, ByteFallback, Fuse: decoding splits");
		for (int round = 0; round < 400; round++) {
			int32_t ids[12];
			int n = 1 + (int)(x % 12);

			for (int i = 0; i < n; i++) {
				x = x * 1103515245u + 12345u;
				/* half byte tokens (10..265), half others */
				ids[i] = (x >> 16) & 1 ? 10 + (int32_t)((x >> 8) % 256) : (int32_t)((x >> 4) % 290);
			}
			for (int fl = 0; fl <= FG_TOK_DECODE_REPLACE; fl += FG_TOK_DECODE_REPLACE) {
				struct fg_buf whole = FG_BUF_INIT, parts = FG_BUF_INIT;

				fg_tokenizer_decode_ex(tok, ids, (size_t)n, fl, &whole, NULL);
				for (int b = 1; b < n; b++) {
					int byte_a = ids[b - 1] >= 10 && ids[b - 1] < 266, byte_b = ids[b] >= 10 && ids[b] < 266;

					if (byte_a && byte_b)
						continue;
					fg_buf_reset(&parts);
					fg_tokenizer_decode_ex(tok, ids, (size_t)b, fl, &parts, NULL);
					fg_tokenizer_decode_ex(tok, ids + b, (size_t)(n - b), fl, &parts, NULL);
					cuts++;
					bad += parts.len != whole.len || memcmp(parts.data, whole.data, whole.len);
				}
				fg_buf_release(&whole);
				fg_buf_release(&parts);
			}
		}
		ok(cuts > 500 && bad == 0, "decoded in two parts = decoded whole at %d cuts outside byte runs (%d differ)",
		   cuts, bad);
	}
	{
		static const int32_t bad[] = { 280, 290 };
		struct fg_buf b = FG_BUF_INIT;

		rc = fg_tokenizer_decode(tok, bad, 2, &b, &err);
		ok(rc == FG_EINVAL && strstr(err.msg, "290"), "decode refuses an id outside the vocabulary");
		fg_buf_release(&b);
	}

	/* lossy UTF-8 for display: maximal subparts become one U+FFFD each */
	{
		static const struct {
			const char *in, *out;
		} u8[] = {
			{ "a\xc3\xa9", "a\xc3\xa9" },
			{ "\xff", "\xef\xbf\xbd" },
			{ "x\xe2\x96", "x\xef\xbf\xbd" },
			{ "\xe2\x96" "a", "\xef\xbf\xbd" "a" },
			{ "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
			{ "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd" },
			{ "\xf0\x9f\x98", "\xef\xbf\xbd" },
			{ "\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
			{ "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80" },
		};
		size_t i;

		for (i = 0; i < sizeof(u8) / sizeof(u8[0]); i++) {
			struct fg_buf b = FG_BUF_INIT;

			fg_utf8_lossy(&b, u8[i].in, strlen(u8[i].in), NULL);
			ok(b.data && !strcmp(b.data, u8[i].out), "lossy UTF-8 case %zu", i);
			fg_buf_release(&b);
		}
	}

	/* several threads encode with one tokenizer */
	{
		pthread_t th[4];
		long bad = 0;
		int i;

		for (i = 0; i < 4; i++)
			pthread_create(&th[i], NULL, thread_main, NULL);
		for (i = 0; i < 4; i++) {
			void *r;

			pthread_join(th[i], &r);
			bad += (long)r;
		}
		is_int(bad, 0, "4 threads encoding at once agree");
	}

	/* other configurations */
	rc = load_inline(&t2,
			 "{\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,"
			 "\"vocab\":{\"<unk>\":0,\"a\":1,\"b\":2,\"ab\":3},\"merges\":[\"a b\"]},"
			 "\"decoder\":{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}}",
			 &err);
	is_int(rc, 0, "old-style \"a b\" merges, no byte fallback (%s)", err.msg);
	if (!rc) {
		int32_t *ids = NULL;
		size_t n = 0;
		struct fg_buf b = FG_BUF_INIT;
		static const int32_t two[] = { 3, 1 };

		rc = fg_tokenizer_encode(t2, "xyzab", 5, 0, &ids, &n, &err);
		ok(!rc && n == 2 && ids[0] == 0 && ids[1] == 3, "fuse_unk joins unknown pieces into one <unk>");
		free(ids);
		{
			/* one scratch for two tokenizers: its caches must not leak
			 * tok's "ab" (274) into t2, where "ab" is 3 */
			struct fg_tok_scratch *s = NULL;
			size_t cap = 0;

			ids = NULL;
			n = 0;
			rc = fg_tok_scratch_new(&s, &err) || fg_tokenizer_encode_append(tok, s, "ab", 2, 0, &ids, &n, &cap, &err) ||
			     fg_tokenizer_encode_append(t2, s, "ab", 2, 0, &ids, &n, &cap, &err) ||
			     fg_tokenizer_encode_append(tok, s, "ab", 2, 0, &ids, &n, &cap, &err);
			ok(!rc && n == 3 && ids[0] == 274 && ids[1] == 3 && ids[2] == 274,
			   "a scratch moved between tokenizers forgets what it cached");
			free(ids);
			fg_tok_scratch_free(s);
		}
		fg_tokenizer_decode(t2, two, 2, &b, NULL);
		is_str(b.data, "aba", "Strip decoder leaves pieces without a leading space alone");
		ok(fg_tokenizer_decode_splits(t2) == 1, "a Strip of each piece (no Fuse): decoding splits");
		fg_buf_release(&b);
		fg_tokenizer_free(t2);
	}
	rc = load_inline(&t2,
			 "{\"model\":{\"type\":\"BPE\",\"vocab\":{\" \":0,\"a\":1},\"merges\":[]},"
			 "\"decoder\":{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":1}}",
			 &err);
	if (!rc) {
		static const int32_t ids[] = { 0, 0, 1, 0 };
		struct fg_buf b = FG_BUF_INIT;

		fg_tokenizer_decode(t2, ids, 4, &b, NULL);
		is_str(b.data, "a", "Strip decoder without Fuse strips each piece");
		fg_tokenizer_free(t2);
		t2 = NULL;
		rc = load_inline(&t2,
				 "{\"model\":{\"type\":\"BPE\",\"vocab\":{\" \":0,\"a\":1},\"merges\":[]},"
				 "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Fuse\"},"
				 "{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]}}",
				 &err);
		ok(!rc && !fg_tokenizer_decode_splits(t2),
		   "a Strip after Fuse (Llama's leading space) acts on the whole text: decoding does not split %s",
		   rc ? err.msg : "");
		fg_buf_release(&b);
		fg_tokenizer_free(t2);
	} else {
		ok(0, "Strip decoder fixture loads (%s)", err.msg);
	}
	t2 = NULL;
	rc = load_inline(&t2, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":null}}", &err);
	ok(rc == FG_EFORMAT && strstr(err.msg, "model.merges: expected a list of merges"),
	   "merges null: refused naming model.merges (%s)", err.msg);
	fg_tokenizer_free(t2);
	rc = load_inline(&t2, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[]}}", &err);
	if (!rc) {
		static const int32_t ids[] = { 0, 1, 0 };
		struct fg_buf b = FG_BUF_INIT;

		fg_tokenizer_decode(t2, ids, 3, &b, NULL);
		is_str(b.data, "a b a", "no decoder: pieces joined by spaces");
		ok(!fg_tokenizer_decode_splits(t2), "no decoder: decoding does not split (the joining spaces)");
		fg_buf_release(&b);
		fg_tokenizer_free(t2);
	} else {
		ok(0, "decoder-less fixture loads (%s)", err.msg);
	}
	rc = load_inline(&t2,
			 "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"_\"},"
			 "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"_\"}]},"
			 "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\"_\"},\"behavior\":\"MergedWithNext\",\"invert\":false},"
			 "\"model\":{\"type\":\"BPE\",\"vocab\":{\"_\":0,\"a\":1,\"_a\":2,\"aa\":3},\"merges\":[[\"a\",\"a\"],[\"_\",\"a\"]]}}",
			 &err);
	is_int(rc, 0, "Prepend + Replace normalizers, MergedWithNext split (%s)", err.msg);
	if (!rc) {
		int32_t *ids = NULL;
		size_t n = 0;

		rc = fg_tokenizer_encode(t2, "aaa a", 5, 0, &ids, &n, &err);
		/* "_aaa_a" split before each "_": "_aaa" "_a"; "_aaa": aa first (rank 0) -> _ aa a */
		ok(!rc && n == 4 && ids[0] == 0 && ids[1] == 3 && ids[2] == 1 && ids[3] == 2,
		   "pre-tokenized pieces are merged separately");
		free(ids);
		fg_tokenizer_free(t2);
	}

	/* escapes in pieces and merges, both merge forms, added_tokens null, an
	 * added token whose content holds a NUL */
	rc = load_inline(&t2,
			 "{\"added_tokens\":null,\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,"
			 "\"\\u00e9\":3,\"\\u00e9a\":4,\"\\\"\":5,\"\\\"\\\"\":6},"
			 "\"merges\":[\"\\u0061 b\",[\"\u00e9\",\"a\"],[\"\\\"\",\"\\\"\"]]}}",
			 &err);
	is_int(rc, 0, "escaped pieces and merges load (%s)", err.msg);
	if (!rc) {
		int32_t *ids = NULL;
		size_t n = 0;

		rc = fg_tokenizer_encode(t2, "ab\xc3\xa9" "a\"\"", 7, 0, &ids, &n, &err);
		ok(!rc && n == 3 && ids[0] == 2 && ids[1] == 4 && ids[2] == 6, "merges given with escapes apply");
		free(ids);
		fg_tokenizer_free(t2);
	}
	rc = load_inline(&t2,
			 "{\"added_tokens\":[{\"id\":2,\"content\":\"x\\u0000y\",\"special\":true,\"lstrip\":null}],"
			 "\"model\":{\"type\":\"BPE\",\"vocab\":{\"x\":0,\"y\":1},\"merges\":[]}}",
			 &err);
	is_int(rc, 0, "an added token holding a NUL loads (%s)", err.msg);
	if (!rc) {
		int32_t *ids = NULL;
		size_t n = 0;

		rc = fg_tokenizer_encode(t2, "yx\0yx", 5, 0, &ids, &n, &err);
		ok(!rc && n == 3 && ids[0] == 1 && ids[1] == 2 && ids[2] == 0, "it is matched, NUL and all");
		is_int(fg_tokenizer_token_flags(t2, 2), FG_TOK_F_ADDED | FG_TOK_F_SPECIAL, "and is special");
		free(ids);
		fg_tokenizer_free(t2);
	}

	/* what we refuse, by name */
	{
		static const struct {
			const char *json, *word;
		} bad[] = {
			{ "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}", "WordPiece" },
			{ "{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",0]]}}", "Unigram" },
			{ "{\"normalizer\":{\"type\":\"NFC\"},\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", "NFC" },
			{ "{\"pre_tokenizer\":{\"type\":\"Metaspace\"},\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", "Metaspace" },
			{ "{\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", "ByteLevel" },
			{ "{\"post_processor\":{\"type\":\"RobertaProcessing\"},\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", "RobertaProcessing" },
			{ "{\"model\":{\"type\":\"BPE\",\"dropout\":0.1,\"vocab\":{},\"merges\":[]}}", "dropout" },
			{ "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[[\"a\",\"a\"]]}}", "not in the vocabulary" },
			{ "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[[\"a\",\"b\"]]}}", "'b' is not in the vocabulary" },
			{ "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a b c\"]}}", "two pieces" },
			{ "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}", "out of range" },
			{ "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}", "expected" },
			{ "[1,2]", "not a JSON object" },
			{ "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}} x", "trailing" },
			{ "{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\"},{\"type\":\"ByteLevel\"}]},"
			  "\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", "(Split, ByteLevel) is not supported" },
			{ "{\"added_tokens\":{},\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", "added_tokens is not a list" },
			{ "{\"added_tokens\":[{\"content\":\"x\"}],\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", "needs content and a valid id" },
			{ "{\"added_tokens\":[7],\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", "added_tokens[0]" },
		};
		size_t i;

		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			t2 = NULL;
			fg_err_clear(&err);
			rc = load_inline(&t2, bad[i].json, &err);
			ok(rc != 0 && !t2 && strstr(err.msg, bad[i].word), "refused: %s (%s)", bad[i].word, err.msg);
			fg_tokenizer_free(t2);
		}
	}
	fg_tokenizer_free(tok);
	return tap_done();
}
