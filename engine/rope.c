/* rope.c - RoPE inverse frequencies by rope_type (see rope.h). Each step is
 * the fp32 operation torch performs: a Python scalar meets a float32 tensor
 * as a float32, `s / t` is t.reciprocal() * s (Tensor.__rtruediv__), and
 * scalar arithmetic before it is Python's double. Checked against tables
 * transformers itself made: tests/fixtures/oracle/rope_tables.json. */
#include "engine/rope.h"

#include <math.h>

#include "engine/cpu/ops.h"

/* base ** (arange(0, d, 2) / d) in float32, i < half */
static float pow_freq(double base, int i, int d)
{
	float e = (float)(2 * i) / (float)d;

	return (float)pow((double)(float)base, (double)e);
}

/* yarn's find_correction_dim */
static double corr_dim(double rot, int d, double base, double orig)
{
	return ((double)d * log(orig / (rot * 2 * M_PI))) / (2 * log(base));
}

static void yarn(float *inv, const struct fg_g4_rope *r, int d)
{
	int half = d / 2, i;
	double lo = floor(corr_dim(r->beta_fast, d, r->theta, r->orig_max));
	double hi = ceil(corr_dim(r->beta_slow, d, r->theta, r->orig_max));
	float flo, span;

	lo = lo > 0 ? lo : 0;
	hi = hi < d - 1 ? hi : d - 1;
	if (lo == hi)
		hi += 0.001;
	flo = (float)lo;
	span = (float)(hi - lo);
	for (i = 0; i < half; i++) {
		float pf = pow_freq(r->theta, i, d);
		float ext = 1.0f / pf, itp = 1.0f / ((float)r->factor * pf);
		float ramp = ((float)i - flo) / span;
		float ef;

		ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
		ef = 1.0f - ramp;
		inv[i] = itp * (1.0f - ef) + ext * ef;
	}
}

static void llama3(float *inv, const struct fg_g4_rope *r, int d)
{
	int half = d / 2, i;
	float two_pi = (float)(2 * M_PI), f = (float)r->factor;
	float lfw = (float)(r->orig_max / r->low_freq), hfw = (float)(r->orig_max / r->high_freq);
	float span = (float)(r->high_freq - r->low_freq);

	fg_cpu_rope_freqs(inv, d, r->theta, 0, 1.0, 1.0);
	for (i = 0; i < half; i++) {
		float wl = (1.0f / inv[i]) * two_pi;
		float il = wl > lfw ? inv[i] / f : inv[i];
		float s = ((1.0f / wl) * (float)r->orig_max - (float)r->low_freq) / span;
		float sm = ((1.0f - s) * il) / f + s * il;

		inv[i] = (!(wl < hfw) && !(wl > lfw)) ? sm : il;
	}
}

void fg_g4_rope_table(float *inv, const struct fg_g4_rope *r, int d)
{
	switch (r->type) {
	case FG_ROPE_PROPORTIONAL:
		fg_cpu_rope_freqs(inv, d, r->theta, 1, r->partial, r->factor);
		return;
	case FG_ROPE_LINEAR:
		fg_cpu_rope_freqs(inv, d, r->theta, 0, 1.0, r->factor);
		return;
	case FG_ROPE_DYNAMIC:
		/* seq_len = max_position_embeddings: base * (factor * L / L -
		 * (factor - 1)) ** (d / (d - 2)), in Python's double */
		fg_cpu_rope_freqs(inv, d,
				  r->theta * pow(r->factor * r->max_position / r->max_position - (r->factor - 1),
						 (double)d / (double)(d - 2)),
				  0, 1.0, 1.0);
		return;
	case FG_ROPE_YARN:
		yarn(inv, r, d);
		return;
	case FG_ROPE_LLAMA3:
		llama3(inv, r, d);
		return;
	default:
		fg_cpu_rope_freqs(inv, d, r->theta, 0, 1.0, 1.0);
		return;
	}
}
