/*
 * be_git.h - the git backend (be_git.c): one commit of a git repository,
 * fetched with libgit2 into the shared cache and shown read-only; and the
 * pieces of it that need no server, exposed for tests/unit/test_git.c.
 */
#ifndef MLFS_BE_GIT_H
#define MLFS_BE_GIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

extern const struct backend_ops be_git_ops;
extern const struct config_form be_git_form;	/* its keys and URLs: config.h */

/*
 * Splits a git source as a spec or config writes it: "git+https://HOST/R",
 * "git://HOST/R.git", "https://HOST/R.git" (a path ending in ".git"), each
 * with an optional "#REF" (a branch, a tag or a commit).  The URL libgit2
 * is given (no "git+", no fragment) into @url, the ref (or "") into @ref,
 * both malloc'd.  0, -EINVAL when @src is not a git URL or its ref is not
 * one git allows (empty, "..", a control character, a space, "~^:?*[\",
 * a leading '-' or '/', a trailing '/' or ".lock"), -ENOMEM.
 */
int be_git_split(const char *src, char **url, char **ref);

/* Whether @src names a git repository by its form (be_git_split's). */
bool be_git_claims(const char *src);

/* Whether @ref is a full commit id: 40 lowercase hex digits. */
bool be_git_is_commit(const char *ref);

/*
 * Whether blob bytes @data (@len of them) are a Git LFS pointer: smaller
 * than 1 KiB, the spec's version line first, an "oid sha256:" line.
 */
bool be_git_is_lfs_pointer(const char *data, size_t len);

/* ---- cache_dir/git kept under git_cache_size (be_git_evict.c) ---- */

/*
 * Takes flock(LOCK_EX) of @dir/lock (a repository's folder), waiting for
 * it (the folder made when missing) or not (@wait: an evictor's, which
 * makes nothing): the lock's fd, -EWOULDBLOCK when not waiting and it is
 * held, -ENOENT when not waiting and the folder is gone, or -errno.  The lock is that of the
 * folder as it is now: one the evictor took away while we waited is left.
 */
int be_git_lock(const char *dir, bool wait);

/*
 * Removes from cache_dir/git (@top) the least recently read trees that no
 * one holds, the Git LFS objects no tree links any more and a repository
 * whose last tree went, while it takes more than @max bytes (0: no limit,
 * nothing removed).  What it takes afterwards, in bytes.
 */
uint64_t be_git_evict(const char *top, uint64_t max);

#endif
