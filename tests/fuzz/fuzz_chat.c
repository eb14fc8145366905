/* fuzz_chat.c - fuzz target for chat prompts (fg_chat_render): any JSON
 * input, rendered in Gemma 4's and Gemma 3's turn formats, is either refused
 * with a one-line message naming the messages and nothing appended, or gives
 * a NUL-terminated prompt that opens no fewer turns than it has messages to
 * place and ends with the opening of the model's turn. Without a format
 * every input is refused. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/chat.h"
#include "json.h"

static size_t count(const char *s, size_t n, const char *what)
{
	size_t k = 0, lw = strlen(what);
	const char *p = s, *end = s + n;

	while (p < end && (p = memmem(p, (size_t)(end - p), what, lw))) {
		k++;
		p += lw;
	}
	return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum fg_chat_format fmts[] = { FG_CHAT_GEMMA4, FG_CHAT_GEMMA3, FG_CHAT_NONE };
	cJSON *j = NULL;
	struct fg_err err = { 0, "" };
	size_t f;

	if (fg_json_parse(&j, (const char *)data, size, "fuzz.json", &err))
		return 0;
	for (f = 0; f < sizeof(fmts) / sizeof(fmts[0]); f++) {
		struct fg_buf out = FG_BUF_INIT;
		const char *tail = fmts[f] == FG_CHAT_GEMMA4 ? "<|turn>model\n" : "<start_of_turn>model\n";
		size_t lt = strlen(tail);
		int rc;

		memset(&err, 0, sizeof(err));
		rc = fg_chat_render(&out, fmts[f], j, &err);
		if (rc) {
			if (out.len || !err.msg[0] || strchr(err.msg, '\n') ||
			    (rc == FG_EINVAL && strncmp(err.msg, "messages", 8) && strncmp(err.msg, "the tokenizer", 13)))
				abort();
		} else {
			if (fmts[f] == FG_CHAT_NONE || !out.data || out.data[out.len] != '\0' || out.len < lt ||
			    memcmp(out.data + out.len - lt, tail, lt))
				abort();
			/* at least one opening per turn: the model's, and one for the
			 * first message (a user turn or the system turn) */
			if (count(out.data, out.len, fmts[f] == FG_CHAT_GEMMA4 ? "<|turn>" : "<start_of_turn>") < 2)
				abort();
		}
		fg_buf_release(&out);
	}
	cJSON_Delete(j);
	return 0;
}
