/* sha256.c - SHA-256 through OpenSSL EVP, hex helpers, a whole-file reader
 * (O_DIRECT + AIO) and a hashing thread (on lib/ring.h). */
#include "sha256.h"
#include "fsutil.h"
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>

struct fg_sha256 {
	EVP_MD_CTX *ctx;  /* NULL: our own SHA-NI code (fg_sha256_new_x2) */
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

/* Tops up the partial block from *p; hashes it once full. */
static void own_top_up(struct fg_sha256 *h, const uint8_t **p, size_t *n)
{
	size_t take = 64 - h->fill;

	if (!h->fill || !*n)
		return;
	if (take > *n)
		take = *n;
	memcpy(h->buf + h->fill, *p, take);
	h->fill += take;
	h->total += take;
	*p += take;
	*n -= take;
	if (h->fill == 64) {
		fg_sha256_ni_blocks(h->h, h->buf, 1);
		h->fill = 0;
	}
}

static void own_update(struct fg_sha256 *h, const uint8_t *p, size_t n)
{
	own_top_up(h, &p, &n);
	if (n >= 64) {
		size_t whole = n / 64;

		fg_sha256_ni_blocks(h->h, p, whole);
		p += whole * 64;
		n -= whole * 64;
		h->total += (uint64_t)whole * 64;
	}
	if (n) {
		memcpy(h->buf + h->fill, p, n);
		h->fill += n;
		h->total += n;
	}
}

static void own_final(struct fg_sha256 *h, uint8_t out[FG_SHA256_LEN])
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
	fg_sha256_ni_blocks(h->h, pad, n / 64);
	for (i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(h->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(h->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(h->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)h->h[i];
	}
	own_reset(h);
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

int fg_sha256_is_x2(const struct fg_sha256 *h)
{
	return !h->ctx;
}

int fg_sha256_update(struct fg_sha256 *h, const void *data, size_t len, struct fg_err *err)
{
	if (!h->ctx) {
		if (len)
			own_update(h, data, len);
		return 0;
	}
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

	if (a->ctx || b->ctx) {
		rc = fg_sha256_update(a, da, la, err);
		return rc ? rc : fg_sha256_update(b, db, lb, err);
	}
	/* each finishes its own partial block first: from there both are on
	 * block boundaries, whatever their offsets */
	own_top_up(a, &pa, &la);
	own_top_up(b, &pb, &lb);
	n = a->fill || b->fill ? 0 : (la < lb ? la : lb) / 64;
	if (n) {
		fg_sha256_ni_blocks2(a->h, pa, b->h, pb, n);
		a->total += (uint64_t)n * 64;
		b->total += (uint64_t)n * 64;
		pa += n * 64;
		pb += n * 64;
		la -= n * 64;
		lb -= n * 64;
	}
	if (la)
		own_update(a, pa, la);
	if (lb)
		own_update(b, pb, lb);
	return 0;
}

int fg_sha256_final(struct fg_sha256 *h, uint8_t out[FG_SHA256_LEN], struct fg_err *err)
{
	unsigned int n = 0;

	if (!h->ctx) {
		own_final(h, out);
		return 0;
	}
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
		rc = fg_sha256_update(h, buf, (size_t)n, err);
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
#define RD_FALLBACK 1 /* internal: go on with plain reads from *done */

struct fg_sha256_reader {
	struct fg_sha256 *h;
	char *pool;       /* RD_SLOTS * RD_PIECE bytes, 2 MiB aligned, touched once */
	aio_context_t aio;
	int aio_state;    /* 0 untried, 1 set up, -1 unavailable */
	int last_mode;
};

int fg_sha256_reader_new(struct fg_sha256_reader **out, struct fg_err *err)
{
	struct fg_sha256_reader *r = calloc(1, sizeof(*r));
	int rc;

	*out = NULL;
	if (!r)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
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
	if (!r)
		return;
	if (r->aio_state == 1)
		syscall(SYS_io_destroy, r->aio);
	fg_sha256_free(r->h);
	free(r->pool);
	free(r);
}

int fg_sha256_reader_last_mode(const struct fg_sha256_reader *r)
{
	return r->last_mode;
}

static int reader_pool(struct fg_sha256_reader *r, struct fg_err *err)
{
	void *p = NULL;

	if (r->pool)
		return 0;
	if (posix_memalign(&p, RD_PIECE, RD_SLOTS * RD_PIECE))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	/* 2 MiB pages: pinning them for each O_DIRECT read costs the kernel far
	 * less than 512 small pages (measured: a third of the system time) */
	madvise(p, RD_SLOTS * RD_PIECE, MADV_HUGEPAGE);
	memset(p, 0, RD_SLOTS * RD_PIECE); /* fault it in once, not per file */
	r->pool = p;
	return 0;
}

static int read_fail(struct fg_err *err, const char *path, int e)
{
	return fg_err_set(err, FG_EIO, "read %s: %s", path, strerror(e));
}

/* O_DIRECT reads with up to RD_SLOTS in flight (Linux AIO), hashed in file
 * order; size is the length at open. Returns 0 at the end of the file,
 * RD_FALLBACK to go on with plain reads from *done, or an error. */
static int read_aio(struct fg_sha256_reader *r, int fd, unsigned long long size,
		    unsigned long long *done, const char *path, struct fg_err *err)
{
	struct iocb cb[RD_SLOTS];
	long long res[RD_SLOTS];
	int ready[RD_SLOTS];
	unsigned long long next = 0, limit = size;
	int head = 0, pending = 0, stop = 0, rc = 0;

	memset(ready, 0, sizeof(ready));
	for (;;) {
		/* keep every free slot reading the next piece */
		while (!stop && !rc && pending < RD_SLOTS && next <= limit) {
			int s = (head + pending) % RD_SLOTS;
			struct iocb *p = &cb[s];
			long n;

			memset(p, 0, sizeof(*p));
			p->aio_fildes = (uint32_t)fd;
			p->aio_lio_opcode = IOCB_CMD_PREAD;
			p->aio_buf = (uint64_t)(uintptr_t)(r->pool + (size_t)s * RD_PIECE);
			p->aio_nbytes = RD_PIECE;
			p->aio_offset = (int64_t)next;
			p->aio_data = (uint64_t)s;
			n = syscall(SYS_io_submit, r->aio, 1L, &p);
			if (n != 1) {
				if (n < 0 && errno == EINTR)
					continue;
				stop = RD_FALLBACK; /* what is in flight is still used */
				break;
			}
			ready[s] = 0;
			pending++;
			next += RD_PIECE;
		}
		if (!pending)
			break;
		while (!ready[head]) {
			struct io_event ev[RD_SLOTS];
			long n = syscall(SYS_io_getevents, r->aio, 1L, (long)RD_SLOTS, ev, NULL);
			long k;

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				int e = errno;

				/* cannot reap: io_destroy waits for what is in flight, so
				 * the buffers are ours again; no AIO from now on */
				syscall(SYS_io_destroy, r->aio);
				r->aio_state = -1;
				return read_fail(err, path, e);
			}
			for (k = 0; k < n; k++) {
				int s = (int)ev[k].data;

				ready[s] = 1;
				res[s] = (long long)ev[k].res;
			}
		}
		ready[head] = 0;
		pending--;
		if (!stop && !rc) {
			long long n = res[head];

			if (n < 0 && n == -EINVAL) {
				stop = RD_FALLBACK; /* O_DIRECT refused for this file */
			} else if (n < 0) {
				rc = read_fail(err, path, (int)-n);
			} else {
				if (n)
					rc = fg_sha256_update(r->h, r->pool + (size_t)head * RD_PIECE,
							      (size_t)n, err);
				*done += (unsigned long long)n;
				if ((size_t)n < RD_PIECE)
					/* a short read ends the file unless it came before the
					 * length seen at open: then plain reads settle it */
					stop = *done < size ? RD_FALLBACK : -1;
				else if (*done > limit)
					limit = *done; /* it grew: read on */
			}
		}
		head = (head + 1) % RD_SLOTS;
	}
	if (rc)
		return rc;
	return stop == RD_FALLBACK ? RD_FALLBACK : 0;
}

/* Synchronous O_DIRECT reads (no AIO here). */
static int read_direct(struct fg_sha256_reader *r, int fd, unsigned long long size,
		       unsigned long long *done, const char *path, struct fg_err *err)
{
	for (;;) {
		ssize_t n = pread(fd, r->pool, RD_PIECE, (off_t)*done);
		int rc;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EINVAL ? RD_FALLBACK : read_fail(err, path, errno);
		rc = n ? fg_sha256_update(r->h, r->pool, (size_t)n, err) : 0;
		if (rc)
			return rc;
		*done += (unsigned long long)n;
		if ((size_t)n < RD_PIECE)
			return *done < size ? RD_FALLBACK : 0;
	}
}

/* Plain reads to the end, from *done on. */
static int read_plain(struct fg_sha256_reader *r, int fd, unsigned long long *done,
		      const char *path, struct fg_err *err)
{
	for (;;) {
		ssize_t n = read(fd, r->pool, RD_PLAIN);
		int rc;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return read_fail(err, path, errno);
		if (n == 0)
			return 0;
		rc = fg_sha256_update(r->h, r->pool, (size_t)n, err);
		if (rc)
			return rc;
		*done += (unsigned long long)n;
	}
}

int fg_sha256_reader_file(struct fg_sha256_reader *r, const char *path, int flags,
			  uint8_t out[FG_SHA256_LEN], unsigned long long *size_out, struct stat *st_out,
			  struct fg_err *err)
{
	int regular = (flags & FG_SHA256_REGULAR) != 0;
	unsigned long long done = 0;
	struct stat st;
	int fd, rc, mode = 0, plain = 1;

	r->last_mode = 0;
	if (size_out)
		*size_out = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | (regular ? O_NOFOLLOW | O_NONBLOCK : 0));
	if (fd < 0)
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : regular ? FG_EINVAL : FG_EIO,
				  "open %s: %s", path,
				  regular && errno == ELOOP ? "a symlink, not a regular file"
							    : strerror(errno));
	if (fstat(fd, &st))
		rc = fg_err_set(err, FG_EIO, "stat %s: %s", path, strerror(errno));
	else if (regular && !S_ISREG(st.st_mode))
		rc = fg_err_set(err, FG_EINVAL, "%s: not a regular file", path);
	else
		rc = reader_pool(r, err);
	if (!rc && EVP_DigestInit_ex(r->h->ctx, EVP_sha256(), NULL) != 1)
		rc = ossl_fail(err, "init"); /* a fresh digest, whatever came before */
	if (rc) {
		close(fd);
		return rc;
	}
	if (st_out)
		*st_out = st;
	if ((flags & FG_SHA256_DIRECT) && S_ISREG(st.st_mode) &&
	    (unsigned long long)st.st_size >= FG_SHA256_DIRECT_MIN &&
	    !fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_DIRECT)) {
		unsigned long long size = (unsigned long long)st.st_size;

		if (r->aio_state == 0) {
			r->aio = 0;
			r->aio_state = syscall(SYS_io_setup, (long)RD_SLOTS, &r->aio) ? -1 : 1;
		}
		mode = r->aio_state == 1 ? 1 : 2;
		rc = mode == 1 ? read_aio(r, fd, size, &done, path, err)
			       : read_direct(r, fd, size, &done, path, err);
		if (rc == RD_FALLBACK && mode == 1 && !done) {
			/* AIO refused this file, not O_DIRECT: read it synchronously */
			mode = 2;
			rc = read_direct(r, fd, size, &done, path, err);
		}
		plain = rc == RD_FALLBACK;
		if (plain) {
			mode = 0;
			rc = 0;
			if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_DIRECT) ||
			    lseek(fd, (off_t)done, SEEK_SET) != (off_t)done)
				rc = read_fail(err, path, errno);
		}
	}
	if (!rc && plain) {
#ifdef POSIX_FADV_SEQUENTIAL
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
		rc = read_plain(r, fd, &done, path, err);
	}
	if (!rc)
		rc = fg_sha256_final(r->h, out, err);
	r->last_mode = mode;
	if (size_out)
		*size_out = done;
	close(fd);
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

int fg_sha256_hex_valid(const char *s)
{
	size_t i;

	if (!s)
		return 0;
	for (i = 0; i < FG_SHA256_HEX_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[FG_SHA256_HEX_LEN] == '\0';
}

/* ---- the hashing thread: a ring (lib/ring.h) whose pieces are hashed ---- */

#define PIPE_SLOTS 64

struct fg_sha256_pipe {
	struct fg_ring *ring;
	struct fg_sha256 *h;
};

/* arg non-NULL: end the digest after the piece, its hex to arg */
static int pipe_piece(void *ctx, const struct fg_ring_item *it, struct fg_err *err)
{
	struct fg_sha256_pipe *p = ctx;
	int rc = 0;

	if (it->len)
		rc = fg_sha256_update(p->h, it->data, it->len, err);
	if (!rc && it->arg) {
		uint8_t d[FG_SHA256_LEN];

		rc = fg_sha256_final(p->h, d, err);
		if (!rc)
			fg_hex_encode(d, sizeof(d), it->arg);
	}
	return rc;
}

int fg_sha256_pipe_new(struct fg_sha256_pipe **out, struct fg_err *err)
{
	struct fg_sha256_pipe *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_sha256_new(&p->h, err);
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
