/* fetch.c - chunked, journaled, hashed downloads into the store (see fetch.h). */
#include "fetch.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "fsutil.h"

#define HASH_READ ((size_t)256 << 10)   /* hasher read size */
#define HASH_SIGNAL ((unsigned long long)4 << 20) /* wake the hasher every this many bytes */
#define LOCK_RETRY_MS 100

enum { J_NEW = 0, J_OPEN, J_DONE, J_FAILED };

struct run;

struct cctx {
	struct job *j;
	size_t c;
};

struct job {
	struct run *R;
	struct fg_fetch_item *it;
	int state;
	char key[FG_STORE_KEY_MAX];
	struct fg_store_lock *lk;
	struct fg_buf part, jpath;
	int fd, jfd;
	unsigned long long size, chunk;
	size_t nchunks, next, frontier;
	unsigned char *done;
	unsigned long long *got;
	struct cctx *ctx;
	size_t *jq, *jq_work;/* finished chunks not yet journaled (under R->mu), the syncer's copy */
	size_t njq;
	int syncing;         /* the syncer is writing this job's files (under R->mu) */
	int closing;         /* being committed: the syncer leaves it alone (under R->mu) */
	int sync_rc;         /* the syncer failed (under R->mu) */
	struct fg_err sync_err;
	int inflight;
	int single;          /* one chunk: hashed inline on the transfer thread */
	int mismatch_retry;  /* already refetched once after a digest mismatch */
	int to_single;       /* the server ignores Range: once the chunks in flight are
			      * done, start over with one request for the whole file */
	unsigned long long retry_at;
	/* shared with the hasher, under R->mu */
	struct fg_sha256 *sha;
	struct fg_sha256_chain chain; /* its chain states, for the store (with sha) */
	unsigned long long hash_target, hashed, last_signal;
	int hashing, hash_done, hash_rc, cancel;
	uint8_t digest[FG_SHA256_LEN];
	struct fg_err hash_err;
};

struct run {
	struct fg_store *st;
	struct fg_http *h;
	struct fg_fetch_item *items;
	size_t n;
	struct job *jobs;
	int max_jobs;
	unsigned long long chunk;
	const struct fg_fetch_opts *o;
	size_t cursor;        /* next item never tried */
	size_t *busy;         /* items whose lock another process holds */
	size_t nbusy;
	struct job **open;
	size_t nopen, max_open;
	struct job **pending; /* whole small files waiting for one batched commit */
	size_t npending;
	unsigned long long pending_since;
	int inflight;
	size_t finished;
	int rc;
	struct fg_err err;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	int nosync;           /* journal without fdatasync (benchmarks only) */
	unsigned long long bytes_done, bytes_total, t0;
	unsigned long long last_prog, last_prog_bytes;
	double rate;
	struct fg_fetch_stats *stats;
};

static unsigned long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000ULL + (unsigned long long)ts.tv_nsec / 1000000ULL;
}

static void fail_run(struct run *R, int rc, const struct fg_err *e)
{
	if (!R->rc) {
		R->rc = rc;
		if (e)
			R->err = *e;
		else
			fg_err_set(&R->err, rc, "%s", fg_err_name(rc));
	}
}

static void job_fail(struct job *j, int rc, const struct fg_err *e)
{
	struct run *R = j->R;

	if (j->state == J_FAILED)
		return;
	j->state = J_FAILED;
	j->it->rc = rc;
	fail_run(R, rc, e);
	pthread_mutex_lock(&R->mu);
	j->cancel = 1;
	while (j->syncing)
		pthread_cond_wait(&R->cv, &R->mu);
	pthread_mutex_unlock(&R->mu);
	if (j->jfd >= 0) {
		close(j->jfd);
		j->jfd = -1;
	}
	fg_store_unlock(j->lk);
	j->lk = NULL;
	R->finished++;
}

/* The first open job that ready() accepts, waiting on R->cv until there is
 * one; NULL once R->stop is set and none is. Called with R->mu held. */
static struct job *next_job(struct run *R, int (*ready)(const struct job *))
{
	size_t i;

	for (;;) {
		for (i = 0; i < R->nopen; i++)
			if (ready(R->open[i]))
				return R->open[i];
		if (R->stop)
			return NULL;
		pthread_cond_wait(&R->cv, &R->mu);
	}
}

/* ---- hasher thread: hashes the contiguous prefix of multi-chunk files ---- */

/* A multi-chunk file received past what is hashed of it. */
static int hash_ready(const struct job *k)
{
	return !k->single && !k->cancel && !k->hash_done && k->hash_target > k->hashed;
}

static void *hasher(void *arg)
{
	struct run *R = arg;
	unsigned char *buf = malloc(HASH_READ);

	pthread_mutex_lock(&R->mu);
	for (;;) {
		struct job *j;
		unsigned long long from, to;
		int rc = 0;
		struct fg_err e;

		if (!(j = next_job(R, hash_ready)))
			break;
		j->hashing = 1;
		from = j->hashed;
		to = j->hash_target;
		pthread_mutex_unlock(&R->mu);
		while (from < to && !rc) {
			size_t want = to - from < HASH_READ ? (size_t)(to - from) : HASH_READ;
			ssize_t got = buf ? pread(j->fd, buf, want, (off_t)from) : -1;

			if (got <= 0) {
				if (got < 0 && errno == EINTR)
					continue;
				rc = fg_err_set(&e, FG_EIO, "read back %s: %s", j->part.data,
						got < 0 ? strerror(errno) : "file shorter than written");
				break;
			}
			rc = fg_sha256_chain_update(j->sha, &j->chain, buf, (size_t)got, &e);
			/* start writeback now so the fsync at commit finds little left to do */
			sync_file_range(j->fd, (off_t)from, (off_t)got, SYNC_FILE_RANGE_WRITE);
			from += (unsigned long long)got;
		}
		if (!rc && from == j->size)
			rc = fg_sha256_final(j->sha, j->digest, &e);
		pthread_mutex_lock(&R->mu);
		j->hashing = 0;
		j->hashed = from;
		if (rc) {
			j->hash_rc = rc;
			j->hash_err = e;
			j->hash_done = 1;
		} else if (from == j->size) {
			j->hash_done = 1;
		}
		if (j->hash_done) {
			pthread_mutex_unlock(&R->mu);
			fg_http_wakeup(R->h);
			pthread_mutex_lock(&R->mu);
		}
		pthread_cond_broadcast(&R->cv);
	}
	pthread_mutex_unlock(&R->mu);
	free(buf);
	return NULL;
}

/* ---- syncer thread: makes finished chunks durable, then journals them ----
 * A chunk is journaled only after fdatasync of the part file (its bytes are on
 * disk), and the journal is fdatasync'ed after the lines are appended, so a
 * power loss cannot leave a journal claiming bytes that never reached the
 * disk. Chunks finished meanwhile share one pair of syncs. */

/* A file with finished chunks to journal, and a journal to write them to. */
static int sync_ready(const struct job *k)
{
	return k->njq && !k->cancel && !k->closing && !k->sync_rc && k->jfd >= 0;
}

static void *syncer(void *arg)
{
	struct run *R = arg;
	struct fg_buf lines = FG_BUF_INIT;

	pthread_mutex_lock(&R->mu);
	for (;;) {
		struct job *j;
		size_t i, n;
		int rc = 0;
		struct fg_err e;

		if (!(j = next_job(R, sync_ready)))
			break;
		n = j->njq;
		memcpy(j->jq_work, j->jq, n * sizeof(*j->jq));
		j->njq = 0;
		j->syncing = 1;
		pthread_mutex_unlock(&R->mu);
		fg_buf_reset(&lines);
		for (i = 0; i < n && !rc; i++)
			rc = fg_buf_printf(&lines, &e, "%zu\n", j->jq_work[i]);
		if (!rc && !R->nosync && fdatasync(j->fd))
			rc = fg_err_set(&e, FG_EIO, "fdatasync %s: %s", j->part.data, strerror(errno));
		if (!rc && fg_write_all(j->jfd, lines.data, lines.len))
			rc = fg_err_set(&e, errno == ENOSPC ? FG_ENOSPC : FG_EIO, "write %s: %s",
					j->jpath.data, strerror(errno));
		if (!rc && !R->nosync && fdatasync(j->jfd))
			rc = fg_err_set(&e, FG_EIO, "fdatasync %s: %s", j->jpath.data, strerror(errno));
		pthread_mutex_lock(&R->mu);
		j->syncing = 0;
		if (rc) {
			j->sync_rc = rc;
			j->sync_err = e;
			pthread_mutex_unlock(&R->mu);
			fg_http_wakeup(R->h);
			pthread_mutex_lock(&R->mu);
		}
		pthread_cond_broadcast(&R->cv);
	}
	pthread_mutex_unlock(&R->mu);
	fg_buf_release(&lines);
	return NULL;
}

/* Moves the hash target to the end of the contiguous received prefix. */
static void advance_target(struct job *j, int force)
{
	struct run *R = j->R;
	unsigned long long t;

	while (j->frontier < j->nchunks && j->done[j->frontier])
		j->frontier++;
	t = j->frontier >= j->nchunks ? j->size : j->frontier * j->chunk + j->got[j->frontier];
	pthread_mutex_lock(&R->mu);
	j->hash_target = t;
	if (force || t - j->last_signal >= HASH_SIGNAL || t == j->size) {
		j->last_signal = t;
		pthread_cond_broadcast(&R->cv);
	}
	pthread_mutex_unlock(&R->mu);
}

/* ---- journal: "fgpack-partial 2 <size> <chunk> <identity hex>\n" then "<chunk index>\n"...
 * Version 2 journals are durable (see the syncer), so they are trusted across
 * a reboot; a version 1 journal (journaled without fdatasync) never matches
 * the header and its partial download starts over. ---- */

static int identity_hex(char out[FG_SHA256_HEX_LEN + 1], const struct fg_fetch_item *it)
{
	struct fg_buf b = FG_BUF_INIT;
	uint8_t d[FG_SHA256_LEN];
	int rc;

	rc = fg_buf_printf(&b, NULL, "%llu\n%s\n%s", it->size, it->identity ? it->identity : "",
			   it->expect_sha256 ? it->expect_sha256 : "");
	if (!rc)
		rc = fg_sha256_mem(b.data, b.len, d, NULL);
	fg_buf_release(&b);
	if (!rc)
		fg_hex_encode(d, FG_SHA256_LEN, out);
	return rc;
}

/* Reads the journal; marks finished chunks when it belongs to this download and
 * the part file is long enough. Returns 1 when it was usable. */
static int load_journal(struct job *j, const char *header)
{
	struct fg_buf b = FG_BUF_INIT;
	struct stat sj, sp;
	size_t hl = strlen(header), i;
	int ok = 0;

	if (stat(j->jpath.data, &sj) || fstat(j->fd, &sp))
		return 0;
	if (fg_file_read(j->jpath.data, 64 << 20, &b, NULL) || b.len < hl || memcmp(b.data, header, hl))
		goto out;
	i = hl;
	while (i < b.len) {
		size_t e = i;
		char num[24];
		unsigned long long c;

		while (e < b.len && b.data[e] != '\n')
			e++;
		if (e == b.len || e - i == 0 || e - i >= sizeof(num))
			break; /* a torn last line is ignored */
		memcpy(num, b.data + i, e - i);
		num[e - i] = '\0';
		if (fg_parse_u64(num, &c) || c >= j->nchunks)
			break;
		{
			unsigned long long end = (c + 1) * j->chunk;

			if (end > j->size)
				end = j->size;
			if ((unsigned long long)sp.st_size >= end) {
				j->done[c] = 1;
				j->got[c] = end - c * j->chunk;
			}
		}
		i = e + 1;
	}
	ok = 1;
out:
	fg_buf_release(&b);
	return ok;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The job's digest context: an own one taking chain states, for the store
 * to keep beside the blob (lib/store.h), when the file is large enough to
 * have any; else OpenSSL's. */
static int job_sha_new(struct job *j, struct fg_err *err)
{
	int own = j->size > FG_STORE_STATES_EVERY;

	fg_sha256_chain_free(&j->chain);
	fg_sha256_chain_init(&j->chain, own ? FG_STORE_STATES_EVERY : 0);
	if (own ? fg_sha256_new_own(&j->sha, err) : fg_sha256_new(&j->sha, err))
		return err ? err->code : FG_ENOMEM;
	return 0;
}

/* The job's digest is in the store under hex: its chain states go beside
 * it (a cache: failing to keep them changes nothing else). */
static void job_keep_states(struct job *j, const char *hex)
{
	uint8_t *st = NULL;
	size_t n = 0;

	fg_sha256_chain_take(&j->chain, &st, &n);
	if (n)
		fg_store_states_note(j->R->st, hex, j->chain.every, st, n);
	free(st);
}

/* A .part made read-only: fg_store_commit chmods it 0444 just before its
 * rename into blobs/, and a kill in between leaves it so. Opened for
 * writing as it is, it fails (EACCES) for anyone but root: give the owner
 * write back (the lock is held; the bytes are checked as any resumed
 * part's are). */
static void part_writable(const char *part)
{
	struct stat sb;

	if (!lstat(part, &sb) && S_ISREG(sb.st_mode) && !(sb.st_mode & S_IWUSR))
		chmod(part, 0644);
}

/* Opens (or resumes) the partial download of j; the lock is held. */
static int job_files(struct job *j, struct fg_err *err)
{
	struct run *R = j->R;
	char id[FG_SHA256_HEX_LEN + 1], header[200];
	size_t c;
	int resumed;

	fg_buf_reset(&j->part);
	fg_buf_reset(&j->jpath);
	if (fg_store_partial_paths(&j->part, &j->jpath, R->st, j->key, err))
		return err ? err->code : FG_EIO;
	if (identity_hex(id, j->it))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	snprintf(header, sizeof(header), "fgpack-partial 2 %llu %llu %s\n", j->size, j->chunk, id);
	memset(j->done, 0, j->nchunks ? j->nchunks : 1);
	memset(j->got, 0, (j->nchunks ? j->nchunks : 1) * sizeof(*j->got));
	j->next = 0;
	j->frontier = 0;
	j->hashed = 0;
	j->hash_target = 0;
	j->last_signal = 0;
	j->hash_done = 0;
	j->hash_rc = 0;
	pthread_mutex_lock(&R->mu);
	j->njq = 0;
	j->sync_rc = 0;
	j->closing = 0;
	pthread_mutex_unlock(&R->mu);
	part_writable(j->part.data);
	if (j->single) {
		/* one request, hashed as it arrives: nothing worth resuming, no journal */
		j->fd = open(j->part.data, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (j->fd < 0)
			return fg_err_set(err, FG_EIO, "open %s: %s", j->part.data, strerror(errno));
		if (!j->sha && job_sha_new(j, err))
			return err ? err->code : FG_ENOMEM;
		return 0;
	}
	j->fd = open(j->part.data, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (j->fd < 0)
		return fg_err_set(err, FG_EIO, "open %s: %s", j->part.data, strerror(errno));
	resumed = load_journal(j, header);
	if (!resumed) {
		int jfd;

		if (ftruncate(j->fd, 0))
			return fg_err_set(err, FG_EIO, "truncate %s: %s", j->part.data, strerror(errno));
		jfd = open(j->jpath.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (jfd < 0 || write_all(jfd, header, strlen(header)) || (!R->nosync && fdatasync(jfd))) {
			int e = errno;

			if (jfd >= 0)
				close(jfd);
			return fg_err_set(err, e == ENOSPC ? FG_ENOSPC : FG_EIO, "write %s: %s",
					  j->jpath.data, strerror(e));
		}
		close(jfd);
		/* the part and journal names themselves survive a power loss */
		if (!R->nosync) {
			char *slash = strrchr(j->jpath.data, '/');

			if (slash) {
				*slash = '\0';
				fg_fsync_dir(j->jpath.data, NULL);
				*slash = '/';
			}
		}
	}
	j->jfd = open(j->jpath.data, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (j->jfd < 0)
		return fg_err_set(err, FG_EIO, "open %s: %s", j->jpath.data, strerror(errno));
	if (j->size) {
		int e = posix_fallocate(j->fd, 0, (off_t)j->size);

		if (e == ENOSPC)
			return fg_err_set(err, FG_ENOSPC, "%s: no space left for %llu bytes in %s",
					  j->it->what, j->size, fg_store_root(R->st));
		if (e && ftruncate(j->fd, (off_t)j->size))
			return fg_err_set(err, FG_EIO, "size %s: %s", j->part.data, strerror(errno));
	}
	for (c = 0; c < j->nchunks; c++)
		if (j->done[c]) {
			j->it->resumed += j->got[c];
			R->bytes_done += j->got[c];
			if (R->stats)
				R->stats->bytes_resumed += j->got[c];
		}
	if (!j->sha && job_sha_new(j, err))
		return err ? err->code : FG_ENOMEM;
	return 0;
}

static void close_files(struct job *j)
{
	if (j->fd >= 0)
		close(j->fd);
	if (j->jfd >= 0)
		close(j->jfd);
	j->fd = j->jfd = -1;
}

/* hex: the blob that is there (the expected one, or one a download under the
 * same content key produced). */
static void mark_present(struct job *j, const char *hex)
{
	struct run *R = j->R;

	j->state = J_DONE;
	j->it->present = 1;
	j->it->rc = 0;
	memcpy(j->it->sha256, hex, FG_SHA256_HEX_LEN + 1);
	R->bytes_done += j->size;
	R->finished++;
	if (R->stats) {
		R->stats->files_present++;
		R->stats->bytes_present += j->size;
	}
}

/* 1 opened, 0 busy (try later), <0 failed. */
static int job_open(struct job *j)
{
	struct run *R = j->R;
	struct fg_err e;
	int rc;

	fg_err_clear(&e);
	if (j->it->expect_sha256 && fg_store_has(R->st, j->it->expect_sha256)) {
		mark_present(j, j->it->expect_sha256);
		return 1;
	}
	if (!R->h) {
		fg_err_set(&e, FG_EOFFLINE, "offline: %s (sha256 %s) is not in the store", j->it->what,
			   j->it->expect_sha256 ? j->it->expect_sha256 : "not locked yet");
		job_fail(j, FG_EOFFLINE, &e);
		return FG_EOFFLINE;
	}
	rc = fg_store_key(j->key, j->it->expect_sha256,
			  j->it->resume_key ? j->it->resume_key : j->it->url, &e);
	if (!rc)
		rc = fg_store_lock_blob(&j->lk, R->st, j->key, 0, &e);
	if (rc == FG_EBUSY) {
		j->retry_at = now_ms() + LOCK_RETRY_MS;
		return 0;
	}
	if (!rc && j->it->expect_sha256 && fg_store_has(R->st, j->it->expect_sha256)) {
		fg_store_unlock(j->lk);
		j->lk = NULL;
		mark_present(j, j->it->expect_sha256);
		return 1;
	}
	/* the same content, downloaded by a process we waited for (or earlier) */
	if (!rc && !j->it->expect_sha256 && j->it->resume_key) {
		char known[FG_SHA256_HEX_LEN + 1];

		if (fg_store_known_get(R->st, j->key, known)) {
			fg_store_unlock(j->lk);
			j->lk = NULL;
			mark_present(j, known);
			return 1;
		}
	}
	if (!rc)
		rc = job_files(j, &e);
	if (rc) {
		fg_err_wrap(&e, "fetch %s", j->it->what);
		close_files(j);
		job_fail(j, rc, &e);
		return rc;
	}
	j->state = J_OPEN;
	pthread_mutex_lock(&R->mu);
	R->open[R->nopen++] = j;
	pthread_mutex_unlock(&R->mu);
	advance_target(j, 1);
	return 1;
}

static void job_close(struct job *j)
{
	struct run *R = j->R;
	size_t i;

	pthread_mutex_lock(&R->mu);
	for (i = 0; i < R->nopen; i++)
		if (R->open[i] == j) {
			R->open[i] = R->open[--R->nopen];
			break;
		}
	pthread_mutex_unlock(&R->mu);
}

/* ---- transfers ---- */

static int chunk_data(void *ud, unsigned long long off, const void *data, size_t len,
		      struct fg_err *err)
{
	struct cctx *cx = ud;
	struct job *j = cx->j;
	struct run *R = j->R;
	const char *p = data;
	size_t left = len;
	unsigned long long o = off;

	if (j->state != J_OPEN || R->rc || j->to_single)
		return fg_err_set(err, FG_EIO, "cancelled");
	while (left) {
		ssize_t w = pwrite(j->fd, p, left, (off_t)o);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return fg_err_set(err, errno == ENOSPC ? FG_ENOSPC : FG_EIO,
					  "fetch %s: write %s: %s", j->it->what, j->part.data,
					  strerror(errno));
		}
		p += w;
		o += (unsigned long long)w;
		left -= (size_t)w;
	}
	if (j->single) {
		int rc = fg_sha256_chain_update(j->sha, &j->chain, data, len, err);

		if (rc)
			return rc;
	}
	j->got[cx->c] += len;
	j->it->fetched += len;
	R->bytes_done += len;
	if (R->stats)
		R->stats->bytes_net += len;
	if (!j->single && cx->c == j->frontier)
		advance_target(j, 0);
	return 0;
}

static void job_close(struct job *j);

/* Drops what j has fetched (its bytes from the progress, its partial files,
 * its hash) and opens its files afresh, as one chunk when single. Returns
 * nonzero when that failed: j has failed then. */
static int job_refetch(struct job *j, int single)
{
	struct run *R = j->R;
	struct fg_err e;
	size_t c;
	unsigned long long had = 0;

	for (c = 0; c < j->nchunks; c++)
		had += j->got[c];
	R->bytes_done -= had < R->bytes_done ? had : R->bytes_done;
	if (single) {
		j->to_single = 0;
		j->chunk = j->size;
		j->nchunks = 1;
	}
	close_files(j);
	fg_store_partial_remove(R->st, j->key, NULL);
	fg_sha256_free(j->sha);
	j->sha = NULL;
	fg_sha256_chain_free(&j->chain);
	if (job_files(j, &e)) {
		fg_err_wrap(&e, "fetch %s", j->it->what);
		job_close(j);
		job_fail(j, e.code, &e);
		return -1;
	}
	return 0;
}

/* The server answered a range with the whole file: the chunked download is
 * dropped and the file fetched again as one request (hashed as it arrives).
 * Called once no chunk of j is in flight. */
static void restart_single(struct job *j)
{
	struct run *R = j->R;

	/* the hasher and the syncer must be done with the chunks */
	pthread_mutex_lock(&R->mu);
	j->closing = 1;
	while (j->hashing || j->syncing)
		pthread_cond_wait(&R->cv, &R->mu);
	j->njq = 0;
	j->single = 1;
	pthread_mutex_unlock(&R->mu);
	job_refetch(j, 1);
}

static void chunk_done(void *ud, int rc, const struct fg_err *e)
{
	struct cctx *cx = ud;
	struct job *j = cx->j;
	struct run *R = j->R;

	R->inflight--;
	j->inflight--;
	if (j->state != J_OPEN)
		return;
	if (rc == FG_EUNSUPPORTED && !j->single)
		j->to_single = 1;
	if (j->to_single && !R->rc) {
		/* the other chunks in flight stop at their next bytes */
		if (!j->inflight)
			restart_single(j);
		return;
	}
	if (rc) {
		struct fg_err we;

		/* "fetch WEIGHTS_BUCKET/model.safetensors: HTTP 429 after 6 tries" */
		if (e && strncmp(e->msg, "fetch ", 6)) {
			fg_err_set(&we, rc, "fetch %s", e->msg);
		} else if (e) {
			we = *e;
		} else {
			fg_err_set(&we, rc, "fetch %s: %s", j->it->what, fg_err_name(rc));
		}
		job_fail(j, rc, &we);
		return;
	}
	j->done[cx->c] = 1;
	if (j->single) {
		struct fg_err he;

		if (fg_sha256_final(j->sha, j->digest, &he)) {
			job_fail(j, he.code, &he);
			return;
		}
		j->hash_done = 1;
		close(j->fd);
		j->fd = -1;
		job_close(j);
		if (!R->npending)
			R->pending_since = now_ms();
		R->pending[R->npending++] = j;
		return;
	}
	/* journaled by the syncer once the bytes are on disk */
	pthread_mutex_lock(&R->mu);
	j->jq[j->njq++] = cx->c;
	pthread_cond_broadcast(&R->cv);
	pthread_mutex_unlock(&R->mu);
	advance_target(j, 1);
}

/* The error of a commit that failed with rc: a second hash mismatch says
 * the remote changed; anything else names the fetch. */
static void commit_error(const struct job *j, int rc, const char *hex, struct fg_err *e)
{
	if (rc == FG_EHASH)
		fg_err_set(e, FG_EHASH, "fetch %s: sha256 %s, expected %s (fetched twice; the remote no longer matches "
			   "the lock)", j->it->what, hex, j->it->expect_sha256);
	else
		fg_err_wrap(e, "fetch %s", j->it->what);
}

static void reset_for_refetch(struct job *j)
{
	if (!job_refetch(j, 0))
		advance_target(j, 1);
}

static void commit_job(struct job *j)
{
	struct run *R = j->R;
	char hex[FG_SHA256_HEX_LEN + 1];
	struct fg_err e;
	int rc;

	if (j->hash_rc) {
		job_close(j);
		job_fail(j, j->hash_rc, &j->hash_err);
		return;
	}
	fg_hex_encode(j->digest, FG_SHA256_LEN, hex);
	close(j->fd);
	j->fd = -1;
	rc = fg_store_commit(R->st, j->part.data, hex, j->it->expect_sha256, &e);
	if (rc == FG_EHASH && !j->mismatch_retry) {
		/* a corrupted transfer: try once more from scratch */
		j->mismatch_retry = 1;
		reset_for_refetch(j);
		return;
	}
	job_close(j);
	if (rc) {
		commit_error(j, rc, hex, &e);
		fg_store_partial_remove(R->st, j->key, NULL);
		job_fail(j, rc, &e);
		return;
	}
	close(j->jfd);
	j->jfd = -1;
	fg_store_partial_remove(R->st, j->key, NULL);
	job_keep_states(j, hex);
	if (!j->it->expect_sha256 && j->it->resume_key)
		fg_store_known_put(R->st, j->key, hex);
	fg_store_unlock(j->lk);
	j->lk = NULL;
	memcpy(j->it->sha256, hex, sizeof(hex));
	j->it->rc = 0;
	j->state = J_DONE;
	R->finished++;
	if (R->stats)
		R->stats->files_fetched++;
}

static int submit_chunk(struct job *j, size_t c)
{
	struct run *R = j->R;
	struct fg_http_xfer x;
	struct fg_err e;
	int rc;

	memset(&x, 0, sizeof(x));
	x.url = j->it->url;
	x.what = j->it->what;
	x.start = c * j->chunk;
	x.end = x.start + j->chunk < j->size ? x.start + j->chunk : j->size;
	x.no_auth = j->it->no_auth;
	x.total = j->size; /* a file that changed since the listing is not mixed in */
	x.ranges_needed = !j->single;
	x.on_data = chunk_data;
	x.on_done = chunk_done;
	x.ud = &j->ctx[c];
	rc = fg_http_submit(R->h, &x, &e);
	if (rc) {
		job_fail(j, rc, &e);
		return rc;
	}
	R->inflight++;
	j->inflight++;
	return 0;
}

/* Fills free transfer slots: chunks of open files first, then new files. */
static void pump(struct run *R)
{
	size_t i;
	unsigned long long now = now_ms();

	if (R->rc)
		return;
	for (i = 0; i < R->nopen && R->inflight < R->max_jobs; i++) {
		struct job *j = R->open[i];

		while (j->state == J_OPEN && !j->to_single && R->inflight < R->max_jobs &&
		       j->next < j->nchunks) {
			size_t c = j->next++;

			if (!j->done[c] && submit_chunk(j, c))
				return;
		}
	}
	for (i = 0; i < R->nbusy && R->inflight < R->max_jobs && R->nopen < R->max_open;) {
		struct job *j = &R->jobs[R->busy[i]];
		int rc;

		if (j->retry_at > now) {
			i++;
			continue;
		}
		rc = job_open(j);
		if (rc == 0) {
			i++;
			continue;
		}
		R->busy[i] = R->busy[--R->nbusy];
		if (rc < 0)
			return;
		while (j->state == J_OPEN && R->inflight < R->max_jobs && j->next < j->nchunks) {
			size_t c = j->next++;

			if (!j->done[c] && submit_chunk(j, c))
				return;
		}
	}
	while (R->cursor < R->n && R->inflight < R->max_jobs && R->nopen < R->max_open && !R->rc) {
		struct job *j = &R->jobs[R->cursor++];
		int rc = job_open(j);

		if (rc == 0) {
			R->busy[R->nbusy++] = (size_t)(j - R->jobs);
			continue;
		}
		if (rc < 0)
			return;
		while (j->state == J_OPEN && R->inflight < R->max_jobs && j->next < j->nchunks) {
			size_t c = j->next++;

			if (!j->done[c] && submit_chunk(j, c))
				return;
		}
	}
}

static void progress(struct run *R, int final)
{
	struct fg_fetch_progress p;
	unsigned long long now = now_ms();
	size_t i;
	double dt;

	if (!R->o->progress)
		return;
	if (!final && now - R->last_prog < (R->o->progress_ms ? R->o->progress_ms : 200))
		return;
	memset(&p, 0, sizeof(p));
	dt = (double)(now - R->last_prog) / 1000.0;
	if (dt > 0 && R->last_prog) {
		double inst = (double)(R->bytes_done - R->last_prog_bytes) / dt;

		R->rate = R->rate ? 0.7 * R->rate + 0.3 * inst : inst;
	}
	R->last_prog = now;
	R->last_prog_bytes = R->bytes_done;
	p.files_done = R->finished;
	p.files_total = R->n;
	p.bytes_done = R->bytes_done;
	p.bytes_total = R->bytes_total;
	p.rate = R->rate;
	p.elapsed = (double)(now - R->t0) / 1000.0;
	p.final = final;
	for (i = 0; i < R->nopen; i++) {
		struct job *j = R->open[i];

		if (!p.current || j->size > p.cur_size) {
			size_t c;

			p.current = j->it->what;
			p.cur_size = j->size;
			p.cur_done = 0;
			for (c = 0; c < j->nchunks; c++)
				p.cur_done += j->got[c];
		}
	}
	R->o->progress(R->o->progress_ud, &p);
}

/* Commits the waiting small files together: one syncfs makes their data
 * durable, renames without per-file fsync, one syncfs makes the renames durable. */
static void flush_pending(struct run *R)
{
	struct fg_err e;
	size_t i, n = R->npending;
	int rc;

	if (!n)
		return;
	R->npending = 0;
	rc = fg_store_sync(R->st, &e);
	for (i = 0; i < n; i++) {
		struct job *j = R->pending[i];
		char hex[FG_SHA256_HEX_LEN + 1];
		int crc;

		if (rc) {
			job_fail(j, rc, &e);
			continue;
		}
		fg_hex_encode(j->digest, FG_SHA256_LEN, hex);
		crc = fg_store_commit_ex(R->st, j->part.data, hex, j->it->expect_sha256,
					 FG_STORE_COMMIT_NOSYNC, &e);
		if (crc == FG_EHASH && !j->mismatch_retry && !R->rc) {
			struct fg_err oe;

			j->mismatch_retry = 1;
			fg_sha256_free(j->sha);
			j->sha = NULL;
			fg_sha256_chain_free(&j->chain);
			if (job_files(j, &oe)) {
				fg_err_wrap(&oe, "fetch %s", j->it->what);
				job_fail(j, oe.code, &oe);
				continue;
			}
			pthread_mutex_lock(&R->mu);
			R->open[R->nopen++] = j;
			pthread_mutex_unlock(&R->mu);
			R->bytes_done -= j->size < R->bytes_done ? j->size : R->bytes_done;
			continue;
		}
		if (crc) {
			commit_error(j, crc, hex, &e);
			job_fail(j, crc, &e);
			continue;
		}
		memcpy(j->it->sha256, hex, sizeof(hex));
		job_keep_states(j, hex);
		j->it->rc = 0;
		j->state = J_DONE;
		R->finished++;
		if (R->stats)
			R->stats->files_fetched++;
		if (!j->it->expect_sha256 && j->it->resume_key)
			fg_store_known_put(R->st, j->key, hex);
	}
	rc = fg_store_sync(R->st, &e);
	if (rc)
		fail_run(R, rc, &e);
	for (i = 0; i < n; i++) {
		struct job *j = R->pending[i];

		if (j->state == J_OPEN)
			continue; /* refetching */
		fg_store_unlock(j->lk);
		j->lk = NULL;
	}
}

static int tick(void *ud)
{
	struct run *R = ud;
	size_t i;

	for (i = 0; i < R->nopen;) {
		struct job *j = R->open[i];
		int ready;

		pthread_mutex_lock(&R->mu);
		if (j->sync_rc && j->state == J_OPEN) {
			struct fg_err se = j->sync_err;
			int src = j->sync_rc;

			pthread_mutex_unlock(&R->mu);
			fg_err_wrap(&se, "fetch %s", j->it->what);
			job_close(j);
			job_fail(j, src, &se);
			continue; /* j left the open list */
		}
		ready = !j->single && j->hash_done && !j->hashing && j->state == J_OPEN && !j->inflight &&
			!j->syncing;
		if (ready)
			j->closing = 1;
		pthread_mutex_unlock(&R->mu);
		if (ready) {
			size_t before = R->nopen;

			commit_job(j);
			if (R->nopen < before)
				continue; /* j left the open list; the same slot holds another */
		}
		i++;
	}
	if (R->npending && (R->npending >= 256 || !R->inflight || R->nopen >= R->max_open ||
			    now_ms() - R->pending_since >= 250))
		flush_pending(R);
	if (R->rc) {
		/* stop once the transfers still running have drained */
		if (!R->inflight)
			flush_pending(R);
		return R->inflight ? 0 : 1;
	}
	pump(R);
	progress(R, 0);
	if (R->finished >= R->n && !R->inflight)
		return 1;
	return 0;
}

int fg_fetch_run(struct fg_fetch_stats *stats, struct fg_store *st, struct fg_http *h,
		 struct fg_fetch_item *items, size_t n, const struct fg_fetch_opts *opts,
		 struct fg_err *err)
{
	struct run R;
	pthread_t th, sth;
	int have_thread = 0, rc = 0;
	size_t i;
	unsigned long long need = 0, avail = 0;
	struct fg_fetch_opts defo;

	memset(&defo, 0, sizeof(defo));
	if (!opts)
		opts = &defo;
	memset(&R, 0, sizeof(R));
	if (stats)
		memset(stats, 0, sizeof(*stats));
	R.st = st;
	R.h = h;
	R.items = items;
	R.n = n;
	R.o = opts;
	R.stats = stats;
	R.max_jobs = opts->jobs > 0 ? opts->jobs : 8;
	R.chunk = opts->chunk ? opts->chunk : FG_FETCH_CHUNK;
	R.max_open = (size_t)R.max_jobs * 4 + 4;
	R.nosync = opts->journal_nosync;
	R.t0 = now_ms();
	pthread_mutex_init(&R.mu, NULL);
	pthread_cond_init(&R.cv, NULL);
	R.jobs = calloc(n ? n : 1, sizeof(*R.jobs));
	R.busy = calloc(n ? n : 1, sizeof(*R.busy));
	R.open = calloc(R.max_open, sizeof(*R.open));
	R.pending = calloc(n ? n : 1, sizeof(*R.pending));
	if (!R.jobs || !R.busy || !R.open || !R.pending) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		struct job *j = &R.jobs[i];
		size_t c;

		items[i].rc = 0;
		items[i].present = 0;
		items[i].fetched = items[i].resumed = 0;
		items[i].sha256[0] = '\0';
		if (items[i].expect_sha256 && !fg_sha256_hex_valid(items[i].expect_sha256)) {
			rc = fg_err_set(err, FG_EINVAL, "fetch %s: expected digest is not 64 lowercase hex",
					items[i].what);
			goto out;
		}
		j->R = &R;
		j->it = &items[i];
		j->fd = j->jfd = -1;
		j->size = items[i].size;
		j->chunk = R.chunk;
		if (items[i].no_ranges && j->size > j->chunk)
			j->chunk = j->size; /* one request; no partial to resume */
		j->nchunks = (size_t)((j->size + j->chunk - 1) / j->chunk);
		j->single = j->nchunks <= 1;
		if (j->nchunks == 0)
			j->nchunks = 1; /* an empty file is one empty chunk */
		j->done = calloc(j->nchunks, 1);
		j->got = calloc(j->nchunks, sizeof(*j->got));
		j->ctx = calloc(j->nchunks, sizeof(*j->ctx));
		j->jq = calloc(j->nchunks, sizeof(*j->jq));
		j->jq_work = calloc(j->nchunks, sizeof(*j->jq_work));
		if (!j->done || !j->got || !j->ctx || !j->jq || !j->jq_work) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		for (c = 0; c < j->nchunks; c++) {
			j->ctx[c].j = j;
			j->ctx[c].c = c;
		}
		R.bytes_total += items[i].size;
		if (!(items[i].expect_sha256 && fg_store_has(st, items[i].expect_sha256)))
			need += items[i].size;
	}
	if (need) {
		struct fg_err fe;

		if (!fg_fs_free_bytes(fg_store_root(st), &avail, &fe) && avail < need) {
			/* partial downloads already on disk count as space in hand */
			unsigned long long have = 0;

			for (i = 0; i < n; i++) {
				char key[FG_STORE_KEY_MAX];
				struct fg_buf part = FG_BUF_INIT;
				struct stat sb;

				if (!fg_store_key(key, items[i].expect_sha256,
						  items[i].resume_key ? items[i].resume_key : items[i].url, NULL) &&
				    !fg_store_partial_paths(&part, NULL, st, key, NULL) && !stat(part.data, &sb))
					have += (unsigned long long)sb.st_blocks * 512ULL;
				fg_buf_release(&part);
			}
			if (avail + have < need) {
				rc = fg_err_set(err, FG_ENOSPC,
						"not enough space in %s: need %llu bytes, %llu free",
						fg_store_root(st), need - have, avail);
				goto out;
			}
		}
	}
	if (h) {
		if (pthread_create(&th, NULL, hasher, &R)) {
			rc = fg_err_set(err, FG_ENOMEM, "cannot start the hasher thread");
			goto out;
		}
		have_thread = 1;
		if (pthread_create(&sth, NULL, syncer, &R)) {
			rc = fg_err_set(err, FG_ENOMEM, "cannot start the syncer thread");
			goto out;
		}
		have_thread = 2;
		pump(&R);
		rc = fg_http_run(h, tick, &R, 5, err);
	} else {
		for (i = 0; i < n; i++)
			job_open(&R.jobs[i]);
	}
	if (!rc && R.rc)
		rc = R.rc;
	if (rc && R.rc && err)
		*err = R.err;
	if (!rc) {
		for (i = 0; i < n; i++)
			if (R.jobs[i].state != J_DONE) {
				rc = fg_err_set(err, FG_EIO, "fetch %s: did not finish", items[i].what);
				break;
			}
	}
	progress(&R, 1);
out:
	if (have_thread) {
		pthread_mutex_lock(&R.mu);
		R.stop = 1;
		for (i = 0; i < R.nopen; i++)
			R.open[i]->cancel = 1;
		pthread_cond_broadcast(&R.cv);
		pthread_mutex_unlock(&R.mu);
		pthread_join(th, NULL);
		if (have_thread == 2)
			pthread_join(sth, NULL);
	}
	if (stats)
		stats->seconds = (double)(now_ms() - R.t0) / 1000.0;
	for (i = 0; R.jobs && i < n; i++) {
		struct job *j = &R.jobs[i];

		close_files(j);
		fg_store_unlock(j->lk);
		fg_sha256_free(j->sha);
		fg_sha256_chain_free(&j->chain);
		fg_buf_release(&j->part);
		fg_buf_release(&j->jpath);
		free(j->done);
		free(j->got);
		free(j->ctx);
		free(j->jq);
		free(j->jq_work);
	}
	free(R.jobs);
	free(R.busy);
	free(R.open);
	free(R.pending);
	pthread_mutex_destroy(&R.mu);
	pthread_cond_destroy(&R.cv);
	return rc;
}
