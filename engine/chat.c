/* chat.c - chat prompts in Gemma 4's and Gemma 3's turn formats (chat.h).
 *
 * Gemma 4 follows Google's chat_template.jinja for E2B/E4B with no tools and
 * thinking off, as docs/serve.md lays out; "trim" there is Jinja's, that is
 * Python's str.strip(), so the whitespace trimmed is Python's (Unicode
 * spaces and separators too, not just ASCII). Gemma 3 is fgpack's earlier
 * hand-written format, kept byte for byte. */
#include "engine/chat.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"

#define G4_OPEN "<|turn>"
#define G4_CLOSE "<turn|>"
#define G4_THINK_OPEN "<|channel>"
#define G4_THINK_CLOSE "<channel|>"

static int is_added(const struct fg_tokenizer *tok, const char *piece)
{
	int32_t id = fg_tokenizer_piece_to_id(tok, piece, strlen(piece));

	return id >= 0 && (fg_tokenizer_token_flags(tok, id) & FG_TOK_F_ADDED);
}

enum fg_chat_format fg_chat_detect(const struct fg_tokenizer *tok)
{
	if (!tok)
		return FG_CHAT_NONE;
	if (is_added(tok, G4_OPEN) && is_added(tok, G4_CLOSE))
		return FG_CHAT_GEMMA4;
	if (is_added(tok, "<start_of_turn>") && is_added(tok, "<end_of_turn>"))
		return FG_CHAT_GEMMA3;
	return FG_CHAT_NONE;
}

const char *fg_chat_format_name(enum fg_chat_format f)
{
	return f == FG_CHAT_GEMMA4 ? "gemma4" : f == FG_CHAT_GEMMA3 ? "gemma3" : "none";
}

int fg_chat_format_parse(enum fg_chat_format *out, const char *name, struct fg_err *err)
{
	if (name && !strcmp(name, "gemma4"))
		*out = FG_CHAT_GEMMA4;
	else if (name && !strcmp(name, "gemma3"))
		*out = FG_CHAT_GEMMA3;
	else
		return fg_err_set(err, FG_EINVAL, "chat format '%s': expected gemma4 or gemma3",
				  name ? name : "");
	return 0;
}

const char *fg_chat_end_of_turn(enum fg_chat_format f)
{
	return f == FG_CHAT_GEMMA4 ? G4_CLOSE : f == FG_CHAT_GEMMA3 ? "<end_of_turn>" : NULL;
}

int32_t fg_chat_end_of_turn_id(const struct fg_tokenizer *tok, enum fg_chat_format f)
{
	const char *eot = fg_chat_end_of_turn(f);

	return tok && eot ? fg_tokenizer_piece_to_id(tok, eot, strlen(eot)) : -1;
}

/* ---- Python's str.strip() ---- */

/* 1 when code point c is whitespace to Python (str.isspace). */
static int py_space(unsigned c)
{
	return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
	       c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
	       c == 0x202F || c == 0x205F || c == 0x3000;
}

/* The code point of the well-formed UTF-8 sequence of exactly len bytes at
 * s, or -1 (bytes that are not UTF-8 are never whitespace). */
static long utf8_cp(const unsigned char *s, size_t len)
{
	unsigned cp;
	size_t i;

	if (len == 1)
		return s[0] < 0x80 ? s[0] : -1;
	if (len == 2 && s[0] >= 0xC2 && s[0] <= 0xDF)
		cp = s[0] & 0x1F;
	else if (len == 3 && (s[0] & 0xF0) == 0xE0)
		cp = s[0] & 0x0F;
	else
		return -1; /* no Python space needs four bytes */
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return -1;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	return (len == 3 && cp < 0x800) ? -1 : (long)cp;
}

/* Appends s[0..n) without the whitespace at either end. */
static int put_trimmed(struct fg_buf *out, const char *s, size_t n, struct fg_err *err)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t a = 0, b = n;

	while (a < b) {
		size_t len = u[a] < 0x80 ? 1 : (u[a] & 0xE0) == 0xC0 ? 2 : (u[a] & 0xF0) == 0xE0 ? 3 : 0;
		long cp = len && a + len <= b ? utf8_cp(u + a, len) : -1;

		if (cp < 0 || !py_space((unsigned)cp))
			break;
		a += len;
	}
	while (b > a) {
		size_t len = 1;
		long cp;

		while (len < 3 && b - len > a && (u[b - len] & 0xC0) == 0x80)
			len++;
		cp = utf8_cp(u + b - len, len);
		if (cp < 0 || !py_space((unsigned)cp))
			break;
		b -= len;
	}
	return fg_buf_append(out, s + a, b - a, err);
}

/* Gemma 4's strip_thinking: the text cut at every "<channel|>"; of each
 * piece, what comes before its first "<|channel>" is kept (all of it when it
 * has none); the whole trimmed. */
static int put_unthought(struct fg_buf *out, const char *s, struct fg_err *err)
{
	struct fg_buf kept = FG_BUF_INIT;
	size_t lc = strlen(G4_THINK_CLOSE);
	int rc = fg_buf_append(&kept, "", 0, err);

	while (!rc) {
		const char *end = strstr(s, G4_THINK_CLOSE);
		size_t plen = end ? (size_t)(end - s) : strlen(s);
		const char *open = memmem(s, plen, G4_THINK_OPEN, strlen(G4_THINK_OPEN));

		rc = fg_buf_append(&kept, s, open ? (size_t)(open - s) : plen, err);
		if (!end)
			break;
		s = end + lc;
	}
	if (!rc)
		rc = put_trimmed(out, kept.data, kept.len, err);
	fg_buf_release(&kept);
	return rc;
}

/* ---- messages ---- */

struct msg {
	const char *role;
	const cJSON *content; /* a string, an array of text parts, or NULL (null) */
};

/* Checks every message and fills ms[0..n). */
static int read_messages(struct msg *ms, const cJSON *messages, struct fg_err *err)
{
	const cJSON *m;
	int i = 0;

	cJSON_ArrayForEach(m, messages) {
		const char *role = fg_json_str(m, "role");
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
		const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");

		if (!cJSON_IsObject(m))
			return fg_err_set(err, FG_EINVAL, "messages[%d]: expected an object", i);
		if (!role)
			return fg_err_set(err, FG_EINVAL, "messages[%d].role: expected a string", i);
		if (!strcmp(role, "tool") || !strcmp(role, "function"))
			return fg_err_set(err, FG_EINVAL, "messages[%d].role: '%s' messages are not "
							  "supported (no tool calling)", i, role);
		if (strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "user") &&
		    strcmp(role, "assistant"))
			return fg_err_set(err, FG_EINVAL, "messages[%d].role: '%s' is not system, "
							  "user or assistant", i, role);
		if (calls && !cJSON_IsNull(calls) && !(cJSON_IsArray(calls) && !cJSON_GetArraySize(calls)))
			return fg_err_set(err, FG_EINVAL, "messages[%d].tool_calls: not supported (no "
							  "tool calling)", i);
		if (cJSON_IsArray(c)) {
			const cJSON *part;

			cJSON_ArrayForEach(part, c) {
				const char *type = fg_json_str(part, "type");

				if (!type || strcmp(type, "text") || !fg_json_str(part, "text"))
					return fg_err_set(err, FG_EINVAL, "messages[%d].content: only text "
									  "parts are supported", i);
			}
		} else if (cJSON_IsNull(c) && !strcmp(role, "assistant"))
			c = NULL;
		else if (!cJSON_IsString(c))
			return fg_err_set(err, FG_EINVAL, "messages[%d].content: expected a string", i);
		ms[i].role = role;
		ms[i].content = c;
		i++;
	}
	return 0;
}

/* The text of content as it is, parts joined with nothing between. */
static int put_raw(struct fg_buf *out, const cJSON *content, struct fg_err *err)
{
	const cJSON *part;
	int rc = 0;

	if (cJSON_IsString(content))
		return fg_buf_puts(out, content->valuestring, err);
	cJSON_ArrayForEach(part, content) {
		rc = fg_buf_puts(out, fg_json_str(part, "text"), err);
		if (rc)
			break;
	}
	return rc;
}

/* Gemma 3 (fgpack's earlier format, unchanged): no system turn; system and
 * developer texts, joined by a blank line, open the next user turn (or make
 * a user turn of their own at the end); assistant is "model". */
static int render_gemma3(struct fg_buf *out, const struct msg *ms, size_t n, struct fg_err *err)
{
	struct fg_buf system = FG_BUF_INIT;
	size_t i;
	int rc = 0;

	for (i = 0; !rc && i < n; i++) {
		const char *role = ms[i].role;

		if (!strcmp(role, "system") || !strcmp(role, "developer")) {
			if (system.len)
				rc = fg_buf_puts(&system, "\n\n", err);
			if (!rc && ms[i].content)
				rc = put_raw(&system, ms[i].content, err);
			if (!rc)
				rc = fg_buf_append(&system, "", 0, err);
			continue;
		}
		rc = fg_buf_printf(out, err, "<start_of_turn>%s\n", !strcmp(role, "user") ? "user" : "model");
		if (!rc && system.len && !strcmp(role, "user")) {
			rc = fg_buf_printf(out, err, "%s\n\n", system.data);
			fg_buf_reset(&system);
		}
		if (!rc && ms[i].content)
			rc = put_raw(out, ms[i].content, err);
		if (!rc)
			rc = fg_buf_puts(out, "<end_of_turn>\n", err);
	}
	if (!rc && system.len)
		rc = fg_buf_printf(out, err, "<start_of_turn>user\n%s<end_of_turn>\n", system.data);
	if (!rc)
		rc = fg_buf_puts(out, "<start_of_turn>model\n", err);
	fg_buf_release(&system);
	return rc;
}

/* Gemma 4, E2B/E4B template, no tools, thinking off (docs/serve.md). */
static int render_gemma4(struct fg_buf *out, const struct msg *ms, size_t n, struct fg_err *err)
{
	const char *prev = NULL;
	size_t i = 0;
	int rc = 0;

	if (n && (!strcmp(ms[0].role, "system") || !strcmp(ms[0].role, "developer"))) {
		/* the first system (or developer) message is the system turn */
		const cJSON *c = ms[0].content, *part;

		rc = fg_buf_puts(out, G4_OPEN "system\n", err);
		if (!rc && cJSON_IsString(c))
			rc = put_trimmed(out, c->valuestring, strlen(c->valuestring), err);
		else if (!rc && c) {
			cJSON_ArrayForEach(part, c) {
				const char *t = fg_json_str(part, "text");

				rc = put_trimmed(out, t, strlen(t), err);
				if (!rc)
					rc = fg_buf_putc(out, ' ', err);
				if (rc)
					break;
			}
		}
		if (!rc)
			rc = fg_buf_puts(out, G4_CLOSE "\n", err);
		i = 1;
	}
	for (; !rc && i < n; i++) {
		int model = !strcmp(ms[i].role, "assistant");
		const cJSON *c = ms[i].content, *part;

		/* consecutive assistant messages share one model turn */
		if (!(model && prev && !strcmp(prev, "assistant")))
			rc = fg_buf_printf(out, err, G4_OPEN "%s\n", model ? "model" : ms[i].role);
		if (!rc && cJSON_IsString(c))
			rc = model ? put_unthought(out, c->valuestring, err)
				   : put_trimmed(out, c->valuestring, strlen(c->valuestring), err);
		else if (!rc && c) {
			cJSON_ArrayForEach(part, c) {
				const char *t = fg_json_str(part, "text");

				rc = model ? put_unthought(out, t, err) : put_trimmed(out, t, strlen(t), err);
				if (rc)
					break;
			}
		}
		if (!rc && !(model && i + 1 < n && !strcmp(ms[i + 1].role, "assistant")))
			rc = fg_buf_puts(out, G4_CLOSE "\n", err);
		prev = ms[i].role;
	}
	if (!rc)
		rc = fg_buf_puts(out, G4_OPEN "model\n", err);
	return rc;
}

int fg_chat_render(struct fg_buf *out, enum fg_chat_format f, const cJSON *messages,
		   struct fg_err *err)
{
	struct msg *ms;
	size_t n;
	int rc;

	if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0)
		return fg_err_set(err, FG_EINVAL, "messages: expected a non-empty array");
	if (f != FG_CHAT_GEMMA3 && f != FG_CHAT_GEMMA4)
		return fg_err_set(err, FG_EINVAL, "the tokenizer has no chat-turn tokens (<|turn> <turn|>, "
						  "or <start_of_turn> <end_of_turn>): no chat format");
	n = (size_t)cJSON_GetArraySize(messages);
	ms = calloc(n, sizeof(*ms));
	if (!ms)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = read_messages(ms, messages, err);
	if (!rc)
		rc = f == FG_CHAT_GEMMA4 ? render_gemma4(out, ms, n, err) : render_gemma3(out, ms, n, err);
	if (!rc)
		rc = fg_buf_append(out, "", 0, err);
	free(ms);
	return rc;
}

int fg_chat_encode(int32_t **ids, size_t *n, const struct fg_tokenizer *tok, enum fg_chat_format f,
		   const cJSON *messages, struct fg_err *err)
{
	struct fg_buf text = FG_BUF_INIT;
	int rc;

	*ids = NULL;
	*n = 0;
	rc = fg_chat_render(&text, f, messages, err);
	if (!rc)
		rc = fg_tokenizer_encode(tok, text.data, text.len, FG_TOK_ADD_SPECIAL, ids, n, err);
	fg_buf_release(&text);
	return rc;
}
