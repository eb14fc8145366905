/* fsutil.c - bounded reads, atomic writes, mkdir -p, path checks. */
#include "fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
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

/* The newest mtime of folder name in dfd and of the entries right in it: a
 * live writer's folder shows its writing in its files, not in itself. */
static time_t tree_mtime(int dfd, const char *name, time_t t)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	struct stat sb;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return t;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    !fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) && sb.st_mtime > t)
			t = sb.st_mtime;
	closedir(d);
	return t;
}

/* Removes name, an entry of the open folder d (dir: its path), when it is
 * a regular file (folders 0) or a folder (1), never a link, unchanged for
 * grace_s seconds or more: its mtime, a folder's newest of its own and its
 * entries' (tree_mtime). 1 when it is gone. Every sweep's age rule. */
static int remove_stale(DIR *d, const char *dir, const char *name, int folders, int grace_s, time_t now)
{
	struct fg_buf p = FG_BUF_INIT;
	struct stat sb;
	time_t t;
	int gone = 0;

	if (fstatat(dirfd(d), name, &sb, AT_SYMLINK_NOFOLLOW) ||
	    !(folders ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode)))
		return 0;
	t = folders ? tree_mtime(dirfd(d), name, sb.st_mtime) : sb.st_mtime;
	if (grace_s > 0 && now - t < grace_s)
		return 0;
	if (!folders)
		return !unlinkat(dirfd(d), name, 0);
	if (!fg_path_join(&p, dir, name, NULL)) {
		fg_rm_tree(p.data);
		gone = lstat(p.data, &sb) && errno == ENOENT;
	}
	fg_buf_release(&p);
	return gone;
}

/* fg_tmp_sweep (folders 0: regular files) and fg_tmp_sweep_dirs (1);
 * prefix (with base NULL; else NULL): only names that begin with it and
 * then '-' or '.' */
static int sweep_dead(const char *dir, const char *tag, const char *base, const char *prefix, int seq,
		      int grace_s, int folders)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	time_t now = time(NULL);
	size_t pl = prefix ? strlen(prefix) : 0;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		long pid;

		if (prefix && (strncmp(e->d_name, prefix, pl) || !e->d_name[pl] ||
			       !strchr("-.", e->d_name[pl])))
			continue;
		pid = tmp_owner(e->d_name, tag, base, seq);
		if (pid <= 0 || pid == (long)getpid())
			continue;
		/* only a dead writer's: a live one (or whoever has its pid now) keeps it */
		if (!kill((pid_t)pid, 0) || errno != ESRCH)
			continue;
		n += remove_stale(d, dir, e->d_name, folders, grace_s, now);
	}
	closedir(d);
	return n;
}

/* 1 when x is exactly what mkdtemp puts for its XXXXXX: six ASCII letters
 * or digits, nothing after them */
static int mkdtemp_six(const char *x)
{
	size_t i;

	for (i = 0; x[i]; i++)
		if (i == 6 || !((x[i] >= 'a' && x[i] <= 'z') || (x[i] >= 'A' && x[i] <= 'Z') ||
				(x[i] >= '0' && x[i] <= '9')))
			return 0;
	return i == 6;
}

/* Whether entry (in the folder of out, whose last component is name) is
 * named as the temporary folder a bake of out made before the
 * ".fgpack-tmp.<pid>" naming, which carries no pid: 1 for bake int4's
 * mkdtemp ".<name>.fgpack-tmp-XXXXXX" (six letters or digits), 2 for bake
 * prune-head's "<name>.partial", else 0. */
static int old_bake_tmp(const char *entry, const char *name)
{
	static const char tag[] = ".fgpack-tmp-";
	size_t nl = strlen(name);

	if (!strncmp(entry, name, nl) && !strcmp(entry + nl, ".partial"))
		return 2;
	if (entry[0] != '.' || strncmp(entry + 1, name, nl) || strncmp(entry + 1 + nl, tag, sizeof(tag) - 1))
		return 0;
	return mkdtemp_six(entry + 1 + nl + sizeof(tag) - 1);
}

/* Whether entry is named as the folder an extraction to dest (its last
 * component name) made before the ".fgpack-tmp.<pid>" naming, which
 * carries no pid: mkdtemp's "<name>.partial.XXXXXX"; 1 or 0 */
static int old_extract_tmp(const char *entry, const char *name)
{
	static const char tag[] = ".partial.";
	size_t nl = strlen(name);

	return !strncmp(entry, name, nl) && !strncmp(entry + nl, tag, sizeof(tag) - 1) &&
	       mkdtemp_six(entry + nl + sizeof(tag) - 1);
}

/* 1 when folder entry of d holds nothing but regular files, as prune-head's
 * OUT.partial did (its shards, index, config and copied files), and no
 * "<entry>.intoto.json" is beside it: a finished bake whose OUT was itself
 * named "<name>.partial" has that statement, and a folder of anyone else's
 * with a subfolder or a link in it is not a bake's */
static int flat_unfinished(DIR *d, const char *entry)
{
	struct fg_buf st = FG_BUF_INIT;
	int fd, flat = 1;
	DIR *in;
	struct dirent *e;
	struct stat sb;

	if (fg_buf_printf(&st, NULL, "%s.intoto.json", entry) ||
	    !fstatat(dirfd(d), st.data, &sb, AT_SYMLINK_NOFOLLOW) || errno != ENOENT)
		flat = 0;
	fg_buf_release(&st);
	fd = flat ? openat(dirfd(d), entry, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	in = fd >= 0 ? fdopendir(fd) : NULL;
	if (!in) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while (flat && (e = readdir(in)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    (fstatat(dirfd(in), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode)))
			flat = 0;
	closedir(in);
	return flat;
}

/* fg_tmp_sweep_old_bake (extract 0) and fg_tmp_sweep_old_extract (1) */
static int sweep_old(const char *dir, const char *name, int grace_s, int extract)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	time_t now = time(NULL);
	int n = 0;

	if (!d || !*name) {
		if (d)
			closedir(d);
		return 0;
	}
	while ((e = readdir(d))) {
		int kind = extract ? old_extract_tmp(e->d_name, name) : old_bake_tmp(e->d_name, name);

		if (kind == 1 || (kind == 2 && flat_unfinished(d, e->d_name)))
			n += remove_stale(d, dir, e->d_name, 1, grace_s, now);
	}
	closedir(d);
	return n;
}

int fg_tmp_sweep_old_bake(const char *dir, const char *name, int grace_s)
{
	return sweep_old(dir, name, grace_s, 0);
}

int fg_tmp_sweep_old_extract(const char *dir, const char *name, int grace_s)
{
	return sweep_old(dir, name, grace_s, 1);
}

int fg_tmp_sweep(const char *dir, const char *tag, const char *base, int seq, int grace_s)
{
	return sweep_dead(dir, tag, base, NULL, seq, grace_s, 0);
}

int fg_tmp_sweep_dirs(const char *dir, const char *tag, const char *base, int seq, int grace_s)
{
	return sweep_dead(dir, tag, base, NULL, seq, grace_s, 1);
}

int fg_file_sweep_tmps(const char *dir, const char *base, int grace_s)
{
	return fg_tmp_sweep(dir, ".tmp.", base, 1, grace_s);
}

/* A new temporary file (opened O_WRONLY into *fd) or, with fd NULL, folder
 * named stem<pid>, else stem<pid>.<n>: O_EXCL|O_NOFOLLOW (mkdir), so a name
 * that exists (a symlink planted there, another writer's) is never
 * followed, truncated nor taken over, and tracked with no signal in between
 * (fg_tmp_hold_signals); a name taken is never tracked, as it may be a live
 * writer's of another pid namespace. beside: the output a folder is for,
 * named in its error (NULL: the folder's own name is). */
static int tmp_make(const char *stem, int mode, int *fd, const char *beside, struct fg_buf *tmp, int *slot,
		    struct fg_err *err)
{
	static atomic_uint seq; /* this process's further names, unique across threads */
	sigset_t old;
	int rc = 0, tries, e, made;

	*slot = -1;
	for (tries = 0; !rc; tries++) {
		fg_buf_reset(tmp);
		rc = fg_buf_printf(tmp, err, "%s%ld", stem, (long)getpid());
		if (!rc && tries)
			rc = fg_buf_printf(tmp, err, ".%u", atomic_fetch_add(&seq, 1) + 1);
		if (rc)
			break;
		fg_tmp_hold_signals(&old);
		if (fd)
			made = (*fd = open(tmp->data, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)) >= 0;
		else
			made = !mkdir(tmp->data, (mode_t)mode);
		e = errno;
		if (made)
			*slot = fd ? fg_tmp_track(tmp->data) : fg_tmp_track_dir(tmp->data);
		fg_tmp_release_signals(&old);
		if (made)
			break;
		if (e != EEXIST || tries + 1 == TMP_TRIES)
			rc = fd || !beside ? fg_err_set(err, FG_EIO, "create %s: %s", tmp->data, strerror(e))
				: fg_err_set(err, FG_EIO, "create a temporary folder beside %s: %s", beside,
					     strerror(e));
	}
	return rc;
}

int fg_tmp_create(const char *path, int mode, struct fg_buf *tmp, int *fd, int *slot, struct fg_err *err)
{
	struct fg_buf dir = FG_BUF_INIT, stem = FG_BUF_INIT;
	int rc;

	*fd = -1;
	*slot = -1;
	rc = fg_path_dir(path, &dir, err);
	if (!rc) { /* what earlier writers of path killed by SIGKILL left */
		const char *slash = strrchr(path, '/');

		fg_file_sweep_tmps(dir.data, slash ? slash + 1 : path, FG_TMP_GRACE_S);
		rc = fg_buf_printf(&stem, err, "%s.tmp.", path);
	}
	if (!rc)
		rc = tmp_make(stem.data, mode, fd, NULL, tmp, slot, err);
	fg_buf_release(&dir);
	fg_buf_release(&stem);
	return rc;
}

int fg_file_write_atomic(const char *path, const void *data, size_t len, int mode,
			 struct fg_err *err)
{
	struct fg_buf tmp = FG_BUF_INIT, dir = FG_BUF_INIT;
	int fd = -1, rc, slot = -1;

	rc = fg_path_dir(path, &dir, err);
	if (!rc)
		rc = fg_tmp_create(path, mode, &tmp, &fd, &slot, err);
	if (rc)
		goto out;
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

/* The refusal of an output whose target has mode m, or 0 when it may be
 * written: replaced (a regular file) or written through (a character
 * device, a FIFO). */
static int out_refuse(const char *path, mode_t m, struct fg_err *err)
{
	const char *what = S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" :
			   S_ISDIR(m) ? "a folder" : "not a regular file";

	if (S_ISREG(m) || S_ISCHR(m) || S_ISFIFO(m))
		return 0;
	return fg_err_set(err, FG_EINVAL, "%s is %s: no output is written to it", path, what);
}

int fg_out_check(const char *path, struct fg_err *err)
{
	struct stat st;

	/* stat follows links: /dev/stdout is judged by what it points to; a
	 * path stat cannot see is left to the writer and its own message */
	return stat(path, &st) ? 0 : out_refuse(path, st.st_mode, err);
}

/* The descriptor a name of this process's own streams stands for
 * (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N), else -1. */
static int own_stream(const char *path)
{
	static const char *const pre[] = { "/dev/fd/", "/proc/self/fd/" };
	long n = -1;

	if (!strcmp(path, "/dev/stdout"))
		return 1;
	if (!strcmp(path, "/dev/stderr"))
		return 2;
	for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
		if (!strncmp(path, pre[i], strlen(pre[i]))) {
			const char *d = path + strlen(pre[i]);
			char *end;

			errno = 0;
			n = *d >= '0' && *d <= '9' ? strtol(d, &end, 10) : -1;
			if (n >= 0 && (errno || *end || n > INT_MAX))
				n = -1;
		}
	return (int)n;
}

int fg_out_open(const char *path, int *fd, struct fg_err *err)
{
	struct stat st;
	int rc, f, own = own_stream(path);

	*fd = -1;
	/* one of our own streams is written through a copy of its descriptor,
	 * whatever it is: a shell's "> file" or ">> file" behind /dev/stdout
	 * keeps its offset and mode, and no file ever takes the link's place */
	if (own >= 0) {
		if (fstat(own, &st))
			return fg_err_set(err, FG_EIO, "%s: %s", path, strerror(errno));
		if ((rc = out_refuse(path, st.st_mode, err)))
			return rc;
		if ((f = fcntl(own, F_DUPFD_CLOEXEC, 3)) < 0)
			return fg_err_set(err, FG_EIO, "%s: %s", path, strerror(errno));
		*fd = f;
		return 0;
	}
	if (stat(path, &st) || S_ISREG(st.st_mode))
		return 0;
	if ((rc = out_refuse(path, st.st_mode, err)))
		return rc;
	/* no O_CREAT, no O_TRUNC: the node (and a link to it) stays as it is;
	 * O_NOCTTY: a terminal named here never becomes ours */
	do
		f = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	while (f < 0 && errno == EINTR);
	if (f < 0)
		return errno == ENOENT ? 0 /* gone since: a new file, atomically */
				       : fg_err_set(err, FG_EIO, "open %s: %s", path, strerror(errno));
	if (fstat(f, &st)) {
		rc = fg_err_set(err, FG_EIO, "stat %s: %s", path, strerror(errno));
		close(f);
		return rc;
	}
	if (S_ISREG(st.st_mode)) { /* a file took its place since: nothing written, atomically then */
		close(f);
		return 0;
	}
	if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
		close(f);
		return out_refuse(path, st.st_mode, err);
	}
	*fd = f;
	return 0;
}

int fg_out_is_stream(const char *path)
{
	struct stat st;

	if (own_stream(path) >= 0)
		return 1;
	return !stat(path, &st) && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode));
}

int fg_out_close(int fd, const char *path, struct fg_err *err)
{
	int rc = 0;

	/* a device or a pipe may have nothing to sync: not an error */
	if (fsync(fd) && errno != EINVAL && errno != ENOTSUP && errno != EROFS)
		rc = fg_err_set(err, FG_EIO, "fsync %s: %s", path, strerror(errno));
	if (close(fd) && !rc && errno != EINTR)
		rc = fg_err_set(err, FG_EIO, "close %s: %s", path, strerror(errno));
	return rc;
}

int fg_file_write_out(const char *path, const void *data, size_t len, int mode,
		      struct fg_err *err)
{
	int fd, rc = fg_out_open(path, &fd, err);

	if (rc)
		return rc;
	if (fd < 0)
		return fg_file_write_atomic(path, data, len, mode, err);
	/* written through: mode is not applied, a device's is the machine's */
	if (fg_write_all(fd, data, len)) {
		rc = fg_err_set(err, errno == ENOSPC ? FG_ENOSPC : FG_EIO, "write %s: %s", path,
				strerror(errno));
		close(fd);
		return rc;
	}
	return fg_out_close(fd, path, err);
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

/* fd's entry name, which an O_DIRECTORY | O_NOFOLLOW open refused with
 * ENOTDIR: ELOOP when it is a link (the kernel says ENOTDIR for a link as
 * for a file there), else e. */
static int link_or(int fd, const char *name, int e)
{
	struct stat sb;

	return !fstatat(fd, name, &sb, AT_SYMLINK_NOFOLLOW) && S_ISLNK(sb.st_mode) ? ELOOP : e;
}

int fg_openat_beneath(int dirfd, const char *rel, int oflags, size_t *bad)
{
	char name[NAME_MAX + 1];
	const char *seg = rel, *end;
	int fd = dirfd, next, e;

	if (bad)
		*bad = 0;
	for (;;) {
		size_t n;

		end = strchr(seg, '/');
		n = end ? (size_t)(end - seg) : strlen(seg);
		if (!n || n > NAME_MAX || (n == 1 && seg[0] == '.') ||
		    (n == 2 && seg[0] == '.' && seg[1] == '.')) {
			next = -1;
			e = n > NAME_MAX ? ENAMETOOLONG : EINVAL;
		} else {
			int of = end ? O_RDONLY | O_DIRECTORY : oflags;

			memcpy(name, seg, n);
			name[n] = '\0';
			next = openat(fd, name, of | O_NOFOLLOW | O_CLOEXEC);
			e = next < 0 && errno == ENOTDIR ? link_or(fd, name, ENOTDIR) : errno;
		}
		if (fd != dirfd)
			close(fd);
		if (next < 0) {
			if (bad)
				*bad = (size_t)(seg - rel) + n;
			errno = e;
			return -1;
		}
		if (!end)
			return next;
		fd = next;
		seg = end + 1;
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
	unsigned char folder; /* a folder, removed with what is in it */
	char path[PATH_MAX];
} tmp_slots[TMP_SLOTS];

void fg_tmp_hold_signals(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, old);
}

void fg_tmp_release_signals(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static int track(const char *path, int folder)
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
		tmp_slots[i].folder = (unsigned char)folder;
		atomic_store(&tmp_slots[i].word, (((w >> 2) + 1) << 2) | 2u);
		return i;
	}
	return -1; /* all taken: this one is not removed on a signal */
}

int fg_tmp_track(const char *path)
{
	return track(path, 0);
}

int fg_tmp_track_dir(const char *path)
{
	return track(path, 1);
}

void fg_tmp_untrack(int slot)
{
	unsigned w;

	if (slot < 0 || slot >= TMP_SLOTS)
		return;
	w = atomic_load(&tmp_slots[slot].word);
	atomic_store(&tmp_slots[slot].word, w & ~3u);
}

/* What getdents64 gives (linux_dirent64). */
struct dent64 {
	unsigned long long ino;
	long long off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/* rm -rf of name in folder dfd from a signal handler: only system calls
 * (openat, getdents64, unlinkat, close), no malloc, no stdio. Links are not
 * followed; 8 levels at most (a bake's folder has one or two). Another
 * thread may still be adding files, and names unlinked during a read may
 * shift the listing, so it is read again until a pass finds it empty. */
static void rm_tree_sig(int dfd, const char *name, int depth)
{
	_Alignas(8) char buf[2048];
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int pass, seen = 1;
	long n;

	if (fd < 0)
		return;
	for (pass = 0; seen && pass < 8; pass++) {
		seen = 0;
		if (lseek(fd, 0, SEEK_SET))
			break;
		while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
			long off = 0;

			while (off < n) {
				const struct dent64 *e = (const struct dent64 *)(buf + off);

				off += e->reclen;
				if (e->name[0] == '.' && (!e->name[1] || (e->name[1] == '.' && !e->name[2])))
					continue;
				seen = 1;
				if ((e->type == DT_DIR || (unlinkat(fd, e->name, 0) && errno == EISDIR)) &&
				    depth < 8)
					rm_tree_sig(fd, e->name, depth + 1);
			}
		}
	}
	close(fd);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

void fg_tmp_remove_all(void)
{
	char p[PATH_MAX];
	int i, saved = errno;

	for (i = 0; i < TMP_SLOTS; i++) {
		unsigned w = atomic_load(&tmp_slots[i].word);
		size_t k;

		if (PHASE(w) != 2)
			continue;
		/* a plain loop: memcpy is not on POSIX's async-signal-safe list */
		for (k = 0; k < sizeof(p) - 1 && tmp_slots[i].path[k]; k++)
			p[k] = tmp_slots[i].path[k];
		p[k] = '\0';
		if (atomic_load(&tmp_slots[i].word) != w)
			continue;
		if (tmp_slots[i].folder)
			rm_tree_sig(AT_FDCWD, p, 0);
		else
			unlink(p);
	}
	errno = saved;
}

/* fg_file_write_atomic's naming and tracking (tmp_make), for a folder; the
 * older versions' names swept: a bake's (extract 0) or an extraction's (1) */
static int dir_make(const char *out, int extract, struct fg_buf *tmp, int *slot, struct fg_err *err)
{
	const char *slash = strrchr(out, '/'), *name = slash ? slash + 1 : out;
	struct fg_buf dir = FG_BUF_INIT, base = FG_BUF_INIT, stem = FG_BUF_INIT;
	int rc;

	*slot = -1;
	if (!*name)
		return fg_err_set(err, FG_EINVAL, "%s: give the output folder without a trailing '/'", out);
	rc = fg_path_dir(out, &dir, err);
	if (!rc)
		rc = fg_buf_printf(&base, err, ".%s", name);
	if (!rc) { /* what earlier writers of out killed by SIGKILL left, older versions' too */
		fg_tmp_sweep_dirs(dir.data, FG_TMP_DIR_TAG, base.data, 1, FG_TMP_GRACE_S);
		sweep_old(dir.data, name, FG_TMP_GRACE_S, extract);
	}
	if (!rc && slash)
		rc = fg_buf_append(&stem, out, (size_t)(slash - out) + 1, err);
	if (!rc)
		rc = fg_buf_printf(&stem, err, "%s" FG_TMP_DIR_TAG, base.data);
	if (!rc)
		rc = tmp_make(stem.data, 0755, NULL, out, tmp, slot, err);
	if (!rc)
		chmod(tmp->data, 0755); /* whatever the umask: the result is an ordinary folder */
	fg_buf_release(&dir);
	fg_buf_release(&base);
	fg_buf_release(&stem);
	return rc;
}

int fg_tmp_dir_make(const char *out, struct fg_buf *tmp, int *slot, struct fg_err *err)
{
	return dir_make(out, 0, tmp, slot, err);
}

int fg_tmp_extract_dir_make(const char *dest, struct fg_buf *tmp, int *slot, struct fg_err *err)
{
	return dir_make(dest, 1, tmp, slot, err);
}

/* The pid dir's tag: "<base>-<pid>", a name mkdtemp's "<base>.XXXXXX" of
 * earlier versions never was, so that such a folder (no pid in it: six
 * random letters or digits) is never taken for a dead pid's. */
#define PID_DIR_TAG "-"

int fg_tmp_pid_dir_make(const char *dir, const char *base, struct fg_buf *tmp, int *slot, struct fg_err *err)
{
	struct fg_buf stem = FG_BUF_INIT, dot = FG_BUF_INIT;
	int rc;

	*slot = -1;
	if (!*base || strchr(base, '/'))
		return fg_err_set(err, FG_EINVAL, "'%s' is no name for a temporary folder", base);
	rc = fg_buf_printf(&dot, err, ".%s", base);
	if (!rc) {
		/* dead writers' (SIGKILL) folders, and their extractions' ones
		 * (".<base>-<pid>.fgpack-tmp.<pid>", or an earlier version's
		 * ".<base>.XXXXXX.fgpack-tmp.<pid>": that pid is the writer's) */
		fg_tmp_sweep_dirs(dir, PID_DIR_TAG, base, 1, FG_TMP_GRACE_S);
		sweep_dead(dir, FG_TMP_DIR_TAG, NULL, dot.data, 1, FG_TMP_GRACE_S, 1);
		rc = fg_buf_printf(&stem, err, "%s/%s" PID_DIR_TAG, dir, base);
	}
	if (!rc)
		rc = tmp_make(stem.data, 0700, NULL, NULL, tmp, slot, err);
	fg_buf_release(&stem);
	fg_buf_release(&dot);
	return rc;
}
