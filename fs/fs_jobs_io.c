/*
 * fs_jobs_io.c - opening, reading and writing the files of jobs/ (fs_jobs.c
 * says what each is): a draft written in memory and submitted at its close,
 * a job's rendered files, its logs read as they grow, ctl, and wait, whose
 * read is parked until the job ends.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fuse_lowlevel.h>

#include "fs.h"
#include "fs_jobs_int.h"
#include "log.h"
#include "output.h"
#include "path.h"
#include "scheduler.h"
#include "spec.h"
#include "fs_jobs_int.h"

static int jobs_open_file(struct fs *fs, struct jobs_path *p, struct jobs_handle *h, int flags)
{
	int acc = flags & O_ACCMODE;
	int ret = 0;

	h->file = p->file;
	h->worker = p->worker;
	h->job = strdup(p->job);
	if (!h->job)
		return -ENOMEM;
	if (strcmp(p->file, "ctl") == 0)
		return acc == O_RDONLY ? -EACCES : 0;
	if (acc != O_RDONLY)
		return -EACCES;
	if (strcmp(p->file, "wait") == 0)
		return 0;
	if (jobs_grows(p->file)) {
		ret = sched_file_path(fs->jobs->sched, p->job, p->worker, p->file, &h->path);
		if (ret == 0) {
			h->fd = open(h->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			ret = h->fd >= 0 || (errno == ENOENT && strcmp(p->file, "log.1") != 0) ? 0
				: -errno;
		}
		return ret;
	}
	return sched_render(fs->jobs->sched, p->job, p->worker, p->file, &h->text, &h->len);
}

static int jobs_open_draft(struct fs_jobs *fj, struct jobs_path *p, struct jobs_handle *h, int flags)
{
	int ret = 0;

	pthread_mutex_lock(&fj->lock);
	h->draft = jobs_draft_find(fj, p->job);
	if (!h->draft)
		ret = -ENOENT;
	else if (h->draft->readonly && (flags & O_ACCMODE) != O_RDONLY)
		ret = -EACCES;
	else
		h->draft->opens++;
	if (ret == 0 && (flags & O_TRUNC) && h->draft->len) {
		h->draft->len = 0;
		h->draft->dirty = true;
	}
	if (ret < 0)
		h->draft = NULL;
	pthread_mutex_unlock(&fj->lock);
	return ret;
}

void fs_jobs_open(fuse_req_t req, struct node *n, struct fuse_file_info *fi)
{
	struct fs *fs = jobs_fs(req);
	struct jobs_handle *h = NULL;
	struct jobs_path p = { .buf = NULL };
	int ret = fs->jobs ? jobs_node_classify(fs, n, NULL, &p) : -ENOENT;

	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	h = jobs_handle_new(p.what);
	if (!h)
		ret = -ENOMEM;
	else if (p.what == J_DRAFT)
		ret = jobs_open_draft(fs->jobs, &p, h, fi->flags);
	else if (p.what == J_FILE || p.what == J_WFILE)
		ret = jobs_open_file(fs, &p, h, fi->flags);
	else
		ret = -EISDIR;
	free(p.buf);
	if (ret < 0) {
		jobs_handle_free(fs->jobs, h);
		fuse_reply_err(req, -ret);
		return;
	}
	fi->direct_io = 1;
	fi->nonseekable = 0;
	fi->fh = (uint64_t)(uintptr_t)h;
	if (fuse_reply_open(req, fi) == -ENOENT)
		jobs_handle_free(fs->jobs, h);
}

/*
 * Replies with @size bytes of @text from @off, from a copy: once the reply
 * is written the reader may close the file, and a RELEASE in another thread
 * free @text while writev is still returning (ASan reported exactly that;
 * fs_read_virtual does the same).
 */
static void jobs_reply_slice(fuse_req_t req, const char *text, size_t len, size_t size, off_t off)
{
	size_t start = (size_t)off < len ? (size_t)off : len;
	size_t n = len - start < size ? len - start : size;
	char *copy = malloc(n ? n : 1);

	if (!copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(copy, text + start, n);
	fuse_reply_buf(req, copy, n);
	free(copy);
}

/* The text a finished job's wait gives. */
static char *jobs_wait_text(struct fs_jobs *fj, const char *job, size_t *len)
{
	char *text = NULL;

	if (sched_render(fj->sched, job, 0, "state", &text, len) < 0)
		return NULL;
	return text;
}

/* The interrupt callback of a parked read of wait (see the top comment). */
static void jobs_wait_interrupted(fuse_req_t req, void *data)
{
	struct fs_jobs *fj = jobs_fs(req)->jobs;
	struct jobs_waiter **p, *w = NULL;

	pthread_mutex_lock(&fj->lock);
	for (p = &fj->waiters; *p; p = &(*p)->next)
		if (*p == data)
			break;
	if (*p && (*p)->armed) {
		w = *p;
		*p = w->next;
	} else if (*p) {
		(*p)->interrupted = true;	/* the parking thread replies */
	}
	pthread_mutex_unlock(&fj->lock);
	if (w) {
		fuse_reply_err(req, EINTR);
		free(w->job);
		free(w);
	}
}

/* Parks a read of wait until @job ends (see the top comment). */
static void jobs_wait_park(fuse_req_t req, struct fs_jobs *fj, const char *job)
{
	struct jobs_waiter *w = calloc(1, sizeof(*w)), **p;
	struct sched_info info;
	bool reply = false;

	if (!w || !(w->job = strdup(job))) {
		free(w);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	w->req = req;
	pthread_mutex_lock(&fj->lock);
	w->next = fj->waiters;
	fj->waiters = w;
	pthread_mutex_unlock(&fj->lock);
	fuse_req_interrupt_func(req, jobs_wait_interrupted, w);
	pthread_mutex_lock(&fj->lock);
	w->armed = true;
	if (w->interrupted || sched_info(fj->sched, job, &info) < 0 || sched_state_final(info.state)) {
		for (p = &fj->waiters; *p != w; p = &(*p)->next)
			;
		*p = w->next;
		reply = true;
	}
	pthread_mutex_unlock(&fj->lock);
	if (!reply)
		return;
	if (w->interrupted) {
		fuse_reply_err(req, EINTR);
	} else {
		size_t len = 0;
		char *text = jobs_wait_text(fj, job, &len);

		jobs_reply_slice(req, text ? text : "", len, (size_t)-1, 0);
		free(text);
	}
	free(w->job);
	free(w);
}

/* Called by the scheduler's thread when @job ended: answers its parked reads. */
void jobs_final(void *arg, const char *job)
{
	struct fs_jobs *fj = arg;
	struct jobs_waiter *mine = NULL, **p;
	size_t len = 0;
	char *text;

	pthread_mutex_lock(&fj->lock);
	for (p = &fj->waiters; *p;) {
		struct jobs_waiter *w = *p;

		if (w->armed && strcmp(w->job, job) == 0) {
			*p = w->next;
			w->next = mine;
			mine = w;
		} else {
			p = &w->next;
		}
	}
	pthread_mutex_unlock(&fj->lock);
	text = mine ? jobs_wait_text(fj, job, &len) : NULL;
	while (mine) {
		struct jobs_waiter *w = mine;

		mine = w->next;
		if (text)
			fuse_reply_buf(w->req, text, len);
		else
			fuse_reply_err(w->req, EIO);
		free(w->job);
		free(w);
	}
	free(text);
}

static void jobs_read_wait(fuse_req_t req, struct fs_jobs *fj, struct jobs_handle *h, size_t size,
			   off_t off)
{
	struct sched_info info;
	size_t len = 0;
	char *text;

	if (sched_info(fj->sched, h->job, &info) < 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (!sched_state_final(info.state)) {
		jobs_wait_park(req, fj, h->job);
		return;
	}
	text = jobs_wait_text(fj, h->job, &len);
	if (!text)
		fuse_reply_err(req, ENOENT);
	else
		jobs_reply_slice(req, text, len, size, off);
	free(text);
}

void fs_jobs_read(fuse_req_t req, struct node *n, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs_jobs *fj = jobs_fs(req)->jobs;
	struct jobs_handle *h = (struct jobs_handle *)(uintptr_t)fi->fh;
	char *buf;
	ssize_t got;

	(void)n;
	if (h->draft) {
		pthread_mutex_lock(&fj->lock);
		buf = malloc(size ? size : 1);
		got = 0;
		if (buf && (size_t)off < h->draft->len) {
			got = (ssize_t)(h->draft->len - (size_t)off < size ? h->draft->len - (size_t)off : size);
			memcpy(buf, h->draft->data + off, (size_t)got);
		}
		pthread_mutex_unlock(&fj->lock);
		if (buf)
			fuse_reply_buf(req, buf, (size_t)got);
		else
			fuse_reply_err(req, ENOMEM);
		free(buf);
	} else if (h->file && strcmp(h->file, "wait") == 0) {
		jobs_read_wait(req, fj, h, size, off);
	} else if (h->path) {
		if (__atomic_load_n(&h->fd, __ATOMIC_ACQUIRE) < 0) {	/* made since the open? */
			int fd = open(h->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), none = -1;

			if (fd >= 0 && !__atomic_compare_exchange_n(&h->fd, &none, fd, false,
								    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				close(fd);	/* another read of this handle opened it first */
		}
		if (h->fd < 0) {
			fuse_reply_buf(req, NULL, 0);
			return;
		}
		buf = malloc(size ? size : 1);
		got = buf ? pread(h->fd, buf, size, off) : -1;
		if (got < 0)
			fuse_reply_err(req, buf ? errno : ENOMEM);
		else
			fuse_reply_buf(req, buf, (size_t)got);
		free(buf);
	} else if (h->text) {
		jobs_reply_slice(req, h->text, h->len, size, off);
	} else {
		fuse_reply_err(req, EBADF);
	}
}

/* Stores a write into a draft; lock held. */
static int jobs_draft_write(struct jobs_draft *d, const char *buf, size_t size, off_t off)
{
	size_t end = (size_t)off + size;

	if (d->readonly)
		return -EACCES;
	if (end > SPEC_MAX_SIZE) {
		d->too_big = d->dirty = true;
		return -EFBIG;
	}
	if (end > d->cap) {
		size_t cap = end < 4096 ? 4096 : end * 2;
		char *data = realloc(d->data, cap > SPEC_MAX_SIZE ? SPEC_MAX_SIZE : cap);

		if (!data)
			return -ENOMEM;
		d->data = data;
		d->cap = cap > SPEC_MAX_SIZE ? SPEC_MAX_SIZE : cap;
	}
	if ((size_t)off > d->len)
		memset(d->data + d->len, 0, (size_t)off - d->len);
	memcpy(d->data + off, buf, size);
	if (end > d->len)
		d->len = end;
	d->dirty = true;
	clock_gettime(CLOCK_REALTIME, &d->mtime);
	return (int)size;
}

void fs_jobs_write(fuse_req_t req, struct node *n, const char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct fs_jobs *fj = jobs_fs(req)->jobs;
	struct jobs_handle *h = (struct jobs_handle *)(uintptr_t)fi->fh;
	enum sched_ctl_cmd cmd;
	int ret;

	(void)n;
	if (h->draft) {
		pthread_mutex_lock(&fj->lock);
		ret = jobs_draft_write(h->draft, buf, size, off);
		pthread_mutex_unlock(&fj->lock);
	} else if (h->file && strcmp(h->file, "ctl") == 0) {
		ret = off == 0 ? sched_ctl_parse(buf, size, &cmd) : -EINVAL;
		if (ret < 0)
			log_info("jobs/%s/ctl: uid %u wrote no known command (cancel)", h->job,
				 (unsigned int)fuse_req_ctx(req)->uid);
		else
			ret = sched_ctl(fj->sched, h->job, fuse_req_ctx(req)->uid, cmd);
		ret = ret < 0 ? ret : (int)size;
	} else {
		ret = -EBADF;
	}
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_write(req, (size_t)ret);
}

void fs_jobs_flush(fuse_req_t req, struct node *n, struct fuse_file_info *fi)
{
	struct fs *fs = jobs_fs(req);
	struct fs_jobs *fj = fs->jobs;
	struct jobs_handle *h = (struct jobs_handle *)(uintptr_t)fi->fh;
	struct jobs_draft *d = h->draft;
	char *text = NULL, *name = NULL;
	size_t len = 0;
	bool check, too_big = false;
	uid_t uid = 0;
	gid_t gid = 0;
	int ret = 0;

	(void)n;
	if (!d) {
		fuse_reply_err(req, 0);
		return;
	}
	pthread_mutex_lock(&fj->lock);
	check = d->dirty && !d->unlinked && !d->readonly && !jobs_scratch(d->name);
	if (check) {
		d->dirty = false;
		too_big = d->too_big;
		d->too_big = false;
		uid = d->uid;
		gid = d->gid;
		name = strdup(d->name);
		text = malloc(d->len + 1);
		if (text)
			memcpy(text, d->data, d->len);
		len = d->len;
	}
	pthread_mutex_unlock(&fj->lock);
	if (check && (!text || !name))
		ret = -ENOMEM;
	else if (check)
		ret = jobs_submit(fs, name, text, len, too_big, uid, gid, d);
	free(text);
	free(name);
	fuse_reply_err(req, -ret);
}

void fs_jobs_release(fuse_req_t req, struct node *n, struct fuse_file_info *fi)
{
	(void)n;
	jobs_handle_free(jobs_fs(req)->jobs, (struct jobs_handle *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

void fs_jobs_setattr(fuse_req_t req, struct node *n, struct stat *attr, int to_set)
{
	struct fs *fs = jobs_fs(req);
	struct jobs_path p = { .buf = NULL };
	int ret = fs->jobs ? jobs_node_classify(fs, n, NULL, &p) : -ENOENT;

	if (ret == 0 && p.what == J_DRAFT) {
		struct jobs_draft *d;

		pthread_mutex_lock(&fs->jobs->lock);
		d = jobs_draft_find(fs->jobs, p.job);
		if (d && (to_set & FUSE_SET_ATTR_SIZE) && d->readonly)
			ret = -EACCES;
		else if (d && (to_set & FUSE_SET_ATTR_SIZE) && (size_t)attr->st_size > d->len)
			ret = -EINVAL;	/* growing a draft by truncate: nothing writes specs so */
		else if (d && (to_set & FUSE_SET_ATTR_SIZE)) {
			d->len = (size_t)attr->st_size;
			d->dirty = true;
		}
		if (d && (to_set & FUSE_SET_ATTR_MODE))
			d->mode = attr->st_mode & 0600;
		pthread_mutex_unlock(&fs->jobs->lock);
	} else if (ret == 0 && (to_set & ~(FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
					   FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW |
					   FUSE_SET_ATTR_CTIME))) {
		/* O_TRUNC of ctl is how `echo cancel > ctl` opens it: nothing to truncate. */
		ret = p.file && strcmp(p.file, "ctl") == 0 && to_set == FUSE_SET_ATTR_SIZE ? 0 : -EPERM;
	}
	jobs_reply_stat(req, fs, n, &p, ret);
}
