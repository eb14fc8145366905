/* fuzz_lock.c - fuzz target for buckets.lock reading: what is accepted must
 * write back to bytes that read back to the same bytes (canonical form). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_lock *a = NULL, *b = NULL;
	struct fg_buf x = FG_BUF_INIT, y = FG_BUF_INIT;
	struct fg_err err = { 0, "" };

	if (fg_lock_parse(&a, (const char *)data, size, "fuzz.lock", &err)) {
		if (a || !err.msg[0] || strchr(err.msg, '\n'))
			abort();
		return 0;
	}
	if (fg_lock_serialize(&x, a, &err) || fg_lock_parse(&b, x.data, x.len, "again", &err) ||
	    fg_lock_serialize(&y, b, &err) || x.len != y.len || memcmp(x.data, y.data, x.len))
		abort();
	fg_buf_release(&x);
	fg_buf_release(&y);
	fg_lock_free(a);
	fg_lock_free(b);
	return 0;
}
