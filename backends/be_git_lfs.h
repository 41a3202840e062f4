/*
 * be_git_lfs.h - Git LFS objects of a commit the git backend writes out
 * (be_git_lfs.c): a pointer file's object fetched through the LFS batch
 * API, checked against its SHA-256, kept once per repository and linked in
 * place of the pointer; and the pieces that need no server, for
 * tests/unit/test_git.c.
 */
#ifndef MLFS_BE_GIT_LFS_H
#define MLFS_BE_GIT_LFS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BE_GIT_LFS_OID_LEN	64	/* hex digits of a SHA-256 */

/* One pointer file of a tree written out. */
struct be_git_lfs_obj {
	char *path;			/* from the tree's top, malloc'd */
	char oid[BE_GIT_LFS_OID_LEN + 1];
	int64_t size;
	bool exec;			/* git's mode said executable */
};

/*
 * The object a Git LFS pointer names: its "oid sha256:" (64 lowercase hex
 * digits) into @oid and its "size" into *size.  0, or -EINVAL when @data is
 * not a pointer of the spec's version 1 with both lines well formed.
 */
int be_git_lfs_parse(const char *data, size_t len, char oid[BE_GIT_LFS_OID_LEN + 1],
		     int64_t *size);

/*
 * The LFS endpoint git-lfs derives from a remote URL: URL.git/info/lfs, or
 * URL/info/lfs when it ends in ".git"; a git:// URL's over https://.
 * Malloc'd, or NULL for a URL of another scheme.
 */
char *be_git_lfs_endpoint(const char *remote);

struct be_git_lfs_opts {
	const char *name;		/* the datastore's, for log lines */
	const char *commit;		/* for log lines */
	const char *remote;		/* the repository's URL */
	const char *lfs_url;		/* the configured endpoint, or NULL */
	const char *user, *token;	/* HTTP credentials for the endpoint's host, or NULL */
	const char *store;		/* the folder objects are kept in */
	long timeout, retries;
	atomic_uint_fast64_t *requests;	/* counts each request that reached a server */
};

/*
 * Puts the objects of @objs (@n of them, pointers written under @top) in
 * place of their pointers: each from @o->store when it holds it, else
 * fetched (LFS batch API, "basic" transfers) from the endpoint (@o->lfs_url,
 * else the tree's .lfsconfig lfs.url, else be_git_lfs_endpoint of the
 * remote), checked and kept there.  0, or -errno with a log line naming
 * the file and what the server said.
 */
int be_git_lfs_fetch(const struct be_git_lfs_opts *o, const char *top,
		     const struct be_git_lfs_obj *objs, size_t n);

#endif
