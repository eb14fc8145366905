/* test_workq.c - the work queue: every item once, done() in item order for
 * any thread count, the lowest failing item wins and nothing is reported
 * from it on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "workq.h"

#define N 200

struct ctx {
	int runs[N];
	size_t order[N];
	size_t n_done;
	int fail_a, fail_b; /* items whose work fails (-1: none) */
	int done_fail;      /* item whose done fails (-1: none) */
	int max_thread;
};

static int work(void *arg, size_t i, int t, struct fg_err *err)
{
	struct ctx *c = arg;

	__atomic_add_fetch(&c->runs[i], 1, __ATOMIC_RELAXED);
	if (t > __atomic_load_n(&c->max_thread, __ATOMIC_RELAXED))
		__atomic_store_n(&c->max_thread, t, __ATOMIC_RELAXED);
	if (i % 7 == 3)
		usleep(200); /* finish out of order */
	if ((int)i == c->fail_a || (int)i == c->fail_b)
		return fg_err_set(err, FG_EIO, "item %zu failed", i);
	return 0;
}

static int done(void *arg, size_t i, struct fg_err *err)
{
	struct ctx *c = arg;

	if ((int)i == c->done_fail)
		return fg_err_set(err, FG_EHASH, "done %zu refused", i);
	c->order[c->n_done++] = i;
	return 0;
}

static int in_order(const struct ctx *c, size_t upto)
{
	size_t i;

	if (c->n_done != upto)
		return 0;
	for (i = 0; i < upto; i++)
		if (c->order[i] != i)
			return 0;
	return 1;
}

int main(void)
{
	static const int threads[] = { 1, 2, 4, 9 };
	struct fg_err err;
	size_t k, i;

	memset(&err, 0, sizeof(err));
	is_int(fg_workq_run(0, 4, work, done, NULL, &err), 0, "no items: nothing to do");
	for (k = 0; k < sizeof(threads) / sizeof(threads[0]); k++) {
		struct ctx *c = calloc(1, sizeof(*c));
		int all_once = 1, rc;

		c->fail_a = c->fail_b = c->done_fail = -1;
		rc = fg_workq_run(N, threads[k], work, done, c, &err);
		for (i = 0; i < N; i++)
			all_once &= c->runs[i] == 1;
		is_int(rc, 0, "%d threads: no failure", threads[k]);
		ok(all_once, "%d threads: every item worked on once", threads[k]);
		ok(in_order(c, N), "%d threads: done() saw 0..%d in order", threads[k], N - 1);
		ok(c->max_thread < threads[k], "%d threads: thread numbers below %d", threads[k],
		   threads[k]);

		memset(c, 0, sizeof(*c));
		c->fail_a = 137;
		c->fail_b = 41;
		c->done_fail = -1;
		memset(&err, 0, sizeof(err));
		rc = fg_workq_run(N, threads[k], work, done, c, &err);
		is_int(rc, FG_EIO, "%d threads: a failure is returned", threads[k]);
		is_str(err.msg, "item 41 failed", "%d threads: the lowest failing item wins",
		       threads[k]);
		ok(in_order(c, 41), "%d threads: done() for 0..40 only, in order", threads[k]);

		memset(c, 0, sizeof(*c));
		c->fail_a = c->fail_b = -1;
		c->done_fail = 17;
		memset(&err, 0, sizeof(err));
		rc = fg_workq_run(N, threads[k], work, done, c, &err);
		is_int(rc, FG_EHASH, "%d threads: done() failing stops the run", threads[k]);
		ok(in_order(c, 17), "%d threads: nothing reported after it", threads[k]);
		free(c);
	}
	{
		/* the order that pairs files of like size: by size, ties by index */
		unsigned long long sz[6] = { 50, 10, 50, 0, 7000000000ULL, 10 };
		size_t order[6], want[6] = { 3, 1, 5, 0, 2, 4 }, q;
		int same = 1;

		memset(&err, 0, sizeof(err));
		is_int(fg_workq_order_by_size(order, sz, 6, &err), 0, "order_by_size: ok");
		for (q = 0; q < 6; q++)
			same &= order[q] == want[q];
		ok(same, "order_by_size: sizes ascending, equal sizes in index order");
		is_int(fg_workq_order_by_size(order, sz, 0, &err), 0, "order_by_size: no items");
	}
	return tap_done();
}
