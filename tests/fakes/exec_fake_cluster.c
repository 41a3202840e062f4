/*
 * exec_fake_cluster.c - the fake cluster executor of the scheduler's unit
 * tests (exec_fake_cluster.h).
 *
 * Each submitted worker becomes a record in a fixed table, found again by
 * a fake pid (from 200000 up) that the scheduler keeps in the run and
 * persists, so adopt works across sched_destroy and sched_create; the
 * cluster id is what the test and the scheduler's events see, shared by
 * the workers of a gang.  A record holds two states: what the test last
 * said (want) and what the last refresh saw (seen); poll answers from the
 * second, as the Slurm executor answers from its last squeue.  What the
 * test says of a gang's worker about the queue (pending, running,
 * requeued) holds for the whole allocation; an end is the worker's own.
 *
 * Threading: one mutex guards everything; no call blocks or calls back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "exec_fake_cluster.h"
#include "spec.h"

#define FC_MAX_RECS 256
#define FC_FIRST_PID 200000
#define FC_MAX_SIGNALS 8

enum exec_fake_cluster_state { FC_QUEUED, FC_RUNNING, FC_ENDED };

/* Where a worker stands, as the test says it or as a refresh saw it. */
struct exec_fake_cluster_view {
	enum exec_fake_cluster_state state;
	char why[160];			/* the cluster's words while it waits or was requeued */
	unsigned int restarts;
	struct exec_result end;
};

struct exec_fake_cluster_rec {
	char job[128];
	unsigned int worker, attempt;
	pid_t pid;
	char id[64];
	struct exec_fake_cluster_view want, seen;
	bool refreshed;			/* a refresh since its submission or adoption */
	bool gone;			/* its end was handed to the scheduler */
	int signals[FC_MAX_SIGNALS];
	unsigned int n_signals;
};

static struct {
	pthread_mutex_t lock;
	struct exec_fake_cluster_rec recs[FC_MAX_RECS];
	unsigned int n_recs;
	struct exec_fake_submission subs[FC_MAX_RECS];
	unsigned int n_subs;
	unsigned int calls[EXEC_FAKE_CLUSTER_NOPS];
	int fail_err;			/* the next submit's, 0 = none */
	char fail_why[200];
	long max_gpus;
} fc = { .lock = PTHREAD_MUTEX_INITIALIZER, .max_gpus = -1 };

static struct executor exec_fake_cluster_instance = { .ops = &exec_fake_cluster_ops };

static void exec_fake_cluster_count(enum exec_fake_cluster_op op)
{
	fc.calls[op]++;
}

static struct exec_fake_cluster_rec *exec_fake_cluster_by_pid(pid_t pid)
{
	for (unsigned int i = 0; i < fc.n_recs; i++)
		if (fc.recs[i].pid == pid)
			return &fc.recs[i];
	return NULL;
}

/* The latest record of @worker of @job still in the cluster's hands. */
static struct exec_fake_cluster_rec *exec_fake_cluster_find(const char *job, unsigned int worker)
{
	for (unsigned int i = fc.n_recs; i-- > 0;)
		if (!fc.recs[i].gone && fc.recs[i].worker == worker && strcmp(fc.recs[i].job, job) == 0)
			return &fc.recs[i];
	return NULL;
}

void exec_fake_cluster_reset(void)
{
	pthread_mutex_lock(&fc.lock);
	memset(fc.recs, 0, sizeof(fc.recs));
	memset(fc.subs, 0, sizeof(fc.subs));
	memset(fc.calls, 0, sizeof(fc.calls));
	fc.n_recs = fc.n_subs = 0;
	fc.fail_err = 0;
	fc.fail_why[0] = '\0';
	fc.max_gpus = -1;
	pthread_mutex_unlock(&fc.lock);
}

unsigned int exec_fake_cluster_calls(enum exec_fake_cluster_op op)
{
	unsigned int n;

	pthread_mutex_lock(&fc.lock);
	n = fc.calls[op];
	pthread_mutex_unlock(&fc.lock);
	return n;
}

void exec_fake_cluster_fail_next_submit(int err, const char *why)
{
	pthread_mutex_lock(&fc.lock);
	fc.fail_err = err;
	snprintf(fc.fail_why, sizeof(fc.fail_why), "%s", why);
	pthread_mutex_unlock(&fc.lock);
}

void exec_fake_cluster_set_max_gpus(long gpus)
{
	pthread_mutex_lock(&fc.lock);
	fc.max_gpus = gpus;
	pthread_mutex_unlock(&fc.lock);
}

unsigned int exec_fake_cluster_n_submissions(void)
{
	unsigned int n;

	pthread_mutex_lock(&fc.lock);
	n = fc.n_subs;
	pthread_mutex_unlock(&fc.lock);
	return n;
}

int exec_fake_cluster_submission(unsigned int i, struct exec_fake_submission *out)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&fc.lock);
	if (i < fc.n_subs) {
		*out = fc.subs[i];
		ret = 0;
	}
	pthread_mutex_unlock(&fc.lock);
	return ret;
}

/*
 * Applies @change to the latest record of @worker of @job and, unless
 * @own, to every record of the same allocation (a gang's id).
 */
static int exec_fake_cluster_say(const char *job, unsigned int worker, bool own,
				 void (*change)(struct exec_fake_cluster_view *v, const void *arg),
				 const void *arg)
{
	struct exec_fake_cluster_rec *r;
	char id[64];

	pthread_mutex_lock(&fc.lock);
	r = exec_fake_cluster_find(job, worker);
	if (!r) {
		pthread_mutex_unlock(&fc.lock);
		return -ENOENT;
	}
	snprintf(id, sizeof(id), "%s", r->id);
	for (unsigned int i = 0; i < fc.n_recs; i++) {
		struct exec_fake_cluster_rec *o = &fc.recs[i];

		if (o == r || (!own && !o->gone && strcmp(o->id, id) == 0))
			change(&o->want, arg);
	}
	pthread_mutex_unlock(&fc.lock);
	return 0;
}

static void exec_fake_cluster_to_pending(struct exec_fake_cluster_view *v, const void *why)
{
	v->state = FC_QUEUED;
	snprintf(v->why, sizeof(v->why), "%s", (const char *)why);
}

static void exec_fake_cluster_to_running(struct exec_fake_cluster_view *v, const void *arg)
{
	(void)arg;
	v->state = FC_RUNNING;
	v->why[0] = '\0';
}

static void exec_fake_cluster_to_requeued(struct exec_fake_cluster_view *v, const void *why)
{
	v->restarts++;
	exec_fake_cluster_to_pending(v, why);
}

static void exec_fake_cluster_to_ended(struct exec_fake_cluster_view *v, const void *res)
{
	v->state = FC_ENDED;
	v->end = *(const struct exec_result *)res;
}

int exec_fake_cluster_pending(const char *job, unsigned int worker, const char *why)
{
	return exec_fake_cluster_say(job, worker, false, exec_fake_cluster_to_pending, why);
}

int exec_fake_cluster_running(const char *job, unsigned int worker)
{
	return exec_fake_cluster_say(job, worker, false, exec_fake_cluster_to_running, NULL);
}

int exec_fake_cluster_requeue(const char *job, unsigned int worker, const char *why)
{
	return exec_fake_cluster_say(job, worker, false, exec_fake_cluster_to_requeued, why);
}

int exec_fake_cluster_end(const char *job, unsigned int worker, enum exec_end how, int code)
{
	struct exec_result res = { .how = how, .code = code, .upload = -1 };

	return exec_fake_cluster_say(job, worker, true, exec_fake_cluster_to_ended, &res);
}

int exec_fake_cluster_id(const char *job, unsigned int worker, char *buf, size_t len)
{
	const struct exec_fake_cluster_rec *r;

	pthread_mutex_lock(&fc.lock);
	r = exec_fake_cluster_find(job, worker);
	snprintf(buf, len, "%s", r ? r->id : "");
	pthread_mutex_unlock(&fc.lock);
	return r ? 0 : -ENOENT;
}

bool exec_fake_cluster_got_signal(const char *job, unsigned int worker, int sig)
{
	bool got = false;

	pthread_mutex_lock(&fc.lock);
	for (unsigned int i = 0; i < fc.n_recs; i++) {
		const struct exec_fake_cluster_rec *r = &fc.recs[i];

		for (unsigned int k = 0; r->worker == worker && strcmp(r->job, job) == 0 &&
					 k < r->n_signals; k++)
			got |= r->signals[k] == sig;
	}
	pthread_mutex_unlock(&fc.lock);
	return got;
}

/* ---- the ops ---- */

static int exec_fake_cluster_create(struct executor **out, const struct mlfs_config *cfg)
{
	(void)cfg;
	pthread_mutex_lock(&fc.lock);
	exec_fake_cluster_count(EXEC_FAKE_CLUSTER_CREATE);
	pthread_mutex_unlock(&fc.lock);
	*out = &exec_fake_cluster_instance;
	return 0;
}

static void exec_fake_cluster_destroy(struct executor *ex)
{
	(void)ex;
	pthread_mutex_lock(&fc.lock);
	exec_fake_cluster_count(EXEC_FAKE_CLUSTER_DESTROY);
	pthread_mutex_unlock(&fc.lock);
}

/* Records worker @w as part of submission @sub_id, filling @run (lock held). */
static void exec_fake_cluster_record(const struct exec_start *w, const char *sub_id, bool array,
				     struct exec_run *run)
{
	struct exec_fake_cluster_rec *r = &fc.recs[fc.n_recs];

	*r = (struct exec_fake_cluster_rec){ .worker = w->worker, .attempt = w->attempt,
					     .pid = FC_FIRST_PID + (pid_t)fc.n_recs };
	snprintf(r->job, sizeof(r->job), "%s", w->job);
	if (array)
		snprintf(r->id, sizeof(r->id), "%s_%u", sub_id, w->worker);
	else
		snprintf(r->id, sizeof(r->id), "%s", sub_id);
	fc.n_recs++;
	*run = (struct exec_run){ .pid = r->pid, .pidfd = -1 };
	snprintf(run->exit_path, sizeof(run->exit_path), "%s", w->exit_path ? w->exit_path : "");
	snprintf(run->cluster_id, sizeof(run->cluster_id), "%s", r->id);
	run->requeue = w->spec && w->spec->retry_count > 0;
}

static int exec_fake_cluster_submit(struct executor *ex, const struct exec_start *w, size_t n,
				    bool together, struct exec_run *runs, char *why, size_t why_len)
{
	struct exec_fake_submission *sub;
	char id[32];
	int ret = 0;

	(void)ex;
	why[0] = '\0';
	pthread_mutex_lock(&fc.lock);
	exec_fake_cluster_count(EXEC_FAKE_CLUSTER_SUBMIT);
	if (fc.fail_err) {
		ret = fc.fail_err;
		snprintf(why, why_len, "%s", fc.fail_why);
		fc.fail_err = 0;
	} else if (fc.n_recs + n > FC_MAX_RECS || fc.n_subs == FC_MAX_RECS) {
		ret = -ENOSPC;
		snprintf(why, why_len, "the fake cluster is full");
	}
	if (ret < 0) {
		pthread_mutex_unlock(&fc.lock);
		return ret;
	}
	sub = &fc.subs[fc.n_subs++];
	*sub = (struct exec_fake_submission){ .n = n, .together = together };
	snprintf(sub->job, sizeof(sub->job), "%s", w[0].job);
	snprintf(id, sizeof(id), "F%u", fc.n_subs);
	snprintf(sub->id, sizeof(sub->id), "%s", id);
	for (size_t i = 0; i < n; i++) {
		if (i < EXEC_FAKE_CLUSTER_MAX_GROUP) {
			sub->workers[i] = w[i].worker;
			sub->attempts[i] = w[i].attempt;
		}
		exec_fake_cluster_record(&w[i], id, !together && n > 1, &runs[i]);
	}
	pthread_mutex_unlock(&fc.lock);
	return 0;
}

static int exec_fake_cluster_start(struct executor *ex, const struct exec_start *w,
				   struct exec_run *run)
{
	char why[256];

	pthread_mutex_lock(&fc.lock);
	exec_fake_cluster_count(EXEC_FAKE_CLUSTER_START);
	pthread_mutex_unlock(&fc.lock);
	return exec_fake_cluster_submit(ex, w, 1, false, run, why, sizeof(why));
}

/* Every record's seen state becomes what the test last said. */
static int exec_fake_cluster_refresh(struct executor *ex)
{
	(void)ex;
	pthread_mutex_lock(&fc.lock);
	exec_fake_cluster_count(EXEC_FAKE_CLUSTER_REFRESH);
	for (unsigned int i = 0; i < fc.n_recs; i++) {
		fc.recs[i].seen = fc.recs[i].want;
		fc.recs[i].refreshed = true;
	}
	pthread_mutex_unlock(&fc.lock);
	return EXEC_FAKE_CLUSTER_INTERVAL_MS;
}

/* What poll says of @r, from the last refresh (lock held). */
static int exec_fake_cluster_answer(struct exec_fake_cluster_rec *r, struct exec_run *run,
				    struct exec_result *res)
{
	if (!r->refreshed)
		return EXEC_PENDING;	/* no look at the cluster since: no news */
	if (r->seen.restarts > run->restarts) {
		run->restarts = r->seen.restarts;
		snprintf(res->why, sizeof(res->why), "the fake cluster requeued %s: %s", r->id,
			 r->seen.why);
		return EXEC_REQUEUED;
	}
	switch (r->seen.state) {
	case FC_QUEUED:
		snprintf(res->why, sizeof(res->why), "%s", r->seen.why[0] ? r->seen.why : "waiting");
		return EXEC_PENDING;
	case FC_RUNNING:
		return 0;
	case FC_ENDED:
		break;
	}
	*res = r->seen.end;
	r->gone = true;
	return 1;
}

static int exec_fake_cluster_poll(struct executor *ex, struct exec_run *run,
				  struct exec_result *res)
{
	struct exec_fake_cluster_rec *r;
	int ret;

	(void)ex;
	*res = (struct exec_result){ .how = EXEC_LOST, .upload = -1 };
	pthread_mutex_lock(&fc.lock);
	exec_fake_cluster_count(EXEC_FAKE_CLUSTER_POLL);
	r = exec_fake_cluster_by_pid(run->pid);
	ret = r && !r->gone ? exec_fake_cluster_answer(r, run, res) : -ENOENT;
	pthread_mutex_unlock(&fc.lock);
	return ret;
}

static int exec_fake_cluster_signal(struct executor *ex, struct exec_run *run, int sig)
{
	struct exec_result end = { .how = EXEC_SIGNALED, .code = sig, .upload = -1 };
	struct exec_fake_cluster_rec *r;

	(void)ex;
	pthread_mutex_lock(&fc.lock);
	exec_fake_cluster_count(EXEC_FAKE_CLUSTER_SIGNAL);
	r = exec_fake_cluster_by_pid(run->pid);
	if (r && r->n_signals < FC_MAX_SIGNALS)
		r->signals[r->n_signals++] = sig;
	if (r && (sig == SIGTERM || sig == SIGKILL) && r->want.state != FC_ENDED)
		exec_fake_cluster_to_ended(&r->want, &end);
	pthread_mutex_unlock(&fc.lock);
	return r ? 0 : -ESRCH;
}

/* As Slurm's: the worker is tracked again by its id; the next refresh says where it stands. */
static int exec_fake_cluster_adopt(struct executor *ex, struct exec_run *run,
				   struct exec_result *res)
{
	struct exec_fake_cluster_rec *r;

	(void)ex;
	(void)res;
	pthread_mutex_lock(&fc.lock);
	exec_fake_cluster_count(EXEC_FAKE_CLUSTER_ADOPT);
	run->pidfd = -1;
	r = exec_fake_cluster_by_pid(run->pid);
	if (r)
		r->refreshed = false;
	pthread_mutex_unlock(&fc.lock);
	return r && !r->gone && strcmp(r->id, run->cluster_id) == 0 ? 0 : -ESRCH;
}

static int exec_fake_cluster_fits(struct executor *ex, const struct spec *sp, size_t worker,
				  char *why, size_t why_len)
{
	long gpus = sp->workers[worker].res.gpu_count;
	int ret = 1;

	(void)ex;
	pthread_mutex_lock(&fc.lock);
	exec_fake_cluster_count(EXEC_FAKE_CLUSTER_FITS);
	if (fc.max_gpus >= 0 && gpus > fc.max_gpus) {
		snprintf(why, why_len, "never satisfiable on the fake cluster: %ld GPUs asked, "
			 "its largest node has %ld", gpus, fc.max_gpus);
		ret = -1;
	}
	pthread_mutex_unlock(&fc.lock);
	return ret;
}

const struct exec_ops exec_fake_cluster_ops = {
	.version = EXEC_OPS_VERSION,
	.name = "fake-cluster",
	.create = exec_fake_cluster_create,
	.destroy = exec_fake_cluster_destroy,
	.start = exec_fake_cluster_start,
	.signal = exec_fake_cluster_signal,
	.poll = exec_fake_cluster_poll,
	.adopt = exec_fake_cluster_adopt,
	.submit = exec_fake_cluster_submit,
	.refresh = exec_fake_cluster_refresh,
	.fits = exec_fake_cluster_fits,
};
