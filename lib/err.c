/* err.c - filling struct fg_err with a code and a message. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h"

/* Messages become one line on stderr: control characters that came from
 * input (a JSON key with a newline; C0, DEL, and C1 such as U+009B, a CSI
 * to some terminals) are shown as '?', and so is each byte that is not
 * part of valid UTF-8 (a file name's lone 0x9b, which an 8-bit terminal
 * takes as C1 too). Valid UTF-8 letters stay; the message can only shrink.
 * cmd/'s warnings and notes go through it too (fg_cmd_line). */
void fg_err_one_line(char *s)
{
	const unsigned char *r = (const unsigned char *)s;
	char *w = s;
	size_t left = strlen(s);

	while (left) {
		int shown;
		size_t n = fg_utf8_shown(r, left, &shown);

		if (!shown) {
			*w++ = '?';
		} else {
			memmove(w, r, n);
			w += n;
		}
		r += n;
		left -= n;
	}
	*w = '\0';
}

int fg_err_set(struct fg_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	fg_err_one_line(err->msg);
	return code;
}

int fg_err_wrap(struct fg_err *err, const char *fmt, ...)
{
	char old[FG_ERR_MSG_MAX];
	va_list ap;
	int n;

	if (!err)
		return FG_EINVAL;
	memcpy(old, err->msg, sizeof(old));
	va_start(ap, fmt);
	n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n + 2 < sizeof(err->msg)) {
		size_t room = sizeof(err->msg) - (size_t)n;

		err->msg[n] = ':';
		err->msg[n + 1] = ' ';
		memcpy(err->msg + n + 2, old, room - 2);
		err->msg[sizeof(err->msg) - 1] = '\0';
	}
	fg_err_one_line(err->msg);
	return err->code;
}

const char *fg_err_name(int code)
{
	switch (code) {
	case FG_OK: return "ok";
	case FG_ENOMEM: return "out of memory";
	case FG_EIO: return "i/o error";
	case FG_EINVAL: return "invalid input";
	case FG_EFORMAT: return "bad format";
	case FG_ENET: return "network error";
	case FG_EHASH: return "hash mismatch";
	case FG_ENOTFOUND: return "not found";
	case FG_EUNSUPPORTED: return "unsupported";
	case FG_EMISMATCH: return "mismatch";
	case FG_ENOSPC: return "no space left";
	case FG_EOFFLINE: return "offline";
	case FG_EBUSY: return "busy";
	case FG_EDEVICE: return "device error";
	case FG_EAUTH: return "authentication error";
	}
	return "unknown error";
}

void fg_err_clear(struct fg_err *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}
