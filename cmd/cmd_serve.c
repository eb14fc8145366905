/* cmd_serve.c - `fgpack serve`: a verified bundle (or a model folder) over
 * an OpenAI-compatible HTTP API (engine/server.h). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "bundle.h"
#include "cmd.h"
#include "engine/engine.h"
#include "engine/server.h"
#include "json.h"
#include "tarball.h"
#include "tokenizer.h"
#include "workq.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fgpack serve (BUNDLE.fgb | --model DIR) [--port P] [--host ADDR]\n"
		"                    [--queue N] [--max-body BYTES] [--threads N] [--tokenizer FILE]\n"
		"                    [--name NAME] [--device cpu|cuda] [--chat-format gemma4|gemma3]\n"
		"                    [--drafter DIR] [--draft-tokens K] [--centroid-top-k N]\n\n"
		"Serves POST /v1/chat/completions and /v1/completions (greedy; max_tokens, stop,\n"
		"stream), GET /v1/models and GET /health on ADDR:P (default 127.0.0.1:8000; port 0\n"
		"picks a free one). A bundle is extracted and every file checked first (a mismatch\n"
		"exits 3); its engine settings apply. One generation at a time; up to --queue\n"
		"requests wait (default 8), more get 429. SIGTERM or SIGINT: stop accepting,\n"
		"finish what is queued, exit 0. The tokenizer is tokenizer.json in the model\n"
		"folder unless --tokenizer names one; without one only token-id prompts work.\n"
		"Chat prompts use the turn format the tokenizer's added tokens call for: Gemma 4's\n"
		"(<|turn> ... <turn|>) when it has them, else Gemma 3's (<start_of_turn> ...\n"
		"<end_of_turn>); --chat-format forces one. Generation stops at the format's\n"
		"end-of-turn token, the tokenizer's <eos> and the model's eos ids (those of\n"
		"generation_config.json when the folder has one, as transformers' generate();\n"
		"its max_new_tokens is the default max_tokens; its sampling settings are not\n"
		"applied, with a note: decoding is greedy). Tool calling and thinking mode are\n"
		"not supported (a request with tools gets 400). --drafter DIR decodes\n"
		"speculatively with a Gemma 4 assistant drafter (the same tokens; a bundle's\n"
		"own drafter applies by itself; --draft-tokens K per round, default 4, or the\n"
		"bundle's num_speculative_tokens; --centroid-top-k N, 1..min(num_centroids, 64),\n"
		"the drafter's centroid top-k (the challenge's CENTROID_TOP_K: with\n"
		"use_ordered_embeddings its head scores the tokens of the N best centroids\n"
		"only), default its config's centroid_intermediate_top_k or the bundle's\n"
		"honoured centroid_top_k). A bundle's id (the sha256 of its tar) comes\n"
		"from the lanes that extract it (for a bundle packed before 2026-12-04 it\n"
		"is read beside the extraction and the model's load) and is reported as every\n"
		"response's system_fingerprint and as \"bundle\" in /health and /v1/models.\n"
		"Prints 'listening on http://ADDR:PORT' on stderr once ready.\n");
}

int cmd_serve(int argc, char **argv)
{
	struct fg_server_opts so;
	struct fg_engine_opts eo;
	struct fg_server *srv = NULL;
	struct fg_engine *e = NULL;
	struct fg_tokenizer *tok = NULL;
	struct fg_bundle *b = NULL;
	struct fg_tarball_idpass *idp = NULL;
	char bundle_id[FG_SHA256_HEX_LEN + 1] = "";
	struct fg_buf model = FG_BUF_INIT, tpath = FG_BUF_INIT;
	struct fg_err err;
	const char *bundle = NULL, *model_dir = NULL, *tok_file = NULL, *drafter = NULL;
	struct fg_buf bdraft = FG_BUF_INIT;
	sigset_t set;
	int i, sig, rc, port = 8000, queue = 8, max_body = 1 << 20, draft_k = 4, draft_k_given = 0, top_k = 0;
	int bundle_top_k = 0; /* top_k came from the bundle's settings */

	memset(&err, 0, sizeof(err));
	memset(&so, 0, sizeof(so));
	memset(&eo, 0, sizeof(eo));
	eo.threads = 1;
	if (fg_cmd_wants_help(argc, argv)) {
		usage(stdout);
		return FG_EXIT_OK;
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int takes = strcmp(a, "--model") == 0 || !strcmp(a, "--port") || !strcmp(a, "--host") ||
			    !strcmp(a, "--queue") || !strcmp(a, "--max-body") || !strcmp(a, "--threads") ||
			    !strcmp(a, "--tokenizer") || !strcmp(a, "--name") || !strcmp(a, "--device") ||
			    !strcmp(a, "--chat-format") || !strcmp(a, "--drafter") || !strcmp(a, "--draft-tokens") ||
			    !strcmp(a, "--centroid-top-k");

		if (takes && !v)
			return fg_cmd_usage_error("serve", "%s needs a value", a);
		if (!strcmp(a, "--model"))
			model_dir = v;
		else if (!strcmp(a, "--host"))
			so.host = v;
		else if (!strcmp(a, "--drafter"))
			drafter = v;
		else if (!strcmp(a, "--draft-tokens") && fg_parse_int(v, 1, FG_ENGINE_MAX_DRAFT, &draft_k))
			return fg_cmd_usage_error("serve", "--draft-tokens wants 1..%d", FG_ENGINE_MAX_DRAFT);
		else if (!strcmp(a, "--draft-tokens"))
			draft_k_given = 1;
		else if (!strcmp(a, "--centroid-top-k") && fg_parse_int(v, 1, FG_ENGINE_MAX_CENTROID_TOP_K, &top_k))
			return fg_cmd_usage_error("serve", "--centroid-top-k wants 1..%d, not %s",
						  FG_ENGINE_MAX_CENTROID_TOP_K, v);
		else if (!strcmp(a, "--tokenizer"))
			tok_file = v;
		else if (!strcmp(a, "--name"))
			so.model_name = v;
		else if (!strcmp(a, "--chat-format") && fg_chat_format_parse(&so.chat_format, v, &err))
			return fg_cmd_usage_error("serve", "--chat-format wants gemma4 or gemma3");
		else if (!strcmp(a, "--device") && strcmp(v, "cpu") && strcmp(v, "cuda"))
			return fg_cmd_usage_error("serve", "--device wants cpu or cuda");
		else if (!strcmp(a, "--device"))
			eo.device = strcmp(v, "cuda") ? FG_DEVICE_CPU : FG_DEVICE_CUDA;
		else if ((!strcmp(a, "--port") && fg_parse_int(v, 0, 65535, &port)) ||
			 (!strcmp(a, "--queue") && fg_parse_int(v, 1, 100000, &queue)) ||
			 (!strcmp(a, "--max-body") && fg_parse_int(v, 1024, 1 << 30, &max_body)) ||
			 (!strcmp(a, "--threads") && fg_parse_int(v, 1, 256, &eo.threads)))
			return fg_cmd_usage_error("serve", "%s: bad number '%s'", a, v);
		else if (takes)
			;
		else if (a[0] == '-')
			return fg_cmd_usage_error("serve", "unknown option %s", a);
		else if (!bundle)
			bundle = a;
		else
			return fg_cmd_usage_error("serve", "one bundle at a time");
		if (takes)
			i++;
	}
	if (!!bundle == !!model_dir)
		return fg_cmd_usage_error("serve", "give a BUNDLE or --model DIR (one of them)");
	if (top_k && !drafter && !bundle)
		return fg_cmd_usage_error("serve", "--centroid-top-k applies with --drafter or a bundle's drafter only");
	so.port = port;
	so.max_queue = queue;
	so.max_body = (size_t)max_body;

	if (bundle) {
		const cJSON *st, *un, *u;
		int cpus = fg_workq_cpus(16);

		/* the bundle id: computed by the lanes that extract the files when
		 * the bundle keeps the id's states (docs/formats/bundle.md); else
		 * read from start to end on a thread of its own while the files are
		 * extracted and the model loads (the file's stamp must hold
		 * throughout: then the id names the bytes served) */
		int id_lanes = fg_tarball_id_states(bundle);

		if (!id_lanes && fg_tarball_id_start(&idp, bundle, NULL))
			idp = NULL;
		/* the files: extracted in lanes on the other CPUs where the bundle
		 * allows (each member still checked against bundle.json) */
		rc = id_lanes ? fg_bundle_open_id(&b, bundle, NULL, NULL, cpus, &err)
			      : fg_bundle_open_files(&b, bundle, NULL, idp && cpus > 1 ? cpus - 1 : cpus, &err);
		if (!rc && id_lanes)
			memcpy(bundle_id, b->id, sizeof(bundle_id));
		if (rc) {
			size_t k;

			for (k = 0; b && k < b->n_problems; k++)
				fg_cmd_line("fgpack serve: %s: %s", b->problems[k].path, b->problems[k].what);
			goto fail;
		}
		if (!fg_json_str(b->meta, "model")) {
			rc = fg_err_set(&err, FG_EINVAL, "%s: the bundle names no model for the engine "
							 "(try fgpack exec)", bundle);
			goto fail;
		}
		if (top_k && !drafter && !fg_json_str(b->meta, "drafter")) {
			fg_bundle_free(b);
			return fg_cmd_usage_error("serve", "--centroid-top-k applies with --drafter or a bundle's "
						  "drafter only (%s has none)", bundle);
		}
		rc = fg_bundle_path(&model, b, fg_json_str(b->meta, "model"), &err);
		if (rc)
			goto fail;
		rc = fg_bundle_engine_settings(&eo.sliding_window, &eo.max_seq, b, &err);
		if (rc)
			goto fail;
		st = fg_json_obj(b->meta, "settings");
		un = st ? fg_json_arr(st, "unhonoured") : NULL;
		cJSON_ArrayForEach(u, un) {
			char note[1024];

			fg_bundle_unhonoured_note(note, sizeof(note), u);
			fprintf(stderr, "fgpack serve: note: %s\n", note);
		}
		if (!so.model_name)
			so.model_name = fg_json_str(b->meta, "name");
		model_dir = model.data;
	}
	rc = fg_engine_load(&e, model_dir, &eo, &err);
	if (rc)
		goto fail;
	if (b && !drafter) { /* the bundle's own drafter, with its settings */
		int bk, btop;

		if ((rc = fg_bundle_drafter(&bdraft, &bk, &btop, b, draft_k, FG_ENGINE_MAX_DRAFT,
					    FG_ENGINE_MAX_CENTROID_TOP_K, &err)))
			goto fail;
		if (bdraft.len) {
			drafter = bdraft.data;
			if (!draft_k_given)
				draft_k = bk;
			if (!top_k)
				top_k = bundle_top_k = btop;
		}
	}
	if (drafter && draft_k) {
		if ((rc = fg_engine_set_drafter(e, drafter, draft_k, top_k, &err))) {
			if (bundle_top_k)
				fg_err_wrap(&err, "bundle.json drafter, settings centroid_top_k %d", bundle_top_k);
			goto fail;
		}
		/* drafter: maybe the bundle's (bundle.json "drafter") */
		if (fg_engine_draft_top_k(e))
			fg_cmd_line("fgpack serve: speculative decoding with %s, %d drafts per round, centroid top-k %d",
				    drafter, draft_k, fg_engine_draft_top_k(e));
		else
			fg_cmd_line("fgpack serve: speculative decoding with %s, %d drafts per round", drafter,
				    draft_k);
	}
	if (tok_file)
		rc = fg_buf_puts(&tpath, tok_file, &err);
	else {
		rc = fg_buf_printf(&tpath, &err, "%s/tokenizer.json", model_dir);
		if (!rc && access(tpath.data, R_OK))
			fg_buf_reset(&tpath);
	}
	if (!rc && tpath.len)
		rc = fg_tokenizer_load(&tok, tpath.data, &err);
	if (rc)
		goto fail;
	if (!tok)
		fprintf(stderr, "fgpack serve: note: no tokenizer.json: only token-id prompts work\n");
	if (fg_engine_gen_unapplied(e)[0])
		fg_cmd_line("fgpack serve: note: generation_config.json: %s not applied: %s",
			    fg_engine_gen_unapplied(e), FG_ENGINE_GREEDY_WHY);

	if (idp) {
		uint8_t id[32];
		struct fg_err ierr;

		memset(&ierr, 0, sizeof(ierr));
		rc = fg_tarball_id_end(idp, id, &ierr);
		idp = NULL;
		if (rc)
			fprintf(stderr, "fgpack serve: note: the bundle id is not known (%s): responses carry "
					"none\n", ierr.msg);
		else
			fg_hex_encode(id, 32, bundle_id);
		rc = 0;
	}
	so.bundle_id = bundle_id[0] ? bundle_id : NULL;
	/* the server's threads inherit this mask; this thread takes the signals */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	rc = fg_server_new(&srv, e, tok, &so, &err);
	if (!rc)
		rc = fg_server_start(srv, &err);
	if (rc)
		goto fail;
	if (tok)
		fprintf(stderr, "fgpack serve: chat format %s%s\n", fg_chat_format_name(fg_server_chat_format(srv)),
			so.chat_format != FG_CHAT_NONE ? " (--chat-format)" : " (from the tokenizer)");
	if (b) /* once all went well: a failure above stays one line */
		fprintf(stderr, "fgpack serve: %zu files checked against bundle.json in %.2f s (%d %s)\n",
			b->n_files, b->seconds, b->lanes > 1 ? b->lanes : 1,
			b->lanes > 1 ? "lanes" : "pass from start to end");
	if (bundle_id[0])
		fprintf(stderr, "fgpack serve: bundle %s\n", bundle_id);
	fprintf(stderr, "fgpack serve: listening on http://%s:%d\n", so.host ? so.host : "127.0.0.1",
		fg_server_port(srv));
	sigwait(&set, &sig);
	fprintf(stderr, "fgpack serve: %s: finishing queued requests\n",
		sig == SIGTERM ? "SIGTERM" : "SIGINT");
	fg_server_drain(srv);
	fg_server_free(srv);
	fg_tokenizer_free(tok);
	fg_engine_free(e);
	fg_bundle_free(b);
	fg_buf_release(&model);
	fg_buf_release(&bdraft);
	fg_buf_release(&tpath);
	fprintf(stderr, "fgpack serve: stopped\n");
	return FG_EXIT_OK;
fail:
	fg_tarball_id_cancel(idp);
	fg_server_free(srv);
	fg_tokenizer_free(tok);
	fg_engine_free(e);
	fg_bundle_free(b);
	fg_buf_release(&model);
	fg_buf_release(&bdraft);
	fg_buf_release(&tpath);
	return fg_cmd_fail("serve", &err);
}
