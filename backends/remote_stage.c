/*
 * remote_stage.c - staging files, writers lists and parallel parts for the
 * object-store backends (remote_stage.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "log.h"
#include "mono.h"
#include "remote.h"
#include "remote_stage.h"

#define REMOTE_PARTS_THREADS_MAX	16

/* An anonymous file in @dir (made with its parents), gone when closed. */
static int remote_staging_fd(const char *dir)
{
	char *tmpl = strdup(dir);
	int fd;

	if (!tmpl)
		return -ENOMEM;
	for (char *p = tmpl + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(tmpl, 0700);
		*p = '/';
	}
	mkdir(tmpl, 0700);
	free(tmpl);
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd >= 0 ? fd : -errno;
	if (asprintf(&tmpl, "%s/upload.XXXXXX", dir) < 0)
		return -ENOMEM;
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd >= 0)
		unlink(tmpl);
	free(tmpl);
	return fd >= 0 ? fd : -errno;
}

static void remote_stage_free(struct remote_stage *s)
{
	if (s->fd >= 0)
		close(s->fd);
	pthread_mutex_destroy(&s->upload);
	free(s->path);
	free(s);
}

void remote_writers_init(struct remote_writers *w)
{
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->loaded, NULL);
	mono_cond_init(&w->closed);
	w->head = NULL;
}

void remote_writers_destroy(struct remote_writers *w)
{
	pthread_cond_destroy(&w->loaded);
	pthread_cond_destroy(&w->closed);
	pthread_mutex_destroy(&w->lock);
}

/* A stage new opens of its path join: listed, neither unlinked nor failed. Under w->lock. */
static bool remote_stage_joinable(const struct remote_stage *s)
{
	return s->state <= REMOTE_STAGE_LOADING && s->state >= 0 && !atomic_load(&s->gone);
}

/* What stat, listings, unlink and rename see: a stage loaded and not unlinked. Under w->lock. */
static bool remote_stage_live(const struct remote_stage *s)
{
	return s->state == 0 && !atomic_load(&s->gone);
}

/* Takes @s off the list, once. Under w->lock. */
static void remote_writers_unlist(struct remote_writers *w, struct remote_stage *s)
{
	if (!s->listed)
		return;
	for (struct remote_stage **pp = &w->head; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	s->listed = false;
}

/* Joins @s (a reference taken under w->lock, which is held): waits for its load. */
static int remote_writers_join(struct remote_writers *w, struct remote_stage *s, bool trunc)
{
	int ret;

	while (s->state == REMOTE_STAGE_LOADING)
		pthread_cond_wait(&w->loaded, &w->lock);
	ret = s->state;
	pthread_mutex_unlock(&w->lock);
	if (ret == 0 && trunc)
		ret = remote_stage_truncate(s, 0);
	return ret;
}

/* The load of new stage @s ended with @ret: the opens waiting for it go on, or fail. */
static void remote_writers_loaded(struct remote_writers *w, struct remote_stage *s, int ret)
{
	pthread_mutex_lock(&w->lock);
	s->state = ret < 0 ? ret : 0;
	if (ret < 0)
		remote_writers_unlist(w, s);
	pthread_cond_broadcast(&w->loaded);
	pthread_mutex_unlock(&w->lock);
}

int remote_writers_open(struct remote_writers *w, const char *dir, const char *path, bool trunc,
			remote_load_fn *load, void *arg, struct remote_stage **out)
{
	struct remote_stage *s;
	int ret;

	*out = NULL;
	pthread_mutex_lock(&w->lock);
	for (s = w->head; s && !(remote_stage_joinable(s) && strcmp(s->path, path) == 0);
	     s = s->next)
		;
	if (s) {
		s->refs++;
		s->writers++;
		ret = remote_writers_join(w, s, trunc);
		if (ret < 0)
			remote_writers_close(w, s, NULL, true);
		else
			*out = s;
		return ret;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->path = strdup(path))) {
		pthread_mutex_unlock(&w->lock);
		free(s);
		return -ENOMEM;
	}
	s->fd = -1;
	s->refs = s->writers = 1;
	s->state = REMOTE_STAGE_LOADING;
	s->listed = true;
	pthread_mutex_init(&s->upload, NULL);
	atomic_store(&s->gen, trunc ? 1 : 0);
	atomic_store(&s->uploaded, 0);
	atomic_store(&s->gone, false);
	s->next = w->head;
	w->head = s;
	pthread_mutex_unlock(&w->lock);
	s->fd = ret = remote_staging_fd(dir);
	if (ret >= 0)
		ret = trunc ? 0 : load(arg, s->fd);
	remote_writers_loaded(w, s, ret);
	if (ret < 0) {
		remote_writers_close(w, s, NULL, true);
		return ret;
	}
	*out = s;
	return 0;
}

struct remote_stage *remote_writers_find(struct remote_writers *w, const char *path)
{
	struct remote_stage *s;

	pthread_mutex_lock(&w->lock);
	for (s = w->head; s && !(remote_stage_live(s) && strcmp(s->path, path) == 0); s = s->next)
		;
	if (s)
		s->refs++;
	pthread_mutex_unlock(&w->lock);
	return s;
}

void remote_writers_close(struct remote_writers *w, struct remote_stage *s, const char *name,
			  bool writer)
{
	bool warn = false, last;

	pthread_mutex_lock(&w->lock);
	if (writer && --s->writers == 0) {
		remote_writers_unlist(w, s);
		pthread_cond_broadcast(&w->closed);
		warn = name && s->state == 0 && remote_stage_dirty(s);
	}
	pthread_mutex_unlock(&w->lock);
	if (warn)	/* this open's reference keeps @s */
		log_warn("datastore %s: %s: changes after its last close were not uploaded", name,
			 s->path);
	pthread_mutex_lock(&w->lock);
	last = --s->refs == 0;
	pthread_mutex_unlock(&w->lock);
	if (last)
		remote_stage_free(s);
}

/* Whether a live stage has @path. Under w->lock. */
static bool remote_writers_has_locked(struct remote_writers *w, const char *path)
{
	for (struct remote_stage *s = w->head; s; s = s->next)
		if (remote_stage_live(s) && strcmp(s->path, path) == 0)
			return true;
	return false;
}

bool remote_writers_has(struct remote_writers *w, const char *path)
{
	bool has;

	pthread_mutex_lock(&w->lock);
	has = remote_writers_has_locked(w, path);
	pthread_mutex_unlock(&w->lock);
	return has;
}

bool remote_writers_beneath(struct remote_writers *w, const char *dir)
{
	size_t len = strlen(dir);
	bool has = false;

	pthread_mutex_lock(&w->lock);
	for (struct remote_stage *s = w->head; s && !has; s = s->next)
		has = remote_stage_live(s) && strncmp(s->path, dir, len) == 0 &&
		      s->path[len] == '/';
	pthread_mutex_unlock(&w->lock);
	return has;
}

unsigned int remote_writers_unlink(struct remote_writers *w, const char *path)
{
	unsigned int n = 0;

	pthread_mutex_lock(&w->lock);
	for (struct remote_stage *s = w->head; s; s = s->next) {
		if (remote_stage_live(s) && strcmp(s->path, path) == 0) {
			atomic_store(&s->gone, true);
			n++;
		}
	}
	pthread_mutex_unlock(&w->lock);
	return n;
}

int remote_writers_rename_check(struct remote_writers *w, const char *name, const char *from,
				const char *to)
{
	struct timespec until = mono_timespec(mono_ns() + REMOTE_RENAME_WAIT_MS * 1000000ll);
	const char *busy = NULL;
	int waited = 0;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		busy = remote_writers_has_locked(w, from) ? from :
		       remote_writers_has_locked(w, to) ? to : NULL;
		if (!busy || waited != 0)
			break;
		waited = pthread_cond_timedwait(&w->closed, &w->lock, &until);
	}
	pthread_mutex_unlock(&w->lock);
	if (!busy)
		return 0;
	log_warn("datastore %s: %s is open for writing (uploaded at its close): "
		 "rename it once closed", name, busy);
	return -EBUSY;
}

int remote_writers_stat(struct remote_writers *w, const char *path, struct stat *st)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&w->lock);
	for (struct remote_stage *s = w->head; s && ret < 0; s = s->next)
		if (remote_stage_live(s) && strcmp(s->path, path) == 0 && fstat(s->fd, st) == 0)
			ret = 0;
	pthread_mutex_unlock(&w->lock);
	if (ret == 0) {
		st->st_ino = remote_path_ino(path);
		st->st_uid = getuid();
		st->st_gid = getgid();
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
	}
	return ret;
}

/* @path's name when it lies directly in folder @dir ("" the top), else NULL. */
static const char *remote_name_in(const char *path, const char *dir)
{
	size_t len = strlen(dir);
	const char *name = path;

	if (len > 0) {
		if (strncmp(path, dir, len) != 0 || path[len] != '/')
			return NULL;
		name = path + len + 1;
	}
	return *name && !strchr(name, '/') ? name : NULL;
}

static void remote_names_free(char **names)
{
	for (char **n = names; n && *n; n++)
		free(*n);
	free(names);
}

int remote_dir_fill_begin(struct remote_dir_fill *d, struct remote_writers *w, const char *dir,
			  backend_fill_fn *fill, void *payload)
{
	size_t n = 0, k = 0;
	int ret = 0;

	d->fill = fill;
	d->payload = payload;
	d->writing = NULL;
	pthread_mutex_lock(&w->lock);
	for (struct remote_stage *s = w->head; s; s = s->next)
		n += remote_stage_live(s) && remote_name_in(s->path, dir) != NULL;
	d->listed = NULL;
	if (n > 0 && (!(d->writing = calloc(n + 1, sizeof(*d->writing))) ||
		      !(d->listed = calloc(n, sizeof(*d->listed)))))
		ret = -ENOMEM;
	for (struct remote_stage *s = w->head; s && ret == 0 && k < n; s = s->next) {
		const char *name = remote_stage_live(s) ? remote_name_in(s->path, dir) : NULL;
		bool dup = false;

		for (size_t i = 0; name && i < k; i++)
			dup = dup || strcmp(d->writing[i], name) == 0;
		if (name && !dup && !(d->writing[k++] = strdup(name)))
			ret = -ENOMEM;
	}
	pthread_mutex_unlock(&w->lock);
	if (ret < 0) {
		remote_names_free(d->writing);
		free(d->listed);
		d->writing = NULL;
		d->listed = NULL;
	}
	return ret;
}

int remote_dir_fill_listed(void *arg, const char *name, const struct stat *st)
{
	struct remote_dir_fill *d = arg;

	for (size_t i = 0; d->writing && d->writing[i]; i++) {
		if (strcmp(d->writing[i], name) == 0) {
			/* filled at the end, as its writer has it */
			d->listed[i] = st ? *st : (struct stat){ .st_mode = S_IFREG | 0644 };
			return 0;
		}
	}
	return d->fill(d->payload, name, st);
}

int remote_dir_fill_end(struct remote_dir_fill *d, struct remote_writers *w, const char *dir,
			int ret, size_t *added)
{
	*added = 0;
	for (size_t i = 0; ret == 0 && d->writing && d->writing[i]; i++) {
		struct stat st;
		char *path;

		if (asprintf(&path, "%s%s%s", dir, *dir ? "/" : "", d->writing[i]) < 0) {
			ret = -ENOMEM;
			break;
		}
		if (remote_writers_stat(w, path, &st) == 0) {
			ret = d->fill(d->payload, d->writing[i], &st);
			(*added)++;
		} else if (d->listed[i].st_mode) {	/* closed meanwhile, and listed */
			ret = d->fill(d->payload, d->writing[i], &d->listed[i]);
		}
		free(path);
	}
	remote_names_free(d->writing);
	free(d->listed);
	d->writing = NULL;
	d->listed = NULL;
	return ret;
}

ssize_t remote_stage_pwrite(struct remote_stage *s, const void *buf, size_t len, off_t off)
{
	ssize_t n;

	if (s->fd < 0)
		return -EBADF;
	n = pwrite(s->fd, buf, len, off);
	if (n < 0)
		return -errno;
	atomic_fetch_add(&s->gen, 1);
	return n;
}

int remote_stage_truncate(struct remote_stage *s, off_t size)
{
	if (s->fd < 0)
		return -EBADF;
	if (ftruncate(s->fd, size) < 0)
		return -errno;
	atomic_fetch_add(&s->gen, 1);
	return 0;
}

int remote_stage_fstat(struct remote_stage *s, struct stat *st)
{
	struct stat staged;

	if (fstat(s->fd, &staged) < 0)
		return -errno;
	st->st_size = staged.st_size;
	st->st_blocks = staged.st_blocks;
	st->st_mtim = st->st_ctim = staged.st_mtim;
	return 0;
}

bool remote_stage_dirty(struct remote_stage *s)
{
	return s->fd >= 0 && !atomic_load(&s->gone) &&
	       atomic_load(&s->gen) != atomic_load(&s->uploaded);
}

int remote_stage_upload(struct remote_stage *s, const char *name, remote_upload_fn *up,
			void *arg)
{
	unsigned int gen;
	struct stat st;
	int ret = 0;

	pthread_mutex_lock(&s->upload);
	gen = atomic_load(&s->gen);
	if (!remote_stage_dirty(s))
		goto out;
	if (fstat(s->fd, &st) < 0) {
		ret = -errno;
		goto out;
	}
	ret = up(arg, s->fd, (uint64_t)st.st_size);
	if (ret == 0)
		atomic_store(&s->uploaded, gen);
	else
		log_err("datastore %s: upload of %s failed: %s", name, s->path, strerror(-ret));
out:
	pthread_mutex_unlock(&s->upload);
	return ret;
}

int remote_chown_check(const struct stat *st, unsigned int to_set)
{
	if ((to_set & BE_SET_UID) && st->st_uid != 0 && st->st_uid != getuid())
		return -EPERM;
	if ((to_set & BE_SET_GID) && st->st_gid != 0 && st->st_gid != getgid())
		return -EPERM;
	return 0;
}

int remote_stage_setattr(struct remote_stage *s, const struct stat *st, unsigned int to_set)
{
	if (remote_chown_check(st, to_set) < 0)
		return -EPERM;
	if (!(to_set & BE_SET_SIZE))
		return 0;
	if (st->st_size < 0)
		return -EINVAL;
	if (s && s->fd >= 0)
		return remote_stage_truncate(s, st->st_size);
	return 1;
}

void remote_saver_init(struct remote_saver *s, const struct backend_upload *up)
{
	s->up = up;
	s->error = 0;
	pthread_mutex_init(&s->lock, NULL);
}

void remote_saver_fini(struct remote_saver *s)
{
	pthread_mutex_destroy(&s->lock);
}

int remote_saver_landed(struct remote_saver *s, remote_landed_fn *fn, void *arg, unsigned int i)
{
	char *token = NULL;
	uint64_t done = 0;
	bool saving;
	int ret;

	pthread_mutex_lock(&s->lock);
	saving = s->up && s->up->save && s->error == 0;
	ret = fn(arg, i, saving ? &token : NULL, &done);
	if (saving) {
		if (ret == 0)
			ret = s->up->save(s->up->arg, token, done);
		s->error = ret;
	}
	pthread_mutex_unlock(&s->lock);
	free(token);
	return ret;
}

int remote_sink_fd(void *arg, const void *data, size_t len)
{
	struct remote_to_fd *t = arg;

	while (len > 0) {
		ssize_t n = pwrite(t->fd, data, len, t->off);

		if (n < 0)
			return errno == EINTR ? 0 : -errno;
		data = (const char *)data + n;
		len -= (size_t)n;
		t->off += n;
	}
	return 0;
}

/* ---- parts from several threads ---- */

struct remote_parts {
	const unsigned int *todo;
	unsigned int n_todo;
	remote_part_fn *part;
	void *arg;
	atomic_uint next;	/* the next index into todo */
	atomic_int error;	/* the first failure */
};

static void *remote_parts_worker(void *arg)
{
	struct remote_parts *p = arg;
	unsigned int k;

	while (atomic_load(&p->error) == 0 && (k = atomic_fetch_add(&p->next, 1)) < p->n_todo) {
		int ret = p->part(p->arg, p->todo[k]);
		int none = 0;

		if (ret < 0)
			atomic_compare_exchange_strong(&p->error, &none, ret);
	}
	return NULL;
}

int remote_parts_run(const unsigned int *todo, unsigned int n_todo, unsigned int threads,
		     remote_part_fn *part, void *arg)
{
	struct remote_parts p = { .todo = todo, .n_todo = n_todo, .part = part, .arg = arg };
	pthread_t tid[REMOTE_PARTS_THREADS_MAX];
	unsigned int n = 0;

	if (threads > REMOTE_PARTS_THREADS_MAX)
		threads = REMOTE_PARTS_THREADS_MAX;
	while (n + 1 < threads && n + 1 < n_todo &&
	       pthread_create(&tid[n], NULL, remote_parts_worker, &p) == 0)
		n++;
	remote_parts_worker(&p);
	while (n > 0)
		pthread_join(tid[--n], NULL);
	return atomic_load(&p.error);
}
