/* cmd_publish.c - `fgpack publish`: upload a bundle (or any file or folder),
 * its bundle.json, signature and attestations to an HF bucket through the S3
 * gateway, check what landed, and print the reference and lock entry to use.
 * Also `publish --ls` and `publish --get` to look at what a bucket holds. */
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
#include "cmd.h"
#include "fsutil.h"
#include "json.h"
#include "ref.h"
#include "s3.h"
#include "lock.h"
#include "sha256.h"
#include "store.h"
#include "tarball.h"
#include "workq.h"

#define MAX_ATTACH 64
#define MAX_ITEMS 100000

static const char usage_text[] =
	"usage: fgpack publish PATH hf://buckets/<ns>/<name>[/<prefix>] [options]\n"
	"       fgpack publish --ls hf://buckets/<ns>/<name>[/<prefix>] [--page-size N] [--json]\n"
	"       fgpack publish --get hf://buckets/<ns>/<name>/<key> -o FILE [--range START-END]\n"
	"\n"
	"Uploads PATH (a bundle .fgb, a file or a folder) under <prefix> of the bucket through\n"
	"the S3-compatible gateway. For a bundle, its bundle.json and attestations/ members go\n"
	"beside it; PATH.sig (from 'fgpack sign') goes too, as <name>.sig for a file and\n"
	"model.sig for a folder. Large files go in parallel parts; an interrupted upload\n"
	"resumes and sends only missing parts. Afterwards every object is listed and HEADed\n"
	"and its size checked; --verify also downloads each and checks its sha256.\n"
	"Prints the reference to paste into a manifest and the buckets.lock entry.\n"
	"\n"
	"options:\n"
	"  --endpoint URL     S3 endpoint (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL,\n"
	"                     else https://s3.hf.co/<ns>)\n"
	"  --region R         signing region (default $AWS_REGION, else the region of an\n"
	"                     s3.<region>.amazonaws.com endpoint, else us-east-1)\n"
	"  --addressing-style auto|path|virtual\n"
	"                     bucket in the path or in the host name, as botocore's\n"
	"                     addressing_style (default: the s3 addressing_style of the\n"
	"                     AWS config file's profile, else auto: virtual-hosted at\n"
	"                     AWS's own endpoints, path-style elsewhere)\n"
	"  --connect-to H1:P1:H2:P2\n"
	"                     connect to H2:P2 for requests to H1:P1, as curl's option\n"
	"                     (empty H1 or P1: any); repeatable\n"
	"  --verify           read every object back and compare sha256\n"
	"  --attach FILE      also upload FILE as <prefix>/attestations/<basename> (repeatable)\n"
	"  --part-size SIZE   multipart part size (default 64M; K, M, G suffixes)\n"
	"  --jobs N           parts in flight (default 8)\n"
	"  --limit-rate BPS   cap each connection's upload rate, bytes/s (K, M suffixes)\n"
	"  --dry-run          check keys and print the plan; send nothing\n"
	"  --json             print one JSON document (schema 1) with objects and stats\n"
	"\n"
	"Credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (+AWS_SESSION_TOKEN), else\n"
	"$AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials (profile $AWS_PROFILE). They are\n"
	"never printed. Resume journals live in $FGPACK_HOME/uploads.\n";

struct item {
	char *key;        /* object key */
	char *src;        /* local file, or NULL for mem */
	char *mem;        /* bytes when src is NULL */
	size_t mem_len;
	unsigned long long size;
	char sha256[65];
	char etag[FG_S3_ETAG_MAX];
	int in_ref;       /* part of the published reference (lock entry files) */
	char *rel;        /* path relative to the reference, for the lock entry */
	int verified;
};

struct plan {
	struct item *v;
	size_t n, cap;
};

static void plan_free(struct plan *p)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		free(p->v[i].key);
		free(p->v[i].src);
		free(p->v[i].mem);
		free(p->v[i].rel);
	}
	free(p->v);
}

static int plan_add(struct plan *p, const char *prefix, const char *name, const char *src,
		    const void *mem, size_t mem_len, struct fg_err *err)
{
	struct item *it;
	struct fg_buf key = FG_BUF_INIT;
	size_t i;
	int rc;

	if (p->n == MAX_ITEMS)
		return fg_err_set(err, FG_EINVAL, "more than %d files", MAX_ITEMS);
	if (p->n == p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 16;
		void *nv = realloc(p->v, nc * sizeof(*p->v));

		if (!nv)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		p->v = nv;
		p->cap = nc;
	}
	if ((rc = fg_buf_printf(&key, err, "%s%s%s", prefix, *prefix ? "/" : "", name)))
		return rc;
	for (i = 0; i < p->n; i++)
		if (!strcmp(p->v[i].key, key.data)) {
			rc = fg_err_set(err, FG_EINVAL, "two files would go to the same key %s", key.data);
			fg_buf_release(&key);
			return rc;
		}
	it = &p->v[p->n];
	memset(it, 0, sizeof(*it));
	it->key = fg_buf_detach(&key, NULL);
	it->src = src ? strdup(src) : NULL;
	if (mem) {
		it->mem = malloc(mem_len ? mem_len : 1);
		if (it->mem)
			memcpy(it->mem, mem, mem_len);
		it->mem_len = mem_len;
	}
	p->n++;
	if (!it->key || (src && !it->src) || (mem && !it->mem))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s && s[1] ? s + 1 : path;
}

/* Adds the regular files under dir (recursively, sorted) with keys prefix/rel. */
static int walk(struct plan *p, const char *prefix, const char *root, const char *rel,
		struct fg_err *err)
{
	struct fg_buf dpath = FG_BUF_INIT;
	struct dirent **ents = NULL;
	int n, i, rc = 0;

	if ((rc = fg_buf_printf(&dpath, err, "%s%s%s", root, *rel ? "/" : "", rel)))
		return rc;
	n = scandir(dpath.data, &ents, NULL, alphasort);
	if (n < 0) {
		rc = fg_err_set(err, FG_EIO, "read folder %s: %s", dpath.data, strerror(errno));
		fg_buf_release(&dpath);
		return rc;
	}
	for (i = 0; i < n; i++) {
		struct fg_buf sub = FG_BUF_INIT, full = FG_BUF_INIT;
		struct stat sb;
		const char *nm = ents[i]->d_name;

		if (!rc && strcmp(nm, ".") && strcmp(nm, "..")) {
			rc = fg_buf_printf(&sub, err, "%s%s%s", rel, *rel ? "/" : "", nm);
			if (!rc)
				rc = fg_buf_printf(&full, err, "%s/%s", root, sub.data);
			if (!rc && lstat(full.data, &sb))
				rc = fg_err_set(err, FG_EIO, "stat %s: %s", full.data, strerror(errno));
			if (!rc) {
				if (S_ISDIR(sb.st_mode))
					rc = walk(p, prefix, root, sub.data, err);
				else if (S_ISREG(sb.st_mode)) {
					rc = plan_add(p, prefix, sub.data, full.data, NULL, 0, err);
					if (!rc) {
						p->v[p->n - 1].in_ref = 1;
						p->v[p->n - 1].rel = strdup(sub.data);
					}
				} else
					rc = fg_err_set(err, FG_EUNSUPPORTED,
							"%s is not a regular file or folder (links are not published)",
							full.data);
			}
		}
		fg_buf_release(&sub);
		fg_buf_release(&full);
		free(ents[i]);
	}
	free(ents);
	fg_buf_release(&dpath);
	return rc;
}

struct attest_ctx {
	struct plan *p;
	const char *prefix;
	const char *bundle;
};

static int attest_member(void *user, const struct fg_tarball_entry *e, struct fg_err *err)
{
	struct attest_ctx *a = user;
	struct fg_buf data = FG_BUF_INIT;
	int rc;

	if (e->is_dir || strncmp(e->path, "attestations/", 13) || !e->path[13])
		return 0;
	if ((rc = fg_tarball_read_member(a->bundle, e->path, (size_t)64 << 20, &data, err)))
		return rc;
	rc = plan_add(a->p, a->prefix, e->path, NULL, data.data ? data.data : "", data.len, err);
	fg_buf_release(&data);
	return rc;
}

static int is_bundle(const char *path)
{
	size_t n = strlen(path);

	return n > 4 && !strcmp(path + n - 4, ".fgb");
}

/* What goes where, before anything is sent. */
static int make_plan(struct plan *p, const char *path, const char *prefix, char **attach,
		     int n_attach, struct fg_err *err)
{
	struct stat sb;
	struct fg_buf sig = FG_BUF_INIT;
	int i, rc = 0;

	if (stat(path, &sb))
		return fg_err_set(err, FG_EIO, "%s: %s", path, strerror(errno));
	if ((rc = fg_buf_printf(&sig, err, "%s.sig", path)))
		return rc;
	while (sig.len > 5 && sig.data[sig.len - 5] == '/') {
		/* "dir/.sig" from "dir/": drop the slash */
		memmove(sig.data + sig.len - 5, sig.data + sig.len - 4, 5);
		sig.len--;
	}
	if (S_ISDIR(sb.st_mode)) {
		rc = walk(p, prefix, path, "", err);
		if (!rc && access(sig.data, R_OK) == 0)
			rc = plan_add(p, prefix, "model.sig", sig.data, NULL, 0, err);
	} else if (S_ISREG(sb.st_mode)) {
		rc = plan_add(p, prefix, base_name(path), path, NULL, 0, err);
		if (!rc) {
			p->v[p->n - 1].in_ref = 1;
			p->v[p->n - 1].rel = strdup(base_name(path));
		}
		if (!rc && is_bundle(path)) {
			struct fg_buf bj = FG_BUF_INIT;
			struct attest_ctx a = { p, prefix, path };

			rc = fg_tarball_read_member(path, "bundle.json", (size_t)64 << 20, &bj, err);
			if (!rc)
				rc = plan_add(p, prefix, "bundle.json", NULL, bj.data ? bj.data : "", bj.len,
					      err);
			fg_buf_release(&bj);
			if (!rc)
				rc = fg_tarball_scan(path, NULL, 0, attest_member, &a, NULL, err);
			if (rc)
				fg_err_wrap(err, "bundle %s", path);
		}
		if (!rc && access(sig.data, R_OK) == 0) {
			struct fg_buf nm = FG_BUF_INIT;

			rc = fg_buf_printf(&nm, err, "%s.sig", base_name(path));
			if (!rc)
				rc = plan_add(p, prefix, nm.data, sig.data, NULL, 0, err);
			fg_buf_release(&nm);
		}
	} else {
		rc = fg_err_set(err, FG_EINVAL, "%s is not a file or folder", path);
	}
	for (i = 0; !rc && i < n_attach; i++) {
		struct fg_buf nm = FG_BUF_INIT;

		rc = fg_buf_printf(&nm, err, "attestations/%s", base_name(attach[i]));
		if (!rc)
			rc = plan_add(p, prefix, nm.data, attach[i], NULL, 0, err);
		fg_buf_release(&nm);
	}
	fg_buf_release(&sig);
	return rc;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Resume journals live in the store root (lib/store): <root>/uploads. */
static int journal_dir(struct fg_buf *out, struct fg_err *err)
{
	int rc = fg_store_default_root(out, err);

	return rc ? rc : fg_buf_puts(out, "/uploads", err);
}

struct hash_sink {
	struct fg_sha256 *h;
	unsigned long long n;
};

static int hash_data(void *user, const void *data, size_t len, struct fg_err *err)
{
	struct hash_sink *hs = user;

	if (!data) {
		hs->n = 0;
		return fg_sha256_final(hs->h, (uint8_t[32]){ 0 }, err); /* reset */
	}
	hs->n += len;
	return fg_sha256_update(hs->h, data, len, err);
}

#define MAX_CONNECT_TO 16

/* Where and how to reach the S3 endpoint: the options every mode shares. */
struct conn {
	const char *endpoint;   /* --endpoint, or NULL */
	const char *region;     /* --region, or NULL */
	const char *addressing; /* --addressing-style, or NULL */
	const char *connect_to[MAX_CONNECT_TO + 1]; /* NULL-terminated */
	int n_connect_to;
};

static int open_s3(struct fg_s3 **s3, struct fg_buf *endpoint, const struct fg_ref *ref,
		   const struct conn *c, long long limit_rate, struct fg_err *err)
{
	struct fg_s3_creds creds;
	struct fg_s3_opts o;
	const char *region = c->region;
	int rc;

	memset(&o, 0, sizeof(o));
	/* the flag, else the AWS CLI's config file, as botocore reads it */
	if (c->addressing)
		rc = fg_s3_addressing_parse(&o.addressing, c->addressing, err);
	else
		rc = fg_s3_addressing_config(&o.addressing, err);
	if (rc || (rc = fg_s3_endpoint_resolve(endpoint, c->endpoint, ref->ns, err)))
		return rc;
	if ((rc = fg_s3_creds_load(&creds, err)))
		return rc;
	o.connect_to = c->connect_to;
	o.endpoint = endpoint->data;
	o.region = region ? region : getenv("AWS_REGION") && *getenv("AWS_REGION") ? getenv("AWS_REGION")
										: NULL;
	o.creds = &creds;
	o.limit_rate = limit_rate;
	rc = fg_s3_new(s3, &o, err);
	fg_s3_creds_clear(&creds);
	return rc;
}

static int parse_bucket_ref(struct fg_ref **ref, const char *text, struct fg_err *err)
{
	int rc = fg_ref_parse(ref, text, err);

	if (rc)
		return rc;
	if ((*ref)->kind != FG_REF_BUCKET) {
		fg_ref_free(*ref);
		*ref = NULL;
		return fg_err_set(err, FG_EINVAL, "%s is not an hf://buckets/<ns>/<name>[/path] reference",
				  text);
	}
	return 0;
}

static int do_ls(const char *target, const struct conn *c, int page_size, int json)
{
	struct fg_err err = { 0, "" };
	struct fg_ref *ref = NULL;
	struct fg_s3 *s3 = NULL;
	struct fg_buf endpoint = FG_BUF_INIT, out = FG_BUF_INIT;
	struct fg_s3_list l = { 0 };
	size_t i;
	int rc;

	if ((rc = parse_bucket_ref(&ref, target, &err)) ||
	    (rc = open_s3(&s3, &endpoint, ref, c, 0, &err)))
		goto out;
	if ((rc = fg_s3_list(&l, s3, ref->name, *ref->path ? ref->path : NULL, page_size, &err)))
		goto out;
	if (json) {
		cJSON *doc = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(doc, "objects");

		cJSON_AddNumberToObject(doc, "schema", 1);
		cJSON_AddNumberToObject(doc, "pages", l.pages);
		for (i = 0; i < l.n; i++) {
			cJSON *o = cJSON_CreateObject();

			cJSON_AddStringToObject(o, "key", l.items[i].key);
			cJSON_AddNumberToObject(o, "size", (double)l.items[i].size);
			cJSON_AddStringToObject(o, "etag", l.items[i].etag);
			cJSON_AddStringToObject(o, "last_modified", l.items[i].last_modified);
			cJSON_AddItemToArray(arr, o);
		}
		rc = fg_json_write(&out, doc, 1, &err);
		cJSON_Delete(doc);
		if (!rc)
			fputs(out.data, stdout);
	} else {
		for (i = 0; i < l.n; i++)
			printf("%12llu  %s  %s\n", l.items[i].size, l.items[i].last_modified, l.items[i].key);
		fprintf(stderr, "%zu objects in %u pages\n", l.n, l.pages);
	}
out:
	fg_s3_list_clear(&l);
	fg_buf_release(&out);
	fg_buf_release(&endpoint);
	fg_s3_free(s3);
	fg_ref_free(ref);
	return rc ? fg_cmd_fail("publish", &err) : FG_EXIT_OK;
}

/* fg_s3_get_stream's sink for a pipe or terminal at -o: bytes written
 * there cannot be taken back, so a try that starts over after some went
 * out is an error, not a second copy. */
struct through {
	int fd;
	const char *path;
	unsigned long long sent;
};

static int through_data(void *user, const void *data, size_t len, struct fg_err *err)
{
	struct through *t = user;

	if (!data)
		return t->sent ? fg_err_set(err, FG_ENET, "%s: the download started over after %llu "
						  "bytes went into it", t->path, t->sent) : 0;
	if (fg_write_all(t->fd, data, len))
		return fg_err_set(err, errno == ENOSPC ? FG_ENOSPC : FG_EIO, "write %s: %s", t->path,
				  strerror(errno));
	t->sent += len;
	return 0;
}

/* A device or FIFO at -o (fg_out_open's fd), written through: one that
 * seeks (/dev/null) takes the ranged, resuming GET at offset 0; a pipe or
 * terminal the whole object in order. */
static int get_through(struct fg_s3 *s3, const struct fg_ref *ref, int fd, const char *outpath,
		       const char *range, unsigned long long a, unsigned long long b,
		       struct fg_err *err)
{
	struct through t = { fd, outpath, 0 };

	if (lseek(fd, 0, SEEK_CUR) >= 0)
		return fg_s3_get(s3, ref->name, ref->path, a, range ? b - a + 1 : 0, fd, 0, NULL, err);
	if (range)
		return fg_err_set(err, FG_EINVAL, "%s cannot seek: --range needs a file (or /dev/null)",
				  outpath);
	return fg_s3_get_stream(s3, ref->name, ref->path, through_data, &t, err);
}

static int do_get(const char *target, const struct conn *c, const char *outpath,
		  const char *range)
{
	struct fg_err err = { 0, "" };
	struct fg_ref *ref = NULL;
	struct fg_s3 *s3 = NULL;
	struct fg_buf endpoint = FG_BUF_INIT, tmp = FG_BUF_INIT;
	unsigned long long a = 0, b = 0;
	int rc, fd = -1, slot = -1, made = 0;

	if (range) {
		const char *dash = strchr(range, '-');
		char first[32];

		if (!dash || (size_t)(dash - range) >= sizeof(first))
			return fg_cmd_usage_error("publish", "--range wants START-END");
		memcpy(first, range, (size_t)(dash - range));
		first[dash - range] = 0;
		if (fg_parse_u64(first, &a) || fg_parse_u64(dash + 1, &b) || b < a)
			return fg_cmd_usage_error("publish", "--range wants START-END");
	}
	if ((rc = parse_bucket_ref(&ref, target, &err)))
		goto out;
	if (!*ref->path) {
		rc = fg_err_set(&err, FG_EINVAL, "%s names no object", target);
		goto out;
	}
	/* a device or FIFO at outpath is written through, never replaced by
	 * the temporary file's rename (lib/fsutil.h) */
	if ((rc = fg_out_check(outpath, &err)) || (rc = open_s3(&s3, &endpoint, ref, c, 0, &err)) ||
	    (rc = fg_out_open(outpath, &fd, &err)))
		goto out;
	if (fd >= 0) {
		rc = get_through(s3, ref, fd, outpath, range, a, b, &err);
		if (rc)
			close(fd);
		else
			rc = fg_out_close(fd, outpath, &err);
		fd = -1;
		goto out;
	}
	/* fg_file_write_atomic's temporary file: a new name (a link planted
	 * there never written through), removed on a signal */
	if ((rc = fg_tmp_create(outpath, 0644, &tmp, &fd, &slot, &err)))
		goto out;
	made = 1;
	rc = fg_s3_get(s3, ref->name, ref->path, a, range ? b - a + 1 : 0, fd, 0, NULL, &err);
	if (!rc && (fsync(fd) || close(fd))) {
		rc = fg_err_set(&err, FG_EIO, "write %s: %s", tmp.data, strerror(errno));
		fd = -1;
	} else if (!rc) {
		fd = -1;
		if (rename(tmp.data, outpath))
			rc = fg_err_set(&err, FG_EIO, "rename %s: %s", outpath, strerror(errno));
	}
out:
	if (fd >= 0)
		close(fd);
	if (rc && made)
		unlink(tmp.data);
	fg_tmp_untrack(slot);
	fg_buf_release(&tmp);
	fg_buf_release(&endpoint);
	fg_s3_free(s3);
	fg_ref_free(ref);
	return rc ? fg_cmd_fail("publish", &err) : FG_EXIT_OK;
}

static int cmp_rel(const void *a, const void *b)
{
	return strcmp((*(struct item *const *)a)->rel, (*(struct item *const *)b)->rel);
}

/* The buckets.lock component entry (docs/formats/lock.md) for what was published. */
static int lock_entry(cJSON **out, struct plan *p, const char *source, const char *owner,
		      struct fg_err *err)
{
	struct item **v = calloc(p->n ? p->n : 1, sizeof(*v));
	struct fg_lock_file *lf = calloc(p->n ? p->n : 1, sizeof(*lf));
	size_t n = 0, i;
	char digest[FG_SHA256_HEX_LEN + 1];
	cJSON *e, *files;
	int rc;

	if (!v || !lf) {
		free(v);
		free(lf);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	for (i = 0; i < p->n; i++)
		if (p->v[i].in_ref)
			v[n++] = &p->v[i];
	qsort(v, n, sizeof(*v), cmp_rel);
	e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "kind", "bucket");
	cJSON_AddStringToObject(e, "owner", owner);
	cJSON_AddStringToObject(e, "source", source);
	files = cJSON_AddArrayToObject(e, "files");
	for (i = 0; i < n; i++) {
		cJSON *f = cJSON_CreateObject(), *remote = cJSON_CreateObject();

		cJSON_AddStringToObject(f, "path", v[i]->rel);
		cJSON_AddNumberToObject(f, "size", (double)v[i]->size);
		cJSON_AddStringToObject(f, "sha256", v[i]->sha256);
		cJSON_AddStringToObject(remote, "etag", v[i]->etag);
		cJSON_AddItemToObject(f, "remote", remote);
		cJSON_AddItemToArray(files, f);
		lf[i].path = v[i]->rel;
		lf[i].size = v[i]->size;
		memcpy(lf[i].sha256, v[i]->sha256, sizeof(lf[i].sha256));
	}
	rc = fg_lock_tree_digest(digest, lf, n, err);
	if (!rc) {
		cJSON_AddStringToObject(e, "tree_digest", digest);
		*out = e;
	} else {
		cJSON_Delete(e);
	}
	free(lf);
	free(v);
	return rc;
}

/* Every item's sha256 and size: the files on every core, two per thread on
 * SHA-NI (fg_sha256_files), the in-memory ones here; the first failure in
 * plan order is returned. */
static int hash_plan(struct plan *plan, struct fg_err *err)
{
	const char **path = calloc(plan->n + 1, sizeof(*path));
	size_t *at = calloc(plan->n + 1, sizeof(*at));
	struct fg_sha256_result *res = calloc(plan->n + 1, sizeof(*res));
	size_t k, n = 0;
	int rc = !path || !at || !res ? fg_err_set(err, FG_ENOMEM, "out of memory") : 0;

	for (k = 0; !rc && k < plan->n; k++)
		if (plan->v[k].src) {
			at[n] = k;
			path[n++] = plan->v[k].src;
		}
	if (!rc && n)
		rc = fg_sha256_files(path, n, fg_workq_cpus(8), 0, res, err);
	for (k = 0; !rc && k < n; k++) {
		struct item *it = &plan->v[at[k]];

		if (res[k].rc) {
			rc = res[k].rc;
			if (err)
				*err = res[k].err;
		} else {
			it->size = res[k].size;
			fg_hex_encode(res[k].digest, 32, it->sha256);
		}
	}
	for (k = 0; !rc && k < plan->n; k++) {
		struct item *it = &plan->v[k];
		uint8_t d[32];

		if (it->src)
			continue;
		it->size = it->mem_len;
		rc = fg_sha256_mem(it->mem, it->mem_len, d, err);
		if (!rc)
			fg_hex_encode(d, 32, it->sha256);
	}
	free(path);
	free(at);
	free(res);
	return rc;
}

int cmd_publish(int argc, char **argv)
{
	const char *path = NULL, *target = NULL, *mode = NULL;
	const char *outpath = NULL, *range = NULL;
	struct conn conn;
	char *attach[MAX_ATTACH];
	int n_attach = 0, verify = 0, json = 0, dry = 0, jobs = 0, page_size = 0, i, rc = 0;
	unsigned long long part_size = 0, limit = 0;
	struct fg_err err = { 0, "" };
	struct fg_ref *ref = NULL;
	struct fg_s3 *s3 = NULL;
	struct fg_buf endpoint = FG_BUF_INIT, jdir = FG_BUF_INIT, out = FG_BUF_INIT, refbuf = FG_BUF_INIT;
	struct fg_buf owner = FG_BUF_INIT;
	struct plan plan = { 0 };
	struct fg_s3_upload_stats tot;
	double t0;
	size_t k;
	cJSON *entry = NULL;

	if (fg_cmd_wants_help(argc, argv)) {
		fputs(usage_text, stdout);
		return FG_EXIT_OK;
	}
	memset(&tot, 0, sizeof(tot));
	memset(&conn, 0, sizeof(conn));
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		int has = i + 1 < argc;

		if (!strcmp(a, "--verify"))
			verify = 1;
		else if (!strcmp(a, "--json"))
			json = 1;
		else if (!strcmp(a, "--dry-run"))
			dry = 1;
		else if ((!strcmp(a, "--ls") || !strcmp(a, "--get")) && !mode)
			mode = a + 2;
		else if (!strcmp(a, "--endpoint") && has)
			conn.endpoint = argv[++i];
		else if (!strcmp(a, "--region") && has)
			conn.region = argv[++i];
		else if (!strcmp(a, "--addressing-style") && has) {
			enum fg_s3_addressing st;

			conn.addressing = argv[++i];
			if (fg_s3_addressing_parse(&st, conn.addressing, &err))
				return fg_cmd_usage_error("publish", "--addressing-style wants auto, path or virtual");
		} else if (!strcmp(a, "--connect-to") && has) {
			if (conn.n_connect_to == MAX_CONNECT_TO)
				return fg_cmd_usage_error("publish", "at most %d --connect-to", MAX_CONNECT_TO);
			conn.connect_to[conn.n_connect_to++] = argv[++i];
		}
		else if (!strcmp(a, "-o") && has)
			outpath = argv[++i];
		else if (!strcmp(a, "--range") && has)
			range = argv[++i];
		else if (!strcmp(a, "--attach") && has) {
			if (n_attach == MAX_ATTACH)
				return fg_cmd_usage_error("publish", "at most %d --attach", MAX_ATTACH);
			attach[n_attach++] = argv[++i];
		} else if (!strcmp(a, "--part-size") && has) {
			if (fg_parse_size(argv[++i], &part_size) || part_size < FG_S3_MIN_PART)
				return fg_cmd_usage_error("publish", "--part-size must be at least 5M");
		} else if (!strcmp(a, "--limit-rate") && has) {
			if (fg_parse_size(argv[++i], &limit) || !limit)
				return fg_cmd_usage_error("publish", "bad --limit-rate");
		} else if (!strcmp(a, "--jobs") && has) {
			if (fg_parse_int(argv[++i], 1, 64, &jobs))
				return fg_cmd_usage_error("publish", "--jobs must be 1..64");
		} else if (!strcmp(a, "--page-size") && has) {
			if (fg_parse_int(argv[++i], 1, 1000, &page_size))
				return fg_cmd_usage_error("publish", "--page-size must be 1..1000");
		} else if (a[0] == '-' && a[1])
			return fg_cmd_usage_error("publish", "unknown option %s", a);
		else if (!path)
			path = a;
		else if (!target)
			target = a;
		else
			return fg_cmd_usage_error("publish", "too many arguments");
	}
	if (mode && !strcmp(mode, "ls")) {
		if (!path || target)
			return fg_cmd_usage_error("publish", "--ls wants one hf://buckets reference");
		return do_ls(path, &conn, page_size, json);
	}
	if (mode) {
		if (!path || target || !outpath)
			return fg_cmd_usage_error("publish", "--get wants a reference and -o FILE");
		return do_get(path, &conn, outpath, range);
	}
	if (!path || !target)
		return fg_cmd_usage_error("publish", "wants PATH and hf://buckets/<ns>/<name>[/<prefix>]");

	if ((rc = parse_bucket_ref(&ref, target, &err)) ||
	    (rc = make_plan(&plan, path, ref->path, attach, n_attach, &err)))
		goto out;
	/* every key obeys the gateway's rules before anything is sent */
	for (k = 0; k < plan.n; k++)
		if ((rc = fg_s3_key_check(plan.v[k].key, &err))) {
			fg_err_wrap(&err, "refusing to upload %s", plan.v[k].src ? plan.v[k].src : plan.v[k].key);
			goto out;
		}
	if ((rc = hash_plan(&plan, &err)))
		goto out;
	if ((rc = fg_ref_owner(&owner, ref, &err)))
		goto out;
	/* the reference: the bundle/file key itself, or the folder prefix */
	{
		struct stat sb;

		if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
			rc = fg_buf_printf(&refbuf, &err, "hf://buckets/%s/%s", owner.data, plan.v[0].key);
		else
			rc = fg_buf_printf(&refbuf, &err, "hf://buckets/%s%s%s", owner.data,
					   *ref->path ? "/" : "", ref->path);
		if (rc)
			goto out;
	}
	if (dry) {
		for (k = 0; k < plan.n; k++)
			printf("would upload %12llu  %s  %s\n", plan.v[k].size, plan.v[k].sha256, plan.v[k].key);
		printf("reference: %s\n", refbuf.data);
		goto out;
	}
	if ((rc = open_s3(&s3, &endpoint, ref, &conn, (long long)limit, &err)) ||
	    (rc = journal_dir(&jdir, &err)))
		goto out;

	t0 = now_s();
	for (k = 0; k < plan.n; k++) {
		struct item *it = &plan.v[k];

		if (!json && isatty(2))
			fprintf(stderr, "publish: %s (%llu bytes)\n", it->key, it->size);
		if (it->src) {
			struct fg_s3_upload_opts uo = { part_size, 0, jobs, jdir.data, NULL };
			struct fg_s3_upload_stats st;

			rc = fg_s3_upload_file(&st, s3, ref->name, it->key, it->src, &uo, &err);
			if (rc)
				goto out;
			memcpy(it->etag, st.etag, sizeof(it->etag));
			tot.multipart |= st.multipart;
			tot.parts_total += st.parts_total;
			tot.parts_sent += st.parts_sent;
			tot.parts_resumed += st.parts_resumed;
			tot.retries += st.retries;
			tot.bytes_sent += st.bytes_sent;
			tot.size += st.size;
			if (st.part_size > tot.part_size)
				tot.part_size = st.part_size;
		} else {
			const char *ct = strstr(it->key, ".json") ? "application/json" : NULL;

			if ((rc = fg_s3_put_mem(s3, it->etag, ref->name, it->key, it->mem, it->mem_len, ct, &err)))
				goto out;
			tot.parts_total++;
			tot.parts_sent++;
			tot.bytes_sent += it->mem_len;
			tot.size += it->mem_len;
		}
	}
	tot.part_size = tot.part_size ? tot.part_size : part_size;

	/* check what landed: list the prefix, HEAD each object, sizes must match */
	{
		struct fg_s3_list l;
		struct fg_buf pfx = FG_BUF_INIT;

		/* "prefix/" so that a sibling "prefix2/..." is not listed */
		if (*ref->path && (rc = fg_buf_printf(&pfx, &err, "%s/", ref->path)))
			goto out;
		rc = fg_s3_list(&l, s3, ref->name, pfx.data, 0, &err);
		fg_buf_release(&pfx);
		if (rc)
			goto out;
		for (k = 0; k < plan.n && !rc; k++) {
			struct fg_s3_object o;
			size_t j;

			for (j = 0; j < l.n; j++)
				if (!strcmp(l.items[j].key, plan.v[k].key))
					break;
			/* a key missing from the listing is asked for by HEAD: a store
			 * whose listings are eventually consistent (Swift's S3 API, AWS
			 * before 2020) lists a new object late, while GET and HEAD of
			 * it already find it */
			if (j < l.n && l.items[j].size != plan.v[k].size)
				rc = fg_err_set(&err, FG_EMISMATCH, "%s: listed with %llu bytes, uploaded %llu",
						plan.v[k].key, l.items[j].size, plan.v[k].size);
			else if ((rc = fg_s3_head(s3, &o, ref->name, plan.v[k].key, &err))) {
				if (j == l.n && rc == FG_ENOTFOUND)
					rc = fg_err_set(&err, FG_EMISMATCH,
							"%s: not in the bucket listing after upload, nor found by HEAD",
							plan.v[k].key);
			} else if (o.size != plan.v[k].size) {
				rc = fg_err_set(&err, FG_EMISMATCH, "%s: HEAD says %llu bytes, uploaded %llu",
						plan.v[k].key, o.size, plan.v[k].size);
			}
		}
		fg_s3_list_clear(&l);
		if (rc)
			goto out;
	}
	if (verify) {
		for (k = 0; k < plan.n && !rc; k++) {
			struct hash_sink hs = { NULL, 0 };
			uint8_t d[32];
			char hex[65];

			if ((rc = fg_sha256_new(&hs.h, &err)))
				break;
			rc = fg_s3_get_stream(s3, ref->name, plan.v[k].key, hash_data, &hs, &err);
			if (!rc)
				rc = fg_sha256_final(hs.h, d, &err);
			fg_sha256_free(hs.h);
			if (rc)
				break;
			fg_hex_encode(d, 32, hex);
			if (strcmp(hex, plan.v[k].sha256) || hs.n != plan.v[k].size)
				rc = fg_err_set(&err, FG_EMISMATCH, "%s: read back sha256 %s, uploaded %s",
						plan.v[k].key, hex, plan.v[k].sha256);
			else
				plan.v[k].verified = 1;
		}
		if (rc)
			goto out;
	}
	{
		double secs = now_s() - t0;
		cJSON *doc;

		if ((rc = lock_entry(&entry, &plan, refbuf.data, owner.data, &err)))
			goto out;
		if (json) {
			cJSON *objs, *stats;

			doc = cJSON_CreateObject();
			cJSON_AddNumberToObject(doc, "schema", 1);
			cJSON_AddStringToObject(doc, "reference", refbuf.data);
			cJSON_AddStringToObject(doc, "endpoint", endpoint.data);
			cJSON_AddStringToObject(doc, "bucket", ref->name);
			cJSON_AddBoolToObject(doc, "verified", verify);
			objs = cJSON_AddArrayToObject(doc, "objects");
			for (k = 0; k < plan.n; k++) {
				cJSON *o = cJSON_CreateObject();

				cJSON_AddStringToObject(o, "key", plan.v[k].key);
				cJSON_AddNumberToObject(o, "size", (double)plan.v[k].size);
				cJSON_AddStringToObject(o, "sha256", plan.v[k].sha256);
				cJSON_AddStringToObject(o, "etag", plan.v[k].etag);
				cJSON_AddBoolToObject(o, "verified", plan.v[k].verified);
				cJSON_AddItemToArray(objs, o);
			}
			stats = cJSON_AddObjectToObject(doc, "stats");
			cJSON_AddBoolToObject(stats, "multipart", tot.multipart);
			cJSON_AddNumberToObject(stats, "part_size", (double)tot.part_size);
			cJSON_AddNumberToObject(stats, "parts_total", tot.parts_total);
			cJSON_AddNumberToObject(stats, "parts_sent", tot.parts_sent);
			cJSON_AddNumberToObject(stats, "parts_resumed", tot.parts_resumed);
			cJSON_AddNumberToObject(stats, "retries", tot.retries);
			cJSON_AddNumberToObject(stats, "bytes_sent", (double)tot.bytes_sent);
			cJSON_AddNumberToObject(stats, "milliseconds", (double)(long long)(secs * 1000));
			cJSON_AddItemToObject(doc, "lock_entry", entry);
			entry = NULL;
			rc = fg_json_write(&out, doc, 1, &err);
			cJSON_Delete(doc);
			if (rc)
				goto out;
			fputs(out.data, stdout);
		} else {
			if ((rc = fg_json_write(&out, entry, 1, &err)))
				goto out;
			fprintf(stderr, "published %zu objects, %llu bytes (%u parts sent, %u resumed) in %.1f s%s\n",
				plan.n, tot.size, tot.parts_sent, tot.parts_resumed, secs,
				verify ? ", sha256 verified by reading back" : "");
			printf("reference: %s\n", refbuf.data);
			printf("lock entry:\n%s", out.data);
		}
	}
out:
	cJSON_Delete(entry);
	plan_free(&plan);
	fg_buf_release(&endpoint);
	fg_buf_release(&jdir);
	fg_buf_release(&out);
	fg_buf_release(&refbuf);
	fg_buf_release(&owner);
	fg_s3_free(s3);
	fg_ref_free(ref);
	return rc ? fg_cmd_fail("publish", &err) : FG_EXIT_OK;
}
