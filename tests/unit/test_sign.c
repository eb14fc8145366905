/* test_sign.c - DSSE PAE (the DSSE spec's example), sign/open round trip,
 * tampering, key checks, OMS statement round trip and comparison. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sign.h"
#include "tap.h"

static void pae(void)
{
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err;

	fg_dsse_pae(&b, "http://example.com/HelloWorld", "hello world", 11, &err);
	is_str(b.data, "DSSEv1 29 http://example.com/HelloWorld 11 hello world", "PAE as in the DSSE spec");
	fg_buf_release(&b);
}

static void roundtrip(void)
{
	struct fg_sign_key *k = NULL, *k2 = NULL;
	struct fg_buf env = FG_BUF_INIT, pl = FG_BUF_INIT, pt = FG_BUF_INIT, t = FG_BUF_INIT;
	char hint[65], fp[65];
	struct fg_err err;
	char *p;

	ok(fg_sign_keygen(&k, &err) == 0 && fg_sign_keygen(&k2, &err) == 0, "two keys");
	ok(fg_sign_bundle(&env, k, FG_SIGN_PAYLOAD_TYPE, "{\"a\":1}", 7, &err) == 0, "sign");
	fg_sign_key_fingerprint(fp, k, &err);
	ok(fg_sign_open(&pl, &pt, hint, env.data, env.len, k, &err) == 0 && pl.len == 7 &&
	   !memcmp(pl.data, "{\"a\":1}", 7) && !strcmp(pt.data, FG_SIGN_PAYLOAD_TYPE),
	   "open gives the payload back");
	is_str(hint, fp, "bundle records the key fingerprint as hint");
	fg_buf_reset(&pl);
	fg_buf_reset(&pt);
	ok(fg_sign_open(&pl, &pt, hint, env.data, env.len, k2, &err) == FG_EMISMATCH &&
	   strstr(err.msg, "not by the given key"), "another key: mismatch (%s)", err.msg);
	/* same envelope, payload "{"a":1}" -> "{"a":2}" (base64 eyJhIjoxfQ== -> eyJhIjoyfQ==) */
	fg_buf_append(&t, env.data, env.len, &err);
	p = strstr(t.data, "eyJhIjoxfQ==");
	ok(p != NULL, "payload found in the envelope");
	if (p)
		p[9] = 'y';
	ok(fg_sign_open(&pl, &pt, hint, t.data, t.len, k, &err) == FG_EMISMATCH &&
	   strstr(err.msg, "does not verify"), "changed payload: signature fails");
	ok(pl.len == 0, "nothing returned from a failed open");
	ok(fg_sign_open(&pl, &pt, hint, "{\"x\":1}", 7, k, &err) == FG_EFORMAT, "not an envelope");
	{
		/* a hint that is no fingerprint is not handed on (audit would show it as the signer) */
		const char *odd = "{\"verificationMaterial\": {\"publicKey\": {\"hint\": \"Google\"}}}";

		ok(fg_sign_peek_hint(hint, odd, strlen(odd), &err) == 0 && hint[0] == 0,
		   "a hint that is no fingerprint peeks as none");
	}
	{
		/* hex in uppercase is the same fingerprint, handed on lowercase */
		char up[160], hex[65], want[65];
		size_t i;

		for (i = 0; i < 64; i++) {
			want[i] = "0123456789abcdef"[(i * 7) % 16];
			hex[i] = "0123456789ABCDEF"[(i * 7) % 16];
		}
		want[64] = hex[64] = 0;
		snprintf(up, sizeof(up), "{\"verificationMaterial\": {\"publicKey\": {\"hint\": \"%s\"}}}",
			 hex);
		ok(fg_sign_peek_hint(hint, up, strlen(up), &err) == 0 && !strcmp(hint, want),
		   "an uppercase hex hint peeks as its lowercase form (%s)", hint);
	}
	fg_sign_key_free(k);
	fg_sign_key_free(k2);
	fg_buf_release(&env);
	fg_buf_release(&pl);
	fg_buf_release(&pt);
	fg_buf_release(&t);
}

static void oms(void)
{
	char dir[] = "/tmp/fgomsXXXXXX";
	struct fg_oms_model *m = NULL, *back = NULL, *again = NULL;
	struct fg_buf st = FG_BUF_INIT, path = FG_BUF_INIT;
	struct fg_err err;
	FILE *f;

	ok(mkdtemp(dir) != NULL, "temp folder");
	fg_buf_printf(&path, &err, "%s/b.txt", dir);
	f = fopen(path.data, "w");
	fputs("bee", f);
	fclose(f);
	fg_buf_reset(&path);
	fg_buf_printf(&path, &err, "%s/a.txt", dir);
	f = fopen(path.data, "w");
	fputs("ay", f);
	fclose(f);
	ok(fg_oms_hash(&m, dir, "demo", &err) == 0 && m->n == 2, "hash a folder");
	ok(m && !strcmp(m->files[0].name, "a.txt") && !strcmp(m->files[1].name, "b.txt"), "sorted by name");
	ok(fg_oms_statement(&st, m, &err) == 0 && strstr(st.data, "\"https://model_signing/signature/v1.0\""),
	   "statement has the OMS predicate type");
	ok(fg_oms_parse(&back, st.data, st.len, &err) == 0 && !strcmp(back->root, m->root) &&
	   !strcmp(back->name, "demo"), "parse round trip, same root digest");
	ok(fg_oms_compare(back, m, &err) == 0, "compare: equal");
	f = fopen(path.data, "w");
	fputs("aY", f);
	fclose(f);
	ok(fg_oms_hash(&again, dir, "demo", &err) == 0 && fg_oms_compare(back, again, &err) == FG_EMISMATCH &&
	   strstr(err.msg, "a.txt: content changed"), "compare names the changed file");
	/* a statement whose subject digest does not match its resources */
	{
		char *p = strstr(st.data, m->root);

		if (p)
			p[0] = p[0] == '0' ? '1' : '0';
		fg_oms_model_free(back);
		back = NULL;
		ok(p && fg_oms_parse(&back, st.data, st.len, &err) == FG_EMISMATCH, "inconsistent root refused");
	}
	/* a link: refused when signing (naming --allow-symlinks) and when the
	 * signature says allow_symlinks false (naming that); followed, it is
	 * hashed as its file, and the statement says allow_symlinks true */
	{
		struct fg_buf ln = FG_BUF_INIT;
		struct fg_oms_model *lm = NULL, *lback = NULL;

		fg_buf_printf(&ln, &err, "%s/c.txt", dir);
		ok(symlink("a.txt", ln.data) == 0, "a link in the folder");
		ok(fg_oms_hash_ignoring(&lm, dir, "demo", fg_oms_ignore, fg_oms_n_ignore,
					FG_OMS_LINKS_REFUSE_SIGNING, &err) == FG_EUNSUPPORTED &&
		   strstr(err.msg, "c.txt: a symbolic link; fgpack sign --allow-symlinks"),
		   "signing refuses it, naming the option (%s)", err.msg);
		ok(fg_oms_hash_ignoring(&lm, dir, "demo", fg_oms_ignore, fg_oms_n_ignore,
					FG_OMS_LINKS_REFUSE, &err) == FG_EUNSUPPORTED &&
		   strstr(err.msg, "c.txt: a symbolic link, which a signature with allow_symlinks false"),
		   "verifying allow_symlinks false refuses it, saying so (%s)", err.msg);
		fg_buf_reset(&st);
		ok(fg_oms_hash_ignoring(&lm, dir, "demo", fg_oms_ignore, fg_oms_n_ignore,
					FG_OMS_LINKS_FOLLOW, &err) == 0 && lm->n == 3 &&
		   !strcmp(lm->files[2].sha256, again->files[0].sha256) &&
		   fg_oms_statement(&st, lm, &err) == 0 &&
		   fg_oms_parse(&lback, st.data, st.len, &err) == 0 && lback->allow_symlinks,
		   "followed: hashed as its file, the statement says allow_symlinks true (%s)", err.msg);
		unlink(ln.data);
		fg_oms_model_free(lm);
		fg_oms_model_free(lback);
		fg_buf_release(&ln);
	}
	unlink(path.data);
	fg_buf_reset(&path);
	fg_buf_printf(&path, &err, "%s/b.txt", dir);
	unlink(path.data);
	rmdir(dir);
	fg_oms_model_free(m);
	fg_oms_model_free(back);
	fg_oms_model_free(again);
	fg_buf_release(&st);
	fg_buf_release(&path);
}

/* predicate.serialization as model_signing writes it: the signed
 * ignore_paths are kept for the verifier, other methods and hash types are
 * refused by name, an ignore path outside the model is refused. The root
 * digest below is sha256 of nothing (no resources). */
static void serialization(void)
{
	static const char head[] =
		"{\"_type\": \"https://in-toto.io/Statement/v1\", \"subject\": [{\"name\": \"m\", "
		"\"digest\": {\"sha256\": "
		"\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"}}], "
		"\"predicateType\": \"https://model_signing/signature/v1.0\", \"predicate\": "
		"{\"resources\": [], \"serialization\": ";
	struct fg_buf t = FG_BUF_INIT;
	struct fg_oms_model *m = NULL;
	struct fg_err err = { 0, "" };

	fg_buf_printf(&t, &err, "%s{\"method\": \"files\", \"hash_type\": \"sha256\", "
		      "\"allow_symlinks\": false, \"ignore_paths\": [\"README.md\", \"cache/\"]}}}", head);
	ok(fg_oms_parse(&m, t.data, t.len, &err) == 0 && m->has_serialization && m->n_ignore == 2 &&
	   !strcmp(m->ignore[0], "README.md") && !strcmp(m->ignore[1], "cache"),
	   "signed ignore_paths kept (%s)", err.msg);
	fg_oms_model_free(m);
	m = NULL;
	fg_buf_reset(&t);
	fg_buf_printf(&t, &err, "%s{\"method\": \"shards\", \"hash_type\": \"sha256\", "
		      "\"shard_size\": 1000000000, \"allow_symlinks\": false}}}", head);
	ok(fg_oms_parse(&m, t.data, t.len, &err) == FG_EUNSUPPORTED && strstr(err.msg, "shards"),
	   "shards method refused by name (%s)", err.msg);
	fg_buf_reset(&t);
	fg_buf_printf(&t, &err, "%s{\"method\": \"files\", \"hash_type\": \"blake2\"}}}", head);
	ok(fg_oms_parse(&m, t.data, t.len, &err) == FG_EUNSUPPORTED && strstr(err.msg, "blake2"),
	   "blake2 hash type refused by name (%s)", err.msg);
	fg_buf_reset(&t);
	fg_buf_printf(&t, &err, "%s{\"method\": \"files\", \"ignore_paths\": [\"../x\"]}}}", head);
	ok(fg_oms_parse(&m, t.data, t.len, &err) == FG_EFORMAT, "ignore path outside the model refused");
	fg_buf_reset(&t);
	fg_buf_printf(&t, &err, "%s{\"method\": \"files\", \"ignore_paths\": [7]}}}", head);
	ok(fg_oms_parse(&m, t.data, t.len, &err) == FG_EFORMAT, "ignore path that is no string refused");
	fg_buf_reset(&t);
	fg_buf_printf(&t, &err, "%s{\"method\": \"files\", \"allow_symlinks\": true}}}", head);
	ok(fg_oms_parse(&m, t.data, t.len, &err) == 0 && m->allow_symlinks,
	   "allow_symlinks true kept for the verifier (%s)", err.msg);
	fg_oms_model_free(m);
	m = NULL;
	fg_buf_reset(&t);
	fg_buf_printf(&t, &err, "%s{\"method\": \"files\", \"allow_symlinks\": \"false\"}}}", head);
	ok(fg_oms_parse(&m, t.data, t.len, &err) == FG_EFORMAT && strstr(err.msg, "allow_symlinks"),
	   "allow_symlinks that is no boolean refused (%s)", err.msg);
	ok(fg_oms_check_format(FG_SIGN_OMS_PREDICATE, &err) == 0 &&
	   fg_oms_check_format("https://slsa.dev/provenance/v1", &err) == 0 &&
	   fg_oms_check_format(NULL, &err) == 0, "OMS 1.0 and other predicates pass the format check");
	ok(fg_oms_check_format("https://model_signing/Digests/v0.1", &err) == FG_EUNSUPPORTED &&
	   strstr(err.msg, "Digests/v0.1 (model_signing 0.x) is not supported") &&
	   strstr(err.msg, FG_SIGN_OMS_PREDICATE), "model_signing 0.x format refused, naming 1.0 (%s)",
	   err.msg);
	fg_buf_release(&t);
}

/* model_signing sorts its resources as PurePosixPath values, component by
 * component, so "a/b" comes before "a b", "a-b" and "a.txt" (a plain byte
 * sort puts it after them, since ' ', '-' and '.' are below '/'). The root
 * digest follows that order: sha256 over the raw digests in it. */
static void path_order(void)
{
	static const char *const rel[] = { "a.txt", "a-b", "a/b", "tokenizer.json", "tokenizer/x.json" };
	static const char *const want[] = { "a/b", "a-b", "a.txt", "tokenizer/x.json", "tokenizer.json" };
	char dir[] = "/tmp/fgordXXXXXX";
	struct fg_oms_model *m = NULL;
	struct fg_buf p = FG_BUF_INIT;
	struct fg_sha256 *h = NULL;
	struct fg_err err = { 0, "" };
	uint8_t d[32];
	char root[FG_SHA256_HEX_LEN + 1];
	size_t i;
	int order = 1;
	FILE *f;

	ok(mkdtemp(dir) != NULL, "temp folder");
	for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		fg_buf_reset(&p);
		fg_buf_printf(&p, &err, "%s/%s", dir, rel[i]);
		if (strchr(rel[i], '/')) {
			char *s = strrchr(p.data, '/');

			*s = 0;
			mkdir(p.data, 0755);
			*s = '/';
		}
		f = fopen(p.data, "w");
		if (f) {
			fputs(rel[i], f);
			fclose(f);
		}
	}
	ok(fg_oms_hash(&m, dir, "ord", &err) == 0 && m->n == 5, "hash the folder (%s)", err.msg);
	for (i = 0; m && i < m->n; i++)
		if (strcmp(m->files[i].name, want[i]))
			order = 0;
	ok(m && order, "resources in model_signing's order (%s, %s, ...)", m ? m->files[0].name : "",
	   m && m->n > 1 ? m->files[1].name : "");
	fg_sha256_new(&h, &err);
	for (i = 0; i < 5; i++) {
		fg_sha256_mem(want[i], strlen(want[i]), d, &err); /* each file holds its own name */
		fg_sha256_update(h, d, 32, &err);
	}
	fg_sha256_final(h, d, &err);
	fg_sha256_free(h);
	fg_hex_encode(d, 32, root);
	ok(m && !strcmp(m->root, root), "root digest as model_signing computes it");
	for (i = 0; i < 5; i++) {
		fg_buf_reset(&p);
		fg_buf_printf(&p, &err, "%s/%s", dir, rel[i]);
		unlink(p.data);
	}
	fg_buf_reset(&p);
	fg_buf_printf(&p, &err, "%s/a", dir);
	rmdir(p.data);
	fg_buf_reset(&p);
	fg_buf_printf(&p, &err, "%s/tokenizer", dir);
	rmdir(p.data);
	rmdir(dir);
	fg_oms_model_free(m);
	fg_buf_release(&p);
}

/* Where a signature lies relative to the folder it signs. */
static void rel_inside(void)
{
	static const struct {
		const char *file, *want; /* file relative to the temp folder's parent */
	} cases[] = {
		{ "m/sig.json", "sig.json" },      { "m/sub/x.sig", "sub/x.sig" },
		{ "m/./sub/../y.sig", "y.sig" },   { "m.sig", "" },
		{ "other/m/sig.json", "" },        { "m", "" },
		{ "m/missing/z.sig", "" }, /* no such folder: nothing can be written there */
	};
	char tmpl[] = "/tmp/fgsign-rel-XXXXXX", *top = mkdtemp(tmpl);
	struct fg_buf d = FG_BUF_INIT, f = FG_BUF_INIT, rel = FG_BUF_INIT;
	struct fg_err err;
	size_t i;

	ok(top != NULL, "temp folder");
	fg_buf_printf(&d, &err, "%s/m", top);
	mkdir(d.data, 0755);
	fg_buf_puts(&d, "/sub", &err);
	mkdir(d.data, 0755);
	fg_buf_reset(&d);
	fg_buf_printf(&d, &err, "%s/m", top);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fg_buf_reset(&f);
		fg_buf_reset(&rel);
		fg_buf_printf(&f, &err, "%s/%s", top, cases[i].file);
		ok(fg_oms_rel_inside(&rel, d.data, f.data, &err) == 0 &&
		   !strcmp(rel.data ? rel.data : "", cases[i].want),
		   "%s inside m: \"%s\"", cases[i].file, rel.data ? rel.data : "");
	}
	fg_buf_puts(&d, "/sub", &err);
	rmdir(d.data);
	fg_buf_reset(&d);
	fg_buf_printf(&d, &err, "%s/m", top);
	rmdir(d.data);
	rmdir(top);
	fg_buf_release(&d);
	fg_buf_release(&f);
	fg_buf_release(&rel);
}

/* what sign signs as a statement, and verify-sig takes for one when a file
 * differs from the statement signed (a changed statement, else a file the
 * signature does not cover) */
static void statement_kind(void)
{
	static const char st[] = "{\"_type\":\"https://in-toto.io/Statement/v1\",\"subject\":[]}";
	static const char v01[] = "{\"_type\":\"https://in-toto.io/Statement/v0.1\"}";
	static const char st_head[] = "\x10\0\0\0\0\0\0\0{\"__metadata__\":{}}";

	ok(fg_sign_is_statement(st, strlen(st)), "an in-toto Statement v1 is a statement");
	ok(!fg_sign_is_statement(v01, strlen(v01)), "another _type is not");
	ok(!fg_sign_is_statement(st, strlen(st) - 1), "a statement cut short is not");
	ok(!fg_sign_is_statement("[1]", 3), "a JSON array is not");
	ok(!fg_sign_is_statement(st_head, sizeof(st_head) - 1), "a safetensors file is not");
	ok(!fg_sign_is_statement("", 0), "an empty file is not");
}

/* What a terminal is shown of a signed name: quoted with every control
 * character escaped, C0, DEL and C1 (U+009B, a CSI to some terminals). */
static void shown(void)
{
	static const struct {
		const char *in, *out;
		int quote;
	} v[] = {
		{ "plain/name.bin", "plain/name.bin", 0 },
		{ "caf\xc3\xa9 \xe2\x80\x94", "caf\xc3\xa9 \xe2\x80\x94", 0 },
		{ "q\"b\\", "\"q\\\"b\\\\\"", 1 },
		{ "a\x1b[2Jb\n", "\"a\\u001b[2Jb\\n\"", 0 },
		{ "d\x7f", "\"d\\u007f\"", 0 },
		{ "c\xc2\x9b" "2J\xc2\x80\xc2\x9f\xc2\xa0", "\"c\\u009b2J\\u0080\\u009f\xc2\xa0\"", 0 },
		/* bytes that are no valid UTF-8: each one as \xNN, the name quoted
		 * for it; valid non-ASCII letters beside them as they are */
		{ "\xc2", "\"\\xc2\"", 0 },
		{ "a\x9b" "2J", "\"a\\x9b2J\"", 0 },
		{ "\x80\x9f.bin", "\"\\x80\\x9f.bin\"", 0 },
		{ "q\x85", "\"q\\x85\"", 1 },
		{ "\xc0\x9b", "\"\\xc0\\x9b\"", 0 },
		{ "\xed\xa0\x80", "\"\\xed\\xa0\\x80\"", 0 },
		{ "\xe2\x80x", "\"\\xe2\\x80x\"", 0 },
		{ "\xf4\x90\x80\x80", "\"\\xf4\\x90\\x80\\x80\"", 0 },
		{ "caf\xc3\xa9\x9b", "\"caf\xc3\xa9\\x9b\"", 0 },
		{ "\xe6\x97\xa5\xe6\x9c\xac/\xf0\x9f\x98\x80.bin", "\xe6\x97\xa5\xe6\x9c\xac/\xf0\x9f\x98\x80.bin", 0 },
	};
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err;
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		fg_buf_reset(&b);
		ok(!fg_sign_shown(&b, v[i].in, v[i].quote, &err), "shown %zu", i);
		is_str(b.data, v[i].out, "shown %zu as expected", i);
	}
	fg_buf_release(&b);
}

/* The cut after 128 bytes: never inside a valid character, and a run of
 * bytes that are no UTF-8 is cut byte by byte, each escaped. */
static void shown_cut(void)
{
	char in[201], want[1024];
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err;
	size_t i, w;

	memset(in, 'a', 127);
	memcpy(in + 127, "\xc3\xa9", 3);
	ok(!fg_sign_shown(&b, in, 0, &err), "127 bytes and a 2-byte letter");
	memcpy(want, in, 127);
	memcpy(want + 127, "\xe2\x80\xa6", 4);
	is_str(b.data, want, "  cut before the letter, not inside it");
	memset(in, 0x9b, 200);
	in[200] = '\0';
	fg_buf_reset(&b);
	ok(!fg_sign_shown(&b, in, 0, &err), "200 lone 0x9b bytes");
	want[0] = '"';
	for (w = 1, i = 0; i < 128; i++, w += 4)
		memcpy(want + w, "\\x9b", 4);
	memcpy(want + w, "\"\xe2\x80\xa6", 5);
	is_str(b.data, want, "  the first 128, each as \\x9b, quoted, then the ellipsis");
	ok(b.data && !memchr(b.data, 0x9b, b.len), "  no raw 0x9b byte left");
	fg_buf_release(&b);
}

int main(void)
{
	pae();
	roundtrip();
	oms();
	path_order();
	serialization();
	rel_inside();
	statement_kind();
	shown();
	shown_cut();
	return tap_done();
}
