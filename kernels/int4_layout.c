/* int4_layout.c - the engine's INT4 tile layout: repacking the standard
 * compressed-tensors pack-quantized format into it and back (host memory,
 * pure C, so it is built and tested without nvcc). Layout in fg_kernels.h. */
#include <stdint.h>
#include <string.h>

#include "kernels/fg_kernels.h"

#define PAD_WORD 0x88888888u /* eight nibbles of q + 8 = 8: q = 0 */

static int check_shape(int n, int k, int group, struct fg_err *err)
{
	if (group != 32 && group != 64 && group != 128 && group != 256)
		return fg_err_set(err, FG_EUNSUPPORTED, "int4 group size %d: the kernels take 32, 64, 128 or 256", group);
	if (n < 1 || k < 8 || k % 8 != 0)
		return fg_err_set(err, FG_EINVAL, "int4 matrix %d x %d: need n >= 1 and k a positive multiple of 8", n, k);
	if (n > (1 << 24) || k > (1 << 24))
		return fg_err_set(err, FG_EINVAL, "int4 matrix %d x %d: too large", n, k);
	return 0;
}

static void dims(int n, int k, int group, size_t *tiles, size_t *kpad)
{
	*tiles = ((size_t)n + FG_INT4_TILE - 1) / FG_INT4_TILE;
	*kpad = ((size_t)k + group - 1) / group * group;
}

void fg_int4_layout_size(size_t *words_bytes, size_t *scales_bytes, int n, int k, int group)
{
	size_t tiles, kpad;

	dims(n, k, group, &tiles, &kpad);
	/* 32 rows x kpad/8 words per tile; 32 rows x kpad/128 scales per tile */
	*words_bytes = tiles * FG_INT4_TILE * (kpad / 8) * 4;
	*scales_bytes = tiles * FG_INT4_TILE * (kpad / group) * 2;
}

int fg_int4_repack(uint32_t *words, uint16_t *scales, const int32_t *packed, const uint16_t *scale_bf16,
		   int n, int k, int group, struct fg_err *err)
{
	size_t tiles, kpad, kc, gc, kw, gk;
	int rc = check_shape(n, k, group, err);

	if (rc)
		return rc;
	dims(n, k, group, &tiles, &kpad);
	kc = kpad / 32;               /* chunks of 32 elements (4 words) */
	gc = kpad / group;            /* groups in the padded row */
	kw = (size_t)k / 8;           /* words in a standard row */
	gk = ((size_t)k + group - 1) / group; /* scales in a standard row */
	for (size_t t = 0; t < tiles; t++) {
		for (size_t c = 0; c < kc; c++) {
			for (size_t r = 0; r < FG_INT4_TILE; r++) {
				size_t row = t * FG_INT4_TILE + r;
				uint32_t *dst = words + ((t * kc + c) * FG_INT4_TILE + r) * 4;

				for (size_t j = 0; j < 4; j++) {
					size_t wj = c * 4 + j;

					dst[j] = row < (size_t)n && wj < kw ? (uint32_t)packed[row * kw + wj] : PAD_WORD;
				}
			}
		}
		for (size_t g = 0; g < gc; g++) {
			for (size_t r = 0; r < FG_INT4_TILE; r++) {
				size_t row = t * FG_INT4_TILE + r;

				scales[(t * gc + g) * FG_INT4_TILE + r] =
					row < (size_t)n && g < gk ? scale_bf16[row * gk + g] : 0;
			}
		}
	}
	return 0;
}

int fg_int4_unpack(int32_t *packed, uint16_t *scale_bf16, const uint32_t *words, const uint16_t *scales,
		   int n, int k, int group, struct fg_err *err)
{
	size_t tiles, kpad, kc, gc, kw, gk;
	int rc = check_shape(n, k, group, err);

	if (rc)
		return rc;
	dims(n, k, group, &tiles, &kpad);
	kc = kpad / 32;
	gc = kpad / group;
	kw = (size_t)k / 8;
	gk = ((size_t)k + group - 1) / group;
	for (size_t row = 0; row < (size_t)n; row++) {
		size_t t = row / FG_INT4_TILE, r = row % FG_INT4_TILE;

		for (size_t wj = 0; wj < kw; wj++)
			packed[row * kw + wj] = (int32_t)words[((t * kc + wj / 4) * FG_INT4_TILE + r) * 4 + wj % 4];
		for (size_t g = 0; g < gk; g++)
			scale_bf16[row * gk + g] = scales[(t * gc + g) * FG_INT4_TILE + r];
	}
	return 0;
}
