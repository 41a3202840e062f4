/*
 * be_azure_int.h - what the files of the Azure Blob backend share and
 * nothing else sees.  Tests and other code use be_azure.h.
 *
 *   be_azure.c        the ops table, setup, requests, listing, stat, reads
 *   be_azure_auth.c   addresses, credentials, Shared Key
 *   be_azure_xml.c    listings and errors
 *   be_azure_write.c  staged writes, Put Blob, block uploads (resumable),
 *                     the namespace: folders, delete, rename
 */
#ifndef MLFS_BE_AZURE_INT_H
#define MLFS_BE_AZURE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "be_azure.h"
#include "remote.h"
#include "remote_memo.h"
#include "remote_stage.h"

#define BE_AZURE_NAME_MAX	255

struct be_azure {
	struct backend base;
	struct remote *remote;
	struct be_azure_addr addr;
	time_t created;
	atomic_bool told_denied;	/* a refused credential logged once */
	struct remote_memo memo;
	char *staging;			/* state_dir/staging */
	struct remote_writers writers;	/* files open for writing */
	int64_t copy_stall_ns;		/* a pending copy without progress this long is aborted */
	int list_chunk;			/* entries a listing page asks for (list_chunk) */
};

/* An open file: where it is and what it was at open, and its staged copy when written. */
struct be_azure_file {
	struct remote_file r;
	/* the path's staged copy, shared with its other opens, when open for writing or
	 * while another open writes it; NULL: reads go to the server */
	struct remote_stage *st;
	bool writing;			/* st came from be_azure_open_write */
};

static inline struct be_azure *be_azure(struct backend *be)
{
	return (struct be_azure *)be;
}

static inline struct be_azure_file *be_azure_file(struct backend_file *f)
{
	return (struct be_azure_file *)f;
}

/* ---- be_azure.c ---- */

/*
 * The URL of blob @path ("" or "a/b", under the root; encoded, '/' kept),
 * or with @query the container's URL and that query; the SAS after either.
 */
char *be_azure_url(const struct be_azure *az, const char *path, const char *query);

/*
 * A request with x-ms-version and @extra headers (NULL-terminated, at most
 * 6, or NULL); @req->body_fd as the caller set it.  0 or -errno.
 */
int be_azure_do(struct be_azure *az, struct remote_req *req, const char *const *extra,
		struct remote_resp *resp);

/* Logs a failed request: a refused credential once, with Azure's words; else each time. */
void be_azure_fail(struct be_azure *az, const char *what, const char *path, int ret,
		   const struct remote_resp *resp);

/* HEAD of blob @path: 0 and what it said, or -errno. */
int be_azure_head(struct be_azure *az, const char *path, struct remote_meta *m);

/* What @path is: from the memo when fresh (any age with @trust), else asked. */
int be_azure_meta(struct be_azure *az, const char *path, struct remote_meta *m, bool trust);

/*
 * What lies under folder @path: 0 and *n (0, 1 or 2: entries seen, its
 * own marker blob included) and *marker (whether that marker is there).
 */
int be_azure_count_beneath(struct be_azure *az, const char *path, unsigned int *n,
			   bool *marker);

/* A new open file of @path at @url (taken), as @meta says, read-only: 0 or -ENOMEM. */
int be_azure_file_new(struct be_azure_file **out, struct be_azure *az, const char *path,
		      char *url, const struct remote_meta *meta);
void be_azure_file_free(struct be_azure_file *f);

/*
 * A name Azure would store under another: it reads '\\' in a blob's name
 * as '/' (a\\b is blob b in folder a).  -EINVAL, logged, or 0.
 */
int be_azure_name_check(struct be_azure *az, const char *path);

/* @f's size, ETag and mtime (be_azure_meta); -EISDIR for a folder. */
int be_azure_file_meta(struct be_azure_file *f, bool trust);

/* ---- be_azure_write.c ---- */

/*
 * Opens @f for writing: the path's stage (remote_writers_open), made from
 * a copy of the blob unless O_TRUNC.  Undo with remote_writers_close.
 */
int be_azure_open_write(struct be_azure_file *f, int flags);

/* Uploads @f's staging file when it changed since the last upload. 0 or -errno. */
int be_azure_upload(struct be_azure_file *f);

/* Forgets what is known of @path and of the folders above it. */
void be_azure_changed(struct be_azure *az, const char *path);

ssize_t be_azure_pwrite(struct backend_file *f, const void *buf, size_t len, off_t off);
int be_azure_flush(struct backend_file *f);
int be_azure_fsync(struct backend_file *f, int datasync);
int be_azure_create_file(struct backend_file **out, struct backend *be, const char *path,
			 int flags, mode_t mode, const struct backend_cred *cred);
int be_azure_setattr(struct backend *be, const char *path, struct backend_file *f,
		     const struct stat *st, unsigned int to_set);
int be_azure_mkdir(struct backend *be, const char *path, mode_t mode,
		   const struct backend_cred *cred);
int be_azure_rmdir(struct backend *be, const char *path);
int be_azure_unlink(struct backend *be, const char *path);
int be_azure_rename(struct backend *be, const char *from, const char *to, unsigned int flags);

/*
 * The ops table's upload: @size bytes of @fd as @path, one Put Blob below
 * 8 MiB, else blocks sent from a few threads and committed with Put Block
 * List, resumed from @u->resume and saved through @u->save after each
 * block (the token: be_azure_write.c), then "done".  0 once the blob is
 * committed at its size, or -errno.
 */
int be_azure_upload_fd(struct backend *be, const char *path, int fd, uint64_t size,
		       const struct backend_upload *u);

#endif
