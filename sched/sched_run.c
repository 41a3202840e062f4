/*
 * sched_run.c - the scheduling pass: place, start, reap, time out, retry
 * (what a start needs is made in sched_launch.c).
 *
 * Runs on the scheduler's thread with sched->lock held (sched_run_cancel
 * also from a FUSE thread, under the same lock).  Jobs are looked at in
 * acceptance order; a worker that fits starts even when an earlier one
 * waits (backfill: a big job does not stall the small ones behind it, as
 * with Slurm's backfill), except for gang jobs, whose workers start all
 * together or not at all.  Starting a worker is a fork in the executor,
 * about a millisecond, so it is done here under the lock.
 *
 * A worker's attempt ends as exited N, signaled N, oom or lost.  Exit 0
 * succeeds; a run timeout or an OOM kill fails without retry (the same
 * limits would kill it again); any other end is retried while attempts
 * remain (retry_count, capped at SCHED_MAX_RETRIES), each attempt kept.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "sched_int.h"

static bool sched_worker_waiting(const struct sched_worker *w)
{
	return !w->starting && !w->running && (w->state == SCHED_QUEUED || w->state == SCHED_RETRYING);
}

/* Starts the waiting workers of @j that fit; the reason of the first that does not, in @why. */
/* Returns 1 when every waiting worker was placed, else the fit of the first that was not. */
static int sched_place_job(struct sched *s, struct sched_job *j, char *why, size_t len)
{
	why[0] = '\0';
	for (size_t i = 0; i < j->n_workers; i++) {
		struct sched_worker *w = &j->workers[i];
		int gpus[SCHED_MAX_GPUS], fit, ret;

		if (!sched_worker_waiting(w))
			continue;
		if (sched_cluster(s)) {
			/* the cluster places it: only whether it ever could */
			fit = exec_fits(s->ex, j->spec, i, why, len);
			if (fit <= 0)
				return fit;
			why[0] = '\0';
			w->n_gpus = 0;
		} else {
			fit = sched_node_fit(&s->node, &j->spec->workers[i].res, gpus, why, len);
			if (fit <= 0)
				return fit;
			w->n_gpus = (unsigned int)j->spec->workers[i].res.gpu_count;
		}
		memcpy(w->gpus, gpus, w->n_gpus * sizeof(int));
		ret = sched_launch_prepare(s, j, w);
		if (ret < 0) {
			w->state = SCHED_FAILED;
			sched_event(j, "worker %u: cannot start: %s", w->n, strerror(-ret));
			snprintf(why, len, "worker %u could not be started: %s", w->n, strerror(-ret));
		}
	}
	return 1;
}

/* -1 with @why when the whole gang can never be on this node at once, else 1. */
static int sched_gang_never(const struct sched *s, const struct sched_job *j, char *why, size_t len)
{
	long gpus = 0, cpus = 0;
	double mem = 0;

	for (size_t i = 0; i < j->n_workers; i++) {
		const struct spec_resources *res = &j->spec->workers[i].res;

		if (!sched_worker_waiting(&j->workers[i]))
			continue;
		gpus += res->gpu_count;
		cpus += res->cpu_count;
		mem += res->memory_gb > 0 ? res->memory_gb : 0;
	}
	if (gpus > (long)s->node.gpus)
		snprintf(why, len, "never satisfiable here: its %zu workers start together and need "
			 "%ld GPUs at once, node has %u", j->n_workers, gpus, s->node.gpus);
	else if (cpus > s->node.cpus)
		snprintf(why, len, "never satisfiable here: its %zu workers start together and need "
			 "%ld CPUs at once, node has %ld", j->n_workers, cpus, s->node.cpus);
	else if (s->node.memory_gb > 0 && mem > s->node.memory_gb)
		snprintf(why, len, "never satisfiable here: its %zu workers start together and need "
			 "%g GB at once, node has %.1f GB", j->n_workers, mem, s->node.memory_gb);
	else
		return 1;
	return -1;
}

/*
 * Gang jobs: every waiting worker must fit at once, checked by holding as
 * we go.  Returns 1, or the fit of the first worker that does not.
 */
static int sched_gang_fits(struct sched *s, struct sched_job *j, char *why, size_t len)
{
	int gpus[SCHED_MAX_GPUS][SCHED_MAX_GPUS];
	size_t held = 0;
	int ok = sched_gang_never(s, j, why, len);

	for (size_t i = 0; i < j->n_workers && ok > 0; i++) {
		const struct spec_resources *res = &j->spec->workers[i].res;

		if (!sched_worker_waiting(&j->workers[i]))
			continue;
		if (held == SCHED_MAX_GPUS)
			break;
		ok = sched_node_fit(&s->node, res, gpus[held], why, len);
		if (ok > 0)
			sched_node_hold(&s->node, res, gpus[held++], (unsigned int)res->gpu_count, "gang");
	}
	for (size_t i = 0, h = 0; i < j->n_workers && h < held; i++) {
		const struct spec_resources *res = &j->spec->workers[i].res;

		if (sched_worker_waiting(&j->workers[i]))
			sched_node_release(&s->node, res, gpus[h++], (unsigned int)res->gpu_count);
	}
	return ok;
}

static const char *sched_end_text(const struct exec_result *res, char *buf, size_t len)
{
	switch (res->how) {
	case EXEC_EXITED:
		snprintf(buf, len, "exited %d", res->code);
		break;
	case EXEC_SIGNALED:
		snprintf(buf, len, "signaled %d", res->code);
		break;
	case EXEC_OOM:
		snprintf(buf, len, "oom");
		break;
	case EXEC_LOST:
	default:
		snprintf(buf, len, "lost");
		break;
	}
	return buf;
}

static unsigned int sched_max_attempts(const struct sched_job *j)
{
	long r = j->spec->retry_count > SCHED_MAX_RETRIES ? SCHED_MAX_RETRIES : j->spec->retry_count;

	return 1 + (unsigned int)(r < 0 ? 0 : r);
}

/* The first line of workers/N/@name into @buf; false when it cannot be read. */
static bool sched_read_line(const struct sched_job *j, const struct sched_worker *w,
			    const char *name, char *buf, size_t len)
{
	char path[4200];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/workers/%u/%s", j->dir, w->n, name);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return true;
}

/* Records how an attempt of @w ended and decides what comes next. */
static void sched_worker_ended(struct sched *s, struct sched_job *j, struct sched_worker *w,
			       const struct exec_result *res)
{
	struct sched_attempt *att = &w->attempts[w->n_attempts - 1];

	if (!sched_cluster(s))
		sched_node_release(&s->node, &j->spec->workers[w->n - 1].res, w->gpus, w->n_gpus);
	s->res_gen++;
	w->running = false;
	w->pending = false;
	snprintf(w->end_why, sizeof(w->end_why), "%s", res->why);
	if (!att->started_ns)
		att->started_ns = att->ended_ns ? att->ended_ns : sched_now_ns();	/* ended before it ran */
	w->n_gpus = 0;
	att->ended_ns = sched_now_ns();
	sched_end_text(res, att->end, sizeof(att->end));
	w->exit_code = res->how == EXEC_EXITED ? res->code
		     : res->how == EXEC_SIGNALED ? 128 + res->code
		     : res->how == EXEC_OOM ? 128 + SIGKILL : -1;
	w->phase = SCHED_PHASE_NONE;
	if (!w->sources[0] && w->output_id[0])	/* a view that came and went between two polls */
		sched_read_line(j, w, "sources", w->sources, sizeof(w->sources));
	w->staging_in_failed = res->staging_in_failed;
	w->upload_failed = res->upload > 0;
	if (res->staging_in_failed)
		snprintf(att->end, sizeof(att->end), "staging-in failed");
	if (j->cancelled || (j->stopping && !(res->how == EXEC_EXITED && res->code == 0)))
		w->state = SCHED_CANCELLED;
	else if (w->upload_failed)
		w->state = SCHED_FAILED;	/* the work is done and kept: not run again */
	else if (res->how == EXEC_EXITED && res->code == 0)
		w->state = SCHED_SUCCEEDED;
	else if (j->spec->gang || w->timed_out || res->how == EXEC_OOM ||
		 w->n_attempts >= sched_max_attempts(j))	/* a gang retries whole: sched_job_final */
		w->state = SCHED_FAILED;
	else
		w->state = SCHED_RETRYING;
	if (res->upload >= 0)
		sched_event(j, "worker %u: output %s", w->n, res->upload == 0
			    ? "uploaded" : "upload failed; staged output kept for mlfs sync");
	sched_event(j, "worker %u: attempt %u %s%s", w->n, w->n_attempts, att->end,
		    w->state == SCHED_RETRYING ? "; retrying" :
		    res->how == EXEC_OOM ? "; killed for memory, not retried" :
		    w->timed_out ? "; run timeout, not retried" : "");
	sched_store_status(j);
}

/* The last non-empty line of workers/N/@file, "mlfs: " and "mlfs umount: " taken off. */
static const char *sched_last_line(const struct sched_job *j, const struct sched_worker *w,
				   const char *file, char *buf, size_t len)
{
	char path[4200], text[4096];
	ssize_t n = -1;
	int fd;

	snprintf(buf, len, "see workers/%u/%s", w->n, file);
	snprintf(path, sizeof(path), "%s/workers/%u/%s", j->dir, w->n, file);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0) {
		off_t end = lseek(fd, 0, SEEK_END);

		n = pread(fd, text, sizeof(text) - 1, end > (off_t)sizeof(text) - 1
			  ? end - (off_t)sizeof(text) + 1 : 0);
		close(fd);
	}
	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
		n--;
	if (n <= 0)
		return buf;
	text[n] = '\0';
	const char *line = strrchr(text, '\n') ? strrchr(text, '\n') + 1 : text;
	static const char *const prefixes[] = { "mlfs umount: ", "mlfs job: ", "mlfs: ", NULL };

	/*
	 * mlfs umount ends with where the output is kept, mlfs job with a line
	 * of its own after the cause: the line before says why.
	 */
	while ((strstr(line, "staged output kept") || strncmp(line, "mlfs job: ", 10) == 0) &&
	       line > text) {
		text[line - text - 1] = '\0';
		line = strrchr(text, '\n') ? strrchr(text, '\n') + 1 : text;
	}
	for (const char *const *p = prefixes; *p; p++)
		if (strncmp(line, *p, strlen(*p)) == 0)
			line += strlen(*p);
	n = (ssize_t)strlen(line);
	if ((size_t)n >= len)
		n = (ssize_t)len - 1;
	memmove(buf, line, (size_t)n);
	buf[n] = '\0';
	return buf;
}

/* Why a failed worker failed, for the job's reason. */
static void sched_fail_text(const struct sched_job *j, const struct sched_worker *w, char *buf,
			    size_t len)
{
	const char *end = w->n_attempts ? w->attempts[w->n_attempts - 1].end : "";

	char last[300];

	if (w->upload_failed)
		snprintf(buf, len, "output upload: worker %u: %s; staged output kept "
			 "(state_dir/outputs/%s), which mlfs sync uploads", w->n,
			 sched_last_line(j, w, "upload.log", last, sizeof(last)), w->output_id);
	else if (w->staging_in_failed && j->spec->workers[w->n - 1].image.ref &&
		 (strncmp(sched_last_line(j, w, "log", last, sizeof(last)), "cannot pull ", 12) == 0 ||
		  strncmp(last, "cannot prepare ", 15) == 0))
		/* "cannot pull IMAGE: why", "cannot prepare IMAGE: apt-get install: E: ..." */
		snprintf(buf, len, "staging in: worker %u: %s", w->n, last);
	else if (w->staging_in_failed)
		snprintf(buf, len, "staging in: worker %u: its view could not be mounted: %s", w->n,
			 sched_last_line(j, w, "log", last, sizeof(last)));
	else if (w->timed_out)
		snprintf(buf, len, "worker %u ran longer than run_timeout_seconds (%ld s) and was stopped",
			 w->n, j->spec->run_timeout);
	else if (strcmp(end, "oom") == 0)
		snprintf(buf, len, "worker %u was killed for using more than its %g GB of memory (oom)",
			 w->n, j->spec->workers[w->n - 1].res.memory_gb);
	else if (w->n_attempts == 0 && w->end_why[0])
		snprintf(buf, len, "worker %u could not be submitted: %s", w->n, w->end_why);
	else if (w->end_why[0])
		snprintf(buf, len, "worker %u %s after %u attempt(s): %s", w->n, end, w->n_attempts,
			 w->end_why);
	else if (strcmp(end, "lost") == 0)
		snprintf(buf, len, "worker %u was lost: it ended while mlfs was not watching, "
			 "with no exit status", w->n);
	else if (w->n_attempts == 0)
		snprintf(buf, len, "worker %u could not be started", w->n);
	else
		snprintf(buf, len, "worker %u %s after %u attempt(s)", w->n, end, w->n_attempts);
}

/*
 * Why @role's @failed tasks failed the job, in its format's words: OpenPAI
 * counts them against minFailedTaskCount; a Kibernetika task fails at its
 * first failed replica (min_failed 1), which the reason names.
 */
static void sched_role_fail_text(const struct sched_job *j, const struct spec_role *role,
				 size_t failed, char *buf, size_t len)
{
	char first[400] = "";

	if (j->spec->format != SPEC_KIBERNETIKA) {
		snprintf(buf, len, "task role %s: %zu task(s) failed, minFailedTaskCount is %ld",
			 role->name, failed, role->min_failed);
		return;
	}
	for (size_t i = role->first; i < role->first + role->n && i < j->n_workers; i++)
		if (j->workers[i].state == SCHED_FAILED) {
			sched_fail_text(j, &j->workers[i], first, sizeof(first));
			break;
		}
	snprintf(buf, len, "resource %s: %s; a task fails at its first failed replica",
		 role->name, first);
}

/*
 * OpenPAI's end rules for a job with roles, which Kibernetika's follows
 * with min_failed 1: minFailedTaskCount failed tasks
 * of a role fail the job, minSucceededTaskCount succeeded ones succeed it,
 * and either stops the tasks still running.  Returns true when decided now.
 */
static bool sched_role_verdict(struct sched_job *j)
{
	char why[512];

	for (size_t r = 0; r < j->spec->n_roles && !j->stopping; r++) {
		const struct spec_role *role = &j->spec->roles[r];
		size_t failed = 0, ok = 0;

		for (size_t i = role->first; i < role->first + role->n && i < j->n_workers; i++) {
			failed += j->workers[i].state == SCHED_FAILED;
			ok += j->workers[i].state == SCHED_SUCCEEDED;
		}
		if (role->min_failed >= 1 && failed >= (size_t)role->min_failed) {
			j->verdict = SCHED_FAILED;
			sched_role_fail_text(j, role, failed, why, sizeof(why));
		} else if (role->min_succeeded >= 1 && ok >= (size_t)role->min_succeeded) {
			j->verdict = SCHED_SUCCEEDED;
			snprintf(why, sizeof(why), "task role %s: %zu task(s) succeeded, "
				 "minSucceededTaskCount is %ld", role->name, ok, role->min_succeeded);
		} else {
			continue;
		}
		free(j->verdict_reason);
		j->verdict_reason = strdup(why);
		j->stopping = true;
	}
	return j->stopping;
}

/* Stops what still runs or waits of a job whose end is decided. */
static void sched_stop_rest(struct sched *s, struct sched_job *j)
{
	long long now = sched_mono_ns();

	sched_event(j, "%s; stopping the other tasks", j->verdict_reason ? j->verdict_reason : "");
	for (size_t i = 0; i < j->n_workers; i++) {
		struct sched_worker *w = &j->workers[i];

		if (sched_worker_waiting(w)) {
			w->state = SCHED_CANCELLED;
		} else if (w->running && !w->term_sent) {
			exec_signal(s->ex, &w->run, SIGTERM);
			w->term_sent = true;
			w->kill_at_ns = now + SCHED_KILL_GRACE * 1000000000LL;
		}
	}
}

/*
 * A gang job that failed starts again whole, all its workers at once, while
 * retry_count allows (OpenPAI's retryCount, Kibernetika's maxRestartCount
 * are job retries), unless a worker was killed for memory or time, which the
 * same limits would do again.  Each worker's attempts are all kept.
 */
static bool sched_gang_retry(struct sched *s, struct sched_job *j, const char *why)
{
	for (size_t i = 0; i < j->n_workers; i++) {
		const struct sched_worker *w = &j->workers[i];
		const char *end = w->n_attempts ? w->attempts[w->n_attempts - 1].end : "";

		if (w->timed_out || strcmp(end, "oom") == 0 || w->upload_failed)
			return false;
	}
	if (!j->spec->gang || j->cancelled || j->job_attempt + 1 >= sched_max_attempts(j))
		return false;
	j->job_attempt++;
	for (size_t i = 0; i < j->n_workers; i++)
		j->workers[i].state = SCHED_RETRYING;
	j->stopping = false;
	j->never = false;
	j->fit_gen = 0;
	sched_set_state(s, j, SCHED_RETRYING, "job attempt %u of %u, after: %s", j->job_attempt + 1,
			sched_max_attempts(j), why);
	return true;
}

/*
 * The end rule of a job whose workers all ended with no verdict taken early
 * (sched_role_verdict): a job without roles (native, GPULab) fails when any
 * worker failed; a job with roles (OpenPAI, Kibernetika) whose min counts
 * did not end it fails only when every worker failed, whatever its counts
 * left out.  True when the job fails, with the reason in @why.
 */
static bool sched_end_failed(const struct sched_job *j, size_t failed,
			     const struct sched_worker *first_failed, char *why, size_t len)
{
	char first[400];

	if (!failed || (j->spec->n_roles && failed < j->n_workers))
		return false;
	if (!j->spec->n_roles) {
		sched_fail_text(j, first_failed, why, len);
		return true;
	}
	sched_fail_text(j, first_failed, first, sizeof(first));
	snprintf(why, len, "all %zu task(s) failed; the first: %s", failed, first);
	return true;
}

/* The final state of a job whose workers all ended. */
static void sched_job_final(struct sched *s, struct sched_job *j, size_t failed,
			    const struct sched_worker *first_failed)
{
	char why[512];
	bool fails;

	sched_job_ports_release(s, j);
	if (j->stopping && j->verdict == SCHED_FAILED && sched_gang_retry(s, j, j->verdict_reason))
		return;
	fails = !j->stopping && !j->cancelled &&
		sched_end_failed(j, failed, first_failed, why, sizeof(why));
	if (fails && sched_gang_retry(s, j, why))
		return;
	if (j->cancelled) {
		sched_set_state(s, j, SCHED_CANCELLED, "cancelled through ctl");
	} else if (j->stopping) {
		sched_set_state(s, j, j->verdict, "%s", j->verdict_reason ? j->verdict_reason : "");
	} else if (fails) {
		sched_set_state(s, j, SCHED_FAILED, "%s", why);
	} else if (failed) {
		sched_set_state(s, j, SCHED_SUCCEEDED, "all %zu task(s) completed; %zu failed, "
				"which no minFailedTaskCount counts", j->n_workers, failed);
	} else if (j->workers[0].output_id[0] && j->spec->data.output.type) {
		sched_set_state(s, j, SCHED_SUCCEEDED, "all %zu worker(s) exited 0; output safe at %s %s",
				j->n_workers, j->spec->data.output.type, j->spec->data.output.path);
	} else {
		sched_set_state(s, j, SCHED_SUCCEEDED, "all %zu worker(s) exited 0", j->n_workers);
	}
}

/* A worker of @j whose image is being pulled (its pull file says so), or NULL. */
static const struct sched_worker *sched_pulling(const struct sched_job *j)
{
	for (size_t i = 0; i < j->n_workers; i++) {
		const struct sched_worker *w = &j->workers[i];

		if (w->running && w->phase == SCHED_PHASE_STAGING_IN && w->pull[0] &&
		    strcmp(w->pull, "on the node") != 0 && strncmp(w->pull, "pulled", 6) != 0)
			return w;
	}
	return NULL;
}

void sched_run_update(struct sched *s, struct sched_job *j)
{
	const struct sched_worker *pulling;
	size_t running = 0, waiting = 0, failed = 0, done = 0, retrying = 0, in = 0, out = 0;
	const struct sched_worker *first_failed = NULL;

	if (j->spec->n_roles && !j->stopping && !j->cancelled && sched_role_verdict(j))
		sched_stop_rest(s, j);
	size_t pending = 0;
	const struct sched_worker *first_pending = NULL;

	for (size_t i = 0; i < j->n_workers; i++) {
		const struct sched_worker *w = &j->workers[i];

		if ((w->running && w->pending) || (w->starting && sched_cluster(s))) {
			pending++;
			if (!first_pending)
				first_pending = w;
			continue;	/* in the cluster's queue: waiting, as far as the job goes */
		}
		running += w->running || w->starting;
		in += (w->running && w->phase == SCHED_PHASE_STAGING_IN) ||
		      (w->starting && sched_has_view(s, j));
		out += w->running && w->phase == SCHED_PHASE_STAGING_OUT;
		waiting += sched_worker_waiting(w);
		retrying += w->state == SCHED_RETRYING;
		done += sched_state_final(w->state);
		if (w->state == SCHED_FAILED && !first_failed)
			first_failed = w;
		failed += w->state == SCHED_FAILED;
	}
	if (done < j->n_workers) {
		if (pending && !running && !j->cancelled && !j->stopping) {
			sched_set_state(s, j, retrying || first_pending->state == SCHED_RETRYING
					? SCHED_RETRYING : SCHED_QUEUED, "%s", first_pending->wait_why[0]
					? first_pending->wait_why : first_pending->starting
					? "being submitted to Slurm" : "submitted to Slurm");
			return;
		}
		if (running && in == running && !j->cancelled && (pulling = sched_pulling(j)))
			sched_set_state(s, j, SCHED_STAGING_IN, "pulling %s: %s",
					j->spec->workers[pulling->n - 1].image.ref, pulling->pull);
		else if (running && in == running && !j->cancelled)
			sched_set_state(s, j, SCHED_STAGING_IN, "%s %zu worker(s): fetching inputs",
					sched_has_view(s, j) ? "mounting the view of" : "staging in", in);
		else if (running && out == running && !j->cancelled)
			sched_set_state(s, j, SCHED_STAGING_OUT, "uploading the output of %zu worker(s) "
					"to %s %s", out, j->spec->data.output.type ? j->spec->data.output.type
					: "staging", j->spec->data.output.path ? j->spec->data.output.path : "");
		else if (running)
			sched_set_state(s, j, SCHED_RUNNING, "%zu of %zu worker(s) running%s%s", running,
					j->n_workers, j->cancelled ? "; stopping them (cancelled)" :
					j->stopping ? "; stopping them: " : "",
					j->stopping && !j->cancelled && j->verdict_reason ? j->verdict_reason : "");
		else if (retrying && !waiting)
			sched_set_state(s, j, SCHED_RETRYING, "%s", j->reason ? j->reason : "");
		return;
	}
	sched_job_final(s, j, failed, first_failed);
}

#define SCHED_PHASE_POLL_NS 500000000LL	/* how often a view's phase file is read */

/* Reads workers/N/pull, the image pull's progress: true when it changed. */
static bool sched_read_pull(const struct sched_job *j, struct sched_worker *w)
{
	char buf[sizeof(w->pull)];

	if (!sched_read_line(j, w, "pull", buf, sizeof(buf)) || strcmp(buf, w->pull) == 0)
		return false;
	snprintf(w->pull, sizeof(w->pull), "%s", buf);
	return true;
}

/* Reads workers/N/phase: true when it changed since last read. */
static bool sched_read_phase(const struct sched_job *j, struct sched_worker *w)
{
	static const char *const words[] = {
		[SCHED_PHASE_STAGING_IN] = "staging_in", [SCHED_PHASE_RUNNING] = "running",
		[SCHED_PHASE_STAGING_OUT] = "staging_out",
	};
	enum sched_phase phase = w->phase;
	char buf[32];

	if (!sched_read_line(j, w, "phase", buf, sizeof(buf)))
		return false;
	for (size_t i = SCHED_PHASE_STAGING_IN; i <= SCHED_PHASE_STAGING_OUT; i++)
		if (strcmp(buf, words[i]) == 0)
			phase = (enum sched_phase)i;
	if (phase == w->phase)
		return false;
	w->phase = phase;
	return true;
}

void sched_rerun_output_id(char *id, size_t size, unsigned int restarts)
{
	/* the last ".rN" only: a job's name may hold ".r" itself */
	char *r = strrchr(id, '.');

	if (r && r[1] == 'r' && r[2] && strspn(r + 2, "0123456789") == strlen(r + 2))
		*r = '\0';
	snprintf(id + strlen(id), size - strlen(id), ".r%u", restarts);
}

/*
 * A cluster worker that waits in the cluster's queue (EXEC_PENDING), or was
 * put back there after it ran (EXEC_REQUEUED: preempted, or its node
 * failed), which counts as a new attempt, RETRYING, not as a failure.
 * Returns whether the job's state may have changed.
 */
static bool sched_cluster_wait(struct sched_job *j, struct sched_worker *w, int how,
			       const struct exec_result *res)
{
	if (how == EXEC_PENDING && !res->why[0])
		return false;	/* no look at the cluster yet (after a restart): no news */
	if (how == EXEC_REQUEUED) {
		struct sched_attempt *att = realloc(w->attempts, (w->n_attempts + 1) * sizeof(*att));

		if (att) {
			w->attempts = att;
			att[w->n_attempts - 1].ended_ns = sched_now_ns();
			if (!att[w->n_attempts - 1].started_ns)
				att[w->n_attempts - 1].started_ns = att[w->n_attempts - 1].ended_ns;
			snprintf(att[w->n_attempts - 1].end, sizeof(att->end), "requeued");
			att[w->n_attempts++] = (struct sched_attempt){ 0 };
		}
		if (w->output_id[0])
			sched_rerun_output_id(w->output_id, sizeof(w->output_id), w->run.restarts);
		w->pending = true;
		w->state = SCHED_RETRYING;
		w->phase = SCHED_PHASE_NONE;
		snprintf(w->wait_why, sizeof(w->wait_why), "%s", res->why);
		sched_event(j, "worker %u: %s; it waits to run again", w->n, res->why);
		return true;
	}
	if (w->pending && strcmp(w->wait_why, res->why) == 0)
		return false;
	if (!w->pending) {
		/* seen running, and now queued again: Slurm requeued it between two looks */
		w->state = SCHED_RETRYING;
		sched_event(j, "worker %u: back in Slurm's queue", w->n);
	}
	w->pending = true;
	snprintf(w->wait_why, sizeof(w->wait_why), "%s", res->why);
	return true;
}

/*
 * Reaps ended workers and enforces the run timeout and the kill deadline.
 * Returns whether a worker ended or a view's phase changed.
 */
static bool sched_watch_job(struct sched *s, struct sched_job *j, long long now, long long *next)
{
	bool ended = false;

	for (size_t i = 0; i < j->n_workers; i++) {
		struct sched_worker *w = &j->workers[i];
		/* a worker in a container: its phases and pull are read too (no view needed) */
		const char *image = j->spec->workers[i].image.ref && !sched_images_why(s) ?
				    j->spec->workers[i].image.ref : NULL;
		struct exec_result res;
		long long limit;
		int ret;

		if (!w->running)
			continue;
		ret = exec_poll(s->ex, &w->run, &res);
		if (ret < 0) {
			log_err("job %s: worker %u: cannot watch it: %s", j->name, w->n, strerror(-ret));
			res = (struct exec_result){ .how = EXEC_LOST, .upload = -1 };
		}
		if (ret == EXEC_PENDING || ret == EXEC_REQUEUED) {
			ended |= sched_cluster_wait(j, w, ret, &res);
			continue;
		}
		if (ret != 0) {
			sched_worker_ended(s, j, w, &res);
			ended = true;
			continue;
		}
		if (w->pending) {
			/* the cluster started it: its attempt begins now */
			w->pending = false;
			w->state = SCHED_RUNNING;
			w->attempts[w->n_attempts - 1].started_ns = sched_now_ns();
			sched_event(j, "worker %u: running on Slurm as job %s", w->n, w->run.cluster_id);
			ended = true;
		}
		if (w->output_id[0] || image) {
			if (sched_read_phase(j, w)) {
				/* the view wrote its sources' versions before it mounted */
				if (w->phase != SCHED_PHASE_STAGING_IN && !w->sources[0])
					sched_read_line(j, w, "sources", w->sources, sizeof(w->sources));
				sched_event(j, "worker %u: %s%s", w->n,
					    w->phase == SCHED_PHASE_RUNNING ? image ? "running in " :
					    "view mounted at /opt/ml; running"
					    : w->phase == SCHED_PHASE_STAGING_OUT ? "uploading its output"
					    : image ? "staging in its image and view" : "mounting its view",
					    w->phase == SCHED_PHASE_RUNNING && image ? image : "");
				ended = true;
			}
			if (image && w->phase == SCHED_PHASE_STAGING_IN && sched_read_pull(j, w)) {
				sched_event(j, "worker %u: image %s: %s", w->n, image, w->pull);
				ended = true;
			}
			if (!*next || now + SCHED_PHASE_POLL_NS < *next)
				*next = now + SCHED_PHASE_POLL_NS;
		}
		limit = j->spec->run_timeout > 0 && w->attempts[w->n_attempts - 1].started_ns ?
			w->attempts[w->n_attempts - 1].started_ns + j->spec->run_timeout * 1000000000LL : 0;
		if (limit && !w->term_sent && sched_now_ns() >= limit) {
			w->timed_out = true;
			sched_event(j, "worker %u: run timeout of %ld s reached; stopping it", w->n,
				    j->spec->run_timeout);
			exec_signal(s->ex, &w->run, SIGTERM);
			w->term_sent = true;
			w->kill_at_ns = now + SCHED_KILL_GRACE * 1000000000LL;
		} else if (limit && !w->term_sent) {
			long long left = limit - sched_now_ns();

			if (!*next || now + left < *next)
				*next = now + left;
		}
		if (w->term_sent && w->kill_at_ns && now >= w->kill_at_ns) {
			exec_signal(s->ex, &w->run, SIGKILL);
			w->kill_at_ns = 0;
		} else if (w->kill_at_ns && (!*next || w->kill_at_ns < *next)) {
			*next = w->kill_at_ns;
		}
	}
	return ended;
}

/* Fails a job whose workers never started within wait_timeout_seconds. */
static bool sched_wait_expired(struct sched *s, struct sched_job *j, long long now, long long *next)
{
	long long limit;

	if (j->spec->wait_timeout <= 0 || j->started_ns || j->stopping)
		return false;
	limit = j->accepted_mono_ns + j->spec->wait_timeout * 1000000000LL;
	if (now < limit) {
		if (!*next || limit < *next)
			*next = limit;
		return false;
	}
	size_t queued = 0;
	char why[768];

	snprintf(why, sizeof(why), "waited %ld s (wait_timeout_seconds) without starting; %s",
		 j->spec->wait_timeout, j->reason ? j->reason : "");
	for (size_t i = 0; i < j->n_workers; i++) {
		struct sched_worker *w = &j->workers[i];

		if (sched_worker_waiting(w)) {
			w->state = SCHED_FAILED;
		} else if (w->running && w->pending && !w->term_sent) {
			/* still in the cluster's queue: taken out of it */
			exec_signal(s->ex, &w->run, SIGKILL);
			w->term_sent = true;
			queued++;
		}
	}
	if (queued) {
		j->stopping = true;
		j->verdict = SCHED_FAILED;
		free(j->verdict_reason);
		j->verdict_reason = strdup(why);
		return true;
	}
	sched_set_state(s, j, SCHED_FAILED, "%s", why);
	return true;
}

/*
 * Places the waiting workers of @j.  A job is looked at again only once
 * something freed up since it last did not fit, never once it cannot fit
 * here at all, and at most SCHED_DEPTH jobs per pass (Slurm's queue depth
 * idea): behind a thousand waiting jobs, a worker's end costs a hundred fit
 * checks, not a thousand.
 */
static void sched_place(struct sched *s, struct sched_job *j, int *depth)
{
	char why[512];
	bool any_waiting = false;
	int fit = 1;

	for (size_t i = 0; i < j->n_workers; i++)
		any_waiting |= sched_worker_waiting(&j->workers[i]);
	if (!any_waiting || j->cancelled || j->never || j->fit_gen == s->res_gen || *depth <= 0)
		return;
	--*depth;
	why[0] = '\0';
	if (j->spec->gang && !sched_cluster(s))
		fit = sched_gang_fits(s, j, why, sizeof(why));
	if (j->spec->gang && sched_cluster(s)) {
		/* a gang goes to the cluster whole: every worker must be able to run there */
		for (size_t i = 0; i < j->n_workers && fit > 0; i++)
			if (sched_worker_waiting(&j->workers[i]))
				fit = exec_fits(s->ex, j->spec, i, why, sizeof(why));
		if (fit > 0)
			why[0] = '\0';
	}
	if (fit > 0)
		fit = sched_place_job(s, j, why, sizeof(why));
	j->never = fit < 0;
	sched_run_update(s, j);
	if (why[0])
		j->fit_gen = s->res_gen;
	if (why[0] && !sched_state_final(j->state)) {
		bool running = j->state == SCHED_RUNNING;
		enum sched_state st = running ? SCHED_RUNNING
				    : j->workers[0].state == SCHED_RETRYING ? SCHED_RETRYING : SCHED_QUEUED;

		if (running)
			sched_set_state(s, j, st, "%s; others %s", j->reason, why);
		else
			sched_set_state(s, j, st, "%s", why);
	}
}

#define SCHED_UPLOAD_CHECK_NS 5000000000LL	/* how often a failed upload is looked at */

/* Whether output @id finished its upload, as the caller's check says (sched_set_output_check). */
static bool sched_output_complete(const struct sched *s, const char *id)
{
	return s->output_done && s->output_done(s->output_done_arg, id);
}

/*
 * A job FAILED only because its output did not upload turns SUCCEEDED once
 * a later `mlfs sync` (or this mount's own) has delivered every output.
 */
static void sched_upload_check(struct sched *s, struct sched_job *j, long long now,
			       long long *next)
{
	size_t pending = 0;

	if (j->state != SCHED_FAILED || !j->reason || strncmp(j->reason, "output upload:", 14) != 0)
		return;
	if (now - j->upload_checked_ns < SCHED_UPLOAD_CHECK_NS) {
		if (!*next || j->upload_checked_ns + SCHED_UPLOAD_CHECK_NS < *next)
			*next = j->upload_checked_ns + SCHED_UPLOAD_CHECK_NS;
		return;
	}
	j->upload_checked_ns = now;
	for (size_t i = 0; i < j->n_workers; i++) {
		struct sched_worker *w = &j->workers[i];

		if (w->upload_failed && !sched_output_complete(s, w->output_id))
			pending++;
		if (strcmp(w->n_attempts ? w->attempts[w->n_attempts - 1].end : "", "exited 0") != 0)
			return;		/* failed for more than its upload */
	}
	if (pending) {
		if (!*next || now + SCHED_UPLOAD_CHECK_NS < *next)
			*next = now + SCHED_UPLOAD_CHECK_NS;
		return;
	}
	for (size_t i = 0; i < j->n_workers; i++) {
		if (j->workers[i].upload_failed) {
			j->workers[i].upload_failed = false;
			j->workers[i].state = SCHED_SUCCEEDED;
			sched_event(j, "worker %u: output delivered by a later sync", j->workers[i].n);
		}
	}
	sched_set_state(s, j, SCHED_SUCCEEDED, "all %zu worker(s) exited 0; output delivered to "
			"%s %s by a later sync", j->n_workers, j->spec->data.output.type,
			j->spec->data.output.path);
}

int sched_run_pass(struct sched *s)
{
	long long now = sched_mono_ns(), next = 0;
	int depth = SCHED_DEPTH;

	s->started_any = false;
	for (struct sched_job *j = s->jobs; j; j = j->next) {
		if (!j->visible)
			continue;
		if (!sched_state_final(j->state)) {
			/* Cheap for a job where nothing happened: no text is made. */
			if (sched_watch_job(s, j, now, &next))
				sched_run_update(s, j);
			if (!sched_wait_expired(s, j, now, &next))
				sched_place(s, j, &depth);
		}
		if (j->state == SCHED_FAILED)
			sched_upload_check(s, j, now, &next);
	}
	if (s->started_any || s->launches)
		return 0;	/* once more, to see the new workers' deadlines */
	if (!next)
		return -1;
	return next <= now ? 0 : (int)((next - now) / 1000000LL) + 1;
}

int sched_run_cancel(struct sched *s, struct sched_job *j)
{
	long long now = sched_mono_ns();

	j->cancelled = true;
	sched_event(j, "cancel requested");
	for (size_t i = 0; i < j->n_workers; i++) {
		struct sched_worker *w = &j->workers[i];

		if (sched_worker_waiting(w)) {
			w->state = SCHED_CANCELLED;
		} else if (w->running && !w->term_sent) {
			exec_signal(s->ex, &w->run, SIGTERM);
			w->term_sent = true;
			w->kill_at_ns = now + SCHED_KILL_GRACE * 1000000000LL;
		}
	}
	sched_run_update(s, j);
	return 0;
}

void sched_run_adopt(struct sched *s)
{
	pthread_mutex_lock(&s->lock);
	for (struct sched_job *j = s->jobs; j; j = j->next) {
		for (size_t i = 0; i < j->n_workers; i++) {
			struct sched_worker *w = &j->workers[i];
			const struct spec_resources *res = &j->spec->workers[i].res;
			struct exec_result r;
			char holder[128];
			int ret;

			if (!w->running)
				continue;
			w->run.pidfd = -1;
			w->run.requeue = j->spec->retry_count > 0;	/* not kept in the status file */
			snprintf(holder, sizeof(holder), "%s/%u", j->name, w->n);
			if (!sched_cluster(s))
				sched_node_hold(&s->node, res, w->gpus, w->n_gpus, holder);
			ret = exec_adopt(s->ex, &w->run, &r);
			if (ret == 0 && sched_cluster(s)) {
				w->pending = w->state != SCHED_RUNNING;
				sched_event(j, "worker %u: found again in Slurm (job %s) after a restart of mlfs",
					    w->n, w->run.cluster_id);
				continue;
			}
			if (ret == 0) {
				sched_event(j, "worker %u: found running again (pid %d) after a restart of mlfs",
					    w->n, (int)w->run.pid);
				continue;
			}
			if (ret < 0) {
				log_err("job %s: worker %u: cannot take it over: %s", j->name, w->n,
					strerror(-ret));
				r = (struct exec_result){ .how = EXEC_LOST, .upload = -1 };
			}
			sched_event(j, "worker %u: ended while mlfs was down", w->n);
			sched_worker_ended(s, j, w, &r);
		}
		if (!sched_state_final(j->state))
			sched_run_update(s, j);
	}
	pthread_mutex_unlock(&s->lock);
}
