/* provenance.h - in-toto Statement v1 carrying a SLSA provenance v1 predicate,
 * for anything fgpack makes (baked checkpoints, keepsets, bundles).
 *
 *   {"_type": "https://in-toto.io/Statement/v1",
 *    "subject": [{"name", "digest": {"sha256"}}],            what was made
 *    "predicateType": "https://slsa.dev/provenance/v1",
 *    "predicate": {
 *      "buildDefinition": {"buildType", "externalParameters",  what was asked
 *                          "internalParameters",
 *                          "resolvedDependencies": [{"name", "uri"?, "digest": {"sha256"},
 *                                                    "annotations"?}]},
 *      "runDetails": {"builder": {"id", "version": {"fgpack", "build"}},
 *                     "metadata": {"invocationId", "startedOn", "finishedOn"},
 *                     "byproducts": [...]}}}
 *
 * The caller lists subjects and dependencies; times are RFC 3339 UTC. The text
 * is canonical JSON (fg_json_write), so equal inputs give equal bytes. */
#ifndef FG_PROVENANCE_H
#define FG_PROVENANCE_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "err.h"
#include "sha256.h"

#define FG_PROV_STATEMENT_TYPE "https://in-toto.io/Statement/v1"
#define FG_PROV_SLSA_TYPE "https://slsa.dev/provenance/v1"
#define FG_PROV_BUILDER_ID "https://github.com/fgpack/fgpack/builder/local"

/* A subject or a resolved dependency: a name (e.g. a relative path), an
 * optional uri (NULL to leave out) and a sha256 (64 lowercase hex digits). */
struct fg_prov_item {
	const char *name;
	const char *uri;
	const char *sha256;
};

struct fg_prov {
	const char *build_type;          /* URI naming what kind of build this was */
	const struct fg_prov_item *subjects;
	size_t n_subjects;
	const struct fg_prov_item *deps; /* resolvedDependencies */
	size_t n_deps;
	const cJSON *external_params;    /* borrowed object; NULL gives {} */
	const cJSON *internal_params;    /* borrowed object; NULL leaves it out */
	const cJSON *byproducts;         /* borrowed array; NULL leaves it out */
	const char *invocation_id;       /* NULL leaves it out */
	time_t started_on, finished_on;  /* 0 leaves each out */
	/* NULL, or n_deps borrowed objects (each may be NULL): dependency i's
	 * "annotations" (ResourceDescriptor), e.g. how its digest was obtained */
	const cJSON *const *dep_annotations;
};

/* Builds the statement as a cJSON tree owned by the caller. Refuses items
 * without a name or with a malformed sha256. */
int fg_prov_statement(cJSON **out, const struct fg_prov *p, struct fg_err *err);

/* The statement's canonical text (pretty, final newline) appended to out. */
int fg_prov_statement_text(struct fg_buf *out, const struct fg_prov *p, struct fg_err *err);

/* "2026-11-29T21:00:00Z" for t into buf (at least 21 bytes). */
void fg_prov_rfc3339(char buf[32], time_t t);

#endif
