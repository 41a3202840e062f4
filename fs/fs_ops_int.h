/*
 * fs_ops_int.h - what the FUSE operations of the tree share: fs_ops.c (the
 * entry points, the kinds of node and their tables, entries and attributes),
 * fs_file.c (open files: opening, reading through the cache, writing) and
 * fs_dir.c (open folders: listings, streamed past a window).
 */
#ifndef MLFS_FS_OPS_INT_H
#define MLFS_FS_OPS_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <fuse_lowlevel.h>

#include "fs.h"

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

/*
 * What one kind of node does.  As the kernel gives each inode type its
 * file_operations, each kind of node (enum node_kind) has a table here, and
 * every FUSE entry point looks its node's up once (fs_kind_of) and calls
 * through it: a jobs/ node goes to fs_jobs*.c, the others to the common
 * code below, which asks the table's second part where a virtual node and
 * a backend's path differ.  A new kind of node is a new table.  Entry
 * requests (lookup, create, remove, rename) go to their folder's kind.
 */
struct fs_kind {
	/* the requests */
	void (*lookup)(fuse_req_t req, struct node *p, const char *name);
	void (*getattr)(fuse_req_t req, struct node *n, struct fuse_file_info *fi);
	void (*setattr)(fuse_req_t req, struct node *n, struct stat *attr, int to_set,
			struct fuse_file_info *fi);
	void (*readlink)(fuse_req_t req, struct node *n);
	void (*remove)(fuse_req_t req, struct node *p, const char *name, int is_dir);
	void (*rename)(fuse_req_t req, struct node *p, const char *name, struct node *np,
		       const char *newname, unsigned int flags);
	int rename_rank;	/* a rename between two kinds of folder goes to the higher */
	void (*open)(fuse_req_t req, struct node *n, struct fuse_file_info *fi);
	void (*create)(fuse_req_t req, struct node *p, const char *name, mode_t mode,
		       struct fuse_file_info *fi);
	void (*read)(fuse_req_t req, struct node *n, size_t size, off_t off,
		     struct fuse_file_info *fi);
	void (*write)(fuse_req_t req, struct node *n, const char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi);
	void (*flush)(fuse_req_t req, struct node *n, struct fuse_file_info *fi);
	void (*release)(fuse_req_t req, struct node *n, struct fuse_file_info *fi);
	void (*fsync)(fuse_req_t req, struct node *n, int datasync, struct fuse_file_info *fi);
	void (*opendir)(fuse_req_t req, struct node *n, struct fuse_file_info *fi);
	void (*readdir)(fuse_req_t req, struct node *n, size_t size, off_t off,
			struct fuse_file_info *fi, int plus);
	void (*releasedir)(fuse_req_t req, struct node *n, struct fuse_file_info *fi);
	/* what the common code asks of a node of this kind */
	double (*timeout)(const struct node *n);			/* entry timeout */
	double (*attr_timeout)(const struct node *n, const struct stat *st);
	int (*attr)(struct fs *fs, struct node *n, struct backend_file *bf, struct stat *st);
	int (*writable)(const struct node *dir);	/* 0, or why nothing is made inside */
	int (*changeable)(const struct node *n);	/* 0, or why its attributes are kept */
	int (*open_file)(struct fs *fs, struct node *n, struct fs_file *f,
			 struct fuse_file_info *fi);
	int (*list)(struct fs *fs, struct fs_dir *d);	/* the entries after "." and ".." */
	bool (*listing_kept)(const struct node *n);	/* cannot change: cache_readdir */
	int (*statfs)(struct fs *fs, struct node *n, struct statvfs *sv);
};

static inline struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline struct node *fs_req_node(fuse_req_t req, fuse_ino_t ino)
{
	return fs_node(fs_of(req), ino);
}

static inline struct fs_file *fs_file_of(struct fuse_file_info *fi)
{
	return (struct fs_file *)(uintptr_t)fi->fh;
}

static inline struct fs_dir *fs_dir_of(struct fuse_file_info *fi)
{
	return (struct fs_dir *)(uintptr_t)fi->fh;
}

/* ---- fs_ops.c ---- */

/* How long the kernel may trust @st, @n's attributes, and its entry. */
double fs_attr_timeout(const struct node *n, const struct stat *st);

/* The asker's uid and gid, for what it makes. */
struct backend_cred fs_cred(fuse_req_t req);

/* Attributes of any node; @bf, when given, is an open file of it. */
int fs_getattr_node(struct fs *fs, struct node *n, struct backend_file *bf, struct stat *st);

/* The one place a node's kind is looked at. */
const struct fs_kind *fs_kind_of(const struct node *n);

/* The path for a new entry @name in @parent, or a negated errno. */
int fs_new_path(struct fs *fs, struct node *parent, const char *name, char **path);

/* The entry timeout of @n: its view's, or an hour for what is no backend's. */
double fs_timeout(const struct node *n);

/* ---- fs_file.c: the kinds' open-file requests, and how each opens one ---- */

void fs_create_common(fuse_req_t req, struct node *p, const char *name, mode_t mode,
		      struct fuse_file_info *fi);

void fs_flush_common(fuse_req_t req, struct node *node, struct fuse_file_info *fi);
void fs_fsync_common(fuse_req_t req, struct node *node, int datasync, struct fuse_file_info *fi);

/* A draft of jobs/ is made durable when it is accepted: nothing to sync. */
void fs_fsync_jobs(fuse_req_t req, struct node *node, int datasync, struct fuse_file_info *fi);

int fs_open_backend(struct fs *fs, struct node *n, struct fs_file *f, struct fuse_file_info *fi);

void fs_open_common(fuse_req_t req, struct node *n, struct fuse_file_info *fi);

int fs_open_virtual(struct fs *fs, struct node *n, struct fs_file *f, struct fuse_file_info *fi);

void fs_read_common(fuse_req_t req, struct node *node, size_t size, off_t off,
		    struct fuse_file_info *fi);

void fs_release_common(fuse_req_t req, struct node *node, struct fuse_file_info *fi);

void fs_write_common(fuse_req_t req, struct node *node, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi);

/* ---- fs_dir.c: the kinds' folder requests, and how each lists one ---- */

/* A backend folder's entries, the rest streamed past the window (fs_dir_stream). */
int fs_dir_read_backend(struct fs *fs, struct fs_dir *d);

/* A virtual folder's children, each with its attributes. */
int fs_dir_read_virtual(struct fs *fs, struct fs_dir *d);

/* Whether a folder's listing cannot change in the mount's life (the kernel keeps it). */
bool fs_listing_kept_backend(const struct node *n);
bool fs_listing_kept_virtual(const struct node *n);

void fs_opendir_common(fuse_req_t req, struct node *n, struct fuse_file_info *fi);

void fs_readdir_common(fuse_req_t req, struct node *n, size_t size, off_t off,
		       struct fuse_file_info *fi, int plus);

void fs_releasedir_common(fuse_req_t req, struct node *n, struct fuse_file_info *fi);

#endif
