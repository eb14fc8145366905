/* fuzz_tarlanes.c - differential fuzz target for the lanes reader
 * (lib/tarlanes.h): the input is a few cut points and a tar stream; the tar
 * is compressed as one zstd frame per span between the cuts, with the
 * seekable format's seek table after them (as pack writes, but cut where
 * the input says, header or not), under a private $TMPDIR. The archive is
 * scanned hashing every member, in lanes on 1 and 2 threads and from start
 * to end (FG_TAR_LANES=0; with its frame walk and with zstd alone,
 * FG_TAR_RAW=0), then extracted the same three ways. Contract: the
 * same return code, message and members (name, size, mode, digest, in
 * order) every way, and the same files written (path, mode, bytes), only
 * regular files and folders, nothing at all after a refusal; a refusal is
 * one line.
 *
 * With bit 3 of byte 0 set, every reader is also asked for the identity
 * (o.id_thread: informational, read from start to end beside the lanes),
 * which must then be the same every way too.
 *
 * With bit 4 of byte 0 set, the frames are made here of raw blocks (how zstd
 * stores bytes it cannot compress, which the lanes hand to the hash without
 * zstd), the last one valid or spoilt as bits 5-7 say (tests/unit/
 * seek_test.h: a checksum, an empty last block, 4 KiB blocks, a block over
 * 128 KiB, a wrong content size, ...).
 *
 * With bit 1 of the first cut's third byte set, the identity's states
 * frame (the bundle id's chain state at each frame's start, as pack writes
 * it) goes before the seek table, right or, with bit 2, one state spoilt
 * (which one: bits 3-7): the lanes then compute the identity too. With
 * the identity asked for as well, the archive is also scanned and
 * extracted hashing no member (as against an expected id), both keeping
 * members of up to 3 KiB (as audit does), the three ways again: the lanes
 * may then cut a member at any frame inside it, its file made first and
 * written in parts (FG_TAR_TEST_FRAME_MAX=4096 here, so that a member of a
 * few KiB counts as large).
 *
 * With bit 1 of the second cut's third byte set, the readings are done
 * again with chain states every 512 bytes for every member of over 512
 * bytes (computed here from the files a sequential extraction wrote; with
 * bit 2, every state of the first such member spoilt): the lanes may then
 * cut a member where a frame starts at one, its digest taken up from there.
 *
 * Input: byte 0 = number of cuts (low 3 bits); then 3 bytes per cut, a
 * little-endian count of 512-byte blocks (a cut is at that block, plus the
 * low bit of the byte after as an extra 100 bytes, so cuts fall on headers
 * and off them); the rest is the tar. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "buf.h"
#include "fsutil.h"
#include "sha256.h"
#include "tarball.h"
#include "tests/unit/seek_test.h"

static char base[4096], fgb[4200];
static int want_id; /* readers also asked for the identity */
static int hash_members = 1; /* 0: no member's digest (the identity the check) */

/* chain states every 512 bytes of the members (chains mode) */
#define CH_MAX 64
static struct fg_tarball_chain ch[CH_MAX];
static size_t n_ch;
static int use_chains;

static void cleanup(void)
{
	fg_rm_tree(base);
}

static void setup(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(base, sizeof(base), "%s/fuzz_tarlanes.XXXXXX", t ? t : "/tmp");
	if (!mkdtemp(base) || atexit(cleanup))
		abort();
	snprintf(fgb, sizeof(fgb), "%s/in.fgb", base);
	setenv("FG_TAR_TEST_FRAME_MAX", "4096", 1);
}

static int add_entry(void *user, const struct fg_tarball_entry *e, struct fg_err *err)
{
	char hex[FG_SHA256_HEX_LEN + 1], kept[FG_SHA256_HEX_LEN + 1] = "-";
	uint8_t d[32];

	fg_hex_encode(e->sha256, 32, hex);
	if (e->content) { /* a kept member's bytes, and the NUL after them */
		if (fg_sha256_mem(e->content, (size_t)e->size, d, NULL) || ((const char *)e->content)[e->size])
			abort();
		fg_hex_encode(d, 32, kept);
	}
	return fg_buf_printf(user, err, "%s %llu %o %d %s %s\n", e->path, e->size, (unsigned)e->mode,
			     e->is_dir, e->hashed ? hex : "-", kept);
}

/* With no member's digest: the bytes of members up to 3 KiB kept (audit's
 * way), read whole by one lane. */
static size_t keep_small(void *user, const char *path)
{
	(void)user;
	(void)path;
	return 3072;
}

/* Every member hashed (or none: hash_members), small limits, lanes on
 * `threads` threads or off. */
static void read_opts(struct fg_tarball_read_opts *o, struct fg_tarball_limits *lim, int threads,
		      int lanes_on)
{
	if (lanes_on)
		unsetenv("FG_TAR_LANES");
	else
		setenv("FG_TAR_LANES", "0", 1);
	memset(o, 0, sizeof(*o));
	o->lim = lim;
	o->hash = hash_members;
	o->keep = hash_members ? NULL : keep_small;
	o->chains = use_chains ? ch : NULL;
	o->n_chains = use_chains ? n_ch : 0;
	o->id_thread = want_id;
	o->threads = threads;
}

/* The outcome's line: code, message, the identity when asked and read. */
static void outcome(struct fg_buf *out, int rc, const struct fg_err *err, const uint8_t id[32])
{
	char hex[FG_SHA256_HEX_LEN + 1] = "-";

	if (rc && (!err->msg[0] || strchr(err->msg, '\n')))
		abort();
	if (want_id && !rc)
		fg_hex_encode(id, 32, hex);
	if (fg_buf_printf(out, NULL, "rc %d %s id %s\n", rc, rc ? err->msg : "", hex))
		abort();
}

/* Lists dir's files below rel (path, mode, size, sha256) into out; every
 * entry must be a regular file or a folder. */
static void list_tree(const char *dir, const char *rel, struct fg_buf *out)
{
	char path[8192];
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char sub[8192], full[16384];
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", e->d_name);
		snprintf(full, sizeof(full), "%s/%s", dir, sub);
		if (lstat(full, &st))
			abort();
		if (S_ISDIR(st.st_mode)) {
			fg_buf_printf(out, NULL, "%s/ %o\n", sub, (unsigned)(st.st_mode & 07777));
			list_tree(dir, sub, out);
		} else if (S_ISREG(st.st_mode)) {
			uint8_t dg[32];
			char hex[FG_SHA256_HEX_LEN + 1];
			unsigned long long n = 0;

			if (fg_sha256_file(full, dg, &n, NULL))
				abort();
			fg_hex_encode(dg, 32, hex);
			fg_buf_printf(out, NULL, "%s %o %llu %s\n", sub, (unsigned)(st.st_mode & 07777), n,
				      hex);
		} else {
			abort(); /* a link, a device: never written */
		}
	}
	closedir(d);
}

/* Extracts into base/x (lanes on or not): the outcome and the tree as text
 * (a refusal leaves nothing: base/x must not exist). */
static void extract(int threads, int lanes_on, struct fg_buf *out)
{
	struct fg_tarball_read_opts o;
	struct fg_tarball_limits lim = { 1 << 20, 4 << 20, 64 };
	struct fg_err err = { 0, "" };
	char dest[4200];
	uint8_t id[32];
	int rc;

	read_opts(&o, &lim, threads, lanes_on);
	snprintf(dest, sizeof(dest), "%s/x", base);
	fg_buf_reset(out);
	rc = fg_tarball_extract_opts(fgb, dest, &o, add_entry, out, want_id ? id : NULL, &err);
	outcome(out, rc, &err, id);
	if (rc && access(dest, F_OK) == 0)
		abort(); /* a refused archive leaves nothing */
	list_tree(dest, "", out);
	fg_rm_tree(dest);
}

static void scan(int threads, int lanes_on, struct fg_buf *out)
{
	struct fg_tarball_read_opts o;
	struct fg_tarball_limits lim = { 1 << 20, 4 << 20, 64 };
	struct fg_err err = { 0, "" };
	uint8_t id[32];
	int rc;

	read_opts(&o, &lim, threads, lanes_on);
	fg_buf_reset(out);
	rc = fg_tarball_scan_opts(fgb, &o, add_entry, out, want_id ? id : NULL, &err);
	outcome(out, rc, &err, id);
}

/* Records a member of over 512 bytes for chains_make. */
static int chain_entry(void *user, const struct fg_tarball_entry *e, struct fg_err *err)
{
	(void)user;
	(void)err;
	if (!e->is_dir && e->size > 512 && n_ch < CH_MAX) {
		memset(&ch[n_ch], 0, sizeof(ch[n_ch]));
		ch[n_ch].path = strdup(e->path);
		ch[n_ch].size = e->size;
		ch[n_ch].every = 512;
		if (!ch[n_ch].path)
			abort();
		n_ch++;
	}
	return 0;
}

static void chains_free(void)
{
	size_t i;

	for (i = 0; i < n_ch; i++) {
		free((char *)ch[i].path);
		free((uint8_t *)ch[i].states);
		memset(&ch[i], 0, sizeof(ch[i]));
	}
	n_ch = 0;
}

/* Chain states every 512 bytes of every member of over 512 bytes, from the
 * files a sequential extraction writes (spoil: the first one's all wrong);
 * 0, or -1 when that extraction fails (then no chains mode). */
static int chains_make(int spoil)
{
	struct fg_tarball_read_opts o;
	struct fg_tarball_limits lim = { 1 << 20, 4 << 20, 64 };
	struct fg_err err = { 0, "" };
	char dest[4200], file[12000];
	size_t i;
	int rc;

	memset(&o, 0, sizeof(o));
	o.lim = &lim;
	setenv("FG_TAR_LANES", "0", 1);
	snprintf(dest, sizeof(dest), "%s/c", base);
	rc = fg_tarball_extract_opts(fgb, dest, &o, chain_entry, NULL, NULL, &err);
	for (i = 0; !rc && i < n_ch; i++) {
		struct fg_buf d = FG_BUF_INIT;
		struct fg_sha256 *h = NULL;
		uint8_t *st;
		size_t k, n = (size_t)((ch[i].size - 1) / 512);

		snprintf(file, sizeof(file), "%s/%s", dest, ch[i].path);
		if (fg_file_read(file, 1 << 20, &d, NULL) || d.len != ch[i].size ||
		    !(st = malloc(32 * n)) || fg_sha256_new_own(&h, NULL))
			abort();
		for (k = 0; k < n; k++)
			if (fg_sha256_update(h, d.data + 512 * k, 512, NULL) || fg_sha256_state(h, st + 32 * k, NULL))
				abort();
		for (k = 0; spoil && i == 0 && k < n; k++)
			st[32 * k + 7] ^= 0x20;
		ch[i].states = st;
		ch[i].n = n;
		fg_sha256_free(h);
		fg_buf_release(&d);
	}
	fg_rm_tree(dest);
	return rc ? -1 : 0;
}

/* The target fails unless a and b hold the same text. */
static void same(const struct fg_buf *a, const struct fg_buf *b)
{
	if (a->len != b->len || memcmp(a->data, b->data, a->len))
		abort();
}

/* Scanned, then extracted, from start to end and in lanes on 1 and 2
 * threads: the same outcome every way; the scan from start to end also
 * with zstd alone (the frame walk changes nothing). */
static void all_ways(struct fg_buf *a, struct fg_buf *b)
{
	scan(1, 0, a);
	setenv("FG_TAR_RAW", "0", 1);
	scan(1, 0, b);
	unsetenv("FG_TAR_RAW");
	same(a, b);
	scan(1, 1, b);
	same(a, b);
	scan(2, 1, b);
	same(a, b);
	extract(1, 0, a);
	extract(1, 1, b);
	same(a, b);
	extract(2, 1, b);
	same(a, b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t ncut, cut[8], i;
	const uint8_t *tar;
	size_t len;
	struct fg_buf f = FG_BUF_INIT, a = FG_BUF_INIT, b = FG_BUF_INIT;
	struct seek_frames sf;
	FILE *fp;

	if (!base[0])
		setup();
	if (size < 1)
		return 0;
	ncut = data[0] & 7;
	want_id = (data[0] >> 3) & 1;
	if (size < 1 + 3 * ncut)
		return 0;
	for (i = 0; i < ncut; i++)
		cut[i] = ((size_t)data[1 + 3 * i] | (size_t)data[2 + 3 * i] << 8) * 512 +
			 (data[3 + 3 * i] & 1 ? 100 : 0);
	tar = data + 1 + 3 * ncut;
	len = size - 1 - 3 * ncut;
	if (seek_frames(&f, &sf, tar, len, cut, ncut, data[0] & 0x10 ? data[0] >> 5 : SEEK_ZSTD) ||
	    (ncut && data[3] & 2 && seek_append_id_states(&f, &sf, tar, data[3] & 4 ? 1 + (data[3] >> 3) : 0)) ||
	    seek_append_table(&f, &sf, 0))
		abort();
	fp = fopen(fgb, "wb");
	if (!fp || fwrite(f.data ? f.data : "", 1, f.len, fp) != f.len || fclose(fp))
		abort();
	all_ways(&a, &b);
	if (want_id && ncut && data[3] & 2) {
		/* no member's digest, the identity from its states */
		hash_members = 0;
		all_ways(&a, &b);
		hash_members = 1;
	}
	if (ncut >= 2 && data[6] & 2) {
		/* members cut at their chain states */
		if (!chains_make(data[6] & 4)) {
			use_chains = 1;
			all_ways(&a, &b);
			use_chains = 0;
		}
		chains_free();
	}
	fg_buf_release(&f);
	fg_buf_release(&a);
	fg_buf_release(&b);
	unlink(fgb);
	return 0;
}
