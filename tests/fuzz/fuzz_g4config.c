/* fuzz_g4config.c - fuzz target for the engine's config.json parser: any input
 * is either refused with a one-line message or gives a config whose derived
 * structure is self-consistent (every layer has a KV source of its own type
 * at or before it, head dims even and positive; a gemma4_assistant: every
 * layer reads the target's KV, and the ordered head's sizes fit). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_g4_config c;
	struct fg_err err = { 0, "" };
	int i;

	if (fg_g4_config_parse(&c, (const char *)data, size, "fuzz.json", &err)) {
		if (!err.msg[0] || strchr(err.msg, '\n'))
			abort();
		return 0;
	}
	if (c.n_layers < 1 || c.n_layers > FG_G4_MAX_LAYERS || c.head_dim <= 0 || c.head_dim % 2 ||
	    c.global_head_dim <= 0 || c.global_head_dim % 2 || c.n_heads % c.n_kv_heads ||
	    c.layer_type[c.n_layers - 1] != FG_G4_FULL)
		abort();
	if (c.assistant) {
		if (fg_g4_first_shared(&c) != 0 || c.ple_dim || c.n_experts || c.backbone < 1 ||
		    (c.ordered_emb && (c.n_centroids < 1 || c.vocab % c.n_centroids || c.centroid_top_k < 1 ||
				       c.centroid_top_k > c.n_centroids || c.centroid_top_k > 64)))
			abort();
		for (i = 0; i < c.n_layers; i++)
			if (fg_g4_kv_source(&c, i) != -1)
				abort();
		return 0;
	}
	for (i = 0; i < c.n_layers; i++) {
		int s = fg_g4_kv_source(&c, i);

		if (s < 0 || s > i || c.layer_type[s] != c.layer_type[i] || s >= fg_g4_first_shared(&c))
			abort();
	}
	return 0;
}
