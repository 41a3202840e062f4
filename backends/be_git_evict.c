/*
 * be_git_evict.c - keeps cache_dir/git under git_cache_size (config.md):
 * the least recently used commit trees that no datastore reads go first,
 * with them the Git LFS objects no tree links any more, and a repository
 * goes with its last tree.  What a datastore reads is never removed, and a
 * fetch or a tree being written out is never raced.
 *
 * The repository's lock (REPO/lock, be_git_lock) is taken by everyone who
 * fetches into the repository, writes out or begins to read one of its
 * trees, and by the evictor before it removes anything of it: LOCK_EX,
 * the evictor's without waiting (a busy repository is passed over).  A
 * datastore that reads trees/NAME holds flock(LOCK_SH) of trees/NAME.used
 * for as long as it lives (dir_cache_hold, taken before it lets the lock go),
 * and the stamp's mtime is the tree's last use; the evictor removes a tree
 * only with LOCK_EX of its stamp.  So a reader either holds its stamp
 * before the evictor looks, or finds its tree gone and writes it out again.
 * When a repository goes, its folder is renamed away under its lock, and
 * whoever waits on the old lock file sees that it is no longer REPO/lock
 * and takes the new one.
 *
 * Size: st_blocks of every file and folder under cache_dir/git; a file with
 * n links (an LFS object and the trees it is linked into) counts 1/n at
 * each, so its bytes count once.  A pass walks every repository, so it runs
 * after a tree was written out (the only time the folder grows by much),
 * not at every read.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "be_git.h"
#include "dir_cache.h"
#include "log.h"
#include "path.h"

#define BE_GIT_OID_HEX	40	/* a tree's name: the commit, and "+lfs" with objects in place */
#define BE_GIT_URL_HEX	64	/* a repository's folder: the SHA-256 of its URL */

/* ---- the lock ---- */

int be_git_lock(const char *dir, bool wait)
{
	char path[PATH_MAX];
	int ret = wait ? path_mkdirs(dir, 0755) : 0;	/* an evictor makes nothing */

	if (ret < 0)
		return ret;
	if (!dir_cache_fmt(path, sizeof(path), "%s/lock", dir))
		return -ENAMETOOLONG;
	/* the evictor may take the repository away while we wait: then its lock is a new file */
	while ((ret = dir_cache_flock(path, LOCK_EX | (wait ? 0 : LOCK_NB))) == -ENOENT && wait)
		if ((ret = path_mkdirs(dir, 0755)) < 0)
			return ret;
	return ret;
}

/* Whether @name (in trees/) is a commit's tree: 40 hex digits, "+lfs" after them or not. */
static bool be_git_is_tree_name(const char *name)
{
	char oid[BE_GIT_OID_HEX + 1];
	size_t len = strlen(name);

	if (len == BE_GIT_OID_HEX + 4 && strcmp(name + BE_GIT_OID_HEX, "+lfs") == 0) {
		memcpy(oid, name, BE_GIT_OID_HEX);
		oid[BE_GIT_OID_HEX] = '\0';
		name = oid;
	}
	return dir_cache_is_hex(name, BE_GIT_OID_HEX);
}

static bool be_git_is_repo_name(const char *name)
{
	return dir_cache_is_hex(name, BE_GIT_URL_HEX);
}

/* ---- a pass ---- */

struct be_git_repo_seen {
	char *name;		/* its folder's: BE_GIT_URL_HEX digits */
	uint64_t size;		/* what it takes, as last walked */
};

struct be_git_pass {
	const char *top;	/* cache_dir/git */
	struct dir_cache_list repos;	/* its repositories (their mtimes unused) */
	struct be_git_repo_seen *seen;	/* ... each one's size: seen[i] is repos.v[i]'s */
	struct dir_cache_list trees;	/* every repository's trees, owner: the repository */
	uint64_t total;
};

/*
 * Under the repository's lock: what no one finishes any more (trees and
 * objects half written by a process that died, folders half removed) and the
 * LFS objects no tree links.  The number of trees left.
 */
static size_t be_git_sweep(const char *repo)
{
	char path[PATH_MAX], sub[PATH_MAX];
	struct dirent *e;
	struct stat st;
	size_t trees = 0;
	DIR *d;

	if (dir_cache_fmt(path, sizeof(path), "%s/trees", repo) && (d = opendir(path))) {
		while ((e = readdir(d))) {
			if (be_git_is_tree_name(e->d_name))
				trees++;
			else if ((strstr(e->d_name, ".tmp.") || strstr(e->d_name, ".gone.")) &&
				 dir_cache_fmt(sub, sizeof(sub), "%s/%s", path, e->d_name))
				path_remove_tree(sub);
		}
		closedir(d);
	}
	if (dir_cache_fmt(path, sizeof(path), "%s/lfs", repo) && (d = opendir(path))) {
		while ((e = readdir(d)))
			if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISREG(st.st_mode) && (st.st_nlink == 1 || strstr(e->d_name, ".part")))
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
	}
	return trees;
}

/* The URL a repository's folder keeps (REPO/url), for the log; "?" when none. */
static void be_git_repo_url(const char *repo, char *url, size_t size)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(url, size, "?");
	if (dir_cache_fmt(path, sizeof(path), "%s/url", repo) && (f = fopen(path, "re"))) {
		if (fgets(url, (int)size, f))
			url[strcspn(url, "\n")] = '\0';
		fclose(f);
	}
}

/*
 * Removes tree @t unless it is in use or its repository busy, and its
 * repository with it when it was the last: the bytes that freed.
 */
static uint64_t be_git_remove(struct be_git_pass *p, const struct dir_cache_entry *t)
{
	struct be_git_repo_seen *r = &p->seen[t->owner];
	char repo[PATH_MAX], tree[PATH_MAX], used[PATH_MAX], gone[PATH_MAX], url[1024], when[32];
	uint64_t after = 0, freed;
	bool removed, whole;
	int lock, stamp;

	if (!dir_cache_fmt(repo, sizeof(repo), "%s/%s", p->top, r->name) ||
	    !dir_cache_fmt(tree, sizeof(tree), "%s/trees/%s", repo, t->name) ||
	    !dir_cache_fmt(used, sizeof(used), "%s.used", tree))
		return 0;
	if ((lock = be_git_lock(repo, false)) < 0)
		return 0;	/* a fetch or a write-out, or gone: not now */
	if ((stamp = dir_cache_flock(used, LOCK_EX | LOCK_NB)) < 0) {
		close(lock);
		return 0;	/* read by a datastore */
	}
	be_git_repo_url(repo, url, sizeof(url));
	removed = access(tree, F_OK) == 0;	/* else another evictor's, just now */
	dir_cache_remove(tree, stamp);
	whole = be_git_sweep(repo) == 0 &&
		dir_cache_fmt(gone, sizeof(gone), "%s/.gone.%s.%ld", p->top, r->name, (long)getpid()) &&
		rename(repo, gone) == 0;
	if (whole)
		path_remove_tree(gone);
	else
		after = dir_cache_du(repo);
	close(lock);
	freed = r->size > after ? r->size - after : 0;
	r->size = after;
	if (removed)
		log_info("git cache: removed commit %.*s%s of %s, last read %s: %llu bytes freed%s",
			 BE_GIT_OID_HEX, t->name, strlen(t->name) > BE_GIT_OID_HEX ?
			 " (Git LFS objects in place)" : "", url,
			 dir_cache_when(&t->used, when, sizeof(when)), (unsigned long long)freed,
			 whole ? "; it was the repository's last: the repository with it" : "");
	return freed;
}

uint64_t be_git_evict(const char *top, uint64_t max)
{
	struct be_git_pass p = { .top = top };
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir(top);

	if (!d)
		return 0;
	while ((e = readdir(d)))	/* a removal a crash cut short */
		if (strncmp(e->d_name, ".gone.", 6) == 0 &&
		    dir_cache_fmt(path, sizeof(path), "%s/%s", top, e->d_name))
			path_remove_tree(path);
	closedir(d);
	dir_cache_list_add(&p.repos, top, be_git_is_repo_name, 0);
	p.seen = calloc(p.repos.n ? p.repos.n : 1, sizeof(*p.seen));
	for (size_t i = 0; p.seen && i < p.repos.n; i++) {
		p.seen[i].name = p.repos.v[i].name;
		if (dir_cache_fmt(path, sizeof(path), "%s/%s", top, p.repos.v[i].name)) {
			p.seen[i].size = dir_cache_du(path);
			p.total += p.seen[i].size;
		}
		if (dir_cache_fmt(path, sizeof(path), "%s/%s/trees", top, p.repos.v[i].name))
			dir_cache_list_add(&p.trees, path, be_git_is_tree_name, i);
	}
	if (p.seen && max > 0 && p.total > max) {
		dir_cache_list_sort(&p.trees);
		for (size_t i = 0; i < p.trees.n && p.total > max; i++) {
			uint64_t freed = be_git_remove(&p, &p.trees.v[i]);

			p.total -= freed < p.total ? freed : p.total;
		}
		if (p.total > max)
			log_warn("git cache: %s takes %llu bytes, more than git_cache_size (%llu): "
				 "the rest is read by datastores, or being fetched", top,
				 (unsigned long long)p.total, (unsigned long long)max);
	}
	free(p.seen);
	dir_cache_list_free(&p.trees);
	dir_cache_list_free(&p.repos);
	return p.total;
}
