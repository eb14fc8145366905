/* model.h - a Gemma 4 text checkpoint bound to the engine: the config and
 * every weight, mapped from safetensors (big matrices stay in the mapping;
 * norm vectors and layer scalars, a few KB, are widened to fp32 copies).
 *
 * Tensor names: "<prefix>embed_tokens.weight", "<prefix>layers.<i>.self_attn.
 * q_proj.weight", ... with prefix "model.language_model." (Gemma4ForConditional-
 * Generation checkpoints such as google/gemma-4-E4B) or "model."
 * (Gemma4ForCausalLM). A linear weight is either "<name>.weight" (BF16 or
 * F32) or compressed-tensors INT4 "<name>.weight_packed" + ".weight_scale" +
 * ".weight_shape". Shapes are checked against the config; a missing or
 * misshapen tensor is an error that names it and its file. A head pruned to a keepset
 * (fgpack bake prune-head: "lm_head.weight" or INT4 rows [K][hidden] beside
 * "lm_head.keep_ids" I32 [K]) scores only those K tokens; every other
 * token's logit is -inf (docs/formats/keepset.md). With attention_k_eq_v the
 * full layers have no v_proj (one in the file is ignored, as transformers
 * does): their struct fg_lin v is a copy of k, the same weights. */
#ifndef FG_ENGINE_MODEL_H
#define FG_ENGINE_MODEL_H

#include "engine/config.h"
#include "engine/cpu/ops.h"
#include "err.h"

struct fg_st_set;

/* A layer's mixture of experts (enable_moe_block; Gemma4TextRouter and
 * Gemma4TextExperts). Experts come either as transformers saves them, 3-D
 * "experts.gate_up_proj" [E][2 moe_inter][hidden] (gate rows first, then
 * up) and "experts.down_proj" [E][hidden][moe_inter] in BF16/F16/F32, bound
 * here as one row block per expert; or per expert as 2-D linears
 * "experts.<e>.{gate,up,down}_proj" (".weight", or INT4 ".weight_packed"
 * ...), the names vLLM's Gemma 4 loader takes for quantized experts. */
struct fg_g4_moe {
	struct fg_lin router;             /* router.proj [E][hidden] */
	float *router_scale;              /* router.scale [hidden] */
	float *expert_scale;              /* router.per_expert_scale [E] */
	struct fg_lin *gate, *up, *down;  /* [E] each: gate, up [moe_inter][hidden]; down [hidden][moe_inter] */
	float *pre_norm_2, *post_norm_1, *post_norm_2; /* pre_feedforward_layernorm_2, post_feedforward_layernorm_1/_2 [hidden] */
};

struct fg_g4_layer {
	int type;          /* FG_G4_SLIDING / FG_G4_FULL */
	int head_dim;      /* d: 256-style sliding, 512-style full */
	int inter;         /* MLP width */
	int kv_heads;      /* KV heads of this layer (and of its source's cache) */
	int kv_src;        /* layer whose KV cache this layer reads (itself if it owns one) */
	int v_is_k;        /* attention_k_eq_v full layer: no v_proj; v is k_proj's output, v aliases k */
	struct fg_lin q, k, v, o;         /* q [heads*d][hidden]; k, v [kv_heads*d][hidden] (absent when shared); o [hidden][heads*d] */
	struct fg_lin gate, up, down;     /* gate, up [inter][hidden]; down [hidden][inter] */
	struct fg_lin ple_gate, ple_proj; /* per_layer_input_gate [ple][hidden]; per_layer_projection [hidden][ple] */
	float *q_norm, *k_norm;           /* [d]; k_norm NULL when shared */
	float *bq, *bk, *bv, *bo;         /* attention_bias: q/k/v/o_proj.bias, else NULL; bv = bk when v_is_k */
	float *in_norm, *post_attn_norm, *pre_ffw_norm, *post_ffw_norm, *post_ple_norm; /* [hidden] */
	float scalar;                     /* layer_scalar */
	struct fg_g4_moe *moe;            /* NULL without enable_moe_block */
};

struct fg_g4_model {
	struct fg_g4_config cfg;
	struct fg_st_set *st;             /* owned: the mapping every fg_lin points into */
	struct fg_lin embed;              /* embed_tokens [vocab][hidden] */
	struct fg_lin head;               /* lm_head [vocab][hidden]; = embed when tied; [n_keep][hidden] when pruned */
	int32_t *keep;                    /* NULL, or lm_head.keep_ids [n_keep]: head row i scores token keep[i] */
	int n_keep;                       /* (fgpack bake prune-head); sorted, unique, < vocab */
	struct fg_lin ple_embed;          /* embed_tokens_per_layer [ple_vocab][layers*ple] */
	struct fg_lin ple_model_proj;     /* per_layer_model_projection [layers*ple][hidden] */
	float *ple_proj_norm;             /* per_layer_projection_norm [ple] */
	float *final_norm;                /* norm [hidden] */
	struct fg_g4_layer *layers;       /* [n_layers] */
	/* cfg.assistant only (a gemma4_assistant drafter, engine/draft.h):
	 * pre_projection [hidden][2 backbone], post_projection [backbone][hidden];
	 * with cfg.ordered_emb masked_embedding.centroids [n_centroids][hidden]
	 * and masked_embedding.token_ordering [vocab] (I64 in the file, here
	 * int32; every id < vocab). Its layers' kv_src is -1: each reads the
	 * target's cache of its type (fg_g4_kv_source of the target's config). */
	struct fg_lin pre_proj, post_proj, centroids;
	int32_t *ordering;
	char prefix[64];
	const char *dir;                  /* while binding only (borrowed, else NULL): the folder, for messages */
	const char *format;               /* "bf16", "f32", "int4-g<N>", "mixed" */
	char format_buf[32];
};

/* Loads dir/config.json, dir/generation_config.json when present
 * (fg_g4_gen_parse) and the checkpoint in dir (model.safetensors or a
 * sharded index). */
int fg_g4_model_load(struct fg_g4_model **out, const char *dir, struct fg_err *err);
void fg_g4_model_free(struct fg_g4_model *m);

/* The checks fg_g4_model_load makes, on a checkpoint already open: st
 * (borrowed; the tensors of the folder dir) against dir/config.json (and
 * dir/generation_config.json when present). Every tensor the model reads
 * must be there, in a dtype the engine reads and the shape the config
 * implies; tensors it does not read (vision/audio towers, anything else) are
 * not looked at. 0, or the error fg_g4_model_load would give: one line
 * naming the file (the shard holding the tensor, or dir for a missing one),
 * the tensor, the shape found and the shape expected. The same code as the
 * load, so a checkpoint this accepts the engine loads: the bakes (bake/)
 * call it before writing anything. */
int fg_g4_model_check(const char *dir, struct fg_st_set *st, struct fg_err *err);

#endif
