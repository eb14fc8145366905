/* fuzz_request.c - fuzz target for the HTTP server's request bodies
 * (POST /v1/completions and /v1/chat/completions, fg_server_parse_request):
 * the body is parsed as the server does and checked against limits chosen by
 * the first byte (chat or not, a tokenizer or none, the chat format, a small
 * or large context, a generation_config default or none). A refusal is
 * FG_EINVAL or FG_ENOMEM with a one-line message and a known field name or
 * none; a request taken has ids in the vocabulary, a prompt shorter than
 * the context, 1 <= max_tokens and prompt + max_tokens within the context,
 * and non-empty stop strings with the hold-back one short of the longest.
 * The tokenizer is tests/fixtures/tokenizer_tiny.json (from the working
 * directory or $FG_TOP). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/server.h"
#include "json.h"

static struct fg_tokenizer *tiny;

static void load_tiny(void)
{
	const char *top = getenv("FG_TOP");
	char path[4096];

	snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer_tiny.json", top ? top : ".");
	if (fg_tokenizer_load(&tiny, path, NULL)) {
		fprintf(stderr, "fuzz_request: cannot load %s\n", path);
		abort();
	}
}

/* generation_config.json's max_new_tokens (ud: the value), or max_length
 * 24 (ud NULL) */
static long long gen_new(const void *ud, size_t n_prompt)
{
	if (ud)
		return *(const long long *)ud;
	return n_prompt < 24 ? 24 - (long long)n_prompt : 0;
}

static int known_param(const char *p)
{
	static const char *const names[] = { "n", "logprobs", "top_logprobs", "prompt_logprobs", "echo",
					     "suffix", "logit_bias", "best_of", "response_format", "stream",
					     "stream_options",
					     "return_token_ids", "ignore_eos", "skip_special_tokens", "min_tokens",
					     "max_tokens", "stop", "messages", "tools", "chat_template_kwargs",
					     "prompt", "presence_penalty", "frequency_penalty", "repetition_penalty",
					     "length_penalty", "use_beam_search", "allowed_token_ids", "bad_words",
					     "guided_json", "guided_regex", "guided_choice", "guided_grammar",
					     "structured_outputs", "logits_processors", "include_stop_str_in_output",
					     "truncate_prompt_tokens", "prompt_embeds", "functions", "stop_token_ids",
					     "add_generation_prompt", "continue_final_message", "add_special_tokens",
					     "tool_choice", "function_call" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(p, names[i]))
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const long long gen_big = 1000000;
	struct fg_server_limits l;
	struct fg_server_req r;
	struct fg_err err = { 0, "" };
	cJSON *body = NULL;
	const char *param = NULL;
	size_t i, longest = 0;
	uint8_t sel;
	int rc;

	if (!tiny)
		load_tiny();
	if (size < 1)
		return 0;
	sel = data[0];
	memset(&l, 0, sizeof(l));
	memset(&r, 0, sizeof(r));
	r.chat = sel & 1;
	l.tok = sel & 2 ? NULL : tiny;
	l.format = (sel >> 2) % 3 == 0 ? FG_CHAT_GEMMA3 : (sel >> 2) % 3 == 1 ? FG_CHAT_GEMMA4 : FG_CHAT_NONE;
	l.max_seq = sel & 16 ? 32 : 131072;
	/* a tokenizer with more ids than the model, now and then */
	l.n_vocab = l.tok && !(sel & 32) ? fg_tokenizer_vocab_size(l.tok) : 300;
	if (sel & 64) {
		l.gen_max_new = gen_new;
		l.gen_ud = sel & 128 ? &gen_big : NULL;
	}
	if (fg_json_parse(&body, (const char *)data + 1, size - 1, "request body", &err)) {
		if (!err.msg[0] || strchr(err.msg, '\n'))
			abort();
		return 0;
	}
	rc = fg_server_parse_request(&r, &l, body, &param, &err);
	cJSON_Delete(body);
	if (rc) {
		if ((rc != FG_EINVAL && rc != FG_ENOMEM) || !err.msg[0] || strchr(err.msg, '\n') ||
		    (param && !known_param(param)))
			abort();
		fg_server_req_release(&r);
		return 0;
	}
	/* max_tokens 0 only with echo (a completion's), logprobs -1..max */
	if (r.n_prompt < 1 || (long long)r.n_prompt >= l.max_seq || !r.prompt || r.max_tokens < (r.echo ? 0 : 1) ||
	    (long long)r.n_prompt + r.max_tokens > l.max_seq || r.n_stops > FG_SERVER_STOP_MAX ||
	    r.logprobs < -1 || r.logprobs > FG_SERVER_LOGPROBS_MAX || (r.echo && r.chat) ||
	    r.prompt_logprobs < -1 || r.prompt_logprobs > FG_SERVER_LOGPROBS_MAX ||
	    (r.prompt_logprobs >= 0 && r.stream) ||
	    (r.prompt_text && !r.echo))
		abort();
	for (i = 0; i < r.n_prompt; i++)
		if (r.prompt[i] < 0 || r.prompt[i] >= l.n_vocab)
			abort();
	for (i = 0; i < r.n_stop_ids; i++)
		if (!r.stop_ids || r.stop_ids[i] < 0 || r.stop_ids[i] >= l.n_vocab)
			abort();
	for (i = 0; i < r.n_stops; i++) {
		if (!r.stops[i] || !r.stops[i][0])
			abort();
		if (strlen(r.stops[i]) > longest)
			longest = strlen(r.stops[i]);
	}
	if (r.holdback != (longest ? longest - 1 : 0))
		abort();
	fg_server_req_release(&r);
	return 0;
}
