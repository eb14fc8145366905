/* workdir_test.h - a scratch folder for a unit test (test_tarball,
 * test_tarlanes): work_begin makes $TMPDIR/<prefix>.XXXXXX, at() names a
 * path in it, work_end removes it. */
#ifndef FG_WORKDIR_TEST_H
#define FG_WORKDIR_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fsutil.h"

static char work[256];

/* work/rel, in one of 8 rotating buffers (so a call may take several) */
static const char *at(const char *rel)
{
	static char paths[8][512];
	static int next;
	char *p = paths[next++ % 8];

	snprintf(p, 512, "%s/%s", work, rel);
	return p;
}

/* 0, or -1 after printing a failed test line */
static int work_begin(const char *prefix)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(work, sizeof(work), "%s/%s.XXXXXX", tmp ? tmp : "/tmp", prefix);
	if (!mkdtemp(work)) {
		printf("not ok 1 - mkdtemp\n");
		return -1;
	}
	return 0;
}

static void work_end(void)
{
	fg_rm_tree(work);
	if (access(work, F_OK) == 0)
		printf("# could not remove %s\n", work);
}

#endif
