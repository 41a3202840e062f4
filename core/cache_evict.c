/*
 * cache_evict.c - keeping the disk cache under cache_size.
 *
 * DIR/usage holds an approximate count of the bytes cached, shared by every
 * process (a mapped counter bumped as blocks are stored).  When a store pushes
 * it over max_bytes, one evictor at a time (flock on DIR/evict.lock) scans
 * every object, sums what the data files really take on disk, and deletes the
 * least recently used (by the map file's mtime, touched at each open) until
 * the cache is under 90% (of its disk, when that is smaller or full), then
 * stores the true total back.  An object open in
 * any process holds flock(LOCK_SH) on its map: the evictor's LOCK_EX|LOCK_NB
 * fails and the object is skipped.  The scan also removes orphan data files
 * and temporary files older than CACHE_TMP_AGE.
 *
 * Threading: any thread may call cache_evict; the flock serialises evictors
 * of every process.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cache_int.h"
#include "log.h"
#include "mono.h"

/* ---- usage and eviction ---- */

struct cache_entry {
	struct timespec mtime;
	uint64_t bytes;
	int shard;
	char hash[CACHE_HASH_LEN + 1];
};

struct cache_scan {
	struct cache_entry *v;
	size_t n, cap;
	uint64_t total;
};

static int cache_entry_cmp(const void *a, const void *b)
{
	const struct timespec *x = &((const struct cache_entry *)a)->mtime;
	const struct timespec *y = &((const struct cache_entry *)b)->mtime;

	if (x->tv_sec != y->tv_sec)
		return x->tv_sec < y->tv_sec ? -1 : 1;
	return (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

/* Deletes one object unless it is open somewhere.  Returns 0, -EBUSY or -errno. */
static int cache_evict_one(struct cache *c, int shard, const char *hash)
{
	char path[PATH_MAX];
	int dfd, mfd, ret = 0;
	struct stat st;

	cache_path(c, path, sizeof(path), shard, NULL, NULL);
	dfd = cache_open_locked(path, O_RDONLY | O_DIRECTORY, LOCK_EX);
	if (dfd < 0)
		return dfd;
	cache_path(c, path, sizeof(path), shard, hash, ".map");
	mfd = cache_open_locked(path, O_RDONLY, LOCK_EX | LOCK_NB);
	if (mfd == -EWOULDBLOCK)
		ret = -EBUSY;
	else if (mfd < 0)
		ret = mfd;
	else if (fstat(mfd, &st) == 0 && st.st_nlink > 0) {
		unlink(path);
		cache_path(c, path, sizeof(path), shard, hash, ".data");
		unlink(path);
	}
	if (mfd >= 0)
		close(mfd);
	close(dfd);
	return ret;
}

/* Deletes a data file whose map is gone (a crash between the two renames). */
static void cache_drop_orphan(struct cache *c, int shard, const char *name)
{
	char path[PATH_MAX], hash[CACHE_HASH_LEN + 1];
	struct stat st;
	int dfd;

	snprintf(hash, sizeof(hash), "%.*s", CACHE_HASH_LEN, name);
	cache_path(c, path, sizeof(path), shard, NULL, NULL);
	dfd = cache_open_locked(path, O_RDONLY | O_DIRECTORY, LOCK_EX);
	if (dfd < 0)
		return;
	cache_path(c, path, sizeof(path), shard, hash, ".map");
	if (stat(path, &st) < 0 && errno == ENOENT) {
		cache_path(c, path, sizeof(path), shard, hash, ".data");
		unlink(path);
	}
	close(dfd);
}

static int cache_scan_add(struct cache_scan *s, int dfd, int shard, const char *name)
{
	struct cache_entry *e;
	char data[CACHE_HASH_LEN + 8];
	struct stat mst, dst;

	if (fstatat(dfd, name, &mst, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	snprintf(data, sizeof(data), "%.*s.data", CACHE_HASH_LEN, name);
	if (fstatat(dfd, data, &dst, AT_SYMLINK_NOFOLLOW) < 0)
		dst.st_blocks = 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		struct cache_entry *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	e = &s->v[s->n++];
	e->mtime = mst.st_mtim;
	e->bytes = (uint64_t)(mst.st_blocks + dst.st_blocks) * 512;
	e->shard = shard;
	snprintf(e->hash, sizeof(e->hash), "%.*s", CACHE_HASH_LEN, name);
	s->total += e->bytes;
	return 0;
}

/* Looks at one file of a shard: an object's map, an orphan's data, an old temp file. */
static int cache_scan_name(struct cache *c, struct cache_scan *s, int dfd, int shard,
			   const char *name)
{
	size_t len = strlen(name);
	char map[CACHE_HASH_LEN + 8];
	struct stat st;

	if (len == CACHE_HASH_LEN + 4 && strcmp(name + CACHE_HASH_LEN, ".map") == 0)
		return cache_scan_add(s, dfd, shard, name);
	if (len == CACHE_HASH_LEN + 5 && strcmp(name + CACHE_HASH_LEN, ".data") == 0) {
		snprintf(map, sizeof(map), "%.*s.map", CACHE_HASH_LEN, name);
		if (fstatat(dfd, map, &st, 0) < 0 && errno == ENOENT)
			cache_drop_orphan(c, shard, name);
	} else if (strncmp(name, ".tmp.", 5) == 0 && fstatat(dfd, name, &st, 0) == 0 &&
		   st.st_mtime < time(NULL) - CACHE_TMP_AGE) {
		unlinkat(dfd, name, 0);
	}
	return 0;
}

static int cache_scan_all(struct cache *c, struct cache_scan *s)
{
	char path[PATH_MAX];
	struct dirent *de;
	int ret = 0;

	for (int shard = 0; shard < 256 && ret == 0; shard++) {
		DIR *d;

		cache_path(c, path, sizeof(path), shard, NULL, NULL);
		d = opendir(path);
		if (!d)
			continue;
		while (ret == 0 && (de = readdir(d)))
			ret = cache_scan_name(c, s, dirfd(d), shard, de->d_name);
		closedir(d);
	}
	return ret;
}

/*
 * Scans the whole cache and deletes least-recently-used objects not in use
 * until under 90% of max_bytes, or of what its disk can hold when that is
 * less (a disk smaller than cache_size, or filled by others: what is cached
 * plus what is free); stores the true use in the shared counter.
 * The caller holds DIR/evict.lock.
 */
static void cache_scan_and_evict(struct cache *c)
{
	struct cache_scan s = { 0 };
	uint64_t target = c->max_bytes / 10 * 9;
	struct statvfs sv;

	if (cache_scan_all(c, &s) < 0) {
		free(s.v);
		return;
	}
	if (statvfs(c->dir, &sv) == 0) {
		uint64_t room = s.total + (uint64_t)sv.f_bavail * sv.f_frsize;

		if (room / 10 * 9 < target)
			target = room / 10 * 9;
	}
	if (s.total > target)
		qsort(s.v, s.n, sizeof(*s.v), cache_entry_cmp);
	for (size_t i = 0; i < s.n && s.total > target; i++) {
		if (cache_evict_one(c, s.v[i].shard, s.v[i].hash) < 0)
			continue;
		s.total -= s.v[i].bytes;
		atomic_fetch_add(&c->evictions, 1);
		atomic_fetch_add(&c->evicted_bytes, s.v[i].bytes);
	}
	__atomic_store_n(c->usage, s.total, __ATOMIC_RELAXED);
	if (s.total > c->max_bytes)
		atomic_store(&c->stuck_until, mono_ns() + 1000000000);
	free(s.v);
}

/*
 * Scans, and evicts if needed, unless another process or thread is doing it
 * now.  When objects in use keep the cache over its size, every fetch would
 * scan again: after such a scan, this process waits a second before the next.
 */
void cache_evict(struct cache *c)
{
	char path[PATH_MAX];
	int fd;

	if (mono_ns() < atomic_load(&c->stuck_until))
		return;
	snprintf(path, sizeof(path), "%s/evict.lock", c->dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		cache_scan_and_evict(c);
	close(fd);
}

void cache_usage_add(struct cache *c, uint64_t bytes)
{
	uint64_t used = __atomic_add_fetch(c->usage, (bytes + 4095) & ~(uint64_t)4095,
					   __ATOMIC_RELAXED);

	if (used > c->max_bytes)
		cache_evict(c);
}

