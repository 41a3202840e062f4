/*
 * exec_fake.c - the fake executor of the scheduler's unit tests (exec_fake.h).
 *
 * Each start becomes a record in a fixed table.  The record owns an eventfd
 * (efd); the scheduler gets a dup of it as run->pidfd, so the scheduler may
 * close its copy (in poll, here, as the local executor does, or in
 * sched_destroy) while the fake can still make the worker "end" by writing
 * to its own.  A worker is found again by its fake pid, which the scheduler
 * persists in status.json, so adopt works across sched_destroy and
 * sched_create as long as the test does not reset the fake in between.
 *
 * Threading: one mutex guards everything; no call blocks or calls back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "exec_fake.h"

#define EXEC_FAKE_MAX_RUNS 256
#define EXEC_FAKE_FIRST_PID 100000
#define EXEC_FAKE_HOLD_MAX_S 10	/* a held start goes on by itself after this */

struct exec_fake_rec {
	struct exec_fake_run pub;
	int efd;			/* the fake's own eventfd; -1 after reset */
};

static struct {
	pthread_mutex_t lock;
	struct exec_fake_rec runs[EXEC_FAKE_MAX_RUNS];
	unsigned int n_runs;
	unsigned int calls[EXEC_FAKE_NOPS];
	unsigned int fail_starts;
	int fail_err;
	bool ignore_sigterm;
	int adopt_ret;
	struct exec_result adopt_res;
	bool hold_starts;
	pthread_cond_t released;	/* hold_starts was cleared */
} fake = { .lock = PTHREAD_MUTEX_INITIALIZER, .released = PTHREAD_COND_INITIALIZER };

static struct executor fake_instance = { .ops = &exec_fake_ops };

static struct exec_fake_rec *exec_fake_by_pid(pid_t pid)
{
	for (unsigned int i = 0; i < fake.n_runs; i++)
		if (fake.runs[i].pub.pid == pid)
			return &fake.runs[i];
	return NULL;
}

/* Marks @r ended and makes its pidfd readable; called with the lock held. */
static void exec_fake_mark_ended(struct exec_fake_rec *r, enum exec_end how, int code)
{
	uint64_t one = 1;

	if (r->pub.ended)
		return;
	r->pub.ended = true;
	r->pub.res = (struct exec_result){ .how = how, .code = code };
	if (r->efd >= 0 && write(r->efd, &one, sizeof(one)) < 0)
		fprintf(stderr, "exec_fake: cannot signal the end of %s/%u: %s\n", r->pub.job,
			r->pub.worker, strerror(errno));
}

/* Copies @envp into the record, as NUL-separated entries, as far as it fits. */
static void exec_fake_copy_env(struct exec_fake_run *p, char *const *envp)
{
	p->env_len = 0;
	for (size_t i = 0; envp && envp[i]; i++) {
		size_t len = strlen(envp[i]) + 1;

		if (p->env_len + len > sizeof(p->env))
			break;
		memcpy(p->env + p->env_len, envp[i], len);
		p->env_len += len;
	}
}

void exec_fake_reset(void)
{
	pthread_mutex_lock(&fake.lock);
	for (unsigned int i = 0; i < fake.n_runs; i++)
		if (fake.runs[i].efd >= 0)
			close(fake.runs[i].efd);
	memset(fake.runs, 0, sizeof(fake.runs));
	fake.n_runs = 0;
	memset(fake.calls, 0, sizeof(fake.calls));
	fake.fail_starts = 0;
	fake.fail_err = 0;
	fake.ignore_sigterm = false;
	fake.adopt_ret = 0;
	fake.adopt_res = (struct exec_result){ .how = EXEC_LOST };
	fake.hold_starts = false;
	pthread_cond_broadcast(&fake.released);
	pthread_mutex_unlock(&fake.lock);
}

unsigned int exec_fake_calls(enum exec_fake_op op)
{
	unsigned int n;

	pthread_mutex_lock(&fake.lock);
	n = fake.calls[op];
	pthread_mutex_unlock(&fake.lock);
	return n;
}

void exec_fake_fail_next_starts(unsigned int n, int err)
{
	pthread_mutex_lock(&fake.lock);
	fake.fail_starts = n;
	fake.fail_err = err;
	pthread_mutex_unlock(&fake.lock);
}

void exec_fake_hold_starts(bool hold)
{
	pthread_mutex_lock(&fake.lock);
	fake.hold_starts = hold;
	if (!hold)
		pthread_cond_broadcast(&fake.released);
	pthread_mutex_unlock(&fake.lock);
}

void exec_fake_ignore_sigterm(bool ignore)
{
	pthread_mutex_lock(&fake.lock);
	fake.ignore_sigterm = ignore;
	pthread_mutex_unlock(&fake.lock);
}

void exec_fake_set_adopt(int ret, enum exec_end how, int code)
{
	pthread_mutex_lock(&fake.lock);
	fake.adopt_ret = ret;
	fake.adopt_res = (struct exec_result){ .how = how, .code = code };
	pthread_mutex_unlock(&fake.lock);
}

int exec_fake_end(const char *job, unsigned int worker, enum exec_end how, int code)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&fake.lock);
	for (unsigned int i = fake.n_runs; i-- > 0;) {
		struct exec_fake_rec *r = &fake.runs[i];

		if (!r->pub.ended && r->pub.worker == worker && strcmp(r->pub.job, job) == 0) {
			exec_fake_mark_ended(r, how, code);
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&fake.lock);
	return ret;
}

unsigned int exec_fake_n_started(void)
{
	unsigned int n;

	pthread_mutex_lock(&fake.lock);
	n = fake.n_runs;
	pthread_mutex_unlock(&fake.lock);
	return n;
}

int exec_fake_get(unsigned int i, struct exec_fake_run *out)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&fake.lock);
	if (i < fake.n_runs) {
		*out = fake.runs[i].pub;
		ret = 0;
	}
	pthread_mutex_unlock(&fake.lock);
	return ret;
}

int exec_fake_find(const char *job, unsigned int worker, unsigned int attempt,
		   struct exec_fake_run *out)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&fake.lock);
	for (unsigned int i = fake.n_runs; i-- > 0;) {
		const struct exec_fake_run *p = &fake.runs[i].pub;

		if (p->worker == worker && strcmp(p->job, job) == 0 &&
		    (attempt == 0 || p->attempt == attempt)) {
			*out = *p;
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&fake.lock);
	return ret;
}

const char *exec_fake_getenv(const struct exec_fake_run *r, const char *name)
{
	size_t len = strlen(name);

	for (size_t off = 0; off < r->env_len; off += strlen(r->env + off) + 1)
		if (strncmp(r->env + off, name, len) == 0 && r->env[off + len] == '=')
			return r->env + off + len + 1;
	return NULL;
}

bool exec_fake_got_signal(const struct exec_fake_run *r, int sig)
{
	for (unsigned int i = 0; i < r->n_signals; i++)
		if (r->signals[i] == sig)
			return true;
	return false;
}

/* ---- the ops ---- */

static int exec_fake_create(struct executor **out, const struct mlfs_config *cfg)
{
	(void)cfg;
	pthread_mutex_lock(&fake.lock);
	fake.calls[EXEC_FAKE_CREATE]++;
	pthread_mutex_unlock(&fake.lock);
	*out = &fake_instance;
	return 0;
}

static void exec_fake_destroy(struct executor *ex)
{
	(void)ex;
	pthread_mutex_lock(&fake.lock);
	fake.calls[EXEC_FAKE_DESTROY]++;
	pthread_mutex_unlock(&fake.lock);
}

/* Fills a new record for @w; -errno when the table is full or fds run out. */
static int exec_fake_record(const struct exec_start *w, struct exec_run *run)
{
	struct exec_fake_rec *r;

	if (fake.n_runs == EXEC_FAKE_MAX_RUNS)
		return -ENOSPC;
	r = &fake.runs[fake.n_runs];
	memset(r, 0, sizeof(*r));
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->efd < 0)
		return -errno;
	memset(run, 0, sizeof(*run));
	run->pidfd = fcntl(r->efd, F_DUPFD_CLOEXEC, 0);
	if (run->pidfd < 0) {
		int err = -errno;

		close(r->efd);
		return err;
	}
	snprintf(r->pub.job, sizeof(r->pub.job), "%s", w->job);
	r->pub.worker = w->worker;
	r->pub.attempt = w->attempt;
	r->pub.pid = EXEC_FAKE_FIRST_PID + (pid_t)fake.n_runs;
	r->pub.uid = w->uid;
	r->pub.gid = w->gid;
	r->pub.memory_limit = w->memory_limit;
	exec_fake_copy_env(&r->pub, w->envp);
	run->pid = run->pgid = r->pub.pid;
	run->start_time = (unsigned long long)r->pub.pid;
	snprintf(run->exit_path, sizeof(run->exit_path), "%s", w->exit_path ? w->exit_path : "");
	fake.n_runs++;
	return 0;
}

static int exec_fake_start(struct executor *ex, const struct exec_start *w, struct exec_run *run)
{
	struct timespec until;
	int ret;

	(void)ex;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += EXEC_FAKE_HOLD_MAX_S;
	pthread_mutex_lock(&fake.lock);
	fake.calls[EXEC_FAKE_START]++;
	while (fake.hold_starts &&
	       pthread_cond_timedwait(&fake.released, &fake.lock, &until) != ETIMEDOUT)
		;
	if (fake.fail_starts) {
		fake.fail_starts--;
		ret = fake.fail_err;
	} else {
		ret = exec_fake_record(w, run);
	}
	pthread_mutex_unlock(&fake.lock);
	return ret;
}

static int exec_fake_signal(struct executor *ex, struct exec_run *run, int sig)
{
	struct exec_fake_rec *r;
	int ret = 0;

	(void)ex;
	pthread_mutex_lock(&fake.lock);
	fake.calls[EXEC_FAKE_SIGNAL]++;
	r = exec_fake_by_pid(run->pid);
	if (!r) {
		ret = -ESRCH;
	} else {
		if (r->pub.n_signals < EXEC_FAKE_MAX_SIGNALS)
			r->pub.signals[r->pub.n_signals++] = sig;
		if (sig == SIGKILL || (sig == SIGTERM && !fake.ignore_sigterm))
			exec_fake_mark_ended(r, EXEC_SIGNALED, sig);
	}
	pthread_mutex_unlock(&fake.lock);
	return ret;
}

/* Hands the end of @r to the scheduler and closes its pidfd, as exec_local_finish does. */
static void exec_fake_reap(struct exec_fake_rec *r, struct exec_run *run, struct exec_result *res)
{
	*res = r->pub.res;
	r->pub.reaped = true;
	if (run->pidfd >= 0)
		close(run->pidfd);
	run->pidfd = -1;
}

static int exec_fake_poll(struct executor *ex, struct exec_run *run, struct exec_result *res)
{
	struct exec_fake_rec *r;
	int ret = 0;

	(void)ex;
	pthread_mutex_lock(&fake.lock);
	fake.calls[EXEC_FAKE_POLL]++;
	r = exec_fake_by_pid(run->pid);
	if (!r) {
		ret = -ESRCH;
	} else if (r->pub.ended) {
		exec_fake_reap(r, run, res);
		ret = 1;
	}
	pthread_mutex_unlock(&fake.lock);
	return ret;
}

static int exec_fake_adopt(struct executor *ex, struct exec_run *run, struct exec_result *res)
{
	struct exec_fake_rec *r;
	int ret;

	(void)ex;
	pthread_mutex_lock(&fake.lock);
	fake.calls[EXEC_FAKE_ADOPT]++;
	run->pidfd = -1;
	r = exec_fake_by_pid(run->pid);
	ret = fake.adopt_ret;
	if (ret == 1) {
		if (r)
			exec_fake_mark_ended(r, fake.adopt_res.how, fake.adopt_res.code);
		*res = fake.adopt_res;
		if (r)
			r->pub.reaped = true;
	} else if (ret == 0 && (!r || r->efd < 0)) {
		ret = -ESRCH;
	} else if (ret == 0) {
		run->pidfd = fcntl(r->efd, F_DUPFD_CLOEXEC, 0);
		ret = run->pidfd < 0 ? -errno : 0;
	}
	pthread_mutex_unlock(&fake.lock);
	return ret;
}

const struct exec_ops exec_fake_ops = {
	.version = EXEC_OPS_VERSION,
	.name = "fake",
	.create = exec_fake_create,
	.destroy = exec_fake_destroy,
	.start = exec_fake_start,
	.signal = exec_fake_signal,
	.poll = exec_fake_poll,
	.adopt = exec_fake_adopt,
};
