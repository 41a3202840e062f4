/*
 * exec_fake_cluster.h - a fake cluster executor for unit tests of the
 * scheduler.
 *
 * exec_fake_cluster_ops ("fake-cluster") sits behind the same struct
 * exec_ops as exec_slurm_ops, with submit, refresh and fits.  It runs
 * nothing and has no pidfds: each submission is recorded (job, workers,
 * together or not) and each submitted worker gets a cluster id, "F1" for a
 * lone worker or a gang, "F1_2" for worker 2 of an array.  The test plays
 * the cluster: it says where a worker stands (pending with a reason,
 * running, requeued, ended), and, as Slurm's squeue snapshot does, what it
 * says is seen by poll only after the next refresh.  Before any refresh
 * since a worker's submission, poll answers EXEC_PENDING with no reason
 * (no news).  SIGTERM and SIGKILL end a worker as signaled (at the next
 * refresh).  fits answers -1 for a worker asking more GPUs than the
 * cluster's largest node, when the test set one.  Every call is counted.
 *
 * The state is global and guarded by one mutex, like exec_fake.h's; it
 * survives sched_destroy and sched_create (adopt finds a worker again by
 * its cluster id).  Reset it between tests, after sched_destroy.
 */
#ifndef MLFS_EXEC_FAKE_CLUSTER_H
#define MLFS_EXEC_FAKE_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include "exec.h"

extern const struct exec_ops exec_fake_cluster_ops;

/* How often the fake asks to be refreshed: refresh's answer. */
#define EXEC_FAKE_CLUSTER_INTERVAL_MS 20

enum exec_fake_cluster_op {
	EXEC_FAKE_CLUSTER_CREATE,
	EXEC_FAKE_CLUSTER_DESTROY,
	EXEC_FAKE_CLUSTER_START,
	EXEC_FAKE_CLUSTER_SIGNAL,
	EXEC_FAKE_CLUSTER_POLL,
	EXEC_FAKE_CLUSTER_ADOPT,
	EXEC_FAKE_CLUSTER_SUBMIT,
	EXEC_FAKE_CLUSTER_REFRESH,
	EXEC_FAKE_CLUSTER_FITS,
	EXEC_FAKE_CLUSTER_NOPS
};

#define EXEC_FAKE_CLUSTER_MAX_GROUP 16

/* One submit, as the fake recorded it. */
struct exec_fake_submission {
	char job[128];
	size_t n;			/* workers submitted at once */
	bool together;			/* a gang: one allocation */
	unsigned int workers[EXEC_FAKE_CLUSTER_MAX_GROUP];	/* their numbers (the first ones) */
	unsigned int attempts[EXEC_FAKE_CLUSTER_MAX_GROUP];
	char id[32];			/* "F1" */
};

/* Forgets every submission and worker, zeroes counters and settings. */
void exec_fake_cluster_reset(void);

/* Calls of @op so far. */
unsigned int exec_fake_cluster_calls(enum exec_fake_cluster_op op);

/* The next submit fails with @err (a negated errno) and @why, recording nothing. */
void exec_fake_cluster_fail_next_submit(int err, const char *why);

/* The GPUs of the cluster's largest node; fits refuses a worker asking more.  < 0: no limit. */
void exec_fake_cluster_set_max_gpus(long gpus);

unsigned int exec_fake_cluster_n_submissions(void);

/* A copy of submission number @i (from 0): 0 or -ENOENT. */
int exec_fake_cluster_submission(unsigned int i, struct exec_fake_submission *out);

/*
 * What the cluster says of the latest submission of @worker of @job from
 * the next refresh on; each returns 0, or -ENOENT when no such worker is in
 * the cluster's hands.  @why is the cluster's own words.
 */
int exec_fake_cluster_pending(const char *job, unsigned int worker, const char *why);
int exec_fake_cluster_running(const char *job, unsigned int worker);
/* Ran, and was put back in the queue: one restart more, pending again. */
int exec_fake_cluster_requeue(const char *job, unsigned int worker, const char *why);
int exec_fake_cluster_end(const char *job, unsigned int worker, enum exec_end how, int code);

/* The cluster id of @worker of @job ("" when none) into @buf. */
int exec_fake_cluster_id(const char *job, unsigned int worker, char *buf, size_t len);

/* Whether @worker of @job was sent @sig. */
bool exec_fake_cluster_got_signal(const char *job, unsigned int worker, int sig);

#endif
