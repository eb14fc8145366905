/* sha256.h - SHA-256: libcrypto's EVP for single streams (uses SHA-NI when
 * present), our own SHA-NI code for two streams hashed together. */
#ifndef FG_SHA256_H
#define FG_SHA256_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "err.h"

#define FG_SHA256_LEN 32
#define FG_SHA256_HEX_LEN 64

struct fg_sha256; /* opaque incremental context */

int fg_sha256_new(struct fg_sha256 **out, struct fg_err *err);
int fg_sha256_update(struct fg_sha256 *h, const void *data, size_t len, struct fg_err *err);
/* Writes the digest; the context is reset and can be reused. */
int fg_sha256_final(struct fg_sha256 *h, uint8_t out[FG_SHA256_LEN], struct fg_err *err);
void fg_sha256_free(struct fg_sha256 *h);

/* Two streams at once. One SHA-256 stream is bound by the latency of the
 * CPU's SHA rounds; two independent streams interleaved round by round fill
 * each other's gaps (~1.4x the bytes per second of one stream on the
 * project's AMD EPYC, docs/bench.md "store").
 *
 * fg_sha256_new_x2 makes a context for fg_sha256_pair_update: on a CPU with
 * the SHA extensions (and unless the environment has FG_SHA256_X2=0) it runs
 * on our own SHA-NI code (lib/sha256x2.c; alone it is a few percent slower
 * than OpenSSL's); elsewhere it is the same EVP context as fg_sha256_new.
 * Either kind works with fg_sha256_update, _final and _free. */
int fg_sha256_new_x2(struct fg_sha256 **out, struct fg_err *err);
/* Adds la bytes at da to a and lb bytes at db to b (a != b; the spans may be
 * the same bytes): the whole blocks both have are hashed interleaved when
 * both contexts came from fg_sha256_new_x2 on SHA-NI, the rest one stream
 * at a time. The digests are exactly those of separate updates. */
int fg_sha256_pair_update(struct fg_sha256 *a, const void *da, size_t la, struct fg_sha256 *b,
			  const void *db, size_t lb, struct fg_err *err);
/* A context whose chaining state can be read and set (fg_sha256_state,
 * fg_sha256_set_state): our SHA-NI code where it runs, else OpenSSL's
 * block function on our state. Works with every call above. */
int fg_sha256_new_own(struct fg_sha256 **out, struct fg_err *err);
/* The chaining state h0..h7 (big-endian, 32 bytes: what SHA-256 would
 * continue from) and the bytes hashed so far, of an own context (new_own, or
 * new_x2 on SHA-NI) standing at a 64-byte boundary; -1 otherwise. */
int fg_sha256_state(const struct fg_sha256 *h, uint8_t st[FG_SHA256_LEN], uint64_t *total);
/* Makes an own context continue from state st after total bytes (a multiple
 * of 64): hashing the rest then gives the whole stream's digest; -1 for an
 * EVP context or a total off a block boundary. */
int fg_sha256_set_state(struct fg_sha256 *h, const uint8_t st[FG_SHA256_LEN], uint64_t total);
/* Chain states taken while one stream is hashed in order: the state after
 * every `every` bytes (a multiple of 64; 0: none), on an own context
 * (docs/formats/bundle.md, "Chain states"). Out of memory: no states (the
 * digest is unaffected). */
struct fg_sha256_chain {
	unsigned long long every, done;
	uint8_t *st; /* 32 bytes each */
	size_t n, cap;
	int failed;
};
void fg_sha256_chain_init(struct fg_sha256_chain *c, unsigned long long every);
/* Of a span of n bytes, the bytes to hash before the next state is due. */
size_t fg_sha256_chain_span(const struct fg_sha256_chain *c, size_t n);
/* m bytes were just hashed into h: takes the state when they end on a
 * multiple of every. */
void fg_sha256_chain_step(struct fg_sha256_chain *c, const struct fg_sha256 *h, size_t m);
/* fg_sha256_update in spans, with the steps between. */
int fg_sha256_chain_update(struct fg_sha256 *h, struct fg_sha256_chain *c, const void *data,
			   size_t len, struct fg_err *err);
/* The stream ended: hands over its states before its end (a state at the
 * very end is dropped), malloc'd, or NULL and 0; c is left empty. */
void fg_sha256_chain_take(struct fg_sha256_chain *c, uint8_t **states, size_t *n);
void fg_sha256_chain_free(struct fg_sha256_chain *c);

/* 1 when h runs on our SHA-NI code (tests, docs). */
int fg_sha256_is_x2(const struct fg_sha256 *h);

/* The SHA-NI compression function (lib/sha256x2.c), on the state h0..h7 of
 * FIPS 180-4, n whole 64-byte blocks. Call only when
 * fg_sha256_ni_available(): 1 on x86-64 with SHA, SSSE3 and SSE4.1, and the
 * environment does not say FG_SHA256_X2=0 (read at each call). 0, or -1
 * (nothing hashed) in a build without the SHA-NI code. */
int fg_sha256_ni_available(void);
int fg_sha256_ni_blocks(uint32_t h[8], const uint8_t *p, size_t n);
/* Two streams, n blocks each, interleaved. */
int fg_sha256_ni_blocks2(uint32_t ha[8], const uint8_t *pa, uint32_t hb[8], const uint8_t *pb,
			 size_t n);

/* One-shot digest of a memory span. */
int fg_sha256_mem(const void *data, size_t len, uint8_t out[FG_SHA256_LEN], struct fg_err *err);
/* Reads fd to its end into h through buf (bufsize bytes), also writing every
 * byte to copy_fd when it is >= 0; *size_out gets the byte count. path names
 * the file in messages. h is not finalized. */
int fg_sha256_fd(struct fg_sha256 *h, int fd, void *buf, size_t bufsize, int copy_fd,
		 unsigned long long *size_out, const char *path, struct fg_err *err);
/* fg_sha256_fd taking chain states into c (may be NULL) as it goes; h must
 * then be an own context (fg_sha256_new_own). */
struct fg_sha256_chain;
int fg_sha256_fd_chain(struct fg_sha256 *h, struct fg_sha256_chain *c, int fd, void *buf,
		       size_t bufsize, int copy_fd, unsigned long long *size_out, const char *path,
		       struct fg_err *err);
/* Digest of a whole file, read in large chunks; *size_out gets its length. */
int fg_sha256_file(const char *path, uint8_t out[FG_SHA256_LEN], unsigned long long *size_out,
		   struct fg_err *err);

/* Whole-file hashing, the routine shared by `store verify` and `pack` (one
 * reader per thread; it keeps its buffers, digest context and AIO context
 * from file to file).
 *
 * FG_SHA256_DIRECT reads a file of FG_SHA256_DIRECT_MIN bytes or more from
 * the disk around the page cache: O_DIRECT into buffers on 2 MiB pages, with
 * the next FG_SHA256_READ_AHEAD pieces in flight through Linux native AIO
 * while the current one is hashed. That checks what is stored (not a cached
 * copy), costs no kernel copy out of the page cache and leaves the cache to
 * others. Where the filesystem refuses O_DIRECT (tmpfs on old kernels, some
 * FUSE) or AIO is not available, it falls back to synchronous O_DIRECT reads
 * or to plain reads, from where it was. Without the flag: plain 256 KiB
 * reads (each piece hashed while in L2), which fill the page cache for a
 * later reader (pack reads every file again to write it).
 * FG_SHA256_REGULAR: refuse symlinks, FIFOs and anything not a regular file
 * (FG_EINVAL), opening with O_NONBLOCK so a FIFO cannot hang the open.
 * FG_SHA256_FILES: the same but a link is followed (to a regular file). */
enum { FG_SHA256_DIRECT = 1, FG_SHA256_REGULAR = 2, FG_SHA256_FILES = 4 };
#define FG_SHA256_DIRECT_MIN ((unsigned long long)1 << 20)
#define FG_SHA256_READ_AHEAD 4

struct fg_sha256_reader;

int fg_sha256_reader_new(struct fg_sha256_reader **out, struct fg_err *err);
/* sha256 of the file at path to its end; *size_out (may be NULL) gets the
 * bytes hashed, *st_out (may be NULL) the fstat of the file as opened, before
 * reading (for a change stamp). FG_ENOTFOUND when it does not exist. */
int fg_sha256_reader_file(struct fg_sha256_reader *r, const char *path, int flags,
			  uint8_t out[FG_SHA256_LEN], unsigned long long *size_out, struct stat *st_out,
			  struct fg_err *err);
/* How the last file was read: 1 O_DIRECT with AIO, 2 O_DIRECT synchronous,
 * 0 plain reads (docs and tests). */
int fg_sha256_reader_last_mode(const struct fg_sha256_reader *r);
/* fg_sha256_reader_file, also giving the chain states (the reader's every,
 * fg_sha256_reader_set_every) in *states (malloc'd, the caller frees; NULL
 * when none or on failure; states NULL: not wanted). */
int fg_sha256_reader_file_states(struct fg_sha256_reader *r, const char *path, int flags,
				 uint8_t out[FG_SHA256_LEN], unsigned long long *size_out,
				 struct stat *st_out, uint8_t **states, size_t *n_states,
				 struct fg_err *err);
/* From now on, files are hashed on own contexts and their chain states kept
 * every `every` bytes (0: back to none); see fg_sha256_files_states. */
void fg_sha256_reader_set_every(struct fg_sha256_reader *r, unsigned long long every);

/* One file's outcome in fg_sha256_reader_pair. */
struct fg_sha256_result {
	uint8_t digest[FG_SHA256_LEN];
	unsigned long long size; /* bytes hashed */
	struct stat st;          /* fstat of the file as opened, before reading */
	int rc;                  /* 0, or FG_E* for this file (FG_ENOTFOUND: absent) */
	int mode;                /* as fg_sha256_reader_last_mode */
	/* fg_sha256_files_at with FG_SHA256_REGULAR: the open refused a
	 * symbolic link, the file or a folder on the way, which the path's
	 * first link_len bytes name; 0: none */
	size_t link_len;
	struct fg_err err;       /* the message when rc */
	/* fg_sha256_files_states: the chaining state (fg_sha256_state) after
	 * every `every` bytes, for each such offset before the file's end,
	 * 32 bytes each (malloc'd: the caller frees; NULL when none) */
	uint8_t *states;
	size_t n_states;
};

/* Two files at once, each exactly as fg_sha256_reader_file would (flags,
 * fallbacks, errors): both have their next pieces in flight, and each pair
 * of pieces goes through fg_sha256_pair_update, so on SHA-NI their blocks
 * are hashed interleaved; once one file ends or fails the other goes on
 * alone. path[i] may be NULL: res[i] is then left zeroed. Each file's
 * outcome is in res[i]; the call itself fails (FG_ENOMEM) only when it
 * cannot make its digest contexts, made on first use (so FG_SHA256_X2 is
 * read when a reader first hashes a pair). A reader holds a second set of
 * buffers (8 MiB) for the second file once it has read a pair. */
int fg_sha256_reader_pair(struct fg_sha256_reader *r, const char *const path[2], int flags,
			  struct fg_sha256_result res[2], struct fg_err *err);
void fg_sha256_reader_free(struct fg_sha256_reader *r);

/* Hashes n whole files on up to `threads` threads (lib/workq.h): where our
 * SHA-NI code runs and there are at least two files per thread, two at a
 * time per thread (fg_sha256_reader_pair, files of like size together),
 * else one. flags as fg_sha256_reader_file. res[i] gets file i's outcome
 * (digest, size hashed, fstat before reading, rc and message); the call
 * fails only when it cannot run (FG_ENOMEM, FG_EINVAL): check each res[i].rc. */
int fg_sha256_files(const char *const *path, size_t n, int threads, int flags,
		    struct fg_sha256_result *res, struct fg_err *err);
/* The same for files below the folder dirfd (held open by the caller):
 * path[i] + skip names file i relative to it (path[i] whole names it in
 * messages). With FG_SHA256_REGULAR each is opened by fg_openat_beneath, so
 * no link on the way is followed: a folder swapped for a link since the
 * caller listed it is refused as a link to a file is (FG_EINVAL, with
 * res[i].link_len), not read through. */
int fg_sha256_files_at(int dirfd, size_t skip, const char *const *path, size_t n, int threads,
		       int flags, struct fg_sha256_result *res, struct fg_err *err);
/* The same, also taking each file's chain states every `every` bytes (a
 * multiple of 64; 0: none) into res[i].states: the files are then hashed
 * on own contexts (fg_sha256_new_own), paired as above on SHA-NI. The
 * states let a reader check the file's digest in pieces side by side
 * (docs/formats/bundle.md, "Chain states"). */
int fg_sha256_files_states(const char *const *path, size_t n, int threads, int flags,
			   unsigned long long every, struct fg_sha256_result *res, struct fg_err *err);

/* A hashing thread fed pieces in order, so the caller can read, compute or
 * write while the bytes it already has are hashed (one SHA-256 stream runs at
 * about 1.7 GB/s per core; see docs/bench.md, bake int4). Pieces are borrowed:
 * they must stay valid and unchanged until fg_sha256_pipe_wait returns for
 * their number (or a later one). Any number of digests in sequence:
 * fg_sha256_pipe_final ends the running one.
 *   fg_sha256_pipe_new(&p, &err);
 *   fg_sha256_pipe_update(p, buf, n, &seq, &err);   // returns at once
 *   fg_sha256_pipe_final(p, hex, NULL, &err);       // hex filled in later
 *   fg_sha256_pipe_wait(p, seq, &err);              // buf may be reused
 *   fg_sha256_pipe_drain(p, &err);                  // hex is ready
 *   fg_sha256_pipe_free(p); */
struct fg_sha256_pipe;

int fg_sha256_pipe_new(struct fg_sha256_pipe **out, struct fg_err *err);
/* A pipe whose context is an own one (fg_sha256_new_own), so that
 * fg_sha256_pipe_state can read its chain state. */
int fg_sha256_pipe_new_own(struct fg_sha256_pipe **out, struct fg_err *err);
/* Queues a look at the chain state: once everything queued before is
 * hashed, the state (fg_sha256_state) goes to st (borrowed until then). The
 * pipe must be an own one standing at a 64-byte boundary there, else the
 * pipe fails (fg_sha256_pipe_wait returns the error). */
int fg_sha256_pipe_state(struct fg_sha256_pipe *p, uint8_t st[FG_SHA256_LEN], uint64_t *seq,
			 struct fg_err *err);
/* Queues len bytes at data; *seq (may be NULL) gets the piece's number.
 * Blocks only while the queue is full. */
int fg_sha256_pipe_update(struct fg_sha256_pipe *p, const void *data, size_t len, uint64_t *seq,
			  struct fg_err *err);
/* Queues the end of the running digest: once reached, its lowercase hex goes
 * to hex (borrowed, FG_SHA256_HEX_LEN + 1 bytes) and a new digest begins. */
int fg_sha256_pipe_final(struct fg_sha256_pipe *p, char *hex, uint64_t *seq, struct fg_err *err);
/* Number of the last piece queued (0 when none). */
uint64_t fg_sha256_pipe_last(const struct fg_sha256_pipe *p);
/* Number of pieces done so far, without waiting. */
uint64_t fg_sha256_pipe_done(struct fg_sha256_pipe *p);
/* Waits until every piece numbered up to seq is done; returns the thread's
 * first error (after which nothing more is hashed). */
int fg_sha256_pipe_wait(struct fg_sha256_pipe *p, uint64_t seq, struct fg_err *err);
/* Waits for everything queued. */
int fg_sha256_pipe_drain(struct fg_sha256_pipe *p, struct fg_err *err);
/* Waits for what is queued, then stops the thread. Accepts NULL. */
void fg_sha256_pipe_free(struct fg_sha256_pipe *p);

/* Lowercase hex; out must hold 2*len+1 bytes. */
void fg_hex_encode(const uint8_t *data, size_t len, char *out);
/* Value of one hex digit (either case), or -1. */
int fg_hex_value(char c);
/* Parses exactly 2*len hex digits (either case); returns 0 or -1. */
int fg_hex_decode(const char *hex, uint8_t *out, size_t len);
/* True when s is exactly n lowercase hex digits (a git id: 40). */
int fg_hex_lower_valid(const char *s, size_t n);
/* True when s is exactly 64 lowercase hex digits. */
int fg_sha256_hex_valid(const char *s);

#endif
