/* gpu_test.h - the start the GPU kernel suites share: a context on the GPU,
 * or, where none can be made, a check that the failure is a clean error and a
 * skip (FG_REQUIRE_CUDA=1 turns the skip into a failure). Include after
 * tap.h and kernels/fg_kernels.h. */
#ifndef FG_GPU_TEST_H
#define FG_GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
