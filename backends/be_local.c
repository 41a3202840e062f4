/*
 * be_local.c - a datastore that is a folder on this node.
 *
 * The baseline for speed and for POSIX behaviour: every call is one or two
 * system calls on the folder.  Confinement is the point of this file: the
 * root is opened once, and every path beneath it is opened with openat2()
 * and RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, so mlfs itself never follows a
 * symlink or a "..", whatever a user planted in the folder.  Calls on a last
 * component (unlink, rename, chown, ...) go through the parent's descriptor
 * with the *at() calls that do not follow it.  A symlink is shown as a
 * symlink; the kernel resolves it on the client like any other.
 *
 * Special files (FIFOs, sockets, devices) are made with mknodat beneath the
 * root like everything else, owned by the asker as every new entry is.
 *
 * Modes are final when they get here (the kernel applied the asker's
 * umask), so a thread that creates runs with a umask of its own, 0: it
 * unshares its filesystem attributes once (CLONE_FS), and the process's
 * umask stays as it is for everything else the daemon makes.
 *
 * Threading: no shared mutable state besides the root descriptor, which is
 * read-only after create; every call opens and closes its own descriptors.
 * Needs Linux 5.6 (openat2).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "be_local.h"
#include "path.h"

struct be_local {
	struct backend base;
	int root_fd;		/* O_PATH descriptor of the root folder */
	char *root;
};

struct be_local_file {
	struct backend_file base;
	int fd;
};

static struct be_local *be_local(struct backend *be)
{
	return (struct be_local *)be;
}

static int be_local_fd(struct backend_file *f)
{
	return ((struct be_local_file *)f)->fd;
}

static int be_local_errno(void)
{
	return errno ? -errno : -EIO;
}

/* Opens @path beneath the root, never following a symlink or "..". */
static int be_local_open_beneath(struct be_local *lb, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (unsigned long long)(flags | O_CLOEXEC),
		.mode = mode,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	if (path_has_dotdot(path))
		return -EINVAL;
	if (!(flags & (O_CREAT | O_TMPFILE)))
		how.mode = 0;
	do
		fd = syscall(SYS_openat2, lb->root_fd, path[0] ? path : ".", &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN);
	return fd < 0 ? be_local_errno() : (int)fd;
}

/*
 * Splits @path into its parent folder, opened as a descriptor, and its last
 * component (*name points into @path).  Returns the descriptor, which the
 * caller closes unless it is the root's (be_local_close_parent does both).
 */
static int be_local_parent(struct be_local *lb, const char *path, const char **name)
{
	const char *slash = strrchr(path, '/');
	char *parent;
	int fd;

	if (path_has_dotdot(path))
		return -EINVAL;
	if (!slash) {
		*name = path;
		return lb->root_fd;
	}
	*name = slash + 1;
	parent = strndup(path, (size_t)(slash - path));
	if (!parent)
		return -ENOMEM;
	fd = be_local_open_beneath(lb, parent, O_PATH | O_DIRECTORY, 0);
	free(parent);
	return fd;
}

static void be_local_close_parent(struct be_local *lb, int fd)
{
	if (fd >= 0 && fd != lb->root_fd)
		close(fd);
}

/* What a call on a last component needs besides the parent and the name. */
struct be_local_args {
	mode_t mode;
	dev_t rdev;				/* mknod */
	const char *target;			/* symlink */
	const struct backend_cred *cred;	/* mkdir, symlink, mknod */
	struct stat *st;			/* getattr */
	char *buf;				/* readlink */
	size_t size;
	int flags;				/* unlink */
};

typedef int be_local_at_fn(int pfd, const char *name, struct be_local_args *a);

/* Runs @fn on the parent folder of @path, opened beneath the root, and its last component. */
static int be_local_at(struct backend *be, const char *path, be_local_at_fn *fn,
		       struct be_local_args *a)
{
	struct be_local *lb = be_local(be);
	const char *name;
	int pfd = be_local_parent(lb, path, &name);
	int ret;

	if (pfd < 0)
		return pfd;
	ret = fn(pfd, name, a);
	be_local_close_parent(lb, pfd);
	return ret;
}

static int be_local_validate(const struct datastore_config *cfg, struct diag *d)
{
	int line = cfg->line;
	const char *root = config_get(cfg, "root", &line);
	char *abs = config_resolve_path(cfg->file, root ? root : "/");
	struct stat st;
	int ret = 0;

	if (!abs)
		return -ENOMEM;
	if (stat(abs, &st) < 0) {
		ret = -errno;
		diag_add(d, cfg->file, line, "[datastore %s] root: %s: %s", cfg->name, abs,
			 strerror(errno));
	} else if (!S_ISDIR(st.st_mode)) {
		ret = -ENOTDIR;
		diag_add(d, cfg->file, line, "[datastore %s] root: %s: not a folder", cfg->name,
			 abs);
	}
	free(abs);
	return ret;
}

static int be_local_create(struct backend **out, const struct datastore_config *cfg)
{
	const char *root = config_get(cfg, "root", NULL);
	struct be_local *lb = calloc(1, sizeof(*lb));

	if (!lb)
		return -ENOMEM;
	lb->root = config_resolve_path(cfg->file, root ? root : "/");
	if (!lb->root) {
		free(lb);
		return -ENOMEM;
	}
	lb->root_fd = open(lb->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (lb->root_fd < 0) {
		int ret = be_local_errno();

		free(lb->root);
		free(lb);
		return ret;
	}
	*out = &lb->base;
	return 0;
}

static void be_local_destroy(struct backend *be)
{
	struct be_local *lb = be_local(be);

	close(lb->root_fd);
	free(lb->root);
	free(lb);
}

static int be_local_do_getattr(int pfd, const char *name, struct be_local_args *a)
{
	return fstatat(pfd, name, a->st, AT_SYMLINK_NOFOLLOW) < 0 ? be_local_errno() : 0;
}

static int be_local_getattr(struct backend *be, const char *path, struct stat *st)
{
	struct be_local_args a = { .st = st };

	if (path[0] == '\0')
		return fstat(be_local(be)->root_fd, st) < 0 ? be_local_errno() : 0;
	return be_local_at(be, path, be_local_do_getattr, &a);
}

static const char *const be_local_source_section[] = {
	[SOURCE_DATASET] = "dataset",
	[SOURCE_CHECKPOINT] = "checkpoint",
	[SOURCE_MODEL] = "model",
	[SOURCE_SOURCE] = "source",
};

/*
 * A source must exist beneath the root, reached without a symlink: the
 * mount would never follow one to get there either.
 */
static int be_local_validate_source(const struct datastore_config *cfg,
				    const struct source_config *src, struct diag *d)
{
	struct backend *be;
	struct stat st;
	int ret = be_local_create(&be, cfg);

	if (ret < 0)
		return ret;	/* the root itself: be_local_validate says why */
	ret = be_local_getattr(be, src->path, &st);
	if (ret < 0)
		diag_add(d, cfg->file, src->source_line, "[%s %s] source: %s: %s",
			 be_local_source_section[src->kind], src->name, src->source,
			 ret == -ELOOP ? "a symlink on the way (never followed)" : strerror(-ret));
	be_local_destroy(be);
	return ret;
}

static int be_local_readdir(struct backend *be, const char *path, backend_fill_fn *fill,
			    void *payload)
{
	int fd = be_local_open_beneath(be_local(be), path, O_RDONLY | O_DIRECTORY, 0);
	struct dirent *de;
	struct stat st;
	DIR *dir;
	int ret = 0;

	if (fd < 0)
		return fd;
	dir = fdopendir(fd);
	if (!dir) {
		ret = be_local_errno();
		close(fd);
		return ret;
	}
	errno = 0;
	while (ret == 0 && (de = readdir(dir))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		/* An entry removed since readdir saw it is simply not listed. */
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			ret = fill(payload, de->d_name, &st);
		errno = 0;
	}
	if (ret == 0 && errno)
		ret = -errno;
	closedir(dir);
	return ret;
}

static int be_local_file_new(struct backend_file **out, struct backend *be, int fd)
{
	struct be_local_file *f = malloc(sizeof(*f));

	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	f->base.be = be;
	f->fd = fd;
	*out = &f->base;
	return 0;
}

static int be_local_open(struct backend_file **out, struct backend *be, const char *path,
			 int flags)
{
	int fd;

	flags &= ~(O_CREAT | O_EXCL | O_NOCTTY);
	fd = be_local_open_beneath(be_local(be), path, flags | O_NOFOLLOW, 0);
	if (fd < 0)
		return fd;
	return be_local_file_new(out, be, fd);
}

/*
 * Makes this thread's umask 0, leaving the process's alone: the mode a
 * creating call is given is the one the entry must get.  The thread
 * unshares its filesystem attributes the first time; where that is
 * refused, the process's umask applies.
 */
static void be_local_exact_modes(void)
{
	static __thread bool unshared;

	if (!unshared)
		unshared = unshare(CLONE_FS) == 0;
	if (unshared)
		umask(0);
}

/* chmod of what @fd (open, or O_PATH) is, never of a symlink it might name. */
static int be_local_chmod_fd(int fd, mode_t mode)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return chmod(proc, mode & 07777) < 0 ? be_local_errno() : 0;
}

/*
 * Puts back the setuid and setgid bits of @mode that the chown of a new
 * entry cleared (the kernel clears them on chown; a user's own create
 * keeps them, as far as the kernel's checks before the call let it).
 * Through @fd when the entry is open, else through an O_PATH descriptor
 * that is no symlink.
 */
static void be_local_keep_setid(int pfd, const char *name, int fd, mode_t mode)
{
	int pathfd = fd >= 0 ? -1 : openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		fd = pathfd;
	if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISLNK(st.st_mode) &&
	    (st.st_mode & 07777) != (mode & 07777))
		be_local_chmod_fd(fd, mode);
	if (pathfd >= 0)
		close(pathfd);
}

/*
 * Gives a new entry the asker's owner (as root only; a user's mount owns
 * what it makes).  @fd is the entry open, or -1; @mode its permission bits
 * when they hold setuid or setgid bits to keep (0 for folders and links,
 * whose chown clears none).
 */
static void be_local_set_owner(int pfd, const char *name, int fd, mode_t mode,
			       const struct backend_cred *cred)
{
	struct stat parent;
	gid_t gid = cred->gid;

	if (geteuid() != 0 || fstat(pfd, &parent) < 0)
		return;
	if (parent.st_mode & S_ISGID)
		gid = (gid_t)-1;	/* the folder's group, as the kernel gave it */
	if (cred->uid == 0 && (gid == 0 || gid == (gid_t)-1))
		return;
	if (fchownat(pfd, name, cred->uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		errno = 0;	/* created all the same; the owner stays root */
	else if (mode & (S_ISUID | S_ISGID))
		be_local_keep_setid(pfd, name, fd, mode);
}

static int be_local_create_file(struct backend_file **out, struct backend *be, const char *path,
				int flags, mode_t mode, const struct backend_cred *cred)
{
	struct be_local *lb = be_local(be);
	const char *name;
	int pfd = be_local_parent(lb, path, &name);
	int fd;

	if (pfd < 0)
		return pfd;
	flags = (flags & ~O_NOCTTY) | O_NOFOLLOW | O_CLOEXEC;
	be_local_exact_modes();
	fd = openat(pfd, name, flags | O_CREAT | O_EXCL, mode);
	if (fd >= 0)
		be_local_set_owner(pfd, name, fd, mode, cred);
	else if (errno == EEXIST && !(flags & O_EXCL))
		fd = openat(pfd, name, flags & ~O_CREAT);
	if (fd < 0)
		fd = be_local_errno();
	be_local_close_parent(lb, pfd);
	return fd < 0 ? fd : be_local_file_new(out, be, fd);
}

static ssize_t be_local_pread(struct backend_file *f, void *buf, size_t len, off_t off)
{
	ssize_t n = pread(be_local_fd(f), buf, len, off);

	return n < 0 ? be_local_errno() : n;
}

static ssize_t be_local_pwrite(struct backend_file *f, const void *buf, size_t len, off_t off)
{
	ssize_t n = pwrite(be_local_fd(f), buf, len, off);

	return n < 0 ? be_local_errno() : n;
}

static int be_local_fgetattr(struct backend_file *f, struct stat *st)
{
	return fstat(be_local_fd(f), st) < 0 ? be_local_errno() : 0;
}

static int be_local_fsync(struct backend_file *f, int datasync)
{
	int ret = datasync ? fdatasync(be_local_fd(f)) : fsync(be_local_fd(f));

	return ret < 0 ? be_local_errno() : 0;
}

static void be_local_release(struct backend_file *f)
{
	close(be_local_fd(f));
	free(f);
}

static int be_local_statfs(struct backend *be, const char *path, struct statvfs *sv)
{
	(void)path;
	return fstatvfs(be_local(be)->root_fd, sv) < 0 ? be_local_errno() : 0;
}

static int be_local_do_readlink(int pfd, const char *name, struct be_local_args *a)
{
	ssize_t n = readlinkat(pfd, name, a->buf, a->size - 1);

	if (n < 0)
		return be_local_errno();
	a->buf[n] = '\0';
	return 0;
}

static int be_local_readlink(struct backend *be, const char *path, char *buf, size_t size)
{
	struct be_local_args a = { .buf = buf, .size = size };

	return be_local_at(be, path, be_local_do_readlink, &a);
}

static int be_local_do_mkdir(int pfd, const char *name, struct be_local_args *a)
{
	be_local_exact_modes();
	if (mkdirat(pfd, name, a->mode) < 0)
		return be_local_errno();
	be_local_set_owner(pfd, name, -1, 0, a->cred);
	return 0;
}

static int be_local_mkdir(struct backend *be, const char *path, mode_t mode,
			  const struct backend_cred *cred)
{
	struct be_local_args a = { .mode = mode, .cred = cred };

	return be_local_at(be, path, be_local_do_mkdir, &a);
}

static int be_local_do_symlink(int pfd, const char *name, struct be_local_args *a)
{
	if (symlinkat(a->target, pfd, name) < 0)
		return be_local_errno();
	be_local_set_owner(pfd, name, -1, 0, a->cred);
	return 0;
}

static int be_local_symlink(struct backend *be, const char *target, const char *path,
			    const struct backend_cred *cred)
{
	struct be_local_args a = { .target = target, .cred = cred };

	return be_local_at(be, path, be_local_do_symlink, &a);
}

static int be_local_do_mknod(int pfd, const char *name, struct be_local_args *a)
{
	be_local_exact_modes();
	if (mknodat(pfd, name, a->mode, a->rdev) < 0)
		return be_local_errno();
	be_local_set_owner(pfd, name, -1, a->mode, a->cred);
	return 0;
}

static int be_local_mknod(struct backend *be, const char *path, mode_t mode, dev_t rdev,
			  const struct backend_cred *cred)
{
	struct be_local_args a = { .mode = mode, .rdev = rdev, .cred = cred };

	return be_local_at(be, path, be_local_do_mknod, &a);
}

static int be_local_do_unlink(int pfd, const char *name, struct be_local_args *a)
{
	return unlinkat(pfd, name, a->flags) < 0 ? be_local_errno() : 0;
}

static int be_local_unlinkat(struct backend *be, const char *path, int flags)
{
	struct be_local_args a = { .flags = flags };

	return be_local_at(be, path, be_local_do_unlink, &a);
}

static int be_local_unlink(struct backend *be, const char *path)
{
	return be_local_unlinkat(be, path, 0);
}

static int be_local_rmdir(struct backend *be, const char *path)
{
	return be_local_unlinkat(be, path, AT_REMOVEDIR);
}

/* Runs a two-path call (rename, link) with both parents opened beneath the root. */
static int be_local_two(struct backend *be, const char *from, const char *to, int is_link,
			unsigned int flags)
{
	struct be_local *lb = be_local(be);
	const char *fname, *tname;
	int ffd = be_local_parent(lb, from, &fname);
	int tfd, ret = 0;

	if (ffd < 0)
		return ffd;
	tfd = be_local_parent(lb, to, &tname);
	if (tfd < 0) {
		be_local_close_parent(lb, ffd);
		return tfd;
	}
	if (is_link ? linkat(ffd, fname, tfd, tname, 0) < 0
		    : renameat2(ffd, fname, tfd, tname, flags) < 0)
		ret = be_local_errno();
	be_local_close_parent(lb, tfd);
	be_local_close_parent(lb, ffd);
	return ret;
}

static int be_local_rename(struct backend *be, const char *from, const char *to,
			   unsigned int flags)
{
	return be_local_two(be, from, to, 0, flags);
}

static int be_local_link(struct backend *be, const char *from, const char *to)
{
	return be_local_two(be, from, to, 1, 0);
}

/*
 * chmod, chown and utimens through a descriptor: an open file's, or an
 * O_PATH one, which never follows (@is_link: it is a symlink's own).
 */
static int be_local_setattr_fd(int fd, int is_link, const struct stat *st, unsigned int to_set)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };
	int ret;

	if (to_set & BE_SET_MODE) {
		if (is_link)
			return -EOPNOTSUPP;
		ret = be_local_chmod_fd(fd, st->st_mode);
		if (ret < 0)
			return ret;
	}
	if ((to_set & (BE_SET_UID | BE_SET_GID | BE_SET_CTIME)) &&
	    fchownat(fd, "", (to_set & BE_SET_UID) ? st->st_uid : (uid_t)-1,
		     (to_set & BE_SET_GID) ? st->st_gid : (gid_t)-1,
		     AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return be_local_errno();
	if (to_set & BE_SET_ATIME)
		ts[0] = st->st_atim;
	if (to_set & BE_SET_MTIME)
		ts[1] = st->st_mtim;
	if (to_set & BE_SET_ATIME_NOW)
		ts[0].tv_nsec = UTIME_NOW;
	if (to_set & BE_SET_MTIME_NOW)
		ts[1].tv_nsec = UTIME_NOW;
	if ((to_set & (BE_SET_ATIME | BE_SET_MTIME | BE_SET_ATIME_NOW | BE_SET_MTIME_NOW)) &&
	    utimensat(fd, "", ts, AT_EMPTY_PATH) < 0)
		return be_local_errno();
	return 0;
}

static int be_local_truncate(struct be_local *lb, const char *path, off_t size)
{
	int fd = be_local_open_beneath(lb, path, O_WRONLY | O_NONBLOCK | O_NOFOLLOW, 0);
	int ret = 0;

	if (fd < 0)
		return fd;
	if (ftruncate(fd, size) < 0)
		ret = be_local_errno();
	close(fd);
	return ret;
}

static int be_local_setattr(struct backend *be, const char *path, struct backend_file *f,
			    const struct stat *st, unsigned int to_set)
{
	struct be_local *lb = be_local(be);
	struct stat cur;
	int fd, ret = 0;

	if (f) {
		if ((to_set & BE_SET_SIZE) && ftruncate(be_local_fd(f), st->st_size) < 0)
			return be_local_errno();
		return be_local_setattr_fd(be_local_fd(f), 0, st, to_set & ~BE_SET_SIZE);
	}
	if (to_set & BE_SET_SIZE) {
		ret = be_local_truncate(lb, path, st->st_size);
		if (ret < 0 || !(to_set & ~BE_SET_SIZE))
			return ret;
	}
	fd = be_local_open_beneath(lb, path, O_PATH | O_NOFOLLOW, 0);
	if (fd < 0)
		return fd;
	if (fstat(fd, &cur) < 0)
		ret = be_local_errno();
	else
		ret = be_local_setattr_fd(fd, S_ISLNK(cur.st_mode), st, to_set & ~BE_SET_SIZE);
	close(fd);
	return ret;
}

const struct backend_ops be_local_ops = {
	.version = BACKEND_OPS_VERSION,
	.scheme = "local",
	.caps = BE_CAP_WRITE | BE_CAP_OWNERS | BE_CAP_STREAM_LIST,
	.validate = be_local_validate,
	.validate_source = be_local_validate_source,
	.create = be_local_create,
	.destroy = be_local_destroy,
	.getattr = be_local_getattr,
	.readdir = be_local_readdir,
	.open = be_local_open,
	.pread = be_local_pread,
	.release = be_local_release,
	.statfs = be_local_statfs,
	.fgetattr = be_local_fgetattr,
	.readlink = be_local_readlink,
	.pwrite = be_local_pwrite,
	.fsync = be_local_fsync,
	.create_file = be_local_create_file,
	.mkdir = be_local_mkdir,
	.symlink = be_local_symlink,
	.link = be_local_link,
	.unlink = be_local_unlink,
	.rmdir = be_local_rmdir,
	.rename = be_local_rename,
	.setattr = be_local_setattr,
	.local_fd = be_local_fd,
	.mknod = be_local_mknod,
};

/* ---- what a config says of a local datastore ---- */

/* A job's absolute local path: the datastore's root. */
static int local_path_keys(const struct mlfs_config *cfg, struct datastore_config *ds,
			   const char *url, const char *rest, int line)
{
	(void)cfg;
	(void)rest;
	return config_kv_add(ds, "root", url, line);
}

static const char *const local_keys[] = { "root", NULL };

const struct config_form be_local_form = {
	.type = "local",
	.keys = local_keys,
	.paths = true,
	.url_keys = local_path_keys,
};
