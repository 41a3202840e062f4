/*
 * be_nfs_int.h - what the files of the NFS backend share and nothing else
 * sees: the backend's, a pooled connection's and an open file's structs,
 * and the helpers one of its files defines for the other.  Tests and other
 * code use be_nfs.h.
 *
 *   be_nfs.c       the ops table, setup, checking a datastore's keys, the
 *                  calls on paths and on open files
 *   be_nfs_conn.c  the context pool, connecting, the errno map, telling a
 *                  broken connection, retries and the breaker
 */
#ifndef MLFS_BE_NFS_INT_H
#define MLFS_BE_NFS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <nfsc/libnfs.h>

#include "be_nfs.h"
#include "stat_memo.h"

/* One mounted libnfs connection; used by one call at a time. */
struct be_nfs_ctx {
	struct nfs_context *nfs;
	bool proven;			/* a call succeeded on it: made before this call */
	struct be_nfs_ctx *next;	/* in the idle list */
};

struct be_nfs {
	struct backend base;
	char *url;		/* nfs://ADDRESS/EXPORT?OPTIONS: no secret in it */
	char *address;
	char *export;
	char *root;		/* as configured; be_nfs_join normalizes it */
	int timeout_ms;
	int retries;
	bool v4;		/* options say version=4 */
	pthread_mutex_t lock;	/* guards idle and n_idle */
	struct be_nfs_ctx *idle;
	unsigned int n_idle;
	_Atomic int64_t down_until;	/* CLOCK_MONOTONIC ns: calls fail fast before it */
	struct stat_memo *memo;	/* what lookups and listings said, for trusted opens */
	pthread_mutex_t files_lock;	/* guards files and every file's path and hidden */
	struct be_nfs_file *files;	/* the open files, for an unlink of one (be_nfs_hide_open) */
	unsigned long name_max;	/* the server's PATHCONF name_max; 0 until asked */
};

struct be_nfs_file {
	struct backend_file base;
	pthread_mutex_t lock;	/* guards ctx and fh, held across this file's RPCs */
	struct be_nfs_ctx *ctx;	/* NULL after a broken connection, until reopened */
	struct nfsfh *fh;
	char *path;		/* on the export, root included; files_lock and lock to change */
	struct be_nfs_file *next_open, *prev_open;	/* in nb->files once open */
	bool listed;		/* in nb->files */
	bool hidden;		/* unlinked while open: path is its hidden name, removed at close */
	char *shown_path;	/* the path before it was hidden */
	int flags;		/* for reopening: O_ACCMODE only */
	bool written;
	bool trust;		/* opened with BE_O_TRUST: size and mtime below are its version */
	bool remembered;	/* trusted, from the memo: st below; no call made at open */
	int64_t size;
	int64_t mtime_ns;
	struct stat st;		/* when remembered */
};

static inline struct be_nfs *be_nfs(struct backend *be)
{
	return (struct be_nfs *)be;
}

static inline struct be_nfs_file *be_nfs_file(struct backend_file *f)
{
	return (struct be_nfs_file *)f;
}

/* What a call on a path needs besides the context and the path. */
struct be_nfs_args {
	struct nfs_stat_64 *st;			/* getattr */
	const char *other;			/* rename, link: the second path; symlink: the target */
	unsigned int flags;			/* rename */
	mode_t mode;				/* mkdir, mknod */
	dev_t rdev;				/* mknod */
	const struct backend_cred *cred;	/* mkdir, symlink, mknod */
	char *buf;				/* readlink */
	size_t size;
	struct statvfs *sv;			/* statfs */
	backend_fill_fn *fill;			/* readdir */
	void *payload;
	int fill_ret;
	const struct stat *set;			/* setattr */
	unsigned int to_set;
	struct be_nfs_page *page;		/* readdir */
};

/* One try of a call on a path: 0 or more, or a libnfs return. */
typedef int be_nfs_fn(struct nfs_context *nfs, const char *path, struct be_nfs_args *a);

/* One try of a call on an open file's context: 0 or more, or a libnfs return. */
typedef int be_nfs_file_fn(struct be_nfs_file *f, struct nfs_context *nfs, void *arg);

/* ---- be_nfs_conn.c ---- */

/* An idle context from the pool, or a new mounted one: 0 or a negated errno. */
int be_nfs_ctx_get(struct be_nfs *nb, struct be_nfs_ctx **out);

/* Gives @c back to the pool (@broken: destroyed, with every idle one). */
void be_nfs_ctx_put(struct be_nfs *nb, struct be_nfs_ctx *c, bool broken);

/* Unmounts and frees @c; accepts NULL.  The pool's lock is not taken. */
void be_nfs_ctx_free(struct be_nfs_ctx *c);

/* True while the breaker is open: calls fail at once with EIO. */
bool be_nfs_is_down(struct be_nfs *nb);

/* Opens the breaker when @ret is a broken connection after a wait of a timeout or more. */
void be_nfs_mark_down(struct be_nfs *nb, int ret, int64_t started);

/*
 * Whether a try that returned @ret, on a context that was @proven, begun at
 * @t0, is tried again; sleeps the backoff and counts *@attempt when it costs
 * an attempt.
 */
bool be_nfs_again(struct be_nfs *nb, int ret, bool proven, int64_t t0, int *attempt);

/* Logs the failure @ret (our errno) of @what on @path once: EIO/ETIMEDOUT as errors. */
void be_nfs_log(struct be_nfs *nb, const char *what, const char *path, int ret);

/*
 * Runs @fn on @path joined with the root, with a context from the pool,
 * again on a fresh one after a broken connection.  Returns our errno,
 * logged.
 */
int be_nfs_call(struct be_nfs *nb, const char *path, be_nfs_fn *fn,
		struct be_nfs_args *a, const char *what);

/* Closes @f's handle and gives back its context (@broken: destroyed with the idle ones). */
void be_nfs_file_drop(struct be_nfs_file *f, bool broken);

/*
 * Runs @fn on @f's context under f->lock, reopening the file on a fresh
 * context after a broken connection.  Returns our errno, logged.
 */
int be_nfs_file_call(struct be_nfs_file *f, be_nfs_file_fn *fn, void *arg,
		     const char *what);

/* ---- be_nfs.c, for be_nfs_file.c ---- */

void be_nfs_stat_fill(struct stat *st, const struct nfs_stat_64 *s);
/* Renames @path to a->other (RENAME_NOREPLACE in a->flags: checked first, not atomically). */
int be_nfs_do_rename(struct nfs_context *nfs, const char *path, struct be_nfs_args *a);
/* Gives a new entry the asker's owner (as root only; a user's mount owns what it makes). */
void be_nfs_set_owner(struct nfs_context *nfs, const char *path, const struct backend_cred *cred);

/* ---- be_nfs_file.c: setattr and the ops on open files, for be_nfs.c's table ---- */

#define BE_NFS_CHUNK_MAX	(1u << 20)	/* bytes per READ or WRITE at most */

int be_nfs_cache_key(struct backend_file *bf, char *buf, size_t size);
int be_nfs_create_file(struct backend_file **out, struct backend *be, const char *path, int flags,
		       mode_t mode, const struct backend_cred *cred);
int be_nfs_fgetattr(struct backend_file *bf, struct stat *st);
int be_nfs_flush(struct backend_file *bf);
int be_nfs_fsync(struct backend_file *bf, int datasync);
int be_nfs_open(struct backend_file **out, struct backend *be, const char *path, int flags);
/*
 * When @path (under the root) is open in this mount, renames it to a hidden
 * name in its folder, which its open files then use, and returns 1: the
 * unlink its caller was to make is made when the last of them closes.  0
 * when it is not open; a negated errno.
 */
int be_nfs_hide_open(struct be_nfs *nb, const char *path);
ssize_t be_nfs_pread(struct backend_file *bf, void *buf, size_t len, off_t off);
ssize_t be_nfs_pwrite(struct backend_file *bf, const void *buf, size_t len, off_t off);
void be_nfs_release(struct backend_file *bf);
int be_nfs_setattr(struct backend *be, const char *path, struct backend_file *f,
		   const struct stat *st, unsigned int to_set);

#endif
