/* test_s3.c - the offline parts of lib/s3: the gateway's key rules,
 * endpoint resolution, and credentials from the environment or a file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "s3.h"
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

int main(void)
{
	keys();
	listing();
	endpoints();
	creds();
	return tap_done();
}
