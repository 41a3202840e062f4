/*
 * cache_int.h - what the files of the disk cache (cache.c, cache_evict.c)
 * share: the on-disk layout, the structs, and a few helpers.  Private to
 * core/; the contract is include/cache.h.
 */
#ifndef MLFS_CACHE_INT_H
#define MLFS_CACHE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache.h"

#define CACHE_BLOCK		(1u << 20)		/* bytes per block */
#define CACHE_RA_MIN		(256u << 10)		/* read-ahead after a seek */
#define CACHE_RA_MAX		(32u << 20)		/* read-ahead of a long sequential read */
#define CACHE_RA_LONG		(64u << 20)		/* ... of long fetches: three runs ahead */
#define CACHE_RA_CHUNK		4			/* blocks per background fetch */
#define CACHE_SEQ_SLACK		(1u << 20)		/* reordered reads still count as sequential */
#define CACHE_RUN_MAX		4			/* blocks per fetch call at most */
#define CACHE_RUN_LONG		16			/* ... for a backend that pays per request */
#define CACHE_SPARE_LONG	4			/* long fetch buffers kept for reuse */
#define CACHE_SPARE_BUFS	24			/* fetch buffers kept for reuse while reading */
#define CACHE_SPARE_IDLE	2			/* ... and once none was taken for a second */
#define CACHE_THREADS		4			/* background fetchers per struct cache */
#define CACHE_WRITERS		2			/* background writers of hot runs */
#define CACHE_SYNCS_MAX		256			/* closed objects waiting to be made durable */
#define CACHE_SYNC_BATCH	64			/* ... synced together once this many wait */
#define CACHE_SYNC_DELAY_NS	1000000000ll		/* ... or the oldest waited this long */
#define CACHE_HOT_RUNS		16			/* fetched runs one open file keeps in memory */
#define CACHE_HOT_BUDGET	(256ull << 20)		/* bytes of such runs per struct cache, */
							/* at most an eighth of max_bytes */
#define CACHE_DEFER_SLOTS	1024			/* buckets of the written-behind objects' table */
#define CACHE_DIO_ALIGN		4096			/* O_DIRECT alignment: buffers, offsets, lengths */
#define CACHE_BUF_ALIGN		(2u << 20)		/* fetch buffers: a huge page */
#define CACHE_SEG_MAX		18			/* pieces of one read: 16 MiB at most */
#define CACHE_KEY_MAX		65536
#define CACHE_HASH_LEN		64			/* hex SHA-256 */
#define CACHE_TMP_AGE		3600			/* seconds before a stray temp file goes */
#define CACHE_MAGIC		"MLFSMAP1"
#define CACHE_DURABLE		1u			/* data fdatasync'd once complete */
/*
 * A sealed map's mode: the owner's x bit, set once the object is complete
 * and its data durable (after CACHE_DURABLE), so an open knows it from the
 * fstat it makes anyway and never reads the map's bytes (a second cold
 * file for each object of a next job's epoch).  Nothing changes such an
 * object; a replaced one is new files (mode 0600).
 */
#define CACHE_SEALED		S_IXUSR

/* The map file's header, host byte order (the cache never leaves the node). */
struct cache_map_hdr {
	char magic[8];
	uint32_t block_size;
	uint32_t key_len;
	uint64_t size;
	char boot_id[40];			/* /proc/sys/kernel/random/boot_id at creation */
	uint32_t flags;				/* CACHE_DURABLE */
	uint32_t pad;
};

struct cache_task {
	struct cache_task *next;
	struct cache_file *f;
	uint64_t b0, b1;			/* blocks to read ahead */
};

/*
 * A complete object closed before it was made durable: the writers sync
 * it (cache_sync_objects), in batches.  Its own descriptors of the data
 * file and of the map (a description without the pin's flock: waiting
 * here never keeps it from eviction).
 */
struct cache_sync {
	struct cache_sync *next;
	int data_fd, map_fd;
	char hash[CACHE_HASH_LEN + 1];		/* the object's: it is queued once */
};

/* A hot run to write, with a descriptor holding the OFD locks of its blocks. */
struct cache_write {
	struct cache_write *next;
	struct cache_file *f;
	struct cache_run *r;
	int lock_fd;
};

enum cache_warn_kind {
	CACHE_WARN_OPEN,			/* an object's files: read uncached */
	CACHE_WARN_KEEP,			/* fetched blocks not written */
	CACHE_WARN_DEFER,			/* a small object not written behind */
	CACHE_WARN_KINDS
};

struct cache {
	char *dir;
	uint64_t max_bytes;
	uint64_t *usage;			/* mmap of DIR/usage, shared by all processes */
	char boot_id[40];
	atomic_uint_fast64_t evictions, evicted_bytes, bypassed;
	atomic_int_fast64_t stuck_until;	/* no scan before (CLOCK_MONOTONIC ns) */
	pthread_t threads[CACHE_THREADS];
	int n_threads;
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct cache_task *head, *tail;		/* guarded by qlock */
	bool stopping;				/* guarded by qlock */
	pthread_t writers[CACHE_WRITERS];
	int n_writers;
	pthread_cond_t wcond;
	struct cache_write *whead, *wtail;	/* guarded by qlock */
	struct cache_sync *shead;		/* guarded by qlock: objects to make durable */
	int n_syncs;				/* guarded by qlock */
	int64_t sync_since;			/* guarded by qlock: mono_ns when shead was set */
	void *spare[CACHE_SPARE_BUFS];		/* guarded by qlock: fetch buffers to reuse */
	int n_spare;
	void *spare_long[CACHE_SPARE_LONG];	/* guarded by qlock: the same, CACHE_RUN_LONG */
	int n_spare_long;
	int64_t spare_taken;			/* guarded by qlock: mono_ns of the last take */
	atomic_uint_fast64_t hot_bytes;		/* held by hot runs, all files */
	uint64_t hot_budget;			/* the most hot_bytes may be */
	atomic_bool no_dio;			/* the folder refused O_DIRECT once: not again */
	atomic_int_fast64_t warned_at[CACHE_WARN_KINDS];	/* mono_ns of each kind's last
								 * cache_warn line; 0: none */
	atomic_int warned_err[CACHE_WARN_KINDS];	/* ... the errno it named */
	atomic_uint unwarned[CACHE_WARN_KINDS];		/* ... and those held back since */
	/* small objects written behind (cache_defer.c) */
	pthread_mutex_t dlock;
	pthread_cond_t dcond;			/* a fetch ended, an object was written, stop */
	struct cache_defer **dtab;		/* guarded by dlock: CACHE_DEFER_SLOTS buckets */
	struct cache_defer *dqhead, *dqtail;	/* guarded by dlock: to write, in order */
	uint64_t defer_bytes;			/* guarded by dlock: held by the table's objects */
	int defer_count;			/* guarded by dlock: the table's objects */
	uint64_t defer_budget;			/* the most defer_bytes may be */
	int64_t dlast;				/* guarded by dlock: mono_ns of the last added */
	int dflush;				/* guarded by dlock: cache_drain callers waiting */
	bool dwriting, dstop, dwriter_on;	/* guarded by dlock */
	pthread_t dwriter;
};

enum cache_run_state { CACHE_RUN_FETCHING, CACHE_RUN_READY, CACHE_RUN_FAILED };

/*
 * A hot run: blocks [b0, b1) as fetched, kept in memory so readers of this
 * process are answered from it while (and after) it is written to the data
 * file, which it is with O_DIRECT: a first read fills no page cache of the
 * data file.  Guarded by its file's lock.
 */
struct cache_run {
	struct cache_run *next;
	uint64_t b0, b1;
	unsigned char *buf;			/* CACHE_DIO_ALIGN-aligned */
	size_t len;				/* bytes of the object in it */
	size_t used;				/* bytes readers took from it */
	int refs;				/* readers replying from buf now */
	enum cache_run_state state;
	bool written;				/* the write is over (done or failed) */
};

struct cache_file {
	struct cache *c;
	struct cache_stats *stats;
	cache_fetch_fn *fetch;
	void *arg;
	uint64_t size, nblocks;
	unsigned int run_blocks;		/* blocks a fetch asks for at most: CACHE_RUN_MAX,
						 * or CACHE_RUN_LONG (cache_file_long_fetches) */
	uint64_t ra_max;			/* the read-ahead window at most: CACHE_RA_MAX,
						 * or CACHE_RA_LONG with CACHE_RUN_LONG */
	bool bypass;
	int shard;				/* the object's folder, 0..255 */
	char hash[CACHE_HASH_LEN + 1];
	int map_fd;				/* holds flock(LOCK_SH): the pin */
	int data_fd;				/* O_RDWR */
	int dio_fd;				/* the same, O_WRONLY | O_DIRECT; -1 until needed */
	/* the data file, PROT_READ, mapped at the first read through the daemon (under lock) */
	unsigned char *data_map;
	/*
	 * The whole map file: MAP_SHARED, or, for a complete and durable
	 * object (whose map nobody changes while it is pinned), a private
	 * copy (map_copied): most opens of a cached epoch map nothing.
	 */
	unsigned char *map;
	bool map_copied;
	size_t map_len, hdr_len;
	atomic_bool closing;
	atomic_bool write_failed;		/* a hot run's write failed: logged once */
	pthread_mutex_t lock;
	pthread_cond_t idle;
	/* guarded by lock */
	uint64_t next_off;			/* where a sequential read continues */
	uint64_t window;			/* read-ahead bytes */
	uint64_t ra_end;			/* read-ahead issued up to here */
	int pending;				/* queued or running read-ahead tasks and writes */
	int writes;				/* of those, hot runs queued or being written */
	int readers;				/* in cache_file_read_iov after its lookup */
	struct cache_run *runs;			/* hot runs, oldest first */
	int n_runs;
	pthread_cond_t run_cond;		/* a run stopped fetching */
	int ro_fd;				/* for cache_file_fd, -1 until complete */
	struct cache_defer *dfr;		/* a small object served from memory, or NULL */
};

/* cache.c */
int cache_errno(void);
void cache_path(struct cache *c, char *buf, size_t size, int shard, const char *hash,
		       const char *suffix);
int cache_open_locked(const char *path, int flags, int op);
/* Makes DIR and DIR/objects where they are missing: 0 or -errno. */
int cache_make_dirs(const char *dir);

/*
 * Logs a failure of the cache's own disk (full, read-only, gone, failing)
 * with errno @err: of each kind the first, then, while the errno stays the
 * same, at most one a minute, saying how many were held back, so an epoch
 * over a broken cache folder writes a line, not one per file.
 */
void cache_warn(struct cache *c, enum cache_warn_kind kind, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* cache_evict.c */
void cache_evict(struct cache *c);
void cache_usage_add(struct cache *c, uint64_t bytes);

/* ---- cache.c, for cache_object.c, cache_fetch.c and cache_defer.c ---- */

/*
 * cache_file_open, never written behind (cache_defer.c writes through it);
 * a failure of the cache's disk is -errno here, not an uncached read.
 */
int cache_file_open_now(struct cache *c, struct cache_file **out, const char *key,
			uint64_t size, struct cache_stats *stats, cache_fetch_fn *fetch, void *arg);

/* pwrite of all @len bytes (through EINTR and short writes); bytes or -errno. */
ssize_t cache_pwrite_all(int fd, const void *buf, size_t len, off_t off);

/*
 * A buffer of @blocks blocks (CACHE_RUN_MAX or CACHE_RUN_LONG) for one
 * fetch.  Kept for reuse: a fresh multi-megabyte malloc is a fresh mmap,
 * whose page faults and zeroing cost as much CPU as the copy of the data
 * itself.
 */
void *cache_buf_get(struct cache *c, unsigned int blocks);
/* Gives a buffer of cache_buf_get(@blocks) back for reuse. */
void cache_buf_put(struct cache *c, void *buf, unsigned int blocks);

/* Calls @fetch until @len bytes or the end of the object.  Returns bytes or -errno. */
ssize_t cache_fetch_all(struct cache_file *f, void *buf, size_t len, off_t off);

/* Locks (F_WRLCK) or unlocks (F_UNLCK) map bytes of blocks [b0, b1) on @fd. */
int cache_lock_blocks(struct cache_file *f, int fd, uint64_t b0, uint64_t b1, short type,
		      bool wait);

/* Whether block @b's map byte says its data is written. */
bool cache_block_present(struct cache_file *f, uint64_t b);

/* Seals the map of a complete object whose data is durable (CACHE_SEALED). */
void cache_seal(int map_fd);

/* A background task of @f (read-ahead, write) ended: wakes its close when none is left. */
void cache_task_done(struct cache_file *f);

/*
 * The read-ahead and writer threads start with the first read-ahead or hot
 * run, not with the cache: a daemon forks (fuse_daemonize) after making its
 * cache, and threads made before a fork are not in the child.  Called with
 * qlock held.
 */
int cache_start_threads(struct cache *c);

/* ---- cache_object.c ---- */

/*
 * Opens the object's files and pins them; creates or replaces them as
 * needed, except that without @create a map not there is -ENOENT.
 */
int cache_file_attach_retrying(struct cache_file *f, const char *key, bool create);

/* Unmaps and closes what cache_file_attach_retrying opened (the pin goes). */
void cache_file_detach(struct cache_file *f);

/*
 * Maps the data file read-only for cache_file_read_iov, at the first read
 * through the daemon (an open the kernel serves by passthrough never does);
 * the file never shrinks while pinned.  f->lock held.  False if it cannot.
 */
bool cache_file_map_data(struct cache_file *f);

/* The length of the map header of an object named @key. */
size_t cache_hdr_len(const char *key);

/* ---- cache_fetch.c ---- */

/* A writer thread: hot runs to write, then objects to make durable (cache_destroy ends it). */
void *cache_writer(void *arg);

/* Whether every block of the object is written. */
bool cache_file_complete(struct cache_file *f);

/*
 * Fills the missing blocks of [b0, b1).  @wait: a reader, which waits for
 * blocks someone else is fetching and fails with the fetch's error; else
 * read-ahead, which skips them.  Locks are taken in ascending order on a
 * description of the map file of its own, so other threads' locks count.
 */
int cache_file_fill(struct cache_file *f, uint64_t b0, uint64_t b1, bool wait);

/* Once complete, makes the object survive a reboot, mostly in a writer.  At close. */
void cache_file_make_durable(struct cache_file *f);

/* The hot run holding block @b, the oldest if several, or NULL.  f->lock held. */
struct cache_run *cache_run_find(struct cache_file *f, uint64_t b);

/* Frees @r, already unlinked.  Called with f->lock held or before @r is linked. */
void cache_run_free(struct cache_file *f, struct cache_run *r);

/* Frees @r once nobody replies from it, its write is over and its bytes were all read. */
void cache_run_settle(struct cache_file *f, struct cache_run *r);

/* ---- cache_defer.c ---- */

/* Sets up @c's table of objects written behind (at cache_create).  0 or -ENOMEM. */
int cache_defer_init(struct cache *c);

/* Writes what waits to be written, then stops the writer (at cache_destroy). */
void cache_defer_stop(struct cache *c);

/*
 * Opens @f, just made, if it is a small object (at most one block): from
 * memory (f->dfr set) when this process holds it or it is not on disk and
 * the budget has room, else from its files when they are there (*@ret the
 * attach's answer).  False when the caller must attach it, creating.
 */
bool cache_defer_open(struct cache_file *f, const char *key, int *ret);

/* cache_file_read_iov of a file written behind: its first read fetches the whole object. */
ssize_t cache_defer_read_iov(struct cache_file *f, size_t len, off_t off, cache_use_fn *use,
			     void *arg);

/* At close: the object, once fetched, goes to the writer; the open's reference goes. */
void cache_defer_close(struct cache_file *f);

/* Bytes of objects held in memory now, fetched or not yet written. */
uint64_t cache_defer_bytes(struct cache *c);

#endif
