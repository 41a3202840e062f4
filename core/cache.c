/*
 * cache.c - the shared on-disk cache of remote files (cache.h, DESIGN §8).
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
 * sequential read up to 32 MiB and drops back on a seek.  The blocks ahead
 * are queued in whole 4 MiB chunks, aligned, for a pool of background
 * threads per struct cache, so up to four large fetches are in flight while
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

static ssize_t cache_pwrite_all(int fd, const void *buf, size_t len, off_t off)
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
static ssize_t cache_fetch_all(struct cache_file *f, void *buf, size_t len, off_t off)
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

static bool cache_block_present(struct cache_file *f, uint64_t b)
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
static int cache_lock_blocks(struct cache_file *f, int fd, uint64_t b0, uint64_t b1,
			     short type, bool wait)
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

/* ---- creating, validating and opening an object ---- */

static size_t cache_hdr_len(const char *key)
{
	return sizeof(struct cache_map_hdr) + strlen(key);
}

/* Whether the mapped map file @m of @len bytes describes this object and may be trusted. */
static bool cache_map_valid(struct cache_file *f, const unsigned char *m, size_t len,
			    const char *key)
{
	struct cache_map_hdr h;
	size_t klen = strlen(key);

	if (len != f->hdr_len + f->nblocks)
		return false;
	memcpy(&h, m, sizeof(h));
	if (memcmp(h.magic, CACHE_MAGIC, 8) != 0 || h.block_size != CACHE_BLOCK ||
	    h.key_len != klen || h.size != f->size || memcmp(m + sizeof(h), key, klen) != 0)
		return false;
	/* After a reboot, marked blocks are only known to be on disk if synced. */
	return (h.flags & CACHE_DURABLE) || memcmp(h.boot_id, f->c->boot_id, 40) == 0;
}

/* Writes a new temporary file in shard folder @dir; @hdr NULL makes the data file. */
static int cache_write_tmp(struct cache_file *f, const char *dir, const char *key,
			   char *tmp, size_t size, bool map)
{
	struct cache_map_hdr h = { .magic = CACHE_MAGIC, .block_size = CACHE_BLOCK,
				   .key_len = (uint32_t)strlen(key), .size = f->size };
	off_t len = map ? (off_t)(f->hdr_len + f->nblocks) : (off_t)f->size;
	int fd, ret = 0;

	memcpy(h.boot_id, f->c->boot_id, sizeof(h.boot_id));
	snprintf(tmp, size, "%s/.tmp.XXXXXX", dir);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (map && (cache_pwrite_all(fd, &h, sizeof(h), 0) < 0 ||
		    cache_pwrite_all(fd, key, h.key_len, sizeof(h)) < 0))
		ret = cache_errno();
	/*
	 * The map is written through a shared mapping: every page of it is
	 * allocated now, as a store into a page a full disk cannot hold is
	 * SIGBUS.  The data file stays sparse (pwrite fills it).
	 */
	if (ret == 0 && map)
		ret = -posix_fallocate(fd, 0, len);
	else if (ret == 0 && ftruncate(fd, len) < 0)
		ret = -errno;
	close(fd);
	if (ret < 0)
		unlink(tmp);
	return ret;
}

/* Creates the object's files, data first, under the shard lock held by the caller. */
static int cache_create_files(struct cache_file *f, const char *dir, const char *key)
{
	char dtmp[PATH_MAX], mtmp[PATH_MAX], path[PATH_MAX];
	int ret;

	ret = cache_write_tmp(f, dir, key, dtmp, sizeof(dtmp), false);
	if (ret < 0)
		return ret;
	ret = cache_write_tmp(f, dir, key, mtmp, sizeof(mtmp), true);
	if (ret < 0) {
		unlink(dtmp);
		return ret;
	}
	cache_path(f->c, path, sizeof(path), f->shard, f->hash, ".data");
	ret = rename(dtmp, path) < 0 ? -errno : 0;
	cache_path(f->c, path, sizeof(path), f->shard, f->hash, ".map");
	if (ret == 0 && rename(mtmp, path) < 0)
		ret = -errno;
	if (ret < 0) {
		unlink(dtmp);
		unlink(mtmp);
	}
	return ret;
}

/* Whether the object's map at @path and its data file are present and valid. */
static bool cache_map_ok_at(struct cache_file *f, const char *path, const char *key)
{
	char data[PATH_MAX];
	struct stat st;
	void *m;
	bool ok;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	ok = fstat(fd, &st) == 0 && (size_t)st.st_size == f->hdr_len + f->nblocks;
	m = ok ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
	ok = m != MAP_FAILED && cache_map_valid(f, m, (size_t)st.st_size, key);
	if (m != MAP_FAILED)
		munmap(m, (size_t)st.st_size);
	close(fd);
	cache_path(f->c, data, sizeof(data), f->shard, f->hash, ".data");
	return ok && stat(data, &st) == 0 && (uint64_t)st.st_size == f->size;
}

/*
 * Makes sure a valid map and data file exist for the object, replacing a bad
 * one that nobody holds.  Returns 0 (caller retries the open), -EBUSY (a bad
 * map is in use: read uncached) or -errno.
 */
static int cache_make_object(struct cache_file *f, const char *key)
{
	char dir[PATH_MAX], path[PATH_MAX];
	int dfd, mfd, ret = 0;

	cache_path(f->c, dir, sizeof(dir), f->shard, NULL, NULL);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	dfd = cache_open_locked(dir, O_RDONLY | O_DIRECTORY, LOCK_EX);
	if (dfd < 0)
		return dfd;
	cache_path(f->c, path, sizeof(path), f->shard, f->hash, ".map");
	if (cache_map_ok_at(f, path, key))
		goto out_unlock;
	mfd = cache_open_locked(path, O_RDONLY, LOCK_EX | LOCK_NB);
	if (mfd == -EWOULDBLOCK) {
		ret = -EBUSY;
		goto out_unlock;
	}
	if (mfd >= 0) {
		log_warn("cache: replacing bad or stale object %s", f->hash);
		unlink(path);
		close(mfd);
	}
	ret = cache_create_files(f, dir, key);
out_unlock:
	close(dfd);
	return ret;
}

/*
 * Reads the pinned map file in: a copy when it says the object is complete
 * and durable (nothing changes such a map while it is pinned, and a cached
 * epoch then maps and unmaps nothing per open: each munmap of a threaded
 * process interrupts every CPU it runs on), else a shared mapping, whose
 * block bytes fetchers set.  0 or -errno.
 */
static int cache_map_in(struct cache_file *f)
{
	unsigned char *copy = malloc(f->map_len);
	struct cache_map_hdr h;

	if (copy && pread(f->map_fd, copy, f->map_len, 0) == (ssize_t)f->map_len) {
		memcpy(&h, copy, sizeof(h));
		if ((h.flags & CACHE_DURABLE) && !memchr(copy + f->hdr_len, 0, f->nblocks)) {
			f->map = copy;
			f->map_copied = true;
			return 0;
		}
	}
	free(copy);
	f->map = mmap(NULL, f->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, f->map_fd, 0);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		return -errno;
	}
	return 0;
}

/* Reads the map file in, validates it and opens the data file.  0, -EAGAIN if bad, -errno. */
static int cache_file_attach(struct cache_file *f, const char *key)
{
	char path[PATH_MAX];
	struct stat st;
	int ret;

	if (fstat(f->map_fd, &st) < 0)
		return -errno;
	if (st.st_nlink == 0 || (size_t)st.st_size != f->hdr_len + f->nblocks)
		return -EAGAIN;
	f->map_len = (size_t)st.st_size;
	ret = cache_map_in(f);
	if (ret < 0)
		return ret;
	if (!cache_map_valid(f, f->map, f->map_len, key))
		return -EAGAIN;
	cache_path(f->c, path, sizeof(path), f->shard, f->hash, ".data");
	f->data_fd = open(path, O_RDWR | O_CLOEXEC);
	if (f->data_fd < 0)
		return errno == ENOENT ? -EAGAIN : -errno;
	if (fstat(f->data_fd, &st) < 0 || (uint64_t)st.st_size != f->size)
		return -EAGAIN;
	futimens(f->map_fd, NULL);		/* most recently used */
	return 0;
}

/*
 * Maps the data file read-only for cache_file_read_iov, at the first read
 * through the daemon (an open the kernel serves by passthrough never does);
 * the file never shrinks while pinned.  f->lock held.  False if it cannot.
 */
static bool cache_file_map_data(struct cache_file *f)
{
	unsigned char *m;

	if (f->data_map || !f->size)
		return true;
	m = mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->data_fd, 0);
	if (m == MAP_FAILED)
		return false;
	/*
	 * No read-ahead around faults: it would read holes of blocks not yet
	 * written into the page cache, where an O_DIRECT write may leave them
	 * stale.  Readers ask for exactly the present blocks they use instead
	 * (cache_file_read_iov).
	 */
	madvise(m, f->size, MADV_RANDOM);
	f->data_map = m;
	return true;
}

static void cache_file_detach(struct cache_file *f)
{
	if (f->map_copied)
		free(f->map);
	else if (f->map)
		munmap(f->map, f->map_len);
	f->map_copied = false;
	if (f->data_map)
		munmap(f->data_map, f->size);
	f->data_map = NULL;
	if (f->data_fd >= 0)
		close(f->data_fd);
	if (f->dio_fd >= 0)
		close(f->dio_fd);
	if (f->map_fd >= 0)
		close(f->map_fd);
	f->map = NULL;
	f->data_fd = f->dio_fd = f->map_fd = -1;
}

/* Opens the object's files and pins them; creates or replaces them as needed. */
static int cache_file_attach_retrying(struct cache_file *f, const char *key)
{
	char path[PATH_MAX];
	int ret = -EAGAIN;

	cache_path(f->c, path, sizeof(path), f->shard, f->hash, ".map");
	for (int tries = 0; tries < 16 && ret == -EAGAIN; tries++) {
		f->map_fd = cache_open_locked(path, O_RDWR, LOCK_SH);
		if (f->map_fd >= 0)
			ret = cache_file_attach(f, key);
		else
			ret = f->map_fd == -ENOENT ? -EAGAIN : f->map_fd;
		if (ret == 0)
			return 0;
		cache_file_detach(f);
		if (ret == -EAGAIN) {
			ret = cache_make_object(f, key);
			ret = ret < 0 ? ret : -EAGAIN;
		}
	}
	return ret;
}

/* ---- fetch buffers ---- */

/*
 * A buffer of CACHE_RUN_MAX blocks for one fetch.  Kept for reuse: a fresh
 * multi-megabyte malloc is a fresh mmap, whose page faults and zeroing
 * cost as much CPU as the copy of the data itself.
 */
static void *cache_buf_get(struct cache *c)
{
	void *buf = NULL;

	pthread_mutex_lock(&c->qlock);
	if (c->n_spare > 0)
		buf = c->spare[--c->n_spare];
	c->spare_taken = mono_ns();
	pthread_mutex_unlock(&c->qlock);
	if (buf)
		return buf;
	/* Huge pages where the kernel has them: 2 faults per buffer, not 1,024. */
	if (posix_memalign(&buf, CACHE_BUF_ALIGN, (size_t)CACHE_RUN_MAX * CACHE_BLOCK))
		return NULL;
	madvise(buf, (size_t)CACHE_RUN_MAX * CACHE_BLOCK, MADV_HUGEPAGE);
	return buf;
}

static void cache_buf_put(struct cache *c, void *buf)
{
	pthread_mutex_lock(&c->qlock);
	if (c->n_spare < CACHE_SPARE_BUFS) {
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
	void *drop[CACHE_SPARE_BUFS];
	int n = 0;

	if (!c)
		return;
	pthread_mutex_lock(&c->qlock);
	while (atomic_load(&c->hot_bytes) == 0 && mono_ns() - c->spare_taken > 1000000000 &&
	       c->n_spare > CACHE_SPARE_IDLE)
		drop[n++] = c->spare[--c->n_spare];
	pthread_mutex_unlock(&c->qlock);
	while (n > 0)
		free(drop[--n]);
}

/* ---- hot runs ---- */

/* Frees @r, already unlinked.  Called with f->lock held or before @r is linked. */
static void cache_run_free(struct cache_file *f, struct cache_run *r)
{
	atomic_fetch_sub(&f->c->hot_bytes, r->len);
	cache_buf_put(f->c, r->buf);
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
static void cache_run_settle(struct cache_file *f, struct cache_run *r)
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
					 .buf = cache_buf_get(c), .state = CACHE_RUN_FETCHING };
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
static struct cache_run *cache_run_find(struct cache_file *f, uint64_t b)
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
 * The data file opened O_DIRECT, for writing hot runs, opened at the first
 * such write (a file never read sequentially needs none); -1 once the
 * folder refused O_DIRECT.  Borrowed, valid until close.
 */
static int cache_dio_fd(struct cache_file *f)
{
	char path[64];
	int fd;

	if (atomic_load(&f->c->no_dio))
		return -1;
	pthread_mutex_lock(&f->lock);
	if (f->dio_fd < 0) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", f->data_fd);
		f->dio_fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
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

static void cache_task_done(struct cache_file *f);
static int cache_start_threads(struct cache *c);

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
			log_warn("cache: object %s: cannot keep fetched blocks (%s); they are "
				 "fetched again when read again", f->hash, strerror((int)-n));
		if (n == -ENOSPC || n == -EDQUOT)
			cache_evict(f->c);
	}
	cache_lock_blocks(f, lock_fd, r->b0, r->b1, F_UNLCK, false);
	close(lock_fd);
	cache_run_written(f, r);
}

/*
 * Makes a complete object survive a reboot: its data synced, then its map
 * flagged, through the map file (other processes see the flag in their
 * mappings of it; they only ever set the same bit).
 */
static void cache_sync_object(int data_fd, int map_fd)
{
	uint32_t flags;
	off_t at = (off_t)offsetof(struct cache_map_hdr, flags);

	if (fdatasync(data_fd) < 0 || pread(map_fd, &flags, sizeof(flags), at) != sizeof(flags))
		return;
	flags |= CACHE_DURABLE;
	if (pwrite(map_fd, &flags, sizeof(flags), at) != sizeof(flags))
		log_debug("cache: cannot flag an object durable: %s", strerror(errno));
}

static void *cache_writer(void *arg)
{
	struct cache *c = arg;
	struct cache_write *w;

	for (;;) {
		struct cache_sync *s = NULL;

		pthread_mutex_lock(&c->qlock);
		while (!c->whead && !c->shead && !c->stopping)
			pthread_cond_wait(&c->wcond, &c->qlock);
		w = c->whead;
		if (w && !(c->whead = w->next))
			c->wtail = NULL;
		if (!w && (s = c->shead)) {	/* hot runs first: readers may wait for them */
			c->shead = s->next;
			c->n_syncs--;
		}
		pthread_mutex_unlock(&c->qlock);
		if (s) {
			cache_sync_object(s->data_fd, s->map_fd);
			close(s->data_fd);
			close(s->map_fd);	/* the pin goes */
			free(s);
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
 * Fetches blocks [b0, b1) (at most CACHE_RUN_MAX), whose OFD locks the
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
	buf = r ? r->buf : cache_buf_get(f->c);
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
		cache_buf_put(f->c, buf);
	return n < 0 ? (int)n : 0;
}

static bool cache_file_complete(struct cache_file *f)
{
	return !memchr(f->map + f->hdr_len, 0, f->nblocks);
}

/*
 * Hands a complete object to the writers to make durable, with its own
 * descriptors (the map's keeps it pinned meanwhile), so that the close that
 * completes it, a FUSE thread, waits for no disk flush: a first epoch of
 * small files closed one a millisecond.  False when it cannot.
 */
static bool cache_sync_queue(struct cache_file *f)
{
	struct cache *c = f->c;
	struct cache_sync *s = malloc(sizeof(*s));

	if (!s)
		return false;
	s->data_fd = fcntl(f->data_fd, F_DUPFD_CLOEXEC, 0);
	s->map_fd = s->data_fd >= 0 ? fcntl(f->map_fd, F_DUPFD_CLOEXEC, 0) : -1;
	pthread_mutex_lock(&c->qlock);
	if (s->map_fd >= 0 && c->n_syncs < CACHE_SYNCS_MAX && !c->stopping &&
	    (c->n_writers > 0 || cache_start_threads(c) == 0 || c->n_writers > 0)) {
		s->next = c->shead;
		c->shead = s;
		c->n_syncs++;
		pthread_cond_signal(&c->wcond);
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
static void cache_file_make_durable(struct cache_file *f)
{
	struct cache_map_hdr *h = (struct cache_map_hdr *)f->map;

	if ((__atomic_load_n(&h->flags, __ATOMIC_RELAXED) & CACHE_DURABLE) ||
	    !cache_file_complete(f) || cache_sync_queue(f))
		return;
	if (fdatasync(f->data_fd) == 0)
		__atomic_or_fetch(&h->flags, CACHE_DURABLE, __ATOMIC_RELEASE);
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
static int cache_file_fill(struct cache_file *f, uint64_t b0, uint64_t b1, bool wait)
{
	uint64_t run = b1, bytes = 0;	/* run: first block of the locked run, b1 if none */
	char path[64];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", f->map_fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (uint64_t b = b0; b < b1 && ret >= 0; b++) {
		if (run != b1 && b - run == CACHE_RUN_MAX) {
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

/* ---- read-ahead ---- */

static void cache_task_done(struct cache_file *f)
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
static int cache_start_threads(struct cache *c)
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
	uint64_t from, to, queued;

	pthread_mutex_lock(&f->lock);
	if (f->next_off && off + CACHE_SEQ_SLACK >= f->next_off &&
	    off <= f->next_off + CACHE_SEQ_SLACK) {
		f->window = f->window * 2 > CACHE_RA_MAX ? CACHE_RA_MAX : f->window * 2;
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
	if (to < f->nblocks)		/* whole chunks only: few large fetches */
		to = to / CACHE_RA_CHUNK * CACHE_RA_CHUNK;
	for (uint64_t b = from; b < to; b = (b / CACHE_RA_CHUNK + 1) * CACHE_RA_CHUNK) {
		uint64_t e = (b / CACHE_RA_CHUNK + 1) * CACHE_RA_CHUNK;

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

static int cache_make_dirs(const char *dir)
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
	pthread_cond_init(&c->wcond, NULL);
	c->max_bytes = max_bytes;
	c->hot_budget = max_bytes / 8 < CACHE_HOT_BUDGET ? max_bytes / 8 : CACHE_HOT_BUDGET;
	cache_read_boot_id(c->boot_id);
	c->dir = strdup(dir);
	ret = c->dir ? cache_make_dirs(dir) : -ENOMEM;
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

int cache_file_open(struct cache *c, struct cache_file **out, const char *key, uint64_t size,
		    struct cache_stats *stats, cache_fetch_fn *fetch, void *arg)
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
	else
		ret = cache_file_attach_retrying(f, key);
	if (ret == -ENOSPC || ret == -EDQUOT) {
		/* our disk is full, not the remote: read uncached, and make room */
		log_warn("cache: %s: no room for object %s (%s), reading uncached", c->dir,
			 f->hash, strerror(-ret));
		cache_evict(c);
		f->bypass = true;
		ret = 0;
	} else if (ret == -EBUSY || ret == -EAGAIN) {
		log_warn("cache: object %s unusable (%s), reading uncached", f->hash,
			 strerror(-ret));
		f->bypass = true;
		ret = 0;
	}
	if (ret < 0) {
		cache_file_close(f);
		return ret;
	}
	if (f->bypass)
		atomic_fetch_add(&c->bypassed, 1);
	*out = f;
	return 0;
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
	pthread_mutex_lock(&f->lock);
	mapped = cache_file_map_data(f);
	pthread_mutex_unlock(&f->lock);
	if (!mapped)
		return -ENOTSUP;
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

	if (f->bypass)
		return -1;
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
