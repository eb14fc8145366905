/* prune_head.h - cut a checkpoint's LM head to the rows of a keepset.
 *
 * The output folder holds every tensor of the input unchanged (the input
 * embedding stays full: every token can still be read), except that
 *   lm_head.weight    [K, hidden]  rows keep_ids[0..K) of the head (of the tied
 *                                  embedding when the head is tied), same dtype
 *   lm_head.keep_ids  I32 [K]      row i of lm_head.weight is token keep_ids[i]
 * and config.json says so in "lm_head_keepset" (with tie_word_embeddings
 * false), so no loader can take the K-row head for a full one: one that
 * ignores the new key still fails on the shape of lm_head.weight (INT4 heads:
 * see fg_prune_head). The keepset
 * file is copied beside it as keepset.json, other files are copied as they
 * are, and OUT.intoto.json records inputs and outputs by sha256. */
#ifndef FG_BAKE_PRUNE_HEAD_H
#define FG_BAKE_PRUNE_HEAD_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct fg_prune_report {
	int32_t k, full_vocab;
	uint64_t hidden;
	int tied;                 /* 1: the rows came from the input embedding */
	int head_int4;            /* 1: the pruned head is INT4 (pack-quantized) */
	char head_source[256];    /* tensor the rows came from */
	char statement[4096];     /* path of the provenance statement */
	size_t n_tensors_out;
	uint64_t bytes_out;
	size_t n_by_store;        /* tensor files named by their store blob, not hashed */
	uint64_t bytes_by_store;
	size_t n_by_seen;         /* named by their seen record (hashed before, unchanged since) */
	uint64_t bytes_by_seen;
};

/* Writes out (which must not exist, or be an empty folder) from the model
 * folder src and the keepset file at keepset. The keepset's full_vocab must
 * equal the head's rows. Before anything is written, src gets bake int4's
 * check (fg_g4_model_check, engine/model.h): a checkpoint fgpack run would
 * refuse is refused.
 * head_int4: quantize the K rows (a BF16, F16 or F32 head) into compressed-tensors
 * pack-quantized lm_head.weight_packed / weight_scale / weight_shape with the
 * group size of the model's quantization_config (which must exist: a model
 * from fgpack bake int4), and drop "lm_head" from its ignore list. A head
 * that is already INT4 (lm_head.weight_packed) has its packed rows and scales
 * cut and stays INT4 either way. */
int fg_prune_head(const char *src, const char *keepset, const char *out, int head_int4, int no_sync,
		  struct fg_prune_report *rep, struct fg_err *err);
/* The same, with the store whose stamps may name inputs: store_dir, else the
 * default store when it exists (fg_store_open_existing); an input that is a
 * hard link to one of its blobs, unchanged since the store checked it, is
 * listed in the statement by the blob's name ("fgpack_digest": "store")
 * instead of being hashed, as bake int4 does. rehash: hash every input.
 * (fg_prune_head is this with the default store and rehash 0.) */
int fg_prune_head_in(const char *src, const char *keepset, const char *out, int head_int4, int no_sync,
		     const char *store_dir, int rehash, struct fg_prune_report *rep, struct fg_err *err);

#endif
