/* sigv4.c - AWS Signature Version 4 (S3 flavour) with libcrypto HMAC-SHA256.
 * Canonical request, string to sign, signing key and Authorization header,
 * following the AWS SigV4 documentation; checked byte for byte against
 * botocore by tests/integration/sigv4_botocore.sh. */
#include "sigv4.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "sha256.h"

#define MAX_HEADERS 64
#define MAX_QUERY_PAIRS 256

int fg_sigv4_uri_encode(struct fg_buf *out, const char *s, size_t len, int keep_slash,
			struct fg_err *err)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;
	int rc;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
			rc = fg_buf_putc(out, (char)c, err);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };

			rc = fg_buf_append(out, e, 3, err);
		}
		if (rc)
			return rc;
	}
	return 0;
}

int fg_sigv4_query_build(struct fg_buf *out, const struct fg_sigv4_param *params, size_t n,
			 struct fg_err *err)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		if (i && (rc = fg_buf_putc(out, '&', err)))
			return rc;
		if ((rc = fg_sigv4_uri_encode(out, params[i].name, strlen(params[i].name), 0, err)))
			return rc;
		if (!params[i].value)
			continue;
		if ((rc = fg_buf_putc(out, '=', err)) ||
		    (rc = fg_sigv4_uri_encode(out, params[i].value, strlen(params[i].value), 0, err)))
			return rc;
	}
	return 0;
}

void fg_sigv4_amz_date(char out[17], time_t t)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

struct span {
	const char *p;
	size_t n;
};

struct qpair {
	struct span name, value;
};

static int span_cmp(struct span a, struct span b)
{
	size_t m = a.n < b.n ? a.n : b.n;
	int c = memcmp(a.p, b.p, m);

	if (c)
		return c;
	return a.n < b.n ? -1 : a.n > b.n;
}

static int qpair_cmp(const void *x, const void *y)
{
	const struct qpair *a = x, *b = y;
	int c = span_cmp(a->name, b->name);

	return c ? c : span_cmp(a->value, b->value);
}

/* The sent query, pairs sorted by encoded name then encoded value. */
static int canonical_query(struct fg_buf *out, const char *q, struct fg_err *err)
{
	struct qpair pairs[MAX_QUERY_PAIRS];
	size_t n = 0, i;
	const char *p = q;
	int rc;

	if (!q || !*q)
		return 0;
	for (;;) {
		const char *amp = strchr(p, '&');
		size_t len = amp ? (size_t)(amp - p) : strlen(p);
		const char *eq = memchr(p, '=', len);

		if (n == MAX_QUERY_PAIRS)
			return fg_err_set(err, FG_EINVAL, "sigv4: more than %d query parameters",
					  MAX_QUERY_PAIRS);
		pairs[n].name.p = p;
		pairs[n].name.n = eq ? (size_t)(eq - p) : len;
		pairs[n].value.p = eq ? eq + 1 : p + len;
		pairs[n].value.n = eq ? len - (size_t)(eq - p) - 1 : 0;
		n++;
		if (!amp)
			break;
		p = amp + 1;
	}
	qsort(pairs, n, sizeof(pairs[0]), qpair_cmp);
	for (i = 0; i < n; i++) {
		if ((i && (rc = fg_buf_putc(out, '&', err))) ||
		    (rc = fg_buf_append(out, pairs[i].name.p, pairs[i].name.n, err)) ||
		    (rc = fg_buf_putc(out, '=', err)) ||
		    (rc = fg_buf_append(out, pairs[i].value.p, pairs[i].value.n, err)))
			return rc;
	}
	return 0;
}

struct hdr {
	char *name;  /* lowercased, owned */
	char *value; /* trimmed, inner whitespace runs collapsed, owned */
};

static int hdr_cmp(const void *x, const void *y)
{
	return strcmp(((const struct hdr *)x)->name, ((const struct hdr *)y)->name);
}

static int is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int hdr_set(struct hdr *h, const char *name, const char *value, struct fg_err *err)
{
	size_t i, nl = strlen(name), vl = strlen(value), o = 0;

	if (!nl)
		return fg_err_set(err, FG_EINVAL, "sigv4: empty header name");
	for (i = 0; i < nl; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c <= ' ' || c >= 127 || c == ':')
			return fg_err_set(err, FG_EINVAL, "sigv4: bad header name");
	}
	for (i = 0; i < vl; i++)
		if (value[i] == '\r' || value[i] == '\n')
			return fg_err_set(err, FG_EINVAL, "sigv4: header %s has a line break", name);
	h->name = malloc(nl + 1);
	h->value = malloc(vl + 1);
	if (!h->name || !h->value)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (i = 0; i <= nl; i++)
		h->name[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] + 32 : name[i]);
	for (i = 0; i < vl; i++) {
		if (is_ws(value[i])) {
			if (o && !is_ws(value[i + 1]) && value[i + 1])
				h->value[o++] = ' ';
			continue;
		}
		h->value[o++] = value[i];
	}
	h->value[o] = 0;
	return 0;
}

static int hmac(const void *key, size_t klen, const void *msg, size_t mlen, unsigned char out[32],
		struct fg_err *err)
{
	unsigned int olen = 0;

	if (!HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &olen) || olen != 32)
		return fg_err_set(err, FG_EIO, "sigv4: HMAC-SHA256 failed");
	return 0;
}

static int valid_date(const char *d)
{
	size_t i;

	if (!d || strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z')
		return 0;
	for (i = 0; i < 15; i++)
		if (i != 8 && (d[i] < '0' || d[i] > '9'))
			return 0;
	return 1;
}

int fg_sigv4_sign(struct fg_buf *authorization, struct fg_buf *canonical, struct fg_buf *sts,
		  const struct fg_sigv4_request *req, const struct fg_sigv4_cred *cred,
		  struct fg_err *err)
{
	struct hdr h[MAX_HEADERS + 4];
	size_t nh = 0, i, j;
	struct fg_buf cr = FG_BUF_INIT, str = FG_BUF_INIT, signed_names = FG_BUF_INIT, key = FG_BUF_INIT;
	unsigned char digest[32], k[32];
	char hexd[65], scope_date[9];
	int rc;

	memset(h, 0, sizeof(h));
	if (!req->method || !req->host || !req->path || req->path[0] != '/' || !req->payload_sha256 ||
	    !req->region || !req->service || !cred || !cred->access_key || !cred->secret_key)
		return fg_err_set(err, FG_EINVAL, "sigv4: incomplete request or credentials");
	if (!valid_date(req->amz_date))
		return fg_err_set(err, FG_EINVAL, "sigv4: bad x-amz-date");
	if (req->n_headers > MAX_HEADERS)
		return fg_err_set(err, FG_EINVAL, "sigv4: too many headers");
	memcpy(scope_date, req->amz_date, 8);
	scope_date[8] = 0;

	if ((rc = hdr_set(&h[nh++], "host", req->host, err)) ||
	    (rc = hdr_set(&h[nh++], "x-amz-date", req->amz_date, err)) ||
	    (rc = hdr_set(&h[nh++], "x-amz-content-sha256", req->payload_sha256, err)))
		goto out;
	if (cred->session_token && *cred->session_token &&
	    (rc = hdr_set(&h[nh++], "x-amz-security-token", cred->session_token, err)))
		goto out;
	for (i = 0; i < req->n_headers; i++) {
		if ((rc = hdr_set(&h[nh], req->headers[i].name, req->headers[i].value, err))) {
			nh++;
			goto out;
		}
		nh++;
		if (!strcmp(h[nh - 1].name, "host") || !strcmp(h[nh - 1].name, "x-amz-date") ||
		    !strcmp(h[nh - 1].name, "x-amz-content-sha256") ||
		    !strcmp(h[nh - 1].name, "authorization")) {
			rc = fg_err_set(err, FG_EINVAL, "sigv4: header %s is set by the signer", h[nh - 1].name);
			goto out;
		}
	}
	/* stable sort keeps repeated headers in the order given, joined by ',' */
	for (i = 1; i < nh; i++)
		for (j = i; j > 0 && hdr_cmp(&h[j - 1], &h[j]) > 0; j--) {
			struct hdr t = h[j];

			h[j] = h[j - 1];
			h[j - 1] = t;
		}

	if ((rc = fg_buf_printf(&cr, err, "%s\n%s\n", req->method, req->path)) ||
	    (rc = canonical_query(&cr, req->query, err)) || (rc = fg_buf_putc(&cr, '\n', err)))
		goto out;
	for (i = 0; i < nh; i++) {
		int same = i && !strcmp(h[i].name, h[i - 1].name);

		if (same)
			rc = fg_buf_printf(&cr, err, ",%s", h[i].value);
		else
			rc = fg_buf_printf(&cr, err, "%s%s:%s", i ? "\n" : "", h[i].name, h[i].value);
		if (!rc && !same)
			rc = fg_buf_printf(&signed_names, err, "%s%s", signed_names.len ? ";" : "",
					   h[i].name);
		if (rc)
			goto out;
	}
	if ((rc = fg_buf_printf(&cr, err, "\n\n%s\n%s", signed_names.data, req->payload_sha256)))
		goto out;

	if ((rc = fg_sha256_mem(cr.data, cr.len, digest, err)))
		goto out;
	fg_hex_encode(digest, 32, hexd);
	if ((rc = fg_buf_printf(&str, err, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s",
				req->amz_date, scope_date, req->region, req->service, hexd)))
		goto out;

	if ((rc = fg_buf_printf(&key, err, "AWS4%s", cred->secret_key)) ||
	    (rc = hmac(key.data, key.len, scope_date, 8, k, err)) ||
	    (rc = hmac(k, 32, req->region, strlen(req->region), k, err)) ||
	    (rc = hmac(k, 32, req->service, strlen(req->service), k, err)) ||
	    (rc = hmac(k, 32, "aws4_request", 12, k, err)) ||
	    (rc = hmac(k, 32, str.data, str.len, digest, err)))
		goto out;
	fg_hex_encode(digest, 32, hexd);
	rc = fg_buf_printf(authorization, err,
			   "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, "
			   "Signature=%s",
			   cred->access_key, scope_date, req->region, req->service, signed_names.data,
			   hexd);
	if (!rc && canonical)
		rc = fg_buf_append(canonical, cr.data, cr.len, err);
	if (!rc && sts)
		rc = fg_buf_append(sts, str.data, str.len, err);
out:
	if (key.data)
		memset(key.data, 0, key.len);
	memset(k, 0, sizeof(k));
	fg_buf_release(&key);
	fg_buf_release(&cr);
	fg_buf_release(&str);
	fg_buf_release(&signed_names);
	for (i = 0; i < nh; i++) {
		free(h[i].name);
		free(h[i].value);
	}
	return rc;
}
