/* fuzz_ref.c - fuzz target for reference parsing: whatever parses must format
 * back to a reference that parses to the same thing, and build URLs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_ref *r = NULL, *r2 = NULL;
	struct fg_buf b = FG_BUF_INIT;
	char *s = malloc(size + 1);

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (fg_ref_parse(&r, s, NULL) == 0) {
		if (fg_ref_format(&b, r, NULL) == 0) {
			if (fg_ref_parse(&r2, b.data, NULL) != 0 || r2->kind != r->kind)
				abort();
			if (r->kind == FG_REF_BUCKET || r->kind == FG_REF_MODEL)
				if (strcmp(r->ns, r2->ns) || strcmp(r->name, r2->name) ||
				    strcmp(r->path, r2->path))
					abort();
		}
		fg_buf_reset(&b);
		fg_ref_owner(&b, r, NULL);
		fg_buf_reset(&b);
		fg_url_bucket_tree(&b, "http://h", r, r->path, NULL);
		fg_url_bucket_resolve(&b, "http://h", r, r->path, NULL);
		fg_url_model_tree(&b, "http://h", r, NULL, r->path, NULL);
		fg_url_model_resolve(&b, "http://h", r, NULL, r->path, NULL);
		fg_ref_rel(r, "a/b/c");
	}
	fg_url_origin(&b, s, NULL);
	fg_ref_free(r);
	fg_ref_free(r2);
	fg_buf_release(&b);
	free(s);
	return 0;
}
