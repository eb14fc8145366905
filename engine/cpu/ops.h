/* ops.h - the CPU reference operations of the Gemma 4 forward pass, plain C
 * in fp32. Each is the CPU twin of a CUDA kernel (kernels/): same inputs,
 * same shapes, same math as transformers' Gemma4 modules (docs/engine.md).
 *
 * Every function is deterministic: a given input gives the same bits on any
 * x86-64 build, whatever the thread count, because each output element is
 * computed by one call with a fixed summation order. */
#ifndef FG_CPU_OPS_H
#define FG_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

/* Storage formats of a linear layer's weight. */
enum {
	FG_W_F32 = 1,  /* float [rows][cols] */
	FG_W_BF16 = 2, /* bf16 bits [rows][cols] */
	FG_W_INT4 = 3, /* compressed-tensors pack-quantized, symmetric: */
		       /* packed int32 [rows][cols/8], nibble i of word j = q+8 of */
		       /* column 8j+i; scale bf16 [rows][cols/group]; w = q * scale */
	FG_W_F16 = 4,  /* IEEE half bits [rows][cols], widened exactly per row */
};

/* A weight matrix W [rows = out features][cols = in features], borrowed from
 * the mapped checkpoint (data need not be aligned). */
struct fg_lin {
	int fmt;
	int rows, cols;
	const void *w;         /* see FG_W_*; NULL = absent */
	const void *scale;     /* INT4 only: bf16 [rows][cols/group] */
	int group;             /* INT4 only: columns per scale */
};

/* The x86-64 build has AVX2 versions of the dot products and row widening
 * that give the same bits as the plain C loops (same summation order, no
 * FMA); they are used when the CPU has AVX2 unless FG_NO_AVX2 is set in the
 * environment. fg_cpu_set_simd(0) forces the plain loops (tests compare the
 * two); returns the previous setting. */
int fg_cpu_set_simd(int on);

/* Sum of a[i]*b[i], i < n, in the fixed order every op uses: eight running
 * partial sums over i mod 8, combined pairwise, then the tail. */
float fg_cpu_dot(const float *a, const float *b, int n);

/* Row r of W widened to fp32 (exact for every format; INT4: q * scale).
 * out[cols]. */
void fg_cpu_lin_row(const struct fg_lin *w, int r, float *out);

/* y[t][r] = sum_c W[r][c] * x[t][c] for rows r in [r0, r1), t < T.
 * x [T][cols], y [T][rows]; row_buf holds cols floats of scratch. The row is
 * widened once and dotted with every x[t], so T = 1 (decode) and T > 1
 * (prefill) give identical bits. */
void fg_cpu_matmul_rows(const struct fg_lin *w, const float *x, int T, float *y, int r0, int r1,
			float *row_buf);

/* Gemma4RMSNorm over n values: y = x * (mean(x^2) + eps)^-0.5 * w, with no +1
 * on w; w NULL = no weight (v_norm). In place allowed (y == x). */
void fg_cpu_rmsnorm(float *y, const float *x, const float *w, int n, float eps);

/* gelu with the tanh approximation (torch's approximate="tanh"), in place. */
void fg_cpu_gelu_tanh(float *x, int n);

/* Inverse frequencies of one layer type, d/2 of them (d = head dim):
 * not proportional: inv[i] = 1 / theta^(2i/d), then / factor (partial unused;
 *               Gemma 4's "default" passes factor 1: it ignores the key,
 *               "linear" passes its factor);
 * proportional: the same for i < floor(partial * d / 2), 0 after (those
 *               dimensions pass through unrotated); then all / factor.
 * The other rope types: engine/rope.h. */
void fg_cpu_rope_freqs(float *inv, int d, double theta, int proportional, double partial,
		       double factor);

/* Rotate-half RoPE of one head x[d] at position pos: for i < d/2, with
 * a = pos * inv[i], c = cos a * scale, s = sin a * scale (fp32; scale is
 * transformers' attention_scaling, yarn's attention factor, else 1):
 * x[i] = x[i] c - x[i + d/2] s, x[i + d/2] = x[i + d/2] c + x[i] s. */
void fg_cpu_rope_scaled(float *x, int d, const float *inv, int pos, float scale);

/* One query head over n cached positions, scale 1.0, no softcap:
 * s_j = q . k_j, p = softmax(s), out = sum_j p_j v_j, in position order.
 * k(j), v(j) give the head's d floats of the j-th attended position (the
 * caller maps positions to ring slots); scores holds n floats of scratch. */
void fg_cpu_attend(float *out, const float *q, int d, const float *const *k, const float *const *v,
		   int n, float *scores);

/* logits = cap * tanh(logits / cap), in place; cap <= 0 leaves them. */
void fg_cpu_softcap(float *x, int n, float cap);

#endif
