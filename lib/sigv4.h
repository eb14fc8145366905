/* sigv4.h - AWS Signature Version 4 for S3 requests, computed by fgpack
 * itself (libcrypto HMAC-SHA256) instead of libcurl 7.88's CURLOPT_AWS_SIGV4,
 * which neither canonicalizes query strings nor handles "?uploads".
 *
 * The caller builds the request line with fg_sigv4_uri_encode and
 * fg_sigv4_query_build, then hands the path and query exactly as they will be
 * sent to fg_sigv4_sign. For S3 the canonical URI is the path as sent (each
 * key segment encoded once, '/' kept; virtual-hosted, the bucket is in the
 * Host and not in the path: lib/s3's fg_s3_target builds both), and the
 * canonical query is the sent query split on '&', each pair split at its
 * first '=' ("uploads" becomes "uploads="), sorted by name then value. The
 * headers signed are always host, x-amz-date and x-amz-content-sha256
 * (x-amz-security-token with a session token), plus whatever extra headers
 * the caller lists. Secrets never appear
 * in any output except through the derived signature. */
#ifndef FG_SIGV4_H
#define FG_SIGV4_H

#include <stddef.h>
#include <time.h>

#include "buf.h"
#include "err.h"

#define FG_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define FG_SIGV4_UNSIGNED "UNSIGNED-PAYLOAD"

struct fg_sigv4_cred {
	const char *access_key;
	const char *secret_key;
	const char *session_token; /* NULL when none */
};

/* One query parameter, raw (not encoded); value NULL means valueless. */
struct fg_sigv4_param {
	const char *name;
	const char *value;
};

/* One extra header to send and sign; name in any case. */
struct fg_sigv4_header {
	const char *name;
	const char *value;
};

struct fg_sigv4_request {
	const char *method;        /* "GET", "PUT", ... */
	const char *host;          /* Host header as sent: "s3.hf.co" or "127.0.0.1:9000" */
	const char *path;          /* as sent, already encoded, starts with '/' */
	const char *query;         /* as sent without '?', already encoded; NULL or "" for none */
	const struct fg_sigv4_header *headers; /* extra signed headers (borrowed) */
	size_t n_headers;
	const char *payload_sha256; /* lowercase hex of the body, or FG_SIGV4_UNSIGNED */
	const char *amz_date;      /* "YYYYMMDDTHHMMSSZ" */
	const char *region;        /* "us-east-1" */
	const char *service;       /* "s3" */
};

/* Appends s[0..len) percent-encoded the AWS way: A-Z a-z 0-9 - _ . ~ kept,
 * every other byte as %XX (uppercase hex); '/' kept when keep_slash. */
int fg_sigv4_uri_encode(struct fg_buf *out, const char *s, size_t len, int keep_slash,
			struct fg_err *err);

/* Appends the encoded query string for params in the given order (no '?'):
 * "name=value" pairs joined by '&', a valueless parameter as its bare name. */
int fg_sigv4_query_build(struct fg_buf *out, const struct fg_sigv4_param *params, size_t n,
			 struct fg_err *err);

/* Writes t (UTC) as "YYYYMMDDTHHMMSSZ" into out (17 bytes with the NUL). */
void fg_sigv4_amz_date(char out[17], time_t t);

/* Computes the signature of req with cred and appends the Authorization
 * header value ("AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
 * Signature=...") to authorization. When canonical is not NULL, the canonical
 * request is appended to it, and when sts is not NULL the string to sign (both
 * for debugging; neither holds a secret). */
int fg_sigv4_sign(struct fg_buf *authorization, struct fg_buf *canonical, struct fg_buf *sts,
		  const struct fg_sigv4_request *req, const struct fg_sigv4_cred *cred,
		  struct fg_err *err);

#endif
