/*
 * exec_slurm.c - the `slurm` executor: hands workers to a Slurm cluster.
 *
 * Slurm is driven through its command-line tools only (sbatch, squeue,
 * scontrol, scancel, found in [slurm] bin_dir or on PATH), never libslurm,
 * whose C API changes with every release.
 *
 * submit() writes one bash batch script per submission (exec_slurm_script.c)
 * and runs `sbatch --parsable` as the job's owner with the script on its
 * standard input.  Independent workers of the same shape become one job
 * array whose task ids are the worker numbers; workers that must start
 * together become one allocation of N tasks started by srun.  Each
 * worker's run gets the cluster's id: "123_2" for array task 2, "123" for
 * a plain job or a whole gang.
 *
 * refresh() is the only place that asks Slurm where jobs stand: one
 * `squeue -r -t all -j ID,...` for every job in flight, at most once per
 * poll_interval, whatever the number of jobs; poll() answers from that
 * snapshot.  How a worker ended comes from the exit file its batch script
 * writes into the job's folder (the same "exited N / upload N" lines the
 * local executor writes); when there is none (the script was killed, or
 * the folder is not shared with the compute node), from Slurm's state.
 * Slurm forgets finished jobs after MinJobAge: mlfs keeps what it saw.
 *
 * The cluster's nodes (`scontrol -o show node`: CPUs, memory, tmp disk,
 * GPU gres and features) are read at the first fits() and again at most
 * every EXEC_SLURM_NODES_S seconds, to tell a request no node could ever
 * hold.
 *
 * signal() only queues its scancel: the scheduler calls it with its lock
 * held, and scancel is a round trip to slurmctld.  One thread sends the
 * queue in order, as few scancel calls as it can (consecutive requests of
 * the same kind share one), and destroy() sends what is left before it
 * returns.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "exec.h"
#include "exec_local_int.h"
#include "exec_slurm_int.h"
#include "log.h"
#include "spawn.h"
#include "spec.h"
#include "mono.h"

#define EXEC_SLURM_CMD_S	60	/* a Slurm command that takes longer is killed */
#define EXEC_SLURM_NODES_S	60	/* how long the node list is trusted */
#define EXEC_SLURM_OUT_MAX	(64 * 1024 * 1024)
#define EXEC_SLURM_KILL_IDS	128	/* job ids one scancel is given at most */

/* One Slurm job (or array task) in flight, as the last squeue saw it. */
struct exec_slurm_job {
	char id[64];			/* "123" or "123_4" */
	long long since_ns;		/* CLOCK_MONOTONIC when submitted or adopted */
	bool seen;			/* in the last snapshot */
	char state[32];
	char reason[96];
	unsigned int restarts;
	bool requeue;			/* submitted with --requeue */
	unsigned int refs;		/* runs watching it: a gang's workers share one job */
	long long stop_ns;		/* when mlfs last sent the batch shell USR2 (0: never) */
};

/* A scancel signal() queued: the id, and the signal for the batch shell ("" = cancel the job). */
struct exec_slurm_kill {
	struct exec_slurm_kill *next;
	char id[64];
	char signame[8];
};

struct exec_slurm {
	struct executor base;		/* first */
	const struct mlfs_config *cfg;
	pthread_mutex_t lock;
	pthread_cond_t kcond;		/* the queue below has work, or stopping */
	struct exec_slurm_kill *kq, **kq_tail;	/* guarded by lock */
	pthread_t killer;		/* sends the queue; started at the first signal() */
	bool killer_started, stopping;
	struct exec_slurm_job *jobs;	/* guarded by lock */
	size_t n_jobs, cap_jobs;
	long long snap_ns;		/* CLOCK_MONOTONIC of the last good snapshot; 0 = none */
	long long refresh_ns;		/* of the last try */
	struct exec_slurm_node *nodes;
	size_t n_nodes;
	long long nodes_ns;
	long long nodes_fail_ns;	/* when scontrol last failed: tried again a minute later */
};

static struct exec_slurm *exec_slurm_of(struct executor *ex)
{
	return (struct exec_slurm *)ex;
}

/* ---- running a Slurm command ---- */

/* The path of Slurm tool @tool: in bin_dir when set, else found on PATH. */
static void exec_slurm_tool(const struct exec_slurm *es, const char *tool, char *buf, size_t len)
{
	const char *dir = es->cfg ? es->cfg->slurm.bin_dir : NULL;

	if (dir && *dir)
		snprintf(buf, len, "%s/%s", dir, tool);
	else
		snprintf(buf, len, "%s", tool);
}

/*
 * The command line that runs tool @path with the arguments of @argv (from
 * argv[1]) as @uid/@gid when this process is root and @uid is another,
 * through setpriv(1); @ids holds the setpriv options.  Malloc'd; NULL on
 * ENOMEM.
 */
static char **exec_slurm_argv(const char *path, char **argv, uid_t uid, gid_t gid,
			      char ids[2][32])
{
	size_t n = 0, k = 0;
	char **av;

	while (argv[n])
		n++;
	av = calloc(n + 5, sizeof(*av));
	if (!av)
		return NULL;
	if (geteuid() == 0 && uid != 0) {
		snprintf(ids[0], sizeof(ids[0]), "--reuid=%u", (unsigned int)uid);
		snprintf(ids[1], sizeof(ids[1]), "--regid=%u", (unsigned int)gid);
		av[k++] = "setpriv";
		av[k++] = ids[0];
		av[k++] = ids[1];
		av[k++] = "--clear-groups";
	}
	av[k++] = (char *)path;
	memcpy(av + k, argv + 1, n * sizeof(*av));	/* with the NULL */
	return av;
}

/* Where a tool's stderr lines go: the last one that says something is kept. */
struct exec_slurm_err {
	char *buf;
	size_t len;
};

static void exec_slurm_err_line(void *arg, const char *line)
{
	struct exec_slurm_err *e = arg;
	size_t len = strlen(line);

	while (len && (line[len - 1] == ' ' || line[len - 1] == '\r'))
		len--;
	if (len)
		snprintf(e->buf, e->len, "%.*s", (int)len, line);
}

/*
 * Runs @argv (argv[0] a tool name) as @uid/@gid (when this process is root
 * and @uid is another), @input on its standard input, and collects its
 * standard output in *@out (malloc'd, NUL-terminated) and the last line of
 * its standard error in @err ("sbatch: error: Batch job submission failed:
 * ...").  Returns its exit status (0..255, 128 + N when killed by signal N),
 * or a negated errno when it could not run or ran past EXEC_SLURM_CMD_S.
 */
static int exec_slurm_cmd(struct exec_slurm *es, char **argv, uid_t uid, gid_t gid,
			  const char *input, size_t in_len, char **out, char *err, size_t err_len)
{
	struct exec_slurm_err e = { err, err_len };
	char path[4096], ids[2][32], **av;
	struct spawn_out res;
	int ret;

	err[0] = '\0';
	if (out)
		*out = NULL;
	exec_slurm_tool(es, argv[0], path, sizeof(path));
	av = exec_slurm_argv(path, argv, uid, gid, ids);
	if (!av)
		return -ENOMEM;
	ret = spawn_run(&(struct spawn){ .argv = av, .in = in_len ? input : NULL, .in_len = in_len,
					 .timeout_ms = EXEC_SLURM_CMD_S * 1000,
					 .out_max = out ? EXEC_SLURM_OUT_MAX : 0, .out_fd = -1,
					 .on_err_line = exec_slurm_err_line, .arg = &e },
			&res);
	free(av);
	if (ret < 0)
		return ret;	/* the caller says which tool could not run */
	if (res.timed_out)
		ret = -ETIMEDOUT;
	else
		ret = WIFEXITED(res.status) ? WEXITSTATUS(res.status) : 128 + WTERMSIG(res.status);
	if (out && ret >= 0) {
		*out = res.out;
		res.out = NULL;
	}
	spawn_out_free(&res);
	return ret;
}

/* ---- what Slurm is asked to track ---- */

static struct exec_slurm_job *exec_slurm_find(struct exec_slurm *es, const char *id)
{
	for (size_t i = 0; i < es->n_jobs; i++)
		if (strcmp(es->jobs[i].id, id) == 0)
			return &es->jobs[i];
	return NULL;
}

/* Tracks @id (lock held); NULL on ENOMEM. */
static struct exec_slurm_job *exec_slurm_track(struct exec_slurm *es, const char *id, bool requeue)
{
	struct exec_slurm_job *j = exec_slurm_find(es, id);

	if (j) {
		j->refs++;
		return j;
	}
	if (es->n_jobs == es->cap_jobs) {
		size_t cap = es->cap_jobs ? es->cap_jobs * 2 : 64;
		struct exec_slurm_job *nj = realloc(es->jobs, cap * sizeof(*nj));

		if (!nj)
			return NULL;
		es->jobs = nj;
		es->cap_jobs = cap;
	}
	j = &es->jobs[es->n_jobs++];
	*j = (struct exec_slurm_job){ .since_ns = mono_ns(), .requeue = requeue, .refs = 1 };
	snprintf(j->id, sizeof(j->id), "%s", id);
	return j;
}

static void exec_slurm_untrack(struct exec_slurm *es, const char *id)
{
	struct exec_slurm_job *j = exec_slurm_find(es, id);

	if (j && --j->refs == 0)
		*j = es->jobs[--es->n_jobs];
}

/* The job id Slurm knows an array task by, for squeue -j: "123" of "123_4". */
static void exec_slurm_base_id(const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%.*s", (int)strcspn(id, "_"), id);
}

static void exec_slurm_nodes(struct exec_slurm *es);

/*
 * Keeps the script Slurm job @id was submitted with as
 * JOB_DIR/workers/N/slurm-ID.sh, N its first worker (0600: it holds the
 * environment).
 */
static void exec_slurm_keep_script(const char *job_dir, unsigned int worker, const char *id,
				   const char *script)
{
	char path[4200];
	int fd;

	snprintf(path, sizeof(path), "%s/workers/%u/slurm-%s.sh", job_dir, worker, id);
	/* the folder is the job owner's: never through a link planted there */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write(fd, script, strlen(script)) < 0)
		log_warn("slurm: cannot keep %s: %s", path, strerror(errno));
	close(fd);
}

/* ---- submit ---- */

static int exec_slurm_submit(struct executor *ex, const struct exec_start *w, size_t n,
			     bool together, struct exec_run *runs, char *why, size_t why_len)
{
	struct exec_slurm *es = exec_slurm_of(ex);
	char *script = NULL, *out = NULL, err[1024], **argv = NULL, id[24];
	size_t argc = 0;
	int ret;

	const char *types[16];
	size_t n_types = 0;

	why[0] = '\0';
	pthread_mutex_lock(&es->lock);
	exec_slurm_nodes(es);
	if (w[0].spec)
		n_types = exec_slurm_gpu_types(es->nodes, es->n_nodes,
					       &w[0].spec->workers[w[0].worker - 1].res, types, 16);
	/* the types are the nodes' strings: the script is made before the lock is let go */
	bool ask_tmp = false;

	for (size_t i = 0; i < es->n_nodes; i++)
		ask_tmp |= es->nodes[i].tmp_mb > 0;
	ret = exec_slurm_script(es->cfg, w, n, together, types, n_types, ask_tmp, &script, &argv,
				&argc, why, why_len);
	pthread_mutex_unlock(&es->lock);
	if (ret < 0)
		goto out;
	ret = exec_slurm_cmd(es, argv, w[0].uid, w[0].gid, script, strlen(script), &out,
			     err, sizeof(err));
	if (ret != 0) {
		if (ret > 0) {
			snprintf(why, why_len, "sbatch refused it: %s", err[0] ? err : "no message");
			ret = -EINVAL;
		} else {
			snprintf(why, why_len, "sbatch could not run: %s", strerror(-ret));
		}
		goto out;
	}
	/* --parsable: "ID" or "ID;cluster" */
	snprintf(id, sizeof(id), "%.*s", (int)strcspn(out, ";\n"), out);
	if (!id[0] || strspn(id, "0123456789") != strlen(id)) {
		snprintf(why, why_len, "sbatch said \"%.60s\", not a job id", out);
		ret = -EPROTO;
		goto out;
	}
	exec_slurm_keep_script(w[0].job_dir, w[0].worker, id, script);
	pthread_mutex_lock(&es->lock);
	for (size_t i = 0; i < n; i++) {
		bool array = !together && n > 1;
		struct exec_run *r = &runs[i];

		*r = (struct exec_run){ .pidfd = -1 };
		snprintf(r->exit_path, sizeof(r->exit_path), "%s", w[i].exit_path);
		if (array)
			snprintf(r->cluster_id, sizeof(r->cluster_id), "%s_%u", id, w[i].worker);
		else
			snprintf(r->cluster_id, sizeof(r->cluster_id), "%s", id);
		r->requeue = w[0].spec && w[0].spec->retry_count > 0;	/* the script's --requeue */
		if (!exec_slurm_track(es, r->cluster_id, r->requeue))
			ret = -ENOMEM;
	}
	pthread_mutex_unlock(&es->lock);
out:
	for (size_t i = 0; argv && i < argc; i++)
		free(argv[i]);
	free(argv);
	free(script);
	free(out);
	return ret;
}

/* ---- refresh and poll ---- */

/* Reads one squeue line "ID|STATE|REASON|RESTARTS|" into the tracked job of that id. */
static void exec_slurm_line(struct exec_slurm *es, char *line)
{
	char *f[4];
	size_t n = 0;

	for (char *p = line; n < 4; n++) {
		f[n] = p;
		p = strchr(p, '|');
		if (!p)
			break;
		*p++ = '\0';
	}
	if (n < 3)
		return;
	struct exec_slurm_job *j = exec_slurm_find(es, f[0]);

	if (!j)
		return;
	j->seen = true;
	snprintf(j->state, sizeof(j->state), "%s", f[1]);
	snprintf(j->reason, sizeof(j->reason), "%s", f[2]);
	j->restarts = (unsigned int)strtoul(f[3], NULL, 10);
}

/* Whether @id is an entry of the comma-separated @list. */
static bool exec_slurm_listed(const char *list, const char *id)
{
	size_t len = strlen(id);

	for (const char *p = list; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
		if (strncmp(p, id, len) == 0 && (p[len] == ',' || p[len] == '\0'))
			return true;
	}
	return false;
}

/* Whether the last snapshot has @j given to its node (its batch shell may or may not run yet). */
static bool exec_slurm_running(const struct exec_slurm_job *j)
{
	return j->seen && (strcmp(j->state, "RUNNING") == 0 || strcmp(j->state, "CONFIGURING") == 0);
}

/* Queues @k for the killer thread, which is running.  Lock held. */
static void exec_slurm_queue(struct exec_slurm *es, struct exec_slurm_kill *k)
{
	*es->kq_tail = k;
	es->kq_tail = &k->next;
	pthread_cond_signal(&es->kcond);
}

/*
 * Sends USR2 again to each job mlfs stopped that Slurm still says is
 * RUNNING (or CONFIGURING) at snapshot @now.  Slurm calls a job RUNNING once it is given to
 * its node, before slurmd has its batch shell: a `scancel -b` then is
 * lost, and the job would run on to SCHED_KILL_GRACE and a cancel of it
 * all (seen: 4 cancels in 10 right after RUNNING took 10 s; slurmctld logged
 * the kill a second before slurmd launched the batch job).  The script's
 * trap acts on the first USR2 only, so the worker gets one TERM.  Not once
 * Slurm says the job is anything else.  Lock held.
 */
static void exec_slurm_stop_again(struct exec_slurm *es, long long now)
{
	for (size_t i = 0; i < es->n_jobs; i++) {
		struct exec_slurm_job *j = &es->jobs[i];
		struct exec_slurm_kill *k;

		if (j->seen && !exec_slurm_running(j))
			j->stop_ns = 0;		/* ended (or requeued: the scheduler's to stop again) */
		if (!j->stop_ns || j->stop_ns >= now || !exec_slurm_running(j) ||
		    !es->killer_started || es->stopping || !(k = calloc(1, sizeof(*k))))
			continue;
		snprintf(k->id, sizeof(k->id), "%s", j->id);
		snprintf(k->signame, sizeof(k->signame), "USR2");
		j->stop_ns = now;
		exec_slurm_queue(es, k);
	}
}

static int exec_slurm_refresh(struct executor *ex)
{
	struct exec_slurm *es = exec_slurm_of(ex);
	long long now = mono_ns();
	long long interval = (es->cfg ? es->cfg->slurm.poll_interval : 5) * 1000000000LL;
	char *ids = NULL, *out = NULL, err[512], base[64];
	size_t len = 0, cap = 0;
	long long started;
	int ret;

	if (interval <= 0)
		interval = 1000000000LL;
	pthread_mutex_lock(&es->lock);
	if (es->refresh_ns && now - es->refresh_ns < interval) {
		ret = (int)((es->refresh_ns + interval - now) / 1000000) + 1;
		pthread_mutex_unlock(&es->lock);
		return ret;
	}
	es->refresh_ns = now;
	for (size_t i = 0; i < es->n_jobs; i++) {
		exec_slurm_base_id(es->jobs[i].id, base, sizeof(base));
		if (exec_slurm_listed(ids, base))
			continue;	/* array tasks share it */
		if (len + strlen(base) + 2 > cap) {
			char *nb = realloc(ids, cap = (len + strlen(base) + 2) * 2);

			if (!nb)
				break;
			ids = nb;
		}
		len += (size_t)sprintf(ids + len, "%s%s", len ? "," : "", base);
	}
	pthread_mutex_unlock(&es->lock);
	if (!ids)
		return (int)(interval / 1000000);
	started = mono_ns();
	ret = exec_slurm_cmd(es, (char *[]){ "squeue", "-h", "-r", "-t", "all", "-j", ids, "-O",
					     "JobArrayID:|,State:|,Reason:|,RestartCnt:|", NULL },
			     0, 0, NULL, 0, &out, err, sizeof(err));
	pthread_mutex_lock(&es->lock);
	if (ret == 0 || (ret == 1 && strstr(err, "Invalid job id"))) {
		/* Every listed job of ours: unseen ones were forgotten by Slurm (or all were). */
		for (size_t i = 0; i < es->n_jobs; i++)
			es->jobs[i].seen = false;
		for (char *line = out, *next; line && *line; line = next) {
			next = strchr(line, '\n');
			if (next)
				*next++ = '\0';
			exec_slurm_line(es, line);
		}
		es->snap_ns = started;
		exec_slurm_stop_again(es, started);
	} else {
		log_warn("slurm: squeue failed (%s): job states not updated", ret < 0 ? strerror(-ret) : err);
	}
	pthread_mutex_unlock(&es->lock);
	free(out);
	free(ids);
	return (int)(interval / 1000000);
}

/* Slurm's states that mean the job ended (squeue -t all). */
static bool exec_slurm_terminal(const char *st)
{
	static const char *const ended[] = {
		"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
		"BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT", NULL,
	};

	for (const char *const *e = ended; *e; e++)
		if (strcmp(st, *e) == 0)
			return true;
	return false;
}

/* Slurm's pending reasons in words; @reason as Slurm prints it. */
const char *exec_slurm_reason_words(const char *reason)
{
	static const struct {
		const char *code, *words;
	} table[] = {
		{ "Resources", "waiting for resources" },
		{ "Priority", "waiting behind jobs of higher priority" },
		{ "Dependency", "waiting for a job it depends on" },
		{ "BeginTime", "waiting for its start time" },
		{ "JobHeldUser", "held by its user" },
		{ "JobHeldAdmin", "held by an administrator" },
		{ "PartitionDown", "its partition is down" },
		{ "PartitionInactive", "its partition is inactive" },
		{ "PartitionNodeLimit", "it asks for more nodes than its partition allows" },
		{ "PartitionTimeLimit", "its time limit is over its partition's" },
		{ "ReqNodeNotAvail", "the nodes it needs are not available" },
		{ "NodeDown", "a node it needs is down" },
		{ "QOSMaxJobsPerUserLimit", "its user runs as many jobs as the QOS allows" },
		{ "AssocGrpGRES", "its account's GPU limit is reached" },
		{ "BadConstraints", "no node can satisfy its constraints" },
		{ "None", "waiting to be scheduled" },
		{ NULL, NULL },
	};

	for (size_t i = 0; table[i].code; i++)
		if (strcmp(reason, table[i].code) == 0)
			return table[i].words;
	return "waiting";
}

/*
 * How a worker ended when its exit file does not say: from Slurm's last
 * state (@st, "" when Slurm had already forgotten it).
 */
static void exec_slurm_end_from_state(const char *id, const char *st, struct exec_result *res)
{
	res->how = EXEC_LOST;
	res->code = 0;
	if (strcmp(st, "CANCELLED") == 0) {
		res->how = EXEC_SIGNALED;
		res->code = SIGTERM;
		snprintf(res->why, sizeof(res->why), "Slurm job %s was cancelled", id);
	} else if (strcmp(st, "TIMEOUT") == 0) {
		res->how = EXEC_SIGNALED;
		res->code = SIGTERM;
		snprintf(res->why, sizeof(res->why), "Slurm job %s reached its time limit", id);
	} else if (strcmp(st, "OUT_OF_MEMORY") == 0) {
		res->how = EXEC_OOM;
		res->code = SIGKILL;
	} else if (*st) {
		snprintf(res->why, sizeof(res->why), "Slurm job %s ended %s without an exit status "
			 "from its batch script (see its log)", id, st);
	} else {
		snprintf(res->why, sizeof(res->why), "Slurm job %s ended while mlfs was not watching "
			 "and its batch script left no exit status", id);
	}
}

/* Moves the exit path "…/exit.A" on by @d attempts (a requeued run writes exit.A+d). */
static void exec_slurm_next_exit(struct exec_run *run, unsigned int d)
{
	char *dot = strrchr(run->exit_path, '.');
	unsigned long a;

	if (!dot)
		return;
	a = strtoul(dot + 1, NULL, 10);
	snprintf(dot + 1, sizeof(run->exit_path) - (size_t)(dot + 1 - run->exit_path), "%lu", a + d);
}

static int exec_slurm_poll(struct executor *ex, struct exec_run *run, struct exec_result *res)
{
	struct exec_slurm *es = exec_slurm_of(ex);
	struct exec_slurm_job *j;
	char state[32] = "", reason[96] = "";
	bool seen = false, known, requeue = false;
	unsigned int restarts = 0;
	long long snap = 0;

	*res = (struct exec_result){ .how = EXEC_LOST, .upload = -1 };
	pthread_mutex_lock(&es->lock);
	j = exec_slurm_find(es, run->cluster_id);
	if (!j) {
		pthread_mutex_unlock(&es->lock);
		return -ENOENT;
	}
	/* a snapshot taken before the job was submitted says nothing of it */
	known = es->snap_ns && es->snap_ns >= j->since_ns;
	if (known) {
		seen = j->seen;
		snprintf(state, sizeof(state), "%s", j->state);
		snprintf(reason, sizeof(reason), "%s", j->reason);
		restarts = j->restarts;
		requeue = j->requeue;
		snap = es->snap_ns;
	}
	pthread_mutex_unlock(&es->lock);
	if (!known)
		return EXEC_PENDING;
	if (seen && restarts > run->restarts) {
		exec_slurm_next_exit(run, restarts - run->restarts);
		run->restarts = restarts;
		snprintf(res->why, sizeof(res->why), "Slurm requeued job %s (preempted, or its node "
			 "failed): restart %u", run->cluster_id, restarts);
		return EXEC_REQUEUED;
	}
	if (seen && (strcmp(state, "PENDING") == 0 || strcmp(state, "REQUEUED") == 0 ||
		     strcmp(state, "REQUEUE_HOLD") == 0 || strcmp(state, "REQUEUE_FED") == 0 ||
		     (strcmp(state, "PREEMPTED") == 0 && requeue))) {
		snprintf(res->why, sizeof(res->why), "Slurm: %s (%s)", exec_slurm_reason_words(reason),
			 reason);
		return EXEC_PENDING;
	}
	if (seen && !exec_slurm_terminal(state) && strcmp(state, "PREEMPTED") != 0) {
		/*
		 * The script writes the exit file last: a gang's task may end
		 * before the job.  Looked for once a snapshot, not at every pass
		 * of the scheduler (each submission makes one): on a shared
		 * state_dir that is an NFS lookup per running job.
		 */
		if (run->exit_looked_ns == snap)
			return 0;
		run->exit_looked_ns = snap;
		if (!exec_local_read_exit(run->exit_path, res))
			return 0;
	} else if (!exec_local_read_exit(run->exit_path, res)) {
		exec_slurm_end_from_state(run->cluster_id, seen ? state : "", res);
	}
	pthread_mutex_lock(&es->lock);
	exec_slurm_untrack(es, run->cluster_id);
	pthread_mutex_unlock(&es->lock);
	return 1;
}

/* Sends @n queued requests of one kind, from @k on, in one scancel. */
static void exec_slurm_scancel(struct exec_slurm *es, const struct exec_slurm_kill *k, size_t n)
{
	char *argv[EXEC_SLURM_KILL_IDS + 6], err[512], signame[8];
	size_t argc = 0;
	int ret;

	snprintf(signame, sizeof(signame), "%s", k->signame);
	argv[argc++] = "scancel";
	if (*signame) {
		argv[argc++] = "-b";
		argv[argc++] = "-s";
		argv[argc++] = signame;
	}
	for (size_t i = 0; i < n; i++, k = k->next)
		argv[argc++] = (char *)k->id;
	argv[argc] = NULL;
	ret = exec_slurm_cmd(es, argv, 0, 0, NULL, 0, NULL, err, sizeof(err));
	if (ret != 0)
		log_warn("slurm: scancel%s%s %s%s: %s", *signame ? " -b -s " : "", signame, argv[argc - n],
			 n > 1 ? " and others" : "", ret < 0 ? strerror(-ret) : err);
}

/* The thread that sends what signal() queued, in order, until stopping and all is sent. */
static void *exec_slurm_killer(void *arg)
{
	struct exec_slurm *es = arg;

	pthread_mutex_lock(&es->lock);
	for (;;) {
		struct exec_slurm_kill *batch, *k;

		while (!es->kq && !es->stopping)
			pthread_cond_wait(&es->kcond, &es->lock);
		if (!es->kq)
			break;
		batch = es->kq;
		es->kq = NULL;
		es->kq_tail = &es->kq;
		pthread_mutex_unlock(&es->lock);
		while ((k = batch)) {
			const struct exec_slurm_kill *e = k;
			size_t n = 1;

			while (n < EXEC_SLURM_KILL_IDS && e->next && strcmp(e->next->signame, k->signame) == 0) {
				e = e->next;
				n++;
			}
			exec_slurm_scancel(es, k, n);
			batch = e->next;
			for (size_t i = 0; i < n; i++) {
				struct exec_slurm_kill *next = k->next;

				free(k);
				k = next;
			}
		}
		pthread_mutex_lock(&es->lock);
	}
	pthread_mutex_unlock(&es->lock);
	return NULL;
}

/*
 * TERM goes to the batch shell alone, as USR2 (scancel -b -s USR2): its
 * trap stops the command and still unmounts and uploads the view.  KILL,
 * or any signal to a job still pending, cancels the whole job.  Queued for
 * the killer thread (see the top of this file); sent here, in this thread,
 * only when that thread cannot be started.
 */
static int exec_slurm_signal(struct executor *ex, struct exec_run *run, int sig)
{
	struct exec_slurm *es = exec_slurm_of(ex);
	struct exec_slurm_kill *k = calloc(1, sizeof(*k));
	struct exec_slurm_job *j;
	bool running, queued = false;

	if (!k)
		return -ENOMEM;
	snprintf(k->id, sizeof(k->id), "%s", run->cluster_id);
	pthread_mutex_lock(&es->lock);
	j = exec_slurm_find(es, run->cluster_id);
	running = j && exec_slurm_running(j);
	/* the script tells mlfs's stops (USR2) from Slurm's own (TERM) */
	if (running && sig != SIGKILL)
		snprintf(k->signame, sizeof(k->signame), "%s", sig == SIGTERM ? "USR2" : sig == SIGINT ? "INT" : "KILL");
	if (j)
		j->stop_ns = strcmp(k->signame, "USR2") == 0 ? mono_ns() : 0;
	if (!es->killer_started && !es->stopping &&
	    pthread_create(&es->killer, NULL, exec_slurm_killer, es) == 0)
		es->killer_started = true;
	if (es->killer_started && !es->stopping) {
		exec_slurm_queue(es, k);
		queued = true;
	}
	pthread_mutex_unlock(&es->lock);
	if (!queued) {
		exec_slurm_scancel(es, k, 1);
		free(k);
	}
	return 0;
}

/*
 * A new daemon takes over a worker by its Slurm id: the next refresh says
 * where it stands.  run->requeue says whether a PREEMPTED job is Slurm's to
 * run again or has ended.
 */
static int exec_slurm_adopt(struct executor *ex, struct exec_run *run, struct exec_result *res)
{
	struct exec_slurm *es = exec_slurm_of(ex);
	int ret = 0;

	(void)res;
	run->pidfd = -1;
	if (!run->cluster_id[0])
		return -EINVAL;
	pthread_mutex_lock(&es->lock);
	if (!exec_slurm_track(es, run->cluster_id, run->requeue))
		ret = -ENOMEM;
	pthread_mutex_unlock(&es->lock);
	return ret;
}

static int exec_slurm_start(struct executor *ex, const struct exec_start *w, struct exec_run *run)
{
	char why[512];
	int ret = exec_slurm_submit(ex, w, 1, false, run, why, sizeof(why));

	if (ret < 0)
		log_err("job %s: worker %u: %s", w->job, w->worker, why);
	return ret;
}

/* ---- the cluster's nodes ---- */

/* Reads `scontrol -o show node` at most every EXEC_SLURM_NODES_S seconds (lock held). */
static void exec_slurm_nodes(struct exec_slurm *es)
{
	char *out = NULL, err[512];
	struct exec_slurm_node *nodes = NULL;
	size_t n = 0;
	int ret;

	long long last = es->nodes_ns > es->nodes_fail_ns ? es->nodes_ns : es->nodes_fail_ns;

	if (last && mono_ns() - last < EXEC_SLURM_NODES_S * 1000000000LL)
		return;
	ret = exec_slurm_cmd(es, (char *[]){ "scontrol", "-o", "show", "node", NULL }, 0, 0, NULL, 0,
			     &out, err, sizeof(err));
	if (ret != 0) {
		log_warn("slurm: scontrol show node failed (%s)", ret < 0 ? strerror(-ret) : err);
		free(out);
		es->nodes_fail_ns = mono_ns();	/* not again before a while either */
		return;
	}
	if (exec_slurm_parse_nodes(out, &nodes, &n) == 0) {
		exec_slurm_nodes_free(es->nodes, es->n_nodes);
		es->nodes = nodes;
		es->n_nodes = n;
		es->nodes_ns = mono_ns();
	}
	free(out);
}

static int exec_slurm_fits(struct executor *ex, const struct spec *sp, size_t worker, char *why,
			   size_t why_len)
{
	struct exec_slurm *es = exec_slurm_of(ex);
	int ret;

	pthread_mutex_lock(&es->lock);
	exec_slurm_nodes(es);
	ret = es->nodes_ns ? exec_slurm_node_fit(es->nodes, es->n_nodes, &sp->workers[worker].res,
						 why, why_len) : 1;
	pthread_mutex_unlock(&es->lock);
	return ret;
}

/* ---- life ---- */

static int exec_slurm_create(struct executor **out, const struct mlfs_config *cfg)
{
	struct exec_slurm *es = calloc(1, sizeof(*es));

	if (!es)
		return -ENOMEM;
	es->base.ops = &exec_slurm_ops;
	es->cfg = cfg;
	pthread_mutex_init(&es->lock, NULL);
	pthread_cond_init(&es->kcond, NULL);
	es->kq_tail = &es->kq;
	*out = &es->base;
	return 0;
}

static void exec_slurm_destroy(struct executor *ex)
{
	struct exec_slurm *es = exec_slurm_of(ex);

	if (!es)
		return;
	pthread_mutex_lock(&es->lock);
	es->stopping = true;		/* the killer sends what is queued, then ends */
	pthread_cond_signal(&es->kcond);
	pthread_mutex_unlock(&es->lock);
	if (es->killer_started)
		pthread_join(es->killer, NULL);
	exec_slurm_nodes_free(es->nodes, es->n_nodes);
	free(es->jobs);
	pthread_cond_destroy(&es->kcond);
	pthread_mutex_destroy(&es->lock);
	free(es);
}

const struct exec_ops exec_slurm_ops = {
	.version = EXEC_OPS_VERSION,
	.name = "slurm",
	.create = exec_slurm_create,
	.destroy = exec_slurm_destroy,
	.start = exec_slurm_start,
	.signal = exec_slurm_signal,
	.poll = exec_slurm_poll,
	.adopt = exec_slurm_adopt,
	.submit = exec_slurm_submit,
	.refresh = exec_slurm_refresh,
	.fits = exec_slurm_fits,
};
