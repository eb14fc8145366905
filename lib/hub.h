/* hub.h - what the Hub says about buckets and model repos: tree listings
 * (with Link paging) and resolve headers. URLs come from ref.h's builders;
 * transfers go through http.h. Every listing is validated before use: paths
 * must be safe relative paths below the asked prefix, unique, sizes sane. */
#ifndef FG_HUB_H
#define FG_HUB_H

#include <stddef.h>

#include "err.h"
#include "http.h"
#include "ref.h"

/* Larger sizes in a listing are refused as nonsense (1 PiB). */
#define FG_HUB_MAX_FILE_SIZE (1ULL << 50)
/* A listing may span at most this many pages / entries. */
#define FG_HUB_MAX_PAGES 100000
#define FG_HUB_MAX_ENTRIES 10000000

struct fg_hub_file {
	char *path;        /* from the bucket/repo root, as listed */
	unsigned long long size;
	char *xet_hash;    /* buckets: xetHash, or NULL */
	char *mtime;       /* buckets: mtime, or NULL */
	char *oid;         /* models: git blob oid, or NULL */
	char *lfs_sha256;  /* models: lfs.oid (64 hex), or NULL for plain git files */
};

struct fg_hub_list {
	struct fg_hub_file *files; /* files only, sorted by path bytes */
	size_t n, cap;
	char **dirs;               /* directory entries as listed (safe paths), in
				    * listing order: a server that ignores
				    * recursive=true lists folders, not their files */
	size_t n_dirs, cap_dirs;
};

void fg_hub_list_release(struct fg_hub_list *l);

/* Parses one listing page (a JSON array) and appends its files to l; model
 * selects the model-repo entry shape. Directories are skipped. Used by the
 * listings below and by the fuzz target. */
int fg_hub_parse_tree(struct fg_hub_list *l, const char *text, size_t len, int model,
		      const char *what, struct fg_err *err);

/* Sorts l by path; drops paths that only share prefix's leading characters
 * ("w/v1-old/x" for prefix "w/v1": the Hub matches a tree prefix as a
 * string); refuses duplicates and paths not starting with prefix ("" = all). */
int fg_hub_list_finish(struct fg_hub_list *l, const char *prefix, const char *what,
		       struct fg_err *err);

/* From a Link header value, the absolute URL with rel="next" resolved against
 * base (bytes a URI may not hold, such as a blank or UTF-8, percent-encoded
 * first): 0 and the URL in out; 1 when there is no next link; -1 when there
 * is one that makes no URL (the listing cannot be completed). */
int fg_hub_link_next(struct fg_buf *out, const char *link, const char *base);

/* Every file below ref->path in the bucket (all pages). A ref naming a single
 * file (the listing of it is empty or 404) gives that one file, sized by HEAD.
 * A folder listed without any file below it (a server that ignores
 * recursive=true; a bucket or git tree has no empty folders) is listed in
 * turn, as is done for model repos below. */
int fg_hub_bucket_tree(struct fg_hub_list *out, struct fg_http *h, const char *endpoint,
		       const struct fg_ref *ref, struct fg_err *err);

/* Every file below ref->path in the model repo at rev (NULL: the ref's). A
 * ref naming one file (its listing is empty or 404) gives that one file,
 * sized by a HEAD at rev, its LFS sha256 (or git blob oid) from the ETag. */
int fg_hub_model_tree(struct fg_hub_list *out, struct fg_http *h, const char *endpoint,
		      const struct fg_ref *ref, const char *rev, struct fg_err *err);

/* What a HEAD on a resolve URL says: before any redirect (follow 0, so the
 * Hub's own X-Repo-Commit / X-Linked-* headers are seen), or at the end of
 * the redirects (follow 1). */
struct fg_hub_head {
	long status;
	char *commit;   /* X-Repo-Commit, or NULL */
	char *etag;     /* X-Linked-Etag, else ETag, unquoted; or NULL */
	char *xet_hash; /* X-Xet-Hash, or NULL */
	unsigned long long size; /* X-Linked-Size, else Content-Length */
	int has_size;
	char *location; /* redirect target, or NULL */
};
void fg_hub_head_release(struct fg_hub_head *hd);
int fg_hub_head(struct fg_hub_head *out, struct fg_http *h, const char *url, int follow,
		const char *what, struct fg_err *err);

#endif
