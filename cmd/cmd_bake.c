/* cmd_bake.c - `fgpack bake <kind>`: dispatch to the offline transforms. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"

static void bake_usage(FILE *f)
{
	fprintf(f, "usage: fgpack bake <kind> [<args>]\n\n"
		   "kinds:\n"
		   "  int4        INT4 group-quantized weights (compressed-tensors pack-quantized)\n"
		   "  keepset     an LM-head keepset from a corpus\n"
		   "  prune-head  a model folder with its LM head cut to a keepset\n\n"
		   "'fgpack bake <kind> --help' describes each.\n");
}

int cmd_bake(int argc, char **argv)
{
	if (argc < 2) {
		bake_usage(stderr);
		return FG_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		bake_usage(stdout);
		return FG_EXIT_OK;
	}
	if (!strcmp(argv[1], "int4"))
		return cmd_bake_int4(argc - 1, argv + 1);
	if (!strcmp(argv[1], "keepset"))
		return cmd_bake_keepset(argc - 1, argv + 1);
	if (!strcmp(argv[1], "prune-head"))
		return cmd_bake_prune_head(argc - 1, argv + 1);
	return fg_cmd_usage_error("bake", "unknown kind '%s'", argv[1]);
}
