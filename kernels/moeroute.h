/* moeroute.h - the router's choice for one token (Gemma4TextRouter after
 * its projection: softmax over the experts, the top k with the lower index
 * first on a tie, renormalized, times per_expert_scale, then the chosen
 * experts put in ascending index order, the order their outputs are summed
 * in), included by the kernel (kernels/moe.cu) and by its CPU twin
 * (kernels/cpu_twin.c) so that both run the same steps; engine/engine.c's
 * route() is the reference they follow. */
#ifndef FG_MOEROUTE_H
#define FG_MOEROUTE_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define FG_MOE_FN static __host__ __device__ __forceinline__
#else
#define FG_MOE_FN static inline
#endif

/* The weights and the order, once the choice is made: idx [K] in the order
 * chosen, mx the largest logit (the first of equals), sum the exponentials
 * e^(logit - mx) added in expert order. */
FG_MOE_FN void fg_moe_route_finish(int32_t *idx, float *w, const float *logits, const float *escale, float mx,
				   float sum, int K)
{
	float ksum = 0.0f;

	for (int j = 0; j < K; j++) {
		w[j] = expf(logits[idx[j]] - mx) / sum;
		ksum += w[j];
	}
	for (int j = 0; j < K; j++)
		w[j] = w[j] / ksum * escale[idx[j]];
	for (int j = 1; j < K; j++) /* ascending expert index: the order of the sum */
		for (int q = j; q > 0 && idx[q - 1] > idx[q]; q--) {
			int32_t ti = idx[q];
			float tw = w[q];

			idx[q] = idx[q - 1], w[q] = w[q - 1];
			idx[q - 1] = ti, w[q - 1] = tw;
		}
}

/* idx [K], w [K] from logits [E] and escale [E]; 1 <= K <= E. */
FG_MOE_FN void fg_moe_route_one(int32_t *idx, float *w, const float *logits, const float *escale, int E, int K)
{
	float mx = logits[0], sum = 0.0f;

	for (int i = 1; i < E; i++)
		if (logits[i] > mx)
			mx = logits[i];
	for (int j = 0; j < K; j++) {
		int best = -1;

		for (int i = 0; i < E; i++) {
			int taken = 0;

			for (int q = 0; q < j; q++)
				taken |= idx[q] == i;
			if (!taken && (best < 0 || logits[i] > logits[best]))
				best = i;
		}
		idx[j] = best;
	}
	for (int i = 0; i < E; i++)
		sum += expf(logits[i] - mx);
	fg_moe_route_finish(idx, w, logits, escale, mx, sum, K);
}

#endif
