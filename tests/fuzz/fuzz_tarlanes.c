/* fuzz_tarlanes.c - differential fuzz target for the lanes reader
 * (lib/tarlanes.h): the input is a few cut points and a tar stream; the tar
 * is compressed as one zstd frame per span between the cuts, with the
 * seekable format's seek table after them (as pack writes, but cut where
 * the input says, header or not), under a private $TMPDIR. The archive is
 * scanned hashing every member, in lanes on 1 and 2 threads and from start
 * to end (FG_TAR_LANES=0). Contract: the same return code, message and
 * members (name, size, mode, digest, in order) every way; a refusal is one
 * line.
 *
 * Input: byte 0 = number of cuts (low 3 bits); then 2 bytes per cut, a
 * little-endian count of 512-byte blocks (a cut is at that block, plus the
 * low bit of the byte after as an extra 100 bytes, so cuts fall on headers
 * and off them); the rest is the tar. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "buf.h"
#include "fsutil.h"
#include "sha256.h"
#include "tarball.h"
#include "tests/unit/seek_test.h"

static char base[4096], fgb[4200];

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
}

static int add_entry(void *user, const struct fg_tarball_entry *e, struct fg_err *err)
{
	char hex[FG_SHA256_HEX_LEN + 1];

	fg_hex_encode(e->sha256, 32, hex);
	return fg_buf_printf(user, err, "%s %llu %o %d %s\n", e->path, e->size, (unsigned)e->mode,
			     e->is_dir, e->hashed ? hex : "-");
}

static void scan(int threads, int lanes_on, struct fg_buf *out)
{
	struct fg_tarball_read_opts o;
	struct fg_tarball_limits lim = { 1 << 20, 4 << 20, 64 };
	struct fg_err err = { 0, "" };
	int rc;

	if (lanes_on)
		unsetenv("FG_TAR_LANES");
	else
		setenv("FG_TAR_LANES", "0", 1);
	memset(&o, 0, sizeof(o));
	o.lim = &lim;
	o.hash = 1;
	o.threads = threads;
	fg_buf_reset(out);
	rc = fg_tarball_scan_opts(fgb, &o, add_entry, out, NULL, &err);
	if (rc && (!err.msg[0] || strchr(err.msg, '\n')))
		abort();
	if (fg_buf_printf(out, NULL, "rc %d %s\n", rc, rc ? err.msg : ""))
		abort();
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
	if (size < 1 + 3 * ncut)
		return 0;
	for (i = 0; i < ncut; i++)
		cut[i] = ((size_t)data[1 + 3 * i] | (size_t)data[2 + 3 * i] << 8) * 512 +
			 (data[3 + 3 * i] & 1 ? 100 : 0);
	tar = data + 1 + 3 * ncut;
	len = size - 1 - 3 * ncut;
	if (seek_compress(&f, &sf, tar, len, cut, ncut) || seek_append_table(&f, &sf, 0))
		abort();
	fp = fopen(fgb, "wb");
	if (!fp || fwrite(f.data ? f.data : "", 1, f.len, fp) != f.len || fclose(fp))
		abort();
	scan(1, 0, &a);
	scan(1, 1, &b);
	if (a.len != b.len || memcmp(a.data, b.data, a.len))
		abort();
	scan(2, 1, &b);
	if (a.len != b.len || memcmp(a.data, b.data, a.len))
		abort();
	fg_buf_release(&f);
	fg_buf_release(&a);
	fg_buf_release(&b);
	unlink(fgb);
	return 0;
}
