/* cmd_pack.c - `fgpack pack`: one reproducible, self-verifying bundle (.fgb)
 * from model folders or from a manifest (docs/formats/bundle.md). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "bundle.h"
#include "cmd.h"
#include "engine/config.h"
#include "engine/engine.h"
#include "engine/golden.h"
#include "fsutil.h"
#include "json.h"
#include "lock.h"
#include "manifest.h"
#include "store.h"
#include "tokenizer.h"
#include "version.h"
#include "workq.h"

#define MAX_COMPONENTS 32

/* The eval text bundled when --eval is not given: plain English prose, so
 * that perplexity on a real Gemma checkpoint means something. */
static const char default_eval[] =
	"The river rose slowly through the night, and by morning the low fields along its "
	"banks had turned into a wide, still lake. Farmers stood on the road above the "
	"water and counted what they could still see: the tops of fences, a drowned cart, "
	"the roof of a shed where chickens had climbed to wait. Nobody spoke much. The "
	"rain had stopped before dawn, and the sky was a clean pale blue, as if nothing "
	"had happened at all. By noon the first boats came down from the village, and the "
	"work of carrying people and animals to higher ground began.\n";

struct comp_arg {
	const char *key;  /* manifest component key, or a role in folder mode */
	const char *role;
	const char *path; /* folder or file on disk, or NULL: from the lock and store */
	int is_file;
	const struct fg_lock_component *lc; /* when path is NULL */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fgpack pack [MANIFEST] [--model DIR] [--drafter DIR] [--keepset FILE]\n"
		"                   [--component KEY=PATH]... [--lock FILE] [--eval FILE] [--prompts N]\n"
		"                   [--golden-tokens N] [--no-golden] [--attest FILE]... [--level N]\n"
		"                   [--device cpu|cuda] [--engine FILE] [--golden FILE] [--threads N]\n"
		"                   [--store DIR] [--rehash] -o OUT.fgb\n\n"
		"Packs a reproducible bundle: bundle.json (every file's size and sha256), the\n"
		"manifest, components/<role>/, patches/ (serve.py and *.py beside the manifest),\n"
		"the engine binary, golden/ (a transcript the engine decoded greedily here) and\n"
		"eval/. Prints the bundle id (sha256 of the uncompressed tar) on stdout.\n\n"
		"  MANIFEST             a challenge manifest.json; each component comes from\n"
		"                       --component KEY=PATH (KEY as in the manifest, e.g.\n"
		"                       WEIGHTS_BUCKET=./weights), else from the lock and store\n"
		"                       that fgpack pull filled ($FGPACK_HOME)\n"
		"  --lock FILE          the lock (default: buckets.lock beside the manifest, else ./)\n"
		"  --model DIR          the checkpoint the engine serves (components/model)\n"
		"  --drafter DIR        a drafter checkpoint (components/drafter)\n"
		"  --keepset FILE       an LM-head keepset (components/keepset/)\n"
		"  --eval FILE          text for verify's perplexity (default: a built-in paragraph)\n"
		"  --prompts N          golden prompts (default 4)\n"
		"  --golden-tokens N    tokens decoded per golden prompt (default 32)\n"
		"  --attest FILE        add FILE under attestations/ (repeatable)\n"
		"  --no-golden          pack without a transcript (components the engine cannot load)\n"
		"  --level N            zstd level 1..19 (default 3); a frame whose samples zstd\n"
		"                       cannot shrink is written as stored blocks instead\n"
		"  --threads N          threads: N hash the files; with N > 1, N - 1 then compress\n"
		"                       the bundle's zstd frames while the tar stream is read and\n"
		"                       hashed (default: the CPUs online, at most 8); the bytes\n"
		"                       do not depend on it\n"
		"  --device cpu|cuda    the engine path that records the transcript (default cpu)\n"
		"  --golden FILE        bundle FILE as the golden transcript (one that 'fgpack verify\n"
		"                       --record' wrote on the reference GPU) instead of recording here\n"
		"  --engine FILE        the engine binary to bundle (default: $FGPACK_ENGINE, else\n"
		"                       fgpack-engine or build/fgpack-engine beside this fgpack, as\n"
		"                       'make engine' builds it; else this fgpack, with a warning)\n"
		"  --store DIR          the store (default $FGPACK_HOME, $XDG_CACHE_HOME/fgpack,\n"
		"                       ~/.cache/fgpack): the lock's blobs, and the stamps below\n"
		"  --rehash             hash every file, even one the store vouches for (below)\n"
		"  -o OUT.fgb           where to write\n\n"
		"A file that is a store blob or a hard link to one (as 'fgpack pull --into' makes\n"
		"them), unchanged since the store checked its bytes, is listed by the blob's\n"
		"sha256 without being hashed again; so is any other file an earlier pack or bake\n"
		"hashed with the same store, while its size, mtime and ctime (and inode) are those it\n"
		"had then (the store's seen/ records; one is kept only for a file last changed\n"
		"2 s or more before it was hashed). The copy into the bundle still fails if a\n"
		"file changes meanwhile.\n"
		"Member times are SOURCE_DATE_EPOCH (default 0). Same inputs, same bytes.\n");
}

/* 1 when the bundle's path out lies in folder dir or below it: packing
 * that folder again would take the earlier bundle in as one of its files. */
static int out_inside(const char *out, const char *dir)
{
	const char *sl = strrchr(out, '/');
	char *parent = sl ? strndup(out, sl == out ? 1 : (size_t)(sl - out)) : strdup(".");
	char *o = parent ? realpath(parent, NULL) : NULL, *d = realpath(dir, NULL);
	size_t dl = d ? strlen(d) : 0;
	int in = o && d && (dl == 1 || (!strncmp(o, d, dl) && (o[dl] == '/' || o[dl] == '\0')));

	free(parent);
	free(o);
	free(d);
	return in;
}

static int role_taken(struct comp_arg *c, int n, const char *role)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(c[i].role, role))
			return 1;
	return 0;
}

/* The bundle folder name of component i: its role, or role.<key> when two
 * share a role. */
static int comp_dir(struct fg_buf *out, struct comp_arg *c, int n, int i, struct fg_err *err)
{
	int j, shared = 0;

	for (j = 0; j < n; j++)
		if (j != i && !strcmp(c[j].role, c[i].role))
			shared = 1;
	if (!shared)
		return fg_buf_printf(out, err, "components/%s", c[i].role);
	fg_buf_printf(out, err, "components/%s.", c[i].role);
	for (j = 0; c[i].key[j]; j++)
		fg_buf_putc(out, (char)(c[i].key[j] >= 'A' && c[i].key[j] <= 'Z' ? c[i].key[j] + 32
										: c[i].key[j]), err);
	return 0;
}

/* Component c's config.json text (in its folder, or its blob in the store
 * for a component from the lock) into t; nonzero when it has none. */
static int comp_config(struct fg_buf *t, const struct comp_arg *c, struct fg_store *store)
{
	struct fg_buf p = FG_BUF_INIT;
	struct fg_err e2 = { 0 };
	size_t k;
	int rc = 1;

	if (c->is_file)
		return 1;
	if (c->path)
		rc = fg_path_join(&p, c->path, "config.json", &e2);
	else if (c->lc && store)
		for (k = 0; k < c->lc->n_files; k++)
			if (!strcmp(c->lc->files[k].path, "config.json"))
				rc = fg_store_blob_path(&p, store, c->lc->files[k].sha256, &e2);
	if (!rc)
		rc = fg_file_read(p.data, (size_t)16 << 20, t, &e2);
	fg_buf_release(&p);
	return rc;
}

/* 1 when config.json text t says model_type "gemma4_assistant". */
static int is_assistant(const struct fg_buf *t)
{
	struct fg_err e2 = { 0 };
	cJSON *j = NULL;
	int yes = 0;

	if (t->len && !fg_json_parse(&j, t->data, t->len, "config.json", &e2)) {
		const char *mt = fg_json_str(j, "model_type");

		yes = mt && !strcmp(mt, "gemma4_assistant");
	}
	cJSON_Delete(j);
	return yes;
}

/* The bundle carries an assistant drafter whose config.json text is cfg:
 * settings' num_speculative_tokens (SPECULATIVE_CONFIG) is honoured now, no
 * longer listed as unhonoured; so is centroid_top_k (CENTROID_TOP_K) when
 * the drafter's head takes it (a centroid head, the value in its range:
 * fg_g4_set_centroid_top_k), else its why says what stops it. */
static int honour_drafter(cJSON *settings, const struct fg_buf *cfg, struct fg_err *err)
{
	cJSON *un = settings ? cJSON_GetObjectItem(settings, "unhonoured") : NULL;
	cJSON *hon = settings ? cJSON_GetObjectItem(settings, "honoured") : NULL;
	int i, n = cJSON_GetArraySize(un);

	for (i = n - 1; i >= 0; i--) {
		cJSON *u = cJSON_GetArrayItem(un, i);
		const char *key = fg_json_str(u, "key"), *why = NULL;
		struct fg_g4_config c;
		struct fg_err e2 = { 0 };
		long long v = -1;

		if (key && !strcmp(key, "SPECULATIVE_CONFIG.num_speculative_tokens"))
			why = "";
		else if (key && !strcmp(key, "CENTROID_TOP_K")) {
			fg_json_int(settings, "centroid_top_k", &v);
			if (!fg_g4_config_parse(&c, cfg->data, cfg->len, "the drafter's config.json", &e2) &&
			    !fg_g4_set_centroid_top_k(&c, v < 0 || v > 1 << 20 ? -1 : (int)v, &e2))
				why = "";
			else
				why = e2.msg;
		}
		if (!why)
			continue;
		if (why[0]) { /* still not applied: the drafter's reason */
			fg_cmd_line("fgpack pack: note: %s=%s not applied by the bundled drafter: %s", key,
				    fg_json_str(u, "value") ? fg_json_str(u, "value") : "?", why);
			if (!cJSON_ReplaceItemInObjectCaseSensitive(u, "why", cJSON_CreateString(why)))
				return fg_err_set(err, FG_ENOMEM, "out of memory");
			continue;
		}
		if (hon && !cJSON_AddItemToArray(hon, cJSON_CreateString(!strcmp(key, "CENTROID_TOP_K")
										 ? "CENTROID_TOP_K"
										 : "SPECULATIVE_CONFIG")))
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		cJSON_DeleteItemFromArray(un, i);
	}
	return 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* Adds serve.py and every *.py in the manifest's folder under patches/. */
static int add_patches(struct fg_bundle_builder *b, const char *manifest_path, size_t *n,
		       struct fg_err *err)
{
	struct fg_buf dir = FG_BUF_INIT, src = FG_BUF_INIT, rel = FG_BUF_INIT;
	const char *slash = strrchr(manifest_path, '/');
	struct dirent **names = NULL;
	int i, cnt, rc = 0;

	*n = 0;
	if (slash)
		rc = fg_buf_append(&dir, manifest_path, slash == manifest_path ? 1 : (size_t)(slash - manifest_path), err);
	else
		rc = fg_buf_puts(&dir, ".", err);
	if (rc)
		return rc;
	cnt = scandir(dir.data, &names, NULL, alphasort);
	if (cnt < 0) {
		rc = fg_err_set(err, FG_EIO, "open folder %s: %s", dir.data, strerror(errno));
		cnt = 0;
	}
	for (i = 0; i < cnt; i++) {
		const char *nm = names[i]->d_name;
		size_t len = strlen(nm);
		struct stat st;

		if (!rc && len > 3 && !strcmp(nm + len - 3, ".py") && nm[0] != '.') {
			fg_buf_reset(&src);
			fg_buf_reset(&rel);
			rc = fg_path_join(&src, dir.data, nm, err);
			if (!rc && !stat(src.data, &st) && S_ISREG(st.st_mode)) {
				rc = fg_buf_printf(&rel, err, "patches/%s", nm);
				if (!rc)
					rc = fg_bundle_add_file(b, rel.data, src.data, err);
				if (!rc)
					(*n)++;
			}
		}
		free(names[i]);
	}
	free(names);
	fg_buf_release(&dir);
	fg_buf_release(&src);
	fg_buf_release(&rel);
	return rc;
}

/* Token ids of the eval text: with tokenizer.json in the model folder, its
 * encoding (BOS first, "tokenizer": "tokenizer.json <sha256>"); without one,
 * the text's bytes modulo the vocabulary ("bytes-mod-vocab"), which makes a
 * repeatable but not a comparable perplexity. */
static int eval_ids(cJSON **out, const char *model_dir, const char *text, size_t len, int n_vocab,
		    struct fg_err *err)
{
	cJSON *o = cJSON_CreateObject(), *ids;
	struct fg_buf tp = FG_BUF_INIT;
	struct fg_tokenizer *tok = NULL;
	int32_t *enc = NULL;
	size_t i, n = 0;
	int rc = 0;

	*out = NULL;
	if (!o || !(ids = cJSON_AddArrayToObject(o, "ids"))) {
		cJSON_Delete(o);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	rc = fg_path_join(&tp, model_dir, "tokenizer.json", err);
	if (!rc && !access(tp.data, R_OK)) {
		uint8_t d[32];
		char hex[65], what[96];

		rc = fg_tokenizer_load(&tok, tp.data, err);
		if (!rc)
			rc = fg_tokenizer_encode(tok, text, len, FG_TOK_ADD_SPECIAL, &enc, &n, err);
		if (!rc)
			rc = fg_sha256_file(tp.data, d, NULL, err);
		if (!rc) {
			fg_hex_encode(d, 32, hex);
			snprintf(what, sizeof(what), "tokenizer.json %s", hex);
			cJSON_AddStringToObject(o, "tokenizer", what);
			for (i = 0; i < n; i++)
				cJSON_AddItemToArray(ids, cJSON_CreateNumber(enc[i] < n_vocab ? enc[i] : 0));
		}
	} else if (!rc) {
		cJSON_AddStringToObject(o, "tokenizer", "bytes-mod-vocab");
		for (i = 0; i < len; i++)
			cJSON_AddItemToArray(ids, cJSON_CreateNumber((unsigned char)text[i] % n_vocab));
	}
	free(enc);
	fg_tokenizer_free(tok);
	fg_buf_release(&tp);
	if (rc) {
		cJSON_Delete(o);
		return fg_err_wrap(err, "eval text");
	}
	*out = o;
	return 0;
}

/* Opens the lock (lock_path, else buckets.lock beside the manifest, else
 * ./buckets.lock), finds this manifest's entry by the manifest's sha256, and
 * opens the store. Keeps the lock's bytes for the bundle. */
static int open_lock(struct fg_lock **lock, struct fg_lock_manifest **lm, struct fg_store **st,
		     const char *lock_path, const char *manifest, const struct fg_manifest *m,
		     const char *store_dir, struct fg_buf *raw, struct fg_err *err)
{
	struct fg_buf p = FG_BUF_INIT;
	const char *slash = strrchr(manifest, '/');
	size_t i;
	int rc = 0;

	if (lock_path)
		rc = fg_buf_puts(&p, lock_path, err);
	else {
		if (slash)
			rc = fg_buf_append(&p, manifest, (size_t)(slash - manifest) + 1, err);
		if (!rc)
			rc = fg_buf_puts(&p, "buckets.lock", err);
		if (!rc && access(p.data, F_OK)) {
			fg_buf_reset(&p);
			rc = fg_buf_puts(&p, "buckets.lock", err);
		}
	}
	if (!rc)
		rc = fg_lock_read(lock, p.data, err);
	if (!rc)
		rc = fg_file_read(p.data, FG_LOCK_MAX_BYTES, raw, err);
	for (i = 0; !rc && i < (*lock)->n_manifests; i++)
		if (!strcmp((*lock)->manifests[i]->sha256, m->sha256))
			*lm = (*lock)->manifests[i];
	if (!rc && !*lm)
		rc = fg_err_set(err, FG_ENOTFOUND, "%s: no entry for this manifest (sha256 %.12s…); "
						   "run fgpack pull",
				p.data, m->sha256);
	if (!rc)
		rc = fg_store_open(st, store_dir, err);
	/* the lock's blobs are read from the store: a gc must not remove them
	 * meanwhile (it refuses while the store is in use; held until the store
	 * is freed). A store whose lock file cannot be opened is read without. */
	if (!rc)
		fg_store_use(*st, NULL);
	fg_buf_release(&p);
	return rc;
}

static int add_json(struct fg_bundle_builder *b, const char *path, const cJSON *j,
		    struct fg_err *err)
{
	struct fg_buf t = FG_BUF_INIT;
	int rc = fg_json_write(&t, j, 1, err);

	if (!rc)
		rc = fg_bundle_add_mem(b, path, t.data, t.len, 0644, err);
	fg_buf_release(&t);
	return rc;
}

/* The golden prompts: text encoded by the model folder's tokenizer.json when
 * it has one that fits the model, else id sequences (with a note saying why). */
static int golden_prompts(cJSON **out, const char *model_dir, struct fg_engine *e, int n,
			  struct fg_err *err)
{
	struct fg_buf tp = FG_BUF_INIT;
	struct fg_tokenizer *tok = NULL;
	struct fg_err terr;
	int rc = fg_path_join(&tp, model_dir, "tokenizer.json", err);

	if (rc)
		return rc;
	memset(&terr, 0, sizeof(terr));
	if (!access(tp.data, R_OK)) {
		if (!fg_tokenizer_load(&tok, tp.data, &terr) &&
		    !fg_golden_text_prompts(out, tok, fg_engine_vocab_size(e), fg_engine_bos_id(e), n,
					    &terr)) {
			fg_tokenizer_free(tok);
			fg_buf_release(&tp);
			return 0;
		}
		fprintf(stderr, "fgpack pack: note: golden prompts as token ids: %s\n", terr.msg);
	}
	fg_tokenizer_free(tok);
	fg_buf_release(&tp);
	return fg_golden_default_prompts(out, fg_engine_vocab_size(e), fg_engine_bos_id(e), n, err);
}

/* Loads the model, records the golden transcript and eval ids into b. */
static int add_golden(struct fg_bundle_builder *b, const char *model_dir, const cJSON *settings,
		      int n_prompts, int max_new, const char *eval_path, int device,
		      const char *golden_file, struct fg_err *err)
{
	struct fg_engine_opts o;
	struct fg_engine *e = NULL;
	struct fg_buf text = FG_BUF_INIT;
	cJSON *prompts = NULL, *tr = NULL, *ev = NULL, *g;
	long long v;
	int rc;

	memset(&o, 0, sizeof(o));
	o.threads = 1;
	o.device = device;
	if (settings && !fg_json_int(settings, "sliding_window", &v))
		o.sliding_window = (int)v;
	if (settings && !fg_json_int(settings, "max_model_len", &v))
		o.max_seq = (int)v;
	rc = fg_engine_load(&e, model_dir, &o, err);
	if (rc)
		return fg_err_wrap(err, "golden transcript (use --no-golden to pack without one)");
	if (fg_engine_gen_unapplied(e)[0])
		fg_cmd_line("fgpack pack: note: generation_config.json: %s not applied by the engine: %s",
			    fg_engine_gen_unapplied(e), FG_ENGINE_GREEDY_WHY);
	if (golden_file) {
		/* recorded elsewhere (verify --record on the reference GPU): checked
		 * for shape here; its logits chain belongs to that device */
		long long mn = 0;

		rc = fg_file_read(golden_file, (size_t)256 << 20, &text, err);
		if (!rc)
			rc = fg_json_parse(&tr, text.data, text.len, golden_file, err);
		fg_buf_reset(&text);
		if (!rc && (fg_json_int(tr, "max_new", &mn) || mn < 1 || !fg_json_arr(tr, "prompts") ||
			    !fg_json_str(tr, "digest") || !fg_json_obj(tr, "device")))
			rc = fg_err_set(err, FG_EFORMAT, "%s: not a golden transcript (max_new, "
							 "prompts, digest, device)", golden_file);
		if (!rc) {
			n_prompts = cJSON_GetArraySize(fg_json_arr(tr, "prompts"));
			max_new = (int)mn;
		}
	} else {
		rc = golden_prompts(&prompts, model_dir, e, n_prompts, err);
		if (!rc)
			rc = fg_golden_record(&tr, e, prompts, max_new, err);
	}
	if (!rc)
		rc = add_json(b, "golden/transcript.json", tr, err);
	if (!rc)
		rc = eval_path ? fg_file_read(eval_path, (size_t)16 << 20, &text, err)
			       : fg_buf_puts(&text, default_eval, err);
	if (!rc)
		rc = fg_bundle_add_mem(b, "eval/eval.txt", text.data, text.len, 0644, err);
	if (!rc)
		rc = eval_ids(&ev, model_dir, text.data, text.len, fg_engine_vocab_size(e), err);
	if (!rc)
		rc = add_json(b, "eval/eval.ids.json", ev, err);
	if (!rc) {
		g = cJSON_AddObjectToObject(fg_bundle_builder_meta(b), "golden");
		if (!g || !cJSON_AddStringToObject(g, "transcript", "golden/transcript.json") ||
		    !cJSON_AddStringToObject(g, "sha256",
					     fg_bundle_sha256_of(b, "golden/transcript.json")) ||
		    !cJSON_AddStringToObject(g, "digest", fg_json_str(tr, "digest")) ||
		    !cJSON_AddItemToObject(g, "device",
					   cJSON_Duplicate(fg_json_obj(tr, "device"), 1)) ||
		    !cJSON_AddNumberToObject(g, "prompts", n_prompts) ||
		    !cJSON_AddNumberToObject(g, "max_new", max_new) ||
		    !cJSON_AddStringToObject(g, "eval", "eval/eval.ids.json"))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	cJSON_Delete(prompts);
	cJSON_Delete(tr);
	cJSON_Delete(ev);
	fg_buf_release(&text);
	fg_engine_free(e);
	return rc;
}

/* The engine binary to bundle: --engine, $FGPACK_ENGINE, the self-contained
 * build (make engine) beside this fgpack or under its build/, else this
 * fgpack itself (dynamically linked: a warning says so). */
static int find_engine(struct fg_buf *out, const char *given, struct fg_err *err)
{
	static const char *const rel[] = { "fgpack-engine", "build/fgpack-engine" };
	const char *env = getenv("FGPACK_ENGINE");
	char self[4096];
	ssize_t n;
	size_t i;

	if (given || (env && *env))
		return fg_buf_puts(out, given ? given : env, err);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		char *slash;

		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash)
			*slash = '\0';
		for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			int rc;

			fg_buf_reset(out);
			rc = fg_path_join(out, self, rel[i], err);
			if (rc)
				return rc;
			if (!access(out->data, X_OK))
				return 0;
		}
		/* none beside it: this fgpack itself, by its real path ("/proc/self/exe"
		 * would name the shell that engine_identity runs it through) */
		if (slash)
			*slash = '/';
		fg_buf_reset(out);
		return fg_buf_puts(out, self, err);
	}
	fg_buf_reset(out);
	return fg_buf_puts(out, "/proc/self/exe", err);
}

/* Runs ENGINE --version: "fgpack V (build B)", plus " engine" for the
 * self-contained build. Sets build (caller frees) and is_static. */
static int engine_identity(char **build, int *is_static, const char *engine, struct fg_err *err)
{
	struct fg_buf cmd = FG_BUF_INIT, line = FG_BUF_INIT;
	char buf[256];
	const char *b, *e;
	FILE *f;
	size_t i;
	int rc, st;

	*build = NULL;
	*is_static = 0;
	/* the path is quoted for sh: refuse a quote rather than escape it */
	if (strchr(engine, '\''))
		return fg_err_set(err, FG_EINVAL, "engine path %s: a quote in it", engine);
	rc = fg_buf_printf(&cmd, err, "'%s' --version 2>&1", engine);
	if (rc)
		return rc;
	f = popen(cmd.data, "r");
	fg_buf_release(&cmd);
	if (!f)
		return fg_err_set(err, FG_EIO, "run %s --version: %s", engine, strerror(errno));
	while (!rc && fgets(buf, sizeof(buf), f))
		rc = fg_buf_puts(&line, buf, err);
	st = pclose(f);
	if (rc) {
		fg_buf_release(&line);
		return rc;
	}
	b = line.data ? strstr(line.data, "(build ") : NULL;
	e = b ? strchr(b, ')') : NULL;
	if (st != 0 || strncmp(line.data ? line.data : "", "fgpack ", 7) || !b || !e) {
		rc = fg_err_set(err, FG_EFORMAT, "%s does not run as an fgpack engine (%s --version "
						 "said '%.80s')", engine, engine, line.data ? line.data : "");
		fg_buf_release(&line);
		return rc;
	}
	b += 7;
	*build = strndup(b, (size_t)(e - b));
	for (i = 0; e[i] && e[i] != '\n'; i++)
		;
	*is_static = !strncmp(e + 1, " engine", 7);
	fg_buf_release(&line);
	return *build ? 0 : fg_err_set(err, FG_ENOMEM, "out of memory");
}

/* The provenance statement that `fgpack bake` writes beside a folder it
 * made (DIR.intoto.json, for a component given as the folder DIR), attached
 * under attestations/ when every subject it names is a file of the
 * component with that sha256 (so `audit` shows what the component was made
 * from); a statement that no longer describes the folder is left out with a
 * warning. 0, or an error that stops the pack (out of memory, a write). */
static int attach_statement(struct fg_bundle_builder *b, struct comp_arg *c, int n, int i,
			    struct fg_err *err)
{
	struct fg_buf sp = FG_BUF_INIT, text = FG_BUF_INIT, dir = FG_BUF_INIT, m = FG_BUF_INIT;
	struct stat st;
	cJSON *stmt = NULL;
	const cJSON *subj = NULL, *s;
	const char *why = NULL, *bad = "";
	size_t len, k = 0;
	int rc = 0;

	if (!c[i].path || stat(c[i].path, &st) || !S_ISDIR(st.st_mode))
		return 0;
	len = strlen(c[i].path);
	while (len > 1 && c[i].path[len - 1] == '/')
		len--;
	if (fg_buf_append(&sp, c[i].path, len, err) || fg_buf_puts(&sp, ".intoto.json", err)) {
		rc = err ? err->code : FG_ENOMEM;
		goto out;
	}
	if (stat(sp.data, &st) || !S_ISREG(st.st_mode))
		goto out; /* none beside it */
	if (fg_buf_printf(&m, err, "attestations/%s", base_name(sp.data))) {
		rc = err ? err->code : FG_ENOMEM;
		goto out;
	}
	if (fg_bundle_has(b, m.data))
		goto out; /* given with --attest already */
	if (fg_file_read(sp.data, (size_t)16 << 20, &text, NULL) ||
	    fg_json_parse(&stmt, text.data, text.len, sp.data, NULL) ||
	    !(subj = fg_json_arr(stmt, "subject")) || !cJSON_GetArraySize(subj))
		why = "not an in-toto statement with subjects";
	else if ((rc = comp_dir(&dir, c, n, i, err)))
		goto out;
	if (why)
		subj = NULL;
	cJSON_ArrayForEach(s, subj) {
		const char *name = fg_json_str(s, "name");
		const char *want = fg_json_str(fg_json_obj(s, "digest"), "sha256"), *have;
		struct fg_buf mp = FG_BUF_INIT;

		if (!name || !want || !fg_path_is_safe_rel(name) ||
		    fg_buf_printf(&mp, NULL, "%s/%s", dir.data, name)) {
			why = "a subject without a safe name and a sha256";
			fg_buf_release(&mp);
			break;
		}
		have = fg_bundle_sha256_of(b, mp.data);
		fg_buf_release(&mp);
		if (!have || strcmp(have, want)) {
			why = have ? "sha256 differs" : "not in the folder";
			bad = name;
			break;
		}
		k++;
	}
	if (why) {
		fg_cmd_line("fgpack pack: warning: %s does not describe %s now (%s%s%s): not attached",
			    sp.data, c[i].path, bad, *bad ? ": " : "", why);
		goto out;
	}
	rc = fg_bundle_add_file(b, m.data, sp.data, err);
	if (!rc)
		fprintf(stderr, "fgpack pack: attached %s, the provenance of %s (%zu files)\n", sp.data,
			dir.data, k);
out:
	cJSON_Delete(stmt);
	fg_buf_release(&sp);
	fg_buf_release(&text);
	fg_buf_release(&dir);
	fg_buf_release(&m);
	return rc;
}

static int add_component(struct fg_bundle_builder *b, cJSON *list, struct comp_arg *c, int n,
			 int i, const struct fg_manifest *m, struct fg_store *st_, struct fg_err *err)
{
	struct fg_buf dir = FG_BUF_INIT, rel = FG_BUF_INIT, blob = FG_BUF_INIT;
	struct stat st;
	size_t files = 0;
	unsigned long long bytes = 0;
	cJSON *o;
	int rc;

	rc = comp_dir(&dir, c, n, i, err);
	if (rc)
		goto out;
	if (!c[i].path) {
		size_t k;

		for (k = 0; !rc && k < c[i].lc->n_files; k++) {
			const struct fg_lock_file *lf = &c[i].lc->files[k];

			fg_buf_reset(&rel);
			fg_buf_reset(&blob);
			rc = fg_buf_printf(&rel, err, "%s/%s", dir.data, lf->path);
			if (!rc)
				rc = fg_store_blob_path(&blob, st_, lf->sha256, err);
			if (!rc && !fg_store_has(st_, lf->sha256))
				rc = fg_err_set(err, FG_ENOTFOUND, "%s: blob %s is not in the store %s "
								   "(run fgpack pull first)",
						lf->path, lf->sha256, fg_store_root(st_));
			if (!rc) /* hashed later with the rest, unless its stamp vouches */
				rc = fg_bundle_add_blob(b, rel.data, blob.data, lf->sha256, err);
			bytes += lf->size;
		}
		files = c[i].lc->n_files;
		if (!rc) {
			struct fg_err perr;

			/* pull refuses a broken pin; a lock edited since is worth a word */
			if (fg_lock_check_pins(c[i].lc, &perr))
				fprintf(stderr, "fgpack pack: warning: %s\n", perr.msg);
		}
		if (rc) {
			fg_err_wrap(err, "component %s", c[i].key);
			goto out;
		}
	} else if (stat(c[i].path, &st)) {
		rc = fg_err_set(err, FG_ENOTFOUND, "%s: %s", c[i].path, strerror(errno));
		goto out;
	}
	else if (S_ISDIR(st.st_mode))
		rc = fg_bundle_add_tree(b, dir.data, c[i].path, &files, &bytes, err);
	else {
		rc = fg_buf_printf(&rel, err, "%s/%s", dir.data, base_name(c[i].path));
		if (!rc)
			rc = fg_bundle_add_file(b, rel.data, c[i].path, err);
		files = 1;
		bytes = (unsigned long long)st.st_size;
	}
	if (rc) {
		fg_err_wrap(err, "component %s", c[i].key);
		goto out;
	}
	o = cJSON_CreateObject();
	if (!o || !cJSON_AddStringToObject(o, "key", c[i].key) ||
	    !cJSON_AddStringToObject(o, "role", c[i].role) ||
	    !cJSON_AddStringToObject(o, "path", dir.data) ||
	    !cJSON_AddNumberToObject(o, "files", (double)files) ||
	    !cJSON_AddNumberToObject(o, "bytes", (double)bytes)) {
		cJSON_Delete(o);
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	if (m) {
		const struct fg_component *mc = fg_manifest_component(m, c[i].key);

		if (mc && mc->source)
			cJSON_AddStringToObject(o, "source", mc->source);
		if (mc && mc->target_key)
			cJSON_AddStringToObject(o, "target_key", mc->target_key);
		if (mc && mc->target)
			cJSON_AddStringToObject(o, "target", mc->target);
		if (mc && mc->pin_sha256)
			cJSON_AddStringToObject(o, "pin_sha256", mc->pin_sha256);
	}
	if (c[i].lc)
		cJSON_AddStringToObject(o, "tree_digest", c[i].lc->tree_digest);
	cJSON_AddItemToArray(list, o);
out:
	fg_buf_release(&dir);
	fg_buf_release(&rel);
	fg_buf_release(&blob);
	return rc;
}

int cmd_pack(int argc, char **argv)
{
	struct comp_arg comps[MAX_COMPONENTS];
	struct fg_bundle_builder *b = NULL;
	struct fg_manifest *m = NULL;
	struct fg_lock *lock = NULL;
	struct fg_lock_manifest *lm = NULL;
	struct fg_store *store = NULL;
	struct fg_buf raw = FG_BUF_INIT, raw_lock = FG_BUF_INIT;
	const char *lock_path = NULL, *engine_arg = NULL, *golden_file = NULL, *store_dir = NULL;
	struct fg_buf engine_path = FG_BUF_INIT;
	char *engine_build = NULL;
	int engine_static = 0;
	int threads = fg_workq_cpus(8);
	struct fg_err err;
	const char *out = NULL, *manifest = NULL, *eval = NULL, *model_dir = NULL, *sde;
	cJSON *meta, *list, *settings = NULL, *engine, *archs;
	char id[FG_SHA256_HEX_LEN + 1];
	const char *attest[16];
	int device = FG_DEVICE_CPU;
	int n_attest = 0;
	int n = 0, i, rc = 0, level = 3, no_golden = 0, n_prompts = 4, max_new = 32, rehash = 0;
	size_t by_stamp, by_seen;
	unsigned long long by_stamp_bytes = 0, by_seen_bytes = 0;
	long long mtime = 0;

	memset(&err, 0, sizeof(err));
	memset(comps, 0, sizeof(comps)); /* .lc is read for every component */
	if (fg_cmd_wants_help(argc, argv)) {
		usage(stdout);
		return FG_EXIT_OK;
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		int takes = !strcmp(a, "-o") || !strcmp(a, "--model") || !strcmp(a, "--drafter") ||
			    !strcmp(a, "--keepset") || !strcmp(a, "--component") ||
			    !strcmp(a, "--eval") || !strcmp(a, "--level") || !strcmp(a, "--lock") ||
			    !strcmp(a, "--prompts") || !strcmp(a, "--golden-tokens") ||
			    !strcmp(a, "--attest") || !strcmp(a, "--device") || !strcmp(a, "--engine") ||
			    !strcmp(a, "--golden") || !strcmp(a, "--threads") || !strcmp(a, "--store");

		if (takes && !val)
			return fg_cmd_usage_error("pack", "%s needs a value", a);
		if ((!strcmp(a, "--model") || !strcmp(a, "--drafter") || !strcmp(a, "--keepset") ||
		     !strcmp(a, "--component")) && n == MAX_COMPONENTS)
			return fg_cmd_usage_error("pack", "more than %d components", MAX_COMPONENTS);
		if (!strcmp(a, "-o"))
			out = val;
		else if (!strcmp(a, "--model") || !strcmp(a, "--drafter") || !strcmp(a, "--keepset")) {
			const char *role = a + 2;

			if (role_taken(comps, n, role))
				return fg_cmd_usage_error("pack", "%s given twice", a);
			comps[n].key = role;
			comps[n].role = role;
			comps[n].path = val;
			comps[n].is_file = !strcmp(role, "keepset");
			if (!strcmp(role, "model"))
				model_dir = val;
			n++;
		} else if (!strcmp(a, "--component")) {
			const char *eq = strchr(val, '=');

			if (!eq || eq == val || !eq[1])
				return fg_cmd_usage_error("pack", "--component wants KEY=PATH, got '%s'", val);
			*(char *)eq = '\0';
			comps[n].key = val;
			comps[n].role = NULL;
			comps[n].path = eq + 1;
			comps[n].is_file = 0;
			n++;
		} else if (!strcmp(a, "--eval"))
			eval = val;
		else if (!strcmp(a, "--lock"))
			lock_path = val;
		else if (!strcmp(a, "--engine"))
			engine_arg = val;
		else if (!strcmp(a, "--golden"))
			golden_file = val;
		else if (!strcmp(a, "--device") && strcmp(val, "cpu") && strcmp(val, "cuda"))
			return fg_cmd_usage_error("pack", "--device wants cpu or cuda");
		else if (!strcmp(a, "--device"))
			device = strcmp(val, "cuda") ? FG_DEVICE_CPU : FG_DEVICE_CUDA;
		else if (!strcmp(a, "--attest")) {
			if (n_attest == 16)
				return fg_cmd_usage_error("pack", "at most 16 --attest files");
			attest[n_attest++] = val;
		} else if (!strcmp(a, "--threads")) {
			if (fg_parse_int(val, 1, 64, &threads))
				return fg_cmd_usage_error("pack", "--threads wants 1..64");
		} else if (!strcmp(a, "--level")) {
			if (fg_parse_int(val, 1, 19, &level))
				return fg_cmd_usage_error("pack", "--level wants 1..19");
		} else if (!strcmp(a, "--prompts")) {
			if (fg_parse_int(val, 1, 64, &n_prompts))
				return fg_cmd_usage_error("pack", "--prompts wants 1..64");
		} else if (!strcmp(a, "--golden-tokens")) {
			if (fg_parse_int(val, 1, 4096, &max_new))
				return fg_cmd_usage_error("pack", "--golden-tokens wants 1..4096");
		} else if (!strcmp(a, "--store")) {
			store_dir = val;
		} else if (!strcmp(a, "--rehash"))
			rehash = 1;
		else if (!strcmp(a, "--no-golden"))
			no_golden = 1;
		else if (a[0] == '-')
			return fg_cmd_usage_error("pack", "unknown option %s", a);
		else if (!manifest)
			manifest = a;
		else
			return fg_cmd_usage_error("pack", "one manifest at most ('%s')", a);
		if (takes)
			i++;
	}
	if (!out)
		return fg_cmd_usage_error("pack", "-o OUT.fgb is required");
	for (i = 0; i < n; i++)
		if (comps[i].path && !comps[i].is_file && out_inside(out, comps[i].path))
			return fg_cmd_usage_error("pack", "-o %s lies inside %s, which is packed: write the bundle "
							  "elsewhere (a later pack would take this one in)",
						  out, comps[i].path);
	/* a folder, block device or socket at -o: refused now, not after the
	 * hashing (a device or FIFO there is written through: lib/fsutil.h) */
	if (fg_out_check(out, &err))
		return fg_cmd_fail("pack", &err);
	if (!manifest && !model_dir)
		return fg_cmd_usage_error("pack", "give a MANIFEST or --model DIR");
	sde = getenv("SOURCE_DATE_EPOCH");
	if (sde && *sde && (fg_parse_i64(sde, &mtime) || mtime < 0))
		return fg_cmd_usage_error("pack", "SOURCE_DATE_EPOCH '%s' is not a time", sde);

	rc = fg_bundle_builder_new(&b, &err);
	if (!rc)
		rc = fg_bundle_builder_set_threads(b, threads, &err);
	if (rc)
		goto fail;
	meta = fg_bundle_builder_meta(b);
	if (manifest) {
		size_t np;

		rc = fg_manifest_load(&m, manifest, &err);
		if (!rc)
			rc = fg_file_read(manifest, FG_MANIFEST_MAX_BYTES, &raw, &err);
		if (!rc)
			rc = fg_bundle_add_mem(b, "manifest.json", raw.data, raw.len, 0644, &err);
		if (!rc)
			rc = add_patches(b, manifest, &np, &err);
		if (!rc)
			rc = fg_bundle_settings(&settings, m, &err);
		if (rc)
			goto fail;
		for (i = 0; i < n; i++) {
			const struct fg_component *mc;

			if (comps[i].role && !strcmp(comps[i].role, "model"))
				comps[i].key = "model_id";
			if (comps[i].role)
				continue;
			mc = fg_manifest_component(m, comps[i].key);
			if (!mc) {
				rc = fg_err_set(&err, FG_EINVAL, "--component %s: the manifest has no such "
								"component", comps[i].key);
				goto fail;
			}
			comps[i].role = mc->role;
		}
		for (i = 0; i < (int)m->n_components; i++) {
			int j, have = 0;

			for (j = 0; j < n; j++)
				if (!strcmp(comps[j].key, m->components[i].key) ||
				    (!strcmp(m->components[i].key, "model_id") && model_dir))
					have = 1;
			if (have)
				continue;
			if (!lm) {
				rc = open_lock(&lock, &lm, &store, lock_path, manifest, m, store_dir, &raw_lock, &err);
				if (rc)
					goto fail;
			}
			if (n == MAX_COMPONENTS) {
				rc = fg_err_set(&err, FG_EINVAL, "more than %d components", MAX_COMPONENTS);
				goto fail;
			}
			comps[n].lc = lm ? fg_lock_find_component(lm, m->components[i].key) : NULL;
			if (!comps[n].lc) {
				rc = fg_err_set(&err, FG_ENOTFOUND,
						"component %s (%s): not in the lock and not given; run "
						"fgpack pull or pass --component %s=PATH",
						m->components[i].key, m->components[i].source,
						m->components[i].key);
				goto fail;
			}
			comps[n].key = m->components[i].key;
			comps[n].role = m->components[i].role;
			comps[n].path = NULL;
			comps[n].is_file = 0;
			n++;
		}
		if (raw_lock.len &&
		    (rc = fg_bundle_add_mem(b, "buckets.lock", raw_lock.data, raw_lock.len, 0644, &err)))
			goto fail;
		if (raw_lock.len)
			cJSON_AddStringToObject(meta, "lock", "buckets.lock");
		if (!cJSON_AddStringToObject(meta, "manifest", "manifest.json") ||
		    !cJSON_AddStringToObject(meta, "name", m->name ? m->name : base_name(manifest)) ||
		    !cJSON_AddNumberToObject(meta, "patches", (double)np)) {
			rc = fg_err_set(&err, FG_ENOMEM, "out of memory");
			goto fail;
		}
	} else {
		for (i = 0; i < n; i++)
			if (!comps[i].role) {
				rc = fg_err_set(&err, FG_EINVAL, "--component needs a MANIFEST");
				goto fail;
			}
		cJSON_AddStringToObject(meta, "name", base_name(model_dir));
		settings = cJSON_CreateObject();
	}
	/* files that are store blobs or hard links to them, unchanged since the
	 * store checked them, are named by the blob (lib/bundle.h) */
	if (!rehash && !store && (rc = fg_store_open_existing(&store, store_dir, &err))) {
		fg_err_wrap(&err, "--store");
		goto fail;
	}
	if (!rehash)
		fg_bundle_builder_set_store(b, store);
	list = cJSON_AddArrayToObject(meta, "components");
	for (i = 0; !rc && i < n; i++)
		rc = add_component(b, list, comps, n, i, m, store, &err);
	if (rc)
		goto fail;
	/* the model the engine serves: --model, else the weights component */
	for (i = 0; !model_dir && i < n; i++)
		if (!strcmp(comps[i].role, "weights"))
			model_dir = comps[i].path;
	for (i = 0; i < n; i++)
		if (model_dir && comps[i].path == model_dir) {
			struct fg_buf d = FG_BUF_INIT;

			comp_dir(&d, comps, n, i, &err);
			cJSON_AddStringToObject(meta, "model", d.data);
			fg_buf_release(&d);
		}
	/* a Gemma 4 assistant among the components: the engine drafts with it */
	for (i = 0; !rc && i < n; i++) {
		struct fg_buf d = FG_BUF_INIT, cfg = FG_BUF_INIT;

		if (comps[i].role && !strcmp(comps[i].role, "drafter") && !comp_config(&cfg, &comps[i], store) &&
		    is_assistant(&cfg) && !(rc = comp_dir(&d, comps, n, i, &err)) &&
		    !cJSON_GetObjectItem(meta, "drafter")) {
			cJSON_AddStringToObject(meta, "drafter", d.data);
			rc = honour_drafter(settings, &cfg, &err);
		}
		fg_buf_release(&d);
		fg_buf_release(&cfg);
	}
	if (rc)
		goto fail;
	cJSON_AddItemToObject(meta, "settings", settings);
	settings = NULL;

	rc = find_engine(&engine_path, engine_arg, &err);
	if (!rc)
		rc = engine_identity(&engine_build, &engine_static, engine_path.data, &err);
	if (rc)
		goto fail;
	if (!engine_static)
		fprintf(stderr, "fgpack pack: warning: the engine %s is not the self-contained build; "
				"the bundle needs this machine's shared libraries (run 'make engine' or "
				"pass --engine)\n",
			engine_path.data);
	else if (strcmp(engine_build, fg_build_id))
		fg_cmd_line("fgpack pack: warning: engine %s is build %s, this fgpack is build "
			    "%s (rebuild with 'make engine')",
			    engine_path.data, engine_build, fg_build_id);
	rc = fg_bundle_add_file(b, "engine/fgpack", engine_path.data, &err);
	for (i = 0; !rc && i < n_attest; i++) {
		struct fg_buf ap = FG_BUF_INIT;

		rc = fg_buf_printf(&ap, &err, "attestations/%s", base_name(attest[i]));
		if (!rc)
			rc = fg_bundle_add_file(b, ap.data, attest[i], &err);
		fg_buf_release(&ap);
	}
	/* a bake's statement beside a component folder goes along */
	for (i = 0; !rc && i < n; i++)
		rc = attach_statement(b, comps, n, i, &err);
	if (rc)
		goto fail;
	engine = cJSON_AddObjectToObject(meta, "engine");
	cJSON_AddStringToObject(engine, "path", "engine/fgpack");
	cJSON_AddStringToObject(engine, "version", FG_VERSION);
	cJSON_AddStringToObject(engine, "build", engine_build);
	cJSON_AddBoolToObject(engine, "static", engine_static);
	archs = cJSON_AddArrayToObject(engine, "gpu_archs");
#if !defined(FG_CUDA_ARCHS) && defined(FG_HAVE_CUDA)
/* kernels/kernels.mk builds sm_86 and sm_90 (plus sm_90 PTX) by default */
#define FG_CUDA_ARCHS "sm_86", "sm_90"
#endif
#ifdef FG_CUDA_ARCHS
	{
		static const char *const a[] = { FG_CUDA_ARCHS };

		for (i = 0; i < (int)(sizeof(a) / sizeof(a[0])); i++)
			cJSON_AddItemToArray(archs, cJSON_CreateString(a[i]));
	}
#else
	(void)archs;
#endif
	cJSON_AddStringToObject(engine, "requires",
				engine_static
					? "x86-64 Linux with glibc 2.17 or newer (libc, libm, libpthread, "
					  "libdl, librt, ld-linux); for --device cuda an NVIDIA driver "
					  "(libcuda.so.1) for CUDA 13 (docs/formats/bundle.md)"
					: "glibc, libcurl, libcrypto (OpenSSL 3), libarchive, libcjson, "
					  "libzstd, libmicrohttpd (docs/formats/bundle.md)");
	if (!no_golden && model_dir) {
		rc = add_golden(b, model_dir, fg_json_obj(meta, "settings"), n_prompts, max_new, eval,
				device, golden_file, &err);
		if (rc)
			goto fail;
	} else
		cJSON_AddNullToObject(meta, "golden");
	cJSON_AddNumberToObject(meta, "source_date_epoch", (double)mtime);
	rc = fg_bundle_builder_write(b, out, level, mtime, id, &err);
	if (rc)
		goto fail;
	printf("%s\n", id);
	by_stamp = fg_bundle_builder_by_stamp(b, &by_stamp_bytes);
	if (by_stamp)
		fprintf(stderr, "fgpack pack: %zu file%s (%.3f GB) named by their store blob, not hashed "
				"again (--rehash hashes them)\n",
			by_stamp, by_stamp == 1 ? "" : "s", (double)by_stamp_bytes / 1e9);
	by_seen = fg_bundle_builder_by_seen(b, &by_seen_bytes);
	if (by_seen)
		fprintf(stderr, "fgpack pack: %zu file%s (%.3f GB) hashed before (an earlier pack or bake), "
				"unchanged since, not hashed again (--rehash hashes them)\n",
			by_seen, by_seen == 1 ? "" : "s", (double)by_seen_bytes / 1e9);
	free(engine_build);
	fg_buf_release(&engine_path);
	fg_bundle_builder_free(b);
	fg_manifest_free(m);
	fg_lock_free(lock);
	fg_store_free(store);
	fg_buf_release(&raw);
	fg_buf_release(&raw_lock);
	return FG_EXIT_OK;
fail:
	free(engine_build);
	fg_buf_release(&engine_path);
	cJSON_Delete(settings);
	fg_bundle_builder_free(b);
	fg_manifest_free(m);
	fg_lock_free(lock);
	fg_store_free(store);
	fg_buf_release(&raw);
	fg_buf_release(&raw_lock);
	return fg_cmd_fail("pack", &err);
}
