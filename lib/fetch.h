/* fetch.h - the download engine: many files into the content store, verified.
 *
 * Each file goes to the store's partial/<key>.part in chunks (byte ranges,
 * FG_FETCH_CHUNK by default) spread over up to `jobs` concurrent transfers,
 * so a large file uses parallel ranges and small files go many at once. A
 * journal (partial/<key>.journal) records every finished chunk; a later run
 * for the same remote identity skips them, so a killed pull costs only what
 * was unfinished. A hasher thread sha256-hashes the contiguous prefix of each
 * file while the rest is still arriving; the blob enters the store only
 * through fg_store_commit with that digest (and the expected one, when
 * known). A range is journaled only after the part file was fdatasync'ed,
 * and the journal is fdatasync'ed after each append (a syncer thread does
 * both, off the transfer thread), so even a power loss leaves a journal that
 * claims only bytes that are on disk. A digest that differs from the expected one is refetched once from
 * scratch, then reported. Each blob is fetched under its store lock; a blob
 * locked by another process is waited for without holding any other lock.
 * With h == NULL (offline) nothing is fetched: every item must already be in
 * the store, by its expected sha256. */
#ifndef FG_FETCH_H
#define FG_FETCH_H

#include <stddef.h>

#include "err.h"
#include "http.h"
#include "sha256.h"
#include "store.h"

#define FG_FETCH_CHUNK ((unsigned long long)16 << 20)

struct fg_fetch_item {
	/* in */
	const char *url;           /* where the bytes are (borrowed) */
	const char *what;          /* names the file in messages (borrowed) */
	unsigned long long size;   /* size the listing gave */
	const char *expect_sha256; /* 64 hex, or NULL when not known yet */
	const char *identity;      /* remote identity (xetHash, etag, ...); a partial
				    * download made for another identity is discarded */
	const char *resume_key;    /* names the partial download when the sha256 is not
				    * known: a content identity (so a resume survives a
				    * change of endpoint), or NULL to use the URL */
	int no_auth;               /* never send the Hub token (URL dependencies) */
	int no_ranges;             /* the server does not serve byte ranges: one
				    * request for the whole file, no journal */
	/* out */
	char sha256[FG_SHA256_HEX_LEN + 1];
	int rc;                    /* 0, or why this file failed */
	int present;               /* was already in the store */
	unsigned long long fetched;/* body bytes received for it in this run */
	unsigned long long resumed;/* bytes reused from an earlier partial download */
};

struct fg_fetch_progress {
	size_t files_done, files_total;
	unsigned long long bytes_done, bytes_total; /* including reused/present bytes */
	double rate;         /* bytes/s over the last seconds */
	double elapsed;      /* seconds */
	const char *current; /* the largest file in flight, or NULL */
	unsigned long long cur_done, cur_size;
	int final;           /* last call */
};

struct fg_fetch_opts {
	int jobs;                       /* concurrent transfers; <= 0 means 8 */
	unsigned long long chunk;       /* range size; 0 means FG_FETCH_CHUNK */
	void (*progress)(void *ud, const struct fg_fetch_progress *p); /* may be NULL */
	void *progress_ud;
	unsigned progress_ms;           /* 0 means 200 */
	int journal_nosync;             /* journal finished ranges without fdatasync of the
					 * part and journal: survives a kill but not a power
					 * loss (for measuring what durability costs) */
};

struct fg_fetch_stats {
	unsigned long long bytes_net;     /* body bytes received */
	unsigned long long bytes_resumed; /* reused from partial downloads */
	unsigned long long bytes_present; /* files already in the store */
	unsigned long long bytes_reused;  /* copied from huggingface_hub's cache (fg_pull) */
	unsigned long long bytes_in_place; /* found where --into places them (fg_pull) */
	size_t files_fetched, files_present, files_reused, files_in_place;
	double seconds;
};

/* Fetches items[0..n) into st. Returns 0 when every item is in the store
 * (items[i].sha256 set), else the first failure (also in items[i].rc).
 * Checks free space first (FG_ENOSPC naming bytes needed and free). */
int fg_fetch_run(struct fg_fetch_stats *stats, struct fg_store *st, struct fg_http *h,
		 struct fg_fetch_item *items, size_t n, const struct fg_fetch_opts *opts,
		 struct fg_err *err);

#endif
