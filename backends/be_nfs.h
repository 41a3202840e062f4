/*
 * be_nfs.h - the NFS backend (be_nfs.c, be_nfs_conn.c), and the pieces of
 * it that need no server, exposed for tests/unit/test_nfs.c: the options
 * checker, the mapping of libnfs's returns to errno, and the join of a
 * path with the datastore's root.  What its two files share is in
 * be_nfs_int.h.
 */
#ifndef MLFS_BE_NFS_H
#define MLFS_BE_NFS_H

#include <stddef.h>

#include "backend.h"

extern const struct backend_ops be_nfs_ops;
extern const struct config_form be_nfs_form;	/* its keys and URLs: config.h */

/*
 * Checks the `options` value: "k=v&k=v" (a leading '?' allowed, empty
 * allowed) with keys among version (3 or 4), nfsport, mountport (1-65535),
 * uid and gid (0-4294967295).  Returns 0, or -EINVAL with the reason
 * written to @why (a phrase without the key's name "options").
 */
int be_nfs_check_options(const char *options, char *why, size_t size);

/*
 * 1 when @ret, a libnfs return, says the connection failed (the context is
 * dead and a fresh one may succeed), else 0.
 */
int be_nfs_is_transport(int ret);

/*
 * Maps a libnfs return (already a negated errno in libnfs 4.0, or -EFAULT
 * and -EINTR for a failed RPC) to ours: >= 0 unchanged, a broken
 * connection -EIO, a timeout -ETIMEDOUT, anything else unchanged when it is
 * a plausible errno, else -EIO.
 */
int be_nfs_errno(int ret);

/*
 * Hands out the path on the export of backend path @path ("" or "a/b")
 * beneath @root as configured ("/", "/dir2", "dir2/", "a//b"): "/dir2/a/b",
 * "/" for the export's top.  Returns 0, -EINVAL when @root has a "." or
 * ".." component, -ENOMEM.
 */
int be_nfs_join(char **out, const char *root, const char *path);

#endif
