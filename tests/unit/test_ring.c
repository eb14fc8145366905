/* test_ring.c - lib/ring.h: pieces worked on in order on the ring's thread,
 * waits that free the caller's buffers, the first error stopping the work,
 * and free working through what is still queued. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ring.h"
#include "tap.h"

/* the ring's thread appends each piece's first byte to log; a piece with
 * flags 1 fails */
struct rec {
	char log[4096];
	size_t n;
	int slow; /* microseconds per piece: lets the queue fill */
};

static int record(void *ctx, const struct fg_ring_item *it, struct fg_err *err)
{
	struct rec *r = ctx;

	if (r->slow)
		usleep((useconds_t)r->slow);
	if (it->flags == 1)
		return fg_err_set(err, FG_EIO, "piece %c failed", *(const char *)it->data);
	if (it->len && r->n < sizeof(r->log))
		r->log[r->n++] = *(const char *)it->data;
	if (it->arg)
		*(int *)it->arg += 1;
	return 0;
}

static void test_order(void)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	struct fg_ring *q = NULL;
	struct rec r;
	struct fg_err err;
	uint64_t seq = 0, last = 0;
	int marks = 0, rc = 0;
	size_t i;

	memset(&r, 0, sizeof(r));
	r.slow = 200;
	ok(fg_ring_new(&q, 4, record, &r, &err) == 0, "ring: start with 4 slots");
	is_int(fg_ring_last(q), 0, "ring: nothing queued yet");
	for (i = 0; i < strlen(abc); i++) {
		struct fg_ring_item it = { abc + i, 1, i % 10 == 9 ? &marks : NULL, 0 };

		rc |= fg_ring_put(q, &it, &seq, &err);
		ok(seq == last + 1, "ring: piece %zu numbered %llu", i, (unsigned long long)seq);
		last = seq;
	}
	ok(!rc, "ring: 36 pieces through 4 slots");
	is_int(fg_ring_last(q), 36, "ring: last number");
	ok(fg_ring_wait(q, 36, &err) == 0, "ring: wait for all");
	is_int((long long)r.n, 36, "ring: every piece worked on once waited for");
	ok(r.n == 36 && !memcmp(r.log, abc, 36), "ring: in the order put");
	is_int(marks, 3, "ring: the caller's arg reaches the thread");
	ok(fg_ring_wait(q, 0, &err) == 0 && fg_ring_wait(q, 99, &err) == 0,
	   "ring: waits past the ends return");
	fg_ring_free(q);
	fg_ring_free(NULL);
}

static void test_error(void)
{
	struct fg_ring *q = NULL;
	struct rec r;
	struct fg_err err;
	uint64_t seq = 0;
	const char *s = "abcXdef";
	int i, rc = 0;

	memset(&r, 0, sizeof(r));
	ok(fg_ring_new(&q, 16, record, &r, &err) == 0, "ring error: start");
	for (i = 0; i < 3; i++) {
		struct fg_ring_item it = { s + i, 1, NULL, 0 };

		rc |= fg_ring_put(q, &it, &seq, &err);
	}
	{
		struct fg_ring_item it = { s + 3, 1, NULL, 1 };

		rc |= fg_ring_put(q, &it, &seq, &err);
	}
	ok(!rc, "ring error: pieces queued before the failure is seen");
	memset(&err, 0, sizeof(err));
	is_int(fg_ring_wait(q, seq, &err), FG_EIO, "ring error: wait returns the failure");
	ok(strstr(err.msg, "piece X failed") != NULL, "ring error: with its message (%s)", err.msg);
	{
		struct fg_ring_item it = { s + 4, 1, NULL, 0 };

		memset(&err, 0, sizeof(err));
		is_int(fg_ring_put(q, &it, &seq, &err), FG_EIO, "ring error: later puts refused");
		ok(strstr(err.msg, "piece X failed") != NULL, "ring error: with the first message");
	}
	ok(r.n == 3 && !memcmp(r.log, "abc", 3), "ring error: nothing after the failure worked on");
	fg_ring_free(q);

	ok(fg_ring_new(&q, 0, record, &r, &err) == FG_EINVAL, "ring: 0 slots refused");
	ok(q == NULL, "ring: nothing made");
}

/* free without a wait: what is queued is still worked on first */
static void test_free_drains(void)
{
	static const char s[] = "0123456789";
	struct fg_ring *q = NULL;
	struct rec r;
	struct fg_err err;
	int i, rc = 0;

	memset(&r, 0, sizeof(r));
	r.slow = 500;
	ok(fg_ring_new(&q, 16, record, &r, &err) == 0, "ring free: start");
	for (i = 0; i < 10; i++) {
		struct fg_ring_item it = { s + i, 1, NULL, 0 };

		rc |= fg_ring_put(q, &it, NULL, &err);
	}
	fg_ring_free(q);
	ok(!rc && r.n == 10 && !memcmp(r.log, s, 10), "ring free: every queued piece worked on");
}

int main(void)
{
	test_order();
	test_error();
	test_free_drains();
	return tap_done();
}
