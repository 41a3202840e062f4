/*
 * be_nfs_conn.c - how the NFS backend reaches its server: the pool of libnfs
 * contexts (each one mounted connection), making and mounting a context,
 * the mapping of libnfs's returns to errno, telling a broken connection from
 * the server's answer, and the retry loops with their backoff and breaker
 * that every call goes through (be_nfs_call on a path, be_nfs_file_call on
 * an open file).
 *
 * Connections: a call takes an idle context from the pool, or makes and
 * mounts a new one, and gives it back after; at most BE_NFS_IDLE_MAX idle
 * ones are kept.  No server is contacted at create: a server that is down
 * at mount time only makes the calls fail with EIO until it is back.  A
 * call that fails on the connection (be_nfs_is_transport) destroys that
 * context, with every idle one, and is tried again on a fresh one, up to
 * `retries` times with the request backoff (backoff.h), so the same mount works again after
 * the server restarts.  Every RPC waits at most `timeout` seconds
 * (nfs_set_timeout); libnfs's own reconnecting is off, so a dead server is
 * an error and not a wait.  A call that gave up opens a breaker: for a
 * second every call fails at once with EIO, so one user operation (several
 * calls) on a hung server costs one timeout x (retries + 1), not several.
 * An open file whose connection broke is opened again on a fresh context
 * (NFSv3 file handles outlive the server's restarts).
 *
 * Not here: what a call does on the export, open files' lifetimes and the
 * ops table (be_nfs.c); checking a datastore's keys (be_nfs.c).  Errors are
 * mapped and logged here, once, after the retries.
 *
 * Threading: a libnfs context is not thread-safe and is used by one call
 * at a time.  The pool's mutex guards only the idle list and is never held
 * across I/O; an open file's mutex is held across that file's RPCs (taken
 * in be_nfs_file_call) and serializes the calls on its one context.  The
 * breaker's deadline is an atomic.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nfsc/libnfs.h>

#include "backoff.h"
#include "be_nfs_int.h"
#include "log.h"
#include "mono.h"

#define BE_NFS_IDLE_MAX		8	/* idle contexts kept in the pool */
#define BE_NFS_DOWN_NS		1000000000ll	/* fail fast this long after giving up */

/* ---- errors ---- */

int be_nfs_is_transport(int ret)
{
	switch (-ret) {
	case EFAULT:	/* libnfs 4.0: an RPC that failed (RPC_STATUS_ERROR) */
	case EINTR:	/* libnfs 4.0: an RPC cancelled, or timed out */
	case EIO:
	case ENOTCONN:
	case ECONNRESET:
	case ECONNREFUSED:
	case ECONNABORTED:
	case EPIPE:
	case ETIMEDOUT:
	case EHOSTUNREACH:
	case ENETUNREACH:
		return 1;
	default:
		return 0;
	}
}

int be_nfs_errno(int ret)
{
	if (ret >= 0)
		return ret;
	if (ret == -ETIMEDOUT)
		return -ETIMEDOUT;
	if (be_nfs_is_transport(ret) || ret < -4095)
		return -EIO;
	return ret;
}

/* ---- the pool of connections ---- */

/* Makes and mounts a context; returns 0 or a libnfs return. */
static int be_nfs_ctx_new(struct be_nfs *nb, struct be_nfs_ctx **out)
{
	struct be_nfs_ctx *c = calloc(1, sizeof(*c));
	struct nfs_url *url;
	int ret;

	if (!c)
		return -ENOMEM;
	c->nfs = nfs_init_context();
	if (!c->nfs) {
		free(c);
		return -ENOMEM;
	}
	nfs_set_timeout(c->nfs, nb->timeout_ms);
	nfs_set_autoreconnect(c->nfs, 0);
	nfs_set_dircache(c->nfs, 0);
	url = nfs_parse_url_dir(c->nfs, nb->url);
	if (!url) {
		ret = -EINVAL;
	} else {
		backend_request(&nb->base);
		ret = nfs_mount(c->nfs, url->server, url->path);
		nfs_destroy_url(url);
	}
	if (ret < 0) {
		log_debug("datastore %s: mounting %s:%s: %s", nb->base.name, nb->address,
			  nb->export, nfs_get_error(c->nfs));
		nfs_destroy_context(c->nfs);
		free(c);
		/* A refused mount is the export's answer; anything else is the way there. */
		return ret == -EACCES || ret == -ENOENT || ret == -EPERM ? ret : -EIO;
	}
	*out = c;
	return 0;
}

int be_nfs_ctx_get(struct be_nfs *nb, struct be_nfs_ctx **out)
{
	struct be_nfs_ctx *c;

	pthread_mutex_lock(&nb->lock);
	c = nb->idle;
	if (c) {
		nb->idle = c->next;
		nb->n_idle--;
	}
	pthread_mutex_unlock(&nb->lock);
	if (c) {
		*out = c;
		return 0;
	}
	return be_nfs_ctx_new(nb, out);
}

void be_nfs_ctx_free(struct be_nfs_ctx *c)
{
	if (c) {
		nfs_destroy_context(c->nfs);
		free(c);
	}
}

/*
 * Gives @c back, or destroys it when enough are idle.  A @broken one is
 * destroyed with every idle one: they went to the same server, which has
 * most likely gone away or restarted.
 */
void be_nfs_ctx_put(struct be_nfs *nb, struct be_nfs_ctx *c, bool broken)
{
	struct be_nfs_ctx *stale = NULL;

	pthread_mutex_lock(&nb->lock);
	if (broken) {
		stale = nb->idle;
		nb->idle = NULL;
		nb->n_idle = 0;
	} else if (nb->n_idle < BE_NFS_IDLE_MAX) {
		c->proven = true;
		c->next = nb->idle;
		nb->idle = c;
		nb->n_idle++;
		c = NULL;
	}
	pthread_mutex_unlock(&nb->lock);
	be_nfs_ctx_free(c);
	while (stale) {
		c = stale;
		stale = c->next;
		be_nfs_ctx_free(c);
	}
}

/*
 * The breaker: a call that gave up on the connection after its retries,
 * having waited at least one timeout (a hung server, not a refused
 * connection, which fails at once anyway), makes the calls of the next
 * second fail at once with EIO, so that one user operation (a lookup, an
 * open, a read: several calls) on a hung server costs one timeout x
 * (retries + 1), not several.
 */
bool be_nfs_is_down(struct be_nfs *nb)
{
	return mono_ns() < atomic_load(&nb->down_until);
}

/* Opens the breaker when a call failed on the connection after waiting a timeout or more. */
void be_nfs_mark_down(struct be_nfs *nb, int ret, int64_t started)
{
	if (be_nfs_is_transport(ret) &&
	    mono_ns() - started >= (int64_t)nb->timeout_ms * 1000000ll)
		atomic_store(&nb->down_until, mono_ns() + BE_NFS_DOWN_NS);
}

/*
 * Whether a call that returned @ret is tried again, after the backoff.  A
 * connection made before this call (@proven) that failed fast had died
 * while idle (a server restart): trying a fresh one costs no attempt.
 * Otherwise `retries` attempts after the first.
 */
bool be_nfs_again(struct be_nfs *nb, int ret, bool proven, int64_t t0, int *attempt)
{
	if (!be_nfs_is_transport(ret))
		return false;
	if (proven && mono_ns() - t0 < (int64_t)nb->timeout_ms * 1000000ll)
		return true;
	if (*attempt >= nb->retries)
		return false;
	backoff_sleep(&BACKOFF_REQUEST, (*attempt)++);
	return true;
}

/* Logs a failed call once: what fails on the way to the server as an error. */
void be_nfs_log(struct be_nfs *nb, const char *what, const char *path, int ret)
{
	if (ret == -EIO || ret == -ETIMEDOUT)
		log_err("datastore %s: %s %s on %s:%s: %s", nb->base.name, what, path,
			nb->address, nb->export, strerror(-ret));
	else if (ret < 0)
		log_debug("datastore %s: %s %s: %s", nb->base.name, what, path, strerror(-ret));
}

/* ---- calls on paths ---- */

/*
 * Runs @fn on the full path of @path with a context from the pool, again
 * on a fresh one after a broken connection.  Returns our errno.
 */
int be_nfs_call(struct be_nfs *nb, const char *path, be_nfs_fn *fn,
		struct be_nfs_args *a, const char *what)
{
	struct be_nfs_ctx *c;
	int64_t started;
	char *full;
	int ret = be_nfs_join(&full, nb->root, path);

	if (ret < 0)
		return ret;
	started = mono_ns();
	for (int attempt = 0; !(ret = be_nfs_is_down(nb) ? -EIO : 0);) {
		int64_t t0 = mono_ns();
		bool proven = false;

		ret = be_nfs_ctx_get(nb, &c);
		if (ret == 0) {
			proven = c->proven;
			backend_request(&nb->base);
			ret = fn(c->nfs, full, a);
			be_nfs_ctx_put(nb, c, be_nfs_is_transport(ret));
		}
		if (!be_nfs_again(nb, ret, proven, t0, &attempt))
			break;
	}
	be_nfs_mark_down(nb, ret, started);
	ret = be_nfs_errno(ret);
	be_nfs_log(nb, what, full, ret);
	free(full);
	return ret;
}

/* ---- open files ---- */

/* Closes the file's handle and drops its context (broken: destroyed). */
void be_nfs_file_drop(struct be_nfs_file *f, bool broken)
{
	if (f->fh)
		nfs_close(f->ctx->nfs, f->fh);
	f->fh = NULL;
	if (f->ctx)
		be_nfs_ctx_put(be_nfs(f->base.be), f->ctx, broken);
	f->ctx = NULL;
}

/* Opens the file again on a fresh context after its connection broke. */
static int be_nfs_file_reopen(struct be_nfs_file *f)
{
	struct be_nfs_ctx *c;
	int ret = be_nfs_ctx_get(be_nfs(f->base.be), &c);

	if (ret < 0)
		return ret;
	backend_request(f->base.be);
	ret = nfs_open2(c->nfs, f->path, f->flags | O_NOFOLLOW, 0, &f->fh);
	if (ret < 0) {
		f->fh = NULL;
		be_nfs_ctx_put(be_nfs(f->base.be), c, be_nfs_is_transport(ret));
		return ret;
	}
	f->ctx = c;
	return 0;
}

/* Runs @fn on the file's context under its lock, reopening after a broken connection. */
int be_nfs_file_call(struct be_nfs_file *f, be_nfs_file_fn *fn, void *arg,
		     const char *what)
{
	struct be_nfs *nb = be_nfs(f->base.be);
	int64_t started;
	int ret;

	pthread_mutex_lock(&f->lock);
	started = mono_ns();
	for (int attempt = 0; !(ret = be_nfs_is_down(nb) ? -EIO : 0);) {
		int64_t t0 = mono_ns();
		bool proven = f->ctx != NULL;	/* this file's own, used before */

		ret = f->ctx ? 0 : be_nfs_file_reopen(f);
		if (ret == 0) {
			backend_request(f->base.be);
			ret = fn(f, f->ctx->nfs, arg);
		}
		if (!be_nfs_is_transport(ret))
			break;
		be_nfs_file_drop(f, true);
		if (!be_nfs_again(nb, ret, proven, t0, &attempt))
			break;
	}
	pthread_mutex_unlock(&f->lock);
	be_nfs_mark_down(nb, ret, started);
	ret = be_nfs_errno(ret);
	be_nfs_log(nb, what, f->path, ret);
	return ret;
}
