/* replay.c - runs a libFuzzer target over files or folders of inputs without
 * libFuzzer, so `make test` replays every corpus under the normal build. Each
 * input is also fed split at every prefix length up to 64 bytes. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count;

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;
	size_t i;

	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	for (i = 0; i < (size_t)n && i < 64; i++) {
		uint8_t *p = malloc(i ? i : 1);

		if (!p)
			break;
		memcpy(p, buf, i);
		LLVMFuzzerTestOneInput(p, i); /* exact-size copy lets ASan see overreads */
		free(p);
	}
	free(buf);
	count++;
	return 0;
}

static int run_path(const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (stat(path, &st))
		return -1;
	if (!S_ISDIR(st.st_mode))
		return run_file(path);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char sub[4096];

		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		if (run_path(sub))
			rc = -1;
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	int i, bad = 0;

	for (i = 1; i < argc; i++)
		if (run_path(argv[i])) {
			printf("not ok %d - cannot read %s\n", i, argv[i]);
			bad = 1;
		}
	if (!bad)
		printf("ok 1 - replayed %d inputs without a crash\n", count);
	return bad;
}
