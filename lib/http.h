/* http.h - the HTTP client (libcurl multi interface) every network fetch goes through.
 *
 * One struct fg_http runs many transfers at once on one thread. Each transfer
 * follows redirects itself (so the token is attached per hop: only when the
 * hop's scheme://host:port is the Hub's), retries transport errors and HTTP
 * 408/429/500/502/503/504 with exponential backoff that honours Retry-After
 * (and, on a 429 without it, the reset time of the Hub's RateLimit field:
 * "api";r=0;t=55 waits 55 s), either up to 5 minutes,
 * resumes a broken body with a Range request from the first byte it lacks,
 * and gives up after max_tries failed attempts in a row without progress with a
 * message like "fetch weights/a.bin: HTTP 429 after 6 tries". A transfer that
 * moves less than 1 KiB/s for stall_secs is aborted and retried. Proxy
 * variables (http_proxy, https_proxy, no_proxy) apply as libcurl reads them.
 * A custom CA bundle is taken, as the curl tool does, from CURL_CA_BUNDLE,
 * else SSL_CERT_FILE (a file), and SSL_CERT_DIR (a folder), read once by
 * fg_http_new. The user agent is "fgpack/<version>". */
#ifndef FG_HTTP_H
#define FG_HTTP_H

#include <stddef.h>

#include "buf.h"
#include "err.h"

struct fg_http_opts {
	const char *hub_url;    /* the Hub endpoint; the token goes only to its origin */
	const char *token;      /* bearer token (HF_TOKEN) or NULL */
	int max_tries;          /* attempts per transfer without progress; default 6 */
	long stall_secs;        /* abort+retry below 1 KiB/s for this long; default 30 */
	long connect_secs;      /* connect timeout; default 15 */
	unsigned retry_base_ms; /* first backoff, doubled per try; default 500 */
	unsigned retry_max_ms;  /* cap on one backoff of our own; default 30000 (a wait
				 * the server names, Retry-After or RateLimit, is
				 * honoured up to 5 minutes) */
	int max_redirects;      /* hops per transfer; default 10 */
};

/* Fills o with the defaults above (hub_url and token NULL). */
void fg_http_opts_default(struct fg_http_opts *o);

struct fg_http;

/* Copies what it needs from opts. */
int fg_http_new(struct fg_http **out, const struct fg_http_opts *opts, struct fg_err *err);
void fg_http_free(struct fg_http *h);

/* A private CA from the environment, as curl and OpenSSL tools take it:
 * *file the first non-empty of $first (when not NULL), CURL_CA_BUNDLE and
 * SSL_CERT_FILE; *dir (dir may be NULL) SSL_CERT_DIR; NULL where unset. Borrowed from environ. */
void fg_http_ca_env(const char **file, const char **dir, const char *first);

/* What a finished transfer saw last: status, raw header lines of the last
 * response ("Name: value\r\n"...), the URL it ended at. */
struct fg_http_resp {
	long status;
	struct fg_buf headers;
	struct fg_buf body; /* fg_http_get only */
	char *url;          /* owned */
};
void fg_http_resp_init(struct fg_http_resp *r);
void fg_http_resp_release(struct fg_http_resp *r);
/* Value of header name (case-insensitive) in r, trimmed, copied into out
 * (replacing its content); returns 0, or -1 when absent. */
int fg_http_resp_header(const struct fg_http_resp *r, const char *name, struct fg_buf *out);
/* Every value of header name in r (a header may come in several lines, as
 * Link does), trimmed and joined with ", " as RFC 9110 5.3 allows; returns 0,
 * or -1 when absent. */
int fg_http_resp_header_all(const struct fg_http_resp *r, const char *name, struct fg_buf *out);
/* Parses a Content-Range value "bytes S-E/T" or "bytes S-E/ *" (no space):
 * 0 and *start, *end (inclusive), *total (0 with *has_total 0 for '*'); -1
 * when it is not of that form (e.g. "bytes * /T" of a 416). */
int fg_http_content_range(const char *v, size_t len, unsigned long long *start,
			  unsigned long long *end, unsigned long long *total, int *has_total);

/* ref resolved against base as RFC 3986 5.2 says (libcurl's URL API), into
 * out; 0, or -1 when either is no URL or out of memory. */
int fg_http_url_resolve(struct fg_buf *out, const char *base, const char *ref);

/* Blocking GET of url into out->body (at most max_body bytes), following
 * redirects. Anything but a final 2xx is an error naming what. */
int fg_http_get(struct fg_http *h, struct fg_http_resp *out, const char *url, const char *what,
		size_t max_body, struct fg_err *err);
/* Blocking HEAD; with follow=0 the first answer (2xx or 3xx) is returned as is,
 * so Hub headers such as X-Repo-Commit are seen before any CDN hop. */
int fg_http_head(struct fg_http *h, struct fg_http_resp *out, const char *url, int follow,
		 const char *what, struct fg_err *err);
/* Blocking HEAD that follows redirects: what a plain https:// component or
 * URL dependency is probed with (size, ETag, Last-Modified, Accept-Ranges of
 * the final answer). The token goes, hop by hop, to the Hub's origin only, as
 * with every request; no_auth: never, whatever the host (a dependency). */
int fg_http_head_probe(struct fg_http *h, struct fg_http_resp *out, const char *url, int no_auth,
		       const char *what, struct fg_err *err);
/* The same probe for servers that refuse HEAD (405, 501): a GET of byte 0
 * alone ("Range: bytes=0-0"), following redirects; the body is not kept. A
 * 206 tells the size in its Content-Range total, a 200 (ranges ignored) in
 * its Content-Length; reading stops after the first byte. */
int fg_http_probe_get(struct fg_http *h, struct fg_http_resp *out, const char *url, int no_auth,
		      const char *what, struct fg_err *err);

/* An asynchronous GET of bytes [start, end) of url (end 0: to the end). The
 * body reaches on_data in order, with its absolute offset; on_data runs on
 * the thread inside fg_http_run and returns 0, or an FG_E* code (with the
 * message in *err) to abort the transfer without retry. on_done is called
 * once with the outcome (err NULL on success); it may submit new transfers. */
struct fg_http_xfer {
	const char *url;  /* copied */
	const char *what; /* copied; names the transfer in messages */
	unsigned long long start, end;
	int (*on_data)(void *ud, unsigned long long off, const void *data, size_t len,
		       struct fg_err *err);
	void (*on_done)(void *ud, int rc, const struct fg_err *err);
	void *ud;
	struct fg_http_resp *resp; /* optional: filled with the last answer */
	int head;                  /* HEAD instead of GET */
	int no_follow;             /* return 3xx answers instead of following them */
	int no_auth;               /* never attach the token, whatever the host
				    * (URL dependencies: wheels and the like are no
				    * Hub files, as pip never sends it) */
	unsigned long long total;  /* the whole file's size when known (0: unknown): a
				    * 206 whose Content-Range total, or a 200 whose
				    * Content-Length, says otherwise fails at once with
				    * FG_EMISMATCH (the file changed since it was listed;
				    * its bytes must not be mixed with the listed ones) */
	int ranges_needed;         /* a 200 (the whole file) answering a range that starts
				    * past byte 0 fails at once with FG_EUNSUPPORTED
				    * ("ignores Range"), instead of reading and dropping
				    * every byte before the range: a caller splitting a
				    * file into ranges falls back to one request */
};

int fg_http_submit(struct fg_http *h, const struct fg_http_xfer *x, struct fg_err *err);

/* Runs transfers. Without tick it returns when none is left. With tick, tick
 * is called about every tick_ms (and whenever nothing is running): 0 means
 * keep going (it may submit more), 1 means stop once nothing is running, a
 * negative FG_E* code cancels and is returned. Failures of single transfers
 * go to their on_done, not here. */
int fg_http_run(struct fg_http *h, int (*tick)(void *ud), void *ud, unsigned tick_ms,
		struct fg_err *err);

/* Wakes fg_http_run from another thread (so its tick runs soon). */
void fg_http_wakeup(struct fg_http *h);

/* Bytes received from the network so far by this client (all bodies). */
unsigned long long fg_http_bytes_in(const struct fg_http *h);

#endif
