/*
 * fs_ops.c - the FUSE low-level operations of the gateway tree.
 *
 * Each operation finds its node, builds the backend path, makes one or two
 * backend calls and replies.  Virtual folders answer from memory; changes
 * inside them get the folder's write_errno (EPERM, or EROFS for the
 * read-only trees).  Views under datasets/, checkpoints/ and models/ answer
 * EROFS to every change and are cached by the kernel for an hour; views
 * under datastores/ are revalidated after a second, and a file keeps its
 * pages across opens (keep_cache) while its size and mtime are unchanged.
 *
 * Threading: called from the session's worker threads.  No lock is held
 * across a backend call or a reply; the tree's locks live in fs_tree.c.
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
#include "log.h"
#include "mono.h"
#include "path.h"

#define FS_VIRTUAL_TIMEOUT 3600.0
#define FS_MAX_READAHEAD (1u << 20)

/* An open file: a backend file, or the content of a virtual one. */
struct fs_file {
	struct node *node;
	struct backend_file *bf;	/* NULL for a virtual file */
	char *buf;			/* virtual content */
	size_t len;
	bool written;
	int backing_id;			/* > 0: the kernel reads and writes it itself */
	struct cache_file *cf;		/* reads of a remote file go through the disk cache */
	struct fs_file *onext, *oprev;	/* node->opens, guarded by fs->cache_lock */
	struct fs_file *anext, *aprev;	/* fs->all_opens, guarded by fs->cache_lock */
};

struct fs_dirent {
	char *name;
	struct stat st;			/* kernel-side attributes */
	struct node *vnode;		/* a permanent child of a virtual folder */
};

/*
 * An open folder.  Its entries are read at opendir, FS_DIR_WINDOW at most.
 * A longer listing of a backend that can stream (BE_CAP_STREAM_LIST) goes on
 * in a *lister* thread, which lists the folder again, skips what opendir
 * holds, and waits whenever the window is full; each readdir drops the
 * entries before its offset, which the kernel has consumed, and so makes
 * room.  An offset before the window (rewinddir) lists from the start again.
 * So a folder of a million objects never holds more than a window here.
 */
#define FS_DIR_WINDOW	4096
#define FS_DIR_FULL	1		/* a fill's "stop": the window is full */

#define FS_STATFS_KEEP_S	60	/* a read-only view's statfs is asked again after this */

struct fs_dir {
	struct fs *fs;
	struct node *node;
	struct fs_dirent *ents;		/* entries base .. base + n - 1 */
	size_t n, cap;
	uint64_t gen;			/* fs->gen when the entries were read */
	bool unread;			/* a trusted tree's folder: listed at the first readdir */
	/* a streamed listing: everything below is under lock */
	bool streamed;
	size_t base;			/* the index (offset - 1) of ents[0] */
	struct stat self;		/* for "." and ".." of a new pass */
	char *path;			/* the backend's path of the folder */
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* an entry came, room was made, or stop */
	pthread_t lister;
	bool listing;			/* the lister thread exists (join it) */
	bool done;			/* the lister's pass ended, with err */
	bool stop;			/* the lister is asked to end */
	int err;
	size_t skip;			/* entries the lister's pass skips: held already */
};

static struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct node *fs_req_node(fuse_req_t req, fuse_ino_t ino)
{
	return fs_node(fs_of(req), ino);
}

static struct fs_file *fs_file_of(struct fuse_file_info *fi)
{
	return (struct fs_file *)(uintptr_t)fi->fh;
}

static struct fs_dir *fs_dir_of(struct fuse_file_info *fi)
{
	return (struct fs_dir *)(uintptr_t)fi->fh;
}

static double fs_timeout(const struct node *n)
{
	return n->kind == NODE_BACKEND ? n->view->timeout : FS_VIRTUAL_TIMEOUT;
}

/*
 * How long the kernel may trust @st.
 *
 * A file with several hard links in a datastore is several nodes here
 * (nodes are paths), so several inodes to the kernel, each with its own
 * cached attributes.  Rather than tracking which nodes show one backend
 * inode, such a file is never attribute-cached: a change through one name
 * (chmod, chown, utimens, truncate, a write, through the daemon or a
 * passthrough descriptor) is seen at once under every other, since each
 * stat asks the backend.  The one change that turns a cached file into one
 * with two names, link, drops the source's cached attributes
 * (fs_ops_link); unlink and rename over a name only lower a count the other
 * names already never cache.  Changes behind the mount's back are seen
 * within the view's timeout.
 */
static double fs_attr_timeout(const struct node *n, const struct stat *st)
{
	if (n->kind == NODE_BACKEND && !n->view->readonly && !S_ISDIR(st->st_mode) &&
	    st->st_nlink > 1)
		return 0.0;
	return fs_timeout(n);
}

/*
 * Makes the kernel ask again for @n's attributes.  Only the attributes, no
 * page: without writeback caching the kernel then never blocks, so this may
 * be called from inside any request (libfuse's notify_inval_inode rules).
 */
static void fs_inval_attr(struct fs *fs, struct node *n)
{
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, fs_nodeid(fs, n), -1, 0);
}

/* 0 when things may be made or changed inside @dir, else the negated errno. */
static int fs_writable(const struct node *dir)
{
	if (dir->kind == NODE_JOBS)
		return -EPERM;	/* only files are written into jobs/ (fs_jobs.c) */
	if (dir->kind != NODE_BACKEND)
		return -dir->write_errno;
	return dir->view->readonly ? -EROFS : 0;
}

/*
 * An unlinked node has no path, but while it is open its attributes come
 * from any of its open files (fstat asks without a handle).  The lock is
 * held across fgetattr so the file cannot be released meanwhile; backends
 * answer fgetattr from the handle, without network I/O.
 */
static int fs_getattr_unlinked(struct fs *fs, struct node *n, struct stat *st)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&fs->cache_lock);
	if (n->opens)
		ret = backend_fgetattr(n->opens->bf, st);
	pthread_mutex_unlock(&fs->cache_lock);
	return ret;
}

/* Attributes of any node; @bf, when given, is an open file of it. */
static int fs_getattr_node(struct fs *fs, struct node *n, struct backend_file *bf,
			   struct stat *st)
{
	char *path;
	int ret;

	if (n->kind != NODE_BACKEND) {
		fs_vnode_attr(fs, n, st);
		return 0;
	}
	ret = bf ? backend_fgetattr(bf, st) : -ENOSYS;
	if (ret == -ENOSYS) {
		ret = fs_node_path(fs, n, NULL, &path);
		if (ret == 0) {
			ret = n->view->readonly ? backend_getattr_trusted(n->view->be, path, st)
						: backend_getattr(n->view->be, path, st);
			free(path);
		} else if (ret == -ENOENT) {
			ret = fs_getattr_unlinked(fs, n, st);
		}
	}
	if (ret == 0)
		fs_node_attr(n, st);
	return ret;
}

static void fs_reply_entry(fuse_req_t req, struct fs *fs, struct node *n, const struct stat *st)
{
	struct fuse_entry_param e = {
		.ino = fs_nodeid(fs, n),
		.attr = *st,
		.attr_timeout = fs_attr_timeout(n, st),
		.entry_timeout = fs_timeout(n),
	};

	if (fuse_reply_entry(req, &e) == -ENOENT)
		fs_node_forget(fs, n, 1);	/* the request was interrupted */
}

/* A negative entry: the kernel remembers for a while that @name is not there. */
static void fs_reply_noent(fuse_req_t req, double timeout)
{
	struct fuse_entry_param e = { .ino = 0, .entry_timeout = timeout };

	fuse_reply_entry(req, &e);
}

/*
 * Replies with the entry of @name in @parent, whose backend attributes are
 * @st when @ret (the result of getting them) is 0, adding a kernel reference.
 */
static void fs_reply_child(fuse_req_t req, struct fs *fs, struct node *parent,
			   const char *name, int ret, struct stat *st)
{
	struct node *n;

	if (ret == 0)
		ret = fs_node_get(fs, parent, name, &n);
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	fs_node_attr(n, st);
	fs_reply_entry(req, fs, n, st);
}

static void fs_lookup_backend(fuse_req_t req, struct fs *fs, struct node *parent,
			      const char *name)
{
	struct stat st;
	char *path;
	int ret = path_check_name(name);

	if (ret == 0)
		ret = fs_node_path(fs, parent, name, &path);
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	ret = parent->view->readonly ? backend_getattr_trusted(parent->view->be, path, &st)
				     : backend_getattr(parent->view->be, path, &st);
	free(path);
	if (ret == -ENOENT)
		fs_reply_noent(req, fs_timeout(parent));
	else
		fs_reply_child(req, fs, parent, name, ret, &st);
}

static void fs_ops_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	struct node *p = fs_req_node(req, parent);
	struct node *child;
	struct stat st;
	int ret;

	if (p->kind == NODE_BACKEND) {
		fs_lookup_backend(req, fs, p, name);
		return;
	}
	if (p->kind == NODE_JOBS) {
		fs_jobs_lookup(req, p, name);
		return;
	}
	child = fs_vdir_child(p, name);
	if (!child) {
		fs_reply_noent(req, FS_VIRTUAL_TIMEOUT);
		return;
	}
	ret = fs_getattr_node(fs, child, NULL, &st);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fs_reply_entry(req, fs, child, &st);
}

static void fs_ops_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_node_forget(fs_of(req), fs_req_node(req, ino), nlookup);
	fuse_reply_none(req);
}

static void fs_ops_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		fs_node_forget(fs_of(req), fs_req_node(req, forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

static void fs_ops_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n = fs_req_node(req, ino);
	struct fs_file *f = fi && n->kind != NODE_JOBS ? fs_file_of(fi) : NULL;
	struct stat st;
	int ret;

	if (n->kind == NODE_JOBS) {
		fs_jobs_getattr(req, n);
		return;
	}
	ret = fs_getattr_node(fs_of(req), n, f ? f->bf : NULL, &st);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, fs_attr_timeout(n, &st));
}

static unsigned int fs_setattr_flags(int to_set)
{
	static const struct {
		int fuse;
		unsigned int be;
	} map[] = {
		{ FUSE_SET_ATTR_MODE, BE_SET_MODE },
		{ FUSE_SET_ATTR_UID, BE_SET_UID },
		{ FUSE_SET_ATTR_GID, BE_SET_GID },
		{ FUSE_SET_ATTR_SIZE, BE_SET_SIZE },
		{ FUSE_SET_ATTR_ATIME, BE_SET_ATIME },
		{ FUSE_SET_ATTR_MTIME, BE_SET_MTIME },
		{ FUSE_SET_ATTR_ATIME_NOW, BE_SET_ATIME_NOW },
		{ FUSE_SET_ATTR_MTIME_NOW, BE_SET_MTIME_NOW },
	};
	unsigned int flags = 0;

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (to_set & map[i].fuse)
			flags |= map[i].be;
	return flags;
}

static void fs_forget_cached(struct fs *fs, struct node *n)
{
	pthread_mutex_lock(&fs->cache_lock);
	n->seen = false;
	pthread_mutex_unlock(&fs->cache_lock);
}

static void fs_ops_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct node *n = fs_req_node(req, ino);
	struct backend_file *bf = fi && n->kind != NODE_JOBS ? fs_file_of(fi)->bf : NULL;
	unsigned int flags = fs_setattr_flags(to_set);
	char *path = NULL;
	struct stat st;
	int ret = n->kind == NODE_BACKEND ? (n->view->readonly ? -EROFS : 0) : -n->parent->write_errno;

	if (n->kind == NODE_JOBS) {
		fs_jobs_setattr(req, n, attr, to_set);
		return;
	}
	if (ret == 0)
		ret = fs_node_path(fs, n, NULL, &path);
	if (ret == -ENOENT && bf)
		ret = 0;	/* unlinked but open: changed through the handle */
	if (ret == 0)	/* nothing to change is chown(f, -1, -1): the change time still is */
		ret = backend_setattr(n->view->be, path, bf, attr, flags ? flags : BE_SET_CTIME);
	free(path);
	fs_node_changed(fs, n);
	if (ret == 0 && (flags & BE_SET_SIZE))
		fs_forget_cached(fs, n);
	if (ret == 0)
		ret = fs_getattr_node(fs, n, bf, &st);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, fs_attr_timeout(n, &st));
}

static void fs_ops_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	struct node *n = fs_req_node(req, ino);
	char buf[PATH_MAX + 1];
	char *path;
	int ret;

	if (n->kind == NODE_JOBS) {
		fs_jobs_readlink(req, n);
		return;
	}
	ret = n->kind == NODE_BACKEND ? fs_node_path(fs, n, NULL, &path) : -EINVAL;

	if (ret == 0) {
		ret = backend_readlink(n->view->be, path, buf, sizeof(buf));
		free(path);
	}
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_readlink(req, buf);
}

/* The path for a new entry @name in @parent, or a negated errno. */
static int fs_new_path(struct fs *fs, struct node *parent, const char *name, char **path)
{
	int ret = fs_writable(parent);

	if (ret == 0)
		ret = path_check_name(name);
	if (ret == 0)
		ret = fs_node_path(fs, parent, name, path);
	return ret;
}

/* Replies with the entry that a mkdir, symlink or link just made at @path. */
static void fs_reply_made(fuse_req_t req, struct node *parent, const char *name,
			  const char *path)
{
	struct fs *fs = fs_of(req);
	struct stat st;
	int ret = backend_getattr(parent->view->be, path, &st);

	fs_node_changed(fs, parent);
	fs_reply_child(req, fs, parent, name, ret, &st);
}

static struct backend_cred fs_cred(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	return (struct backend_cred){ .uid = ctx->uid, .gid = ctx->gid };
}

/* What fs_make makes: a folder, a symlink to @target, or a special file (@rdev). */
struct fs_new {
	mode_t mode;		/* with its type: S_IFDIR, S_IFLNK, S_IFIFO, ... */
	dev_t rdev;
	const char *target;
};

static int fs_make_backend(struct backend *be, const char *path, const struct fs_new *w,
			   const struct backend_cred *cred)
{
	if (S_ISDIR(w->mode))
		return backend_mkdir(be, path, w->mode & 07777, cred);
	if (S_ISLNK(w->mode))
		return backend_symlink(be, w->target, path, cred);
	return backend_mknod(be, path, w->mode, w->rdev, cred);
}

/* Makes what @w says at @name in @parent and replies with its entry. */
static void fs_make(fuse_req_t req, fuse_ino_t parent, const char *name, const struct fs_new *w)
{
	struct node *p = fs_req_node(req, parent);
	struct backend_cred cred = fs_cred(req);
	char *path = NULL;
	int ret = fs_new_path(fs_of(req), p, name, &path);

	if (ret == 0)
		ret = fs_make_backend(p->view->be, path, w, &cred);
	if (ret == 0)
		fs_reply_made(req, p, name, path);
	else
		fuse_reply_err(req, -ret);
	free(path);
}

static void fs_ops_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fs_new w = { .mode = S_IFDIR | (mode & 07777) };

	fs_make(req, parent, name, &w);
}

static void fs_ops_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	struct fs_new w = { .mode = S_IFLNK | 0777, .target = target };

	fs_make(req, parent, name, &w);
}

/*
 * FIFOs, sockets (bind(2) of a unix socket makes one) and devices.  The
 * kernel serves a FIFO's or a socket's I/O itself; only the node is kept by
 * the backend.  A regular file made by mknod(2) comes as CREATE.
 */
static void fs_ops_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			 dev_t rdev)
{
	struct fs_new w = { .mode = mode, .rdev = rdev };

	fs_make(req, parent, name, &w);
}

static void fs_ops_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fs *fs = fs_of(req);
	struct node *n = fs_req_node(req, ino);
	struct node *p = fs_req_node(req, newparent);
	char *from = NULL, *to = NULL;
	int ret = fs_new_path(fs, p, newname, &to);

	if (ret == 0 && (n->kind != NODE_BACKEND || n->view->be != p->view->be))
		ret = -EXDEV;
	if (ret == 0)
		ret = fs_node_path(fs, n, NULL, &from);
	if (ret == 0)
		ret = backend_link(p->view->be, from, to);
	if (ret == 0) {
		fs_inval_attr(fs, n);	/* cached with one link, it has two now */
		fs_reply_made(req, p, newname, to);
	} else {
		fuse_reply_err(req, -ret);
	}
	free(from);
	free(to);
}

static void fs_remove(fuse_req_t req, fuse_ino_t parent, const char *name, int is_dir)
{
	struct fs *fs = fs_of(req);
	struct node *p = fs_req_node(req, parent);
	char *path = NULL;
	int ret;

	if (p->kind == NODE_JOBS) {
		fs_jobs_remove(req, p, name, is_dir);
		return;
	}
	ret = fs_new_path(fs, p, name, &path);
	if (ret == 0)
		ret = is_dir ? backend_rmdir(p->view->be, path) : backend_unlink(p->view->be, path);
	if (ret == 0)
		fs_node_unlinked(fs, p, name);
	fs_node_changed(fs, p);
	free(path);
	fuse_reply_err(req, -ret);
}

static void fs_ops_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fs_remove(req, parent, name, 0);
}

static void fs_ops_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fs_remove(req, parent, name, 1);
}

static void fs_ops_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct fs *fs = fs_of(req);
	struct node *p = fs_req_node(req, parent);
	struct node *np = fs_req_node(req, newparent);
	char *from = NULL, *to = NULL;
	int ret;

	if (p->kind == NODE_JOBS || np->kind == NODE_JOBS) {
		fs_jobs_rename(req, p, name, np, newname, flags);
		return;
	}
	ret = fs_new_path(fs, p, name, &from);
	if (ret == 0)
		ret = fs_new_path(fs, np, newname, &to);
	if (ret == 0 && p->view->be != np->view->be)
		ret = -EXDEV;
	if (ret == 0)
		ret = backend_rename(p->view->be, from, to, flags);
	if (ret == 0)
		ret = fs_node_renamed(fs, p, name, np, newname, flags);
	fs_node_changed(fs, p);
	fs_node_changed(fs, np);
	free(from);
	free(to);
	fuse_reply_err(req, -ret);
}

/* Whether the kernel may keep the pages it has of @n, given its attributes now. */
static bool fs_keep_cache(struct fs *fs, struct node *n, const struct stat *st)
{
	bool keep;

	pthread_mutex_lock(&fs->cache_lock);
	keep = n->seen && n->seen_size == st->st_size &&
	       n->seen_mtime.tv_sec == st->st_mtim.tv_sec &&
	       n->seen_mtime.tv_nsec == st->st_mtim.tv_nsec;
	n->seen = true;
	n->seen_size = st->st_size;
	n->seen_mtime = st->st_mtim;
	pthread_mutex_unlock(&fs->cache_lock);
	return keep;
}

static int fs_open_virtual(struct fs *fs, struct node *n, struct fs_file *f,
			   struct fuse_file_info *fi)
{
	if (n->kind != NODE_VFILE)
		return -EISDIR;
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return -n->parent->write_errno;
	fi->direct_io = 1;
	return n->content(fs, &f->buf, &f->len);
}

static ssize_t fs_cache_fetch(void *arg, void *buf, size_t len, off_t off)
{
	return backend_pread(arg, buf, len, off);
}

/*
 * Puts the disk cache between the reader and a remote file.  A backend that
 * cannot name the content (no cache_key) is read directly.  Once the whole
 * object is in the cache the kernel may read the cached file itself.
 */
static int fs_open_cached(struct fs *fs, struct fs_file *f)
{
	struct backend *be = f->bf->be;
	char key[PATH_MAX + 1024];
	struct stat st;
	int ret = backend_cache_key(f->bf, key, sizeof(key));

	if (ret == -ENOTSUP)
		return 0;
	if (ret >= 0)
		ret = backend_fgetattr(f->bf, &st);
	if (ret >= 0)
		ret = cache_file_open(fs->cache, &f->cf, key, (uint64_t)st.st_size,
				      &be->stats.cache, fs_cache_fetch, f->bf);
	if (ret < 0)
		backend_release(f->bf);
	return ret;
}

static int fs_open_backend(struct fs *fs, struct node *n, struct fs_file *f,
			   struct fuse_file_info *fi)
{
	bool writing = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
	struct stat st;
	char *path;
	int ret;

	if (writing && n->view->readonly)
		return -EROFS;
	ret = fs_node_path(fs, n, NULL, &path);
	if (ret < 0)
		return ret;
	ret = backend_open(&f->bf, n->view->be, path,
			   fi->flags | (n->view->readonly ? BE_O_TRUST : 0));
	free(path);
	if (ret < 0)
		return ret;
	if (!writing && (n->view->be->ops->caps & BE_CAP_REMOTE) && fs->cache) {
		ret = fs_open_cached(fs, f);
		if (ret < 0)
			return ret;
	}
	if (f->cf)
		fs_prefetch_opened(fs, n);
	f->backing_id = fs_passthrough_get(fs, n, f->cf ? cache_file_fd(f->cf)
							 : backend_local_fd(f->bf),
					   n->view->readonly);
	if (f->backing_id > 0) {
		atomic_fetch_add(&n->view->be->stats.passthrough_opens, 1);
		return 0;
	}
	if (n->view->readonly)
		fi->keep_cache = 1;
	else if (backend_fgetattr(f->bf, &st) == 0)
		fi->keep_cache = fs_keep_cache(fs, n, &st) && !(fi->flags & O_TRUNC);
	return 0;
}

static void fs_file_opened(struct fs *fs, struct fs_file *f)
{
	atomic_fetch_add(&fs->open_files, 1);
	pthread_mutex_lock(&fs->cache_lock);
	f->anext = fs->all_opens;
	if (f->anext)
		f->anext->aprev = f;
	fs->all_opens = f;
	if (f->bf) {
		f->onext = f->node->opens;
		if (f->onext)
			f->onext->oprev = f;
		f->node->opens = f;
	}
	pthread_mutex_unlock(&fs->cache_lock);
}

static void fs_file_closing(struct fs *fs, struct fs_file *f)
{
	pthread_mutex_lock(&fs->cache_lock);
	if (f->aprev)
		f->aprev->anext = f->anext;
	else
		fs->all_opens = f->anext;
	if (f->anext)
		f->anext->aprev = f->aprev;
	if (f->bf) {
		if (f->oprev)
			f->oprev->onext = f->onext;
		else
			f->node->opens = f->onext;
		if (f->onext)
			f->onext->oprev = f->oprev;
	}
	pthread_mutex_unlock(&fs->cache_lock);
}

static void fs_release_file(struct fs *fs, struct fs_file *f)
{
	struct stat st;

	fs_file_closing(fs, f);
	if (f->bf)
		fs_passthrough_put(fs, f->node, f->backing_id);
	if (f->bf && f->written && backend_fgetattr(f->bf, &st) == 0)
		fs_keep_cache(fs, f->node, &st);	/* our own writes are in the kernel's cache */
	cache_file_close(f->cf);	/* before the backend file its read-ahead uses */
	backend_release(f->bf);
	free(f->buf);
	free(f);
	atomic_fetch_sub(&fs->open_files, 1);
}

void fs_release_all(struct fs *fs)
{
	while (fs->all_opens)
		fs_release_file(fs, fs->all_opens);
}

static void fs_reply_open(fuse_req_t req, struct fs *fs, struct fs_file *f,
			  struct fuse_file_info *fi)
{
	int ret;

	fs_file_opened(fs, f);
	fi->fh = (uint64_t)(uintptr_t)f;
	ret = f->backing_id > 0 ? fs_passthrough_reply_open(req, fi, f->backing_id)
				: fuse_reply_open(req, fi);
	if (ret == -ENOENT)
		fs_release_file(fs, f);
}

/*
 * An open that failed for want of file descriptors says so once in the
 * log: the opener gets EMFILE (or ENFILE), and mlfs goes on serving.
 */
static void fs_note_fds(int ret)
{
	static atomic_flag said = ATOMIC_FLAG_INIT;
	struct rlimit rl;

	if ((ret != -EMFILE && ret != -ENFILE) || atomic_flag_test_and_set(&said))
		return;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		rl.rlim_cur = 0;
	log_warn("out of file descriptors (%s, the limit is %llu): opens fail with %s until files "
		 "are closed; raise the daemon's RLIMIT_NOFILE (ulimit -Hn) to serve more at once",
		 ret == -EMFILE ? "this process" : "the whole system",
		 (unsigned long long)rl.rlim_cur, ret == -EMFILE ? "EMFILE" : "ENFILE");
}

static void fs_ops_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct node *n = fs_req_node(req, ino);
	struct fs_file *f;
	int ret;

	if (n->kind == NODE_JOBS) {
		fs_jobs_open(req, n, fi);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	f->node = n;
	ret = n->kind == NODE_BACKEND ? fs_open_backend(fs, n, f, fi)
				       : fs_open_virtual(fs, n, f, fi);
	if (ret < 0) {
		fs_note_fds(ret);
		free(f->buf);
		free(f);
		fuse_reply_err(req, -ret);
		return;
	}
	fs_reply_open(req, fs, f, fi);
}

static void fs_ops_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct node *p = fs_req_node(req, parent);
	struct backend_cred cred = fs_cred(req);
	struct fs_file *f;
	struct fuse_entry_param e = { 0 };
	char *path = NULL;
	int ret;

	if (p->kind == NODE_JOBS) {
		fs_jobs_create(req, p, name, mode, fi);
		return;
	}
	f = calloc(1, sizeof(*f));
	ret = f ? fs_new_path(fs, p, name, &path) : -ENOMEM;
	if (ret == 0)
		ret = backend_create_file(&f->bf, p->view->be, path, fi->flags, mode, &cred);
	free(path);
	if (ret == 0 && (ret = backend_fgetattr(f->bf, &e.attr)) == 0)
		ret = fs_node_get(fs, p, name, &f->node);
	if (ret < 0) {
		fs_note_fds(ret);
		if (f)
			backend_release(f->bf);
		free(f);
		fuse_reply_err(req, -ret);
		return;
	}
	/* The kernel writes a new local file itself from the start, when it can. */
	f->backing_id = fs_passthrough_get(fs, f->node, backend_local_fd(f->bf), false);
	if (f->backing_id > 0)
		atomic_fetch_add(&p->view->be->stats.passthrough_opens, 1);
	fs_keep_cache(fs, f->node, &e.attr);
	fs_node_changed(fs, p);
	fs_node_attr(f->node, &e.attr);
	e.ino = fs_nodeid(fs, f->node);
	e.entry_timeout = fs_timeout(f->node);
	e.attr_timeout = fs_attr_timeout(f->node, &e.attr);
	fs_file_opened(fs, f);
	fi->fh = (uint64_t)(uintptr_t)f;
	if ((f->backing_id > 0 ? fs_passthrough_reply_create(req, &e, fi, f->backing_id)
			       : fuse_reply_create(req, &e, fi)) == -ENOENT) {
		fs_node_forget(fs, f->node, 1);
		fs_release_file(fs, f);
	}
}

/* A per-thread buffer for reads, so a 1 MiB read costs no allocation. */
static pthread_key_t fs_buf_key;
static pthread_once_t fs_buf_once = PTHREAD_ONCE_INIT;

struct fs_buf {
	size_t cap;
	char data[];
};

static void fs_buf_key_init(void)
{
	pthread_key_create(&fs_buf_key, free);
}

static char *fs_thread_buf(size_t size)
{
	struct fs_buf *b;

	pthread_once(&fs_buf_once, fs_buf_key_init);
	b = pthread_getspecific(fs_buf_key);
	if (!b || b->cap < size) {
		free(b);
		b = malloc(sizeof(*b) + size);
		pthread_setspecific(fs_buf_key, b);
		if (!b)
			return NULL;
		b->cap = size;
	}
	return b->data;
}

static void fs_reply_pieces(void *arg, const struct iovec *iov, int cnt)
{
	fuse_reply_iov(arg, iov, cnt);
}

/*
 * Answers a read of a remote file straight from the disk cache: from the
 * blocks just fetched, still in memory, or from the cache's mapping of the
 * data file; the kernel copies the reply from there, with no copy in
 * between.  Returns false to read the usual way.
 */
static bool fs_read_cached(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
	ssize_t n = cache_file_read_iov(f->cf, size, off, fs_reply_pieces, req);

	if (n == -ENOTSUP)
		return false;
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	return true;
}

/*
 * Copies what a virtual file holds at @off into @buf.  The reply goes from
 * the copy: once it is written the reader may close the file, and a
 * RELEASE in another thread free f->buf while this thread is still
 * returning from writev (ASan checks the iovec after the call, and
 * reported exactly that).
 */
static ssize_t fs_read_virtual(struct fs_file *f, char *buf, size_t size, off_t off)
{
	size_t start = (size_t)off < f->len ? (size_t)off : f->len;
	size_t len = f->len - start < size ? f->len - start : size;

	memcpy(buf, f->buf + start, len);
	return (ssize_t)len;
}

static void fs_ops_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs_file *f = fs_file_of(fi);
	struct node *node = fs_req_node(req, ino);
	char *buf;
	ssize_t n;

	if (node->kind == NODE_JOBS) {
		fs_jobs_read(req, node, size, off, fi);
		return;
	}
	if (f->cf && fs_read_cached(req, f, size, off))
		return;
	buf = fs_thread_buf(size);
	if (!buf)
		n = -ENOMEM;
	else if (!f->bf)
		n = fs_read_virtual(f, buf, size, off);
	else if (f->cf)
		n = cache_file_read(f->cf, buf, size, off);
	else
		n = backend_pread(f->bf, buf, size, off);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void fs_ops_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct fs_file *f = fs_file_of(fi);
	struct node *node = fs_req_node(req, ino);
	ssize_t n;

	if (node->kind == NODE_JOBS) {
		fs_jobs_write(req, node, buf, size, off, fi);
		return;
	}
	n = f->bf ? backend_pwrite(f->bf, buf, size, off) : -EBADF;
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
		return;
	}
	f->written = true;
	fs_node_changed(fs_of(req), f->node);
	fuse_reply_write(req, (size_t)n);
}

static void fs_ops_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_file *f = fs_file_of(fi);
	struct node *node = fs_req_node(req, ino);

	if (node->kind == NODE_JOBS) {
		fs_jobs_flush(req, node, fi);
		return;
	}
	fuse_reply_err(req, f->bf ? -backend_flush(f->bf) : 0);
}

static void fs_ops_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *node = fs_req_node(req, ino);

	if (node->kind == NODE_JOBS) {
		fs_jobs_release(req, node, fi);
		return;
	}
	fs_release_file(fs_of(req), fs_file_of(fi));
	fuse_reply_err(req, 0);
}

static void fs_ops_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct fs_file *f = fs_file_of(fi);

	if (fs_req_node(req, ino)->kind == NODE_JOBS)
		f = NULL;	/* a draft is made durable when it is accepted */
	fuse_reply_err(req, f && f->bf ? -backend_fsync(f->bf, datasync) : 0);
}

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

static int fs_dir_read_virtual(struct fs *fs, struct fs_dir *d)
{
	for (size_t i = 0; i < d->node->nentries; i++) {
		struct node *child = d->node->entries[i];
		struct stat st;

		/* A view whose backend cannot answer is still listed. */
		if (fs_getattr_node(fs, child, NULL, &st) < 0) {
			memset(&st, 0, sizeof(st));
			st.st_mode = S_IFDIR;
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
	char *path;
	int ret = fs_getattr_node(fs, n, NULL, &self);

	if (ret < 0)
		return ret;
	d->self = self;
	if (fs_dir_add(d, ".", &self, NULL) < 0 || fs_dir_add(d, "..", &self, NULL) < 0)
		return -ENOMEM;
	if (n->kind == NODE_VDIR)
		return fs_dir_read_virtual(fs, d);
	ret = fs_node_path(fs, n, NULL, &path);
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

static void fs_ops_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_dir *d;
	int ret;

	if (fs_req_node(req, ino)->kind == NODE_JOBS) {
		fs_jobs_opendir(req, fs_req_node(req, ino), fi);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	d->fs = fs;
	d->node = fs_req_node(req, ino);
	d->gen = atomic_load(&fs->gen);
	/*
	 * A trusted tree's listing is kept by the kernel (cache_readdir): a
	 * folder opened again, each epoch of a dataset, is listed from there
	 * and its listing asked of the backend only when the kernel reads it.
	 */
	d->unread = d->node->kind == NODE_BACKEND && d->node->view->readonly;
	ret = d->unread ? 0 : fs_dir_read(fs, d);
	if (ret < 0) {
		fs_dir_free(d);
		fuse_reply_err(req, -ret);
		return;
	}
	if (d->node->kind != NODE_BACKEND || d->node->view->readonly) {
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

static void fs_do_readdir(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi,
			  int plus)
{
	struct fs_dir *d = fs_dir_of(fi);
	char *buf = malloc(size);
	size_t pos = 0;
	int ret = 0;

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

static void fs_ops_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	if (fs_req_node(req, ino)->kind == NODE_JOBS) {
		fs_jobs_readdir(req, fs_req_node(req, ino), size, off, fi, 0);
		return;
	}
	fs_do_readdir(req, size, off, fi, 0);
}

static void fs_ops_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	if (fs_req_node(req, ino)->kind == NODE_JOBS) {
		fs_jobs_readdir(req, fs_req_node(req, ino), size, off, fi, 1);
		return;
	}
	fs_do_readdir(req, size, off, fi, 1);
}

static void fs_ops_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (fs_req_node(req, ino)->kind == NODE_JOBS) {
		fs_jobs_releasedir(req, fs_req_node(req, ino), fi);
		return;
	}
	fs_dir_free(fs_dir_of(fi));
	fuse_reply_err(req, 0);
}

/*
 * A read-only view's statfs, asked of its server at most every
 * FS_STATFS_KEEP_S: find and fts ask it of every folder they walk, which
 * made each epoch of a dataset cost a request.  0 or -EAGAIN.
 */
static int fs_statfs_kept(struct fs *fs, struct view *v, struct statvfs *sv)
{
	int ret = -EAGAIN;

	pthread_mutex_lock(&fs->cache_lock);
	if (v->statfs_ns && mono_ns() - v->statfs_ns < FS_STATFS_KEEP_S * 1000000000LL) {
		*sv = v->statfs;
		ret = 0;
	}
	pthread_mutex_unlock(&fs->cache_lock);
	return ret;
}

static void fs_statfs_keep(struct fs *fs, struct view *v, const struct statvfs *sv)
{
	pthread_mutex_lock(&fs->cache_lock);
	v->statfs = *sv;
	v->statfs_ns = mono_ns();
	pthread_mutex_unlock(&fs->cache_lock);
}

static void fs_ops_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	struct node *n = fs_req_node(req, ino);
	struct statvfs sv;
	char *path;
	int ret;

	if (n->kind != NODE_BACKEND) {
		/* The node's own disk, where staging and the cache live. */
		ret = statvfs(fs->cfg->state_dir, &sv) < 0 ? -errno : 0;
	} else if (n->view->readonly && fs_statfs_kept(fs, n->view, &sv) == 0) {
		ret = 0;
	} else {
		ret = fs_node_path(fs, n, NULL, &path);
		if (ret == 0) {
			ret = backend_statfs(n->view->be, path, &sv);
			free(path);
		}
		if (ret == 0 && n->view->readonly)
			fs_statfs_keep(fs, n->view, &sv);
	}
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_statfs(req, &sv);
}

static void fs_ops_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->want |= FUSE_CAP_ATOMIC_O_TRUNC & conn->capable;
	conn->want |= FUSE_CAP_PARALLEL_DIROPS & conn->capable;
	/*
	 * readdirplus in the kernel's adaptive mode: ls -l gets every entry's
	 * attributes with the listing, find (which needs none) gets plain entries.
	 */
	conn->want |= (FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO) & conn->capable;
	/*
	 * The kernel keeps the smaller of this and the mount's readahead window,
	 * which cmd_mount.c raised before this INIT reached us.
	 */
	conn->max_readahead = FS_MAX_READAHEAD;
}

const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_ops_init,
	.lookup = fs_ops_lookup,
	.forget = fs_ops_forget,
	.forget_multi = fs_ops_forget_multi,
	.getattr = fs_ops_getattr,
	.setattr = fs_ops_setattr,
	.readlink = fs_ops_readlink,
	.mkdir = fs_ops_mkdir,
	.mknod = fs_ops_mknod,
	.unlink = fs_ops_unlink,
	.rmdir = fs_ops_rmdir,
	.symlink = fs_ops_symlink,
	.rename = fs_ops_rename,
	.link = fs_ops_link,
	.open = fs_ops_open,
	.read = fs_ops_read,
	.write = fs_ops_write,
	.flush = fs_ops_flush,
	.release = fs_ops_release,
	.fsync = fs_ops_fsync,
	.opendir = fs_ops_opendir,
	.readdir = fs_ops_readdir,
	.readdirplus = fs_ops_readdirplus,
	.releasedir = fs_ops_releasedir,
	.statfs = fs_ops_statfs,
	.create = fs_ops_create,
};
