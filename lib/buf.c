/* buf.c - bounded growable buffers, checked size arithmetic and number parsing. */
#include "buf.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fg_buf_init(struct fg_buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

static int grow(struct fg_buf *b, size_t extra, struct fg_err *err)
{
	size_t max = b->max ? b->max : FG_BUF_DEFAULT_MAX;
	size_t need, cap;
	char *p;

	if (fg_size_add(b->len, extra, &need) || need > max)
		return fg_err_set(err, FG_EINVAL, "buffer would exceed %zu bytes", max);
	if (need + 1 <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < need + 1)
		cap = cap > SIZE_MAX / 2 ? need + 1 : cap * 2;
	p = realloc(b->data, cap);
	if (!p)
		return fg_err_set(err, FG_ENOMEM, "out of memory growing buffer to %zu bytes", cap);
	b->data = p;
	b->cap = cap;
	return 0;
}

int fg_buf_reserve(struct fg_buf *b, size_t extra, struct fg_err *err)
{
	return grow(b, extra, err);
}

int fg_buf_append(struct fg_buf *b, const void *data, size_t len, struct fg_err *err)
{
	int rc = grow(b, len, err);

	if (rc)
		return rc;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int fg_buf_puts(struct fg_buf *b, const char *s, struct fg_err *err)
{
	return fg_buf_append(b, s, strlen(s), err);
}

int fg_buf_putc(struct fg_buf *b, char c, struct fg_err *err)
{
	return fg_buf_append(b, &c, 1, err);
}

int fg_buf_vprintf(struct fg_buf *b, struct fg_err *err, const char *fmt, va_list ap)
{
	va_list ap2;
	int n, rc;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return fg_err_set(err, FG_EINVAL, "bad format string");
	rc = grow(b, (size_t)n, err);
	if (rc)
		return rc;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int fg_buf_printf(struct fg_buf *b, struct fg_err *err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = fg_buf_vprintf(b, err, fmt, ap);
	va_end(ap);
	return rc;
}

int fg_buf_json_str(struct fg_buf *b, const char *s, size_t len, struct fg_err *err)
{
	static const char hex[] = "0123456789abcdef";
	int rc = fg_buf_putc(b, '"', err);
	size_t i;

	for (i = 0; !rc && i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[7];

		switch (c) {
		case '"': rc = fg_buf_puts(b, "\\\"", err); break;
		case '\\': rc = fg_buf_puts(b, "\\\\", err); break;
		case '\n': rc = fg_buf_puts(b, "\\n", err); break;
		case '\r': rc = fg_buf_puts(b, "\\r", err); break;
		case '\t': rc = fg_buf_puts(b, "\\t", err); break;
		case '\b': rc = fg_buf_puts(b, "\\b", err); break;
		case '\f': rc = fg_buf_puts(b, "\\f", err); break;
		default:
			if (c < 0x20) {
				esc[0] = '\\'; esc[1] = 'u'; esc[2] = '0'; esc[3] = '0';
				esc[4] = hex[c >> 4]; esc[5] = hex[c & 15]; esc[6] = 0;
				rc = fg_buf_append(b, esc, 6, err);
			} else {
				rc = fg_buf_putc(b, (char)c, err);
			}
		}
	}
	return rc ? rc : fg_buf_putc(b, '"', err);
}

void fg_buf_reset(struct fg_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

char *fg_buf_detach(struct fg_buf *b, size_t *len_out)
{
	char *p = b->data;

	if (len_out)
		*len_out = b->len;
	if (!p)
		p = calloc(1, 1);
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

void fg_buf_release(struct fg_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int fg_size_add(size_t a, size_t b, size_t *out)
{
	if (a > SIZE_MAX - b)
		return -1;
	*out = a + b;
	return 0;
}

int fg_grow(void *arr, size_t *cap, size_t n, size_t elem)
{
	void *old, *grown;
	size_t nc = *cap ? *cap * 2 : 8, bytes;

	if (n < *cap)
		return 0;
	memcpy(&old, arr, sizeof(old)); /* arr points to a T *: copied, not aliased */
	if (fg_size_mul(nc, elem, &bytes) || !(grown = realloc(old, bytes)))
		return -1;
	memcpy(arr, &grown, sizeof(grown));
	*cap = nc;
	return 0;
}

int fg_size_mul(size_t a, size_t b, size_t *out)
{
	if (a && b > SIZE_MAX / a)
		return -1;
	*out = a * b;
	return 0;
}

int fg_parse_u64(const char *s, unsigned long long *out)
{
	char *end;
	unsigned long long v;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int fg_parse_size(const char *s, unsigned long long *out)
{
	static const struct {
		const char *unit;
		unsigned long long mul;
	} units[] = {
		{ "", 1 },
		{ "B", 1 },
		{ "k", 1ULL << 10 },   { "K", 1ULL << 10 },  { "KiB", 1ULL << 10 },
		{ "m", 1ULL << 20 },   { "M", 1ULL << 20 },  { "MiB", 1ULL << 20 },
		{ "g", 1ULL << 30 },   { "G", 1ULL << 30 },  { "GiB", 1ULL << 30 },
		{ "kB", 1000ULL },     { "KB", 1000ULL },    { "MB", 1000000ULL },
		{ "GB", 1000000000ULL },
	};
	char digits[24];
	unsigned long long v;
	size_t i, n = s ? strspn(s, "0123456789") : 0;

	if (!n || n >= sizeof(digits))
		return -1;
	memcpy(digits, s, n);
	digits[n] = '\0';
	if (fg_parse_u64(digits, &v))
		return -1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(s + n, units[i].unit)) {
			if (v && units[i].mul > ~0ULL / v)
				return -1;
			*out = v * units[i].mul;
			return 0;
		}
	return -1;
}

int fg_parse_i64(const char *s, long long *out)
{
	char *end;
	long long v;

	if (!s || !*s || (*s != '-' && (*s < '0' || *s > '9')))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int fg_parse_int(const char *s, int min, int max, int *out)
{
	long long v;

	if (fg_parse_i64(s, &v) || v < min || v > max)
		return -1;
	*out = (int)v;
	return 0;
}
