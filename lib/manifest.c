/* manifest.c - reading a challenge manifest and finding its components and
 * target paths (rules in manifest.h and docs/formats/lock.md). */
#include "manifest.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "fsutil.h"
#include "json.h"
#include "utf8.h"

static const char *type_name(const cJSON *v)
{
	if (cJSON_IsString(v))
		return "string";
	if (cJSON_IsNumber(v))
		return "number";
	if (cJSON_IsBool(v))
		return "boolean";
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsArray(v))
		return "array";
	if (cJSON_IsObject(v))
		return "object";
	return "something else";
}

static int ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n > m && !strcmp(s + n - m, suf);
}

static int oom(struct fg_err *err)
{
	return fg_err_set(err, FG_ENOMEM, "out of memory");
}

void fg_manifest_free(struct fg_manifest *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->n_dependencies; i++) {
		free(m->dependencies[i]);
		if (m->deps)
			fg_dependency_release(&m->deps[i]);
	}
	free(m->dependencies);
	free(m->deps);
	for (i = 0; i < m->n_serve; i++)
		free(m->serve[i]);
	free(m->serve);
	for (i = 0; i < m->n_env; i++) {
		free(m->env[i].key);
		free(m->env[i].value);
	}
	free(m->env);
	for (i = 0; i < m->n_components; i++) {
		struct fg_component *c = &m->components[i];

		free(c->key);
		free(c->role);
		free(c->source);
		fg_ref_free(c->ref);
		free(c->pin_key);
		free(c->pin_sha256);
		free(c->target_key);
		free(c->target);
	}
	free(m->components);
	for (i = 0; i < m->n_targets; i++) {
		free(m->targets[i].key);
		free(m->targets[i].path);
		free(m->targets[i].folder);
	}
	free(m->targets);
	free(m->spec.method);
	free(m->spec.model);
	free(m->name);
	free(m->description);
	free(m->model_id);
	free(m->served_model_name);
	cJSON_Delete(m->json);
	free(m);
}

/* Optional string member; null counts as absent. */
static int get_str(char **out, const cJSON *obj, const char *key, const char *what,
		   struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v))
		return fg_err_set(err, FG_EFORMAT, "%s: %s: expected a string, got %s", what, key,
				  type_name(v));
	*out = strdup(v->valuestring);
	return *out ? 0 : oom(err);
}

static int get_str_array(char ***out, size_t *n_out, const cJSON *obj, const char *key,
			 const char *what, struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key), *c;
	size_t n = 0, i = 0;

	*out = NULL;
	*n_out = 0;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsArray(v))
		return fg_err_set(err, FG_EFORMAT, "%s: %s: expected an array of strings, got %s", what,
				  key, type_name(v));
	for (c = v->child; c; c = c->next) {
		if (!cJSON_IsString(c))
			return fg_err_set(err, FG_EFORMAT, "%s: %s[%zu]: expected a string, got %s", what,
					  key, n, type_name(c));
		n++;
	}
	if (!n)
		return 0;
	*out = calloc(n, sizeof(char *));
	if (!*out)
		return oom(err);
	for (c = v->child; c; c = c->next) {
		(*out)[i] = strdup(c->valuestring);
		if (!(*out)[i])
			return oom(err);
		*n_out = ++i;
	}
	return 0;
}

/* An integer member, also when written as a string of decimal digits ("8000",
 * as env-minded authors write every number; Python's int() and pydantic's lax
 * mode read it so). 0 and *out, or -1. */
static int int_or_digits(const cJSON *obj, const char *key, long long *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	unsigned long long n;

	if (!cJSON_IsString(v))
		return fg_json_int(obj, key, out);
	if (fg_parse_u64(v->valuestring, &n) || n > (unsigned long long)LLONG_MAX)
		return -1;
	*out = (long long)n;
	return 0;
}

static int by_key(const void *a, const void *b)
{
	return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* 1 and *dup when a key of obj appears twice, 0 when none does, -1 out of
 * memory. Sorted, so that an env of any size is checked: Python's json
 * keeps the last of two equal keys and cJSON the first, so a manifest
 * holding both means one thing to the serve script and another here. */
static int dup_keys(const cJSON *obj, const char **dup)
{
	const cJSON *a, **v;
	size_t n = 0, i;
	int found = 0;

	for (a = obj->child; a; a = a->next)
		n++;
	if (n < 2)
		return 0;
	v = malloc(n * sizeof(*v));
	if (!v)
		return -1;
	for (a = obj->child, i = 0; a; a = a->next)
		v[i++] = a;
	qsort(v, n, sizeof(*v), by_key);
	for (i = 1; i < n && !found; i++)
		if (!strcmp(v[i - 1]->string, v[i]->string)) {
			*dup = v[i]->string;
			found = 1;
		}
	free(v);
	return found;
}

/* The stem of a component key: X_BUCKET -> X, DRAFTER_MODEL/REPO -> DRAFTER,
 * model_id -> MODEL, SPECULATIVE_CONFIG.model -> DRAFTER. */
static char *key_stem(const char *key)
{
	if (!strcmp(key, "model_id"))
		return strdup("MODEL");
	if (!strcmp(key, "SPECULATIVE_CONFIG.model"))
		return strdup("DRAFTER");
	if (ends_with(key, "_BUCKET"))
		return strndup(key, strlen(key) - 7);
	if (ends_with(key, "_MODEL") || ends_with(key, "_REPO"))
		return strndup(key, (size_t)(strrchr(key, '_') - key));
	return strdup(key);
}

/* Suffixes that make an env key a target path: LOCAL_X_DIR, X_DIR, X_DST,
 * X_DEST, X_PATH. */
static const char *const target_suffixes[] = { "_DIR", "_DST", "_DEST", "_PATH" };

static size_t target_suffix(const char *key)
{
	size_t i, n = strlen(key);

	for (i = 0; i < sizeof(target_suffixes) / sizeof(target_suffixes[0]); i++) {
		size_t k = strlen(target_suffixes[i]);

		if (n > k && ends_with(key, target_suffixes[i]))
			return k;
	}
	return 0;
}

/* The stem of a target key: LOCAL_X_DIR -> X, X_DST -> X, X_PATH -> X,
 * DRAFTER_MODEL (a path) -> DRAFTER, else the key. */
static char *target_stem(const char *key)
{
	size_t k = target_suffix(key), skip = 0;

	if (!strcmp(key, "SPECULATIVE_CONFIG.model") || !strcmp(key, "DRAFTER_MODEL") ||
	    !strcmp(key, "DRAFTER_REPO"))
		return strdup("DRAFTER");
	if (!k)
		return strdup(key);
	if (!strncmp(key, "LOCAL_", 6) && strlen(key) > 6 + k)
		skip = 6;
	return strndup(key + skip, strlen(key) - skip - k);
}

/* A key naming one file (a keepset's JSON, X_FILE), not a folder to place a
 * component in: it belongs to the component whose folder holds it (rule 3). */
static int names_file(const char *key)
{
	return ends_with(key, "_KEEPSET") || ends_with(key, "_FILE");
}

/* LOCAL_X_DIR, X_DST and PCK04_KEEPSET are targets whatever they hold (a
 * bad one is refused where it is placed). The other suffixes, a keepset
 * and a drafter named by a path are targets when the value is an absolute or
 * ./ path: not a URL, a ':'-separated search list (LD_LIBRARY_PATH=/a:/b) or
 * a bare name that may be a repo id. */
static int is_target(const char *key, const char *val)
{
	if (!*val)
		return 0;
	if (!strcmp(key, "PCK04_KEEPSET") || ends_with(key, "_DST") ||
	    (!strncmp(key, "LOCAL_", 6) && ends_with(key + 6, "_DIR")))
		return 1;
	/* a bare relative value may be a repo id (MODEL_PATH=google/gemma-4-E4B-it,
	 * as vLLM-style scripts accept either): only an absolute or ./ path */
	if (strchr(val, ':') || (val[0] != '/' && strncmp(val, "./", 2)))
		return 0;
	return names_file(key) || !strcmp(key, "DRAFTER_MODEL") || !strcmp(key, "DRAFTER_REPO") ||
	       target_suffix(key) != 0;
}

static char *role_of(const char *key)
{
	char *stem, *p;
	size_t n;

	if (!strcmp(key, "model_id"))
		return strdup("model");
	stem = key_stem(key);
	if (!stem)
		return NULL;
	n = strlen(stem);
	if (!strcmp(stem, "WEIGHTS") || !strcmp(stem, "DRAFTER") || !strcmp(stem, "KEEPSET")) {
		/* lowercased below */
	} else if (n >= 7 && !strcmp(stem + n - 7, "KEEPSET")) {
		free(stem);
		return strdup("keepset");
	} else if (!strncmp(stem, "PATCH", 5)) {
		free(stem);
		return strdup("patches");
	}
	for (p = stem; *p; p++)
		*p = *p == '_' ? '-' : (char)tolower((unsigned char)*p);
	return stem;
}

/* Leading '_'-separated words two stems share. */
static int shared_words(const char *a, const char *b)
{
	int n = 0;

	for (;;) {
		size_t la = strcspn(a, "_"), lb = strcspn(b, "_");

		if (la != lb || la == 0 || memcmp(a, b, la))
			return n;
		n++;
		if (!a[la] || !b[lb])
			return n;
		a += la + 1;
		b += lb + 1;
	}
}

static int add_component(struct fg_manifest *m, const char *key, const char *value,
			 int want_kind, const char *what, struct fg_err *err)
{
	struct fg_component *c = &m->components[m->n_components];
	struct fg_ref *ref = NULL;
	int rc;

	/* what people write for a local folder, or a bucket without its scheme:
	 * said plainly rather than as a malformed <namespace>/<repo> */
	if (value[0] == '/' || !strncmp(value, "./", 2) || !strncmp(value, "../", 3) || value[0] == '~') {
		if (want_kind == FG_REF_BUCKET)
			return fg_err_set(err, FG_EFORMAT,
					  "%s: env.%s: \"%s\" is a local path; write file:///absolute/path "
					  "for a local file or folder",
					  what, key, value);
		return fg_err_set(err, FG_EFORMAT,
				  "%s: %s%s: \"%s\" is a local path, not a Hub model repo "
				  "(<namespace>/<repo> or hf://<namespace>/<repo>[@rev])",
				  what, strcmp(key, "model_id") ? "env." : "", key, value);
	}
	if (want_kind == FG_REF_BUCKET && !strncmp(value, "buckets/", 8))
		return fg_err_set(err, FG_EFORMAT, "%s: env.%s: \"%s\": write hf://%s for a bucket", what,
				  key, value, value);
	/* ns/name/path without a scheme in a *_BUCKET: a bucket, as the key says */
	if (want_kind == FG_REF_BUCKET && !strstr(value, "://") && strchr(value, '/') &&
	    strchr(strchr(value, '/') + 1, '/'))
		return fg_err_set(err, FG_EFORMAT, "%s: env.%s: \"%s\": write hf://buckets/%s for a bucket",
				  what, key, value, value);
	rc = fg_ref_parse(&ref, value, err);
	if (rc)
		return fg_err_wrap(err, "%s: %s%s", what, strcmp(key, "model_id") ? "env." : "", key);
	/* a *_BUCKET may also name a plain URL or a local file or folder */
	if (want_kind == FG_REF_BUCKET && (ref->kind == FG_REF_HTTPS || ref->kind == FG_REF_FILE))
		want_kind = ref->kind;
	if (ref->kind != want_kind) {
		const char *k = fg_ref_kind_name(ref->kind);

		fg_ref_free(ref);
		if (want_kind == FG_REF_BUCKET && !strstr(value, "://"))
			return fg_err_set(err, FG_EFORMAT, "%s: env.%s: \"%s\": write hf://buckets/%s for a bucket "
					  "(hf://%s for the model repo)", what, key, value, value, value);
		if (want_kind == FG_REF_BUCKET)
			return fg_err_set(err, FG_EFORMAT,
					  "%s: env.%s: expected hf://buckets/<namespace>/<bucket>[/path], "
					  "https://, http:// or file://, got a %s reference \"%s\"",
					  what, key, k, value);
		return fg_err_set(err, FG_EFORMAT,
				  "%s: %s%s: expected a Hub model repo (<namespace>/<repo> or "
				  "hf://<namespace>/<repo>[@rev]), got a %s reference \"%s\"",
				  what, strcmp(key, "model_id") ? "env." : "", key, k, value);
	}
	c->ref = ref;
	m->n_components++;
	c->key = strdup(key);
	c->role = role_of(key);
	c->source = strdup(value);
	if (!c->key || !c->role || !c->source)
		return oom(err);
	return 0;
}

/* 1 when a SPECULATIVE_CONFIG value sets nothing: blank or the JSON null. */
static int spec_unset(const char *v)
{
	size_t n;

	while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r')
		v++;
	n = strlen(v);
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\n' || v[n - 1] == '\r'))
		n--;
	return n == 0 || (n == 4 && !memcmp(v, "null", 4));
}

static int parse_spec(struct fg_manifest *m, const char *value, const char *what,
		      struct fg_err *err)
{
	cJSON *j = NULL;
	const cJSON *v;
	int rc;

	m->spec.present = 1;
	m->spec.num_speculative_tokens = -1;
	rc = fg_json_parse(&j, value, strlen(value), "env.SPECULATIVE_CONFIG", err);
	if (rc)
		return fg_err_wrap(err, "%s", what);
	if (!cJSON_IsObject(j)) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: env.SPECULATIVE_CONFIG: expected a JSON object, got %s",
				what, type_name(j));
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(j, "method");
	if (v && !cJSON_IsNull(v) && !cJSON_IsString(v)) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: env.SPECULATIVE_CONFIG.method: expected a string, got %s",
				what, type_name(v));
		goto out;
	}
	if (cJSON_IsString(v) && !(m->spec.method = strdup(v->valuestring))) {
		rc = oom(err);
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(j, "model");
	if (v && !cJSON_IsNull(v) && !cJSON_IsString(v)) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: env.SPECULATIVE_CONFIG.model: expected a string, got %s",
				what, type_name(v));
		goto out;
	}
	if (cJSON_IsString(v) && !(m->spec.model = strdup(v->valuestring))) {
		rc = oom(err);
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(j, "num_speculative_tokens");
	if (v && !cJSON_IsNull(v)) {
		long long k;

		if (int_or_digits(j, "num_speculative_tokens", &k) || k < 0 || k > 1024) {
			rc = fg_err_set(err, FG_EFORMAT,
					"%s: env.SPECULATIVE_CONFIG.num_speculative_tokens: expected an "
					"integer 0..1024",
					what);
			goto out;
		}
		m->spec.num_speculative_tokens = k;
	}
out:
	cJSON_Delete(j);
	return rc;
}

static int find_component_by_key(const struct fg_manifest *m, const char *key)
{
	size_t i;

	for (i = 0; i < m->n_components; i++)
		if (!strcmp(m->components[i].key, key))
			return (int)i;
	return -1;
}

/* 1 when the last '/'-separated segment of a component's source (the file a
 * one-file source gives) is name. A URL's segment ends at its query or
 * fragment and is compared as written: a percent-encoded one never matches,
 * which leaves the file unplaced rather than guessed. */
static int source_leaf_is(const struct fg_ref *ref, const char *name)
{
	const char *p, *end, *s;

	if (ref->kind == FG_REF_HTTPS) {
		p = strstr(ref->url, "://");
		p = p ? p + 3 : ref->url;
		end = p + strcspn(p, "?#");
		if (!memchr(p, '/', (size_t)(end - p)))
			return 0; /* a host, no path */
	} else {
		p = ref->path ? ref->path : "";
		end = p + strlen(p);
	}
	for (s = end; s > p && s[-1] != '/'; s--)
		;
	return s < end && strlen(name) == (size_t)(end - s) && !memcmp(s, name, (size_t)(end - s));
}

/* Rule 4: a file target left unplaced (PCK04_KEEPSET=/tmp/keep/pck04_keepset.json
 * outside every folder target) whose name is the last segment of exactly
 * one component's source that has no target of its own
 * (LM_HEAD_KEEPSET_BUCKET=hf://buckets/ns/b/k/pck04_keepset.json, a keepset
 * shared as one file) is that component's file: its target is the file's
 * folder, so pull --into puts the file where the serve script reads it. */
static int place_named_files(struct fg_manifest *m, struct fg_err *err)
{
	size_t t, c;

	for (t = 0; t < m->n_targets; t++) {
		struct fg_target *tg = &m->targets[t];
		const char *slash = strrchr(tg->path, '/'), *leaf;
		int found = -1, n = 0;

		if (tg->component >= 0 || !names_file(tg->key) || !slash || slash == tg->path || !slash[1])
			continue;
		leaf = slash + 1;
		for (c = 0; c < m->n_components; c++) {
			const struct fg_component *comp = &m->components[c];

			if (!comp->target && source_leaf_is(comp->ref, leaf)) {
				found = (int)c;
				n++;
			}
		}
		if (n != 1)
			continue; /* none, or two that could be it: nothing to say which */
		tg->component = found;
		tg->rule = FG_TARGET_FILE;
		m->components[found].target_key = strdup(tg->key);
		m->components[found].target = strndup(tg->path, (size_t)(slash - tg->path));
		if (!m->components[found].target_key || !m->components[found].target)
			return oom(err);
	}
	return 0;
}

/* Rule 1's pairs: component key, target key. */
static const char *const fixed[][2] = {
	{ "WEIGHTS_BUCKET", "LOCAL_MODEL_DIR" },
	{ "WEIGHTS_BUCKET", "MODEL_PATH" },
	{ "WEIGHTS_BUCKET", "MODEL_DIR" },
	{ "model_id", "LOCAL_MODEL_DIR" }, /* the model itself, when no weights bucket */
	{ "model_id", "MODEL_PATH" },
	{ "model_id", "MODEL_DIR" },
	{ "DRAFTER_BUCKET", "SPECULATIVE_CONFIG.model" },
	{ "DRAFTER_MODEL", "SPECULATIVE_CONFIG.model" },
	{ "DRAFTER_REPO", "SPECULATIVE_CONFIG.model" },
	{ "SPECULATIVE_CONFIG.model", "SPECULATIVE_CONFIG.model" },
	{ "DRAFTER_BUCKET", "DRAFTER_MODEL" },
	{ "DRAFTER_REPO", "DRAFTER_MODEL" },
	{ "SPECULATIVE_CONFIG.model", "DRAFTER_MODEL" },
	{ "DRAFTER_BUCKET", "DRAFTER_REPO" },
	{ "DRAFTER_MODEL", "DRAFTER_REPO" },
	{ "SPECULATIVE_CONFIG.model", "DRAFTER_REPO" },
	{ "LM_HEAD_KEEPSET_BUCKET", "LM_HEAD_PRUNE_DST" },
};

/* 1 when key is a target of rule 1 (MODEL_PATH, LOCAL_MODEL_DIR,
 * DRAFTER_MODEL, ...): its pair places it, or nothing does. */
static int fixed_target_key(const char *key)
{
	size_t f;

	for (f = 0; f < sizeof(fixed) / sizeof(fixed[0]); f++)
		if (!strcmp(fixed[f][1], key))
			return 1;
	return 0;
}

/* 1 when a file name has an extension: a '.' after its first character,
 * then 1 to 16 letters and digits, one a letter at least (keepset.json,
 * table.bin; not ft-v1.2 or epoch.001, folder names as often as not) */
static int has_extension(const char *name, size_t n)
{
	size_t dot = n, k;
	int letter = 0;

	while (dot > 1 && name[dot - 1] != '.')
		dot--;
	if (dot <= 1 || n - dot < 1 || n - dot > 16)
		return 0;
	for (k = dot; k < n; k++) {
		if (!isalnum((unsigned char)name[k]))
			return 0;
		letter |= isalpha((unsigned char)name[k]) != 0;
	}
	return letter;
}

/* 1 when leaf, a target path's last segment, is the one file the
 * component's source names: the source's own last segment, where the source
 * is a URL or that name has an extension (keepset.json; a bucket folder
 * ft-v1 is a folder). */
static int names_source_file(const struct fg_component *comp, const char *leaf)
{
	size_t ln = strlen(leaf);

	return ln && source_leaf_is(comp->ref, leaf) && (comp->ref->kind == FG_REF_HTTPS || has_extension(leaf, ln));
}

/* A component's target folder when target key names path (rules 1 and 2):
 * the path, except where it ends in the name of the one file the source
 * names (ROUTER_PATH=/w/r/table.bin for hf://buckets/ns/b/table.bin): that
 * path is the file, so its folder (/w/r) is the target. A *_DIR key names a
 * folder whatever its name looks like (LOCAL_MODEL_DIR=/tmp/m.baked). NULL
 * when out of memory. */
static char *own_target(const struct fg_component *comp, const char *key, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t kl = strlen(key);

	if (kl >= 4 && !strcmp(key + kl - 4, "_DIR"))
		return strdup(path);
	if (slash && slash != path && names_source_file(comp, slash + 1))
		return strndup(path, (size_t)(slash - path));
	return strdup(path);
}

/* 1 when stem's last '_'-separated words are words, all of them and more
 * before them: LM_HEAD_KEEPSET ends in KEEPSET, KV_CACHE does not end in
 * TRITON_CACHE. */
static int ends_in_words(const char *stem, const char *words)
{
	size_t n = strlen(stem), k = strlen(words);

	return k && n > k + 1 && stem[n - k - 1] == '_' && !strcmp(stem + n - k, words);
}

/* Rule 5: a folder or path target rules 1 to 4 left unplaced whose stem is
 * the last words of exactly one component's stem (KEEPSET_PATH ->
 * LM_HEAD_KEEPSET_BUCKET), that component having no target of its own.
 * The path is the component's folder; a path ending in the name of the
 * file the source names (a URL's, or one with an extension: keepset.json)
 * is that file, so its folder is the target; a path that looks like a file
 * of another name is placed by nothing (files keep their names). */
static int place_by_last_words(struct fg_manifest *m, struct fg_err *err)
{
	size_t t, c;

	for (t = 0; t < m->n_targets; t++) {
		struct fg_target *tg = &m->targets[t];
		const char *slash = strrchr(tg->path, '/'), *leaf;
		struct fg_component *comp;
		char *ts;
		int found = -1, n = 0;
		size_t ln;

		if (tg->component >= 0 || names_file(tg->key) || fixed_target_key(tg->key))
			continue;
		ts = target_stem(tg->key);
		if (!ts)
			return oom(err);
		for (c = 0; c < m->n_components; c++) {
			char *cs = key_stem(m->components[c].key);

			if (!cs) {
				free(ts);
				return oom(err);
			}
			if (ends_in_words(cs, ts)) {
				found = (int)c;
				n++;
			}
			free(cs);
		}
		free(ts);
		if (n != 1 || m->components[found].target)
			continue; /* none, two that could be it, or placed already */
		comp = &m->components[found];
		leaf = slash ? slash + 1 : tg->path;
		ln = strlen(leaf);
		if (names_source_file(comp, leaf)) {
			if (!slash || slash == tg->path)
				continue; /* a file at the root: no folder to place it in */
			comp->target = strndup(tg->path, (size_t)(slash - tg->path));
		} else if (ln && has_extension(leaf, ln)) {
			continue; /* a file of another name than the source's */
		} else {
			comp->target = strdup(tg->path);
		}
		comp->target_key = strdup(tg->key);
		if (!comp->target || !comp->target_key)
			return oom(err);
		tg->component = found;
		tg->rule = FG_TARGET_TRAILING;
	}
	return 0;
}

static int assign_targets(struct fg_manifest *m, struct fg_err *err)
{
	size_t t, f, c;
	int pass, rc;

	for (t = 0; t < m->n_targets; t++) {
		struct fg_target *tg = &m->targets[t];

		for (f = 0; f < sizeof(fixed) / sizeof(fixed[0]) && tg->component < 0; f++) {
			int ci;

			if (strcmp(fixed[f][1], tg->key))
				continue;
			ci = find_component_by_key(m, fixed[f][0]);
			if (ci >= 0) {
				tg->component = ci;
				tg->rule = FG_TARGET_FIXED;
				tg->fixed = (int)f;
			}
		}
	}
	for (t = 0; t < m->n_targets; t++) {
		struct fg_target *tg = &m->targets[t];
		char *ts;
		int best = 0;

		if (tg->component >= 0 || names_file(tg->key))
			continue;
		ts = target_stem(tg->key);
		if (!ts)
			return oom(err);
		for (c = 0; c < m->n_components; c++) {
			char *cs = key_stem(m->components[c].key);
			int w;

			if (!cs) {
				free(ts);
				return oom(err);
			}
			w = shared_words(ts, cs);
			free(cs);
			if (w > best) {
				best = w;
				tg->component = (int)c;
				tg->rule = FG_TARGET_STEM;
			}
		}
		free(ts);
	}
	for (t = 0; t < m->n_targets; t++) {
		struct fg_target *tg = &m->targets[t];
		size_t best = 0, u;

		if (tg->component >= 0)
			continue;
		for (u = 0; u < m->n_targets; u++) {
			const struct fg_target *o = &m->targets[u];
			size_t n = strlen(o->path);

			while (n > 1 && o->path[n - 1] == '/')
				n--;
			if (o->rule != FG_TARGET_FIXED && o->rule != FG_TARGET_STEM)
				continue;
			if (n > best && !strncmp(tg->path, o->path, n) && tg->path[n] == '/') {
				best = n;
				tg->component = o->component;
				tg->rule = FG_TARGET_INSIDE;
			}
		}
	}
	/* a component's own target: its fixed pair first in the table
	 * (LOCAL_MODEL_DIR before MODEL_PATH, wherever the env has them), else
	 * its first whose stem is its own (ROUTER_PATH over ROUTER_TABLE_PATH),
	 * else its first by stem */
	for (pass = 0; pass < 3; pass++) {
		for (t = 0; t < m->n_targets; t++) {
			const struct fg_target *tg = &m->targets[t];
			struct fg_component *comp;
			size_t u;
			int better = 0;

			if (tg->component < 0 || tg->rule != (pass ? FG_TARGET_STEM : FG_TARGET_FIXED))
				continue;
			comp = &m->components[tg->component];
			if (comp->target)
				continue;
			for (u = 0; !pass && u < m->n_targets; u++)
				if (m->targets[u].component == tg->component &&
				    m->targets[u].rule == FG_TARGET_FIXED && m->targets[u].fixed < tg->fixed)
					better = 1;
			if (better)
				continue;
			if (pass == 1) {
				char *ts = target_stem(tg->key), *cs = key_stem(comp->key);
				int same = ts && cs && !strcmp(ts, cs);

				free(ts);
				free(cs);
				if (!same)
					continue;
			}
			comp->target_key = strdup(tg->key);
			comp->target = own_target(comp, tg->key, tg->path);
			if (!comp->target_key || !comp->target)
				return oom(err);
		}
	}
	for (t = 0; t < m->n_targets; t++) {
		struct fg_target *tg = &m->targets[t];

		if (tg->component < 0 || (tg->rule != FG_TARGET_FIXED && tg->rule != FG_TARGET_STEM))
			continue;
		if (!(tg->folder = own_target(&m->components[tg->component], tg->key, tg->path)))
			return oom(err);
	}
	rc = place_named_files(m, err);
	return rc ? rc : place_by_last_words(m, err);
}

static int add_target(struct fg_manifest *m, const char *key, const char *path, struct fg_err *err)
{
	struct fg_target *t = &m->targets[m->n_targets++];

	t->component = -1;
	t->key = strdup(key);
	t->path = strdup(path);
	return t->key && t->path ? 0 : oom(err);
}

static int attach_pins(struct fg_manifest *m, const char *what, struct fg_err *err)
{
	size_t i, c;

	for (i = 0; i < m->n_env; i++) {
		const char *key = m->env[i].key, *val = m->env[i].value;
		char *stem;
		int best = -1;

		if (!ends_with(key, "_SHA256") || !*val)
			continue;
		stem = strndup(key, strlen(key) - 7);
		if (!stem)
			return oom(err);
		for (c = 0; c < m->n_components; c++) {
			char *cs = key_stem(m->components[c].key);
			int match;

			if (!cs) {
				free(stem);
				return oom(err);
			}
			/* DRAFTER_SHA256 (the stem) or DRAFTER_BUCKET_SHA256 (the whole key) */
			match = !strcmp(cs, stem) || !strcmp(m->components[c].key, stem);
			free(cs);
			/* a bucket wins over a model repo of the same stem */
			if (match && (best < 0 || (m->components[c].ref->kind == FG_REF_BUCKET &&
						   m->components[best].ref->kind != FG_REF_BUCKET)))
				best = (int)c;
		}
		free(stem);
		if (best < 0)
			continue; /* an unrelated *_SHA256 setting: kept in env only */
		{
			struct fg_component *comp = &m->components[best];
			char hex[FG_SHA256_HEX_LEN + 1];
			size_t k;

			if (strlen(val) != FG_SHA256_HEX_LEN)
				return fg_err_set(err, FG_EFORMAT,
						  "%s: env.%s: expected 64 hex digits (a sha256), got %zu "
						  "characters",
						  what, key, strlen(val));
			for (k = 0; k < FG_SHA256_HEX_LEN; k++)
				hex[k] = (char)tolower((unsigned char)val[k]);
			hex[k] = '\0';
			if (!fg_sha256_hex_valid(hex))
				return fg_err_set(err, FG_EFORMAT,
						  "%s: env.%s: expected 64 hex digits (a sha256)", what, key);
			if (comp->pin_key)
				return fg_err_set(err, FG_EFORMAT, "%s: env.%s: %s is already pinned by %s",
						  what, key, comp->key, comp->pin_key);
			comp->pin_key = strdup(key);
			comp->pin_sha256 = strdup(hex);
			if (!comp->pin_key || !comp->pin_sha256)
				return oom(err);
		}
	}
	return 0;
}

static int has_drafter(const struct fg_manifest *m)
{
	size_t i;

	for (i = 0; i < m->n_components; i++)
		if (!strcmp(m->components[i].role, "drafter"))
			return 1;
	return 0;
}

static int parse_env(struct fg_manifest *m, const cJSON *env, const char *what, struct fg_err *err)
{
	const cJSON *c;
	const char *dup = NULL;
	size_t n = 0, i = 0;
	int rc = 0;

	if (!cJSON_IsObject(env))
		return fg_err_set(err, FG_EFORMAT, "%s: env: expected an object of strings, got %s", what,
				  type_name(env));
	rc = dup_keys(env, &dup);
	if (rc < 0)
		return oom(err);
	if (rc)
		return fg_err_set(err, FG_EFORMAT, "%s: env.%s: key appears twice", what, dup);
	for (c = env->child; c; c = c->next) {
		if (!cJSON_IsString(c) && !strcmp(c->string, "SPECULATIVE_CONFIG"))
			return fg_err_set(err, FG_EFORMAT,
					  "%s: env.SPECULATIVE_CONFIG: expected a string holding JSON (an "
					  "environment variable, as vLLM reads it), got %s",
					  what, type_name(c));
		if (!cJSON_IsString(c))
			return fg_err_set(err, FG_EFORMAT, "%s: env.%s: expected a string, got %s", what,
					  c->string, type_name(c));
		if (!*c->string)
			return fg_err_set(err, FG_EFORMAT, "%s: env: empty key", what);
		n++;
	}
	m->env = calloc(n ? n : 1, sizeof(*m->env));
	m->components = calloc(n + 2, sizeof(*m->components));
	m->targets = calloc(n + 1, sizeof(*m->targets));
	if (!m->env || !m->components || !m->targets)
		return oom(err);
	for (c = env->child; c; c = c->next, i++) {
		m->env[i].key = strdup(c->string);
		m->env[i].value = strdup(c->valuestring);
		m->n_env = i + 1;
		if (!m->env[i].key || !m->env[i].value)
			return oom(err);
	}
	if (m->model_id && *m->model_id) {
		rc = add_component(m, "model_id", m->model_id, FG_REF_MODEL, what, err);
		if (rc)
			return rc;
	}
	for (i = 0; i < m->n_env && !rc; i++) {
		const char *key = m->env[i].key, *val = m->env[i].value;

		if (ends_with(key, "_BUCKET")) {
			if (*val)
				rc = add_component(m, key, val, FG_REF_BUCKET, what, err);
		} else if (!strcmp(key, "DRAFTER_MODEL") || !strcmp(key, "DRAFTER_REPO")) {
			/* a local path here names a target, not a repo */
			if (*val && val[0] != '/' && val[0] != '.')
				rc = add_component(m, key, val, FG_REF_MODEL, what, err);
		} else if (!strcmp(key, "SPECULATIVE_CONFIG")) {
			/* empty (as a shell's SPECULATIVE_CONFIG=) or JSON null:
			 * no speculative decoding, like an empty *_BUCKET */
			if (!spec_unset(val))
				rc = parse_spec(m, val, what, err);
		}
		if (!rc && is_target(key, val))
			rc = add_target(m, key, val, err);
	}
	if (rc)
		return rc;
	if (m->spec.model && *m->spec.model) {
		const char *sm = m->spec.model;

		if (sm[0] == '/') {
			rc = add_target(m, "SPECULATIVE_CONFIG.model", sm, err);
		} else if (!has_drafter(m)) {
			struct fg_ref *r = NULL;
			struct fg_err e2;

			if (!strncmp(sm, "hf://", 5)) {
				rc = add_component(m, "SPECULATIVE_CONFIG.model", sm, FG_REF_MODEL, what, err);
			} else if (fg_ref_parse(&r, sm, &e2) == 0 && r->kind == FG_REF_MODEL) {
				fg_ref_free(r);
				rc = add_component(m, "SPECULATIVE_CONFIG.model", sm, FG_REF_MODEL, what, err);
			} else {
				fg_ref_free(r); /* a relative path: neither a repo nor a target we place */
			}
		}
	}
	if (!rc)
		rc = attach_pins(m, what, err);
	if (!rc)
		rc = assign_targets(m, err);
	return rc;
}

/* ---- dependencies (PEP 508, the parts a lock needs) ---- */

static int is_hex_oid(const char *s, size_t n)
{
	size_t i;

	if (n != 40 && n != 64)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
		      (s[i] >= 'A' && s[i] <= 'F')))
			return 0;
	return 1;
}

int fg_dependency_git_parse(const char *url, char commit[FG_GIT_OID_MAX + 1], struct fg_buf *repo)
{
	const char *s, *path, *at;
	size_t i, n;

	commit[0] = '\0';
	if (strncmp(url, "git+", 4) || !(s = strstr(url + 4, "://")))
		return 0;
	path = strchr(s + 3, '/'); /* the revision is after the last '@' of the path */
	at = path ? strrchr(path, '@') : NULL;
	n = at ? strlen(at + 1) : 0;
	if (at && is_hex_oid(at + 1, n)) {
		for (i = 0; i < n; i++)
			commit[i] = (char)(at[1 + i] >= 'A' && at[1 + i] <= 'F' ? at[1 + i] - 'A' + 'a' : at[1 + i]);
		commit[n] = '\0';
	}
	if (repo && fg_buf_append(repo, url + 4, at ? (size_t)(at - url - 4) : strlen(url + 4), NULL))
		return 0;
	return 1;
}


const char *fg_dep_kind_name(int kind)
{
	switch (kind) {
	case FG_DEP_URL: return "url";
	case FG_DEP_PIN: return "pin";
	case FG_DEP_UNPINNED: return "unpinned";
	default: return "?";
	}
}

void fg_dependency_release(struct fg_dependency *d)
{
	free(d->name);
	free(d->version);
	free(d->url);
	free(d->sha256);
	free(d->commit);
	memset(d, 0, sizeof(*d));
}

static int is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
	       c == '_' || c == '.';
}

static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* d->url and d->sha256 from a URL with an optional #sha256=<hex> fragment. */
static int dep_url(struct fg_dependency *d, const char *spec, const char *u, struct fg_err *err)
{
	const char *hash = strchr(u, '#'), *end = u + strcspn(u, " \t;");

	if (hash && hash > end)
		hash = NULL;
	if (!strstr(u, "://") || (hash ? hash : end) == strstr(u, "://") + 3)
		return fg_err_set(err, FG_EFORMAT, "\"%s\": not a URL", spec);
	d->kind = FG_DEP_URL;
	if (!(d->url = strndup(u, (size_t)((hash ? hash : end) - u))))
		return oom(err);
	if (hash && !strncmp(hash, "#sha256=", 8)) {
		size_t i;

		if ((size_t)(end - hash) != 8 + FG_SHA256_HEX_LEN)
			return fg_err_set(err, FG_EFORMAT, "\"%s\": #sha256= needs 64 hex digits", spec);
		if (!(d->sha256 = strndup(hash + 8, FG_SHA256_HEX_LEN)))
			return oom(err);
		for (i = 0; i < FG_SHA256_HEX_LEN; i++) {
			char c = d->sha256[i];

			if (c >= 'A' && c <= 'F')
				d->sha256[i] = (char)(c - 'A' + 'a');
			else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
				return fg_err_set(err, FG_EFORMAT, "\"%s\": #sha256= needs 64 hex digits", spec);
		}
	}
	return 0;
}

int fg_dependency_parse(struct fg_dependency *d, const char *spec, struct fg_err *err)
{
	const char *p = skip_ws(spec), *n0 = p, *v, *ve;
	int rc;

	memset(d, 0, sizeof(*d));
	if (*p == '-') {
		rc = fg_err_set(err, FG_EFORMAT,
				"\"%s\": a pip option, not a requirement (name[==version] or a URL)", spec);
		goto out;
	}
	/* a bare URL: a scheme, then "://" before any blank */
	if (strstr(p, "://") && strstr(p, "://") < p + strcspn(p, " \t") && is_name_char(*p) &&
	    strcspn(p, "@") > strcspn(p, ":")) {
		rc = dep_url(d, spec, p, err); /* a bare URL */
		goto out;
	}
	while (is_name_char(*p))
		p++;
	if (p == n0 || !((*n0 >= 'a' && *n0 <= 'z') || (*n0 >= 'A' && *n0 <= 'Z') || (*n0 >= '0' && *n0 <= '9'))) {
		rc = fg_err_set(err, FG_EFORMAT, "\"%s\": not a requirement (name[==version] or a URL)", spec);
		goto out;
	}
	if (!(d->name = strndup(n0, (size_t)(p - n0)))) {
		rc = oom(err);
		goto out;
	}
	p = skip_ws(p);
	if (*p == '[') { /* extras */
		p = strchr(p, ']');
		if (!p) {
			rc = fg_err_set(err, FG_EFORMAT, "\"%s\": unclosed [extras]", spec);
			goto out;
		}
		p = skip_ws(p + 1);
	}
	if (*p == '@') {
		rc = dep_url(d, spec, skip_ws(p + 1), err);
		goto out;
	}
	d->kind = FG_DEP_UNPINNED;
	rc = 0;
	/* exactly one clause, "==V" or "===V", V without a wildcard */
	if (p[0] == '=' && p[1] == '=') {
		v = skip_ws(p + (p[2] == '=' ? 3 : 2));
		ve = v;
		while (*ve && *ve != ' ' && *ve != '\t' && *ve != ';' && *ve != ',')
			ve++;
		if (ve > v && !memchr(v, '*', (size_t)(ve - v)) && *skip_ws(ve) != ',') {
			d->kind = FG_DEP_PIN;
			if (!(d->version = strndup(v, (size_t)(ve - v))))
				rc = oom(err);
		}
	}
out:
	if (!rc && d->kind == FG_DEP_URL && d->url) {
		char commit[FG_GIT_OID_MAX + 1];

		/* a git URL pins its content only by a full commit id */
		if (fg_dependency_git_parse(d->url, commit, NULL)) {
			if (!commit[0])
				d->kind = FG_DEP_UNPINNED;
			else if (!(d->commit = strdup(commit)))
				rc = oom(err);
		}
	}
	if (rc)
		fg_dependency_release(d);
	return rc;
}

/* JSON exchanged between systems must be UTF-8 (RFC 8259 8.1) and Python's
 * json.load(open(path)), how a serve script reads the manifest, fails on
 * anything else; cJSON takes any bytes, and they would go on into
 * buckets.lock as JSON no other reader accepts. */
static int utf8_check(const char *text, size_t len, const char *what, struct fg_err *err)
{
	size_t i = 0, line = 1;

	while (i < len) {
		size_t l = fg_utf8_len((const unsigned char *)text + i, len - i, NULL);

		if (!l)
			return fg_err_set(err, FG_EFORMAT,
					  "%s: not UTF-8 text (line %zu, byte %zu: 0x%02x); JSON must be UTF-8", what,
					  line, i, (unsigned)(unsigned char)text[i]);
		if (text[i] == '\n')
			line++;
		i += l;
	}
	return 0;
}

int fg_manifest_parse(struct fg_manifest **out, const char *text, size_t len, const char *what,
		      struct fg_err *err)
{
	struct fg_manifest *m;
	const cJSON *v;
	const char *dup = NULL;
	uint8_t d[FG_SHA256_LEN];
	int rc;

	*out = NULL;
	if (len > FG_MANIFEST_MAX_BYTES)
		return fg_err_set(err, FG_EFORMAT, "%s: larger than %zu MiB, not a manifest", what,
				  FG_MANIFEST_MAX_BYTES >> 20);
	m = calloc(1, sizeof(*m));
	if (!m)
		return oom(err);
	m->port = -1;
	m->spec.num_speculative_tokens = -1;
	rc = fg_sha256_mem(text, len, d, err);
	if (rc)
		goto fail;
	fg_hex_encode(d, sizeof(d), m->sha256);
	rc = utf8_check(text, len, what, err);
	if (!rc)
		rc = fg_json_parse(&m->json, text, len, what, err);
	if (rc)
		goto fail;
	if (!cJSON_IsObject(m->json)) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: expected a JSON object at the top, got %s", what,
				type_name(m->json));
		goto fail;
	}
	rc = dup_keys(m->json, &dup);
	if (rc) {
		rc = rc < 0 ? oom(err) : fg_err_set(err, FG_EFORMAT, "%s: %s: key appears twice", what, dup);
		goto fail;
	}
	rc = get_str(&m->name, m->json, "name", what, err);
	if (!rc)
		rc = get_str(&m->description, m->json, "description", what, err);
	if (!rc)
		rc = get_str(&m->model_id, m->json, "model_id", what, err);
	if (!rc)
		rc = get_str(&m->served_model_name, m->json, "served_model_name", what, err);
	if (!rc)
		rc = get_str_array(&m->dependencies, &m->n_dependencies, m->json, "dependencies", what,
				   err);
	if (!rc)
		rc = get_str_array(&m->serve, &m->n_serve, m->json, "serve", what, err);
	if (!rc && m->n_dependencies && !(m->deps = calloc(m->n_dependencies, sizeof(*m->deps))))
		rc = oom(err);
	for (size_t i = 0; !rc && i < m->n_dependencies; i++)
		if ((rc = fg_dependency_parse(&m->deps[i], m->dependencies[i], err)))
			fg_err_wrap(err, "%s: dependencies[%zu]", what, i);
	if (rc)
		goto fail;
	v = cJSON_GetObjectItemCaseSensitive(m->json, "port");
	if (v && !cJSON_IsNull(v)) {
		long long p;

		if (int_or_digits(m->json, "port", &p) || p < 0 || p > 65535) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: port: expected an integer 0..65535, got %s",
					what, cJSON_IsNumber(v) ? "a number out of range" : type_name(v));
			goto fail;
		}
		m->port = p;
	}
	v = cJSON_GetObjectItemCaseSensitive(m->json, "env");
	if (v && !cJSON_IsNull(v)) {
		rc = parse_env(m, v, what, err);
	} else {
		static const cJSON empty = { 0 };
		cJSON obj = empty;

		obj.type = cJSON_Object;
		rc = parse_env(m, &obj, what, err);
	}
	if (rc)
		goto fail;
	*out = m;
	return 0;
fail:
	fg_manifest_free(m);
	return rc;
}

int fg_manifest_load(struct fg_manifest **out, const char *path, struct fg_err *err)
{
	struct fg_buf b = FG_BUF_INIT;
	struct stat sb;
	int rc;

	*out = NULL;
	/* refuse a huge regular file before reading any of it */
	if (!stat(path, &sb) && S_ISREG(sb.st_mode) && (size_t)sb.st_size > FG_MANIFEST_MAX_BYTES)
		return fg_err_set(err, FG_EFORMAT, "%s: larger than %zu MiB, not a manifest", path,
				  FG_MANIFEST_MAX_BYTES >> 20);
	rc = fg_file_read(path, FG_MANIFEST_MAX_BYTES, &b, err);
	if (rc == FG_EINVAL)
		rc = fg_err_set(err, FG_EFORMAT, "%s: larger than %zu MiB, not a manifest", path,
				FG_MANIFEST_MAX_BYTES >> 20);
	if (!rc)
		rc = fg_manifest_parse(out, b.data ? b.data : "", b.len, path, err);
	fg_buf_release(&b);
	return rc;
}

const char *fg_manifest_env_get(const struct fg_manifest *m, const char *key)
{
	size_t i;

	for (i = 0; i < m->n_env; i++)
		if (!strcmp(m->env[i].key, key))
			return m->env[i].value;
	return NULL;
}

const struct fg_component *fg_manifest_component(const struct fg_manifest *m, const char *key)
{
	int i = find_component_by_key(m, key);

	return i >= 0 ? &m->components[i] : NULL;
}
