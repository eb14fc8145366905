/* main.c - the fgpack command line: global options and verb dispatch. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "fsutil.h"
#include "store.h"
#include "version.h"

struct verb {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
};

#define FG_VERB_ENTRY(name, help) { #name, cmd_##name, help },
static const struct verb verbs[] = { FG_VERBS(FG_VERB_ENTRY) };
#undef FG_VERB_ENTRY

/* A verb's name as typed: its C name with '-' for '_' (verify_sig -> verify-sig). */
static const char *verb_name(char *out, size_t size, const char *cname)
{
	size_t j;

	snprintf(out, size, "%s", cname);
	for (j = 0; out[j]; j++)
		if (out[j] == '_')
			out[j] = '-';
	return out;
}

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: fgpack [--version] [--help] <verb> [<args>]\n\n"
		   "Pin, fetch, bake, pack, verify and serve Gemma 4 challenge components.\n\n"
		   "verbs:\n");
	for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		char name[32];

		fprintf(f, "  %-12s %s\n", verb_name(name, sizeof(name), verbs[i].name), verbs[i].help);
	}
	fprintf(f, "\n'fgpack <verb> --help' describes a verb. Exit codes: 0 ok, 1 failure,\n"
		   "2 usage error, 3 verification mismatch.\n");
}

int fg_cmd_fail(const char *verb, const struct fg_err *err)
{
	const char *msg = err && err->msg[0] ? err->msg : fg_err_name(err ? err->code : -1);

	if (verb)
		fprintf(stderr, "fgpack %s: %s\n", verb, msg);
	else
		fprintf(stderr, "fgpack: %s\n", msg);
	return err && err->code == FG_EMISMATCH ? FG_EXIT_MISMATCH : FG_EXIT_FAIL;
}

int fg_cmd_usage_error(const char *verb, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fgpack %s: ", verb);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see 'fgpack %s --help')\n", verb);
	return FG_EXIT_USAGE;
}

void fg_cmd_line(const char *fmt, ...)
{
	struct fg_buf b = FG_BUF_INIT;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = fg_buf_vprintf(&b, NULL, fmt, ap);
	va_end(ap);
	if (rc) {
		fg_buf_release(&b);
		fputs("fgpack: out of memory\n", stderr);
		return;
	}
	if (b.data)
		fg_err_one_line(b.data);
	fprintf(stderr, "%s\n", b.data ? b.data : "");
	fg_buf_release(&b);
}

int fg_cmd_wants_help(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return 0;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return 1;
	}
	return 0;
}

/* The verb running, as typed, for the store's wait notice. */
static char running_verb[32] = "";

/* A pull, lock, pack or bake that finds a gc holding the store lock says
 * so once, then waits as before: a silent wait looks like a hang. */
static void on_store_wait(const char *root)
{
	static int said;

	if (said)
		return;
	said = 1;
	fprintf(stderr, "fgpack %s: waiting for the store lock of %s (a store gc is running) ...\n",
		running_verb[0] ? running_verb : "store", root);
}

/* SIGINT, SIGTERM, SIGHUP: the temporary files and folders being written
 * (fg_tmp_track: a pull's materialized copy, an atomic write, an import;
 * fg_tmp_track_dir: a bake's output folder, an extraction's) are removed,
 * then the signal takes its default course, so the exit status still says
 * which one. */
static void on_fatal_signal(int sig)
{
	fg_tmp_remove_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Leaves a signal ignored as it was given (a background job's SIGINT) and a
 * verb's own handling (serve waits for its signals, exec forwards them) is
 * set later, over this one. */
static void catch_fatal_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	size_t i;

	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction sa, old;

		if (sigaction(sigs[i], NULL, &old) || old.sa_handler == SIG_IGN)
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_fatal_signal;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESTART;
		sigaction(sigs[i], &sa, NULL);
	}
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		usage(stderr);
		return FG_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return FG_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
#ifdef FG_ENGINE_BUILD
		/* "engine": the self-contained build (static/engine.mk); pack reads it */
		printf("fgpack %s (build %s) engine\n", FG_VERSION, fg_build_id);
#else
		printf("fgpack %s (build %s)\n", FG_VERSION, fg_build_id);
#endif
		return FG_EXIT_OK;
	}
	catch_fatal_signals();
	for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		char name[32];

		if (!strcmp(argv[1], verb_name(name, sizeof(name), verbs[i].name))) {
			memcpy(running_verb, name, sizeof(running_verb));
			fg_store_set_wait_notice(on_store_wait);
			return verbs[i].fn(argc - 1, argv + 1);
		}
	}
	fprintf(stderr, "fgpack: '%s' is not a verb (see 'fgpack --help')\n", argv[1]);
	return FG_EXIT_USAGE;
}
