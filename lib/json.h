/* json.h - helpers over cJSON: bounded parsing with a located error, typed
 * getters, and the canonical writer used for every file fgpack must produce
 * byte-identically (buckets.lock, bundle.json, keepsets, statements):
 * object keys sorted by their bytes, two-space indent, "key": value, arrays
 * kept in the order given, a final newline, integers without a fraction. */
#ifndef FG_JSON_H
#define FG_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "err.h"

/* Parses len bytes (need not be NUL-terminated) into *out; what names the
 * input in messages ("manifest.json"). Refuses nesting deeper than 64 levels,
 * and strings cJSON would cut short without a word: a \u escape that is not
 * four hex digits, \u0000 and a raw NUL byte.
 * A number written with a fraction or exponent keeps its source spelling in
 * valuestring, and fg_json_write prints it unchanged ("30.0" stays "30.0"):
 * to change such a number, replace the item rather than its valuedouble. */
int fg_json_parse(cJSON **out, const char *text, size_t len, const char *what, struct fg_err *err);
/* As fg_json_parse, but a string holding \u0000 is accepted and ends there:
 * for answers of other programs whose text may hold NUL (a model's <0x00>)
 * where only other fields are read. */
int fg_json_parse_cut(cJSON **out, const char *text, size_t len, const char *what, struct fg_err *err);

/* Canonical, deterministic text of item appended to out. Numbers that are
 * integral and within ±2^53 print as integers; others with 17 significant
 * digits. pretty=0 gives the compact form (no spaces, no newline). */
int fg_json_write(struct fg_buf *out, const cJSON *item, int pretty, struct fg_err *err);

/* Adds n bytes of text to obj under key as a JSON string: each byte that
 * starts no valid UTF-8 sequence becomes U+FFFD (JSON text is UTF-8), and
 * NUL is written as \u0000 instead of ending the string (a raw item, which
 * fg_json_write and cJSON's printers copy as it is). -1 when out of memory. */
int fg_json_add_text(cJSON *obj, const char *key, const char *t, size_t n);
/* The item fg_json_add_text adds, for arrays; NULL when out of memory. */
cJSON *fg_json_text(const char *t, size_t n);

/* Typed getters: borrowed results; NULL when absent or of another type. */
const char *fg_json_str(const cJSON *obj, const char *key);
const cJSON *fg_json_obj(const cJSON *obj, const char *key);
const cJSON *fg_json_arr(const cJSON *obj, const char *key);
/* Integer member; returns 0 and sets *out, or -1 when absent/not integral. */
int fg_json_int(const cJSON *obj, const char *key, long long *out);

#endif
