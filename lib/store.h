/* store.h - the content-addressed store (docs/formats/store.md).
 *
 * Layout under the root ($FGPACK_HOME, else $XDG_CACHE_HOME/fgpack, else
 * ~/.cache/fgpack):
 *   blobs/sha256/<2 hex>/<64 hex>   complete blobs, mode 0444, named by their sha256
 *   partial/<key>.part              a download in progress (written by the fetcher)
 *   partial/<key>.journal           its journal of finished byte ranges
 *   locks/<key>.lock                per-blob locks (O_EXCL file with pid + flock)
 *   quarantine/<64 hex>.<unix time> blobs whose content no longer matched their name
 *   roots/<sha256 of path>          absolute paths of lock files that use the store (for gc)
 *   tmp/                            scratch for imports, same file system as blobs/
 *   known/<key>                     "<64 hex>\n": the blob a download under key became
 *   stamps/<dev>-<ino>              "<64 hex> <size> <mtime_ns> <ctime_ns>\n": see stamps below
 *   seen/<dev>-<ino>                "<64 hex> <size> <mtime_ns> <ctime_ns> <path>\n": see seen below
 *
 * A blob enters blobs/ only through fg_store_commit, after its sha256 matched,
 * by fsync + rename; nothing else writes there.
 *
 * Fetching one blob safely from several processes:
 *   fg_store_lock_blob(&lk, st, key, timeout_ms)   waits for other holders
 *   if fg_store_has(st, hex): done
 *   fg_store_partial_paths(&part, &journal, st, key)  download / resume into part
 *   fg_store_commit(st, part, actual_hex, expected_hex)
 *   fg_store_unlock(lk)
 * key is from fg_store_key: "sha256-<hex>" when the sha256 is known in advance
 * (a locked pull), else "url-<sha256 of the URL>". */
#ifndef FG_STORE_H
#define FG_STORE_H

#include <stddef.h>
#include <sys/stat.h>

#include "buf.h"
#include "err.h"
#include "sha256.h"

#define FG_STORE_KEY_MAX 80 /* "sha256-" or "url-" + 64 hex + NUL fits */

struct fg_store;      /* opaque */
struct fg_store_lock; /* opaque */

/* The default root ($FGPACK_HOME, $XDG_CACHE_HOME/fgpack, ~/.cache/fgpack). */
int fg_store_default_root(struct fg_buf *out, struct fg_err *err);

/* Opens (creating folders as needed) the store at root, or the default root
 * when root is NULL. */
int fg_store_open(struct fg_store **out, const char *root, struct fg_err *err);
/* Opens the store at root when it is one (it has blobs/sha256), else fails
 * (FG_ENOTFOUND); with root NULL, the default store when it exists, else 0
 * with *out NULL. Creates nothing where there is no store: for readers whose
 * inputs may be hard links to blobs (bake, pack), which never make a store.
 * A store that cannot be opened (read-only?) gives 0 and *out NULL too.
 * The store opened is in use (fg_store_use: shared, waiting while a gc runs)
 * until fg_store_free, so gc refuses while the reader may read its blobs;
 * where locks/store.lock cannot be opened, it is read without. */
int fg_store_open_existing(struct fg_store **out, const char *root, struct fg_err *err);
void fg_store_free(struct fg_store *st);
const char *fg_store_root(const struct fg_store *st); /* borrowed */

/* The store-wide use lock, locks/store.lock (flock; released by
 * fg_store_free). A process that adds or finds blobs which a lock file will
 * name only later (pull, lock) holds it shared from before it looks for a
 * blob until that lock file is written and recorded in roots/ (fg_store_use,
 * which waits while a gc runs); gc holds it exclusive from before it reads
 * the roots until it is done (fg_store_lock_gc: FG_EBUSY at once, naming
 * the store, while any process uses it). So gc never removes a blob that a
 * pull in flight fetched or found present and has not written into its lock
 * yet. Readers of blobs (pack, bake: fg_store_open_existing) hold it
 * shared too while the store is open. Where the file system refuses flock
 * (some NFS mounts) both go on without it, as before. */
int fg_store_use(struct fg_store *st, struct fg_err *err);
int fg_store_lock_gc(struct fg_store *st, struct fg_err *err);
/* What fg_store_use calls, before it waits, when it has to wait: its first
 * try (non-blocking) was refused because a gc holds locks/store.lock
 * exclusive. cmd/ sets it once at start to print one line on stderr (lib/
 * prints nothing); NULL (the default) waits silently. root is borrowed. */
typedef void (*fg_store_wait_fn)(const char *root);
void fg_store_set_wait_notice(fg_store_wait_fn fn);

/* Appends root/blobs/sha256/<2>/<64> (whether or not the blob exists). */
int fg_store_blob_path(struct fg_buf *out, const struct fg_store *st, const char *sha256_hex,
		       struct fg_err *err);
/* 1 when the blob is present as a regular file, else 0. */
int fg_store_has(const struct fg_store *st, const char *sha256_hex);
int fg_store_size(const struct fg_store *st, const char *sha256_hex, unsigned long long *out,
		  struct fg_err *err);

/* Writes the partial/lock key: "sha256-<hex>" when sha256_hex is not NULL,
 * else "url-<sha256(url)>". */
int fg_store_key(char out[FG_STORE_KEY_MAX], const char *sha256_hex, const char *url,
		 struct fg_err *err);
/* Appends root/partial/<key>.part to part and root/partial/<key>.journal to
 * journal (either may be NULL). */
int fg_store_partial_paths(struct fg_buf *part, struct fg_buf *journal, const struct fg_store *st,
			   const char *key, struct fg_err *err);
/* Appends a fresh unique path under root/tmp/ (nothing is created), named
 * "<n>-<time>.fgtmp.<pid>": what a SIGKILLed writer left there is removed
 * by the next import and by gc once its pid is dead (fg_tmp_sweep). */
int fg_store_tmp_path(struct fg_buf *out, const struct fg_store *st, struct fg_err *err);
/* known/<key>: which blob a finished download under key became, so a
 * second process that waited on the same key's lock (or a later run) finds
 * the blob instead of fetching it again. Only meaningful for keys derived
 * from a content identity (xetHash, LFS oid, strong ETag); a cache (no fsync;
 * gc sweeps records older than 30 days). _get returns 1 and fills out_hex when
 * the record exists and its blob is present, else 0. */
int fg_store_known_put(const struct fg_store *st, const char *key, const char *sha256_hex);
int fg_store_known_get(const struct fg_store *st, const char *key,
		       char out_hex[FG_SHA256_HEX_LEN + 1]);
/* Removes partial/<key>.part and .journal (missing ones are fine). */
int fg_store_partial_remove(const struct fg_store *st, const char *key, struct fg_err *err);

/* Moves the fully written file tmp_path (on the store's file system, e.g. a
 * partial or tmp path) into blobs/ as actual_hex: fsync, chmod 0444, rename,
 * fsync folder. When expected_hex is not NULL and differs from actual_hex,
 * tmp_path is deleted and FG_EHASH returned naming both digests. When the blob
 * already exists, tmp_path is deleted and 0 returned. The caller vouches that
 * actual_hex is the sha256 of every byte of tmp_path (the fetcher hashes as it
 * writes); fg_store_import re-hashes instead. */
int fg_store_commit(struct fg_store *st, const char *tmp_path, const char *actual_hex,
		    const char *expected_hex, struct fg_err *err);
/* fg_store_commit with flags. FG_STORE_COMMIT_NOSYNC skips the fsync of the
 * file and of its folder: for committing many small blobs, the caller makes
 * their data durable first and the renames after with one fg_store_sync each. */
#define FG_STORE_COMMIT_NOSYNC 1
int fg_store_commit_ex(struct fg_store *st, const char *tmp_path, const char *actual_hex,
		       const char *expected_hex, int flags, struct fg_err *err);
/* syncfs() on the store's file system. */
int fg_store_sync(struct fg_store *st, struct fg_err *err);

/* Hashes src, copies it into the store (unless present) and writes its digest
 * to out_hex. When expected_hex is given and differs: FG_EHASH, nothing kept. */
int fg_store_import(struct fg_store *st, const char *src, const char *expected_hex,
		    char out_hex[FG_SHA256_HEX_LEN + 1], struct fg_err *err);
/* fg_store_import with flags, the size hashed (may be NULL) and whether the
 * blob was in the store already (may be NULL). FG_STORE_IMPORT_REGULAR
 * refuses anything but a regular file (a symlink, FIFO, device) with FG_EINVAL
 * and never blocks opening it: what file:// components are read with. */
#define FG_STORE_IMPORT_REGULAR 1
int fg_store_import_ex(struct fg_store *st, const char *src, const char *expected_hex, int flags,
		       char out_hex[FG_SHA256_HEX_LEN + 1], unsigned long long *size,
		       int *was_present, struct fg_err *err);

/* Stamps: trusting a blob's name without re-hashing it, as git's index
 * trusts a file's stat data. stamps/<dev>-<ino> records the inode of blob
 * <hex> (size, mtime and ctime in nanoseconds) as it was when its content was
 * last known to equal its name: at commit (the writer hashed every byte), at
 * `store verify`, or when a reader hashed it in full (fg_store_stamp_note).
 * A file that is a hard link to the blob (same device and inode) and still
 * shows that size, mtime and ctime has not been written since: a write moves
 * mtime and ctime, a chmod, a new link, an unlink or a rename move ctime, and
 * ctime cannot be set back from user space. fg_store_materialize re-records
 * the stamp after its own link when only ctime moved. A cache: never fsynced;
 * a missing, torn or stale record means the reader hashes (and notes) again.
 * gc removes records whose blob is gone.
 *
 * 1 and out_hex when sb (fstat of an open file) is the inode of a blob of st
 * whose stamp matches sb exactly; else 0. */
int fg_store_stamp_match(const struct fg_store *st, const struct stat *sb,
			 char out_hex[FG_SHA256_HEX_LEN + 1]);
/* Seen: the same trust for a file that is no blob, as git's index has it
 * for a work tree. seen/<dev>-<ino> records the digest of a file that a
 * reader hashed in full itself (pack, for the files it packs), with the
 * stat it showed before and after, and the file's absolute path (for gc).
 * fg_store_seen_note records it only when the file's mtime and ctime were
 * both at least FG_STORE_SEEN_RACY_NS older than since_ns, a clock reading
 * (fg_store_seen_clock) taken before the stat sb: a later write then moves
 * one of them past the record on any file system whose clock ticks at most
 * that coarsely (FAT: 2 s), so a write in the same tick as the hash cannot
 * go unseen. Not for a blob's inode (its stamp is the record there). 0, or
 * -1 when nothing was recorded. fg_store_seen_match: 1 and out_hex when sb
 * (of a regular file) shows exactly the size, mtime and ctime recorded for
 * its device and inode, whatever path it is reached by. Trusted like a
 * stamp and by the same readers' choice (pack; `--rehash` turns it off); a
 * cache, never fsynced; gc drops a record whose path is gone or shows
 * another inode or stamp now. */
#define FG_STORE_SEEN_RACY_NS 2000000000LL
#define FG_STORE_SEEN_REC_MAX 4352 /* the fields and a path of up to PATH_MAX */
long long fg_store_seen_clock(void); /* CLOCK_REALTIME in ns; 0 if unreadable */
int fg_store_seen_note(const struct fg_store *st, const char *sha256_hex, const struct stat *sb,
		       long long since_ns, const char *path);
int fg_store_seen_match(const struct fg_store *st, const struct stat *sb,
			char out_hex[FG_SHA256_HEX_LEN + 1]);
/* The seen record of a file the caller wrote itself, every byte, and hashed
 * as it wrote (bake's output shards), in a folder of its own until done: sb
 * is its fstat after the last write (and fsync), and path must still show
 * exactly sb. No 2 s rule here: the racy case would need another writer in
 * the caller's own temporary folder within the clock tick of its last
 * write. 0, or -1 when nothing was recorded. */
int fg_store_seen_note_written(const struct fg_store *st, const char *sha256_hex,
			       const struct stat *sb, const char *path);
/* What vouches for the file that shows sb, for a reader that trusts both:
 * FG_STORE_BY_STAMP (a blob's inode whose stamp holds), FG_STORE_BY_SEEN
 * (with seen set: its seen record holds) or 0; out_hex gets the digest. */
#define FG_STORE_BY_STAMP 1
#define FG_STORE_BY_SEEN 2
int fg_store_vouched(const struct fg_store *st, const struct stat *sb, int seen,
		     char out_hex[FG_SHA256_HEX_LEN + 1]);
/* A file the caller hashed in full (path, showing sb before and after):
 * its stamp when it is that blob's inode, else (with seen) its seen record
 * (fg_store_seen_note, since_ns as there). 0 when one was recorded. */
int fg_store_note_hashed(const struct fg_store *st, const char *sha256_hex, const struct stat *sb,
			 int seen, long long since_ns, const char *path);
/* A blob's chain states (docs/formats/store.md, "Chain states";
 * docs/formats/bundle.md): states/<hex> holds the SHA-256 state after every
 * `every` bytes of the blob, as whoever hashed all of it took them. A cache,
 * like the stamps, and trusted for nothing: a reader that starts from a
 * state checks it by ending on the next. fg_store_states_note records n
 * states (32 bytes each); 0, or -1 when nothing was recorded.
 * fg_store_states_get: 0 with *states (malloc'd, the caller frees) and *n
 * when a record for this every holds exactly the states a blob of size
 * bytes has; else -1 and none. The fetcher keeps them every
 * FG_STORE_STATES_EVERY bytes. */
#define FG_STORE_STATES_EVERY ((unsigned long long)32 << 20)
int fg_store_states_note(const struct fg_store *st, const char *sha256_hex,
			 unsigned long long every, const uint8_t *states, size_t n);
int fg_store_states_get(const struct fg_store *st, const char *sha256_hex, unsigned long long size,
			unsigned long long every, uint8_t **states, size_t *n);

/* One file's digest from fg_store_digest_files. */
struct fg_store_digest {
	char hex[FG_SHA256_HEX_LEN + 1];
	unsigned long long size; /* bytes hashed, or the size the stamp vouches for */
	struct stat st;          /* the file as it was named, or before it was read */
	int by_store;            /* 1: named by its store blob, not read */
	int by_seen;             /* 1: named by its seen record, not read */
	int rc;                  /* 0, or FG_E* for this file (FG_ENOTFOUND: absent) */
	struct fg_err err;       /* the message when rc */
	/* fg_store_digest_files_states, a file it hashed: its chain states
	 * (fg_sha256_files_states; malloc'd, the caller frees; NULL: none) */
	uint8_t *states;
	size_t n_states;
};
/* Digests of n files, out[i] for path[i]: a file that is a hard link to a
 * blob of st (NULL: none) whose stamp holds is named by the blob; the others
 * are hashed on `threads` threads (fg_sha256_files, plain reads) and the
 * stamp noted of each that is such a link, unchanged while hashed. Fails
 * only when it cannot run (FG_ENOMEM): check each out[i].rc. */
int fg_store_digest_files(struct fg_store *st, const char *const *path, size_t n, int threads,
			  struct fg_store_digest *out, struct fg_err *err);
/* The same, also giving the chain states every `every` bytes (0: none) of
 * each file (out[i].states): those it hashes from their bytes (recording
 * them beside the stamp of each that is a blob), those it names by their
 * blob as the store kept them; a blob whose states the store did not keep
 * is hashed instead, so the states given are always those of the bytes. */
int fg_store_digest_files_states(struct fg_store *st, const char *const *path, size_t n,
				 int threads, unsigned long long every, struct fg_store_digest *out,
				 struct fg_err *err);
/* The same with flags: FG_STORE_DIGEST_SEEN also names a file by its seen
 * record (by_seen) and notes one for each other file it hashes that is no
 * blob (with the states it took, under the digest, as for a blob). */
#define FG_STORE_DIGEST_SEEN 1
int fg_store_digest_files_ex(struct fg_store *st, const char *const *path, size_t n, int threads,
			     unsigned long long every, int flags, struct fg_store_digest *out,
			     struct fg_err *err);
/* Records sb as blob sha256_hex's stamp, only when sb is that blob's inode.
 * The caller vouches that the file held sha256_hex's bytes while it showed sb:
 * it hashed every byte itself, with sb taken before and found unchanged after.
 * Returns 0, or -1 when nothing was recorded. */
int fg_store_stamp_note(const struct fg_store *st, const char *sha256_hex, const struct stat *sb);

/* Per-blob lock that holds across processes, also where flock is a no-op
 * (NFS): locks/<key>.lock is created O_CREAT|O_EXCL holding
 * "<pid> <boot-relative start time> <hostname>\n", and flock()ed too. A lock
 * whose holder is gone (same host, pid dead or reused) is broken; a lock from
 * another host is broken when its mtime is older than FG_STORE_LOCK_STALE_S
 * (holders call fg_store_lock_touch while working). Waits up to timeout_ms
 * (-1 = forever, 0 = try once); FG_EBUSY when still held. */
#define FG_STORE_LOCK_STALE_S 600
int fg_store_lock_blob(struct fg_store_lock **out, struct fg_store *st, const char *key,
		       int timeout_ms, struct fg_err *err);
void fg_store_lock_touch(struct fg_store_lock *lk);
void fg_store_unlock(struct fg_store_lock *lk); /* accepts NULL */

enum fg_store_mat {
	FG_STORE_MAT_LINK = 1, /* hard link into the store */
	FG_STORE_MAT_COPY = 2, /* a copy (other device, or asked for) */
};

/* Places blob sha256_hex at dest_root/rel: a hard link, or a copy when linking
 * fails (other device) or copy is set. rel must pass fg_path_is_safe_rel, and
 * no folder between dest_root and the file may be a symlink. An existing file
 * at the destination is replaced atomically (rename); never a symlink is made.
 * *how gets FG_STORE_MAT_LINK or _COPY (how may be NULL). */
int fg_store_materialize(const struct fg_store *st, const char *sha256_hex, const char *dest_root,
			 const char *rel, int copy, int *how, struct fg_err *err);

/* fg_store_materialize writes dest_root/rel through "<dest>.fgtmp.<pid>",
 * removed on failure and (tracked: fg_tmp_track) by cmd/'s SIGINT/SIGTERM
 * handler. After a SIGKILL it stays: this removes, from the one folder dir
 * (not below it), every regular file named "<name>.fgtmp.<pid>" whose pid
 * is no live process on this machine (kill(pid, 0) gives ESRCH; a pid that
 * is alive, whoever has it now, keeps its file) and whose mtime is
 * FG_TMP_GRACE_S seconds or more in the past, as fg_tmp_sweep's other
 * callers. Returns how many it removed, also added to *removed (may be
 * NULL); a folder it cannot read gives 0. */
int fg_store_sweep_tmps(const char *dir, size_t *removed);

/* Records the absolute path of a lock file as a gc root (idempotent). */
int fg_store_root_add(struct fg_store *st, const char *lock_path, struct fg_err *err);
/* Calls fn with each recorded root path that still exists. */
int fg_store_roots(const struct fg_store *st, int (*fn)(void *ctx, const char *lock_path),
		   void *ctx, struct fg_err *err);

struct fg_store_report {
	unsigned long long blobs;      /* blobs looked at */
	unsigned long long bytes;      /* their total size */
	unsigned long long bad;        /* verify: mismatched, moved to quarantine/ */
	unsigned long long stray;      /* files in blobs/ not named like a blob (left alone) */
	unsigned long long missing;    /* verify_some: digests asked for but not in the store */
	unsigned long long fixed_modes;/* verify: good blobs found writable, made 0444 again */
	unsigned long long removed;    /* gc: blobs removed (or that would be, dry run) */
	unsigned long long removed_bytes;
	unsigned long long kept;       /* gc: blobs referenced */
	unsigned long long tmps;       /* gc: temporary files of killed atomic writers removed */
	double seconds;                /* wall time */
	double cpu_seconds;            /* verify: user + system CPU time of the process */
};

/* Called per blob; ok is 1 (good / kept), 0 (bad / removed), -1 (missing,
 * fg_store_verify_some only). Return non-zero to stop. May be NULL. */
typedef int (*fg_store_each_fn)(void *ctx, const char *sha256_hex, unsigned long long size, int ok);

/* Re-hashes every blob with jobs threads (<= 0 means 1): 256 KiB reads with
 * posix_fadvise. Mismatching blobs are moved to quarantine/; good ones found
 * writable are made read-only again (rep->fixed_modes). Returns 0 even
 * when some were bad (see rep->bad). */
int fg_store_verify(struct fg_store_report *rep, struct fg_store *st, int jobs,
		    fg_store_each_fn fn, void *ctx, struct fg_err *err);
/* The same for the n_only digests given (e.g. every file of a lock; repeats
 * are fine): absent ones are counted in rep->missing. */
int fg_store_verify_some(struct fg_store_report *rep, struct fg_store *st,
			 const char *const *only, size_t n_only, int jobs, fg_store_each_fn fn,
			 void *ctx, struct fg_err *err);

/* Removes every blob whose digest is not among keep (n_keep lowercase hex
 * strings, any order); with dry_run nothing is removed. Blobs whose lock is
 * held are kept. Stale partial files (no lock holder) are removed too, and
 * fg_file_write_atomic's temporary files of dead writers in roots/, placed/
 * and beside each root's lock file (fg_file_sweep_tmps), and the files and
 * folders of dead writers in tmp/ (fg_tmp_sweep, fg_tmp_sweep_dirs). Takes
 * fg_store_lock_gc first (FG_EBUSY while a pull uses the store) and lets it
 * go when done, unless the caller took it already: one that reads keep from
 * the roots takes it before reading them (and holds it until
 * fg_store_free). */
int fg_store_gc(struct fg_store_report *rep, struct fg_store *st, const char *const *keep,
		size_t n_keep, int dry_run, fg_store_each_fn fn, void *ctx, struct fg_err *err);

/* Hashes a file with the store's fast reader (256 KiB reads, fadvise). */
int fg_store_hash_file(const char *path, char out_hex[FG_SHA256_HEX_LEN + 1],
		       unsigned long long *size, struct fg_err *err);

#endif
