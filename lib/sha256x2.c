/* sha256x2.c - the SHA-256 compression function on the x86 SHA extensions
 * (SHA-NI), for one stream and for two independent streams interleaved.
 *
 * Why our own: one stream is bound by the latency of sha256rnds2 (each pair
 * of rounds needs the previous pair's state), so the core's SHA unit idles
 * between them. Two unrelated streams fed alternately fill those gaps: on the
 * project's AMD EPYC two streams hash at ~1.4x the bytes per second of
 * OpenSSL's single stream (docs/bench.md, store). Padding, buffering and the
 * digest live in lib/sha256.c; this file only compresses whole 64-byte
 * blocks, on the state in FIPS 180-4 order (h0..h7). */
#include "sha256.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_NI_BUILD 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define HAVE_NI_BUILD 0
#endif

#if HAVE_NI_BUILD

/* the 64 round constants of FIPS 180-4, 4.2.2 */
static const uint32_t K256[64] __attribute__((aligned(16))) = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2,
};

#define NI __attribute__((target("sha,sse4.1,ssse3")))

/* sha256rnds2 keeps the working variables as two vectors: ABEF (a in the
 * top lane, f in lane 0) and CDGH. These move h[8] in and out of that form. */
NI static inline void state_load(const uint32_t h[8], __m128i *abef, __m128i *cdgh)
{
	*abef = _mm_set_epi32((int)h[0], (int)h[1], (int)h[4], (int)h[5]);
	*cdgh = _mm_set_epi32((int)h[2], (int)h[3], (int)h[6], (int)h[7]);
}

NI static inline void state_store(uint32_t h[8], __m128i abef, __m128i cdgh)
{
	h[0] = (uint32_t)_mm_extract_epi32(abef, 3);
	h[1] = (uint32_t)_mm_extract_epi32(abef, 2);
	h[4] = (uint32_t)_mm_extract_epi32(abef, 1);
	h[5] = (uint32_t)_mm_extract_epi32(abef, 0);
	h[2] = (uint32_t)_mm_extract_epi32(cdgh, 3);
	h[3] = (uint32_t)_mm_extract_epi32(cdgh, 2);
	h[6] = (uint32_t)_mm_extract_epi32(cdgh, 1);
	h[7] = (uint32_t)_mm_extract_epi32(cdgh, 0);
}

/* The message schedule is kept as a window of 4 vectors of 4 words (w[t]
 * for t mod 4), each word in the CPU's order (the block is big-endian): the
 * first 16 words are loaded, and each later vector is made in the rounds
 * that use the oldest one, so the schedule's sha256msg1/msg2 run beside the
 * sha256rnds2 chain instead of before it, and everything stays in the 16
 * xmm registers (computing all 16 vectors first spilled two streams'
 * schedules to the stack: docs/bench.md, 2026-12-02). */
#define BSWAP _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL)
#define LOADW(p, i) _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)((p) + 16 * (i))), BSWAP)
#define KVEC(i) _mm_load_si128((const __m128i *)(const void *)&K256[4 * (i)])

/* W[t..t+3] from the window holding W[t-16..t-1] (slot t mod 4 holds
 * W[t-16..t-13]): s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], four at a
 * time: msg1 adds s0, the alignr supplies W[t-7], msg2 adds s1. */
NI static inline __m128i next_w(const __m128i w[4], int i)
{
	__m128i t = _mm_sha256msg1_epu32(w[i & 3], w[(i + 1) & 3]);

	t = _mm_add_epi32(t, _mm_alignr_epi8(w[(i + 3) & 3], w[(i + 2) & 3], 4));
	return _mm_sha256msg2_epu32(t, w[(i + 3) & 3]);
}

NI static void blocks1(uint32_t h[8], const uint8_t *p, size_t n)
{
	__m128i abef, cdgh;

	state_load(h, &abef, &cdgh);
	for (; n; n--, p += 64) {
		__m128i w[4], a0 = abef, c0 = cdgh;
		int i;

		for (i = 0; i < 4; i++)
			w[i] = LOADW(p, i);
#pragma GCC unroll 16
		for (i = 0; i < 16; i++) {
			__m128i k = _mm_add_epi32(w[i & 3], KVEC(i));

			cdgh = _mm_sha256rnds2_epu32(cdgh, abef, k);
			if (i < 12)
				w[i & 3] = next_w(w, i);
			abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(k, 0x0e));
		}
		abef = _mm_add_epi32(abef, a0);
		cdgh = _mm_add_epi32(cdgh, c0);
	}
	state_store(h, abef, cdgh);
}

/* Two streams, block by block: the rounds of A and B alternated, so each
 * sha256rnds2 of one stream runs in the latency shadow of the other's, and
 * both schedules made beside them. */
NI static void blocks2(uint32_t ha[8], const uint8_t *pa, uint32_t hb[8], const uint8_t *pb,
		       size_t n)
{
	__m128i aabef, acdgh, babef, bcdgh;

	state_load(ha, &aabef, &acdgh);
	state_load(hb, &babef, &bcdgh);
	for (; n; n--, pa += 64, pb += 64) {
		__m128i wa[4], wb[4], a0 = aabef, a1 = acdgh, b0 = babef, b1 = bcdgh;
		int i;

		for (i = 0; i < 4; i++) {
			wa[i] = LOADW(pa, i);
			wb[i] = LOADW(pb, i);
		}
#pragma GCC unroll 16
		for (i = 0; i < 16; i++) {
			__m128i k = KVEC(i);
			__m128i ka = _mm_add_epi32(wa[i & 3], k), kb = _mm_add_epi32(wb[i & 3], k);

			acdgh = _mm_sha256rnds2_epu32(acdgh, aabef, ka);
			bcdgh = _mm_sha256rnds2_epu32(bcdgh, babef, kb);
			if (i < 12) {
				wa[i & 3] = next_w(wa, i);
				wb[i & 3] = next_w(wb, i);
			}
			aabef = _mm_sha256rnds2_epu32(aabef, acdgh, _mm_shuffle_epi32(ka, 0x0e));
			babef = _mm_sha256rnds2_epu32(babef, bcdgh, _mm_shuffle_epi32(kb, 0x0e));
		}
		aabef = _mm_add_epi32(aabef, a0);
		acdgh = _mm_add_epi32(acdgh, a1);
		babef = _mm_add_epi32(babef, b0);
		bcdgh = _mm_add_epi32(bcdgh, b1);
	}
	state_store(ha, aabef, acdgh);
	state_store(hb, babef, bcdgh);
}

/* cpuid: leaf 1 ECX bit 9 SSSE3, bit 19 SSE4.1; leaf 7 EBX bit 29 SHA */
static int cpu_has_ni(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19)))
		return 0;
	if (__get_cpuid_max(0, NULL) < 7)
		return 0;
	__cpuid_count(7, 0, a, b, c, d);
	return (b & (1u << 29)) != 0;
}

#endif /* HAVE_NI_BUILD */

int fg_sha256_ni_available(void)
{
	static int cpu = -1; /* the CPU does not change while we run */
	const char *e = getenv("FG_SHA256_X2");
	int s = __atomic_load_n(&cpu, __ATOMIC_RELAXED);

	if (s < 0) {
#if HAVE_NI_BUILD
		s = cpu_has_ni();
#else
		s = 0;
#endif
		__atomic_store_n(&cpu, s, __ATOMIC_RELAXED);
	}
	/* read each time (contexts are made per file, not per byte), so a test
	 * can switch between both paths in one process */
	return s && !(e && !strcmp(e, "0"));
}

int fg_sha256_ni_blocks(uint32_t h[8], const uint8_t *p, size_t n)
{
#if HAVE_NI_BUILD
	if (n)
		blocks1(h, p, n);
	return 0;
#else
	(void)h, (void)p, (void)n;
	return -1; /* not reached: fg_sha256_ni_available() is 0 in this build */
#endif
}

int fg_sha256_ni_blocks2(uint32_t ha[8], const uint8_t *pa, uint32_t hb[8], const uint8_t *pb,
			 size_t n)
{
#if HAVE_NI_BUILD
	if (n)
		blocks2(ha, pa, hb, pb, n);
	return 0;
#else
	(void)ha, (void)pa, (void)hb, (void)pb, (void)n;
	return -1; /* not reached: fg_sha256_ni_available() is 0 in this build */
#endif
}
