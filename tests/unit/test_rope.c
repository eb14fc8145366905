/* test_rope.c - the engine's RoPE tables (engine/rope.c, parse_rope in
 * engine/config.c) against the ones transformers 5.17 itself computed for
 * Gemma 4 configs of every rope_type (tests/fixtures/oracle/rope_tables.json,
 * made by tests/oracle/rope_probe.py): inverse frequencies bit for bit, the
 * attention factor, cos and sin at the last position of each uncached pass
 * within max_position_embeddings; and every config transformers refuses (or
 * whose cos/sin would not fit the head) refused by the engine in one line
 * naming the key. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

#include "engine/config.h"
#include "engine/cpu/ops.h"
#include "engine/rope.h"
#include "buf.h"
#include "fsutil.h"
#include "json.h"

#define TABLES "tests/fixtures/oracle/rope_tables.json"

static char *config_text(const cJSON *params, int max_pos)
{
	char *rp = cJSON_PrintUnformatted(params), *out = malloc(4096);

	snprintf(out, 4096,
		 "{\"model_type\": \"gemma4_text\", \"vocab_size\": 64, \"vocab_size_per_layer_input\": 64,"
		 " \"hidden_size\": 32, \"intermediate_size\": 32, \"num_hidden_layers\": 2,"
		 " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 16,"
		 " \"global_head_dim\": 32, \"hidden_size_per_layer_input\": 0,"
		 " \"layer_types\": [\"sliding_attention\", \"full_attention\"], \"sliding_window\": 4,"
		 " \"max_position_embeddings\": %d, \"rope_parameters\": %s}",
		 max_pos, rp ? rp : "null");
	free(rp);
	return out;
}

/* float32 values of a JSON array into out[n]; returns n or -1 */
static int floats(const cJSON *a, float *out, int cap)
{
	const cJSON *it;
	int n = 0;

	cJSON_ArrayForEach(it, a) {
		if (n == cap || !cJSON_IsNumber(it))
			return -1;
		out[n++] = (float)it->valuedouble;
	}
	return n;
}

/* transformers' cos/sin row at position pos: emb = cat(freqs, freqs),
 * times the attention scaling */
static double trig_diff(const cJSON *rec, const float *inv, int d, int pos, float af, int use_sin)
{
	float ref[64];
	int n = floats(rec, ref, 64), i;
	double worst = 0;

	if (n != d)
		return INFINITY;
	for (i = 0; i < d; i++) {
		float a = (float)pos * inv[i % (d / 2)];
		float v = (float)(use_sin ? sin((double)a) : cos((double)a)) * af;
		double e = fabs((double)v - (double)ref[i]);

		worst = e > worst ? e : worst;
	}
	return worst;
}

static void check_case(const cJSON *cs)
{
	const char *name = fg_json_str(cs, "name");
	long long M = 0;
	const cJSON *types = cJSON_GetObjectItemCaseSensitive(cs, "types"), *t;
	struct fg_g4_config c;
	struct fg_err err = { 0 };
	char *txt;
	int rc, fits = 1;

	fg_json_int(cs, "max_position_embeddings", &M);
	txt = config_text(cJSON_GetObjectItemCaseSensitive(cs, "rope_parameters"), (int)M);
	rc = fg_g4_config_parse(&c, txt, strlen(txt), "config.json", &err);
	free(txt);
	/* cos/sin shorter than the head: transformers' apply_rotary_pos_emb
	 * cannot broadcast them, so its model fails at the first forward */
	cJSON_ArrayForEach(t, types) {
		long long hd = 0;
		const cJSON *u;

		fg_json_int(t, "head_dim", &hd);
		cJSON_ArrayForEach(u, fg_json_arr(t, "uncached"))
			if (cJSON_GetArraySize(fg_json_arr(u, "cos_last")) != hd)
				fits = 0;
	}
	if (fg_json_str(cs, "error") || !fits) {
		ok(rc != 0 && strstr(err.msg, "key rope_parameters.") && !strchr(err.msg, '\n'),
		   "%s: transformers %s; the engine refuses in one line: %s", name,
		   fits ? "refuses the config" : "cannot apply its cos/sin", err.msg);
		return;
	}
	ok(rc == 0, "%s: the engine parses it (%s)", name, rc ? err.msg : "ok");
	if (rc)
		return;
	cJSON_ArrayForEach(t, types) {
		int full = !strcmp(t->string, "full_attention");
		const struct fg_g4_rope *r = &c.rope[full ? FG_G4_FULL : FG_G4_SLIDING];
		int d = full ? c.global_head_dim : c.head_dim, n, i, bits = 0, calls = 0;
		float inv[64], ref[64];
		double af = 0, trig = 0;
		const cJSON *u;

		fg_g4_rope_table(inv, r, d);
		n = floats(fg_json_arr(t, "inv_freq"), ref, 64);
		for (i = 0; i < n && i < d / 2; i++)
			bits += !memcmp(&inv[i], &ref[i], sizeof(float));
		ok(n == d / 2 && bits == n, "%s %s (%s): %d of %d inverse frequencies bit-identical to transformers'",
		   name, t->string, fg_json_str(t, "rope_type"), bits, d / 2);
		if (bits != n)
			for (i = 0; i < n && i < d / 2; i++)
				printf("#   inv[%d] engine %.9g transformers %.9g\n", i, inv[i], ref[i]);
		u = cJSON_GetObjectItemCaseSensitive(t, "attention_scaling");
		af = cJSON_IsNumber(u) ? u->valuedouble : NAN;
		ok(fabs(af - r->attention) <= 1e-15 * fabs(af), "%s %s: attention factor %.17g (transformers %.17g)",
		   name, t->string, r->attention, af);
		/* the uncached passes the engine can serve (positions below
		 * max_position_embeddings): same table, cos and sin x factor */
		cJSON_ArrayForEach(u, fg_json_arr(t, "uncached")) {
			long long L = 0;
			float uinv[64];

			fg_json_int(u, "L", &L);
			if (L > M)
				continue;
			calls++;
			if (floats(fg_json_arr(u, "inv_freq"), uinv, 64) != d / 2 ||
			    memcmp(uinv, ref, sizeof(float) * (size_t)(d / 2)))
				trig = INFINITY;
			trig = fmax(trig, trig_diff(fg_json_arr(u, "cos_last"), inv, d, (int)L - 1, (float)r->attention, 0));
			trig = fmax(trig, trig_diff(fg_json_arr(u, "sin_last"), inv, d, (int)L - 1, (float)r->attention, 1));
		}
		ok(calls > 0 && trig <= 2e-7, "%s %s: %d passes within max_position_embeddings: same table, cos/sin "
		   "within %.3g of transformers'", name, t->string, calls, trig);
	}
}

/* refusals of configs the fixture does not hold */
static void check_refusals(void)
{
	static const char *const bad[][2] = {
		{"{\"sliding_attention\": {\"rope_type\": \"linear\", \"rope_theta\": 10000.0},"
		 " \"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}", "sliding_attention.factor"},
		{"{\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0},"
		 " \"full_attention\": {\"rope_type\": \"yarn\", \"rope_theta\": 1e6,"
		 " \"original_max_position_embeddings\": 16}}", "full_attention.factor"},
		{"{\"sliding_attention\": {\"rope_type\": \"llama3\", \"rope_theta\": 10000.0, \"factor\": 8,"
		 " \"low_freq_factor\": 1, \"original_max_position_embeddings\": 16},"
		 " \"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}", "high_freq_factor"},
		{"{\"sliding_attention\": {\"rope_type\": \"dynamic\", \"rope_theta\": 10000.0, \"factor\": \"2\"},"
		 " \"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}", "sliding_attention.factor"},
		{"{\"sliding_attention\": {\"rope_type\": \"yarn\", \"rope_theta\": 10000.0, \"factor\": 2,"
		 " \"original_max_position_embeddings\": 16, \"attention_factor\": \"x\"},"
		 " \"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}", "attention_factor"},
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *p = cJSON_Parse(bad[i][0]);
		char *txt = config_text(p, 64);
		struct fg_g4_config c;
		struct fg_err err = { 0 };
		int rc = fg_g4_config_parse(&c, txt, strlen(txt), "config.json", &err);

		ok(rc != 0 && strstr(err.msg, bad[i][1]) != NULL, "refused naming %s: %s", bad[i][1], err.msg);
		free(txt);
		cJSON_Delete(p);
	}
}

int main(void)
{
	struct fg_buf b;
	struct fg_err err = { 0 };
	cJSON *j;
	const cJSON *cs;
	int n = 0;

	fg_buf_init(&b, 0);
	if (fg_file_read(TABLES, 1 << 22, &b, &err)) {
		ok(0, "read %s: %s", TABLES, err.msg);
		return tap_done();
	}
	j = cJSON_ParseWithLength(b.data, b.len);
	ok(j != NULL, "%s parses", TABLES);
	cJSON_ArrayForEach(cs, fg_json_arr(j, "cases")) {
		check_case(cs);
		n++;
	}
	ok(n >= 14, "%d cases made by %s", n, fg_json_str(j, "made_by"));
	check_refusals();
	cJSON_Delete(j);
	fg_buf_release(&b);
	return tap_done();
}
