/*
 * cache_fetch.c - bringing an object's blocks in (cache.c says how): hot
 * runs (what one fetch brought, kept in memory for this process's readers
 * while two writer threads write it with O_DIRECT and mark its blocks), the
 * single flight of a block fetch under its OFD byte locks, and making a
 * complete object durable after its close.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "cache.h"
#include "log.h"

#include "cache_int.h"
#include "mono.h"

/* ---- hot runs ---- */

/* Frees @r, already unlinked.  Called with f->lock held or before @r is linked. */
void cache_run_free(struct cache_file *f, struct cache_run *r)
{
	atomic_fetch_sub(&f->c->hot_bytes, r->len);
	cache_buf_put(f->c, r->buf, f->run_blocks);
	free(r);
}

static void cache_run_unlink(struct cache_file *f, struct cache_run *r)
{
	for (struct cache_run **p = &f->runs; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			f->n_runs--;
			return;
		}
}

/* Frees @r once nobody replies from it, its write is over and its bytes were all read. */
void cache_run_settle(struct cache_file *f, struct cache_run *r)
{
	if (r->refs == 0 && r->written && r->used >= r->len) {
		cache_run_unlink(f, r);
		cache_run_free(f, r);
	}
}

/* Drops the oldest runs nobody uses until there is room for one more.  f->lock held. */
static void cache_runs_trim(struct cache_file *f)
{
	struct cache_run **p = &f->runs, *r;

	while ((r = *p) && f->n_runs >= CACHE_HOT_RUNS) {
		if (r->refs == 0 && r->written) {
			*p = r->next;
			f->n_runs--;
			cache_run_free(f, r);
		} else {
			p = &r->next;
		}
	}
}

/* Counts @len more bytes of hot runs if the budget has room for them. */
static bool cache_hot_reserve(struct cache *c, size_t len)
{
	uint_fast64_t held = atomic_load(&c->hot_bytes);

	do {
		if (held + len > c->hot_budget)
			return false;
	} while (!atomic_compare_exchange_weak(&c->hot_bytes, &held, held + len));
	return true;
}

/*
 * Starts a hot run for fetching blocks [b0, b1), @len bytes, or returns
 * NULL when the process holds its budget of them or the file its count:
 * that fetch goes through a plain buffer and the page cache, where its
 * readers will find it.
 */
static struct cache_run *cache_run_begin(struct cache_file *f, uint64_t b0, uint64_t b1,
					 size_t len)
{
	struct cache *c = f->c;
	struct cache_run *r, **p;

	if (!cache_hot_reserve(c, len))
		return NULL;
	r = calloc(1, sizeof(*r));
	if (r)
		*r = (struct cache_run){ .b0 = b0, .b1 = b1, .len = len,
					 .buf = cache_buf_get(c, f->run_blocks),
					 .state = CACHE_RUN_FETCHING };
	if (!r || !r->buf) {
		free(r);
		atomic_fetch_sub(&c->hot_bytes, len);
		return NULL;
	}
	pthread_mutex_lock(&f->lock);
	cache_runs_trim(f);
	if (f->n_runs >= CACHE_HOT_RUNS) {
		pthread_mutex_unlock(&f->lock);
		cache_run_free(f, r);
		return NULL;
	}
	for (p = &f->runs; *p; p = &(*p)->next)
		;
	*p = r;
	f->n_runs++;
	pthread_mutex_unlock(&f->lock);
	return r;
}

/* The fetch of @r is over: its readers may use it (@ok) or go fetch themselves. */
static void cache_run_fetched(struct cache_file *f, struct cache_run *r, bool ok)
{
	pthread_mutex_lock(&f->lock);
	r->state = ok ? CACHE_RUN_READY : CACHE_RUN_FAILED;
	if (!ok) {
		cache_run_unlink(f, r);
		cache_run_free(f, r);
	}
	pthread_cond_broadcast(&f->run_cond);
	pthread_mutex_unlock(&f->lock);
}

static void cache_run_written(struct cache_file *f, struct cache_run *r)
{
	pthread_mutex_lock(&f->lock);
	r->written = true;
	cache_run_settle(f, r);
	pthread_mutex_unlock(&f->lock);
}

/* Whether @f is being read sequentially: its read-ahead window has grown. */
static bool cache_file_streaming(struct cache_file *f)
{
	bool ret;

	pthread_mutex_lock(&f->lock);
	ret = f->window > CACHE_RA_MIN;
	pthread_mutex_unlock(&f->lock);
	return ret;
}

/* The hot run holding block @b, the oldest if several, or NULL.  f->lock held. */
struct cache_run *cache_run_find(struct cache_file *f, uint64_t b)
{
	for (struct cache_run *r = f->runs; r; r = r->next)
		if (b >= r->b0 && b < r->b1)
			return r;
	return NULL;
}

/* ---- fetching ---- */

static void cache_dio_refused(struct cache *c)
{
	if (!atomic_exchange(&c->no_dio, true))
		log_warn("cache: %s: O_DIRECT writes refused, using the page cache", c->dir);
}

/*
 * A new open file description of what @fd names, with @flags: none of
 * @fd's locks (flock, OFD) come with it.  Or -1.
 */
static int cache_reopen(int fd, int flags)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, flags | O_CLOEXEC);
}

/*
 * The data file opened O_DIRECT, for writing hot runs, opened at the first
 * such write (a file never read sequentially needs none); -1 once the
 * folder refused O_DIRECT.  Borrowed, valid until close.
 */
static int cache_dio_fd(struct cache_file *f)
{
	int fd;

	if (atomic_load(&f->c->no_dio))
		return -1;
	pthread_mutex_lock(&f->lock);
	if (f->dio_fd < 0) {
		f->dio_fd = cache_reopen(f->data_fd, O_WRONLY | O_DIRECT);
		if (f->dio_fd < 0 && errno == EINVAL)
			cache_dio_refused(f->c);
	}
	fd = f->dio_fd;
	pthread_mutex_unlock(&f->lock);
	return fd;
}

/*
 * Writes a fetched run to the data file: with O_DIRECT when @direct (its
 * readers here are answered from memory, so copying it into the page cache
 * would only cost CPU and memory), its unaligned tail through the page
 * cache.  Returns @len or -errno.
 */
static ssize_t cache_write_data(struct cache_file *f, const void *buf, size_t len, off_t off,
				bool direct)
{
	int dio_fd = direct ? cache_dio_fd(f) : -1;
	size_t al = dio_fd >= 0 ? len & ~(size_t)(CACHE_DIO_ALIGN - 1) : 0;
	ssize_t n = al ? cache_pwrite_all(dio_fd, buf, al, off) : 0;

	if (n == -EINVAL) {		/* refused after all: not again, and write it plainly */
		cache_dio_refused(f->c);
		al = 0;
		n = 0;
	}
	if (n >= 0)
		n = cache_pwrite_all(f->data_fd, (const char *)buf + al, len - al,
				     off + (off_t)al);
	return n < 0 ? n : (ssize_t)len;
}

/* Marks blocks [b0, b1) written.  Adds nothing to the usage counter. */
static void cache_mark_written(struct cache_file *f, uint64_t b0, uint64_t b1)
{
	for (uint64_t b = b0; b < b1; b++)
		__atomic_store_n(&f->map[f->hdr_len + b], 1, __ATOMIC_RELEASE);
}


/*
 * Writes hot run @r of @f, then marks its blocks and lets go of their OFD
 * locks, held by @lock_fd, which it closes.  Nobody waits for it: readers
 * of this process are answered from @r meanwhile.  A failed write leaves the
 * blocks missing, to be fetched again by whoever needs them next.
 */
static void cache_write_run(struct cache_file *f, struct cache_run *r, int lock_fd)
{
	off_t off = (off_t)(r->b0 * CACHE_BLOCK);
	ssize_t n = cache_write_data(f, r->buf, r->len, off, true);

	if (n >= 0) {
		cache_mark_written(f, r->b0, r->b1);
		cache_usage_add(f->c, r->len);
	} else {
		if (!atomic_exchange(&f->write_failed, true))
			cache_warn(f->c, CACHE_WARN_KEEP, (int)-n, "cache: %s: object %s: cannot "
				   "keep fetched blocks (%s); they are fetched again when read "
				   "again", f->c->dir, f->hash, strerror((int)-n));
		if (n == -ENOSPC || n == -EDQUOT)
			cache_evict(f->c);
	}
	cache_lock_blocks(f, lock_fd, r->b0, r->b1, F_UNLCK, false);
	close(lock_fd);
	cache_run_written(f, r);
}

/*
 * Flags a complete object whose data is synced durable, through the map
 * file (other processes see the flag in their mappings of it; they only
 * ever set the same bit).
 */
static void cache_flag_durable(int map_fd)
{
	uint32_t flags;
	off_t at = (off_t)offsetof(struct cache_map_hdr, flags);

	if (pread(map_fd, &flags, sizeof(flags), at) != sizeof(flags))
		return;
	flags |= CACHE_DURABLE;
	if (pwrite(map_fd, &flags, sizeof(flags), at) != sizeof(flags))
		log_debug("cache: cannot flag an object durable: %s", strerror(errno));
	else
		cache_seal(map_fd);
}

void cache_seal(int map_fd)
{
	if (fchmod(map_fd, S_IRUSR | S_IWUSR | CACHE_SEALED) < 0)
		log_debug("cache: cannot seal an object: %s", strerror(errno));
}

/*
 * Makes the complete objects of list @s survive a reboot, then lets go of
 * them: one of them by its fdatasync, several by one syncfs of the cache's
 * filesystem (one disk flush where a first epoch of small files closed
 * hundreds of objects meanwhile, not one flush each).
 */
static void cache_sync_objects(struct cache_sync *s)
{
	bool all = s->next && syncfs(s->data_fd) == 0;

	while (s) {
		struct cache_sync *next = s->next;

		if (all || fdatasync(s->data_fd) == 0)
			cache_flag_durable(s->map_fd);
		close(s->data_fd);
		close(s->map_fd);
		free(s);
		s = next;
	}
}

/*
 * Whether the objects waiting to be made durable are synced now: as many
 * as a batch, the oldest a second old, or the cache stopping.  qlock held.
 */
static bool cache_syncs_due(struct cache *c)
{
	return c->shead && (c->stopping || c->n_syncs >= CACHE_SYNC_BATCH ||
			    mono_ns() - c->sync_since >= CACHE_SYNC_DELAY_NS);
}

/* Waits for work: a hot run to write, or syncs due.  qlock held. */
static void cache_writer_wait(struct cache *c)
{
	while (!c->whead && !cache_syncs_due(c) && !c->stopping) {
		struct timespec ts = mono_timespec(c->sync_since + CACHE_SYNC_DELAY_NS);

		if (c->shead)
			pthread_cond_timedwait(&c->wcond, &c->qlock, &ts);
		else
			pthread_cond_wait(&c->wcond, &c->qlock);
	}
}

void *cache_writer(void *arg)
{
	struct cache *c = arg;
	struct cache_write *w;

	for (;;) {
		struct cache_sync *s = NULL;

		pthread_mutex_lock(&c->qlock);
		cache_writer_wait(c);
		w = c->whead;
		if (w && !(c->whead = w->next))
			c->wtail = NULL;
		if (!w && cache_syncs_due(c)) {	/* hot runs first: readers may wait for them */
			s = c->shead;		/* all of them, at once */
			c->shead = NULL;
			c->n_syncs = 0;
		}
		pthread_mutex_unlock(&c->qlock);
		if (s) {
			cache_sync_objects(s);
			continue;
		}
		if (!w)
			return NULL;
		cache_write_run(w->f, w->r, w->lock_fd);
		pthread_mutex_lock(&w->f->lock);
		w->f->writes--;
		pthread_mutex_unlock(&w->f->lock);
		cache_task_done(w->f);
		free(w);
	}
}

/*
 * Hands hot run @r to a writer, with its blocks' OFD locks (a duplicate of
 * @fd shares them, and keeps them when the caller closes @fd).  Returns
 * false when it cannot, and the caller writes itself.
 */
static bool cache_write_queue(struct cache_file *f, struct cache_run *r, int fd)
{
	struct cache *c = f->c;
	struct cache_write *w = malloc(sizeof(*w));
	int lock_fd = w ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;

	if (lock_fd < 0) {
		free(w);
		return false;
	}
	*w = (struct cache_write){ .f = f, .r = r, .lock_fd = lock_fd };
	pthread_mutex_lock(&f->lock);
	pthread_mutex_lock(&c->qlock);
	if (c->n_writers == 0 && cache_start_threads(c) < 0 && c->n_writers == 0) {
		pthread_mutex_unlock(&c->qlock);
		pthread_mutex_unlock(&f->lock);
		close(lock_fd);
		free(w);
		return false;
	}
	f->pending++;
	f->writes++;
	if (c->wtail)
		c->wtail->next = w;
	else
		c->whead = w;
	c->wtail = w;
	pthread_cond_signal(&c->wcond);
	pthread_mutex_unlock(&c->qlock);
	pthread_mutex_unlock(&f->lock);
	return true;
}

/*
 * Fetches blocks [b0, b1) (at most f->run_blocks), whose OFD locks the
 * caller holds on @fd and which it found missing, writes them and marks
 * them present.  For a file read sequentially the fetched bytes become a
 * hot run while there is room for one: this process's readers are answered
 * from it at once, and a writer writes it and lets go of the locks (returns
 * 1).  Else they are written here, through the page cache, where readers
 * will find them (returns 0; the caller unlocks): a random reader finds what
 * it fetched there again, as it would not after O_DIRECT.  Or -errno.
 */
static int cache_fetch_run(struct cache_file *f, int fd, uint64_t b0, uint64_t b1)
{
	off_t off = (off_t)(b0 * CACHE_BLOCK);
	size_t len = (size_t)(b1 - b0) * CACHE_BLOCK;
	struct cache_run *r;
	ssize_t n;
	void *buf;

	if ((uint64_t)off + len > f->size)
		len = (size_t)(f->size - (uint64_t)off);
	r = cache_file_streaming(f) ? cache_run_begin(f, b0, b1, len) : NULL;
	buf = r ? r->buf : cache_buf_get(f->c, f->run_blocks);
	if (!buf)
		return -ENOMEM;
	n = cache_fetch_all(f, buf, len, off);
	if (n >= 0 && (size_t)n != len)
		n = -EIO;			/* the object is shorter than its size */
	if (n >= 0)
		atomic_fetch_add(&f->stats->bytes_fetched, len);
	if (r) {
		cache_run_fetched(f, r, n >= 0);	/* frees r if the fetch failed */
		if (n < 0)
			return (int)n;
		if (cache_write_queue(f, r, fd))
			return 1;
	}
	if (n >= 0)
		n = cache_write_data(f, buf, len, off, r != NULL);
	if (n >= 0)
		cache_mark_written(f, b0, b1);
	if (r)
		cache_run_written(f, r);
	else
		cache_buf_put(f->c, buf, f->run_blocks);
	return n < 0 ? (int)n : 0;
}

bool cache_file_complete(struct cache_file *f)
{
	return !memchr(f->map + f->hdr_len, 0, f->nblocks);
}


/*
 * Hands a complete object to the writers to make durable, with descriptors
 * of its own (not pinning it: the map's is a new description, without the
 * open's flock, so waiting for a batch never keeps an object from eviction;
 * one evicted meanwhile is synced for nothing), so that the close that
 * completes it, a FUSE thread, waits for no disk flush: a first epoch of
 * small files closed one a millisecond.  False when it cannot.
 */
/* Whether the object of @f waits for a sync already (opened again meanwhile).  qlock held. */
static bool cache_sync_queued(struct cache *c, const struct cache_file *f)
{
	for (const struct cache_sync *s = c->shead; s; s = s->next)
		if (strcmp(s->hash, f->hash) == 0)
			return true;
	return false;
}

static bool cache_sync_queue(struct cache_file *f)
{
	struct cache *c = f->c;
	struct cache_sync *s;
	bool queued;

	pthread_mutex_lock(&c->qlock);
	queued = cache_sync_queued(c, f);
	pthread_mutex_unlock(&c->qlock);
	if (queued)
		return true;
	s = malloc(sizeof(*s));
	if (!s)
		return false;
	memcpy(s->hash, f->hash, sizeof(s->hash));
	s->data_fd = fcntl(f->data_fd, F_DUPFD_CLOEXEC, 0);
	s->map_fd = s->data_fd >= 0 ? cache_reopen(f->map_fd, O_RDWR) : -1;
	pthread_mutex_lock(&c->qlock);
	if (s->map_fd >= 0 && c->n_syncs < CACHE_SYNCS_MAX && !c->stopping &&
	    (c->n_writers > 0 || cache_start_threads(c) == 0 || c->n_writers > 0)) {
		if (!c->shead)
			c->sync_since = mono_ns();
		/* a writer wakes to arm its timer for the first, and once a batch is full */
		if (!c->shead || c->n_syncs + 1 == CACHE_SYNC_BATCH)
			pthread_cond_signal(&c->wcond);
		s->next = c->shead;
		c->shead = s;
		c->n_syncs++;
		s = NULL;
	}
	pthread_mutex_unlock(&c->qlock);
	if (!s)
		return true;
	if (s->data_fd >= 0)
		close(s->data_fd);
	if (s->map_fd >= 0)
		close(s->map_fd);
	free(s);
	return false;
}

/* Once complete, makes the object survive a reboot, mostly in a writer.  At close. */
void cache_file_make_durable(struct cache_file *f)
{
	struct cache_map_hdr *h = (struct cache_map_hdr *)f->map;

	if ((__atomic_load_n(&h->flags, __ATOMIC_RELAXED) & CACHE_DURABLE) ||
	    !cache_file_complete(f) || cache_sync_queue(f))
		return;
	if (fdatasync(f->data_fd) == 0) {
		__atomic_or_fetch(&h->flags, CACHE_DURABLE, __ATOMIC_RELEASE);
		cache_seal(f->map_fd);
	}
}

/* Locks block @b if still missing: 1 (locked, caller fetches), 0 (present or skipped), -errno. */
static int cache_file_take(struct cache_file *f, int fd, uint64_t b, bool wait)
{
	int ret;

	if (cache_block_present(f, b))
		return 0;
	pthread_mutex_lock(&f->lock);
	ret = cache_run_find(f, b) != NULL;	/* this process has it or is fetching it */
	pthread_mutex_unlock(&f->lock);
	if (ret)
		return 0;
	ret = cache_lock_blocks(f, fd, b, b + 1, F_WRLCK, wait);
	if (ret < 0)
		return wait ? ret : 0;
	if (!cache_block_present(f, b))
		return 1;
	cache_lock_blocks(f, fd, b, b + 1, F_UNLCK, false);
	return 0;
}

/*
 * Fetches the locked run [b0, b1) and unlocks it, unless a writer does;
 * adds the bytes written here to *@bytes.
 */
static int cache_file_flush(struct cache_file *f, int fd, uint64_t b0, uint64_t b1,
			    uint64_t *bytes)
{
	int ret = cache_fetch_run(f, fd, b0, b1);

	if (ret != 1)
		cache_lock_blocks(f, fd, b0, b1, F_UNLCK, false);
	if (ret == 0)
		*bytes += (b1 - b0) * CACHE_BLOCK;
	return ret < 0 ? ret : 0;
}

/*
 * Fills the missing blocks of [b0, b1).  @wait: a reader, which waits for
 * blocks someone else is fetching and fails with the fetch's error; else
 * read-ahead, which skips them.  Locks are taken in ascending order on a
 * description of the map file of its own, so other threads' locks count.
 */
int cache_file_fill(struct cache_file *f, uint64_t b0, uint64_t b1, bool wait)
{
	uint64_t run = b1, bytes = 0;	/* run: first block of the locked run, b1 if none */
	int fd, ret = 0;

	fd = cache_reopen(f->map_fd, O_RDWR);
	if (fd < 0)
		return -errno;
	for (uint64_t b = b0; b < b1 && ret >= 0; b++) {
		if (run != b1 && b - run == f->run_blocks) {
			ret = cache_file_flush(f, fd, run, b, &bytes);
			run = b1;
		}
		if (ret >= 0)
			ret = cache_file_take(f, fd, b, wait);
		if (ret == 1 && run == b1)
			run = b;
		else if (ret != 1 && run != b1) {
			int r = cache_file_flush(f, fd, run, b, &bytes);

			ret = ret < 0 ? ret : r;
			run = b1;
		}
	}
	if (ret >= 0 && run != b1)
		ret = cache_file_flush(f, fd, run, b1, &bytes);
	close(fd);		/* every lock is let go of by now, or by a writer */
	if (bytes)
		cache_usage_add(f->c, bytes);
	return ret < 0 ? ret : 0;
}
