/*
 * exec_local_int.h - what exec_local.c (the daemon's side) and
 * exec_local_child.c (the shepherd and the worker, children that only make
 * async-signal-safe calls) share, and the pieces its unit tests reach.
 */
#ifndef MLFS_EXEC_LOCAL_INT_H
#define MLFS_EXEC_LOCAL_INT_H

#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "container.h"
#include "exec.h"
#include "logcap.h"

#define EXEC_LOCAL_CHUNK	(64 * 1024)
#define EXEC_LOCAL_STACK	(32 * 1024)
#define EXEC_LOCAL_DRAIN_S	10	/* reading output after the worker ended */

/* Everything the shepherd and the worker need, made before fork(). */
struct exec_local_plan {
	const struct exec_start *w;
	const char *argv[4];
	int log_fd;			/* -1 = none */
	int job_log_fd;			/* -1 = none */
	int status[2];			/* shepherd -> start(): exec_local_status */
	int upload_fd;			/* unview's output; -1 = none */
	char exit_tmp[sizeof(((struct exec_run *)0)->exit_path) + 8];
	char phase_tmp[4200];		/* "" = no view */
	char cg_procs[320];		/* "" = no memory cgroup */
	char cg_events[320];		/* v1 memory.oom_control, v2 memory.events */
	char cg_failcnt[320];		/* v1 memory.failcnt, v2 "" */
	char cg_maxuse[320];		/* v1 memory.max_usage_in_bytes, v2 "" */
	char cg_limit[320];		/* v1 memory.limit_in_bytes, v2 "" */
	struct logcap log;		/* the shepherd's copy of the output, within log_size */
	char chunk[EXEC_LOCAL_CHUNK];
	int worker_out;			/* the worker's end of the output pipe */
	char *podman_argv[CONTAINER_ARGV_MAX];	/* w->container's `podman run`; [0] NULL: none */
	char podman_buf[16384];
	/* the worker's stack until its execve, when it shares the shepherd's memory */
	char stack[EXEC_LOCAL_STACK] __attribute__((aligned(16)));
};

struct exec_local_status {
	pid_t worker;
	int err;			/* errno when no worker started */
};

/* The soft RLIMIT_NOFILE before exec_raise_nofile(), for the workers; 0 = untouched. */
extern rlim_t exec_local_nofile_soft;

/*
 * The value after "@key " at the start of a line of @text (@key NULL: the
 * number @text starts with); -1 when there is none.
 */
long long exec_local_counter(const char *text, const char *key);

/* The shepherd's life after the fork: starts the worker, copies its output, writes its end. */
_Noreturn void exec_local_shepherd(struct exec_local_plan *p);


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
