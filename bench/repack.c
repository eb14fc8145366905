/* repack.c - the load-time repack of INT4 weights into the i8 kernel's layout
 * (fg_int4_i8_repack, what `fgpack run --device cuda` runs for every matrix
 * of an INT4 checkpoint before uploading it), on E4B's matrix shapes: one
 * thread against the default (the CPUs online, at most 16), side by side,
 * medians of FG_BENCH_REPS (default 5) passes, the same bytes checked. Then
 * E4B's layer matrices by arithmetic (42 layers of each shape: o at K 2048
 * in 35 sliding layers and K 4096 in 7 full ones; the PLE projections and
 * the head are not counted: 1.96 of the body's 2.05 GB). bench/repack.sh builds it:
 *   cc -O2 -I. -Ilib bench/repack.c build/kernels/int4_layout.o build/libfg.a -lpthread -lm */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_NAME "repack"
#include "bench/bench.h"
#include "kernels/fg_kernels.h"

struct shape {
	const char *name;
	int n, k, layers;
};

int main(void)
{
	static const struct shape sh[] = {
		{"q|k|v", 3072, 2560, 42}, {"o (sliding)", 2560, 2048, 35}, {"o (full)", 2560, 4096, 7},
		{"gate|up", 20480, 2560, 42}, {"down", 2560, 10240, 42}, {"PLE gate", 256, 2560, 42},
	};
	int reps = bench_env_int("FG_BENCH_REPS", 5, 1, 99), G = 128;
	double t1sum = 0, tdsum = 0;

	printf("i8 repack (kernels/int4_layout.c), group %d, %ld CPUs online, median of %d:\n", G,
	       sysconf(_SC_NPROCESSORS_ONLN), reps);
	for (size_t s = 0; s < sizeof(sh) / sizeof(sh[0]); s++) {
		int n = sh[s].n, k = sh[s].k, gk = k / G;
		size_t wb, sb, np = (size_t)n * (size_t)(k / 8);
		int32_t *p = malloc(sizeof(int32_t) * np);
		uint16_t *sc = malloc(sizeof(uint16_t) * (size_t)n * (size_t)gk);
		uint32_t *w1, *w2;
		uint16_t *s1, *s2;
		double a[99], b[99], m1, md;

		fg_int4_i8_layout_size(&wb, &sb, n, k, G);
		w1 = malloc(wb), w2 = malloc(wb), s1 = malloc(sb), s2 = malloc(sb);
		if (!p || !sc || !w1 || !w2 || !s1 || !s2) {
			fprintf(stderr, "repack: out of memory\n");
			return 1;
		}
		for (size_t i = 0; i < np; i++)
			p[i] = (int32_t)rnd();
		for (size_t i = 0; i < (size_t)n * (size_t)gk; i++)
			sc[i] = (uint16_t)rnd();
		for (int r = 0; r < reps; r++) { /* alternated, so that the machine's moods fall on both */
			double t0 = bench_now();

			CK(fg_int4_i8_repack_threads(w1, s1, p, sc, n, k, G, 1, &err));
			a[r] = bench_now() - t0;
			t0 = bench_now();
			CK(fg_int4_i8_repack(w2, s2, p, sc, n, k, G, &err));
			b[r] = bench_now() - t0;
		}
		if (memcmp(w1, w2, wb) || memcmp(s1, s2, sb)) {
			fprintf(stderr, "repack: %s: the default's bytes differ from one thread's\n", sh[s].name);
			return 1;
		}
		m1 = median(a, reps), md = median(b, reps);
		printf("  %-12s %5d x %5d (%6.2f MB): 1 thread %7.2f ms, default %7.2f ms, %.2fx\n", sh[s].name, n, k,
		       (double)np * 4 / 1e6, m1 * 1e3, md * 1e3, m1 / md);
		t1sum += m1 * sh[s].layers, tdsum += md * sh[s].layers;
		free(p), free(sc), free(w1), free(w2), free(s1), free(s2);
	}
	printf("  E4B layer matrices, by arithmetic (42 layers): 1 thread %.2f s, default %.2f s, %.2fx\n", t1sum, tdsum,
	       t1sum / tdsum);
	return 0;
}
