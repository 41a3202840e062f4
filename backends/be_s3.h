/*
 * be_s3.h - the S3 backend (be_s3.c), and the pieces of it that need no
 * network, exposed for tests/unit/test_s3.c: the ListObjectsV2 and error
 * parsers (be_s3_xml.c), URL and query building and the credential chain
 * (be_s3_req.c), the resume token of an upload (be_s3_upload.c).  What the
 * backend's own files share is in be_s3_int.h.
 */
#ifndef MLFS_BE_S3_H
#define MLFS_BE_S3_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "backend.h"

extern const struct backend_ops be_s3_ops;
extern const struct config_form be_s3_form;	/* its keys and URLs: config.h */
extern const struct config_form be_gcs_form;	/* the same backend, GCS's conventions */

#define BE_S3_ETAG_MAX		256	/* bytes of an ETag, quotes included, as remote.h keeps it */
#define BE_S3_UPLOAD_ID_MAX	1024	/* bytes of an UploadId, NUL included */

/* Where requests go: built once from the datastore's keys (be_s3_addr_init). */
struct be_s3_addr {
	char *endpoint;		/* "scheme://host[:port][/path]", no trailing '/' */
	char *bucket;
	char *root;		/* key prefix: "" or "a/b/" */
	char *region;
	bool path_style;
};

/*
 * Whose conventions a datastore that speaks S3's protocol follows: AWS's
 * (type s3: MinIO, Wasabi, a test server too) or Google Cloud Storage's
 * (type gcs: its XML API with HMAC keys).  The same backend serves both.
 */
struct be_s3_dialect {
	const char *type;		/* "s3", "gcs" */
	const char *endpoint;		/* the default; NULL: https://s3.REGION.amazonaws.com */
	const char *endpoint_env;	/* where the config is silent; NULL: none */
	const char *region;		/* signed in SigV4's scope unless configured */
	bool region_env;		/* AWS_REGION and AWS_DEFAULT_REGION count */
	bool path_style;		/* the default with the default endpoint */
	const char *id_env, *secret_env, *token_env;	/* credentials from the environment */
	const char *file_env;		/* the credentials file: this variable, */
	const char *file_home;		/* else this under $HOME */
	const char *file_section;	/* its one section; NULL: AWS's profiles */
	const char *file_id, *file_secret, *file_token;	/* its keys */
};

/* The dialect of @cfg's type: GCS's for "gcs", else AWS's. */
const struct be_s3_dialect *be_s3_dialect_of(const struct datastore_config *cfg);

/*
 * Fills @a from @cfg (and, where the config is silent, the dialect's
 * environment: AWS_ENDPOINT_URL, AWS_REGION, AWS_DEFAULT_REGION for s3).
 * Returns 0, -EINVAL for a value be_s3_validate would reject, -ENOMEM.
 * Free with be_s3_addr_free.
 */
int be_s3_addr_init(struct be_s3_addr *a, const struct datastore_config *cfg);
void be_s3_addr_free(struct be_s3_addr *a);

/*
 * The URL of object @key (already including the root), or of the bucket
 * when @key is NULL, with @query ("a=1&b=2", already encoded) appended when
 * not NULL.  Path-style: ENDPOINT/BUCKET/KEY (the bucket URL has no trailing
 * slash); virtual-host: scheme://BUCKET.host/KEY.  Returns a malloc'd string
 * or NULL on ENOMEM.
 */
char *be_s3_url(const struct be_s3_addr *a, const char *key, const char *query);

/*
 * A query string from NULL-terminated name, value pairs: sorted by name and
 * both percent-encoded with '/' as %2F, as SigV4 wants it from curl 7.88.
 * A NULL value is written "name=" (S3 accepts it; SigV4 signs it so).
 */
char *be_s3_query(const char *const *pairs);

/* One entry of a listing page. */
struct be_s3_obj {
	bool is_dir;		/* a CommonPrefixes entry */
	int64_t size;
	time_t mtime;		/* 0 when not known */
	const char *etag;	/* quotes kept; "" when not known */
};

/* Called per entry; @name is relative to the listed prefix. Non-zero stops. */
typedef int be_s3_entry_fn(void *arg, const char *name, const struct be_s3_obj *o);

struct be_s3_page {
	bool truncated;		/* IsTruncated */
	char *next_token;	/* NextContinuationToken, malloc'd, or NULL */
	unsigned int n_keys;	/* entries parsed (Contents and CommonPrefixes), skipped included */
};

/*
 * Parses one ListObjectsV2 page of @len bytes, calling @fn for each folder
 * (CommonPrefixes) and file (Contents) beneath @prefix.  Skipped: the
 * folder's own marker, names that are empty, ".", "..", hold a '/' or are
 * longer than NAME_MAX.  A bucket may hold an object "a" and keys under
 * "a/": one of them is named, by name_set_twin_hidden, as be_s3_lookup
 * decides (within one page; twins split over two pages are both named).
 * Returns 0, -EIO for XML that is not a listing, or what @fn returned;
 * page->next_token is set in every case (free it).
 */
int be_s3_parse_list(const char *xml, size_t len, const char *prefix, be_s3_entry_fn *fn,
		     void *arg, struct be_s3_page *page);

/* The <Code> of an S3 error body into @code; 0, or -ENOENT when there is none. */
int be_s3_parse_error(const char *xml, size_t len, char *code, size_t size);

/* An ISO 8601 UTC time ("2024-01-02T03:04:05.000Z") as time_t; -1 when malformed. */
time_t be_s3_parse_time(const char *s);

struct be_s3_creds {
	char *key_id;		/* NULL: anonymous, unsigned requests */
	char *secret;
	char *token;		/* NULL when none */
	const char *from;	/* "config", "environment", "credentials file", "none" */
};

/*
 * Finds the credentials of @cfg: its keys, else AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN), else the credentials
 * file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials) under the
 * profile from `profile`, AWS_PROFILE or "default", else none.  A
 * `profile` key goes straight to the file.  For gcs: its keys, else
 * GCS_ACCESS_KEY_ID and GCS_SECRET_ACCESS_KEY, else gsutil's boto file
 * (BOTO_CONFIG or ~/.boto: [Credentials] gs_access_key_id,
 * gs_secret_access_key), else none.  Returns 0, -EACCES for a
 * credentials file that others can read, -ENOENT for a configured profile
 * the file lacks, -ENOMEM.  Free with be_s3_creds_free.
 */
int be_s3_creds_find(struct be_s3_creds *c, const struct datastore_config *cfg);
void be_s3_creds_free(struct be_s3_creds *c);

/*
 * A multipart upload as its resume token (struct backend_upload) carries
 * it, and the token's text:
 *
 *   mpu 1                  the format, and its version
 *   id=UPLOADID            S3's UploadId
 *   part_size=BYTES        every part but the last is this long
 *   size=BYTES             the whole file
 *   PART=ETAG              one line per part already sent (PART from 1,
 *                          written in order), its ETag as S3 sent it
 *
 * The part size keeps a token of every part, each ETag as long as
 * BE_S3_ETAG_MAX allows, under BACKEND_RESUME_MAX bytes.
 */
struct be_s3_token {
	char upload_id[BE_S3_UPLOAD_ID_MAX];	/* "" before the upload starts */
	uint64_t size;
	uint64_t part_size;
	unsigned int n_parts;
	char (*etags)[BE_S3_ETAG_MAX];		/* n_parts slots, malloc'd; "" for a part not sent */
};

/* Plans a fresh upload of @size bytes into @t: part size, parts, empty slots. 0, -ENOMEM. */
int be_s3_token_plan(struct be_s3_token *t, uint64_t size);

/*
 * Reads the token @text into @t.  Returns 0, -EINVAL for text that is not
 * such a token (another format or version, a part size S3 or
 * BACKEND_RESUME_MAX would refuse, a part out of range or listed twice),
 * or -ENOMEM; @t needs be_s3_token_free only after 0.
 */
int be_s3_token_parse(struct be_s3_token *t, const char *text);

/*
 * The text of @t, malloc'd into *out, and in *done the bytes of the parts
 * it lists as sent.  Returns 0, -EINVAL when an id or ETag holds a newline
 * or the id is empty, -EOVERFLOW past BACKEND_RESUME_MAX, -ENOMEM.
 */
int be_s3_token_print(const struct be_s3_token *t, char **out, uint64_t *done);

/* The length of part @i (from 0) of @t. */
uint64_t be_s3_token_part_len(const struct be_s3_token *t, unsigned int i);

/* Frees @t's slots and empties it. */
void be_s3_token_free(struct be_s3_token *t);

#endif
