/* gitdep.h - a `git+https://HOST/REPO@<commit>` dependency into the store:
 * the system `git` fetches exactly that commit (smart or dumb HTTP, never
 * with the Hub token) into a scratch bare repository, and `git archive`
 * writes its tree as a tar, which is hashed into the store like any blob.
 * What identifies the content is the commit id the URL names (git checks
 * every object it receives against its id) and that commit's tree id; the
 * tar's sha256 is what the store keys it by.
 *
 * Only a full commit id pins a git dependency (40 hex digits, or 64 for a
 * sha256 repository); a branch or tag can move and is classified unpinned
 * (fg_dependency_git_parse, lib/manifest.h, says which). */
#ifndef FG_GITDEP_H
#define FG_GITDEP_H

#include "err.h"
#include "manifest.h"
#include "sha256.h"
#include "store.h"

struct fg_gitdep_result {
	char sha256[FG_SHA256_HEX_LEN + 1]; /* of the tar, as stored */
	unsigned long long size;
	char tree[FG_GIT_OID_MAX + 1];      /* the commit's tree id */
	int was_present;                    /* the tar's blob was in the store already */
};

struct fg_gitdep_opts {
	const char *what;         /* names the dependency in messages */
	const char *expect_sha256;/* the lock's digest of the tar, or NULL */
	const char *expect_tree;  /* the lock's tree id, or NULL */
	long stall_secs;          /* git's low-speed limit time; 0: 60 */
	const char *cainfo;       /* a CA bundle for https (GIT_SSL_CAINFO), or NULL */
};

/* Fetches url's commit and stores its tree as a tar. FG_ENOTFOUND without a
 * `git` program; FG_ENET when git cannot fetch (its last line of stderr
 * quoted); FG_EHASH when expect_tree or expect_sha256 differ (nothing kept). */
int fg_gitdep_fetch(struct fg_gitdep_result *res, struct fg_store *st, const char *url,
		    const struct fg_gitdep_opts *o, struct fg_err *err);

#endif
