/*
 * dir_cache.c - folders of a shared cache folder, held while read and the
 * least recently read removed first (dir_cache.h says the protocol).  Used
 * by be_git_evict.c, whose repositories add a level and a lock of their
 * own, and whole by the archive backend for cache_dir/archives.
 *
 * A pass sums what the folder takes (a walk of every file: it runs after
 * something was added, not at every read), sorts the entries by their
 * stamps' mtimes and removes the oldest no one holds while it is over; what
 * is held stays however big, and the log says so.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dir_cache.h"
#include "log.h"
#include "path.h"

bool dir_cache_fmt(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n >= 0 && (size_t)n < size;
}

int dir_cache_flock(const char *path, int op)
{
	struct stat at, have;
	int fd, ret;

	for (;;) {
		if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
			return -errno;
		while ((ret = flock(fd, op)) < 0 && errno == EINTR)
			;
		if (ret < 0) {
			ret = -errno;
			close(fd);
			return ret;
		}
		/* an evictor may have unlinked it (and what it guards) while we waited */
		if (fstat(fd, &have) == 0 && stat(path, &at) == 0 && at.st_ino == have.st_ino &&
		    at.st_dev == have.st_dev)
			return fd;
		close(fd);
		if (op & LOCK_NB)
			return -EWOULDBLOCK;
	}
}

int dir_cache_hold(const char *dir)
{
	char path[PATH_MAX];
	int fd;

	if (!dir_cache_fmt(path, sizeof(path), "%s.used", dir))
		return -ENAMETOOLONG;
	if ((fd = dir_cache_flock(path, LOCK_SH)) >= 0 && futimens(fd, NULL) < 0) {
		int ret = -errno;

		close(fd);
		return ret;
	}
	return fd;
}

/* Bytes under folder @fd (closed here). */
static uint64_t dir_cache_du_fd(int fd)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;
	struct stat st;
	uint64_t sum = 0;

	if (!d) {
		close(fd);
		return 0;
	}
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		sum += (uint64_t)st.st_blocks * 512 / (st.st_nlink > 1 && !S_ISDIR(st.st_mode) ?
						       (uint64_t)st.st_nlink : 1);
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub >= 0)
				sum += dir_cache_du_fd(sub);
		}
	}
	closedir(d);
	return sum;
}

uint64_t dir_cache_du(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	return fd < 0 ? 0 : dir_cache_du_fd(fd);
}

void dir_cache_remove(const char *dir, int stamp)
{
	char path[PATH_MAX];

	if (dir_cache_fmt(path, sizeof(path), "%s.used", dir))
		unlink(path);	/* a later reader makes a new one */
	if (dir_cache_fmt(path, sizeof(path), "%s.gone.%ld", dir, (long)getpid()) &&
	    rename(dir, path) == 0)
		path_remove_tree(path);
	close(stamp);
}

void dir_cache_sweep(const char *top, const char *marker, time_t age)
{
	char path[PATH_MAX];
	struct dirent *e;
	struct stat st;
	time_t now = time(NULL);
	DIR *d = opendir(top);

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strstr(e->d_name, marker) &&
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode) && st.st_mtime + age < now &&
		    dir_cache_fmt(path, sizeof(path), "%s/%s", top, e->d_name)) {
			log_info("cache: removing %s, left unfinished since %ld s", path,
				 (long)(now - st.st_mtime));
			path_remove_tree(path);
		}
	closedir(d);
}

/* ---- the folders a pass may remove, oldest read first ---- */

bool dir_cache_is_hex(const char *s, size_t n)
{
	return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

static int dir_cache_time_cmp(const struct timespec *x, const struct timespec *y)
{
	if (x->tv_sec != y->tv_sec)
		return x->tv_sec < y->tv_sec ? -1 : 1;
	return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

int dir_cache_list_add(struct dir_cache_list *l, const char *dir,
		       bool (*is_entry)(const char *name), size_t owner)
{
	struct dirent *e;
	struct stat st;
	char stamp[NAME_MAX + 8];
	int ret = 0;
	DIR *d = opendir(dir);

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (ret == 0 && (e = readdir(d))) {
		struct dir_cache_entry *t;

		if (!is_entry(e->d_name) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		if (l->n == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 32;

			if (!(t = realloc(l->v, cap * sizeof(*t)))) {
				ret = -ENOMEM;
				break;
			}
			l->v = t;
			l->cap = cap;
		}
		t = &l->v[l->n];
		*t = (struct dir_cache_entry){ .name = strdup(e->d_name), .owner = owner,
					       .used = st.st_mtim };
		if (!t->name) {
			ret = -ENOMEM;
			break;
		}
		if (dir_cache_fmt(stamp, sizeof(stamp), "%s.used", e->d_name) &&
		    fstatat(dirfd(d), stamp, &st, 0) == 0)
			t->used = st.st_mtim;
		l->n++;
	}
	closedir(d);
	return ret;
}

static int dir_cache_older(const void *a, const void *b)
{
	return dir_cache_time_cmp(&((const struct dir_cache_entry *)a)->used,
				  &((const struct dir_cache_entry *)b)->used);
}

void dir_cache_list_sort(struct dir_cache_list *l)
{
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), dir_cache_older);
}

void dir_cache_list_free(struct dir_cache_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
	*l = (struct dir_cache_list){ 0 };
}

/* ---- a pass over one level ---- */

const char *dir_cache_when(const struct timespec *t, char *buf, size_t size)
{
	struct tm tm;

	if (!gmtime_r(&t->tv_sec, &tm) || !strftime(buf, size, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(buf, size, "?");
	return buf;
}

uint64_t dir_cache_evict(const char *top, uint64_t max, bool (*is_entry)(const char *name),
			 const char *what, const char *key)
{
	struct dir_cache_list l = { 0 };
	uint64_t total = dir_cache_du(top);
	char dir[PATH_MAX], stamp[PATH_MAX], when[32];

	if (max == 0 || total <= max)
		return total;
	dir_cache_list_add(&l, top, is_entry, 0);	/* a part of it, when short of memory */
	dir_cache_list_sort(&l);
	for (size_t i = 0; i < l.n && total > max; i++) {
		uint64_t size;
		int fd;

		if (!dir_cache_fmt(dir, sizeof(dir), "%s/%s", top, l.v[i].name) ||
		    !dir_cache_fmt(stamp, sizeof(stamp), "%s.used", dir) ||
		    (fd = dir_cache_flock(stamp, LOCK_EX | LOCK_NB)) < 0)
			continue;	/* read now */
		size = dir_cache_du(dir);
		dir_cache_remove(dir, fd);
		total -= size < total ? size : total;
		log_info("%s: removed %s, last read %s: %llu bytes freed", what, dir,
			 dir_cache_when(&l.v[i].used, when, sizeof(when)), (unsigned long long)size);
	}
	if (total > max)
		log_warn("%s: %s takes %llu bytes, more than %s (%llu): the rest is being read",
			 what, top, (unsigned long long)total, key, (unsigned long long)max);
	dir_cache_list_free(&l);
	return total;
}
