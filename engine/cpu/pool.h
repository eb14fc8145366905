/* pool.h - a fixed set of worker threads that split a range of items in a
 * fixed way: with n workers, worker w always gets items
 * [count * w / n, count * (w + 1) / n). Which thread computes an item never
 * changes what is computed, so results do not depend on the thread count.
 * The calling thread is worker 0. */
#ifndef FG_CPU_POOL_H
#define FG_CPU_POOL_H

#include "err.h"

struct fg_pool;

/* fn(ctx, begin, end, worker) handles items [begin, end) on worker. */
typedef void (*fg_pool_fn)(void *ctx, int begin, int end, int worker);

/* n workers in all (n - 1 threads are started); n < 1 means 1. */
int fg_pool_new(struct fg_pool **out, int n, struct fg_err *err);
void fg_pool_free(struct fg_pool *p);
int fg_pool_size(const struct fg_pool *p);
/* Runs fn over [0, count) and returns when every worker is done. */
void fg_pool_run(struct fg_pool *p, int count, fg_pool_fn fn, void *ctx);

#endif
