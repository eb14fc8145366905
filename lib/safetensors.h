/* safetensors.h - read and write safetensors checkpoints (single file or
 * sharded through model.safetensors.index.json), validating every byte of
 * structure before any of it is trusted.
 *
 * File layout: 8-byte little-endian header length N, N bytes of JSON
 *   {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}
 * then the data region; offsets are relative to the start of the data region.
 *
 * Reading
 *   struct fg_st_set *set;
 *   if (fg_st_open(&set, "ckpt/", &err)) ...;      // a .safetensors file, an
 *                                                  // index .json, or a folder
 *   const struct fg_st_tensor *t = fg_st_find(set, "model.norm.weight");
 *   // t->dtype, t->ndim, t->shape[], t->data (borrowed, read-only), t->nbytes
 *   for (i = 0; i < fg_st_count(set); i++) fg_st_at(set, i);   // file order
 *   fg_st_free(set);
 *
 * Files are mmapped read-only; tensor data pointers stay valid until
 * fg_st_free. fg_st_open refuses, with a message naming the file (and the
 * tensor where there is one): a header length that does not fit the file or
 * exceeds FG_ST_HEADER_MAX, JSON that is not an object of tensor entries,
 * unknown dtypes, more than FG_ST_MAX_DIMS dimensions, shape × dtype size
 * (checked arithmetic) different from the byte span, offsets out of bounds,
 * not ordered, overlapping, or leaving gaps (the tensors must tile the whole
 * data region exactly), and duplicate names (within a file, or across the
 * shards of a set). A sharded set must agree with its index: every tensor in
 * weight_map is in the shard it names and every tensor of every shard is in
 * weight_map; shard names must be safe relative paths.
 *
 * Writing (streaming: memory stays small whatever the checkpoint size)
 *   struct fg_st_desc d[] = {{"a", FG_ST_BF16, 2, {4, 8}}, ...};
 *   fg_st_writer_new(&w, "out/", d, n, max_shard_bytes, metadata, &err);
 *   fg_st_writer_write(w, bytes, len, &err);  // tensor data in the order of
 *                                             // d[], in any number of pieces
 *   fg_st_writer_finish(w, &err);             // checks every byte arrived
 *   fg_st_writer_free(w);
 * max_shard_bytes 0 writes one file "model.safetensors"; otherwise tensors are
 * assigned to shards in order, a new shard starting when the next tensor
 * would push the current one past the limit, and when there is more than one
 * shard they are named "model-0000i-of-0000n.safetensors" beside a
 * model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map"}).
 * Headers are canonical JSON (keys sorted, compact) padded with spaces to a
 * multiple of 8 bytes, so output bytes depend only on the inputs. */
#ifndef FG_SAFETENSORS_H
#define FG_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "bf16.h"
#include "err.h"
#include "sha256.h"

#define FG_ST_MAX_DIMS 8
/* Largest header accepted (the reference implementation's limit too). */
#define FG_ST_HEADER_MAX ((uint64_t)100 * 1000 * 1000)
#define FG_ST_INDEX_NAME "model.safetensors.index.json"

enum fg_st_dtype {
	FG_ST_BOOL,
	FG_ST_U8,
	FG_ST_I8,
	FG_ST_F8_E4M3,
	FG_ST_F8_E5M2,
	FG_ST_I16,
	FG_ST_U16,
	FG_ST_F16,
	FG_ST_BF16,
	FG_ST_I32,
	FG_ST_U32,
	FG_ST_F32,
	FG_ST_I64,
	FG_ST_U64,
	FG_ST_F64,
	FG_ST_NDTYPES
};

/* "BF16" etc.; NULL for an unknown value. */
const char *fg_st_dtype_name(int dtype);
/* The dtype named s, or -1. */
int fg_st_dtype_parse(const char *s);
/* Bytes per element (0 for an unknown value). */
size_t fg_st_dtype_size(int dtype);

/* Element i of a BF16, F16 or F32 array at data (little-endian, unaligned)
 * as a float: exact for all three. */
static inline float fg_st_f32_at(const void *data, int dtype, size_t i)
{
	const uint8_t *p = (const uint8_t *)data;
	float f;

	if (dtype == FG_ST_BF16)
		return fg_bf16_to_f32(fg_le16(p + 2 * i));
	if (dtype == FG_ST_F16)
		return fg_f16_to_f32(fg_le16(p + 2 * i));
	memcpy(&f, p + 4 * i, 4);
	return f;
}

struct fg_st_tensor {
	const char *name;             /* borrowed from the set */
	int dtype;                    /* enum fg_st_dtype */
	int ndim;                     /* 0 (a scalar) .. FG_ST_MAX_DIMS */
	uint64_t shape[FG_ST_MAX_DIMS];
	uint64_t nelem;               /* product of shape (1 for a scalar) */
	const void *data;             /* borrowed, read-only, in the mapping */
	size_t nbytes;                /* nelem × dtype size */
	const char *file;             /* path of the file holding it (borrowed) */
	uint64_t file_offset;         /* absolute offset of data in that file */
};

struct fg_st_set; /* opaque: one or more mapped files */

/* Opens path: a .safetensors file, a model.safetensors.index.json (or any
 * .json index), or a folder holding either (index preferred, else
 * model.safetensors). Validates everything before returning. */
int fg_st_open(struct fg_st_set **out, const char *path, struct fg_err *err);

/* Parses a single safetensors image held in memory (borrowed; must outlive
 * the set). what names it in messages. Used by the fuzz target and tests. */
int fg_st_open_mem(struct fg_st_set **out, const void *data, size_t len, const char *what,
		   struct fg_err *err);

void fg_st_free(struct fg_st_set *set);

/* Number of tensors; tensor i in file order (shards in index order of their
 * file names, then by data offset). Borrowed. */
size_t fg_st_count(const struct fg_st_set *set);
const struct fg_st_tensor *fg_st_at(const struct fg_st_set *set, size_t i);
/* Tensor by exact name, or NULL. O(log n). */
const struct fg_st_tensor *fg_st_find(const struct fg_st_set *set, const char *name);

/* Files of the set (1 for a single file), in order; borrowed paths. */
size_t fg_st_nfiles(const struct fg_st_set *set);
const char *fg_st_file(const struct fg_st_set *set, size_t i);
/* File i's whole mapped image (fg_st_open's mapping), when st (an fstat of
 * the caller's own open of that path) names the same inode with the same
 * size; else NULL (not mapped, or the path now names another file). */
const uint8_t *fg_st_file_image(const struct fg_st_set *set, size_t i, const struct stat *st);
/* Drops the whole pages inside [p, p + len) of a mapping from the resident
 * set (they read back from the file if touched again). */
void fg_st_release_addr(const void *p, size_t len);
/* The __metadata__ value for key in the first file, or NULL. */
const char *fg_st_metadata(const struct fg_st_set *set, const char *key);

/* Drops the pages of t's data from this process's resident set (the data
 * stays readable: touching it again reads it back from the file). Streaming
 * consumers call it after each tensor so RSS stays near one tensor. */
void fg_st_release(const struct fg_st_set *set, const struct fg_st_tensor *t);
/* The same for bytes [off, off + len) of t's data (clipped to the tensor). */
void fg_st_release_span(const struct fg_st_set *set, const struct fg_st_tensor *t, size_t off,
			size_t len);

/* What the writer needs to know about a tensor before its data arrives. */
struct fg_st_desc {
	const char *name;             /* borrowed until fg_st_writer_new returns */
	int dtype;
	int ndim;
	uint64_t shape[FG_ST_MAX_DIMS];
};

/* Bytes the tensor described by d takes, with checked arithmetic. */
int fg_st_desc_nbytes(const struct fg_st_desc *d, size_t *out, struct fg_err *err);

struct fg_st_writer;

/* Creates the output under dir (which must exist): validates descriptors
 * (known dtype, rank, unique non-empty names other than "__metadata__"),
 * plans shards, writes the first header. metadata: NULL or an object of
 * string values stored as __metadata__ in every shard (borrowed). */
int fg_st_writer_new(struct fg_st_writer **out, const char *dir, const struct fg_st_desc *descs,
		     size_t n, uint64_t max_shard_bytes, const cJSON *metadata, struct fg_err *err);
/* The same, also keeping each shard's SHA-256 chain state after every
 * `every` bytes of it (a multiple of 64; 0: none), as pack and the store
 * keep them (docs/formats/bundle.md, "Chain states"): the shards are then
 * hashed on own contexts (lib/sha256.h), a few percent slower than
 * OpenSSL's. fg_st_writer_file_states gives them. */
int fg_st_writer_new_states(struct fg_st_writer **out, const char *dir,
			    const struct fg_st_desc *descs, size_t n, uint64_t max_shard_bytes,
			    const cJSON *metadata, uint64_t every, struct fg_err *err);
/* Appends len bytes of tensor data, continuing across tensors and shards in
 * descriptor order. Refuses more bytes than the descriptors announce. */
int fg_st_writer_write(struct fg_st_writer *w, const void *data, size_t len, struct fg_err *err);
/* Checks all data arrived, flushes, fsyncs and closes every file, writes the
 * index when sharded. */
int fg_st_writer_finish(struct fg_st_writer *w, struct fg_err *err);
/* Frees w; files of an unfinished writer are removed. Accepts NULL. */
void fg_st_writer_free(struct fg_st_writer *w);
/* Skips the fsync of each finished shard (scratch output, benchmarks): a
 * power loss may then lose data the caller believes written. */
void fg_st_writer_no_sync(struct fg_st_writer *w);
/* Shards are hashed on a thread of the writer's own. By default
 * fg_st_writer_write returns once its bytes are written and hashed. After
 * fg_st_writer_async it returns once they are written: pieces of 64 KiB or
 * more are then borrowed until fg_st_writer_wait(w, m) returns for the m that
 * fg_st_writer_mark gave after the write (smaller pieces are copied). A mark
 * covers what was written since the mark before it (and, on each hashing
 * thread it names, everything before); fg_st_writer_passed says without
 * waiting whether the thread(s) are past it; fg_st_writer_drain waits for
 * everything written. */
void fg_st_writer_async(struct fg_st_writer *w);
uint64_t fg_st_writer_mark(struct fg_st_writer *w);
int fg_st_writer_wait(struct fg_st_writer *w, uint64_t mark, struct fg_err *err);
int fg_st_writer_passed(const struct fg_st_writer *w, uint64_t mark);
int fg_st_writer_drain(struct fg_st_writer *w, struct fg_err *err);
/* Hashes the shards on up to n threads (at most 2; 1 by default): each shard
 * opened from now on goes to the thread given the fewest bytes so far, so
 * the digests of big shards run side by side. */
int fg_st_writer_hashers(struct fg_st_writer *w, int n, struct fg_err *err);
/* Number of shard files the writer plans (valid after _new). */
size_t fg_st_writer_nfiles(const struct fg_st_writer *w);
/* Shard i after a successful finish: its file name inside dir (borrowed),
 * size in bytes and sha256 (lowercase hex), computed while writing so the
 * caller need not read the files back. The index file is not included. */
int fg_st_writer_file(const struct fg_st_writer *w, size_t i, const char **name, uint64_t *size,
		      char sha256_hex[FG_SHA256_HEX_LEN + 1]);
/* Shard i after a successful finish: its chain states (borrowed until
 * fg_st_writer_free; *n 0 when none are kept) and, when st is not NULL, its
 * fstat taken after its last byte was written (and fsynced), before close. */
int fg_st_writer_file_states(const struct fg_st_writer *w, size_t i, const uint8_t **states,
			     size_t *n, struct stat *st);

#endif
