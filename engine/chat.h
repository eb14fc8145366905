/* chat.h - the chat prompt: which turn format a model's tokenizer calls for,
 * OpenAI-style messages rendered in it, and the tokens that end a turn.
 *
 * Two formats, written by hand (no Jinja): Gemma 4's (<|turn>ROLE ...
 * <turn|>, a system turn of its own) and Gemma 3's (<start_of_turn>ROLE ...
 * <end_of_turn>, system text folded into the first user turn). Every place
 * that builds a chat prompt (fgpack serve, fgpack run --chat, fgpack
 * tokenize --chat) goes through fg_chat_render, so they agree to the byte.
 * docs/serve.md ("Chat template") says what is followed and from where. */
#ifndef FG_CHAT_H
#define FG_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "err.h"
#include "tokenizer.h"

enum fg_chat_format {
	FG_CHAT_NONE = 0, /* no chat-turn tokens: chat prompts are refused */
	FG_CHAT_GEMMA3,   /* <start_of_turn> / <end_of_turn> */
	FG_CHAT_GEMMA4,   /* <|turn> / <turn|> */
};

/* The format tok's added tokens call for: GEMMA4 when both <|turn> and
 * <turn|> are added tokens, else GEMMA3 when both <start_of_turn> and
 * <end_of_turn> are, else NONE (also when tok is NULL). */
enum fg_chat_format fg_chat_detect(const struct fg_tokenizer *tok);

/* "gemma4", "gemma3" or "none" (borrowed, static). */
const char *fg_chat_format_name(enum fg_chat_format f);
/* Parses "gemma4" or "gemma3"; FG_EINVAL for anything else. */
int fg_chat_format_parse(enum fg_chat_format *out, const char *name, struct fg_err *err);

/* The format's end-of-turn token string ("<turn|>", "<end_of_turn>"), or
 * NULL for NONE; its id in tok (-1 when tok lacks it or is NULL). */
const char *fg_chat_end_of_turn(enum fg_chat_format f);
int32_t fg_chat_end_of_turn_id(const struct fg_tokenizer *tok, enum fg_chat_format f);

/* Appends to out the prompt text of messages (a JSON array of {role,
 * content} objects as OpenAI's chat API sends them) in format f, ending with
 * the opening of the model's turn. No <bos>: the tokenizer's post-processor
 * adds it (fg_chat_encode). Roles: system, developer, user, assistant;
 * content a string or an array of {"type": "text", "text"} parts (null for an
 * assistant). Anything else (tool messages, tool calls, image parts, an empty
 * array) is FG_EINVAL with a message naming the message at fault. */
int fg_chat_render(struct fg_buf *out, enum fg_chat_format f, const cJSON *messages,
		   struct fg_err *err);

/* fg_chat_render, then encoded with tok and its special tokens (<bos>) into a
 * new array *ids (caller frees) of *n ids. */
int fg_chat_encode(int32_t **ids, size_t *n, const struct fg_tokenizer *tok, enum fg_chat_format f,
		   const cJSON *messages, struct fg_err *err);

#endif
