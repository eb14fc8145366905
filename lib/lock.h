/* lock.h - buckets.lock: what each manifest asked for and what it resolved to.
 *
 * Format (docs/formats/lock.md): canonical JSON via fg_json_write, schema 1:
 *   { "schema": 1,
 *     "manifests": { "<manifest key>": {
 *         "sha256": "<manifest bytes>", "name": "...",
 *         "components": { "<component key>": {
 *             "role", "kind", "source", "owner", ["revision"], ["target"],
 *             "pins": {"DRAFTER_SHA256": "<hex>"},
 *             "files": [ {"path", "size", "sha256", "remote": {...}} ],   sorted by path
 *             "tree_digest": "<hex>" } } } } }
 * tree_digest = sha256 over the lines "<sha256-hex> <size> <path>\n" of the
 * files sorted by path bytes (no lines, i.e. sha256 of "", for no files).
 *
 * Build a lock with fg_lock_new, fg_lock_add_manifest (or
 * fg_lock_add_from_manifest), fg_lock_component_add_file, then
 * fg_lock_component_finish on each component (sorts files, computes the tree
 * digest), then fg_lock_write. Manifest and component pointers returned by
 * the add functions stay valid until the lock is freed (or, for a manifest,
 * until fg_lock_add_manifest replaces it under the same key); pointers into
 * a component's files[] or pins[] only until its next add_file / add_pin. */
#ifndef FG_LOCK_H
#define FG_LOCK_H

#include <stddef.h>

#include "buf.h"
#include "err.h"
#include "manifest.h"
#include "sha256.h"

#define FG_LOCK_SCHEMA 1
#define FG_LOCK_MAX_BYTES ((size_t)256 << 20)

/* What the remote said about a file at resolve time; each field may be NULL.
 * --locked compares these against a fresh listing. */
struct fg_lock_remote {
	char *xet_hash;  /* bucket tree "xetHash" */
	char *mtime;     /* bucket tree "mtime" (string as the Hub gives it) */
	char *uploaded_at; /* bucket tree "uploadedAt" */
	char *etag;      /* ETag / X-Linked-Etag */
	char *commit;    /* model repo: X-Repo-Commit */
	char *oid;       /* model repo: git blob oid */
	char *url;       /* HTTPS / FILE components: where the bytes came from */
	char *last_modified; /* HTTPS: Last-Modified, as the server wrote it */
};

/* Frees the strings a remote identity owns and zeroes it. */
void fg_lock_remote_clear(struct fg_lock_remote *r);

struct fg_lock_file {
	char *path;                              /* relative to the component's source path */
	unsigned long long size;
	char sha256[FG_SHA256_HEX_LEN + 1];      /* lowercase hex */
	struct fg_lock_remote remote;
};

struct fg_lock_pin {
	char *key;                               /* e.g. "DRAFTER_SHA256" */
	char sha256[FG_SHA256_HEX_LEN + 1];
};

struct fg_lock_component {
	char *key;          /* component key (env key, "model_id") */
	char *role;
	char *kind;         /* fg_ref_kind_name(): bucket, model, https, file */
	char *source;       /* as written in the manifest */
	char *owner;        /* "<ns>/<bucket>", "<ns>/<repo>", host, or "local" */
	char *revision;     /* model repos: the resolved commit; else NULL */
	char *target;       /* the target path from the manifest, or NULL */
	struct fg_lock_pin *pins;
	size_t n_pins;
	struct fg_lock_file *files;
	size_t n_files;
	char tree_digest[FG_SHA256_HEX_LEN + 1]; /* set by fg_lock_component_finish */
	int folder;         /* "folder": true, written only where it tells a folder holding
			       one file of its own name from a source naming that file */
};

/* One Python requirement of the manifest (docs/formats/lock.md "Dependencies"). */
struct fg_lock_dep {
	char *spec;         /* as written */
	char *kind;         /* "url", "pin", "unpinned" (fg_dep_kind_name) */
	char *name;         /* project name, or NULL (a bare URL) */
	char *version;      /* pin: the exact version, else NULL */
	char *url;          /* url: without its fragment, else NULL */
	char sha256[FG_SHA256_HEX_LEN + 1]; /* url: computed by fgpack over the bytes
					     * fetched (pull --deps); "" until then */
	unsigned long long size; /* url: bytes, with sha256 */
	char *commit;       /* git URL: the commit id it names, else NULL */
	char *tree;         /* git URL: that commit's tree id, once fetched; else NULL */
};

struct fg_lock_manifest {
	char *key;          /* how the manifest is named, e.g. "manifests/demo.json" */
	char sha256[FG_SHA256_HEX_LEN + 1];
	char *name;         /* manifest "name", or NULL */
	struct fg_lock_component **components; /* sorted by key once written/read */
	size_t n_components;
	struct fg_lock_dep *deps; /* in manifest order (written only when there are any) */
	size_t n_deps;
};

struct fg_lock {
	int schema;
	struct fg_lock_manifest **manifests;
	size_t n_manifests;
};

int fg_lock_new(struct fg_lock **out, struct fg_err *err);
void fg_lock_free(struct fg_lock *lock);

/* Adds a manifest entry (replacing one with the same key). name may be NULL. */
int fg_lock_add_manifest(struct fg_lock_manifest **out, struct fg_lock *lock, const char *key,
			 const char *sha256_hex, const char *name, struct fg_err *err);
/* Adds a manifest entry and one component (without files) per manifest
 * component: key, role, kind, source, owner, target, pins; and its
 * dependencies, classified (sha256 of URL ones still empty). */
int fg_lock_add_from_manifest(struct fg_lock_manifest **out, struct fg_lock *lock,
			      const char *key, const struct fg_manifest *m, struct fg_err *err);
/* Adds a component; all strings are copied; revision and target may be NULL. */
int fg_lock_add_component(struct fg_lock_component **out, struct fg_lock_manifest *lm,
			  const char *key, const char *role, const char *kind, const char *source,
			  const char *owner, const char *revision, const char *target,
			  struct fg_err *err);
int fg_lock_component_add_pin(struct fg_lock_component *c, const char *key,
			      const char *sha256_hex, struct fg_err *err);
/* Adds a file; path must be a safe relative path, sha256 64 hex; remote may be
 * NULL; its strings are copied. */
int fg_lock_component_add_file(struct fg_lock_component *c, const char *path,
			       unsigned long long size, const char *sha256_hex,
			       const struct fg_lock_remote *remote, struct fg_err *err);
/* Sorts files by path bytes, refuses duplicates, computes tree_digest. */
int fg_lock_component_finish(struct fg_lock_component *c, struct fg_err *err);

/* tree digest of n files (need not be sorted; they are not reordered). */
int fg_lock_tree_digest(char out[FG_SHA256_HEX_LEN + 1], const struct fg_lock_file *files,
			size_t n, struct fg_err *err);

/* The file a pin refers to: the only file; else the largest *.safetensors;
 * else the largest file (ties: first by path). NULL when there are no files. */
const struct fg_lock_file *fg_lock_main_file(const struct fg_lock_component *c);
/* Checks every pin: satisfied when it equals the main file's sha256 or the
 * tree digest. FG_EMISMATCH naming component, file, expected and actual. */
int fg_lock_check_pins(const struct fg_lock_component *c, struct fg_err *err);

/* Lookups (borrowed; NULL when absent). */
struct fg_lock_manifest *fg_lock_find_manifest(const struct fg_lock *lock, const char *key);
struct fg_lock_component *fg_lock_find_component(const struct fg_lock_manifest *lm,
						 const char *key);
const struct fg_lock_file *fg_lock_find_file(const struct fg_lock_component *c,
					     const char *path);

/* Canonical bytes (sorted keys, two-space indent, final newline). Components
 * must be finished. */
int fg_lock_serialize(struct fg_buf *out, const struct fg_lock *lock, struct fg_err *err);
/* Writes the canonical bytes atomically (never a half-written lock). */
int fg_lock_write(const char *path, const struct fg_lock *lock, struct fg_err *err);
/* The same for a process that changed only entry key of lock: under an
 * exclusive flock on the file's folder, the file is read again and every
 * other entry in it (written meanwhile by another fgpack, for another
 * manifest) is taken into lock before lock is written, so two pulls of two
 * manifests sharing one lock file both keep their entry. A path written
 * through (fg_out_is_stream: /dev/null, a FIFO) is not read: lock alone is
 * written through it. */
int fg_lock_write_entry(const char *path, struct fg_lock *lock, const char *key, struct fg_err *err);

/* Parses and fully validates: schema, types, hex digests, safe paths, sorted
 * unique files, tree digests recomputed. Errors name the field, e.g.
 * "buckets.lock: manifests.m.json.components.WEIGHTS_BUCKET.files[2].sha256: not 64 lowercase hex". */
int fg_lock_parse(struct fg_lock **out, const char *text, size_t len, const char *what,
		  struct fg_err *err);
int fg_lock_read(struct fg_lock **out, const char *path, struct fg_err *err);

/* Calls fn for every distinct file (and fetched dependency) sha256 in the
 * lock (for store gc). */
int fg_lock_each_digest(const struct fg_lock *lock,
			int (*fn)(void *ctx, const char *sha256_hex), void *ctx);

#endif
