/* fuzz_chat.c - fuzz target for chat prompts (fg_chat_render): any JSON
 * input, rendered in Gemma 4's and Gemma 3's turn formats, is either refused
 * with a one-line message naming the messages and nothing appended, or gives
 * a NUL-terminated prompt that opens no fewer turns than its messages make
 * (so no message's text went missing) and ends with the opening of the
 * model's turn. Without a format
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

static const char *role(const cJSON *m)
{
	return fg_json_str(m, "role");
}

static size_t turns4(const cJSON *ms)
{
	const cJSON *m;
	size_t n = 0;
	int prev_model = 0;

	cJSON_ArrayForEach(m, ms) {
		int model = !strcmp(role(m), "assistant");

		n += !(model && prev_model);
		prev_model = model;
	}
	return n;
}

static size_t turns3(const cJSON *ms)
{
	const cJSON *m;
	size_t n = 0;

	cJSON_ArrayForEach(m, ms)
		n += !strcmp(role(m), "user") || !strcmp(role(m), "assistant");
	return n;
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
			/* an opening per turn at least (text may hold more): Gemma 4,
			 * one per message but assistant runs; Gemma 3, one per user or
			 * assistant message (system text is folded); and the model's */
			if (count(out.data, out.len, fmts[f] == FG_CHAT_GEMMA4 ? "<|turn>" : "<start_of_turn>") <
			    (fmts[f] == FG_CHAT_GEMMA4 ? turns4(j) : turns3(j)) + 1)
				abort();
		}
		fg_buf_release(&out);
	}
	cJSON_Delete(j);
	return 0;
}
