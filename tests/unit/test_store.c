/* test_store.c - the content store: commit, bad digest refused with nothing
 * left behind, concurrent pulls of one blob from forked processes, stale and
 * live locks, materialize (link, copy, refusals), verify quarantines a
 * corrupted blob, gc with dry run, gc roots; verify with two blobs per work
 * item (SHA-NI) at several thread counts, odd counts and an absent digest. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fsutil.h"
#include "sha256.h"
#include "store.h"
#include "tap.h"

#define H_HELLO "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
#define H_X "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
#define H_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static char top[256];

static void put(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd >= 0) {
		if (write(fd, data, len) != (ssize_t)len)
			printf("# short write %s\n", path);
		close(fd);
	}
}

static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static char *tmp_in(struct fg_store *st)
{
	struct fg_buf b = FG_BUF_INIT;

	fg_store_tmp_path(&b, st, NULL);
	return fg_buf_detach(&b, NULL);
}

static void test_root(void)
{
	struct fg_buf b = FG_BUF_INIT;

	setenv("FGPACK_HOME", "/x/home", 1);
	fg_store_default_root(&b, NULL);
	is_str(b.data, "/x/home", "root: FGPACK_HOME first");
	fg_buf_reset(&b);
	unsetenv("FGPACK_HOME");
	setenv("XDG_CACHE_HOME", "/x/cache", 1);
	fg_store_default_root(&b, NULL);
	is_str(b.data, "/x/cache/fgpack", "root: then XDG_CACHE_HOME/fgpack");
	fg_buf_reset(&b);
	setenv("XDG_CACHE_HOME", "relative", 1);
	setenv("HOME", "/x/h", 1);
	fg_store_default_root(&b, NULL);
	is_str(b.data, "/x/h/.cache/fgpack", "root: else ~/.cache/fgpack (relative XDG ignored)");
	fg_buf_release(&b);
}

static void test_commit(struct fg_store *st)
{
	struct fg_buf p = FG_BUF_INIT, tdir = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	char *t = tmp_in(st);
	char hex[FG_SHA256_HEX_LEN + 1];
	unsigned long long size = 0;
	struct stat sb;

	put(t, "hello\n", 6);
	ok(fg_store_commit(st, t, H_HELLO, H_HELLO, &err) == 0, "commit: accepted (%s)", err.msg);
	ok(fg_store_has(st, H_HELLO), "commit: blob present");
	fg_store_blob_path(&p, st, H_HELLO, NULL);
	ok(!stat(p.data, &sb) && (sb.st_mode & 0777) == 0444, "commit: blob is read-only 0444");
	ok(strstr(p.data, "/blobs/sha256/58/" H_HELLO) != NULL, "commit: blobs/sha256/<2>/<64>");
	ok(access(t, F_OK) != 0, "commit: temp file moved");
	ok(fg_store_size(st, H_HELLO, &size, &err) == 0 && size == 6, "commit: size");
	free(t);

	t = tmp_in(st);
	put(t, "x", 1);
	ok(fg_store_commit(st, t, H_X, H_HELLO, &err) == FG_EHASH && strstr(err.msg, H_HELLO) &&
		   strstr(err.msg, H_X),
	   "commit: digest mismatch refused (%s)", err.msg);
	ok(access(t, F_OK) != 0 && !fg_store_has(st, H_X), "commit: nothing left behind on mismatch");
	fg_buf_printf(&tdir, NULL, "%s/tmp", fg_store_root(st));
	is_int(count_files(tdir.data), 0, "commit: tmp/ empty after mismatch");
	free(t);

	t = tmp_in(st);
	put(t, "hello\n", 6);
	ok(fg_store_commit(st, t, H_HELLO, NULL, &err) == 0 && access(t, F_OK) != 0,
	   "commit: existing blob, temp dropped");
	free(t);

	fg_buf_reset(&p);
	fg_buf_printf(&p, NULL, "%s/src.bin", top);
	put(p.data, "x", 1);
	ok(fg_store_import(st, p.data, NULL, hex, &err) == 0 && !strcmp(hex, H_X) && fg_store_has(st, H_X),
	   "import: hashed and stored");
	ok(fg_store_import(st, p.data, H_EMPTY, hex, &err) == FG_EHASH, "import: expected digest checked");
	is_int(count_files(tdir.data), 0, "import: tmp/ empty afterwards");
	fg_buf_release(&p);
	fg_buf_release(&tdir);
}

/* One "pull" of a 6 MiB blob under the blob lock, as a fetcher would do it. */
static int child_pull(const char *root, const char *hex, int id)
{
	struct fg_store *st = NULL;
	struct fg_store_lock *lk = NULL;
	struct fg_buf part = FG_BUF_INIT, inside = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	char key[FG_STORE_KEY_MAX], got[FG_SHA256_HEX_LEN + 1];
	size_t n = 6 << 20, i;
	char *data;
	int fd, rc = 1;

	if (fg_store_open(&st, root, &err) || fg_store_key(key, hex, NULL, &err) ||
	    fg_store_lock_blob(&lk, st, key, 30000, &err))
		goto out;
	/* a second holder inside the lock would find this file */
	fg_buf_printf(&inside, NULL, "%s/inside", root);
	fd = open(inside.data, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		goto out_unlock;
	close(fd);
	if (!fg_store_has(st, hex)) {
		data = malloc(n);
		if (!data)
			goto out_unlock;
		for (i = 0; i < n; i++)
			data[i] = (char)(i * 7 + (i >> 12));
		fg_store_partial_paths(&part, NULL, st, key, NULL);
		put(part.data, data, n / 2);
		usleep(50000); /* widen the window */
		fd = open(part.data, O_WRONLY | O_APPEND);
		if (fd < 0 || write(fd, data + n / 2, n - n / 2) != (ssize_t)(n - n / 2)) {
			free(data);
			goto out_unlock;
		}
		close(fd);
		free(data);
		if (fg_store_hash_file(part.data, got, NULL, &err) ||
		    fg_store_commit(st, part.data, got, hex, &err))
			goto out_unlock;
	}
	unlink(inside.data);
	rc = 0;
out_unlock:
	fg_store_unlock(lk);
out:
	if (rc)
		printf("# child %d: %s\n", id, err.msg);
	fg_buf_release(&part);
	fg_buf_release(&inside);
	fg_store_free(st);
	return rc;
}

static void test_concurrent(struct fg_store *st)
{
	size_t n = 6 << 20, i;
	char *data = malloc(n);
	char hex[FG_SHA256_HEX_LEN + 1], got[FG_SHA256_HEX_LEN + 1];
	uint8_t d[FG_SHA256_LEN];
	struct fg_buf p = FG_BUF_INIT, pdir = FG_BUF_INIT, ldir = FG_BUF_INIT;
	pid_t pid[2];
	int k, status, good = 1;

	if (!data)
		return;
	for (i = 0; i < n; i++)
		data[i] = (char)(i * 7 + (i >> 12));
	fg_sha256_mem(data, n, d, NULL);
	fg_hex_encode(d, sizeof(d), hex);
	free(data);
	fflush(stdout);
	for (k = 0; k < 2; k++) {
		pid[k] = fork();
		if (pid[k] == 0)
			_exit(child_pull(fg_store_root(st), hex, k));
	}
	for (k = 0; k < 2; k++)
		if (waitpid(pid[k], &status, 0) != pid[k] || !WIFEXITED(status) || WEXITSTATUS(status))
			good = 0;
	ok(good, "concurrent: both processes succeed");
	fg_store_blob_path(&p, st, hex, NULL);
	ok(fg_store_has(st, hex) && fg_store_hash_file(p.data, got, NULL, NULL) == 0 && !strcmp(got, hex),
	   "concurrent: one intact blob");
	fg_buf_printf(&pdir, NULL, "%s/partial", fg_store_root(st));
	fg_buf_printf(&ldir, NULL, "%s/locks", fg_store_root(st));
	ok(count_files(pdir.data) == 0 && count_files(ldir.data) == 0, "concurrent: no partial or lock left");
	fg_buf_release(&p);
	fg_buf_release(&pdir);
	fg_buf_release(&ldir);
}

static void test_locks(struct fg_store *st)
{
	struct fg_store_lock *a = NULL, *b = NULL;
	struct fg_err err = { 0, "" };
	struct fg_buf lp = FG_BUF_INIT, line = FG_BUF_INIT;
	char key[FG_STORE_KEY_MAX], host[256];
	struct timespec old[2];
	pid_t dead;
	int status;

	fg_store_key(key, NULL, "https://example.org/a", NULL);
	ok(!strncmp(key, "url-", 4) && strlen(key) == 68, "key: url form");
	fg_store_key(key, H_X, NULL, NULL);
	is_str(key, "sha256-" H_X, "key: sha256 form");
	ok(fg_store_lock_blob(&a, st, key, 0, &err) == 0, "lock: taken");
	ok(fg_store_lock_blob(&b, st, key, 100, &err) == FG_EBUSY && strstr(err.msg, "locked by pid"),
	   "lock: second taker waits then gets busy (%s)", err.msg);
	fg_store_unlock(a);
	ok(fg_store_lock_blob(&b, st, key, 0, &err) == 0, "lock: free again after unlock");
	fg_store_unlock(b);

	/* a lock left by a process that died */
	dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, &status, 0);
	gethostname(host, sizeof(host));
	fg_buf_printf(&lp, NULL, "%s/locks/%s.lock", fg_store_root(st), key);
	fg_buf_printf(&line, NULL, "%ld 12345 %s\n", (long)dead, host);
	put(lp.data, line.data, line.len);
	ok(fg_store_lock_blob(&a, st, key, 0, &err) == 0, "lock: stale lock of a dead pid broken (%s)",
	   err.msg);
	fg_store_unlock(a);

	/* a lock from another host: fresh is respected, old is broken */
	fg_buf_reset(&line);
	fg_buf_printf(&line, NULL, "1 1 other-host.example\n");
	put(lp.data, line.data, line.len);
	ok(fg_store_lock_blob(&a, st, key, 0, &err) == FG_EBUSY, "lock: fresh lock of another host held");
	old[0].tv_sec = old[1].tv_sec = time(NULL) - FG_STORE_LOCK_STALE_S - 5;
	old[0].tv_nsec = old[1].tv_nsec = 0;
	utimensat(AT_FDCWD, lp.data, old, 0);
	ok(fg_store_lock_blob(&a, st, key, 0, &err) == 0, "lock: old lock of another host broken");
	fg_store_unlock(a);
	ok(access(lp.data, F_OK) != 0, "lock: file removed on unlock");
	fg_buf_release(&lp);
	fg_buf_release(&line);
}

static void test_materialize(struct fg_store *st)
{
	struct fg_buf dest = FG_BUF_INIT, f = FG_BUF_INIT, blob = FG_BUF_INIT, l = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	struct stat a, b;
	int how = 0;
	char buf[16];
	int fd;
	ssize_t n;

	fg_buf_printf(&dest, NULL, "%s/work", top);
	fg_store_blob_path(&blob, st, H_HELLO, NULL);
	ok(fg_store_materialize(st, H_HELLO, dest.data, "m/sub/hello.txt", 0, &how, &err) == 0 &&
		   how == FG_STORE_MAT_LINK,
	   "materialize: hard link (%s)", err.msg);
	fg_buf_printf(&f, NULL, "%s/m/sub/hello.txt", dest.data);
	ok(!lstat(f.data, &a) && !stat(blob.data, &b) && a.st_ino == b.st_ino && S_ISREG(a.st_mode),
	   "materialize: same inode, a regular file, not a symlink");
	ok(fg_store_materialize(st, H_HELLO, dest.data, "m/sub/hello.txt", 0, &how, &err) == 0,
	   "materialize: again is a no-op");
	ok(fg_store_materialize(st, H_X, dest.data, "m/sub/hello.txt", 1, &how, &err) == 0 &&
		   how == FG_STORE_MAT_COPY,
	   "materialize: copy replaces an existing file");
	fd = open(f.data, O_RDONLY);
	n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
	if (fd >= 0)
		close(fd);
	ok(n == 1 && buf[0] == 'x' && !stat(f.data, &a) && a.st_ino != b.st_ino, "materialize: copy content");
	ok(fg_store_materialize(st, H_HELLO, dest.data, "../escape", 0, &how, &err) == FG_EINVAL,
	   "materialize: .. refused");
	ok(fg_store_materialize(st, H_HELLO, dest.data, "/abs", 0, &how, &err) == FG_EINVAL,
	   "materialize: absolute refused");
	fg_buf_printf(&l, NULL, "%s/link", dest.data);
	if (symlink(top, l.data) == 0)
		ok(fg_store_materialize(st, H_HELLO, dest.data, "link/x.txt", 0, &how, &err) == FG_EINVAL &&
			   strstr(err.msg, "symlink"),
		   "materialize: symlinked folder refused (%s)", err.msg);
	ok(fg_store_materialize(st, H_EMPTY, dest.data, "e", 0, &how, &err) == FG_ENOTFOUND,
	   "materialize: missing blob named");
	fg_buf_release(&dest);
	fg_buf_release(&f);
	fg_buf_release(&blob);
	fg_buf_release(&l);
}

/* Cross-device paths: commit from another file system, materialize onto one. */
static void test_cross_device(struct fg_store *st)
{
	char dir[] = "/dev/shm/fgxdev.XXXXXX";
	struct fg_buf src = FG_BUF_INIT, f = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	struct stat a, b;
	int how = 0;

	if (stat("/dev/shm", &a) || stat(fg_store_root(st), &b) || a.st_dev == b.st_dev ||
	    !mkdtemp(dir)) {
		ok(1, "# skip cross-device: no second file system at /dev/shm");
		return;
	}
	fg_buf_printf(&src, NULL, "%s/blob.tmp", dir);
	put(src.data, "", 0);
	ok(fg_store_commit(st, src.data, H_EMPTY, H_EMPTY, &err) == 0 && fg_store_has(st, H_EMPTY) &&
		   access(src.data, F_OK) != 0,
	   "cross-device: commit copies, then removes the source (%s)", err.msg);
	ok(fg_store_materialize(st, H_HELLO, dir, "out/h.txt", 0, &how, &err) == 0 &&
		   how == FG_STORE_MAT_COPY,
	   "cross-device: materialize falls back to a copy (%s)", err.msg);
	fg_buf_printf(&f, NULL, "%s/out/h.txt", dir);
	ok(!lstat(f.data, &a) && S_ISREG(a.st_mode) && a.st_size == 6, "cross-device: copied file");
	unlink(f.data);
	fg_buf_reset(&f);
	fg_buf_printf(&f, NULL, "%s/out", dir);
	rmdir(f.data);
	rmdir(dir);
	fg_buf_release(&src);
	fg_buf_release(&f);
}

static int seen_root;
static int on_root(void *ctx, const char *path)
{
	(void)ctx;
	if (strstr(path, "/roots-test.lock"))
		seen_root++;
	return 0;
}

static void test_verify_gc(struct fg_store *st)
{
	struct fg_store_report rep;
	struct fg_err err = { 0, "" };
	struct fg_buf p = FG_BUF_INIT, q = FG_BUF_INIT;
	char *t = tmp_in(st);
	const char *keep[1] = { H_HELLO };
	int fd;

	put(t, "", 0);
	fg_store_commit(st, t, H_EMPTY, NULL, &err);
	free(t);
	ok(fg_store_verify(&rep, st, 2, NULL, NULL, &err) == 0 && rep.bad == 0 && rep.blobs == 4,
	   "verify: 4 good blobs (%llu, %llu bad)", rep.blobs, rep.bad);
	fg_store_blob_path(&p, st, H_HELLO, NULL);
	chmod(p.data, 0644);
	ok(fg_store_verify(&rep, st, 1, NULL, NULL, &err) == 0 && rep.bad == 0 && rep.fixed_modes == 1,
	   "verify: a writable good blob is counted");
	{
		struct stat sb;

		ok(!stat(p.data, &sb) && (sb.st_mode & 0777) == 0444, "verify: and made 0444 again");
	}
	fg_buf_reset(&p);
	/* corrupt one blob behind the store's back */
	fg_store_blob_path(&p, st, H_X, NULL);
	chmod(p.data, 0644);
	fd = open(p.data, O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "y", 1) != 1)
			printf("# write failed\n");
		close(fd);
	}
	ok(fg_store_verify(&rep, st, 1, NULL, NULL, &err) == 0 && rep.bad == 1 && rep.blobs == 4,
	   "verify: corrupted blob found");
	ok(!fg_store_has(st, H_X), "verify: bad blob left blobs/");
	fg_buf_printf(&q, NULL, "%s/quarantine", fg_store_root(st));
	is_int(count_files(q.data), 1, "verify: bad blob in quarantine/");
	ok(fg_store_verify(&rep, st, 1, NULL, NULL, &err) == 0 && rep.bad == 0 && rep.blobs == 3,
	   "verify: clean afterwards");

	{
		const char *some[3] = { H_HELLO, H_X, H_HELLO };

		ok(fg_store_verify_some(&rep, st, some, 3, 2, NULL, NULL, &err) == 0 && rep.blobs == 1 &&
			   rep.missing == 1 && rep.bad == 0,
		   "verify_some: repeats hashed once, absent one counted missing");
	}
	ok(fg_store_gc(&rep, st, keep, 1, 1, NULL, NULL, &err) == 0 && rep.removed == 2 && rep.kept == 1,
	   "gc: dry run counts 2 to remove");
	ok(fg_store_has(st, H_EMPTY), "gc: dry run removes nothing");
	{
		struct fg_store_lock *lk = NULL;

		/* a blob whose lock is held (a fetch in progress) survives gc */
		fg_store_lock_blob(&lk, st, "sha256-" H_EMPTY, 0, &err);
		ok(lk && fg_store_gc(&rep, st, keep, 1, 0, NULL, NULL, &err) == 0 && rep.removed == 1 &&
			   fg_store_has(st, H_EMPTY),
		   "gc: a blob whose lock is held is kept");
		fg_store_unlock(lk);
	}
	{
		struct fg_store *user = NULL;

		/* another opening of the store (its own flock, as another
		 * process's) in use by a pull: gc refuses, nothing removed */
		ok(fg_store_open(&user, fg_store_root(st), &err) == 0 && fg_store_use(user, &err) == 0,
		   "use: a pull holds the store (%s)", err.msg);
		ok(fg_store_gc(&rep, st, keep, 1, 0, NULL, NULL, &err) == FG_EBUSY &&
			   fg_store_has(st, H_EMPTY) && strstr(err.msg, "in use by another fgpack process"),
		   "gc: refused while the store is in use (%s)", err.msg);
		fg_store_free(user);
	}
	ok(fg_store_gc(&rep, st, keep, 1, 0, NULL, NULL, &err) == 0 && rep.removed == 1,
	   "gc: removes unreferenced blobs");
	{
		struct fg_store *user = NULL, *g = NULL;

		/* a gc holding the store (as `store gc` does from before it reads
		 * the roots): a second gc is refused, and st's own gc let go of
		 * its hold when done (else g could not take it) */
		ok(fg_store_open(&g, fg_store_root(st), &err) == 0 && fg_store_lock_gc(g, &err) == 0 &&
			   fg_store_open(&user, fg_store_root(st), &err) == 0 &&
			   fg_store_lock_gc(user, &err) == FG_EBUSY &&
			   fg_store_gc(&rep, st, keep, 1, 1, NULL, NULL, &err) == FG_EBUSY,
		   "gc: one gc at a time");
		fg_store_free(g);
		fg_store_free(user);
	}
	ok(fg_store_has(st, H_HELLO) && !fg_store_has(st, H_EMPTY), "gc: referenced blob kept");

	fg_buf_reset(&p);
	fg_buf_printf(&p, NULL, "%s/roots-test.lock", top);
	put(p.data, "{}", 2);
	ok(fg_store_root_add(st, p.data, &err) == 0 && fg_store_root_add(st, p.data, &err) == 0,
	   "roots: added twice");
	fg_store_roots(st, on_root, NULL, &err);
	is_int(seen_root, 1, "roots: listed once");
	fg_buf_release(&p);
	fg_buf_release(&q);
}

/* match (the stamp's or the seen record's) on the fstat of path opened */
static int match_of(struct fg_store *st, const char *path, char hex[FG_SHA256_HEX_LEN + 1],
		    int (*match)(const struct fg_store *, const struct stat *, char *))
{
	struct stat sb;
	int fd = open(path, O_RDONLY), m = 0;

	if (fd >= 0 && !fstat(fd, &sb))
		m = match(st, &sb, hex);
	if (fd >= 0)
		close(fd);
	return m;
}

static int stamp_of(struct fg_store *st, const char *path, char hex[FG_SHA256_HEX_LEN + 1])
{
	return match_of(st, path, hex, fg_store_stamp_match);
}

/* Stamps: a hard link to a committed blob is trusted by its name until its
 * inode changes; a copy never is; a write in place is noticed. */
static void test_stamps(struct fg_store *st)
{
	static const char body[] = "stamped blob body\n";
	struct fg_buf dest = FG_BUF_INIT, a = FG_BUF_INIT, b = FG_BUF_INIT, c = FG_BUF_INIT,
		      rec = FG_BUF_INIT;
	struct fg_store_report rep;
	struct fg_err err = { 0, "" };
	char hex[FG_SHA256_HEX_LEN + 1], got[FG_SHA256_HEX_LEN + 1] = "";
	const char *only[1];
	uint8_t d[FG_SHA256_LEN];
	struct stat sb;
	char *t = tmp_in(st);
	int fd, how = 0;

	fg_sha256_mem(body, sizeof(body) - 1, d, NULL);
	fg_hex_encode(d, sizeof(d), hex);
	only[0] = hex;
	put(t, body, sizeof(body) - 1);
	ok(fg_store_commit(st, t, hex, hex, &err) == 0, "stamps: commit (%s)", err.msg);
	fg_buf_printf(&dest, NULL, "%s/stamped", top);
	fg_buf_printf(&a, NULL, "%s/a.bin", dest.data);
	fg_buf_printf(&b, NULL, "%s/b.bin", dest.data);
	fg_buf_printf(&c, NULL, "%s/c.bin", dest.data);
	ok(fg_store_materialize(st, hex, dest.data, "a.bin", 0, &how, &err) == 0 && how == FG_STORE_MAT_LINK,
	   "stamps: linked (%s)", err.msg);
	ok(stamp_of(st, a.data, got) == 1 && !strcmp(got, hex), "stamps: a pulled hard link is trusted by name");
	ok(fg_store_materialize(st, hex, dest.data, "b.bin", 0, &how, &err) == 0 &&
		   stamp_of(st, a.data, got) == 1 && stamp_of(st, b.data, got) == 1,
	   "stamps: a second link (ctime moved) keeps both trusted");
	ok(fg_store_materialize(st, hex, dest.data, "c.bin", 1, &how, &err) == 0 && how == FG_STORE_MAT_COPY &&
		   stamp_of(st, c.data, got) == 0,
	   "stamps: a copy is not trusted (another inode)");
	ok(!stat(c.data, &sb) && fg_store_stamp_note(st, hex, &sb) == -1,
	   "stamps: note refuses an inode that is not the blob");
	/* edited in place after the pull: same size, new bytes */
	chmod(a.data, 0644);
	fd = open(a.data, O_WRONLY);
	if (fd >= 0) {
		if (pwrite(fd, "S", 1, 0) != 1)
			printf("# short write\n");
		close(fd);
	}
	ok(stamp_of(st, a.data, got) == 0 && stamp_of(st, b.data, got) == 0,
	   "stamps: a blob modified in place is not trusted any more");
	ok(fg_store_verify_some(&rep, st, only, 1, 1, NULL, NULL, &err) == 0 && rep.bad == 1,
	   "stamps: verify finds it bad");
	/* a fresh blob, verified: verify records the stamp */
	free(t);
	t = tmp_in(st);
	put(t, body, sizeof(body) - 1);
	ok(fg_store_commit(st, t, hex, hex, &err) == 0, "stamps: commit again (%s)", err.msg);
	unlink(a.data);
	ok(fg_store_materialize(st, hex, dest.data, "a.bin", 0, &how, &err) == 0 &&
		   stamp_of(st, a.data, got) == 1,
	   "stamps: re-pulled blob trusted again");
	if (!stat(a.data, &sb))
		fg_buf_printf(&rec, NULL, "%s/stamps/%llu-%llu", fg_store_root(st),
			      (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino);
	put(rec.data, hex, 40); /* torn record */
	ok(stamp_of(st, a.data, got) == 0, "stamps: a torn record means hashing again");
	ok(fg_store_verify_some(&rep, st, only, 1, 1, NULL, NULL, &err) == 0 && rep.bad == 0 &&
		   stamp_of(st, a.data, got) == 1,
	   "stamps: verify re-records the stamp");
	unlink(rec.data);
	ok(!stat(a.data, &sb) && fg_store_stamp_note(st, hex, &sb) == 0 && stamp_of(st, a.data, got) == 1,
	   "stamps: a reader that hashed the blob notes it");
	ok(fg_store_gc(&rep, st, NULL, 0, 0, NULL, NULL, &err) == 0 && rep.removed >= 1,
	   "stamps: gc with no roots removes the blobs (%s)", err.msg);
	fg_buf_reset(&rec);
	fg_buf_printf(&rec, NULL, "%s/stamps", fg_store_root(st));
	ok(count_files(rec.data) == 0 && stamp_of(st, a.data, got) == 0,
	   "stamps: gc drops the stamps of removed blobs");
	free(t);
	fg_buf_release(&dest);
	fg_buf_release(&a);
	fg_buf_release(&b);
	fg_buf_release(&c);
	fg_buf_release(&rec);
}

/* Reports seen by on_pair_blob: every blob once, in blob order. */
struct seen_blobs {
	char last[FG_SHA256_HEX_LEN + 1];
	char bad[FG_SHA256_HEX_LEN + 1];
	int calls, good, missing, bad_n, out_of_order;
};

static int on_pair_blob(void *ctx, const char *hex, unsigned long long size, int good)
{
	struct seen_blobs *s = ctx;

	(void)size;
	if (strcmp(hex, s->last) <= 0)
		s->out_of_order++;
	memcpy(s->last, hex, sizeof(s->last));
	s->calls++;
	if (good > 0)
		s->good++;
	else if (good < 0)
		s->missing++;
	else {
		s->bad_n++;
		memcpy(s->bad, hex, sizeof(s->bad));
	}
	return 0;
}

/* Seven blobs (empty to 3 MiB: plain and O_DIRECT reads, pairs of unlike
 * lengths) in a store of their own: with -j 1..4 there are two blobs per
 * work item where SHA-NI is present (the last item alone: odd count), and
 * the given set adds an absent digest. */
static void test_verify_pairs(void)
{
	static const size_t sizes[7] = { 0, 1, 64, 5000, (1 << 20) + 1, 2 << 20, 3 << 20 };
	char hex[8][FG_SHA256_HEX_LEN + 1];
	const char *only[8];
	struct fg_store *st = NULL;
	struct fg_store_report rep;
	struct fg_err err = { 0, "" };
	struct fg_buf p = FG_BUF_INIT;
	char *data = malloc(3 << 20);
	int i, j, bad = 0;

	fg_buf_printf(&p, NULL, "%s/pairs", top);
	if (!data || fg_store_open(&st, p.data, &err)) {
		ok(0, "verify pairs: store made (%s)", err.msg);
		free(data);
		fg_buf_release(&p);
		return;
	}
	for (i = 0; i < 7; i++) {
		memset(data, 'a' + i, sizes[i]);
		fg_buf_reset(&p);
		fg_buf_printf(&p, NULL, "%s/pair-src", top);
		put(p.data, data, sizes[i]);
		if (fg_store_import(st, p.data, NULL, hex[i], &err))
			bad++;
		only[i] = hex[i];
	}
	memset(hex[7], '0', FG_SHA256_HEX_LEN);
	hex[7][FG_SHA256_HEX_LEN] = '\0';
	only[7] = hex[7];
	is_int(bad, 0, "verify pairs: 7 blobs imported");
	for (j = 1; j <= 4; j++) {
		struct seen_blobs s;

		memset(&s, 0, sizeof(s));
		ok(fg_store_verify(&rep, st, j, on_pair_blob, &s, &err) == 0 && rep.blobs == 7 &&
			   rep.bad == 0 && s.calls == 7 && s.good == 7 && !s.out_of_order,
		   "verify pairs -j %d: 7 good, each reported once in blob order", j);
		memset(&s, 0, sizeof(s));
		ok(fg_store_verify_some(&rep, st, only, 8, j, on_pair_blob, &s, &err) == 0 &&
			   rep.blobs == 7 && rep.missing == 1 && s.calls == 8 && s.missing == 1 &&
			   !s.out_of_order,
		   "verify_some pairs -j %d: 7 good and the absent one, in order", j);
	}
	{
		struct seen_blobs s;
		int fd;

		/* the 2 MiB blob's last byte flipped: caught, named, quarantined */
		fg_buf_reset(&p);
		fg_store_blob_path(&p, st, hex[5], NULL);
		chmod(p.data, 0644);
		fd = open(p.data, O_WRONLY);
		if (fd < 0 || pwrite(fd, "!", 1, (off_t)sizes[5] - 1) != 1)
			printf("# write failed\n");
		if (fd >= 0)
			close(fd);
		memset(&s, 0, sizeof(s));
		ok(fg_store_verify(&rep, st, 3, on_pair_blob, &s, &err) == 0 && rep.blobs == 7 &&
			   rep.bad == 1 && s.bad_n == 1 && !strcmp(s.bad, hex[5]) && !s.out_of_order,
		   "verify pairs -j 3: the bad blob named");
		ok(!fg_store_has(st, hex[5]) && fg_store_has(st, hex[4]) && fg_store_has(st, hex[6]),
		   "verify pairs: only the bad blob quarantined");
	}
	fg_store_free(st);
	fg_buf_release(&p);
	free(data);
}

/* A blob's chain states beside it: kept and given back for the same every
 * and size only; a record that is cut, for another every, or not hex is no
 * record; gc drops those whose blob is gone. */
static void test_states(struct fg_store *st)
{
	static const char body[] = "a blob with chain states\n";
	const unsigned long long every = 64;
	struct fg_store_report rep;
	struct fg_buf p = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	char hex[FG_SHA256_HEX_LEN + 1];
	uint8_t d[FG_SHA256_LEN], s3[3 * 32], *got = NULL;
	size_t n = 9, i;
	char *t = tmp_in(st);
	FILE *f;

	for (i = 0; i < sizeof(s3); i++)
		s3[i] = (uint8_t)(i * 7);
	fg_sha256_mem(body, sizeof(body) - 1, d, NULL);
	fg_hex_encode(d, sizeof(d), hex);
	put(t, body, sizeof(body) - 1);
	ok(fg_store_commit(st, t, hex, hex, &err) == 0, "states: commit (%s)", err.msg);
	ok(fg_store_states_get(st, hex, 200, every, &got, &n) == -1 && !got && !n, "states: none at first");
	ok(fg_store_states_note(st, hex, every, s3, 3) == 0, "states: kept");
	ok(fg_store_states_get(st, hex, 200, every, &got, &n) == 0 && n == 3 && got &&
		   !memcmp(got, s3, sizeof(s3)),
	   "states: given back for a blob of 200 bytes, every 64: 3 of them");
	free(got);
	got = NULL;
	ok(fg_store_states_get(st, hex, 257, every, &got, &n) == -1 && !got &&
		   fg_store_states_get(st, hex, 192, every, &got, &n) == -1 && !got,
	   "states: not for a size with another count (257 bytes: 4, 192 bytes: 2)");
	ok(fg_store_states_get(st, hex, 200, 128, &got, &n) == -1 && !got, "states: not for another every");
	fg_buf_printf(&p, NULL, "%s/states/%s", fg_store_root(st), hex);
	f = fopen(p.data, "w");
	if (f) {
		fputs("fgpack-states 1\nevery 64\n", f);
		for (i = 0; i < 3; i++)
			fputs(i == 1 ? "zz\n" : "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n", f);
		fclose(f);
	}
	ok(fg_store_states_get(st, hex, 200, every, &got, &n) == -1 && !got, "states: a record with a line that is not hex: none");
	ok(fg_store_states_note(st, hex, every, s3, 3) == 0 && !truncate(p.data, 60) &&
		   fg_store_states_get(st, hex, 200, every, &got, &n) == -1 && !got,
	   "states: a record cut short: none");
	ok(fg_store_states_note(st, hex, every, s3, 3) == 0, "states: kept again");
	memset(&rep, 0, sizeof(rep));
	ok(fg_store_gc(&rep, st, NULL, 0, 0, NULL, NULL, &err) == 0 && access(p.data, F_OK) != 0,
	   "states: gc drops them with their blob (%s)", err.msg);
	/* an import of more than 32 MiB keeps its state after 32 MiB */
	{
		size_t big = (size_t)FG_STORE_STATES_EVERY + 4099;
		unsigned char *b = malloc(big);
		struct fg_sha256 *h = NULL;
		uint8_t want[32];
		char src[600], ihex[FG_SHA256_HEX_LEN + 1];

		for (i = 0; b && i < big; i++)
			b[i] = (unsigned char)(i * 131 + (i >> 12));
		snprintf(src, sizeof(src), "%s/big-import.bin", top);
		if (b)
			put(src, b, big);
		ok(b && !fg_sha256_new_own(&h, NULL) &&
			   !fg_sha256_update(h, b, (size_t)FG_STORE_STATES_EVERY, NULL) &&
			   !fg_sha256_state(h, want, NULL) && !fg_store_import(st, src, NULL, ihex, &err) &&
			   !fg_store_states_get(st, ihex, big, FG_STORE_STATES_EVERY, &got, &n) && n == 1 &&
			   !memcmp(got, want, 32),
		   "states: an import of 32 MiB + 4099 bytes keeps its one state, the prefix's (%s)",
		   err.msg);
		free(got);
		got = NULL;
		fg_sha256_free(h);
		free(b);
		unlink(src);
	}
	fg_buf_release(&p);
	free(t);
}

static int seen_of(struct fg_store *st, const char *path, char hex[FG_SHA256_HEX_LEN + 1])
{
	return match_of(st, path, hex, fg_store_seen_match);
}

static long long mtime_ns(const struct stat *sb)
{
	long long m = (long long)sb->st_mtim.tv_sec * 1000000000LL + sb->st_mtim.tv_nsec;
	long long c = (long long)sb->st_ctim.tv_sec * 1000000000LL + sb->st_ctim.tv_nsec;

	return m > c ? m : c;
}

/* Seen records: a plain file hashed in full is trusted by its stat while
 * size, mtime, ctime and inode hold, only when it was last changed 2 s
 * before the hash began; a blob's inode is left to its stamp; gc drops a
 * record whose file moved or went, and keeps the states of one it keeps. */
static void test_seen(struct fg_store *st)
{
	static const char body[] = "a plain file, no blob; long enough for three chain states of 64 bytes "
				   "each, and some more bytes after the third one, to be sure.\n";
	struct fg_buf a = FG_BUF_INIT, b = FG_BUF_INIT, c = FG_BUF_INIT, rec = FG_BUF_INIT;
	struct fg_store_report rep;
	struct fg_store_digest d[2];
	struct fg_err err = { 0, "" };
	char hex[FG_SHA256_HEX_LEN + 1], got[FG_SHA256_HEX_LEN + 1];
	const char *paths[2];
	uint8_t dg[FG_SHA256_LEN];
	struct stat sb;
	long long t0 = fg_store_seen_clock();
	char *t;
	FILE *f;

	fg_sha256_mem(body, sizeof(body) - 1, dg, NULL);
	fg_hex_encode(dg, sizeof(dg), hex);
	fg_buf_printf(&a, NULL, "%s/seen-a.bin", top);
	fg_buf_printf(&b, NULL, "%s/seen b, with spaces.bin", top); /* gc reads the path after the fourth space */
	fg_buf_printf(&c, NULL, "%s/seen-c.bin", top);
	put(a.data, body, sizeof(body) - 1);
	put(b.data, body, sizeof(body) - 1);
	ok(t0 > 0 && !stat(a.data, &sb) && fg_store_seen_note(st, hex, &sb, t0, a.data) == -1 &&
		   seen_of(st, a.data, got) == 0,
	   "seen: a file changed just now is not noted (racy)");
	ok(fg_store_seen_note(st, hex, &sb, mtime_ns(&sb) + FG_STORE_SEEN_RACY_NS - 1, a.data) == -1,
	   "seen: nor one changed 1 ns less than 2 s before the hash");
	ok(fg_store_seen_note(st, hex, &sb, mtime_ns(&sb) + FG_STORE_SEEN_RACY_NS, a.data) == 0 &&
		   seen_of(st, a.data, got) == 1 && !strcmp(got, hex),
	   "seen: one changed 2 s before is noted and trusted by its stat");
	ok(fg_store_seen_note(st, "zz", &sb, mtime_ns(&sb) + FG_STORE_SEEN_RACY_NS, a.data) == -1,
	   "seen: not a digest: not noted");
	ok(seen_of(st, b.data, got) == 0, "seen: another file with the same bytes is not (its own inode)");
	ok(!stat(b.data, &sb) && fg_store_seen_note_written(st, hex, &sb, b.data) == 0 &&
		   seen_of(st, b.data, got) == 1 && !strcmp(got, hex),
	   "seen: a file its writer just hashed as it wrote is noted at once (no 2 s rule)");
	usleep(20000);
	put(b.data, body, sizeof(body) - 1);
	ok(fg_store_seen_note_written(st, hex, &sb, b.data) == -1 && seen_of(st, b.data, got) == 0,
	   "seen: not when the file is no longer as the writer left it");
	/* each change below comes a clock tick (HZ 100 at most) after the last:
	 * a change within one tick is the racy case the 2 s rule avoids */
	usleep(20000);
	put(a.data, "A", 1);
	put(a.data, body, sizeof(body) - 1);
	ok(seen_of(st, a.data, got) == 0, "seen: rewritten with the same bytes: not trusted (mtime, ctime moved)");
	ok(!stat(a.data, &sb) &&
		   fg_store_seen_note(st, hex, &sb, mtime_ns(&sb) + FG_STORE_SEEN_RACY_NS, a.data) == 0 &&
		   !usleep(20000) && !link(a.data, c.data) && seen_of(st, a.data, got) == 0 && seen_of(st, c.data, got) == 0,
	   "seen: a new hard link moves ctime: not trusted");
	ok(!stat(a.data, &sb) &&
		   fg_store_seen_note(st, hex, &sb, mtime_ns(&sb) + FG_STORE_SEEN_RACY_NS, a.data) == 0 &&
		   seen_of(st, a.data, got) == 1 && !usleep(20000) && !chmod(a.data, 0600) &&
		   seen_of(st, a.data, got) == 0,
	   "seen: a chmod moves ctime: not trusted");
	ok(!stat(c.data, &sb) &&
		   fg_store_seen_note(st, hex, &sb, mtime_ns(&sb) + FG_STORE_SEEN_RACY_NS, c.data) == 0 &&
		   seen_of(st, a.data, got) == 1,
	   "seen: trusted by any path to the inode");
	fg_buf_printf(&rec, NULL, "%s/seen/%llu-%llu", fg_store_root(st), (unsigned long long)sb.st_dev,
		      (unsigned long long)sb.st_ino);
	ok(!truncate(rec.data, 70) && seen_of(st, a.data, got) == 0, "seen: a torn record means hashing again");
	/* a blob's inode is the stamp's business */
	t = tmp_in(st);
	put(t, body, sizeof(body) - 1);
	ok(fg_store_commit(st, t, hex, hex, &err) == 0 && !fg_store_blob_path(&rec, st, hex, NULL),
	   "seen: the same bytes committed as a blob (%s)", err.msg);
	fg_buf_reset(&rec);
	fg_store_blob_path(&rec, st, hex, NULL);
	ok(!stat(rec.data, &sb) &&
		   fg_store_seen_note(st, hex, &sb, mtime_ns(&sb) + FG_STORE_SEEN_RACY_NS, rec.data) == -1,
	   "seen: not noted for a blob's inode");
	free(t);
	/* fg_store_digest_files_ex: every file here was made 2 s before it runs */
	unlink(c.data);
	put(c.data, body, sizeof(body) - 1);
	while (fg_store_seen_clock() < t0 + FG_STORE_SEEN_RACY_NS + 100000000LL)
		usleep(50000);
	paths[0] = b.data;
	paths[1] = c.data;
	ok(fg_store_digest_files_ex(st, paths, 2, 2, 64, FG_STORE_DIGEST_SEEN, d, &err) == 0 && !d[0].rc &&
		   !d[1].rc && !d[0].by_seen && !d[1].by_seen && !strcmp(d[0].hex, hex) && d[0].n_states == 2,
	   "seen: the first digest hashes both (%s)", err.msg);
	free(d[0].states);
	free(d[1].states);
	ok(fg_store_digest_files_ex(st, paths, 2, 2, 64, FG_STORE_DIGEST_SEEN, d, &err) == 0 && d[0].by_seen &&
		   d[1].by_seen && !d[0].by_store && !strcmp(d[1].hex, hex) && d[0].n_states == 2 && d[1].n_states == 2,
	   "seen: the second names both by their records, with their states");
	free(d[0].states);
	free(d[1].states);
	ok(fg_store_digest_files_ex(st, paths, 2, 1, 64, 0, d, &err) == 0 && !d[0].by_seen && !d[1].by_seen,
	   "seen: not without FG_STORE_DIGEST_SEEN");
	free(d[0].states);
	free(d[1].states);
	/* gc: the blob goes (no roots); b's record and its states stay while b
	 * holds; c's goes with c, a changed file's with its change */
	f = fopen(c.data, "a");
	if (f) {
		fputc('x', f);
		fclose(f);
	}
	memset(&rep, 0, sizeof(rep));
	fg_buf_reset(&rec);
	fg_buf_printf(&rec, NULL, "%s/seen", fg_store_root(st));
	ok(fg_store_gc(&rep, st, NULL, 0, 0, NULL, NULL, &err) == 0 && count_files(rec.data) == 1 &&
		   seen_of(st, b.data, got) == 1 && !fg_store_has(st, hex),
	   "seen: gc keeps the record of an unchanged file (a path with spaces), drops a changed one's (%s)", err.msg);
	fg_buf_reset(&rec);
	fg_buf_printf(&rec, NULL, "%s/states/%s", fg_store_root(st), hex);
	ok(access(rec.data, F_OK) == 0, "seen: gc keeps its states though no blob has them");
	unlink(b.data);
	fg_buf_reset(&rec);
	fg_buf_printf(&rec, NULL, "%s/seen", fg_store_root(st));
	ok(fg_store_gc(&rep, st, NULL, 0, 0, NULL, NULL, &err) == 0 && count_files(rec.data) == 0,
	   "seen: gc drops the record of a file that is gone");
	fg_buf_reset(&rec);
	fg_buf_printf(&rec, NULL, "%s/states/%s", fg_store_root(st), hex);
	ok(access(rec.data, F_OK) != 0, "seen: and then its states");
	unlink(a.data);
	unlink(c.data);
	fg_buf_release(&a);
	fg_buf_release(&b);
	fg_buf_release(&c);
	fg_buf_release(&rec);
}

int main(void)
{
	struct fg_store *st = NULL;
	struct fg_err err = { 0, "" };
	char cmd[600];

	snprintf(top, sizeof(top), "%s/fgstore.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(top))
		return 1;
	test_root();
	snprintf(cmd, sizeof(cmd), "%s/store", top);
	ok(fg_store_open(&st, cmd, &err) == 0, "open creates the layout (%s)", err.msg);
	if (st) {
		test_commit(st);
		test_concurrent(st);
		test_locks(st);
		test_materialize(st);
		test_cross_device(st);
		test_verify_gc(st);
		test_stamps(st);
		test_states(st);
		test_seen(st);
	}
	test_verify_pairs();
	fg_store_free(st);
	snprintf(cmd, sizeof(cmd), "chmod -R u+w '%s' && rm -rf '%s'", top, top);
	if (system(cmd))
		printf("# cleanup failed\n");
	return tap_done();
}
