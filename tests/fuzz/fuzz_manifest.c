/* fuzz_manifest.c - fuzz target for the manifest parser and its component
 * and target extraction: any input either parses into consistent structures
 * or is refused with a one-line message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_manifest *m = NULL;
	struct fg_err err = { 0, "" };
	size_t i;

	if (fg_manifest_parse(&m, (const char *)data, size, "fuzz.json", &err) != 0) {
		if (m || !err.msg[0] || strchr(err.msg, '\n'))
			abort();
		return 0;
	}
	for (i = 0; i < m->n_components; i++) {
		const struct fg_component *c = &m->components[i];

		if (!c->key || !c->role || !c->source || !c->ref)
			abort();
		if (c->pin_sha256 && !fg_sha256_hex_valid(c->pin_sha256))
			abort();
		if (fg_manifest_component(m, c->key) == NULL)
			abort();
	}
	for (i = 0; i < m->n_targets; i++)
		if (m->targets[i].component >= (int)m->n_components)
			abort();
	fg_manifest_free(m);
	return 0;
}
