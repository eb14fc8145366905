/* fsutil.c - bounded reads, atomic writes, mkdir -p, path checks. */
#include "fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

int fg_file_read(const char *path, size_t max, struct fg_buf *out, struct fg_err *err)
{
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "open %s: %s", path,
				  strerror(errno));
	rc = fg_fd_read(fd, path, max, out, err);
	close(fd);
	return rc;
}

int fg_fd_read(int fd, const char *path, size_t max, struct fg_buf *out, struct fg_err *err)
{
	char chunk[65536];
	size_t total = 0;
	int rc = 0;

	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = fg_err_set(err, FG_EIO, "read %s: %s", path, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		total += (size_t)n;
		if (total > max) {
			rc = fg_err_set(err, FG_EINVAL, "%s: larger than %zu bytes", path, max);
			break;
		}
		rc = fg_buf_append(out, chunk, (size_t)n, err);
		if (rc)
			break;
	}
	return rc;
}

int fg_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int fg_path_dir(const char *path, struct fg_buf *dir, struct fg_err *err)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return fg_buf_puts(dir, ".", err);
	if (slash == path)
		return fg_buf_puts(dir, "/", err);
	return fg_buf_append(dir, path, (size_t)(slash - path), err);
}

/* How many names fg_file_write_atomic tries before giving up: each taken
 * one is someone else's (another writer's temporary file, a planted link). */
#define TMP_TRIES 100

/* 1 when s is 1 to 9 decimal digits (a pid, or fg_file_write_atomic's
 * sequence number), with the value in *v */
static int digits(const char *s, size_t n, long *v)
{
	size_t i;

	if (!n || n > 9)
		return 0;
	for (*v = 0, i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		*v = *v * 10 + (s[i] - '0');
	}
	return 1;
}

/* The writer's pid when name is "<base><tag><pid>", or with seq also
 * "<base><tag><pid>.<n>" (any non-empty base when base is NULL), else 0.
 * The last tag that fits decides. */
static long tmp_owner(const char *name, const char *tag, const char *base, int seq)
{
	const char *p;
	size_t bl = base ? strlen(base) : 0, tl = strlen(tag);

	for (p = name + strlen(name); p > name; p--) {
		const char *rest = p + tl, *dot;
		long pid, n;

		if (strncmp(p, tag, tl) || (base && ((size_t)(p - name) != bl || strncmp(name, base, bl))))
			continue;
		dot = seq ? strchr(rest, '.') : NULL;
		if (!dot ? digits(rest, strlen(rest), &pid)
			 : digits(rest, (size_t)(dot - rest), &pid) && digits(dot + 1, strlen(dot + 1), &n))
			return pid;
	}
	return 0;
}

int fg_tmp_sweep(const char *dir, const char *tag, const char *base, int seq, int grace_s)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	time_t now = time(NULL);
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		long pid = tmp_owner(e->d_name, tag, base, seq);
		struct stat sb;

		if (pid <= 0 || pid == (long)getpid())
			continue;
		/* only a dead writer's: a live one (or whoever has its pid now) keeps it */
		if (!kill((pid_t)pid, 0) || errno != ESRCH)
			continue;
		if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode) ||
		    (grace_s > 0 && now - sb.st_mtime < grace_s))
			continue;
		if (!unlinkat(dirfd(d), e->d_name, 0))
			n++;
	}
	closedir(d);
	return n;
}

int fg_file_sweep_tmps(const char *dir, const char *base, int grace_s)
{
	return fg_tmp_sweep(dir, ".tmp.", base, 1, grace_s);
}

int fg_file_write_atomic(const char *path, const void *data, size_t len, int mode,
			 struct fg_err *err)
{
	static atomic_uint seq; /* this process's further names, unique across threads */
	struct fg_buf tmp = FG_BUF_INIT, dir = FG_BUF_INIT;
	int fd = -1, rc, tries, slot;

	rc = fg_path_dir(path, &dir, err);
	if (!rc) { /* what earlier writers of path killed by SIGKILL left */
		const char *slash = strrchr(path, '/');

		fg_file_sweep_tmps(dir.data, slash ? slash + 1 : path, FG_TMP_GRACE_S);
	}
	/* O_EXCL|O_NOFOLLOW: a name that exists (a symlink planted there,
	 * another writer's file) is never followed, truncated nor taken over;
	 * the next name is tried instead */
	for (tries = 0; !rc && fd < 0; tries++) {
		fg_buf_reset(&tmp);
		if (!tries)
			rc = fg_buf_printf(&tmp, err, "%s.tmp.%ld", path, (long)getpid());
		else
			rc = fg_buf_printf(&tmp, err, "%s.tmp.%ld.%u", path, (long)getpid(),
					   atomic_fetch_add(&seq, 1) + 1);
		if (rc)
			break;
		fd = open(tmp.data, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd < 0 && (errno != EEXIST || tries + 1 == TMP_TRIES))
			rc = fg_err_set(err, FG_EIO, "create %s: %s", tmp.data, strerror(errno));
	}
	if (rc)
		goto out;
	slot = fg_tmp_track(tmp.data);
	if (fg_write_all(fd, data, len) || fsync(fd)) {
		rc = fg_err_set(err, errno == ENOSPC ? FG_ENOSPC : FG_EIO, "write %s: %s", tmp.data,
				strerror(errno));
		close(fd);
		unlink(tmp.data);
		goto untrack;
	}
	if (close(fd) || chmod(tmp.data, (mode_t)mode)) {
		rc = fg_err_set(err, FG_EIO, "close %s: %s", tmp.data, strerror(errno));
		unlink(tmp.data);
		goto untrack;
	}
	if (rename(tmp.data, path)) {
		rc = fg_err_set(err, FG_EIO, "rename %s: %s", path, strerror(errno));
		unlink(tmp.data);
		goto untrack;
	}
	rc = fg_fsync_dir(dir.data, err);
untrack:
	fg_tmp_untrack(slot);
out:
	fg_buf_release(&tmp);
	fg_buf_release(&dir);
	return rc;
}

int fg_mkdir_p(const char *path, int mode, struct fg_err *err)
{
	struct fg_buf b = FG_BUF_INIT;
	size_t i;
	int rc;

	rc = fg_buf_puts(&b, path, err);
	for (i = 1; !rc && i <= b.len; i++) {
		char c = b.data[i];
		struct stat st;

		if (c != '/' && c != '\0')
			continue;
		b.data[i] = '\0';
		if (mkdir(b.data, (mode_t)mode) && errno != EEXIST)
			rc = fg_err_set(err, FG_EIO, "mkdir %s: %s", b.data, strerror(errno));
		else if (stat(b.data, &st) || !S_ISDIR(st.st_mode))
			rc = fg_err_set(err, FG_EIO, "mkdir %s: exists and is not a folder", b.data);
		b.data[i] = c;
	}
	fg_buf_release(&b);
	return rc;
}

int fg_fsync_dir(const char *path, struct fg_err *err)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return fg_err_set(err, FG_EIO, "open folder %s: %s", path, strerror(errno));
	/* Some file systems refuse fsync on folders; the rename is still done. */
	if (fsync(fd) && errno != EINVAL && errno != EROFS) {
		int e = errno;

		close(fd);
		return fg_err_set(err, FG_EIO, "fsync folder %s: %s", path, strerror(e));
	}
	close(fd);
	return 0;
}

int fg_path_is_safe_rel(const char *rel)
{
	const char *p = rel, *seg = rel;

	if (!rel || !*rel || *rel == '/')
		return 0;
	for (;; p++) {
		if (*p == '/' || *p == '\0') {
			size_t n = (size_t)(p - seg);

			if (n == 0 || (n == 1 && seg[0] == '.') ||
			    (n == 2 && seg[0] == '.' && seg[1] == '.'))
				return 0;
			if (*p == '\0')
				return 1;
			seg = p + 1;
			continue;
		}
		if (*p == '\\' || (unsigned char)*p < 0x20 || *p == 0x7f)
			return 0;
	}
}

_Static_assert(FG_PATH_NAME_MAX == 255 && FG_PATH_REL_MAX == 3839, "the phrases below");

const char *fg_path_too_long(const char *rel)
{
	size_t n = 0, seg = 0;

	for (; rel[n]; n++) {
		seg = rel[n] == '/' ? 0 : seg + 1;
		if (seg > FG_PATH_NAME_MAX)
			return "has a component of more than 255 bytes";
	}
	return n > FG_PATH_REL_MAX ? "is longer than 3839 bytes" : NULL;
}

int fg_path_join(struct fg_buf *out, const char *a, const char *b, struct fg_err *err)
{
	size_t la = strlen(a);
	int rc = fg_buf_append(out, a, la, err);

	if (!rc && la && a[la - 1] != '/')
		rc = fg_buf_putc(out, '/', err);
	while (!rc && *b == '/')
		b++;
	return rc ? rc : fg_buf_puts(out, b, err);
}

int fg_fs_free_bytes(const char *path, unsigned long long *out, struct fg_err *err)
{
	struct statvfs st;

	if (statvfs(path, &st))
		return fg_err_set(err, FG_EIO, "statvfs %s: %s", path, strerror(errno));
	*out = (unsigned long long)st.f_bavail * (unsigned long long)st.f_frsize;
	return 0;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

void fg_rm_tree(const char *path)
{
	if (path)
		nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int fg_stat_unchanged(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* ---- temporary files a signal must not leave behind ----
 *
 * Each slot's word holds a phase in its low 2 bits (0 free, 1 being filled,
 * 2 armed) and a generation above them, bumped at every claim, so that the
 * signal handler can tell a path it copied while the slot was reused
 * (generation moved) from one it may unlink. */
#define TMP_SLOTS 32
#define PHASE(w) ((w) & 3u)

static struct {
	atomic_uint word;
	char path[PATH_MAX];
} tmp_slots[TMP_SLOTS];

int fg_tmp_track(const char *path)
{
	size_t n = strlen(path);
	int i;

	if (n >= PATH_MAX)
		return -1;
	for (i = 0; i < TMP_SLOTS; i++) {
		unsigned w = atomic_load(&tmp_slots[i].word);

		if (PHASE(w) != 0 ||
		    !atomic_compare_exchange_strong(&tmp_slots[i].word, &w, ((w >> 2) + 1) << 2 | 1u))
			continue;
		memcpy(tmp_slots[i].path, path, n + 1);
		atomic_store(&tmp_slots[i].word, (((w >> 2) + 1) << 2) | 2u);
		return i;
	}
	return -1; /* all taken: this one is not removed on a signal */
}

void fg_tmp_untrack(int slot)
{
	unsigned w;

	if (slot < 0 || slot >= TMP_SLOTS)
		return;
	w = atomic_load(&tmp_slots[slot].word);
	atomic_store(&tmp_slots[slot].word, w & ~3u);
}

void fg_tmp_remove_all(void)
{
	char p[PATH_MAX];
	int i;

	for (i = 0; i < TMP_SLOTS; i++) {
		unsigned w = atomic_load(&tmp_slots[i].word);
		size_t k;

		if (PHASE(w) != 2)
			continue;
		/* a plain loop: memcpy is not on POSIX's async-signal-safe list */
		for (k = 0; k < sizeof(p) - 1 && tmp_slots[i].path[k]; k++)
			p[k] = tmp_slots[i].path[k];
		p[k] = '\0';
		if (atomic_load(&tmp_slots[i].word) == w)
			unlink(p);
	}
}
