/* provenance.c - building in-toto Statements with SLSA provenance v1. */
#include "provenance.h"

#include <stdio.h>
#include <string.h>

#include "json.h"
#include "version.h"

void fg_prov_rfc3339(char buf[32], time_t t)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	if (!strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
		buf[0] = '\0';
}

static int add_items(cJSON *arr, const struct fg_prov_item *it, size_t n,
		     const cJSON *const *annotations, const char *what, struct fg_err *err)
{
	size_t i;

	for (i = 0; i < n; i++) {
		cJSON *o, *d;

		if (!it[i].name || !it[i].name[0] || !it[i].sha256 || !fg_sha256_hex_valid(it[i].sha256))
			return fg_err_set(err, FG_EINVAL, "provenance: %s %zu has no name or a bad sha256",
					  what, i);
		o = cJSON_CreateObject();
		if (!o)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		cJSON_AddItemToArray(arr, o);
		if (!cJSON_AddStringToObject(o, "name", it[i].name) ||
		    (it[i].uri && !cJSON_AddStringToObject(o, "uri", it[i].uri)) ||
		    !(d = cJSON_AddObjectToObject(o, "digest")) ||
		    !cJSON_AddStringToObject(d, "sha256", it[i].sha256))
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		if (annotations && annotations[i]) {
			cJSON *a = cJSON_Duplicate(annotations[i], 1);

			if (!a || !cJSON_AddItemToObject(o, "annotations", a)) {
				cJSON_Delete(a);
				return fg_err_set(err, FG_ENOMEM, "out of memory");
			}
		}
	}
	return 0;
}

static int add_copy(cJSON *obj, const char *key, const cJSON *v, struct fg_err *err)
{
	cJSON *c = cJSON_Duplicate(v, 1);

	if (!c || !cJSON_AddItemToObject(obj, key, c)) {
		cJSON_Delete(c);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	return 0;
}

int fg_prov_statement(cJSON **out, const struct fg_prov *p, struct fg_err *err)
{
	cJSON *st = cJSON_CreateObject(), *subj, *pred, *bd, *deps, *rd, *b, *ver, *md;
	char ts[32];
	int rc = 0;

	*out = NULL;
	if (!st)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!cJSON_AddStringToObject(st, "_type", FG_PROV_STATEMENT_TYPE) ||
	    !(subj = cJSON_AddArrayToObject(st, "subject")) ||
	    !cJSON_AddStringToObject(st, "predicateType", FG_PROV_SLSA_TYPE) ||
	    !(pred = cJSON_AddObjectToObject(st, "predicate")) ||
	    !(bd = cJSON_AddObjectToObject(pred, "buildDefinition")) ||
	    !cJSON_AddStringToObject(bd, "buildType", p->build_type ? p->build_type : "") ||
	    !(deps = cJSON_AddArrayToObject(bd, "resolvedDependencies")) ||
	    !(rd = cJSON_AddObjectToObject(pred, "runDetails")) ||
	    !(b = cJSON_AddObjectToObject(rd, "builder")) ||
	    !cJSON_AddStringToObject(b, "id", FG_PROV_BUILDER_ID) ||
	    !(ver = cJSON_AddObjectToObject(b, "version")) ||
	    !cJSON_AddStringToObject(ver, "fgpack", FG_VERSION) ||
	    !cJSON_AddStringToObject(ver, "build", fg_build_id) ||
	    !(md = cJSON_AddObjectToObject(rd, "metadata"))) {
		cJSON_Delete(st);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!p->build_type || !p->build_type[0])
		rc = fg_err_set(err, FG_EINVAL, "provenance: no build type");
	if (!rc)
		rc = add_items(subj, p->subjects, p->n_subjects, NULL, "subject", err);
	if (!rc)
		rc = add_items(deps, p->deps, p->n_deps, p->dep_annotations, "dependency", err);
	if (!rc) {
		if (p->external_params)
			rc = add_copy(bd, "externalParameters", p->external_params, err);
		else if (!cJSON_AddObjectToObject(bd, "externalParameters"))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!rc && p->internal_params)
		rc = add_copy(bd, "internalParameters", p->internal_params, err);
	if (!rc && p->byproducts)
		rc = add_copy(rd, "byproducts", p->byproducts, err);
	if (!rc && p->invocation_id && !cJSON_AddStringToObject(md, "invocationId", p->invocation_id))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!rc && p->started_on) {
		fg_prov_rfc3339(ts, p->started_on);
		if (!cJSON_AddStringToObject(md, "startedOn", ts))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!rc && p->finished_on) {
		fg_prov_rfc3339(ts, p->finished_on);
		if (!cJSON_AddStringToObject(md, "finishedOn", ts))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (rc) {
		cJSON_Delete(st);
		return rc;
	}
	*out = st;
	return 0;
}

int fg_prov_statement_text(struct fg_buf *out, const struct fg_prov *p, struct fg_err *err)
{
	cJSON *st;
	int rc = fg_prov_statement(&st, p, err);

	if (rc)
		return rc;
	rc = fg_json_write(out, st, 1, err);
	cJSON_Delete(st);
	return rc;
}
