/* cmd_run.c - `fgpack run`: greedy generation with the embedded engine from
 * a model folder (config.json + safetensors [+ tokenizer.json]). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "engine/chat.h"
#include "engine/engine.h"
#include "fsutil.h"
#include "json.h"

#include "tokenizer.h"
#include "workq.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fgpack run --model DIR (--prompt TEXT | --chat TEXT | --ids ID,ID,...) [-n N]\n"
		"                  [--json] [-j THREADS] [--sliding-window N] [--max-seq N] [--ignore-eos]\n"
		"                  [--device cpu|cuda] [--chat-format gemma4|gemma3]\n"
		"                  [--drafter DIR [--draft-tokens K] [--centroid-top-k N]]\n\n"
		"Generates N tokens greedily (the argmax at every step) with the embedded\n"
		"engine (CPU, or CUDA with --device cuda). DIR holds config.json and\n"
		"model.safetensors (bf16, f16, f32 or INT4 compressed-tensors; sharded sets\n"
		"too); --prompt encodes TEXT with DIR/tokenizer.json (with <bos>).\n\n"
		"options:\n"
		"  --model DIR          the model folder\n"
		"  --prompt TEXT        prompt text (needs DIR/tokenizer.json)\n"
		"  --chat TEXT          TEXT as one user message in the chat format fgpack serve\n"
		"                       uses (the tokenizer's: Gemma 4 or Gemma 3 turns, see\n"
		"                       docs/serve.md); stops at the end-of-turn token too, which\n"
		"                       the text leaves out\n"
		"  --chat-format F      with --chat: gemma4 or gemma3 whatever the tokenizer\n"
		"  --ids LIST           prompt as comma-separated token ids\n"
		"  -n N                 tokens to generate (default: DIR/generation_config.json's\n"
		"                       max_new_tokens or max_length, else 32; or what the\n"
		"                       context leaves after the prompt, with a note)\n"
		"  -j THREADS           worker threads (default: online CPUs, at most 8); the\n"
		"                       output is bit-identical for any value\n"
		"  --sliding-window N   override the config's sliding window (e.g. 188)\n"
		"  --max-seq N          KV cache size in tokens (default min(max_position, 8192))\n"
		"  --device cpu|cuda    where the forward pass runs (default cpu); cuda needs an\n"
		"                       fgpack built with nvcc and a GPU\n"
		"  --ignore-eos         do not stop at an end-of-sequence token (the stop set is\n"
		"                       DIR/generation_config.json's eos_token_id when the\n"
		"                       folder has one, as transformers' generate(), else\n"
		"                       config.json's)\n"
		"  --drafter DIR        speculative decoding with a Gemma 4 assistant drafter\n"
		"                       (model_type gemma4_assistant): the same tokens as\n"
		"                       without it, more of them per pass of the model when\n"
		"                       the drafter guesses well (docs/engine.md)\n"
		"  --draft-tokens K     drafts per round, 1..16 (default 4)\n"
		"  --centroid-top-k N   for a drafter with use_ordered_embeddings: its head\n"
		"                       scores the tokens of the N best centroids only,\n"
		"                       1..min(num_centroids, 64) (default: its config's\n"
		"                       centroid_intermediate_top_k; the challenge's\n"
		"                       CENTROID_TOP_K); other drafts, the same tokens\n"
		"  --json               print one JSON object (schema 1): generated_ids,\n"
		"                       tokens_per_s, sliding_window, eos_token_ids, ...\n\n"
		"Decoding is greedy: generation_config.json's sampling settings (do_sample,\n"
		"temperature, top_k, top_p) and other strategies are not applied, with a note.\n\n"
		"Prints the generated text (or ids without a tokenizer) on stdout; a timing\n"
		"line on stderr. A prompt longer than the maximum sequence is an error.\n");
}

struct run_state {
	const struct fg_engine *e;
	int32_t *ids;
	int n, cap;
	int ignore_eos;
	int stopped_eos;
	int32_t end_of_turn;    /* --chat: the format's end-of-turn id, else -1 */
	double t_first;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int on_token(void *user, int32_t tok, const float *logits, int n_vocab)
{
	struct run_state *s = user;

	(void)logits;
	(void)n_vocab;
	if (s->n == 0)
		s->t_first = now_s();
	if (s->n < s->cap)
		s->ids[s->n++] = tok;
	if (!s->ignore_eos && (fg_engine_is_eos(s->e, tok) || tok == s->end_of_turn)) {
		s->stopped_eos = 1;
		return 1;
	}
	return 0;
}

static int parse_ids(const char *s, int32_t **out, size_t *n)
{
	size_t cap = 16, k = 0;
	int32_t *ids = malloc(cap * sizeof(*ids));
	const char *p = s;

	if (!ids)
		return -1;
	while (*p) {
		char num[24];
		size_t len = strcspn(p, ",");
		int v;

		if (len == 0 || len >= sizeof(num))
			goto bad;
		memcpy(num, p, len);
		num[len] = 0;
		if (fg_parse_int(num, 0, 0x7fffffff, &v))
			goto bad;
		if (k == cap) {
			int32_t *q = realloc(ids, 2 * cap * sizeof(*ids));

			if (!q)
				goto bad;
			ids = q;
			cap *= 2;
		}
		ids[k++] = v;
		p += len;
		if (*p == ',') {
			p++;
			if (!*p)
				goto bad;
		}
	}
	if (k == 0)
		goto bad;
	*out = ids;
	*n = k;
	return 0;
bad:
	free(ids);
	return -1;
}

static void json_ids(cJSON *obj, const char *key, const int32_t *ids, size_t n)
{
	cJSON *a = cJSON_AddArrayToObject(obj, key);
	size_t i;

	for (i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
}

void fg_cmd_spec_json(cJSON *o, const struct fg_engine *e)
{
	struct fg_engine_spec_stats ss;

	fg_engine_spec_stats(e, &ss);
	cJSON_AddNumberToObject(o, "draft_tokens", fg_engine_draft_tokens(e));
	/* the centroid top-k in effect; null: the drafter has no centroid head */
	if (fg_engine_draft_top_k(e))
		cJSON_AddNumberToObject(o, "centroid_top_k", fg_engine_draft_top_k(e));
	else
		cJSON_AddNullToObject(o, "centroid_top_k");
	cJSON_AddNumberToObject(o, "rounds", (double)ss.rounds);
	cJSON_AddNumberToObject(o, "drafted", (double)ss.drafted);
	cJSON_AddNumberToObject(o, "accepted", (double)ss.accepted);
	cJSON_AddNumberToObject(o, "plain_steps", (double)ss.steps);
}

/* The "speculative" object of --json: the drafter and its counters. */
static void json_spec(cJSON *j, const struct fg_engine *e, const char *drafter)
{
	struct fg_engine_spec_stats ss;
	cJSON *o = cJSON_AddObjectToObject(j, "speculative"), *at;
	int k = fg_engine_draft_tokens(e), i;

	if (!o)
		return;
	fg_engine_spec_stats(e, &ss);
	cJSON_AddStringToObject(o, "drafter", drafter);
	fg_cmd_spec_json(o, e);
	/* per draft position: the share of rounds that kept it */
	if ((at = cJSON_AddArrayToObject(o, "accepted_at")))
		for (i = 0; i < k; i++)
			cJSON_AddItemToArray(at, cJSON_CreateNumber(ss.rounds ? (double)(long long)(ss.at[i] * 1e4 /
											     ss.rounds + 0.5) / 1e4
									       : 0));
	cJSON_AddNumberToObject(o, "tokens_per_pass",
				(double)(long long)(fg_engine_spec_tokens_per_round(&ss) * 1e4 + 0.5) / 1e4);
}

int cmd_run(int argc, char **argv)
{
	const char *model = NULL, *prompt = NULL, *ids_arg = NULL, *chat = NULL, *drafter = NULL;
	int draft_k = 4, draft_k_given = 0, top_k = 0;
	enum fg_chat_format format = FG_CHAT_NONE;
	int n_new = 32, n_given = 0, json = 0, ignore_eos = 0, i, rc = FG_EXIT_FAIL;
	struct fg_engine_opts o = { 0, 0, 0, FG_DEVICE_CPU };
	struct fg_engine *e = NULL;
	struct fg_err err = { 0 };
	int32_t *prompt_ids = NULL;
	size_t n_prompt = 0;
	struct run_state st = { 0 };
	struct fg_buf text = FG_BUF_INIT;
	double t0, t1, prefill_s, decode_s, tps, ptps, load_s;
	struct fg_tokenizer *tok = NULL;

	if (fg_cmd_wants_help(argc, argv)) {
		usage(stdout);
		return FG_EXIT_OK;
	}
	o.threads = fg_workq_cpus(8);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--json")) {
			json = 1;
			continue;
		}
		if (!strcmp(a, "--ignore-eos")) {
			ignore_eos = 1;
			continue;
		}
		if (!v)
			return fg_cmd_usage_error("run", "unknown option or missing value: %s", a);
		i++;
		if (!strcmp(a, "--model"))
			model = v;
		else if (!strcmp(a, "--prompt"))
			prompt = v;
		else if (!strcmp(a, "--chat"))
			chat = v;
		else if (!strcmp(a, "--chat-format")) {
			if (fg_chat_format_parse(&format, v, &err))
				return fg_cmd_usage_error("run", "--chat-format wants gemma4 or gemma3, not %s", v);
		}
		else if (!strcmp(a, "--ids"))
			ids_arg = v;
		else if (!strcmp(a, "-n")) {
			if (fg_parse_int(v, 0, 1 << 24, &n_new))
				return fg_cmd_usage_error("run", "-n wants a count, not %s", v);
			n_given = 1;
		} else if (!strcmp(a, "-j")) {
			if (fg_parse_int(v, 1, 256, &o.threads))
				return fg_cmd_usage_error("run", "-j wants 1..256 threads, not %s", v);
		} else if (!strcmp(a, "--sliding-window")) {
			if (fg_parse_int(v, 1, 1 << 24, &o.sliding_window))
				return fg_cmd_usage_error("run", "--sliding-window wants a positive size, not %s", v);
		} else if (!strcmp(a, "--device")) {
			if (!strcmp(v, "cpu"))
				o.device = FG_DEVICE_CPU;
			else if (!strcmp(v, "cuda"))
				o.device = FG_DEVICE_CUDA;
			else
				return fg_cmd_usage_error("run", "--device wants cpu or cuda, not %s", v);
		} else if (!strcmp(a, "--drafter")) {
			drafter = v;
		} else if (!strcmp(a, "--draft-tokens")) {
			if (fg_parse_int(v, 1, FG_ENGINE_MAX_DRAFT, &draft_k))
				return fg_cmd_usage_error("run", "--draft-tokens wants 1..%d, not %s", FG_ENGINE_MAX_DRAFT, v);
			draft_k_given = 1;
		} else if (!strcmp(a, "--centroid-top-k")) {
			if (fg_parse_int(v, 1, FG_ENGINE_MAX_CENTROID_TOP_K, &top_k))
				return fg_cmd_usage_error("run", "--centroid-top-k wants 1..%d, not %s",
							  FG_ENGINE_MAX_CENTROID_TOP_K, v);
		} else if (!strcmp(a, "--max-seq")) {
			if (fg_parse_int(v, 1, 1 << 30, &o.max_seq))
				return fg_cmd_usage_error("run", "--max-seq wants a positive size, not %s", v);
		} else
			return fg_cmd_usage_error("run", "unknown option %s", a);
	}
	if (!model)
		return fg_cmd_usage_error("run", "--model DIR is required");
	if (!!prompt + !!ids_arg + !!chat != 1)
		return fg_cmd_usage_error("run", "give exactly one of --prompt, --chat and --ids");
	if (format != FG_CHAT_NONE && !chat)
		return fg_cmd_usage_error("run", "--chat-format applies to --chat only");
	if (draft_k_given && !drafter)
		return fg_cmd_usage_error("run", "--draft-tokens applies with --drafter only");
	if (top_k && !drafter)
		return fg_cmd_usage_error("run", "--centroid-top-k applies with --drafter only");
	if (ids_arg && parse_ids(ids_arg, &prompt_ids, &n_prompt))
		return fg_cmd_usage_error("run", "--ids wants comma-separated token ids, not %s", ids_arg);

	t0 = now_s();
	if (fg_engine_load(&e, model, &o, &err))
		goto fail;
	if (drafter && fg_engine_set_drafter(e, drafter, draft_k, top_k, &err))
		goto fail;
	load_s = now_s() - t0; /* reading the weights, and for cuda their repack and upload */
	{
		struct fg_buf tp = FG_BUF_INIT;

		if (fg_path_join(&tp, model, "tokenizer.json", &err)) {
			fg_buf_release(&tp);
			goto fail;
		}
		if (access(tp.data, R_OK) == 0 && fg_tokenizer_load(&tok, tp.data, &err)) {
			fg_buf_release(&tp);
			goto fail;
		}
		if ((prompt || chat) && !tok) {
			fg_err_set(&err, FG_ENOTFOUND, "%s: no tokenizer.json; %s needs one (or use --ids)", model,
				   prompt ? "--prompt" : "--chat");
			fg_buf_release(&tp);
			goto fail;
		}
		fg_buf_release(&tp);
		if (prompt && fg_tokenizer_encode(tok, prompt, strlen(prompt), FG_TOK_ADD_SPECIAL, &prompt_ids,
						  &n_prompt, &err))
			goto fail;
		if (chat) {
			/* one user message, rendered as fgpack serve renders a chat */
			cJSON *msgs = cJSON_CreateArray(), *m = cJSON_CreateObject();
			int crc;

			cJSON_AddItemToArray(msgs, m);
			if (!cJSON_AddStringToObject(m, "role", "user") || !cJSON_AddStringToObject(m, "content", chat))
				crc = fg_err_set(&err, FG_ENOMEM, "out of memory");
			else {
				if (format == FG_CHAT_NONE)
					format = fg_chat_detect(tok);
				crc = fg_chat_encode(&prompt_ids, &n_prompt, tok, format, msgs, &err);
			}
			cJSON_Delete(msgs);
			if (crc)
				goto fail;
		}
	}
	if (n_prompt == 0) {
		fg_err_set(&err, FG_EINVAL, "the prompt is empty");
		goto fail;
	}
	if (fg_engine_gen_unapplied(e)[0])
		fg_cmd_line("fgpack run: note: generation_config.json: %s not applied: %s",
			    fg_engine_gen_unapplied(e), FG_ENGINE_GREEDY_WHY);
	if (!n_given && fg_engine_gen_max_new(e, n_prompt) >= 0) {
		/* generate()'s length when the caller names none */
		long long g = fg_engine_gen_max_new(e, n_prompt);

		n_new = g > (1 << 24) ? 1 << 24 : (int)g;
	}
	if (n_prompt > (size_t)fg_engine_max_seq(e)) {
		fg_err_set(&err, FG_EINVAL, "prompt of %zu tokens is longer than the maximum sequence of %d", n_prompt,
			   fg_engine_max_seq(e));
		goto fail;
	}
	{
		/* the first new token comes from the prompt's last position, so a
		 * context of C holds C - prompt + 1 new tokens */
		long long fit = (long long)fg_engine_max_seq(e) - (long long)n_prompt + 1;

		if (n_new > fit && !n_given) {
			fprintf(stderr, "fgpack run: note: generating %lld tokens, not the default %d: the "
					"prompt's %zu tokens leave %lld of the context of %d (--max-seq "
					"raises it where the model allows)\n",
				fit, n_new, n_prompt, fit, fg_engine_max_seq(e));
			n_new = (int)fit;
		} else if (n_new > fit) {
			fg_err_set(&err, FG_EINVAL, "-n %d does not fit: the prompt's %zu tokens leave %lld "
						    "new tokens of the context of %d",
				   n_new, n_prompt, fit, fg_engine_max_seq(e));
			goto fail;
		}
	}
	st.e = e;
	st.ignore_eos = ignore_eos;
	st.end_of_turn = chat ? fg_chat_end_of_turn_id(tok, format) : -1;
	st.cap = n_new;
	st.ids = malloc(sizeof(int32_t) * (size_t)(n_new ? n_new : 1));
	if (!st.ids) {
		fg_err_set(&err, FG_ENOMEM, "out of memory");
		goto fail;
	}
	t0 = now_s();
	if (fg_engine_generate_ids(e, prompt_ids, n_prompt, n_new, on_token, &st, &err))
		goto fail;
	t1 = now_s();
	if (st.n == 0)
		st.t_first = t1;
	prefill_s = st.t_first - t0;
	decode_s = t1 - st.t_first;
	ptps = prefill_s > 0 ? (double)n_prompt / prefill_s : 0;
	/* the first token comes from the prefill; the rest are decode steps */
	tps = st.n > 1 && decode_s > 0 ? (double)(st.n - 1) / decode_s : 0;

	/* a chat's answer is the text before the token that ended it */
	if (tok && fg_tokenizer_decode_ex(tok, st.ids, (size_t)(chat && st.stopped_eos ? st.n - 1 : st.n),
					  FG_TOK_DECODE_REPLACE, &text, &err))
		goto fail;
	if (json) {
		cJSON *j = cJSON_CreateObject();

		cJSON_AddNumberToObject(j, "schema", 1);
		cJSON_AddStringToObject(j, "model", model);
		json_ids(j, "prompt_ids", prompt_ids, n_prompt);
		json_ids(j, "generated_ids", st.ids, (size_t)st.n);
		if (tok && fg_json_add_text(j, "text", text.data ? text.data : "", text.len)) {
			cJSON_Delete(j);
			fg_err_set(&err, FG_ENOMEM, "out of memory");
			goto fail;
		}
		cJSON_AddNumberToObject(j, "n_prompt", (double)n_prompt);
		cJSON_AddNumberToObject(j, "n_generated", st.n);
		cJSON_AddStringToObject(j, "stop", st.stopped_eos ? "eos" : "length");
		{
			int ne;
			const int32_t *eos = fg_engine_eos_ids(e, &ne);

			json_ids(j, "eos_token_ids", eos, (size_t)ne);
			cJSON_AddBoolToObject(j, "generation_config", fg_engine_has_gen_config(e));
		}
		cJSON_AddNumberToObject(j, "tokens_per_s", (double)(long long)(tps * 100 + 0.5) / 100);
		cJSON_AddNumberToObject(j, "prefill_tokens_per_s", (double)(long long)(ptps * 100 + 0.5) / 100);
		cJSON_AddNumberToObject(j, "seconds", (double)(long long)((t1 - t0) * 1e4 + 0.5) / 1e4);
		cJSON_AddNumberToObject(j, "load_seconds", (double)(long long)(load_s * 1e4 + 0.5) / 1e4);
		cJSON_AddNumberToObject(j, "sliding_window", fg_engine_sliding_window(e));
		cJSON_AddNumberToObject(j, "max_seq", fg_engine_max_seq(e));
		cJSON_AddNumberToObject(j, "threads", fg_engine_threads(e));
		cJSON_AddStringToObject(j, "weight_format", fg_engine_weight_format(e));
		cJSON_AddStringToObject(j, "device", fg_engine_device(e));
		if (drafter)
			json_spec(j, e, drafter);
		{
			/* not a canonical file: cJSON's shortest-round-trip numbers read better */
			char *s = cJSON_PrintUnformatted(j);

			cJSON_Delete(j);
			if (!s) {
				fg_err_set(&err, FG_ENOMEM, "out of memory");
				goto fail;
			}
			printf("%s\n", s);
			cJSON_free(s);
		}
	} else {
		if (text.data) {
			fwrite(text.data, 1, text.len, stdout);
			putchar('\n');
		}
		else {
			for (i = 0; i < st.n; i++)
				printf("%s%d", i ? "," : "", st.ids[i]);
			printf("\n");
		}
		fprintf(stderr, "fgpack run: %zu prompt tokens (%.1f tok/s), %d generated (%.2f tok/s), %s, window %d, "
				"%d threads, loaded in %.2f s\n",
			n_prompt, ptps, st.n, tps, fg_engine_weight_format(e), fg_engine_sliding_window(e),
			fg_engine_threads(e), load_s);
		if (drafter) {
			struct fg_engine_spec_stats ss;

			fg_engine_spec_stats(e, &ss);
			fprintf(stderr, "fgpack run: drafter %s: %lld rounds of up to %d drafts, %lld of %lld drafts "
					"accepted (%.2f tokens per pass)\n",
				drafter, ss.rounds, draft_k, ss.accepted, ss.drafted,
				fg_engine_spec_tokens_per_round(&ss));
		}
	}
	rc = FG_EXIT_OK;
	goto done;
fail:
	rc = fg_cmd_fail("run", &err);
done:
	fg_engine_free(e);
	fg_tokenizer_free(tok);
	free(prompt_ids);
	free(st.ids);
	fg_buf_release(&text);
	return rc;
}
