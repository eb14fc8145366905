/* fuzz_bundle.c - fuzz target for bundles someone else made, as fgpack
 * verify / serve / exec read them: the input is a tar stream, compressed
 * with zstd into a .fgb under a private $TMPDIR, then audited (fgpack
 * audit: manifest, patches, provenance statements), scanned
 * (fg_bundle_scan: nothing written) and opened (fg_bundle_open into a fresh
 * folder of $TMPDIR); of a bundle that opened, the drafter and model paths
 * and engine settings are asked for and its unhonoured settings noted.
 * Contract: a refusal is one line with no bundle (or a bundle with its
 * problems listed, for a mismatch); a bundle that opened has bundle.json;
 * the paths it gives stay inside its folder, its settings are in range, its
 * notes one line each; once it is freed nothing is left in $TMPDIR but the
 * .fgb, and nothing at all is written beside $TMPDIR. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "audit.h"
#include "bundle.h"
#include "fsutil.h"
#include "json.h"

static char base[4096], tmp[4200], fgb[4300];

/* the private folder goes when the run ends (make test replays every time) */
static void cleanup(void)
{
	fg_rm_tree(base);
}

static void setup(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(base, sizeof(base), "%s/fuzz_bundle.XXXXXX", t ? t : "/tmp");
	if (!mkdtemp(base) || atexit(cleanup))
		abort();
	/* two levels down: a member that climbs out lands where it is seen */
	snprintf(tmp, sizeof(tmp), "%s/a", base);
	if (mkdir(tmp, 0700))
		abort();
	snprintf(tmp, sizeof(tmp), "%s/a/tmp", base);
	if (mkdir(tmp, 0700) || setenv("TMPDIR", tmp, 1))
		abort();
	snprintf(fgb, sizeof(fgb), "%s/in.fgb", tmp);
}

/* Entries of dir other than "." and ".." and keep; -1 when unreadable. */
static int others(const char *dir, const char *keep)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, keep))
			n++;
	closedir(d);
	return n;
}

static void one_line(const struct fg_err *err)
{
	if (!err->msg[0] || strchr(err->msg, '\n'))
		abort();
}

static void inside(const struct fg_bundle *b, const struct fg_buf *p)
{
	size_t ld = strlen(b->dir);

	if (!p->len)
		return;
	if (p->len <= ld || memcmp(p->data, b->dir, ld) || p->data[ld] != '/' || strstr(p->data, "/../") ||
	    strstr(p->data + ld, "/./"))
		abort();
}

static void paths(const struct fg_bundle *b)
{
	struct fg_buf p = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	int k = -1, top_k = -1, window = 0, max_seq = 0;
	const cJSON *u;
	char note[256];
	const char *model = fg_json_str(b->meta, "model");

	if (fg_bundle_drafter(&p, &k, &top_k, b, 4, 8, 64, &err))
		one_line(&err);
	else if (k < 0 || k > 8 || top_k < 0 || top_k > 64)
		abort();
	else
		inside(b, &p);
	fg_buf_reset(&p);
	if (model && !fg_bundle_path(&p, b, model, &err))
		inside(b, &p);
	cJSON_ArrayForEach(u, fg_json_arr(fg_json_obj(b->meta, "settings"), "unhonoured")) {
		fg_bundle_unhonoured_note(note, sizeof(note), u);
		if (strchr(note, '\n'))
			abort();
	}
	memset(&err, 0, sizeof(err));
	if (fg_bundle_engine_settings(&window, &max_seq, b, &err))
		one_line(&err);
	else if (window < 0 || window > FG_BUNDLE_MAX_SLIDING_WINDOW || max_seq < 0 ||
		 max_seq > FG_BUNDLE_MAX_MODEL_LEN)
		abort();
	fg_buf_release(&p);
}

static void check(struct fg_bundle *b, int rc, const struct fg_err *err)
{
	size_t i;

	if (rc && rc != FG_EMISMATCH && b)
		abort();
	if (rc)
		one_line(err);
	if (!b)
		return;
	if (!b->meta || (rc == 0) != (b->n_problems == 0))
		abort();
	for (i = 0; i < b->n_problems; i++)
		if (!b->problems[i].path || !b->problems[i].what)
			abort();
	if (b->dir)
		paths(b);
}

/* fgpack audit of the bundle: its bundle.json, manifest, patches and
 * provenance statements, read from the archive without extracting it */
static void audit(void)
{
	struct fg_audit *a = NULL;
	struct fg_err err = { 0, "" };
	struct fg_buf out = FG_BUF_INIT;

	if (fg_audit_bundle(&a, fgb, &err)) {
		one_line(&err);
		if (a)
			abort();
		return;
	}
	if (fg_audit_json(&out, a, NULL) || fg_audit_cyclonedx(&out, a, "fuzz", NULL))
		abort();
	fg_buf_release(&out);
	fg_audit_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_bundle *b = NULL;
	struct fg_err err = { 0, "" };
	size_t cap = ZSTD_compressBound(size), n;
	void *z;
	FILE *f;
	char up[4300];
	int rc;

	if (!base[0])
		setup();
	z = malloc(cap ? cap : 1);
	if (!z)
		return 0;
	n = ZSTD_compress(z, cap, data, size, 1);
	f = fopen(fgb, "wb");
	if (ZSTD_isError(n) || !f || fwrite(z, 1, n, f) != n || fclose(f))
		abort();
	free(z);

	audit();
	rc = fg_bundle_scan(&b, fgb, &err);
	check(b, rc, &err);
	if (b && b->dir)
		abort();
	fg_bundle_free(b);
	b = NULL;

	memset(&err, 0, sizeof(err));
	rc = fg_bundle_open(&b, fgb, NULL, &err);
	check(b, rc, &err);
	fg_bundle_free(b);
	snprintf(up, sizeof(up), "%s/a", base);
	if (others(tmp, "in.fgb") != 0 || others(up, "tmp") != 0 || others(base, "a") != 0)
		abort();
	unlink(fgb);
	return 0;
}
