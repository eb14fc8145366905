/* ring.h - a bounded queue of pieces worked on in order by one thread of its
 * own: the caller hands over borrowed pieces and goes on (reading, computing,
 * writing) while the thread works through them.
 *
 * Serves the hashing thread (fg_sha256_pipe, lib/sha256.h) and pack's
 * compressing thread (lib/tarball.c). Pieces are numbered 1, 2, ... in the
 * order put; a piece's bytes are borrowed: they must stay valid and unchanged
 * until fg_ring_wait returns for its number (or a later one). After the first
 * error of fn, later pieces are counted done without being worked on, and
 * every call returns that error.
 *   fg_ring_new(&q, 16, fn, ctx, &err);
 *   fg_ring_put(q, &item, &seq, &err);   // returns at once unless full
 *   fg_ring_wait(q, seq, &err);          // item.data may be reused
 *   fg_ring_free(q);                     // works through what is left */
#ifndef FG_RING_H
#define FG_RING_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct fg_ring_item {
	const void *data; /* borrowed until waited for */
	size_t len;
	void *arg;        /* the caller's (e.g. where a result goes) */
	int flags;        /* the caller's */
};

/* Works on one piece on the ring's thread, without any lock held; returns 0
 * or an FG_E* code with err filled. */
typedef int (*fg_ring_fn)(void *ctx, const struct fg_ring_item *it, struct fg_err *err);

struct fg_ring;

/* Starts the thread; slots (1..1024) pieces may wait at once. FG_ENOMEM
 * when the thread cannot start. */
int fg_ring_new(struct fg_ring **out, size_t slots, fg_ring_fn fn, void *ctx, struct fg_err *err);
/* Queues a copy of *it; *seq (may be NULL) gets its number. Blocks only
 * while every slot is taken. */
int fg_ring_put(struct fg_ring *q, const struct fg_ring_item *it, uint64_t *seq,
		struct fg_err *err);
/* Number of the last piece queued (0 when none); the caller's thread only. */
uint64_t fg_ring_last(const struct fg_ring *q);
/* Number of pieces done so far (1..it are), without waiting. */
uint64_t fg_ring_done(struct fg_ring *q);
/* Waits until every piece numbered up to seq is done (worked on, or skipped
 * after an error), so their bytes are free; returns the first error. */
int fg_ring_wait(struct fg_ring *q, uint64_t seq, struct fg_err *err);
/* Works through what is queued, then stops the thread. Accepts NULL. */
void fg_ring_free(struct fg_ring *q);

#endif
