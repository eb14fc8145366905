/* tarball.c - reproducible tar.zst writer and a distrustful reader/extractor.
 *
 * libarchive produces and parses the tar stream; zstd runs outside libarchive
 * (through libzstd, in the write and read callbacks) so that the uncompressed
 * tar bytes pass through our hands exactly once and can be hashed: that hash
 * is the archive's identity. The writer cuts the tar into independent zstd
 * frames and ends the file with the seekable format's seek table; a scan that
 * only hashes members reads such a file in lanes (tarlanes.c). See
 * tarball.h for the rules. */
#include "tarball.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h> /* ZSTD_error_checksum_wrong */

#include "bf16.h" /* fg_put_le32 */
#include "fsutil.h"
#include "ring.h"
#include "sha256.h"
#include "tarlanes.h"
#include "xxh64.h"

#define IO_CHUNK ((size_t)FG_TAR_PIECE_MAX)
/* tar bytes are produced in pieces of RD_OUT: decompressed, hashed for the
 * identity and for the member while still in L2 */
#define RD_OUT ((size_t)256 << 10)
#define RD_OUTS 4
#define WRITEBACK (32ULL << 20)
/* zstd frames (docs/formats/bundle.md): a frame ends before the header of a
 * member of FRAME_MIN bytes or more, or once it holds FRAME_MIN tar bytes,
 * and before it would grow past FRAME_MAX (inside a large member, so that
 * frames can be compressed side by side and held while an earlier one
 * finishes); the seek table at the end lists them, so a reader can start at
 * a member */
#define FRAME_MIN ((unsigned long long)1 << 20)
#define FRAME_MAX FG_TAR_FRAME_MAX
#define DIRECT_MIN ((size_t)64 << 10)
/* Stored frames (docs/formats/bundle.md): a frame's bytes are held until
 * zstd or stored blocks are chosen for it. PROBE_SAMPLES samples of
 * PROBE_SAMPLE bytes, one in the middle of each equal part of the frame, are
 * compressed on their own; when none gains PROBE_SAMPLE / 64 bytes (zstd
 * stores a block that gains less: ZSTD_minGain) the frame is written as
 * stored blocks. A frame under PROBE_MIN bytes, or over HOLD_MAX (one written
 * from memory), goes to zstd. */
#define PROBE_MIN ((size_t)256 << 10)
#define HOLD_MAX (FRAME_MAX + 2 * IO_CHUNK)
#define PROBE_SAMPLES 16
#define PROBE_SAMPLE ((size_t)8 << 10)
#define ZBLOCK ((size_t)ZSTD_BLOCKSIZE_MAX) /* a stored block's most bytes */
/* GNU tar's record: the archive is padded with zeros to a multiple of it */
#define TAR_RECORD 10240

/* ---- member names and the locale ---- */

/* libarchive converts a member's name between the pax header's UTF-8 and
 * the charset of the calling thread's locale. fgpack never calls setlocale,
 * so that charset is the C locale's ASCII: a model file named "é ü.bin"
 * failed to pack ("Can't translate pathname") and a tar holding it failed to
 * read. The calls into libarchive therefore run with LC_CTYPE "C.UTF-8" on
 * their thread, where a UTF-8 name passes through as its bytes (a name that
 * is not UTF-8 still fails, in one line). Where the C library has no such
 * locale (glibc before 2.35 without it installed), they run as before. */
static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void utf8_init(void)
{
	utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

/* returns what utf8_leave restores */
static locale_t utf8_enter(void)
{
	pthread_once(&utf8_once, utf8_init);
	return utf8_locale ? uselocale(utf8_locale) : (locale_t)0;
}

static void utf8_leave(locale_t prev)
{
	if (prev)
		uselocale(prev);
}

/* ---- a set of paths: files and the folders their paths imply ---- */

enum { SLOT_EMPTY = 0, SLOT_FILE = 1, SLOT_DIR = 2 };

struct pathset {
	char **keys;
	unsigned char *kind;
	size_t cap, n; /* cap is a power of two */
};

static size_t path_hash(const char *s, size_t len)
{
	size_t h = 1469598103934665603ULL;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

static void pathset_free(struct pathset *ps)
{
	size_t i;

	for (i = 0; i < ps->cap; i++)
		free(ps->keys[i]);
	free(ps->keys);
	free(ps->kind);
	memset(ps, 0, sizeof(*ps));
}

/* Finds the slot of s[0..len) or the empty slot where it belongs. */
static size_t pathset_slot(const struct pathset *ps, const char *s, size_t len)
{
	size_t i = path_hash(s, len) & (ps->cap - 1);

	while (ps->kind[i] != SLOT_EMPTY &&
	       !(strlen(ps->keys[i]) == len && !memcmp(ps->keys[i], s, len)))
		i = (i + 1) & (ps->cap - 1);
	return i;
}

static int pathset_grow(struct pathset *ps, struct fg_err *err)
{
	struct pathset bigger = { NULL, NULL, ps->cap ? ps->cap * 2 : 64, 0 };
	size_t i;

	bigger.keys = calloc(bigger.cap, sizeof(char *));
	bigger.kind = calloc(bigger.cap, 1);
	if (!bigger.keys || !bigger.kind) {
		free(bigger.keys);
		free(bigger.kind);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	for (i = 0; i < ps->cap; i++) {
		size_t j;

		if (ps->kind[i] == SLOT_EMPTY)
			continue;
		j = pathset_slot(&bigger, ps->keys[i], strlen(ps->keys[i]));
		bigger.keys[j] = ps->keys[i];
		bigger.kind[j] = ps->kind[i];
		bigger.n++;
	}
	free(ps->keys);
	free(ps->kind);
	*ps = bigger;
	return 0;
}

/* Looks up s[0..len); inserts it with kind when absent. *found gets the kind
 * that was there before (SLOT_EMPTY when inserted). */
static int pathset_put(struct pathset *ps, const char *s, size_t len, int kind, int *found,
		       struct fg_err *err)
{
	size_t i;

	if ((ps->n + 1) * 2 > ps->cap) {
		int rc = pathset_grow(ps, err);

		if (rc)
			return rc;
	}
	i = pathset_slot(ps, s, len);
	*found = ps->kind[i];
	if (ps->kind[i] != SLOT_EMPTY)
		return 0;
	ps->keys[i] = strndup(s, len);
	if (!ps->keys[i])
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	ps->kind[i] = (unsigned char)kind;
	ps->n++;
	return 0;
}

/* Records path as a file or folder; refuses a duplicate file, a file where a
 * folder is implied, or a folder (or implied parent) where a file is. */
static int pathset_claim(struct pathset *ps, const char *path, int is_dir, struct fg_err *err)
{
	const char *p;
	int found, rc;

	for (p = strchr(path, '/'); p; p = strchr(p + 1, '/')) {
		rc = pathset_put(ps, path, (size_t)(p - path), SLOT_DIR, &found, err);
		if (rc)
			return rc;
		if (found == SLOT_FILE)
			return fg_err_set(err, FG_EFORMAT, "%s: a parent of it is a file in the archive",
					  path);
	}
	rc = pathset_put(ps, path, strlen(path), is_dir ? SLOT_DIR : SLOT_FILE, &found, err);
	if (rc)
		return rc;
	if (found == SLOT_FILE)
		return fg_err_set(err, FG_EFORMAT, "%s: appears twice in the archive", path);
	if (found == SLOT_DIR && !is_dir)
		return fg_err_set(err, FG_EFORMAT, "%s: is both a file and a folder in the archive", path);
	return 0;
}

/* ---- writer ---- */

struct wentry {
	char *name;
	char *src;          /* file to copy, or NULL */
	char *data;         /* bytes to store when src is NULL */
	size_t len;
	unsigned long long size;
	int mode;
	int has_expect;
	struct fg_tarball_stamp expect;
};

struct fg_tarball_writer {
	struct wentry *e;
	size_t n, cap;
	int level;
	int threads; /* zstd workers */
	long long mtime;
};

/* Pieces of tar stream on their way to the compressing threads. */
#define W_STAGES 2 /* stages for small writes: one filling, one compressing */
#define ZQ (FRAME_MAX / IO_CHUNK + 8) /* a whole frame's pieces and its stages */
#define MAX_ZWORKERS 63
/* from this many threads the identity is hashed on a thread of its own: the
 * calling thread then only reads and tars (with fewer, three busy threads
 * on two cores lost more to hand-overs than they gained: docs/bench.md) */
#define ID_THREAD_MIN 4

struct wsink;

enum { ZM_PROBE, ZM_ZSTD, ZM_STORED };

/* One compressor: a zstd context, on a thread of its own (ring) or, with
 * one thread in all, on the calling thread (ring NULL). Its frames come one
 * after another: fi is the one it is making, mode how. */
struct zwork {
	struct wsink *s;
	ZSTD_CCtx *cctx;
	struct fg_ring *ring;
	char *zbuf;
	size_t fi;
	int mode;
	struct fg_buf hold; /* ZM_PROBE: the frame's bytes so far */
	unsigned char *blk; /* a stored block's header and bytes */
	void *pout;         /* the probe's output */
};

/* A frame: what it holds, and its compressed bytes not yet written (a
 * frame is written once every frame before it is). */
struct frec {
	unsigned long long csize, dsize;
	struct fg_buf held;
	int done;
	/* the identity's chain state where the frame begins (has_idst: it
	 * begins at a 64-byte boundary of the tar, and states are kept) */
	unsigned long long tar0;
	uint8_t idst[32];
	int has_idst;
	int zi; /* its compressor */
};

/* State shared by libarchive's write callback. The calling thread reads
 * files, makes the tar stream and hashes it. The tar is cut into zstd
 * frames (FRAME_MIN, FRAME_MAX), each compressed on its own by one of the
 * compressors (frame f by compressor f mod nz), without zstd workers: a
 * frame's bytes depend on its tar bytes alone, so the file is the same for
 * any number of threads. Frames reach the file in order: the compressor of
 * the oldest unwritten frame writes as it goes, the others hold their output
 * until their frame is the oldest (mu). */
struct wsink {
	int fd;
	const char *path;
	struct fg_sha256 *id;       /* the identity, hashed on the calling thread, or */
	struct fg_sha256_pipe *idp; /* on a thread of its own (ID_THREAD_MIN threads) */
	int id_states; /* each frame's identity chain state kept (FG_TAR_ID_STATES=0: not) */
	int stored; /* incompressible frames as stored blocks (FG_TAR_STORED=0: not) */
	int cheap;  /* (atomic) the last frame a compressor chose a mode for was stored */
	char *stage;        /* tar bytes gathered into IO_CHUNK pieces: libarchive */
	size_t staged;      /* hands over one 10 KiB record at a time */
	char *stages[W_STAGES];
	uint64_t stage_seq[W_STAGES]; /* last piece handed over from each */
	int stage_z[W_STAGES];        /* and to which compressor */
	uint64_t stage_idseq[W_STAGES]; /* and its number in idp */
	int cur_stage;
	char **bufs;        /* file data is read into these and compressed from them */
	uint64_t *buf_seq, *buf_idseq;
	int *buf_z;
	int nbufs, cur_buf;
	unsigned long long written, flushed; /* output bytes; and those sent to write-back */
	unsigned long long tar_len;          /* tar bytes so far */
	unsigned long long frame_tar0;       /* tar offset where this frame began */
	int in_data; /* a large file member's data: write_member cuts its frames
		      * at every FRAME_MAX bytes of it, not sink_take by size */
	struct frec *fr;  /* every frame there can be, allocated at the start */
	struct fg_buf *spare; /* (mu) held buffers written out, kept for reuse */
	size_t n_spare, max_spare;
	size_t max_frames, n_frames; /* frames begun by the calling thread */
	size_t next_commit; /* the oldest frame not wholly written (mu) */
	pthread_mutex_t mu;
	struct zwork *z;
	int nz;
	struct fg_err *err;
	int failed;
};

int fg_tarball_writer_new(struct fg_tarball_writer **out, int level, long long mtime,
			  struct fg_err *err)
{
	struct fg_tarball_writer *w;

	*out = NULL;
	if (level < 0 || level > 19)
		return fg_err_set(err, FG_EINVAL, "zstd level %d out of range 1..19", level);
	if (mtime < 0)
		return fg_err_set(err, FG_EINVAL, "negative mtime %lld", mtime);
	w = calloc(1, sizeof(*w));
	if (!w)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	w->level = level ? level : 3;
	w->threads = 1;
	w->mtime = mtime;
	*out = w;
	return 0;
}

int fg_tarball_writer_set_threads(struct fg_tarball_writer *w, int threads, struct fg_err *err)
{
	if (threads < 1 || threads > 64)
		return fg_err_set(err, FG_EINVAL, "zstd threads %d out of range 1..64", threads);
	w->threads = threads;
	return 0;
}

void fg_tarball_stamp_of(struct fg_tarball_stamp *out, const struct stat *st)
{
	out->dev = (unsigned long long)st->st_dev;
	out->ino = (unsigned long long)st->st_ino;
	out->size = (unsigned long long)st->st_size;
	out->mtime_ns = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
	out->ctime_ns = (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
}

static int push_entry(struct fg_tarball_writer *w, struct wentry *e, struct fg_err *err)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 32;
		struct wentry *ne = realloc(w->e, cap * sizeof(*ne));

		if (!ne)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		w->e = ne;
		w->cap = cap;
	}
	w->e[w->n++] = *e;
	return 0;
}

int fg_tarball_add_file(struct fg_tarball_writer *w, const char *name, const char *src,
			const struct fg_tarball_stamp *expect, struct fg_err *err)
{
	struct wentry e;
	struct stat st;
	int rc;

	if (!fg_path_is_safe_rel(name))
		return fg_err_set(err, FG_EINVAL, "archive member name '%s' is not a safe relative path",
				  name);
	if (stat(src, &st))
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "stat %s: %s", src,
				  strerror(errno));
	if (!S_ISREG(st.st_mode))
		return fg_err_set(err, FG_EINVAL, "%s: not a regular file", src);
	memset(&e, 0, sizeof(e));
	e.name = strdup(name);
	e.src = strdup(src);
	e.size = (unsigned long long)st.st_size;
	e.mode = (st.st_mode & 0111) ? 0755 : 0644;
	if (expect) {
		e.has_expect = 1;
		e.expect = *expect;
	}
	if (!e.name || !e.src)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	else
		rc = push_entry(w, &e, err);
	if (rc) {
		free(e.name);
		free(e.src);
	}
	return rc;
}

int fg_tarball_add_mem(struct fg_tarball_writer *w, const char *name, const void *data, size_t len,
		       int mode, struct fg_err *err)
{
	struct wentry e;
	int rc;

	if (!fg_path_is_safe_rel(name))
		return fg_err_set(err, FG_EINVAL, "archive member name '%s' is not a safe relative path",
				  name);
	if (mode != 0644 && mode != 0755)
		return fg_err_set(err, FG_EINVAL, "%s: mode %o is not 0644 or 0755", name, mode);
	memset(&e, 0, sizeof(e));
	e.name = strdup(name);
	e.data = malloc(len ? len : 1);
	e.len = len;
	e.size = len;
	e.mode = mode;
	if (!e.name || !e.data)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	else {
		if (len)
			memcpy(e.data, data, len);
		rc = push_entry(w, &e, err);
	}
	if (rc) {
		free(e.name);
		free(e.data);
	}
	return rc;
}

void fg_tarball_writer_free(struct fg_tarball_writer *w)
{
	size_t i;

	if (!w)
		return;
	for (i = 0; i < w->n; i++) {
		free(w->e[i].name);
		free(w->e[i].src);
		free(w->e[i].data);
	}
	free(w->e);
	free(w);
}

static int cmp_wentry(const void *a, const void *b)
{
	return strcmp(((const struct wentry *)a)->name, ((const struct wentry *)b)->name);
}

/* Writes out to the file (the caller holds the turn: see wsink). */
static int out_write(struct wsink *s, const void *p, size_t n, struct fg_err *err)
{
	if (n && fg_write_all(s->fd, p, n))
		return fg_err_set(err, errno == ENOSPC ? FG_ENOSPC : FG_EIO, "write %s: %s", s->path,
				  strerror(errno));
	s->written += n;
	/* start write-back every WRITEBACK bytes so that the closing fsync
	 * waits for little: the disk works while we compress */
	if (s->written - s->flushed >= WRITEBACK) {
		sync_file_range(s->fd, (off_t)s->flushed, (off_t)(s->written - s->flushed),
				SYNC_FILE_RANGE_WRITE);
		s->flushed = s->written;
	}
	return 0;
}

/* Under mu: a held buffer once written is kept for the next frame that
 * must hold bytes, its pages already there (fresh pages for every held
 * frame cost this VM more system time than the compression saved:
 * docs/bench.md, forty-third session). */
static void held_done(struct wsink *s, struct fg_buf *b)
{
	if (b->data && s->n_spare < s->max_spare) {
		fg_buf_reset(b);
		s->spare[s->n_spare++] = *b;
		fg_buf_init(b, 0);
	} else {
		fg_buf_release(b);
	}
}

/* Under mu: writes the held bytes of every finished frame from the oldest
 * on, and the held part of the oldest if it is still being made. */
static int commit(struct wsink *s, struct fg_err *err)
{
	while (s->next_commit < s->max_frames) {
		struct frec *f = &s->fr[s->next_commit];
		int rc = out_write(s, f->held.data, f->held.len, err);

		held_done(s, &f->held);
		if (rc)
			return rc;
		if (!f->done)
			break;
		s->next_commit++;
	}
	return 0;
}

/* Compressed bytes of frame fi: written when it is the oldest unwritten
 * frame, else held. */
static int emit(struct wsink *s, size_t fi, const void *p, size_t n, struct fg_err *err)
{
	int rc;

	s->fr[fi].csize += n;
	pthread_mutex_lock(&s->mu);
	if (fi == s->next_commit) {
		rc = commit(s, err); /* what it held before it became the oldest */
		if (!rc)
			rc = out_write(s, p, n, err);
	} else {
		struct fg_buf *h = &s->fr[fi].held;

		if (!h->data && s->n_spare)
			*h = s->spare[--s->n_spare];
		rc = fg_buf_append(h, p, n, err);
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* Frame fi is complete: it and the finished frames after it go out. */
static int frame_end(struct wsink *s, size_t fi, struct fg_err *err)
{
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	s->fr[fi].done = 1;
	if (fi == s->next_commit)
		rc = commit(s, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* Compresses len bytes of the frame fi (or, with end set, ends the frame).
 * zstd copies what it is given into its window, so data is free again on
 * return. */
static int zstd_feed(struct zwork *z, size_t fi, const void *data, size_t len, int end,
		     struct fg_err *err)
{
	ZSTD_inBuffer in = { data, len, 0 };

	for (;;) {
		ZSTD_outBuffer out = { z->zbuf, ZSTD_CStreamOutSize(), 0 };
		size_t left = ZSTD_compressStream2(z->cctx, &out, &in, end ? ZSTD_e_end : ZSTD_e_continue);

		if (ZSTD_isError(left))
			return fg_err_set(err, FG_EIO, "zstd compress: %s", ZSTD_getErrorName(left));
		if (out.pos && emit(z->s, fi, z->zbuf, out.pos, err))
			return err && err->code ? err->code : FG_EIO;
		if (end && left == 0)
			return frame_end(z->s, fi, err);
		if (!end && in.pos == in.size)
			return 0;
	}
}

/* The frame fi, all len bytes of it, as stored blocks (RFC 8878 3.1.1): a
 * header with no content size and a 128 KiB window, blocks of ZBLOCK bytes
 * at fixed offsets of the frame, the last one flagged, then the content
 * checksum as zstd writes it. Each block goes out with its header from blk
 * (one write). */
static int stored_frame(struct zwork *z, size_t fi, const unsigned char *p, size_t len,
			struct fg_err *err)
{
	/* magic; descriptor: checksum, no content size, not single segment;
	 * window 2^(10 + 7) */
	static const unsigned char head[6] = { 0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x38 };
	unsigned char chk[4];
	int rc = emit(z->s, fi, head, sizeof(head), err);

	fg_put_le32(chk, (uint32_t)fg_xxh64(p, len, 0));
	do {
		size_t k = len < ZBLOCK ? len : ZBLOCK;
		unsigned bh = (unsigned)k << 3 | (len == k); /* type 0: raw */

		if (rc)
			return rc;
		z->blk[0] = (unsigned char)bh;
		z->blk[1] = (unsigned char)(bh >> 8);
		z->blk[2] = (unsigned char)(bh >> 16);
		memcpy(z->blk + 3, p, k);
		rc = emit(z->s, fi, z->blk, 3 + k, err);
		p += k;
		len -= k;
	} while (len);
	if (!rc)
		rc = emit(z->s, fi, chk, sizeof(chk), err);
	return rc ? rc : frame_end(z->s, fi, err);
}

/* 1 when the frame held looks incompressible (see PROBE_MIN). */
static int probe_stored(struct zwork *z)
{
	size_t part = z->hold.len / PROBE_SAMPLES, k;

	if (z->hold.len < PROBE_MIN)
		return 0;
	for (k = 0; k < PROBE_SAMPLES; k++) {
		size_t at = k * part + (part - PROBE_SAMPLE) / 2;
		size_t n = ZSTD_compress2(z->cctx, z->pout, ZSTD_compressBound(PROBE_SAMPLE),
					  z->hold.data + at, PROBE_SAMPLE);

		if (ZSTD_isError(n) || n < PROBE_SAMPLE - PROBE_SAMPLE / 64)
			return 0;
	}
	return 1;
}

/* len bytes of the frame fi (with end: its last). The frame is held whole
 * until its mode is chosen at its end (see PROBE_MIN); data is free again on
 * return either way. */
static int compress_now(struct zwork *z, size_t fi, const void *data, size_t len, int end,
			struct fg_err *err)
{
	int rc;

	z->s->fr[fi].dsize += len;
	if (fi != z->fi) {
		z->fi = fi;
		z->mode = z->s->stored ? ZM_PROBE : ZM_ZSTD;
		fg_buf_reset(&z->hold);
	}
	if (z->mode == ZM_PROBE) {
		if (z->hold.len + len > HOLD_MAX) {
			z->mode = ZM_ZSTD;
			__atomic_store_n(&z->s->cheap, 0, __ATOMIC_RELAXED);
			if ((rc = zstd_feed(z, fi, z->hold.data, z->hold.len, 0, err)))
				return rc;
		} else {
			if ((rc = fg_buf_append(&z->hold, data, len, err)) || !end)
				return rc;
			z->mode = probe_stored(z) ? ZM_STORED : ZM_ZSTD;
			__atomic_store_n(&z->s->cheap, z->mode == ZM_STORED, __ATOMIC_RELAXED);
			if (z->mode == ZM_STORED)
				return stored_frame(z, fi, (const unsigned char *)z->hold.data,
						    z->hold.len, err);
			return zstd_feed(z, fi, z->hold.data, z->hold.len, 1, err);
		}
	}
	return zstd_feed(z, fi, data, len, end, err);
}

/* A piece on a compressing thread: arg the frame, flags 1: end it. */
static int zpiece(void *ctx, const struct fg_ring_item *it, struct fg_err *err)
{
	return compress_now(ctx, (size_t)(uintptr_t)it->arg, it->data, it->len, it->flags, err);
}

static void zthreads_stop(struct wsink *s)
{
	int k;

	for (k = 0; k < s->nz; k++) {
		fg_ring_free(s->z[k].ring); /* compresses what is queued first */
		s->z[k].ring = NULL;
	}
}

/* Hands a piece of the current frame to its compressor; *seq and *zi get
 * its number and compressor (seq 0 when it was compressed at once). data
 * must stay unchanged until zwait(zi, seq). With end, the frame ends and
 * the next begins. */
static int zput(struct wsink *s, const void *data, size_t len, int end, uint64_t *seq, int *zi)
{
	size_t fi = s->n_frames - 1;
	struct zwork *z = &s->z[s->fr[fi].zi];
	struct fg_ring_item it = { data, len, (void *)(uintptr_t)fi, end };

	if (seq)
		*seq = 0;
	if (zi)
		*zi = (int)(z - s->z);
	if (end) {
		struct frec *nf = &s->fr[s->n_frames];

		if (s->n_frames == s->max_frames)
			return fg_err_set(s->err, FG_EIO, "%s: more zstd frames than planned", s->path);
		s->n_frames++;
		/* its compressor: the same as this frame's while frames are
		 * stored (the write is cheap: one compressor keeps up, and the
		 * others stay asleep instead of taking the core the reading
		 * thread needs), else the next one in turn. Which compressor
		 * makes a frame never changes its bytes. */
		nf->zi = __atomic_load_n(&s->cheap, __ATOMIC_RELAXED) ? s->fr[fi].zi
								       : (s->fr[fi].zi + 1) % s->nz;
		/* the next frame begins here: every tar byte before is with the
		 * identity, so its chain state here is known (once hashed) */
		nf->tar0 = s->tar_len;
		if (s->id_states && s->tar_len % 64 == 0) {
			if (s->idp) {
				int rc = fg_sha256_pipe_state(s->idp, nf->idst, NULL, s->err);

				if (rc)
					return rc;
			} else if (fg_sha256_state(s->id, nf->idst, NULL)) {
				return fg_err_set(s->err, FG_EIO, "%s: identity state lost", s->path);
			}
			nf->has_idst = 1;
		}
	}
	if (!z->ring)
		return compress_now(z, fi, data, len, end, s->err);
	return fg_ring_put(z->ring, &it, seq, s->err);
}

/* Waits until compressor zi is done with pieces up to seq (their buffers
 * free). */
static int zwait(struct wsink *s, int zi, uint64_t seq)
{
	return s->z[zi].ring && seq ? fg_ring_wait(s->z[zi].ring, seq, s->err) : 0;
}

/* The identity takes len bytes at p; *seq gets their number in idp (0 when
 * hashed at once). p must stay unchanged until idwait(seq). */
static int idput(struct wsink *s, const void *p, size_t len, uint64_t *seq)
{
	*seq = 0;
	if (s->idp)
		return fg_sha256_pipe_update(s->idp, p, len, seq, s->err);
	return fg_sha256_update(s->id, p, len, s->err);
}

static int idwait(struct wsink *s, uint64_t seq)
{
	return s->idp && seq ? fg_sha256_pipe_wait(s->idp, seq, s->err) : 0;
}

/* The next buffer to read file data into, once its compressor is done with it. */
static char *next_buf(struct wsink *s)
{
	s->cur_buf = (s->cur_buf + 1) % s->nbufs;
	if (zwait(s, s->buf_z[s->cur_buf], s->buf_seq[s->cur_buf]) ||
	    idwait(s, s->buf_idseq[s->cur_buf]))
		return NULL;
	return s->bufs[s->cur_buf];
}

static int sink_flush(struct wsink *s)
{
	int rc = 0;

	if (!s->staged)
		return 0;
	rc = idput(s, s->stage, s->staged, &s->stage_idseq[s->cur_stage]);
	if (!rc)
		rc = zput(s, s->stage, s->staged, 0, &s->stage_seq[s->cur_stage],
			  &s->stage_z[s->cur_stage]);
	s->staged = 0;
	s->cur_stage = (s->cur_stage + 1) % W_STAGES;
	s->stage = s->stages[s->cur_stage];
	if (!rc)
		rc = zwait(s, s->stage_z[s->cur_stage], s->stage_seq[s->cur_stage]);
	if (!rc)
		rc = idwait(s, s->stage_idseq[s->cur_stage]);
	return rc;
}

/* Ends the zstd frame here (nothing when it is empty): -1 on error. */
static int frame_cut(struct wsink *s)
{
	if (s->tar_len == s->frame_tar0)
		return 0;
	if (sink_flush(s) || zput(s, NULL, 0, 1, NULL, NULL))
		return -1;
	s->frame_tar0 = s->tar_len;
	return 0;
}

/* Which of the read buffers holds [p, p + len), or -1. */
static int own_buf(const struct wsink *s, const char *p, size_t len)
{
	int k;

	for (k = 0; k < s->nbufs; k++)
		if (s->bufs[k] && p >= s->bufs[k] && p + len <= s->bufs[k] + IO_CHUNK)
			return k;
	return -1;
}

/* Hashes and compresses data straight from the caller's buffer (file data
 * arrives from write_member in IO_CHUNK pieces); small writes (headers,
 * padding) are gathered in the stage first. Order is kept: staged bytes go
 * out before a direct write. */
static int sink_take(struct wsink *s, const void *data, size_t len)
{
	const char *p = data;

	/* a frame ends before it would pass FRAME_MAX, unless all it holds is
	 * less than FRAME_MIN (a header before one large write: the write goes
	 * with it, into a frame over FRAME_MAX) */
	if (!s->in_data && s->tar_len - s->frame_tar0 >= FRAME_MIN &&
	    s->tar_len - s->frame_tar0 + len > FRAME_MAX && frame_cut(s))
		return -1;
	s->tar_len += len;
	if (len >= DIRECT_MIN && own_buf(s, p, len) >= 0) {
		int k = own_buf(s, p, len);

		if (sink_flush(s))
			return -1;
		return idput(s, p, len, &s->buf_idseq[k]) ||
				       zput(s, p, len, 0, &s->buf_seq[k], &s->buf_z[k])
			       ? -1
			       : 0;
	}
	while (len) {
		size_t take = IO_CHUNK - s->staged < len ? IO_CHUNK - s->staged : len;

		memcpy(s->stage + s->staged, p, take);
		s->staged += take;
		p += take;
		len -= take;
		if (s->staged == IO_CHUNK && sink_flush(s))
			return -1;
	}
	return 0;
}

static la_ssize_t sink_write(struct archive *a, void *user, const void *buf, size_t len)
{
	struct wsink *s = user;

	(void)a;
	if (s->failed)
		return -1;
	if (sink_take(s, buf, len)) {
		s->failed = 1;
		return -1;
	}
	return (la_ssize_t)len;
}

static int la_fail(struct archive *a, struct wsink *s, const char *what, const char *name,
		   struct fg_err *err)
{
	if (s && s->failed)
		return fg_err_wrap(err, "%s %s", what, name);
	return fg_err_set(err, FG_EIO, "%s %s: %s", what, name,
			  archive_error_string(a) ? archive_error_string(a) : "libarchive error");
}

static int stamps_equal(const struct fg_tarball_stamp *a, const struct fg_tarball_stamp *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
	       a->ctime_ns == b->ctime_ns;
}

/* stamp_differs: the file behind fd no longer looks as when it was hashed */
static int stamp_differs(int fd, const struct wentry *e)
{
	struct fg_tarball_stamp now;
	struct stat st;

	if (!e->has_expect)
		return 0;
	if (fstat(fd, &st))
		return 1;
	fg_tarball_stamp_of(&now, &st);
	return !stamps_equal(&now, &e->expect);
}

static int write_member(struct archive *a, struct wsink *s, const struct wentry *e, long long mtime,
			struct fg_err *err)
{
	char *buf;
	struct archive_entry *ae = archive_entry_new();
	unsigned long long done = 0, extra = 0;
	int fd = -1, rc = 0;

	if (!ae)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	archive_entry_set_pathname(ae, e->name);
	archive_entry_set_filetype(ae, AE_IFREG);
	archive_entry_set_perm(ae, (mode_t)e->mode);
	archive_entry_set_size(ae, (la_int64_t)e->size);
	archive_entry_set_mtime(ae, (time_t)mtime, 0);
	archive_entry_set_uid(ae, 0);
	archive_entry_set_gid(ae, 0);
	/* a new frame for a large member, or once the frame holds enough: the
	 * previous member's padding went out with it (archive_write_finish_entry) */
	if ((s->tar_len - s->frame_tar0 >= FRAME_MIN || e->size >= FRAME_MIN) && frame_cut(s)) {
		rc = err && err->code ? err->code : FG_EIO;
		goto out;
	}
	if (archive_write_header(a, ae) != ARCHIVE_OK) {
		rc = la_fail(a, s, "write header of", e->name, err);
		goto out;
	}
	if (!e->src) {
		if (e->len && archive_write_data(a, e->data, e->len) != (la_ssize_t)e->len)
			rc = la_fail(a, s, "write", e->name, err);
		goto finish;
	}
	fd = open(e->src, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = fg_err_set(err, FG_EIO, "open %s: %s", e->src, strerror(errno));
		goto out;
	}
	if (stamp_differs(fd, e)) {
		rc = fg_err_set(err, FG_EHASH, "%s: changed between hashing and packing", e->src);
		goto out;
	}
#ifdef POSIX_FADV_SEQUENTIAL
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
	/* a large member's frames are cut at every FRAME_MAX bytes of its data
	 * (the first also holds its header): a reader may start at any of them
	 * with the member's chain state (docs/formats/bundle.md). Its last frame
	 * is kept to FRAME_MAX - IO_CHUNK bytes of tar or less, by one more cut
	 * IO_CHUNK before its end where needed: the lanes take a frame of more
	 * for one cut inside a member, not before the next member's header. */
	s->in_data = e->size >= FRAME_MIN;
	if (s->in_data) {
		unsigned long long last = (e->size - 1) / FRAME_MAX * FRAME_MAX;
		unsigned long long tail = e->size - last + (512 - e->size % 512) % 512 +
					  (last ? 0 : s->tar_len - s->frame_tar0);

		extra = tail > FRAME_MAX - IO_CHUNK ? e->size - IO_CHUNK : 0;
	}
	while (!rc && done < e->size) {
		size_t want = e->size - done < IO_CHUNK ? (size_t)(e->size - done) : IO_CHUNK;
		ssize_t n;

		if (s->in_data && FRAME_MAX - done % FRAME_MAX < want)
			want = (size_t)(FRAME_MAX - done % FRAME_MAX);
		if (extra > done && extra - done < want)
			want = (size_t)(extra - done);
		if (s->in_data && done && (!(done % FRAME_MAX) || done == extra) && frame_cut(s)) {
			rc = err && err->code ? err->code : FG_EIO;
			break;
		}
		buf = next_buf(s);
		if (!buf) {
			rc = err && err->code ? err->code : FG_EIO;
			break;
		}
		n = read(fd, buf, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = fg_err_set(err, FG_EIO, "read %s: %s", e->src, strerror(errno));
			break;
		}
		if (n == 0) {
			rc = fg_err_set(err, FG_EIO, "%s: shrank while packing", e->src);
			break;
		}
		if (archive_write_data(a, buf, (size_t)n) != n)
			rc = la_fail(a, s, "write", e->name, err);
		done += (unsigned long long)n;
	}
	s->in_data = 0;
	if (!rc && (buf = next_buf(s)) && read(fd, buf, 1) > 0)
		rc = fg_err_set(err, FG_EIO, "%s: grew while packing", e->src);
	/* the bytes just copied are the bytes hashed when nothing moved meanwhile */
	if (!rc && stamp_differs(fd, e))
		rc = fg_err_set(err, FG_EHASH, "%s: changed while packing", e->src);
finish:
	/* the padding now, so that the next member starts a frame cleanly */
	if (!rc && archive_write_finish_entry(a) != ARCHIVE_OK)
		rc = la_fail(a, s, "write", e->name, err);
out:
	if (fd >= 0)
		close(fd);
	archive_entry_free(ae);
	return rc;
}

/* The identity's chain states at the starts of frames 1..n-1 that have one,
 * as a skippable frame (docs/formats/bundle.md, "Identity states"); *len
 * gets its size, 0 when there is none to write. */
static int write_id_states(struct wsink *s, size_t n, size_t *len, struct fg_err *err)
{
	size_t i, k = 0, body;
	unsigned char *t;
	int rc;

	*len = 0;
	for (i = 1; i < n; i++)
		k += s->fr[i].has_idst;
	if (!k)
		return 0;
	body = FG_TAR_IDST_HEAD + FG_TAR_IDST_ENTRY * k;
	if (!(t = malloc(8 + body)))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	fg_put_le32(t, FG_TAR_IDST_MAGIC);
	fg_put_le32(t + 4, (uint32_t)body);
	memcpy(t + 8, FG_TAR_IDST_TAG, 8);
	fg_put_le32(t + 16, 1); /* version */
	fg_put_le32(t + 20, (uint32_t)k);
	for (i = 1, k = 0; i < n; i++) {
		unsigned char *e = t + 8 + FG_TAR_IDST_HEAD + FG_TAR_IDST_ENTRY * k;

		if (!s->fr[i].has_idst)
			continue;
		fg_put_le32(e, (uint32_t)s->fr[i].tar0);
		fg_put_le32(e + 4, (uint32_t)(s->fr[i].tar0 >> 32));
		memcpy(e + 8, s->fr[i].idst, 32);
		k++;
	}
	rc = out_write(s, t, 8 + body, err);
	free(t);
	if (!rc)
		*len = 8 + body;
	return rc;
}

/* The zstd seekable format's seek table, a skippable frame at the end:
 * each frame's compressed and decompressed size, no checksums (each frame
 * carries its XXH64, and every member its sha256): frames 0..n-1, and one
 * more entry (extra bytes, none of the tar) for the identity's states
 * frame when extra is not 0. */
static int write_seek_table(struct wsink *s, size_t n, size_t extra, struct fg_err *err)
{
	size_t m = n + (extra ? 1 : 0), body = m * 8 + 9, i;
	unsigned char *t = malloc(8 + body);
	int rc = 0;

	if (!t)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	fg_put_le32(t, FG_TAR_SKIPPABLE_MAGIC);
	fg_put_le32(t + 4, (uint32_t)body);
	for (i = 0; i < n; i++) {
		fg_put_le32(t + 8 + 8 * i, (uint32_t)s->fr[i].csize);
		fg_put_le32(t + 12 + 8 * i, (uint32_t)s->fr[i].dsize);
	}
	if (extra) {
		fg_put_le32(t + 8 + 8 * n, (uint32_t)extra);
		fg_put_le32(t + 12 + 8 * n, 0);
	}
	fg_put_le32(t + 8 + 8 * m, (uint32_t)m);
	t[12 + 8 * m] = 0; /* descriptor: no checksums */
	fg_put_le32(t + 13 + 8 * m, FG_TAR_SEEKABLE_MAGIC);
	rc = out_write(s, t, 8 + body, err);
	free(t);
	return rc;
}

/* The most frames the writer's members can make: a cut before each member,
 * and at most one more per member for its one large write from memory (a
 * cut before a write of more than IO_CHUNK may leave a smaller frame);
 * inside members a cut each time a frame would pass FRAME_MAX, which a frame
 * of more than FRAME_MAX - IO_CHUNK reaches with the next piece of at most
 * IO_CHUNK; the last. */
static size_t frames_bound(const struct fg_tarball_writer *w)
{
	unsigned long long tar = TAR_RECORD;
	size_t i;

	for (i = 0; i < w->n; i++)
		tar += w->e[i].size + 4096; /* data, its padding, its headers */
	return 2 * w->n + (size_t)(tar / (FRAME_MAX - IO_CHUNK)) + 4;
}

/* The compressors and read buffers of threads threads (see wsink). */
static int sink_setup(struct wsink *s, const struct fg_tarball_writer *w, struct fg_err *err)
{
	/* one compressor fewer than threads: the calling thread reads and
	 * hashes beside them (as many as threads measured no faster on two
	 * cores, on random bytes, baked INT4 or bf16: docs/bench.md, forty-third
	 * session) */
	int k, nz = w->threads > 1 ? w->threads - 1 : 1;

	if (nz > MAX_ZWORKERS)
		nz = MAX_ZWORKERS;
	s->max_frames = frames_bound(w);
	s->fr = calloc(s->max_frames + 1, sizeof(*s->fr));
	s->z = calloc((size_t)nz, sizeof(*s->z));
	s->max_spare = 2 * (size_t)nz + 2;
	s->spare = calloc(s->max_spare, sizeof(*s->spare));
	/* one filling, the rest with the compressors: a whole frame's pieces
	 * each, so that the reading thread can go on to the next compressor's
	 * frame instead of waiting for this one's */
	s->nbufs = 2 + nz * (int)(FRAME_MAX / IO_CHUNK + 1);
	s->bufs = calloc((size_t)s->nbufs, sizeof(*s->bufs));
	s->buf_seq = calloc((size_t)s->nbufs, sizeof(*s->buf_seq));
	s->buf_idseq = calloc((size_t)s->nbufs, sizeof(*s->buf_idseq));
	s->buf_z = calloc((size_t)s->nbufs, sizeof(*s->buf_z));
	if (!s->fr || !s->z || !s->spare || !s->bufs || !s->buf_seq || !s->buf_idseq || !s->buf_z)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	s->n_frames = 1; /* frame 0 begun */
	for (k = 0; k < s->nbufs; k++)
		if (!(s->bufs[k] = malloc(IO_CHUNK)))
			return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (k = 0; k < W_STAGES; k++)
		if (!(s->stages[k] = malloc(IO_CHUNK)))
			return fg_err_set(err, FG_ENOMEM, "out of memory");
	s->stage = s->stages[0];
	s->nz = nz;
	for (k = 0; k < nz; k++) {
		struct zwork *z = &s->z[k];

		z->s = s;
		z->cctx = ZSTD_createCCtx();
		z->zbuf = malloc(ZSTD_CStreamOutSize());
		if (!z->cctx || !z->zbuf)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, w->level);
		ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1);
		z->fi = (size_t)-1;
		if (s->stored) {
			fg_buf_init(&z->hold, HOLD_MAX);
			z->blk = malloc(3 + ZBLOCK);
			z->pout = malloc(ZSTD_compressBound(PROBE_SAMPLE));
			if (!z->blk || !z->pout)
				return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
	}
	return 0;
}

/* Starts the compressing threads (none with one thread in all: then the
 * calling thread compresses; the bytes are the same). */
static void sink_start(struct wsink *s, int threads)
{
	int k;

	if (threads < 2)
		return;
	if (threads >= ID_THREAD_MIN && fg_sha256_pipe_new_own(&s->idp, NULL))
		s->idp = NULL; /* hashed on this thread then: the same identity */
	for (k = 0; k < s->nz; k++)
		if (fg_ring_new(&s->z[k].ring, ZQ, zpiece, &s->z[k], NULL))
			s->z[k].ring = NULL; /* that one compresses on this thread: same bytes */
}

static void sink_free(struct wsink *s)
{
	size_t i;
	int k;

	zthreads_stop(s); /* before the buffers and the file go */
	/* the identity's thread too: it may still hash pieces of the buffers
	 * and write states into the frames (an error ended the pack early) */
	fg_sha256_pipe_free(s->idp);
	s->idp = NULL;
	for (k = 0; s->z && k < s->nz; k++) {
		ZSTD_freeCCtx(s->z[k].cctx);
		free(s->z[k].zbuf);
		fg_buf_release(&s->z[k].hold);
		free(s->z[k].blk);
		free(s->z[k].pout);
	}
	free(s->z);
	for (i = 0; s->fr && i <= s->max_frames; i++)
		fg_buf_release(&s->fr[i].held);
	for (i = 0; i < s->n_spare; i++)
		fg_buf_release(&s->spare[i]);
	free(s->spare);
	free(s->fr);
	for (k = 0; s->bufs && k < s->nbufs; k++)
		free(s->bufs[k]);
	free(s->bufs);
	free(s->buf_seq);
	free(s->buf_idseq);
	free(s->buf_z);
	for (k = 0; k < W_STAGES; k++)
		free(s->stages[k]);
	fg_sha256_free(s->id);
	pthread_mutex_destroy(&s->mu);
}

static int writer_finish(struct fg_tarball_writer *w, const char *path, uint8_t id[32],
			 struct fg_err *err)
{
	struct wsink s;
	struct pathset ps = { 0 };
	struct fg_buf tmp = FG_BUF_INIT, dir = FG_BUF_INIT;
	struct archive *a = NULL;
	const char *slash;
	size_t i, idst_len = 0;
	int rc = 0, opened = 0, direct, k, slot = -1;

	memset(&s, 0, sizeof(s));
	s.fd = -1;
	s.err = err;
	pthread_mutex_init(&s.mu, NULL);
	qsort(w->e, w->n, sizeof(*w->e), cmp_wentry);
	for (i = 0; !rc && i < w->n; i++)
		rc = pathset_claim(&ps, w->e[i].name, 0, err);
	pathset_free(&ps);
	if (rc)
		return rc;

	/* a device or FIFO at path (/dev/null, a pipe) is written through, in
	 * order: the sink only appends, it never seeks */
	rc = fg_out_open(path, &s.fd, err);
	direct = s.fd >= 0;
	if (rc)
		goto out;
	slash = strrchr(path, '/');
	rc = slash ? fg_buf_append(&dir, path, slash == path ? 1 : (size_t)(slash - path), err)
		   : fg_buf_puts(&dir, ".", err);
	if (rc)
		goto out;
	{
		const char *e = getenv("FG_TAR_ID_STATES");

		s.id_states = !(e && !strcmp(e, "0"));
		e = getenv("FG_TAR_STORED");
		s.stored = !(e && !strcmp(e, "0"));
	}
	rc = sink_setup(&s, w, err);
	if (rc)
		goto out;
	/* an own context: its chain state at each frame's start is kept */
	rc = fg_sha256_new_own(&s.id, err);
	if (rc)
		goto out;
	if (!direct) {
		/* fg_file_write_atomic's temporary file: a new name (O_EXCL,
		 * O_NOFOLLOW: a link planted there is never written through),
		 * removed on a signal, a killed writer's swept by the next */
		rc = fg_tmp_create(path, 0644, &tmp, &s.fd, &slot, err);
		if (rc)
			goto out;
		opened = 1;
	}
	s.path = direct ? path : tmp.data;
	sink_start(&s, w->threads);
	a = archive_write_new();
	if (!a || archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_add_filter_none(a) != ARCHIVE_OK ||
	    /* unblocked: libarchive hands our buffers through without copying
	     * them into records; the record padding is added below */
	    archive_write_set_bytes_per_block(a, 0) != ARCHIVE_OK ||
	    archive_write_open(a, &s, NULL, sink_write, NULL) != ARCHIVE_OK) {
		rc = a ? la_fail(a, &s, "open tar writer for", path, err)
		       : fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; !rc && i < w->n; i++)
		rc = write_member(a, &s, &w->e[i], w->mtime, err);
	if (rc)
		goto out;
	if (archive_write_close(a) != ARCHIVE_OK) {
		rc = la_fail(a, &s, "finish", path, err);
		goto out;
	}
	/* zeros to the end of the last 10240-byte record, as a blocked writer
	 * (GNU tar, libarchive's default) ends the archive */
	while (!rc && s.tar_len % TAR_RECORD) {
		static const char zeros[512];
		size_t pad = TAR_RECORD - (size_t)(s.tar_len % TAR_RECORD);

		if (sink_take(&s, zeros, pad < sizeof(zeros) ? pad : sizeof(zeros)))
			rc = err && err->code ? err->code : FG_EIO;
	}
	if (!rc)
		rc = sink_flush(&s) ? (err ? err->code : FG_EIO) : 0;
	if (!rc)
		rc = zput(&s, NULL, 0, 1, NULL, NULL);
	for (k = 0; k < s.nz; k++)
		if (s.z[k].ring) {
			int wrc = fg_ring_wait(s.z[k].ring, fg_ring_last(s.z[k].ring), rc ? NULL : err);

			if (!rc)
				rc = wrc;
		}
	zthreads_stop(&s);
	if (!rc && s.next_commit != s.n_frames - 1)
		rc = fg_err_set(err, FG_EIO, "%s: %zu of %zu zstd frames written", s.path,
				s.next_commit, s.n_frames - 1);
	/* the identity's states, all hashed once its thread has caught up */
	if (!rc && s.idp)
		rc = fg_sha256_pipe_drain(s.idp, err);
	if (!rc)
		rc = write_id_states(&s, s.n_frames - 1, &idst_len, err);
	if (!rc)
		rc = write_seek_table(&s, s.n_frames - 1, idst_len, err);
	if (!rc && s.idp) {
		char hex[FG_SHA256_HEX_LEN + 1];

		rc = fg_sha256_pipe_final(s.idp, hex, NULL, err);
		if (!rc)
			rc = fg_sha256_pipe_drain(s.idp, err);
		if (!rc && fg_hex_decode(hex, id, 32))
			rc = fg_err_set(err, FG_EIO, "%s: identity hash lost", s.path);
	} else if (!rc) {
		rc = fg_sha256_final(s.id, id, err);
	}
	if (!rc && direct) {
		rc = fg_out_close(s.fd, path, err);
		s.fd = -1;
		goto out;
	}
	if (!rc && fsync(s.fd))
		rc = fg_err_set(err, FG_EIO, "fsync %s: %s", tmp.data, strerror(errno));
	if (!rc && close(s.fd))
		rc = fg_err_set(err, FG_EIO, "close %s: %s", tmp.data, strerror(errno));
	s.fd = -1;
	if (!rc && rename(tmp.data, path))
		rc = fg_err_set(err, FG_EIO, "rename %s: %s", path, strerror(errno));
	if (!rc)
		rc = fg_fsync_dir(dir.data, err);
out:
	if (a)
		archive_write_free(a);
	zthreads_stop(&s); /* before the buffers and the file go */
	if (s.fd >= 0)
		close(s.fd);
	if (rc && opened)
		unlink(tmp.data);
	fg_tmp_untrack(slot);
	sink_free(&s);
	fg_buf_release(&tmp);
	fg_buf_release(&dir);
	return rc;
}

int fg_tarball_writer_finish(struct fg_tarball_writer *w, const char *path, uint8_t id[32],
			     struct fg_err *err)
{
	locale_t prev = utf8_enter(); /* member names: utf8_locale */
	int rc = writer_finish(w, path, id, err);

	utf8_leave(prev);
	return rc;
}

/* ---- reader ---- */

/* Feeds libarchive the uncompressed tar stream, hashing it on the way. */
struct rsrc {
	int fd;
	const char *path;
	int zstd;
	ZSTD_DCtx *dctx;
	char *in, *out;
	char *outs[RD_OUTS]; /* out rotates through these: the identity thread may */
	uint64_t seq[RD_OUTS]; /* still be hashing the previous ones (its pieces) */
	int cur;
	size_t in_cap, in_len, in_pos, out_cap;
	int in_eof;
	size_t last_ret; /* ZSTD_decompressStream's last hint: 0 at a frame end */
	/* zstd on its own: the file offset of in[0]; where the current frame
	 * began and the bytes it gave so far (a zstd frame that gives none is
	 * refused: FG_TAR_EMPTY_WHY) */
	unsigned long long in_off, frame_at, frame_out;
	struct fg_zwalk *zw; /* zstd's frames walked (raw blocks given where read) */
	struct fg_sha256 *id;       /* identity hashed here, or */
	struct fg_sha256_pipe *idp; /* on its own thread */
	/* want_id 3 (paired): the identity trails the reader: member bytes that
	 * libarchive hands out straight from out go through one
	 * fg_sha256_pair_update with the member digest; the rest of each piece
	 * (headers, padding, bytes libarchive copied) singly, before out is
	 * refilled */
	int paired;
	size_t out_len;  /* paired: bytes of the piece now in out */
	size_t id_done;  /* paired: of them, in the identity so far */
	struct fg_err *err;
	int failed;
	/* the tar bytes produced so far, and the offset just past the last
	 * non-zero one among them: what follows the end-of-archive marker
	 * must be zeros (src_drain) */
	unsigned long long tar_len, nz_end;
};

/* zstd on its own ended a frame (or skipped a skippable one) with its
 * input at in[pos]: refused when it was a zstd frame that gave nothing,
 * else the next frame begins there. */
static int src_frame_end(struct rsrc *r, size_t pos)
{
	unsigned char m[4];

	if (!r->frame_out && pread(r->fd, m, 4, (off_t)r->frame_at) == 4 && fg_le32(m) == ZSTD_MAGICNUMBER)
		return fg_err_set(r->err, FG_EFORMAT, "%s: " FG_TAR_EMPTY_WHY, r->path, r->frame_at);
	r->frame_at = r->in_off + pos;
	r->frame_out = 0;
	return 0;
}

/* zstd on its own failed (r->last_ret): its error, the frame named where
 * its content checksum is wrong (as the frame walk names it). */
static int src_zstd_fail(struct rsrc *r)
{
	if (ZSTD_getErrorCode(r->last_ret) == ZSTD_error_checksum_wrong)
		return fg_err_set(r->err, FG_EFORMAT, "%s: " FG_TAR_CHECKSUM_WHY, r->path, r->frame_at);
	return fg_err_set(r->err, FG_EFORMAT, "%s: zstd: %s", r->path, ZSTD_getErrorName(r->last_ret));
}

/* Paired: the identity takes the piece in out up to byte upto. */
static int id_catch_up(struct rsrc *r, size_t upto)
{
	int rc = 0;

	if (upto > r->id_done)
		rc = fg_sha256_update(r->id, r->out + r->id_done, upto - r->id_done, r->err);
	r->id_done = upto;
	return rc;
}

/* Produces the next chunk of tar bytes; *len 0 at the end. */
static int src_next(struct rsrc *r, const void **data, size_t *len)
{
	if (r->idp) {
		/* the buffer about to be filled must be hashed already */
		r->cur = (r->cur + 1) % RD_OUTS;
		r->out = r->outs[r->cur];
		if (r->seq[r->cur] && fg_sha256_pipe_wait(r->idp, r->seq[r->cur], r->err))
			return r->err ? r->err->code : FG_EIO;
	}
	if (r->paired) {
		/* out is about to be refilled: the identity takes what is left */
		int rc = id_catch_up(r, r->out_len);

		r->out_len = r->id_done = 0;
		if (rc)
			return rc;
	}
	*len = 0;
	*data = r->out;
	if (r->zw) {
		const unsigned char *p;
		int why = 0, no = 0, rc;
		size_t code = 0;

		rc = fg_zwalk_next(r->zw, &p, len, &why, &no, &code);
		if (rc < 0 && why == FG_ZW_READ)
			return fg_err_set(r->err, FG_EIO, "read %s: %s", r->path, strerror(no));
		if (rc < 0 && why == FG_ZW_ZSTD)
			return fg_err_set(r->err, FG_EFORMAT, "%s: zstd: %s", r->path,
					  ZSTD_getErrorName(code));
		if (rc < 0 && why == FG_ZW_EMPTY)
			return fg_err_set(r->err, FG_EFORMAT, "%s: " FG_TAR_EMPTY_WHY, r->path,
					  fg_zwalk_at(r->zw));
		if (rc < 0 && why == FG_ZW_CHECKSUM)
			return fg_err_set(r->err, FG_EFORMAT, "%s: " FG_TAR_CHECKSUM_WHY, r->path,
					  fg_zwalk_at(r->zw));
		if (rc < 0)
			return fg_err_set(r->err, FG_EFORMAT, "%s: truncated zstd stream", r->path);
		r->out = (char *)p; /* the piece: zstd's output or a raw block as read */
		*data = p;
	} else if (!r->zstd) {
		ssize_t n;

		do
			n = read(r->fd, r->out, r->out_cap);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return fg_err_set(r->err, FG_EIO, "read %s: %s", r->path, strerror(errno));
		*len = (size_t)n;
	} else {
		for (;;) {
			ZSTD_outBuffer ob = { r->out, r->out_cap, 0 };
			ZSTD_inBuffer ib;
			int fe;

			if (r->in_pos == r->in_len && !r->in_eof) {
				ssize_t n;

				do
					n = read(r->fd, r->in, r->in_cap);
				while (n < 0 && errno == EINTR);
				if (n < 0)
					return fg_err_set(r->err, FG_EIO, "read %s: %s", r->path,
							  strerror(errno));
				r->in_off += r->in_len;
				r->in_len = (size_t)n;
				r->in_pos = 0;
				if (n == 0)
					r->in_eof = 1;
			}
			if (r->in_pos == r->in_len && r->in_eof) {
				/* all input used: flush what the decoder still holds */
				ib.src = r->in;
				ib.size = 0;
				ib.pos = 0;
				if (r->last_ret != 0) {
					r->last_ret = ZSTD_decompressStream(r->dctx, &ob, &ib);
					if (ZSTD_isError(r->last_ret))
						return src_zstd_fail(r);
					r->frame_out += ob.pos;
					if (!r->last_ret && (fe = src_frame_end(r, r->in_pos)))
						return fe;
					if (ob.pos == 0 && r->last_ret != 0)
						return fg_err_set(r->err, FG_EFORMAT,
								  "%s: truncated zstd stream", r->path);
				}
				*len = ob.pos;
				break;
			}
			ib.src = r->in;
			ib.size = r->in_len;
			ib.pos = r->in_pos;
			r->last_ret = ZSTD_decompressStream(r->dctx, &ob, &ib);
			if (ZSTD_isError(r->last_ret))
				return src_zstd_fail(r);
			r->in_pos = ib.pos;
			r->frame_out += ob.pos;
			if (!r->last_ret && (fe = src_frame_end(r, ib.pos)))
				return fe;
			if (ob.pos) {
				*len = ob.pos;
				break;
			}
		}
	}
	if (*len) {
		/* from the end back to a non-zero byte: at once for data, the
		 * whole piece only where it is all zeros */
		const unsigned char *q = *data;
		size_t k = *len;

		while (k && !q[k - 1])
			k--;
		if (k)
			r->nz_end = r->tar_len + k;
		r->tar_len += *len;
	}
	if (*len && r->idp)
		return fg_sha256_pipe_update(r->idp, r->out, *len, &r->seq[r->cur], r->err);
	if (r->paired)
		r->out_len = *len;
	else if (*len && r->id)
		return fg_sha256_update(r->id, r->out, *len, r->err);
	return 0;
}

/* A member's data block for its digest h: paired, when it lies in out past
 * what the identity has, the identity catches up to it and both take it in
 * one fg_sha256_pair_update; otherwise only h. */
static int member_hash(struct rsrc *r, struct fg_sha256 *h, const void *blk, size_t len,
		       struct fg_err *err)
{
	uintptr_t b = (uintptr_t)blk, o = (uintptr_t)r->out;

	if (r->paired && len && b >= o + r->id_done && b - o <= r->out_len &&
	    len <= r->out_len - (b - o)) {
		size_t at = (size_t)(b - o);
		int rc = id_catch_up(r, at);

		if (!rc)
			rc = fg_sha256_pair_update(h, blk, len, r->id, blk, len, err);
		r->id_done = at + len;
		return rc;
	}
	return fg_sha256_update(h, blk, len, err);
}

static la_ssize_t src_read(struct archive *a, void *user, const void **buf)
{
	struct rsrc *r = user;
	size_t len;

	(void)a;
	if (r->failed || src_next(r, buf, &len)) {
		r->failed = 1;
		return -1;
	}
	return (la_ssize_t)len;
}

static void src_close(struct rsrc *r)
{
	int i;

	fg_sha256_pipe_free(r->idp); /* waits for what it was given */
	fg_zwalk_free(r->zw);
	if (r->fd >= 0)
		close(r->fd);
	ZSTD_freeDCtx(r->dctx);
	fg_sha256_free(r->id);
	free(r->in);
	for (i = 0; i < RD_OUTS; i++)
		free(r->outs[i]);
}

/* want_id: 0 none, 1 hashed on this thread, 2 on a thread of its own, 3 on
 * this thread paired with the member digests (member_hash).
 * sha_covered: every byte read goes through SHA-256 checks of the caller
 * (the identity, or member digests with headers checked against
 * bundle.json), so the frames may be walked (raw blocks given where read).
 * Each frame's content checksum is checked all the same, by zstd or by the
 * walk: its 4 bytes are not in the bundle id, and unchecked they could
 * carry anything (docs/formats/bundle.md, "Content checksums"; until
 * 2026-12-06 it was skipped here, about a fifth of the decompression's CPU
 * on incompressible data) */
static int src_open(struct rsrc *r, const char *path, int want_id, int sha_covered,
		    struct fg_err *err)
{
	int i;

	unsigned char magic[4];
	ssize_t n;

	memset(r, 0, sizeof(*r));
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	r->path = path;
	r->err = err;
	r->last_ret = 1;
	if (r->fd < 0)
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "open %s: %s", path,
				  strerror(errno));
#ifdef POSIX_FADV_SEQUENTIAL
	posix_fadvise(r->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
	n = pread(r->fd, magic, 4, 0);
	/* a skippable frame first is zstd's framing too (and refused below) */
	r->zstd = n == 4 && ((magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd) ||
			     ((magic[0] & 0xf0) == 0x50 && magic[1] == 0x2a && magic[2] == 0x4d && magic[3] == 0x18));
	if (r->zstd) {
		/* no skippable frame but pack's: zstd would skip it unseen */
		struct stat st;
		char why[512];

		if (!fstat(r->fd, &st) && fg_tarlanes_frames_ok(r->fd, (unsigned long long)st.st_size, why,
								sizeof(why)))
			return fg_err_set(err, FG_EFORMAT, "%s: %s", path, why);
	}
	r->out_cap = RD_OUT;
	for (i = 0; i < (want_id == 2 ? RD_OUTS : 1); i++)
		if (!(r->outs[i] = malloc(r->out_cap)))
			return fg_err_set(err, FG_ENOMEM, "out of memory");
	r->out = r->outs[0];
	if (r->zstd && want_id != 2 && sha_covered) {
		/* zstd's frames walked, raw blocks given where read (the walk
		 * checks each frame's checksum itself); not with the identity
		 * on its own thread, which hashes pieces after they are handed on
		 * (the rotating outs) */
		struct stat st;

		if (!fstat(r->fd, &st))
			r->zw = fg_zwalk_new(r->fd, (unsigned long long)st.st_size);
	}
	if (r->zstd && !r->zw) { /* zstd on its own: the walk has its own */
		r->in_cap = ZSTD_DStreamInSize();
		r->in = malloc(r->in_cap);
		r->dctx = ZSTD_createDCtx(); /* it checks the frames' checksums */
	}
	if (!r->out || (r->zstd && !r->zw && (!r->in || !r->dctx)))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if (want_id == 2)
		return fg_sha256_pipe_new(&r->idp, err);
	r->paired = want_id == 3;
	if (want_id == 3)
		return fg_sha256_new_x2(&r->id, err);
	if (want_id)
		return fg_sha256_new(&r->id, err);
	return 0;
}

/* Reads the rest of the stream so the identity covers every byte. end is
 * where the tar's end-of-archive marker ended (libarchive read no further):
 * after it, as GNU tar and bsdtar pad an archive to its record size, come
 * zeros only, at most FG_TAR_TAIL_MAX of them (tarlanes.h); any other byte
 * is data no reader of the members sees, and the archive is refused. */
static int src_drain(struct rsrc *r, unsigned long long end, uint8_t id[32])
{
	const void *d;
	size_t len = 1;
	int rc = 0;

	while (!rc && len) {
		if (r->nz_end > end)
			return fg_err_set(r->err, FG_EFORMAT,
					  "%s: data after the tar's end-of-archive marker (non-zero "
					  "bytes up to %llu bytes past it)",
					  r->path, r->nz_end - end);
		if (r->tar_len - end > FG_TAR_TAIL_MAX)
			return fg_err_set(r->err, FG_EFORMAT,
					  "%s: more than %llu zero bytes after the tar's end-of-archive "
					  "marker",
					  r->path, (unsigned long long)FG_TAR_TAIL_MAX);
		rc = src_next(r, &d, &len);
	}
	if (!rc && id && r->idp) {
		char hex[FG_SHA256_HEX_LEN + 1];

		rc = fg_sha256_pipe_final(r->idp, hex, NULL, r->err);
		if (!rc)
			rc = fg_sha256_pipe_drain(r->idp, r->err);
		if (!rc && fg_hex_decode(hex, id, 32))
			rc = fg_err_set(r->err, FG_EIO, "%s: identity hash lost", r->path);
	} else if (!rc && id) {
		rc = fg_sha256_final(r->id, id, r->err);
	}
	return rc;
}

static int la_read_fail(struct archive *a, struct rsrc *r, struct fg_err *err)
{
	if (r->failed)
		return err ? err->code : FG_EIO;
	return fg_err_set(err, FG_EFORMAT, "%s: %s", r->path,
			  archive_error_string(a) ? archive_error_string(a) : "not a tar archive");
}

static struct archive *reader_new(struct rsrc *r, struct fg_err *err)
{
	struct archive *a = archive_read_new();

	if (!a) {
		fg_err_set(err, FG_ENOMEM, "out of memory");
		return NULL;
	}
	if (archive_read_support_format_tar(a) != ARCHIVE_OK ||
	    archive_read_open(a, r, NULL, src_read, NULL) != ARCHIVE_OK) {
		la_read_fail(a, r, err);
		archive_read_free(a);
		return NULL;
	}
	return a;
}

/* What a header may be; fills path (without trailing '/'), size, mode, dir. */
struct hdr {
	char path[4096];
	unsigned long long size;
	int mode, is_dir;
};

/* lim (may be NULL) with its zeros replaced by the defaults */
static struct fg_tarball_limits limits_of(const struct fg_tarball_limits *lim)
{
	struct fg_tarball_limits l = { FG_TARBALL_DEFAULT_MAX_ENTRY, FG_TARBALL_DEFAULT_MAX_TOTAL,
				       FG_TARBALL_DEFAULT_MAX_ENTRIES };

	if (lim && lim->max_entry_size)
		l.max_entry_size = lim->max_entry_size;
	if (lim && lim->max_total_size)
		l.max_total_size = lim->max_total_size;
	if (lim && lim->max_entries)
		l.max_entries = lim->max_entries;
	return l;
}

static int check_header(struct archive_entry *ae, const char *archive, struct hdr *h,
			const struct fg_tarball_limits *lim, struct fg_err *err)
{
	const char *name = archive_entry_pathname(ae);
	mode_t type = archive_entry_filetype(ae);
	unsigned long long max_entry = limits_of(lim).max_entry_size;
	size_t n;

	if (!name)
		return fg_err_set(err, FG_EFORMAT, "%s: a member has no usable name", archive);
	n = strlen(name);
	if (n >= sizeof(h->path))
		return fg_err_set(err, FG_EFORMAT, "%s: member name longer than %zu bytes", archive,
				  sizeof(h->path) - 1);
	memcpy(h->path, name, n + 1);
	if (type == AE_IFDIR)
		while (n > 1 && h->path[n - 1] == '/')
			h->path[--n] = '\0';
	if (!fg_path_is_safe_rel(h->path))
		return fg_err_set(err, FG_EFORMAT, "%s: refused member '%s': not a safe relative path",
				  archive, name);
	if (fg_path_too_long(h->path)) {
		/* the name cut (on a character) so that the message keeps its end */
		size_t k = n > 160 ? 160 : n;

		while (k < n && k && ((unsigned char)h->path[k] & 0xc0) == 0x80)
			k--;
		return fg_err_set(err, FG_EFORMAT,
				  "%s: refused member '%.*s%s' (%zu bytes): its name %s",
				  archive, (int)k, h->path, k < n ? "..." : "", n,
				  fg_path_too_long(h->path));
	}
	if (archive_entry_symlink(ae) || type == AE_IFLNK)
		return fg_err_set(err, FG_EFORMAT, "%s: refused member '%s': symbolic link", archive,
				  h->path);
	if (archive_entry_hardlink(ae))
		return fg_err_set(err, FG_EFORMAT, "%s: refused member '%s': hard link", archive, h->path);
	if (type != AE_IFREG && type != AE_IFDIR)
		return fg_err_set(err, FG_EFORMAT, "%s: refused member '%s': %s", archive, h->path,
				  type == AE_IFCHR    ? "character device"
				  : type == AE_IFBLK  ? "block device"
				  : type == AE_IFIFO  ? "fifo"
				  : type == AE_IFSOCK ? "socket"
						      : "not a regular file or folder");
	if (archive_entry_sparse_count(ae) > 0)
		return fg_err_set(err, FG_EFORMAT, "%s: refused member '%s': sparse file", archive,
				  h->path);
	h->is_dir = type == AE_IFDIR;
	h->size = 0;
	if (!h->is_dir) {
		la_int64_t sz = archive_entry_size(ae);

		if (!archive_entry_size_is_set(ae) || sz < 0)
			return fg_err_set(err, FG_EFORMAT, "%s: member '%s' has no size", archive, h->path);
		h->size = (unsigned long long)sz;
		if (h->size > max_entry)
			return fg_err_set(err, FG_EFORMAT,
					  "%s: refused member '%s': %llu bytes is over the limit of %llu",
					  archive, h->path, h->size, max_entry);
	}
	h->mode = h->is_dir || (archive_entry_perm(ae) & 0111) ? 0755 : 0644;
	return 0;
}

/* Bookkeeping across headers: counts, totals, names. */
struct walk {
	const struct fg_tarball_limits *lim;
	const char *archive;
	struct pathset names;
	size_t entries;
	unsigned long long total, free_bytes; /* free_bytes 0 = unchecked */
};

static int walk_account(struct walk *wk, const struct hdr *h, struct fg_err *err)
{
	struct fg_tarball_limits l = limits_of(wk->lim);
	size_t max_entries = l.max_entries;
	unsigned long long max_total = l.max_total_size;

	if (++wk->entries > max_entries)
		return fg_err_set(err, FG_EFORMAT, "%s: more than %zu members", wk->archive, max_entries);
	wk->total += h->size;
	if (wk->total > max_total || wk->total < h->size)
		return fg_err_set(err, FG_EFORMAT, "%s: members add up to more than %llu bytes",
				  wk->archive, max_total);
	if (wk->free_bytes && wk->total > wk->free_bytes)
		return fg_err_set(err, FG_ENOSPC,
				  "%s: members need %llu bytes, only %llu free at the destination",
				  wk->archive, wk->total, wk->free_bytes);
	if (pathset_claim(&wk->names, h->path, h->is_dir, err))
		return fg_err_wrap(err, "%s", wk->archive);
	return 0;
}

/* Copies the current member's data to fd (may be -1) and/or hashes it (with
 * the identity, when paired: member_hash). */
static int copy_data(struct archive *a, struct rsrc *r, const struct hdr *h, int fd,
		     struct fg_sha256 *hash, fg_tarball_data_fn fn, void *user, struct fg_err *err)
{
	unsigned long long done = 0;

	for (;;) {
		const void *blk;
		size_t len;
		la_int64_t off;
		int st = archive_read_data_block(a, &blk, &len, &off);

		if (st == ARCHIVE_EOF)
			break;
		if (st != ARCHIVE_OK)
			return la_read_fail(a, r, err);
		if (off < 0 || (unsigned long long)off != done || len > h->size - done)
			return fg_err_set(err, FG_EFORMAT, "%s: member '%s' has inconsistent data blocks",
					  r->path, h->path);
		if (hash && member_hash(r, hash, blk, len, err))
			return err ? err->code : FG_EIO;
		if (fd >= 0 && fg_write_all(fd, blk, len))
			return fg_err_set(err, errno == ENOSPC ? FG_ENOSPC : FG_EIO, "write %s: %s",
					  h->path, strerror(errno));
		if (fn) {
			int rc = fn(user, blk, len, err);

			if (rc)
				return rc;
		}
		done += len;
	}
	if (done != h->size)
		return fg_err_set(err, FG_EFORMAT, "%s: member '%s' is truncated (%llu of %llu bytes)",
				  r->path, h->path, done, h->size);
	return 0;
}


static int to_buf(void *user, const void *data, size_t len, struct fg_err *err)
{
	return fg_buf_append(user, data, len, err);
}

/* The members the lanes hashed, checked and reported as walk_archive
 * would: 1 (read it sequentially) where any check fails, so that the
 * message is the sequential reader's; else 0 or fn's code. */
static int lanes_report(const char *archive, const struct fg_tarball_limits *lim,
			const struct fg_tarlane_entry *le, size_t n, fg_tarball_entry_fn fn,
			void *user, struct fg_err *err)
{
	struct walk wk;
	struct hdr *hd = malloc(sizeof(*hd));
	struct fg_err scratch;
	size_t i;
	int rc = 0;

	memset(&wk, 0, sizeof(wk));
	wk.lim = lim;
	wk.archive = archive;
	for (i = 0; hd && i < n && !rc; i++) {
		size_t len = strlen(le[i].path);

		if (len >= sizeof(hd->path) || !fg_path_is_safe_rel(le[i].path) ||
		    fg_path_too_long(le[i].path)) {
			rc = 1;
			break;
		}
		memcpy(hd->path, le[i].path, len + 1);
		hd->size = le[i].size;
		hd->mode = le[i].mode;
		hd->is_dir = 0;
		if (walk_account(&wk, hd, &scratch))
			rc = 1;
	}
	pathset_free(&wk.names);
	free(hd);
	if (!hd || rc)
		return 1;
	for (i = 0; fn && i < n && !rc; i++) {
		struct fg_tarball_entry info;

		memset(&info, 0, sizeof(info));
		info.path = le[i].path;
		info.size = le[i].size;
		info.mode = le[i].mode;
		info.hashed = le[i].hashed;
		if (le[i].hashed)
			memcpy(info.sha256, le[i].sha256, 32);
		info.content = le[i].content;
		rc = fn(user, &info, err);
	}
	return rc;
}

/* The identity of an archive read from start to end on a thread of its
 * own (tarball.h, fg_tarball_id_start): beside the lanes, which cannot hash
 * the tar stream in order, or beside other work. An independent reader of
 * the same file, whose stamp must not move from before it began to after
 * it ended, so that the identity names the bytes other readers of the file
 * saw meanwhile. stop ends it early, its result unused. */
struct fg_tarball_idpass {
	pthread_t th;
	char *archive;
	struct fg_tarball_stamp before;
	uint8_t id[32];
	struct fg_err err;
	int rc;
	volatile int stop;
};

static int archive_stamp(const char *archive, struct fg_tarball_stamp *out)
{
	struct stat st;

	if (stat(archive, &st))
		return -1;
	fg_tarball_stamp_of(out, &st);
	return 0;
}

static void *idpass_main(void *arg)
{
	struct fg_tarball_idpass *j = arg;
	struct rsrc r;
	const void *d;
	size_t len = 1;
	int rc;

	/* the lanes' frame walk first (raw blocks hashed where they lie); on
	 * any doubt the reader below, which says why */
	if (!fg_tarlanes_id(j->archive, j->id, &j->stop)) {
		j->rc = 0;
		return NULL;
	}
	rc = src_open(&r, j->archive, 1, 1, &j->err);

	while (!rc && len && !__atomic_load_n(&j->stop, __ATOMIC_RELAXED))
		rc = src_next(&r, &d, &len);
	if (!rc && len) /* stopped */
		rc = fg_err_set(&j->err, FG_EIO, "%s: identity pass stopped", j->archive);
	if (!rc)
		rc = fg_sha256_final(r.id, j->id, &j->err);
	j->rc = rc;
	src_close(&r);
	return NULL;
}

int fg_tarball_id_states(const char *archive)
{
	return fg_tarlanes_may_read(archive) == 2;
}

int fg_tarball_id_start(struct fg_tarball_idpass **out, const char *archive, struct fg_err *err)
{
	struct fg_tarball_idpass *j = calloc(1, sizeof(*j));
	int e;

	*out = NULL;
	if (!j || !(j->archive = strdup(archive))) {
		free(j);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (archive_stamp(archive, &j->before)) {
		e = errno;
		free(j->archive);
		free(j);
		return fg_err_set(err, e == ENOENT ? FG_ENOTFOUND : FG_EIO, "stat %s: %s", archive,
				  strerror(e));
	}
	if ((e = pthread_create(&j->th, NULL, idpass_main, j)) != 0) {
		free(j->archive);
		free(j);
		return fg_err_set(err, FG_EIO, "identity pass of %s: %s", archive, strerror(e));
	}
	*out = j;
	return 0;
}

/* fg_tarball_id_end, stopping the pass first when stop (then it fails). */
static int idpass_end(struct fg_tarball_idpass *j, int stop, uint8_t id[32], struct fg_err *err)
{
	struct fg_tarball_stamp after;
	int rc;

	if (stop)
		__atomic_store_n(&j->stop, 1, __ATOMIC_RELAXED);
	pthread_join(j->th, NULL);
	rc = j->rc;
	if (rc && err)
		*err = j->err;
	if (!rc && (archive_stamp(j->archive, &after) || !stamps_equal(&after, &j->before)))
		rc = fg_err_set(err, FG_EHASH, "%s changed while it was read", j->archive);
	if (!rc)
		memcpy(id, j->id, 32);
	free(j->archive);
	free(j);
	return rc;
}

int fg_tarball_id_end(struct fg_tarball_idpass *p, uint8_t id[32], struct fg_err *err)
{
	return idpass_end(p, 0, id, err);
}

void fg_tarball_id_cancel(struct fg_tarball_idpass *p)
{
	uint8_t id[32];

	if (p)
		idpass_end(p, 1, id, NULL);
}

/* Makes the folder dest (made by us, 0755) empty again: removed and made
 * anew when anything is in it. */
static int empty_dir(const char *dest, struct fg_err *err)
{
	DIR *d = opendir(dest);
	struct dirent *e;
	int empty = 1;

	if (!d)
		return fg_err_set(err, FG_EIO, "open %s: %s", dest, strerror(errno));
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	if (empty)
		return 0;
	fg_rm_tree(dest);
	if (mkdir(dest, 0700) || chmod(dest, 0755))
		return fg_err_set(err, FG_EIO, "create %s: %s", dest, strerror(errno));
	return 0;
}

/* Shared by scan and extract: dest NULL means write nothing. */
static int walk_archive_in(const char *archive, const char *dest, const struct fg_tarball_read_opts *o,
			fg_tarball_entry_fn fn, void *user, uint8_t id[32], struct fg_err *err)
{
	const struct fg_tarball_limits *lim = o->lim;
	struct walk wk;
	struct rsrc r;
	struct archive *a = NULL;
	struct fg_sha256 *h = NULL;
	struct fg_buf full = FG_BUF_INIT, content = FG_BUF_INIT;
	struct hdr *hd = malloc(sizeof(*hd));
	int rc, paired, kept = 0, may;

	if (o->lanes)
		*o->lanes = 1;
	/* in lanes: every member's digest, with an informational identity when
	 * the archive keeps its states (else, extracting, that identity read
	 * beside them on a thread of its own; a scan with it is then one paired
	 * pass from start to end: the identity pass alone takes nearly as long,
	 * docs/bench.md); or the identity from its states with one member's
	 * digest (hash_only) or none (not hash); members' bytes kept (keep)
	 * by the lanes that read them, as the sequential reader keeps them */
	may = o->hash || id ? fg_tarlanes_may_read(archive) : 0;
	if (may && (!o->hash || o->hash_only ? id && may == 2
							 : !id || (o->id_thread && (dest || may == 2)))) {
		struct fg_tarball_limits l = limits_of(lim);
		struct fg_tarlanes_opts lo;
		struct fg_tarlane_entry *le;
		struct fg_tarball_idpass *ir = NULL;
		struct fg_tarball_stamp before = { 0 }, after = { 0 };
		size_t n;
		int nl = 1, lrc;

		/* the identity's pass takes one of the threads, so it needs two;
		 * when it does not start, the identity comes from the pass from
		 * start to end */
		if (id && may == 1 && o->threads > 1 && fg_tarball_id_start(&ir, archive, NULL))
			ir = NULL;
		memset(&lo, 0, sizeof(lo));
		lo.max_entry = l.max_entry_size;
		lo.max_total = l.max_total_size;
		lo.max_entries = l.max_entries;
		/* (on two cores, lanes on both and the identity's pass beside them
		 * lost to the hand-overs) */
		lo.threads = ir ? o->threads - 1 : o->threads;
		lo.dest = dest;
		lo.chains = o->chains;
		lo.n_chains = o->n_chains;
		lo.id = may == 2 ? id : NULL;
		lo.hash_only = !o->hash ? "" : o->hash_only; /* "": no member's digest */
		lo.keep = o->keep;
		lo.keep_user = user;
		/* the lanes' identity covers the bytes they read once each
		 * through one mapping, but an extraction writes them from there
		 * again: the file must not change meanwhile (its stamp, as the
		 * pass beside the lanes checks it) */
		if (lo.id && archive_stamp(archive, &before))
			lo.id = NULL;
		lrc = id && !ir && !lo.id ? 1 : fg_tarlanes_hash(archive, &lo, &le, &n, &nl);
		if (ir && idpass_end(ir, lrc != 0, id, NULL) && !lrc) {
			fg_tarlanes_free(le, n); /* the identity pass failed: from start to end */
			lrc = 1;
		}
		if (lo.id && !lrc && (archive_stamp(archive, &after) || !stamps_equal(&after, &before))) {
			fg_tarlanes_free(le, n); /* it changed: from start to end */
			lrc = 1;
		}
		if (!lrc) {
			rc = lanes_report(archive, lim, le, n, fn, user, err);
			fg_tarlanes_free(le, n);
			if (rc != 1) {
				if (o->lanes)
					*o->lanes = nl;
				free(hd);
				return rc;
			}
		}
		/* read from start to end instead: what the lanes wrote goes first */
		if (dest && (rc = empty_dir(dest, err)) != 0) {
			free(hd);
			return rc;
		}
	}
	memset(&wk, 0, sizeof(wk));
	wk.lim = lim;
	wk.archive = archive;
	if (!hd)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	/* the identity and every member's digest over the same bytes: on SHA-NI
	 * one paired pass on this thread (less CPU than two streams, on one
	 * core instead of two) */
	paired = id && o->hash && !o->hash_only && fg_sha256_ni_available();
	rc = src_open(&r, archive, !id ? 0 : paired ? 3 : o->id_thread ? 2 : 1,
		      id || (o->hash && !o->hash_only), err);
	if (!rc && o->hash)
		rc = paired ? fg_sha256_new_x2(&h, err) : fg_sha256_new(&h, err);
	if (!rc && dest) {
		struct fg_buf parent = FG_BUF_INIT;
		const char *slash = strrchr(dest, '/');

		rc = slash ? fg_buf_append(&parent, dest, slash == dest ? 1 : (size_t)(slash - dest), err)
			   : fg_buf_puts(&parent, ".", err);
		if (!rc)
			rc = fg_fs_free_bytes(parent.data, &wk.free_bytes, err);
		if (!rc && wk.free_bytes == 0)
			wk.free_bytes = 1;
		fg_buf_release(&parent);
	}
	if (!rc) {
		a = reader_new(&r, err);
		if (!a)
			rc = err ? err->code : FG_EFORMAT;
	}
	while (!rc) {
		struct archive_entry *ae;
		struct fg_tarball_entry info;
		int st = archive_read_next_header(a, &ae), fd = -1;

		if (st == ARCHIVE_EOF)
			break;
		if (st != ARCHIVE_OK) {
			rc = la_read_fail(a, &r, err);
			break;
		}
		rc = check_header(ae, archive, hd, lim, err);
		if (!rc)
			rc = walk_account(&wk, hd, err);
		if (rc)
			break;
		if (dest) {
			fg_buf_reset(&full);
			rc = fg_path_join(&full, dest, hd->path, err);
			if (!rc && hd->is_dir)
				rc = fg_mkdir_p(full.data, 0755, err);
			else if (!rc) {
				char *slash = strrchr(full.data, '/');

				*slash = '\0';
				rc = fg_mkdir_p(full.data, 0755, err);
				*slash = '/';
				if (!rc) {
					fd = open(full.data,
						  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
						  (mode_t)hd->mode);
					if (fd < 0)
						rc = fg_err_set(err, FG_EIO, "create %s: %s", hd->path,
								strerror(errno));
				}
			}
		}
		kept = 0;
		if (!rc && !hd->is_dir && o->keep) {
			size_t max = o->keep(user, hd->path);

			kept = max && hd->size <= max;
			fg_buf_reset(&content);
		}
		if (!rc && !hd->is_dir)
			rc = copy_data(a, &r, hd, fd,
				       o->hash_only && strcmp(o->hash_only, hd->path) ? NULL : h,
				       kept ? to_buf : NULL, &content, err);
		if (fd >= 0 && close(fd) && !rc)
			rc = fg_err_set(err, FG_EIO, "close %s: %s", hd->path, strerror(errno));
		if (rc)
			break;
		memset(&info, 0, sizeof(info));
		info.path = hd->path;
		info.size = hd->size;
		info.mode = hd->mode;
		info.is_dir = hd->is_dir;
		info.content = kept ? (content.data ? content.data : "") : NULL;
		if (h && !hd->is_dir && (!o->hash_only || !strcmp(o->hash_only, hd->path))) {
			rc = fg_sha256_final(h, info.sha256, err);
			info.hashed = 1;
		}
		if (!rc && fn)
			rc = fn(user, &info, err);
	}
	if (!rc) {
		/* where libarchive stopped: past the end marker (or the last
		 * member, at the end of a tar that has none) */
		la_int64_t end = archive_filter_bytes(a, -1);

		rc = end < 0 ? fg_err_set(err, FG_EFORMAT, "%s: no end of the tar", archive)
			     : src_drain(&r, (unsigned long long)end, id);
	}
	if (a)
		archive_read_free(a);
	src_close(&r);
	fg_sha256_free(h);
	fg_buf_release(&full);
	fg_buf_release(&content);
	pathset_free(&wk.names);
	free(hd);
	return rc;
}

static int walk_archive(const char *archive, const char *dest, const struct fg_tarball_read_opts *o,
			fg_tarball_entry_fn fn, void *user, uint8_t id[32], struct fg_err *err)
{
	locale_t prev = utf8_enter(); /* member names: utf8_locale */
	int rc = walk_archive_in(archive, dest, o, fn, user, id, err);

	utf8_leave(prev);
	return rc;
}

int fg_tarball_scan_opts(const char *archive, const struct fg_tarball_read_opts *o,
			 fg_tarball_entry_fn fn, void *user, uint8_t id[32], struct fg_err *err)
{
	return walk_archive(archive, NULL, o, fn, user, id, err);
}

int fg_tarball_scan(const char *archive, const struct fg_tarball_limits *lim, int hash,
		    fg_tarball_entry_fn fn, void *user, uint8_t id[32], struct fg_err *err)
{
	struct fg_tarball_read_opts o;

	memset(&o, 0, sizeof(o));
	o.lim = lim;
	o.hash = hash;
	return walk_archive(archive, NULL, &o, fn, user, id, err);
}

int fg_tarball_extract(const char *archive, const char *dest, const struct fg_tarball_limits *lim,
		       fg_tarball_entry_fn fn, void *user, uint8_t id[32], struct fg_err *err)
{
	struct fg_tarball_read_opts o;

	memset(&o, 0, sizeof(o));
	o.lim = lim;
	o.hash = 1;
	return fg_tarball_extract_opts(archive, dest, &o, fn, user, id, err);
}

int fg_tarball_extract_opts(const char *archive, const char *dest,
			    const struct fg_tarball_read_opts *o, fg_tarball_entry_fn fn, void *user,
			    uint8_t id[32], struct fg_err *err)
{
	struct fg_buf tmp = FG_BUF_INIT;
	struct stat st;
	int rc, slot = -1;

	if (!lstat(dest, &st))
		return fg_err_set(err, FG_EINVAL, "extract to %s: it already exists", dest);
	/* ".<dest>.fgpack-tmp.<pid>" beside dest, tracked: a SIGINT, SIGTERM
	 * or SIGHUP mid-extraction (gigabytes) has cmd/'s handler remove it; a
	 * SIGKILL's, and older versions' "<dest>.partial.XXXXXX", go at the
	 * next extraction to dest (dead pid or no pid, unchanged for
	 * FG_TMP_GRACE_S) */
	rc = fg_tmp_extract_dir_make(dest, &tmp, &slot, err);
	if (rc) {
		fg_buf_release(&tmp);
		return rc;
	}
	rc = walk_archive(archive, tmp.data, o, fn, user, id, err);
	if (!rc && renameat2(AT_FDCWD, tmp.data, AT_FDCWD, dest, RENAME_NOREPLACE)) {
		if ((errno == EINVAL || errno == ENOSYS) && lstat(dest, &st) && !rename(tmp.data, dest))
			rc = 0;
		else
			rc = fg_err_set(err, FG_EIO, "rename to %s: %s", dest, strerror(errno));
	}
	if (rc)
		fg_rm_tree(tmp.data);
	fg_tmp_untrack(slot); /* renamed to dest or removed: no longer ours to remove */
	fg_buf_release(&tmp);
	return rc;
}

static int stream_member(const char *archive, const char *name, fg_tarball_data_fn fn,
			 void *user, struct fg_err *err)
{
	struct rsrc r;
	struct archive *a = NULL;
	struct hdr *hd = malloc(sizeof(*hd));
	int rc, found = 0;

	if (!hd)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = src_open(&r, archive, 0, 0, err);
	if (!rc) {
		a = reader_new(&r, err);
		if (!a)
			rc = err ? err->code : FG_EFORMAT;
	}
	while (!rc && !found) {
		struct archive_entry *ae;
		int st = archive_read_next_header(a, &ae);

		if (st == ARCHIVE_EOF)
			break;
		if (st != ARCHIVE_OK) {
			rc = la_read_fail(a, &r, err);
			break;
		}
		rc = check_header(ae, archive, hd, NULL, err);
		if (rc || hd->is_dir || strcmp(hd->path, name))
			continue;
		found = 1;
		rc = copy_data(a, &r, hd, -1, NULL, fn, user, err);
	}
	if (!rc && !found)
		rc = fg_err_set(err, FG_ENOTFOUND, "%s: no member '%s'", archive, name);
	if (a)
		archive_read_free(a);
	src_close(&r);
	free(hd);
	return rc;
}

int fg_tarball_stream_member(const char *archive, const char *name, fg_tarball_data_fn fn,
			     void *user, struct fg_err *err)
{
	locale_t prev = utf8_enter(); /* member names: utf8_locale */
	int rc = stream_member(archive, name, fn, user, err);

	utf8_leave(prev);
	return rc;
}

int fg_tarball_read_member(const char *archive, const char *name, size_t max, struct fg_buf *out,
			   struct fg_err *err)
{
	struct fg_buf b;
	int rc;

	fg_buf_init(&b, max);
	rc = fg_tarball_stream_member(archive, name, to_buf, &b, err);
	if (!rc)
		rc = fg_buf_append(out, b.data ? b.data : "", b.len, err);
	fg_buf_release(&b);
	return rc;
}
