/* test_ref.c - reference parsing, URL shapes and Hub environment settings. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ref.h"
#include "tap.h"

static struct fg_ref *parse_ok(const char *text)
{
	struct fg_ref *r = NULL;
	struct fg_err err = { 0, "" };

	if (fg_ref_parse(&r, text, &err))
		printf("# %s: %s\n", text, err.msg);
	return r;
}

static void refused(const char *text, const char *needle)
{
	struct fg_ref *r = NULL;
	struct fg_err err = { 0, "" };
	int rc = fg_ref_parse(&r, text, &err);

	ok(rc != 0 && r == NULL && strstr(err.msg, needle) && !strchr(err.msg, '\n'),
	   "refuse %s (\"%s\")", text, err.msg);
}

static void test_parse(void)
{
	struct fg_ref *r;
	struct fg_buf b = FG_BUF_INIT;

	r = parse_ok("hf://buckets/gemma-challenge/gemma-chiku-inu/weights/osoi5-v0-baked");
	ok(r && r->kind == FG_REF_BUCKET, "bucket: kind");
	if (r) {
		is_str(r->ns, "gemma-challenge", "bucket: namespace");
		is_str(r->name, "gemma-chiku-inu", "bucket: name");
		is_str(r->path, "weights/osoi5-v0-baked", "bucket: path");
		ok(r->revision == NULL && r->url == NULL, "bucket: no revision, no url");
		fg_ref_owner(&b, r, NULL);
		is_str(b.data, "gemma-challenge/gemma-chiku-inu", "bucket: owner");
		fg_buf_reset(&b);
		fg_ref_format(&b, r, NULL);
		is_str(b.data, r->text, "bucket: format round trip");
		fg_buf_reset(&b);
	}
	fg_ref_free(r);

	r = parse_ok("hf://buckets/ns/b/");
	ok(r && r->kind == FG_REF_BUCKET && !strcmp(r->path, ""), "bucket: root with trailing slash");
	fg_ref_free(r);

	r = parse_ok("hf://google/gemma-4-E4B-it@v1.0/tokenizer.json");
	ok(r && r->kind == FG_REF_MODEL, "model: kind");
	if (r) {
		is_str(r->ns, "google", "model: namespace");
		is_str(r->name, "gemma-4-E4B-it", "model: name");
		is_str(r->revision, "v1.0", "model: revision");
		is_str(r->path, "tokenizer.json", "model: path");
		fg_ref_format(&b, r, NULL);
		is_str(b.data, "hf://google/gemma-4-E4B-it@v1.0/tokenizer.json", "model: format");
		fg_buf_reset(&b);
	}
	fg_ref_free(r);

	r = parse_ok("hf://org/repo@refs/pr/12/sub/file.bin");
	ok(r && r->revision && !strcmp(r->revision, "refs/pr/12") && !strcmp(r->path, "sub/file.bin"),
	   "model: refs/pr revision keeps its slashes");
	fg_ref_free(r);

	/* huggingface_hub's HfFileSystem writes a revision holding '/' as one
	 * percent-encoded segment and unquotes it when reading a path */
	r = parse_ok("hf://org/repo@refs%2Fpr%2F3/sub/file.bin");
	ok(r && r->revision && !strcmp(r->revision, "refs/pr/3") && !strcmp(r->path, "sub/file.bin"),
	   "model: an encoded refs%%2Fpr%%2F3 revision decoded, the path after it kept");
	fg_ref_free(r);
	r = parse_ok("hf://org/repo@dev%2Fint4/w");
	ok(r && r->revision && !strcmp(r->revision, "dev/int4") && !strcmp(r->path, "w"),
	   "model: an encoded branch dev%%2Fint4 is one revision");
	if (r) {
		fg_ref_format(&b, r, NULL);
		is_str(b.data, "hf://org/repo@dev%2Fint4/w", "model: a branch holding '/' formats encoded again");
		fg_buf_reset(&b);
		fg_url_model_tree(&b, "http://h", r, NULL, NULL, NULL);
		is_str(b.data, "http://h/api/models/org/repo/tree/dev%2Fint4?recursive=true&expand=true",
		       "model: the decoded branch goes as one encoded segment");
		fg_buf_reset(&b);
	}
	fg_ref_free(r);

	r = parse_ok("hf://models/org/repo");
	ok(r && r->kind == FG_REF_MODEL && !strcmp(r->name, "repo") && !r->revision &&
		   !strcmp(fg_ref_revision(r), "main"),
	   "model: hf://models/ prefix, default revision main");
	fg_ref_free(r);

	r = parse_ok("google/gemma-4-E4B-it");
	ok(r && r->kind == FG_REF_MODEL && !strcmp(r->ns, "google") && !strcmp(r->path, ""),
	   "bare repo id");
	fg_ref_free(r);

	r = parse_ok("https://wheels.example.org/a/vllm-0.22%2Bg3.whl");
	ok(r && r->kind == FG_REF_HTTPS && !strcmp(r->url, r->text), "https url");
	if (r) {
		fg_ref_owner(&b, r, NULL);
		is_str(b.data, "wheels.example.org", "https: owner is the host");
		fg_buf_reset(&b);
	}
	fg_ref_free(r);

	r = parse_ok("file:///tmp/some%20dir/x/");
	ok(r && r->kind == FG_REF_FILE && !strcmp(r->path, "/tmp/some dir/x"), "file url decoded");
	fg_ref_free(r);

	r = parse_ok("datasets/x");
	if (r) {
		fg_ref_format(&b, r, NULL);
		is_str(b.data, "hf://models/datasets/x", "bare id with a keyword namespace formats unambiguously");
		fg_buf_reset(&b);
	}
	fg_ref_free(r);

	refused("", "empty");
	refused("hf://buckets/ns", "missing bucket name");
	refused("hf://buckets/ns/", "missing bucket name");
	refused("hf://buckets", "missing namespace");
	refused("hf://buckets/ns/b@v1", "no revisions");
	refused("hf://buckets/ns/b/a/../etc", "not a safe relative path");
	refused("hf://buckets/ns/b/a//c", "not a safe relative path");
	refused("hf://buckets/n s/b", "namespace");
	refused("hf://buckets/ns/b--x", "\"--\"");
	refused("hf://ns", "missing repo name");
	refused("hf://ns/repo@", "revision is empty");
	refused("hf://ns/repo@a..b", "revision");
	refused("hf://datasets/ns/x", "not supported");
	refused("s3://bucket/key", "unknown scheme");
	refused("https://", "no host");
	refused("https://user:pw@host/x", "credentials");
	refused("file://relative/x", "absolute path");
	refused("file:///a/%00b", "percent-escape");
	refused("file:///a/../b", "'..'");
	refused("ns/repo/extra", "bare repo id");
	refused("hf://ns/repo@refs/pr", "refs/<kind>/<name>");
	refused("hf://ns/repo@v%2", "bad percent-escape");
	refused("hf://ns/repo@v%00x", "bad percent-escape");
	refused("hf://ns/repo@a%2F..%2Fb", "\"..\"");
	refused("hf://ns/repo@a%20b", "not allowed in a revision");
	refused("justaword", "missing repo name");
	refused("hf://buckets/ns/b/x\ty", "control character");
	fg_buf_release(&b);
}

static void test_rel(void)
{
	struct fg_ref *r = parse_ok("hf://buckets/ns/b/weights/v0");
	struct fg_buf b = FG_BUF_INIT;

	if (!r) {
		ok(0, "rel: parse");
		return;
	}
	is_str(fg_ref_rel(r, "weights/v0/model.safetensors"), "model.safetensors", "rel: below");
	is_str(fg_ref_rel(r, "weights/v0/a/b.json"), "a/b.json", "rel: nested");
	ok(fg_ref_rel(r, "weights/v0x/a") == NULL, "rel: sibling prefix is not below");
	ok(fg_ref_rel(r, "other/x") == NULL, "rel: elsewhere");
	is_str(fg_ref_rel(r, "weights/v0"), "v0", "rel: the path itself is a single file");
	fg_ref_full(&b, r, "a/b.json", NULL);
	is_str(b.data, "weights/v0/a/b.json", "full: joins");
	fg_buf_release(&b);
	fg_ref_free(r);
}

static void test_urls(void)
{
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	struct fg_ref *bk = parse_ok("hf://buckets/ns/bk/dir with space");
	struct fg_ref *m = parse_ok("hf://org/repo@refs/pr/1");
	const char *ep = "http://127.0.0.1:8080";

	if (!bk || !m) {
		ok(0, "urls: parse");
		return;
	}
	fg_url_bucket_info(&b, ep, bk, NULL);
	is_str(b.data, "http://127.0.0.1:8080/api/buckets/ns/bk", "url: bucket info");
	fg_buf_reset(&b);
	fg_url_bucket_tree(&b, ep, bk, bk->path, NULL);
	is_str(b.data, "http://127.0.0.1:8080/api/buckets/ns/bk/tree/dir%20with%20space?recursive=true",
	       "url: bucket tree with encoded prefix");
	fg_buf_reset(&b);
	fg_url_bucket_tree(&b, ep, bk, NULL, NULL);
	is_str(b.data, "http://127.0.0.1:8080/api/buckets/ns/bk/tree?recursive=true", "url: bucket tree root");
	fg_buf_reset(&b);
	fg_url_bucket_paths_info(&b, ep, bk, NULL);
	is_str(b.data, "http://127.0.0.1:8080/api/buckets/ns/bk/paths-info", "url: paths-info");
	fg_buf_reset(&b);
	fg_url_bucket_resolve(&b, ep, bk, "dir with space/a+b#1.bin", NULL);
	is_str(b.data, "http://127.0.0.1:8080/buckets/ns/bk/resolve/dir%20with%20space/a%2Bb%231.bin",
	       "url: bucket resolve");
	fg_buf_reset(&b);
	fg_url_model_tree(&b, ep, m, NULL, "", NULL);
	is_str(b.data,
	       "http://127.0.0.1:8080/api/models/org/repo/tree/refs%2Fpr%2F1?recursive=true&expand=true",
	       "url: model tree, revision one segment");
	fg_buf_reset(&b);
	fg_url_model_resolve(&b, ep, m, "0123abcd", "sub/config.json", NULL);
	is_str(b.data, "http://127.0.0.1:8080/org/repo/resolve/0123abcd/sub/config.json",
	       "url: model resolve at a pinned commit");
	fg_buf_reset(&b);
	ok(fg_url_model_resolve(&b, ep, bk, NULL, "x", &err) == FG_EINVAL, "url: kind checked");
	ok(fg_url_bucket_resolve(&b, ep, bk, "", &err) == FG_EINVAL, "url: resolve needs a path");
	fg_buf_reset(&b);

	fg_url_origin(&b, "HTTPS://Hub.Example.org:443/a/b?c", NULL);
	is_str(b.data, "https://hub.example.org", "origin: lowercased, default port dropped");
	fg_buf_reset(&b);
	fg_url_origin(&b, "http://127.0.0.1:8080/x", NULL);
	is_str(b.data, "http://127.0.0.1:8080", "origin: keeps other ports");
	fg_buf_reset(&b);
	fg_url_origin(&b, "https://evil@cdn.example.net/x", NULL);
	is_str(b.data, "https://cdn.example.net", "origin: userinfo dropped");
	fg_buf_reset(&b);
	fg_url_encode_segment(&b, "a/b c~", NULL);
	is_str(b.data, "a%2Fb%20c~", "encode: segment");
	fg_buf_reset(&b);
	fg_url_file_name(&b, "https://w.example/a/vllm-0.22%2Bg3.whl?x=1#sha256=ab", NULL);
	is_str(b.data, "vllm-0.22+g3.whl", "file name: last segment decoded, query and fragment dropped");
	fg_buf_reset(&b);
	ok(fg_url_file_name(&b, "https://w.example", &err) == FG_EINVAL, "file name: none without a path");
	ok(fg_url_file_name(&b, "https://w.example/dir/", &err) == FG_EINVAL, "file name: none for a folder");
	ok(fg_url_file_name(&b, "https://w.example/a%2Fb", &err) == FG_EINVAL, "file name: no '/' once decoded");
	ok(fg_url_file_name(&b, "https://w.example/..", &err) == FG_EINVAL, "file name: not ..");
	ok(fg_url_file_name(&b, "https://w.example/a%00b", &err) == FG_EINVAL, "file name: no NUL");
	fg_buf_release(&b);
	fg_ref_free(bk);
	fg_ref_free(m);
}

/* The token found as huggingface_hub finds it (env, then the login file). */
static const char *token_now(struct fg_hub_env **e, struct fg_err *err)
{
	fg_hub_env_free(*e);
	*e = NULL;
	return fg_hub_env_load(e, err) ? NULL : (*e)->token ? (*e)->token : "";
}

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void test_token(void)
{
	struct fg_hub_env *e = NULL;
	struct fg_err err = { 0, "" };
	char dir[] = "/tmp/fgtok.XXXXXX", path[128], home[64], cache[96];
	const char *t;

	if (!mkdtemp(dir)) {
		ok(0, "token: mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/token", dir);
	snprintf(home, sizeof(home), "%s/.cache", dir);
	snprintf(cache, sizeof(cache), "%s/.cache/huggingface", dir);
	mkdir(home, 0700);
	mkdir(cache, 0700);
	put_file(path, "  hf_from_file\n");
	setenv("HF_TOKEN_PATH", path, 1);
	t = token_now(&e, &err);
	is_str(t, "hf_from_file", "token: HF_TOKEN_PATH's file, whitespace dropped");
	setenv("HF_TOKEN", "", 1);
	setenv("HUGGING_FACE_HUB_TOKEN", "hf_legacy", 1);
	t = token_now(&e, &err);
	is_str(t, "hf_legacy", "token: an empty HF_TOKEN is unset; HUGGING_FACE_HUB_TOKEN next, before the file");
	setenv("HF_TOKEN", "hf_env", 1);
	t = token_now(&e, &err);
	is_str(t, "hf_env", "token: HF_TOKEN first");
	setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1", 1);
	t = token_now(&e, &err);
	is_str(t, "", "token: none with HF_HUB_DISABLE_IMPLICIT_TOKEN");
	unsetenv("HF_HUB_DISABLE_IMPLICIT_TOKEN");
	unsetenv("HF_TOKEN");
	unsetenv("HUGGING_FACE_HUB_TOKEN");
	unsetenv("HF_TOKEN_PATH");
	setenv("HF_HOME", dir, 1);
	t = token_now(&e, &err);
	is_str(t, "hf_from_file", "token: $HF_HOME/token");
	unsetenv("HF_HOME");
	setenv("XDG_CACHE_HOME", home, 1);
	snprintf(path, sizeof(path), "%s/token", cache);
	put_file(path, "hf_xdg\r\n");
	t = token_now(&e, &err);
	is_str(t, "hf_xdg", "token: $XDG_CACHE_HOME/huggingface/token");
	unsetenv("XDG_CACHE_HOME");
	put_file(path, "\n\n");
	setenv("HF_TOKEN_PATH", path, 1);
	t = token_now(&e, &err);
	is_str(t, "", "token: a blank file is no token");
	put_file(path, "hf_a\nX-Injected: 1\n");
	ok(!token_now(&e, &err) && strstr(err.msg, path) && strstr(err.msg, "control character"),
	   "token: a file holding a header injection refused, naming it (%s)", err.msg);
	setenv("HF_TOKEN", "hf a", 1);
	ok(!token_now(&e, &err) && !strncmp(err.msg, "HF_TOKEN:", 9), "token: a space in HF_TOKEN refused (%s)",
	   err.msg);
	unsetenv("HF_TOKEN");
	setenv("HF_TOKEN_PATH", "/nonexistent/fgpack-test/token", 1);
	fg_hub_env_free(e);
	remove(path);
	snprintf(path, sizeof(path), "%s/token", dir);
	remove(path);
	rmdir(cache);
	rmdir(home);
	rmdir(dir);
}

static void test_env(void)
{
	struct fg_hub_env *e = NULL;
	struct fg_err err = { 0, "" };

	unsetenv("HF_ENDPOINT");
	unsetenv("HF_TOKEN");
	unsetenv("HF_HUB_OFFLINE");
	unsetenv("HUGGING_FACE_HUB_TOKEN");
	unsetenv("HF_HUB_DISABLE_IMPLICIT_TOKEN");
	setenv("HF_TOKEN_PATH", "/nonexistent/fgpack-test/token", 1);
	ok(fg_hub_env_load(&e, &err) == 0 && e && !strcmp(e->endpoint, "https://huggingface.co") &&
		   !e->token && !e->offline,
	   "env: defaults");
	fg_hub_env_free(e);
	setenv("HF_ENDPOINT", "http://127.0.0.1:9/", 1);
	setenv("HF_TOKEN", "hf_abc", 1);
	setenv("HF_HUB_OFFLINE", "TRUE", 1);
	ok(fg_hub_env_load(&e, &err) == 0 && e && !strcmp(e->endpoint, "http://127.0.0.1:9") &&
		   e->token && !strcmp(e->token, "hf_abc") && e->offline,
	   "env: endpoint without trailing slash, token, offline");
	fg_hub_env_free(e);
	setenv("HF_HUB_OFFLINE", "0", 1);
	ok(fg_hub_env_load(&e, &err) == 0 && e && !e->offline, "env: offline 0");
	fg_hub_env_free(e);
	setenv("HF_ENDPOINT", "ftp://x", 1);
	ok(fg_hub_env_load(&e, &err) == FG_EINVAL && strstr(err.msg, "HF_ENDPOINT"), "env: bad endpoint");
	unsetenv("HF_ENDPOINT");
	unsetenv("HF_TOKEN");
	unsetenv("HF_HUB_OFFLINE");
	test_token();
}

int main(void)
{
	test_parse();
	test_rel();
	test_urls();
	test_env();
	return tap_done();
}
