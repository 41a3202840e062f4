/*
 * remote.c - HTTP(S) and FTP(S) requests for the remote backends, over
 * libcurl (remote.h).
 *
 * The idea: one struct remote per backend holds a pool of curl easy handles
 * and one CURLSH that shares the connection cache, DNS cache and TLS
 * sessions between them, so a FUSE thread takes a handle, performs one
 * request, and puts the handle back with its connection still warm.
 * remote_do() is the only entry point that talks to the network: it sets
 * every option afresh on a reset handle (timeouts, redirects, keep-alive,
 * SigV4, the range, the body), runs attempts until one succeeds or a bounded
 * number of retries is spent, and sleeps the request backoff (backoff.h)
 * between them.  Mapping (remote_errno), deciding to retry
 * (remote_retryable) and logging (remote_log_*) are separate small pieces.
 *
 * FTP (remote_opts.ftp) goes through the same attempts: the login and
 * explicit TLS are options of the handle, a transfer's outcome is its curl
 * code (there is no status: a body is taken as a 200's, a range's as a
 * 206's), and a folder is listed with curl's own parser (wildcard matching,
 * one callback per entry, nothing downloaded).

 * A ranged GET, or a GET into a buffer or a sink, that failed after some
 * bytes arrived resumes after them on the next attempt: what a caller was
 * given is never given twice.  A server that ignores Range (200 instead of
 * 206) is tolerated only when the wanted bytes start at offset 0.
 *
 * What it does not do: build or canonicalise URLs (callers pass them
 * complete and encoded), sign anything beyond handing curl the SigV4
 * parameters, parse bodies.  Log lines name the datastore, the method and
 * the URL without its query or user info; never a password or token.
 *
 * Threading: the handle pool is guarded by pool_lock; the CURLSH by one
 * mutex per curl_lock_data, through curl's lock callbacks.  A handle is used
 * by one thread at a time; no lock is held while a transfer runs.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "backoff.h"
#include "log.h"
#include "password.h"
#include "remote.h"

#define REMOTE_POOL_MAX		32
#define REMOTE_MAX_CONNS	REMOTE_POOL_MAX	/* connections kept to one server, busy or idle */
#define REMOTE_ERR_BODY_MAX	(64 * 1024)
#define REMOTE_BODY_DEFAULT	(16u << 20)
#define REMOTE_MAX_REDIRS	5

struct remote {
	char *name;
	long timeout;
	long retries;
	char *sigv4;			/* NULL: no signing */
	char *user;
	char *password;
	char *token_header;		/* "x-amz-security-token: ..." or NULL */
	remote_sign_fn *sign;		/* signs each attempt (remote_opts); NULL: none */
	void *sign_arg;
	bool ftp;			/* ftp:// URLs (remote_opts) */
	bool tls;
	char *ca_file;
	char user_agent[64];
	atomic_uint_fast64_t *requests;	/* the datastore's stats.requests, or NULL */
	CURLSH *share;
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
	pthread_mutex_t pool_lock;
	CURL *pool[REMOTE_POOL_MAX];	/* idle handles; guarded by pool_lock */
	size_t n_pool;			/* guarded by pool_lock */
};

/* One attempt's state, shared with curl's callbacks. */
struct remote_xfer {
	const struct remote_req *req;
	struct remote_resp *resp;
	off_t start;			/* first byte this attempt asks for */
	size_t want;			/* bytes still wanted, 0: to the end */
	bool ranged;			/* this attempt sends a Range */
	size_t body_pos;		/* upload position */
	size_t body_cap;		/* resp->body allocation */
	size_t max_body;
	int abort_errno;		/* why a callback stopped the transfer */
	bool enough;			/* a 200 to a range from 0 delivered what was asked */
	bool overflow;			/* the body was longer than the caller's buffer */
	size_t listed;			/* entries a listing delivered */
	char range[64];			/* the Range this attempt sends: "A-B", "A-", "" */
	char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t remote_once = PTHREAD_ONCE_INIT;
static CURLcode remote_init_code;

static void remote_global_init(void)
{
	remote_init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- the share and the pool ---- */

static void remote_share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *arg)
{
	struct remote *r = arg;

	(void)h;
	(void)access;
	pthread_mutex_lock(&r->share_locks[data]);
}

static void remote_share_unlock(CURL *h, curl_lock_data data, void *arg)
{
	struct remote *r = arg;

	(void)h;
	pthread_mutex_unlock(&r->share_locks[data]);
}

static int remote_share_init(struct remote *r)
{
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&r->share_locks[i], NULL);
	r->share = curl_share_init();
	if (!r->share)
		return -ENOMEM;
	curl_share_setopt(r->share, CURLSHOPT_LOCKFUNC, remote_share_lock);
	curl_share_setopt(r->share, CURLSHOPT_UNLOCKFUNC, remote_share_unlock);
	curl_share_setopt(r->share, CURLSHOPT_USERDATA, r);
	curl_share_setopt(r->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(r->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(r->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	return 0;
}

static CURL *remote_handle_get(struct remote *r)
{
	CURL *h = NULL;

	pthread_mutex_lock(&r->pool_lock);
	if (r->n_pool > 0)
		h = r->pool[--r->n_pool];
	pthread_mutex_unlock(&r->pool_lock);
	return h ? h : curl_easy_init();
}

static void remote_handle_put(struct remote *r, CURL *h)
{
	curl_easy_reset(h);
	pthread_mutex_lock(&r->pool_lock);
	if (r->n_pool < REMOTE_POOL_MAX) {
		r->pool[r->n_pool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&r->pool_lock);
	if (h)
		curl_easy_cleanup(h);
}

static int remote_copy_opts(struct remote *r, const struct remote_opts *o)
{
	r->name = strdup(o->name ? o->name : "remote");
	r->timeout = o->timeout > 0 ? o->timeout : 30;
	r->retries = o->retries >= 0 ? o->retries : 3;
	r->requests = o->requests;
	if (!r->name)
		return -ENOMEM;
	snprintf(r->user_agent, sizeof(r->user_agent), "mlfs/%s", MLFS_VERSION);
	r->sign = o->sign;
	r->sign_arg = o->sign_arg;
	r->ftp = o->ftp;
	r->tls = o->tls;
	if (o->ca_file && !(r->ca_file = strdup(o->ca_file)))
		return -ENOMEM;
	if ((o->ftp || o->basic) && o->user) {
		r->user = strdup(o->user);
		r->password = strdup(o->password ? o->password : "");
		return r->user && r->password ? 0 : -ENOMEM;
	}
	if (!o->sigv4)
		return 0;
	r->sigv4 = strdup(o->sigv4);
	r->user = strdup(o->user ? o->user : "");
	r->password = strdup(o->password ? o->password : "");
	if (!r->sigv4 || !r->user || !r->password)
		return -ENOMEM;
	if (o->session_token &&
	    asprintf(&r->token_header, "x-amz-security-token: %s", o->session_token) < 0) {
		r->token_header = NULL;
		return -ENOMEM;
	}
	return 0;
}

int remote_create(struct remote **out, const struct remote_opts *opts)
{
	struct remote *r;
	int ret;

	pthread_once(&remote_once, remote_global_init);
	if (remote_init_code != CURLE_OK)
		return -ENOMEM;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->pool_lock, NULL);
	ret = remote_share_init(r);
	if (ret == 0)
		ret = remote_copy_opts(r, opts);
	if (ret < 0) {
		remote_destroy(r);
		return ret;
	}
	*out = r;
	return 0;
}

/* Overwrites a secret before freeing it. */
static void remote_free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void remote_destroy(struct remote *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_pool; i++)
		curl_easy_cleanup(r->pool[i]);
	if (r->share)
		curl_share_cleanup(r->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&r->share_locks[i]);
	pthread_mutex_destroy(&r->pool_lock);
	free(r->name);
	free(r->sigv4);
	free(r->ca_file);
	remote_free_secret(r->user);
	remote_free_secret(r->password);
	remote_free_secret(r->token_header);
	free(r);
}

void remote_resp_free(struct remote_resp *resp)
{
	if (!resp)
		return;
	free(resp->body);
	free(resp->effective_url);
	resp->body = NULL;
	resp->body_len = 0;
	resp->effective_url = NULL;
}

/* ---- mapping ---- */

static int remote_status_errno(long status)
{
	if (status >= 200 && status < 300)
		return 0;
	switch (status) {
	case 400: return EINVAL;
	case 401: case 403: return EACCES;
	case 404: case 410: return ENOENT;
	case 405: case 501: return ENOTSUP;
	case 409: return EEXIST;
	case 412: return ESTALE;
	case 413: return EFBIG;
	case 416: return ERANGE;
	case 429: case 503: return EAGAIN;
	case 507: return ENOSPC;
	default: return EIO;
	}
}

int remote_errno(int curl_code, long status)
{
	switch (curl_code) {
	case CURLE_OK:
		return remote_status_errno(status);
	case CURLE_OPERATION_TIMEDOUT:
		return ETIMEDOUT;
	case CURLE_OUT_OF_MEMORY:
		return ENOMEM;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return EINVAL;
	case CURLE_REMOTE_FILE_NOT_FOUND:	/* FTP 550 */
	case CURLE_REMOTE_ACCESS_DENIED:	/* FTP: CWD refused, 550 for "no such folder" too */
		return ENOENT;
	case CURLE_LOGIN_DENIED:
		return EACCES;
	case CURLE_BAD_DOWNLOAD_RESUME:		/* FTP: a REST past the end */
		return ERANGE;
	default:
		return EIO;
	}
}

bool remote_retryable(int curl_code, long status)
{
	switch (curl_code) {
	case CURLE_OK:
		/* 501 and 505 say "never", not "not now". */
		return status == 429 || (status >= 500 && status <= 599 && status != 501 &&
					 status != 505);
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_PARTIAL_FILE:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_HTTP3:
		return true;
	default:
		return false;
	}
}

char *remote_escape(const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t len = strlen(s);
	char *out = malloc(len * 3 + 1);
	char *o = out;

	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' ||
		    *p == '~' || (keep_slash && *p == '/')) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

/* ---- logging ---- */

static const char *const remote_method_name[] = {
	[REMOTE_GET] = "GET", [REMOTE_HEAD] = "HEAD", [REMOTE_PUT] = "PUT",
	[REMOTE_POST] = "POST", [REMOTE_DELETE] = "DELETE",
};

/* What went wrong, in words, into @out. */
static void remote_log_what(char *out, size_t size, int code, long status,
			    const struct remote_xfer *x)
{
	if (x->resp->range_ignored && code != CURLE_OK)
		snprintf(out, size, "the server ignored Range (200 instead of 206)");
	else if (code != CURLE_OK && x->overflow)
		snprintf(out, size, "the body is longer than the %zu bytes asked for",
			 x->req->buf_size);
	else if (code != CURLE_OK && x->abort_errno)
		snprintf(out, size, "%s", strerror(x->abort_errno));
	else if (code != CURLE_OK)
		snprintf(out, size, "%s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(code));
	else
		snprintf(out, size, "HTTP %ld", status);
}

static void remote_log(struct remote *r, int level, const struct remote_xfer *x, int code,
		       long status, const char *tail)
{
	char url[1024], what[CURL_ERROR_SIZE + 64];

	password_url_shown(url, sizeof(url), x->req->url);
	remote_log_what(what, sizeof(what), code, status, x);
	log_msg(level, "%s: %s %s: %s%s", r->name, remote_method_name[x->req->method], url, what,
		tail);
}

/* ---- curl callbacks ---- */

static bool remote_is_2xx(long status)
{
	return status >= 200 && status < 300;
}

/* Appends to resp->body, keeping it NUL-terminated. */
static int remote_body_append(struct remote_xfer *x, const char *data, size_t len)
{
	struct remote_resp *resp = x->resp;

	if (resp->body_len + len + 1 > x->body_cap) {
		size_t cap = x->body_cap ? x->body_cap : 4096;
		char *p;

		while (cap < resp->body_len + len + 1)
			cap *= 2;
		p = realloc(resp->body, cap);
		if (!p)
			return -ENOMEM;
		resp->body = p;
		x->body_cap = cap;
	}
	memcpy(resp->body + resp->body_len, data, len);
	resp->body_len += len;
	resp->body[resp->body_len] = '\0';
	return 0;
}

/* Puts 2xx bytes into the caller's buffer; a 200 to a range from 0 stops when full. */
static int remote_to_buf(struct remote_xfer *x, const char *data, size_t len)
{
	const struct remote_req *req = x->req;
	struct remote_resp *resp = x->resp;

	if (resp->range_ignored && resp->received + len > req->range_len) {
		len = req->range_len - resp->received;
		x->enough = true;
	}
	if (resp->received + len > req->buf_size) {
		x->overflow = true;
		return -EIO;
	}
	memcpy((char *)req->buf + resp->received, data, len);
	resp->received += len;
	return x->enough ? -ECANCELED : 0;
}

static int remote_to_sink(struct remote_xfer *x, const char *data, size_t len)
{
	const struct remote_req *req = x->req;
	struct remote_resp *resp = x->resp;
	int ret;

	if (resp->range_ignored && resp->received + len > req->range_len) {
		len = req->range_len - resp->received;
		x->enough = true;
	}
	ret = req->sink(req->sink_arg, data, len);
	if (ret < 0)
		return ret;
	resp->received += len;
	return x->enough ? -ECANCELED : 0;
}

/* A 200 where we asked for a range: the body starts at 0, usable only if we wanted 0. */
static int remote_check_range(struct remote_xfer *x)
{
	if (!x->ranged || x->resp->status != 200)
		return 0;
	x->resp->range_ignored = true;
	return x->start == 0 && x->req->range_len > 0 ? 0 : -EIO;
}

static int remote_deliver(struct remote_xfer *x, const char *data, size_t len)
{
	const struct remote_req *req = x->req;
	int ret;

	if (!remote_is_2xx(x->resp->status)) {
		size_t room = REMOTE_ERR_BODY_MAX - x->resp->body_len;

		return remote_body_append(x, data, len < room ? len : room);
	}
	ret = remote_check_range(x);
	if (ret < 0)
		return ret;
	if (req->buf)
		return remote_to_buf(x, data, len);
	if (req->sink)
		return remote_to_sink(x, data, len);
	if (x->resp->body_len + len > x->max_body)
		return -EFBIG;
	return remote_body_append(x, data, len);
}

static size_t remote_write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
	struct remote_xfer *x = arg;
	int ret = remote_deliver(x, data, size * nmemb);

	if (ret < 0) {
		x->abort_errno = -ret;
		return 0;	/* CURLE_WRITE_ERROR */
	}
	return size * nmemb;
}

/* A new response (after a redirect, or a 100 Continue): forget the last one's headers. */
static void remote_new_response(struct remote_resp *resp, long status)
{
	resp->status = status;
	resp->etag[0] = '\0';
	resp->content_type[0] = '\0';
	for (int i = 0; i < REMOTE_WANT_MAX; i++)
		resp->header[i][0] = '\0';
	resp->content_length = -1;
	resp->total_size = -1;
	resp->last_modified = -1;
}

static void remote_copy_value(char *dst, size_t size, const char *v, size_t len)
{
	if (len >= size)
		len = size - 1;
	memcpy(dst, v, len);
	dst[len] = '\0';
}

/* One "Name: value" header line of the response (value trimmed, NUL-terminated). */
static void remote_header(struct remote_resp *resp, const char *name, size_t nlen, char *v)
{
	size_t vlen = strlen(v);
	const char *slash;

	if (nlen == 4 && strncasecmp(name, "etag", 4) == 0)
		remote_copy_value(resp->etag, sizeof(resp->etag), v, vlen);
	else if (nlen == 12 && strncasecmp(name, "content-type", 12) == 0)
		remote_copy_value(resp->content_type, sizeof(resp->content_type), v, vlen);
	else if (nlen == 14 && strncasecmp(name, "content-length", 14) == 0)
		resp->content_length = strtoll(v, NULL, 10);
	else if (nlen == 13 && strncasecmp(name, "content-range", 13) == 0 &&
		 (slash = strchr(v, '/')) && slash[1] != '*')
		resp->total_size = strtoll(slash + 1, NULL, 10);
	else if (nlen == 13 && strncasecmp(name, "last-modified", 13) == 0)
		resp->last_modified = curl_getdate(v, NULL);
}

static size_t remote_header_cb(char *data, size_t size, size_t nmemb, void *arg)
{
	struct remote_xfer *x = arg;
	size_t len = size * nmemb;
	char line[1024];
	char *colon, *v;
	long status;

	while (len > 0 && (data[len - 1] == '\r' || data[len - 1] == '\n'))
		len--;
	remote_copy_value(line, sizeof(line), data, len);
	if (strncmp(line, "HTTP/", 5) == 0) {
		v = strchr(line, ' ');
		status = v ? strtol(v + 1, NULL, 10) : 0;
		remote_new_response(x->resp, status);
		return size * nmemb;
	}
	colon = strchr(line, ':');
	if (!colon)
		return size * nmemb;
	for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
		;
	for (int i = 0; i < REMOTE_WANT_MAX && x->req->want_header[i]; i++) {
		const char *want = x->req->want_header[i];

		if (strlen(want) == (size_t)(colon - line) &&
		    strncasecmp(line, want, (size_t)(colon - line)) == 0)
			snprintf(x->resp->header[i], sizeof(x->resp->header[i]), "%s", v);
	}
	remote_header(x->resp, line, (size_t)(colon - line), v);
	return size * nmemb;
}

static size_t remote_read_cb(char *dst, size_t size, size_t nmemb, void *arg)
{
	struct remote_xfer *x = arg;
	const struct remote_req *req = x->req;
	size_t n = size * nmemb;
	ssize_t got;

	if (n > req->body_len - x->body_pos)
		n = req->body_len - x->body_pos;
	if (n == 0)
		return 0;
	if (req->body) {
		memcpy(dst, (const char *)req->body + x->body_pos, n);
		got = (ssize_t)n;
	} else {
		got = pread(req->body_fd, dst, n, req->body_off + (off_t)x->body_pos);
		if (got <= 0) {
			x->abort_errno = got < 0 ? errno : EIO;
			return CURL_READFUNC_ABORT;
		}
	}
	x->body_pos += (size_t)got;
	return (size_t)got;
}

static int remote_seek_cb(void *arg, curl_off_t off, int origin)
{
	struct remote_xfer *x = arg;

	if (origin != SEEK_SET || off < 0 || (size_t)off > x->req->body_len)
		return CURL_SEEKFUNC_CANTSEEK;
	x->body_pos = (size_t)off;
	return CURL_SEEKFUNC_OK;
}

/* ---- one attempt ---- */

static bool remote_has_header(const char *const *headers, const char *name)
{
	size_t len = strlen(name);

	for (; headers && *headers; headers++)
		if (strncasecmp(*headers, name, len) == 0 && (*headers)[len] == ':')
			return true;
	return false;
}

/* The request's headers plus ours; *out is NULL when there are none. -ENOMEM. */
static int remote_headers(struct remote *r, const struct remote_req *req,
			  struct curl_slist **out)
{
	struct curl_slist *list = NULL, *next;
	const char *extra[3] = { NULL, NULL, NULL };
	size_t n = 0;

	/*
	 * No 100-continue round trip before a body.  Not when signing: curl
	 * 7.88's SigV4 signs the blank "Expect:" it then leaves out, and the
	 * server rejects the signature (CURLOPT_EXPECT_100_TIMEOUT_MS keeps
	 * that wait short instead).
	 */
	if (!r->sigv4 && !remote_has_header(req->headers, "Expect"))
		extra[n++] = "Expect:";
	if (r->sigv4 && !remote_has_header(req->headers, "x-amz-content-sha256"))
		extra[n++] = "x-amz-content-sha256: UNSIGNED-PAYLOAD";
	if (r->sigv4 && r->token_header)
		extra[n++] = r->token_header;
	for (const char *const *h = req->headers; h && *h; h++) {
		if (!(next = curl_slist_append(list, *h)))
			goto out_nomem;
		list = next;
	}
	for (size_t i = 0; i < n; i++) {
		if (!(next = curl_slist_append(list, extra[i])))
			goto out_nomem;
		list = next;
	}
	*out = list;
	return 0;
out_nomem:
	curl_slist_free_all(list);
	return -ENOMEM;
}

/* A listing's entry: handed to the caller, never downloaded. */
static long remote_chunk_cb(const void *info, void *arg, int remaining)
{
	const struct curl_fileinfo *fi = info;
	struct remote_xfer *x = arg;
	struct remote_entry e = { .name = fi->filename, .size = -1, .date = fi->strings.time };
	int ret;

	(void)remaining;
	if (!fi->filename || strcmp(fi->filename, ".") == 0 || strcmp(fi->filename, "..") == 0)
		return CURL_CHUNK_BGN_FUNC_SKIP;
	e.is_dir = fi->filetype == CURLFILETYPE_DIRECTORY;
	e.is_link = fi->filetype == CURLFILETYPE_SYMLINK;
	if (e.is_link)
		e.target = fi->strings.target;
	if (fi->flags & CURLFINFOFLAG_KNOWN_SIZE)
		e.size = (int64_t)fi->size;
	ret = x->req->list(x->req->list_arg, &e);
	if (ret < 0) {
		x->abort_errno = -ret;
		return CURL_CHUNK_BGN_FUNC_FAIL;
	}
	x->listed++;
	return CURL_CHUNK_BGN_FUNC_SKIP;
}

/*
 * FTP: the login, TLS, one command per transfer where curl can (no CWD
 * before a RETR or SIZE), the file's date on a HEAD, and a listing's
 * callbacks.
 */
static void remote_set_ftp(struct remote *r, CURL *h, struct remote_xfer *x)
{
	if (r->user) {
		curl_easy_setopt(h, CURLOPT_USERNAME, r->user);
		curl_easy_setopt(h, CURLOPT_PASSWORD, r->password);
	}
	if (r->tls)
		curl_easy_setopt(h, CURLOPT_USE_SSL, (long)CURLUSESSL_ALL);
	/*
	 * On every transfer, not only a HEAD (whose date it is): without it,
	 * libcurl 7.88 sent each RETR's EPSV on a reused connection and then
	 * waited out its 1 s poll before opening the data connection, in some
	 * fetches: 12-16 s for a 2,000-file epoch that takes 1.5 s with it.
	 */
	curl_easy_setopt(h, CURLOPT_FILETIME, 1L);
	if (x->req->list) {
		curl_easy_setopt(h, CURLOPT_WILDCARDMATCH, 1L);
		curl_easy_setopt(h, CURLOPT_CHUNK_BGN_FUNCTION, remote_chunk_cb);
		curl_easy_setopt(h, CURLOPT_CHUNK_DATA, x);
	} else if (x->req->url[strlen(x->req->url) - 1] != '/') {
		/* a file: no CWD; a folder's URL must enter it (that is the answer) */
		curl_easy_setopt(h, CURLOPT_FTP_FILEMETHOD, (long)CURLFTPMETHOD_NOCWD);
	}
}

static void remote_set_common(struct remote *r, CURL *h, struct remote_xfer *x)
{
	curl_easy_setopt(h, CURLOPT_URL, x->req->url);
	curl_easy_setopt(h, CURLOPT_SHARE, r->share);
	/*
	 * The shared connection cache holds at most this many connections, busy
	 * ones counted: at each transfer's end past it curl closes the oldest idle
	 * one.  Its default, 5, is fewer than 8 readers and their read-ahead keep
	 * busy, so most requests paid a new connection (a login, for FTP; a TLS
	 * handshake, for HTTPS).
	 */
	curl_easy_setopt(h, CURLOPT_MAXCONNECTS, (long)REMOTE_MAX_CONNS);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 50L);	/* see remote_headers */
	/* 512 KiB receive buffer (curl's most): a 16 KiB one costs a syscall per 16 KiB. */
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L << 10);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, r->timeout);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, r->timeout);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, (long)REMOTE_MAX_REDIRS);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, r->ftp ? "ftp" : "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	if (r->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, r->ca_file);
	if (r->ftp)
		remote_set_ftp(r, h, x);
	else if (r->user && !r->sigv4) {	/* basic */
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERNAME, r->user);
		curl_easy_setopt(h, CURLOPT_PASSWORD, r->password);
	}
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, r->user_agent);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, remote_write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, remote_header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	if (r->sigv4) {
		curl_easy_setopt(h, CURLOPT_AWS_SIGV4, r->sigv4);
		curl_easy_setopt(h, CURLOPT_USERNAME, r->user);
		curl_easy_setopt(h, CURLOPT_PASSWORD, r->password);
	}
}

static void remote_set_body(CURL *h, struct remote_xfer *x)
{
	const struct remote_req *req = x->req;
	bool has_body = req->body || req->body_fd >= 0;
	curl_off_t len = has_body ? (curl_off_t)req->body_len : 0;

	curl_easy_setopt(h, CURLOPT_READFUNCTION, remote_read_cb);
	curl_easy_setopt(h, CURLOPT_READDATA, x);
	curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, remote_seek_cb);
	curl_easy_setopt(h, CURLOPT_SEEKDATA, x);
	if (req->method == REMOTE_PUT) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, len);
	} else if (len == 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
	} else {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, len);
	}
}

static void remote_set_method(CURL *h, struct remote_xfer *x)
{
	char *range = x->range;

	range[0] = '\0';
	switch (x->req->method) {
	case REMOTE_HEAD:
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
		break;
	case REMOTE_PUT:
	case REMOTE_POST:
		remote_set_body(h, x);
		break;
	case REMOTE_DELETE:
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
		break;
	case REMOTE_GET:
		break;
	}
	if (!x->ranged)
		return;
	if (x->want > 0)
		snprintf(range, sizeof(x->range), "%lld-%lld", (long long)x->start,
			 (long long)x->start + (long long)x->want - 1);
	else
		snprintf(range, sizeof(x->range), "%lld-", (long long)x->start);
	curl_easy_setopt(h, CURLOPT_RANGE, range);
}

static void remote_save_url(CURL *h, struct remote_resp *resp)
{
	char *url = NULL;

	free(resp->effective_url);
	resp->effective_url = NULL;
	if (curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK && url)
		resp->effective_url = strdup(url);
}

/*
 * @headers and this attempt's signature (remote_opts.sign), in a new list
 * *out; 0, or a negated errno (the signer's, or -ENOMEM).
 */
static int remote_sign(struct remote *r, struct remote_xfer *x, struct curl_slist *headers,
		       struct curl_slist **out)
{
	char *lines[REMOTE_SIGN_MAX] = { NULL }, range[80];
	struct curl_slist *list = NULL, *next;
	int n, ret = 0;

	if (x->range[0])
		snprintf(range, sizeof(range), "bytes=%s", x->range);
	n = r->sign(r->sign_arg, remote_method_name[x->req->method], x->req->url,
		    x->req->headers, x->range[0] ? range : NULL, lines);
	if (n < 0)
		return n;
	for (struct curl_slist *h = headers; h && ret == 0; h = h->next)
		if ((next = curl_slist_append(list, h->data)))
			list = next;
		else
			ret = -ENOMEM;
	for (int i = 0; i < n && i < REMOTE_SIGN_MAX; i++) {
		if (ret == 0 && lines[i] && (next = curl_slist_append(list, lines[i])))
			list = next;
		else if (ret == 0)
			ret = -ENOMEM;
		free(lines[i]);
	}
	if (ret < 0)
		curl_slist_free_all(list);
	else
		*out = list;
	return ret;
}

/* Runs one attempt on @h; returns the curl code (the status is in resp). */
static int remote_attempt(struct remote *r, CURL *h, struct remote_xfer *x,
			  struct curl_slist *headers)
{
	struct curl_slist *signed_headers = NULL;
	CURLcode code;

	x->errbuf[0] = '\0';
	x->abort_errno = 0;
	x->enough = false;
	x->overflow = false;
	x->body_pos = 0;
	x->resp->body_len = 0;		/* an error body is the last attempt's */
	x->resp->range_ignored = false;
	if (x->resp->body)
		x->resp->body[0] = '\0';
	/* FTP has no status: a body is the file's (206 to a range, so none looks ignored) */
	remote_new_response(x->resp, r->ftp ? (x->ranged ? 206 : 200) : 0);
	curl_easy_reset(h);
	remote_set_common(r, h, x);
	remote_set_method(h, x);
	if (r->sign) {
		int ret = remote_sign(r, x, headers, &signed_headers);

		if (ret < 0) {
			x->abort_errno = -ret;
			return CURLE_ABORTED_BY_CALLBACK;
		}
		headers = signed_headers;
	}
	if (headers)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	code = curl_easy_perform(h);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(signed_headers);
	/* what never reached a server is no request: no address, nothing listening */
	if (r->requests && code != CURLE_COULDNT_RESOLVE_HOST && code != CURLE_COULDNT_CONNECT &&
	    code != CURLE_COULDNT_RESOLVE_PROXY)
		atomic_fetch_add(r->requests, 1);
	remote_save_url(h, x->resp);
	if (code == CURLE_WRITE_ERROR && x->enough)
		code = CURLE_OK;
	return code;
}

/* ---- retries ---- */

/*
 * Sets up the next attempt: a transfer into a buffer or a sink that already
 * delivered bytes asks only for the rest; one into resp->body starts over.
 * Returns false when nothing is left to ask for.
 */
static bool remote_next_attempt(struct remote_xfer *x)
{
	const struct remote_req *req = x->req;
	size_t got = x->resp->received;
	bool streamed = req->buf || req->sink;

	if (!streamed)
		got = 0;
	x->start = req->range_off + (off_t)got;
	x->ranged = req->method == REMOTE_GET && (req->range_len > 0 || x->start > 0);
	x->want = req->range_len > 0 ? req->range_len - got : 0;
	return !(req->range_len > 0 && x->want == 0);
}

/* The errno of a finished attempt. */
static int remote_result(const struct remote_xfer *x, int code)
{
	if (code == CURLE_WRITE_ERROR || code == CURLE_ABORTED_BY_CALLBACK ||
	    code == CURLE_READ_ERROR)
		return x->abort_errno ? -x->abort_errno : -EIO;
	return -remote_errno(code, x->resp->status);
}

/* An answer that is news to the caller, not a fault: no such file, a range past the end. */
static bool remote_quiet(int code, long status)
{
	if (code == CURLE_REMOTE_FILE_NOT_FOUND || code == CURLE_BAD_DOWNLOAD_RESUME ||
	    code == CURLE_REMOTE_ACCESS_DENIED)	/* FTP: 550, REST past the end, CWD refused */
		return true;
	return code == CURLE_OK &&
	       (status == 404 || status == 410 || status == 416 || status == 412);
}

static int remote_run(struct remote *r, CURL *h, struct remote_xfer *x,
		      struct curl_slist *headers)
{
	int code = CURLE_OK, ret = 0;

	for (long attempt = 0; remote_next_attempt(x); attempt++) {
		code = remote_attempt(r, h, x, headers);
		ret = remote_result(x, code);
		if (ret == 0 || x->abort_errno || !remote_retryable(code, x->resp->status) ||
		    attempt >= r->retries || x->listed > 0)
			break;
		if (attempt == 0)
			remote_log(r, MLFS_LOG_WARN, x, code, x->resp->status, ", retrying");
		backoff_sleep(&BACKOFF_REQUEST, attempt);
	}
	if (ret < 0 && x->abort_errno == ECANCELED)	/* the caller's sink stopped it */
		remote_log(r, MLFS_LOG_DEBUG, x, code, x->resp->status, "");
	else if (ret < 0)
		remote_log(r, remote_quiet(code, x->resp->status) ? MLFS_LOG_DEBUG : MLFS_LOG_ERR,
			   x, code, x->resp->status, "");
	return ret;
}

int remote_do(struct remote *r, const struct remote_req *req, struct remote_resp *resp)
{
	struct remote_xfer x = { .req = req, .resp = resp };
	struct curl_slist *headers = NULL;
	CURL *h;
	int ret;

	assert(r && req && req->url && resp);
	memset(resp, 0, sizeof(*resp));
	remote_new_response(resp, 0);
	x.max_body = req->max_body > 0 ? req->max_body : REMOTE_BODY_DEFAULT;
	ret = remote_headers(r, req, &headers);
	if (ret < 0)
		return ret;
	/*
	 * A listing (FTP's wildcard transfer) gets a handle of its own, dropped
	 * after: libcurl 7.88 leaks every entry of a listing made by a handle
	 * that ran another transfer before (curl_easy_reset between them), so
	 * a pooled handle would leak a folder's entries at each listing.
	 */
	h = req->list ? curl_easy_init() : remote_handle_get(r);
	if (!h) {
		curl_slist_free_all(headers);
		return -ENOMEM;
	}
	ret = remote_run(r, h, &x, headers);
	if (req->list)
		curl_easy_cleanup(h);
	else
		remote_handle_put(r, h);
	curl_slist_free_all(headers);
	return ret;
}
