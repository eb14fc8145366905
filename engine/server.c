/* server.c - OpenAI-compatible HTTP over libmicrohttpd, one engine, FIFO queue.
 *
 * Threads: libmicrohttpd runs one thread per connection (so a handler may
 * block waiting for its job, and a stream's reader may block for the next
 * token); one worker thread owns the engine and runs jobs in arrival order.
 * Everything shared (queue, jobs' output) is guarded by the server mutex;
 * each job has its own condition variable. A job is freed when both its
 * worker side and its HTTP side have let go (refs). */
#include "engine/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "json.h"
#include "version.h"

struct job {
	pthread_cond_t cv;
	int refs;
	struct job *next;
	struct fg_server_req in; /* the request, parsed */
	char id[48];
	long long created;
	/* output */
	int32_t *ids;
	size_t n_ids;
	int32_t *tids;          /* the ids the text is decoded from: ids without the */
	size_t n_tids;          /* special ones (skip_special_tokens, the default) */
	struct fg_buf text;     /* generated text, cut at a stop string */
	size_t stable;          /* its first bytes that later ids cannot change (streams) */
	size_t scan;            /* stop strings: where the next search starts (none ends before) */
	size_t dec_ids, dec_len; /* a tokenizer that decodes piecewise: the text of
				  * tids[0..dec_ids) is text[0..dec_len), no byte run
				  * split there; later ids decode alone */
	/* logprobs (in.logprobs >= 0): per generated id its log-probability and
	 * the in.logprobs most likely ids; per prompt id (echo) the same, from
	 * index 1 (the first has none) */
	float *glp, *plp;
	struct fg_engine_alt *gtop, *ptop; /* ptop: pk alternatives a prompt id */
	int32_t *prank;          /* per prompt id, its rank (prompt_logprobs) */
	int pk, prompt_scored;
	const char *finish;     /* "stop" / "length" once done */
	int stop_str;           /* vLLM's stop_reason: the stop string that ended it (index), */
	int32_t stop_id;        /* or the stop_token_ids id; -1 when neither (eos, length) */
	int done, cancelled, failed;
	char errmsg[FG_ERR_MSG_MAX];
	/* streaming */
	struct fg_buf sse;      /* formatted bytes not yet handed to MHD */
	size_t sse_pos, emitted;
	int sent_role, sent_end;
	size_t ids_sent;        /* ids already given in a chunk's token_ids */
	int sent_prompt;        /* return_token_ids: the prompt's ids given in a first chunk */
	int sent_echo;          /* echo: the prompt's text given */
	size_t lp_offset;       /* a stream's logprobs text_offset so far */
};

struct fg_server {
	struct fg_engine *e;
	const struct fg_tokenizer *tok;
	struct fg_server_opts o;
	struct MHD_Daemon *d;
	pthread_t worker;
	int worker_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;      /* queue changed */
	struct job *head, *tail;
	size_t waiting;
	int running, draining, stopping;
	int active;             /* accepted requests whose response is not sent yet */
	unsigned long long next_id;
	unsigned long long n_requests, n_cancelled, n_tokens, n_rejected;
	enum fg_chat_format format; /* chat prompts' turn format */
	int32_t end_of_turn;    /* the format's end-of-turn token, or -1 */
	int32_t tok_eos;
	int dec_splits;         /* fg_tokenizer_decode_splits(tok) */
	struct fg_server_limits limits; /* what requests are parsed against */
};

/* Per-request state kept by MHD across handler calls. */
struct req {
	struct fg_buf body;
	int too_large;
	struct job *job;        /* non-stream: released when the request completes */
	struct job **more;      /* a batch's jobs (n_more; job NULL), released with it */
	int n_more;
};

/* ---- jobs ---- */

static void job_release(struct fg_server *s, struct job *j)
{
	/* called with s->mu held */
	if (--j->refs > 0)
		return;
	pthread_cond_destroy(&j->cv);
	fg_server_req_release(&j->in);
	free(j->ids);
	free(j->tids);
	free(j->glp);
	free(j->plp);
	free(j->gtop);
	free(j->ptop);
	free(j->prank);
	fg_buf_release(&j->text);
	fg_buf_release(&j->sse);
	free((char *)j - sizeof(struct fg_server *));
	(void)s;
}

/* Length of the longest prefix of t[0..n) that does not end inside a UTF-8
 * sequence. */
static size_t utf8_whole(const char *t, size_t n)
{
	size_t back;

	for (back = 1; back <= 4 && back <= n; back++) {
		unsigned char c = (unsigned char)t[n - back];
		size_t need;

		if ((c & 0xC0) == 0x80)
			continue;
		need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
		return need > back ? n - back : n;
	}
	return n;
}

struct prompt_scores {
	int k;
	float *lp;
	struct fg_engine_alt *top; /* k a prompt id */
	int32_t *rank;
};

/* A token's k alternatives from lp into top[0..k): the ones lp has, then
 * id -1 (left out of answers) where the vocabulary has fewer than k. */
static void copy_top(struct fg_engine_alt *top, int k, const struct fg_engine_lp *lp)
{
	int a;

	for (a = 0; a < k; a++) {
		top[a].id = a < lp->n_top ? lp->top[a].id : -1;
		top[a].lp = a < lp->n_top ? lp->top[a].lp : -INFINITY;
	}
}

static int score_row(void *user, size_t i, int32_t token, const struct fg_engine_lp *lp)
{
	struct prompt_scores *p = user;

	(void)token;
	p->lp[i] = lp->lp;
	p->rank[i] = lp->rank;
	copy_top(p->top + i * (size_t)p->k, p->k, lp);
	return 0;
}

/* Scores the prompt (echo with logprobs, prompt_logprobs): each prompt id's
 * log-probability, rank and most likely alternatives after the ones before
 * it (the first has none). */
static int score_prompt(struct fg_server *s, struct job *j, struct fg_err *err)
{
	int k = j->in.echo && j->in.logprobs > j->in.prompt_logprobs ? j->in.logprobs : j->in.prompt_logprobs;
	size_t n = j->in.n_prompt;
	struct prompt_scores p;
	int rc = 0;

	k = k > 0 ? k : 0;
	p.k = k;
	p.lp = calloc(n, sizeof(*p.lp));
	p.rank = calloc(n, sizeof(*p.rank));
	p.top = calloc(n * (size_t)(k ? k : 1), sizeof(*p.top));
	if (!p.lp || !p.top || !p.rank)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!rc)
		rc = fg_engine_score_lp(s->e, j->in.prompt, n, k, score_row, &p, err);
	pthread_mutex_lock(&s->mu);
	if (!rc) {
		j->plp = p.lp;
		j->ptop = p.top;
		j->prank = p.rank;
		j->pk = k;
		j->prompt_scored = 1;
	}
	pthread_mutex_unlock(&s->mu);
	if (rc) {
		free(p.lp);
		free(p.top);
		free(p.rank);
	}
	return rc;
}

struct gen {
	struct fg_server *s;
	struct job *j;
};

/* Stop strings in text[j->scan .. limit): the text is cut before the
 * earliest match (the answer never holds a stop string, as OpenAI
 * promises) and 1 returned. Text before limit must be what later ids
 * cannot change; no match may end before j->scan, which then moves up. */
static int find_stop(struct job *j, size_t limit)
{
	size_t i, longest = 0, best = (size_t)-1;
	const char *t = j->text.data ? j->text.data : "";
	int which = -1;

	if (limit > j->text.len)
		limit = j->text.len;
	for (i = 0; i < j->in.n_stops; i++) {
		size_t l = strlen(j->in.stops[i]);
		const char *hit = j->scan < limit ? memmem(t + j->scan, limit - j->scan, j->in.stops[i], l) : NULL;

		longest = l > longest ? l : longest;
		if (hit && (size_t)(hit - t) < best) {
			best = (size_t)(hit - t);
			which = (int)i;
		}
	}
	if (best != (size_t)-1) {
		j->text.len = best;
		j->text.data[best] = '\0';
		if (j->stable > best)
			j->stable = best;
		j->finish = "stop";
		j->stop_str = which;
		return 1;
	}
	if (limit > j->scan + (longest ? longest - 1 : 0))
		j->scan = limit - (longest ? longest - 1 : 0);
	return 0;
}

/* A new token, with its log-probabilities when asked for (lp). */
static int add_token(struct gen *g, int32_t token, const struct fg_engine_lp *lp)
{
	struct fg_server *s = g->s;
	struct job *j = g->j;
	int stop = 0, eos, intext, ends = 0;
	size_t i;

	pthread_mutex_lock(&s->mu);
	if (j->cancelled) {
		pthread_mutex_unlock(&s->mu);
		return 1;
	}
	eos = fg_engine_is_eos(s->e, token) || token == s->end_of_turn ||
	      (s->tok_eos >= 0 && token == s->tok_eos);
	/* an id that ends generation (an eos, or one of stop_token_ids, which
	 * ignore_eos does not cover) is generated all the same: as vLLM, it
	 * stays in token_ids, usage and logprobs, and never in the text */
	if (eos && !j->in.ignore_eos)
		ends = 1;
	for (i = 0; !ends && i < j->in.n_stop_ids; i++)
		if (token == j->in.stop_ids[i]) {
			ends = 1;
			j->stop_id = token;
		}
	/* the text leaves special tokens out unless asked (vLLM's and
	 * transformers' skip_special_tokens, true by default); an eos id that
	 * ignore_eos let through is left out as well when the tokenizer does
	 * not mark it special */
	intext = ends ? 0 : j->in.keep_special ? 1
		 : !eos && !(s->tok && (fg_tokenizer_token_flags(s->tok, token) & FG_TOK_F_SPECIAL));
	if (j->in.logprobs >= 0 && lp) {
		int k = j->in.logprobs;
		float *nl = realloc(j->glp, (j->n_ids + 1) * sizeof(*nl));
		struct fg_engine_alt *ntop = nl ? realloc(j->gtop, (j->n_ids + 1) * (size_t)(k ? k : 1) * sizeof(*ntop)) : NULL;

		if (nl)
			j->glp = nl;
		if (ntop)
			j->gtop = ntop;
		if (!nl || !ntop) {
			j->failed = 1;
			snprintf(j->errmsg, sizeof(j->errmsg), "out of memory");
			pthread_mutex_unlock(&s->mu);
			return 1;
		}
		j->glp[j->n_ids] = lp->lp;
		copy_top(j->gtop + j->n_ids * (size_t)k, k, lp);
	}
	{
		int32_t *ni = realloc(j->ids, (j->n_ids + 1) * sizeof(*ni)), *nt = NULL;

		if (ni)
			j->ids = ni;
		if (ni && intext && (nt = realloc(j->tids, (j->n_tids + 1) * sizeof(*nt))) != NULL)
			j->tids = nt;
		if (!ni || (intext && !nt)) {
			j->failed = 1;
			snprintf(j->errmsg, sizeof(j->errmsg), "out of memory");
			pthread_mutex_unlock(&s->mu);
			return 1;
		}
		j->ids[j->n_ids++] = token;
		if (intext)
			j->tids[j->n_tids++] = token;
	}
	if (ends) {
		j->finish = "stop";
		stop = 1;
	}
	if (s->tok && intext) {
		/* the text as transformers and vLLM decode the ids (an invalid
		 * byte run: one U+FFFD per byte token); while the last ids are
		 * byte tokens, what they give may still change (an incomplete
		 * character), so a stream's stable text ends before their run */
		size_t k = j->n_tids, stable;
		int rc = 0;

		while (k > 0 && (fg_tokenizer_token_flags(s->tok, j->tids[k - 1]) & FG_TOK_F_BYTE))
			k--;
		if (s->dec_splits) {
			/* only the ids after the last boundary are decoded */
			j->text.len = j->dec_len;
			if (k > j->dec_ids) {
				rc = fg_tokenizer_decode_ex(s->tok, j->tids + j->dec_ids, k - j->dec_ids,
							    FG_TOK_DECODE_REPLACE, &j->text, NULL);
				j->dec_ids = k;
				j->dec_len = j->text.len;
			}
			stable = j->text.len;
			if (!rc)
				rc = fg_tokenizer_decode_ex(s->tok, j->tids + k, j->n_tids - k, FG_TOK_DECODE_REPLACE,
							    &j->text, NULL);
			if (j->text.data)
				j->text.data[j->text.len] = '\0';
		} else { /* decoded whole: the text before may change too (a strip) */
			j->scan = 0;
			fg_buf_reset(&j->text);
			rc = fg_tokenizer_decode_ex(s->tok, j->tids, k, FG_TOK_DECODE_REPLACE, &j->text, NULL);
			stable = j->text.len;
			fg_buf_reset(&j->text);
			if (!rc)
				rc = fg_tokenizer_decode_ex(s->tok, j->tids, j->n_tids, FG_TOK_DECODE_REPLACE,
							    &j->text, NULL);
		}
		j->stable = j->in.stream ? stable : j->text.len;
		if (rc) {
			j->failed = 1;
			snprintf(j->errmsg, sizeof(j->errmsg), "cannot decode token %d", (int)token);
			stop = 1;
		}
		/* stop strings in the text later ids cannot change (a trailing
		 * byte run's may: an incomplete character shows as U+FFFD for
		 * now); the rest once generation ends */
		if (!stop)
			stop = find_stop(j, stable);
	}
	pthread_cond_broadcast(&j->cv);
	pthread_mutex_unlock(&s->mu);
	return stop;
}

static int on_token(void *user, int32_t token, const float *logits, int n_vocab)
{
	(void)logits, (void)n_vocab;
	return add_token(user, token, NULL);
}

static int on_token_lp(void *user, size_t i, int32_t token, const struct fg_engine_lp *lp)
{
	(void)i;
	return add_token(user, token, lp);
}

static void *worker_main(void *arg)
{
	struct fg_server *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct job *j;
		struct gen g;
		struct fg_err err;
		int rc;

		while (!s->head && !s->stopping)
			pthread_cond_wait(&s->cv, &s->mu);
		if (!s->head)
			break;
		j = s->head;
		s->head = j->next;
		if (!s->head)
			s->tail = NULL;
		s->waiting--;
		s->running = 1;
		pthread_mutex_unlock(&s->mu);

		g.s = s;
		g.j = j;
		rc = 0;
		if (!j->cancelled && ((j->in.echo && j->in.logprobs >= 0) || j->in.prompt_logprobs >= 0))
			rc = score_prompt(s, j, &err);
		/* the same tokens with or without log-probabilities (on the GPU
		 * they are computed there beside the argmax) */
		if (!rc && !j->cancelled && j->in.max_tokens > 0)
			rc = j->in.logprobs >= 0
				     ? fg_engine_generate_lp(s->e, j->in.prompt, j->in.n_prompt, j->in.max_tokens,
							     j->in.logprobs, on_token_lp, &g, &err)
				     : fg_engine_generate_ids(s->e, j->in.prompt, j->in.n_prompt, j->in.max_tokens,
							      on_token, &g, &err);

		pthread_mutex_lock(&s->mu);
		if (rc && !j->failed) {
			j->failed = 1;
			snprintf(j->errmsg, sizeof(j->errmsg), "%s", err.msg);
		}
		if (s->tok && !j->failed)
			find_stop(j, j->text.len); /* the text a trailing byte run gave */
		if (!j->finish)
			j->finish = "length";
		s->n_requests++;
		s->n_tokens += j->n_ids;
		if (j->cancelled)
			s->n_cancelled++;
		j->done = 1;
		s->running = 0;
		pthread_cond_broadcast(&j->cv);
		pthread_cond_broadcast(&s->cv);
		job_release(s, j);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- HTTP helpers ---- */

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, const cJSON *j)
{
	struct fg_buf b = FG_BUF_INIT;
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (fg_json_write(&b, j, 0, NULL))
		return MHD_NO;
	fg_buf_putc(&b, '\n', NULL);
	r = MHD_create_response_from_buffer(b.len, b.data, MHD_RESPMEM_MUST_COPY);
	fg_buf_release(&b);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/json");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *type,
				  const char *param, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *type,
				  const char *param, const char *fmt, ...)
{
	cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
	char msg[512];
	va_list ap;
	enum MHD_Result ret;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddStringToObject(e, "message", msg);
	cJSON_AddStringToObject(e, "type", type);
	if (param)
		cJSON_AddStringToObject(e, "param", param);
	else
		cJSON_AddNullToObject(e, "param");
	cJSON_AddNullToObject(e, "code");
	ret = send_json(c, status, root);
	cJSON_Delete(root);
	return ret;
}

/* ---- request parsing ---- */

void fg_server_req_release(struct fg_server_req *r)
{
	size_t i;

	free(r->prompt);
	r->prompt = NULL;
	r->n_prompt = 0;
	free(r->prompt_text);
	r->prompt_text = NULL;
	for (i = 0; i < r->n_stops; i++)
		free(r->stops[i]);
	r->n_stops = 0;
	free(r->stop_ids);
	r->stop_ids = NULL;
	r->n_stop_ids = 0;
}


/* A JSON array of token ids, each an integer in 0..nv-1, into *ids (owned,
 * at least one slot; the caller frees it even on an error) and *n; a bad
 * one is FG_EINVAL with "<bad> 0..<nv-1>". */
static int ids_from_json(int32_t **ids, size_t *n, const cJSON *v, int nv, const char *bad, struct fg_err *err)
{
	const cJSON *it;
	size_t cnt = (size_t)cJSON_GetArraySize(v);

	*n = 0;
	if (!(*ids = malloc((cnt ? cnt : 1) * sizeof(**ids))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	cJSON_ArrayForEach(it, v) {
		/* the range first: converting 1e300 to an integer is undefined */
		if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0 && it->valuedouble < nv) ||
		    it->valuedouble != (double)(int32_t)it->valuedouble)
			return fg_err_set(err, FG_EINVAL, "%s 0..%d", bad, nv - 1);
		(*ids)[(*n)++] = (int32_t)it->valuedouble;
	}
	return 0;
}
/* A count of log-probability alternatives: *out -1 when name is absent or
 * null, else an integer in 0..FG_SERVER_LOGPROBS_MAX. */
static int logprobs_count(const cJSON *req, const char *name, int *out, const char **param, struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, name);

	*out = -1;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= FG_SERVER_LOGPROBS_MAX) ||
	    v->valuedouble != (double)(int)v->valuedouble) {
		*param = name;
		return fg_err_set(err, FG_EINVAL, "%s: expected an integer in 0..%d", name, FG_SERVER_LOGPROBS_MAX);
	}
	*out = (int)v->valuedouble;
	return 0;
}

int fg_server_parse_request(struct fg_server_req *r, const struct fg_server_limits *l,
			    const cJSON *req, const char **param, struct fg_err *err)
{
	const cJSON *v;
	int max_seq = l->max_seq, nv = l->n_vocab;
	size_t i;
	int rc = 0;
	long long mt = -1, gen = -1;
	int special;

	*param = NULL;
	if (!cJSON_IsObject(req))
		return fg_err_set(err, FG_EINVAL, "the request body must be a JSON object");
	v = cJSON_GetObjectItemCaseSensitive(req, "n");
	if (v && !(cJSON_IsNumber(v) && v->valuedouble == 1)) {
		*param = "n";
		return fg_err_set(err, FG_EINVAL, "only n = 1 is supported");
	}
	/* what changes the answer's form or its tokens and this server cannot
	 * give: refused by name rather than ignored, so that a client never
	 * reads a null or a plain answer as what it asked for. Absent, null,
	 * false, 0, "" and an empty object or array are neutral, and so is the
	 * number `one` where it is 1 (a multiplier or a count). The penalties
	 * change the argmax too (vLLM and OpenAI apply them to the logits before
	 * a greedy pick); temperature, top_p, top_k, min_p and seed act only
	 * when sampling and are accepted and ignored (the decoding is greedy). */
	{
		static const struct {
			const char *name, *why;
			int one;
		} unsupported[] = {
			{ "suffix", "suffix (insertion) is not supported", 0 },
			{ "logit_bias", "logit_bias is not supported (decoding is greedy)", 0 },
			{ "best_of", "best_of other than 1 is not supported", 1 },
			{ "response_format", "response_format other than text is not supported", 0 },
			{ "presence_penalty", "presence_penalty is not supported (decoding is plain greedy)", 0 },
			{ "frequency_penalty", "frequency_penalty is not supported (decoding is plain greedy)", 0 },
			{ "repetition_penalty", "repetition_penalty other than 1 is not supported (decoding is "
						"plain greedy)", 1 },
			{ "length_penalty", "length_penalty other than 1 is not supported (no beam search)", 1 },
			{ "use_beam_search", "use_beam_search is not supported (decoding is greedy)", 0 },
			{ "allowed_token_ids", "allowed_token_ids is not supported (decoding is plain greedy)", 0 },
			{ "bad_words", "bad_words is not supported (decoding is plain greedy)", 0 },
			{ "guided_json", "guided decoding is not supported", 0 },
			{ "guided_regex", "guided decoding is not supported", 0 },
			{ "guided_choice", "guided decoding is not supported", 0 },
			{ "guided_grammar", "guided decoding is not supported", 0 },
			{ "structured_outputs", "structured outputs are not supported", 0 },
			{ "logits_processors", "logits_processors is not supported", 0 },
			{ "include_stop_str_in_output", "include_stop_str_in_output is not supported (the text "
							"ends before a stop string)", 0 },
			{ "truncate_prompt_tokens", "truncate_prompt_tokens is not supported (send the prompt "
						    "to be used)", 0 },
			{ "prompt_embeds", "prompt_embeds is not supported", 0 },
			{ "functions", "functions: function calling is not supported by this server", 0 },
		};
		size_t k;

		for (k = 0; k < sizeof(unsupported) / sizeof(unsupported[0]); k++) {
			const char *name = unsupported[k].name;

			v = cJSON_GetObjectItemCaseSensitive(req, name);
			if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v) || (cJSON_IsNumber(v) && v->valuedouble == 0) ||
			    (cJSON_IsString(v) && !v->valuestring[0]) ||
			    ((cJSON_IsObject(v) || cJSON_IsArray(v)) && !v->child))
				continue;
			if (unsupported[k].one && cJSON_IsNumber(v) && v->valuedouble == 1)
				continue;
			if (!strcmp(name, "response_format") && fg_json_str(v, "type") &&
			    !strcmp(fg_json_str(v, "type"), "text"))
				continue;
			*param = name;
			return fg_err_set(err, FG_EINVAL, "%s", unsupported[k].why);
		}
	}
	/* vLLM's stop_token_ids: ids that end generation as an eos does */
	v = cJSON_GetObjectItemCaseSensitive(req, "stop_token_ids");
	if (v && !cJSON_IsNull(v)) {
		*param = "stop_token_ids";
		if (!cJSON_IsArray(v))
			return fg_err_set(err, FG_EINVAL, "stop_token_ids: expected an array of token ids");
		if ((rc = ids_from_json(&r->stop_ids, &r->n_stop_ids, v, nv, "stop_token_ids: expected token ids in",
					err)))
			return rc;
		*param = NULL;
	}
	v = cJSON_GetObjectItemCaseSensitive(req, "stream");
	if (v && !cJSON_IsBool(v)) {
		*param = "stream";
		return fg_err_set(err, FG_EINVAL, "stream: expected true or false");
	}
	r->stream = cJSON_IsTrue(v);
	v = cJSON_GetObjectItemCaseSensitive(req, "return_token_ids");
	if (v && !cJSON_IsBool(v) && !cJSON_IsNull(v)) {
		*param = "return_token_ids";
		return fg_err_set(err, FG_EINVAL, "return_token_ids: expected true or false");
	}
	r->echo_ids = cJSON_IsTrue(v);
	v = cJSON_GetObjectItemCaseSensitive(req, "ignore_eos");
	if (v && !cJSON_IsBool(v) && !cJSON_IsNull(v)) {
		*param = "ignore_eos";
		return fg_err_set(err, FG_EINVAL, "ignore_eos: expected true or false");
	}
	r->ignore_eos = cJSON_IsTrue(v);
	/* OpenAI's stream_options (include_usage) and vLLM's addition
	 * (continuous_usage_stats); refused without stream, as both do */
	v = cJSON_GetObjectItemCaseSensitive(req, "stream_options");
	if (v && !cJSON_IsNull(v)) {
		const cJSON *iu = cJSON_GetObjectItemCaseSensitive(v, "include_usage");
		const cJSON *cu = cJSON_GetObjectItemCaseSensitive(v, "continuous_usage_stats");

		*param = "stream_options";
		if (!cJSON_IsObject(v))
			return fg_err_set(err, FG_EINVAL, "stream_options: expected an object");
		if (!r->stream)
			return fg_err_set(err, FG_EINVAL, "stream_options is only allowed when stream is true");
		if ((iu && !cJSON_IsBool(iu) && !cJSON_IsNull(iu)) || (cu && !cJSON_IsBool(cu) && !cJSON_IsNull(cu)))
			return fg_err_set(err, FG_EINVAL, "stream_options: include_usage and "
							  "continuous_usage_stats take true or false");
		*param = NULL;
		r->include_usage = cJSON_IsTrue(iu);
		r->continuous_usage = cJSON_IsTrue(iu) && cJSON_IsTrue(cu);
	}
	v = cJSON_GetObjectItemCaseSensitive(req, "skip_special_tokens");
	if (v && !cJSON_IsBool(v) && !cJSON_IsNull(v)) {
		*param = "skip_special_tokens";
		return fg_err_set(err, FG_EINVAL, "skip_special_tokens: expected true or false");
	}
	r->keep_special = cJSON_IsFalse(v);
	v = cJSON_GetObjectItemCaseSensitive(req, "return_tokens_as_token_ids");
	if (v && !cJSON_IsBool(v) && !cJSON_IsNull(v)) {
		*param = "return_tokens_as_token_ids";
		return fg_err_set(err, FG_EINVAL, "return_tokens_as_token_ids: expected true or false");
	}
	r->tokens_as_ids = cJSON_IsTrue(v);
	/* logprobs: a completion's is the number of alternatives (0..20, as
	 * vLLM's default limit); a chat's a bool with top_logprobs beside */
	if ((rc = logprobs_count(req, r->chat ? "top_logprobs" : "logprobs", &r->logprobs, param, err)))
		return rc;
	/* vLLM's prompt_logprobs: each prompt id's log-probability, rank and
	 * the k most likely ids (not with stream, as vLLM) */
	if ((rc = logprobs_count(req, "prompt_logprobs", &r->prompt_logprobs, param, err)))
		return rc;
	if (r->prompt_logprobs >= 0 && r->stream) {
		*param = "prompt_logprobs";
		return fg_err_set(err, FG_EINVAL, "prompt_logprobs are not available with stream");
	}
	if (r->chat) {
		v = cJSON_GetObjectItemCaseSensitive(req, "logprobs");
		if (v && !cJSON_IsBool(v) && !cJSON_IsNull(v)) {
			*param = "logprobs";
			return fg_err_set(err, FG_EINVAL, "logprobs: expected true or false");
		}
		if (!cJSON_IsTrue(v) && r->logprobs > 0) {
			*param = "top_logprobs";
			return fg_err_set(err, FG_EINVAL, "top_logprobs needs \"logprobs\": true");
		}
		r->logprobs = cJSON_IsTrue(v) ? (r->logprobs > 0 ? r->logprobs : 0) : -1;
	} else {
		v = cJSON_GetObjectItemCaseSensitive(req, "echo");
		if (v && !cJSON_IsBool(v) && !cJSON_IsNull(v)) {
			*param = "echo";
			return fg_err_set(err, FG_EINVAL, "echo: expected true or false");
		}
		r->echo = cJSON_IsTrue(v);
	}
	/* vLLM's min_tokens masks the eos ids until then, which is not greedy
	 * decoding: refused rather than ignored (an answer cut at an eos would
	 * then look like a shortfall of the server) */
	v = cJSON_GetObjectItemCaseSensitive(req, "min_tokens");
	if (v && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0)) {
		*param = "min_tokens";
		return fg_err_set(err, FG_EINVAL, "min_tokens is not supported (it would mask the eos ids, "
						  "which greedy decoding does not); send \"ignore_eos\": true "
						  "for exactly max_tokens tokens");
	}
	v = cJSON_GetObjectItemCaseSensitive(req, "max_tokens");
	if (!v)
		v = cJSON_GetObjectItemCaseSensitive(req, "max_completion_tokens");
	if (v && !cJSON_IsNull(v)) {
		/* the range first: converting 1e300 to an integer is undefined */
		if (!cJSON_IsNumber(v) || !(v->valuedouble >= (r->echo ? 0 : 1) && v->valuedouble <= 1e9) ||
		    v->valuedouble != (double)(long long)v->valuedouble) {
			*param = "max_tokens";
			return fg_err_set(err, FG_EINVAL, r->echo ? "max_tokens: expected an integer >= 0"
								  : "max_tokens: expected a positive integer");
		}
		mt = (long long)v->valuedouble;
	}
	v = cJSON_GetObjectItemCaseSensitive(req, "stop");
	if (cJSON_IsString(v)) {
		if (v->valuestring[0])
			r->stops[r->n_stops++] = strdup(v->valuestring);
	} else if (cJSON_IsArray(v)) {
		const cJSON *it;

		if (cJSON_GetArraySize(v) > FG_SERVER_STOP_MAX) {
			*param = "stop";
			return fg_err_set(err, FG_EINVAL, "stop: at most %d strings", FG_SERVER_STOP_MAX);
		}
		cJSON_ArrayForEach(it, v) {
			if (!cJSON_IsString(it)) {
				*param = "stop";
				return fg_err_set(err, FG_EINVAL, "stop: expected strings");
			}
			if (it->valuestring[0])
				r->stops[r->n_stops++] = strdup(it->valuestring);
		}
	} else if (v && !cJSON_IsNull(v)) {
		*param = "stop";
		return fg_err_set(err, FG_EINVAL, "stop: expected a string or an array of strings");
	}
	for (i = 0; i < r->n_stops; i++) {
		if (!r->stops[i])
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		if (strlen(r->stops[i]) > r->holdback)
			r->holdback = strlen(r->stops[i]);
	}
	if (r->holdback)
		r->holdback--;

	if (r->chat) {
		if (!l->tok) {
			*param = "messages";
			return fg_err_set(err, FG_EINVAL, "this model has no tokenizer: chat needs one");
		}
		v = cJSON_GetObjectItemCaseSensitive(req, "tools");
		if (v && !cJSON_IsNull(v) && !(cJSON_IsArray(v) && !cJSON_GetArraySize(v))) {
			*param = "tools";
			return fg_err_set(err, FG_EINVAL, "tools: tool calling is not supported by this "
							  "server (plain chat only)");
		}
		/* vLLM's chat extensions that change the prompt, and OpenAI's
		 * tool choices, each only in its default form */
		{
			static const struct {
				const char *name, *why;
				int deflt; /* the only value taken: 1 true, 0 false */
			} fixed[] = {
				{ "add_generation_prompt", "add_generation_prompt: only true is supported (the "
							   "prompt ends with the model's turn)", 1 },
				{ "continue_final_message", "continue_final_message is not supported", 0 },
				{ "echo", "echo is not supported on chat completions", 0 },
				{ "add_special_tokens", "add_special_tokens: the chat template adds <bos>; only "
							"false is supported", 0 },
			};
			size_t k;

			for (k = 0; k < sizeof(fixed) / sizeof(fixed[0]); k++) {
				v = cJSON_GetObjectItemCaseSensitive(req, fixed[k].name);
				if (!v || cJSON_IsNull(v) || (fixed[k].deflt ? cJSON_IsTrue(v) : cJSON_IsFalse(v)))
					continue;
				*param = fixed[k].name;
				return fg_err_set(err, FG_EINVAL, "%s", fixed[k].why);
			}
			for (k = 0; k < 2; k++) {
				const char *name = k ? "function_call" : "tool_choice";

				v = cJSON_GetObjectItemCaseSensitive(req, name);
				if (!v || cJSON_IsNull(v) ||
				    (cJSON_IsString(v) &&
				     (!strcmp(v->valuestring, "none") || !strcmp(v->valuestring, "auto"))))
					continue;
				*param = name;
				return fg_err_set(err, FG_EINVAL, "%s: tool calling is not supported by this "
								  "server (plain chat only)", name);
			}
		}
		v = fg_json_obj(req, "chat_template_kwargs");
		if (v && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "enable_thinking"))) {
			*param = "chat_template_kwargs";
			return fg_err_set(err, FG_EINVAL, "enable_thinking: thinking mode is not supported "
							  "by this server");
		}
		*param = "messages";
		rc = fg_chat_encode(&r->prompt, &r->n_prompt, l->tok, l->format,
				    cJSON_GetObjectItemCaseSensitive(req, "messages"), err);
		if (rc)
			return rc;
		*param = NULL;
	} else {
		v = cJSON_GetObjectItemCaseSensitive(req, "prompt");
		/* a batch of one (OpenAI's list of strings or of token-id
		 * lists, as lm-eval's local-completions sends at batch size 1) */
		if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1 &&
		    (cJSON_IsString(cJSON_GetArrayItem(v, 0)) || cJSON_IsArray(cJSON_GetArrayItem(v, 0))))
			v = cJSON_GetArrayItem(v, 0);
		/* vLLM's add_special_tokens (default true for a completion):
		 * false encodes a string prompt without the tokenizer's <bos> */
		{
			const cJSON *a = cJSON_GetObjectItemCaseSensitive(req, "add_special_tokens");

			if (a && !cJSON_IsBool(a) && !cJSON_IsNull(a)) {
				*param = "add_special_tokens";
				return fg_err_set(err, FG_EINVAL, "add_special_tokens: expected true or false");
			}
			special = !cJSON_IsFalse(a);
		}
		*param = "prompt"; /* a larger batch was split by the handler (batch_size) */
		if (cJSON_IsString(v)) {
			if (!l->tok)
				return fg_err_set(err, FG_EINVAL, "this model has no tokenizer: send token ids");
			rc = fg_tokenizer_encode(l->tok, v->valuestring, strlen(v->valuestring),
						 special ? FG_TOK_ADD_SPECIAL : 0, &r->prompt, &r->n_prompt, err);
			if (rc)
				return rc;
			if (r->echo && !(r->prompt_text = strdup(v->valuestring)))
				return fg_err_set(err, FG_ENOMEM, "out of memory");
		} else if (cJSON_IsArray(v)) {
			rc = ids_from_json(&r->prompt, &r->n_prompt, v, nv, "prompt: token ids must be integers in",
					   err);
			if (rc)
				return rc;
		} else
			return fg_err_set(err, FG_EINVAL, "prompt: expected a string or an array of "
							  "token ids");
		*param = NULL;
	}
	if (r->n_prompt == 0) {
		*param = r->chat ? "messages" : "prompt";
		return fg_err_set(err, FG_EINVAL, "the prompt is empty");
	}
	for (i = 0; i < r->n_prompt; i++)
		if (r->prompt[i] < 0 || r->prompt[i] >= nv) {
			/* a tokenizer with more ids than the model: refused here, not
			 * as a failed generation */
			*param = r->chat ? "messages" : "prompt";
			return fg_err_set(err, FG_EINVAL, "the prompt holds token id %ld, beyond this "
							  "model's %d", (long)r->prompt[i], nv);
		}
	/* a prompt only scored (echo, max_tokens 0) may fill the context */
	if ((long long)r->n_prompt > max_seq || ((long long)r->n_prompt == max_seq && !(r->echo && mt == 0))) {
		*param = r->chat ? "messages" : "prompt";
		return fg_err_set(err, FG_EINVAL, "the prompt has %zu tokens; this model's context is %d",
				  r->n_prompt, max_seq);
	}
	if (mt < 0 && l->gen_max_new)
		gen = l->gen_max_new(l->gen_ud, r->n_prompt);
	if (mt < 0 && gen >= 1) {
		/* generation_config.json's max_new_tokens / max_length, as the
		 * default, within what the context leaves */
		mt = gen;
		if (mt > max_seq - (long long)r->n_prompt)
			mt = max_seq - (long long)r->n_prompt;
	}
	if (mt < 0)
		mt = r->chat ? max_seq - (long long)r->n_prompt
			     : (16 < max_seq - (long long)r->n_prompt ? 16
								       : max_seq - (long long)r->n_prompt);
	if (mt + (long long)r->n_prompt > max_seq) {
		*param = "max_tokens";
		return fg_err_set(err, FG_EINVAL, "max_tokens %lld + %zu prompt tokens exceed this "
						  "model's context of %d", mt, r->n_prompt, max_seq);
	}
	r->max_tokens = (int)mt;
	return 0;
}

/* ---- responses ---- */

static cJSON *usage_obj(const struct job *j)
{
	cJSON *u = cJSON_CreateObject();

	cJSON_AddNumberToObject(u, "prompt_tokens", (double)j->in.n_prompt);
	cJSON_AddNumberToObject(u, "completion_tokens", (double)j->n_ids);
	cJSON_AddNumberToObject(u, "total_tokens", (double)(j->in.n_prompt + j->n_ids));
	return u;
}

static cJSON *ids_array(const int32_t *ids, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	size_t i;

	for (i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
	return a;
}

/* A log-probability as JSON: -inf (and NaN) as -9999.0, as vLLM and
 * OpenAI write it. */
static double lp_json(float lp)
{
	return lp > -9999.0f ? (double)lp : -9999.0;
}

/* The text transformers gives for id alone (tokens of a logprobs list). */
static const char *piece_text(const struct fg_server *s, int32_t id, struct fg_buf *b)
{
	fg_buf_reset(b);
	if (!s->tok || fg_tokenizer_decode_ex(s->tok, &id, 1, FG_TOK_DECODE_REPLACE, b, NULL) ||
	    fg_buf_append(b, "", 0, NULL))
		return NULL;
	return b->data;
}

/* A token of a logprobs list: its text, or "token_id:<id>" when the
 * request asked so (vLLM's return_tokens_as_token_ids: ids whose texts
 * are alike, every lone invalid byte's U+FFFD, stay apart). */
static const char *lp_token(const struct fg_server *s, const struct job *j, int32_t id, struct fg_buf *b)
{
	if (!j->in.tokens_as_ids)
		return piece_text(s, id, b);
	fg_buf_reset(b);
	return fg_buf_printf(b, NULL, "token_id:%ld", (long)id) ? NULL : b->data;
}

/* A completion's top_logprobs entry: {text: logprob} for the k most likely
 * ids, the most likely first (a raw item: the canonical writer would sort
 * the keys). Ids with the same text keep the first place and the later
 * value, as the Python dict vLLM builds in order does. */
static cJSON *top_dict(const struct fg_server *s, const struct job *j, const struct fg_engine_alt *top, size_t k,
		       struct fg_buf *kb)
{
	struct fg_buf o = FG_BUF_INIT, txt[FG_SERVER_LOGPROBS_MAX];
	float val[FG_SERVER_LOGPROBS_MAX];
	size_t n = 0, a, b;
	cJSON *raw = NULL;
	int rc = 0;

	for (a = 0; a < k && a < FG_SERVER_LOGPROBS_MAX; a++) {
		const char *t = top[a].id >= 0 ? lp_token(s, j, top[a].id, kb) : NULL; /* -1: none there */

		if (!t)
			continue;
		for (b = 0; b < n; b++)
			if (txt[b].len == kb->len && !memcmp(txt[b].data, t, kb->len))
				break;
		if (b == n) {
			fg_buf_init(&txt[n], 0);
			if (fg_buf_append(&txt[n], t, kb->len, NULL))
				rc = -1;
			n++;
		}
		val[b] = top[a].lp;
	}
	rc = rc ? rc : fg_buf_putc(&o, '{', NULL);
	for (b = 0; b < n; b++) {
		cJSON *num = cJSON_CreateNumber(lp_json(val[b]));

		if (!rc && b)
			rc = fg_buf_putc(&o, ',', NULL);
		if (!rc)
			rc = fg_buf_json_str(&o, txt[b].data ? txt[b].data : "", txt[b].len, NULL);
		if (!rc)
			rc = fg_buf_putc(&o, ':', NULL);
		if (!rc)
			rc = num ? fg_json_write(&o, num, 0, NULL) : -1;
		cJSON_Delete(num);
	}
	if (!rc)
		rc = fg_buf_putc(&o, '}', NULL);
	if (!rc)
		raw = cJSON_CreateRaw(o.data);
	for (b = 0; b < n; b++)
		fg_buf_release(&txt[b]);
	fg_buf_release(&o);
	return raw ? raw : cJSON_CreateNull();
}

/* A completion's logprobs for the prompt's ids (with_prompt: echo) and the
 * generated ids [g0, g1): OpenAI's legacy form {tokens, token_logprobs,
 * top_logprobs, text_offset}; text_offset counts characters from *offset. */
static cJSON *cmpl_logprobs(const struct fg_server *s, const struct job *j, int with_prompt, size_t g0,
			    size_t g1, size_t *offset)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *toks = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs");
	cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offs = cJSON_AddArrayToObject(o, "text_offset");
	struct fg_buf b = FG_BUF_INIT, kb = FG_BUF_INIT;
	size_t np = with_prompt ? j->in.n_prompt : 0, i, k = (size_t)j->in.logprobs, c;

	for (i = 0; i < np + (g1 - g0); i++) {
		int32_t id = i < np ? j->in.prompt[i] : j->ids[g0 + i - np];
		int has = i < np ? i > 0 && j->prompt_scored : 1;
		float lp = i < np ? (has ? j->plp[i] : 0) : j->glp[g0 + i - np];
		const struct fg_engine_alt *top = i < np ? j->ptop + i * (size_t)j->pk : j->gtop + (g0 + i - np) * k;
		const char *t = lp_token(s, j, id, &b);

		cJSON_AddItemToArray(toks, fg_json_text(t ? t : "", t ? b.len : 0));
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)*offset));
		if (j->in.tokens_as_ids) /* the offsets count the text's characters all the same */
			t = piece_text(s, id, &b);
		for (c = 0; t && c < b.len; c++)
			*offset += ((unsigned char)t[c] & 0xC0) != 0x80;
		if (!has) {
			cJSON_AddItemToArray(lps, cJSON_CreateNull());
			cJSON_AddItemToArray(tops, cJSON_CreateNull());
			continue;
		}
		cJSON_AddItemToArray(lps, cJSON_CreateNumber(lp_json(lp)));
		cJSON_AddItemToArray(tops, top_dict(s, j, top, k, &kb));
	}
	fg_buf_release(&b);
	fg_buf_release(&kb);
	return o;
}

/* One entry of a chat's logprobs: {token, logprob, bytes}. */
static cJSON *chat_entry(const struct fg_server *s, const struct job *j, int32_t id, float lp, struct fg_buf *b)
{
	cJSON *e = cJSON_CreateObject(), *by;
	const char *t = lp_token(s, j, id, b);
	size_t c;

	cJSON_AddItemToObject(e, "token", fg_json_text(t ? t : "", t ? b->len : 0));
	cJSON_AddNumberToObject(e, "logprob", lp_json(lp));
	by = cJSON_AddArrayToObject(e, "bytes");
	for (c = 0; t && c < b->len; c++)
		cJSON_AddItemToArray(by, cJSON_CreateNumber((unsigned char)t[c]));
	return e;
}

/* A chat's logprobs for the generated ids [g0, g1): {content: [{token,
 * logprob, bytes, top_logprobs: [...]}]}. */
static cJSON *chat_logprobs(const struct fg_server *s, const struct job *j, size_t g0, size_t g1)
{
	cJSON *o = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(o, "content");
	struct fg_buf b = FG_BUF_INIT;
	size_t i, a, k = (size_t)j->in.logprobs;

	for (i = g0; i < g1; i++) {
		cJSON *e = chat_entry(s, j, j->ids[i], j->glp[i], &b), *tl = cJSON_AddArrayToObject(e, "top_logprobs");

		for (a = 0; a < k; a++)
			if (j->gtop[i * k + a].id >= 0)
				cJSON_AddItemToArray(tl, chat_entry(s, j, j->gtop[i * k + a].id, j->gtop[i * k + a].lp, &b));
		cJSON_AddItemToArray(content, e);
	}
	fg_buf_release(&b);
	return o;
}

/* The logprobs member of a choice for the generated ids [g0, g1) (and the
 * prompt's, with_prompt): null unless asked for. */
static void add_logprobs(cJSON *c, const struct fg_server *s, const struct job *j, int with_prompt, size_t g0,
			 size_t g1, size_t *offset)
{
	if (j->in.logprobs < 0 || (!j->glp && g1 > g0))
		cJSON_AddNullToObject(c, "logprobs");
	else if (j->in.chat)
		cJSON_AddItemToObject(c, "logprobs", chat_logprobs(s, j, g0, g1));
	else
		cJSON_AddItemToObject(c, "logprobs", cmpl_logprobs(s, j, with_prompt, g0, g1, offset));
}

/* vLLM's prompt_logprobs: per prompt id null (the first) or {"<id>":
 * {logprob, rank, decoded_token}} for the id itself and then the k most
 * likely others (a raw item, in that order). */
static cJSON *prompt_logprobs(const struct fg_server *s, const struct job *j)
{
	cJSON *a = cJSON_CreateArray();
	struct fg_buf o = FG_BUF_INIT, b = FG_BUF_INIT;
	size_t i, t, k = (size_t)j->in.prompt_logprobs;
	int rc = 0;

	for (i = 0; !rc && i < j->in.n_prompt; i++) {
		const struct fg_engine_alt *top = j->ptop + i * (size_t)j->pk;
		cJSON *raw;

		if (i == 0 || !j->prompt_scored) {
			cJSON_AddItemToArray(a, cJSON_CreateNull());
			continue;
		}
		fg_buf_reset(&o);
		for (t = 0; !rc && t <= k; t++) {
			/* t = 0: the prompt's id; then the top ones but it */
			int32_t id = t ? top[t - 1].id : j->in.prompt[i];
			float lp = t ? top[t - 1].lp : j->plp[i];
			int32_t rank = j->prank[i];
			const char *txt;
			cJSON *e;
			size_t u;

			if (t && (id == j->in.prompt[i] || id < 0))
				continue;
			if (t) /* 1 + the ids above it (ties share a rank) */
				for (rank = 1, u = 0; u + 1 < t; u++)
					rank += top[u].lp > lp;
			txt = piece_text(s, id, &b);
			e = cJSON_CreateObject();
			cJSON_AddNumberToObject(e, "logprob", lp_json(lp));
			cJSON_AddNumberToObject(e, "rank", rank);
			cJSON_AddItemToObject(e, "decoded_token", fg_json_text(txt ? txt : "", txt ? b.len : 0));
			rc = fg_buf_printf(&o, NULL, "%s\"%ld\":", o.len ? "," : "{", (long)id);
			if (!rc)
				rc = fg_json_write(&o, e, 0, NULL);
			cJSON_Delete(e);
		}
		if (!rc)
			rc = fg_buf_putc(&o, '}', NULL);
		raw = rc ? NULL : cJSON_CreateRaw(o.data);
		cJSON_AddItemToArray(a, raw ? raw : cJSON_CreateNull());
	}
	fg_buf_release(&o);
	fg_buf_release(&b);
	return a;
}

/* echo: the prompt as text (a string prompt as sent, ids as transformers
 * decodes them), appended to b. */
static int echo_text(const struct fg_server *s, const struct job *j, struct fg_buf *b)
{
	if (j->in.prompt_text)
		return fg_buf_puts(b, j->in.prompt_text, NULL);
	if (!s->tok)
		return fg_buf_append(b, "", 0, NULL);
	{
		int32_t *keep = malloc(j->in.n_prompt * sizeof(*keep));
		size_t n = 0, i;
		int rc;

		if (!keep)
			return -1;
		for (i = 0; i < j->in.n_prompt; i++)
			if (j->in.keep_special || !(fg_tokenizer_token_flags(s->tok, j->in.prompt[i]) & FG_TOK_F_SPECIAL))
				keep[n++] = j->in.prompt[i];
		rc = fg_tokenizer_decode_ex(s->tok, keep, n, FG_TOK_DECODE_REPLACE, b, NULL);
		free(keep);
		return rc;
	}
}

/* A completion choice's text: text[0..len), after the prompt's with echo. */
static int add_completion_text(cJSON *c, const struct fg_server *s, const struct job *j, int echo,
			       const char *text, size_t len)
{
	struct fg_buf all = FG_BUF_INIT;
	int rc = (echo && echo_text(s, j, &all)) || fg_buf_append(&all, text, len, NULL) ||
		 fg_json_add_text(c, "text", all.data ? all.data : "", all.len);

	fg_buf_release(&all);
	return rc ? -1 : 0;
}

static cJSON *envelope(const struct fg_server *s, const struct job *j, const char *object)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddStringToObject(r, "id", j->id);
	cJSON_AddStringToObject(r, "object", object);
	cJSON_AddNumberToObject(r, "created", (double)j->created);
	cJSON_AddStringToObject(r, "model", s->o.model_name);
	/* OpenAI's field for "the backend configuration the model runs with":
	 * here the bundle whose files were checked and served */
	if (s->o.bundle_id)
		cJSON_AddStringToObject(r, "system_fingerprint", s->o.bundle_id);
	return r;
}

/* "bundle": the served bundle's id, or null */
static void add_bundle(cJSON *o, const struct fg_server *s)
{
	if (s->o.bundle_id)
		cJSON_AddStringToObject(o, "bundle", s->o.bundle_id);
	else
		cJSON_AddNullToObject(o, "bundle");
}

/* vLLM's stop_reason beside finish_reason: the stop string or the
 * stop_token_ids id that ended the answer, else null (an eos, the length,
 * or a stream chunk before the last). */
static void add_stop_reason(cJSON *c, const struct job *j, int done)
{
	if (done && j->stop_str >= 0 && (size_t)j->stop_str < j->in.n_stops)
		cJSON_AddStringToObject(c, "stop_reason", j->in.stops[j->stop_str]);
	else if (done && j->stop_id >= 0)
		cJSON_AddNumberToObject(c, "stop_reason", j->stop_id);
	else
		cJSON_AddNullToObject(c, "stop_reason");
}

/* The whole answer of a finished non-stream job. */
static cJSON *final_response(const struct fg_server *s, const struct job *j)
{
	cJSON *r = envelope(s, j, j->in.chat ? "chat.completion" : "text_completion");
	cJSON *ch = cJSON_AddArrayToObject(r, "choices"), *c = cJSON_CreateObject();
	const char *text = j->text.data ? j->text.data : "";
	size_t offset = 0;

	cJSON_AddNumberToObject(c, "index", 0);
	if (j->in.chat) {
		cJSON *m = cJSON_AddObjectToObject(c, "message");

		cJSON_AddStringToObject(m, "role", "assistant");
		if (fg_json_add_text(m, "content", text, j->text.len))
			cJSON_AddStringToObject(m, "content", "");
		add_logprobs(c, s, j, 0, 0, j->n_ids, &offset);
		if (j->in.prompt_logprobs >= 0) /* a chat's at the top level, as vLLM */
			cJSON_AddItemToObject(r, "prompt_logprobs", prompt_logprobs(s, j));
	} else {
		if (add_completion_text(c, s, j, j->in.echo, text, j->text.len))
			cJSON_AddStringToObject(c, "text", "");
		add_logprobs(c, s, j, j->in.echo, 0, j->n_ids, &offset);
		if (j->in.prompt_logprobs >= 0)
			cJSON_AddItemToObject(c, "prompt_logprobs", prompt_logprobs(s, j));
		/* vLLM gives a completion's prompt ids in its choice (a chat's at
		 * the top level, as here for both) */
		if (j->in.echo_ids)
			cJSON_AddItemToObject(c, "prompt_token_ids", ids_array(j->in.prompt, j->in.n_prompt));
	}
	cJSON_AddStringToObject(c, "finish_reason", j->finish);
	add_stop_reason(c, j, 1);
	cJSON_AddItemToObject(c, "token_ids", ids_array(j->ids, j->n_ids));
	cJSON_AddItemToArray(ch, c);
	cJSON_AddItemToObject(r, "usage", usage_obj(j));
	if (j->in.echo_ids)
		cJSON_AddItemToObject(r, "prompt_token_ids", ids_array(j->in.prompt, j->in.n_prompt));
	return r;
}

/* Appends one SSE event: r (consumed) as data. */
static int sse_event(struct job *j, cJSON *r)
{
	int rc = fg_buf_puts(&j->sse, "data: ", NULL);

	if (!rc)
		rc = fg_json_write(&j->sse, r, 0, NULL);
	if (!rc)
		rc = fg_buf_puts(&j->sse, "\n\n", NULL);
	cJSON_Delete(r);
	return rc;
}

/* Appends one SSE event for a chunk holding text (may be NULL) and finish.
 * Its choice carries the ids generated since the previous chunk
 * (token_ids: every id once, in order, over the stream). usage: with
 * stream_options.continuous_usage_stats (vLLM) the counts so far in every
 * chunk; with include_usage null here and the counts in a chunk of their own
 * after the last (OpenAI's form); else the counts in the last chunk. */
static int sse_chunk(const struct fg_server *s, struct job *j, const char *text, size_t len,
		     const char *finish, int role)
{
	cJSON *r = envelope(s, j, j->in.chat ? "chat.completion.chunk" : "text_completion");
	cJSON *ch = cJSON_AddArrayToObject(r, "choices"), *c = cJSON_CreateObject();
	int rc = 0, echo = 0;

	cJSON_AddNumberToObject(c, "index", 0);
	if (j->in.chat) {
		cJSON *d = cJSON_AddObjectToObject(c, "delta");

		if (role)
			cJSON_AddStringToObject(d, "role", "assistant");
		if (text)
			rc = fg_json_add_text(d, "content", text, len);
		if (!role)
			add_logprobs(c, s, j, 0, j->ids_sent, j->n_ids, &j->lp_offset);
	} else {
		/* echo: the prompt's text (and logprobs) lead the first chunk */
		echo = j->in.echo && !j->sent_echo;
		j->sent_echo = 1;
		rc = add_completion_text(c, s, j, echo, text ? text : "", text ? len : 0);
		add_logprobs(c, s, j, echo, j->ids_sent, j->n_ids, &j->lp_offset);
	}
	if (rc) {
		cJSON_Delete(c);
		cJSON_Delete(r);
		return -1;
	}
	if (finish)
		cJSON_AddStringToObject(c, "finish_reason", finish);
	else
		cJSON_AddNullToObject(c, "finish_reason");
	add_stop_reason(c, j, finish != NULL);
	if (!role) {
		cJSON_AddItemToObject(c, "token_ids", ids_array(j->ids + j->ids_sent, j->n_ids - j->ids_sent));
		j->ids_sent = j->n_ids;
	}
	/* return_token_ids: the prompt's ids in the first chunk as vLLM puts
	 * them (a completion's in its choice, a chat's at the top level), and
	 * at the top level of the last one as well (below) */
	if (j->in.echo_ids && !j->sent_prompt) {
		j->sent_prompt = 1;
		cJSON_AddItemToObject(j->in.chat ? r : c, "prompt_token_ids", ids_array(j->in.prompt, j->in.n_prompt));
	}
	cJSON_AddItemToArray(ch, c);
	if (j->in.continuous_usage || (finish && !j->in.include_usage))
		cJSON_AddItemToObject(r, "usage", usage_obj(j));
	else if (j->in.include_usage)
		cJSON_AddNullToObject(r, "usage");
	if (finish && j->in.echo_ids)
		cJSON_AddItemToObject(r, "prompt_token_ids", ids_array(j->in.prompt, j->in.n_prompt));
	rc = sse_event(j, r);
	if (!rc && finish && j->in.include_usage) {
		r = envelope(s, j, j->in.chat ? "chat.completion.chunk" : "text_completion");
		cJSON_AddArrayToObject(r, "choices");
		cJSON_AddItemToObject(r, "usage", usage_obj(j));
		rc = sse_event(j, r);
	}
	return rc;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct job *j = cls;
	struct fg_server *s = *(struct fg_server **)((char *)j - sizeof(struct fg_server *));
	ssize_t n = 0;

	(void)pos;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		if (j->sse_pos < j->sse.len) {
			size_t take = j->sse.len - j->sse_pos < max ? j->sse.len - j->sse_pos : max;

			memcpy(buf, j->sse.data + j->sse_pos, take);
			j->sse_pos += take;
			if (j->sse_pos == j->sse.len) {
				fg_buf_reset(&j->sse);
				j->sse_pos = 0;
			}
			n = (ssize_t)take;
			break;
		}
		if (j->sent_end) {
			n = MHD_CONTENT_READER_END_OF_STREAM;
			break;
		}
		if (j->in.chat && !j->sent_role) {
			j->sent_role = 1;
			if (sse_chunk(s, j, NULL, 0, NULL, 1)) {
				n = MHD_CONTENT_READER_END_WITH_ERROR;
				break;
			}
			continue;
		}
		{
			/* before the end: the stable text (stop strings are searched
			 * in it) but its last holdback bytes, where a stop string
			 * could begin that ends after it */
			size_t safe = j->done ? j->text.len
					      : (j->stable > j->in.holdback ? j->stable - j->in.holdback : 0);

			if (!j->done)
				safe = utf8_whole(j->text.data ? j->text.data : "", safe);
			if (safe > j->emitted) {
				if (sse_chunk(s, j, j->text.data + j->emitted, safe - j->emitted, NULL, 0)) {
					n = MHD_CONTENT_READER_END_WITH_ERROR;
					break;
				}
				j->emitted = safe;
				continue;
			}
		}
		if (j->done) {
			if (j->failed) {
				fg_buf_printf(&j->sse, NULL,
					      "data: {\"error\": {\"message\": \"generation failed\", "
					      "\"type\": \"server_error\", \"param\": null, \"code\": null}}\n\n");
			} else if (sse_chunk(s, j, NULL, 0, j->finish, 0)) {
				n = MHD_CONTENT_READER_END_WITH_ERROR;
				break;
			}
			fg_buf_puts(&j->sse, "data: [DONE]\n\n", NULL);
			j->sent_end = 1;
			continue;
		}
		pthread_cond_wait(&j->cv, &s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return n;
}

/* A job allocated behind a pointer to its server, so the stream callbacks
 * (which get only the job) can find the lock. */
static struct job *job_new(struct fg_server *s)
{
	char *mem = calloc(1, sizeof(struct fg_server *) + sizeof(struct job));
	struct job *j;

	if (!mem)
		return NULL;
	*(struct fg_server **)mem = s;
	j = (struct job *)(mem + sizeof(struct fg_server *));
	pthread_cond_init(&j->cv, NULL);
	j->refs = 1;
	j->created = (long long)time(NULL);
	j->stop_str = -1;
	j->stop_id = -1;
	return j;
}

static void stream_free(void *cls)
{
	struct job *j = cls;
	struct fg_server *s = *(struct fg_server **)((char *)j - sizeof(struct fg_server *));

	pthread_mutex_lock(&s->mu);
	if (!j->done)
		j->cancelled = 1; /* the client went away: stop at the next token */
	job_release(s, j);
	s->active--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void queue_job(struct fg_server *s, struct job *j);

/* Queues the n jobs of one request together (the queue takes one reference
 * of each); 0, or -1 when full or draining. A request is admitted while
 * fewer than max_queue jobs wait; a batch's prompts then all queue. */
static int enqueue(struct fg_server *s, struct job **jobs, int n, int *draining)
{
	*draining = s->draining;
	if (s->draining || s->waiting >= (size_t)s->o.max_queue) {
		s->n_rejected++;
		return -1;
	}
	for (int i = 0; i < n; i++)
		queue_job(s, jobs[i]);
	pthread_cond_broadcast(&s->cv);
	return 0;
}

static void queue_job(struct fg_server *s, struct job *j)
{
	j->refs++;
	if (s->tail)
		s->tail->next = j;
	else
		s->head = j;
	s->tail = j;
	s->waiting++;
	s->active++;
	snprintf(j->id, sizeof(j->id), "%s-%llu", j->in.chat ? "chatcmpl" : "cmpl", ++s->next_id);
}

/* The peer closed its end (recv sees EOF) or the socket failed. A client
 * that half-closes after sending its request reads as gone too; HTTP
 * clients keep the connection open while they wait. */
static int client_gone(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Prompts in a completion's batch: "prompt" an array of 2 or more strings
 * or token-id arrays (OpenAI's batch form); 0 otherwise. */
static int batch_size(const cJSON *body)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, "prompt"), *it;
	int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;

	if (n < 2)
		return 0;
	cJSON_ArrayForEach(it, v)
		if (!cJSON_IsString(it) && !cJSON_IsArray(it))
			return 0; /* token ids: one prompt */
	return n;
}

/* A batch's answer: choice i of the jobs' answers, index i, the usage
 * summed; the prompts' ids stay in their choices. */
static cJSON *batch_response(const struct fg_server *s, struct job **jobs, int n)
{
	cJSON *r = final_response(s, jobs[0]), *chs = cJSON_GetObjectItemCaseSensitive(r, "choices");
	cJSON *u = cJSON_GetObjectItemCaseSensitive(r, "usage");
	static const char *const counts[] = {"prompt_tokens", "completion_tokens", "total_tokens"};

	cJSON_DeleteItemFromObjectCaseSensitive(r, "prompt_token_ids");
	for (int i = 1; i < n; i++) {
		cJSON *ri = final_response(s, jobs[i]);
		cJSON *c = cJSON_DetachItemFromArray(cJSON_GetObjectItemCaseSensitive(ri, "choices"), 0);
		cJSON *ui = cJSON_GetObjectItemCaseSensitive(ri, "usage");

		if (c) {
			cJSON_ReplaceItemInObjectCaseSensitive(c, "index", cJSON_CreateNumber(i));
			cJSON_AddItemToArray(chs, c);
		}
		for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
			cJSON *a = cJSON_GetObjectItemCaseSensitive(u, counts[k]);
			const cJSON *b = cJSON_GetObjectItemCaseSensitive(ui, counts[k]);

			if (a && b)
				cJSON_SetNumberValue(a, a->valuedouble + b->valuedouble);
		}
		cJSON_Delete(ri);
	}
	return r;
}

/* Releases jobs[0..n) of a request that never queued. */
static void release_jobs(struct fg_server *s, struct job **jobs, int n)
{
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < n; i++)
		job_release(s, jobs[i]);
	pthread_mutex_unlock(&s->mu);
}

static enum MHD_Result handle_generate(struct fg_server *s, struct MHD_Connection *c, struct req *rq,
				       int chat)
{
	struct fg_err err;
	cJSON *body = NULL;
	struct job *one_job[1], **jobs = one_job, *j;
	cJSON *batch = NULL, *el = NULL; /* a batch's prompts, taken out of the body */
	const char *param = NULL;
	enum MHD_Result ret;
	int rc = 0, draining, nb, n, i, failed = -1;

	memset(&err, 0, sizeof(err));
	if (rq->too_large)
		return send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error", NULL,
				  "request body over %zu bytes", s->o.max_body);
	if (fg_json_parse(&body, rq->body.data ? rq->body.data : "", rq->body.len, "request body",
			  &err))
		return send_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", NULL, "%s", err.msg);
	nb = chat || !cJSON_IsObject(body) ? 0 : batch_size(body);
	if (nb > FG_SERVER_BATCH_MAX || (nb && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "stream")))) {
		cJSON_Delete(body);
		return send_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "prompt",
				  nb > FG_SERVER_BATCH_MAX ? "prompt: a batch of %d prompts; at most %d a request"
							   : "prompt: a batch of %d prompts cannot stream; send one a request",
				  nb, FG_SERVER_BATCH_MAX);
	}
	n = nb ? nb : 1;
	if (n > 1 && !(jobs = calloc((size_t)n, sizeof(*jobs)))) {
		cJSON_Delete(body);
		return send_error(c, 500, "server_error", NULL, "out of memory");
	}
	if (nb) {
		batch = cJSON_DetachItemFromObjectCaseSensitive(body, "prompt");
		el = batch->child;
	}
	/* a batch: each prompt parsed as a request of its own, the rest shared */
	for (i = 0; i < n && !rc; i++) {
		if (!(jobs[i] = job_new(s))) {
			rc = fg_err_set(&err, FG_ENOMEM, "out of memory");
			break;
		}
		jobs[i]->in.chat = chat;
		/* the body with prompt i in the batch's place (a reference: no copies) */
		if (nb && !cJSON_AddItemReferenceToObject(body, "prompt", el)) {
			i++;
			rc = fg_err_set(&err, FG_ENOMEM, "out of memory");
			break;
		}
		rc = fg_server_parse_request(&jobs[i]->in, &s->limits, body, &param, &err);
		if (nb) {
			cJSON_DeleteItemFromObjectCaseSensitive(body, "prompt");
			el = el->next;
			if (rc)
				fg_err_wrap(&err, "prompt %d of the batch", i);
		}
	}
	cJSON_Delete(batch);
	cJSON_Delete(body);
	if (rc) {
		release_jobs(s, jobs, i);
		if (jobs != one_job)
			free(jobs);
		return send_error(c, rc == FG_ENOMEM ? 500 : MHD_HTTP_BAD_REQUEST,
				  rc == FG_ENOMEM ? "server_error" : "invalid_request_error", param, "%s",
				  err.msg);
	}
	j = jobs[0];
	pthread_mutex_lock(&s->mu);
	if (enqueue(s, jobs, n, &draining)) {
		pthread_mutex_unlock(&s->mu);
		release_jobs(s, jobs, n);
		if (jobs != one_job)
			free(jobs);
		if (draining)
			return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "server_error", NULL,
					  "the server is shutting down");
		return send_error(c, MHD_HTTP_TOO_MANY_REQUESTS, "rate_limit_error", NULL,
				  "the queue is full (%d waiting); retry later", s->o.max_queue);
	}
	if (n > 1) { /* a batch's jobs, all released when the request completes */
		rq->more = jobs;
		rq->n_more = n;
	}
	if (j->in.stream) {
		struct MHD_Response *r;

		pthread_mutex_unlock(&s->mu);
		r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, j,
						      stream_free);
		if (!r) {
			stream_free(j);
			return MHD_NO;
		}
		MHD_add_response_header(r, "Content-Type", "text/event-stream");
		MHD_add_response_header(r, "Cache-Control", "no-cache");
		ret = MHD_queue_response(c, MHD_HTTP_OK, r);
		MHD_destroy_response(r);
		return ret;
	}
	if (n == 1)
		rq->job = j; /* released when the request completes */
	/* Waits for the answers (a batch's in order), looking at the client's
	 * socket every 50 ms: one that went away (EOF or an error) cancels its
	 * generations at the next token, as a streaming client's does, and gets
	 * no answer. */
	{
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		int fd = ci ? ci->connect_fd : -1, gone = 0;

		for (i = 0; i < n; i++)
			while (!jobs[i]->done) {
				struct timespec until;

				clock_gettime(CLOCK_REALTIME, &until);
				until.tv_nsec += 50 * 1000000L;
				if (until.tv_nsec >= 1000000000L) {
					until.tv_sec++;
					until.tv_nsec -= 1000000000L;
				}
				pthread_cond_timedwait(&jobs[i]->cv, &s->mu, &until);
				if (!jobs[i]->done && !gone && fd >= 0 && client_gone(fd)) {
					gone = 1;
					for (int k = i; k < n; k++)
						jobs[k]->cancelled = 1;
				}
			}
		if (gone) {
			pthread_mutex_unlock(&s->mu);
			return MHD_NO;
		}
	}
	pthread_mutex_unlock(&s->mu);
	for (i = 0; i < n && failed < 0; i++)
		if (jobs[i]->failed)
			failed = i;
	if (failed >= 0)
		ret = send_error(c, 500, "server_error", NULL, "generation failed: %s", jobs[failed]->errmsg);
	else {
		cJSON *r = n > 1 ? batch_response(s, jobs, n) : final_response(s, j);

		ret = send_json(c, MHD_HTTP_OK, r);
		cJSON_Delete(r);
	}
	return ret;
}

/* vLLM's /tokenize and /detokenize, for clients that count or check
 * tokens without the model's tokenizer at hand. /tokenize takes a "prompt"
 * string (add_special_tokens, default true: the tokenizer's <bos>) or a
 * chat's "messages", rendered exactly as /v1/chat/completions renders them
 * (the template adds <bos>; add_generation_prompt only true), and answers
 * {count, max_model_len, tokens}; /detokenize takes "tokens" and answers
 * {prompt}: transformers' decode of the ids, special tokens kept (its
 * default), an invalid byte run as U+FFFD. */
static enum MHD_Result handle_tokenize(struct fg_server *s, struct MHD_Connection *c, struct req *rq, int detok)
{
	const struct fg_tokenizer *tok = s->limits.tok;
	struct fg_err err;
	struct fg_buf text;
	cJSON *body = NULL, *r = NULL;
	const cJSON *v;
	const char *param = NULL;
	int32_t *ids = NULL;
	size_t n = 0;
	int rc = 0;
	enum MHD_Result ret;

	memset(&err, 0, sizeof(err));
	fg_buf_init(&text, 0);
	if (rq->too_large)
		return send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error", NULL,
				  "request body over %zu bytes", s->o.max_body);
	if (!tok)
		return send_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", NULL,
				  "this model has no tokenizer");
	if (fg_json_parse(&body, rq->body.data ? rq->body.data : "", rq->body.len, "request body", &err))
		return send_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", NULL, "%s", err.msg);
	if (!cJSON_IsObject(body)) {
		rc = fg_err_set(&err, FG_EINVAL, "the request body must be a JSON object");
	} else if (detok) {
		param = "tokens";
		v = cJSON_GetObjectItemCaseSensitive(body, "tokens");
		if (!cJSON_IsArray(v))
			rc = fg_err_set(&err, FG_EINVAL, "tokens: expected an array of token ids");
		else
			rc = ids_from_json(&ids, &n, v, (int)fg_tokenizer_vocab_size(tok),
					   "tokens: expected token ids in", &err);
		if (!rc)
			rc = fg_tokenizer_decode_ex(tok, ids, n, FG_TOK_DECODE_REPLACE, &text, &err);
		if (!rc && (!(r = cJSON_CreateObject()) || fg_json_add_text(r, "prompt", text.data ? text.data : "",
									    text.len)))
			rc = fg_err_set(&err, FG_ENOMEM, "out of memory");
	} else {
		const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(body, "messages");
		const cJSON *add = cJSON_GetObjectItemCaseSensitive(body, "add_special_tokens");
		const cJSON *gen = cJSON_GetObjectItemCaseSensitive(body, "add_generation_prompt");

		v = cJSON_GetObjectItemCaseSensitive(body, "prompt");
		if (add && !cJSON_IsBool(add) && !cJSON_IsNull(add)) {
			param = "add_special_tokens";
			rc = fg_err_set(&err, FG_EINVAL, "add_special_tokens: expected true or false");
		} else if (msgs) {
			param = "messages";
			if (cJSON_IsTrue(add) || (gen && !cJSON_IsNull(gen) && !cJSON_IsTrue(gen))) {
				param = cJSON_IsTrue(add) ? "add_special_tokens" : "add_generation_prompt";
				rc = fg_err_set(&err, FG_EINVAL, "%s: a chat is tokenized as /v1/chat/completions "
								  "renders it (<bos> from the template, the model's turn "
								  "opened)", param);
			} else {
				rc = fg_chat_encode(&ids, &n, tok, s->limits.format, msgs, &err);
			}
		} else if (cJSON_IsString(v)) {
			param = "prompt";
			rc = fg_tokenizer_encode(tok, v->valuestring, strlen(v->valuestring),
						 cJSON_IsFalse(add) ? 0 : FG_TOK_ADD_SPECIAL, &ids, &n, &err);
		} else {
			param = "prompt";
			rc = fg_err_set(&err, FG_EINVAL, "expected \"prompt\" (a string) or \"messages\"");
		}
		if (!rc) {
			cJSON *a;

			r = cJSON_CreateObject();
			if (!r || !cJSON_AddNumberToObject(r, "count", (double)n) ||
			    !cJSON_AddNumberToObject(r, "max_model_len", fg_engine_max_seq(s->e)) ||
			    !(a = ids_array(ids, n)) || !cJSON_AddItemToObject(r, "tokens", a))
				rc = fg_err_set(&err, FG_ENOMEM, "out of memory");
		}
	}
	cJSON_Delete(body);
	free(ids);
	fg_buf_release(&text);
	if (rc) {
		cJSON_Delete(r);
		if (rc == FG_ENOMEM)
			return send_error(c, 500, "server_error", NULL, "%s", err.msg);
		return send_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", param, "%s", err.msg);
	}
	ret = send_json(c, MHD_HTTP_OK, r);
	cJSON_Delete(r);
	return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	struct fg_server *s = cls;
	struct req *rq = *con_cls;

	(void)version;
	if (!rq) {
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		fg_buf_init(&rq->body, s->o.max_body);
		*con_cls = rq;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!rq->too_large && fg_buf_append(&rq->body, upload, *upload_size, NULL)) {
			rq->too_large = 1;
			fg_buf_release(&rq->body);
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (!strcmp(url, "/health")) {
		cJSON *r = cJSON_CreateObject();
		enum MHD_Result ret;

		pthread_mutex_lock(&s->mu);
		cJSON_AddStringToObject(r, "status", s->draining ? "draining" : "ok");
		add_bundle(r, s);
		cJSON_AddNumberToObject(r, "waiting", (double)s->waiting);
		cJSON_AddBoolToObject(r, "running", s->running);
		{
			cJSON *st = cJSON_AddObjectToObject(r, "stats");

			cJSON_AddNumberToObject(st, "requests", (double)s->n_requests);
			cJSON_AddNumberToObject(st, "cancelled", (double)s->n_cancelled);
			cJSON_AddNumberToObject(st, "tokens", (double)s->n_tokens);
			cJSON_AddNumberToObject(st, "rejected", (double)s->n_rejected);
		}
		pthread_mutex_unlock(&s->mu);
		ret = send_json(c, s->draining ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK, r);
		cJSON_Delete(r);
		return ret;
	}
	/* OpenAI's list and retrieve (/v1/models/<id>: the served model, else
	 * 404 as OpenAI answers an unknown id) */
	if (!strcmp(url, "/v1/models") || !strncmp(url, "/v1/models/", 11)) {
		cJSON *r = cJSON_CreateObject(), *m = cJSON_CreateObject();
		enum MHD_Result ret;

		if (url[10] == '/' && strcmp(url + 11, s->o.model_name)) {
			cJSON_Delete(r);
			cJSON_Delete(m);
			return send_error(c, MHD_HTTP_NOT_FOUND, "invalid_request_error", "model",
					  "the model '%s' does not exist (this server serves '%s')", url + 11,
					  s->o.model_name);
		}
		cJSON_AddStringToObject(m, "id", s->o.model_name);
		cJSON_AddStringToObject(m, "object", "model");
		cJSON_AddNumberToObject(m, "created", 0);
		cJSON_AddStringToObject(m, "owned_by", "fgpack");
		cJSON_AddNumberToObject(m, "max_model_len", fg_engine_max_seq(s->e));
		add_bundle(m, s);
		if (url[10] == '/') {
			cJSON_Delete(r);
			r = m;
		} else {
			cJSON_AddStringToObject(r, "object", "list");
			cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "data"), m);
		}
		ret = send_json(c, MHD_HTTP_OK, r);
		cJSON_Delete(r);
		return ret;
	}
	/* vLLM's /version and /ping (what its deployments probe) */
	if (!strcmp(url, "/version") || !strcmp(url, "/ping")) {
		cJSON *r = cJSON_CreateObject();
		enum MHD_Result ret;

		if (url[1] == 'v') {
			cJSON_AddStringToObject(r, "version", FG_VERSION);
			cJSON_AddStringToObject(r, "build", fg_build_id);
		}
		ret = send_json(c, MHD_HTTP_OK, r);
		cJSON_Delete(r);
		return ret;
	}
	if (!strcmp(url, "/v1/completions") || !strcmp(url, "/v1/chat/completions")) {
		if (strcmp(method, "POST"))
			return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", NULL,
					  "%s wants POST", url);
		return handle_generate(s, c, rq, !strcmp(url, "/v1/chat/completions"));
	}
	if (!strcmp(url, "/tokenize") || !strcmp(url, "/detokenize")) {
		if (strcmp(method, "POST"))
			return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", NULL,
					  "%s wants POST", url);
		return handle_tokenize(s, c, rq, !strcmp(url, "/detokenize"));
	}
	return send_error(c, MHD_HTTP_NOT_FOUND, "invalid_request_error", NULL, "no route %s %s",
			  method, url);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	struct fg_server *s = cls;
	struct req *rq = *con_cls;

	(void)c;
	(void)toe;
	if (!rq)
		return;
	if (rq->job || rq->n_more) {
		pthread_mutex_lock(&s->mu);
		if (rq->job) {
			job_release(s, rq->job);
			s->active--;
		}
		for (int i = 0; i < rq->n_more; i++) {
			job_release(s, rq->more[i]);
			s->active--;
		}
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
	free(rq->more);
	fg_buf_release(&rq->body);
	free(rq);
	*con_cls = NULL;
}

/* ---- lifecycle ---- */

static long long engine_gen_max_new(const void *e, size_t n_prompt)
{
	return fg_engine_gen_max_new(e, n_prompt);
}

int fg_server_new(struct fg_server **out, struct fg_engine *e, const struct fg_tokenizer *tok,
		  const struct fg_server_opts *opts, struct fg_err *err)
{
	struct fg_server *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	s->e = e;
	s->tok = tok;
	if (opts)
		s->o = *opts;
	if (!s->o.host)
		s->o.host = "127.0.0.1";
	if (s->o.max_queue <= 0)
		s->o.max_queue = 8;
	if (!s->o.max_body)
		s->o.max_body = (size_t)1 << 20;
	if (!s->o.model_name)
		s->o.model_name = "fgpack";
	s->format = s->o.chat_format != FG_CHAT_NONE ? s->o.chat_format : fg_chat_detect(tok);
	s->end_of_turn = fg_chat_end_of_turn_id(tok, s->format);
	s->dec_splits = tok ? fg_tokenizer_decode_splits(tok) : 0;
	s->tok_eos = tok ? fg_tokenizer_eos_id(tok) : -1;
	s->limits.tok = tok;
	s->limits.format = s->format;
	s->limits.max_seq = fg_engine_max_seq(e);
	s->limits.n_vocab = fg_engine_vocab_size(e);
	s->limits.gen_max_new = engine_gen_max_new;
	s->limits.gen_ud = e;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	*out = s;
	return 0;
}

int fg_server_start(struct fg_server *s, struct fg_err *err)
{
	struct sockaddr_in sa;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)s->o.port);
	if (inet_pton(AF_INET, s->o.host, &sa.sin_addr) != 1)
		return fg_err_set(err, FG_EINVAL, "'%s' is not an IPv4 address", s->o.host);
	if (pthread_create(&s->worker, NULL, worker_main, s))
		return fg_err_set(err, FG_ENOMEM, "cannot start the worker thread");
	s->worker_started = 1;
	s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
					MHD_USE_ITC,
				(uint16_t)s->o.port, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, &sa,
				MHD_OPTION_NOTIFY_COMPLETED, completed, s,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)256,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600, MHD_OPTION_END);
	if (!s->d) {
		pthread_mutex_lock(&s->mu);
		s->stopping = 1;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->worker, NULL);
		s->worker_started = 0;
		return fg_err_set(err, FG_EIO, "cannot listen on %s:%d (in use?)", s->o.host, s->o.port);
	}
	return 0;
}

int fg_server_port(const struct fg_server *s)
{
	const union MHD_DaemonInfo *i;

	if (!s->d)
		return -1;
	i = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	return i ? i->port : s->o.port;
}

enum fg_chat_format fg_server_chat_format(const struct fg_server *s)
{
	return s->format;
}

void fg_server_drain(struct fg_server *s)
{
	if (!s->d)
		return;
	pthread_mutex_lock(&s->mu);
	s->draining = 1;
	pthread_mutex_unlock(&s->mu);
	MHD_quiesce_daemon(s->d);
	pthread_mutex_lock(&s->mu);
	while (s->head || s->running)
		pthread_cond_wait(&s->cv, &s->mu);
	{
		/* let answers already computed reach their clients (30 s at most) */
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 30;
		while (s->active > 0 && pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0)
			;
	}
	s->stopping = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	/* finished streams hand their last bytes out before the daemon stops */
	MHD_stop_daemon(s->d);
	s->d = NULL;
	if (s->worker_started)
		pthread_join(s->worker, NULL);
	s->worker_started = 0;
}

void fg_server_free(struct fg_server *s)
{
	if (!s)
		return;
	fg_server_drain(s);
	if (s->worker_started) {
		pthread_mutex_lock(&s->mu);
		s->stopping = 1;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->worker, NULL);
	}
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}
