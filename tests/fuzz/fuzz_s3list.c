/* fuzz_s3list.c - fuzz target for the ListObjectsV2 XML reader in lib/s3:
 * never crash; a failure leaves a message; every object read has a key. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_s3_list l = { 0 };
	struct fg_buf tok = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	int truncated = -1;
	size_t i;

	if (fg_s3_parse_list(&l, &truncated, &tok, (const char *)data, size, &err)) {
		if (!err.msg[0])
			abort();
	} else {
		if (truncated != 0 && truncated != 1)
			abort();
		for (i = 0; i < l.n; i++)
			if (!l.items[i].key || !l.items[i].key[0])
				abort();
	}
	fg_s3_list_clear(&l);
	fg_buf_release(&tok);
	return 0;
}
