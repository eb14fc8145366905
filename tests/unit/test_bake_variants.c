/* test_bake_variants.c - `fgpack bake int4` (fg_int4_bake) on every tiny
 * Gemma 4 checkpoint that transformers 5.17 wrote itself
 * (tests/fixtures/oracle/variants/<name>/; a fixture added there later is
 * covered without an edit here): text-only and Gemma4ForConditionalGeneration
 * layouts, single-file and sharded, BF16/F16/F32, tied and untied heads,
 * attention_k_eq_v, KV sharing, attention biases, mixture of experts.
 *
 * Per checkpoint, the Linear modules are found here on their own terms (every
 * 2-D ".weight" but the embedding tables, and the 3-D experts), not with the
 * bake's name list: those of the text decoder are expected in INT4, the head
 * (unless --head int4), the router, the experts and the vision/audio towers
 * and embedders left as they are. Then, for each group of 32, 64, 128:
 *   - a group that does not divide the input width of every decoder Linear
 *     is refused in one line naming the file and the first such tensor in
 *     file order, with the hint of the group that fits (or that none does),
 *     leaving no output and no temporary folder; with --ignore-misfits the
 *     Linears it does not fit are left as they are (and listed in ignore),
 *     or, when it fits none, the bake is refused in one line;
 *   - every bake (-j2) is checked: the report's counts; every source tensor
 *     accounted for, INT4 ones as <m>.weight_packed I32 [out, in/8],
 *     .weight_scale BF16 [out, in/group], .weight_shape I64 [out, in] with
 *     every weight within (0.5 + 7.6 * 2^-8) of a step of q * s and each
 *     group's largest weight on q = 7 or -8, everything else byte-identical
 *     in its own dtype, nothing more; the other files copied byte for byte;
 *     config.json the source's plus a quantization_config with that group,
 *     whose ignore list matches every Linear left unquantized (re: entries
 *     with Python re.match's semantics, others exactly, as vLLM's
 *     should_ignore_layer), none quantized, and holds no entry that matches
 *     nothing, and each layer vLLM fuses (q/k/v_proj, gate/up_proj) is
 *     ignored whole or not at all, its absent parts (the v_proj of an
 *     attention_k_eq_v full layer) and fused name included; the CPU engine loads it and its logits are bit-identical to
 *     those of the same checkpoint with every INT4 Linear replaced by its
 *     dequantized F32 weights q * scale (the engine widens an INT4 row to
 *     exactly those floats and runs the F32 row's dot, so equal bits are the
 *     promise);
 * and, with the first group baked, -j1 gives the -j2 bytes (the tree digest:
 * sha256 of every output file) and --head int4 is checked the same way
 * (lm_head quantized from lm_head.weight or the tied embedding, not in
 * ignore, tie_word_embeddings false), or refused when the group does not fit
 * the head's width. */
#include <dirent.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "engine_test.h"
#include "rewrite_test.h"

#include "bake/int4.h"
#include "bf16.h"
#include "engine/engine.h"
#include "fsutil.h"
#include "json.h"
#include "safetensors.h"

#define VARIANTS "tests/fixtures/oracle/variants"
#define PROMPT 8 /* tokens of logits_of's sequence run through each model */

static char tmp[] = "/tmp/fg_bake_variants_XXXXXX";
static const int groups[3] = { 32, 64, 128 };
static int n_baked, n_refused; /* over all variants */

enum { OTHER, QUANT, KEEP };

/* One bake: its group, --ignore-misfits, --head int4. */
struct mode {
	int group, misfits, head_int4;
};

/* What a checkpoint tensor is in a bake: a Linear expected in INT4, a
 * Linear-like module left as it is (head, router, experts, towers,
 * embedders; with --ignore-misfits a decoder Linear whose input width the
 * group does not divide), or something else (embedding tables, norms,
 * scalars, biases, buffers, convolutions, position tables). */
static int kind(const struct fg_st_tensor *t, const struct mode *m)
{
	if (t->ndim == 2 && ends_with(t->name, ".weight") && !strstr(t->name, "embed_tokens")) {
		if (!strcmp(t->name, "lm_head.weight"))
			return m->head_int4 ? QUANT : KEEP;
		if (strstr(t->name, "vision_tower.") || strstr(t->name, "audio_tower.") ||
		    strstr(t->name, "embed_vision.") || strstr(t->name, "embed_audio.") || strstr(t->name, ".router."))
			return KEEP;
		return m->misfits && t->shape[1] % (uint64_t)m->group ? KEEP : QUANT;
	}
	return strstr(t->name, ".experts.") ? KEEP : OTHER;
}

/* How many tensors of src are of kind k in mode m. */
static size_t count_kind(const struct fg_st_set *src, const struct mode *m, int k)
{
	size_t i, n = 0;

	for (i = 0; i < fg_st_count(src); i++)
		n += kind(fg_st_at(src, i), m) == k;
	return n;
}

/* The first tensor in file order expected in INT4 whose input width group
 * does not divide, or NULL. */
static const struct fg_st_tensor *misfit(const struct fg_st_set *src, int group)
{
	struct mode m = { group, 0, 0 };
	size_t i;

	for (i = 0; i < fg_st_count(src); i++) {
		const struct fg_st_tensor *t = fg_st_at(src, i);

		if (kind(t, &m) == QUANT && t->shape[1] % (uint64_t)group)
			return t;
	}
	return NULL;
}

static int bake(const char *src, const char *out, const struct mode *m, int threads, struct fg_int4_report *rep,
		struct fg_err *err)
{
	struct fg_int4_opts o;

	memset(&o, 0, sizeof(o));
	o.group = m->group;
	o.threads = threads;
	o.head_int4 = m->head_int4;
	o.ignore_misfits = m->misfits;
	o.no_sync = 1;
	o.rehash = 1;
	return fg_int4_bake(src, out, &o, rep, err);
}

/* 1 when tmp holds a bake's temporary folder. */
static int tmp_left(void)
{
	DIR *d = opendir(tmp);
	struct dirent *de;
	int found = 0;

	while (d && (de = readdir(d)))
		found |= strstr(de->d_name, "fgpack-tmp") != NULL;
	if (d)
		closedir(d);
	return found;
}

static void check_refused(const char *dir, const char *label, const struct fg_st_set *src, int group, int fit)
{
	const struct fg_st_tensor *t = misfit(src, group);
	struct mode m = { group, 0, 0 };
	struct fg_int4_report rep;
	struct fg_err err = { 0 };
	char out[600], want[FG_ERR_MSG_MAX], hint[128];
	struct stat st;
	int rc;

	snprintf(out, sizeof(out), "%s/%s-g%d", tmp, label, group);
	if (fit)
		snprintf(hint, sizeof(hint), "--group %d fits every Linear of this checkpoint", fit);
	else
		snprintf(hint, sizeof(hint),
			 "no --group fits every Linear of this checkpoint; --ignore-misfits leaves such Linears unquantized");
	snprintf(want, sizeof(want), "%s: tensor %s: input width %llu is not a multiple of the group size %d (%s)",
		 t->file, t->name, (unsigned long long)t->shape[1], group, hint);
	rc = bake(dir, out, &m, 2, &rep, &err);
	ok(rc == FG_EINVAL && !strcmp(err.msg, want) && stat(out, &st) && !tmp_left(),
	   "%s --group %d refused in one line naming file and tensor, no output: %s", label, group, err.msg);
	if (strcmp(err.msg, want))
		printf("#   expected: %s\n", want);
	n_refused++;
}

/* Element i of an I64 array. */
static uint64_t le64_at(const void *p, size_t i)
{
	const uint8_t *b = (const uint8_t *)p + 8 * i;

	return (uint64_t)fg_le32(b) | (uint64_t)fg_le32(b + 4) << 32;
}

/* --ignore-misfits where the group fits no Linear at all: refused in one line. */
static void check_nothing(const char *dir, const char *label, const struct mode *m)
{
	struct fg_int4_report rep;
	struct fg_err err = { 0 };
	char out[600], want[FG_ERR_MSG_MAX];
	struct stat st;
	int rc;

	snprintf(out, sizeof(out), "%s/%s-g%d-misfits", tmp, label, m->group);
	snprintf(want, sizeof(want),
		 "%s: no Linear's input width is a multiple of the group size %d: nothing to quantize", dir, m->group);
	rc = bake(dir, out, m, 2, &rep, &err);
	ok(rc == FG_EINVAL && !strcmp(err.msg, want) && stat(out, &st) && !tmp_left(),
	   "%s --group %d --ignore-misfits: no Linear fits, refused in one line, no output: %s", label, m->group,
	   err.msg);
}

/* An INT4 tensor set of t (base <m>) in out: the three parts with their
 * dtypes and shapes, every weight within the error bound of q * s and each
 * group's largest weight on q = 7 or -8 (an all-zero group: s = 2^-7). */
static int check_int4(const struct fg_st_set *out, const char *base, const struct fg_st_tensor *t, int group,
		      const char *label)
{
	const struct fg_st_tensor *pk, *sc, *sh;
	char nm[400];
	uint64_t rows = t->shape[0], cols = t->shape[1], r, g, c;

	snprintf(nm, sizeof(nm), "%s.weight_packed", base);
	pk = fg_st_find(out, nm);
	snprintf(nm, sizeof(nm), "%s.weight_scale", base);
	sc = fg_st_find(out, nm);
	snprintf(nm, sizeof(nm), "%s.weight_shape", base);
	sh = fg_st_find(out, nm);
	snprintf(nm, sizeof(nm), "%s.weight", base);
	if (!pk || !sc || !sh || fg_st_find(out, nm) || pk->dtype != FG_ST_I32 || pk->ndim != 2 ||
	    pk->shape[0] != rows || pk->shape[1] != cols / 8 || sc->dtype != FG_ST_BF16 || sc->ndim != 2 ||
	    sc->shape[0] != rows || sc->shape[1] != cols / (uint64_t)group || sh->dtype != FG_ST_I64 || sh->ndim != 1 ||
	    sh->shape[0] != 2 || le64_at(sh->data, 0) != rows || le64_at(sh->data, 1) != cols) {
		printf("# %s: %s: INT4 parts missing or of the wrong dtype or shape\n", label, base);
		return 0;
	}
	for (r = 0; r < rows; r++)
		for (g = 0; g < cols / (uint64_t)group; g++) {
			double s = fg_bf16_to_f32(fg_le16((const uint8_t *)sc->data + 2 * (r * sc->shape[1] + g)));
			int qmax = 0, zero = 1;

			for (c = g * (uint64_t)group; c < (g + 1) * (uint64_t)group; c++) {
				uint32_t word = fg_le32((const uint8_t *)pk->data + 4 * (r * (cols / 8) + c / 8));
				int q = (int)((word >> (4 * (c % 8))) & 15) - 8;
				double w = fg_st_f32_at(t->data, t->dtype, r * cols + c);

				zero &= w == 0;
				qmax = abs(q) > qmax ? abs(q) : qmax;
				if (!(fabs(w - q * s) <= (0.5 + 7.6 / 256) * s)) {
					printf("# %s: %s [%llu, %llu]: w %.9g, q %d, s %.9g\n", label, base,
					       (unsigned long long)r, (unsigned long long)c, w, q, s);
					return 0;
				}
			}
			if (zero ? s != 0x1p-7 : qmax < 7) {
				printf("# %s: %s row %llu group %llu: scale %.9g, largest |q| %d\n", label, base,
				       (unsigned long long)r, (unsigned long long)g, s, qmax);
				return 0;
			}
		}
	return 1;
}

/* Every tensor of src accounted for in the bake out (nothing more). */
static void check_tensors(const struct fg_st_set *src, const char *outdir, const struct mode *m, const char *label)
{
	struct fg_st_set *out = NULL;
	struct fg_err err = { 0 };
	const struct fg_st_tensor *emb = NULL;
	size_t i, want = 0, nq = 0, nk = 0, bad = 0;

	if (fg_st_open(&out, outdir, &err)) {
		ok(0, "%s: output readable: %s", label, err.msg);
		return;
	}
	for (i = 0; i < fg_st_count(src); i++) {
		const struct fg_st_tensor *t = fg_st_at(src, i), *u;

		if (kind(t, m) == QUANT) {
			char base[400];

			snprintf(base, sizeof(base), "%.*s", (int)(strlen(t->name) - strlen(".weight")), t->name);
			bad += !check_int4(out, base, t, m->group, label);
			want += 3;
			nq++;
			continue;
		}
		if (strstr(t->name, "embed_tokens.weight") && !strstr(t->name, "per_layer"))
			emb = t;
		u = fg_st_find(out, t->name);
		if (!u || u->dtype != t->dtype || u->ndim != t->ndim || memcmp(u->shape, t->shape, sizeof(t->shape)) ||
		    u->nbytes != t->nbytes || memcmp(u->data, t->data, t->nbytes)) {
			printf("# %s: %s not passed through byte for byte\n", label, t->name);
			bad++;
		}
		want++;
		nk++;
	}
	if (m->head_int4 && !fg_st_find(src, "lm_head.weight")) {
		/* a tied head: the untied INT4 lm_head made from the embedding */
		bad += !emb || !check_int4(out, "lm_head", emb, m->group, label);
		want += 3;
		nq++;
	}
	ok(!bad && fg_st_count(out) == want && nq > 0,
	   "%s: %zu Linears in INT4, %zu tensors byte-identical, %zu in all as expected (%zu found)", label, nq, nk, want,
	   fg_st_count(out));
	fg_st_free(out);
}

/* The other files of the checkpoint folder copied byte for byte; the output
 * holds them, config.json and model.safetensors (a small bake is one file). */
static void check_files(const char *dir, const char *outdir, const char *label)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct fg_buf a = FG_BUF_INIT, b = FG_BUF_INIT;
	struct fg_err err = { 0 };
	int n_src = 0, n_out = 0, bad = 0;

	while (d && (de = readdir(d))) {
		char p[700], q[700];

		if (de->d_name[0] == '.' || ends_with(de->d_name, ".safetensors") ||
		    !strcmp(de->d_name, "model.safetensors.index.json") || !strcmp(de->d_name, "config.json"))
			continue;
		if (snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) >= (int)sizeof(p) ||
		    snprintf(q, sizeof(q), "%s/%s", outdir, de->d_name) >= (int)sizeof(q)) {
			printf("# %s: path of %s too long\n", label, de->d_name);
			bad++;
			continue;
		}
		fg_buf_reset(&a);
		fg_buf_reset(&b);
		if (fg_file_read(p, (size_t)1 << 28, &a, &err) || fg_file_read(q, (size_t)1 << 28, &b, &err) ||
		    a.len != b.len || memcmp(a.data, b.data, a.len)) {
			printf("# %s: %s not copied byte for byte\n", label, de->d_name);
			bad++;
		}
		n_src++;
	}
	if (d)
		closedir(d);
	d = opendir(outdir);
	while (d && (de = readdir(d)))
		n_out += de->d_name[0] != '.';
	if (d)
		closedir(d);
	ok(!bad && n_out == n_src + 2, "%s: %d other files copied byte for byte, %d files in the output", label, n_src,
	   n_out);
	fg_buf_release(&a);
	fg_buf_release(&b);
}

/* 1 when an ignore entry matches a module name as vLLM's
 * check_equal_or_regex_match does: "re:" + a pattern matched at the start
 * (Python re.match), else the exact name. */
static int entry_matches(const char *entry, const char *name)
{
	regex_t re;
	char pat[512];
	int m;

	if (strncmp(entry, "re:", 3))
		return !strcmp(entry, name);
	snprintf(pat, sizeof(pat), "^(%s)", entry + 3);
	if (regcomp(&re, pat, REG_EXTENDED | REG_NOSUB))
		return 0;
	m = !regexec(&re, name, 0, NULL, 0);
	regfree(&re);
	return m;
}

/* 1 when some entry of the ignore list matches the module name. */
static int ignored(const cJSON *ign, const char *mod)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, ign) {
		if (cJSON_IsString(it) && entry_matches(it->valuestring, mod))
			return 1;
	}
	return 0;
}

/* vLLM fuses q/k/v_proj into qkv_proj and gate/up_proj into gate_up_proj and
 * refuses the layer unless every part (present in the checkpoint or not: an
 * attention_k_eq_v full layer has no v_proj) and the fused name are all
 * ignored or all not: 1 when mod's group is consistent. */
static int fused_consistent(const cJSON *ign, const char *mod)
{
	static const char *const groups_qkv[] = { "q_proj", "k_proj", "v_proj", "qkv_proj", NULL };
	static const char *const groups_mlp[] = { "gate_proj", "up_proj", "gate_up_proj", NULL };
	const char *const *g = NULL, *dot = strrchr(mod, '.');
	char sib[450];
	int want = ignored(ign, mod), k;

	if (dot && (!strcmp(dot, ".q_proj") || !strcmp(dot, ".k_proj") || !strcmp(dot, ".v_proj")) &&
	    strstr(mod, ".self_attn."))
		g = groups_qkv;
	else if (dot && (!strcmp(dot, ".gate_proj") || !strcmp(dot, ".up_proj")) && strstr(mod, ".mlp."))
		g = groups_mlp;
	for (k = 0; g && g[k]; k++) {
		snprintf(sib, sizeof(sib), "%.*s.%s", (int)(dot - mod), mod, g[k]);
		if (ignored(ign, sib) != want) {
			printf("#   %s is%s ignored but %s is%s\n", mod, want ? "" : " not", sib, want ? " not" : "");
			return 0;
		}
	}
	return 1;
}

/* config.json of the bake: the source's (tie_word_embeddings false with
 * --head int4), plus a quantization_config for the group whose ignore list
 * names exactly the Linear modules left unquantized. */
static void check_config(const char *dir, const struct fg_st_set *src, const char *outdir, const struct mode *m,
			 const char *label)
{
	struct fg_buf a = FG_BUF_INIT, b = FG_BUF_INIT;
	struct fg_err err = { 0 };
	cJSON *sc = NULL, *oc = NULL, *qc = NULL;
	const cJSON *w, *ign, *it, *tg;
	char p[700];
	size_t cap = fg_st_count(src) + 1;
	const char **names = calloc(cap, sizeof(*names));
	int *quant = calloc(cap, sizeof(*quant)), *used = NULL, n = 0, bad = 0, k, e, n_ign = 0, n_keep = 0;
	size_t i;

	snprintf(p, sizeof(p), "%s/config.json", dir);
	if (fg_file_read(p, 1 << 20, &a, &err) || fg_json_parse(&sc, a.data, a.len, p, &err)) {
		ok(0, "%s: source config: %s", label, err.msg);
		goto out;
	}
	snprintf(p, sizeof(p), "%s/config.json", outdir);
	if (fg_file_read(p, 1 << 20, &b, &err) || fg_json_parse(&oc, b.data, b.len, p, &err)) {
		ok(0, "%s: baked config: %s", label, err.msg);
		goto out;
	}
	qc = cJSON_DetachItemFromObjectCaseSensitive(oc, "quantization_config");
	if (m->head_int4) {
		cJSON *tc = cJSON_GetObjectItemCaseSensitive(sc, "text_config");

		cJSON_DeleteItemFromObjectCaseSensitive(sc, "tie_word_embeddings");
		cJSON_AddFalseToObject(sc, "tie_word_embeddings");
		if (cJSON_IsObject(tc)) {
			cJSON_DeleteItemFromObjectCaseSensitive(tc, "tie_word_embeddings");
			cJSON_AddFalseToObject(tc, "tie_word_embeddings");
		}
	}
	ok(qc && cJSON_Compare(sc, oc, 1), "%s: config.json is the source's%s plus quantization_config", label,
	   m->head_int4 ? " (untied)" : "");
	tg = fg_json_arr(fg_json_obj(fg_json_obj(qc, "config_groups"), "group_0"), "targets");
	w = fg_json_obj(fg_json_obj(fg_json_obj(qc, "config_groups"), "group_0"), "weights");
	ok(fg_json_str(qc, "quant_method") && !strcmp(fg_json_str(qc, "quant_method"), "compressed-tensors") &&
		   fg_json_str(qc, "format") && !strcmp(fg_json_str(qc, "format"), "pack-quantized") &&
		   cJSON_GetArraySize(tg) == 1 && cJSON_IsString(cJSON_GetArrayItem(tg, 0)) &&
		   !strcmp(cJSON_GetArrayItem(tg, 0)->valuestring, "Linear") &&
		   cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(w, "group_size")) == m->group &&
		   cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(w, "num_bits")) == 4 &&
		   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(w, "symmetric")) && fg_json_str(w, "strategy") &&
		   !strcmp(fg_json_str(w, "strategy"), "group"),
	   "%s: quantization_config: compressed-tensors pack-quantized, Linear targets, 4-bit symmetric, group %d",
	   label, m->group);
	/* The module names: INT4 ones and those left as they are (a tied
	 * head is a Linear "lm_head" in transformers all the same; a 3-D
	 * experts tensor stands for vLLM's per-expert modules under it). */
	for (i = 0; names && quant && i < fg_st_count(src); i++) {
		const struct fg_st_tensor *t = fg_st_at(src, i);
		int kd = kind(t, m);

		if (kd == OTHER)
			continue;
		names[n] = t->name;
		quant[n++] = kd == QUANT;
	}
	if (names && quant && !fg_st_find(src, "lm_head.weight")) {
		names[n] = "lm_head.weight";
		quant[n++] = m->head_int4;
	}
	ign = fg_json_arr(qc, "ignore");
	cJSON_ArrayForEach(it, ign) n_ign++;
	used = calloc((size_t)n_ign + 1, sizeof(*used));
	if (!names || !quant || !used)
		n = 0, bad++;
	for (k = 0; k < n; k++) {
		char mod[400];
		int hit = 0;

		snprintf(mod, sizeof(mod), "%.*s", (int)(strlen(names[k]) - (ends_with(names[k], ".weight") ? 7 : 0)),
			 names[k]);
		e = 0;
		cJSON_ArrayForEach(it, ign) {
			if (cJSON_IsString(it) && entry_matches(it->valuestring, mod)) {
				hit = 1;
				used[e] |= !quant[k];
			}
			e++;
		}
		if (hit == quant[k]) {
			printf("# %s: %s %s\n", label, mod, quant[k] ? "is INT4 but ignored" : "left unquantized, not ignored");
			bad++;
		}
		if (!fused_consistent(ign, mod)) {
			printf("# %s: fused layer of %s half ignored (vLLM refuses it)\n", label, mod);
			bad++;
		}
	}
	e = 0;
	cJSON_ArrayForEach(it, ign) {
		if (!cJSON_IsString(it) || !used || !used[e]) {
			printf("# %s: ignore entry %s matches no module left unquantized\n", label,
			       cJSON_IsString(it) ? it->valuestring : "(not a string)");
			bad++;
		}
		e++;
	}
	for (k = 0; k < n; k++)
		n_keep += !quant[k];
	ok(qc && cJSON_IsArray(ign) && !bad,
	   "%s: ignore names exactly the %d Linear modules left unquantized (%d entries)", label, n_keep, n_ign);
	free(used);
out:
	free(names);
	free(quant);
	cJSON_Delete(sc);
	cJSON_Delete(oc);
	cJSON_Delete(qc);
	fg_buf_release(&a);
	fg_buf_release(&b);
}

/* The engine's logits on the bake = on its dequantized F32 twin, bit for bit. */
static void check_engine(const char *outdir, const char *label)
{
	char dq[700];
	struct fg_err err = { 0 };
	float *a = NULL, *b = NULL;
	size_t V = 0;
	int same;

	snprintf(dq, sizeof(dq), "%s-f32", outdir);
	a = logits_of(outdir, FG_DEVICE_CPU, PROMPT, &err);
	if (a && !fg_mkdir_p(dq, 0755, &err) && !rewrite(outdir, dq, DEQUANT, NULL, "quantization_config", NULL))
		b = logits_of(dq, FG_DEVICE_CPU, PROMPT, &err);
	if (a && b) {
		struct fg_engine_opts o = { 1, 0, 0, FG_DEVICE_CPU };
		struct fg_engine *e = NULL;

		if (!fg_engine_load(&e, dq, &o, &err))
			V = (size_t)fg_engine_vocab_size(e);
		fg_engine_free(e);
	}
	same = a && b && V && !memcmp(a, b, sizeof(float) * PROMPT * V);
	ok(same, "%s: the engine's logits on the bake bit-identical to those on its F32 dequantization %s", label,
	   a && b ? "" : err.msg);
	free(a);
	free(b);
	fg_rm_tree(dq);
}

/* One bake of dir in mode m (-j2) and its checks; out is removed after. */
static void check_bake(const char *dir, const char *label, const struct fg_st_set *src, const struct mode *m,
		       struct fg_int4_report *r)
{
	struct fg_err err = { 0 };
	char out[600], lab[300];
	size_t n_mis = 0, i;
	int rc;

	snprintf(lab, sizeof(lab), "%s --group %d%s%s", label, m->group, m->misfits ? " --ignore-misfits" : "",
		 m->head_int4 ? " --head int4" : "");
	snprintf(out, sizeof(out), "%s/%s-g%d%s%s", tmp, label, m->group, m->misfits ? "-misfits" : "",
		 m->head_int4 ? "-head" : "");
	rc = bake(dir, out, m, 2, r, &err);
	ok(rc == 0, "%s: baked (-j2) %s", lab, rc ? err.msg : "");
	if (rc)
		return;
	for (i = 0; i < fg_st_count(src); i++) {
		const struct fg_st_tensor *t = fg_st_at(src, i);
		struct mode all = { m->group, 0, m->head_int4 };

		n_mis += kind(t, m) == KEEP && kind(t, &all) == QUANT;
	}
	ok(r->n_misfit == n_mis && r->n_quantized == count_kind(src, m, QUANT) + (m->head_int4 &&
										   !fg_st_find(src, "lm_head.weight")),
	   "%s: report: %zu Linears in INT4, %zu left for their width", lab, r->n_quantized, r->n_misfit);
	n_baked++;
	check_tensors(src, out, m, lab);
	check_files(dir, out, lab);
	check_config(dir, src, out, m, lab);
	check_engine(out, lab);
	fg_rm_tree(out);
}

/* A bake in mode m: -j1 gives the bytes of -j2 (the tree digest covers every
 * output file); then --head int4 in the same mode, or its refusal when the
 * head's width does not fit the group. */
static void check_more(const char *dir, const char *label, const struct fg_st_set *src, const struct mode *m)
{
	struct fg_int4_report r2, r1;
	struct fg_err err = { 0 };
	struct mode h = *m;
	const struct fg_st_tensor *head = fg_st_find(src, "lm_head.weight");
	char out[600];
	struct stat st;
	size_t i;
	int rc;

	check_bake(dir, label, src, m, &r2);
	snprintf(out, sizeof(out), "%s/%s-j1", tmp, label);
	rc = bake(dir, out, m, 1, &r1, &err);
	ok(rc == 0 && !strcmp(r1.tree_digest, r2.tree_digest),
	   "%s --group %d%s: -j1 and -j2 outputs byte-identical (tree %.12s)", label, m->group,
	   m->misfits ? " --ignore-misfits" : "", r2.tree_digest);
	fg_rm_tree(out);
	for (i = 0; !head && i < fg_st_count(src); i++)
		if (strstr(fg_st_at(src, i)->name, "embed_tokens.weight") && !strstr(fg_st_at(src, i)->name, "per_layer"))
			head = fg_st_at(src, i);
	h.head_int4 = 1;
	if (head && head->shape[1] % (uint64_t)m->group == 0) {
		check_bake(dir, label, src, &h, &r1);
		return;
	}
	snprintf(out, sizeof(out), "%s/%s-head", tmp, label);
	rc = bake(dir, out, &h, 2, &r1, &err);
	ok(rc == FG_EINVAL && head && strstr(err.msg, head->name) && strstr(err.msg, "input width") &&
		   strstr(err.msg, m->misfits ? "(--head int4 needs a group that divides it;" : "fits every Linear") &&
		   !strchr(err.msg, '\n') && stat(out, &st) && !tmp_left(),
	   "%s --group %d --head int4: a head the group does not fit refused, no output: %s", label, m->group, err.msg);
}

static void check_variant(const char *dir, const char *json, const char *bin, int window, const char *label)
{
	struct fg_st_set *src = NULL;
	struct fg_err err = { 0 };
	struct fg_int4_report r;
	int k, fit = 0, first = 1;

	(void)json, (void)bin, (void)window;
	if (fg_st_open(&src, dir, &err)) {
		ok(0, "%s: source readable: %s", label, err.msg);
		return;
	}
	for (k = 2; k >= 0 && !fit; k--)
		fit = misfit(src, groups[k]) ? 0 : groups[k];
	printf("# %s: %s\n", label, fit ? "every Linear fits a group" : "no group divides every Linear's width");
	for (k = 0; k < 3; k++) {
		struct mode m = { groups[k], 0, 0 };

		if (misfit(src, groups[k])) {
			check_refused(dir, label, src, groups[k], fit);
			m.misfits = 1;
			if (!count_kind(src, &m, QUANT)) {
				check_nothing(dir, label, &m);
				continue;
			}
		}
		if (first)
			check_more(dir, label, src, &m);
		else
			check_bake(dir, label, src, &m, &r);
		first = 0;
	}
	fg_st_free(src);
}

int main(void)
{
	int n;

	(void)ids_of, (void)compare_pruned, (void)on_token, (void)prune_fixture, (void)seq_logits,
		(void)greedy_want; /* engine_test.h helpers this suite does not need */
	if (!mkdtemp(tmp)) {
		ok(0, "mkdtemp");
		return tap_done();
	}
	setenv("FGPACK_HOME", tmp, 1); /* no store of the user's is read or noted */
	n = for_each_variant(VARIANTS, check_variant);
	ok(n >= 20 && n_baked > 0 && n_refused > 0, "%d transformers-made checkpoints: %d bakes checked, %d refusals", n,
	   n_baked, n_refused);
	fg_rm_tree(tmp);
	return tap_done();
}
