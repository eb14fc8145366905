/* test_tarball.c - reproducible writer, identity, safe extraction, member reads,
 * and hostile archives (crafted here with python3's tarfile) that must be
 * refused with nothing written at or beside the destination; incompressible
 * frames written as stored blocks, read back by libzstd with its checksums. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "tarball.h"
#include "buf.h"
#include "fsutil.h"
#include "sha256.h"
#include "tap.h"
#include "workdir_test.h"

#include <zstd.h>


static int write_text(const char *path, const char *text, int mode)
{
	struct fg_err err;

	return fg_file_write_atomic(path, text, strlen(text), mode, &err);
}

static int files_equal(const char *a, const char *b)
{
	struct fg_buf x = FG_BUF_INIT, y = FG_BUF_INIT;
	struct fg_err err;
	int eq = !fg_file_read(a, 1 << 26, &x, &err) && !fg_file_read(b, 1 << 26, &y, &err) &&
		 x.len == y.len && !memcmp(x.data, y.data, x.len);

	fg_buf_release(&x);
	fg_buf_release(&y);
	return eq;
}

/* Number of entries in folder dir other than crafted archives (*.tar) and
 * the benign twin's folder "none". */
static int count_other(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, "none") || (len > 4 && !strcmp(de->d_name + len - 4, ".tar")))
			continue;
		n++;
	}
	closedir(d);
	return n;
}

struct seen {
	int n;
	char names[16][64];
	uint8_t sha[16][32];
	int mode[16];
};

static int record(void *user, const struct fg_tarball_entry *e, struct fg_err *err)
{
	struct seen *s = user;

	(void)err;
	if (s->n < 16) {
		snprintf(s->names[s->n], 64, "%s", e->path);
		memcpy(s->sha[s->n], e->sha256, 32);
		s->mode[s->n] = e->mode;
	}
	s->n++;
	return 0;
}

static int pack_sample(const char *out, uint8_t id[32], struct fg_err *err)
{
	struct fg_tarball_writer *w;
	static const char big_name[] =
		"components/weights/a-very-long-folder-name-that-goes-on-and-on/"
		"and-on-past-the-hundred-bytes-of-a-ustar-name-field/model.safetensors";
	int rc = fg_tarball_writer_new(&w, 3, 1700000000, err);

	if (rc)
		return rc;
	rc = fg_tarball_add_file(w, "z/last.bin", at("src/last.bin"), NULL, err);
	if (!rc)
		rc = fg_tarball_add_file(w, "engine/run.sh", at("src/run.sh"), NULL, err);
	if (!rc)
		rc = fg_tarball_add_mem(w, "bundle.json", "{}\n", 3, 0644, err);
	if (!rc)
		rc = fg_tarball_add_file(w, big_name, at("src/last.bin"), NULL, err);
	if (!rc)
		rc = fg_tarball_add_mem(w, "empty", "", 0, 0644, err);
	if (!rc)
		rc = fg_tarball_writer_finish(w, out, id, err);
	fg_tarball_writer_free(w);
	return rc;
}

static void test_roundtrip(void)
{
	struct fg_err err;
	uint8_t id1[32], id2[32], id3[32], want[32];
	struct seen s;
	struct fg_buf b = FG_BUF_INIT;
	struct stat st;
	char cmd[1024], hex[65];
	FILE *p;
	int i, rc;

	fg_mkdir_p(at("src"), 0755, &err);
	{
		struct fg_buf big = FG_BUF_INIT;

		for (i = 0; i < 300000; i++)
			fg_buf_printf(&big, &err, "%ld\n", (long)i * 7919);
		fg_file_write_atomic(at("src/last.bin"), big.data, big.len, 0600, &err);
		fg_buf_release(&big);
	}
	write_text(at("src/run.sh"), "#!/bin/sh\necho hi\n", 0700);

	rc = pack_sample(at("a.fgb"), id1, &err);
	is_int(rc, 0, "pack: first write (%s)", rc ? err.msg : "");
	utime(at("src/run.sh"), NULL); /* a new mtime must not change the bytes */
	rc = pack_sample(at("b.fgb"), id2, &err);
	is_int(rc, 0, "pack: second write");
	ok(!memcmp(id1, id2, 32), "pack: same identity twice");
	ok(files_equal(at("a.fgb"), at("b.fgb")), "pack: same bytes twice");

	/* identity = sha256 of the uncompressed tar, checked with the zstd CLI */
	snprintf(cmd, sizeof(cmd), "zstd -dc %s | sha256sum", at("a.fgb"));
	p = popen(cmd, "r");
	memset(hex, 0, sizeof(hex));
	if (p) {
		if (!fgets(hex, sizeof(hex), p))
			hex[0] = '\0';
		pclose(p);
	}
	ok(fg_hex_decode(hex, want, 32) == 0 && !memcmp(want, id1, 32),
	   "identity: equals sha256 of zstd -dc output");

	/* headers: python's tarfile reads what we wrote and sees normalized fields */
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import tarfile,sys,subprocess\n"
		 "d=subprocess.run([\"zstd\",\"-dc\",sys.argv[1]],capture_output=True).stdout\n"
		 "import io\n"
		 "t=tarfile.open(fileobj=io.BytesIO(d))\n"
		 "for m in t.getmembers():\n"
		 " assert m.mtime==1700000000 and m.uid==0 and m.gid==0 and m.uname==\"\" and m.gname==\"\", m.name\n"
		 " assert not any(k in m.pax_headers for k in (\"atime\",\"ctime\",\"mtime\")), m.pax_headers\n"
		 " print(m.name, oct(m.mode))' %s",
		 at("a.fgb"));
	p = popen(cmd, "r");
	fg_buf_reset(&b);
	if (p) {
		char line[512];

		while (fgets(line, sizeof(line), p))
			fg_buf_puts(&b, line, &err);
		rc = pclose(p);
	}
	ok(rc == 0 && b.data && strstr(b.data, "bundle.json 0o644\ncomponents/weights/a-very") &&
		   strstr(b.data, "engine/run.sh 0o755\n") && strstr(b.data, "z/last.bin 0o644\n"),
	   "headers: sorted, mtime/uid/gid/names/modes normalized, no atime/ctime");
	if (rc)
		printf("# %s\n", b.data ? b.data : "");

	memset(&s, 0, sizeof(s));
	rc = fg_tarball_scan(at("a.fgb"), NULL, 1, record, &s, id3, &err);
	ok(rc == 0 && !memcmp(id3, id1, 32), "scan: identity matches writer's");
	is_int(s.n, 5, "scan: five members");
	is_str(s.names[0], "bundle.json", "scan: sorted by path bytes");
	is_str(s.names[4], "z/last.bin", "scan: last member last");
	fg_sha256_file(at("src/last.bin"), want, NULL, &err);
	ok(!memcmp(s.sha[4], want, 32), "scan: member hash equals the source file's");

	/* the identity paired with the member digests (on SHA-NI) against both
	 * hashed apart (FG_SHA256_X2=0), compressed and plain tar */
	snprintf(cmd, sizeof(cmd), "zstd -qdc %s > %s", at("a.fgb"), at("a.tar"));
	ok(system(cmd) == 0, "plain tar of a.fgb made");
	for (i = 0; i < 2; i++) {
		const char *arch = at(i ? "a.tar" : "a.fgb");
		static struct seen s2;
		uint8_t id5[32];
		int k, same;

		memset(&s, 0, sizeof(s));
		memset(&s2, 0, sizeof(s2));
		rc = fg_tarball_scan(arch, NULL, 1, record, &s, id3, &err);
		setenv("FG_SHA256_X2", "0", 1);
		rc = rc ? rc : fg_tarball_scan(arch, NULL, 1, record, &s2, id5, &err);
		unsetenv("FG_SHA256_X2");
		same = !rc && s.n == 5 && s2.n == 5 && !memcmp(id3, id1, 32) && !memcmp(id5, id1, 32);
		for (k = 0; same && k < s.n; k++)
			same = !memcmp(s.sha[k], s2.sha[k], 32);
		ok(same, "%s: id and member digests paired = apart = the writer's", i ? "plain tar" : "zstd");
	}
	memset(&s, 0, sizeof(s));
	rc = fg_tarball_extract(at("a.fgb"), at("x"), NULL, record, &s, id3, &err);
	is_int(rc, 0, "extract: ok (%s)", rc ? err.msg : "");
	ok(!memcmp(id3, id1, 32), "extract: identity matches");
	ok(files_equal(at("x/z/last.bin"), at("src/last.bin")), "extract: content equal");
	ok(stat(at("x/engine/run.sh"), &st) == 0 && (st.st_mode & 0777) == 0755,
	   "extract: executable kept 0755");
	ok(stat(at("x/z/last.bin"), &st) == 0 && (st.st_mode & 0777) == 0644,
	   "extract: 0600 source normalized to 0644");
	ok(stat(at("x/empty"), &st) == 0 && st.st_size == 0, "extract: empty file");
	rc = fg_tarball_extract(at("a.fgb"), at("x"), NULL, NULL, NULL, NULL, &err);
	ok(rc != 0, "extract: refuses an existing destination");

	fg_buf_reset(&b);
	rc = fg_tarball_read_member(at("a.fgb"), "engine/run.sh", 1 << 20, &b, &err);
	ok(rc == 0 && b.len == 18 && !memcmp(b.data, "#!/bin/sh\necho hi\n", 18), "member: read one");
	rc = fg_tarball_read_member(at("a.fgb"), "nope", 1 << 20, &b, &err);
	is_int(rc, FG_ENOTFOUND, "member: absent is FG_ENOTFOUND");
	fg_buf_reset(&b);
	rc = fg_tarball_read_member(at("a.fgb"), "z/last.bin", 1000, &b, &err);
	ok(rc != 0, "member: bound on size refused");
	fg_buf_release(&b);

	/* a truncated bundle is an error, not a shorter archive */
	snprintf(cmd, sizeof(cmd), "head -c 20000 %s > %s", at("a.fgb"), at("trunc.fgb"));
	ok(system(cmd) == 0 && fg_tarball_scan(at("trunc.fgb"), NULL, 1, NULL, NULL, id3, &err) != 0,
	   "scan: truncated archive refused");

	/* writer refuses bad names and duplicates */
	{
		struct fg_tarball_writer *w;

		fg_tarball_writer_new(&w, 3, 0, &err);
		ok(fg_tarball_add_mem(w, "../x", "a", 1, 0644, &err) != 0, "writer: refuses ..");
		ok(fg_tarball_add_mem(w, "/abs", "a", 1, 0644, &err) != 0, "writer: refuses absolute");
		fg_tarball_add_mem(w, "dup", "a", 1, 0644, &err);
		fg_tarball_add_mem(w, "dup", "b", 1, 0644, &err);
		ok(fg_tarball_writer_finish(w, at("dup.fgb"), id3, &err) != 0 &&
			   access(at("dup.fgb"), F_OK) != 0,
		   "writer: duplicate names refused, no file left");
		fg_tarball_writer_free(w);
	}
}

/* Crafts a hostile tar with python; kind selects the trick. */
static int craft(const char *kind, const char *out)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd),
		 "python3 - %s %s <<'EOF'\n"
		 "import io, sys, tarfile\n"
		 "kind, out = sys.argv[1], sys.argv[2]\n"
		 "t = tarfile.open(out, 'w', format=tarfile.PAX_FORMAT)\n"
		 "def f(name, data=b'x'):\n"
		 "    ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))\n"
		 "f('good.txt', b'fine')\n"
		 "if kind == 'slip': f('../evil.txt')\n"
		 "if kind == 'slip2': f('a/../../evil.txt')\n"
		 "if kind == 'abs': f('/tmp/fgpack-evil-abs.txt')\n"
		 "if kind == 'symlink':\n"
		 "    ti = tarfile.TarInfo('link'); ti.type = tarfile.SYMTYPE; ti.linkname = '..'; t.addfile(ti)\n"
		 "    f('link/evil.txt')\n"
		 "if kind == 'hardlink':\n"
		 "    ti = tarfile.TarInfo('hl'); ti.type = tarfile.LNKTYPE; ti.linkname = '../../etc/passwd'; t.addfile(ti)\n"
		 "if kind == 'chardev':\n"
		 "    ti = tarfile.TarInfo('null'); ti.type = tarfile.CHRTYPE; ti.devmajor = 1; ti.devminor = 3; t.addfile(ti)\n"
		 "if kind == 'fifo':\n"
		 "    ti = tarfile.TarInfo('pipe'); ti.type = tarfile.FIFOTYPE; t.addfile(ti)\n"
		 "if kind == 'giant':\n"
		 "    ti = tarfile.TarInfo('huge.bin'); ti.size = 1 << 40; t.addfile(ti)\n"
		 "if kind == 'many':\n"
		 "    for i in range(20): f('m/%%d' %% i)\n"
		 "if kind == 'dup': f('good.txt', b'evil')\n"
		 "if kind == 'filedir': f('good.txt/inner')\n"
		 "if kind == 'dot': f('./x')\n"
		 "t.close()\n"
		 "EOF",
		 kind, out);
	return system(cmd);
}

static void test_hostile(void)
{
	static const char *kinds[] = { "slip", "slip2", "abs", "symlink", "hardlink", "chardev",
				       "fifo", "giant", "many", "dup", "filedir", "dot" };
	struct fg_tarball_limits lim = { 0, 0, 10 };
	struct fg_err err;
	size_t i;
	char tarname[64];
	int rc;

	fg_mkdir_p(at("h"), 0755, &err);
	/* the harmless twin extracts, so the refusals below are about the tricks */
	rc = craft("none", at("h/none.tar"));
	ok(rc == 0 && fg_tarball_extract(at("h/none.tar"), at("h/none"), &lim, NULL, NULL, NULL,
					 &err) == 0 &&
		   access(at("h/none/good.txt"), F_OK) == 0,
	   "hostile: the benign twin extracts");
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		snprintf(tarname, sizeof(tarname), "%s.tar", kinds[i]);
		{
			char path[512];

			snprintf(path, sizeof(path), "%s/h/%s", work, tarname);
			if (craft(kinds[i], path))
				printf("# could not craft %s\n", kinds[i]);
			err.msg[0] = '\0';
			rc = fg_tarball_extract(path, at("h/out"), &lim, NULL, NULL, NULL, &err);
		}
		ok(rc != 0, "hostile %s: refused (%s)", kinds[i], err.msg);
		ok(access(at("h/out"), F_OK) != 0 && count_other(at("h")) == 0 &&
			   access(at("evil.txt"), F_OK) != 0 && access(at("h/evil.txt"), F_OK) != 0 &&
			   access("/tmp/fgpack-evil-abs.txt", F_OK) != 0,
		   "hostile %s: nothing written at, beside or above the destination", kinds[i]);
	}
	/* a zstd-compressed hostile archive is refused the same way */
	{
		char cmd[1024];

		snprintf(cmd, sizeof(cmd), "zstd -q -f -o %s %s", at("h/slip.tar.zst"), at("h/slip.tar"));
		rc = system(cmd);
	}
	ok(rc == 0 && fg_tarball_extract(at("h/slip.tar.zst"), at("h/out"), &lim, NULL, NULL, NULL,
					 &err) != 0 &&
		   access(at("h/out"), F_OK) != 0,
	   "hostile slip.tar.zst: refused");
	/* per-entry size limit from the caller */
	lim.max_entry_size = 3;
	ok(fg_tarball_extract(at("h/none.tar"), at("h/out"), &lim, NULL, NULL, NULL, &err) != 0 &&
		   access(at("h/out"), F_OK) != 0,
	   "limits: entry over max_entry_size refused");
	ok(fg_tarball_scan(at("h/none.tar"), &lim, 0, NULL, NULL, NULL, &err) != 0,
	   "limits: scan applies them too");
}

/* A file whose stamp moved between the caller's hashing and the write is
 * refused (FG_EHASH) and nothing is left at the destination; the same stamp
 * packs, and the zstd worker count does not change the bytes. */
static void test_stamp_and_threads(void)
{
	struct fg_tarball_writer *w = NULL;
	struct fg_tarball_stamp stamp;
	struct fg_err err;
	struct stat st;
	uint8_t id1[32], id4[32];
	int rc, threads;

	{
		/* 20 MiB: three zstd jobs (a job at level 3 is 8 MiB), so that the
		 * workers really split the stream */
		struct fg_buf big = FG_BUF_INIT;
		unsigned x = 12345;

		while (big.len < ((size_t)20 << 20)) {
			x = x * 1103515245u + 12345u;
			fg_buf_printf(&big, &err, "%u %u\n", x >> 8, x % 977);
		}
		fg_file_write_atomic(at("src/big.bin"), big.data, big.len, 0644, &err);
		fg_buf_release(&big);
	}
	write_text(at("src/moving.bin"), "before\n", 0644);
	stat(at("src/moving.bin"), &st);
	fg_tarball_stamp_of(&stamp, &st);
	for (threads = 1; threads <= 4; threads += 3) {
		rc = fg_tarball_writer_new(&w, 3, 0, &err);
		if (!rc)
			rc = fg_tarball_writer_set_threads(w, threads, &err);
		if (!rc)
			rc = fg_tarball_add_file(w, "m.bin", at("src/moving.bin"), &stamp, &err);
		if (!rc)
			rc = fg_tarball_add_file(w, "big.bin", at("src/big.bin"), NULL, &err);
		if (!rc)
			rc = fg_tarball_writer_finish(w, at(threads == 1 ? "t1.fgb" : "t4.fgb"),
						      threads == 1 ? id1 : id4, &err);
		is_int(rc, 0, "stamp unchanged: packs with %d thread(s) (%s)", threads,
		       rc ? err.msg : "");
		fg_tarball_writer_free(w);
	}
	ok(!memcmp(id1, id4, 32), "same id compressing inline and on a thread of its own");
	{
		char cmd[1200];

		snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", at("t1.fgb"), at("t4.fgb"));
		ok(system(cmd) == 0, "same compressed bytes compressing inline and on a thread");
	}
	{
		struct fg_tarball_read_opts o;
		uint8_t idt[32];

		memset(&o, 0, sizeof(o));
		o.hash = 1;
		o.id_thread = 1;
		ok(!fg_tarball_scan_opts(at("t4.fgb"), &o, NULL, NULL, idt, &err) && !memcmp(idt, id1, 32),
		   "the identity hashed on its own thread while reading: the same id");
		o.hash = 0;
		o.id_thread = 0;
		ok(!fg_tarball_scan_opts(at("t4.fgb"), &o, NULL, NULL, idt, &err) && !memcmp(idt, id1, 32),
		   "and inline, without member digests: the same id");
	}
	ok(fg_tarball_writer_set_threads(NULL, 0, &err) == FG_EINVAL, "0 workers refused");
	/* rewrite the file (same size): mtime/ctime move */
	{
		struct timespec ts = { 0, 20000000 };

		nanosleep(&ts, NULL);
	}
	write_text(at("src/moving.bin"), "after!\n", 0644);
	rc = fg_tarball_writer_new(&w, 3, 0, &err);
	if (!rc)
		rc = fg_tarball_add_file(w, "m.bin", at("src/moving.bin"), &stamp, &err);
	if (!rc)
		rc = fg_tarball_writer_finish(w, at("moved.fgb"), id1, &err);
	is_int(rc, FG_EHASH, "a file changed since it was hashed is refused");
	ok(rc && strstr(err.msg, "changed between hashing and packing") != NULL, "... and named (%s)",
	   rc ? err.msg : "");
	ok(stat(at("moved.fgb"), &st) != 0, "... and nothing written");
	fg_tarball_writer_free(w);
}

/* n pseudo-random bytes (seed) appended to path */
static void add_random(const char *path, size_t n, unsigned seed)
{
	FILE *f = fopen(path, "ab");
	unsigned char b[4096];
	size_t i, k;

	for (i = 0; f && i < n; i += k) {
		k = n - i < sizeof(b) ? n - i : sizeof(b);
		for (size_t j = 0; j < k; j++) {
			seed ^= seed << 13;
			seed ^= seed >> 17;
			seed ^= seed << 5;
			b[j] = (unsigned char)seed;
		}
		fwrite(b, 1, k, f);
	}
	if (f)
		fclose(f);
}

/* n bytes of numbered lines appended to path (zstd shrinks them) */
static void add_text(const char *path, size_t n)
{
	FILE *f = fopen(path, "ab");
	size_t i = 0;
	unsigned x = 1;

	while (f && i < n) {
		char line[64];
		int k = snprintf(line, sizeof(line), "%zu %u\n", i, x % 977);

		x = x * 1103515245u + 12345u;
		if ((size_t)k > n - i)
			k = (int)(n - i);
		fwrite(line, 1, (size_t)k, f);
		i += (size_t)k;
	}
	if (f)
		fclose(f);
}

static void add_zeros(const char *path, size_t n)
{
	FILE *f = fopen(path, "ab");

	for (size_t i = 0; f && i < n; i++)
		fputc(0, f);
	if (f)
		fclose(f);
}

/* Packs the files names[] (members of the same names) with threads; 0. */
static int pack_files(const char *out, const char *const *names, int threads, uint8_t id[32])
{
	struct fg_tarball_writer *w = NULL;
	struct fg_err err;
	char src[256];
	int rc = fg_tarball_writer_new(&w, 3, 0, &err);

	if (!rc)
		rc = fg_tarball_writer_set_threads(w, threads, &err);
	for (; !rc && *names; names++) {
		snprintf(src, sizeof(src), "%s", at(*names));
		rc = fg_tarball_add_file(w, *names, src, NULL, &err);
	}
	if (!rc)
		rc = fg_tarball_writer_finish(w, out, id, &err);
	if (rc)
		printf("# pack %s: %s\n", out, err.msg);
	fg_tarball_writer_free(w);
	return rc;
}

/* The frames of a bundle by the seek table: how many are stored-block
 * frames as the writer makes them (descriptor 0x04, window byte 0x38, raw
 * blocks only), and how many others; -1 on a file without a table. */
static int count_stored(const char *path, int *others)
{
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err;
	const unsigned char *d, *t;
	unsigned long long off = 0;
	unsigned n, i;
	int stored = 0;

	*others = 0;
	if (fg_file_read(path, 1 << 28, &b, &err) || b.len < 9)
		return -1;
	d = (const unsigned char *)b.data;
	n = d[b.len - 9] | d[b.len - 8] << 8 | d[b.len - 7] << 16 | (unsigned)d[b.len - 6] << 24;
	t = d + b.len - 9 - 8ull * n;
	for (i = 0; i < n; i++) {
		unsigned c = t[8 * i] | t[8 * i + 1] << 8 | t[8 * i + 2] << 16 | (unsigned)t[8 * i + 3] << 24;
		const unsigned char *f = d + off;
		int raw = f[4] == 0x04 && f[5] == 0x38;

		/* every block raw: walk the block headers */
		for (unsigned long long p = off + 6; raw;) {
			unsigned bh = d[p] | d[p + 1] << 8 | d[p + 2] << 16;

			if ((bh >> 1 & 3) != 0)
				raw = 0;
			p += 3 + (bh >> 3);
			if (bh & 1)
				break;
		}
		if (raw)
			stored++;
		else
			(*others)++;
		off += c;
	}
	fg_buf_release(&b);
	return stored;
}

/* The bundle decompressed by libzstd with every frame's checksum checked;
 * 0 when it decodes and its SHA-256 is id. */
static int zstd_checks(const char *path, const uint8_t id[32])
{
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err;
	struct fg_sha256 *h = NULL;
	ZSTD_DStream *ds = ZSTD_createDStream();
	ZSTD_inBuffer in;
	static char out[1 << 17];
	uint8_t got[32];
	int rc = -1;

	if (!ds || fg_file_read(path, 1 << 28, &b, &err) || fg_sha256_new(&h, &err))
		goto out;
	in.src = b.data;
	in.size = b.len;
	in.pos = 0;
	while (in.pos < in.size) {
		ZSTD_outBuffer o = { out, sizeof(out), 0 };
		size_t r = ZSTD_decompressStream(ds, &o, &in);

		if (ZSTD_isError(r)) {
			printf("# libzstd: %s\n", ZSTD_getErrorName(r));
			goto out;
		}
		fg_sha256_update(h, out, o.pos, &err);
	}
	fg_sha256_final(h, got, &err);
	rc = memcmp(got, id, 32) ? -1 : 0;
out:
	fg_sha256_free(h);
	ZSTD_freeDStream(ds);
	fg_buf_release(&b);
	return rc;
}

/* Frames whose bytes zstd would only store are written as stored blocks
 * (docs/formats/bundle.md, "Stored frames"): chosen by the frame's bytes
 * alone, so the same for any thread count; compressible frames, and one
 * mostly random with a compressible stretch, go through zstd; the file
 * decodes with libzstd (checksums checked) and reads back by every path. */
static void test_stored_frames(void)
{
	static const char *const rnd[] = { "st/rand.bin", "st/small.bin", NULL };
	static const char *const mixed[] = { "st/mixed.bin", NULL };
	/* text, random, random, text: frames through zstd, then stored, then
	 * zstd again (the compressors take frames by turns or one keeps them,
	 * by what the last frames were: never a change in the bytes) */
	static const char *const big[] = { "st/a-text.bin", "st/big.bin", "st/rand.bin",
					    "st/z-text.bin", NULL };
	uint8_t id1[32], id2[32], idr[32];
	struct fg_err err;
	int others, stored;

	fg_mkdir_p(at("st"), 0755, &err);
	add_random(at("st/rand.bin"), (3u << 20) + 100, 7);
	add_random(at("st/small.bin"), 200u << 10, 8); /* under the probe's least */
	add_random(at("st/mixed.bin"), 3u << 20, 9);
	add_zeros(at("st/mixed.bin"), 512u << 10);
	add_random(at("st/mixed.bin"), 3u << 20, 10);
	add_random(at("st/big.bin"), 20u << 20, 11);
	add_text(at("st/a-text.bin"), 10u << 20);
	add_text(at("st/z-text.bin"), 10u << 20);

	ok(!pack_files(at("st/r.fgb"), rnd, 1, id1), "random members pack");
	stored = count_stored(at("st/r.fgb"), &others);
	is_int(stored, 1, "the random member's frame is stored blocks (others %d)", others);
	ok(others >= 2, "the frame under the probe's least and the rest through zstd (%d)", others);
	ok(!zstd_checks(at("st/r.fgb"), id1), "libzstd decodes it, checksums checked, to the id");
	setenv("FG_TAR_STORED", "0", 1);
	ok(!pack_files(at("st/rz.fgb"), rnd, 1, id2), "FG_TAR_STORED=0 packs");
	unsetenv("FG_TAR_STORED");
	is_int(count_stored(at("st/rz.fgb"), &others), 0, "... with no stored frame");
	ok(!memcmp(id1, id2, 32), "... and the same id (the tar is the same)");
	{
		struct stat a, b;

		ok(!stat(at("st/r.fgb"), &a) && !stat(at("st/rz.fgb"), &b) &&
			   a.st_size <= b.st_size + 1024 && b.st_size <= a.st_size + 4096,
		   "stored frames within 1 KiB of zstd's frames (zstd squeezes the member's "
		   "header): %lld against %lld",
		   (long long)a.st_size, (long long)b.st_size);
	}
	ok(!fg_tarball_scan(at("st/r.fgb"), NULL, 1, NULL, NULL, idr, &err) && !memcmp(idr, id1, 32),
	   "scan reads it: the writer's id");
	ok(!fg_tarball_extract(at("st/r.fgb"), at("st/x"), NULL, NULL, NULL, idr, &err) &&
		   files_equal(at("st/x/st/rand.bin"), at("st/rand.bin")) && !memcmp(idr, id1, 32),
	   "extract: the member's bytes and the id");

	ok(!pack_files(at("st/m.fgb"), mixed, 1, id2), "a random member with 512 KiB of zeros packs");
	is_int(count_stored(at("st/m.fgb"), &others), 0, "... through zstd: the probe saw the zeros");
	ok(!zstd_checks(at("st/m.fgb"), id2), "... and decodes with libzstd");

	ok(!pack_files(at("st/b1.fgb"), big, 1, id1) && !pack_files(at("st/b3.fgb"), big, 4, id2),
	   "text, 23 MiB of random bytes, text: packs inline and on three compressing threads");
	stored = count_stored(at("st/b1.fgb"), &others);
	ok(stored >= 3 && others >= 4, "the random frames are stored (%d), the text's not (%d)", stored,
	   others);
	{
		uint8_t id3[32];

		ok(!pack_files(at("st/b2.fgb"), big, 2, id3) && !memcmp(id1, id3, 32) &&
			   !memcmp(id1, id2, 32) && files_equal(at("st/b1.fgb"), at("st/b3.fgb")) &&
			   files_equal(at("st/b1.fgb"), at("st/b2.fgb")),
		   "the same bytes with 1, 2 and 4 threads (no, one and three compressing threads)");
	}
	ok(!zstd_checks(at("st/b3.fgb"), id1), "libzstd decodes it to the id");
	{
		struct fg_tarball_read_opts o;
		struct seen lane, seq;
		uint8_t idl[32];
		int lanes = 0;

		memset(&o, 0, sizeof(o));
		memset(&lane, 0, sizeof(lane));
		memset(&seq, 0, sizeof(seq));
		o.hash = 1;
		o.threads = 2;
		o.lanes = &lanes;
		ok(!fg_tarball_scan_opts(at("st/b1.fgb"), &o, record, &lane, NULL, &err) && lanes > 1,
		   "the members hash in lanes over the stored frames (%d lanes)", lanes);
		ok(!fg_tarball_scan(at("st/b1.fgb"), NULL, 1, record, &seq, idl, &err) &&
			   !memcmp(idl, id1, 32) && lane.n == seq.n && lane.n == 4 &&
			   !memcmp(lane.sha, seq.sha, sizeof(lane.sha)),
		   "... the digests those of the sequential reader, which gives the id");
		o.hash = 0;
		lanes = 0;
		ok(!fg_tarball_scan_opts(at("st/b1.fgb"), &o, NULL, NULL, idl, &err) &&
			   !memcmp(idl, id1, 32) && lanes > 1,
		   "the id alone from the lanes' identity states (%d lanes)", lanes);
	}
}

/* Member names that are UTF-8 but not ASCII (a model folder's "é ü.bin"):
 * libarchive converts pax names through the locale's charset, and fgpack
 * runs in the C locale, so the writer refused them and the reader refused a
 * tar holding them (python3's tarfile writes them in a pax header too). */
static void test_utf8_names(void)
{
	static const char name[] = "components/model/\xc3\xa9 \xc3\xbc.bin";
	struct fg_tarball_writer *w = NULL;
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	char cmd[1024];
	uint8_t id[32], id2[32];
	int rc;

	rc = fg_tarball_writer_new(&w, 3, 0, &err);
	if (!rc)
		rc = fg_tarball_add_mem(w, name, "utf", 3, 0644, &err);
	if (!rc)
		rc = fg_tarball_add_mem(w, "plain name.txt", "", 0, 0644, &err);
	if (!rc)
		rc = fg_tarball_writer_finish(w, at("utf8.fgb"), id, &err);
	fg_tarball_writer_free(w);
	ok(rc == 0, "utf-8 name: written (%s)", rc ? err.msg : "ok");
	ok(fg_tarball_extract(at("utf8.fgb"), at("utf8"), NULL, NULL, NULL, id2, &err) == 0 &&
		   !memcmp(id, id2, 32),
	   "utf-8 name: extracted, the same id");
	ok(fg_file_read(at("utf8/components/model/\xc3\xa9 \xc3\xbc.bin"), 16, &b, &err) == 0 &&
		   b.len == 3 && !memcmp(b.data, "utf", 3),
	   "utf-8 name: the file under its own name");
	fg_buf_reset(&b);
	ok(fg_tarball_read_member(at("utf8.fgb"), name, 16, &b, &err) == 0 && b.len == 3,
	   "utf-8 name: read as a member");
	fg_buf_release(&b);
	/* GNU tar reads the same name back (in a UTF-8 locale, the names printed
	 * as their bytes: the C locale's listing escapes them, and a CI
	 * environment may set none) */
	snprintf(cmd, sizeof(cmd), "zstd -dc %s | LC_ALL=C.UTF-8 tar --quoting-style=literal -tf - | grep -qx '%s'",
		 at("utf8.fgb"), name);
	ok(system(cmd) == 0, "utf-8 name: GNU tar lists it as written");
	snprintf(cmd, sizeof(cmd),
		 "python3 -c \"import io, sys, tarfile\n"
		 "t = tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT)\n"
		 "ti = tarfile.TarInfo('caf\\u00e9/\\u00fc.txt'); ti.size = 1\n"
		 "t.addfile(ti, io.BytesIO(b'x')); t.close()\" %s",
		 at("py-utf8.tar"));
	ok(system(cmd) == 0 && fg_tarball_scan(at("py-utf8.tar"), NULL, 1, NULL, NULL, NULL, &err) == 0,
	   "utf-8 name: python3's pax tar read (%s)", err.msg);
}

int main(void)
{
	if (work_begin("fgarch"))
		return 1;
	test_roundtrip();
	test_hostile();
	test_stamp_and_threads();
	test_stored_frames();
	test_utf8_names();
	work_end();
	return tap_done();
}
