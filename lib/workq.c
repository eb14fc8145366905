/* workq.c - N items on K threads, first failure in item order wins,
 * results reported in item order (see workq.h). */
#include "workq.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 64

struct queue {
	size_t n;
	fg_workq_work_fn work;
	fg_workq_done_fn done;
	void *ctx;
	pthread_mutex_t mu;
	size_t next;        /* next item to hand out */
	size_t reported;    /* items 0..reported-1 went through done */
	size_t fail_at;     /* lowest failing item; n when none */
	unsigned char *fin; /* per item: finished without error */
	int rc;
	struct fg_err err;
};

struct worker {
	struct queue *q;
	int thread;
};

/* Records item's outcome and reports what is now complete in order. Called
 * with the lock held. */
static void finish_item(struct queue *q, size_t item, int rc, const struct fg_err *e)
{
	if (rc) {
		if (item < q->fail_at) {
			q->fail_at = item;
			q->rc = rc;
			q->err = *e;
		}
		return;
	}
	q->fin[item] = 1;
	while (q->reported < q->fail_at && q->reported < q->n && q->fin[q->reported]) {
		if (q->done) {
			struct fg_err de;
			int drc;

			memset(&de, 0, sizeof(de));
			drc = q->done(q->ctx, q->reported, &de);
			if (drc) {
				q->fail_at = q->reported;
				q->rc = drc;
				q->err = de;
				break;
			}
		}
		q->reported++;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct queue *q = w->q;

	for (;;) {
		struct fg_err e;
		size_t item;
		int rc;

		pthread_mutex_lock(&q->mu);
		if (q->next >= q->n || q->fail_at < q->n) {
			pthread_mutex_unlock(&q->mu);
			return NULL;
		}
		item = q->next++;
		pthread_mutex_unlock(&q->mu);
		memset(&e, 0, sizeof(e));
		rc = q->work(q->ctx, item, w->thread, &e);
		if (rc && !e.code)
			e.code = rc;
		pthread_mutex_lock(&q->mu);
		finish_item(q, item, rc, &e);
		pthread_mutex_unlock(&q->mu);
	}
}

int fg_workq_run(size_t n, int threads, fg_workq_work_fn work, fg_workq_done_fn done, void *ctx,
		 struct fg_err *err)
{
	pthread_t th[MAX_THREADS];
	struct worker w[MAX_THREADS];
	struct queue q;
	int i, started = 0;

	if (!n)
		return 0;
	if (threads < 1)
		threads = 1;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	if ((size_t)threads > n)
		threads = (int)n;
	memset(&q, 0, sizeof(q));
	q.n = n;
	q.work = work;
	q.done = done;
	q.ctx = ctx;
	q.fail_at = n;
	q.fin = calloc(n, 1);
	if (!q.fin)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	pthread_mutex_init(&q.mu, NULL);
	for (i = 0; i < threads; i++) {
		w[i].q = &q;
		w[i].thread = i;
	}
	/* thread numbers stay dense: a thread that cannot start leaves its
	 * share to the others */
	for (i = 1; i < threads; i++)
		if (!pthread_create(&th[started], NULL, worker_main, &w[started + 1]))
			started++;
	worker_main(&w[0]);
	for (i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&q.mu);
	free(q.fin);
	if (q.fail_at < n) {
		if (err)
			*err = q.err;
		return q.rc;
	}
	return 0;
}

struct sized {
	unsigned long long size;
	size_t i;
};

static int cmp_sized(const void *x, const void *y)
{
	const struct sized *a = x, *b = y;

	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

int fg_workq_order_by_size(size_t *order, const unsigned long long *size, size_t n,
			   struct fg_err *err)
{
	struct sized *sz = malloc((n ? n : 1) * sizeof(*sz));
	size_t k;

	if (!sz)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (k = 0; k < n; k++) {
		sz[k].size = size[k];
		sz[k].i = k;
	}
	qsort(sz, n, sizeof(*sz), cmp_sized);
	for (k = 0; k < n; k++)
		order[k] = sz[k].i;
	free(sz);
	return 0;
}

int fg_workq_cpus(int max)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > max ? max : (int)n;
}
