/* cmd_audit.c - `fgpack audit (MANIFEST | buckets.lock | OUT.fgb)`: one row per
 * component (owner, source, pin, digest, size, signature, provenance) and
 * the warnings that matter; --json and --cyclonedx for machines. */
#include <stdio.h>
#include <string.h>

#include "audit.h"
#include "cmd.h"
#include "version.h"

static const char usage_text[] =
	"usage: fgpack audit (MANIFEST | buckets.lock | OUT.fgb) [--lock FILE] [--online]\n"
	"                    [--json | --cyclonedx]\n"
	"\n"
	"Lists each component: key, role, owner (<namespace>/<bucket> or repo), source,\n"
	"whether and how it is pinned, digest, size, who signed it (key fingerprint),\n"
	"and what it was derived from (provenance inputs and parameters); then the\n"
	"Python dependencies: url / exact pin / unpinned, with sha256 and size once\n"
	"'fgpack lock --deps' fetched them (from the lock). Warns about\n"
	"mutable bucket references with no pin, manifest pins that disagree with the\n"
	"lock, serve.py/patch files that hard-code a default for a variable the manifest\n"
	"sets differently, and (--online, needs a lock) buckets that changed since the\n"
	"lock. Works offline and says what it cannot know.\n"
	"\n"
	"  --lock FILE   check a manifest against this buckets.lock\n"
	"  --online      compare the lock with what the buckets hold now (HF_ENDPOINT)\n"
	"  --json        one JSON document (schema 1)\n"
	"  --cyclonedx   a CycloneDX 1.6 BOM (JSON)\n"
	"Exit 0 when audited (warnings included), 1 when the input cannot be read.\n";

static void human(const struct fg_audit *a)
{
	size_t i;

	printf("%s %s%s%s\n", a->input, a->path, a->name ? "  name: " : "", a->name ? a->name : "");
	for (i = 0; i < a->n_rows; i++) {
		const struct fg_audit_row *r = &a->rows[i];

		printf("\n%s  (%s, %s)\n", r->key, r->role ? r->role : "?", r->kind ? r->kind : "?");
		printf("  owner:      %s\n", r->owner ? r->owner : "unknown");
		if (r->source)
			printf("  source:     %s\n", r->source);
		printf("  pinned:     %s%s%s\n", r->pin ? "yes, " : "NO", r->pin ? r->pin : "",
		       r->pin_sha256 ? "" : "");
		if (r->pin_sha256)
			printf("  pin:        sha256:%s\n", r->pin_sha256);
		printf("  digest:     %s%s\n", r->digest ? "sha256:" : "", r->digest ? r->digest : "unknown");
		if (r->size >= 0)
			printf("  size:       %lld bytes in %lld file%s\n", r->size, r->files, r->files == 1 ? "" : "s");
		else
			printf("  size:       unknown\n");
		if (r->revision)
			printf("  revision:   %s\n", r->revision);
		if (r->target)
			printf("  target:     %s\n", r->target);
		printf("  signed by:  %s%s%s\n", r->signed_by ? r->signed_by : r->signature,
		       r->signed_by ? " — " : "", r->signed_by ? r->signature : "");
		if (r->derived) {
			const cJSON *d = cJSON_IsArray(r->derived) ? cJSON_GetArrayItem(r->derived, 0) : r->derived;
			const cJSON *in;
			char *params = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(d, "parameters"));

			printf("  derived from:");
			cJSON_ArrayForEach(in, cJSON_GetObjectItemCaseSensitive(d, "inputs"))
			{
				const cJSON *nm = cJSON_GetObjectItemCaseSensitive(in, "name");
				const cJSON *dg = cJSON_GetObjectItemCaseSensitive(
					cJSON_GetObjectItemCaseSensitive(in, "digest"), "sha256");

				printf(" %s%s%.12s", cJSON_IsString(nm) ? nm->valuestring : "?",
				       cJSON_IsString(dg) ? "@" : "", cJSON_IsString(dg) ? dg->valuestring : "");
			}
			printf("\n  parameters: %s\n", params ? params : "{}");
			cJSON_free(params);
		}
	}
	if (a->n_deps) {
		printf("\ndependencies:\n");
		for (i = 0; i < a->n_deps; i++) {
			const struct fg_audit_dep *d = &a->deps[i];

			printf("  %s\n    kind:     %s\n", d->spec,
			       !strcmp(d->kind, "url") ? "url" : !strcmp(d->kind, "pin") ? "exact pin" :
			       !strcmp(d->kind, "unpinned") ? "UNPINNED" : d->kind);
			if (d->commit)
				printf("    commit:   %s%s%s\n", d->commit, d->tree ? "  tree " : "",
				       d->tree ? d->tree : "");
			if (d->sha256[0])
				printf("    sha256:   %s\n    size:     %lld bytes\n", d->sha256, d->size);
			else if (!strcmp(d->kind, "url"))
				printf("    sha256:   unknown (not fetched; fgpack lock --deps)\n");
			if (d->expected && strcmp(d->expected, d->sha256))
				printf("    expected: sha256:%s (#sha256= in the URL)\n", d->expected);
		}
	}
	if (a->n_warnings) {
		printf("\nwarnings:\n");
		for (i = 0; i < a->n_warnings; i++)
			printf("  [%s] %s\n", a->warnings[i].code, a->warnings[i].message);
	}
	if (a->n_unknown) {
		printf("\ncannot know%s:\n", a->online ? "" : " offline");
		for (i = 0; i < a->n_unknown; i++)
			printf("  - %s\n", a->unknown[i]);
	}
}

int cmd_audit(int argc, char **argv)
{
	const char *path = NULL, *lock = NULL;
	int json = 0, cdx = 0, online = 0, i, rc;
	struct fg_audit *a = NULL;
	struct fg_err err = { 0, "" };
	struct fg_buf out = FG_BUF_INIT;

	if (fg_cmd_wants_help(argc, argv)) {
		fputs(usage_text, stdout);
		return FG_EXIT_OK;
	}
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--cyclonedx"))
			cdx = 1;
		else if (!strcmp(argv[i], "--online"))
			online = 1;
		else if (!strcmp(argv[i], "--lock") && i + 1 < argc)
			lock = argv[++i];
		else if (argv[i][0] == '-' && argv[i][1])
			return fg_cmd_usage_error("audit", "unknown option %s", argv[i]);
		else if (!path)
			path = argv[i];
		else
			return fg_cmd_usage_error("audit", "one input only");
	}
	if (!path)
		return fg_cmd_usage_error("audit", "wants a manifest, a buckets.lock or a bundle");
	if (json && cdx)
		return fg_cmd_usage_error("audit", "--json or --cyclonedx, not both");
	rc = fg_audit_path(&a, path, lock, &err);
	if (!rc && online)
		rc = fg_audit_online(a, lock ? lock : !strcmp(a->input, "lock") ? path : NULL, &err);
	if (!rc && json)
		rc = fg_audit_json(&out, a, &err);
	else if (!rc && cdx)
		rc = fg_audit_cyclonedx(&out, a, fg_build_id, &err);
	if (!rc) {
		if (json || cdx)
			fputs(out.data, stdout);
		else
			human(a);
	}
	fg_buf_release(&out);
	fg_audit_free(a);
	return rc ? fg_cmd_fail("audit", &err) : FG_EXIT_OK;
}
