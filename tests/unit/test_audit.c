/* test_audit.c - the patch scanner: which env defaults and overrides count
 * as disagreeing with the manifest, and which do not. */
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "json.h"
#include "tap.h"

static size_t scan(const char *py, const char *env_json)
{
	struct fg_audit a;
	struct fg_err err;
	cJSON *env = NULL;
	size_t n, i;

	memset(&a, 0, sizeof(a));
	fg_json_parse(&env, env_json, strlen(env_json), "env", &err);
	fg_audit_scan_python(&a, "serve.py", py, strlen(py), env, &err);
	n = a.n_warnings;
	for (i = 0; i < a.n_warnings; i++) {
		free(a.warnings[i].code);
		free(a.warnings[i].key);
		free(a.warnings[i].message);
	}
	free(a.warnings);
	cJSON_Delete(env);
	return n;
}

int main(void)
{
	const char *env = "{\"K\":\"64\",\"F\":\"0.90\",\"B\":\"1\",\"S\":\"fast\"}";

	is_int(scan("x = os.environ.get(\"K\", \"32\")\n", env), 1, "environ.get default differs");
	is_int(scan("x = os.environ.get('K', '64')\n", env), 0, "same default: nothing");
	is_int(scan("x = os.getenv( \"K\" ,32)\n", env), 1, "getenv, bare number, spaces");
	is_int(scan("x = float(os.getenv(\"F\", 0.9))\n", env), 0, "0.9 equals 0.90");
	is_int(scan("x = os.environ.get(\"B\", True)\n", env), 0, "True equals 1");
	is_int(scan("os.environ[\"S\"] = \"slow\"\n", env), 1, "override differs");
	is_int(scan("if os.environ[\"S\"] == \"slow\":\n", env), 0, "comparison is not an assignment");
	is_int(scan("os.environ.setdefault(\"K\", \"8\")\n", env), 1, "setdefault differs");
	is_int(scan("x = os.environ.get(\"UNSET\", \"8\")\n", env), 0, "variable the manifest does not set");
	is_int(scan("x = os.environ.get(\"K\")\n", env), 0, "no default");
	is_int(scan("x = os.environ.get(\"K\", None)\n", env), 0, "None default");
	is_int(scan("x = os.environ.get(name, \"1\")\n", env), 0, "variable name not literal");
	is_int(scan("a = os.environ.get(\"K\", \"1\"); b = os.getenv(\"S\", \"x\")\n", env), 2,
	       "two on one line");
	is_int(scan("x = os.environ.get(\"K\", \"unterminated\n", env), 0, "broken literal ignored");
	is_int(scan("", env), 0, "empty file");
	return tap_done();
}
