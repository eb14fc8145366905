/* audit.c - the facts behind `fgpack audit`: rows per component from a
 * manifest, a lock or a bundle; warnings (unpinned buckets, pins that
 * disagree, hard-coded env defaults in patches, changed buckets); JSON and
 * CycloneDX 1.6 output. */
#include "audit.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "http.h"
#include "hub.h"
#include "json.h"
#include "lock.h"
#include "manifest.h"
#include "provenance.h"
#include "ref.h"
#include "sign.h"
#include "tarball.h"
#include "workq.h"

#define PY_MAX ((size_t)8 << 20)

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int grow(void **v, size_t *cap, size_t n, size_t elem, struct fg_err *err)
{
	size_t nc;
	void *p;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 16;
	p = realloc(*v, nc * elem);
	if (!p)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	*v = p;
	*cap = nc;
	return 0;
}

static int warn(struct fg_audit *a, const char *code, const char *key, struct fg_err *err,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int warn(struct fg_audit *a, const char *code, const char *key, struct fg_err *err,
		const char *fmt, ...)
{
	struct fg_buf msg = FG_BUF_INIT;
	struct fg_audit_warning *w;
	va_list ap;
	int rc;

	if ((rc = grow((void **)&a->warnings, &a->cap_warnings, a->n_warnings, sizeof(*w), err)))
		return rc;
	va_start(ap, fmt);
	rc = fg_buf_vprintf(&msg, err, fmt, ap);
	va_end(ap);
	if (rc)
		return rc;
	w = &a->warnings[a->n_warnings++];
	w->code = strdup(code);
	w->key = dup_or_null(key);
	w->message = fg_buf_detach(&msg, NULL);
	return w->code && w->message ? 0 : fg_err_set(err, FG_ENOMEM, "out of memory");
}

static int unknown(struct fg_audit *a, struct fg_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int unknown(struct fg_audit *a, struct fg_err *err, const char *fmt, ...)
{
	struct fg_buf msg = FG_BUF_INIT;
	va_list ap;
	size_t i;
	int rc;

	va_start(ap, fmt);
	rc = fg_buf_vprintf(&msg, err, fmt, ap);
	va_end(ap);
	if (rc)
		return rc;
	for (i = 0; i < a->n_unknown; i++)
		if (!strcmp(a->unknown[i], msg.data)) {
			fg_buf_release(&msg);
			return 0;
		}
	if ((rc = grow((void **)&a->unknown, &a->cap_unknown, a->n_unknown, sizeof(char *), err))) {
		fg_buf_release(&msg);
		return rc;
	}
	a->unknown[a->n_unknown++] = fg_buf_detach(&msg, NULL);
	return 0;
}

static struct fg_audit_row *row_add(struct fg_audit *a, const char *key, const char *role,
				    const char *kind, struct fg_err *err)
{
	struct fg_audit_row *r;

	if (grow((void **)&a->rows, &a->cap_rows, a->n_rows, sizeof(*r), err))
		return NULL;
	r = &a->rows[a->n_rows++];
	memset(r, 0, sizeof(*r));
	r->key = dup_or_null(key);
	r->role = dup_or_null(role);
	r->kind = dup_or_null(kind);
	r->size = -1;
	r->files = -1;
	r->signature = strdup("unknown");
	if (!r->key || !r->signature) {
		fg_err_set(err, FG_ENOMEM, "out of memory");
		return NULL;
	}
	return r;
}

static void set_str(char **dst, const char *s)
{
	free(*dst);
	*dst = dup_or_null(s);
}

void fg_audit_free(struct fg_audit *a)
{
	size_t i;

	if (!a)
		return;
	for (i = 0; i < a->n_rows; i++) {
		struct fg_audit_row *r = &a->rows[i];

		free(r->key);
		free(r->role);
		free(r->kind);
		free(r->source);
		free(r->owner);
		free(r->pin);
		free(r->pin_sha256);
		free(r->digest);
		free(r->revision);
		free(r->target);
		free(r->signed_by);
		free(r->signature);
		cJSON_Delete(r->derived);
	}
	for (i = 0; i < a->n_warnings; i++) {
		free(a->warnings[i].code);
		free(a->warnings[i].key);
		free(a->warnings[i].message);
	}
	for (i = 0; i < a->n_unknown; i++)
		free(a->unknown[i]);
	for (i = 0; i < a->n_deps; i++) {
		free(a->deps[i].manifest);
		free(a->deps[i].spec);
		free(a->deps[i].kind);
		free(a->deps[i].name);
		free(a->deps[i].version);
		free(a->deps[i].url);
		free(a->deps[i].expected);
		free(a->deps[i].commit);
		free(a->deps[i].tree);
	}
	free(a->deps);
	free(a->rows);
	free(a->warnings);
	free(a->unknown);
	free(a->input);
	free(a->path);
	free(a->name);
	free(a->sha256);
	free(a);
}

static int audit_new(struct fg_audit **out, const char *input, const char *path, struct fg_err *err)
{
	struct fg_audit *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (!a || !(a->input = strdup(input)) || !(a->path = strdup(path))) {
		fg_audit_free(a);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	*out = a;
	return 0;
}

/* ---- patches: hard-coded env defaults ------------------------------------ */

static int is_ident(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/* A Python string literal or a bare literal (number, True, ...) at p. */
static const char *py_literal(const char *p, const char *end, struct fg_buf *val, int *quoted)
{
	fg_buf_reset(val);
	*quoted = 0;
	if (p < end && (*p == '"' || *p == '\'')) {
		char q = *p++;

		while (p < end && *p != q && *p != '\n') {
			if (*p == '\\' && p + 1 < end)
				p++;
			if (fg_buf_putc(val, *p++, NULL))
				return NULL;
		}
		if (p >= end || *p != q)
			return NULL;
		*quoted = 1;
		if (!val->data && fg_buf_puts(val, "", NULL))
			return NULL;
		return p + 1;
	}
	while (p < end && (is_ident(*p) || *p == '.' || *p == '-' || *p == '+'))
		if (fg_buf_putc(val, *p++, NULL))
			return NULL;
	return val->len ? p : NULL;
}

/* Python and the manifest agree on v? Numbers compare by value ("0.90" = 0.9). */
static int same_value(const char *py, const char *env)
{
	char *e1, *e2;
	double a, b;

	if (!strcmp(py, env))
		return 1;
	a = strtod(py, &e1);
	b = strtod(env, &e2);
	if (*py && *env && !*e1 && !*e2 && e1 != py && e2 != env)
		return a == b || fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b));
	if ((!strcmp(py, "True") && !strcmp(env, "1")) || (!strcmp(py, "False") && !strcmp(env, "0")))
		return 1;
	return 0;
}

int fg_audit_scan_python(struct fg_audit *a, const char *file, const char *text, size_t len,
			 const cJSON *env, struct fg_err *err)
{
	static const struct {
		const char *pat;
		int override; /* environ["X"] = v */
		const char *form;
	} pats[] = {
		{ "environ.get(", 0, "os.environ.get" },
		{ "getenv(", 0, "os.getenv" },
		{ "environ.setdefault(", 0, "os.environ.setdefault" },
		{ "environ[", 1, "os.environ[...] =" },
	};
	const char *end = text + len, *line = text;
	struct fg_buf name = FG_BUF_INIT, val = FG_BUF_INIT;
	int lineno = 1, rc = 0;

	if (!env)
		return 0;
	while (line < end && !rc) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *le = nl ? nl : end, *p;
		size_t i;

		for (i = 0; i < sizeof(pats) / sizeof(pats[0]) && !rc; i++) {
			size_t pl = strlen(pats[i].pat);

			for (p = line; p + pl <= le && !rc; p++) {
				const char *q, *mv;
				char qc;
				int quoted;

				if (memcmp(p, pats[i].pat, pl) || (p > line && is_ident(p[-1]) && pats[i].pat[0] == 'g'))
					continue;
				q = skip_ws(p + pl, le);
				if (q >= le || (*q != '"' && *q != '\''))
					continue;
				qc = *q++;
				fg_buf_reset(&name);
				while (q < le && *q != qc)
					if ((rc = fg_buf_putc(&name, *q++, err)))
						break;
				if (rc || q >= le || !name.len)
					continue;
				q++;
				if (pats[i].override) {
					q = skip_ws(q, le);
					if (q >= le || *q != ']')
						continue;
					q = skip_ws(q + 1, le);
					if (q >= le || *q != '=' || (q + 1 < le && q[1] == '='))
						continue;
					q = skip_ws(q + 1, le);
				} else {
					q = skip_ws(q, le);
					if (q >= le || *q != ',')
						continue;
					q = skip_ws(q + 1, le);
				}
				if (!py_literal(q, le, &val, &quoted) || (!quoted && !strcmp(val.data, "None")))
					continue;
				mv = fg_json_str(env, name.data);
				if (!mv || same_value(val.data, mv))
					continue;
				if (pats[i].override)
					rc = warn(a, "hardcoded-default", name.data, err,
						  "%s:%d sets os.environ[\"%s\"] = %s%s%s, overriding the manifest's %s=%s",
						  file, lineno, name.data, quoted ? "\"" : "", val.data,
						  quoted ? "\"" : "", name.data, mv);
				else
					rc = warn(a, "hardcoded-default", name.data, err,
						  "%s:%d hard-codes %s(\"%s\", %s%s%s) but the manifest sets %s=%s; "
						  "the default wins wherever the variable does not reach the process",
						  file, lineno, pats[i].form, name.data, quoted ? "\"" : "", val.data,
						  quoted ? "\"" : "", name.data, mv);
			}
		}
		line = nl ? nl + 1 : end;
		lineno++;
	}
	fg_buf_release(&name);
	fg_buf_release(&val);
	return rc;
}

static int ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n >= m && !strcmp(s + n - m, suf);
}

/* Scans the *.py files of dir (not recursive) and adds a "patches" row. */
static int scan_patch_dir(struct fg_audit *a, const char *dir, const cJSON *env, const char *prefix,
			  struct fg_err *err)
{
	struct dirent **ents = NULL;
	struct fg_lock_file *lf = NULL;
	struct fg_buf path = FG_BUF_INIT, text = FG_BUF_INIT, key = FG_BUF_INIT;
	size_t nf = 0;
	unsigned long long total = 0;
	int n, i, rc = 0;

	n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0)
		return 0;
	lf = calloc((size_t)n + 1, sizeof(*lf));
	if (!lf)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	for (i = 0; i < n; i++) {
		const char *nm = ents[i]->d_name;
		struct stat sb;
		uint8_t d[32];

		if (!rc && ends_with(nm, ".py")) {
			fg_buf_reset(&path);
			fg_buf_reset(&text);
			rc = fg_buf_printf(&path, err, "%s/%s", dir, nm);
			if (!rc && stat(path.data, &sb) == 0 && S_ISREG(sb.st_mode) &&
			    fg_file_read(path.data, PY_MAX, &text, NULL) == 0) {
				rc = fg_audit_scan_python(a, nm, text.data ? text.data : "", text.len, env, err);
				if (!rc)
					rc = fg_sha256_mem(text.data ? text.data : "", text.len, d, err);
				if (!rc) {
					lf[nf].path = strdup(nm);
					lf[nf].size = text.len;
					fg_hex_encode(d, 32, lf[nf].sha256);
					total += text.len;
					nf++;
				}
			}
		}
		free(ents[i]);
	}
	free(ents);
	if (!rc && nf) {
		char digest[FG_SHA256_HEX_LEN + 1];
		struct fg_audit_row *r;

		rc = fg_buf_printf(&key, err, "%spatches", prefix);
		if (!rc)
			rc = fg_lock_tree_digest(digest, lf, nf, err);
		if (!rc && !(r = row_add(a, key.data, "patches", "file", err)))
			rc = err ? err->code : FG_ENOMEM;
		if (!rc) {
			r->source = strdup(dir);
			r->owner = strdup("local");
			r->digest = strdup(digest);
			r->size = (long long)total;
			r->files = (long long)nf;
			r->pin = strdup("local files");
			set_str(&r->signature, "unsigned");
		}
	}
	if (lf)
		for (i = 0; (size_t)i < nf; i++)
			free(lf[i].path);
	free(lf);
	fg_buf_release(&path);
	fg_buf_release(&text);
	fg_buf_release(&key);
	return rc;
}

/* ---- manifests and locks -------------------------------------------------- */

static int component_rows(struct fg_audit *a, const struct fg_manifest *m,
			  const struct fg_lock_manifest *lm, const char *prefix, const char *lock_name,
			  struct fg_err *err)
{
	size_t i, n = m ? m->n_components : lm->n_components;
	struct fg_buf key = FG_BUF_INIT, owner = FG_BUF_INIT;
	int rc = 0;

	for (i = 0; i < n && !rc; i++) {
		const struct fg_component *c = m ? &m->components[i] : NULL;
		const struct fg_lock_component *lc =
			m ? (lm ? fg_lock_find_component(lm, c->key) : NULL) : lm->components[i];
		const char *ckey = c ? c->key : lc->key;
		struct fg_audit_row *r;
		size_t j;

		fg_buf_reset(&key);
		fg_buf_reset(&owner);
		if ((rc = fg_buf_printf(&key, err, "%s%s", prefix, ckey)))
			break;
		if (!(r = row_add(a, key.data, c ? c->role : lc->role,
				  c ? fg_ref_kind_name(c->ref->kind) : lc->kind, err))) {
			rc = err ? err->code : FG_ENOMEM;
			break;
		}
		if (c) {
			r->source = dup_or_null(c->source);
			if (fg_ref_owner(&owner, c->ref, NULL) == 0)
				r->owner = dup_or_null(owner.data);
			r->target = dup_or_null(c->target);
			r->pin_sha256 = dup_or_null(c->pin_sha256);
			if (c->pin_key) {
				fg_buf_reset(&owner);
				fg_buf_printf(&owner, NULL, "manifest:%s", c->pin_key);
				r->pin = dup_or_null(owner.data);
			} else if (c->ref->kind == FG_REF_MODEL && c->ref->revision) {
				r->pin = strdup("revision");
				r->revision = strdup(c->ref->revision);
			}
		} else {
			r->source = dup_or_null(lc->source);
			r->owner = dup_or_null(lc->owner);
			r->target = dup_or_null(lc->target);
			for (j = 0; j < lc->n_pins; j++) {
				fg_buf_reset(&owner);
				fg_buf_printf(&owner, NULL, "manifest:%s", lc->pins[j].key);
				set_str(&r->pin, owner.data);
				set_str(&r->pin_sha256, lc->pins[j].sha256);
			}
		}
		if (lc) {
			unsigned long long total = 0;

			for (j = 0; j < lc->n_files; j++)
				total += lc->files[j].size;
			r->digest = strdup(lc->tree_digest);
			r->size = (long long)total;
			r->files = (long long)lc->n_files;
			if (lc->revision)
				set_str(&r->revision, lc->revision);
			if (!strcmp(lc->kind, "model") && !lc->revision && !r->pin)
				rc = warn(a, "unpinned", key.data, err,
					  "%s: %s has no resolved revision in %s: it follows a branch",
					  key.data, lc->source, lock_name);
			else if (!r->pin)
				r->pin = strdup(lc->revision ? "lock revision" : "lock");
			if (fg_lock_check_pins(lc, NULL) == FG_EMISMATCH) {
				struct fg_err e = { 0, "" };

				fg_lock_check_pins(lc, &e);
				rc = warn(a, "pin-mismatch", key.data, err, "%s", e.msg);
			} else if (c && c->pin_sha256) {
				const struct fg_lock_file *mf = fg_lock_main_file(lc);

				if (!(mf && !strcmp(mf->sha256, c->pin_sha256)) &&
				    strcmp(lc->tree_digest, c->pin_sha256))
					rc = warn(a, "pin-mismatch", key.data, err,
						  "%s: the manifest pins %s=%.16s… but %s has %s%s%.16s… (tree %.16s…)",
						  key.data, c->pin_key, c->pin_sha256, lock_name,
						  mf ? mf->path : "no file", mf ? " sha256 " : "",
						  mf ? mf->sha256 : "", lc->tree_digest);
			}
		} else if (c) {
			if (c->ref->kind == FG_REF_BUCKET && !c->pin_sha256) {
				size_t kl = strlen(c->key);
				int stem = kl > 7 && !strcmp(c->key + kl - 7, "_BUCKET") ? (int)(kl - 7) : (int)kl;

				rc = warn(a, "unpinned", key.data, err,
					  "%s: %s is a mutable bucket reference with no pin (no %.*s_SHA256 and "
					  "no lock entry): its bytes can change under you",
					  key.data, c->source, stem, c->key);
			}
			else if (c->ref->kind == FG_REF_MODEL && !c->ref->revision)
				rc = warn(a, "unpinned", key.data, err,
					  "%s: %s follows the branch main; no revision and no lock pin it",
					  key.data, c->source);
			if (!rc)
				rc = unknown(a, err, "%s: digest, size and files (no lock entry; run fgpack lock)",
					     key.data);
		}
		if (!rc && r->kind && strcmp(r->kind, "file"))
			rc = unknown(a, err,
				     "signatures of remote components (signature files in buckets are not "
				     "fetched offline)");
	}
	fg_buf_release(&key);
	fg_buf_release(&owner);
	return rc;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

static int dir_of(struct fg_buf *out, const char *path, struct fg_err *err)
{
	const char *s = strrchr(path, '/');

	if (!s)
		return fg_buf_puts(out, ".", err);
	return fg_buf_append(out, path, s == path ? 1 : (size_t)(s - path), err);
}

static struct fg_lock_manifest *match_manifest(const struct fg_lock *lock, const char *path,
					       const char *sha)
{
	size_t i;
	struct fg_lock_manifest *lm = fg_lock_find_manifest(lock, path);

	if (lm)
		return lm;
	for (i = 0; i < lock->n_manifests; i++)
		if (!strcmp(base_name(lock->manifests[i]->key), base_name(path)))
			return lock->manifests[i];
	for (i = 0; i < lock->n_manifests; i++)
		if (!strcmp(lock->manifests[i]->sha256, sha))
			return lock->manifests[i];
	return lock->n_manifests == 1 ? lock->manifests[0] : NULL;
}

/* Dependencies of one manifest: the lock entry's (with the digests --deps
 * recorded) when there is one and it is current, else the manifest's. */
static int dep_rows(struct fg_audit *a, const struct fg_manifest *m,
		    const struct fg_lock_manifest *lm, const char *mkey, const char *lock_name,
		    struct fg_err *err)
{
	int from_lock = lm && (!m || !strcmp(lm->sha256, m->sha256));
	size_t i, n = from_lock ? lm->n_deps : m ? m->n_dependencies : 0, unhashed = 0, pins = 0;
	int rc = 0;

	for (i = 0; !rc && i < n; i++) {
		struct fg_audit_dep *d;

		if ((rc = grow((void **)&a->deps, &a->cap_deps, a->n_deps, sizeof(*d), err)))
			break;
		d = &a->deps[a->n_deps++];
		memset(d, 0, sizeof(*d));
		d->size = -1;
		d->manifest = dup_or_null(mkey);
		if (from_lock) {
			const struct fg_lock_dep *ld = &lm->deps[i];

			d->spec = strdup(ld->spec);
			d->kind = strdup(ld->kind);
			d->name = dup_or_null(ld->name);
			d->version = dup_or_null(ld->version);
			d->url = dup_or_null(ld->url);
			d->commit = dup_or_null(ld->commit);
			d->tree = dup_or_null(ld->tree);
			if (ld->sha256[0]) {
				memcpy(d->sha256, ld->sha256, sizeof(d->sha256));
				d->size = (long long)ld->size;
			}
		} else {
			const struct fg_dependency *md = &m->deps[i];

			d->spec = strdup(m->dependencies[i]);
			d->kind = strdup(fg_dep_kind_name(md->kind));
			d->name = dup_or_null(md->name);
			d->version = dup_or_null(md->version);
			d->url = dup_or_null(md->url);
			d->commit = dup_or_null(md->commit);
		}
		/* the URL's own "#sha256=" (the manifest's, when it is at hand) */
		if (m && i < m->n_dependencies && !strcmp(m->dependencies[i], d->spec))
			d->expected = dup_or_null(m->deps[i].sha256);
		if (!d->manifest || !d->spec || !d->kind)
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		if (!rc && !strcmp(d->kind, "unpinned"))
			rc = warn(a, "unpinned-dependency", d->spec, err,
				  "dependency %s is not pinned to one version (name==version or a URL): "
				  "what gets installed can change", d->spec);
		if (!rc && !strcmp(d->kind, "url") && !d->sha256[0])
			unhashed++;
		if (!rc && !strcmp(d->kind, "pin"))
			pins++;
	}
	if (!rc && pins)
		rc = unknown(a, err, "%s: which files the %zu exact pin%s resolve to (the version is "
			     "recorded; no package index is asked)", mkey, pins, pins == 1 ? "" : "s");
	if (!rc && unhashed)
		rc = unknown(a, err, "%s: sha256 and size of %zu URL dependenc%s (%s; 'fgpack lock --deps' "
			     "fetches and records them)", mkey, unhashed, unhashed == 1 ? "y" : "ies",
			     from_lock ? "not fetched into the lock yet" : lm ? "the lock entry is stale" :
			     lock_name && strcmp(lock_name, "the lock") ? "no lock entry" : "no lock given");
	return rc;
}

static int audit_one_manifest(struct fg_audit *a, const struct fg_manifest *m, const char *mpath,
			      const struct fg_lock *lock, struct fg_lock_manifest *lm,
			      const char *lock_name, const char *prefix, struct fg_err *err)
{
	struct fg_buf dir = FG_BUF_INIT;
	int rc = 0;

	if (lm && m && strcmp(lm->sha256, m->sha256) &&
	    (rc = warn(a, "manifest-changed", NULL, err,
		       "%s changed since %s was written (sha256 %.16s…, locked %.16s…)", mpath, lock_name,
		       m->sha256, lm->sha256)))
		return rc;
	if (lock && m && !lm &&
	    (rc = warn(a, "pin-mismatch", NULL, err, "%s has no entry for %s", lock_name, mpath)))
		return rc;
	if ((rc = component_rows(a, m, lm, prefix, lock_name, err)))
		return rc;
	if (m) {
		if ((rc = dir_of(&dir, mpath, err)) ||
		    (rc = scan_patch_dir(a, dir.data, fg_json_obj(m->json, "env"), prefix, err)))
			goto out;
	}
	rc = dep_rows(a, m, lm, m ? mpath : lm ? lm->key : mpath, lock_name, err);
out:
	fg_buf_release(&dir);
	return rc;
}

int fg_audit_manifest(struct fg_audit **out, const char *path, const char *lock_path,
		      struct fg_err *err)
{
	struct fg_manifest *m = NULL;
	struct fg_lock *lock = NULL;
	struct fg_audit *a = NULL;
	int rc;

	*out = NULL;
	if ((rc = fg_manifest_load(&m, path, err)) || (rc = audit_new(&a, "manifest", path, err)))
		goto out;
	a->name = dup_or_null(m->name);
	a->sha256 = strdup(m->sha256);
	if (lock_path && (rc = fg_lock_read(&lock, lock_path, err)))
		goto out;
	rc = audit_one_manifest(a, m, path, lock, lock ? match_manifest(lock, path, m->sha256) : NULL,
				lock_path ? base_name(lock_path) : "the lock", "", err);
	if (!rc && !lock)
		rc = unknown(a, err,
			     "what the buckets hold now (no buckets.lock given: --lock FILE; --online "
			     "compares a lock with the Hub)");
out:
	fg_manifest_free(m);
	fg_lock_free(lock);
	if (rc)
		fg_audit_free(a);
	else
		*out = a;
	return rc;
}

int fg_audit_lock(struct fg_audit **out, const char *path, struct fg_err *err)
{
	struct fg_lock *lock = NULL;
	struct fg_audit *a = NULL;
	struct fg_buf dir = FG_BUF_INIT, mp = FG_BUF_INIT, prefix = FG_BUF_INIT, text = FG_BUF_INIT;
	uint8_t d[32];
	char hex[65];
	size_t i;
	int rc;

	*out = NULL;
	if ((rc = fg_lock_read(&lock, path, err)) || (rc = audit_new(&a, "lock", path, err)) ||
	    (rc = fg_file_read(path, FG_LOCK_MAX_BYTES, &text, err)) ||
	    (rc = fg_sha256_mem(text.data, text.len, d, err)) || (rc = dir_of(&dir, path, err)))
		goto out;
	fg_hex_encode(d, 32, hex);
	a->sha256 = strdup(hex);
	for (i = 0; i < lock->n_manifests && !rc; i++) {
		struct fg_lock_manifest *lm = lock->manifests[i];
		struct fg_manifest *m = NULL;

		fg_buf_reset(&mp);
		fg_buf_reset(&prefix);
		if (lock->n_manifests > 1)
			rc = fg_buf_printf(&prefix, err, "%s:", lm->key);
		else
			rc = fg_buf_puts(&prefix, "", err);
		if (!rc)
			rc = fg_buf_printf(&mp, err, "%s/%s", dir.data, lm->key);
		if (rc)
			break;
		if (!a->name && lm->name)
			a->name = strdup(lm->name);
		if (access(mp.data, R_OK) || fg_manifest_load(&m, mp.data, NULL)) {
			m = NULL;
			rc = unknown(a, err, "%s: manifest not found beside the lock; patches not scanned",
				     lm->key);
		}
		if (!rc)
			rc = audit_one_manifest(a, m, m ? mp.data : lm->key, lock, lm, base_name(path),
						prefix.data, err);
		fg_manifest_free(m);
	}
	if (!rc)
		rc = unknown(a, err, "whether the buckets changed since the lock (offline; --online checks)");
out:
	fg_lock_free(lock);
	fg_buf_release(&dir);
	fg_buf_release(&mp);
	fg_buf_release(&prefix);
	fg_buf_release(&text);
	if (rc)
		fg_audit_free(a);
	else
		*out = a;
	return rc;
}

/* ---- bundles ------------------------------------------------------------- */

/* The bundle's members, in tar order, with the bytes of those the audit
 * reads (kept in the one pass that lists them: no pass per member). */
struct member {
	char *name;
	char *data; /* NUL-terminated; NULL: not kept (not wanted, or over its limit) */
	size_t len;
};

struct member_list {
	struct member *m;
	size_t n, cap;
};

#define STATEMENT_MAX ((size_t)16 << 20)

/* The bytes audit wants of a member, as fg_tarball_read_member's bound. */
static size_t member_keep(void *user, const char *path)
{
	(void)user;
	if (!strcmp(path, "manifest.json"))
		return FG_MANIFEST_MAX_BYTES;
	if (ends_with(path, ".intoto.json") || ends_with(path, "provenance.json"))
		return STATEMENT_MAX;
	return ends_with(path, ".py") ? PY_MAX : 0;
}

static int collect_member(void *user, const struct fg_tarball_entry *e, struct fg_err *err)
{
	struct member_list *l = user;
	struct member *m;
	int rc;

	if (e->is_dir)
		return 0;
	if ((rc = grow((void **)&l->m, &l->cap, l->n, sizeof(*l->m), err)))
		return rc;
	m = &l->m[l->n];
	memset(m, 0, sizeof(*m));
	if (!(m->name = strdup(e->path)))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	l->n++;
	if (e->content) {
		m->len = (size_t)e->size;
		if (!(m->data = malloc(m->len + 1)))
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		memcpy(m->data, e->content, m->len);
		m->data[m->len] = '\0'; /* as an fg_buf holds text */
	}
	return 0;
}

/* The kept bytes of the member named name (as read_member would give
 * them): 0, or -1 when absent or not kept. */
static int member_text(const struct member_list *l, const char *name, const char **data,
		       size_t *len)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (!strcmp(l->m[i].name, name)) {
			*data = l->m[i].data;
			*len = l->m[i].len;
			return l->m[i].data ? 0 : -1;
		}
	return -1;
}

/* Every member listed, the identity computed, and the members audit reads
 * kept, in one pass over the archive. */
static int tarball_scan_keep(const char *path, struct member_list *ml, uint8_t id[32],
			     struct fg_err *err)
{
	struct fg_tarball_read_opts o;

	memset(&o, 0, sizeof(o));
	o.keep = member_keep;
	/* a bundle that keeps the id's states is read in lanes on every CPU */
	o.threads = fg_workq_cpus(16);
	return fg_tarball_scan_opts(path, &o, collect_member, ml, id, err);
}

/* 1 when every subject of stmt (at least one) is a member of the bundle
 * below prefix cp ("" for the bundle's top), by its name there and its
 * sha256 in bundle.json's files: the statement describes that component,
 * wherever it lies in the bundle (`pack --attest`, or the bake statement
 * pack attaches, under attestations/). Else 0, and why (when not NULL) gets
 * the first subject that does not match and how. */
static int subjects_in(const cJSON *stmt, const cJSON *files, const char *cp, struct fg_buf *why)
{
	const cJSON *subj = fg_json_arr(stmt, "subject"), *s, *f;
	size_t cl = strlen(cp);
	int n = 0;

	cJSON_ArrayForEach(s, subj) {
		const char *name = fg_json_str(s, "name");
		const char *want = fg_json_str(fg_json_obj(s, "digest"), "sha256");
		const char *have = NULL;

		if (!name || !want) {
			if (why)
				fg_buf_printf(why, NULL, "a subject without a name and a sha256");
			return 0;
		}
		cJSON_ArrayForEach(f, files) {
			const char *fp = fg_json_str(f, "path"), *fs = fg_json_str(f, "sha256");

			if (fp && fs && (!cl || (!strncmp(fp, cp, cl) && fp[cl] == '/')) &&
			    !strcmp(fp + (cl ? cl + 1 : 0), name)) {
				have = fs;
				break;
			}
		}
		if (!have || strcmp(have, want)) {
			if (why)
				fg_buf_printf(why, NULL,
					      have ? "subject %s has sha256 %.16s… but the bundle holds %.16s…"
						   : "subject %s is not in %s%s",
					      name, have ? want : (cl ? cp : "the bundle"), have ? have : "");
			return 0;
		}
		n++;
	}
	if (!n && why)
		fg_buf_printf(why, NULL, "no subject");
	return n > 0;
}

/* {"inputs": resolvedDependencies, "parameters": externalParameters, "builder"} */
static cJSON *derived_from(const cJSON *stmt)
{
	const cJSON *pred = fg_json_obj(stmt, "predicate");
	const cJSON *bd = fg_json_obj(pred, "buildDefinition");
	const cJSON *deps = fg_json_arr(bd, "resolvedDependencies");
	const cJSON *params = fg_json_obj(bd, "externalParameters");
	const char *builder = fg_json_str(fg_json_obj(fg_json_obj(pred, "runDetails"), "builder"), "id");
	const char *pt = fg_json_str(stmt, "predicateType");
	cJSON *d;

	/* another predicate may have fields of the same names that mean
	 * something else: only SLSA provenance v1 is read as what a part was
	 * made from */
	if (!bd || !pt || strcmp(pt, FG_PROV_SLSA_TYPE))
		return NULL;
	d = cJSON_CreateObject();
	cJSON_AddItemToObject(d, "inputs", deps ? cJSON_Duplicate(deps, 1) : cJSON_CreateArray());
	cJSON_AddItemToObject(d, "parameters", params ? cJSON_Duplicate(params, 1) : cJSON_CreateObject());
	if (builder)
		cJSON_AddStringToObject(d, "builder", builder);
	cJSON_AddStringToObject(d, "predicateType", pt);
	return d;
}

int fg_audit_bundle(struct fg_audit **out, const char *path, struct fg_err *err)
{
	struct fg_audit *a = NULL;
	struct fg_buf bj = FG_BUF_INIT, text = FG_BUF_INIT, sig = FG_BUF_INIT, owner = FG_BUF_INIT;
	struct fg_buf why = FG_BUF_INIT;
	const char *kd = NULL; /* a kept member's bytes (member_text) */
	size_t kn = 0;
	struct member_list ml = { 0 };
	cJSON *meta = NULL;
	const cJSON *files, *comps, *c, *f;
	struct fg_manifest *m = NULL;
	const cJSON *env = NULL;
	struct fg_audit_row *brow;
	char hint[FG_SHA256_HEX_LEN + 1] = "", id_hex[65];
	uint8_t id[32];
	struct stat sb;
	size_t i;
	int rc;

	*out = NULL;
	if ((rc = audit_new(&a, "bundle", path, err)))
		goto out;
	if (!(rc = fg_tarball_read_member(path, "bundle.json", (size_t)64 << 20, &bj, err)) &&
	    !(rc = fg_json_parse(&meta, bj.data, bj.len, "bundle.json", err)))
		rc = tarball_scan_keep(path, &ml, id, err);
	if (rc == FG_EFORMAT || rc == FG_EHASH) {
		/* a damaged archive or bundle.json: refused as verify and exec
		 * refuse it */
		fg_err_wrap(err, "bundle %s is corrupt or hostile", path);
		rc = err ? (err->code = FG_EMISMATCH) : FG_EMISMATCH;
	}
	if (rc)
		goto out;
	fg_hex_encode(id, 32, id_hex);
	a->sha256 = strdup(id_hex);
	a->name = dup_or_null(fg_json_str(meta, "name"));
	files = fg_json_arr(meta, "files");

	if ((rc = fg_sign_default_path(&sig, path, err)))
		goto out;
	if (access(sig.data, R_OK) == 0 && fg_file_read(sig.data, (size_t)64 << 20, &text, NULL) == 0)
		fg_sign_peek_hint(hint, text.data, text.len, NULL);
	else
		hint[0] = 0;
	if (!(brow = row_add(a, "bundle", "bundle", "bundle", err))) {
		rc = err ? err->code : FG_ENOMEM;
		goto out;
	}
	brow->source = strdup(path);
	brow->owner = strdup("local");
	brow->digest = strdup(id_hex);
	brow->size = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
	brow->files = (long long)ml.n;
	brow->pin = strdup("bundle id");
	if (hint[0]) {
		brow->signed_by = strdup(hint);
		set_str(&brow->signature, "present, not verified (fgpack verify-sig)");
	} else {
		set_str(&brow->signature, access(sig.data, R_OK) == 0 ? "present, no key hint" : "unsigned");
	}

	/* the manifest inside, for env values and patches; one bundle.json
	 * names that is no manifest is refused, as verify and exec refuse it */
	if (member_text(&ml, "manifest.json", &kd, &kn) == 0) {
		struct fg_err me;

		memset(&me, 0, sizeof(me));
		rc = fg_manifest_parse(&m, kd, kn, "manifest.json", &me);
		if (!rc)
			env = fg_json_obj(m->json, "env");
		else if (rc == FG_ENOMEM)
			rc = fg_err_set(err, rc, "out of memory");
		else if (fg_json_str(meta, "manifest") && !strcmp(fg_json_str(meta, "manifest"), "manifest.json"))
			rc = fg_err_set(err, FG_EMISMATCH, "manifest.json: not a valid manifest: %s",
					strncmp(me.msg, "manifest.json: ", 15) ? me.msg : me.msg + 15);
		else
			rc = unknown(a, err, "manifest.json in the bundle is no manifest (%s): env settings and patches not checked",
				     me.msg);
	} else {
		rc = unknown(a, err, "no manifest.json in the bundle: env settings and patches not checked");
	}

	comps = fg_json_arr(meta, "components");
	cJSON_ArrayForEach(c, comps)
	{
		const char *key = fg_json_str(c, "key"), *cpath = fg_json_str(c, "path");
		const char *src = fg_json_str(c, "source"), *pin = fg_json_str(c, "pin_sha256");
		struct fg_lock_component lc;
		struct fg_lock_file *lf;
		struct fg_audit_row *r;
		size_t n = 0, pl;
		char digest[FG_SHA256_HEX_LEN + 1];
		unsigned long long total = 0;

		if (rc || !key || !cpath)
			continue;
		pl = strlen(cpath);
		lf = calloc((size_t)cJSON_GetArraySize(files) + 1, sizeof(*lf));
		if (!lf) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
		cJSON_ArrayForEach(f, files)
		{
			const char *fp = fg_json_str(f, "path"), *fs = fg_json_str(f, "sha256");
			long long size;

			if (!fp || !fs || fg_json_int(f, "size", &size) || strncmp(fp, cpath, pl) || fp[pl] != '/')
				continue;
			lf[n].path = (char *)fp + pl + 1;
			lf[n].size = (unsigned long long)size;
			memcpy(lf[n].sha256, fs, strlen(fs) < 65 ? strlen(fs) + 1 : 65);
			lf[n].sha256[64] = 0;
			total += (unsigned long long)size;
			n++;
		}
		if (!(r = row_add(a, key, fg_json_str(c, "role"), "bundled", err))) {
			free(lf);
			rc = err ? err->code : FG_ENOMEM;
			break;
		}
		r->source = dup_or_null(src);
		r->target = dup_or_null(fg_json_str(c, "target"));
		r->size = (long long)total;
		r->files = (long long)n;
		r->pin = strdup(pin ? "manifest pin + bundle id" : "bundle id");
		r->pin_sha256 = dup_or_null(pin);
		if (src) {
			struct fg_ref *ref = NULL;

			fg_buf_reset(&owner);
			if (fg_ref_parse(&ref, src, NULL) == 0 && fg_ref_owner(&owner, ref, NULL) == 0)
				r->owner = dup_or_null(owner.data);
			fg_ref_free(ref);
		}
		if (hint[0]) {
			r->signed_by = strdup(hint);
			set_str(&r->signature, "via the bundle signature, not verified");
		} else {
			set_str(&r->signature, "unsigned");
		}
		if ((rc = fg_lock_tree_digest(digest, lf, n, err))) {
			free(lf);
			break;
		}
		r->digest = strdup(digest);
		memset(&lc, 0, sizeof(lc));
		lc.files = lf;
		lc.n_files = n;
		if (pin) {
			const struct fg_lock_file *mf = fg_lock_main_file(&lc);

			if (!(mf && !strcmp(mf->sha256, pin)) && strcmp(digest, pin))
				rc = warn(a, "pin-mismatch", key, err,
					  "%s: the manifest pin %.16s… matches neither the main file %s (%.16s…) "
					  "nor the tree digest %.16s… of what the bundle holds",
					  key, pin, mf ? mf->path : "(none)", mf ? mf->sha256 : "", digest);
		}
		free(lf);
	}

	/* provenance statements and Python patches among the members */
	for (i = 0; i < ml.n && !rc; i++) {
		const char *nm = ml.m[i].name;

		if (ends_with(nm, ".intoto.json") || ends_with(nm, "provenance.json")) {
			cJSON *st = NULL;
			cJSON *d;
			const char *t, *pt, *best_path = "";
			size_t k, best = 0, best_len = 0;
			int placed = 0;

			if (member_text(&ml, nm, &kd, &kn) || fg_json_parse(&st, kd, kn, nm, NULL)) {
				rc = unknown(a, err, "%s: not a JSON statement of at most %zu MiB, not read", nm,
					     STATEMENT_MAX >> 20);
				continue;
			}
			t = fg_json_str(st, "_type");
			pt = fg_json_str(st, "predicateType");
			if (!t || strncmp(t, "https://in-toto.io/Statement/", 29)) {
				rc = unknown(a, err, "%s: not an in-toto statement, not read", nm);
				cJSON_Delete(st);
				continue;
			}
			d = derived_from(st);
			if (!d) {
				rc = unknown(a, err, "%s: predicateType %s is not SLSA provenance v1, not read", nm,
					     pt ? pt : "(none)");
				cJSON_Delete(st);
				continue;
			}
			cJSON_AddStringToObject(d, "statement", nm);
			/* the component whose path holds the statement, else the one
			 * whose files are its subjects, else the bundle when its
			 * subjects are members by their paths in it; the statement
			 * must describe what it is shown on, by name and sha256, or
			 * it is a warning and shown on nothing */
			cJSON_ArrayForEach(c, comps)
			{
				const char *cp = fg_json_str(c, "path"), *key = fg_json_str(c, "key");

				if (!cp || !key || strncmp(nm, cp, strlen(cp)) || nm[strlen(cp)] != '/')
					continue;
				for (k = 0; k < a->n_rows; k++)
					if (!strcmp(a->rows[k].key, key) && strlen(cp) > best_len) {
						best = k;
						best_len = strlen(cp);
						best_path = cp;
					}
			}
			fg_buf_reset(&why);
			if (best_len && !subjects_in(st, files, best_path, &why)) {
				rc = warn(a, "provenance-mismatch", a->rows[best].key, err,
					  "%s does not describe %s (%s): not used", nm, best_path,
					  why.data ? why.data : "");
				placed = 0;
			} else if (best_len) {
				placed = 1;
			} else {
				cJSON_ArrayForEach(c, comps)
				{
					const char *cp = fg_json_str(c, "path"), *key = fg_json_str(c, "key");

					if (!cp || !key || !subjects_in(st, files, cp, NULL))
						continue;
					for (k = 0; k < a->n_rows; k++)
						if (!strcmp(a->rows[k].key, key))
							best = k;
					placed = 1;
					break;
				}
				if (!placed && subjects_in(st, files, "", NULL))
					placed = 1; /* on the bundle (row 0) */
				else if (!placed)
					rc = warn(a, "provenance-mismatch", NULL, err,
						  "%s describes nothing in the bundle (its subjects are no "
						  "component's files by name and sha256): not used",
						  nm);
			}
			if (!placed) {
				cJSON_Delete(d);
				cJSON_Delete(st);
				continue;
			}
			cJSON_Delete(st);
			if (a->rows[best].derived) {
				cJSON *arr = cJSON_IsArray(a->rows[best].derived) ? a->rows[best].derived : NULL;

				if (!arr) {
					arr = cJSON_CreateArray();
					cJSON_AddItemToArray(arr, a->rows[best].derived);
					a->rows[best].derived = arr;
				}
				cJSON_AddItemToArray(arr, d);
			} else {
				a->rows[best].derived = d;
			}
		} else if (ends_with(nm, ".py") && env) {
			if (member_text(&ml, nm, &kd, &kn) == 0)
				rc = fg_audit_scan_python(a, nm, kd, kn, env, err);
		}
	}
	if (!rc && !hint[0])
		rc = unknown(a, err, "who made the bundle: no signature beside it (%s)", sig.data);
	if (!rc)
		rc = unknown(a, err, "member contents not re-hashed here (fgpack verify checks them)");
out:
	for (i = 0; i < ml.n; i++) {
		free(ml.m[i].name);
		free(ml.m[i].data);
	}
	free(ml.m);
	cJSON_Delete(meta);
	fg_manifest_free(m);
	fg_buf_release(&bj);
	fg_buf_release(&text);
	fg_buf_release(&sig);
	fg_buf_release(&owner);
	fg_buf_release(&why);
	if (rc)
		fg_audit_free(a);
	else
		*out = a;
	return rc;
}

int fg_audit_path(struct fg_audit **out, const char *path, const char *lock_path,
		  struct fg_err *err)
{
	struct fg_buf head = FG_BUF_INIT;
	cJSON *doc = NULL;
	int is_lock = 0;

	if (ends_with(path, ".fgb"))
		return fg_audit_bundle(out, path, err);
	if (fg_file_read(path, FG_LOCK_MAX_BYTES, &head, NULL) == 0 &&
	    fg_json_parse(&doc, head.data ? head.data : "", head.len, path, NULL) == 0)
		is_lock = fg_json_obj(doc, "manifests") && cJSON_GetObjectItemCaseSensitive(doc, "schema");
	cJSON_Delete(doc);
	fg_buf_release(&head);
	if (is_lock)
		return fg_audit_lock(out, path, err);
	return fg_audit_manifest(out, path, lock_path, err);
}

/* ---- online -------------------------------------------------------------- */

int fg_audit_online(struct fg_audit *a, const char *lock_path, struct fg_err *err)
{
	struct fg_lock *lock = NULL;
	struct fg_hub_env *env = NULL;
	struct fg_http *h = NULL;
	struct fg_http_opts o;
	size_t i, j, k;
	int rc;

	a->online = 1;
	if (!lock_path)
		return unknown(a, err, "online: no lock to compare the buckets with");
	if ((rc = fg_lock_read(&lock, lock_path, err)) || (rc = fg_hub_env_load(&env, err)))
		goto out;
	if (env->offline) {
		rc = fg_err_set(err, FG_EOFFLINE, "--online with HF_HUB_OFFLINE set");
		goto out;
	}
	fg_http_opts_default(&o);
	o.hub_url = env->endpoint;
	o.token = env->token;
	if ((rc = fg_http_new(&h, &o, err)))
		goto out;
	for (i = 0; i < lock->n_manifests && !rc; i++) {
		struct fg_lock_manifest *lm = lock->manifests[i];

		for (j = 0; j < lm->n_components && !rc; j++) {
			struct fg_lock_component *lc = lm->components[j];
			struct fg_hub_list l = { 0 };
			struct fg_ref *ref = NULL;
			struct fg_err e = { 0, "" };
			size_t changed = 0, seen = 0;
			char first[512] = "";

			if (strcmp(lc->kind, "bucket") || fg_ref_parse(&ref, lc->source, NULL))
				continue;
			if (fg_hub_bucket_tree(&l, h, env->endpoint, ref, &e)) {
				rc = warn(a, "bucket-changed", lc->key, err, "%s: cannot list %s now: %s", lc->key,
					  lc->source, e.msg);
				fg_ref_free(ref);
				continue;
			}
			for (k = 0; k < l.n; k++) {
				const char *rel = fg_ref_rel(ref, l.files[k].path);
				const struct fg_lock_file *lf = rel ? fg_lock_find_file(lc, rel) : NULL;

				if (!rel)
					continue;
				seen++;
				if (!lf) {
					changed++;
					if (!first[0])
						snprintf(first, sizeof(first), "%s is new", rel);
				} else if (lf->size != l.files[k].size ||
					   (lf->remote.xet_hash && l.files[k].xet_hash &&
					    strcmp(lf->remote.xet_hash, l.files[k].xet_hash))) {
					changed++;
					if (!first[0])
						snprintf(first, sizeof(first), "%s changed (%llu -> %llu bytes)", rel,
							 lf->size, l.files[k].size);
				}
			}
			if (seen < lc->n_files + changed && !first[0])
				snprintf(first, sizeof(first), "files were removed");
			if (changed || seen != lc->n_files)
				rc = warn(a, "bucket-changed", lc->key, err,
					  "%s: %s no longer matches the lock: %s (%zu files now, %zu locked)",
					  lc->key, lc->source, first, seen, lc->n_files);
			fg_hub_list_release(&l);
			fg_ref_free(ref);
		}
	}
out:
	fg_http_free(h);
	fg_hub_env_free(env);
	fg_lock_free(lock);
	return rc;
}

/* ---- output -------------------------------------------------------------- */

static void add_str_or_null(cJSON *o, const char *k, const char *v)
{
	if (v)
		cJSON_AddStringToObject(o, k, v);
	else
		cJSON_AddNullToObject(o, k);
}

int fg_audit_json(struct fg_buf *out, const struct fg_audit *a, struct fg_err *err)
{
	cJSON *doc = cJSON_CreateObject(), *rows, *ws, *un, *deps;
	size_t i;
	int rc;

	cJSON_AddNumberToObject(doc, "schema", 1);
	cJSON_AddStringToObject(doc, "input", a->input);
	cJSON_AddStringToObject(doc, "path", a->path);
	add_str_or_null(doc, "name", a->name);
	add_str_or_null(doc, "sha256", a->sha256);
	cJSON_AddBoolToObject(doc, "online", a->online);
	rows = cJSON_AddArrayToObject(doc, "components");
	for (i = 0; i < a->n_rows; i++) {
		const struct fg_audit_row *r = &a->rows[i];
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "key", r->key);
		add_str_or_null(o, "role", r->role);
		add_str_or_null(o, "kind", r->kind);
		add_str_or_null(o, "owner", r->owner);
		add_str_or_null(o, "source", r->source);
		cJSON_AddBoolToObject(o, "pinned", r->pin != NULL);
		add_str_or_null(o, "pin", r->pin);
		add_str_or_null(o, "pin_sha256", r->pin_sha256);
		add_str_or_null(o, "digest", r->digest);
		if (r->size >= 0)
			cJSON_AddNumberToObject(o, "size", (double)r->size);
		else
			cJSON_AddNullToObject(o, "size");
		if (r->files >= 0)
			cJSON_AddNumberToObject(o, "files", (double)r->files);
		else
			cJSON_AddNullToObject(o, "files");
		add_str_or_null(o, "revision", r->revision);
		add_str_or_null(o, "target", r->target);
		add_str_or_null(o, "signed_by", r->signed_by);
		add_str_or_null(o, "signature", r->signature);
		if (r->derived)
			cJSON_AddItemToObject(o, "derived_from", cJSON_Duplicate(r->derived, 1));
		else
			cJSON_AddNullToObject(o, "derived_from");
		cJSON_AddItemToArray(rows, o);
	}
	ws = cJSON_AddArrayToObject(doc, "warnings");
	for (i = 0; i < a->n_warnings; i++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "code", a->warnings[i].code);
		add_str_or_null(o, "key", a->warnings[i].key);
		cJSON_AddStringToObject(o, "message", a->warnings[i].message);
		cJSON_AddItemToArray(ws, o);
	}
	un = cJSON_AddArrayToObject(doc, "unknown");
	for (i = 0; i < a->n_unknown; i++)
		cJSON_AddItemToArray(un, cJSON_CreateString(a->unknown[i]));
	deps = cJSON_AddArrayToObject(doc, "dependencies");
	for (i = 0; i < a->n_deps; i++) {
		const struct fg_audit_dep *d = &a->deps[i];
		cJSON *o = cJSON_CreateObject();

		add_str_or_null(o, "manifest", d->manifest);
		cJSON_AddStringToObject(o, "spec", d->spec);
		cJSON_AddStringToObject(o, "kind", d->kind);
		add_str_or_null(o, "name", d->name);
		add_str_or_null(o, "version", d->version);
		add_str_or_null(o, "url", d->url);
		add_str_or_null(o, "expected_sha256", d->expected);
		add_str_or_null(o, "commit", d->commit);
		add_str_or_null(o, "tree", d->tree);
		add_str_or_null(o, "sha256", d->sha256[0] ? d->sha256 : NULL);
		if (d->size >= 0)
			cJSON_AddNumberToObject(o, "size", (double)d->size);
		else
			cJSON_AddNullToObject(o, "size");
		cJSON_AddItemToArray(deps, o);
	}
	rc = fg_json_write(out, doc, 1, err);
	cJSON_Delete(doc);
	return rc;
}

static const char *cdx_type(const char *role)
{
	if (!role)
		return "data";
	if (!strcmp(role, "weights") || !strcmp(role, "drafter") || !strcmp(role, "model"))
		return "machine-learning-model";
	if (!strcmp(role, "patches"))
		return "file";
	if (!strcmp(role, "bundle"))
		return "application";
	return "data";
}

static void prop(cJSON *props, const char *name, const char *value)
{
	cJSON *p;

	if (!value)
		return;
	p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "name", name);
	cJSON_AddStringToObject(p, "value", value);
	cJSON_AddItemToArray(props, p);
}

static void add_hash(cJSON *o, const char *sha)
{
	cJSON *h, *hs;

	if (!sha || !fg_sha256_hex_valid(sha))
		return;
	hs = cJSON_AddArrayToObject(o, "hashes");
	h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "alg", "SHA-256");
	cJSON_AddStringToObject(h, "content", sha);
	cJSON_AddItemToArray(hs, h);
}

/* pedigree.ancestors from the provenance inputs of one statement summary. */
static void add_ancestors(cJSON *ancestors, const cJSON *d)
{
	const cJSON *in;

	if (cJSON_IsArray(d)) {
		const cJSON *x;

		cJSON_ArrayForEach(x, d)
			add_ancestors(ancestors, x);
		return;
	}
	cJSON_ArrayForEach(in, fg_json_arr(d, "inputs"))
	{
		const char *nm = fg_json_str(in, "name"), *uri = fg_json_str(in, "uri");
		const char *sha = fg_json_str(fg_json_obj(in, "digest"), "sha256");
		cJSON *c = cJSON_CreateObject();

		cJSON_AddStringToObject(c, "type", "data");
		cJSON_AddStringToObject(c, "name", nm ? nm : uri ? uri : "input");
		add_hash(c, sha);
		if (uri) {
			cJSON *refs = cJSON_AddArrayToObject(c, "externalReferences"), *er = cJSON_CreateObject();

			cJSON_AddStringToObject(er, "type", "distribution");
			cJSON_AddStringToObject(er, "url", uri);
			cJSON_AddItemToArray(refs, er);
		}
		cJSON_AddItemToArray(ancestors, c);
	}
}

int fg_audit_cyclonedx(struct fg_buf *out, const struct fg_audit *a, const char *build_id,
		       struct fg_err *err)
{
	cJSON *doc = cJSON_CreateObject(), *meta, *tools, *tc, *t, *root, *comps, *deps, *dall, *don;
	struct fg_buf serial = FG_BUF_INIT, ref = FG_BUF_INIT;
	uint8_t d[32];
	char hex[65];
	const char *model_ref = NULL;
	size_t i;
	int rc;

	/* a name-based serial number: the same input gives the same BOM bytes */
	rc = fg_sha256_mem(a->sha256 ? a->sha256 : a->path, strlen(a->sha256 ? a->sha256 : a->path), d, err);
	if (rc)
		goto out;
	d[6] = (uint8_t)((d[6] & 0x0f) | 0x50);
	d[8] = (uint8_t)((d[8] & 0x3f) | 0x80);
	fg_hex_encode(d, 16, hex);
	fg_buf_printf(&serial, err, "urn:uuid:%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16,
		      hex + 20);
	cJSON_AddStringToObject(doc, "bomFormat", "CycloneDX");
	cJSON_AddStringToObject(doc, "specVersion", "1.6");
	cJSON_AddStringToObject(doc, "serialNumber", serial.data);
	cJSON_AddNumberToObject(doc, "version", 1);
	meta = cJSON_AddObjectToObject(doc, "metadata");
	tools = cJSON_AddObjectToObject(meta, "tools");
	tc = cJSON_AddArrayToObject(tools, "components");
	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "type", "application");
	cJSON_AddStringToObject(t, "name", "fgpack");
	cJSON_AddStringToObject(t, "version", build_id ? build_id : "unknown");
	cJSON_AddItemToArray(tc, t);
	root = cJSON_AddObjectToObject(meta, "component");
	cJSON_AddStringToObject(root, "type", "application");
	cJSON_AddStringToObject(root, "bom-ref", "fgpack:root");
	cJSON_AddStringToObject(root, "name", a->name ? a->name : a->path);
	add_hash(root, a->sha256);
	comps = cJSON_AddArrayToObject(doc, "components");
	for (i = 0; i < a->n_rows; i++) {
		const struct fg_audit_row *r = &a->rows[i];
		cJSON *c = cJSON_CreateObject(), *props;

		fg_buf_reset(&ref);
		fg_buf_printf(&ref, NULL, "component:%s", r->key);
		cJSON_AddStringToObject(c, "type", cdx_type(r->role));
		cJSON_AddStringToObject(c, "bom-ref", ref.data ? ref.data : r->key);
		cJSON_AddStringToObject(c, "name", r->key);
		if (r->revision)
			cJSON_AddStringToObject(c, "version", r->revision);
		if (r->owner)
			cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "supplier"), "name", r->owner);
		/* the digest seen, else the digest the manifest pins (expected) */
		add_hash(c, r->digest ? r->digest : r->pin_sha256);
		if (r->source && strstr(r->source, "://")) {
			cJSON *refs = cJSON_AddArrayToObject(c, "externalReferences"), *er = cJSON_CreateObject();

			cJSON_AddStringToObject(er, "type", "distribution");
			cJSON_AddStringToObject(er, "url", r->source);
			cJSON_AddItemToArray(refs, er);
		}
		if (r->derived) {
			cJSON *ped = cJSON_AddObjectToObject(c, "pedigree");
			cJSON *anc = cJSON_AddArrayToObject(ped, "ancestors");

			add_ancestors(anc, r->derived);
			if (!cJSON_GetArraySize(anc))
				cJSON_DeleteItemFromObject(c, "pedigree");
		}
		props = cJSON_AddArrayToObject(c, "properties");
		prop(props, "fgpack:role", r->role);
		prop(props, "fgpack:kind", r->kind);
		prop(props, "fgpack:source", r->source);
		prop(props, "fgpack:pinned", r->pin ? "true" : "false");
		prop(props, "fgpack:pin", r->pin);
		prop(props, "fgpack:pin_sha256", r->pin_sha256);
		prop(props, "fgpack:target", r->target);
		prop(props, "fgpack:signature", r->signature);
		prop(props, "fgpack:signed_by", r->signed_by);
		cJSON_AddItemToArray(comps, c);
		if (r->role && !strcmp(r->role, "model") && !model_ref)
			model_ref = r->key;
	}
	/* Python requirements: libraries (a purl for exact pins, the URL and its
	 * digest for URL ones) */
	for (i = 0; i < a->n_deps; i++) {
		const struct fg_audit_dep *dp = &a->deps[i];
		cJSON *c = cJSON_CreateObject(), *props;

		fg_buf_reset(&ref);
		fg_buf_printf(&ref, NULL, "dependency:%zu:%s", i, dp->spec);
		cJSON_AddStringToObject(c, "type", "library");
		cJSON_AddStringToObject(c, "bom-ref", ref.data ? ref.data : dp->spec);
		cJSON_AddStringToObject(c, "name", dp->name ? dp->name : dp->url ? dp->url : dp->spec);
		if (dp->version)
			cJSON_AddStringToObject(c, "version", dp->version);
		if (dp->version && dp->name) {
			fg_buf_reset(&ref);
			fg_buf_printf(&ref, NULL, "pkg:pypi/%s@%s", dp->name, dp->version);
			if (ref.data)
				cJSON_AddStringToObject(c, "purl", ref.data);
		}
		add_hash(c, dp->sha256[0] ? dp->sha256 : dp->expected);
		if (dp->url) {
			cJSON *refs = cJSON_AddArrayToObject(c, "externalReferences"), *er = cJSON_CreateObject();

			cJSON_AddStringToObject(er, "type", "distribution");
			cJSON_AddStringToObject(er, "url", dp->url);
			cJSON_AddItemToArray(refs, er);
		}
		props = cJSON_AddArrayToObject(c, "properties");
		prop(props, "fgpack:dependency_kind", dp->kind);
		prop(props, "fgpack:spec", dp->spec);
		cJSON_AddItemToArray(comps, c);
	}
	deps = cJSON_AddArrayToObject(doc, "dependencies");
	dall = cJSON_CreateObject();
	cJSON_AddStringToObject(dall, "ref", "fgpack:root");
	don = cJSON_AddArrayToObject(dall, "dependsOn");
	for (i = 0; i < a->n_rows; i++) {
		fg_buf_reset(&ref);
		fg_buf_printf(&ref, NULL, "component:%s", a->rows[i].key);
		cJSON_AddItemToArray(don, cJSON_CreateString(ref.data));
	}
	for (i = 0; i < a->n_deps; i++) {
		fg_buf_reset(&ref);
		fg_buf_printf(&ref, NULL, "dependency:%zu:%s", i, a->deps[i].spec);
		cJSON_AddItemToArray(don, cJSON_CreateString(ref.data));
	}
	cJSON_AddItemToArray(deps, dall);
	/* the drafter (and baked weights) descend from the base model */
	for (i = 0; i < a->n_rows && model_ref; i++) {
		const struct fg_audit_row *r = &a->rows[i];
		cJSON *dd, *on;

		if (!r->role || (strcmp(r->role, "drafter") && strcmp(r->role, "weights")))
			continue;
		dd = cJSON_CreateObject();
		fg_buf_reset(&ref);
		fg_buf_printf(&ref, NULL, "component:%s", r->key);
		cJSON_AddStringToObject(dd, "ref", ref.data);
		on = cJSON_AddArrayToObject(dd, "dependsOn");
		fg_buf_reset(&ref);
		fg_buf_printf(&ref, NULL, "component:%s", model_ref);
		cJSON_AddItemToArray(on, cJSON_CreateString(ref.data));
		cJSON_AddItemToArray(deps, dd);
	}
	rc = fg_json_write(out, doc, 1, err);
out:
	cJSON_Delete(doc);
	fg_buf_release(&serial);
	fg_buf_release(&ref);
	return rc;
}
