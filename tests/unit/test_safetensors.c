/* test_safetensors.c - the safetensors reader's validation (every refusal it
 * promises), the streaming writer (single and sharded) read back, and bf16. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bf16.h"
#include "buf.h"
#include "fsutil.h"
#include "safetensors.h"
#include "sha256.h"
#include "tap.h"

static char tmpdir[] = "/tmp/fgst.XXXXXX";

/* A file image: 8-byte LE length, header, then dlen data bytes (0,1,2,...). */
static size_t mk(uint8_t *out, size_t cap, const char *hdr, size_t dlen)
{
	size_t h = strlen(hdr), i;

	if (8 + h + dlen > cap)
		abort();
	for (i = 0; i < 8; i++)
		out[i] = (uint8_t)((uint64_t)h >> (8 * i));
	memcpy(out + 8, hdr, h);
	for (i = 0; i < dlen; i++)
		out[8 + h + i] = (uint8_t)i;
	return 8 + h + dlen;
}

static int open_img(const char *hdr, size_t dlen, struct fg_err *err)
{
	static uint8_t img[4096];
	struct fg_st_set *s = NULL;
	size_t n = mk(img, sizeof(img), hdr, dlen);
	int rc = fg_st_open_mem(&s, img, n, "x.safetensors", err);

	fg_st_free(s);
	return rc;
}

static void test_read_mem(void)
{
	static uint8_t img[4096];
	const struct fg_st_tensor *t;
	struct fg_st_set *s = NULL;
	struct fg_err err;
	size_t n;

	/* Header order differs from data order: iteration follows the data. */
	n = mk(img, sizeof(img),
	       "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
	       "\"a\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[0,4]},"
	       "\"e\":{\"dtype\":\"I64\",\"shape\":[0,5],\"data_offsets\":[12,12]},"
	       "\"__metadata__\":{\"format\":\"pt\"}}",
	       12);
	ok(fg_st_open_mem(&s, img, n, "m", &err) == 0, "read: valid image (%s)", err.msg);
	if (!s)
		return;
	is_int(fg_st_count(s), 3, "read: three tensors");
	is_str(fg_st_at(s, 0)->name, "a", "read: file order first is a");
	is_str(fg_st_at(s, 1)->name, "b", "read: file order second is b");
	t = fg_st_find(s, "b");
	ok(t && t->dtype == FG_ST_F32 && t->ndim == 1 && t->shape[0] == 2 && t->nbytes == 8 &&
	   t->nelem == 2, "read: find b with dtype, shape, size");
	ok(t && ((const uint8_t *)t->data)[0] == 4, "read: b's data points at offset 4");
	ok(t && t->file_offset == (uint64_t)(n - 12 + 4), "read: absolute file offset");
	t = fg_st_find(s, "e");
	ok(t && t->nelem == 0 && t->nbytes == 0, "read: empty tensor");
	ok(!fg_st_find(s, "c") && !fg_st_find(s, "__metadata__"), "read: absent names");
	is_str(fg_st_metadata(s, "format"), "pt", "read: metadata");
	fg_st_free(s);
}

static void test_refusals(void)
{
	struct fg_err err;
	uint8_t img[64];
	struct fg_st_set *s = NULL;
	int rc;

	ok(fg_st_open_mem(&s, "abc", 3, "short", &err) == FG_EFORMAT && strstr(err.msg, "short"),
	   "refuse: shorter than 8 bytes (%s)", err.msg);
	memset(img, 0, sizeof(img));
	img[0] = 200;
	ok(fg_st_open_mem(&s, img, 20, "t", &err) == FG_EFORMAT && strstr(err.msg, "truncated"),
	   "refuse: header length past the end (%s)", err.msg);
	memset(img, 0xff, 8);
	ok(fg_st_open_mem(&s, img, 20, "t", &err) == FG_EFORMAT, "refuse: huge header length");
	ok(open_img("[1,2]", 0, &err) == FG_EFORMAT, "refuse: header not an object");
	ok(open_img("{\"a\":", 0, &err) == FG_EFORMAT, "refuse: header not JSON");
	rc = open_img("{\"w\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, &err);
	ok(rc == FG_EUNSUPPORTED && strstr(err.msg, "tensor w") && strstr(err.msg, "x.safetensors"),
	   "refuse: unknown dtype names file and tensor (%s)", err.msg);
	ok(open_img("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, &err) ==
	   FG_EFORMAT && strstr(err.msg, "need 12"), "refuse: shape × dtype != span (%s)", err.msg);
	ok(open_img("{\"w\":{\"dtype\":\"U8\",\"shape\":[9],\"data_offsets\":[0,9]}}", 8, &err) ==
	   FG_EFORMAT, "refuse: offsets past the data");
	ok(open_img("{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[5,4]}}", 8, &err) ==
	   FG_EFORMAT, "refuse: end before begin");
	ok(open_img("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
		    "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 6, &err) ==
	   FG_EFORMAT && strstr(err.msg, "overlap"), "refuse: overlap (%s)", err.msg);
	ok(open_img("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
		    "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[6,8]}}", 8, &err) ==
	   FG_EFORMAT && strstr(err.msg, "unclaimed"), "refuse: gap (%s)", err.msg);
	ok(open_img("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 5, &err) ==
	   FG_EFORMAT, "refuse: trailing data");
	ok(open_img("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
		    "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}", 4, &err) ==
	   FG_EFORMAT && strstr(err.msg, "twice"), "refuse: duplicate name (%s)", err.msg);
	ok(open_img("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
		    1, &err) == FG_EUNSUPPORTED, "refuse: rank 9");
	ok(open_img("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1, &err) ==
	   FG_EFORMAT, "refuse: negative dimension");
	ok(open_img("{\"a\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 1, &err) ==
	   FG_EFORMAT, "refuse: fractional dimension");
	ok(open_img("{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,1]}}",
		    1, &err) == FG_EFORMAT, "refuse: shape product overflow");
	ok(open_img("{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, &err) == FG_EFORMAT,
	   "refuse: missing data_offsets");
	ok(open_img("{\"__metadata__\":{\"k\":1}}", 0, &err) == FG_EFORMAT,
	   "refuse: metadata value not a string");
	ok(open_img("{}", 0, &err) == 0, "accept: empty header, no data");
}

static int write_file(const char *path, const char *text)
{
	struct fg_err err;

	return fg_file_write_atomic(path, text, strlen(text), 0644, &err);
}

static void test_writer(void)
{
	struct fg_st_desc d[4] = {
		{ "w.a", FG_ST_BF16, 2, { 3, 4 } },
		{ "w.b", FG_ST_F32, 1, { 5 } },
		{ "w.empty", FG_ST_I32, 1, { 0 } },
		{ "w.c", FG_ST_U8, 0, { 0 } },
	};
	struct fg_st_writer *w = NULL;
	struct fg_st_set *s = NULL;
	struct fg_buf p = FG_BUF_INIT;
	struct fg_err err;
	uint8_t data[64];
	cJSON *meta = cJSON_CreateObject();
	const struct fg_st_tensor *t;
	size_t i, total = 24 + 20 + 0 + 1;
	char sub[256];
	struct stat st;

	for (i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 1);
	cJSON_AddStringToObject(meta, "format", "pt");
	snprintf(sub, sizeof(sub), "%s/one", tmpdir);
	mkdir(sub, 0755);
	ok(fg_st_writer_new(&w, sub, d, 4, 0, meta, &err) == 0, "write: single file (%s)", err.msg);
	/* Data in odd pieces that straddle tensor boundaries. */
	ok(fg_st_writer_write(w, data, 7, &err) == 0 && fg_st_writer_write(w, data + 7, 30, &err) == 0 &&
	   fg_st_writer_write(w, data + 37, total - 37, &err) == 0, "write: pieces");
	ok(fg_st_writer_write(w, data, 1, &err) != 0, "write: refuses bytes beyond the tensors");
	ok(fg_st_writer_finish(w, &err) == 0, "write: finish (%s)", err.msg);
	{
		const char *nm = NULL;
		uint64_t sz = 0;
		char hex[65], want[65];
		uint8_t dg[32];
		unsigned long long fsz = 0;

		fg_path_join(&p, sub, "model.safetensors", &err);
		fg_sha256_file(p.data, dg, &fsz, &err);
		fg_hex_encode(dg, 32, want);
		ok(fg_st_writer_file(w, 0, &nm, &sz, hex) == 0 && !strcmp(nm, "model.safetensors") &&
		   sz == fsz && !strcmp(hex, want), "write: digest and size computed while writing");
		fg_buf_reset(&p);
	}
	fg_st_writer_free(w);
	ok(fg_st_open(&s, sub, &err) == 0, "write: read back the folder (%s)", err.msg);
	if (s) {
		is_int(fg_st_count(s), 4, "write: four tensors back");
		t = fg_st_find(s, "w.b");
		ok(t && t->nbytes == 20 && !memcmp(t->data, data + 24, 20), "write: w.b bytes");
		t = fg_st_find(s, "w.c");
		ok(t && t->ndim == 0 && t->nelem == 1 && ((const uint8_t *)t->data)[0] == data[44],
		   "write: scalar");
		is_str(fg_st_at(s, 0)->name, "w.a", "write: order kept");
		ok(fg_st_at(s, 0)->file_offset % 8 == 0, "write: data region 8-aligned");
		fg_st_release(s, fg_st_find(s, "w.a"));
		ok(!memcmp(fg_st_find(s, "w.a")->data, data, 24), "write: data readable after release");
		is_str(fg_st_metadata(s, "format"), "pt", "write: metadata back");
		/* The image is the mapping only while the path names the same inode. */
		fg_path_join(&p, sub, "model.safetensors", &err);
		ok(stat(p.data, &st) == 0 && fg_st_file_image(s, 0, &st) &&
		   fg_st_file_image(s, 0, &st) + fg_st_at(s, 0)->file_offset ==
			   (const uint8_t *)fg_st_at(s, 0)->data,
		   "image: the mapping of the file as opened");
		ok(!fg_st_file_image(s, 1, &st), "image: no file 1");
		{
			struct fg_buf q = FG_BUF_INIT;

			fg_buf_printf(&q, &err, "%s.new", p.data);
			ok(link(p.data, q.data) == 0 && rename(q.data, p.data) == 0 && unlink(q.data) == 0,
			   "image: a hard link renamed over it");
			ok(stat(p.data, &st) == 0 && fg_st_file_image(s, 0, &st), "image: same inode, still it");
			st.st_size++;
			ok(!fg_st_file_image(s, 0, &st), "image: NULL for another size");
			fg_buf_reset(&q);
			fg_buf_printf(&q, &err, "cp %s %s.copy && mv %s.copy %s", p.data, p.data, p.data, p.data);
			ok(system(q.data) == 0 && stat(p.data, &st) == 0 && !fg_st_file_image(s, 0, &st),
			   "image: NULL once the path names a replacement file");
			fg_buf_release(&q);
		}
		fg_buf_reset(&p);
		fg_st_free(s);
	}

	/* Unfinished writers leave nothing. */
	snprintf(sub, sizeof(sub), "%s/unfinished", tmpdir);
	mkdir(sub, 0755);
	fg_st_writer_new(&w, sub, d, 4, 0, NULL, &err);
	fg_st_writer_write(w, data, 5, &err);
	ok(fg_st_writer_finish(w, &err) != 0, "write: finish refuses missing bytes");
	fg_st_writer_free(w);
	fg_path_join(&p, sub, "model.safetensors", &err);
	ok(stat(p.data, &st) != 0, "write: unfinished file removed");
	fg_buf_reset(&p);

	{
		struct fg_st_desc dup[2] = { { "x", FG_ST_U8, 1, { 1 } }, { "x", FG_ST_U8, 1, { 1 } } };

		ok(fg_st_writer_new(&w, sub, dup, 2, 0, NULL, &err) == FG_EINVAL, "write: duplicate names refused");
	}

	/* Sharded: a 30-byte limit puts w.a alone, then w.b + empty + c. */
	snprintf(sub, sizeof(sub), "%s/sharded", tmpdir);
	mkdir(sub, 0755);
	ok(fg_st_writer_new(&w, sub, d, 4, 30, meta, &err) == 0 && fg_st_writer_nfiles(w) == 2,
	   "write: sharded plan has two files");
	ok(fg_st_writer_write(w, data, total, &err) == 0 && fg_st_writer_finish(w, &err) == 0,
	   "write: sharded data (%s)", err.msg);
	fg_st_writer_free(w);
	ok(fg_st_open(&s, sub, &err) == 0, "write: sharded set opens (%s)", err.msg);
	if (s) {
		is_int(fg_st_nfiles(s), 2, "write: two shard files");
		is_int(fg_st_count(s), 4, "write: all tensors across shards");
		t = fg_st_find(s, "w.b");
		ok(t && strstr(t->file, "model-00002-of-00002.safetensors") &&
		   !memcmp(t->data, data + 24, 20), "write: w.b in shard 2 with its bytes");
		fg_st_free(s);
	}
	fg_path_join(&p, sub, FG_ST_INDEX_NAME, &err);
	ok(fg_st_open(&s, p.data, &err) == 0, "write: open through the index path");
	fg_st_free(s);
	s = NULL;

	/* "./" before a shard's name (transformers joins it to the folder) */
	write_file(p.data, "{\"weight_map\":{\"w.a\":\"./model-00001-of-00002.safetensors\","
			   "\"w.b\":\"././model-00002-of-00002.safetensors\",\"w.c\":\"model-00002-of-00002.safetensors\","
			   "\"w.empty\":\"./model-00002-of-00002.safetensors\"}}");
	ok(fg_st_open(&s, sub, &err) == 0 && fg_st_nfiles(s) == 2 && (t = fg_st_find(s, "w.b")) &&
		   !strstr(t->file, "./model") && !memcmp(t->data, data + 24, 20),
	   "index: ./ before shard names read as the names (%s)", err.msg);
	fg_st_free(s);
	s = NULL;
	write_file(p.data, "{\"weight_map\":{\"w.a\":\"./../x.safetensors\"}}");
	ok(fg_st_open(&s, sub, &err) == FG_EFORMAT && strstr(err.msg, "safe"), "index: ./../x still unsafe (%s)",
	   err.msg);
	/* An index that lies. */
	write_file(p.data, "{\"weight_map\":{\"w.a\":\"model-00001-of-00002.safetensors\","
			   "\"w.b\":\"model-00002-of-00002.safetensors\"}}");
	ok(fg_st_open(&s, sub, &err) == FG_EFORMAT && strstr(err.msg, "not listed"),
	   "index: tensor missing from weight_map (%s)", err.msg);
	write_file(p.data,
		   "{\"weight_map\":{\"w.a\":\"model-00002-of-00002.safetensors\",\"w.b\":\"model-00002-of-00002.safetensors\","
		   "\"w.c\":\"model-00002-of-00002.safetensors\",\"w.empty\":\"model-00002-of-00002.safetensors\"}}");
	ok(fg_st_open(&s, sub, &err) == FG_EFORMAT && strstr(err.msg, "w.a"),
	   "index: wrong shard for a tensor (%s)", err.msg);
	write_file(p.data, "{\"weight_map\":{\"w.a\":\"../x.safetensors\"}}");
	ok(fg_st_open(&s, sub, &err) == FG_EFORMAT && strstr(err.msg, "safe"),
	   "index: unsafe shard path (%s)", err.msg);
	write_file(p.data, "{\"weight_map\":{\"zz\":\"model-00001-of-00002.safetensors\"}}");
	ok(fg_st_open(&s, sub, &err) == FG_EFORMAT && strstr(err.msg, "zz"),
	   "index: tensor in weight_map absent from shard (%s)", err.msg);
	fg_buf_release(&p);
	cJSON_Delete(meta);
	ok(fg_st_open(&s, tmpdir, &err) == FG_ENOTFOUND, "open: folder without a checkpoint");
}

/* nt (at most 10) U8 tensors of tb bytes named <c><digit>, and their data
 * (nt * tb bytes, byte i = i * mul + (i >> shift)); aborts when out of memory. */
static uint8_t *u8_tensors(struct fg_st_desc *d, char (*names)[8], size_t nt, size_t tb, char c,
			   unsigned mul, unsigned shift)
{
	uint8_t *data = malloc(nt * tb);
	size_t i;

	if (!data || nt > 10)
		abort();
	for (i = 0; i < nt * tb; i++)
		data[i] = (uint8_t)(i * mul + (i >> shift));
	for (i = 0; i < nt; i++) {
		names[i][0] = c;
		names[i][1] = (char)('0' + i);
		names[i][2] = '\0';
		d[i].name = names[i];
		d[i].dtype = FG_ST_U8;
		d[i].ndim = 1;
		d[i].shape[0] = tb;
	}
	return data;
}

/* Shards hashed on two threads: each file's digest still its own bytes',
 * and a mark covers only what was written since the mark before it. */
static void test_writer_hashers(void)
{
	enum { NT = 6, TB = 256 << 10 };
	struct fg_st_desc d[NT];
	char names[NT][8], sub[256];
	struct fg_st_writer *w = NULL;
	struct fg_buf p = FG_BUF_INIT;
	struct fg_err err;
	uint8_t *data = u8_tensors(d, names, NT, TB, 't', 131, 9);
	uint64_t m[NT];
	size_t i, nf;
	int good = 1;

	snprintf(sub, sizeof(sub), "%s/two", tmpdir);
	mkdir(sub, 0755);
	/* One tensor a shard (the limit is below two), so the shards alternate. */
	ok(fg_st_writer_new(&w, sub, d, NT, TB + 4096, NULL, &err) == 0 && fg_st_writer_nfiles(w) == NT,
	   "hashers: six shards planned");
	fg_st_writer_async(w);
	ok(fg_st_writer_hashers(w, 2, &err) == 0, "hashers: a second hashing thread");
	for (i = 0; i < NT; i++) {
		good &= fg_st_writer_write(w, data + i * TB, TB, &err) == 0;
		m[i] = fg_st_writer_mark(w);
	}
	ok(good, "hashers: every piece written");
	ok(m[1] && !(m[1] & 0xffffffffu) && (m[2] & 0xffffffffu) && !(m[2] >> 32),
	   "hashers: a mark names only the thread that took bytes since the one before "
	   "(%llx %llx)", (unsigned long long)m[1], (unsigned long long)m[2]);
	ok(fg_st_writer_wait(w, m[NT - 1], &err) == 0 && fg_st_writer_passed(w, m[NT - 1]),
	   "hashers: passed once waited for");
	ok(fg_st_writer_finish(w, &err) == 0, "hashers: finish (%s)", err.msg);
	nf = fg_st_writer_nfiles(w);
	for (i = 0; i < nf; i++) {
		const char *nm = NULL;
		uint64_t sz = 0;
		unsigned long long fsz = 0;
		char hex[65], want[65];
		uint8_t dg[32];

		fg_buf_reset(&p);
		if (fg_st_writer_file(w, i, &nm, &sz, hex) || fg_path_join(&p, sub, nm, &err) ||
		    fg_sha256_file(p.data, dg, &fsz, &err)) {
			good = 0;
			continue;
		}
		fg_hex_encode(dg, 32, want);
		good &= sz == fsz && !strcmp(hex, want);
	}
	ok(good && nf == NT, "hashers: every shard's digest and size are its file's");
	fg_st_writer_free(w);
	fg_buf_release(&p);
	free(data);
}

/* Chain states kept while writing (fg_st_writer_new_states): every shard's
 * are those of its file's bytes hashed in order, whatever the pieces' sizes
 * (cut at each state), on one hashing thread or two; the stat given is the
 * file's as it was left. */
static void test_writer_states(void)
{
	enum { NT = 5, TB = 50000, EVERY = 4096 };
	static const size_t piece[] = { 1000, 4096, 17, 30000, 8191 };
	struct fg_st_desc d[NT];
	char names[NT][8], sub[256];
	uint8_t *data = u8_tensors(d, names, NT, TB, 's', 29, 7);
	int mode;
	size_t i;

	for (mode = 0; mode < 2; mode++) {
		struct fg_st_writer *w = NULL;
		struct fg_buf p = FG_BUF_INIT, f = FG_BUF_INIT;
		struct fg_err err = { 0, "" };
		size_t off = 0, k = 0, nf, with = 0;
		int good = 1;

		snprintf(sub, sizeof(sub), "%s/states%d", tmpdir, mode);
		mkdir(sub, 0755);
		/* two tensors a shard at most: shards of about 100 KB, 24 states each */
		ok(fg_st_writer_new_states(&w, sub, d, NT, 2 * TB + 4096, NULL, EVERY, &err) == 0,
		   "states %d: a writer keeping them every %d bytes (%s)", mode, EVERY, err.msg);
		if (!w)
			continue;
		if (mode) {
			fg_st_writer_async(w);
			good &= fg_st_writer_hashers(w, 2, &err) == 0;
		}
		while (good && off < (size_t)NT * TB) {
			size_t n = piece[k++ % 5];

			if (n > (size_t)NT * TB - off)
				n = (size_t)NT * TB - off;
			good &= fg_st_writer_write(w, data + off, n, &err) == 0;
			off += n;
		}
		if (mode)
			good &= fg_st_writer_drain(w, &err) == 0;
		ok(good && fg_st_writer_finish(w, &err) == 0, "states %d: written in pieces of 17 to 30000 bytes (%s)",
		   mode, err.msg);
		nf = fg_st_writer_nfiles(w);
		for (i = 0; i < nf; i++) {
			const char *nm = NULL;
			const uint8_t *st = NULL;
			uint64_t sz = 0;
			size_t n = 0, wn = 0;
			char hex[65];
			struct stat sb, now;
			struct fg_sha256 *h = NULL;
			struct fg_sha256_chain c;
			uint8_t *want = NULL;

			fg_buf_reset(&p);
			fg_buf_reset(&f);
			fg_sha256_chain_init(&c, EVERY);
			if (fg_st_writer_file(w, i, &nm, &sz, hex) || fg_st_writer_file_states(w, i, &st, &n, &sb) ||
			    fg_path_join(&p, sub, nm, NULL) || fg_file_read(p.data, (size_t)1 << 20, &f, NULL) ||
			    fg_sha256_new_own(&h, NULL) || fg_sha256_chain_update(h, &c, f.data, f.len, NULL)) {
				good = 0;
			} else {
				fg_sha256_chain_take(&c, &want, &wn);
				good &= n == wn && n == (f.len - 1) / EVERY && n > 0 && !memcmp(st, want, 32 * n) &&
					!stat(p.data, &now) && fg_stat_unchanged(&sb, &now);
				with += n > 0;
			}
			fg_sha256_chain_free(&c);
			fg_sha256_free(h);
			free(want);
		}
		ok(good && nf == 3 && with == nf, "states %d: each of the %zu shards has its file's states and stat",
		   mode, nf);
		fg_st_writer_free(w);
		fg_buf_release(&p);
		fg_buf_release(&f);
	}
	{
		struct fg_st_writer *w = NULL;
		struct fg_err err = { 0, "" };

		snprintf(sub, sizeof(sub), "%s/states-bad", tmpdir);
		mkdir(sub, 0755);
		ok(fg_st_writer_new_states(&w, sub, d, NT, 0, NULL, 100, &err) == FG_EINVAL && !w,
		   "states: every 100 bytes (not a multiple of 64) refused (%s)", err.msg);
	}
	free(data);
}

static void test_bf16(void)
{
	union {
		uint32_t u;
		float f;
	} v;

	is_int(fg_f32_to_bf16(1.0f), 0x3f80, "bf16: 1.0");
	v.u = 0x3f808000; /* exactly half way, even below */
	is_int(fg_f32_to_bf16(v.f), 0x3f80, "bf16: tie to even (down)");
	v.u = 0x3f818000;
	is_int(fg_f32_to_bf16(v.f), 0x3f82, "bf16: tie to even (up)");
	v.u = 0x3f808001;
	is_int(fg_f32_to_bf16(v.f), 0x3f81, "bf16: above half rounds up");
	v.u = 0x7f7fffff;
	is_int(fg_f32_to_bf16(v.f), 0x7f80, "bf16: overflow to inf");
	v.u = 0x7f800001;
	ok((fg_f32_to_bf16(v.f) & 0x7fff) > 0x7f80, "bf16: NaN stays NaN");
	v.u = 0x00000001;
	is_int(fg_f32_to_bf16(v.f), 0x0000, "bf16: tiny denormal to zero");
	ok(fg_bf16_to_f32(0xc040) == -3.0f, "bf16: widen -3");
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("f16c"))) static uint32_t f16c_widen(uint16_t h)
{
	float f = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}
#endif

/* Every one of the 65536 halves widened by fg_f16_to_f32, against the
 * compiler's _Float16 (where it has one) and the F16C instruction (where the
 * CPU has it), plus values worked out by hand. */
static void test_f16(void)
{
	unsigned h;
	int bad_cc = 0, bad_hw = 0, n_cc = 0, n_hw = 0;
	uint32_t u;
	float f;

	for (h = 0; h < 65536; h++) {
		f = fg_f16_to_f32((uint16_t)h);
		memcpy(&u, &f, 4);
#ifdef __FLT16_MAX__
		{
			uint16_t hb = (uint16_t)h;
			_Float16 x;
			float ref;

			memcpy(&x, &hb, 2);
			ref = (float)x;
			n_cc++;
			if (ref != ref ? f == f || (u >> 31) != (h >> 15) : memcmp(&ref, &f, 4))
				bad_cc++;
		}
#endif
#if defined(__x86_64__) && defined(__GNUC__)
		if (__builtin_cpu_supports("f16c")) {
			n_hw++;
			if (f16c_widen((uint16_t)h) != u)
				bad_hw++;
		}
#endif
	}
	ok(bad_cc == 0, "f16: all %d halves widen as the compiler's _Float16 does (%d differ)", n_cc, bad_cc);
	ok(bad_hw == 0, "f16: all %d halves widen to the bits of vcvtph2ps, NaNs included (%d differ)", n_hw,
	   bad_hw);
	ok(fg_f16_to_f32(0x3c00) == 1.0f && fg_f16_to_f32(0xc000) == -2.0f && fg_f16_to_f32(0x3555) == 0x1.554p-2f,
	   "f16: 1, -2, 0x3555");
	ok(fg_f16_to_f32(0x7bff) == 65504.0f && fg_f16_to_f32(0x0400) == 0x1p-14f, "f16: largest, smallest normal");
	ok(fg_f16_to_f32(0x0001) == 0x1p-24f && fg_f16_to_f32(0x83ff) == -0x3ffp-24f, "f16: subnormals");
	f = fg_f16_to_f32(0x8000);
	memcpy(&u, &f, 4);
	is_int((int)(u >> 16), 0x8000, "f16: -0 keeps its sign");
	ok(fg_f16_to_f32(0xfc00) == -INFINITY && fg_f16_to_f32(0x7c00) == INFINITY, "f16: infinities");
	f = fg_f16_to_f32(0x7d01);
	memcpy(&u, &f, 4);
	is_int((int)(u >> 13), (int)(0x7fc00000u | 0x101u << 13) >> 13, "f16: signalling NaN quieted, payload kept");
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		return 1;
	test_read_mem();
	test_refusals();
	test_writer();
	test_writer_hashers();
	test_writer_states();
	test_bf16();
	test_f16();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd))
			return 1;
	}
	return tap_done();
}
