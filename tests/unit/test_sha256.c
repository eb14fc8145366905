/* test_sha256.c - the whole-file reader against one-shot digests: sizes
 * around the O_DIRECT threshold and piece size, plain and direct, a reader
 * reused across files, errors named. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256.h"
#include "tap.h"

static char dir[] = "/tmp/fgtest-sha256.XXXXXX";

static char *make_file(const char *name, size_t len, unsigned seed, uint8_t want[32])
{
	static char path[512];
	unsigned char *b = malloc(len ? len : 1);
	size_t i;
	int fd;

	for (i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		b[i] = (unsigned char)(seed >> 16);
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, b, len) != (ssize_t)len)
		printf("# cannot write %s\n", path);
	close(fd);
	fg_sha256_mem(b, len, want, NULL);
	free(b);
	return path;
}

int main(void)
{
	static const size_t sizes[] = { 0, 1, 4095, 4097, (1 << 20) - 1, 1 << 20, (2 << 20) + 1,
					(8 << 20), (9 << 20) + 12345 };
	struct fg_sha256_reader *r = NULL;
	struct fg_err err;
	size_t k;
	int direct;

	memset(&err, 0, sizeof(err));
	if (!mkdtemp(dir))
		return 1;
	ok(!fg_sha256_reader_new(&r, &err), "reader made");
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint8_t want[32], got[32];
		char name[32];
		char *p;

		snprintf(name, sizeof(name), "f%zu", sizes[k]);
		p = make_file(name, sizes[k], (unsigned)k + 1, want);
		for (direct = 0; direct < 2; direct++) {
			unsigned long long size = 7;
			struct stat st;
			int rc = fg_sha256_reader_file(r, p, direct ? FG_SHA256_DIRECT : 0, got, &size,
						       &st, &err);

			ok(!rc && !memcmp(got, want, 32) && size == sizes[k] &&
				   (unsigned long long)st.st_size == sizes[k],
			   "%zu bytes, %s: digest and size", sizes[k], direct ? "direct" : "plain");
			if (!direct || sizes[k] < FG_SHA256_DIRECT_MIN)
				is_int(fg_sha256_reader_last_mode(r), 0, "%zu bytes, %s: plain reads",
				       sizes[k], direct ? "direct" : "plain");
			else
				ok(fg_sha256_reader_last_mode(r) >= 0,
				   "%zu bytes, direct: read in mode %d (1 AIO, 2 sync, 0 refused)", sizes[k],
				   fg_sha256_reader_last_mode(r));
		}
		unlink(p);
	}
	{
		uint8_t d[32];
		char p[512], l[512];

		snprintf(p, sizeof(p), "%s/missing", dir);
		is_int(fg_sha256_reader_file(r, p, FG_SHA256_DIRECT, d, NULL, NULL, &err), FG_ENOTFOUND,
		       "missing file: FG_ENOTFOUND");
		snprintf(p, sizeof(p), "%s/fifo", dir);
		mkfifo(p, 0644);
		is_int(fg_sha256_reader_file(r, p, FG_SHA256_REGULAR, d, NULL, NULL, &err), FG_EINVAL,
		       "FIFO with FG_SHA256_REGULAR: refused at once");
		unlink(p);
		make_file("target", 10, 9, d);
		snprintf(p, sizeof(p), "%s/target", dir);
		snprintf(l, sizeof(l), "%s/link", dir);
		ok(!symlink(p, l), "symlink made");
		is_int(fg_sha256_reader_file(r, l, FG_SHA256_REGULAR | FG_SHA256_DIRECT, d, NULL, NULL,
					     &err),
		       FG_EINVAL, "symlink with FG_SHA256_REGULAR: refused");
		ok(strstr(err.msg, "symlink") != NULL, "and the message says so: %s", err.msg);
		ok(!fg_sha256_reader_file(r, l, 0, d, NULL, NULL, &err), "followed without it");
		unlink(l);
		unlink(p);
	}
	fg_sha256_reader_free(r);
	fg_sha256_reader_free(NULL);
	rmdir(dir);
	return tap_done();
}
