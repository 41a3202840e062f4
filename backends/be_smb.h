/*
 * be_smb.h - the SMB backend (be_smb.c, be_smb_conn.c), and the pieces of
 * it that need no server, exposed for tests/unit/test_smb.c: where a
 * datastore points (be_smb_addr_init), the URL of a path in it
 * (be_smb_url), and the mapping of libsmbclient's errno values to ours
 * (be_smb_errno, be_smb_transient).  What its two files share is in
 * be_smb_int.h.
 */
#ifndef MLFS_BE_SMB_H
#define MLFS_BE_SMB_H

#include <stdbool.h>

#include "backend.h"

extern const struct backend_ops be_smb_ops;
extern const struct config_form be_smb_form;	/* its keys and URLs: config.h */

/* Where a datastore points: built once from its keys. */
struct be_smb_addr {
	char *host;		/* from `address`, without the port */
	unsigned int port;	/* from `address`, else 445 */
	char *share;
	char *root;		/* a folder in the share: "" or "a/b", no '/' at either end */
};

/*
 * Fills @a from @cfg.  Returns 0, -EINVAL for a value be_smb_validate would
 * reject, -ENOMEM.  Free with be_smb_addr_free (which accepts a zeroed @a).
 */
int be_smb_addr_init(struct be_smb_addr *a, const struct datastore_config *cfg);
void be_smb_addr_free(struct be_smb_addr *a);

/*
 * The URL libsmbclient is given for @path, a canonical backend path ("" is
 * the root): smb://HOST/SHARE[/ROOT][/PATH], every component
 * percent-encoded but for unreserved characters (libsmbclient decodes it
 * again).  The port is not in it: each context is told with smbc_setPort.
 * Returns a malloc'd string or NULL on ENOMEM.
 */
char *be_smb_url(const struct be_smb_addr *a, const char *path);

/*
 * The negated errno for a libsmbclient failure that set @err: transport
 * failures (the connection refused, reset, ...) become -EIO, a timeout
 * -ETIMEDOUT (as libnfs's and curl's),
 * EPERM (what some servers answer a refused login with) becomes -EACCES,
 * 0 (no errno set) becomes -EIO; the rest are kept.
 */
int be_smb_errno(int err);

/* True for an @err after which a fresh connection may succeed (worth a retry). */
bool be_smb_transient(int err);

#endif
