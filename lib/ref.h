/* ref.h - component references and every Hub URL shape, in one place.
 *
 * A reference names where a component comes from:
 *   hf://buckets/<ns>/<bucket>[/<path>]     a folder or file in a storage bucket (no revision)
 *   hf://<ns>/<repo>[@<rev>][/<path>]       a Hub model repo at a revision (default "main");
 *                                           rev may be percent-encoded (dev%2Fint4), as
 *                                           huggingface_hub writes one holding '/'
 *   <ns>/<repo>                             a bare model repo id (as in model_id)
 *   https://host/...  http://host/...       a plain URL
 *   file:///abs/path                        a local file or folder
 *
 * The URL builders below are the only code that knows how Hub URLs look, so a
 * real endpoint and a local test server (HF_ENDPOINT=http://127.0.0.1:PORT)
 * need no other change. Paths given to them are relative to the bucket or repo
 * root (what the Hub's tree listings return); each segment is percent-encoded. */
#ifndef FG_REF_H
#define FG_REF_H

#include "buf.h"
#include "err.h"

enum fg_ref_kind {
	FG_REF_BUCKET = 1, /* hf://buckets/ns/name[/path] */
	FG_REF_MODEL = 2,  /* hf://ns/repo[@rev][/path] or bare ns/repo */
	FG_REF_HTTPS = 3,  /* https:// or http:// URL */
	FG_REF_FILE = 4,   /* file:///absolute/path */
};

/* Hub names: letters, digits, '-', '_', '.', at most 96 bytes, not starting
 * or ending with '-' or '.', no "--" or "..". */
#define FG_REF_NAME_MAX 96

struct fg_ref {
	int kind;        /* enum fg_ref_kind */
	char *text;      /* the reference exactly as written */
	char *ns;        /* BUCKET, MODEL: namespace (user or org); else NULL */
	char *name;      /* BUCKET: bucket name; MODEL: repo name; else NULL */
	char *revision;  /* MODEL: revision after '@', percent-decoded; NULL when none (= "main") */
	char *path;      /* BUCKET, MODEL: path inside, no leading/trailing '/', "" for the
			  * root; FILE: the absolute local path (decoded); HTTPS: NULL */
	char *url;       /* HTTPS: the URL; FILE: the file:// URL; else NULL */
};

/* Parses text into *out (free with fg_ref_free). Malformed references are
 * refused with FG_EINVAL and one line saying what is wrong, e.g.
 * "hf://buckets/ns: missing bucket name". Paths must be safe relative paths
 * (no "..", no empty segment, no control characters). */
int fg_ref_parse(struct fg_ref **out, const char *text, struct fg_err *err);
void fg_ref_free(struct fg_ref *ref);

/* Short kind name: "bucket", "model", "https", "file". */
const char *fg_ref_kind_name(int kind);

/* The revision to use: ref->revision or "main". */
const char *fg_ref_revision(const struct fg_ref *ref);

/* Appends "<ns>/<name>" (BUCKET, MODEL), the host (HTTPS) or "local" (FILE). */
int fg_ref_owner(struct fg_buf *out, const struct fg_ref *ref, struct fg_err *err);

/* Appends the canonical text: hf://buckets/ns/name[/path],
 * hf://ns/repo[@rev][/path], the URL, or file://path. */
int fg_ref_format(struct fg_buf *out, const struct fg_ref *ref, struct fg_err *err);

/* Given full, a path relative to the bucket/repo root (as a tree listing gives
 * it), returns the part relative to ref->path (borrowed, points into full), or
 * NULL when full is not ref->path nor below it. When full equals ref->path
 * (the reference names a single file) the file's base name is returned. */
const char *fg_ref_rel(const struct fg_ref *ref, const char *full);

/* Appends ref->path joined with rel ("" path gives rel alone). */
int fg_ref_full(struct fg_buf *out, const struct fg_ref *ref, const char *rel, struct fg_err *err);

/* Percent-encoding (RFC 3986 unreserved characters kept). The _path form
 * keeps '/' between segments; the _segment form encodes it as %2F. */
int fg_url_encode_path(struct fg_buf *out, const char *path, struct fg_err *err);
int fg_url_encode_segment(struct fg_buf *out, const char *seg, struct fg_err *err);

/* Appends "scheme://host[:port]" of url, lowercased, default ports dropped;
 * used to send HF_TOKEN only to the Hub's own origin. FG_EINVAL if url has
 * no http(s) scheme or host. */
int fg_url_origin(struct fg_buf *out, const char *url, struct fg_err *err);

/* Appends the file name an http(s) URL names: its last path segment,
 * percent-decoded, query and fragment dropped. FG_EINVAL when there is none
 * or it is not a safe file name ("", ".", "..", a '/' or control character
 * once decoded). */
int fg_url_file_name(struct fg_buf *out, const char *url, struct fg_err *err);

/* The Hub settings from the environment, read once by fg_hub_env_load:
 *   HF_ENDPOINT     default https://huggingface.co (trailing '/' removed)
 *   HF_TOKEN        may be unset (public buckets need none)
 *   HF_HUB_OFFLINE  1/true/yes/on (any case) means never open a socket */
struct fg_hub_env {
	char *endpoint; /* never NULL, no trailing '/' */
	char *token;    /* NULL when unset or empty */
	int offline;    /* 0 or 1 */
};

int fg_hub_env_load(struct fg_hub_env **out, struct fg_err *err);
void fg_hub_env_free(struct fg_hub_env *env);

/* huggingface_hub's own files: out gets first_var's value when set (e.g.
 * HF_TOKEN_PATH), else <home>/<leaf>, home being HF_HOME, else
 * $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface. Empty when none
 * is set. first_var may be NULL. */
int fg_hf_home_path(struct fg_buf *out, const char *first_var, const char *leaf, struct fg_err *err);

/* URL builders. endpoint comes from fg_hub_env; ref must be of the kind named.
 * path arguments are relative to the bucket/repo root; NULL or "" = the root.
 *
 * bucket info:     {endpoint}/api/buckets/<ns>/<name>
 * bucket tree:     {endpoint}/api/buckets/<ns>/<name>/tree[/<path>]?recursive=true
 * bucket paths:    {endpoint}/api/buckets/<ns>/<name>/paths-info        (POST)
 * bucket resolve:  {endpoint}/buckets/<ns>/<name>/resolve/<path>
 * model tree:      {endpoint}/api/models/<ns>/<repo>/tree/<rev>[/<path>]?recursive=true&expand=true
 * model resolve:   {endpoint}/<ns>/<repo>/resolve/<rev>/<path>
 * The revision is encoded as one segment ("refs/pr/1" -> "refs%2Fpr%2F1"); rev
 * NULL means fg_ref_revision(ref), so a locked commit can be passed instead. */
int fg_url_bucket_info(struct fg_buf *out, const char *endpoint, const struct fg_ref *ref,
		       struct fg_err *err);
int fg_url_bucket_tree(struct fg_buf *out, const char *endpoint, const struct fg_ref *ref,
		       const char *path, struct fg_err *err);
int fg_url_bucket_paths_info(struct fg_buf *out, const char *endpoint, const struct fg_ref *ref,
			     struct fg_err *err);
int fg_url_bucket_resolve(struct fg_buf *out, const char *endpoint, const struct fg_ref *ref,
			  const char *path, struct fg_err *err);
int fg_url_model_tree(struct fg_buf *out, const char *endpoint, const struct fg_ref *ref,
		      const char *rev, const char *path, struct fg_err *err);
int fg_url_model_resolve(struct fg_buf *out, const char *endpoint, const struct fg_ref *ref,
			 const char *rev, const char *path, struct fg_err *err);

#endif
