/*
 * scheduler.h - the jobs of the node: accepting specs, placing workers on the
 * node's resources, following them through their states, and keeping all
 * of it across restarts of the daemon.
 *
 * fs/ shows this module as jobs/ and .mlfs/node; it never sees a struct of
 * a job, only names and rendered texts, so the scheduler keeps one lock and
 * its own thread.
 */
#ifndef MLFS_SCHEDULER_H
#define MLFS_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "diag.h"
#include "exec.h"

struct mlfs_config;
struct sched;

/* Seconds between SIGTERM and SIGKILL when a worker is cancelled or times out. */
#define SCHED_KILL_GRACE 10

enum sched_state {
	SCHED_QUEUED,
	SCHED_STAGING_IN,
	SCHED_RUNNING,
	SCHED_STAGING_OUT,
	SCHED_SUCCEEDED,
	SCHED_FAILED,
	SCHED_CANCELLED,
	SCHED_RETRYING,
};

const char *sched_state_name(enum sched_state st);
bool sched_state_final(enum sched_state st);

/* What fs/ needs to show one job. */
struct sched_info {
	uid_t uid;
	gid_t gid;
	enum sched_state state;
	size_t n_workers;
	long long accepted_ns;	/* CLOCK_REALTIME */
};

/* Called by the scheduler's thread, without its lock, after a job reached a final state. */
typedef void sched_final_fn(void *arg, const char *name);

/*
 * Makes the scheduler of @cfg (borrowed for its lifetime): loads the node's
 * resources, reads the journal in state_dir, adopts or fails the workers an
 * earlier daemon left running, and starts the scheduling thread.  The
 * executor is the one cfg->executor names in the registry (exec.h); a name
 * it lacks is -EINVAL, logged as "file:line: [mlfs] executor: ...".
 */
int sched_create(struct sched **out, const struct mlfs_config *cfg, sched_final_fn *final,
		 void *final_arg);
/* Stops the thread; running workers go on and the next daemon adopts them. */
void sched_destroy(struct sched *s);

/*
 * Whether the upload of worker output @id (state_dir/outputs/@id) is
 * complete.  The scheduler asks it of a job that failed only because its
 * output did not upload, which turns SUCCEEDED once it did (a later `mlfs
 * sync`); the output journal is output.h's, so fs/ answers through
 * sched_set_output_check.  Until set, no output is complete.
 */
typedef bool sched_output_done_fn(void *arg, const char *id);
void sched_set_output_check(struct sched *s, sched_output_done_fn *fn, void *arg);

/*
 * Accepts the spec @text written to jobs/@file by @uid/@gid: checks it,
 * makes it durable, queues it.  Returns 0 and the job's name in *name
 * (malloc'd), or -EINVAL / -EFBIG with messages in @d, -EEXIST when the
 * name is taken, -EIO when it could not be made durable.
 */
int sched_submit(struct sched *s, const char *file, const char *text, size_t len,
		 uid_t uid, gid_t gid, char **name, struct diag *d);

/* The names of every job, sorted by acceptance; free with sched_names_free. */
int sched_names(struct sched *s, char ***names, size_t *n);
void sched_names_free(char **names, size_t n);

/* 0 and *info, or -ENOENT. */
int sched_info(struct sched *s, const char *name, struct sched_info *info);

/*
 * Renders a small status file of a job: "state", "reason", "status.json",
 * "spec.json", or of a worker (@worker >= 1): "state", "exit_code".
 * Hands out a malloc'd text.  -ENOENT for an unknown job, worker or file.
 */
int sched_render(struct sched *s, const char *name, unsigned int worker, const char *what,
		 char **buf, size_t *len);

/*
 * The path of a job file that grows: "events", "log", or a worker's "log"
 * or "log.1" (@worker >= 1, the log before its last rotation; the file may
 * not exist); or of a worker's "output", the folder its output is
 * staged in (-ENOENT for a worker without a view).  Hands out a malloc'd path.
 */
int sched_file_path(struct sched *s, const char *name, unsigned int worker, const char *what,
		    char **path);

/* The commands a job's ctl file takes. */
enum sched_ctl_cmd {
	SCHED_CTL_CANCEL = 1,
};

/*
 * Reads what a user wrote into ctl: one command word, with blanks (space,
 * tab, CR, LF) around it allowed and nothing else: no second word, no NUL,
 * at most SCHED_CTL_MAX bytes in all.  -EINVAL for anything else.
 */
#define SCHED_CTL_MAX 64
int sched_ctl_parse(const char *buf, size_t len, enum sched_ctl_cmd *cmd);

/*
 * Runs a ctl command of @uid.  -EPERM when @uid is neither the owner nor
 * root, -EINVAL for a job that already ended, -ENOENT for an unknown job.
 */
int sched_ctl(struct sched *s, const char *name, uid_t uid, enum sched_ctl_cmd cmd);

/* Forgets a finished job of @uid: -EPERM, -EBUSY (still live), -ENOENT. */
int sched_remove(struct sched *s, const char *name, uid_t uid);

/* The node's resources and who holds them, as text for .mlfs/node. */
int sched_node_render(struct sched *s, char **buf, size_t *len);

#endif
