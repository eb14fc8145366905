/* gpu_test.h - what the GPU kernel suites share: their context and error,
 * random data (xorshift from GPU_TEST_SEED, which a suite may define before
 * including this), device buffers, and the start: a context on the GPU, or,
 * where none can be made, a check that the failure is a clean error and a
 * skip (FG_REQUIRE_CUDA=1 turns the skip into a failure). Include after
 * tap.h and kernels/fg_kernels.h. */
#ifndef FG_GPU_TEST_H
#define FG_GPU_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_twin.h"

#ifndef GPU_TEST_SEED
#define GPU_TEST_SEED 0x9E3779B97F4A7C15ull
#endif

static uint64_t rng = GPU_TEST_SEED;
static struct fg_kctx *ctx;
static struct fg_err gerr;

static inline uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static inline float frand(float lo, float hi)
{
	return lo + (hi - lo) * (float)(rnd() & 0xffffff) / (float)0x1000000;
}

static inline float *fvec(size_t n, float lo, float hi)
{
	float *v = malloc(sizeof(float) * (n ? n : 1));

	for (size_t i = 0; i < n; i++)
		v[i] = frand(lo, hi);
	return v;
}

static inline uint16_t *bvec(size_t n, float lo, float hi)
{
	uint16_t *v = malloc(2 * (n ? n : 1));

	for (size_t i = 0; i < n; i++)
		v[i] = fg_ref_to_bf16(frand(lo, hi));
	return v;
}

/* A random standard-format INT4 matrix (all 16 nibble values occur). */
static inline void int4_rand(int32_t **packed, uint16_t **scale, int n, int k, int g)
{
	size_t words = (size_t)n * (k / 8), groups = (size_t)n * ((k + g - 1) / g);

	*packed = malloc(4 * words);
	for (size_t i = 0; i < words; i++)
		(*packed)[i] = (int32_t)rnd() ^ (int32_t)(rnd() << 16);
	*scale = bvec(groups, 0.002f, 0.05f);
}

/* n bytes of device memory holding h's (h NULL: left as allocated); NULL
 * with gerr set on failure. */
static inline void *dput(const void *h, size_t n)
{
	void *d = NULL;

	if (fg_kmem_alloc(ctx, &d, n ? n : 4, &gerr) || (h && n && fg_kmem_upload(ctx, d, h, n, &gerr))) {
		fg_kmem_free(ctx, d);
		return NULL;
	}
	return d;
}

/* Waits for the queued work, then n bytes from the device into h. */
static inline int dget(void *h, const void *d, size_t n)
{
	return fg_kctx_sync(ctx, &gerr) || fg_kmem_download(ctx, h, d, n, &gerr);
}

/* The context, or NULL after the checks above (the caller then ends with
 * tap_done()); `what` names the skipped comparison. */
static struct fg_kctx *gpu_test_open(const char *what, struct fg_err *err)
{
	struct fg_kctx *c = NULL;
	const char *req = getenv("FG_REQUIRE_CUDA");
	int rc = fg_kctx_new(&c, err);

	if (!rc) {
		printf("# device: %s\n", fg_kctx_device_name(c));
		return c;
	}
	ok((rc == FG_EDEVICE || rc == FG_EUNSUPPORTED) && err->msg[0], "no GPU is a clean error: %s", err->msg);
	if (req && !strcmp(req, "1"))
		ok(0, "FG_REQUIRE_CUDA=1 but no usable GPU: %s", err->msg);
	else
		ok(1, "%s # skip: no CUDA device (%s)", what, err->msg);
	return NULL;
}

#endif
