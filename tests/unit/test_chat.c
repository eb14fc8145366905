/* test_chat.c - engine/chat: the chat format a tokenizer calls for, and
 * messages rendered in Gemma 4's and Gemma 3's turn formats, compared with
 * strings worked out by hand from Google's Gemma 4 chat_template.jinja (E2B/
 * E4B, no tools, thinking off; docs/serve.md) and from fgpack's Gemma 3
 * format. Tokenizers: tests/fixtures/tokenizer_tiny.json as it is (Gemma 3
 * turn tokens at ids 4/5) and with those renamed <|turn>/<turn|> (a Gemma 4
 * kind); the real Gemma vocabulary is checked against the JavaScript
 * reference in tests/integration/chat_format.sh. */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "engine/chat.h"
#include "fsutil.h"
#include "json.h"
#include "tap.h"

/* Renders the messages JSON in format f; NULL (and err filled) on failure. */
static char *render(enum fg_chat_format f, const char *json, struct fg_err *err)
{
	cJSON *m = NULL;
	struct fg_buf b = FG_BUF_INIT;
	char *s = NULL;

	if (fg_json_parse(&m, json, strlen(json), "test", err))
		return NULL;
	if (!fg_chat_render(&b, f, m, err))
		s = fg_buf_detach(&b, NULL);
	fg_buf_release(&b);
	cJSON_Delete(m);
	return s;
}

#define R4(json, want, name)                                                \
	do {                                                                \
		struct fg_err e_ = { 0, "" };                               \
		char *s_ = render(FG_CHAT_GEMMA4, json, &e_);               \
		if (!s_)                                                    \
			printf("#   %s\n", e_.msg);                     \
		is_str(s_, want, "gemma4: %s", name);                       \
		free(s_);                                                   \
	} while (0)
#define R3(json, want, name)                                                \
	do {                                                                \
		struct fg_err e_ = { 0, "" };                               \
		char *s_ = render(FG_CHAT_GEMMA3, json, &e_);               \
		if (!s_)                                                    \
			printf("#   %s\n", e_.msg);                     \
		is_str(s_, want, "gemma3: %s", name);                       \
		free(s_);                                                   \
	} while (0)
/* A refused request: FG_EINVAL with a message holding what. */
#define BAD(f, json, what, name)                                            \
	do {                                                                \
		struct fg_err e_ = { 0, "" };                               \
		char *s_ = render(f, json, &e_);                            \
		ok(!s_ && e_.code == FG_EINVAL && strstr(e_.msg, what), "refused: %s (%s)", name, e_.msg); \
		free(s_);                                                   \
	} while (0)

static void gemma4(void)
{
	R4("[{\"role\":\"system\",\"content\":\"  You are terse.\\n\"},{\"role\":\"user\",\"content\":\" hello abc \"}]",
	   "<|turn>system\nYou are terse.<turn|>\n<|turn>user\nhello abc<turn|>\n<|turn>model\n",
	   "system first: its own turn, contents trimmed");
	R4("[{\"role\":\"developer\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"hi\"}]",
	   "<|turn>system\nBe brief.<turn|>\n<|turn>user\nhi<turn|>\n<|turn>model\n",
	   "developer first: the system turn");
	R4("[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},"
	   "{\"role\":\"system\",\"content\":\" c \"},{\"role\":\"user\",\"content\":\"d\"}]",
	   "<|turn>user\na<turn|>\n<|turn>model\nb<turn|>\n<|turn>system\nc<turn|>\n<|turn>user\nd<turn|>\n"
	   "<|turn>model\n",
	   "system later: a system turn where it stands");
	R4("[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"developer\",\"content\":\"x\"}]",
	   "<|turn>user\na<turn|>\n<|turn>developer\nx<turn|>\n<|turn>model\n",
	   "developer later keeps its role name");
	R4("[{\"role\":\"system\",\"content\":\"s1\"},{\"role\":\"system\",\"content\":\"s2\"},{\"role\":\"user\",\"content\":\"u\"}]",
	   "<|turn>system\ns1<turn|>\n<|turn>system\ns2<turn|>\n<|turn>user\nu<turn|>\n<|turn>model\n",
	   "two system messages: two system turns");
	R4("[{\"role\":\"system\",\"content\":\"only\"}]",
	   "<|turn>system\nonly<turn|>\n<|turn>model\n", "a system message alone");
	R4("[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\" A \"},{\"type\":\"text\",\"text\":\"B\"}]},"
	   "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\" x \"},{\"type\":\"text\",\"text\":\"y\\n\"}]}]",
	   "<|turn>system\nA B <turn|>\n<|turn>user\nxy<turn|>\n<|turn>model\n",
	   "content parts: system parts trimmed and followed by a space, user parts trimmed and joined");
	R4("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\" p \"},"
	   "{\"type\":\"text\",\"text\":\"q<|channel>t<channel|>r \"}]}]",
	   "<|turn>user\nq<turn|>\n<|turn>model\npqr<turn|>\n<|turn>model\n",
	   "assistant parts: each without its thoughts, trimmed, joined");
	R4("[{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"assistant\",\"content\":\"A1 \"},"
	   "{\"role\":\"assistant\",\"content\":\" A2\"},{\"role\":\"user\",\"content\":\"v\"}]",
	   "<|turn>user\nu<turn|>\n<|turn>model\nA1A2<turn|>\n<|turn>user\nv<turn|>\n<|turn>model\n",
	   "consecutive assistant messages continue one model turn");
	R4("[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"assistant\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"}]",
	   "<|turn>system\ns<turn|>\n<|turn>model\nab<turn|>\n<|turn>model\n",
	   "assistant right after the system turn opens a model turn; the next continues it");
	R4("[{\"role\":\"user\",\"content\":\"2+2?\"},{\"role\":\"assistant\",\"content\":"
	   "\"<|channel>thought\\nadd them<channel|>The answer is 4.\"},{\"role\":\"user\",\"content\":\"ok\"}]",
	   "<|turn>user\n2+2?<turn|>\n<|turn>model\nThe answer is 4.<turn|>\n<|turn>user\nok<turn|>\n<|turn>model\n",
	   "a thought channel in assistant content is dropped");
	R4("[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":\"A<|channel>1<channel|>B <|channel>2<channel|> C\"}]",
	   "<|turn>user\nx<turn|>\n<|turn>model\nAB  C<turn|>\n<|turn>model\n", "every thought channel is dropped");
	R4("[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":\"A <|channel>never closed\"}]",
	   "<|turn>user\nx<turn|>\n<|turn>model\nA<turn|>\n<|turn>model\n", "an unclosed channel drops the rest");
	R4("[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":\"A<channel|>B\"}]",
	   "<|turn>user\nx<turn|>\n<|turn>model\nAB<turn|>\n<|turn>model\n", "a stray channel end is removed");
	R4("[{\"role\":\"user\",\"content\":\"<|channel>kept<channel|>\"}]",
	   "<|turn>user\n<|channel>kept<channel|><turn|>\n<|turn>model\n", "user content keeps channel marks");
	R4("[{\"role\":\"system\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"\"},{\"role\":\"assistant\",\"content\":null},"
	   "{\"role\":\"user\",\"content\":[]}]",
	   "<|turn>system\n<turn|>\n<|turn>user\n<turn|>\n<|turn>model\n<turn|>\n<|turn>user\n<turn|>\n<|turn>model\n",
	   "empty contents and a null assistant content");
	R4("[{\"role\":\"user\",\"content\":\"\\u3000\\u00a0\\u0085h\\u00e9llo \\u4e16\\u754c \\ud83d\\ude00\\u2029\\u205f\\n\"}]",
	   "<|turn>user\nh\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80<turn|>\n<|turn>model\n",
	   "unicode: Python's whitespace trimmed (ideographic, no-break, NEL, paragraph, math spaces)");
	R4("[{\"role\":\"user\",\"content\":\"\\u200bx\\u200b \\u180e\"}]",
	   "<|turn>user\n\xe2\x80\x8bx\xe2\x80\x8b \xe1\xa0\x8e<turn|>\n<|turn>model\n",
	   "unicode: zero-width space and U+180E are not whitespace to Python");
	R4("[{\"role\":\"user\",\"content\":\"  \\t\\r\\n\\u000b\\u000c\\u001c  \"}]",
	   "<|turn>user\n<turn|>\n<|turn>model\n", "content of whitespace only trims to nothing");
	R4("[{\"role\":\"user\",\"content\":\"a\\n\\nb\"}]",
	   "<|turn>user\na\n\nb<turn|>\n<|turn>model\n", "inner whitespace kept");
}

static void gemma3(void)
{
	R3("[{\"role\":\"system\",\"content\":\"  You are terse.\\n\"},{\"role\":\"user\",\"content\":\" hello abc \"}]",
	   "<start_of_turn>user\n  You are terse.\n\n\n hello abc <end_of_turn>\n<start_of_turn>model\n",
	   "system folded into the first user turn, contents as written");
	R3("[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},"
	   "{\"role\":\"system\",\"content\":\"c\"},{\"role\":\"developer\",\"content\":\"d\"},{\"role\":\"user\",\"content\":\"e\"}]",
	   "<start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n"
	   "<start_of_turn>user\nc\n\nd\n\ne<end_of_turn>\n<start_of_turn>model\n",
	   "later system and developer joined by a blank line into the next user turn");
	R3("[{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"system\",\"content\":\"s\"}]",
	   "<start_of_turn>user\nu<end_of_turn>\n<start_of_turn>user\ns<end_of_turn>\n<start_of_turn>model\n",
	   "a trailing system message becomes a user turn");
	R3("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x \"},{\"type\":\"text\",\"text\":\"y\"}]},"
	   "{\"role\":\"assistant\",\"content\":\"A1\"},{\"role\":\"assistant\",\"content\":null}]",
	   "<start_of_turn>user\nx y<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n<start_of_turn>model\n"
	   "<end_of_turn>\n<start_of_turn>model\n",
	   "parts joined; consecutive assistant messages are separate turns");
	R3("[{\"role\":\"user\",\"content\":\"\\u4e16\\u754c\\u3000\"}]",
	   "<start_of_turn>user\n\xe4\xb8\x96\xe7\x95\x8c\xe3\x80\x80<end_of_turn>\n<start_of_turn>model\n",
	   "unicode kept as written");
}

static void refused(void)
{
	BAD(FG_CHAT_GEMMA4, "[]", "non-empty array", "no messages");
	BAD(FG_CHAT_GEMMA4, "{\"role\":\"user\"}", "non-empty array", "messages not an array");
	BAD(FG_CHAT_GEMMA4, "[{\"content\":\"x\"}]", "messages[0].role", "no role");
	BAD(FG_CHAT_GEMMA4, "[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"tool\",\"content\":\"1\"}]",
	    "messages[1].role: 'tool' messages are not supported", "a tool message");
	BAD(FG_CHAT_GEMMA3, "[{\"role\":\"robot\",\"content\":\"x\"}]", "'robot' is not system", "an unknown role");
	BAD(FG_CHAT_GEMMA4, "[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":null,"
	    "\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]",
	    "messages[1].tool_calls", "an assistant tool call");
	BAD(FG_CHAT_GEMMA4, "[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]",
	    "only text parts", "an image part");
	BAD(FG_CHAT_GEMMA4, "[{\"role\":\"user\",\"content\":null}]", "expected a string", "null user content");
	BAD(FG_CHAT_GEMMA4, "[{\"role\":\"user\"}]", "expected a string", "missing content");
	BAD(FG_CHAT_NONE, "[{\"role\":\"user\",\"content\":\"x\"}]", "no chat-turn tokens", "no format");
}

/* tests/fixtures/tokenizer_tiny.json with every from replaced by to. */
static struct fg_tokenizer *tiny(const char *const *from, const char *const *to, size_t n)
{
	struct fg_buf b = FG_BUF_INIT, o = FG_BUF_INIT;
	struct fg_tokenizer *t = NULL;
	struct fg_err err = { 0, "" };
	size_t i;

	if (fg_file_read("tests/fixtures/tokenizer_tiny.json", (size_t)1 << 24, &b, &err))
		return NULL;
	for (i = 0; i < n; i++) {
		const char *p = b.data, *q;

		fg_buf_reset(&o);
		while ((q = strstr(p, from[i]))) {
			fg_buf_append(&o, p, (size_t)(q - p), NULL);
			fg_buf_puts(&o, to[i], NULL);
			p = q + strlen(from[i]);
		}
		fg_buf_puts(&o, p, NULL);
		fg_buf_reset(&b);
		fg_buf_append(&b, o.data, o.len, NULL);
		fg_buf_append(&b, "", 0, NULL);
	}
	if (fg_tokenizer_load_mem(&t, b.data, b.len, "tiny", &err))
		printf("#   %s\n", err.msg);
	fg_buf_release(&b);
	fg_buf_release(&o);
	return t;
}

static void tokenizers(void)
{
	static const char *const g3[] = { "<start_of_turn>", "<end_of_turn>" };
	static const char *const g4[] = { "<|turn>", "<turn|>" };
	static const char *const half[] = { "<|turn>", "<end_of_turn|>" };
	struct fg_tokenizer *t3 = tiny(NULL, NULL, 0), *t4 = tiny(g3, g4, 2), *tn = tiny(g3, half, 2);
	struct fg_err err = { 0, "" };
	enum fg_chat_format f = FG_CHAT_NONE;
	cJSON *m = NULL;
	int32_t *ids = NULL;
	size_t n = 0, i, closes = 0;

	ok(t3 && t4 && tn, "the tiny tokenizer and its renamed copies load");
	if (!t3 || !t4 || !tn)
		goto out;
	is_int(fg_chat_detect(t3), FG_CHAT_GEMMA3, "<start_of_turn>/<end_of_turn>: gemma3");
	is_int(fg_chat_detect(t4), FG_CHAT_GEMMA4, "<|turn>/<turn|>: gemma4");
	is_int(fg_chat_detect(tn), FG_CHAT_NONE, "<|turn> without <turn|> (and no Gemma 3 pair): none");
	is_int(fg_chat_detect(NULL), FG_CHAT_NONE, "no tokenizer: none");
	is_int(fg_chat_end_of_turn_id(t4, FG_CHAT_GEMMA4), 5, "gemma4 end of turn: <turn|>, id 5");
	is_int(fg_chat_end_of_turn_id(t3, FG_CHAT_GEMMA3), 5, "gemma3 end of turn: <end_of_turn>, id 5");
	is_int(fg_chat_end_of_turn_id(t4, FG_CHAT_GEMMA3), -1, "gemma3 forced on a gemma4 tokenizer: no end id");
	is_int(fg_chat_end_of_turn_id(t3, FG_CHAT_NONE), -1, "none: no end id");
	is_str(fg_chat_end_of_turn(FG_CHAT_GEMMA4), "<turn|>", "gemma4 end of turn string");
	ok(!fg_chat_format_parse(&f, "gemma4", &err) && f == FG_CHAT_GEMMA4, "parse gemma4");
	ok(!fg_chat_format_parse(&f, "gemma3", &err) && f == FG_CHAT_GEMMA3, "parse gemma3");
	ok(fg_chat_format_parse(&f, "chatml", &err) == FG_EINVAL, "parse refuses chatml");
	is_str(fg_chat_format_name(FG_CHAT_GEMMA4), "gemma4", "name of gemma4");

	/* encoded: <bos> first, each turn mark one added-token id, none split */
	{
		static const char js[] = "[{\"role\":\"system\",\"content\":\"hello\"},"
					 "{\"role\":\"user\",\"content\":\"abc\"}]";

		ok(!fg_json_parse(&m, js, strlen(js), "test", &err), "messages parse");
	}
	ok(!fg_chat_encode(&ids, &n, t4, FG_CHAT_GEMMA4, m, &err), "encode with the gemma4 tokenizer");
	ok(n > 3 && ids[0] == fg_tokenizer_bos_id(t4) && ids[1] == 4, "<bos> then <|turn> (id 4)");
	for (i = 0; i < n; i++)
		closes += ids[i] == 5;
	is_int(closes, 2, "two <turn|> ids (system and user turns)");
	ok(n > 2 && ids[n - 1] == 8 && ids[n - 2] != 4, "ends with \"\\n\" (id 8) after model");
	{
		struct fg_buf txt = FG_BUF_INIT;

		ok(!fg_tokenizer_decode(t4, ids, n, &txt, &err) && txt.data &&
			   !strcmp(txt.data, "<bos><|turn>system\nhello<turn|>\n<|turn>user\nabc<turn|>\n<|turn>model\n"),
		   "decodes back to the rendered text");
		fg_buf_release(&txt);
	}
	free(ids);
	ids = NULL;
	ok(!fg_chat_encode(&ids, &n, t3, FG_CHAT_GEMMA3, m, &err) && n > 2 && ids[1] == 4,
	   "gemma3 with its tokenizer: <bos> <start_of_turn> ...");
	free(ids);
	ids = NULL;
	ok(fg_chat_encode(&ids, &n, t3, FG_CHAT_NONE, m, &err) == FG_EINVAL && !ids && !n, "none refuses to encode");
	cJSON_Delete(m);
out:
	fg_tokenizer_free(t3);
	fg_tokenizer_free(t4);
	fg_tokenizer_free(tn);
}

int main(void)
{
	gemma4();
	gemma3();
	refused();
	tokenizers();
	return tap_done();
}
