/* test_bake_dtypes.c - `fgpack bake int4` (fg_int4_bake) on checkpoints whose
 * weights are F32 or F16 instead of BF16, and the engine on what it writes.
 *
 * The source is tests/fixtures/oracle/variants/e4b-shape (bf16, written by
 * transformers' save_pretrained; every Linear width a multiple of 32). The
 * relations tested, with group 32:
 *   - its exact F32 copy bakes to the same INT4 tensors, byte for byte, as the
 *     bf16 original; the tensors left unquantized stay F32 with the same
 *     values; -j1 and -j2 give identical files;
 *   - an F16 copy: every bf16 value that a half holds exactly is kept, the few
 *     that it cannot hold (magnitudes below 2^-14 with too many significant
 *     bits for a subnormal half) are set to 0 in both a bf16 twin and the F16
 *     copy; the two bake to the same INT4 tensors, -j1 and -j2 identical;
 *   - the engine loads each baked output and its logits are bit-identical
 *     between the bf16 bake and the F32 (F16) bake;
 *   - bake prune-head --head int4 quantizes an F16 head (the tied
 *     embedding) to the INT4 rows of its bf16 twin;
 *   - an F64 or I32 Linear, or a non-finite half, is refused in one line
 *     naming the file and the tensor, leaving no output (the dtypes by the
 *     engine loader's check, fg_g4_model_check, in the loader's words). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"

#include "bake/int4.h"
#include "bake/prune_head.h"
#include "bf16.h"
#include "engine/engine.h"
#include "fsutil.h"
#include "safetensors.h"

#define SRC "tests/fixtures/oracle/variants/e4b-shape"
#define GROUP 32

static char tmp[] = "/tmp/fg_bake_dtypes_XXXXXX";
static size_t n_values; /* bf16 values rewritten by the last copy */

/* The half holding v exactly, or -1 when there is none. */
static int exact_half(float v)
{
	float a = fabsf(v), m;
	int e, sign = signbit(v) ? 0x8000 : 0, h;

	if (a == 0)
		h = sign;
	else if (!(a <= 65504.0f))
		return -1;
	else if (a >= 0x1p-14f) {
		m = frexpf(a, &e) * 2.0f - 1.0f; /* a = (1 + m) 2^(e-1) */
		if (m * 1024.0f != floorf(m * 1024.0f))
			return -1;
		h = sign | (e - 1 + 15) << 10 | (int)(m * 1024.0f);
	} else {
		m = a * 0x1p24f; /* a subnormal half: a multiple of 2^-24 below 2^-14 */
		if (m != floorf(m))
			return -1;
		h = sign | (int)m;
	}
	return fg_f16_to_f32((uint16_t)h) == v ? h : -1;
}

/* What to write for the float tensors of a copy. */
enum { AS_F32, AS_F16, AS_BF16_HALFSAFE, AS_ONE };

/* SRC copied to tmp/name with its float tensors rewritten (mode above); in
 * AS_ONE mode only the tensor `only` changes, to dtype (F64 exactly, I32
 * rounded, F16 with element `poison` set to the half `pbits`). *zeroed counts
 * values set to 0 (AS_F16, AS_BF16_HALFSAFE). */
static int copy_as(const char *name, int mode, const char *only, int dtype, uint64_t poison, uint16_t pbits,
		   size_t *zeroed)
{
	struct fg_st_set *set = NULL;
	struct fg_st_writer *w = NULL;
	struct fg_st_desc *d;
	struct fg_err err = { 0 };
	struct fg_buf cfg = FG_BUF_INIT;
	char dir[512], p[600];
	size_t i, n;
	uint64_t k;
	int rc;

	snprintf(dir, sizeof(dir), "%s/%s", tmp, name);
	if (mkdir(dir, 0755) || fg_st_open(&set, SRC "/model.safetensors", &err))
		return -1;
	n = fg_st_count(set);
	d = calloc(n, sizeof(*d));
	for (i = 0; i < n; i++) {
		const struct fg_st_tensor *t = fg_st_at(set, i);

		d[i].name = t->name;
		d[i].dtype = t->dtype;
		if (t->dtype == FG_ST_BF16 && mode != AS_ONE)
			d[i].dtype = mode == AS_F32 ? FG_ST_F32 : mode == AS_F16 ? FG_ST_F16 : FG_ST_BF16;
		if (mode == AS_ONE && !strcmp(t->name, only))
			d[i].dtype = dtype;
		d[i].ndim = t->ndim;
		memcpy(d[i].shape, t->shape, sizeof(d[i].shape));
	}
	rc = fg_st_writer_new(&w, dir, d, n, 0, NULL, &err);
	if (!rc)
		fg_st_writer_no_sync(w);
	n_values = 0;
	for (i = 0; i < n && !rc; i++) {
		const struct fg_st_tensor *t = fg_st_at(set, i);

		if (t->dtype != FG_ST_BF16 || (mode == AS_ONE && d[i].dtype == t->dtype)) {
			rc = fg_st_writer_write(w, t->data, t->nbytes, &err);
			continue;
		}
		n_values += (size_t)t->nelem;
		for (k = 0; k < t->nelem && !rc; k++) {
			double v = fg_st_f32_at(t->data, t->dtype, k);
			float vf = (float)v;
			int h = exact_half(vf);
			uint16_t hb;
			int32_t vi;

			if ((mode == AS_F16 || mode == AS_BF16_HALFSAFE) && h < 0) {
				(*zeroed)++;
				vf = 0;
				h = 0;
			}
			hb = (uint16_t)h;
			if (d[i].dtype == FG_ST_F64) {
				rc = fg_st_writer_write(w, &v, 8, &err);
			} else if (d[i].dtype == FG_ST_I32) {
				vi = (int32_t)lrint(v);
				rc = fg_st_writer_write(w, &vi, 4, &err);
			} else if (d[i].dtype == FG_ST_F32) {
				rc = fg_st_writer_write(w, &vf, 4, &err);
			} else if (d[i].dtype == FG_ST_F16) {
				if (mode == AS_ONE)
					hb = k == poison ? pbits : (uint16_t)(h < 0 ? 0 : h);
				rc = fg_st_writer_write(w, &hb, 2, &err);
			} else {
				hb = fg_f32_to_bf16(vf); /* exact: vf is a bf16 value or 0 */
				rc = fg_st_writer_write(w, &hb, 2, &err);
			}
		}
	}
	if (!rc)
		rc = fg_st_writer_finish(w, &err);
	fg_st_writer_free(w);
	fg_st_free(set);
	free(d);
	snprintf(p, sizeof(p), "%s/config.json", dir);
	if (!rc && !(rc = fg_file_read(SRC "/config.json", 1 << 20, &cfg, &err)))
		rc = fg_file_write_atomic(p, cfg.data, cfg.len, 0644, &err);
	fg_buf_release(&cfg);
	if (rc)
		printf("# copy %s: %s\n", name, err.msg);
	return rc;
}

/* Bakes tmp/src into tmp/out with group 32 on `threads` threads. */
static int bake(const char *src, const char *out, int threads, struct fg_err *err)
{
	struct fg_int4_opts o;
	struct fg_int4_report rep;
	char s[512], d[512];

	memset(&o, 0, sizeof(o));
	o.group = GROUP;
	o.threads = threads;
	o.no_sync = 1;
	o.rehash = 1;
	snprintf(s, sizeof(s), "%s/%s", tmp, src);
	snprintf(d, sizeof(d), "%s/%s", tmp, out);
	return fg_int4_bake(strcmp(src, "orig") ? s : SRC, d, &o, &rep, err);
}

static int is_int4_part(const char *name)
{
	size_t n = strlen(name);

	return (n > 14 && !strcmp(name + n - 14, ".weight_packed")) ||
	       (n > 13 && (!strcmp(name + n - 13, ".weight_scale") || !strcmp(name + n - 13, ".weight_shape")));
}

/* Compares the bakes tmp/a (of the bf16 weights) and tmp/b: every INT4
 * tensor byte-equal, every other tensor the same values, b's float tensors
 * of dtype bdt. */
static void compare(const char *a, const char *b, int bdt, const char *label)
{
	struct fg_st_set *sa = NULL, *sb = NULL;
	struct fg_err err = { 0 };
	char pa[512], pb[512];
	size_t i, n_int4 = 0, n_kept = 0, bad = 0;

	snprintf(pa, sizeof(pa), "%s/%s", tmp, a);
	snprintf(pb, sizeof(pb), "%s/%s", tmp, b);
	if (fg_st_open(&sa, pa, &err) || fg_st_open(&sb, pb, &err)) {
		ok(0, "%s: outputs readable: %s", label, err.msg);
		fg_st_free(sa);
		return;
	}
	if (fg_st_count(sa) != fg_st_count(sb))
		bad++;
	for (i = 0; i < fg_st_count(sa); i++) {
		const struct fg_st_tensor *x = fg_st_at(sa, i), *y = fg_st_find(sb, x->name);
		uint64_t k;

		if (!y || x->nelem != y->nelem) {
			bad++;
			continue;
		}
		if (is_int4_part(x->name)) {
			n_int4++;
			if (x->dtype != y->dtype || x->nbytes != y->nbytes || memcmp(x->data, y->data, x->nbytes))
				bad++;
			continue;
		}
		n_kept++;
		if (x->dtype == FG_ST_BF16 && y->dtype != bdt)
			bad++;
		if (x->dtype == FG_ST_BF16)
			for (k = 0; k < x->nelem; k++)
				if (fg_st_f32_at(x->data, x->dtype, k) != fg_st_f32_at(y->data, y->dtype, k)) {
					bad++;
					break;
				}
	}
	ok(bad == 0 && n_int4 > 100 && n_kept > 10,
	   "%s: %zu INT4 tensors byte-equal to the bf16 bake's, %zu others kept in %s with the same values", label,
	   n_int4, n_kept, fg_st_dtype_name(bdt));
	fg_st_free(sa);
	fg_st_free(sb);
}

/* Files of tmp/a and tmp/b (model.safetensors, config.json) byte-equal. */
static void same_files(const char *a, const char *b, const char *label)
{
	static const char *const files[] = { "model.safetensors", "config.json" };
	struct fg_buf x = FG_BUF_INIT, y = FG_BUF_INIT;
	struct fg_err err = { 0 };
	char p[600];
	int same = 1;
	size_t i;

	for (i = 0; i < 2; i++) {
		fg_buf_reset(&x);
		fg_buf_reset(&y);
		snprintf(p, sizeof(p), "%s/%s/%s", tmp, a, files[i]);
		if (fg_file_read(p, (size_t)1 << 28, &x, &err))
			same = 0;
		snprintf(p, sizeof(p), "%s/%s/%s", tmp, b, files[i]);
		if (fg_file_read(p, (size_t)1 << 28, &y, &err))
			same = 0;
		if (x.len != y.len || memcmp(x.data, y.data, x.len))
			same = 0;
	}
	ok(same, "%s: -j1 and -j2 outputs byte-identical", label);
	fg_buf_release(&x);
	fg_buf_release(&y);
}

/* Logits of a 20-token sequence from the model folder tmp/name. */
static float *logits(const char *name, int *n_out)
{
	static const int32_t seq[] = { 2, 17, 99, 5, 201, 250, 3, 3, 40, 41, 42, 7, 128, 64, 9, 180, 33, 1, 77, 255 };
	struct fg_engine_opts o = { 2, 0, 0, FG_DEVICE_CPU };
	struct fg_engine *e = NULL;
	struct fg_err err = { 0 };
	char p[512];
	float *lg = NULL;
	int n = (int)(sizeof(seq) / sizeof(seq[0])), V;

	snprintf(p, sizeof(p), "%s/%s", tmp, name);
	if (fg_engine_load(&e, p, &o, &err)) {
		printf("# load %s: %s\n", name, err.msg);
		return NULL;
	}
	V = fg_engine_vocab_size(e);
	lg = malloc(sizeof(float) * (size_t)n * (size_t)V);
	if (fg_engine_forward_logits(e, seq, (size_t)n, 0, lg, &err)) {
		printf("# forward %s: %s\n", name, err.msg);
		free(lg);
		lg = NULL;
	}
	*n_out = n * V;
	fg_engine_free(e);
	return lg;
}

static void same_logits(const char *a, const char *b, const char *label)
{
	int na = 0, nb = 0;
	float *x = logits(a, &na), *y = logits(b, &nb);

	ok(x && y && na == nb && !memcmp(x, y, sizeof(float) * (size_t)na),
	   "%s: the engine's logits bit-identical to those of the bf16 bake", label);
	free(x);
	free(y);
}

/* fgpack bake prune-head --head int4 on tmp/a and tmp/b (tied heads: the rows
 * come from the embedding, BF16 in a, F16 in b): the same INT4 head. */
static void prune_int4(const char *a, const char *b, const char *label)
{
	struct fg_prune_report rep;
	struct fg_err err = { 0 };
	struct fg_st_set *sa = NULL, *sb = NULL;
	struct fg_buf ks = FG_BUF_INIT;
	char kp[512], src[512], out[2][512];
	static const char *const parts[] = { "lm_head.weight_packed", "lm_head.weight_scale", "lm_head.keep_ids" };
	int i, rc, same = 1, k = 0;

	rc = fg_buf_puts(&ks, "{\"keep_ids\": [", &err);
	for (i = 0; i < 256 && !rc; i++)
		if (i % 3 != 1)
			rc = fg_buf_printf(&ks, &err, "%s%d", k++ ? ", " : "", i);
	if (!rc)
		rc = fg_buf_printf(&ks, &err, "], \"pruned_vocab_K\": %d, \"full_vocab\": 256}", k);
	snprintf(kp, sizeof(kp), "%s/keep.json", tmp);
	if (!rc)
		rc = fg_file_write_atomic(kp, ks.data, ks.len, 0644, &err);
	for (i = 0; i < 2 && !rc; i++) {
		snprintf(src, sizeof(src), "%s/%s", tmp, i ? b : a);
		snprintf(out[i], sizeof(out[i]), "%s/%s-pruned", tmp, i ? b : a);
		rc = fg_prune_head(src, kp, out[i], 1, 1, &rep, &err);
	}
	if (!rc)
		rc = fg_st_open(&sa, out[0], &err) || fg_st_open(&sb, out[1], &err);
	for (i = 0; i < 3 && !rc; i++) {
		const struct fg_st_tensor *x = fg_st_find(sa, parts[i]), *y = fg_st_find(sb, parts[i]);

		if (!x || !y || x->nbytes != y->nbytes || memcmp(x->data, y->data, x->nbytes))
			same = 0;
	}
	ok(!rc && same && rep.head_int4 && rep.tied, "%s: prune-head --head int4 of an F16 head gives the BF16 head's "
	   "INT4 rows %s", label, err.msg);
	fg_st_free(sa);
	fg_st_free(sb);
	fg_buf_release(&ks);
}

/* A Linear of a dtype the bake cannot quantize, or a non-finite half. */
static void refused(const char *name, const char *tensor, int dtype, uint16_t pbits, const char *want)
{
	struct fg_err err = { 0 };
	char out[64], p[600], file[600];
	size_t z = 0;
	struct stat st;
	int rc;

	snprintf(out, sizeof(out), "%s-out", name);
	rc = copy_as(name, AS_ONE, tensor, dtype, 5 * 96 + 70, pbits, &z);
	if (!rc)
		rc = bake(name, out, 2, &err) == 0 ? -1 : 0;
	snprintf(p, sizeof(p), "%s/%s", tmp, out);
	snprintf(file, sizeof(file), "%s/%s/model.safetensors: tensor %s: ", tmp, name, tensor);
	ok(rc == 0 && strstr(err.msg, file) && strstr(err.msg, want) && !strchr(err.msg, '\n') && stat(p, &st),
	   "%s refused in one line naming file and tensor, no output: %s", name, err.msg);
}

int main(void)
{
	struct fg_err err = { 0 };
	size_t z16 = 0, zb = 0;

	if (!mkdtemp(tmp))
		return 1;
	setenv("FGPACK_HOME", tmp, 1); /* no store of the user's is read or noted */
	is_int(bake("orig", "b-bf16", 2, &err), 0, "bake the bf16 model made by transformers %s", err.msg);

	is_int(copy_as("f32", AS_F32, NULL, 0, 0, 0, NULL), 0, "F32 copy written");
	is_int(bake("f32", "b-f32-j1", 1, &err), 0, "bake its F32 copy, -j1 %s", err.msg);
	is_int(bake("f32", "b-f32-j2", 2, &err), 0, "bake its F32 copy, -j2 %s", err.msg);
	same_files("b-f32-j1", "b-f32-j2", "F32");
	compare("b-bf16", "b-f32-j2", FG_ST_F32, "F32");
	same_logits("b-bf16", "b-f32-j2", "F32 bake");

	is_int(copy_as("bf16h", AS_BF16_HALFSAFE, NULL, 0, 0, 0, &zb), 0, "bf16 twin with only half-exact values");
	is_int(copy_as("f16", AS_F16, NULL, 0, 0, 0, &z16), 0, "F16 copy written");
	ok(z16 == zb && z16 < 2000, "the same %zu values (of %zu) set to 0 in both", z16, n_values);
	is_int(bake("bf16h", "b-bf16h", 2, &err), 0, "bake the bf16 twin %s", err.msg);
	is_int(bake("f16", "b-f16-j1", 1, &err), 0, "bake the F16 copy, -j1 %s", err.msg);
	is_int(bake("f16", "b-f16-j2", 2, &err), 0, "bake the F16 copy, -j2 %s", err.msg);
	same_files("b-f16-j1", "b-f16-j2", "F16");
	compare("b-bf16h", "b-f16-j2", FG_ST_F16, "F16");
	same_logits("b-bf16h", "b-f16-j2", "F16 bake");
	prune_int4("b-bf16h", "b-f16-j2", "F16 bake");

	refused("f64", "model.layers.1.mlp.up_proj.weight", FG_ST_F64, 0,
		"dtype F64 is not supported (BF16, F16, F32)");
	refused("i32", "model.layers.0.self_attn.q_proj.weight", FG_ST_I32, 0,
		"dtype I32 is not supported (BF16, F16, F32)");
	refused("inf16", "model.layers.2.self_attn.k_proj.weight", FG_ST_F16, 0x7c00,
		"non-finite value (NaN or Inf) at [5, 70]");
	fg_rm_tree(tmp);
	return tap_done();
}
