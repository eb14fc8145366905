/* buf.h - bounded, growable byte buffer (the project's only string builder).
 *
 * A buffer never grows past its max (0 means FG_BUF_DEFAULT_MAX); appends that
 * would are refused with FG_ENOMEM-like FG_EINVAL "too large". data is always
 * NUL-terminated after len bytes, so text can be used as a C string. */
#ifndef FG_BUF_H
#define FG_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "err.h"

#define FG_BUF_DEFAULT_MAX ((size_t)1 << 30)

struct fg_buf {
	char *data;   /* owned; NULL until the first append */
	size_t len;   /* bytes used, not counting the trailing NUL */
	size_t cap;   /* bytes allocated */
	size_t max;   /* hard limit on len; 0 = FG_BUF_DEFAULT_MAX */
};

#define FG_BUF_INIT { NULL, 0, 0, 0 }

void fg_buf_init(struct fg_buf *b, size_t max);
int fg_buf_append(struct fg_buf *b, const void *data, size_t len, struct fg_err *err);
/* Makes room for extra more bytes (and the NUL) without changing len, so a
 * caller may write up to extra bytes at data + len, then raise len and put
 * the NUL after it itself. */
int fg_buf_reserve(struct fg_buf *b, size_t extra, struct fg_err *err);
int fg_buf_puts(struct fg_buf *b, const char *s, struct fg_err *err);
int fg_buf_putc(struct fg_buf *b, char c, struct fg_err *err);
int fg_buf_printf(struct fg_buf *b, struct fg_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int fg_buf_vprintf(struct fg_buf *b, struct fg_err *err, const char *fmt, va_list ap);
/* Appends s as a JSON string literal with quotes and escapes. */
int fg_buf_json_str(struct fg_buf *b, const char *s, size_t len, struct fg_err *err);
void fg_buf_reset(struct fg_buf *b);            /* len = 0, keeps memory */
/* Hands data to the caller (who frees it) and resets b to empty. */
char *fg_buf_detach(struct fg_buf *b, size_t *len_out);
void fg_buf_release(struct fg_buf *b);          /* frees data */

/* Room for one more element in the array *arr of *cap elements of size
 * elem, n of them used: doubles it (8 at first) when n == *cap. 0, or -1
 * when out of memory (the array is kept as it was). */
int fg_grow(void *arr, size_t *cap, size_t n, size_t elem);

/* Checked size arithmetic: return 0 on success, -1 on overflow. */
int fg_size_add(size_t a, size_t b, size_t *out);
int fg_size_mul(size_t a, size_t b, size_t *out);

/* Checked decimal parsers: the whole string must be a number in range. */
int fg_parse_u64(const char *s, unsigned long long *out);
int fg_parse_i64(const char *s, long long *out);
int fg_parse_int(const char *s, int min, int max, int *out);
/* A byte count: decimal digits, then nothing or one unit: K, M, G (or k, m,
 * g) and KiB, MiB, GiB are powers of 1024; kB/KB, MB, GB powers of 1000 (as
 * transformers' max_shard_size writes them); B is 1. -1 on anything else
 * or past 64 bits. */
int fg_parse_size(const char *s, unsigned long long *out);

#endif
