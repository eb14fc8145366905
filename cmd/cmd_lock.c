/* cmd_lock.c - `fgpack lock MANIFEST [-o buckets.lock]`: resolve every
 * component, fetch and hash it, and write the lock (see cmd_pull.c). */
#include "cmd.h"
#include "pullcmd.h"

int cmd_lock(int argc, char **argv)
{
	return fg_cmd_pull_main(argc, argv, 1);
}
