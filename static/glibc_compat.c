/* glibc_compat.c - the engine binary's stand-ins for the glibc symbols that
 * have no version old enough (static/engine.mk wraps each with --wrap).
 *
 * The self-contained engine must start on older glibc than the one it is
 * built on (docs/formats/bundle.md). Calls that glibc.sym rebinds to an older
 * version need nothing here; these few were added to glibc after 2.17 with no
 * older twin, so they are done through what 2.17 already had: the stat family
 * through __xstat and __fxstatat (what their inline wrappers called before
 * 2.33), getentropy,
 * renameat2 and copy_file_range through the raw system calls, _dl_find_object (2.35, used by
 * the static unwinder) looked up at run time, and __libc_single_threaded (2.32) as 0, "maybe threaded", which only
 * makes libstdc++ use atomics where it could have skipped them. Only the
 * engine build links this file. */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* glibc's "struct stat" version for x86-64 __xstat calls (_STAT_VER_LINUX) */
#define XSTAT_VER 1

int fg_old_xstat(int ver, const char *path, struct stat *st);
int fg_old_lxstat(int ver, const char *path, struct stat *st);
int fg_old_fxstat(int ver, int fd, struct stat *st);
int fg_old_fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
__asm__(".symver fg_old_xstat,__xstat@GLIBC_2.2.5");
__asm__(".symver fg_old_lxstat,__lxstat@GLIBC_2.2.5");
__asm__(".symver fg_old_fxstat,__fxstat@GLIBC_2.2.5");
__asm__(".symver fg_old_fxstatat,__fxstatat@GLIBC_2.4");

int __wrap_stat(const char *path, struct stat *st);
int __wrap_lstat(const char *path, struct stat *st);
int __wrap_fstat(int fd, struct stat *st);
int __wrap_fstatat(int dirfd, const char *path, struct stat *st, int flags);
int __wrap_getentropy(void *buf, size_t len);
int __wrap_renameat2(int olddir, const char *oldpath, int newdir, const char *newpath,
		     unsigned int flags);
int __wrap__dl_find_object(void *pc, void *result);
ssize_t __wrap_copy_file_range(int infd, off_t *inoff, int outfd, off_t *outoff, size_t len,
			       unsigned int flags);

char __wrap___libc_single_threaded = 0;

int __wrap_stat(const char *path, struct stat *st)
{
	return fg_old_xstat(XSTAT_VER, path, st);
}

int __wrap_lstat(const char *path, struct stat *st)
{
	return fg_old_lxstat(XSTAT_VER, path, st);
}

int __wrap_fstat(int fd, struct stat *st)
{
	return fg_old_fxstat(XSTAT_VER, fd, st);
}

int __wrap_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	return fg_old_fxstatat(XSTAT_VER, dirfd, path, st, flags);
}

/* getentropy(3): at most 256 bytes, all or an error; EINTR is retried. */
int __wrap_getentropy(void *buf, size_t len)
{
	unsigned char *p = buf;
	size_t got = 0;

	if (len > 256) {
		errno = EIO;
		return -1;
	}
	while (got < len) {
		long n = syscall(SYS_getrandom, p + got, len - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

int __wrap_renameat2(int olddir, const char *oldpath, int newdir, const char *newpath,
		     unsigned int flags)
{
	return (int)syscall(SYS_renameat2, olddir, oldpath, newdir, newpath, flags);
}

/* copy_file_range (2.27): the system call; a kernel without it says ENOSYS,
 * which the caller (lib/store.c) answers with plain reads and writes. */
ssize_t __wrap_copy_file_range(int infd, off_t *inoff, int outfd, off_t *outoff, size_t len,
			       unsigned int flags)
{
	return (ssize_t)syscall(SYS_copy_file_range, infd, inoff, outfd, outoff, len, flags);
}

/* Where glibc has _dl_find_object (2.35+) this is it; elsewhere -1 ("not
 * found"): the static unwinder then finds no tables, so a C++ exception
 * would end the program instead of being caught. The engine is C; only the
 * static CUDA runtime is C++ (docs/formats/bundle.md states the caveat). */
int __wrap__dl_find_object(void *pc, void *result)
{
	static int (*fn)(void *, void *);
	static int looked;

	if (!looked) {
		*(void **)&fn = dlvsym(RTLD_DEFAULT, "_dl_find_object", "GLIBC_2.35");
		looked = 1;
	}
	return fn ? fn(pc, result) : -1;
}
