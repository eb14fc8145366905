/* engine_gpu.c - GPU benchmark of the decode step's kernels on E4B shapes
 * (driven by bench/engine_gpu.sh; docs/bench.md "## engine (GPU)").
 *
 * Random INT4 g128 weights with Gemma 4 E4B's body shapes (42 layers, 35
 * sliding + 7 full, K/V projections only in the first 24 layers, PLE gate and
 * projection per layer, the per-layer model projection), uploaded through the
 * same repack the engine uses, once for each INT4 kernel (fma: CUDA cores;
 * mma: tensor cores). In one run it measures:
 *   - the device's read bandwidth (a 16-byte-load sweep over 4 GiB), the
 *     ceiling;
 *   - for each kernel, all body linears of one decode step, fused (q|k|v and
 *     gate|up concatenated; fma also one launch per matrix), direct and as a
 *     CUDA graph, M = 1 and M = 4 / 8 (the speculative verify shape);
 *   - a whole synthetic decode step: embedding, PLE, every layer's norms,
 *     RoPE, KV store, attention at position FG_BENCH_POS (default 1000), GeGLU, residuals,
 *     a 12k-row keepset INT4 head and softcap + argmax, as one CUDA graph,
 *     for each kernel;
 *   - with FG_BENCH_MODEL=DIR, the engine itself on that checkpoint (e.g. the
 *     tiny fixtures): greedy tokens/s with --device cuda (each kernel) and
 *     cpu, same ids.
 *   - with FG_BENCH_E4B=DIR, the engine on an E4B-shaped INT4 checkpoint
 *     (bench/hf_gemma4_e4b.py --write-int4): ms per token of greedy decodes
 *     after a warm-up, for each kernel; FG_BENCH_HF_MS (transformers' ms per
 *     token, measured before in the same run) adds the ratios, and
 *     FG_BENCH_HF_COMPILED_MS (the same with a static cache, compiled) more;
 *     FG_BENCH_E4B_K12=DIR the same on that checkpoint with its head pruned
 *     to a 12k keepset (fgpack bake prune-head --head int4), the issue's
 *     benchmark model; FG_BENCH_E4B_LEVELS="0 1 2" runs the engine (i8, or fma
 *     where i8 was left out) on it again at each of those L2 prefetch levels
 *     (FG_PREFETCH, fg_kernels.h), in the order given.
 * The synthetic step is also timed at each L2 prefetch level.
 * FG_BENCH_POSLIST="64,1000,4000" also times that step at each position listed;
 * FG_BENCH_CAP the full layers' cache slots (default 4096; the engine's
 * default for E4B is 8192).
 * FG_BENCH_PROFILE=1 times nothing: two direct steps per kernel, for ncu.
 * FG_BENCH_KINDS="fma i8" benchmarks only the INT4 kernels it names.
 * After the matvec chains, each class of matrix (q|k|v, o, gate|up, down,
 * the PLE pair) is timed alone as a chain of its 42 launches.
 * FG_BENCH_QUICK=1 (experiments) keeps only the fused M = 1 graph chain,
 * the per-class chains and the whole step at the prefetch level in force;
 * FG_BENCH_QUICK=2 the whole step only. FG_BENCH_SKIP (timing only) leaves
 * classes of kernels out of the synthetic step (full_step).
 * `engine_gpu --probe` only says whether there is a device (exit 0) or not.
 * Timing: warm-up steps first (FG_BENCH_WARM, default 64), then FG_BENCH_STEPS
 * (default 128) replays per repetition, median of FG_BENCH_REPS (default 5). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/model.h"
#include "kernels/fg_kernels.h"

#define HIDDEN 2560
#define LAYERS 42
#define FFN 10240
#define PLE 256
#define KEEP 12288

static struct fg_kctx *ctx;
static struct fg_err err;
static int warm = 64, steps = 128, reps = 5, pos = 1000, full_cap = 4096; /* full layers' cache slots */

#define CK(x)                                                              \
	do {                                                               \
		if (x) {                                                   \
			fprintf(stderr, "engine_gpu: %s (line %d)\n", err.msg, __LINE__); \
			exit(1);                                           \
		}                                                          \
	} while (0)

static uint64_t rs = 88172645463325252ull;

static uint32_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (uint32_t)(rs >> 11);
}

static int is_full(int l)
{
	return l % 6 == 5;
}

/* one random standard-format pool, big enough for the largest matrix */
static int32_t *pool_w;
static uint16_t *pool_s;

static struct fg_kint4 *mat(int n, int k)
{
	struct fg_kint4 *w;

	CK(fg_kint4_new(ctx, &w, pool_w, pool_s, n, k, 128, 0, &err));
	return w;
}

static void *dalloc(size_t n)
{
	void *d;

	CK(fg_kmem_alloc(ctx, &d, n, &err));
	return d;
}

static void *drand(size_t nfloats, float scale)
{
	float *h = malloc(sizeof(float) * nfloats);
	void *d = dalloc(sizeof(float) * nfloats);

	for (size_t i = 0; i < nfloats; i++)
		h[i] = scale * ((float)(rnd() & 0xffff) / 32768.0f - 1.0f);
	CK(fg_kmem_upload(ctx, d, h, sizeof(float) * nfloats, &err));
	free(h);
	return d;
}

static uint16_t *drand_bf16(size_t n, float scale)
{
	uint16_t *h = malloc(2 * n);
	void *d = dalloc(2 * n);

	for (size_t i = 0; i < n; i++) {
		float f = scale * ((float)(rnd() & 0xffff) / 32768.0f - 1.0f);
		uint32_t u;

		memcpy(&u, &f, 4);
		h[i] = (uint16_t)(u >> 16);
	}
	CK(fg_kmem_upload(ctx, d, h, 2 * n, &err));
	free(h);
	return d;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median over reps of (ms per step) for `steps` calls of fn. */
typedef void (*step_fn)(void *);
static double time_steps(step_fn fn, void *arg)
{
	double ms[32];

	for (int i = 0; i < warm; i++)
		fn(arg);
	CK(fg_kctx_sync(ctx, &err));
	for (int r = 0; r < reps; r++) {
		CK(fg_ktimer_start(ctx, &err));
		for (int i = 0; i < steps; i++)
			fn(arg);
		CK(fg_ktimer_stop(ctx, &ms[r], &err));
		ms[r] /= steps;
	}
	qsort(ms, reps, sizeof(double), cmp_d);
	return ms[reps / 2];
}

/* ---- the model's matrices ----------------------------------------------------*/

struct layer {
	struct fg_kint4 *q, *k, *v, *o, *gate, *up, *down, *pg, *pp; /* separate */
	struct fg_kint4 *qkv, *gu;                                     /* fused */
	int qd, kvd, hd;
};

static struct layer L[LAYERS];
static struct fg_kint4 *plp, *head;
static float *dx, *dy, *dy2;
static int mv_m = 1;
static int quick; /* FG_BENCH_QUICK=1: fewer variants (experiments) */

static void step_separate(void *arg)
{
	(void)arg;
	for (int l = 0; l < LAYERS; l++) {
		struct layer *y = &L[l];
		struct fg_kint4 *ms[] = {y->q, y->k, y->v, y->o, y->gate, y->up, y->down, y->pg, y->pp};

		for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++)
			if (ms[i])
				CK(fg_k_int4_matvec(ctx, dy, ms[i], dx, mv_m, &err));
	}
	CK(fg_k_int4_matvec(ctx, dy, plp, dx, mv_m, &err));
}

static void step_fused(void *arg)
{
	(void)arg;
	for (int l = 0; l < LAYERS; l++) {
		struct layer *y = &L[l];

		CK(fg_k_int4_matvec(ctx, dy, y->qkv ? y->qkv : y->q, dx, mv_m, &err));
		CK(fg_k_int4_matvec(ctx, dy, y->o, dx, mv_m, &err));
		CK(fg_k_int4_matvec(ctx, dy, y->gu, dx, mv_m, &err));
		CK(fg_k_int4_matvec(ctx, dy, y->down, dx, mv_m, &err));
		CK(fg_k_int4_matvec(ctx, dy, y->pg, dx, mv_m, &err));
		CK(fg_k_int4_matvec(ctx, dy, y->pp, dx, mv_m, &err));
	}
	CK(fg_k_int4_matvec(ctx, dy, plp, dx, mv_m, &err));
}

/* one class of the fused chain alone: its 42 launches (cls: 0 q|k|v, 1 o,
 * 2 gate|up, 3 down, 4 PLE gate, 5 PLE projection) */
static int cls;
static struct fg_kint4 *class_mat(const struct layer *y, int c)
{
	struct fg_kint4 *ms[] = {y->qkv ? y->qkv : y->q, y->o, y->gu, y->down, y->pg, y->pp};

	return ms[c];
}

static void step_class(void *arg)
{
	(void)arg;
	for (int l = 0; l < LAYERS; l++)
		CK(fg_k_int4_matvec(ctx, dy, class_mat(&L[l], cls), dx, mv_m, &err));
}

static struct fg_kgraph *graph;
static void step_graph(void *arg)
{
	(void)arg;
	CK(fg_kgraph_launch(ctx, graph, &err));
}

/* ---- a whole synthetic decode step ---------------------------------------------*/

struct stepbuf {
	float *h, *xn, *qkv, *att, *o, *gu, *ff, *pl, *plg, *pp, *logits, *plproj;
	float *kc[LAYERS], *vc[LAYERS];
	float *nw_in, *nw_post, *nw_q, *nw_k, *nw_ple;
	uint16_t *emb, *ple_tab;
	int32_t *id, *pos, *best, *keep;
};
static struct stepbuf S;

static float *inv_tab[2];
/* RoPE's turns for positions below TURNS (fg_k_rope_table), as the engine's
 * step reads them; FG_ROPE_TABLE=0: none (computed in every block) */
#define TURNS 16384
static float *turn_tab[2];

/* FG_BENCH_SKIP (experiments, timing only: the numbers are wrong) leaves
 * kernels out of the step: n the residual norms, a the attention, p the
 * PLE matvec pair, q the q|k|v and o matvecs (k q|k|v alone, o o alone),
 * f gate|up and down. */
static const char *skip;
#define SKIP(c) (skip && strchr(skip, (c)))

static void full_step(void *arg)
{
	const float eps = 1e-6f;

	(void)arg;
	CK(fg_k_embed(ctx, S.h, S.emb, S.id, HIDDEN, 50.596443f, &err));
	fg_kint4_prefetch(ctx, L[0].qkv ? L[0].qkv : L[0].q, 0, 1);
	CK(fg_k_int4_matvec(ctx, S.plproj, plp, S.h, 1, &err));
	CK(fg_k_ple(ctx, S.pl, S.ple_tab, S.id, S.plproj, S.nw_ple, LAYERS, PLE, 16.0f, 1.0f / 50.596443f, eps, &err));
	CK(fg_k_rmsnorm(ctx, S.xn, S.h, S.nw_in, 1, HIDDEN, eps, &err));
	for (int l = 0; l < LAYERS; l++) {
		struct layer *y = &L[l];
		int src = l < 24 ? l : is_full(l) ? 23 : 22; /* shared layers read layer 22's / 23's cache */
		int cap = is_full(l) ? full_cap : 512, hq = 8, hk = 2;

		/* the engine's sequence (engine/cuda.c forward), its L2 prefetches too */
		fg_kint4_prefetch(ctx, y->o, 0, 1);
		if (!SKIP('q') && !SKIP('k'))
			CK(fg_k_int4_matvec(ctx, S.qkv, y->qkv ? y->qkv : y->q, S.xn, 1, &err));
		if (!SKIP('a'))
			CK(fg_k_attn_decode_post(ctx, S.att, S.qkv, hq, hk, y->hd, S.nw_q, S.nw_k, inv_tab[is_full(l)],
						 turn_tab[is_full(l)], TURNS,
						 S.pos, S.kc[src], S.vc[src], cap, l < 24, eps, 1.0f, &err));
		if (!SKIP('q') && !SKIP('o'))
			CK(fg_k_int4_matvec(ctx, S.o, y->o, S.att, 1, &err));
		if (!SKIP('n'))
			CK(fg_k_residual_norm(ctx, S.h, S.o, S.nw_post, 1.0f, S.xn, S.nw_in, HIDDEN, eps, &err));
		fg_kint4_prefetch(ctx, y->down, 0, 1);
		if (!SKIP('f'))
			CK(fg_k_int4_matvec(ctx, S.gu, y->gu, S.xn, 1, &err));
		fg_kint4_prefetch(ctx, l + 1 < LAYERS ? (L[l + 1].qkv ? L[l + 1].qkv : L[l + 1].q) : head, 0, 1);
		if (!SKIP('f'))
			CK(fg_k_int4_matvec_geglu(ctx, S.o, y->down, S.gu, S.gu + FFN, &err));
		if (!SKIP('n'))
			CK(fg_k_rmsnorm_residual(ctx, S.h, S.o, S.nw_post, HIDDEN, eps, 1.0f, &err));
		if (!SKIP('p')) {
			CK(fg_k_int4_matvec(ctx, S.plg, y->pg, S.h, 1, &err));
			CK(fg_k_int4_matvec_geglu(ctx, S.pp, y->pp, S.plg, S.pl + (size_t)l * PLE, &err));
		}
		if (!SKIP('n'))
			CK(fg_k_residual_norm(ctx, S.h, S.pp, S.nw_post, 0.9f, S.xn, S.nw_in, HIDDEN, eps, &err));
	}
	CK(fg_k_int4_matvec(ctx, S.logits, head, S.xn, 1, &err));
	CK(fg_k_softcap_argmax(ctx, S.best, S.logits, S.keep, KEEP, 30.0f, &err));
}

struct gen {
	int32_t ids[256];
	int n;
};

static int on_tok(void *user, int32_t t, const float *logits, int n_vocab)
{
	struct gen *g = user;

	(void)logits, (void)n_vocab;
	g->ids[g->n++] = t;
	return g->n >= 256;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The engine on a real checkpoint: cuda with each INT4 kernel (the engine's
 * context takes FG_INT4_KERNEL) against cpu (one thread). */
static void engine_model(const char *dir)
{
	int32_t prompt[4] = {2, 17, 300, 5};
	struct gen g[4];
	double tps[4];
	const char *dev[4] = {"cuda (fma)", "cuda (mma)", "cuda (i8)", "cpu"}, *kn[3] = {"fma", "mma", "i8"};

	for (int d = 0; d < 4; d++) {
		struct fg_engine_opts o = {1, 0, 0, d < 3 ? FG_DEVICE_CUDA : FG_DEVICE_CPU};
		struct fg_engine *e;
		double t0, best = 1e30;

		if (d < 3)
			setenv("FG_INT4_KERNEL", kn[d], 1);
		CK(fg_engine_load(&e, dir, &o, &err));
		g[d].n = 0;
		CK(fg_engine_generate_ids(e, prompt, 4, 8, NULL, NULL, &err)); /* warm-up, graph capture */
		for (int r = 0; r < 3; r++) {
			g[d].n = 0;
			t0 = now();
			CK(fg_engine_generate_ids(e, prompt, 4, 100, on_tok, &g[d], &err));
			if (now() - t0 < best)
				best = now() - t0;
		}
		tps[d] = 100 / best;
		fg_engine_free(e);
	}
	printf("\nengine on %s (100 greedy tokens incl. a 4-token prompt, best of 3):\n", dir);
	for (int d = 0; d < 4; d++)
		printf("  --device %-10s %8.0f tokens/s\n", dev[d], tps[d]);
	for (int d = 0; d < 3; d++)
		printf("  generated ids: %s vs cpu %s\n", kn[d],
		       g[d].n == g[3].n && !memcmp(g[d].ids, g[3].ids, 4 * g[d].n) ? "identical" : "DIFFER");
}

/* The engine itself on an E4B-shaped INT4 checkpoint (FG_BENCH_E4B=DIR,
 * written by bench/hf_gemma4_e4b.py --write-int4 DIR): for each INT4 kernel,
 * load, 64 one-token prompts as warm-up (graph capture, first touch), then
 * FG_BENCH_REPS greedy decodes of `steps` new tokens from a one-token
 * prompt, median ms per token. step_bytes: the bytes one step reads. */
/* levels: NULL, or L2 prefetch levels ("0 1 2") at which the fma engine runs
 * again after the two kinds (FG_PREFETCH set before each load) */
static void engine_e4b(const char *dir, double read_gbs, const double *body_bytes, double hf_ms, const char *levels)
{
	const char *kn[3] = {"fma", "mma", "i8"};
	char lv[8];
	int nl = 0, runs, projected = 0;
	const char *env_pf = getenv("FG_PREFETCH");
	/* transformers with a static cache, compiled (FG_BENCH_HF_COMPILED_MS,
	 * measured before in the same run when it ran) */
	const char *hfc = getenv("FG_BENCH_HF_COMPILED_MS");
	double hfc_ms = hfc ? strtod(hfc, NULL) : 0.0;

	for (const char *c = levels; c && *c && nl < 8; c++)
		if (*c >= '0' && *c <= '2')
			lv[nl++] = *c;
	runs = 3 + nl;

	printf("\nengine (fg_engine_generate_ids, what `fgpack run --device cuda` runs: argmax on the GPU) on the "
	       "E4B-shaped INT4 g128 checkpoint %s:\n",
	       dir);
	for (int run = 0; run < runs; run++) {
		struct fg_engine_opts o = {1, 0, 0, FG_DEVICE_CUDA};
		struct fg_engine *e;
		struct gen g;
		double t0, ms[32], bytes;
		/* the level runs use the i8 kernel (the default) where it was benchmarked */
		int32_t one = 2, kind = run < 3 ? run : body_bytes[2] > 0 ? 2 : 0;
		char lbl[48];

		if (!(body_bytes[kind] > 0))
			continue; /* a kind left out of FG_BENCH_KINDS: its body bytes were not counted */
		if (run >= 3) {
			char v[2] = {lv[run - 3], 0};

			setenv("FG_PREFETCH", v, 1);
			snprintf(lbl, sizeof(lbl), "%s, L2 prefetch level %c", kn[kind], lv[run - 3]);
		} else {
			snprintf(lbl, sizeof(lbl), "%s", kn[kind]);
		}
		setenv("FG_INT4_KERNEL", kn[kind], 1);
		t0 = now();
		CK(fg_engine_load(&e, dir, &o, &err));
		printf("  %s: loaded in %.1f s (%s)\n", lbl, now() - t0, fg_engine_device(e));
		t0 = now();
		for (int i = 0; i < warm; i++) {
			one = 2 + i;
			CK(fg_engine_generate_ids(e, &one, 1, 1, NULL, NULL, &err));
		}
		printf("  %s: %d one-token prompts of warm-up in %.2f s\n", lbl, warm, now() - t0);
		one = 2;
		for (int r = 0; r < reps; r++) {
			g.n = 0;
			t0 = now();
			CK(fg_engine_generate_ids(e, &one, 1, steps, on_tok, &g, &err));
			ms[r] = (now() - t0) * 1e3 / steps;
		}
		qsort(ms, reps, sizeof(double), cmp_d);
		/* weights: the body (same shapes as the synthetic step) + the head
		 * as the checkpoint has it (the tied bf16 embedding over the whole
		 * vocabulary, or a pruned keepset head, INT4 or bf16); KV and
		 * tables are small at these positions */
		{
			const struct fg_g4_model *m = fg_engine_model(e);
			const struct fg_lin *h = &m->head;
			double hb = h->fmt == FG_W_INT4 ? (double)h->rows * h->cols / 2 +
								  (double)h->rows * ((h->cols + h->group - 1) / h->group) * 2
							: (double)h->rows * h->cols * (h->fmt == FG_W_F32 ? 4 : 2);
			char hd[96];

			snprintf(hd, sizeof(hd), "%s head %d rows %.3f", h->fmt == FG_W_INT4 ? "INT4" : "bf16", h->rows,
				 hb / 1e9);
			bytes = body_bytes[kind] + hb;
			printf("  %s: %d greedy tokens from a 1-token prompt, median of %d: %.3f ms/token, %.1f tokens/s; "
			       "weights/step %.3f GB (INT4 body %.3f + %s): %.0f GB/s = %.1f%% of read",
			       lbl, steps, reps, ms[reps / 2], 1e3 / ms[reps / 2], bytes / 1e9, body_bytes[kind] / 1e9,
			       hd, bytes / (ms[reps / 2] / 1e3) / 1e9,
			       100.0 * bytes / (ms[reps / 2] / 1e3) / 1e9 / read_gbs);
			if (!projected++)
				printf("\n  %s: A10G PROJECTION (not measured): %.3f GB / 480 GB/s = %.2f ms/token, %.0f tokens/s "
				       "at 100%% of copy bandwidth",
				       kn[kind], bytes / 1e9, bytes / 480e9 * 1e3, 480e9 / bytes);
		}
		if (hf_ms > 0)
			printf("; %.1fx transformers eager (%.3f ms/token)", hf_ms / ms[reps / 2], hf_ms);
		if (hfc_ms > 0)
			printf("; %.1fx transformers static-cache compiled (%.3f ms/token)", hfc_ms / ms[reps / 2], hfc_ms);
		printf("\n  %s: first ids %d %d %d %d\n", lbl, g.ids[0], g.ids[1], g.ids[2], g.ids[3]);
		fg_engine_free(e);
	}
	unsetenv("FG_INT4_KERNEL");
	if (env_pf)
		setenv("FG_PREFETCH", env_pf, 1);
	else
		unsetenv("FG_PREFETCH");
}

/* Every body matrix of the model, in the context's INT4 kind; the separate
 * (unfused) q, k, v, gate, up only when `separate`. */
static size_t body, body_fused;

static void build_mats(int separate)
{
	body = body_fused = 0;
	for (int l = 0; l < LAYERS; l++) {
		struct layer *y = &L[l];
		int full = is_full(l);

		y->hd = full ? 512 : 256;
		y->qd = 8 * y->hd;
		y->kvd = 2 * y->hd;
		if (separate) {
			y->q = mat(y->qd, HIDDEN);
			if (l < 24) {
				y->k = mat(y->kvd, HIDDEN);
				y->v = mat(y->kvd, HIDDEN);
			}
			y->gate = mat(FFN, HIDDEN);
			y->up = mat(FFN, HIDDEN);
		}
		y->qkv = mat(l < 24 ? y->qd + 2 * y->kvd : y->qd, HIDDEN);
		y->o = mat(HIDDEN, y->qd);
		y->gu = mat(2 * FFN, HIDDEN);
		y->down = mat(HIDDEN, FFN);
		y->pg = mat(PLE, HIDDEN);
		y->pp = mat(HIDDEN, PLE);
		body_fused += fg_kint4_bytes(y->qkv) + fg_kint4_bytes(y->o) + fg_kint4_bytes(y->gu) +
			      fg_kint4_bytes(y->down) + fg_kint4_bytes(y->pg) + fg_kint4_bytes(y->pp);
		if (separate) {
			struct fg_kint4 *sep[] = {y->q, y->k, y->v, y->o, y->gate, y->up, y->down, y->pg, y->pp};

			for (size_t i = 0; i < 9; i++)
				body += fg_kint4_bytes(sep[i]); /* 0 for NULL */
		}
	}
	plp = mat(LAYERS * PLE, HIDDEN);
	head = mat(KEEP, HIDDEN);
	body += fg_kint4_bytes(plp);
	body_fused += fg_kint4_bytes(plp);
}

static void free_mats(void)
{
	for (int l = 0; l < LAYERS; l++) {
		struct layer *y = &L[l];
		struct fg_kint4 *all[] = {y->q, y->k, y->v, y->o, y->gate, y->up, y->down, y->pg, y->pp, y->qkv, y->gu};

		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
			fg_kint4_free(ctx, all[i]);
		memset(y, 0, sizeof(*y));
	}
	fg_kint4_free(ctx, plp);
	fg_kint4_free(ctx, head);
	plp = head = NULL;
}

/* The matvec-only chains: fused, m, graph, pdl. */
static void bench_matvecs(int separate, double read_gbs)
{
	static const int cfgs[][4] = {{0, 1, 0, 1}, {0, 1, 1, 1}, {1, 1, 0, 1}, {1, 1, 1, 1}, {1, 1, 1, 0},
				      {1, 4, 1, 1}, {1, 8, 1, 1}};

	printf("\n%-44s %9s %9s %8s %8s\n", "INT4 matvec, all body linears", "ms/step", "steps/s", "GB/s", "% read");
	for (size_t c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++) {
		int fused = cfgs[c][0], m = cfgs[c][1], use_graph = cfgs[c][2];

		if (quick && c != 3)
			continue; /* FG_BENCH_QUICK=1: the fused graph at M = 1 only */
		step_fn fn = fused ? step_fused : step_separate;
		size_t bytes = fused ? body_fused : body;
		char name[96];
		double ms;

		if (!fused && !separate)
			continue;
		mv_m = m;
		fg_kctx_set_pdl(ctx, cfgs[c][3]);
		if (use_graph) {
			CK(fg_kgraph_begin(ctx, &err));
			fn(NULL);
			CK(fg_kgraph_end(ctx, &graph, &err));
			ms = time_steps(step_graph, NULL);
			fg_kgraph_free(graph);
		} else {
			ms = time_steps(fn, NULL);
		}
		snprintf(name, sizeof(name), "%s, M=%d, %s%s", fused ? "fused qkv|gate-up" : "per matrix", m,
			 use_graph ? "graph" : "direct", cfgs[c][3] ? "" : ", no PDL");
		printf("%-44s %9.3f %9.0f %8.0f %7.1f%%\n", name, ms, 1e3 / ms, bytes / (ms / 1e3) / 1e9,
		       100.0 * bytes / (ms / 1e3) / 1e9 / read_gbs);
	}
	fg_kctx_set_pdl(ctx, 1);
	mv_m = 1;
	/* each class alone, a chain of its 42 launches (graph, PDL): what one
	 * launch of it costs in a chain, against its bytes */
	for (cls = 0; cls < 6; cls++) {
		static const char *names[] = {"q|k|v", "o", "gate|up", "down", "PLE gate", "PLE projection"};
		size_t bytes = 0;
		double ms;

		for (int l = 0; l < LAYERS; l++)
			bytes += fg_kint4_bytes(class_mat(&L[l], cls));
		CK(fg_kgraph_begin(ctx, &err));
		step_class(NULL);
		CK(fg_kgraph_end(ctx, &graph, &err));
		ms = time_steps(step_graph, NULL);
		fg_kgraph_free(graph);
		printf("  %-16s alone, %d launches (graph, PDL): %7.3f ms, %6.2f us a launch for %6.2f MB, %5.0f GB/s = "
		       "%5.1f%% of read\n",
		       names[cls], LAYERS, ms, 1e3 * ms / LAYERS, bytes / 1e6 / LAYERS, bytes / (ms / 1e3) / 1e9,
		       100.0 * bytes / (ms / 1e3) / 1e9 / read_gbs);
	}
}

/* The read floor of one launch per matrix: the fused matvec chain's launch
 * sequence (q|k|v, o, gate|up, down, PLE gate, PLE projection per layer, the
 * per-layer model projection) as a CUDA graph of fg_k_read_floor launches
 * over each matrix's words (fma layout; the scales, 3 % more, left out),
 * nothing computed: what any kernel that reads each matrix in its own launch
 * could reach at best. */
static void bench_floor(double read_gbs)
{
	static const int per_sm[] = {1, 2, 4, 8};
	int sms = fg_kctx_sm_count(ctx);
	uint32_t *sink = dalloc(16);

	printf("\n%-44s %9s %9s %8s %8s\n", "read floor, one launch per matrix (words)", "ms/step", "steps/s", "GB/s",
	       "% read");
	for (size_t c = 0; c < 2 * sizeof(per_sm) / sizeof(per_sm[0]); c++) {
		int b = per_sm[c % 4] * sms, pdl = c < 4;
		size_t bytes = 0;
		char name[96];
		double ms;

		fg_kctx_set_pdl(ctx, pdl);
		CK(fg_kgraph_begin(ctx, &err));
		for (int l = 0; l <= LAYERS; l++) {
			struct fg_kint4 *ms6[6] = {plp};
			int nm = 1;

			if (l < LAYERS) {
				struct fg_kint4 *y6[6] = {L[l].qkv, L[l].o, L[l].gu, L[l].down, L[l].pg, L[l].pp};

				memcpy(ms6, y6, sizeof(y6));
				nm = 6;
			}
			for (int i = 0; i < nm; i++) {
				size_t wb, sb;

				fg_int4_layout_size(&wb, &sb, ms6[i]->n, ms6[i]->k, ms6[i]->group);
				CK(fg_k_read_floor(ctx, sink, ms6[i]->d_words, wb, b, &err));
				bytes += wb;
			}
		}
		CK(fg_kgraph_end(ctx, &graph, &err));
		ms = time_steps(step_graph, NULL);
		fg_kgraph_free(graph);
		snprintf(name, sizeof(name), "%d blocks per SM, graph%s", per_sm[c % 4], pdl ? "" : ", no PDL");
		printf("%-44s %9.3f %9.0f %8.0f %7.1f%%\n", name, ms, 1e3 / ms, bytes / (ms / 1e3) / 1e9,
		       100.0 * bytes / (ms / 1e3) / 1e9 / read_gbs);
	}
	fg_kctx_set_pdl(ctx, 1);
	fg_kmem_free(ctx, sink);
}

static size_t kv_bytes;

/* K and V bytes one layer reads at position pos (2 kv heads, fp32; the
 * sliding layers' window is 512) */
static size_t kv_layer_bytes(int l)
{
	int hd = is_full(l) ? 512 : 256, nv = is_full(l) ? pos + 1 : (pos + 1 < 512 ? pos + 1 : 512);

	return (size_t)2 * 2 * nv * hd * 4;
}

static void setup_step(void)
{
	int32_t *keep = malloc(4 * KEEP), id;

	S.h = dalloc(4 * HIDDEN);
	S.xn = dalloc(4 * HIDDEN);
	S.qkv = dalloc(4 * (8 * 512 + 4 * 512));
	S.att = dalloc(4 * 8 * 512);
	S.o = dalloc(4 * HIDDEN);
	S.gu = dalloc(4 * 2 * FFN);
	S.ff = dalloc(4 * FFN);
	S.pl = dalloc(4 * LAYERS * PLE);
	S.plg = dalloc(4 * PLE);
	S.pp = dalloc(4 * HIDDEN);
	S.plproj = dalloc(4 * LAYERS * PLE);
	S.logits = dalloc(4 * KEEP);
	S.nw_in = drand(HIDDEN, 1.0f);
	S.nw_post = drand(HIDDEN, 0.5f);
	S.nw_q = drand(512, 1.0f);
	S.nw_k = drand(512, 1.0f);
	S.nw_ple = drand(PLE, 1.0f);
	/* embedding and PLE tables: 2048 rows each is enough for the ids used */
	S.emb = drand_bf16((size_t)2048 * HIDDEN, 0.05f);
	S.ple_tab = drand_bf16((size_t)2048 * LAYERS * PLE, 0.05f);
	for (int l = 0; l < 24; l++) {
		int cap = is_full(l) ? full_cap : 512, hd = is_full(l) ? 512 : 256;

		S.kc[l] = drand((size_t)2 * cap * hd, 1.0f);
		S.vc[l] = drand((size_t)2 * cap * hd, 1.0f);
	}
	kv_bytes = 0;
	for (int l = 0; l < LAYERS; l++) {
		kv_bytes += kv_layer_bytes(l);
	}
	for (int i = 0; i < KEEP; i++)
		keep[i] = i * 21;
	S.keep = dalloc(4 * KEEP);
	CK(fg_kmem_upload(ctx, S.keep, keep, 4 * KEEP, &err));
	S.id = dalloc(4);
	S.pos = dalloc(4);
	S.best = dalloc(4);
	id = 1234 % 2048;
	CK(fg_kmem_upload(ctx, S.id, &id, 4, &err));
	CK(fg_kmem_upload(ctx, S.pos, &pos, 4, &err));
	const char *rt = getenv("FG_ROPE_TABLE");
	int no_turns = rt && !strcmp(rt, "0"); /* as engine/cuda.c reads it */

	for (int t = 0; t < 2; t++) {
		int d = t ? 512 : 256;
		float *h = malloc(4 * (d / 2));

		for (int i = 0; i < d / 2; i++) /* proportional on full layers: 64 of 256 pairs rotate */
			h[i] = t && i >= 64 ? 0.0f : (float)(1.0 / pow(t ? 1e6 : 1e4, 2.0 * i / d));
		inv_tab[t] = dalloc(4 * (d / 2));
		CK(fg_kmem_upload(ctx, inv_tab[t], h, 4 * (d / 2), &err));
		free(h);
		if (!no_turns) {
			turn_tab[t] = dalloc(sizeof(float) * 2 * (size_t)(d / 2) * TURNS);
			CK(fg_k_rope_table(ctx, turn_tab[t], inv_tab[t], d / 2, TURNS, &err));
		}
	}
	free(keep);
}

/* The whole synthetic step as a CUDA graph: replay bits, then timing. */
static int prefetch_level; /* the context's level when made (FG_PREFETCH or the default) */

/* FG_BENCH_POSLIST="64,1000,4000": the same captured step timed at each
 * position (the kernels read it from device memory), then back to pos.
 * Below fg_kctx_attn_short_keys, also the step captured with short
 * attention launches (fg_kctx_set_attn_short, as the engine's step graph
 * there), alternated with the full one: full, short, full, short. */
static void step_at_positions(double read_gbs, size_t fixed_bytes)
{
	const char *e = getenv("FG_BENCH_POSLIST");
	int keep = pos, skeys = fg_kctx_attn_short_keys(ctx);
	struct fg_kgraph *gfull = graph, *gshort = NULL;

	if (e && skeys > 0) {
		fg_kctx_set_attn_short(ctx, 1);
		CK(fg_kgraph_begin(ctx, &err));
		full_step(NULL);
		CK(fg_kgraph_end(ctx, &gshort, &err));
		fg_kctx_set_attn_short(ctx, 0);
	}

	while (e && *e) {
		char *end;
		long p = strtol(e, &end, 10);
		size_t kvb = 0;
		double ms;

		if (end == e || p < 0 || p >= full_cap) {
			fprintf(stderr, "engine_gpu: bad FG_BENCH_POSLIST\n");
			exit(2);
		}
		pos = (int)p;
		for (int l = 0; l < LAYERS; l++)
			kvb += kv_layer_bytes(l);
		CK(fg_kmem_upload(ctx, S.pos, &pos, 4, &err));
		ms = time_steps(step_graph, NULL);
		printf("  at pos %4d: %.3f ms/step, %.0f steps/s, %.1f%% of read (KV fp32 %.3f GB)\n", pos, ms, 1e3 / ms,
		       100.0 * (fixed_bytes + kvb) / (ms / 1e3) / 1e9 / read_gbs, kvb / 1e9);
		if (gshort && pos < skeys) {
			double ab[4];
			float *lg[2] = {malloc(4 * KEEP), malloc(4 * KEEP)};

			for (int r = 0; r < 4; r++) {
				graph = r & 1 ? gshort : gfull;
				ab[r] = time_steps(step_graph, NULL);
				CK(fg_kmem_download(ctx, lg[r & 1], S.logits, 4 * KEEP, &err));
			}
			graph = gfull;
			printf("  at pos %4d, short attention launches: %.3f, %.3f ms/step; full %.3f, %.3f (alternated); "
			       "logits %s\n",
			       pos, ab[1], ab[3], ab[0], ab[2], memcmp(lg[0], lg[1], 4 * KEEP) ? "DIFFER" : "bit-identical");
			free(lg[0]);
			free(lg[1]);
		}
		e = *end == ',' ? end + 1 : end;
	}
	fg_kgraph_free(gshort);
	pos = keep;
	CK(fg_kmem_upload(ctx, S.pos, &pos, 4, &err));
}

static double bench_step(const char *kname, double read_gbs)
{
	size_t step_bytes = body_fused + fg_kint4_bytes(head) + kv_bytes;
	double ms;

	CK(fg_kgraph_begin(ctx, &err));
	full_step(NULL);
	CK(fg_kgraph_end(ctx, &graph, &err));
	/* the same bits every replay */
	{
		int32_t b1, b2;
		float *l1 = malloc(4 * KEEP), *l2 = malloc(4 * KEEP);

		CK(fg_kgraph_launch(ctx, graph, &err));
		CK(fg_kmem_download(ctx, &b1, S.best, 4, &err));
		CK(fg_kmem_download(ctx, l1, S.logits, 4 * KEEP, &err));
		CK(fg_kgraph_launch(ctx, graph, &err));
		CK(fg_kmem_download(ctx, &b2, S.best, 4, &err));
		CK(fg_kmem_download(ctx, l2, S.logits, 4 * KEEP, &err));
		printf("\nsynthetic decode step (%s) replayed twice: token %d / %d, logits %s\n", kname, b1, b2,
		       memcmp(l1, l2, 4 * KEEP) ? "DIFFER" : "bit-identical");
		free(l1);
		free(l2);
	}
	{ /* one step a graph (1) against two steps captured in one graph (2),
	   * alternated 1 2 1 2: what the boundary between two graph launches
	   * costs a step (the second step's first kernels start early under PDL
	   * only inside one graph); the same position twice, so the same work */
		double ab[4];

		for (int r = 0; r < 4; r++) {
			fg_kgraph_free(graph);
			CK(fg_kgraph_begin(ctx, &err));
			full_step(NULL);
			if (r & 1)
				full_step(NULL);
			CK(fg_kgraph_end(ctx, &graph, &err));
			ab[r] = time_steps(step_graph, NULL) / (r & 1 ? 2 : 1);
		}
		printf("whole decode step (%s), CUDA graph of one step %.3f, %.3f ms/step; of two steps %.3f, %.3f "
		       "ms/step (alternated)\n",
		       kname, ab[0], ab[2], ab[1], ab[3]);
	}
	if (quick)
		goto last;
	fg_kctx_set_pdl(ctx, 0);
	fg_kgraph_free(graph);
	CK(fg_kgraph_begin(ctx, &err));
	full_step(NULL);
	CK(fg_kgraph_end(ctx, &graph, &err));
	ms = time_steps(step_graph, NULL);
	printf("whole decode step (%s), CUDA graph, no PDL: %.3f ms/step, %.0f steps/s\n", kname, ms, 1e3 / ms);
	fg_kctx_set_pdl(ctx, 1);
	{ /* the step at each L2 prefetch level (fg_kctx_set_prefetch), then at the one in force */
		int lv = fg_kctx_set_prefetch(ctx, 2);

		for (int l = 0; l <= 2 && lv > 0; l++) {
			fg_kctx_set_prefetch(ctx, l);
			fg_kgraph_free(graph);
			CK(fg_kgraph_begin(ctx, &err));
			full_step(NULL);
			CK(fg_kgraph_end(ctx, &graph, &err));
			ms = time_steps(step_graph, NULL);
			printf("whole decode step (%s), CUDA graph, L2 prefetch level %d: %.3f ms/step, %.0f steps/s\n",
			       kname, l, ms, 1e3 / ms);
		}
		lv = fg_kctx_set_prefetch(ctx, prefetch_level);
		printf("L2 prefetch level in force: %d\n", lv);
	}
	{ /* qkv post as its own launch (0) or inside the attention (1), alternated 0 1 0 1 */
		int in_force = fg_kctx_set_attn_fused(ctx, -1);
		double ab[4];
		float *lg[2] = {malloc(4 * KEEP), malloc(4 * KEEP)};

		for (int r = 0; r < 4; r++) {
			fg_kctx_set_attn_fused(ctx, r & 1);
			fg_kgraph_free(graph);
			CK(fg_kgraph_begin(ctx, &err));
			full_step(NULL);
			CK(fg_kgraph_end(ctx, &graph, &err));
			ab[r] = time_steps(step_graph, NULL);
			CK(fg_kmem_download(ctx, lg[r & 1], S.logits, 4 * KEEP, &err));
		}
		fg_kctx_set_attn_fused(ctx, in_force);
		printf("whole decode step (%s), CUDA graph, qkv post + attention: 2 launches %.3f, %.3f ms/step; "
		       "1 launch %.3f, %.3f ms/step (alternated); logits %s; in force: %d\n",
		       kname, ab[0], ab[2], ab[1], ab[3], memcmp(lg[0], lg[1], 4 * KEEP) ? "DIFFER" : "bit-identical",
		       in_force);
		free(lg[0]);
		free(lg[1]);
	}
last:
	fg_kgraph_free(graph);
	CK(fg_kgraph_begin(ctx, &err));
	full_step(NULL);
	CK(fg_kgraph_end(ctx, &graph, &err));
	ms = time_steps(step_graph, NULL);
	printf("whole decode step (%s; E4B shapes, pos %d, 12k keepset INT4 head), CUDA graph:\n", kname, pos);
	printf("  %.3f ms/step, %.0f steps/s; bytes/step %.3f GB (weights %.3f + head %.3f + KV fp32 %.3f): %.0f GB/s = %.1f%% of read\n",
	       ms, 1e3 / ms, step_bytes / 1e9, body_fused / 1e9, fg_kint4_bytes(head) / 1e9, kv_bytes / 1e9,
	       step_bytes / (ms / 1e3) / 1e9, 100.0 * step_bytes / (ms / 1e3) / 1e9 / read_gbs);
	printf("  A10G PROJECTION (not measured): %.3f GB / 480 GB/s = %.2f ms/step, %.0f steps/s at 100%% of copy bandwidth\n",
	       step_bytes / 1e9, step_bytes / 480e9 * 1e3, 480e9 / step_bytes);
	step_at_positions(read_gbs, step_bytes - kv_bytes);
	fg_kgraph_free(graph);
	return ms;
}

int main(int argc, char **argv)
{
	size_t maxw = (size_t)2 * FFN * HIDDEN / 8, maxs = (size_t)2 * FFN * (FFN / 128);
	double read_gbs = 0.0, step_ms[3] = {0, 0, 0}, body_kind[3] = {0, 0, 0}, hf_ms = 0.0;
	const char *e;
	int profile;

	if ((e = getenv("FG_BENCH_WARM")))
		warm = (int)strtol(e, NULL, 10);
	if ((e = getenv("FG_BENCH_STEPS")))
		steps = (int)strtol(e, NULL, 10);
	if ((e = getenv("FG_BENCH_REPS")))
		reps = (int)strtol(e, NULL, 10);
	if ((e = getenv("FG_BENCH_POS")))
		pos = (int)strtol(e, NULL, 10);
	if ((e = getenv("FG_BENCH_CAP")))
		full_cap = (int)strtol(e, NULL, 10);
	if (reps < 1 || reps > 32 || steps < 1 || warm < 0 || full_cap < 512 || full_cap > (1 << 20) || pos < 0 ||
	    pos >= full_cap) {
		fprintf(stderr, "engine_gpu: bad FG_BENCH_* settings\n");
		return 2;
	}
	if (fg_kctx_new(&ctx, &err)) {
		printf("engine_gpu: skipped: %s\n", err.msg);
		return argc > 1 && !strcmp(argv[1], "--probe") ? 1 : 0;
	}
	prefetch_level = fg_kctx_prefetch_level(ctx);
	if (argc > 1 && !strcmp(argv[1], "--probe")) { /* is there a device? (engine_gpu.sh) */
		printf("%s\n", fg_kctx_device_name(ctx));
		fg_kctx_free(ctx);
		return 0;
	}
	printf("device: %s\n", fg_kctx_device_name(ctx));
	printf("timing: %d warm-up steps, then %d steps x %d repetitions, median\n", warm, steps, reps);

	profile = getenv("FG_BENCH_PROFILE") && *getenv("FG_BENCH_PROFILE") == '1';
	/* FG_BENCH_QUICK=2: the whole step only */
	quick = getenv("FG_BENCH_QUICK") ? (int)strtol(getenv("FG_BENCH_QUICK"), NULL, 10) : 0;
	if ((e = getenv("FG_BENCH_HF_MS")))
		hf_ms = strtod(e, NULL);
	/* the ceiling: a 16-byte read sweep over 4 GiB */
	if (!profile) {
		size_t n = (size_t)4 << 30;
		void *buf = dalloc(n);
		uint32_t *sink = dalloc(4);
		double t;

		CK(fg_kmem_fill(ctx, buf, 0x5a, n, &err));
		for (int i = 0; i < 3; i++)
			CK(fg_k_read(ctx, sink, buf, n, &err));
		CK(fg_ktimer_start(ctx, &err));
		for (int i = 0; i < 10; i++)
			CK(fg_k_read(ctx, sink, buf, n, &err));
		CK(fg_ktimer_stop(ctx, &t, &err));
		read_gbs = (double)n * 10 / (t / 1e3) / 1e9;
		printf("read bandwidth (16-byte load sweep, 4 GiB x 10): %.0f GB/s\n", read_gbs);
		fg_kmem_free(ctx, buf);
		fg_kmem_free(ctx, sink);
	}

	skip = getenv("FG_BENCH_SKIP");
	pool_w = malloc(4 * maxw);
	pool_s = malloc(2 * maxs);
	for (size_t i = 0; i < maxw; i++)
		pool_w[i] = (int32_t)(rnd() ^ (rnd() << 21));
	for (size_t i = 0; i < maxs; i++)
		pool_s[i] = 0x3c00 + (uint16_t)(rnd() % 64); /* bf16 around 0.008 */
	dx = drand((size_t)8 * FFN, 1.0f);
	dy = dalloc(sizeof(float) * 8 * 2 * FFN);
	dy2 = dalloc(sizeof(float) * 8 * 2 * FFN);
	setup_step();

	/* every INT4 kernel, each on its own copy of the weights */
	for (int kind = FG_INT4_FMA; kind <= FG_INT4_I8; kind++) {
		const char *kname = kind == FG_INT4_I8    ? "i8: int8 tensor cores"
				    : kind == FG_INT4_MMA ? "mma: bf16 tensor cores"
							  : "fma: CUDA cores";

		if ((e = getenv("FG_BENCH_KINDS")) && !strstr(e, kind == FG_INT4_I8 ? "i8" : kind == FG_INT4_MMA ? "mma" : "fma"))
			continue; /* FG_BENCH_KINDS="fma i8": only those */
		fg_kctx_set_int4_kind(ctx, kind);
		build_mats(!profile && kind == FG_INT4_FMA);
		printf("\n== INT4 kernel %s\n", kname);
		printf("body linears of one decode step (INT4 g128, engine layout incl. scales): %.3f GB fused\n",
		       body_fused / 1e9);
		if (profile) {
			/* FG_BENCH_PROFILE=1: two steps of direct launches per kernel,
			 * for a per-kernel profiler (ncu); nothing is timed here */
			full_step(NULL);
			CK(fg_kctx_sync(ctx, &err));
			full_step(NULL);
			CK(fg_kctx_sync(ctx, &err));
			printf("profile: two direct decode steps done\n");
		} else {
			if (quick < 2)
				bench_matvecs(kind == FG_INT4_FMA, read_gbs);
			if (kind == FG_INT4_FMA)
				bench_floor(read_gbs);
			step_ms[kind] = bench_step(kname, read_gbs);
			if (hf_ms > 0)
				printf("  = %.1fx transformers eager (%.3f ms/token, FG_BENCH_HF_MS)\n", hf_ms / step_ms[kind],
				       hf_ms);
		}
		body_kind[kind] = (double)body_fused;
		free_mats();
	}
	if (!profile && step_ms[0] > 0 && step_ms[1] > 0 && step_ms[2] > 0)
		printf("\nwhole step against fma (%.3f ms): mma %.3f ms = %.2fx faster, i8 %.3f ms = %.2fx faster\n",
		       step_ms[0], step_ms[1], step_ms[0] / step_ms[1], step_ms[2], step_ms[0] / step_ms[2]);
	fg_kctx_free(ctx);
	if (!profile && (e = getenv("FG_BENCH_E4B")) && *e) {
		const char *h = getenv("FG_BENCH_HF_MS");

		engine_e4b(e, read_gbs, body_kind, h ? strtod(h, NULL) : 0.0, NULL);
	}
	if (!profile && (e = getenv("FG_BENCH_E4B_K12")) && *e) {
		const char *h = getenv("FG_BENCH_HF_MS");

		engine_e4b(e, read_gbs, body_kind, h ? strtod(h, NULL) : 0.0, getenv("FG_BENCH_E4B_LEVELS"));
	}
	if (!profile && (e = getenv("FG_BENCH_MODEL")) && *e)
		engine_model(e);
	return 0;
}
