/* workq.h - run N independent items on K threads: items are handed out in
 * order, the first failure in item order wins, and results are reported in
 * item order whatever order the threads finish in.
 *
 * Used by `store verify` (one blob per item) and `pack` (one file to hash per
 * item). The calling thread works too, as thread 0; threads 1..K-1 are
 * started for the call and joined before it returns, so per-thread state
 * (a reader with its buffers) can live in an array indexed by thread. */
#ifndef FG_WORKQ_H
#define FG_WORKQ_H

#include <stddef.h>

#include "err.h"

/* Works on item (0..n-1) on thread (0..threads-1); returns 0 or an FG_E*
 * code with err filled. Runs without any lock held. */
typedef int (*fg_workq_work_fn)(void *ctx, size_t item, int thread, struct fg_err *err);
/* Reports item after it and every item before it finished without error;
 * called for 0, 1, 2, ... in order, one at a time (under the queue's lock:
 * it may touch shared counters and lists but should be quick). Nonzero stops
 * the run like a failure of that item. */
typedef int (*fg_workq_done_fn)(void *ctx, size_t item, struct fg_err *err);

/* Runs work on every item (threads is clamped to 1..n; 1 runs everything on
 * the calling thread) and done (may be NULL) in item order. After a failure
 * no further item is started; items already running finish, and done is
 * called for none at or after the failing one. Returns 0, or the code and
 * message of the failure with the lowest item number: with the same failing
 * items the outcome is the same for any thread count. */
int fg_workq_run(size_t n, int threads, fg_workq_work_fn work, fg_workq_done_fn done, void *ctx,
		 struct fg_err *err);

/* The CPUs online, clamped to 1..max: the default thread count of the
 * commands that hash or copy many files at once. */
int fg_workq_cpus(int max);

/* order[0..n-1] gets the indices 0..n-1 sorted by size[] (ties by index):
 * neighbours are the items of most alike size, for the work items that hash
 * two files at once, so their two streams run together as long as possible. */
int fg_workq_order_by_size(size_t *order, const unsigned long long *size, size_t n,
			   struct fg_err *err);

#endif
