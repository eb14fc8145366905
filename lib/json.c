/* json.c - cJSON parsing with limits, typed getters, canonical output. */
#include "json.h"
#include "utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

static int hex4(const char *t)
{
	int i;

	for (i = 0; i < 4; i++)
		if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f') || (t[i] >= 'A' && t[i] <= 'F')))
			return 0;
	return 1;
}

/* What cJSON lets through: nesting deeper than MAX_DEPTH (its recursion),
 * and strings it would cut short without a word: a \u escape that is not
 * four hex digits (cJSON 1.7.15 decodes it as U+0000), \u0000 itself and a
 * raw NUL byte (a C string ends there); \u0000 passes when cut_ok (the
 * string then ends there). 0, or an error with the byte. */
static int prescan(const char *t, size_t len, const char *what, int cut_ok, struct fg_err *err)
{
	int depth = 0, in_str = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		char c = t[i];

		if (in_str) {
			if (c == '\\' && i + 1 < len && t[i + 1] == 'u') {
				if (len - i < 6 || !hex4(t + i + 2))
					return fg_err_set(err, FG_EFORMAT, "%s: not valid JSON (a \\u escape "
							  "without four hex digits at byte %zu)", what, i);
				if (!cut_ok && !memcmp(t + i + 2, "0000", 4))
					return fg_err_set(err, FG_EFORMAT, "%s: a string holds \\u0000 (byte %zu), "
							  "which would cut it short", what, i);
				i += 5;
			} else if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
			else if (c == '\0')
				return fg_err_set(err, FG_EFORMAT, "%s: a string holds a NUL byte (byte %zu)", what, i);
			continue;
		}
		if (c == '"')
			in_str = 1;
		else if (c == '[' || c == '{') {
			if (++depth > MAX_DEPTH)
				return fg_err_set(err, FG_EFORMAT, "%s: JSON nested deeper than %d levels", what,
						  MAX_DEPTH);
		} else if (c == ']' || c == '}')
			depth--;
	}
	return 0;
}

/* Float-spelled numbers keep their source text (in valuestring, which cJSON
 * leaves unused for numbers and frees with the item), so that rewriting a
 * file such as config.json keeps "30.0" a float for strict readers instead of
 * turning it into the integer 30. Numbers appear in the text in the same
 * order as a pre-order walk of the tree visits them. */
static const char *next_number(const char *p, const char *end, size_t *len)
{
	while (p < end) {
		if (*p == '"') {
			for (p++; p < end && *p != '"'; p++)
				if (*p == '\\')
					p++;
			p++;
			continue;
		}
		if (*p == '-' || (*p >= '0' && *p <= '9')) {
			const char *q = p;

			while (q < end && (*q == '-' || *q == '+' || *q == '.' || *q == 'e' ||
					   *q == 'E' || (*q >= '0' && *q <= '9')))
				q++;
			*len = (size_t)(q - p);
			return p;
		}
		p++;
	}
	return NULL;
}

static int keep_literals(cJSON *it, const char **pos, const char *end)
{
	cJSON *c;

	if (cJSON_IsNumber(it)) {
		size_t n = 0;
		const char *lit = next_number(*pos, end, &n);

		if (!lit)
			return -1;
		*pos = lit + n;
		if (memchr(lit, '.', n) || memchr(lit, 'e', n) || memchr(lit, 'E', n)) {
			it->valuestring = strndup(lit, n);
			if (!it->valuestring)
				return -1;
		}
		return 0;
	}
	for (c = it->child; c; c = c->next)
		if (keep_literals(c, pos, end))
			return -1;
	return 0;
}

static int parse(cJSON **out, const char *text, size_t len, const char *what, int cut_ok, struct fg_err *err)
{
	const char *end = NULL;
	cJSON *j;
	int rc;

	*out = NULL;
	if ((rc = prescan(text, len, what, cut_ok, err)))
		return rc;
	j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!j) {
		size_t off = end && end >= text ? (size_t)(end - text) : 0;
		size_t line = 1, i;

		for (i = 0; i < off && i < len; i++)
			if (text[i] == '\n')
				line++;
		return fg_err_set(err, FG_EFORMAT, "%s: not valid JSON (line %zu, byte %zu)", what, line,
				  off);
	}
	/* cJSON stops at the first complete value; anything but whitespace after it is an error. */
	if (end) {
		size_t off = (size_t)(end - text);

		while (off < len && (text[off] == ' ' || text[off] == '\n' || text[off] == '\r' ||
				     text[off] == '\t'))
			off++;
		if (off < len && text[off] != '\0') {
			cJSON_Delete(j);
			return fg_err_set(err, FG_EFORMAT, "%s: trailing data after JSON at byte %zu",
					  what, off);
		}
	}
	{
		const char *pos = text;

		if (keep_literals(j, &pos, text + len)) {
			cJSON_Delete(j);
			return fg_err_set(err, FG_ENOMEM, "%s: out of memory", what);
		}
	}
	*out = j;
	return 0;
}

int fg_json_parse(cJSON **out, const char *text, size_t len, const char *what, struct fg_err *err)
{
	return parse(out, text, len, what, 0, err);
}

int fg_json_parse_cut(cJSON **out, const char *text, size_t len, const char *what, struct fg_err *err)
{
	return parse(out, text, len, what, 1, err);
}

static int indent(struct fg_buf *out, int pretty, int level, struct fg_err *err)
{
	int rc = 0, i;

	if (!pretty)
		return 0;
	rc = fg_buf_putc(out, '\n', err);
	for (i = 0; !rc && i < level; i++)
		rc = fg_buf_puts(out, "  ", err);
	return rc;
}

static int cmp_keys(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;

	return strcmp(x->string, y->string);
}

static int write_number(struct fg_buf *out, double v, struct fg_err *err)
{
	if (!isfinite(v))
		return fg_err_set(err, FG_EINVAL, "JSON cannot hold a non-finite number");
	if (v == floor(v) && fabs(v) <= 9007199254740992.0)
		return fg_buf_printf(out, err, "%.0f", v);
	return fg_buf_printf(out, err, "%.17g", v);
}

static int write_item(struct fg_buf *out, const cJSON *it, int pretty, int level,
		      struct fg_err *err)
{
	const cJSON *c;
	int rc = 0;

	if (level > MAX_DEPTH)
		return fg_err_set(err, FG_EINVAL, "JSON nested too deep to write");
	if (cJSON_IsNull(it))
		return fg_buf_puts(out, "null", err);
	if (cJSON_IsTrue(it))
		return fg_buf_puts(out, "true", err);
	if (cJSON_IsFalse(it))
		return fg_buf_puts(out, "false", err);
	if (cJSON_IsNumber(it) && it->valuestring)
		return fg_buf_puts(out, it->valuestring, err);
	if (cJSON_IsNumber(it))
		return write_number(out, it->valuedouble, err);
	if (cJSON_IsString(it))
		return fg_buf_json_str(out, it->valuestring, strlen(it->valuestring), err);
	if (cJSON_IsRaw(it))
		return fg_buf_puts(out, it->valuestring, err);
	if (cJSON_IsArray(it)) {
		int first = 1;

		if (!it->child)
			return fg_buf_puts(out, "[]", err);
		rc = fg_buf_putc(out, '[', err);
		for (c = it->child; !rc && c; c = c->next) {
			if (!first)
				rc = fg_buf_putc(out, ',', err);
			if (!rc)
				rc = indent(out, pretty, level + 1, err);
			if (!rc)
				rc = write_item(out, c, pretty, level + 1, err);
			first = 0;
		}
		if (!rc)
			rc = indent(out, pretty, level, err);
		return rc ? rc : fg_buf_putc(out, ']', err);
	}
	if (cJSON_IsObject(it)) {
		const cJSON **kids;
		size_t n = 0, i;

		for (c = it->child; c; c = c->next)
			n++;
		if (!n)
			return fg_buf_puts(out, "{}", err);
		kids = malloc(n * sizeof(*kids));
		if (!kids)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		for (i = 0, c = it->child; c; c = c->next)
			kids[i++] = c;
		qsort(kids, n, sizeof(*kids), cmp_keys);
		rc = fg_buf_putc(out, '{', err);
		for (i = 0; !rc && i < n; i++) {
			if (i)
				rc = fg_buf_putc(out, ',', err);
			if (!rc)
				rc = indent(out, pretty, level + 1, err);
			if (!rc)
				rc = fg_buf_json_str(out, kids[i]->string, strlen(kids[i]->string), err);
			if (!rc)
				rc = fg_buf_puts(out, pretty ? ": " : ":", err);
			if (!rc)
				rc = write_item(out, kids[i], pretty, level + 1, err);
		}
		free(kids);
		if (!rc)
			rc = indent(out, pretty, level, err);
		return rc ? rc : fg_buf_putc(out, '}', err);
	}
	return fg_err_set(err, FG_EINVAL, "unknown JSON item type");
}

int fg_json_write(struct fg_buf *out, const cJSON *item, int pretty, struct fg_err *err)
{
	int rc = write_item(out, item, pretty, 0, err);

	if (!rc && pretty)
		rc = fg_buf_putc(out, '\n', err);
	return rc;
}

const char *fg_json_str(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

const cJSON *fg_json_obj(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsObject(v) ? v : NULL;
}

const cJSON *fg_json_arr(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsArray(v) ? v : NULL;
}

int fg_json_int(const cJSON *obj, const char *key, long long *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
	    fabs(v->valuedouble) > 9007199254740992.0)
		return -1;
	*out = (long long)v->valuedouble;
	return 0;
}

cJSON *fg_json_text(const char *t, size_t n)
{
	struct fg_buf b = FG_BUF_INIT, q = FG_BUF_INIT;
	size_t i = 0;
	int rc = 0;
	cJSON *raw;

	while (!rc && i < n) {
		size_t l = fg_utf8_len((const unsigned char *)t + i, n - i, NULL);

		rc = l ? fg_buf_append(&b, t + i, l, NULL) : fg_buf_append(&b, "\xef\xbf\xbd", 3, NULL);
		i += l ? l : 1;
	}
	if (!rc)
		rc = fg_buf_json_str(&q, b.data ? b.data : "", b.len, NULL);
	fg_buf_release(&b);
	raw = rc ? NULL : cJSON_CreateRaw(q.data);
	fg_buf_release(&q);
	return raw;
}

int fg_json_add_text(cJSON *obj, const char *key, const char *t, size_t n)
{
	cJSON *raw = fg_json_text(t, n);

	if (!raw || !cJSON_AddItemToObject(obj, key, raw)) {
		cJSON_Delete(raw);
		return -1;
	}
	return 0;
}
