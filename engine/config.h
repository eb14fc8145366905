/* config.h - the Gemma 4 text configuration the engine runs, parsed from a
 * checkpoint's config.json (text keys at the top level, or under
 * "text_config" as google/gemma-4-E4B ships them). Defaults are those of
 * transformers' Gemma4TextConfig; values the engine cannot run are refused
 * with a message naming the key. */
#ifndef FG_ENGINE_CONFIG_H
#define FG_ENGINE_CONFIG_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "err.h"

#define FG_G4_MAX_LAYERS 256
#define FG_G4_MAX_EOS 32
#define FG_G4_GEN_NOTE_MAX 320

enum { FG_G4_SLIDING = 0, FG_G4_FULL = 1 };

/* rope_type of one layer type (transformers' ROPE_INIT_FUNCTIONS; "default"
 * is Gemma4TextRotaryEmbedding's own, which ignores factor and
 * partial_rotary_factor). engine/rope.c computes the tables. */
enum { FG_ROPE_DEFAULT = 0, FG_ROPE_PROPORTIONAL, FG_ROPE_LINEAR, FG_ROPE_DYNAMIC, FG_ROPE_YARN,
       FG_ROPE_LLAMA3 };

struct fg_g4_rope {
	double theta;
	int proportional;   /* rope_type "proportional" (kept for fg_cpu_rope_freqs callers) */
	double partial;     /* partial_rotary_factor (proportional only; 1 otherwise) */
	double factor;      /* proportional, linear, dynamic, yarn, llama3: the scaling factor */
	int type;           /* FG_ROPE_* */
	double attention;   /* attention_factor: multiplies cos and sin (yarn); 1 = none */
	double orig_max;    /* original_max_position_embeddings (yarn, llama3) */
	int max_position;   /* max_position_embeddings (dynamic: its base at that length) */
	double beta_fast, beta_slow;   /* yarn */
	double low_freq, high_freq;    /* llama3: low_freq_factor, high_freq_factor */
};

/* What a checkpoint's generation_config.json (transformers' GenerationConfig,
 * which generate() uses instead of config.json's ids) says beyond the stop
 * set. Absent keys (and null) are -1 / NAN. */
struct fg_g4_gen {
	int present;            /* 1 when generation_config.json was read */
	int do_sample;          /* do_sample: 1 true, 0 false, -1 absent */
	int max_new_tokens;     /* max_new_tokens, -1 absent */
	int max_length;         /* max_length (prompt + new tokens), -1 absent */
	/* "" or one line: the keys the engine does not apply (sampling, beams,
	 * penalties, ...) with their values and why */
	char note[FG_G4_GEN_NOTE_MAX];
};

struct fg_g4_config {
	int vocab;              /* vocab_size */
	int hidden;             /* hidden_size */
	int inter;              /* intermediate_size */
	int n_layers;           /* num_hidden_layers */
	int n_heads;            /* num_attention_heads */
	int n_kv_heads;         /* num_key_value_heads: sliding layers (per_layer_config may say another) */
	int global_kv_heads;    /* full layers: per_layer_config, or with attention_k_eq_v
				 * num_global_key_value_heads, else num_key_value_heads */
	int k_eq_v;             /* attention_k_eq_v: full layers' values are k_proj's output (no v_proj) */
	int head_dim;           /* head_dim: sliding layers */
	int global_head_dim;    /* full layers: per_layer_config, global_head_dim or head_dim */
	int ple_dim;            /* hidden_size_per_layer_input; 0 = no per-layer embeddings */
	int ple_vocab;          /* vocab_size_per_layer_input */
	int sliding_window;     /* sliding_window */
	int n_kv_shared;        /* num_kv_shared_layers */
	int double_wide_mlp;    /* use_double_wide_mlp: shared layers' MLP is 2 x inter */
	int attn_bias;          /* attention_bias: q/k/v/o_proj carry a bias */
	int max_position;       /* max_position_embeddings */
	float eps;              /* rms_norm_eps */
	float softcap;          /* final_logit_softcapping; 0 = none */
	int tie_embeddings;     /* tie_word_embeddings */
	int bos;                /* bos_token_id, -1 if none */
	int n_eos;
	/* eos_token_id, the stop set: generation_config.json's when the folder
	 * has one (fg_g4_gen_parse), else config.json's top-level, else
	 * text_config's */
	int32_t eos[FG_G4_MAX_EOS];
	struct fg_g4_gen gen;   /* generation_config.json; gen.present 0 without one */
	/* Gemma4ForConditionalGeneration (a nested config): the image, audio and
	 * video placeholder ids, which Gemma4Model embeds as pad_token_id in a
	 * text-only forward (embedding and per-layer input alike) */
	int n_mm_ids;
	int32_t mm_ids[3];
	int32_t pad;            /* text_config pad_token_id; -1 if none */
	uint8_t layer_type[FG_G4_MAX_LAYERS]; /* FG_G4_SLIDING / FG_G4_FULL */
	struct fg_g4_rope rope[2]; /* by layer type */
	int quant_group;        /* quantization_config group size; 0 = not quantized */
	/* enable_moe_block (26B-A4B style): every layer adds a routed mixture
	 * of experts beside its dense MLP (docs/engine.md); 0 = none */
	int n_experts;          /* num_experts */
	int top_k;              /* top_k_experts, 1..n_experts */
	int moe_inter;          /* moe_intermediate_size: each expert's MLP width */
	/* Gemma4AssistantConfig (model_type "gemma4_assistant"): an MTP drafter
	 * whose text_config is parsed as above, every layer KV-shared (its layers
	 * read the target's caches: engine/draft.h). 0 for any other model. */
	int assistant;          /* 1: a gemma4_assistant config */
	int backbone;           /* backbone_hidden_size: the target's hidden size */
	int ordered_emb;        /* use_ordered_embeddings: the centroid-masked head */
	int n_centroids;        /* num_centroids (ordered_emb only) */
	int centroid_top_k;     /* centroid_intermediate_top_k (ordered_emb only);
				 * fg_g4_set_centroid_top_k may override it */
};

/* The most centroids a drafter's masked head keeps: the bound of the GPU
 * drafter's selection (kernels/fg_kernels.h FG_CENTROID_MAX_K). */
#define FG_G4_CENTROID_MAX_K 64

/* Parses config.json text; what names it in messages. */
int fg_g4_config_parse(struct fg_g4_config *c, const char *json, size_t len, const char *what,
		       struct fg_err *err);

/* Applies generation_config.json text (the file beside config.json) to c,
 * as transformers' from_pretrained does: the file's GenerationConfig is what
 * generate() uses, so its eos_token_id (an id or a list; null or absent: no
 * eos) REPLACES config.json's as the stop set. bos_token_id, when given,
 * replaces c->bos. Sets c->gen. A malformed file or key is FG_EFORMAT naming
 * what and the key; unknown keys are ignored (GenerationConfig keeps them). */
int fg_g4_gen_parse(struct fg_g4_config *c, const char *json, size_t len, const char *what,
		    struct fg_err *err);

/* Derived facts. */
int fg_g4_first_shared(const struct fg_g4_config *c);          /* first layer without own KV */
/* The id whose embedding token id is read with: pad for a placeholder. */
int32_t fg_g4_input_id(const struct fg_g4_config *c, int32_t id);
int fg_g4_layer_head_dim(const struct fg_g4_config *c, int i);
int fg_g4_layer_kv_heads(const struct fg_g4_config *c, int i);
/* 1 when layer i's values are its k_proj output (attention_k_eq_v, full layer). */
int fg_g4_layer_v_is_k(const struct fg_g4_config *c, int i);
int fg_g4_layer_inter(const struct fg_g4_config *c, int i);
/* The layer whose KV cache layer i reads: itself, or for a shared layer the
 * last non-shared layer of the same type. -1 if there is none. */
int fg_g4_kv_source(const struct fg_g4_config *c, int i);
/* The layer whose cache transformers hands an assistant drafter for layers
 * of type t (its shared_kv_states[t]): the last layer of that type below
 * fg_g4_first_shared (the store_full_length_kv layer). -1 if there is none. */
int fg_g4_type_source(const struct fg_g4_config *c, int type);

/* The largest centroid top-k assistant c's masked head takes,
 * min(num_centroids, FG_G4_CENTROID_MAX_K); 0 when c has no centroid head
 * (not an assistant, or use_ordered_embeddings off). */
int fg_g4_centroid_top_k_max(const struct fg_g4_config *c);
/* Overrides assistant c's centroid top-k (the challenge's CENTROID_TOP_K)
 * before a drafter is made from it (fg_draft_cpu_new, fg_g4_gpu_draft_new
 * size their buffers by it): top_k 0 keeps centroid_intermediate_top_k,
 * else 1..fg_g4_centroid_top_k_max. Only the drafts change, never the
 * tokens of speculative decoding. FG_EINVAL in one line naming top_k and
 * the bound, or that c has no centroid head (top_k > 0 only). */
int fg_g4_set_centroid_top_k(struct fg_g4_config *c, int top_k, struct fg_err *err);

#endif
