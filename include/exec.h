/*
 * exec.h - the contract between the scheduler and an executor.
 *
 * The scheduler decides when a worker runs and with what; an executor only
 * starts it, signals it, and reports how it ended.  `local` runs workers on
 * this node; `slurm` submits them to a Slurm cluster; tests may register a
 * fake behind the same ops.
 *
 * A *cluster* executor (one with submit and refresh) places workers itself:
 * the scheduler hands it every waiting worker of a job at once (submit),
 * holds no node resources for them, and learns where each stands from
 * poll, which answers from the last refresh, one batched look at the whole
 * cluster per interval.
 *
 * A started worker is described by a struct exec_run the scheduler keeps
 * and persists (pid, start time, paths), so a new daemon can adopt a worker
 * an earlier one started: the worker does not depend on the daemon that
 * started it staying alive.
 *
 * Executors are found by name in a registry (executor.c), as backends are:
 * each supplies a versioned, append-only struct exec_ops, checked once when
 * it is registered, and the scheduler calls it only through the inline
 * wrappers at the bottom of this file, which answer for the methods a
 * table of an older version, or one that is not a cluster's, lacks.
 */
#ifndef MLFS_EXEC_H
#define MLFS_EXEC_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EXEC_OPS_VERSION 2

struct container_run;
struct diag;
struct mlfs_config;
struct executor;
struct spec;

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
	uint64_t log_max;		/* the worker's log is rotated to LOG.1 at this size, and
					 * the worker adds at most this much to the job's log; 0 = none */

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

	/*
	 * A worker with an image (container.h), or all NULL.  Before the
	 * view, @pull_argv runs as the executor's own user, its output in the
	 * worker's log, and must exit 0 once the image is on the node (the
	 * phase is "staging_in" meanwhile; "staging_in_failed" when it does
	 * not).  The command then runs as @container's `podman run`, started
	 * by the executor's own user, the container running it as uid:gid
	 * with the view (or the worker's scratch folder) at /opt/ml: no mount
	 * namespace of the executor's (view_bind is false).  After it ends,
	 * @cleanup_argv removes what is left of the container (a `podman run`
	 * killed with SIGKILL leaves it running).
	 */
	const struct container_run *container;
	char *const *pull_argv;
	char *const *cleanup_argv;

	/* For cluster executors, which carry the job to another node: */
	const struct spec *spec;	/* the job's model; this worker is spec->workers[worker - 1] */
	const char *spec_file;		/* the file name it was written as */
	const char *spec_text;		/* the spec as written, @spec_len bytes */
	size_t spec_len;
	const char *job_dir;		/* state_dir/jobs/NAME: logs, phase and exit files */
	const char *output_id;		/* the view's --output-id; NULL without a view */
	const char *config_path;	/* the config, absolute, the same on every node */
	const char *mlfs_bin;		/* the mlfs binary, absolute, the same on every node */
};

/* A started worker, as the scheduler keeps and persists it. */
struct exec_run {
	pid_t pid;			/* the process the executor watches (0 = none) */
	unsigned long long start_time;	/* its start time (/proc/PID/stat field 22) */
	pid_t pgid;			/* the process group signals go to */
	int pidfd;			/* readable when it ended; -1 when not open */
	char exit_path[4096];
	char cgroup[256];		/* memory cgroup folder, "" = none */
	char cluster_id[64];		/* the cluster's id for it (Slurm: "123", "123_4"); "" = none */
	unsigned int restarts;		/* times the cluster requeued it, as last seen */
	bool requeue;			/* submitted for the cluster to requeue (Slurm --requeue):
					 * set again by the scheduler before an adopt */
	long long exit_looked_ns;	/* slurm: the snapshot its exit file was last looked for in */
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
	char why[256];			/* the executor's words for an end or a wait; "" = none */
};

/* poll's answers besides 0 (running) and 1 (ended), from cluster executors. */
#define EXEC_PENDING	2		/* in the cluster's queue; @res->why says why it waits */
#define EXEC_REQUEUED	3		/* ran, and was put back in the queue (preempted, node failure) */

struct exec_ops {
	unsigned int version;		/* EXEC_OPS_VERSION, always first */
	const char *name;		/* "local", "slurm", "fake" */

	int (*create)(struct executor **out, const struct mlfs_config *cfg);
	void (*destroy)(struct executor *ex);
	/* Starts a worker; fills @run.  Returns 0 or a negated errno. */
	int (*start)(struct executor *ex, const struct exec_start *w, struct exec_run *run);
	/*
	 * Sends @sig to the worker's process group.  A cluster executor may
	 * only queue it (slurm: scancel is a round trip to the controller, and
	 * the scheduler calls this with its lock held); it is sent in order.
	 */
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

	/* The methods above are version 1. */

	/* Version 2, cluster executors only; NULL for the others. */
	/*
	 * Submits workers @w[0..n) of one job at once (independent workers
	 * may become one job array; with @together they start as one
	 * allocation), filling @runs[0..n).  0 or a negated errno, with the
	 * cluster's words in @why.
	 */
	int (*submit)(struct executor *ex, const struct exec_start *w, size_t n, bool together,
		      struct exec_run *runs, char *why, size_t why_len);
	/*
	 * One batched look at every submitted worker, at most once per the
	 * executor's interval; returns the ms until the next is due.
	 */
	int (*refresh)(struct executor *ex);
	/*
	 * Whether a worker of @sp (from 0) could ever run on the cluster: 1,
	 * or -1 with why not in @why.
	 */
	int (*fits)(struct executor *ex, const struct spec *sp, size_t worker, char *why,
		    size_t why_len);
	/* append only; bump EXEC_OPS_VERSION */
};

struct executor {
	const struct exec_ops *ops;
};

extern const struct exec_ops exec_local_ops;
extern const struct exec_ops exec_slurm_ops;

/* ---- the registry (executor.c) ---- */

/*
 * Adds an executor (tests register fakes this way): 0, -EINVAL for a table
 * of an unknown version or without a required method (a cluster one needs
 * all of submit, refresh and fits), -EEXIST for a name taken, -ENOSPC.
 */
int exec_register(const struct exec_ops *ops);

/* Finds the executor named @name: 0, or -ENOENT. */
int exec_lookup(const struct exec_ops **out, const char *name);

/* The names of the built-in executors, NULL-terminated. */
const char *const *exec_names(void);

/* Whether @ops is one of mlfs's own executors, not one a test registered. */
bool exec_builtin(const struct exec_ops *ops);

/*
 * Checks [mlfs] executor of @cfg against the registry.  0, or -EINVAL with
 * "file:line: [mlfs] executor: unknown executor 'X' (use local or slurm)"
 * added to @d.
 */
int exec_check_config(const struct mlfs_config *cfg, struct diag *d);

/* Creates the executor @cfg names (none: local); -ENOENT for a name the registry lacks. */
int exec_create(struct executor **out, const struct mlfs_config *cfg);
void exec_destroy(struct executor *ex);

/* ---- the wrappers the scheduler calls ---- */

/* Whether @ex places workers itself (a cluster: submit, refresh and fits). */
static inline bool exec_is_cluster(const struct executor *ex)
{
	return ex->ops->version >= 2 && ex->ops->submit;
}

static inline int exec_start(struct executor *ex, const struct exec_start *w, struct exec_run *run)
{
	return ex->ops->start(ex, w, run);
}

static inline int exec_signal(struct executor *ex, struct exec_run *run, int sig)
{
	return ex->ops->signal(ex, run, sig);
}

static inline int exec_poll(struct executor *ex, struct exec_run *run, struct exec_result *res)
{
	return ex->ops->poll(ex, run, res);
}

static inline int exec_adopt(struct executor *ex, struct exec_run *run, struct exec_result *res)
{
	return ex->ops->adopt(ex, run, res);
}

/* -ENOTSUP for an executor that is not a cluster's. */
static inline int exec_submit(struct executor *ex, const struct exec_start *w, size_t n,
			      bool together, struct exec_run *runs, char *why, size_t why_len)
{
	if (!exec_is_cluster(ex))
		return -ENOTSUP;
	return ex->ops->submit(ex, w, n, together, runs, why, why_len);
}

/* The ms until the next refresh is due; -1 (none) for an executor that is not a cluster's. */
static inline int exec_refresh(struct executor *ex)
{
	return exec_is_cluster(ex) ? ex->ops->refresh(ex) : -1;
}

/* 1 (it could) for an executor that is not a cluster's: the node answers for itself. */
static inline int exec_fits(struct executor *ex, const struct spec *sp, size_t worker, char *why,
			    size_t why_len)
{
	return exec_is_cluster(ex) ? ex->ops->fits(ex, sp, worker, why, why_len) : 1;
}

/*
 * Raises this process's soft limit of open files to its hard limit (a
 * daemon serving many open files needs it), remembering the soft limit it
 * had: the local executor gives workers that one back, so a program that
 * still uses select(2) is not handed descriptors past 1024.
 */
void exec_raise_nofile(void);

#endif
