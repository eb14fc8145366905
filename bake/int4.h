/* int4.h - bake a Gemma 4 checkpoint (BF16, F16 or F32 weights) into INT4
 * weights that vLLM loads (compressed-tensors "pack-quantized", W4A16,
 * symmetric, per group).
 *
 * The quantizer reproduces compressed-tensors' own arithmetic on bf16
 * tensors (docs/formats/int4.md has the derivation and sources); F16 and F32
 * weights are widened to fp32 exactly and go through the same steps. For each
 * group of `group` consecutive input columns of a row, with a = max |w|:
 *   s = bf16(a / 7.5)            fp32 division, rounded to bf16 (nearest even);
 *                                s = 2^-7 (bf16 eps) when that gives 0
 *   q = round_half_even(clamp(bf16(w / s), -8, 7))
 * stored as
 *   <m>.weight_packed  I32  [out, in/8]      nibble i of word j = q[8j+i] + 8
 *   <m>.weight_scale   BF16 [out, in/group]  s
 *   <m>.weight_shape   I64  [2]              [out, in]
 * so vLLM dequantizes w' = q · s. Non-finite weights are refused. */
#ifndef FG_BAKE_INT4_H
#define FG_BAKE_INT4_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "sha256.h"

/* Quantizes rows × cols bf16 weights (little-endian bytes, row-major) with
 * the given group (a multiple of 8 dividing cols). packed receives
 * rows × cols/2 bytes (little-endian int32 words), scales rows × cols/group
 * bf16 (little-endian). Returns 0, or -1 when a weight is NaN or ±Inf, with
 * *bad set to the element's index. Pure function of its inputs: any split of
 * the rows gives the same bytes. */
int fg_int4_quant_rows(uint8_t *packed, uint8_t *scales, const uint8_t *w, size_t rows,
		       size_t cols, size_t group, size_t *bad);

/* The same for weights of dtype FG_ST_BF16, FG_ST_F16 or FG_ST_F32
 * (lib/safetensors.h; 2, 2 or 4 bytes an element). F16 and F32 weights are
 * widened to fp32 exactly and go through the same arithmetic as bf16 ones
 * (s = bf16(a / 7.5), q = round_half_even(clamp(bf16(w / s), -8, 7)), w the
 * exact fp32 value), so a weight that is bf16-representable gives the same
 * bytes whichever of the three dtypes holds it. BF16 runs fg_int4_quant_rows. */
int fg_int4_quant_rows_dtype(uint8_t *packed, uint8_t *scales, const uint8_t *w, int dtype,
			     size_t rows, size_t cols, size_t group, size_t *bad);

/* The same with the plain C reference kernel whatever the CPU has: the
 * dispatched one (AVX2 where the CPU has it, unless FGPACK_NO_SIMD is set)
 * must give the same bytes; tests compare them. fg_int4_simd says whether the
 * dispatched kernel is a SIMD one. */
int fg_int4_quant_rows_scalar(uint8_t *packed, uint8_t *scales, const uint8_t *w, size_t rows,
			      size_t cols, size_t group, size_t *bad);
int fg_int4_simd(void);

/* 1 when a checkpoint tensor name is a Linear weight of the Gemma 4 text
 * decoder that the bake quantizes (attention q/k/v/o, MLP gate/up/down,
 * per-layer input gate and projection, the per-layer model projection), with
 * either the multimodal prefix "model.language_model." or the text-only
 * "model.". */
int fg_int4_is_target(const char *name);

struct fg_int4_opts {
	int group;                /* 32, 64 or 128 */
	int head_int4;            /* 1: write an untied quantized lm_head */
	int threads;              /* quantizer threads, >= 1; output does not depend on it */
	uint64_t max_shard_bytes; /* 0: FG_INT4_SHARD_BYTES */
	int no_sync;              /* 1: skip fsync of the output files (not durable) */
	const char *store;        /* the fgpack store whose stamps name inputs (lib/store.h);
				     NULL: the default one, when it exists */
	int rehash;               /* 1: hash every input, trusting no stamp */
	int ignore_misfits;       /* 1: a decoder Linear whose input width is not a multiple of
				     group is passed through and listed in quantization_config's
				     ignore (compressed-tensors' own advice), instead of refused */
};

#define FG_INT4_SHARD_BYTES ((uint64_t)5000000000ULL)

/* What a bake made. */
struct fg_int4_report {
	char tree_digest[FG_SHA256_HEX_LEN + 1]; /* over every output file */
	char statement[4096];                    /* path of the provenance statement */
	size_t n_quantized;                      /* Linear weights turned into INT4 */
	size_t n_passed;                         /* tensors copied unchanged */
	size_t n_misfit;                         /* of them, Linears left by ignore_misfits */
	size_t n_files_in, n_files_out;
	uint64_t bytes_in;                       /* bytes of all input files */
	size_t n_by_stamp;                       /* inputs whose digest is their store blob's name */
	uint64_t bytes_by_stamp;                 /* their bytes (read, not hashed) */
	size_t n_by_seen;                        /* inputs whose digest is their seen record's */
	uint64_t bytes_by_seen;                  /* (lib/store.h: hashed before, unchanged since) */
	uint64_t bytes_out;
};

/* Reads the checkpoint folder src (config.json + safetensors, single or
 * sharded), writes the INT4 checkpoint to out (which must not exist, or be an
 * empty folder) through a temporary folder beside it, renamed only when
 * complete, then writes the in-toto/SLSA statement to "<out>.intoto.json".
 * Streams tensor by tensor. Errors name the file and tensor. Before writing
 * anything, src gets the engine loader's own check (fg_g4_model_check,
 * engine/model.h): a checkpoint fgpack run would refuse (a tensor the model
 * reads missing, or of a dtype or shape other than config.json implies) is
 * refused; tensors the model does not read pass through unchecked.
 * An input that is a hard link to a blob of the store, unchanged since the
 * store last checked it (fg_store_stamp_match), takes the blob's name as its
 * digest instead of being hashed; the statement says which inputs did. */
int fg_int4_bake(const char *src, const char *out, const struct fg_int4_opts *opts,
		 struct fg_int4_report *rep, struct fg_err *err);

/* The shards of a finished writer made with fg_st_writer_new_states (every
 * FG_STORE_STATES_EVERY), now in dir and still as the writer left them, get
 * the store's seen records and chain states (fg_store_seen_note_written):
 * a pack of dir names them without hashing them again. A cache: failures
 * are ignored. For the bakes' output folders. */
struct fg_store;
struct fg_st_writer;
void fg_bake_note_shards(const struct fg_store *st, const struct fg_st_writer *w, const char *dir);

#endif
