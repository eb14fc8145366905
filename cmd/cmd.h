/* cmd.h - the subcommands and the few helpers they share.
 *
 * Each verb lives in cmd/cmd_<verb>.c as `int cmd_<verb>(int argc, char **argv)`
 * where argv[0] is the verb itself. A verb returns an exit code: FG_EXIT_OK,
 * FG_EXIT_FAIL, FG_EXIT_USAGE, or FG_EXIT_MISMATCH (verify found a difference).
 * Verbs not built yet fall back to weak definitions in cmd/stubs.c that say so. */
#ifndef FG_CMD_H
#define FG_CMD_H

#include "err.h"

enum {
	FG_EXIT_OK = 0,
	FG_EXIT_FAIL = 1,
	FG_EXIT_USAGE = 2,
	FG_EXIT_MISMATCH = 3,
};

#define FG_VERBS(X)                                                                     \
	X(pull, "lock a manifest, fetch every component into the store, materialize it") \
	X(lock, "resolve a manifest's components and write buckets.lock")                \
	X(store, "inspect the content store: verify, gc, path")                          \
	X(bake, "offline transforms: int4, keepset, prune-head")                         \
	X(tokenize, "encode text to Gemma token ids, or decode ids")                     \
	X(keepset, "report a keepset's coverage of a corpus")                            \
	X(run, "generate tokens greedily with the embedded engine")                      \
	X(pack, "make a reproducible self-verifying bundle (.fgb)")                      \
	X(verify, "re-hash a bundle and replay its golden transcript")                   \
	X(serve, "serve a bundle over an OpenAI-compatible HTTP API")                    \
	X(exec, "run a bundle's own serve command against its verified components")      \
	X(publish, "upload a bundle and its attestations to a bucket")                   \
	X(keygen, "make an ECDSA P-256 signing key")                                     \
	X(sign, "sign files, folders or bundles (DSSE, OpenSSF model signing)")          \
	X(verify_sig, "check signatures made by fgpack sign")                            \
	X(audit, "who made each component, from what, signed by whom")

#define FG_DECLARE_VERB(name, help) int cmd_##name(int argc, char **argv);
FG_VERBS(FG_DECLARE_VERB)
#undef FG_DECLARE_VERB

/* `fgpack bake` dispatches to these. */
int cmd_bake_int4(int argc, char **argv);
int cmd_bake_keepset(int argc, char **argv);
int cmd_bake_prune_head(int argc, char **argv);

/* Prints "fgpack: <err->msg>" (or "fgpack <verb>: ...") on stderr and returns
 * the exit code for err->code (FG_EXIT_MISMATCH for FG_EMISMATCH, else FAIL). */
int fg_cmd_fail(const char *verb, const struct fg_err *err);

/* Prints "fgpack <verb>: <message>" and a hint to use --help; returns FG_EXIT_USAGE. */
int fg_cmd_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints fmt's text and a newline on stderr as one line shown as error
 * messages are (fg_err_one_line: a control character, C1 or byte that is
 * not UTF-8 becomes '?'), for a warning, note or problem that names what a
 * manifest, lock, archive, folder or server gave: an ESC or a lone 0x9b in
 * a file name never reaches the terminal. */
void fg_cmd_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* True when argv holds -h or --help before any "--". */
int fg_cmd_wants_help(int argc, char **argv);

struct cJSON;
struct fg_engine;
/* The counters of e's speculative decoding into the JSON object o (run's
 * --json "speculative", verify's summary): draft_tokens, centroid_top_k
 * (null for a drafter without a centroid head), rounds, drafted,
 * accepted, plain_steps. In cmd/cmd_run.c. */
void fg_cmd_spec_json(struct cJSON *o, const struct fg_engine *e);

struct fg_err;
/* verify --url (cmd/verify_url.c; the engine build has a stub saying it
 * lacks it): transcript's prompts replayed against the OpenAI-compatible
 * server at url, its system_fingerprint checked against bundle_id, then
 * tokens/s unless no_bench (max_new shrunk to what the server's
 * max_model_len leaves after the longest prompt unless max_new_given, as
 * the engine pass does); fills sum ("server", "golden", "tps",
 * "completed", ...), *verdict and *exit_code. Nonzero only when the check
 * could not run (the server unreachable, an answer that is no completion). */
int fg_cmd_verify_url(const char *url, const char *bundle_id, const struct cJSON *transcript,
		      const struct cJSON *eval_ids, int warmup, int max_new, int max_new_given, int no_bench,
		      struct cJSON *sum, const char **verdict, int *exit_code, struct fg_err *err);

#endif
