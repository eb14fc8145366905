/* sha256.c - SHA-256 through OpenSSL EVP, plus hex helpers. */
#include "sha256.h"
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>

struct fg_sha256 {
	EVP_MD_CTX *ctx;
};

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

int fg_sha256_update(struct fg_sha256 *h, const void *data, size_t len, struct fg_err *err)
{
	if (len && EVP_DigestUpdate(h->ctx, data, len) != 1)
		return ossl_fail(err, "update");
	return 0;
}

int fg_sha256_final(struct fg_sha256 *h, uint8_t out[FG_SHA256_LEN], struct fg_err *err)
{
	unsigned int n = 0;

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

/* ---- the hashing thread ---- */

#define PIPE_SLOTS 64

struct pipe_item {
	const void *data;
	size_t len;
	char *hex; /* non-NULL: end the digest here */
};

struct fg_sha256_pipe {
	pthread_t th;
	pthread_mutex_t m;
	pthread_cond_t cv_work, cv_done;
	struct pipe_item q[PIPE_SLOTS];
	uint64_t queued, done; /* pieces numbered 1..queued; 1..done are hashed */
	int stop;
	int rc;                /* first error; set by the thread */
	struct fg_err err;
	struct fg_sha256 *h;
};

static void *pipe_main(void *arg)
{
	struct fg_sha256_pipe *p = arg;

	pthread_mutex_lock(&p->m);
	for (;;) {
		struct pipe_item it;
		int rc = 0;

		while (p->done == p->queued && !p->stop)
			pthread_cond_wait(&p->cv_work, &p->m);
		if (p->done == p->queued)
			break;
		it = p->q[p->done % PIPE_SLOTS];
		rc = p->rc;
		pthread_mutex_unlock(&p->m);
		if (!rc && it.len)
			rc = fg_sha256_update(p->h, it.data, it.len, &p->err);
		if (!rc && it.hex) {
			uint8_t d[FG_SHA256_LEN];

			rc = fg_sha256_final(p->h, d, &p->err);
			if (!rc)
				fg_hex_encode(d, sizeof(d), it.hex);
		}
		pthread_mutex_lock(&p->m);
		if (rc && !p->rc)
			p->rc = rc;
		p->done++;
		pthread_cond_broadcast(&p->cv_done);
	}
	pthread_mutex_unlock(&p->m);
	return NULL;
}

int fg_sha256_pipe_new(struct fg_sha256_pipe **out, struct fg_err *err)
{
	struct fg_sha256_pipe *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_sha256_new(&p->h, err);
	if (rc) {
		free(p);
		return rc;
	}
	pthread_mutex_init(&p->m, NULL);
	pthread_cond_init(&p->cv_work, NULL);
	pthread_cond_init(&p->cv_done, NULL);
	if (pthread_create(&p->th, NULL, pipe_main, p)) {
		pthread_mutex_destroy(&p->m);
		pthread_cond_destroy(&p->cv_work);
		pthread_cond_destroy(&p->cv_done);
		fg_sha256_free(p->h);
		free(p);
		return fg_err_set(err, FG_ENOMEM, "cannot start a hashing thread");
	}
	*out = p;
	return 0;
}

static int pipe_put(struct fg_sha256_pipe *p, const void *data, size_t len, char *hex,
		    uint64_t *seq, struct fg_err *err)
{
	int rc;

	pthread_mutex_lock(&p->m);
	while (p->queued - p->done == PIPE_SLOTS && !p->rc)
		pthread_cond_wait(&p->cv_done, &p->m);
	rc = p->rc;
	if (!rc) {
		struct pipe_item *it = &p->q[p->queued % PIPE_SLOTS];

		it->data = data;
		it->len = len;
		it->hex = hex;
		p->queued++;
		if (seq)
			*seq = p->queued;
		pthread_cond_signal(&p->cv_work);
	} else if (err) {
		*err = p->err;
	}
	pthread_mutex_unlock(&p->m);
	return rc;
}

int fg_sha256_pipe_update(struct fg_sha256_pipe *p, const void *data, size_t len, uint64_t *seq,
			  struct fg_err *err)
{
	return pipe_put(p, data, len, NULL, seq, err);
}

int fg_sha256_pipe_final(struct fg_sha256_pipe *p, char *hex, uint64_t *seq, struct fg_err *err)
{
	return pipe_put(p, NULL, 0, hex, seq, err);
}

uint64_t fg_sha256_pipe_last(const struct fg_sha256_pipe *p)
{
	return p->queued; /* written only by the caller's own thread */
}

int fg_sha256_pipe_wait(struct fg_sha256_pipe *p, uint64_t seq, struct fg_err *err)
{
	int rc;

	pthread_mutex_lock(&p->m);
	while (p->done < seq && p->done < p->queued)
		pthread_cond_wait(&p->cv_done, &p->m);
	rc = p->rc;
	if (rc && err)
		*err = p->err;
	pthread_mutex_unlock(&p->m);
	return rc;
}

int fg_sha256_pipe_drain(struct fg_sha256_pipe *p, struct fg_err *err)
{
	return fg_sha256_pipe_wait(p, p->queued, err);
}

void fg_sha256_pipe_free(struct fg_sha256_pipe *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->m);
	p->stop = 1;
	pthread_cond_signal(&p->cv_work);
	pthread_mutex_unlock(&p->m);
	pthread_join(p->th, NULL);
	pthread_mutex_destroy(&p->m);
	pthread_cond_destroy(&p->cv_work);
	pthread_cond_destroy(&p->cv_done);
	fg_sha256_free(p->h);
	free(p);
}
