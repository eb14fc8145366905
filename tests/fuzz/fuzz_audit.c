/* fuzz_audit.c - fuzz target for the audit's scan of a submission's Python
 * files (fg_audit_scan_python: serve.py and patches come with the manifest
 * someone else wrote): any text either adds hardcoded-default warnings, each
 * naming a variable the env sets, or fails with a one-line message. The
 * audit's JSON and CycloneDX outputs are then written from what it found. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char env_json[] = "{\"K\": \"64\", \"F\": \"0.90\", \"B\": \"1\", \"S\": \"fast\", "
				       "\"MAX_MODEL_LEN\": \"4096\", \"E\": \"\"}";
	struct fg_audit *a = calloc(1, sizeof(*a));
	struct fg_err err = { 0, "" };
	struct fg_buf out = FG_BUF_INIT;
	cJSON *env = NULL;
	size_t i;

	if (!a || fg_json_parse(&env, env_json, strlen(env_json), "env", NULL))
		abort();
	/* what every audit has before its scans (fg_audit_manifest) */
	a->input = strdup("manifest");
	a->path = strdup("manifest.json");
	if (!a->input || !a->path)
		abort();
	if (fg_audit_scan_python(a, "serve.py", (const char *)data, size, env, &err)) {
		if (!err.msg[0] || strchr(err.msg, '\n'))
			abort();
	}
	for (i = 0; i < a->n_warnings; i++) {
		const struct fg_audit_warning *w = &a->warnings[i];

		if (!w->code || strcmp(w->code, "hardcoded-default") || !w->message || !w->key ||
		    !cJSON_GetObjectItemCaseSensitive(env, w->key))
			abort();
	}
	if (fg_audit_json(&out, a, NULL))
		abort();
	fg_buf_reset(&out);
	if (fg_audit_cyclonedx(&out, a, "fuzz", NULL))
		abort();
	fg_buf_release(&out);
	cJSON_Delete(env);
	fg_audit_free(a);
	return 0;
}
