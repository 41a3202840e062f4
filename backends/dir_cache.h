/*
 * dir_cache.h - folders kept under a size in a cache folder shared by mlfs
 * processes (cache_dir/git's commits, cache_dir/archives' extractions),
 * each held while it is read and the least recently read removed first.
 *
 * A reader holds flock(LOCK_SH) of FOLDER.used (the stamp, its mtime the
 * last read) for as long as it reads FOLDER; an evictor removes FOLDER only
 * with LOCK_EX of the stamp, taken without waiting, and unlinks the stamp
 * before it lets it go.  A lock taken on a stamp the evictor unlinked
 * meanwhile is not the folder's any more: dir_cache_flock sees that (the
 * path's inode is not the fd's) and takes the new one, so a reader holds its
 * folder or finds it gone, never a folder half removed.
 */
#ifndef MLFS_DIR_CACHE_H
#define MLFS_DIR_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* snprintf into @buf: false when it does not fit. */
__attribute__((format(printf, 3, 4)))
bool dir_cache_fmt(char *buf, size_t size, const char *fmt, ...);

/*
 * flock(@op) of file @path (made when missing; @op may add LOCK_NB): its fd
 * once the lock is that of the file at @path now, -EWOULDBLOCK, or -errno.
 */
int dir_cache_flock(const char *path, int op);

/* Holds folder @dir as read (LOCK_SH of @dir.used, dated now) until the fd returned is closed. */
int dir_cache_hold(const char *dir);

/* Whether @s is @n lowercase hex digits and nothing more (a key's or a commit's name). */
bool dir_cache_is_hex(const char *s, size_t n);

/* @t as "2026-11-28 10:02:11 UTC", for the log, in @buf. */
const char *dir_cache_when(const struct timespec *t, char *buf, size_t size);

/* Folders a pass may remove, with when each was read last (its stamp's mtime, else its own). */
struct dir_cache_entry {
	char *name;
	size_t owner;		/* the caller's: which parent it came from */
	struct timespec used;
};

struct dir_cache_list {
	struct dir_cache_entry *v;
	size_t n, cap;
};

/*
 * Adds to @l the folders of @dir whose names @is_entry accepts, tagged
 * @owner: 0 (a missing @dir adds none), -ENOMEM (what was added stays), -errno.
 */
int dir_cache_list_add(struct dir_cache_list *l, const char *dir,
		       bool (*is_entry)(const char *name), size_t owner);
/* Sorts @l, the least recently read first. */
void dir_cache_list_sort(struct dir_cache_list *l);
void dir_cache_list_free(struct dir_cache_list *l);

/* Bytes folder @path takes: st_blocks of all below, a file of n links counted 1/n each time. */
uint64_t dir_cache_du(const char *path);

/*
 * Removes from @top, while it takes more than @max bytes (0: no limit), the
 * folders least recently read that no one holds, among those whose names
 * @is_entry accepts; each removal logged with @what ("archive cache"), and
 * what stays over @max with the config @key that sets it.  What @top takes
 * afterwards, in bytes.
 */
uint64_t dir_cache_evict(const char *top, uint64_t max, bool (*is_entry)(const char *name),
			 const char *what, const char *key);

/*
 * Removes the folders of @top whose names hold @marker (".tmp-": a
 * temporary folder) and that nothing changed for @age seconds: what a
 * process that died while it filled one left.
 */
void dir_cache_sweep(const char *top, const char *marker, time_t age);

/*
 * Removes folder @dir, held for removal (@stamp: LOCK_EX of @dir.used), by
 * renaming it away first: whoever looks for it next finds it gone, never
 * half there.  Unlinks the stamp; closes @stamp.
 */
void dir_cache_remove(const char *dir, int stamp);

#endif
