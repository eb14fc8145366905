/* fuzz_oms.c - fuzz target for reading OpenSSF model signing statements
 * (lib/sign fg_oms_parse): never crash; what is accepted has non-empty file
 * names and writes back to a statement that parses to the same root digest. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sign.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_oms_model *m = NULL, *b = NULL;
	struct fg_buf st = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	size_t i;

	if (fg_oms_parse(&m, (const char *)data, size, &err)) {
		if (m || !err.msg[0])
			abort();
		return 0;
	}
	for (i = 0; i < m->n; i++)
		if (!m->files[i].name[0])
			abort();
	if (fg_oms_statement(&st, m, &err) || fg_oms_parse(&b, st.data, st.len, &err) ||
	    strcmp(b->root, m->root) || b->n != m->n || fg_oms_compare(m, b, &err))
		abort();
	fg_buf_release(&st);
	fg_oms_model_free(m);
	fg_oms_model_free(b);
	return 0;
}
