/*
 * fs_jobs_dir.c - the folders of jobs/ (the jobs and drafts, a job's files,
 * its workers) as ls lists them, and what rm and mv do there: a draft
 * removed or renamed (which submits it), a job's folder removed once it
 * ended.
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
