/* store.c - the content-addressed blob store: commit by hash, per-blob
 * cross-process locks, materialize by hard link or copy, verify and gc. */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsutil.h"
#include "json.h"
#include "workq.h"

/* 256 KiB reads: each chunk is hashed while still in L2; measured ~12 % less
 * CPU per byte than 4 MiB reads from the page cache (docs/bench.md). */
#define HASH_CHUNK ((size_t)256 << 10)

struct fg_store {
	char *root;
	char *blobs;      /* root/blobs/sha256 */
	char *partial;
	char *known;
	char *locks;
	char *quarantine;
	char *roots;
	char *tmp;
	char *stamps;
	char *states;
	char *seen;       /* root/seen: digests of files that are not blobs */
	int use_fd;       /* locks/store.lock while held (fg_store_use, fg_store_lock_gc), else -1 */
	int use_ex;       /* 1: held exclusive (gc) */
	int tmp_swept;    /* dead writers' tmp/ files removed (sweep_tmp_dir) */
};

struct fg_store_lock {
	int fd;
	char *path;
	dev_t dev;
	ino_t ino;
};

static int oom(struct fg_err *err)
{
	return fg_err_set(err, FG_ENOMEM, "out of memory");
}

static double cpu_s(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int fg_store_default_root(struct fg_buf *out, struct fg_err *err)
{
	const char *h = getenv("FGPACK_HOME"), *x = getenv("XDG_CACHE_HOME");

	if (h && *h)
		return fg_buf_puts(out, h, err);
	/* XDG says a relative XDG_CACHE_HOME is invalid and must be ignored */
	if (x && x[0] == '/')
		return fg_path_join(out, x, "fgpack", err);
	h = getenv("HOME");
	if (!h || !*h)
		return fg_err_set(err, FG_EINVAL, "no store: set FGPACK_HOME (HOME is not set)");
	return fg_path_join(out, h, ".cache/fgpack", err);
}

static char *joined(const char *a, const char *b)
{
	struct fg_buf o = FG_BUF_INIT;

	if (fg_path_join(&o, a, b, NULL))
		return NULL;
	return fg_buf_detach(&o, NULL);
}

void fg_store_free(struct fg_store *st)
{
	if (!st)
		return;
	if (st->use_fd >= 0)
		close(st->use_fd); /* releases the flock */
	free(st->root);
	free(st->blobs);
	free(st->partial);
	free(st->known);
	free(st->locks);
	free(st->quarantine);
	free(st->roots);
	free(st->tmp);
	free(st->stamps);
	free(st->states);
	free(st->seen);
	free(st);
}

int fg_store_open(struct fg_store **out, const char *root, struct fg_err *err)
{
	struct fg_buf r = FG_BUF_INIT;
	struct fg_store *st;
	int rc;

	*out = NULL;
	if (root)
		rc = fg_buf_puts(&r, root, err);
	else
		rc = fg_store_default_root(&r, err);
	if (rc) {
		fg_buf_release(&r);
		return rc;
	}
	while (r.len > 1 && r.data[r.len - 1] == '/')
		r.data[--r.len] = '\0';
	st = calloc(1, sizeof(*st));
	if (!st) {
		fg_buf_release(&r);
		return oom(err);
	}
	st->use_fd = -1;
	st->root = fg_buf_detach(&r, NULL);
	{
		/* the store's folders; states/ and seen/ are made when first used */
		const struct {
			char **path;
			const char *name;
			int make;
		} dirs[] = {
			{&st->blobs, "blobs/sha256", 1}, {&st->partial, "partial", 1}, {&st->locks, "locks", 1},
			{&st->quarantine, "quarantine", 1}, {&st->roots, "roots", 1}, {&st->tmp, "tmp", 1},
			{&st->known, "known", 1}, {&st->stamps, "stamps", 1}, {&st->states, "states", 0},
			{&st->seen, "seen", 0},
		};
		size_t i;

		for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
			if (!(*dirs[i].path = joined(st->root, dirs[i].name))) {
				fg_store_free(st);
				return oom(err);
			}
		for (i = 0; !rc && i < sizeof(dirs) / sizeof(dirs[0]); i++)
			if (dirs[i].make)
				rc = fg_mkdir_p(*dirs[i].path, 0755, err);
	}
	if (rc) {
		fg_err_wrap(err, "store %s", st->root);
		fg_store_free(st);
		return rc;
	}
	*out = st;
	return 0;
}

int fg_store_open_existing(struct fg_store **out, const char *root, struct fg_err *err)
{
	struct fg_buf r = FG_BUF_INIT, blobs = FG_BUF_INIT;
	struct stat sb;
	int rc = 0, have;

	*out = NULL;
	if (root)
		rc = fg_buf_puts(&r, root, err);
	else if (fg_store_default_root(&r, NULL)) {
		fg_buf_release(&r);
		return 0; /* no HOME, no FGPACK_HOME: no store */
	}
	if (!rc)
		rc = fg_path_join(&blobs, r.data, "blobs/sha256", err);
	have = !rc && !stat(blobs.data, &sb) && S_ISDIR(sb.st_mode);
	if (!rc && !have && root)
		rc = fg_err_set(err, FG_ENOTFOUND, "%s: not an fgpack store (no blobs/sha256)", root);
	if (!rc && have && fg_store_open(out, r.data, NULL))
		*out = NULL; /* unusable: the caller hashes everything itself */
	/* the reader's blobs stay while it reads them: gc refuses meanwhile
	 * (a store whose lock file cannot be opened is read without it) */
	if (!rc && *out)
		fg_store_use(*out, NULL);
	fg_buf_release(&r);
	fg_buf_release(&blobs);
	return rc;
}

const char *fg_store_root(const struct fg_store *st)
{
	return st->root;
}

/* locks/store.lock opened (made if missing) and flocked with op: 0; 1 when
 * another process holds it in a conflicting mode (LOCK_NB); 2 when the file
 * system refuses flock (some NFS mounts: the caller goes on without it); or
 * a negative FG_E* code */
static int use_take(struct fg_store *st, int op, struct fg_err *err)
{
	struct fg_buf p = FG_BUF_INIT;
	int fd, rc;

	if (st->use_fd < 0) {
		if (fg_buf_printf(&p, err, "%s/store.lock", st->locks))
			return FG_ENOMEM;
		fd = open(p.data, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			fd = open(p.data, O_RDONLY | O_CLOEXEC); /* a store others made, read-only to us */
		if (fd < 0) {
			rc = fg_err_set(err, FG_EIO, "store: open %s: %s", p.data, strerror(errno));
			fg_buf_release(&p);
			return rc;
		}
		fg_buf_release(&p);
		st->use_fd = fd;
	}
	while ((rc = flock(st->use_fd, op)) && errno == EINTR)
		;
	if (!rc)
		return 0;
	return errno == EWOULDBLOCK ? 1 : 2;
}

static _Atomic(fg_store_wait_fn) wait_notice;

void fg_store_set_wait_notice(fg_store_wait_fn fn)
{
	atomic_store(&wait_notice, fn);
}

int fg_store_use(struct fg_store *st, struct fg_err *err)
{
	/* a try first: only a process that finds a gc holding the store is told */
	int rc = use_take(st, LOCK_SH | LOCK_NB, err);

	if (rc == 1) {
		fg_store_wait_fn fn = atomic_load(&wait_notice);

		if (fn)
			fn(st->root);
		rc = use_take(st, LOCK_SH, err);
	}
	if (rc < 0)
		return rc;
	st->use_ex = 0;
	return 0;
}

int fg_store_lock_gc(struct fg_store *st, struct fg_err *err)
{
	int rc;

	if (st->use_ex)
		return 0;
	rc = use_take(st, LOCK_EX | LOCK_NB, err);
	if (rc < 0)
		return rc;
	if (rc == 1)
		return fg_err_set(err, FG_EBUSY,
				  "gc: store %s is in use by another fgpack process "
				  "(a pull, lock, pack or bake in progress); "
				  "nothing removed, run gc again when it is done", st->root);
	st->use_ex = 1;
	return 0;
}

int fg_store_blob_path(struct fg_buf *out, const struct fg_store *st, const char *sha256_hex,
		       struct fg_err *err)
{
	if (!fg_sha256_hex_valid(sha256_hex))
		return fg_err_set(err, FG_EINVAL, "not a sha256 (64 lowercase hex): %.80s",
				  sha256_hex ? sha256_hex : "(null)");
	return fg_buf_printf(out, err, "%s/%.2s/%s", st->blobs, sha256_hex, sha256_hex);
}

int fg_store_has(const struct fg_store *st, const char *sha256_hex)
{
	struct fg_buf p = FG_BUF_INIT;
	struct stat sb;
	int has = 0;

	if (!fg_store_blob_path(&p, st, sha256_hex, NULL))
		has = !stat(p.data, &sb) && S_ISREG(sb.st_mode);
	fg_buf_release(&p);
	return has;
}

int fg_store_size(const struct fg_store *st, const char *sha256_hex, unsigned long long *out,
		  struct fg_err *err)
{
	struct fg_buf p = FG_BUF_INIT;
	struct stat sb;
	int rc = fg_store_blob_path(&p, st, sha256_hex, err);

	if (!rc && stat(p.data, &sb))
		rc = fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "blob %s: %s", sha256_hex,
				strerror(errno));
	if (!rc)
		*out = (unsigned long long)sb.st_size;
	fg_buf_release(&p);
	return rc;
}

int fg_store_key(char out[FG_STORE_KEY_MAX], const char *sha256_hex, const char *url,
		 struct fg_err *err)
{
	uint8_t d[FG_SHA256_LEN];
	char hex[FG_SHA256_HEX_LEN + 1];
	int rc;

	if (sha256_hex) {
		if (!fg_sha256_hex_valid(sha256_hex))
			return fg_err_set(err, FG_EINVAL, "store key: not a sha256: %.80s", sha256_hex);
		snprintf(out, FG_STORE_KEY_MAX, "sha256-%s", sha256_hex);
		return 0;
	}
	if (!url || !*url)
		return fg_err_set(err, FG_EINVAL, "store key: needs a sha256 or a URL");
	rc = fg_sha256_mem(url, strlen(url), d, err);
	if (rc)
		return rc;
	fg_hex_encode(d, sizeof(d), hex);
	snprintf(out, FG_STORE_KEY_MAX, "url-%s", hex);
	return 0;
}

static int key_ok(const char *key)
{
	if (!strncmp(key, "sha256-", 7))
		return fg_sha256_hex_valid(key + 7);
	if (!strncmp(key, "url-", 4))
		return fg_sha256_hex_valid(key + 4);
	return 0;
}

int fg_store_partial_paths(struct fg_buf *part, struct fg_buf *journal, const struct fg_store *st,
			   const char *key, struct fg_err *err)
{
	int rc = 0;

	if (!key || !key_ok(key))
		return fg_err_set(err, FG_EINVAL, "store: bad partial key %.80s", key ? key : "(null)");
	if (part)
		rc = fg_buf_printf(part, err, "%s/%s.part", st->partial, key);
	if (!rc && journal)
		rc = fg_buf_printf(journal, err, "%s/%s.journal", st->partial, key);
	return rc;
}

int fg_store_known_put(const struct fg_store *st, const char *key, const char *sha256_hex)
{
	struct fg_buf p = FG_BUF_INIT;
	char line[FG_SHA256_HEX_LEN + 2];
	int fd, rc = -1;

	if (!key_ok(key) || !fg_sha256_hex_valid(sha256_hex) ||
	    fg_buf_printf(&p, NULL, "%s/%s", st->known, key)) {
		fg_buf_release(&p);
		return -1;
	}
	memcpy(line, sha256_hex, FG_SHA256_HEX_LEN);
	line[FG_SHA256_HEX_LEN] = '\n';
	fd = open(p.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		rc = fg_write_all(fd, line, FG_SHA256_HEX_LEN + 1);
		close(fd);
	}
	fg_buf_release(&p);
	return rc;
}

int fg_store_known_get(const struct fg_store *st, const char *key,
		       char out_hex[FG_SHA256_HEX_LEN + 1])
{
	struct fg_buf p = FG_BUF_INIT;
	char line[FG_SHA256_HEX_LEN + 2];
	ssize_t n = -1;
	int fd;

	if (key_ok(key) && !fg_buf_printf(&p, NULL, "%s/%s", st->known, key) &&
	    (fd = open(p.data, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, line, sizeof(line));
		close(fd);
	}
	fg_buf_release(&p);
	if (n != FG_SHA256_HEX_LEN + 1 || line[FG_SHA256_HEX_LEN] != '\n')
		return 0;
	line[FG_SHA256_HEX_LEN] = '\0';
	if (!fg_sha256_hex_valid(line) || !fg_store_has(st, line))
		return 0;
	memcpy(out_hex, line, FG_SHA256_HEX_LEN + 1);
	return 1;
}

int fg_store_partial_remove(const struct fg_store *st, const char *key, struct fg_err *err)
{
	struct fg_buf p = FG_BUF_INIT, j = FG_BUF_INIT;
	int rc = fg_store_partial_paths(&p, &j, st, key, err);

	if (!rc && unlink(p.data) && errno != ENOENT)
		rc = fg_err_set(err, FG_EIO, "remove %s: %s", p.data, strerror(errno));
	if (!rc && unlink(j.data) && errno != ENOENT)
		rc = fg_err_set(err, FG_EIO, "remove %s: %s", j.data, strerror(errno));
	fg_buf_release(&p);
	fg_buf_release(&j);
	return rc;
}

/* How the store's temporary files end: "<...>.fgtmp.<pid>" */
#define TMP_TAG ".fgtmp."

int fg_store_tmp_path(struct fg_buf *out, const struct fg_store *st, struct fg_err *err)
{
	static unsigned long counter;
	struct timespec ts;
	unsigned long n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);

	clock_gettime(CLOCK_REALTIME, &ts);
	/* the pid last, as fg_tmp_sweep reads it: a SIGKILLed writer's file is
	 * removed by the next import (sweep_tmp_dir) and gc */
	return fg_buf_printf(out, err, "%s/%lu-%lx%lx" TMP_TAG "%ld", st->tmp, n, (unsigned long)ts.tv_sec,
			     (unsigned long)ts.tv_nsec, (long)getpid());
}

/* What writers into tmp/ that a SIGKILL stopped left there (a SIGINT's or
 * SIGTERM's are removed by cmd/'s handler: fg_tmp_track), once a handle:
 * only a dead pid's, older than FG_TMP_GRACE_S (a store may be shared with
 * another pid namespace). Folders (gitdep's scratch) only with folders: a
 * git there may write deep below it, where its mtime does not show, so
 * only gc, which holds the store alone, removes them. */
static size_t sweep_tmp_dir(struct fg_store *st, int folders)
{
	size_t n = 0;

	if (st->tmp_swept && !folders)
		return 0;
	st->tmp_swept = 1;
	n += (size_t)fg_tmp_sweep(st->tmp, TMP_TAG, NULL, 0, FG_TMP_GRACE_S);
	if (folders)
		n += (size_t)fg_tmp_sweep_dirs(st->tmp, TMP_TAG, NULL, 0, FG_TMP_GRACE_S);
	return n;
}

/* Copies src to a new file dst (mode), fsynced. Removes dst on failure. */
static int copy_file(const char *src, const char *dst, int mode, struct fg_err *err)
{
	int in, outfd, rc = 0;
	char *buf = NULL;

	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return fg_err_set(err, FG_EIO, "open %s: %s", src, strerror(errno));
	outfd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (outfd < 0) {
		close(in);
		return fg_err_set(err, FG_EIO, "create %s: %s", dst, strerror(errno));
	}
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, outfd, NULL, 1 << 30, 0);

		if (n > 0)
			continue;
		if (n == 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP) {
			rc = fg_err_set(err, errno == ENOSPC ? FG_ENOSPC : FG_EIO, "copy %s: %s", dst,
					strerror(errno));
			break;
		}
		/* no copy_file_range here: plain read/write from where it stopped */
		buf = malloc(HASH_CHUNK);
		if (!buf) {
			rc = oom(err);
			break;
		}
		for (;;) {
			ssize_t r = read(in, buf, HASH_CHUNK);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				rc = fg_err_set(err, FG_EIO, "read %s: %s", src, strerror(errno));
				break;
			}
			if (r == 0)
				break;
			if (fg_write_all(outfd, buf, (size_t)r)) {
				rc = fg_err_set(err, errno == ENOSPC ? FG_ENOSPC : FG_EIO, "write %s: %s",
						dst, strerror(errno));
				break;
			}
		}
		break;
	}
	if (!rc && fsync(outfd))
		rc = fg_err_set(err, FG_EIO, "fsync %s: %s", dst, strerror(errno));
	if (close(outfd) && !rc)
		rc = fg_err_set(err, FG_EIO, "close %s: %s", dst, strerror(errno));
	close(in);
	free(buf);
	if (rc)
		unlink(dst);
	return rc;
}

/* ---- stamps ---- */

/* dir/<dev>-<ino>: the record of inode sb in stamps/ or seen/ */
static int inode_path(struct fg_buf *out, const char *dir, const struct stat *sb)
{
	return fg_buf_printf(out, NULL, "%s/%llu-%llu", dir, (unsigned long long)sb->st_dev,
			     (unsigned long long)sb->st_ino);
}

/* The record's line for blob hex on inode sb; returns its length. */
static int stamp_line(char *buf, size_t cap, const char *hex, const struct stat *sb)
{
	long long mt = (long long)sb->st_mtim.tv_sec * 1000000000LL + sb->st_mtim.tv_nsec;
	long long ct = (long long)sb->st_ctim.tv_sec * 1000000000LL + sb->st_ctim.tv_nsec;

	return snprintf(buf, cap, "%s %llu %lld %lld\n", hex, (unsigned long long)sb->st_size, mt, ct);
}

/* 1 when blob hex is the inode sb names (same device and inode number). */
static int blob_is(const struct fg_store *st, const char *hex, const struct stat *sb)
{
	struct fg_buf p = FG_BUF_INIT;
	struct stat bs;
	int same = !fg_store_blob_path(&p, st, hex, NULL) && !stat(p.data, &bs) &&
		   S_ISREG(bs.st_mode) && bs.st_dev == sb->st_dev && bs.st_ino == sb->st_ino;

	fg_buf_release(&p);
	return same;
}

/* A record (stamps/, seen/) at path, NUL-terminated, into rec (cap bytes):
 * its length, or -1 when it is missing or too short to hold a digest. */
static ssize_t record_read(const char *path, char *rec, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, rec, cap - 1);
	close(fd);
	if (n <= FG_SHA256_HEX_LEN)
		return -1;
	rec[n] = '\0';
	return n;
}

int fg_store_stamp_match(const struct fg_store *st, const struct stat *sb,
			 char out_hex[FG_SHA256_HEX_LEN + 1])
{
	struct fg_buf p = FG_BUF_INIT;
	char rec[160], want[160];
	ssize_t n = -1;
	int wl, ok = 0;

	if (S_ISREG(sb->st_mode) && !inode_path(&p, st->stamps, sb))
		n = record_read(p.data, rec, sizeof(rec));
	fg_buf_release(&p);
	if (n < 0)
		return 0;
	rec[FG_SHA256_HEX_LEN] = '\0';
	if (!fg_sha256_hex_valid(rec))
		return 0;
	wl = stamp_line(want, sizeof(want), rec, sb);
	want[FG_SHA256_HEX_LEN] = '\0';
	/* the whole line, size, mtime and ctime included, must be what sb shows now */
	if (wl > 0 && (size_t)wl < sizeof(want) && n == wl && !memcmp(rec, want, (size_t)wl) &&
	    blob_is(st, rec, sb)) {
		memcpy(out_hex, rec, FG_SHA256_HEX_LEN + 1);
		ok = 1;
	}
	return ok;
}

/* A cache record (stamps/, states/) written to path in dir: whole into a
 * temporary file there, then renamed, so a reader sees the old record or the
 * new one; not fsynced (a lost record only means hashing again). 0 or -1. */
static int cache_put(const char *dir, const char *path, const void *data, size_t len)
{
	struct fg_buf tmp = FG_BUF_INIT;
	int fd = -1, rc = -1;

	if (!fg_buf_printf(&tmp, NULL, "%s/.tmp-XXXXXX", dir))
		fd = mkstemp(tmp.data);
	if (fd >= 0) {
		if (!fg_write_all(fd, data, len) && !fchmod(fd, 0644) && !close(fd)) {
			fd = -1;
			rc = rename(tmp.data, path) ? -1 : 0;
		}
		if (fd >= 0)
			close(fd);
		if (rc)
			unlink(tmp.data);
	}
	fg_buf_release(&tmp);
	return rc;
}

int fg_store_stamp_note(const struct fg_store *st, const char *sha256_hex, const struct stat *sb)
{
	struct fg_buf p = FG_BUF_INIT;
	char line[160];
	int rc = -1, n;

	if (!fg_sha256_hex_valid(sha256_hex) || !S_ISREG(sb->st_mode) || !blob_is(st, sha256_hex, sb))
		return -1;
	n = stamp_line(line, sizeof(line), sha256_hex, sb);
	if (n > 0 && (size_t)n < sizeof(line) && !inode_path(&p, st->stamps, sb))
		rc = cache_put(st->stamps, p.data, line, (size_t)n);
	fg_buf_release(&p);
	return rc;
}

/* ---- seen: digests of files that are not blobs ---- */

/* 1 when rec's digest, size, mtime and ctime (the record's fields before its
 * path) are exactly what sb shows; the digest goes to hex. */
static int seen_holds(const char *rec, const struct stat *sb, char hex[FG_SHA256_HEX_LEN + 1])
{
	char want[160];
	int wl;

	memcpy(hex, rec, FG_SHA256_HEX_LEN);
	hex[FG_SHA256_HEX_LEN] = '\0';
	if (!fg_sha256_hex_valid(hex))
		return 0;
	wl = stamp_line(want, sizeof(want), hex, sb);
	/* the stamp's line, its newline a space before the path */
	if (wl <= 0 || (size_t)wl >= sizeof(want))
		return 0;
	want[wl - 1] = ' ';
	return !strncmp(rec, want, (size_t)wl) && rec[wl] != '\n' && rec[wl] != '\0';
}

int fg_store_seen_match(const struct fg_store *st, const struct stat *sb,
			char out_hex[FG_SHA256_HEX_LEN + 1])
{
	struct fg_buf p = FG_BUF_INIT;
	char rec[FG_STORE_SEEN_REC_MAX], hex[FG_SHA256_HEX_LEN + 1];
	int ok = 0;

	if (S_ISREG(sb->st_mode) && !inode_path(&p, st->seen, sb) && record_read(p.data, rec, sizeof(rec)) > 0 &&
	    seen_holds(rec, sb, hex)) {
		memcpy(out_hex, hex, sizeof(hex));
		ok = 1;
	}
	fg_buf_release(&p);
	return ok;
}

long long fg_store_seen_clock(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts))
		return 0;
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Writes the seen record of sb (a regular file that is no blob of hex). */
static int seen_put(const struct fg_store *st, const char *sha256_hex, const struct stat *sb,
		    const char *path)
{
	struct fg_buf p = FG_BUF_INIT, line = FG_BUF_INIT;
	char stamp[160], *abs = NULL;
	int rc = -1, n;

	if (!fg_sha256_hex_valid(sha256_hex) || !S_ISREG(sb->st_mode) || blob_is(st, sha256_hex, sb) ||
	    !(abs = realpath(path, NULL)) || strchr(abs, '\n'))
		goto out;
	n = stamp_line(stamp, sizeof(stamp), sha256_hex, sb);
	if (n <= 0 || (size_t)n >= sizeof(stamp))
		goto out;
	stamp[n - 1] = '\0';
	if (fg_buf_printf(&line, NULL, "%s %s\n", stamp, abs) || line.len >= FG_STORE_SEEN_REC_MAX ||
	    inode_path(&p, st->seen, sb))
		goto out;
	if (!mkdir(st->seen, 0755) || errno == EEXIST)
		rc = cache_put(st->seen, p.data, line.data, line.len);
out:
	free(abs);
	fg_buf_release(&p);
	fg_buf_release(&line);
	return rc;
}

int fg_store_seen_note(const struct fg_store *st, const char *sha256_hex, const struct stat *sb,
		       long long since_ns, const char *path)
{
	long long mt = (long long)sb->st_mtim.tv_sec * 1000000000LL + sb->st_mtim.tv_nsec;
	long long ct = (long long)sb->st_ctim.tv_sec * 1000000000LL + sb->st_ctim.tv_nsec;

	/* changed less than FG_STORE_SEEN_RACY_NS before the hash began: a
	 * write in the same tick of a coarse clock could leave both times
	 * where they were, so such a file is not vouched for (git's "racy
	 * clean" case, avoided rather than checked later) */
	if (since_ns <= 0 || mt > since_ns - FG_STORE_SEEN_RACY_NS ||
	    ct > since_ns - FG_STORE_SEEN_RACY_NS)
		return -1;
	return seen_put(st, sha256_hex, sb, path);
}

int fg_store_seen_note_written(const struct fg_store *st, const char *sha256_hex,
			       const struct stat *sb, const char *path)
{
	struct stat now;

	/* still the inode the writer left, as it left it */
	if (stat(path, &now) || !fg_stat_unchanged(sb, &now))
		return -1;
	return seen_put(st, sha256_hex, sb, path);
}

int fg_store_vouched(const struct fg_store *st, const struct stat *sb, int seen,
		     char out_hex[FG_SHA256_HEX_LEN + 1])
{
	if (fg_store_stamp_match(st, sb, out_hex))
		return FG_STORE_BY_STAMP;
	return seen && fg_store_seen_match(st, sb, out_hex) ? FG_STORE_BY_SEEN : 0;
}

int fg_store_note_hashed(const struct fg_store *st, const char *sha256_hex, const struct stat *sb,
			 int seen, long long since_ns, const char *path)
{
	if (!fg_store_stamp_note(st, sha256_hex, sb))
		return 0;
	return seen ? fg_store_seen_note(st, sha256_hex, sb, since_ns, path) : -1;
}

/* ---- chain states ---- */

#define STATES_MAGIC "fgpack-states 1\n"

int fg_store_states_note(const struct fg_store *st, const char *sha256_hex,
			 unsigned long long every, const uint8_t *states, size_t n)
{
	struct fg_buf text = FG_BUF_INIT, p = FG_BUF_INIT;
	size_t i;
	int rc = -1;

	if (!fg_sha256_hex_valid(sha256_hex) || !n || !every ||
	    fg_buf_printf(&text, NULL, STATES_MAGIC "every %llu\n", every))
		goto out;
	for (i = 0; i < n; i++) {
		char hex[FG_SHA256_HEX_LEN + 2];

		fg_hex_encode(states + 32 * i, 32, hex);
		hex[FG_SHA256_HEX_LEN] = '\n';
		if (fg_buf_append(&text, hex, FG_SHA256_HEX_LEN + 1, NULL))
			goto out;
	}
	if ((!mkdir(st->states, 0755) || errno == EEXIST) &&
	    !fg_buf_printf(&p, NULL, "%s/%s", st->states, sha256_hex))
		rc = cache_put(st->states, p.data, text.data, text.len);
out:
	fg_buf_release(&text);
	fg_buf_release(&p);
	return rc;
}

int fg_store_states_get(const struct fg_store *st, const char *sha256_hex, unsigned long long size,
			unsigned long long every, uint8_t **states, size_t *n)
{
	struct fg_buf p = FG_BUF_INIT, text = FG_BUF_INIT, head = FG_BUF_INIT;
	size_t want, i, hl;
	uint8_t *out = NULL;
	int rc = -1;

	*states = NULL;
	*n = 0;
	if (!fg_sha256_hex_valid(sha256_hex) || !every || !size)
		return -1;
	want = (size_t)((size - 1) / every);
	if (!want || fg_buf_printf(&head, NULL, STATES_MAGIC "every %llu\n", every) ||
	    fg_buf_printf(&p, NULL, "%s/%s", st->states, sha256_hex) ||
	    fg_file_read(p.data, head.len + want * (FG_SHA256_HEX_LEN + 1) + 1, &text, NULL))
		goto out;
	hl = head.len;
	/* exactly the header for this every and want lines of 64 hex digits */
	if (text.len != hl + want * (FG_SHA256_HEX_LEN + 1) || memcmp(text.data, head.data, hl) ||
	    !(out = malloc(32 * want)))
		goto out;
	for (i = 0; i < want; i++) {
		const char *l = text.data + hl + i * (FG_SHA256_HEX_LEN + 1);
		char hex[FG_SHA256_HEX_LEN + 1];

		memcpy(hex, l, FG_SHA256_HEX_LEN);
		hex[FG_SHA256_HEX_LEN] = '\0';
		if (l[FG_SHA256_HEX_LEN] != '\n' || !fg_hex_lower_valid(hex, FG_SHA256_HEX_LEN) ||
		    fg_hex_decode(hex, out + 32 * i, 32))
			goto out;
	}
	*states = out;
	*n = want;
	out = NULL;
	rc = 0;
out:
	free(out);
	fg_buf_release(&p);
	fg_buf_release(&text);
	fg_buf_release(&head);
	return rc;
}

int fg_store_digest_files(struct fg_store *st, const char *const *path, size_t n, int threads,
			  struct fg_store_digest *out, struct fg_err *err)
{
	return fg_store_digest_files_states(st, path, n, threads, 0, out, err);
}

int fg_store_digest_files_states(struct fg_store *st, const char *const *path, size_t n,
				 int threads, unsigned long long every, struct fg_store_digest *out,
				 struct fg_err *err)
{
	return fg_store_digest_files_ex(st, path, n, threads, every, 0, out, err);
}

int fg_store_digest_files_ex(struct fg_store *st, const char *const *path, size_t n, int threads,
			     unsigned long long every, int flags, struct fg_store_digest *out,
			     struct fg_err *err)
{
	const char **hp = calloc(n + 1, sizeof(*hp));
	size_t *at = calloc(n + 1, sizeof(*at));
	struct fg_sha256_result *res = calloc(n + 1, sizeof(*res));
	int seen = st && (flags & FG_STORE_DIGEST_SEEN);
	long long since = 0;
	size_t i, nh = 0;
	int rc = !hp || !at || !res ? oom(err) : 0;

	for (i = 0; !rc && i < n; i++) {
		struct fg_store_digest *d = &out[i];

		memset(d, 0, sizeof(*d));
		if (st && !stat(path[i], &d->st)) {
			int by = fg_store_vouched(st, &d->st, seen, d->hex);

			d->by_store = by == FG_STORE_BY_STAMP;
			d->by_seen = by == FG_STORE_BY_SEEN;
		}
		/* with its chain states as the store kept them; a blob (or a seen
		 * file) that should have some and has none kept is hashed like any
		 * file (and its states kept then), so that what is listed never
		 * depends on what the store happened to keep */
		if ((d->by_store || d->by_seen) && every && (unsigned long long)d->st.st_size > every &&
		    fg_store_states_get(st, d->hex, (unsigned long long)d->st.st_size, every, &d->states,
					&d->n_states))
			d->by_store = d->by_seen = 0;
		if (d->by_store || d->by_seen) {
			d->size = (unsigned long long)d->st.st_size;
		} else {
			at[nh] = i;
			hp[nh++] = path[i];
		}
	}
	/* before any file's stat in the hashing: what a seen record is vouched from */
	if (seen)
		since = fg_store_seen_clock();
	if (!rc && nh)
		rc = fg_sha256_files_states(hp, nh, threads, 0, every, res, err);
	for (i = 0; !rc && i < nh; i++) {
		struct fg_store_digest *d = &out[at[i]];
		struct stat now;

		d->rc = res[i].rc;
		d->err = res[i].err;
		d->size = res[i].size;
		d->st = res[i].st;
		d->states = res[i].states;
		d->n_states = res[i].n_states;
		res[i].states = NULL;
		if (d->rc)
			continue;
		fg_hex_encode(res[i].digest, FG_SHA256_LEN, d->hex);
		if (!st || stat(hp[i], &now) || !fg_stat_unchanged(&d->st, &now))
			continue;
		if (!fg_store_note_hashed(st, d->hex, &d->st, seen, since, hp[i]) && d->n_states)
			fg_store_states_note(st, d->hex, every, d->states, d->n_states);
	}
	for (i = 0; i < nh; i++)
		free(res[i].states); /* when it could not run */
	free(hp);
	free(at);
	free(res);
	return rc;
}

/* After commit or a hard link: re-records blob hex's stamp from the blob's
 * current inode, when the stamp matched before (sb_before) and only the
 * ctime moved since (a link, a rename). */
static void stamp_carry(const struct fg_store *st, const char *hex, const struct stat *before,
			const char *blob_path)
{
	char had[FG_SHA256_HEX_LEN + 1];
	struct stat now;

	if (fg_store_stamp_match(st, before, had) && !strcmp(had, hex) && !stat(blob_path, &now) &&
	    now.st_dev == before->st_dev && now.st_ino == before->st_ino &&
	    now.st_size == before->st_size && now.st_mtim.tv_sec == before->st_mtim.tv_sec &&
	    now.st_mtim.tv_nsec == before->st_mtim.tv_nsec)
		fg_store_stamp_note(st, hex, &now);
}

int fg_store_commit(struct fg_store *st, const char *tmp_path, const char *actual_hex,
		    const char *expected_hex, struct fg_err *err)
{
	return fg_store_commit_ex(st, tmp_path, actual_hex, expected_hex, 0, err);
}

int fg_store_sync(struct fg_store *st, struct fg_err *err)
{
	int fd = open(st->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return fg_err_set(err, FG_EIO, "open %s: %s", st->root, strerror(errno));
	if (syncfs(fd))
		rc = fg_err_set(err, FG_EIO, "syncfs %s: %s", st->root, strerror(errno));
	close(fd);
	return rc;
}

int fg_store_commit_ex(struct fg_store *st, const char *tmp_path, const char *actual_hex,
		       const char *expected_hex, int flags, struct fg_err *err)
{
	struct fg_buf dst = FG_BUF_INIT, dir = FG_BUF_INIT, tmp2 = FG_BUF_INIT;
	const char *src = tmp_path;
	int fd, rc = 0;

	if (!fg_sha256_hex_valid(actual_hex)) {
		unlink(tmp_path);
		return fg_err_set(err, FG_EINVAL, "commit %s: not a sha256: %.80s", tmp_path,
				  actual_hex ? actual_hex : "(null)");
	}
	if (expected_hex && strcmp(expected_hex, actual_hex)) {
		unlink(tmp_path);
		return fg_err_set(err, FG_EHASH, "sha256 mismatch: expected %s, got %s", expected_hex,
				  actual_hex);
	}
	if (fg_store_has(st, actual_hex)) {
		unlink(tmp_path);
		return 0;
	}
	fd = open(tmp_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fg_err_set(err, FG_EIO, "commit %s: %s", tmp_path, strerror(errno));
	if (!(flags & FG_STORE_COMMIT_NOSYNC) && fsync(fd)) {
		rc = fg_err_set(err, FG_EIO, "fsync %s: %s", tmp_path, strerror(errno));
		close(fd);
		unlink(tmp_path);
		return rc;
	}
	close(fd);
	rc = fg_buf_printf(&dir, err, "%s/%.2s", st->blobs, actual_hex);
	if (!rc)
		rc = fg_mkdir_p(dir.data, 0755, err);
	if (!rc)
		rc = fg_store_blob_path(&dst, st, actual_hex, err);
	if (!rc && chmod(src, 0444))
		rc = fg_err_set(err, FG_EIO, "chmod %s: %s", src, strerror(errno));
	if (!rc && rename(src, dst.data)) {
		if (errno == EXDEV) {
			/* the caller's file is elsewhere: copy next to blobs/ first,
			 * tracked so that a signal does not leave the copy in tmp/ */
			int slot = -1;

			sweep_tmp_dir(st, 0);
			rc = fg_store_tmp_path(&tmp2, st, err);
			if (!rc) {
				slot = fg_tmp_track(tmp2.data);
				rc = copy_file(tmp_path, tmp2.data, 0444, err);
			}
			if (!rc && rename(tmp2.data, dst.data)) {
				rc = fg_err_set(err, FG_EIO, "rename into %s: %s", dst.data, strerror(errno));
				unlink(tmp2.data);
			}
			fg_tmp_untrack(slot);
			if (!rc)
				unlink(tmp_path);
		} else {
			rc = fg_err_set(err, FG_EIO, "rename into %s: %s", dst.data, strerror(errno));
		}
	}
	if (!rc && !(flags & FG_STORE_COMMIT_NOSYNC))
		rc = fg_fsync_dir(dir.data, err);
	else if (rc)
		unlink(tmp_path);
	if (!rc) {
		struct stat sb;

		/* the caller hashed every byte: the blob as it is now is its name */
		if (!stat(dst.data, &sb))
			fg_store_stamp_note(st, actual_hex, &sb);
	}
	fg_buf_release(&dst);
	fg_buf_release(&dir);
	fg_buf_release(&tmp2);
	return rc;
}

/* c (may be NULL): the file's chain states are taken into it when it is
 * larger than FG_STORE_STATES_EVERY (an own context then; else OpenSSL's). */
static int hash_path(const char *path, char *buf, char out_hex[FG_SHA256_HEX_LEN + 1],
		     unsigned long long *size, int outfd, int regular, struct fg_sha256_chain *c,
		     struct fg_err *err)
{
	struct fg_sha256 *h = NULL;
	uint8_t d[FG_SHA256_LEN];
	struct stat sb;
	int fd, rc;

	/* regular: no symlink, and O_NONBLOCK so a FIFO cannot hang the open */
	fd = open(path, O_RDONLY | O_CLOEXEC | (regular ? O_NOFOLLOW | O_NONBLOCK : 0));
	if (fd < 0)
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EINVAL, "open %s: %s", path,
				  errno == ELOOP ? "a symlink, not a regular file" : strerror(errno));
	if (regular && (fstat(fd, &sb) || !S_ISREG(sb.st_mode))) {
		close(fd);
		return fg_err_set(err, FG_EINVAL, "%s: not a regular file", path);
	}
	if (c && (fstat(fd, &sb) || (unsigned long long)sb.st_size <= FG_STORE_STATES_EVERY))
		c = NULL;
	rc = c ? fg_sha256_new_own(&h, err) : fg_sha256_new(&h, err);
	if (!rc)
		rc = fg_sha256_fd_chain(h, c, fd, buf, HASH_CHUNK, outfd, size, path, err);
	if (!rc)
		rc = fg_sha256_final(h, d, err);
	if (!rc)
		fg_hex_encode(d, sizeof(d), out_hex);
	fg_sha256_free(h);
	close(fd);
	return rc;
}

int fg_store_hash_file(const char *path, char out_hex[FG_SHA256_HEX_LEN + 1],
		       unsigned long long *size, struct fg_err *err)
{
	char *buf = malloc(HASH_CHUNK);
	int rc;

	if (!buf)
		return oom(err);
	rc = hash_path(path, buf, out_hex, size, -1, 0, NULL, err);
	free(buf);
	return rc;
}

int fg_store_import(struct fg_store *st, const char *src, const char *expected_hex,
		    char out_hex[FG_SHA256_HEX_LEN + 1], struct fg_err *err)
{
	return fg_store_import_ex(st, src, expected_hex, 0, out_hex, NULL, NULL, err);
}

int fg_store_import_ex(struct fg_store *st, const char *src, const char *expected_hex, int flags,
		       char out_hex[FG_SHA256_HEX_LEN + 1], unsigned long long *size,
		       int *was_present, struct fg_err *err)
{
	struct fg_buf tmp = FG_BUF_INIT;
	struct fg_sha256_chain chain;
	char hex[FG_SHA256_HEX_LEN + 1];
	char *buf = malloc(HASH_CHUNK);
	uint8_t *states = NULL;
	size_t n_states = 0;
	int fd = -1, rc, slot = -1;

	if (!buf)
		return oom(err);
	fg_sha256_chain_init(&chain, FG_STORE_STATES_EVERY);
	sweep_tmp_dir(st, 0);
	rc = fg_store_tmp_path(&tmp, st, err);
	if (!rc) {
		sigset_t old;

		/* a signal removes it (cmd/'s handler), made and tracked as one step;
		 * the commit renames it */
		fg_tmp_hold_signals(&old);
		fd = open(tmp.data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			rc = fg_err_set(err, FG_EIO, "create %s: %s", tmp.data, strerror(errno));
		else
			slot = fg_tmp_track(tmp.data);
		fg_tmp_release_signals(&old);
	}
	if (!rc)
		rc = hash_path(src, buf, hex, size, fd, (flags & FG_STORE_IMPORT_REGULAR) != 0, &chain,
			       err);
	if (fd >= 0 && close(fd) && !rc)
		rc = fg_err_set(err, FG_EIO, "close %s: %s", tmp.data, strerror(errno));
	if (!rc) {
		if (was_present)
			*was_present = fg_store_has(st, hex);
		rc = fg_store_commit(st, tmp.data, hex, expected_hex, err);
		if (rc == FG_EHASH)
			fg_err_wrap(err, "%s", src);
	} else if (tmp.data) {
		unlink(tmp.data);
	}
	fg_tmp_untrack(slot);
	if (!rc && out_hex)
		memcpy(out_hex, hex, sizeof(hex));
	/* the states of the bytes just hashed and stored, beside the blob */
	fg_sha256_chain_take(&chain, &states, &n_states);
	if (!rc && n_states)
		fg_store_states_note(st, hex, FG_STORE_STATES_EVERY, states, n_states);
	free(states);
	fg_buf_release(&tmp);
	free(buf);
	return rc;
}

/* ---- per-blob locks ---- */

/* Start time of a process in clock ticks since boot (field 22 of
 * /proc/<pid>/stat), so a reused pid is told apart; 0 when unknown. */
static unsigned long long proc_start(long pid)
{
	char path[64], buf[1024], *p, *end;
	unsigned long long v = 0;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	/* after ") " comes field 3; walk to field 22 */
	for (field = 2; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p)
		return 0;
	end = strchr(p, ' ');
	if (end)
		*end = '\0';
	if (fg_parse_u64(p, &v))
		return 0;
	return v;
}

static void host_name(char *out, size_t n)
{
	if (gethostname(out, n - 1))
		snprintf(out, n, "unknown");
	out[n - 1] = '\0';
	for (; *out; out++)
		if (*out == ' ' || *out == '\n')
			*out = '_';
}

/* 1 when the lock file behind fd (at path) is held by a live process,
 * 0 when it is stale, with a description of the holder in who. */
static int holder_alive(int fd, char *who, size_t who_n)
{
	char buf[512], host[256], *sp1 = NULL, *sp2 = NULL, *nl;
	unsigned long long start = 0;
	long long pid = 0;
	struct stat sb;
	ssize_t n;
	int parsed = 0, busy;

	snprintf(who, who_n, "another process");
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n > 0) {
		buf[n] = '\0';
		nl = strchr(buf, '\n');
		if (nl)
			*nl = '\0';
		sp1 = strchr(buf, ' ');
		sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
		if (sp1 && sp2) {
			*sp1 = *sp2 = '\0';
			parsed = !fg_parse_i64(buf, &pid) && pid > 0 && !fg_parse_u64(sp1 + 1, &start);
		}
	}
	if (parsed)
		snprintf(who, who_n, "pid %lld on %s", pid, sp2 + 1);
	/* flock refusal proves a live holder where flock works; success proves
	 * nothing (NFS may grant it to everyone), so the pid is checked next */
	busy = flock(fd, LOCK_SH | LOCK_NB) && errno == EWOULDBLOCK;
	if (busy)
		return 1;
	flock(fd, LOCK_UN);
	if (fstat(fd, &sb))
		return 1;
	if (!parsed) /* being written right now, or its writer died at once */
		return time(NULL) - sb.st_mtime < 10;
	host_name(host, sizeof(host));
	if (strcmp(host, sp2 + 1))
		return time(NULL) - sb.st_mtime < FG_STORE_LOCK_STALE_S;
	if (kill((pid_t)pid, 0) && errno == ESRCH)
		return 0;
	if (start && proc_start((long)pid) && proc_start((long)pid) != start)
		return 0; /* the pid now belongs to someone else */
	return 1;
}

int fg_store_lock_blob(struct fg_store_lock **out, struct fg_store *st, const char *key,
		       int timeout_ms, struct fg_err *err)
{
	struct fg_buf path = FG_BUF_INIT;
	double deadline = now_s() + (timeout_ms < 0 ? 1e12 : timeout_ms / 1000.0);
	unsigned sleep_us = 2000;
	char who[300] = "";
	int rc;

	*out = NULL;
	if (!key || (!key_ok(key) && strcmp(key, "gc")))
		return fg_err_set(err, FG_EINVAL, "store: bad lock key %.80s", key ? key : "(null)");
	rc = fg_buf_printf(&path, err, "%s/%s.lock", st->locks, key);
	while (!rc) {
		int fd = open(path.data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

		if (fd >= 0) {
			struct fg_store_lock *lk = calloc(1, sizeof(*lk));
			char host[256], line[400];
			struct stat sb;
			int len;

			host_name(host, sizeof(host));
			len = snprintf(line, sizeof(line), "%ld %llu %s\n", (long)getpid(),
				       proc_start((long)getpid()), host);
			flock(fd, LOCK_EX | LOCK_NB);
			if (!lk || fg_write_all(fd, line, (size_t)len) || fstat(fd, &sb)) {
				rc = lk ? fg_err_set(err, FG_EIO, "write %s: %s", path.data, strerror(errno))
					: oom(err);
				free(lk);
				unlink(path.data);
				close(fd);
				break;
			}
			lk->fd = fd;
			lk->dev = sb.st_dev;
			lk->ino = sb.st_ino;
			lk->path = fg_buf_detach(&path, NULL);
			*out = lk;
			return 0;
		}
		if (errno != EEXIST) {
			rc = fg_err_set(err, FG_EIO, "create lock %s: %s", path.data, strerror(errno));
			break;
		}
		fd = open(path.data, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT)
				continue; /* released between our two opens: try again at once */
			rc = fg_err_set(err, FG_EIO, "open lock %s: %s", path.data, strerror(errno));
			break;
		}
		if (!holder_alive(fd, who, sizeof(who))) {
			struct stat a, b;

			/* break it only if the file is still the one judged stale */
			if (!fstat(fd, &a) && !stat(path.data, &b) && a.st_ino == b.st_ino &&
			    a.st_dev == b.st_dev)
				unlink(path.data);
			close(fd);
			continue;
		}
		close(fd);
		if (now_s() >= deadline) {
			rc = fg_err_set(err, FG_EBUSY, "%s is locked by %s (%s)", key, who, path.data);
			break;
		}
		usleep(sleep_us);
		if (sleep_us < 100000)
			sleep_us *= 2;
	}
	fg_buf_release(&path);
	return rc;
}

void fg_store_lock_touch(struct fg_store_lock *lk)
{
	if (lk)
		futimens(lk->fd, NULL);
}

void fg_store_unlock(struct fg_store_lock *lk)
{
	struct stat sb;

	if (!lk)
		return;
	/* remove the file only while it is still ours (not broken and re-made) */
	if (!stat(lk->path, &sb) && sb.st_ino == lk->ino && sb.st_dev == lk->dev)
		unlink(lk->path);
	close(lk->fd);
	free(lk->path);
	free(lk);
}

/* ---- materialize ---- */

int fg_store_materialize(const struct fg_store *st, const char *sha256_hex, const char *dest_root,
			 const char *rel, int copy, int *how, struct fg_err *err)
{
	struct fg_buf blob = FG_BUF_INIT, dst = FG_BUF_INIT, tmp = FG_BUF_INIT;
	struct stat sb, bs;
	size_t i;
	int rc, linked = 0, slot;

	if (!fg_path_is_safe_rel(rel))
		return fg_err_set(err, FG_EINVAL, "materialize: \"%s\" is not a safe relative path", rel);
	rc = fg_store_blob_path(&blob, st, sha256_hex, err);
	if (!rc && stat(blob.data, &bs))
		rc = fg_err_set(err, FG_ENOTFOUND, "materialize %s: blob %s is not in the store", rel,
				sha256_hex);
	if (!rc)
		rc = fg_mkdir_p(dest_root, 0755, err);
	if (!rc)
		rc = fg_path_join(&dst, dest_root, rel, err);
	/* create each folder below dest_root, refusing symlinks on the way */
	for (i = strlen(dest_root) + 1; !rc && i < dst.len; i++) {
		if (dst.data[i] != '/')
			continue;
		dst.data[i] = '\0';
		if (lstat(dst.data, &sb)) {
			if (errno != ENOENT || mkdir(dst.data, 0755))
				rc = fg_err_set(err, FG_EIO, "mkdir %s: %s", dst.data, strerror(errno));
		} else if (S_ISLNK(sb.st_mode)) {
			rc = fg_err_set(err, FG_EINVAL, "materialize: %s is a symlink; refusing to write through it",
					dst.data);
		} else if (!S_ISDIR(sb.st_mode)) {
			rc = fg_err_set(err, FG_EIO, "materialize: %s exists and is not a folder", dst.data);
		}
		dst.data[i] = '/';
	}
	if (rc)
		goto out;
	if (!lstat(dst.data, &sb)) {
		if (S_ISDIR(sb.st_mode)) {
			rc = fg_err_set(err, FG_EIO, "materialize: %s is a folder", dst.data);
			goto out;
		}
		if (!copy && sb.st_ino == bs.st_ino && sb.st_dev == bs.st_dev) {
			if (how)
				*how = FG_STORE_MAT_LINK;
			goto out; /* already the blob */
		}
	}
	rc = fg_buf_printf(&tmp, err, "%s.fgtmp.%ld", dst.data, (long)getpid());
	if (rc)
		goto out;
	unlink(tmp.data);
	/* removed by cmd/'s handler on SIGINT/SIGTERM; after a SIGKILL, by the
	 * next pull into the folder (fg_store_sweep_tmps) */
	slot = fg_tmp_track(tmp.data);
	if (!copy && !link(blob.data, tmp.data))
		linked = 1;
	else if (!copy && errno != EXDEV && errno != EPERM && errno != EMLINK && errno != ENOTSUP &&
		 errno != EACCES)
		rc = fg_err_set(err, FG_EIO, "link %s: %s", tmp.data, strerror(errno));
	if (!rc && !linked)
		rc = copy_file(blob.data, tmp.data, 0644, err);
	if (!rc && rename(tmp.data, dst.data)) {
		rc = fg_err_set(err, FG_EIO, "rename %s: %s", dst.data, strerror(errno));
		unlink(tmp.data);
	}
	fg_tmp_untrack(slot);
	if (!rc && linked)
		stamp_carry(st, sha256_hex, &bs, blob.data); /* the link moved the blob's ctime */
	if (!rc && how)
		*how = linked ? FG_STORE_MAT_LINK : FG_STORE_MAT_COPY;
out:
	fg_buf_release(&blob);
	fg_buf_release(&dst);
	fg_buf_release(&tmp);
	return rc;
}

int fg_store_sweep_tmps(const char *dir, size_t *removed)
{
	/* fg_store_materialize's "<dest>.fgtmp.<pid>", with every sweep's
	 * grace: a pull of another pid namespace (a container sharing the
	 * folder) may still be writing one whose pid this machine cannot see */
	int n = fg_tmp_sweep(dir, ".fgtmp.", NULL, 0, FG_TMP_GRACE_S);

	if (removed)
		*removed += (size_t)n;
	return n;
}

/* ---- gc roots ---- */

int fg_store_root_add(struct fg_store *st, const char *lock_path, struct fg_err *err)
{
	struct fg_buf p = FG_BUF_INIT, line = FG_BUF_INIT;
	char *abs = realpath(lock_path, NULL);
	char hex[FG_SHA256_HEX_LEN + 1];
	uint8_t d[FG_SHA256_LEN];
	int rc;

	if (!abs)
		return fg_err_set(err, FG_ENOTFOUND, "gc root %s: %s", lock_path, strerror(errno));
	rc = fg_sha256_mem(abs, strlen(abs), d, err);
	if (!rc) {
		fg_hex_encode(d, sizeof(d), hex);
		rc = fg_buf_printf(&p, err, "%s/%s", st->roots, hex);
	}
	if (!rc)
		rc = fg_buf_printf(&line, err, "%s\n", abs);
	if (!rc) {
		/* already recorded: skip the write (and its two fsyncs) */
		struct fg_buf old = FG_BUF_INIT;
		int same = !fg_file_read(p.data, 1 << 16, &old, NULL) && old.len == line.len &&
			   !memcmp(old.data, line.data, line.len);

		fg_buf_release(&old);
		if (!same)
			rc = fg_file_write_atomic(p.data, line.data, line.len, 0644, err);
	}
	free(abs);
	fg_buf_release(&p);
	fg_buf_release(&line);
	return rc;
}

int fg_store_roots(const struct fg_store *st, int (*fn)(void *ctx, const char *lock_path),
		   void *ctx, struct fg_err *err)
{
	DIR *d = opendir(st->roots);
	struct dirent *e;
	int rc = 0;

	if (!d)
		return fg_err_set(err, FG_EIO, "open %s: %s", st->roots, strerror(errno));
	while (!rc && (e = readdir(d))) {
		struct fg_buf p = FG_BUF_INIT, c = FG_BUF_INIT;
		struct stat sb;

		if (!fg_sha256_hex_valid(e->d_name))
			continue;
		if (!fg_buf_printf(&p, NULL, "%s/%s", st->roots, e->d_name) &&
		    !fg_file_read(p.data, 8192, &c, NULL) && c.len > 1 && c.data[c.len - 1] == '\n') {
			c.data[--c.len] = '\0';
			if (!stat(c.data, &sb))
				rc = fn(ctx, c.data);
		}
		fg_buf_release(&p);
		fg_buf_release(&c);
	}
	closedir(d);
	return rc;
}

/* ---- walking blobs/ ---- */

struct blob_list {
	char (*hex)[FG_SHA256_HEX_LEN + 1];
	size_t n, cap;
	unsigned long long stray;
};

static int hex2(const char *s)
{
	int i;

	for (i = 0; i < 2; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[2] == '\0';
}

static int cmp_hex(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

static int list_blobs(struct blob_list *bl, const struct fg_store *st, struct fg_err *err)
{
	DIR *top = opendir(st->blobs), *sub;
	struct dirent *e, *f;
	int rc = 0;

	memset(bl, 0, sizeof(*bl));
	if (!top)
		return fg_err_set(err, FG_EIO, "open %s: %s", st->blobs, strerror(errno));
	while (!rc && (e = readdir(top))) {
		struct fg_buf p = FG_BUF_INIT;

		if (e->d_name[0] == '.')
			continue;
		if (!hex2(e->d_name)) {
			bl->stray++;
			continue;
		}
		rc = fg_buf_printf(&p, err, "%s/%s", st->blobs, e->d_name);
		sub = rc ? NULL : opendir(p.data);
		fg_buf_release(&p);
		if (!sub)
			continue;
		while (!rc && (f = readdir(sub))) {
			if (f->d_name[0] == '.')
				continue;
			if (!fg_sha256_hex_valid(f->d_name) || memcmp(f->d_name, e->d_name, 2)) {
				bl->stray++;
				continue;
			}
			if (bl->n == bl->cap) {
				size_t nc = bl->cap ? bl->cap * 2 : 256;
				void *np = realloc(bl->hex, nc * sizeof(*bl->hex));

				if (!np) {
					rc = oom(err);
					break;
				}
				bl->hex = np;
				bl->cap = nc;
			}
			memcpy(bl->hex[bl->n++], f->d_name, FG_SHA256_HEX_LEN + 1);
		}
		closedir(sub);
	}
	closedir(top);
	if (!rc && bl->n > 1)
		qsort(bl->hex, bl->n, sizeof(*bl->hex), cmp_hex);
	return rc;
}

/* ---- verify ---- */

enum { VR_SKIPPED = 0, VR_GOOD, VR_BAD, VR_MISSING };

struct verify_res {
	unsigned long long size;
	unsigned char state; /* VR_* */
	unsigned char fixed; /* made read-only again */
};

/* Paired mode: one work item hashes blobs a and b together
 * (fg_sha256_reader_pair: their blocks interleaved on SHA-NI); b == a when
 * a is alone. Items are sorted by a, so once item k and those before it are
 * done, every blob below item k+1's a is done too (reported in blob order). */
struct verify_pair {
	size_t a, b;
};

struct verify_job {
	struct fg_store *st;
	struct blob_list *bl;
	struct verify_res *res;
	struct fg_sha256_reader *rd[64]; /* one per thread, made on first use */
	struct fg_store_report *rep;
	fg_store_each_fn fn;
	void *ctx;
	struct verify_pair *pairs; /* paired mode: n_pairs items; NULL: one blob per item */
	size_t n_pairs;
	size_t reported;   /* paired mode: blobs 0..reported-1 went to report_blob */
	int stop;          /* fn asked to stop: later blobs are skipped */
	int count_missing; /* verifying a given set: an absent blob is reported */
};

static int quarantine(struct fg_store *st, const char *hex, struct fg_err *err)
{
	struct fg_buf src = FG_BUF_INIT, dst = FG_BUF_INIT;
	int rc = fg_store_blob_path(&src, st, hex, err);

	if (!rc)
		rc = fg_buf_printf(&dst, err, "%s/%s.%ld", st->quarantine, hex, (long)time(NULL));
	if (!rc && rename(src.data, dst.data))
		rc = fg_err_set(err, FG_EIO, "quarantine %s: %s", hex, strerror(errno));
	fg_buf_release(&src);
	fg_buf_release(&dst);
	return rc;
}

/* What follows blob i's hash (rc, digest d, fstat before reading): counts
 * an absent one, quarantines a bad one, makes a good one read-only again and
 * stamps it when it did not change while hashed. */
static int verify_settle(struct verify_job *j, size_t i, int rc, const uint8_t d[FG_SHA256_LEN],
			 const char *path, const struct stat *before, const uint8_t *states,
			 size_t n_states, struct fg_err *err)
{
	struct verify_res *vr = &j->res[i];
	const char *hex = j->bl->hex[i];
	char got[FG_SHA256_HEX_LEN + 1];

	if (rc == FG_ENOTFOUND) {
		/* removed meanwhile (gc) unless the caller named it */
		vr->state = j->count_missing ? VR_MISSING : VR_SKIPPED;
		return 0;
	}
	if (rc)
		return rc;
	fg_hex_encode(d, FG_SHA256_LEN, got);
	vr->state = strcmp(got, hex) ? VR_BAD : VR_GOOD;
	if (vr->state == VR_BAD)
		return quarantine(j->st, hex, err);
	{
		struct stat sb;

		/* a blob made writable (through a hard-linked copy) is one edit away
		 * from corruption: make it read-only again */
		if (!stat(path, &sb) && (sb.st_mode & 0222) && !chmod(path, 0444))
			vr->fixed = 1;
		/* unchanged while hashed (a chmod above moves only ctime): stamp it */
		if (!stat(path, &sb) && sb.st_dev == before->st_dev && sb.st_ino == before->st_ino &&
		    sb.st_size == before->st_size && sb.st_mtim.tv_sec == before->st_mtim.tv_sec &&
		    sb.st_mtim.tv_nsec == before->st_mtim.tv_nsec &&
		    (vr->fixed || (sb.st_ctim.tv_sec == before->st_ctim.tv_sec &&
				   sb.st_ctim.tv_nsec == before->st_ctim.tv_nsec)) &&
		    !fg_store_stamp_note(j->st, hex, &sb) && n_states)
			/* and its chain states, taken from the bytes just checked */
			fg_store_states_note(j->st, hex, FG_STORE_STATES_EVERY, states, n_states);
	}
	return 0;
}

/* Hashes one blob from the disk (O_DIRECT where the filesystem allows:
 * what is stored, not a cached copy), quarantines a bad one. */
static int verify_one(void *arg, size_t i, int t, struct fg_err *err)
{
	struct verify_job *j = arg;
	struct verify_res *vr = &j->res[i];
	struct fg_buf p = FG_BUF_INIT;
	uint8_t d[FG_SHA256_LEN], *states = NULL;
	size_t n_states = 0;
	struct stat before;
	int rc;

	if (__atomic_load_n(&j->stop, __ATOMIC_RELAXED))
		return 0;
	if (!j->rd[t] && (rc = fg_sha256_reader_new(&j->rd[t], err)))
		return rc;
	fg_sha256_reader_set_every(j->rd[t], FG_STORE_STATES_EVERY);
	memset(&before, 0, sizeof(before));
	rc = fg_store_blob_path(&p, j->st, j->bl->hex[i], err);
	if (!rc) /* before: the blob as opened, before its bytes were read */
		rc = fg_sha256_reader_file_states(j->rd[t], p.data, FG_SHA256_DIRECT, d, &vr->size,
						  &before, &states, &n_states, err);
	if (!rc || rc == FG_ENOTFOUND)
		rc = verify_settle(j, i, rc, d, p.data, &before, states, n_states, err);
	free(states);
	fg_buf_release(&p);
	return rc;
}

/* Paired mode: hashes item k's two blobs at once, then settles each as
 * verify_one does; the first failure in blob order is the item's. */
static int verify_two(void *arg, size_t k, int t, struct fg_err *err)
{
	struct verify_job *j = arg;
	const struct verify_pair *pr = &j->pairs[k];
	size_t blob[2] = { pr->a, pr->b };
	struct fg_buf p[2] = { FG_BUF_INIT, FG_BUF_INIT };
	struct fg_sha256_result res[2];
	const char *path[2] = { NULL, NULL };
	int i, rc;

	if (__atomic_load_n(&j->stop, __ATOMIC_RELAXED))
		return 0;
	if (!j->rd[t] && (rc = fg_sha256_reader_new(&j->rd[t], err)))
		return rc;
	for (i = 0; i < (pr->b != pr->a ? 2 : 1); i++) {
		rc = fg_store_blob_path(&p[i], j->st, j->bl->hex[blob[i]], err);
		if (rc)
			goto out;
		path[i] = p[i].data;
	}
	fg_sha256_reader_set_every(j->rd[t], FG_STORE_STATES_EVERY);
	memset(res, 0, sizeof(res));
	rc = fg_sha256_reader_pair(j->rd[t], path, FG_SHA256_DIRECT, res, err);
	for (i = 0; !rc && i < 2 && path[i]; i++) {
		j->res[blob[i]].size = res[i].size;
		rc = verify_settle(j, blob[i], res[i].rc, res[i].digest, path[i], &res[i].st,
				   res[i].states, res[i].n_states, err);
		if (rc && rc == res[i].rc && err)
			*err = res[i].err; /* the reader's own message for this blob */
	}
	for (i = 0; i < 2; i++)
		free(res[i].states);
out:
	fg_buf_release(&p[0]);
	fg_buf_release(&p[1]);
	return rc;
}

/* Counts and reports blob i; called in blob order. */
static void report_blob(struct verify_job *j, size_t i)
{
	struct verify_res *vr = &j->res[i];
	const char *hex = j->bl->hex[i];

	if (j->stop || vr->state == VR_SKIPPED)
		return;
	if (vr->state == VR_MISSING) {
		j->rep->missing++;
		if (j->fn && j->fn(j->ctx, hex, 0, -1))
			__atomic_store_n(&j->stop, 1, __ATOMIC_RELAXED);
		return;
	}
	j->rep->fixed_modes += vr->fixed;
	j->rep->blobs++;
	j->rep->bytes += vr->size;
	if (vr->state == VR_BAD)
		j->rep->bad++;
	if (j->fn && j->fn(j->ctx, hex, vr->size, vr->state == VR_GOOD))
		__atomic_store_n(&j->stop, 1, __ATOMIC_RELAXED);
}

/* Reports item i (a blob, or in paired mode every blob now known done). */
static int verify_done(void *arg, size_t i, struct fg_err *err)
{
	struct verify_job *j = arg;
	size_t upto;

	(void)err;
	if (!j->pairs) {
		report_blob(j, i);
		return 0;
	}
	upto = i + 1 < j->n_pairs ? j->pairs[i + 1].a : j->bl->n;
	for (; j->reported < upto; j->reported++)
		report_blob(j, j->reported);
	return 0;
}

static int cmp_pair(const void *x, const void *y)
{
	const struct verify_pair *a = x, *b = y;

	return a->a < b->a ? -1 : a->a > b->a;
}

/* Pairs blobs of like size (sorted by size, neighbours together), so the
 * two streams of an item run together as long as possible; items in order
 * of their first blob. */
static int make_pairs(struct verify_job *j, struct fg_err *err)
{
	size_t n = j->bl->n, k;
	unsigned long long *sz = malloc((n ? n : 1) * sizeof(*sz));
	size_t *order = malloc((n ? n : 1) * sizeof(*order));
	struct fg_buf p = FG_BUF_INIT;
	int rc;

	j->n_pairs = (n + 1) / 2;
	j->pairs = malloc((j->n_pairs ? j->n_pairs : 1) * sizeof(*j->pairs));
	if (!sz || !order || !j->pairs) {
		free(sz);
		free(order);
		return oom(err);
	}
	for (k = 0; k < n; k++) {
		struct stat sb;

		sz[k] = 0; /* gone or unreadable: the hash says what it is */
		fg_buf_reset(&p);
		if (!fg_store_blob_path(&p, j->st, j->bl->hex[k], NULL) && !stat(p.data, &sb))
			sz[k] = (unsigned long long)sb.st_size;
	}
	fg_buf_release(&p);
	rc = fg_workq_order_by_size(order, sz, n, err);
	for (k = 0; !rc && k < j->n_pairs; k++) {
		size_t a = order[2 * k], b = 2 * k + 1 < n ? order[2 * k + 1] : a;

		j->pairs[k].a = a < b ? a : b;
		j->pairs[k].b = a < b ? b : a;
	}
	free(sz);
	free(order);
	if (!rc)
		qsort(j->pairs, j->n_pairs, sizeof(*j->pairs), cmp_pair);
	return rc;
}

/* The distinct valid digests of only[], sorted, as a blob list. */
static int list_given(struct blob_list *bl, const char *const *only, size_t n, struct fg_err *err)
{
	size_t i;

	memset(bl, 0, sizeof(*bl));
	bl->hex = malloc((n ? n : 1) * sizeof(*bl->hex));
	if (!bl->hex)
		return oom(err);
	for (i = 0; i < n; i++) {
		if (!fg_sha256_hex_valid(only[i]))
			return fg_err_set(err, FG_EINVAL, "verify: not a sha256: %.80s", only[i]);
		memcpy(bl->hex[bl->n++], only[i], FG_SHA256_HEX_LEN + 1);
	}
	if (bl->n > 1)
		qsort(bl->hex, bl->n, sizeof(*bl->hex), cmp_hex);
	for (i = 1, n = bl->n ? 1 : 0; i < bl->n; i++)
		if (strcmp(bl->hex[i], bl->hex[n - 1]))
			memcpy(bl->hex[n++], bl->hex[i], FG_SHA256_HEX_LEN + 1);
	bl->n = n;
	return 0;
}

static int verify_list(struct fg_store_report *rep, struct fg_store *st, const char *const *only,
		       size_t n_only, int given, int jobs, fg_store_each_fn fn, void *ctx,
		       struct fg_err *err)
{
	struct verify_job j;
	struct blob_list bl;
	double t0 = now_s(), c0 = cpu_s();
	int i, rc;

	memset(rep, 0, sizeof(*rep));
	rc = given ? list_given(&bl, only, n_only, err) : list_blobs(&bl, st, err);
	if (rc) {
		free(bl.hex);
		return rc;
	}
	rep->stray = bl.stray;
	memset(&j, 0, sizeof(j));
	j.count_missing = given;
	j.st = st;
	j.bl = &bl;
	j.rep = rep;
	j.fn = fn;
	j.ctx = ctx;
	j.res = calloc(bl.n ? bl.n : 1, sizeof(*j.res));
	if (!j.res)
		rc = oom(err);
	if (jobs > 64)
		jobs = 64;
	/* two blobs per item where our SHA-NI code runs (FG_SHA256_X2=0: one
	 * each, as before) and there are enough to keep every thread busy */
	if (!rc && fg_sha256_ni_available() && bl.n >= 2 * (size_t)jobs)
		rc = make_pairs(&j, err);
	if (!rc && j.pairs)
		rc = fg_workq_run(j.n_pairs, jobs, verify_two, verify_done, &j, err);
	else if (!rc)
		rc = fg_workq_run(bl.n, jobs, verify_one, verify_done, &j, err);
	for (i = 0; i < 64; i++)
		fg_sha256_reader_free(j.rd[i]);
	free(j.pairs);
	free(j.res);
	free(bl.hex);
	rep->seconds = now_s() - t0;
	rep->cpu_seconds = cpu_s() - c0;
	return rc;
}

int fg_store_verify(struct fg_store_report *rep, struct fg_store *st, int jobs,
		    fg_store_each_fn fn, void *ctx, struct fg_err *err)
{
	return verify_list(rep, st, NULL, 0, 0, jobs, fn, ctx, err);
}

int fg_store_verify_some(struct fg_store_report *rep, struct fg_store *st,
			 const char *const *only, size_t n_only, int jobs, fg_store_each_fn fn,
			 void *ctx, struct fg_err *err)
{
	return verify_list(rep, st, only, n_only, 1, jobs, fn, ctx, err);
}

/* ---- gc ---- */

static int in_keep(const char *const *keep_sorted, size_t n, const char *hex)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int d = strcmp(keep_sorted[mid], hex);

		if (!d)
			return 1;
		if (d < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static int cmp_pstr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Removes files in dir older than max_age seconds whose lock key is free. */
static void sweep(struct fg_store *st, const char *dir, long max_age, int dry_run)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	time_t now = time(NULL);

	if (!d)
		return;
	while ((e = readdir(d))) {
		struct fg_buf p = FG_BUF_INIT;
		struct stat sb;
		char key[FG_STORE_KEY_MAX];
		const char *dot;

		if (e->d_name[0] == '.')
			continue;
		if (fg_buf_printf(&p, NULL, "%s/%s", dir, e->d_name) || lstat(p.data, &sb) ||
		    !S_ISREG(sb.st_mode) || now - sb.st_mtime < max_age) {
			fg_buf_release(&p);
			continue;
		}
		dot = strchr(e->d_name, '.');
		if (dot && (size_t)(dot - e->d_name) < sizeof(key)) {
			struct fg_store_lock *lk = NULL;

			memcpy(key, e->d_name, (size_t)(dot - e->d_name));
			key[dot - e->d_name] = '\0';
			if (key_ok(key)) {
				if (fg_store_lock_blob(&lk, st, key, 0, NULL) == 0) {
					if (!dry_run)
						unlink(p.data);
					fg_store_unlock(lk);
				}
				fg_buf_release(&p);
				continue;
			}
		}
		if (!dry_run)
			unlink(p.data); /* tmp/ leftovers have no key */
		fg_buf_release(&p);
	}
	closedir(d);
}

/* Whether blob hex exists. */
static int blob_exists(const struct fg_store *st, const char *hex)
{
	struct fg_buf b = FG_BUF_INIT;
	struct stat sb;
	int yes = fg_sha256_hex_valid(hex) && !fg_store_blob_path(&b, st, hex, NULL) && !stat(b.data, &sb);

	fg_buf_release(&b);
	return yes;
}

/* A chain states record is kept while its blob (its name) exists. */
/* The digests the kept seen records name (gc sweeps seen/ first). */
struct seen_kept {
	char (*hex)[FG_SHA256_HEX_LEN + 1];
	size_t n, cap;
};

static int hex_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* 1 when name is the record name (<dev>-<ino>) of the inode sb shows. */
static int inode_named(const char *name, const struct stat *sb)
{
	char want[48];

	snprintf(want, sizeof(want), "%llu-%llu", (unsigned long long)sb->st_dev,
		 (unsigned long long)sb->st_ino);
	return !strcmp(want, name);
}

/* A blob's states are kept while the blob is; a seen file's while its record is. */
static int states_keep(const struct fg_store *st, const char *name, const char *path, void *ctx)
{
	const struct seen_kept *sk = ctx;

	(void)path;
	return blob_exists(st, name) ||
	       (sk && sk->n && bsearch(name, sk->hex, sk->n, sizeof(*sk->hex), hex_cmp));
}

/* A stamp is kept while the blob it names is the inode it is named by. */
static int stamp_keep(const struct fg_store *st, const char *name, const char *path, void *ctx)
{
	struct fg_buf b = FG_BUF_INIT;
	char rec[FG_SHA256_HEX_LEN + 1];
	struct stat sb;
	ssize_t n = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), keep = 0;

	(void)ctx;
	if (fd < 0)
		return 0;
	n = read(fd, rec, FG_SHA256_HEX_LEN);
	close(fd);
	if (n == FG_SHA256_HEX_LEN) {
		rec[n] = '\0';
		keep = fg_sha256_hex_valid(rec) && !fg_store_blob_path(&b, st, rec, NULL) &&
		       !stat(b.data, &sb) && inode_named(name, &sb);
	}
	fg_buf_release(&b);
	return keep;
}

/* A seen record is kept while its path is still that inode, unchanged; or
 * while the path cannot be looked at for another reason than its absence
 * (a file system not mounted, permissions). */
static int seen_keep(const struct fg_store *st, const char *name, const char *path, void *ctx)
{
	struct seen_kept *sk = ctx;
	char rec[FG_STORE_SEEN_REC_MAX], hex[FG_SHA256_HEX_LEN + 1], *f = NULL, *nl;
	ssize_t n = record_read(path, rec, sizeof(rec));
	struct stat sb;
	int k, keep = 0;

	(void)st;
	if (n <= 0 || !(nl = memchr(rec, '\n', (size_t)n)) || nl != rec + n - 1)
		return 0;
	*nl = '\0';
	/* the path follows the fourth space */
	for (f = rec, k = 0; f && k < 4; k++)
		if ((f = strchr(f, ' ')))
			f++;
	if (!f || *f != '/')
		return 0;
	if (stat(f, &sb))
		return errno != ENOENT && errno != ENOTDIR;
	*nl = '\n';
	keep = inode_named(name, &sb) && seen_holds(rec, &sb, hex);
	if (keep && sk->n == sk->cap) { /* out of memory: its states go, the record stays */
		size_t cap = sk->cap ? 2 * sk->cap : 64;
		void *nh = realloc(sk->hex, cap * sizeof(*sk->hex));

		if (nh) {
			sk->hex = nh;
			sk->cap = cap;
		}
	}
	if (keep && sk->n < sk->cap)
		memcpy(sk->hex[sk->n++], hex, sizeof(hex));
	return keep;
}

/* Removes the records in dir (stamps/, states/) that keep refuses, and
 * temporary ones (a leading dot) older than an hour. */
static void sweep_records(const struct fg_store *st, const char *dir,
			  int (*keep_fn)(const struct fg_store *, const char *, const char *, void *),
			  void *ctx)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	time_t now = time(NULL);

	if (!d)
		return;
	while ((e = readdir(d))) {
		struct fg_buf p = FG_BUF_INIT;
		struct stat sb;
		int keep;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    fg_buf_printf(&p, NULL, "%s/%s", dir, e->d_name)) {
			fg_buf_release(&p);
			continue;
		}
		if (e->d_name[0] == '.')
			keep = lstat(p.data, &sb) || now - sb.st_mtime < 3600;
		else
			keep = keep_fn(st, e->d_name, p.data, ctx);
		if (!keep)
			unlink(p.data);
		fg_buf_release(&p);
	}
	closedir(d);
}

/* Drops the records of what `pull --into DIR` placed (placed/, lib/pull.c)
 * whose DIR no longer exists: nothing is left there to take back. A record
 * that cannot be read, or whose folder is only unreachable (permissions, a
 * file system not mounted: anything but ENOENT), is kept. */
static void sweep_placed(struct fg_store *st)
{
	struct fg_buf dir = FG_BUF_INIT, p = FG_BUF_INIT, text = FG_BUF_INIT;
	DIR *d = NULL;
	struct dirent *e;

	if (!fg_path_join(&dir, st->root, "placed", NULL))
		d = opendir(dir.data);
	while (d && (e = readdir(d))) {
		const char *dot = strrchr(e->d_name, '.');
		cJSON *doc = NULL;
		const char *into;
		struct stat sb;

		fg_buf_reset(&p);
		fg_buf_reset(&text);
		if (!dot || strcmp(dot, ".json") || fg_buf_printf(&p, NULL, "%s/%s", dir.data, e->d_name) ||
		    fg_file_read(p.data, (size_t)64 << 20, &text, NULL) ||
		    fg_json_parse(&doc, text.data, text.len, p.data, NULL))
			continue;
		into = fg_json_str(doc, "into");
		if (into && into[0] == '/' && stat(into, &sb) && errno == ENOENT)
			unlink(p.data);
		cJSON_Delete(doc);
	}
	if (d)
		closedir(d);
	fg_buf_release(&dir);
	fg_buf_release(&p);
	fg_buf_release(&text);
}

/* A root's lock file (buckets.lock) is written by fg_file_write_atomic:
 * the temporary files a SIGKILL left beside it, of dead writers, go */
static int root_tmps(void *ctx, const char *lock_path)
{
	struct fg_buf dir = FG_BUF_INIT;
	const char *slash = strrchr(lock_path, '/');

	if (slash && !fg_path_dir(lock_path, &dir, NULL))
		*(unsigned long long *)ctx += (unsigned long long)fg_file_sweep_tmps(dir.data, slash + 1,
										      FG_TMP_GRACE_S);
	fg_buf_release(&dir);
	return 0;
}

/* What fg_file_write_atomic leaves after a SIGKILL, where it writes for
 * the store: roots/, placed/ and beside each root's lock file; and what
 * dead writers left in tmp/ (files and folders) */
static unsigned long long sweep_atomic_tmps(struct fg_store *st)
{
	struct fg_buf placed = FG_BUF_INIT;
	unsigned long long n = (unsigned long long)fg_file_sweep_tmps(st->roots, NULL, FG_TMP_GRACE_S);

	n += (unsigned long long)sweep_tmp_dir(st, 1);

	if (!fg_path_join(&placed, st->root, "placed", NULL))
		n += (unsigned long long)fg_file_sweep_tmps(placed.data, NULL, FG_TMP_GRACE_S);
	fg_buf_release(&placed);
	fg_store_roots(st, root_tmps, &n, NULL);
	return n;
}

int fg_store_gc(struct fg_store_report *rep, struct fg_store *st, const char *const *keep,
		size_t n_keep, int dry_run, fg_store_each_fn fn, void *ctx, struct fg_err *err)
{
	const char **ks = NULL;
	struct blob_list bl;
	double t0 = now_s();
	size_t i;
	int rc, took;

	memset(rep, 0, sizeof(*rep));
	took = !st->use_ex;
	if ((rc = fg_store_lock_gc(st, err)))
		return rc;
	ks = malloc((n_keep ? n_keep : 1) * sizeof(*ks));
	if (!ks)
		return oom(err);
	if (n_keep)
		memcpy(ks, keep, n_keep * sizeof(*ks));
	qsort(ks, n_keep, sizeof(*ks), cmp_pstr);
	rc = list_blobs(&bl, st, err);
	rep->stray = bl.stray;
	for (i = 0; !rc && i < bl.n; i++) {
		const char *hex = bl.hex[i];
		unsigned long long size = 0;
		struct fg_buf p = FG_BUF_INIT;
		struct fg_store_lock *lk = NULL;
		char key[FG_STORE_KEY_MAX];
		struct stat sb;
		int removed = 0;

		rep->blobs++;
		if (!fg_store_blob_path(&p, st, hex, NULL) && !stat(p.data, &sb))
			size = (unsigned long long)sb.st_size;
		rep->bytes += size;
		if (in_keep(ks, n_keep, hex)) {
			rep->kept++;
		} else {
			snprintf(key, sizeof(key), "sha256-%s", hex);
			/* a blob being fetched or committed right now is left alone */
			if (fg_store_lock_blob(&lk, st, key, 0, NULL) == 0) {
				if (dry_run || !unlink(p.data) || errno == ENOENT) {
					removed = 1;
					rep->removed++;
					rep->removed_bytes += size;
				}
				fg_store_unlock(lk);
			}
			if (!removed)
				rep->kept++;
		}
		fg_buf_release(&p);
		if (fn && fn(ctx, hex, size, !removed))
			break;
	}
	free(bl.hex);
	free(ks);
	if (!rc) {
		sweep(st, st->partial, 24 * 3600, dry_run);
		sweep(st, st->known, 30 * 24 * 3600, dry_run);
		sweep(st, st->tmp, 3600, dry_run);
		if (!dry_run) {
			struct seen_kept sk = { NULL, 0, 0 };

			sweep_records(st, st->seen, seen_keep, &sk);
			if (sk.n)
				qsort(sk.hex, sk.n, sizeof(*sk.hex), hex_cmp);
			sweep_records(st, st->stamps, stamp_keep, NULL);
			sweep_records(st, st->states, states_keep, &sk);
			free(sk.hex);
			sweep_placed(st);
			rep->tmps = sweep_atomic_tmps(st);
		}
	}
	if (took) { /* a caller that took it before reading its roots releases it with the store */
		flock(st->use_fd, LOCK_UN);
		st->use_ex = 0;
	}
	rep->seconds = now_s() - t0;
	return rc;
}
