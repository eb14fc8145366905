/* seek_test.h - a tar framed as zstd's seekable format wherever a test
 * says (tests/unit/test_tarlanes.c, tests/fuzz/fuzz_tarlanes.c): one zstd
 * frame per span between cut points, then the seek table (docs/formats/
 * bundle.md), which a test may then falsify; or frames of raw blocks made
 * here, valid or spoilt in one of a few ways. */
#ifndef FG_SEEK_TEST_H
#define FG_SEEK_TEST_H

#include <stdint.h>
#include <string.h>
#include <zstd.h>

#include "bf16.h"
#include "buf.h"
#include "sha256.h"
#include "tarlanes.h" /* the seekable format's magics */
#include "xxh64.h"

#define SEEK_TEST_MAX 64

struct seek_frames {
	uint32_t cs[SEEK_TEST_MAX], ds[SEEK_TEST_MAX]; /* compressed, decompressed sizes */
	size_t n;
};

/* How a hand-made frame of raw blocks is made (the first five valid),
 * or spoilt (RF_BADSUM: a checksum that is not the content's XXH64). */
enum {
	RF_OK, RF_SINGLE, RF_CHECKSUM, RF_EMPTY_LAST, RF_SMALL_BLOCKS,
	RF_BIG_BLOCK, RF_FCS, RF_TYPE3, RF_DICT, RF_WINDOW, RF_RESERVED, RF_NO_LAST, RF_SHORT,
	RF_BADSUM, RF_KINDS
};

/* Appends d[0..len) as one zstd frame of raw blocks (what zstd writes for
 * bytes it cannot compress), made or spoilt as `how` says. */
static int seek_raw_frame(struct fg_buf *f, const unsigned char *d, size_t len, int how)
{
	unsigned char h[32];
	size_t hl = 0, bs = how == RF_SMALL_BLOCKS || how == RF_WINDOW ? 4096 : (size_t)128 << 10, off = 0;
	unsigned long long fcs = (unsigned long long)len + (how == RF_FCS);
	size_t at0 = f->len;
	int first = 1;

	fg_put_le32(h, 0xFD2FB528u);
	/* FCS in 4 bytes; single segment (no window byte) or a window of
	 * 128 KiB (1 KiB: RF_WINDOW) */
	h[4] = (unsigned char)(0x80 | (how == RF_SINGLE) << 5 | (how == RF_CHECKSUM || how == RF_BADSUM) << 2 |
			       (how == RF_RESERVED) << 3 | (how == RF_DICT));
	hl = 5;
	if (how != RF_SINGLE)
		h[hl++] = how == RF_WINDOW ? 0 : 7 << 3;
	if (how == RF_DICT)
		h[hl++] = 5;
	fg_put_le32(h + hl, (uint32_t)fcs);
	hl += 4;
	if (fg_buf_append(f, h, hl, NULL))
		return -1;
	do {
		size_t size = len - off < bs ? len - off : bs;
		unsigned long long bh;
		int last;

		if (how == RF_BIG_BLOCK && first && len > bs)
			size = bs + 1;
		last = off + size == len && how != RF_EMPTY_LAST && how != RF_NO_LAST;
		bh = (unsigned long long)last | (how == RF_TYPE3 && !first ? 3ull << 1 : 0) |
		     (unsigned long long)size << 3;
		h[0] = (unsigned char)bh, h[1] = (unsigned char)(bh >> 8), h[2] = (unsigned char)(bh >> 16);
		if (fg_buf_append(f, h, 3, NULL) || fg_buf_append(f, d + off, size, NULL))
			return -1;
		off += size;
		first = 0;
	} while (off < len);
	if (how == RF_EMPTY_LAST && fg_buf_append(f, "\1\0\0", 3, NULL))
		return -1;
	if (how == RF_CHECKSUM || how == RF_BADSUM) {
		/* the content's XXH64, low 4 bytes (RF_BADSUM: one bit off):
		 * every reader checks it (since 2026-12-06) */
		unsigned char c[4];

		fg_put_le32(c, (uint32_t)fg_xxh64(d, len, 0) ^ (how == RF_BADSUM));
		if (fg_buf_append(f, c, 4, NULL))
			return -1;
	}
	if (how == RF_SHORT)
		f->len -= f->len - at0 > 100 ? 100 : 1;
	return 0;
}

/* how for seek_frames: every frame compressed by zstd (ZSTD_compress at
 * level 1, its content size in the header), not made here */
#define SEEK_ZSTD (-1)

/* Appends tar[0..len) to f as frames cut at cut[0..ncut) (ascending; cuts
 * past len or not after the previous one are ignored), at most
 * SEEK_TEST_MAX: compressed by zstd (how SEEK_ZSTD), or made here of raw
 * blocks, the last frame as `how` says (RF_*). -1 on a zstd or memory
 * error. */
static inline int seek_frames(struct fg_buf *f, struct seek_frames *sf, const unsigned char *tar,
			      size_t len, const size_t *cut, size_t ncut, int how)
{
	size_t i, from = 0;

	sf->n = 0;
	for (i = 0; i <= ncut; i++) {
		size_t to = i < ncut && cut[i] < len ? cut[i] : len, at0 = f->len;

		if (to <= from || sf->n == SEEK_TEST_MAX - 1 + (i == ncut))
			continue;
		if (how == SEEK_ZSTD) {
			size_t bound = ZSTD_compressBound(to - from), got;

			if (fg_buf_reserve(f, bound, NULL))
				return -1;
			got = ZSTD_compress(f->data + f->len, bound, tar + from, to - from, 1);
			if (ZSTD_isError(got))
				return -1;
			f->len += got;
		} else if (seek_raw_frame(f, tar + from, to - from, to == len ? how : RF_OK)) {
			return -1;
		}
		sf->cs[sf->n] = (uint32_t)(f->len - at0);
		sf->ds[sf->n++] = (uint32_t)(to - from);
		from = to;
	}
	return 0;
}

/* Appends the identity's states frame (FG_TAR_IDST_*, as the writer makes
 * it) for the frames of sf over tar: the SHA-256 chain state at each
 * frame's start after the first that is a multiple of 64, the frame listed
 * in sf with no tar bytes. spoil 1 + k: entry k (mod their count) has a
 * byte of its state flipped. Nothing when no frame start qualifies. */
static inline int seek_append_id_states(struct fg_buf *f, struct seek_frames *sf, const unsigned char *tar,
				 int spoil)
{
	unsigned char t[8 + FG_TAR_IDST_HEAD + SEEK_TEST_MAX * FG_TAR_IDST_ENTRY];
	struct fg_sha256 *h = NULL;
	unsigned long long at = 0;
	size_t i, n = 0, len;

	if (sf->n >= SEEK_TEST_MAX || fg_sha256_new_own(&h, NULL))
		return -1;
	for (i = 0; i + 1 < sf->n; i++) {
		unsigned char *e = t + 8 + FG_TAR_IDST_HEAD + FG_TAR_IDST_ENTRY * n;

		if (fg_sha256_update(h, tar + at, sf->ds[i], NULL))
			break;
		at += sf->ds[i];
		if (at % 64 || fg_sha256_state(h, e + 8, NULL))
			continue;
		fg_put_le32(e, (uint32_t)at);
		fg_put_le32(e + 4, (uint32_t)(at >> 32));
		n++;
	}
	fg_sha256_free(h);
	if (!n)
		return 0;
	if (spoil)
		t[8 + FG_TAR_IDST_HEAD + FG_TAR_IDST_ENTRY * ((size_t)(spoil - 1) % n) + 8 + 5] ^= 0x04;
	len = 8 + FG_TAR_IDST_HEAD + FG_TAR_IDST_ENTRY * n;
	fg_put_le32(t, FG_TAR_IDST_MAGIC);
	fg_put_le32(t + 4, (uint32_t)(len - 8));
	memcpy(t + 8, FG_TAR_IDST_TAG, 8);
	fg_put_le32(t + 16, 1);
	fg_put_le32(t + 20, (uint32_t)n);
	sf->cs[sf->n] = (uint32_t)len;
	sf->ds[sf->n++] = 0;
	return fg_buf_append(f, t, len, NULL);
}

/* Appends the seek table of sf with the descriptor byte given. */
static int seek_append_table(struct fg_buf *f, const struct seek_frames *sf, unsigned char descriptor)
{
	unsigned char t[8 + SEEK_TEST_MAX * 8 + 9];
	size_t i, n = sf->n;

	fg_put_le32(t, FG_TAR_SKIPPABLE_MAGIC);
	fg_put_le32(t + 4, (uint32_t)(n * 8 + 9));
	for (i = 0; i < n; i++) {
		fg_put_le32(t + 8 + 8 * i, sf->cs[i]);
		fg_put_le32(t + 12 + 8 * i, sf->ds[i]);
	}
	fg_put_le32(t + 8 + 8 * n, (uint32_t)n);
	t[12 + 8 * n] = descriptor;
	fg_put_le32(t + 13 + 8 * n, FG_TAR_SEEKABLE_MAGIC);
	return fg_buf_append(f, t, 8 + n * 8 + 9, NULL);
}

#endif
