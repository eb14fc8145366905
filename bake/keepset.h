/* keepset.h - LM-head keepsets: which token ids a pruned head keeps.
 *
 * A corpus (text files, or .jsonl files of token-id arrays, one array per
 * line) is counted token by token; the keepset is the always-kept tokens
 * (special tokens except <unusedN> placeholders, the chat-turn tokens, the
 * 256 byte-fallback tokens, ids the caller names) filled up to K with the
 * most frequent other tokens, ties broken by the lower id. The same counting
 * drives `fgpack keepset report`, which measures how much of a corpus a
 * keepset covers. docs/formats/keepset.md describes the file. */
#ifndef FG_KEEPSET_H
#define FG_KEEPSET_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "sha256.h"
#include "tokenizer.h"

#define FG_KEEPSET_SCHEMA "fgpack.keepset/1"

/* Counts over a corpus. counts has vocab entries. When member is set (a
 * keepset as one byte per id), lines wholly inside it are counted too. */
struct fg_kcount {
	int32_t vocab;
	uint64_t *counts;
	uint64_t tokens, lines, lines_inside;
	const unsigned char *member; /* borrowed; may be NULL */
};

/* What one corpus file was. */
struct fg_kinput {
	char sha256[FG_SHA256_HEX_LEN + 1];
	unsigned long long bytes, tokens, lines;
	int jsonl; /* 1: token-id arrays, 0: text */
};

int fg_kcount_init(struct fg_kcount *c, int32_t vocab, struct fg_err *err);
void fg_kcount_release(struct fg_kcount *c);

/* Adds path to c: a ".jsonl" file is read as one JSON array of ids per line
 * (ids outside 0..vocab-1 are an error); anything else is UTF-8 text, encoded
 * without special tokens, a line being the text up to and including its
 * newline run (exact whole-text ids where fg_tokenizer_newline_cuts holds,
 * otherwise the whole file is one line). info may be NULL. */
int fg_kcount_file(struct fg_kcount *c, const struct fg_tokenizer *tok, struct fg_tok_scratch *s,
		   const char *path, struct fg_kinput *info, struct fg_err *err);

/* The always-kept tokens, sorted unique, into *ids (caller frees): special
 * added tokens except <unusedN>, chat-turn tokens found by name, the byte
 * tokens, and always[0..n_always). Ids at or above full_vocab are refused for
 * always[] and left out otherwise. chat (may be NULL) receives how many
 * chat-turn tokens were found; specials and bytes likewise. */
int fg_keepset_always(int32_t **ids, size_t *n, const struct fg_tokenizer *tok, int32_t full_vocab,
		      const int32_t *always, size_t n_always, size_t *specials, size_t *chat,
		      size_t *bytes, struct fg_err *err);

/* True for "<unusedN>" placeholder pieces. */
int fg_keepset_is_placeholder(const char *piece, size_t len);

/* Chooses K ids: the always-kept ones, then by count (highest first, lower id
 * on ties) among ids below full_vocab with a piece; tokens never seen in the
 * corpus come last and <unusedN> placeholders not at all. Refuses K above
 * full_vocab or below the always-kept count. *keep is sorted (caller frees). */
int fg_keepset_select(int32_t **keep, const struct fg_tokenizer *tok, const uint64_t *counts,
		      int32_t full_vocab, int32_t k, const int32_t *always, size_t n_always,
		      struct fg_err *err);

/* Reads a keepset file (ours or the challenge's pck04 form): keep_ids sorted,
 * unique, below full_vocab (and below vocab when vocab > 0), its length equal
 * to pruned_vocab_K when that is present. *member gets one byte per id in
 * 0..vocab-1 (caller frees); *k and *full_vocab the sizes. */
int fg_keepset_read(unsigned char **member, int32_t *k, int32_t *full_vocab, const char *path,
		    int32_t vocab, struct fg_err *err);

#endif
