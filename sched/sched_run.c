/*
 * sched_run.c - the scheduling pass: place, start, reap, time out, retry.
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

#define SCHED_ENV_MAX 256

struct sched_env {
	char *v[SCHED_ENV_MAX + 1];
	size_t n;
};

/* Sets NAME=VALUE, replacing an earlier NAME. */
static void sched_env_set(struct sched_env *e, const char *name, const char *value)
{
	size_t len = strlen(name);
	char *kv;

	if (asprintf(&kv, "%s=%s", name, value) < 0)
		return;
	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, len) == 0 && e->v[i][len] == '=') {
			free(e->v[i]);
			e->v[i] = kv;
			return;
		}
	if (e->n < SCHED_ENV_MAX)
		e->v[e->n++] = kv;
	else
		free(kv);
}

static void sched_env_setf(struct sched_env *e, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void sched_env_setf(struct sched_env *e, const char *name, const char *fmt, ...)
{
	char *value;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&value, fmt, ap) >= 0) {
		sched_env_set(e, name, value);
		free(value);
	}
	va_end(ap);
}

static void sched_env_free(struct sched_env *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->v[i]);
}

/* spec_env_fn for spec_runtime_env. */
static void sched_env_put(void *arg, const char *name, const char *value)
{
	sched_env_set(arg, name, value);
}

/* Sets the base variables; the owner's name goes to @user (for spec_runtime). */
static void sched_env_base(struct sched_env *e, uid_t uid, char *user, size_t len)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	sched_env_set(e, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	sched_env_set(e, "SHELL", "/bin/sh");
	sched_env_set(e, "LANG", "C.UTF-8");
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res) {
		sched_env_set(e, "HOME", pw.pw_dir);
		sched_env_set(e, "USER", pw.pw_name);
		sched_env_set(e, "LOGNAME", pw.pw_name);
		snprintf(user, len, "%s", pw.pw_name);
	} else {
		sched_env_set(e, "HOME", "/");
		snprintf(user, len, "%u", (unsigned int)uid);
	}
}

/* "0,1": the GPU indices of @w. */
static const char *sched_gpu_list(const struct sched_worker *w, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned int i = 0; i < w->n_gpus && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%d", i ? "," : "", w->gpus[i]);
	return buf;
}

/* The environment DESIGN §5 promises; mlfs's own variables win over the spec's. */
static void sched_env_build(struct sched_env *e, const struct sched_job *j,
			    const struct sched_worker *w, const char *ml)
{
	const struct spec_worker *sw = &j->spec->workers[w->n - 1];
	char gpus[SCHED_MAX_GPUS * 4 + 1], user[256];
	unsigned int *given = calloc(j->n_workers, sizeof(*given));

	sched_env_base(e, j->uid, user, sizeof(user));
	for (size_t i = 0; i < j->spec->n_env; i++)
		sched_env_set(e, j->spec->env[i].name, j->spec->env[i].value);
	for (size_t i = 0; i < sw->n_env; i++)
		sched_env_set(e, sw->env[i].name, sw->env[i].value);
	if (given) {
		struct spec_runtime rt = { .job_id = j->name, .host = "127.0.0.1", .ports = j->ports,
					   .n_gpus = given, .user = user };

		/* Other workers' GPUs as asked: a gang is placed whole, so that is what they get. */
		for (size_t i = 0; i < j->n_workers; i++)
			given[i] = (unsigned int)j->spec->workers[i].res.gpu_count;
		given[w->n - 1] = w->n_gpus;
		spec_runtime_env(j->spec, w->n - 1, &rt, sched_env_put, e);
		free(given);
	}
	sched_env_set(e, "CUDA_VISIBLE_DEVICES", sched_gpu_list(w, gpus, sizeof(gpus)));
	sched_env_set(e, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
	sched_env_setf(e, "GPU_COUNT", "%u", w->n_gpus);
	sched_env_set(e, "JOB_NAME", j->name);
	sched_env_set(e, "MLFS_JOB_NAME", j->name);
	sched_env_setf(e, "MLFS_WORKER", "%u", w->n);
	sched_env_setf(e, "MLFS_WORKER_COUNT", "%zu", j->n_workers);
	sched_env_setf(e, "MLFS_ATTEMPT", "%u", w->n_attempts);
	sched_env_setf(e, "ML_DATA_PATH", "%s/input", ml);
	sched_env_setf(e, "ML_MODEL_PATH", "%s/models", ml);
	sched_env_setf(e, "ML_CHECKPOINT_PATH", "%s/checkpoint", ml);
	sched_env_setf(e, "ML_OUTPUT_PATH", "%s/output", ml);
	sched_env_setf(e, "PROXIML_DATA_PATH", "%s/input", ml);
	sched_env_setf(e, "PROXIML_MODEL_PATH", "%s/models", ml);
	sched_env_setf(e, "PROXIML_CHECKPOINT_PATH", "%s/checkpoint", ml);
	sched_env_setf(e, "PROXIML_OUTPUT_PATH", "%s/output", ml);
}

/*
 * The worker's folder (workers/N, made at its first start) and in it its
 * scratch stand-in for /opt/ml (ml/input, models, checkpoint, output),
 * owned by the job's user, until workers get their /opt/ml view.  A
 * cluster's batch script makes the scratch folders itself, on the compute
 * node (!@with_ml).
 */
static int sched_make_worker_dir(const struct sched_job *j, const struct sched_worker *w,
				 const char *ml, bool with_ml)
{
	static const char *const sub[] = { "", "/input", "/models", "/checkpoint", "/output" };
	char path[4096];

	snprintf(path, sizeof(path), "%s/workers", j->dir);
	if (mkdir(path, 0711) < 0 && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof(path), "%s/workers/%u", j->dir, w->n);
	if (mkdir(path, 0711) < 0 && errno != EEXIST)
		return -errno;
	for (size_t i = 0; with_ml && i < sizeof(sub) / sizeof(sub[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", ml, sub[i]);
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return -errno;
		if (chown(path, j->uid, j->gid) < 0)
			return -errno;
	}
	return 0;
}

/* A worker placed under the lock and started without it (sched_run_launch). */
struct sched_launch {
	struct sched_job *j;
	struct sched_worker *w;
	struct sched_env env;
	char ml[4096], models[4200], log[4096], jlog[4096], exitp[4096];
	/* the view: mlfs job ... and mlfs umount ... */
	char view[4096], spec[4200], phase[4096], uplog[4096], wnum[16], owner[32], jdir[4096];
	char *view_argv[14], *unview_argv[4];
	/* its container, when it has an image and the node runs them */
	struct container_run crun;
	int gpu_minor[SCHED_MAX_GPUS];	/* crun's GPUs: the device minors of w->gpus */
	char cname[128], envfile[4200], pullprog[4200], authfile[4200];
	char *pull_argv[16], *cleanup_argv[8];
	char pkgfile[4200], envref[CONTAINER_ENV_REF_MAX];	/* its packages (sched_container_packages) */
	bool image_unrunnable;		/* an image, no runtime, no fallback: cannot start */
	struct exec_start st;
	struct exec_run run;
	int ret;
	char why[256];			/* a cluster's words when it refused it */
	struct sched_launch *next;
};

/* Whether @j's workers get a view: the spec names data, and this mlfs can mount one. */
static bool sched_has_view(const struct sched *s, const struct sched_job *j)
{
	const struct spec_data *d = &j->spec->data;

	return s->mlfs_bin && (d->output.type || d->input.type || d->model.type ||
			       d->n_datasets || d->n_checkpoints);
}

/*
 * The command lines that mount worker @w's view at l->view (set by
 * sched_launch_prepare) and unmount it (uploading its output).  The output folder is named by the
 * job, worker, attempt and acceptance time, so the tree can show it and a
 * later sync can be matched to this job.
 */
static void sched_view_prepare(struct sched *s, struct sched_launch *l)
{
	struct sched_job *j = l->j;
	struct sched_worker *w = l->w;
	char **a = l->view_argv;
	size_t n = 0;

	snprintf(l->spec, sizeof(l->spec), "%s/spec/%s", j->dir, j->file ? j->file : j->name);
	snprintf(l->phase, sizeof(l->phase), "%s/workers/%u/phase", j->dir, w->n);
	snprintf(l->uplog, sizeof(l->uplog), "%s/workers/%u/upload.log", j->dir, w->n);
	snprintf(l->wnum, sizeof(l->wnum), "%u", w->n);
	snprintf(l->owner, sizeof(l->owner), "%u:%u", (unsigned int)j->uid, (unsigned int)j->gid);
	snprintf(w->output_id, sizeof(w->output_id), "%s.%u.a%u.%lld", j->name, w->n,
		 w->n_attempts, j->accepted_ns);
	a[n++] = s->mlfs_bin;
	a[n++] = "job";
	a[n++] = "-o";
	a[n++] = "allow_other";
	a[n++] = "--owner";
	a[n++] = l->owner;
	a[n++] = "--output-id";
	a[n++] = w->output_id;
	a[n++] = s->config_path;
	a[n++] = l->spec;
	a[n++] = l->view;
	a[n++] = "--worker";
	a[n++] = l->wnum;
	a[n] = NULL;
	l->unview_argv[0] = s->mlfs_bin;
	l->unview_argv[1] = "umount";
	l->unview_argv[2] = l->view;
	l->unview_argv[3] = NULL;
	l->st.view_argv = l->view_argv;
	l->st.unview_argv = l->unview_argv;
	l->st.view_dir = l->view;
	l->st.view_bind = geteuid() == 0;
	l->st.phase_path = l->phase;
	l->st.upload_log = l->uplog;
}

/* The view's mountpoint and the spec file mlfs job reads (without the lock). */
static int sched_view_files(const struct sched_launch *l)
{
	char dir[4200];
	int fd, ret = 0;

	if (mkdir(l->view, 0755) < 0 && errno != EEXIST)
		return -errno;
	snprintf(dir, sizeof(dir), "%s/spec", l->j->dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	unlink(l->phase);
	fd = open(l->spec, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, l->j->text, l->j->text_len) != (ssize_t)l->j->text_len)
		ret = errno ? -errno : -EIO;
	close(fd);
	return ret;
}

/*
 * Holds the resources @w was placed on and queues its start; called with
 * the lock held.  The worker is neither waiting nor running until then.
 */
/* The number of ports worker @i of @j asks for. */
static size_t sched_worker_nports(const struct sched_job *j, size_t i)
{
	size_t n = 0;

	for (size_t k = 0; k < j->spec->workers[i].n_ports; k++)
		n += (size_t)j->spec->workers[i].ports[k].count;
	return n;
}

void sched_job_ports_release(struct sched *s, struct sched_job *j)
{
	for (size_t i = 0; j->ports && i < j->n_workers; i++) {
		if (j->ports[i])
			sched_node_ports_release(&s->node, j->ports[i], sched_worker_nports(j, i));
		free(j->ports[i]);
	}
	free(j->ports);
	j->ports = NULL;
	j->n_ports = 0;
}

/*
 * Holds the ports every worker of @j asks for (spec_worker.ports), once for
 * the job's life: all of them, since each task's variables name every
 * other task's ports.
 */
static int sched_job_ports(struct sched *s, struct sched_job *j)
{
	size_t total = 0;

	for (size_t i = 0; i < j->n_workers; i++)
		total += sched_worker_nports(j, i);
	if (j->ports || total == 0)
		return 0;
	j->ports = calloc(j->n_workers, sizeof(*j->ports));
	for (size_t i = 0; j->ports && i < j->n_workers; i++) {
		size_t n = sched_worker_nports(j, i);

		j->ports[i] = calloc(n ? n : 1, sizeof(int));
		if (!j->ports[i] || sched_node_ports(&s->node, n, j->ports[i]) < 0) {
			free(j->ports[i]);
			j->ports[i] = NULL;	/* held none: sched_node_ports gave them back */
			sched_job_ports_release(s, j);
			return -EADDRINUSE;
		}
		j->n_ports += n;
	}
	return j->ports ? 0 : -ENOMEM;
}

/*
 * Worker @l's container: `mlfs image pull` first (once per node for all
 * jobs of the image), then its `podman run` (container.c), the view or the
 * scratch folder at /opt/ml, and `podman rm` after, for what a SIGKILL of
 * podman leaves running.
 */
static void sched_container_prepare(struct sched *s, struct sched_launch *l, const char *ml_dir)
{
	const struct sched_job *j = l->j;
	const struct sched_worker *w = l->w;
	const struct spec_worker *sw = &j->spec->workers[w->n - 1];
	size_t n = 0;

	/* [a-zA-Z0-9][a-zA-Z0-9_.-]*, unique on the node: the job's name has '~' too */
	snprintf(l->cname, sizeof(l->cname), "mlfs-%s-%u-a%u-%lld", j->name, w->n, w->n_attempts,
		 j->accepted_ns);
	for (char *c = l->cname; *c; c++)
		if (*c == '~')
			*c = '_';
	snprintf(l->envfile, sizeof(l->envfile), "%s/workers/%u/env.%u", j->dir, w->n, w->n_attempts);
	snprintf(l->pullprog, sizeof(l->pullprog), "%s/workers/%u/pull", j->dir, w->n);
	snprintf(l->authfile, sizeof(l->authfile), "%s/workers/%u/auth.json", j->dir, w->n);
	snprintf(l->phase, sizeof(l->phase), "%s/workers/%u/phase", j->dir, w->n);
	for (unsigned int i = 0; i < w->n_gpus; i++)
		l->gpu_minor[i] = s->node.gpu_minor[w->gpus[i]];
	l->crun = (struct container_run){
		.rt = &s->containers, .image = sw->image.ref, .name = l->cname, .command = sw->command,
		.uid = j->uid, .gid = j->gid, .workdir = sw->work_dir ? sw->work_dir : "/opt/ml/models",
		.ml_dir = ml_dir, .env_file = l->envfile, .memory = l->st.memory_limit,
		.shm_mb = sw->image.shm_mb, .gpus = l->gpu_minor, .n_gpus = w->n_gpus,
	};
	if (s->mlfs_bin) {
		l->pull_argv[n++] = s->mlfs_bin;
		l->pull_argv[n++] = "image";
		l->pull_argv[n++] = "pull";
		l->pull_argv[n++] = s->config_path;
		l->pull_argv[n++] = sw->image.ref;
		l->pull_argv[n++] = "--progress";
		l->pull_argv[n++] = l->pullprog;
		l->pull_argv[n++] = "--auth-file";
		l->pull_argv[n++] = l->authfile;
		l->pull_argv[n] = NULL;
		l->st.pull_argv = l->pull_argv;
	}
	n = 0;
	l->cleanup_argv[n++] = s->containers.podman;
	l->cleanup_argv[n++] = "rm";
	l->cleanup_argv[n++] = "--force";
	l->cleanup_argv[n++] = "--ignore";
	l->cleanup_argv[n++] = "--time=2";
	l->cleanup_argv[n++] = l->cname;
	l->cleanup_argv[n] = NULL;
	l->st.container = &l->crun;
	l->st.cleanup_argv = l->cleanup_argv;
	l->st.phase_path = l->phase;
	l->st.view_bind = false;		/* podman binds it */
}

/*
 * A worker whose spec lists packages runs in its base image with them
 * installed (container.h): `mlfs image pull` gets the packages file and
 * the name of the image to make of the base (or find made), and the
 * container runs that.  Without the lock.
 */
static int sched_container_packages(struct sched_launch *l)
{
	const struct spec *sp = l->j->spec;
	size_t n = 0;
	int ret;

	snprintf(l->pkgfile, sizeof(l->pkgfile), "%s/workers/%u/packages", l->j->dir, l->w->n);
	ret = container_packages_file(l->pkgfile, sp, sp->workers[l->w->n - 1].image.ref, l->envref);
	if (ret <= 0)
		return ret;
	l->crun.image = l->envref;
	while (l->pull_argv[n])
		n++;
	if (n) {
		l->pull_argv[n++] = "--packages";
		l->pull_argv[n++] = l->pkgfile;
		l->pull_argv[n++] = "--as";
		l->pull_argv[n++] = l->envref;
		l->pull_argv[n] = NULL;
	}
	return 0;
}

static int sched_launch_prepare(struct sched *s, struct sched_job *j, struct sched_worker *w)
{
	const struct spec_resources *res = &j->spec->workers[w->n - 1].res;
	struct sched_launch *l;
	struct sched_attempt *att;
	char holder[128];
	bool image, container;
	int ret = sched_job_ports(s, j);

	if (ret < 0)
		return ret;
	l = calloc(1, sizeof(*l));
	att = l ? realloc(w->attempts, (w->n_attempts + 1) * sizeof(*att)) : NULL;
	if (!att) {
		free(l);
		return -ENOMEM;
	}
	w->attempts = att;
	att[w->n_attempts] = (struct sched_attempt){ 0 };	/* status.json may show it meanwhile */
	l->j = j;
	l->w = w;
	snprintf(l->ml, sizeof(l->ml), "%s/workers/%u/ml", j->dir, w->n);
	snprintf(l->models, sizeof(l->models), "%s/models", l->ml);
	snprintf(l->log, sizeof(l->log), "%s/workers/%u/log", j->dir, w->n);
	snprintf(l->jlog, sizeof(l->jlog), "%s/log", j->dir);
	snprintf(l->exitp, sizeof(l->exitp), "%s/workers/%u/exit.%u", j->dir, w->n, w->n_attempts + 1);
	w->n_attempts++;
	w->output_id[0] = '\0';
	w->phase = SCHED_PHASE_NONE;
	image = j->spec->workers[w->n - 1].image.ref != NULL;
	container = image && !sched_images_why(s);
	l->image_unrunnable = image && !container && !s->cfg->containers.fallback_host;
	if (container) {
		/* the container sees its view, or its scratch folder, at /opt/ml */
		snprintf(l->view, sizeof(l->view), "%s/workers/%u/view", j->dir, w->n);
		snprintf(l->models, sizeof(l->models), "/opt/ml/models");
		sched_env_build(&l->env, j, w, "/opt/ml");
	} else if (sched_has_view(s, j)) {
		/* In its mount namespace the worker sees its view at /opt/ml; else where it is. */
		bool at_opt = geteuid() == 0 || sched_cluster(s);

		snprintf(l->view, sizeof(l->view), "%s/workers/%u/view", j->dir, w->n);
		snprintf(l->models, sizeof(l->models), "%s/models", at_opt ? "/opt/ml" : l->view);
		sched_env_build(&l->env, j, w, at_opt ? "/opt/ml" : l->view);
	} else {
		sched_env_build(&l->env, j, w, l->ml);
	}
	l->st = (struct exec_start){
		.job = j->name, .worker = w->n, .attempt = w->n_attempts,
		.command = j->spec->workers[w->n - 1].command, .envp = l->env.v,
		.uid = j->uid, .gid = j->gid, .dir = j->spec->workers[w->n - 1].work_dir ? j->spec->workers[w->n - 1].work_dir : l->models,
		.log_path = l->log,
		.job_log_path = l->jlog, .exit_path = l->exitp,
		.memory_limit = res->memory_gb > 0 ? (uint64_t)(res->memory_gb * 1073741824.0) : 0,
		.log_max = s->cfg->log_size,
	};
	if (sched_has_view(s, j))
		sched_view_prepare(s, l);
	if (container)
		sched_container_prepare(s, l, sched_has_view(s, j) ? l->view : l->ml);
	snprintf(l->jdir, sizeof(l->jdir), "%s", j->dir);
	l->st.spec = j->spec;
	l->st.spec_file = j->file ? j->file : j->name;
	l->st.spec_text = j->text;
	l->st.spec_len = j->text_len;
	l->st.job_dir = l->jdir;
	l->st.output_id = w->output_id[0] ? w->output_id : NULL;
	l->st.config_path = s->config_path;
	l->st.mlfs_bin = s->mlfs_bin;
	snprintf(holder, sizeof(holder), "%s/%u", j->name, w->n);
	if (!sched_cluster(s))
		sched_node_hold(&s->node, res, w->gpus, w->n_gpus, holder);
	w->starting = true;
	l->next = s->launches;
	s->launches = l;
	return 0;
}

/* Records how the start of @l went; called with the lock held. */
static void sched_launch_finish(struct sched *s, struct sched_launch *l)
{
	struct sched_job *j = l->j;
	struct sched_worker *w = l->w;
	char gpus[SCHED_MAX_GPUS * 4 + 1];

	w->starting = false;
	if (l->ret < 0) {
		if (!sched_cluster(s))
			sched_node_release(&s->node, &j->spec->workers[w->n - 1].res, w->gpus, w->n_gpus);
		s->res_gen++;
		w->n_attempts--;
		w->n_gpus = 0;
		w->state = SCHED_FAILED;
		if (l->why[0])
			snprintf(w->end_why, sizeof(w->end_why), "%s", l->why);
		sched_event(j, "worker %u: cannot start: %s", w->n, l->why[0] ? l->why : strerror(-l->ret));
		sched_run_update(s, j);
		return;
	}
	w->run = l->run;
	w->running = true;
	w->staging_in_failed = w->upload_failed = false;
	w->pull[0] = '\0';
	w->term_sent = false;
	w->kill_at_ns = 0;
	s->started_any = true;
	if (sched_cluster(s)) {
		/* in the cluster's queue: the attempt starts when the cluster runs it */
		w->pending = true;
		w->wait_why[0] = '\0';
		w->end_why[0] = '\0';
		snprintf(w->cluster_id, sizeof(w->cluster_id), "%s", w->run.cluster_id);
		w->phase = SCHED_PHASE_NONE;
		sched_event(j, "worker %u: attempt %u submitted to Slurm as job %s", w->n, w->n_attempts,
			    w->run.cluster_id);
	} else {
		struct sched_attempt *att = &w->attempts[w->n_attempts - 1];

		*att = (struct sched_attempt){ .started_ns = sched_now_ns(), .n_gpus = w->n_gpus };
		for (unsigned int i = 0; i < w->n_gpus; i++)
			att->gpus[i] = (unsigned char)w->gpus[i];
		w->state = SCHED_RUNNING;
		w->phase = l->st.view_argv || l->st.pull_argv ? SCHED_PHASE_STAGING_IN
							       : SCHED_PHASE_NONE;
		sched_event(j, "worker %u: attempt %u started, pid %d, GPUs [%s]", w->n, w->n_attempts,
			    (int)w->run.pid, sched_gpu_list(w, gpus, sizeof(gpus)));
	}
	if (j->cancelled) {		/* cancelled while it was being started */
		exec_signal(s->ex, &w->run, SIGTERM);
		w->term_sent = true;
		w->kill_at_ns = sched_mono_ns() + SCHED_KILL_GRACE * 1000000000LL;
	}
	sched_run_update(s, j);
	sched_store_status(j);	/* the run, for a new daemon to adopt, even when the state is unchanged */
}

/* Opens @path with @flags, never through a link, and gives it to @j's owner. */
static int sched_give_owner(const char *path, int flags, const struct sched_job *j)
{
	int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW, 0644), ret = 0;

	if (fd < 0)
		return -errno;
	if (fchown(fd, j->uid, j->gid) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * A cluster runs the batch script as the job's owner: its worker folder
 * and the job's log become the owner's, so the script can write its log,
 * phase and exit files there, and so do a container's auth.json and
 * packages, which its pull reads.
 */
static int sched_cluster_files(const struct sched_launch *l)
{
	char path[4200];
	int ret;

	snprintf(path, sizeof(path), "%s/workers/%u", l->j->dir, l->w->n);
	if (chown(path, l->j->uid, l->j->gid) < 0)
		return -errno;
	ret = sched_give_owner(l->jlog, O_WRONLY | O_CREAT | O_APPEND, l->j);
	/* the pull's credentials: the script's `mlfs image pull` reads them, and removes them */
	if (ret == 0 && l->st.container)
		ret = sched_give_owner(l->authfile, O_RDONLY | O_NONBLOCK, l->j);
	/* and its packages, when it has any (sched_container_packages) */
	if (ret == 0 && l->st.container && l->crun.image == l->envref)
		ret = sched_give_owner(l->pkgfile, O_RDONLY | O_NONBLOCK, l->j);
	return ret;
}

/* Whether @uid could read @path: its owner, or anyone may. */
static bool sched_owner_may_read(const char *path, uid_t uid)
{
	struct stat st;

	return stat(path, &st) == 0 && (st.st_uid == uid || (st.st_mode & S_IROTH));
}

/*
 * What a launch needs on disk before it starts: the worker's folder (with
 * the scratch /opt/ml stand-in for the local executor; a cluster's script
 * makes its own), the view's files, no stale exit file, and for a cluster
 * the folder and job log handed to the owner.  Without the lock.
 */
/* The worker's own registry credentials file (container_auth.c). */
static int sched_container_auth(struct sched *s, struct sched_launch *l)
{
	const struct spec_image *img = &l->j->spec->workers[l->w->n - 1].image;
	struct passwd pw, *res = NULL;
	char buf[4096];
	struct container_auth a = {
		.image = img->ref, .inline_creds = img->auth, .spec_file = img->auth_file,
		.node_file = s->cfg->containers.auth_file, .uid = l->j->uid,
	};

	if (getpwuid_r(l->j->uid, &pw, buf, sizeof(buf), &res) == 0 && res && pw.pw_dir[0] == '/')
		a.home = pw.pw_dir;
	/* a cluster's pull runs as the owner, who can read the file: the node's only when it may */
	if (sched_cluster(s) && a.node_file && l->j->uid != 0 && !sched_owner_may_read(a.node_file, l->j->uid))
		a.node_file = NULL;
	char why[sizeof(l->why) - 16];
	int ret = container_auth_file(l->authfile, &a, why, sizeof(why));

	if (ret == -EACCES)
		snprintf(l->why, sizeof(l->why), "authFile %s", why);
	return ret;
}

static int sched_launch_files(struct sched *s, struct sched_launch *l)
{
	int ret;

	if (l->image_unrunnable) {
		snprintf(l->why, sizeof(l->why), "its image %s cannot run here: %s",
			 l->j->spec->workers[l->w->n - 1].image.ref, sched_images_why(s));
		return -ENOEXEC;
	}
	ret = sched_make_worker_dir(l->j, l->w, l->ml, !sched_cluster(s));
	if (ret == 0 && l->st.view_argv)
		ret = sched_view_files(l);
	if (ret == 0 && l->st.container && !sched_cluster(s)) {	/* a cluster's script writes its own */
		char gpus[SCHED_MAX_GPUS * 4 + 1] = "";

		/* inside, its GPUs are the only ones, numbered from 0 as nvidia-smi there numbers them */
		for (unsigned int i = 0, n = 0; i < l->w->n_gpus; i++)
			n += (unsigned int)snprintf(gpus + n, sizeof(gpus) - n, "%s%u", i ? "," : "", i);
		sched_env_set(&l->env, "CUDA_VISIBLE_DEVICES", gpus);
		ret = container_env_file(l->envfile, l->env.v);
	}
	if (ret == 0 && l->st.container)
		unlink(l->pullprog);
	if (ret == 0 && l->st.container)
		ret = sched_container_auth(s, l);
	if (ret == 0 && l->st.container)
		ret = sched_container_packages(l);
	unlink(l->exitp);
	if (ret == 0 && sched_cluster(s))
		ret = sched_cluster_files(l);
	return ret;
}

static int sched_launch_cmp(const void *a, const void *b)
{
	const struct sched_launch *x = *(struct sched_launch *const *)a;
	const struct sched_launch *y = *(struct sched_launch *const *)b;

	if (x->j != y->j)
		return x->j->accepted_ns < y->j->accepted_ns ? -1 : 1;
	return x->w->n < y->w->n ? -1 : x->w->n > y->w->n;
}

/*
 * Hands the launches of one job, @g[0..n) in worker order, to a cluster: a
 * gang as one allocation, else runs of workers of the same shape each as
 * one submission (a job array when more than one).
 */
static void sched_cluster_submit(struct sched *s, struct sched_launch **g, size_t n)
{
	struct exec_start *st = calloc(n, sizeof(*st));
	struct exec_run *runs = calloc(n, sizeof(*runs));
	size_t first = 0;

	while (first < n) {
		const struct spec *sp = g[0]->j->spec;
		size_t end = first + 1;
		int ret;

		while (end < n && (sp->gang || spec_same_resources(&sp->workers[g[first]->w->n - 1].res,
								&sp->workers[g[end]->w->n - 1].res)))
			end++;
		if (!st || !runs) {
			ret = -ENOMEM;
		} else {
			for (size_t i = first; i < end; i++)
				st[i - first] = g[i]->st;
			ret = exec_submit(s->ex, st, end - first, sp->gang, runs, g[first]->why,
						 sizeof(g[first]->why));
		}
		for (size_t i = first; i < end; i++) {
			if (g[i]->ret == 0)
				g[i]->ret = ret;
			if (ret == 0)
				g[i]->run = runs[i - first];
			if (i != first)
				memcpy(g[i]->why, g[first]->why, sizeof(g[i]->why));
		}
		first = end;
	}
	free(st);
	free(runs);
}

/*
 * Cluster submissions run on SCHED_SUBMITTERS threads of their own, not on
 * the scheduler's: each sbatch mostly waits for the controller, which
 * serves several clients at once, and the scheduler goes on accepting and
 * placing meanwhile.  A pass queues its launches (a job's together); a
 * submitter takes one job's, prepares their folders, submits them and
 * records the result under the lock.
 */
static void sched_submit_group(struct sched *s, struct sched_launch **g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		g[i]->ret = sched_launch_files(s, g[i]);
	qsort(g, n, sizeof(*g), sched_launch_cmp);
	sched_cluster_submit(s, g, n);
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++)
		sched_launch_finish(s, g[i]);
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		sched_env_free(&g[i]->env);
		free(g[i]);
	}
	sched_wake(s);
}

static void *sched_submitter(void *arg)
{
	struct sched *s = arg;
	struct sched_launch *g[SCHED_MAX_GROUP];

	for (;;) {
		size_t n = 0;

		pthread_mutex_lock(&s->sub_lock);
		while (!s->sub_queue && !s->sub_stop)
			pthread_cond_wait(&s->sub_cond, &s->sub_lock);
		if (!s->sub_queue) {
			pthread_mutex_unlock(&s->sub_lock);
			return NULL;
		}
		do {
			g[n++] = s->sub_queue;
			s->sub_queue = s->sub_queue->next;
		} while (s->sub_queue && s->sub_queue->j == g[0]->j && n < SCHED_MAX_GROUP);
		if (!s->sub_queue)
			s->sub_tail = &s->sub_queue;
		pthread_mutex_unlock(&s->sub_lock);
		sched_submit_group(s, g, n);
	}
}

int sched_submitters_start(struct sched *s)
{
	pthread_mutex_init(&s->sub_lock, NULL);
	pthread_cond_init(&s->sub_cond, NULL);
	s->sub_tail = &s->sub_queue;
	s->sub_inited = true;
	for (; s->n_submitters < SCHED_SUBMITTERS; s->n_submitters++)
		if (pthread_create(&s->submitters[s->n_submitters], NULL, sched_submitter, s) != 0)
			break;
	return s->n_submitters ? 0 : -EAGAIN;
}

void sched_submitters_stop(struct sched *s)
{
	if (!s->sub_inited)
		return;
	pthread_mutex_lock(&s->sub_lock);
	s->sub_stop = true;		/* they submit what is queued, then end */
	pthread_cond_broadcast(&s->sub_cond);
	pthread_mutex_unlock(&s->sub_lock);
	for (size_t i = 0; i < s->n_submitters; i++)
		pthread_join(s->submitters[i], NULL);
	pthread_cond_destroy(&s->sub_cond);
	pthread_mutex_destroy(&s->sub_lock);
	s->sub_inited = false;
}

void sched_run_launch(struct sched *s, struct sched_launch *list)
{
	if (sched_cluster(s)) {		/* sched_create started the submitters */
		pthread_mutex_lock(&s->sub_lock);
		*s->sub_tail = list;
		while (*s->sub_tail)
			s->sub_tail = &(*s->sub_tail)->next;
		pthread_cond_broadcast(&s->sub_cond);
		pthread_mutex_unlock(&s->sub_lock);
		return;
	}
	for (struct sched_launch *l = list; l; l = l->next) {
		l->ret = sched_launch_files(s, l);
		if (l->ret == 0)
			l->ret = exec_start(s->ex, &l->st, &l->run);
	}
	pthread_mutex_lock(&s->lock);
	for (struct sched_launch *l = list; l; l = l->next)
		sched_launch_finish(s, l);
	pthread_mutex_unlock(&s->lock);
	while (list) {
		struct sched_launch *l = list;

		list = l->next;
		sched_env_free(&l->env);
		free(l);
	}
}

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
