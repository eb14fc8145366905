/* test_s3.c - the offline parts of lib/s3: the gateway's key rules,
 * endpoint resolution, credentials from the environment or a file, and the
 * addressing style: which requests go virtual-hosted (botocore's answers),
 * the URL, Host and canonical URI of each, signed into the AWS SigV4
 * documentation's own virtual-hosted examples. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "s3.h"
#include "sigv4.h"
#include "tap.h"

static void keys(void)
{
	static const char *good[] = { "a", "weights/model.safetensors", "dir with spaces/é+~%.bin",
				      "a/b.c/..d/.e", "x/...", "模型/权重" };
	static const char *bad[] = { "", "/lead", "trail/", "a//b", "../up", "a/../b", "./here",
				     "a/./b", "back\\slash", "ctl\x01", "del\x7f", "bad\xff" "utf8",
				     "a/..", "over\xc0\xaf" "encoded" };
	struct fg_err err;
	size_t i;
	char big[1100];

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ok(fg_s3_key_check(good[i], &err) == 0, "key accepted: %s", good[i]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(fg_s3_key_check(bad[i], &err) == FG_EINVAL, "key refused: case %zu (%s)", i, err.msg);
	memset(big, 'k', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	ok(fg_s3_key_check(big, &err) == FG_EINVAL, "key over 1024 bytes refused");
	ok(fg_s3_key_check("a\\b", &err) == FG_EINVAL && strstr(err.msg, "'\\'"), "message names the rule");
}

static void endpoints(void)
{
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err;

	unsetenv("AWS_ENDPOINT_URL");
	unsetenv("AWS_ENDPOINT_URL_S3");
	fg_s3_endpoint_resolve(&b, NULL, "gemma-challenge", &err);
	is_str(b.data, "https://s3.hf.co/gemma-challenge", "default: the HF gateway of the namespace");
	fg_buf_reset(&b);
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/", 1);
	fg_s3_endpoint_resolve(&b, NULL, "ns", &err);
	is_str(b.data, "http://127.0.0.1:9000", "AWS_ENDPOINT_URL, trailing '/' dropped");
	fg_buf_reset(&b);
	setenv("AWS_ENDPOINT_URL_S3", "http://s3only:1", 1);
	fg_s3_endpoint_resolve(&b, NULL, "ns", &err);
	is_str(b.data, "http://s3only:1", "AWS_ENDPOINT_URL_S3 wins over AWS_ENDPOINT_URL");
	fg_buf_reset(&b);
	fg_s3_endpoint_resolve(&b, "https://x.example/base", "ns", &err);
	is_str(b.data, "https://x.example/base", "--endpoint wins over both");
	unsetenv("AWS_ENDPOINT_URL");
	unsetenv("AWS_ENDPOINT_URL_S3");
	fg_buf_release(&b);
}

static void creds(void)
{
	struct fg_s3_creds c;
	struct fg_err err;
	char path[] = "/tmp/fgs3credsXXXXXX";
	int fd = mkstemp(path);
	const char *text = "# comment\n[other]\naws_access_key_id = OTHER\naws_secret_access_key = nope\n"
			   "[default]\n  aws_access_key_id = AKIDFILE  \naws_secret_access_key=se/cr+et==\n";

	ok(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "credentials file written");
	close(fd);
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	unsetenv("AWS_PROFILE");
	unsetenv("AWS_SESSION_TOKEN");
	ok(fg_s3_creds_load(&c, &err) == 0 && !strcmp(c.access_key, "AKIDENV") &&
	   !strcmp(c.source, "environment"), "environment first");
	fg_s3_creds_clear(&c);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	ok(fg_s3_creds_load(&c, &err) == 0 && !strcmp(c.access_key, "AKIDFILE") &&
	   !strcmp(c.secret_key, "se/cr+et==") && !strcmp(c.source, "credentials file"),
	   "then the default profile of the file, values trimmed");
	fg_s3_creds_clear(&c);
	setenv("AWS_PROFILE", "other", 1);
	ok(fg_s3_creds_load(&c, &err) == 0 && !strcmp(c.access_key, "OTHER"), "AWS_PROFILE picks the section");
	fg_s3_creds_clear(&c);
	setenv("AWS_PROFILE", "missing", 1);
	ok(fg_s3_creds_load(&c, &err) == FG_EAUTH && strstr(err.msg, "[missing]") &&
	   !strstr(err.msg, "se/cr+et"), "missing profile: FG_EAUTH naming where, no secret in it");
	unsetenv("AWS_PROFILE");
	unsetenv("AWS_SHARED_CREDENTIALS_FILE");
	unlink(path);
}

/* ListObjectsV2 answers: keys percent-decoded only when the answer says
 * EncodingType url ('+' a space, as AWS writes and botocore reads). */
static void listing(void)
{
	static const char enc[] = "<ListBucketResult><EncodingType>url</EncodingType>"
				  "<IsTruncated>false</IsTruncated><Contents><Key>d/a+b%2Bc%C3%A9%01</Key>"
				  "<Size>3</Size></Contents></ListBucketResult>";
	static const char raw[] = "<ListBucketResult><IsTruncated>true</IsTruncated>"
				  "<NextContinuationToken>t+/=</NextContinuationToken><Contents><Key>d/a+p%41&amp;"
				  "&#xE9;</Key><Size>1</Size><ETag>&quot;e1&quot;</ETag></Contents></ListBucketResult>";
	static const char nul[] = "<ListBucketResult><EncodingType>url</EncodingType><Contents>"
				  "<Key>a%00b</Key><Size>1</Size></Contents></ListBucketResult>";
	struct fg_s3_list l = { 0 };
	struct fg_buf tok = FG_BUF_INIT;
	struct fg_err err;
	int tr = -1;

	ok(fg_s3_parse_list(&l, &tr, &tok, enc, strlen(enc), &err) == 0 && l.n == 1, "url-encoded page parsed");
	is_str(l.n ? l.items[0].key : "", "d/a b+c\xc3\xa9\x01", "url-encoded key decoded, '+' a space");
	ok(tr == 0, "not truncated");
	fg_s3_list_clear(&l);
	ok(fg_s3_parse_list(&l, &tr, &tok, raw, strlen(raw), &err) == 0 && l.n == 1, "plain page parsed");
	is_str(l.n ? l.items[0].key : "", "d/a+p%41&\xc3\xa9", "plain key: entities decoded, '%%' and '+' kept");
	is_str(l.n ? l.items[0].etag : "", "e1", "ETag unquoted");
	ok(tr == 1 && tok.data && !strcmp(tok.data, "t+/="), "truncated, token as sent");
	fg_s3_list_clear(&l);
	ok(fg_s3_parse_list(&l, &tr, &tok, nul, strlen(nul), &err) == FG_EFORMAT, "a key decoding to NUL refused");
	fg_s3_list_clear(&l);
	{ /* IsTruncated is an xs:boolean: "1" and "True" are true too, "0" false */
		static const char *const forms[] = {"1", "True", "TRUE", "0", "false"};

		for (int i = 0; i < 5; i++) {
			char x[256];

			snprintf(x, sizeof(x),
				 "<ListBucketResult><IsTruncated>%s</IsTruncated><NextContinuationToken>k"
				 "</NextContinuationToken><Contents><Key>a</Key><Size>1</Size></Contents>"
				 "</ListBucketResult>",
				 forms[i]);
			tr = -1;
			ok(fg_s3_parse_list(&l, &tr, &tok, x, strlen(x), &err) == 0 && tr == (i < 3),
			   "IsTruncated %s read as %s", forms[i], i < 3 ? "true" : "false");
			fg_s3_list_clear(&l);
		}
	}
	fg_buf_release(&tok);
}

/* Which buckets go virtual-hosted. The expectations are what botocore
 * 1.43.11 (endpoint ruleset) sends for HeadObject with these endpoints and
 * s3.addressing_style (tests/integration/publish_vhost.sh says how they
 * were taken), with two deliberate differences: botocore's auto is
 * path-style for every endpoint URL given, where fgpack's auto treats AWS's
 * own hosts as botocore treats no endpoint URL at all (virtual); and
 * botocore puts a dotted name before an IP endpoint ("my.bucket.127.0.0.1"),
 * which no DNS answers, where fgpack keeps path-style for any IP. */
static void addressing(void)
{
	static const struct {
		const char *endpoint, *style, *bucket;
		int virt;
	} cases[] = {
		{ "https://s3.amazonaws.com", "auto", "mybucket", 1 },
		{ "https://s3.eu-west-1.amazonaws.com", "auto", "mybucket", 1 },
		{ "https://S3.EU-WEST-1.AMAZONAWS.COM", "auto", "mybucket", 1 },
		{ "https://s3.dualstack.eu-west-1.amazonaws.com", "auto", "mybucket", 1 },
		{ "https://s3-eu-west-1.amazonaws.com", "auto", "mybucket", 1 },
		{ "https://s3.cn-north-1.amazonaws.com.cn", "auto", "mybucket", 1 },
		{ "https://s3.eu-west-1.amazonaws.com", "auto", "my.bucket", 0 },
		{ "https://s3.eu-west-1.amazonaws.com", "auto", "My_Bucket", 0 },
		{ "https://s3.eu-west-1.amazonaws.com", "auto", "ab", 0 },
		{ "https://s3.eu-west-1.amazonaws.com", "auto", "192.168.1.1", 0 },
		{ "https://s3.eu-west-1.amazonaws.com", "auto", "-abc", 0 },
		{ "https://s3.eu-west-1.amazonaws.com", "auto",
		  "a234567890123456789012345678901234567890123456789012345678901234", 0 },
		{ "https://s3.eu-west-1.amazonaws.com", "path", "mybucket", 0 },
		{ "https://s3.eu-west-1.amazonaws.com", "virtual", "mybucket", 1 },
		{ "https://s3.eu-west-1.amazonaws.com", "virtual", "my.bucket", 0 },
		{ "https://s3-accelerate.amazonaws.com", "auto", "mybucket", 0 },
		{ "https://notaws-s3.amazonaws.com.evil.example", "auto", "mybucket", 0 },
		{ "http://minio.example:9000", "auto", "mybucket", 0 },
		{ "http://minio.example:9000", "path", "mybucket", 0 },
		{ "http://minio.example:9000", "virtual", "mybucket", 1 },
		{ "http://minio.example:9000", "virtual", "my.bucket", 1 },
		{ "https://minio.example:9000", "virtual", "my.bucket", 0 },
		{ "http://minio.example:9000", "virtual", "My_Bucket", 0 },
		{ "http://minio.example:9000", "virtual", "ab", 0 },
		{ "http://minio.example:9000", "virtual", "my..bucket", 0 },
		{ "http://127.0.0.1:9000", "auto", "mybucket", 0 },
		{ "http://127.0.0.1:9000", "virtual", "mybucket", 0 },
		{ "http://127.0.0.1:9000", "virtual", "my.bucket", 0 },
		{ "http://[::1]:9000", "virtual", "mybucket", 0 },
		{ "http://localhost:9000", "auto", "mybucket", 0 },
		{ "http://localhost:9000", "virtual", "mybucket", 1 },
		{ "https://s3.hf.co/ns", "auto", "mybucket", 0 },
		{ "https://s3.hf.co/ns", "virtual", "mybucket", 1 },
	};
	enum fg_s3_addressing a;
	struct fg_err err;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (fg_s3_addressing_parse(&a, cases[i].style, &err))
			a = (enum fg_s3_addressing)-1;
		is_int(fg_s3_virtual(cases[i].endpoint, a, cases[i].bucket), cases[i].virt,
		       "%s %s %s: %s", cases[i].endpoint, cases[i].style, cases[i].bucket,
		       cases[i].virt ? "virtual-hosted" : "path-style");
	}
	ok(fg_s3_addressing_parse(&a, "Virtual", &err) == FG_EINVAL && strstr(err.msg, "Virtual"),
	   "addressing style: only botocore's lowercase names");
}

static const struct fg_s3_creds doc_creds = { "AKIAIOSFODNN7EXAMPLE",
					      "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", NULL, "test" };

static struct fg_s3 *open_ep(const char *endpoint, enum fg_s3_addressing a)
{
	struct fg_s3_opts o = { 0 };
	struct fg_s3 *s = NULL;
	struct fg_err err;

	o.endpoint = endpoint;
	o.creds = &doc_creds;
	o.addressing = a;
	if (fg_s3_new(&s, &o, &err))
		printf("# fg_s3_new %s: %s\n", endpoint, err.msg);
	return s;
}

/* target EP STYLE BUCKET KEY -> URL HOST PATH */
static void target_is(const char *ep, enum fg_s3_addressing a, const char *bucket, const char *key,
		      const char *url, const char *host, const char *path)
{
	struct fg_s3 *s = open_ep(ep, a);
	struct fg_buf u = FG_BUF_INIT, h = FG_BUF_INIT, p = FG_BUF_INIT;
	struct fg_err err;

	ok(s && fg_s3_target(s, &u, &h, &p, bucket, key, &err) == 0, "target %s %s/%s", ep, bucket,
	   key ? key : "");
	is_str(u.data, url, "  url");
	is_str(h.data, host, "  Host");
	is_str(p.data, path, "  canonical URI");
	fg_buf_release(&u);
	fg_buf_release(&h);
	fg_buf_release(&p);
	fg_s3_free(s);
}

static void targets(void)
{
	target_is("https://s3.eu-west-1.amazonaws.com", FG_S3_ADDR_AUTO, "mybucket", "a b/k+é.txt",
		  "https://mybucket.s3.eu-west-1.amazonaws.com/a%20b/k%2B%C3%A9.txt",
		  "mybucket.s3.eu-west-1.amazonaws.com", "/a%20b/k%2B%C3%A9.txt");
	target_is("https://s3.eu-west-1.amazonaws.com", FG_S3_ADDR_AUTO, "mybucket", NULL,
		  "https://mybucket.s3.eu-west-1.amazonaws.com/", "mybucket.s3.eu-west-1.amazonaws.com", "/");
	target_is("https://s3.eu-west-1.amazonaws.com", FG_S3_ADDR_PATH, "mybucket", "k",
		  "https://s3.eu-west-1.amazonaws.com/mybucket/k", "s3.eu-west-1.amazonaws.com",
		  "/mybucket/k");
	target_is("https://s3.eu-west-1.amazonaws.com", FG_S3_ADDR_AUTO, "my.bucket", NULL,
		  "https://s3.eu-west-1.amazonaws.com/my.bucket", "s3.eu-west-1.amazonaws.com", "/my.bucket");
	target_is("http://Minio.Example:9000/", FG_S3_ADDR_VIRTUAL, "mybucket", "k",
		  "http://mybucket.minio.example:9000/k", "mybucket.minio.example:9000", "/k");
	target_is("http://127.0.0.1:9000", FG_S3_ADDR_AUTO, "mybucket", "k",
		  "http://127.0.0.1:9000/mybucket/k", "127.0.0.1:9000", "/mybucket/k");
	/* an endpoint's base path stays, before the key (botocore: same) */
	target_is("https://s3.hf.co/ns", FG_S3_ADDR_VIRTUAL, "mybucket", "a/b",
		  "https://mybucket.s3.hf.co/ns/a/b", "mybucket.s3.hf.co", "/ns/a/b");
	target_is("https://s3.hf.co/ns", FG_S3_ADDR_AUTO, "mybucket", "a/b",
		  "https://s3.hf.co/ns/mybucket/a/b", "s3.hf.co", "/ns/mybucket/a/b");
	target_is("http://[::1]:9000", FG_S3_ADDR_VIRTUAL, "mybucket", "k", "http://[::1]:9000/mybucket/k",
		  "[::1]:9000", "/mybucket/k");
}

/* The AWS SigV4 documentation's S3 examples are virtual-hosted
 * (examplebucket.s3.amazonaws.com): the Host and canonical URI that
 * fg_s3_target gives for that bucket at https://s3.amazonaws.com, signed,
 * must give the documented signatures. */
static void doc_examples(void)
{
	static const struct {
		const char *what, *method, *key, *query, *payload, *sig;
		struct fg_sigv4_header h[2];
		size_t nh;
	} ex[] = {
		{ "GET object", "GET", "test.txt", NULL, FG_SIGV4_EMPTY_SHA256,
		  "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		  { { "Range", "bytes=0-9" } }, 1 },
		{ "PUT object", "PUT", "test$file.text", NULL,
		  "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
		  "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
		  { { "Date", "Fri, 24 May 2013 00:00:00 GMT" }, { "x-amz-storage-class", "REDUCED_REDUNDANCY" } },
		  2 },
		{ "GET bucket lifecycle", "GET", NULL, "lifecycle", FG_SIGV4_EMPTY_SHA256,
		  "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543", { { 0 } }, 0 },
		{ "list objects", "GET", NULL, "max-keys=2&prefix=J", FG_SIGV4_EMPTY_SHA256,
		  "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7", { { 0 } }, 0 },
	};
	struct fg_s3 *s = open_ep("https://s3.amazonaws.com", FG_S3_ADDR_AUTO);
	struct fg_sigv4_cred cred = { doc_creds.access_key, doc_creds.secret_key, NULL };
	size_t i;

	for (i = 0; i < sizeof(ex) / sizeof(ex[0]); i++) {
		struct fg_buf h = FG_BUF_INIT, p = FG_BUF_INIT, auth = FG_BUF_INIT;
		struct fg_err err;
		struct fg_sigv4_request r = { ex[i].method, NULL, NULL, ex[i].query, ex[i].h, ex[i].nh,
					      ex[i].payload, "20130524T000000Z", "us-east-1", "s3" };
		const char *sig;

		ok(s && fg_s3_target(s, NULL, &h, &p, "examplebucket", ex[i].key, &err) == 0,
		   "AWS example %s: target", ex[i].what);
		r.host = h.data;
		r.path = p.data;
		ok(h.data && !strcmp(h.data, "examplebucket.s3.amazonaws.com") &&
		   fg_sigv4_sign(&auth, NULL, NULL, &r, &cred, &err) == 0, "AWS example %s: Host %s, signed",
		   ex[i].what, h.data ? h.data : "?");
		sig = auth.data && strstr(auth.data, "Signature=") ? strstr(auth.data, "Signature=") + 10 : "";
		is_str(sig, ex[i].sig, "AWS example %s: the documented signature", ex[i].what);
		fg_buf_release(&h);
		fg_buf_release(&p);
		fg_buf_release(&auth);
	}
	fg_s3_free(s);
}

/* The AWS CLI's config file: [profile NAME] (or [default]), s3 = and its
 * indented addressing_style. */
static void config_file(void)
{
	char path[] = "/tmp/fgs3confXXXXXX";
	int fd = mkstemp(path);
	const char *text = "[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n"
			   "[profile vh]\ns3 =\n  max_concurrent_requests = 4\n  addressing_style = virtual\n"
			   "addressing_style = path\n"
			   "[profile flat]\naddressing_style = virtual\n"
			   "[profile bad]\ns3 =\n\taddressing_style = Virtual\n";
	enum fg_s3_addressing a;
	struct fg_err err;

	ok(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "config file written");
	close(fd);
	setenv("AWS_CONFIG_FILE", path, 1);
	unsetenv("AWS_PROFILE");
	ok(fg_s3_addressing_config(&a, &err) == 0 && a == FG_S3_ADDR_PATH, "config: [default] s3 path");
	setenv("AWS_PROFILE", "vh", 1);
	ok(fg_s3_addressing_config(&a, &err) == 0 && a == FG_S3_ADDR_VIRTUAL,
	   "config: [profile vh] s3 virtual (an unindented line after the section is not in it)");
	setenv("AWS_PROFILE", "flat", 1);
	ok(fg_s3_addressing_config(&a, &err) == 0 && a == FG_S3_ADDR_AUTO,
	   "config: addressing_style outside an s3 section is not read");
	setenv("AWS_PROFILE", "nope", 1);
	ok(fg_s3_addressing_config(&a, &err) == 0 && a == FG_S3_ADDR_AUTO, "config: missing profile: auto");
	setenv("AWS_PROFILE", "bad", 1);
	ok(fg_s3_addressing_config(&a, &err) == FG_EINVAL && strstr(err.msg, "[profile bad]") &&
	   strstr(err.msg, "Virtual"), "config: a bad value names the file's profile and the value");
	setenv("AWS_CONFIG_FILE", "/nonexistent/fgpack/config", 1);
	ok(fg_s3_addressing_config(&a, &err) == 0 && a == FG_S3_ADDR_AUTO, "config: no file: auto");
	unsetenv("AWS_CONFIG_FILE");
	unsetenv("AWS_PROFILE");
	unlink(path);
}

int main(void)
{
	keys();
	addressing();
	targets();
	doc_examples();
	config_file();
	listing();
	endpoints();
	creds();
	return tap_done();
}
