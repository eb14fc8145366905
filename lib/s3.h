/* s3.h - a small S3 client for the Hugging Face bucket gateway (and any
 * S3-compatible server): PutObject, HeadObject, GetObject with Range,
 * ListObjectsV2 with paging, and multipart upload with parallel parts,
 * per-part retry and a local journal so an interrupted upload resumes by
 * sending only the parts the server does not have yet.
 *
 * Addressing is path-style ({endpoint}/{bucket}/{key}) or virtual-hosted
 * ({scheme}://{bucket}.{endpoint host}/{key}), chosen per bucket as botocore's
 * addressing_style does (fg_s3_virtual). The endpoint may carry a base path
 * (the HF gateway is https://s3.hf.co/<namespace>, path-style only). Requests
 * are signed with SigV4 (lib/sigv4.h) over plain bodies (never aws-chunked,
 * which the gateway does not parse). Credentials are held in memory only and
 * never appear in any message. Keys are checked with fg_s3_key_check before
 * anything is sent. */
#ifndef FG_S3_H
#define FG_S3_H

#include <stddef.h>

#include "buf.h"
#include "err.h"

#define FG_S3_DEFAULT_REGION "us-east-1"
#define FG_S3_HF_GATEWAY "https://s3.hf.co" /* + "/<namespace>" */
#define FG_S3_ETAG_MAX 128
#define FG_S3_MIN_PART ((unsigned long long)5 << 20)
#define FG_S3_MAX_PARTS 10000

struct fg_s3_creds {
	char *access_key;    /* owned */
	char *secret_key;    /* owned; wiped by fg_s3_creds_clear */
	char *session_token; /* owned, NULL when none */
	const char *source;  /* "environment" or "credentials file": static */
};

/* Loads credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+
 * AWS_SESSION_TOKEN) from the environment, else the profile AWS_PROFILE
 * (default "default") of AWS_SHARED_CREDENTIALS_FILE (default
 * ~/.aws/credentials). FG_EAUTH when none is found; the message names where
 * it looked, never a value. */
int fg_s3_creds_load(struct fg_s3_creds *out, struct fg_err *err);
void fg_s3_creds_clear(struct fg_s3_creds *c);

/* botocore's s3.addressing_style. */
enum fg_s3_addressing {
	FG_S3_ADDR_AUTO = 0, /* virtual-hosted at AWS's own S3 endpoints for a bucket
			      * name that is one DNS label; path-style elsewhere */
	FG_S3_ADDR_PATH,     /* always {endpoint}/{bucket}/{key} */
	FG_S3_ADDR_VIRTUAL,  /* {bucket}.{host} whenever the name can be a host name
			      * (see fg_s3_virtual); path-style otherwise, as botocore */
};

/* "auto", "path" or "virtual" (botocore's names) into out; FG_EINVAL
 * naming the value otherwise. */
int fg_s3_addressing_parse(enum fg_s3_addressing *out, const char *text, struct fg_err *err);

/* The addressing_style of the s3 section of the AWS CLI's config file
 * (AWS_CONFIG_FILE, default ~/.aws/config), profile AWS_PROFILE ("[profile
 * NAME]", or "[default]"), written as the AWS CLI writes it:
 *     s3 =
 *         addressing_style = virtual
 * FG_S3_ADDR_AUTO when the file, the profile or the setting is absent;
 * FG_EINVAL naming the file for a value that is none of the three. */
int fg_s3_addressing_config(enum fg_s3_addressing *out, struct fg_err *err);

struct fg_s3_opts {
	const char *endpoint;   /* scheme://host[:port][/base], required */
	const char *region;     /* NULL = the region of an AWS regional endpoint
				 * (s3.<region>.amazonaws.com), else FG_S3_DEFAULT_REGION */
	const struct fg_s3_creds *creds; /* copied */
	int max_tries;          /* per request; 0 = 6 */
	long long limit_rate;   /* bytes/s per connection for uploads; 0 = unlimited */
	enum fg_s3_addressing addressing;
	/* libcurl's CONNECT_TO entries, "HOST1:PORT1:HOST2:PORT2" as curl's
	 * --connect-to (an empty HOST1 or PORT1 matches any): where a request
	 * for HOST1:PORT1 connects, its Host header, TLS name and signature
	 * unchanged. Copied; NULL-terminated; NULL = none. */
	const char *const *connect_to;
};

struct fg_s3; /* opaque; safe to use from several threads at once */

int fg_s3_new(struct fg_s3 **out, const struct fg_s3_opts *opts, struct fg_err *err);
void fg_s3_free(struct fg_s3 *s);

/* Resolves the endpoint to use: explicit (a --endpoint flag) if not NULL,
 * else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else the HF gateway for
 * namespace ns. Appends it to out without a trailing '/'. */
int fg_s3_endpoint_resolve(struct fg_buf *out, const char *explicit_endpoint, const char *ns,
			   struct fg_err *err);

/* Whether a request for bucket goes virtual-hosted with these settings
 * (botocore's rules, 1.43 endpoint ruleset):
 * - path: never; auto: only when the endpoint's host is AWS's own S3 host
 *   (s3.amazonaws.com, s3.<region>.amazonaws.com, s3.dualstack.<region>...,
 *   s3-fips..., s3-<region>..., and .amazonaws.com.cn), which botocore
 *   addresses so when no endpoint URL is given; any other endpoint (MinIO,
 *   s3rver, the HF gateway, localhost, an IP) is path-style, as botocore's
 *   auto is for every endpoint URL;
 * - virtual: any endpoint whose host is a name, not an IP address;
 * and then only for a bucket name of 3 to 63 characters, lowercase letters,
 * digits and '-', neither starting nor ending with '-', not like an IPv4
 * address; with dots (each part such a label) only over http at a
 * non-AWS endpoint, since a dotted name breaks the TLS certificate's
 * wildcard. endpoint as fg_s3_opts. */
int fg_s3_virtual(const char *endpoint, enum fg_s3_addressing addressing, const char *bucket);

/* Builds where a request for bucket/key (key NULL: the bucket itself) goes:
 * url gets scheme://host[:port]/path (no query), host the Host header as
 * sent and signed, path the canonical URI (as sent: no bucket segment when
 * virtual-hosted). Any of the three may be NULL. */
int fg_s3_target(struct fg_s3 *s, struct fg_buf *url, struct fg_buf *host, struct fg_buf *path,
		 const char *bucket, const char *key, struct fg_err *err);

/* The gateway's key rules: not empty, at most 1024 bytes of valid UTF-8, no
 * leading or trailing '/', no "//", no "." or ".." segment (covers "../" and a
 * leading "./"), no '\\', no control characters (NUL cannot be passed in a C
 * string; a len-carrying caller must check for it). FG_EINVAL naming the rule. */
int fg_s3_key_check(const char *key, struct fg_err *err);

struct fg_s3_object {
	char *key;                     /* owned (list results); NULL from head */
	unsigned long long size;
	char etag[FG_S3_ETAG_MAX];     /* without quotes */
	char last_modified[64];        /* as the server wrote it */
	char content_type[128];
};

/* HeadObject. FG_ENOTFOUND when the object does not exist. */
int fg_s3_head(struct fg_s3 *s, struct fg_s3_object *out, const char *bucket, const char *key,
	       struct fg_err *err);

/* GetObject of bytes [off, off+len) (len 0 = to the end; off 0 and len 0 =
 * the whole object, no Range header). The body goes to fd with pwrite at
 * fd_off (fd >= 0) or is appended to buf. A redirect to another origin (the
 * gateway sends GETs to a CDN) is followed without any signing header. */
int fg_s3_get(struct fg_s3 *s, const char *bucket, const char *key, unsigned long long off,
	      unsigned long long len, int fd, unsigned long long fd_off, struct fg_buf *buf,
	      struct fg_err *err);

/* GetObject of the whole object streamed to fn. Before each try (a retry
 * starts over) fn is called with data NULL and len 0: drop what came so far.
 * A negative return from fn stops the transfer with that code. */
typedef int (*fg_s3_data_fn)(void *user, const void *data, size_t len, struct fg_err *err);
int fg_s3_get_stream(struct fg_s3 *s, const char *bucket, const char *key, fg_s3_data_fn fn,
		     void *user, struct fg_err *err);

/* PutObject of a memory span; etag_out (may be NULL) gets the ETag. */
int fg_s3_put_mem(struct fg_s3 *s, char etag_out[FG_S3_ETAG_MAX], const char *bucket,
		  const char *key, const void *data, size_t len, const char *content_type,
		  struct fg_err *err);

/* DeleteObject (missing objects are not an error, as in S3). */
int fg_s3_delete(struct fg_s3 *s, const char *bucket, const char *key, struct fg_err *err);

struct fg_s3_list {
	struct fg_s3_object *items; /* owned, in the server's order (key order) */
	size_t n;
	size_t cap;
	unsigned pages;             /* ListObjectsV2 calls made */
};

/* ListObjectsV2 of every key under prefix (NULL = all), following
 * continuation tokens; page_size 0 = the server default (1000). A server
 * that answers as ListObjects v1 (truncated pages without a continuation
 * token) is paged by marker = the last key (sent as start-after too); a
 * marker that does not advance is an error. */
int fg_s3_list(struct fg_s3_list *out, struct fg_s3 *s, const char *bucket, const char *prefix,
	       int page_size, struct fg_err *err);
void fg_s3_list_clear(struct fg_s3_list *l);

/* Parses one ListObjectsV2 answer (XML) and appends its objects to out.
 * *truncated gets IsTruncated; next_token (reset first) the
 * NextContinuationToken. Used by fg_s3_list and the fuzz target. */
int fg_s3_parse_list(struct fg_s3_list *out, int *truncated, struct fg_buf *next_token,
		     const char *xml, size_t len, struct fg_err *err);

/* Multipart upload, one step at a time. upload_id_out holds at most 1024 bytes. */
int fg_s3_mpu_create(struct fg_s3 *s, struct fg_buf *upload_id_out, const char *bucket,
		     const char *key, const char *content_type, struct fg_err *err);
int fg_s3_mpu_abort(struct fg_s3 *s, const char *bucket, const char *key, const char *upload_id,
		    struct fg_err *err);

struct fg_s3_upload_opts {
	unsigned long long part_size;  /* 0 = 64 MiB; raised so parts <= 10000 */
	unsigned long long threshold;  /* multipart above this size; 0 = part_size */
	int jobs;                      /* parts in flight; 0 = 8 */
	const char *journal_dir;       /* where resume journals live; NULL = no resume */
	const char *content_type;      /* NULL = application/octet-stream */
};

struct fg_s3_upload_stats {
	int multipart;                 /* 1 when sent in parts */
	unsigned parts_total;
	unsigned parts_sent;           /* sent by this call */
	unsigned parts_resumed;        /* found done in the journal, not sent again */
	unsigned retries;              /* requests tried again */
	unsigned long long size;       /* file size */
	unsigned long long bytes_sent; /* body bytes of successful requests in this call */
	unsigned long long part_size;
	char etag[FG_S3_ETAG_MAX];
};

/* Uploads the file at path to bucket/key: one PutObject when size <=
 * threshold, else a multipart upload. With a journal_dir, finished parts are
 * recorded as they complete (fsync'd) so that a later call for the same file
 * (same size and mtime), endpoint, bucket and key resumes the same upload and
 * sends only the missing parts; the journal is removed after a successful
 * completion. On failure the upload is left open for a resume (not aborted). */
int fg_s3_upload_file(struct fg_s3_upload_stats *stats, struct fg_s3 *s, const char *bucket,
		      const char *key, const char *path, const struct fg_s3_upload_opts *opts,
		      struct fg_err *err);

#endif
