/* keepset.c - counting a corpus in tokens, choosing an LM-head keepset,
 * reading keepset files, and the provenance statement a bake carries. */
#include "keepset.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "fsutil.h"
#include "json.h"

/* Chat-turn token names across Gemma generations; looked up, kept when present. */
static const char *const chat_names[] = {
	"<start_of_turn>", "<end_of_turn>", "<|turn>", "<turn|>", "<|turn_start|>", "<|turn_end|>",
	"<start_of_turn|>", "<|start_of_turn|>", "<|end_of_turn|>",
};

int fg_kcount_init(struct fg_kcount *c, int32_t vocab, struct fg_err *err)
{
	memset(c, 0, sizeof(*c));
	if (vocab <= 0)
		return fg_err_set(err, FG_EINVAL, "empty vocabulary");
	c->vocab = vocab;
	c->counts = calloc((size_t)vocab, sizeof(*c->counts));
	if (!c->counts)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

void fg_kcount_release(struct fg_kcount *c)
{
	free(c->counts);
	c->counts = NULL;
}

/* Maps path read-only (or reads it, for what cannot be mapped). */
struct mapped {
	const char *data;
	size_t len;
	void *map;
	struct fg_buf buf;
};

static int map_file(struct mapped *m, const char *path, struct fg_err *err)
{
	struct stat st;
	int fd;

	memset(m, 0, sizeof(*m));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fg_err_set(err, FG_EIO, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		m->map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		close(fd);
		if (m->map == MAP_FAILED) {
			m->map = NULL;
			return fg_err_set(err, FG_EIO, "%s: mmap: %s", path, strerror(errno));
		}
		madvise(m->map, (size_t)st.st_size, MADV_SEQUENTIAL);
		m->data = m->map;
		m->len = (size_t)st.st_size;
		return 0;
	}
	close(fd);
	if (fg_file_read(path, (size_t)1 << 34, &m->buf, err))
		return err ? err->code : FG_EIO;
	m->data = m->buf.data ? m->buf.data : "";
	m->len = m->buf.len;
	return 0;
}

static void unmap_file(struct mapped *m)
{
	if (m->map)
		munmap(m->map, m->len);
	fg_buf_release(&m->buf);
}

static void add_line(struct fg_kcount *c, const int32_t *ids, size_t n)
{
	size_t i;
	int inside = 1;

	for (i = 0; i < n; i++) {
		c->counts[ids[i]]++;
		if (c->member && !c->member[ids[i]])
			inside = 0;
	}
	c->tokens += n;
	c->lines++;
	if (c->member && inside)
		c->lines_inside++;
}

static int count_text(struct fg_kcount *c, const struct fg_tokenizer *tok, struct fg_tok_scratch *s,
		      const char *d, size_t len, const char *path, struct fg_err *err)
{
	int32_t *ids = NULL;
	size_t cap = 0, pos = 0, i;
	int cuts = fg_tokenizer_newline_cuts(tok), rc = 0;

	while (pos < len) {
		size_t end = len, n = 0;

		if (cuts) {
			const char *nl = memchr(d + pos, '\n', len - pos);

			if (nl) {
				end = (size_t)(nl - d);
				while (end < len && d[end] == '\n')
					end++;
			}
		}
		if ((rc = fg_tokenizer_encode_append(tok, s, d + pos, end - pos, 0, &ids, &n, &cap, err)))
			break;
		for (i = 0; i < n; i++)
			if (ids[i] < 0 || ids[i] >= c->vocab) {
				rc = fg_err_set(err, FG_EINVAL, "%s: token id %ld beyond the vocabulary", path,
						(long)ids[i]);
				goto done;
			}
		add_line(c, ids, n);
		pos = end;
	}
done:
	free(ids);
	return rc;
}

static int count_jsonl(struct fg_kcount *c, const char *d, size_t len, const char *path, struct fg_err *err)
{
	int32_t *ids = NULL;
	size_t cap = 0, pos = 0, lineno = 0;
	int rc = 0;

	while (pos < len) {
		const char *nl = memchr(d + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - d) : len, p = pos, n = 0;
		int first = 1;

		lineno++;
		while (p < end && (d[p] == ' ' || d[p] == '\t' || d[p] == '\r'))
			p++;
		if (p == end) {
			pos = end + 1;
			continue;
		}
		if (d[p++] != '[') {
			rc = fg_err_set(err, FG_EFORMAT, "%s:%zu: expected a JSON array of token ids", path, lineno);
			break;
		}
		for (;;) {
			long long v = 0;
			int digits = 0;

			while (p < end && (d[p] == ' ' || d[p] == '\t' || d[p] == '\r'))
				p++;
			if (p < end && d[p] == ']' && first) {
				p++;
				break;
			}
			if (p < end && d[p] == '-') {
				rc = fg_err_set(err, FG_EINVAL, "%s:%zu: negative token id", path, lineno);
				goto done;
			}
			while (p < end && d[p] >= '0' && d[p] <= '9' && v <= (1ll << 40)) {
				v = v * 10 + (d[p++] - '0');
				digits++;
			}
			if (!digits) {
				rc = fg_err_set(err, FG_EFORMAT, "%s:%zu: expected a token id", path, lineno);
				goto done;
			}
			if (v >= c->vocab) {
				rc = fg_err_set(err, FG_EINVAL,
						"%s:%zu: token id %lld is outside the vocabulary (0..%ld)", path,
						lineno, v, (long)c->vocab - 1);
				goto done;
			}
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 256;
				int32_t *t = realloc(ids, nc * sizeof(*ids));

				if (!t) {
					rc = fg_err_set(err, FG_ENOMEM, "out of memory");
					goto done;
				}
				ids = t;
				cap = nc;
			}
			ids[n++] = (int32_t)v;
			first = 0;
			while (p < end && (d[p] == ' ' || d[p] == '\t' || d[p] == '\r'))
				p++;
			if (p < end && d[p] == ',') {
				p++;
				continue;
			}
			if (p < end && d[p] == ']') {
				p++;
				break;
			}
			rc = fg_err_set(err, FG_EFORMAT, "%s:%zu: expected ',' or ']'", path, lineno);
			goto done;
		}
		while (p < end && (d[p] == ' ' || d[p] == '\t' || d[p] == '\r'))
			p++;
		if (p != end) {
			rc = fg_err_set(err, FG_EFORMAT, "%s:%zu: trailing data after the array", path, lineno);
			break;
		}
		add_line(c, ids, n);
		pos = end + 1;
	}
done:
	free(ids);
	return rc;
}

int fg_kcount_file(struct fg_kcount *c, const struct fg_tokenizer *tok, struct fg_tok_scratch *s,
		   const char *path, struct fg_kinput *info, struct fg_err *err)
{
	struct mapped m;
	size_t plen = strlen(path);
	int jsonl = plen > 6 && !strcmp(path + plen - 6, ".jsonl");
	uint64_t tokens0 = c->tokens, lines0 = c->lines;
	uint8_t dg[FG_SHA256_LEN];
	int rc;

	if ((rc = map_file(&m, path, err)))
		return rc;
	if (info) {
		memset(info, 0, sizeof(*info));
		if ((rc = fg_sha256_mem(m.data, m.len, dg, err))) {
			unmap_file(&m);
			return rc;
		}
		fg_hex_encode(dg, sizeof(dg), info->sha256);
		info->bytes = m.len;
		info->jsonl = jsonl;
	}
	rc = jsonl ? count_jsonl(c, m.data, m.len, path, err) : count_text(c, tok, s, m.data, m.len, path, err);
	unmap_file(&m);
	if (!rc && info) {
		info->tokens = c->tokens - tokens0;
		info->lines = c->lines - lines0;
	}
	return rc;
}

int fg_keepset_is_placeholder(const char *p, size_t n)
{
	size_t i;

	if (n < 9 || memcmp(p, "<unused", 7) || p[n - 1] != '>')
		return 0;
	for (i = 7; i < n - 1; i++)
		if (p[i] < '0' || p[i] > '9')
			return 0;
	return 1;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return x < y ? -1 : x > y;
}

static size_t sort_unique(int32_t *v, size_t n)
{
	size_t i, w = 0;

	qsort(v, n, sizeof(*v), cmp_i32);
	for (i = 0; i < n; i++)
		if (!w || v[w - 1] != v[i])
			v[w++] = v[i];
	return w;
}

int fg_keepset_always(int32_t **ids, size_t *n, const struct fg_tokenizer *tok, int32_t full_vocab,
		      const int32_t *always, size_t n_always, size_t *specials, size_t *chat,
		      size_t *bytes, struct fg_err *err)
{
	int32_t vocab = fg_tokenizer_vocab_size(tok), id;
	size_t cap = (size_t)vocab + n_always + 1, k = 0, i, ns = 0, nc = 0, nb = 0;
	int32_t *v;

	*ids = NULL;
	*n = 0;
	for (i = 0; i < n_always; i++)
		if (always[i] < 0 || always[i] >= full_vocab || always[i] >= vocab)
			return fg_err_set(err, FG_EINVAL, "--always id %ld is outside the vocabulary (0..%ld)",
					  (long)always[i], (long)(full_vocab < vocab ? full_vocab : vocab) - 1);
	v = malloc(cap * sizeof(*v));
	if (!v)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (id = 0; id < vocab && id < full_vocab; id++) {
		size_t pl;
		const char *p = fg_tokenizer_id_to_piece(tok, id, &pl);

		if (p && (fg_tokenizer_token_flags(tok, id) & FG_TOK_F_SPECIAL) &&
		    !fg_keepset_is_placeholder(p, pl)) {
			v[k++] = id;
			ns++;
		}
	}
	for (i = 0; i < sizeof(chat_names) / sizeof(chat_names[0]); i++) {
		id = fg_tokenizer_piece_to_id(tok, chat_names[i], strlen(chat_names[i]));
		if (id >= 0 && id < full_vocab) {
			v[k++] = id;
			nc++;
		}
	}
	for (i = 0; i < 256; i++) {
		id = fg_tokenizer_byte_id(tok, (unsigned)i);
		if (id >= 0 && id < full_vocab) {
			v[k++] = id;
			nb++;
		}
	}
	for (i = 0; i < n_always; i++)
		v[k++] = always[i];
	*n = sort_unique(v, k);
	*ids = v;
	if (specials)
		*specials = ns;
	if (chat)
		*chat = nc;
	if (bytes)
		*bytes = nb;
	return 0;
}

struct cand {
	uint64_t count;
	int32_t id;
};

static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

int fg_keepset_select(int32_t **keep, const struct fg_tokenizer *tok, const uint64_t *counts,
		      int32_t full_vocab, int32_t k, const int32_t *always, size_t n_always,
		      struct fg_err *err)
{
	int32_t vocab = fg_tokenizer_vocab_size(tok), lim = vocab < full_vocab ? vocab : full_vocab, id;
	unsigned char *in = NULL;
	struct cand *c = NULL;
	int32_t *out = NULL;
	size_t nc = 0, i, n = 0;
	int rc = 0;

	*keep = NULL;
	if (k <= 0 || k > full_vocab)
		return fg_err_set(err, FG_EINVAL, "keepset size %ld is outside 1..%ld (the full vocabulary)",
				  (long)k, (long)full_vocab);
	if ((size_t)k < n_always)
		return fg_err_set(err, FG_EINVAL,
				  "keepset size %ld is smaller than the %zu tokens that are always kept", (long)k,
				  n_always);
	in = calloc((size_t)lim + 1, 1);
	c = malloc(((size_t)lim + 1) * sizeof(*c));
	out = malloc((size_t)k * sizeof(*out));
	if (!in || !c || !out) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto done;
	}
	for (i = 0; i < n_always; i++) {
		if (always[i] < 0 || always[i] >= lim) {
			rc = fg_err_set(err, FG_EINVAL, "always-kept id %ld is outside the vocabulary",
					(long)always[i]);
			goto done;
		}
		if (!in[always[i]]) {
			in[always[i]] = 1;
			out[n++] = always[i];
		}
	}
	for (id = 0; id < lim; id++) {
		size_t pl;
		const char *p;

		if (in[id] || !(p = fg_tokenizer_id_to_piece(tok, id, &pl)))
			continue;
		if (!counts[id] && fg_keepset_is_placeholder(p, pl))
			continue;
		c[nc].count = counts[id];
		c[nc].id = id;
		nc++;
	}
	if (n + nc < (size_t)k) {
		rc = fg_err_set(err, FG_EINVAL, "keepset size %ld is more than the %zu tokens that can be kept",
				(long)k, n + nc);
		goto done;
	}
	qsort(c, nc, sizeof(*c), cmp_cand);
	for (i = 0; n < (size_t)k; i++)
		out[n++] = c[i].id;
	qsort(out, n, sizeof(*out), cmp_i32);
	*keep = out;
	out = NULL;
done:
	free(in);
	free(c);
	free(out);
	return rc;
}

int fg_keepset_read(unsigned char **member, int32_t *k, int32_t *full_vocab, const char *path,
		    int32_t vocab, struct fg_err *err)
{
	struct fg_buf b = FG_BUF_INIT;
	cJSON *j = NULL;
	const cJSON *ids, *it;
	long long fv = 0, kk = -1, prev = -1;
	unsigned char *m = NULL;
	size_t n = 0;
	int rc;

	*member = NULL;
	if ((rc = fg_file_read(path, (size_t)256 << 20, &b, err)))
		return rc;
	rc = fg_json_parse(&j, b.data ? b.data : "", b.len, path, err);
	fg_buf_release(&b);
	if (rc)
		return rc;
	ids = fg_json_arr(j, "keep_ids");
	if (!ids) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: no keep_ids list", path);
		goto done;
	}
	if (fg_json_int(j, "full_vocab", &fv))
		fv = vocab;
	if (fv <= 0 || fv > (1 << 26)) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: full_vocab %lld is not a vocabulary size", path, fv);
		goto done;
	}
	m = calloc((size_t)(vocab > fv ? vocab : fv), 1);
	if (!m) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto done;
	}
	cJSON_ArrayForEach(it, ids) {
		double d = it->valuedouble;

		/* the range first: converting 1e300 to an integer is undefined */
		if (!cJSON_IsNumber(it) || !(d >= 0 && d < (double)fv) || d != (double)(long long)d) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: keep_ids[%zu] is not an id in 0..%lld", path, n,
					fv - 1);
			goto done;
		}
		if ((long long)d <= prev) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: keep_ids are not sorted and unique (at index %zu)",
					path, n);
			goto done;
		}
		prev = (long long)d;
		m[prev] = 1;
		n++;
	}
	if (!fg_json_int(j, "pruned_vocab_K", &kk) && kk != (long long)n) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: pruned_vocab_K is %lld but keep_ids holds %zu ids", path,
				kk, n);
		goto done;
	}
	if (!n) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: keep_ids is empty", path);
		goto done;
	}
	*member = m;
	m = NULL;
	*k = (int32_t)n;
	*full_vocab = (int32_t)fv;
done:
	free(m);
	cJSON_Delete(j);
	return rc;
}
