/*
 * be_smb_int.h - what the files of the SMB backend share and nothing else
 * sees: the backend's and an open file's structs, and the helpers one of
 * its files defines for the other.  Tests and other code use be_smb.h.
 *
 *   be_smb.c       the ops table, setup, checking a datastore's keys, the
 *                  calls on paths and on open files
 *   be_smb_conn.c  the context pool, the process-wide library lock, auth,
 *                  addresses and URLs, the errno map, retries
 */
#ifndef MLFS_BE_SMB_INT_H
#define MLFS_BE_SMB_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <libsmbclient.h>

#include "be_smb.h"
#include "stat_memo.h"

#define BE_SMB_POOL_MAX		8	/* idle contexts kept */
#define BE_SMB_MEMO_MAX		(4u << 20)	/* files remembered for trusted opens */
/* A file closed here: what a busy unlink or rename of it waits for, and tries again after. */
#define BE_SMB_CLOSE_WAIT_MS	500	/* for a close the kernel did not send yet */
#define BE_SMB_CLOSED_RING	32	/* the closes remembered */
#define BE_SMB_CLOSED_RECENT_NS	2000000000ll	/* a close this recent: the server may lag */
#define BE_SMB_BUSY_TRIES	5	/* calls after it, 20-160 ms apart */

struct be_smb {
	struct backend base;
	struct be_smb_addr addr;
	char *user;		/* NULL: libsmbclient's default */
	char *password;		/* never logged */
	char *workgroup;	/* NULL: libsmbclient's default */
	int timeout_ms;
	int retries;
	pthread_mutex_t lock;	/* guards idle and n_idle */
	SMBCCTX *idle[BE_SMB_POOL_MAX];
	unsigned int n_idle;
	atomic_bool login_logged;
	struct stat_memo *memo;	/* what lookups and listings said, for trusted opens */
	pthread_mutex_t open_lock;	/* guards opens and closed */
	pthread_cond_t close_cond;	/* a file of opens was closed */
	struct be_smb_file *opens;	/* the files open here */
	struct be_smb_closed {		/* the files closed here last, a ring */
		uint64_t path_hash;
		int64_t at_ns;		/* monotonic */
	} closed[BE_SMB_CLOSED_RING];
	unsigned int n_closed;		/* closes recorded, ever */
};

struct be_smb_file {
	struct backend_file base;
	pthread_mutex_t lock;	/* guards ctx, fh and flags; held across network I/O */
	SMBCCTX *ctx;		/* NULL after its connection died, until reopened */
	SMBCFILE *fh;
	int flags;		/* for (re)opening */
	mode_t mode;
	char *url;
	char *path;		/* the backend path */
	bool trust;		/* opened with BE_O_TRUST */
	off_t size;		/* at open */
	struct timespec mtime;	/* at open */
	bool remembered;	/* trusted, from the memo: st below; no call made at open */
	struct stat st;		/* when remembered */
	struct be_smb_file *next_open, **prev_open;	/* in opens; prev_open NULL: not */
};

static inline struct be_smb *be_smb(struct backend *be)
{
	return (struct be_smb *)be;
}

static inline struct be_smb_file *be_smb_file(struct backend_file *f)
{
	return (struct be_smb_file *)f;
}

/* One try of a call on a pooled context: >= 0, or a raw negated errno. */
typedef int be_smb_fn(SMBCCTX *ctx, char *url, void *arg);

/* One try on an open file's context: >= 0, or a raw negated errno. */
typedef ssize_t be_smb_file_fn(struct be_smb_file *f, void *arg);

/* ---- be_smb_conn.c ---- */

/*
 * Take and drop the one process-wide, recursive lock that every call into
 * libsmbclient holds (be_smb_conn.c says why).
 */
void be_smb_lib_lock(void);
void be_smb_lib_unlock(void);

/* The raw, negated errno a failed libsmbclient call left (never 0). */
int be_smb_raw(void);

/* Splits "host" or "host:port" (445 by default); returns 0, -EINVAL or -ENOMEM. */
int be_smb_parse_address(const char *v, char **host, unsigned int *port);

/*
 * Gives @ctx back to the pool, or frees it when @broken or the pool is
 * full; accepts NULL.  Takes be_smb_lib itself to free.
 */
void be_smb_ctx_put(struct be_smb *sb, SMBCCTX *ctx, bool broken);

/*
 * Runs @fn on the URL of @path with a context from the pool, retrying a
 * transport failure on a fresh context; returns >= 0 or a mapped errno,
 * logged.
 */
int be_smb_call(struct be_smb *sb, const char *what, const char *path, be_smb_fn *fn,
		void *arg);

/*
 * Runs @fn on open file @f under f->lock, (re)opening it first when it has
 * no connection, and retrying a transport failure on a fresh context;
 * returns >= 0 or a mapped errno, logged.
 */
ssize_t be_smb_file_io(struct be_smb_file *f, const char *what, be_smb_file_fn *fn,
		       void *arg);

#endif
