/* audit.h - who made each component, from what, pinned how, signed by whom.
 *
 * An audit reads a challenge manifest, a buckets.lock or a bundle (.fgb) and
 * yields one row per component plus warnings:
 *   unpinned          a mutable bucket reference with no content pin
 *   pin-mismatch      a manifest pin that disagrees with the lock
 *   manifest-changed  the manifest's bytes differ from what the lock recorded
 *   hardcoded-default a serve.py / patch file that hard-codes a value for an
 *                     env variable the manifest sets differently
 *   bucket-changed    (online) the bucket no longer holds what the lock says
 *   bundle-file       a bundle member that does not match bundle.json
 *   provenance-mismatch a bundled statement whose subjects (name, sha256) are
 *                     not the files of what it sits beside: not used
 *   unpinned-dependency a Python requirement that is neither one exact
 *                     version nor a URL
 * and a list of what it could not know (offline, no lock, no signature...).
 * Offline by default: nothing here opens a socket unless fg_audit_online is
 * called. Output: JSON (schema 1) and CycloneDX 1.6. */
#ifndef FG_AUDIT_H
#define FG_AUDIT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "err.h"
#include "sha256.h"

struct fg_audit_row {
	char *key;          /* component key (env key, "model_id", bundle path) */
	char *role;
	char *kind;         /* bucket, model, https, file, bundle */
	char *source;       /* reference as written, or NULL */
	char *owner;        /* "<ns>/<bucket>", "<ns>/<repo>", host, "local" or NULL */
	char *pin;          /* how it is pinned: "manifest:<KEY>", "lock", "revision", or NULL */
	char *pin_sha256;   /* the manifest's pin value, or NULL */
	char *digest;       /* sha256 hex (tree digest or file digest), or NULL unknown */
	long long size;     /* bytes, -1 unknown */
	long long files;    /* file count, -1 unknown */
	char *revision;     /* model repos: resolved commit, or NULL */
	char *target;       /* where the serve script expects it, or NULL */
	char *signed_by;    /* key fingerprint (hex), or NULL */
	char *signature;    /* "verified", "present (not verified)", "unsigned", "unknown" */
	cJSON *derived;     /* {"inputs": [...], "parameters": {...}, "builder"} or NULL (owned) */
};

/* One Python requirement of a manifest: from its lock entry when there is
 * one (digest and size once `fgpack lock --deps` fetched it), else from the
 * manifest (classified, no digest). */
struct fg_audit_dep {
	char *manifest;     /* the manifest's key or path */
	char *spec;         /* as written */
	char *kind;         /* "url", "pin", "unpinned" */
	char *name;         /* project name, or NULL (a bare URL) */
	char *version;      /* pin: the exact version, else NULL */
	char *url;          /* url: without its fragment, else NULL */
	char *expected;     /* url: the "#sha256=" the URL carries, or NULL */
	char *commit;       /* git URL: the commit it names, else NULL */
	char *tree;         /* git URL: the commit's tree id once fetched, else NULL */
	char sha256[FG_SHA256_HEX_LEN + 1]; /* url: computed by fgpack; "" unknown */
	long long size;     /* bytes with sha256, else -1 */
};

struct fg_audit_warning {
	char *code;         /* see the list above */
	char *key;          /* component or env key concerned, or NULL */
	char *message;
};

struct fg_audit {
	char *input;        /* "manifest", "lock" or "bundle" */
	char *path;         /* the file audited */
	char *name;         /* manifest/bundle name, or NULL */
	char *sha256;       /* of the input file (manifest, lock) or bundle id, or NULL */
	struct fg_audit_row *rows;
	size_t n_rows, cap_rows;
	struct fg_audit_warning *warnings;
	size_t n_warnings, cap_warnings;
	char **unknown;     /* "cannot know ..." lines */
	size_t n_unknown, cap_unknown;
	struct fg_audit_dep *deps; /* the manifests' Python requirements, in order */
	size_t n_deps, cap_deps;
	int online;         /* fg_audit_online was run */
};

/* Audits a manifest. lock_path (may be NULL) is a buckets.lock to check it
 * against; without one, digests are unknown except for manifest pins. The
 * folder holding the manifest is scanned for *.py patches (serve.py). */
int fg_audit_manifest(struct fg_audit **out, const char *path, const char *lock_path,
		      struct fg_err *err);
/* Audits every manifest recorded in a buckets.lock (its manifests are
 * looked for beside the lock, by their key, to scan patches and pins). */
int fg_audit_lock(struct fg_audit **out, const char *path, struct fg_err *err);
/* Audits a bundle from its bundle.json, manifest.json, patches and
 * attestations (provenance statements), and PATH.sig beside it. Nothing is
 * extracted to disk. */
int fg_audit_bundle(struct fg_audit **out, const char *path, struct fg_err *err);
/* Picks one of the three from the file's name and content. */
int fg_audit_path(struct fg_audit **out, const char *path, const char *lock_path,
		  struct fg_err *err);
void fg_audit_free(struct fg_audit *a);

/* Scans Python source text for env defaults and overrides of variables the
 * env sets differently: os.environ.get("V", d), os.getenv("V", d),
 * os.environ.setdefault("V", d), os.environ["V"] = d. Adds a
 * hardcoded-default warning per finding; file names the source in messages. */
int fg_audit_scan_python(struct fg_audit *a, const char *file, const char *text, size_t len,
			 const cJSON *env, struct fg_err *err);

/* Online: lists each locked bucket component on the Hub (HF_ENDPOINT) and
 * warns when files, sizes or xet hashes differ from the lock. */
int fg_audit_online(struct fg_audit *a, const char *lock_path, struct fg_err *err);

/* One JSON document (schema 1): rows, warnings, unknown, dependencies. */
int fg_audit_json(struct fg_buf *out, const struct fg_audit *a, struct fg_err *err);
/* A CycloneDX 1.6 BOM: components (machine-learning-model / data / file) with
 * SHA-256 hashes, suppliers (owners), pedigree from provenance, and
 * dependencies (the drafter depends on the base model). build_id goes into
 * metadata.tools. Deterministic: no timestamp, serial number from the input. */
int fg_audit_cyclonedx(struct fg_buf *out, const struct fg_audit *a, const char *build_id,
		       struct fg_err *err);

#endif
