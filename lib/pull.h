/* pull.h - a manifest's components into the store and its lock entry: the
 * logic behind `fgpack lock` and `fgpack pull` (cmd/ only parses flags and prints).
 *
 * fg_pull decides from the lock entry for the manifest (same key and same
 * manifest sha256, every component present) whether the remote must be
 * listed again:
 *   - offline: never; every locked blob must be in the store (FG_EOFFLINE
 *     names the first missing one);
 *   - locked: the remote is listed and must match the lock exactly (file set,
 *     sizes, xetHash / commit), else FG_EMISMATCH naming what changed; the
 *     lock entry is not changed;
 *   - otherwise an up-to-date entry is used as is (no network when every blob
 *     is present), and a missing or stale entry is resolved afresh: list,
 *     fetch (files whose remote identity is unchanged and whose blob is
 *     present are not fetched again), hash, and replace the entry.
 * Pins are checked on every path; a component that fails its pin leaves none
 * of the blobs this run added for it in the store.
 *
 * The manifest's dependencies are written into the entry, classified. With
 * opts->deps, its http(s) URL dependencies are fetched (never with the
 * token) and their sha256 and size recorded; a "#sha256=" in the URL must
 * match. Digests already in the lock for the same URL are kept when the
 * entry is rewritten. */
#ifndef FG_PULL_H
#define FG_PULL_H

#include "err.h"
#include "fetch.h"
#include "lock.h"
#include "manifest.h"
#include "ref.h"
#include "store.h"

struct fg_pull_opts {
	const char *key;  /* the manifest's key in the lock, e.g. "manifests/demo.json" */
	const char *into; /* pull --into DIR: a file already at its place there, with the
			   * sha256 to expect, is taken into the store instead of fetched */
	int offline;      /* never open a socket */
	int locked;       /* the remote must still match the lock */
	int refresh;      /* resolve again even when the entry is up to date (fgpack lock) */
	int deps;         /* fetch the manifest's http(s) URL dependencies into the store
			   * and record their sha256 and size (--deps) */
	int jobs;         /* concurrent transfers */
	unsigned long long chunk; /* range size; 0: FG_FETCH_CHUNK */
	long stall_secs;  /* 0: default */
	int journal_nosync; /* see fg_fetch_opts (benchmarks only) */
	unsigned retry_base_ms; /* 0: default */
	void (*progress)(void *ud, const struct fg_fetch_progress *p);
	void *progress_ud;
};

struct fg_pull_report {
	struct fg_fetch_stats fetch;
	int resolved;      /* the remote was listed */
	size_t from_hf_cache; /* --offline, no lock entry: model components resolved from
			       * huggingface_hub's cache (its snapshot's files, not a listing) */
	size_t hf_cache_missing; /* their snapshot links whose blob was missing (left out) */
	int lock_changed;  /* the entry differs from the one that was in the lock */
	size_t files;
	unsigned long long bytes;
	size_t deps_hashed;   /* URL dependencies whose sha256 this run recorded */
};

/* Pulls m into st and leaves its entry (key opts->key) in lock (which may
 * hold other manifests; they are kept). */
int fg_pull(struct fg_pull_report *rep, struct fg_lock *lock, const struct fg_manifest *m,
	    struct fg_store *st, const struct fg_hub_env *env, const struct fg_pull_opts *opts,
	    struct fg_err *err);

/* fgpack lock --check: what the remote holds now against the lock entry,
 * every difference collected (not the first, as --locked stops at), nothing
 * fetched or written. */
enum fg_check_kind {
	FG_CHECK_ADDED = 1, /* on the remote (or disk), not in the lock */
	FG_CHECK_REMOVED,   /* in the lock, no longer there */
	FG_CHECK_CHANGED,   /* there, other content (why says how it shows) */
	FG_CHECK_UNKNOWN    /* a plain URL without ETag or Last-Modified: only its bytes could tell */
};

enum fg_check_state {
	FG_CHECK_SAME = 0,  /* every file as locked (revision included) */
	FG_CHECK_DIFFERS,   /* files added, removed or changed, or the revision moved */
	FG_CHECK_NEW,       /* in the manifest, not in the lock */
	FG_CHECK_GONE,      /* in the lock, no longer in the manifest */
	FG_CHECK_MISSING    /* the source is not there (a 404, a file:// path gone) */
};

struct fg_check_file {
	char *path;
	int kind;                  /* enum fg_check_kind */
	const char *why;           /* CHANGED: "size", "sha256", "xetHash", "oid", "ETag or Last-Modified" */
	unsigned long long size_locked, size_now;
};

struct fg_check_component {
	char *key, *source;
	int state;                 /* enum fg_check_state */
	char *rev_locked, *rev_now; /* model repos: the commits */
	char *missing;             /* MISSING: the remote's words */
	size_t n_same, n_unknown;
	struct fg_check_file *files; /* the differences (and UNKNOWN files) */
	size_t n_files, cap;
};

struct fg_check_report {
	int manifest_changed;      /* the manifest's bytes differ from those locked */
	int up_to_date;            /* nothing differs (UNKNOWN files aside) */
	struct fg_check_component *c;
	size_t n, cap;
};

/* Lists every component of m (opts: key, jobs, stall) and compares with the
 * lock's entry for it, which must exist (FG_ENOTFOUND otherwise); file://
 * files are hashed. Never offline (FG_EOFFLINE). */
int fg_pull_check(struct fg_check_report *rep, const struct fg_lock *lock, const struct fg_manifest *m,
		  const struct fg_hub_env *env, const struct fg_pull_opts *opts, struct fg_err *err);
void fg_check_report_release(struct fg_check_report *rep);

/* The folder a component is materialized in: into + its target without the
 * leading '/', or into/_components/<key> when it has no target. */
int fg_pull_target_dir(struct fg_buf *out, const char *into, const struct fg_lock_component *c,
		       struct fg_err *err);

struct fg_place_report {
	size_t linked, copied; /* how this run's files are there */
	size_t removed;        /* placed by the last --into of this manifest here, not named now */
	size_t kept;           /* such files left alone: changed since they were placed */
	size_t swept;          /* "<file>.fgtmp.<pid>" of dead pids (a pull killed while it
				  placed) removed from the folders placed into */
	size_t foreign;        /* files in the components' target folders that lm does not name
				  and no --into of it placed (a stale download, another version) */
#define FG_PLACE_EXAMPLES 3
	char *foreign_ex[FG_PLACE_EXAMPLES]; /* the first of them in byte order, as paths under DIR
						(NULL-padded) */
	int foreign_more;      /* the look stopped at its bound: there may be more */
};
void fg_place_report_release(struct fg_place_report *rep);

/* Hard-links (copy fallback; copy set: always an independent 0644 copy,
 * copy_file_range, so a reflink where the file system has them) every file
 * of every component of lm into its
 * target dir, and (m given, may be NULL) into each other folder target the
 * manifest gives the component (MODEL_PATH beside LOCAL_MODEL_DIR). Nothing
 * is placed when a target is unusable or two components
 * would put different bytes at one path (FG_EINVAL naming both).
 * Then takes back what the previous materialize of the same manifest (lock
 * key) into the same DIR placed and lm no longer names, as recorded in the
 * store's placed/<sha256 of realpath(DIR) "\n" key>.json: each such file is
 * removed while it still holds the bytes placed (the blob's inode, or a copy
 * hashing to it), with the folders that became empty; one changed since is
 * kept. A copy the last run wrote that shows the same inode, size, mtime and
 * ctime is not written again. The record is then rewritten for this run. Last, the target folders
 * are looked through (not following links, 100000 entries at most) for
 * files lm does not name, which a serve script reading the folder may load:
 * counted in rep->foreign. Before placing into a folder, the temporary
 * files a killed pull left there are removed (fg_store_sweep_tmps;
 * rep->swept). rep may be NULL; else release it with
 * fg_place_report_release. */
int fg_pull_materialize(const struct fg_lock_manifest *lm, const struct fg_manifest *m, struct fg_store *st,
			const char *into, int copy, struct fg_place_report *rep, struct fg_err *err);

#endif
