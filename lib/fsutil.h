/* fsutil.h - file helpers: whole-file reads with a bound, atomic writes,
 * mkdir -p, safe relative paths. */
#ifndef FG_FSUTIL_H
#define FG_FSUTIL_H

#include <signal.h>
#include <stddef.h>

#include "buf.h"
#include "err.h"

/* Reads all of path into out (appending), refusing files over max bytes. */
int fg_file_read(const char *path, size_t max, struct fg_buf *out, struct fg_err *err);
/* The same from an open fd, to its end (path only names it in errors); fd
 * stays open. For a file the caller opened itself (O_NOFOLLOW, O_NONBLOCK)
 * and checked with fstat. */
int fg_fd_read(int fd, const char *path, size_t max, struct fg_buf *out, struct fg_err *err);

/* Writes data to path atomically: a temporary file in the same folder,
 * fsync, rename over path, fsync of the folder. Either the old content or the
 * new one is there afterwards, never a mix. mode is e.g. 0644. The
 * temporary file is created O_EXCL|O_NOFOLLOW as "<path>.tmp.<pid>", else
 * (that name taken: another writer's file, a symlink planted there, which
 * is neither followed nor touched) "<path>.tmp.<pid>.<n>"; it is tracked
 * (fg_tmp_track) while it exists. Those of path's earlier writers that a
 * SIGKILL left are removed first (fg_file_sweep_tmps, FG_TMP_GRACE_S). */
int fg_file_write_atomic(const char *path, const void *data, size_t len, int mode,
			 struct fg_err *err);
/* fg_file_write_atomic's temporary file for path, for a writer of its own
 * (pack's bundle): dead writers' leftovers swept first, then a new name
 * beside path ("path.tmp.<pid>[.<n>]") made O_EXCL|O_NOFOLLOW and tracked
 * (fg_tmp_track, signals held in between): its name in tmp, its fd in *fd,
 * the slot to fg_tmp_untrack in *slot. */
int fg_tmp_create(const char *path, int mode, struct fg_buf *tmp, int *fd, int *slot, struct fg_err *err);

/* A command's output path (-o, --record, ...) that exists and is, after
 * links, a character device or a FIFO (/dev/null, /dev/stdout, a named pipe)
 * is written through, never replaced: fg_out_open opens it O_WRONLY (no
 * create, no truncate, no temporary file beside it) into *fd. A block
 * device, socket or folder there is refused in one line naming it. For
 * anything else (a missing path, a regular file, a link to one) *fd is -1:
 * the caller writes it atomically as before. A FIFO's open waits for its
 * reader. A name of this process's own streams (/dev/stdout, /dev/stderr,
 * /dev/fd/N, /proc/self/fd/N) is written through a copy of that descriptor
 * whatever it holds, a regular file included. */
int fg_out_open(const char *path, int *fd, struct fg_err *err);
/* fg_out_open's refusal alone, by stat and without opening anything: for a
 * command to give it before its long work rather than after. */
int fg_out_check(const char *path, struct fg_err *err);
/* 1 when fg_out_open would write path through (one of this process's own
 * streams by name, or, after links, an existing character device or FIFO),
 * else 0: such an output holds nothing to read back (a FIFO's open for
 * reading waits for a writer, /dev/null reads empty), so a command that
 * merges with or compares to an output's earlier content (a lock) takes it
 * as absent there. */
int fg_out_is_stream(const char *path);
/* fsync and close of fg_out_open's fd: fsync's EINVAL, ENOTSUP and EROFS (a
 * device or a pipe has nothing to sync) are no errors. Closes fd always. */
int fg_out_close(int fd, const char *path, struct fg_err *err);
/* fg_file_write_atomic for a command's output: a device or FIFO written
 * through (fg_out_open), anything else atomically. */
int fg_file_write_out(const char *path, const void *data, size_t len, int mode,
		      struct fg_err *err);

/* How old (mtime, seconds) a dead writer's temporary file must be before it
 * is removed: a writer whose pid this machine cannot see (another pid
 * namespace sharing the folder) may still be writing a younger one. */
#define FG_TMP_GRACE_S 60

/* What fg_file_write_atomic leaves behind a SIGKILL, removed: every regular
 * file in folder dir (not below it) named "<base>.tmp.<pid>" or
 * "<base>.tmp.<pid>.<n>" (base NULL: any non-empty name before ".tmp.")
 * whose pid is no live process here (kill(pid, 0) gives ESRCH: a live pid,
 * whoever has it now, keeps its file) and whose mtime is grace_s seconds or
 * more in the past. fg_file_write_atomic does it for its own path before it
 * writes; `store gc` for the store's folders. Returns how many it removed;
 * a folder it cannot read gives 0. */
int fg_file_sweep_tmps(const char *dir, const char *base, int grace_s);
/* The sweep behind it and fg_store_sweep_tmps: files named
 * "<base><tag><pid>" (seq: or "<base><tag><pid>.<n>"), as above. */
int fg_tmp_sweep(const char *dir, const char *tag, const char *base, int seq, int grace_s);
/* The same for folders: each one so named, of a dead pid, whose newest mtime
 * (its own or that of an entry right in it) is grace_s seconds or more in
 * the past, is removed with everything in it. Returns how many. */
int fg_tmp_sweep_dirs(const char *dir, const char *tag, const char *base, int seq, int grace_s);

/* The same for the folders bakes of out (name: its last component) made
 * before that naming, which carry no pid, in out's folder dir: bake int4's
 * ".<name>.fgpack-tmp-XXXXXX" (mkdtemp's six letters or digits) and bake
 * prune-head's "<name>.partial" (only when it holds regular files alone
 * and no "<name>.partial.intoto.json", a finished bake's statement, is
 * beside it). No live fgpack writes such a name any more: each exact name
 * that is a folder (never a link) unchanged for grace_s seconds (its newest
 * mtime, as above) is removed with everything in it. Returns how many. */
int fg_tmp_sweep_old_bake(const char *dir, const char *name, int grace_s);
/* The same for the folders an extraction to dest (fg_tarball_extract; name:
 * dest's last component) made before that naming: mkdtemp's
 * "<name>.partial.XXXXXX" (six letters or digits), in dest's folder dir,
 * each a folder (never a link) unchanged for grace_s seconds. Returns how
 * many it removed. */
int fg_tmp_sweep_old_extract(const char *dir, const char *name, int grace_s);

/* Writes all len bytes to fd, retrying short writes and EINTR; 0 or -1 with
 * errno set. */
int fg_write_all(int fd, const void *data, size_t len);

/* Temporary files that a SIGINT or SIGTERM must not leave behind: the
 * writer tracks each one from its creation until it is renamed or removed,
 * and cmd/'s signal handler calls fg_tmp_remove_all, which unlinks every
 * tracked path and is async-signal-safe. fg_tmp_track copies path (shorter
 * than PATH_MAX) and returns a slot, or -1 when it cannot track it (a
 * bounded table full: that file then stays behind a signal, as before);
 * fg_tmp_untrack accepts -1. Thread-safe. */
int fg_tmp_track(const char *path);
void fg_tmp_untrack(int slot);
void fg_tmp_remove_all(void);
/* A folder tracked the same way: fg_tmp_remove_all removes it and what is in
 * it (up to 8 levels) with system calls only. */
int fg_tmp_track_dir(const char *path);
/* SIGINT, SIGTERM and SIGHUP held in the calling thread (old: its mask
 * before) and let go again: around making a temporary file or folder and
 * tracking it, so that no signal finds it made but not yet tracked. */
void fg_tmp_hold_signals(sigset_t *old);
void fg_tmp_release_signals(const sigset_t *old);

/* What a bake's (and an extraction's) temporary folder is named by:
 * "<folder of out>/.<name of out>" FG_TMP_DIR_TAG "<pid>", else (taken) the
 * same and ".<n>". */
#define FG_TMP_DIR_TAG ".fgpack-tmp."
/* Creates the folder a whole output out is written in before it is renamed
 * to out (beside it: the rename stays on one file system), mode 0755, into
 * tmp (reset first), tracked (fg_tmp_track_dir; *slot, -1 when not) so that
 * a SIGINT, SIGTERM or SIGHUP leaves nothing. Those of out's earlier writers
 * that a SIGKILL left (a dead pid, FG_TMP_GRACE_S) are removed first; a live
 * writer's never; and so are older versions' (fg_tmp_sweep_old_bake). The caller untracks the slot once the folder is renamed
 * or removed. */
int fg_tmp_dir_make(const char *out, struct fg_buf *tmp, int *slot, struct fg_err *err);
/* fg_tmp_dir_make for an extraction to dest: the same name, tracking and
 * sweep of dead pids' folders; the older versions' leftovers it removes are
 * an extraction's own (fg_tmp_sweep_old_extract), never a bake's. */
int fg_tmp_extract_dir_make(const char *dest, struct fg_buf *tmp, int *slot, struct fg_err *err);

/* A private folder of this process in dir (a shared one: $TMPDIR, /tmp),
 * for work that has no output path of its own (exec's, verify's and serve's
 * extracted bundle): "<dir>/<base>-<pid>", else (taken: never followed nor
 * touched) "<dir>/<base>-<pid>.<n>", made mode 0700 into tmp (reset first)
 * and tracked (fg_tmp_track_dir; *slot, -1 when not) so that a SIGINT,
 * SIGTERM or SIGHUP leaves nothing. base is one name component. Dead
 * writers' such folders that a SIGKILL left (a dead pid, unchanged for
 * FG_TMP_GRACE_S) are removed first, a live pid's never, and so are the
 * extraction folders (FG_TMP_DIR_TAG) of dead pids begun in dir under
 * "<base>-..." or "<base>...."; an earlier version's "<base>.XXXXXX"
 * (mkdtemp) carries no pid and is left alone. The caller may remove the
 * folder and make it again under the same name (an extraction renamed to
 * it) while the slot stays tracked; it untracks the slot once the folder is
 * gone or handed over. */
int fg_tmp_pid_dir_make(const char *dir, const char *base, struct fg_buf *tmp, int *slot, struct fg_err *err);

/* mkdir -p with mode for each created level. */
int fg_mkdir_p(const char *path, int mode, struct fg_err *err);

/* Appends the folder holding path to dir: "." for a bare name, "/" for a
 * name in the root. */
int fg_path_dir(const char *path, struct fg_buf *dir, struct fg_err *err);

/* fsync a folder so a rename inside it is durable. */
int fg_fsync_dir(const char *path, struct fg_err *err);

/* True (1) when rel is a safe relative path: not empty, not absolute, no ".."
 * or "." component, no empty component, no backslash, no NUL, no control
 * characters. Used wherever a remote or archived name becomes a local path. */
int fg_path_is_safe_rel(const char *rel);

/* Opens rel, a '/'-separated path below the folder dirfd, following no
 * symbolic link on the way: each folder is opened in turn relative to the
 * last (O_DIRECTORY | O_NOFOLLOW), the file last with oflags | O_NOFOLLOW,
 * so a folder swapped for a link after a walk listed it is not followed
 * (plain openat, which glibc of any age declares). An fd, or -1 with errno
 * (ELOOP: a link on the way, also a folder's, which the kernel calls
 * ENOTDIR; EINVAL: an empty, "." or ".." component) and *bad (may be NULL)
 * the length of rel's prefix that failed: the link's name. */
int fg_openat_beneath(int dirfd, const char *rel, int oflags, size_t *bad);

/* The longest name component (NAME_MAX on Linux file systems) and the
 * longest relative path an archive member or bundle file may have: PATH_MAX
 * (4096 with its NUL) less 256 bytes for the folder it is created in, so
 * that every name a check passes can be created there (docs/formats/
 * bundle.md, "Extraction rules"). */
#define FG_PATH_NAME_MAX 255
#define FG_PATH_REL_MAX 3839

/* 0 when every component of rel fits FG_PATH_NAME_MAX bytes and rel
 * FG_PATH_REL_MAX; else what does not fit, as a phrase for a message
 * ("is longer than 3839 bytes", "has a component of more than 255 bytes";
 * static). */
const char *fg_path_too_long(const char *rel);

/* Joins a and b with one '/', into out (appending). */
int fg_path_join(struct fg_buf *out, const char *a, const char *b, struct fg_err *err);

/* Removes path and everything under it (rm -rf), without following links;
 * best effort, for cleaning up after a failure. Accepts NULL. */
void fg_rm_tree(const char *path);
/* 1 when a and b (stat of the same path at two moments) show the same file,
 * unwritten in between: same device and inode, size, mtime and ctime (a
 * write moves mtime and ctime; a chmod, link, unlink or rename moves ctime). */
struct stat;
int fg_stat_unchanged(const struct stat *a, const struct stat *b);
/* Free bytes available to an unprivileged writer on the file system of path. */
int fg_fs_free_bytes(const char *path, unsigned long long *out, struct fg_err *err);

#endif
