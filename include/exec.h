/*
 * exec.h - the contract between the scheduler and an executor.
 *
 * The scheduler decides when a worker runs and with what; an executor only
 * starts it, signals it, and reports how it ended.  `local` runs workers on
 * this node; `slurm` (later) submits them to a cluster; tests may register a
 * fake behind the same ops.
 *
 * A started worker is described by a struct exec_run the scheduler keeps
 * and persists (pid, start time, paths), so a new daemon can adopt a worker
 * an earlier one started: the worker does not depend on the daemon that
 * started it staying alive.
 */
#ifndef MLFS_EXEC_H
#define MLFS_EXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define EXEC_OPS_VERSION 1

struct mlfs_config;
struct executor;

/* What to run: every pointer is borrowed for the call. */
struct exec_start {
	const char *job;		/* job name */
	unsigned int worker;		/* from 1 */
	unsigned int attempt;		/* from 1 */
	const char *command;		/* run as /bin/sh -c COMMAND */
	char *const *envp;		/* the whole environment, NULL-terminated */
	uid_t uid;			/* run as this uid and gid (and no supplementary groups) */
	gid_t gid;
	const char *dir;		/* working folder, exists, owned by uid */
	const char *log_path;		/* the worker's log: stdout and stderr, appended */
	const char *job_log_path;	/* the job's log: the same lines prefixed "[N] " */
	const char *exit_path;		/* the executor writes how the worker ended here */
	uint64_t memory_limit;		/* bytes; 0 = none */

	/*
	 * The worker's view (mlfs job), or all NULL for a worker without one.
	 * Before the command, @view_argv runs (as the executor's own user,
	 * with the executor's environment) and must exit 0 once the view is
	 * mounted at @view_dir; with @view_bind the command then runs in a
	 * private mount namespace with @view_dir bound at /opt/ml.  After the
	 * command, @unview_argv unmounts it and uploads its output, its
	 * output going to @upload_log.  The executor writes where the worker
	 * stands into @phase_path: "staging_in", "running", "staging_out",
	 * or "staging_in_failed" (the view could not be mounted).
	 */
	char *const *view_argv;
	char *const *unview_argv;
	const char *view_dir;
	bool view_bind;
	const char *phase_path;
	const char *upload_log;
};

/* A started worker, as the scheduler keeps and persists it. */
struct exec_run {
	pid_t pid;			/* the process the executor watches (0 = none) */
	unsigned long long start_time;	/* its start time (/proc/PID/stat field 22) */
	pid_t pgid;			/* the process group signals go to */
	int pidfd;			/* readable when it ended; -1 when not open */
	char exit_path[4096];
	char cgroup[256];		/* memory cgroup folder, "" = none */
};

enum exec_end {
	EXEC_EXITED,			/* code = exit status */
	EXEC_SIGNALED,			/* code = signal number */
	EXEC_OOM,			/* killed by its memory limit */
	EXEC_LOST,			/* ended without saying how (e.g. killed with its watcher) */
};

struct exec_result {
	enum exec_end how;
	int code;
	bool staging_in_failed;		/* the view never came up; the command never ran */
	int upload;			/* unview_argv's exit status; -1 when it did not run */
};

struct exec_ops {
	unsigned int version;		/* EXEC_OPS_VERSION, always first */
	const char *name;		/* "local", "slurm", "fake" */

	int (*create)(struct executor **out, const struct mlfs_config *cfg);
	void (*destroy)(struct executor *ex);
	/* Starts a worker; fills @run.  Returns 0 or a negated errno. */
	int (*start)(struct executor *ex, const struct exec_start *w, struct exec_run *run);
	/* Sends @sig to the worker's process group. */
	int (*signal)(struct executor *ex, struct exec_run *run, int sig);
	/*
	 * 0 while the worker runs, 1 once it ended (then @res says how and the
	 * run's resources, e.g. its cgroup, are released), or a negated errno.
	 */
	int (*poll)(struct executor *ex, struct exec_run *run, struct exec_result *res);
	/*
	 * Takes over a worker a previous daemon started (@run as persisted):
	 * reopens run->pidfd.  Returns 0 when it still runs, 1 when it ended
	 * (@res says how; EXEC_LOST when nothing says), or a negated errno.
	 */
	int (*adopt)(struct executor *ex, struct exec_run *run, struct exec_result *res);
};

struct executor {
	const struct exec_ops *ops;
};

extern const struct exec_ops exec_local_ops;

#endif
