/* hub.c - bucket and model-repo listings with Link paging, resolve HEADs. */
#include "hub.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "fsutil.h"
#include "json.h"
#include "sha256.h"

#define PAGE_MAX ((size_t)256 << 20)

static void file_release(struct fg_hub_file *f)
{
	free(f->path);
	free(f->xet_hash);
	free(f->mtime);
	free(f->oid);
	free(f->lfs_sha256);
}

void fg_hub_list_release(struct fg_hub_list *l)
{
	size_t i;

	if (!l)
		return;
	for (i = 0; i < l->n; i++)
		file_release(&l->files[i]);
	free(l->files);
	for (i = 0; i < l->n_dirs; i++)
		free(l->dirs[i]);
	free(l->dirs);
	memset(l, 0, sizeof(*l));
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int size_of(const cJSON *o, const char *key, unsigned long long *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)FG_HUB_MAX_FILE_SIZE ||
	    v->valuedouble != (double)(unsigned long long)v->valuedouble)
		return -1;
	*out = (unsigned long long)v->valuedouble;
	return 0;
}

/* Short printable token for messages: no control bytes, at most 64 chars. */
static const char *show(const char *s, char *tmp, size_t n)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < n && i < 64; i++)
		tmp[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	tmp[i] = '\0';
	return tmp;
}

int fg_hub_parse_tree(struct fg_hub_list *l, const char *text, size_t len, int model,
		      const char *what, struct fg_err *err)
{
	cJSON *root = NULL;
	const cJSON *e;
	int rc, idx = -1;
	char tmp[80];

	rc = fg_json_parse(&root, text, len, what, err);
	if (rc)
		return rc;
	if (!cJSON_IsArray(root)) {
		cJSON_Delete(root);
		return fg_err_set(err, FG_EFORMAT, "%s: expected a JSON array of entries", what);
	}
	cJSON_ArrayForEach(e, root)
	{
		const char *type, *path, *xet, *mtime, *oid, *lfs_oid = NULL;
		const cJSON *lfs;
		struct fg_hub_file *f;
		unsigned long long size;

		idx++;
		if (!cJSON_IsObject(e)) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: [%d]: not an object", what, idx);
			break;
		}
		type = fg_json_str(e, "type");
		path = fg_json_str(e, "path");
		if (!type || !path) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: [%d]: missing type or path", what, idx);
			break;
		}
		if (!strcmp(type, "directory")) {
			/* kept for a server that did not recurse (list_below) */
			if (fg_path_is_safe_rel(path) && strlen(path) <= 4096 &&
			    l->n_dirs < FG_HUB_MAX_ENTRIES) {
				if (l->n_dirs == l->cap_dirs) {
					size_t nc = l->cap_dirs ? l->cap_dirs * 2 : 16;
					char **nd = realloc(l->dirs, nc * sizeof(*nd));

					if (!nd) {
						rc = fg_err_set(err, FG_ENOMEM, "out of memory");
						break;
					}
					l->dirs = nd;
					l->cap_dirs = nc;
				}
				if (!(l->dirs[l->n_dirs] = strdup(path))) {
					rc = fg_err_set(err, FG_ENOMEM, "out of memory");
					break;
				}
				l->n_dirs++;
			}
			continue;
		}
		if (strcmp(type, "file")) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: [%d]: unknown type \"%s\"", what, idx,
					show(type, tmp, sizeof(tmp)));
			break;
		}
		if (!fg_path_is_safe_rel(path) || strlen(path) > 4096) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: [%d]: unsafe path \"%s\"", what, idx,
					show(path, tmp, sizeof(tmp)));
			break;
		}
		if (size_of(e, "size", &size)) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: %s: size missing or not a sane integer",
					what, show(path, tmp, sizeof(tmp)));
			break;
		}
		xet = fg_json_str(e, "xetHash");
		mtime = fg_json_str(e, "mtime");
		oid = fg_json_str(e, "oid");
		lfs = fg_json_obj(e, "lfs");
		if (model && lfs) {
			unsigned long long lsize;

			lfs_oid = fg_json_str(lfs, "oid");
			if (!lfs_oid || !fg_sha256_hex_valid(lfs_oid)) {
				rc = fg_err_set(err, FG_EFORMAT, "%s: %s: lfs.oid is not a sha256", what,
						show(path, tmp, sizeof(tmp)));
				break;
			}
			if (!size_of(lfs, "size", &lsize) && lsize != size) {
				rc = fg_err_set(err, FG_EFORMAT, "%s: %s: lfs.size %llu differs from size %llu",
						what, show(path, tmp, sizeof(tmp)), lsize, size);
				break;
			}
		}
		if (l->n >= FG_HUB_MAX_ENTRIES) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: more than %d entries", what, FG_HUB_MAX_ENTRIES);
			break;
		}
		if (l->n == l->cap) {
			size_t nc = l->cap ? l->cap * 2 : 64;
			struct fg_hub_file *nf = realloc(l->files, nc * sizeof(*nf));

			if (!nf) {
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
				break;
			}
			l->files = nf;
			l->cap = nc;
		}
		f = &l->files[l->n];
		memset(f, 0, sizeof(*f));
		f->size = size;
		f->path = strdup(path);
		f->xet_hash = dup_or_null(xet);
		f->mtime = dup_or_null(mtime);
		f->oid = dup_or_null(oid);
		f->lfs_sha256 = dup_or_null(lfs_oid);
		l->n++;
		if (!f->path || (xet && !f->xet_hash) || (mtime && !f->mtime) || (oid && !f->oid) ||
		    (lfs_oid && !f->lfs_sha256)) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
	}
	cJSON_Delete(root);
	return rc;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct fg_hub_file *)a)->path, ((const struct fg_hub_file *)b)->path);
}

int fg_hub_list_finish(struct fg_hub_list *l, const char *prefix, const char *what,
		       struct fg_err *err)
{
	size_t i, k = 0, pl = prefix ? strlen(prefix) : 0;
	char tmp[80];

	/* The Hub matches a bucket tree's prefix as a string: the listing of
	 * "w/v1" also holds "w/v1-old/x" and "w/v10/y". Those siblings are
	 * dropped; a path not even starting with the prefix is a wrong answer. */
	for (i = 0; pl && i < l->n; i++)
		if (strncmp(l->files[i].path, prefix, pl))
			return fg_err_set(err, FG_EFORMAT, "%s: \"%s\" is not below \"%s\"", what,
					  show(l->files[i].path, tmp, sizeof(tmp)), prefix);
	for (i = 0; i < l->n; i++) {
		struct fg_hub_file *f = &l->files[i];

		if (pl && f->path[pl] != '/' && f->path[pl] != '\0') {
			file_release(f);
			continue;
		}
		l->files[k++] = *f;
	}
	l->n = k;
	if (l->n)
		qsort(l->files, l->n, sizeof(*l->files), by_path);
	for (i = 1; i < l->n; i++)
		if (!strcmp(l->files[i].path, l->files[i - 1].path))
			return fg_err_set(err, FG_EFORMAT, "%s: \"%s\" listed twice", what,
					  show(l->files[i].path, tmp, sizeof(tmp)));
	return 0;
}

/* ref[0..n) with every byte a URI may not hold as is percent-encoded: a
 * blank, a control, '"', '<', '>', '\\', '^', '`', '{', '|', '}' and each
 * byte of a UTF-8 character. A server that writes a next page's path raw
 * (a folder "poids modèle") is followed so, as huggingface_hub's client
 * (requests) requotes a URL before it sends it; '%' escapes and reserved
 * characters are kept as sent. 0 or -1. */
static int requote(struct fg_buf *out, const char *ref, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)ref[i];

		if (c <= 0x20 || c >= 0x7f || strchr("\"<>\\^`{|}", c)) {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };

			if (fg_buf_append(out, e, 3, NULL))
				return -1;
		} else if (fg_buf_putc(out, (char)c, NULL)) {
			return -1;
		}
	}
	return 0;
}

/* url (requoted) resolved against base (RFC 3986), into out; 0 or -1. */
static int resolve_url(struct fg_buf *out, const char *base, const char *ref, size_t n)
{
	struct fg_buf rel = FG_BUF_INIT;
	int rc = -1;

	if (!requote(&rel, ref, n) && rel.data)
		rc = fg_http_url_resolve(out, base, rel.data);
	fg_buf_release(&rel);
	return rc;
}

static int link_ws(char c)
{
	return c == ' ' || c == '\t';
}

/* 1 when the space-separated relation types in v[0..n) include "next" (any case). */
static int rel_has_next(const char *v, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t s;

		while (i < n && link_ws(v[i]))
			i++;
		s = i;
		while (i < n && !link_ws(v[i]))
			i++;
		if (i - s == 4 && !strncasecmp(v + s, "next", 4))
			return 1;
	}
	return 0;
}

/* RFC 8288: link-value = "<" URI-Reference ">" *( ";" link-param ), values
 * separated by ','. A param value is a token or a quoted string (which may
 * hold ',' and ';'); only the first rel param of a link counts. */
int fg_hub_link_next(struct fg_buf *out, const char *link, const char *base)
{
	const char *p = link;

	while (p && *p) {
		const char *lt, *gt;
		int rel_seen = 0, next = 0;

		while (link_ws(*p) || *p == ',')
			p++;
		if (*p != '<') {
			/* not a link-value: skip to the next top-level ',' */
			while (*p && *p != ',')
				p++;
			continue;
		}
		lt = p + 1;
		gt = strchr(lt, '>');
		if (!gt)
			return 1;
		p = gt + 1;
		for (;;) {
			const char *name, *val = NULL;
			size_t nl, vl = 0;

			while (link_ws(*p))
				p++;
			if (*p != ';')
				break;
			p++;
			while (link_ws(*p))
				p++;
			name = p;
			while (*p && *p != '=' && *p != ';' && *p != ',' && !link_ws(*p))
				p++;
			nl = (size_t)(p - name);
			while (link_ws(*p))
				p++;
			if (*p == '=') {
				p++;
				while (link_ws(*p))
					p++;
				if (*p == '"') {
					val = ++p;
					while (*p && *p != '"')
						p += p[0] == '\\' && p[1] ? 2 : 1;
					vl = (size_t)(p - val);
					if (*p == '"')
						p++;
				} else {
					val = p;
					while (*p && *p != ';' && *p != ',' && !link_ws(*p))
						p++;
					vl = (size_t)(p - val);
				}
			}
			if (nl == 3 && !strncasecmp(name, "rel", 3) && !rel_seen) {
				rel_seen = 1;
				next = val && rel_has_next(val, vl);
			}
		}
		if (next)
			return resolve_url(out, base, lt, (size_t)(gt - lt));
		while (*p && *p != ',')
			p++;
	}
	return 1;
}

/* Walks every page from url, appending files to out. */
static int list_pages(struct fg_hub_list *out, struct fg_http *h, const char *url, int model,
		      const char *what, struct fg_err *err)
{
	struct fg_http_resp resp;
	struct fg_buf cur = FG_BUF_INIT, next = FG_BUF_INIT, link = FG_BUF_INIT;
	int rc, lr, pages = 0;

	fg_http_resp_init(&resp);
	rc = fg_buf_puts(&cur, url, err);
	while (!rc) {
		rc = fg_http_get(h, &resp, cur.data, what, PAGE_MAX, err);
		if (rc)
			break;
		rc = fg_hub_parse_tree(out, resp.body.data ? resp.body.data : "", resp.body.len, model,
				       what, err);
		if (rc)
			break;
		if (++pages >= FG_HUB_MAX_PAGES) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: more than %d pages", what, FG_HUB_MAX_PAGES);
			break;
		}
		/* Link may come in several header lines: all of them count */
		if (fg_http_resp_header_all(&resp, "Link", &link))
			break;
		lr = fg_hub_link_next(&next, link.data, resp.url ? resp.url : cur.data);
		if (lr > 0)
			break;
		/* a next page announced but not reachable: stopping here would
		 * lock a listing with its later pages silently left out */
		if (lr < 0) {
			char tmp[80];

			rc = fg_err_set(err, FG_EFORMAT,
					"%s: page %d announces a next page whose link is no usable URL: %s", what,
					pages, show(link.data, tmp, sizeof(tmp)));
			break;
		}
		if (!strcmp(next.data, cur.data)) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: next page link points to itself", what);
			break;
		}
		fg_buf_reset(&cur);
		rc = fg_buf_puts(&cur, next.data, err);
	}
	fg_http_resp_release(&resp);
	fg_buf_release(&cur);
	fg_buf_release(&next);
	fg_buf_release(&link);
	return rc;
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 when some path in sorted[0..n) lies below folder d. */
static int has_file_below(const char *const *sorted, size_t n, const char *d)
{
	size_t lo = 0, hi = n, dl = strlen(d);

	/* the first path not before "d/" */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strncmp(sorted[mid], d, dl);

		if (c < 0 || (c == 0 && (unsigned char)sorted[mid][dl] < '/'))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && !strncmp(sorted[lo], d, dl) && sorted[lo][dl] == '/';
}

/* The tree URL of folder dir of ref: a bucket's, or a model repo's at rev. */
static int tree_url(struct fg_buf *url, const char *endpoint, const struct fg_ref *ref, int model,
		    const char *rev, const char *dir, struct fg_err *err)
{
	return model ? fg_url_model_tree(url, endpoint, ref, rev, dir, err)
		     : fg_url_bucket_tree(url, endpoint, ref, dir, err);
}

/* A server that ignores recursive=true answers a folder's direct entries
 * only: its sub-folders come back as "directory" entries with nothing below
 * them. Each such folder below prefix is listed in turn (and so on down), so
 * the files in it are not silently left out. A bucket or a git tree has no
 * empty folders, so against a server that does recurse this lists nothing. */
static int list_below(struct fg_hub_list *out, struct fg_http *h, const char *endpoint,
		      const struct fg_ref *ref, int model, const char *rev, const char *prefix, const char *what,
		      struct fg_err *err)
{
	struct fg_buf url = FG_BUF_INIT;
	const char **sorted = NULL;
	char **listed = NULL;
	size_t i, k, pl = prefix ? strlen(prefix) : 0, n_listed = 0, n_sorted = (size_t)-1;
	int rc = 0;

	for (i = 0; !rc && i < out->n_dirs; i++) {
		const char *d = out->dirs[i];
		int seen = 0;

		if (pl && !(!strncmp(d, prefix, pl) && d[pl] == '/'))
			continue; /* the prefix itself, or a sibling sharing its first characters */
		if (n_sorted != out->n) { /* files came in since: sort their paths again */
			const char **ns = realloc(sorted, (out->n ? out->n : 1) * sizeof(*ns));

			if (!ns) {
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
				break;
			}
			sorted = ns;
			for (k = 0; k < out->n; k++)
				sorted[k] = out->files[k].path;
			qsort(sorted, out->n, sizeof(*sorted), by_str);
			n_sorted = out->n;
		}
		if (has_file_below(sorted, n_sorted, d))
			continue;
		for (k = 0; k < n_listed && !seen; k++)
			seen = !strcmp(listed[k], d);
		if (seen)
			continue;
		if (n_listed >= FG_HUB_MAX_PAGES) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: more than %d folders to list one by one",
					what, FG_HUB_MAX_PAGES);
			break;
		}
		{
			char **nl = realloc(listed, (n_listed + 1) * sizeof(*nl));

			if (!nl || !(nl[n_listed] = strdup(d))) {
				if (nl)
					listed = nl;
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
				break;
			}
			listed = nl;
			n_listed++;
		}
		fg_buf_reset(&url);
		rc = tree_url(&url, endpoint, ref, model, rev, d, err);
		if (!rc)
			rc = list_pages(out, h, url.data, model, what, err);
	}
	for (k = 0; k < n_listed; k++)
		free(listed[k]);
	free(listed);
	free(sorted);
	fg_buf_release(&url);
	return rc;
}

/* A reference whose listing was 404 or empty may name one file: a HEAD of
 * it (a bucket's, or a model repo's at rev) gives its size and identity.
 * As huggingface_hub does, the HEAD stops at a hop to another origin (the
 * CDN): the Hub's own answer carries what names the content (X-Xet-Hash for
 * a bucket file; X-Linked-Etag, a repo file's LFS sha256 or git blob oid) and
 * X-Linked-Size, which a CDN's answer would not. Only when the Hub's answer
 * gives no size is the redirect followed for it (and its ETag taken only when
 * the Hub named nothing). Then out holds that one file and 0 is returned;
 * otherwise rc, the listing's answer, stands. */
static int one_file(struct fg_hub_list *out, struct fg_http *h, const char *endpoint, const struct fg_ref *ref,
		    const char *rev, const char *what, int rc, struct fg_err *err)
{
	struct fg_buf url = FG_BUF_INIT;
	struct fg_hub_head hd, far;
	struct fg_err e2;
	int r2, model = ref->kind == FG_REF_MODEL;
	const char *id;

	r2 = model ? fg_url_model_resolve(&url, endpoint, ref, rev, ref->path, &e2)
		   : fg_url_bucket_resolve(&url, endpoint, ref, ref->path, &e2);
	memset(&hd, 0, sizeof(hd));
	memset(&far, 0, sizeof(far));
	if (!r2)
		r2 = fg_hub_head(&hd, h, url.data, 0, what, &e2);
	if (!r2 && hd.status >= 300 && hd.status < 400 && !hd.has_size &&
	    !fg_hub_head(&far, h, url.data, 1, what, &e2) && far.status >= 200 && far.status < 300 &&
	    far.has_size) {
		hd.status = far.status;
		hd.size = far.size;
		hd.has_size = 1;
	}
	id = model ? hd.etag : (hd.xet_hash ? hd.xet_hash : hd.etag);
	if (!id && hd.status >= 300)
		id = model ? far.etag : (far.xet_hash ? far.xet_hash : far.etag);
	if (!r2 && hd.status >= 200 && hd.status < 400 && hd.has_size) {
		struct fg_hub_file *f;

		fg_hub_list_release(out);
		if (!(out->files = calloc(1, sizeof(*out->files)))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		} else {
			f = &out->files[0];
			out->n = out->cap = 1;
			f->path = strdup(ref->path);
			f->size = hd.size;
			if (!model)
				f->xet_hash = dup_or_null(id);
			else if (id && fg_sha256_hex_valid(id))
				f->lfs_sha256 = dup_or_null(id);
			else
				f->oid = dup_or_null(id);
			rc = f->path ? 0 : fg_err_set(err, FG_ENOMEM, "out of memory");
		}
	}
	fg_hub_head_release(&hd);
	fg_hub_head_release(&far);
	fg_buf_release(&url);
	return rc;
}

/* Lists ref's path (everything below it, or the one file it names): a
 * bucket's, or a model repo's at rev. */
static int list_tree(struct fg_hub_list *out, struct fg_http *h, const char *endpoint,
		     const struct fg_ref *ref, int model, const char *rev, struct fg_err *err)
{
	struct fg_buf url = FG_BUF_INIT, what = FG_BUF_INIT;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = tree_url(&url, endpoint, ref, model, rev, ref->path, err);
	if (!rc)
		rc = fg_buf_printf(&what, err, "list %s", ref->text);
	if (!rc)
		rc = list_pages(out, h, url.data, model, what.data, err);
	if (!rc)
		rc = list_below(out, h, endpoint, ref, model, rev, ref->path, what.data, err);
	if ((rc == FG_ENOTFOUND || (!rc && out->n == 0)) && ref->path && *ref->path)
		rc = one_file(out, h, endpoint, ref, rev, what.data, rc, err);
	if (!rc)
		rc = fg_hub_list_finish(out, ref->path, what.data, err);
	if (rc)
		fg_hub_list_release(out);
	fg_buf_release(&url);
	fg_buf_release(&what);
	return rc;
}

int fg_hub_bucket_tree(struct fg_hub_list *out, struct fg_http *h, const char *endpoint,
		       const struct fg_ref *ref, struct fg_err *err)
{
	return list_tree(out, h, endpoint, ref, 0, NULL, err);
}

int fg_hub_model_tree(struct fg_hub_list *out, struct fg_http *h, const char *endpoint,
		      const struct fg_ref *ref, const char *rev, struct fg_err *err)
{
	return list_tree(out, h, endpoint, ref, 1, rev, err);
}

void fg_hub_head_release(struct fg_hub_head *hd)
{
	if (!hd)
		return;
	free(hd->commit);
	free(hd->etag);
	free(hd->xet_hash);
	free(hd->location);
	memset(hd, 0, sizeof(*hd));
}

static char *header_dup(const struct fg_http_resp *r, const char *name, struct fg_buf *tmp)
{
	const char *s;
	size_t n;

	if (fg_http_resp_header(r, name, tmp) || !tmp->len)
		return NULL;
	s = tmp->data;
	n = tmp->len;
	if (n >= 2 && s[0] == 'W' && s[1] == '/') {
		s += 2;
		n -= 2;
	}
	if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
		s++;
		n -= 2;
	}
	return strndup(s, n);
}

/* 1 when a redirect's Location stays on url's origin (a relative reference,
 * or an absolute URL of the same scheme://host:port); *next gets it resolved. */
static int same_origin_hop(struct fg_buf *next, const char *url, const char *loc)
{
	struct fg_buf a = FG_BUF_INIT, b = FG_BUF_INIT;
	int same;

	if (resolve_url(next, url, loc, strlen(loc)))
		return 0;
	same = !fg_url_origin(&a, url, NULL) && !fg_url_origin(&b, next->data, NULL) &&
	       !strcmp(a.data, b.data);
	fg_buf_release(&a);
	fg_buf_release(&b);
	return same;
}

int fg_hub_head(struct fg_hub_head *out, struct fg_http *h, const char *url, int follow,
		const char *what, struct fg_err *err)
{
	struct fg_http_resp resp;
	struct fg_buf tmp = FG_BUF_INIT, cur = FG_BUF_INIT;
	int rc, hops = 0;

	memset(out, 0, sizeof(*out));
	fg_http_resp_init(&resp);
	rc = fg_buf_puts(&cur, url, err);
	/* Without follow, redirects on the Hub's own origin are still followed
	 * (as huggingface_hub does): a renamed repo answers a relative 307 to its
	 * new name, and the X-Repo-Commit wanted is on the answer after it. A hop
	 * to another origin (the CDN) is where it stops. */
	while (!rc) {
		rc = fg_http_head(h, &resp, cur.data, follow, what, err);
		if (rc || follow || resp.status < 300 || resp.status >= 400 ||
		    fg_http_resp_header(&resp, "Location", &tmp) || !tmp.len ||
		    !same_origin_hop(&tmp, cur.data, tmp.data))
			break;
		if (++hops > 10) {
			rc = fg_err_set(err, FG_ENET, "%s: more than 10 redirects (last to %s)", what,
					tmp.data);
			break;
		}
		fg_buf_reset(&cur);
		rc = fg_buf_puts(&cur, tmp.data, err);
	}
	fg_buf_release(&cur);
	if (!rc) {
		out->status = resp.status;
		out->commit = header_dup(&resp, "X-Repo-Commit", &tmp);
		out->etag = header_dup(&resp, "X-Linked-Etag", &tmp);
		if (!out->etag)
			out->etag = header_dup(&resp, "ETag", &tmp);
		out->xet_hash = header_dup(&resp, "X-Xet-Hash", &tmp);
		out->location = header_dup(&resp, "Location", &tmp);
		if ((!fg_http_resp_header(&resp, "X-Linked-Size", &tmp) && tmp.len &&
		     !fg_parse_u64(tmp.data, &out->size)) ||
		    (resp.status < 300 && !fg_http_resp_header(&resp, "Content-Length", &tmp) &&
		     tmp.len && !fg_parse_u64(tmp.data, &out->size)))
			out->has_size = 1;
	}
	fg_http_resp_release(&resp);
	fg_buf_release(&tmp);
	return rc;
}
