/* pull.c - resolve, fetch, lock, check pins, materialize (see pull.h). */
#include "pull.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "gitdep.h"
#include "http.h"
#include "hub.h"
#include "json.h"
#include "workq.h"

/* One file to have: where it comes from and what the lock will say. */
struct want {
	size_t comp;            /* index into the manifest's components (a dependency's: into its deps) */
	char *rel;              /* path relative to the component source */
	char *url, *what, *identity;
	char *resume_key; /* "content:<identity>" when the remote names the content */
	unsigned long long size;
	char expect[FG_SHA256_HEX_LEN + 1]; /* "" when unknown */
	struct fg_lock_remote remote;
	int was_present;
	int plain;              /* a plain URL (component or dependency): probed, no listing */
	int no_auth;            /* never the token (dependencies; a plain URL component
				 * gets it on the Hub's own origin, as hf:// refs do) */
	int no_ranges;          /* plain URLs: ranges unless refused */
	int below;              /* a file below the source path, not the file it names */
	int reused;             /* taken from disk (huggingface_hub's cache, the --into place) */
	char *local_path;       /* file:// components: read from here, not fetched */
	int from_cache;         /* local_path is a blob of huggingface_hub's cache (--offline) */
};

struct plan {
	struct want *w;
	size_t n, cap;
};

static void plan_release(struct plan *p)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		free(p->w[i].rel);
		free(p->w[i].url);
		free(p->w[i].what);
		free(p->w[i].identity);
		free(p->w[i].resume_key);
		free(p->w[i].local_path);
		fg_lock_remote_clear(&p->w[i].remote);
	}
	free(p->w);
	memset(p, 0, sizeof(*p));
}

static char *sdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static struct want *plan_add(struct plan *p, struct fg_err *err)
{
	if (fg_grow(&p->w, &p->cap, p->n, sizeof(*p->w))) {
		fg_err_set(err, FG_ENOMEM, "out of memory");
		return NULL;
	}
	memset(&p->w[p->n], 0, sizeof(p->w[p->n]));
	return &p->w[p->n++];
}

static int set_identity(struct want *w)
{
	struct fg_buf b = FG_BUF_INIT;
	int rc = fg_buf_printf(&b, NULL, "size=%llu xet=%s commit=%s oid=%s etag=%s", w->size,
			       w->remote.xet_hash ? w->remote.xet_hash : "",
			       w->remote.commit ? w->remote.commit : "", w->remote.oid ? w->remote.oid : "",
			       w->remote.etag ? w->remote.etag : "");

	/* plain URLs: the URL and Last-Modified belong to the identity too */
	if (!rc && (w->remote.url || w->remote.last_modified))
		rc = fg_buf_printf(&b, NULL, " url=%s lm=%s", w->remote.url ? w->remote.url : "",
				   w->remote.last_modified ? w->remote.last_modified : "");

	if (!rc)
		w->identity = fg_buf_detach(&b, NULL);
	fg_buf_release(&b);
	if (rc || !w->identity)
		return FG_ENOMEM;
	/* a weak ETag ("W/...") promises no byte-for-byte identity */
	if (w->remote.xet_hash || w->remote.oid ||
	    (w->remote.etag && strncmp(w->remote.etag, "W/", 2))) {
		rc = fg_buf_printf(&b, NULL, "content:%s", w->identity);
		if (!rc)
			w->resume_key = fg_buf_detach(&b, NULL);
		fg_buf_release(&b);
		if (rc || !w->resume_key)
			return FG_ENOMEM;
	}
	return 0;
}

/* Adds the plan's entry for file rel of component key (size bytes, fetched
 * from the URL in url, which it takes over); the caller fills in what its
 * source said of the file, then calls set_identity. */
static struct want *plan_entry(struct plan *p, size_t ci, const char *key, const char *rel,
			       unsigned long long size, struct fg_buf *url, struct fg_err *err)
{
	struct fg_buf what = FG_BUF_INIT;
	struct want *w = NULL;

	if (!fg_buf_printf(&what, err, "%s/%s", key, rel) && (w = plan_add(p, err))) {
		w->comp = ci;
		w->size = size;
		w->rel = strdup(rel);
		w->url = fg_buf_detach(url, NULL);
		w->what = fg_buf_detach(&what, NULL);
		if (!w->rel || !w->url || !w->what) {
			fg_err_set(err, FG_ENOMEM, "out of memory");
			w = NULL;
		}
	}
	fg_buf_release(&what);
	return w;
}

/* Lists a bucket component and plans its files. */
static int plan_bucket(struct plan *p, size_t ci, const struct fg_component *mc, struct fg_http *h,
		       const struct fg_hub_env *env, struct fg_err *err)
{
	struct fg_hub_list l;
	struct fg_buf url = FG_BUF_INIT;
	size_t i;
	int rc;

	rc = fg_hub_bucket_tree(&l, h, env->endpoint, mc->ref, err);
	if (rc)
		return fg_err_wrap(err, "%s", mc->key);
	for (i = 0; !rc && i < l.n; i++) {
		const struct fg_hub_file *f = &l.files[i];
		const char *rel = fg_ref_rel(mc->ref, f->path);
		struct want *w;

		if (!rel || !fg_path_is_safe_rel(rel))
			continue;
		fg_buf_reset(&url);
		rc = fg_url_bucket_resolve(&url, env->endpoint, mc->ref, f->path, err);
		if (rc || !(w = plan_entry(p, ci, mc->key, rel, f->size, &url, err))) {
			rc = rc ? rc : FG_ENOMEM;
			break;
		}
		w->remote.xet_hash = sdup(f->xet_hash);
		w->remote.mtime = sdup(f->mtime);
		w->below = !mc->ref->path || strcmp(f->path, mc->ref->path);
		if ((f->xet_hash && !w->remote.xet_hash) || (f->mtime && !w->remote.mtime) || set_identity(w))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	fg_hub_list_release(&l);
	fg_buf_release(&url);
	return rc;
}

/* Lists a model repo component at its revision, pins the commit, plans files. */
static int plan_model(struct plan *p, size_t ci, const struct fg_component *mc, struct fg_http *h,
		      const struct fg_hub_env *env, char **commit_out, struct fg_err *err)
{
	struct fg_hub_list l;
	struct fg_buf url = FG_BUF_INIT;
	char *commit = NULL;
	size_t i;
	int rc;

	rc = fg_hub_model_tree(&l, h, env->endpoint, mc->ref, NULL, err);
	if (rc)
		return fg_err_wrap(err, "%s", mc->key);
	if (l.n) {
		struct fg_hub_head hd;

		rc = fg_url_model_resolve(&url, env->endpoint, mc->ref, NULL, l.files[0].path, err);
		if (!rc)
			rc = fg_hub_head(&hd, h, url.data, 0, mc->key, err);
		if (!rc) {
			commit = hd.commit;
			hd.commit = NULL;
			fg_hub_head_release(&hd);
		}
	}
	if (!rc && !commit)
		commit = strdup(fg_ref_revision(mc->ref));
	if (!rc && commit && strcmp(commit, fg_ref_revision(mc->ref))) {
		/* the branch may have moved between its listing and the HEAD: the
		 * files locked are those of the commit locked (its tree never changes) */
		struct fg_hub_list at;

		rc = fg_hub_model_tree(&at, h, env->endpoint, mc->ref, commit, err);
		if (rc) {
			fg_err_wrap(err, "%s", mc->key);
		} else {
			fg_hub_list_release(&l);
			l = at;
		}
	}
	for (i = 0; !rc && i < l.n; i++) {
		const struct fg_hub_file *f = &l.files[i];
		const char *rel = fg_ref_rel(mc->ref, f->path);
		struct want *w;

		if (!rel || !fg_path_is_safe_rel(rel))
			continue;
		fg_buf_reset(&url);
		rc = fg_url_model_resolve(&url, env->endpoint, mc->ref, commit, f->path, err);
		if (rc || !(w = plan_entry(p, ci, mc->key, rel, f->size, &url, err))) {
			rc = rc ? rc : FG_ENOMEM;
			break;
		}
		w->remote.oid = sdup(f->oid);
		w->remote.commit = sdup(commit);
		w->below = !mc->ref->path || strcmp(f->path, mc->ref->path);
		if (f->lfs_sha256)
			memcpy(w->expect, f->lfs_sha256, FG_SHA256_HEX_LEN + 1);
		if ((f->oid && !w->remote.oid) || (commit && !w->remote.commit) || set_identity(w))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	fg_hub_list_release(&l);
	fg_buf_release(&url);
	if (rc)
		free(commit);
	else
		*commit_out = commit;
	return rc;
}

/* Copies header name of r into *out (NULL when absent or empty). */
static int header_dup(char **out, const struct fg_http_resp *r, const char *name)
{
	struct fg_buf v = FG_BUF_INIT;

	*out = NULL;
	if (!fg_http_resp_header(r, name, &v) && v.len && !(*out = strdup(v.data))) {
		fg_buf_release(&v);
		return FG_ENOMEM;
	}
	fg_buf_release(&v);
	return 0;
}

/* 1 when url's path ends in .html or .htm: an HTML file named as one is a
 * file, whatever its Content-Type says. */
static int names_html(const char *url)
{
	size_t n = strcspn(url, "?#");

	return (n >= 5 && !strncasecmp(url + n - 5, ".html", 5)) || (n >= 4 && !strncasecmp(url + n - 4, ".htm", 4));
}

/* Whether r, a 416 to "Range: bytes=0-0", says the file is empty. RFC 9110
 * 14.1.2: a range is satisfiable when its first byte is below the length,
 * so only an empty file refuses byte 0; a 416 SHOULD carry "Content-Range:
 * bytes * /<length>" (15.5.17), which then must say 0. */
static int empty_416(const struct fg_http_resp *r)
{
	struct fg_buf v = FG_BUF_INIT;
	unsigned long long n = 1;
	int empty;

	if (fg_http_resp_header(r, "Content-Range", &v))
		empty = 1;
	else
		empty = v.len > 8 && !strncasecmp(v.data, "bytes */", 8) && !fg_parse_u64(v.data + 8, &n) &&
			n == 0;
	fg_buf_release(&v);
	return empty;
}

/* HEADs a plain URL (following redirects; the token only on the Hub's own
 * origin, and never for a dependency, w->no_auth): size,
 * ETag, Last-Modified and whether it serves byte ranges. A server that
 * refuses HEAD (405, 501, 403) or answers it without Content-Length is asked for
 * byte 0 alone with a GET instead: a 206 gives the size in its Content-Range
 * total, a 200 (ranges ignored) in its Content-Length, a 416 an empty file. */
static int probe_url(struct want *w, struct fg_http *h, const char *url, int ranges_only,
		     struct fg_err *err)
{
	struct fg_http_resp r;
	struct fg_buf v = FG_BUF_INIT;
	unsigned long long size = 0, s0, e0;
	int rc, ranged = 0, has_total = 0, got = 0, empty = 0;

	fg_http_resp_init(&r);
	rc = fg_http_head_probe(h, &r, url, w->no_auth, w->what, err);
	/* a HEAD refused, or answered without Content-Length (a server streaming
	 * from a backend sends its 200s chunked): byte 0 alone says the size.
	 * A 403 counts as a refusal of HEAD too: a URL presigned for GET (S3
	 * query auth, where a redirect to a CDN often ends) signs the method,
	 * so its HEAD is refused while its GET works; a URL that is truly
	 * forbidden fails the GET as well, with that answer's error. */
	if ((rc && (r.status == 405 || r.status == 501 || r.status == 403)) ||
	    (!rc && (fg_http_resp_header(&r, "Content-Length", &v) || !v.len))) {
		rc = fg_http_probe_get(h, &r, url, w->no_auth, w->what, err);
		got = !rc;
		ranged = got && r.status == 206;
		if (rc && r.status == 416 && empty_416(&r)) {
			/* byte 0 is past the end: the file is empty */
			rc = 0;
			got = 1;
			empty = 1;
		}
	}
	if (!rc && empty) {
		size = 0;
	} else if (!rc && ranged) {
		if (fg_http_resp_header(&r, "Content-Range", &v) || !v.data ||
		    fg_http_content_range(v.data, v.len, &s0, &e0, &size, &has_total) || !has_total)
			rc = fg_err_set(err, FG_EUNSUPPORTED,
					"%s: %s refuses HEAD and its Content-Range gives no size", w->what,
					url);
		else
			w->no_ranges = 0;
	} else if (!rc) {
		if (fg_http_resp_header(&r, "Content-Length", &v) || !v.data ||
		    fg_parse_u64(v.data, &size))
			rc = fg_err_set(err, FG_EUNSUPPORTED,
					"%s: %s gives no Content-Length (its size is needed)", w->what, url);
		else /* a 200 to our Range: ranges are ignored, whatever Accept-Ranges says */
			w->no_ranges = got || fg_http_resp_header(&r, "Accept-Ranges", &v) || !v.data ||
				       !strstr(v.data, "bytes");
	}
	/* a web page where a file was meant: a Hub bucket's or repo's page
	 * (…/buckets/ns/name, …/blob/main/x) or GitHub's blob view, pasted
	 * from a browser; its HTML would be locked as the component (a 416's
	 * Content-Type is its error page's) */
	if (!rc && !empty && !ranges_only && !fg_http_resp_header(&r, "Content-Type", &v) && v.len >= 9 &&
	    !strncasecmp(v.data, "text/html", 9) && !names_html(url))
		rc = fg_err_set(err, FG_EINVAL,
				"%s: %s is a web page (Content-Type text/html), not a file: give the "
				"file's own URL (a Hub file's …/resolve/…, GitHub's raw URL) or a "
				"bucket as hf://buckets/<namespace>/<bucket>[/path]",
				w->what, url);
	if (!rc && !ranges_only) {
		w->size = size;
		fg_lock_remote_clear(&w->remote);
		if (!(w->remote.url = strdup(url)) || header_dup(&w->remote.etag, &r, "ETag") ||
		    header_dup(&w->remote.last_modified, &r, "Last-Modified"))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	fg_buf_release(&v);
	fg_http_resp_release(&r);
	return rc;
}

/* A plain https:// or http:// component: one file, named by the URL. */
static int plan_url(struct plan *p, size_t ci, const struct fg_component *mc, struct fg_http *h,
		    struct fg_err *err)
{
	struct fg_buf name = FG_BUF_INIT, what = FG_BUF_INIT;
	struct want *w = NULL;
	int rc;

	rc = fg_url_file_name(&name, mc->ref->url, err);
	if (rc)
		rc = fg_err_wrap(err, "%s", mc->key);
	if (!rc)
		rc = fg_buf_printf(&what, err, "%s/%s", mc->key, name.data);
	if (!rc && !(w = plan_add(p, err)))
		rc = FG_ENOMEM;
	if (!rc) {
		w->comp = ci;
		w->plain = 1;
		w->rel = fg_buf_detach(&name, NULL);
		w->what = fg_buf_detach(&what, NULL);
		w->url = strdup(mc->ref->url);
		if (!w->rel || !w->what || !w->url)
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!rc)
		rc = probe_url(w, h, mc->ref->url, 0, err);
	if (!rc && set_identity(w))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	fg_buf_release(&name);
	fg_buf_release(&what);
	return rc;
}

static int add_local(struct plan *p, size_t ci, const char *key, const char *path, const char *rel,
		     unsigned long long size, struct fg_err *err)
{
	struct want *w = plan_add(p, err);
	struct fg_buf what = FG_BUF_INIT;

	if (!w)
		return FG_ENOMEM;
	w->comp = ci;
	w->size = size;
	if (fg_buf_printf(&what, err, "%s/%s", key, rel))
		return FG_ENOMEM;
	w->what = fg_buf_detach(&what, NULL);
	w->rel = strdup(rel);
	w->local_path = strdup(path);
	w->url = strdup("file:");
	if (!w->what || !w->rel || !w->local_path || !w->url)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

#define WALK_DEPTH 64

/* What walk_tree does with an entry that is not a folder: path on disk,
 * rel its path inside the component. */
typedef int (*walk_fn)(void *ctx, const char *path, const char *rel, const struct stat *sb, struct fg_err *err);

/* Every entry below dir (rel: dir's path inside the component, "" for its
 * root) handed to visit, folders entered (at most WALK_DEPTH deep); a name
 * that is no safe relative path fails, naming it. */
static int walk_tree(const char *key, const char *dir, const char *rel, int depth, walk_fn visit, void *ctx,
		     struct fg_err *err)
{
	DIR *d;
	struct dirent *de;
	struct fg_buf path = FG_BUF_INIT, sub = FG_BUF_INIT;
	int rc = 0;

	if (depth > WALK_DEPTH)
		return fg_err_set(err, FG_EINVAL, "%s: %s: folders nested deeper than %d", key, dir,
				  WALK_DEPTH);
	d = opendir(dir);
	if (!d)
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "%s: %s: %s", key, dir,
				  strerror(errno));
	while (!rc && (de = readdir(d))) {
		struct stat sb;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		fg_buf_reset(&path);
		fg_buf_reset(&sub);
		rc = fg_path_join(&path, dir, de->d_name, err);
		if (!rc)
			rc = *rel ? fg_path_join(&sub, rel, de->d_name, err) : fg_buf_puts(&sub, de->d_name, err);
		if (rc)
			break;
		if (lstat(path.data, &sb))
			rc = fg_err_set(err, FG_EIO, "%s: %s: %s", key, path.data, strerror(errno));
		else if (!fg_path_is_safe_rel(sub.data))
			rc = fg_err_set(err, FG_EINVAL, "%s: %s: not a usable file name", key, path.data);
		else if (S_ISDIR(sb.st_mode))
			rc = walk_tree(key, path.data, sub.data, depth + 1, visit, ctx, err);
		else
			rc = visit(ctx, path.data, sub.data, &sb, err);
	}
	closedir(d);
	fg_buf_release(&path);
	fg_buf_release(&sub);
	return rc;
}

/* A file:// folder's files (walk_tree): regular files only. */
struct local_walk {
	struct plan *p;
	size_t ci;
	const char *key;
};

static int local_visit(void *ctx, const char *path, const char *rel, const struct stat *sb, struct fg_err *err)
{
	struct local_walk *lw = ctx;

	if (!S_ISREG(sb->st_mode))
		return fg_err_set(err, FG_EINVAL, "%s: %s: %s; file:// takes regular files only", lw->key, path,
				  S_ISLNK(sb->st_mode) ? "a symlink" : "not a regular file");
	return add_local(lw->p, lw->ci, lw->key, path, rel, (unsigned long long)sb->st_size, err);
}

/* A file:// component: one regular file, or every regular file below a folder. */
static int plan_file(struct plan *p, size_t ci, const struct fg_component *mc, struct fg_err *err)
{
	const char *path = mc->ref->path, *base = strrchr(mc->ref->path, '/');
	struct stat sb;

	if (lstat(path, &sb))
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "%s: %s: %s", mc->key,
				  path, strerror(errno));
	if (S_ISDIR(sb.st_mode)) {
		struct local_walk lw = { p, ci, mc->key };

		return walk_tree(mc->key, path, "", 0, local_visit, &lw, err);
	}
	if (!S_ISREG(sb.st_mode))
		return fg_err_set(err, FG_EINVAL, "%s: %s: %s; file:// takes regular files only", mc->key,
				  path, S_ISLNK(sb.st_mode) ? "a symlink" : "not a regular file");
	base = base ? base + 1 : path;
	if (!fg_path_is_safe_rel(base))
		return fg_err_set(err, FG_EINVAL, "%s: %s: not a usable file name", mc->key, path);
	return add_local(p, ci, mc->key, path, base, (unsigned long long)sb.st_size, err);
}

/* 1 when rel, a file of the component, is read back from the lock as the
 * one file the source path itself names: the path's last segment. */
static int names_own_file(const struct fg_ref *ref, const char *rel)
{
	const char *own = ref->path && *ref->path ? fg_ref_rel(ref, ref->path) : NULL;

	return own && !strcmp(own, rel);
}

/* Plans the files of component c of a lock entry as the lock records them
 * (nothing is listed); mc is its manifest component, when the manifest has it. */
static int plan_lock_component(struct plan *p, const struct fg_lock_component *c, const struct fg_component *mc,
			       size_t comp, const struct fg_hub_env *env, struct fg_err *err)
{
	struct fg_buf url = FG_BUF_INIT, full = FG_BUF_INIT;
	size_t i;
	int rc = 0;

	for (i = 0; !rc && i < c->n_files; i++) {
		const struct fg_lock_file *f = &c->files[i];
		struct want *w;

		fg_buf_reset(&url);
		fg_buf_reset(&full);
		if (mc && env && (mc->ref->kind == FG_REF_BUCKET || mc->ref->kind == FG_REF_MODEL)) {
			/* a ref naming one file keeps that file's own path */
			if (!c->folder && c->n_files == 1 && names_own_file(mc->ref, f->path))
				rc = fg_buf_puts(&full, mc->ref->path, err);
			else
				rc = fg_ref_full(&full, mc->ref, f->path, err);
			if (!rc && mc->ref->kind == FG_REF_BUCKET)
				rc = fg_url_bucket_resolve(&url, env->endpoint, mc->ref, full.data, err);
			else if (!rc)
				rc = fg_url_model_resolve(&url, env->endpoint, mc->ref, c->revision, full.data, err);
		} else if (!rc && mc && mc->ref->kind == FG_REF_FILE) {
			struct stat sb;

			/* a folder's files lie below it; a single file is the path itself */
			if (!stat(mc->ref->path, &sb) && S_ISDIR(sb.st_mode))
				rc = fg_path_join(&full, mc->ref->path, f->path, err);
			else
				rc = fg_buf_puts(&full, mc->ref->path, err);
			if (!rc)
				rc = fg_buf_puts(&url, "file:", err);
		} else if (!rc && f->remote.url) {
			rc = fg_buf_puts(&url, f->remote.url, err);
		} else if (!rc) {
			rc = fg_buf_puts(&url, "unknown:", err);
		}
		if (rc || !(w = plan_entry(p, comp, c->key, f->path, f->size, &url, err))) {
			rc = rc ? rc : FG_ENOMEM;
			break;
		}
		w->below = c->folder; /* kept when the entry is written again */
		memcpy(w->expect, f->sha256, sizeof(w->expect));
		w->remote.xet_hash = sdup(f->remote.xet_hash);
		w->remote.commit = sdup(f->remote.commit);
		w->remote.oid = sdup(f->remote.oid);
		w->remote.etag = sdup(f->remote.etag);
		w->remote.url = sdup(f->remote.url);
		w->remote.last_modified = sdup(f->remote.last_modified);
		w->remote.mtime = sdup(f->remote.mtime);
		w->remote.uploaded_at = sdup(f->remote.uploaded_at);
		if (mc && mc->ref->kind == FG_REF_HTTPS)
			w->plain = 1;
		if (mc && mc->ref->kind == FG_REF_FILE && !(w->local_path = strdup(full.data)))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		if (set_identity(w))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	fg_buf_release(&url);
	fg_buf_release(&full);
	return rc;
}

/* Plans the files of an up-to-date lock entry (nothing is listed). */
static int plan_from_lock(struct plan *p, const struct fg_lock_manifest *lm,
			  const struct fg_manifest *m, const struct fg_hub_env *env, struct fg_err *err)
{
	size_t ci;
	int rc = 0;

	for (ci = 0; !rc && ci < lm->n_components; ci++) {
		const struct fg_lock_component *c = lm->components[ci];
		const struct fg_component *mc = fg_manifest_component(m, c->key);

		rc = plan_lock_component(p, c, mc, mc ? (size_t)(mc - m->components) : ci, env, err);
	}
	return rc;
}

static int entry_usable(const struct fg_lock_manifest *lm, const struct fg_manifest *m)
{
	size_t i;

	if (!lm || strcmp(lm->sha256, m->sha256) || lm->n_components != m->n_components)
		return 0;
	for (i = 0; i < m->n_components; i++)
		if (!fg_lock_find_component(lm, m->components[i].key))
			return 0;
	return 1;
}

/* Why an entry is not usable for m, in one line (out empty when it is):
 * the first component the manifest has and the lock lacks (or the other way
 * round), a component whose source changed, or the manifest's bytes. */
static int entry_mismatch(struct fg_buf *out, const struct fg_lock_manifest *lm,
			  const struct fg_manifest *m, const char *key, int *bytes_only, struct fg_err *err)
{
	size_t i;

	*bytes_only = 0;
	if (!lm)
		return fg_buf_printf(out, err, "the lock has no entry for %s", key);
	for (i = 0; i < m->n_components; i++) {
		const struct fg_lock_component *c = fg_lock_find_component(lm, m->components[i].key);

		if (!c)
			return fg_buf_printf(out, err,
					     "%s: component %s (%s) is in the manifest but not in the lock",
					     key, m->components[i].key, m->components[i].source);
		if (strcmp(c->source, m->components[i].source))
			return fg_buf_printf(out, err, "%s: component %s is %s in the manifest, %s in the lock",
					     key, c->key, m->components[i].source, c->source);
	}
	for (i = 0; i < lm->n_components; i++)
		if (!fg_manifest_component(m, lm->components[i]->key))
			return fg_buf_printf(out, err,
					     "%s: component %s is in the lock but no longer in the manifest",
					     key, lm->components[i]->key);
	if (strcmp(lm->sha256, m->sha256)) {
		*bytes_only = 1;
		return fg_buf_printf(out, err, "%s: the manifest changed since the lock (sha256 %.12s..., lock has %.12s...)",
				     key, m->sha256, lm->sha256);
	}
	return 0;
}

/* Ends a --locked error about what changed since the lock: it names the
 * first difference; lock --check lists them all. Returns err's code. */
static int check_hint(struct fg_err *err)
{
	size_t l = strlen(err->msg);

	snprintf(err->msg + l, sizeof(err->msg) - l, " ('fgpack lock --check' lists every difference)");
	return err->code;
}

/* Hashes a file:// file into the store (regular files only, hashed while copied). */
static int import_local(struct fg_fetch_item *it, struct want *w, struct fg_store *st,
			struct fg_fetch_stats *fs, struct fg_err *err)
{
	unsigned long long size = 0;
	int present = 0, rc;

	if (it->expect_sha256 && fg_store_has(st, it->expect_sha256)) {
		memcpy(it->sha256, it->expect_sha256, sizeof(it->sha256));
		it->present = 1;
		fs->files_present++;
		fs->bytes_present += w->size;
		return 0;
	}
	rc = fg_store_import_ex(st, w->local_path, it->expect_sha256, FG_STORE_IMPORT_REGULAR,
				it->sha256, &size, &present, err);
	if (rc == FG_EHASH && w->from_cache)
		return fg_err_wrap(err, "%s: %s in huggingface_hub's cache does not hash to its name", it->what,
				   w->local_path);
	if (rc == FG_EHASH)
		return fg_err_wrap(err, "%s: the local file changed since the lock", it->what);
	if (rc)
		return fg_err_wrap(err, "%s", it->what);
	it->present = present;
	w->size = size; /* what was hashed, should the file have changed since the walk */
	if (w->from_cache) {
		fs->files_reused++;
		fs->bytes_reused += size;
	} else {
		fs->files_fetched++;
	}
	return 0;
}

/* huggingface_hub's cache folder into root (HF_HUB_CACHE, else
 * HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub); root is
 * left empty with FGPACK_NO_HF_CACHE=1 or where none can be named. */
static int hf_cache_root(struct fg_buf *root)
{
	const char *cur = getenv("HF_HUB_CACHE"), *legacy = getenv("HUGGINGFACE_HUB_CACHE");
	const char *off = getenv("FGPACK_NO_HF_CACHE");

	if (off && *off && strcmp(off, "0"))
		return 0;
	if ((!cur || !*cur) && legacy && *legacy)
		return fg_buf_puts(root, legacy, NULL);
	return fg_hf_home_path(root, "HF_HUB_CACHE", "hub", NULL);
}

/* huggingface_hub's cache (hf_cache_root): its model repos' folders,
 * models--<ns>--<repo>, each holding blobs/<etag>, where an LFS file's etag
 * is its sha256. None with FGPACK_NO_HF_CACHE=1. The caller frees each and
 * the array. */
static char **hf_cache_repos(size_t *n)
{
	struct fg_buf root = FG_BUF_INIT, sub = FG_BUF_INIT;
	char **out = NULL;
	size_t cap = 0;
	struct dirent *de;
	DIR *d = NULL;

	*n = 0;
	if (!hf_cache_root(&root) && root.len)
		d = opendir(root.data);
	while (d && (de = readdir(d))) {
		char **grown;

		if (strncmp(de->d_name, "models--", 8))
			continue;
		fg_buf_reset(&sub);
		if (fg_buf_printf(&sub, NULL, "%s/%s", root.data, de->d_name))
			break;
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			if (!(grown = realloc(out, cap * sizeof(*out))))
				break;
			out = grown;
		}
		if (!(out[*n] = fg_buf_detach(&sub, NULL)))
			break;
		(*n)++;
	}
	if (d)
		closedir(d);
	fg_buf_release(&root);
	fg_buf_release(&sub);
	return out;
}

/* A file on disk that may already hold the bytes of item it (its size, then
 * the sha256 to expect, checked while it is copied into the store): 1 when
 * it did (counted in *files, *bytes), 0 when it is not that file (nothing
 * is kept then). */
static int take_known(struct fg_fetch_item *it, struct want *w, struct fg_store *st, const char *path,
		      size_t *files, unsigned long long *bytes)
{
	struct stat sb;
	unsigned long long size = 0;
	int present = 0;

	if (lstat(path, &sb) || !S_ISREG(sb.st_mode) || (unsigned long long)sb.st_size != w->size ||
	    fg_store_import_ex(st, path, it->expect_sha256, FG_STORE_IMPORT_REGULAR, it->sha256, &size, &present,
			       NULL))
		return 0;
	it->present = present;
	w->reused = 1;
	(*files)++;
	*bytes += size;
	return 1;
}

/* A git blob id (40 hex) or a sha256 (64 hex): a cache blob's name. */
static int hex_id(const char *s)
{
	size_t n = s ? strlen(s) : 0, i;

	for (i = 0; i < n; i++)
		if (fg_hex_value(s[i]) < 0)
			return 0;
	return n == 40 || n == 64;
}

/* A file whose sha256 is known, found in huggingface_hub's cache under that
 * name (blobs/<sha256>) with its size: copied into the store, hashed on the
 * way (a blob that does not hash to its name is left out, and the file
 * fetched). 1 when it is in the store now. */
static int reuse_hf_cache(struct fg_fetch_item *it, struct want *w, struct fg_store *st, char *const *repos,
			  size_t n, struct fg_fetch_stats *fs)
{
	struct fg_buf p = FG_BUF_INIT;
	int got = 0;
	size_t i;

	for (i = 0; i < n && !got; i++) {
		int k;

		/* an LFS file's blob is named by its sha256; a small git file's by
		 * its git blob id, the oid the lock keeps (the sha256 to expect
		 * still checks the bytes) */
		for (k = 0; k < 2 && !got; k++) {
			const char *name = k ? w->remote.oid : it->expect_sha256;

			fg_buf_reset(&p);
			if (hex_id(name) && !fg_buf_printf(&p, NULL, "%s/blobs/%s", repos[i], name))
				got = take_known(it, w, st, p.data, &fs->files_reused, &fs->bytes_reused);
		}
	}
	fg_buf_release(&p);
	return got;
}

/* A model component read from huggingface_hub's cache (plan_model_cached). */
struct cache_walk {
	struct plan *p;
	size_t ci;
	const struct fg_component *mc;
	const struct fg_hub_env *env;
	const char *commit;
	const char *blobs; /* the real path of the repo's blobs/ folder */
	size_t skipped;    /* links to a blob that is not there (a download never finished) */
};

/* One file of the snapshot: path on disk, full its path in the repo. A
 * link must lead into the repo's blobs/ (as huggingface_hub makes them);
 * a plain file (a cache made without symlinks) is read as it is. */
static int cache_add(struct cache_walk *cw, const char *path, const char *full, struct fg_err *err)
{
	const char *rel = fg_ref_rel(cw->mc->ref, full), *name = "";
	struct fg_buf url = FG_BUF_INIT;
	char real[PATH_MAX];
	struct stat sb, lb;
	size_t nb = strlen(cw->blobs);
	struct want *w;
	int rc;

	if (!rel || !fg_path_is_safe_rel(rel) || lstat(path, &lb))
		return 0;
	if (!realpath(path, real) || stat(real, &sb) || !S_ISREG(sb.st_mode)) {
		cw->skipped++;
		return 0;
	}
	if (S_ISLNK(lb.st_mode)) {
		if (strncmp(real, cw->blobs, nb) || real[nb] != '/' || strchr(real + nb + 1, '/'))
			return fg_err_set(err, FG_EINVAL, "%s: %s: a link out of the cache's blobs/ folder (%s)",
					  cw->mc->key, path, real);
		name = real + nb + 1;
	} else if (!S_ISREG(lb.st_mode)) {
		return 0;
	}
	rc = fg_url_model_resolve(&url, cw->env->endpoint, cw->mc->ref, cw->commit, full, err);
	if (!rc && !(w = plan_entry(cw->p, cw->ci, cw->mc->key, rel, (unsigned long long)sb.st_size, &url, err)))
		rc = FG_ENOMEM;
	if (!rc) {
		int git = fg_hex_lower_valid(name, 40);

		w->local_path = strdup(real);
		w->from_cache = 1;
		w->remote.commit = sdup(cw->commit);
		w->below = !cw->mc->ref->path || strcmp(full, cw->mc->ref->path);
		/* an LFS file's blob is named by its sha256 (checked as it is
		 * read), a small file's by its git blob id (the oid the Hub lists) */
		if (fg_sha256_hex_valid(name))
			memcpy(w->expect, name, FG_SHA256_HEX_LEN + 1);
		else if (git)
			w->remote.oid = strdup(name);
		if (!w->local_path || !w->remote.commit || (git && !w->remote.oid) || set_identity(w))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	fg_buf_release(&url);
	return rc;
}

static int cache_visit(void *ctx, const char *path, const char *full, const struct stat *sb, struct fg_err *err)
{
	(void)sb;
	return cache_add(ctx, path, full, err);
}

/* A model component resolved without a socket from huggingface_hub's
 * cache, as huggingface_hub does offline: models--<ns>--<repo>/refs/<rev>
 * names the commit (a full commit id names itself), and
 * snapshots/<commit>/ holds the files the cache has of it, each a link to
 * blobs/<etag>. Every such file below the component's path is planned,
 * read from its blob (hashed into the store). *commit_out gets the commit,
 * *skipped the links whose blob is missing. */
static int plan_model_cached(struct plan *p, size_t ci, const struct fg_component *mc,
			     const struct fg_hub_env *env, char **commit_out, size_t *skipped, struct fg_err *err)
{
	struct fg_buf root = FG_BUF_INIT, repo = FG_BUF_INIT, b = FG_BUF_INIT;
	const char *rev = fg_ref_revision(mc->ref);
	char commit[64] = "", blobs[PATH_MAX];
	struct cache_walk cw = { p, ci, mc, env, commit, blobs, 0 };
	struct stat sb;
	size_t before = p->n;
	int rc = hf_cache_root(&root);

	if (!rc && !root.len)
		rc = fg_err_set(err, FG_EOFFLINE, "offline: %s (%s) is not in the lock and no huggingface_hub "
				"cache is in use (run 'fgpack lock' online first)", mc->key, mc->source);
	if (!rc)
		rc = fg_buf_printf(&repo, err, "%s/models--%s--%s", root.data, mc->ref->ns, mc->ref->name);
	if (!rc && stat(repo.data, &sb))
		rc = fg_err_set(err, FG_EOFFLINE, "offline: %s (%s) is not in the lock nor in huggingface_hub's "
				"cache (%s) (run 'fgpack lock' online first)", mc->key, mc->source, repo.data);
	if (!rc && fg_hex_lower_valid(rev, 40)) {
		memcpy(commit, rev, 41);
	} else if (!rc) {
		FILE *f;
		size_t n = 0;

		rc = fg_buf_printf(&b, err, "%s/refs/%s", repo.data, rev);
		if (!rc && (f = fopen(b.data, "r"))) {
			n = fread(commit, 1, sizeof(commit) - 1, f);
			fclose(f);
		}
		while (n && (commit[n - 1] == '\n' || commit[n - 1] == '\r' || commit[n - 1] == ' '))
			n--;
		commit[n] = 0;
		if (!rc && !fg_hex_lower_valid(commit, 40))
			rc = fg_err_set(err, FG_EOFFLINE, "offline: %s: huggingface_hub's cache has no commit for "
					"revision %s of %s/%s (%s) (run 'fgpack lock' online first)", mc->key, rev,
					mc->ref->ns, mc->ref->name, b.data);
	}
	fg_buf_reset(&b);
	if (!rc)
		rc = fg_buf_printf(&b, err, "%s/blobs", repo.data);
	if (!rc && !realpath(b.data, blobs))
		snprintf(blobs, sizeof(blobs), "%s", b.data); /* no blobs/: links can only be refused */
	fg_buf_reset(&b);
	if (!rc)
		rc = fg_buf_printf(&b, err, "%s/snapshots/%s", repo.data, commit);
	if (!rc && (stat(b.data, &sb) || !S_ISDIR(sb.st_mode)))
		rc = fg_err_set(err, FG_EOFFLINE, "offline: %s: huggingface_hub's cache has no snapshot of %s/%s "
				"at %s (run 'fgpack lock' online first)", mc->key, mc->ref->ns, mc->ref->name, commit);
	if (!rc && mc->ref->path && *mc->ref->path) {
		struct fg_buf at = FG_BUF_INIT;

		rc = fg_path_join(&at, b.data, mc->ref->path, err);
		if (!rc && !stat(at.data, &sb) && S_ISDIR(sb.st_mode))
			rc = walk_tree(mc->key, at.data, mc->ref->path, 0, cache_visit, &cw, err);
		else if (!rc)
			rc = cache_add(&cw, at.data, mc->ref->path, err);
		fg_buf_release(&at);
	} else if (!rc) {
		rc = walk_tree(mc->key, b.data, "", 0, cache_visit, &cw, err);
	}
	if (!rc && p->n == before)
		rc = fg_err_set(err, FG_EOFFLINE, "offline: %s: huggingface_hub's snapshot of %s/%s at %s holds no "
				"files%s%s (run 'fgpack lock' online first)", mc->key, mc->ref->ns, mc->ref->name,
				commit, mc->ref->path && *mc->ref->path ? " under " : "",
				mc->ref->path ? mc->ref->path : "");
	if (!rc && !(*commit_out = strdup(commit)))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	*skipped += cw.skipped;
	fg_buf_release(&root);
	fg_buf_release(&repo);
	fg_buf_release(&b);
	return rc;
}

/* Lists component mc on the remote (or disk, file://) and plans its files;
 * a model repo's commit into *commit. */
static int plan_listed(struct plan *p, size_t ci, const struct fg_component *mc, struct fg_http *h,
		       const struct fg_hub_env *env, char **commit, struct fg_err *err)
{
	switch (mc->ref->kind) {
	case FG_REF_BUCKET:
		return plan_bucket(p, ci, mc, h, env, err);
	case FG_REF_MODEL:
		return plan_model(p, ci, mc, h, env, commit, err);
	case FG_REF_HTTPS:
		return plan_url(p, ci, mc, h, err);
	case FG_REF_FILE:
		return plan_file(p, ci, mc, err);
	default:
		return fg_err_set(err, FG_EUNSUPPORTED, "%s: %s references are not supported", mc->key,
				  fg_ref_kind_name(mc->ref->kind));
	}
}

/* A component that planned no file fails: a bucket's paths are prefixes, so
 * a mistyped folder lists as empty ([]), not 404, and would lock and pull
 * "fine", leaving the serve script an empty folder. Its wants are the last
 * ones of p when it has any. */
static int plan_nonempty(const struct plan *p, size_t ci, const struct fg_component *mc, struct fg_err *err)
{
	if (p->n && p->w[p->n - 1].comp == ci)
		return 0;
	return fg_err_set(err, FG_ENOTFOUND, "%s: %s holds no files (is the path right?)", mc->key, mc->source);
}

/* --offline where the lock has no usable entry for the manifest: every
 * component resolved without a socket. A file:// one is read from disk;
 * another whose source the old entry still holds keeps the files it records
 * (the manifest changed elsewhere); a model repo comes from huggingface_hub's
 * cache (plan_model_cached, counted in *n_cache). A bucket or URL the lock
 * does not hold cannot be listed offline: one line naming it. */
static int plan_offline(struct plan *p, const struct fg_lock_manifest *old, const struct fg_manifest *m,
			const char *key, const struct fg_hub_env *env, char **commits, size_t *n_cache,
			size_t *skipped, struct fg_err *err)
{
	size_t ci;
	int rc = 0;

	for (ci = 0; !rc && ci < m->n_components; ci++) {
		const struct fg_component *mc = &m->components[ci];
		const struct fg_lock_component *c = old ? fg_lock_find_component(old, mc->key) : NULL;

		if (mc->ref->kind == FG_REF_FILE) {
			rc = plan_file(p, ci, mc, err);
		} else if (c && !strcmp(c->source, mc->source)) {
			rc = plan_lock_component(p, c, mc, ci, env, err);
			if (!rc && c->revision && !(commits[ci] = strdup(c->revision)))
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		} else if (mc->ref->kind == FG_REF_MODEL) {
			rc = plan_model_cached(p, ci, mc, env, &commits[ci], skipped, err);
			if (!rc)
				(*n_cache)++;
		} else {
			/* why the lock does not hold it, as entry_mismatch words it */
			const char *kind = mc->ref->kind == FG_REF_BUCKET ? "a bucket" : "a URL";

			if (!old)
				rc = fg_err_set(err, FG_EOFFLINE, "offline: the lock has no entry for %s, and %s (%s) is "
						"%s, which cannot be listed offline (run 'fgpack lock' online first)",
						key, mc->key, mc->source, kind);
			else if (!c)
				rc = fg_err_set(err, FG_EOFFLINE, "offline: %s: component %s (%s) is in the manifest but "
						"not in the lock, and %s cannot be listed offline (run 'fgpack lock' "
						"online first)", key, mc->key, mc->source, kind);
			else
				rc = fg_err_set(err, FG_EOFFLINE, "offline: %s: component %s is %s in the manifest, %s in "
						"the lock, and %s cannot be listed offline (run 'fgpack lock' online "
						"first)", key, mc->key, mc->source, c->source, kind);
		}
		if (!rc)
			rc = plan_nonempty(p, ci, mc, err);
	}
	return rc;
}

/* Every component of m listed through h (plan_listed), commits[ci] getting
 * a model repo's commit; an empty one fails unless locked (--locked says it
 * its own way: N files in the lock, 0 on the remote). */
static int plan_online(struct plan *p, const struct fg_manifest *m, struct fg_http *h, const struct fg_hub_env *env,
		       char **commits, int locked, struct fg_err *err)
{
	size_t ci;
	int rc = 0;

	for (ci = 0; !rc && ci < m->n_components; ci++) {
		rc = plan_listed(p, ci, &m->components[ci], h, env, &commits[ci], err);
		if (!rc && !locked)
			rc = plan_nonempty(p, ci, &m->components[ci], err);
	}
	return rc;
}

static int target_dir(struct fg_buf *out, const char *into, const char *key, const char *target,
		      struct fg_err *err);

/* pull --into: the file already where it is to be placed (an earlier
 * `hf download --local-dir`, or a copy) with its size and the sha256 to
 * expect: copied into the store, hashed on the way, instead of fetched. */
static int reuse_target(struct fg_fetch_item *it, struct want *w, struct fg_store *st, const char *into,
			const struct fg_component *mc, struct fg_fetch_stats *fs)
{
	struct fg_buf dir = FG_BUF_INIT, path = FG_BUF_INIT;
	int got = 0;

	if (!target_dir(&dir, into, mc->key, mc->target, NULL) && !fg_path_join(&path, dir.data, w->rel, NULL))
		got = take_known(it, w, st, path.data, &fs->files_in_place, &fs->bytes_in_place);
	fg_buf_release(&dir);
	fg_buf_release(&path);
	return got;
}

/* file:// files on a work queue: each copied into the store and hashed on
 * the way by one thread (import_local), as many at once as there are CPUs
 * (at most 8); the first failure in plan order wins (lib/workq.h) */
struct local_job {
	struct fg_fetch_item *items;
	struct plan *p;
	struct fg_store *st;
	const size_t *li;          /* plan indices of the local files */
	struct fg_fetch_stats *fs; /* one per local file, summed afterwards */
};

static int local_one(void *arg, size_t k, int t, struct fg_err *err)
{
	struct local_job *j = arg;
	size_t i = j->li[k];

	(void)t;
	return import_local(&j->items[i], &j->p->w[i], j->st, &j->fs[k], err);
}

static int import_locals(struct fg_fetch_item *items, struct plan *p, struct fg_store *st,
			 const size_t *li, size_t n, struct fg_fetch_stats *sum, struct fg_err *err)
{
	struct local_job j = { items, p, st, li, calloc(n ? n : 1, sizeof(struct fg_fetch_stats)) };
	size_t k;
	int rc;

	if (!j.fs)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_workq_run(n, fg_workq_cpus(8), local_one, NULL, &j, err);
	for (k = 0; k < n; k++) {
		sum->files_fetched += j.fs[k].files_fetched;
		sum->files_present += j.fs[k].files_present;
		sum->bytes_present += j.fs[k].bytes_present;
		sum->files_reused += j.fs[k].files_reused;
		sum->bytes_reused += j.fs[k].bytes_reused;
	}
	free(j.fs);
	return rc;
}

static int fetch_plan(struct fg_pull_report *rep, struct plan *p, struct fg_store *st,
		      struct fg_http *h, const struct fg_pull_opts *o, const struct fg_manifest *m,
		      struct fg_fetch_item **items_out, struct fg_err *err)
{
	struct fg_fetch_item *items = calloc(p->n ? p->n : 1, sizeof(*items));
	struct fg_fetch_item *net = calloc(p->n ? p->n : 1, sizeof(*net));
	size_t *idx = calloc(p->n ? p->n : 1, sizeof(*idx));
	size_t *li = calloc(p->n ? p->n : 1, sizeof(*li));
	struct fg_fetch_stats local;
	struct fg_fetch_opts fo;
	size_t i, nn = 0, nl = 0, nrepos = 0;
	char **repos = NULL;
	int rc = 0, looked = 0;

	*items_out = items;
	memset(&local, 0, sizeof(local));
	memset(&rep->fetch, 0, sizeof(rep->fetch));
	if (!items || !net || !idx || !li) {
		free(net);
		free(idx);
		free(li);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	for (i = 0; i < p->n; i++) {
		items[i].url = p->w[i].url;
		items[i].what = p->w[i].what;
		items[i].size = p->w[i].size;
		items[i].expect_sha256 = p->w[i].expect[0] ? p->w[i].expect : NULL;
		items[i].identity = p->w[i].identity;
		items[i].resume_key = p->w[i].resume_key;
		items[i].no_auth = p->w[i].no_auth;
		items[i].no_ranges = p->w[i].no_ranges;
		p->w[i].was_present = p->w[i].expect[0] && fg_store_has(st, p->w[i].expect);
		if (p->w[i].local_path) {
			li[nl++] = i; /* imported below, several at once */
			continue;
		}
		if (!p->w[i].was_present && items[i].expect_sha256) {
			if (o->into && m && p->w[i].comp < m->n_components &&
			    reuse_target(&items[i], &p->w[i], st, o->into, &m->components[p->w[i].comp], &local))
				continue;
			if (!looked++)
				repos = hf_cache_repos(&nrepos);
			if (nrepos && reuse_hf_cache(&items[i], &p->w[i], st, repos, nrepos, &local))
				continue;
		}
		net[nn] = items[i];
		idx[nn++] = i;
	}
	if (!rc && nl)
		rc = import_locals(items, p, st, li, nl, &local, err);
	if (!rc && nn) {
		memset(&fo, 0, sizeof(fo));
		fo.jobs = o->jobs;
		fo.chunk = o->chunk;
		fo.journal_nosync = o->journal_nosync;
		fo.progress = o->progress;
		fo.progress_ud = o->progress_ud;
		rc = fg_fetch_run(&rep->fetch, st, h, net, nn, &fo, err);
		for (i = 0; i < nn; i++)
			items[idx[i]] = net[i];
	}
	rep->fetch.files_fetched += local.files_fetched;
	rep->fetch.files_present += local.files_present;
	rep->fetch.bytes_present += local.bytes_present;
	rep->fetch.files_reused += local.files_reused;
	rep->fetch.bytes_reused += local.bytes_reused;
	rep->fetch.files_in_place += local.files_in_place;
	rep->fetch.bytes_in_place += local.bytes_in_place;
	for (i = 0; i < nrepos; i++)
		free(repos[i]);
	free(repos);
	free(net);
	free(idx);
	free(li);
	return rc;
}

/* True when a remote identity says the same content as the lock's. */
static int same_remote(const struct fg_lock_remote *a, const struct fg_lock_remote *b)
{
#define SAME(f) ((!a->f && !b->f) || (a->f && b->f && !strcmp(a->f, b->f)))
	return SAME(xet_hash) && SAME(oid) && SAME(commit) && SAME(etag) && SAME(last_modified) &&
	       SAME(url);
#undef SAME
}

/* True when the listing of a file says the same content as its lock record.
 * A model repo's LFS file locked offline from huggingface_hub's cache has no
 * git oid in the lock (the cache does not keep it); the sha256 the listing
 * gives for it says more, and must then equal the lock's. */
static int same_listed(const struct fg_lock_file *f, const struct want *w)
{
	if (!f->remote.oid && w->remote.oid && w->expect[0]) {
		struct fg_lock_remote r = w->remote;

		r.oid = NULL;
		return !strcmp(w->expect, f->sha256) && same_remote(&f->remote, &r);
	}
	return same_remote(&f->remote, &w->remote);
}

/* --locked: the listing (p) must equal the lock entry file for file. */
static int compare_with_lock(const struct plan *p, const struct fg_lock_manifest *lm,
			     const struct fg_manifest *m, struct fg_err *err)
{
	size_t ci, i, seen;

	for (ci = 0; ci < m->n_components; ci++) {
		const struct fg_lock_component *c = fg_lock_find_component(lm, m->components[ci].key);

		seen = 0;
		for (i = 0; i < p->n; i++) {
			const struct want *w = &p->w[i];
			const struct fg_lock_file *f;

			if (w->comp != ci)
				continue;
			seen++;
			f = fg_lock_find_file(c, w->rel);
			if (!f)
				return fg_err_set(err, FG_EMISMATCH,
						  "--locked: %s: %s appeared %s since the lock",
						  c->key, w->rel, w->local_path ? "on disk" : "on the remote");
			if (f->size != w->size)
				return fg_err_set(err, FG_EMISMATCH,
						  "--locked: %s: %s changed size %s (%llu in the lock, %llu now)",
						  c->key, w->rel, w->local_path ? "on disk" : "on the remote",
						  f->size, w->size);
			if (!same_listed(f, w))
				return fg_err_set(err, FG_EMISMATCH,
						  "--locked: %s: %s changed on the remote since the lock (%s)",
						  c->key, w->rel,
						  w->remote.xet_hash ? "xetHash differs" :
						  w->remote.url ? "URL, ETag or Last-Modified differs" :
								  "commit or oid differs");
			if (w->local_path) {
				/* a local file has no remote identity: its bytes are the identity */
				char hex[FG_SHA256_HEX_LEN + 1];
				unsigned long long size;
				int rc = fg_store_hash_file(w->local_path, hex, &size, err);

				if (rc)
					return fg_err_wrap(err, "--locked: %s", w->what);
				if (strcmp(hex, f->sha256))
					return fg_err_set(err, FG_EMISMATCH,
							  "--locked: %s: %s changed on disk since the lock (sha256 %s, lock has %s)",
							  c->key, w->rel, hex, f->sha256);
			}
		}
		if (seen != c->n_files)
			return fg_err_set(err, FG_EMISMATCH,
					  "--locked: %s: %zu file(s) in the lock, %zu on the remote", c->key,
					  c->n_files, seen);
	}
	return 0;
}

/* A file check_unvalidated need not fetch again: one whose server names its
 * content (ETag or Last-Modified, checked by the listing), or one this very
 * run just fetched from the server and hashed against the lock. */
static int unvalidated_skip(const struct want *w, const struct fg_fetch_item *got)
{
	return !w->plain || w->remote.etag || w->remote.last_modified ||
	       (got && got->sha256[0] && !got->present && !w->reused);
}

/* --locked, plain URLs whose server gives neither ETag nor Last-Modified:
 * nothing but the bytes can show a change, so they are fetched again and
 * hashed (unless unvalidated_skip). A changed file's new blob is not kept. */
static int check_unvalidated(struct fg_pull_report *rep, const struct plan *p, const struct fg_fetch_item *got,
			     struct fg_store *st, struct fg_http *h, const struct fg_pull_opts *o, struct fg_err *err)
{
	struct fg_fetch_item *items = calloc(p->n ? p->n : 1, sizeof(*items));
	struct fg_fetch_stats fs;
	struct fg_fetch_opts fo;
	size_t i, n = 0;
	int rc = 0;

	if (!items)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (i = 0; i < p->n; i++) {
		const struct want *w = &p->w[i];

		if (unvalidated_skip(w, got ? &got[i] : NULL))
			continue;
		items[n].url = w->url;
		items[n].what = w->what;
		items[n].size = w->size;
		items[n].identity = w->identity;
		items[n].resume_key = NULL; /* keyed by URL: no content identity to reuse a blob by */
		items[n].no_auth = w->no_auth;
		items[n].no_ranges = w->no_ranges;
		n++;
	}
	if (n) {
		memset(&fo, 0, sizeof(fo));
		fo.jobs = o->jobs;
		fo.chunk = o->chunk;
		fo.journal_nosync = o->journal_nosync;
		rc = fg_fetch_run(&fs, st, h, items, n, &fo, err);
		if (!rc)
			rep->fetch.bytes_net += fs.bytes_net;
	}
	for (i = 0, n = 0; !rc && i < p->n; i++) {
		const struct want *w = &p->w[i];

		if (unvalidated_skip(w, got ? &got[i] : NULL))
			continue;
		if (strcmp(items[n].sha256, w->expect)) {
			struct fg_buf path = FG_BUF_INIT;

			if (!items[n].present && !fg_store_blob_path(&path, st, items[n].sha256, NULL))
				unlink(path.data);
			fg_buf_release(&path);
			rc = fg_err_set(err, FG_EMISMATCH,
					"--locked: %s: %s changed on the remote since the lock (sha256 %s, lock has %s)",
					p->w[i].what, w->url, items[n].sha256, w->expect);
		}
		n++;
	}
	free(items);
	return rc;
}

/* Removes blobs this run added for component ci (pin failure). */
static void drop_new_blobs(const struct plan *p, const struct fg_fetch_item *items, size_t ci,
			   struct fg_store *st)
{
	size_t i;
	struct fg_buf path = FG_BUF_INIT;

	for (i = 0; i < p->n; i++) {
		if (p->w[i].comp != ci || items[i].present || !items[i].sha256[0])
			continue;
		fg_buf_reset(&path);
		if (!fg_store_blob_path(&path, st, items[i].sha256, NULL))
			unlink(path.data);
	}
	fg_buf_release(&path);
}


static int open_http(struct fg_http **h, const struct fg_hub_env *env, const struct fg_pull_opts *o,
		     struct fg_err *err)
{
	struct fg_http_opts ho;

	if (*h)
		return 0;
	if (o->offline || env->offline)
		return fg_err_set(err, FG_EOFFLINE, "offline: would need the network");
	fg_http_opts_default(&ho);
	ho.hub_url = env->endpoint;
	ho.token = env->token;
	if (o->stall_secs > 0)
		ho.stall_secs = o->stall_secs;
	if (o->retry_base_ms)
		ho.retry_base_ms = o->retry_base_ms;
	return fg_http_new(h, &ho, err);
}

/* --deps: fetches the entry's http(s) URL dependencies that the store lacks
 * and records the sha256 of those the lock has none for. */
static int pull_deps(struct fg_pull_report *rep, struct fg_lock_manifest *lm,
		     const struct fg_manifest *m, struct fg_store *st, const struct fg_hub_env *env,
		     const struct fg_pull_opts *o, struct fg_http **h, struct fg_err *err)
{
	struct plan p = { 0 };
	struct fg_pull_report sub;
	struct fg_fetch_item *items = NULL;
	struct fg_buf name = FG_BUF_INIT;
	size_t i, k;
	int rc = 0;

	for (i = 0; !rc && i < lm->n_deps; i++) {
		struct fg_lock_dep *d = &lm->deps[i];
		struct want *w;

		if (strcmp(d->kind, "url") || !d->url ||
		    (strncmp(d->url, "https://", 8) && strncmp(d->url, "http://", 7)))
			continue; /* git+https:// below; other schemes: recorded, not fetched */
		if (d->sha256[0] && fg_store_has(st, d->sha256))
			continue;
		if (!d->sha256[0] && o->locked) {
			rc = fg_err_set(err, FG_EMISMATCH,
					"--locked: dependency %s has no sha256 in the lock (run 'fgpack lock --deps')",
					d->spec);
			break;
		}
		if (!(w = plan_add(&p, err))) {
			rc = FG_ENOMEM;
			break;
		}
		w->comp = i;
		w->plain = 1;
		w->no_auth = 1;
		fg_buf_reset(&name);
		rc = fg_buf_printf(&name, err, "dependency %s", d->spec);
		if (!rc && (!(w->what = strdup(name.data)) || !(w->url = strdup(d->url)) ||
			    !(w->rel = strdup(d->url))))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		if (!rc && d->sha256[0])
			memcpy(w->expect, d->sha256, sizeof(w->expect));
		if (!rc && (o->offline || env->offline))
			rc = fg_err_set(err, FG_EOFFLINE, "offline: dependency %s (sha256 %s) is not in the store",
					d->spec, d->sha256[0] ? d->sha256 : "not locked yet");
		if (!rc)
			rc = open_http(h, env, o, err);
		if (!rc)
			rc = probe_url(w, *h, d->url, 0, err);
		if (!rc && set_identity(w))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	/* git+http(s)://…@<commit>: the system git fetches that commit, its tree
	 * goes into the store as a tar (lib/gitdep.h) */
	for (i = 0; !rc && i < lm->n_deps; i++) {
		struct fg_lock_dep *d = &lm->deps[i];
		struct fg_gitdep_opts go;
		struct fg_gitdep_result gr;
		const char *ca;

		if (strcmp(d->kind, "url") || !d->url || !d->commit ||
		    (strncmp(d->url, "git+https://", 12) && strncmp(d->url, "git+http://", 11)))
			continue;
		if (d->sha256[0] && fg_store_has(st, d->sha256))
			continue;
		fg_buf_reset(&name);
		if ((rc = fg_buf_printf(&name, err, "dependency %s", d->spec)))
			break;
		if (!d->sha256[0] && o->locked) {
			rc = fg_err_set(err, FG_EMISMATCH,
					"--locked: dependency %s has no sha256 in the lock (run 'fgpack lock --deps')",
					d->spec);
			break;
		}
		if (o->offline || env->offline) {
			rc = fg_err_set(err, FG_EOFFLINE, "offline: dependency %s (sha256 %s) is not in the store",
					d->spec, d->sha256[0] ? d->sha256 : "not locked yet");
			break;
		}
		memset(&go, 0, sizeof(go));
		go.what = name.data;
		go.expect_sha256 = d->sha256[0] ? d->sha256 : NULL;
		go.expect_tree = d->tree;
		go.stall_secs = o->stall_secs;
		fg_http_ca_env(&ca, NULL, NULL);
		go.cainfo = ca;
		rc = fg_gitdep_fetch(&gr, st, d->url, &go, err);
		if (rc)
			break;
		if (!gr.was_present)
			rep->fetch.files_fetched++;
		if (!d->sha256[0]) {
			memcpy(d->sha256, gr.sha256, sizeof(d->sha256));
			d->size = gr.size;
			rep->deps_hashed++;
			rep->lock_changed = 1;
		}
		if (!d->tree) {
			if (!(d->tree = strdup(gr.tree)))
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			rep->lock_changed = 1;
		}
	}
	fg_buf_release(&name);
	if (!rc && p.n)
		rc = fetch_plan(&sub, &p, st, *h, o, NULL, &items, err);
	if (!rc && p.n) {
		rep->fetch.bytes_net += sub.fetch.bytes_net;
		rep->fetch.files_fetched += sub.fetch.files_fetched;
	}
	for (k = 0; !rc && k < p.n; k++) {
		struct fg_lock_dep *d = &lm->deps[p.w[k].comp];
		const char *frag = p.w[k].comp < m->n_dependencies ? m->deps[p.w[k].comp].sha256 : NULL;

		if (frag && strcmp(frag, items[k].sha256)) {
			struct fg_buf path = FG_BUF_INIT;

			if (!items[k].present && !fg_store_blob_path(&path, st, items[k].sha256, NULL))
				unlink(path.data);
			fg_buf_release(&path);
			rc = fg_err_set(err, FG_EHASH, "dependency %s: sha256 %s, the URL's #sha256= says %s",
					d->spec, items[k].sha256, frag);
			break;
		}
		if (!d->sha256[0]) {
			memcpy(d->sha256, items[k].sha256, sizeof(d->sha256));
			d->size = p.w[k].size;
			rep->deps_hashed++;
			rep->lock_changed = 1;
		}
	}
	free(items);
	plan_release(&p);
	return rc;
}

int fg_pull(struct fg_pull_report *rep, struct fg_lock *lock, const struct fg_manifest *m,
	    struct fg_store *st, const struct fg_hub_env *env, const struct fg_pull_opts *o,
	    struct fg_err *err)
{
	struct fg_lock_manifest *old = fg_lock_find_manifest(lock, o->key), *lm = NULL;
	struct plan p = { 0 }, listed = { 0 };
	struct fg_fetch_item *items = NULL;
	struct fg_http *h = NULL;
	char **commits = NULL;
	int usable = entry_usable(old, m), offline = o->offline || env->offline, rc = 0;
	size_t i, ci;

	memset(rep, 0, sizeof(*rep));
	if (o->locked && !usable) {
		struct fg_buf why = FG_BUF_INIT;
		int bytes_only;

		rc = entry_mismatch(&why, old, m, o->key, &bytes_only, err);
		if (!rc && offline)
			rc = fg_err_set(err, FG_EOFFLINE, "offline: %s (run 'fgpack lock' online first)",
					why.data);
		else if (!rc && (rc = fg_err_set(err, FG_EMISMATCH, "--locked: %s (run 'fgpack lock')", why.data)) &&
			 bytes_only)
			check_hint(err);
		fg_buf_release(&why);
		return rc;
	}
	/* --locked --offline: the lock is the authority; the remote is not
	 * re-checked (rep->resolved stays 0 and cmd/ says so) */
	/* fgpack lock --offline keeps an up-to-date entry: nothing can be listed */
	if (usable && (!o->refresh || offline) && (!o->locked || offline)) {
		/* fast path: the lock says it all; nothing is planned when every blob is there */
		int all = 1;

		for (ci = 0; all && ci < old->n_components; ci++)
			for (i = 0; all && i < old->components[ci]->n_files; i++)
				all = fg_store_has(st, old->components[ci]->files[i].sha256);
		if (!all)
			rc = plan_from_lock(&p, old, m, env, err);
		for (i = 0; !rc && i < p.n; i++)
			if (!fg_store_has(st, p.w[i].expect))
				break;
		if (!rc && i < p.n && !offline)
			rc = open_http(&h, env, o, err);
		/* a plain URL to fetch again: does its server still serve ranges? */
		for (ci = 0; !rc && h && i < p.n && ci < p.n; ci++)
			if (p.w[ci].plain && !fg_store_has(st, p.w[ci].expect))
				rc = probe_url(&p.w[ci], h, p.w[ci].url, 1, err);
		if (!rc && all) {
			/* everything is in the store: nothing to fetch, no socket */
			for (ci = 0; ci < old->n_components; ci++)
				for (i = 0; i < old->components[ci]->n_files; i++) {
					rep->fetch.bytes_present += old->components[ci]->files[i].size;
					rep->fetch.files_present++;
				}
		} else if (!rc && i == p.n) {
			for (i = 0; i < p.n; i++)
				rep->fetch.bytes_present += p.w[i].size;
			rep->fetch.files_present = p.n;
		} else if (!rc) {
			rc = fetch_plan(rep, &p, st, h, o, m, &items, err);
		}
		for (ci = 0; !rc && ci < old->n_components; ci++)
			rc = fg_lock_check_pins(old->components[ci], err);
		lm = old;
		goto done;
	}
	commits = calloc(m->n_components ? m->n_components : 1, sizeof(*commits));
	if (!commits) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto done;
	}
	if (offline) {
		rc = plan_offline(&listed, old, m, o->key, env, commits, &rep->from_hf_cache, &rep->hf_cache_missing,
				  err);
	} else if (!(rc = open_http(&h, env, o, err))) {
		rep->resolved = 1;
		rc = plan_online(&listed, m, h, env, commits, o->locked, err);
	}
	if (rc)
		goto done;
	if (o->locked) {
		rc = compare_with_lock(&listed, old, m, err);
		for (ci = 0; !rc && ci < m->n_components; ci++) {
			const struct fg_lock_component *c = fg_lock_find_component(old, m->components[ci].key);

			if (commits[ci] && c->revision && strcmp(commits[ci], c->revision))
				rc = fg_err_set(err, FG_EMISMATCH,
						"--locked: %s: revision moved to %s (lock has %s)", c->key,
						commits[ci], c->revision);
		}
		if (rc == FG_EMISMATCH)
			check_hint(err);
		if (!rc)
			rc = plan_from_lock(&p, old, m, env, err);
		for (i = 0; !rc && i < p.n; i++) {
			size_t k;

			for (k = 0; k < listed.n; k++)
				if (listed.w[k].comp == p.w[i].comp && !strcmp(listed.w[k].rel, p.w[i].rel))
					p.w[i].no_ranges = listed.w[k].no_ranges;
		}
		if (!rc)
			rc = fetch_plan(rep, &p, st, h, o, m, &items, err);
		if (!rc && (rc = check_unvalidated(rep, &p, items, st, h, o, err)) == FG_EMISMATCH)
			check_hint(err);
		for (ci = 0; !rc && ci < old->n_components; ci++)
			rc = fg_lock_check_pins(old->components[ci], err);
		lm = old;
		goto done;
	}
	/* reuse digests the old entry knew for unchanged files */
	for (i = 0; old && i < listed.n; i++) {
		struct want *w = &listed.w[i];
		const struct fg_lock_component *c = fg_lock_find_component(old, m->components[w->comp].key);
		const struct fg_lock_file *f = c ? fg_lock_find_file(c, w->rel) : NULL;

		if (!w->expect[0] && f && f->size == w->size && same_remote(&f->remote, &w->remote) &&
		    (w->remote.xet_hash || w->remote.oid ||
		     (w->remote.etag && strncmp(w->remote.etag, "W/", 2))))
			memcpy(w->expect, f->sha256, sizeof(w->expect));
	}
	rc = fetch_plan(rep, &listed, st, h, o, m, &items, err);
	if (rc)
		goto done;
	/* the new entry (replaces the old one; old is gone after this) */
	{
		struct fg_lock_manifest *nlm = NULL;
		char *before = NULL;
		struct fg_buf a = FG_BUF_INIT;

		struct fg_lock_dep *kept = NULL;
		size_t n_kept = 0;

		if (old && !fg_lock_serialize(&a, lock, NULL))
			before = fg_buf_detach(&a, NULL);
		/* digests of URL dependencies survive the entry being rewritten */
		if (old && old->n_deps && (kept = calloc(old->n_deps, sizeof(*kept)))) {
			for (i = 0; i < old->n_deps; i++)
				if (old->deps[i].sha256[0] && old->deps[i].url &&
				    (kept[n_kept].url = strdup(old->deps[i].url))) {
					memcpy(kept[n_kept].sha256, old->deps[i].sha256, sizeof(kept[n_kept].sha256));
					kept[n_kept].tree = old->deps[i].tree ? strdup(old->deps[i].tree) : NULL;
					kept[n_kept++].size = old->deps[i].size;
				}
		}
		old = NULL;
		rc = fg_lock_add_from_manifest(&nlm, lock, o->key, m, err);
		for (i = 0; !rc && i < nlm->n_deps; i++) {
			size_t k;

			for (k = 0; nlm->deps[i].url && k < n_kept; k++)
				if (!strcmp(kept[k].url, nlm->deps[i].url) &&
				    (!m->deps[i].sha256 || !strcmp(m->deps[i].sha256, kept[k].sha256))) {
					memcpy(nlm->deps[i].sha256, kept[k].sha256, sizeof(kept[k].sha256));
					nlm->deps[i].size = kept[k].size;
					if (kept[k].tree && !nlm->deps[i].tree && nlm->deps[i].commit) {
						nlm->deps[i].tree = kept[k].tree;
						kept[k].tree = NULL;
					}
				}
		}
		for (i = 0; i < n_kept; i++) {
			free(kept[i].url);
			free(kept[i].tree);
		}
		free(kept);
		for (ci = 0; !rc && ci < m->n_components; ci++) {
			struct fg_lock_component *c = fg_lock_find_component(nlm, m->components[ci].key);

			if (commits[ci] && !c->revision && !(c->revision = strdup(commits[ci])))
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			for (i = 0; !rc && i < listed.n; i++)
				if (listed.w[i].comp == ci) {
					rc = fg_lock_component_add_file(c, listed.w[i].rel, listed.w[i].size,
									items[i].sha256, &listed.w[i].remote, err);
					/* a folder whose one file has the folder's own name
					 * would read back as a source naming that file */
					if (!rc && listed.w[i].below && names_own_file(m->components[ci].ref,
										       listed.w[i].rel))
						c->folder = 1;
				}
			if (!rc)
				rc = fg_lock_component_finish(c, err);
			if (!rc && fg_lock_check_pins(c, err)) {
				rc = err ? err->code : FG_EMISMATCH;
				drop_new_blobs(&listed, items, ci, st);
			}
		}
		if (!rc) {
			struct fg_buf b = FG_BUF_INIT;

			rep->lock_changed = 1;
			if (before && !fg_lock_serialize(&b, lock, NULL) && !strcmp(b.data, before))
				rep->lock_changed = 0;
			fg_buf_release(&b);
		}
		free(before);
		lm = nlm;
	}
done:
	if (!rc && lm && o->deps)
		rc = pull_deps(rep, lm, m, st, env, o, &h, err);
	if (!rc && lm) {
		for (ci = 0; ci < lm->n_components; ci++) {
			rep->files += lm->components[ci]->n_files;
			for (i = 0; i < lm->components[ci]->n_files; i++)
				rep->bytes += lm->components[ci]->files[i].size;
		}
	}
	if (commits)
		for (ci = 0; ci < m->n_components; ci++)
			free(commits[ci]);
	free(commits);
	free(items);
	plan_release(&p);
	plan_release(&listed);
	fg_http_free(h);
	return rc;
}

/* ---- fgpack lock --check ---------------------------------------------------- */

static struct fg_check_file *check_add(struct fg_check_component *cc, const char *path, int kind,
				       const char *why, unsigned long long locked, unsigned long long now)
{
	struct fg_check_file *f;

	if (fg_grow(&cc->files, &cc->cap, cc->n_files, sizeof(*cc->files)))
		return NULL;
	f = &cc->files[cc->n_files];
	memset(f, 0, sizeof(*f));
	if (!(f->path = strdup(path)))
		return NULL;
	f->kind = kind;
	f->why = why;
	f->size_locked = locked;
	f->size_now = now;
	cc->n_files++;
	return f;
}

static struct fg_check_component *check_component(struct fg_check_report *rep, const char *key, const char *source)
{
	struct fg_check_component *c;

	if (fg_grow(&rep->c, &rep->cap, rep->n, sizeof(*rep->c)))
		return NULL;
	c = &rep->c[rep->n];
	memset(c, 0, sizeof(*c));
	c->key = strdup(key);
	c->source = strdup(source);
	rep->n++;
	return c->key && c->source ? c : NULL;
}

/* How a listed file w shows other content than its lock record f (NULL:
 * the same; "?" only its bytes could tell). A model repo's files are
 * compared by content (an LFS file's sha256, a small file's git oid), so a
 * commit that moved without touching them leaves them the same. */
static const char *file_change(const struct fg_lock_file *f, const struct want *w, int kind, struct fg_err *err)
{
#define DIFF(x) ((!f->remote.x) != (!w->remote.x) || (f->remote.x && strcmp(f->remote.x, w->remote.x)))
	char hex[FG_SHA256_HEX_LEN + 1];
	unsigned long long size;

	if (f->size != w->size)
		return "size";
	switch (kind) {
	case FG_REF_FILE:
		if (fg_store_hash_file(w->local_path, hex, &size, err))
			return NULL;
		return strcmp(hex, f->sha256) ? "sha256" : NULL;
	case FG_REF_MODEL:
		if (w->expect[0])
			return strcmp(w->expect, f->sha256) ? "sha256" : NULL;
		return DIFF(oid) ? "oid" : NULL;
	case FG_REF_BUCKET:
		return DIFF(xet_hash) ? "xetHash" : NULL;
	default:
		if (!w->remote.etag && !w->remote.last_modified)
			return "?";
		return DIFF(etag) || DIFF(last_modified) || DIFF(url) ? "ETag or Last-Modified" : NULL;
	}
#undef DIFF
}

/* One manifest component listed (its wants appended to p) and compared with
 * its lock record c (NULL: not in the lock). */
static int check_one(struct fg_check_report *rep, struct plan *p, size_t ci, const struct fg_component *mc,
		     const struct fg_lock_component *c, struct fg_http *h, const struct fg_hub_env *env,
		     struct fg_err *err)
{
	struct fg_check_component *cc = check_component(rep, mc->key, mc->source);
	size_t first = p->n, i, k;
	char *commit = NULL, *seen = NULL; /* seen[k]: lock file k is still listed */
	int rc;

	if (!cc)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = plan_listed(p, ci, mc, h, env, &commit, err);
	if (rc == FG_ENOTFOUND) {
		/* the source is gone: every locked file with it */
		cc->state = FG_CHECK_MISSING;
		cc->missing = strdup(err->msg);
		fg_err_clear(err);
		for (k = 0; c && k < c->n_files; k++)
			if (!check_add(cc, c->files[k].path, FG_CHECK_REMOVED, NULL, c->files[k].size, 0))
				return fg_err_set(err, FG_ENOMEM, "out of memory");
		return cc->missing ? 0 : fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (rc)
		return rc;
	cc->rev_now = commit;
	if (!c) {
		cc->state = FG_CHECK_NEW;
		for (i = first; i < p->n; i++)
			if (!check_add(cc, p->w[i].rel, FG_CHECK_ADDED, NULL, 0, p->w[i].size))
				return fg_err_set(err, FG_ENOMEM, "out of memory");
		return 0;
	}
	if ((c->revision && !(cc->rev_locked = strdup(c->revision))) || !(seen = calloc(c->n_files + 1, 1)))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (i = first; !rc && i < p->n; i++) {
		const struct want *w = &p->w[i];
		const struct fg_lock_file *f = fg_lock_find_file(c, w->rel);
		const char *why;
		struct fg_check_file *cf = NULL;

		if (!f) {
			cf = check_add(cc, w->rel, FG_CHECK_ADDED, NULL, 0, w->size);
		} else {
			seen[f - c->files] = 1;
			fg_err_clear(err);
			why = file_change(f, w, mc->ref->kind, err);
			if (err->code) {
				rc = fg_err_wrap(err, "%s", w->what);
				break;
			}
			if (!why) {
				cc->n_same++;
				continue;
			}
			if (*why == '?')
				cc->n_unknown++;
			cf = check_add(cc, w->rel, *why == '?' ? FG_CHECK_UNKNOWN : FG_CHECK_CHANGED,
				       *why == '?' ? NULL : why, f->size, w->size);
		}
		if (!cf)
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	/* what the listing no longer has */
	for (k = 0; !rc && k < c->n_files; k++)
		if (!seen[k] && !check_add(cc, c->files[k].path, FG_CHECK_REMOVED, NULL, c->files[k].size, 0))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	free(seen);
	if (rc)
		return rc;
	if (cc->n_files > cc->n_unknown || (cc->rev_now && cc->rev_locked && strcmp(cc->rev_now, cc->rev_locked)))
		cc->state = FG_CHECK_DIFFERS;
	return 0;
}

int fg_pull_check(struct fg_check_report *rep, const struct fg_lock *lock, const struct fg_manifest *m,
		  const struct fg_hub_env *env, const struct fg_pull_opts *o, struct fg_err *err)
{
	const struct fg_lock_manifest *lm = fg_lock_find_manifest(lock, o->key);
	struct plan p = { 0 };
	struct fg_http *h = NULL;
	size_t ci;
	int rc;

	memset(rep, 0, sizeof(*rep));
	if (!lm)
		return fg_err_set(err, FG_ENOTFOUND, "the lock has no entry for %s (run 'fgpack lock' first)", o->key);
	if (o->offline || env->offline)
		return fg_err_set(err, FG_EOFFLINE, "--check lists the remote, which offline cannot");
	rep->manifest_changed = strcmp(lm->sha256, m->sha256) != 0;
	rc = open_http(&h, env, o, err);
	for (ci = 0; !rc && ci < m->n_components; ci++)
		rc = check_one(rep, &p, ci, &m->components[ci], fg_lock_find_component(lm, m->components[ci].key), h,
			       env, err);
	for (ci = 0; !rc && ci < lm->n_components; ci++) {
		const struct fg_lock_component *c = lm->components[ci];
		struct fg_check_component *cc;

		if (fg_manifest_component(m, c->key))
			continue;
		if (!(cc = check_component(rep, c->key, c->source)))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		else
			cc->state = FG_CHECK_GONE;
	}
	rep->up_to_date = !rc && !rep->manifest_changed;
	for (ci = 0; !rc && ci < rep->n; ci++)
		if (rep->c[ci].state != FG_CHECK_SAME)
			rep->up_to_date = 0;
	plan_release(&p);
	fg_http_free(h);
	if (rc)
		fg_check_report_release(rep);
	return rc;
}

void fg_check_report_release(struct fg_check_report *rep)
{
	size_t i, k;

	for (i = 0; rep && i < rep->n; i++) {
		for (k = 0; k < rep->c[i].n_files; k++)
			free(rep->c[i].files[k].path);
		free(rep->c[i].files);
		free(rep->c[i].key);
		free(rep->c[i].source);
		free(rep->c[i].rev_locked);
		free(rep->c[i].rev_now);
		free(rep->c[i].missing);
	}
	if (rep) {
		free(rep->c);
		memset(rep, 0, sizeof(*rep));
	}
}

/* The folder of a component under --into's DIR, relative to it: its target
 * as a shell or Python would read the path ("/tmp/w/", "/tmp//w" and "./w"
 * name the same folder as "/tmp/w" and "w"; ".." never leaves DIR), or
 * _components/<key> without one. */
static int target_rel(struct fg_buf *out, const char *key, const char *target, struct fg_err *err)
{
	const char *t = target;
	size_t start = out->len;
	int rc = 0;

	if (!t) {
		if (!fg_path_is_safe_rel(key))
			return fg_err_set(err, FG_EINVAL, "%s: key is not a safe folder name", key);
		return fg_buf_printf(out, err, "_components/%s", key);
	}
	while (!rc && *t) {
		size_t n = strcspn(t, "/");

		if (n == 2 && t[0] == '.' && t[1] == '.')
			rc = fg_err_set(err, FG_EINVAL, "%s: target %s goes up a folder ('..')", key, target);
		else if (n && !(n == 1 && t[0] == '.'))
			rc = fg_buf_printf(out, err, "%s%.*s", out->len > start ? "/" : "", (int)n, t);
		t += n;
		while (*t == '/')
			t++;
	}
	if (!rc && out->len == start)
		rc = fg_err_set(err, FG_EINVAL, "%s: target %s is the root", key, target);
	else if (!rc && !fg_path_is_safe_rel(out->data + start))
		rc = fg_err_set(err, FG_EINVAL, "%s: target %s holds a backslash or a control character", key,
				target);
	return rc;
}

/* DIR/<the folder target_rel names> */
static int target_dir(struct fg_buf *out, const char *into, const char *key, const char *target,
		      struct fg_err *err)
{
	struct fg_buf rel = FG_BUF_INIT;
	int rc = target_rel(&rel, key, target, err);

	if (!rc)
		rc = fg_path_join(out, into, rel.data, err);
	fg_buf_release(&rel);
	return rc;
}

int fg_pull_target_dir(struct fg_buf *out, const char *into, const struct fg_lock_component *c,
		       struct fg_err *err)
{
	return target_dir(out, into, c->key, c->target, err);
}

struct placed {
	char *path;              /* DIR/<target>/<file> */
	const char *sha256;      /* borrowed from the lock */
	const char *key;         /* the component's, borrowed */
};

static int by_placed_path(const void *a, const void *b)
{
	return strcmp(((const struct placed *)a)->path, ((const struct placed *)b)->path);
}

/* Before anything is placed: every target is usable, and no two components
 * put different bytes at one path (two targets naming the same folder, or
 * one inside the other): the one placed last would win without a word. */
static int check_placement(const struct fg_lock_manifest *lm, const char *into, struct fg_err *err)
{
	struct fg_buf dir = FG_BUF_INIT, dst = FG_BUF_INIT;
	struct placed *pl;
	size_t ci, i, n = 0, total = 0;
	int rc = 0;

	for (ci = 0; ci < lm->n_components; ci++)
		total += lm->components[ci]->n_files;
	pl = calloc(total ? total : 1, sizeof(*pl));
	if (!pl)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (ci = 0; !rc && ci < lm->n_components; ci++) {
		const struct fg_lock_component *c = lm->components[ci];

		fg_buf_reset(&dir);
		rc = fg_pull_target_dir(&dir, into, c, err);
		for (i = 0; !rc && i < c->n_files; i++) {
			fg_buf_reset(&dst);
			rc = fg_path_join(&dst, dir.data, c->files[i].path, err);
			if (!rc && !(pl[n].path = fg_buf_detach(&dst, NULL)))
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			if (!rc) {
				pl[n].sha256 = c->files[i].sha256;
				pl[n++].key = c->key;
			}
		}
	}
	if (!rc && n)
		qsort(pl, n, sizeof(*pl), by_placed_path);
	for (i = 1; !rc && i < n; i++)
		if (!strcmp(pl[i].path, pl[i - 1].path) && strcmp(pl[i].sha256, pl[i - 1].sha256))
			rc = fg_err_set(err, FG_EINVAL,
					"%s and %s both place %s, with different content (their targets "
					"overlap)",
					strcmp(pl[i - 1].key, pl[i].key) < 0 ? pl[i - 1].key : pl[i].key,
					strcmp(pl[i - 1].key, pl[i].key) < 0 ? pl[i].key : pl[i - 1].key,
					pl[i].path);
	for (i = 0; i < n; i++)
		free(pl[i].path);
	free(pl);
	fg_buf_release(&dir);
	fg_buf_release(&dst);
	return rc;
}

/* ---- what --into placed, so that the next --into can take back what
 * the lock no longer names ---- */

/* placed/<sha256 of "<realpath of DIR>\n<manifest key>">.json in the store */
static int placed_record_path(struct fg_buf *out, const struct fg_store *st, const char *real_into,
			      const char *mkey, struct fg_err *err)
{
	struct fg_buf id = FG_BUF_INIT;
	uint8_t d[FG_SHA256_LEN];
	char hex[FG_SHA256_HEX_LEN + 1];
	int rc = fg_buf_printf(&id, err, "%s\n%s", real_into, mkey);

	if (!rc)
		rc = fg_sha256_mem(id.data, id.len, d, err);
	fg_buf_release(&id);
	if (rc)
		return rc;
	fg_hex_encode(d, sizeof(d), hex);
	return fg_buf_printf(out, err, "%s/placed/%s.json", fg_store_root(st), hex);
}

/* 1 when no folder between root and root/rel is a symlink, and root/rel is
 * a regular file (lstat into *sb). */
static int plain_file_under(const char *root, const char *rel, struct stat *sb)
{
	struct fg_buf p = FG_BUF_INIT;
	const char *q = rel;
	int good = !fg_buf_printf(&p, NULL, "%s", root);

	while (good && *q) {
		size_t n = strcspn(q, "/");

		good = !fg_buf_printf(&p, NULL, "/%.*s", (int)n, q) && !lstat(p.data, sb) &&
		       (q[n] ? S_ISDIR(sb->st_mode) : S_ISREG(sb->st_mode));
		q += n;
		while (*q == '/')
			q++;
	}
	fg_buf_release(&p);
	return good;
}

/* A placed copy's inode as it was when fgpack wrote it ("dev:ino:size:mtime
 * ns:ctime ns"): while a file still shows it, nobody wrote to it since (as
 * the store's stamps reason, lib/store.h), so the next --into leaves it. */
static void copy_stamp(char *out, size_t n, const struct stat *sb)
{
	snprintf(out, n, "%llu:%llu:%lld:%lld:%lld", (unsigned long long)sb->st_dev, (unsigned long long)sb->st_ino,
		 (long long)sb->st_size, (long long)sb->st_mtim.tv_sec * 1000000000LL + sb->st_mtim.tv_nsec,
		 (long long)sb->st_ctim.tv_sec * 1000000000LL + sb->st_ctim.tv_nsec);
}

/* Removes DIR/rel when it still holds blob sha256's bytes (the store's own
 * inode, the copy placed showing its stamp, or a copy that hashes to it),
 * then its folders that became empty, up to DIR. 1 removed, 2 kept (changed
 * since), 0 gone (or no plain file there, or under a symlinked folder), -1
 * on an error. */
static int take_back(const struct fg_store *st, const char *into, const char *rel, const char *sha256,
		     const char *stamp)
{
	char now[128];
	struct fg_buf p = FG_BUF_INIT, blob = FG_BUF_INIT;
	struct stat sb, bs;
	char hex[FG_SHA256_HEX_LEN + 1];
	int ours = 0, r = 0;

	if (!fg_path_is_safe_rel(rel) || !fg_sha256_hex_valid(sha256) || !plain_file_under(into, rel, &sb) ||
	    fg_path_join(&p, into, rel, NULL))
		goto out;
	copy_stamp(now, sizeof(now), &sb);
	if (!fg_store_blob_path(&blob, st, sha256, NULL) && !stat(blob.data, &bs) && bs.st_ino == sb.st_ino &&
	    bs.st_dev == sb.st_dev)
		ours = 1;
	else if (stamp && !strcmp(stamp, now)) /* the copy placed, untouched since: no hashing */
		ours = 1;
	else if (!fg_store_hash_file(p.data, hex, NULL, NULL) && !strcmp(hex, sha256))
		ours = 1;
	if (!ours) {
		r = 2;
		goto out;
	}
	if (unlink(p.data)) {
		r = errno == ENOENT ? 0 : -1;
		goto out;
	}
	r = 1;
	for (;;) {
		char *slash = strrchr(p.data, '/');

		if (!slash || (size_t)(slash - p.data) <= strlen(into))
			break;
		*slash = '\0';
		if (rmdir(p.data))
			break;
	}
out:
	fg_buf_release(&p);
	fg_buf_release(&blob);
	return r;
}

void fg_place_report_release(struct fg_place_report *rep)
{
	size_t i;

	if (!rep)
		return;
	for (i = 0; i < FG_PLACE_EXAMPLES; i++)
		free(rep->foreign_ex[i]);
	memset(rep, 0, sizeof(*rep));
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The keys of a JSON object, sorted (borrowed from it); NULL when out of
 * memory. */
static const char **object_keys(const cJSON *obj, size_t *n)
{
	const cJSON *f;
	const char **k;

	*n = 0;
	cJSON_ArrayForEach(f, obj)
		(*n)++;
	if (!(k = calloc(*n ? *n : 1, sizeof(*k))))
		return NULL;
	*n = 0;
	cJSON_ArrayForEach(f, obj)
		k[(*n)++] = f->string;
	qsort(k, *n, sizeof(*k), by_str);
	return k;
}

struct foreign_walk {
	const char *into;           /* realpath of DIR */
	const char **names;         /* the placed paths under DIR, sorted */
	size_t n_names;
	size_t budget;              /* entries left to look at */
	struct fg_place_report *r;
};

/* Keeps in ex[0..n) the n smallest names seen, sorted (NULL-padded): the
 * examples do not depend on the order a folder is read in. */
static void keep_smallest(char **ex, size_t n, const char *name)
{
	size_t i = n;
	char *c;

	if (ex[n - 1] && strcmp(name, ex[n - 1]) >= 0)
		return;
	if (!(c = strdup(name)))
		return;
	free(ex[n - 1]);
	ex[n - 1] = NULL;
	while (i > 0 && (!ex[i - 1] || strcmp(c, ex[i - 1]) < 0)) {
		if (i < n)
			ex[i] = ex[i - 1];
		i--;
	}
	ex[i] = c;
}

/* Counts the files below DIR/rel that are not among the placed names. */
static void walk_foreign(struct foreign_walk *fw, const char *rel, int depth)
{
	struct fg_buf p = FG_BUF_INIT, sub = FG_BUF_INIT;
	struct dirent *de;
	DIR *d;

	if (fg_path_join(&p, fw->into, rel, NULL) || !(d = opendir(p.data))) {
		fg_buf_release(&p);
		return;
	}
	while ((de = readdir(d))) {
		struct stat sb;
		const char *key;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!fw->budget) {
			fw->r->foreign_more = 1;
			break;
		}
		fw->budget--;
		fg_buf_reset(&sub);
		fg_buf_reset(&p);
		if (fg_path_join(&sub, rel, de->d_name, NULL) || fg_path_join(&p, fw->into, sub.data, NULL) ||
		    lstat(p.data, &sb))
			continue;
		if (S_ISDIR(sb.st_mode)) {
			/* `hf download --local-dir` keeps its metadata in .cache/huggingface/:
			 * nothing a serve script loads */
			if (depth < WALK_DEPTH && strcmp(de->d_name, ".cache"))
				walk_foreign(fw, sub.data, depth + 1);
			continue;
		}
		key = sub.data;
		if (bsearch(&key, fw->names, fw->n_names, sizeof(*fw->names), by_str))
			continue;
		keep_smallest(fw->r->foreign_ex, FG_PLACE_EXAMPLES, sub.data);
		fw->r->foreign++;
	}
	closedir(d);
	fg_buf_release(&p);
	fg_buf_release(&sub);
}

/* The target folders of lm (each once; one inside another is walked with
 * it) looked through for files that neither lm names nor --into placed. */
static int find_foreign(const struct fg_lock_manifest *lm, const struct fg_store *st, const char *real_into,
			const char *const *placed, size_t n_placed, struct fg_place_report *r, struct fg_err *err)
{
	struct foreign_walk fw;
	struct fg_buf p = FG_BUF_INIT, text = FG_BUF_INIT;
	const cJSON *f;
	cJSON *others = cJSON_CreateArray(), *o;
	char **dirs;
	size_t n = 0, nd = 0, ci, i, k;
	int rc = 0;
	DIR *d;

	memset(&fw, 0, sizeof(fw));
	fw.into = real_into;
	fw.budget = 100000;
	fw.r = r;
	/* what --into of other manifests placed in the same DIR is theirs, not unknown */
	if (others && !fg_buf_printf(&p, NULL, "%s/placed", fg_store_root(st)) && (d = opendir(p.data))) {
		struct dirent *de;

		while ((de = readdir(d))) {
			cJSON *doc = NULL;

			fg_buf_reset(&p);
			fg_buf_reset(&text);
			if (de->d_name[0] == '.' ||
			    fg_buf_printf(&p, NULL, "%s/placed/%s", fg_store_root(st), de->d_name) ||
			    fg_file_read(p.data, 64 << 20, &text, NULL) ||
			    fg_json_parse(&doc, text.data, text.len, p.data, NULL))
				continue;
			if (fg_json_str(doc, "into") && !strcmp(fg_json_str(doc, "into"), real_into) &&
			    fg_json_str(doc, "manifest") && strcmp(fg_json_str(doc, "manifest"), lm->key))
				cJSON_AddItemToArray(others, doc);
			else
				cJSON_Delete(doc);
		}
		closedir(d);
	}
	n = n_placed;
	cJSON_ArrayForEach(o, others)
		cJSON_ArrayForEach(f, fg_json_obj(o, "files"))
			n++;
	fw.names = calloc(n ? n : 1, sizeof(*fw.names));
	dirs = calloc(lm->n_components ? lm->n_components : 1, sizeof(*dirs));
	if (!others || !fw.names || !dirs) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	memcpy(fw.names, placed, n_placed * sizeof(*placed));
	fw.n_names = n_placed;
	cJSON_ArrayForEach(o, others)
		cJSON_ArrayForEach(f, fg_json_obj(o, "files"))
			fw.names[fw.n_names++] = f->string;
	qsort(fw.names, fw.n_names, sizeof(*fw.names), by_str);
	for (ci = 0; ci < lm->n_components; ci++) {
		struct fg_buf dir = FG_BUF_INIT;

		if (lm->components[ci]->target &&
		    !target_rel(&dir, lm->components[ci]->key, lm->components[ci]->target, NULL))
			dirs[nd++] = strdup(dir.data);
		fg_buf_release(&dir);
		if (nd && !dirs[nd - 1]) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
	}
	for (i = 0; i < nd; i++) {
		int inside = 0;

		for (k = 0; k < nd && !inside; k++) {
			size_t lk = strlen(dirs[k]);

			if (k != i && !strncmp(dirs[i], dirs[k], lk) &&
			    (dirs[i][lk] == '/' || (dirs[i][lk] == '\0' && k < i)))
				inside = 1;
		}
		if (!inside)
			walk_foreign(&fw, dirs[i], 0);
	}
out:
	for (i = 0; i < nd; i++)
		free(dirs[i]);
	free(dirs);
	free(fw.names);
	cJSON_Delete(others);
	fg_buf_release(&p);
	fg_buf_release(&text);
	return rc;
}

/* lm as placed: its components, then, for each, a shallow copy per other
 * folder target the manifest gives it (MODEL_PATH beside LOCAL_MODEL_DIR,
 * rules 1 and 2 of lib/manifest.h), so every path the serve script may read
 * holds the files. Free view->components and *copies. */
static int place_view(struct fg_lock_manifest *view, struct fg_lock_component **copies,
		      const struct fg_lock_manifest *lm, const struct fg_manifest *m, struct fg_err *err)
{
	size_t ci, t, n = lm->n_components;

	*view = *lm;
	*copies = NULL;
	view->components = calloc(lm->n_components + (m ? m->n_targets : 0) + 1, sizeof(*view->components));
	if (m && !(*copies = calloc(m->n_targets + 1, sizeof(**copies))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!view->components)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	memcpy(view->components, lm->components, lm->n_components * sizeof(*view->components));
	for (t = 0; m && t < m->n_targets; t++) {
		const struct fg_target *tg = &m->targets[t];

		if (tg->component < 0 || (tg->rule != FG_TARGET_FIXED && tg->rule != FG_TARGET_STEM))
			continue;
		for (ci = 0; ci < lm->n_components; ci++) {
			const struct fg_lock_component *c = lm->components[ci];

			if (!strcmp(c->key, m->components[tg->component].key) && c->target &&
			    strcmp(c->target, tg->folder)) {
				struct fg_lock_component *cp = &(*copies)[n - lm->n_components];

				*cp = *c;
				cp->target = tg->folder;
				view->components[n++] = cp;
			}
		}
	}
	view->n_components = n;
	return 0;
}

int fg_pull_materialize(const struct fg_lock_manifest *lm0, const struct fg_manifest *m, struct fg_store *st,
			const char *into, int copy, struct fg_place_report *rep, struct fg_err *err)
{
	struct fg_buf dir = FG_BUF_INIT, dst = FG_BUF_INIT, blob = FG_BUF_INIT, rec = FG_BUF_INIT,
		      text = FG_BUF_INIT, rel = FG_BUF_INIT, reldir = FG_BUF_INIT, pdir = FG_BUF_INIT;
	struct fg_place_report r;
	const char **names = NULL; /* this run's placed paths, sorted */
	size_t nn = 0;
	struct fg_lock_manifest view;
	struct fg_lock_component *copies = NULL;
	const struct fg_lock_manifest *lm = &view;
	char real[PATH_MAX];
	cJSON *now = NULL, *was = NULL, *files = NULL, *copies_now = NULL, *f;
	cJSON *swept = cJSON_CreateObject(); /* the folders fg_store_sweep_tmps looked through */
	char stamp[128];
	size_t ci, i;
	int rc = place_view(&view, &copies, lm0, m, err);

	if (!rc && !swept)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");

	if (!rc)
		rc = check_placement(lm, into, err);
	memset(&r, 0, sizeof(r));
	if (!rc)
		rc = fg_mkdir_p(into, 0755, err);
	if (!rc && !realpath(into, real))
		rc = fg_err_set(err, FG_EIO, "%s: %s", into, strerror(errno));
	if (!rc)
		rc = placed_record_path(&rec, st, real, lm->key, err);
	if (!rc && !(now = cJSON_CreateObject()))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!rc && (!cJSON_AddStringToObject(now, "into", real) ||
		    !cJSON_AddStringToObject(now, "manifest", lm->key) ||
		    !(files = cJSON_AddObjectToObject(now, "files")) ||
		    !(copies_now = cJSON_AddObjectToObject(now, "copies"))))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	/* the last --into of this manifest here: its copies, and what to take back */
	if (!rc && (fg_file_read(rec.data, 64 << 20, &text, NULL) ||
		    fg_json_parse(&was, text.data, text.len, rec.data, NULL) || !cJSON_IsObject(was))) {
		cJSON_Delete(was);
		was = NULL;
	}
	for (ci = 0; !rc && ci < lm->n_components; ci++) {
		const struct fg_lock_component *c = lm->components[ci];

		fg_buf_reset(&dir);
		fg_buf_reset(&reldir);
		rc = target_rel(&reldir, c->key, c->target, err);
		if (!rc)
			rc = fg_path_join(&dir, into, reldir.data, err);
		if (!rc)
			rc = fg_mkdir_p(dir.data, 0755, err);
		for (i = 0; !rc && i < c->n_files; i++) {
			int how = 0;
			struct stat ds, bs;

			fg_buf_reset(&rel);
			rc = fg_path_join(&rel, reldir.data, c->files[i].path, err);
			if (!rc && !cJSON_AddStringToObject(files, rel.data, c->files[i].sha256))
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			if (rc)
				break;
			/* the temporary files a pull killed (SIGKILL) while it placed
			 * into this folder left there: once per folder */
			fg_buf_reset(&dst);
			fg_buf_reset(&pdir);
			if (!fg_path_join(&dst, dir.data, c->files[i].path, NULL) &&
			    !fg_path_dir(dst.data, &pdir, NULL) &&
			    !cJSON_GetObjectItemCaseSensitive(swept, pdir.data)) {
				if (!cJSON_AddNullToObject(swept, pdir.data)) {
					rc = fg_err_set(err, FG_ENOMEM, "out of memory");
					break;
				}
				fg_store_sweep_tmps(pdir.data, &r.swept);
			}
			/* already there as a link to the same blob (not wanted with
			 * copy), or as the copy the last --into wrote, untouched since:
			 * nothing to do */
			fg_buf_reset(&dst);
			fg_buf_reset(&blob);
			if (!fg_path_join(&dst, dir.data, c->files[i].path, NULL) &&
			    !fg_store_blob_path(&blob, st, c->files[i].sha256, NULL) &&
			    !lstat(dst.data, &ds) && S_ISREG(ds.st_mode) && !stat(blob.data, &bs)) {
				int linked = ds.st_ino == bs.st_ino && ds.st_dev == bs.st_dev;
				const char *ws, *wc;

				if (linked && !copy) {
					r.linked++;
					continue;
				}
				ws = linked ? NULL : fg_json_str(fg_json_obj(was, "files"), rel.data);
				wc = ws ? fg_json_str(fg_json_obj(was, "copies"), rel.data) : NULL;
				copy_stamp(stamp, sizeof(stamp), &ds);
				if (ws && !strcmp(ws, c->files[i].sha256) && wc && !strcmp(wc, stamp)) {
					if (!cJSON_AddStringToObject(copies_now, rel.data, stamp))
						rc = fg_err_set(err, FG_ENOMEM, "out of memory");
					r.copied++;
					continue;
				}
			}
			rc = fg_store_materialize(st, c->files[i].sha256, dir.data, c->files[i].path, copy, &how,
						  err);
			if (!rc && how == FG_STORE_MAT_COPY) {
				r.copied++;
				if (!lstat(dst.data, &ds)) {
					copy_stamp(stamp, sizeof(stamp), &ds);
					if (!cJSON_AddStringToObject(copies_now, rel.data, stamp))
						rc = fg_err_set(err, FG_ENOMEM, "out of memory");
				}
			} else if (!rc) {
				r.linked++;
			}
		}
	}
	/* what the last --into of this manifest here placed and this one does
	 * not: removed while it still holds those bytes (a file changed since
	 * is the user's now, and kept) */
	if (!rc && !(names = object_keys(files, &nn)))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!rc && was) {
		cJSON_ArrayForEach(f, fg_json_obj(was, "files")) {
			const char *key = f->string;
			int t;

			if (!cJSON_IsString(f) || bsearch(&key, names, nn, sizeof(*names), by_str))
				continue;
			t = take_back(st, real, f->string, f->valuestring,
				      fg_json_str(fg_json_obj(was, "copies"), f->string));
			if (t == 1)
				r.removed++;
			else if (t == 2)
				r.kept++;
			else if (t < 0 && !rc)
				rc = fg_err_set(err, FG_EIO, "remove %s/%s: %s", real, f->string, strerror(errno));
		}
	}
	if (!rc)
		rc = find_foreign(lm, st, real, names, nn, &r, err);
	if (!rc) {
		fg_buf_reset(&dir);
		fg_buf_reset(&text);
		rc = fg_buf_printf(&dir, err, "%s/placed", fg_store_root(st));
		if (!rc)
			rc = fg_mkdir_p(dir.data, 0755, err);
		if (!rc)
			rc = fg_json_write(&text, now, 1, err);
		if (!rc)
			rc = fg_file_write_atomic(rec.data, text.data, text.len, 0644, err);
	}
	cJSON_Delete(now);
	cJSON_Delete(was);
	cJSON_Delete(swept);
	fg_buf_release(&pdir);
	fg_buf_release(&dir);
	fg_buf_release(&dst);
	fg_buf_release(&blob);
	fg_buf_release(&rec);
	fg_buf_release(&text);
	fg_buf_release(&rel);
	free(names);
	fg_buf_release(&reldir);
	free(view.components);
	free(copies);
	if (rep)
		*rep = r;
	else
		fg_place_report_release(&r);
	return rc;
}
