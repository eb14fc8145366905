/* fuzz_tree.c - fuzz target for Hub tree listings (bucket and model shapes)
 * and Link headers: whatever parses must hold only safe, unique paths with
 * sane sizes once finished. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "hub.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int model;
	char *s;

	for (model = 0; model < 2; model++) {
		struct fg_hub_list l;
		size_t i;

		memset(&l, 0, sizeof(l));
		if (fg_hub_parse_tree(&l, (const char *)data, size, model, "fuzz", NULL) == 0 &&
		    fg_hub_list_finish(&l, "", "fuzz", NULL) == 0) {
			for (i = 0; i < l.n; i++) {
				if (!fg_path_is_safe_rel(l.files[i].path) ||
				    l.files[i].size > FG_HUB_MAX_FILE_SIZE)
					abort();
				if (i && strcmp(l.files[i - 1].path, l.files[i].path) >= 0)
					abort();
			}
		}
		fg_hub_list_release(&l);
	}
	s = malloc(size + 1);
	if (s) {
		struct fg_buf out = FG_BUF_INIT;

		memcpy(s, data, size);
		s[size] = '\0';
		fg_hub_link_next(&out, s, "http://127.0.0.1:1/api/buckets/a/b/tree?recursive=true");
		fg_buf_release(&out);
		free(s);
	}
	return 0;
}
