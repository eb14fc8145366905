/* pool.c - worker threads for the CPU path (see pool.h). One job at a time:
 * the caller publishes (fn, ctx, count) under the lock, bumps a generation
 * counter, does its own share, then waits until every worker reported. */
#include "engine/cpu/pool.h"

#include <pthread.h>
#include <stdlib.h>

struct worker {
	struct fg_pool *pool;
	int id;
	pthread_t th;
};

struct fg_pool {
	int n;
	struct worker *w;
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	unsigned long gen;
	int pending;
	int quit;
	fg_pool_fn fn;
	void *ctx;
	int count;
};

static void share(struct fg_pool *p, int id)
{
	int b = (int)((long long)p->count * id / p->n);
	int e = (int)((long long)p->count * (id + 1) / p->n);

	if (b < e)
		p->fn(p->ctx, b, e, id);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct fg_pool *p = w->pool;
	unsigned long seen = 0;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->quit && p->gen == seen)
			pthread_cond_wait(&p->go, &p->mu);
		if (p->quit)
			break;
		seen = p->gen;
		pthread_mutex_unlock(&p->mu);
		share(p, w->id);
		pthread_mutex_lock(&p->mu);
		if (--p->pending == 0)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int fg_pool_new(struct fg_pool **out, int n, struct fg_err *err)
{
	struct fg_pool *p;
	int i;

	*out = NULL;
	if (n < 1)
		n = 1;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->w = calloc((size_t)n, sizeof(*p->w)))) {
		free(p);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	p->n = n;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->go, NULL);
	pthread_cond_init(&p->done, NULL);
	for (i = 1; i < n; i++) {
		p->w[i].pool = p;
		p->w[i].id = i;
		if (pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i])) {
			p->n = i; /* the threads started so far are joined by free */
			fg_pool_free(p);
			return fg_err_set(err, FG_ENOMEM, "cannot start worker thread %d", i);
		}
	}
	*out = p;
	return 0;
}

void fg_pool_free(struct fg_pool *p)
{
	int i;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->quit = 1;
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	for (i = 1; i < p->n; i++)
		pthread_join(p->w[i].th, NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->go);
	pthread_cond_destroy(&p->done);
	free(p->w);
	free(p);
}

int fg_pool_size(const struct fg_pool *p)
{
	return p ? p->n : 1;
}

void fg_pool_run(struct fg_pool *p, int count, fg_pool_fn fn, void *ctx)
{
	if (count <= 0)
		return;
	if (p->n == 1 || count == 1) {
		fn(ctx, 0, count, 0);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->ctx = ctx;
	p->count = count;
	p->pending = p->n - 1;
	p->gen++;
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	share(p, 0);
	pthread_mutex_lock(&p->mu);
	while (p->pending > 0)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}
