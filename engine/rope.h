/* rope.h - the RoPE inverse-frequency table of one layer type, as
 * transformers 5.17 computes it for Gemma 4 (Gemma4TextRotaryEmbedding and
 * modeling_rope_utils' ROPE_INIT_FUNCTIONS), in the same fp32 steps. The
 * attention factor (yarn) that multiplies cos and sin is parsed into
 * struct fg_g4_rope's attention by engine/config.c. */
#ifndef FG_ENGINE_ROPE_H
#define FG_ENGINE_ROPE_H

#include "engine/config.h"

/* inv[d/2] for head dim d. Positions the engine serves stay below
 * max_position_embeddings, where "dynamic" keeps its table of that length
 * (transformers recomputes it only for longer sequences). */
void fg_g4_rope_table(float *inv, const struct fg_g4_rope *r, int d);

#endif
