/* bf16.h - bfloat16 <-> float32 conversion (bit-exact, header only; C and
 * C++, for the kernels' host code), and
 * IEEE binary16 (F16, "half") -> float32.
 *
 * bf16 is the top 16 bits of an IEEE binary32. Widening is exact. Narrowing
 * rounds to nearest, ties to even (what torch's .to(torch.bfloat16) does);
 * NaN stays NaN (quiet bit set, sign kept), ±Inf stays ±Inf, and finite
 * values that round past the largest bf16 become ±Inf. Values are passed as
 * raw uint16_t bits so no compiler extension type is needed.
 *
 * F16 widening is exact too: every half (subnormals included) is a float.
 * ±Inf stays ±Inf; a NaN keeps its sign and payload with the quiet bit set,
 * as the F16C instruction (vcvtph2ps) does, so both give the same bits. */
#ifndef FG_BF16_H
#define FG_BF16_H

#include <stdint.h>
#include <string.h>

static inline float fg_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint16_t fg_f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x0040u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline float fg_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
	float f;

	if (e == 0x1f)
		u = sign | 0x7f800000u | (m ? 0x00400000u | m << 13 : 0);
	else if (e)
		u = sign | (e + 112) << 23 | m << 13; /* rebias 15 -> 127 */
	else {
		f = (float)m * 0x1p-24f; /* subnormal (or zero): m * 2^-24, exact */
		memcpy(&u, &f, sizeof(u));
		u |= sign;
	}
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Little-endian loads and stores of raw bf16 bits from byte buffers. */
static inline uint16_t fg_le16(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;

	return (uint16_t)(b[0] | b[1] << 8);
}

/* n halves at src (little-endian, unaligned) widened into out. */
static inline void fg_f16_row_to_f32(float *out, const uint8_t *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		out[i] = fg_f16_to_f32(fg_le16(src + 2 * i));
}

static inline void fg_put_le16(void *p, uint16_t v)
{
	uint8_t *b = (uint8_t *)p;

	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
}

static inline void fg_put_le32(void *p, uint32_t v)
{
	uint8_t *b = (uint8_t *)p;

	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)(v >> 16);
	b[3] = (uint8_t)(v >> 24);
}

static inline uint32_t fg_le32(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;

	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

#endif
