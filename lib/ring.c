/* ring.c - bounded in-order work queue with one consumer thread (ring.h). */
#include "ring.h"

#include <pthread.h>
#include <stdlib.h>

struct fg_ring {
	pthread_t th;
	pthread_mutex_t m;
	pthread_cond_t cv_work, cv_done;
	struct fg_ring_item *q;
	size_t slots;
	uint64_t queued, done; /* pieces numbered 1..queued; 1..done are done */
	int stop;
	int rc;                /* first error; set by the thread */
	struct fg_err err;
	fg_ring_fn fn;
	void *ctx;
};

static void *ring_main(void *arg)
{
	struct fg_ring *q = arg;

	pthread_mutex_lock(&q->m);
	for (;;) {
		struct fg_ring_item it;
		int rc;

		while (q->done == q->queued && !q->stop)
			pthread_cond_wait(&q->cv_work, &q->m);
		if (q->done == q->queued)
			break;
		it = q->q[q->done % q->slots];
		rc = q->rc;
		pthread_mutex_unlock(&q->m);
		if (!rc)
			rc = q->fn(q->ctx, &it, &q->err);
		pthread_mutex_lock(&q->m);
		if (rc && !q->rc)
			q->rc = rc;
		q->done++;
		pthread_cond_broadcast(&q->cv_done);
	}
	pthread_mutex_unlock(&q->m);
	return NULL;
}

int fg_ring_new(struct fg_ring **out, size_t slots, fg_ring_fn fn, void *ctx, struct fg_err *err)
{
	struct fg_ring *q;

	*out = NULL;
	if (slots < 1 || slots > 1024)
		return fg_err_set(err, FG_EINVAL, "ring of %zu slots", slots);
	q = calloc(1, sizeof(*q));
	if (!q || !(q->q = calloc(slots, sizeof(*q->q)))) {
		free(q);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	q->slots = slots;
	q->fn = fn;
	q->ctx = ctx;
	pthread_mutex_init(&q->m, NULL);
	pthread_cond_init(&q->cv_work, NULL);
	pthread_cond_init(&q->cv_done, NULL);
	if (pthread_create(&q->th, NULL, ring_main, q)) {
		pthread_mutex_destroy(&q->m);
		pthread_cond_destroy(&q->cv_work);
		pthread_cond_destroy(&q->cv_done);
		free(q->q);
		free(q);
		return fg_err_set(err, FG_ENOMEM, "cannot start a thread");
	}
	*out = q;
	return 0;
}

int fg_ring_put(struct fg_ring *q, const struct fg_ring_item *it, uint64_t *seq,
		struct fg_err *err)
{
	int rc;

	pthread_mutex_lock(&q->m);
	while (q->queued - q->done == q->slots && !q->rc)
		pthread_cond_wait(&q->cv_done, &q->m);
	rc = q->rc;
	if (!rc) {
		q->q[q->queued % q->slots] = *it;
		q->queued++;
		if (seq)
			*seq = q->queued;
		pthread_cond_signal(&q->cv_work);
	} else if (err) {
		*err = q->err;
	}
	pthread_mutex_unlock(&q->m);
	return rc;
}

uint64_t fg_ring_done(struct fg_ring *q)
{
	uint64_t d;

	pthread_mutex_lock(&q->m);
	d = q->done;
	pthread_mutex_unlock(&q->m);
	return d;
}

uint64_t fg_ring_last(const struct fg_ring *q)
{
	return q->queued; /* written only by the caller's own thread */
}

int fg_ring_wait(struct fg_ring *q, uint64_t seq, struct fg_err *err)
{
	int rc;

	pthread_mutex_lock(&q->m);
	while (q->done < seq && q->done < q->queued)
		pthread_cond_wait(&q->cv_done, &q->m);
	rc = q->rc;
	if (rc && err)
		*err = q->err;
	pthread_mutex_unlock(&q->m);
	return rc;
}

void fg_ring_free(struct fg_ring *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->m);
	q->stop = 1;
	pthread_cond_signal(&q->cv_work);
	pthread_mutex_unlock(&q->m);
	pthread_join(q->th, NULL);
	pthread_mutex_destroy(&q->m);
	pthread_cond_destroy(&q->cv_work);
	pthread_cond_destroy(&q->cv_done);
	free(q->q);
	free(q);
}
