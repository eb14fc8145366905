/* rewrite_test.h - rewritten copies of a checkpoint folder for the tests
 * (test_engine_moe, test_bake_variants): every float tensor as F32, one
 * tensor dropped or made I32, 3-D experts split per expert (vLLM's layout),
 * or every INT4 linear written back as its F32 weights q * scale (the
 * dequantized twin the engine's INT4 logits are compared with); config.json
 * with one key set or removed. */
#ifndef FG_REWRITE_TEST_H
#define FG_REWRITE_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bf16.h"
#include "fsutil.h"
#include "json.h"
#include "safetensors.h"

enum { AS_IS, TO_F32, DROP, TO_I32, SPLIT, DEQUANT };

static int is_float(int dtype)
{
	return dtype == FG_ST_BF16 || dtype == FG_ST_F16 || dtype == FG_ST_F32;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

/* count elements of t from element `from`, written as dtype (F32 or I32; the
 * values read through fg_st_f32_at), or as they are when dtype is t's. */
static int write_as(struct fg_st_writer *w, const struct fg_st_tensor *t, uint64_t from, uint64_t count, int dtype,
		    struct fg_err *err)
{
	uint64_t k;
	int rc = 0;

	if (dtype == t->dtype)
		return fg_st_writer_write(w, (const uint8_t *)t->data + fg_st_dtype_size(t->dtype) * from,
					  (size_t)(fg_st_dtype_size(t->dtype) * count), err);
	for (k = from; k < from + count && !rc; k++) {
		double v = fg_st_f32_at(t->data, t->dtype, k);
		float vf = (float)v;
		int32_t vi = (int32_t)lrint(v);

		rc = dtype == FG_ST_F32 ? fg_st_writer_write(w, &vf, 4, err) : fg_st_writer_write(w, &vi, 4, err);
	}
	return rc;
}

/* An INT4 linear (compressed-tensors pack-quantized, symmetric) written as
 * its F32 weights w = q * scale, row by row. */
static int dequant(struct fg_st_writer *w, const struct fg_st_set *set, const struct fg_st_tensor *pk,
		   struct fg_err *err)
{
	char nm[300];
	const struct fg_st_tensor *sc;
	uint64_t rows = pk->shape[0], cols = pk->shape[1] * 8, r, c, group;
	float *row;
	int rc = 0;

	snprintf(nm, sizeof(nm), "%.*s_scale", (int)(strlen(pk->name) - strlen("_packed")), pk->name);
	sc = fg_st_find(set, nm);
	if (!sc || sc->ndim != 2 || sc->dtype != FG_ST_BF16)
		return fg_err_set(err, FG_EFORMAT, "dequant: %s missing or not BF16 2-D", nm);
	group = cols / sc->shape[1];
	row = malloc(sizeof(float) * (size_t)cols);
	for (r = 0; r < rows && !rc; r++) {
		for (c = 0; c < cols; c++) {
			uint32_t word = fg_le32((const uint8_t *)pk->data + 4 * (r * (cols / 8) + c / 8));
			int q = (int)((word >> (4 * (c % 8))) & 15) - 8;
			float s = fg_bf16_to_f32(fg_le16((const uint8_t *)sc->data + 2 * (r * sc->shape[1] + c / group)));

			row[c] = (float)q * s;
		}
		rc = fg_st_writer_write(w, row, sizeof(float) * (size_t)cols, err);
	}
	free(row);
	return rc;
}

/* src's model copied to dir: config.json (with key set to value when key is
 * not NULL; value NULL removes it) and its tensors (one file or shards)
 * rewritten into dir/model.safetensors by mode: TO_F32 every float tensor as F32 (exact), DROP leaves out tensor `name`,
 * TO_I32 writes tensor `name` as I32, SPLIT writes each layer's 3-D experts
 * as per-expert 2-D "experts.<e>.{gate,up,down}_proj.weight" (leaving out
 * `name` among them when not NULL), DEQUANT writes every INT4 linear as its
 * F32 weights "<m>.weight". */
static int rewrite(const char *src, const char *dir, int mode, const char *name, const char *key, cJSON *value)
{
	struct fg_st_set *set = NULL;
	struct fg_st_writer *w = NULL;
	struct fg_st_desc *d;
	struct fg_err err = { 0 };
	char p[1024], **names;
	size_t i, n, nd = 0, nn = 0;
	int rc;

	if (fg_st_open(&set, src, &err)) { /* one file or a sharded set */
		printf("# %s\n", err.msg);
		return -1;
	}
	n = fg_st_count(set);
	d = calloc(n * 64, sizeof(*d));
	names = calloc(n * 64, sizeof(*names));
	for (i = 0; i < n; i++) {
		const struct fg_st_tensor *t = fg_st_at(set, i);
		int split = mode == SPLIT && t->ndim == 3, e, E = split ? (int)t->shape[0] : 0, gu;

		if (mode == DROP && !strcmp(t->name, name))
			continue;
		if (mode == DEQUANT && (ends_with(t->name, ".weight_scale") || ends_with(t->name, ".weight_shape")))
			continue;
		if (mode == DEQUANT && ends_with(t->name, ".weight_packed")) {
			size_t stem = strlen(t->name) - strlen("_packed");
			char *nm = malloc(stem + 1);

			memcpy(nm, t->name, stem);
			nm[stem] = 0;
			names[nn++] = nm;
			d[nd].name = nm;
			d[nd].dtype = FG_ST_F32;
			d[nd].ndim = 2;
			d[nd].shape[0] = t->shape[0];
			d[nd].shape[1] = t->shape[1] * 8;
			nd++;
			continue;
		}
		if (!split) {
			d[nd].name = t->name;
			d[nd].dtype = (mode == TO_F32 && is_float(t->dtype)) || (mode == TO_I32 && !strcmp(t->name, name))
					      ? (mode == TO_F32 ? FG_ST_F32 : FG_ST_I32)
					      : t->dtype;
			d[nd].ndim = t->ndim;
			memcpy(d[nd].shape, t->shape, sizeof(d[nd].shape));
			nd++;
			continue;
		}
		gu = ends_with(t->name, "experts.gate_up_proj");
		for (e = 0; e < E; e++) {
			int k;

			for (k = 0; k < (gu ? 2 : 1); k++) {
				size_t stem = strlen(t->name) - strlen(gu ? "gate_up_proj" : "down_proj");
				char *nm = malloc(stem + 64);

				snprintf(nm, stem + 64, "%.*s%d.%s.weight", (int)stem, t->name, e,
					 gu ? (k ? "up_proj" : "gate_proj") : "down_proj");
				names[nn++] = nm;
				if (name && !strcmp(nm, name))
					continue;
				d[nd].name = nm;
				d[nd].dtype = t->dtype;
				d[nd].ndim = 2;
				d[nd].shape[0] = gu ? t->shape[1] / 2 : t->shape[1];
				d[nd].shape[1] = t->shape[2];
				nd++;
			}
		}
	}
	rc = fg_st_writer_new(&w, dir, d, nd, 0, NULL, &err);
	if (!rc)
		fg_st_writer_no_sync(w);
	for (i = 0; i < n && !rc; i++) {
		const struct fg_st_tensor *t = fg_st_at(set, i);
		int split = mode == SPLIT && t->ndim == 3, e, k, gu;
		uint64_t per;

		if (mode == DROP && !strcmp(t->name, name))
			continue;
		if (mode == DEQUANT && (ends_with(t->name, ".weight_scale") || ends_with(t->name, ".weight_shape")))
			continue;
		if (mode == DEQUANT && ends_with(t->name, ".weight_packed")) {
			rc = dequant(w, set, t, &err);
			continue;
		}
		if (!split) {
			int dt = (mode == TO_F32 && is_float(t->dtype)) || (mode == TO_I32 && !strcmp(t->name, name))
					 ? (mode == TO_F32 ? FG_ST_F32 : FG_ST_I32)
					 : t->dtype;

			rc = write_as(w, t, 0, t->nelem, dt, &err);
			continue;
		}
		gu = ends_with(t->name, "experts.gate_up_proj");
		per = t->shape[1] * t->shape[2] / (gu ? 2 : 1);
		for (e = 0; e < (int)t->shape[0] && !rc; e++)
			for (k = 0; k < (gu ? 2 : 1) && !rc; k++) {
				char nm[300];
				size_t stem = strlen(t->name) - strlen(gu ? "gate_up_proj" : "down_proj");

				snprintf(nm, sizeof(nm), "%.*s%d.%s.weight", (int)stem, t->name, e,
					 gu ? (k ? "up_proj" : "gate_proj") : "down_proj");
				if (name && !strcmp(nm, name))
					continue;
				rc = write_as(w, t, ((uint64_t)e * (gu ? 2 : 1) + (uint64_t)k) * per, per, t->dtype, &err);
			}
	}
	if (!rc)
		rc = fg_st_writer_finish(w, &err);
	if (rc)
		printf("# rewrite %s: %s\n", src, err.msg);
	fg_st_writer_free(w);
	fg_st_free(set);
	free(d);
	for (i = 0; i < nn; i++)
		free(names[i]);
	free(names);
	{
		struct fg_buf b = FG_BUF_INIT;
		cJSON *cfg = NULL;
		char *txt = NULL;

		snprintf(p, sizeof(p), "%s/config.json", src);
		if (!rc && (fg_file_read(p, 1 << 20, &b, &err) || fg_json_parse(&cfg, b.data, b.len, p, &err)))
			rc = -1;
		if (!rc && key) {
			cJSON_DeleteItemFromObjectCaseSensitive(cfg, key);
			if (value)
				cJSON_AddItemToObject(cfg, key, value);
			value = NULL;
		}
		if (!rc)
			txt = cJSON_Print(cfg);
		snprintf(p, sizeof(p), "%s/config.json", dir);
		if (!rc && (!txt || fg_file_write_atomic(p, txt, strlen(txt), 0644, &err)))
			rc = -1;
		free(txt);
		cJSON_Delete(cfg);
		fg_buf_release(&b);
	}
	cJSON_Delete(value);
	return rc;
}

#endif
