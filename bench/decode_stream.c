/* decode_stream.c - the text a streaming server rebuilds per token: the
 * whole answer decoded again at every token (what serve did) against only
 * the ids after the last boundary outside a byte run (what it does when
 * fg_tokenizer_decode_splits), for answers of N ids drawn from a
 * tokenizer's vocabulary (a fifth of them byte tokens, so runs occur), the
 * U+FFFD rule on. Prints the seconds for the whole answer each way, best of
 * 3, and checks the final texts are equal. Build and run:
 *   make build/bench/decode_stream && build/bench/decode_stream [TOKENIZER.json]
 * (default: tests/fixtures/tokenizer_tiny.json). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "tokenizer.h"

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* every token: the whole text again */
static double whole(const struct fg_tokenizer *t, const int32_t *ids, int n, struct fg_buf *out)
{
	double t0 = now_s();

	for (int i = 1; i <= n; i++) {
		fg_buf_reset(out);
		fg_tokenizer_decode_ex(t, ids, (size_t)i, FG_TOK_DECODE_REPLACE, out, NULL);
	}
	return now_s() - t0;
}

/* every token: the ids after the last boundary outside a byte run */
static double tail(const struct fg_tokenizer *t, const int32_t *ids, int n, struct fg_buf *out)
{
	double t0 = now_s();
	size_t b = 0, blen = 0;

	fg_buf_reset(out);
	for (int i = 1; i <= n; i++) {
		size_t k = (size_t)i;

		while (k > 0 && (fg_tokenizer_token_flags(t, ids[k - 1]) & FG_TOK_F_BYTE))
			k--;
		out->len = blen;
		if (k > b) {
			fg_tokenizer_decode_ex(t, ids + b, k - b, FG_TOK_DECODE_REPLACE, out, NULL);
			b = k;
			blen = out->len;
		}
		fg_tokenizer_decode_ex(t, ids + k, (size_t)i - k, FG_TOK_DECODE_REPLACE, out, NULL);
	}
	return now_s() - t0;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "tests/fixtures/tokenizer_tiny.json";
	struct fg_tokenizer *t = NULL;
	struct fg_err err = {0};
	static const int ns[] = {128, 1024, 4096};
	uint32_t x = 7;

	if (fg_tokenizer_load(&t, path, &err)) {
		fprintf(stderr, "decode_stream: %s\n", err.msg);
		return 1;
	}
	printf("tokenizer %s: vocabulary %d, decoding splits: %s\n", path, (int)fg_tokenizer_vocab_size(t),
	       fg_tokenizer_decode_splits(t) ? "yes" : "no");
	for (size_t c = 0; c < sizeof(ns) / sizeof(ns[0]); c++) {
		int n = ns[c], byte0 = fg_tokenizer_piece_to_id(t, "<0x00>", 6);
		int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
		struct fg_buf a = FG_BUF_INIT, b = FG_BUF_INIT;
		double bw = 1e9, bt = 1e9;

		for (int i = 0; i < n; i++) {
			x = x * 1103515245u + 12345u;
			ids[i] = byte0 >= 0 && (x >> 16) % 5 == 0 ? byte0 + (int32_t)((x >> 8) % 256)
								 : (int32_t)((x >> 4) % (uint32_t)fg_tokenizer_vocab_size(t));
			if (!fg_tokenizer_id_to_piece(t, ids[i], &(size_t){0}))
				ids[i] = byte0 >= 0 ? byte0 + 'a' : 0;
		}
		for (int r = 0; r < 3; r++) {
			double w = whole(t, ids, n, &a), s = tail(t, ids, n, &b);

			bw = w < bw ? w : bw;
			bt = s < bt ? s : bt;
		}
		printf("%5d ids: whole text every token %9.4f s, new ids only %9.4f s: %7.1fx; final texts %s\n", n, bw,
		       bt, bw / bt,
		       a.len == b.len && !memcmp(a.data, b.data, a.len) ? "equal"
		       : fg_tokenizer_decode_splits(t)			   ? "DIFFER"
									   : "differ (expected: serve decodes this one whole)");
		fg_buf_release(&a);
		fg_buf_release(&b);
		free(ids);
	}
	fg_tokenizer_free(t);
	return 0;
}
