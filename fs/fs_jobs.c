/*
 * fs_jobs.c - jobs/: submit a job by writing its spec, follow it with ls and cat
 * (here: what a path names, attributes, drafts; fs_jobs_io.c opens, reads
 * and writes, fs_jobs_dir.c lists, removes and renames).
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
#include "fs_jobs_int.h"
#include "log.h"
#include "output.h"
#include "path.h"
#include "scheduler.h"
#include "spec.h"

const char *const jobs_job_files[] = {
	"state", "reason", "status.json", "spec.json", "events", "log", "ctl", "wait", "workers",
};
const char *const jobs_worker_files[] = { "state", "exit_code", "log", "log.1", "output" };

/* A log, the events, or a worker's rotated log: a file of the job folder served as it is. */
bool jobs_grows(const char *file)
{
	return strcmp(file, "log") == 0 || strcmp(file, "events") == 0 || strcmp(file, "log.1") == 0;
}

struct fs *jobs_fs(fuse_req_t req)
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

bool jobs_scratch(const char *name)
{
	size_t len = strlen(name);

	return name[0] == '.' || (len && name[len - 1] == '~');
}

struct jobs_draft *jobs_draft_find(struct fs_jobs *fj, const char *name)
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

int jobs_node_classify(struct fs *fs, struct node *n, const char *name, struct jobs_path *p)
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

int jobs_stat(struct fs *fs, const struct jobs_path *p, struct stat *st)
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
	jobs_reply_stat(req, fs, n, &p, ret);
}

void jobs_reply_stat(fuse_req_t req, struct fs *fs, struct node *n, struct jobs_path *p, int ret)
{
	struct stat st;

	if (ret == 0)
		ret = jobs_stat(fs, p, &st);
	free(p->buf);
	p->buf = NULL;
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
void jobs_draft_unlink(struct fs_jobs *fj, struct jobs_draft *d)
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
int jobs_submit(struct fs *fs, const char *file, const char *text, size_t len, bool too_big,
		uid_t uid, gid_t gid, struct jobs_draft *d)
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

struct jobs_handle *jobs_handle_new(enum jobs_what what)
{
	struct jobs_handle *h = calloc(1, sizeof(*h));

	if (h) {
		h->what = what;
		h->fd = -1;
	}
	return h;
}

void jobs_handle_free(struct fs_jobs *fj, struct jobs_handle *h)
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
