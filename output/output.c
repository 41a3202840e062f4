/*
 * output.c - the output folders under state_dir/outputs: making and reading
 * them, their locks, journal and progress file, and the listing that
 * .mlfs/uploads and `mlfs sync` walk.  The upload itself is
 * output_upload.c.
 *
 * Durability: output.json is written to a temporary name, fsync'd and
 * renamed before the mount starts, so a crash never leaves half a record;
 * every journal line is appended and fdatasync'd before the step it
 * records is taken as done.  A torn last line (a crash mid-append) does not
 * parse and is ignored, which only means that step is done again.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>

#include "lockfile.h"
#include "log.h"
#include "output.h"
#include "output_int.h"
#include "spec.h"

static int output_mkdir(const char *path, mode_t mode)
{
	return mkdir(path, mode) < 0 && errno != EEXIST ? -errno : 0;
}

int output_write_file(const char *dir, const char *name, const char *text, bool durable)
{
	char *tmp = NULL, *final = NULL;
	size_t len = strlen(text);
	int fd = -1, ret = 0;

	if (asprintf(&tmp, "%s/.%s.tmp", dir, name) < 0 || asprintf(&final, "%s/%s", dir, name) < 0) {
		ret = -ENOMEM;
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || (durable && fsync(fd) < 0))
		ret = errno ? -errno : -EIO;
	if (fd >= 0 && close(fd) < 0 && ret == 0)
		ret = -errno;
	if (ret == 0 && rename(tmp, final) < 0)
		ret = -errno;
	if (ret < 0)
		unlink(tmp);
out:
	free(tmp);
	free(final);
	return ret;
}

int output_journal_add(const struct output *o, json_t *entry)
{
	char *line = json_dumps(entry, JSON_COMPACT), *path = NULL;
	int fd, ret = 0;

	json_decref(entry);
	if (!line || asprintf(&path, "%s/journal", o->dir) < 0) {
		free(line);
		return -ENOMEM;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
	} else {
		size_t len = strlen(line);

		line[len] = '\n';	/* over the NUL: written by length from here on */
		if (write(fd, line, len + 1) != (ssize_t)(len + 1) || fdatasync(fd) < 0)
			ret = errno ? -errno : -EIO;
		close(fd);
	}
	free(line);
	free(path);
	return ret;
}

int output_journal_read(const struct output *o, output_journal_fn *fn, void *arg)
{
	char *path, *line = NULL;
	size_t cap = 0;
	FILE *f;

	if (asprintf(&path, "%s/journal", o->dir) < 0)
		return -ENOMEM;
	f = fopen(path, "re");
	free(path);
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (getline(&line, &cap, f) > 0) {
		json_t *e = json_loads(line, 0, NULL);

		if (!e)
			continue;	/* a torn last line */
		fn(arg, e);
		json_decref(e);
	}
	free(line);
	fclose(f);
	return 0;
}

static void output_complete_fn(void *arg, json_t *e)
{
	if (json_object_get(e, "complete"))
		*(bool *)arg = true;
}

bool output_complete(const struct output *o)
{
	bool done = false;

	output_journal_read(o, output_complete_fn, &done);
	return done;
}

bool output_complete_dir(const char *dir)
{
	struct output o = { .dir = (char *)dir, .live_fd = -1 };

	return output_complete(&o);
}

void output_progress_write(const struct output *o, const char *phase, uint64_t done,
			   uint64_t total, const char *error)
{
	json_t *p = json_pack("{s:s, s:I, s:I, s:i, s:I}", "phase", phase, "done", (json_int_t)done,
			      "total", (json_int_t)total, "pid", (int)getpid(),
			      "updated", (json_int_t)time(NULL));
	char *text;

	if (p && error)
		json_object_set_new(p, "error", json_string(error));
	text = p ? json_dumps(p, JSON_COMPACT) : NULL;
	if (text)
		output_write_file(o->dir, "progress.json", text, false);
	free(text);
	json_decref(p);
}

/* ---- making and reading ---- */

static char *output_new_id(const struct spec *s, unsigned int worker)
{
	struct timespec ts;
	struct tm tm;
	char when[32];
	char *id;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y%m%dT%H%M%S", &tm);
	if (asprintf(&id, "%s.%u.%s.%09ld.%d", s->name, worker, when, ts.tv_nsec, (int)getpid()) < 0)
		return NULL;
	return id;
}

/* Takes @name's flock in @dir: @block waits for it.  The fd, or a negated errno. */
int output_lock(const char *dir, const char *name, bool block)
{
	char *path;
	int fd;

	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return -ENOMEM;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	free(path);
	if (fd < 0)
		return -errno;
	while (flock(fd, LOCK_EX | (block ? 0 : LOCK_NB)) < 0) {
		int err = errno;

		if (err == EINTR && block)
			continue;
		close(fd);
		return -err;
	}
	return fd;
}

int output_create(struct output **out, const char *state_dir, const char *config_file,
		  const struct spec *s, unsigned int worker, const char *id, uid_t uid, gid_t gid)
{
	const struct spec_location *dest = &s->data.output;
	struct output *o = calloc(1, sizeof(*o));
	char *top = NULL, *files = NULL, *text = NULL;
	json_t *j;
	int ret = -ENOMEM;

	if (!o)
		return -ENOMEM;
	o->live_fd = -1;
	o->worker = worker;
	o->workers = (unsigned int)s->n_workers;
	o->archive = dest->archive;
	o->uid = uid;
	o->gid = gid;
	o->id = id ? strdup(id) : output_new_id(s, worker);
	o->job = strdup(s->name);
	o->type = strdup(dest->type ? dest->type : "none");
	o->kind = spec_output_kind(o->type);
	o->path = strdup(dest->path ? dest->path : "");
	o->config = realpath(config_file, NULL);
	if (!o->id || !o->job || !o->type || !o->path || !o->config ||
	    asprintf(&top, "%s/outputs", state_dir) < 0)
		goto fail;
	if (asprintf(&o->dir, "%s/%s", top, o->id) < 0) {
		o->dir = NULL;
		goto fail;
	}
	/* Searchable, not listable: the owner reaches files/ (jobs/NAME/workers/N/output). */
	if ((ret = output_mkdir(top, 0711)) < 0)
		goto fail;
	/* A named output is made once: never two views over one output. */
	if (mkdir(o->dir, 0711) < 0 && (errno != EEXIST || id)) {
		ret = -errno;
		goto fail;
	}
	ret = -ENOMEM;
	files = output_files(o);
	if (!files)
		goto fail;
	/* The worker's uid owns what it writes; the folder above stays root's. */
	if ((ret = output_mkdir(files, 0700)) < 0 ||
	    (geteuid() == 0 && chown(files, uid, gid) < 0 && (ret = -errno)))
		goto fail;
	ret = o->live_fd = output_lock(o->dir, "live.lock", false);
	if (ret < 0)
		goto fail;
	j = json_pack("{s:s, s:s, s:i, s:i, s:s, s:s, s:b, s:s, s:i, s:i, s:I}", "id", o->id,
		      "job", o->job, "worker", (int)worker, "workers", (int)o->workers,
		      "type", o->type, "path", o->path, "archive", o->archive, "config", o->config,
		      "uid", (int)uid, "gid", (int)gid, "created", (json_int_t)time(NULL));
	text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
	json_decref(j);
	ret = text ? output_write_file(o->dir, "output.json", text, true) : -ENOMEM;
	if (ret < 0)
		goto fail;
	output_progress_write(o, "staging", 0, 0, NULL);
	free(top);
	free(files);
	free(text);
	*out = o;
	return 0;
fail:
	free(top);
	free(files);
	free(text);
	output_free(o);
	return ret;
}

static char *output_json_str(json_t *j, const char *key)
{
	const char *v = json_string_value(json_object_get(j, key));

	return v ? strdup(v) : NULL;
}

int output_open(struct output **out, const char *dir)
{
	struct output *o = calloc(1, sizeof(*o));
	char *path = NULL;
	json_t *j = NULL;
	int ret = -ENOMEM;

	if (!o)
		return -ENOMEM;
	o->live_fd = -1;
	o->dir = strdup(dir);
	if (!o->dir || asprintf(&path, "%s/output.json", dir) < 0)
		goto fail;
	j = json_load_file(path, 0, NULL);
	if (!j) {
		ret = access(path, F_OK) < 0 ? -ENOENT : -EINVAL;
		goto fail;
	}
	ret = -EINVAL;
	o->id = output_json_str(j, "id");
	o->job = output_json_str(j, "job");
	o->type = output_json_str(j, "type");
	o->kind = spec_output_kind(o->type);
	o->path = output_json_str(j, "path");
	o->config = output_json_str(j, "config");
	o->worker = (unsigned int)json_integer_value(json_object_get(j, "worker"));
	o->workers = (unsigned int)json_integer_value(json_object_get(j, "workers"));
	o->archive = json_is_true(json_object_get(j, "archive"));
	o->uid = (uid_t)json_integer_value(json_object_get(j, "uid"));
	o->gid = (gid_t)json_integer_value(json_object_get(j, "gid"));
	if (!o->id || !o->job || !o->type || !o->path || !o->config || o->worker < 1 ||
	    o->workers < o->worker)
		goto fail;
	json_decref(j);
	free(path);
	*out = o;
	return 0;
fail:
	json_decref(j);
	free(path);
	output_free(o);
	return ret;
}

void output_free(struct output *o)
{
	if (!o)
		return;
	if (o->live_fd >= 0)
		close(o->live_fd);
	free(o->dir);
	free(o->id);
	free(o->job);
	free(o->type);
	free(o->path);
	free(o->config);
	free(o);
}

void output_discard(struct output *o)
{
	static const char *const names[] = { "files", "output.json", "progress.json", "live.lock",
		NULL };

	for (const char *const *n = names; *n; n++) {
		char *p;

		if (asprintf(&p, "%s/%s", o->dir, *n) < 0)
			continue;
		if (remove(p) < 0 && errno != ENOENT) {
			free(p);
			return;		/* something is in there after all: keep it */
		}
		free(p);
	}
	rmdir(o->dir);
}

char *output_files(const struct output *o)
{
	char *p;

	return asprintf(&p, "%s/files", o->dir) < 0 ? NULL : p;
}

/* The lock file a view's process holds while it has the output in @dir mounted. */
static char *output_live_lock(const char *dir)
{
	char *path;

	return asprintf(&path, "%s/live.lock", dir) < 0 ? NULL : path;
}

bool output_live(const char *dir)
{
	char *path = output_live_lock(dir);
	bool live = path && lockfile_held(path);

	free(path);
	return live;
}

int output_wait_unmounted(const char *dir, int seconds)
{
	char *path = output_live_lock(dir);
	int ret = path ? lockfile_wait(path, seconds) : -ENOMEM;

	free(path);
	return ret;
}

int output_zip_name(const struct output *o, char *buf, size_t size)
{
	int n = o->workers > 1 ? snprintf(buf, size, "%s_%u.zip", o->job, o->worker)
			       : snprintf(buf, size, "%s.zip", o->job);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* ---- every output of a state dir ---- */

int output_each(const char *state_dir, output_each_fn *fn, void *arg)
{
	char *top;
	struct dirent **names = NULL;
	int n, ret = 0;

	if (asprintf(&top, "%s/outputs", state_dir) < 0)
		return -ENOMEM;
	n = scandir(top, &names, NULL, alphasort);
	if (n < 0) {
		ret = errno == ENOENT ? 0 : -errno;
		free(top);
		return ret;
	}
	for (int i = 0; i < n; i++) {
		char *dir = NULL;

		if (ret == 0 && names[i]->d_name[0] != '.' &&
		    asprintf(&dir, "%s/%s", top, names[i]->d_name) >= 0) {
			ret = fn(arg, dir);
			free(dir);
		}
		free(names[i]);
	}
	free(names);
	free(top);
	return ret;
}

struct output_status {
	FILE *f;
};

static int output_status_one(void *arg, const char *dir)
{
	struct output_status *st = arg;
	struct output *o;
	char *path;
	json_t *p = NULL;
	const char *phase = "staging", *error = NULL;
	json_int_t done = 0, total = 0;

	if (output_open(&o, dir) < 0)
		return 0;
	if (asprintf(&path, "%s/progress.json", dir) >= 0) {
		p = json_load_file(path, 0, NULL);
		free(path);
	}
	if (p) {
		phase = json_string_value(json_object_get(p, "phase")) ?: phase;
		done = json_integer_value(json_object_get(p, "done"));
		total = json_integer_value(json_object_get(p, "total"));
		error = json_string_value(json_object_get(p, "error"));
	}
	if (output_complete(o))
		phase = "done";
	else if (output_live(dir))
		phase = "staging";
	fprintf(st->f, "%s %s %u %s %lld %lld %s:%s%s%s\n", o->id, o->job, o->worker, phase,
		(long long)done, (long long)total, o->type, o->path, error ? " " : "",
		error ? error : "");
	json_decref(p);
	output_free(o);
	return 0;
}

int output_status_text(const char *state_dir, char **buf, size_t *len)
{
	struct output_status st;
	int ret;

	*buf = NULL;
	*len = 0;
	st.f = open_memstream(buf, len);
	if (!st.f)
		return -ENOMEM;
	ret = output_each(state_dir, output_status_one, &st);
	if (fclose(st.f) != 0 && ret == 0)
		ret = -ENOMEM;
	return ret;
}
