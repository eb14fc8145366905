/* i8split.h - the activation split of the INT8 tensor-core INT4 kernel
 * (kernels/int4_i8.cu), included by the kernel and by its CPU twin
 * (kernels/cpu_twin.c) so that both compute the same integers.
 *
 * A scale group of fp32 activations whose largest magnitude is amax gets the
 * exponent e = E - 6, where amax = f * 2^E with f in [0.5, 1) (frexp), so
 * every |x| * 2^-e is below 64. Each x is then written as
 *     x = 2^e * (a0 + a1 / 128 + a2 / 128^2 + a3 / 128^3 + r),
 * a_p = rint of what is left, times 128 after each step: every a_p lies in
 * [-64, 64] (an int8), and each step is exact in fp32 (a power-of-two
 * scaling, the subtraction of the nearest integer), so the parts carry
 * 6 + 3 * 7 = 27 bits below the group's largest value: |x - parts| <=
 * 2^(e-22). With the weights' integers q in [-8, 7], sum q * a_p over a
 * group is an exact int32; the kernel scales it by 2^(e - 7p) and the
 * weight scale in fp32.
 *
 * A group holding Inf or NaN gets the multiplier NaN for all its parts, so
 * the sums it reaches are NaN, as a float dot product's would be. */
#ifndef FG_I8SPLIT_H
#define FG_I8SPLIT_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define FG_I8_FN static __host__ __device__ __forceinline__
#else
#define FG_I8_FN static inline
#endif

#define FG_I8_PARTS 4

/* The bits of |x|: unsigned order = magnitude order for non-NaN floats, and
 * a NaN's bits exceed every finite value's and Inf's. */
FG_I8_FN uint32_t fg_i8_abs_bits(float x)
{
	union {
		float f;
		uint32_t u;
	} v;

	v.f = x;
	return v.u & 0x7fffffffu;
}

/* The group's exponent from the largest fg_i8_abs_bits of its values:
 * frexp's exponent minus 6, read off the bits for a normal amax. */
FG_I8_FN int fg_i8_exp(uint32_t amax_bits)
{
	union {
		float f;
		uint32_t u;
	} v;
	int E = 0;

	if (amax_bits == 0 || amax_bits >= 0x7f800000u)
		return 0;
	if (amax_bits >= 0x00800000u)
		return (int)(amax_bits >> 23) - 126 - 6;
	v.u = amax_bits;
	(void)frexpf(v.f, &E);
	return E - 6;
}

/* x * 2^p: one multiplication by a power of two where 2^p is a normal float
 * (the same correctly rounded result as ldexpf), ldexpf otherwise. */
FG_I8_FN float fg_i8_ldexp(float x, int p)
{
	union {
		float f;
		uint32_t u;
	} v;

	if (p < -126 || p > 127)
		return ldexpf(x, p);
	v.u = (uint32_t)(p + 127) << 23;
	return x * v.f;
}

/* The four parts of x for its group's exponent e; zeros for a value of a
 * non-finite group (its multiplier carries the NaN). */
FG_I8_FN void fg_i8_split(float x, int e, int8_t *a)
{
	float r = fg_i8_ldexp(x, -e);

	if (!(fabsf(r) < 64.0f))
		r = 0.0f;
	for (int p = 0; p < FG_I8_PARTS; p++) {
		float q = rintf(r);

		a[p] = (int8_t)q;
		r = (r - q) * 128.0f;
	}
}

/* The multiplier of part p's sums: 2^(e - 7p), or NaN for a non-finite group. */
FG_I8_FN float fg_i8_mult(uint32_t amax_bits, int e, int p)
{
	if (amax_bits >= 0x7f800000u)
		return nanf("");
	return fg_i8_ldexp(1.0f, e - 7 * p);
}

#endif
