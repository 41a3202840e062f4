/*
 * fs.h - the gateway tree shared by the files of fs/.
 *
 * The tree has two kinds of nodes.  Virtual nodes (the root, datastores/,
 * datasets/, checkpoints/, models/, .mlfs/ and its files) are made at start
 * and live as long as the mount.  Backend nodes stand for a path inside a
 * view: a view is one backend seen from one folder of it, read-write under
 * datastores/ or read-only under the source trees.  The top of each view is
 * permanent; every node beneath it is made by lookup and freed by forget.
 *
 * A backend node knows its parent and name, never its full path: the path
 * is built on demand under the tree lock, so a rename moves a whole subtree
 * by changing one node.  The FUSE node id is the node's address.
 */
#ifndef MLFS_FS_H
#define MLFS_FS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "backend.h"
#include "cache.h"
#include "config.h"

enum node_kind {
	NODE_VDIR,		/* a virtual folder */
	NODE_VFILE,		/* a virtual file whose content is made at open */
	NODE_BACKEND,		/* a path inside a view */
	NODE_JOBS,		/* jobs/ and everything beneath it (fs_jobs.c) */
};

struct fs;
struct fs_file;
struct fuse_session;

/* Makes the content of a virtual file; hands out a malloc'd buffer. */
typedef int fs_content_fn(struct fs *fs, char **buf, size_t *len);

struct view {
	char *name;		/* as shown in the tree */
	struct backend *be;	/* borrowed from struct fs */
	char *root;		/* the backend path at the view's top */
	const struct source_config *src;	/* what it shows, when a source (not a datastore) */
	bool readonly;
	double timeout;		/* entry and attribute timeout, seconds */
	long uid, gid, mode;	/* shown instead of the backend's when >= 0 */
	/* a read-only view's last statfs, kept FS_STATFS_KEEP_S (guarded by fs->cache_lock) */
	struct statvfs statfs;
	int64_t statfs_ns;	/* when it was asked; 0: never */
};

struct node {
	enum node_kind kind;
	uint64_t ino;		/* st_ino of a virtual node */
	/* Guarded by fs->lock: */
	struct node *parent;
	char *name;
	struct node *hnext;	/* hash chain of (parent, name) */
	struct node *lprev, *lnext;	/* every backend node made by lookup */
	uint64_t nlookup;	/* the kernel's references */
	uint64_t nchildren;	/* hashed children, each holding a reference */
	bool hashed;		/* false once unlinked or replaced */
	bool permanent;		/* virtual nodes and view tops */
	atomic_bool prefetched;	/* opened, or queued for read-ahead across files */
	/* Constant after start: */
	struct view *view;	/* NODE_BACKEND */
	struct node **entries;	/* NODE_VDIR children */
	size_t nentries;
	int write_errno;	/* NODE_VDIR: what a change inside it gets */
	fs_content_fn *content;	/* NODE_VFILE */
	atomic_uint_fast64_t changed;	/* fs->gen when last changed through the mount */
	/* Guarded by fs->cache_lock: */
	struct fs_file *opens;	/* open files of the node (fs_ops.c) */
	unsigned int pt_users;	/* opens served by the kernel from backing_fd */
	unsigned int cached_users;	/* opens served through the daemon */
	int backing_id;		/* while pt_users > 0 (fs_passthrough.c) */
	int backing_fd;
	bool seen;		/* size and mtime when the kernel last cached it */
	off_t seen_size;
	struct timespec seen_mtime;
};

struct fs {
	struct mlfs_config *cfg;
	struct backend **backends;	/* one per datastore, in config order */
	size_t nbackends;
	struct backend **archives;	/* one per archive source, over its datastore's backend */
	size_t narchives;
	struct view *views;
	size_t nviews;
	struct cache *cache;		/* the shared disk cache; NULL without remote backends */
	struct fs_jobs *jobs;		/* jobs/ (fs_jobs.c); NULL until fs_jobs_start */
	struct fs_prefetch *prefetch;	/* read-ahead across files (fs_prefetch.c) */
	struct fs_listing *listing;	/* trusted folders' listings (fs_listing.c) */
	struct view jobs_view;		/* the "view" jobs/ nodes hang from: root "" */
	struct node *root;
	struct node *vnodes;		/* every virtual node and view top, one allocation */
	size_t nvnodes;
	time_t started;
	atomic_uint_fast64_t open_files;
	struct fs_file *all_opens;	/* every open file, guarded by cache_lock: what the
					 * kernel never released by the end is freed by fs_destroy */
	atomic_uint_fast64_t dir_entries;	/* held by open folders now (fs_ops.c) */
	atomic_uint_fast64_t dir_entries_peak;	/* the most held at once */
	atomic_uint_fast64_t gen;	/* bumped by every change made through the mount */

	struct fuse_session *se;	/* set before serving: for notifications to the kernel */

	/* FUSE passthrough (fs_passthrough.c) */
	int pt_fd;			/* the session's /dev/fuse descriptor */
	atomic_uint_fast64_t pt_init_unique;	/* the INIT request, when it offered passthrough */
	atomic_bool passthrough;	/* negotiated with the kernel */

	pthread_rwlock_t lock;		/* the shape of the tree: parent, name, hash */
	struct node **hash;		/* guarded by lock */
	size_t hash_size;
	size_t hash_count;
	struct node *all;		/* guarded by lock: list of lookup-made nodes */

	pthread_mutex_t cache_lock;	/* node seen_* fields */

	char *mount_info;		/* .mlfs/mount of a worker's view (fs_job.c); else NULL */
	bool private_vnodes;		/* a worker's view: its folders are vnode_uid's, 0700 */
	uid_t vnode_uid;
	gid_t vnode_gid;
};

/* fs_tree.c */
/* The gateway's tree: every datastore, dataset, checkpoint and model, jobs/, .mlfs/. */
int fs_create(struct fs **out, struct mlfs_config *cfg);
/*
 * An fs with room for @nvnodes virtual nodes and @nviews views, and a
 * backend for each datastore of @cfg (and the shared cache when one is
 * remote).  *out is set even on failure, for fs_destroy (clear its cfg
 * first when the caller keeps the config).
 */
int fs_alloc(struct fs **out, struct mlfs_config *cfg, size_t nvnodes, size_t nviews);
int fs_vdir_add(struct node *dir, struct node *child);
/* Makes @v the view of @src (extracted, read-only, when it is an archive), shown as @name. */
int fs_source_view(struct fs *fs, struct view *v, const struct source_config *src,
		   const char *name, bool readonly);
/* .mlfs/mount: fs->mount_info, what `mlfs umount` reads. */
int fs_mount_content(struct fs *fs, char **buf, size_t *len);
/* .mlfs/uploads: one line per output staged under state_dir (output_status_text). */
int fs_uploads_content(struct fs *fs, char **buf, size_t *len);
/* Makes @top the permanent top node of @v inside the virtual folder @dir. */
int fs_view_top(struct node *top, struct view *v, struct node *dir);
void fs_destroy(struct fs *fs);

/* Releases the files the kernel left open (a RELEASE after the session's end). (fs_ops.c) */
void fs_release_all(struct fs *fs);
struct node *fs_node(struct fs *fs, uint64_t nodeid);
uint64_t fs_nodeid(struct fs *fs, struct node *n);
/* Finds a permanent child of a virtual folder. */
struct node *fs_vdir_child(struct node *dir, const char *name);
/*
 * The backend path of @n, or of its child @name when @name is not NULL.
 * Returns 0, -ENOENT for a node that was unlinked, -ENOMEM.
 */
int fs_node_path(struct fs *fs, struct node *n, const char *name, char **out);
/* Finds or makes the node of @name under @parent and adds one kernel reference. */
int fs_node_get(struct fs *fs, struct node *parent, const char *name, struct node **out);
void fs_node_forget(struct fs *fs, struct node *n, uint64_t nlookup);
void fs_node_unlinked(struct fs *fs, struct node *parent, const char *name);
/* Records that @n changed through the mount (readdirplus must not serve it stale). */
void fs_node_changed(struct fs *fs, struct node *n);
int fs_node_renamed(struct fs *fs, struct node *parent, const char *name,
		    struct node *newparent, const char *newname, unsigned int flags);
/* Makes the attributes the kernel sees from the backend's. */
void fs_node_attr(const struct node *n, struct stat *st);
void fs_vnode_attr(struct fs *fs, const struct node *n, struct stat *st);

/* fs_job.c: one worker's view (mlfs job) */
struct fs_job_layout {
	const size_t *inputs;		/* indices into cfg->sources, shown in input/ */
	size_t n_inputs;
	const size_t *checkpoints;	/* shown in checkpoint/ */
	size_t n_checkpoints;
	long model;			/* shown as models/; < 0: an empty folder */
	const size_t *sources;		/* shown in sources/ (Kibernetika's), each by its name */
	size_t n_sources;
	size_t output;			/* the staging folder, shown read-write as output/ */
	const char *mount_info;		/* content of .mlfs/mount (copied) */
	uid_t uid;			/* the worker's user: owns the view's own folders, */
	gid_t gid;			/* which no one else may enter (0700) */
};
/* input/, checkpoint/, models/, sources/ (when any), output/, .mlfs/{stats,mount} for @cfg and @l. */
int fs_create_job(struct fs **out, struct mlfs_config *cfg, const struct fs_job_layout *l);
/*
 * Reads every file of view @view (from 0, in layout order: inputs first)
 * into the shared cache, for an input folder synced whole before the worker
 * starts.  Nothing for a view that is not remote.  0 or the first error.
 */
int fs_job_fetch_view(struct fs *fs, size_t view);
/*
 * Whether every source the view reads (all but output/) answers: the
 * attributes of its top, as the worker's first look would ask them.  0, or
 * the first failure's -errno, said in the log with the source's kind, name
 * and where it is.
 */
int fs_job_check_views(struct fs *fs);

/* fs_prefetch.c */
#define FS_PREFETCH_FOLDERS	128	/* subfolders of one listing listed ahead */
struct fs_prefetch;
int fs_prefetch_create(struct fs *fs);
/* @n, a file of a view, was opened through the cache: queue the files its folder listed next. */
void fs_prefetch_opened(struct fs *fs, struct node *n);
/*
 * Folders @names of folder @dir of @be, just listed under a trusted view:
 * queues the first FS_PREFETCH_FOLDERS to be listed ahead (fs_listing_fetch), as a walk
 * (ls -R, find, a loader indexing a tree) lists them next.  Not when
 * read_ahead_files is 0.
 */
void fs_prefetch_folders(struct fs *fs, struct backend *be, const char *dir, char **names,
			 size_t n);
/* Files and folders queued or being fetched now. */
size_t fs_prefetch_pending(struct fs *fs);
/* Joins the prefetch threads; before the backends and the cache go. */
void fs_prefetch_stop(struct fs *fs);
/*
 * Reads file @path of @be whole through the shared cache (trusted), adding
 * its bytes to *@bytes; -EFBIG when over @max_size (0: any size).  0 or -errno.
 */
int fs_fetch_file(struct fs *fs, struct backend *be, const char *path, uint64_t max_size,
		  uint64_t *bytes);

/* fs_listing.c */
struct fs_listing;
int fs_listing_create(struct fs *fs);
void fs_listing_destroy(struct fs *fs);
/*
 * backend_readdir of folder @path of view @v, or, under a trusted view of a
 * remote backend, the listing this mount kept of it (no request); a whole
 * listing from the backend is kept.
 */
int fs_listing_readdir(struct fs *fs, const struct view *v, const char *path,
		       backend_fill_fn *fill, void *payload);
/*
 * Lists folder @path of @be (a trusted view's) and keeps the listing, unless
 * it is kept or being listed already: the prefetch threads' work.  A reader
 * of that folder meanwhile waits for it rather than list it again.
 */
void fs_listing_fetch(struct fs *fs, struct backend *be, const char *path);

/* fs_passthrough.c */
struct fuse_session;
struct fuse_req;
struct fuse_file_info;
/* Hooks the session's I/O to negotiate passthrough; call after mounting. */
int fs_passthrough_setup(struct fs *fs, struct fuse_session *se);
/*
 * Decides how an open of @n is served, and counts it: the backing id (> 0)
 * for the kernel to serve it from the local file @fd, or 0 to serve it
 * through the daemon (passthrough off, no @fd, or other opens of @n are).
 */
int fs_passthrough_get(struct fs *fs, struct node *n, int fd, bool readonly);
/* Uncounts an open that fs_passthrough_get answered @backing_id. */
void fs_passthrough_put(struct fs *fs, struct node *n, int backing_id);
/* fuse_reply_open for a file the kernel serves from backing file @backing_id. */
int fs_passthrough_reply_open(struct fuse_req *req, const struct fuse_file_info *fi,
			      int backing_id);
/* fuse_reply_create for a new file the kernel serves from backing file @backing_id. */
struct fuse_entry_param;
int fs_passthrough_reply_create(struct fuse_req *req, const struct fuse_entry_param *e,
				const struct fuse_file_info *fi, int backing_id);

/* fs_stats.c */
int fs_stats_content(struct fs *fs, char **buf, size_t *len);

/* fs_jobs.c: jobs/ and .mlfs/node.  Each fs_jobs_* below is the FUSE
 * operation of the same name for a node (or parent) of kind NODE_JOBS. */
struct fuse_req;
struct fuse_file_info;
struct stat;
/* Starts the scheduler; call once the config is known, before serving. */
int fs_jobs_start(struct fs *fs);
void fs_jobs_stop(struct fs *fs);
int fs_jobs_node_content(struct fs *fs, char **buf, size_t *len);
void fs_jobs_lookup(struct fuse_req *req, struct node *parent, const char *name);
void fs_jobs_getattr(struct fuse_req *req, struct node *n);
void fs_jobs_setattr(struct fuse_req *req, struct node *n, struct stat *attr, int to_set);
void fs_jobs_create(struct fuse_req *req, struct node *parent, const char *name, mode_t mode,
		    struct fuse_file_info *fi);
void fs_jobs_open(struct fuse_req *req, struct node *n, struct fuse_file_info *fi);
void fs_jobs_read(struct fuse_req *req, struct node *n, size_t size, off_t off,
		  struct fuse_file_info *fi);
void fs_jobs_write(struct fuse_req *req, struct node *n, const char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi);
void fs_jobs_flush(struct fuse_req *req, struct node *n, struct fuse_file_info *fi);
void fs_jobs_release(struct fuse_req *req, struct node *n, struct fuse_file_info *fi);
void fs_jobs_readlink(struct fuse_req *req, struct node *n);
void fs_jobs_opendir(struct fuse_req *req, struct node *n, struct fuse_file_info *fi);
void fs_jobs_readdir(struct fuse_req *req, struct node *n, size_t size, off_t off,
		     struct fuse_file_info *fi, int plus);
void fs_jobs_releasedir(struct fuse_req *req, struct node *n, struct fuse_file_info *fi);
void fs_jobs_remove(struct fuse_req *req, struct node *parent, const char *name, int is_dir);
void fs_jobs_rename(struct fuse_req *req, struct node *parent, const char *name,
		    struct node *newparent, const char *newname, unsigned int flags);

/* fs_ops.c */
struct fuse_lowlevel_ops;
extern const struct fuse_lowlevel_ops fs_ops;

#endif
