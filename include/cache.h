/*
 * cache.h - the shared on-disk cache of remote files (DESIGN §8).
 *
 * Blocks of remote files are kept under cache_dir, shared by every mlfs
 * process of the node (gateways, `mlfs job`s), kept across restarts, and
 * evicted least-recently-used to stay under cache_size.  An object is named
 * by its key (backend.h, cache_key: source, path, version), so a changed
 * object gets a new name and is never served stale.
 *
 * A reader opens one cache_file per open of a remote file and reads through
 * it; a block that is missing is fetched through the caller's fetch function
 * (the backend's pread) and served from memory while it is written to the
 * cache behind the reader (up to a bounded amount; past it, written first
 * and served from the cache's page cache).  Read-ahead is
 * adaptive: it starts small, doubles while reads stay sequential, and drops
 * back on a seek; read-ahead fetches run in the background.  A block that
 * several threads or processes miss at once is fetched once.
 *
 * Once every block of an object is present, cache_file_fd() gives the data
 * file, so the kernel can read it directly (FUSE passthrough).
 */
#ifndef MLFS_CACHE_H
#define MLFS_CACHE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct cache;
struct cache_file;

/* Counters a caller owns (one per backend) and cache_file_open is given. */
struct cache_stats {
	atomic_uint_fast64_t hits;		/* reads served wholly from the cache */
	atomic_uint_fast64_t misses;		/* reads that waited for a fetch */
	atomic_uint_fast64_t bytes_hit;		/* bytes of reads served from the cache */
	atomic_uint_fast64_t bytes_fetched;	/* bytes fetched from the remote for the cache */
};

/* Counters of the whole cache, as seen by this process. */
struct cache_info {
	uint64_t max_bytes;		/* cache_size */
	uint64_t used_bytes;		/* last known use on disk, all processes */
	uint64_t evictions;		/* objects this process evicted */
	uint64_t evicted_bytes;
	uint64_t bypassed;		/* opens too large to cache, read directly */
	uint64_t memory_bytes;		/* fetched blocks held in memory for readers now */
	uint64_t write_behind_bytes;	/* small objects held in memory, not written yet */
};

/*
 * Reads @len bytes of the object at @off into @buf.  Returns the bytes read
 * (fewer only at the end of the object) or a negated errno.  Called from
 * the reading thread and from the cache's read-ahead threads, several at
 * once on the same @arg: it must be safe for concurrent calls.  Requests are
 * whole 1 MiB blocks at block-aligned offsets, up to 16 MiB per call (the
 * last block of the object is short).
 */
typedef ssize_t cache_fetch_fn(void *arg, void *buf, size_t len, off_t off);

/*
 * Opens (creating when missing) the cache in folder @dir, which may be in use
 * by other processes, holding at most @max_bytes.  @dir's parent must exist;
 * @dir is made 0700, files in it 0600, so processes sharing it run as one
 * uid.  It must be a local filesystem (OFD locks, flock).  Starts no
 * thread: its read-ahead threads start with the first read-ahead, so a
 * process may fork (daemonize) after this.  Returns 0 or a negated errno.
 */
int cache_create(struct cache **out, const char *dir, uint64_t max_bytes);
/*
 * Writes what waits to be written behind, then stops the read-ahead and
 * writer threads; every cache_file of @c must be closed first.
 */
void cache_destroy(struct cache *c);
/*
 * Waits until every small object read and closed so far is in the cache's
 * files: such an object (at most 1 MiB, not on disk yet) is fetched whole
 * into memory at its first read, served from there (cache_file_fd is -1),
 * and written by a writer thread at nice 19 after its first open closed
 * (core/cache_defer.c says when, and why).
 */
void cache_drain(struct cache *c);
void cache_get_info(struct cache *c, struct cache_info *info);
/*
 * Gives back the spare fetch buffers beyond a few once none was taken for a
 * second: for the daemon to call now and then (every few seconds).
 */
void cache_release_idle(struct cache *c);

/*
 * Opens object @key of @size bytes for reading; @stats is borrowed for the
 * file's lifetime; @fetch and @arg are how missing blocks are read, and must
 * stay valid until cache_file_close returns (it waits for read-ahead).
 * The key is any string up to 64 KiB (-ENAMETOOLONG past that).  An object
 * too large for the cache (over a quarter of max_bytes), or whose cached
 * files are damaged and held by another process, is read straight through
 * @fetch, uncached (counted in cache_info.bypassed).  While open, the
 * object is never evicted, by any process.  Returns 0 or a negated errno.
 */
int cache_file_open(struct cache *c, struct cache_file **out, const char *key, uint64_t size,
		    struct cache_stats *stats, cache_fetch_fn *fetch, void *arg);
/*
 * Makes @f's fetches and read-ahead chunks 16 MiB instead of 4, for a
 * backend that pays for each request (backend.h BE_CAP_LONG_FETCH: Azure,
 * FTP).  Only before the first read; a no-op after.
 */
void cache_file_long_fetches(struct cache_file *f);
/*
 * Returns the bytes read (short only at the end of the object, 0 at or past
 * it) or a negated errno: a fetch's error is returned unchanged, and nothing
 * of a failed fetch is kept, so a later read tries again.  When the local
 * disk is full the read is served straight from @fetch.  Any thread.
 */
ssize_t cache_file_read(struct cache_file *f, void *buf, size_t len, off_t off);
/*
 * Receives the bytes of a read as pieces in order (@cnt 0 at the end of the
 * object); they stay valid only until it returns.
 */
typedef void cache_use_fn(void *arg, const struct iovec *iov, int cnt);
/*
 * Like cache_file_read, without a copy: makes the bytes present and hands
 * them to @use, once, as pieces of the blocks fetched last (kept in memory
 * for this process's readers) or of a read-only mapping of the cache's data
 * file.  At most 16 MiB per call.  Returns their count, 0 at the end (@use
 * is still called), or -ENOTSUP when this open must be read with
 * cache_file_read (an object that bypasses the cache, a full local disk),
 * or another -errno (@use is not called).
 */
ssize_t cache_file_read_iov(struct cache_file *f, size_t len, off_t off, cache_use_fn *use,
			    void *arg);
/*
 * The data file when every block is present (after the writes of blocks
 * this open fetched, if any are under way), else -1: a read-only
 * descriptor whose content is exactly the object (size and bytes), for FUSE
 * passthrough.  Borrowed, valid until close.
 */
int cache_file_fd(struct cache_file *f);
/*
 * Drops queued read-ahead and waits for fetches under way; the first close
 * after the object became complete also fdatasyncs its data, so it survives
 * a reboot.  Accepts NULL.
 */
void cache_file_close(struct cache_file *f);

#endif
