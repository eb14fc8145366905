/* ref.c - parsing component references; every Hub URL shape is built here. */
#include "ref.h"
#include "sha256.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fsutil.h"

void fg_ref_free(struct fg_ref *ref)
{
	if (!ref)
		return;
	free(ref->text);
	free(ref->ns);
	free(ref->name);
	free(ref->revision);
	free(ref->path);
	free(ref->url);
	free(ref);
}

const char *fg_ref_kind_name(int kind)
{
	switch (kind) {
	case FG_REF_BUCKET: return "bucket";
	case FG_REF_MODEL: return "model";
	case FG_REF_HTTPS: return "https";
	case FG_REF_FILE: return "file";
	}
	return "unknown";
}

const char *fg_ref_revision(const struct fg_ref *ref)
{
	return ref->revision ? ref->revision : "main";
}

/* Hub name rule: [A-Za-z0-9._-]{1,96}, no leading/trailing '-' or '.', no "--"/"..". */
static const char *name_problem(const char *s, size_t n)
{
	size_t i;

	if (n == 0)
		return "is empty";
	if (n > FG_REF_NAME_MAX)
		return "is longer than 96 characters";
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!isalnum(c) && c != '-' && c != '_' && c != '.')
			return "may hold only letters, digits, '-', '_' and '.'";
	}
	if (s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.')
		return "may not start or end with '-' or '.'";
	for (i = 0; i + 1 < n; i++)
		if ((s[i] == '-' && s[i + 1] == '-') || (s[i] == '.' && s[i + 1] == '.'))
			return "may not contain \"--\" or \"..\"";
	return NULL;
}

/* Revisions: branch, tag or commit; printable, no spaces, no "..", no leading '/'. */
static const char *rev_problem(const char *s, size_t n)
{
	size_t i;

	if (n == 0)
		return "is empty";
	if (n > 256)
		return "is longer than 256 characters";
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c <= 0x20 || c >= 0x7f || c == '\\' || c == '?' || c == '#' || c == '%')
			return "holds a character not allowed in a revision";
	}
	if (s[0] == '/' || s[n - 1] == '/')
		return "may not start or end with '/'";
	for (i = 0; i + 1 < n; i++)
		if (s[i] == '.' && s[i + 1] == '.')
			return "may not contain \"..\"";
	return NULL;
}

/* Path inside a bucket/repo: trailing '/' tolerated (dropped), else a safe relative path. */
static int take_path(struct fg_ref *r, const char *p, const char *text, struct fg_err *err)
{
	size_t n = strlen(p);

	while (n && p[n - 1] == '/')
		n--;
	r->path = strndup(p, n);
	if (!r->path)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if (n && !fg_path_is_safe_rel(r->path))
		return fg_err_set(err, FG_EINVAL,
				  "%s: path \"%s\" is not a safe relative path (empty segment, '.', '..', "
				  "backslash or control character)",
				  text, r->path);
	return 0;
}

/* "<ns>/<name>[...rest]": fills ns and name, returns the rest (after name). */
static int take_ns_name(struct fg_ref *r, const char *p, const char *text, const char *what,
			int allow_rev, const char **rest, struct fg_err *err)
{
	const char *slash = strchr(p, '/'), *end, *why;
	size_t n;

	if (!*p)
		return fg_err_set(err, FG_EINVAL, "%s: missing namespace", text);
	if (!slash || slash[1] == '\0' || slash[1] == '/' || (allow_rev && slash[1] == '@'))
		return fg_err_set(err, FG_EINVAL, "%s: missing %s name (expected <namespace>/<%s>)",
				  text, what, what);
	why = name_problem(p, (size_t)(slash - p));
	if (why)
		return fg_err_set(err, FG_EINVAL, "%s: namespace \"%.*s\" %s", text,
				  (int)(slash - p > 100 ? 100 : slash - p), p, why);
	end = slash + 1;
	n = strcspn(end, allow_rev ? "/@" : "/");
	why = name_problem(end, n);
	if (why)
		return fg_err_set(err, FG_EINVAL, "%s: %s name \"%.*s\" %s", text, what,
				  (int)(n > 100 ? 100 : n), end, why);
	r->ns = strndup(p, (size_t)(slash - p));
	r->name = strndup(end, n);
	if (!r->ns || !r->name)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	*rest = end + n;
	return 0;
}

static int has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

/* Percent-decodes a file:// path; refuses %00 and bad escapes. */
static char *pct_decode(const char *s)
{
	size_t n = strlen(s), i, j = 0;
	char *o = malloc(n + 1);

	if (!o)
		return NULL;
	for (i = 0; i < n; i++) {
		if (s[i] == '%') {
			int hi = fg_hex_value(s[i + 1]), lo = hi >= 0 ? fg_hex_value(s[i + 2]) : -1;

			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
				free(o);
				return NULL;
			}
			o[j++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			o[j++] = s[i];
		}
	}
	o[j] = '\0';
	return o;
}

/* A revision written percent-encoded, as huggingface_hub's HfFileSystem
 * writes one holding '/' (hf://ns/repo@dev%2Fint4/path: one segment, so the
 * path after it is not ambiguous; refs%2Fpr%2F3 the same) and reads back
 * with unquote(). r->revision gets it decoded, checked like any other. */
static int take_encoded_rev(struct fg_ref *r, const char *rv, size_t n, const char *text,
			    struct fg_err *err)
{
	char *raw = strndup(rv, n), *dec;
	const char *why;

	if (!raw)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	dec = pct_decode(raw);
	free(raw);
	if (!dec)
		return fg_err_set(err, FG_EINVAL, "%s: revision has a bad percent-escape", text);
	why = rev_problem(dec, strlen(dec));
	if (why) {
		free(dec);
		return fg_err_set(err, FG_EINVAL, "%s: revision %s", text, why);
	}
	r->revision = dec;
	return 0;
}

static int parse_url(struct fg_ref *r, const char *text, const char *after, struct fg_err *err)
{
	size_t hostlen = strcspn(after, "/?#");

	if (hostlen == 0)
		return fg_err_set(err, FG_EINVAL, "%s: URL has no host", text);
	if (memchr(after, '@', hostlen))
		return fg_err_set(err, FG_EINVAL, "%s: credentials in a URL are not accepted (use HF_TOKEN)",
				  text);
	if (strchr(text, ' '))
		return fg_err_set(err, FG_EINVAL, "%s: URL contains a space (percent-encode it)", text);
	r->kind = FG_REF_HTTPS;
	r->url = strdup(text);
	return r->url ? 0 : fg_err_set(err, FG_ENOMEM, "out of memory");
}

int fg_ref_parse(struct fg_ref **out, const char *text, struct fg_err *err)
{
	struct fg_ref *r;
	const char *rest = NULL;
	int rc = 0;

	*out = NULL;
	if (!text || !*text)
		return fg_err_set(err, FG_EINVAL, "empty reference");
	if (strlen(text) > 4096)
		return fg_err_set(err, FG_EINVAL, "reference longer than 4096 bytes");
	if (has_ctl(text))
		return fg_err_set(err, FG_EINVAL, "reference contains a control character");
	r = calloc(1, sizeof(*r));
	if (!r || !(r->text = strdup(text))) {
		free(r);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!strncmp(text, "hf://buckets/", 13)) {
		r->kind = FG_REF_BUCKET;
		rc = take_ns_name(r, text + 13, text, "bucket", 1, &rest, err);
		if (!rc && *rest == '@')
			rc = fg_err_set(err, FG_EINVAL, "%s: buckets have no revisions ('@')", text);
		if (!rc)
			rc = take_path(r, *rest == '/' ? rest + 1 : rest, text, err);
	} else if (!strcmp(text, "hf://buckets")) {
		rc = fg_err_set(err, FG_EINVAL, "%s: missing namespace", text);
	} else if (!strncmp(text, "hf://", 5)) {
		r->kind = FG_REF_MODEL;
		rest = text + 5;
		/* huggingface_hub also accepts hf://models/<ns>/<repo> */
		if (!strncmp(rest, "models/", 7))
			rest += 7;
		else if (!strncmp(rest, "datasets/", 9) || !strncmp(rest, "spaces/", 7))
			rc = fg_err_set(err, FG_EUNSUPPORTED,
					"%s: dataset and space repos are not supported (model repos and "
					"buckets are)",
					text);
		if (!rc)
			rc = take_ns_name(r, rest, text, "repo", 1, &rest, err);
		if (!rc && *rest == '@') {
			const char *rv = rest + 1, *why;
			/* a revision runs to the end; "rev/path" cannot be split unambiguously
			 * when the revision itself holds '/', so "refs/..." takes three segments */
			size_t n = strcspn(rv, "/");

			why = NULL;
			if (!strncmp(rv, "refs/", 5)) {
				const char *s2 = strchr(rv + 5, '/');

				if (!s2 || s2 == rv + 5 || s2[1] == '\0' || s2[1] == '/') {
					why = "refs/... must be refs/<kind>/<name>";
				} else {
					const char *s3 = strchr(s2 + 1, '/');

					n = s3 ? (size_t)(s3 - rv) : strlen(rv);
				}
			}
			if (!why && memchr(rv, '%', n))
				rc = take_encoded_rev(r, rv, n, text, err);
			else if (!why)
				why = rev_problem(rv, n);
			if (why)
				rc = fg_err_set(err, FG_EINVAL, "%s: revision %s", text, why);
			else if (!rc && !r->revision && !(r->revision = strndup(rv, n)))
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			rest = rv + n;
		}
		if (!rc)
			rc = take_path(r, *rest == '/' ? rest + 1 : rest, text, err);
	} else if (!strncmp(text, "https://", 8)) {
		rc = parse_url(r, text, text + 8, err);
	} else if (!strncmp(text, "http://", 7)) {
		rc = parse_url(r, text, text + 7, err);
	} else if (!strncmp(text, "file://", 7)) {
		const char *p = text + 7;

		r->kind = FG_REF_FILE;
		if (!strncmp(p, "localhost/", 10))
			p += 9;
		if (*p != '/')
			rc = fg_err_set(err, FG_EINVAL, "%s: file URL needs an absolute path (file:///...)",
					text);
		else if (!(r->path = pct_decode(p)))
			rc = fg_err_set(err, FG_EINVAL, "%s: bad percent-escape in file URL", text);
		if (!rc) {
			size_t n = strlen(r->path);

			while (n > 1 && r->path[n - 1] == '/')
				r->path[--n] = '\0';
			if (n > 1 && !fg_path_is_safe_rel(r->path + 1))
				rc = fg_err_set(err, FG_EINVAL,
						"%s: path has '.', '..', empty segments or control characters",
						text);
			else if (!(r->url = strdup(text)))
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		}
	} else if (strstr(text, "://")) {
		rc = fg_err_set(err, FG_EUNSUPPORTED,
				"%s: unknown scheme (expected hf://, https://, http:// or file://)", text);
	} else {
		/* bare repo id: exactly <ns>/<repo> */
		r->kind = FG_REF_MODEL;
		if (strchr(text, '@') && !strchr(text, ' '))
			rc = fg_err_set(err, FG_EINVAL,
					"%s: a bare repo id takes no revision (write hf://%s for a repo at "
					"a revision)",
					text, text);
		else
			rc = take_ns_name(r, text, text, "repo", 0, &rest, err);
		if (!rc && *rest)
			rc = fg_err_set(err, FG_EINVAL,
					"%s: a bare repo id is <namespace>/<repo> (use hf://%s/%s[@rev]/path "
					"for a path)",
					text, r->ns, r->name);
		if (!rc && !(r->path = strdup("")))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (rc) {
		fg_ref_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

int fg_ref_owner(struct fg_buf *out, const struct fg_ref *ref, struct fg_err *err)
{
	switch (ref->kind) {
	case FG_REF_BUCKET:
	case FG_REF_MODEL:
		return fg_buf_printf(out, err, "%s/%s", ref->ns, ref->name);
	case FG_REF_HTTPS: {
		const char *h = strstr(ref->url, "://") + 3;
		size_t n = strcspn(h, "/?#");

		return fg_buf_append(out, h, n, err);
	}
	case FG_REF_FILE:
		return fg_buf_puts(out, "local", err);
	}
	return fg_err_set(err, FG_EINVAL, "unknown reference kind");
}

/* 1 when rev is refs/<kind>/<name> with no further '/': what the parser
 * reads back from a literal "@refs/..." */
static int rev_is_refs3(const char *rev)
{
	const char *a = strchr(rev + 5, '/');

	return a && a > rev + 5 && a[1] && !strchr(a + 1, '/');
}

int fg_ref_format(struct fg_buf *out, const struct fg_ref *ref, struct fg_err *err)
{
	int rc;

	switch (ref->kind) {
	case FG_REF_BUCKET:
		rc = fg_buf_printf(out, err, "hf://buckets/%s/%s", ref->ns, ref->name);
		break;
	case FG_REF_MODEL:
		/* a namespace that is also a hf:// keyword needs the explicit models/ form */
		rc = fg_buf_printf(out, err, "hf://%s%s/%s",
				   !strcmp(ref->ns, "buckets") || !strcmp(ref->ns, "models") ||
						   !strcmp(ref->ns, "datasets") || !strcmp(ref->ns, "spaces")
					   ? "models/"
					   : "",
				   ref->ns, ref->name);
		if (!rc && ref->revision)
			rc = fg_buf_putc(out, '@', err);
		/* a revision with '/' reads back as one only as refs/<kind>/<name>;
		 * any other goes as one encoded segment (dev/int4 -> dev%2Fint4) */
		if (!rc && ref->revision && strchr(ref->revision, '/') &&
		    (strncmp(ref->revision, "refs/", 5) || !rev_is_refs3(ref->revision)))
			rc = fg_url_encode_segment(out, ref->revision, err);
		else if (!rc && ref->revision)
			rc = fg_buf_puts(out, ref->revision, err);
		break;
	case FG_REF_HTTPS:
	case FG_REF_FILE:
		return fg_buf_puts(out, ref->url, err);
	default:
		return fg_err_set(err, FG_EINVAL, "unknown reference kind");
	}
	if (!rc && ref->path && *ref->path)
		rc = fg_buf_printf(out, err, "/%s", ref->path);
	return rc;
}

const char *fg_ref_rel(const struct fg_ref *ref, const char *full)
{
	const char *p = ref->path ? ref->path : "";
	size_t n = strlen(p);

	if (!full)
		return NULL;
	if (n == 0)
		return *full ? full : NULL;
	if (strncmp(full, p, n))
		return NULL;
	if (full[n] == '\0') {
		const char *slash = strrchr(full, '/');

		return slash ? slash + 1 : full;
	}
	if (full[n] == '/' && full[n + 1])
		return full + n + 1;
	return NULL;
}

int fg_ref_full(struct fg_buf *out, const struct fg_ref *ref, const char *rel, struct fg_err *err)
{
	if (!ref->path || !*ref->path)
		return fg_buf_puts(out, rel, err);
	if (!rel || !*rel)
		return fg_buf_puts(out, ref->path, err);
	return fg_buf_printf(out, err, "%s/%s", ref->path, rel);
}

static int encode(struct fg_buf *out, const char *s, int keep_slash, struct fg_err *err)
{
	static const char hex[] = "0123456789ABCDEF";
	int rc = 0;

	for (; !rc && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
		    (keep_slash && c == '/')) {
			rc = fg_buf_putc(out, (char)c, err);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };

			rc = fg_buf_append(out, e, 3, err);
		}
	}
	return rc;
}

int fg_url_encode_path(struct fg_buf *out, const char *path, struct fg_err *err)
{
	return encode(out, path, 1, err);
}

int fg_url_encode_segment(struct fg_buf *out, const char *seg, struct fg_err *err)
{
	return encode(out, seg, 0, err);
}

int fg_url_origin(struct fg_buf *out, const char *url, struct fg_err *err)
{
	const char *h;
	size_t n, i, start;
	int https, rc;

	if (!strncasecmp(url, "https://", 8)) {
		https = 1;
		h = url + 8;
	} else if (!strncasecmp(url, "http://", 7)) {
		https = 0;
		h = url + 7;
	} else {
		return fg_err_set(err, FG_EINVAL, "%s: not an http(s) URL", url);
	}
	n = strcspn(h, "/?#");
	if (memchr(h, '@', n)) { /* userinfo: origin is what follows it */
		const char *at = h;

		while (memchr(at, '@', n - (size_t)(at - h)))
			at = (const char *)memchr(at, '@', n - (size_t)(at - h)) + 1;
		n -= (size_t)(at - h);
		h = at;
	}
	if (n == 0)
		return fg_err_set(err, FG_EINVAL, "%s: URL has no host", url);
	/* drop a default port */
	if (https && n > 4 && !memcmp(h + n - 4, ":443", 4))
		n -= 4;
	else if (!https && n > 3 && !memcmp(h + n - 3, ":80", 3))
		n -= 3;
	rc = fg_buf_puts(out, https ? "https://" : "http://", err);
	start = out->len;
	if (!rc)
		rc = fg_buf_append(out, h, n, err);
	for (i = start; !rc && i < out->len; i++)
		out->data[i] = (char)tolower((unsigned char)out->data[i]);
	return rc;
}

static int truthy(const char *v)
{
	return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
		     !strcasecmp(v, "on"));
}

int fg_hf_home_path(struct fg_buf *out, const char *first_var, const char *leaf, struct fg_err *err)
{
	const char *v;

	if (first_var && (v = getenv(first_var)) && *v)
		return fg_buf_puts(out, v, err);
	if ((v = getenv("HF_HOME")) && *v)
		return fg_buf_printf(out, err, "%s/%s", v, leaf);
	if ((v = getenv("XDG_CACHE_HOME")) && *v)
		return fg_buf_printf(out, err, "%s/huggingface/%s", v, leaf);
	if ((v = getenv("HOME")) && *v)
		return fg_buf_printf(out, err, "%s/.cache/huggingface/%s", v, leaf);
	return 0;
}

/* The token as huggingface_hub finds it: HF_TOKEN, else HUGGING_FACE_HUB_TOKEN
 * (an empty one counts as unset), else the file `hf auth login` wrote:
 * HF_TOKEN_PATH, else $HF_HOME/token, else $XDG_CACHE_HOME/huggingface/token,
 * else ~/.cache/huggingface/token. Surrounding whitespace is dropped. None at
 * all with HF_HUB_DISABLE_IMPLICIT_TOKEN set. *tok is NULL when there is none;
 * an unusable one is refused naming where it came from. */
static int find_token(char **tok, struct fg_err *err)
{
	static const char *const vars[] = { "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN" };
	struct fg_buf path = FG_BUF_INIT, text = FG_BUF_INIT;
	const char *v = NULL, *from = NULL;
	size_t i, a, b;
	int rc = 0;

	*tok = NULL;
	if (truthy(getenv("HF_HUB_DISABLE_IMPLICIT_TOKEN")))
		return 0;
	for (i = 0; i < sizeof(vars) / sizeof(vars[0]) && !from; i++)
		if ((v = getenv(vars[i])) && *v)
			from = vars[i];
	if (!from) {
		rc = fg_hf_home_path(&path, "HF_TOKEN_PATH", "token", err);
		if (rc || !path.len || fg_file_read(path.data, 4096, &text, NULL)) {
			fg_buf_release(&path);
			return rc;
		}
		v = text.data;
		from = path.data;
	}
	for (a = 0; isspace((unsigned char)v[a]); a++)
		;
	for (b = strlen(v); b > a && isspace((unsigned char)v[b - 1]); b--)
		;
	if (b > a && !(*tok = strndup(v + a, b - a)))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	else if (*tok && (has_ctl(*tok) || strchr(*tok, ' '))) {
		rc = fg_err_set(err, FG_EINVAL, "%s: the token holds a space or a control character", from);
		free(*tok);
		*tok = NULL;
	}
	fg_buf_release(&path);
	fg_buf_release(&text);
	return rc;
}

int fg_hub_env_load(struct fg_hub_env **out, struct fg_err *err)
{
	const char *ep = getenv("HF_ENDPOINT");
	char *tok = NULL;
	struct fg_hub_env *e;
	size_t n;
	int rc;

	*out = NULL;
	if (!ep || !*ep)
		ep = "https://huggingface.co";
	if (strncasecmp(ep, "https://", 8) && strncasecmp(ep, "http://", 7))
		return fg_err_set(err, FG_EINVAL, "HF_ENDPOINT=%s: expected an http(s):// URL", ep);
	if (has_ctl(ep) || strchr(ep, ' '))
		return fg_err_set(err, FG_EINVAL, "HF_ENDPOINT: contains a space or control character");
	if ((rc = find_token(&tok, err)))
		return rc;
	e = calloc(1, sizeof(*e));
	if (!e) {
		free(tok);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	n = strlen(ep);
	while (n > 8 && ep[n - 1] == '/')
		n--;
	e->endpoint = strndup(ep, n);
	e->token = tok;
	e->offline = truthy(getenv("HF_HUB_OFFLINE"));
	if (!e->endpoint) {
		fg_hub_env_free(e);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	*out = e;
	return 0;
}

void fg_hub_env_free(struct fg_hub_env *env)
{
	if (!env)
		return;
	free(env->endpoint);
	if (env->token) {
		/* do not leave the token in freed memory */
		volatile char *p = env->token;

		while (*p)
			*p++ = 0;
		free(env->token);
	}
	free(env);
}

static int need(const struct fg_ref *ref, int kind, struct fg_err *err)
{
	if (ref->kind != kind)
		return fg_err_set(err, FG_EINVAL, "%s: not a %s reference", ref->text,
				  fg_ref_kind_name(kind));
	return 0;
}

static int ns_name(struct fg_buf *out, const struct fg_ref *ref, struct fg_err *err)
{
	int rc = fg_url_encode_segment(out, ref->ns, err);

	if (!rc)
		rc = fg_buf_putc(out, '/', err);
	return rc ? rc : fg_url_encode_segment(out, ref->name, err);
}

int fg_url_bucket_info(struct fg_buf *out, const char *endpoint, const struct fg_ref *ref,
		       struct fg_err *err)
{
	int rc = need(ref, FG_REF_BUCKET, err);

	if (!rc)
		rc = fg_buf_printf(out, err, "%s/api/buckets/", endpoint);
	return rc ? rc : ns_name(out, ref, err);
}

int fg_url_bucket_tree(struct fg_buf *out, const char *endpoint, const struct fg_ref *ref,
		       const char *path, struct fg_err *err)
{
	int rc = fg_url_bucket_info(out, endpoint, ref, err);

	if (!rc)
		rc = fg_buf_puts(out, "/tree", err);
	if (!rc && path && *path) {
		rc = fg_buf_putc(out, '/', err);
		if (!rc)
			rc = fg_url_encode_path(out, path, err);
	}
	return rc ? rc : fg_buf_puts(out, "?recursive=true", err);
}

int fg_url_bucket_paths_info(struct fg_buf *out, const char *endpoint, const struct fg_ref *ref,
			     struct fg_err *err)
{
	int rc = fg_url_bucket_info(out, endpoint, ref, err);

	return rc ? rc : fg_buf_puts(out, "/paths-info", err);
}

int fg_url_bucket_resolve(struct fg_buf *out, const char *endpoint, const struct fg_ref *ref,
			  const char *path, struct fg_err *err)
{
	int rc = need(ref, FG_REF_BUCKET, err);

	if (!rc && (!path || !*path))
		rc = fg_err_set(err, FG_EINVAL, "%s: resolve needs a file path", ref->text);
	if (!rc)
		rc = fg_buf_printf(out, err, "%s/buckets/", endpoint);
	if (!rc)
		rc = ns_name(out, ref, err);
	if (!rc)
		rc = fg_buf_puts(out, "/resolve/", err);
	return rc ? rc : fg_url_encode_path(out, path, err);
}

int fg_url_model_tree(struct fg_buf *out, const char *endpoint, const struct fg_ref *ref,
		      const char *rev, const char *path, struct fg_err *err)
{
	int rc = need(ref, FG_REF_MODEL, err);

	if (!rc)
		rc = fg_buf_printf(out, err, "%s/api/models/", endpoint);
	if (!rc)
		rc = ns_name(out, ref, err);
	if (!rc)
		rc = fg_buf_puts(out, "/tree/", err);
	if (!rc)
		rc = fg_url_encode_segment(out, rev ? rev : fg_ref_revision(ref), err);
	if (!rc && path && *path) {
		rc = fg_buf_putc(out, '/', err);
		if (!rc)
			rc = fg_url_encode_path(out, path, err);
	}
	return rc ? rc : fg_buf_puts(out, "?recursive=true&expand=true", err);
}

int fg_url_model_resolve(struct fg_buf *out, const char *endpoint, const struct fg_ref *ref,
			 const char *rev, const char *path, struct fg_err *err)
{
	int rc = need(ref, FG_REF_MODEL, err);

	if (!rc && (!path || !*path))
		rc = fg_err_set(err, FG_EINVAL, "%s: resolve needs a file path", ref->text);
	if (!rc)
		rc = fg_buf_printf(out, err, "%s/", endpoint);
	if (!rc)
		rc = ns_name(out, ref, err);
	if (!rc)
		rc = fg_buf_puts(out, "/resolve/", err);
	if (!rc)
		rc = fg_url_encode_segment(out, rev ? rev : fg_ref_revision(ref), err);
	if (!rc)
		rc = fg_buf_putc(out, '/', err);
	return rc ? rc : fg_url_encode_path(out, path, err);
}

int fg_url_file_name(struct fg_buf *out, const char *url, struct fg_err *err)
{
	const char *p = strstr(url, "://"), *end, *seg;
	char *raw, *name;
	int rc;

	if (!p)
		return fg_err_set(err, FG_EINVAL, "%s: not a URL", url);
	p += 3;
	end = p + strcspn(p, "?#");
	seg = end;
	while (seg > p && seg[-1] != '/')
		seg--;
	if (seg == p) /* no '/' after the host: no path at all */
		return fg_err_set(err, FG_EINVAL, "%s: the URL names no file", url);
	raw = malloc((size_t)(end - seg) + 1);
	if (!raw)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	memcpy(raw, seg, (size_t)(end - seg));
	raw[end - seg] = '\0';
	name = pct_decode(raw);
	free(raw);
	if (!name)
		return fg_err_set(err, FG_EINVAL, "%s: bad percent-escape in the file name", url);
	if (!*name || strchr(name, '/') || !fg_path_is_safe_rel(name))
		rc = fg_err_set(err, FG_EINVAL, "%s: the URL names no usable file name", url);
	else
		rc = fg_buf_puts(out, name, err);
	free(name);
	return rc;
}
