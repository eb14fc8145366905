/* fuzz_http.c - fuzz target for what fgpack reads of HTTP response headers
 * (lib/http.h): raw header lines as a server sends them, looked up by name
 * (fg_http_resp_header, fg_http_resp_header_all) and Content-Range values
 * parsed (fg_http_content_range), both from the headers and from the input
 * whole. A value found is one trimmed line (all of a name's values
 * joined: one line); a Content-Range parsed has
 * start <= end < total (when a total is given) and prints back to a value
 * that parses to the same numbers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static void range(const char *v, size_t len)
{
	unsigned long long s, e, t, s2, e2, t2;
	int has, has2;
	char again[96];
	int n;

	if (fg_http_content_range(v, len, &s, &e, &t, &has))
		return;
	if (e < s || (has && t <= e) || (!has && t))
		abort();
	n = has ? snprintf(again, sizeof(again), "bytes %llu-%llu/%llu", s, e, t)
		: snprintf(again, sizeof(again), "bytes %llu-%llu/*", s, e);
	if (n <= 0 || fg_http_content_range(again, (size_t)n, &s2, &e2, &t2, &has2) || s2 != s || e2 != e ||
	    t2 != t || has2 != has)
		abort();
}

static void trimmed(const struct fg_buf *b)
{
	if (!b->len)
		return;
	if (memchr(b->data, '\n', b->len) || b->data[0] == ' ' || b->data[0] == '\t' ||
	    b->data[b->len - 1] == ' ' || b->data[b->len - 1] == '\t' || b->data[b->len - 1] == '\r')
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { "Content-Range", "Retry-After", "ETag", "X-Linked-Etag", "Link",
					     "Content-Length", "RateLimit", "X-Repo-Commit" };
	struct fg_http_resp r;
	struct fg_buf v = FG_BUF_INIT;
	size_t i;

	range((const char *)data, size);
	fg_http_resp_init(&r);
	if (size && fg_buf_append(&r.headers, data, size, NULL))
		abort();
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!fg_http_resp_header(&r, names[i], &v)) {
			trimmed(&v);
			if (i == 0)
				range(v.data ? v.data : "", v.len);
		}
		fg_buf_reset(&v);
		/* joined values: one line (an empty one leaves its ", ") */
		if (!fg_http_resp_header_all(&r, names[i], &v) && v.len && memchr(v.data, '\n', v.len))
			abort();
		fg_buf_reset(&v);
	}
	fg_buf_release(&v);
	fg_http_resp_release(&r);
	return 0;
}
