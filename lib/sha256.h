/* sha256.h - SHA-256 over libcrypto's EVP interface (uses SHA-NI when present). */
#ifndef FG_SHA256_H
#define FG_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define FG_SHA256_LEN 32
#define FG_SHA256_HEX_LEN 64

struct fg_sha256; /* opaque incremental context */

int fg_sha256_new(struct fg_sha256 **out, struct fg_err *err);
int fg_sha256_update(struct fg_sha256 *h, const void *data, size_t len, struct fg_err *err);
/* Writes the digest; the context is reset and can be reused. */
int fg_sha256_final(struct fg_sha256 *h, uint8_t out[FG_SHA256_LEN], struct fg_err *err);
void fg_sha256_free(struct fg_sha256 *h);

/* One-shot digest of a memory span. */
int fg_sha256_mem(const void *data, size_t len, uint8_t out[FG_SHA256_LEN], struct fg_err *err);
/* Reads fd to its end into h through buf (bufsize bytes), also writing every
 * byte to copy_fd when it is >= 0; *size_out gets the byte count. path names
 * the file in messages. h is not finalized. */
int fg_sha256_fd(struct fg_sha256 *h, int fd, void *buf, size_t bufsize, int copy_fd,
		 unsigned long long *size_out, const char *path, struct fg_err *err);
/* Digest of a whole file, read in large chunks; *size_out gets its length. */
int fg_sha256_file(const char *path, uint8_t out[FG_SHA256_LEN], unsigned long long *size_out,
		   struct fg_err *err);

/* Lowercase hex; out must hold 2*len+1 bytes. */
void fg_hex_encode(const uint8_t *data, size_t len, char *out);
/* Value of one hex digit (either case), or -1. */
int fg_hex_value(char c);
/* Parses exactly 2*len hex digits (either case); returns 0 or -1. */
int fg_hex_decode(const char *hex, uint8_t *out, size_t len);
/* True when s is exactly 64 lowercase hex digits. */
int fg_sha256_hex_valid(const char *s);

#endif
