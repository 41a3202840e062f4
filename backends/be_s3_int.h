/*
 * be_s3_int.h - what the files of the S3 backend share and nothing else
 * sees: the backend's and an open file's structs, and the helpers one of
 * its files defines for another.  Tests and other code use be_s3.h.
 *
 *   be_s3.c         the ops table, setup, the metadata cache, reads, the namespace
 *   be_s3_req.c     addresses, URLs, query strings, credentials, key checks,
 *                   requests and their failures
 *   be_s3_xml.c     S3's XML: listings, errors, times, the multipart completion body
 *   be_s3_upload.c  staging files, the writers list, PUT and multipart upload,
 *                   the resumable upload of a local file and its token
 */
#ifndef MLFS_BE_S3_INT_H
#define MLFS_BE_S3_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "be_s3.h"
#include "path_map.h"
#include "remote.h"
#include "remote_stage.h"

/* What the backend knows of one path, as its metadata cache hands it out. */
struct be_s3_meta {
	bool is_dir;
	int64_t size;
	time_t mtime;
	char etag[BE_S3_ETAG_MAX];
	int64_t learned;	/* CLOCK_MONOTONIC, ns */
};

struct be_s3_file;

struct be_s3 {
	struct backend base;
	struct be_s3_addr addr;
	struct be_s3_creds creds;
	char *sigv4;			/* "aws:amz:REGION:s3", or NULL when anonymous */
	char *staging;			/* state_dir/staging */
	struct remote *remote;
	time_t created;			/* folders' mtime */
	int64_t ttl_ns;			/* metadata_ttl: a stat and an open take what was
					 * learned this recently (any time under a trusted view) */
	atomic_bool creds_logged;	/* the credentials problem was logged */
	atomic_bool bucket_logged;	/* NoSuchBucket was logged */
	pthread_mutex_t meta_lock;
	struct path_map meta;		/* meta_lock: of struct be_s3_memo (be_s3.c) */
	struct remote_writers writers;	/* files open for writing */
};

struct be_s3_file {
	struct backend_file base;
	char *path;
	char *key;
	int64_t size;			/* at open; reads stop there */
	time_t mtime;
	char etag[BE_S3_ETAG_MAX];
	/* the path's staged copy, shared with its other opens, when open for writing or
	 * while another open writes it; NULL: reads go to the server */
	struct remote_stage *st;
	bool writing;			/* st came from be_s3_open_write */
};

static inline struct be_s3 *be_s3(struct backend *be)
{
	return (struct be_s3 *)be;
}

static inline struct be_s3_file *be_s3_file(struct backend_file *f)
{
	return (struct be_s3_file *)f;
}


/* ---- be_s3.c ---- */

/* Forgets @path and its parent folders in the metadata cache. */
void be_s3_meta_changed(struct be_s3 *s3, const char *path);

/* Fills @f's size, mtime and ETag: trusted from the cache, else a HEAD. 0 or -errno. */
int be_s3_file_meta(struct be_s3_file *f, bool trust);

/*
 * A ranged GET of @f's object, If-Match its ETag, into @buf or through @sink
 * when not NULL.  Returns the bytes received, 0 past the end, or -errno.
 */
ssize_t be_s3_get(struct be_s3_file *f, void *buf, size_t len, off_t off,
		  remote_sink_fn *sink, void *sink_arg);

/* ---- be_s3_req.c ---- */

/* The ops table's validate: diagnostics for @cfg's keys into @d; 0 or -EINVAL. */
int be_s3_validate(const struct datastore_config *cfg, struct diag *d);

/*
 * The errno for a failed request (@ret, @resp), read from S3's <Code> when
 * there is a body, and logged when a user must act on it.
 */
int be_s3_fail(struct be_s3 *s3, int ret, const struct remote_resp *resp,
	       const char *what, const char *key);

/* The object key of @path (root included), or the folder prefix with @dir; malloc'd. */
char *be_s3_key(struct be_s3 *s3, const char *path, bool dir);

/*
 * One request on object @key (NULL: the bucket) with @query pairs (NULL:
 * none); @resp is always set (remote_resp_free it).  0 or -errno, unmapped.
 */
int be_s3_do(struct be_s3 *s3, struct remote_req *req, const char *key,
	     const char *const *query, struct remote_resp *resp);

/* A request whose answer only matters as success or failure; failures mapped. */
int be_s3_simple(struct be_s3 *s3, enum remote_method method, const char *key,
		 const char *const *query, const char *const *headers, const char *what);

/* HEAD of @key into @o (its ETag copied to @etag, which @o points to). */
int be_s3_head(struct be_s3 *s3, const char *key, struct be_s3_obj *o, char *etag,
	       size_t etag_size);

/* A listing of a prefix, page by page. */
struct be_s3_list {
	const char *prefix;
	bool delimiter;
	const char *max_keys;
	be_s3_entry_fn *fn;
	void *arg;
	unsigned int n_keys;	/* out: entries seen, markers included */
};

/* Lists @l->prefix to the end; each page goes to @l->fn as it comes. */
int be_s3_list(struct be_s3 *s3, struct be_s3_list *l);

/* How many keys (up to @max, a few) lie beneath folder @path, its marker included. */
int be_s3_count_beneath(struct be_s3 *s3, const char *path, const char *max,
			unsigned int *count);

/*
 * One PUT of @size bytes of @fd at @key; @size 0 (any @fd) makes an empty
 * object (a folder marker, a file truncated to 0).
 */
int be_s3_put(struct be_s3 *s3, const char *key, int fd, size_t size);

/* A server-side copy of key @from to key @to. */
int be_s3_copy(struct be_s3 *s3, const char *from, const char *to);

/* ---- be_s3_xml.c ---- */

/* The text of the root's child @name when the root is @root_name: 0, or -ENOENT. */
int be_s3_xml_field(const char *xml, size_t len, const char *root_name,
		    const char *name, char *buf, size_t size);

/* The CompleteMultipartUpload body for @n_parts parts, malloc'd; NULL on ENOMEM. */
char *be_s3_mpu_body(char (*etags)[BE_S3_ETAG_MAX], unsigned int n_parts, size_t *len);

/* ---- be_s3_upload.c ---- */

/*
 * Opens @f for writing: the path's stage (remote_writers_open), made from
 * a copy of the object unless O_TRUNC.  Undo with remote_writers_close.
 */
int be_s3_open_write(struct be_s3_file *f, int flags);

/* Uploads @f's staging file when it changed since the last upload. 0 or -errno. */
int be_s3_upload(struct be_s3_file *f);

/*
 * The ops table's upload: @size bytes of @fd as @path, one PUT below
 * 8 MiB, else a multipart upload resumed from @u->resume and saved through
 * @u->save after each part (be_s3.h: the token), never aborted on failure
 * so that what was saved stays resumable; then @u->save of "done".  A
 * "done" token of an object already of @size bytes sends nothing.  0 once
 * the object is complete, or -errno.
 */
int be_s3_upload_fd(struct backend *be, const char *path, int fd, uint64_t size,
		    const struct backend_upload *u);

#endif
