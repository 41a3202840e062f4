/*
 * cache.c - the shared on-disk cache of remote files (cache.h, DESIGN §8):
 * the cache, its threads and the reads of an open file; an object's files
 * are made and opened in cache_object.c, its blocks fetched in
 * cache_fetch.c, and the least used evicted in cache_evict.c.
 *
 * What: an object (one version of one remote file) is named by the hex
 * SHA-256 of its key and kept as two files in DIR/objects/<first 2 hex>/:
 *   <hash>.data  sparse, exactly the object's size, its bytes at their own
 *                offsets and nothing else, so the kernel can read it
 *                directly (FUSE passthrough) once it is complete;
 *   <hash>.map   a header (magic, block size, size, boot id, the full key to
 *                detect a collision), then one byte per 1 MiB block: 1 once
 *                the block's data is written.
 * A block's data is written before its map byte is set, and readers
 * check the byte before they read the data, so a process that dies midway
 * leaves only unmarked blocks.  A map with a bad header, a wrong key or a
 * wrong size is treated as absent and replaced (while another process holds
 * it, the open reads uncached instead).  After a reboot only objects whose
 * data was fdatasync'd once complete (after the first close after that, by
 * a writer thread: the header's DURABLE flag) are trusted: a partial object
 * from an earlier boot may have lost data its map claims, so it is fetched
 * again.
 *
 * Several mlfs processes share the folder, so every lock is a kernel lock
 * that dies with its holder:
 *  - Creating and deleting an object's files happens under flock(LOCK_EX)
 *    of its shard folder (a brief lock, 1/256 of the objects).  Files are
 *    written under temporary names and renamed into place, data first.
 *  - Pinning: each open holds flock(LOCK_SH) on the map for its lifetime; the
 *    evictor takes flock(LOCK_EX|LOCK_NB) and skips an object in use.  An
 *    opener checks after LOCK_SH that the map is still linked, else retries.
 *  - Single flight: a fetcher takes an OFD write lock (F_OFD_SETLK[W]) on
 *    the map bytes of the blocks it fetches, re-checks them under the lock,
 *    fetches what is still missing, writes, marks and unlocks.  OFD locks
 *    belong to an open file description, so each fetch opens its own: threads
 *    of one process exclude each other exactly as processes do.  A reader
 *    waits for blocks in ascending order; read-ahead never waits (it skips a
 *    block someone else is fetching), so no cycle can form.
 *  - Usage: a shared 8-byte counter in DIR/usage, mmap'd and bumped with
 *    atomic adds as blocks are written; it only triggers eviction.  The one
 *    evictor at a time (flock DIR/evict.lock, non-blocking: others just go
 *    on) scans the objects, sums their allocated blocks, deletes the least
 *    recently used unpinned ones until under 90% of max_bytes, and stores
 *    the true sum back.  LRU is the map's mtime, touched at each open.  The
 *    scan runs in the thread whose fetch crossed the limit, mostly a
 *    read-ahead thread; it also sweeps orphaned data files and old
 *    temporary files a crash left behind.
 * Objects over a quarter of max_bytes bypass the cache (read through fetch).
 *
 * Hot runs: the blocks one fetch brings for a file read sequentially are
 * kept in memory (a hot run) and this process's readers are answered from
 * them at once; a writer thread writes them with O_DIRECT (no copy into a
 * page cache nobody reads), marks them and only then lets go of their OFD
 * locks, through a duplicate of the fetch's descriptor.  A run goes once
 * read whole and written; a file keeps at most CACHE_HOT_RUNS, the process
 * hot_budget bytes, and a fetch past those, or for a reader that seeks, is
 * written through the page cache.  Blocks on disk are answered from
 * a read-only mapping of the data file (made at the first read through the
 * daemon), MADV_RANDOM, after a readahead(2) of exactly them: the kernel
 * never reads holes of blocks being written, which an O_DIRECT write could
 * leave stale in the page cache.  A complete, durable object's map is read
 * into memory at open rather than mapped (cache_map_in).
 *
 * Read-ahead: per open file the window starts at 256 KiB, doubles with each
 * sequential read up to 32 MiB (64 MiB for long fetches) and drops back on
 * a seek.  The blocks ahead are queued in whole 4 MiB chunks, aligned, for
 * a pool of background threads per struct cache, so up to four large
 * fetches are in flight while
 * the reader is served from blocks already present (the window keeps eight
 * chunks ahead).  A reader that reaches a block being fetched waits for it;
 * one that reaches a block still queued fetches it itself.  A read-ahead
 * error is dropped; the reader that needs the block returns the error.
 *
 * What not: the cache folder must be on a local filesystem with OFD locks
 * (not NFS); it is shared only between processes of one uid (root): the
 * folder is 0700 and files 0600.  The usage counter is approximate between
 * scans.  Nothing is checksummed: a disk that corrupts data is not detected.
 *
 * Threading: every function may be called from any thread.  struct cache's
 * queues (read-ahead, writes, spare buffers) are guarded by qlock; a
 * cache_file's read-ahead state and hot runs by its lock (taken before
 * qlock, never after); map bytes are read and set with atomic builtins on a
 * shared mapping.  No lock is held across a fetch or a write except the OFD
 * byte locks of the blocks being fetched.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
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

/* ---- small helpers ---- */

int cache_errno(void)
{
	return errno ? -errno : -EIO;
}

static void cache_hash(const char *key, char out[CACHE_HASH_LEN + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	static const char hex[] = "0123456789abcdef";

	EVP_Digest(key, strlen(key), md, &n, EVP_sha256(), NULL);
	for (unsigned int i = 0; i < n && i < CACHE_HASH_LEN / 2; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[CACHE_HASH_LEN] = '\0';
}

/* DIR/objects/ab[/<hash><suffix>]; @hash NULL gives the shard folder. */
void cache_path(struct cache *c, char *buf, size_t size, int shard, const char *hash,
		       const char *suffix)
{
	if (hash)
		snprintf(buf, size, "%s/objects/%02x/%s%s", c->dir, shard, hash, suffix);
	else
		snprintf(buf, size, "%s/objects/%02x", c->dir, shard);
}

static void cache_read_boot_id(char out[40])
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, out, 39) : -1;

	if (fd >= 0)
		close(fd);
	memset(out + (n > 0 ? n : 0), 0, 40 - (n > 0 ? (size_t)n : 0));
}

ssize_t cache_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* Calls @fetch until @len bytes or the end of the object.  Returns bytes or -errno. */
ssize_t cache_fetch_all(struct cache_file *f, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = f->fetch(f->arg, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0)
			return n;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* Opens @path and takes flock @op on it, retrying EINTR.  Returns the fd or -errno. */
int cache_open_locked(const char *path, int flags, int op)
{
	int fd = open(path, flags | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while (flock(fd, op) < 0) {
		int err = errno;

		if (err == EINTR)
			continue;
		close(fd);
		return -err;
	}
	return fd;
}

/* ---- map bytes and OFD block locks ---- */

bool cache_block_present(struct cache_file *f, uint64_t b)
{
	return __atomic_load_n(&f->map[f->hdr_len + b], __ATOMIC_ACQUIRE) == 1;
}

static bool cache_range_present(struct cache_file *f, uint64_t b0, uint64_t b1)
{
	for (uint64_t b = b0; b < b1; b++)
		if (!cache_block_present(f, b))
			return false;
	return true;
}

/* Locks (F_WRLCK) or unlocks (F_UNLCK) map bytes of blocks [b0, b1) on @fd. */
int cache_lock_blocks(struct cache_file *f, int fd, uint64_t b0, uint64_t b1, short type,
		      bool wait)
{
	struct flock fl = {
		.l_type = type, .l_whence = SEEK_SET,
		.l_start = (off_t)(f->hdr_len + b0), .l_len = (off_t)(b1 - b0),
	};

	while (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

void cache_warn(struct cache *c, enum cache_warn_kind kind, int err, const char *fmt, ...)
{
	int64_t now = mono_ns(), last = atomic_load(&c->warned_at[kind]);
	unsigned int held;
	char msg[512];
	va_list ap;

	if ((last && now - last < 60000000000ll && atomic_load(&c->warned_err[kind]) == err) ||
	    !atomic_compare_exchange_strong(&c->warned_at[kind], &last, now)) {
		atomic_fetch_add(&c->unwarned[kind], 1);
		return;
	}
	atomic_store(&c->warned_err[kind], err);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	held = atomic_exchange(&c->unwarned[kind], 0);
	if (held)
		log_warn("%s (and %u more such in the last minute)", msg, held);
	else
		log_warn("%s", msg);
}

/* ---- fetch buffers ---- */

void *cache_buf_get(struct cache *c, unsigned int blocks)
{
	bool lng = blocks == CACHE_RUN_LONG;
	void *buf = NULL;

	pthread_mutex_lock(&c->qlock);
	if (lng && c->n_spare_long > 0)
		buf = c->spare_long[--c->n_spare_long];
	else if (!lng && c->n_spare > 0)
		buf = c->spare[--c->n_spare];
	c->spare_taken = mono_ns();
	pthread_mutex_unlock(&c->qlock);
	if (buf)
		return buf;
	/* Huge pages where the kernel has them: 2 faults per buffer, not 1,024. */
	if (posix_memalign(&buf, CACHE_BUF_ALIGN, (size_t)blocks * CACHE_BLOCK))
		return NULL;
	madvise(buf, (size_t)blocks * CACHE_BLOCK, MADV_HUGEPAGE);
	return buf;
}

void cache_buf_put(struct cache *c, void *buf, unsigned int blocks)
{
	pthread_mutex_lock(&c->qlock);
	if (blocks == CACHE_RUN_LONG && c->n_spare_long < CACHE_SPARE_LONG) {
		c->spare_long[c->n_spare_long++] = buf;
		buf = NULL;
	} else if (blocks != CACHE_RUN_LONG && c->n_spare < CACHE_SPARE_BUFS) {
		c->spare[c->n_spare++] = buf;
		buf = NULL;
	}
	pthread_mutex_unlock(&c->qlock);
	free(buf);
}

/*
 * Keeps only a few spare buffers once none was taken for a second and no
 * file of the process has hot runs.  Not at each close: an epoch of small
 * files would give back and map again a buffer per file, whose first touch
 * zeroes a 2 MiB huge page (a quarter of the daemon's CPU in an HTTP epoch).
 */
void cache_release_idle(struct cache *c)
{
	void *drop[CACHE_SPARE_BUFS + CACHE_SPARE_LONG];
	int n = 0;

	if (!c)
		return;
	pthread_mutex_lock(&c->qlock);
	if (atomic_load(&c->hot_bytes) == 0 && mono_ns() - c->spare_taken > 1000000000) {
		while (c->n_spare > CACHE_SPARE_IDLE)
			drop[n++] = c->spare[--c->n_spare];
		while (c->n_spare_long > 0)	/* 16 MiB each: none kept idle */
			drop[n++] = c->spare_long[--c->n_spare_long];
	}
	pthread_mutex_unlock(&c->qlock);
	while (n > 0)
		free(drop[--n]);
}

/* ---- read-ahead ---- */

void cache_task_done(struct cache_file *f)
{
	pthread_mutex_lock(&f->lock);
	if (--f->pending == 0 || f->writes == 0)
		pthread_cond_broadcast(&f->idle);
	pthread_mutex_unlock(&f->lock);
}

static void *cache_worker(void *arg)
{
	struct cache *c = arg;
	struct cache_task *t;

	for (;;) {
		pthread_mutex_lock(&c->qlock);
		while (!c->head && !c->stopping)
			pthread_cond_wait(&c->qcond, &c->qlock);
		t = c->head;
		if (t) {
			c->head = t->next;
			if (!c->head)
				c->tail = NULL;
		}
		pthread_mutex_unlock(&c->qlock);
		if (!t)
			return NULL;
		if (!atomic_load(&t->f->closing))
			cache_file_fill(t->f, t->b0, t->b1, false);	/* errors dropped */
		cache_task_done(t->f);
		free(t);
	}
}

/*
 * The read-ahead and writer threads start with the first read-ahead or hot
 * run, not with the cache: a daemon forks (fuse_daemonize) after making its
 * cache, and threads made before a fork are not in the child.  Called with
 * qlock held.
 */
int cache_start_threads(struct cache *c)
{
	for (; c->n_threads < CACHE_THREADS; c->n_threads++) {
		int ret = pthread_create(&c->threads[c->n_threads], NULL, cache_worker, c);

		if (ret)
			return -ret;
	}
	for (; c->n_writers < CACHE_WRITERS; c->n_writers++) {
		int ret = pthread_create(&c->writers[c->n_writers], NULL, cache_writer, c);

		if (ret)
			return -ret;
	}
	return 0;
}

/* Queues read-ahead of blocks [b0, b1).  Called with f->lock held. */
static void cache_file_queue(struct cache_file *f, uint64_t b0, uint64_t b1)
{
	struct cache *c = f->c;
	struct cache_task *t;

	if (cache_range_present(f, b0, b1) || !(t = malloc(sizeof(*t))))
		return;
	*t = (struct cache_task){ .f = f, .b0 = b0, .b1 = b1 };
	pthread_mutex_lock(&c->qlock);
	if (c->n_threads == 0 && cache_start_threads(c) < 0 && c->n_threads == 0) {
		pthread_mutex_unlock(&c->qlock);
		free(t);	/* no read-ahead: reads fetch what they need themselves */
		return;
	}
	f->pending++;
	if (c->tail)
		c->tail->next = t;
	else
		c->head = t;
	c->tail = t;
	pthread_cond_signal(&c->qcond);
	pthread_mutex_unlock(&c->qlock);
}

/*
 * Grows the window on a sequential read of [off, end), resets it on a seek,
 * and queues the blocks up to end + window not yet queued, in whole chunks
 * (else a steady reader would queue one block per few reads).  FUSE
 * may deliver a sequential reader's requests slightly out of order, so a
 * read near where the last one ended still counts as sequential.
 */
static void cache_file_readahead(struct cache_file *f, uint64_t off, uint64_t end)
{
	uint64_t piece = f->run_blocks, round, from, to, queued;

	pthread_mutex_lock(&f->lock);
	if (f->next_off && off + CACHE_SEQ_SLACK >= f->next_off &&
	    off <= f->next_off + CACHE_SEQ_SLACK) {
		f->window = f->window * 2 > f->ra_max ? f->ra_max : f->window * 2;
		if (end > f->next_off)
			f->next_off = end;
	} else {
		f->window = CACHE_RA_MIN;
		f->ra_end = end;
		f->next_off = end;
	}
	from = (end - 1) / CACHE_BLOCK + 1;		/* the first block after this read */
	queued = (f->ra_end + CACHE_BLOCK - 1) / CACHE_BLOCK;
	if (queued > from)
		from = queued;
	to = end + f->window < f->size ? end + f->window : f->size;
	to = (to + CACHE_BLOCK - 1) / CACHE_BLOCK;
	/*
	 * Whole chunks only: few large fetches.  A file of long fetches queues
	 * runs of run_blocks once its window holds one, and the usual chunks
	 * before, so its first reads do not wait for a 16 MiB window.
	 */
	round = f->window >= (uint64_t)piece * CACHE_BLOCK ? piece : CACHE_RA_CHUNK;
	if (to < f->nblocks)
		to = to / round * round;
	for (uint64_t b = from; b < to; b = (b / piece + 1) * piece) {
		uint64_t e = (b / piece + 1) * piece;

		cache_file_queue(f, b, e < to ? e : to);
	}
	if (to * CACHE_BLOCK > f->ra_end)
		f->ra_end = to * CACHE_BLOCK;
	pthread_mutex_unlock(&f->lock);
}

/* ---- the cache ---- */

static int cache_open_usage(struct cache *c, bool *created)
{
	char path[PATH_MAX];
	void *m;
	int fd, err;

	snprintf(path, sizeof(path), "%s/usage", c->dir);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	*created = fd >= 0;
	if (fd < 0 && errno == EEXIST)
		fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, sizeof(uint64_t)) < 0 && *created) {
		close(fd);
		return -errno;
	}
	/*
	 * The counter's page must exist on disk before it is mapped: a store
	 * into a mapped page a full disk cannot hold is SIGBUS.  Where it
	 * cannot, this process counts alone until the next mount.
	 */
	err = posix_fallocate(fd, 0, sizeof(uint64_t));
	if (err) {
		log_warn("cache %s: usage counter: %s: counted by this process alone", c->dir,
			 strerror(err));
		close(fd);
		m = mmap(NULL, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			 -1, 0);
		if (m == MAP_FAILED)
			return -errno;
		c->usage = m;
		*created = true;	/* learn what is there */
		return 0;
	}
	m = mmap(NULL, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	c->usage = m;
	return 0;
}

int cache_make_dirs(const char *dir)
{
	char path[PATH_MAX];

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof(path), "%s/objects", dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int cache_create(struct cache **out, const char *dir, uint64_t max_bytes)
{
	struct cache *c = calloc(1, sizeof(*c));
	bool created = false;
	int ret;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->qlock, NULL);
	pthread_cond_init(&c->qcond, NULL);
	mono_cond_init(&c->wcond);	/* writers wait for a deadline */
	c->max_bytes = max_bytes;
	c->hot_budget = max_bytes / 8 < CACHE_HOT_BUDGET ? max_bytes / 8 : CACHE_HOT_BUDGET;
	cache_read_boot_id(c->boot_id);
	c->dir = strdup(dir);
	ret = c->dir ? cache_make_dirs(dir) : -ENOMEM;
	if (ret == 0)
		ret = cache_defer_init(c);
	if (ret == 0)
		ret = cache_open_usage(c, &created);
	if (ret < 0) {
		log_err("cache %s: %s", dir, strerror(-ret));
		cache_destroy(c);
		return ret;
	}
	if (created)		/* a new counter: learn what is already there */
		cache_evict(c);
	*out = c;
	return 0;
}

void cache_destroy(struct cache *c)
{
	if (!c)
		return;
	cache_defer_stop(c);		/* first: it writes through the writers below */
	pthread_mutex_lock(&c->qlock);
	c->stopping = true;
	pthread_cond_broadcast(&c->qcond);
	pthread_cond_broadcast(&c->wcond);
	pthread_mutex_unlock(&c->qlock);
	for (int i = 0; i < c->n_threads; i++)
		pthread_join(c->threads[i], NULL);	/* none before the first read-ahead */
	for (int i = 0; i < c->n_writers; i++)
		pthread_join(c->writers[i], NULL);
	if (c->usage)
		munmap(c->usage, sizeof(uint64_t));
	while (c->n_spare > 0)
		free(c->spare[--c->n_spare]);
	while (c->n_spare_long > 0)
		free(c->spare_long[--c->n_spare_long]);
	pthread_cond_destroy(&c->qcond);
	pthread_cond_destroy(&c->wcond);
	pthread_mutex_destroy(&c->qlock);
	free(c->dir);
	free(c);
}

void cache_get_info(struct cache *c, struct cache_info *info)
{
	info->max_bytes = c->max_bytes;
	info->used_bytes = __atomic_load_n(c->usage, __ATOMIC_RELAXED);
	info->evictions = atomic_load(&c->evictions);
	info->evicted_bytes = atomic_load(&c->evicted_bytes);
	info->bypassed = atomic_load(&c->bypassed);
	info->memory_bytes = atomic_load(&c->hot_bytes);
	info->write_behind_bytes = cache_defer_bytes(c);
}

/* ---- files ---- */

static struct cache_file *cache_file_new(struct cache *c, const char *key, uint64_t size,
					 struct cache_stats *stats, cache_fetch_fn *fetch,
					 void *arg)
{
	struct cache_file *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	*f = (struct cache_file){
		.c = c, .stats = stats, .fetch = fetch, .arg = arg, .size = size,
		.nblocks = (size + CACHE_BLOCK - 1) / CACHE_BLOCK, .hdr_len = cache_hdr_len(key),
		.map_fd = -1, .data_fd = -1, .dio_fd = -1, .ro_fd = -1, .window = CACHE_RA_MIN,
		.run_blocks = CACHE_RUN_MAX, .ra_max = CACHE_RA_MAX,
	};
	atomic_init(&f->closing, false);
	atomic_init(&f->write_failed, false);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->idle, NULL);
	pthread_cond_init(&f->run_cond, NULL);
	cache_hash(key, f->hash);
	f->shard = (int)strtol((char[3]){ f->hash[0], f->hash[1], '\0' }, NULL, 16);
	return f;
}

void cache_file_long_fetches(struct cache_file *f)
{
	pthread_mutex_lock(&f->lock);
	if (!f->runs && f->pending == 0 && f->readers == 0 && f->next_off == 0) {
		f->run_blocks = CACHE_RUN_LONG;	/* nothing fetched yet: no buffer of the old size */
		f->ra_max = CACHE_RA_LONG;
	}
	pthread_mutex_unlock(&f->lock);
}

/*
 * cache_file_open; @defer: a small object may be served from memory and
 * written behind.  Without it (the writer behind itself), a failure of our
 * own disk is returned, not turned into an uncached read.
 */
static int cache_file_open_how(struct cache *c, struct cache_file **out, const char *key,
			       uint64_t size, struct cache_stats *stats, cache_fetch_fn *fetch,
			       void *arg, bool defer)
{
	struct cache_file *f;
	int ret = 0;

	*out = NULL;
	if (strlen(key) > CACHE_KEY_MAX)
		return -ENAMETOOLONG;
	f = cache_file_new(c, key, size, stats, fetch, arg);
	if (!f)
		return -ENOMEM;
	if (size > c->max_bytes / 4)
		f->bypass = true;
	else if (!defer || !cache_defer_open(f, key, &ret))
		ret = cache_file_attach_retrying(f, key, true);
	if (ret == -ENOSPC || ret == -EDQUOT)
		cache_evict(c);		/* our disk is full, not the remote: make room */
	if (ret < 0 && !defer) {	/* the writer behind (open_now): it says why */
		cache_file_close(f);
		return ret;
	}
	if (ret < 0) {
		/*
		 * Our own disk, not the remote: full, read-only, gone or failing,
		 * or the object busy elsewhere.  The read goes uncached.
		 */
		bool full = ret == -ENOSPC || ret == -EDQUOT;

		cache_warn(c, CACHE_WARN_OPEN, -ret, "cache: %s: %s object %s (%s), reading it "
			   "uncached", c->dir, full ? "no room for" : "cannot keep", f->hash,
			   strerror(-ret));
		f->bypass = true;
	}
	if (f->bypass)
		atomic_fetch_add(&c->bypassed, 1);
	*out = f;
	return 0;
}

int cache_file_open(struct cache *c, struct cache_file **out, const char *key, uint64_t size,
		    struct cache_stats *stats, cache_fetch_fn *fetch, void *arg)
{
	return cache_file_open_how(c, out, key, size, stats, fetch, arg, true);
}

int cache_file_open_now(struct cache *c, struct cache_file **out, const char *key,
			uint64_t size, struct cache_stats *stats, cache_fetch_fn *fetch, void *arg)
{
	return cache_file_open_how(c, out, key, size, stats, fetch, arg, false);
}

static ssize_t cache_file_read_through(struct cache_file *f, void *buf, size_t len, off_t off)
{
	ssize_t n;

	if ((uint64_t)off >= f->size)
		return 0;
	if (len > f->size - (uint64_t)off)
		len = (size_t)(f->size - (uint64_t)off);
	n = cache_fetch_all(f, buf, len, off);
	if (n >= 0)
		atomic_fetch_add(&f->stats->misses, 1);
	return n;
}

static void cache_file_count(struct cache_file *f, bool hit, ssize_t n)
{
	atomic_fetch_add(hit ? &f->stats->hits : &f->stats->misses, 1);
	if (hit)
		atomic_fetch_add(&f->stats->bytes_hit, (uint64_t)n);
}

struct cache_segs {
	struct iovec iov[CACHE_SEG_MAX];
	struct cache_run *run[CACHE_SEG_MAX];	/* each piece's hot run, NULL: the mapping */
	int n;
};

/* Gives back the references @s holds; @used: its pieces were read.  f->lock held. */
static void cache_segs_drop(struct cache_file *f, struct cache_segs *s, bool used)
{
	for (int i = 0; i < s->n; i++) {
		struct cache_run *r = s->run[i];

		if (!r)
			continue;
		r->refs--;
		if (used)
			r->used += s->iov[i].iov_len;
		cache_run_settle(f, r);
	}
	s->n = 0;
}

/*
 * Lays out [off, end) as pieces of hot runs and of the mapping, with a
 * reference on each run used.  Returns 0; 1 when a block is being fetched
 * by this process (wait for run_cond); or 2 with [*@m0, *@m1) the first
 * blocks neither in memory nor on disk.  Called with f->lock held.
 */
static int cache_segs_build(struct cache_file *f, uint64_t off, uint64_t end,
			    struct cache_segs *s, uint64_t *m0, uint64_t *m1)
{
	uint64_t pos = off, stop, b;

	for (s->n = 0; pos < end; pos = stop) {
		struct cache_run *r = cache_run_find(f, b = pos / CACHE_BLOCK);
		unsigned char *base;

		if (r && r->state == CACHE_RUN_FETCHING) {
			cache_segs_drop(f, s, false);
			return 1;
		}
		if (!r && !cache_block_present(f, b)) {
			cache_segs_drop(f, s, false);
			for (*m0 = b++; b * CACHE_BLOCK < end && !cache_block_present(f, b) &&
					!cache_run_find(f, b); b++)
				;
			*m1 = b;
			return 2;
		}
		stop = (r ? r->b1 : b + 1) * CACHE_BLOCK;
		stop = stop < end ? stop : end;
		base = r ? r->buf + (pos - r->b0 * CACHE_BLOCK) : f->data_map + pos;
		if (!r && s->n > 0 && !s->run[s->n - 1] &&
		    (unsigned char *)s->iov[s->n - 1].iov_base + s->iov[s->n - 1].iov_len == base) {
			s->iov[s->n - 1].iov_len += stop - pos;	/* the next block of the mapping */
			continue;
		}
		s->iov[s->n] = (struct iovec){ .iov_base = base, .iov_len = stop - pos };
		s->run[s->n++] = r;
		if (r)
			r->refs++;
	}
	return 0;
}

ssize_t cache_file_read_iov(struct cache_file *f, size_t len, off_t off, cache_use_fn *use,
			    void *arg)
{
	struct cache_segs s;
	uint64_t end, m0 = 0, m1 = 0;
	bool hit = true;
	int ret;

	bool mapped;

	if (f->bypass)
		return -ENOTSUP;
	if (f->dfr)
		return cache_defer_read_iov(f, len, off, use, arg);
	/* mapped once per open; every read after that takes no lock for it */
	if (f->size && !__atomic_load_n(&f->data_map, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&f->lock);
		mapped = cache_file_map_data(f);
		pthread_mutex_unlock(&f->lock);
		if (!mapped)
			return -ENOTSUP;
	}
	if (off < 0)
		return -EINVAL;
	if ((uint64_t)off >= f->size || len == 0) {
		use(arg, NULL, 0);
		return 0;
	}
	if (len > (size_t)(CACHE_SEG_MAX - 2) * CACHE_BLOCK)
		len = (size_t)(CACHE_SEG_MAX - 2) * CACHE_BLOCK;
	end = len > f->size - (uint64_t)off ? f->size : (uint64_t)off + len;
	cache_file_readahead(f, (uint64_t)off, end);
	pthread_mutex_lock(&f->lock);
	while ((ret = cache_segs_build(f, (uint64_t)off, end, &s, &m0, &m1)) != 0) {
		hit = false;
		if (ret == 1) {
			pthread_cond_wait(&f->run_cond, &f->lock);
			continue;
		}
		pthread_mutex_unlock(&f->lock);
		ret = cache_file_fill(f, m0, m1, true);
		if (ret == -ENOSPC || ret == -EDQUOT) {	/* our disk, not the remote */
			cache_evict(f->c);
			return -ENOTSUP;
		}
		if (ret < 0)
			return ret;
		pthread_mutex_lock(&f->lock);
	}
	f->readers++;
	pthread_mutex_unlock(&f->lock);
	for (int i = 0; i < s.n; i++)	/* pieces of the mapping: read them in at once */
		if (!s.run[i])
			readahead(f->data_fd, (unsigned char *)s.iov[i].iov_base - f->data_map,
				  s.iov[i].iov_len);
	cache_file_count(f, hit, (ssize_t)(end - (uint64_t)off));
	/*
	 * Once @use replied, the reader may close the file, and only the
	 * reference counted in readers keeps cache_file_close from freeing it:
	 * after the unlock below, @f is not touched.
	 */
	use(arg, s.iov, s.n);
	pthread_mutex_lock(&f->lock);
	cache_segs_drop(f, &s, true);
	if (--f->readers == 0)
		pthread_cond_broadcast(&f->idle);
	pthread_mutex_unlock(&f->lock);
	return (ssize_t)(end - (uint64_t)off);
}

static void cache_copy_out(void *arg, const struct iovec *iov, int cnt)
{
	char **p = arg;

	for (int i = 0; i < cnt; i++) {
		memcpy(*p, iov[i].iov_base, iov[i].iov_len);
		*p += iov[i].iov_len;
	}
}

ssize_t cache_file_read(struct cache_file *f, void *buf, size_t len, off_t off)
{
	size_t done = 0;
	ssize_t n = 0;

	while (!f->bypass && done < len) {
		char *p = (char *)buf + done;

		n = cache_file_read_iov(f, len - done, off + (off_t)done, cache_copy_out, &p);
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	if (f->bypass || n == -ENOTSUP) {
		n = cache_file_read_through(f, (char *)buf + done, len - done, off + (off_t)done);
		return n < 0 ? n : (ssize_t)done + n;
	}
	return n < 0 ? n : (ssize_t)done;
}

int cache_file_fd(struct cache_file *f)
{
	char path[64];
	int fd;

	if (f->bypass || f->dfr)
		return -1;		/* written behind: not in the cache's files yet */
	pthread_mutex_lock(&f->lock);
	while (f->ro_fd < 0 && f->writes > 0 && !cache_file_complete(f))
		pthread_cond_wait(&f->idle, &f->lock);	/* blocks read, still being written */
	if (f->ro_fd < 0 && cache_file_complete(f)) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", f->data_fd);
		f->ro_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	fd = f->ro_fd;
	pthread_mutex_unlock(&f->lock);
	return fd;
}

/* Takes @f's queued read-ahead off the queue, so close waits only for running fetches. */
static void cache_file_unqueue(struct cache_file *f)
{
	struct cache *c = f->c;
	struct cache_task **p, *t, *prev = NULL, *dropped = NULL;

	pthread_mutex_lock(&c->qlock);
	for (p = &c->head; (t = *p);) {
		if (t->f != f) {
			prev = t;
			p = &t->next;
			continue;
		}
		*p = t->next;
		t->next = dropped;
		dropped = t;
	}
	c->tail = prev;
	pthread_mutex_unlock(&c->qlock);
	for (; dropped; dropped = t) {
		t = dropped->next;
		cache_task_done(f);
		free(dropped);
	}
}

void cache_file_close(struct cache_file *f)
{
	if (!f)
		return;
	atomic_store(&f->closing, true);
	if (f->dfr)
		cache_defer_close(f);
	cache_file_unqueue(f);
	pthread_mutex_lock(&f->lock);
	while (f->pending > 0 || f->readers > 0)
		pthread_cond_wait(&f->idle, &f->lock);
	pthread_mutex_unlock(&f->lock);
	if (f->map)
		cache_file_make_durable(f);
	if (f->ro_fd >= 0)
		close(f->ro_fd);
	while (f->runs) {		/* no reader and no fetch is left */
		struct cache_run *r = f->runs;

		f->runs = r->next;
		cache_run_free(f, r);
	}
	cache_file_detach(f);
	pthread_cond_destroy(&f->run_cond);
	pthread_cond_destroy(&f->idle);
	pthread_mutex_destroy(&f->lock);
	free(f);
}
