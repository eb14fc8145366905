/* sha256.c - SHA-256 through OpenSSL EVP or, for two streams at once, our
 * own SHA-NI code (lib/sha256x2.c); hex helpers, a whole-file reader
 * (O_DIRECT + AIO) for one file or two at once, and a hashing thread (on
 * lib/ring.h). */
#include "sha256.h"
#include "buf.h"
#include "fsutil.h"
#include "ring.h"
#include "workq.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* SHA256_Update on a SHA256_CTX whose state we set: OpenSSL's fastest block
 * function (SHA-NI, AVX2, ARMv8) where our SHA-NI code does not run. The
 * low-level API is deprecated in OpenSSL 3 but still built and public; the
 * macro must come before OpenSSL's first header. */
#ifndef OPENSSL_SUPPRESS_DEPRECATED
#define OPENSSL_SUPPRESS_DEPRECATED
#endif
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

struct fg_sha256 {
	EVP_MD_CTX *ctx;  /* NULL: our own context (fg_sha256_new_x2 on SHA-NI,
			   * fg_sha256_new_own), its state ours to read and set */
	uint32_t h[8];    /* own: the chaining state, FIPS 180-4 order */
	uint8_t buf[64];  /* own: the partial block */
	size_t fill;      /* own: bytes in buf, 0..63 */
	uint64_t total;   /* own: bytes hashed so far */
};

/* FIPS 180-4, 5.3.3 */
static const uint32_t H0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
				0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };

static void own_reset(struct fg_sha256 *h)
{
	memcpy(h->h, H0, sizeof(H0));
	h->fill = 0;
	h->total = 0;
}

/* n whole blocks on h: our SHA-NI code where it runs, else OpenSSL's block
 * function through a SHA256_CTX holding h (whole blocks from an empty
 * buffer go straight to it; the length fields matter only to its final,
 * which is never called). -1 only when OpenSSL fails. */
static int own_blocks(uint32_t h[8], const uint8_t *p, size_t n)
{
	SHA256_CTX c;
	int i;

	if (fg_sha256_ni_available())
		return fg_sha256_ni_blocks(h, p, n);
	memset(&c, 0, sizeof(c));
	for (i = 0; i < 8; i++)
		c.h[i] = h[i];
	c.md_len = SHA256_DIGEST_LENGTH;
	if (n && SHA256_Update(&c, p, n * 64) != 1)
		return -1;
	for (i = 0; i < 8; i++)
		h[i] = (uint32_t)c.h[i];
	return 0;
}

/* Tops up the partial block from *p; hashes it once full. The own_*
 * functions return own_blocks's -1 as own_fail says. */
static int own_top_up(struct fg_sha256 *h, const uint8_t **p, size_t *n)
{
	size_t take = 64 - h->fill;

	if (!h->fill || !*n)
		return 0;
	if (take > *n)
		take = *n;
	memcpy(h->buf + h->fill, *p, take);
	h->fill += take;
	h->total += take;
	*p += take;
	*n -= take;
	if (h->fill == 64) {
		h->fill = 0;
		return own_blocks(h->h, h->buf, 1);
	}
	return 0;
}

static int own_update(struct fg_sha256 *h, const uint8_t *p, size_t n)
{
	if (own_top_up(h, &p, &n))
		return -1;
	if (n >= 64) {
		size_t whole = n / 64;

		if (own_blocks(h->h, p, whole))
			return -1;
		p += whole * 64;
		n -= whole * 64;
		h->total += (uint64_t)whole * 64;
	}
	if (n) {
		memcpy(h->buf + h->fill, p, n);
		h->fill += n;
		h->total += n;
	}
	return 0;
}

/* The state h0..h7 as 32 bytes, big-endian: the digest, after the last block. */
static void state_bytes(const uint32_t h[8], uint8_t out[FG_SHA256_LEN])
{
	int i;

	for (i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(h[i] >> 8);
		out[4 * i + 3] = (uint8_t)h[i];
	}
}

static int own_final(struct fg_sha256 *h, uint8_t out[FG_SHA256_LEN])
{
	uint64_t bits = h->total * 8;
	uint8_t pad[128];
	size_t n = h->fill < 56 ? 64 : 128, i;

	/* FIPS 180-4, 5.1.1: 0x80, zeros, the length in bits big-endian */
	memset(pad, 0, sizeof(pad));
	memcpy(pad, h->buf, h->fill);
	pad[h->fill] = 0x80;
	for (i = 0; i < 8; i++)
		pad[n - 1 - i] = (uint8_t)(bits >> (8 * i));
	if (own_blocks(h->h, pad, n / 64))
		return -1;
	state_bytes(h->h, out);
	own_reset(h);
	return 0;
}

static int own_fail(struct fg_err *err)
{
	return fg_err_set(err, FG_EIO, "sha256: the block function failed");
}

static int ossl_fail(struct fg_err *err, const char *what)
{
	char buf[256];
	unsigned long e = ERR_get_error();

	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return fg_err_set(err, FG_EIO, "sha256 %s: %s", what, e ? buf : "libcrypto failure");
}

int fg_sha256_new(struct fg_sha256 **out, struct fg_err *err)
{
	struct fg_sha256 *h = calloc(1, sizeof(*h));

	*out = NULL;
	if (!h)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		fg_sha256_free(h);
		return ossl_fail(err, "init");
	}
	*out = h;
	return 0;
}

int fg_sha256_new_x2(struct fg_sha256 **out, struct fg_err *err)
{
	struct fg_sha256 *h;

	if (!fg_sha256_ni_available())
		return fg_sha256_new(out, err);
	*out = NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	own_reset(h);
	*out = h;
	return 0;
}

int fg_sha256_new_own(struct fg_sha256 **out, struct fg_err *err)
{
	struct fg_sha256 *h = calloc(1, sizeof(*h));

	*out = NULL;
	if (!h)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	own_reset(h);
	*out = h;
	return 0;
}

int fg_sha256_state(const struct fg_sha256 *h, uint8_t st[FG_SHA256_LEN], uint64_t *total)
{
	if (h->ctx || h->fill)
		return -1;
	state_bytes(h->h, st);
	if (total)
		*total = h->total;
	return 0;
}

int fg_sha256_set_state(struct fg_sha256 *h, const uint8_t st[FG_SHA256_LEN], uint64_t total)
{
	int i;

	if (h->ctx || total % 64)
		return -1;
	for (i = 0; i < 8; i++)
		h->h[i] = (uint32_t)st[4 * i] << 24 | (uint32_t)st[4 * i + 1] << 16 |
			  (uint32_t)st[4 * i + 2] << 8 | st[4 * i + 3];
	h->fill = 0;
	h->total = total;
	return 0;
}

int fg_sha256_is_x2(const struct fg_sha256 *h)
{
	return !h->ctx && fg_sha256_ni_available();
}

int fg_sha256_update(struct fg_sha256 *h, const void *data, size_t len, struct fg_err *err)
{
	if (!h->ctx)
		return len && own_update(h, data, len) ? own_fail(err) : 0;
	if (len && EVP_DigestUpdate(h->ctx, data, len) != 1)
		return ossl_fail(err, "update");
	return 0;
}

int fg_sha256_pair_update(struct fg_sha256 *a, const void *da, size_t la, struct fg_sha256 *b,
			  const void *db, size_t lb, struct fg_err *err)
{
	const uint8_t *pa = da, *pb = db;
	size_t n;
	int rc;

	if (a->ctx || b->ctx || !fg_sha256_ni_available()) {
		rc = fg_sha256_update(a, da, la, err);
		return rc ? rc : fg_sha256_update(b, db, lb, err);
	}
	/* each finishes its own partial block first: from there both are on
	 * block boundaries, whatever their offsets */
	if (own_top_up(a, &pa, &la) || own_top_up(b, &pb, &lb))
		return own_fail(err);
	n = a->fill || b->fill ? 0 : (la < lb ? la : lb) / 64;
	if (n) {
		if (fg_sha256_ni_blocks2(a->h, pa, b->h, pb, n))
			return own_fail(err);
		a->total += (uint64_t)n * 64;
		b->total += (uint64_t)n * 64;
		pa += n * 64;
		pb += n * 64;
		la -= n * 64;
		lb -= n * 64;
	}
	if ((la && own_update(a, pa, la)) || (lb && own_update(b, pb, lb)))
		return own_fail(err);
	return 0;
}

int fg_sha256_final(struct fg_sha256 *h, uint8_t out[FG_SHA256_LEN], struct fg_err *err)
{
	unsigned int n = 0;

	if (!h->ctx)
		return own_final(h, out) ? own_fail(err) : 0;
	if (EVP_DigestFinal_ex(h->ctx, out, &n) != 1 || n != FG_SHA256_LEN)
		return ossl_fail(err, "final");
	if (EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1)
		return ossl_fail(err, "reinit");
	return 0;
}

void fg_sha256_free(struct fg_sha256 *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

int fg_sha256_mem(const void *data, size_t len, uint8_t out[FG_SHA256_LEN], struct fg_err *err)
{
	unsigned int n = 0;

	if (EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) != 1)
		return ossl_fail(err, "digest");
	return 0;
}

int fg_sha256_fd(struct fg_sha256 *h, int fd, void *buf, size_t bufsize, int copy_fd,
		 unsigned long long *size_out, const char *path, struct fg_err *err)
{
	return fg_sha256_fd_chain(h, NULL, fd, buf, bufsize, copy_fd, size_out, path, err);
}

int fg_sha256_fd_chain(struct fg_sha256 *h, struct fg_sha256_chain *c, int fd, void *buf,
		       size_t bufsize, int copy_fd, unsigned long long *size_out, const char *path,
		       struct fg_err *err)
{
	unsigned long long total = 0;
	int rc = 0;

#ifdef POSIX_FADV_SEQUENTIAL
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
	for (;;) {
		ssize_t n = read(fd, buf, bufsize);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = fg_err_set(err, FG_EIO, "read %s: %s", path, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		total += (unsigned long long)n;
		rc = c ? fg_sha256_chain_update(h, c, buf, (size_t)n, err)
		       : fg_sha256_update(h, buf, (size_t)n, err);
		if (!rc && copy_fd >= 0 && fg_write_all(copy_fd, buf, (size_t)n))
			rc = fg_err_set(err, errno == ENOSPC ? FG_ENOSPC : FG_EIO, "write copy of %s: %s",
					path, strerror(errno));
		if (rc)
			break;
	}
	if (size_out)
		*size_out = total;
	return rc;
}

int fg_sha256_file(const char *path, uint8_t out[FG_SHA256_LEN], unsigned long long *size_out,
		   struct fg_err *err)
{
	const size_t chunk = 256 << 10; /* measured faster than 1 MiB reads (docs/bench.md, store) */
	struct fg_sha256 *h = NULL;
	char *buf;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "open %s: %s", path,
				  strerror(errno));
	buf = malloc(chunk);
	if (!buf) {
		close(fd);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	rc = fg_sha256_new(&h, err);
	if (!rc)
		rc = fg_sha256_fd(h, fd, buf, chunk, -1, size_out, path, err);
	if (!rc)
		rc = fg_sha256_final(h, out, err);
	fg_sha256_free(h);
	free(buf);
	close(fd);
	return rc;
}

/* ---- whole-file reader ---- */

#define RD_PIECE ((size_t)2 << 20) /* one O_DIRECT read: one 2 MiB page */
#define RD_PLAIN ((size_t)256 << 10) /* plain reads: hashed while still in L2 */
#define RD_SLOTS FG_SHA256_READ_AHEAD
#define RD_FALLBACK 1 /* internal: go on another way from l->done */

enum { LANE_GO = 0, LANE_END, LANE_FALL };

/* One file being read, handed out piece by piece in file order. The reader
 * has two: the second reads the partner file of fg_sha256_reader_pair. Each
 * keeps its buffers and AIO context from file to file. */
struct lane {
	char *pool;        /* RD_SLOTS * RD_PIECE bytes, 2 MiB aligned, touched once */
	aio_context_t aio;
	int aio_state;     /* 0 untried, 1 set up, -1 unavailable */
	/* the file being read */
	int fd;            /* -1 when none */
	const char *path;  /* borrowed, for messages */
	size_t link_len;   /* the open refused a link: path's first link_len bytes name it */
	unsigned long long size;  /* length at open */
	unsigned long long done;  /* bytes handed out */
	unsigned long long next;  /* AIO: offset of the next read to submit */
	unsigned long long limit; /* AIO: read up to here (grows with the file) */
	int mode;          /* 1 O_DIRECT + AIO, 2 O_DIRECT synchronous, 0 plain */
	int stop;          /* LANE_GO, or no more reads: LANE_END, LANE_FALL */
	int head;          /* AIO: slot of the next piece in file order */
	int pending;       /* AIO: reads in flight or held, from head on */
	int held;          /* AIO: head was handed out; freed on the next call */
	struct iocb cb[RD_SLOTS];
	long long res[RD_SLOTS];
	int ready[RD_SLOTS];
};

struct fg_sha256_reader {
	struct fg_sha256 *h;     /* single files: EVP, OpenSSL's fastest single stream */
	struct fg_sha256 *x[2];  /* pairs: fg_sha256_new_x2, made on first use */
	struct fg_sha256 *o[2];  /* chain states wanted: fg_sha256_new_own, on first use */
	unsigned long long every; /* record the chain state every this many bytes; 0: none */
	struct lane lane[2];
	int last_mode;
	int at;      /* paths name files below this folder (fg_sha256_files_at); AT_FDCWD: not */
	size_t skip; /* ... from this byte of the path on */
};

void fg_sha256_chain_init(struct fg_sha256_chain *c, unsigned long long every)
{
	memset(c, 0, sizeof(*c));
	c->every = every;
}

size_t fg_sha256_chain_span(const struct fg_sha256_chain *c, size_t n)
{
	unsigned long long to;

	if (!c->every)
		return n;
	to = c->every - c->done % c->every;
	return to < n ? (size_t)to : n;
}

void fg_sha256_chain_step(struct fg_sha256_chain *c, const struct fg_sha256 *h, size_t m)
{
	c->done += m;
	if (!c->every || !m || c->done % c->every || c->failed)
		return;
	if (fg_grow(&c->st, &c->cap, c->n, 32) || fg_sha256_state(h, c->st + 32 * c->n, NULL))
		c->failed = 1;
	else
		c->n++;
}

int fg_sha256_chain_update(struct fg_sha256 *h, struct fg_sha256_chain *c, const void *data,
			   size_t len, struct fg_err *err)
{
	const uint8_t *p = data;

	while (len) {
		size_t m = fg_sha256_chain_span(c, len);
		int rc = fg_sha256_update(h, p, m, err);

		if (rc)
			return rc;
		fg_sha256_chain_step(c, h, m);
		p += m;
		len -= m;
	}
	return 0;
}

void fg_sha256_chain_take(struct fg_sha256_chain *c, uint8_t **states, size_t *n)
{
	if (c->n && c->n * c->every >= c->done)
		c->n--; /* at the very end: nothing follows it */
	if (c->failed || !c->n) {
		free(c->st);
		c->st = NULL;
		c->n = 0;
	}
	*states = c->st;
	*n = c->n;
	c->st = NULL;
	c->n = c->cap = 0;
}

void fg_sha256_chain_free(struct fg_sha256_chain *c)
{
	free(c->st);
	memset(c, 0, sizeof(*c));
}

int fg_sha256_reader_new(struct fg_sha256_reader **out, struct fg_err *err)
{
	struct fg_sha256_reader *r = calloc(1, sizeof(*r));
	int rc;

	*out = NULL;
	if (!r)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	r->lane[0].fd = r->lane[1].fd = -1;
	r->at = AT_FDCWD;
	rc = fg_sha256_new(&r->h, err);
	if (rc) {
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void fg_sha256_reader_free(struct fg_sha256_reader *r)
{
	int i;

	if (!r)
		return;
	for (i = 0; i < 2; i++) {
		if (r->lane[i].aio_state == 1)
			syscall(SYS_io_destroy, r->lane[i].aio);
		free(r->lane[i].pool);
		fg_sha256_free(r->x[i]);
		fg_sha256_free(r->o[i]);
	}
	fg_sha256_free(r->h);
	free(r);
}

int fg_sha256_reader_last_mode(const struct fg_sha256_reader *r)
{
	return r->last_mode;
}

static int lane_pool(struct lane *l, struct fg_err *err)
{
	void *p = NULL;

	if (l->pool)
		return 0;
	if (posix_memalign(&p, RD_PIECE, RD_SLOTS * RD_PIECE))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	/* 2 MiB pages: pinning them for each O_DIRECT read costs the kernel far
	 * less than 512 small pages (measured: a third of the system time) */
	madvise(p, RD_SLOTS * RD_PIECE, MADV_HUGEPAGE);
	memset(p, 0, RD_SLOTS * RD_PIECE); /* fault it in once, not per file */
	l->pool = p;
	return 0;
}

static int read_fail(struct fg_err *err, const char *path, int e)
{
	return fg_err_set(err, FG_EIO, "read %s: %s", path, strerror(e));
}

/* Opens path for reading and picks how: O_DIRECT (AIO when it can be set
 * up) for a regular file of FG_SHA256_DIRECT_MIN bytes or more when flags
 * ask for it, plain reads otherwise. Below the reader's folder (at), with
 * FG_SHA256_REGULAR no link on the way is followed, a folder's neither. */
static int lane_open(struct lane *l, int at, size_t skip, const char *path, int flags,
		     struct stat *st, struct fg_err *err)
{
	int regular = (flags & FG_SHA256_REGULAR) != 0;
	int files = regular || (flags & FG_SHA256_FILES);
	int oflags = O_RDONLY | O_CLOEXEC | (files ? O_NONBLOCK : 0);
	size_t bad = 0;
	int fd, rc;

	l->fd = -1;
	l->path = path;
	l->link_len = 0;
	l->size = l->done = l->next = 0;
	l->mode = 0;
	l->stop = LANE_GO;
	l->head = l->pending = l->held = 0;
	if (at == AT_FDCWD)
		fd = open(path, oflags | (regular ? O_NOFOLLOW : 0));
	else if (regular)
		fd = fg_openat_beneath(at, path + skip, oflags, &bad);
	else
		fd = openat(at, path + skip, oflags);
	if (fd < 0 && regular && errno == ELOOP && at != AT_FDCWD && skip + bad < strlen(path)) {
		l->link_len = skip + bad;
		return fg_err_set(err, FG_EINVAL, "open %s: %.*s is a symlink, not a folder", path,
				  (int)l->link_len, path);
	}
	if (fd < 0 && regular && errno == ELOOP && at != AT_FDCWD)
		l->link_len = strlen(path);
	if (fd < 0)
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : regular ? FG_EINVAL : FG_EIO,
				  "open %s: %s", path,
				  regular && errno == ELOOP ? "a symlink, not a regular file"
							    : strerror(errno));
	if (fstat(fd, st))
		rc = fg_err_set(err, FG_EIO, "stat %s: %s", path, strerror(errno));
	else if (files && !S_ISREG(st->st_mode))
		rc = fg_err_set(err, FG_EINVAL, "%s: not a regular file", path);
	else
		rc = lane_pool(l, err);
	if (rc) {
		close(fd);
		return rc;
	}
	l->fd = fd;
	l->size = (unsigned long long)st->st_size;
	l->limit = l->size;
	if ((flags & FG_SHA256_DIRECT) && S_ISREG(st->st_mode) && l->size >= FG_SHA256_DIRECT_MIN &&
	    !fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_DIRECT)) {
		if (l->aio_state == 0) {
			l->aio = 0;
			l->aio_state = syscall(SYS_io_setup, (long)RD_SLOTS, &l->aio) ? -1 : 1;
		}
		l->mode = l->aio_state == 1 ? 1 : 2;
	} else {
#ifdef POSIX_FADV_SEQUENTIAL
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
	}
	return 0;
}

/* AIO: waits until the head slot's read is complete. On failure io_destroy
 * waits for what is in flight, so the buffers are ours again; no AIO from
 * then on. */
static int aio_wait_head(struct lane *l, struct fg_err *err)
{
	while (!l->ready[l->head]) {
		struct io_event ev[RD_SLOTS];
		long n = syscall(SYS_io_getevents, l->aio, 1L, (long)RD_SLOTS, ev, NULL);
		long k;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			syscall(SYS_io_destroy, l->aio);
			l->aio_state = -1;
			l->pending = l->held = 0;
			return read_fail(err, l->path, e);
		}
		for (k = 0; k < n; k++) {
			int s = (int)ev[k].data;

			l->ready[s] = 1;
			l->res[s] = (long long)ev[k].res;
		}
	}
	return 0;
}

static void aio_release_head(struct lane *l)
{
	l->ready[l->head] = 0;
	l->head = (l->head + 1) % RD_SLOTS;
	l->pending--;
	l->held = 0;
}

/* AIO: reaps everything in flight (the buffers are about to be reused). */
static int aio_drain(struct lane *l, struct fg_err *err)
{
	if (l->held)
		aio_release_head(l);
	while (l->pending) {
		int rc = aio_wait_head(l, err);

		if (rc)
			return rc;
		aio_release_head(l);
	}
	return 0;
}

/* O_DIRECT reads with up to RD_SLOTS in flight (Linux AIO), handed out in
 * file order: the slot handed out stays ours until the next call, the
 * others keep reading. Returns 0 with a piece or *len 0 at the end,
 * RD_FALLBACK to go on another way from l->done, or an error. */
static int aio_piece(struct lane *l, const char **data, size_t *len, struct fg_err *err)
{
	if (l->held)
		aio_release_head(l);
	for (;;) {
		long long n;
		int rc;

		/* keep every free slot reading the next piece */
		while (l->stop == LANE_GO && l->pending < RD_SLOTS && l->next <= l->limit) {
			int s = (l->head + l->pending) % RD_SLOTS;
			struct iocb *p = &l->cb[s];
			long k;

			memset(p, 0, sizeof(*p));
			p->aio_fildes = (uint32_t)l->fd;
			p->aio_lio_opcode = IOCB_CMD_PREAD;
			p->aio_buf = (uint64_t)(uintptr_t)(l->pool + (size_t)s * RD_PIECE);
			p->aio_nbytes = RD_PIECE;
			p->aio_offset = (int64_t)l->next;
			p->aio_data = (uint64_t)s;
			k = syscall(SYS_io_submit, l->aio, 1L, &p);
			if (k != 1) {
				if (k < 0 && errno == EINTR)
					continue;
				l->stop = LANE_FALL; /* what is in flight is discarded */
				break;
			}
			l->ready[s] = 0;
			l->pending++;
			l->next += RD_PIECE;
		}
		if (!l->pending)
			return l->stop == LANE_FALL ? RD_FALLBACK : 0;
		rc = aio_wait_head(l, err);
		if (rc)
			return rc;
		n = l->res[l->head];
		if (l->stop != LANE_GO || n == 0) {
			/* after the end or a fallback: reaped, not used */
			if (l->stop == LANE_GO)
				l->stop = l->done < l->size ? LANE_FALL : LANE_END;
			aio_release_head(l);
			continue;
		}
		if (n == -EINVAL) { /* O_DIRECT refused for this file */
			l->stop = LANE_FALL;
			aio_release_head(l);
			continue;
		}
		if (n < 0) {
			l->stop = LANE_END;
			aio_release_head(l);
			rc = aio_drain(l, err);
			return rc ? rc : read_fail(err, l->path, (int)-n);
		}
		l->done += (unsigned long long)n;
		if ((size_t)n < RD_PIECE)
			/* a short read ends the file unless it came before the length
			 * seen at open: then other reads settle it */
			l->stop = l->done < l->size ? LANE_FALL : LANE_END;
		else if (l->done > l->limit)
			l->limit = l->done; /* it grew: read on */
		*data = l->pool + (size_t)l->head * RD_PIECE;
		*len = (size_t)n;
		l->held = 1;
		return 0;
	}
}

/* Synchronous O_DIRECT reads (no AIO here). */
static int direct_piece(struct lane *l, const char **data, size_t *len, struct fg_err *err)
{
	ssize_t n;

	if (l->stop != LANE_GO)
		return l->stop == LANE_FALL ? RD_FALLBACK : 0;
	do
		n = pread(l->fd, l->pool, RD_PIECE, (off_t)l->done);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EINVAL ? RD_FALLBACK : read_fail(err, l->path, errno);
	l->done += (unsigned long long)n;
	if ((size_t)n < RD_PIECE)
		l->stop = l->done < l->size ? LANE_FALL : LANE_END;
	if (!n)
		return l->stop == LANE_FALL ? RD_FALLBACK : 0;
	*data = l->pool;
	*len = (size_t)n;
	return 0;
}

/* Plain reads to the end. */
static int plain_piece(struct lane *l, const char **data, size_t *len, struct fg_err *err)
{
	ssize_t n;

	do
		n = read(l->fd, l->pool, RD_PLAIN);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return read_fail(err, l->path, errno);
	l->done += (unsigned long long)n;
	*data = l->pool;
	*len = (size_t)n;
	return 0;
}

/* The next piece of the file: *len bytes at *data, valid until the next
 * call; *len 0 at the end. Falls back from AIO to synchronous O_DIRECT (when
 * AIO refused the file before any byte) and from there to plain reads,
 * resuming where it was. */
static int lane_piece(struct lane *l, const char **data, size_t *len, struct fg_err *err)
{
	for (;;) {
		int rc;

		*len = 0;
		if (l->mode == 1)
			rc = aio_piece(l, data, len, err);
		else if (l->mode == 2)
			rc = direct_piece(l, data, len, err);
		else
			rc = plain_piece(l, data, len, err);
		if (rc != RD_FALLBACK)
			return rc;
		l->stop = LANE_GO;
		if (l->mode == 1 && !l->done) {
			/* AIO refused this file, not O_DIRECT: read it synchronously */
			l->mode = 2;
			continue;
		}
		l->mode = 0;
		if (fcntl(l->fd, F_SETFL, fcntl(l->fd, F_GETFL) & ~O_DIRECT) ||
		    lseek(l->fd, (off_t)l->done, SEEK_SET) != (off_t)l->done)
			return read_fail(err, l->path, errno);
#ifdef POSIX_FADV_SEQUENTIAL
		posix_fadvise(l->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
	}
}

static void lane_close(struct lane *l)
{
	if (l->fd < 0)
		return;
	if (l->mode == 1 && l->aio_state == 1)
		aio_drain(l, NULL); /* on failure it gave AIO up, reaping all */
	close(l->fd);
	l->fd = -1;
}

/* A fresh digest, whatever came before (a failed file leaves one half done). */
static int sha_restart(struct fg_sha256 *h, struct fg_err *err)
{
	if (!h->ctx) {
		own_reset(h);
		return 0;
	}
	if (EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1)
		return ossl_fail(err, "init");
	return 0;
}

void fg_sha256_reader_set_every(struct fg_sha256_reader *r, unsigned long long every)
{
	r->every = every;
}

int fg_sha256_reader_file(struct fg_sha256_reader *r, const char *path, int flags,
			  uint8_t out[FG_SHA256_LEN], unsigned long long *size_out, struct stat *st_out,
			  struct fg_err *err)
{
	return fg_sha256_reader_file_states(r, path, flags, out, size_out, st_out, NULL, NULL, err);
}

int fg_sha256_reader_file_states(struct fg_sha256_reader *r, const char *path, int flags,
				 uint8_t out[FG_SHA256_LEN], unsigned long long *size_out,
				 struct stat *st_out, uint8_t **states, size_t *n_states,
				 struct fg_err *err)
{
	struct lane *l = &r->lane[0];
	struct fg_sha256_chain c;
	struct fg_sha256 *h;
	uint8_t *got = NULL;
	size_t n_got = 0;
	struct stat st;
	int rc;

	if (states) {
		*states = NULL;
		*n_states = 0;
	}

	fg_sha256_chain_init(&c, r->every);
	r->last_mode = 0;
	if (size_out)
		*size_out = 0;
	rc = lane_open(l, r->at, r->skip, path, flags, &st, err);
	if (rc)
		return rc;
	if (st_out)
		*st_out = st;
	rc = r->every && !r->o[0] ? fg_sha256_new_own(&r->o[0], err) : 0;
	h = r->every ? r->o[0] : r->h;
	if (!rc)
		rc = sha_restart(h, err);
	while (!rc) {
		const char *d;
		size_t n;

		rc = lane_piece(l, &d, &n, err);
		if (rc || !n)
			break;
		rc = fg_sha256_chain_update(h, &c, d, n, err);
	}
	if (!rc)
		rc = fg_sha256_final(h, out, err);
	r->last_mode = l->mode;
	if (size_out)
		*size_out = l->done;
	lane_close(l);
	fg_sha256_chain_take(&c, &got, &n_got);
	if (states && !rc) {
		*states = got;
		*n_states = n_got;
	} else {
		free(got);
	}
	return rc;
}

int fg_sha256_reader_pair(struct fg_sha256_reader *r, const char *const path[2], int flags,
			  struct fg_sha256_result res[2], struct fg_err *err)
{
	struct fg_sha256 **x = r->every ? r->o : r->x;
	struct fg_sha256_chain c[2];
	int i, on[2] = { 0, 0 }, rc = 0;

	for (i = 0; i < 2; i++) {
		memset(&res[i], 0, sizeof(res[i]));
		fg_sha256_chain_init(&c[i], r->every);
		if (!x[i] && (rc = r->every ? fg_sha256_new_own(&x[i], err)
					    : fg_sha256_new_x2(&x[i], err)) != 0)
			return rc;
	}
	for (i = 0; i < 2; i++) {
		if (!path[i])
			continue;
		res[i].rc = lane_open(&r->lane[i], r->at, r->skip, path[i], flags, &res[i].st,
				      &res[i].err);
		res[i].link_len = r->lane[i].link_len;
		if (!res[i].rc)
			res[i].rc = sha_restart(x[i], &res[i].err);
		on[i] = !res[i].rc;
	}
	while (on[0] || on[1]) {
		const char *d[2] = { NULL, NULL };
		size_t n[2] = { 0, 0 };

		for (i = 0; i < 2; i++) {
			if (!on[i])
				continue;
			res[i].rc = lane_piece(&r->lane[i], &d[i], &n[i], &res[i].err);
			if (res[i].rc || !n[i])
				on[i] = 0; /* failed, or at its end: the other goes on alone */
		}
		/* in spans that end where a chain state is due */
		while (n[0] || n[1]) {
			size_t m[2];

			for (i = 0; i < 2; i++)
				m[i] = fg_sha256_chain_span(&c[i], n[i]);
			if (m[0] && m[1]) {
				/* no fallible step in the SHA-NI pair; with EVP the
				 * failing half is charged to both */
				rc = fg_sha256_pair_update(x[0], d[0], m[0], x[1], d[1], m[1],
							   &res[0].err);
				if (rc) {
					res[1].err = res[0].err;
					res[0].rc = res[1].rc = rc;
					on[0] = on[1] = 0;
					break;
				}
			} else {
				for (i = 0; i < 2; i++)
					if (m[i] && (res[i].rc = fg_sha256_update(x[i], d[i], m[i],
										  &res[i].err)) != 0)
						on[i] = 0, n[i] = m[i] = 0;
			}
			for (i = 0; i < 2; i++) {
				fg_sha256_chain_step(&c[i], x[i], m[i]);
				d[i] += m[i];
				n[i] -= m[i];
			}
		}
	}
	for (i = 0; i < 2; i++) {
		struct lane *l = &r->lane[i];

		if (!path[i] || l->fd < 0) {
			fg_sha256_chain_free(&c[i]);
			continue;
		}
		if (!res[i].rc)
			res[i].rc = fg_sha256_final(x[i], res[i].digest, &res[i].err);
		res[i].mode = l->mode;
		res[i].size = l->done;
		lane_close(l);
		fg_sha256_chain_take(&c[i], &res[i].states, &res[i].n_states);
		if (res[i].rc) {
			free(res[i].states);
			res[i].states = NULL;
			res[i].n_states = 0;
		}
	}
	return 0;
}

/* ---- many files ---- */

#define FILES_MAX_THREADS 64

struct files_job {
	const char *const *path;
	struct fg_sha256_result *res;
	size_t *idx; /* paired: items are idx[2k], idx[2k + 1] (equal: alone) */
	int flags;
	unsigned long long every; /* chain states (fg_sha256_files_states) */
	int at;                   /* fg_sha256_files_at's folder, else AT_FDCWD */
	size_t skip;
	struct fg_sha256_reader *rd[FILES_MAX_THREADS];
};

static int files_item(void *arg, size_t k, int t, struct fg_err *err)
{
	struct files_job *j = arg;
	int rc;

	if (!j->rd[t] && (rc = fg_sha256_reader_new(&j->rd[t], err)))
		return rc;
	fg_sha256_reader_set_every(j->rd[t], j->every);
	j->rd[t]->at = j->at;
	j->rd[t]->skip = j->skip;
	if (!j->idx) {
		struct fg_sha256_result *r = &j->res[k];

		r->rc = fg_sha256_reader_file_states(j->rd[t], j->path[k], j->flags, r->digest,
						     &r->size, &r->st, &r->states, &r->n_states,
						     &r->err);
		r->mode = fg_sha256_reader_last_mode(j->rd[t]);
		r->link_len = j->rd[t]->lane[0].link_len;
		return 0;
	} else {
		size_t a = j->idx[2 * k], b = j->idx[2 * k + 1];
		const char *p[2] = { j->path[a], b != a ? j->path[b] : NULL };
		struct fg_sha256_result two[2];

		rc = fg_sha256_reader_pair(j->rd[t], p, j->flags, two, err);
		if (!rc) {
			j->res[a] = two[0];
			if (b != a)
				j->res[b] = two[1];
		}
		return rc;
	}
}

static int files_run(int at, size_t skip, const char *const *path, size_t n, int threads,
		     int flags, unsigned long long every, struct fg_sha256_result *res,
		     struct fg_err *err);

int fg_sha256_files(const char *const *path, size_t n, int threads, int flags,
		    struct fg_sha256_result *res, struct fg_err *err)
{
	return files_run(AT_FDCWD, 0, path, n, threads, flags, 0, res, err);
}

int fg_sha256_files_at(int dirfd, size_t skip, const char *const *path, size_t n, int threads,
		       int flags, struct fg_sha256_result *res, struct fg_err *err)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(path[i]) <= skip)
			return fg_err_set(err, FG_EINVAL, "%s: no name below the folder", path[i]);
	return files_run(dirfd, skip, path, n, threads, flags, 0, res, err);
}

int fg_sha256_files_states(const char *const *path, size_t n, int threads, int flags,
			   unsigned long long every, struct fg_sha256_result *res, struct fg_err *err)
{
	return files_run(AT_FDCWD, 0, path, n, threads, flags, every, res, err);
}

static int files_run(int at, size_t skip, const char *const *path, size_t n, int threads,
		     int flags, unsigned long long every, struct fg_sha256_result *res,
		     struct fg_err *err)
{
	struct files_job j;
	size_t items = n, i;
	int rc = 0;

	if (threads < 1)
		threads = 1;
	if (threads > FILES_MAX_THREADS)
		threads = FILES_MAX_THREADS;
	memset(&j, 0, sizeof(j));
	memset(res, 0, n * sizeof(*res));
	j.path = path;
	j.res = res;
	j.flags = flags;
	j.every = every;
	j.at = at;
	j.skip = skip;
	if (fg_sha256_ni_available() > 0 && n >= 2 * (size_t)threads) {
		unsigned long long *sz = malloc(n * sizeof(*sz));

		j.idx = malloc((n + 1) * sizeof(*j.idx));
		for (i = 0; sz && i < n; i++) {
			struct stat sb;

			/* only an order: a link on the way is refused by the open */
			sz[i] = fstatat(at, path[i] + skip, &sb, 0) ? 0 : (unsigned long long)sb.st_size;
		}
		rc = !sz || !j.idx ? fg_err_set(err, FG_ENOMEM, "out of memory")
				   : fg_workq_order_by_size(j.idx, sz, n, err);
		free(sz);
		if (!rc && n % 2)
			j.idx[n] = j.idx[n - 1]; /* the last one alone */
		items = (n + 1) / 2;
	}
	if (!rc)
		rc = fg_workq_run(items, threads, files_item, NULL, &j, err);
	for (i = 0; i < FILES_MAX_THREADS; i++)
		fg_sha256_reader_free(j.rd[i]);
	free(j.idx);
	return rc;
}

void fg_hex_encode(const uint8_t *data, size_t len, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < len; i++) {
		out[2 * i] = hex[data[i] >> 4];
		out[2 * i + 1] = hex[data[i] & 15];
	}
	out[2 * len] = '\0';
}

int fg_hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int fg_hex_decode(const char *hex, uint8_t *out, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		int hi = fg_hex_value(hex[2 * i]), lo;

		if (hi < 0)
			return -1;
		lo = fg_hex_value(hex[2 * i + 1]);
		if (lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return hex[2 * len] == '\0' ? 0 : -1;
}

int fg_hex_lower_valid(const char *s, size_t n)
{
	size_t i;

	if (!s)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[n] == '\0';
}

int fg_sha256_hex_valid(const char *s)
{
	return fg_hex_lower_valid(s, FG_SHA256_HEX_LEN);
}

/* ---- the hashing thread: a ring (lib/ring.h) whose pieces are hashed ---- */

#define PIPE_SLOTS 64

struct fg_sha256_pipe {
	struct fg_ring *ring;
	struct fg_sha256 *h;
};

/* arg non-NULL: end the digest after the piece, its hex to arg; flags 1:
 * instead the chain state to arg (fg_sha256_pipe_state) */
static int pipe_piece(void *ctx, const struct fg_ring_item *it, struct fg_err *err)
{
	struct fg_sha256_pipe *p = ctx;
	int rc = 0;

	if (it->len)
		rc = fg_sha256_update(p->h, it->data, it->len, err);
	if (!rc && it->arg && it->flags == 1) {
		if (fg_sha256_state(p->h, it->arg, NULL))
			rc = fg_err_set(err, FG_EINVAL, "sha256: no chain state here");
	} else if (!rc && it->arg) {
		uint8_t d[FG_SHA256_LEN];

		rc = fg_sha256_final(p->h, d, err);
		if (!rc)
			fg_hex_encode(d, sizeof(d), it->arg);
	}
	return rc;
}

static int pipe_new(struct fg_sha256_pipe **out, int own, struct fg_err *err)
{
	struct fg_sha256_pipe *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = own ? fg_sha256_new_own(&p->h, err) : fg_sha256_new(&p->h, err);
	if (!rc && fg_ring_new(&p->ring, PIPE_SLOTS, pipe_piece, p, err))
		rc = fg_err_set(err, FG_ENOMEM, "cannot start a hashing thread");
	if (rc) {
		fg_sha256_free(p->h);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

int fg_sha256_pipe_new(struct fg_sha256_pipe **out, struct fg_err *err)
{
	return pipe_new(out, 0, err);
}

int fg_sha256_pipe_new_own(struct fg_sha256_pipe **out, struct fg_err *err)
{
	return pipe_new(out, 1, err);
}

int fg_sha256_pipe_state(struct fg_sha256_pipe *p, uint8_t st[FG_SHA256_LEN], uint64_t *seq,
			 struct fg_err *err)
{
	struct fg_ring_item it = { NULL, 0, st, 1 };

	return fg_ring_put(p->ring, &it, seq, err);
}

int fg_sha256_pipe_update(struct fg_sha256_pipe *p, const void *data, size_t len, uint64_t *seq,
			  struct fg_err *err)
{
	struct fg_ring_item it = { data, len, NULL, 0 };

	return fg_ring_put(p->ring, &it, seq, err);
}

int fg_sha256_pipe_final(struct fg_sha256_pipe *p, char *hex, uint64_t *seq, struct fg_err *err)
{
	struct fg_ring_item it = { NULL, 0, hex, 0 };

	return fg_ring_put(p->ring, &it, seq, err);
}

uint64_t fg_sha256_pipe_last(const struct fg_sha256_pipe *p)
{
	return fg_ring_last(p->ring);
}

uint64_t fg_sha256_pipe_done(struct fg_sha256_pipe *p)
{
	return fg_ring_done(p->ring);
}

int fg_sha256_pipe_wait(struct fg_sha256_pipe *p, uint64_t seq, struct fg_err *err)
{
	return fg_ring_wait(p->ring, seq, err);
}

int fg_sha256_pipe_drain(struct fg_sha256_pipe *p, struct fg_err *err)
{
	return fg_ring_wait(p->ring, fg_ring_last(p->ring), err);
}

void fg_sha256_pipe_free(struct fg_sha256_pipe *p)
{
	if (!p)
		return;
	fg_ring_free(p->ring); /* hashes what is queued first */
	fg_sha256_free(p->h);
	free(p);
}
