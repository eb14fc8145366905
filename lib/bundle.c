/* bundle.c - build bundle.json plus the tarball; extract and check a bundle. */
#include "bundle.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "fsutil.h"
#include "json.h"
#include "manifest.h"
#include "tarball.h"
#include "store.h"

struct bfile {
	char *path;
	char *src;  /* NULL for in-memory data */
	char *data;
	size_t len;
	unsigned long long size;
	int mode;
	int pending;        /* file not hashed yet (hash_pending does it) */
	char *expect;       /* sha256 hex it must hold (a store blob's name), or NULL */
	struct fg_tarball_stamp stamp; /* the file as it was hashed */
	char sha256[FG_SHA256_HEX_LEN + 1];
	uint8_t raw[32];
	uint8_t *states; /* its chain states, 32 bytes each (states_every apart) */
	size_t n_states;
};

struct fg_bundle_builder {
	struct bfile *f;
	size_t n, cap;
	cJSON *meta;
	int threads; /* hashing threads; more than 1: zstd on a thread of its own */
	struct fg_store *store; /* whose stamps may name files (borrowed), or NULL */
	size_t by_stamp;        /* files named by their store blob, not hashed */
	unsigned long long states_every; /* the files' chain states are this far apart */
	unsigned long long by_stamp_bytes;
	size_t by_seen; /* files named by their seen record (lib/store.h), not hashed */
	unsigned long long by_seen_bytes;
};

int fg_bundle_builder_new(struct fg_bundle_builder **out, struct fg_err *err)
{
	struct fg_bundle_builder *b = calloc(1, sizeof(*b));

	*out = NULL;
	if (!b || !(b->meta = cJSON_CreateObject())) {
		free(b);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	b->threads = 2;
	*out = b;
	return 0;
}

int fg_bundle_builder_set_threads(struct fg_bundle_builder *b, int threads, struct fg_err *err)
{
	if (threads < 1 || threads > 64)
		return fg_err_set(err, FG_EINVAL, "threads %d out of range 1..64", threads);
	b->threads = threads;
	return 0;
}

void fg_bundle_builder_free(struct fg_bundle_builder *b)
{
	size_t i;

	if (!b)
		return;
	for (i = 0; i < b->n; i++) {
		free(b->f[i].path);
		free(b->f[i].src);
		free(b->f[i].data);
		free(b->f[i].expect);
		free(b->f[i].states);
	}
	free(b->f);
	cJSON_Delete(b->meta);
	free(b);
}

cJSON *fg_bundle_builder_meta(struct fg_bundle_builder *b)
{
	return b->meta;
}

static struct bfile *find(const struct fg_bundle_builder *b, const char *path)
{
	size_t i;

	for (i = 0; i < b->n; i++)
		if (!strcmp(b->f[i].path, path))
			return &b->f[i];
	return NULL;
}

int fg_bundle_has(const struct fg_bundle_builder *b, const char *path)
{
	return find(b, path) != NULL;
}

/* Hashes every pending file, b->threads at a time (fg_store_digest_files:
 * two files per thread on SHA-NI, as `store verify` hashes). This is the one pass
 * that hashes the files: bundle.json, which lists their digests, is the
 * archive's first member, so they are known before the archive is written;
 * the write then streams each file once more, unhashed, checking its stamp
 * (lib/tarball.h), while the archive's identity hash runs over the tar.
 * Plain reads (not O_DIRECT): they leave the file in the page cache for that
 * second read. A file that is a hard link to a blob of the store set with
 * fg_bundle_builder_set_store, unchanged since the store checked it (lib/
 * store.h, stamps), is named by that blob and not read here. */

/* Records file f's digest (fg_store_digest_files), after checking it against
 * the size it was added with and the blob name it must have. */
static int settle(struct fg_bundle_builder *b, struct bfile *f, struct fg_store_digest *d,
		  struct fg_err *err)
{
	if (d->size != f->size || (unsigned long long)d->st.st_size != f->size)
		return fg_err_set(err, FG_EIO, "%s: changed size while packing", f->src);
	if (f->expect && strcmp(f->expect, d->hex))
		return fg_err_set(err, FG_EHASH, "%s: holds sha256 %s, not the %s it is named by",
				  f->src, d->hex, f->expect);
	memcpy(f->sha256, d->hex, sizeof(f->sha256));
	if (fg_hex_decode(f->sha256, f->raw, 32))
		return fg_err_set(err, FG_EIO, "%s: bad digest", f->src);
	fg_tarball_stamp_of(&f->stamp, &d->st);
	f->pending = 0;
	free(f->states);
	f->states = d->states;
	f->n_states = d->n_states;
	d->states = NULL;
	if (d->by_store) {
		b->by_stamp++;
		b->by_stamp_bytes += f->size;
	} else if (d->by_seen) {
		b->by_seen++;
		b->by_seen_bytes += f->size;
	}
	return 0;
}

/* Every how many bytes pack keeps a file's chain state: FG_BUNDLE_STATES_EVERY,
 * or the environment's FG_PACK_STATES_EVERY (bytes; 0: none). */
static int states_every(unsigned long long *every, struct fg_err *err)
{
	const char *e = getenv("FG_PACK_STATES_EVERY");
	char *end = NULL;

	*every = FG_BUNDLE_STATES_EVERY;
	if (!e)
		return 0;
	errno = 0;
	*every = strtoull(e, &end, 10);
	if (!*e || *end || errno || *every % FG_TARBALL_FRAME_DATA)
		return fg_err_set(err, FG_EINVAL,
				  "FG_PACK_STATES_EVERY=%.40s: not 0 or a multiple of %llu bytes", e,
				  FG_TARBALL_FRAME_DATA);
	return 0;
}

static int hash_pending(struct fg_bundle_builder *b, struct fg_err *err)
{
	size_t *idx = malloc((b->n + 1) * sizeof(*idx));
	const char **path = malloc((b->n + 1) * sizeof(*path));
	struct fg_store_digest *d = NULL;
	size_t i, n = 0;
	int rc = states_every(&b->states_every, err);

	if (!idx || !path)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	for (i = 0; !rc && i < b->n; i++)
		if (b->f[i].pending) {
			idx[n] = i;
			path[n++] = b->f[i].src;
		}
	if (!rc && n && !(d = malloc(n * sizeof(*d))))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!rc && n)
		rc = fg_store_digest_files_ex(b->store, path, n, b->threads, b->states_every,
					      FG_STORE_DIGEST_SEEN, d, err);
	/* in file order, so the same failure is reported for any thread count */
	for (i = 0; !rc && i < n; i++) {
		if (d[i].rc) {
			if (err)
				*err = d[i].err;
			/* gone since it was added: an I/O error here */
			rc = d[i].rc == FG_ENOTFOUND ? FG_EIO : d[i].rc;
			if (err)
				err->code = rc;
		} else {
			rc = settle(b, &b->f[idx[i]], &d[i], err);
		}
	}
	for (i = 0; d && i < n; i++)
		free(d[i].states); /* those not taken */
	free(d);
	free(idx);
	free(path);
	return rc;
}

const char *fg_bundle_sha256_of(struct fg_bundle_builder *b, const char *path)
{
	struct bfile *f = find(b, path);

	if (f && f->pending && hash_pending(b, NULL))
		return NULL;
	return f ? f->sha256 : NULL;
}

static int push(struct fg_bundle_builder *b, struct bfile *f, struct fg_err *err)
{
	if (!fg_path_is_safe_rel(f->path) || !strcmp(f->path, FG_BUNDLE_JSON))
		return fg_err_set(err, FG_EINVAL, "bundle member '%s': not a usable path", f->path);
	/* what verify and exec would refuse (lib/tarball.h): the name cut so
	 * that the message keeps its end */
	if (fg_path_too_long(f->path))
		return fg_err_set(err, FG_EINVAL, "bundle member '%.160s...' (%zu bytes): its name %s",
				  f->path, strlen(f->path), fg_path_too_long(f->path));
	if (find(b, f->path))
		return fg_err_set(err, FG_EINVAL, "bundle member '%s' added twice", f->path);
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 32;
		struct bfile *nf = realloc(b->f, cap * sizeof(*nf));

		if (!nf)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		b->f = nf;
		b->cap = cap;
	}
	b->f[b->n++] = *f;
	return 0;
}

int fg_bundle_add_file(struct fg_bundle_builder *b, const char *path, const char *src,
		       struct fg_err *err)
{
	struct bfile f;
	struct stat st;
	int rc;

	memset(&f, 0, sizeof(f));
	if (stat(src, &st))
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "stat %s: %s", src,
				  strerror(errno));
	if (!S_ISREG(st.st_mode))
		return fg_err_set(err, FG_EINVAL, "%s: not a regular file", src);
	f.mode = (st.st_mode & 0111) ? 0755 : 0644;
	f.size = (unsigned long long)st.st_size;
	f.pending = 1;
	f.path = strdup(path);
	f.src = strdup(src);
	if (!f.path || !f.src)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	else
		rc = push(b, &f, err);
	if (rc) {
		free(f.path);
		free(f.src);
	}
	return rc;
}

int fg_bundle_add_blob(struct fg_bundle_builder *b, const char *path, const char *src,
		       const char *sha256_hex, struct fg_err *err)
{
	struct bfile *f;
	int rc;

	if (!fg_sha256_hex_valid(sha256_hex))
		return fg_err_set(err, FG_EINVAL, "%s: not a sha256: %.80s", path, sha256_hex);
	rc = fg_bundle_add_file(b, path, src, err);
	if (rc)
		return rc;
	f = &b->f[b->n - 1];
	if (!(f->expect = strdup(sha256_hex)))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

void fg_bundle_builder_set_store(struct fg_bundle_builder *b, struct fg_store *st)
{
	b->store = st;
}

size_t fg_bundle_builder_by_seen(const struct fg_bundle_builder *b, unsigned long long *bytes)
{
	if (bytes)
		*bytes = b->by_seen_bytes;
	return b->by_seen;
}

size_t fg_bundle_builder_by_stamp(const struct fg_bundle_builder *b, unsigned long long *bytes)
{
	if (bytes)
		*bytes = b->by_stamp_bytes;
	return b->by_stamp;
}

int fg_bundle_add_mem(struct fg_bundle_builder *b, const char *path, const void *data, size_t len,
		      int mode, struct fg_err *err)
{
	struct bfile f;
	int rc;

	memset(&f, 0, sizeof(f));
	if (mode != 0644 && mode != 0755)
		return fg_err_set(err, FG_EINVAL, "%s: mode %o is not 0644 or 0755", path, mode);
	f.mode = mode;
	f.size = len;
	f.len = len;
	rc = fg_sha256_mem(data, len, f.raw, err);
	if (rc)
		return rc;
	fg_hex_encode(f.raw, 32, f.sha256);
	f.path = strdup(path);
	f.data = malloc(len ? len : 1);
	if (!f.path || !f.data)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	else {
		if (len)
			memcpy(f.data, data, len);
		rc = push(b, &f, err);
	}
	if (rc) {
		free(f.path);
		free(f.data);
	}
	return rc;
}

static int add_tree_rec(struct fg_bundle_builder *b, struct fg_buf *rel, struct fg_buf *abs,
			size_t *n, unsigned long long *bytes, int depth, struct fg_err *err)
{
	DIR *d;
	struct dirent *de;
	size_t rel_len = rel->len, abs_len = abs->len;
	int rc = 0;

	if (depth > 64)
		return fg_err_set(err, FG_EINVAL, "%s: folders nested too deep", abs->data);
	d = opendir(abs->data);
	if (!d)
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "open folder %s: %s",
				  abs->data, strerror(errno));
	while (!rc && (de = readdir(d))) {
		struct stat lst, st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		rel->len = rel_len;
		rel->data[rel_len] = '\0';
		abs->len = abs_len;
		abs->data[abs_len] = '\0';
		rc = fg_buf_printf(rel, err, "/%s", de->d_name);
		if (!rc)
			rc = fg_buf_printf(abs, err, "/%s", de->d_name);
		if (rc)
			break;
		if (lstat(abs->data, &lst) || stat(abs->data, &st)) {
			rc = fg_err_set(err, FG_EIO, "stat %s: %s", abs->data, strerror(errno));
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			if (S_ISLNK(lst.st_mode))
				rc = fg_err_set(err, FG_EINVAL, "%s: a symlinked folder is not packed",
						abs->data);
			else
				rc = add_tree_rec(b, rel, abs, n, bytes, depth + 1, err);
		} else if (S_ISREG(st.st_mode)) {
			rc = fg_bundle_add_file(b, rel->data, abs->data, err);
			if (!rc) {
				(*n)++;
				*bytes += b->f[b->n - 1].size;
			}
		} else
			rc = fg_err_set(err, FG_EINVAL, "%s: not a regular file or folder", abs->data);
	}
	closedir(d);
	return rc;
}

int fg_bundle_add_tree(struct fg_bundle_builder *b, const char *prefix, const char *dir,
		       size_t *n_added, unsigned long long *bytes, struct fg_err *err)
{
	struct fg_buf rel = FG_BUF_INIT, abs = FG_BUF_INIT;
	size_t n = 0;
	unsigned long long total = 0;
	int rc;

	rc = fg_buf_puts(&rel, prefix, err);
	if (!rc)
		rc = fg_buf_puts(&abs, dir, err);
	while (!rc && abs.len > 1 && abs.data[abs.len - 1] == '/')
		abs.data[--abs.len] = '\0';
	if (!rc)
		rc = add_tree_rec(b, &rel, &abs, &n, &total, 0, err);
	if (!rc && n == 0)
		rc = fg_err_set(err, FG_EINVAL, "%s: no files to pack", dir);
	if (n_added)
		*n_added = n;
	if (bytes)
		*bytes = total;
	fg_buf_release(&rel);
	fg_buf_release(&abs);
	return rc;
}

static int cmp_bfile(const void *a, const void *b)
{
	return strcmp(((const struct bfile *)a)->path, ((const struct bfile *)b)->path);
}

/* A files entry's "sha256_states" (docs/formats/bundle.md, "Chain states"),
 * when the file has any: -1 when out of memory. */
static int add_states(cJSON *o, const struct bfile *f, unsigned long long every)
{
	cJSON *st, *arr;
	size_t i;

	if (!f->n_states)
		return 0;
	if (!(st = cJSON_AddObjectToObject(o, "sha256_states")) ||
	    !cJSON_AddNumberToObject(st, "every", (double)every) ||
	    !(arr = cJSON_AddArrayToObject(st, "states")))
		return -1;
	for (i = 0; i < f->n_states; i++) {
		char hex[FG_SHA256_HEX_LEN + 1];
		cJSON *s;

		fg_hex_encode(f->states + 32 * i, 32, hex);
		if (!(s = cJSON_CreateString(hex)))
			return -1;
		cJSON_AddItemToArray(arr, s);
	}
	return 0;
}

int fg_bundle_builder_write(struct fg_bundle_builder *b, const char *out, int level,
			    long long mtime, char id_hex[FG_SHA256_HEX_LEN + 1], struct fg_err *err)
{
	struct fg_tarball_writer *w = NULL;
	struct fg_buf text = FG_BUF_INIT;
	cJSON *files;
	uint8_t id[32];
	size_t i;
	int rc;

	rc = hash_pending(b, err);
	if (rc)
		return rc;
	qsort(b->f, b->n, sizeof(*b->f), cmp_bfile);
	cJSON_DeleteItemFromObject(b->meta, "schema");
	cJSON_DeleteItemFromObject(b->meta, "files");
	if (!cJSON_AddNumberToObject(b->meta, "schema", FG_BUNDLE_SCHEMA) ||
	    !(files = cJSON_AddArrayToObject(b->meta, "files")))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (i = 0; i < b->n; i++) {
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddStringToObject(o, "path", b->f[i].path) ||
		    !cJSON_AddNumberToObject(o, "size", (double)b->f[i].size) ||
		    !cJSON_AddStringToObject(o, "sha256", b->f[i].sha256) ||
		    !cJSON_AddStringToObject(o, "mode", b->f[i].mode == 0755 ? "0755" : "0644") ||
		    add_states(o, &b->f[i], b->states_every)) {
			cJSON_Delete(o);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
		cJSON_AddItemToArray(files, o);
	}
	rc = fg_json_write(&text, b->meta, 1, err);
	if (!rc)
		rc = fg_tarball_writer_new(&w, level, mtime, err);
	if (!rc)
		/* more than one thread: zstd compresses on its own thread while
		 * this one reads, tars and hashes (the same bytes either way) */
		rc = fg_tarball_writer_set_threads(w, b->threads, err);
	if (!rc)
		rc = fg_tarball_add_mem(w, FG_BUNDLE_JSON, text.data, text.len, 0644, err);
	for (i = 0; !rc && i < b->n; i++) {
		if (b->f[i].src)
			rc = fg_tarball_add_file(w, b->f[i].path, b->f[i].src, &b->f[i].stamp, err);
		else
			rc = fg_tarball_add_mem(w, b->f[i].path, b->f[i].data, b->f[i].len,
						b->f[i].mode, err);
	}
	if (!rc)
		rc = fg_tarball_writer_finish(w, out, id, err);
	if (!rc)
		fg_hex_encode(id, 32, id_hex);
	fg_tarball_writer_free(w);
	fg_buf_release(&text);
	return rc;
}

/* ---- checking ---- */

struct seen {
	char *path;
	unsigned long long size;
	char sha256[FG_SHA256_HEX_LEN + 1];
	int mode;
	int hashed; /* sha256 is the member's (hashing was asked for it) */
};

struct collect {
	struct seen *s;
	size_t n, cap;
	/* bundle.json's manifest (borrowed, NULL: none): a scan keeps its
	 * bytes (kept, got) for check_manifest */
	const char *keep;
	struct fg_buf kept;
	int got;
};

/* fg_tarball_read_opts.keep: the manifest's bytes, up to what a manifest
 * may hold (called from the lanes' threads: reads only) */
static size_t keep_manifest(void *user, const char *path)
{
	const struct collect *c = user;

	return c->keep && !strcmp(path, c->keep) ? FG_MANIFEST_MAX_BYTES : 0;
}

static int collect_entry(void *user, const struct fg_tarball_entry *e, struct fg_err *err)
{
	struct collect *c = user;

	if (e->is_dir)
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct seen *ns = realloc(c->s, cap * sizeof(*ns));

		if (!ns)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		c->s = ns;
		c->cap = cap;
	}
	c->s[c->n].path = strdup(e->path);
	if (!c->s[c->n].path)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	c->s[c->n].size = e->size;
	c->s[c->n].mode = e->mode;
	c->s[c->n].hashed = e->hashed;
	fg_hex_encode(e->sha256, 32, c->s[c->n].sha256);
	c->n++;
	if (e->content && c->keep && !strcmp(e->path, c->keep)) {
		fg_buf_reset(&c->kept);
		if (fg_buf_append(&c->kept, e->content, (size_t)e->size, err))
			return err ? err->code : FG_ENOMEM;
		c->got = 1;
	}
	return 0;
}

static int problem(struct fg_bundle *b, const char *path, const char *what, struct fg_err *err)
{
	struct fg_bundle_problem *np = realloc(b->problems, (b->n_problems + 1) * sizeof(*np));

	if (!np)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	b->problems = np;
	np[b->n_problems].path = strdup(path);
	np[b->n_problems].what = strdup(what);
	b->n_problems++;
	return 0;
}

void fg_bundle_rm_rf(const char *path)
{
	fg_rm_tree(path);
}

/* What a files entry of bundle.json lacks (docs/formats/bundle.md: path,
 * size, sha256 and mode, each of its type), as a phrase; NULL when whole. */
static const char *entry_lacks(const cJSON *f, const char *path)
{
	const char *sha = fg_json_str(f, "sha256"), *mode = fg_json_str(f, "mode");
	long long size;

	if (!cJSON_IsObject(f))
		return "is not an object";
	if (!path || !fg_path_is_safe_rel(path))
		return "gives no path (a safe relative path)";
	if (fg_json_int(f, "size", &size) || size < 0)
		return "gives no size (an integer of bytes)";
	if (!sha || !fg_sha256_hex_valid(sha))
		return "gives no sha256 (64 lowercase hex digits)";
	if (!mode || (strcmp(mode, "0644") && strcmp(mode, "0755")))
		return "gives no mode (\"0644\" or \"0755\")";
	return NULL;
}

struct listed_path {
	const char *path;
	size_t at; /* its entry's place in files[] */
};

static int cmp_listed(const void *a, const void *b)
{
	const struct listed_path *x = a, *y = b;
	int d = strcmp(x->path, y->path);

	return d ? d : x->at < y->at ? -1 : x->at > y->at;
}

/* The files entries whose path an earlier entry lists already: dup[i] = 1
 * (dup has room for every entry). */
static int find_dups(const cJSON *files, char *dup, size_t n, struct fg_err *err)
{
	struct listed_path *p = calloc(n ? n : 1, sizeof(*p));
	const cJSON *f;
	size_t i = 0, k = 0;

	if (!p)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	cJSON_ArrayForEach(f, files) {
		if (fg_json_str(f, "path") && i < n) {
			p[k].path = fg_json_str(f, "path");
			p[k++].at = i;
		}
		i++;
	}
	qsort(p, k, sizeof(*p), cmp_listed);
	for (i = 1; i < k; i++)
		if (!strcmp(p[i - 1].path, p[i].path))
			dup[p[i].at] = 1;
	free(p);
	return 0;
}

/* 1 when bundle.json's files list path */
static int lists(const cJSON *files, const char *path)
{
	const cJSON *f;

	cJSON_ArrayForEach(f, files)
		if (fg_json_str(f, "path") && !strcmp(fg_json_str(f, "path"), path))
			return 1;
	return 0;
}

/* The other paths bundle.json gives, which exec, serve and a replay read:
 * each, where present, must be a string naming a place inside the bundle
 * (folders: components[].path, model, drafter) or one of its files
 * (manifest, golden's transcript and eval); else a problem naming it, so
 * that verify refuses what they would fail on. */
static int check_meta_paths(struct fg_bundle *b, const cJSON *files, struct fg_err *err)
{
	static const char *const folders[] = { "model", "drafter" };
	static const char *const listed[][2] = { { NULL, "manifest" },
						 { "golden", "transcript" },
						 { "golden", "eval" } };
	const cJSON *c, *v;
	char what[600];
	size_t i = 0, k;
	int rc = 0;

	cJSON_ArrayForEach(c, fg_json_arr(b->meta, "components")) {
		v = cJSON_GetObjectItemCaseSensitive(c, "path");
		if (v && (!cJSON_IsString(v) || !fg_path_is_safe_rel(v->valuestring))) {
			snprintf(what, sizeof(what), "components[%zu].path '%.400s' is not a path inside the bundle",
				 i, cJSON_IsString(v) ? v->valuestring : "(not a string)");
			rc = problem(b, FG_BUNDLE_JSON, what, err);
		}
		i++;
	}
	for (k = 0; !rc && k < sizeof(folders) / sizeof(*folders); k++) {
		v = cJSON_GetObjectItemCaseSensitive(b->meta, folders[k]);
		if (v && (!cJSON_IsString(v) || !fg_path_is_safe_rel(v->valuestring))) {
			snprintf(what, sizeof(what), "%s '%.400s' is not a path inside the bundle", folders[k],
				 cJSON_IsString(v) ? v->valuestring : "(not a string)");
			rc = problem(b, FG_BUNDLE_JSON, what, err);
		}
	}
	for (k = 0; !rc && k < sizeof(listed) / sizeof(*listed); k++) {
		const cJSON *o = listed[k][0] ? fg_json_obj(b->meta, listed[k][0]) : b->meta;

		v = cJSON_GetObjectItemCaseSensitive(o, listed[k][1]);
		if (v && (!cJSON_IsString(v) || !lists(files, v->valuestring))) {
			snprintf(what, sizeof(what), "%s%s%s '%.400s' is not one of its files",
				 listed[k][0] ? listed[k][0] : "", listed[k][0] ? "." : "", listed[k][1],
				 cJSON_IsString(v) ? v->valuestring : "(not a string)");
			rc = problem(b, FG_BUNDLE_JSON, what, err);
		}
	}
	return rc;
}

/* The manifest bundle.json names, once every member checked out (so it is
 * the member listed, with its digest): exec reads it for the env and the
 * serve command, so it must be one fg_manifest_parse accepts, else a
 * problem naming it and what is wrong (verify refuses what exec would fail
 * on). Its bytes: the extracted file (dir, not NULL), else what the scan
 * kept (c->kept). */
static int check_manifest(struct fg_bundle *b, const struct collect *c, const char *dir,
			  struct fg_err *err)
{
	const char *mp = fg_json_str(b->meta, "manifest");
	struct fg_buf path = FG_BUF_INIT, text = FG_BUF_INIT;
	struct fg_manifest *m = NULL;
	struct fg_err e;
	char what[FG_ERR_MSG_MAX + 64];
	const char *why;
	size_t skip = 0;
	int rc = 0, bad;

	if (!mp || b->n_problems)
		return 0;
	memset(&e, 0, sizeof(e));
	if (dir) {
		rc = fg_path_join(&path, dir, mp, err);
		bad = rc ? 0 : fg_file_read(path.data, FG_MANIFEST_MAX_BYTES, &text, &e);
		if (bad == FG_EINVAL)
			fg_err_set(&e, FG_EFORMAT, "larger than %zu MiB", FG_MANIFEST_MAX_BYTES >> 20);
		else if (bad && bad != FG_EFORMAT)
			rc = fg_err_set(err, bad, "%s", e.msg); /* an I/O error, not the bundle's */
	} else if (c->got) {
		bad = fg_buf_append(&text, c->kept.data ? c->kept.data : "", c->kept.len, err);
		rc = bad;
	} else {
		/* listed, matched, not kept: more than a manifest may hold */
		bad = fg_err_set(&e, FG_EFORMAT, "larger than %zu MiB", FG_MANIFEST_MAX_BYTES >> 20);
	}
	if (!rc && !bad && (bad = fg_manifest_parse(&m, text.data ? text.data : "", text.len, mp, &e)) ==
				       FG_ENOMEM)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!rc && bad) {
		/* fg_manifest_parse names it first: say it once */
		if (!strncmp(e.msg, mp, strlen(mp)) && !strncmp(e.msg + strlen(mp), ": ", 2))
			skip = strlen(mp) + 2;
		why = e.msg[0] ? e.msg + skip : fg_err_name(bad);
		snprintf(what, sizeof(what), "not a valid manifest: %s", why);
		rc = problem(b, mp, what, err);
	}
	fg_manifest_free(m);
	fg_buf_release(&path);
	fg_buf_release(&text);
	return rc;
}

static int compare(struct fg_bundle *b, struct collect *c, struct fg_err *err)
{
	const cJSON *files = fg_json_arr(b->meta, "files"), *f;
	long long schema;
	size_t i, n_entries, at = 0;
	int rc = 0;
	char *listed = calloc(c->n ? c->n : 1, 1), *dup = NULL;

	if (!listed)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if (fg_json_int(b->meta, "schema", &schema) || schema != FG_BUNDLE_SCHEMA) {
		free(listed);
		return fg_err_set(err, FG_EUNSUPPORTED, "bundle.json: schema is not %d",
				  FG_BUNDLE_SCHEMA);
	}
	if (!files) {
		free(listed);
		return fg_err_set(err, FG_EFORMAT, "bundle.json: no files array");
	}
	n_entries = (size_t)cJSON_GetArraySize(files);
	dup = calloc(n_entries ? n_entries : 1, 1);
	if (!dup)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	else
		rc = find_dups(files, dup, n_entries, err);
	cJSON_ArrayForEach(f, files) {
		const char *path = fg_json_str(f, "path"), *sha = fg_json_str(f, "sha256");
		const char *lacks = entry_lacks(f, path);
		long long size = 0;
		size_t j;

		if (rc)
			break;
		at++;
		if (lacks && (!path || !cJSON_IsObject(f))) {
			char what[160];

			/* nothing to name it by but its place */
			snprintf(what, sizeof(what), "files[%zu] %s", at - 1, lacks);
			rc = problem(b, FG_BUNDLE_JSON, what, err);
			continue;
		}
		for (j = 0; j < c->n; j++)
			if (!strcmp(c->s[j].path, path))
				break;
		if (j < c->n)
			listed[j] = 1; /* named once, by what is wrong with its entry */
		if (dup[at - 1]) {
			rc = problem(b, path, "listed twice in bundle.json", err);
			continue;
		}
		if (lacks) {
			char what[160];

			snprintf(what, sizeof(what), "bundle.json %s", lacks);
			rc = problem(b, path, what, err);
			continue;
		}
		fg_json_int(f, "size", &size);
		b->n_files++;
		b->bytes += (unsigned long long)size;
		if (j == c->n)
			rc = problem(b, path, "missing from the archive", err);
		else if (c->s[j].size != (unsigned long long)size)
			rc = problem(b, path, "size differs from bundle.json", err);
		else if (c->s[j].hashed && strcmp(c->s[j].sha256, sha))
			rc = problem(b, path, "sha256 differs from bundle.json", err);
		else if (strcmp(fg_json_str(f, "mode"), c->s[j].mode == 0755 ? "0755" : "0644"))
			rc = problem(b, path, "mode differs from bundle.json", err);
	}
	for (i = 0; !rc && i < c->n; i++)
		if (!listed[i] && strcmp(c->s[i].path, FG_BUNDLE_JSON))
			rc = problem(b, c->s[i].path, "in the archive but not in bundle.json", err);
	if (!rc)
		rc = check_meta_paths(b, files, err);
	free(listed);
	free(dup);
	return rc;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void collect_free(struct collect *c)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		free(c->s[i].path);
	free(c->s);
	fg_buf_release(&c->kept);
	memset(c, 0, sizeof(*c));
}

static int corrupt(int rc, const char *fgb, struct fg_err *err)
{
	if (rc == FG_EFORMAT || rc == FG_EHASH) {
		fg_err_wrap(err, "bundle %s is corrupt or hostile", fgb);
		err->code = FG_EMISMATCH;
		rc = FG_EMISMATCH;
	}
	return rc;
}

/* bundle.json that is not ours to read (over FG_BUNDLE_JSON_MAX, not JSON,
 * no files array, an entry without path, size or sha256) makes the bundle
 * as corrupt as a damaged archive: a mismatch, naming the bundle, and not a
 * failure to run (exit 1), which it was; rc FG_EINVAL is the size limit of
 * the buffer or file read (the only EINVAL those reads give) */
static int corrupt_json(int rc, const char *fgb, struct fg_err *err)
{
	if (rc == FG_EINVAL)
		rc = fg_err_set(err, FG_EFORMAT, "bundle.json: larger than %zu bytes",
				FG_BUNDLE_JSON_MAX);
	return corrupt(rc, fgb, err);
}

/* With an expected id that the archive did not match: a second pass that
 * hashes every member names the files that differ (none when only
 * bundle.json or a tar header was changed), then the id itself. */
static int name_the_files(struct fg_bundle *b, const char *fgb, struct fg_err *err)
{
	struct collect c = { NULL, 0, 0, NULL, FG_BUF_INIT, 0 };
	struct fg_tarball_read_opts o;
	char what[200];
	size_t i;
	int rc;

	for (i = 0; i < b->n_problems; i++) {
		free(b->problems[i].path);
		free(b->problems[i].what);
	}
	b->n_problems = 0;
	b->n_files = 0;
	b->bytes = 0;
	memset(&o, 0, sizeof(o));
	o.hash = 1;
	rc = corrupt(fg_tarball_scan_opts(fgb, &o, collect_entry, &c, NULL, err), fgb, err);
	if (!rc)
		rc = compare(b, &c, err);
	collect_free(&c);
	snprintf(what, sizeof(what), "bundle id %s is not the expected %s", b->id, b->expect_id);
	if (!rc)
		rc = problem(b, "(archive)", what, err);
	return rc;
}

/* The one pass for a check against an expected id: the identity hash over
 * the tar, and bundle.json's own digest (tying the copy read first to the
 * bytes the id covers); member contents are not hashed again. */
static void id_pass_opts(struct fg_tarball_read_opts *o, const char *expect_id)
{
	memset(o, 0, sizeof(*o));
	if (expect_id) {
		o->hash = 1;
		o->hash_only = FG_BUNDLE_JSON;
	} else {
		o->hash = 1;
		o->id_thread = 1; /* informational here: beside the member digests */
	}
}

static int set_expect(struct fg_bundle *b, const char *expect_id, struct fg_err *err)
{
	if (!expect_id)
		return 0;
	if (!fg_sha256_hex_valid(expect_id))
		return fg_err_set(err, FG_EINVAL, "expected bundle id: not 64 lowercase hex digits");
	memcpy(b->expect_id, expect_id, FG_SHA256_HEX_LEN + 1);
	return 0;
}

/* bundle.json as hashed during the pass must be the text parsed */
static int json_is_hashed_copy(const struct collect *c, const struct fg_buf *text,
			       const char *fgb, struct fg_err *err)
{
	uint8_t d[32];
	char hex[FG_SHA256_HEX_LEN + 1];
	size_t i;
	int rc = fg_sha256_mem(text->data, text->len, d, err);

	if (rc)
		return rc;
	fg_hex_encode(d, 32, hex);
	for (i = 0; i < c->n; i++)
		if (!strcmp(c->s[i].path, FG_BUNDLE_JSON))
			return c->s[i].hashed && !strcmp(c->s[i].sha256, hex)
				       ? 0
				       : fg_err_set(err, FG_EMISMATCH,
						    "bundle %s: bundle.json changed while being read", fgb);
	return fg_err_set(err, FG_EMISMATCH, "bundle %s: no bundle.json", fgb);
}

/* b->dir no longer removed by a signal (gone, or the caller's to keep) */
static void untrack(struct fg_bundle *b)
{
	if (b->tmp_slot)
		fg_tmp_untrack(b->tmp_slot - 1);
	b->tmp_slot = 0;
}

int fg_bundle_open(struct fg_bundle **out, const char *fgb, const char *dest, struct fg_err *err)
{
	return fg_bundle_open_id(out, fgb, dest, NULL, 1, err);
}

static int open_bundle(struct fg_bundle **out, const char *fgb, const char *dest,
		       const char *expect_id, int want_id, int threads, struct fg_err *err);
static void chains_of(const cJSON *meta, struct fg_tarball_chain **out, size_t *n, uint8_t **mem);

int fg_bundle_open_id(struct fg_bundle **out, const char *fgb, const char *dest,
		      const char *expect_id, int threads, struct fg_err *err)
{
	return open_bundle(out, fgb, dest, expect_id, 1, threads, err);
}

int fg_bundle_open_files(struct fg_bundle **out, const char *fgb, const char *dest, int threads,
			 struct fg_err *err)
{
	return open_bundle(out, fgb, dest, NULL, 0, threads, err);
}

/* Extracted in lanes on threads threads where the bundle allows, unless an
 * expected id is the check; want_id 0 (no expected id only): member digests
 * alone, b->id "" */
static int open_bundle(struct fg_bundle **out, const char *fgb, const char *dest,
		       const char *expect_id, int want_id, int threads, struct fg_err *err)
{
	struct fg_bundle *b = calloc(1, sizeof(*b));
	struct collect c = { NULL, 0, 0, NULL, FG_BUF_INIT, 0 };
	struct fg_buf path = FG_BUF_INIT, text = FG_BUF_INIT;
	struct fg_tarball_read_opts o;
	struct fg_tarball_chain *chains = NULL;
	uint8_t id[32], *chain_mem = NULL;
	cJSON *pre_meta = NULL;
	double t0 = now_s();
	int rc = 0;

	*out = NULL;
	if (!b)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = set_expect(b, expect_id, err);
	if (rc)
		goto fail;
	if (dest)
		rc = fg_buf_puts(&path, dest, err);
	else {
		const char *tmp = getenv("TMPDIR");
		int slot;

		/* "<TMPDIR>/fgpack-bundle-<pid>", tracked from here to
		 * fg_bundle_free, so that a signal while it is checked or used
		 * removes it, and a SIGKILL's is swept by a later run */
		rc = fg_tmp_pid_dir_make(tmp && *tmp ? tmp : "/tmp", "fgpack-bundle", &path, &slot, err);
		if (!rc) {
			/* extraction wants to create the folder itself; the
			 * name stays tracked: a signal removes what it renames
			 * there */
			rmdir(path.data);
			b->tmp_slot = slot + 1;
			b->remove_dir = 1;
		}
	}
	if (rc)
		goto fail;
	b->dir = fg_buf_detach(&path, NULL);
	id_pass_opts(&o, expect_id);
	if (expect_id)
		o.hash = 0; /* bundle.json is read back from what was extracted */
	else if (!fg_tarball_read_member(fgb, FG_BUNDLE_JSON, FG_BUNDLE_JSON_MAX, &text, NULL) &&
		 !fg_json_parse(&pre_meta, text.data, text.len, FG_BUNDLE_JSON, NULL)) {
		/* its chain states, for the lanes to cut a large member at
		 * (trusted for nothing: a lane that starts from one checks it) */
		chains_of(pre_meta, &chains, &o.n_chains, &chain_mem);
		o.chains = chains;
	}
	fg_buf_reset(&text);
	o.threads = threads;
	o.lanes = &b->lanes;
	rc = fg_tarball_extract_opts(fgb, b->dir, &o, collect_entry, &c,
				     expect_id || want_id ? id : NULL, err);
	free(chains);
	free(chain_mem);
	cJSON_Delete(pre_meta);
	if (rc) {
		rc = corrupt(rc, fgb, err);
		b->remove_dir = 0; /* nothing was left there */
		untrack(b);
		goto fail;
	}
	/* a caller's dest too is ours alone (extraction made it), and a copy
	 * that does not check out must not stay there, where it would look
	 * like a usable bundle and block the next try ("already exists"):
	 * removed on a signal too until it checked out */
	b->remove_dir = 1;
	if (dest)
		b->tmp_slot = fg_tmp_track_dir(b->dir) + 1;
	if (expect_id || want_id)
		fg_hex_encode(id, 32, b->id);
	rc = fg_path_join(&path, b->dir, FG_BUNDLE_JSON, err);
	if (!rc)
		rc = corrupt_json(fg_file_read(path.data, FG_BUNDLE_JSON_MAX, &text, err), fgb, err);
	if (rc == FG_ENOTFOUND)
		rc = fg_err_set(err, FG_EMISMATCH, "bundle %s: no bundle.json", fgb);
	if (!rc)
		rc = corrupt_json(fg_json_parse(&b->meta, text.data, text.len, "bundle.json", err),
				  fgb, err);
	if (!rc)
		rc = corrupt_json(compare(b, &c, err), fgb, err);
	if (!rc && expect_id) {
		b->by_id = !strcmp(b->id, b->expect_id);
		if (!b->by_id)
			rc = name_the_files(b, fgb, err);
	}
	if (!rc)
		rc = check_manifest(b, &c, b->dir, err);
	b->seconds = now_s() - t0;
	if (rc)
		goto fail;
	collect_free(&c);
	fg_buf_release(&path);
	fg_buf_release(&text);
	if (dest && !b->n_problems) {
		b->remove_dir = 0; /* it checked out: the caller's to keep */
		untrack(b);
	}
	*out = b;
	if (b->n_problems)
		return fg_err_set(err, FG_EMISMATCH, "%s: %s", b->problems[0].path, b->problems[0].what);
	return 0;
fail:
	collect_free(&c);
	fg_buf_release(&path);
	fg_buf_release(&text);
	fg_bundle_free(b);
	return rc;
}

int fg_bundle_scan(struct fg_bundle **out, const char *fgb, struct fg_err *err)
{
	return fg_bundle_scan_id(out, fgb, NULL, 1, err);
}

/* One files entry's chain states, if they are well formed: 0 with c set
 * (its states decoded into st, room for as many as the entry lists; st
 * NULL: only checked), or -1 (absent or malformed: the entry gets none). */
static int chain_of(const cJSON *f, struct fg_tarball_chain *c, uint8_t *st)
{
	const cJSON *cs = fg_json_obj(f, "sha256_states"), *arr = fg_json_arr(cs, "states"), *it;
	long long size, every;
	size_t n = 0;

	if (!cs || !arr || !(c->path = fg_json_str(f, "path")) || fg_json_int(f, "size", &size) ||
	    fg_json_int(cs, "every", &every) || size <= 0 || every <= 0 || every % 64 ||
	    (unsigned long long)cJSON_GetArraySize(arr) != (unsigned long long)((size - 1) / every))
		return -1;
	cJSON_ArrayForEach(it, arr)
	{
		if (!cJSON_IsString(it) || !fg_sha256_hex_valid(it->valuestring) ||
		    (st && fg_hex_decode(it->valuestring, st + 32 * n, 32)))
			return -1;
		n++;
	}
	c->size = (unsigned long long)size;
	c->every = (unsigned long long)every;
	c->states = st;
	c->n = n;
	return n ? 0 : -1;
}

/* The chain states bundle.json lists (docs/formats/bundle.md, "Chain
 * states"), for the lanes to cut members at: entries whose states are
 * malformed get none (the states only make the check faster; they prove
 * nothing, and a lane that starts from one checks it). *mem holds them; the
 * paths are meta's. Out of memory: none. */
static void chains_of(const cJSON *meta, struct fg_tarball_chain **out, size_t *n, uint8_t **mem)
{
	const cJSON *files = fg_json_arr(meta, "files"), *f;
	size_t total = 0, k = 0;

	*out = NULL;
	*n = 0;
	*mem = NULL;
	/* well-formed entries only: each state is a 64-digit string in the
	 * text, so what is allocated is bounded by bundle.json's size */
	cJSON_ArrayForEach(f, files)
	{
		struct fg_tarball_chain c;

		if (!chain_of(f, &c, NULL)) {
			total += c.n;
			k++;
		}
	}
	if (!k || !(*out = calloc(k, sizeof(**out))) || !(*mem = malloc(32 * total))) {
		free(*out);
		*out = NULL;
		return;
	}
	total = 0;
	cJSON_ArrayForEach(f, files)
	{
		if (!chain_of(f, &(*out)[*n], *mem + 32 * total)) {
			total += (*out)[*n].n;
			(*n)++;
		}
	}
}

/* want_id 0 (no expected id only): member digests alone, b->id "", read
 * in lanes on threads threads where the bundle allows */
static int scan(struct fg_bundle **out, const char *fgb, const char *expect_id, int want_id,
		int threads, struct fg_err *err)
{
	struct fg_bundle *b = calloc(1, sizeof(*b));
	struct collect c = { NULL, 0, 0, NULL, FG_BUF_INIT, 0 };
	struct fg_buf text = FG_BUF_INIT;
	struct fg_tarball_read_opts o;
	struct fg_tarball_chain *chains = NULL;
	uint8_t id[32], *chain_mem = NULL;
	double t0 = now_s();
	int rc;

	*out = NULL;
	if (!b)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = set_expect(b, expect_id, err);
	/* a damaged archive is a mismatch here as in the pass below (a file
	 * that is no bundle at all gave exit 1 here, 3 when extracted) */
	if (!rc)
		rc = corrupt_json(fg_tarball_read_member(fgb, FG_BUNDLE_JSON, FG_BUNDLE_JSON_MAX,
							 &text, err),
				  fgb, err);
	/* not found: the member, unless the archive itself is missing (then the
	 * open error stands: a failure, not a mismatch) */
	if (rc == FG_ENOTFOUND && !access(fgb, F_OK))
		rc = fg_err_set(err, FG_EMISMATCH, "bundle %s: no bundle.json", fgb);
	if (!rc)
		rc = corrupt_json(fg_json_parse(&b->meta, text.data, text.len, "bundle.json", err),
				  fgb, err);
	if (!rc) {
		id_pass_opts(&o, expect_id);
		o.lanes = &b->lanes;
		o.threads = threads;
		/* the manifest's bytes, for check_manifest (in lanes too) */
		c.keep = fg_json_str(b->meta, "manifest");
		if (c.keep)
			o.keep = keep_manifest;
		chains_of(b->meta, &chains, &o.n_chains, &chain_mem);
		o.chains = chains;
		rc = corrupt(fg_tarball_scan_opts(fgb, &o, collect_entry, &c,
						  expect_id || want_id ? id : NULL, err),
			     fgb, err);
		free(chains);
		free(chain_mem);
	}
	if (!rc) {
		if (expect_id || want_id)
			fg_hex_encode(id, 32, b->id);
		rc = corrupt_json(compare(b, &c, err), fgb, err);
	}
	if (!rc && expect_id) {
		b->by_id = !strcmp(b->id, b->expect_id);
		if (b->by_id)
			rc = json_is_hashed_copy(&c, &text, fgb, err);
		else
			rc = name_the_files(b, fgb, err);
	}
	if (!rc)
		rc = check_manifest(b, &c, NULL, err);
	b->seconds = now_s() - t0;
	collect_free(&c);
	fg_buf_release(&text);
	if (rc) {
		fg_bundle_free(b);
		return rc;
	}
	*out = b;
	if (b->n_problems)
		return fg_err_set(err, FG_EMISMATCH, "%s: %s", b->problems[0].path, b->problems[0].what);
	return 0;
}

int fg_bundle_scan_id(struct fg_bundle **out, const char *fgb, const char *expect_id, int threads,
		      struct fg_err *err)
{
	return scan(out, fgb, expect_id, 1, threads, err);
}

int fg_bundle_scan_files(struct fg_bundle **out, const char *fgb, int threads,
			 struct fg_err *err)
{
	return scan(out, fgb, NULL, 0, threads, err);
}

void fg_bundle_free(struct fg_bundle *b)
{
	size_t i;

	if (!b)
		return;
	if (b->remove_dir)
		fg_bundle_rm_rf(b->dir);
	untrack(b); /* after the removal: a signal during it still removes */
	free(b->dir);
	cJSON_Delete(b->meta);
	for (i = 0; i < b->n_problems; i++) {
		free(b->problems[i].path);
		free(b->problems[i].what);
	}
	free(b->problems);
	free(b);
}

int fg_bundle_path(struct fg_buf *out, const struct fg_bundle *b, const char *rel,
		   struct fg_err *err)
{
	if (!fg_path_is_safe_rel(rel))
		return fg_err_set(err, FG_EINVAL, "'%s' is not a bundle path", rel ? rel : "");
	return fg_path_join(out, b->dir, rel, err);
}

/* 1 when settings' "honoured" list names env key key. */
static int honours(const cJSON *st, const char *key)
{
	const cJSON *h;

	cJSON_ArrayForEach(h, fg_json_arr(st, "honoured"))
		if (cJSON_IsString(h) && !strcmp(h->valuestring, key))
			return 1;
	return 0;
}

int fg_bundle_drafter(struct fg_buf *dir, int *k, int *top_k, const struct fg_bundle *b, int def_k, int max_k,
		      int max_top_k, struct fg_err *err)
{
	const char *rel = fg_json_str(b->meta, "drafter");
	const cJSON *st = fg_json_obj(b->meta, "settings");
	long long v;

	fg_buf_reset(dir);
	*k = def_k;
	*top_k = 0;
	if (!rel)
		return 0;
	if (st && !fg_json_int(st, "num_speculative_tokens", &v))
		*k = v < 0 ? 0 : v > max_k ? max_k : (int)v;
	if (st && honours(st, "CENTROID_TOP_K")) {
		if (!cJSON_GetObjectItemCaseSensitive(st, "centroid_top_k"))
			return fg_err_set(err, FG_EFORMAT, "bundle.json: settings honour CENTROID_TOP_K but have no "
					  "centroid_top_k");
		if (fg_json_int(st, "centroid_top_k", &v) || v < 0 || v > max_top_k) {
			char *t = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(st, "centroid_top_k"));
			int rc = fg_err_set(err, FG_EFORMAT, "bundle.json: settings centroid_top_k = %s is not an "
					    "integer in 0..%d (the drafter's centroid top-k, manifest env "
					    "CENTROID_TOP_K)", t ? t : "?", max_top_k);

			cJSON_free(t);
			return rc;
		}
		*top_k = (int)v;
	}
	return fg_bundle_path(dir, b, rel, err);
}

/* settings' key, when present, as an integer in 1..hi into *out (left alone
 * when absent) */
static int setting(int *out, const cJSON *st, const char *key, long long hi, struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, key);
	long long x;

	if (!v)
		return 0;
	if (fg_json_int(st, key, &x) || x < 1 || x > hi) {
		char *t = cJSON_PrintUnformatted(v);
		int rc = fg_err_set(err, FG_EFORMAT, "bundle.json: settings %s = %s is not an integer in 1..%lld",
				    key, t ? t : "?", hi);

		cJSON_free(t);
		return rc;
	}
	*out = (int)x;
	return 0;
}

int fg_bundle_engine_settings(int *sliding_window, int *max_seq, const struct fg_bundle *b,
			      struct fg_err *err)
{
	const cJSON *st = fg_json_obj(b->meta, "settings");
	int rc;

	if (!st)
		return 0;
	rc = setting(sliding_window, st, "sliding_window", FG_BUNDLE_MAX_SLIDING_WINDOW, err);
	return rc ? rc : setting(max_seq, st, "max_model_len", FG_BUNDLE_MAX_MODEL_LEN, err);
}

void fg_bundle_unhonoured_note(char *out, size_t cap, const cJSON *u)
{
	const char *k = fg_json_str(u, "key"), *v = fg_json_str(u, "value"), *why = fg_json_str(u, "why");

	if (!cap)
		return;
	snprintf(out, cap, "%s=%s not applied: %s", k ? k : "?", v ? v : "?", why ? why : "?");
	fg_err_one_line(out); /* C1 and bytes that are not UTF-8 too, as in errors */
}

/* ---- engine settings from a manifest ---- */

static int unhonoured(cJSON *list, const char *key, const char *value, const char *why)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !cJSON_AddStringToObject(o, "key", key) ||
	    !cJSON_AddStringToObject(o, "value", value) || !cJSON_AddStringToObject(o, "why", why)) {
		cJSON_Delete(o);
		return -1;
	}
	cJSON_AddItemToArray(list, o);
	return 0;
}

static int int_knob(cJSON *s, cJSON *hon, const struct fg_manifest *m, const char *env,
		    const char *name, long long lo, long long hi, struct fg_err *err)
{
	const char *v = fg_manifest_env_get(m, env);
	long long x;

	if (!v)
		return 0;
	if (fg_parse_i64(v, &x) || x < lo || x > hi)
		return fg_err_set(err, FG_EINVAL, "manifest env.%s: '%s' is not an integer in %lld..%lld",
				  env, v, lo, hi);
	if (!cJSON_AddNumberToObject(s, name, (double)x) ||
	    (hon && !cJSON_AddItemToArray(hon, cJSON_CreateString(env))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

int fg_bundle_settings(cJSON **out, const struct fg_manifest *m, struct fg_err *err)
{
	cJSON *s = cJSON_CreateObject(), *hon, *un, *gen = NULL;
	const char *v;
	int rc = 0;

	*out = NULL;
	if (!s || !(hon = cJSON_AddArrayToObject(s, "honoured")) ||
	    !(un = cJSON_AddArrayToObject(s, "unhonoured"))) {
		cJSON_Delete(s);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	rc = int_knob(s, hon, m, "SLIDING_WINDOW", "sliding_window", 1, FG_BUNDLE_MAX_SLIDING_WINDOW, err);
	if (!rc)
		rc = int_knob(s, hon, m, "MAX_MODEL_LEN", "max_model_len", 1, FG_BUNDLE_MAX_MODEL_LEN, err);
	if (!rc)
		rc = int_knob(s, NULL, m, "CENTROID_TOP_K", "centroid_top_k", 0, 1 << 20, err);
	if (!rc && (v = fg_manifest_env_get(m, "CENTROID_TOP_K")) &&
	    unhonoured(un, "CENTROID_TOP_K", v, FG_BUNDLE_TOP_K_WHY))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!rc && m->spec.present && m->spec.num_speculative_tokens >= 0) {
		char num[32];

		snprintf(num, sizeof(num), "%lld", m->spec.num_speculative_tokens);
		if (!cJSON_AddNumberToObject(s, "num_speculative_tokens",
					     (double)m->spec.num_speculative_tokens) ||
		    unhonoured(un, "SPECULATIVE_CONFIG.num_speculative_tokens", num,
			       "no Gemma 4 assistant (gemma4_assistant) drafter in the bundle; the engine decodes plain greedy"))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	v = fg_manifest_env_get(m, "OVERRIDE_GENERATION_CONFIG");
	if (!rc && v) {
		rc = fg_json_parse(&gen, v, strlen(v), "env.OVERRIDE_GENERATION_CONFIG", err);
		if (!rc && !cJSON_IsObject(gen))
			rc = fg_err_set(err, FG_EINVAL, "env.OVERRIDE_GENERATION_CONFIG: not a JSON object");
	}
	if (!rc && gen) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(gen, "temperature");
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(gen, "top_k");
		int greedy = (cJSON_IsNumber(t) && t->valuedouble == 0) ||
			     (cJSON_IsNumber(k) && k->valuedouble == 1);

		if (!cJSON_AddItemToObject(s, "greedy", cJSON_Duplicate(gen, 1)))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		else if (greedy ? !cJSON_AddItemToArray(hon,
							 cJSON_CreateString("OVERRIDE_GENERATION_CONFIG"))
				: unhonoured(un, "OVERRIDE_GENERATION_CONFIG", v,
					     "the engine decodes greedily only (temperature 0)"))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	cJSON_Delete(gen);
	if (rc) {
		cJSON_Delete(s);
		return rc;
	}
	*out = s;
	return 0;
}
