/*
 * fs_jobs.c - jobs/: submit a job by writing its spec, follow it with ls and cat.
 *
 * Every node under jobs/ is NODE_JOBS; its path below jobs/ says what it is:
 *
 *   NAME                       a draft (a file being written) or a job's folder
 *   JOB/{state,reason,status.json,spec.json}   rendered at open, never cached
 *   JOB/{events,log}           real files in the state dir, read as they grow
 *   JOB/ctl                    write "cancel"
 *   JOB/wait                   a read is answered when the job ends
 *   JOB/workers/N/{state,exit_code,log}
 *
 * A draft lives in memory, owned by its writer, until the writer's close
 * (FUSE flush) hands it to sched_submit: accepted, it disappears and the
 * job's folder appears; refused, it stays, close fails with the errno, and
 * DRAFT.error holds the messages.  Names starting with '.' or ending with
 * '~' are scratch files: kept as written, never checked, until a rename
 * gives them a real name, which checks them then.
 *
 * A read of wait on a live job is not answered by the thread that got it:
 * the request is parked in fs_jobs->waiters and answered by the scheduler's
 * thread when the job ends (fs_jobs_final), or with EINTR when the kernel
 * interrupts it.  So a hundred readers of wait hold no FUSE thread.
 *
 * Nothing here is cached by the kernel: entry and attribute timeouts are 0
 * and every file is opened direct_io, so state is never stale and tail -f
 * sees log grow.  Locking: fs_jobs->lock guards drafts and waiters; it may
 * be held while calling into the scheduler, never the other way round, and
 * never across a reply.
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
#include "log.h"
#include "output.h"
#include "path.h"
#include "scheduler.h"
#include "spec.h"

#define JOBS_ERROR_LINES 100	/* messages kept in a .error file */

struct jobs_draft {
	char *name;
	uid_t uid;
	gid_t gid;
	mode_t mode;
	char *data;
	size_t len, cap;
	bool too_big;			/* a write went past SPEC_MAX_SIZE */
	bool dirty;			/* written since it was last checked */
	bool readonly;			/* a .error file */
	struct timespec mtime;
	unsigned int opens;
	bool unlinked;			/* out of the list; freed at the last release */
	struct jobs_draft *next;
};

struct jobs_waiter {
	fuse_req_t req;
	char *job;
	bool armed;			/* set once fuse_req_interrupt_func returned */
	bool interrupted;
	struct jobs_waiter *next;
};

struct fs_jobs {
	struct fs *fs;
	struct sched *sched;
	struct node *dir;		/* jobs/ */
	pthread_mutex_t lock;
	struct jobs_draft *drafts;	/* guarded by lock */
	struct jobs_waiter *waiters;	/* guarded by lock */
};

enum jobs_what { J_ROOT, J_DRAFT, J_JOB, J_FILE, J_WORKERS, J_WORKER, J_WFILE };

/* What a path below jobs/ names. */
struct jobs_path {
	enum jobs_what what;
	char *job;			/* J_DRAFT: the draft's name */
	unsigned int worker;
	const char *file;
	char *buf;			/* owns job */
	struct sched_info info;
};

/* An open file under jobs/. */
struct jobs_handle {
	enum jobs_what what;
	struct jobs_draft *draft;	/* J_DRAFT */
	char *job;
	unsigned int worker;
	const char *file;
	char *text;			/* rendered at open */
	size_t len;
	int fd;				/* events and logs; set once, atomically */
	char *path;			/* of fd, opened at the first read when it did not exist yet */
};

static const char *const jobs_job_files[] = {
	"state", "reason", "status.json", "spec.json", "events", "log", "ctl", "wait", "workers",
};
static const char *const jobs_worker_files[] = { "state", "exit_code", "log", "log.1", "output" };

/* A log, the events, or a worker's rotated log: a file of the job folder served as it is. */
static bool jobs_grows(const char *file)
{
	return strcmp(file, "log") == 0 || strcmp(file, "events") == 0 || strcmp(file, "log.1") == 0;
}

static struct fs *jobs_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static const char *jobs_known(const char *name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return list[i];
	return NULL;
}

static bool jobs_scratch(const char *name)
{
	size_t len = strlen(name);

	return name[0] == '.' || (len && name[len - 1] == '~');
}

static struct jobs_draft *jobs_draft_find(struct fs_jobs *fj, const char *name)
{
	for (struct jobs_draft *d = fj->drafts; d; d = d->next)
		if (strcmp(d->name, name) == 0)
			return d;
	return NULL;
}

/* Parses a worker number "1".."n" with no leading zero. */
static unsigned int jobs_worker_number(const char *s, size_t n_workers)
{
	char *end;
	unsigned long v;

	if (s[0] < '1' || s[0] > '9')
		return 0;
	v = strtoul(s, &end, 10);
	return *end || v > n_workers ? 0 : (unsigned int)v;
}

static int jobs_classify_job(struct fs_jobs *fj, struct jobs_path *p, char **seg, int nseg)
{
	if (sched_info(fj->sched, seg[0], &p->info) < 0)
		return -ENOENT;
	p->what = J_JOB;
	if (nseg == 1)
		return 0;
	p->file = jobs_known(seg[1], jobs_job_files, sizeof(jobs_job_files) / sizeof(char *));
	if (!p->file)
		return -ENOENT;
	p->what = strcmp(p->file, "workers") == 0 ? J_WORKERS : J_FILE;
	if (nseg == 2)
		return 0;
	if (p->what != J_WORKERS)
		return -ENOTDIR;
	p->worker = jobs_worker_number(seg[2], p->info.n_workers);
	if (!p->worker)
		return -ENOENT;
	p->what = J_WORKER;
	p->file = NULL;
	if (nseg == 3)
		return 0;
	p->file = jobs_known(seg[3], jobs_worker_files, sizeof(jobs_worker_files) / sizeof(char *));
	p->what = J_WFILE;
	return !p->file ? -ENOENT : nseg == 4 ? 0 : -ENOTDIR;
}

/* Says what @path (below jobs/) is; free p->buf after. */
static int jobs_classify(struct fs_jobs *fj, const char *path, struct jobs_path *p)
{
	char *seg[5], *save = NULL;
	int nseg = 0, ret;

	memset(p, 0, sizeof(*p));
	if (!path[0]) {
		p->what = J_ROOT;
		return 0;
	}
	p->buf = strdup(path);
	if (!p->buf)
		return -ENOMEM;
	for (char *s = strtok_r(p->buf, "/", &save); s && nseg < 5; s = strtok_r(NULL, "/", &save))
		seg[nseg++] = s;
	if (nseg == 0 || nseg > 4)
		return -ENOENT;
	p->job = seg[0];
	pthread_mutex_lock(&fj->lock);
	ret = nseg == 1 && jobs_draft_find(fj, seg[0]) ? 0 : 1;
	pthread_mutex_unlock(&fj->lock);
	if (ret == 0) {
		p->what = J_DRAFT;
		return 0;
	}
	return jobs_classify_job(fj, p, seg, nseg);
}

static int jobs_node_classify(struct fs *fs, struct node *n, const char *name, struct jobs_path *p)
{
	char *path;
	int ret = fs_node_path(fs, n, name, &path);

	if (ret < 0)
		return ret;
	ret = jobs_classify(fs->jobs, path, p);
	free(path);
	if (ret < 0) {
		free(p->buf);
		p->buf = NULL;
	}
	return ret;
}

/* ---- attributes ---- */

static void jobs_stat_base(struct fs *fs, struct stat *st, mode_t mode, uid_t uid, gid_t gid)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = mode;
	st->st_nlink = S_ISDIR(mode) ? 2 : 1;
	st->st_uid = uid;
	st->st_gid = gid;
	st->st_blksize = 4096;
	st->st_atime = st->st_mtime = st->st_ctime = fs->started;
}

static int jobs_stat_file(struct fs *fs, const struct jobs_path *p, struct stat *st)
{
	const struct sched_info *in = &p->info;
	struct stat real;
	char *path = NULL, *text = NULL;
	size_t len = 0;
	int ret;

	if (strcmp(p->file, "ctl") == 0 || strcmp(p->file, "wait") == 0) {
		jobs_stat_base(fs, st, S_IFREG | (p->file[0] == 'c' ? 0222 : 0444), in->uid, in->gid);
		return 0;
	}
	if (strcmp(p->file, "output") == 0) {
		/* A link to the staged output: the kernel shows it with the owner's rights. */
		ret = sched_file_path(fs->jobs->sched, p->job, p->worker, p->file, &path);
		jobs_stat_base(fs, st, S_IFLNK | 0777, in->uid, in->gid);
		st->st_size = path ? (off_t)strlen(path) : 0;
		free(path);
		return ret;
	}
	jobs_stat_base(fs, st, S_IFREG | 0444, in->uid, in->gid);
	st->st_mtime = st->st_ctime = (time_t)(in->accepted_ns / 1000000000LL);
	if (jobs_grows(p->file)) {
		ret = sched_file_path(fs->jobs->sched, p->job, p->worker, p->file, &path);
		/* lstat, O_NOFOLLOW below: a cluster job's folder is its owner's, who may plant links */
		if (ret == 0 && lstat(path, &real) == 0 && S_ISREG(real.st_mode)) {
			st->st_size = real.st_size;
			st->st_mtim = st->st_ctim = real.st_mtim;
		} else if (ret == 0 && strcmp(p->file, "log.1") == 0) {
			ret = -ENOENT;	/* shown once the log was rotated */
		}
		free(path);
		return ret;
	}
	ret = sched_render(fs->jobs->sched, p->job, p->worker, p->file, &text, &len);
	free(text);
	st->st_size = (off_t)len;
	st->st_mtime = time(NULL);
	return ret;
}

static int jobs_stat(struct fs *fs, const struct jobs_path *p, struct stat *st)
{
	const struct sched_info *in = &p->info;
	struct jobs_draft *d;
	int ret = 0;

	switch (p->what) {
	case J_ROOT:
		jobs_stat_base(fs, st, S_IFDIR | 01777, 0, 0);
		break;
	case J_DRAFT:
		pthread_mutex_lock(&fs->jobs->lock);
		d = jobs_draft_find(fs->jobs, p->job);
		if (d) {
			jobs_stat_base(fs, st, S_IFREG | d->mode, d->uid, d->gid);
			st->st_size = (off_t)d->len;
			st->st_mtim = st->st_ctim = d->mtime;
		}
		pthread_mutex_unlock(&fs->jobs->lock);
		ret = d ? 0 : -ENOENT;
		break;
	case J_JOB:
	case J_WORKERS:
	case J_WORKER:
		jobs_stat_base(fs, st, S_IFDIR | 0755, in->uid, in->gid);
		st->st_mtime = st->st_ctime = (time_t)(in->accepted_ns / 1000000000LL);
		break;
	case J_FILE:
	case J_WFILE:
		ret = jobs_stat_file(fs, p, st);
		break;
	}
	return ret;
}

static void jobs_reply_entry(fuse_req_t req, struct fs *fs, struct node *parent, const char *name,
			     const struct stat *st)
{
	struct fuse_entry_param e = { .attr = *st };
	struct node *n;
	int ret = fs_node_get(fs, parent, name, &n);

	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	e.ino = fs_nodeid(fs, n);
	e.attr.st_ino = e.ino;
	if (fuse_reply_entry(req, &e) == -ENOENT)
		fs_node_forget(fs, n, 1);
}

void fs_jobs_lookup(fuse_req_t req, struct node *parent, const char *name)
{
	struct fs *fs = jobs_fs(req);
	struct jobs_path p = { .buf = NULL };
	struct stat st;
	int ret = fs->jobs ? jobs_node_classify(fs, parent, name, &p) : -ENOENT;

	if (ret == 0)
		ret = jobs_stat(fs, &p, &st);
	free(p.buf);
	if (ret == -ENOENT) {
		struct fuse_entry_param e = { .ino = 0 };

		fuse_reply_entry(req, &e);
	} else if (ret < 0) {
		fuse_reply_err(req, -ret);
	} else {
		jobs_reply_entry(req, fs, parent, name, &st);
	}
}

void fs_jobs_getattr(fuse_req_t req, struct node *n)
{
	struct fs *fs = jobs_fs(req);
	struct jobs_path p = { .buf = NULL };
	struct stat st;
	int ret;

	if (n->permanent) {
		jobs_stat_base(fs, &st, S_IFDIR | 01777, 0, 0);
		st.st_ino = n->ino;
		fuse_reply_attr(req, &st, 0);
		return;
	}
	ret = fs->jobs ? jobs_node_classify(fs, n, NULL, &p) : -ENOENT;
	if (ret == 0) {
		ret = jobs_stat(fs, &p, &st);
		free(p.buf);
	}
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	st.st_ino = fs_nodeid(fs, n);
	fuse_reply_attr(req, &st, 0);
}

/* ---- drafts ---- */

static void jobs_draft_free(struct jobs_draft *d)
{
	free(d->name);
	free(d->data);
	free(d);
}

/* Takes @d out of the list; freed now or at its last release.  Lock held. */
static void jobs_draft_unlink(struct fs_jobs *fj, struct jobs_draft *d)
{
	struct jobs_draft **p = &fj->drafts;

	while (*p && *p != d)
		p = &(*p)->next;
	if (*p)
		*p = d->next;
	d->unlinked = true;
	if (d->opens == 0)
		jobs_draft_free(d);
}

static struct jobs_draft *jobs_draft_new(struct fs_jobs *fj, const char *name, uid_t uid,
					 gid_t gid, mode_t mode)
{
	struct jobs_draft *d = calloc(1, sizeof(*d));

	if (!d || !(d->name = strdup(name))) {
		free(d);
		return NULL;
	}
	d->uid = uid;
	d->gid = gid;
	d->mode = mode & 0600;	/* a spec often holds tokens: never readable by others */
	clock_gettime(CLOCK_REALTIME, &d->mtime);
	d->next = fj->drafts;
	fj->drafts = d;
	return d;
}

/* Replaces @d's content with @text; lock held. */
static int jobs_draft_set(struct jobs_draft *d, const char *text, size_t len)
{
	char *copy = malloc(len + 1);

	if (!copy)
		return -ENOMEM;
	memcpy(copy, text, len);
	free(d->data);
	d->data = copy;
	d->len = d->cap = len;
	clock_gettime(CLOCK_REALTIME, &d->mtime);
	return 0;
}

/* Writes FILE.error (owned by the writer) with the messages of @dg; lock held. */
static void jobs_write_error(struct fs_jobs *fj, const char *file, uid_t uid, gid_t gid,
			     const struct diag *dg)
{
	char *name = NULL, *text = NULL;
	size_t len = 0;
	struct jobs_draft *d;
	FILE *f = open_memstream(&text, &len);

	if (!f || asprintf(&name, "%s.error", file) < 0) {
		if (f)
			fclose(f);
		free(text);
		return;
	}
	/* A 1 MiB spec can hold half a million mistakes: the first hundred tell enough. */
	for (size_t i = 0; i < dg->n && i < JOBS_ERROR_LINES; i++)
		fprintf(f, "%s\n", dg->msgs[i]);
	if (dg->n > JOBS_ERROR_LINES)
		fprintf(f, "%s: ... and %zu more\n", file, dg->n - JOBS_ERROR_LINES);
	fclose(f);
	d = jobs_draft_find(fj, name);
	if (!d)
		d = jobs_draft_new(fj, name, uid, gid, 0600);
	if (d) {
		d->readonly = true;
		d->uid = uid;
		d->gid = gid;
		d->mode = 0600;
		jobs_draft_set(d, text, len);
	}
	free(name);
	free(text);
}

static void jobs_remove_error(struct fs_jobs *fj, const char *file)
{
	char name[NAME_MAX + 16];
	struct jobs_draft *d;

	snprintf(name, sizeof(name), "%s.error", file);
	d = jobs_draft_find(fj, name);
	if (d)
		jobs_draft_unlink(fj, d);
}

/*
 * Submits @text as written to jobs/@file by @uid/@gid.  On success the
 * draft @d (when given) and any FILE.error go away; on failure FILE.error
 * tells why.  Returns 0 or the negated errno close or rename reports.
 */
static int jobs_submit(struct fs *fs, const char *file, const char *text, size_t len,
		       bool too_big, uid_t uid, gid_t gid, struct jobs_draft *d)
{
	struct fs_jobs *fj = fs->jobs;
	char *name = NULL;
	struct diag dg;
	int ret;

	diag_init(&dg);
	if (too_big) {
		diag_add(&dg, file, 0, "the spec is over %d bytes (1 MiB)", SPEC_MAX_SIZE);
		ret = -EFBIG;
	} else {
		ret = sched_submit(fj->sched, file, text, len, uid, gid, &name, &dg);
	}
	pthread_mutex_lock(&fj->lock);
	if (ret == 0) {
		if (d && !d->unlinked)
			jobs_draft_unlink(fj, d);
		jobs_remove_error(fj, file);
	} else {
		jobs_write_error(fj, file, uid, gid, &dg);
	}
	pthread_mutex_unlock(&fj->lock);
	if (ret == 0) {
		fs_node_unlinked(fs, fj->dir, file);
		log_info("job %s: accepted from jobs/%s (uid %u)", name, file, (unsigned int)uid);
	}
	free(name);
	diag_free(&dg);
	return ret;
}

static struct jobs_handle *jobs_handle_new(enum jobs_what what)
{
	struct jobs_handle *h = calloc(1, sizeof(*h));

	if (h) {
		h->what = what;
		h->fd = -1;
	}
	return h;
}

static void jobs_handle_free(struct fs_jobs *fj, struct jobs_handle *h)
{
	if (!h)
		return;
	if (h->draft) {
		pthread_mutex_lock(&fj->lock);
		if (--h->draft->opens == 0 && h->draft->unlinked)
			jobs_draft_free(h->draft);
		pthread_mutex_unlock(&fj->lock);
	}
	if (h->fd >= 0)
		close(h->fd);
	free(h->path);
	free(h->job);
	free(h->text);
	free(h);
}

void fs_jobs_create(fuse_req_t req, struct node *parent, const char *name, mode_t mode,
		    struct fuse_file_info *fi)
{
	struct fs *fs = jobs_fs(req);
	struct fs_jobs *fj = fs->jobs;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fuse_entry_param e = { 0 };
	struct jobs_handle *h = NULL;
	struct sched_info info;
	struct node *n;
	int ret = !fj || !parent->permanent ? -EPERM : path_check_name(name);

	if (ret == 0 && sched_info(fj->sched, name, &info) == 0)
		ret = -EEXIST;
	if (ret == 0 && !(h = jobs_handle_new(J_DRAFT)))
		ret = -ENOMEM;
	if (ret == 0) {
		pthread_mutex_lock(&fj->lock);
		h->draft = jobs_draft_find(fj, name);
		if (!h->draft)
			h->draft = jobs_draft_new(fj, name, ctx->uid, ctx->gid, mode);
		if (h->draft) {
			h->draft->opens++;
			if (fi->flags & O_TRUNC)
				h->draft->len = 0;
			jobs_stat_base(fs, &e.attr, S_IFREG | h->draft->mode, h->draft->uid, h->draft->gid);
			e.attr.st_size = (off_t)h->draft->len;
		}
		pthread_mutex_unlock(&fj->lock);
		ret = h->draft ? fs_node_get(fs, parent, name, &n) : -ENOMEM;
	}
	if (ret < 0) {
		jobs_handle_free(fj, h);
		fuse_reply_err(req, -ret);
		return;
	}
	e.ino = fs_nodeid(fs, n);
	e.attr.st_ino = e.ino;
	fi->direct_io = 1;
	fi->fh = (uint64_t)(uintptr_t)h;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		fs_node_forget(fs, n, 1);
		jobs_handle_free(fj, h);
	}
}

/* ---- open, read, write ---- */

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
static void jobs_final(void *arg, const char *job)
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
	struct stat st;
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
	if (ret == 0)
		ret = jobs_stat(fs, &p, &st);
	free(p.buf);
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	st.st_ino = fs_nodeid(fs, n);
	fuse_reply_attr(req, &st, 0);
}

/* ---- folders ---- */

struct jobs_dir {
	char **names;
	unsigned char *types;		/* DT_DIR or DT_REG */
	size_t n, cap;
};

static int jobs_dir_add(struct jobs_dir *d, const char *name, unsigned char type)
{
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 32;
		char **names = realloc(d->names, cap * sizeof(*names));
		unsigned char *types = names ? realloc(d->types, cap) : NULL;

		if (names)
			d->names = names;
		if (!types)
			return -ENOMEM;
		d->types = types;
		d->cap = cap;
	}
	d->names[d->n] = strdup(name);
	if (!d->names[d->n])
		return -ENOMEM;
	d->types[d->n++] = type;
	return 0;
}

static void jobs_dir_free(struct jobs_dir *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free(d->names[i]);
	free(d->names);
	free(d->types);
	free(d);
}

static int jobs_dir_root(struct fs_jobs *fj, struct jobs_dir *d)
{
	char **names = NULL;
	size_t n = 0;
	int ret = sched_names(fj->sched, &names, &n);

	for (size_t i = 0; ret == 0 && i < n; i++)
		ret = jobs_dir_add(d, names[i], DT_DIR);
	sched_names_free(names, n);
	pthread_mutex_lock(&fj->lock);
	for (struct jobs_draft *dr = fj->drafts; ret == 0 && dr; dr = dr->next)
		ret = jobs_dir_add(d, dr->name, DT_REG);
	pthread_mutex_unlock(&fj->lock);
	return ret;
}

static int jobs_dir_fill(struct fs_jobs *fj, const struct jobs_path *p, struct jobs_dir *d)
{
	char num[16];
	int ret = jobs_dir_add(d, ".", DT_DIR);

	if (ret == 0)
		ret = jobs_dir_add(d, "..", DT_DIR);
	switch (p->what) {
	case J_ROOT:
		return ret ? ret : jobs_dir_root(fj, d);
	case J_JOB:
		for (size_t i = 0; ret == 0 && i < sizeof(jobs_job_files) / sizeof(char *); i++)
			ret = jobs_dir_add(d, jobs_job_files[i],
					   strcmp(jobs_job_files[i], "workers") ? DT_REG : DT_DIR);
		return ret;
	case J_WORKERS:
		for (size_t i = 1; ret == 0 && i <= p->info.n_workers; i++) {
			snprintf(num, sizeof(num), "%zu", i);
			ret = jobs_dir_add(d, num, DT_DIR);
		}
		return ret;
	case J_WORKER:
		for (size_t i = 0; ret == 0 && i < sizeof(jobs_worker_files) / sizeof(char *); i++) {
			char *path = NULL;
			bool link = strcmp(jobs_worker_files[i], "output") == 0;
			bool old = strcmp(jobs_worker_files[i], "log.1") == 0;
			struct stat st;

			if ((link || old) &&
			    sched_file_path(fj->sched, p->job, p->worker, jobs_worker_files[i], &path) < 0)
				continue;	/* a worker without a view */
			if (old && (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))) {
				free(path);
				continue;	/* never rotated */
			}
			free(path);
			ret = jobs_dir_add(d, jobs_worker_files[i], link ? DT_LNK : DT_REG);
		}
		return ret;
	default:
		return -ENOTDIR;
	}
}

void fs_jobs_readlink(fuse_req_t req, struct node *n)
{
	struct fs *fs = jobs_fs(req);
	struct jobs_path p = { .buf = NULL };
	char *path = NULL;
	int ret = fs->jobs && !n->permanent ? jobs_node_classify(fs, n, NULL, &p) : -EINVAL;

	if (ret == 0)
		ret = p.what == J_WFILE && strcmp(p.file, "output") == 0
			? sched_file_path(fs->jobs->sched, p.job, p.worker, "output", &path) : -EINVAL;
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_readlink(req, path);
	free(path);
	free(p.buf);
}

void fs_jobs_opendir(fuse_req_t req, struct node *n, struct fuse_file_info *fi)
{
	struct fs *fs = jobs_fs(req);
	struct jobs_dir *d = calloc(1, sizeof(*d));
	struct jobs_path p = { .what = J_ROOT };
	int ret = d ? 0 : -ENOMEM;

	if (ret == 0 && !fs->jobs)
		ret = jobs_dir_add(d, ".", DT_DIR) < 0 || jobs_dir_add(d, "..", DT_DIR) < 0 ? -ENOMEM : 1;
	else if (ret == 0 && !n->permanent)
		ret = jobs_node_classify(fs, n, NULL, &p);
	if (ret == 0)
		ret = jobs_dir_fill(fs->jobs, &p, d);
	free(p.buf);
	if (ret < 0) {
		jobs_dir_free(d);
		fuse_reply_err(req, -ret);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT)
		jobs_dir_free(d);
}

void fs_jobs_readdir(fuse_req_t req, struct node *n, size_t size, off_t off,
		     struct fuse_file_info *fi, int plus)
{
	struct jobs_dir *d = (struct jobs_dir *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	size_t pos = 0;

	(void)n;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = (size_t)off; i < d->n; i++) {
		/* d_ino 0 would make readdir(3) skip the entry: any other number will do. */
		struct stat st = { .st_mode = (mode_t)d->types[i] << 12, .st_ino = i + 1 };
		struct fuse_entry_param e = { .attr = st };	/* ino 0: the kernel looks it up */
		size_t len = plus ? fuse_add_direntry_plus(req, buf + pos, size - pos, d->names[i], &e,
							   (off_t)i + 1)
				  : fuse_add_direntry(req, buf + pos, size - pos, d->names[i], &st,
						      (off_t)i + 1);

		if (len > size - pos)
			break;
		pos += len;
	}
	fuse_reply_buf(req, buf, pos);
	free(buf);
}

void fs_jobs_releasedir(fuse_req_t req, struct node *n, struct fuse_file_info *fi)
{
	(void)n;
	jobs_dir_free((struct jobs_dir *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* ---- removing and renaming ---- */

/* rm of a draft: its owner or root (the kernel checked the sticky bit already). */
static int jobs_remove_draft(struct fs_jobs *fj, const char *name, uid_t uid)
{
	struct jobs_draft *d;
	int ret = 0;

	pthread_mutex_lock(&fj->lock);
	d = jobs_draft_find(fj, name);
	if (!d)
		ret = -ENOENT;
	else if (uid != 0 && uid != d->uid)
		ret = -EPERM;
	else
		jobs_draft_unlink(fj, d);
	pthread_mutex_unlock(&fj->lock);
	return ret;
}

/*
 * rm -r of a job unlinks its files and folders first: those succeed (and
 * change nothing) on a finished job of the caller's, fail with EBUSY on a
 * live one; the rmdir of the job's folder removes it.
 */
static int jobs_remove_inside(const struct jobs_path *p, uid_t uid, bool is_dir)
{
	if (uid != 0 && uid != p->info.uid)
		return -EPERM;
	if (!sched_state_final(p->info.state))
		return -EBUSY;
	if (is_dir != (p->what == J_WORKERS || p->what == J_WORKER))
		return is_dir ? -ENOTDIR : -EISDIR;
	return 0;
}

void fs_jobs_remove(fuse_req_t req, struct node *parent, const char *name, int is_dir)
{
	struct fs *fs = jobs_fs(req);
	uid_t uid = fuse_req_ctx(req)->uid;
	struct jobs_path p = { .buf = NULL };
	int ret = fs->jobs ? jobs_node_classify(fs, parent, name, &p) : -ENOENT;

	if (ret == 0) {
		switch (p.what) {
		case J_DRAFT:
			ret = is_dir ? -ENOTDIR : jobs_remove_draft(fs->jobs, name, uid);
			break;
		case J_JOB:
			ret = !is_dir ? -EISDIR : sched_remove(fs->jobs->sched, p.job, uid);
			break;
		default:
			ret = jobs_remove_inside(&p, uid, is_dir);
			break;
		}
	}
	free(p.buf);
	if (ret == 0 && (p.what == J_DRAFT || p.what == J_JOB))
		fs_node_unlinked(fs, parent, name);
	fuse_reply_err(req, -ret);
}

/*
 * A rename inside jobs/ moves a draft; giving it a name that is not a
 * scratch name submits it, as an editor or rsync expects: the rename fails
 * with the errno a close would have given, and the draft stays where it was.
 */
static int jobs_rename_draft(struct fs *fs, const char *from, const char *to, uid_t ruid)
{
	struct fs_jobs *fj = fs->jobs;
	struct jobs_draft *d, *old;
	char *text = NULL;
	size_t len = 0;
	uid_t uid = 0;
	gid_t gid = 0;
	bool too_big = false;
	int ret = 0;

	pthread_mutex_lock(&fj->lock);
	d = jobs_draft_find(fj, from);
	old = jobs_draft_find(fj, to);
	if (!d)
		ret = -ENOENT;
	else if (ruid != 0 && ruid != d->uid)
		ret = -EPERM;
	else if (jobs_scratch(to) || d->readonly) {
		char *name = strdup(to);

		if (!name) {
			ret = -ENOMEM;
		} else {
			if (old && old != d)
				jobs_draft_unlink(fj, old);
			free(d->name);
			d->name = name;
			ret = 1;
		}
	} else {
		uid = d->uid;
		gid = d->gid;
		len = d->len;
		too_big = d->too_big;
		text = malloc(len + 1);
		if (!text)
			ret = -ENOMEM;
		else
			memcpy(text, d->data, len);
	}
	pthread_mutex_unlock(&fj->lock);
	if (ret != 0)
		return ret < 0 ? ret : 0;
	ret = jobs_submit(fs, to, text, len, too_big, uid, gid, NULL);
	free(text);
	if (ret == 0 && jobs_remove_draft(fj, from, 0) == 0)
		fs_node_unlinked(fs, fj->dir, from);
	return ret;
}

void fs_jobs_rename(fuse_req_t req, struct node *parent, const char *name, struct node *newparent,
		    const char *newname, unsigned int flags)
{
	struct fs *fs = jobs_fs(req);
	struct sched_info info;
	int ret = 0;

	if (parent->kind != NODE_JOBS || newparent->kind != NODE_JOBS)
		ret = -EXDEV;	/* mv falls back to copying, which submits at close */
	else if (!fs->jobs || !parent->permanent || !newparent->permanent ||
		 (flags & ~RENAME_NOREPLACE))
		ret = -EPERM;
	else if (path_check_name(newname) < 0)
		ret = -EINVAL;
	else if (sched_info(fs->jobs->sched, newname, &info) == 0)
		ret = -EEXIST;
	else
		ret = jobs_rename_draft(fs, name, newname, fuse_req_ctx(req)->uid);
	if (ret == 0)
		fs_node_renamed(fs, parent, name, newparent, newname, 0);
	fuse_reply_err(req, -ret);
}

/* ---- start and stop ---- */

int fs_jobs_node_content(struct fs *fs, char **buf, size_t *len)
{
	if (!fs->jobs) {
		*buf = strdup("scheduler not running\n");
		*len = *buf ? strlen(*buf) : 0;
		return *buf ? 0 : -ENOMEM;
	}
	return sched_node_render(fs->jobs->sched, buf, len);
}

/* sched_output_done_fn: what the output's own journal says (output.h). */
static bool jobs_output_done(void *arg, const char *id)
{
	struct fs_jobs *fj = arg;
	char dir[PATH_MAX];

	if (snprintf(dir, sizeof(dir), "%s/outputs/%s", fj->fs->cfg->state_dir, id) >=
	    (int)sizeof(dir))
		return false;
	return output_complete_dir(dir);
}

int fs_jobs_start(struct fs *fs)
{
	struct fs_jobs *fj = calloc(1, sizeof(*fj));
	int ret;

	if (!fj)
		return -ENOMEM;
	fj->fs = fs;
	fj->dir = fs_vdir_child(fs->root, "jobs");
	pthread_mutex_init(&fj->lock, NULL);
	ret = sched_create(&fj->sched, fs->cfg, jobs_final, fj);
	if (ret < 0) {
		pthread_mutex_destroy(&fj->lock);
		free(fj);
		return ret;
	}
	sched_set_output_check(fj->sched, jobs_output_done, fj);
	fs->jobs = fj;
	return 0;
}

void fs_jobs_stop(struct fs *fs)
{
	struct fs_jobs *fj = fs->jobs;

	if (!fj)
		return;
	sched_destroy(fj->sched);
	while (fj->waiters) {
		struct jobs_waiter *w = fj->waiters;

		fj->waiters = w->next;
		fuse_reply_err(w->req, EINTR);
		free(w->job);
		free(w);
	}
	while (fj->drafts) {
		struct jobs_draft *d = fj->drafts;

		fj->drafts = d->next;
		jobs_draft_free(d);
	}
	pthread_mutex_destroy(&fj->lock);
	free(fj);
	fs->jobs = NULL;
}
