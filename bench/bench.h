/* bench.h - what the GPU benchmark drivers (bench/<name>.c, one file each)
 * share: the error they fail on, a fatal check, xorshift numbers, medians and
 * integer settings from the environment. Define BENCH_NAME (the driver's
 * name, for messages) before including it. */
#ifndef FG_BENCH_H
#define FG_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lib/err.h"

static struct fg_err err;

/* Exits with BENCH_NAME and err's message when call returns non-zero. */
#define CK(call)                                                        \
	do {                                                            \
		if (call) {                                             \
			fprintf(stderr, "%s: %s\n", BENCH_NAME, err.msg); \
			exit(1);                                        \
		}                                                       \
	} while (0)

static uint64_t bench_seed = 0x9e3779b97f4a7c15ull;

/* xorshift64, the high bits */
static inline uint32_t rnd(void)
{
	bench_seed ^= bench_seed << 13, bench_seed ^= bench_seed >> 7, bench_seed ^= bench_seed << 17;
	return (uint32_t)(bench_seed >> 16);
}

static inline int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sorts v and returns its middle element. */
static inline double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_d);
	return v[n / 2];
}

/* The integer in environment variable name, or def when it is unset, not a
 * whole number, or outside [lo, hi]. */
/* Seconds on the monotonic clock. */
static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline int bench_env_int(const char *name, int def, int lo, int hi)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return def;
	v = strtol(s, &end, 10);
	return *end || v < lo || v > hi ? def : (int)v;
}

#endif
