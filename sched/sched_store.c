/*
 * sched_store.c - what makes jobs survive the daemon: the journal and status.json.
 *
 * state_dir/jobs.journal is the durable record of which jobs exist: one
 * JSON line per event, {"op":"accept", ..., "spec": "<the spec as written>"}
 * or {"op":"remove","name":...}.  An acceptance is one append and one
 * fdatasync (about 0.2 ms here, against 1.2 ms for a folder, a file and
 * three fsyncs), so a job is durable before its writer's close returns.  At
 * start the journal is read back, a torn last line is skipped, and it is
 * rewritten with the live jobs only.
 *
 * state_dir/jobs/NAME/ holds what a job produces: status.json (rewritten by
 * rename at each change, so a reader never sees half of it), events, log
 * and workers/N/{log, exit.A, ml/}.  status.json also carries what a new
 * daemon needs to adopt running workers: pid, start time, cgroup, GPUs.
 * It is not fsync'd: a killed daemon loses nothing the page cache holds,
 * and after a power loss a job whose status is missing starts again from
 * QUEUED.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "sched_int.h"

static int sched_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static int sched_mkdir(const char *path, mode_t mode)
{
	return mkdir(path, mode) < 0 && errno != EEXIST ? -errno : 0;
}

/* Appends @rec as one line and makes it durable; takes the journal lock. */
static int sched_journal_append(struct sched *s, json_t *rec)
{
	char *line = json_dumps(rec, JSON_COMPACT);
	size_t len;
	off_t end;
	int ret = 0;

	json_decref(rec);
	if (!line)
		return -ENOMEM;
	len = strlen(line);
	line[len] = '\n';	/* json_dumps leaves room: the NUL becomes the newline */
	pthread_mutex_lock(&s->journal_lock);
	end = lseek(s->journal_fd, 0, SEEK_END);
	errno = 0;
	if (write(s->journal_fd, line, len + 1) != (ssize_t)(len + 1)) {
		ret = errno ? -errno : -ENOSPC;
		/* no torn line left for the next record to be glued onto */
		if (end >= 0 && ftruncate(s->journal_fd, end) < 0)
			log_err("journal %s: cannot cut a torn record: %s", s->journal_path,
				strerror(errno));
	} else if (fdatasync(s->journal_fd) < 0) {
		ret = -errno;
	}
	pthread_mutex_unlock(&s->journal_lock);
	free(line);
	return ret;
}

/*
 * The accept record; with the [environment] a base environment was given
 * at acceptance, which the job keeps (spec_env.c) whatever the config says
 * later.
 */
static json_t *sched_accept_record(const struct sched_job *j)
{
	const struct spec *sp = j->spec;
	json_t *rec = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:s%}", "op", "accept",
				"name", j->name, "file", j->file, "uid", (json_int_t)j->uid,
				"gid", (json_int_t)j->gid, "accepted_ns", (json_int_t)j->accepted_ns,
				"spec", j->text, j->text_len);

	if (rec && sp->base_env.name && sp->n_workers && sp->workers[0].image.ref &&
	    json_object_set_new(rec, "environment", json_pack("{s:s, s:s}", "name",
				sp->base_env.name, "image", sp->workers[0].image.ref)) < 0) {
		json_decref(rec);
		rec = NULL;
	}
	return rec;
}

int sched_store_accept(struct sched *s, const struct sched_job *j)
{
	json_t *rec = sched_accept_record(j);

	return rec ? sched_journal_append(s, rec) : -EINVAL;
}

int sched_store_remove(struct sched *s, const char *name)
{
	json_t *rec = json_pack("{s:s, s:s}", "op", "remove", "name", name);

	return rec ? sched_journal_append(s, rec) : -ENOMEM;
}

int sched_store_open(struct sched *s)
{
	const char *state = s->cfg->state_dir;
	int ret;

	if (asprintf(&s->jobs_dir, "%s/jobs", state) < 0 ||
	    asprintf(&s->journal_path, "%s/jobs.journal", state) < 0)
		return -ENOMEM;
	ret = sched_mkdir(state, 0755);
	if (ret == 0)
		ret = sched_mkdir(s->jobs_dir, 0755);

	if (ret < 0)
		log_err("state_dir %s: %s", state, strerror(-ret));
	return ret;
}

void sched_store_close(struct sched *s)
{
	if (s->journal_fd >= 0)
		close(s->journal_fd);
	free(s->jobs_dir);
	free(s->journal_path);
}

/* ---- status.json ---- */

static json_t *sched_time_json(long long ns)
{
	char buf[64];
	time_t t = (time_t)(ns / 1000000000LL);
	struct tm tm;
	size_t n;

	if (!ns)
		return json_null();
	gmtime_r(&t, &tm);
	n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, sizeof(buf) - n, ".%06lldZ", ns / 1000LL % 1000000);
	return json_string(buf);
}

/* "NAME=VERSION ..." as {"NAME": "VERSION", ...}. */
static json_t *sched_sources_json(const char *words)
{
	json_t *o = json_object();
	char *copy = strdup(words), *save = NULL;

	for (char *w = copy ? strtok_r(copy, " ", &save) : NULL; w; w = strtok_r(NULL, " ", &save)) {
		char *eq = strrchr(w, '=');

		if (eq) {
			*eq = '\0';
			json_object_set_new(o, w, json_string(eq + 1));
		}
	}
	free(copy);
	return o;
}

/* The reverse of sched_sources_json, into @out. */
static void sched_load_sources(json_t *o, char *out, size_t size)
{
	const char *name;
	json_t *v;
	size_t used = 0;

	out[0] = '\0';
	json_object_foreach(o, name, v)
		if (json_is_string(v) && used < size)
			used += (size_t)snprintf(out + used, size - used, "%s%s=%s", used ? " " : "",
						 name, json_string_value(v));
	if (used >= size)
		out[0] = '\0';	/* cut short: better none than a wrong one */
}

static json_t *sched_worker_json(const struct sched_worker *w)
{
	json_t *o = json_object(), *att = json_array(), *gpus = json_array();

	for (unsigned int i = 0; i < w->n_attempts; i++) {
		const struct sched_attempt *a = &w->attempts[i];
		json_t *ag = json_array();

		for (unsigned int k = 0; k < a->n_gpus; k++)
			json_array_append_new(ag, json_integer(a->gpus[k]));
		json_array_append_new(att, json_pack("{s:I, s:o, s:o, s:I, s:I, s:s, s:o}", "attempt",
						     (json_int_t)i + 1, "started", sched_time_json(a->started_ns),
						     "ended", sched_time_json(a->ended_ns),
						     "started_ns", (json_int_t)a->started_ns,
						     "ended_ns", (json_int_t)a->ended_ns, "end", a->end,
						     "gpus", ag));
	}
	for (unsigned int i = 0; i < w->n_gpus; i++)
		json_array_append_new(gpus, json_integer(w->gpus[i]));
	json_object_set_new(o, "worker", json_integer(w->n));
	json_object_set_new(o, "state", json_string(sched_state_name(w->state)));
	json_object_set_new(o, "exit_code", w->exit_code >= 0 ? json_integer(w->exit_code) : json_null());
	json_object_set_new(o, "attempts", att);
	json_object_set_new(o, "gpus", gpus);
	json_object_set_new(o, "timed_out", json_boolean(w->timed_out));
	if (w->output_id[0]) {
		json_object_set_new(o, "output", json_string(w->output_id));
		json_object_set_new(o, "upload_failed", json_boolean(w->upload_failed));
	}
	if (w->cluster_id[0])
		json_object_set_new(o, "slurm_job_id", json_string(w->cluster_id));
	if (w->sources[0])
		json_object_set_new(o, "sources", sched_sources_json(w->sources));
	if (w->running && w->pending && w->wait_why[0])
		json_object_set_new(o, "waiting", json_string(w->wait_why));
	if (w->running)
		json_object_set_new(o, "run", json_pack("{s:I, s:I, s:I, s:s, s:s, s:I}", "pid",
							(json_int_t)w->run.pid,
							"start_time", (json_int_t)w->run.start_time,
							"pgid", (json_int_t)w->run.pgid,
							"cgroup", w->run.cgroup,
							"cluster_id", w->run.cluster_id,
							"restarts", (json_int_t)w->run.restarts));
	return o;
}

static json_t *sched_status_object(const struct sched_job *j)
{
	json_t *o = json_object(), *workers = json_array(), *ignored = json_array();

	for (size_t i = 0; i < j->n_workers; i++)
		json_array_append_new(workers, sched_worker_json(&j->workers[i]));
	for (size_t i = 0; i < j->spec->n_ignored; i++)
		json_array_append_new(ignored, json_string(j->spec->ignored[i]));
	json_object_set_new(o, "name", json_string(j->name));
	json_object_set_new(o, "file", json_string(j->file));
	json_object_set_new(o, "format", json_string(spec_format_name(j->spec->format)));
	json_object_set_new(o, "uid", json_integer(j->uid));
	json_object_set_new(o, "gid", json_integer(j->gid));
	json_object_set_new(o, "state", json_string(sched_state_name(j->state)));
	json_object_set_new(o, "reason", json_string(j->reason ? j->reason : ""));
	json_object_set_new(o, "cancelled", json_boolean(j->cancelled));
	json_object_set_new(o, "accepted", sched_time_json(j->accepted_ns));
	json_object_set_new(o, "started", sched_time_json(j->started_ns));
	json_object_set_new(o, "ended", sched_time_json(j->ended_ns));
	json_object_set_new(o, "accepted_ns", json_integer(j->accepted_ns));
	json_object_set_new(o, "started_ns", json_integer(j->started_ns));
	json_object_set_new(o, "ended_ns", json_integer(j->ended_ns));
	json_object_set_new(o, "retry_count", json_integer(j->spec->retry_count));
	json_object_set_new(o, "job_attempt", json_integer((json_int_t)j->job_attempt + 1));
	json_object_set_new(o, "workers", workers);
	json_object_set_new(o, "ignored", ignored);
	return o;
}

char *sched_status_json(const struct sched_job *j)
{
	json_t *o = sched_status_object(j);
	char *text = json_dumps(o, JSON_INDENT(2));
	char *out = NULL;

	json_decref(o);
	if (text && asprintf(&out, "%s\n", text) < 0)
		out = NULL;
	free(text);
	return out;
}

/*
 * Rewrites status.json in place: one pwrite from offset 0, then cut to
 * length.  A daemon killed between the two leaves the new text followed by
 * a tail of the old, which sched_load_status reads past (it stops at the
 * end of the first JSON value).  In place rather than by rename, because a
 * new inode per change made ext4 spend most of a busy node's time
 * allocating and freeing inodes.
 */
void sched_store_status(struct sched_job *j)
{
	char path[4096];
	char *text = sched_status_json(j);
	size_t len = text ? strlen(text) : 0;
	int fd;

	snprintf(path, sizeof(path), "%s/status.json", j->dir);
	fd = text ? open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;
	if (fd < 0 || pwrite(fd, text, len, 0) != (ssize_t)len || ftruncate(fd, (off_t)len) < 0)
		log_warn("job %s: cannot save its status: %s", j->name, text ? strerror(errno) : "no memory");
	if (fd >= 0)
		close(fd);
	free(text);
}

/* ---- the job's folder ---- */

/*
 * The job's folder, made here when no spare one is ready (sched_spare.c) or
 * a job is read back.  Nothing else is made with it: events appear with the
 * first event, status.json with the first change after QUEUED, the logs and
 * workers/N/ when a worker first starts (sched_run.c); fs_jobs.c shows a
 * file not made yet as empty.
 */
int sched_make_dirs(struct sched_job *j)
{
	return sched_mkdir(j->dir, 0711);
}

static int sched_rmtree_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT)
		log_warn("cannot remove %s: %s", path, strerror(errno));
	return 0;
}

int sched_rmtree(const char *path)
{
	return nftw(path, sched_rmtree_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0 ? -errno : 0;
}

/* ---- loading ---- */

static enum sched_state sched_state_parse(const char *name)
{
	for (int st = SCHED_QUEUED; st <= SCHED_RETRYING; st++)
		if (name && strcmp(name, sched_state_name((enum sched_state)st)) == 0)
			return (enum sched_state)st;
	return SCHED_QUEUED;
}

static void sched_load_attempts(struct sched_worker *w, json_t *att)
{
	size_t n = json_array_size(att);

	w->attempts = n ? calloc(n, sizeof(*w->attempts)) : NULL;
	if (!w->attempts)
		return;
	w->n_attempts = (unsigned int)n;
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_array_get(att, i);
		const char *end = json_string_value(json_object_get(a, "end"));

		w->attempts[i].started_ns = json_integer_value(json_object_get(a, "started_ns"));
		w->attempts[i].ended_ns = json_integer_value(json_object_get(a, "ended_ns"));
		json_t *gpus = json_object_get(a, "gpus");

		snprintf(w->attempts[i].end, sizeof(w->attempts[i].end), "%s", end ? end : "");
		for (size_t k = 0; k < json_array_size(gpus) && k < SCHED_MAX_GPUS; k++) {
			json_int_t g = json_integer_value(json_array_get(gpus, k));

			if (g >= 0 && g < SCHED_MAX_GPUS)
				w->attempts[i].gpus[w->attempts[i].n_gpus++] = (unsigned char)g;
		}
	}
}

static void sched_load_worker(struct sched_job *j, struct sched_worker *w, json_t *o)
{
	json_t *run = json_object_get(o, "run"), *gpus = json_object_get(o, "gpus");
	json_t *code = json_object_get(o, "exit_code");
	const char *cg = json_string_value(json_object_get(run, "cgroup"));

	w->state = sched_state_parse(json_string_value(json_object_get(o, "state")));
	w->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
	w->timed_out = json_is_true(json_object_get(o, "timed_out"));
	w->upload_failed = json_is_true(json_object_get(o, "upload_failed"));
	if (json_string_value(json_object_get(o, "output")))
		snprintf(w->output_id, sizeof(w->output_id), "%s",
			 json_string_value(json_object_get(o, "output")));
	sched_load_attempts(w, json_object_get(o, "attempts"));
	sched_load_sources(json_object_get(o, "sources"), w->sources, sizeof(w->sources));
	if (json_string_value(json_object_get(o, "slurm_job_id")))
		snprintf(w->cluster_id, sizeof(w->cluster_id), "%s",
			 json_string_value(json_object_get(o, "slurm_job_id")));
	if (!run || w->n_attempts == 0)
		return;
	snprintf(w->run.cluster_id, sizeof(w->run.cluster_id), "%s",
		 json_string_value(json_object_get(run, "cluster_id")) ?
		 json_string_value(json_object_get(run, "cluster_id")) : "");
	w->run.restarts = (unsigned int)json_integer_value(json_object_get(run, "restarts"));
	w->running = true;
	w->run.pid = (pid_t)json_integer_value(json_object_get(run, "pid"));
	w->run.pgid = (pid_t)json_integer_value(json_object_get(run, "pgid"));
	w->run.start_time = (unsigned long long)json_integer_value(json_object_get(run, "start_time"));
	snprintf(w->run.cgroup, sizeof(w->run.cgroup), "%s", cg ? cg : "");
	snprintf(w->run.exit_path, sizeof(w->run.exit_path), "%s/workers/%u/exit.%u", j->dir, w->n,
		 w->n_attempts);
	for (size_t i = 0; i < json_array_size(gpus) && i < SCHED_MAX_GPUS; i++)
		w->gpus[w->n_gpus++] = (int)json_integer_value(json_array_get(gpus, i));
}

/* Restores what status.json says; a job without one starts again from QUEUED. */
static void sched_load_status(struct sched_job *j)
{
	char path[4096];
	json_t *o, *workers;

	snprintf(path, sizeof(path), "%s/status.json", j->dir);
	o = json_load_file(path, JSON_DISABLE_EOF_CHECK, NULL);
	if (!o)
		return;
	j->state = sched_state_parse(json_string_value(json_object_get(o, "state")));
	free(j->reason);
	j->reason = json_string_value(json_object_get(o, "reason")) ?
		strdup(json_string_value(json_object_get(o, "reason"))) : NULL;
	j->cancelled = json_is_true(json_object_get(o, "cancelled"));
	if (json_integer_value(json_object_get(o, "job_attempt")) > 1)
		j->job_attempt = (unsigned int)json_integer_value(json_object_get(o, "job_attempt")) - 1;
	j->started_ns = json_integer_value(json_object_get(o, "started_ns"));
	j->ended_ns = json_integer_value(json_object_get(o, "ended_ns"));
	workers = json_object_get(o, "workers");
	for (size_t i = 0; i < j->n_workers && i < json_array_size(workers); i++)
		sched_load_worker(j, &j->workers[i], json_array_get(workers, i));
	json_decref(o);
}

/* Makes the job of an accept record; NULL (logged) when it cannot be read back. */
static struct sched_job *sched_load_job(struct sched *s, json_t *rec)
{
	const char *name = json_string_value(json_object_get(rec, "name"));
	const char *file = json_string_value(json_object_get(rec, "file"));
	json_t *text = json_object_get(rec, "spec"), *env;
	const char *ename, *eimage;
	struct sched_job *j = NULL;
	struct spec *spec = NULL;
	struct diag d;

	if (!name || !file || !json_is_string(text))
		return NULL;
	diag_init(&d);
	if (spec_parse(&spec, file, json_string_value(text), json_string_length(text), name, &d) < 0 ||
	    strcmp(spec->name, name) != 0) {
		log_err("job %s: its spec no longer reads: %s", name, d.n ? d.msgs[0] : "name changed");
		spec_free(spec);
		diag_free(&d);
		return NULL;
	}
	diag_free(&d);
	env = json_object_get(rec, "environment");
	ename = json_string_value(json_object_get(env, "name"));
	eimage = json_string_value(json_object_get(env, "image"));
	if (ename && eimage && spec_set_environment(spec, ename, eimage) < 0) {
		spec_free(spec);
		return NULL;
	}
	sched_images_check(s, spec, file, NULL, 0, NULL);
	sched_node_ignored(s, spec);
	if (sched_job_new(s, spec, file, json_string_value(text), json_string_length(text),
			  (uid_t)json_integer_value(json_object_get(rec, "uid")),
			  (gid_t)json_integer_value(json_object_get(rec, "gid")), &j) < 0)
		return NULL;
	j->accepted_ns = json_integer_value(json_object_get(rec, "accepted_ns"));
	j->accepted_mono_ns = sched_mono_ns() - (sched_now_ns() - j->accepted_ns);
	j->visible = true;
	if (sched_make_dirs(j) < 0)
		log_warn("job %s: cannot make its folder %s", j->name, j->dir);
	sched_load_status(j);
	return j;
}

/* Applies one journal record to the list being built. */
static void sched_load_record(struct sched *s, json_t *rec)
{
	const char *op = json_string_value(json_object_get(rec, "op"));
	const char *name = json_string_value(json_object_get(rec, "name"));
	struct sched_job *j = name ? sched_find(s, name) : NULL;

	if (op && strcmp(op, "remove") == 0 && j) {
		sched_unlink(s, j);
		sched_job_free(j);
	} else if (op && strcmp(op, "accept") == 0 && !j) {
		j = sched_load_job(s, rec);
		if (j)
			sched_link(s, j);
	}
}

/* Rewrites the journal with the live jobs only, then opens it for appending. */
static int sched_journal_compact(struct sched *s)
{
	char tmp[4096];
	FILE *f;
	int fd, ret = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", s->journal_path);
	/* 0600: the specs it keeps may hold their users' tokens */
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		ret = -errno;
		if (fd >= 0)
			close(fd);
		return ret;
	}
	for (struct sched_job *j = s->jobs; j && ret == 0; j = j->next) {
		json_t *rec = sched_accept_record(j);

		if (!rec || json_dumpf(rec, f, JSON_COMPACT) < 0 || fputc('\n', f) == EOF)
			ret = -EIO;
		json_decref(rec);
	}
	if (fflush(f) != 0 || fdatasync(fileno(f)) < 0)
		ret = -errno;
	if (fclose(f) != 0 && ret == 0)
		ret = -errno;
	if (ret == 0 && rename(tmp, s->journal_path) < 0)
		ret = -errno;
	if (ret == 0)
		ret = sched_fsync_dir(s->cfg->state_dir);
	if (ret == 0) {
		s->journal_fd = open(s->journal_path, O_WRONLY | O_APPEND | O_CLOEXEC);
		ret = s->journal_fd < 0 ? -errno : 0;
	}
	return ret;
}

int sched_store_load(struct sched *s)
{
	FILE *f = fopen(s->journal_path, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0, ret;

	while (f && (n = getline(&line, &cap, f)) > 0) {
		json_error_t err;
		json_t *rec = json_loadb(line, (size_t)n, 0, &err);

		lineno++;
		if (!rec) {
			log_warn("%s:%d: skipped a torn record: %s", s->journal_path, lineno, err.text);
			continue;
		}
		sched_load_record(s, rec);
		json_decref(rec);
	}
	free(line);
	if (!f && errno != ENOENT)
		return -errno;
	if (f)
		fclose(f);
	ret = sched_journal_compact(s);
	if (ret < 0)
		log_err("%s: %s", s->journal_path, strerror(-ret));
	if (s->n_jobs)
		log_info("jobs: %zu read back from %s", s->n_jobs, s->journal_path);
	return ret;
}
