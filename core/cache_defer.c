/*
 * cache_defer.c - small objects written behind: an object of at most one
 * block that is not on disk yet is fetched whole into memory at its first
 * read, served from there to every open of this process, and written to
 * the cache's files by a writer thread at nice 19 after its first open
 * closed.
 *
 * Why: making an object's two files (create, size, rename, lock, map) and
 * writing its data cost about 0.3 ms of CPU per object, as much as
 * fetching a 100 KiB file from an NFS server on the same host; done in the
 * reader's open and read, it made a first epoch of small files slower
 * through the cache than straight from the server.  The writer waits while
 * readers keep adding objects (until none came for 100 ms, or three
 * quarters of the budget is held), so that work uses the CPU the readers
 * leave.
 *
 * The objects of a struct cache held here are in a table by hash, each
 * with its bytes once fetched, within a budget (the hot-run budget: 256 MiB
 * or an eighth of the cache, and at most 4,096 objects, about a second of
 * writing); an object that does not fit, or whose map is already on disk,
 * takes the usual path (cache.c).  An object stays in the table until the
 * writer has written it, so an open meanwhile is served from memory, and
 * one after it finds it on disk.  Another process sharing the cache does
 * not see this memory: it may fetch the object too, and whichever writes
 * second finds its block present and writes nothing.  cache_drain makes
 * the writer write at once and waits for it; cache_destroy drains before
 * it stops, so a daemon that exits leaves every object it read on disk.  A
 * fetch that fails keeps nothing: the next read tries again.
 *
 * Threading: c->dlock guards the table, the queue and each entry's state;
 * an entry's bytes never change once ready and are freed only when no open
 * and no writer holds it (refs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cache.h"
#include "log.h"

#include "cache_int.h"
#include "mono.h"

#define CACHE_DEFER_QUIET_NS	100000000ll	/* no object added this long: write */
#define CACHE_DEFER_MAX		4096		/* objects held at most: what a daemon that
						 * exits writes first, about a second */

struct cache_defer {
	struct cache_defer *next;	/* in its slot of the table */
	struct cache_defer *qnext;	/* in the writer's queue */
	char hash[CACHE_HASH_LEN + 1];
	char *key;
	uint64_t size;
	unsigned char *buf;		/* the whole object, once ready */
	int refs;			/* opens, and the writer from queueing to written */
	bool fetching, ready, queued;
};

static struct cache_defer **cache_defer_slot(struct cache *c, const char *hash)
{
	return &c->dtab[strtoul((char[5]){ hash[0], hash[1], hash[2], hash[3], '\0' }, NULL,
				16) % CACHE_DEFER_SLOTS];
}

/* The entry of @hash and @key, or NULL.  dlock held. */
static struct cache_defer *cache_defer_find(struct cache *c, const char *hash, const char *key)
{
	for (struct cache_defer *d = *cache_defer_slot(c, hash); d; d = d->next)
		if (strcmp(d->hash, hash) == 0 && strcmp(d->key, key) == 0)
			return d;
	return NULL;
}

/* Takes @d out of the table, if it is there.  dlock held. */
static void cache_defer_unlink(struct cache *c, struct cache_defer *d)
{
	for (struct cache_defer **p = cache_defer_slot(c, d->hash); *p; p = &(*p)->next)
		if (*p == d) {
			*p = d->next;
			d->next = NULL;
			return;
		}
}

/* Drops a reference; the last one takes @d out of the table and frees it.  dlock held. */
static void cache_defer_put(struct cache *c, struct cache_defer *d)
{
	if (--d->refs > 0)
		return;
	cache_defer_unlink(c, d);
	c->defer_bytes -= d->size;
	c->defer_count--;
	free(d->buf);
	free(d->key);
	free(d);
}

/*
 * Points f->dfr at the entry of @f's object, taking a reference, or, when
 * there is none, at @fresh put into the table if the budget has room for
 * it.  Whether f->dfr is set.
 */
static bool cache_defer_take(struct cache_file *f, const char *key, struct cache_defer *fresh)
{
	struct cache *c = f->c;
	struct cache_defer *d;

	pthread_mutex_lock(&c->dlock);
	d = cache_defer_find(c, f->hash, key);
	if (d) {
		d->refs++;
	} else if (fresh && c->defer_bytes + f->size <= c->defer_budget &&
		   c->defer_count < CACHE_DEFER_MAX && !c->dstop) {
		d = fresh;
		d->next = *cache_defer_slot(c, f->hash);
		*cache_defer_slot(c, f->hash) = d;
		c->defer_bytes += f->size;
		c->defer_count++;
		c->dlast = mono_ns();
	}
	f->dfr = d;
	pthread_mutex_unlock(&c->dlock);
	return d != NULL;
}

bool cache_defer_open(struct cache_file *f, const char *key, int *ret)
{
	struct cache_defer *d;
	bool held;

	*ret = 0;
	if (f->size == 0 || f->size > CACHE_BLOCK || f->c->defer_budget == 0)
		return false;
	if (cache_defer_take(f, key, NULL))
		return true;
	*ret = cache_file_attach_retrying(f, key, false);	/* on disk: the usual way */
	if (*ret != -ENOENT)
		return true;
	*ret = 0;
	d = calloc(1, sizeof(*d));
	if (!d)
		return false;
	*d = (struct cache_defer){ .key = strdup(key), .size = f->size, .refs = 1 };
	memcpy(d->hash, f->hash, sizeof(d->hash));
	held = d->key && cache_defer_take(f, key, d);
	if (f->dfr != d) {		/* another open's entry, or no room */
		free(d->key);
		free(d);
	}
	return held;
}

/* Makes the object's bytes ready (fetching them if no one has): 1 if it fetched, 0, or -errno. */
static int cache_defer_fetch(struct cache_file *f)
{
	struct cache *c = f->c;
	struct cache_defer *d = f->dfr;
	unsigned char *buf;
	ssize_t n;

	pthread_mutex_lock(&c->dlock);
	while (d->fetching)
		pthread_cond_wait(&c->dcond, &c->dlock);
	if (d->ready) {
		pthread_mutex_unlock(&c->dlock);
		return 0;
	}
	d->fetching = true;
	pthread_mutex_unlock(&c->dlock);
	buf = malloc(d->size);
	n = buf ? cache_fetch_all(f, buf, d->size, 0) : -ENOMEM;
	if (n >= 0 && (uint64_t)n != d->size)
		n = -EIO;			/* the object is shorter than its size */
	pthread_mutex_lock(&c->dlock);
	d->fetching = false;
	if (n >= 0) {
		d->buf = buf;
		d->ready = true;
		atomic_fetch_add(&f->stats->bytes_fetched, d->size);
	} else {
		free(buf);
	}
	pthread_cond_broadcast(&c->dcond);
	pthread_mutex_unlock(&c->dlock);
	return n < 0 ? (int)n : 1;
}

ssize_t cache_defer_read_iov(struct cache_file *f, size_t len, off_t off, cache_use_fn *use,
			     void *arg)
{
	struct cache_defer *d = f->dfr;
	struct iovec iov;
	int ret;

	if (off < 0)
		return -EINVAL;
	if ((uint64_t)off >= d->size || len == 0) {
		use(arg, NULL, 0);
		return 0;
	}
	ret = cache_defer_fetch(f);
	if (ret < 0)
		return ret;
	if (len > d->size - (uint64_t)off)
		len = (size_t)(d->size - (uint64_t)off);
	atomic_fetch_add(ret ? &f->stats->misses : &f->stats->hits, 1);
	if (!ret)
		atomic_fetch_add(&f->stats->bytes_hit, len);
	iov = (struct iovec){ .iov_base = d->buf + off, .iov_len = len };
	use(arg, &iov, 1);
	return (ssize_t)len;
}

/* ---- writing behind ---- */

/* The fetch of the object's writing: from its bytes in memory. */
static ssize_t cache_defer_copy(void *arg, void *buf, size_t len, off_t off)
{
	struct cache_defer *d = arg;

	if ((uint64_t)off >= d->size)
		return 0;
	if (len > d->size - (uint64_t)off)
		len = (size_t)(d->size - (uint64_t)off);
	memcpy(buf, d->buf + off, len);
	return (ssize_t)len;
}

/* Writes @d's object into the cache's files, the usual way, from memory. */
static void cache_defer_write(struct cache *c, struct cache_defer *d)
{
	struct cache_stats unused = { 0 };
	struct cache_file *f;
	int ret = cache_file_open_now(c, &f, d->key, d->size, &unused, cache_defer_copy, d);

	if (ret == 0 && !f->bypass)
		ret = cache_file_fill(f, 0, f->nblocks, true);
	if (ret < 0)
		cache_warn(c, CACHE_WARN_DEFER, -ret, "cache: %s: object %s: cannot keep it (%s); "
			   "it is fetched again when read again", c->dir, d->hash, strerror(-ret));
	cache_file_close(f);
}

static void *cache_defer_writer(void *arg)
{
	struct cache *c = arg;

	setpriority(PRIO_PROCESS, (id_t)gettid(), 19);	/* this thread only: the CPU left over */
	pthread_mutex_lock(&c->dlock);
	for (;;) {
		struct cache_defer *d;

		while (!c->dqhead && !c->dstop)
			pthread_cond_wait(&c->dcond, &c->dlock);
		d = c->dqhead;
		if (!d)
			break;			/* stopping, and nothing is left to write */
		if (!c->dstop && c->dflush == 0 && c->defer_bytes <= c->defer_budget / 4 * 3 &&
		    c->defer_count <= CACHE_DEFER_MAX / 4 * 3 &&
		    mono_ns() < c->dlast + CACHE_DEFER_QUIET_NS) {
			struct timespec ts = mono_timespec(c->dlast + CACHE_DEFER_QUIET_NS);

			pthread_cond_timedwait(&c->dcond, &c->dlock, &ts);	/* readers first */
			continue;
		}
		c->dqhead = d->qnext;
		if (!c->dqhead)
			c->dqtail = NULL;
		c->dwriting = true;
		pthread_mutex_unlock(&c->dlock);
		cache_defer_write(c, d);
		pthread_mutex_lock(&c->dlock);
		c->dwriting = false;
		cache_defer_unlink(c, d);	/* the next open finds it on disk */
		cache_defer_put(c, d);
		pthread_cond_broadcast(&c->dcond);
	}
	pthread_mutex_unlock(&c->dlock);
	return NULL;
}

void cache_defer_close(struct cache_file *f)
{
	struct cache *c = f->c;
	struct cache_defer *d = f->dfr;

	pthread_mutex_lock(&c->dlock);
	if (d->ready && !d->queued && !c->dstop) {
		if (!c->dwriter_on && pthread_create(&c->dwriter, NULL, cache_defer_writer, c) == 0)
			c->dwriter_on = true;
		if (c->dwriter_on) {
			d->queued = true;
			d->refs++;
			if (c->dqtail)
				c->dqtail->qnext = d;
			else
				c->dqhead = d;
			c->dqtail = d;
			pthread_cond_broadcast(&c->dcond);
		}
	}
	cache_defer_put(c, d);
	pthread_mutex_unlock(&c->dlock);
	f->dfr = NULL;
}

void cache_drain(struct cache *c)
{
	pthread_mutex_lock(&c->dlock);
	c->dflush++;
	pthread_cond_broadcast(&c->dcond);
	while (c->dqhead || c->dwriting)
		pthread_cond_wait(&c->dcond, &c->dlock);
	c->dflush--;
	pthread_mutex_unlock(&c->dlock);
}

int cache_defer_init(struct cache *c)
{
	c->dtab = calloc(CACHE_DEFER_SLOTS, sizeof(*c->dtab));
	if (!c->dtab)
		return -ENOMEM;
	c->defer_budget = c->hot_budget;
	pthread_mutex_init(&c->dlock, NULL);
	mono_cond_init(&c->dcond);	/* the writer waits for quiet */
	return 0;
}

void cache_defer_stop(struct cache *c)
{
	if (!c->dtab)
		return;
	pthread_mutex_lock(&c->dlock);
	c->dstop = true;
	pthread_cond_broadcast(&c->dcond);
	pthread_mutex_unlock(&c->dlock);
	if (c->dwriter_on)
		pthread_join(c->dwriter, NULL);	/* after writing all it was given */
	c->dwriter_on = false;
	pthread_cond_destroy(&c->dcond);
	pthread_mutex_destroy(&c->dlock);
	free(c->dtab);
	c->dtab = NULL;
}

uint64_t cache_defer_bytes(struct cache *c)
{
	uint64_t n;

	pthread_mutex_lock(&c->dlock);
	n = c->defer_bytes;
	pthread_mutex_unlock(&c->dlock);
	return n;
}
