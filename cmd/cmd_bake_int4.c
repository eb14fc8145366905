/* cmd_bake_int4.c - `fgpack bake int4 SRC_DIR OUT_DIR [--group N] [--head keep|int4] [-j N]`. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "cmd.h"
#include "bake/int4.h"
#include "workq.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fgpack bake int4 SRC_DIR OUT_DIR [--group 32|64|128] [--head keep|int4] [-j N]\n"
		"                        [--ignore-misfits] [--max-shard-size SIZE] [--no-sync]\n"
		"                        [--store DIR] [--rehash]\n\n"
		"Quantizes every Linear weight of a Gemma 4 checkpoint's text decoder (BF16,\n"
		"F16 or F32) to symmetric INT4 per group of input columns (compressed-tensors\n"
		"pack-quantized, W4A16, BF16 scales, loadable by vLLM); embeddings, the\n"
		"per-layer embedding table, norms, scalars and the vision/audio towers pass\n"
		"through unchanged, in their own dtype. Other files of the checkpoint are\n"
		"copied. The same input gives the same bytes for any -j.\n\n"
		"  --group N     input columns per scale: 32, 64 or 128 (default 128)\n"
		"  --head MODE   keep: the head as it is (default); int4: an untied INT4 lm_head\n"
		"  -j N, -jN     quantizer threads (default: online CPUs); with 2 or more the\n"
		"                output shards are also hashed on two threads\n"
		"  --ignore-misfits  leave a Linear whose input width is not a multiple of the\n"
		"                group unquantized (listed in quantization_config.ignore)\n"
		"                instead of refusing the checkpoint\n"
		"  --max-shard-size SIZE  start a new output shard before one would pass SIZE\n"
		"                bytes (a number, or with kB/MB/GB = 10^3.. or K/M/G, KiB/MiB/GiB\n"
		"                = 2^10..; default 5GB, as transformers' save_pretrained); a\n"
		"                tensor bigger than SIZE gets a shard of its own\n"
		"  --no-sync     do not fsync the output (faster on slow disks; a power loss\n"
		"                right after may leave it incomplete)\n"
		"  --store DIR   the fgpack store whose blobs inputs may be hard links to\n"
		"                (default: $FGPACK_HOME or ~/.cache/fgpack, when it exists)\n"
		"  --rehash      hash every input file, even one the store vouches for\n\n"
		"An input that is a hard link to a store blob (as `fgpack pull --into` makes\n"
		"them) and unchanged since the store checked it is named by the blob's sha256\n"
		"instead of being hashed again; so is an input an earlier bake or pack with\n"
		"that store hashed, unchanged since (its seen record: docs/formats/store.md).\n"
		"The statement records which inputs were named which way.\n"
		"OUT_DIR must not exist (or be empty); it appears only when complete. An in-toto\n"
		"statement with SLSA provenance is written to OUT_DIR.intoto.json. stdout gets\n"
		"the output's tree digest and OUT_DIR.\n");
}

int cmd_bake_int4(int argc, char **argv)
{
	struct fg_int4_opts o;
	struct fg_int4_report rep;
	struct fg_err err = { 0, "" };
	const char *pos[2] = { NULL, NULL };
	struct timespec t0, t1;
	char misfits[96] = "", seen[128] = "";
	double secs;
	int i, npos = 0;

	if (fg_cmd_wants_help(argc, argv)) {
		usage(stdout);
		return FG_EXIT_OK;
	}
	memset(&o, 0, sizeof(o));
	o.group = 128;
	o.threads = fg_workq_cpus(64);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--store")) {
			if (i + 1 >= argc)
				return fg_cmd_usage_error("bake int4", "--store needs a folder");
			o.store = argv[++i];
		} else if (!strcmp(a, "--rehash")) {
			o.rehash = 1;
		} else if (!strcmp(a, "--ignore-misfits")) {
			o.ignore_misfits = 1;
		} else if (!strcmp(a, "--max-shard-size")) {
			unsigned long long v = 0;

			if (i + 1 >= argc || fg_parse_size(argv[++i], &v) || v < 1024)
				return fg_cmd_usage_error("bake int4",
							  "--max-shard-size needs a byte count of 1024 or more, "
							  "bare or with kB/MB/GB/KiB/MiB/GiB (e.g. 5GB, 500MiB)");
			o.max_shard_bytes = v;
		} else if (!strcmp(a, "--group") || !strcmp(a, "-j") || !strcmp(a, "--head")) {
			if (i + 1 >= argc)
				return fg_cmd_usage_error("bake int4", "%s needs a value", a);
			if (!strcmp(a, "--group")) {
				if (fg_parse_int(argv[++i], 1, 1 << 20, &o.group) ||
				    (o.group != 32 && o.group != 64 && o.group != 128))
					return fg_cmd_usage_error("bake int4", "--group must be 32, 64 or 128");
			} else if (!strcmp(a, "-j")) {
				if (fg_parse_int(argv[++i], 1, 64, &o.threads))
					return fg_cmd_usage_error("bake int4", "-j must be 1..64");
			} else {
				a = argv[++i];
				if (!strcmp(a, "keep"))
					o.head_int4 = 0;
				else if (!strcmp(a, "int4"))
					o.head_int4 = 1;
				else
					return fg_cmd_usage_error("bake int4", "--head must be keep or int4");
			}
		} else if (!strncmp(a, "-j", 2) && a[2]) {
			if (fg_parse_int(a + 2, 1, 64, &o.threads)) /* -jN, as make takes it */
				return fg_cmd_usage_error("bake int4", "-j must be 1..64");
		} else if (!strcmp(a, "--no-sync")) {
			o.no_sync = 1;
		} else if (a[0] == '-' && a[1]) {
			return fg_cmd_usage_error("bake int4", "unknown option %s", a);
		} else if (npos < 2) {
			pos[npos++] = a;
		} else {
			return fg_cmd_usage_error("bake int4", "too many arguments");
		}
	}
	if (npos != 2)
		return fg_cmd_usage_error("bake int4", "needs SRC_DIR and OUT_DIR");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (fg_int4_bake(pos[0], pos[1], &o, &rep, &err))
		return fg_cmd_fail("bake int4", &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rep.n_misfit)
		snprintf(misfits, sizeof(misfits), "\n  (of them %zu Linears whose width the group does not divide)",
			 rep.n_misfit);
	if (rep.n_by_seen)
		snprintf(seen, sizeof(seen),
			 "  inputs hashed before and unchanged since (not hashed): %zu files, %.3f GB\n",
			 rep.n_by_seen, (double)rep.bytes_by_seen / 1e9);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	fprintf(stderr,
		"fgpack bake int4: %zu Linear weights to INT4 (group %d, head %s), %zu tensors unchanged%s;\n"
		"  %.3f GB in (%zu files), %.3f GB out (%zu files), %.2f s, %.2f GB/s of input\n"
		"  inputs named by their store blob (not hashed): %zu files, %.3f GB\n"
		"%s"
		"  provenance: %s\n",
		rep.n_quantized, o.group, o.head_int4 ? "int4" : "keep", rep.n_passed, misfits,
		(double)rep.bytes_in / 1e9, rep.n_files_in, (double)rep.bytes_out / 1e9, rep.n_files_out,
		secs, secs > 0 ? (double)rep.bytes_in / 1e9 / secs : 0.0, rep.n_by_stamp,
		(double)rep.bytes_by_stamp / 1e9, seen, rep.statement);
	printf("%s  %s\n", rep.tree_digest, pos[1]);
	return FG_EXIT_OK;
}
