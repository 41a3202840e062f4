/*
 * cache_object.c - an object's two files on disk (cache.c says the layout
 * and the locks): made under temporary names and renamed into place under
 * the shard's lock, validated (header, key, size, boot id or DURABLE), and
 * opened and pinned by an open (flock(LOCK_SH) on the map) with the map read
 * in or mapped (made in memory, unread, when sealed: CACHE_SEALED) and the
 * data file mapped at the first read through the daemon.
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

/* ---- creating, validating and opening an object ---- */

size_t cache_hdr_len(const char *key)
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
	if (mkdir(dir, 0700) < 0 && errno == ENOENT)
		cache_make_dirs(f->c->dir);	/* someone emptied the cache folder: anew */
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

/*
 * The map of a sealed object (CACHE_SEALED), made in memory rather than
 * read: complete, durable, this object's.  0 or -ENOMEM.
 */
static int cache_map_sealed(struct cache_file *f, const char *key)
{
	struct cache_map_hdr h = { .magic = CACHE_MAGIC, .block_size = CACHE_BLOCK,
				   .key_len = (uint32_t)strlen(key), .size = f->size,
				   .flags = CACHE_DURABLE };
	unsigned char *m = malloc(f->map_len);

	if (!m)
		return -ENOMEM;
	memcpy(m, &h, sizeof(h));
	memcpy(m + sizeof(h), key, h.key_len);
	memset(m + f->hdr_len, 1, f->nblocks);
	f->map = m;
	f->map_copied = true;
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
	ret = st.st_mode & CACHE_SEALED ? cache_map_sealed(f, key) : cache_map_in(f);
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
bool cache_file_map_data(struct cache_file *f)
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
	__atomic_store_n(&f->data_map, m, __ATOMIC_RELEASE);	/* read unlocked by cache_file_read_iov */
	return true;
}

void cache_file_detach(struct cache_file *f)
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

/*
 * Opens the object's files and pins them; creates or replaces them as
 * needed, except that without @create a map not there is -ENOENT.
 */
int cache_file_attach_retrying(struct cache_file *f, const char *key, bool create)
{
	char path[PATH_MAX];
	int ret = -EAGAIN;

	cache_path(f->c, path, sizeof(path), f->shard, f->hash, ".map");
	for (int tries = 0; tries < 16 && ret == -EAGAIN; tries++) {
		f->map_fd = cache_open_locked(path, O_RDWR, LOCK_SH);
		if (f->map_fd >= 0) {
			ret = cache_file_attach(f, key);
		} else if (f->map_fd == -ENOENT && !create) {
			f->map_fd = -1;
			return -ENOENT;
		} else {
			ret = f->map_fd == -ENOENT ? -EAGAIN : f->map_fd;
		}
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
