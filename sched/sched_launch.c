/*
 * sched_launch.c - starting the workers a pass placed (sched_run.c):
 * each one's environment (DESIGN §5: mlfs's variables win over the spec's,
 * then the format's runtime ones), its folder, the command lines that mount
 * and unmount its view, its ports, its container, and the files a start
 * needs; then the executor's start, without the scheduler's lock, or for a
 * cluster executor a group submitted by one of the submitter threads, which
 * run beside the scheduler's thread because each sbatch mostly waits.
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
	char sources[4200];
	char *view_argv[16], *unview_argv[4];
	/* the sources it maps (Kibernetika's): spec_worker_mounts, and their container binds */
	struct spec_mount *mounts;
	size_t n_mounts;
	const char *(*binds)[2];
	char (*bind_host)[4200];
	char workdir[4096];		/* its workDir with $<NAME>_DIR resolved */
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

/* Whether a worker of @j maps a source (Kibernetika's sources: spec_worker_mounts). */
static bool sched_maps_sources(const struct sched *s, const struct sched_job *j)
{
	bool any = false;

	for (size_t w = 0; !any && w < j->spec->n_workers; w++) {
		struct spec_mount *m;
		size_t n, bad;

		if (!j->spec->workers[w].all_sources && !j->spec->workers[w].n_volumes)
			continue;	/* maps nothing: every format but Kibernetika's and GPULab's */
		if (spec_worker_mounts(j->spec, w, s->cfg, &m, &n, &bad) == 0)
			any = n > 0;
		free(m);
	}
	return any;
}

/* Whether @j's workers get a view: the spec names data, and this mlfs can mount one. */
bool sched_has_view(const struct sched *s, const struct sched_job *j)
{
	const struct spec_data *d = &j->spec->data;

	return s->mlfs_bin && (d->output.type || d->input.type || d->model.type ||
			       d->n_datasets || d->n_checkpoints || sched_maps_sources(s, j));
}

/*
 * The sources worker @l maps: each one's <NAME>_DIR in its variables,
 * where the worker finds it (@container: its mount path; else @ml's
 * sources/NAME).  Before the variables are handed out.
 */
static void sched_sources_env(struct sched *s, struct sched_launch *l, bool container,
			      const char *ml)
{
	size_t bad = 0;

	/* a volume naming no source was refused at submit (spec_check_data) */
	if (spec_worker_mounts(l->j->spec, l->w->n - 1, s->cfg, &l->mounts, &l->n_mounts,
			       &bad) < 0)
		l->n_mounts = 0;
	for (size_t i = 0; i < l->n_mounts; i++) {
		if (container)
			sched_env_set(&l->env, l->mounts[i].var, l->mounts[i].mount_path);
		else
			sched_env_setf(&l->env, l->mounts[i].var, "%s/sources/%s", ml,
				       l->mounts[i].name);
	}
}

/*
 * Its workDir with $<NAME>_DIR resolved (one naming no source was refused
 * at submit: then the default folder), and its container's binds of the
 * sources (none on ENOMEM: the variables then name folders not there).
 */
static void sched_sources_finish(struct sched_launch *l, bool container, const char *ml)
{
	const char *dir = l->j->spec->workers[l->w->n - 1].work_dir;
	char unknown[96];

	if (dir && strchr(dir, '$')) {
		if (spec_resolve_dir(dir, l->mounts, l->n_mounts, container ? NULL : ml, l->workdir,
				     sizeof(l->workdir), unknown, sizeof(unknown)) == 0) {
			l->st.dir = l->workdir;
			l->crun.workdir = l->workdir;
		} else {
			l->st.dir = l->models;
			l->crun.workdir = "/opt/ml/models";
		}
	}
	if (!container || !l->n_mounts)
		return;
	l->binds = calloc(l->n_mounts, sizeof(*l->binds));
	l->bind_host = calloc(l->n_mounts, sizeof(*l->bind_host));
	if (!l->binds || !l->bind_host)
		return;
	for (size_t i = 0; i < l->n_mounts; i++) {
		snprintf(l->bind_host[i], sizeof(l->bind_host[i]), "%s/sources/%s", l->view,
			 l->mounts[i].name);
		l->binds[i][0] = l->bind_host[i];
		l->binds[i][1] = l->mounts[i].mount_path;
	}
	l->crun.binds = (const char *const (*)[2])l->binds;
	l->crun.n_binds = l->n_mounts;
}

static void sched_launch_free(struct sched_launch *l)
{
	sched_env_free(&l->env);
	free(l->mounts);
	free(l->binds);
	free(l->bind_host);
	free(l);
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
	snprintf(l->sources, sizeof(l->sources), "%s/workers/%u/sources", j->dir, w->n);
	w->sources[0] = '\0';		/* this attempt's view says again */
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
	a[n++] = "--sources";
	a[n++] = l->sources;
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

int sched_launch_prepare(struct sched *s, struct sched_job *j, struct sched_worker *w)
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
		sched_sources_env(s, l, true, "/opt/ml");
	} else if (sched_has_view(s, j)) {
		/* In its mount namespace the worker sees its view at /opt/ml; else where it is. */
		bool at_opt = geteuid() == 0 || sched_cluster(s);

		snprintf(l->view, sizeof(l->view), "%s/workers/%u/view", j->dir, w->n);
		snprintf(l->models, sizeof(l->models), "%s/models", at_opt ? "/opt/ml" : l->view);
		sched_env_build(&l->env, j, w, at_opt ? "/opt/ml" : l->view);
		sched_sources_env(s, l, false, at_opt ? "/opt/ml" : l->view);
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
	sched_sources_finish(l, container, geteuid() == 0 || sched_cluster(s) ? "/opt/ml" : l->view);
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
		sched_launch_free(l);
	}
}
