/* test_sigv4.c - SigV4 known answers (the S3 examples in the AWS "Signature
 * Version 4 header-based authentication" documentation, 2013-05-24) and
 * encoding rules. With --sign it instead reads JSON cases from stdin (one per
 * line) and prints "<url> <authorization>" per case, for
 * tests/integration/sigv4_botocore.sh to compare with botocore. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "sigv4.h"
#include "tap.h"

static const struct fg_sigv4_cred doc_cred = { "AKIAIOSFODNN7EXAMPLE",
					      "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", NULL };

static const char *sig_of(struct fg_buf *auth)
{
	const char *s = auth->data ? strstr(auth->data, "Signature=") : NULL;

	return s ? s + 10 : "";
}

static void sign_doc(const char *what, const char *method, const char *path, const char *query,
		     const struct fg_sigv4_header *h, size_t nh, const char *payload,
		     const char *want_sig, const char *want_signed)
{
	struct fg_sigv4_request r = { method, "examplebucket.s3.amazonaws.com", path, query, h, nh,
				      payload, "20130524T000000Z", "us-east-1", "s3" };
	struct fg_buf auth = FG_BUF_INIT;
	struct fg_err err;
	int rc = fg_sigv4_sign(&auth, NULL, NULL, &r, &doc_cred, &err);

	is_int(rc, 0, "%s: signs", what);
	is_str(sig_of(&auth), want_sig, "%s: signature matches the AWS example", what);
	ok(auth.data && strstr(auth.data, want_signed), "%s: %s", what, want_signed);
	ok(auth.data && strstr(auth.data, "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"),
	   "%s: credential scope", what);
	ok(auth.data && !strstr(auth.data, doc_cred.secret_key), "%s: secret not in header", what);
	fg_buf_release(&auth);
}

static void known_answers(void)
{
	struct fg_sigv4_header get_h[] = { { "Range", "bytes=0-9" } };
	struct fg_sigv4_header put_h[] = { { "Date", "Fri, 24 May 2013 00:00:00 GMT" },
					   { "x-amz-storage-class", "REDUCED_REDUNDANCY" } };

	sign_doc("GET object", "GET", "/test.txt", NULL, get_h, 1, FG_SIGV4_EMPTY_SHA256,
		 "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		 "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,");
	sign_doc("PUT object", "PUT", "/test%24file.text", NULL, put_h, 2,
		 "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
		 "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
		 "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,");
	sign_doc("GET lifecycle (valueless)", "GET", "/", "lifecycle", NULL, 0, FG_SIGV4_EMPTY_SHA256,
		 "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
		 "SignedHeaders=host;x-amz-content-sha256;x-amz-date,");
	sign_doc("list objects (unsorted query)", "GET", "/", "prefix=J&max-keys=2", NULL, 0,
		 FG_SIGV4_EMPTY_SHA256,
		 "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
		 "SignedHeaders=host;x-amz-content-sha256;x-amz-date,");
}

static void canonical_forms(void)
{
	struct fg_sigv4_header h[] = { { "X-Custom", "  a   b\tc  " }, { "x-custom", "d" } };
	struct fg_sigv4_request r = { "POST", "127.0.0.1:9000", "/b/k", "uploads&b=2&a=1&b=1", h, 2,
				      FG_SIGV4_EMPTY_SHA256, "20260101T000000Z", "us-east-1", "s3" };
	struct fg_buf auth = FG_BUF_INIT, cr = FG_BUF_INIT, sts = FG_BUF_INIT, e = FG_BUF_INIT;
	struct fg_sigv4_param p[] = { { "uploads", NULL }, { "x y", "a+b/c~" }, { "é", "" } };
	struct fg_sigv4_header bad[] = { { "Host", "evil" } };
	struct fg_sigv4_header crlf[] = { { "x-a", "1\r\nx-b: 2" } };
	struct fg_err err;

	ok(fg_sigv4_sign(&auth, &cr, &sts, &r, &doc_cred, &err) == 0, "canonical: signs");
	ok(cr.data && strstr(cr.data, "POST\n/b/k\na=1&b=1&b=2&uploads=\n"),
	   "canonical: query sorted by name then value, valueless as name=");
	ok(cr.data && strstr(cr.data, "x-custom:a b c,d\n"),
	   "canonical: header values trimmed, collapsed, repeated joined by ','");
	ok(cr.data && strstr(cr.data, "\n\nhost;x-amz-content-sha256;x-amz-date;x-custom\n"),
	   "canonical: signed headers sorted");
	{
		const char *head = "AWS4-HMAC-SHA256\n20260101T000000Z\n20260101/us-east-1/s3/aws4_request\n";

		ok(sts.data && !strncmp(sts.data, head, strlen(head)) && sts.len == strlen(head) + 64,
		   "string to sign: algorithm, date, scope, hash");
	}

	fg_sigv4_query_build(&e, p, 3, &err);
	is_str(e.data, "uploads&x%20y=a%2Bb%2Fc~&%C3%A9=", "query build: encodes, valueless bare");
	fg_buf_reset(&e);
	fg_sigv4_uri_encode(&e, "a b/+%~é", 9, 1, &err);
	is_str(e.data, "a%20b/%2B%25~%C3%A9", "uri encode keeps '/' in paths");
	fg_buf_release(&e);

	r.headers = bad;
	r.n_headers = 1;
	ok(fg_sigv4_sign(&auth, NULL, NULL, &r, &doc_cred, &err) == FG_EINVAL, "refuses a caller Host header");
	r.headers = crlf;
	ok(fg_sigv4_sign(&auth, NULL, NULL, &r, &doc_cred, &err) == FG_EINVAL, "refuses a header with CRLF");
	r.headers = NULL;
	r.n_headers = 0;
	r.amz_date = "2026-01-01";
	ok(fg_sigv4_sign(&auth, NULL, NULL, &r, &doc_cred, &err) == FG_EINVAL, "refuses a bad date");
	fg_buf_release(&auth);
	fg_buf_release(&cr);
	fg_buf_release(&sts);

	{
		char d[17];

		fg_sigv4_amz_date(d, 0);
		is_str(d, "19700101T000000Z", "amz date format");
	}
}

/* --sign: each stdin line {"method","host","bucket","key","params":[[n,v|null]],
 * "headers":[[n,v]],"payload","date","access","secret","token"}. */
static int sign_stdin(void)
{
	char line[65536];

	while (fgets(line, sizeof(line), stdin)) {
		cJSON *c = NULL, *it;
		struct fg_err err;
		struct fg_buf path = FG_BUF_INIT, query = FG_BUF_INIT, auth = FG_BUF_INIT;
		struct fg_sigv4_param params[64];
		struct fg_sigv4_header hdrs[64];
		size_t np = 0, nh = 0;
		struct fg_sigv4_cred cred;
		struct fg_sigv4_request r;
		const char *key;

		if (fg_json_parse(&c, line, strlen(line), "case", &err)) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		cJSON_ArrayForEach(it, fg_json_arr(c, "params"))
		{
			cJSON *v = cJSON_GetArrayItem(it, 1);

			if (np == 64)
				return 1;
			params[np].name = cJSON_GetArrayItem(it, 0)->valuestring;
			params[np++].value = cJSON_IsString(v) ? v->valuestring : NULL;
		}
		cJSON_ArrayForEach(it, fg_json_arr(c, "headers"))
		{
			if (nh == 64)
				return 1;
			hdrs[nh].name = cJSON_GetArrayItem(it, 0)->valuestring;
			hdrs[nh++].value = cJSON_GetArrayItem(it, 1)->valuestring;
		}
		key = fg_json_str(c, "key");
		fg_buf_printf(&path, &err, "/%s/", fg_json_str(c, "bucket"));
		fg_sigv4_uri_encode(&path, key, strlen(key), 1, &err);
		if (fg_sigv4_query_build(&query, params, np, &err))
			return 1;
		cred.access_key = fg_json_str(c, "access");
		cred.secret_key = fg_json_str(c, "secret");
		cred.session_token = fg_json_str(c, "token");
		memset(&r, 0, sizeof(r));
		r.method = fg_json_str(c, "method");
		r.host = fg_json_str(c, "host");
		r.path = path.data;
		r.query = query.data;
		r.headers = hdrs;
		r.n_headers = nh;
		r.payload_sha256 = fg_json_str(c, "payload");
		r.amz_date = fg_json_str(c, "date");
		r.region = "us-east-1";
		r.service = "s3";
		if (fg_sigv4_sign(&auth, NULL, NULL, &r, &cred, &err)) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		printf("http://%s%s%s%s %s\n", r.host, path.data, query.len ? "?" : "",
		       query.len ? query.data : "", auth.data);
		fg_buf_release(&path);
		fg_buf_release(&query);
		fg_buf_release(&auth);
		cJSON_Delete(c);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--sign"))
		return sign_stdin();
	known_answers();
	canonical_forms();
	return tap_done();
}
