/* verify_url.c - `fgpack verify B.fgb --url URL`: a bundle's golden
 * transcript replayed against a running OpenAI-compatible server (`fgpack
 * serve`, or the stack `fgpack exec` started), over HTTP. The server's
 * system_fingerprint, where it gives one, must be the bundle's id; every
 * transcript prompt must come back token for token (greedy, ignore_eos,
 * return_token_ids: the fields fgpack serve and vLLM both take); then
 * tokens/s are measured by the engine speed pass's rules (warm-up one-token
 * prompts, max_new tokens a prompt, the median over prompts that completed),
 * each request timed end to end as a client sees it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "buf.h"
#include "cmd.h"
#include "engine/golden.h"
#include "json.h"

struct client {
	CURL *c;
	struct curl_slist *hdr;
	struct fg_buf base; /* the URL without a trailing / or /v1 */
	struct fg_buf body;
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
	return fg_buf_append(ud, p, sz * n, NULL) ? 0 : sz * n;
}

/* One request: GET when body is NULL, else POST of its JSON. *out gets the
 * parsed answer of a 200; anything else is an error naming the URL and, when
 * the server sent an OpenAI error object, its message. */
static int call(struct client *cl, const char *path, const cJSON *body, cJSON **out, struct fg_err *err)
{
	struct fg_buf url = FG_BUF_INIT;
	char *text = NULL;
	long status = 0;
	CURLcode cc;
	int rc;

	*out = NULL;
	if ((rc = fg_buf_printf(&url, err, "%s%s", cl->base.data, path)))
		return rc;
	if (body && !(text = cJSON_PrintUnformatted(body))) {
		fg_buf_release(&url);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	fg_buf_reset(&cl->body);
	curl_easy_setopt(cl->c, CURLOPT_URL, url.data);
	if (text) {
		curl_easy_setopt(cl->c, CURLOPT_POST, 1L);
		curl_easy_setopt(cl->c, CURLOPT_POSTFIELDS, text);
	} else {
		curl_easy_setopt(cl->c, CURLOPT_HTTPGET, 1L);
	}
	cc = curl_easy_perform(cl->c);
	free(text);
	if (cc != CURLE_OK) {
		rc = fg_err_set(err, FG_EIO, "%s: %s", url.data, curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(cl->c, CURLINFO_RESPONSE_CODE, &status);
	/* the answer's text may hold \u0000 (a model's <0x00>); only the ids are read */
	if (fg_json_parse_cut(out, cl->body.data ? cl->body.data : "", cl->body.len, url.data, NULL))
		*out = NULL;
	if (status != 200 || !*out) {
		const char *m = fg_json_str(fg_json_obj(*out, "error"), "message");

		rc = fg_err_set(err, FG_EIO, "%s: HTTP %ld%s%s", url.data, status, m ? ": " : "",
				m ? m : (*out ? "" : ", not JSON"));
		cJSON_Delete(*out);
		*out = NULL;
	}
out:
	fg_buf_release(&url);
	return rc;
}

static int client_open(struct client *cl, const char *url, struct fg_err *err)
{
	size_t n = strlen(url);

	memset(cl, 0, sizeof(*cl));
	fg_buf_init(&cl->body, (size_t)64 << 20);
	while (n && url[n - 1] == '/')
		n--;
	if (n >= 3 && !strncmp(url + n - 3, "/v1", 3))
		n -= 3;
	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
		return fg_err_set(err, FG_EINVAL, "--url %s: an http:// or https:// address", url);
	if (fg_buf_append(&cl->base, url, n, err))
		return FG_ENOMEM;
	cl->c = curl_easy_init();
	cl->hdr = curl_slist_append(NULL, "Content-Type: application/json");
	if (!cl->c || !cl->hdr)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	curl_easy_setopt(cl->c, CURLOPT_HTTPHEADER, cl->hdr);
	curl_easy_setopt(cl->c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(cl->c, CURLOPT_WRITEDATA, &cl->body);
	curl_easy_setopt(cl->c, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(cl->c, CURLOPT_TIMEOUT, 900L); /* one request, a long prompt set's worth */
	curl_easy_setopt(cl->c, CURLOPT_NOSIGNAL, 1L);
	return 0;
}

static void client_close(struct client *cl)
{
	if (cl->c)
		curl_easy_cleanup(cl->c);
	curl_slist_free_all(cl->hdr);
	fg_buf_release(&cl->base);
	fg_buf_release(&cl->body);
}

/* A completion request for ids, greedy, exactly max_tokens tokens. */
static cJSON *completion(const char *model, const cJSON *ids, int max_tokens)
{
	cJSON *b = cJSON_CreateObject();

	if (!b || !cJSON_AddStringToObject(b, "model", model) ||
	    !cJSON_AddItemToObject(b, "prompt", cJSON_Duplicate(ids, 1)) ||
	    !cJSON_AddNumberToObject(b, "max_tokens", max_tokens) ||
	    !cJSON_AddNumberToObject(b, "temperature", 0) || !cJSON_AddTrueToObject(b, "ignore_eos") ||
	    !cJSON_AddTrueToObject(b, "return_token_ids")) {
		cJSON_Delete(b);
		return NULL;
	}
	return b;
}

/* Perplexity over the first ids of eval (as many as ctx holds; all when ctx
 * is 0) as the server scores them: one completion with echo, logprobs 0 and
 * max_tokens 0 (what lm-eval-style harnesses send; fgpack serve and vLLM
 * answer it), exp of the mean negative log-probability of every id after
 * the first. A server that refuses or gives no numbers: a note, no figure. */
static void server_ppl(struct client *cl, const char *model, const cJSON *eval, long long ctx, cJSON *sum)
{
	cJSON *b = cJSON_CreateObject(), *ids = cJSON_CreateArray(), *r = NULL;
	const cJSON *it, *lps;
	struct fg_err err = { 0, "" };
	long long n = 0;
	double nll = 0;
	int k = 0, bad = 0;

	cJSON_ArrayForEach(it, eval) {
		if (ctx > 0 && n >= ctx)
			break;
		cJSON_AddItemToArray(ids, cJSON_Duplicate(it, 0));
		n++;
	}
	if (!b || !ids || !cJSON_AddStringToObject(b, "model", model) || !cJSON_AddItemToObject(b, "prompt", ids) ||
	    !cJSON_AddNumberToObject(b, "max_tokens", 0) || !cJSON_AddTrueToObject(b, "echo") ||
	    !cJSON_AddNumberToObject(b, "logprobs", 0) || !cJSON_AddNumberToObject(b, "temperature", 0) || n < 2) {
		cJSON_Delete(b);
		return;
	}
	if (call(cl, "/v1/completions", b, &r, &err)) {
		fprintf(stderr, "fgpack verify: note: no perplexity from the server: %s\n", err.msg);
		cJSON_Delete(b);
		return;
	}
	lps = fg_json_arr(fg_json_obj(cJSON_GetArrayItem(fg_json_arr(r, "choices"), 0), "logprobs"), "token_logprobs");
	cJSON_ArrayForEach(it, lps) {
		if (k++ == 0)
			continue;
		if (!cJSON_IsNumber(it))
			bad = 1;
		else
			nll -= it->valuedouble;
	}
	if (!lps || bad || k != n) {
		fprintf(stderr, "fgpack verify: note: no perplexity from the server: its answer to an echo "
				"with logprobs holds no log-probability for each of the %lld ids\n",
			n);
	} else {
		cJSON_AddNumberToObject(sum, "ppl", exp(nll / (double)(n - 1)));
		cJSON_AddNumberToObject(sum, "ppl_tokens", (double)(n - 1));
	}
	cJSON_Delete(b);
	cJSON_Delete(r);
}

int fg_cmd_verify_url(const char *url, const char *bundle_id, const cJSON *transcript, const cJSON *eval_ids,
		      int warmup, int max_new, int max_new_given, int no_bench, cJSON *sum, const char **verdict,
		      int *exit_code, struct fg_err *err)
{
	long long ctx = 0;
	const cJSON *prompts = fg_json_arr(transcript, "prompts"), *p;
	struct client cl;
	cJSON *ans = NULL, *srv, *g;
	const char *model;
	char fp[200] = "";
	double *tps = NULL;
	int rc, idx = 0, steps = 0, unchecked = 0, mismatch = 0, completed = 0, requests = 0;
	int fp_seen = 0, fp_other = 0;

	if ((rc = client_open(&cl, url, err)))
		goto out;
	if ((rc = call(&cl, "/v1/models", NULL, &ans, err)))
		goto out;
	model = fg_json_str(cJSON_GetArrayItem(fg_json_arr(ans, "data"), 0), "id");
	if (!model) {
		rc = fg_err_set(err, FG_EFORMAT, "%s/v1/models: no model listed", cl.base.data);
		goto out;
	}
	srv = cJSON_AddObjectToObject(sum, "server");
	cJSON_AddStringToObject(srv, "url", cl.base.data);
	cJSON_AddStringToObject(srv, "model", model);
	{
		/* the longest prompt and max_new must fit the context the server
		 * reports (fgpack serve and vLLM give max_model_len): the default
		 * shrinks to fit, with a note, as the engine's speed pass does */
		int longest = 0, fit;

		cJSON_ArrayForEach(p, prompts)
			if (cJSON_GetArraySize(fg_json_arr(p, "ids")) > longest)
				longest = cJSON_GetArraySize(fg_json_arr(p, "ids"));
		if (!fg_json_int(cJSON_GetArrayItem(fg_json_arr(ans, "data"), 0), "max_model_len", &ctx) &&
		    ctx > 0) {
			cJSON_AddNumberToObject(srv, "max_model_len", (double)ctx);
			fit = ctx - longest < 1 ? 1 : (int)(ctx - longest);
			if (fit < max_new && !max_new_given && !no_bench) {
				fprintf(stderr, "fgpack verify: note: timing %d new tokens per prompt, not %d: "
						"the longest golden prompt (%d tokens) leaves %d of the server's "
						"context of %lld\n",
					fit, max_new, longest, fit, ctx);
				max_new = fit;
			}
		}
	}
	g = cJSON_AddObjectToObject(sum, "golden");
	/* the transcript, token for token, and who says it answered */
	cJSON_ArrayForEach(p, prompts) {
		const cJSON *want = fg_json_arr(p, "tokens"), *got, *w, *wl;
		cJSON *req = completion(model, fg_json_arr(p, "ids"), cJSON_GetArraySize(want)), *r = NULL;
		const char *f;
		int s = 0;

		if (!req) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		rc = call(&cl, "/v1/completions", req, &r, err);
		cJSON_Delete(req);
		if (rc)
			goto out;
		if ((f = fg_json_str(r, "system_fingerprint")) != NULL) {
			fp_seen = 1;
			if (strcmp(f, bundle_id) && !fp_other) {
				fp_other = 1;
				snprintf(fp, sizeof(fp), "%s", f);
			}
		}
		got = fg_json_arr(cJSON_GetArrayItem(fg_json_arr(r, "choices"), 0), "token_ids");
		if (!got)
			unchecked = 1;
		wl = got ? want : NULL;
		cJSON_ArrayForEach(w, wl) {
			const cJSON *x = cJSON_GetArrayItem(got, s);

			if (!x || !cJSON_IsNumber(x) || x->valuedouble != w->valuedouble) {
				cJSON_AddNumberToObject(g, "prompt", idx);
				cJSON_AddNumberToObject(g, "step", s);
				cJSON_AddNumberToObject(g, "want", w->valuedouble);
				cJSON_AddNumberToObject(g, "got", x && cJSON_IsNumber(x) ? x->valuedouble : -1);
				if (x)
					fprintf(stderr, "fgpack verify: %s: golden mismatch at step %d of prompt %d: "
							"token %d, transcript has %d\n",
						cl.base.data, s, idx, cJSON_IsNumber(x) ? (int)x->valuedouble : -1,
						(int)w->valuedouble);
				else /* it stopped early: an eos the server did not ignore, say */
					fprintf(stderr, "fgpack verify: %s: golden mismatch at step %d of prompt %d: "
							"the server gave %d tokens, the transcript has %d\n",
						cl.base.data, s, idx, cJSON_GetArraySize(got), cJSON_GetArraySize(want));
				mismatch = 1;
				break;
			}
			s++;
		}
		cJSON_Delete(r);
		steps += s;
		idx++;
		if (mismatch)
			break;
	}
	cJSON_AddStringToObject(g, "level", mismatch ? "mismatch" : unchecked ? "unchecked" : "tokens");
	cJSON_AddNumberToObject(g, "steps", steps);
	if (fp_other) {
		cJSON_AddStringToObject(srv, "system_fingerprint", fp);
		fg_cmd_line("fgpack verify: %s says it serves %s, not this bundle (%s)", cl.base.data, fp,
			    bundle_id);
		*verdict = "mismatch";
		*exit_code = FG_EXIT_MISMATCH;
		goto out;
	}
	if (fp_seen)
		cJSON_AddStringToObject(srv, "system_fingerprint", bundle_id);
	else {
		cJSON_AddNullToObject(srv, "system_fingerprint");
		fprintf(stderr, "fgpack verify: note: %s names no bundle (no system_fingerprint): the "
				"tokens are compared all the same\n",
			cl.base.data);
	}
	if (mismatch) {
		*verdict = "mismatch";
		*exit_code = FG_EXIT_MISMATCH;
		goto out;
	}
	if (unchecked)
		fprintf(stderr, "fgpack verify: note: %s returns no token_ids: the tokens are not "
				"compared\n",
			cl.base.data);
	*verdict = unchecked ? "verified-files" : "verified-tokens";
	if (no_bench)
		goto out;
	/* speed, as the engine's pass: warm-up one-token prompts, then each
	 * prompt for max_new tokens, timed end to end */
	{
		const cJSON *first = fg_json_arr(cJSON_GetArrayItem(prompts, 0), "ids");
		cJSON *one = cJSON_CreateArray();
		int i;

		if (!one || !cJSON_AddItemToArray(one, cJSON_Duplicate(cJSON_GetArrayItem(first, 0), 1))) {
			cJSON_Delete(one);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		for (i = 0; !rc && i < warmup; i++) {
			cJSON *req = completion(model, one, 1), *r = NULL;

			rc = req ? call(&cl, "/v1/completions", req, &r, err)
				 : fg_err_set(err, FG_ENOMEM, "out of memory");
			cJSON_Delete(req);
			cJSON_Delete(r);
		}
		cJSON_Delete(one);
		if (rc)
			goto out;
	}
	tps = calloc((size_t)cJSON_GetArraySize(prompts) + 1, sizeof(*tps));
	if (!tps) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(p, prompts) {
		cJSON *req = completion(model, fg_json_arr(p, "ids"), max_new), *r = NULL;
		double t0 = now_s(), dt;
		long long n = -1;

		if (!req) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		requests++;
		/* a refused or failed request is one that did not complete */
		if (!call(&cl, "/v1/completions", req, &r, NULL)) {
			dt = now_s() - t0;
			if (fg_json_int(fg_json_obj(r, "usage"), "completion_tokens", &n) == 0 && n == max_new)
				tps[completed++] = dt > 0 ? max_new / dt : 0;
		}
		cJSON_Delete(req);
		cJSON_Delete(r);
	}
	cJSON_AddNumberToObject(sum, "tps", fg_golden_median(tps, completed));
	{
		char c[64];

		snprintf(c, sizeof(c), "%d/%d", completed, requests);
		cJSON_AddStringToObject(sum, "completed", c);
	}
	cJSON_AddNumberToObject(sum, "warmup", warmup);
	cJSON_AddNumberToObject(sum, "max_new", max_new);
	if (completed != requests) {
		*verdict = "incomplete";
		*exit_code = FG_EXIT_FAIL;
	}
	/* perplexity on the bundled eval ids, as the server scores them */
	if (eval_ids)
		server_ppl(&cl, model, eval_ids, ctx, sum);
out:
	free(tps);
	cJSON_Delete(ans);
	client_close(&cl);
	return rc;
}
