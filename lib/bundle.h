/* bundle.h - the .fgb bundle: bundle.json, its file list, packing and checking.
 *
 * A bundle is a reproducible tar.zst (lib/tarball.h) whose first member is
 * bundle.json (docs/formats/bundle.md): schema, what was packed, engine build,
 * settings, golden transcript digest, and "files": every other member with
 * its size, sha256 and mode, sorted by path. Its identity is the sha256 of
 * the uncompressed tar stream.
 *
 * Packing: fg_bundle_builder_new, then add files (hashed once, in parallel, by
 * fg_bundle_builder_write or fg_bundle_sha256_of) and set
 * fields of the metadata object, then fg_bundle_builder_write, which adds the
 * "files" list, writes bundle.json canonically and the tarball.
 *
 * Checking: fg_bundle_open extracts (safely) into a folder and compares every
 * member with bundle.json, hashing during the extraction: nothing is trusted
 * before it matched. */
#ifndef FG_BUNDLE_H
#define FG_BUNDLE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "err.h"
#include "sha256.h"

#define FG_BUNDLE_SCHEMA 1
#define FG_BUNDLE_JSON "bundle.json"
#define FG_BUNDLE_JSON_MAX ((size_t)64 << 20)
/* pack keeps a hashed file's SHA-256 chain state every this many bytes in
 * bundle.json (docs/formats/bundle.md, "Chain states"); a multiple of
 * FG_TARBALL_FRAME_DATA. The environment's FG_PACK_STATES_EVERY sets another
 * (0: none). */
#define FG_BUNDLE_STATES_EVERY FG_STORE_STATES_EVERY /* lib/store.h: what the store keeps */

struct fg_bundle_builder;

int fg_bundle_builder_new(struct fg_bundle_builder **out, struct fg_err *err);
void fg_bundle_builder_free(struct fg_bundle_builder *b);

/* The bundle.json object being built (borrowed): callers add their fields.
 * "schema" and "files" are set by fg_bundle_builder_write. */
cJSON *fg_bundle_builder_meta(struct fg_bundle_builder *b);

/* Adds the regular file src (symlinks to files are followed) as path. */
int fg_bundle_add_file(struct fg_bundle_builder *b, const char *path, const char *src,
		       struct fg_err *err);
/* fg_bundle_add_file for a file that must hold the bytes sha256_hex names
 * (a store blob, added by its name): hashing it to anything else fails the
 * pack (FG_EHASH), naming the file. */
int fg_bundle_add_blob(struct fg_bundle_builder *b, const char *path, const char *src,
		       const char *sha256_hex, struct fg_err *err);
/* Adds every regular file under dir as prefix/<relative path>; folders that
 * are symlinks, and special files, are refused. *n_added (may be NULL) gets
 * the count, *bytes (may be NULL) the total size. */
int fg_bundle_add_tree(struct fg_bundle_builder *b, const char *prefix, const char *dir,
		       size_t *n_added, unsigned long long *bytes, struct fg_err *err);
/* Adds bytes held in memory (copied). mode 0644 or 0755. */
int fg_bundle_add_mem(struct fg_bundle_builder *b, const char *path, const void *data, size_t len,
		      int mode, struct fg_err *err);
/* 1 when path was added already. */
int fg_bundle_has(const struct fg_bundle_builder *b, const char *path);
/* sha256 hex of an added path (hashing files added so far, if need be), or
 * NULL when absent or unreadable (borrowed). */
const char *fg_bundle_sha256_of(struct fg_bundle_builder *b, const char *path);

/* Threads for hashing the files (default 2); with more than one, the
 * archive is then compressed (one zstd stream) on a thread of its own beside
 * the thread that reads, tars and hashes. The bundle's bytes do not depend
 * on it. */
int fg_bundle_builder_set_threads(struct fg_bundle_builder *b, int threads, struct fg_err *err);

/* The store (borrowed, may be NULL) whose stamps may name files: a file that
 * is a hard link to one of its blobs (as `fgpack pull --into` makes them, or
 * the blob itself), unchanged since the store last checked that blob's bytes
 * (lib/store.h, stamps), is listed with the blob's name and not hashed; the
 * write still refuses it if its stamp moves before its copy ends. Files
 * hashed whole and unchanged that are such links get their stamps noted.
 * Any other file is named the same way by its seen record (lib/store.h,
 * seen: a file the store's readers hashed in full before, unchanged since,
 * and unchanged for 2 s before that), and gets one when it is hashed. */
struct fg_store;
void fg_bundle_builder_set_store(struct fg_bundle_builder *b, struct fg_store *st);
/* Files named by their store blob, not hashed, so far, and their bytes. */
size_t fg_bundle_builder_by_stamp(const struct fg_bundle_builder *b, unsigned long long *bytes);
/* Files named by their seen record, not hashed, so far, and their bytes. */
size_t fg_bundle_builder_by_seen(const struct fg_bundle_builder *b, unsigned long long *bytes);

/* Writes out (atomically): bundle.json then every file, sorted. level is the
 * zstd level (0 = 3), mtime the time stamped on every member. id_hex gets the
 * bundle id. */
int fg_bundle_builder_write(struct fg_bundle_builder *b, const char *out, int level,
			    long long mtime, char id_hex[FG_SHA256_HEX_LEN + 1], struct fg_err *err);

/* One problem found while checking a bundle. */
struct fg_bundle_problem {
	char *path;
	char *what; /* "sha256 differs", "size differs", "missing", "not listed" */
};

struct fg_bundle {
	char *dir;                            /* the extracted folder (owned path) */
	int remove_dir;                       /* fg_bundle_free deletes dir */
	int tmp_slot;                         /* fg_tmp_track_dir's slot of dir
					       * plus 1 (0: not tracked) while a
					       * signal must remove it: our own
					       * folder, or a caller's dest not
					       * yet checked; fg_bundle_free
					       * removes and untracks it */
	cJSON *meta;                          /* parsed bundle.json */
	char id[FG_SHA256_HEX_LEN + 1];       /* sha256 of the uncompressed tar */
	size_t n_files;                       /* members listed and checked */
	unsigned long long bytes;             /* their total size */
	double seconds;                       /* extraction + hashing wall time */
	int lanes;                            /* places the archive was read from at
					       * once: N when a seekable bundle was
					       * read in N lanes (lib/tarlanes.h),
					       * else 1 */
	char expect_id[FG_SHA256_HEX_LEN + 1]; /* the id it was checked against, or "" */
	int by_id;                            /* id == expect_id: every byte proven
					       * by it; member digests not recomputed */
	struct fg_bundle_problem *problems;   /* empty when every file matched */
	size_t n_problems;
};

/* Extracts fgb into dest (NULL: a fresh folder under $TMPDIR, else /tmp,
 * "fgpack-bundle-<pid>[.<n>]" (fg_tmp_pid_dir_make: dead pids' such folders
 * a SIGKILL left are swept first), removed by fg_bundle_free; dest must not
 * exist, and is removed too, by the time this returns or by fg_bundle_free,
 * unless every member matched) and checks every member against
 * bundle.json. Either folder is tracked (fg_tmp_track_dir) while it is
 * ours, so that a SIGINT, SIGTERM or SIGHUP (cmd/'s handler) removes it:
 * our own folder until fg_bundle_free, a dest until it checked out, when it
 * is the caller's and untracked. Returns 0 with
 * b->n_problems = 0 when all matched; FG_EMISMATCH with *out still set and
 * b->problems filled when a file differs, is missing or is not listed;
 * FG_EMISMATCH (and *out NULL) when the archive itself is corrupt; other
 * codes for I/O or usage errors. */
int fg_bundle_open(struct fg_bundle **out, const char *fgb, const char *dest, struct fg_err *err);
void fg_bundle_free(struct fg_bundle *b);

/* fg_bundle_open / fg_bundle_scan against a trusted expected id (64 hex;
 * given by the user or taken from a verified signature; NULL: the plain
 * check). One hashing pass: the identity over the uncompressed tar, which
 * when equal proves every byte of the archive, bundle.json and every member
 * included, to be the bytes that id names; member names, sizes and modes
 * are still compared with bundle.json, and bundle.json is tied to that pass.
 * Member digests are not recomputed (b->by_id = 1). When the id differs, a
 * second pass hashes every member to name the files that differ, and the id
 * itself is the last problem ("(archive)"): FG_EMISMATCH as usual.
 * Without an expected id the member digests against bundle.json are the
 * check (as fg_bundle_open/scan), and the id is informational; a bundle
 * with a seek table is then extracted in lanes on up to threads threads
 * (0 = 1; lib/tarlanes.h), which compute the id too when the bundle keeps
 * its states (docs/formats/bundle.md, "Identity states"), else the id read
 * from start to end beside them on a thread of its own (fg_bundle_open: 1
 * thread). With an expected id too: in lanes from the id's states. */
int fg_bundle_open_id(struct fg_bundle **out, const char *fgb, const char *dest,
		      const char *expect_id, int threads, struct fg_err *err);
/* fg_bundle_open without the bundle id (b->id ""): each member hashed
 * against bundle.json as it is written, a bundle with a seek table
 * extracted in lanes on up to threads threads (0 = 1; lib/tarlanes.h), with
 * the same outcome. For readers that use the files and not the id (serve). */
int fg_bundle_open_files(struct fg_bundle **out, const char *fgb, const char *dest, int threads,
			 struct fg_err *err);
/* fg_bundle_open_id that writes nothing (b->dir NULL); threads as there. */
int fg_bundle_scan_id(struct fg_bundle **out, const char *fgb, const char *expect_id, int threads,
		      struct fg_err *err);

/* fg_bundle_scan_id without an expected id and without the id: the member
 * digests against bundle.json are the whole check, one hashing pass over
 * the member contents; the tar stream is not hashed (b->id is ""). What
 * proves the files without a trusted id, at half the hashing. A bundle
 * with a seek table (every bundle pack writes) is read in lanes on up to
 * threads threads (0 = 1; lib/tarlanes.h), with the same outcome. */
int fg_bundle_scan_files(struct fg_bundle **out, const char *fgb, int threads,
			 struct fg_err *err);

/* Like fg_bundle_open but writes nothing: decompresses and hashes every
 * member in one pass (b->dir is NULL). The fastest full check. */
int fg_bundle_scan(struct fg_bundle **out, const char *fgb, struct fg_err *err);

/* Path of a member inside the extracted folder, appended to out. */
int fg_bundle_path(struct fg_buf *out, const struct fg_bundle *b, const char *rel,
		   struct fg_err *err);

struct fg_manifest;

/* Engine settings a manifest's env sets, as bundle.json "settings":
 * {sliding_window, max_model_len, num_speculative_tokens, centroid_top_k,
 *  greedy: {temperature, top_p, top_k}, honoured: [keys], unhonoured:
 *  [{key, value, why}]}; absent knobs are left out. The embedded engine
 * honours SLIDING_WINDOW, MAX_MODEL_LEN and greedy overrides (temperature 0
 * or top_k 1); num_speculative_tokens and CENTROID_TOP_K (the drafter's
 * centroid top-k) need a Gemma 4 assistant drafter in the bundle, so they
 * come out unhonoured here, and pack moves them to honoured when it bundles
 * one (CENTROID_TOP_K when the drafter has a centroid head
 * (use_ordered_embeddings) and the value is in its range, else the why
 * says so). A value that does not parse is FG_EINVAL naming the key. */
int fg_bundle_settings(cJSON **out, const struct fg_manifest *m, struct fg_err *err);
/* The ranges fg_bundle_settings allows SLIDING_WINDOW and MAX_MODEL_LEN. */
#define FG_BUNDLE_MAX_SLIDING_WINDOW (1 << 20)
#define FG_BUNDLE_MAX_MODEL_LEN (1 << 24)
/* The engine options a bundle's settings set: sliding_window and
 * max_model_len into *sliding_window and *max_seq when present (left alone
 * when absent). A value that is not an integer in the ranges above (an
 * edited bundle.json) is FG_EFORMAT in one line naming the key, rather than
 * an int it was cut to. */
int fg_bundle_engine_settings(int *sliding_window, int *max_seq, const struct fg_bundle *b,
			      struct fg_err *err);
/* One settings "unhonoured" entry {key, value, why} as the line verify and
 * serve print ("KEY=VALUE not applied: WHY"), cut to cap, shown as error
 * messages are (fg_err_one_line: a control character, C1 or byte that is
 * not UTF-8 as '?') and a missing field as "?". */
void fg_bundle_unhonoured_note(char *out, size_t cap, const cJSON *u);
/* Why CENTROID_TOP_K is unhonoured in a bundle without such a drafter. */
#define FG_BUNDLE_TOP_K_WHY "no Gemma 4 assistant drafter with a centroid head (use_ordered_embeddings) in the bundle"

/* The bundle's assistant drafter (bundle.json "drafter", written by pack when
 * a drafter component is a gemma4_assistant checkpoint): its folder into dir,
 * the drafts per round into *k (settings' num_speculative_tokens capped at
 * max_k, else def_k; 0 turns it off) and its centroid top-k into *top_k
 * (settings' centroid_top_k when settings' honoured lists CENTROID_TOP_K,
 * else 0: the drafter config's own). A centroid_top_k that is not an integer
 * in 0..max_top_k is FG_EFORMAT in one line naming the key. Returns 0 and
 * leaves dir empty (*top_k 0) when the bundle has no drafter. */
int fg_bundle_drafter(struct fg_buf *dir, int *k, int *top_k, const struct fg_bundle *b, int def_k, int max_k,
		      int max_top_k, struct fg_err *err);

/* Removes a folder tree (no symlink is followed). */
void fg_bundle_rm_rf(const char *path);

#endif
