/* http.c - libcurl multi client: redirects with per-hop auth, retries with
 * backoff and Retry-After, range resume, stall timeout (see http.h). */
#include "http.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "ref.h"
#include "version.h"

struct req {
	struct req *next;  /* in waiting */
	struct req *anext; /* in running */
	struct fg_http *h;
	struct fg_http_xfer x; /* url and what point into owned copies below */
	char *url;             /* current hop */
	char *what;
	CURL *easy;
	struct curl_slist *hdrs;
	unsigned long long pos;      /* next body byte wanted (absolute) */
	unsigned long long resp_off; /* absolute offset of the next byte of this response */
	int resp_started;            /* the current response's first body byte was seen */
	int resp_ok;                 /* current response is a 2xx we deliver */
	int enough;                  /* stopped reading on purpose: got [start, end) */
	int tries, redirects;
	int progressed;              /* this attempt delivered bytes */
	long retry_after_ms;         /* from the last answer, -1 none */
	unsigned long long retry_cap_ms; /* the longest wait retry_after_ms may ask for */
	unsigned long long wake_ms;  /* backoff: start no earlier than this */
	int user_rc;                 /* on_data aborted with this */
	struct fg_err user_err;
	struct fg_buf hbuf; /* header lines of the current response */
};

struct fg_http {
	CURLM *multi;
	CURLSH *share;
	struct fg_http_opts o;
	char *hub_origin; /* "scheme://host:port" or NULL */
	char *token;
	char *hub_url;
	char *cainfo, *capath; /* CURL_CA_BUNDLE or SSL_CERT_FILE; SSL_CERT_DIR */
	struct req *waiting; /* not started: new or backing off */
	struct req *running; /* attached to the multi handle */
	int active;
	unsigned long long bytes_in;
};

static unsigned long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000ULL + (unsigned long long)ts.tv_nsec / 1000000ULL;
}

void fg_http_opts_default(struct fg_http_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->max_tries = 6;
	o->stall_secs = 30;
	o->connect_secs = 15;
	o->retry_base_ms = 500;
	o->retry_max_ms = 30000;
	o->max_redirects = 10;
}

/* The origin of url (ref.h's single definition), or NULL if unparsable. */
static char *origin_of(const char *url)
{
	struct fg_buf b = FG_BUF_INIT;

	if (fg_url_origin(&b, url, NULL)) {
		fg_buf_release(&b);
		return NULL;
	}
	return fg_buf_detach(&b, NULL);
}

int fg_http_new(struct fg_http **out, const struct fg_http_opts *opts, struct fg_err *err)
{
	static int inited;
	struct fg_http *h;

	*out = NULL;
	if (!inited) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT))
			return fg_err_set(err, FG_ENET, "libcurl initialisation failed");
		inited = 1;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	h->o = *opts;
	if (h->o.max_tries < 1)
		h->o.max_tries = 1;
	h->multi = curl_multi_init();
	h->share = curl_share_init();
	if (!h->multi || !h->share) {
		fg_http_free(h);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	/* one TLS session cache for every transfer: the N connections of -j N
	 * resume the first one's session instead of a full handshake each */
	curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_multi_setopt(h->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 64L);
	curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, 64L);
	/* one transfer per connection, HTTP/2 included: libcurl would otherwise
	 * multiplex every range of a file over one TCP connection to an HTTP/2
	 * server (the Hub's CDNs are), and -j N would buy N streams sharing one
	 * congestion window instead of N connections */
	curl_multi_setopt(h->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
	if (opts->hub_url) {
		h->hub_url = strdup(opts->hub_url);
		h->hub_origin = origin_of(opts->hub_url);
		if (!h->hub_url || !h->hub_origin) {
			fg_http_free(h);
			return fg_err_set(err, FG_EINVAL, "endpoint %s: not a URL", opts->hub_url);
		}
	}
	if (opts->token && *opts->token) {
		h->token = strdup(opts->token);
		if (!h->token) {
			fg_http_free(h);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
	}
	{
		const char *ca, *dir;

		fg_http_ca_env(&ca, &dir, NULL);
		if ((ca && !(h->cainfo = strdup(ca))) || (dir && !(h->capath = strdup(dir)))) {
			fg_http_free(h);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
	}
	h->o.hub_url = h->hub_url;
	h->o.token = h->token;
	*out = h;
	return 0;
}

/* Takes r's easy handle off the multi handle and the running list. */
static void detach(struct fg_http *h, struct req *r)
{
	struct req **pp;

	if (!r->easy)
		return;
	curl_multi_remove_handle(h->multi, r->easy);
	curl_easy_cleanup(r->easy);
	r->easy = NULL;
	h->active--;
	for (pp = &h->running; *pp; pp = &(*pp)->anext)
		if (*pp == r) {
			*pp = r->anext;
			break;
		}
	r->anext = NULL;
}

static void req_free(struct req *r)
{
	if (!r)
		return;
	detach(r->h, r);
	curl_slist_free_all(r->hdrs);
	fg_buf_release(&r->hbuf);
	free(r->url);
	free(r->what);
	free(r);
}

void fg_http_ca_env(const char **file, const char **dir, const char *first)
{
	const char *vars[3] = { first, "CURL_CA_BUNDLE", "SSL_CERT_FILE" };
	size_t i;

	*file = NULL;
	for (i = 0; i < 3 && !*file; i++) {
		const char *v = vars[i] ? getenv(vars[i]) : NULL;

		*file = v && *v ? v : NULL;
	}
	if (dir) {
		*dir = getenv("SSL_CERT_DIR");
		if (*dir && !**dir)
			*dir = NULL;
	}
}

void fg_http_free(struct fg_http *h)
{
	struct req *r, *n;

	if (!h)
		return;
	for (r = h->waiting; r; r = n) {
		n = r->next;
		req_free(r);
	}
	while (h->running)
		req_free(h->running);
	if (h->multi)
		curl_multi_cleanup(h->multi);
	if (h->share)
		curl_share_cleanup(h->share);
	free(h->hub_origin);
	free(h->hub_url);
	free(h->cainfo);
	free(h->capath);
	if (h->token) {
		memset(h->token, 0, strlen(h->token));
		free(h->token);
	}
	free(h);
}

void fg_http_wakeup(struct fg_http *h)
{
	curl_multi_wakeup(h->multi);
}

unsigned long long fg_http_bytes_in(const struct fg_http *h)
{
	return h->bytes_in;
}

void fg_http_resp_init(struct fg_http_resp *r)
{
	memset(r, 0, sizeof(*r));
}

void fg_http_resp_release(struct fg_http_resp *r)
{
	if (!r)
		return;
	fg_buf_release(&r->headers);
	fg_buf_release(&r->body);
	free(r->url);
	r->url = NULL;
	r->status = 0;
}

/* Finds header name in raw header lines from byte *from on; sets *v and *vl
 * to the trimmed value and *from past its line. */
static int find_header_from(const char *h, size_t len, size_t *from, const char *name,
			    const char **v, size_t *vl)
{
	size_t nl = strlen(name), i = *from;

	while (i < len) {
		size_t e = i;

		while (e < len && h[e] != '\n')
			e++;
		if (e - i > nl && h[i + nl] == ':' && !strncasecmp(h + i, name, nl)) {
			size_t s = i + nl + 1, t = e;

			while (s < t && (h[s] == ' ' || h[s] == '\t'))
				s++;
			while (t > s && (h[t - 1] == '\r' || h[t - 1] == ' ' || h[t - 1] == '\t'))
				t--;
			*v = h + s;
			*vl = t - s;
			*from = e + 1;
			return 0;
		}
		i = e + 1;
	}
	return -1;
}

/* The first header name in raw header lines. */
static int find_header(const char *h, size_t len, const char *name, const char **v, size_t *vl)
{
	size_t from = 0;

	return find_header_from(h, len, &from, name, v, vl);
}

int fg_http_resp_header(const struct fg_http_resp *r, const char *name, struct fg_buf *out)
{
	const char *v;
	size_t vl;

	if (!r->headers.data || find_header(r->headers.data, r->headers.len, name, &v, &vl))
		return -1;
	fg_buf_reset(out);
	return fg_buf_append(out, v, vl, NULL) ? -1 : 0;
}

int fg_http_resp_header_all(const struct fg_http_resp *r, const char *name, struct fg_buf *out)
{
	const char *v;
	size_t vl, from = 0;
	int found = 0;

	if (!r->headers.data)
		return -1;
	fg_buf_reset(out);
	while (!find_header_from(r->headers.data, r->headers.len, &from, name, &v, &vl)) {
		if ((found && fg_buf_puts(out, ", ", NULL)) || fg_buf_append(out, v, vl, NULL))
			return -1;
		found = 1;
	}
	return found ? 0 : -1;
}

static int parse_num(const char *v, size_t len, size_t *i, unsigned long long *out)
{
	char num[24];
	size_t k = 0;

	while (*i < len && k < sizeof(num) - 1 && isdigit((unsigned char)v[*i]))
		num[k++] = v[(*i)++];
	num[k] = '\0';
	return k == 0 || (*i < len && isdigit((unsigned char)v[*i])) || fg_parse_u64(num, out) ? -1 : 0;
}

int fg_http_url_resolve(struct fg_buf *out, const char *base, const char *ref)
{
	CURLU *u = curl_url();
	char *abs = NULL;
	int rc = -1;

	if (u && !curl_url_set(u, CURLUPART_URL, base, 0) && !curl_url_set(u, CURLUPART_URL, ref, 0) &&
	    !curl_url_get(u, CURLUPART_URL, &abs, 0)) {
		fg_buf_reset(out);
		rc = fg_buf_puts(out, abs, NULL) ? -1 : 0;
	}
	curl_free(abs);
	curl_url_cleanup(u);
	return rc;
}

int fg_http_content_range(const char *v, size_t len, unsigned long long *start,
			  unsigned long long *end, unsigned long long *total, int *has_total)
{
	size_t i = 6;

	*total = 0;
	*has_total = 0;
	if (len < 6 || strncasecmp(v, "bytes", 5) || (v[5] != ' ' && v[5] != '\t'))
		return -1;
	while (i < len && (v[i] == ' ' || v[i] == '\t'))
		i++;
	if (parse_num(v, len, &i, start) || i >= len || v[i++] != '-' || parse_num(v, len, &i, end) ||
	    i >= len || v[i++] != '/' || *end < *start)
		return -1;
	if (i + 1 == len && v[i] == '*')
		return 0;
	if (parse_num(v, len, &i, total) || i != len || *total <= *end)
		return -1;
	*has_total = 1;
	return 0;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct req *r = ud;
	size_t len = size * n;

	if (len >= 5 && !memcmp(p, "HTTP/", 5)) {
		fg_buf_reset(&r->hbuf);
		r->resp_started = 0;
	}
	if (r->hbuf.len + len < 65536)
		fg_buf_append(&r->hbuf, p, len, NULL);
	return len;
}

/* "Content-Range: bytes S-E/T" of the current answer; -1 when absent or odd. */
static int content_range(const struct req *r, unsigned long long *start, unsigned long long *total,
			 int *has_total)
{
	const char *v;
	size_t vl;
	unsigned long long end;

	if (!r->hbuf.data || find_header(r->hbuf.data, r->hbuf.len, "Content-Range", &v, &vl))
		return -1;
	return fg_http_content_range(v, vl, start, &end, total, has_total);
}

/* Content-Length of the current answer; -1 when absent or odd. */
static int content_length(const struct req *r, unsigned long long *len)
{
	const char *v;
	size_t vl, i = 0;

	if (!r->hbuf.data || find_header(r->hbuf.data, r->hbuf.len, "Content-Length", &v, &vl))
		return -1;
	return parse_num(v, vl, &i, len) || i != vl ? -1 : 0;
}

/* The error of a transfer whose file is no longer the size it was listed with. */
static int size_changed(struct fg_err *e, const char *what, unsigned long long now,
			unsigned long long listed)
{
	return fg_err_set(e, FG_EMISMATCH,
			  "%s: the remote file is now %llu bytes, %llu when listed (it changed; lock again)",
			  what, now, listed);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct req *r = ud;
	size_t len = size * n, skip = 0, take;
	long status = 0;

	if (!r->resp_started) {
		r->resp_started = 1;
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
		r->resp_ok = status >= 200 && status < 300;
		if (status == 206) {
			unsigned long long total;
			int has_total;

			if (content_range(r, &r->resp_off, &total, &has_total) || r->resp_off > r->pos) {
				r->user_rc = fg_err_set(&r->user_err, FG_ENET,
							"%s: server sent a range we did not ask for", r->what);
				return 0;
			}
			if (r->x.total && has_total && total != r->x.total) {
				r->user_rc = size_changed(&r->user_err, r->what, total, r->x.total);
				return 0;
			}
		} else {
			unsigned long long cl;

			r->resp_off = 0;
			if (r->resp_ok && r->x.total && !content_length(r, &cl) && cl != r->x.total) {
				r->user_rc = size_changed(&r->user_err, r->what, cl, r->x.total);
				return 0;
			}
			if (r->resp_ok && r->x.ranges_needed && r->pos > 0) {
				r->user_rc = fg_err_set(&r->user_err, FG_EUNSUPPORTED,
							"%s: the server ignores Range (HTTP %ld)", r->what,
							status);
				return 0;
			}
		}
	}
	if (!r->resp_ok)
		return len; /* error bodies are dropped */
	if (r->x.total && r->resp_off + len > r->x.total) {
		/* more bytes than the file was listed with, in an answer that gave
		 * no length beforehand (chunked, or ended by closing): hashing its
		 * first bytes would pin a file that never existed */
		r->user_rc = fg_err_set(&r->user_err, FG_EMISMATCH,
					"%s: the remote file is now longer than the %llu bytes listed "
					"(it changed; lock again)",
					r->what, r->x.total);
		return 0;
	}
	r->h->bytes_in += len;
	if (r->resp_off < r->pos) {
		unsigned long long d = r->pos - r->resp_off;

		skip = d < len ? (size_t)d : len;
	}
	take = len - skip;
	if (r->x.end && r->pos + take > r->x.end)
		take = (size_t)(r->x.end - r->pos);
	if (take && r->x.on_data) {
		int rc = r->x.on_data(r->x.ud, r->pos, p + skip, take, &r->user_err);

		if (rc) {
			r->user_rc = rc;
			return 0;
		}
	}
	r->pos += take;
	r->resp_off += len;
	if (take)
		r->progressed = 1;
	if (r->x.end && r->pos >= r->x.end && skip + take < len) {
		r->enough = 1; /* a 200 carrying more than the range: stop reading */
		return 0;
	}
	return len;
}

/* 1 when url is on the Hub's own scheme://host:port, the one origin the
 * token goes to. */
static int to_hub(const struct fg_http *h, const char *url)
{
	char *o = h->hub_origin ? origin_of(url) : NULL;
	int hub = o && !strcmp(o, h->hub_origin);

	free(o);
	return hub;
}

static int start_req(struct fg_http *h, struct req *r, struct fg_err *err)
{
	CURL *e = curl_easy_init();
	struct fg_buf b = FG_BUF_INIT;

	if (!e)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	r->easy = e;
	r->resp_started = 0;
	r->progressed = 0;
	r->enough = 0;
	r->retry_after_ms = -1;
	r->retry_cap_ms = h->o.retry_max_ms;
	fg_buf_reset(&r->hbuf);
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
	if (h->token && !r->x.no_auth && to_hub(h, r->url)) {
		if (!fg_buf_printf(&b, NULL, "Authorization: Bearer %s", h->token))
			r->hdrs = curl_slist_append(r->hdrs, b.data);
		memset(b.data, 0, b.len);
	}
	fg_buf_release(&b);
	/* RFC 9110 12.5.3: a request without Accept-Encoding accepts any content
	 * coding, so a server may gzip a file or a listing unasked (its ranges
	 * and lengths then count gzipped bytes). "identity" asks for the bytes
	 * as stored, the ones hashed and listed (huggingface_hub asks so too). */
	{
		struct curl_slist *t = curl_slist_append(r->hdrs, "Accept-Encoding: identity");

		if (!t) {
			curl_easy_cleanup(e);
			r->easy = NULL;
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
		r->hdrs = t;
	}
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)r);
	curl_easy_setopt(e, CURLOPT_SHARE, h->share);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "fgpack/" FG_VERSION);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, h->o.connect_secs);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, h->o.stall_secs);
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L * 1024L);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, NULL);
	if (h->cainfo)
		curl_easy_setopt(e, CURLOPT_CAINFO, h->cainfo);
	if (h->capath)
		curl_easy_setopt(e, CURLOPT_CAPATH, h->capath);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
	if (r->x.head) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (r->pos > 0 || r->x.end) {
		char range[64];

		if (r->x.end)
			snprintf(range, sizeof(range), "%llu-%llu", r->pos, r->x.end - 1);
		else
			snprintf(range, sizeof(range), "%llu-", r->pos);
		curl_easy_setopt(e, CURLOPT_RANGE, range);
	}
	if (curl_multi_add_handle(h->multi, e) != CURLM_OK) {
		curl_easy_cleanup(e);
		r->easy = NULL;
		return fg_err_set(err, FG_ENET, "%s: cannot start transfer", r->what);
	}
	h->active++;
	r->anext = h->running;
	h->running = r;
	return 0;
}

int fg_http_submit(struct fg_http *h, const struct fg_http_xfer *x, struct fg_err *err)
{
	struct req *r = calloc(1, sizeof(*r));

	if (!r)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	r->h = h;
	r->x = *x;
	r->url = strdup(x->url);
	r->what = strdup(x->what ? x->what : x->url);
	if (!r->url || !r->what) {
		req_free(r);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	r->x.url = r->url;
	r->x.what = r->what;
	r->pos = x->start;
	r->next = h->waiting;
	h->waiting = r;
	return 0;
}

/* Retry-After as delta seconds or an HTTP date; -1 when absent. */
static long parse_retry_after(const struct req *r)
{
	const char *v;
	size_t vl;
	char tmp[64];
	unsigned long long secs;
	time_t t;

	if (!r->hbuf.data || find_header(r->hbuf.data, r->hbuf.len, "Retry-After", &v, &vl) ||
	    vl == 0 || vl >= sizeof(tmp))
		return -1;
	memcpy(tmp, v, vl);
	tmp[vl] = '\0';
	if (!fg_parse_u64(tmp, &secs))
		return secs > 86400 ? 86400000L : (long)secs * 1000L;
	t = curl_getdate(tmp, NULL);
	if (t < 0)
		return -1;
	return t > time(NULL) ? (long)(t - time(NULL)) * 1000L : 0;
}

/* The Hub's 429s say when its 5-minute window resets in the RateLimit field
 * of draft-ietf-httpapi-ratelimit-headers, e.g. RateLimit: "api";r=0;t=55 (t:
 * seconds until reset), often without a Retry-After. Milliseconds, or -1. */
static long parse_ratelimit_reset(const struct req *r)
{
	const char *v;
	size_t vl, i;
	unsigned long long t = 0;
	int digits = 0;

	if (!r->hbuf.data || find_header(r->hbuf.data, r->hbuf.len, "RateLimit", &v, &vl))
		return -1;
	for (i = 0; i < vl; i++) {
		size_t k = i + 1;

		if (v[i] != ';')
			continue;
		while (k < vl && (v[k] == ' ' || v[k] == '\t'))
			k++;
		if (k >= vl || (v[k] != 't' && v[k] != 'T'))
			continue;
		k++;
		while (k < vl && (v[k] == ' ' || v[k] == '\t'))
			k++;
		if (k >= vl || v[k] != '=')
			continue;
		k++;
		while (k < vl && (v[k] == ' ' || v[k] == '\t'))
			k++;
		for (; k < vl && isdigit((unsigned char)v[k]) && t < 86400; k++, digits++)
			t = t * 10 + (unsigned long long)(v[k] - '0');
		if (digits)
			return t > 86400 ? 86400000L : (long)t * 1000L;
	}
	return -1;
}

static void finish(struct fg_http *h, struct req *r, int rc, const struct fg_err *e, long status)
{
	if (r->x.resp) {
		struct fg_http_resp *o = r->x.resp;

		o->status = status;
		fg_buf_reset(&o->headers);
		if (r->hbuf.len)
			fg_buf_append(&o->headers, r->hbuf.data, r->hbuf.len, NULL);
		free(o->url);
		o->url = strdup(r->url);
	}
	detach(h, r);
	if (r->x.on_done)
		r->x.on_done(r->x.ud, rc, rc ? e : NULL);
	req_free(r);
}

/* Appends v (vl bytes) to out (n bytes, NUL-terminated) without control
 * characters (a header value from any server: one line, no escapes), at
 * most max bytes of it. */
static void append_clean(char *out, size_t n, const char *v, size_t vl, size_t max)
{
	size_t k = strlen(out), i;

	for (i = 0; i < vl && max && k + 1 < n; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c < 0x20 || c == 0x7f)
			continue;
		out[k++] = (char)c;
		max--;
	}
	out[k] = 0;
}

/* What the Hub says of a refusal, for the one-line error: its X-Error-Code
 * (GatedRepo, RepoNotFound, RevisionNotFound, EntryNotFound) and
 * X-Error-Message, and where the Hub's own host refused a repo (401 and 403:
 * the Hub answers 401 for a private or gated repo asked without a token),
 * whether HF_TOKEN went with the request. */
static void refusal_detail(const struct fg_http *h, const struct req *r, long status, char *out, size_t n)
{
	const char *v, *why;
	size_t vl;
	int gated = 0, missing = 0;

	out[0] = 0;
	if (r->hbuf.data && !find_header(r->hbuf.data, r->hbuf.len, "X-Error-Code", &v, &vl) && vl) {
		snprintf(out, n, " ");
		append_clean(out, n, v, vl, 40);
		gated = vl == 9 && !strncmp(v, "GatedRepo", 9);
		missing = vl == 12 && !strncmp(v, "RepoNotFound", 12);
	}
	if (r->hbuf.data && !find_header(r->hbuf.data, r->hbuf.len, "X-Error-Message", &v, &vl) && vl) {
		snprintf(out + strlen(out), n - strlen(out), ": ");
		append_clean(out, n, v, vl, 200);
	}
	if (!(status == 401 || status == 403 || gated || missing) || !to_hub(h, r->url))
		return;
	why = !h->token ? " (no HF_TOKEN was found: private and gated repos need one)"
	      : r->x.no_auth ? ""
	      : gated ? " (HF_TOKEN was sent: accept the repo's terms on the Hub with its account)"
		      : " (HF_TOKEN was sent: can its account read this repo?)";
	snprintf(out + strlen(out), n - strlen(out), "%s", why);
}

static int status_code(long s)
{
	if (s == 401 || s == 403)
		return FG_EAUTH;
	if (s == 404 || s == 410)
		return FG_ENOTFOUND;
	return FG_ENET;
}

static int retryable_status(long s)
{
	return s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504;
}

static int retryable_curl(CURLcode c)
{
	switch (c) {
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_OUT_OF_MEMORY:
	case CURLE_TOO_MANY_REDIRECTS:
	case CURLE_ABORTED_BY_CALLBACK:
	case CURLE_BAD_FUNCTION_ARGUMENT:
	case CURLE_FILESIZE_EXCEEDED:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_LOGIN_DENIED:
		return 0;
	default:
		return 1;
	}
}

/* The attempt failed with a retryable cause: park r for a backoff, or finish it. */
static void retry_or_fail(struct fg_http *h, struct req *r, const char *cause, int code, long status)
{
	struct fg_err e;
	unsigned long long delay;
	int shift;

	if (r->progressed)
		r->tries = 0; /* bytes moved: only failures in a row count */
	r->tries++;
	if (r->tries >= h->o.max_tries) {
		fg_err_set(&e, code, "%s: %s after %d tr%s", r->what, cause, r->tries,
			   r->tries == 1 ? "y" : "ies");
		finish(h, r, code, &e, status);
		return;
	}
	shift = r->tries - 1 < 16 ? r->tries - 1 : 16;
	delay = (unsigned long long)h->o.retry_base_ms << shift;
	if (r->retry_after_ms >= 0)
		delay = (unsigned long long)r->retry_after_ms;
	if (delay > r->retry_cap_ms)
		delay = r->retry_cap_ms;
	detach(h, r);
	r->wake_ms = now_ms() + delay;
	r->next = h->waiting;
	h->waiting = r;
}

static void on_complete(struct fg_http *h, struct req *r, CURLcode res)
{
	long status = 0;
	struct fg_err e;
	char cause[160];

	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	if (r->user_rc) {
		finish(h, r, r->user_rc, &r->user_err, status);
		return;
	}
	if (res == CURLE_WRITE_ERROR && r->enough)
		res = CURLE_OK;
	if (res != CURLE_OK) {
		snprintf(cause, sizeof(cause), "%s", curl_easy_strerror(res));
		if (res == CURLE_OPERATION_TIMEDOUT)
			snprintf(cause, sizeof(cause), "stalled (under 1 KiB/s for %lds)", h->o.stall_secs);
		if (!retryable_curl(res)) {
			fg_err_set(&e, FG_ENET, "%s: %s", r->what, cause);
			finish(h, r, FG_ENET, &e, status);
			return;
		}
		retry_or_fail(h, r, cause, FG_ENET, status);
		return;
	}
	if (status >= 300 && status < 400 && !r->x.no_follow) {
		char *loc = NULL;

		curl_easy_getinfo(r->easy, CURLINFO_REDIRECT_URL, &loc);
		if (!loc) {
			fg_err_set(&e, FG_ENET, "%s: HTTP %ld without a Location", r->what, status);
			finish(h, r, FG_ENET, &e, status);
			return;
		}
		if (++r->redirects > h->o.max_redirects) {
			fg_err_set(&e, FG_ENET, "%s: more than %d redirects (last to %s)", r->what,
				   h->o.max_redirects, loc);
			finish(h, r, FG_ENET, &e, status);
			return;
		}
		{
			char *nu = strdup(loc);
			struct fg_err se;

			if (!nu) {
				fg_err_set(&e, FG_ENOMEM, "out of memory");
				finish(h, r, FG_ENOMEM, &e, status);
				return;
			}
			detach(h, r);
			free(r->url);
			r->url = nu;
			r->x.url = nu;
			if (start_req(h, r, &se))
				finish(h, r, se.code, &se, status);
		}
		return;
	}
	if (retryable_status(status)) {
		r->retry_after_ms = parse_retry_after(r);
		if (r->retry_after_ms < 0 && status == 429)
			r->retry_after_ms = parse_ratelimit_reset(r); /* the window's reset */
		/* a 429, or a wait the server names (Retry-After: 120 inside a Hub
		 * window, a 503 during maintenance), is waited out up to the 5
		 * minutes a Hub window lasts: retrying sooner only spends the tries */
		if ((status == 429 || r->retry_after_ms >= 0) && r->retry_cap_ms < 300000)
			r->retry_cap_ms = 300000;
		snprintf(cause, sizeof(cause), "HTTP %ld", status);
		retry_or_fail(h, r, cause, FG_ENET, status);
		return;
	}
	if (status == 416 && r->x.total) {
		/* "Content-Range: bytes * /T": the file is now T bytes long */
		const char *v;
		size_t vl, i = 8;
		unsigned long long t;

		if (r->hbuf.data && !find_header(r->hbuf.data, r->hbuf.len, "Content-Range", &v, &vl) &&
		    vl > 8 && !strncasecmp(v, "bytes */", 8) && !parse_num(v, vl, &i, &t) && i == vl &&
		    t != r->x.total) {
			finish(h, r, size_changed(&e, r->what, t, r->x.total), &e, status);
			return;
		}
	}
	if (status >= 400 || (status >= 300 && !r->x.no_follow) || status < 200) {
		char why[400];

		refusal_detail(h, r, status, why, sizeof(why));
		fg_err_set(&e, status_code(status), "%s: HTTP %ld%s", r->what, status, why);
		finish(h, r, status_code(status), &e, status);
		return;
	}
	if (!r->x.head && r->x.end && r->pos < r->x.end && status < 300) {
		retry_or_fail(h, r, "body ended early", FG_ENET, status);
		return;
	}
	finish(h, r, 0, NULL, status);
}

int fg_http_run(struct fg_http *h, int (*tick)(void *ud), void *ud, unsigned tick_ms,
		struct fg_err *err)
{
	unsigned long long last_tick = now_ms();

	if (!tick_ms)
		tick_ms = 200;
	for (;;) {
		struct req **pp, *r;
		unsigned long long now = now_ms(), next_wake = 0;
		int running = 0, left, timeout;
		CURLMsg *m;

		for (pp = &h->waiting; (r = *pp);) {
			if (r->wake_ms <= now) {
				struct fg_err se;

				*pp = r->next;
				r->next = NULL;
				if (start_req(h, r, &se))
					finish(h, r, se.code, &se, 0);
				continue;
			}
			if (!next_wake || r->wake_ms < next_wake)
				next_wake = r->wake_ms;
			pp = &r->next;
		}
		if (!h->active && !h->waiting && !tick)
			break;
		curl_multi_perform(h->multi, &running);
		while ((m = curl_multi_info_read(h->multi, &left))) {
			struct req *dr = NULL;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&dr);
			on_complete(h, dr, m->data.result);
		}
		if (!h->active && !h->waiting && !tick)
			break; /* done: no poll for a tick that nobody waits for */
		now = now_ms();
		if (tick && (now - last_tick >= tick_ms || (!h->active && !h->waiting))) {
			int rc;

			last_tick = now;
			rc = tick(ud);
			if (rc < 0)
				return fg_err_set(err, rc, "interrupted");
			if (rc > 0 && !h->active && !h->waiting)
				break;
		}
		if (h->waiting && !h->active) {
			/* only backoffs pending: sleep until the first is due */
			timeout = next_wake > now ? (int)(next_wake - now) : 0;
		} else {
			timeout = (int)tick_ms;
			if (next_wake && next_wake > now && next_wake - now < (unsigned long long)timeout)
				timeout = (int)(next_wake - now);
		}
		if (timeout > (int)tick_ms)
			timeout = (int)tick_ms;
		if (h->active || timeout > 0)
			curl_multi_poll(h->multi, NULL, 0, timeout, NULL);
	}
	return 0;
}

struct blocking {
	struct fg_http_resp *resp;
	size_t max;
	int rc;
	struct fg_err err;
	int done;
};

static int blocking_data(void *ud, unsigned long long off, const void *data, size_t len,
			 struct fg_err *err)
{
	struct blocking *b = ud;

	(void)off;
	if (b->resp->body.len + len > b->max)
		return fg_err_set(err, FG_EFORMAT, "answer larger than %zu bytes", b->max);
	return fg_buf_append(&b->resp->body, data, len, err);
}

static void blocking_done(void *ud, int rc, const struct fg_err *err)
{
	struct blocking *b = ud;

	b->done = 1;
	b->rc = rc;
	if (rc && err)
		b->err = *err;
}

static int discard_data(void *ud, unsigned long long off, const void *data, size_t len,
			struct fg_err *err)
{
	(void)ud;
	(void)off;
	(void)data;
	(void)len;
	(void)err;
	return 0;
}

/* One request run to its end. probe: a GET of byte 0 only ("Range:
 * bytes=0-0"; a 200 is cut after its first byte), the body discarded. */
static int blocking(struct fg_http *h, struct fg_http_resp *out, const char *url, const char *what,
		    int head, int follow, int no_auth, int probe, size_t max_body, struct fg_err *err)
{
	struct blocking b;
	struct fg_http_xfer x;
	int rc;

	memset(&b, 0, sizeof(b));
	memset(&x, 0, sizeof(x));
	b.resp = out;
	b.max = max_body;
	fg_buf_reset(&out->body);
	x.url = url;
	x.what = what;
	x.head = head;
	x.no_follow = !follow;
	x.no_auth = no_auth;
	x.on_data = probe ? discard_data : blocking_data;
	if (probe) {
		x.start = 0;
		x.end = 1;
	}
	x.on_done = blocking_done;
	x.ud = &b;
	x.resp = out;
	rc = fg_http_submit(h, &x, err);
	if (!rc)
		rc = fg_http_run(h, NULL, NULL, 200, err);
	if (rc)
		return rc;
	if (b.rc) {
		if (err)
			*err = b.err;
		return b.rc;
	}
	return 0;
}

int fg_http_get(struct fg_http *h, struct fg_http_resp *out, const char *url, const char *what,
		size_t max_body, struct fg_err *err)
{
	return blocking(h, out, url, what, 0, 1, 0, 0, max_body, err);
}

int fg_http_head(struct fg_http *h, struct fg_http_resp *out, const char *url, int follow,
		 const char *what, struct fg_err *err)
{
	return blocking(h, out, url, what, 1, follow, 0, 0, 0, err);
}

int fg_http_head_probe(struct fg_http *h, struct fg_http_resp *out, const char *url, int no_auth,
		       const char *what, struct fg_err *err)
{
	return blocking(h, out, url, what, 1, 1, no_auth, 0, 0, err);
}

int fg_http_probe_get(struct fg_http *h, struct fg_http_resp *out, const char *url, int no_auth,
		      const char *what, struct fg_err *err)
{
	return blocking(h, out, url, what, 0, 1, no_auth, 1, 0, err);
}
