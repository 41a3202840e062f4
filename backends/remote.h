/*
 * remote.h - HTTP(S) and FTP(S) requests for the remote backends (s3, gcs,
 * http, ftp), over libcurl.
 *
 * One struct remote per backend: it owns a pool of curl easy handles that
 * share one connection cache, DNS cache and TLS sessions, so connections are
 * reused across requests and across FUSE threads.  remote_do() performs one
 * request to completion: connect and stall timeouts, bounded retries with
 * jittered exponential backoff on transport errors (timeouts, resets,
 * refused connections), 5xx and 429, and one mapping of curl codes and HTTP
 * statuses to errno (remote_errno).  No request waits longer than
 * (retries + 1) x timeout plus the backoff in between, so no FUSE call hangs.
 *
 * What it does not do: build URLs or sign anything itself beyond handing
 * curl the SigV4 parameters; parse bodies; log secrets (the password and
 * session token are never logged).
 */
#ifndef MLFS_REMOTE_H
#define MLFS_REMOTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

struct remote;

/*
 * Signs one attempt of a request (Azure's Shared Key): given the method
 * ("GET"), the URL, the request's own headers and the Range curl sends for
 * this attempt ("bytes=A-B", "bytes=A-", or NULL), writes at most
 * REMOTE_SIGN_MAX header lines ("Name: value", malloc'd, freed by
 * remote.c) to @out; returns how many, or a negated errno.
 */
#define REMOTE_SIGN_MAX 4
#define REMOTE_WANT_MAX 4	/* response headers one request may ask to see */
typedef int remote_sign_fn(void *arg, const char *method, const char *url,
			   const char *const *headers, const char *range, char **out);

struct remote_opts {
	const char *name;	/* for log lines: the datastore's name */
	long timeout;		/* seconds: connect, and the longest stall of a transfer; <= 0: 30 */
	long retries;		/* retries after the first try; < 0: 3 */
	/* SigV4 (S3): "aws:amz:REGION:s3", with the key id and secret; NULL: no signing. */
	const char *sigv4;
	const char *user;
	const char *password;
	const char *session_token;	/* sent as x-amz-security-token when not NULL */
	atomic_uint_fast64_t *requests;	/* counts each attempt that reached the server; NULL: none */
	/* Added for ftp (be_ftp.c): */
	bool ftp;		/* ftp:// URLs: the transfer's own outcome, no HTTP status;
				 * @user and @password log in (NULL: anonymous) */
	bool tls;		/* explicit TLS (AUTH TLS) on every connection, else fail */
	const char *ca_file;	/* the certificates to trust; NULL: the system's */
	/* Added for azure: every attempt signed by @sign (called with @sign_arg); NULL: none. */
	remote_sign_fn *sign;
	void *sign_arg;
	/* Added for git's LFS: HTTP basic authentication with @user and @password
	 * (curl sends them to the URL's host only, not after a redirect elsewhere). */
	bool basic;
};

int remote_create(struct remote **out, const struct remote_opts *opts);
void remote_destroy(struct remote *r);

enum remote_method {
	REMOTE_GET,
	REMOTE_HEAD,
	REMOTE_PUT,
	REMOTE_POST,
	REMOTE_DELETE,
};

/*
 * Receives response body bytes as they arrive; returns 0, or a negated
 * errno that aborts the request (remote_do then returns it, no retry; an
 * abort with -ECANCELED is the caller's own choice, logged only at debug).
 */
typedef int remote_sink_fn(void *arg, const void *data, size_t len);

/* One entry of a listing (struct remote_req's list). */
struct remote_entry {
	const char *name;
	bool is_dir;
	bool is_link;		/* a symbolic link: its target's type is not known */
	const char *target;	/* a link's target as the listing wrote it, or NULL */
	int64_t size;		/* -1: not said */
	const char *date;	/* the date as the listing wrote it ("Nov 27 15:30"), or NULL */
};

/* Receives one entry; returns 0, or a negated errno that aborts the listing. */
typedef int remote_entry_fn(void *arg, const struct remote_entry *e);

struct remote_req {
	enum remote_method method;
	const char *url;		/* complete and already percent-encoded */
	const char *const *headers;	/* NULL-terminated "Name: value" lines, or NULL */
	/* A ranged GET when range_len > 0: bytes range_off .. range_off + range_len - 1;
	 * with range_len 0 and range_off > 0, from range_off to the end. */
	off_t range_off;
	size_t range_len;
	/* The request body (PUT, POST): from memory when body != NULL, else from
	 * body_fd at body_off when body_fd >= 0; body_len bytes either way.
	 * Set body_fd to -1 when there is no body. */
	const void *body;
	int body_fd;
	off_t body_off;
	size_t body_len;
	/* Where a 2xx response body goes, one of: */
	void *buf;			/* a caller buffer of buf_size bytes (ranged reads) */
	size_t buf_size;
	remote_sink_fn *sink;		/* a callback */
	void *sink_arg;
	/* ... or neither: the body is kept in resp->body, at most max_body bytes
	 * (<= 0: 16 MiB); a longer body fails the request with -EFBIG. */
	size_t max_body;
	/* Added for ftp: a folder listed through libcurl's own listing parser
	 * (wildcard matching): the URL ends in "FOLDER/" + a pattern ("*"), and
	 * each entry matched goes to @list instead of being downloaded.  A
	 * listing that delivered entries is not tried again. */
	remote_entry_fn *list;
	void *list_arg;
	/* Added for azure: the values of these response headers (up to the first
	 * NULL) go to resp->header[i]. */
	const char *want_header[REMOTE_WANT_MAX];
};

struct remote_resp {
	long status;			/* the last HTTP status; 0 when none came */
	char *body;			/* malloc'd, NUL-terminated; also holds an error body (<= 64 KiB) */
	size_t body_len;
	size_t received;		/* body bytes put in buf or given to sink */
	char etag[256];			/* ETag header as sent, quotes kept; "" when none */
	int64_t content_length;		/* -1 when not sent */
	int64_t total_size;		/* the total of Content-Range: bytes a-b/TOTAL; -1 */
	time_t last_modified;		/* -1 when not sent */
	char content_type[128];
	/* Added after the first version: */
	char *effective_url;		/* malloc'd: the URL last asked, after redirects; or NULL */
	/* A ranged GET answered 200 with the whole body: from offset 0 the first
	 * range_len bytes were kept (and the request succeeded); from any other
	 * offset the request failed with -EIO. */
	bool range_ignored;
	char header[REMOTE_WANT_MAX][128];	/* req->want_header[i]'s value, or "" */
};

/*
 * Performs @req, retrying as described at the top; a ranged GET that failed
 * after delivering bytes resumes after them.  Returns 0 when the final answer
 * was 2xx (redirects are followed), else a negated errno from remote_errno()
 * with resp->status and resp->body telling the rest.  Fills @resp in either
 * case; free it with remote_resp_free().
 */
int remote_do(struct remote *r, const struct remote_req *req, struct remote_resp *resp);
void remote_resp_free(struct remote_resp *resp);

/*
 * Maps a curl code (CURLcode as int; 0 when the transfer completed) and an
 * HTTP status to an errno (positive; 0 for success); FTP's answers by their
 * curl codes: no such file, or a folder it cannot enter (550 says either)
 * -> ENOENT, a refused login -> EACCES, a resume past the end -> ERANGE.  HTTP: 404/410 -> ENOENT,
 * 401/403 -> EACCES, 400 -> EINVAL, 405/501 -> ENOTSUP, 409 -> EEXIST,
 * 412 -> ESTALE, 413 -> EFBIG, 416 -> ERANGE (callers read it as EOF),
 * 429/503 -> EAGAIN, 507 -> ENOSPC, other 5xx -> EIO; curl timeouts ->
 * ETIMEDOUT, refused/reset/DNS/TLS/other transport errors -> EIO, a sink's
 * abort -> the sink's errno.
 */
int remote_errno(int curl_code, long status);

/* Whether remote_do retries an answer (curl code, status). */
bool remote_retryable(int curl_code, long status);

/* ---- for the backends over remote.c: attributes a server does not keep ---- */

/* An inode number of @path's own (FNV-1a of it, never 0), so two names never look like one file. */
ino_t remote_path_ino(const char *path);

/*
 * @st of @path on a server that keeps no owners or inode numbers: @mode
 * (type and bits), @size (0 for a folder), @t as all three times, one link
 * (two for a folder), 1 MiB blocks (the cache's block: cat and Python read
 * one at a time), owner root.
 */
void remote_stat(struct stat *st, const char *path, mode_t mode, int64_t size, time_t t);

#define REMOTE_SETTLED_S	120	/* a listed date this old names a version */

/*
 * Whether a date a listing gave to the minute (@day: to the day, e.g. an FTP
 * listing's for an old file) names one version of a file: it is
 * REMOTE_SETTLED_S past (a day more for a date to the day), so a rewrite
 * since would show a later date (clocks may differ by a little).  Cache
 * keys built from such a date (size and date: http's and ftp's listings)
 * are only trusted for a settled one.
 */
bool remote_date_settled(time_t date, bool day);

/* The statfs of a read-only server that says nothing of its space (16 TiB, made up). */
void remote_statfs_readonly(struct statvfs *sv, unsigned long namemax);

/* Percent-encodes @s as RFC 3986 unreserved (A-Za-z0-9-._~), keeping '/' when @keep_slash. */
char *remote_escape(const char *s, bool keep_slash);

#endif
