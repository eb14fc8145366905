/* server.h - an OpenAI-compatible HTTP server over one engine (libmicrohttpd).
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions (greedy; max_tokens,
 * stop, stream as server-sent events; a completion prompt may be a string or
 * an array of token ids), GET /v1/models, GET /health.
 *
 * One generation at a time: a single worker thread owns the engine; requests
 * wait in a FIFO queue of at most max_queue, beyond which they get 429.
 * Request bodies over max_body get 413; malformed JSON or fields get 400 with
 * an OpenAI-style {"error": {message, type, param, code}} object. A streaming
 * client that goes away stops its generation at the next token. Chat prompts
 * use the turn format the tokenizer calls for (engine/chat.h, docs/serve.md). */
#ifndef FG_SERVER_H
#define FG_SERVER_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "buf.h"

#include "engine/chat.h"
#include "engine/engine.h"
#include "err.h"
#include "tokenizer.h"

struct fg_server_opts {
	const char *host;       /* numeric IPv4 address to bind; NULL = 127.0.0.1 */
	int port;               /* 0 = any free port (see fg_server_port) */
	int max_queue;          /* waiting requests allowed; 0 = 8 */
	size_t max_body;        /* request body bytes; 0 = 1 MiB */
	const char *model_name; /* the id /v1/models reports; NULL = "fgpack" */
	/* the id of the bundle served (64 hex), or NULL (a folder, or not
	 * known): every response's system_fingerprint, and "bundle" in
	 * /health and /v1/models (null without one) */
	const char *bundle_id;
	enum fg_chat_format chat_format; /* FG_CHAT_NONE: what the tokenizer calls for */
};

struct fg_server;

/* ---- request bodies (pure; fuzzed by tests/fuzz/fuzz_request.c) ---- */

#define FG_SERVER_STOP_MAX 4
#define FG_SERVER_BATCH_MAX 1024 /* prompts in one completions request */
#define FG_SERVER_LOGPROBS_MAX 20 /* alternatives per token, as vLLM's default max_logprobs */

/* What a request body is checked against. */
struct fg_server_limits {
	const struct fg_tokenizer *tok; /* borrowed; NULL: token-id prompts only */
	enum fg_chat_format format;     /* chat prompts' turn format */
	int max_seq;                    /* the model's context, tokens */
	int n_vocab;                    /* token ids allowed: 0..n_vocab-1 */
	/* generation_config.json's default new tokens for a prompt of n_prompt
	 * tokens, or -1 (fg_engine_gen_max_new); may be NULL */
	long long (*gen_max_new)(const void *ud, size_t n_prompt);
	const void *gen_ud;
};

/* A completion or chat request, parsed. */
struct fg_server_req {
	int chat;               /* set by the caller: /v1/chat/completions */
	int stream;
	int echo_ids;           /* return_token_ids: the prompt's ids in the answer */
	int ignore_eos;         /* vLLM's ignore_eos: the eos and end-of-turn ids do not
				 * stop generation (counted, left out of the text) */
	int include_usage;      /* stream_options.include_usage: usage in a chunk of its own */
	int continuous_usage;   /* ... and continuous_usage_stats (vLLM): in every chunk */
	int logprobs;           /* -1: none; else the top alternatives per token (0..20):
				 * a completion's logprobs, a chat's top_logprobs */
	int echo;               /* a completion's echo: the prompt before the text */
	int prompt_logprobs;    /* -1, or vLLM's prompt_logprobs: alternatives per prompt id */
	char *prompt_text;      /* echo of a string prompt: the string (owned) */
	int keep_special;       /* skip_special_tokens: false: special tokens stay in
				 * the text (default: left out, as vLLM and transformers) */
	int tokens_as_ids;      /* vLLM's return_tokens_as_token_ids: logprobs name
				 * tokens "token_id:<id>" instead of their text */
	int32_t *prompt;        /* n_prompt ids, each in 0..n_vocab-1 (owned) */
	size_t n_prompt;        /* 1..max_seq-1 */
	int max_tokens;         /* >= 1 (unless the context is full), n_prompt + max_tokens <= max_seq */
	char *stops[FG_SERVER_STOP_MAX]; /* non-empty stop strings (owned) */
	size_t n_stops;
	size_t holdback;        /* longest stop string's length - 1: text held back while streaming */
	int32_t *stop_ids;      /* vLLM's stop_token_ids: ids that end generation like an
				 * eos, ignore_eos or not (owned) */
	size_t n_stop_ids;
};

/* Fills r (zeroed but for chat) from a request body. On a client error
 * returns FG_EINVAL with a one-line err->msg and *param naming the field
 * (or NULL); FG_ENOMEM when out of memory. Either way the caller releases r. */
int fg_server_parse_request(struct fg_server_req *r, const struct fg_server_limits *l,
			    const cJSON *req, const char **param, struct fg_err *err);
void fg_server_req_release(struct fg_server_req *r);

/* engine and tok are borrowed and must outlive the server; tok may be NULL
 * (then only token-id prompts work and responses carry ids, no text). */
int fg_server_new(struct fg_server **out, struct fg_engine *e, const struct fg_tokenizer *tok,
		  const struct fg_server_opts *opts, struct fg_err *err);
/* Starts listening and the worker thread. */
int fg_server_start(struct fg_server *s, struct fg_err *err);
int fg_server_port(const struct fg_server *s);
/* Stops accepting connections, lets queued and running requests finish
 * (new requests on open connections get 503), then stops. */
void fg_server_drain(struct fg_server *s);
void fg_server_free(struct fg_server *s); /* drains first when running */

/* The chat format in use: --chat-format's, else fg_chat_detect's. Generation
 * stops at the engine's eos ids, the tokenizer's <eos> and this format's
 * end-of-turn token. */
enum fg_chat_format fg_server_chat_format(const struct fg_server *s);

#endif
