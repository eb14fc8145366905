/* test_provenance.c - in-toto Statement v1 / SLSA provenance v1 builder:
 * field layout, canonical bytes, refusals. */
#include <string.h>

#include "json.h"
#include "provenance.h"
#include "tap.h"
#include "version.h"

#define H1 "0000000000000000000000000000000000000000000000000000000000000001"
#define H2 "00000000000000000000000000000000000000000000000000000000000000a2"

int main(void)
{
	struct fg_prov_item subj[2] = { { "model.safetensors", NULL, H1 }, { "config.json", NULL, H2 } };
	struct fg_prov_item deps[1] = { { "src/model.safetensors", "hf://google/gemma-4-E4B-it", H2 } };
	struct fg_prov p;
	struct fg_buf a = FG_BUF_INIT, b = FG_BUF_INIT;
	struct fg_err err;
	cJSON *st = NULL, *ext = cJSON_CreateObject();
	const cJSON *pred, *bd, *rd, *x;
	char ts[32];

	cJSON_AddNumberToObject(ext, "group_size", 128);
	memset(&p, 0, sizeof(p));
	p.build_type = "https://example/bake/v1";
	p.subjects = subj;
	p.n_subjects = 2;
	p.deps = deps;
	p.n_deps = 1;
	p.external_params = ext;
	p.invocation_id = "inv-1";
	p.started_on = 1700000000;
	p.finished_on = 1700000060;
	ok(fg_prov_statement(&st, &p, &err) == 0, "statement builds (%s)", err.msg);
	is_str(fg_json_str(st, "_type"), "https://in-toto.io/Statement/v1", "_type");
	is_str(fg_json_str(st, "predicateType"), "https://slsa.dev/provenance/v1", "predicateType");
	x = cJSON_GetArrayItem(fg_json_arr(st, "subject"), 1);
	is_str(fg_json_str(x, "name"), "config.json", "subjects keep the given order");
	is_str(fg_json_str(fg_json_obj(x, "digest"), "sha256"), H2, "subject digest");
	pred = fg_json_obj(st, "predicate");
	bd = fg_json_obj(pred, "buildDefinition");
	rd = fg_json_obj(pred, "runDetails");
	is_str(fg_json_str(bd, "buildType"), "https://example/bake/v1", "buildType");
	x = cJSON_GetArrayItem(fg_json_arr(bd, "resolvedDependencies"), 0);
	is_str(fg_json_str(x, "uri"), "hf://google/gemma-4-E4B-it", "dependency uri");
	ok(fg_json_obj(bd, "externalParameters") &&
	   cJSON_GetObjectItem(fg_json_obj(bd, "externalParameters"), "group_size"), "external parameters copied");
	ok(!fg_json_obj(bd, "internalParameters"), "internal parameters left out when NULL");
	is_str(fg_json_str(fg_json_obj(fg_json_obj(rd, "builder"), "version"), "fgpack"), FG_VERSION,
	       "builder version is FG_VERSION");
	ok(fg_json_str(fg_json_obj(fg_json_obj(rd, "builder"), "version"), "build") != NULL, "build id present");
	is_str(fg_json_str(fg_json_obj(rd, "metadata"), "startedOn"), "2023-11-14T22:13:20Z", "startedOn RFC 3339");
	is_str(fg_json_str(fg_json_obj(rd, "metadata"), "finishedOn"), "2023-11-14T22:14:20Z", "finishedOn");
	ok(!cJSON_GetObjectItem(x, "annotations"), "no annotations unless given");
	cJSON_Delete(st);
	{
		cJSON *an = cJSON_CreateObject();
		const cJSON *anns[1] = { an };

		cJSON_AddStringToObject(an, "fgpack_digest", "store");
		p.dep_annotations = anns;
		st = NULL;
		ok(fg_prov_statement(&st, &p, &err) == 0, "statement with annotations (%s)", err.msg);
		x = cJSON_GetArrayItem(fg_json_arr(fg_json_obj(fg_json_obj(st, "predicate"), "buildDefinition"),
						   "resolvedDependencies"), 0);
		is_str(fg_json_str(fg_json_obj(x, "annotations"), "fgpack_digest"), "store",
		       "dependency annotations copied");
		cJSON_Delete(st);
		p.dep_annotations = NULL;
		cJSON_Delete(an);
	}
	ok(fg_prov_statement_text(&a, &p, &err) == 0 && fg_prov_statement_text(&b, &p, &err) == 0 &&
	   a.len == b.len && !memcmp(a.data, b.data, a.len) && a.data[a.len - 1] == '\n',
	   "text is canonical and repeatable");
	subj[1].sha256 = "xyz";
	ok(fg_prov_statement(&st, &p, &err) == FG_EINVAL && strstr(err.msg, "subject 1"),
	   "bad sha256 refused (%s)", err.msg);
	subj[1].sha256 = H2;
	subj[0].name = "";
	ok(fg_prov_statement(&st, &p, &err) == FG_EINVAL, "empty name refused");
	fg_prov_rfc3339(ts, 0);
	is_str(ts, "1970-01-01T00:00:00Z", "rfc3339 epoch");
	fg_buf_release(&a);
	fg_buf_release(&b);
	cJSON_Delete(ext);
	return tap_done();
}
