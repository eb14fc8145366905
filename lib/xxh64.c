/* xxh64.c - XXH64 (see xxh64.h). */
#include "xxh64.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static uint64_t rotl(uint64_t x, int r)
{
	return x << r | x >> (64 - r);
}

/* n (4 or 8) bytes at p, little-endian: one load where the CPU is */
static uint64_t load_le(const unsigned char *p, int n)
{
	uint64_t v = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(&v, p, (size_t)n);
#else
	int i;

	for (i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
#endif
	return v;
}

#define get64(p) load_le((p), 8)
#define get32(p) load_le((p), 4)

static uint64_t lane_round(uint64_t acc, uint64_t lane)
{
	acc += lane * P2;
	return rotl(acc, 31) * P1;
}

static uint64_t merge(uint64_t acc, uint64_t v)
{
	acc ^= lane_round(0, v);
	return acc * P1 + P4;
}

static void stripe(uint64_t v[4], const unsigned char *p)
{
	v[0] = lane_round(v[0], get64(p));
	v[1] = lane_round(v[1], get64(p + 8));
	v[2] = lane_round(v[2], get64(p + 16));
	v[3] = lane_round(v[3], get64(p + 24));
}

void fg_xxh64_init(struct fg_xxh64 *h, uint64_t seed)
{
	memset(h, 0, sizeof(*h));
	h->seed = seed;
	h->v[0] = seed + P1 + P2;
	h->v[1] = seed + P2;
	h->v[2] = seed;
	h->v[3] = seed - P1;
}

void fg_xxh64_update(struct fg_xxh64 *h, const void *data, size_t len)
{
	const unsigned char *p = data;

	h->total += len;
	if (h->npart) {
		size_t take = 32 - h->npart < len ? 32 - h->npart : len;

		memcpy(h->part + h->npart, p, take);
		h->npart += take;
		p += take;
		len -= take;
		if (h->npart < 32)
			return;
		stripe(h->v, h->part);
		h->npart = 0;
	}
	for (; len >= 32; p += 32, len -= 32)
		stripe(h->v, p);
	memcpy(h->part, p, len);
	h->npart = len;
}

uint64_t fg_xxh64_digest(const struct fg_xxh64 *h)
{
	const unsigned char *p = h->part;
	size_t left = h->npart;
	uint64_t acc;

	if (h->total >= 32) {
		acc = rotl(h->v[0], 1) + rotl(h->v[1], 7) + rotl(h->v[2], 12) + rotl(h->v[3], 18);
		acc = merge(acc, h->v[0]);
		acc = merge(acc, h->v[1]);
		acc = merge(acc, h->v[2]);
		acc = merge(acc, h->v[3]);
	} else {
		acc = h->seed + P5;
	}
	acc += h->total;
	for (; left >= 8; p += 8, left -= 8) {
		acc ^= lane_round(0, get64(p));
		acc = rotl(acc, 27) * P1 + P4;
	}
	if (left >= 4) {
		acc ^= get32(p) * P1;
		acc = rotl(acc, 23) * P2 + P3;
		p += 4;
		left -= 4;
	}
	for (; left; p++, left--) {
		acc ^= (uint64_t)*p * P5;
		acc = rotl(acc, 11) * P1;
	}
	acc ^= acc >> 33;
	acc *= P2;
	acc ^= acc >> 29;
	acc *= P3;
	acc ^= acc >> 32;
	return acc;
}

uint64_t fg_xxh64(const void *data, size_t len, uint64_t seed)
{
	struct fg_xxh64 h;

	fg_xxh64_init(&h, seed);
	fg_xxh64_update(&h, data, len);
	return fg_xxh64_digest(&h);
}
