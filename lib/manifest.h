/* manifest.h - the Fast Gemma Challenge manifest and the components hidden in it.
 *
 * A manifest is {name, description, dependencies[], model_id, served_model_name,
 * port, serve[], env{}}; every member is optional, unknown members are kept
 * (in json) and unknown env keys are kept (in env, in file order).
 *
 * Components (see docs/formats/lock.md "Where components come from"):
 *   env.<STEM>_BUCKET        a bucket folder; role from the stem: WEIGHTS -> weights,
 *                            DRAFTER -> drafter, *KEEPSET -> keepset, PATCH* -> patches,
 *                            else the stem in lowercase. hf://buckets/..., or a
 *                            plain https:// / http:// URL of one file, or a
 *                            file:// file or folder; an empty value means "not
 *                            used" and is skipped.
 *   env.<STEM>_SHA256        a pin (64 hex) on the component with the same stem
 *                            (DRAFTER_SHA256 pins DRAFTER_BUCKET, or DRAFTER_MODEL),
 *   env.<KEY>_SHA256         or with that key (DRAFTER_BUCKET_SHA256).
 *   model_id                 a Hub model repo, key "model_id", role "model".
 *   env.DRAFTER_MODEL, env.DRAFTER_REPO   Hub model repos, role "drafter".
 *   env.SPECULATIVE_CONFIG   JSON in a string: method, model, num_speculative_tokens.
 *                            When model is a repo id (not a path) and no other
 *                            drafter component exists, it becomes component
 *                            "SPECULATIVE_CONFIG.model", role "drafter".
 *
 * Target paths (where the serve script expects a component on disk) are the
 * env keys LOCAL_<X>_DIR, <X>_DST and PCK04_KEEPSET (whatever they hold);
 * <X>_DIR, <X>_DEST, <X>_PATH, <X>_KEEPSET, <X>_FILE, DRAFTER_MODEL and
 * DRAFTER_REPO holding an absolute or ./ path (no ':', so not a URL or a
 * search list like LD_LIBRARY_PATH; not a bare name, which may be a repo
 * id); and SPECULATIVE_CONFIG.model
 * when it is an absolute path. Each is assigned to a component by, in order:
 *   1. fixed pairs: WEIGHTS_BUCKET <-> LOCAL_MODEL_DIR, the drafter (DRAFTER_BUCKET,
 *      DRAFTER_MODEL/REPO, SPECULATIVE_CONFIG.model) <-> SPECULATIVE_CONFIG.model,
 *      DRAFTER_MODEL or DRAFTER_REPO as a path; LM_HEAD_KEEPSET_BUCKET <-> LM_HEAD_PRUNE_DST;
 *   2. common stem: the component whose key stem shares the most leading
 *      '_'-separated words with the target's stem (LOCAL_ and the suffix removed),
 *      for folders only: <X>_KEEPSET and <X>_FILE name one file and go by rule 3;
 *   3. containment: a target path inside another assigned target path
 *      (PCK04_KEEPSET=/tmp/w/keep.json lies in LOCAL_MODEL_DIR=/tmp/w) belongs
 *      to that component, as a file inside it.
 *   4. a file: a <X>_KEEPSET or <X>_FILE target no rule above placed, whose
 *      file name is the last segment of exactly one component's source, that
 *      component having no target (PCK04_KEEPSET=/tmp/k/pck04_keepset.json
 *      and LM_HEAD_KEEPSET_BUCKET=hf://buckets/ns/b/pck04_keepset.json):
 *      the component's target is then the file's folder (/tmp/k).
 *   5. last words: a target of a folder or path key (LOCAL_<X>_DIR, <X>_DIR,
 *      <X>_DST, <X>_DEST, <X>_PATH; not a key of rule 1) no rule above placed,
 *      whose stem is the last '_'-separated words of exactly one component's
 *      stem (KEEPSET_PATH -> LM_HEAD_KEEPSET_BUCKET; not TRITON_CACHE_DIR ->
 *      KV_CACHE_BUCKET, which shares only a word), that component having no
 *      target: a path ending in the name of the file the source names (a
 *      URL's, or a name with an extension: KEEPSET_PATH=/tmp/k/keepset.json
 *      for hf://buckets/ns/b/keepset.json) is that file, and its folder
 *      (/tmp/k) the target; another name with an extension (a file that
 *      would need renaming) is placed by nothing; else the path is the
 *      component's folder. Two components ending in those words: nothing is
 *      guessed, the target stays unplaced.
 * A component's own target is its first target by rule 1, else its first by
 * rule 2 whose stem is the component's own stem, else its first by rule 2,
 * else its file's folder by rule 4, else its target by rule 5. By rule 1 or
 * 2, a path that is no *_DIR and ends in the name of the one file the source
 * names (as in rule 5: ROUTER_PATH=/w/r/table.bin for hf://.../table.bin) is
 * that file, and its folder (/w/r) the target. */
#ifndef FG_MANIFEST_H
#define FG_MANIFEST_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "ref.h"
#include "sha256.h"

/* Manifests larger than this are refused before parsing. */
#define FG_MANIFEST_MAX_BYTES ((size_t)16 << 20)

struct fg_manifest_env {
	char *key;
	char *value;
};

struct fg_component {
	char *key;         /* env key or "model_id" / "SPECULATIVE_CONFIG.model" */
	char *role;        /* weights, drafter, keepset, patches, model, <stem> */
	char *source;      /* the reference exactly as written */
	struct fg_ref *ref;/* parsed source (owned) */
	char *pin_key;     /* e.g. "DRAFTER_SHA256", or NULL */
	char *pin_sha256;  /* 64 lowercase hex, or NULL */
	char *target_key;  /* e.g. "LOCAL_MODEL_DIR", or NULL */
	char *target;      /* e.g. "/tmp/osoi5-v0-baked", or NULL */
};

enum fg_target_rule {
	FG_TARGET_UNASSIGNED = 0,
	FG_TARGET_FIXED = 1,   /* rule 1 */
	FG_TARGET_STEM = 2,    /* rule 2 */
	FG_TARGET_INSIDE = 3,  /* rule 3 */
	FG_TARGET_FILE = 4,    /* rule 4 */
	FG_TARGET_TRAILING = 5,/* rule 5 */
};

struct fg_target {
	char *key;       /* env key, or "SPECULATIVE_CONFIG.model" */
	char *path;      /* as written */
	int component;   /* index into components, -1 when unassigned */
	int rule;        /* enum fg_target_rule */
	int fixed;       /* rule 1: the pair's place in its table (earlier wins) */
	char *folder;    /* rules 1 and 2: the folder the component's files go to for this
			  * target: path, or its parent where path names the source's one
			  * file (ROUTER_PATH=/w/r/table.bin: /w/r); else NULL */
};

struct fg_spec_config {
	int present;                     /* env.SPECULATIVE_CONFIG exists */
	char *method;                    /* e.g. "mtp", or NULL */
	char *model;                     /* path or repo id, or NULL */
	long long num_speculative_tokens;/* -1 when absent */
};

/* A Python requirement from "dependencies", classified (recorded in the
 * lock, never installed):
 *   url       "https://…/x.whl[#sha256=<hex>]" or "name @ <url>": the bytes
 *             can be fetched and hashed (fgpack pull --deps); a git URL
 *             ("git+https://…@<rev>") only when rev is a full commit id;
 *   pin       "name[extras]==1.2.3" or "===": one exact version (markers
 *             after ';' allowed), repeatable as far as the index is;
 *   unpinned  anything else that names a project ("torch", "x>=1", "x==1.*"),
 *             and git URLs at a branch or tag:
 *             what gets installed can change; fgpack pull warns. */
enum fg_dep_kind {
	FG_DEP_URL = 1,
	FG_DEP_PIN = 2,
	FG_DEP_UNPINNED = 3,
};

struct fg_dependency {
	int kind;       /* enum fg_dep_kind */
	char *name;     /* project name as written; NULL for a bare URL */
	char *version;  /* PIN: the exact version; else NULL */
	char *url;      /* URL: without its fragment; else NULL */
	char *sha256;   /* URL: a "#sha256=<hex>" fragment (lowercased), or NULL */
	char *commit;   /* URL "git+…@<full commit id>": the commit (lowercased), or NULL */
};

#define FG_GIT_OID_MAX 64
/* For a "git+<scheme>://…" URL (fragment already removed): 1 when it names a
 * git repository at all; then commit (FG_GIT_OID_MAX + 1 bytes) gets the
 * revision after the last '@' of the path when it is a full commit id (40 or
 * 64 hex digits, lowercased), else "" (a branch, a tag, or none). repo (may
 * be NULL) gets the URL git is given: without "git+" and "@<revision>". */
struct fg_buf;
int fg_dependency_git_parse(const char *url, char commit[FG_GIT_OID_MAX + 1], struct fg_buf *repo);

/* "url", "pin", "unpinned". */
const char *fg_dep_kind_name(int kind);
/* Classifies one requirement string; a string that is neither a URL nor
 * starts with a project name is FG_EFORMAT ("not a requirement …"). */
int fg_dependency_parse(struct fg_dependency *out, const char *spec, struct fg_err *err);
void fg_dependency_release(struct fg_dependency *d);

struct fg_manifest {
	char sha256[FG_SHA256_HEX_LEN + 1]; /* of the bytes parsed */
	char *name, *description, *model_id, *served_model_name; /* NULL when absent */
	long long port;                  /* -1 when absent */
	char **dependencies;             /* as written, in order */
	struct fg_dependency *deps;      /* dependencies[i] classified */
	size_t n_dependencies;
	char **serve;                    /* argv, in order */
	size_t n_serve;
	struct fg_manifest_env *env;     /* in file order */
	size_t n_env;
	struct fg_component *components; /* in env order; model_id first */
	size_t n_components;
	struct fg_target *targets;       /* in env order */
	size_t n_targets;
	struct fg_spec_config spec;
	cJSON *json;                     /* the whole document (owned; unknown keys kept) */
};

/* Parses len bytes; what names the input in messages. Errors are one line
 * naming the field, e.g. "manifest.json: env.PORT: expected a string, got number"
 * or "manifest.json: env.WEIGHTS_BUCKET: hf://buckets/x: missing bucket name". */
int fg_manifest_parse(struct fg_manifest **out, const char *text, size_t len, const char *what,
		      struct fg_err *err);
/* Reads and parses a file, refusing more than FG_MANIFEST_MAX_BYTES before parsing. */
int fg_manifest_load(struct fg_manifest **out, const char *path, struct fg_err *err);
void fg_manifest_free(struct fg_manifest *m);

/* Borrowed lookups; NULL when absent. */
const char *fg_manifest_env_get(const struct fg_manifest *m, const char *key);
const struct fg_component *fg_manifest_component(const struct fg_manifest *m, const char *key);

#endif
