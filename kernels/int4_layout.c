/* int4_layout.c - the engine's two INT4 layouts (fg_kernels.h): the tile
 * layout of the CUDA-core kernel and the row-block layout of the tensor-core
 * kernel; repacking the standard compressed-tensors pack-quantized format
 * into each and back (host memory, pure C, so it is built and tested
 * without nvcc). */
#include <stdint.h>
#include <string.h>

#include "kernels/fg_kernels.h"
#include "workq.h"

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

/* ---- the tensor-core layout ("fg-int4-mma8-v1") ---------------------------*/

void fg_int4_mma_dims(struct fg_int4_mma_dims *d, int n, int k, int group)
{
	int kq = group > FG_INT4_CHUNK ? group : FG_INT4_CHUNK;

	d->rblocks = (n + FG_INT4_RB - 1) / FG_INT4_RB;
	d->npad = d->rblocks * FG_INT4_RB;
	d->kpad = (k + kq - 1) / kq * kq;
	d->chunks = d->kpad / FG_INT4_CHUNK;
	d->groups = d->kpad / group;
}

/* Offset inside a chunk (0..127) of nibble i of word w held by lane part j
 * (fg_kernels.h): mma s = 2w + bit 1 of i, column 2j (+8 for odd i, +1 for
 * i >= 4). */
int fg_int4_chunk_offset(int j, int w, int i)
{
	return 16 * (2 * w + ((i >> 1) & 1)) + 2 * j + ((i & 1) ? 8 : 0) + (i >= 4 ? 1 : 0);
}

void fg_int4_mma_layout_size(size_t *words_bytes, size_t *scales_bytes, int n, int k, int group)
{
	struct fg_int4_mma_dims d;

	fg_int4_mma_dims(&d, n, k, group);
	*words_bytes = (size_t)d.npad * d.kpad / 2;
	*scales_bytes = (size_t)d.npad * d.groups * 2;
}

int fg_int4_mma_repack(uint32_t *words, uint16_t *scales, const int32_t *packed, const uint16_t *scale_bf16,
		   int n, int k, int group, struct fg_err *err)
{
	struct fg_int4_mma_dims d;
	int rc = check_shape(n, k, group, err);
	size_t kw = (size_t)k / 8, gk = ((size_t)k + group - 1) / group;

	if (rc)
		return rc;
	fg_int4_mma_dims(&d, n, k, group);
	/* row block outer: its 8 rows stay in cache while their chunks are written */
	for (size_t rb = 0; rb < (size_t)d.rblocks; rb++) {
		for (size_t c = 0; c < (size_t)d.chunks; c++) {
			for (size_t r8 = 0; r8 < FG_INT4_RB; r8++) {
				size_t row = rb * FG_INT4_RB + r8;
				uint32_t src[FG_INT4_CHUNK / 8];

				/* the row's 128 elements of this chunk, padded with q = 0 */
				for (size_t s = 0; s < FG_INT4_CHUNK / 8; s++) {
					size_t wj = c * (FG_INT4_CHUNK / 8) + s;

					src[s] = row < (size_t)n && wj < kw ? (uint32_t)packed[row * kw + wj] : 0x88888888u;
				}
				/* fg_int4_chunk_offset in closed form: nibbles q and q + 4 of
				 * word w of lane part j are the low and high nibble of byte j
				 * of the row's standard word 4w + q */
				for (int j = 0; j < 4; j++) {
					uint32_t *dst = words + ((c * d.rblocks + rb) * 32 + r8 * 4 + (size_t)j) * 4;

					for (int w = 0; w < 4; w++) {
						uint32_t v = 0;

						for (int q = 0; q < 4; q++) {
							uint32_t b = (src[4 * w + q] >> (8 * j)) & 0xffu;

							v |= (b & 15u) << (4 * q) | (b >> 4) << (4 * (q + 4));
						}
						dst[w] = v;
					}
				}
			}
		}
	}
	for (size_t g = 0; g < (size_t)d.groups; g++)
		for (size_t row = 0; row < (size_t)d.npad; row++)
			scales[g * d.npad + row] = row < (size_t)n && g < gk ? scale_bf16[row * gk + g] : 0;
	return 0;
}

int fg_int4_mma_unpack(int32_t *packed, uint16_t *scale_bf16, const uint32_t *words, const uint16_t *scales,
		   int n, int k, int group, struct fg_err *err)
{
	struct fg_int4_mma_dims d;
	size_t kw = (size_t)k / 8, gk = ((size_t)k + group - 1) / group;
	int rc = check_shape(n, k, group, err);

	if (rc)
		return rc;
	fg_int4_mma_dims(&d, n, k, group);
	memset(packed, 0, sizeof(int32_t) * (size_t)n * kw);
	for (size_t c = 0; c < (size_t)d.chunks; c++)
		for (size_t rb = 0; rb < (size_t)d.rblocks; rb++)
			for (size_t l = 0; l < 32; l++) {
				size_t row = rb * FG_INT4_RB + l / 4;
				const uint32_t *src = words + ((c * d.rblocks + rb) * 32 + l) * 4;

				if (row >= (size_t)n)
					continue;
				for (int w = 0; w < 4; w++)
					for (int i = 0; i < 8; i++) {
						size_t e = c * FG_INT4_CHUNK + (size_t)fg_int4_chunk_offset((int)(l % 4), w, i);

						if (e < (size_t)k)
							packed[row * kw + e / 8] |=
								(int32_t)(((src[w] >> (4 * i)) & 15u) << (4 * (e % 8)));
					}
			}
	for (size_t row = 0; row < (size_t)n; row++)
		for (size_t g = 0; g < gk; g++)
			scale_bf16[row * gk + g] = scales[g * d.npad + row];
	return 0;
}

/* ---- the INT8 tensor-core layout ("fg-int4-i8-v1") -------------------------*/

void fg_int4_i8_dims(struct fg_int4_i8_dims *d, int n, int k, int group)
{
	d->unit = group > FG_INT4_I8_CHUNK ? group : FG_INT4_I8_CHUNK;
	d->tiles = (n + FG_INT4_I8_TILE - 1) / FG_INT4_I8_TILE;
	d->npad = d->tiles * FG_INT4_I8_TILE;
	d->kpad = (k + d->unit - 1) / d->unit * d->unit;
	d->chunks = d->kpad / FG_INT4_I8_CHUNK;
	d->groups = d->kpad / group;
	d->units = d->kpad / d->unit;
}

int fg_int4_i8_offset(int t, int j, int i)
{
	return 32 * (j >> 1) + ((i & 1) ? 16 : 0) + 4 * t + (i >> 1);
}

void fg_int4_i8_layout_size(size_t *words_bytes, size_t *scales_bytes, int n, int k, int group)
{
	struct fg_int4_i8_dims d;

	fg_int4_i8_dims(&d, n, k, group);
	*words_bytes = (size_t)d.npad * d.kpad / 2;
	*scales_bytes = (size_t)d.npad * d.groups * 2;
}

/* nibble (q + 8) of element e of a standard row; q = 0 past k */
static uint32_t std_nibble(const int32_t *row, size_t k, size_t e)
{
	return e < k ? ((uint32_t)row[e / 8] >> (4 * (e % 8))) & 15u : 8u;
}

/* The low four nibbles of x moved to nibbles 0, 2, 4 and 6 (the others 0). */
static uint32_t nib_spread(uint32_t x)
{
	x &= 0xFFFFu;
	x = (x | x << 8) & 0x00FF00FFu;
	return (x | x << 4) & 0x0F0F0F0Fu;
}

/* An i8 repack split into `slices` runs of tiles in order (every tile
 * writes its own words and scales only, so slices run in any order, on any
 * thread, to the same bytes). */
struct i8_repack {
	uint32_t *words;
	uint16_t *scales;
	const int32_t *packed;
	const uint16_t *scale_bf16;
	struct fg_int4_i8_dims d;
	size_t n, k, kw, gk, slices;
};

/* fg_workq_work_fn: slice `item`'s tiles. */
static int i8_slice_run(void *ctx, size_t item, int thread, struct fg_err *err)
{
	const struct i8_repack *a = ctx;
	const struct fg_int4_i8_dims *d = &a->d;
	size_t t0 = (size_t)d->tiles * item / a->slices, t1 = (size_t)d->tiles * (item + 1) / a->slices;

	(void)thread, (void)err;
	for (size_t t = t0; t < t1; t++) {
		for (size_t c = 0; c < (size_t)d->chunks; c++)
			for (int l = 0; l < 32; l++)
				for (int j = 0; j < 4; j++) {
					size_t row = t * FG_INT4_I8_TILE + (size_t)(l >> 2) + 8 * (size_t)(j & 1);
					/* the word's even nibbles are elements base + 0..3, its odd ones base + 16..19
					 * (fg_int4_i8_offset), each four one 16-bit piece of a standard word */
					size_t base = c * FG_INT4_I8_CHUNK + 32 * (size_t)(j >> 1) + 4 * (size_t)(l & 3);
					uint32_t v = 0;

					if (row < a->n && base + 20 <= a->k) {
						const int32_t *pr = a->packed + row * a->kw;

						v = nib_spread((uint32_t)pr[base / 8] >> (4 * (base % 8))) |
						    nib_spread((uint32_t)pr[(base + 16) / 8] >> (4 * ((base + 16) % 8))) << 4;
					} else {
						for (int i = 0; i < 8; i++) {
							size_t e = c * FG_INT4_I8_CHUNK + (size_t)fg_int4_i8_offset(l & 3, j, i);

							v |= (row < a->n ? std_nibble(a->packed + row * a->kw, a->k, e) : 8u)
							     << (4 * i);
						}
					}
					a->words[((t * d->chunks + c) * 32 + (size_t)l) * 4 + (size_t)j] = v;
				}
		for (size_t g = 0; g < (size_t)d->groups; g++)
			for (size_t r = 0; r < FG_INT4_I8_TILE; r++) {
				size_t row = t * FG_INT4_I8_TILE + r;

				a->scales[((t * d->groups + g) * 8 + r % 8) * 2 + r / 8] =
					row < a->n && g < a->gk ? a->scale_bf16[row * a->gk + g] : 0;
			}
	}
	return 0;
}

#define RP_THREADS_MAX 16 /* threads of one repack at most */
#define RP_TILES_MIN 64   /* tiles a thread takes at least */

int fg_int4_i8_repack_threads(uint32_t *words, uint16_t *scales, const int32_t *packed, const uint16_t *scale_bf16,
			      int n, int k, int group, int threads, struct fg_err *err)
{
	struct i8_repack a = {words, scales, packed, scale_bf16, {0}, (size_t)n, (size_t)k,
			      (size_t)k / 8, ((size_t)k + group - 1) / group, 0};
	int rc = check_shape(n, k, group, err);

	if (rc)
		return rc;
	fg_int4_i8_dims(&a.d, n, k, group);
	if (threads < 1) { /* the CPUs online, at least RP_TILES_MIN tiles each */
		size_t most = (size_t)a.d.tiles / RP_TILES_MIN;

		threads = fg_workq_cpus(RP_THREADS_MAX);
		if ((size_t)threads > most)
			threads = most < 1 ? 1 : (int)most;
	}
	if (threads > RP_THREADS_MAX)
		threads = RP_THREADS_MAX;
	/* one slice a thread: the calling thread takes one, a thread that
	 * cannot start leaves its slice to the others */
	a.slices = (size_t)threads;
	return fg_workq_run(a.slices, threads, i8_slice_run, NULL, &a, err);
}

int fg_int4_i8_repack(uint32_t *words, uint16_t *scales, const int32_t *packed, const uint16_t *scale_bf16, int n,
		      int k, int group, struct fg_err *err)
{
	return fg_int4_i8_repack_threads(words, scales, packed, scale_bf16, n, k, group, 0, err);
}

int fg_int4_i8_unpack(int32_t *packed, uint16_t *scale_bf16, const uint32_t *words, const uint16_t *scales, int n,
		      int k, int group, struct fg_err *err)
{
	struct fg_int4_i8_dims d;
	size_t kw = (size_t)k / 8, gk = ((size_t)k + group - 1) / group;
	int rc = check_shape(n, k, group, err);

	if (rc)
		return rc;
	fg_int4_i8_dims(&d, n, k, group);
	memset(packed, 0, sizeof(int32_t) * (size_t)n * kw);
	for (size_t t = 0; t < (size_t)d.tiles; t++)
		for (size_t c = 0; c < (size_t)d.chunks; c++)
			for (int l = 0; l < 32; l++)
				for (int j = 0; j < 4; j++) {
					size_t row = t * FG_INT4_I8_TILE + (size_t)(l >> 2) + 8 * (size_t)(j & 1);
					uint32_t v = words[((t * d.chunks + c) * 32 + (size_t)l) * 4 + (size_t)j];

					if (row >= (size_t)n)
						continue;
					for (int i = 0; i < 8; i++) {
						size_t e = c * FG_INT4_I8_CHUNK + (size_t)fg_int4_i8_offset(l & 3, j, i);

						if (e < (size_t)k)
							packed[row * kw + e / 8] |= (int32_t)(((v >> (4 * i)) & 15u) << (4 * (e % 8)));
					}
				}
	for (size_t row = 0; row < (size_t)n; row++)
		for (size_t g = 0; g < gk; g++)
			scale_bf16[row * gk + g] =
				scales[(((row / FG_INT4_I8_TILE) * d.groups + g) * 8 + row % 8) * 2 + (row % 16) / 8];
	return 0;
}
