/* test_xxh64.c - XXH64 (lib/xxh64.c) on digests printed by the xxHash
 * project's own `xxhsum -H1` (Debian's xxhash package), and its low 32 bits
 * against the content checksum libzstd writes into a frame, for every
 * length 0..700 and a few large ones, fed whole and cut at random points. */
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "tap.h"
#include "xxh64.h"

static unsigned rnd_state = 12345;

static unsigned rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

/* what libzstd stores as the frame's content checksum for these bytes */
static unsigned zstd_checksum(ZSTD_CCtx *c, const void *p, size_t n, void *out, size_t cap)
{
	size_t z = ZSTD_compress2(c, out, cap, p, n);
	const unsigned char *e = (const unsigned char *)out + z - 4;

	if (ZSTD_isError(z) || z < 4)
		return 0;
	return (unsigned)e[0] | (unsigned)e[1] << 8 | (unsigned)e[2] << 16 | (unsigned)e[3] << 24;
}

/* the digest with the input fed in random cuts */
static uint64_t cut_digest(const unsigned char *p, size_t n)
{
	struct fg_xxh64 h;
	size_t at = 0;

	fg_xxh64_init(&h, 0);
	while (at < n) {
		size_t take = rnd() % 70;

		if (take > n - at)
			take = n - at;
		fg_xxh64_update(&h, p + at, take);
		at += take;
	}
	return fg_xxh64_digest(&h);
}

int main(void)
{
	static const struct {
		const char *s;
		uint64_t want;
	} known[] = {
		{ "", 0xef46db3751d8e999ULL },
		{ "a", 0xd24ec4f1a98c6e5bULL },
		{ "abc", 0x44bc2cf5ad770999ULL },
		{ "The quick brown fox jumps over the lazy dog", 0x0b242d361fda71bcULL },
		{ "0123456789abcdef0123456789abcdef0", 0xe87684f08d6d0816ULL },
	};
	size_t big[] = { 4096, 65536 + 13, 1 << 20 };
	size_t cap = ZSTD_compressBound(1 << 20), n, i, bad = 0, badcut = 0;
	unsigned char *buf = malloc(1 << 20), *out = malloc(cap);
	ZSTD_CCtx *c = ZSTD_createCCtx();

	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		ok(fg_xxh64(known[i].s, strlen(known[i].s), 0) == known[i].want, "xxhsum -H1 of \"%s\"",
		   known[i].s);
	/* bytes (i * 7 + 3) mod 256, 1000 of them: xxhsum -H1 gives 5f235fa033f1a3fb */
	for (i = 0; i < 1000; i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	ok(fg_xxh64(buf, 1000, 0) == 0x5f235fa033f1a3fbULL, "xxhsum -H1 of 1000 patterned bytes");
	ok(cut_digest(buf, 1000) == 0x5f235fa033f1a3fbULL, "the same fed in random cuts");
	for (i = 0; i < (1 << 20); i++)
		buf[i] = (unsigned char)rnd();
	for (n = 0; n <= 700; n++) {
		uint64_t d = fg_xxh64(buf, n, 0);

		if ((unsigned)(d & 0xffffffffu) != zstd_checksum(c, buf, n, out, cap))
			bad++;
		if (cut_digest(buf, n) != d)
			badcut++;
	}
	is_int(bad, 0, "low 32 bits = libzstd's frame checksum, lengths 0..700");
	is_int(badcut, 0, "fed in random cuts = fed whole, lengths 0..700");
	for (i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		uint64_t d = fg_xxh64(buf, big[i], 0);

		ok((unsigned)(d & 0xffffffffu) == zstd_checksum(c, buf, big[i], out, cap),
		   "libzstd's checksum, %zu bytes", big[i]);
		ok(cut_digest(buf, big[i]) == d, "random cuts, %zu bytes", big[i]);
	}
	ok(fg_xxh64("abc", 3, 1) != fg_xxh64("abc", 3, 0), "the seed changes the digest");
	ZSTD_freeCCtx(c);
	free(buf);
	free(out);
	return tap_done();
}
