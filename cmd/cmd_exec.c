/* cmd_exec.c - `fgpack exec BUNDLE -- CMD...`: verify and extract a bundle,
 * then run CMD (or the manifest's serve command) with the manifest's env and
 * every component path pointing at the verified, materialized copy. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "bundle.h"
#include "cmd.h"
#include "fsutil.h"
#include "json.h"
#include "manifest.h"
#include "utf8.h"
#include "workq.h"

extern char **environ;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fgpack exec BUNDLE.fgb [--dir DIR] [--print-env] [--threads N] [-- CMD [ARG...]]\n\n"
		"Extracts the bundle (checking every member against bundle.json; a mismatch\n"
		"exits 3 and runs nothing), then runs CMD, or the manifest's serve command in\n"
		"the bundle's patches/ folder, with:\n"
		"  - the manifest's env applied;\n"
		"  - each component's targets (LOCAL_*_DIR, *_DST, MODEL_PATH, SPECULATIVE_CONFIG.model...)\n"
		"    and its *_BUCKET variable set to the component's folder in the bundle;\n"
		"  - every env value that names a target path, or a path inside one (also\n"
		"    inside JSON values), rewritten to the same place in the bundle;\n"
		"  - FGPACK_BUNDLE (the folder), FGPACK_BUNDLE_ID, FGPACK_COMPONENT_<KEY>,\n"
		"    HF_HUB_OFFLINE=1.\n"
		"  --dir DIR     extract into DIR (must not exist) and keep it; default: a\n"
		"                temporary folder removed when CMD exits\n"
		"  --print-env   print the variables that were set or rewritten, then run\n"
		"  --threads N   threads that extract and check a bundle pack wrote (it is\n"
		"                read in up to 2N lanes, which compute the bundle id too;\n"
		"                for a bundle packed before 2026-12-04, it is read beside);\n"
		"                default: the CPUs online, at most 16\n"
		"Exits with CMD's status (128+N when a signal N ended it).\n");
}

struct map {
	char *from; /* a target path as the manifest wrote it */
	char *to;   /* the folder (or file) in the bundle */
};

struct maps {
	struct map *m;
	size_t n;
};

static int map_add(struct maps *ms, const char *from, const char *to)
{
	struct map *nm = realloc(ms->m, (ms->n + 1) * sizeof(*nm));

	if (!nm)
		return -1;
	ms->m = nm;
	nm[ms->n].from = strdup(from);
	nm[ms->n].to = strdup(to);
	if (!nm[ms->n].from || !nm[ms->n].to)
		return -1;
	/* no trailing slash on either, so prefix tests are exact */
	while (strlen(nm[ms->n].from) > 1 && nm[ms->n].from[strlen(nm[ms->n].from) - 1] == '/')
		nm[ms->n].from[strlen(nm[ms->n].from) - 1] = '\0';
	ms->n++;
	return 0;
}

/* Rewrites s when it is a mapped path or lies inside one (longest wins);
 * returns a new string or NULL when nothing applies. */
static char *rewrite_path(const struct maps *ms, const char *s)
{
	size_t i, best_len = 0;
	const struct map *best = NULL;
	struct fg_buf out = FG_BUF_INIT;

	for (i = 0; i < ms->n; i++) {
		size_t l = strlen(ms->m[i].from);

		if (l > best_len && !strncmp(s, ms->m[i].from, l) && (s[l] == '\0' || s[l] == '/')) {
			best = &ms->m[i];
			best_len = l;
		}
	}
	if (!best)
		return NULL;
	if (fg_buf_puts(&out, best->to, NULL) || fg_buf_puts(&out, s + best_len, NULL)) {
		fg_buf_release(&out);
		return NULL;
	}
	return fg_buf_detach(&out, NULL);
}

/* Rewrites string values inside a JSON value; 1 when something changed. */
static int rewrite_json(const struct maps *ms, cJSON *j)
{
	cJSON *c;
	int changed = 0;

	if (cJSON_IsString(j)) {
		char *r = rewrite_path(ms, j->valuestring);

		if (r) {
			cJSON_SetValuestring(j, r);
			free(r);
			return 1;
		}
		return 0;
	}
	cJSON_ArrayForEach(c, j) changed |= rewrite_json(ms, c);
	return changed;
}

/* --print-env's line KEY=VALUE on stderr: a value of printable UTF-8 as it
 * is; one with a control character or invalid UTF-8 (which could drive the
 * terminal) in bash's $'...' quoting, each such byte as \xNN and ' and \
 * escaped, so that the line still sets the same bytes in a shell. The key
 * (a manifest's) gets fg_err_one_line's '?' for such bytes. */
static void print_env(const char *k, const char *v)
{
	const unsigned char *r = (const unsigned char *)v;
	size_t left = strlen(v), n, i;
	char *key = strdup(k);
	int plain = 1, shown;

	if (key)
		fg_err_one_line(key);
	for (i = 0; i < left && plain; i += n) {
		n = fg_utf8_shown(r + i, left - i, &shown);
		plain = shown;
	}
	if (plain) {
		fprintf(stderr, "%s=%s\n", key ? key : "?", v);
		free(key);
		return;
	}
	fprintf(stderr, "%s=$'", key ? key : "?");
	while (left) {
		n = fg_utf8_shown(r, left, &shown);
		if (!shown)
			for (i = 0; i < n; i++)
				fprintf(stderr, "\\x%02x", r[i]);
		else if (*r == '\'' || *r == '\\')
			fprintf(stderr, "\\%c", *r);
		else
			fwrite(r, 1, n, stderr);
		r += n;
		left -= n;
	}
	fputs("'\n", stderr);
	free(key);
}

static int set_env(const char *k, const char *v, int print)
{
	if (print)
		print_env(k, v);
	return setenv(k, v, 1);
}

static void env_key(char *out, size_t cap, const char *prefix, const char *key)
{
	size_t i, n = strlen(prefix);

	snprintf(out, cap, "%s", prefix);
	for (i = 0; key[i] && n + 1 < cap; i++) {
		char c = key[i];

		if (c >= 'a' && c <= 'z')
			c = (char)(c - 32);
		else if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
			c = '_';
		out[n++] = c;
	}
	out[n] = '\0';
}

static pid_t child;

static void forward(int sig)
{
	if (child > 0)
		kill(child, sig);
}

int cmd_exec(int argc, char **argv)
{
	struct fg_bundle *b = NULL;
	struct fg_manifest *m = NULL;
	struct fg_buf p = FG_BUF_INIT, text = FG_BUF_INIT;
	struct fg_err err;
	struct maps ms = { NULL, 0 };
	const char *bundle = NULL, *dir = NULL;
	const cJSON *comps, *c;
	char **cmd = NULL, *patches = NULL;
	int i, rc, print = 0, status = 0, dash = -1, threads = 0;
	sigset_t held;
	pid_t pid;
	size_t k;

	memset(&err, 0, sizeof(err));
	if (fg_cmd_wants_help(argc, argv)) {
		usage(stdout);
		return FG_EXIT_OK;
	}
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			dash = i;
			break;
		}
		if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--print-env"))
			print = 1;
		else if (!strcmp(argv[i], "--threads")) {
			if (i + 1 >= argc || fg_parse_int(argv[++i], 1, 256, &threads))
				return fg_cmd_usage_error("exec", "--threads wants a number from 1 to 256");
		}
		else if (argv[i][0] == '-')
			return fg_cmd_usage_error("exec", "unknown option %s", argv[i]);
		else if (!bundle)
			bundle = argv[i];
		else
			return fg_cmd_usage_error("exec", "put the command after --");
	}
	if (!bundle)
		return fg_cmd_usage_error("exec", "which bundle?");
	if (dash >= 0 && dash + 1 >= argc)
		return fg_cmd_usage_error("exec", "nothing after --");

	/* extracted in lanes, which compute the id (or read beside them) */
	rc = fg_bundle_open_id(&b, bundle, dir, NULL, threads ? threads : fg_workq_cpus(16), &err);
	if (rc) {
		/* each file that differs named once, as verify names them; err
		 * holds the first of them again */
		if (b && b->n_problems) {
			for (k = 0; k < b->n_problems; k++)
				fg_cmd_line("fgpack exec: %s: %s", b->problems[k].path, b->problems[k].what);
			rc = FG_EXIT_MISMATCH;
			goto out;
		}
		goto fail;
	}
	if (!b->remove_dir && !dir)
		b->remove_dir = 1;
	{
		/* absolute paths, so the command may change folder */
		char *real = realpath(b->dir, NULL);

		if (!real) {
			rc = fg_err_set(&err, FG_EIO, "realpath %s: %s", b->dir, strerror(errno));
			goto fail;
		}
		free(b->dir);
		b->dir = real;
	}
	if (fg_json_str(b->meta, "manifest")) {
		rc = fg_bundle_path(&p, b, fg_json_str(b->meta, "manifest"), &err);
		if (!rc)
			rc = fg_manifest_load(&m, p.data, &err);
		if (rc)
			goto fail;
	}
	/* components: targets, *_BUCKET keys and FGPACK_COMPONENT_<KEY> */
	comps = fg_json_arr(b->meta, "components");
	cJSON_ArrayForEach(c, comps) {
		const char *key = fg_json_str(c, "key"), *path = fg_json_str(c, "path");
		char name[256];

		if (!key || !path)
			continue;
		fg_buf_reset(&p);
		rc = fg_bundle_path(&p, b, path, &err);
		if (rc)
			goto fail;
		if (fg_json_str(c, "target") && map_add(&ms, fg_json_str(c, "target"), p.data)) {
			rc = fg_err_set(&err, FG_ENOMEM, "out of memory");
			goto fail;
		}
		/* the component's other folder targets (MODEL_PATH beside
		 * LOCAL_MODEL_DIR): the same folder */
		for (k = 0; m && k < m->n_targets; k++) {
			const struct fg_target *t = &m->targets[k];

			if (t->component >= 0 && (t->rule == FG_TARGET_FIXED || t->rule == FG_TARGET_STEM) &&
			    !strcmp(m->components[t->component].key, key) &&
			    (!fg_json_str(c, "target") || strcmp(t->folder, fg_json_str(c, "target"))) &&
			    map_add(&ms, t->folder, p.data)) {
				rc = fg_err_set(&err, FG_ENOMEM, "out of memory");
				goto fail;
			}
		}
		env_key(name, sizeof(name), "FGPACK_COMPONENT_", key);
		set_env(name, p.data, print);
	}
	/* the manifest's env, with paths rewritten */
	for (k = 0; m && k < m->n_env; k++) {
		const char *key = m->env[k].key, *val = m->env[k].value;
		const struct fg_component *mc = fg_manifest_component(m, key);
		char *nv = NULL;

		if (mc) {
			/* a *_BUCKET (or other source) variable: the component's folder */
			cJSON_ArrayForEach(c, comps)
				if (fg_json_str(c, "key") && !strcmp(fg_json_str(c, "key"), key)) {
					fg_buf_reset(&p);
					if (!fg_bundle_path(&p, b, fg_json_str(c, "path"), &err))
						nv = strdup(p.data);
				}
		}
		if (!nv && val[0] == '{') {
			cJSON *j = NULL;

			if (!fg_json_parse(&j, val, strlen(val), key, NULL) && rewrite_json(&ms, j)) {
				fg_buf_reset(&text);
				if (!fg_json_write(&text, j, 0, NULL))
					nv = strdup(text.data);
			}
			cJSON_Delete(j);
		}
		if (!nv)
			nv = rewrite_path(&ms, val);
		set_env(key, nv ? nv : val, print && nv);
		free(nv);
	}
	set_env("HF_HUB_OFFLINE", "1", print);
	set_env("FGPACK_BUNDLE", b->dir, print);
	set_env("FGPACK_BUNDLE_ID", b->id, print);

	if (dash >= 0)
		cmd = argv + dash + 1;
	else if (m && m->n_serve) {
		cmd = calloc(m->n_serve + 1, sizeof(*cmd));
		if (!cmd) {
			rc = fg_err_set(&err, FG_ENOMEM, "out of memory");
			goto fail;
		}
		for (k = 0; k < m->n_serve; k++)
			cmd[k] = m->serve[k];
		fg_buf_reset(&p);
		if (!fg_bundle_path(&p, b, "patches", &err) && !access(p.data, F_OK))
			patches = strdup(p.data);
	} else {
		rc = fg_err_set(&err, FG_EINVAL, "the bundle has no manifest serve command; give one "
						 "after --");
		goto fail;
	}
	fflush(NULL);
	/* held from here until each side has its handling: a signal that
	 * came before child was set, or to the child before it dropped
	 * forward (its own child is 0), was lost, and exec waited on */
	fg_tmp_hold_signals(&held);
	signal(SIGTERM, forward);
	signal(SIGINT, forward);
	signal(SIGHUP, forward);
	pid = fork();
	if (pid < 0) {
		rc = fg_err_set(&err, FG_EIO, "fork: %s", strerror(errno));
		fg_tmp_release_signals(&held);
		goto fail;
	}
	if (pid == 0) {
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		fg_tmp_release_signals(&held);
		if (patches && chdir(patches)) {
			fg_cmd_line("fgpack exec: chdir %s: %s", patches, strerror(errno));
			_exit(127);
		}
		execvp(cmd[0], cmd);
		fg_cmd_line("fgpack exec: %s: %s", cmd[0], strerror(errno)); /* the manifest's serve */
		_exit(127);
	}
	child = pid;
	fg_tmp_release_signals(&held); /* one held meanwhile is forwarded now */
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	goto out;
fail:
	rc = fg_cmd_fail("exec", &err);
out:
	if (dash < 0)
		free(cmd);
	free(patches);
	for (k = 0; k < ms.n; k++) {
		free(ms.m[k].from);
		free(ms.m[k].to);
	}
	free(ms.m);
	fg_manifest_free(m);
	fg_bundle_free(b);
	fg_buf_release(&p);
	fg_buf_release(&text);
	return rc;
}
