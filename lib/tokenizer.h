/* tokenizer.h - Hugging Face tokenizer.json of Gemma's kind: byte-fallback BPE
 * with merge ranks, Replace/Prepend normalizers, a string Split pre-tokenizer,
 * added tokens matched (longest first) before anything else, TemplateProcessing
 * for the BOS, and the Replace/ByteFallback/Fuse/Strip decoder chain.
 *
 * A loaded tokenizer is immutable: any number of threads may encode and decode
 * with it at once. Encoding keeps its working memory in a struct fg_tok_scratch
 * (one per thread; the plain calls make a fresh one each time). A tokenizer.json
 * of another kind (WordPiece, Unigram, ByteLevel, regex patterns, NFC...) is
 * refused at load time with a message naming what is not supported.
 * docs/tokenizer.md has the support matrix and where we differ from others. */
#ifndef FG_TOKENIZER_H
#define FG_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

struct fg_tokenizer;
struct fg_tok_scratch;

/* Flags for encoding. */
enum {
	FG_TOK_ADD_SPECIAL = 1, /* apply the post-processor template (Gemma: <bos> first) */
};

/* Per-token attributes, from fg_tokenizer_token_flags. */
enum {
	FG_TOK_F_ADDED = 1,   /* listed in added_tokens */
	FG_TOK_F_SPECIAL = 2, /* added token with "special": true */
	FG_TOK_F_BYTE = 4,    /* a byte-fallback token <0xNN> */
};

/* Loads path (a tokenizer.json). */
int fg_tokenizer_load(struct fg_tokenizer **out, const char *path, struct fg_err *err);
/* Loads from memory; what names the input in messages. */
int fg_tokenizer_load_mem(struct fg_tokenizer **out, const char *json, size_t len, const char *what,
			  struct fg_err *err);
void fg_tokenizer_free(struct fg_tokenizer *tok);

/* Encodes len bytes of text into a new int32 array *ids (caller frees; may be
 * NULL when *n is 0). Invalid UTF-8 bytes are kept: each becomes its
 * byte-fallback token, so decode gives the same bytes back. */
int fg_tokenizer_encode(const struct fg_tokenizer *tok, const char *text, size_t len, int flags,
			int32_t **ids, size_t *n, struct fg_err *err);

/* Scratch for repeated encoding on one thread (also caches words seen). */
int fg_tok_scratch_new(struct fg_tok_scratch **out, struct fg_err *err);
void fg_tok_scratch_free(struct fg_tok_scratch *s);

/* Like fg_tokenizer_encode but appends to the caller's growable array
 * (*ids with *n used and *cap allocated, grown with realloc) using scratch s. */
int fg_tokenizer_encode_append(const struct fg_tokenizer *tok, struct fg_tok_scratch *s,
			       const char *text, size_t len, int flags, int32_t **ids, size_t *n,
			       size_t *cap, struct fg_err *err);

/* Decodes ids through the decoder chain, appending the text to out. Byte
 * tokens are emitted as the raw bytes (no U+FFFD substitution). An id outside
 * the vocabulary is an error. */
int fg_tokenizer_decode(const struct fg_tokenizer *tok, const int32_t *ids, size_t n,
			struct fg_buf *out, struct fg_err *err);

/* Flags for fg_tokenizer_decode_ex. */
enum {
	/* a run of byte tokens that is not valid UTF-8 gives one U+FFFD per
	 * token, as the Rust `tokenizers` library (transformers' and vLLM's
	 * decode) does; a valid run its bytes */
	FG_TOK_DECODE_REPLACE = 1,
};
/* fg_tokenizer_decode with FG_TOK_DECODE_* flags. */
int fg_tokenizer_decode_ex(const struct fg_tokenizer *tok, const int32_t *ids, size_t n, int flags,
			   struct fg_buf *out, struct fg_err *err);

/* 1 when decoding concatenates: for every b that does not split a run of
 * byte tokens, the text of ids[0..n) is the text of ids[0..b) followed by
 * the text of ids[b..n) (the decoder's steps act piece by piece, a Fuse
 * last: Gemma's Replace, ByteFallback, Fuse). 0 when the text must be
 * decoded whole: a step after Fuse (a Strip or Replace over the joined
 * text, as Llama's leading-space Strip), or no decoder (pieces joined by
 * spaces). A streaming server decodes only the new ids when it is 1. */
int fg_tokenizer_decode_splits(const struct fg_tokenizer *tok);

/* Appends s to out as valid UTF-8: each maximal ill-formed subsequence
 * becomes U+FFFD, as the WHATWG TextDecoder (and the JavaScript reference)
 * does. For showing decoded text where valid UTF-8 is required (JSON). */
int fg_utf8_lossy(struct fg_buf *out, const char *s, size_t n, struct fg_err *err);

/* The piece (vocabulary string) of id, borrowed, with its length; NULL when id
 * is outside the vocabulary or names no token. */
const char *fg_tokenizer_id_to_piece(const struct fg_tokenizer *tok, int32_t id, size_t *len);
/* The id of a piece (vocabulary or added token), or -1. */
int32_t fg_tokenizer_piece_to_id(const struct fg_tokenizer *tok, const char *piece, size_t len);

/* One more than the largest id (Gemma 3's file: 262145, with <image_soft_token>). */
int32_t fg_tokenizer_vocab_size(const struct fg_tokenizer *tok);
/* BOS: the special token of the post-processor template, else "<bos>"; EOS:
 * "<eos>"; UNK: the model's unk_token. -1 when there is none. */
int32_t fg_tokenizer_bos_id(const struct fg_tokenizer *tok);
int32_t fg_tokenizer_eos_id(const struct fg_tokenizer *tok);
int32_t fg_tokenizer_unk_id(const struct fg_tokenizer *tok);
/* The id of the byte-fallback token <0xNN> for byte b, or -1. */
int32_t fg_tokenizer_byte_id(const struct fg_tokenizer *tok, unsigned b);
/* FG_TOK_F_* bits of id (0 for ids outside the vocabulary). */
int fg_tokenizer_token_flags(const struct fg_tokenizer *tok, int32_t id);
/* 1 when text may be cut right after a run of "\n" (before a byte that is
 * not "\n") and the parts encoded separately give exactly the ids of the
 * whole: "\n" is an added token (so every newline ends a section), no added
 * token holds "\n" followed by another byte, and none holding "\n" strips
 * what follows it. Not exact next to an added token that strips what
 * precedes it (see fg_tokenizer_lstrip_any): "x\n<r>" is x <r> whole.
 * True for Gemma; lets callers stream big corpora by line. */
int fg_tokenizer_newline_cuts(const struct fg_tokenizer *tok);
/* 1 when some added token has lstrip (trims the whitespace before it). */
int fg_tokenizer_lstrip_any(const struct fg_tokenizer *tok);
/* Number of merges loaded (for messages and tests). */
size_t fg_tokenizer_merge_count(const struct fg_tokenizer *tok);

#endif
