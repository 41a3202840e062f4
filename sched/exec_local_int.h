/*
 * exec_local_int.h - pieces of exec_local.c that its unit tests reach.
 */
#ifndef MLFS_EXEC_LOCAL_INT_H
#define MLFS_EXEC_LOCAL_INT_H

#include <stddef.h>

#include "exec.h"


/*
 * Parses the text of /proc/PID/stat: @state gets field 3, @start_time
 * field 22.  The command name (field 2) may hold spaces and parentheses, so
 * fields are counted from its last ')'.  Returns 0 or -EINVAL.
 */
int exec_local_parse_stat(const char *text, char *state, unsigned long long *start_time);

/*
 * Parses an exit file's text ("exited N", "signaled N", "oom") into @res;
 * anything else is EXEC_LOST.
 */
void exec_local_parse_exit(const char *text, struct exec_result *res);

/*
 * Reads an exit file (the local shepherd's, or a Slurm batch script's) into
 * @res: true when there is one; else @res says EXEC_LOST.
 */
bool exec_local_read_exit(const char *path, struct exec_result *res);

#endif
