/* engine_test.h - helpers shared by the engine tests (CPU and CUDA): oracle id
 * arrays and a token collector for fg_engine_generate. */
#ifndef FG_ENGINE_TEST_H
#define FG_ENGINE_TEST_H

#include <stdint.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

/* The ids of a JSON array of numbers, in a new array (one spare slot); *n gets the count. */
static int32_t *ids_of(const cJSON *arr, int *n)
{
	int32_t *ids = malloc(sizeof(int32_t) * (size_t)(cJSON_GetArraySize(arr) + 1));
	const cJSON *it;
	int i = 0;

	cJSON_ArrayForEach(it, arr) ids[i++] = (int32_t)it->valuedouble;
	*n = i;
	return ids;
}

/* Collects up to 64 generated ids. */
struct gen {
	int32_t ids[64];
	int n;
};

static int on_token(void *user, int32_t tok, const float *logits, int n_vocab)
{
	struct gen *g = user;

	(void)logits;
	(void)n_vocab;
	g->ids[g->n++] = tok;
	return g->n >= 64;
}

#endif
