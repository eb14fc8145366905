/* test_draft.c - the CPU assistant drafter (engine/draft.c) against
 * transformers 5.17's Gemma4AssistantForCausalLM drafting loop
 * (tests/oracle/assistant.py, fixtures tests/fixtures/oracle/assistant/
 * {plain,ordered}, drafting for the tiny target tests/fixtures/oracle/bf16):
 * for prompts of 1, 7, 19 and 44 tokens (the last two longer than the
 * window 8), the target's next token, its final-normed hidden state, then 4
 * drafts and every draft step's logits. Also the loading of assistants
 * (the engine refuses to run one, a token_ordering id out of range),
 * fg_draft_cpu_new's refusals of an assistant that does not fit the target,
 * and the centroid top-k override (the challenge's CENTROID_TOP_K,
 * fg_g4_set_centroid_top_k, fg_engine_set_drafter's top_k): the ordered
 * assistant with top-k k overridden drafts exactly as a copy of it whose
 * config.json says centroid_intermediate_top_k = k. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "engine/draft.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "fsutil.h"
#include "tap.h"

#define FIX "tests/fixtures/oracle"
#define K 4
/* Largest |logit| differences allowed against transformers (logits of
 * magnitude 5-9). The drafter's math alone is at fp32 noise: after the
 * 1-token prompt (one cached position, the target's own error negligible)
 * every step is within 5.7e-6 (TOL_EXACT). Longer prompts carry the target's
 * fp32 differences from transformers (its hidden state up to 4.5e-4 of values
 * up to ~20, and its cached keys and values) into the drafter, whose map
 * magnifies them step after step through post_projection -> pre_projection:
 * measured worst 2.3e-4 at step 1 (4.7e-5 when fed transformers' own hidden
 * state), 1.0e-2 by step 4. Changing the hidden state by a relative 1e-5
 * moves step 4's logits by 1.3e-3..6.5e-3 on the 19- and 44-token prompts,
 * the same size: the drafter's conditioning, not a fault. Hence 1e-3 for the
 * first step and 2e-2 after it; the drafts themselves must be transformers'
 * (smallest top-1/top-2 margin of the fixtures: 0.072). */
#define TOL_EXACT 1e-4
#define TOL_STEP1 1e-3
#define TOL 2e-2
#define TOL_H 5e-3

static float max_abs_diff(const float *a, const float *b, int n)
{
	float m = 0;
	int i;

	for (i = 0; i < n; i++)
		if (fabsf(a[i] - b[i]) > m || isnan(a[i] - b[i]))
			m = isnan(a[i] - b[i]) ? INFINITY : fabsf(a[i] - b[i]);
	return m;
}

static cJSON *read_json(const char *path)
{
	struct fg_buf b = FG_BUF_INIT;
	struct fg_err err = { 0 };
	cJSON *j = NULL;

	if (!fg_file_read(path, 1 << 22, &b, &err))
		j = cJSON_ParseWithLength(b.data, b.len);
	fg_buf_release(&b);
	return j;
}

/* One variant: every prompt of its oracle.json. */
static void check_variant(struct fg_engine *e, const char *name)
{
	const struct fg_g4_model *t = fg_engine_model(e);
	struct fg_g4_model *a = NULL;
	struct fg_draft_cpu *d = NULL;
	struct fg_buf lb = FG_BUF_INIT;
	struct fg_err err = { 0 };
	char path[256];
	cJSON *o;
	const cJSON *pr;
	float worst = 0, worst_h = 0, *want, *got = NULL, *tlog = NULL;
	int V, rc;

	snprintf(path, sizeof(path), FIX "/assistant/%s/oracle.json", name);
	o = read_json(path);
	snprintf(path, sizeof(path), FIX "/assistant/%s/logits.bin", name);
	if (!o || fg_file_read(path, 1 << 24, &lb, &err)) {
		ok(0, "%s: read oracle.json and logits.bin", name);
		goto out;
	}
	snprintf(path, sizeof(path), FIX "/assistant/%s", name);
	rc = fg_g4_model_load(&a, path, &err);
	is_int(rc, 0, "%s: the assistant loads: %s", name, err.msg);
	if (rc)
		goto out;
	rc = fg_draft_cpu_new(&d, a, t, &err);
	is_int(rc, 0, "%s: a drafter for the bf16 target: %s", name, err.msg);
	if (rc)
		goto out;
	V = a->cfg.vocab;
	got = malloc(sizeof(float) * (size_t)K * (size_t)V);
	tlog = malloc(sizeof(float) * (size_t)V);
	if (!got || !tlog) {
		ok(0, "memory");
		goto out;
	}
	cJSON_ArrayForEach(pr, cJSON_GetObjectItemCaseSensitive(o, "prompts"))
	{
		const cJSON *ids = cJSON_GetObjectItemCaseSensitive(pr, "prompt"), *it;
		const cJSON *hj = cJSON_GetObjectItemCaseSensitive(pr, "h");
		const cJSON *dj = cJSON_GetObjectItemCaseSensitive(pr, "drafts");
		int32_t prompt[64], drafts[K], again[K], b;
		float hwant[256];
		const float *h;
		struct fg_draft_kv kv;
		int n = 0, i, same = 1;
		size_t off = (size_t)cJSON_GetObjectItemCaseSensitive(pr, "logits_offset")->valuedouble;

		cJSON_ArrayForEach(it, ids) prompt[n++] = (int32_t)it->valuedouble;
		i = 0;
		cJSON_ArrayForEach(it, hj) hwant[i++] = (float)it->valuedouble;
		fg_engine_reset(e);
		rc = fg_engine_forward_logits(e, prompt, (size_t)n, 1, tlog, &err);
		b = fg_engine_argmax(tlog, V);
		is_int(b, cJSON_GetObjectItemCaseSensitive(pr, "last")->valuedouble, "%s, prompt of %d: the target's "
		       "next token (%s)", name, n, err.msg);
		h = fg_engine_last_hidden(e);
		ok(h != NULL && i == t->cfg.hidden, "%s, prompt of %d: the target's final-normed hidden state", name, n);
		if (!h)
			continue;
		if (max_abs_diff(h, hwant, i) > worst_h)
			worst_h = max_abs_diff(h, hwant, i);
		ok(max_abs_diff(h, hwant, i) < TOL_H, "%s, prompt of %d: it is transformers' hidden_states[-1] within %g "
		   "(%.3g; values up to ~20)", name, n, TOL_H, max_abs_diff(h, hwant, i));
		rc = fg_engine_draft_kv(e, &kv, &err) ||
		     fg_draft_cpu_propose(d, &kv, h, b, n, K, drafts, got, &err);
		is_int(rc, 0, "%s, prompt of %d: propose: %s", name, n, err.msg);
		if (rc)
			continue;
		i = 0;
		cJSON_ArrayForEach(it, dj) same &= i < K && drafts[i++] == (int32_t)it->valuedouble;
		ok(same && i == K, "%s, prompt of %d: drafts %d %d %d %d are transformers'", name, n, drafts[0], drafts[1],
		   drafts[2], drafts[3]);
		want = (float *)lb.data + off;
		if (off + (size_t)K * (size_t)V > lb.len / sizeof(float)) {
			ok(0, "%s: logits.bin too short", name);
			continue;
		}
		for (i = 0; i < K; i++) {
			float dlt = max_abs_diff(got + (size_t)i * (size_t)V, want + (size_t)i * (size_t)V, V);
			double tol = n == 1 ? TOL_EXACT : i == 0 ? TOL_STEP1 : TOL;

			if (dlt > worst)
				worst = dlt;
			ok(dlt < tol, "%s, prompt of %d, step %d: logits within %g of transformers' (%.3g)", name, n,
			   i + 1, tol, dlt);
		}
		/* transformers' own hidden state: only the caches' differences left */
		rc = fg_draft_cpu_propose(d, &kv, hwant, b, n, K, again, got, &err);
		ok(!rc && !memcmp(again, drafts, sizeof(drafts)) && max_abs_diff(got, want, V) < TOL_STEP1,
		   "%s, prompt of %d: fed transformers' hidden state, the same drafts, step 1 within %g (%.3g)", name,
		   n, TOL_STEP1, max_abs_diff(got, want, V));
		/* without logits: the same drafts */
		rc = fg_draft_cpu_propose(d, &kv, h, b, n, K, again, NULL, &err);
		ok(!rc && !memcmp(again, drafts, sizeof(drafts)), "%s, prompt of %d: the same drafts without logits",
		   name, n);
	}
	printf("# %s: worst |logit| difference from transformers %.3g, hidden state %.3g\n", name, worst, worst_h);
out:
	free(got);
	free(tlog);
	fg_draft_cpu_free(d);
	fg_g4_model_free(a);
	fg_buf_release(&lb);
	cJSON_Delete(o);
}

/* fg_draft_cpu_new on an assistant (or target) changed in one field. */
static void check_fit(struct fg_engine *e)
{
	const struct fg_g4_model *t = fg_engine_model(e);
	struct fg_g4_model *a = NULL, ac, tc;
	struct fg_g4_layer *ls = NULL;
	struct fg_draft_cpu *d = NULL;
	struct fg_err err = { 0 };
	struct fg_draft_kv kv;
	float h[96] = { 0 };
	int32_t out[FG_DRAFT_MAX_K + 1];
	int rc, i;

	if (fg_g4_model_load(&a, FIX "/assistant/plain", &err)) {
		ok(0, "load the plain assistant: %s", err.msg);
		return;
	}
#define REFUSED(am, tm, want, what)                                                                    \
	do {                                                                                           \
		rc = fg_draft_cpu_new(&d, am, tm, &err);                                               \
		ok(rc == FG_EINVAL && strstr(err.msg, want) && !strchr(err.msg, '\n'), "%s refused: %s", what, \
		   err.msg);                                                                           \
		fg_draft_cpu_free(d);                                                                  \
		d = NULL;                                                                              \
	} while (0)
	ac = *a;
	ac.cfg.backbone = 64;
	REFUSED(&ac, t, "drafter backbone_hidden_size 64 differs from the target's hidden_size 96", "backbone 64");
	ac = *a;
	ac.cfg.vocab = 256;
	REFUSED(&ac, t, "drafter vocab_size 256 differs from the target's vocab_size 512", "vocab 256");
	REFUSED(t, t, "the drafter is not a gemma4_assistant model", "a target as drafter");
	REFUSED(a, a, "the target is a gemma4_assistant drafter", "an assistant as target");
	ls = malloc(sizeof(*ls) * (size_t)a->cfg.n_layers);
	if (ls) {
		memcpy(ls, a->layers, sizeof(*ls) * (size_t)a->cfg.n_layers);
		ac = *a;
		ac.layers = ls;
		ls[1].head_dim = 128;
		REFUSED(&ac, t, "drafter full layers have head_dim 128, the target's layer 2 (their KV source) 64",
			"full head_dim 128");
		ls[1].head_dim = 64;
		ls[2].kv_heads = 1;
		REFUSED(&ac, t, "drafter sliding layers have 1 KV heads, the target's layer 4 (their KV source) 2",
			"sliding kv heads 1");
	}
	/* a target whose sliding layers all share KV: no source of that type */
	tc = *t;
	for (i = 0; i < tc.cfg.n_layers; i++)
		if (tc.cfg.layer_type[i] == FG_G4_SLIDING)
			tc.cfg.layer_type[i] = FG_G4_FULL;
	REFUSED(a, &tc, "drafter layer 0 is a sliding layer, and the target has no sliding layer with its own KV",
		"a target without sliding layers");
#undef REFUSED

	/* propose's arguments */
	rc = fg_draft_cpu_new(&d, a, t, &err);
	is_int(rc, 0, "a drafter: %s", err.msg);
	fg_engine_reset(e);
	if (!rc && !fg_engine_forward_logits(e, (const int32_t[]){ 2, 5, 9 }, 3, 1, NULL, &err) &&
	    !fg_engine_draft_kv(e, &kv, &err)) {
		rc = fg_draft_cpu_propose(d, &kv, h, 1, 3, FG_DRAFT_MAX_K + 1, out, NULL, &err);
		ok(rc == FG_EINVAL && strstr(err.msg, "drafts per round"), "k 17 refused: %s", err.msg);
		rc = fg_draft_cpu_propose(d, &kv, h, 1, 0, 1, out, NULL, &err);
		ok(rc == FG_EINVAL && strstr(err.msg, "position 0"), "position 0 refused: %s", err.msg);
		rc = fg_draft_cpu_propose(d, &kv, h, 512, 3, 1, out, NULL, &err);
		ok(rc == FG_EINVAL && strstr(err.msg, "512"), "token 512 refused: %s", err.msg);
		kv.k[FG_G4_SLIDING] = NULL;
		rc = fg_draft_cpu_propose(d, &kv, h, 1, 3, 1, out, NULL, &err);
		ok(rc == FG_EINVAL && strstr(err.msg, "sliding cache is missing"), "no sliding cache refused: %s",
		   err.msg);
		fg_engine_draft_kv(e, &kv, &err);
		kv.cap[FG_G4_FULL] = 2;
		rc = fg_draft_cpu_propose(d, &kv, h, 1, 3, 1, out, NULL, &err);
		ok(rc == FG_EINVAL && strstr(err.msg, "full cache is too short (the drafter reads 3 positions)"),
		   "a full cache shorter than pos refused: %s", err.msg);
		fg_engine_draft_kv(e, &kv, &err);
		rc = fg_draft_cpu_propose(d, &kv, h, 1, 3, FG_DRAFT_MAX_K, out, NULL, &err);
		ok(!rc, "%d drafts of a zero hidden state run: %s", FG_DRAFT_MAX_K, err.msg);
	} else
		ok(0, "setup: the target's caches: %s", err.msg);
	fg_draft_cpu_free(d);
	free(ls);
	fg_g4_model_free(a);
}

/* A copy of the ordered assistant whose token_ordering holds id at index 7. */
static int bad_ordering(const char *dir, int64_t id)
{
	struct fg_buf st = FG_BUF_INIT, cf = FG_BUF_INIT;
	struct fg_err err = { 0 };
	char p[512];
	cJSON *hdr = NULL;
	const cJSON *t, *offs;
	uint64_t hl = 0;
	size_t at;
	int i, rc = -1;

	if (fg_file_read(FIX "/assistant/ordered/model.safetensors", 1 << 24, &st, &err) ||
	    fg_file_read(FIX "/assistant/ordered/config.json", 1 << 20, &cf, &err) || st.len < 8)
		goto out;
	for (i = 0; i < 8; i++)
		hl |= (uint64_t)(unsigned char)st.data[i] << (8 * i);
	if (hl > st.len - 8 || !(hdr = cJSON_ParseWithLength(st.data + 8, (size_t)hl)))
		goto out;
	t = cJSON_GetObjectItemCaseSensitive(hdr, "masked_embedding.token_ordering");
	offs = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
	if (!offs)
		goto out;
	at = 8 + (size_t)hl + (size_t)cJSON_GetArrayItem(offs, 0)->valuedouble + 7 * 8;
	if (at + 8 > st.len)
		goto out;
	for (i = 0; i < 8; i++)
		st.data[at + (size_t)i] = (char)((uint64_t)id >> (8 * i));
	snprintf(p, sizeof(p), "%s/model.safetensors", dir);
	if (fg_file_write_atomic(p, st.data, st.len, 0644, &err))
		goto out;
	snprintf(p, sizeof(p), "%s/config.json", dir);
	if (fg_file_write_atomic(p, cf.data, cf.len, 0644, &err))
		goto out;
	rc = 0;
out:
	cJSON_Delete(hdr);
	fg_buf_release(&st);
	fg_buf_release(&cf);
	return rc;
}

static void check_load(void)
{
	char dir[] = "/tmp/fg_test_draft_XXXXXX";
	struct fg_engine *e = NULL;
	struct fg_g4_model *m = NULL;
	struct fg_err err = { 0 };
	static const int64_t bad[] = { 512, -1, (int64_t)1 << 33 };
	size_t i;
	int rc;

	rc = fg_engine_load(&e, FIX "/assistant/plain", NULL, &err);
	ok(rc == FG_EINVAL && !strcmp(err.msg, FIX "/assistant/plain is a gemma4_assistant drafter; use it as a "
				      "drafter (--drafter)"), "the engine refuses to run an assistant: %s", err.msg);
	fg_engine_free(e);
	rc = fg_g4_model_load(&m, FIX "/assistant/ordered", &err);
	is_int(rc, 0, "the ordered assistant loads: %s", err.msg);
	if (!rc) {
		int seen[512] = { 0 }, perm = 1;

		for (i = 0; i < 512; i++)
			perm &= m->ordering[i] >= 0 && m->ordering[i] < 512 && !seen[m->ordering[i]]++;
		ok(perm && m->centroids.rows == 32 && m->pre_proj.cols == 192 && m->post_proj.rows == 96 &&
			   m->head.w == m->embed.w && m->layers[0].kv_src == -1 && !m->layers[0].k.w,
		   "token_ordering (I64) read as a permutation of 0..511, centroids [32][48], projections, tied head, "
		   "no k/v");
	}
	fg_g4_model_free(m);
	m = NULL;
	if (!mkdtemp(dir)) {
		ok(0, "setup: mkdtemp");
		return;
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (bad_ordering(dir, bad[i])) {
			ok(0, "setup: a bad token_ordering");
			continue;
		}
		rc = fg_g4_model_load(&m, dir, &err);
		ok(rc == FG_EFORMAT && strstr(err.msg, "masked_embedding.token_ordering: id") &&
			   strstr(err.msg, "at 7 is out of range (vocab 512)"),
		   "token_ordering id %lld refused: %s", (long long)bad[i], err.msg);
		fg_g4_model_free(m);
		m = NULL;
	}
	fg_rm_tree(dir);
}

/* A copy of the ordered assistant in dir whose config.json has
 * centroid_intermediate_top_k = k (the weights byte for byte). */
static int copy_with_top_k(const char *dir, int k)
{
	struct fg_buf st = FG_BUF_INIT, cf = FG_BUF_INIT;
	struct fg_err err = { 0 };
	cJSON *c = NULL;
	char p[512], *txt = NULL;
	int rc = -1;

	if (fg_file_read(FIX "/assistant/ordered/model.safetensors", 1 << 24, &st, &err) ||
	    fg_file_read(FIX "/assistant/ordered/config.json", 1 << 20, &cf, &err) ||
	    !(c = cJSON_ParseWithLength(cf.data, cf.len)) ||
	    !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(c, "centroid_intermediate_top_k")) ||
	    !cJSON_ReplaceItemInObjectCaseSensitive(c, "centroid_intermediate_top_k", cJSON_CreateNumber(k)) ||
	    !(txt = cJSON_Print(c)))
		goto out;
	snprintf(p, sizeof(p), "%s/model.safetensors", dir);
	if (fg_file_write_atomic(p, st.data, st.len, 0644, &err))
		goto out;
	snprintf(p, sizeof(p), "%s/config.json", dir);
	if (fg_file_write_atomic(p, txt, strlen(txt), 0644, &err))
		goto out;
	rc = 0;
out:
	cJSON_free(txt);
	cJSON_Delete(c);
	fg_buf_release(&st);
	fg_buf_release(&cf);
	return rc;
}

/* The drafts [np][K] and step logits [np][K][V] of assistant a at every
 * prompt of the ordered oracle. */
static int drafts_of(struct fg_engine *e, const struct fg_g4_model *a, const cJSON *prompts, int32_t *drafts,
		     float *logits, struct fg_err *err)
{
	const struct fg_g4_model *t = fg_engine_model(e);
	struct fg_draft_cpu *d = NULL;
	const cJSON *pr;
	float *tlog = malloc(sizeof(float) * (size_t)t->cfg.vocab);
	size_t at = 0;
	int rc = tlog ? fg_draft_cpu_new(&d, a, t, err) : fg_err_set(err, FG_ENOMEM, "out of memory");

	cJSON_ArrayForEach(pr, prompts)
	{
		const cJSON *it;
		int32_t prompt[64];
		struct fg_draft_kv kv;
		int n = 0;

		if (rc)
			break;
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(pr, "prompt")) prompt[n++] = (int32_t)it->valuedouble;
		fg_engine_reset(e);
		rc = fg_engine_forward_logits(e, prompt, (size_t)n, 1, tlog, err);
		if (!rc)
			rc = fg_engine_draft_kv(e, &kv, err);
		if (!rc)
			rc = fg_draft_cpu_propose(d, &kv, fg_engine_last_hidden(e), fg_engine_argmax(tlog, t->cfg.vocab), n,
						  K, drafts + at * K, logits + at * K * (size_t)t->cfg.vocab, err);
		at++;
	}
	fg_draft_cpu_free(d);
	free(tlog);
	return rc;
}

struct collect {
	int32_t *ids;
	int n, cap;
};

static int collect_cb(void *user, int32_t token, const float *logits, int n_vocab)
{
	struct collect *c = user;

	(void)logits, (void)n_vocab;
	if (c->n < c->cap)
		c->ids[c->n++] = token;
	return 0;
}

/* max_new tokens after prompt, as the engine decodes them (with its drafter
 * if it has one) into ids [max_new]. */
static int greedy_ids(struct fg_engine *e, const int32_t *prompt, size_t n, int max_new, int32_t *ids,
		      struct fg_err *err)
{
	struct collect c = { ids, 0, max_new };
	int rc = fg_engine_generate_ids(e, prompt, n, max_new, collect_cb, &c, err);

	if (!rc && c.n != max_new)
		rc = fg_err_set(err, FG_EINVAL, "%d tokens, not %d", c.n, max_new);
	return rc;
}

/* The centroid top-k override against a config that says the same k. */
static void check_top_k(struct fg_engine *e)
{
	static const int ks[] = { 1, 2, 7, 32 };
	char dir[] = "/tmp/fg_test_topk_XXXXXX";
	struct fg_g4_model *a = NULL, *b = NULL, *plain = NULL;
	struct fg_g4_config c;
	struct fg_err err = { 0 };
	cJSON *o = read_json(FIX "/assistant/ordered/oracle.json");
	const cJSON *prompts = cJSON_GetObjectItemCaseSensitive(o, "prompts");
	int np = cJSON_GetArraySize(prompts), V = 512, i, j, rc;
	size_t nd = (size_t)np * K, nl = nd * (size_t)V;
	int32_t *d0 = malloc(sizeof(int32_t) * nd), *da = malloc(sizeof(int32_t) * nd), *db = malloc(sizeof(int32_t) * nd);
	float *l0 = malloc(sizeof(float) * nl), *la = malloc(sizeof(float) * nl), *lb = malloc(sizeof(float) * nl);
	int32_t *base = NULL, *spec = NULL;

	if (!o || np < 2 || !d0 || !da || !db || !l0 || !la || !lb || !mkdtemp(dir)) {
		ok(0, "setup: the ordered oracle's prompts, memory, a temporary folder");
		goto out;
	}
	/* the config's own top-k (4): the reference */
	rc = fg_g4_model_load(&a, FIX "/assistant/ordered", &err) || drafts_of(e, a, prompts, d0, l0, &err);
	ok(!rc && a->cfg.centroid_top_k == 4, "ordered assistant, its config's top 4: drafts at %d prompts: %s", np,
	   err.msg);
	fg_g4_model_free(a);
	a = NULL;
	for (i = 0; !rc && i < (int)(sizeof(ks) / sizeof(ks[0])); i++) {
		int k = ks[i], same_d, same_l, diff_d = 0;

		rc = fg_g4_model_load(&a, FIX "/assistant/ordered", &err) || fg_g4_set_centroid_top_k(&a->cfg, k, &err) ||
		     drafts_of(e, a, prompts, da, la, &err);
		ok(!rc && a->cfg.centroid_top_k == k, "top-k %d set over the config's 4: drafts: %s", k, err.msg);
		if (!rc && copy_with_top_k(dir, k)) {
			ok(0, "setup: a copy with centroid_intermediate_top_k %d", k);
			rc = -1;
		}
		if (!rc)
			rc = fg_g4_model_load(&b, dir, &err) || drafts_of(e, b, prompts, db, lb, &err);
		ok(!rc && b->cfg.centroid_top_k == k, "a copy whose config says %d: drafts: %s", k, err.msg);
		if (rc)
			break;
		same_d = !memcmp(da, db, sizeof(int32_t) * nd);
		same_l = !memcmp(la, lb, sizeof(float) * nl);
		ok(same_d && same_l, "top-k %d: the override gives the copy's drafts and logits bit for bit, %d prompts x "
		   "%d steps", k, np, K);
		for (j = 0; j < (int)nd; j++)
			diff_d += da[j] != d0[j];
		if (k == 1) /* one cluster of 16 tokens instead of 4: other drafts */
			ok(diff_d > 0, "top-k 1: %d of %d drafts differ from the config's top 4", diff_d, (int)nd);
		if (k != 4)
			ok(memcmp(la, l0, sizeof(float) * nl) != 0, "top-k %d: the step logits differ from top 4's", k);
		fg_g4_model_free(a);
		fg_g4_model_free(b);
		a = b = NULL;
	}
	fg_g4_model_free(a);
	fg_g4_model_free(b);
	a = b = NULL;

	/* bad values, one line each, the config left as it was */
	if (fg_g4_model_load(&a, FIX "/assistant/ordered", &err) ||
	    fg_g4_model_load(&plain, FIX "/assistant/plain", &err)) {
		ok(0, "setup: load the assistants: %s", err.msg);
		goto out;
	}
#define TOPK_REFUSED(cfg, k, want)                                                                      \
	do {                                                                                            \
		int was_ = (cfg)->centroid_top_k;                                                       \
		rc = fg_g4_set_centroid_top_k(cfg, k, &err);                                            \
		ok(rc == FG_EINVAL && strstr(err.msg, want) && !strchr(err.msg, '\n') &&                \
			   (cfg)->centroid_top_k == was_,                                               \
		   "top-k %d refused: %s", k, err.msg);                                                 \
	} while (0)
	TOPK_REFUSED(&a->cfg, 33, "centroid top-k 33 is out of the range 1..32 (num_centroids 32, and at most 64)");
	TOPK_REFUSED(&a->cfg, -1, "centroid top-k -1 is out of the range 1..32");
	c = a->cfg;
	c.n_centroids = 128;
	TOPK_REFUSED(&c, 65, "centroid top-k 65 is out of the range 1..64 (num_centroids 128, and at most 64)");
	ok(!fg_g4_set_centroid_top_k(&c, 64, &err) && c.centroid_top_k == 64, "top-k 64 of 128 centroids taken");
	TOPK_REFUSED(&plain->cfg, 4, "centroid top-k 4 given, but the drafter has no centroid head "
				     "(use_ordered_embeddings is off)");
	ok(!fg_g4_set_centroid_top_k(&plain->cfg, 0, &err) && !fg_g4_set_centroid_top_k(&a->cfg, 0, &err) &&
		   a->cfg.centroid_top_k == 4,
	   "top-k 0 keeps the config's, with or without a centroid head");
#undef TOPK_REFUSED

	/* through the engine: the override in effect, bad values refused with
	 * the drafter kept, and the tokens plain greedy's whatever top-k */
	{
		enum { NEW = 24 };
		static const int32_t pr[] = { 2, 17, 99, 5, 300, 41, 8, 8, 256, 3 };
		rc = fg_engine_set_drafter(e, FIX "/assistant/ordered", 4, 0, &err);
		ok(!rc && fg_engine_draft_top_k(e) == 4, "engine: top-k 0 is the config's 4 (%d): %s",
		   fg_engine_draft_top_k(e), err.msg);
		rc = fg_engine_set_drafter(e, FIX "/assistant/ordered", 4, 33, &err);
		ok(rc == FG_EINVAL && strstr(err.msg, "drafter " FIX "/assistant/ordered: centroid top-k 33 is out of the "
					     "range 1..32") && !strchr(err.msg, '\n') && fg_engine_draft_top_k(e) == 4 &&
			   fg_engine_draft_tokens(e) == 4,
		   "engine: top-k 33 refused, the drafter kept: %s", err.msg);
		rc = fg_engine_set_drafter(e, FIX "/assistant/plain", 4, 2, &err);
		ok(rc == FG_EINVAL && strstr(err.msg, "no centroid head") && fg_engine_draft_top_k(e) == 4,
		   "engine: top-k for a drafter without centroids refused: %s", err.msg);
		rc = fg_engine_set_drafter(e, FIX "/assistant/plain", 4, 0, &err);
		ok(!rc && fg_engine_draft_top_k(e) == 0 && fg_engine_draft_tokens(e) == 4,
		   "engine: a drafter without centroids, no top-k: 0 in effect: %s", err.msg);
		base = malloc(sizeof(int32_t) * NEW);
		spec = malloc(sizeof(int32_t) * NEW);
		rc = fg_engine_set_drafter(e, NULL, 0, 0, &err) || !base || !spec;
		if (!rc) {
			rc = greedy_ids(e, pr, 10, NEW, base, &err);
			ok(!rc && fg_engine_draft_top_k(e) == 0, "engine: plain greedy, no drafter: %s", err.msg);
		}
		for (i = 0; !rc && i < (int)(sizeof(ks) / sizeof(ks[0])); i++) {
			struct fg_engine_spec_stats ss;

			rc = fg_engine_set_drafter(e, FIX "/assistant/ordered", 4, ks[i], &err) ||
			     greedy_ids(e, pr, 10, NEW, spec, &err);
			fg_engine_spec_stats(e, &ss);
			ok(!rc && fg_engine_draft_top_k(e) == ks[i] && !memcmp(spec, base, sizeof(int32_t) * NEW) &&
				   ss.rounds > 0,
			   "engine, top-k %d: plain greedy's %d tokens (%lld rounds, %lld of %lld drafts kept): %s", ks[i],
			   NEW, ss.rounds, ss.accepted, ss.drafted, err.msg);
		}
		fg_engine_set_drafter(e, NULL, 0, 0, &err);
	}
out:
	free(base);
	free(spec);
	free(d0), free(da), free(db), free(l0), free(la), free(lb);
	fg_g4_model_free(a);
	fg_g4_model_free(b);
	fg_g4_model_free(plain);
	cJSON_Delete(o);
	fg_rm_tree(dir);
}

int main(void)
{
	struct fg_engine *e = NULL;
	struct fg_err err = { 0 };
	int rc = fg_engine_load(&e, FIX "/bf16", NULL, &err);

	is_int(rc, 0, "the bf16 target loads on the CPU: %s", err.msg);
	if (rc)
		return tap_done();
	check_variant(e, "plain");
	check_variant(e, "ordered");
	check_variant(e, "ordered-odd"); /* hidden 20, MLP 36: no width a multiple of 8 */
	check_fit(e);
	check_load();
	check_top_k(e);
	fg_engine_free(e);
	return tap_done();
}
