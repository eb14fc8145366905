/* cmd_bake_prune_head.c - `fgpack bake prune-head`: a model folder whose LM
 * head keeps only a keepset's rows, recorded in its config.json. */
#include <stdio.h>
#include <string.h>

#include "bake/prune_head.h"
#include "cmd.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fgpack bake prune-head MODEL_DIR --keepset KEEPSET OUT_DIR [--head bf16|int4] [--no-sync]\n"
		"                              [--store DIR] [--rehash]\n\n"
		"Writes OUT_DIR: every tensor of MODEL_DIR unchanged (the input embedding stays\n"
		"full), lm_head.weight cut to the keepset's K rows (taken from the tied embedding\n"
		"when the head is tied) in the source dtype, lm_head.keep_ids (I32 [K]: row i is\n"
		"token keep_ids[i]), config.json with tie_word_embeddings false and an\n"
		"\"lm_head_keepset\" entry so no loader can take the K-row head for a full one,\n"
		"keepset.json, the other files copied; and OUT_DIR.intoto.json (provenance).\n"
		"The keepset's full_vocab must equal the head's rows.\n"
		"  --head bf16   keep the head's dtype (default)\n"
		"  --head int4   quantize the K rows like fgpack bake int4 (compressed-tensors\n"
		"                pack-quantized, the model's group size): needs a model from\n"
		"                fgpack bake int4. An INT4 head is cut and stays INT4 either way.\n"
		"  --store DIR   the fgpack store whose blobs inputs may be hard links to\n"
		"                (default: $FGPACK_HOME, else ~/.cache/fgpack, when it exists)\n"
		"  --rehash      hash every input file, even one the store vouches for\n\n"
		"An input that is a hard link to a store blob (as `fgpack pull --into` makes\n"
		"them) and unchanged since the store checked it is named in the statement by\n"
		"the blob's sha256 instead of being hashed again (\"fgpack_digest\": \"store\");\n"
		"one that an earlier bake or pack with that store hashed, unchanged since, by\n"
		"its seen record's (\"seen\"; docs/formats/store.md).\n");
}

int cmd_bake_prune_head(int argc, char **argv)
{
	const char *src = NULL, *out = NULL, *ks = NULL, *store = NULL;
	struct fg_prune_report rep;
	struct fg_err err = { 0, "" };
	int i, no_sync = 0, head_int4 = 0, rehash = 0;

	if (fg_cmd_wants_help(argc, argv)) {
		usage(stdout);
		return FG_EXIT_OK;
	}
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--keepset") && i + 1 < argc)
			ks = argv[++i];
		else if (!strcmp(argv[i], "--head") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "int4"))
				head_int4 = 1;
			else if (strcmp(argv[i], "bf16"))
				return fg_cmd_usage_error("bake prune-head", "--head wants bf16 or int4, not '%s'", argv[i]);
		} else if (!strcmp(argv[i], "--no-sync"))
			no_sync = 1;
		else if (!strcmp(argv[i], "--rehash"))
			rehash = 1;
		else if (!strcmp(argv[i], "--store")) {
			if (i + 1 >= argc)
				return fg_cmd_usage_error("bake prune-head", "--store needs a folder");
			store = argv[++i];
		}
		else if (argv[i][0] == '-' && argv[i][1])
			return fg_cmd_usage_error("bake prune-head", "unknown option '%s'", argv[i]);
		else if (!src)
			src = argv[i];
		else if (!out)
			out = argv[i];
		else
			return fg_cmd_usage_error("bake prune-head", "unexpected argument '%s'", argv[i]);
	}
	if (!src || !out || !ks)
		return fg_cmd_usage_error("bake prune-head", "needs MODEL_DIR, --keepset KEEPSET and OUT_DIR");
	if (fg_prune_head_in(src, ks, out, head_int4, no_sync, store, rehash, &rep, &err))
		return fg_cmd_fail("bake prune-head", &err);
	/* one line whatever the names hold: a control byte or invalid UTF-8
	 * in a path or the checkpoint's tensor name shown as '?' */
	fg_cmd_line("prune-head: %s -> %s LM head [%ld, %llu] (%s%s), %zu tensors -> %s; provenance %s", src,
		    rep.head_int4 ? "INT4" : "", (long)rep.k, (unsigned long long)rep.hidden, rep.head_source,
		    rep.tied ? ", tied" : "", rep.n_tensors_out, out, rep.statement);
	if (rep.n_by_store)
		fprintf(stderr, "prune-head: %zu tensor file%s (%.3f GB) named by their store blob, not hashed "
				"again (--rehash hashes them)\n",
			rep.n_by_store, rep.n_by_store == 1 ? "" : "s", (double)rep.bytes_by_store / 1e9);
	if (rep.n_by_seen)
		fprintf(stderr, "prune-head: %zu tensor file%s (%.3f GB) hashed before and unchanged since, "
				"not hashed again (--rehash hashes them)\n",
			rep.n_by_seen, rep.n_by_seen == 1 ? "" : "s", (double)rep.bytes_by_seen / 1e9);
	return FG_EXIT_OK;
}
