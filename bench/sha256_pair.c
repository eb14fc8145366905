/* sha256_pair.c - the hash alone, in memory, per CPU-second of this thread:
 * OpenSSL's EVP single stream (what fg_sha256_new runs), our SHA-NI code on
 * one stream, and two streams through fg_sha256_pair_update (aggregate
 * bytes). Two buffers of FG_BENCH_MB MiB (default 64) of xorshift bytes,
 * each figure the median of FG_BENCH_REPS (default 7) passes. bench/store.sh
 * builds and runs it beside the store figures:
 *   cc -O2 -I. -Ilib bench/sha256_pair.c build/libfg.a -lcrypto -lpthread -lm */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/sha256.h"

#define BENCH_NAME "sha256_pair"

static double cpu_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int env_int(const char *name, int def)
{
	const char *s = getenv(name);
	char *end = NULL;
	long v;

	if (!s || !*s)
		return def;
	v = strtol(s, &end, 10);
	return *end || v < 1 || v > 4096 ? def : (int)v;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void fail(const struct fg_err *err)
{
	fprintf(stderr, "%s: %s\n", BENCH_NAME, err->msg);
	exit(1);
}

int main(void)
{
	size_t mb = (size_t)env_int("FG_BENCH_MB", 64), n = mb << 20, i;
	int reps = env_int("FG_BENCH_REPS", 7), r, kind;
	uint8_t *a = malloc(n), *b = malloc(n), d[FG_SHA256_LEN];
	double t[3][64];
	uint64_t s = 0x9e3779b97f4a7c15ull;
	struct fg_err err;
	static const char *const names[3] = {
		"OpenSSL EVP, one stream", "ours (SHA-NI), one stream", "ours, two streams paired"
	};

	memset(&err, 0, sizeof(err));
	if (!a || !b || reps > 64) {
		fprintf(stderr, "%s: out of memory or FG_BENCH_REPS over 64\n", BENCH_NAME);
		return 1;
	}
	for (i = 0; i < n; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		a[i] = (uint8_t)(s >> 32);
		b[i] = (uint8_t)(s >> 40);
	}
	if (!fg_sha256_ni_available()) {
		printf("no SHA-NI here (or FG_SHA256_X2=0): only OpenSSL is measured\n");
	}
	for (r = 0; r < reps; r++) {
		for (kind = 0; kind < 3; kind++) {
			struct fg_sha256 *h = NULL, *h2 = NULL;
			double t0;

			if (kind > 0 && !fg_sha256_ni_available()) {
				t[kind][r] = 0;
				continue;
			}
			if ((kind == 0 ? fg_sha256_new(&h, &err) : fg_sha256_new_x2(&h, &err)) ||
			    (kind == 2 && fg_sha256_new_x2(&h2, &err)))
				fail(&err);
			t0 = cpu_now();
			if (kind < 2) {
				/* both buffers through one stream: the same bytes as a pair */
				if (fg_sha256_update(h, a, n, &err) || fg_sha256_final(h, d, &err) ||
				    fg_sha256_update(h, b, n, &err) || fg_sha256_final(h, d, &err))
					fail(&err);
			} else if (fg_sha256_pair_update(h, a, n, h2, b, n, &err) ||
				   fg_sha256_final(h, d, &err) || fg_sha256_final(h2, d, &err)) {
				fail(&err);
			}
			t[kind][r] = cpu_now() - t0;
			fg_sha256_free(h);
			fg_sha256_free(h2);
		}
	}
	printf("sha256 in memory, 2 x %zu MiB, median of %d, GB per CPU-second of the thread:\n", mb,
	       reps);
	for (kind = 0; kind < 3; kind++) {
		double med;

		qsort(t[kind], (size_t)reps, sizeof(double), cmp_d);
		med = t[kind][reps / 2];
		if (med > 0)
			printf("  %-28s %6.2f GB/s\n", names[kind], 2.0 * (double)n / med / 1e9);
	}
	free(a);
	free(b);
	return 0;
}
