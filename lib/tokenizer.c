/* tokenizer.c - Gemma-kind tokenizer.json: loading, BPE encoding, decoding.
 *
 * Loading reads the 30+ MB file with a small purpose-built JSON scanner for
 * model.vocab and model.merges (cJSON would spend most of a second building
 * millions of nodes) and hands the small parts (added_tokens, normalizer,
 * pre_tokenizer, post_processor, decoder, the model's scalars) to cJSON.
 *
 * Encoding follows the reference pipeline: added tokens are split off first
 * (leftmost, longest match, on the raw text), each remaining section is
 * normalized, pre-tokenized and run through BPE, then byte fallback and
 * fuse_unk apply. BPE merges the lowest-ranked adjacent pair first, the
 * leftmost on ties, with a binary heap over (rank, position).
 *
 * Gemma's Split pre-tokenizer never splits (the normalizer has already turned
 * every " " into "▁"), so a whole line is one BPE word. To make that fast we
 * cut it between adjacent characters c and d that are no "junction": no
 * merge joins a piece ending in c to a piece starting with d (derived from
 * the merges at load time), so no symbol can ever span the cut, and BPE on
 * the parts gives exactly BPE on the whole (proof at cut_words). Cheap cuts
 * first, before "▁"; words longer than CUT_MIN bytes (unspaced Chinese or
 * Thai) are cut further at every such pair. The parts repeat a lot and are
 * cached per scratch; with Gemma's normalizer (one Replace of " " by "▁")
 * the cutting and the cache work on the raw text, and only a word missing
 * from the cache is normalized. */
#include "tokenizer.h"
#include "utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fsutil.h"
#include "json.h"

#define MAX_TOKENIZER_BYTES ((size_t)512 << 20)
#define MAX_IDS (1 << 26)
#define JSON_MAX_DEPTH 64
#define CACHE_SLOTS_MAX ((size_t)1 << 18)
#define CACHE_SLOTS_MIN ((size_t)1 << 8)
#define CACHE_MAX_WORD 128
#define CUT_MIN 32 /* and more than 0 */
#define WORD_BATCH 16
#define SMALL_BPE 32
#define FIRST_MAX 8
#define CACHE_ARENA_MAX ((size_t)32 << 20)
#define CP_CACHE 4096
#define PAIR_CACHE 8192
#define MERGE_BATCH 16
#define NO_SYM (-1)

/* "▁" U+2581, the word-boundary character of SentencePiece-style vocabularies. */
#define WB_CP 0x2581u

enum { N_REPLACE = 1, N_PREPEND };
enum { SPLIT_REMOVED = 1, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS };
enum { D_REPLACE = 1, D_BYTEFALLBACK, D_FUSE, D_STRIP };

struct ventry {
	uint32_t off, len; /* piece bytes in arena */
	int32_t id;
};

struct mslot {
	uint64_t nkey; /* ~(left id << 32 | right id): 0 (an impossible pair) = empty */
	int32_t rank;
	int32_t result;
};

struct added {
	int32_t id;
	uint32_t off, len;
	unsigned char lstrip, rstrip, special;
};

struct tnode {
	int32_t child, sibling, added; /* added: index into tok->added or -1 */
	unsigned char byte;
};

struct step {
	int kind;
	char *pat, *rep;
	size_t pat_len, rep_len;
	uint32_t strip_cp;
	long long start, stop;
};

struct fg_tokenizer {
	struct fg_buf arena; /* every piece's bytes */
	int32_t n_ids;
	uint32_t *piece_off, *piece_len; /* by id; piece_len UINT32_MAX = no piece */
	unsigned char *tflags;
	struct ventry *ents;
	size_t n_ents, ents_cap;
	struct vslot {
		uint32_t tag;      /* high bits of the piece's hash, | 1; 0 = empty */
		uint32_t off, len; /* the piece in arena */
		int32_t id;
	} *vslots;
	size_t vmask;
	struct mslot *mslots;
	size_t mmask, n_merges;
	size_t vslots_bytes, mslots_bytes; /* mapped sizes (big_alloc) */
	int32_t byte_id[256];
	int32_t ascii_id[128];
	struct added *added;
	size_t n_added;
	struct tnode *trie;
	size_t n_trie, trie_cap;
	int32_t trie_root[256];
	/* the bytes that start an added token, when at most FIRST_MAX (else
	 * n_first is FIRST_MAX + 1): the text is searched for them with memchr */
	unsigned char first[FIRST_MAX];
	size_t n_first;
	struct step *norm;
	size_t n_norm;
	int split_behavior; /* 0: no pre-tokenizer */
	char *split_pat;
	size_t split_len;
	int32_t unk_id;
	int byte_fallback, fuse_unk, ignore_merges;
	/* junctions: pairs of code points (c, d) such that some merge joins a
	 * left piece ending in c to a right piece starting with d; no symbol
	 * can ever span two adjacent characters that are not one (see cut_ok) */
	uint64_t *junc; /* ~(c << 32 | d); 0 = empty */
	size_t jmask, n_junc;
	uint64_t jascii[128][2]; /* bit d of jascii[c]: (c, d) is one, for c, d < 128 */
	/* the normalizer is one Replace of the ASCII byte raw_space by "▁" and
	 * nothing else changes the text: words are cut and cached on the raw
	 * text, and only a word not in the cache is normalized */
	int raw_words;
	unsigned char raw_space;
	int32_t *tmpl_pre, *tmpl_post;
	size_t n_pre, n_post;
	int32_t bos_id, eos_id;
	struct step *dec;
	size_t n_dec;
	int has_decoder;
	uint64_t stamp; /* unique per load in this process: scratch caches belong to one */
};

/* ---- small helpers ---- */

static uint64_t hash_bytes(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t v;

		memcpy(&v, s + i, 8);
		h = (h ^ v) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ull;
	h ^= h >> 32;
	return h;
}

static uint64_t hash_u64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

/* Decodes the last code point before end (UINT32_MAX when invalid). */
static size_t last_cp(const unsigned char *a, const unsigned char *end, uint32_t *cp)
{
	size_t k;

	for (k = 1; k <= 4 && end - k >= a; k++)
		if ((end[-(ptrdiff_t)k] & 0xc0) != 0x80) {
			if (fg_utf8_len(end - k, k, cp) == k)
				return k;
			break;
		}
	*cp = UINT32_MAX;
	return 1;
}

static size_t utf8_put(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* JavaScript's String.prototype.trim set (WhiteSpace and LineTerminator). */
static int js_space(uint32_t c)
{
	return c == 0x09 || c == 0x0a || c == 0x0b || c == 0x0c || c == 0x0d || c == 0x20 ||
	       c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
	       c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000 || c == 0xfeff;
}

static void *xcalloc(size_t n, size_t sz, struct fg_err *err)
{
	void *p = n && sz ? calloc(n, sz) : NULL;

	if (n && sz && !p)
		fg_err_set(err, FG_ENOMEM, "out of memory (%zu x %zu bytes)", n, sz);
	return p;
}

static int grow_array(void **arr, size_t *cap, size_t need, size_t elem, struct fg_err *err)
{
	size_t nc;
	void *p;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap : 16;
	while (nc < need)
		nc *= 2;
	if (fg_size_mul(nc, elem, &(size_t){ 0 }))
		return fg_err_set(err, FG_ENOMEM, "array too large");
	p = realloc(*arr, nc * elem);
	if (!p)
		return fg_err_set(err, FG_ENOMEM, "out of memory growing an array to %zu items", nc);
	*arr = p;
	*cap = nc;
	return 0;
}

/* Zeroed memory for a big lookup table, on 2 MiB transparent huge pages where
 * the kernel offers them: encoding probes these tables at random, and with
 * 4 KiB pages nearly every probe also missed the TLB (and loading paid one
 * page fault per 4 KiB, a third of its time). Only pages touched cost
 * memory, so loading also reserves its scratch arrays here at their upper
 * bound. *bytes receives the size to give big_free. */
static void *big_alloc(size_t n, size_t elem, size_t *bytes, struct fg_err *err)
{
	const size_t huge = (size_t)2 << 20;
	size_t sz, span;
	char *p, *a;

	if (fg_size_mul(n, elem, &sz) || sz > SIZE_MAX - 2 * huge)
		return fg_err_set(err, FG_ENOMEM, "table too large"), NULL;
	sz = (sz + huge - 1) & ~(huge - 1);
	span = sz + huge;
	p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return fg_err_set(err, FG_ENOMEM, "out of memory (%zu bytes)", sz), NULL;
	a = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (a + sz < p + span)
		munmap(a + sz, (size_t)(p + span - (a + sz)));
#ifdef MADV_HUGEPAGE
	madvise(a, sz, MADV_HUGEPAGE); /* advice only: without it we still work */
#endif
	*bytes = sz;
	return a;
}

static void big_free(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes);
}

/* ---- vocabulary and merge tables ---- */

static const char *piece_of(const struct fg_tokenizer *t, const struct ventry *e)
{
	return t->arena.data + e->off;
}

static uint32_t vocab_tag(uint64_t h)
{
	return (uint32_t)(h >> 32) | 1;
}

/* The slot holding piece s whose hash_bytes is h, or -1. */
static int64_t vocab_slot_h(const struct fg_tokenizer *t, const char *s, size_t n, uint64_t h)
{
	uint32_t tag = vocab_tag(h);
	size_t i;

	if (!t->vslots)
		return -1;
	for (i = h & t->vmask;; i = (i + 1) & t->vmask) {
		const struct vslot *v = &t->vslots[i];

		if (!v->tag)
			return -1;
		if (v->tag == tag && v->len == n && !memcmp(t->arena.data + v->off, s, n))
			return (int64_t)i;
	}
}

static int64_t vocab_slot(const struct fg_tokenizer *t, const char *s, size_t n)
{
	return vocab_slot_h(t, s, n, hash_bytes(s, n));
}

static int32_t lookup_id(const struct fg_tokenizer *t, const char *s, size_t n)
{
	int64_t i = vocab_slot(t, s, n);

	return i < 0 ? -1 : t->vslots[i].id;
}

static void vocab_insert_slot(struct fg_tokenizer *t, const struct ventry *e)
{
	uint64_t h = hash_bytes(piece_of(t, e), e->len);
	size_t i;

	for (i = h & t->vmask; t->vslots[i].tag; i = (i + 1) & t->vmask)
		;
	t->vslots[i].tag = vocab_tag(h);
	t->vslots[i].off = e->off;
	t->vslots[i].len = e->len;
	t->vslots[i].id = e->id;
}

static uint64_t pair_key(int32_t a, int32_t b)
{
	return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

/* The merge of pair key, searched from slot i (its hash's), or NULL. */
static const struct mslot *merge_find_from(const struct fg_tokenizer *t, uint64_t key, size_t i)
{
	for (;; i = (i + 1) & t->mmask) {
		const struct mslot *m = &t->mslots[i];

		if (m->nkey == ~key)
			return m;
		if (!m->nkey)
			return NULL;
	}
}

/* ---- a JSON scanner for the large parts of tokenizer.json ---- */

struct jcur {
	const char *s, *p, *end;
	const char *what;
	struct fg_err *err;
};

static int jfail(struct jcur *c, const char *msg)
{
	return fg_err_set(c->err, FG_EFORMAT, "%s: %s at byte %zu", c->what, msg, (size_t)(c->p - c->s));
}

/* JSON whitespace; and the bytes that end a run of plain string content. */
static const unsigned char j_space[256] = { [' '] = 1, ['\n'] = 1, ['\r'] = 1, ['\t'] = 1 };
static const unsigned char j_stop[256] = {
	[0x00] = 1, [0x01] = 1, [0x02] = 1, [0x03] = 1, [0x04] = 1, [0x05] = 1, [0x06] = 1, [0x07] = 1,
	[0x08] = 1, [0x09] = 1, [0x0a] = 1, [0x0b] = 1, [0x0c] = 1, [0x0d] = 1, [0x0e] = 1, [0x0f] = 1,
	[0x10] = 1, [0x11] = 1, [0x12] = 1, [0x13] = 1, [0x14] = 1, [0x15] = 1, [0x16] = 1, [0x17] = 1,
	[0x18] = 1, [0x19] = 1, [0x1a] = 1, [0x1b] = 1, [0x1c] = 1, [0x1d] = 1, [0x1e] = 1, [0x1f] = 1,
	['"'] = 1, ['\\'] = 1,
};

static void jws(struct jcur *c)
{
	const char *p = c->p, *end = c->end;

	while (p < end && j_space[(unsigned char)*p])
		p++;
	c->p = p;
}

static int jexpect(struct jcur *c, char ch)
{
	jws(c);
	if (c->p >= c->end || *c->p != ch)
		return fg_err_set(c->err, FG_EFORMAT, "%s: expected '%c' at byte %zu", c->what, ch,
				  (size_t)(c->p - c->s));
	c->p++;
	return 0;
}

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

static int jhex4(struct jcur *c, uint32_t *v)
{
	int i;

	if (c->end - c->p < 4)
		return jfail(c, "short \\u escape");
	*v = 0;
	for (i = 0; i < 4; i++) {
		int h = hexval((unsigned char)c->p[i]);

		if (h < 0)
			return jfail(c, "bad \\u escape");
		*v = *v << 4 | (uint32_t)h;
	}
	c->p += 4;
	return 0;
}

/* Decodes a string at the cursor, appending it to out. Lone surrogates
 * become their 3-byte form, as Python's json would keep them. */
static int jstr_append(struct jcur *c, struct fg_buf *out)
{
	const char *run;
	int rc;

	jws(c);
	if (c->p >= c->end || *c->p != '"')
		return jfail(c, "expected a string");
	c->p++;
	run = c->p;
	for (;;) {
		unsigned char ch;
		const char *p = c->p, *end = c->end;

		while (p < end && !j_stop[(unsigned char)*p])
			p++;
		c->p = p;
		if (c->p >= c->end)
			return jfail(c, "unterminated string");
		ch = (unsigned char)*c->p;
		if ((rc = fg_buf_append(out, run, (size_t)(c->p - run), c->err)))
			return rc;
		if (ch == '"') {
			c->p++;
			if (!out->data && (rc = fg_buf_append(out, "", 0, c->err)))
				return rc;
			return 0;
		}
		if (ch < 0x20)
			return jfail(c, "control character in string");
		c->p++;
		if (c->p >= c->end)
			return jfail(c, "unterminated escape");
		ch = (unsigned char)*c->p++;
		switch (ch) {
		case '"': case '\\': case '/':
			rc = fg_buf_putc(out, (char)ch, c->err);
			break;
		case 'b': rc = fg_buf_putc(out, '\b', c->err); break;
		case 'f': rc = fg_buf_putc(out, '\f', c->err); break;
		case 'n': rc = fg_buf_putc(out, '\n', c->err); break;
		case 'r': rc = fg_buf_putc(out, '\r', c->err); break;
		case 't': rc = fg_buf_putc(out, '\t', c->err); break;
		case 'u': {
			uint32_t v, lo;
			char u[4];

			if ((rc = jhex4(c, &v)))
				return rc;
			if (v >= 0xd800 && v <= 0xdbff && c->end - c->p >= 6 && c->p[0] == '\\' &&
			    c->p[1] == 'u') {
				const char *save = c->p;

				c->p += 2;
				if ((rc = jhex4(c, &lo)))
					return rc;
				if (lo >= 0xdc00 && lo <= 0xdfff)
					v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
				else
					c->p = save;
			}
			rc = fg_buf_append(out, u, utf8_put(u, v), c->err);
			break;
		}
		default:
			c->p--;
			return jfail(c, "bad escape");
		}
		if (rc)
			return rc;
		run = c->p;
	}
}

/* Decodes a string at the cursor into out (replacing its content). */
static int jstr(struct jcur *c, struct fg_buf *out)
{
	fg_buf_reset(out);
	return jstr_append(c, out);
}

static int jskip(struct jcur *c, int depth)
{
	jws(c);
	if (c->p >= c->end)
		return jfail(c, "unexpected end");
	if (depth > JSON_MAX_DEPTH)
		return jfail(c, "nested too deeply");
	switch (*c->p) {
	case '"':
		c->p++;
		while (c->p < c->end && *c->p != '"') {
			if (*c->p == '\\')
				c->p++;
			c->p++;
		}
		if (c->p >= c->end)
			return jfail(c, "unterminated string");
		c->p++;
		return 0;
	case '{':
	case '[': {
		char close = *c->p == '{' ? '}' : ']';
		int rc;

		c->p++;
		jws(c);
		if (c->p < c->end && *c->p == close) {
			c->p++;
			return 0;
		}
		for (;;) {
			if (close == '}') {
				struct fg_buf k = FG_BUF_INIT;

				rc = jstr(c, &k);
				fg_buf_release(&k);
				if (rc || (rc = jexpect(c, ':')))
					return rc;
			}
			if ((rc = jskip(c, depth + 1)))
				return rc;
			jws(c);
			if (c->p < c->end && *c->p == ',') {
				c->p++;
				continue;
			}
			return jexpect(c, close);
		}
	}
	default:
		while (c->p < c->end && (*c->p == '-' || *c->p == '+' || *c->p == '.' ||
					 (*c->p >= '0' && *c->p <= '9') || (*c->p >= 'a' && *c->p <= 'z') ||
					 (*c->p >= 'A' && *c->p <= 'Z')))
			c->p++;
		return 0;
	}
}

static int jint(struct jcur *c, long long *v)
{
	int neg = 0, digits = 0;

	jws(c);
	*v = 0;
	if (c->p < c->end && *c->p == '-') {
		neg = 1;
		c->p++;
	}
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		if (*v > (1ll << 40))
			return jfail(c, "number too large");
		*v = *v * 10 + (*c->p - '0');
		c->p++;
		digits++;
	}
	if (!digits || (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E')))
		return jfail(c, "expected an integer");
	if (neg)
		*v = -*v;
	return 0;
}

/* Parses the value at the cursor with cJSON (for the small parts). */
static int jvalue_cjson(struct jcur *c, cJSON **out)
{
	const char *start;
	int rc;

	jws(c);
	start = c->p;
	if ((rc = jskip(c, 0)))
		return rc;
	return fg_json_parse(out, start, (size_t)(c->p - start), c->what, c->err);
}

/* Loops over an object's members: calls fn(c, key, ctx) with the cursor on each value. */
static int jobject(struct jcur *c, int (*fn)(struct jcur *, const char *, size_t, void *), void *ctx)
{
	struct fg_buf key = FG_BUF_INIT;
	int rc;

	if ((rc = jexpect(c, '{')))
		return rc;
	jws(c);
	if (c->p < c->end && *c->p == '}') {
		c->p++;
		return 0;
	}
	for (;;) {
		if ((rc = jstr(c, &key)) || (rc = jexpect(c, ':')) || (rc = fn(c, key.data, key.len, ctx)))
			break;
		jws(c);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			continue;
		}
		rc = jexpect(c, '}');
		break;
	}
	fg_buf_release(&key);
	return rc;
}

/* ---- loading ---- */

/* Counts loads, so each tokenizer gets its own stamp (the only static state,
 * changed atomically). */
static uint64_t load_count;

struct lctx {
	struct fg_tokenizer *t;
	cJSON *root;  /* small top-level members */
	cJSON *model; /* model scalars */
	struct fg_buf tmp, tmp2;
	/* the merges, each as a record: two uint16 lengths, then both pieces'
	 * bytes (over big_alloc memory; max = its size, so it never moves) */
	struct fg_buf mtext;
	size_t n_merges, mtext_bytes;
	/* added_tokens as read, their contents in atext */
	struct pending_added {
		long long id;
		uint32_t off, len;
		unsigned char has_content, has_id, lstrip, rstrip, special;
	} *alist, cur_added;
	size_t n_alist, alist_cap;
	struct fg_buf atext;
	int saw_added;
	int saw_vocab, saw_merges;
};

static int add_piece(struct fg_tokenizer *t, const char *s, size_t n, int32_t id, struct fg_err *err)
{
	int rc;
	struct ventry *e;

	if (t->arena.len > UINT32_MAX - n - 1)
		return fg_err_set(err, FG_EFORMAT, "vocabulary too large");
	if ((rc = grow_array((void **)&t->ents, &t->ents_cap, t->n_ents + 1, sizeof(*t->ents), err)))
		return rc;
	e = &t->ents[t->n_ents++];
	e->off = (uint32_t)t->arena.len;
	e->len = (uint32_t)n;
	e->id = id;
	if ((rc = fg_buf_append(&t->arena, s, n, err)) || (rc = fg_buf_putc(&t->arena, 0, err)))
		return rc;
	return 0;
}

/* One merge, ["a", "b"] or "a b", decoded straight into a record of
 * l->mtext: a then b adjacent, so that a+b is one span there. */
static int on_merge(struct jcur *c, struct lctx *l)
{
	size_t rec = l->mtext.len, a0 = rec + 4, alen, blen;
	uint16_t lens[2];
	int rc;

	if ((rc = fg_buf_append(&l->mtext, "\0\0\0\0", 4, c->err)))
		return rc;
	jws(c);
	if (c->p < c->end && *c->p == '[') {
		c->p++;
		if ((rc = jstr_append(c, &l->mtext)))
			return rc;
		alen = l->mtext.len - a0;
		if ((rc = jexpect(c, ',')) || (rc = jstr_append(c, &l->mtext)) || (rc = jexpect(c, ']')))
			return rc;
		blen = l->mtext.len - a0 - alen;
	} else {
		char *s, *sp;

		if ((rc = jstr_append(c, &l->mtext)))
			return rc;
		s = l->mtext.data + a0;
		sp = memchr(s, ' ', l->mtext.len - a0);
		if (!sp || memchr(sp + 1, ' ', l->mtext.len - a0 - (size_t)(sp + 1 - s)))
			return jfail(c, "merge is not two pieces separated by one space");
		alen = (size_t)(sp - s);
		blen = l->mtext.len - a0 - alen - 1;
		memmove(sp, sp + 1, blen);
		l->mtext.len--;
	}
	if (alen > UINT16_MAX || blen > UINT16_MAX)
		return jfail(c, "merge piece longer than 65535 bytes");
	if (l->mtext.len > UINT32_MAX)
		return jfail(c, "merges too large");
	lens[0] = (uint16_t)alen;
	lens[1] = (uint16_t)blen;
	memcpy(l->mtext.data + rec, lens, 4);
	l->n_merges++;
	return 0;
}

/* model.vocab, {"piece": id, ...}: pieces decoded straight into the arena. */
static int parse_vocab(struct jcur *c, struct fg_tokenizer *t)
{
	int rc;

	if ((rc = jexpect(c, '{')))
		return rc;
	jws(c);
	if (c->p < c->end && *c->p == '}') {
		c->p++;
		return 0;
	}
	for (;;) {
		size_t off = t->arena.len;
		long long id;
		struct ventry *e;

		if ((rc = jstr_append(c, &t->arena)) || (rc = fg_buf_putc(&t->arena, 0, c->err)) ||
		    (rc = jexpect(c, ':')) || (rc = jint(c, &id)))
			return rc;
		if (id < 0 || id >= MAX_IDS)
			return jfail(c, "vocabulary id out of range");
		if (t->arena.len > UINT32_MAX)
			return jfail(c, "vocabulary too large");
		if (t->n_ents == t->ents_cap &&
		    (rc = grow_array((void **)&t->ents, &t->ents_cap, t->n_ents + 1, sizeof(*t->ents), c->err)))
			return rc;
		e = &t->ents[t->n_ents++];
		e->off = (uint32_t)off;
		e->len = (uint32_t)(t->arena.len - off - 1);
		e->id = (int32_t)id;
		jws(c);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			continue;
		}
		return jexpect(c, '}');
	}
}

static int on_model_member(struct jcur *c, const char *key, size_t klen, void *ctx)
{
	struct lctx *l = ctx;
	cJSON *v;
	int rc;

	(void)klen;
	if (!strcmp(key, "vocab")) {
		jws(c);
		if (c->p < c->end && *c->p == '[')
			return fg_err_set(c->err, FG_EUNSUPPORTED,
					  "%s: model.vocab is a list of [piece, score] pairs (a Unigram model): "
					  "not supported, only BPE",
					  c->what);
		l->saw_vocab = 1;
		return parse_vocab(c, l->t);
	}
	if (!strcmp(key, "merges")) {
		l->saw_merges = 1;
		jws(c);
		if (c->p >= c->end || *c->p != '[')
			return fg_err_set(c->err, FG_EFORMAT, "%s: model.merges: expected a list of merges at byte %zu",
					  c->what, (size_t)(c->p - c->s));
		c->p++;
		jws(c);
		if (c->p < c->end && *c->p == ']') {
			c->p++;
			return 0;
		}
		for (;;) {
			if ((rc = on_merge(c, l)))
				return rc;
			jws(c);
			if (c->p < c->end && *c->p == ',') {
				c->p++;
				continue;
			}
			return jexpect(c, ']');
		}
	}
	if ((rc = jvalue_cjson(c, &v)))
		return rc;
	cJSON_AddItemToObject(l->model, key, v);
	return 0;
}

/* A JSON value that is true (anything else, null included, is not). */
static int jbool(struct jcur *c, unsigned char *v)
{
	jws(c);
	*v = c->end - c->p >= 4 && !memcmp(c->p, "true", 4);
	return jskip(c, 0);
}

static int on_added_member(struct jcur *c, const char *key, size_t klen, void *ctx)
{
	struct lctx *l = ctx;
	struct pending_added *a = &l->cur_added;
	int rc;

	(void)klen;
	if (!strcmp(key, "content")) {
		size_t off = l->atext.len;

		jws(c);
		if (c->p < c->end && *c->p != '"')
			return jskip(c, 0);
		if ((rc = jstr_append(c, &l->atext)) || (rc = fg_buf_putc(&l->atext, 0, c->err)))
			return rc;
		if (l->atext.len > UINT32_MAX)
			return jfail(c, "added_tokens too large");
		a->off = (uint32_t)off;
		a->len = (uint32_t)(l->atext.len - off - 1);
		a->has_content = 1;
		return 0;
	}
	if (!strcmp(key, "id")) {
		jws(c);
		if (c->p < c->end && (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) {
			a->has_id = 1;
			return jint(c, &a->id);
		}
		return jskip(c, 0);
	}
	if (!strcmp(key, "lstrip"))
		return jbool(c, &a->lstrip);
	if (!strcmp(key, "rstrip"))
		return jbool(c, &a->rstrip);
	if (!strcmp(key, "special"))
		return jbool(c, &a->special);
	return jskip(c, 0);
}

/* added_tokens: a list of {"id", "content", "lstrip", "rstrip", "special", ...}
 * (read with the scanner: cJSON took a tenth of the load on Gemma's 6,415). */
static int parse_added(struct jcur *c, struct lctx *l)
{
	int rc;

	jws(c);
	if (c->end - c->p >= 4 && !memcmp(c->p, "null", 4)) {
		c->p += 4;
		return 0;
	}
	if (c->p >= c->end || *c->p != '[')
		return jfail(c, "added_tokens is not a list");
	c->p++;
	l->saw_added = 1;
	jws(c);
	if (c->p < c->end && *c->p == ']') {
		c->p++;
		return 0;
	}
	for (;;) {
		memset(&l->cur_added, 0, sizeof(l->cur_added));
		jws(c);
		if (c->p >= c->end || *c->p != '{')
			return fg_err_set(c->err, FG_EFORMAT, "added_tokens[%zu]: needs content and a valid id",
					  l->n_alist);
		if ((rc = jobject(c, on_added_member, l)))
			return rc;
		if ((rc = grow_array((void **)&l->alist, &l->alist_cap, l->n_alist + 1, sizeof(*l->alist), c->err)))
			return rc;
		l->alist[l->n_alist++] = l->cur_added;
		jws(c);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			continue;
		}
		return jexpect(c, ']');
	}
}

static int on_root_member(struct jcur *c, const char *key, size_t klen, void *ctx)
{
	struct lctx *l = ctx;
	cJSON *v;
	int rc;

	(void)klen;
	if (!strcmp(key, "model")) {
		jws(c);
		if (c->p < c->end && *c->p == 'n')
			return jfail(c, "model is null");
		return jobject(c, on_model_member, l);
	}
	if (!strcmp(key, "added_tokens"))
		return parse_added(c, l);
	if (strcmp(key, "normalizer") && strcmp(key, "pre_tokenizer") &&
	    strcmp(key, "post_processor") && strcmp(key, "decoder"))
		return jskip(c, 0);
	if ((rc = jvalue_cjson(c, &v)))
		return rc;
	cJSON_AddItemToObject(l->root, key, v);
	return 0;
}

static const char *jtype(const cJSON *o)
{
	const char *s = fg_json_str(o, "type");

	return s ? s : "(no type)";
}

static int is_null(const cJSON *o)
{
	return !o || cJSON_IsNull(o);
}

static int dup_str(char **out, size_t *len, const char *s, struct fg_err *err)
{
	*len = strlen(s);
	*out = malloc(*len + 1);
	if (!*out)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	memcpy(*out, s, *len + 1);
	return 0;
}

/* A {"String": s} pattern; Regex patterns are refused. */
static int string_pattern(const cJSON *o, const char *where, const char **out, struct fg_err *err)
{
	const cJSON *pat = fg_json_obj(o, "pattern");
	const char *s = pat ? fg_json_str(pat, "String") : NULL;

	if (pat && fg_json_str(pat, "Regex"))
		return fg_err_set(err, FG_EUNSUPPORTED, "%s with a Regex pattern is not supported", where);
	if (!s)
		return fg_err_set(err, FG_EFORMAT, "%s has no String pattern", where);
	if (!*s)
		return fg_err_set(err, FG_EUNSUPPORTED, "%s with an empty pattern is not supported", where);
	*out = s;
	return 0;
}

static int add_step(struct step **arr, size_t *n, struct step **out, struct fg_err *err)
{
	struct step *p = realloc(*arr, (*n + 1) * sizeof(**arr));

	if (!p)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	*arr = p;
	*out = &p[(*n)++];
	memset(*out, 0, sizeof(**out));
	return 0;
}

/* A Replace step ({"pattern": {"String": ...}, "content": ...}) appended to
 * *arr as kind; where names it in errors ("normalizer Replace"). */
static int load_replace(const cJSON *o, const char *where, struct step **arr, size_t *n, int kind,
			struct fg_err *err)
{
	const char *pat, *content;
	struct step *s;
	int rc;

	if ((rc = string_pattern(o, where, &pat, err)))
		return rc;
	if (!(content = fg_json_str(o, "content")))
		return fg_err_set(err, FG_EFORMAT, "%s without content", where);
	if ((rc = add_step(arr, n, &s, err)))
		return rc;
	s->kind = kind;
	if ((rc = dup_str(&s->pat, &s->pat_len, pat, err)))
		return rc;
	return dup_str(&s->rep, &s->rep_len, content, err);
}

static int load_normalizer(struct fg_tokenizer *t, const cJSON *o, struct fg_err *err)
{
	const char *type = jtype(o), *content;
	struct step *s;
	int rc;

	if (!strcmp(type, "Sequence")) {
		const cJSON *list = fg_json_arr(o, "normalizers"), *it;

		if (!list)
			return fg_err_set(err, FG_EFORMAT, "normalizer Sequence without normalizers");
		cJSON_ArrayForEach(it, list)
			if ((rc = load_normalizer(t, it, err)))
				return rc;
		return 0;
	}
	if (!strcmp(type, "Replace"))
		return load_replace(o, "normalizer Replace", &t->norm, &t->n_norm, N_REPLACE, err);
	if (!strcmp(type, "Prepend")) {
		if (!(content = fg_json_str(o, "prepend")))
			return fg_err_set(err, FG_EFORMAT, "normalizer Prepend without prepend");
		if ((rc = add_step(&t->norm, &t->n_norm, &s, err)))
			return rc;
		s->kind = N_PREPEND;
		return dup_str(&s->rep, &s->rep_len, content, err);
	}
	return fg_err_set(err, FG_EUNSUPPORTED,
			  "normalizer %s is not supported (supported: Replace with a String pattern, "
			  "Prepend, Sequence of those)",
			  type);
}

static int load_pre_tokenizer(struct fg_tokenizer *t, const cJSON *o, struct fg_err *err)
{
	const char *type = jtype(o), *pat, *beh;
	const cJSON *inv;
	int rc;

	if (!strcmp(type, "Sequence")) {
		const cJSON *list = fg_json_arr(o, "pretokenizers");

		if (list && cJSON_GetArraySize(list) == 0)
			return 0;
		if (list && cJSON_GetArraySize(list) == 1)
			return load_pre_tokenizer(t, cJSON_GetArrayItem(list, 0), err);
		{
			char names[160] = "";
			size_t used = 0;
			const cJSON *it;

			cJSON_ArrayForEach(it, list) {
				int k = snprintf(names + used, sizeof(names) - used, "%s%s", used ? ", " : "", jtype(it));

				if (k < 0 || (size_t)k >= sizeof(names) - used)
					break;
				used += (size_t)k;
			}
			return fg_err_set(err, FG_EUNSUPPORTED,
					  "pre-tokenizer Sequence of several (%s) is not supported (supported: one Split on a String pattern)",
					  names);
		}
	}
	if (strcmp(type, "Split"))
		return fg_err_set(err, FG_EUNSUPPORTED,
				  "pre-tokenizer %s is not supported (supported: Split on a String pattern)",
				  type);
	if ((rc = string_pattern(o, "pre-tokenizer Split", &pat, err)))
		return rc;
	inv = cJSON_GetObjectItemCaseSensitive(o, "invert");
	if (cJSON_IsTrue(inv))
		return fg_err_set(err, FG_EUNSUPPORTED, "pre-tokenizer Split with invert is not supported");
	beh = fg_json_str(o, "behavior");
	if (!beh)
		return fg_err_set(err, FG_EFORMAT, "pre-tokenizer Split without behavior");
	if (!strcmp(beh, "Removed"))
		t->split_behavior = SPLIT_REMOVED;
	else if (!strcmp(beh, "Isolated"))
		t->split_behavior = SPLIT_ISOLATED;
	else if (!strcmp(beh, "MergedWithPrevious"))
		t->split_behavior = SPLIT_MERGED_PREV;
	else if (!strcmp(beh, "MergedWithNext"))
		t->split_behavior = SPLIT_MERGED_NEXT;
	else if (!strcmp(beh, "Contiguous"))
		t->split_behavior = SPLIT_CONTIGUOUS;
	else
		return fg_err_set(err, FG_EUNSUPPORTED, "pre-tokenizer Split behavior %s is not supported",
				  beh);
	return dup_str(&t->split_pat, &t->split_len, pat, err);
}

static int load_decoder(struct fg_tokenizer *t, const cJSON *o, struct fg_err *err)
{
	const char *type = jtype(o), *content;
	struct step *s;
	int rc;

	if (!strcmp(type, "Sequence")) {
		const cJSON *list = fg_json_arr(o, "decoders"), *it;

		if (!list)
			return fg_err_set(err, FG_EFORMAT, "decoder Sequence without decoders");
		cJSON_ArrayForEach(it, list)
			if ((rc = load_decoder(t, it, err)))
				return rc;
		return 0;
	}
	if (!strcmp(type, "Replace"))
		return load_replace(o, "decoder Replace", &t->dec, &t->n_dec, D_REPLACE, err);
	if (!strcmp(type, "ByteFallback") || !strcmp(type, "Fuse")) {
		if ((rc = add_step(&t->dec, &t->n_dec, &s, err)))
			return rc;
		s->kind = type[0] == 'B' ? D_BYTEFALLBACK : D_FUSE;
		return 0;
	}
	if (!strcmp(type, "Strip")) {
		uint32_t cp;

		content = fg_json_str(o, "content");
		if (!content || !*content ||
		    fg_utf8_len((const unsigned char *)content, strlen(content), &cp) != strlen(content))
			return fg_err_set(err, FG_EFORMAT, "decoder Strip content must be one character");
		if ((rc = add_step(&t->dec, &t->n_dec, &s, err)))
			return rc;
		s->kind = D_STRIP;
		s->strip_cp = cp;
		if (fg_json_int(o, "start", &s->start) || fg_json_int(o, "stop", &s->stop) ||
		    s->start < 0 || s->stop < 0)
			return fg_err_set(err, FG_EFORMAT, "decoder Strip needs start and stop counts");
		return 0;
	}
	return fg_err_set(err, FG_EUNSUPPORTED,
			  "decoder %s is not supported (supported: Replace, ByteFallback, Fuse, Strip, "
			  "Sequence)",
			  type);
}

static int load_post_processor(struct fg_tokenizer *t, const cJSON *o, struct fg_err *err)
{
	const cJSON *single, *it, *specials;
	int seen_seq = 0;

	if (strcmp(jtype(o), "TemplateProcessing"))
		return fg_err_set(err, FG_EUNSUPPORTED,
				  "post-processor %s is not supported (supported: TemplateProcessing)",
				  jtype(o));
	single = fg_json_arr(o, "single");
	specials = fg_json_obj(o, "special_tokens");
	if (!single)
		return fg_err_set(err, FG_EFORMAT, "TemplateProcessing without single");
	cJSON_ArrayForEach(it, single) {
		const cJSON *sp = fg_json_obj(it, "SpecialToken");
		const cJSON *ids;
		const char *name;
		const cJSON *idv;

		if (fg_json_obj(it, "Sequence")) {
			seen_seq = 1;
			continue;
		}
		if (!sp || !(name = fg_json_str(sp, "id")))
			return fg_err_set(err, FG_EFORMAT, "TemplateProcessing item is neither Sequence nor SpecialToken");
		ids = specials ? fg_json_arr(fg_json_obj(specials, name), "ids") : NULL;
		if (ids) {
			cJSON_ArrayForEach(idv, ids) {
				int32_t **arr = seen_seq ? &t->tmpl_post : &t->tmpl_pre;
				size_t *n = seen_seq ? &t->n_post : &t->n_pre;
				int32_t *p;

				if (!cJSON_IsNumber(idv) || idv->valuedouble < 0 || idv->valuedouble >= t->n_ids)
					return fg_err_set(err, FG_EFORMAT, "TemplateProcessing: bad id for %s", name);
				p = realloc(*arr, (*n + 1) * sizeof(**arr));
				if (!p)
					return fg_err_set(err, FG_ENOMEM, "out of memory");
				p[(*n)++] = (int32_t)idv->valuedouble;
				*arr = p;
			}
		} else {
			int32_t id = lookup_id(t, name, strlen(name));
			int32_t **arr = seen_seq ? &t->tmpl_post : &t->tmpl_pre;
			size_t *n = seen_seq ? &t->n_post : &t->n_pre;
			int32_t *p;

			if (id < 0)
				return fg_err_set(err, FG_EFORMAT, "TemplateProcessing: unknown token %s", name);
			p = realloc(*arr, (*n + 1) * sizeof(**arr));
			if (!p)
				return fg_err_set(err, FG_ENOMEM, "out of memory");
			p[(*n)++] = id;
			*arr = p;
		}
	}
	return 0;
}

/* Invalid UTF-8 (a code point of UINT32_MAX from last_cp) as a junction side. */
#define CP_INVALID (UINT32_MAX - 1)

static uint64_t junc_key(uint32_t c, uint32_t d)
{
	return ((uint64_t)c << 32) | d;
}

/* 1 when some merge joins a piece ending in c to one starting with d. */
static inline int junction(const struct fg_tokenizer *t, uint32_t c, uint32_t d)
{
	uint64_t nk;
	size_t i;

	if ((c | d) < 128)
		return (int)((t->jascii[c][d >> 6] >> (d & 63)) & 1);
	if (!t->junc)
		return 0;
	nk = ~junc_key(c, d);
	for (i = hash_u64(nk) & t->jmask; t->junc[i]; i = (i + 1) & t->jmask)
		if (t->junc[i] == nk)
			return 1;
	return 0;
}

static int junc_put(uint64_t *tab, size_t mask, uint64_t nk)
{
	size_t i;

	for (i = hash_u64(nk) & mask; tab[i]; i = (i + 1) & mask)
		if (tab[i] == nk)
			return 0;
	tab[i] = nk;
	return 1;
}

/* Records the junction of the merge of pieces a and b (whose text is
 * a + b, checked by the caller): the last code point of a, the first of b. */
static int note_junction(struct fg_tokenizer *t, const char *a, size_t a_len, const char *b, size_t b_len,
			 struct fg_err *err)
{
	const unsigned char *ua = (const unsigned char *)a, *ub = (const unsigned char *)b;
	uint32_t c, d;
	size_t i;

	if (!a_len || !b_len)
		return 0;
	last_cp(ua, ua + a_len, &c);
	if (!fg_utf8_len(ub, b_len, &d))
		d = UINT32_MAX;
	if (c == UINT32_MAX)
		c = CP_INVALID;
	if (d == UINT32_MAX)
		d = CP_INVALID;
	if ((c | d) < 128) {
		t->jascii[c][d >> 6] |= (uint64_t)1 << (d & 63);
		return 0;
	}
	if ((t->n_junc + 1) * 2 > t->jmask + 1 || !t->junc) {
		size_t n = t->junc ? (t->jmask + 1) * 2 : 4096;
		uint64_t *nt = xcalloc(n, sizeof(*nt), err);

		if (!nt)
			return FG_ENOMEM;
		for (i = 0; t->junc && i <= t->jmask; i++)
			if (t->junc[i])
				junc_put(nt, n - 1, t->junc[i]);
		free(t->junc);
		t->junc = nt;
		t->jmask = n - 1;
	}
	t->n_junc += (size_t)junc_put(t->junc, t->jmask, ~junc_key(c, d));
	return 0;
}

static int trie_add(struct fg_tokenizer *t, const char *s, size_t n, int32_t added_idx, struct fg_err *err)
{
	int32_t node = -1;
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		unsigned char b = (unsigned char)s[i];
		int32_t *link = node < 0 ? &t->trie_root[b] : &t->trie[node].child;
		int32_t cur = *link, found = -1;

		if (node < 0)
			found = cur;
		else
			for (; cur >= 0; cur = t->trie[cur].sibling)
				if (t->trie[cur].byte == b) {
					found = cur;
					break;
				}
		if (found < 0) {
			if ((rc = grow_array((void **)&t->trie, &t->trie_cap, t->n_trie + 1, sizeof(*t->trie),
					     err)))
				return rc;
			link = node < 0 ? &t->trie_root[b] : &t->trie[node].child; /* realloc moved it */
			found = (int32_t)t->n_trie++;
			t->trie[found].byte = b;
			t->trie[found].child = -1;
			t->trie[found].added = -1;
			t->trie[found].sibling = node < 0 ? -1 : *link;
			*link = found;
		}
		node = found;
	}
	t->trie[node].added = added_idx; /* a later duplicate wins, as in a Map */
	return 0;
}

static int load_added(struct fg_tokenizer *t, const struct lctx *l, struct fg_err *err)
{
	size_t n;
	int rc;

	if (!l->n_alist)
		return 0;
	t->added = xcalloc(l->n_alist + 1, sizeof(*t->added), err);
	if (!t->added)
		return FG_ENOMEM;
	for (n = 0; n < l->n_alist; n++) {
		const struct pending_added *p = &l->alist[n];
		const char *content = l->atext.data + p->off;
		struct added *a;

		if (!p->has_content || !p->has_id || p->id < 0 || p->id >= MAX_IDS)
			return fg_err_set(err, FG_EFORMAT, "added_tokens[%zu]: needs content and a valid id", n);
		if (!p->len)
			continue;
		a = &t->added[t->n_added];
		a->id = (int32_t)p->id;
		a->lstrip = p->lstrip;
		a->rstrip = p->rstrip;
		a->special = p->special;
		a->off = (uint32_t)t->arena.len;
		a->len = p->len;
		if ((rc = add_piece(t, content, a->len, a->id, err)))
			return rc;
		if ((rc = trie_add(t, content, a->len, (int32_t)t->n_added, err)))
			return rc;
		t->n_added++;
	}
	return 0;
}

static int build(struct fg_tokenizer *t, struct lctx *l, size_t n_vocab_ents, struct fg_err *err)
{
	const cJSON *m = l->model, *o;
	const char *type = fg_json_str(m, "type"), *unk;
	size_t i, cap, pos;
	int32_t max_id = -1;
	int rc;

	if (!type) {
		if (!l->saw_merges)
			return fg_err_set(err, FG_EUNSUPPORTED,
					  "model without type or merges (WordPiece or legacy): not supported, only BPE");
	} else if (strcmp(type, "BPE"))
		return fg_err_set(err, FG_EUNSUPPORTED, "model type %s is not supported, only BPE", type);
	if (!l->saw_vocab)
		return fg_err_set(err, FG_EFORMAT, "model has no vocab");
	o = cJSON_GetObjectItemCaseSensitive(m, "dropout");
	if (!is_null(o) && !(cJSON_IsNumber(o) && o->valuedouble == 0))
		return fg_err_set(err, FG_EUNSUPPORTED, "BPE dropout is not supported");
	o = cJSON_GetObjectItemCaseSensitive(m, "continuing_subword_prefix");
	if (!is_null(o) && !(cJSON_IsString(o) && !*o->valuestring))
		return fg_err_set(err, FG_EUNSUPPORTED, "BPE continuing_subword_prefix is not supported");
	o = cJSON_GetObjectItemCaseSensitive(m, "end_of_word_suffix");
	if (!is_null(o) && !(cJSON_IsString(o) && !*o->valuestring))
		return fg_err_set(err, FG_EUNSUPPORTED, "BPE end_of_word_suffix is not supported");
	t->byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "byte_fallback"));
	t->fuse_unk = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "fuse_unk"));
	t->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "ignore_merges"));

	/* added tokens come after the vocabulary entries, so they override them */
	if ((rc = load_added(t, l, err)))
		return rc;
	for (i = 0; i < t->n_ents; i++)
		if (t->ents[i].id > max_id)
			max_id = t->ents[i].id;
	t->n_ids = max_id + 1;
	t->piece_off = xcalloc((size_t)t->n_ids + 1, sizeof(uint32_t), err);
	t->piece_len = xcalloc((size_t)t->n_ids + 1, sizeof(uint32_t), err);
	t->tflags = xcalloc((size_t)t->n_ids + 1, 1, err);
	if (!t->piece_off || !t->piece_len || !t->tflags)
		return FG_ENOMEM;
	for (i = 0; i < (size_t)t->n_ids; i++)
		t->piece_len[i] = UINT32_MAX;
	for (i = 0; i < t->n_ents; i++) {
		t->piece_off[t->ents[i].id] = t->ents[i].off;
		t->piece_len[t->ents[i].id] = t->ents[i].len;
	}
	for (i = 0; i < t->n_added; i++)
		t->tflags[t->added[i].id] |= FG_TOK_F_ADDED | (t->added[i].special ? FG_TOK_F_SPECIAL : 0);
	(void)n_vocab_ents;

	/* piece -> id; a later entry with the same piece replaces the earlier one */
	for (cap = 16; cap < t->n_ents + t->n_ents / 2; cap *= 2)
		;
	t->vmask = cap - 1;
	if (!(t->vslots = big_alloc(cap, sizeof(*t->vslots), &t->vslots_bytes, err)))
		return FG_ENOMEM; /* zeroed: all empty */
	for (i = 0; i < t->n_ents; i++) {
		int64_t v = vocab_slot(t, piece_of(t, &t->ents[i]), t->ents[i].len);

		if (v >= 0)
			t->vslots[v].id = t->ents[i].id;
		else
			vocab_insert_slot(t, &t->ents[i]);
	}

	unk = fg_json_str(m, "unk_token");
	t->unk_id = unk ? lookup_id(t, unk, strlen(unk)) : -1;
	for (i = 0; i < 256; i++) {
		char name[7] = { '<', '0', 'x', "0123456789ABCDEF"[i >> 4], "0123456789ABCDEF"[i & 15], '>', 0 };

		t->byte_id[i] = lookup_id(t, name, 6);
		if (t->byte_id[i] >= 0)
			t->tflags[t->byte_id[i]] |= FG_TOK_F_BYTE;
	}
	for (i = 0; i < 128; i++) {
		char ch = (char)i;

		t->ascii_id[i] = lookup_id(t, &ch, 1);
	}
	t->bos_id = lookup_id(t, "<bos>", 5);
	t->eos_id = lookup_id(t, "<eos>", 5);

	/* merges: (left id, right id) -> rank, result id; a later duplicate wins */
	for (cap = 16; cap < l->n_merges * 2; cap *= 2)
		;
	t->mmask = cap - 1;
	if (!(t->mslots = big_alloc(cap, sizeof(*t->mslots), &t->mslots_bytes, err)))
		return FG_ENOMEM;
	/* zeroed: all empty. The pieces are resolved in batches: first every
	 * hash of a batch, fetching its vocabulary slot, then the lookups, whose
	 * cache misses thus overlap */
	for (i = 0, pos = 0; i < l->n_merges; i += MERGE_BATCH) {
		uint64_t hs[3 * MERGE_BATCH], keys[MERGE_BATCH];
		int32_t res[MERGE_BATCH];
		struct {
			const char *a;
			uint16_t a_len, b_len;
		} mb[MERGE_BATCH], *pm;
		size_t k, nb = l->n_merges - i < MERGE_BATCH ? l->n_merges - i : MERGE_BATCH;

		for (k = 0; k < nb; k++) {
			const char *a;

			pm = &mb[k];
			memcpy(&pm->a_len, l->mtext.data + pos, 2);
			memcpy(&pm->b_len, l->mtext.data + pos + 2, 2);
			pm->a = a = l->mtext.data + pos + 4;
			pos += 4 + (size_t)pm->a_len + pm->b_len;
			hs[3 * k] = hash_bytes(a, pm->a_len);
			hs[3 * k + 1] = hash_bytes(a + pm->a_len, pm->b_len);
			hs[3 * k + 2] = hash_bytes(a, (size_t)pm->a_len + pm->b_len);
			__builtin_prefetch(&t->vslots[hs[3 * k] & t->vmask]);
			__builtin_prefetch(&t->vslots[hs[3 * k + 1] & t->vmask]);
			__builtin_prefetch(&t->vslots[hs[3 * k + 2] & t->vmask]);
		}
		for (k = 0; k < nb; k++) {
			const char *a = (pm = &mb[k])->a, *b = a + pm->a_len;
			int64_t va = vocab_slot_h(t, a, pm->a_len, hs[3 * k]);
			int64_t vb = vocab_slot_h(t, b, pm->b_len, hs[3 * k + 1]);
			int64_t vr = vocab_slot_h(t, a, (size_t)pm->a_len + pm->b_len, hs[3 * k + 2]);

			if (va < 0 || vb < 0)
				return fg_err_set(err, FG_EFORMAT, "merge %zu: piece '%.*s' is not in the vocabulary",
						  i + k, (int)(va < 0 ? pm->a_len : pm->b_len), va < 0 ? a : b);
			if (vr < 0)
				return fg_err_set(err, FG_EUNSUPPORTED,
						  "merge %zu: result '%.*s' is not in the vocabulary (not supported)",
						  i + k, (int)(pm->a_len + pm->b_len), a);
			if ((rc = note_junction(t, a, pm->a_len, b, pm->b_len, err)))
				return rc;
			keys[k] = pair_key(t->vslots[va].id, t->vslots[vb].id);
			res[k] = t->vslots[vr].id;
			hs[k] = hash_u64(keys[k]); /* hs[k] is no longer needed: 3k >= k */
			__builtin_prefetch(&t->mslots[hs[k] & t->mmask], 1);
		}
		for (k = 0; k < nb; k++) {
			size_t s;

			for (s = hs[k] & t->mmask; t->mslots[s].nkey && t->mslots[s].nkey != ~keys[k];
			     s = (s + 1) & t->mmask)
				;
			if (!t->mslots[s].nkey)
				t->n_merges++;
			t->mslots[s].nkey = ~keys[k];
			t->mslots[s].rank = (int32_t)(i + k);
			t->mslots[s].result = res[k];
		}
	}

	o = cJSON_GetObjectItemCaseSensitive(l->root, "normalizer");
	if (!is_null(o) && (rc = load_normalizer(t, o, err)))
		return fg_err_wrap(err, "normalizer");
	o = cJSON_GetObjectItemCaseSensitive(l->root, "pre_tokenizer");
	if (!is_null(o) && (rc = load_pre_tokenizer(t, o, err)))
		return fg_err_wrap(err, "pre_tokenizer");
	o = cJSON_GetObjectItemCaseSensitive(l->root, "post_processor");
	if (!is_null(o) && (rc = load_post_processor(t, o, err)))
		return fg_err_wrap(err, "post_processor");
	if (t->n_pre)
		t->bos_id = t->tmpl_pre[0];
	o = cJSON_GetObjectItemCaseSensitive(l->root, "decoder");
	t->has_decoder = !is_null(o);
	if (t->has_decoder && (rc = load_decoder(t, o, err)))
		return fg_err_wrap(err, "decoder");
	for (i = 0; i < 256 && t->n_first <= FIRST_MAX; i++)
		if (t->trie_root[i] >= 0 && t->n_first++ < FIRST_MAX)
			t->first[t->n_first - 1] = (unsigned char)i;
	/* raw words: normalizing a word on its own then gives what normalizing
	 * the whole text gives, and the Split (if any) looks for that byte,
	 * which no normalized text holds any more */
	if (t->n_norm == 1 && t->norm[0].kind == N_REPLACE && t->norm[0].pat_len == 1 &&
	    (unsigned char)t->norm[0].pat[0] < 0x80 && t->norm[0].rep_len == 3 &&
	    !memcmp(t->norm[0].rep, "\xe2\x96\x81", 3) && !t->ignore_merges &&
	    (!t->split_behavior || (t->split_len == 1 && t->split_pat[0] == t->norm[0].pat[0]))) {
		t->raw_words = 1;
		t->raw_space = (unsigned char)t->norm[0].pat[0];
	}
	return 0;
}

int fg_tokenizer_load_mem(struct fg_tokenizer **out, const char *json, size_t len, const char *what,
			  struct fg_err *err)
{
	struct fg_tokenizer *t;
	struct lctx l;
	struct jcur c = { json, json, json + len, what, err };
	int rc;

	*out = NULL;
	memset(&l, 0, sizeof(l));
	t = calloc(1, sizeof(*t));
	l.root = cJSON_CreateObject();
	l.model = cJSON_CreateObject();
	if (!t || !l.root || !l.model) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto done;
	}
	l.t = t;
	/* a merge's record is never longer than its JSON ("a b" and a comma, or
	 * ["a","b"] and a comma, hold the 4 bytes of lengths), the last one but
	 * for its comma */
	l.mtext.data = big_alloc(len + 64, 1, &l.mtext_bytes, err);
	if (!l.mtext.data) {
		rc = FG_ENOMEM;
		goto done;
	}
	l.mtext.cap = l.mtext_bytes;
	l.mtext.max = l.mtext_bytes - 1; /* so that fg_buf never reallocates it */
	memset(t->trie_root, 0xff, sizeof(t->trie_root));
	t->unk_id = t->bos_id = t->eos_id = -1;
	jws(&c);
	if (c.p < c.end && *c.p != '{') {
		rc = jfail(&c, "not a JSON object");
		goto done;
	}
	if ((rc = jobject(&c, on_root_member, &l)))
		goto done;
	jws(&c);
	if (c.p != c.end) {
		rc = jfail(&c, "trailing data");
		goto done;
	}
	if (!l.saw_vocab && !cJSON_GetArraySize(l.model)) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: no model", what);
		goto done;
	}
	if ((rc = build(t, &l, t->n_ents, err)))
		fg_err_wrap(err, "%s", what);
	else
		t->stamp = __atomic_add_fetch(&load_count, 1, __ATOMIC_RELAXED);
done:
	cJSON_Delete(l.root);
	cJSON_Delete(l.model);
	fg_buf_release(&l.tmp);
	fg_buf_release(&l.tmp2);
	big_free(l.mtext.data, l.mtext_bytes);
	free(l.alist);
	fg_buf_release(&l.atext);
	if (rc) {
		fg_tokenizer_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int fg_tokenizer_load(struct fg_tokenizer **out, const char *path, struct fg_err *err)
{
	struct fg_buf b = FG_BUF_INIT;
	struct stat st;
	void *map;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fg_err_set(err, FG_EIO, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size == 0) {
		close(fd);
		/* not a plain file (a pipe, say) or empty: read it whole */
		if ((rc = fg_file_read(path, MAX_TOKENIZER_BYTES, &b, err)))
			return rc;
		rc = fg_tokenizer_load_mem(out, b.data ? b.data : "", b.len, path, err);
		fg_buf_release(&b);
		return rc;
	}
	if ((unsigned long long)st.st_size > MAX_TOKENIZER_BYTES) {
		close(fd);
		return fg_err_set(err, FG_EINVAL, "%s: larger than %zu bytes", path, MAX_TOKENIZER_BYTES);
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return fg_err_set(err, FG_EIO, "%s: mmap: %s", path, strerror(errno));
	rc = fg_tokenizer_load_mem(out, map, (size_t)st.st_size, path, err);
	munmap(map, (size_t)st.st_size);
	return rc;
}

static void free_steps(struct step *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(s[i].pat);
		free(s[i].rep);
	}
	free(s);
}

void fg_tokenizer_free(struct fg_tokenizer *t)
{
	if (!t)
		return;
	fg_buf_release(&t->arena);
	free(t->piece_off);
	free(t->piece_len);
	free(t->tflags);
	free(t->ents);
	big_free(t->vslots, t->vslots_bytes);
	big_free(t->mslots, t->mslots_bytes);
	free(t->added);
	free(t->trie);
	free_steps(t->norm, t->n_norm);
	free(t->split_pat);
	free(t->junc);
	free(t->tmpl_pre);
	free(t->tmpl_post);
	free_steps(t->dec, t->n_dec);
	free(t);
}

/* ---- encoding ---- */

struct section {
	size_t a, b;
	int32_t added; /* index into tok->added, or -1 for text */
};

/* A word-cache slot (tag 0: empty), 32 bytes, so that a lookup of a short
 * word reads one cache line: the word's bytes when it has at most KEY_INLINE
 * (else their offset in the scratch's cache arena, in key's first 4 bytes),
 * its ids when it has at most IDS_INLINE (else ids[0] is their offset in the
 * arena). The tag holds high bits of the word's hash. */
#define KEY_INLINE 14
#define IDS_INLINE 3
struct cslot {
	uint32_t tag;
	uint8_t klen, n_ids;
	char key[KEY_INLINE];
	int32_t ids[IDS_INLINE];
};
_Static_assert(sizeof(struct cslot) == 32, "a word-cache slot is 32 bytes");

struct fg_tok_scratch {
	struct fg_buf norm, norm2; /* normalized text, and the other half of a swap */
	struct fg_buf wnorm;       /* a raw word normalized (raw_words) */
	size_t *pieces; /* pairs of [a, b) offsets into the normalized text */
	size_t n_pieces, pieces_cap;
	int32_t *sym_id, *sym_next, *sym_prev;
	uint32_t *sym_off, *sym_len;
	uint64_t *sym_hash; /* hash of the pair a symbol starts */
	size_t sym_cap;
	struct hent *heap;
	size_t heap_n, heap_cap;
	/* merges of id pairs looked up lately, direct-mapped by the pair's hash:
	 * words share most of their pairs, and this stays in the core's cache
	 * where the 16 MiB merge table cannot */
	struct pent {
		uint64_t nkey; /* ~pair_key, so that the zeroed table is empty */
		int32_t rank;  /* -1: no merge */
		int32_t result;
	} pc[PAIR_CACHE];
	/* ids of multi-byte characters seen: direct-mapped by code point */
	uint32_t cp_key[CP_CACHE];
	int32_t cp_id[CP_CACHE];
	/* word cache: n_slots is 0 or a power of two */
	struct cslot *cache;
	size_t n_slots, n_cached;
	size_t cache_bytes; /* mapped size of cache (big_alloc), 0 when from malloc */
	struct fg_buf carena;
	uint64_t stamp; /* the tokenizer the caches above were filled for */
};

int fg_tok_scratch_new(struct fg_tok_scratch **out, struct fg_err *err)
{
	struct fg_tok_scratch *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	*out = s; /* the word cache's table comes with the first word */
	return 0;
}

static void cache_free(struct cslot *c, size_t bytes);

void fg_tok_scratch_free(struct fg_tok_scratch *s)
{
	if (!s)
		return;
	fg_buf_release(&s->norm);
	fg_buf_release(&s->norm2);
	fg_buf_release(&s->wnorm);
	free(s->pieces);
	free(s->sym_id);
	free(s->sym_next);
	free(s->sym_prev);
	free(s->sym_off);
	free(s->sym_len);
	free(s->sym_hash);
	free(s->heap);
	cache_free(s->cache, s->cache_bytes);
	fg_buf_release(&s->carena);
	free(s);
}

struct out_ids {
	int32_t **ids;
	size_t *n, *cap;
};

static inline int emit(struct out_ids *o, int32_t id, struct fg_err *err)
{
	int rc;

	if (__builtin_expect(*o->n == *o->cap, 0) &&
	    (rc = grow_array((void **)o->ids, o->cap, *o->n + 1, sizeof(**o->ids), err)))
		return rc;
	(*o->ids)[(*o->n)++] = id;
	return 0;
}

/* A piece with no token of its own: its bytes' <0xNN> tokens, else unk. */
static int emit_unknown(const struct fg_tokenizer *t, struct out_ids *o, const unsigned char *s, size_t n,
			struct fg_err *err)
{
	size_t i;
	int rc;

	if (t->byte_fallback) {
		for (i = 0; i < n && t->byte_id[s[i]] >= 0; i++)
			;
		if (i == n) {
			for (i = 0; i < n; i++)
				if ((rc = emit(o, t->byte_id[s[i]], err)))
					return rc;
			return 0;
		}
	}
	if (t->unk_id < 0)
		return fg_err_set(err, FG_EUNSUPPORTED, "no token for '%.*s' and no unk_token", (int)n,
				  (const char *)s);
	return emit(o, t->unk_id, err);
}

/* A candidate merge of symbols left and right, valid while both still hold
 * the ids it was computed from (a merged symbol always gets a new, longer
 * piece, so equal ids mean nothing changed). Ordered by key = rank << 32 |
 * left: lowest rank first, then the leftmost. */
struct hent {
	uint64_t key;
	int32_t right, result, idl, idr;
};

static void heap_push(struct fg_tok_scratch *s, const struct hent *e)
{
	size_t i = s->heap_n++;

	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (s->heap[p].key <= e->key)
			break;
		s->heap[i] = s->heap[p];
		i = p;
	}
	s->heap[i] = *e;
}

static void heap_pop(struct fg_tok_scratch *s, struct hent *top)
{
	struct hent last = s->heap[--s->heap_n];
	size_t i = 0, n = s->heap_n;

	*top = s->heap[0];
	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && s->heap[c + 1].key < s->heap[c].key)
			c++;
		if (s->heap[c].key >= last.key)
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (n)
		s->heap[i] = last;
}

static int sym_reserve(struct fg_tok_scratch *s, size_t n, struct fg_err *err)
{
	size_t cap = s->sym_cap;
	int rc;

	if (n <= s->sym_cap)
		return 0;
	if ((rc = grow_array((void **)&s->sym_id, &cap, n, sizeof(int32_t), err)))
		return rc;
	cap = s->sym_cap;
	if ((rc = grow_array((void **)&s->sym_next, &cap, n, sizeof(int32_t), err)))
		return rc;
	cap = s->sym_cap;
	if ((rc = grow_array((void **)&s->sym_prev, &cap, n, sizeof(int32_t), err)))
		return rc;
	cap = s->sym_cap;
	if ((rc = grow_array((void **)&s->sym_off, &cap, n, sizeof(uint32_t), err)))
		return rc;
	cap = s->sym_cap;
	if ((rc = grow_array((void **)&s->sym_len, &cap, n, sizeof(uint32_t), err)))
		return rc;
	cap = s->sym_cap;
	if ((rc = grow_array((void **)&s->sym_hash, &cap, n, sizeof(uint64_t), err)))
		return rc;
	cap = s->heap_cap;
	if ((rc = grow_array((void **)&s->heap, &cap, 3 * n + 3, sizeof(struct hent), err)))
		return rc;
	s->heap_cap = cap;
	s->sym_cap = n;
	return 0;
}

/* Starts looking up the pair of ids (a, b): returns its hash, and unless the
 * pair cache holds it fetches the merge table's slot ahead of time, so that
 * the misses of several pairs overlap. */
static inline uint64_t pair_start(const struct fg_tokenizer *t, const struct fg_tok_scratch *s, int32_t a,
				  int32_t b)
{
	uint64_t key = pair_key(a, b), h = hash_u64(key);

	if (s->pc[h & (PAIR_CACHE - 1)].nkey != ~key)
		__builtin_prefetch(&t->mslots[h & t->mmask]);
	return h;
}

/* The merge of ids a and b (rank -1: none) through the pair cache; h is
 * the pair's hash from pair_start. */
static inline const struct pent *pair_merge(const struct fg_tokenizer *t, struct fg_tok_scratch *s, int32_t a,
					    int32_t b, uint64_t h)
{
	uint64_t key = pair_key(a, b);
	struct pent *e = &s->pc[h & (PAIR_CACHE - 1)];

	if (e->nkey != ~key) {
		const struct mslot *m = merge_find_from(t, key, h & t->mmask);

		e->nkey = ~key;
		e->rank = m ? m->rank : -1;
		e->result = m ? m->result : -1;
	}
	return e;
}

/* Queues the merge of symbol i with the next one, if their pair has one;
 * h is the pair's hash from pair_start. */
static void push_pair(const struct fg_tokenizer *t, struct fg_tok_scratch *s, int32_t i, uint64_t h)
{
	int32_t j = s->sym_next[i];
	const struct pent *e = pair_merge(t, s, s->sym_id[i], s->sym_id[j], h);

	if (e->rank >= 0) {
		struct hent he = { ((uint64_t)(uint32_t)e->rank << 32) | (uint32_t)i, j, e->result, s->sym_id[i],
				   s->sym_id[j] };

		heap_push(s, &he);
	}
}

/* The merges on symbols 0 .. n - 1 (at most SMALL_BPE, n >= 2) of a short
 * word: each time the lowest rank among the adjacent pairs, found by a scan
 * (the leftmost on ties: a strict < going left to right), as the heap does
 * for longer words, with less work per merge. rank[i]: of the pair symbol i
 * starts (as unsigned: no merge is the largest). */
static void bpe_small(const struct fg_tokenizer *t, struct fg_tok_scratch *s, size_t n)
{
	uint32_t rank[SMALL_BPE];
	int32_t res[SMALL_BPE], *id = s->sym_id, *nx = s->sym_next, *pv = s->sym_prev;
	size_t i;

	for (i = 0; i + 1 < n; i++)
		s->sym_hash[i] = id[i] >= 0 && id[i + 1] >= 0 ? pair_start(t, s, id[i], id[i + 1]) : 0;
	for (i = 0; i + 1 < n; i++) {
		const struct pent *e;

		rank[i] = UINT32_MAX;
		if (id[i] >= 0 && id[i + 1] >= 0 && (e = pair_merge(t, s, id[i], id[i + 1], s->sym_hash[i]))->rank >= 0) {
			rank[i] = (uint32_t)e->rank;
			res[i] = e->result;
		}
	}
	rank[n - 1] = UINT32_MAX;
	for (;;) {
		uint32_t br = UINT32_MAX;
		int32_t k, a = -1, b, c, p;
		const struct pent *e;

		for (k = 0; k >= 0; k = nx[k])
			if (rank[k] < br) {
				br = rank[k];
				a = k;
			}
		if (a < 0)
			return;
		b = nx[a];
		id[a] = res[a];
		s->sym_len[a] += s->sym_len[b];
		s->sym_len[b] = 0;
		c = nx[a] = nx[b];
		if (c >= 0)
			pv[c] = a;
		rank[a] = UINT32_MAX;
		if (c >= 0 && id[c] >= 0 &&
		    (e = pair_merge(t, s, id[a], id[c], pair_start(t, s, id[a], id[c])))->rank >= 0) {
			rank[a] = (uint32_t)e->rank;
			res[a] = e->result;
		}
		p = pv[a];
		if (p >= 0 && id[p] >= 0) {
			rank[p] = UINT32_MAX;
			if ((e = pair_merge(t, s, id[p], id[a], pair_start(t, s, id[p], id[a])))->rank >= 0) {
				rank[p] = (uint32_t)e->rank;
				res[p] = e->result;
			}
		}
	}
}

/* BPE over one word w (len bytes); appends its ids. */
static int bpe_word(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *w, size_t len,
		    struct out_ids *o, struct fg_err *err)
{
	const unsigned char *u = (const unsigned char *)w;
	size_t i, nsym = 0;
	int32_t k;
	int rc;

	if (len > INT32_MAX / 2)
		return fg_err_set(err, FG_EINVAL, "word of %zu bytes is too long", len);
	if ((rc = sym_reserve(s, len + 1, err)))
		return rc;
	for (i = 0; i < len;) {
		uint32_t cp;
		size_t l = fg_utf8_len(u + i, len - i, &cp);
		int32_t id;

		if (!l) {
			l = 1;
			id = -1;
		} else if (l == 1) {
			id = t->ascii_id[u[i]];
		} else {
			uint32_t slot = (cp * 2654435761u) >> 20;

			if (s->cp_key[slot] == cp + 1) {
				id = s->cp_id[slot];
			} else {
				id = lookup_id(t, w + i, l);
				s->cp_key[slot] = cp + 1;
				s->cp_id[slot] = id;
			}
		}
		s->sym_id[nsym] = id;
		s->sym_off[nsym] = (uint32_t)i;
		s->sym_len[nsym] = (uint32_t)l;
		s->sym_prev[nsym] = (int32_t)nsym - 1;
		s->sym_next[nsym] = (int32_t)nsym + 1;
		nsym++;
		i += l;
	}
	if (!nsym)
		return 0;
	s->sym_next[nsym - 1] = -1;
	s->heap_n = 0;
	if (nsym <= SMALL_BPE) {
		if (nsym > 1)
			bpe_small(t, s, nsym);
		goto out;
	}
	for (i = 0; i + 1 < nsym; i++)
		if (s->sym_id[i] >= 0 && s->sym_id[i + 1] >= 0)
			s->sym_hash[i] = pair_start(t, s, s->sym_id[i], s->sym_id[i + 1]);
	for (i = 0; i + 1 < nsym; i++)
		if (s->sym_id[i] >= 0 && s->sym_id[i + 1] >= 0)
			push_pair(t, s, (int32_t)i, s->sym_hash[i]);
	while (s->heap_n) {
		struct hent top;
		int32_t a, b, nx;

		heap_pop(s, &top);
		a = (int32_t)(uint32_t)top.key;
		b = top.right;
		if (s->sym_len[a] == 0 || s->sym_next[a] != b || s->sym_id[a] != top.idl || s->sym_id[b] != top.idr)
			continue;
		s->sym_id[a] = top.result;
		s->sym_len[a] += s->sym_len[b];
		s->sym_len[b] = 0; /* dead */
		nx = s->sym_next[b];
		s->sym_next[a] = nx;
		if (nx >= 0)
			s->sym_prev[nx] = a;
		{
			int32_t pv = s->sym_prev[a];
			int left = pv >= 0 && s->sym_id[pv] >= 0, right = nx >= 0 && s->sym_id[nx] >= 0;
			uint64_t h1 = left ? pair_start(t, s, s->sym_id[pv], s->sym_id[a]) : 0;
			uint64_t h2 = right ? pair_start(t, s, s->sym_id[a], s->sym_id[nx]) : 0;

			if (left)
				push_pair(t, s, pv, h1);
			if (right)
				push_pair(t, s, a, h2);
		}
	}
out:
	for (k = 0; k >= 0; k = s->sym_next[k]) {
		if (s->sym_id[k] >= 0)
			rc = emit(o, s->sym_id[k], err);
		else
			rc = emit_unknown(t, o, u + s->sym_off[k], s->sym_len[k], err);
		if (rc)
			return rc;
	}
	return 0;
}

/* Word-cache tables of 2 MiB and more are mapped (zeroed, on huge pages):
 * first touches of fresh 4 KiB pages were a tenth of an encode's time. */
static struct cslot *cache_alloc(size_t n, size_t *bytes, struct fg_err *err)
{
	struct cslot *c;

	*bytes = 0;
	if (n * sizeof(*c) >= ((size_t)2 << 20))
		return big_alloc(n, sizeof(*c), bytes, err);
	if (!(c = aligned_alloc(64, n * sizeof(*c)))) /* whole slots in each cache line */
		return fg_err_set(err, FG_ENOMEM, "out of memory"), NULL;
	return memset(c, 0, n * sizeof(*c));
}

static void cache_free(struct cslot *c, size_t bytes)
{
	if (bytes)
		big_free(c, bytes);
	else
		free(c);
}

static void cache_reset(struct fg_tok_scratch *s)
{
	memset(s->cache, 0, s->n_slots * sizeof(*s->cache));
	s->n_cached = 0;
	fg_buf_reset(&s->carena);
}

static size_t cache_free_slot(const struct fg_tok_scratch *s, uint64_t h)
{
	size_t i;

	for (i = h & (s->n_slots - 1); s->cache[i].tag; i = (i + 1) & (s->n_slots - 1))
		;
	return i;
}

static const char *cache_key(const struct fg_tok_scratch *s, const struct cslot *c)
{
	uint32_t off;

	if (c->klen <= KEY_INLINE)
		return c->key;
	memcpy(&off, c->key, sizeof(off));
	return s->carena.data + off;
}

/* Makes room for one more word: a bigger table (rehashing), or, at the
 * largest size or with too many arena bytes, an empty one. */
static int cache_room(struct fg_tok_scratch *s, struct fg_err *err)
{
	struct cslot *old = s->cache, *ns;
	size_t i, n, old_n = s->n_slots, old_bytes = s->cache_bytes;

	if (old_n && (s->n_cached + 1) * 2 <= old_n && s->carena.len <= CACHE_ARENA_MAX)
		return 0;
	if (old_n >= CACHE_SLOTS_MAX || s->carena.len > CACHE_ARENA_MAX) {
		cache_reset(s);
		return 0;
	}
	n = old_n ? old_n * 2 : CACHE_SLOTS_MIN;
	if (!(ns = cache_alloc(n, &s->cache_bytes, err))) {
		s->cache_bytes = old_bytes;
		return FG_ENOMEM;
	}
	s->cache = ns;
	s->n_slots = n;
	for (i = 0; i < old_n; i++)
		if (old[i].tag)
			ns[cache_free_slot(s, hash_bytes(cache_key(s, &old[i]), old[i].klen))] = old[i];
	cache_free(old, old_bytes);
	return 0;
}

/* memcmp(a, b, n) == 0 for the short keys of the word cache, without a call:
 * whole 8-byte words, then the tail as overlapping loads. */
static inline int key_eq(const char *a, const char *b, size_t n)
{
	uint64_t x, y;
	size_t i;

	if (n < 8) {
		uint32_t p, q;

		if (n < 4) {
			for (i = 0; i < n; i++)
				if (a[i] != b[i])
					return 0;
			return 1;
		}
		memcpy(&p, a, 4);
		memcpy(&q, b, 4);
		if (p != q)
			return 0;
		memcpy(&p, a + n - 4, 4);
		memcpy(&q, b + n - 4, 4);
		return p == q;
	}
	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x != y)
			return 0;
	}
	memcpy(&x, a + n - 8, 8);
	memcpy(&y, b + n - 8, 8);
	return x == y;
}

/* Appends the n ids at src to o (which may not alias src). */
static int emit_n(struct out_ids *o, const void *src, size_t n, struct fg_err *err)
{
	int rc;

	if (*o->n + n > *o->cap &&
	    (rc = grow_array((void **)o->ids, o->cap, *o->n + n, sizeof(int32_t), err)))
		return rc;
	memcpy(*o->ids + *o->n, src, n * sizeof(int32_t));
	*o->n += n;
	return 0;
}

/* BPE of a word of the text as the model sees it: a raw word (raw_words)
 * is normalized first, into s->wnorm. */
static int bpe_text(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *w, size_t len,
		    struct out_ids *o, struct fg_err *err)
{
	const char *p = w, *q, *end = w + len;
	char *d;
	int rc;

	if (!t->raw_words || !(q = memchr(w, t->raw_space, len)))
		return bpe_word(t, s, w, len, o, err);
	if (len > SIZE_MAX / 3 - 1)
		return fg_err_set(err, FG_ENOMEM, "word too long");
	fg_buf_reset(&s->wnorm);
	if ((rc = fg_buf_reserve(&s->wnorm, 3 * len, err)))
		return rc;
	d = s->wnorm.data;
	do {
		memcpy(d, p, (size_t)(q - p));
		d += q - p;
		memcpy(d, "\xe2\x96\x81", 3);
		d += 3;
		p = q + 1;
	} while (p < end && (q = memchr(p, t->raw_space, (size_t)(end - p))));
	memcpy(d, p, (size_t)(end - p));
	d += end - p;
	return bpe_word(t, s, s->wnorm.data, (size_t)(d - s->wnorm.data), o, err);
}

/* BPE of a word of 1 to CACHE_MAX_WORD bytes, whose hash_bytes is h,
 * through the scratch's cache. */
static int word_h(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *w, size_t len,
		  uint64_t h, struct out_ids *o, struct fg_err *err)
{
	static const char pad[4];
	uint32_t tag = (uint32_t)(h >> 32) | 1, off;
	size_t i, before, k;
	struct cslot *c;
	int rc;

	if (s->n_slots)
		for (i = h & (s->n_slots - 1); (c = &s->cache[i])->tag; i = (i + 1) & (s->n_slots - 1)) {
			if (c->tag != tag || c->klen != len || !key_eq(cache_key(s, c), w, len))
				continue;
			if (c->n_ids > IDS_INLINE) {
				memcpy(&off, c->ids, sizeof(off));
				return emit_n(o, s->carena.data + off, c->n_ids, err);
			}
			if (__builtin_expect(*o->n + IDS_INLINE > *o->cap, 0) &&
			    (rc = grow_array((void **)o->ids, o->cap, *o->n + IDS_INLINE, sizeof(int32_t), err)))
				return rc;
			memcpy(*o->ids + *o->n, c->ids, sizeof(c->ids));
			*o->n += c->n_ids;
			return 0;
		}
	before = *o->n;
	if ((rc = bpe_text(t, s, w, len, o, err)) || (rc = cache_room(s, err)))
		return rc;
	k = *o->n - before;
	c = &s->cache[cache_free_slot(s, h)];
	memset(c, 0, sizeof(*c));
	if (len <= KEY_INLINE) {
		memcpy(c->key, w, len);
	} else {
		off = (uint32_t)s->carena.len;
		memcpy(c->key, &off, sizeof(off));
		if ((rc = fg_buf_append(&s->carena, w, len, err)))
			return rc;
	}
	if (k <= IDS_INLINE) {
		memcpy(c->ids, *o->ids + before, k * sizeof(int32_t));
	} else {
		if ((rc = fg_buf_append(&s->carena, pad, (4 - (s->carena.len & 3)) & 3, err)))
			return rc;
		off = (uint32_t)s->carena.len;
		memcpy(c->ids, &off, sizeof(off));
		if ((rc = fg_buf_append(&s->carena, *o->ids + before, k * sizeof(int32_t), err)))
			return rc;
	}
	c->klen = (uint8_t)len;
	c->n_ids = (uint8_t)k;
	c->tag = tag;
	s->n_cached++;
	return 0;
}

/* BPE of a word through the scratch's cache. */
static int word(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *w, size_t len,
		struct out_ids *o, struct fg_err *err)
{
	if (len > CACHE_MAX_WORD || !len)
		return bpe_text(t, s, w, len, o, err);
	return word_h(t, s, w, len, hash_bytes(w, len), o, err);
}

/* The code point of the character at u[0, rem) as the model sees it (a raw
 * space is "▁", an invalid byte CP_INVALID); its length in *l. */
static inline uint32_t model_cp(const struct fg_tokenizer *t, const unsigned char *u, size_t rem, size_t *l)
{
	uint32_t cp;

	if (u[0] < 0x80) {
		*l = 1;
		return t->raw_words && u[0] == t->raw_space ? WB_CP : u[0];
	}
	if (!(*l = fg_utf8_len(u, rem, &cp))) {
		*l = 1;
		return CP_INVALID;
	}
	return cp;
}

/* A word longer than CUT_MIN bytes (unspaced Chinese, Japanese or Thai, a
 * long identifier) is cut further between any two characters that are no
 * junction: no merge can join them, so BPE on the parts is BPE on the whole
 * (see cut_words), and the parts are short and repeat. */
static int long_word(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *w, size_t len,
		     struct out_ids *o, struct fg_err *err)
{
	const unsigned char *u = (const unsigned char *)w;
	size_t i, l, start = 0;
	uint32_t prev, cp;
	int rc;

	if (len <= CUT_MIN)
		return word(t, s, w, len, o, err);
	prev = model_cp(t, u, len, &l);
	for (i = l; i < len; i += l) {
		cp = model_cp(t, u + i, len - i, &l);
		if (!junction(t, prev, cp)) {
			if ((rc = word(t, s, w + start, i - start, o, err)))
				return rc;
			start = i;
		}
		prev = cp;
	}
	return word(t, s, w + start, len - start, o, err);
}

/* Words p[a, a + len) cut from a text, encoded in a batch: first every
 * short word's hash, fetching its word-cache slot, then the lookups, whose
 * cache misses thus overlap. Empties the batch (*nb = 0). */
struct wspan {
	size_t a, len;
	uint64_t h;
};

static int word_batch(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *p, struct wspan *b,
		      size_t *nb, struct out_ids *o, struct fg_err *err)
{
	size_t k, n = *nb;
	int rc;

	*nb = 0;
	for (k = 0; k < n; k++)
		if (b[k].len <= CUT_MIN) {
			b[k].h = hash_bytes(p + b[k].a, b[k].len);
			if (s->n_slots)
				__builtin_prefetch(&s->cache[b[k].h & (s->n_slots - 1)]);
		}
	for (k = 0; k < n; k++)
		if ((rc = b[k].len <= CUT_MIN ? word_h(t, s, p + b[k].a, b[k].len, b[k].h, o, err)
					      : long_word(t, s, p + b[k].a, b[k].len, o, err)))
			return rc;
	return 0;
}

/* BPE over text p[0, n) (normalized, or raw with raw_words), cut into words.
 * A cut between adjacent characters c and d is exact when (c, d) is no
 * junction: the first merge to make a symbol spanning the cut would join a
 * symbol ending in c to one starting with d, and there is none; the merges
 * on either side then happen as they would alone, in the same order (the
 * lowest rank first: each side's candidates are the same as alone). Cheap
 * first cuts: before each "▁" (raw: each raw space) whose preceding
 * character is no junction with "▁"; "▁" is E2 96 81 and E2 never continues
 * a sequence, so memchr finds every one, and the character before it is
 * decoded backwards. */
static int cut_words(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *p, size_t n,
		     struct out_ids *o, struct fg_err *err)
{
	const unsigned char *u = (const unsigned char *)p, *q;
	size_t i = 1, start = 0, step = t->raw_words ? 1 : 3, nb = 0;
	unsigned char mark = t->raw_words ? t->raw_space : 0xe2;
	struct wspan b[WORD_BATCH];
	int rc;

	while (i + step <= n && (q = memchr(u + i, mark, n - i - (step - 1)))) {
		uint32_t cp;

		i = (size_t)(q - u);
		if (!t->raw_words && (q[1] != 0x96 || q[2] != 0x81)) {
			i++;
			continue;
		}
		if (t->raw_words && q[-1] == t->raw_space) {
			cp = WB_CP;
		} else {
			last_cp(u + start, q, &cp);
			if (cp == UINT32_MAX)
				cp = CP_INVALID;
		}
		if (!junction(t, cp, WB_CP)) {
			b[nb].a = start;
			b[nb++].len = i - start;
			if (nb == WORD_BATCH && (rc = word_batch(t, s, p, b, &nb, o, err)))
				return rc;
			start = i;
		}
		i += step;
	}
	if (n > start) {
		b[nb].a = start;
		b[nb++].len = n - start;
	}
	return word_batch(t, s, p, b, &nb, o, err);
}

/* The model on one pre-token: ignore_merges, then BPE on words. */
static int model_piece(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *p, size_t n,
		       struct out_ids *o, struct fg_err *err)
{
	if (t->ignore_merges) {
		int32_t id = lookup_id(t, p, n);

		if (id >= 0)
			return emit(o, id, err);
	}
	return cut_words(t, s, p, n, o, err);
}

static int add_piece_span(struct fg_tok_scratch *s, size_t a, size_t b, struct fg_err *err)
{
	int rc;

	if (a >= b)
		return 0;
	if ((rc = grow_array((void **)&s->pieces, &s->pieces_cap, s->n_pieces + 2, sizeof(size_t), err)))
		return rc;
	s->pieces[s->n_pieces++] = a;
	s->pieces[s->n_pieces++] = b;
	return 0;
}

/* The Split pre-tokenizer over x[0, n) into s->pieces. */
static int pre_tokenize(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *x, size_t n,
			struct fg_err *err)
{
	size_t pos = 0, seg = 0, pl = t->split_len;
	int rc;

	s->n_pieces = 0;
	if (!t->split_behavior)
		return add_piece_span(s, 0, n, err);
	while (pos + pl <= n) {
		const char *hit = pl == 1 ? memchr(x + pos, t->split_pat[0], n - pos)
					  : memmem(x + pos, n - pos, t->split_pat, pl);
		size_t m, me;

		if (!hit)
			break;
		m = (size_t)(hit - x);
		me = m + pl;
		switch (t->split_behavior) {
		case SPLIT_REMOVED:
			rc = add_piece_span(s, seg, m, err);
			seg = me;
			break;
		case SPLIT_ISOLATED:
			if (!(rc = add_piece_span(s, seg, m, err)))
				rc = add_piece_span(s, m, me, err);
			seg = me;
			break;
		case SPLIT_MERGED_PREV:
			rc = add_piece_span(s, seg, me, err);
			seg = me;
			break;
		case SPLIT_MERGED_NEXT:
			rc = add_piece_span(s, seg, m, err);
			seg = m;
			break;
		default: /* SPLIT_CONTIGUOUS: runs of matches form one piece */
			while (me + pl <= n && !memcmp(x + me, t->split_pat, pl))
				me += pl;
			if (!(rc = add_piece_span(s, seg, m, err)))
				rc = add_piece_span(s, m, me, err);
			seg = me;
			break;
		}
		if (rc)
			return rc;
		pos = me;
	}
	return add_piece_span(s, seg, n, err);
}

/* Applies the normalizer steps to x[0, n); the result is *out (x itself when
 * no step changed anything, else s->norm) of *out_len bytes. */
static int normalize(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *x, size_t n,
		     const char **out, size_t *out_len, struct fg_err *err)
{
	const char *in = x;
	size_t in_len = n, k;
	int rc = 0;

	for (k = 0; k < t->n_norm; k++) {
		const struct step *st = &t->norm[k];
		struct fg_buf *d = &s->norm2;

		fg_buf_reset(d);
		if (st->kind == N_PREPEND) {
			if (!in_len)
				continue;
			if ((rc = fg_buf_append(d, st->rep, st->rep_len, err)) ||
			    (rc = fg_buf_append(d, in, in_len, err)))
				return rc;
		} else {
			const char *p = in, *end = in + in_len, *hit;
			size_t bound;
			char *o;

			if (!(hit = memmem(p, in_len, st->pat, st->pat_len)))
				continue;
			/* room for every possible match, then plain copies (one
			 * fg_buf_append per match cost a call per word) */
			if (fg_size_mul(in_len / st->pat_len + 1, st->rep_len, &bound) ||
			    fg_size_add(bound, in_len, &bound))
				return fg_err_set(err, FG_ENOMEM, "text too large to normalize");
			if ((rc = fg_buf_reserve(d, bound, err)))
				return rc;
			o = d->data;
			do {
				memcpy(o, p, (size_t)(hit - p));
				o += hit - p;
				memcpy(o, st->rep, st->rep_len);
				o += st->rep_len;
				p = hit + st->pat_len;
				hit = p >= end ? NULL
					       : st->pat_len == 1 ? memchr(p, st->pat[0], (size_t)(end - p))
								  : memmem(p, (size_t)(end - p), st->pat, st->pat_len);
			} while (hit);
			memcpy(o, p, (size_t)(end - p));
			o += end - p;
			d->len = (size_t)(o - d->data);
			d->data[d->len] = 0;
		}
		{
			struct fg_buf sw = s->norm;

			s->norm = s->norm2;
			s->norm2 = sw;
		}
		in = s->norm.data ? s->norm.data : "";
		in_len = s->norm.len;
	}
	*out = in;
	*out_len = in_len;
	return 0;
}

static int text_section(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *x, size_t n,
			struct out_ids *o, struct fg_err *err)
{
	const char *nx = x;
	size_t nn = n, i, first = *o->n;
	int rc;

	if (t->raw_words) {
		/* normalizing and the Split change nothing but the raw spaces */
		if (n && (rc = cut_words(t, s, x, n, o, err)))
			return rc;
	} else {
		if (t->n_norm && (rc = normalize(t, s, x, n, &nx, &nn, err)))
			return rc;
		if (!nn)
			return 0;
		if ((rc = pre_tokenize(t, s, nx, nn, err)))
			return rc;
		for (i = 0; i < s->n_pieces; i += 2)
			if ((rc = model_piece(t, s, nx + s->pieces[i], s->pieces[i + 1] - s->pieces[i], o, err)))
				return rc;
	}
	if (t->fuse_unk && t->unk_id >= 0) {
		size_t r, w = first;

		for (r = first; r < *o->n && (*o->ids)[r] != t->unk_id; r++)
			;
		for (w = r; r < *o->n; r++)
			if (!((*o->ids)[r] == t->unk_id && w > first && (*o->ids)[w - 1] == t->unk_id))
				(*o->ids)[w++] = (*o->ids)[r];
		*o->n = w;
	}
	return 0;
}

/* The added token spelled exactly by s, or -1. */
static int32_t exact_added(const struct fg_tokenizer *t, const unsigned char *s, size_t n)
{
	int32_t node;
	size_t j;

	if (!n)
		return -1;
	node = t->trie_root[s[0]];
	for (j = 1; node >= 0 && j < n; j++)
		for (node = t->trie[node].child; node >= 0 && t->trie[node].byte != s[j];
		     node = t->trie[node].sibling)
			;
	return node >= 0 ? t->trie[node].added : -1;
}

/* lstrip and rstrip: trim the whitespace (JavaScript's trim set) at the end
 * of p (at_end) or at its start. As in the reference, a neighbour that is
 * itself an added token is trimmed too and, changed, becomes plain text
 * (unless it now spells another added token). */
static void trim_section(const struct fg_tokenizer *t, const unsigned char *u, struct section *p, int at_end)
{
	size_t a0 = p->a, b0 = p->b;

	while (p->b > p->a) {
		uint32_t cp;
		size_t l;

		if (at_end) {
			l = last_cp(u + p->a, u + p->b, &cp);
		} else if (!(l = fg_utf8_len(u + p->a, p->b - p->a, &cp))) {
			break;
		}
		if (!js_space(cp))
			break;
		if (at_end)
			p->b -= l;
		else
			p->a += l;
	}
	if ((p->a != a0 || p->b != b0) && p->added >= 0)
		p->added = exact_added(t, u + p->a, p->b - p->a);
}

static int put_section(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *text,
		       const struct section *sc, struct out_ids *o, struct fg_err *err)
{
	if (sc->added >= 0)
		return emit(o, t->added[sc->added].id, err);
	if (sc->b > sc->a)
		return text_section(t, s, text + sc->a, sc->b - sc->a, o, err);
	return 0;
}

/* Takes the next section of the text: applies the previous section's rstrip
 * to it and its lstrip to the previous one (in this order, as the reference
 * does walking the list), then encodes the previous one, which nothing can
 * change any more; the new one is held back in *prev. */
static int next_section(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *text,
			struct section *prev, int *have_prev, struct section cur, struct out_ids *o,
			struct fg_err *err)
{
	const unsigned char *u = (const unsigned char *)text;
	int rc;

	if (*have_prev) {
		if (prev->added >= 0 && t->added[prev->added].rstrip)
			trim_section(t, u, &cur, 0);
		if (cur.added >= 0 && t->added[cur.added].lstrip)
			trim_section(t, u, prev, 1);
		if ((rc = put_section(t, s, text, prev, o, err)))
			return rc;
	}
	*prev = cur;
	*have_prev = 1;
	return 0;
}

int fg_tokenizer_encode_append(const struct fg_tokenizer *t, struct fg_tok_scratch *s, const char *text,
			       size_t len, int flags, int32_t **ids, size_t *n, size_t *cap,
			       struct fg_err *err)
{
	const unsigned char *u = (const unsigned char *)text;
	struct out_ids o = { ids, n, cap };
	struct section prev = { 0, 0, -1 };
	size_t i = 0, start = 0, k, next[FIRST_MAX];
	int have_prev = 0, rc;

	if (s->stamp != t->stamp) {
		if (s->stamp) { /* filled for another tokenizer: forget it all */
			if (s->n_slots)
				cache_reset(s);
			memset(s->pc, 0, sizeof(s->pc));
			memset(s->cp_key, 0, sizeof(s->cp_key));
		}
		s->stamp = t->stamp;
	}
	if (flags & FG_TOK_ADD_SPECIAL)
		for (k = 0; k < t->n_pre; k++)
			if ((rc = emit(&o, t->tmpl_pre[k], err)))
				return rc;
	/* added tokens: leftmost, then longest, on the raw text; next[f]: where
	 * first[f] is next found at or after i (len: nowhere) */
	for (k = 0; k < t->n_first && t->n_first <= FIRST_MAX; k++) {
		const unsigned char *q = memchr(u, t->first[k], len);

		next[k] = q ? (size_t)(q - u) : len;
	}
	while (i < len) {
		int32_t node, match = -1;
		size_t j, mlen = 0;

		if (t->n_first <= FIRST_MAX) {
			size_t m = len, f;

			for (f = 0; f < t->n_first; f++) {
				if (next[f] < i) {
					const unsigned char *q = memchr(u + i, t->first[f], len - i);

					next[f] = q ? (size_t)(q - u) : len;
				}
				if (next[f] < m)
					m = next[f];
			}
			i = m;
		} else {
			while (i < len && t->trie_root[u[i]] < 0)
				i++;
		}
		if (i == len)
			break;
		for (node = t->trie_root[u[i]], j = i; node >= 0;) {
			if (t->trie[node].added >= 0) {
				match = t->trie[node].added;
				mlen = j + 1 - i;
			}
			if (++j >= len)
				break;
			for (node = t->trie[node].child; node >= 0 && t->trie[node].byte != u[j];
			     node = t->trie[node].sibling)
				;
		}
		if (match < 0) {
			i++;
			continue;
		}
		if (i > start &&
		    (rc = next_section(t, s, text, &prev, &have_prev, (struct section){ start, i, -1 }, &o, err)))
			return rc;
		if ((rc = next_section(t, s, text, &prev, &have_prev, (struct section){ i, i + mlen, match }, &o,
				       err)))
			return rc;
		i += mlen;
		start = i;
	}
	if (start < len &&
	    (rc = next_section(t, s, text, &prev, &have_prev, (struct section){ start, len, -1 }, &o, err)))
		return rc;
	if (have_prev && (rc = put_section(t, s, text, &prev, &o, err)))
		return rc;
	if (flags & FG_TOK_ADD_SPECIAL)
		for (k = 0; k < t->n_post; k++)
			if ((rc = emit(&o, t->tmpl_post[k], err)))
				return rc;
	return 0;
}

int fg_tokenizer_encode(const struct fg_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids,
			size_t *n, struct fg_err *err)
{
	struct fg_tok_scratch *s;
	size_t cap = 0;
	int rc;

	*ids = NULL;
	*n = 0;
	if ((rc = fg_tok_scratch_new(&s, err)))
		return rc;
	/* at most one id per byte plus the template's: reserved (only touched
	 * pages cost memory), so the array never moves */
	if (fg_size_add(len, t->n_pre + t->n_post + 1, &cap) || !(*ids = malloc(cap * sizeof(**ids)))) {
		cap = 0;
		*ids = NULL;
	}
	rc = fg_tokenizer_encode_append(t, s, text, len, flags, ids, n, &cap, err);
	fg_tok_scratch_free(s);
	if (rc) {
		free(*ids);
		*ids = NULL;
		*n = 0;
	}
	return rc;
}

/* ---- decoding ---- */

struct plist {
	struct fg_buf text;
	size_t *span; /* pairs [off, len] */
	size_t n, cap;
};

static int plist_add(struct plist *p, const char *s, size_t n, struct fg_err *err)
{
	int rc;

	if ((rc = grow_array((void **)&p->span, &p->cap, 2 * (p->n + 1), sizeof(size_t), err)))
		return rc;
	p->span[2 * p->n] = p->text.len;
	p->span[2 * p->n + 1] = n;
	p->n++;
	return fg_buf_append(&p->text, s, n, err);
}

/* Appends more bytes to the last piece of p. */
static int plist_extend(struct plist *p, const char *s, size_t n, struct fg_err *err)
{
	p->span[2 * (p->n - 1) + 1] += n;
	return fg_buf_append(&p->text, s, n, err);
}

static void plist_release(struct plist *p)
{
	fg_buf_release(&p->text);
	free(p->span);
	memset(p, 0, sizeof(*p));
}

static int byte_token(const char *s, size_t n)
{
	int hi, lo;

	if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>')
		return -1;
	hi = hexval((unsigned char)s[3]);
	lo = hexval((unsigned char)s[4]);
	return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* The byte run just closed, the last piece of out (run bytes): as the
 * `tokenizers` library's ByteFallback does, kept when it is valid UTF-8,
 * else one U+FFFD per byte token. */
static int close_run(struct plist *out, size_t run, struct fg_err *err)
{
	size_t off = out->span[2 * (out->n - 1)], len = out->span[2 * (out->n - 1) + 1], i = 0;
	const unsigned char *u = (const unsigned char *)out->text.data + off;
	int rc = 0;

	while (i < len) {
		uint32_t cp;
		size_t l = fg_utf8_len(u + i, len - i, &cp);

		if (!l)
			break;
		i += l;
	}
	if (i == len)
		return 0;
	out->text.len = off;
	out->span[2 * (out->n - 1) + 1] = 0;
	for (i = 0; i < run && !rc; i++)
		rc = plist_extend(out, "\xEF\xBF\xBD", 3, err);
	return rc;
}

static int dec_step(const struct step *st, const struct plist *in, struct plist *out, int replace,
		    struct fg_err *err)
{
	size_t i, run = 0;
	int rc = 0, in_bytes = 0;

	for (i = 0; i < in->n && !rc; i++) {
		const char *p = in->text.data + in->span[2 * i];
		size_t n = in->span[2 * i + 1];

		switch (st->kind) {
		case D_REPLACE: {
			const char *end = p + n, *hit;

			if ((rc = plist_add(out, "", 0, err)))
				break;
			while (p < end && (hit = memmem(p, (size_t)(end - p), st->pat, st->pat_len))) {
				if ((rc = plist_extend(out, p, (size_t)(hit - p), err)) ||
				    (rc = plist_extend(out, st->rep, st->rep_len, err)))
					break;
				p = hit + st->pat_len;
			}
			if (!rc)
				rc = plist_extend(out, p, (size_t)(end - p), err);
			break;
		}
		case D_BYTEFALLBACK: {
			int b = byte_token(p, n);

			if (b >= 0) {
				char ch = (char)b;

				rc = in_bytes ? plist_extend(out, &ch, 1, err) : plist_add(out, &ch, 1, err);
				in_bytes = 1;
				run++;
			} else {
				if (replace && run)
					rc = close_run(out, run, err);
				if (!rc)
					rc = plist_add(out, p, n, err);
				in_bytes = 0;
				run = 0;
			}
			break;
		}
		case D_FUSE:
			rc = i ? plist_extend(out, p, n, err) : plist_add(out, p, n, err);
			break;
		default: { /* D_STRIP: up to start leading and stop trailing copies of one character */
			const unsigned char *u = (const unsigned char *)p, *a = u, *b = u + n;
			long long k;

			for (k = 0; k < st->start && a < b; k++) {
				uint32_t cp;
				size_t l = fg_utf8_len(a, (size_t)(b - a), &cp);

				if (!l || cp != st->strip_cp)
					break;
				a += l;
			}
			for (k = 0; k < st->stop && b > a; k++) {
				uint32_t cp;
				size_t l = last_cp(a, b, &cp);

				if (cp != st->strip_cp)
					break;
				b -= l;
			}
			rc = plist_add(out, (const char *)a, (size_t)(b - a), err);
			break;
		}
		}
	}
	if (!rc && replace && run)
		rc = close_run(out, run, err);
	return rc;
}

int fg_tokenizer_decode_splits(const struct fg_tokenizer *t)
{
	size_t k;

	if (!t->has_decoder)
		return 0;
	for (k = 0; k + 1 < t->n_dec; k++)
		if (t->dec[k].kind == D_FUSE)
			return 0; /* a step over the joined text */
	return 1;
}

int fg_tokenizer_decode(const struct fg_tokenizer *t, const int32_t *ids, size_t n, struct fg_buf *out,
			struct fg_err *err)
{
	return fg_tokenizer_decode_ex(t, ids, n, 0, out, err);
}

int fg_tokenizer_decode_ex(const struct fg_tokenizer *t, const int32_t *ids, size_t n, int flags,
			   struct fg_buf *out, struct fg_err *err)
{
	struct plist a = { FG_BUF_INIT, NULL, 0, 0 }, b = { FG_BUF_INIT, NULL, 0, 0 };
	size_t i, k;
	int rc = 0;

	for (i = 0; i < n; i++) {
		size_t pl;
		const char *p = fg_tokenizer_id_to_piece(t, ids[i], &pl);

		if (!p) {
			rc = fg_err_set(err, FG_EINVAL, "token id %ld at position %zu is not in the vocabulary (0..%ld)",
					(long)ids[i], i, (long)t->n_ids - 1);
			goto done;
		}
		if ((rc = plist_add(&a, p, pl, err)))
			goto done;
	}
	if (!t->has_decoder) {
		for (i = 0; i < a.n && !rc; i++) {
			if (i)
				rc = fg_buf_putc(out, ' ', err);
			if (!rc)
				rc = fg_buf_append(out, a.text.data + a.span[2 * i], a.span[2 * i + 1], err);
		}
		goto done;
	}
	for (k = 0; k < t->n_dec; k++) {
		struct plist tmp;

		fg_buf_reset(&b.text);
		b.n = 0;
		if ((rc = dec_step(&t->dec[k], &a, &b, flags & FG_TOK_DECODE_REPLACE, err)))
			goto done;
		tmp = a;
		a = b;
		b = tmp;
	}
	for (i = 0; i < a.n && !rc; i++)
		rc = fg_buf_append(out, a.text.data + a.span[2 * i], a.span[2 * i + 1], err);
	if (!rc && !out->data)
		rc = fg_buf_append(out, "", 0, err);
done:
	plist_release(&a);
	plist_release(&b);
	return rc;
}

int fg_utf8_lossy(struct fg_buf *out, const char *s, size_t n, struct fg_err *err)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run = 0;
	int rc = 0;

	while (i < n && !rc) {
		uint32_t cp;
		size_t l = fg_utf8_len(u + i, n - i, &cp), need, k;
		unsigned c = u[i], lo = 0x80, hi = 0xbf;

		if (l) {
			i += l;
			continue;
		}
		if ((rc = fg_buf_append(out, s + run, i - run, err)))
			break;
		/* the maximal subpart: a lead byte and the continuation bytes that
		 * could still have completed it */
		need = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
		else if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
		for (k = 1; k <= need && i + k < n; k++) {
			if (u[i + k] < lo || u[i + k] > hi)
				break;
			lo = 0x80;
			hi = 0xbf;
		}
		i += k;
		run = i;
		rc = fg_buf_append(out, "\xef\xbf\xbd", 3, err);
	}
	if (!rc)
		rc = fg_buf_append(out, s + run, n - run, err);
	return rc;
}

/* ---- queries ---- */

const char *fg_tokenizer_id_to_piece(const struct fg_tokenizer *t, int32_t id, size_t *len)
{
	if (id < 0 || id >= t->n_ids || t->piece_len[id] == UINT32_MAX)
		return NULL;
	if (len)
		*len = t->piece_len[id];
	return t->arena.data + t->piece_off[id];
}

int32_t fg_tokenizer_piece_to_id(const struct fg_tokenizer *t, const char *piece, size_t len)
{
	return lookup_id(t, piece, len);
}

int32_t fg_tokenizer_vocab_size(const struct fg_tokenizer *t)
{
	return t->n_ids;
}

int32_t fg_tokenizer_bos_id(const struct fg_tokenizer *t)
{
	return t->bos_id;
}

int32_t fg_tokenizer_eos_id(const struct fg_tokenizer *t)
{
	return t->eos_id;
}

int32_t fg_tokenizer_unk_id(const struct fg_tokenizer *t)
{
	return t->unk_id;
}

int32_t fg_tokenizer_byte_id(const struct fg_tokenizer *t, unsigned b)
{
	return b < 256 ? t->byte_id[b] : -1;
}

int fg_tokenizer_token_flags(const struct fg_tokenizer *t, int32_t id)
{
	return id >= 0 && id < t->n_ids ? t->tflags[id] : 0;
}

int fg_tokenizer_newline_cuts(const struct fg_tokenizer *t)
{
	int32_t nl = t->trie_root['\n'];
	size_t i, k;

	if (nl < 0 || t->trie[nl].added < 0)
		return 0;
	for (i = 0; i < t->n_added; i++) {
		const struct added *a = &t->added[i];
		const char *c = t->arena.data + a->off;

		if (!memchr(c, '\n', a->len))
			continue;
		if (a->rstrip)
			return 0;
		for (k = 0; k + 1 < a->len; k++)
			if (c[k] == '\n' && c[k + 1] != '\n')
				return 0;
	}
	return 1;
}

int fg_tokenizer_lstrip_any(const struct fg_tokenizer *t)
{
	size_t i;

	for (i = 0; i < t->n_added; i++)
		if (t->added[i].lstrip)
			return 1;
	return 0;
}

size_t fg_tokenizer_merge_count(const struct fg_tokenizer *t)
{
	return t->n_merges;
}
