/* seek_test.h - a tar framed as zstd's seekable format wherever a test
 * says (tests/unit/test_tarlanes.c, tests/fuzz/fuzz_tarlanes.c): one zstd
 * frame per span between cut points, then the seek table (docs/formats/
 * bundle.md), which a test may then falsify. */
#ifndef FG_SEEK_TEST_H
#define FG_SEEK_TEST_H

#include <stdint.h>
#include <zstd.h>

#include "bf16.h"
#include "buf.h"
#include "tarlanes.h" /* the seekable format's magics */

#define SEEK_TEST_MAX 64

struct seek_frames {
	uint32_t cs[SEEK_TEST_MAX], ds[SEEK_TEST_MAX]; /* compressed, decompressed sizes */
	size_t n;
};

/* Appends tar[0..len) to f as frames cut at cut[0..ncut) (ascending; cuts
 * past len or not after the previous one are ignored), at most
 * SEEK_TEST_MAX. -1 on a zstd or memory error. */
static int seek_compress(struct fg_buf *f, struct seek_frames *sf, const unsigned char *tar,
			 size_t len, const size_t *cut, size_t ncut)
{
	size_t i, from = 0;

	sf->n = 0;
	for (i = 0; i <= ncut; i++) {
		size_t to = i < ncut && cut[i] < len ? cut[i] : len, bound, got;

		if (to <= from || sf->n == SEEK_TEST_MAX - 1 + (i == ncut))
			continue;
		bound = ZSTD_compressBound(to - from);
		if (fg_buf_reserve(f, bound, NULL))
			return -1;
		got = ZSTD_compress(f->data + f->len, bound, tar + from, to - from, 1);
		if (ZSTD_isError(got))
			return -1;
		f->len += got;
		sf->cs[sf->n] = (uint32_t)got;
		sf->ds[sf->n++] = (uint32_t)(to - from);
		from = to;
	}
	return 0;
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
