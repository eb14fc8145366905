/* fuzz_gencfg.c - fuzz target for generation_config.json (fg_g4_gen_parse)
 * applied over a small fixed config: any input is either refused with a
 * one-line message or gives a stop set of distinct ids >= 0, within
 * FG_G4_MAX_EOS, and a terminated one-line note. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/config.h"

static const char base[] =
	"{\"vocab_size\": 512, \"hidden_size\": 96, \"intermediate_size\": 128, \"num_hidden_layers\": 2, "
	"\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 32, \"global_head_dim\": 64, "
	"\"eos_token_id\": [1, 106], \"bos_token_id\": 2}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_g4_config c;
	struct fg_err err = { 0, "" };
	int i, k;

	if (fg_g4_config_parse(&c, base, sizeof(base) - 1, "config.json", &err))
		abort();
	if (fg_g4_gen_parse(&c, (const char *)data, size, "fuzz.json", &err)) {
		if (!err.msg[0] || strchr(err.msg, '\n'))
			abort();
		return 0;
	}
	if (!c.gen.present || c.n_eos < 0 || c.n_eos > FG_G4_MAX_EOS ||
	    memchr(c.gen.note, 0, sizeof(c.gen.note)) == NULL || strchr(c.gen.note, '\n'))
		abort();
	for (i = 0; i < c.n_eos; i++) {
		if (c.eos[i] < 0)
			abort();
		for (k = 0; k < i; k++)
			if (c.eos[k] == c.eos[i])
				abort();
	}
	return 0;
}
