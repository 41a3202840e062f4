/*
 * exec_fake.h - a fake executor for unit tests of the scheduler.
 *
 * exec_fake_ops ("fake") sits behind the same struct exec_ops as
 * exec_local_ops; a test registers it (exec_register) and names it in the
 * config (executor = fake), and the scheduler finds it as it finds the
 * real ones.  It runs nothing: each start is recorded (job, worker,
 * attempt, environment, uid, gid, memory limit) and given a fake pid and an
 * eventfd as its pidfd, so the scheduler's thread wakes when the test ends
 * the worker with exec_fake_end().  Signals are recorded; SIGTERM and SIGKILL end the worker
 * as signaled unless told to ignore SIGTERM.  Every call is counted, the
 * next starts can be made to fail or held, and adopt answers what the test
 * says.
 *
 * The state is global (the scheduler creates its executor itself, so a test
 * cannot reach the instance) and guarded by one mutex: the scheduler calls
 * in from its own thread while the test reads.  Reset it between tests,
 * after sched_destroy.
 */
#ifndef MLFS_EXEC_FAKE_H
#define MLFS_EXEC_FAKE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "exec.h"

extern const struct exec_ops exec_fake_ops;

enum exec_fake_op {
	EXEC_FAKE_CREATE,
	EXEC_FAKE_DESTROY,
	EXEC_FAKE_START,
	EXEC_FAKE_SIGNAL,
	EXEC_FAKE_POLL,
	EXEC_FAKE_ADOPT,
	EXEC_FAKE_NOPS
};

#define EXEC_FAKE_ENV_SIZE 4096
#define EXEC_FAKE_MAX_SIGNALS 8

/* One start, as the fake recorded it; a self-contained copy for the test. */
struct exec_fake_run {
	char job[128];
	unsigned int worker, attempt;
	pid_t pid;			/* fake, from 100000 up */
	uid_t uid;
	gid_t gid;
	uint64_t memory_limit;
	char env[EXEC_FAKE_ENV_SIZE];	/* "NAME=VALUE\0NAME=VALUE\0..." (truncated if huge) */
	size_t env_len;
	int signals[EXEC_FAKE_MAX_SIGNALS];	/* in the order sent (the first ones) */
	unsigned int n_signals;
	bool ended;
	bool reaped;			/* poll or adopt reported the end */
	struct exec_result res;
};

/* Forgets every start, closes the fake's fds, zeroes counters and settings. */
void exec_fake_reset(void);

/* Calls of @op so far. */
unsigned int exec_fake_calls(enum exec_fake_op op);

/* The next @n starts fail with @err (a negated errno), recording nothing. */
void exec_fake_fail_next_starts(unsigned int n, int err);

/*
 * While @hold, a start waits (counted in EXEC_FAKE_START as it begins, not
 * yet recorded) until hold is cleared, or 10 s at most.
 */
void exec_fake_hold_starts(bool hold);

/* When true, SIGTERM is recorded but does not end the worker (SIGKILL still does). */
void exec_fake_ignore_sigterm(bool ignore);

/*
 * What adopt answers from now on: @ret 0 (still running: it gets a fresh
 * pidfd), 1 (ended, with @how and @code), or a negated errno.  Default: 0.
 */
void exec_fake_set_adopt(int ret, enum exec_end how, int code);

/*
 * Ends the latest attempt of @worker of @job, not yet ended, as @how/@code
 * and makes its pidfd readable.  0, or -ENOENT when no such live worker.
 */
int exec_fake_end(const char *job, unsigned int worker, enum exec_end how, int code);

/* How many starts were recorded. */
unsigned int exec_fake_n_started(void);

/* A copy of start number @i (from 0, in start order): 0 or -ENOENT. */
int exec_fake_get(unsigned int i, struct exec_fake_run *out);

/* A copy of @attempt (0: the latest) of @worker of @job: 0 or -ENOENT. */
int exec_fake_find(const char *job, unsigned int worker, unsigned int attempt,
		   struct exec_fake_run *out);

/* The value of @name in the environment @r got, or NULL. */
const char *exec_fake_getenv(const struct exec_fake_run *r, const char *name);

/* Whether @r was sent @sig. */
bool exec_fake_got_signal(const struct exec_fake_run *r, int sig);

#endif
