/*
 * remote_memo.h - what a remote backend without a cache of its own (ftp,
 * azure) learned of its paths in this mount: type, size, date and version
 * (an ETag), from a listing or a HEAD; a write forgets what it changed.  A
 * record is fresh for the datastore's metadata_ttl seconds, which is how
 * long a stat or an open under datastores/ may trust it; under the read-only
 * trees (BE_O_TRUST, getattr_known) any record is trusted for the mount's
 * lifetime.  Bounded: past REMOTE_MEMO_MAX records it is emptied and fills
 * again.  Thread-safe.
 */
#ifndef MLFS_REMOTE_MEMO_H
#define MLFS_REMOTE_MEMO_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "backend.h"
#include "path_map.h"

#define REMOTE_MEMO_MAX		(4u << 20)	/* records before the memo is emptied */
#define REMOTE_META_ETAG_MAX	260		/* remote.h keeps 256 bytes; 2 for quotes */

/* What is known of one path. */
struct remote_meta {
	bool is_dir;
	bool from_head;		/* said by a HEAD in this mount, not a listing */
	int64_t size;
	time_t mtime;		/* -1: not said */
	char etag[REMOTE_META_ETAG_MAX];	/* "": none */
};

struct remote_memo {
	time_t ttl;		/* seconds a record is fresh */
	pthread_mutex_t lock;
	struct path_map map;	/* guarded by lock */
};

/* An empty memo whose records are fresh for @ttl seconds (0: never). */
void remote_memo_init(struct remote_memo *m, time_t ttl);
void remote_memo_destroy(struct remote_memo *m);

/* The record of @path into @meta when fresh, or any with @trust: 0, or -ENOENT. */
int remote_memo_get(struct remote_memo *m, const char *path, struct remote_meta *meta, bool trust);

/* Records @meta for @path, fresh from now. */
void remote_memo_put(struct remote_memo *m, const char *path, const struct remote_meta *meta);

/* Forgets @path and every folder above it (a write changed what they are). */
void remote_memo_forget(struct remote_memo *m, const char *path);

/*
 * @st of @path from @meta, read-only (0555 folders, 0444 files, remote_stat);
 * dated @created when @meta says no date.
 */
void remote_meta_stat(const struct remote_meta *meta, const char *path, time_t created,
		      struct stat *st);

/* An open file of a read-only remote backend: where it is, and what it was at open. */
struct remote_file {
	struct backend_file base;
	char *url;		/* what a read asks for */
	char *path;
	struct remote_meta m;
};

/*
 * A new open file of @be for @path at @url (taken: freed on failure too),
 * as @meta says: 0 and *out, or -ENOMEM.  Release with remote_file_release.
 */
int remote_file_new(struct backend_file **out, struct backend *be, const char *path, char *url,
		    const struct remote_meta *meta);
void remote_file_release(struct backend_file *f);
/* The same for a struct that begins with a struct remote_file: fills @f, or -ENOMEM. */
int remote_file_init(struct remote_file *f, struct backend *be, const char *path, char *url,
		     const struct remote_meta *meta);
/* Frees what remote_file_init allocated (not @f). */
void remote_file_fini(struct remote_file *f);

/* A backend's getattr_known: the record of @path of any age into @st, or -EAGAIN. */
int remote_memo_stat(struct remote_memo *m, const char *path, time_t created, struct stat *st);

#endif
