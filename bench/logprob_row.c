/* logprob_row.c - what one row of log-probabilities costs the server on the
 * CPU: fg_engine_row_logprobs (the maximum, rank and top k in one pass; expf
 * summed in double in the other) against the form it replaced (exp in
 * double, a pass each for the maximum, the sum, the rank and the top k),
 * over FG_BENCH_VOCAB (default 262144) logits in the softcapped range (30
 * tanh of uniform noise), k = 5, best of FG_BENCH_REPS (default 30) each,
 * alternated. Checks they agree. Build and run:
 *   make build/bench/logprob_row && build/bench/logprob_row */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "buf.h"
#include "engine/engine.h"

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* the earlier form: exp in double, one pass per quantity */
static void row_double(const float *row, int nv, int32_t id, int k, double *lp, struct fg_engine_alt *top,
		       int32_t *rank)
{
	double mx = -INFINITY, sum = 0, lse;
	int v, n = 0, a, above = 0;

	for (v = 0; v < nv; v++)
		if (row[v] > mx)
			mx = row[v];
	for (v = 0; v < nv; v++)
		sum += exp((double)row[v] - mx);
	lse = mx + log(sum);
	*lp = (double)row[id] - lse;
	for (v = 0; v < nv; v++)
		above += row[v] > row[id];
	*rank = above + 1;
	for (v = 0; v < nv; v++) {
		float x = row[v];

		if (n == k && !(x > top[k - 1].lp))
			continue;
		a = n < k ? n++ : k - 1;
		while (a > 0 && x > top[a - 1].lp) {
			top[a] = top[a - 1];
			a--;
		}
		top[a].id = v;
		top[a].lp = x;
	}
	for (a = 0; a < n; a++)
		top[a].lp = (float)((double)top[a].lp - lse);
}

int main(void)
{
	const char *ev = getenv("FG_BENCH_VOCAB"), *er = getenv("FG_BENCH_REPS");
	int nv = 262144, reps = 30, r, a;
	float *row, lp = 0;
	struct fg_engine_alt t1[5], t2[5];
	double best_old = 1e9, best_new = 1e9, lpd = 0;
	int32_t k1 = 0, k2 = 0, id = nv / 3;
	unsigned x = 12345;

	if ((ev && fg_parse_int(ev, 16, 1 << 28, &nv)) || (er && fg_parse_int(er, 1, 100000, &reps))) {
		fprintf(stderr, "logprob_row: FG_BENCH_VOCAB wants 16..2^28, FG_BENCH_REPS 1..100000\n");
		return 2;
	}
	if (!(row = malloc((size_t)nv * sizeof(*row))))
		return 1;
	for (r = 0; r < nv; r++) {
		x = x * 1103515245u + 12345u;
		row[r] = 30.0f * tanhf(((float)(x >> 8) / 16777216.0f - 0.5f) * 4.0f);
	}
	for (r = 0; r < reps; r++) {
		double t0 = now_s(), dt;

		row_double(row, nv, id, 5, &lpd, t1, &k1);
		dt = now_s() - t0;
		best_old = dt < best_old ? dt : best_old;
		t0 = now_s();
		fg_engine_row_logprobs(row, nv, id, 5, &lp, t2, &k2);
		dt = now_s() - t0;
		best_new = dt < best_new ? dt : best_new;
	}
	printf("logprob_row: %d logits, k 5, best of %d\n", nv, reps);
	printf("exp in double, a pass each   %.3f ms\n", best_old * 1e3);
	printf("fg_engine_row_logprobs       %.3f ms\n", best_new * 1e3);
	printf("ratio %.2fx; log-probability %.9g vs %.9g, rank %d vs %d\n", best_old / best_new, lpd, (double)lp,
	       (int)k1, (int)k2);
	for (a = 0; a < 5; a++)
		if (t1[a].id != t2[a].id || fabs((double)t1[a].lp - t2[a].lp) > 1e-5)
			return printf("top %d differs\n", a), 1;
	return fabs(lpd - lp) > 1e-5 || k1 != k2;
}
