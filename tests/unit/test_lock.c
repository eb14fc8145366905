/* test_lock.c - buckets.lock: deterministic bytes, round trip, tree digest
 * known answer, pin checks, and refusal of hand-edited broken locks.
 *
 * Tree digest known answer, computed independently in a shell:
 *   printf 'hello\n' > a.txt; mkdir dir; : > dir/b.bin; printf x > B.txt
 *   for f in a.txt dir/b.bin B.txt; do
 *     echo "$(sha256sum < $f | cut -d' ' -f1) $(stat -c %s $f) $f"; done |
 *     LC_ALL=C sort -k3 | sha256sum
 *   -> ddd22b378c3731fae15b24c6b51c40190581c08b3d9e4aed5a3dcbe070d8faab */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"
#include "lock.h"
#include "tap.h"

#define H_HELLO "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
#define H_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define H_X "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
#define H_TREE "ddd22b378c3731fae15b24c6b51c40190581c08b3d9e4aed5a3dcbe070d8faab"
#define H_PIN "ed159e334999fd6b5f2d0dbad026346d4efac89eb7c6f55c5cdb042eca5dd18e"

static const char *fix = "tests/fixtures/manifests/precache-kenyan.json";

/* Builds the example lock; order 0/1 adds files and components in different orders. */
static struct fg_lock *build(int order)
{
	struct fg_lock *lock = NULL;
	struct fg_lock_manifest *lm = NULL;
	struct fg_manifest *m = NULL;
	struct fg_lock_remote rem = { 0 };
	struct fg_err err = { 0, "" };
	size_t i;
	int rc;

	rc = fg_manifest_load(&m, fix, &err);
	if (!rc)
		rc = fg_lock_new(&lock, &err);
	if (!rc)
		rc = fg_lock_add_from_manifest(&lm, lock, "manifests/kenyan.json", m, &err);
	if (!rc) {
		struct fg_lock_component *w = fg_lock_find_component(lm, "WEIGHTS_BUCKET");
		struct fg_lock_component *d = fg_lock_find_component(lm, "DRAFTER_BUCKET");

		rem.xet_hash = "deadbeef";
		rem.mtime = "2026-11-01T00:00:00.000Z";
		if (order == 0) {
			rc = fg_lock_component_add_file(w, "a.txt", 6, H_HELLO, &rem, &err);
			rc = rc ? rc : fg_lock_component_add_file(w, "dir/b.bin", 0, H_EMPTY, NULL, &err);
			rc = rc ? rc : fg_lock_component_add_file(w, "B.txt", 1, H_X, NULL, &err);
		} else {
			rc = fg_lock_component_add_file(w, "B.txt", 1, H_X, NULL, &err);
			rc = rc ? rc : fg_lock_component_add_file(w, "dir/b.bin", 0, H_EMPTY, NULL, &err);
			rc = rc ? rc : fg_lock_component_add_file(w, "a.txt", 6, H_HELLO, &rem, &err);
		}
		rc = rc ? rc : fg_lock_component_add_file(d, "model.safetensors", 1234, H_X, NULL, &err);
	}
	for (i = 0; !rc && lm && i < lm->n_components; i++)
		rc = fg_lock_component_finish(lm->components[i], &err);
	if (rc)
		printf("# build: %s\n", err.msg);
	fg_manifest_free(m);
	if (rc) {
		fg_lock_free(lock);
		return NULL;
	}
	return lock;
}

static void refuse(const char *good, const char *from, const char *to, const char *needle)
{
	struct fg_buf b = FG_BUF_INIT;
	const char *p = strstr(good, from);
	struct fg_lock *lock = NULL;
	struct fg_err err = { 0, "" };

	if (!p) {
		ok(0, "hand edit: \"%s\" not found", from);
		return;
	}
	fg_buf_append(&b, good, (size_t)(p - good), NULL);
	fg_buf_puts(&b, to, NULL);
	fg_buf_puts(&b, p + strlen(from), NULL);
	ok(fg_lock_parse(&lock, b.data, b.len, "buckets.lock", &err) == FG_EFORMAT && !lock &&
		   strstr(err.msg, needle),
	   "hand edit refused: %s", err.msg);
	fg_buf_release(&b);
}

int main(void)
{
	struct fg_lock *a = build(0), *b = build(1), *back = NULL;
	struct fg_buf ba = FG_BUF_INIT, bb = FG_BUF_INIT, bc = FG_BUF_INIT, gold = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	struct fg_lock_component *w, *d;
	struct fg_lock_file files[3];
	char dig[FG_SHA256_HEX_LEN + 1];
	const char *path = "build/test-lock.lock";

	ok(a && b, "build two locks");
	if (!a || !b)
		return tap_done();
	ok(fg_lock_serialize(&ba, a, &err) == 0 && fg_lock_serialize(&bb, b, &err) == 0, "serialize");
	ok(ba.len == bb.len && !memcmp(ba.data, bb.data, ba.len), "same bytes whatever the add order");
	ok(ba.len && ba.data[ba.len - 1] == '\n' && ba.data[ba.len - 2] == '}', "final newline");
	ok(strstr(ba.data, "\n  \"manifests\": {") && strstr(ba.data, "\"schema\": 1"),
	   "two-space indent, schema 1");

	/* the golden file pins the format: a change shows in review */
	ok(fg_file_read("tests/fixtures/lock/kenyan.lock", 1 << 20, &gold, &err) == 0, "golden read");
	ok(gold.len == ba.len && !memcmp(gold.data, ba.data, ba.len),
	   "bytes equal tests/fixtures/lock/kenyan.lock");

	w = fg_lock_find_component(fg_lock_find_manifest(a, "manifests/kenyan.json"), "WEIGHTS_BUCKET");
	is_str(w ? w->tree_digest : NULL, H_TREE, "tree digest known answer");
	is_str(w ? w->files[0].path : NULL, "B.txt", "files sorted by path bytes");
	ok(w && w->target && !strcmp(w->target, "/tmp/osoi5-v0-baked") && !strcmp(w->owner,
		   "gemma-challenge/gemma-chiku-inu") && !strcmp(w->kind, "bucket"),
	   "component from manifest: owner, kind, target");

	files[0].path = "x";
	files[0].size = 0;
	memcpy(files[0].sha256, H_EMPTY, sizeof(files[0].sha256));
	fg_lock_tree_digest(dig, files, 0, &err);
	is_str(dig, H_EMPTY, "tree digest of no files is sha256 of nothing");

	ok(fg_lock_write(path, a, &err) == 0, "write atomically");
	ok(fg_lock_read(&back, path, &err) == 0 && back, "read back (%s)", err.msg);
	if (back) {
		fg_lock_serialize(&bc, back, &err);
		ok(bc.len == ba.len && !memcmp(bc.data, ba.data, ba.len), "round trip keeps every byte");
		w = fg_lock_find_component(fg_lock_find_manifest(back, "manifests/kenyan.json"),
					   "WEIGHTS_BUCKET");
		ok(w && fg_lock_find_file(w, "a.txt") && fg_lock_find_file(w, "a.txt")->remote.xet_hash &&
			   !strcmp(fg_lock_find_file(w, "a.txt")->remote.xet_hash, "deadbeef"),
		   "remote identity survives");
	}
	fg_lock_free(back);
	unlink(path);

	/* pins: the drafter's single file must match DRAFTER_SHA256 */
	d = fg_lock_find_component(fg_lock_find_manifest(a, "manifests/kenyan.json"), "DRAFTER_BUCKET");
	ok(d && d->n_pins == 1 && !strcmp(d->pins[0].sha256, H_PIN), "pin carried into the lock");
	ok(d && fg_lock_check_pins(d, &err) == FG_EMISMATCH && strstr(err.msg, "model.safetensors") &&
		   strstr(err.msg, H_PIN) && strstr(err.msg, H_X),
	   "pin mismatch names file, expected, actual: %s", err.msg);
	if (d) {
		memcpy(d->files[0].sha256, H_PIN, sizeof(d->files[0].sha256));
		ok(fg_lock_check_pins(d, &err) == 0, "pin satisfied by the main file");
		fg_lock_component_add_file(d, "config.json", 10, H_X, NULL, &err);
		fg_lock_component_add_file(d, "big.bin", 99999, H_HELLO, NULL, &err);
		ok(fg_lock_main_file(d) && !strcmp(fg_lock_main_file(d)->path, "model.safetensors"),
		   "main file prefers .safetensors over a larger other file");
	}

	ok(fg_lock_component_add_file(d, "../etc/passwd", 1, H_X, NULL, &err) == FG_EINVAL,
	   "unsafe path refused when adding");
	ok(fg_lock_component_add_file(d, "y", 1, "ABC", NULL, &err) == FG_EINVAL, "bad hex refused");

	refuse(ba.data, "\"schema\": 1", "\"schema\": 2", "schema: written by a newer fgpack");
	refuse(ba.data, "\"schema\": 1", "\"schema\": \"1\"", "schema: expected an integer");
	refuse(ba.data, "\"sha256\": \"" H_HELLO, "\"sha256\": \"" "5891B5", "files[1].sha256: not 64");
	refuse(ba.data, "\"size\": 6", "\"size\": 7", "WEIGHTS_BUCKET.tree_digest: does not match");
	refuse(ba.data, "\"size\": 6", "\"size\": -6", "files[1].size: negative");
	refuse(ba.data, "\"path\": \"a.txt\"", "\"path\": \"/a.txt\"", "files[1].path: not a safe");
	refuse(ba.data, "\"path\": \"a.txt\"", "\"path\": \"z.txt\"", "not sorted by path");
	refuse(ba.data, "\"role\": \"weights\"", "\"role\": \"weights\", \"colour\": \"red\"",
	       "WEIGHTS_BUCKET.colour: unknown field");
	refuse(ba.data, "\"kind\": \"bucket\",\n          \"owner\": \"gemma-challenge/gemma-chiku-inu\"",
	       "\"kind\": \"model\",\n          \"owner\": \"gemma-challenge/gemma-chiku-inu\"",
	       "kind: does not match source");
	refuse(ba.data, "\"xet_hash\": \"deadbeef\"", "\"xet_hash\": 5", "remote.xet_hash: expected a string");
	refuse(ba.data, "\"DRAFTER_SHA256\": \"ed", "\"DRAFTER_SHA256\": \"zz", "pins.DRAFTER_SHA256");
	refuse(ba.data, "{", "[", "not valid JSON");
	refuse(ba.data, "\"kind\": \"unpinned\",\n          \"name\": \"torch\"",
	       "\"kind\": \"loose\",\n          \"name\": \"torch\"", "dependencies[6].kind: not url, pin or unpinned");
	refuse(ba.data, "\"spec\": \"transformers==5.9.0\",", "\"spec\": \"transformers==5.9.0\", \"size\": 3,",
	       "dependencies[1].size: without sha256");
	refuse(ba.data, "\"spec\": \"torch\"", "\"spec\": \"torch\", \"sha256\": \"XY\"",
	       "dependencies[6].sha256");
	{
		/* a URL dependency with its fetched digest reads back and writes the same bytes */
		struct fg_buf e = FG_BUF_INIT, back_b = FG_BUF_INIT;
		struct fg_lock *l2 = NULL;
		const char *at = strstr(ba.data, "\"kind\": \"url\",");

		if (at) {
			fg_buf_append(&e, ba.data, (size_t)(at - ba.data), NULL);
			fg_buf_puts(&e, "\"kind\": \"url\",\n          \"sha256\": \"" H_X "\",\n          \"size\": 1,", NULL);
			fg_buf_puts(&e, at + strlen("\"kind\": \"url\","), NULL);
		}
		ok(at && fg_lock_parse(&l2, e.data, e.len, "b.lock", &err) == 0 &&
			   fg_lock_serialize(&back_b, l2, &err) == 0 && back_b.len == e.len &&
			   !memcmp(back_b.data, e.data, e.len),
		   "dependency digest round-trips byte for byte");
		ok(l2 && l2->manifests[0]->n_deps == 7 && !strcmp(l2->manifests[0]->deps[0].sha256, H_X) &&
			   l2->manifests[0]->deps[0].size == 1,
		   "dependency digest and size read");
		fg_buf_release(&e);
		fg_buf_release(&back_b);
		fg_lock_free(l2);
	}

	fg_buf_release(&ba);
	fg_buf_release(&bb);
	fg_buf_release(&bc);
	fg_buf_release(&gold);
	fg_lock_free(a);
	fg_lock_free(b);
	return tap_done();
}
