/* test_sha256.c - the two-stream contexts (lib/sha256x2.c) on the NIST
 * vectors and against OpenSSL's SHA256() on random data, every length
 * 0..1100 cut at random points, on SHA-NI and with FG_SHA256_X2=0; the
 * whole-file reader against one-shot digests: sizes around the O_DIRECT
 * threshold and piece size, plain and direct, a reader reused across files,
 * errors named; the paired reader the same way, one file or both. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "sha256.h"
#include "tap.h"

static char dir[] = "/tmp/fgtest-sha256.XXXXXX";

static char *make_file(const char *name, size_t len, unsigned seed, uint8_t want[32])
{
	static char path[512];
	unsigned char *b = malloc(len ? len : 1);
	size_t i;
	int fd;

	for (i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		b[i] = (unsigned char)(seed >> 16);
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, b, len) != (ssize_t)len)
		printf("# cannot write %s\n", path);
	close(fd);
	fg_sha256_mem(b, len, want, NULL);
	free(b);
	return path;
}

/* the xorshift generator: the same cuts on every run */
static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

struct kat {
	const char *msg; /* NULL: a million 'a' */
	const char *hex;
};

/* FIPS 180-2 appendix B and the NIST example values (SHA256.pdf) */
static const struct kat kats[] = {
	{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
	{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
	{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
	  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
	{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
	  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
	{ NULL, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0" },
};

static int hex_is(const uint8_t d[32], const char *hex)
{
	char h[FG_SHA256_HEX_LEN + 1];

	fg_hex_encode(d, 32, h);
	return !strcmp(h, hex);
}

/* Feeds a and b through pair updates in pieces of random length (0 too),
 * each stream cut on its own; either may run out first. */
static int pair_cut(struct fg_sha256 *ha, const uint8_t *a, size_t la, struct fg_sha256 *hb,
		    const uint8_t *b, size_t lb, size_t maxcut, uint8_t da[32], uint8_t db[32])
{
	size_t oa = 0, ob = 0;
	int rc = 0;

	while (!rc && (oa < la || ob < lb)) {
		size_t ca = (size_t)(rnd() % (maxcut + 1)), cb = (size_t)(rnd() % (maxcut + 1));

		if (ca > la - oa)
			ca = la - oa;
		if (cb > lb - ob)
			cb = lb - ob;
		rc = fg_sha256_pair_update(ha, a + oa, ca, hb, b + ob, cb, NULL);
		oa += ca;
		ob += cb;
	}
	if (!rc)
		rc = fg_sha256_final(ha, da, NULL);
	if (!rc)
		rc = fg_sha256_final(hb, db, NULL);
	return rc;
}

static void test_core(const char *mode, int want_x2)
{
	struct fg_sha256 *a = NULL, *b = NULL;
	static uint8_t ra[1101], rb[2300];
	uint8_t da[32], db[32], want_a[32], want_b[32];
	size_t k, i, bad_len = 0, bad_same = 0;
	char *million = malloc(1000000);

	ok(!fg_sha256_new_x2(&a, NULL) && !fg_sha256_new_x2(&b, NULL), "%s: contexts made", mode);
	is_int(fg_sha256_is_x2(a), want_x2, "%s: runs on %s", mode, want_x2 ? "SHA-NI" : "EVP");
	memset(million, 'a', 1000000);
	for (k = 0; k < sizeof(kats) / sizeof(kats[0]); k++) {
		const uint8_t *m = (const uint8_t *)(kats[k].msg ? kats[k].msg : million);
		size_t len = kats[k].msg ? strlen(kats[k].msg) : 1000000, cut;
		int good;

		/* whole */
		good = !fg_sha256_update(a, m, len, NULL) && !fg_sha256_final(a, da, NULL) &&
		       hex_is(da, kats[k].hex);
		/* byte by byte */
		for (i = 0; i < len; i++)
			fg_sha256_update(a, m + i, 1, NULL);
		good = good && !fg_sha256_final(a, da, NULL) && hex_is(da, kats[k].hex);
		/* the same bytes in both streams of a pair, then against the other
		 * vectors' lengths (b ahead) */
		good = good && !fg_sha256_pair_update(a, m, len, b, m, len, NULL) &&
		       !fg_sha256_final(a, da, NULL) && !fg_sha256_final(b, db, NULL) &&
		       hex_is(da, kats[k].hex) && hex_is(db, kats[k].hex);
		/* split at every offset (the short ones), the second stream one
		 * byte behind */
		for (cut = 0; len < 200 && cut <= len; cut++) {
			fg_sha256_pair_update(a, m, cut, b, m, cut ? cut - 1 : 0, NULL);
			fg_sha256_pair_update(a, m + cut, len - cut, b, m + (cut ? cut - 1 : 0),
					      len - (cut ? cut - 1 : 0), NULL);
			fg_sha256_final(a, da, NULL);
			fg_sha256_final(b, db, NULL);
			if (!hex_is(da, kats[k].hex) || !hex_is(db, kats[k].hex))
				good = 0;
		}
		ok(good, "%s: NIST %s: whole, byte by byte, paired, split at every offset", mode,
		   kats[k].msg ? (len ? kats[k].msg : "(empty)") : "a million 'a'");
	}
	for (i = 0; i < sizeof(ra); i++)
		ra[i] = (uint8_t)rnd();
	for (i = 0; i < sizeof(rb); i++)
		rb[i] = (uint8_t)rnd();
	/* every length of A against a random length of B, cut in random pieces
	 * (at most 1, 70, 200 bytes or everything at once) */
	for (k = 0; k <= 1100; k++) {
		size_t lb = (size_t)(rnd() % sizeof(rb));
		static const size_t cuts[] = { 1, 70, 200, 5000 };
		size_t c;

		SHA256(ra, k, want_a);
		SHA256(rb, lb, want_b);
		for (c = 0; c < 4; c++) {
			if (k > 300 && c == 0)
				continue; /* byte-sized pieces: the short lengths are enough */
			if (pair_cut(a, ra, k, b, rb, lb, cuts[c], da, db) || memcmp(da, want_a, 32) ||
			    memcmp(db, want_b, 32))
				bad_len++;
			/* the streams swapped */
			if (pair_cut(b, rb, lb, a, ra, k, cuts[c], db, da) || memcmp(da, want_a, 32) ||
			    memcmp(db, want_b, 32))
				bad_len++;
		}
		/* both streams over the same bytes, same length */
		if (fg_sha256_pair_update(a, ra, k, b, ra, k, NULL) || fg_sha256_final(a, da, NULL) ||
		    fg_sha256_final(b, db, NULL) || memcmp(da, want_a, 32) || memcmp(db, want_a, 32))
			bad_same++;
	}
	is_int(bad_len, 0, "%s: lengths 0..1100 against SHA256(), random cuts of both streams", mode);
	is_int(bad_same, 0, "%s: lengths 0..1100, both streams over the same bytes", mode);
	fg_sha256_free(a);
	fg_sha256_free(b);
	free(million);
}

/* The paired reader on files of the sizes below (made by main, digests in
 * want): each with a partner of another size, with itself, plain and direct,
 * either one missing or not regular. A fresh reader per mode: its contexts
 * follow FG_SHA256_X2 as it was at its first pair. */
static void test_pairs(const char *mode, int want_x2, char **paths, uint8_t (*want)[32],
		       const size_t *sizes, size_t nf)
{
	struct fg_sha256_reader *r = NULL;
	struct fg_sha256_result res[2];
	struct fg_err err;
	size_t i, k, bad = 0, runs = 0;
	int direct;

	ok(!fg_sha256_reader_new(&r, &err), "%s: reader made", mode);
	for (direct = 0; direct < 2; direct++) {
		for (i = 0; i < nf; i++) {
			size_t partner[3] = { i, nf - 1 - i, (i + 3) % nf };

			for (k = 0; k < 3; k++) {
				const char *pp[2] = { paths[i], paths[partner[k]] };
				int rc = fg_sha256_reader_pair(r, pp, direct ? FG_SHA256_DIRECT : 0, res,
							       &err);
				int j;

				runs++;
				for (j = 0; j < 2; j++) {
					size_t f = j ? partner[k] : i;

					if (rc || res[j].rc || memcmp(res[j].digest, want[f], 32) ||
					    res[j].size != sizes[f] ||
					    (unsigned long long)res[j].st.st_size != sizes[f] ||
					    ((!direct || sizes[f] < FG_SHA256_DIRECT_MIN) && res[j].mode)) {
						printf("# %s: %zu + %zu bytes, %s: file %d wrong (rc %d %s)\n",
						       mode, sizes[i], sizes[partner[k]],
						       direct ? "direct" : "plain", j, res[j].rc, res[j].err.msg);
						bad++;
					}
				}
			}
		}
	}
	is_int(bad, 0, "%s: %zu pairs of files, plain and direct: both digests, sizes, modes", mode,
	       runs);
	{
		char miss[512], fifo[512];
		const char *pp[2];
		size_t big = nf - 1;

		snprintf(miss, sizeof(miss), "%s/missing", dir);
		snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
		pp[0] = miss;
		pp[1] = paths[big];
		ok(!fg_sha256_reader_pair(r, pp, FG_SHA256_DIRECT, res, &err) &&
			   res[0].rc == FG_ENOTFOUND && strstr(res[0].err.msg, "missing") && !res[1].rc &&
			   !memcmp(res[1].digest, want[big], 32),
		   "%s: first missing (FG_ENOTFOUND, named), the second still hashed", mode);
		pp[0] = paths[big];
		pp[1] = miss;
		ok(!fg_sha256_reader_pair(r, pp, FG_SHA256_DIRECT, res, &err) && !res[0].rc &&
			   !memcmp(res[0].digest, want[big], 32) && res[1].rc == FG_ENOTFOUND,
		   "%s: second missing, the first still hashed", mode);
		mkfifo(fifo, 0644);
		pp[1] = fifo;
		ok(!fg_sha256_reader_pair(r, pp, FG_SHA256_REGULAR | FG_SHA256_DIRECT, res, &err) &&
			   !res[0].rc && !memcmp(res[0].digest, want[big], 32) && res[1].rc == FG_EINVAL,
		   "%s: a FIFO with FG_SHA256_REGULAR refused, its partner hashed", mode);
		unlink(fifo);
		pp[0] = NULL;
		pp[1] = paths[0];
		ok(!fg_sha256_reader_pair(r, pp, 0, res, &err) && !res[0].rc && !res[0].size &&
			   !res[1].rc && !memcmp(res[1].digest, want[0], 32),
		   "%s: a NULL path: only the other file", mode);
		/* the reader's single path after pairs: same buffers, digest fresh */
		ok(!fg_sha256_reader_file(r, paths[big], FG_SHA256_DIRECT, res[0].digest, NULL, NULL,
					  &err) &&
			   !memcmp(res[0].digest, want[big], 32),
		   "%s: a single file after pairs", mode);
	}
	{
		/* whether the pair ran on SHA-NI: a second reader's contexts */
		struct fg_sha256 *h = NULL;

		ok(!fg_sha256_new_x2(&h, NULL) && fg_sha256_is_x2(h) == want_x2,
		   "%s: pairs hashed on %s", mode, want_x2 ? "SHA-NI" : "EVP");
		fg_sha256_free(h);
	}
	fg_sha256_reader_free(r);
}

/* Own contexts (fg_sha256_new_own) read and set their chaining state: a
 * stream cut at any block boundary and taken up from the state gives the
 * whole stream's digest; fg_sha256_files_states keeps the state every
 * `every` bytes, equal to the state of the file's prefix. */
static void test_states(const char *mode)
{
	enum { N = (1 << 20) + 77 };
	static const size_t fsz[] = { 0, 4096, 65535, 65536, 65537, 3 * 65536, 3 * 65536 + 100,
				      (5 << 20) + 3 };
	const unsigned long long every = 65536;
	uint8_t *b = malloc(N), want[32], got[32], st[32];
	struct fg_sha256 *a = NULL, *c = NULL, *evp = NULL;
	uint64_t total = 0;
	size_t i, k, bad = 0;
	int threads;

	for (i = 0; i < N; i++)
		b[i] = (uint8_t)(rnd() >> 24);
	fg_sha256_mem(b, N, want, NULL);
	ok(!fg_sha256_new_own(&a, NULL) && !fg_sha256_new_own(&c, NULL) && !fg_sha256_new(&evp, NULL),
	   "%s: own and EVP contexts made", mode);
	ok(!fg_sha256_update(a, b, N, NULL) && !fg_sha256_final(a, got, NULL) && !memcmp(got, want, 32),
	   "%s: an own context's digest is SHA-256", mode);
	for (k = 0; k < 40; k++) {
		size_t o = (size_t)(rnd() % (N / 64 + 1)) * 64;

		if (fg_sha256_update(a, b, o, NULL) || fg_sha256_state(a, st, &total) || total != o ||
		    fg_sha256_set_state(c, st, total) || fg_sha256_update(c, b + o, N - o, NULL) ||
		    fg_sha256_final(c, got, NULL) || memcmp(got, want, 32))
			bad++;
		fg_sha256_final(a, got, NULL); /* reset */
	}
	ok(!bad, "%s: taken up from the state at 40 block boundaries: the whole digest", mode);
	fg_sha256_update(a, b, 100, NULL);
	ok(fg_sha256_state(a, st, NULL) == -1, "%s: no state inside a block", mode);
	ok(fg_sha256_set_state(c, st, 100) == -1, "%s: nor set off a block boundary", mode);
	ok(fg_sha256_state(evp, st, NULL) == -1 && fg_sha256_set_state(evp, st, 64) == -1,
	   "%s: nor on an EVP context", mode);
	fg_sha256_final(a, got, NULL);
	for (threads = 1; threads <= 2; threads++) {
		size_t nf = sizeof(fsz) / sizeof(fsz[0]);
		struct fg_sha256_result res[sizeof(fsz) / sizeof(fsz[0])];
		char *paths[sizeof(fsz) / sizeof(fsz[0])];
		uint8_t fw[sizeof(fsz) / sizeof(fsz[0])][32];
		size_t wrong = 0;

		for (k = 0; k < nf; k++) {
			char name[32];

			snprintf(name, sizeof(name), "s%zu", k);
			paths[k] = strdup(make_file(name, fsz[k], (unsigned)k + 7, fw[k]));
		}
		ok(!fg_sha256_files_states((const char *const *)paths, nf, threads, 0, every, res, NULL),
		   "%s, %d thread(s): files hashed with states", mode, threads);
		for (k = 0; k < nf; k++) {
			size_t want_n = fsz[k] ? (size_t)((fsz[k] - 1) / every) : 0, j;
			int fd = open(paths[k], O_RDONLY);
			uint8_t *fb = malloc(fsz[k] + 1);

			if (fd < 0 || read(fd, fb, fsz[k]) != (ssize_t)fsz[k] || res[k].rc ||
			    memcmp(res[k].digest, fw[k], 32) || res[k].n_states != want_n ||
			    (!want_n && res[k].states))
				wrong++;
			for (j = 0; !wrong && j < want_n; j++) {
				fg_sha256_update(a, fb, (size_t)((j + 1) * every), NULL);
				if (fg_sha256_state(a, st, NULL) || memcmp(st, res[k].states + 32 * j, 32))
					wrong++;
				fg_sha256_final(a, got, NULL);
			}
			if (fd >= 0)
				close(fd);
			free(fb);
			free(res[k].states);
			unlink(paths[k]);
			free(paths[k]);
		}
		ok(!wrong, "%s, %d thread(s): each file's digest, and its state after every %llu bytes "
			   "before its end",
		   mode, threads, every);
	}
	fg_sha256_free(a);
	fg_sha256_free(c);
	fg_sha256_free(evp);
	free(b);
}

int main(void)
{
	static const size_t sizes[] = { 0, 1, 4095, 4097, (1 << 20) - 1, 1 << 20, (2 << 20) + 1,
					(8 << 20), (9 << 20) + 12345 };
	struct fg_sha256_reader *r = NULL;
	struct fg_err err;
	size_t k;
	int direct;

	memset(&err, 0, sizeof(err));
	if (!mkdtemp(dir))
		return 1;
	if (fg_sha256_ni_available())
		test_core("SHA-NI", 1);
	else
		ok(1, "# SKIP no SHA-NI on this CPU: only the EVP path is tested");
	setenv("FG_SHA256_X2", "0", 1);
	ok(!fg_sha256_ni_available(), "FG_SHA256_X2=0 turns SHA-NI off");
	test_core("FG_SHA256_X2=0", 0);
	unsetenv("FG_SHA256_X2");
	ok(!fg_sha256_reader_new(&r, &err), "reader made");
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint8_t want[32], got[32];
		char name[32];
		char *p;

		snprintf(name, sizeof(name), "f%zu", sizes[k]);
		p = make_file(name, sizes[k], (unsigned)k + 1, want);
		for (direct = 0; direct < 2; direct++) {
			unsigned long long size = 7;
			struct stat st;
			int rc = fg_sha256_reader_file(r, p, direct ? FG_SHA256_DIRECT : 0, got, &size,
						       &st, &err);

			ok(!rc && !memcmp(got, want, 32) && size == sizes[k] &&
				   (unsigned long long)st.st_size == sizes[k],
			   "%zu bytes, %s: digest and size", sizes[k], direct ? "direct" : "plain");
			if (!direct || sizes[k] < FG_SHA256_DIRECT_MIN)
				is_int(fg_sha256_reader_last_mode(r), 0, "%zu bytes, %s: plain reads",
				       sizes[k], direct ? "direct" : "plain");
			else
				ok(fg_sha256_reader_last_mode(r) >= 0,
				   "%zu bytes, direct: read in mode %d (1 AIO, 2 sync, 0 refused)", sizes[k],
				   fg_sha256_reader_last_mode(r));
		}
		unlink(p);
	}
	{
		uint8_t d[32];
		char p[512], l[512];

		snprintf(p, sizeof(p), "%s/missing", dir);
		is_int(fg_sha256_reader_file(r, p, FG_SHA256_DIRECT, d, NULL, NULL, &err), FG_ENOTFOUND,
		       "missing file: FG_ENOTFOUND");
		snprintf(p, sizeof(p), "%s/fifo", dir);
		mkfifo(p, 0644);
		is_int(fg_sha256_reader_file(r, p, FG_SHA256_REGULAR, d, NULL, NULL, &err), FG_EINVAL,
		       "FIFO with FG_SHA256_REGULAR: refused at once");
		unlink(p);
		make_file("target", 10, 9, d);
		snprintf(p, sizeof(p), "%s/target", dir);
		snprintf(l, sizeof(l), "%s/link", dir);
		ok(!symlink(p, l), "symlink made");
		is_int(fg_sha256_reader_file(r, l, FG_SHA256_REGULAR | FG_SHA256_DIRECT, d, NULL, NULL,
					     &err),
		       FG_EINVAL, "symlink with FG_SHA256_REGULAR: refused");
		ok(strstr(err.msg, "symlink") != NULL, "and the message says so: %s", err.msg);
		ok(!fg_sha256_reader_file(r, l, 0, d, NULL, NULL, &err), "followed without it");
		unlink(l);
		unlink(p);
	}
	fg_sha256_reader_free(r);
	fg_sha256_reader_free(NULL);
	{
		char *paths[sizeof(sizes) / sizeof(sizes[0])];
		uint8_t want[sizeof(sizes) / sizeof(sizes[0])][32];
		size_t nf = sizeof(sizes) / sizeof(sizes[0]);

		for (k = 0; k < nf; k++) {
			char name[32];

			snprintf(name, sizeof(name), "p%zu", k);
			paths[k] = strdup(make_file(name, sizes[k], (unsigned)k + 100, want[k]));
		}
		if (fg_sha256_ni_available())
			test_pairs("pairs on SHA-NI", 1, paths, want, sizes, nf);
		setenv("FG_SHA256_X2", "0", 1);
		test_pairs("pairs, FG_SHA256_X2=0", 0, paths, want, sizes, nf);
		unsetenv("FG_SHA256_X2");
		for (k = 0; k < nf; k++) {
			unlink(paths[k]);
			free(paths[k]);
		}
	}
	if (fg_sha256_ni_available())
		test_states("states on SHA-NI");
	setenv("FG_SHA256_X2", "0", 1);
	test_states("states, FG_SHA256_X2=0 (OpenSSL's block function)");
	unsetenv("FG_SHA256_X2");
	rmdir(dir);
	return tap_done();
}
