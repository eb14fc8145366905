/* cmd_store.c - `fgpack store path|verify|gc`: look into and maintain the
 * content-addressed store (docs/formats/store.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "json.h"
#include "lock.h"
#include "store.h"
#include "workq.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fgpack store path [SHA256] [--store DIR]\n"
		"       fgpack store import FILE... [--sha256 HEX] [--store DIR]\n"
		"       fgpack store verify [-j N] [--lock FILE]... [--json] [--store DIR]\n"
		"       fgpack store gc [--lock FILE]... [--dry-run] [--json] [--store DIR]\n\n"
		"  path     print the store's root, or the path of one blob (exit 1 if absent)\n"
		"  import   hash local files into the store (e.g. to feed 'pull --offline');\n"
		"           prints '<sha256>  <file>' per file; --sha256 checks a single file\n"
		"  verify   re-hash every blob, or with --lock only those the locks name (a\n"
		"           missing one fails, exit 1); move mismatching ones to quarantine/ (exit 3)\n"
		"  gc       remove blobs that no lock file references: the --lock files given\n"
		"           plus every lock recorded by 'fgpack pull' (roots/); refuses when\n"
		"           it knows no lock at all, and while a pull or lock uses the store\n\n"
		"options:\n"
		"  --store DIR   the store (default $FGPACK_HOME, $XDG_CACHE_HOME/fgpack,\n"
		"                ~/.cache/fgpack)\n"
		"  -j N          verify with N threads (default 1)\n"
		"  --sha256 HEX  import: the digest the file must have (nothing kept otherwise)\n"
		"  --lock FILE   a buckets.lock whose blobs gc keeps / verify checks (repeatable)\n"
		"  --dry-run     gc: list what would be removed, remove nothing\n"
		"  --json        print one JSON document (schema 1) instead of text\n");
}

struct keep {
	char **hex;
	size_t n, cap;
	int failed;
};

static int keep_add(void *ctx, const char *hex)
{
	struct keep *k = ctx;

	if (k->n == k->cap) {
		size_t nc = k->cap ? k->cap * 2 : 64;
		char **p = realloc(k->hex, nc * sizeof(*p));

		if (!p)
			return -1;
		k->hex = p;
		k->cap = nc;
	}
	k->hex[k->n] = strdup(hex);
	if (!k->hex[k->n])
		return -1;
	k->n++;
	return 0;
}

static int keep_lock(struct keep *k, const char *path, struct fg_err *err)
{
	struct fg_lock *lock = NULL;
	int rc = fg_lock_read(&lock, path, err);

	if (!rc && fg_lock_each_digest(lock, keep_add, k))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	fg_lock_free(lock);
	return rc;
}

struct root_ctx {
	struct keep *k;
	struct fg_err *err;
	int n;
};

static int keep_root(void *ctx, const char *path)
{
	struct root_ctx *r = ctx;
	int rc = keep_lock(r->k, path, r->err);

	if (rc)
		fg_err_wrap(r->err, "gc root");
	r->n++;
	return rc;
}

struct each_ctx {
	int json;
	int dry_run;
	int verify;
	cJSON *list;
	cJSON *missing;
};

static int on_blob(void *ctx, const char *hex, unsigned long long size, int good)
{
	struct each_ctx *e = ctx;

	if (good == 1)
		return 0;
	if (good < 0) {
		if (e->json)
			cJSON_AddItemToArray(e->missing, cJSON_CreateString(hex));
		else
			fprintf(stderr, "fgpack store verify: missing blob %s\n", hex);
		return 0;
	}
	if (e->json) {
		cJSON_AddItemToArray(e->list, cJSON_CreateString(hex));
	} else if (e->verify) {
		fprintf(stderr, "fgpack store verify: bad blob %s (%llu bytes) moved to quarantine/\n",
			hex, size);
	} else {
		printf("%s %s %llu\n", e->dry_run ? "would remove" : "removed", hex, size);
	}
	return 0;
}

/* store import: the files on a work queue (each copied into the store and
 * hashed on the way by one thread, as many at once as there are CPUs, at
 * most 8), each printed in the order given once it and those before it are
 * in; the first failure in that order stops the rest */
struct import_job {
	struct fg_store *st;
	const char *const *paths;
	const char *expect;
	char (*hex)[FG_SHA256_HEX_LEN + 1];
};

static int import_one(void *arg, size_t i, int t, struct fg_err *err)
{
	struct import_job *j = arg;

	(void)t;
	return fg_store_import(j->st, j->paths[i], j->expect, j->hex[i], err);
}

static int import_done(void *arg, size_t i, struct fg_err *err)
{
	struct import_job *j = arg;

	(void)err;
	printf("%s  %s\n", j->hex[i], j->paths[i]);
	return 0;
}

static int import_all(struct fg_store *st, const char *const *paths, size_t n, const char *expect,
		      struct fg_err *err)
{
	struct import_job j = { st, paths, expect, calloc(n ? n : 1, sizeof(*j.hex)) };
	int rc;

	if (!j.hex)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_workq_run(n, fg_workq_cpus(8), import_one, import_done, &j, err);
	free(j.hex);
	return rc;
}

static int print_json(cJSON *doc)
{
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err;
	int rc = fg_json_write(&b, doc, 1, &err);

	if (!rc)
		fwrite(b.data, 1, b.len, stdout);
	fg_buf_release(&b);
	cJSON_Delete(doc);
	return rc ? fg_cmd_fail("store", &err) : 0;
}

int cmd_store(int argc, char **argv)
{
	const char *sub, *store_dir = NULL, *blob = NULL, *expect = NULL;
	struct fg_store *st = NULL;
	struct fg_store_report rep;
	struct fg_err err = { 0, "" };
	struct keep k = { NULL, 0, 0, 0 };
	struct each_ctx ec = { 0, 0, 0, NULL, NULL };
	const char **locks;
	size_t n_locks = 0, i;
	int jobs = 1, json = 0, dry_run = 0, rc = 0, a;

	if (argc < 2) {
		usage(stderr);
		return FG_EXIT_USAGE;
	}
	if (fg_cmd_wants_help(argc, argv)) {
		usage(stdout);
		return FG_EXIT_OK;
	}
	sub = argv[1];
	if (strcmp(sub, "path") && strcmp(sub, "verify") && strcmp(sub, "gc") && strcmp(sub, "import"))
		return fg_cmd_usage_error("store", "unknown subcommand '%s'", sub);
	locks = calloc((size_t)argc, sizeof(*locks));
	if (!locks)
		return FG_EXIT_FAIL;
	for (a = 2; a < argc; a++) {
		const char *o = argv[a];

		if (!strcmp(o, "--store") && a + 1 < argc) {
			store_dir = argv[++a];
		} else if (!strcmp(o, "--json")) {
			json = 1;
		} else if (!strcmp(o, "--dry-run") && !strcmp(sub, "gc")) {
			dry_run = 1;
		} else if (!strcmp(o, "--lock") && a + 1 < argc &&
			   (!strcmp(sub, "gc") || !strcmp(sub, "verify"))) {
			locks[n_locks++] = argv[++a];
		} else if (!strcmp(o, "-j") && a + 1 < argc && !strcmp(sub, "verify")) {
			if (fg_parse_int(argv[++a], 1, 64, &jobs)) {
				free(locks);
				return fg_cmd_usage_error("store", "-j wants a number 1..64, not '%s'", argv[a]);
			}
		} else if (o[0] != '-' && !strcmp(sub, "path") && !blob) {
			blob = o;
		} else if (!strcmp(o, "--sha256") && a + 1 < argc && !strcmp(sub, "import")) {
			expect = argv[++a];
		} else if (o[0] != '-' && !strcmp(sub, "import")) {
			locks[n_locks++] = o; /* files to import */
		} else {
			free(locks);
			return fg_cmd_usage_error("store", "%s: unexpected argument '%s'", sub, o);
		}
	}
	if (!strcmp(sub, "import") && (!n_locks || (expect && n_locks != 1))) {
		free(locks);
		return fg_cmd_usage_error("store", "import: %s",
					  n_locks ? "--sha256 checks exactly one file" : "no file given");
	}
	if (expect && !fg_sha256_hex_valid(expect)) {
		free(locks);
		return fg_cmd_usage_error("store", "--sha256 wants 64 lowercase hex digits");
	}
	rc = fg_store_open(&st, store_dir, &err);
	if (rc) {
		free(locks);
		return fg_cmd_fail("store", &err);
	}
	ec.json = json;
	ec.dry_run = dry_run;
	if (!strcmp(sub, "path")) {
		struct fg_buf p = FG_BUF_INIT;

		if (!blob) {
			printf("%s\n", fg_store_root(st));
		} else if ((rc = fg_store_blob_path(&p, st, blob, &err)) != 0) {
			rc = fg_cmd_fail("store", &err);
		} else if (!fg_store_has(st, blob)) {
			fprintf(stderr, "fgpack store: blob %s is not in the store\n", blob);
			rc = FG_EXIT_FAIL;
		} else {
			printf("%s\n", p.data);
		}
		fg_buf_release(&p);
	} else if (!strcmp(sub, "import")) {
		if (import_all(st, locks, (size_t)n_locks, expect, &err))
			rc = fg_cmd_fail("store", &err);
	} else if (!strcmp(sub, "verify")) {
		ec.verify = 1;
		ec.list = cJSON_CreateArray();
		ec.missing = cJSON_CreateArray();
		for (i = 0; !rc && i < n_locks; i++)
			rc = keep_lock(&k, locks[i], &err);
		if (!rc && n_locks)
			rc = fg_store_verify_some(&rep, st, (const char *const *)k.hex, k.n, jobs, on_blob,
						  &ec, &err);
		else if (!rc)
			rc = fg_store_verify(&rep, st, jobs, on_blob, &ec, &err);
		if (rc) {
			rc = fg_cmd_fail("store", &err);
		} else {
			double gbs = rep.seconds > 0 ? (double)rep.bytes / rep.seconds / 1e9 : 0;

			if (json) {
				cJSON *d = cJSON_CreateObject();

				cJSON_AddNumberToObject(d, "schema", 1);
				cJSON_AddStringToObject(d, "command", "store verify");
				cJSON_AddStringToObject(d, "root", fg_store_root(st));
				cJSON_AddNumberToObject(d, "blobs", (double)rep.blobs);
				cJSON_AddNumberToObject(d, "bytes", (double)rep.bytes);
				cJSON_AddNumberToObject(d, "bad", (double)rep.bad);
				cJSON_AddItemToObject(d, "bad_blobs", ec.list);
				ec.list = NULL;
				cJSON_AddNumberToObject(d, "missing", (double)rep.missing);
				cJSON_AddItemToObject(d, "missing_blobs", ec.missing);
				ec.missing = NULL;
				cJSON_AddNumberToObject(d, "stray", (double)rep.stray);
				cJSON_AddNumberToObject(d, "fixed_modes", (double)rep.fixed_modes);
				cJSON_AddNumberToObject(d, "jobs", jobs);
				cJSON_AddNumberToObject(d, "seconds", rep.seconds);
				cJSON_AddNumberToObject(d, "cpu_seconds", rep.cpu_seconds);
				cJSON_AddNumberToObject(d, "gb_per_s", gbs);
				rc = print_json(d);
			} else {
				printf("verified %llu blobs, %.3f GB in %.3f s (%.2f GB/s, %d thread%s), %llu bad\n",
				       rep.blobs, (double)rep.bytes / 1e9, rep.seconds, gbs, jobs,
				       jobs == 1 ? "" : "s", rep.bad);
				if (rep.missing)
					fprintf(stderr,
						"fgpack store verify: %llu blob%s the lock names %s missing "
						"('fgpack pull' fetches them)\n",
						rep.missing, rep.missing == 1 ? "" : "s",
						rep.missing == 1 ? "is" : "are");
				if (rep.fixed_modes)
					fprintf(stderr, "fgpack store verify: %llu writable blobs made read-only again\n",
						rep.fixed_modes);
				if (rep.stray)
					fprintf(stderr, "fgpack store verify: %llu stray files in blobs/ (left alone)\n",
						rep.stray);
			}
			if (!rc && rep.bad)
				rc = FG_EXIT_MISMATCH;
			else if (!rc && rep.missing)
				rc = FG_EXIT_FAIL;
		}
		cJSON_Delete(ec.list);
		cJSON_Delete(ec.missing);
	} else {
		struct root_ctx rc_ctx = { &k, &err, 0 };

		/* before the roots are read: a pull that writes its lock after
		 * this waits for gc to finish */
		rc = fg_store_lock_gc(st, &err);
		for (i = 0; !rc && i < n_locks; i++)
			rc = keep_lock(&k, locks[i], &err);
		if (!rc)
			rc = fg_store_roots(st, keep_root, &rc_ctx, &err);
		if (!rc && n_locks == 0 && rc_ctx.n == 0)
			rc = fg_err_set(&err, FG_EINVAL,
					"gc: no lock file known (pass --lock FILE); refusing to remove every blob");
		if (rc) {
			rc = fg_cmd_fail("store", &err);
		} else {
			ec.list = cJSON_CreateArray();
			rc = fg_store_gc(&rep, st, (const char *const *)k.hex, k.n, dry_run, on_blob, &ec, &err);
			if (rc) {
				rc = fg_cmd_fail("store", &err);
			} else if (json) {
				cJSON *d = cJSON_CreateObject();

				cJSON_AddNumberToObject(d, "schema", 1);
				cJSON_AddStringToObject(d, "command", "store gc");
				cJSON_AddStringToObject(d, "root", fg_store_root(st));
				cJSON_AddBoolToObject(d, "dry_run", dry_run);
				cJSON_AddNumberToObject(d, "blobs", (double)rep.blobs);
				cJSON_AddNumberToObject(d, "kept", (double)rep.kept);
				cJSON_AddNumberToObject(d, "removed", (double)rep.removed);
				cJSON_AddNumberToObject(d, "removed_bytes", (double)rep.removed_bytes);
				cJSON_AddNumberToObject(d, "removed_tmps", (double)rep.tmps);
				cJSON_AddItemToObject(d, "removed_blobs", ec.list);
				ec.list = NULL;
				rc = print_json(d);
			} else {
				printf("%s %llu blobs (%.3f GB), kept %llu referenced by %zu lock file%s\n",
				       dry_run ? "would remove" : "removed", rep.removed,
				       (double)rep.removed_bytes / 1e9, rep.kept, n_locks + (size_t)rc_ctx.n,
				       n_locks + (size_t)rc_ctx.n == 1 ? "" : "s");
			}
			cJSON_Delete(ec.list);
		}
	}
	for (i = 0; i < k.n; i++)
		free(k.hex[i]);
	free(k.hex);
	free(locks);
	fg_store_free(st);
	return rc;
}
