/* cmd_pull.c - `fgpack pull` (and `fgpack lock`): flags, progress on a
 * terminal, the lock file, materializing, the --json summary. The work is in
 * lib/pull.c. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "fsutil.h"
#include "json.h"
#include "lock.h"
#include "manifest.h"
#include "pull.h"
#include "pullcmd.h"
#include "ref.h"
#include "store.h"

static void usage(FILE *f, int is_lock)
{
	if (is_lock)
		fprintf(f,
			"usage: fgpack lock MANIFEST [-o FILE] [-j N] [--offline] [--deps] [--json] [--store DIR]\n"
			"       fgpack lock MANIFEST --check [-o FILE] [--json]\n\n"
			"Resolves every component of MANIFEST (bucket folders, model repos) on the Hub,\n"
			"fetches and sha256-hashes every file into the store, checks the manifest's pins,\n"
			"and writes the manifest's entry into the lock file (other entries are kept).\n"
			"The bytes are deterministic: the same remote content gives the same lock.\n"
			"The manifest's Python dependencies are recorded, classified (url, pin,\n"
			"unpinned); unpinned ones are warned about.\n\n"
			"options:\n"
			"  -o, --lock FILE  the lock file (default buckets.lock)\n"
			"  --deps           also fetch the http(s) URL dependencies (wheels) and\n"
			"                   git+https://…@<commit> ones (with git: the commit's tree\n"
			"                   as a tar) and record their sha256 and size\n"
			"  --check          list the remote and report every file added, removed or\n"
			"                   changed since the lock (and revisions moved); fetches and\n"
			"                   writes nothing; exit 0 when up to date, 3 when not\n"
			"  -j N             concurrent transfers (default 8)\n"
			"  --offline        never open a socket (also HF_HUB_OFFLINE=1): an up-to-date\n"
			"                   entry is kept; without one, file:// components are read\n"
			"                   from disk, model repos from huggingface_hub's cache (the\n"
			"                   files its snapshot holds), components the old entry holds\n"
			"                   with the same source keep its files; a bucket or URL the\n"
			"                   lock does not hold fails naming it\n"
			"  --json           print a JSON summary (schema 1) on stdout\n"
			"  --store DIR      the store (default $FGPACK_HOME, $XDG_CACHE_HOME/fgpack,\n"
			"                   ~/.cache/fgpack)\n");
	else
		fprintf(f,
			"usage: fgpack pull MANIFEST [--into DIR [--copy]] [--locked] [--offline] [-j N]\n"
			"                   [--deps] [--json] [--lock FILE] [--store DIR]\n\n"
			"Locks MANIFEST (unless the lock already has an up-to-date entry for it),\n"
			"fetches every component into the content store (ranged, resumable, every\n"
			"byte sha256-checked), checks the manifest's pins, writes the lock, and with\n"
			"--into hard-links (or copies) each component into DIR/<its LOCAL_*_DIR path>;\n"
			"files an earlier --into of this manifest placed in DIR and the lock no longer\n"
			"names are removed (unless changed since: those are kept, with a warning);\n"
			"other files in the target folders that the lock does not name get a warning.\n"
			"The manifest's Python dependencies are recorded in the lock, classified\n"
			"(url, pin, unpinned); each unpinned one gets a warning on stderr.\n\n"
			"options:\n"
			"  --into DIR    materialize components under DIR (default: none)\n"
			"  --copy        with --into: independent copies (a reflink where the file\n"
			"                system has them), not hard links into the store, so a serve\n"
			"                script writing its model folder (as root, whatever the mode)\n"
			"                cannot damage the store\n"
			"  --locked      fail unless the lock has an entry for MANIFEST and the remote\n"
			"                still matches it; never changes the lock\n"
			"  --offline     never open a socket (also HF_HUB_OFFLINE=1); fails naming the\n"
			"                first blob that is not in the store; with --locked the lock\n"
			"                is the authority (the remote is not re-checked; said on stderr\n"
			"                and as \"remote_checked\": false in --json); without an\n"
			"                up-to-date entry, locks what it can without a socket, as\n"
			"                'fgpack lock --offline' does\n"
			"  -j N          concurrent transfers: ranges of large files, small files (default 8)\n"
			"  --deps        also fetch the http(s) URL dependencies (wheels) into the store,\n"
			"                and git+https://…@<commit> ones (the system git fetches that\n"
			"                commit; its tree is stored as a tar), and record their sha256\n"
			"                and size (with --locked: they must have one in the lock)\n"
			"  --json        print one JSON summary (schema 1) on stdout\n"
			"  --lock FILE   the lock file (default buckets.lock)\n"
			"  --store DIR   the store (default $FGPACK_HOME, $XDG_CACHE_HOME/fgpack,\n"
			"                ~/.cache/fgpack)\n");
}

static void human(char *out, size_t n, double v)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int i = 0;

	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(out, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

static void progress(void *ud, const struct fg_fetch_progress *p)
{
	char done[32], total[32], rate[32], eta[32] = "";
	int *shown = ud;

	human(done, sizeof(done), (double)p->bytes_done);
	human(total, sizeof(total), (double)p->bytes_total);
	human(rate, sizeof(rate), p->rate);
	if (p->rate > 0 && p->bytes_total > p->bytes_done)
		snprintf(eta, sizeof(eta), " ETA %.0fs", (double)(p->bytes_total - p->bytes_done) / p->rate);
	fprintf(stderr, "\r\033[K%zu/%zu files  %s / %s  %s/s%s", p->files_done, p->files_total, done,
		total, rate, eta);
	if (p->current && p->cur_size) {
		const char *name = p->current;
		char shown_name[48];
		size_t l = strlen(name);

		if (l > 40)
			name += l - 40;
		/* a remote's file name: shown as errors show it (a cut inside
		 * a UTF-8 letter too becomes '?') */
		snprintf(shown_name, sizeof(shown_name), "%s", name);
		fg_err_one_line(shown_name);
		fprintf(stderr, "  %s %.0f%%", shown_name, 100.0 * (double)p->cur_done / (double)p->cur_size);
	}
	if (p->final)
		fprintf(stderr, "\n");
	*shown = 1;
}

/* The manifest's key in the lock: its path relative to the lock's folder when
 * it lies below it, else as given (without a leading "./"). */
static int manifest_key(struct fg_buf *out, const char *manifest, const char *lock_path,
			struct fg_err *err)
{
	char mreal[PATH_MAX], ldir[PATH_MAX];
	struct fg_buf lp = FG_BUF_INIT;
	const char *slash = strrchr(lock_path, '/');
	int rc = 0;

	if (slash)
		rc = fg_buf_append(&lp, lock_path, (size_t)(slash - lock_path), err);
	else
		rc = fg_buf_puts(&lp, ".", err);
	if (!rc && realpath(manifest, mreal) && realpath(lp.data[0] ? lp.data : "/", ldir)) {
		size_t n = strlen(ldir);

		if (!strncmp(mreal, ldir, n) && mreal[n] == '/') {
			fg_buf_release(&lp);
			return fg_buf_puts(out, mreal + n + 1, err);
		}
	}
	fg_buf_release(&lp);
	while (!rc && manifest[0] == '.' && manifest[1] == '/')
		manifest += 2;
	return rc ? rc : fg_buf_puts(out, manifest, err);
}

static int env_int(const char *name, int lo, int hi, int def)
{
	const char *v = getenv(name);
	int x;

	if (v && *v && !fg_parse_int(v, lo, hi, &x))
		return x;
	return def;
}

static cJSON *summary(const char *verb, const char *key, const char *lock_path, const char *into,
		      const struct fg_pull_report *rep, const struct fg_lock_manifest *lm, int offline,
		      int locked)
{
	cJSON *o = cJSON_CreateObject(), *f, *comps;
	struct fg_buf dir = FG_BUF_INIT;
	size_t i, j;

	cJSON_AddNumberToObject(o, "schema", 1);
	cJSON_AddStringToObject(o, "command", verb);
	cJSON_AddStringToObject(o, "manifest", key);
	cJSON_AddStringToObject(o, "lock", lock_path);
	if (into)
		cJSON_AddStringToObject(o, "into", into);
	else
		cJSON_AddNullToObject(o, "into");
	cJSON_AddBoolToObject(o, "offline", offline);
	cJSON_AddBoolToObject(o, "locked", locked);
	cJSON_AddBoolToObject(o, "resolved", rep->resolved);
	/* the remote was listed and compared with (or written into) the lock */
	cJSON_AddBoolToObject(o, "remote_checked", rep->resolved);
	if (locked && !rep->resolved)
		cJSON_AddStringToObject(o, "note", "--locked --offline: the remote was not re-checked; "
					"the lock was taken as the authority");
	else if (rep->from_hf_cache)
		cJSON_AddStringToObject(o, "note", "offline: model components resolved from huggingface_hub's "
					"cache, the files its snapshot holds; the Hub was not listed");
	cJSON_AddNumberToObject(o, "components_from_hf_cache", (double)rep->from_hf_cache);
	cJSON_AddBoolToObject(o, "lock_changed", rep->lock_changed);
	cJSON_AddNumberToObject(o, "files", (double)rep->files);
	cJSON_AddNumberToObject(o, "bytes", (double)rep->bytes);
	f = cJSON_AddObjectToObject(o, "fetch");
	cJSON_AddNumberToObject(f, "bytes_net", (double)rep->fetch.bytes_net);
	cJSON_AddNumberToObject(f, "bytes_resumed", (double)rep->fetch.bytes_resumed);
	cJSON_AddNumberToObject(f, "bytes_present", (double)rep->fetch.bytes_present);
	cJSON_AddNumberToObject(f, "files_fetched", (double)rep->fetch.files_fetched);
	cJSON_AddNumberToObject(f, "files_present", (double)rep->fetch.files_present);
	cJSON_AddNumberToObject(f, "files_hf_cache", (double)rep->fetch.files_reused);
	cJSON_AddNumberToObject(f, "bytes_hf_cache", (double)rep->fetch.bytes_reused);
	cJSON_AddNumberToObject(f, "files_in_place", (double)rep->fetch.files_in_place);
	cJSON_AddNumberToObject(f, "bytes_in_place", (double)rep->fetch.bytes_in_place);
	cJSON_AddNumberToObject(f, "seconds", (double)(long long)(rep->fetch.seconds * 1000) / 1000.0);
	if (lm && lm->n_deps) {
		cJSON *da = cJSON_AddArrayToObject(o, "dependencies");

		for (i = 0; i < lm->n_deps; i++) {
			cJSON *d = cJSON_CreateObject();

			cJSON_AddStringToObject(d, "spec", lm->deps[i].spec);
			cJSON_AddStringToObject(d, "kind", lm->deps[i].kind);
			if (lm->deps[i].sha256[0])
				cJSON_AddStringToObject(d, "sha256", lm->deps[i].sha256);
			cJSON_AddItemToArray(da, d);
		}
	}
	cJSON_AddNumberToObject(o, "dependencies_hashed", (double)rep->deps_hashed);
	comps = cJSON_AddArrayToObject(o, "components");
	for (i = 0; lm && i < lm->n_components; i++) {
		const struct fg_lock_component *c = lm->components[i];
		cJSON *co = cJSON_CreateObject();
		unsigned long long bytes = 0;

		for (j = 0; j < c->n_files; j++)
			bytes += c->files[j].size;
		cJSON_AddStringToObject(co, "key", c->key);
		cJSON_AddStringToObject(co, "role", c->role);
		cJSON_AddStringToObject(co, "kind", c->kind);
		cJSON_AddStringToObject(co, "source", c->source);
		if (c->revision)
			cJSON_AddStringToObject(co, "revision", c->revision);
		cJSON_AddNumberToObject(co, "files", (double)c->n_files);
		cJSON_AddNumberToObject(co, "bytes", (double)bytes);
		cJSON_AddStringToObject(co, "tree_digest", c->tree_digest);
		fg_buf_reset(&dir);
		if (into && !fg_pull_target_dir(&dir, into, c, NULL))
			cJSON_AddStringToObject(co, "dir", dir.data);
		cJSON_AddItemToArray(comps, co);
	}
	fg_buf_release(&dir);
	return o;
}

static const char *check_state_name(int st)
{
	static const char *const n[] = { "same", "differs", "new", "gone", "missing" };

	return st >= 0 && st <= FG_CHECK_MISSING ? n[st] : "?";
}

static const char *check_kind_name(int k)
{
	static const char *const n[] = { "?", "added", "removed", "changed", "unknown" };

	return k >= 1 && k <= FG_CHECK_UNKNOWN ? n[k] : "?";
}

/* fgpack lock --check: the differences, as a JSON document or as lines. */
static void check_print(const struct fg_check_report *r, const char *key, const char *lock_path, int json)
{
	size_t i, k, ndiff = 0;

	if (json) {
		cJSON *o = cJSON_CreateObject(), *cs = cJSON_AddArrayToObject(o, "components");
		struct fg_buf out = FG_BUF_INIT;

		cJSON_AddNumberToObject(o, "schema", 1);
		cJSON_AddStringToObject(o, "command", "lock --check");
		cJSON_AddStringToObject(o, "manifest", key);
		cJSON_AddStringToObject(o, "lock", lock_path);
		cJSON_AddBoolToObject(o, "up_to_date", r->up_to_date);
		cJSON_AddBoolToObject(o, "manifest_changed", r->manifest_changed);
		for (i = 0; i < r->n; i++) {
			const struct fg_check_component *c = &r->c[i];
			cJSON *co = cJSON_CreateObject(), *fs;

			cJSON_AddStringToObject(co, "key", c->key);
			cJSON_AddStringToObject(co, "source", c->source);
			cJSON_AddStringToObject(co, "state", check_state_name(c->state));
			if (c->rev_locked)
				cJSON_AddStringToObject(co, "revision_locked", c->rev_locked);
			if (c->rev_now)
				cJSON_AddStringToObject(co, "revision_now", c->rev_now);
			if (c->missing)
				cJSON_AddStringToObject(co, "missing", c->missing);
			cJSON_AddNumberToObject(co, "same", (double)c->n_same);
			cJSON_AddNumberToObject(co, "unknown", (double)c->n_unknown);
			fs = cJSON_AddArrayToObject(co, "files");
			for (k = 0; k < c->n_files; k++) {
				const struct fg_check_file *f = &c->files[k];
				cJSON *fo = cJSON_CreateObject();

				cJSON_AddStringToObject(fo, "path", f->path);
				cJSON_AddStringToObject(fo, "change", check_kind_name(f->kind));
				if (f->why)
					cJSON_AddStringToObject(fo, "why", f->why);
				if (f->kind != FG_CHECK_ADDED)
					cJSON_AddNumberToObject(fo, "size_locked", (double)f->size_locked);
				if (f->kind != FG_CHECK_REMOVED)
					cJSON_AddNumberToObject(fo, "size_now", (double)f->size_now);
				cJSON_AddItemToArray(fs, fo);
			}
			cJSON_AddItemToArray(cs, co);
		}
		if (!fg_json_write(&out, o, 1, NULL))
			fwrite(out.data, 1, out.len, stdout);
		fg_buf_release(&out);
		cJSON_Delete(o);
		return;
	}
	for (i = 0; i < r->n; i++)
		ndiff += r->c[i].state != FG_CHECK_SAME;
	if (r->up_to_date)
		printf("%s: up to date with %s\n", key, lock_path);
	else
		printf("%s: %zu of %zu component%s differ%s from %s%s\n", key, ndiff, r->n, r->n == 1 ? "" : "s",
		       ndiff == 1 ? "s" : "", lock_path, r->manifest_changed ? "; the manifest's bytes changed too" : "");
	for (i = 0; i < r->n; i++) {
		const struct fg_check_component *c = &r->c[i];
		size_t na = 0, nr = 0, nc = 0;

		for (k = 0; k < c->n_files; k++) {
			na += c->files[k].kind == FG_CHECK_ADDED;
			nr += c->files[k].kind == FG_CHECK_REMOVED;
			nc += c->files[k].kind == FG_CHECK_CHANGED;
		}
		printf("  %s (%s): ", c->key, c->source);
		if (c->state == FG_CHECK_NEW)
			printf("not in the lock (%zu file%s listed)\n", na, na == 1 ? "" : "s");
		else if (c->state == FG_CHECK_GONE)
			printf("in the lock, no longer in the manifest\n");
		else if (c->state == FG_CHECK_MISSING)
			printf("not found (%s)\n", c->missing);
		else if (c->state == FG_CHECK_SAME)
			printf("the same (%zu file%s%s)\n", c->n_same + c->n_unknown,
			       c->n_same + c->n_unknown == 1 ? "" : "s", c->n_unknown ? ", some unknown" : "");
		else {
			printf("differs");
			if (c->rev_locked && c->rev_now && strcmp(c->rev_locked, c->rev_now))
				printf("; revision moved %.12s -> %.12s", c->rev_locked, c->rev_now);
			printf(": %zu changed, %zu added, %zu removed, %zu the same\n", nc, na, nr, c->n_same);
		}
		for (k = 0; c->state != FG_CHECK_NEW && c->state != FG_CHECK_MISSING && k < c->n_files; k++) {
			const struct fg_check_file *f = &c->files[k];

			if (f->kind == FG_CHECK_CHANGED)
				printf("    changed  %s (%s; %llu -> %llu bytes)\n", f->path, f->why, f->size_locked,
				       f->size_now);
			else if (f->kind == FG_CHECK_ADDED)
				printf("    added    %s (%llu bytes)\n", f->path, f->size_now);
			else if (f->kind == FG_CHECK_REMOVED)
				printf("    removed  %s\n", f->path);
			else
				printf("    unknown  %s (no ETag or Last-Modified: only its bytes could tell)\n", f->path);
		}
	}
}

int fg_cmd_pull_main(int argc, char **argv, int is_lock)
{
	const char *verb = is_lock ? "lock" : "pull";
	const char *manifest = NULL, *into = NULL, *lock_path = "buckets.lock", *store_dir = NULL;
	int json = 0, copy = 0, locked = 0, offline = 0, deps = 0, jobs = 8, i, rc, shown = 0, lock_existed = 0, check = 0;
	int code = FG_EXIT_OK; /* lock --check: 3 when something differs */
	struct fg_manifest *m = NULL;
	struct fg_lock *lock = NULL;
	struct fg_store *st = NULL;
	struct fg_hub_env *env = NULL;
	struct fg_pull_report rep;
	struct fg_pull_opts po;
	struct fg_buf key = FG_BUF_INIT;
	struct fg_err err;
	struct fg_place_report placed;
	cJSON *ex;
	size_t u;

	fg_err_clear(&err);
	memset(&placed, 0, sizeof(placed));
	if (fg_cmd_wants_help(argc, argv)) {
		usage(stdout, is_lock);
		return FG_EXIT_OK;
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--json")) {
			json = 1;
		} else if (!is_lock && !strcmp(a, "--locked")) {
			locked = 1;
		} else if (!strcmp(a, "--offline")) {
			offline = 1;
		} else if (is_lock && !strcmp(a, "--check")) {
			check = 1;
		} else if (!strcmp(a, "--deps")) {
			deps = 1;
		} else if (!strcmp(a, "-j") || !strcmp(a, "--jobs")) {
			if (++i >= argc || fg_parse_int(argv[i], 1, 256, &jobs))
				return fg_cmd_usage_error(verb, "-j needs a number from 1 to 256");
		} else if (!is_lock && !strcmp(a, "--copy")) {
			copy = 1;
		} else if (!is_lock && !strcmp(a, "--into")) {
			if (++i >= argc)
				return fg_cmd_usage_error(verb, "--into needs a folder");
			into = argv[i];
		} else if (!strcmp(a, "--lock") || (is_lock && !strcmp(a, "-o"))) {
			if (++i >= argc)
				return fg_cmd_usage_error(verb, "%s needs a file", a);
			lock_path = argv[i];
		} else if (!strcmp(a, "--store")) {
			if (++i >= argc)
				return fg_cmd_usage_error(verb, "--store needs a folder");
			store_dir = argv[i];
		} else if (a[0] == '-' && a[1]) {
			return fg_cmd_usage_error(verb, "unknown option %s", a);
		} else if (!manifest) {
			manifest = a;
		} else {
			return fg_cmd_usage_error(verb, "one manifest at a time (got %s too)", a);
		}
	}
	if (copy && !into)
		return fg_cmd_usage_error(verb, "--copy places copies with --into DIR, which is missing");
	if (!manifest)
		return fg_cmd_usage_error(verb, "which manifest?");
	rc = fg_manifest_load(&m, manifest, &err);
	if (!rc)
		rc = fg_hub_env_load(&env, &err);
	if (!rc)
		rc = manifest_key(&key, manifest, lock_path, &err);
	/* a lock to be written: a block device, socket or folder at its path
	 * is refused before any work (fg_out_check's one line) */
	if (!rc && !locked && !check)
		rc = fg_out_check(lock_path, &err);
	if (!rc) {
		/* a device or FIFO the lock is written through (/dev/null, a named
		 * pipe) holds no earlier lock: reading one would wait for a writer
		 * (a FIFO) or find it empty (/dev/null) and fail */
		rc = fg_out_is_stream(lock_path) ? FG_ENOTFOUND : fg_lock_read(&lock, lock_path, &err);
		lock_existed = !rc;
		if (rc == FG_ENOTFOUND) {
			fg_err_clear(&err);
			rc = fg_lock_new(&lock, &err);
		}
	}
	memset(&po, 0, sizeof(po));
	po.key = key.data;
	po.into = into;
	po.offline = offline;
	po.locked = locked;
	po.refresh = is_lock;
	po.deps = deps;
	po.jobs = jobs;
	po.stall_secs = env_int("FGPACK_STALL_SECS", 1, 3600, 0);
	po.retry_base_ms = (unsigned)env_int("FGPACK_RETRY_BASE_MS", 1, 60000, 0);
	po.chunk = (unsigned long long)env_int("FGPACK_CHUNK", 65536, 1 << 30, 0);
	po.journal_nosync = env_int("FGPACK_JOURNAL_NOSYNC", 0, 1, 0);
	if (!rc && check) {
		struct fg_check_report cr;

		if (!lock_existed)
			rc = fg_err_set(&err, FG_ENOTFOUND, "%s: no lock file to check (run 'fgpack lock' first)", lock_path);
		if (!rc && !(rc = fg_pull_check(&cr, lock, m, env, &po, &err))) {
			check_print(&cr, key.data, lock_path, json);
			code = cr.up_to_date ? FG_EXIT_OK : FG_EXIT_MISMATCH;
			fg_check_report_release(&cr);
		}
		goto out;
	}
	if (!rc)
		rc = fg_store_open(&st, store_dir, &err);
	/* held until the store is freed: after the lock is written and its root
	 * recorded, so a gc meanwhile cannot take a blob this pull will name */
	if (!rc)
		rc = fg_store_use(st, &err);
	if (rc)
		goto out;
	if (isatty(2) && !getenv("FGPACK_NO_PROGRESS")) {
		po.progress = progress;
		po.progress_ud = &shown;
	}
	for (i = 0; i < (int)m->n_dependencies; i++)
		if (m->deps[i].kind == FG_DEP_UNPINNED)
			fg_cmd_line("fgpack %s: warning: dependency \"%s\" is not pinned to one version "
				    "(name==version, a URL, or git+…@<commit id>); the lock cannot make it repeatable",
				    verb, m->dependencies[i]);
	rc = fg_pull(&rep, lock, m, st, env, &po, &err);
	if (rc)
		goto out;
	if (locked && !rep.resolved)
		fprintf(stderr, "fgpack %s: note: offline: the remote was not re-checked against the lock; "
			"the lock was taken as the authority\n", verb);
	if (rep.from_hf_cache)
		fprintf(stderr, "fgpack %s: note: offline: %zu model component%s resolved from huggingface_hub's "
			"cache: the files its snapshot holds, not a listing of the Hub ('fgpack lock' online "
			"checks them)\n", verb, rep.from_hf_cache, rep.from_hf_cache == 1 ? "" : "s");
	if (rep.hf_cache_missing)
		fprintf(stderr, "fgpack %s: warning: offline: %zu file%s of the cache's snapshot left out: "
			"no blob behind the link (a download that never finished)\n", verb, rep.hf_cache_missing,
			rep.hf_cache_missing == 1 ? "" : "s");
	if (!locked && (rep.lock_changed || !lock_existed)) {
		rc = fg_lock_write_entry(lock_path, lock, key.data, &err);
		if (rc)
			goto out;
	}
	if (!locked || lock_existed) {
		char real[PATH_MAX];
		struct stat sb;

		/* a gc root only where a lock can be read back: a FIFO's read
		 * would hold gc up, /dev/null's fail it */
		if (realpath(lock_path, real) && !stat(real, &sb) && S_ISREG(sb.st_mode))
			fg_store_root_add(st, real, NULL);
	}
	if (into) {
		rc = fg_pull_materialize(fg_lock_find_manifest(lock, key.data), m, st, into, copy, &placed, &err);
		if (rc)
			goto out;
	}
	if (json) {
		struct fg_buf out = FG_BUF_INIT;
		cJSON *doc = summary(verb, key.data, lock_path, into, &rep,
				     fg_lock_find_manifest(lock, key.data), offline || env->offline,
				     locked);

		if (into) {
			cJSON_AddNumberToObject(doc, "linked", (double)placed.linked);
			cJSON_AddNumberToObject(doc, "copied", (double)placed.copied);
			cJSON_AddNumberToObject(doc, "removed", (double)placed.removed);
			cJSON_AddNumberToObject(doc, "kept_changed", (double)placed.kept);
			cJSON_AddNumberToObject(doc, "unknown_files", (double)placed.foreign);
			cJSON_AddBoolToObject(doc, "unknown_files_more", placed.foreign_more);
			ex = cJSON_AddArrayToObject(doc, "unknown_examples");
			for (u = 0; ex && u < FG_PLACE_EXAMPLES && placed.foreign_ex[u]; u++)
				cJSON_AddItemToArray(ex, cJSON_CreateString(placed.foreign_ex[u]));
		}
		if (!fg_json_write(&out, doc, 1, &err))
			fwrite(out.data, 1, out.len, stdout);
		fg_buf_release(&out);
		cJSON_Delete(doc);
	} else {
		char b[32];

		human(b, sizeof(b), (double)rep.bytes);
		fprintf(stderr, "%s: %zu files, %s%s", key.data, rep.files, b,
			rep.lock_changed || !lock_existed ? (locked ? "" : ", lock written") : ", lock unchanged");
		if (rep.fetch.bytes_net) {
			human(b, sizeof(b), (double)rep.fetch.bytes_net);
			fprintf(stderr, ", fetched %s in %.2fs", b, rep.fetch.seconds);
		}
		if (rep.fetch.files_in_place) {
			human(b, sizeof(b), (double)rep.fetch.bytes_in_place);
			fprintf(stderr, ", %zu file%s (%s) already in place under %s", rep.fetch.files_in_place,
				rep.fetch.files_in_place == 1 ? "" : "s", b, into);
		}
		if (rep.fetch.files_reused) {
			human(b, sizeof(b), (double)rep.fetch.bytes_reused);
			fprintf(stderr, ", %zu file%s (%s) from the huggingface_hub cache", rep.fetch.files_reused,
				rep.fetch.files_reused == 1 ? "" : "s", b);
		}
		if (into)
			fprintf(stderr, ", materialized under %s (%zu linked, %zu copied)", into, placed.linked,
				placed.copied);
		if (into && placed.removed)
			fprintf(stderr, ", %zu no longer in the lock removed", placed.removed);
		if (into && placed.swept)
			fprintf(stderr, ", %zu temporary file%s of a killed pull removed", placed.swept,
				placed.swept == 1 ? "" : "s");
		fprintf(stderr, "\n");
	}
	if (into && placed.foreign) {
		struct fg_buf names = FG_BUF_INIT;

		for (u = 0; u < FG_PLACE_EXAMPLES && placed.foreign_ex[u]; u++)
			fg_buf_printf(&names, NULL, "%s%s", u ? ", " : "", placed.foreign_ex[u]);
		/* names found on disk: an ESC or a lone 0x9b in one shows '?' */
		fg_cmd_line("fgpack pull: warning: %s%zu file%s in the target folders under %s that the lock "
			    "does not name (%s%s): a serve script reading the folder may load %s",
			    placed.foreign_more ? "at least " : "", placed.foreign, placed.foreign == 1 ? "" : "s", into,
			    names.data ? names.data : "", placed.foreign > u ? ", ..." : "",
			    placed.foreign == 1 ? "it" : "them");
		fg_buf_release(&names);
	}
	if (into && placed.kept)
		fprintf(stderr, "fgpack pull: warning: %zu file%s placed under %s earlier and no longer in the "
			"lock changed since; kept\n", placed.kept, placed.kept == 1 ? "" : "s", into);
out:
	fg_place_report_release(&placed);
	if (shown && rc)
		fprintf(stderr, "\n");
	fg_buf_release(&key);
	fg_manifest_free(m);
	fg_lock_free(lock);
	fg_store_free(st);
	fg_hub_env_free(env);
	return rc ? fg_cmd_fail(verb, &err) : code;
}

int cmd_pull(int argc, char **argv)
{
	return fg_cmd_pull_main(argc, argv, 0);
}
