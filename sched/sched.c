/*
 * sched.c - the scheduler: its lock, its thread, and the calls fs/ makes.
 *
 * A job is accepted by sched_submit: the spec is checked, a record holding
 * the spec as written is appended to the journal and made durable
 * (fdatasync), and only then is the job visible and queued.  The name is
 * reserved under the lock before the journal write, so two writers of the
 * same name cannot both win.  Nothing else is done under the lock, and no
 * inode is made: the job's folder is one made ahead (sched_spare.c).
 *
 * The scheduler's thread (sched_thread) runs the passes (sched_run.c): it
 * places queued workers, starts them through the executor, waits on their
 * pidfds, and enforces timeouts and cancels.  Other calls only change
 * fields under the lock and wake it through an eventfd.  The thread never
 * holds the lock while it calls sched_final_fn (fs/ replies to waiting
 * readers there).  Beside it: the submitter threads, which hand a cluster's
 * workers to sbatch (sched_run.c), and the thread that makes job folders
 * ahead (sched_spare.c).
 *
 * What this does not do: move data (a worker's command line runs `mlfs
 * job`, which mounts its view and uploads its output: fs/cmd_job.c,
 * output/), or place workers across nodes (the slurm executor does).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "json_pos.h"
#include "log.h"
#include "sched_int.h"
#include "mono.h"

static const char *const sched_state_names[] = {
	[SCHED_QUEUED] = "QUEUED",
	[SCHED_STAGING_IN] = "STAGING_IN",
	[SCHED_RUNNING] = "RUNNING",
	[SCHED_STAGING_OUT] = "STAGING_OUT",
	[SCHED_SUCCEEDED] = "SUCCEEDED",
	[SCHED_FAILED] = "FAILED",
	[SCHED_CANCELLED] = "CANCELLED",
	[SCHED_RETRYING] = "RETRYING",
};

const char *sched_state_name(enum sched_state st)
{
	return sched_state_names[st];
}

bool sched_state_final(enum sched_state st)
{
	return st == SCHED_SUCCEEDED || st == SCHED_FAILED || st == SCHED_CANCELLED;
}

long long sched_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

long long sched_mono_ns(void)
{
	return mono_ns();
}

void sched_wake(struct sched *s)
{
	uint64_t one = 1;

	if (write(s->wake_fd, &one, sizeof(one)) < 0)
		log_warn("sched: cannot wake the scheduler: %s", strerror(errno));
}

static size_t sched_hash_of(const struct sched *s, const char *name)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ULL;
	return (size_t)h & (s->hash_size - 1);
}

struct sched_job *sched_find(struct sched *s, const char *name)
{
	if (!s->hash)
		return NULL;
	for (struct sched_job *j = s->hash[sched_hash_of(s, name)]; j; j = j->hnext)
		if (strcmp(j->name, name) == 0)
			return j;
	return NULL;
}

/* Doubles the name hash when it is full; keeps the old one when out of memory. */
static void sched_hash_grow(struct sched *s)
{
	size_t old = s->hash_size;
	struct sched_job **hash = calloc(old ? 2 * old : 256, sizeof(*hash));

	if (!hash)
		return;
	s->hash_size = old ? 2 * old : 256;
	for (size_t i = 0; i < old; i++) {
		for (struct sched_job *j = s->hash[i], *next; j; j = next) {
			size_t h = sched_hash_of(s, j->name);

			next = j->hnext;
			j->hnext = hash[h];
			hash[h] = j;
		}
	}
	free(s->hash);
	s->hash = hash;
}

void sched_link(struct sched *s, struct sched_job *j)
{
	size_t h;

	if (s->n_jobs >= s->hash_size)
		sched_hash_grow(s);
	*s->jobs_tail = j;
	s->jobs_tail = &j->next;
	s->n_jobs++;
	if (s->hash) {
		h = sched_hash_of(s, j->name);
		j->hnext = s->hash[h];
		s->hash[h] = j;
	}
}

void sched_unlink(struct sched *s, struct sched_job *j)
{
	struct sched_job **p = &s->jobs;

	while (*p && *p != j)
		p = &(*p)->next;
	if (!*p)
		return;
	*p = j->next;
	if (s->jobs_tail == &j->next)
		s->jobs_tail = p;
	s->n_jobs--;
	for (p = &s->hash[sched_hash_of(s, j->name)]; *p; p = &(*p)->hnext)
		if (*p == j) {
			*p = j->hnext;
			break;
		}
}

void sched_job_free(struct sched_job *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->n_workers; i++)
		free(j->workers[i].attempts);
	free(j->workers);
	for (size_t i = 0; j->ports && i < j->n_workers; i++)
		free(j->ports[i]);
	free(j->ports);
	free(j->verdict_reason);
	spec_free(j->spec);
	free(j->name);
	free(j->file);
	free(j->text);
	free(j->reason);
	free(j->dir);
	free(j);
}

/* "2026-11-23T08:50:01.123Z" */
static void sched_timestamp(char *buf, size_t len, long long ns)
{
	time_t t = (time_t)(ns / 1000000000LL);
	struct tm tm;
	size_t n;

	gmtime_r(&t, &tm);
	n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03lldZ", ns / 1000000LL % 1000);
}

/* One line, one write: lines never interleave, and no FILE is made. */
void sched_event(struct sched_job *j, const char *fmt, ...)
{
	char line[1024], path[4096];
	va_list ap;
	size_t n;
	int fd;

	sched_timestamp(line, sizeof(line), sched_now_ns());
	n = strlen(line);
	line[n++] = ' ';
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	n += strlen(line + n);
	line[n++] = '\n';
	snprintf(path, sizeof(path), "%s/events", j->dir);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, line, n) != (ssize_t)n)
		log_warn("job %s: cannot write its events: %s", j->name, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* Remembers that @name ended, for the thread to tell fs/ without the lock. */
static void sched_final_add(struct sched *s, const char *name)
{
	char **v = s->finals;
	char *copy = strdup(name);

	if (s->n_finals == s->cap_finals) {
		s->cap_finals = s->cap_finals ? 2 * s->cap_finals : 16;
		v = realloc(s->finals, s->cap_finals * sizeof(*v));
	}
	if (!v || !copy) {
		free(copy);
		log_err("job %s: out of memory telling its readers it ended", name);
		return;
	}
	s->finals = v;
	v[s->n_finals++] = copy;
}

/* Tells fs/ about the jobs that ended; called without the lock. */
static void sched_final_flush(struct sched *s)
{
	char **v;
	size_t n;

	pthread_mutex_lock(&s->lock);
	v = s->finals;
	n = s->n_finals;
	s->finals = NULL;
	s->n_finals = s->cap_finals = 0;
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		if (s->final)
			s->final(s->final_arg, v[i]);
		free(v[i]);
	}
	free(v);
}

void sched_set_state(struct sched *s, struct sched_job *j, enum sched_state st, const char *fmt, ...)
{
	char *reason = NULL;
	bool changed = st != j->state || !j->reason;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&reason, fmt, ap) < 0)
		reason = NULL;
	va_end(ap);
	if (!changed && reason && j->reason && strcmp(reason, j->reason) == 0) {
		free(reason);
		return;
	}
	free(j->reason);
	j->reason = reason;
	j->state = st;
	if (st == SCHED_RUNNING && !j->started_ns)
		j->started_ns = sched_now_ns();
	if (sched_state_final(st) && !j->ended_ns)
		j->ended_ns = sched_now_ns();
	if (changed)
		sched_event(j, "%s: %s", sched_state_name(st), reason ? reason : "");
	sched_store_status(j);
	if (changed && sched_state_final(st))
		sched_final_add(s, j->name);
}

/* Whether a worker is in a cluster's hands (lock held). */
static bool sched_cluster_live(const struct sched *s)
{
	for (const struct sched_job *j = s->jobs; j; j = j->next)
		for (size_t i = 0; !sched_state_final(j->state) && i < j->n_workers; i++)
			if (j->workers[i].running)
				return true;
	return false;
}

static void *sched_thread(void *arg)
{
	struct sched *s = arg;

	for (;;) {
		struct pollfd pfd[1 + 256];
		struct sched_launch *launches;
		nfds_t nfds = 1;
		int timeout;

		int refresh = -1;

		/* a cluster's one batched look, without the lock: it runs a command */
		refresh = exec_refresh(s->ex);
		pthread_mutex_lock(&s->lock);
		if (s->stop) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		timeout = sched_run_pass(s);
		if (refresh >= 0 && sched_cluster_live(s) && (timeout < 0 || timeout > refresh))
			timeout = refresh;
		launches = s->launches;
		s->launches = NULL;
		for (struct sched_job *j = s->jobs; j && nfds < 257; j = j->next)
			for (size_t i = 0; i < j->n_workers && nfds < 257; i++)
				if (j->workers[i].running && j->workers[i].run.pidfd >= 0)
					pfd[nfds++] = (struct pollfd){ .fd = j->workers[i].run.pidfd,
								       .events = POLLIN };
		pthread_mutex_unlock(&s->lock);
		if (launches) {
			sched_run_launch(s, launches);
			continue;	/* a pass sees the started workers and their pidfds */
		}
		sched_final_flush(s);
		pfd[0] = (struct pollfd){ .fd = s->wake_fd, .events = POLLIN };
		if (nfds >= 257 && (timeout < 0 || timeout > 100))
			timeout = 100;	/* more workers than we watch: poll the rest */
		if (poll(pfd, nfds, timeout) > 0 && (pfd[0].revents & POLLIN)) {
			uint64_t v;

			if (read(s->wake_fd, &v, sizeof(v)) < 0)
				continue;
		}
	}
	return NULL;
}

static int sched_start_thread(struct sched *s)
{
	int ret = pthread_create(&s->thread, NULL, sched_thread, s);

	if (ret != 0)
		return -ret;
	s->thread_started = true;
	return 0;
}

/* The executor [mlfs] executor names, found in the registry; a bad name is said as a config error. */
static int sched_make_executor(struct sched *s)
{
	struct diag d;
	int ret;

	diag_init(&d);
	ret = exec_check_config(s->cfg, &d);
	for (size_t i = 0; i < d.n; i++)
		log_err("%s", d.msgs[i]);
	diag_free(&d);
	return ret < 0 ? ret : exec_create(&s->ex, s->cfg);
}

/*
 * Workers get views (mlfs job) when this is the real mlfs with the real
 * executor: the binary that runs this code, and the config by an absolute
 * path, since the view is mounted by a process started elsewhere.
 */
static void sched_find_views(struct sched *s)
{
	char bin[4096];
	ssize_t n = readlink("/proc/self/exe", bin, sizeof(bin) - 1);

	if (n <= 0)
		return;
	bin[n] = '\0';
	if (strcmp(strrchr(bin, '/') ? strrchr(bin, '/') + 1 : bin, "mlfs") != 0)
		return;		/* a test program: its workers have no views */
	s->config_path = realpath(s->cfg->file, NULL);
	if (s->config_path)
		s->mlfs_bin = strdup(bin);
}

int sched_create(struct sched **out, const struct mlfs_config *cfg, sched_final_fn *final,
		 void *final_arg)
{
	struct sched *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	s->cfg = cfg;
	s->final = final;
	s->final_arg = final_arg;
	s->jobs_tail = &s->jobs;
	s->res_gen = 1;
	s->journal_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->journal_lock, NULL);
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ret = s->wake_fd < 0 ? -errno : sched_node_init(&s->node, cfg);
	if (ret == 0)
		sched_find_views(s);
	if (ret == 0)
		ret = sched_make_executor(s);
	if (ret == 0 && exec_builtin(s->ex->ops))
		container_runtime_detect(&s->containers, cfg, true);
	else if (ret == 0)
		snprintf(s->containers.why, sizeof(s->containers.why),
			 "a test's executor runs no containers");
	if (ret == 0 && sched_cluster(s))
		ret = sched_submitters_start(s);
	if (ret == 0)
		ret = sched_store_open(s);
	if (ret == 0)
		ret = sched_spare_start(s);
	if (ret == 0)
		ret = sched_store_load(s);
	if (ret == 0) {
		sched_run_adopt(s);
		ret = sched_start_thread(s);
	}
	if (ret < 0) {
		sched_destroy(s);
		return ret;
	}
	*out = s;
	return 0;
}

void sched_set_output_check(struct sched *s, sched_output_done_fn *fn, void *arg)
{
	pthread_mutex_lock(&s->lock);
	s->output_done = fn;
	s->output_done_arg = arg;
	pthread_mutex_unlock(&s->lock);
}

void sched_destroy(struct sched *s)
{
	if (!s)
		return;
	if (s->thread_started) {
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		pthread_mutex_unlock(&s->lock);
		sched_wake(s);
		pthread_join(s->thread, NULL);
	}
	sched_submitters_stop(s);
	sched_spare_stop(s);
	while (s->jobs) {
		struct sched_job *j = s->jobs;

		s->jobs = j->next;
		for (size_t i = 0; i < j->n_workers; i++)
			if (j->workers[i].run.pidfd >= 0)
				close(j->workers[i].run.pidfd);
		sched_job_free(j);
	}
	exec_destroy(s->ex);
	sched_store_close(s);
	sched_node_free(&s->node);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	sched_names_free(s->finals, s->n_finals);
	free(s->hash);
	free(s->mlfs_bin);
	free(s->config_path);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->journal_lock);
	free(s);
}

/* The job name a file gives when its spec has none: the file name without its extension. */
static char *sched_default_name(const char *file)
{
	const char *dot = strrchr(file, '.');
	size_t len = dot && dot != file ? (size_t)(dot - file) : strlen(file);

	return strndup(file, len);
}

int sched_job_new(struct sched *s, struct spec *spec, const char *file, const char *text,
			 size_t len, uid_t uid, gid_t gid, struct sched_job **out)
{
	struct sched_job *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	j->spec = spec;
	j->uid = uid;
	j->gid = gid;
	j->text_len = len;
	j->name = strdup(spec->name);
	j->file = strdup(file);
	j->text = malloc(len + 1);
	j->workers = calloc(spec->n_workers, sizeof(*j->workers));
	j->n_workers = spec->n_workers;
	if (asprintf(&j->dir, "%s/%s", s->jobs_dir, spec->name) < 0)
		j->dir = NULL;
	if (!j->name || !j->file || !j->text || !j->workers || !j->dir) {
		j->spec = NULL;
		sched_job_free(j);
		return -ENOMEM;
	}
	memcpy(j->text, text, len);
	j->text[len] = '\0';
	for (size_t i = 0; i < j->n_workers; i++) {
		j->workers[i].n = (unsigned int)i + 1;
		j->workers[i].exit_code = -1;
		j->workers[i].run.pidfd = -1;
	}
	j->accepted_ns = sched_now_ns();
	j->accepted_mono_ns = sched_mono_ns();
	*out = j;
	return 0;
}

/* How many jobs of @uid have not ended (s->lock held). */
static long sched_live_jobs(struct sched *s, uid_t uid)
{
	long n = 0;

	for (struct sched_job *j = s->jobs; j; j = j->next)
		if (j->uid == uid && !sched_state_final(j->state))
			n++;
	return n;
}

/*
 * Links @j at the end of the list, invisible, when its name is free and its
 * owner is under max_jobs: -EEXIST for a name in use, -EAGAIN when the
 * owner has max_jobs unfinished jobs.
 */
static int sched_reserve(struct sched *s, struct sched_job *j, struct diag *d)
{
	long live;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	live = sched_live_jobs(s, j->uid);
	if (sched_find(s, j->name)) {
		ret = -EEXIST;
	} else if (live >= s->cfg->max_jobs) {
		diag_add(d, j->file, 0, "uid %u has %ld jobs that have not ended, the most max_jobs "
			 "allows: wait for one to end, or cancel one", (unsigned int)j->uid, live);
		ret = -EAGAIN;
	} else {
		sched_link(s, j);
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* Appends @text to what the spec lists as ignored (best effort: dropped when out of memory). */
static void sched_spec_ignore(struct spec *sp, const char *text)
{
	char **v = realloc(sp->ignored, (sp->n_ignored + 1) * sizeof(*v));
	char *copy = strdup(text);

	if (v)
		sp->ignored = v;
	if (!v || !copy) {
		free(copy);
		return;
	}
	v[sp->n_ignored++] = copy;
}

/* What a Slurm cluster cannot be asked for (docs/slurm.md). */
static void sched_cluster_ignored(struct spec *sp)
{
	bool price = false, cuda = false, cluster = false, ports = false;

	for (size_t i = 0; i < sp->n_workers; i++) {
		price |= sp->workers[i].res.max_price >= 0;
		cuda |= sp->workers[i].res.min_cuda_version != NULL;
		cluster |= sp->workers[i].res.cluster_id != NULL;
		ports |= sp->workers[i].n_ports > 0;
	}
	if (price)
		sched_spec_ignore(sp, "max_price: a Slurm cluster has no node prices");
	if (cuda)
		sched_spec_ignore(sp, "minCudaVersion: Slurm does not know its nodes' CUDA versions");
	if (cluster)
		sched_spec_ignore(sp, "clusterId: the jobs go to the Slurm cluster of this gateway");
	if (ports)
		sched_spec_ignore(sp, "portList: ports are not reserved on a Slurm cluster; the numbers "
				  "in the PAI_PORT_LIST variables are not held there");
}

/*
 * GPULab's clusterId and slaveName are matched against [node] cluster_id
 * and name; on a node that declares neither they cannot be honoured, so
 * they are listed as ignored (DESIGN §6) and the job runs.
 */
void sched_node_ignored(struct sched *s, struct spec *sp)
{
	bool cluster = false, name = false;

	if (sched_cluster(s)) {
		sched_cluster_ignored(sp);	/* slaveName is --nodelist there */
		return;
	}

	for (size_t i = 0; i < sp->n_workers; i++) {
		cluster |= sp->workers[i].res.cluster_id && !s->node.cluster_id;
		name |= sp->workers[i].res.node_name && !s->node.name;
	}
	if (cluster)
		sched_spec_ignore(sp, "clusterId: this node declares no cluster ([node] cluster_id)");
	if (name)
		sched_spec_ignore(sp, "slaveName: this node declares no name ([node] name)");
}

/*
 * A cluster's compute nodes are taken to have podman and the OCI runtime
 * at the paths found here, as they have mlfs and its config (docs/slurm.md):
 * the gateway's runtime answers for them.
 */
const char *sched_images_why(const struct sched *s)
{
	return s->containers.usable ? NULL : s->containers.why;
}

/* Whether worker @i is the first whose image its spec field names: one message a field. */
static bool sched_image_first(const struct spec *sp, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (sp->workers[k].image.ref &&
		    strcmp(sp->workers[k].image.ref_field, sp->workers[i].image.ref_field) == 0)
			return false;
	return true;
}

int sched_images_check(struct sched *s, struct spec *sp, const char *file, const char *text,
		       size_t len, struct diag *d)
{
	const char *why = sched_images_why(s);
	bool fallback = s->cfg->containers.fallback_host, packages_said = false;
	char msg[512];
	int ret = 0;

	if (!why)
		return 0;
	for (size_t i = 0; i < sp->n_workers; i++) {
		const struct spec_image *img = &sp->workers[i].image;

		if (!img->ref || !sched_image_first(sp, i))
			continue;
		if (fallback && *sp->workers[i].command) {
			/* the image stays: it tells sched_run this worker falls back */
			snprintf(msg, sizeof(msg), "%s: this node runs no container images (%s); "
				 "the command runs on the node ([containers] fallback = host)",
				 img->ref_field, why);
			sched_spec_ignore(sp, msg);
			if (!packages_said && sp->packages.n_apt + sp->packages.n_conda + sp->packages.n_pip)
				sched_spec_ignore(sp, "environment.packages: not installed: the command "
						  "runs on the node, with no image to install them in");
			packages_said = true;
		} else if (d) {
			snprintf(msg, sizeof(msg), "this node cannot run container images: %s%s", why,
				 *sp->workers[i].command ? "" : "; and with an empty command only the "
				 "image's own command could run");
			spec_field_error(d, file, text, len, img->ref_field, msg);
			ret = -EINVAL;
		}
	}
	return ret;
}

/* "file:line:col: name: a job named N exists already", at the spec's name when it has one. */
static void sched_name_taken(struct diag *d, const char *file, const char *text, size_t len,
			     const char *name)
{
	struct json_pos *pos = NULL;
	int line = 1, col = 1;
	char where[4096];

	if (json_pos_build(&pos, text, len) == 0 && json_pos_find(pos, "name", &line, &col) < 0)
		line = col = 1;	/* named after its file */
	json_pos_free(pos);
	snprintf(where, sizeof(where), "%s:%d:%d", file, line, col);
	diag_add(d, where, 0, "name: a job named %s exists already", name);
}

int sched_submit(struct sched *s, const char *file, const char *text, size_t len,
		 uid_t uid, gid_t gid, char **name, struct diag *d)
{
	char *defname = sched_default_name(file);
	struct sched_job *j = NULL;
	struct spec *spec = NULL;
	int ret;

	if (!defname)
		return -ENOMEM;
	ret = spec_parse(&spec, file, text, len, defname, d);
	free(defname);
	if (ret == 0 && (ret = spec_check_data(spec, s->cfg, file, text, len, d)) < 0)
		spec_free(spec);
	if (ret == 0 && (ret = spec_check_environment(spec, s->cfg, file, text, len, d)) < 0)
		spec_free(spec);
	if (ret == 0 && (ret = sched_images_check(s, spec, file, text, len, d)) < 0)
		spec_free(spec);
	if (ret < 0)
		return ret;
	sched_node_ignored(s, spec);
	ret = sched_job_new(s, spec, file, text, len, uid, gid, &j);
	if (ret < 0) {
		spec_free(spec);
		return ret;
	}
	ret = sched_reserve(s, j, d);
	if (ret == -EEXIST)
		sched_name_taken(d, file, text, len, j->name);
	if (ret < 0) {
		sched_job_free(j);
		return ret;
	}
	ret = sched_spare_take(s, j);
	if (ret == 0)
		ret = sched_store_accept(s, j);
	if (ret < 0) {
		pthread_mutex_lock(&s->lock);
		sched_unlink(s, j);
		pthread_mutex_unlock(&s->lock);
		diag_add(d, file, 0, "cannot keep the job in the state folder: %s", strerror(-ret));
		sched_rmtree(j->dir);
		sched_job_free(j);
		return ret == -ENOSPC || ret == -EDQUOT ? ret : -EIO;
	}
	/* Not visible yet, so nothing else writes to its events: no lock. */
	sched_event(j, "accepted from %s, written by uid %u", j->file, (unsigned int)uid);
	for (size_t i = 0; i < j->spec->n_ignored; i++)	/* as sbatch warns at submit */
		sched_event(j, "ignored: %s", j->spec->ignored[i]);
	sched_event(j, "QUEUED: waiting for the scheduler");
	pthread_mutex_lock(&s->lock);
	j->visible = true;
	*name = strdup(j->name);
	/* QUEUED without writing status.json: the journal is what keeps it now. */
	j->state = SCHED_QUEUED;
	j->reason = strdup("waiting for the scheduler");
	pthread_mutex_unlock(&s->lock);
	sched_wake(s);
	return *name ? 0 : -ENOMEM;
}

int sched_names(struct sched *s, char ***names, size_t *n)
{
	char **v;
	size_t i = 0;

	pthread_mutex_lock(&s->lock);
	v = calloc(s->n_jobs + 1, sizeof(*v));
	for (struct sched_job *j = s->jobs; v && j; j = j->next) {
		if (!j->visible)
			continue;
		v[i] = strdup(j->name);
		if (!v[i]) {
			sched_names_free(v, i);
			v = NULL;
			break;
		}
		i++;
	}
	pthread_mutex_unlock(&s->lock);
	if (!v)
		return -ENOMEM;
	*names = v;
	*n = i;
	return 0;
}

void sched_names_free(char **names, size_t n)
{
	if (!names)
		return;
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static struct sched_job *sched_find_visible(struct sched *s, const char *name)
{
	struct sched_job *j = sched_find(s, name);

	return j && j->visible ? j : NULL;
}

int sched_info(struct sched *s, const char *name, struct sched_info *info)
{
	struct sched_job *j;

	pthread_mutex_lock(&s->lock);
	j = sched_find_visible(s, name);
	if (j)
		*info = (struct sched_info){ .uid = j->uid, .gid = j->gid, .state = j->state,
					     .n_workers = j->n_workers,
					     .accepted_ns = j->accepted_ns };
	pthread_mutex_unlock(&s->lock);
	return j ? 0 : -ENOENT;
}

static char *sched_render_worker(const struct sched_worker *w, const char *what)
{
	char *text = NULL;
	int ret = -1;

	if (strcmp(what, "state") == 0)
		ret = asprintf(&text, "%s\n", sched_state_name(w->state));
	else if (strcmp(what, "exit_code") == 0)
		ret = w->exit_code >= 0 ? asprintf(&text, "%d\n", w->exit_code)
					: asprintf(&text, "%s", "");
	return ret < 0 ? NULL : text;
}

static char *sched_render_job(const struct sched_job *j, const char *what)
{
	char *text = NULL;

	if (strcmp(what, "state") == 0) {
		if (asprintf(&text, "%s\n", sched_state_name(j->state)) < 0)
			text = NULL;
	} else if (strcmp(what, "reason") == 0) {
		if (asprintf(&text, "%s\n", j->reason ? j->reason : "") < 0)
			text = NULL;
	} else if (strcmp(what, "status.json") == 0) {
		text = sched_status_json(j);
	} else if (strcmp(what, "spec.json") == 0) {
		text = spec_to_json(j->spec);
	}
	return text;
}

static bool sched_render_known(unsigned int worker, const char *what)
{
	static const char *const job[] = { "state", "reason", "status.json", "spec.json" };

	if (worker)
		return strcmp(what, "state") == 0 || strcmp(what, "exit_code") == 0;
	for (size_t i = 0; i < sizeof(job) / sizeof(job[0]); i++)
		if (strcmp(what, job[i]) == 0)
			return true;
	return false;
}

int sched_render(struct sched *s, const char *name, unsigned int worker, const char *what,
		 char **buf, size_t *len)
{
	struct sched_job *j;
	char *text = NULL;
	int ret = 0;

	if (!sched_render_known(worker, what))
		return -ENOENT;
	pthread_mutex_lock(&s->lock);
	j = sched_find_visible(s, name);
	if (!j || worker > j->n_workers)
		ret = -ENOENT;
	else if (worker)
		text = sched_render_worker(&j->workers[worker - 1], what);
	else
		text = sched_render_job(j, what);
	pthread_mutex_unlock(&s->lock);
	if (ret == 0 && !text)
		ret = -ENOMEM;
	if (ret < 0)
		return ret;
	*buf = text;
	*len = strlen(text);
	return 0;
}

int sched_file_path(struct sched *s, const char *name, unsigned int worker, const char *what,
		    char **path)
{
	struct sched_job *j;
	int ret = -ENOENT;

	if (strcmp(what, "log") != 0 && (worker || strcmp(what, "events") != 0) &&
	    (!worker || (strcmp(what, "output") != 0 && strcmp(what, "log.1") != 0)))
		return -ENOENT;
	pthread_mutex_lock(&s->lock);
	j = sched_find_visible(s, name);
	if (j && worker && worker <= j->n_workers && strcmp(what, "output") == 0) {
		const char *id = j->workers[worker - 1].output_id;

		ret = !id[0] ? -ENOENT : asprintf(path, "%s/outputs/%s/files", s->cfg->state_dir, id) < 0
			? -ENOMEM : 0;
	} else if (j && worker <= j->n_workers) {
		ret = worker ? asprintf(path, "%s/workers/%u/%s", j->dir, worker, what)
			     : asprintf(path, "%s/%s", j->dir, what);
		ret = ret < 0 ? -ENOMEM : 0;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

static bool sched_ctl_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int sched_ctl_parse(const char *buf, size_t len, enum sched_ctl_cmd *cmd)
{
	static const struct {
		const char *word;
		enum sched_ctl_cmd cmd;
	} words[] = { { "cancel", SCHED_CTL_CANCEL } };
	size_t start = 0, end = len;

	if (len > SCHED_CTL_MAX)
		return -EINVAL;
	while (start < end && sched_ctl_blank(buf[start]))
		start++;
	while (end > start && sched_ctl_blank(buf[end - 1]))
		end--;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		if (end - start == strlen(words[i].word) &&
		    memcmp(buf + start, words[i].word, end - start) == 0) {
			*cmd = words[i].cmd;
			return 0;
		}
	}
	return -EINVAL;
}

int sched_ctl(struct sched *s, const char *name, uid_t uid, enum sched_ctl_cmd cmd)
{
	struct sched_job *j;
	int ret;

	if (cmd != SCHED_CTL_CANCEL)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	j = sched_find_visible(s, name);
	if (!j)
		ret = -ENOENT;
	else if (uid != 0 && uid != j->uid)
		ret = -EPERM;
	else if (sched_state_final(j->state))
		ret = -EINVAL;
	else
		ret = sched_run_cancel(s, j);
	pthread_mutex_unlock(&s->lock);
	if (ret == 0)
		sched_wake(s);
	return ret;
}

int sched_remove(struct sched *s, const char *name, uid_t uid)
{
	struct sched_job *j;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	j = sched_find_visible(s, name);
	if (!j)
		ret = -ENOENT;
	else if (uid != 0 && uid != j->uid)
		ret = -EPERM;
	else if (!sched_state_final(j->state))
		ret = -EBUSY;
	else
		ret = sched_store_remove(s, name);
	if (ret == 0)
		sched_unlink(s, j);
	pthread_mutex_unlock(&s->lock);
	if (ret == 0) {
		sched_rmtree(j->dir);
		sched_job_free(j);
	}
	return ret;
}
