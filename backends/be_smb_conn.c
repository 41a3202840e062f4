/*
 * be_smb_conn.c - how the SMB backend reaches its server: the pool of
 * libsmbclient contexts, the process-wide lock around the library, the
 * credentials it asks for (be_smb_auth), the address and the URL of a path
 * (be_smb_url), the mapping of libsmbclient's errno (be_smb_errno), and the
 * retry loops every call goes through (be_smb_call on a path, be_smb_file_io
 * on an open file).
 *
 * A path of the datastore is a URL smb://HOST/SHARE/ROOT/PATH, each
 * component percent-encoded; libsmbclient decodes it again.  The URL always
 * starts with the root, so nothing above it can be named.  A context is
 * made lazily, told the port, the timeout and how to log in, and touches
 * the network only when first used.  A transport failure (refused, reset,
 * timed out, ...) frees that context and the call is retried on a fresh
 * one, up to `retries` times with the request backoff (backoff.h), so the same mount works
 * again after the server restarts; an open file whose connection died is
 * reopened by URL.  What still fails is EIO (ETIMEDOUT when the server did
 * not answer in time, as over NFS and HTTP), logged here once, after the
 * retries; a refused login is EACCES, logged once per datastore.  The
 * password is only copied into the buffers of the auth callback, never
 * logged.
 *
 * Not here: what each call does on the share, opening and closing files,
 * checking a datastore's keys and the ops table (be_smb.c).
 *
 * Threading: a libsmbclient context is not thread-safe; the pool (a
 * mutex-guarded array of at most BE_SMB_POOL_MAX idle contexts) lends one
 * to one call at a time, and its mutex is never held across I/O.  Every
 * call into the library also holds be_smb_lib, one recursive lock for the
 * whole process, held across network I/O (bounded by `timeout`) but never
 * across a backoff sleep.  An open file's mutex is taken in be_smb_file_io,
 * before be_smb_lib, and held across its retries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libsmbclient.h>

#include "backoff.h"
#include "be_smb_int.h"
#include "log.h"
#include "path.h"

#define BE_SMB_PORT		445

/*
 * The lock around every call into libsmbclient, in every datastore.  The
 * library forces it: Debian's libsmbclient 4.17 keeps its talloc stack
 * frames in one process-wide stack (smbc_thread_posix is not exported), so
 * two threads inside it at once, even on different contexts, corrupt each
 * other's frames and abort.  Recursive: freeing a broken context happens
 * inside a locked section.  It is held across network I/O (bounded by the
 * timeout), never across a backoff sleep; readdir's fill callbacks run
 * under it, on the listing libsmbclient fetched at opendir (fill only adds
 * to fs/'s buffer and never calls back into this backend).
 */
static pthread_mutex_t be_smb_lib = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

void be_smb_lib_lock(void)
{
	pthread_mutex_lock(&be_smb_lib);
}

void be_smb_lib_unlock(void)
{
	pthread_mutex_unlock(&be_smb_lib);
}

/* ---- errors ---- */

int be_smb_errno(int err)
{
	switch (err) {
	case 0:
	case ECONNREFUSED:
	case ECONNRESET:
	case ECONNABORTED:
	case ENOTCONN:
	case EPIPE:
	case EHOSTUNREACH:
	case EHOSTDOWN:
	case ENETUNREACH:
	case ENETDOWN:
		return -EIO;
	case ETIMEDOUT:
		return -ETIMEDOUT;	/* as libnfs's and curl's timeouts */
	case EPERM:
		return -EACCES;
	default:
		return -err;
	}
}

bool be_smb_transient(int err)
{
	int mapped = be_smb_errno(err);

	return mapped == -EIO || mapped == -ETIMEDOUT;
}

/* The raw, negated errno a failed libsmbclient call left (never 0). */
int be_smb_raw(void)
{
	return errno ? -errno : -EIO;
}

/*
 * Turns a raw failure of @what on @path into the errno returned, and logs
 * what a user must act on: refused access once per datastore, a server
 * out of reach each time.  libsmbclient 4.17 answers a refused login with
 * EACCES (older ones EPERM), as it does a file the user may not open: the
 * one log line names both causes.
 */
static int be_smb_fail(struct be_smb *sb, int ret, const char *what, const char *path)
{
	if (ret >= 0)
		return ret;
	if ((-ret == EPERM || -ret == EACCES) && !atomic_exchange(&sb->login_logged, true))
		log_err("datastore %s: //%s:%u/%s refused access to user %s (%s /%s): check "
			"username and password (or password_file), and the share's permissions",
			sb->base.name, sb->addr.host, sb->addr.port, sb->addr.share,
			sb->user ? sb->user : "(default)", what, path);
	else if (be_smb_transient(-ret))
		log_warn("datastore %s: %s /%s: //%s:%u: %s (after %d tries)", sb->base.name,
			 what, path, sb->addr.host, sb->addr.port, strerror(-ret), sb->retries + 1);
	else if (ret != -ENOENT)
		log_debug("datastore %s: %s /%s: %s", sb->base.name, what, path, strerror(-ret));
	return be_smb_errno(-ret);
}

/* ---- addresses and URLs ---- */

/* Splits "host" or "host:port"; returns 0 or -EINVAL. */
int be_smb_parse_address(const char *v, char **host, unsigned int *port)
{
	const char *colon = strchr(v, ':');
	char *end;
	unsigned long p = BE_SMB_PORT;

	if (colon) {
		if (!colon[1] || strchr(colon + 1, ':'))
			return -EINVAL;
		errno = 0;
		p = strtoul(colon + 1, &end, 10);
		if (*end || errno || p < 1 || p > 65535 || colon[1] < '0' || colon[1] > '9')
			return -EINVAL;
	}
	if (colon == v || !*v)
		return -EINVAL;
	*host = colon ? strndup(v, (size_t)(colon - v)) : strdup(v);
	*port = (unsigned int)p;
	return *host ? 0 : -ENOMEM;
}

/* @v without '/' at either end (a malloc'd copy). */
static char *be_smb_trim_slashes(const char *v)
{
	size_t len;

	while (*v == '/')
		v++;
	len = strlen(v);
	while (len > 0 && v[len - 1] == '/')
		len--;
	return strndup(v, len);
}

int be_smb_addr_init(struct be_smb_addr *a, const struct datastore_config *cfg)
{
	const char *address = config_get(cfg, "address", NULL);
	const char *share = config_get(cfg, "share", NULL);
	const char *root = config_get(cfg, "root", NULL);
	int ret;

	memset(a, 0, sizeof(*a));
	if (!address || !share || !*share || strpbrk(share, "/\\") ||
	    (root && path_has_dotdot(root)))
		return -EINVAL;
	ret = be_smb_parse_address(address, &a->host, &a->port);
	if (ret < 0)
		return ret;
	a->share = strdup(share);
	a->root = be_smb_trim_slashes(root ? root : "");
	if (!a->share || !a->root) {
		be_smb_addr_free(a);
		return -ENOMEM;
	}
	return 0;
}

void be_smb_addr_free(struct be_smb_addr *a)
{
	free(a->host);
	free(a->share);
	free(a->root);
	memset(a, 0, sizeof(*a));
}

/* Appends @s percent-encoded at @out; '/' is kept when @keep_slash. Returns the end. */
static char *be_smb_encode(char *out, const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p) || (keep_slash && *p == '/')) {
			*out++ = (char)*p;
			continue;
		}
		*out++ = '%';
		*out++ = hex[*p >> 4];
		*out++ = hex[*p & 15];
	}
	return out;
}

char *be_smb_url(const struct be_smb_addr *a, const char *path)
{
	size_t len = strlen("smb:///") + strlen(a->host) +
		     3 * (strlen(a->share) + strlen(a->root) + strlen(path)) + 3;
	char *url = malloc(len), *p;

	if (!url)
		return NULL;
	p = url + sprintf(url, "smb://%s/", a->host);
	p = be_smb_encode(p, a->share, false);
	if (a->root[0]) {
		*p++ = '/';
		p = be_smb_encode(p, a->root, true);
	}
	if (path[0]) {
		*p++ = '/';
		p = be_smb_encode(p, path, true);
	}
	*p = '\0';
	return url;
}

/* ---- the context pool ---- */

static void be_smb_copy(char *dst, int size, const char *src)
{
	size_t n;

	if (!src || size <= 0)
		return;
	n = strnlen(src, (size_t)size - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* libsmbclient asks for credentials here; the backend is the context's user data. */
static void be_smb_auth(SMBCCTX *ctx, const char *srv, const char *shr, char *wg, int wglen,
			char *un, int unlen, char *pw, int pwlen)
{
	struct be_smb *sb = smbc_getOptionUserData(ctx);

	(void)srv;
	(void)shr;
	be_smb_copy(wg, wglen, sb->workgroup);
	be_smb_copy(un, unlen, sb->user);
	be_smb_copy(pw, pwlen, sb->password ? sb->password : "");
}

/* A new context; no network until it is used. */
static SMBCCTX *be_smb_ctx_new(struct be_smb *sb)
{
	SMBCCTX *ctx = smbc_new_context();

	if (!ctx)
		return NULL;
	smbc_setDebug(ctx, 0);
	smbc_setOptionDebugToStderr(ctx, 1);
	smbc_setOptionUserData(ctx, sb);
	smbc_setFunctionAuthDataWithContext(ctx, be_smb_auth);
	smbc_setPort(ctx, (uint16_t)sb->addr.port);
	smbc_setTimeout(ctx, sb->timeout_ms);
	smbc_setOptionNoAutoAnonymousLogin(ctx, 1);
	smbc_setOptionUseKerberos(ctx, 0);
	smbc_setOptionUseCCache(ctx, 0);
	if (!smbc_init_context(ctx)) {
		smbc_free_context(ctx, 0);
		return NULL;
	}
	return ctx;
}

static int be_smb_ctx_get(struct be_smb *sb, SMBCCTX **out)
{
	SMBCCTX *ctx = NULL;

	pthread_mutex_lock(&sb->lock);
	if (sb->n_idle > 0)
		ctx = sb->idle[--sb->n_idle];
	pthread_mutex_unlock(&sb->lock);
	if (!ctx) {
		be_smb_lib_lock();
		ctx = be_smb_ctx_new(sb);
		be_smb_lib_unlock();
	}
	*out = ctx;
	return ctx ? 0 : -ENOMEM;
}

/* Gives @ctx back to the pool, or frees it when @broken or the pool is full. */
void be_smb_ctx_put(struct be_smb *sb, SMBCCTX *ctx, bool broken)
{
	SMBCCTX *dead[BE_SMB_POOL_MAX + 1];
	unsigned int n = 0;

	if (!ctx)
		return;
	pthread_mutex_lock(&sb->lock);
	if (!broken && sb->n_idle < BE_SMB_POOL_MAX) {
		sb->idle[sb->n_idle++] = ctx;
		ctx = NULL;
	} else if (broken) {
		/* the idle ones reach the same server: a restart broke them too, and a retry
		 * taking one of them would fail again */
		while (sb->n_idle)
			dead[n++] = sb->idle[--sb->n_idle];
	}
	pthread_mutex_unlock(&sb->lock);
	if (ctx)
		dead[n++] = ctx;
	for (unsigned int i = 0; i < n; i++) {
		be_smb_lib_lock();	/* not the pool's lock: it may talk to the server */
		smbc_free_context(dead[i], 1);
		be_smb_lib_unlock();
	}
}

/*
 * Runs @fn on the URL of @path with a context from the pool, retrying a
 * transport failure on a fresh context; returns >= 0 or a mapped errno.
 */
int be_smb_call(struct be_smb *sb, const char *what, const char *path, be_smb_fn *fn,
		void *arg)
{
	char *url = be_smb_url(&sb->addr, path);
	SMBCCTX *ctx;
	int ret = -ENOMEM;

	for (int attempt = 0; url; attempt++) {
		ret = be_smb_ctx_get(sb, &ctx);
		if (ret < 0)
			break;
		be_smb_lib_lock();
		errno = 0;
		backend_request(&sb->base);
		ret = fn(ctx, url, arg);
		be_smb_ctx_put(sb, ctx, ret < 0 && be_smb_transient(-ret));
		be_smb_lib_unlock();
		if (ret >= 0 || !be_smb_transient(-ret) || attempt >= sb->retries)
			break;
		backoff_sleep(&BACKOFF_REQUEST, attempt);
	}
	free(url);
	return be_smb_fail(sb, ret, what, path);
}

/* ---- open files ---- */

/* Opens f->url on a context from the pool (one try); 0 or a raw negated errno. */
static int be_smb_file_attach(struct be_smb *sb, struct be_smb_file *f)
{
	int ret = be_smb_ctx_get(sb, &f->ctx);

	if (ret < 0)
		return ret;
	errno = 0;
	backend_request(&sb->base);
	f->fh = smbc_getFunctionOpen(f->ctx)(f->ctx, f->url, f->flags, f->mode);
	if (f->fh) {
		f->flags &= ~(O_CREAT | O_EXCL | O_TRUNC);	/* a reopen must not redo them */
		return 0;
	}
	ret = be_smb_raw();
	be_smb_ctx_put(sb, f->ctx, be_smb_transient(-ret));
	f->ctx = NULL;
	return ret;
}

/* Drops an open file's dead connection; the next call reopens it. */
static void be_smb_file_detach(struct be_smb *sb, struct be_smb_file *f)
{
	be_smb_ctx_put(sb, f->ctx, true);	/* closes f->fh with it */
	f->ctx = NULL;
	f->fh = NULL;
}

/*
 * Runs @fn on open file @f under its lock, (re)opening it first when it has
 * no connection, and retrying a transport failure on a fresh context.
 */
ssize_t be_smb_file_io(struct be_smb_file *f, const char *what, be_smb_file_fn *fn,
		       void *arg)
{
	struct be_smb *sb = be_smb(f->base.be);
	ssize_t ret;

	pthread_mutex_lock(&f->lock);
	for (int attempt = 0;; attempt++) {
		be_smb_lib_lock();
		ret = f->fh ? 0 : be_smb_file_attach(sb, f);
		if (ret == 0) {
			errno = 0;
			backend_request(&sb->base);
			ret = fn(f, arg);
		}
		if (ret < 0 && be_smb_transient((int)-ret))
			be_smb_file_detach(sb, f);
		be_smb_lib_unlock();
		if (ret >= 0 || !be_smb_transient((int)-ret))
			break;
		if (attempt >= sb->retries)
			break;
		backoff_sleep(&BACKOFF_REQUEST, attempt);
	}
	pthread_mutex_unlock(&f->lock);
	return ret < 0 ? be_smb_fail(sb, (int)ret, what, f->path) : ret;
}
