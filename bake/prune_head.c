/* prune_head.c - a checkpoint with its LM head cut to a keepset's rows (see
 * prune_head.h for the layout and why config.json carries the keepset). */
#include "prune_head.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bake/int4.h"
#include "bake/keepset.h"
#include "buf.h"
#include "engine/model.h"
#include "fsutil.h"
#include "json.h"
#include "provenance.h"
#include "safetensors.h"
#include "sha256.h"
#include "store.h"
#include "workq.h"

#define MAX_FILES 4096

struct item {
	char *name;
	char sha[FG_SHA256_HEX_LEN + 1];
	int by_store; /* an input named by the store blob it is a hard link to */
	int by_seen;  /* or by its seen record (lib/store.h) */
};

struct items {
	struct item *v;
	size_t n;
};

static int add_item(struct items *it, const char *name, const char *sha, struct fg_err *err)
{
	struct item *p = realloc(it->v, (it->n + 1) * sizeof(*p));

	if (!p)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	it->v = p;
	p[it->n].name = strdup(name);
	if (!p[it->n].name)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	memcpy(p[it->n].sha, sha, FG_SHA256_HEX_LEN + 1);
	p[it->n].by_store = 0;
	p[it->n].by_seen = 0;
	it->n++;
	return 0;
}

static void free_items(struct items *it)
{
	size_t i;

	for (i = 0; i < it->n; i++)
		free(it->v[i].name);
	free(it->v);
}

static int hash_path(const char *path, char sha[FG_SHA256_HEX_LEN + 1], struct fg_err *err)
{
	uint8_t d[FG_SHA256_LEN];
	unsigned long long size;
	int rc = fg_sha256_file(path, d, &size, err);

	if (!rc)
		fg_hex_encode(d, sizeof(d), sha);
	return rc;
}

/* The inputs' digests, in order, into ins: config.json, the tensor files,
 * the keepset (fg_store_digest_files: a hard link to a store blob whose stamp
 * holds is named by the blob, the rest hashed on every core). */
static int input_digests(struct fg_store *store, const char *config, const struct fg_st_set *set,
			 const char *keepset, struct items *ins, struct fg_prune_report *rep,
			 struct fg_err *err)
{
	size_t nf = fg_st_nfiles(set), n = nf + 2, i;
	const char **path = calloc(n, sizeof(*path));
	struct fg_store_digest *d = calloc(n, sizeof(*d));
	int rc = !path || !d ? fg_err_set(err, FG_ENOMEM, "out of memory") : 0;

	for (i = 0; !rc && i < n; i++)
		path[i] = i == 0 ? config : i <= nf ? fg_st_file(set, i - 1) : keepset;
	if (!rc)
		rc = fg_store_digest_files_ex(store, path, n, fg_workq_cpus(8), 0, FG_STORE_DIGEST_SEEN,
					      d, err);
	for (i = 0; !rc && i < n; i++) {
		const char *slash = strrchr(path[i], '/');

		/* A shard is named by its path under the model folder (config's
		 * folder, config being MODEL_DIR/config.json): an index may put
		 * shards in a sub-folder ("w/a.safetensors"), and the base name alone
		 * would name a file the folder does not have at the top. */
		if (i >= 1 && i <= nf && strlen(config) >= 12 &&
		    !strncmp(path[i], config, strlen(config) - 11) && path[i][strlen(config) - 11] != '\0')
			slash = path[i] + strlen(config) - 12; /* the '/' ending the folder */
		if (d[i].rc) {
			rc = d[i].rc;
			if (err)
				*err = d[i].err;
			break;
		}
		/* names: config.json, each tensor file's, the keepset as given */
		rc = add_item(ins, i == 0 ? "config.json" : i <= nf && slash ? slash + 1 : path[i], d[i].hex,
			      err);
		if (!rc) {
			ins->v[ins->n - 1].by_store = d[i].by_store;
			ins->v[ins->n - 1].by_seen = d[i].by_seen;
		}
		if (!rc && d[i].by_store && i >= 1 && i <= nf) {
			rep->n_by_store++;
			rep->bytes_by_store += d[i].size;
		}
		if (!rc && d[i].by_seen && i >= 1 && i <= nf) {
			rep->n_by_seen++;
			rep->bytes_by_seen += d[i].size;
		}
	}
	free(path);
	free(d);
	return rc;
}

/* Writes dir/name and records it among the outputs. */
static int emit(const char *dir, const char *name, const void *data, size_t len, struct items *outs,
		uint64_t *bytes, struct fg_err *err)
{
	struct fg_buf p = FG_BUF_INIT;
	uint8_t d[FG_SHA256_LEN];
	char hex[FG_SHA256_HEX_LEN + 1];
	int rc = fg_path_join(&p, dir, name, err);

	if (!rc)
		rc = fg_file_write_atomic(p.data, data, len, 0644, err);
	if (!rc)
		rc = fg_sha256_mem(data, len, d, err);
	if (!rc) {
		fg_hex_encode(d, sizeof(d), hex);
		rc = add_item(outs, name, hex, err);
		*bytes += len;
	}
	fg_buf_release(&p);
	return rc;
}

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void untie(cJSON *o)
{
	if (!o)
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(o, "tie_word_embeddings");
	cJSON_AddFalseToObject(o, "tie_word_embeddings");
}

static int is_skipped(const struct fg_st_tensor *t, const struct fg_st_tensor *const *skip)
{
	size_t i;

	for (i = 0; i < 3; i++)
		if (skip[i] && skip[i] == t)
			return 1;
	return 0;
}

/* The group size of a compressed-tensors pack-quantized config, or 0. */
static long long quant_group(const cJSON *cfg)
{
	const cJSON *qc = fg_json_obj(cfg, "quantization_config"), *g0;
	const char *fmt = qc ? fg_json_str(qc, "format") : NULL;
	long long g = 0;

	if (!fmt || strcmp(fmt, "pack-quantized"))
		return 0;
	g0 = fg_json_obj(fg_json_obj(qc, "config_groups"), "group_0");
	if (fg_json_int(fg_json_obj(g0, "weights"), "group_size", &g))
		return 0;
	return g;
}

int fg_prune_head(const char *src, const char *keepset, const char *out, int head_int4, int no_sync,
		  struct fg_prune_report *rep, struct fg_err *err)
{
	return fg_prune_head_in(src, keepset, out, head_int4, no_sync, NULL, 0, rep, err);
}

int fg_prune_head_in(const char *src, const char *keepset, const char *out, int head_int4, int no_sync,
		     const char *store_dir, int rehash, struct fg_prune_report *rep, struct fg_err *err)
{
	const struct fg_st_tensor *packed = NULL, *scale = NULL, *shape_t = NULL, *skip[3] = { 0 };
	uint8_t *qbuf = NULL, *sbuf = NULL, *rbuf = NULL;
	uint64_t scale_row = 0, group = 0;
	struct fg_st_set *set = NULL;
	struct fg_st_writer *w = NULL;
	struct fg_st_desc *descs = NULL;
	const struct fg_st_tensor *head = NULL, *lm;
	unsigned char *member = NULL;
	int32_t *keep = NULL, k = 0, fv = 0;
	struct fg_buf p = FG_BUF_INIT, cfgtext = FG_BUF_INIT, kstext = FG_BUF_INIT, tmp = FG_BUF_INIT,
		      ids_text = FG_BUF_INIT, stext = FG_BUF_INIT;
	cJSON *cfg = NULL, *ks = NULL, *arr;
	struct items ins = { 0 }, outs = { 0 };
	char **names = NULL, sha[FG_SHA256_HEX_LEN + 1], keep_sha[FG_SHA256_HEX_LEN + 1];
	size_t n_names = 0, i, nd = 0, n;
	uint64_t rows, hidden, row_bytes;
	uint8_t dg[FG_SHA256_LEN];
	DIR *d = NULL;
	struct dirent *e;
	struct stat st;
	struct fg_store *store = NULL;
	int rc, made_tmp = 0, tmp_slot = -1;

	memset(rep, 0, sizeof(*rep));
	if (!stat(out, &st) && (!S_ISDIR(st.st_mode) || rmdir(out)))
		return fg_err_set(err, FG_EINVAL, "%s already exists (and is not an empty folder)", out);
	/* the store whose stamps may name inputs (bake int4 does the same): an
	 * input that is a hard link to a blob whose stamp holds is named by it */
	if (!rehash && (rc = fg_store_open_existing(&store, store_dir, err)))
		return fg_err_wrap(err, "--store");
	if ((rc = fg_path_join(&p, src, "config.json", err)) ||
	    (rc = fg_file_read(p.data, (size_t)64 << 20, &cfgtext, err)) ||
	    (rc = fg_json_parse(&cfg, cfgtext.data, cfgtext.len, p.data, err)))
		goto done;
	if (cJSON_GetObjectItemCaseSensitive(cfg, "lm_head_keepset")) {
		rc = fg_err_set(err, FG_EINVAL, "%s: the head is already pruned (config.json has lm_head_keepset)", src);
		goto done;
	}
	if ((rc = fg_st_open(&set, src, err)))
		goto done;
	if (fg_st_find(set, "lm_head.keep_ids")) {
		rc = fg_err_set(err, FG_EINVAL, "%s: the head is already pruned (lm_head.keep_ids present)", src);
		goto done;
	}
	/* every tensor is written: one fgpack run would refuse (missing, or of a
	 * shape or dtype other than config.json implies) is refused here, by the
	 * engine loader's own check, before anything is written */
	if ((rc = fg_g4_model_check(src, set, err)))
		goto done;
	lm = fg_st_find(set, "lm_head.weight");
	packed = fg_st_find(set, "lm_head.weight_packed");
	if (packed) {
		/* an INT4 head (fgpack bake int4 --head int4): cut its packed rows
		 * and scales; it stays INT4 whatever --head says */
		scale = fg_st_find(set, "lm_head.weight_scale");
		shape_t = fg_st_find(set, "lm_head.weight_shape");
		if (!scale || !shape_t || packed->dtype != FG_ST_I32 || packed->ndim != 2 || scale->ndim != 2 ||
		    scale->shape[0] != packed->shape[0] || shape_t->nelem != 2 ||
		    (shape_t->dtype != FG_ST_I64 && shape_t->dtype != FG_ST_I32)) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: lm_head.weight_packed without a matching weight_scale "
					"and weight_shape", src);
			goto done;
		}
		rows = packed->shape[0];
		hidden = packed->shape[1] * 8;
		row_bytes = packed->shape[1] * 4;
		scale_row = scale->shape[1] * fg_st_dtype_size(scale->dtype);
		skip[0] = packed;
		skip[1] = scale;
		skip[2] = shape_t;
		head = packed;
		head_int4 = 1;
		goto have_head;
	}
	head = lm;
	if (!head)
		head = fg_st_find(set, "model.language_model.embed_tokens.weight");
	if (!head)
		head = fg_st_find(set, "model.embed_tokens.weight");
	if (!head) {
		rc = fg_err_set(err, FG_ENOTFOUND,
				"%s: no lm_head.weight and no embed_tokens.weight to take the head from", src);
		goto done;
	}
	if (head->ndim != 2 || (head->dtype != FG_ST_BF16 && head->dtype != FG_ST_F16 && head->dtype != FG_ST_F32)) {
		rc = fg_err_set(err, FG_EUNSUPPORTED, "%s: %s is not a 2-D BF16/F16/F32 matrix", src, head->name);
		goto done;
	}
	rows = head->shape[0];
	hidden = head->shape[1];
	row_bytes = hidden * fg_st_dtype_size(head->dtype);
	skip[0] = lm;
	if (head_int4) {
		group = (uint64_t)quant_group(cfg);
		if (!group) {
			rc = fg_err_set(err, FG_EUNSUPPORTED, "%s: --head int4 needs a model with a compressed-tensors "
					"pack-quantized quantization_config (run fgpack bake int4 first)", src);
			goto done;
		}
		if (group % 8 || group > 128 || hidden % group) {
			rc = fg_err_set(err, FG_EUNSUPPORTED, "%s: --head int4 needs a group size of 8..128 (a multiple "
					"of 8; the config says %llu) dividing the head's width (%llu)", src,
					(unsigned long long)group, (unsigned long long)hidden);
			goto done;
		}
	}
have_head:
	if (rows > (1u << 26)) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: %s has %llu rows", src, head->name, (unsigned long long)rows);
		goto done;
	}
	if ((rc = fg_keepset_read(&member, &k, &fv, keepset, (int32_t)rows, err)))
		goto done;
	if ((uint64_t)fv != rows) {
		rc = fg_err_set(err, FG_EINVAL,
				"%s: keepset is for a %ld-row head but %s has %llu rows (bake the keepset with "
				"--full-vocab %llu)",
				keepset, (long)fv, head->name, (unsigned long long)rows, (unsigned long long)rows);
		goto done;
	}
	keep = malloc((size_t)k * sizeof(*keep));
	if (!keep) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto done;
	}
	for (i = 0, n = 0; i < rows; i++)
		if (member[i])
			keep[n++] = (int32_t)i;
	arr = cJSON_CreateArray();
	for (i = 0; i < (size_t)k; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber(keep[i]));
	rc = fg_json_write(&ids_text, arr, 0, err);
	cJSON_Delete(arr);
	if (rc || (rc = fg_sha256_mem(ids_text.data, ids_text.len, dg, err)))
		goto done;
	fg_hex_encode(dg, sizeof(dg), keep_sha);

	/* the output, written in ".<out>.fgpack-tmp.<pid>" beside it and renamed
	 * at the end; a signal's is removed by cmd/'s handler, a SIGKILL's by
	 * the next bake of out (fg_tmp_dir_make, as bake int4) */
	if ((rc = fg_tmp_dir_make(out, &tmp, &tmp_slot, err)))
		goto done;
	made_tmp = 1;
	n = fg_st_count(set);
	descs = calloc(n + 4, sizeof(*descs)); /* + the head's up to 3 tensors and keep_ids */
	if (!descs) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto done;
	}
	for (i = 0; i < n; i++) {
		const struct fg_st_tensor *t = fg_st_at(set, i);

		if (is_skipped(t, skip))
			continue;
		descs[nd].name = t->name;
		descs[nd].dtype = t->dtype;
		descs[nd].ndim = t->ndim;
		memcpy(descs[nd].shape, t->shape, sizeof(t->shape));
		nd++;
	}
	if (head_int4) {
		uint64_t sw = packed ? scale->shape[1] : hidden / group;

		descs[nd++] = (struct fg_st_desc){ "lm_head.weight_packed", FG_ST_I32, 2, { (uint64_t)k, hidden / 8 } };
		descs[nd++] = (struct fg_st_desc){ "lm_head.weight_scale", packed ? scale->dtype : FG_ST_BF16, 2,
						   { (uint64_t)k, sw } };
		descs[nd++] = (struct fg_st_desc){ "lm_head.weight_shape", packed ? shape_t->dtype : FG_ST_I64, 1, { 2 } };
	} else {
		descs[nd++] = (struct fg_st_desc){ "lm_head.weight", head->dtype, 2, { (uint64_t)k, hidden } };
	}
	descs[nd++] = (struct fg_st_desc){ "lm_head.keep_ids", FG_ST_I32, 1, { (uint64_t)k } };
	/* with a store, the shard's chain states too, for its seen record */
	if ((rc = fg_st_writer_new_states(&w, tmp.data, descs, nd, (uint64_t)5000000000ULL, NULL,
					  store ? FG_STORE_STATES_EVERY : 0, err)))
		goto done;
	if (no_sync)
		fg_st_writer_no_sync(w);
	for (i = 0; i < n; i++) {
		const struct fg_st_tensor *t = fg_st_at(set, i);
		size_t off;

		if (is_skipped(t, skip))
			continue;
		for (off = 0; off < t->nbytes && !rc; off += (size_t)64 << 20) {
			size_t len = t->nbytes - off < ((size_t)64 << 20) ? t->nbytes - off : (size_t)64 << 20;

			rc = fg_st_writer_write(w, (const uint8_t *)t->data + off, len, err);
		}
		fg_st_release(set, t);
		if (rc)
			goto done;
	}
	if (!head_int4) {
		for (i = 0; i < (size_t)k && !rc; i++)
			rc = fg_st_writer_write(w, (const uint8_t *)head->data + (size_t)keep[i] * row_bytes, row_bytes,
						err);
	} else if (packed) {
		uint8_t sh[16];
		size_t es = shape_t->dtype == FG_ST_I64 ? 8 : 4, b;

		for (i = 0; i < (size_t)k && !rc; i++)
			rc = fg_st_writer_write(w, (const uint8_t *)packed->data + (size_t)keep[i] * row_bytes, row_bytes,
						err);
		for (i = 0; i < (size_t)k && !rc; i++)
			rc = fg_st_writer_write(w, (const uint8_t *)scale->data + (size_t)keep[i] * scale_row, scale_row,
						err);
		memset(sh, 0, sizeof(sh));
		for (b = 0; b < es; b++) {
			sh[b] = (uint8_t)((uint64_t)k >> (8 * b));
			sh[es + b] = (uint8_t)(hidden >> (8 * b));
		}
		if (!rc)
			rc = fg_st_writer_write(w, sh, 2 * es, err);
	} else {
		size_t bad = 0, b;
		uint8_t sh[16];

		rbuf = malloc((size_t)k * row_bytes);
		qbuf = malloc((size_t)k * hidden / 2);
		sbuf = malloc((size_t)k * (hidden / group) * 2);
		if (!rbuf || !qbuf || !sbuf) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto done;
		}
		for (i = 0; i < (size_t)k; i++)
			memcpy(rbuf + i * row_bytes, (const uint8_t *)head->data + (size_t)keep[i] * row_bytes, row_bytes);
		if (fg_int4_quant_rows_dtype(qbuf, sbuf, rbuf, head->dtype, (size_t)k, hidden, group, &bad)) {
			rc = fg_err_set(err, FG_EINVAL, "%s: %s row %ld has a NaN or infinite weight", src, head->name,
					(long)keep[bad / hidden]);
			goto done;
		}
		rc = fg_st_writer_write(w, qbuf, (size_t)k * hidden / 2, err);
		if (!rc)
			rc = fg_st_writer_write(w, sbuf, (size_t)k * (hidden / group) * 2, err);
		for (b = 0; b < 8; b++) {
			sh[b] = (uint8_t)((uint64_t)k >> (8 * b));
			sh[8 + b] = (uint8_t)(hidden >> (8 * b));
		}
		if (!rc)
			rc = fg_st_writer_write(w, sh, 16, err);
	}
	for (i = 0; i < (size_t)k && !rc; i++) {
		uint8_t le[4] = { (uint8_t)keep[i], (uint8_t)(keep[i] >> 8), (uint8_t)(keep[i] >> 16),
				  (uint8_t)(keep[i] >> 24) };

		rc = fg_st_writer_write(w, le, 4, err);
	}
	if (rc || (rc = fg_st_writer_finish(w, err)))
		goto done;
	for (i = 0; i < fg_st_writer_nfiles(w); i++) {
		const char *nm;
		uint64_t sz;

		fg_st_writer_file(w, i, &nm, &sz, sha);
		if ((rc = add_item(&outs, nm, sha, err)))
			goto done;
		rep->bytes_out += sz;
	}
	if (fg_st_writer_nfiles(w) > 1) {
		fg_buf_reset(&p);
		if ((rc = fg_path_join(&p, tmp.data, FG_ST_INDEX_NAME, err)) || (rc = hash_path(p.data, sha, err)) ||
		    (rc = add_item(&outs, FG_ST_INDEX_NAME, sha, err)))
			goto done;
	}

	/* config.json says what the head is */
	{
		cJSON *o = cJSON_CreateObject();

		untie(cfg);
		untie(cJSON_GetObjectItemCaseSensitive(cfg, "text_config"));
		if (head_int4 && !packed) {
			/* the head is now INT4 too: vLLM must not expect it in bf16 */
			cJSON *ign = cJSON_GetObjectItemCaseSensitive(fg_json_obj(cfg, "quantization_config"), "ignore");
			int j;

			for (j = cJSON_GetArraySize(ign) - 1; j >= 0; j--) {
				cJSON *x = cJSON_GetArrayItem(ign, j);

				if (cJSON_IsString(x) && !strcmp(x->valuestring, "lm_head"))
					cJSON_DeleteItemFromArray(ign, j);
			}
		}
		cJSON_AddNumberToObject(o, "pruned_vocab_K", k);
		cJSON_AddNumberToObject(o, "full_vocab", fv);
		cJSON_AddStringToObject(o, "keep_ids_sha256", keep_sha);
		cJSON_AddStringToObject(o, "keep_ids_tensor", "lm_head.keep_ids");
		cJSON_AddStringToObject(o, "keepset_file", "keepset.json");
		cJSON_AddStringToObject(o, "head_source", head->name);
		cJSON_AddStringToObject(o, "head_format", head_int4 ? "int4" : fg_st_dtype_name(head->dtype));
		cJSON_AddStringToObject(o, "note",
					"the LM head holds K rows (lm_head.weight, or its INT4 weight_packed/"
					"weight_scale): row i scores token keep_ids[i]; every other token's logit "
					"is -inf and can never be emitted. The input embedding is full.");
		cJSON_AddItemToObject(cfg, "lm_head_keepset", o);
		fg_buf_reset(&p);
		if ((rc = fg_json_write(&p, cfg, 1, err)) ||
		    (rc = emit(tmp.data, "config.json", p.data, p.len, &outs, &rep->bytes_out, err)))
			goto done;
	}
	if ((rc = fg_file_read(keepset, (size_t)256 << 20, &kstext, err)) ||
	    (rc = emit(tmp.data, "keepset.json", kstext.data, kstext.len, &outs, &rep->bytes_out, err)))
		goto done;

	/* inputs: config, tensor files, keepset; other files are copied. An
	 * input that is a hard link to a store blob whose stamp holds is named
	 * by the blob (as bake int4 does; --rehash: never), else hashed */
	fg_buf_reset(&p);
	if ((rc = fg_path_join(&p, src, "config.json", err)) ||
	    (rc = input_digests(store, p.data, set, keepset, &ins, rep, err)))
		goto done;
	d = opendir(src);
	if (!d) {
		rc = fg_err_set(err, FG_EIO, "%s: %s", src, strerror(errno));
		goto done;
	}
	names = calloc(MAX_FILES, sizeof(*names));
	while (names && (e = readdir(d)) && n_names < MAX_FILES) {
		if (e->d_name[0] == '.' || !strcmp(e->d_name, "config.json") || !strcmp(e->d_name, "keepset.json") ||
		    ends_with(e->d_name, ".safetensors") || !strcmp(e->d_name, FG_ST_INDEX_NAME))
			continue;
		names[n_names++] = strdup(e->d_name);
	}
	if (!names) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto done;
	}
	qsort(names, n_names, sizeof(*names), cmp_str);
	for (i = 0; i < n_names; i++) {
		struct fg_buf data = FG_BUF_INIT;

		fg_buf_reset(&p);
		if (!names[i] || (rc = fg_path_join(&p, src, names[i], err)))
			goto done;
		if (stat(p.data, &st) || !S_ISREG(st.st_mode))
			continue;
		rc = fg_file_read(p.data, (size_t)1 << 32, &data, err);
		if (!rc) {
			uint8_t h[FG_SHA256_LEN];

			rc = fg_sha256_mem(data.data ? data.data : "", data.len, h, err);
			fg_hex_encode(h, sizeof(h), sha);
		}
		if (!rc)
			rc = add_item(&ins, names[i], sha, err);
		if (!rc)
			rc = emit(tmp.data, names[i], data.data ? data.data : "", data.len, &outs, &rep->bytes_out, err);
		fg_buf_release(&data);
		if (rc)
			goto done;
	}
	if (rename(tmp.data, out)) {
		rc = fg_err_set(err, FG_EIO, "rename %s to %s: %s", tmp.data, out, strerror(errno));
		goto done;
	}
	made_tmp = 0;
	fg_tmp_untrack(tmp_slot); /* now out: no longer ours to remove */
	tmp_slot = -1;
	if (store)
		fg_bake_note_shards(store, w, out);

	/* the provenance statement beside the folder */
	{
		struct fg_prov_item *si = calloc(outs.n + 1, sizeof(*si)), *di = calloc(ins.n + 1, sizeof(*di));
		struct fg_prov prov;
		cJSON *params = cJSON_CreateObject(), *inl = cJSON_CreateObject();
		cJSON *by_read = cJSON_CreateObject(), *by_blob = cJSON_CreateObject();
		cJSON *by_seen = cJSON_CreateObject();
		const cJSON **ann = calloc(ins.n + 1, sizeof(*ann));

		cJSON_AddStringToObject(params, "model", src);
		cJSON_AddStringToObject(params, "keepset", keepset);
		cJSON_AddNumberToObject(params, "pruned_vocab_K", k);
		cJSON_AddStringToObject(params, "head", head_int4 ? "int4" : "keep");
		for (i = 0; si && i < outs.n; i++)
			si[i] = (struct fg_prov_item){ outs.v[i].name, NULL, outs.v[i].sha };
		cJSON_AddStringToObject(by_read, "fgpack_digest", "read");
		cJSON_AddStringToObject(by_blob, "fgpack_digest", "store");
		cJSON_AddStringToObject(by_seen, "fgpack_digest", "seen");
		for (i = 0; di && ann && i < ins.n; i++) {
			di[i] = (struct fg_prov_item){ ins.v[i].name, NULL, ins.v[i].sha };
			ann[i] = ins.v[i].by_store ? by_blob : ins.v[i].by_seen ? by_seen : by_read;
		}
		if (store)
			cJSON_AddStringToObject(inl, "store", fg_store_root(store));
		cJSON_AddBoolToObject(inl, "rehash", rehash != 0);
		memset(&prov, 0, sizeof(prov));
		prov.build_type = "https://github.com/fgpack/fgpack/bake/prune-head/v1";
		prov.subjects = si;
		prov.n_subjects = outs.n;
		prov.deps = di;
		prov.n_deps = ins.n;
		prov.external_params = params;
		prov.internal_params = inl;
		prov.dep_annotations = ann;
		rc = si && di && ann && inl && by_read && by_blob ? fg_prov_statement_text(&stext, &prov, err)
								  : fg_err_set(err, FG_ENOMEM, "out of memory");
		free(si);
		free(di);
		free(ann);
		cJSON_Delete(params);
		cJSON_Delete(inl);
		cJSON_Delete(by_read);
		cJSON_Delete(by_blob);
		cJSON_Delete(by_seen);
		if (rc)
			goto done;
		fg_buf_reset(&p);
		if ((rc = fg_buf_printf(&p, err, "%s.intoto.json", out)) ||
		    (rc = fg_file_write_atomic(p.data, stext.data, stext.len, 0644, err)))
			goto done;
		snprintf(rep->statement, sizeof(rep->statement), "%s", p.data);
	}
	rep->k = k;
	rep->full_vocab = fv;
	rep->hidden = hidden;
	rep->tied = !lm && !packed;
	rep->head_int4 = head_int4;
	snprintf(rep->head_source, sizeof(rep->head_source), "%s", head->name);
	rep->n_tensors_out = nd;
done:
	fg_store_free(store);
	if (d)
		closedir(d);
	for (i = 0; names && i < n_names; i++)
		free(names[i]);
	free(names);
	if (rc && made_tmp) {
		/* leave nothing half-written behind */
		fg_st_writer_free(w);
		w = NULL;
		fg_rm_tree(tmp.data);
	}
	fg_tmp_untrack(tmp_slot);
	fg_st_writer_free(w);
	fg_st_free(set);
	free(descs);
	free(rbuf);
	free(qbuf);
	free(sbuf);
	free(member);
	free(keep);
	cJSON_Delete(cfg);
	cJSON_Delete(ks);
	free_items(&ins);
	free_items(&outs);
	fg_buf_release(&p);
	fg_buf_release(&cfgtext);
	fg_buf_release(&kstext);
	fg_buf_release(&tmp);
	fg_buf_release(&ids_text);
	fg_buf_release(&stext);
	return rc;
}
