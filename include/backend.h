/*
 * backend.h - the contract between the tree (fs/) and the storage behind it.
 *
 * A backend is one configured datastore: a folder, an NFS export, a share,
 * a bucket.  Each type supplies a versioned, append-only table of
 * operations; implementations embed struct backend (and struct
 * backend_file) as their first member.  The registry (backend.c) knows every
 * scheme of DESIGN §8 by name, compiled in or not.
 *
 * Paths are canonical and relative to the backend's root (path.h).  Every
 * operation returns >= 0 on success or a negated errno, and must be safe to
 * call from many threads at once.  fs/ calls backends only through the
 * inline wrappers at the bottom of this file: they count statistics and
 * answer for optional methods a backend leaves NULL.
 */
#ifndef MLFS_BACKEND_H
#define MLFS_BACKEND_H

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "cache.h"
#include "config.h"
#include "diag.h"

#define BACKEND_OPS_VERSION 6

/* Capabilities, in backend_ops.caps. */
#define BE_CAP_WRITE	(1u << 0)	/* pwrite, create, mkdir, unlink, ... */
#define BE_CAP_OWNERS	(1u << 1)	/* st_uid, st_gid and modes are real */
#define BE_CAP_REMOTE	(1u << 2)	/* reads are worth the shared disk cache (cache.h) */
/*
 * readdir holds no lock and no pooled connection while fill runs, so fill
 * may wait as long as it likes: a long listing is streamed to the reader a
 * window at a time instead of being held whole (fs_ops.c).
 */
#define BE_CAP_STREAM_LIST (1u << 3)

/*
 * Each request costs the server (or the protocol) much beside its bytes:
 * a login per ranged FTP RETR, Azurite's ~20 ms: the shared cache fetches
 * 16 MiB at a time from it instead of 4 (cache_file_long_fetches;
 * docs/benchmarks.md measures why).
 */
#define BE_CAP_LONG_FETCH (1u << 4)

/*
 * An open flag of mlfs's own, beside the O_* flags passed to open: the file
 * is opened under a read-only source tree (datasets/, checkpoints/, models/),
 * where what the backend already knows of it (from a listing or an earlier
 * HEAD) is trusted for the mount's lifetime.  Without it a remote backend
 * revalidates at open (DESIGN §8).  No O_* flag of Linux uses this bit.
 */
#define BE_O_TRUST	0x40000000

/* What backend_setattr changes (its own flags; fs/ maps FUSE's to these). */
#define BE_SET_MODE		(1u << 0)
#define BE_SET_UID		(1u << 1)
#define BE_SET_GID		(1u << 2)
#define BE_SET_SIZE		(1u << 3)
#define BE_SET_ATIME		(1u << 4)
#define BE_SET_MTIME		(1u << 5)
#define BE_SET_ATIME_NOW	(1u << 6)
#define BE_SET_MTIME_NOW	(1u << 7)
#define BE_SET_CTIME		(1u << 8)	/* nothing else: chown(f, -1, -1) marks the change time */

struct backend_stats {
	atomic_uint_fast64_t bytes_read;
	atomic_uint_fast64_t bytes_written;
	atomic_uint_fast64_t reads;
	atomic_uint_fast64_t writes;
	atomic_uint_fast64_t opens;
	atomic_uint_fast64_t passthrough_opens;	/* opens the kernel then served itself */
	atomic_uint_fast64_t meta_ops;	/* getattr, readdir, namespace changes */
	/*
	 * What reached the server: each HTTP request sent (retries too), each
	 * libnfs or libsmbclient call that goes to the server (one may be a
	 * few RPCs), and for a backend without BE_CAP_REMOTE each call that
	 * reaches its folder (the wrappers count those: backend_request_local).
	 * A call answered from memory or the disk cache is not one.
	 */
	atomic_uint_fast64_t requests;
	atomic_uint_fast64_t errors;	/* calls that failed with other than ENOENT */
	atomic_uint_fast64_t prefetched;	/* files read ahead whole into the cache (fs/) */
	atomic_uint_fast64_t listings_remembered;	/* trusted folders listed again from memory (fs/) */
	struct cache_stats cache;	/* BE_CAP_REMOTE backends: the shared disk cache */
};

struct backend {
	const struct backend_ops *ops;
	char *name;			/* the datastore's name */
	unsigned int index;		/* 1.. in config order; 0 is never a backend */
	struct backend_stats stats;
	atomic_bool mknod_refused;	/* backend_mknod said once that it cannot */
};

struct backend_file {
	struct backend *be;
};

/* Who asks: new files and folders get this owner. */
struct backend_cred {
	uid_t uid;
	gid_t gid;
};

/*
 * A resumable upload of one local file (backend_ops.upload).  @resume is
 * NULL to start afresh, or a token the same backend handed to @save during
 * an earlier upload of the same path, content and size: what it names as
 * sent is not sent again.  @save is called, never from two threads at once,
 * each time more of the file is safe at the destination, with a new token
 * (NUL-terminated text of the backend's making, at most
 * BACKEND_RESUME_MAX bytes) and the bytes now safe; it persists both and
 * returns 0, or a negated errno that ends the upload.
 */
#define BACKEND_RESUME_MAX (1u << 20)
struct backend_upload {
	const char *resume;
	int (*save)(void *arg, const char *token, uint64_t done);
	void *arg;
};

/*
 * Called by readdir once per entry ("." and ".." are not passed).  @st is the
 * entry's attributes when the backend has them at no extra cost, else NULL.
 * A non-zero return stops the listing and is returned by readdir.
 */
typedef int backend_fill_fn(void *payload, const char *name, const struct stat *st);

struct backend_ops {
	unsigned int version;		/* BACKEND_OPS_VERSION; first member, always */
	const char *scheme;
	unsigned int caps;

	/* Checks a datastore section offline; adds "file:line: ..." to @d. Optional. */
	int (*validate)(const struct datastore_config *cfg, struct diag *d);
	/* Checks offline that @src, a source in this datastore, can be shown. Optional. */
	int (*validate_source)(const struct datastore_config *cfg, const struct source_config *src,
			       struct diag *d);
	int (*create)(struct backend **out, const struct datastore_config *cfg);
	void (*destroy)(struct backend *be);

	int (*getattr)(struct backend *be, const char *path, struct stat *st);
	int (*readdir)(struct backend *be, const char *path, backend_fill_fn *fill,
		       void *payload);
	int (*open)(struct backend_file **out, struct backend *be, const char *path,
		    int flags);
	ssize_t (*pread)(struct backend_file *f, void *buf, size_t len, off_t off);
	void (*release)(struct backend_file *f);
	int (*statfs)(struct backend *be, const char *path, struct statvfs *sv);

	/* Optional from here on: NULL makes the wrapper answer. */
	int (*fgetattr)(struct backend_file *f, struct stat *st);
	int (*readlink)(struct backend *be, const char *path, char *buf, size_t size);
	ssize_t (*pwrite)(struct backend_file *f, const void *buf, size_t len, off_t off);
	int (*flush)(struct backend_file *f);	/* where an upload completes */
	int (*fsync)(struct backend_file *f, int datasync);
	int (*create_file)(struct backend_file **out, struct backend *be, const char *path,
			   int flags, mode_t mode, const struct backend_cred *cred);
	int (*mkdir)(struct backend *be, const char *path, mode_t mode,
		     const struct backend_cred *cred);
	int (*symlink)(struct backend *be, const char *target, const char *path,
		       const struct backend_cred *cred);
	int (*link)(struct backend *be, const char *from, const char *to);
	int (*unlink)(struct backend *be, const char *path);
	int (*rmdir)(struct backend *be, const char *path);
	/* @flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE */
	int (*rename)(struct backend *be, const char *from, const char *to, unsigned int flags);
	/* With @f (an open file of @path) the change is made through it and @path may be NULL. */
	int (*setattr)(struct backend *be, const char *path, struct backend_file *f,
		       const struct stat *st, unsigned int to_set);
	/*
	 * A descriptor of the open file in this node's kernel, which the kernel
	 * may then read and write directly (FUSE passthrough); borrowed, valid
	 * until release.  Only for backends whose files are local files.
	 */
	int (*local_fd)(struct backend_file *f);

	/* Version 2 from here on. */
	/*
	 * The identity of the open file's content for the shared disk cache:
	 * one line naming the source (endpoint and bucket, base URL), then the
	 * path, then the version (an ETag, else size and mtime), '\n'-separated,
	 * NUL-terminated in @buf.  Two opens get the same key only when they
	 * would read the same bytes.  Returns the length, -ENOTSUP when this
	 * file must not be cached, -ENAMETOOLONG when @size is too small.
	 */
	int (*cache_key)(struct backend_file *f, char *buf, size_t size);

	/* Version 3 from here on. */
	/*
	 * Uploads @size bytes of the local file @fd (read with pread, never
	 * whole into memory) as the file @path, resumable as struct
	 * backend_upload says.  Returns 0 once the whole file is in place
	 * under @path, or a negated errno; after a failure (or a crash) what
	 * was saved stays resumable.  Optional: without it the uploader
	 * (output/) writes through create_file, pwrite and flush.
	 */
	int (*upload)(struct backend *be, const char *path, int fd, uint64_t size,
		      const struct backend_upload *u);

	/* Version 4 from here on. */
	/*
	 * Makes the special file @path: a FIFO, a socket, or a character or
	 * block device numbered @rdev, as @mode's type says, with @mode's
	 * permission bits as they are (the kernel applied the caller's umask)
	 * and @cred's owner.  A symlink at @path is never followed.  Returns
	 * -ENOTSUP for a type this backend cannot hold: the wrapper answers
	 * -EPERM for it and logs that once per datastore.  Optional: without
	 * it every type is refused so.
	 */
	int (*mknod)(struct backend *be, const char *path, mode_t mode, dev_t rdev,
		     const struct backend_cred *cred);
	/* v5 */
	/*
	 * The attributes of @path as this backend learned them in this mount
	 * (a lookup, a listing, an open), asking the server nothing: 0, or
	 * -EAGAIN when it knows nothing of @path.  fs/ asks it first under the
	 * read-only trees, whose sources are trusted for the mount's lifetime
	 * (backend_getattr_trusted).  Optional.
	 */
	int (*getattr_known)(struct backend *be, const char *path, struct stat *st);
	/* v6 */
	/*
	 * Which version of its source this backend serves, when it pinned one
	 * (git: the commit id a ref resolved to), as text for status.json into
	 * @buf: 0, or -EAGAIN when it has not resolved it yet.  Optional.
	 */
	int (*describe)(struct backend *be, char *buf, size_t size);
	/* append only; bump BACKEND_OPS_VERSION */
};

/* ---- the registry ---- */

/* Adds a backend type (tests register fakes this way). 0, -EINVAL on a bad version, -EEXIST. */
int backend_register(const struct backend_ops *ops);

/*
 * Finds the ops for @scheme.  Returns 0, -ENOENT for a scheme nobody knows,
 * or -ENOTSUP for a known scheme whose code is not compiled in.
 */
int backend_lookup(const struct backend_ops **out, const char *scheme);

/* Every type the registry knows, built in or not, NULL-terminated. */
const char *const *backend_schemes(void);

/*
 * The form of every type the registry knows, built in or not,
 * NULL-terminated: what config_load is given, so that a URL or a local
 * path becomes a datastore of the type that reads it.
 */
const struct config_form *const *backend_config_forms(void);

/*
 * Checks the datastores and sources of @cfg against the registry: types
 * known and compiled in, no key foreign to the type, the backend's own
 * validate, sources naming a configured datastore or a compiled-in scheme.
 * Returns 0 or -EINVAL with every problem added to @d.
 */
int backend_check_config(const struct mlfs_config *cfg, struct diag *d);

/* Creates the backend of one datastore; sets name and index. */
int backend_create(struct backend **out, const struct datastore_config *cfg,
		   unsigned int index);
/*
 * Creates the backend that shows the archive (zip, tar, tar.gz, tar.bz2) at
 * @path inside @inner (borrowed: it must outlive the new one) as a
 * read-only folder named @name, extracting what cannot be read in place
 * under @cache_dir/archives (NULL: a private folder), kept under @cache_max
 * bytes (0: no limit).  0, -EINVAL for a
 * corrupt or unsupported archive (logged), @inner's error, or -ENOMEM.
 */
int backend_create_archive(struct backend **out, struct backend *inner, const char *path,
			   const char *cache_dir, uint64_t cache_max, const char *name);
void backend_destroy(struct backend *be);

/* ---- the wrappers fs/ calls ---- */

/*
 * backend_ops.mknod, or -EPERM (never -ENOSYS) where the backend cannot
 * hold that type, a read-only one (http) included, said once per
 * datastore in the log.
 */
int backend_mknod(struct backend *be, const char *path, mode_t mode, dev_t rdev,
		  const struct backend_cred *cred);

/* One request reached @be's server (a remote backend says so itself). */
static inline void backend_request(struct backend *be)
{
	atomic_fetch_add(&be->stats.requests, 1);
}

/* A call that reaches the folder of a backend with no server: its request. */
static inline void backend_request_local(struct backend *be)
{
	if (!(be->ops->caps & BE_CAP_REMOTE))
		backend_request(be);
}

static inline int backend_count(struct backend *be, int ret)
{
	if (ret < 0 && ret != -ENOENT)
		atomic_fetch_add(&be->stats.errors, 1);
	return ret;
}

static inline int backend_getattr(struct backend *be, const char *path, struct stat *st)
{
	atomic_fetch_add(&be->stats.meta_ops, 1);
	backend_request_local(be);
	return backend_count(be, be->ops->getattr(be, path, st));
}

/*
 * backend_getattr under a trusted tree: what @be learned of @path in this
 * mount when it knows (no request), else its getattr.
 */
static inline int backend_getattr_trusted(struct backend *be, const char *path,
					  struct stat *st)
{
	if (be->ops->version >= 5 && be->ops->getattr_known &&
	    be->ops->getattr_known(be, path, st) == 0) {
		atomic_fetch_add(&be->stats.meta_ops, 1);
		return 0;
	}
	return backend_getattr(be, path, st);
}

static inline int backend_readdir(struct backend *be, const char *path,
				  backend_fill_fn *fill, void *payload)
{
	atomic_fetch_add(&be->stats.meta_ops, 1);
	backend_request_local(be);
	return backend_count(be, be->ops->readdir(be, path, fill, payload));
}

static inline int backend_open(struct backend_file **out, struct backend *be,
			       const char *path, int flags)
{
	if ((flags & O_ACCMODE) != O_RDONLY && !(be->ops->caps & BE_CAP_WRITE))
		return -EROFS;
	if (!(be->ops->caps & BE_CAP_REMOTE))
		flags &= ~BE_O_TRUST;
	atomic_fetch_add(&be->stats.opens, 1);
	backend_request_local(be);
	return backend_count(be, be->ops->open(out, be, path, flags));
}

static inline int backend_create_file(struct backend_file **out, struct backend *be,
				      const char *path, int flags, mode_t mode,
				      const struct backend_cred *cred)
{
	if (!be->ops->create_file)
		return -EROFS;
	atomic_fetch_add(&be->stats.opens, 1);
	backend_request_local(be);
	return backend_count(be, be->ops->create_file(out, be, path, flags, mode, cred));
}

static inline ssize_t backend_pread(struct backend_file *f, void *buf, size_t len, off_t off)
{
	ssize_t n;

	backend_request_local(f->be);
	n = f->be->ops->pread(f, buf, len, off);

	if (n >= 0) {
		atomic_fetch_add(&f->be->stats.bytes_read, (uint64_t)n);
		atomic_fetch_add(&f->be->stats.reads, 1);
	} else {
		backend_count(f->be, (int)n);
	}
	return n;
}

static inline ssize_t backend_pwrite(struct backend_file *f, const void *buf, size_t len,
				     off_t off)
{
	ssize_t n;

	if (!f->be->ops->pwrite)
		return -EROFS;
	backend_request_local(f->be);
	n = f->be->ops->pwrite(f, buf, len, off);
	if (n >= 0) {
		atomic_fetch_add(&f->be->stats.bytes_written, (uint64_t)n);
		atomic_fetch_add(&f->be->stats.writes, 1);
	} else {
		backend_count(f->be, (int)n);
	}
	return n;
}

static inline int backend_fgetattr(struct backend_file *f, struct stat *st)
{
	if (!f->be->ops->fgetattr)
		return -ENOSYS;
	backend_request_local(f->be);
	return backend_count(f->be, f->be->ops->fgetattr(f, st));
}

static inline int backend_flush(struct backend_file *f)
{
	return f->be->ops->flush ? backend_count(f->be, f->be->ops->flush(f)) : 0;
}

static inline int backend_fsync(struct backend_file *f, int datasync)
{
	return f->be->ops->fsync ? backend_count(f->be, f->be->ops->fsync(f, datasync)) : 0;
}

static inline void backend_release(struct backend_file *f)
{
	if (f)
		f->be->ops->release(f);
}

static inline int backend_local_fd(struct backend_file *f)
{
	return f->be->ops->local_fd ? f->be->ops->local_fd(f) : -ENOTSUP;
}

static inline int backend_cache_key(struct backend_file *f, char *buf, size_t size)
{
	if (f->be->ops->version < 2 || !f->be->ops->cache_key)
		return -ENOTSUP;
	return f->be->ops->cache_key(f, buf, size);
}

/* What version of its source @be serves (backend_ops.describe); -ENOTSUP when it says none. */
static inline int backend_describe(struct backend *be, char *buf, size_t size)
{
	if (be->ops->version < 6 || !be->ops->describe)
		return -ENOTSUP;
	return be->ops->describe(be, buf, size);
}

/* -ENOTSUP when @be has no upload of its own. */
static inline int backend_upload(struct backend *be, const char *path, int fd, uint64_t size,
				 const struct backend_upload *u)
{
	if (be->ops->version < 3 || !be->ops->upload)
		return -ENOTSUP;
	atomic_fetch_add(&be->stats.writes, 1);
	return backend_count(be, be->ops->upload(be, path, fd, size, u));
}

static inline int backend_statfs(struct backend *be, const char *path, struct statvfs *sv)
{
	backend_request_local(be);
	return backend_count(be, be->ops->statfs(be, path, sv));
}

static inline int backend_readlink(struct backend *be, const char *path, char *buf,
				   size_t size)
{
	if (!be->ops->readlink)
		return -EINVAL;
	backend_request_local(be);
	return backend_count(be, be->ops->readlink(be, path, buf, size));
}

/* The namespace changes: a backend without them is read-only. */
#define BACKEND_META_CALL(be, op, ...)						\
	((be)->ops->op ? (atomic_fetch_add(&(be)->stats.meta_ops, 1),		\
			  backend_request_local(be),					\
			  backend_count((be), (be)->ops->op((be), __VA_ARGS__)))	\
		       : -EROFS)

static inline int backend_mkdir(struct backend *be, const char *path, mode_t mode,
				const struct backend_cred *cred)
{
	return BACKEND_META_CALL(be, mkdir, path, mode, cred);
}

/*
 * A writable backend that cannot hold links (s3, azure) answers -EPERM, as
 * link(2) and symlink(2) say of a filesystem without them (vfat's answer);
 * -EROFS is only a read-only backend's.
 */
static inline int backend_no_links(struct backend *be)
{
	return be->ops->caps & BE_CAP_WRITE ? -EPERM : -EROFS;
}

static inline int backend_symlink(struct backend *be, const char *target, const char *path,
				  const struct backend_cred *cred)
{
	if (!be->ops->symlink)
		return backend_no_links(be);
	return BACKEND_META_CALL(be, symlink, target, path, cred);
}

static inline int backend_link(struct backend *be, const char *from, const char *to)
{
	if (!be->ops->link)
		return backend_no_links(be);
	return BACKEND_META_CALL(be, link, from, to);
}

static inline int backend_unlink(struct backend *be, const char *path)
{
	return BACKEND_META_CALL(be, unlink, path);
}

static inline int backend_rmdir(struct backend *be, const char *path)
{
	return BACKEND_META_CALL(be, rmdir, path);
}

static inline int backend_rename(struct backend *be, const char *from, const char *to,
				 unsigned int flags)
{
	return BACKEND_META_CALL(be, rename, from, to, flags);
}

static inline int backend_setattr(struct backend *be, const char *path, struct backend_file *f,
				  const struct stat *st, unsigned int to_set)
{
	if (to_set == BE_SET_CTIME && !be->ops->setattr)
		return 0;	/* no change, and no change time to mark */
	return BACKEND_META_CALL(be, setattr, path, f, st, to_set);
}

#endif
