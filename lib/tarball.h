/* tarball.h - reproducible tar.zst bundles: writer, safe extractor, member reader.
 * (Named tarball, not archive, so that <archive.h> still means libarchive's.)
 *
 * Written archives are byte-reproducible: regular files only (folders are
 * implied by paths), entries sorted by path bytes, one fixed mtime, uid/gid 0
 * with no user or group names, modes 0644 or 0755, restricted pax (pax
 * headers only where ustar cannot hold a field; never atime/ctime). The tar
 * stream goes through libarchive, then libzstd, as independent frames with
 * zstd's seekable-format seek table at the end (docs/formats/bundle.md,
 * "Frames and the seek table"). An archive's identity is the
 * sha256 of the uncompressed tar stream, computed while writing and while
 * reading, since zstd output may differ between zstd versions.
 *
 * Reading accepts zstd-compressed or plain tar. Extraction trusts nothing:
 * every header is checked before its bytes are written, into a fresh folder
 * beside the destination that is renamed into place only when the whole
 * archive passed; anything refused removes that folder, so nothing is left
 * behind. Refused: absolute paths, "..", ".", empty or control-character
 * components, any link (symbolic or hard), device nodes, fifos, sockets,
 * sparse entries, duplicate paths, entries over the size limit, more entries
 * than the limit, and totals over the limit or the free disk space. */
#ifndef FG_TARBALL_H
#define FG_TARBALL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "buf.h"
#include "err.h"

#define FG_TARBALL_DEFAULT_MAX_ENTRY (64ULL << 30)  /* bytes in one file */
#define FG_TARBALL_DEFAULT_MAX_TOTAL (512ULL << 30) /* bytes in all files */
#define FG_TARBALL_DEFAULT_MAX_ENTRIES 100000

struct fg_tarball_limits {
	unsigned long long max_entry_size; /* 0 = FG_TARBALL_DEFAULT_MAX_ENTRY */
	unsigned long long max_total_size; /* 0 = FG_TARBALL_DEFAULT_MAX_TOTAL */
	size_t max_entries;                /* 0 = FG_TARBALL_DEFAULT_MAX_ENTRIES */
};

/* One member as seen by a reader. path is borrowed for the callback only. */
struct fg_tarball_entry {
	const char *path;
	unsigned long long size;
	int mode;       /* 0644 / 0755 for files, 0755 for folders */
	int is_dir;
	int hashed;     /* sha256 below is valid (files, when hashing was asked) */
	uint8_t sha256[32];
	/* the member's bytes, when the reader's keep asked for them and they
	 * fit (borrowed for the callback only); else NULL */
	const void *content;
};

/* Called once per member after its content was read (and hashed); a nonzero
 * (negative FG_E*) return stops the read with that code. */
typedef int (*fg_tarball_entry_fn)(void *user, const struct fg_tarball_entry *e, struct fg_err *err);

/* Writer. Members are collected first and written sorted at finish. */
struct fg_tarball_writer;

/* level: zstd level (1..19; 0 = 3). mtime: seconds since the epoch stored in
 * every header (callers pass SOURCE_DATE_EPOCH or 0). */
int fg_tarball_writer_new(struct fg_tarball_writer **out, int level, long long mtime,
			  struct fg_err *err);
/* What a file looked like when the caller read (and hashed) it, from fstat:
 * the writer streams each file once, without hashing it again, and instead
 * refuses one whose stamp changed between then and the end of its copy
 * (FG_EHASH): a write moves mtime and ctime, a replacement moves the inode. */
struct fg_tarball_stamp {
	unsigned long long dev, ino, size;
	long long mtime_ns, ctime_ns;
};
void fg_tarball_stamp_of(struct fg_tarball_stamp *out, const struct stat *st);

/* Adds the regular file at src as name (a safe relative path). Mode 0755 when
 * src has any execute bit, else 0644. expect (may be NULL) is the stamp the
 * caller recorded when it hashed the file; finish fails with FG_EHASH when
 * the file's stamp differs before or after its copy. Copies its strings. */
int fg_tarball_add_file(struct fg_tarball_writer *w, const char *name, const char *src,
			const struct fg_tarball_stamp *expect, struct fg_err *err);
/* Threads (default 1): 1 compresses on the calling thread; N >= 2 on N - 1
 * threads of their own while the calling thread reads, tars and hashes,
 * each zstd frame on one of them (no zstd workers: a frame's bytes depend
 * on its tar bytes alone, so the file is the same for any count; tested in
 * tests/integration/bundle_pack.sh and tests/unit/test_tarlanes.c). */
int fg_tarball_writer_set_threads(struct fg_tarball_writer *w, int threads, struct fg_err *err);
/* Adds len bytes of data as name with mode 0644 or 0755. Copies the data. */
int fg_tarball_add_mem(struct fg_tarball_writer *w, const char *name, const void *data, size_t len,
		       int mode, struct fg_err *err);
/* Writes the archive to path atomically (temporary file, fsync, rename) and
 * sets id to the sha256 of the uncompressed tar stream. Write-back of the
 * output is started as it grows, so the final fsync waits for little. */
int fg_tarball_writer_finish(struct fg_tarball_writer *w, const char *path, uint8_t id[32],
			     struct fg_err *err);
void fg_tarball_writer_free(struct fg_tarball_writer *w);

/* Reads every header and every byte without writing anything: validates each
 * member as extraction would, hashes file contents when hash is nonzero,
 * calls fn (may be NULL) per member and sets id (may be NULL) to the identity. */
int fg_tarball_scan(const char *archive, const struct fg_tarball_limits *lim, int hash,
		    fg_tarball_entry_fn fn, void *user, uint8_t id[32], struct fg_err *err);

/* The writer cuts a large file member's zstd frames at every this many
 * bytes of its data (docs/formats/bundle.md, "Frames and the seek table"):
 * chain states a reader can start from are at multiples of it. */
#define FG_TARBALL_FRAME_DATA ((unsigned long long)8 << 20)

/* A member's chain states as bundle.json lists them (docs/formats/
 * bundle.md, "Chain states"): the SHA-256 chaining state after every
 * `every` bytes of its content (a multiple of 64), n of them, 32 bytes
 * each. Nothing here trusts them: a lane that takes a member up from a
 * state must end where the next one (or the member's end) says, with that
 * state, or the lanes give up. */
struct fg_tarball_chain {
	const char *path;
	unsigned long long size, every;
	const uint8_t *states;
	size_t n;
};

/* How a reader works through an archive. */
struct fg_tarball_read_opts {
	const struct fg_tarball_limits *lim; /* NULL: the defaults */
	int hash;              /* hash member contents (fn sees e->hashed = 1) */
	const char *hash_only; /* with hash: only the member of this path */
	int id_thread;         /* the identity hash runs on a thread of its own
				* (wall time of one pass on two cores; the same
				* CPU time); not when it is paired with the
				* member digests instead (hash, no hash_only,
				* SHA-NI: one pass on this thread, less CPU) */
	int threads;           /* a scan that hashes every member and nothing
				* else (no identity, no hash_only) of an
				* archive with a seek table reads it in up to
				* 2 x threads lanes (lib/tarlanes.h); 0 = 1 */
	int *lanes;            /* may be NULL: set to the lanes read, 1 when
				* the archive was read from start to end */
	/* may be NULL: how many bytes of this file member the entry callback
	 * wants in e->content (0: none); one larger than that is not kept
	 * (e->content NULL), as fg_tarball_read_member refuses it. Keep does
	 * not change where the archive is read in lanes; the lanes call keep
	 * from their threads at once (it must be safe to). */
	size_t (*keep)(void *user, const char *path);
	/* may be NULL: members whose chain states the lanes may cut at
	 * (lib/tarlanes.h); read from bundle.json, trusted for nothing */
	const struct fg_tarball_chain *chains;
	size_t n_chains;
};

/* 1 when archive keeps the identity's chain states (docs/formats/bundle.md,
 * "Identity states") and lanes may read it: then a read that wants the
 * identity computes it in lanes, with no pass of its own; else 0. */
int fg_tarball_id_states(const char *archive);

/* The identity of archive (the sha256 of its tar stream, decompressed),
 * read from start to end on a thread of its own while the caller goes on
 * (reading the same file in other ways: extracting it in lanes, say).
 * fg_tarball_id_start takes the file's stamp (device, inode, size, mtime,
 * ctime) and starts; fg_tarball_id_end waits for the pass and frees it: 0
 * with id set when it read the whole archive and the stamp held from the
 * start until now, so that id names the bytes other readers of the file
 * saw meanwhile; else the pass's error, or FG_EHASH when the file changed. */
struct fg_tarball_idpass;
int fg_tarball_id_start(struct fg_tarball_idpass **out, const char *archive, struct fg_err *err);
int fg_tarball_id_end(struct fg_tarball_idpass *p, uint8_t id[32], struct fg_err *err);
/* Stops the pass at its next piece and frees it (NULL: nothing). */
void fg_tarball_id_cancel(struct fg_tarball_idpass *p);

/* fg_tarball_scan with every option. */
int fg_tarball_scan_opts(const char *archive, const struct fg_tarball_read_opts *o,
			 fg_tarball_entry_fn fn, void *user, uint8_t id[32], struct fg_err *err);

/* Extracts archive into dest, which must not exist yet (its parent must).
 * Member contents are hashed on the way (fn sees e->hashed = 1). On any
 * error nothing is left at dest or beside it. id may be NULL. */
int fg_tarball_extract(const char *archive, const char *dest, const struct fg_tarball_limits *lim,
		       fg_tarball_entry_fn fn, void *user, uint8_t id[32], struct fg_err *err);
/* fg_tarball_extract with every option (o->hash as asked, not always). */
int fg_tarball_extract_opts(const char *archive, const char *dest,
			    const struct fg_tarball_read_opts *o, fg_tarball_entry_fn fn, void *user,
			    uint8_t id[32], struct fg_err *err);

/* Streams the member named name to fn in chunks; FG_ENOTFOUND when absent. */
typedef int (*fg_tarball_data_fn)(void *user, const void *data, size_t len, struct fg_err *err);
int fg_tarball_stream_member(const char *archive, const char *name, fg_tarball_data_fn fn,
			     void *user, struct fg_err *err);
/* Reads the member named name into out (appending), refusing more than max bytes. */
int fg_tarball_read_member(const char *archive, const char *name, size_t max, struct fg_buf *out,
			   struct fg_err *err);

#endif
