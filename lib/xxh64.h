/* xxh64.h - XXH64, the 64-bit xxHash (seed 0 by default): the content
 * checksum of a zstd frame is its low 32 bits, little-endian (RFC 8878,
 * 3.1.1). Written from the xxHash specification (doc/xxhash_spec.md of the
 * xxHash project): four 64-bit lanes over 32-byte stripes, then the tail. */
#ifndef FG_XXH64_H
#define FG_XXH64_H

#include <stddef.h>
#include <stdint.h>

struct fg_xxh64 {
	uint64_t v[4];
	uint64_t total; /* bytes taken */
	uint64_t seed;
	unsigned char part[32]; /* a stripe not yet whole */
	size_t npart;
};

void fg_xxh64_init(struct fg_xxh64 *h, uint64_t seed);
void fg_xxh64_update(struct fg_xxh64 *h, const void *data, size_t len);
/* The digest of everything taken; h is left as it was. */
uint64_t fg_xxh64_digest(const struct fg_xxh64 *h);
uint64_t fg_xxh64(const void *data, size_t len, uint64_t seed);

#endif
