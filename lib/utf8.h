/* utf8.h - the one UTF-8 sequence check, inline for the tokenizer's hot
 * loops and shared by every other caller. */
#ifndef FG_UTF8_H
#define FG_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s (1..4; rem bytes readable, at
 * least 1), or 0 when s[0] does not start one (overlong, surrogate, above
 * U+10FFFF, truncated, a stray continuation byte). *cp (may be NULL) gets
 * the code point. */
static inline size_t fg_utf8_len(const unsigned char *s, size_t rem, uint32_t *cp)
{
	unsigned c = s[0];
	uint32_t v;

	if (c < 0x80) {
		v = c;
		if (cp)
			*cp = v;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		if (rem < 2 || (s[1] & 0xc0) != 0x80)
			return 0;
		v = ((c & 0x1fu) << 6) | (s[1] & 0x3fu);
		if (cp)
			*cp = v;
		return 2;
	}
	if (c >= 0xe0 && c <= 0xef) {
		if (rem < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
			return 0;
		if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f))
			return 0;
		v = ((c & 0x0fu) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu);
		if (cp)
			*cp = v;
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (rem < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
			return 0;
		if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
			return 0;
		v = ((c & 0x07u) << 18) | ((s[1] & 0x3fu) << 12) | ((s[2] & 0x3fu) << 6) | (s[3] & 0x3fu);
		if (cp)
			*cp = v;
		return 4;
	}
	return 0;
}

/* The character at s as a terminal would show it (rem bytes readable, at
 * least 1): returns its length (its UTF-8 sequence's, or 1 for a byte that
 * starts none) and sets *printable to 1 when it is valid UTF-8 and no
 * control character, 0 for C0, DEL, C1 (U+0080..U+009F, C2 80..C2 9F:
 * U+009B is a CSI to some terminals) and such a byte. fg_err_one_line's
 * rule. */
static inline size_t fg_utf8_shown(const unsigned char *s, size_t rem, int *printable)
{
	size_t n = fg_utf8_len(s, rem, NULL);

	*printable = n && s[0] >= 0x20 && s[0] != 0x7f && !(n == 2 && s[0] == 0xc2 && s[1] <= 0x9f);
	return n ? n : 1;
}

#endif
