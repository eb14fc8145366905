/* err.h - error codes and the message carrier every fallible fgpack call fills.
 *
 * Functions that can fail return 0 or a negative FG_E* code and take a
 * struct fg_err * last. lib/ never prints: cmd/ turns err->msg into one line
 * on stderr. A NULL err is allowed and means "caller does not want text". */
#ifndef FG_ERR_H
#define FG_ERR_H

#include <stddef.h>

enum {
	FG_OK = 0,
	FG_ENOMEM = -1,       /* allocation failed */
	FG_EIO = -2,          /* file system or stream error */
	FG_EINVAL = -3,       /* bad argument or malformed input */
	FG_EFORMAT = -4,      /* a file does not follow its format */
	FG_ENET = -5,         /* network or HTTP failure */
	FG_EHASH = -6,        /* content did not match its expected digest */
	FG_ENOTFOUND = -7,    /* a thing that should exist does not */
	FG_EUNSUPPORTED = -8, /* valid but not something we handle */
	FG_EMISMATCH = -9,    /* verification found a difference */
	FG_ENOSPC = -10,      /* not enough disk space */
	FG_EOFFLINE = -11,    /* would need the network while offline */
	FG_EBUSY = -12,       /* resource held by another process */
	FG_EDEVICE = -13,     /* accelerator failure */
	FG_EAUTH = -14,       /* credentials missing or refused; signature invalid */
};

#define FG_ERR_MSG_MAX 1024

struct fg_err {
	int code;
	char msg[FG_ERR_MSG_MAX];
};

/* Records code and a printf-style message in err (when err is not NULL) and
 * returns code, so callers can write `return fg_err_set(err, FG_EIO, ...)`. */
int fg_err_set(struct fg_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefixes err->msg with "<prefix>: " (printf-style); returns err->code. Use
 * when passing an error up with more context. */
int fg_err_wrap(struct fg_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Rewrites s in place as fg_err_set and fg_err_wrap write a message: each
 * control character (C0, DEL, C1 such as U+009B) and each byte that is not
 * part of valid UTF-8 (a lone 0x9b) becomes '?'; valid UTF-8 letters stay.
 * For a line shown on a terminal outside an fg_err: a warning or note
 * naming a file that a manifest, lock, archive or folder gave. */
void fg_err_one_line(char *s);

/* Short lowercase name for a code, e.g. "i/o error". */
const char *fg_err_name(int code);

void fg_err_clear(struct fg_err *err);

#endif
