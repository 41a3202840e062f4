/*
 * fs_ops.c - the FUSE low-level operations of the gateway tree.
 *
 * Each operation finds its node and calls its kind's table (struct fs_kind,
 * fs_ops_int.h: virtual nodes, backend paths, jobs/), which builds the
 * backend path, makes one or two backend calls and replies; open files are
 * fs_file.c's, open folders fs_dir.c's.  Virtual folders answer from memory; changes
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
#include "fs_ops_int.h"
#include "log.h"
#include "mono.h"
#include "path.h"

#define FS_VIRTUAL_TIMEOUT 3600.0
#define FS_MAX_READAHEAD (1u << 20)


double fs_timeout(const struct node *n)
{
	return fs_kind_of(n)->timeout(n);
}

static double fs_timeout_virtual(const struct node *n)
{
	(void)n;
	return FS_VIRTUAL_TIMEOUT;
}

static double fs_timeout_backend(const struct node *n)
{
	return n->view->timeout;
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
static double fs_attr_timeout_backend(const struct node *n, const struct stat *st)
{
	if (!n->view->readonly && !S_ISDIR(st->st_mode) && st->st_nlink > 1)
		return 0.0;
	return n->view->timeout;
}

static double fs_attr_timeout_virtual(const struct node *n, const struct stat *st)
{
	(void)st;
	return fs_timeout_virtual(n);
}

double fs_attr_timeout(const struct node *n, const struct stat *st)
{
	return fs_kind_of(n)->attr_timeout(n, st);
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
	return fs_kind_of(dir)->writable(dir);
}

static int fs_writable_virtual(const struct node *dir)
{
	return -dir->write_errno;
}

static int fs_writable_jobs(const struct node *dir)
{
	(void)dir;
	return -EPERM;	/* only files are written into jobs/ (fs_jobs.c) */
}

static int fs_writable_backend(const struct node *dir)
{
	return dir->view->readonly ? -EROFS : 0;
}

/* 0 when @n's own attributes may be changed: a virtual node's are its folder's to refuse. */
static int fs_changeable_virtual(const struct node *n)
{
	return -n->parent->write_errno;
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
int fs_getattr_node(struct fs *fs, struct node *n, struct backend_file *bf, struct stat *st)
{
	return fs_kind_of(n)->attr(fs, n, bf, st);
}

static int fs_attr_virtual(struct fs *fs, struct node *n, struct backend_file *bf,
			   struct stat *st)
{
	(void)bf;
	fs_vnode_attr(fs, n, st);
	return 0;
}

static int fs_attr_backend(struct fs *fs, struct node *n, struct backend_file *bf,
			   struct stat *st)
{
	char *path;
	int ret = bf ? backend_fgetattr(bf, st) : -ENOSYS;

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

static void fs_lookup_backend(fuse_req_t req, struct node *parent, const char *name)
{
	struct fs *fs = fs_of(req);
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
	struct node *p = fs_req_node(req, parent);

	fs_kind_of(p)->lookup(req, p, name);
}

static void fs_lookup_virtual(fuse_req_t req, struct node *p, const char *name)
{
	struct fs *fs = fs_of(req);
	struct node *child = fs_vdir_child(p, name);
	struct stat st;
	int ret;

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

	fs_kind_of(n)->getattr(req, n, fi);
}

static void fs_getattr_common(fuse_req_t req, struct node *n, struct fuse_file_info *fi)
{
	struct fs_file *f = fi ? fs_file_of(fi) : NULL;
	struct stat st;
	int ret = fs_getattr_node(fs_of(req), n, f ? f->bf : NULL, &st);

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
	struct node *n = fs_req_node(req, ino);

	fs_kind_of(n)->setattr(req, n, attr, to_set, fi);
}

static void fs_setattr_common(fuse_req_t req, struct node *n, struct stat *attr, int to_set,
			      struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct backend_file *bf = fi ? fs_file_of(fi)->bf : NULL;
	unsigned int flags = fs_setattr_flags(to_set);
	char *path = NULL;
	struct stat st;
	int ret = fs_kind_of(n)->changeable(n);

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
	struct node *n = fs_req_node(req, ino);

	fs_kind_of(n)->readlink(req, n);
}

static void fs_readlink_virtual(fuse_req_t req, struct node *n)
{
	(void)n;
	fuse_reply_err(req, EINVAL);
}

static void fs_readlink_backend(fuse_req_t req, struct node *n)
{
	char buf[PATH_MAX + 1];
	char *path;
	int ret = fs_node_path(fs_of(req), n, NULL, &path);

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
int fs_new_path(struct fs *fs, struct node *parent, const char *name, char **path)
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

struct backend_cred fs_cred(fuse_req_t req)
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

	if (ret == 0 && (!n->view || n->view->be != p->view->be))
		ret = -EXDEV;	/* another datastore's, or no backend's (a virtual or jobs/ node) */
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
	struct node *p = fs_req_node(req, parent);

	fs_kind_of(p)->remove(req, p, name, is_dir);
}

static void fs_remove_common(fuse_req_t req, struct node *p, const char *name, int is_dir)
{
	struct fs *fs = fs_of(req);
	char *path = NULL;
	int ret = fs_new_path(fs, p, name, &path);

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

/* A rename between folders of two kinds is made by the kind of the higher rename_rank. */
static void fs_ops_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct node *p = fs_req_node(req, parent);
	struct node *np = fs_req_node(req, newparent);
	const struct fs_kind *k = fs_kind_of(p), *nk = fs_kind_of(np);

	(nk->rename_rank > k->rename_rank ? nk : k)->rename(req, p, name, np, newname, flags);
}

static void fs_rename_common(fuse_req_t req, struct node *p, const char *name, struct node *np,
			     const char *newname, unsigned int flags)
{
	struct fs *fs = fs_of(req);
	char *from = NULL, *to = NULL;
	int ret = fs_new_path(fs, p, name, &from);

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

/* ---- open files (fs_file.c) ---- */

static void fs_ops_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n = fs_req_node(req, ino);

	fs_kind_of(n)->open(req, n, fi);
}

static void fs_ops_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct node *p = fs_req_node(req, parent);

	fs_kind_of(p)->create(req, p, name, mode, fi);
}

static void fs_ops_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct node *node = fs_req_node(req, ino);

	fs_kind_of(node)->read(req, node, size, off, fi);
}

static void fs_ops_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct node *node = fs_req_node(req, ino);

	fs_kind_of(node)->write(req, node, buf, size, off, fi);
}

static void fs_ops_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *node = fs_req_node(req, ino);

	fs_kind_of(node)->flush(req, node, fi);
}

static void fs_ops_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *node = fs_req_node(req, ino);

	fs_kind_of(node)->release(req, node, fi);
}

static void fs_ops_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct node *node = fs_req_node(req, ino);

	fs_kind_of(node)->fsync(req, node, datasync, fi);
}

/* ---- folders (fs_dir.c) ---- */

static void fs_ops_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n = fs_req_node(req, ino);

	fs_kind_of(n)->opendir(req, n, fi);
}

static void fs_ops_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct node *n = fs_req_node(req, ino);

	fs_kind_of(n)->readdir(req, n, size, off, fi, 0);
}

static void fs_ops_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	struct node *n = fs_req_node(req, ino);

	fs_kind_of(n)->readdir(req, n, size, off, fi, 1);
}

static void fs_ops_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n = fs_req_node(req, ino);

	fs_kind_of(n)->releasedir(req, n, fi);
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

/* A node that is no backend's: the node's own disk, where staging and the cache live. */
static int fs_statfs_virtual(struct fs *fs, struct node *n, struct statvfs *sv)
{
	(void)n;
	return statvfs(fs->cfg->state_dir, sv) < 0 ? -errno : 0;
}

static int fs_statfs_backend(struct fs *fs, struct node *n, struct statvfs *sv)
{
	char *path;
	int ret;

	if (n->view->readonly && fs_statfs_kept(fs, n->view, sv) == 0)
		return 0;
	ret = fs_node_path(fs, n, NULL, &path);
	if (ret == 0) {
		ret = backend_statfs(n->view->be, path, sv);
		free(path);
	}
	if (ret == 0 && n->view->readonly)
		fs_statfs_keep(fs, n->view, sv);
	return ret;
}

static void fs_ops_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	struct node *n = fs_req_node(req, ino);
	struct statvfs sv;
	int ret = fs_kind_of(n)->statfs(fs, n, &sv);

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

/* ---- the kinds of node ---- */

static void fs_getattr_jobs(fuse_req_t req, struct node *n, struct fuse_file_info *fi)
{
	(void)fi;
	fs_jobs_getattr(req, n);
}

static void fs_setattr_jobs(fuse_req_t req, struct node *n, struct stat *attr, int to_set,
			    struct fuse_file_info *fi)
{
	(void)fi;
	fs_jobs_setattr(req, n, attr, to_set);
}

static int fs_changeable_backend(const struct node *n)
{
	return n->view->readonly ? -EROFS : 0;
}

/*
 * The requests virtual nodes and backend paths share: the common code,
 * which asks the second part of the node's table where the two differ.
 */
#define FS_KIND_COMMON_REQUESTS						\
	.getattr = fs_getattr_common, .setattr = fs_setattr_common,	\
	.remove = fs_remove_common, .rename = fs_rename_common,		\
	.open = fs_open_common, .create = fs_create_common,		\
	.read = fs_read_common, .write = fs_write_common,		\
	.flush = fs_flush_common, .release = fs_release_common,		\
	.fsync = fs_fsync_common, .opendir = fs_opendir_common,		\
	.readdir = fs_readdir_common, .releasedir = fs_releasedir_common

/* Virtual folders and files: the root, datastores/, .mlfs/stats ... made at start. */
static const struct fs_kind fs_kind_virtual = {
	.lookup = fs_lookup_virtual,
	FS_KIND_COMMON_REQUESTS,
	.readlink = fs_readlink_virtual,
	.timeout = fs_timeout_virtual,
	.attr_timeout = fs_attr_timeout_virtual,
	.attr = fs_attr_virtual,
	.writable = fs_writable_virtual,
	.changeable = fs_changeable_virtual,
	.open_file = fs_open_virtual,
	.list = fs_dir_read_virtual,
	.listing_kept = fs_listing_kept_virtual,
	.statfs = fs_statfs_virtual,
};

/* A path inside a view: a datastore's, a dataset's, a worker's input ... */
static const struct fs_kind fs_kind_backend = {
	.lookup = fs_lookup_backend,
	FS_KIND_COMMON_REQUESTS,
	.readlink = fs_readlink_backend,
	.timeout = fs_timeout_backend,
	.attr_timeout = fs_attr_timeout_backend,
	.attr = fs_attr_backend,
	.writable = fs_writable_backend,
	.changeable = fs_changeable_backend,
	.open_file = fs_open_backend,
	.list = fs_dir_read_backend,
	.listing_kept = fs_listing_kept_backend,
	.statfs = fs_statfs_backend,
};

/* jobs/ and everything beneath it (fs_jobs.c, fs_jobs_io.c, fs_jobs_dir.c). */
static const struct fs_kind fs_kind_jobs = {
	.lookup = fs_jobs_lookup,
	.getattr = fs_getattr_jobs,
	.setattr = fs_setattr_jobs,
	.readlink = fs_jobs_readlink,
	.remove = fs_jobs_remove,
	.rename = fs_jobs_rename,
	.rename_rank = 1,	/* into or out of jobs/: fs_jobs_rename says what may be */
	.open = fs_jobs_open,
	.create = fs_jobs_create,
	.read = fs_jobs_read,
	.write = fs_jobs_write,
	.flush = fs_jobs_flush,
	.release = fs_jobs_release,
	.fsync = fs_fsync_jobs,
	.opendir = fs_jobs_opendir,
	.readdir = fs_jobs_readdir,
	.releasedir = fs_jobs_releasedir,
	.timeout = fs_timeout_virtual,
	.attr_timeout = fs_attr_timeout_virtual,
	.attr = fs_attr_virtual,	/* as its parent's listing shows it (fs_vnode_attr) */
	.writable = fs_writable_jobs,
	/* changeable, open_file, list, listing_kept: never asked, jobs/ answers those requests */
	.statfs = fs_statfs_virtual,
};

static const struct fs_kind *const fs_kinds[] = {
	[NODE_VDIR] = &fs_kind_virtual,
	[NODE_VFILE] = &fs_kind_virtual,
	[NODE_BACKEND] = &fs_kind_backend,
	[NODE_JOBS] = &fs_kind_jobs,
};

/* The one place a node's kind is looked at. */
const struct fs_kind *fs_kind_of(const struct node *n)
{
	return fs_kinds[n->kind];
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
