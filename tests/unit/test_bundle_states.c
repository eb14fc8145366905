/* test_bundle_states.c - bundle.json's chain states as verify reads them
 * (lib/bundle.c chains_of, docs/formats/bundle.md "Chain states"): right
 * ones cut a large member into lanes; wrong ones cost the lanes, never the
 * verdict; malformed ones (a count that does not fit the size, a string
 * that is not hex, a long array of numbers) are not used at all. Each
 * archive is made by our writer: bundle.json as written here, then one
 * member of 40 MiB + 100 bytes whose frames are cut at every 8 MiB.
 * The same archives show what a signal removes of an extraction
 * (fg_tmp_remove_all, what cmd/'s handler runs): the folder under $TMPDIR
 * while it is ours, a caller's dest until it checked out, never after. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "bundle.h"
#include "err.h"
#include "fsutil.h"
#include "sha256.h"
#include "tap.h"
#include "tarball.h"
#include "workdir_test.h"

#define SIZE ((40ull << 20) + 100)
#define EVERY (8ull << 20)

static char digest_hex[FG_SHA256_HEX_LEN + 1];

/* bundle.json with one files entry for w.bin and `states` (JSON, or NULL)
 * as its sha256_states; then the member. 0 when written. */
static int make(const char *name, const char *states)
{
	struct fg_tarball_writer *w = NULL;
	struct fg_buf j = FG_BUF_INIT;
	struct fg_err err;
	uint8_t id[32];
	int rc = fg_buf_printf(&j, NULL,
			       "{\"schema\": 1, \"files\": [{\"path\": \"w.bin\", \"size\": %llu, "
			       "\"sha256\": \"%s\", \"mode\": \"0644\"%s%s}]}\n",
			       SIZE, digest_hex, states ? ", \"sha256_states\": " : "",
			       states ? states : "");

	rc = rc || fg_tarball_writer_new(&w, 3, 0, &err) ||
	     fg_tarball_add_mem(w, "bundle.json", j.data, j.len, 0644, &err) ||
	     fg_tarball_add_file(w, "w.bin", at("w.bin"), NULL, &err) ||
	     fg_tarball_writer_finish(w, at(name), id, &err);
	fg_tarball_writer_free(w);
	fg_buf_release(&j);
	return rc;
}

/* exec's and serve's opening of name, without a dest (under $TMPDIR) and
 * into one: what fg_tmp_remove_all removes of each, as a signal would */
static void signals(const char *name)
{
	struct fg_bundle *b = NULL;
	struct fg_err err;
	char want[64];
	int rc;

	setenv("TMPDIR", work, 1);
	snprintf(want, sizeof(want), "/fgpack-bundle-%ld", (long)getpid());
	rc = fg_bundle_open(&b, at(name), NULL, &err);
	ok(!rc && b->tmp_slot > 0 && !strcmp(b->dir, at(want + 1)) && !access(at(want + 1), F_OK),
	   "no dest: opened in %s, tracked", b ? b->dir : err.msg);
	fg_tmp_remove_all();
	ok(access(at(want + 1), F_OK), "  a signal removes it");
	fg_bundle_free(b);
	b = NULL;
	rc = fg_bundle_open(&b, at(name), at("kept"), &err);
	ok(!rc && b->tmp_slot == 0 && !b->remove_dir, "dest: opened and the caller's, untracked");
	fg_tmp_remove_all();
	ok(!access(at("kept/w.bin"), F_OK), "  a signal leaves it");
	fg_bundle_free(b);
	ok(!access(at("kept/w.bin"), F_OK), "  and so does fg_bundle_free");
	fg_rm_tree(at("kept"));
	b = NULL;
	digest_hex[0] ^= 1;
	rc = make("bad.fgb", NULL);
	digest_hex[0] ^= 1;
	rc = rc ? rc : fg_bundle_open(&b, at("bad.fgb"), at("bad"), &err);
	ok(rc == FG_EMISMATCH && b && b->n_problems == 1 && b->tmp_slot > 0 && !access(at("bad/w.bin"), F_OK),
	   "dest, a member that differs: still tracked when returned (%s)", err.msg);
	fg_tmp_remove_all();
	ok(access(at("bad"), F_OK), "  a signal removes it");
	fg_bundle_free(b);
	unsetenv("TMPDIR");
}

/* verify's files check on 2 threads: its code (0: every member matched),
 * and *lanes */
static int scan(const char *name, int *lanes)
{
	struct fg_bundle *b = NULL;
	struct fg_err err;
	int rc = fg_bundle_scan_files(&b, at(name), 2, &err);

	*lanes = b ? b->lanes : -1;
	if (rc)
		printf("# %s: %s\n", name, err.msg);
	fg_bundle_free(b);
	return rc;
}

int main(void)
{
	unsigned char *buf = malloc(SIZE);
	struct fg_sha256 *h = NULL;
	struct fg_buf right = FG_BUF_INIT, wrong = FG_BUF_INIT, junk = FG_BUF_INIT;
	uint8_t d[32], st[32];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	size_t i;
	int lanes = 0, plain = 0, rc;
	FILE *f;

	if (work_begin("fgstates"))
		return 1;
	for (i = 0; buf && i < SIZE; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (unsigned char)(x >> 31);
	}
	f = fopen(at("w.bin"), "wb");
	rc = !buf || !f || fwrite(buf, 1, SIZE, f) != SIZE;
	rc |= !f || fclose(f);
	rc = rc || fg_sha256_mem(buf, SIZE, d, NULL) || fg_sha256_new_own(&h, NULL);
	fg_hex_encode(d, 32, digest_hex);
	/* the 5 states after every 8 MiB, as pack writes them; the same count
	 * with one bit off in each */
	fg_buf_printf(&right, NULL, "{\"every\": %llu, \"states\": [", EVERY);
	fg_buf_printf(&wrong, NULL, "{\"every\": %llu, \"states\": [", EVERY);
	for (i = 0; !rc && i < 5; i++) {
		char hex[FG_SHA256_HEX_LEN + 1];

		rc = fg_sha256_update(h, buf + i * EVERY, EVERY, NULL) || fg_sha256_state(h, st, NULL);
		fg_hex_encode(st, 32, hex);
		fg_buf_printf(&right, NULL, "%s\"%s\"", i ? ", " : "", hex);
		st[3] ^= 0x40;
		fg_hex_encode(st, 32, hex);
		fg_buf_printf(&wrong, NULL, "%s\"%s\"", i ? ", " : "", hex);
	}
	fg_buf_printf(&right, NULL, "]}");
	fg_buf_printf(&wrong, NULL, "]}");
	fg_sha256_free(h);
	free(buf);
	ok(!rc, "a member of 40 MiB + 100 bytes and its states every 8 MiB");

	ok(!make("none.fgb", NULL) && !scan("none.fgb", &plain), "no states: verified (%d lanes)", plain);
	signals("none.fgb");
	ok(!make("right.fgb", right.data) && !scan("right.fgb", &lanes) && lanes == 4 && plain < 4,
	   "right states: verified in 4 lanes on 2 threads (%d)", lanes);
	ok(!make("wrong.fgb", wrong.data) && !scan("wrong.fgb", &lanes) && lanes == 1,
	   "wrong states: still verified, read from start to end (%d lanes)", lanes);
	/* malformed: not used */
	fg_buf_printf(&junk, NULL, "{\"every\": %llu, \"states\": [\"%s\"]}", EVERY, digest_hex);
	ok(!make("count.fgb", junk.data) && !scan("count.fgb", &lanes) && lanes == plain,
	   "one state where the size calls for 5: not used (%d lanes)", lanes);
	fg_buf_reset(&junk);
	fg_buf_printf(&junk, NULL, "{\"every\": %llu, \"states\": [\"x\", \"y\", \"z\", \"0\", \"1\"]}",
		      EVERY);
	ok(!make("hex.fgb", junk.data) && !scan("hex.fgb", &lanes) && lanes == plain,
	   "states that are not 64 hex digits: not used (%d lanes)", lanes);
	fg_buf_reset(&junk);
	fg_buf_printf(&junk, NULL, "{\"every\": 1000, \"states\": []}");
	ok(!make("every.fgb", junk.data) && !scan("every.fgb", &lanes) && lanes == plain,
	   "every not a multiple of 64: not used (%d lanes)", lanes);
	fg_buf_reset(&junk);
	fg_buf_printf(&junk, NULL, "{\"every\": 64, \"states\": [0");
	for (i = 1; i < 200000; i++)
		fg_buf_printf(&junk, NULL, ",0");
	fg_buf_printf(&junk, NULL, "]}");
	ok(!make("long.fgb", junk.data) && !scan("long.fgb", &lanes) && lanes == plain,
	   "200000 numbers for states: not used (%d lanes)", lanes);
	fg_buf_release(&right);
	fg_buf_release(&wrong);
	fg_buf_release(&junk);
	work_end();
	return tap_done();
}
