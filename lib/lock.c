/* lock.c - building, writing (canonical bytes, atomically) and strictly
 * reading buckets.lock; tree digests and manifest pin checks. */
#include "lock.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "fsutil.h"
#include "json.h"
#include "ref.h"

static int oom(struct fg_err *err)
{
	return fg_err_set(err, FG_ENOMEM, "out of memory");
}

static char *sdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

void fg_lock_remote_clear(struct fg_lock_remote *r)
{
	free(r->xet_hash);
	free(r->mtime);
	free(r->uploaded_at);
	free(r->etag);
	free(r->commit);
	free(r->oid);
	free(r->url);
	free(r->last_modified);
	memset(r, 0, sizeof(*r));
}

static void component_free(struct fg_lock_component *c)
{
	size_t i;

	if (!c)
		return;
	free(c->key);
	free(c->role);
	free(c->kind);
	free(c->source);
	free(c->owner);
	free(c->revision);
	free(c->target);
	for (i = 0; i < c->n_pins; i++)
		free(c->pins[i].key);
	free(c->pins);
	for (i = 0; i < c->n_files; i++) {
		free(c->files[i].path);
		fg_lock_remote_clear(&c->files[i].remote);
	}
	free(c->files);
	free(c);
}

static void manifest_free(struct fg_lock_manifest *lm)
{
	size_t i;

	if (!lm)
		return;
	for (i = 0; i < lm->n_components; i++)
		component_free(lm->components[i]);
	free(lm->components);
	for (i = 0; i < lm->n_deps; i++) {
		free(lm->deps[i].spec);
		free(lm->deps[i].kind);
		free(lm->deps[i].name);
		free(lm->deps[i].version);
		free(lm->deps[i].url);
		free(lm->deps[i].commit);
		free(lm->deps[i].tree);
	}
	free(lm->deps);
	free(lm->key);
	free(lm->name);
	free(lm);
}

void fg_lock_free(struct fg_lock *lock)
{
	size_t i;

	if (!lock)
		return;
	for (i = 0; i < lock->n_manifests; i++)
		manifest_free(lock->manifests[i]);
	free(lock->manifests);
	free(lock);
}

int fg_lock_new(struct fg_lock **out, struct fg_err *err)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return oom(err);
	(*out)->schema = FG_LOCK_SCHEMA;
	return 0;
}

/* Grows an array of n elements of size sz by one; returns 0 or -1. */
static int grow(void **arr, size_t n, size_t sz)
{
	void *p = realloc(*arr, (n + 1) * sz);

	if (!p)
		return -1;
	*arr = p;
	return 0;
}

static int check_hex(const char *hex, const char *what, struct fg_err *err)
{
	if (!fg_sha256_hex_valid(hex))
		return fg_err_set(err, FG_EINVAL, "%s: not 64 lowercase hex digits", what);
	return 0;
}

struct fg_lock_manifest *fg_lock_find_manifest(const struct fg_lock *lock, const char *key)
{
	size_t i;

	for (i = 0; i < lock->n_manifests; i++)
		if (!strcmp(lock->manifests[i]->key, key))
			return lock->manifests[i];
	return NULL;
}

struct fg_lock_component *fg_lock_find_component(const struct fg_lock_manifest *lm,
						 const char *key)
{
	size_t i;

	for (i = 0; i < lm->n_components; i++)
		if (!strcmp(lm->components[i]->key, key))
			return lm->components[i];
	return NULL;
}

const struct fg_lock_file *fg_lock_find_file(const struct fg_lock_component *c, const char *path)
{
	size_t lo = 0, hi = c->n_files, i;

	/* files are sorted after finish; fall back to a scan otherwise */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int d = strcmp(c->files[mid].path, path);

		if (!d)
			return &c->files[mid];
		if (d < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = 0; i < c->n_files; i++)
		if (!strcmp(c->files[i].path, path))
			return &c->files[i];
	return NULL;
}

int fg_lock_add_manifest(struct fg_lock_manifest **out, struct fg_lock *lock, const char *key,
			 const char *sha256_hex, const char *name, struct fg_err *err)
{
	struct fg_lock_manifest *lm;
	size_t i;
	int rc;

	*out = NULL;
	if (!key || !*key)
		return fg_err_set(err, FG_EINVAL, "lock: manifest key is empty");
	rc = check_hex(sha256_hex, "lock: manifest sha256", err);
	if (rc)
		return rc;
	lm = calloc(1, sizeof(*lm));
	if (!lm || !(lm->key = strdup(key)) || (name && !(lm->name = strdup(name)))) {
		manifest_free(lm);
		return oom(err);
	}
	memcpy(lm->sha256, sha256_hex, sizeof(lm->sha256));
	for (i = 0; i < lock->n_manifests; i++)
		if (!strcmp(lock->manifests[i]->key, key)) {
			manifest_free(lock->manifests[i]);
			lock->manifests[i] = lm;
			*out = lm;
			return 0;
		}
	if (grow((void **)&lock->manifests, lock->n_manifests, sizeof(lm))) {
		manifest_free(lm);
		return oom(err);
	}
	lock->manifests[lock->n_manifests++] = lm;
	*out = lm;
	return 0;
}

int fg_lock_add_component(struct fg_lock_component **out, struct fg_lock_manifest *lm,
			  const char *key, const char *role, const char *kind, const char *source,
			  const char *owner, const char *revision, const char *target,
			  struct fg_err *err)
{
	struct fg_lock_component *c;

	*out = NULL;
	if (!key || !*key || !role || !*role || !kind || !*kind || !source || !*source || !owner ||
	    !*owner)
		return fg_err_set(err, FG_EINVAL, "lock: component needs key, role, kind, source, owner");
	if (fg_lock_find_component(lm, key))
		return fg_err_set(err, FG_EINVAL, "lock: component %s added twice", key);
	c = calloc(1, sizeof(*c));
	if (!c)
		return oom(err);
	c->key = strdup(key);
	c->role = strdup(role);
	c->kind = strdup(kind);
	c->source = strdup(source);
	c->owner = strdup(owner);
	c->revision = sdup(revision);
	c->target = sdup(target);
	if (!c->key || !c->role || !c->kind || !c->source || !c->owner ||
	    (revision && !c->revision) || (target && !c->target) ||
	    grow((void **)&lm->components, lm->n_components, sizeof(c))) {
		component_free(c);
		return oom(err);
	}
	lm->components[lm->n_components++] = c;
	*out = c;
	return 0;
}

int fg_lock_component_add_pin(struct fg_lock_component *c, const char *key,
			      const char *sha256_hex, struct fg_err *err)
{
	struct fg_lock_pin *p;
	int rc = check_hex(sha256_hex, "lock: pin", err);

	if (rc)
		return rc;
	if (!key || !*key)
		return fg_err_set(err, FG_EINVAL, "lock: pin key is empty");
	if (grow((void **)&c->pins, c->n_pins, sizeof(*c->pins)))
		return oom(err);
	p = &c->pins[c->n_pins];
	p->key = strdup(key);
	if (!p->key)
		return oom(err);
	memcpy(p->sha256, sha256_hex, sizeof(p->sha256));
	c->n_pins++;
	return 0;
}

static int remote_copy(struct fg_lock_remote *dst, const struct fg_lock_remote *src)
{
	memset(dst, 0, sizeof(*dst));
	if (!src)
		return 0;
#define CP(f)                                     \
	if (src->f && !(dst->f = strdup(src->f))) \
		goto fail;
	CP(xet_hash) CP(mtime) CP(uploaded_at) CP(etag) CP(commit) CP(oid) CP(url) CP(last_modified)
#undef CP
	return 0;
fail:
	fg_lock_remote_clear(dst);
	return -1;
}

int fg_lock_component_add_file(struct fg_lock_component *c, const char *path,
			       unsigned long long size, const char *sha256_hex,
			       const struct fg_lock_remote *remote, struct fg_err *err)
{
	struct fg_lock_file *f;
	int rc;

	if (!fg_path_is_safe_rel(path))
		return fg_err_set(err, FG_EINVAL, "lock: %s: file path \"%s\" is not a safe relative path",
				  c->key, path ? path : "");
	rc = check_hex(sha256_hex, "lock: file sha256", err);
	if (rc)
		return rc;
	if (size > (1ULL << 53))
		return fg_err_set(err, FG_EINVAL, "lock: %s: size too large", path);
	if (grow((void **)&c->files, c->n_files, sizeof(*c->files)))
		return oom(err);
	f = &c->files[c->n_files];
	f->path = strdup(path);
	if (!f->path)
		return oom(err);
	if (remote_copy(&f->remote, remote)) {
		free(f->path);
		return oom(err);
	}
	f->size = size;
	memcpy(f->sha256, sha256_hex, sizeof(f->sha256));
	c->n_files++;
	return 0;
}

static int cmp_file(const void *a, const void *b)
{
	return strcmp(((const struct fg_lock_file *)a)->path, ((const struct fg_lock_file *)b)->path);
}

static int cmp_pin(const void *a, const void *b)
{
	return strcmp(((const struct fg_lock_pin *)a)->key, ((const struct fg_lock_pin *)b)->key);
}

int fg_lock_tree_digest(char out[FG_SHA256_HEX_LEN + 1], const struct fg_lock_file *files,
			size_t n, struct fg_err *err)
{
	const struct fg_lock_file **order;
	struct fg_sha256 *h = NULL;
	struct fg_buf line = FG_BUF_INIT;
	uint8_t d[FG_SHA256_LEN];
	size_t i;
	int rc;

	order = malloc((n ? n : 1) * sizeof(*order));
	if (!order)
		return oom(err);
	for (i = 0; i < n; i++)
		order[i] = &files[i];
	/* sort by path bytes, without reordering the caller's array */
	for (i = 1; i < n; i++) {
		const struct fg_lock_file *x = order[i];
		size_t j = i;

		if (strcmp(order[j - 1]->path, x->path) <= 0)
			continue;
		while (j > 0 && strcmp(order[j - 1]->path, x->path) > 0) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = x;
	}
	rc = fg_sha256_new(&h, err);
	for (i = 0; !rc && i < n; i++) {
		fg_buf_reset(&line);
		rc = fg_buf_printf(&line, err, "%s %llu %s\n", order[i]->sha256, order[i]->size,
				   order[i]->path);
		if (!rc)
			rc = fg_sha256_update(h, line.data, line.len, err);
	}
	if (!rc)
		rc = fg_sha256_final(h, d, err);
	if (!rc)
		fg_hex_encode(d, sizeof(d), out);
	fg_sha256_free(h);
	fg_buf_release(&line);
	free(order);
	return rc;
}

int fg_lock_component_finish(struct fg_lock_component *c, struct fg_err *err)
{
	size_t i;

	if (c->n_files > 1)
		qsort(c->files, c->n_files, sizeof(*c->files), cmp_file);
	if (c->n_pins > 1)
		qsort(c->pins, c->n_pins, sizeof(*c->pins), cmp_pin);
	for (i = 1; i < c->n_files; i++)
		if (!strcmp(c->files[i - 1].path, c->files[i].path))
			return fg_err_set(err, FG_EINVAL, "lock: %s: file %s listed twice", c->key,
					  c->files[i].path);
	for (i = 1; i < c->n_pins; i++)
		if (!strcmp(c->pins[i - 1].key, c->pins[i].key))
			return fg_err_set(err, FG_EINVAL, "lock: %s: pin %s given twice", c->key,
					  c->pins[i].key);
	return fg_lock_tree_digest(c->tree_digest, c->files, c->n_files, err);
}

int fg_lock_add_from_manifest(struct fg_lock_manifest **out, struct fg_lock *lock,
			      const char *key, const struct fg_manifest *m, struct fg_err *err)
{
	struct fg_lock_manifest *lm = NULL;
	struct fg_buf owner = FG_BUF_INIT;
	size_t i;
	int rc;

	*out = NULL;
	rc = fg_lock_add_manifest(&lm, lock, key, m->sha256, m->name, err);
	for (i = 0; !rc && i < m->n_components; i++) {
		const struct fg_component *mc = &m->components[i];
		struct fg_lock_component *c = NULL;

		fg_buf_reset(&owner);
		rc = fg_ref_owner(&owner, mc->ref, err);
		if (!rc)
			rc = fg_lock_add_component(&c, lm, mc->key, mc->role, fg_ref_kind_name(mc->ref->kind),
						   mc->source, owner.data, NULL, mc->target, err);
		if (!rc && mc->pin_sha256)
			rc = fg_lock_component_add_pin(c, mc->pin_key, mc->pin_sha256, err);
	}
	if (!rc && m->n_dependencies && !(lm->deps = calloc(m->n_dependencies, sizeof(*lm->deps))))
		rc = oom(err);
	for (i = 0; !rc && i < m->n_dependencies; i++) {
		const struct fg_dependency *d = &m->deps[i];
		struct fg_lock_dep *ld = &lm->deps[lm->n_deps++];

		ld->spec = strdup(m->dependencies[i]);
		ld->kind = strdup(fg_dep_kind_name(d->kind));
		ld->name = sdup(d->name);
		ld->version = sdup(d->version);
		ld->url = sdup(d->url);
		ld->commit = sdup(d->commit);
		if (!ld->spec || !ld->kind || (d->name && !ld->name) || (d->version && !ld->version) ||
		    (d->url && !ld->url) || (d->commit && !ld->commit))
			rc = oom(err);
	}
	fg_buf_release(&owner);
	if (!rc)
		*out = lm;
	return rc;
}

static int ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n >= m && !strcmp(s + n - m, suf);
}

const struct fg_lock_file *fg_lock_main_file(const struct fg_lock_component *c)
{
	const struct fg_lock_file *best = NULL;
	size_t i;
	int pass;

	if (c->n_files == 1)
		return &c->files[0];
	for (pass = 0; pass < 2 && !best; pass++)
		for (i = 0; i < c->n_files; i++) {
			const struct fg_lock_file *f = &c->files[i];

			if (pass == 0 && !ends_with(f->path, ".safetensors"))
				continue;
			if (!best || f->size > best->size ||
			    (f->size == best->size && strcmp(f->path, best->path) < 0))
				best = f;
		}
	return best;
}

int fg_lock_check_pins(const struct fg_lock_component *c, struct fg_err *err)
{
	const struct fg_lock_file *f = fg_lock_main_file(c);
	size_t i;

	for (i = 0; i < c->n_pins; i++) {
		const struct fg_lock_pin *p = &c->pins[i];

		if (f && !strcmp(f->sha256, p->sha256))
			continue;
		if (!strcmp(c->tree_digest, p->sha256))
			continue;
		if (!f)
			return fg_err_set(err, FG_EMISMATCH, "%s: pinned by %s but has no files", c->key,
					  p->key);
		return fg_err_set(err, FG_EMISMATCH, "%s: %s: expected sha256 %s (%s), got %s", c->key,
				  f->path, p->sha256, p->key, f->sha256);
	}
	return 0;
}

/* ---- writing ---- */

static int add_str(cJSON *obj, const char *key, const char *val)
{
	if (!val)
		return 0;
	return cJSON_AddStringToObject(obj, key, val) ? 0 : -1;
}

static cJSON *component_json(const struct fg_lock_component *c)
{
	cJSON *o = cJSON_CreateObject(), *pins, *files;
	size_t i;

	if (!o)
		return NULL;
	if (add_str(o, "role", c->role) || add_str(o, "kind", c->kind) ||
	    add_str(o, "source", c->source) || add_str(o, "owner", c->owner) ||
	    add_str(o, "revision", c->revision) || add_str(o, "target", c->target) ||
	    add_str(o, "tree_digest", c->tree_digest) ||
	    (c->folder && !cJSON_AddTrueToObject(o, "folder")))
		goto fail;
	pins = cJSON_AddObjectToObject(o, "pins");
	files = cJSON_AddArrayToObject(o, "files");
	if (!pins || !files)
		goto fail;
	for (i = 0; i < c->n_pins; i++)
		if (add_str(pins, c->pins[i].key, c->pins[i].sha256))
			goto fail;
	for (i = 0; i < c->n_files; i++) {
		const struct fg_lock_file *f = &c->files[i];
		cJSON *fo = cJSON_CreateObject(), *r;

		if (!fo || !cJSON_AddItemToArray(files, fo))
			goto fail;
		if (add_str(fo, "path", f->path) || add_str(fo, "sha256", f->sha256) ||
		    !cJSON_AddNumberToObject(fo, "size", (double)f->size))
			goto fail;
		r = cJSON_AddObjectToObject(fo, "remote");
		if (!r || add_str(r, "xet_hash", f->remote.xet_hash) ||
		    add_str(r, "mtime", f->remote.mtime) ||
		    add_str(r, "uploaded_at", f->remote.uploaded_at) ||
		    add_str(r, "etag", f->remote.etag) || add_str(r, "commit", f->remote.commit) ||
		    add_str(r, "oid", f->remote.oid) || add_str(r, "url", f->remote.url) ||
		    add_str(r, "last_modified", f->remote.last_modified))
			goto fail;
	}
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

int fg_lock_serialize(struct fg_buf *out, const struct fg_lock *lock, struct fg_err *err)
{
	cJSON *root = cJSON_CreateObject(), *ms;
	size_t i, j;
	int rc = 0;

	if (!root)
		return oom(err);
	ms = cJSON_AddObjectToObject(root, "manifests");
	if (!ms || !cJSON_AddNumberToObject(root, "schema", FG_LOCK_SCHEMA)) {
		cJSON_Delete(root);
		return oom(err);
	}
	for (i = 0; !rc && i < lock->n_manifests; i++) {
		const struct fg_lock_manifest *lm = lock->manifests[i];
		cJSON *mo = cJSON_CreateObject(), *cs;

		if (!mo || !cJSON_AddItemToObject(ms, lm->key, mo)) {
			cJSON_Delete(mo);
			rc = oom(err);
			break;
		}
		cs = cJSON_AddObjectToObject(mo, "components");
		if (!cs || add_str(mo, "sha256", lm->sha256) || add_str(mo, "name", lm->name)) {
			rc = oom(err);
			break;
		}
		if (lm->n_deps) {
			cJSON *da = cJSON_AddArrayToObject(mo, "dependencies");

			for (j = 0; !rc && j < lm->n_deps; j++) {
				const struct fg_lock_dep *d = &lm->deps[j];
				cJSON *dobj = cJSON_CreateObject();

				if (!da || !dobj || !cJSON_AddItemToArray(da, dobj) ||
				    add_str(dobj, "spec", d->spec) || add_str(dobj, "kind", d->kind) ||
				    add_str(dobj, "name", d->name) || add_str(dobj, "version", d->version) ||
				    add_str(dobj, "url", d->url) || add_str(dobj, "commit", d->commit) ||
				    add_str(dobj, "tree", d->tree) ||
				    (d->sha256[0] && (add_str(dobj, "sha256", d->sha256) ||
						      !cJSON_AddNumberToObject(dobj, "size", (double)d->size))))
					rc = oom(err);
			}
			if (rc)
				break;
		}
		for (j = 0; !rc && j < lm->n_components; j++) {
			const struct fg_lock_component *c = lm->components[j];
			cJSON *co;

			if (!fg_sha256_hex_valid(c->tree_digest)) {
				rc = fg_err_set(err, FG_EINVAL,
						"lock: component %s not finished (no tree digest)", c->key);
				break;
			}
			co = component_json(c);
			if (!co || !cJSON_AddItemToObject(cs, c->key, co)) {
				cJSON_Delete(co);
				rc = oom(err);
			}
		}
	}
	if (!rc)
		rc = fg_json_write(out, root, 1, err);
	cJSON_Delete(root);
	return rc;
}

int fg_lock_write(const char *path, const struct fg_lock *lock, struct fg_err *err)
{
	struct fg_buf b = FG_BUF_INIT;
	int rc = fg_lock_serialize(&b, lock, err);

	if (!rc)
		rc = fg_file_write_out(path, b.data, b.len, 0644, err);
	fg_buf_release(&b);
	return rc;
}

int fg_lock_write_entry(const char *path, struct fg_lock *lock, const char *key, struct fg_err *err)
{
	struct fg_buf dir = FG_BUF_INIT;
	struct fg_lock *disk = NULL;
	size_t i, j;
	int fd, rc;

	/* a device or FIFO written through holds no earlier entries to keep */
	if (fg_out_is_stream(path))
		return fg_lock_write(path, lock, err);
	if ((rc = fg_path_dir(path, &dir, err)))
		return rc;
	fd = open(dir.data, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fg_buf_release(&dir);
	/* no folder to lock (it will fail to write below, with a message) or
	 * flock refused there: written as before */
	if (fd >= 0 && flock(fd, LOCK_EX)) {
		close(fd);
		fd = -1;
	}
	rc = fg_lock_read(&disk, path, err);
	if (rc == FG_ENOTFOUND) {
		rc = 0;
		fg_err_clear(err);
	}
	for (i = 0; !rc && disk && i < disk->n_manifests; i++) {
		struct fg_lock_manifest *other = disk->manifests[i];

		if (!strcmp(other->key, key))
			continue;
		for (j = 0; j < lock->n_manifests && strcmp(lock->manifests[j]->key, other->key); j++)
			;
		if (j < lock->n_manifests) { /* the file's is newer: swap, ours is freed with disk */
			disk->manifests[i] = lock->manifests[j];
			lock->manifests[j] = other;
		} else if (grow((void **)&lock->manifests, lock->n_manifests, sizeof(other))) {
			rc = oom(err);
		} else {
			lock->manifests[lock->n_manifests++] = other;
			disk->manifests[i--] = disk->manifests[--disk->n_manifests];
		}
	}
	if (!rc)
		rc = fg_lock_write(path, lock, err);
	fg_lock_free(disk);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* ---- reading, strictly ---- */

struct rd {
	const char *what;   /* file name for messages */
	struct fg_buf at;   /* dotted path of the field being read */
	struct fg_err *err;
};

static int bad(struct rd *r, const char *field, const char *why)
{
	if (field)
		return fg_err_set(r->err, FG_EFORMAT, "%s: %s%s%s: %s", r->what, r->at.data ? r->at.data : "",
				  r->at.len ? "." : "", field, why);
	return fg_err_set(r->err, FG_EFORMAT, "%s: %s: %s", r->what, r->at.len ? r->at.data : "(top)",
			  why);
}

static int only_keys(struct rd *r, const cJSON *obj, const char *const *allowed)
{
	const cJSON *c, *d;

	for (c = obj->child; c; c = c->next) {
		size_t i;
		int found = 0;

		for (i = 0; allowed[i]; i++)
			if (!strcmp(c->string, allowed[i]))
				found = 1;
		if (!found)
			return bad(r, c->string, "unknown field");
		for (d = c->next; d; d = d->next)
			if (!strcmp(c->string, d->string))
				return bad(r, c->string, "field appears twice");
	}
	return 0;
}

/* Required (req) or optional string; "" refused. */
static int rd_str(struct rd *r, const cJSON *obj, const char *key, int req, char **out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	*out = NULL;
	if (!v)
		return req ? bad(r, key, "missing") : 0;
	if (!cJSON_IsString(v))
		return bad(r, key, "expected a string");
	if (!*v->valuestring)
		return bad(r, key, "empty");
	*out = strdup(v->valuestring);
	return *out ? 0 : oom(r->err);
}

static int rd_hex(struct rd *r, const cJSON *obj, const char *key, char out[FG_SHA256_HEX_LEN + 1])
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!v)
		return bad(r, key, "missing");
	if (!cJSON_IsString(v) || !fg_sha256_hex_valid(v->valuestring))
		return bad(r, key, "not 64 lowercase hex digits");
	memcpy(out, v->valuestring, FG_SHA256_HEX_LEN + 1);
	return 0;
}

static size_t at_push(struct rd *r, const char *fmt, const char *s, size_t idx)
{
	size_t old = r->at.len;

	if (r->at.len)
		fg_buf_putc(&r->at, '.', NULL);
	if (s)
		fg_buf_printf(&r->at, NULL, fmt, s);
	else
		fg_buf_printf(&r->at, NULL, fmt, idx);
	return old;
}

static void at_pop(struct rd *r, size_t old)
{
	r->at.len = old;
	if (r->at.data)
		r->at.data[old] = '\0';
}

static int rd_file(struct rd *r, const cJSON *fo, struct fg_lock_file *f)
{
	static const char *const fkeys[] = { "path", "size", "sha256", "remote", NULL };
	static const char *const rkeys[] = { "xet_hash", "mtime", "uploaded_at", "etag", "commit",
					     "oid", "url", "last_modified", NULL };
	const cJSON *rem;
	long long size;
	int rc;

	if (!cJSON_IsObject(fo))
		return bad(r, NULL, "expected an object");
	rc = only_keys(r, fo, fkeys);
	if (!rc)
		rc = rd_str(r, fo, "path", 1, &f->path);
	if (!rc && !fg_path_is_safe_rel(f->path))
		rc = bad(r, "path", "not a safe relative path");
	if (!rc && fg_json_int(fo, "size", &size))
		rc = bad(r, "size", "expected an integer");
	if (!rc && size < 0)
		rc = bad(r, "size", "negative");
	if (!rc) {
		f->size = (unsigned long long)size;
		rc = rd_hex(r, fo, "sha256", f->sha256);
	}
	if (rc)
		return rc;
	rem = cJSON_GetObjectItemCaseSensitive(fo, "remote");
	if (!rem)
		return 0;
	if (!cJSON_IsObject(rem))
		return bad(r, "remote", "expected an object");
	{
		size_t old = at_push(r, "%s", "remote", 0);

		rc = only_keys(r, rem, rkeys);
		if (!rc)
			rc = rd_str(r, rem, "xet_hash", 0, &f->remote.xet_hash);
		if (!rc)
			rc = rd_str(r, rem, "mtime", 0, &f->remote.mtime);
		if (!rc)
			rc = rd_str(r, rem, "uploaded_at", 0, &f->remote.uploaded_at);
		if (!rc)
			rc = rd_str(r, rem, "etag", 0, &f->remote.etag);
		if (!rc)
			rc = rd_str(r, rem, "commit", 0, &f->remote.commit);
		if (!rc)
			rc = rd_str(r, rem, "oid", 0, &f->remote.oid);
		if (!rc)
			rc = rd_str(r, rem, "url", 0, &f->remote.url);
		if (!rc)
			rc = rd_str(r, rem, "last_modified", 0, &f->remote.last_modified);
		if (!rc)
			at_pop(r, old);
	}
	return rc;
}

static int rd_component(struct rd *r, const cJSON *co, struct fg_lock_component *c)
{
	static const char *const ckeys[] = { "role", "kind", "source", "owner", "revision", "target",
					     "pins", "files", "tree_digest", "folder", NULL };
	const cJSON *pins, *files, *it;
	char digest[FG_SHA256_HEX_LEN + 1];
	struct fg_ref *ref = NULL;
	struct fg_err e2;
	size_t n, i;
	int rc;

	if (!cJSON_IsObject(co))
		return bad(r, NULL, "expected an object");
	rc = only_keys(r, co, ckeys);
	if (!rc)
		rc = rd_str(r, co, "role", 1, &c->role);
	if (!rc)
		rc = rd_str(r, co, "kind", 1, &c->kind);
	if (!rc)
		rc = rd_str(r, co, "source", 1, &c->source);
	if (!rc)
		rc = rd_str(r, co, "owner", 1, &c->owner);
	if (!rc)
		rc = rd_str(r, co, "revision", 0, &c->revision);
	if (!rc)
		rc = rd_str(r, co, "target", 0, &c->target);
	if (!rc)
		rc = rd_hex(r, co, "tree_digest", c->tree_digest);
	if (!rc && (it = cJSON_GetObjectItemCaseSensitive(co, "folder"))) {
		if (!cJSON_IsTrue(it))
			rc = bad(r, "folder", "expected true (or no such key)");
		c->folder = 1;
	}
	if (rc)
		return rc;
	if (fg_ref_parse(&ref, c->source, &e2))
		return bad(r, "source", e2.msg);
	rc = strcmp(fg_ref_kind_name(ref->kind), c->kind) ? bad(r, "kind", "does not match source") : 0;
	fg_ref_free(ref);
	if (rc)
		return rc;

	pins = cJSON_GetObjectItemCaseSensitive(co, "pins");
	if (pins && !cJSON_IsObject(pins))
		return bad(r, "pins", "expected an object");
	n = 0;
	for (it = pins ? pins->child : NULL; it; it = it->next)
		n++;
	c->pins = calloc(n ? n : 1, sizeof(*c->pins));
	if (!c->pins)
		return oom(r->err);
	for (it = pins ? pins->child : NULL; it; it = it->next) {
		size_t old = at_push(r, "%s", "pins", 0);

		if (!cJSON_IsString(it) || !fg_sha256_hex_valid(it->valuestring))
			return bad(r, it->string, "not 64 lowercase hex digits");
		at_pop(r, old);
		c->pins[c->n_pins].key = strdup(it->string);
		if (!c->pins[c->n_pins].key)
			return oom(r->err);
		memcpy(c->pins[c->n_pins].sha256, it->valuestring, FG_SHA256_HEX_LEN + 1);
		c->n_pins++;
	}
	if (c->n_pins > 1)
		qsort(c->pins, c->n_pins, sizeof(*c->pins), cmp_pin);
	for (i = 1; i < c->n_pins; i++)
		if (!strcmp(c->pins[i - 1].key, c->pins[i].key))
			return bad(r, "pins", "a pin appears twice");

	files = cJSON_GetObjectItemCaseSensitive(co, "files");
	if (!files)
		return bad(r, "files", "missing");
	if (!cJSON_IsArray(files))
		return bad(r, "files", "expected an array");
	n = (size_t)cJSON_GetArraySize(files);
	c->files = calloc(n ? n : 1, sizeof(*c->files));
	if (!c->files)
		return oom(r->err);
	i = 0;
	for (it = files->child; it; it = it->next, i++) {
		size_t old = at_push(r, "files[%zu]", NULL, i);

		c->n_files = i + 1;
		rc = rd_file(r, it, &c->files[i]);
		if (rc)
			return rc;
		if (i && strcmp(c->files[i - 1].path, c->files[i].path) >= 0)
			return bad(r, "path",
				   strcmp(c->files[i - 1].path, c->files[i].path)
					   ? "files are not sorted by path"
					   : "path listed twice");
		at_pop(r, old);
	}
	rc = fg_lock_tree_digest(digest, c->files, c->n_files, r->err);
	if (rc)
		return rc;
	if (strcmp(digest, c->tree_digest)) {
		char why[128];

		snprintf(why, sizeof(why), "does not match the files listed (they give %s)", digest);
		return bad(r, "tree_digest", why);
	}
	return 0;
}

static int rd_deps(struct rd *r, const cJSON *da, struct fg_lock_manifest *lm)
{
	static const char *const dkeys[] = { "spec", "kind", "name", "version", "url", "commit",
					     "tree", "sha256", "size", NULL };
	const cJSON *it;
	size_t n = 0, old;
	int rc = 0;

	if (!da)
		return 0;
	if (!cJSON_IsArray(da))
		return bad(r, "dependencies", "expected an array");
	for (it = da->child; it; it = it->next)
		n++;
	if (!n)
		return bad(r, "dependencies", "empty (left out when there are none)");
	lm->deps = calloc(n, sizeof(*lm->deps));
	if (!lm->deps)
		return oom(r->err);
	for (it = da->child; !rc && it; it = it->next) {
		struct fg_lock_dep *d = &lm->deps[lm->n_deps];
		long long size;

		old = at_push(r, "dependencies[%zu]", NULL, lm->n_deps);
		lm->n_deps++;
		if (!cJSON_IsObject(it)) {
			rc = bad(r, NULL, "expected an object");
			break;
		}
		rc = only_keys(r, it, dkeys);
		if (!rc)
			rc = rd_str(r, it, "spec", 1, &d->spec);
		if (!rc)
			rc = rd_str(r, it, "kind", 1, &d->kind);
		if (!rc && strcmp(d->kind, "url") && strcmp(d->kind, "pin") && strcmp(d->kind, "unpinned"))
			rc = bad(r, "kind", "not url, pin or unpinned");
		if (!rc)
			rc = rd_str(r, it, "name", 0, &d->name);
		if (!rc)
			rc = rd_str(r, it, "version", 0, &d->version);
		if (!rc)
			rc = rd_str(r, it, "url", 0, &d->url);
		if (!rc && !strcmp(d->kind, "url") && !d->url)
			rc = bad(r, "url", "missing for a url dependency");
		if (!rc)
			rc = rd_str(r, it, "commit", 0, &d->commit);
		if (!rc)
			rc = rd_str(r, it, "tree", 0, &d->tree);
		if (!rc && d->tree && !d->commit)
			rc = bad(r, "tree", "without commit");
		if (!rc && !strcmp(d->kind, "pin") && !d->version)
			rc = bad(r, "version", "missing for a pin");
		if (!rc && cJSON_GetObjectItemCaseSensitive(it, "sha256")) {
			rc = rd_hex(r, it, "sha256", d->sha256);
			if (!rc && (fg_json_int(it, "size", &size) || size < 0))
				rc = bad(r, "size", "expected an integer beside sha256");
			if (!rc)
				d->size = (unsigned long long)size;
		} else if (!rc && cJSON_GetObjectItemCaseSensitive(it, "size")) {
			rc = bad(r, "size", "without sha256");
		}
		if (!rc)
			at_pop(r, old);
	}
	return rc;
}

static int rd_manifest(struct rd *r, const cJSON *mo, struct fg_lock_manifest *lm)
{
	static const char *const mkeys[] = { "sha256", "name", "components", "dependencies", NULL };
	const cJSON *cs, *it;
	size_t n = 0;
	int rc;

	if (!cJSON_IsObject(mo))
		return bad(r, NULL, "expected an object");
	rc = only_keys(r, mo, mkeys);
	if (!rc)
		rc = rd_hex(r, mo, "sha256", lm->sha256);
	if (!rc)
		rc = rd_str(r, mo, "name", 0, &lm->name);
	if (!rc)
		rc = rd_deps(r, cJSON_GetObjectItemCaseSensitive(mo, "dependencies"), lm);
	if (rc)
		return rc;
	cs = cJSON_GetObjectItemCaseSensitive(mo, "components");
	if (!cs)
		return bad(r, "components", "missing");
	if (!cJSON_IsObject(cs))
		return bad(r, "components", "expected an object");
	for (it = cs->child; it; it = it->next)
		n++;
	lm->components = calloc(n ? n : 1, sizeof(*lm->components));
	if (!lm->components)
		return oom(r->err);
	for (it = cs->child; it; it = it->next) {
		struct fg_lock_component *c = calloc(1, sizeof(*c));
		size_t old;

		if (!c || !(c->key = strdup(it->string))) {
			free(c);
			return oom(r->err);
		}
		lm->components[lm->n_components++] = c;
		if (!*it->string)
			return bad(r, "components", "empty component key");
		old = at_push(r, "components.%s", it->string, 0);
		rc = rd_component(r, it, c);
		if (rc)
			return rc;
		at_pop(r, old);
	}
	return 0;
}

static int cmp_comp(const void *a, const void *b)
{
	return strcmp((*(struct fg_lock_component *const *)a)->key,
		      (*(struct fg_lock_component *const *)b)->key);
}

static int cmp_man(const void *a, const void *b)
{
	return strcmp((*(struct fg_lock_manifest *const *)a)->key,
		      (*(struct fg_lock_manifest *const *)b)->key);
}

int fg_lock_parse(struct fg_lock **out, const char *text, size_t len, const char *what,
		  struct fg_err *err)
{
	static const char *const tkeys[] = { "schema", "manifests", NULL };
	struct rd r = { what, FG_BUF_INIT, err };
	struct fg_lock *lock = NULL;
	cJSON *j = NULL;
	const cJSON *ms, *it;
	long long schema;
	size_t n = 0, i;
	int rc;

	*out = NULL;
	if (len > FG_LOCK_MAX_BYTES)
		return fg_err_set(err, FG_EFORMAT, "%s: larger than %zu MiB", what, FG_LOCK_MAX_BYTES >> 20);
	rc = fg_json_parse(&j, text, len, what, err);
	if (rc)
		return rc;
	if (!cJSON_IsObject(j)) {
		rc = bad(&r, NULL, "expected a JSON object");
		goto out;
	}
	rc = only_keys(&r, j, tkeys);
	if (rc)
		goto out;
	if (fg_json_int(j, "schema", &schema)) {
		rc = bad(&r, "schema", cJSON_GetObjectItemCaseSensitive(j, "schema") ? "expected an integer"
										    : "missing");
		goto out;
	}
	if (schema != FG_LOCK_SCHEMA) {
		rc = bad(&r, "schema", schema > FG_LOCK_SCHEMA
					       ? "written by a newer fgpack (this one reads schema 1)"
					       : "unknown schema (this fgpack reads schema 1)");
		goto out;
	}
	ms = cJSON_GetObjectItemCaseSensitive(j, "manifests");
	if (!ms || !cJSON_IsObject(ms)) {
		rc = bad(&r, "manifests", ms ? "expected an object" : "missing");
		goto out;
	}
	rc = fg_lock_new(&lock, err);
	if (rc)
		goto out;
	for (it = ms->child; it; it = it->next)
		n++;
	lock->manifests = calloc(n ? n : 1, sizeof(*lock->manifests));
	if (!lock->manifests) {
		rc = oom(err);
		goto out;
	}
	for (it = ms->child; it; it = it->next) {
		struct fg_lock_manifest *lm = calloc(1, sizeof(*lm));
		size_t old;

		if (!lm || !(lm->key = strdup(it->string))) {
			free(lm);
			rc = oom(err);
			goto out;
		}
		lock->manifests[lock->n_manifests++] = lm;
		if (!*it->string) {
			rc = bad(&r, "manifests", "empty manifest key");
			goto out;
		}
		old = at_push(&r, "manifests.%s", it->string, 0);
		rc = rd_manifest(&r, it, lm);
		if (rc)
			goto out;
		at_pop(&r, old);
		if (lm->n_components > 1)
			qsort(lm->components, lm->n_components, sizeof(*lm->components), cmp_comp);
	}
	if (lock->n_manifests > 1)
		qsort(lock->manifests, lock->n_manifests, sizeof(*lock->manifests), cmp_man);
	for (i = 1; i < lock->n_manifests; i++)
		if (!strcmp(lock->manifests[i - 1]->key, lock->manifests[i]->key)) {
			rc = bad(&r, "manifests", "a manifest appears twice");
			goto out;
		}
	for (i = 0; i < lock->n_manifests; i++) {
		const struct fg_lock_manifest *lm = lock->manifests[i];
		size_t k;

		for (k = 1; k < lm->n_components; k++)
			if (!strcmp(lm->components[k - 1]->key, lm->components[k]->key)) {
				rc = fg_err_set(err, FG_EFORMAT, "%s: manifests.%s.components.%s: appears twice",
						what, lm->key, lm->components[k]->key);
				goto out;
			}
	}
out:
	fg_buf_release(&r.at);
	cJSON_Delete(j);
	if (rc) {
		fg_lock_free(lock);
		return rc;
	}
	*out = lock;
	return 0;
}

int fg_lock_read(struct fg_lock **out, const char *path, struct fg_err *err)
{
	struct fg_buf b = FG_BUF_INIT;
	int rc;

	*out = NULL;
	rc = fg_file_read(path, FG_LOCK_MAX_BYTES, &b, err);
	if (!rc)
		rc = fg_lock_parse(out, b.data ? b.data : "", b.len, path, err);
	fg_buf_release(&b);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int fg_lock_each_digest(const struct fg_lock *lock,
			int (*fn)(void *ctx, const char *sha256_hex), void *ctx)
{
	const char **all;
	size_t n = 0, k = 0, i, j, f;
	int rc = 0;

	for (i = 0; i < lock->n_manifests; i++) {
		for (j = 0; j < lock->manifests[i]->n_components; j++)
			n += lock->manifests[i]->components[j]->n_files;
		n += lock->manifests[i]->n_deps;
	}
	all = malloc((n ? n : 1) * sizeof(*all));
	if (!all)
		return FG_ENOMEM;
	for (i = 0; i < lock->n_manifests; i++) {
		for (j = 0; j < lock->manifests[i]->n_deps; j++)
			if (lock->manifests[i]->deps[j].sha256[0])
				all[k++] = lock->manifests[i]->deps[j].sha256;
	}
	for (i = 0; i < lock->n_manifests; i++)
		for (j = 0; j < lock->manifests[i]->n_components; j++) {
			const struct fg_lock_component *c = lock->manifests[i]->components[j];

			for (f = 0; f < c->n_files; f++)
				all[k++] = c->files[f].sha256;
		}
	n = k;
	qsort(all, n, sizeof(*all), cmp_str);
	for (i = 0; i < n && !rc; i++)
		if (!i || strcmp(all[i - 1], all[i]))
			rc = fn(ctx, all[i]);
	free(all);
	return rc;
}
