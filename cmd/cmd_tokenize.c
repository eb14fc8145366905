/* cmd_tokenize.c - `fgpack tokenize`: text on stdin to a JSON array of token
 * ids on stdout, or (--decode) ids back to text, with a tokenizer.json. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "cmd.h"
#include "engine/chat.h"
#include "json.h"
#include "sha256.h"
#include "tokenizer.h"

#define OUT_FLUSH ((size_t)1 << 20)
#define STREAM_PIECE ((size_t)1 << 18)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fgpack tokenize --tokenizer PATH [--lines [--hex]] [--add-special] [--time]\n"
		"       fgpack tokenize --tokenizer PATH --decode [--lines] [--skip-special] [--transformers]\n"
		"       fgpack tokenize --tokenizer PATH --chat [--lines] [--chat-format gemma4|gemma3]\n\n"
		"Reads stdin and writes to stdout:\n"
		"  (default)      the text's token ids as one JSON array\n"
		"  --lines        one JSON array per input line (the line without its \"\\n\")\n"
		"  --hex          with --lines: each line is a text's bytes in hexadecimal (any bytes,\n"
		"                 newlines and NULs included; for test drivers)\n"
		"  --add-special  add the tokenizer's special tokens (Gemma: <bos> first)\n"
		"  --decode       stdin holds JSON arrays of ids; writes the text they decode to\n"
		"                 (with --lines: one array per line in, one JSON string per line out,\n"
		"                 where bytes that are not UTF-8 show as U+FFFD)\n"
		"  --skip-special with --decode: leave special tokens out (skip_special_tokens)\n"
		"  --transformers with --decode: a run of byte tokens that is not UTF-8 gives one\n"
		"                 U+FFFD per token, as transformers' (and vLLM's) decode does\n"
		"  --time         print the wall and CPU seconds spent encoding/decoding (load\n"
		"                 excluded) on stderr\n"
		"  --chat         stdin holds chat messages as JSON (an array of {role, content}, or\n"
		"                 a chat request body with \"messages\"); writes the ids of the prompt\n"
		"                 fgpack serve would give the model (with <bos>), as one JSON array;\n"
		"                 the format is the one the tokenizer calls for (docs/serve.md);\n"
		"                 with --lines: one conversation per line in, one array per line\n"
		"                 out (a .jsonl that fgpack bake keepset reads as a corpus)\n"
		"  --chat-format  with --chat: gemma4 or gemma3 whatever the tokenizer\n");
}

/* stdin's bytes: mapped when it is a non-empty regular file (no copy, no
 * growing buffer: page faults were a third of the run), else read into b.
 * *map_len is the mapped length to unmap, 0 when b holds the bytes. */
static int read_stdin(struct fg_buf *b, const char **data, size_t *len, size_t *map_len,
		      struct fg_err *err)
{
	char chunk[1 << 16];
	struct stat st;
	size_t n;
	int rc;

	*map_len = 0;
	if (!fstat(STDIN_FILENO, &st) && S_ISREG(st.st_mode) && st.st_size > 0 &&
	    lseek(STDIN_FILENO, 0, SEEK_CUR) == 0 && (unsigned long long)st.st_size < SIZE_MAX / 8) {
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, STDIN_FILENO, 0);

		if (m != MAP_FAILED) {
			*data = m;
			*len = *map_len = (size_t)st.st_size;
			return 0;
		}
	}
	while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0)
		if ((rc = fg_buf_append(b, chunk, n, err)))
			return rc;
	if (ferror(stdin))
		return fg_err_set(err, FG_EIO, "reading stdin failed");
	if ((rc = fg_buf_append(b, "", 0, err)))
		return rc;
	*data = b->data;
	*len = b->len;
	return 0;
}

/* Writes out to stdout once it holds more than lim bytes (0: always), so
 * that the output never has to be held whole. */
static int flush_out(struct fg_buf *out, size_t lim, struct fg_err *err)
{
	if (out->len <= lim || !out->len)
		return 0;
	if (fwrite(out->data, 1, out->len, stdout) != out->len)
		return fg_err_set(err, FG_EIO, "writing stdout failed");
	fg_buf_reset(out);
	return 0;
}

static const char digits2[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
				 "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
				 "8081828384858687888990919293949596979899";

/* Appends ids as JSON numbers separated by commas (a comma first unless
 * first is set). */
static int put_list(struct fg_buf *o, const int32_t *ids, size_t n, int first, struct fg_err *err)
{
	char chunk[1 << 16], *p = chunk;
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		char tmp[12];
		int k = 0;
		uint32_t v = (uint32_t)ids[i];

		if (p - chunk > (ptrdiff_t)sizeof(chunk) - 16) {
			if ((rc = fg_buf_append(o, chunk, (size_t)(p - chunk), err)) ||
			    (rc = flush_out(o, OUT_FLUSH, err)))
				return rc;
			p = chunk;
		}
		if (i || !first)
			*p++ = ',';
		/* two digits at a time from the end (the per-digit loop was a sixth
		 * of a whole encode's instructions) */
		k = (int)sizeof(tmp);
		while (v >= 100) {
			unsigned d = (unsigned)(v % 100) * 2;

			v /= 100;
			tmp[--k] = digits2[d + 1];
			tmp[--k] = digits2[d];
		}
		if (v >= 10) {
			tmp[--k] = digits2[v * 2 + 1];
			tmp[--k] = digits2[v * 2];
		} else {
			tmp[--k] = (char)('0' + v);
		}
		memcpy(p, tmp + k, sizeof(tmp) - (size_t)k);
		p += sizeof(tmp) - (size_t)k;
	}
	return fg_buf_append(o, chunk, (size_t)(p - chunk), err);
}

static int put_ids(struct fg_buf *o, const int32_t *ids, size_t n, struct fg_err *err)
{
	int rc;

	if ((rc = fg_buf_putc(o, '[', err)) || (rc = put_list(o, ids, n, 1, err)))
		return rc;
	return fg_buf_append(o, "]\n", 2, err);
}

/* The text as one array of ids, encoded in pieces of about STREAM_PIECE
 * bytes cut after a run of newlines (where the tokenizer says that gives
 * the ids of the whole, and no added token strips what precedes it), so that the ids of a big text are never held at
 * once: only the ids of one piece, in memory already touched (fresh pages
 * had cost more than a tenth of the encoding). */
static int encode_stream(const struct fg_tokenizer *tok, struct fg_tok_scratch *s, const char *data,
			 size_t len, struct fg_buf *out, struct fg_err *err)
{
	int32_t *ids = NULL;
	size_t pos = 0, cap = STREAM_PIECE + 64, n;
	int rc, first = 1;

	if (!(ids = malloc(cap * sizeof(*ids))))
		return fg_err_set(err, FG_ENOMEM, "out of memory for %zu ids", cap);
	rc = fg_buf_putc(out, '[', err);
	while (!rc && pos < len) {
		size_t end = len;

		if (len - pos > STREAM_PIECE) {
			const char *nl = memchr(data + pos + STREAM_PIECE, '\n', len - pos - STREAM_PIECE);

			if (nl)
				for (end = (size_t)(nl - data); end < len && data[end] == '\n'; end++)
					;
		}
		n = 0;
		if (!(rc = fg_tokenizer_encode_append(tok, s, data + pos, end - pos, 0, &ids, &n, &cap, err)) &&
		    !(rc = put_list(out, ids, n, first, err)))
			rc = flush_out(out, OUT_FLUSH, err);
		first = first && !n;
		pos = end;
	}
	if (!rc)
		rc = fg_buf_append(out, "]\n", 2, err);
	free(ids);
	return rc;
}

/* Parses one JSON array of ids from text[0, len) into *ids and *n. */
static int parse_ids(const char *text, size_t len, int32_t **ids, size_t *n, struct fg_err *err)
{
	cJSON *j = NULL, *it;
	size_t k = 0;
	int rc;

	*ids = NULL;
	*n = 0;
	if ((rc = fg_json_parse(&j, text, len, "ids", err)))
		return rc;
	if (!cJSON_IsArray(j)) {
		cJSON_Delete(j);
		return fg_err_set(err, FG_EFORMAT, "ids: expected a JSON array of token ids");
	}
	*ids = malloc(((size_t)cJSON_GetArraySize(j) + 1) * sizeof(int32_t));
	if (!*ids) {
		cJSON_Delete(j);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	cJSON_ArrayForEach(it, j) {
		/* the range first: converting 1e300 to an integer is undefined */
		if (!cJSON_IsNumber(it) || !(it->valuedouble >= INT32_MIN && it->valuedouble <= INT32_MAX) ||
		    it->valuedouble != floor(it->valuedouble)) {
			cJSON_Delete(j);
			free(*ids);
			*ids = NULL;
			return fg_err_set(err, FG_EFORMAT, "ids: item %zu is not an integer token id", k);
		}
		(*ids)[k++] = (int32_t)it->valuedouble;
	}
	*n = k;
	cJSON_Delete(j);
	return 0;
}

/* Asks for transparent huge pages over the 2 MiB-aligned part of a big
 * buffer (advice only): first touches of fresh 4 KiB pages of the ids were
 * a tenth of the encoding time. */
static void huge_pages(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
	const uintptr_t huge = (uintptr_t)2 << 20;
	uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + bytes) & ~(huge - 1);

	if (e > a)
		madvise((void *)a, (size_t)(e - a), MADV_HUGEPAGE);
#else
	(void)p;
	(void)bytes;
#endif
}

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The bytes that the hex digits h[0, n) stand for, into b (reset first). */
static int unhex(struct fg_buf *b, const char *h, size_t n, struct fg_err *err)
{
	size_t i;
	int rc;

	fg_buf_reset(b);
	if (n && h[n - 1] == '\r')
		n--;
	if (n % 2)
		return fg_err_set(err, FG_EFORMAT, "--hex: a line of %zu hex digits (not an even count)", n);
	for (i = 0; i < n; i += 2) {
		int hi = fg_hex_value(h[i]), lo = fg_hex_value(h[i + 1]);

		if (hi < 0 || lo < 0)
			return fg_err_set(err, FG_EFORMAT, "--hex: '%c%c' is not a hex byte", h[i], h[i + 1]);
		if ((rc = fg_buf_putc(b, (char)(hi << 4 | lo), err)))
			return rc;
	}
	return 0;
}

/* decode: 0 to encode, else 1 | DEC_* bits */
#define DEC_SKIP_SPECIAL 2
#define DEC_TRANSFORMERS 4

static int run(const struct fg_tokenizer *tok, const char *data, size_t len, int decode, int lines, int hex,
	       int flags, struct fg_buf *out, struct fg_err *err)
{
	struct fg_buf raw = FG_BUF_INIT; /* a --hex line's bytes */
	struct fg_tok_scratch *s = NULL;
	int32_t *ids = NULL;
	size_t n = 0, cap = 0, pos = 0;
	int rc;

	if ((rc = fg_tok_scratch_new(&s, err)))
		return rc;
	if (!decode && !lines && !(flags & FG_TOK_ADD_SPECIAL) && fg_tokenizer_newline_cuts(tok) &&
	    !fg_tokenizer_lstrip_any(tok)) {
		rc = encode_stream(tok, s, data, len, out, err);
		goto done;
	}
	if (!decode && !lines) {
		/* at most one id per byte, plus the template's: no growing */
		cap = len + 64;
		if (!(ids = malloc(cap * sizeof(*ids)))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory for %zu ids", cap);
			goto done;
		}
		huge_pages(ids, cap * sizeof(*ids));
		if (!(rc = fg_tokenizer_encode_append(tok, s, data, len, flags, &ids, &n, &cap, err)))
			rc = put_ids(out, ids, n, err);
		goto done;
	}
	while (!rc && pos < len) {
		const char *nl = memchr(data + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - data) : len;

		if (!decode) {
			const char *x = data + pos;
			size_t xn = end - pos;

			n = 0;
			if (hex) {
				if ((rc = unhex(&raw, x, xn, err)))
					break;
				x = raw.data ? raw.data : "";
				xn = raw.len;
			}
			if (!(rc = fg_tokenizer_encode_append(tok, s, x, xn, flags, &ids, &n, &cap, err)))
				rc = put_ids(out, ids, n, err);
		} else {
			int32_t *d = NULL;
			size_t dn = 0, k;
			struct fg_buf text = FG_BUF_INIT;

			for (k = pos; k < end && (data[k] == ' ' || data[k] == '\t' || data[k] == '\r'); k++)
				;
			if (k < end || !lines) {
				size_t lim = lines ? end : len;

				if (!(rc = parse_ids(data + pos, lim - pos, &d, &dn, err)) && (decode & DEC_SKIP_SPECIAL)) {
					size_t w = 0, r;

					for (r = 0; r < dn; r++)
						if (!(fg_tokenizer_token_flags(tok, d[r]) & FG_TOK_F_SPECIAL))
							d[w++] = d[r];
					dn = w;
				}
				if (!rc && !(rc = fg_tokenizer_decode_ex(tok, d, dn,
									 decode & DEC_TRANSFORMERS ? FG_TOK_DECODE_REPLACE : 0,
									 &text, err))) {
					if (lines) {
						struct fg_buf ok = FG_BUF_INIT;

						if (!(rc = fg_utf8_lossy(&ok, text.data ? text.data : "", text.len, err)) &&
						    !(rc = fg_buf_json_str(out, ok.data ? ok.data : "", ok.len, err)))
							rc = fg_buf_putc(out, '\n', err);
						fg_buf_release(&ok);
					} else {
						rc = fg_buf_append(out, text.data, text.len, err);
					}
				}
				if (!lines)
					end = len;
			}
			free(d);
			fg_buf_release(&text);
		}
		pos = end + 1;
		if (!rc)
			rc = flush_out(out, OUT_FLUSH, err);
	}
done:
	free(ids);
	fg_buf_release(&raw);
	fg_tok_scratch_free(s);
	return rc;
}

/* --chat: one conversation (a messages array, or a request body holding
 * "messages") in JSON, rendered and encoded, appended to out as a JSON array
 * of ids and a newline. */
static int chat_ids(const struct fg_tokenizer *tok, enum fg_chat_format f, const char *data, size_t len,
		    struct fg_buf *out, struct fg_err *err)
{
	cJSON *root = NULL;
	const cJSON *msgs;
	int32_t *ids = NULL;
	size_t n = 0, i;
	int rc = fg_json_parse(&root, data, len, "stdin", err);

	if (rc)
		return rc;
	msgs = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "messages") : root;
	rc = fg_chat_encode(&ids, &n, tok, f, msgs, err);
	if (!rc)
		rc = fg_buf_putc(out, '[', err);
	for (i = 0; !rc && i < n; i++)
		rc = fg_buf_printf(out, err, "%s%d", i ? "," : "", (int)ids[i]);
	if (!rc)
		rc = fg_buf_puts(out, "]\n", err);
	free(ids);
	cJSON_Delete(root);
	return rc;
}

/* --chat over all of stdin, or (lines) over each non-empty line. */
static int chat_run(const struct fg_tokenizer *tok, enum fg_chat_format f, const char *data, size_t len,
		    int lines, struct fg_buf *out, struct fg_err *err)
{
	size_t pos = 0, line = 0;
	int rc = 0;

	if (f == FG_CHAT_NONE)
		f = fg_chat_detect(tok);
	if (!lines)
		return chat_ids(tok, f, data, len, out, err);
	while (!rc && pos < len) {
		const char *nl = memchr(data + pos, '\n', len - pos);
		size_t l = nl ? (size_t)(nl - (data + pos)) : len - pos;

		line++;
		if (l && !(l == 1 && data[pos] == '\r')) {
			rc = chat_ids(tok, f, data + pos, l, out, err);
			if (rc)
				fg_err_wrap(err, "line %zu", line);
		}
		if (!rc)
			rc = flush_out(out, OUT_FLUSH, err);
		pos += l + 1;
	}
	return rc;
}

int cmd_tokenize(int argc, char **argv)
{
	const char *path = NULL;
	int decode = 0, lines = 0, hex = 0, flags = 0, timing = 0, chat = 0, i, rc;
	enum fg_chat_format format = FG_CHAT_NONE;
	struct fg_err err = { 0, "" };
	struct fg_tokenizer *tok = NULL;
	struct fg_buf in = FG_BUF_INIT, out = FG_BUF_INIT;
	const char *data = NULL;
	size_t len = 0, map_len = 0;
	double t0, t1, c0, c1;

	if (fg_cmd_wants_help(argc, argv)) {
		usage(stdout);
		return FG_EXIT_OK;
	}
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc)
			path = argv[++i];
		else if (!strcmp(argv[i], "--decode"))
			decode |= 1;
		else if (!strcmp(argv[i], "--skip-special"))
			decode |= DEC_SKIP_SPECIAL;
		else if (!strcmp(argv[i], "--transformers"))
			decode |= DEC_TRANSFORMERS;
		else if (!strcmp(argv[i], "--lines"))
			lines = 1;
		else if (!strcmp(argv[i], "--hex"))
			hex = 1;
		else if (!strcmp(argv[i], "--add-special"))
			flags |= FG_TOK_ADD_SPECIAL;
		else if (!strcmp(argv[i], "--time"))
			timing = 1;
		else if (!strcmp(argv[i], "--chat"))
			chat = 1;
		else if (!strcmp(argv[i], "--chat-format") && i + 1 < argc) {
			if (fg_chat_format_parse(&format, argv[++i], &err))
				return fg_cmd_usage_error("tokenize", "--chat-format wants gemma4 or gemma3");
		} else
			return fg_cmd_usage_error("tokenize", "unexpected argument '%s'", argv[i]);
	}
	if (!path)
		return fg_cmd_usage_error("tokenize", "--tokenizer PATH is required");
	if (decode && !(decode & 1))
		return fg_cmd_usage_error("tokenize", "--skip-special and --transformers apply to --decode only");
	if (hex && (decode || !lines))
		return fg_cmd_usage_error("tokenize", "--hex applies to encoding with --lines only");
	if (decode && flags)
		return fg_cmd_usage_error("tokenize", "--add-special applies to encoding only");
	if (chat && (decode || hex || flags))
		return fg_cmd_usage_error("tokenize", "--chat goes with none of --decode, --hex, --add-special");
	if (format != FG_CHAT_NONE && !chat)
		return fg_cmd_usage_error("tokenize", "--chat-format applies to --chat only");
	if ((rc = fg_tokenizer_load(&tok, path, &err)))
		return fg_cmd_fail("tokenize", &err);
	if ((rc = read_stdin(&in, &data, &len, &map_len, &err)))
		goto fail;
	t0 = clock_s(CLOCK_MONOTONIC);
	c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	rc = chat ? chat_run(tok, format, data, len, lines, &out, &err)
		  : run(tok, data, len, decode, lines, hex, flags, &out, &err);
	c1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	t1 = clock_s(CLOCK_MONOTONIC);
	if (rc)
		goto fail;
	if (timing)
		fprintf(stderr, "%s_seconds %.6f cpu_seconds %.6f bytes %zu\n", decode ? "decode" : "encode",
			t1 - t0, c1 - c0, len);
	if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len) {
		rc = fg_err_set(&err, FG_EIO, "writing stdout failed");
		goto fail;
	}
	if (fflush(stdout)) {
		rc = fg_err_set(&err, FG_EIO, "writing stdout failed");
		goto fail;
	}
	fg_tokenizer_free(tok);
	if (map_len)
		munmap((void *)data, map_len);
	fg_buf_release(&in);
	fg_buf_release(&out);
	return FG_EXIT_OK;
fail:
	fg_tokenizer_free(tok);
	if (map_len)
		munmap((void *)data, map_len);
	fg_buf_release(&in);
	fg_buf_release(&out);
	return fg_cmd_fail("tokenize", &err);
}
