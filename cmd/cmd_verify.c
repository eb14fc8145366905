/* cmd_verify.c - `fgpack verify`: re-hash a bundle, replay its golden
 * transcript here, measure tokens/s and perplexity, write summary.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "bundle.h"
#include "cmd.h"
#include "engine/engine.h"
#include "engine/golden.h"
#include "fsutil.h"
#include "json.h"
#include "tarball.h"
#include "version.h"
#include "workq.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fgpack verify BUNDLE.fgb [--json] [--summary FILE] [--no-replay] [--no-bench]\n"
		"                     [--threads N] [--max-new N] [--warmup N] [--device cpu|cuda]\n"
		"                     [--transcript FILE] [--record FILE] [--id SHA256] [--show-id]\n"
		"                     [--url URL]\n\n"
		"Extracts the bundle into a temporary folder, re-hashing every member against\n"
		"bundle.json; replays the golden transcript with the embedded engine and reports\n"
		"the level that holds: 'logits' (every token and every step's logits hash equal:\n"
		"same device class), 'tokens' (token ids equal, logits differ), or a mismatch at\n"
		"step N of prompt P; then measures tokens/s (after --warmup one-token prompts,\n"
		"default 64; median over the golden prompts, --max-new new tokens each, default\n"
		"128 or what the context leaves after the longest prompt, only completed requests\n"
		"count) and perplexity on the bundled eval text.\n"
		"Writes summary.json (--summary FILE; '-' for none).\n\n"
		"  --id SHA256        the bundle id this archive must have (as 'fgpack pack'\n"
		"                     printed it, or from a signature you checked): one hashing\n"
		"                     pass over the tar proves every byte; member digests are\n"
		"                     then recomputed only to name the files after a mismatch.\n"
		"                     Without it every member is hashed against bundle.json; the\n"
		"                     id is computed beside (informational) when the transcript is\n"
		"                     replayed or --show-id is given, else not (one hashing pass)\n"
		"  --show-id          compute and print the bundle id without --id too\n"
		"  --threads N        the engine's threads; and, for a files check without the\n"
		"                     id (--no-replay), the threads that hash a bundle's members\n"
		"                     in lanes, two per thread (default: the CPUs online)\n"
		"  --transcript FILE  replay FILE (a transcript recorded elsewhere, e.g. by\n"
		"                     --record on the reference GPU) instead of the bundled one\n"
		"  --record FILE      also record this device's own transcript of the same\n"
		"                     prompts into FILE (for 'fgpack pack --golden FILE')\n"
		"  --url URL          replay the transcript against the OpenAI-compatible server\n"
		"                     at URL (fgpack serve, or the stack fgpack exec started)\n"
		"                     instead of the embedded engine: token for token (greedy,\n"
		"                     ignore_eos, return_token_ids), its system_fingerprint, when\n"
		"                     it gives one, must be this bundle's id; then tokens/s over\n"
		"                     HTTP by the same rules, each request timed end to end\n\n"
		"Exit: 0 verified, 1 failure, 2 usage, 3 mismatch (a file or the transcript).\n");
}

struct opts {
	const char *bundle, *summary, *transcript, *record, *id, *url;
	int json, no_replay, no_bench, threads, max_new, warmup, device, max_new_given, show_id;
	int threads_given;
};

static const char *level_name(int level)
{
	return level == FG_GOLDEN_LOGITS ? "logits" : level == FG_GOLDEN_TOKENS ? "tokens" : "mismatch";
}

/* Loads the bundle's model with its settings. */
static int load_engine(struct fg_engine **e, const struct fg_bundle *b, int threads, int device,
		       struct fg_err *err)
{
	const char *model = fg_json_str(b->meta, "model");
	struct fg_engine_opts o;
	struct fg_buf dir = FG_BUF_INIT;
	int rc;

	*e = NULL;
	if (!model)
		return fg_err_set(err, FG_EFORMAT, "bundle.json: golden transcript but no model");
	memset(&o, 0, sizeof(o));
	o.threads = threads;
	o.device = device;
	rc = fg_bundle_engine_settings(&o.sliding_window, &o.max_seq, b, err);
	if (!rc)
		rc = fg_bundle_path(&dir, b, model, err);
	if (!rc)
		rc = fg_engine_load(e, dir.data, &o, err);
	if (!rc) { /* the bundle's assistant drafter: the same tokens, more per pass */
		int k, top_k;

		rc = fg_bundle_drafter(&dir, &k, &top_k, b, 4, FG_ENGINE_MAX_DRAFT, FG_ENGINE_MAX_CENTROID_TOP_K, err);
		if (!rc && dir.len && k && (rc = fg_engine_set_drafter(*e, dir.data, k, top_k, err)) && top_k)
			fg_err_wrap(err, "bundle.json drafter, settings centroid_top_k %d", top_k);
	}
	fg_buf_release(&dir);
	return rc;
}

/* A JSON member of the bundle: from the extracted copy, or from the archive
 * when nothing was extracted (--url); or, file not NULL, that file. */
static int read_json(cJSON **out, const struct fg_bundle *b, const char *archive, const char *rel,
		     const char *file, struct fg_err *err)
{
	struct fg_buf p = FG_BUF_INIT, t = FG_BUF_INIT;
	int rc = !file && b->dir ? fg_bundle_path(&p, b, rel, err) : 0;

	*out = NULL;
	if (!rc)
		rc = file ? fg_file_read(file, (size_t)256 << 20, &t, err)
		     : b->dir ? fg_file_read(p.data, (size_t)256 << 20, &t, err)
			      : fg_tarball_read_member(archive, rel, (size_t)256 << 20, &t, err);
	if (!rc)
		rc = fg_json_parse(out, t.data, t.len, file ? file : rel, err);
	fg_buf_release(&p);
	fg_buf_release(&t);
	return rc;
}

/* The transcript to replay: --transcript FILE (named in sum), else the
 * bundle's own. */
static int read_transcript(cJSON **tr, const struct opts *o, const struct fg_bundle *b,
			   const cJSON *golden, cJSON *sum, struct fg_err *err)
{
	const char *name = fg_json_str(golden, "transcript") ? fg_json_str(golden, "transcript")
							     : "golden/transcript.json";
	int rc = read_json(tr, b, o->bundle, name, o->transcript, err);

	if (!rc && o->transcript)
		cJSON_AddStringToObject(sum, "transcript", o->transcript);
	return rc;
}

int cmd_verify(int argc, char **argv)
{
	struct opts o = { NULL, "summary.json", NULL, NULL, NULL, NULL, 0, 0, 0, 1, 128, 64, FG_DEVICE_CPU, 0, 0, 0 };
	struct fg_bundle *b = NULL;
	struct fg_engine *e = NULL;
	struct fg_golden_result gr;
	struct fg_golden_speed sp;
	struct fg_err err;
	struct fg_buf text = FG_BUF_INIT;
	cJSON *sum = cJSON_CreateObject(), *files, *tr = NULL, *ev = NULL, *g, *dev = NULL;
	const cJSON *golden;
	const char *verdict = "verified-files";
	int i, rc, exit_code = FG_EXIT_OK, replayed = 0;
	size_t k;

	memset(&err, 0, sizeof(err));
	memset(&gr, 0, sizeof(gr));
	memset(&sp, 0, sizeof(sp));
	if (fg_cmd_wants_help(argc, argv)) {
		usage(stdout);
		cJSON_Delete(sum);
		return FG_EXIT_OK;
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		int takes = !strcmp(a, "--summary") || !strcmp(a, "--threads") || !strcmp(a, "--device") ||
			    !strcmp(a, "--max-new") || !strcmp(a, "--warmup") ||
			    !strcmp(a, "--transcript") || !strcmp(a, "--record") || !strcmp(a, "--id") ||
			    !strcmp(a, "--url");

		if (takes && !val) {
			cJSON_Delete(sum);
			return fg_cmd_usage_error("verify", "%s needs a value", a);
		}
		if (!strcmp(a, "--json"))
			o.json = 1;
		else if (!strcmp(a, "--no-replay"))
			o.no_replay = 1;
		else if (!strcmp(a, "--show-id"))
			o.show_id = 1;
		else if (!strcmp(a, "--no-bench"))
			o.no_bench = 1;
		else if (!strcmp(a, "--summary"))
			o.summary = val;
		else if (!strcmp(a, "--transcript"))
			o.transcript = val;
		else if (!strcmp(a, "--record"))
			o.record = val;
		else if (!strcmp(a, "--url"))
			o.url = val;
		else if (!strcmp(a, "--id") && !fg_sha256_hex_valid(val)) {
			cJSON_Delete(sum);
			return fg_cmd_usage_error("verify", "--id wants 64 lowercase hex digits");
		} else if (!strcmp(a, "--id"))
			o.id = val;
		else if (!strcmp(a, "--device") && strcmp(val, "cpu") && strcmp(val, "cuda")) {
			cJSON_Delete(sum);
			return fg_cmd_usage_error("verify", "--device wants cpu or cuda");
		} else if (!strcmp(a, "--device"))
			o.device = strcmp(val, "cuda") ? FG_DEVICE_CPU : FG_DEVICE_CUDA;
		else if (!strcmp(a, "--max-new") && !fg_parse_int(val, 1, 65536, &o.max_new))
			o.max_new_given = 1;
		else if (!strcmp(a, "--threads") && !fg_parse_int(val, 1, 256, &o.threads))
			o.threads_given = 1;
		else if ((!strcmp(a, "--threads") && fg_parse_int(val, 1, 256, &o.threads)) ||
			 (!strcmp(a, "--max-new") && fg_parse_int(val, 1, 65536, &o.max_new)) ||
			 (!strcmp(a, "--warmup") && fg_parse_int(val, 0, 100000, &o.warmup))) {
			cJSON_Delete(sum);
			return fg_cmd_usage_error("verify", "%s: bad number '%s'", a, val);
		} else if (takes)
			;
		else if (a[0] == '-' && a[1]) {
			cJSON_Delete(sum);
			return fg_cmd_usage_error("verify", "unknown option %s", a);
		} else if (!o.bundle)
			o.bundle = a;
		else {
			cJSON_Delete(sum);
			return fg_cmd_usage_error("verify", "one bundle at a time");
		}
		if (takes)
			i++;
	}
	if (!o.bundle) {
		cJSON_Delete(sum);
		return fg_cmd_usage_error("verify", "which bundle?");
	}
	if (o.url && (o.no_replay || o.record || o.device != FG_DEVICE_CPU)) {
		cJSON_Delete(sum);
		return fg_cmd_usage_error("verify", "--url replays on the server: not with %s",
					  o.no_replay ? "--no-replay" : o.record ? "--record" : "--device");
	}
	/* a folder, block device or socket at --record or --summary: refused
	 * before the replay, not after it */
	if ((o.record && fg_out_check(o.record, &err)) ||
	    (o.summary && strcmp(o.summary, "-") && fg_out_check(o.summary, &err))) {
		cJSON_Delete(sum);
		return fg_cmd_fail("verify", &err);
	}
	if (!sum)
		return FG_EXIT_FAIL;
	cJSON_AddNumberToObject(sum, "schema", 1);
	{
		char tool[160];

		snprintf(tool, sizeof tool, "fgpack %s (build %s)", FG_VERSION, fg_build_id);
		cJSON_AddStringToObject(sum, "tool", tool);
	}

	if (!o.no_replay) {
		/* replay needs the files on disk; a bundle without a transcript does not */
		struct fg_buf j = FG_BUF_INIT;
		cJSON *meta = NULL;

		if (!fg_tarball_read_member(o.bundle, FG_BUNDLE_JSON, FG_BUNDLE_JSON_MAX, &j, NULL) &&
		    !fg_json_parse(&meta, j.data, j.len, "bundle.json", NULL) &&
		    !fg_json_obj(meta, "golden"))
			o.no_replay = 1;
		cJSON_Delete(meta);
		fg_buf_release(&j);
	}
	/* nothing replayed: a files check. Without a trusted id the member
	 * digests prove the files and the id is not needed: one hashing pass
	 * unless --show-id asks for it (docs/formats/bundle.md) */
	if (!o.no_replay && !o.url)
		rc = fg_bundle_open_id(&b, o.bundle, NULL, o.id,
				       o.threads_given ? o.threads : fg_workq_cpus(16), &err);
	else if (o.id || o.show_id || o.url) /* --url: the id the server must name */
		rc = fg_bundle_scan_id(&b, o.bundle, o.id,
				       o.threads_given ? o.threads : fg_workq_cpus(16), &err);
	else
		rc = fg_bundle_scan_files(&b, o.bundle,
					  o.threads_given ? o.threads : fg_workq_cpus(16), &err);
	if (rc && !b) {
		cJSON_Delete(sum);
		return fg_cmd_fail("verify", &err);
	}
	if (b->id[0])
		cJSON_AddStringToObject(sum, "bundle", b->id);
	else
		cJSON_AddNullToObject(sum, "bundle"); /* not computed: a files check without --id */
	files = cJSON_AddObjectToObject(sum, "files");
	cJSON_AddNumberToObject(files, "checked", (double)b->n_files);
	cJSON_AddNumberToObject(files, "bytes", (double)b->bytes);
	cJSON_AddNumberToObject(files, "seconds", b->seconds);
	cJSON_AddNumberToObject(files, "mb_per_s",
				b->seconds > 0 ? (double)b->bytes / b->seconds / 1e6 : 0);
	/* what proved the files: the expected id over the whole tar, or each
	 * member's digest against bundle.json */
	cJSON_AddStringToObject(files, "checked_by", b->by_id ? "bundle id" : "member digests");
	/* N: a seekable bundle's members hashed from N places at once */
	cJSON_AddNumberToObject(files, "lanes", b->lanes ? b->lanes : 1);
	if (o.id)
		cJSON_AddStringToObject(sum, "expected_id", o.id);
	{
		cJSON *pr = cJSON_AddArrayToObject(files, "problems");

		for (k = 0; k < b->n_problems; k++) {
			cJSON *p = cJSON_CreateObject();

			cJSON_AddStringToObject(p, "path", b->problems[k].path);
			cJSON_AddStringToObject(p, "problem", b->problems[k].what);
			cJSON_AddItemToArray(pr, p);
			fg_cmd_line("fgpack verify: %s: %s", b->problems[k].path, b->problems[k].what);
		}
	}
	if (b->n_problems) {
		verdict = "mismatch";
		exit_code = FG_EXIT_MISMATCH;
		goto report;
	}
	{
		const cJSON *un = fg_json_arr(fg_json_obj(b->meta, "settings"), "unhonoured"), *u;

		cJSON_ArrayForEach(u, un) {
			char note[1024];

			fg_bundle_unhonoured_note(note, sizeof(note), u);
			fprintf(stderr, "fgpack verify: note: %s\n", note);
		}
		if (un)
			cJSON_AddItemToObject(sum, "unhonoured", cJSON_Duplicate(un, 1));
	}
	golden = fg_json_obj(b->meta, "golden");
	if (o.url) {
		/* the transcript against a running server, not the engine */
		if (!golden && !o.transcript)
			rc = fg_err_set(&err, FG_EINVAL, "%s has no golden transcript to compare the server "
							 "with (give one with --transcript)",
					o.bundle);
		else
			rc = read_transcript(&tr, &o, b, golden, sum, &err);
		/* and the perplexity on the bundled eval ids, through the server */
		if (!rc && !o.no_bench && fg_json_str(golden, "eval"))
			rc = read_json(&ev, b, o.bundle, fg_json_str(golden, "eval"), NULL, &err);
		if (!rc)
			rc = fg_cmd_verify_url(o.url, b->id, tr, fg_json_arr(ev, "ids"), o.warmup, o.max_new,
					       o.max_new_given, o.no_bench, sum, &verdict, &exit_code, &err);
		if (!rc && ev && fg_json_str(ev, "tokenizer") && cJSON_GetObjectItem(sum, "ppl"))
			cJSON_AddStringToObject(sum, "ppl_tokenizer", fg_json_str(ev, "tokenizer"));
		if (rc)
			goto fail;
		replayed = 1;
		goto report;
	}
	if (!golden || o.no_replay)
		goto report;
	rc = read_transcript(&tr, &o, b, golden, sum, &err);
	if (!rc)
		rc = load_engine(&e, b, o.threads, o.device, &err);
	if (!rc && fg_engine_gen_unapplied(e)[0]) {
		/* the model folder's generation_config.json asks for more than
		 * greedy: said, as the manifest's unhonoured knobs are */
		cJSON *un = cJSON_GetObjectItemCaseSensitive(sum, "unhonoured"), *u = cJSON_CreateObject();

		fg_cmd_line("fgpack verify: note: generation_config.json: %s not applied: %s",
			    fg_engine_gen_unapplied(e), FG_ENGINE_GREEDY_WHY);
		if (!un)
			un = cJSON_AddArrayToObject(sum, "unhonoured");
		if (!u || !un || !cJSON_AddStringToObject(u, "key", "generation_config.json") ||
		    !cJSON_AddStringToObject(u, "value", fg_engine_gen_unapplied(e)) ||
		    !cJSON_AddStringToObject(u, "why", FG_ENGINE_GREEDY_WHY) || !cJSON_AddItemToArray(un, u)) {
			cJSON_Delete(u);
			rc = fg_err_set(&err, FG_ENOMEM, "out of memory");
		}
	}
	if (!rc && o.record) {
		/* this device's own transcript of the same prompts, before the replay */
		cJSON *mine = NULL;
		struct fg_buf t = FG_BUF_INIT;
		long long mn = 0;

		if (fg_json_int(tr, "max_new", &mn) || mn < 1 || mn > 65536)
			rc = fg_err_set(&err, FG_EFORMAT, "transcript: no max_new");
		if (!rc)
			rc = fg_golden_record(&mine, e, fg_json_arr(tr, "prompts"), (int)mn, &err);
		if (!rc)
			rc = fg_json_write(&t, mine, 1, &err);
		if (!rc)
			rc = fg_file_write_out(o.record, t.data, t.len, 0644, &err);
		if (!rc) {
			cJSON_AddStringToObject(sum, "recorded", o.record);
			cJSON_AddStringToObject(sum, "recorded_digest", fg_json_str(mine, "digest"));
		}
		cJSON_Delete(mine);
		fg_buf_release(&t);
	}
	if (!rc)
		rc = fg_golden_replay(&gr, e, tr, &err);
	if (rc)
		goto fail;
	replayed = 1;
	g = cJSON_AddObjectToObject(sum, "golden");
	cJSON_AddStringToObject(g, "level", level_name(gr.level));
	cJSON_AddNumberToObject(g, "steps", (double)gr.steps);
	cJSON_AddItemToObject(g, "recorded_on", cJSON_Duplicate(fg_json_obj(tr, "device"), 1));
	{
		/* the stop set run and serve use: generation_config.json's or
		 * config.json's eos ids, as the transcript recorded them */
		int ne, q;
		const int32_t *eos = fg_engine_eos_ids(e, &ne);
		cJSON *a = cJSON_AddArrayToObject(g, "eos_token_ids");

		for (q = 0; a && q < ne; q++)
			cJSON_AddItemToArray(a, cJSON_CreateNumber(eos[q]));
		cJSON_AddStringToObject(g, "eos_token_ids_recorded", gr.eos_same < 0 ? "not recorded"
								    : gr.eos_same ? "same" : "different");
		if (gr.eos_same == 0)
			fprintf(stderr, "fgpack verify: note: the engine's stop set (eos ids) differs from the "
					"transcript's eos_token_ids: this engine reads the model folder's "
					"config.json / generation_config.json otherwise than the one that "
					"recorded it (tokens are compared all the same)\n");
	}
	{
		/* identity, not a verdict: another driver changes nothing; another
		 * device class explains a 'tokens' level */
		cJSON *here = NULL;
		struct fg_buf diffs = FG_BUF_INIT;
		int same = 0;

		if (!fg_golden_device(&here, e, NULL) &&
		    !fg_golden_device_compare(&same, &diffs, fg_json_obj(tr, "device"), here, NULL)) {
			cJSON_AddBoolToObject(g, "same_device_class", same);
			cJSON_AddStringToObject(g, "device_differences", diffs.len ? diffs.data : "");
			if (diffs.len && same)
				fg_cmd_line("fgpack verify: note: recorded on the same device class; "
					    "identity differs (not a failure): %s", diffs.data);
			else if (diffs.len)
				fg_cmd_line("fgpack verify: note: recorded on another device class (%s); "
					    "identical logits are expected only on the same class",
					    diffs.data);
		}
		cJSON_Delete(here);
		fg_buf_release(&diffs);
	}
	if (gr.level == FG_GOLDEN_MISMATCH) {
		cJSON_AddNumberToObject(g, "prompt", gr.prompt);
		cJSON_AddNumberToObject(g, "step", gr.step);
		cJSON_AddNumberToObject(g, "want", gr.want);
		cJSON_AddNumberToObject(g, "got", gr.got);
		fprintf(stderr, "fgpack verify: golden mismatch at step %d of prompt %d: token %d, "
				"transcript has %d\n",
			gr.step, gr.prompt, gr.got, gr.want);
		verdict = "mismatch";
		exit_code = FG_EXIT_MISMATCH;
		goto report;
	}
	if (gr.level == FG_GOLDEN_TOKENS) {
		cJSON_AddNumberToObject(g, "first_logits_difference_prompt", gr.chain_prompt);
		cJSON_AddNumberToObject(g, "first_logits_difference_step", gr.chain_step);
	}
	verdict = gr.level == FG_GOLDEN_LOGITS ? "verified" : "verified-tokens";
	if (o.no_bench)
		goto report;
	{
		/* the longest golden prompt and max_new new tokens must fit the
		 * context: the default shrinks to fit, with a note; an explicit
		 * --max-new that does not fit leaves those prompts uncompleted */
		const cJSON *p;
		int longest = 0, fit;

		cJSON_ArrayForEach(p, fg_json_arr(tr, "prompts"))
			if (cJSON_GetArraySize(fg_json_arr(p, "ids")) > longest)
				longest = cJSON_GetArraySize(fg_json_arr(p, "ids"));
		fit = fg_engine_max_seq(e) - longest + 1;
		if (fit < o.max_new && !o.max_new_given && fit >= 1) {
			fprintf(stderr, "fgpack verify: note: timing %d new tokens per prompt, not %d: the "
					"longest golden prompt (%d tokens) leaves %d of the context of %d\n",
				fit, o.max_new, longest, fit, fg_engine_max_seq(e));
			o.max_new = fit;
		} else if (fit < o.max_new)
			fprintf(stderr, "fgpack verify: note: --max-new %d does not fit after the longest "
					"golden prompt (%d tokens) in the context of %d; such prompts "
					"cannot complete\n",
				o.max_new, longest, fg_engine_max_seq(e));
	}
	fg_engine_spec_reset(e);
	rc = fg_golden_speed(&sp, e, fg_json_arr(tr, "prompts"), o.warmup, o.max_new, &err);
	if (rc)
		goto fail;
	cJSON_AddNumberToObject(sum, "tps", sp.tps_median);
	if (fg_engine_draft_tokens(e)) { /* the speed pass drafted: how well */
		struct fg_engine_spec_stats ss;
		cJSON *spj = cJSON_AddObjectToObject(sum, "speculative");

		fg_engine_spec_stats(e, &ss);
		fg_cmd_spec_json(spj, e);
		cJSON_AddNumberToObject(spj, "tokens_per_pass",
					fg_engine_spec_tokens_per_round(&ss));
	}
	{
		char c[64];

		snprintf(c, sizeof(c), "%d/%d", sp.completed, sp.requests);
		cJSON_AddStringToObject(sum, "completed", c);
	}
	cJSON_AddNumberToObject(sum, "warmup", sp.warmup);
	cJSON_AddNumberToObject(sum, "max_new", sp.max_new);
	if (fg_json_str(golden, "eval")) {
		int32_t *ids = NULL;
		size_t n, scored;
		double ppl;

		rc = read_json(&ev, b, o.bundle, fg_json_str(golden, "eval"), NULL, &err);
		if (!rc)
			rc = fg_golden_ids(&ids, &n, fg_json_arr(ev, "ids"), &err);
		if (!rc)
			rc = fg_golden_perplexity(&ppl, &scored, e, ids, n, &err);
		free(ids);
		if (rc)
			goto fail;
		cJSON_AddNumberToObject(sum, "ppl", ppl);
		cJSON_AddNumberToObject(sum, "ppl_tokens", (double)scored);
		cJSON_AddStringToObject(sum, "ppl_tokenizer", fg_json_str(ev, "tokenizer")
								? fg_json_str(ev, "tokenizer") : "unknown");
	}
	if (sp.completed != sp.requests) {
		verdict = "incomplete";
		exit_code = FG_EXIT_FAIL;
	}
report:
	if (e && !fg_golden_device(&dev, e, &err))
		cJSON_AddItemToObject(sum, "device", dev);
	cJSON_AddStringToObject(sum, "verdict", verdict);
	cJSON_AddBoolToObject(sum, "replayed", replayed);
	fg_json_write(&text, sum, 1, &err);
	if (o.summary && strcmp(o.summary, "-") &&
	    fg_file_write_out(o.summary, text.data, text.len, 0644, &err)) {
		fg_cmd_fail("verify", &err);
		if (exit_code == FG_EXIT_OK)
			exit_code = FG_EXIT_FAIL;
	}
	if (o.json)
		fputs(text.data, stdout);
	else {
		printf("bundle   %s\n",
		       b->id[0] ? b->id : "(id not computed: --id ID checks one, --show-id prints it)");
		printf("files    %zu checked, %llu bytes, %.1f MB/s%s%s\n", b->n_files, b->bytes,
		       b->seconds > 0 ? (double)b->bytes / b->seconds / 1e6 : 0.0,
		       b->n_problems ? ", MISMATCH" : ", all match",
		       b->by_id ? " (by the expected bundle id)" : "");
		if (o.url) { /* what the server did, from the summary */
			const cJSON *sv = fg_json_obj(sum, "server"), *gj = fg_json_obj(sum, "golden");
			const cJSON *tps = cJSON_GetObjectItem(sum, "tps");

			printf("server   %s (model %s, fingerprint %s)\n", fg_json_str(sv, "url"),
			       fg_json_str(sv, "model") ? fg_json_str(sv, "model") : "?",
			       fg_json_str(sv, "system_fingerprint") ? fg_json_str(sv, "system_fingerprint")
								      : "none");
			if (gj)
				printf("golden   %s (%d steps)\n", fg_json_str(gj, "level"),
				       cJSON_GetObjectItem(gj, "steps") ? cJSON_GetObjectItem(gj, "steps")->valueint
									: 0);
			if (tps)
				printf("speed    %.2f tokens/s median over HTTP, %s completed\n", tps->valuedouble,
				       fg_json_str(sum, "completed"));
		} else if (replayed)
			printf("golden   %s (%zu steps)\n", level_name(gr.level), gr.steps);
		if (!o.url && sp.requests)
			printf("speed    %.2f tokens/s median, %d/%d completed\n", sp.tps_median,
			       sp.completed, sp.requests);
		if (cJSON_GetObjectItem(sum, "ppl"))
			printf("ppl      %.4f\n", cJSON_GetObjectItem(sum, "ppl")->valuedouble);
		printf("verdict  %s\n", verdict);
	}
	fg_buf_release(&text);
	cJSON_Delete(sum);
	cJSON_Delete(tr);
	cJSON_Delete(ev);
	fg_engine_free(e);
	fg_bundle_free(b);
	return exit_code;
fail:
	fg_buf_release(&text);
	cJSON_Delete(sum);
	cJSON_Delete(tr);
	cJSON_Delete(ev);
	fg_engine_free(e);
	fg_bundle_free(b);
	return fg_cmd_fail("verify", &err);
}
