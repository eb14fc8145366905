/* test_tokenizer_cuts.c - lib/tokenizer's BPE against a naive BPE written
 * here, on random merge lists over a small alphabet (ASCII, "▁", a 2-byte
 * and a 3-byte character) and random text of up to 300 characters: the
 * naive side merges the whole text as ONE word (the lowest rank first, the
 * leftmost on ties, as the reference does), so any cut the encoder makes
 * between characters that some merge could join, any difference between
 * its short-word scan and its heap, or a wrong cached word shows up as
 * different ids. Both of the encoder's paths: Gemma's normalizer (a Replace
 * of " " by "▁": words cut and cached on the raw text) and no normalizer
 * (text holding "▁" itself). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "tap.h"
#include "tokenizer.h"

#define MAXV 400
#define MAXTEXT 300

static const char *const alpha[] = { "a", "b", "c", "d", "\xe2\x96\x81", "\xc3\xa9", "\xe4\xb8\xad" };
#define NALPHA (sizeof(alpha) / sizeof(alpha[0]))

static char vocab[MAXV][64];
static int nv, nm;
static int rank_of[MAXV][MAXV], result_of[MAXV][MAXV];
static int ml[MAXV], mr[MAXV];
static unsigned long long rng_state;

static unsigned rnd(unsigned n)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(rng_state >> 33) % n;
}

static int find(const char *s)
{
	int i;

	for (i = 0; i < nv; i++)
		if (!strcmp(vocab[i], s))
			return i;
	return -1;
}

/* A random merge list: each merge joins two tokens already there into a new
 * one of at most 12 bytes; few merges make long tokens, many make pairs. */
static void make_merges(int want)
{
	int tries = 0;
	size_t i;

	nv = nm = 0;
	memset(rank_of, 0xff, sizeof(rank_of));
	for (i = 0; i < NALPHA; i++)
		snprintf(vocab[nv++], sizeof(vocab[0]), "%s", alpha[i]);
	while (nm < want && nv < MAXV && tries++ < 100000) {
		int a = (int)rnd((unsigned)nv), b = (int)rnd((unsigned)nv);
		char cat[64];

		if (strlen(vocab[a]) + strlen(vocab[b]) > 12)
			continue;
		snprintf(cat, sizeof(cat), "%s%s", vocab[a], vocab[b]);
		if (find(cat) >= 0 || rank_of[a][b] >= 0)
			continue;
		snprintf(vocab[nv], sizeof(vocab[0]), "%s", cat);
		rank_of[a][b] = nm;
		result_of[a][b] = nv;
		ml[nm] = a;
		mr[nm++] = b;
		nv++;
	}
}

static int load(struct fg_tokenizer **tok, int gemma_normalizer)
{
	struct fg_buf j = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	int i, rc = 0;

	rc |= fg_buf_puts(&j, "{\"added_tokens\":[],", &err);
	if (gemma_normalizer)
		rc |= fg_buf_puts(&j,
				  "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"},"
				  "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},"
				  "\"behavior\":\"MergedWithPrevious\",\"invert\":false},",
				  &err);
	rc |= fg_buf_puts(&j, "\"model\":{\"type\":\"BPE\",\"vocab\":{", &err);
	for (i = 0; i < nv; i++) {
		rc |= fg_buf_json_str(&j, vocab[i], strlen(vocab[i]), &err);
		rc |= fg_buf_printf(&j, &err, ":%d%s", i, i + 1 < nv ? "," : "");
	}
	rc |= fg_buf_puts(&j, "},\"merges\":[", &err);
	for (i = 0; i < nm; i++) {
		rc |= fg_buf_putc(&j, '[', &err);
		rc |= fg_buf_json_str(&j, vocab[ml[i]], strlen(vocab[ml[i]]), &err);
		rc |= fg_buf_putc(&j, ',', &err);
		rc |= fg_buf_json_str(&j, vocab[mr[i]], strlen(vocab[mr[i]]), &err);
		rc |= fg_buf_puts(&j, i + 1 < nm ? "]," : "]", &err);
	}
	rc |= fg_buf_puts(&j, "]}}", &err);
	if (!rc)
		rc = fg_tokenizer_load_mem(tok, j.data, j.len, "random merges", &err);
	if (rc)
		printf("#   load: %s\n", err.msg);
	fg_buf_release(&j);
	return rc;
}

/* The naive BPE of the whole text (chars: indices into alpha, NALPHA = " "
 * which the normalizer makes "▁"); ids into out, their number returned. */
static int naive(const int *chars, int n, int32_t *out)
{
	int s[MAXTEXT], i, k = n;

	for (i = 0; i < n; i++)
		s[i] = chars[i] == (int)NALPHA ? 4 : chars[i];
	for (;;) {
		int best = -1, br = 0;

		for (i = 0; i + 1 < k; i++) {
			int r = rank_of[s[i]][s[i + 1]];

			if (r >= 0 && (best < 0 || r < br)) {
				best = i;
				br = r;
			}
		}
		if (best < 0)
			break;
		s[best] = result_of[s[best]][s[best + 1]];
		memmove(&s[best + 1], &s[best + 2], (size_t)(k - best - 2) * sizeof(int));
		k--;
	}
	for (i = 0; i < k; i++)
		out[i] = s[i];
	return k;
}

/* Random texts, encoded with one scratch (so that cached words are reused)
 * and compared with the naive BPE; returns the number that differ. */
static int run(struct fg_tokenizer *tok, int gemma_normalizer, int texts)
{
	struct fg_tok_scratch *sc = NULL;
	struct fg_err err = { 0, "" };
	int32_t *ids = NULL, want[MAXTEXT];
	size_t cap = 0;
	int t, bad = 0;

	if (fg_tok_scratch_new(&sc, &err))
		return texts;
	for (t = 0; t < texts; t++) {
		int chars[MAXTEXT], n = 1 + (int)rnd(MAXTEXT), i, nw;
		unsigned spaces = rnd(4); /* 0: none (one long word) .. 3: many */
		char text[MAXTEXT * 3 + 1];
		size_t len = 0, n_ids = 0;

		for (i = 0; i < n; i++) {
			/* mostly few letters, so that words repeat */
			int c = rnd(8) < spaces ? (int)NALPHA : (int)rnd(rnd(3) ? 3 : NALPHA);

			if (!gemma_normalizer && c == (int)NALPHA)
				c = 4; /* the text holds "▁" itself */
			chars[i] = c;
			len += (size_t)snprintf(text + len, sizeof(text) - len, "%s",
						c == (int)NALPHA ? " " : alpha[c]);
		}
		nw = naive(chars, n, want);
		if (fg_tokenizer_encode_append(tok, sc, text, len, 0, &ids, &n_ids, &cap, &err)) {
			printf("#   encode: %s\n", err.msg);
			bad++;
			continue;
		}
		if (n_ids != (size_t)nw || memcmp(ids, want, n_ids * sizeof(int32_t))) {
			if (!bad)
				printf("#   differs on \"%.*s\" (%zu ids, naive %d)\n", (int)len, text, n_ids, nw);
			bad++;
		}
	}
	free(ids);
	fg_tok_scratch_free(sc);
	return bad;
}

int main(void)
{
	static const int sizes[] = { 6, 40, 150, 380 };
	size_t k;
	int g;

	rng_state = 20261130;
	for (g = 0; g < 2; g++)
		for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			struct fg_tokenizer *tok = NULL;
			int rep;

			for (rep = 0; rep < 3; rep++) {
				make_merges(sizes[k]);
				if (load(&tok, g)) {
					ok(0, "load %d random merges", nm);
					continue;
				}
				is_int(run(tok, g, 300), 0, "%s, %d random merges (%d ids): 300 random texts give the naive BPE's ids",
				       g ? "Gemma's normalizer" : "no normalizer", nm, nv);
				fg_tokenizer_free(tok);
			}
		}
	return tap_done();
}
