/* pullcmd.h - `fgpack pull` and `fgpack lock` share one implementation. */
#ifndef FG_PULLCMD_H
#define FG_PULLCMD_H

/* is_lock selects `fgpack lock` (resolve again, write the lock, no materialize). */
int fg_cmd_pull_main(int argc, char **argv, int is_lock);

#endif
