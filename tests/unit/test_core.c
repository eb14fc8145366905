/* test_core.c - buf, json, sha256 and fsutil: the helpers everything uses. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "fsutil.h"
#include "json.h"
#include "sha256.h"
#include "tap.h"

static void test_buf(void)
{
	struct fg_buf b;
	struct fg_err err;
	int i, rc = 0;

	fg_buf_init(&b, 10);
	ok(fg_buf_puts(&b, "0123456789", &err) == 0, "buf: append up to max");
	ok(fg_buf_putc(&b, 'x', &err) != 0, "buf: refuse past max");
	is_int(b.len, 10, "buf: len unchanged after refusal");
	fg_buf_release(&b);
	fg_buf_init(&b, 0);
	for (i = 0; i < 1000 && !rc; i++)
		rc = fg_buf_printf(&b, &err, "%d,", i);
	ok(rc == 0 && b.len == 3890, "buf: printf grows (%zu)", b.len);
	fg_buf_reset(&b);
	fg_buf_json_str(&b, "a\"b\\\n\x01", 6, &err);
	is_str(b.data, "\"a\\\"b\\\\\\n\\u0001\"", "buf: json string escapes");
	fg_buf_release(&b);
	fg_buf_init(&b, 8);
	ok(fg_buf_puts(&b, "ab", &err) == 0 && fg_buf_reserve(&b, 6, &err) == 0 && b.len == 2 && b.cap >= 9,
	   "buf: reserve makes room up to max without changing len");
	memcpy(b.data + b.len, "cdefgh", 6);
	b.len += 6;
	b.data[b.len] = 0;
	is_str(b.data, "abcdefgh", "buf: bytes written into reserved room");
	ok(fg_buf_reserve(&b, 1, &err) != 0, "buf: reserve refuses past max");
	fg_buf_release(&b);
}

/* A message is one line of text fit for a terminal: C0, DEL, C1 (U+009B,
 * a CSI to some terminals) and each byte that is no valid UTF-8 (a lone
 * 0x9b from a file name) show as '?'; valid UTF-8 letters stay. */
static void test_err(void)
{
	struct fg_err err;
	char big[1200];

	fg_err_set(&err, FG_EIO, "open %s: x", "a\x1b[2Jb\xc2\x9b" "c\x9b" "d\xc3\xa9\xe6\x97\xa5\xff\xe2\x80");
	is_str(err.msg, "open a?[2Jb?c?d\xc3\xa9\xe6\x97\xa5???: x", "err: C0, C1, lone bytes as '?', letters kept");
	fg_err_set(&err, FG_EIO, "%s", "\x80\x9f\xc0\x9b\xed\xa0\x80\n");
	is_str(err.msg, "????????", "err: lone, overlong, surrogate bytes, newline");
	fg_err_wrap(&err, "in \xc2\x85%s", "\xf0\x9f\x98\x80");
	is_str(err.msg, "in ?\xf0\x9f\x98\x80: ????????", "err: wrap's prefix too, an emoji kept");
	memset(big, 'a', sizeof(big));
	memcpy(big + FG_ERR_MSG_MAX - 2, "\xc3\xa9", 2); /* cut after its first byte */
	big[sizeof(big) - 1] = '\0';
	fg_err_set(&err, FG_EIO, "%s", big);
	ok(strlen(err.msg) == FG_ERR_MSG_MAX - 1 && err.msg[FG_ERR_MSG_MAX - 2] == '?',
	   "err: a letter cut by the bound shows as '?'");
	/* the same for a warning's text outside an fg_err (cmd/'s fg_cmd_line) */
	memcpy(big, "m/a\x1b[31mb\x9b" "c\xc3\xa9\n", sizeof("m/a\x1b[31mb\x9b" "c\xc3\xa9\n"));
	fg_err_one_line(big);
	is_str(big, "m/a?[31mb?c\xc3\xa9?", "err: fg_err_one_line: ESC, a lone 0x9b, a newline as '?', a letter kept");
}

static void test_parse(void)
{
	unsigned long long u;
	int v;
	size_t s;

	ok(fg_parse_u64("18446744073709551615", &u) == 0 && u == 18446744073709551615ULL, "parse: u64 max");
	ok(fg_parse_u64("18446744073709551616", &u) != 0, "parse: u64 overflow refused");
	ok(fg_parse_size("64M", &u) == 0 && u == 64ULL << 20 && fg_parse_size("5m", &u) == 0 && u == 5ULL << 20 &&
		   fg_parse_size("500MiB", &u) == 0 && u == 500ULL << 20 && fg_parse_size("2G", &u) == 0 &&
		   u == 2ULL << 30 && fg_parse_size("123", &u) == 0 && u == 123,
	   "parse: sizes in powers of 1024 (K/M/G, KiB/MiB/GiB) and bare");
	ok(fg_parse_size("5GB", &u) == 0 && u == 5000000000ULL && fg_parse_size("64kB", &u) == 0 && u == 64000 &&
		   fg_parse_size("7B", &u) == 0 && u == 7,
	   "parse: sizes in powers of 1000 (kB/MB/GB, as transformers)");
	ok(fg_parse_size("5XB", &u) != 0 && fg_parse_size("GB", &u) != 0 && fg_parse_size("", &u) != 0 &&
		   fg_parse_size("-1M", &u) != 0 && fg_parse_size("5 GB", &u) != 0 &&
		   fg_parse_size("17179869184G", &u) != 0 && fg_parse_size("99999999999999999999999", &u) != 0,
	   "parse: size refusals (unknown unit, no digits, sign, space, past 64 bits)");
	ok(fg_parse_u64("12a", &u) != 0 && fg_parse_u64("", &u) != 0 && fg_parse_u64("-1", &u) != 0,
	   "parse: junk refused");
	ok(fg_parse_int("8", 1, 64, &v) == 0 && v == 8, "parse: int in range");
	ok(fg_parse_int("65", 1, 64, &v) != 0, "parse: int out of range");
	ok(fg_size_mul((size_t)1 << 40, (size_t)1 << 30, &s) != 0, "size: mul overflow");
	ok(fg_size_add(1, 2, &s) == 0 && s == 3, "size: add");
}

static void test_grow(void)
{
	long *a = NULL;
	size_t cap = 0, n, i;
	int good = 1;

	for (n = 0; n < 100 && good; n++) {
		good = fg_grow(&a, &cap, n, sizeof(*a)) == 0 && cap > n;
		if (good)
			a[n] = (long)n * 3;
	}
	for (i = 0; good && i < 100; i++)
		good = a[i] == (long)i * 3;
	ok(good && cap == 128, "grow: 100 elements kept in order, room doubled from 8 to 128 (cap %zu)", cap);
	ok(fg_grow(&a, &cap, 5, sizeof(*a)) == 0 && cap == 128, "grow: room left, nothing moves");
	n = cap;
	ok(fg_grow(&a, &cap, n, SIZE_MAX / 2) != 0 && cap == n && a[99] == 297,
	   "grow: a size that overflows is refused, the array kept");
	free(a);
}

static void test_json(void)
{
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err;
	cJSON *j = NULL;
	const char *in = "{\"b\": [3, 1.5, \"x\"], \"a\": {\"z\": null, \"y\": true}, \"c\": 12345678901}";

	ok(fg_json_parse(&j, in, strlen(in), "t", &err) == 0, "json: parse");
	fg_json_write(&b, j, 1, &err);
	is_str(b.data,
	       "{\n  \"a\": {\n    \"y\": true,\n    \"z\": null\n  },\n  \"b\": [\n    3,\n    1.5,\n"
	       "    \"x\"\n  ],\n  \"c\": 12345678901\n}\n",
	       "json: canonical pretty output, keys sorted");
	fg_buf_reset(&b);
	fg_json_write(&b, j, 0, &err);
	is_str(b.data, "{\"a\":{\"y\":true,\"z\":null},\"b\":[3,1.5,\"x\"],\"c\":12345678901}",
	       "json: canonical compact output");
	cJSON_Delete(j);
	ok(fg_json_parse(&j, "{\"a\":1} x", 9, "t", &err) == FG_EFORMAT, "json: trailing data refused");
	ok(fg_json_parse(&j, "{\"a\":", 5, "manifest.json", &err) == FG_EFORMAT &&
	   strstr(err.msg, "manifest.json"), "json: error names the input (%s)", err.msg);
	{
		char deep[200];

		memset(deep, '[', sizeof(deep));
		ok(fg_json_parse(&j, deep, sizeof(deep), "t", &err) == FG_EFORMAT, "json: depth limit");
	}
	/* strings cJSON 1.7.15 would cut short: refused, not truncated */
	ok(fg_json_parse(&j, "[\"a\\uz000b\"]", 12, "t", &err) == FG_EFORMAT && strstr(err.msg, "hex digits"),
	   "json: a \\u escape without hex digits refused (%s)", err.msg);
	ok(fg_json_parse(&j, "[\"a\\u0000b\"]", 12, "t", &err) == FG_EFORMAT && strstr(err.msg, "u0000"),
	   "json: \\u0000 refused (%s)", err.msg);
	ok(fg_json_parse(&j, "[\"a\0b\"]", 6, "t", &err) == FG_EFORMAT && strstr(err.msg, "NUL"),
	   "json: a raw NUL in a string refused (%s)", err.msg);
	/* fg_json_add_text: bytes that start no UTF-8 sequence become U+FFFD,
	 * NUL is \u0000, quotes and controls escaped; the canonical writer
	 * copies the item */
	j = cJSON_CreateObject();
	ok(fg_json_add_text(j, "t", "a\0\"\xc3\xa9\xff\xe6\x97\n", 9) == 0, "json: add_text");
	fg_buf_reset(&b);
	fg_json_write(&b, j, 0, &err);
	is_str(b.data, "{\"t\":\"a\\u0000\\\"\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\\n\"}",
	       "json: add_text escapes NUL and replaces invalid bytes one by one");
	cJSON_Delete(j);
	/* fg_json_parse_cut: \u0000 accepted, the string ends there; the rest
	 * of the document is read; other refusals stay */
	in = "{\"t\": \"a\\u0000b\", \"n\": [1, 2]}";
	ok(fg_json_parse_cut(&j, in, strlen(in), "t", &err) == 0 &&
	   !strcmp(fg_json_str(j, "t"), "a") && cJSON_GetArraySize(fg_json_arr(j, "n")) == 2,
	   "json: parse_cut takes \\u0000 and cuts that string there");
	cJSON_Delete(j);
	ok(fg_json_parse_cut(&j, "[\"a\\uz000b\"]", 12, "t", &err) == FG_EFORMAT &&
	   fg_json_parse_cut(&j, "[\"a\0b\"]", 6, "t", &err) == FG_EFORMAT,
	   "json: parse_cut still refuses a bad \\u escape and a raw NUL");
	in = "[\"a\\\\u0000\\u00e9\"]";
	ok(fg_json_parse(&j, in, strlen(in), "t", &err) == 0 &&
	   !strcmp(cJSON_GetArrayItem(j, 0)->valuestring, "a\\u0000\xc3\xa9"),
	   "json: an escaped backslash before u0000 and \\u00e9 are fine");
	cJSON_Delete(j);
	fg_buf_reset(&b);
	in = "{\"softcap\": 30.0, \"eps\": 1e-06, \"n\": [2, -0.50], \"s\": \"1.5 x\"}";
	ok(fg_json_parse(&j, in, strlen(in), "config.json", &err) == 0, "json: parse floats");
	fg_json_write(&b, j, 0, &err);
	is_str(b.data, "{\"eps\":1e-06,\"n\":[2,-0.50],\"s\":\"1.5 x\",\"softcap\":30.0}",
	       "json: float-spelled numbers keep their source text");
	cJSON_Delete(j);
	fg_buf_release(&b);
}

static void test_sha(void)
{
	uint8_t d[32];
	char hex[65];
	struct fg_err err;
	struct fg_sha256 *h;
	const char *abc = "abc";
	int i;

	fg_sha256_mem(abc, 3, d, &err);
	fg_hex_encode(d, 32, hex);
	is_str(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "sha256: abc vector");
	fg_sha256_new(&h, &err);
	for (i = 0; i < 3; i++)
		fg_sha256_update(h, abc + i, 1, &err);
	fg_sha256_final(h, d, &err);
	fg_hex_encode(d, 32, hex);
	is_str(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "sha256: byte by byte");
	fg_sha256_free(h);
	ok(fg_sha256_hex_valid(hex), "sha256: hex valid");
	ok(!fg_sha256_hex_valid("BA7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
	   "sha256: uppercase not canonical");
	ok(fg_hex_decode(hex, d, 32) == 0 && d[0] == 0xba, "hex: decode");
}

/* The hashing thread gives the same digests as the one-shot call, for many
 * pieces of awkward sizes (more than its queue holds) and digests in a row. */
static void test_sha_pipe(void)
{
	static uint8_t data[1 << 20];
	struct fg_sha256_pipe *p = NULL;
	struct fg_err err;
	uint8_t d[32];
	char want[3][65], got[3][65];
	uint64_t seq = 0;
	size_t i, off, step;
	int k, rc = 0;

	for (i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 2654435761u >> 13);
	ok(fg_sha256_pipe_new(&p, &err) == 0, "sha pipe: start");
	for (k = 0; k < 3; k++) {
		size_t len = k == 2 ? 0 : sizeof(data) - (size_t)k * 12345;

		fg_sha256_mem(data, len, d, &err);
		fg_hex_encode(d, 32, want[k]);
		/* k = 0: 300 pieces of 1..6990 bytes; k = 1: one piece; k = 2: nothing */
		for (off = 0, step = 1; off < len; off += step, step = step * 7 % 6991 + 1) {
			if (step > len - off)
				step = len - off;
			rc |= fg_sha256_pipe_update(p, data + off, k == 1 ? len : step, &seq, &err);
			if (k == 1)
				break;
		}
		memset(got[k], 0, sizeof(got[k]));
		rc |= fg_sha256_pipe_final(p, got[k], NULL, &err);
	}
	ok(!rc && seq > 0 && seq < fg_sha256_pipe_last(p), "sha pipe: pieces queued");
	ok(fg_sha256_pipe_drain(p, &err) == 0, "sha pipe: drained");
	is_str(got[0], want[0], "sha pipe: many small pieces");
	is_str(got[1], want[1], "sha pipe: second digest in a row");
	is_str(got[2], want[2], "sha pipe: empty digest");
	fg_sha256_pipe_free(p);
	fg_sha256_pipe_free(NULL);
}

/* Names planted where fg_file_write_atomic makes its temporary file
 * ("<path>.tmp.<pid>"): a symlink to a victim, another writer's file. Neither
 * is followed, truncated or renamed into place. */
static void test_fs_planted(const char *dir)
{
	struct fg_buf victim = FG_BUF_INIT, path = FG_BUF_INIT, tmp = FG_BUF_INIT, r = FG_BUF_INIT;
	struct fg_err err;
	struct stat sb;
	char target[PATH_MAX];
	ssize_t n;
	int rc;

	fg_buf_printf(&victim, &err, "%s/victim", dir);
	fg_buf_printf(&path, &err, "%s/sym.txt", dir);
	fg_buf_printf(&tmp, &err, "%s.tmp.%ld", path.data, (long)getpid());
	ok(fg_file_write_atomic(victim.data, "keep", 4, 0644, &err) == 0 && symlink(victim.data, tmp.data) == 0,
	   "fs: a symlink planted at the temporary name");
	rc = fg_file_write_atomic(path.data, "new", 3, 0644, &err);
	ok(rc == 0, "fs: atomic write beside a planted symlink succeeds (%s)", rc ? err.msg : "ok");
	ok(!fg_file_read(victim.data, 100, &r, &err) && r.len == 4 && !memcmp(r.data, "keep", 4),
	   "fs: the symlink's target is not written through");
	fg_buf_reset(&r);
	ok(!lstat(path.data, &sb) && S_ISREG(sb.st_mode) && !fg_file_read(path.data, 100, &r, &err) &&
	   r.len == 3 && !memcmp(r.data, "new", 3), "fs: the path is a regular file with the new bytes");
	n = readlink(tmp.data, target, sizeof(target) - 1);
	ok(n == (ssize_t)victim.len && !memcmp(target, victim.data, victim.len),
	   "fs: the planted symlink is left as it was");
	/* another writer's temporary file at that name: not truncated */
	fg_buf_reset(&path);
	fg_buf_reset(&tmp);
	fg_buf_reset(&r);
	fg_buf_printf(&path, &err, "%s/other.txt", dir);
	fg_buf_printf(&tmp, &err, "%s.tmp.%ld", path.data, (long)getpid());
	fg_file_write_atomic(tmp.data, "theirs", 6, 0644, &err);
	ok(fg_file_write_atomic(path.data, "mine", 4, 0644, &err) == 0 &&
	   !fg_file_read(tmp.data, 100, &r, &err) && r.len == 6 && !memcmp(r.data, "theirs", 6),
	   "fs: another file at the temporary name is not truncated");
	fg_buf_release(&victim);
	fg_buf_release(&path);
	fg_buf_release(&tmp);
	fg_buf_release(&r);
}

/* A child that waits to be killed: its pid, alive until SIGKILLed. */
static pid_t child_paused(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		for (;;)
			pause();
	}
	return pid;
}

/* Sets path's times (a link's own) age_s seconds in the past; passes rc on. */
static int age_path(int rc, const char *path, long age_s)
{
	struct timespec t[2];

	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= age_s;
	t[1] = t[0];
	return rc ? rc : utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW);
}

/* Plants a file at dir/name, its mtime age_s seconds in the past. */
static int plant(const char *dir, const char *name, long age_s, const char *target)
{
	struct fg_buf p = FG_BUF_INIT;
	struct fg_err err;
	int rc;

	fg_buf_printf(&p, &err, "%s/%s", dir, name);
	if (target) {
		rc = symlink(target, p.data);
	} else {
		int fd = open(p.data, O_WRONLY | O_CREAT | O_EXCL, 0644);

		rc = fd < 0 ? -1 : close(fd);
	}
	rc = age_path(rc, p.data, age_s);
	fg_buf_release(&p);
	return rc;
}

static int there(const char *dir, const char *name)
{
	struct fg_buf p = FG_BUF_INIT;
	struct fg_err err;
	struct stat sb;
	int rc;

	fg_buf_printf(&p, &err, "%s/%s", dir, name);
	rc = !lstat(p.data, &sb);
	fg_buf_release(&p);
	return rc;
}

/* What fg_file_write_atomic leaves behind a SIGKILL ("<path>.tmp.<pid>",
 * "<path>.tmp.<pid>.<n>"): the next write to path removes those of a dead
 * pid older than FG_TMP_GRACE_S; never a live pid's, a younger one, another
 * path's, or what is no regular file. A SIGKILLed child gives the dead pid. */
static void test_fs_leftovers(const char *dir)
{
	struct fg_buf sub = FG_BUF_INIT, path = FG_BUF_INIT;
	struct fg_err err;
	char n_dead[64], n_dead2[64], n_live[64], n_young[64], n_link[64], n_other[64], n_odd[64];
	pid_t dead = child_paused(), live = child_paused();
	long old = FG_TMP_GRACE_S + 60;

	ok(dead > 0 && live > 0 && !kill(dead, SIGKILL) && waitpid(dead, NULL, 0) == dead &&
	   kill(dead, 0) && errno == ESRCH, "fs: a SIGKILLed writer (pid %ld) and a live one (pid %ld)",
	   (long)dead, (long)live);
	fg_buf_printf(&sub, &err, "%s/left", dir);
	fg_mkdir_p(sub.data, 0755, &err);
	fg_buf_printf(&path, &err, "%s/lock.json", sub.data);
	snprintf(n_dead, sizeof(n_dead), "lock.json.tmp.%ld", (long)dead);
	snprintf(n_dead2, sizeof(n_dead2), "lock.json.tmp.%ld.3", (long)dead);
	snprintf(n_live, sizeof(n_live), "lock.json.tmp.%ld", (long)live);
	snprintf(n_young, sizeof(n_young), "lock.json.tmp.%ld.7", (long)dead);
	snprintf(n_link, sizeof(n_link), "lock.json.tmp.%ld.9", (long)dead);
	snprintf(n_other, sizeof(n_other), "other.json.tmp.%ld", (long)dead);
	snprintf(n_odd, sizeof(n_odd), "lock.json.tmp.%ldx", (long)dead);
	ok(!plant(sub.data, n_dead, old, NULL) && !plant(sub.data, n_dead2, old, NULL) &&
	   !plant(sub.data, n_live, old, NULL) && !plant(sub.data, n_young, 5, NULL) &&
	   !plant(sub.data, n_link, old, "lock.json") && !plant(sub.data, n_other, old, NULL) &&
	   !plant(sub.data, n_odd, old, NULL), "fs: leftovers planted beside lock.json");
	ok(fg_file_write_atomic(path.data, "{}\n", 3, 0644, &err) == 0, "fs: atomic write over them");
	ok(!there(sub.data, n_dead) && !there(sub.data, n_dead2),
	   "fs: the dead writer's old leftovers of that path are removed");
	ok(there(sub.data, n_live), "fs: a live pid's leftover stays");
	ok(there(sub.data, n_young), "fs: a dead pid's leftover younger than %d s stays", FG_TMP_GRACE_S);
	ok(there(sub.data, n_link) && there(sub.data, n_odd), "fs: a symlink and a name not quite ours stay");
	ok(there(sub.data, n_other), "fs: another path's leftover stays");
	ok(fg_file_sweep_tmps(sub.data, NULL, FG_TMP_GRACE_S) == 1 && !there(sub.data, n_other) &&
	   there(sub.data, n_live) && there(sub.data, n_young),
	   "fs: a sweep of the whole folder removes the other path's, nothing live or young");
	kill(live, SIGKILL);
	waitpid(live, NULL, 0);
	fg_buf_release(&sub);
	fg_buf_release(&path);
}

/* A bake's temporary folder (fg_tmp_dir_make): ".<name>.fgpack-tmp.<pid>"
 * beside out, tracked, so that fg_tmp_remove_all (what the signal handler
 * runs) removes it with what is in it; made again, it sweeps a dead pid's old
 * folder for the same out, never a live pid's or a file of that name. */
static void test_fs_tmp_dir(const char *dir)
{
	struct fg_buf out = FG_BUF_INIT, tmp = FG_BUF_INIT, tmp2 = FG_BUF_INIT, p = FG_BUF_INIT;
	struct fg_err err;
	char want[64], n_dead[64], n_live[64], n_file[64];
	pid_t dead = child_paused();
	struct timespec t[2];
	int slot = -1, slot2 = -1;

	ok(dead > 0 && !kill(dead, SIGKILL) && waitpid(dead, NULL, 0) == dead, "tmp dir: a dead pid");
	fg_buf_printf(&out, &err, "%s/baked", dir);
	snprintf(want, sizeof(want), "/.baked.fgpack-tmp.%ld", (long)getpid());
	ok(fg_tmp_dir_make(out.data, &tmp, &slot, &err) == 0 && slot >= 0 &&
	   strlen(tmp.data) > strlen(want) && !strcmp(tmp.data + strlen(tmp.data) - strlen(want), want),
	   "tmp dir: made and tracked as %s", tmp.data);
	ok(fg_tmp_dir_make(out.data, &tmp2, &slot2, &err) == 0 && strcmp(tmp.data, tmp2.data) &&
	   !strncmp(tmp2.data, tmp.data, tmp.len) && tmp2.data[tmp.len] == '.',
	   "tmp dir: a second one of this pid gets .<n>: %s", tmp2.data);
	fg_path_join(&p, tmp.data, "sub/deeper", &err);
	fg_mkdir_p(p.data, 0755, &err);
	ok(!plant(p.data, "f", 0, NULL) && !plant(tmp.data, "model.safetensors", 0, NULL) &&
	   !plant(tmp.data, "link", 0, "/"), "tmp dir: files, a link and folders in it");
	fg_tmp_remove_all();
	ok(!there(dir, tmp.data + strlen(dir) + 1) && !there(dir, tmp2.data + strlen(dir) + 1),
	   "tmp dir: fg_tmp_remove_all removes both with all in them");
	fg_tmp_untrack(slot);
	fg_tmp_untrack(slot2);
	snprintf(n_dead, sizeof(n_dead), ".baked.fgpack-tmp.%ld", (long)dead);
	snprintf(n_live, sizeof(n_live), ".baked.fgpack-tmp.%ld", (long)getppid());
	snprintf(n_file, sizeof(n_file), ".baked.fgpack-tmp.%ld.2", (long)dead);
	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= FG_TMP_GRACE_S + 60;
	t[1] = t[0];
	fg_buf_reset(&p);
	fg_buf_printf(&p, &err, "%s/%s", dir, n_dead);
	ok(!mkdir(p.data, 0755) && !plant(p.data, "x", FG_TMP_GRACE_S + 60, NULL) &&
	   !utimensat(AT_FDCWD, p.data, t, 0), "tmp dir: a dead pid's old folder");
	fg_buf_reset(&p);
	fg_buf_printf(&p, &err, "%s/%s", dir, n_live);
	ok(!mkdir(p.data, 0755) && !utimensat(AT_FDCWD, p.data, t, 0), "tmp dir: a live pid's old folder");
	ok(!plant(dir, n_file, FG_TMP_GRACE_S + 60, NULL), "tmp dir: a dead pid's old file of that name");
	ok(fg_tmp_dir_make(out.data, &tmp, &slot, &err) == 0, "tmp dir: made again");
	ok(!there(dir, n_dead) && there(dir, n_live) && there(dir, n_file),
	   "tmp dir: the dead pid's folder is swept; the live pid's and the file stay");
	fg_rm_tree(tmp.data);
	fg_tmp_untrack(slot);
	fg_buf_reset(&out);
	fg_buf_printf(&out, &err, "%s/baked/", dir);
	ok(fg_tmp_dir_make(out.data, &tmp, &slot, &err) == FG_EINVAL && slot == -1,
	   "tmp dir: a trailing '/' is refused: %s", err.msg);
	fg_buf_release(&out);
	fg_buf_release(&tmp);
	fg_buf_release(&tmp2);
	fg_buf_release(&p);
}

/* Makes folder dir/name holding a file f (and, with deep, a folder sub),
 * all age_s seconds old; with target, a link to it instead. */
static int plant_dir(const char *dir, const char *name, long age_s, int deep, const char *target)
{
	struct fg_buf p = FG_BUF_INIT;
	struct fg_err err;
	int rc;

	if (target)
		return plant(dir, name, age_s, target);
	fg_buf_printf(&p, &err, "%s/%s", dir, name);
	rc = mkdir(p.data, 0755) || plant(p.data, "f", age_s, NULL) || (deep && plant_dir(p.data, "sub", age_s, 0, NULL));
	rc = age_path(rc, p.data, age_s);
	fg_buf_release(&p);
	return rc;
}

/* 1 when dir holds every one of the n names; names those it lacks */
static int all_there(const char *dir, const char *const *names, size_t n)
{
	int all = 1;

	for (size_t i = 0; i < n; i++)
		if (!there(dir, names[i])) {
			all = 0;
			printf("#   %s was removed\n", names[i]);
		}
	return all;
}

/* What bakes of out left before the ".fgpack-tmp.<pid>" naming, with no pid
 * (fg_tmp_sweep_old_bake): int4's ".<out>.fgpack-tmp-XXXXXX" and
 * prune-head's flat "<out>.partial", unchanged for FG_TMP_GRACE_S, are
 * removed; a younger one, a name not exactly theirs, another output's, a
 * link (and what it points to), a file, a ".partial" holding a folder or
 * with a statement beside it (a finished bake named so) all stay. */
static void test_fs_old_bake(const char *dir)
{
	static const char *const keep[] = {
		".m.fgpack-tmp-Qw9Er1", ".m.fgpack-tmp-Ab3xY", ".m.fgpack-tmp-Ab3x_z", ".m.fgpack-tmp-Ab3xYz7",
		".n.fgpack-tmp-Ab3xYz", ".m.fgpack-tmp-Lnk123", ".m.fgpack-tmp-Fil123", "target", "mm.partial",
		"p2.partial", "p3.partial", "p3.partial.intoto.json", "p4.partial", "p5.partial", "flat",
	};
	struct fg_buf sub = FG_BUF_INIT, out = FG_BUF_INIT, tmp = FG_BUF_INIT;
	struct fg_err err;
	long old = FG_TMP_GRACE_S + 60;
	int all, slot = -1;

	fg_buf_printf(&sub, &err, "%s/oldbake", dir);
	fg_mkdir_p(sub.data, 0755, &err);
	ok(!plant_dir(sub.data, ".m.fgpack-tmp-Ab3xYz", old, 1, NULL) && !plant_dir(sub.data, "m.partial", old, 0, NULL) &&
	   !plant_dir(sub.data, ".m.fgpack-tmp-Qw9Er1", 5, 0, NULL) && !plant_dir(sub.data, ".m.fgpack-tmp-Ab3xY", old, 0, NULL) &&
	   !plant_dir(sub.data, ".m.fgpack-tmp-Ab3x_z", old, 0, NULL) &&
	   !plant_dir(sub.data, ".m.fgpack-tmp-Ab3xYz7", old, 0, NULL) &&
	   !plant_dir(sub.data, ".n.fgpack-tmp-Ab3xYz", old, 0, NULL) && !plant_dir(sub.data, "target", old, 0, NULL) &&
	   !plant_dir(sub.data, ".m.fgpack-tmp-Lnk123", old, 0, "target") &&
	   !plant(sub.data, ".m.fgpack-tmp-Fil123", old, NULL) && !plant_dir(sub.data, "mm.partial", old, 0, NULL) &&
	   !plant_dir(sub.data, "p2.partial", old, 1, NULL) && !plant_dir(sub.data, "p3.partial", old, 0, NULL) &&
	   !plant(sub.data, "p3.partial.intoto.json", old, NULL) && !plant(sub.data, "p4.partial", old, NULL) &&
	   !plant_dir(sub.data, "flat", old, 0, NULL) && !plant_dir(sub.data, "p5.partial", old, 0, "flat"),
	   "old bake: leftovers planted");
	ok(fg_tmp_sweep_old_bake(sub.data, "m", FG_TMP_GRACE_S) == 2 && !there(sub.data, ".m.fgpack-tmp-Ab3xYz") &&
	   !there(sub.data, "m.partial"), "old bake: int4's mkdtemp folder and prune-head's m.partial removed");
	all = all_there(sub.data, keep, sizeof(keep) / sizeof(keep[0]));
	ok(all, "old bake: a young one, near names, another output's, a link, a file stay");
	ok(!fg_tmp_sweep_old_bake(sub.data, "p2", FG_TMP_GRACE_S) && !fg_tmp_sweep_old_bake(sub.data, "p3", FG_TMP_GRACE_S) &&
	   !fg_tmp_sweep_old_bake(sub.data, "p4", FG_TMP_GRACE_S) && !fg_tmp_sweep_old_bake(sub.data, "p5", FG_TMP_GRACE_S) &&
	   there(sub.data, "p2.partial/sub/f") && there(sub.data, "p3.partial/f") && there(sub.data, "flat/f"),
	   "old bake: a .partial holding a folder, one with a statement beside it, a file, a link stay");
	ok(!plant_dir(sub.data, ".q.fgpack-tmp-Zz0000", old, 0, NULL) && !plant_dir(sub.data, "q.partial", old, 0, NULL),
	   "old bake: leftovers of q planted");
	fg_buf_printf(&out, &err, "%s/q", sub.data);
	ok(fg_tmp_dir_make(out.data, &tmp, &slot, &err) == 0 && !there(sub.data, ".q.fgpack-tmp-Zz0000") &&
	   !there(sub.data, "q.partial"), "old bake: fg_tmp_dir_make for q removes them");
	fg_rm_tree(tmp.data);
	fg_tmp_untrack(slot);
	fg_buf_release(&sub);
	fg_buf_release(&out);
	fg_buf_release(&tmp);
}

/* What extractions to dest left before the ".fgpack-tmp.<pid>" naming
 * (fg_tmp_sweep_old_extract): mkdtemp's "<dest>.partial.XXXXXX", unchanged
 * for FG_TMP_GRACE_S, is removed with what is in it; a younger one, a name
 * not exactly that, another dest's, a link (and what it points to), a file
 * and a bake's old names stay; fg_tmp_extract_dir_make sweeps the same. */
static void test_fs_old_extract(const char *dir)
{
	static const char *const keep[] = {
		"x.partial.Qw9Er1", "x.partial.Ab3xY", "x.partial.Ab3x_z", "x.partial.Ab3xYz7", "y.partial.Ab3xYz",
		"xx.partial.Ab3xYz", "x.partial.Lnk123", "x.partial.Fil123", "target", "x.partial",
		".x.fgpack-tmp-Ab3xYz",
	};
	struct fg_buf sub = FG_BUF_INIT, out = FG_BUF_INIT, tmp = FG_BUF_INIT;
	struct fg_err err;
	long old = FG_TMP_GRACE_S + 60;
	int all, slot = -1;

	fg_buf_printf(&sub, &err, "%s/oldextract", dir);
	fg_mkdir_p(sub.data, 0755, &err);
	ok(!plant_dir(sub.data, "x.partial.Ab3xYz", old, 1, NULL) && !plant_dir(sub.data, "x.partial.Qw9Er1", 5, 0, NULL) &&
	   !plant_dir(sub.data, "x.partial.Ab3xY", old, 0, NULL) && !plant_dir(sub.data, "x.partial.Ab3x_z", old, 0, NULL) &&
	   !plant_dir(sub.data, "x.partial.Ab3xYz7", old, 0, NULL) && !plant_dir(sub.data, "y.partial.Ab3xYz", old, 0, NULL) &&
	   !plant_dir(sub.data, "xx.partial.Ab3xYz", old, 0, NULL) && !plant_dir(sub.data, "target", old, 0, NULL) &&
	   !plant_dir(sub.data, "x.partial.Lnk123", old, 0, "target") && !plant(sub.data, "x.partial.Fil123", old, NULL) &&
	   !plant_dir(sub.data, "x.partial", old, 0, NULL) && !plant_dir(sub.data, ".x.fgpack-tmp-Ab3xYz", old, 0, NULL),
	   "old extract: leftovers planted");
	ok(fg_tmp_sweep_old_extract(sub.data, "x", FG_TMP_GRACE_S) == 1 && !there(sub.data, "x.partial.Ab3xYz"),
	   "old extract: the mkdtemp folder x.partial.XXXXXX a minute old is removed, a folder in it too");
	all = all_there(sub.data, keep, sizeof(keep) / sizeof(keep[0]));
	ok(all && there(sub.data, "target/f"),
	   "old extract: a young one, near names, another dest's, a link, a file, a bake's names stay");
	ok(!plant_dir(sub.data, "z.partial.Zz0000", old, 1, NULL) && !plant_dir(sub.data, "z.partial", old, 0, NULL),
	   "old extract: leftovers of z planted");
	fg_buf_printf(&out, &err, "%s/z", sub.data);
	ok(fg_tmp_extract_dir_make(out.data, &tmp, &slot, &err) == 0 && !there(sub.data, "z.partial.Zz0000") &&
	   there(sub.data, "z.partial/f"),
	   "old extract: fg_tmp_extract_dir_make for z removes z.partial.XXXXXX, not a bake's z.partial");
	fg_rm_tree(tmp.data);
	fg_tmp_untrack(slot);
	fg_buf_release(&sub);
	fg_buf_release(&out);
	fg_buf_release(&tmp);
}

/* A private pid folder in a shared one (fg_tmp_pid_dir_make, exec's
 * "$TMPDIR/fgpack-bundle-<pid>"): "<base>-<pid>" mode 0700, then ".<n>",
 * tracked, also after it is removed and made again under that name (as the
 * extraction's rename does); made again, it sweeps a dead pid's old folder
 * and dead pids' old extraction folders of that base, never a live pid's, a
 * younger one, mkdtemp's "<base>.XXXXXX" of earlier versions (no pid), a
 * link (nor what it points to) or a file. */
static void test_fs_pid_dir(const char *dir)
{
	struct fg_buf sub = FG_BUF_INIT, tmp = FG_BUF_INIT, tmp2 = FG_BUF_INIT;
	char n[15][96], want[64];
	const char *kept[10];
	struct fg_err err;
	struct stat sb;
	pid_t dead = child_paused();
	long old = FG_TMP_GRACE_S + 60, d, live = (long)getppid();
	int slot = -1, slot2 = -1, all;
	size_t i;

	ok(dead > 0 && !kill(dead, SIGKILL) && waitpid(dead, NULL, 0) == dead, "pid dir: a dead pid");
	d = (long)dead;
	fg_buf_printf(&sub, &err, "%s/piddir", dir);
	fg_mkdir_p(sub.data, 0755, &err);
	snprintf(want, sizeof(want), "/fgb-%ld", (long)getpid());
	ok(fg_tmp_pid_dir_make(sub.data, "fgb", &tmp, &slot, &err) == 0 && slot >= 0 &&
	   !strcmp(tmp.data + sub.len, want) && !stat(tmp.data, &sb) && (sb.st_mode & 0777) == 0700,
	   "pid dir: made 0700 and tracked as %s", tmp.data);
	ok(fg_tmp_pid_dir_make(sub.data, "fgb", &tmp2, &slot2, &err) == 0 && !strncmp(tmp2.data, tmp.data, tmp.len) &&
	   tmp2.data[tmp.len] == '.', "pid dir: a second one of this pid gets .<n>: %s", tmp2.data);
	ok(!rmdir(tmp.data) && !mkdir(tmp.data, 0755) && !plant(tmp.data, "f", 0, NULL),
	   "pid dir: removed and made again under that name, a file in it");
	fg_tmp_remove_all();
	ok(!there(sub.data, want + 1) && !there(sub.data, tmp2.data + sub.len + 1),
	   "pid dir: fg_tmp_remove_all removes both, the one made again too");
	fg_tmp_untrack(slot);
	fg_tmp_untrack(slot2);
	/* 0-9 stay, 10-14 go */
	snprintf(n[0], sizeof(n[0]), "fgb.Ab3xYz");
	snprintf(n[1], sizeof(n[1]), "fgb.123456");
	snprintf(n[2], sizeof(n[2]), "fgb-%ld.7", d); /* young */
	snprintf(n[3], sizeof(n[3]), "fgb-%ld", live);
	snprintf(n[4], sizeof(n[4]), "fgb-%ld.8", d); /* a link */
	snprintf(n[5], sizeof(n[5]), "fgb-%ld.9", d); /* a file */
	snprintf(n[6], sizeof(n[6]), ".fgb-%ld.fgpack-tmp.%ld", live, live);
	snprintf(n[7], sizeof(n[7]), "fgbx-%ld", d);
	snprintf(n[8], sizeof(n[8]), ".fgbx-%ld.fgpack-tmp.%ld", d, d);
	snprintf(n[9], sizeof(n[9]), "target");
	snprintf(n[10], sizeof(n[10]), "fgb-%ld", d);
	snprintf(n[11], sizeof(n[11]), "fgb-%ld.4", d);
	snprintf(n[12], sizeof(n[12]), ".fgb-%ld.fgpack-tmp.%ld", d, d);
	snprintf(n[13], sizeof(n[13]), ".fgb.Qw9Er1.fgpack-tmp.%ld.3", d);
	snprintf(n[14], sizeof(n[14]), ".fgb-%ld.fgpack-tmp.%ld", live, d);
	for (i = 0; i < 10; i++)
		kept[i] = n[i];
	ok(!plant_dir(sub.data, n[0], old, 0, NULL) && !plant_dir(sub.data, n[1], old, 0, NULL) &&
	   !plant_dir(sub.data, n[2], 5, 0, NULL) && !plant_dir(sub.data, n[3], old, 0, NULL) &&
	   !plant_dir(sub.data, n[9], old, 0, NULL) && !plant_dir(sub.data, n[4], old, 0, n[9]) &&
	   !plant(sub.data, n[5], old, NULL) && !plant_dir(sub.data, n[6], old, 0, NULL) &&
	   !plant_dir(sub.data, n[7], old, 0, NULL) && !plant_dir(sub.data, n[8], old, 0, NULL) &&
	   !plant_dir(sub.data, n[10], old, 1, NULL) && !plant_dir(sub.data, n[11], old, 0, NULL) &&
	   !plant_dir(sub.data, n[12], old, 1, NULL) && !plant_dir(sub.data, n[13], old, 0, NULL) &&
	   !plant_dir(sub.data, n[14], old, 0, NULL), "pid dir: leftovers planted");
	ok(fg_tmp_pid_dir_make(sub.data, "fgb", &tmp, &slot, &err) == 0 && !there(sub.data, n[10]) &&
	   !there(sub.data, n[11]) && !there(sub.data, n[12]) && !there(sub.data, n[13]) && !there(sub.data, n[14]),
	   "pid dir: a dead pid's old folders and dead writers' old extraction folders are swept");
	all = all_there(sub.data, kept, 10);
	ok(all && there(sub.data, "target/f"),
	   "pid dir: a live pid's, a young one, mkdtemp's names, a link, a file, another base's stay");
	fg_rm_tree(tmp.data);
	fg_tmp_untrack(slot);
	ok(fg_tmp_pid_dir_make(sub.data, "a/b", &tmp, &slot, &err) == FG_EINVAL && slot == -1,
	   "pid dir: a base with '/' is refused: %s", err.msg);
	fg_buf_release(&sub);
	fg_buf_release(&tmp);
	fg_buf_release(&tmp2);
}

/* 1 when folder dir holds a name with ".tmp." in it */
static int tmp_left(const char *dir)
{
	struct fg_buf cmd = FG_BUF_INIT;
	struct fg_err err;
	int rc;

	fg_buf_printf(&cmd, &err, "ls -A '%s' | grep -q '[.]tmp[.]'", dir);
	rc = system(cmd.data) == 0;
	fg_buf_release(&cmd);
	return rc;
}

/* Outputs that are no regular file (fg_out_open, fg_file_write_out): a FIFO
 * and a character device (a private c 1 3, as /dev/null; root only) are
 * written through and stay what they were, a link to one stays a link; a
 * socket and a folder are refused by name; a regular file and a link to one
 * are replaced atomically as before. */
static void test_fs_out(const char *dir)
{
	struct fg_buf sub = FG_BUF_INIT, p = FG_BUF_INIT, l = FG_BUF_INIT, r = FG_BUF_INIT;
	struct sockaddr_un sa;
	struct fg_err err;
	struct stat sb;
	char got[8];
	int rfd, fd, s, rc;

	fg_buf_printf(&sub, &err, "%s/out", dir);
	fg_mkdir_p(sub.data, 0755, &err);

	/* a FIFO, its reader already there so that the open does not wait */
	fg_buf_printf(&p, &err, "%s/fifo", sub.data);
	rfd = mkfifo(p.data, 0644) ? -1 : open(p.data, O_RDONLY | O_NONBLOCK);
	ok(rfd >= 0, "fs out: a FIFO and its reader");
	rc = fg_file_write_out(p.data, "abc", 3, 0644, &err);
	ok(rc == 0, "fs out: write to the FIFO (%s)", rc ? err.msg : "ok");
	ok(read(rfd, got, sizeof(got)) == 3 && !memcmp(got, "abc", 3), "fs out: its reader got the bytes");
	ok(!lstat(p.data, &sb) && S_ISFIFO(sb.st_mode) && !tmp_left(sub.data),
	   "fs out: it is still a FIFO, no temporary file beside it");
	close(rfd);

	/* a character device of our own: /dev/null's numbers */
	fg_buf_reset(&p);
	fg_buf_printf(&p, &err, "%s/null", sub.data);
	fg_buf_printf(&l, &err, "%s/link", sub.data);
	if (mknod(p.data, S_IFCHR | 0666, makedev(1, 3)) == 0 && chmod(p.data, 0666) == 0 &&
	    symlink("null", l.data) == 0) {
		rc = fg_file_write_out(p.data, "abc", 3, 0644, &err);
		ok(rc == 0, "fs out: write to a character device (%s)", rc ? err.msg : "ok");
		rc = fg_file_write_out(l.data, "abc", 3, 0600, &err);
		ok(rc == 0, "fs out: write through a symlink to it (%s)", rc ? err.msg : "ok");
		ok(!lstat(p.data, &sb) && S_ISCHR(sb.st_mode) && (sb.st_mode & 07777) == 0666 &&
		   !lstat(l.data, &sb) && S_ISLNK(sb.st_mode) && !tmp_left(sub.data),
		   "fs out: the device, its mode and the link stay, no temporary file beside them");
	} else {
		printf("# skipped: mknod failed (not root): no character device checks\n");
	}

	/* refused: a socket, a folder; nothing made */
	fg_buf_reset(&p);
	fg_buf_printf(&p, &err, "%s/sock", sub.data);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", p.data);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	ok(s >= 0 && !bind(s, (struct sockaddr *)&sa, sizeof(sa)), "fs out: a socket");
	rc = fg_file_write_out(p.data, "abc", 3, 0644, &err);
	ok(rc == FG_EINVAL && strstr(err.msg, "sock is a socket") && !strchr(err.msg, '\n'),
	   "fs out: a socket refused in one line (%s)", err.msg);
	ok(!lstat(p.data, &sb) && S_ISSOCK(sb.st_mode) && !tmp_left(sub.data), "fs out: it is still a socket");
	close(s);
	ok(fg_out_check(sub.data, &err) == FG_EINVAL && strstr(err.msg, "out is a folder"),
	   "fs out: a folder refused (%s)", err.msg);
	fd = -2;
	ok(fg_out_open(sub.data, &fd, &err) == FG_EINVAL && fd == -1, "fs out: ... by fg_out_open too, no fd");

	/* a regular file and a link to one: atomically replaced, as before */
	fg_buf_reset(&p);
	fg_buf_reset(&l);
	fg_buf_printf(&p, &err, "%s/file", sub.data);
	fg_buf_printf(&l, &err, "%s/flink", sub.data);
	fd = -2;
	ok(fg_out_check(p.data, &err) == 0 && fg_out_open(p.data, &fd, &err) == 0 && fd == -1,
	   "fs out: a missing path is left to the atomic writer");
	ok(fg_file_write_out(p.data, "old", 3, 0644, &err) == 0 && symlink("file", l.data) == 0 &&
	   fg_out_open(p.data, &fd, &err) == 0 && fd == -1 && fg_out_open(l.data, &fd, &err) == 0 &&
	   fd == -1, "fs out: a regular file and a link to one are left to it too");
	ok(fg_file_write_out(l.data, "new", 3, 0644, &err) == 0 && !lstat(l.data, &sb) && S_ISREG(sb.st_mode) &&
	   !fg_file_read(l.data, 100, &r, &err) && r.len == 3 && !memcmp(r.data, "new", 3),
	   "fs out: a link to a regular file is replaced by the new file, as fg_file_write_atomic does");
	fg_buf_release(&sub);
	fg_buf_release(&p);
	fg_buf_release(&l);
	fg_buf_release(&r);
}

static void test_fs(void)
{
	char dir[] = "/tmp/fgtest_core_XXXXXX";
	struct fg_buf p = FG_BUF_INIT, r = FG_BUF_INIT;
	struct fg_err err;

	ok(mkdtemp(dir) != NULL, "fs: mkdtemp");
	fg_path_join(&p, dir, "a/b/c", &err);
	ok(fg_mkdir_p(p.data, 0755, &err) == 0, "fs: mkdir -p");
	fg_buf_puts(&p, "/f.txt", &err);
	ok(fg_file_write_atomic(p.data, "hello", 5, 0644, &err) == 0, "fs: atomic write");
	ok(fg_file_read(p.data, 100, &r, &err) == 0 && r.len == 5 && !memcmp(r.data, "hello", 5), "fs: read back");
	fg_buf_reset(&r);
	ok(fg_file_read(p.data, 4, &r, &err) == FG_EINVAL, "fs: read bound enforced");
	test_fs_planted(dir);
	test_fs_leftovers(dir);
	test_fs_tmp_dir(dir);
	test_fs_old_bake(dir);
	test_fs_old_extract(dir);
	test_fs_pid_dir(dir);
	test_fs_out(dir);
	ok(fg_path_is_safe_rel("a/b.txt") && !fg_path_is_safe_rel("../x") && !fg_path_is_safe_rel("/x") &&
	   !fg_path_is_safe_rel("a//b") && !fg_path_is_safe_rel("a/./b") && !fg_path_is_safe_rel("a\\b") &&
	   !fg_path_is_safe_rel("a/..") && !fg_path_is_safe_rel(""), "fs: safe relative paths");
	fg_buf_reset(&r);
	fg_buf_printf(&r, &err, "rm -rf %s", dir);
	ok(system(r.data) == 0, "fs: cleanup");
	fg_buf_release(&p);
	fg_buf_release(&r);
}

int main(void)
{
	test_buf();
	test_err();
	test_parse();
	test_grow();
	test_json();
	test_sha();
	test_sha_pipe();
	test_fs();
	return tap_done();
}
