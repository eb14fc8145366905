/* s3.c - S3 requests for the HF bucket gateway: request building and
 * signing, minimal XML reading, multipart upload with a resume journal.
 *
 * The file has two halves. The upper half is S3: URLs, SigV4, XML, retries,
 * multipart. The lower-level "transport" section (marked below) is the only
 * code that touches libcurl: one request in, status + headers + body out. It
 * is kept apart so it can move onto lib/http once that module offers
 * streaming uploads from a file range. */
#include "s3.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "fsutil.h"
#include "http.h"
#include "sha256.h"
#include "sigv4.h"
#include "utf8.h"

#define RESP_MAX ((size_t)16 << 20)  /* XML answers (listings) are small */
#define POOL_MAX 64
#define DEFAULT_PART ((unsigned long long)64 << 20)
#define DEFAULT_TRIES 6
#define DEFAULT_JOBS 8

struct fg_s3 {
	char *scheme_host; /* the endpoint as given, "http://127.0.0.1:9000" (names resume journals) */
	char *scheme;      /* "http" or "https" */
	char *ep_host;     /* "127.0.0.1", "s3.eu-west-1.amazonaws.com": lowercase; at AWS
			    * (aws) it follows the region, under mu */
	char *port;        /* ":9000" or "" */
	char *base;        /* "" or "/namespace" */
	char *region;      /* may change once: a server naming the bucket's region */
	int aws;           /* ep_host is AWS's own S3 host (aws_s3_host) */
	int ip;            /* ep_host is an IP address: never virtual-hosted */
	enum fg_s3_addressing addressing;
	struct curl_slist *connect_to;
	char *cainfo, *capath; /* AWS_CA_BUNDLE, CURL_CA_BUNDLE or SSL_CERT_FILE; SSL_CERT_DIR */
	struct fg_s3_creds creds;
	int max_tries;
	long long limit_rate;
	pthread_mutex_t mu;
	CURL *pool[POOL_MAX]; /* idle handles, reused to keep connections */
	int npool;
};

/* ---- credentials --------------------------------------------------------- */

static char *dupstr(const char *s)
{
	return s ? strdup(s) : NULL;
}

void fg_s3_creds_clear(struct fg_s3_creds *c)
{
	if (!c)
		return;
	if (c->secret_key)
		memset(c->secret_key, 0, strlen(c->secret_key));
	if (c->session_token)
		memset(c->session_token, 0, strlen(c->session_token));
	free(c->access_key);
	free(c->secret_key);
	free(c->session_token);
	memset(c, 0, sizeof(*c));
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		*--e = 0;
	return s;
}

/* The next line of the ini text at *cur that says something (blank lines
 * and comments skipped), cut in place: a section header sets *sect to its
 * name and returns 1; any other line sets *name and *val (trimmed; *val NULL
 * where the line has no '=') and returns 2; 0 at the end. *indented: the
 * line began with a blank (a nested section's line in the config file). */
static int ini_next(char **cur, int *indented, char **sect, char **name, char **val)
{
	while (*cur && **cur) {
		char *line = *cur, *next = strchr(line, '\n'), *eq;

		if (next)
			*next++ = 0;
		*cur = next;
		*indented = *line == ' ' || *line == '\t';
		line = trim(line);
		if (*line == '#' || *line == ';' || !*line)
			continue;
		if (*line == '[') {
			char *close = strchr(line, ']');

			if (close)
				*close = 0;
			*sect = trim(line + 1);
			return 1;
		}
		*val = NULL;
		if ((eq = strchr(line, '='))) {
			*eq = 0;
			*val = trim(eq + 1);
		}
		*name = trim(line);
		return 2;
	}
	return 0;
}

/* Reads [profile] from an ini-style credentials file. */
static int creds_from_file(struct fg_s3_creds *c, const char *path, const char *profile,
			   struct fg_err *err)
{
	struct fg_buf text = FG_BUF_INIT;
	char *cur, *sect, *name, *v;
	int in = 0, indented, kind, rc;

	if ((rc = fg_file_read(path, (size_t)1 << 20, &text, err)))
		return rc;
	cur = text.data;
	while ((kind = ini_next(&cur, &indented, &sect, &name, &v))) {
		if (kind == 1) {
			in = !strcmp(sect, profile);
			continue;
		}
		if (!in || !v)
			continue;
		if (!strcmp(name, "aws_access_key_id") && !c->access_key)
			c->access_key = dupstr(v);
		else if (!strcmp(name, "aws_secret_access_key") && !c->secret_key)
			c->secret_key = dupstr(v);
		else if (!strcmp(name, "aws_session_token") && !c->session_token)
			c->session_token = dupstr(v);
	}
	memset(text.data, 0, text.len);
	fg_buf_release(&text);
	return 0;
}

int fg_s3_creds_load(struct fg_s3_creds *out, struct fg_err *err)
{
	const char *ak = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY");
	const char *tok = getenv("AWS_SESSION_TOKEN"), *file = getenv("AWS_SHARED_CREDENTIALS_FILE");
	const char *profile = getenv("AWS_PROFILE"), *home = getenv("HOME");
	struct fg_buf path = FG_BUF_INIT;
	struct fg_err ferr;
	int rc;

	memset(out, 0, sizeof(*out));
	if (ak && *ak && sk && *sk) {
		out->access_key = strdup(ak);
		out->secret_key = strdup(sk);
		out->session_token = tok && *tok ? strdup(tok) : NULL;
		out->source = "environment";
		if (!out->access_key || !out->secret_key || (tok && *tok && !out->session_token)) {
			fg_s3_creds_clear(out);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
		return 0;
	}
	if (!profile || !*profile)
		profile = "default";
	if (file && *file)
		rc = fg_buf_puts(&path, file, err);
	else if (home && *home)
		rc = fg_buf_printf(&path, err, "%s/.aws/credentials", home);
	else
		rc = fg_err_set(err, FG_EAUTH, "no S3 credentials: set AWS_ACCESS_KEY_ID and "
				"AWS_SECRET_ACCESS_KEY (HOME is unset, so no credentials file)");
	if (rc)
		return rc;
	if (access(path.data, R_OK) == 0 && creds_from_file(out, path.data, profile, &ferr) == 0 &&
	    out->access_key && *out->access_key && out->secret_key && *out->secret_key) {
		out->source = "credentials file";
		fg_buf_release(&path);
		return 0;
	}
	fg_s3_creds_clear(out);
	rc = fg_err_set(err, FG_EAUTH,
			"no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
			"profile [%s] in %s",
			profile, path.data);
	fg_buf_release(&path);
	return rc;
}

/* ---- endpoint and keys --------------------------------------------------- */

int fg_s3_endpoint_resolve(struct fg_buf *out, const char *explicit_endpoint, const char *ns,
			   struct fg_err *err)
{
	const char *e = explicit_endpoint;
	size_t n;

	if (!e || !*e)
		e = getenv("AWS_ENDPOINT_URL_S3");
	if (!e || !*e)
		e = getenv("AWS_ENDPOINT_URL");
	if (!e || !*e) {
		if (!ns || !*ns)
			return fg_err_set(err, FG_EINVAL, "s3: no endpoint and no namespace");
		return fg_buf_printf(out, err, "%s/%s", FG_S3_HF_GATEWAY, ns);
	}
	n = strlen(e);
	while (n > 0 && e[n - 1] == '/')
		n--;
	return fg_buf_append(out, e, n, err);
}

/* ---- addressing ---------------------------------------------------------- */

int fg_s3_addressing_parse(enum fg_s3_addressing *out, const char *text, struct fg_err *err)
{
	if (text && !strcmp(text, "auto"))
		*out = FG_S3_ADDR_AUTO;
	else if (text && !strcmp(text, "path"))
		*out = FG_S3_ADDR_PATH;
	else if (text && !strcmp(text, "virtual"))
		*out = FG_S3_ADDR_VIRTUAL;
	else
		return fg_err_set(err, FG_EINVAL, "addressing style %s is not auto, path or virtual",
				  text ? text : "(none)");
	return 0;
}

int fg_s3_addressing_config(enum fg_s3_addressing *out, struct fg_err *err)
{
	const char *file = getenv("AWS_CONFIG_FILE"), *profile = getenv("AWS_PROFILE");
	const char *home = getenv("HOME");
	struct fg_buf path = FG_BUF_INIT, text = FG_BUF_INIT, want = FG_BUF_INIT;
	struct fg_err ferr;
	char *cur, *sect, *name, *v;
	int in = 0, in_s3 = 0, indented, kind, rc = 0;

	*out = FG_S3_ADDR_AUTO;
	if (!profile || !*profile)
		profile = "default";
	if (file && *file)
		rc = fg_buf_puts(&path, file, err);
	else if (home && *home)
		rc = fg_buf_printf(&path, err, "%s/.aws/config", home);
	else
		return 0;
	/* the config file names a profile "[profile NAME]", but the default "[default]" */
	if (!rc)
		rc = strcmp(profile, "default") ? fg_buf_printf(&want, err, "profile %s", profile)
						: fg_buf_puts(&want, "default", err);
	if (rc || access(path.data, R_OK) || fg_file_read(path.data, (size_t)1 << 20, &text, &ferr))
		goto out;
	cur = text.data;
	while ((kind = ini_next(&cur, &indented, &sect, &name, &v))) {
		if (kind == 1) {
			in = !strcmp(sect, want.data);
			in_s3 = 0;
			continue;
		}
		if (!in || !v)
			continue;
		if (!indented) {
			/* "s3 =" opens a nested section; the next unindented line ends it */
			in_s3 = !strcmp(name, "s3") && !*v;
			continue;
		}
		if (in_s3 && !strcmp(name, "addressing_style")) {
			if (fg_s3_addressing_parse(out, v, err))
				rc = fg_err_set(err, FG_EINVAL, "%s [%s] s3 addressing_style %s is not auto, "
						"path or virtual", path.data, want.data, v);
			break;
		}
	}
out:
	fg_buf_release(&path);
	fg_buf_release(&text);
	fg_buf_release(&want);
	return rc;
}

/* The parts of an endpoint URL already checked by endpoint_parse. */
struct ep {
	const char *scheme, *host, *port, *base; /* base: NULL when none */
	size_t scheme_len, host_len, port_len;   /* port with its ':' */
};

/* Splits scheme://host[:port][/base] (host may be an [IPv6] literal);
 * FG_EINVAL when it is no such http(s) URL. */
static int endpoint_parse(struct ep *p, const char *e, struct fg_err *err)
{
	const char *hs, *end, *colon;

	memset(p, 0, sizeof(*p));
	if (!e || (strncmp(e, "http://", 7) && strncmp(e, "https://", 8)))
		return fg_err_set(err, FG_EINVAL, "s3: endpoint must be an http:// or https:// URL");
	hs = strstr(e, "://") + 3;
	end = strchr(hs, '/');
	p->base = end;
	if (!end)
		end = hs + strlen(hs);
	if (end == hs || strchr(e, '?') || strchr(e, '#') || strchr(e, '@'))
		return fg_err_set(err, FG_EINVAL, "s3: bad endpoint URL");
	p->scheme = e;
	p->scheme_len = (size_t)(hs - 3 - e);
	p->host = hs;
	if (*hs == '[') {
		const char *rb = memchr(hs, ']', (size_t)(end - hs));

		if (!rb)
			return fg_err_set(err, FG_EINVAL, "s3: bad endpoint URL");
		colon = rb + 1 < end ? rb + 1 : NULL;
		if (colon && *colon != ':')
			return fg_err_set(err, FG_EINVAL, "s3: bad endpoint URL");
	} else {
		colon = memchr(hs, ':', (size_t)(end - hs));
	}
	p->host_len = (size_t)((colon ? colon : end) - hs);
	p->port = colon;
	p->port_len = colon ? (size_t)(end - colon) : 0;
	if (!p->host_len)
		return fg_err_set(err, FG_EINVAL, "s3: bad endpoint URL");
	return 0;
}

/* A dotted quad, as botocore's IPV4_RE: 1 to 3 digits, four times. */
static int ipv4_like(const char *s, size_t n)
{
	size_t i, digits = 0;
	int dots = 0;

	for (i = 0; i < n; i++) {
		if (s[i] >= '0' && s[i] <= '9') {
			if (++digits > 3)
				return 0;
		} else if (s[i] == '.' && digits) {
			dots++;
			digits = 0;
		} else {
			return 0;
		}
	}
	return dots == 3 && digits;
}

static int ci_suffix(const char *s, size_t n, const char *suf)
{
	size_t l = strlen(suf);

	return n >= l && !strncasecmp(s + n - l, suf, l);
}

/* A region as a host name holds it: "eu-west-1" (one label, letters, digits, '-'). */
static int region_label(const char *r, size_t n)
{
	size_t i;

	if (n == 0 || n > 63 || r[0] == '-' || r[n - 1] == '-')
		return 0;
	for (i = 0; i < n; i++)
		if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= 'A' && r[i] <= 'Z') ||
		      (r[i] >= '0' && r[i] <= '9') || r[i] == '-'))
			return 0;
	return 1;
}

/* Whether host[0..n) is AWS's own S3 API endpoint; *pre then gets the
 * length of what comes before the region ("s3.", "s3.dualstack.",
 * "s3-fips.", ...; 0 for the global s3.amazonaws.com and the legacy
 * s3-<region> form, whose region the regional form replaces), *rs and *rl the
 * region's span (rl 0 when the host names none). */
static int aws_s3_host(const char *h, size_t n, size_t *pre, size_t *rs, size_t *rl)
{
	static const char *const forms[] = { "s3-fips.dualstack.", "s3.dualstack.", "s3-fips.", "s3.",
					     NULL };
	size_t m, i;

	if (ci_suffix(h, n, ".amazonaws.com"))
		m = n - 14;
	else if (ci_suffix(h, n, ".amazonaws.com.cn"))
		m = n - 17;
	else
		return 0;
	*pre = *rs = *rl = 0;
	if (m == 2 && !strncasecmp(h, "s3", 2)) {
		*rs = 2;
		return 1;
	}
	for (i = 0; forms[i]; i++) {
		size_t fl = strlen(forms[i]);

		if (m > fl && !strncasecmp(h, forms[i], fl) && region_label(h + fl, m - fl)) {
			*pre = *rs = fl;
			*rl = m - fl;
			return 1;
		}
	}
	/* s3-eu-west-1.amazonaws.com, s3-external-1; not s3-accelerate or s3-website-* */
	if (m > 3 && !strncasecmp(h, "s3-", 3) && region_label(h + 3, m - 3) &&
	    strncasecmp(h + 3, "accelerate", 10) && strncasecmp(h + 3, "website", 7) &&
	    strncasecmp(h + 3, "object-lambda", 13)) {
		*rs = 3;
		*rl = m - 3;
		return 1;
	}
	return 0;
}

/* A bucket name that can be a host name's first label(s), botocore's
 * aws.isVirtualHostableS3Bucket: 3 to 63 characters, no uppercase, not a
 * dotted quad, and one RFC 1123 label ([a-z0-9-], no '-' at either end), or
 * with dots allowed a series of them. */
static int bucket_hostable(const char *b, int allow_dots)
{
	size_t n = strlen(b), i, start = 0;

	if (n < 3 || n > 63 || ipv4_like(b, n))
		return 0;
	for (i = 0; i <= n; i++) {
		if (i == n || b[i] == '.') {
			if (i == start || b[start] == '-' || b[i - 1] == '-' || (i < n && !allow_dots))
				return 0;
			start = i + 1;
		} else if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '-')) {
			return 0;
		}
	}
	return 1;
}

/* The rule of fg_s3_virtual over an endpoint's facts. A dotted name only
 * over http at a non-AWS endpoint: botocore's ruleset allows subdomains
 * only there (over https a wildcard certificate covers one label). */
static int choose_virtual(enum fg_s3_addressing a, int aws, int ip, int https, const char *bucket)
{
	if (a == FG_S3_ADDR_PATH || ip || (a == FG_S3_ADDR_AUTO && !aws))
		return 0;
	return bucket_hostable(bucket, !aws && !https);
}

int fg_s3_virtual(const char *endpoint, enum fg_s3_addressing addressing, const char *bucket)
{
	struct ep p;
	size_t pre, rs, rl;

	if (!bucket || endpoint_parse(&p, endpoint, NULL))
		return 0;
	return choose_virtual(addressing, aws_s3_host(p.host, p.host_len, &pre, &rs, &rl),
			      p.host[0] == '[' || ipv4_like(p.host, p.host_len), p.scheme_len == 5,
			      bucket);
}

int fg_s3_key_check(const char *key, struct fg_err *err)
{
	size_t len, i, seg = 0;

	if (!key || !*key)
		return fg_err_set(err, FG_EINVAL, "object key is empty");
	len = strlen(key);
	if (len > 1024)
		return fg_err_set(err, FG_EINVAL, "object key is longer than 1024 bytes");
	if (key[0] == '/' || key[len - 1] == '/')
		return fg_err_set(err, FG_EINVAL, "object key %s starts or ends with '/'", key);
	if (strstr(key, "//"))
		return fg_err_set(err, FG_EINVAL, "object key %s contains '//'", key);
	for (i = 0; i <= len; i++) {
		unsigned char c = (unsigned char)key[i];

		if (c == '/' || c == 0) {
			size_t sl = i - seg;

			if ((sl == 1 && key[seg] == '.') || (sl == 2 && key[seg] == '.' && key[seg + 1] == '.'))
				return fg_err_set(err, FG_EINVAL,
						  "object key %s has a '.' or '..' segment", key);
			seg = i + 1;
			continue;
		}
		if (c == '\\')
			return fg_err_set(err, FG_EINVAL, "object key %s contains '\\'", key);
		if (c < 0x20 || c == 0x7f)
			return fg_err_set(err, FG_EINVAL, "object key contains a control character");
		if (c >= 0x80) {
			size_t n = fg_utf8_len((const unsigned char *)key + i, len - i, NULL);

			if (!n)
				return fg_err_set(err, FG_EINVAL, "object key is not valid UTF-8");
			i += n - 1;
		}
	}
	return 0;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK;
}

int fg_s3_new(struct fg_s3 **out, const struct fg_s3_opts *o, struct fg_err *err)
{
	struct fg_s3 *s;
	struct ep p;
	size_t n, pre, rs, rl;
	int rc;

	*out = NULL;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc)
		return fg_err_set(err, FG_ENET, "s3: libcurl initialisation failed");
	if ((rc = endpoint_parse(&p, o->endpoint, err)))
		return rc;
	if (!o->creds || !o->creds->access_key || !o->creds->secret_key)
		return fg_err_set(err, FG_EAUTH, "s3: no credentials");
	s = calloc(1, sizeof(*s));
	if (!s)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	pthread_mutex_init(&s->mu, NULL);
	s->scheme_host = strndup(o->endpoint, (size_t)(p.host + p.host_len + p.port_len - o->endpoint));
	s->scheme = strndup(p.scheme, p.scheme_len);
	s->ep_host = strndup(p.host, p.host_len);
	s->port = strndup(p.port ? p.port : "", p.port_len);
	if (p.base) {
		size_t bl = strlen(p.base);

		while (bl > 0 && p.base[bl - 1] == '/')
			bl--;
		s->base = strndup(p.base, bl);
	} else {
		s->base = strdup("");
	}
	s->aws = aws_s3_host(p.host, p.host_len, &pre, &rs, &rl);
	s->ip = p.host[0] == '[' || ipv4_like(p.host, p.host_len);
	s->addressing = o->addressing;
	if (o->region)
		s->region = strdup(o->region);
	else if (s->aws && pre && rl) /* s3.eu-west-1.amazonaws.com signs for eu-west-1 */
		s->region = strndup(p.host + rs, rl);
	else
		s->region = strdup(FG_S3_DEFAULT_REGION);
	{
		/* a private CA, as awscli (AWS_CA_BUNDLE first) and lib/http.c take it */
		const char *ca, *dir;

		fg_http_ca_env(&ca, &dir, "AWS_CA_BUNDLE");
		if ((ca && !(s->cainfo = strdup(ca))) || (dir && !(s->capath = strdup(dir)))) {
			fg_s3_free(s);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
	}
	for (n = 0; o->connect_to && o->connect_to[n]; n++) {
		struct curl_slist *t = curl_slist_append(s->connect_to, o->connect_to[n]);

		if (!t) {
			fg_s3_free(s);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
		s->connect_to = t;
	}
	s->creds.access_key = dupstr(o->creds->access_key);
	s->creds.secret_key = dupstr(o->creds->secret_key);
	s->creds.session_token = dupstr(o->creds->session_token);
	s->creds.source = o->creds->source;
	s->max_tries = o->max_tries > 0 ? o->max_tries : DEFAULT_TRIES;
	s->limit_rate = o->limit_rate;
	if (!s->scheme_host || !s->scheme || !s->ep_host || !s->port || !s->base || !s->region ||
	    !s->creds.access_key || !s->creds.secret_key ||
	    (o->creds->session_token && !s->creds.session_token)) {
		fg_s3_free(s);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	for (n = 0; s->ep_host[n]; n++)
		if (s->ep_host[n] >= 'A' && s->ep_host[n] <= 'Z')
			s->ep_host[n] = (char)(s->ep_host[n] + 32);
	*out = s;
	return 0;
}

void fg_s3_free(struct fg_s3 *s)
{
	int i;

	if (!s)
		return;
	for (i = 0; i < s->npool; i++)
		curl_easy_cleanup(s->pool[i]);
	pthread_mutex_destroy(&s->mu);
	fg_s3_creds_clear(&s->creds);
	curl_slist_free_all(s->connect_to);
	free(s->scheme_host);
	free(s->scheme);
	free(s->ep_host);
	free(s->port);
	free(s->base);
	free(s->region);
	free(s->cainfo);
	free(s->capath);
	free(s);
}

int fg_s3_target(struct fg_s3 *s, struct fg_buf *url, struct fg_buf *host, struct fg_buf *path,
		 const char *bucket, const char *key, struct fg_err *err)
{
	struct fg_buf h = FG_BUF_INIT, pa = FG_BUF_INIT;
	int virt = choose_virtual(s->addressing, s->aws, s->ip, !strcmp(s->scheme, "https"), bucket);
	int rc;

	pthread_mutex_lock(&s->mu);
	rc = fg_buf_printf(&h, err, "%s%s%s%s", virt ? bucket : "", virt ? "." : "", s->ep_host,
			   s->port);
	pthread_mutex_unlock(&s->mu);
	/* virtual-hosted: the bucket is in the host, and the canonical URI is
	 * the base and key alone ("/" for the bucket itself) */
	if (!rc)
		rc = fg_buf_puts(&pa, s->base, err);
	if (!rc && !virt && !(rc = fg_buf_putc(&pa, '/', err)))
		rc = fg_sigv4_uri_encode(&pa, bucket, strlen(bucket), 0, err);
	if (!rc && (key || virt))
		rc = fg_buf_putc(&pa, '/', err);
	if (!rc && key)
		rc = fg_sigv4_uri_encode(&pa, key, strlen(key), 1, err);
	if (!rc && url)
		rc = fg_buf_printf(url, err, "%s://%s%s", s->scheme, h.data, pa.data);
	if (!rc && host)
		rc = fg_buf_puts(host, h.data, err);
	if (!rc && path)
		rc = fg_buf_puts(path, pa.data, err);
	fg_buf_release(&h);
	fg_buf_release(&pa);
	return rc;
}

/* After a switch to region: at AWS's own endpoint the host names the region
 * (s3.<region>.amazonaws.com), and another region's endpoint refuses the
 * bucket (301 PermanentRedirect), so the host follows, as botocore's
 * S3RegionRedirector re-resolves the endpoint. Elsewhere nothing changes. */
static int follow_region(struct fg_s3 *s, const char *region, struct fg_err *err)
{
	struct fg_buf h = FG_BUF_INIT;
	size_t pre, rs, rl, n;
	int rc = 0;

	if (!s->aws)
		return 0;
	pthread_mutex_lock(&s->mu);
	n = strlen(s->ep_host);
	if (aws_s3_host(s->ep_host, n, &pre, &rs, &rl) && region_label(region, strlen(region))) {
		/* keep "s3.dualstack." and the like; the global and legacy forms become s3.<region> */
		rc = pre ? fg_buf_append(&h, s->ep_host, pre, err) : fg_buf_puts(&h, "s3.", err);
		if (!rc)
			rc = fg_buf_printf(&h, err, "%s%s", region, s->ep_host + rs + rl);
		if (!rc && strcmp(h.data, s->ep_host)) {
			free(s->ep_host);
			s->ep_host = fg_buf_detach(&h, NULL);
		}
	}
	pthread_mutex_unlock(&s->mu);
	fg_buf_release(&h);
	return rc;
}

/* ---- transport (the only libcurl code) ----------------------------------- */

struct xfer {
	/* request */
	const char *method;
	const char *url;
	struct curl_slist *headers;
	const char *mem_body;          /* memory body (PUT/POST) */
	size_t mem_len;
	int body_fd;                   /* or a file range body, body_fd >= 0 */
	unsigned long long body_off, body_len;
	int head;                      /* HEAD: no body expected */
	long long limit_rate;
	/* response */
	long status;
	struct fg_buf *resp;           /* body when not going to out_fd */
	int out_fd;
	unsigned long long out_off, out_written;
	int write_failed;
	fg_s3_data_fn data_fn;         /* or to this callback */
	void *data_user;
	struct fg_err data_err;
	int data_failed;
	char etag[FG_S3_ETAG_MAX];
	char last_modified[64];
	char content_type[128];
	char location[2048];
	char bucket_region[64];        /* x-amz-bucket-region (AWS redirects) */
	unsigned long long content_length;
	int have_length;
	unsigned long long range_total; /* N of Content-Range: bytes .../N */
	int have_range_total;
	unsigned long long range_start, range_end; /* S-E of Content-Range: bytes S-E/N */
	int have_range;
	/* a ranged GET: the first byte asked for; a 206 starting earlier has
	 * the bytes before it dropped (skip), one starting later is an error */
	int want_range;
	unsigned long long want_start, skip;
	int body_seen;
	long long server_date;         /* Date, as time_t; -1 when absent */
	long retry_after;
	/* body read position */
	unsigned long long sent;
	char curl_msg[CURL_ERROR_SIZE];
};

static CURL *handle_get(struct fg_s3 *s)
{
	CURL *c = NULL;

	pthread_mutex_lock(&s->mu);
	if (s->npool > 0)
		c = s->pool[--s->npool];
	pthread_mutex_unlock(&s->mu);
	return c ? c : curl_easy_init();
}

static void handle_put(struct fg_s3 *s, CURL *c)
{
	pthread_mutex_lock(&s->mu);
	if (s->npool < POOL_MAX) {
		s->pool[s->npool++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&s->mu);
	if (c)
		curl_easy_cleanup(c);
}

static size_t read_cb(char *dst, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t want = size * nmemb;

	if (x->body_fd >= 0) {
		unsigned long long left = x->body_len - x->sent;
		ssize_t r;

		if (want > left)
			want = (size_t)left;
		if (!want)
			return 0;
		r = pread(x->body_fd, dst, want, (off_t)(x->body_off + x->sent));
		if (r <= 0)
			return CURL_READFUNC_ABORT;
		x->sent += (unsigned long long)r;
		return (size_t)r;
	}
	if (want > x->mem_len - x->sent)
		want = x->mem_len - (size_t)x->sent;
	memcpy(dst, x->mem_body + x->sent, want);
	x->sent += want;
	return want;
}

static size_t write_cb(char *src, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nmemb;

	if (x->want_range && x->status == 206) {
		/* RFC 9110 14.4: Content-Range says which bytes came, whatever was
		 * asked (a CDN may start a range earlier, or cap it) */
		if (!x->body_seen) {
			x->body_seen = 1;
			if (!x->have_range || x->range_start > x->want_start) {
				if (x->have_range)
					fg_err_set(&x->data_err, FG_EFORMAT,
						   "the server sent bytes %llu-%llu, not from byte %llu as asked",
						   x->range_start, x->range_end, x->want_start);
				else
					fg_err_set(&x->data_err, FG_EFORMAT,
						   "a 206 without a Content-Range");
				x->data_failed = 1;
				return 0;
			}
			x->skip = x->want_start - x->range_start;
		}
		if (x->skip) {
			size_t d = x->skip < n ? (size_t)x->skip : n;

			x->skip -= d;
			if (d == n)
				return n;
			return d + write_cb(src + d, 1, n - d, ud);
		}
	}
	if (x->data_fn && x->status / 100 == 2) {
		if (x->data_fn(x->data_user, src, n, &x->data_err)) {
			x->data_failed = 1;
			return 0;
		}
		return n;
	}
	if (x->out_fd >= 0 && x->status / 100 == 2) {
		size_t done = 0;

		while (done < n) {
			ssize_t w = pwrite(x->out_fd, src + done, n - done,
					   (off_t)(x->out_off + x->out_written + done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				x->write_failed = errno ? errno : EIO;
				return 0;
			}
			done += (size_t)w;
		}
		x->out_written += n;
		return n;
	}
	if (x->resp && fg_buf_append(x->resp, src, n, NULL))
		return 0;
	return n;
}

static void copy_hval(char *dst, size_t cap, const char *v, size_t n)
{
	while (n && (*v == ' ' || *v == '\t'))
		v++, n--;
	while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, v, n);
	dst[n] = 0;
}

static size_t header_cb(char *line, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nmemb;
	const char *colon = memchr(line, ':', n);
	size_t nl;

	if (n >= 5 && !strncmp(line, "HTTP/", 5)) {
		/* a new response (after 100 Continue or a redirect): forget the last */
		const char *sp = memchr(line, ' ', n);
		long st = 0;

		x->etag[0] = x->last_modified[0] = x->content_type[0] = x->location[0] = 0;
		x->bucket_region[0] = 0;
		x->have_length = x->have_range_total = x->have_range = 0;
		x->body_seen = 0;
		x->skip = 0;
		x->server_date = -1;
		x->retry_after = -1;
		while (sp && sp < line + n && *sp == ' ')
			sp++;
		/* a status has three digits; more from a bad server must not
		 * overflow st (signed: undefined) */
		while (sp && sp < line + n && *sp >= '0' && *sp <= '9' && st < 10000)
			st = st * 10 + (*sp++ - '0');
		x->status = st;
		return n;
	}
	if (!colon)
		return n;
	nl = (size_t)(colon - line);
	colon++;
	if (nl == 4 && !strncasecmp(line, "etag", 4)) {
		char tmp[FG_S3_ETAG_MAX];
		size_t l;

		copy_hval(tmp, sizeof(tmp), colon, n - nl - 1);
		l = strlen(tmp);
		if (l >= 2 && tmp[0] == '"' && tmp[l - 1] == '"') {
			tmp[l - 1] = 0;
			memmove(tmp, tmp + 1, l - 1);
		}
		memcpy(x->etag, tmp, sizeof(tmp));
	} else if (nl == 13 && !strncasecmp(line, "last-modified", 13)) {
		copy_hval(x->last_modified, sizeof(x->last_modified), colon, n - nl - 1);
	} else if (nl == 12 && !strncasecmp(line, "content-type", 12)) {
		copy_hval(x->content_type, sizeof(x->content_type), colon, n - nl - 1);
	} else if (nl == 8 && !strncasecmp(line, "location", 8)) {
		copy_hval(x->location, sizeof(x->location), colon, n - nl - 1);
	} else if (nl == 14 && !strncasecmp(line, "content-length", 14)) {
		char v[32];

		copy_hval(v, sizeof(v), colon, n - nl - 1);
		x->have_length = fg_parse_u64(v, &x->content_length) == 0;
	} else if (nl == 13 && !strncasecmp(line, "content-range", 13)) {
		char v[96], *sl;
		unsigned long long a, b, t;
		int has_t;

		copy_hval(v, sizeof(v), colon, n - nl - 1);
		sl = strrchr(v, '/');
		x->have_range_total = sl && !strncasecmp(v, "bytes ", 6) &&
				      fg_parse_u64(sl + 1, &x->range_total) == 0;
		if (!fg_http_content_range(v, strlen(v), &a, &b, &t, &has_t)) {
			x->have_range = 1;
			x->range_start = a;
			x->range_end = b;
		}
	} else if (nl == 19 && !strncasecmp(line, "x-amz-bucket-region", 19)) {
		copy_hval(x->bucket_region, sizeof(x->bucket_region), colon, n - nl - 1);
	} else if (nl == 4 && !strncasecmp(line, "date", 4)) {
		char v[96];
		time_t t;

		copy_hval(v, sizeof(v), colon, n - nl - 1);
		t = curl_getdate(v, NULL);
		x->server_date = t == (time_t)-1 ? -1 : (long long)t;
	} else if (nl == 11 && !strncasecmp(line, "retry-after", 11)) {
		/* delay-seconds or an HTTP-date (RFC 9110 10.2.3) */
		char v[64];
		unsigned long long secs;
		time_t t, now;

		copy_hval(v, sizeof(v), colon, n - nl - 1);
		if (fg_parse_u64(v, &secs) == 0) {
			x->retry_after = secs > 3600 ? 3600 : (long)secs;
		} else if ((t = curl_getdate(v, NULL)) != (time_t)-1) {
			now = time(NULL);
			x->retry_after = t <= now ? 0 : t - now > 3600 ? 3600 : (long)(t - now);
		}
	}
	return n;
}

/* Performs one HTTP exchange. Returns 0 when a response (any status) came
 * back, FG_ENET for a transport failure (retryable), other codes otherwise. */
static int transport_do(struct fg_s3 *s, struct xfer *x, struct fg_err *err)
{
	CURL *c = handle_get(s);
	CURLcode cc;
	int rc = 0;

	if (!c)
		return fg_err_set(err, FG_ENOMEM, "s3: cannot create a libcurl handle");
	curl_easy_reset(c);
	x->status = 0;
	x->sent = 0;
	x->out_written = 0;
	x->write_failed = 0;
	x->retry_after = -1;
	x->server_date = -1;
	x->curl_msg[0] = 0;
	x->data_failed = 0;
	if (x->data_fn && x->data_fn(x->data_user, NULL, 0, &x->data_err)) {
		handle_put(s, c);
		return fg_err_set(err, x->data_err.code ? x->data_err.code : FG_EIO, "%s", x->data_err.msg);
	}
	curl_easy_setopt(c, CURLOPT_URL, x->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->headers);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, x->curl_msg);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 120L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (s->cainfo)
		curl_easy_setopt(c, CURLOPT_CAINFO, s->cainfo);
	if (s->capath)
		curl_easy_setopt(c, CURLOPT_CAPATH, s->capath);
	if (s->connect_to)
		curl_easy_setopt(c, CURLOPT_CONNECT_TO, s->connect_to);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);
	curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 2L * 1024 * 1024);
	if (x->limit_rate > 0)
		curl_easy_setopt(c, CURLOPT_MAX_SEND_SPEED_LARGE, (curl_off_t)x->limit_rate);
	if (x->head) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(x->method, "PUT")) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(c, CURLOPT_READDATA, x);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE,
				 (curl_off_t)(x->body_fd >= 0 ? x->body_len : x->mem_len));
	} else if (!strcmp(x->method, "POST")) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, x->mem_body ? x->mem_body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->mem_len);
	} else if (strcmp(x->method, "GET")) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, x->method);
	}
	cc = curl_easy_perform(c);
	if (cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &x->status);
	if (x->data_failed)
		rc = fg_err_set(err, x->data_err.code ? x->data_err.code : FG_EIO, "%s", x->data_err.msg);
	else if (x->write_failed)
		rc = fg_err_set(err, FG_EIO, "write: %s", strerror(x->write_failed));
	else if (cc != CURLE_OK)
		rc = fg_err_set(err, FG_ENET, "%s", x->curl_msg[0] ? x->curl_msg : curl_easy_strerror(cc));
	handle_put(s, c);
	return rc;
}

/* ---- S3 requests --------------------------------------------------------- */

struct req {
	const char *method;
	const char *bucket;
	const char *key;                    /* NULL = the bucket itself */
	const struct fg_sigv4_param *params;
	size_t np;
	const struct fg_sigv4_header *hdrs; /* extra signed headers */
	size_t nh;
	const char *mem_body;
	size_t mem_len;
	int body_fd;
	unsigned long long body_off, body_len;
	const char *payload_sha256;         /* NULL: computed here */
	struct fg_buf *resp;
	int out_fd;
	unsigned long long out_off;
	fg_s3_data_fn data_fn;
	void *data_user;
	int error_in_200;                   /* a 2xx body may still be an <Error> */
	int want_range;                     /* a ranged GET from want_start */
	unsigned long long want_start;
	/* results */
	long status;
	unsigned retries;
	struct xfer x;
};

static int hash_range(char hex[65], int fd, unsigned long long off, unsigned long long len,
		      struct fg_err *err)
{
	struct fg_sha256 *h;
	unsigned char d[32];
	char *buf = malloc((size_t)1 << 20);
	int rc;

	if (!buf)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if ((rc = fg_sha256_new(&h, err))) {
		free(buf);
		return rc;
	}
	while (len > 0 && !rc) {
		size_t want = len < ((size_t)1 << 20) ? (size_t)len : ((size_t)1 << 20);
		ssize_t r = pread(fd, buf, want, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = fg_err_set(err, FG_EIO, "read: %s", r < 0 ? strerror(errno) : "file shrank");
			break;
		}
		rc = fg_sha256_update(h, buf, (size_t)r, err);
		off += (unsigned long long)r;
		len -= (unsigned long long)r;
	}
	if (!rc)
		rc = fg_sha256_final(h, d, err);
	fg_sha256_free(h);
	free(buf);
	if (!rc)
		fg_hex_encode(d, 32, hex);
	return rc;
}

static int retryable_status(long st)
{
	return st == 408 || st == 429 || st == 500 || st == 502 || st == 503 || st == 504;
}

/* S3 error codes a retry can cure whatever status carries them: AWS's
 * "RequestTimeout" comes as 400, and an error inside a 200 has no status of
 * its own (the transient and throttling codes AWS SDKs retry) */
static int retryable_code(const char *code)
{
	static const char *const codes[] = { "InternalError", "SlowDown", "ServiceUnavailable",
					     "RequestTimeout", "Throttling", "ThrottlingException",
					     "RequestThrottled", "RequestLimitExceeded",
					     "TooManyRequestsException", "PriorRequestNotComplete", NULL };
	size_t i;

	for (i = 0; code && codes[i]; i++)
		if (!strcmp(code, codes[i]))
			return 1;
	return 0;
}

/* Whether an XML body's root element is <Error> (blanks and an XML
 * declaration may come first: AWS pads long CompleteMultipartUpload answers
 * with whitespace before it knows the outcome). */
static int body_is_error(const struct fg_buf *b)
{
	const char *p = b && b->data ? b->data : "", *e;

	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	if (!strncmp(p, "<?xml", 5) && (e = strstr(p, "?>")))
		for (p = e + 2; *p == ' ' || *p == '\t' || *p == '\r' || *p == '\n';)
			p++;
	return !strncmp(p, "<Error", 6) && (p[6] == '>' || p[6] == ' ' || p[6] == '\t' ||
					     p[6] == '\r' || p[6] == '\n');
}

static void backoff(unsigned attempt, long retry_after)
{
	struct timespec ts;
	unsigned long long ms;

	if (retry_after >= 0) {
		ms = (unsigned long long)retry_after * 1000;
	} else {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		ms = 200ULL << (attempt < 6 ? attempt : 6);
		ms += (unsigned long long)(now.tv_nsec % 200); /* jitter */
	}
	if (ms > 30000)
		ms = 30000;
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}

/* Pulls <tag>text</tag> (first match at or after *pos) out of xml. */
static int xml_find(const char *xml, size_t n, const char *tag, size_t *pos, const char **val,
		    size_t *vlen)
{
	char open[64], close[64];
	size_t tl = strlen(tag), i;
	const char *a, *b;

	if (tl + 4 > sizeof(open))
		return 0;
	open[0] = '<';
	memcpy(open + 1, tag, tl);
	open[tl + 1] = '>';
	open[tl + 2] = 0;
	close[0] = '<';
	close[1] = '/';
	memcpy(close + 2, tag, tl);
	close[tl + 2] = '>';
	close[tl + 3] = 0;
	a = NULL;
	for (i = *pos; i + tl + 2 <= n; i++)
		if (xml[i] == '<' && !memcmp(xml + i, open, tl + 2)) {
			a = xml + i + tl + 2;
			break;
		}
	if (!a)
		return 0;
	b = NULL;
	for (i = (size_t)(a - xml); i + tl + 3 <= n; i++)
		if (xml[i] == '<' && !memcmp(xml + i, close, tl + 3)) {
			b = xml + i;
			break;
		}
	if (!b)
		return 0;
	*val = a;
	*vlen = (size_t)(b - a);
	*pos = (size_t)(b - xml) + tl + 3;
	return 1;
}

/* Decodes XML text (the five entities and numeric references) into out. */
static int xml_text(struct fg_buf *out, const char *s, size_t n, struct fg_err *err)
{
	size_t i = 0;
	int rc = 0;

	while (i < n && !rc) {
		const char *semi;
		size_t el;

		if (s[i] != '&') {
			unsigned char c = (unsigned char)s[i];

			if (s[i] == '<')
				return fg_err_set(err, FG_EFORMAT, "s3: unexpected markup in XML text");
			/* XML 1.0 has no NUL or other C0 controls but tab, LF, CR */
			if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
				return fg_err_set(err, FG_EFORMAT, "s3: control character in XML text");
			rc = fg_buf_putc(out, s[i++], err);
			continue;
		}
		semi = memchr(s + i, ';', n - i);
		if (!semi || (el = (size_t)(semi - (s + i))) > 12)
			return fg_err_set(err, FG_EFORMAT, "s3: bad XML entity");
		if (el == 3 && !memcmp(s + i, "&lt", 3))
			rc = fg_buf_putc(out, '<', err);
		else if (el == 3 && !memcmp(s + i, "&gt", 3))
			rc = fg_buf_putc(out, '>', err);
		else if (el == 4 && !memcmp(s + i, "&amp", 4))
			rc = fg_buf_putc(out, '&', err);
		else if (el == 5 && !memcmp(s + i, "&quot", 5))
			rc = fg_buf_putc(out, '"', err);
		else if (el == 5 && !memcmp(s + i, "&apos", 5))
			rc = fg_buf_putc(out, '\'', err);
		else if (el >= 3 && s[i + 1] == '#') {
			unsigned long cp = 0;
			size_t j = i + 2;
			int hexa = s[j] == 'x' || s[j] == 'X';
			unsigned char u[4];
			size_t ul;

			if (hexa)
				j++;
			if (j >= (size_t)(semi - s))
				return fg_err_set(err, FG_EFORMAT, "s3: bad XML character reference");
			for (; j < (size_t)(semi - s); j++) {
				int d = s[j] >= '0' && s[j] <= '9'   ? s[j] - '0'
					: hexa && s[j] >= 'a' && s[j] <= 'f' ? s[j] - 'a' + 10
					: hexa && s[j] >= 'A' && s[j] <= 'F' ? s[j] - 'A' + 10
									     : -1;
				if (d < 0)
					return fg_err_set(err, FG_EFORMAT, "s3: bad XML character reference");
				cp = cp * (hexa ? 16 : 10) + (unsigned long)d;
				if (cp > 0x10ffff)
					return fg_err_set(err, FG_EFORMAT, "s3: bad XML character reference");
			}
			if ((cp < 0x20 && cp != 9 && cp != 10 && cp != 13) || (cp >= 0xd800 && cp <= 0xdfff) ||
			    cp == 0xfffe || cp == 0xffff)
				return fg_err_set(err, FG_EFORMAT, "s3: bad XML character reference");
			if (cp < 0x80) {
				u[0] = (unsigned char)cp;
				ul = 1;
			} else if (cp < 0x800) {
				u[0] = (unsigned char)(0xc0 | (cp >> 6));
				u[1] = (unsigned char)(0x80 | (cp & 0x3f));
				ul = 2;
			} else if (cp < 0x10000) {
				u[0] = (unsigned char)(0xe0 | (cp >> 12));
				u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
				u[2] = (unsigned char)(0x80 | (cp & 0x3f));
				ul = 3;
			} else {
				u[0] = (unsigned char)(0xf0 | (cp >> 18));
				u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
				u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
				u[3] = (unsigned char)(0x80 | (cp & 0x3f));
				ul = 4;
			}
			rc = fg_buf_append(out, u, ul, err);
		} else {
			return fg_err_set(err, FG_EFORMAT, "s3: unknown XML entity");
		}
		i = (size_t)(semi - s) + 1;
	}
	return rc;
}

/* Decoded text of the first <tag> in xml into out (reset first); 0 or -1 when absent. */
static int xml_get(struct fg_buf *out, const char *xml, size_t n, const char *tag)
{
	size_t pos = 0, vl;
	const char *v;

	fg_buf_reset(out);
	if (!xml || !xml_find(xml, n, tag, &pos, &v, &vl))
		return -1;
	if (xml_text(out, v, vl, NULL))
		return -1;
	return fg_buf_putc(out, 0, NULL) ? -1 : (out->len--, 0);
}

/* A region name as S3 writes one ("eu-central-1", "garage"). */
static int region_name_ok(const char *r, size_t n)
{
	size_t i;

	if (n == 0 || n >= 64)
		return 0;
	for (i = 0; i < n; i++)
		if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9') || r[i] == '-' ||
		      r[i] == '_'))
			return 0;
	return 1;
}

/* Whether an error answer says the request was signed for the wrong region
 * and names the right one; region then holds it. The name comes from
 * <Region> of a 400 AuthorizationHeaderMalformed (AWS, MinIO), or from the
 * x-amz-bucket-region header of a 301 PermanentRedirect without a
 * Location (AWS's answer in another region) or of a 400 without a body (a
 * HEAD's, which carries none), as botocore's S3RegionRedirector reads it. */
static int wrong_region(struct fg_buf *region, const struct xfer *x)
{
	struct fg_buf code = FG_BUF_INIT, r = FG_BUF_INIT;
	const struct fg_buf *b = x->resp;
	int yes = 0, has_code;

	has_code = b && b->data && !xml_get(&code, b->data, b->len, "Code");
	if (x->status == 400 && has_code && !strcmp(code.data, "AuthorizationHeaderMalformed") &&
	    !xml_get(&r, b->data, b->len, "Region"))
		yes = 1;
	else if (((x->status == 301 && !x->location[0] && (!has_code || !strcmp(code.data, "PermanentRedirect"))) ||
		  (x->status == 400 && !has_code)) &&
		 x->bucket_region[0])
		yes = !fg_buf_puts(&r, x->bucket_region, NULL);
	if (yes)
		yes = region_name_ok(r.data, r.len) && strcmp(r.data, region->data);
	if (yes) {
		fg_buf_reset(region);
		yes = fg_buf_puts(region, r.data, NULL) == 0;
	}
	fg_buf_release(&code);
	fg_buf_release(&r);
	return yes;
}

/* Whether an error answer's S3 code is one a retry can cure. */
static int retryable_body(const struct fg_buf *b)
{
	struct fg_buf code = FG_BUF_INIT;
	int yes;

	if (!b || !b->data)
		return 0;
	yes = !xml_get(&code, b->data, b->len, "Code") && retryable_code(code.data);
	fg_buf_release(&code);
	return yes;
}

static const char *opname(const struct req *r)
{
	size_t i;

	for (i = 0; i < r->np; i++) {
		if (!strcmp(r->params[i].name, "uploads"))
			return "create multipart upload";
		if (!strcmp(r->params[i].name, "partNumber"))
			return "upload part";
		if (!strcmp(r->params[i].name, "list-type"))
			return "list";
		if (!strcmp(r->params[i].name, "uploadId"))
			return !strcmp(r->method, "POST") ? "complete multipart upload"
			       : !strcmp(r->method, "DELETE") ? "abort multipart upload"
							      : "multipart";
	}
	return r->method;
}

/* Message for a non-2xx answer: status, S3 error code and message. */
static int http_fail(struct fg_s3 *s, struct req *r, struct fg_buf *body, struct fg_err *err)
{
	struct fg_buf code = FG_BUF_INIT, msg = FG_BUF_INIT;
	int ecode = r->x.status == 404 ? FG_ENOTFOUND
		    : (r->x.status == 401 || r->x.status == 403) ? FG_EAUTH
								 : FG_ENET;
	int rc;

	(void)s;
	if (body && body->data) {
		xml_get(&code, body->data, body->len, "Code");
		xml_get(&msg, body->data, body->len, "Message");
	}
	char skew[128] = "";

	if (code.len && !strcmp(code.data, "NoSuchUpload"))
		ecode = FG_ENOTFOUND;
	if (code.len && !strcmp(code.data, "RequestTimeTooSkewed") && r->x.server_date >= 0) {
		/* a signature is good only within 15 minutes of the server's clock */
		long long d = r->x.server_date - (long long)time(NULL);

		snprintf(skew, sizeof(skew), " (this machine's clock is %lld s %s the server's: set it right)",
			 d < 0 ? -d : d, d < 0 ? "ahead of" : "behind");
	}
	rc = fg_err_set(err, ecode, "s3 %s %s/%s: HTTP %ld%s%s%s%s%s%s", opname(r), r->bucket,
			r->key ? r->key : "", r->x.status, code.len ? " " : "", code.len ? code.data : "",
			msg.len ? ": " : "", msg.len ? msg.data : "", skew,
			r->retries ? " (after retries)" : "");
	fg_buf_release(&code);
	fg_buf_release(&msg);
	return rc;
}

/* A Location resolved against the URL that answered it (RFC 9110 10.2.2:
 * a relative reference is allowed) into out (cap bytes); an absolute http(s)
 * one is kept byte for byte (a presigned URL's signature covers its
 * encoding). 0, or -1 when it is no http(s) URL or too long. */
static int resolve_location(char *out, size_t cap, const char *base, const char *loc)
{
	struct fg_buf abs = FG_BUF_INIT;
	const char *u = loc;
	int rc = -1;

	if (strncmp(loc, "http://", 7) && strncmp(loc, "https://", 8))
		u = fg_http_url_resolve(&abs, base, loc) ? NULL : abs.data;
	if (u && strlen(u) < cap && (!strncmp(u, "http://", 7) || !strncmp(u, "https://", 8))) {
		memcpy(out, u, strlen(u) + 1);
		rc = 0;
	}
	fg_buf_release(&abs);
	return rc;
}

/* Follows a redirect of a GET/HEAD: no signing headers go to the new place. */
static int follow(struct fg_s3 *s, struct req *r, struct fg_err *err)
{
	struct xfer y = r->x;
	char loc[sizeof(r->x.location)], base[sizeof(r->x.location)];
	int hops, rc = 0;

	if (strlen(r->x.url) >= sizeof(base))
		return fg_err_set(err, FG_EINVAL, "s3 %s: URL too long", r->method);
	memcpy(base, r->x.url, strlen(r->x.url) + 1);
	for (hops = 0; hops < 5; hops++) {
		if (resolve_location(loc, sizeof(loc), base, y.location))
			return fg_err_set(err, FG_EFORMAT, "s3 %s: redirect to a non-http location",
					  r->method);
		memcpy(base, loc, strlen(loc) + 1);
		y.url = loc;
		y.headers = NULL;
		if (r->x.headers) {
			/* keep only Range and Accept-Encoding */
			struct curl_slist *h;

			for (h = r->x.headers; h; h = h->next)
				if (!strncasecmp(h->data, "range:", 6) || !strncasecmp(h->data, "accept-encoding:", 16))
					y.headers = curl_slist_append(y.headers, h->data);
		}
		if (y.resp)
			fg_buf_reset(y.resp);
		rc = transport_do(s, &y, err);
		curl_slist_free_all(y.headers);
		y.headers = NULL;
		if (rc)
			return rc;
		if (y.status < 300 || y.status >= 400 || !y.location[0])
			break;
	}
	y.headers = r->x.headers;
	y.url = r->x.url;
	r->x = y;
	return 0;
}

static int do_req(struct fg_s3 *s, struct req *r, struct fg_err *err)
{
	struct fg_buf path = FG_BUF_INIT, query = FG_BUF_INIT, url = FG_BUF_INIT, auth = FG_BUF_INIT;
	struct fg_buf line = FG_BUF_INIT, errbody = FG_BUF_INIT, host = FG_BUF_INIT, region = FG_BUF_INIT;
	struct fg_sigv4_cred cred = { s->creds.access_key, s->creds.secret_key, s->creds.session_token };
	char payload[65], date[17];
	unsigned attempt, hops = 0;
	int region_fixed = 0;
	size_t i, resource; /* url.data + resource: the path and query, as signed */
	int rc;

	r->retries = 0;
	pthread_mutex_lock(&s->mu);
	rc = fg_buf_puts(&region, s->region, err);
	pthread_mutex_unlock(&s->mu);
	if (rc || (rc = fg_s3_target(s, &url, &host, &path, r->bucket, r->key, err)) ||
	    (rc = fg_sigv4_query_build(&query, r->params, r->np, err)) ||
	    (query.len && (rc = fg_buf_printf(&url, err, "?%s", query.data))))
		goto out;
	resource = url.len - path.len - (query.len ? query.len + 1 : 0);
	if (r->payload_sha256) {
		memcpy(payload, r->payload_sha256, 65);
	} else if (r->body_fd >= 0) {
		if ((rc = hash_range(payload, r->body_fd, r->body_off, r->body_len, err)))
			goto out;
	} else {
		unsigned char d[32];

		if ((rc = fg_sha256_mem(r->mem_body ? r->mem_body : "", r->mem_len, d, err)))
			goto out;
		fg_hex_encode(d, 32, payload);
	}

	for (attempt = 0;; attempt++) {
		struct fg_sigv4_request sr = { r->method, host.data, path.data, query.data, r->hdrs,
					       r->nh, payload, date, region.data, "s3" };
		const char *loc;

		fg_sigv4_amz_date(date, time(NULL));
		fg_buf_reset(&auth);
		if ((rc = fg_sigv4_sign(&auth, NULL, NULL, &sr, &cred, err)))
			goto out;
		memset(&r->x, 0, sizeof(r->x));
		r->x.method = r->method;
		r->x.url = url.data;
		r->x.head = !strcmp(r->method, "HEAD");
		r->x.mem_body = r->mem_body;
		r->x.mem_len = r->mem_len;
		r->x.body_fd = r->body_fd;
		r->x.body_off = r->body_off;
		r->x.body_len = r->body_len;
		r->x.out_fd = r->out_fd;
		r->x.out_off = r->out_off;
		r->x.want_range = r->want_range;
		r->x.want_start = r->want_start;
		r->x.data_fn = r->data_fn;
		r->x.data_user = r->data_user;
		r->x.limit_rate = s->limit_rate;
		fg_buf_reset(&errbody);
		r->x.resp = r->resp ? r->resp : &errbody;
		if (r->resp)
			fg_buf_reset(r->resp);
#define ADDH(...)                                                                  \
	do {                                                                       \
		struct curl_slist *t_;                                             \
		fg_buf_reset(&line);                                               \
		if ((rc = fg_buf_printf(&line, err, __VA_ARGS__)))                 \
			goto out;                                                  \
		if (!(t_ = curl_slist_append(r->x.headers, line.data))) {          \
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");          \
			goto out;                                                  \
		}                                                                  \
		r->x.headers = t_;                                                 \
	} while (0)
		ADDH("Host: %s", host.data);
		ADDH("x-amz-date: %s", date);
		ADDH("x-amz-content-sha256: %s", payload);
		if (cred.session_token && *cred.session_token)
			ADDH("x-amz-security-token: %s", cred.session_token);
		for (i = 0; i < r->nh; i++)
			ADDH("%s: %s", r->hdrs[i].name, r->hdrs[i].value);
		ADDH("Authorization: %s", auth.data);
		/* RFC 9110 12.5.3: without Accept-Encoding any coding is acceptable,
		 * and a proxy or CDN may gzip a listing or an object's bytes */
		ADDH("Accept-Encoding: identity");
		ADDH("Expect:");
		if (!strcmp(r->method, "POST") && !r->nh)
			ADDH("Content-Type:");
#undef ADDH
		rc = transport_do(s, &r->x, err);
		loc = r->x.location;
		if (!rc && r->x.status >= 300 && r->x.status < 400 && r->x.status != 304 && *loc &&
		    hops < 5 && (!strncmp(loc, "https://", 8) ||
				 (!strncmp(loc, "http://", 7) && !strncmp(url.data, "http://", 7))) &&
		    (loc = strchr(strstr(loc, "://") + 3, '/')) && !strcmp(loc, url.data + resource)) {
			/* the same resource at another endpoint (S3's 307 TemporaryRedirect,
			 * a region's endpoint): signed again for that host (and the
			 * bucket's region when the answer names it), the body sent again */
			const char *hs = strstr(r->x.location, "://") + 3;
			struct fg_buf nu = FG_BUF_INIT;

			curl_slist_free_all(r->x.headers);
			r->x.headers = NULL;
			fg_buf_reset(&host);
			if ((rc = fg_buf_append(&host, hs, (size_t)(loc - hs), err)) ||
			    (rc = fg_buf_puts(&nu, r->x.location, err)))
				goto out;
			for (i = 0; i < host.len; i++)
				if (host.data[i] >= 'A' && host.data[i] <= 'Z')
					host.data[i] = (char)(host.data[i] + 32);
			if (r->x.bucket_region[0]) {
				fg_buf_reset(&region);
				if ((rc = fg_buf_puts(&region, r->x.bucket_region, err)))
					goto out;
			}
			fg_buf_release(&url);
			url = nu;
			resource = (size_t)(loc - r->x.location);
			hops++;
			attempt--; /* a redirect is not a try */
			continue;
		}
		if (!rc && r->x.status >= 300 && r->x.status < 400 && r->x.location[0] &&
		    (r->x.head || !strcmp(r->method, "GET")))
			rc = follow(s, r, err);
		curl_slist_free_all(r->x.headers);
		r->x.headers = NULL;
		memset(auth.data, 0, auth.len);
		if (rc && rc != FG_ENET)
			goto out;
		if (!rc && r->x.status / 100 == 2 && !(r->error_in_200 && body_is_error(r->x.resp)))
			break;
		if (!rc && r->x.status / 100 == 2) {
			/* a 200 whose body says the request failed after all */
			struct fg_buf code = FG_BUF_INIT;

			xml_get(&code, r->x.resp->data, r->x.resp->len, "Code");
			if (retryable_code(code.data) && attempt + 1 < (unsigned)s->max_tries) {
				fg_buf_release(&code);
				r->retries++;
				backoff(attempt, r->x.retry_after);
				continue;
			}
			rc = fg_err_set(err, FG_ENET, "s3 %s %s/%s: HTTP %ld with an error in the body: %s%s",
					opname(r), r->bucket, r->key ? r->key : "", r->x.status,
					code.len ? code.data : "unknown", r->retries ? " (after retries)" : "");
			fg_buf_release(&code);
			goto out;
		}
		if (!rc && (r->x.status == 400 || r->x.status == 301) && !region_fixed &&
		    wrong_region(&region, &r->x)) {
			/* signed for another region than the server's (AWS and MinIO
			 * name theirs in AuthorizationHeaderMalformed, AWS in
			 * x-amz-bucket-region): signed again for it, and so are the
			 * requests after this one */
			region_fixed = 1;
			pthread_mutex_lock(&s->mu);
			if (strcmp(s->region, region.data)) {
				char *nr = strdup(region.data);

				if (nr) {
					free(s->region);
					s->region = nr;
				}
			}
			pthread_mutex_unlock(&s->mu);
			if (s->aws && !hops) {
				/* AWS: that region's endpoint, in either addressing style */
				fg_buf_reset(&url);
				fg_buf_reset(&host);
				fg_buf_reset(&path);
				if ((rc = follow_region(s, region.data, err)) ||
				    (rc = fg_s3_target(s, &url, &host, &path, r->bucket, r->key, err)) ||
				    (query.len && (rc = fg_buf_printf(&url, err, "?%s", query.data))))
					goto out;
				resource = url.len - path.len - (query.len ? query.len + 1 : 0);
			}
			attempt--; /* not a try either */
			continue;
		}
		if ((rc == FG_ENET || retryable_status(r->x.status) ||
		     (r->x.status >= 400 && retryable_body(r->x.resp))) &&
		    attempt + 1 < (unsigned)s->max_tries) {
			r->retries++;
			backoff(attempt, r->x.retry_after);
			continue;
		}
		if (rc == FG_ENET) {
			fg_err_wrap(err, "s3 %s %s/%s%s", opname(r), r->bucket, r->key ? r->key : "",
				    r->retries ? " (after retries)" : "");
			goto out;
		}
		rc = http_fail(s, r, r->x.resp, err);
		goto out;
	}
	r->status = r->x.status;
	rc = 0;
out:
	curl_slist_free_all(r->x.headers);
	r->x.headers = NULL;
	if (rc)
		r->status = r->x.status;
	fg_buf_release(&path);
	fg_buf_release(&query);
	fg_buf_release(&url);
	fg_buf_release(&auth);
	fg_buf_release(&line);
	fg_buf_release(&errbody);
	fg_buf_release(&host);
	fg_buf_release(&region);
	return rc;
}

static void req_init(struct req *r, const char *method, const char *bucket, const char *key)
{
	memset(r, 0, sizeof(*r));
	r->method = method;
	r->bucket = bucket;
	r->key = key;
	r->body_fd = -1;
	r->out_fd = -1;
}

static int check_bucket(const char *bucket, struct fg_err *err)
{
	size_t i, n = bucket ? strlen(bucket) : 0;

	if (n < 1 || n > 255)
		return fg_err_set(err, FG_EINVAL, "bad bucket name");
	for (i = 0; i < n; i++)
		if (!((bucket[i] >= 'a' && bucket[i] <= 'z') || (bucket[i] >= 'A' && bucket[i] <= 'Z') ||
		      (bucket[i] >= '0' && bucket[i] <= '9') || bucket[i] == '-' || bucket[i] == '_' ||
		      bucket[i] == '.'))
			return fg_err_set(err, FG_EINVAL, "bad bucket name %s", bucket);
	return 0;
}

int fg_s3_head(struct fg_s3 *s, struct fg_s3_object *out, const char *bucket, const char *key,
	       struct fg_err *err)
{
	struct req r;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = check_bucket(bucket, err)) || (rc = fg_s3_key_check(key, err)))
		return rc;
	req_init(&r, "HEAD", bucket, key);
	if ((rc = do_req(s, &r, err)))
		return rc;
	memcpy(out->etag, r.x.etag, sizeof(out->etag));
	if (!r.x.have_length) {
		/* a HEAD without Content-Length (a proxy dropped it; HTTP/2 may omit
		 * it): the size is the total of a one-byte range's Content-Range,
		 * or "bytes *\/0" in the 416 an empty object answers */
		struct fg_sigv4_header h[1] = { { "Range", "bytes=0-0" } };
		struct req g;

		req_init(&g, "GET", bucket, key);
		g.hdrs = h;
		g.nh = 1;
		rc = do_req(s, &g, err);
		if (rc && !(g.x.status == 416 && g.x.have_range_total))
			return rc;
		if (g.x.have_range_total && (g.x.status == 206 || g.x.status == 416))
			out->size = g.x.range_total;
		else if (g.x.status == 200 && g.x.have_length)
			out->size = g.x.content_length;
		else
			return fg_err_set(err, FG_EFORMAT, "s3 HEAD %s/%s: no Content-Length", bucket, key);
	} else {
		out->size = r.x.content_length;
	}
	memcpy(out->last_modified, r.x.last_modified, sizeof(out->last_modified));
	memcpy(out->content_type, r.x.content_type, sizeof(out->content_type));
	return 0;
}

int fg_s3_get(struct fg_s3 *s, const char *bucket, const char *key, unsigned long long off,
	      unsigned long long len, int fd, unsigned long long fd_off, struct fg_buf *buf,
	      struct fg_err *err)
{
	struct fg_sigv4_header h[1];
	char range[64];
	struct req r;
	/* [at, end): what is still wanted; end 0: up to the object's end */
	unsigned long long at = off, end = len ? off + len : 0, got, target;
	int rc;

	if ((rc = check_bucket(bucket, err)) || (rc = fg_s3_key_check(key, err)))
		return rc;
	for (;;) {
		struct fg_buf tmp = FG_BUF_INIT;

		req_init(&r, "GET", bucket, key);
		if (off || len) {
			if (end)
				snprintf(range, sizeof(range), "bytes=%llu-%llu", at, end - 1);
			else
				snprintf(range, sizeof(range), "bytes=%llu-", at);
			h[0].name = "Range";
			h[0].value = range;
			r.hdrs = h;
			r.nh = 1;
			r.want_range = 1;
			r.want_start = at;
		}
		r.out_fd = fd;
		r.out_off = fd_off + (at - off);
		/* a caller's buffer keeps what it had: read into a side buffer, then append */
		r.resp = fd < 0 && buf ? &tmp : NULL;
		rc = do_req(s, &r, err);
		got = fd >= 0 ? r.x.out_written : tmp.len;
		if (!rc && r.resp)
			rc = fg_buf_append(buf, tmp.data ? tmp.data : "", tmp.len, err);
		fg_buf_release(&tmp);
		if (rc && r.x.data_failed)
			fg_err_wrap(err, "s3 GET %s/%s", bucket, key);
		if (rc)
			return rc;
		if (r.status != 206) {
			/* a 200 to a ranged GET is only right when it is exactly the bytes asked for */
			if ((off || len) && !(at == 0 && r.status == 200 &&
					      (!len || (r.x.have_length && r.x.content_length == len))))
				return fg_err_set(err, FG_EFORMAT, "s3 GET %s/%s: range not honoured (HTTP %ld)",
						  bucket, key, r.status);
			if (r.x.have_length && fd >= 0 && r.x.out_written != r.x.content_length)
				return fg_err_set(err, FG_ENET, "s3 GET %s/%s: short body", bucket, key);
			return 0;
		}
		/* a 206: the bytes of its Content-Range from at on must all have come */
		if (r.x.range_end < at || got != r.x.range_end + 1 - at)
			return fg_err_set(err, FG_ENET, "s3 GET %s/%s: short body (bytes %llu-%llu)", bucket,
					  key, r.x.range_start, r.x.range_end);
		at += got;
		target = end;
		if (r.x.have_range_total && (!target || r.x.range_total < target))
			target = r.x.range_total;
		if (!target || at >= target)
			return 0;
		/* a shorter range than asked (a CDN capping ranges): the rest is asked for */
	}
}

int fg_s3_get_stream(struct fg_s3 *s, const char *bucket, const char *key, fg_s3_data_fn fn,
		     void *user, struct fg_err *err)
{
	struct req r;
	int rc;

	if ((rc = check_bucket(bucket, err)) || (rc = fg_s3_key_check(key, err)))
		return rc;
	req_init(&r, "GET", bucket, key);
	r.data_fn = fn;
	r.data_user = user;
	return do_req(s, &r, err);
}

int fg_s3_put_mem(struct fg_s3 *s, char etag_out[FG_S3_ETAG_MAX], const char *bucket,
		  const char *key, const void *data, size_t len, const char *content_type,
		  struct fg_err *err)
{
	struct fg_sigv4_header h[1] = { { "Content-Type",
					  content_type ? content_type : "application/octet-stream" } };
	struct req r;
	int rc;

	if ((rc = check_bucket(bucket, err)) || (rc = fg_s3_key_check(key, err)))
		return rc;
	req_init(&r, "PUT", bucket, key);
	r.hdrs = h;
	r.nh = 1;
	r.mem_body = data ? data : "";
	r.mem_len = len;
	if ((rc = do_req(s, &r, err)))
		return rc;
	if (etag_out)
		memcpy(etag_out, r.x.etag, FG_S3_ETAG_MAX);
	return 0;
}

int fg_s3_delete(struct fg_s3 *s, const char *bucket, const char *key, struct fg_err *err)
{
	struct req r;
	int rc;

	if ((rc = check_bucket(bucket, err)) || (rc = fg_s3_key_check(key, err)))
		return rc;
	req_init(&r, "DELETE", bucket, key);
	rc = do_req(s, &r, err);
	return rc == FG_ENOTFOUND ? 0 : rc;
}

void fg_s3_list_clear(struct fg_s3_list *l)
{
	size_t i;

	if (!l)
		return;
	for (i = 0; i < l->n; i++)
		free(l->items[i].key);
	free(l->items);
	memset(l, 0, sizeof(*l));
}

/* Percent-decodes s in place, '+' as a space when plus (a listing asked with
 * encoding-type=url: what AWS writes, botocore decodes it so too); -1 when
 * malformed or when it would hold a NUL. */
static int pct_decode(char *s, int plus)
{
	char *o = s;

	while (*s) {
		if (*s == '%') {
			int a = fg_hex_value(s[1]), b = a >= 0 ? fg_hex_value(s[2]) : -1;

			if (a < 0 || b < 0 || (a == 0 && b == 0))
				return -1;
			*o++ = (char)(a * 16 + b);
			s += 3;
		} else {
			*o++ = plus && *s == '+' ? ' ' : *s;
			s++;
		}
	}
	*o = 0;
	return 0;
}

static int list_page(struct fg_s3_list *out, const char *xml, size_t n, int url_enc,
		     struct fg_err *err)
{
	size_t pos = 0, vl;
	const char *v;
	struct fg_buf t = FG_BUF_INIT;
	int rc = 0;

	while (!rc && xml_find(xml, n, "Contents", &pos, &v, &vl)) {
		struct fg_s3_object *o;
		unsigned long long size;

		if (out->n == out->cap) {
			size_t nc = out->cap ? out->cap * 2 : 64;
			void *p = realloc(out->items, nc * sizeof(*out->items));

			if (!p) {
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
				break;
			}
			out->items = p;
			out->cap = nc;
		}
		o = &out->items[out->n];
		memset(o, 0, sizeof(*o));
		if (xml_get(&t, v, vl, "Key") || !t.len) {
			rc = fg_err_set(err, FG_EFORMAT, "s3 list: an entry without a Key");
			break;
		}
		if (url_enc && (pct_decode(t.data, 1) || !t.data[0])) {
			rc = fg_err_set(err, FG_EFORMAT, "s3 list: a badly URL-encoded Key");
			break;
		}
		if (!(o->key = strdup(t.data))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
		out->n++;
		if (xml_get(&t, v, vl, "Size") || fg_parse_u64(t.data, &size)) {
			rc = fg_err_set(err, FG_EFORMAT, "s3 list: %s has no valid Size", o->key);
			break;
		}
		o->size = size;
		if (!xml_get(&t, v, vl, "ETag")) {
			const char *e = t.data;
			size_t el = t.len;

			if (el >= 2 && e[0] == '"' && e[el - 1] == '"')
				e++, el -= 2;
			if (el >= sizeof(o->etag))
				el = sizeof(o->etag) - 1;
			memcpy(o->etag, e, el);
			o->etag[el] = 0;
		}
		if (!xml_get(&t, v, vl, "LastModified"))
			snprintf(o->last_modified, sizeof(o->last_modified), "%s", t.data);
	}
	fg_buf_release(&t);
	return rc;
}

int fg_s3_parse_list(struct fg_s3_list *out, int *truncated, struct fg_buf *next_token,
		     const char *xml, size_t len, struct fg_err *err)
{
	struct fg_buf t = FG_BUF_INIT;
	/* keys come percent-encoded only when the answer says so: a server that
	 * ignored encoding-type=url sends them as they are */
	int url_enc = !xml_get(&t, xml, len, "EncodingType") && !strcasecmp(t.data, "url");
	int rc = list_page(out, xml, len, url_enc, err);

	/* an xs:boolean: "true" or "1" (a server writing "True" is read the same):
	 * a truncated page misread as the last would lose every later key */
	*truncated = !rc && !xml_get(&t, xml, len, "IsTruncated") && (!strcasecmp(t.data, "true") || !strcmp(t.data, "1"));
	fg_buf_reset(next_token);
	if (!rc && *truncated && !xml_get(&t, xml, len, "NextContinuationToken") && t.len)
		rc = fg_buf_append(next_token, t.data, t.len, err);
	fg_buf_release(&t);
	return rc;
}

int fg_s3_list(struct fg_s3_list *out, struct fg_s3 *s, const char *bucket, const char *prefix,
	       int page_size, struct fg_err *err)
{
	struct fg_buf body = FG_BUF_INIT, token = FG_BUF_INIT, t = FG_BUF_INIT;
	char ps[16];
	int rc, truncated, marker = 0; /* marker: token holds a v1 marker (the last key) */

	memset(out, 0, sizeof(*out));
	if ((rc = check_bucket(bucket, err)))
		return rc;
	fg_buf_init(&body, RESP_MAX);
	snprintf(ps, sizeof(ps), "%d", page_size);
	for (;;) {
		struct fg_sigv4_param p[6];
		size_t np = 0, before = out->n;
		struct req r;

		/* keys percent-encoded: XML 1.0 cannot carry some characters a key
		 * may hold (awscli and boto3 always ask so) */
		p[np].name = "encoding-type";
		p[np++].value = "url";
		p[np].name = "list-type";
		p[np++].value = "2";
		p[np].name = "prefix";
		p[np++].value = prefix ? prefix : "";
		if (page_size > 0) {
			p[np].name = "max-keys";
			p[np++].value = ps;
		}
		if (token.len && !marker) {
			p[np].name = "continuation-token";
			p[np++].value = token.data;
		} else if (token.len) {
			/* a server of ListObjects (v1) only: the last key as its
			 * marker, and as ListObjectsV2's start-after */
			p[np].name = "marker";
			p[np++].value = token.data;
			p[np].name = "start-after";
			p[np++].value = token.data;
		}
		req_init(&r, "GET", bucket, NULL);
		r.params = p;
		r.np = np;
		r.resp = &body;
		if ((rc = do_req(s, &r, err)))
			break;
		out->pages++;
		if ((rc = fg_s3_parse_list(out, &truncated, &t, body.data ? body.data : "", body.len, err)))
			break;
		if (!truncated)
			break;
		if (!t.len) {
			/* no NextContinuationToken: a server that answered as
			 * ListObjects (v1, which pages by marker; without a delimiter
			 * AWS sends no NextMarker: the last key is the marker) */
			if (out->n == before) {
				rc = fg_err_set(err, FG_EFORMAT, "s3 list %s: a truncated page without keys or a "
								 "continuation token", bucket);
				break;
			}
			if (marker && strcmp(out->items[out->n - 1].key, token.data) <= 0) {
				rc = fg_err_set(err, FG_EFORMAT, "s3 list %s: the listing does not advance past %s",
						bucket, token.data);
				break;
			}
			marker = 1;
			if ((rc = fg_buf_puts(&t, out->items[out->n - 1].key, err)))
				break;
		} else if (marker) {
			rc = fg_err_set(err, FG_EFORMAT, "s3 list %s: a continuation token after marker pages", bucket);
			break;
		}
		if (token.len && !strcmp(token.data, t.data)) {
			rc = fg_err_set(err, FG_EFORMAT, "s3 list %s: the continuation token repeats", bucket);
			break;
		}
		fg_buf_reset(&token);
		if ((rc = fg_buf_puts(&token, t.data, err)))
			break;
		if (out->pages > 100000) {
			rc = fg_err_set(err, FG_EFORMAT, "s3 list %s: too many pages", bucket);
			break;
		}
	}
	fg_buf_release(&body);
	fg_buf_release(&token);
	fg_buf_release(&t);
	if (rc)
		fg_s3_list_clear(out);
	return rc;
}

/* ---- multipart ------------------------------------------------------------ */

int fg_s3_mpu_create(struct fg_s3 *s, struct fg_buf *upload_id_out, const char *bucket,
		     const char *key, const char *content_type, struct fg_err *err)
{
	struct fg_sigv4_param p[1] = { { "uploads", NULL } };
	struct fg_sigv4_header h[1] = { { "Content-Type",
					  content_type ? content_type : "application/octet-stream" } };
	struct fg_buf body = FG_BUF_INIT, id = FG_BUF_INIT;
	struct req r;
	int rc;

	if ((rc = check_bucket(bucket, err)) || (rc = fg_s3_key_check(key, err)))
		return rc;
	fg_buf_init(&body, RESP_MAX);
	req_init(&r, "POST", bucket, key);
	r.params = p;
	r.np = 1;
	r.hdrs = h;
	r.nh = 1;
	r.resp = &body;
	rc = do_req(s, &r, err);
	if (!rc && (xml_get(&id, body.data, body.len, "UploadId") || !id.len || id.len > 1024))
		rc = fg_err_set(err, FG_EFORMAT, "s3 create multipart upload %s/%s: no UploadId", bucket,
				key);
	if (!rc)
		rc = fg_buf_append(upload_id_out, id.data, id.len, err);
	fg_buf_release(&body);
	fg_buf_release(&id);
	return rc;
}

int fg_s3_mpu_abort(struct fg_s3 *s, const char *bucket, const char *key, const char *upload_id,
		    struct fg_err *err)
{
	struct fg_sigv4_param p[1] = { { "uploadId", upload_id } };
	struct req r;
	int rc;

	if ((rc = check_bucket(bucket, err)) || (rc = fg_s3_key_check(key, err)))
		return rc;
	req_init(&r, "DELETE", bucket, key);
	r.params = p;
	r.np = 1;
	return do_req(s, &r, err);
}

struct part {
	unsigned long long off, len;
	char etag[FG_S3_ETAG_MAX]; /* "" until done */
};

struct mpu {
	struct fg_s3 *s;
	const char *bucket, *key, *upload_id;
	int fd;
	struct part *parts;
	unsigned nparts;
	unsigned next;       /* next index to consider */
	pthread_mutex_t mu;
	int failed;
	struct fg_err err;   /* first failure */
	int jfd;             /* journal, -1 when none */
	struct fg_s3_upload_stats *st;
};

static int journal_append(struct mpu *m, unsigned idx, struct fg_err *err)
{
	struct fg_buf line = FG_BUF_INIT;
	int rc;

	if (m->jfd < 0)
		return 0;
	if ((rc = fg_buf_printf(&line, err, "part %u ", idx + 1)) ||
	    (rc = fg_sigv4_uri_encode(&line, m->parts[idx].etag, strlen(m->parts[idx].etag), 0, err)) ||
	    (rc = fg_buf_putc(&line, '\n', err)))
		goto out;
	/* one write of a whole line with O_APPEND, then fdatasync: a crash leaves
	 * at most a torn last line, which the reader ignores */
	if (write(m->jfd, line.data, line.len) != (ssize_t)line.len || fdatasync(m->jfd))
		rc = fg_err_set(err, FG_EIO, "upload journal: %s", strerror(errno));
out:
	fg_buf_release(&line);
	return rc;
}

static void *part_worker(void *arg)
{
	struct mpu *m = arg;

	for (;;) {
		unsigned idx;
		char num[16];
		struct fg_sigv4_param p[2];
		struct fg_err e;
		struct req r;
		int rc;

		pthread_mutex_lock(&m->mu);
		while (m->next < m->nparts && m->parts[m->next].etag[0])
			m->next++;
		if (m->failed || m->next >= m->nparts) {
			pthread_mutex_unlock(&m->mu);
			return NULL;
		}
		idx = m->next++;
		pthread_mutex_unlock(&m->mu);

		snprintf(num, sizeof(num), "%u", idx + 1);
		p[0].name = "partNumber";
		p[0].value = num;
		p[1].name = "uploadId";
		p[1].value = m->upload_id;
		req_init(&r, "PUT", m->bucket, m->key);
		r.params = p;
		r.np = 2;
		r.body_fd = m->fd;
		r.body_off = m->parts[idx].off;
		r.body_len = m->parts[idx].len;
		rc = do_req(m->s, &r, &e);
		if (!rc && !r.x.etag[0])
			rc = fg_err_set(&e, FG_EFORMAT, "s3 upload part %u of %s/%s: no ETag", idx + 1,
					m->bucket, m->key);
		pthread_mutex_lock(&m->mu);
		m->st->retries += r.retries;
		if (!rc) {
			memcpy(m->parts[idx].etag, r.x.etag, FG_S3_ETAG_MAX);
			m->st->parts_sent++;
			m->st->bytes_sent += m->parts[idx].len;
			rc = journal_append(m, idx, &e);
		}
		if (rc && !m->failed) {
			m->failed = 1;
			m->err = e;
		}
		pthread_mutex_unlock(&m->mu);
		if (rc)
			return NULL;
	}
}

/* The ETag S3 gives the object a multipart upload makes: the MD5 of the
 * parts' binary MD5s, then "-<parts>". 0 when written to out; -1 when a
 * part's ETag is not an MD5 (encrypted or other servers), so no telling. */
static int multipart_etag(char out[FG_S3_ETAG_MAX], const struct mpu *m)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dl = 0, i;
	int ok = c && EVP_DigestInit_ex(c, EVP_md5(), NULL);

	for (i = 0; ok && i < m->nparts; i++) {
		uint8_t b[16];

		ok = strlen(m->parts[i].etag) == 32 && fg_hex_decode(m->parts[i].etag, b, 16) == 0 &&
		     EVP_DigestUpdate(c, b, 16);
	}
	ok = ok && EVP_DigestFinal_ex(c, d, &dl) && dl == 16;
	EVP_MD_CTX_free(c);
	if (!ok)
		return -1;
	fg_hex_encode(d, 16, out);
	snprintf(out + 32, FG_S3_ETAG_MAX - 32, "-%u", m->nparts);
	return 0;
}

static int mpu_complete(struct mpu *m, struct fg_err *err)
{
	struct fg_sigv4_param p[1] = { { "uploadId", m->upload_id } };
	struct fg_sigv4_header h[1] = { { "Content-Type", "application/xml" } };
	struct fg_buf xml = FG_BUF_INIT, body = FG_BUF_INIT, t = FG_BUF_INIT;
	struct req r;
	unsigned i;
	int rc;

	fg_buf_init(&body, RESP_MAX);
	rc = fg_buf_puts(&xml, "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">", err);
	for (i = 0; i < m->nparts && !rc; i++) {
		size_t j;

		rc = fg_buf_printf(&xml, err, "<Part><PartNumber>%u</PartNumber><ETag>&quot;", i + 1);
		for (j = 0; !rc && m->parts[i].etag[j]; j++) {
			char c = m->parts[i].etag[j];

			rc = c == '&'   ? fg_buf_puts(&xml, "&amp;", err)
			     : c == '<' ? fg_buf_puts(&xml, "&lt;", err)
			     : c == '>' ? fg_buf_puts(&xml, "&gt;", err)
					: fg_buf_putc(&xml, c, err);
		}
		if (!rc)
			rc = fg_buf_puts(&xml, "&quot;</ETag></Part>", err);
	}
	if (!rc)
		rc = fg_buf_puts(&xml, "</CompleteMultipartUpload>", err);
	if (rc)
		goto out;
	req_init(&r, "POST", m->bucket, m->key);
	r.params = p;
	r.np = 1;
	r.hdrs = h;
	r.nh = 1;
	r.mem_body = xml.data;
	r.mem_len = xml.len;
	r.resp = &body;
	/* S3 may answer 200 and still report an error in the body */
	r.error_in_200 = 1;
	rc = do_req(m->s, &r, err);
	m->st->retries += r.retries;
	if (rc == FG_ENOTFOUND) {
		/* NoSuchUpload: an earlier try (ours, or libcurl's own on a reused
		 * connection that died) may have completed the upload and its answer
		 * been lost. It did when the key now holds an object of this size
		 * whose ETag is the one these very parts make. */
		struct fg_s3_object o;
		struct fg_err herr;
		char want[FG_S3_ETAG_MAX];

		if (!multipart_etag(want, m) && !fg_s3_head(m->s, &o, m->bucket, m->key, &herr) &&
		    o.size == m->st->size && !strcasecmp(o.etag, want)) {
			memcpy(m->st->etag, o.etag, FG_S3_ETAG_MAX);
			rc = 0;
		}
		goto out;
	}
	if (rc)
		goto out;
	if (!xml_get(&t, body.data, body.len, "ETag")) {
		const char *e = t.data;
		size_t el = t.len;

		if (el >= 2 && e[0] == '"' && e[el - 1] == '"')
			e++, el -= 2;
		if (el >= FG_S3_ETAG_MAX)
			el = FG_S3_ETAG_MAX - 1;
		memcpy(m->st->etag, e, el);
		m->st->etag[el] = 0;
	}
out:
	fg_buf_release(&xml);
	fg_buf_release(&body);
	fg_buf_release(&t);
	return rc;
}

/* Journal path: <dir>/<sha256(endpoint, bucket, key, realpath)>.journal */
static int journal_path(struct fg_buf *out, struct fg_s3 *s, const char *dir, const char *bucket,
			const char *key, const char *path, struct fg_err *err)
{
	struct fg_buf id = FG_BUF_INIT;
	char *real = realpath(path, NULL);
	unsigned char d[32];
	char hex[65];
	int rc;

	rc = fg_buf_printf(&id, err, "%s%s\n%s\n%s\n%s\n", s->scheme_host, s->base, bucket, key,
			   real ? real : path);
	free(real);
	if (!rc)
		rc = fg_sha256_mem(id.data, id.len, d, err);
	fg_buf_release(&id);
	if (rc)
		return rc;
	fg_hex_encode(d, 32, hex);
	hex[32] = 0;
	return fg_buf_printf(out, err, "%s/%s.journal", dir, hex);
}



/* Reads a journal. Returns 1 when it matches (upload id into id, done
 * parts' ETags into parts), 0 when absent or stale. */
static int journal_load(const char *jpath, const char *ident, struct fg_buf *id, struct part *parts,
			unsigned nparts, unsigned *resumed)
{
	struct fg_buf text = FG_BUF_INIT;
	char *line, *next;
	int matched = 0;

	*resumed = 0;
	if (fg_file_read(jpath, (size_t)64 << 20, &text, NULL) || !text.data)
		goto out;
	line = text.data;
	next = strchr(line, '\n');
	if (!next)
		goto out;
	*next++ = 0;
	/* header: "fgpack-upload 1 <ident> <upload id, encoded>" */
	{
		size_t il = strlen(ident);
		char *upid;

		if (strncmp(line, "fgpack-upload 1 ", 16) || strncmp(line + 16, ident, il) ||
		    line[16 + il] != ' ')
			goto out;
		upid = line + 17 + il;
		if (pct_decode(upid, 0) || !*upid)
			goto out;
		fg_buf_reset(id);
		if (fg_buf_puts(id, upid, NULL))
			goto out;
	}
	matched = 1;
	for (line = next; line && *line; line = next) {
		unsigned long long n;
		char *sp, *et;

		next = strchr(line, '\n');
		if (!next)
			break; /* a torn last line */
		*next++ = 0;
		if (strncmp(line, "part ", 5) || !(sp = strchr(line + 5, ' ')))
			continue;
		*sp = 0;
		et = sp + 1;
		if (fg_parse_u64(line + 5, &n) || n < 1 || n > nparts || pct_decode(et, 0) || !*et ||
		    strlen(et) >= FG_S3_ETAG_MAX)
			continue;
		if (!parts[n - 1].etag[0])
			(*resumed)++;
		memcpy(parts[n - 1].etag, et, strlen(et) + 1);
	}
out:
	fg_buf_release(&text);
	return matched;
}

int fg_s3_upload_file(struct fg_s3_upload_stats *st, struct fg_s3 *s, const char *bucket,
		      const char *key, const char *path, const struct fg_s3_upload_opts *o,
		      struct fg_err *err)
{
	struct fg_s3_upload_opts def = { 0, 0, 0, NULL, NULL };
	unsigned long long part_size, size, threshold;
	struct fg_buf jpath = FG_BUF_INIT, ident = FG_BUF_INIT, upid = FG_BUF_INIT, hdr = FG_BUF_INIT;
	struct mpu m;
	struct stat sb;
	pthread_t th[64];
	int jobs, started = 0, i, rc, fresh = 0, attempt;
	int fd;

	memset(st, 0, sizeof(*st));
	memset(&m, 0, sizeof(m));
	m.jfd = -1;
	if (!o)
		o = &def;
	if ((rc = check_bucket(bucket, err)) || (rc = fg_s3_key_check(key, err)))
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fg_err_set(err, FG_EIO, "open %s: %s", path, strerror(errno));
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		close(fd);
		return fg_err_set(err, FG_EINVAL, "%s is not a regular file", path);
	}
	size = (unsigned long long)sb.st_size;
	st->size = size;
	part_size = o->part_size ? o->part_size : DEFAULT_PART;
	if (part_size < FG_S3_MIN_PART)
		part_size = FG_S3_MIN_PART;
	while (size / part_size >= FG_S3_MAX_PARTS)
		part_size *= 2;
	threshold = o->threshold ? o->threshold : part_size;
	st->part_size = part_size;

	if (size <= threshold) {
		struct fg_sigv4_header h[1] = {
			{ "Content-Type", o->content_type ? o->content_type : "application/octet-stream" }
		};
		struct req r;

		req_init(&r, "PUT", bucket, key);
		r.hdrs = h;
		r.nh = 1;
		r.body_fd = fd;
		r.body_off = 0;
		r.body_len = size;
		rc = do_req(s, &r, err);
		st->retries = r.retries;
		if (!rc) {
			st->parts_total = 1;
			st->parts_sent = 1;
			st->bytes_sent = size;
			memcpy(st->etag, r.x.etag, FG_S3_ETAG_MAX);
		}
		close(fd);
		return rc;
	}

	st->multipart = 1;
	m.s = s;
	m.bucket = bucket;
	m.key = key;
	m.fd = fd;
	m.st = st;
	m.nparts = (unsigned)((size + part_size - 1) / part_size);
	st->parts_total = m.nparts;
	pthread_mutex_init(&m.mu, NULL);
	m.parts = calloc(m.nparts, sizeof(*m.parts));
	if (!m.parts) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	/* the identity a journal must match: file size, mtime, part size */
	if ((rc = fg_buf_printf(&ident, err, "%llu %lld.%09ld %llu", size, (long long)sb.st_mtim.tv_sec,
				sb.st_mtim.tv_nsec, part_size)))
		goto out;

	for (attempt = 0; attempt < 2; attempt++) {
		unsigned u;

		for (u = 0; u < m.nparts; u++) {
			m.parts[u].off = (unsigned long long)u * part_size;
			m.parts[u].len = size - m.parts[u].off < part_size ? size - m.parts[u].off : part_size;
			m.parts[u].etag[0] = 0;
		}
		st->parts_resumed = 0;
		fg_buf_reset(&upid);
		fresh = 1;
		if (o->journal_dir) {
			fg_buf_reset(&jpath);
			if ((rc = fg_mkdir_p(o->journal_dir, 0700, err)) ||
			    (rc = journal_path(&jpath, s, o->journal_dir, bucket, key, path, err)))
				goto out;
			if (attempt == 0 &&
			    journal_load(jpath.data, ident.data, &upid, m.parts, m.nparts, &st->parts_resumed))
				fresh = 0;
		}
		if (fresh) {
			if ((rc = fg_s3_mpu_create(s, &upid, bucket, key, o->content_type, err)))
				goto out;
			if (o->journal_dir) {
				fg_buf_reset(&hdr);
				if ((rc = fg_buf_printf(&hdr, err, "fgpack-upload 1 %s ", ident.data)) ||
				    (rc = fg_sigv4_uri_encode(&hdr, upid.data, upid.len, 0, err)) ||
				    (rc = fg_buf_putc(&hdr, '\n', err)) ||
				    (rc = fg_file_write_atomic(jpath.data, hdr.data, hdr.len, 0600, err)))
					goto out;
			}
		}
		if (m.jfd >= 0)
			close(m.jfd);
		m.jfd = -1;
		if (o->journal_dir) {
			m.jfd = open(jpath.data, O_WRONLY | O_APPEND | O_CLOEXEC);
			if (m.jfd < 0) {
				rc = fg_err_set(err, FG_EIO, "open %s: %s", jpath.data, strerror(errno));
				goto out;
			}
		}
		m.upload_id = upid.data;
		m.next = 0;
		m.failed = 0;
		jobs = o->jobs > 0 ? o->jobs : DEFAULT_JOBS;
		if (jobs > 64)
			jobs = 64;
		if ((unsigned)jobs > m.nparts)
			jobs = (int)m.nparts;
		for (started = 0; started < jobs; started++)
			if (pthread_create(&th[started], NULL, part_worker, &m))
				break;
		if (!started) {
			rc = fg_err_set(err, FG_ENOMEM, "cannot start upload threads");
			goto out;
		}
		for (i = 0; i < started; i++)
			pthread_join(th[i], NULL);
		if (m.failed && !fresh && m.err.code == FG_ENOTFOUND) {
			/* the server forgot the upload (expired or aborted): start over once */
			st->parts_sent = 0;
			st->bytes_sent = 0;
			continue;
		}
		if (m.failed) {
			rc = m.err.code ? m.err.code : FG_ENET;
			if (err)
				*err = m.err;
			goto out;
		}
		rc = mpu_complete(&m, err);
		if (rc == FG_ENOTFOUND && !fresh)
			continue;
		break;
	}
	if (!rc && o->journal_dir)
		unlink(jpath.data);
out:
	if (m.jfd >= 0)
		close(m.jfd);
	close(fd);
	free(m.parts);
	if (m.nparts)
		pthread_mutex_destroy(&m.mu);
	fg_buf_release(&jpath);
	fg_buf_release(&ident);
	fg_buf_release(&upid);
	fg_buf_release(&hdr);
	return rc;
}
