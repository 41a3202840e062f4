/*
 * fs_dir.c - the open folders of the tree (fs_ops.c dispatches to them
 * through the node's kind): a listing read at opendir, or at the first
 * readdir for one the kernel keeps (a trusted tree's, a virtual folder's);
 * past FS_DIR_WINDOW entries streamed by a lister thread, so a folder of a
 * million objects never holds more than a window here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <fuse_lowlevel.h>

#include "fs.h"
#include "fs_ops_int.h"
#include "log.h"
#include "mono.h"
#include "path.h"

/* ---- folders ---- */

/* Counts the entries open folders hold, and the most ever held, for .mlfs/stats. */
static void fs_dir_held(struct fs *fs, uint64_t n)
{
	uint_fast64_t now = atomic_fetch_add(&fs->dir_entries, n) + n;
	uint_fast64_t peak = atomic_load(&fs->dir_entries_peak);

	while (now > peak && !atomic_compare_exchange_weak(&fs->dir_entries_peak, &peak, now))
		;
}

static void fs_dir_dropped(struct fs *fs, uint64_t n)
{
	atomic_fetch_sub(&fs->dir_entries, n);
}

static int fs_dir_add(struct fs_dir *d, const char *name, const struct stat *st,
		      struct node *vnode)
{
	struct fs_dirent *e;

	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;

		e = realloc(d->ents, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		d->ents = e;
		d->cap = cap;
	}
	e = &d->ents[d->n];
	e->name = strdup(name);
	if (!e->name)
		return -ENOMEM;
	e->st = *st;
	e->vnode = vnode;
	d->n++;
	fs_dir_held(d->fs, 1);
	return 0;
}

/*
 * The attributes a listed entry is shown with: its own, or none (st_mode 0:
 * DT_UNKNOWN, the kernel looks it up) with a made-up inode number, never 0,
 * which glibc's readdir takes for a deleted entry and skips.
 */
static void fs_dir_attr(struct fs_dir *d, const char *name, const struct stat *st,
			struct stat *kst)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a of the name */

	memset(kst, 0, sizeof(*kst));
	if (st) {
		*kst = *st;
		fs_node_attr(d->node, kst);
		return;
	}
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = (h ^ *c) * 1099511628211ull;
	kst->st_ino = (ino_t)(h | 1);
}

static int fs_dir_fill(void *payload, const char *name, const struct stat *st)
{
	struct fs_dir *d = payload;
	struct stat kst;
	int ret;

	fs_dir_attr(d, name, st, &kst);
	ret = fs_dir_add(d, name, &kst, NULL);
	if (ret == 0 && d->n >= FS_DIR_WINDOW && (d->node->view->be->ops->caps & BE_CAP_STREAM_LIST))
		ret = FS_DIR_FULL;
	return ret;
}

/* The lister's fill: waits for room in the window, or for stop. */
static int fs_dir_fill_stream(void *payload, const char *name, const struct stat *st)
{
	struct fs_dir *d = payload;
	struct stat kst;
	int ret = 0;

	fs_dir_attr(d, name, st, &kst);
	pthread_mutex_lock(&d->lock);
	if (d->skip > 0) {
		d->skip--;
	} else {
		while (d->n >= FS_DIR_WINDOW && !d->stop)
			pthread_cond_wait(&d->cond, &d->lock);
		ret = d->stop ? FS_DIR_FULL : fs_dir_add(d, name, &kst, NULL);
		pthread_cond_broadcast(&d->cond);
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static void *fs_dir_lister(void *arg)
{
	struct fs_dir *d = arg;
	int ret = fs_listing_readdir(d->fs, d->node->view, d->path, fs_dir_fill_stream, d);

	pthread_mutex_lock(&d->lock);
	d->done = true;
	d->err = ret == FS_DIR_FULL ? 0 : ret;	/* FULL: stopped, not failed */
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* Ends the lister, if any (d->lock not held). */
static void fs_dir_stop(struct fs_dir *d)
{
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	if (d->listing)
		pthread_join(d->lister, NULL);
	d->listing = false;
	d->stop = false;
}

static void fs_dir_free(struct fs_dir *d)
{
	if (d->streamed) {
		fs_dir_stop(d);
		pthread_mutex_destroy(&d->lock);
		pthread_cond_destroy(&d->cond);
	}
	for (size_t i = 0; i < d->n; i++)
		free(d->ents[i].name);
	fs_dir_dropped(d->fs, d->n);
	free(d->ents);
	free(d->path);
	free(d);
}

/* Forgets the first @k entries of the window (d->lock held). */
static void fs_dir_drop(struct fs_dir *d, size_t k)
{
	for (size_t i = 0; i < k; i++)
		free(d->ents[i].name);
	fs_dir_dropped(d->fs, k);
	memmove(d->ents, d->ents + k, (d->n - k) * sizeof(*d->ents));
	d->n -= k;
	d->base += k;
	pthread_cond_broadcast(&d->cond);
}

/* Starts a lister thread for the pass described by d->skip (d->lock held). */
static int fs_dir_start(struct fs_dir *d)
{
	int err;

	d->done = false;
	d->err = 0;
	err = pthread_create(&d->lister, NULL, fs_dir_lister, d);
	if (err) {
		d->done = true;
		d->err = -err;
		return -err;
	}
	d->listing = true;
	return 0;
}

/* After opendir held a full window: the rest will be streamed. */
static int fs_dir_stream(struct fs_dir *d, char *path)
{
	struct fs_dirent *e = realloc(d->ents, FS_DIR_WINDOW * sizeof(*e));

	if (!e)
		return -ENOMEM;
	d->ents = e;
	d->cap = FS_DIR_WINDOW;
	d->path = path;
	d->streamed = true;
	d->skip = d->n - 2;	/* all but "." and ".." came from the backend */
	if (pthread_mutex_init(&d->lock, NULL) != 0) {
		d->streamed = false;
		return -ENOMEM;
	}
	pthread_cond_init(&d->cond, NULL);
	pthread_mutex_lock(&d->lock);
	fs_dir_start(d);	/* a failure is d->err, told by readdir */
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/*
 * Makes entry @off the first of the window, waiting for the lister as
 * needed; an offset before the window starts a new pass (d->lock held and
 * released meanwhile).  0, or the listing's error with nothing left to give.
 */
static int fs_dir_seek(struct fs_dir *d, size_t off)
{
	if (off < d->base) {
		pthread_mutex_unlock(&d->lock);
		fs_dir_stop(d);
		pthread_mutex_lock(&d->lock);
		fs_dir_drop(d, d->n);
		d->base = 0;
		if (fs_dir_add(d, ".", &d->self, NULL) < 0 || fs_dir_add(d, "..", &d->self, NULL) < 0)
			return -ENOMEM;
		d->skip = 0;
		fs_dir_start(d);
	}
	for (;;) {
		fs_dir_drop(d, off - d->base < d->n ? off - d->base : d->n);
		if (d->n > 0 || (d->done && off == d->base))
			break;
		if (d->done)
			return d->err;	/* past the end: nothing, or the error */
		pthread_cond_wait(&d->cond, &d->lock);
	}
	return d->n > 0 || !d->err ? 0 : d->err;
}

int fs_dir_read_virtual(struct fs *fs, struct fs_dir *d)
{
	for (size_t i = 0; i < d->node->nentries; i++) {
		struct node *child = d->node->entries[i];
		struct stat st;

		/*
		 * A view whose backend cannot answer now is still listed, with
		 * an inode number (readdir(3) skips an entry of inode 0), of no
		 * known type and with no attributes for readdirplus: the kernel keeps
		 * this listing, and looks the entry up when it is used, so it
		 * shows what the view is once its server answers.
		 */
		if (fs_getattr_node(fs, child, NULL, &st) < 0) {
			fs_dir_attr(d, child->name, NULL, &st);
			if (fs_dir_add(d, child->name, &st, NULL) < 0)
				return -ENOMEM;
			continue;
		}
		if (fs_dir_add(d, child->name, &st, child) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int fs_dir_read(struct fs *fs, struct fs_dir *d)
{
	struct node *n = d->node;
	struct stat self;
	int ret = fs_getattr_node(fs, n, NULL, &self);

	if (ret < 0)
		return ret;
	d->self = self;
	if (fs_dir_add(d, ".", &self, NULL) < 0 || fs_dir_add(d, "..", &self, NULL) < 0)
		return -ENOMEM;
	return fs_kind_of(n)->list(fs, d);
}

/* A backend folder's entries, the rest streamed past the window (fs_dir_stream). */
int fs_dir_read_backend(struct fs *fs, struct fs_dir *d)
{
	struct node *n = d->node;
	char *path;
	int ret = fs_node_path(fs, n, NULL, &path);

	if (ret < 0)
		return ret;
	ret = fs_listing_readdir(fs, n->view, path, fs_dir_fill, d);
	if (ret == FS_DIR_FULL) {
		ret = fs_dir_stream(d, path);
		if (ret == 0)
			return 0;	/* the lister owns path now */
	}
	free(path);
	return ret;
}

bool fs_listing_kept_virtual(const struct node *n)
{
	(void)n;
	return true;
}

bool fs_listing_kept_backend(const struct node *n)
{
	return n->view->readonly;
}

void fs_opendir_common(fuse_req_t req, struct node *n, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_dir *d = calloc(1, sizeof(*d));
	int ret;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	d->fs = fs;
	d->node = n;
	d->gen = atomic_load(&fs->gen);
	/*
	 * A listing that cannot change (a virtual folder's, a trusted tree's)
	 * is kept by the kernel (cache_readdir): a folder opened again, each
	 * epoch of a dataset, is listed from there and its listing made, or
	 * asked of the backend, only when the kernel reads it.
	 */
	d->unread = fs_kind_of(n)->listing_kept(n);
	ret = d->unread ? 0 : fs_dir_read(fs, d);
	if (ret < 0) {
		fs_dir_free(d);
		fuse_reply_err(req, -ret);
		return;
	}
	if (d->unread) {
		fi->cache_readdir = 1;
		fi->keep_cache = 1;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT)
		fs_dir_free(d);
}

/* The entry readdirplus gives for @de, with a kernel reference on its node. */
static void fs_dirent_entry(struct fs *fs, struct fs_dir *d, struct fs_dirent *de,
			    struct fuse_entry_param *e)
{
	struct node *n = de->vnode;

	memset(e, 0, sizeof(*e));
	e->attr = de->st;
	if (strcmp(de->name, ".") == 0 || strcmp(de->name, "..") == 0)
		return;		/* ino 0: the kernel makes no dentry for these */
	if (!n && de->st.st_mode == 0)
		return;		/* the listing gave no attributes: the kernel looks it up */
	if (!n && fs_node_get(fs, d->node, de->name, &n) < 0)
		return;
	if (atomic_load(&n->changed) > d->gen && fs_getattr_node(fs, n, NULL, &e->attr) < 0)
		e->attr = de->st;	/* changed since opendir: give what it is now */
	e->ino = fs_nodeid(fs, n);
	e->entry_timeout = fs_timeout(n);
	e->attr_timeout = fs_attr_timeout(n, &e->attr);
}

/* Adds entry @i (an index into the listing, d->base + its place in the window). */
static size_t fs_dir_put(fuse_req_t req, struct fs_dir *d, size_t i, char *buf, size_t rem,
			 int plus)
{
	struct fs_dirent *de = &d->ents[i - d->base];
	struct fuse_entry_param e;
	size_t need;

	if (!plus)
		return fuse_add_direntry(req, buf, rem, de->name, &de->st, (off_t)i + 1);
	need = fuse_add_direntry_plus(req, NULL, 0, de->name, NULL, 0);
	if (need > rem)
		return need;
	fs_dirent_entry(fs_of(req), d, de, &e);
	return fuse_add_direntry_plus(req, buf, rem, de->name, &e, (off_t)i + 1);
}

void fs_readdir_common(fuse_req_t req, struct node *n, size_t size, off_t off,
		       struct fuse_file_info *fi, int plus)
{
	struct fs_dir *d = fs_dir_of(fi);
	char *buf = malloc(size);
	size_t pos = 0;
	int ret = 0;

	(void)n;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (d->unread) {	/* the kernel serializes the reads of one open folder */
		d->unread = false;
		ret = fs_dir_read(d->fs, d);
		if (ret < 0) {
			free(buf);
			fuse_reply_err(req, -ret);
			return;
		}
	}
	if (d->streamed) {
		pthread_mutex_lock(&d->lock);
		ret = fs_dir_seek(d, (size_t)off);
	}
	/*
	 * A streamed window is not refilled while a reply is made: the kernel
	 * may ask again from inside this reply, so its entries stay until then.
	 */
	for (size_t i = (size_t)off; ret == 0 && i < d->base + d->n; i++) {
		size_t len = fs_dir_put(req, d, i, buf + pos, size - pos, plus);

		if (len > size - pos)
			break;
		pos += len;
	}
	if (d->streamed)
		pthread_mutex_unlock(&d->lock);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_buf(req, buf, pos);
	free(buf);
}

void fs_releasedir_common(fuse_req_t req, struct node *n, struct fuse_file_info *fi)
{
	(void)n;
	fs_dir_free(fs_dir_of(fi));
	fuse_reply_err(req, 0);
}
