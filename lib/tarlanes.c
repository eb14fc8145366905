/* tarlanes.c - a seekable tar.zst hashed (and extracted) in lanes; see
 * tarlanes.h. Every check here only decides whether the lanes may answer;
 * a refusal is always "read it sequentially instead". */
#include "tarlanes.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_frameHeaderSize */
#include <zstd.h>
#include <zstd_errors.h> /* ZSTD_error_checksum_wrong */

#include "bf16.h" /* fg_le32 */
#include "buf.h"
#include "fsutil.h"
#include "sha256.h"
#include "workq.h"
#include "xxh64.h"

#define LANE_OUT ((size_t)128 << 10) /* each lane's tar piece, hashed in L2 */
#define LANE_IN ((size_t)128 << 10)
#define PAX_MAX ((unsigned long long)1 << 20)
#define PROBES 8 /* split points tried, best balanced first */
#define MAX_THREADS 16

/* ---- one lane's zstd input: the frames in [zpos, zend) ----
 *
 * A lane parses each frame's header and block headers itself (`walk`).
 * The blocks up to the frame's last compressed or RLE block go through
 * zstd; the raw blocks after it, an incompressible member's bytes as zstd
 * stores them, are handed out straight from the read buffer, saving zstd's
 * copies into its window and out to the caller. zstd cannot take up a frame
 * again after blocks it did not see (a later compressed block may point
 * back into them), hence only a tail of raw blocks. Anything the parse does
 * not expect (a skippable frame, a dictionary, a reserved type or bit, a
 * window or block over zstd's limits, a frame past the range) hands the
 * rest of the range to zstd as it comes: never a verdict of its own. */

#define BLOCK_MAX ((size_t)ZSTD_BLOCKSIZE_MAX) /* 128 KiB */
/* the streaming decoder's default bound (ZSTD_d_windowLogMax) */
#define WINDOW_MAX (1ull << ZSTD_WINDOWLOG_LIMIT_DEFAULT)

enum { ZS_FRAME, ZS_ZSTD, ZS_RAW };

struct zlane {
	int fd;
	unsigned long long zpos, zend;
	ZSTD_DCtx *d;
	const unsigned char *map; /* the archive mapped (else read with pread) */
	unsigned char *in, *out;
	const unsigned char *src;  /* zstd's input: in, or in map */
	const unsigned char *cur;  /* the piece handed out: in out, in in or in map */
	size_t in_len, in_pos, out_len, out_pos;
	size_t last; /* ZSTD_decompressStream's hint: 0 at a frame's end */
	/* walking the frames (else zstd reads the whole range) */
	int walk, st, has_fcs, raw_last, chk; /* chk: the checksum's bytes, 4 or 0 */
	unsigned long long zlim; /* ZS_ZSTD: zstd's input ends here */
	unsigned long long tail; /* the frame's first raw-tail block header, 0: none */
	unsigned long long hpos; /* ZS_RAW: the next block header */
	unsigned long long fend; /* the frame's end, after its checksum */
	unsigned long long fcs, fgot; /* content size (has_fcs), bytes given */
	unsigned long long tail_bytes; /* the raw tail's content */
	size_t bmax;
	unsigned long long raw_bytes; /* handed out from raw blocks */
	unsigned long long fstart, skip; /* the frame's start; output to drop (replay) */
	/* walking a frame with a checksum and a raw tail (zstd sees none of
	 * it, or not its checksum): the XXH64 of what the frame gave */
	int own_sum;
	struct fg_xxh64 xh;
	/* zstd alone (no walk): where its current frame began, and the bytes
	 * it gave of it so far (a frame that gives none is refused) */
	unsigned long long nw_at, nw_out;
	/* why zl_fill failed, once zstd alone reads (no walk), or at once for
	 * an empty frame */
	int err_kind; /* FG_ZW_READ (errno err_no), FG_ZW_ZSTD (err_code), FG_ZW_SHORT,
		       * FG_ZW_EMPTY and FG_ZW_CHECKSUM (err_at) */
	int err_no;
	size_t err_code;
	unsigned long long err_at;
};

/* A switch the environment turns off with NAME=0. */
static int env_off(const char *name)
{
	const char *env = getenv(name);

	return env && !strcmp(env, "0");
}

static int zl_open(struct zlane *z, int fd, const unsigned char *map, unsigned long long from,
		   unsigned long long to)
{
	memset(z, 0, sizeof(*z));
	z->fd = fd;
	z->map = map;
	z->zpos = z->nw_at = from;
	z->zend = to;
	z->walk = !env_off("FG_TAR_RAW");
	z->d = ZSTD_createDCtx();
	z->in = malloc(LANE_IN + 8); /* a raw block with its header: 3 + BLOCK_MAX */
	z->out = malloc(LANE_OUT);
	z->cur = z->src = z->out;
	if (!z->d || !z->in || !z->out)
		return -1;
	/* zstd checks the content checksum of each frame it decodes whole;
	 * the walk that of a frame with a raw tail (zl_raw). Its 4 bytes are
	 * outside the bundle id: checked, they carry nothing else */
	return 0;
}

static void zl_close(struct zlane *z)
{
	ZSTD_freeDCtx(z->d);
	free(z->in);
	free(z->out);
	memset(z, 0, sizeof(*z));
}

static unsigned long long le_n(const unsigned char *p, size_t n)
{
	unsigned long long v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

/* n bytes at off into dst: 0, or -1 when they are not all there. */
static int zl_peek(struct zlane *z, unsigned char *dst, size_t n, unsigned long long off)
{
	if (z->map) {
		memcpy(dst, z->map + off, n); /* inside the range: checked by callers */
		return 0;
	}
	return pread(z->fd, dst, n, (off_t)off) == (ssize_t)n ? 0 : -1;
}

/* Plans the frame at zpos: zstd up to its last compressed or RLE block,
 * its raw blocks after that handed out here. -1: leave it to zstd. */
static int zl_plan(struct zlane *z)
{
	static const unsigned char did_len[4] = { 0, 1, 2, 4 }, fcs_len[4] = { 0, 2, 4, 8 };
	unsigned char h[18], b[3];
	unsigned long long pos, first, cooked_end, window = 0;
	size_t have = z->zend - z->zpos < sizeof(h) ? (size_t)(z->zend - z->zpos) : sizeof(h), p = 5, k;
	int fhd, single, last = 0;

	z->fstart = z->zpos;
	z->fgot = 0;
	if (have < 6 || zl_peek(z, h, have, z->zpos) || fg_le32(h) != ZSTD_MAGICNUMBER)
		return -1;
	fhd = h[4];
	single = fhd >> 5 & 1;
	if (fhd & 0x08)
		return -1; /* the reserved bit */
	if (!single) {
		int e = h[p] >> 3, m = h[p] & 7;

		window = 1ull << (10 + e);
		window += window / 8 * (unsigned)m;
		p++;
	}
	k = did_len[fhd & 3];
	if (p + k > have || le_n(h + p, k))
		return -1; /* a dictionary */
	p += k;
	k = fhd >> 6 ? fcs_len[fhd >> 6] : (size_t)single;
	if (p + k > have)
		return -1;
	z->has_fcs = k > 0;
	z->fcs = le_n(h + p, k) + (k == 2 ? 256 : 0);
	p += k;
	if (single)
		window = z->fcs;
	if (window > WINDOW_MAX)
		return -1;
	z->bmax = window < BLOCK_MAX ? (size_t)window : BLOCK_MAX;
	first = cooked_end = pos = z->zpos + p;
	z->tail_bytes = 0;
	while (!last) {
		unsigned long long bh, size;
		int type;

		if (z->zend - pos < 3 || zl_peek(z, b, 3, pos))
			return -1;
		bh = le_n(b, 3);
		last = (int)(bh & 1);
		type = (int)(bh >> 1 & 3);
		size = bh >> 3;
		if (type == 3 || size > z->bmax)
			return -1;
		pos += 3 + (type == 1 ? 1 : size);
		if (pos > z->zend)
			return -1;
		if (type) {
			cooked_end = pos;
			z->tail_bytes = 0;
		} else {
			z->tail_bytes += size;
		}
	}
	z->chk = fhd & 0x04 ? 4 : 0;
	z->own_sum = z->chk && cooked_end != pos;
	if (z->own_sum)
		fg_xxh64_init(&z->xh, 0);
	z->fend = pos + (unsigned long long)z->chk;
	if (z->fend > z->zend)
		return -1;
	z->raw_last = 0;
	if (cooked_end == first) {
		/* all raw: the content size is known here, checked before any
		 * byte is given (zstd gives nothing of the last block then) */
		if (z->has_fcs && z->tail_bytes != z->fcs)
			return -1;
		z->st = ZS_RAW;
		z->hpos = z->tail = first;
	} else {
		z->st = ZS_ZSTD;
		z->tail = cooked_end == pos ? 0 : cooked_end;
		z->zlim = z->tail ? z->tail : z->fend;
	}
	return 0;
}

/* The frame's content is all given: its size as the header says. */
static int zl_frame_done(struct zlane *z)
{
	if (z->has_fcs && z->fgot != z->fcs)
		return -1;
	z->st = ZS_FRAME;
	z->zpos = z->fend;
	return 0;
}

static int zl_empty(struct zlane *z, unsigned long long at);
static int zl_badsum(struct zlane *z, unsigned long long at);

/* The walked frame's content checksum, where the walk computes it, is the
 * XXH64 of what it gave (RFC 8878 3.1.1: its low 32 bits, little-endian). */
static int zl_sum_ok(struct zlane *z)
{
	unsigned char c[4];

	if (!z->own_sum)
		return 1;
	return !zl_peek(z, c, 4, z->fend - 4) && fg_le32(c) == (uint32_t)fg_xxh64_digest(&z->xh);
}

/* ZS_RAW: the next raw block into in: 0 with a piece, 1 at the frame's
 * end, -1 on anything unplanned, -2 at the end of a frame that gave no
 * byte or whose checksum is wrong (zl_fail done). */
static int zl_raw(struct zlane *z)
{
	for (;;) {
		unsigned long long bh, size;
		size_t want;
		ssize_t n;

		if (z->raw_last) {
			if (zl_frame_done(z))
				return -1;
			if (!z->fgot) {
				zl_empty(z, z->fstart);
				return -2;
			}
			return 1;
		}
		want = z->fend - z->hpos < 3 + z->bmax ? (size_t)(z->fend - z->hpos) : 3 + z->bmax;
		if (z->map) {
			z->cur = z->map + z->hpos;
			n = (ssize_t)want;
		} else {
			z->cur = z->in;
			n = pread(z->fd, z->in, want, (off_t)z->hpos);
		}
		if (n < 3)
			return -1;
		bh = le_n(z->cur, 3);
		size = bh >> 3;
		if ((bh >> 1 & 3) != 0 || size > z->bmax || size > (unsigned long long)n - 3)
			return -1;
		z->raw_last = (int)(bh & 1);
		z->hpos += 3 + size;
		if (z->raw_last && z->hpos + (unsigned long long)z->chk != z->fend)
			return -1;
		if (z->own_sum)
			fg_xxh64_update(&z->xh, z->cur + 3, (size_t)size);
		if (z->raw_last && !zl_sum_ok(z)) {
			/* the last block is held back, as zstd holds it */
			zl_badsum(z, z->fstart);
			return -2;
		}
		z->fgot += size;
		if (size) {
			z->cur += 3;
			z->out_len = (size_t)size;
			z->raw_bytes += size;
			return 0;
		}
	}
}

/* The walk gives out in the frame at fstart (anything unplanned, any
 * error): zstd decodes that frame again from its start, dropping the fgot
 * bytes already given, and the rest of the range as without the walk. So
 * the bytes, and any error, are zstd's own. */
static void zl_replay(struct zlane *z)
{
	ZSTD_DCtx_reset(z->d, ZSTD_reset_session_only);
	z->last = 0;
	z->in_len = z->in_pos = 0;
	z->zpos = z->nw_at = z->fstart;
	z->nw_out = 0;
	z->skip = z->fgot;
	z->walk = 0;
}

/* zl_fill's error, once zstd alone reads: -1 and why. */
static int zl_fail(struct zlane *z, int kind, int no, size_t code)
{
	z->err_kind = kind;
	z->err_no = no;
	z->err_code = code;
	return -1;
}

/* A zstd frame at `at` gave no byte: -1, whether walked or not. */
static int zl_empty(struct zlane *z, unsigned long long at)
{
	z->err_at = at;
	return zl_fail(z, FG_ZW_EMPTY, 0, 0);
}

/* The content checksum of the zstd frame at `at` is wrong: -1. */
static int zl_badsum(struct zlane *z, unsigned long long at)
{
	z->err_at = at;
	return zl_fail(z, FG_ZW_CHECKSUM, 0, 0);
}

/* zstd alone ended a frame (or skipped a skippable one) with its input at
 * end: -1 when it was a zstd frame that gave nothing, else 0 and the next
 * frame begins there. */
static int zl_nw_frame_end(struct zlane *z, unsigned long long end)
{
	unsigned char m[4];

	if (!z->nw_out && !zl_peek(z, m, 4, z->nw_at) && fg_le32(m) == ZSTD_MAGICNUMBER)
		return zl_empty(z, z->nw_at);
	z->nw_at = end;
	z->nw_out = 0;
	return 0;
}

/* The next piece of tar in cur: 0, 1 at the end of the range (which
 * must end a frame), -1 on any error (zl_fail: why). */
static int zl_fill(struct zlane *z)
{
	z->out_len = z->out_pos = 0;
	for (;;) {
		ZSTD_outBuffer ob = { z->out, LANE_OUT, 0 };
		ZSTD_inBuffer ib;
		unsigned long long lim = z->zend;

		if (z->walk) {
			if (z->st == ZS_FRAME) {
				if (z->zpos == z->zend)
					return 1;
				if (zl_plan(z)) {
					zl_replay(z); /* zstd from here on, as without the walk */
					continue;
				}
			}
			if (z->st == ZS_RAW) {
				int r = zl_raw(z);

				if (r == 0)
					return 0;
				if (r == -2)
					return -1; /* refused (zl_fail done) */
				if (r < 0)
					zl_replay(z);
				continue; /* the frame ended (or zstd takes it again) */
			}
			lim = z->zlim;
		}
		if (z->in_pos == z->in_len && z->zpos < lim) {
			size_t want = lim - z->zpos < LANE_IN ? (size_t)(lim - z->zpos) : LANE_IN;
			ssize_t n = (ssize_t)want;

			if (z->map) {
				z->src = z->map + z->zpos;
			} else if ((n = pread(z->fd, z->in, want, (off_t)z->zpos)) <= 0) {
				if (z->walk) {
					zl_replay(z);
					continue;
				}
				return n ? zl_fail(z, FG_ZW_READ, errno, 0) : zl_fail(z, FG_ZW_SHORT, 0, 0);
			} else {
				z->src = z->in;
			}
			z->in_len = (size_t)n;
			z->in_pos = 0;
			z->zpos += (unsigned long long)n;
		}
		ib.src = z->src;
		ib.size = z->in_len;
		ib.pos = z->in_pos;
		if (ib.pos == ib.size && z->zpos == lim && z->last == 0) {
			/* all input used, the frame complete and flushed */
			if (!z->walk)
				return 1;
			if (!z->fgot)
				return zl_empty(z, z->fstart);
			z->st = ZS_FRAME;
			continue;
		}
		z->last = ZSTD_decompressStream(z->d, &ob, &ib);
		if (ZSTD_isError(z->last)) {
			if (z->walk) {
				zl_replay(z);
				continue;
			}
			if (ZSTD_getErrorCode(z->last) == ZSTD_error_checksum_wrong)
				return zl_badsum(z, z->nw_at);
			return zl_fail(z, FG_ZW_ZSTD, 0, z->last);
		}
		z->in_pos = ib.pos;
		if (!z->walk) {
			z->nw_out += ob.pos;
			if (!z->last && zl_nw_frame_end(z, z->zpos - z->in_len + ib.pos))
				return -1;
		}
		if (ob.pos > z->skip) {
			z->cur = z->out + z->skip;
			z->out_len = ob.pos - z->skip;
			z->fgot += z->out_len;
			if (z->walk && z->own_sum)
				fg_xxh64_update(&z->xh, z->cur, z->out_len);
			z->skip = 0;
			return 0;
		}
		z->skip -= ob.pos; /* given before a replay */
		if (ob.pos)
			continue;
		if (z->in_pos == z->in_len && z->zpos == lim && z->last != 0) {
			if (z->walk && !z->tail) {
				zl_replay(z); /* zstd wants more of a frame the walk says ended */
				continue;
			}
			if (!z->walk)
				return zl_fail(z, FG_ZW_SHORT, 0, 0); /* the range ends inside a frame */
			/* the blocks before the raw tail are out; with the tail's
			 * size the content size must hold before any of it is given,
			 * else zstd goes on (and says where it fails) */
			if (z->has_fcs && z->fgot + z->tail_bytes != z->fcs) {
				zl_replay(z);
				continue;
			}
			/* zstd starts afresh at the next frame */
			ZSTD_DCtx_reset(z->d, ZSTD_reset_session_only);
			z->last = 0;
			z->in_len = z->in_pos = 0;
			z->st = ZS_RAW;
			z->hpos = z->tail;
		}
	}
}

/* ---- one lane's tar walk ---- */

enum { L_HDR, L_DATA, L_PAX, L_SKIP, L_END };

struct lane {
	struct zlane z;
	int st, is_last, zeros;
	unsigned long long tail; /* bytes read after the end marker (all zeros) */
	unsigned long long left, pad, max_entry;
	unsigned char blk[512];
	size_t blk_have;
	struct fg_buf pax;
	int pax_open; /* an extended header was read, the header it is for not yet */
	char *pend_path;
	int pend_has_size;
	unsigned long long pend_size;
	struct fg_sha256 *h;
	struct fg_tarlane_entry cur, *e;
	size_t n, cap;
	/* extracting: the destination folder, the member's file, the bounds */
	int dirfd, out_fd;
	unsigned long long total, max_total;
	size_t max_entries;
	unsigned long long pos; /* tar bytes walked */
	/* a region that ends inside a member (at a chain state): the lane must
	 * end in that member's data with end_left bytes of it to go and its
	 * hash in state end_st */
	const uint8_t *end_st;
	const char *end_path;
	unsigned long long end_left;
	/* the archive's identity too (o->id): every tar byte of the region
	 * into idh, taken up from the identity's state where it starts */
	struct fg_sha256 *idh;
	/* the current member's data goes into h (all, or o->hash_only) */
	int hashing;
	/* extracting: the files of members cut into regions, made before the
	 * lanes run (premade) */
	struct premade *pre;
	/* the lanes' options (NULL: a probe); o->keep: the current member's
	 * bytes kept (keeping) in kept */
	const struct fg_tarlanes_opts *o;
	int keeping;
	struct fg_buf kept;
};

/* Extracting a member cut into regions: its file is made (empty, its mode)
 * before the lanes run, so that each region's lane can write its part at
 * its offset. The lane that reads the member's header takes the file over
 * (taken: a second member of that name fails the lanes, as a name taken
 * twice does). */
struct premade {
	char **path;
	int *taken;
	size_t n, cap_path, cap_taken;
};

/* An octal field: digits, then only NULs or spaces; -1 for anything else
 * (base-256, leading spaces: left to the sequential reader). */
static int octal(const unsigned char *f, size_t len, unsigned long long *out)
{
	size_t i = 0;
	unsigned long long v = 0;

	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -1;
		v = v * 8 + (unsigned)(f[i] - '0');
	}
	if (i == 0)
		return -1;
	for (; i < len; i++)
		if (f[i] != 0 && f[i] != ' ')
			return -1;
	*out = v;
	return 0;
}

/* A header block fgpack could have written: checksum (unsigned), POSIX
 * ustar magic, a regular file or a pax extended header, no link name. */
static int ustar_ok(const unsigned char *b)
{
	unsigned long long want, sum = 0;
	size_t i;

	for (i = 0; i < 512; i++)
		sum += i >= 148 && i < 156 ? ' ' : b[i];
	if (octal(b + 148, 8, &want) || want != sum)
		return 0;
	if (memcmp(b + 257, "ustar\0" "00", 8))
		return 0;
	if (b[156] != '0' && b[156] != 'x')
		return 0;
	return b[157] == 0;
}

static int zeros_only(const unsigned char *b, size_t n)
{
	return !n || (!b[0] && !memcmp(b, b + 1, n - 1));
}

static int all_zero(const unsigned char *b)
{
	size_t i;

	for (i = 0; i < 512; i++)
		if (b[i])
			return 0;
	return 1;
}

/* A member name fgpack writes: printable ASCII, not empty, no trailing '/'
 * (libarchive reads that as a folder); the rest is checked by the caller
 * exactly as for the sequential reader. */
static int name_ok(const char *s, size_t n)
{
	size_t i;

	if (!n || s[n - 1] == '/')
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			return 0;
	return 1;
}

static size_t field_len(const unsigned char *f, size_t max)
{
	const unsigned char *z = memchr(f, 0, max);

	return z ? (size_t)(z - f) : max;
}

/* The pax records of an 'x' header: path and size kept, times and owners
 * ignored, anything else refused. */
static int pax_parse(struct lane *l)
{
	const char *p = l->pax.data, *end = p + l->pax.len;

	while (p < end) {
		const char *sp, *eq, *rec_end;
		unsigned long long rlen = 0;
		size_t klen, vlen;

		for (sp = p; sp < end && *sp >= '0' && *sp <= '9'; sp++) {
			if (rlen > PAX_MAX)
				return -1;
			rlen = rlen * 10 + (unsigned)(*sp - '0');
		}
		if (sp == p || sp >= end || *sp != ' ' || rlen > (unsigned long long)(end - p))
			return -1;
		rec_end = p + rlen;
		if (rec_end[-1] != '\n')
			return -1;
		eq = memchr(sp + 1, '=', (size_t)(rec_end - sp - 1));
		if (!eq)
			return -1;
		klen = (size_t)(eq - sp - 1);
		vlen = (size_t)(rec_end - 1 - eq - 1);
#define KEY(k) (klen == sizeof(k) - 1 && !memcmp(sp + 1, k, klen))
		if (KEY("path")) {
			if (!name_ok(eq + 1, vlen) || memchr(eq + 1, 0, vlen))
				return -1;
			free(l->pend_path);
			l->pend_path = strndup(eq + 1, vlen);
			if (!l->pend_path)
				return -1;
		} else if (KEY("size")) {
			unsigned long long v = 0;
			size_t i;

			if (!vlen || vlen > 19)
				return -1;
			for (i = 0; i < vlen; i++) {
				if (eq[1 + i] < '0' || eq[1 + i] > '9')
					return -1;
				v = v * 10 + (unsigned)(eq[1 + i] - '0');
			}
			l->pend_size = v;
			l->pend_has_size = 1;
		} else if (!KEY("mtime") && !KEY("atime") && !KEY("ctime") && !KEY("uid") &&
			   !KEY("gid") && !KEY("uname") && !KEY("gname")) {
			return -1;
		}
#undef KEY
		p = rec_end;
	}
	return 0;
}

/* The member now hashed is complete. */
static int member_done(struct lane *l)
{
	if (l->out_fd >= 0) {
		int bad = close(l->out_fd);

		l->out_fd = -1;
		if (bad)
			return -1;
	}
	if (l->hashing && fg_sha256_final(l->h, l->cur.sha256, NULL))
		return -1;
	l->cur.hashed = l->hashing;
	if (l->keeping) {
		/* as the sequential reader hands it: its bytes and a NUL after */
		if (fg_buf_append(&l->kept, "", 1, NULL))
			return -1;
		l->cur.content = fg_buf_detach(&l->kept, NULL);
		l->keeping = 0;
	}
	if (fg_grow(&l->e, &l->cap, l->n, sizeof(*l->e)))
		return -1;
	l->e[l->n++] = l->cur;
	memset(&l->cur, 0, sizeof(l->cur));
	l->st = l->pad ? L_SKIP : L_HDR;
	l->left = l->pad;
	return 0;
}

/* Extracting: the folders above path (0755; one already there is fine):
 * 0, or -1. path is written to and restored. */
static int mkparents(int dirfd, char *path)
{
	char *slash;

	for (slash = strchr(path, '/'); slash; slash = strchr(slash + 1, '/')) {
		int bad;

		*slash = '\0';
		bad = mkdirat(dirfd, path, 0755) && errno != EEXIST;
		*slash = '/';
		if (bad)
			return -1;
	}
	return 0;
}

/* Extracting: the member's file, created where the sequential reader would
 * create it (its folders 0755, the file 0644 or 0755, never over anything:
 * a name taken twice, or a folder where a file is, fails the lanes). */
static int create(struct lane *l, char *path, int mode, unsigned long long size)
{
	size_t i;

	if (!fg_path_is_safe_rel(path) || l->n >= l->max_entries ||
	    (l->total += size) > l->max_total)
		return -1; /* the sequential reader says why */
	for (i = 0; l->pre && i < l->pre->n; i++)
		if (!strcmp(l->pre->path[i], path)) {
			if (__atomic_exchange_n(&l->pre->taken[i], 1, __ATOMIC_ACQ_REL))
				return -1; /* the name taken twice */
			l->out_fd = openat(l->dirfd, path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
			return l->out_fd < 0 ? -1 : 0;
		}
	if (mkparents(l->dirfd, path))
		return -1;
	l->out_fd = openat(l->dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			   (mode_t)mode);
	return l->out_fd < 0 ? -1 : 0;
}

static int header(struct lane *l)
{
	const unsigned char *b = l->blk;
	unsigned long long size = 0, mode = 0;

	if (all_zero(b)) {
		/* the end marker: two zero blocks, in the last lane only */
		if (!l->is_last || l->pax_open)
			return -1;
		if (++l->zeros == 2)
			l->st = L_END;
		return 0;
	}
	/* the ustar size field is not read where a pax size stands for it */
	if (l->zeros || !ustar_ok(b) || (!l->pend_has_size && octal(b + 124, 12, &size)) ||
	    octal(b + 100, 8, &mode))
		return -1;
	if (b[156] == 'x') {
		if (l->pax_open || size > PAX_MAX)
			return -1; /* one extended header per member, as pack writes */
		l->pax_open = 1;
		l->st = size ? L_PAX : L_HDR;
		l->left = size;
		l->pad = (512 - size % 512) % 512;
		return 0;
	}
	l->pax_open = 0;
	if (l->pend_path) {
		l->cur.path = l->pend_path;
		l->pend_path = NULL;
	} else {
		size_t nl = field_len(b, 100), pl = field_len(b + 345, 155);
		char *s = malloc(pl + 1 + nl + 1);

		if (!s)
			return -1;
		if (pl)
			memcpy(s, b + 345, pl), s[pl] = '/';
		memcpy(s + (pl ? pl + 1 : 0), b, nl);
		s[(pl ? pl + 1 : 0) + nl] = '\0';
		l->cur.path = s;
		if (!name_ok(s, strlen(s)))
			return -1;
	}
	if (l->pend_has_size)
		size = l->pend_size;
	l->pend_has_size = 0;
	if (size > l->max_entry)
		return -1;
	if (l->dirfd >= 0 && create(l, l->cur.path, mode & 0111 ? 0755 : 0644, size))
		return -1;
	l->cur.size = size;
	l->cur.mode = mode & 0111 ? 0755 : 0644;
	l->hashing = !l->o || !l->o->hash_only || !strcmp(l->cur.path, l->o->hash_only);
	if (l->o && l->o->keep) {
		size_t max = l->o->keep(l->o->keep_user, l->cur.path);

		l->keeping = max && size <= max;
	}
	l->left = size;
	l->pad = (512 - size % 512) % 512;
	l->st = L_DATA;
	return size ? 0 : member_done(l);
}

/* A region that ends inside a member ended: 1 when the lane stands in the
 * member named, with the bytes to go that the next region takes it up with
 * and, when it is hashed there, its hash in the chain state it is taken up
 * from (then the next region hashes the rest of the same stream); else -1. */
static int ends_at_state(struct lane *l)
{
	uint8_t st[32];

	return l->st == L_DATA && l->left == l->end_left && l->cur.path &&
			       !strcmp(l->cur.path, l->end_path) &&
			       (!l->end_st ? !l->hashing
					   : l->hashing && !fg_sha256_state(l->h, st, NULL) &&
						     !memcmp(st, l->end_st, 32))
		       ? 1
		       : -1;
}

/* k tar bytes that are no member's data taken from the lane's piece: into
 * the identity when the lanes compute it, then walked past. */
static int lane_eat(struct lane *l, size_t k)
{
	if (l->idh && fg_sha256_update(l->idh, l->z.cur + l->z.out_pos, k, NULL))
		return -1;
	l->z.out_pos += k;
	l->pos += k;
	return 0;
}

/* Walks to the next member bytes: 0 with *p, *n (n > 0) in the lane's
 * buffer, not consumed; 1 when the lane ended where a lane may end; -1
 * when the lanes must give up. */
static int lane_data(struct lane *l, const unsigned char **p, size_t *n)
{
	for (;;) {
		struct zlane *z = &l->z;
		size_t avail, k;

		if (z->out_pos == z->out_len) {
			int r = zl_fill(z);

			if (r < 0)
				return -1;
			if (r == 1) {
				if (l->is_last)
					return l->st == L_END ? 1 : -1;
				if (l->end_path)
					return ends_at_state(l);
				return l->st == L_HDR && !l->blk_have && !l->pax_open
					       ? 1
					       : -1;
			}
		}
		avail = z->out_len - z->out_pos;
		switch (l->st) {
		case L_DATA:
			*p = z->cur + z->out_pos;
			*n = avail < l->left ? avail : (size_t)l->left;
			return 0;
		case L_END:
			/* what follows the marker is read, as the sequential reader
			 * drains it: zeros only (a tar's padding to its record), no
			 * more than FG_TAR_TAIL_MAX, else the sequential reader
			 * refuses the archive and says why */
			l->tail += avail;
			if (l->tail > FG_TAR_TAIL_MAX || !zeros_only(z->cur + z->out_pos, avail) ||
			    lane_eat(l, avail))
				return -1;
			break;
		case L_SKIP:
			k = avail < l->left ? avail : (size_t)l->left;
			if (lane_eat(l, k))
				return -1;
			l->left -= k;
			if (!l->left)
				l->st = L_HDR;
			break;
		case L_PAX:
			k = avail < l->left ? avail : (size_t)l->left;
			if (fg_buf_append(&l->pax, z->cur + z->out_pos, k, NULL) || lane_eat(l, k))
				return -1;
			l->left -= k;
			if (!l->left) {
				if (pax_parse(l))
					return -1;
				fg_buf_reset(&l->pax);
				l->left = l->pad;
				l->st = l->pad ? L_SKIP : L_HDR;
			}
			break;
		default: /* L_HDR */
			k = 512 - l->blk_have < avail ? 512 - l->blk_have : avail;
			memcpy(l->blk + l->blk_have, z->cur + z->out_pos, k);
			if (lane_eat(l, k))
				return -1;
			l->blk_have += k;
			if (l->blk_have == 512) {
				l->blk_have = 0;
				if (header(l))
					return -1;
			}
			break;
		}
	}
}

/* n bytes of the current member were hashed. */
static int lane_take(struct lane *l, const unsigned char *p, size_t n)
{
	if ((l->out_fd >= 0 && fg_write_all(l->out_fd, p, n)) ||
	    (l->keeping && fg_buf_append(&l->kept, p, n, NULL)))
		return -1;
	l->z.out_pos += n;
	l->pos += n;
	l->left -= n;
	return l->left ? 0 : member_done(l);
}

static void lane_free(struct lane *l)
{
	if (l->out_fd >= 0)
		close(l->out_fd);
	zl_close(&l->z);
	fg_buf_release(&l->pax);
	free(l->pend_path);
	free(l->cur.path);
	fg_sha256_free(l->h);
	fg_sha256_free(l->idh);
	fg_buf_release(&l->kept);
	free(l->cur.content);
	fg_tarlanes_free(l->e, l->n);
}

/* Whether the frame at off starts with a header fgpack writes. */
static int starts_member(int fd, unsigned long long off, unsigned long long end)
{
	struct zlane z;
	unsigned char b[512];
	size_t have = 0;

	if (!zl_open(&z, fd, NULL, off, end))
		while (have < 512 && zl_fill(&z) == 0) {
			size_t k = 512 - have < z.out_len ? 512 - have : z.out_len;

			memcpy(b + have, z.cur, k);
			have += k;
		}
	zl_close(&z);
	return have == 512 && ustar_ok(b);
}

void fg_tarlanes_free(struct fg_tarlane_entry *e, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(e[i].path);
		free(e[i].content);
	}
	free(e);
}

/* The seek table's footer, the file's last 9 bytes (frame count,
 * descriptor, magic): 0 when it is one, no reserved bit set. */
static int seek_footer(int fd, unsigned long long size, unsigned char foot[9])
{
	return size >= 17 && pread(fd, foot, 9, (off_t)(size - 9)) == 9 &&
			       fg_le32(foot + 5) == FG_TAR_SEEKABLE_MAGIC && !(foot[4] & 0x7c)
		       ? 0
		       : -1;
}

/* Reads the seek table: frame offsets off[0..n] (off[n] = where the table
 * begins) and tar offsets tar[0..n]. 0, or -1 when there is none or it does
 * not add up. */
static int seek_table_min(int fd, unsigned long long size, unsigned long long **off,
			  unsigned long long **tar, size_t *nf, size_t min);

static int seek_table(int fd, unsigned long long size, unsigned long long **off,
		      unsigned long long **tar, size_t *nf)
{
	return seek_table_min(fd, size, off, tar, nf, 2); /* lanes want two frames */
}

/* seek_table for a table of at least min frames */
static int seek_table_min(int fd, unsigned long long size, unsigned long long **off,
			  unsigned long long **tar, size_t *nf, size_t min)
{
	unsigned char foot[9], *t = NULL;
	unsigned long long body, start;
	size_t n, i, esz;

	*off = *tar = NULL;
	if (seek_footer(fd, size, foot))
		return -1;
	n = fg_le32(foot);
	esz = foot[4] & 0x80 ? 12 : 8;
	body = (unsigned long long)n * esz + 9;
	if (n < min || body + 8 > size)
		return -1;
	start = size - body - 8;
	t = malloc(body + 8);
	*off = malloc((n + 1) * sizeof(**off));
	*tar = malloc((n + 1) * sizeof(**tar));
	if (!t || !*off || !*tar || pread(fd, t, body + 8, (off_t)start) != (ssize_t)(body + 8) ||
	    fg_le32(t) != FG_TAR_SKIPPABLE_MAGIC || fg_le32(t + 4) != body)
		goto bad;
	(*off)[0] = (*tar)[0] = 0;
	for (i = 0; i < n; i++) {
		(*off)[i + 1] = (*off)[i] + fg_le32(t + 8 + esz * i);
		(*tar)[i + 1] = (*tar)[i] + fg_le32(t + 12 + esz * i);
	}
	if ((*off)[n] != start)
		goto bad;
	free(t);
	*nf = n;
	return 0;
bad:
	free(t);
	free(*off);
	free(*tar);
	*off = *tar = NULL;
	return -1;
}

/* The identity's states (FG_TAR_IDST_*, written by lib/tarball.c). When
 * the table's last entry is a skippable frame with no tar bytes, it is left
 * out of the frames (*nf one less; zstd skips it, so the sequential reader
 * gets the same bytes) and, when it is the identity's states frame and
 * every entry is sound (version 1, the count its size says, offsets rising,
 * each a multiple of 64), *idst (32 bytes a frame) and *has get the state
 * at each frame's start that an entry names (0 < k < *nf); an entry at no
 * frame's start is unused. Else both stay NULL. */
static void id_states(int fd, const unsigned long long *off, const unsigned long long *tar, size_t *nf,
		      uint8_t **idst, unsigned char **has)
{
	unsigned char h[8 + FG_TAR_IDST_HEAD], *t = NULL;
	unsigned long long len, at, prev = 0;
	size_t n = *nf, cnt, i, k;

	*idst = NULL;
	*has = NULL;
	if (n < 2 || tar[n] != tar[n - 1])
		return;
	len = off[n] - off[n - 1];
	if (len < 8 || pread(fd, h, 8, (off_t)off[n - 1]) != 8 ||
	    (fg_le32(h) & 0xFFFFFFF0u) != (FG_TAR_SKIPPABLE_MAGIC & 0xFFFFFFF0u) ||
	    fg_le32(h + 4) != len - 8)
		return;
	*nf = --n; /* skippable: no tar bytes */
	if (fg_le32(h) != FG_TAR_IDST_MAGIC || len < sizeof(h) ||
	    pread(fd, h + 8, FG_TAR_IDST_HEAD, (off_t)off[n] + 8) != FG_TAR_IDST_HEAD ||
	    memcmp(h + 8, FG_TAR_IDST_TAG, 8) || fg_le32(h + 16) != 1)
		return;
	cnt = fg_le32(h + 20);
	if ((len - sizeof(h)) % FG_TAR_IDST_ENTRY || (len - sizeof(h)) / FG_TAR_IDST_ENTRY != cnt ||
	    !cnt || cnt >= n)
		return;
	t = malloc(cnt * FG_TAR_IDST_ENTRY);
	*idst = malloc(n * 32);
	*has = calloc(n, 1);
	if (!t || !*idst || !*has ||
	    pread(fd, t, cnt * FG_TAR_IDST_ENTRY, (off_t)(off[n] + sizeof(h))) !=
		    (ssize_t)(cnt * FG_TAR_IDST_ENTRY))
		goto bad;
	for (i = 0, k = 1; i < cnt; i++) {
		const unsigned char *e = t + i * FG_TAR_IDST_ENTRY;

		at = le_n(e, 8);
		if (at % 64 || at <= prev)
			goto bad;
		prev = at;
		while (k < n && tar[k] < at)
			k++;
		if (k < n && tar[k] == at) {
			memcpy(*idst + 32 * k, e + 8, 32);
			(*has)[k] = 1;
		}
	}
	free(t);
	return;
bad:
	free(t);
	free(*idst);
	free(*has);
	*idst = NULL;
	*has = NULL;
}

/* The identity's states frame at off (size bytes after its 8-byte header)
 * as pack writes it, for a table of frames tar[0..n] whose last entry it
 * is: the tag, version 1, a count its size holds, entries whose offsets
 * rise in multiples of 64, each where a frame of the table starts. 0, or
 * -1 with why. */
static int idst_frame_ok(int fd, unsigned long long off, unsigned long long size,
			 const unsigned long long *tar, size_t n, char *why, size_t cap)
{
	unsigned char *t;
	unsigned long long cnt, at, prev = 0;
	size_t i, k = 1;
	int rc = -1;

	if (size < FG_TAR_IDST_HEAD || size > FG_TAR_IDST_HEAD + (unsigned long long)FG_TAR_IDST_ENTRY * n ||
	    !(t = malloc((size_t)size))) {
		snprintf(why, cap, "the identity states' frame at byte %llu: %llu bytes, not what %zu frames "
			 "give", off, size, n);
		return -1;
	}
	if (pread(fd, t, (size_t)size, (off_t)(off + 8)) != (ssize_t)size) {
		snprintf(why, cap, "the identity states' frame at byte %llu: cut short", off);
		goto out;
	}
	cnt = fg_le32(t + 12);
	if (memcmp(t, FG_TAR_IDST_TAG, 8) || fg_le32(t + 8) != 1 || !cnt ||
	    FG_TAR_IDST_HEAD + FG_TAR_IDST_ENTRY * cnt != size) {
		snprintf(why, cap, "the identity states' frame at byte %llu: not tag \"%s\", version 1 and "
			 "a count its size holds", off, FG_TAR_IDST_TAG);
		goto out;
	}
	for (i = 0; i < cnt; i++) {
		at = le_n(t + FG_TAR_IDST_HEAD + FG_TAR_IDST_ENTRY * i, 8);
		while (k + 1 < n && tar[k] < at)
			k++;
		if (at % 64 || at <= prev || k + 1 >= n || tar[k] != at) {
			snprintf(why, cap, "the identity states' frame at byte %llu: entry %zu (tar offset "
				 "%llu) is not at a frame's start, a multiple of 64 past the one before", off,
				 i, at);
			goto out;
		}
		prev = at;
	}
	rc = 0;
out:
	free(t);
	return rc;
}

int fg_tarlanes_frames_ok(int fd, unsigned long long size, char *why, size_t cap)
{
	static const size_t fcs_lens[4] = { 0, 2, 4, 8 };
	unsigned long long *off = NULL, *tar = NULL, pos = 0, fstart, content;
	unsigned char foot[9], h[ZSTD_FRAMEHEADERSIZE_MAX], b[3];
	size_t nf = 0, k = 0, fcs_len;
	int table, cooked, rc = 0;

	/* the table pack writes: no checksums, nothing reserved, adding up */
	table = !seek_footer(fd, size, foot) && foot[4] == 0 &&
		!seek_table_min(fd, size, &off, &tar, &nf, 1);
	while (!rc && pos < size) {
		size_t have = size - pos < sizeof(h) ? (size_t)(size - pos) : sizeof(h), hs;
		unsigned long long len, bh;
		unsigned magic;
		int last = 0;

		if (have < 8 || pread(fd, h, have, (off_t)pos) != (ssize_t)have)
			break; /* zstd says what is wrong */
		magic = fg_le32(h);
		if ((magic & 0xFFFFFFF0u) == 0x184D2A50u) {
			len = fg_le32(h + 4);
			if (len > size - pos - 8)
				break;
			if (table && magic == FG_TAR_SKIPPABLE_MAGIC && pos == off[nf] && k == nf &&
			    pos + 8 + len == size)
				break; /* the seek table, the file's end */
			if (table && magic == FG_TAR_IDST_MAGIC && k + 1 == nf && pos == off[k] &&
			    off[nf] - pos == 8 + len && tar[nf] == tar[k]) {
				rc = idst_frame_ok(fd, pos, len, tar, nf, why, cap);
				pos += 8 + len;
				k++;
				continue;
			}
			if (magic == FG_TAR_IDST_MAGIC)
				snprintf(why, cap, "the identity states' frame at byte %llu is not the last "
					 "frame a seek table that ends the file lists", pos);
			else if (magic == FG_TAR_SKIPPABLE_MAGIC)
				snprintf(why, cap, "a seek table frame at byte %llu that is not pack's (at the "
					 "file's end, descriptor 0, adding up to the frames before it)", pos);
			else
				snprintf(why, cap, "a skippable zstd frame (magic 0x%08X, %llu bytes) at byte "
					 "%llu: bytes zstd skips, in no member and not in the bundle id",
					 magic, len, pos);
			rc = -1;
			break;
		}
		if (magic != ZSTD_MAGICNUMBER || ZSTD_isError(hs = ZSTD_frameHeaderSize(h, have)) || hs > have)
			break;
		/* a content size of 0 given (RFC 8878 3.1.1.1.4, the header's
		 * last field; 2 bytes hold 256 more): an empty frame */
		fcs_len = h[4] >> 6 ? fcs_lens[h[4] >> 6] : (size_t)(h[4] >> 5 & 1);
		if (fcs_len && fcs_len != 2 && !le_n(h + hs - fcs_len, fcs_len)) {
			snprintf(why, cap, FG_TAR_EMPTY_WHY, pos);
			rc = -1;
			break;
		}
		fstart = pos;
		pos += hs;
		content = 0;
		cooked = 0;
		while (!last) {
			if (size - pos < 3 || pread(fd, b, 3, (off_t)pos) != 3)
				goto out;
			bh = le_n(b, 3);
			last = (int)(bh & 1);
			if ((bh >> 1 & 3) == 3)
				goto out;
			cooked |= (bh >> 1 & 3) == 2;
			content += bh >> 3; /* a raw or RLE block's bytes */
			len = (bh >> 1 & 3) == 1 ? 1 : bh >> 3;
			if (len > size - pos - 3)
				goto out;
			pos += 3 + len;
		}
		if (!cooked && !content) {
			/* raw and RLE blocks of nothing (pack's stored frames hold
			 * bytes; what compressed blocks give, only zstd knows) */
			snprintf(why, cap, FG_TAR_EMPTY_WHY, fstart);
			rc = -1;
			break;
		}
		if (h[4] & 0x04)
			pos += 4; /* the content checksum */
		k++;
	}
out:
	free(off);
	free(tar);
	return rc;
}

/* The writer's frame inside a large member, FG_TAR_FRAME_MAX (the hints
 * below assume it); for tests, FG_TAR_TEST_FRAME_MAX=N (bytes, at least
 * 512) stands for it, so that small archives (the fuzz target's) reach the
 * cuts inside members. Only hints: any value gives the same outcome. */
static unsigned long long frame_max(void)
{
	const char *e = getenv("FG_TAR_TEST_FRAME_MAX");
	unsigned long long v;

	return e && !fg_parse_u64(e, &v) && v >= 512 && v <= FG_TAR_FRAME_MAX ? v : FG_TAR_FRAME_MAX;
}

/* Frame k may start a member: the frame before it was not cut for size
 * (the writer cuts inside a member only when a frame would pass
 * FG_TAR_FRAME_MAX, by a piece of at most FG_TAR_PIECE_MAX). Only a hint
 * for where to look: starts_member decides. */
static int may_start_member(const unsigned long long *tar, size_t k)
{
	return tar[k] - tar[k - 1] <= frame_max() - frame_max() / 8;
}

/* The regions' first frames ks[0..*nreg] (ks[0] = 0, ks[*nreg] = n): with
 * few frames (8 per lane) every one is tried, and when fewer start members
 * than want, each that does begins a region; else, for each of want - 1
 * even splits of the tar, the frame nearest it that starts with a member
 * header, after the previous one; a split none of the PROBES nearest frames
 * that may start one allows is left out. memo: per frame, 0 untried, 1
 * starts a member, 2 does not. */
static void split(int fd, const unsigned long long *off, const unsigned long long *tar, size_t n,
		  size_t want, unsigned char *memo, size_t *ks, size_t *nreg)
{
	size_t r, got = 0, valid = 0;

	ks[0] = 0;
	if (n - 1 <= 8 * want) {
		/* few frames: try them all; fewer members than lanes: a lane each */
		for (r = 1; r < n; r++) {
			if (!memo[r])
				memo[r] = starts_member(fd, off[r], off[n]) ? 1 : 2;
			valid += memo[r] == 1 || memo[r] == 3;
		}
		if (valid < want) {
			for (r = 1; r < n; r++)
				if (memo[r] == 1 || memo[r] == 3)
					ks[++got] = r;
			ks[++got] = n;
			*nreg = got;
			return;
		}
	}
	for (r = 1; r < want; r++) {
		unsigned long long goal = tar[n] / want * r;
		size_t probes;

		for (probes = 0; probes < PROBES; probes++) {
			size_t best = 0, k;
			unsigned long long bd = 0;

			for (k = ks[got] + 1; k < n; k++) {
				unsigned long long d = tar[k] > goal ? tar[k] - goal : goal - tar[k];

				if ((memo[k] == 3 || (memo[k] != 2 && may_start_member(tar, k))) &&
				    (!best || d < bd)) {
					best = k;
					bd = d;
				}
			}
			if (!best)
				break;
			if (!memo[best])
				memo[best] = starts_member(fd, off[best], off[n]) ? 1 : 2;
			if (memo[best] == 1 || memo[best] == 3) {
				ks[++got] = best;
				break;
			}
		}
	}
	ks[++got] = n;
	*nreg = got;
}

/* ---- regions that start inside a member, at a chain state ---- */

/* For a frame where such a region starts: the member as its header says
 * (path, size, mode), the bytes of its data before the frame and, when it
 * is hashed, its chain c and the state it is taken up from (states[j - 1],
 * after j * every bytes); c NULL: a member not hashed (o->hash_only), the
 * identity alone taken up there. */
struct cut {
	const struct fg_tarball_chain *c;
	size_t j;
	int mode;
	char *path;
	unsigned long long size, at;
};

/* The member whose header starts at `from`: 0 with its path (the caller
 * frees it), size, mode and the tar bytes from `from` to its data; -1 when
 * no member the walk accepts starts there. */
static int probe_member(int fd, unsigned long long from, unsigned long long to,
			unsigned long long max_entry, char **path, unsigned long long *size,
			int *mode, unsigned long long *data_at)
{
	struct lane l;
	const unsigned char *p;
	size_t n;
	int rc = -1;

	memset(&l, 0, sizeof(l));
	l.dirfd = l.out_fd = -1;
	l.max_entry = max_entry;
	if (!zl_open(&l.z, fd, NULL, from, to) && !fg_sha256_new(&l.h, NULL) &&
	    !lane_data(&l, &p, &n) && l.st == L_DATA && !l.n) {
		*path = l.cur.path;
		l.cur.path = NULL;
		*size = l.cur.size;
		*mode = l.cur.mode;
		*data_at = l.pos;
		rc = 0;
	}
	lane_free(&l);
	return rc;
}

/* Frames where a region may start inside a member: a frame that starts a
 * member and holds a whole frame of it (how the writer frames a large
 * member) is read up to the member's data; then each frame that begins
 * exactly at one of its chain states' offsets (a member hashed) or, for a
 * member not hashed (o->hash_only), any later frame inside its data where
 * the identity has a state (has_id), gets memo 3 and its cut. Only
 * proposals: the lanes check every one as they end. */
static void member_cuts(int fd, const unsigned long long *off, const unsigned long long *tar, size_t nf,
			const struct fg_tarlanes_opts *o, const unsigned char *has_id, unsigned char *memo,
			struct cut *cut)
{
	size_t k, i;

	for (k = 1; k < nf; k++) {
		const struct fg_tarball_chain *c = NULL;
		unsigned long long size = 0, at = 0, t;
		char *path = NULL;
		size_t m, j;
		int mode = 0, hashed;

		if (tar[k + 1] - tar[k] < frame_max() || !may_start_member(tar, k) ||
		    probe_member(fd, off[k], off[nf], o->max_entry, &path, &size, &mode, &at))
			continue;
		memo[k] = 1;
		if (o->keep && o->keep(o->keep_user, path)) {
			free(path); /* a member whose bytes are kept is read whole by one lane */
			continue;
		}
		hashed = !o->hash_only || !strcmp(path, o->hash_only);
		for (i = 0; hashed && i < o->n_chains && !c; i++)
			if (!strcmp(o->chains[i].path, path) && o->chains[i].size == size &&
			    o->chains[i].every && !(o->chains[i].every % 64) && o->chains[i].n &&
			    o->chains[i].n <= (size - 1) / o->chains[i].every)
				c = &o->chains[i];
		for (m = k + 1; !hashed && has_id && m < nf && tar[m] < tar[k] + at + size; m++)
			if (has_id[m]) {
				memo[m] = 3;
				cut[m].mode = mode;
				cut[m].size = size;
				cut[m].at = tar[m] - tar[k] - at;
				cut[m].path = strdup(path);
				if (!cut[m].path)
					memo[m] = 2;
			}
		free(path);
		for (m = k + 1, j = 1; c && j <= c->n; j++) {
			t = tar[k] + at + j * c->every;
			while (m < nf && tar[m] < t)
				m++;
			if (m == nf)
				break;
			if (tar[m] == t) {
				memo[m] = 3;
				cut[m].c = c;
				cut[m].j = j;
				cut[m].mode = mode;
				cut[m].size = c->size;
				cut[m].at = j * c->every;
			}
		}
	}
}

/* Region i starts inside a member: lane i takes the member up there (its
 * digest from the chain state, when it is hashed), and lane i - 1 must end
 * there (in the same state). */
static int start_at_state(struct lane *ln, size_t i, const struct cut *ct)
{
	const struct fg_tarball_chain *c = ct->c;
	struct lane *l = &ln[i];

	l->cur.path = strdup(c ? c->path : ct->path);
	if (!l->cur.path || (c && fg_sha256_set_state(l->h, c->states + 32 * (ct->j - 1), ct->at)))
		return -1;
	l->hashing = c != NULL;
	if (l->dirfd >= 0 && ((l->out_fd = openat(l->dirfd, l->cur.path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
			      lseek(l->out_fd, (off_t)ct->at, SEEK_SET) != (off_t)ct->at))
		return -1; /* (premade before the lanes run) */
	l->cur.size = ct->size;
	l->cur.mode = ct->mode;
	l->st = L_DATA;
	l->left = ct->size - ct->at;
	l->pad = (512 - ct->size % 512) % 512;
	ln[i - 1].end_st = c ? c->states + 32 * (ct->j - 1) : NULL;
	ln[i - 1].end_path = c ? c->path : ct->path;
	ln[i - 1].end_left = l->left;
	return 0;
}

/* A piece of member data in a lane that also computes the identity: into
 * the member's digest and the identity together when the member is
 * hashed, else into the identity. */
static int id_take(struct lane *l, const unsigned char *p, size_t n)
{
	return (l->hashing ? fg_sha256_pair_update(l->h, p, n, l->idh, p, n, NULL)
			   : fg_sha256_update(l->idh, p, n, NULL)) ||
			       lane_take(l, p, n)
		       ? -1
		       : 0;
}

/* Two lanes that also compute the identity, on one thread: where neither
 * member is hashed (o->hash_only), the two identities together; else a
 * piece of one lane at a time (lane_data hands the piece not taken again). */
static int run_pair_id(struct lane *a, struct lane *b)
{
	const unsigned char *pa = NULL, *pb = NULL;
	size_t na = 0, nb = 0;
	int ra = lane_data(a, &pa, &na), rb = b ? lane_data(b, &pb, &nb) : 1;

	while (ra >= 0 && rb >= 0 && (ra == 0 || rb == 0)) {
		if (ra == 0 && rb == 0 && !a->hashing && !b->hashing) {
			size_t m = na < nb ? na : nb;

			if (fg_sha256_pair_update(a->idh, pa, m, b->idh, pb, m, NULL) ||
			    lane_take(a, pa, m) || lane_take(b, pb, m))
				return -1;
		} else if (ra == 0 && (a->hashing || rb != 0)) {
			if (id_take(a, pa, na))
				return -1;
		} else if (id_take(b, pb, nb)) {
			return -1;
		}
		if (ra == 0)
			ra = lane_data(a, &pa, &na);
		if (rb == 0)
			rb = lane_data(b, &pb, &nb);
	}
	return ra < 0 || rb < 0 ? -1 : 0;
}

/* Extracting: the file of the member region ct starts inside, made now
 * (its folders 0755, the file empty with the member's mode, never over
 * anything) and listed in pre; nothing when it already is. -1: the lanes
 * give up (the sequential reader says why). */
static int premake(struct premade *pre, int dirfd, const struct cut *ct)
{
	const char *path = ct->c ? ct->c->path : ct->path;
	char *p;
	size_t i;
	int fd = -1;

	for (i = 0; i < pre->n; i++)
		if (!strcmp(pre->path[i], path))
			return 0;
	if (!fg_path_is_safe_rel(path) || !(p = strdup(path)))
		return -1;
	if (!mkparents(dirfd, p))
		fd = openat(dirfd, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)ct->mode);
	if (fd < 0 || close(fd) || fg_grow(&pre->path, &pre->cap_path, pre->n, sizeof(*pre->path)) ||
	    fg_grow(&pre->taken, &pre->cap_taken, pre->n, sizeof(*pre->taken))) {
		free(p);
		return -1;
	}
	pre->path[pre->n] = p;
	pre->taken[pre->n++] = 0;
	return 0;
}

/* Two lanes on one thread: a member of each hashed together, then the one
 * left alone. b may be NULL. */
static int run_pair(struct lane *a, struct lane *b)
{
	const unsigned char *pa = NULL, *pb = NULL;
	size_t na = 0, nb = 0;
	int ra, rb;

	if (a->idh)
		return run_pair_id(a, b);
	ra = lane_data(a, &pa, &na);
	rb = b ? lane_data(b, &pb, &nb) : 1;

	while (ra == 0 && rb == 0) {
		size_t m = na < nb ? na : nb;

		if (fg_sha256_pair_update(a->h, pa, m, b->h, pb, m, NULL) || lane_take(a, pa, m) ||
		    lane_take(b, pb, m))
			return -1;
		ra = lane_data(a, &pa, &na);
		rb = lane_data(b, &pb, &nb);
	}
	for (; ra == 0; ra = lane_data(a, &pa, &na))
		if (fg_sha256_update(a->h, pa, na, NULL) || lane_take(a, pa, na))
			return -1;
	for (; rb == 0; rb = lane_data(b, &pb, &nb))
		if (fg_sha256_update(b->h, pb, nb, NULL) || lane_take(b, pb, nb))
			return -1;
	return ra < 0 || rb < 0 ? -1 : 0;
}

/* ---- the archive mapped: a file cut short meanwhile ----
 *
 * The lanes read the archive through one read-only mapping (no copy out of
 * the page cache). Were the file cut short by someone else meanwhile, a
 * read past its new end would raise SIGBUS: while lanes run, a handler
 * turns a SIGBUS inside the mapping on a lane's thread into a jump back to
 * that thread's pair (the lanes give up, and the sequential reader reports
 * what it finds); any other SIGBUS goes on to the handler there was. The
 * handler is installed while any lanes run in the process (a count). */

struct guard {
	const unsigned char *base;
	size_t len;
	sigjmp_buf jb;
};

static __thread struct guard *guard_now;
static pthread_mutex_t guard_mu = PTHREAD_MUTEX_INITIALIZER;
static int guard_users;
static struct sigaction guard_old;

static void guard_bus(int sig, siginfo_t *si, void *uc)
{
	struct guard *g = guard_now;
	const unsigned char *a = si ? (const unsigned char *)si->si_addr : NULL;

	if (g && a >= g->base && a < g->base + g->len)
		siglongjmp(g->jb, 1);
	if (guard_old.sa_flags & SA_SIGINFO && guard_old.sa_sigaction)
		guard_old.sa_sigaction(sig, si, uc);
	else if (guard_old.sa_handler != SIG_DFL && guard_old.sa_handler != SIG_IGN)
		guard_old.sa_handler(sig);
	else
		signal(sig, SIG_DFL); /* the fault repeats on return: the default */
}

static int guard_begin(void)
{
	int rc = 0;

	pthread_mutex_lock(&guard_mu);
	if (!guard_users) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = guard_bus;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		rc = sigaction(SIGBUS, &sa, &guard_old);
	}
	if (!rc)
		guard_users++;
	pthread_mutex_unlock(&guard_mu);
	return rc;
}

static void guard_end(void)
{
	pthread_mutex_lock(&guard_mu);
	if (!--guard_users)
		sigaction(SIGBUS, &guard_old, NULL);
	pthread_mutex_unlock(&guard_mu);
}

/* The archive mapped and guarded, or NULL (FG_TAR_MMAP=0, or it cannot
 * be: then pread); a mapping ends with map_end. */
static const unsigned char *map_begin(const char *archive, int fd, unsigned long long size)
{
	void *m;

	if (env_off("FG_TAR_MMAP") || !size || size > SIZE_MAX || guard_begin())
		return NULL;
	m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		guard_end();
		return NULL;
	}
	madvise(m, (size_t)size, MADV_SEQUENTIAL);
	/* for tests: the file cut short by someone else now (were it not cut,
	 * the test fails on the file's size) */
	if (getenv("FG_TAR_TEST_CUT") && truncate(archive, (off_t)(size / 2)))
		errno = 0;
	return m;
}

static void map_end(const unsigned char *map, unsigned long long size)
{
	if (map) {
		munmap((void *)map, (size_t)size);
		guard_end();
	}
}

struct pairs {
	struct lane *ln;
	size_t n;
	const unsigned char *map;
	size_t map_len;
};

static int pair_work(void *ctx, size_t item, int thread, struct fg_err *err)
{
	struct pairs *p = ctx;
	struct guard g;
	volatile int bad; /* set after sigsetjmp: kept in memory */

	(void)thread;
	g.base = p->map;
	g.len = p->map_len;
	if (p->map && sigsetjmp(g.jb, 1)) {
		guard_now = NULL; /* the mapping ended early: the file was cut short */
		return fg_err_set(err, FG_EFORMAT, "lanes gave up: the archive changed");
	}
	guard_now = p->map ? &g : NULL;
	bad = run_pair(&p->ln[2 * item], 2 * item + 1 < p->n ? &p->ln[2 * item + 1] : NULL);
	guard_now = NULL;
	return bad ? fg_err_set(err, FG_EFORMAT, "lanes gave up") : 0;
}

int fg_tarlanes_may_read(const char *archive)
{
	unsigned long long *off = NULL, *tar = NULL;
	unsigned char foot[9], *has = NULL;
	uint8_t *idst = NULL;
	struct stat st;
	size_t nf;
	int fd, ok = 0;

	if (env_off("FG_TAR_LANES"))
		return 0;
	fd = open(archive, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ok = !fstat(fd, &st) && S_ISREG(st.st_mode) && !seek_footer(fd, (unsigned long long)st.st_size, foot);
	if (ok && !seek_table(fd, (unsigned long long)st.st_size, &off, &tar, &nf)) {
		id_states(fd, off, tar, &nf, &idst, &has);
		ok = idst ? 2 : 1;
	}
	free(off);
	free(tar);
	free(idst);
	free(has);
	close(fd);
	return ok;
}

int fg_tarlanes_hash(const char *archive, const struct fg_tarlanes_opts *o,
		     struct fg_tarlane_entry **out, size_t *n_out, int *lanes)
{
	int threads = o->threads, dirfd = -1;
	struct pairs pr = { NULL, 0, NULL, 0 };
	unsigned long long *off = NULL, *tar = NULL;
	unsigned char *memo = NULL;
	struct cut *cut = NULL;
	size_t *ks = NULL, nf = 0, want, i, total = 0;
	uint8_t *idst = NULL;
	unsigned char *has_id = NULL;
	struct premade pre = { NULL, NULL, 0, 0, 0 };
	struct stat st;
	char why[512];
	int fd, rc = 1;

	*out = NULL;
	*n_out = 0;
	if (env_off("FG_TAR_LANES"))
		return 1;
	if (threads < 1)
		threads = 1;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS; /* each lane holds a zstd window (2 MiB at level 3) */
	fd = open(archive, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    seek_table(fd, (unsigned long long)st.st_size, &off, &tar, &nf) ||
	    fg_tarlanes_frames_ok(fd, (unsigned long long)st.st_size, why, sizeof(why)))
		goto out; /* the sequential reader says what is wrong */
	id_states(fd, off, tar, &nf, &idst, &has_id);
	if ((o->id && !idst) || (o->hash_only && !o->id))
		goto out; /* the identity would be one pass from start to end */
	want = 2 * (size_t)threads;
	memo = calloc(nf + 1, 1);
	cut = calloc(nf + 1, sizeof(*cut));
	ks = calloc(want + 1, sizeof(*ks));
	if (!memo || !cut || !ks)
		goto out;
	if (o->n_chains || (o->hash_only && has_id))
		member_cuts(fd, off, tar, nf, o, has_id, memo, cut);
	/* with the identity, regions start only where a state of it is */
	for (i = 1; o->id && i < nf; i++)
		if (!has_id[i])
			memo[i] = 2;
	split(fd, off, tar, nf, want, memo, ks, &pr.n);
	if (pr.n < 2)
		goto out;
	if (o->dest) {
		unsigned long long free_bytes = 0;

		/* room for the whole tar, or the sequential reader says what is short */
		dirfd = open(o->dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dirfd < 0 || fg_fs_free_bytes(o->dest, &free_bytes, NULL) ||
		    (free_bytes && free_bytes < tar[nf]))
			goto out;
	}
	pr.ln = calloc(pr.n, sizeof(*pr.ln));
	if (!pr.ln)
		goto out;
#ifdef POSIX_FADV_SEQUENTIAL
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
	/* the archive through one mapping, guarded (FG_TAR_MMAP=0: pread) */
	pr.map = map_begin(archive, fd, (unsigned long long)st.st_size);
	pr.map_len = pr.map ? (size_t)st.st_size : 0;
	for (i = 0; i < pr.n; i++) {
		pr.ln[i].max_entry = o->max_entry;
		pr.ln[i].max_total = o->max_total;
		pr.ln[i].max_entries = o->max_entries;
		pr.ln[i].dirfd = dirfd;
		pr.ln[i].out_fd = -1;
		pr.ln[i].is_last = i == pr.n - 1;
		pr.ln[i].o = o;
		/* with chains, contexts whose state can be set and read */
		if (zl_open(&pr.ln[i].z, fd, pr.map, off[ks[i]], off[ks[i + 1]]) ||
		    (o->n_chains ? fg_sha256_new_own(&pr.ln[i].h, NULL) : fg_sha256_new_x2(&pr.ln[i].h, NULL)))
			goto out;
		pr.ln[i].pre = &pre;
		/* the identity taken up from its state where the region starts */
		if (o->id && (fg_sha256_new_own(&pr.ln[i].idh, NULL) ||
			      (i && fg_sha256_set_state(pr.ln[i].idh, idst + 32 * ks[i], tar[ks[i]]))))
			goto out;
	}
	for (i = 1; i < pr.n; i++)
		if (memo[ks[i]] == 3 && ((dirfd >= 0 && premake(&pre, dirfd, &cut[ks[i]])) ||
					 start_at_state(pr.ln, i, &cut[ks[i]])))
			goto out;
	if (fg_workq_run((pr.n + 1) / 2, threads, pair_work, NULL, &pr, NULL))
		goto out;
	/* the identity: each region as long as the table says, ending in the
	 * state the next one was taken up from, so every state was computed
	 * from the bytes read back to the first, from SHA-256's own start */
	for (i = 0; o->id && i < pr.n; i++) {
		uint8_t st_end[32];
		uint64_t at = 0;

		if (pr.ln[i].pos != tar[ks[i + 1]] - tar[ks[i]])
			goto out;
		if (i + 1 < pr.n ? fg_sha256_state(pr.ln[i].idh, st_end, &at) || at != tar[ks[i + 1]] ||
					   memcmp(st_end, idst + 32 * ks[i + 1], 32)
				 : fg_sha256_final(pr.ln[i].idh, o->id, NULL) != 0)
			goto out;
	}
	if (o->raw)
		for (*o->raw = 0, i = 0; i < pr.n; i++)
			*o->raw += pr.ln[i].z.raw_bytes;
	/* the regions' members one after another: tar order */
	for (i = 0; i < pr.n; i++)
		if (fg_size_add(total, pr.ln[i].n, &total))
			goto out;
	*out = malloc((total ? total : 1) * sizeof(**out));
	if (!*out)
		goto out;
	for (i = 0; i < pr.n; i++) {
		/* (a lane inside one member ends none: no entries at all) */
		if (pr.ln[i].n)
			memcpy(*out + *n_out, pr.ln[i].e, pr.ln[i].n * sizeof(**out));
		*n_out += pr.ln[i].n;
		free(pr.ln[i].e);
		pr.ln[i].e = NULL;
		pr.ln[i].n = 0;
	}
	if (lanes)
		*lanes = (int)pr.n;
	rc = 0;
out:
	for (i = 0; pr.ln && i < pr.n; i++)
		lane_free(&pr.ln[i]);
	free(pr.ln);
	map_end(pr.map, pr.map_len);
	free(memo);
	for (i = 0; cut && i <= nf; i++)
		free(cut[i].path);
	free(cut);
	free(ks);
	free(off);
	free(tar);
	free(idst);
	free(has_id);
	for (i = 0; i < pre.n; i++)
		free(pre.path[i]);
	free(pre.path);
	free(pre.taken);
	if (dirfd >= 0)
		close(dirfd);
	close(fd);
	return rc;
}

/* The stream from z into h until its end (1), an error (-1) or *stop (0);
 * a SIGBUS inside map (the file cut short meanwhile) is an error. */
static int id_walk(struct zlane *z, struct fg_sha256 *h, const volatile int *stop,
		   const unsigned char *map, size_t len)
{
	struct guard g;
	volatile int r = 0; /* set after sigsetjmp: kept in memory */

	g.base = map;
	g.len = len;
	if (map && sigsetjmp(g.jb, 1)) {
		guard_now = NULL;
		return -1;
	}
	guard_now = map ? &g : NULL;
	while (!(stop && __atomic_load_n(stop, __ATOMIC_RELAXED)) && (r = zl_fill(z)) == 0)
		if (fg_sha256_update(h, z->cur, z->out_len, NULL)) {
			r = -1;
			break;
		}
	guard_now = NULL;
	return r;
}

int fg_tarlanes_id(const char *archive, uint8_t id[32], const volatile int *stop)
{
	struct stat st;
	struct zlane z;
	struct fg_sha256 *h = NULL;
	const unsigned char *map = NULL;
	char why[512];
	int fd, rc = 1;

	if (env_off("FG_TAR_LANES"))
		return 1;
	fd = open(archive, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	memset(&z, 0, sizeof(z));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    fg_tarlanes_frames_ok(fd, (unsigned long long)st.st_size, why, sizeof(why)) ||
	    fg_sha256_new(&h, NULL))
		goto out; /* the sequential reader says what is wrong */
#ifdef POSIX_FADV_SEQUENTIAL
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
	map = map_begin(archive, fd, (unsigned long long)st.st_size);
	if (!zl_open(&z, fd, map, 0, (unsigned long long)st.st_size) &&
	    id_walk(&z, h, stop, map, map ? (size_t)st.st_size : 0) == 1 && !fg_sha256_final(h, id, NULL))
		rc = 0;
out:
	zl_close(&z);
	map_end(map, map ? (unsigned long long)st.st_size : 0);
	fg_sha256_free(h);
	close(fd);
	return rc;
}

/* ---- the frame walk for the sequential reader (lib/tarball.c) ---- */

struct fg_zwalk {
	struct zlane z;
};

struct fg_zwalk *fg_zwalk_new(int fd, unsigned long long size)
{
	struct fg_zwalk *w = calloc(1, sizeof(*w));

	if (w && zl_open(&w->z, fd, NULL, 0, size)) {
		fg_zwalk_free(w);
		return NULL;
	}
	return w;
}

unsigned long long fg_zwalk_at(const struct fg_zwalk *w)
{
	return w->z.err_at;
}

int fg_zwalk_next(struct fg_zwalk *w, const unsigned char **p, size_t *n, int *why, int *err_no,
		  size_t *code)
{
	int r = zl_fill(&w->z);

	*p = w->z.cur;
	*n = r ? 0 : w->z.out_len;
	if (r < 0) {
		*why = w->z.err_kind;
		*err_no = w->z.err_no;
		*code = w->z.err_code;
	}
	return r;
}

void fg_zwalk_free(struct fg_zwalk *w)
{
	if (w) {
		zl_close(&w->z);
		free(w);
	}
}
