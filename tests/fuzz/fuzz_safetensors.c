/* fuzz_safetensors.c - libFuzzer target for the safetensors reader: any bytes
 * must be refused cleanly or yield tensors whose spans lie inside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_st_set *s = NULL;
	struct fg_err err;
	size_t i, sum = 0;

	if (fg_st_open_mem(&s, data, size, "fuzz", &err))
		return 0;
	for (i = 0; i < fg_st_count(s); i++) {
		const struct fg_st_tensor *t = fg_st_at(s, i);
		const uint8_t *p = t->data;

		if (p < data || p + t->nbytes > data + size || fg_st_find(s, t->name) != t)
			abort();
		if (t->nbytes)
			sum += p[0] + p[t->nbytes - 1];
	}
	(void)sum;
	fg_st_free(s);
	return 0;
}
