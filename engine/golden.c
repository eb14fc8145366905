/* golden.c - record and replay golden transcripts; speed and perplexity. */
#include "engine/golden.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "buf.h"
#include "json.h"
#include "kernels/fg_kernels.h"
#include "sha256.h"
#include "tokenizer.h"
#include "version.h"

int fg_golden_default_prompts(cJSON **out, int n_vocab, int bos, int n, struct fg_err *err)
{
	static const int lens[] = { 1, 7, 16, 33, 64, 5, 12, 24 };
	cJSON *arr = cJSON_CreateArray();
	unsigned long long x = 88172645463325252ULL;
	int p, i;

	*out = NULL;
	if (!arr)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if (n_vocab < 2 || n < 1 || n > 64) {
		cJSON_Delete(arr);
		return fg_err_set(err, FG_EINVAL, "golden prompts: bad vocab %d or count %d", n_vocab, n);
	}
	for (p = 0; p < n; p++) {
		cJSON *o = cJSON_CreateObject(), *ids = o ? cJSON_AddArrayToObject(o, "ids") : NULL;
		int len = lens[p % 8];

		if (!ids) {
			cJSON_Delete(o);
			cJSON_Delete(arr);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
		for (i = 0; i < len; i++) {
			int id;

			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			id = (int)((x >> 33) % (unsigned long long)n_vocab);
			if (i == 0 && bos >= 0)
				id = bos;
			cJSON_AddItemToArray(ids, cJSON_CreateNumber(id));
		}
		cJSON_AddItemToArray(arr, o);
	}
	*out = arr;
	return 0;
}

/* The golden set's text prompts: short, so that a prompt and its tokens fit
 * small test contexts; plain English, code and digits, so that a real
 * tokenizer takes several paths. */
static const char *const golden_texts[] = {
	"The capital of France is",
	"Write a haiku about rain.",
	"def add(a, b):\n    return",
	"1, 1, 2, 3, 5, 8, 13,",
	"Q: What is 17 times 23?\nA:",
	"Once upon a time, a fox",
	"Translate to German: good morning",
	"The three primary colors are",
};

int fg_golden_text_prompts(cJSON **out, const struct fg_tokenizer *tok, int n_vocab, int bos, int n,
			   struct fg_err *err)
{
	cJSON *arr = NULL, *p;
	int i = 0, rc;

	*out = NULL;
	rc = fg_golden_default_prompts(&arr, n_vocab, bos, n, err);
	cJSON_ArrayForEach(p, arr) {
		int32_t *ids = NULL;
		size_t k, len = 0;
		cJSON *a;

		if (rc || i == (int)(sizeof(golden_texts) / sizeof(golden_texts[0])))
			break;
		rc = fg_tokenizer_encode(tok, golden_texts[i], strlen(golden_texts[i]), FG_TOK_ADD_SPECIAL,
					 &ids, &len, err);
		for (k = 0; !rc && k < len; k++)
			if (ids[k] < 0 || ids[k] >= n_vocab)
				rc = fg_err_set(err, FG_EINVAL, "the tokenizer gives id %d for golden prompt "
								"%d, beyond the model's %d ids",
						(int)ids[k], i, n_vocab);
		if (!rc && !len)
			rc = fg_err_set(err, FG_EINVAL, "golden prompt %d encodes to nothing", i);
		if (!rc && (!(a = cJSON_CreateArray()) ||
			    !cJSON_ReplaceItemInObject(p, "ids", a) ||
			    !cJSON_AddStringToObject(p, "text", golden_texts[i])))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		for (k = 0; !rc && k < len; k++)
			cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[k]));
		free(ids);
		i++;
	}
	if (rc) {
		cJSON_Delete(arr);
		return rc;
	}
	*out = arr;
	return 0;
}

static void cpu_model(char *out, size_t cap)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];

	snprintf(out, cap, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "model name", 10)) {
			char *c = strchr(line, ':'), *e;

			if (!c)
				break;
			c++;
			while (*c == ' ' || *c == '\t')
				c++;
			e = c + strlen(c);
			while (e > c && (e[-1] == '\n' || e[-1] == ' '))
				*--e = '\0';
			snprintf(out, cap, "%s", c);
			break;
		}
	}
	fclose(f);
}

/* "12.8" from a CUDA version number (12080), "unknown" for 0. */
static void cuda_version(char *out, size_t cap, int v)
{
	if (v > 0)
		snprintf(out, cap, "%d.%d", v / 1000, (v % 1000) / 10);
	else
		snprintf(out, cap, "unknown");
}

int fg_golden_device(cJSON **out, const struct fg_engine *e, struct fg_err *err)
{
	cJSON *d = cJSON_CreateObject();
	struct utsname u;
	char model[256];

	*out = NULL;
	if (!d)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if (e && strcmp(fg_engine_device(e), "cpu")) {
		struct fg_kdevice k;
		char cc[32], drv[32], rt[32];
		int rc = fg_engine_gpu_info(e, &k, err);

		if (rc) {
			cJSON_Delete(d);
			return rc;
		}
		snprintf(cc, sizeof(cc), "%d.%d", k.cc_major, k.cc_minor);
		cuda_version(drv, sizeof(drv), k.driver_api);
		cuda_version(rt, sizeof(rt), k.runtime);
		if (!cJSON_AddStringToObject(d, "kind", "cuda") ||
		    !cJSON_AddStringToObject(d, "gpu", fg_engine_device(e)) ||
		    !cJSON_AddStringToObject(d, "gpu_name", k.name) ||
		    !cJSON_AddStringToObject(d, "compute_capability", cc) ||
		    !cJSON_AddNumberToObject(d, "sm_count", k.sm_count) ||
		    !cJSON_AddNumberToObject(d, "memory_bytes", (double)k.mem_bytes) ||
		    !cJSON_AddStringToObject(d, "driver_version", k.driver) ||
		    !cJSON_AddStringToObject(d, "cuda_driver_api", drv) ||
		    !cJSON_AddStringToObject(d, "cuda_runtime", rt) ||
		    !cJSON_AddStringToObject(d, "engine_build", fg_build_id)) {
			cJSON_Delete(d);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
		*out = d;
		return 0;
	}
	cpu_model(model, sizeof(model));
	if (uname(&u))
		snprintf(u.machine, sizeof(u.machine), "unknown");
	if (!cJSON_AddStringToObject(d, "kind", "cpu") || !cJSON_AddStringToObject(d, "cpu", model) ||
	    !cJSON_AddStringToObject(d, "arch", u.machine) ||
	    !cJSON_AddStringToObject(d, "engine_build", fg_build_id)) {
		cJSON_Delete(d);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	*out = d;
	return 0;
}

/* The class-defining fields of a device identity; a transcript written
 * before gpu_name/compute_capability/sm_count existed has them only inside
 * "gpu": "NVIDIA H200 (sm_90, 132 SMs, 150 GB)". */
struct dev_class {
	char kind[16], name[256], cc[16], sms[16];
};

static void dev_class_of(struct dev_class *c, const cJSON *d)
{
	const char *kind = fg_json_str(d, "kind"), *gpu = fg_json_str(d, "gpu");
	const cJSON *sm = cJSON_GetObjectItemCaseSensitive(d, "sm_count");

	memset(c, 0, sizeof(*c));
	snprintf(c->kind, sizeof(c->kind), "%s", kind ? kind : "?");
	if (kind && !strcmp(kind, "cpu")) {
		/* the CPU engine gives the same bits with or without AVX2, so the
		 * model is identity only; the architecture is the class */
		snprintf(c->cc, sizeof(c->cc), "%s", fg_json_str(d, "arch") ? fg_json_str(d, "arch") : "?");
		return;
	}
	if (fg_json_str(d, "gpu_name")) {
		snprintf(c->name, sizeof(c->name), "%s", fg_json_str(d, "gpu_name"));
		snprintf(c->cc, sizeof(c->cc), "%s",
			 fg_json_str(d, "compute_capability") ? fg_json_str(d, "compute_capability") : "?");
		if (cJSON_IsNumber(sm))
			snprintf(c->sms, sizeof(c->sms), "%d", sm->valueint);
		return;
	}
	if (gpu) {
		const char *p = strstr(gpu, " (sm_"), *q;
		size_t n = p ? (size_t)(p - gpu) : strlen(gpu);

		snprintf(c->name, sizeof(c->name), "%.*s", (int)(n < 255 ? n : 255), gpu);
		if (p) {
			p += 5;
			for (q = p; *q >= '0' && *q <= '9'; q++)
				;
			if (q - p >= 2)
				snprintf(c->cc, sizeof(c->cc), "%.*s.%c", (int)(q - p - 1), p, q[-1]);
			q = strstr(p, " SMs");
			if (q) {
				const char *s = q;

				while (s > p && s[-1] >= '0' && s[-1] <= '9')
					s--;
				snprintf(c->sms, sizeof(c->sms), "%.*s", (int)(q - s), s);
			}
		}
	}
}

static int note_diff(struct fg_buf *diffs, const char *field, const char *a, const char *b,
		     struct fg_err *err)
{
	if (!diffs || !strcmp(a ? a : "", b ? b : ""))
		return 0;
	return fg_buf_printf(diffs, err, "%s%s: %s -> %s", diffs->len ? "; " : "", field,
			     a ? a : "(not recorded)", b ? b : "(not recorded)");
}

int fg_golden_device_compare(int *same, struct fg_buf *diffs, const cJSON *recorded,
			     const cJSON *here, struct fg_err *err)
{
	static const char *const identity[] = { "cpu", "driver_version", "cuda_driver_api",
						 "cuda_runtime", "engine_build" };
	struct dev_class a, b;
	size_t i;
	int rc = 0;

	dev_class_of(&a, recorded);
	dev_class_of(&b, here);
	*same = !strcmp(a.kind, b.kind) && !strcmp(a.name, b.name) && !strcmp(a.cc, b.cc) &&
		!strcmp(a.sms, b.sms) && strcmp(a.kind, "?");
	rc = note_diff(diffs, "kind", a.kind, b.kind, err);
	if (!rc && !strcmp(a.kind, b.kind)) {
		int cpu = !strcmp(a.kind, "cpu");

		if (!cpu)
			rc = note_diff(diffs, "gpu_name", a.name, b.name, err);
		if (!rc)
			rc = note_diff(diffs, cpu ? "arch" : "compute_capability", a.cc, b.cc, err);
		if (!rc && !cpu)
			rc = note_diff(diffs, "sm_count", a.sms, b.sms, err);
	}
	for (i = 0; !rc && i < sizeof(identity) / sizeof(identity[0]); i++)
		if (fg_json_str(recorded, identity[i]) || fg_json_str(here, identity[i]))
			rc = note_diff(diffs, identity[i], fg_json_str(recorded, identity[i]),
				       fg_json_str(here, identity[i]), err);
	return rc;
}

int fg_golden_ids(int32_t **out, size_t *n, const cJSON *arr, struct fg_err *err)
{
	const cJSON *it;
	size_t i = 0, cnt;
	int32_t *ids;

	*out = NULL;
	*n = 0;
	if (!cJSON_IsArray(arr))
		return fg_err_set(err, FG_EFORMAT, "expected an array of token ids");
	cnt = (size_t)cJSON_GetArraySize(arr);
	ids = malloc((cnt ? cnt : 1) * sizeof(*ids));
	if (!ids)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	cJSON_ArrayForEach(it, arr) {
		double v = cJSON_IsNumber(it) ? it->valuedouble : -1;

		if (v < 0 || v > 2147483647.0 || v != floor(v)) {
			free(ids);
			return fg_err_set(err, FG_EFORMAT, "token id %zu is not a non-negative integer", i);
		}
		ids[i++] = (int32_t)v;
	}
	*out = ids;
	*n = i;
	return 0;
}

struct rec {
	struct fg_sha256 *h;
	uint8_t chain[32];
	cJSON *tokens, *chains;
	int steps;
	int oom;
};

static int on_token(void *user, int32_t token, const float *logits, int n_vocab)
{
	struct rec *r = user;
	char hex[65];

	if (fg_sha256_update(r->h, r->chain, 32, NULL) ||
	    fg_sha256_update(r->h, logits, (size_t)n_vocab * sizeof(float), NULL) ||
	    fg_sha256_final(r->h, r->chain, NULL)) {
		r->oom = 1;
		return 1;
	}
	fg_hex_encode(r->chain, 32, hex);
	if (!cJSON_AddItemToArray(r->tokens, cJSON_CreateNumber(token)) ||
	    !cJSON_AddItemToArray(r->chains, cJSON_CreateString(hex)))
		r->oom = 1;
	r->steps++;
	return r->oom;
}

/* Runs one prompt; fills tokens and chains arrays. */
static int run_prompt(struct fg_engine *e, const int32_t *ids, size_t n, int max_new, cJSON *tokens,
		      cJSON *chains, uint8_t last[32], struct fg_err *err)
{
	struct rec r;
	int rc;

	memset(&r, 0, sizeof(r));
	r.tokens = tokens;
	r.chains = chains;
	rc = fg_sha256_new(&r.h, err);
	if (!rc)
		rc = fg_engine_generate(e, ids, n, max_new, on_token, &r, err);
	if (!rc && (r.oom || r.steps != max_new))
		rc = r.oom ? fg_err_set(err, FG_ENOMEM, "golden: out of memory or hashing failed")
			   : fg_err_set(err, FG_EDEVICE, "golden: engine stopped after %d of %d tokens",
					r.steps, max_new);
	memcpy(last, r.chain, 32);
	fg_sha256_free(r.h);
	return rc;
}

int fg_golden_record(cJSON **out, struct fg_engine *e, const cJSON *prompts, int max_new,
		     struct fg_err *err)
{
	cJSON *t = cJSON_CreateObject(), *parr = NULL, *dev = NULL;
	const cJSON *p;
	struct fg_buf lasts = FG_BUF_INIT;
	uint8_t last[32], dig[32];
	char hex[65];
	int rc = 0, i = 0;

	*out = NULL;
	if (!t)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_golden_device(&dev, e, err);
	if (!rc && (!cJSON_AddNumberToObject(t, "schema", FG_GOLDEN_SCHEMA) ||
		    !cJSON_AddNumberToObject(t, "max_new", max_new) ||
		    !cJSON_AddItemToObject(t, "device", dev) ||
		    !(parr = cJSON_AddArrayToObject(t, "prompts"))))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!rc) {
		/* the stop set run and serve use with this model (the steps go on
		 * past it: every prompt records max_new tokens) */
		int ne, k;
		const int32_t *eos = fg_engine_eos_ids(e, &ne);
		cJSON *a = cJSON_AddArrayToObject(t, "eos_token_ids");

		for (k = 0; a && k < ne; k++)
			if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(eos[k])))
				a = NULL;
		if (!a)
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	cJSON_ArrayForEach(p, prompts) {
		cJSON *o, *tok, *ch;
		int32_t *ids = NULL;
		size_t n;

		if (rc)
			break;
		rc = fg_golden_ids(&ids, &n, fg_json_arr(p, "ids"), err);
		if (rc) {
			fg_err_wrap(err, "golden prompt %d", i);
			break;
		}
		o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToObject(o, "ids", cJSON_Duplicate(fg_json_arr(p, "ids"), 1)) ||
		    !(tok = cJSON_AddArrayToObject(o, "tokens")) ||
		    !(ch = cJSON_AddArrayToObject(o, "chain"))) {
			cJSON_Delete(o);
			free(ids);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
		if (fg_json_str(p, "text"))
			cJSON_AddStringToObject(o, "text", fg_json_str(p, "text"));
		cJSON_AddItemToArray(parr, o);
		rc = run_prompt(e, ids, n, max_new, tok, ch, last, err);
		if (rc)
			fg_err_wrap(err, "golden prompt %d", i);
		else
			rc = fg_buf_append(&lasts, last, 32, err);
		free(ids);
		i++;
	}
	if (!rc)
		rc = fg_sha256_mem(lasts.data ? lasts.data : "", lasts.len, dig, err);
	if (!rc) {
		fg_hex_encode(dig, 32, hex);
		if (!cJSON_AddStringToObject(t, "digest", hex))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	fg_buf_release(&lasts);
	if (rc) {
		cJSON_Delete(t);
		return rc;
	}
	*out = t;
	return 0;
}

int fg_golden_replay(struct fg_golden_result *res, struct fg_engine *e, const cJSON *transcript,
		     struct fg_err *err)
{
	const cJSON *prompts = fg_json_arr(transcript, "prompts"), *p;
	long long max_new, schema;
	int pi = 0, rc = 0;

	memset(res, 0, sizeof(*res));
	res->level = FG_GOLDEN_LOGITS;
	res->prompt = res->step = res->chain_prompt = res->chain_step = -1;
	if (fg_json_int(transcript, "schema", &schema) || schema != FG_GOLDEN_SCHEMA)
		return fg_err_set(err, FG_EFORMAT, "golden transcript: schema is not %d", FG_GOLDEN_SCHEMA);
	if (!prompts || fg_json_int(transcript, "max_new", &max_new) || max_new < 1 || max_new > 65536)
		return fg_err_set(err, FG_EFORMAT, "golden transcript: no prompts or bad max_new");
	res->eos_same = -1;
	if (cJSON_GetObjectItemCaseSensitive(transcript, "eos_token_ids")) {
		/* the same ids, in any order (a set) */
		const cJSON *rec = fg_json_arr(transcript, "eos_token_ids"), *it;
		int ne, k;
		const int32_t *eos = fg_engine_eos_ids(e, &ne);

		if (!rec)
			return fg_err_set(err, FG_EFORMAT, "golden transcript: eos_token_ids is not a list");
		res->eos_same = 1;
		cJSON_ArrayForEach(it, rec) {
			if (!cJSON_IsNumber(it))
				return fg_err_set(err, FG_EFORMAT, "golden transcript: eos_token_ids holds a "
								 "non-number");
			/* the range first: converting 1e300 to an integer is undefined */
			if (!(it->valuedouble >= INT32_MIN && it->valuedouble <= INT32_MAX) ||
			    it->valuedouble != floor(it->valuedouble) ||
			    !fg_engine_is_eos(e, (int32_t)it->valuedouble))
				res->eos_same = 0;
		}
		for (k = 0; k < ne; k++) {
			int found = 0;

			cJSON_ArrayForEach(it, rec)
				found |= it->valuedouble == (double)eos[k];
			if (!found)
				res->eos_same = 0;
		}
	}
	cJSON_ArrayForEach(p, prompts) {
		const cJSON *want_tok = fg_json_arr(p, "tokens"), *want_ch = fg_json_arr(p, "chain");
		cJSON *tok = cJSON_CreateArray(), *ch = cJSON_CreateArray();
		int32_t *ids = NULL;
		size_t n;
		uint8_t last[32];
		int s;

		if (!tok || !ch) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		} else if (!want_tok || !want_ch || cJSON_GetArraySize(want_tok) != max_new ||
			   cJSON_GetArraySize(want_ch) != max_new) {
			rc = fg_err_set(err, FG_EFORMAT, "golden transcript: prompt %d: tokens/chain "
							 "are not %lld long", pi, max_new);
		} else {
			rc = fg_golden_ids(&ids, &n, fg_json_arr(p, "ids"), err);
			if (!rc)
				rc = run_prompt(e, ids, n, (int)max_new, tok, ch, last, err);
		}
		for (s = 0; !rc && s < max_new; s++) {
			const cJSON *wt = cJSON_GetArrayItem(want_tok, s), *gt = cJSON_GetArrayItem(tok, s);
			const cJSON *wc = cJSON_GetArrayItem(want_ch, s), *gc = cJSON_GetArrayItem(ch, s);

			res->steps++;
			/* a recorded token that is no token id is malformed, not a
			 * mismatch (its int32 would be undefined) */
			if (!cJSON_IsNumber(wt) || !(wt->valuedouble >= 0 && wt->valuedouble <= INT32_MAX) ||
			    wt->valuedouble != floor(wt->valuedouble) || !cJSON_IsString(wc)) {
				rc = fg_err_set(err, FG_EFORMAT, "golden transcript: prompt %d step %d "
								 "malformed", pi, s);
				break;
			}
			if (wt->valuedouble != gt->valuedouble) {
				res->level = FG_GOLDEN_MISMATCH;
				res->prompt = pi;
				res->step = s;
				res->want = (int32_t)wt->valuedouble;
				res->got = (int32_t)gt->valuedouble;
				break;
			}
			if (res->chain_prompt < 0 && strcmp(wc->valuestring, gc->valuestring)) {
				res->level = FG_GOLDEN_TOKENS;
				res->chain_prompt = pi;
				res->chain_step = s;
			}
		}
		free(ids);
		cJSON_Delete(tok);
		cJSON_Delete(ch);
		if (rc || res->level == FG_GOLDEN_MISMATCH)
			break;
		pi++;
	}
	if (!rc && pi == 0 && res->level != FG_GOLDEN_MISMATCH)
		rc = fg_err_set(err, FG_EFORMAT, "golden transcript: no prompts");
	return rc;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct count {
	int n;
};

static int count_token(void *user, int32_t token, const float *logits, int n_vocab)
{
	(void)token;
	(void)logits;
	(void)n_vocab;
	((struct count *)user)->n++;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double fg_golden_median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int fg_golden_speed(struct fg_golden_speed *s, struct fg_engine *e, const cJSON *prompts,
		    int warmup, int max_new, struct fg_err *err)
{
	const cJSON *p;
	double *tps;
	int i, rc = 0, n = cJSON_GetArraySize(prompts);
	int32_t one;

	memset(s, 0, sizeof(*s));
	s->max_new = max_new;
	s->warmup = warmup;
	tps = calloc(n > 0 ? (size_t)n : 1, sizeof(*tps));
	if (!tps)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (i = 0; !rc && i < warmup; i++) {
		struct count c = { 0 };

		one = (int32_t)(i % (fg_engine_vocab_size(e) > 0 ? fg_engine_vocab_size(e) : 1));
		rc = fg_engine_generate_ids(e, &one, 1, 1, count_token, &c, err);
	}
	cJSON_ArrayForEach(p, prompts) {
		struct count c = { 0 };
		int32_t *ids = NULL;
		size_t len;
		double t0, dt;

		if (rc)
			break;
		rc = fg_golden_ids(&ids, &len, fg_json_arr(p, "ids"), err);
		if (rc)
			break;
		s->requests++;
		t0 = now_s();
		/* an engine error ends this request, uncompleted; the next one runs */
		if (fg_engine_generate_ids(e, ids, len, max_new, count_token, &c, NULL) == 0 &&
		    c.n == max_new) {
			dt = now_s() - t0;
			tps[s->completed++] = dt > 0 ? max_new / dt : 0;
		}
		free(ids);
	}
	if (!rc)
		s->tps_median = fg_golden_median(tps, s->completed);
	free(tps);
	return rc;
}

/* one scored id's negative log-likelihood, added to *user (a double) */
static int add_nll(void *user, size_t i, int32_t token, const struct fg_engine_lp *lp)
{
	(void)i, (void)token;
	*(double *)user -= (double)lp->lp;
	return 0;
}

int fg_golden_perplexity(double *ppl, size_t *scored, struct fg_engine *e, const int32_t *ids,
			 size_t n, struct fg_err *err)
{
	double nll = 0;
	size_t max = (size_t)fg_engine_max_seq(e);
	int rc;

	*ppl = 0;
	*scored = 0;
	if (n > max)
		n = max;
	if (n < 2)
		return fg_err_set(err, FG_EINVAL, "perplexity needs at least 2 tokens, got %zu", n);
	if ((rc = fg_engine_score_lp(e, ids, n, 0, add_nll, &nll, err)))
		return rc;
	*scored = n - 1;
	*ppl = exp(nll / (double)(n - 1));
	return 0;
}
