/*
 * be_nfs_url.c - what a config says of an NFS datastore (be_nfs_form): the
 * keys of its section and what an nfs:// URL means.  Built with or without
 * libnfs, so a build that leaves NFS out still knows the type and says it
 * is not compiled in.
 *
 * nfs://HOST/PATH[?OPTIONS]: a configured datastore of that host whose
 * export holds PATH lends its export and options (PATH below the export
 * becomes the root); otherwise PATH is the export and OPTIONS the libnfs
 * options.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "be_nfs.h"

/* Whether the export of @ds holds @path: a prefix of it at a folder boundary. */
static bool nfs_export_holds(const struct datastore_config *ds, const char *path, size_t *len)
{
	const char *e = config_get(ds, "export", NULL);
	size_t n = e ? strlen(e) : 0;

	while (n > 0 && e[n - 1] == '/')
		n--;
	*len = n;
	return e && strncmp(e, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int nfs_url_keys(const struct mlfs_config *cfg, struct datastore_config *ds,
			const char *url, const char *rest, int line)
{
	static const char *const own[] = { "address", "root", NULL };
	size_t alen = strcspn(rest, "/?"), elen = 0;
	const char *q = strchr(rest, '?');
	char *address = strndup(rest, alen);
	char *path = strndup(rest + alen, (q ? (size_t)(q - rest) : strlen(rest)) - alen);
	const struct datastore_config *like = NULL;
	int ret = -ENOMEM;

	(void)url;
	if (address && path) {
		while ((like = config_like(cfg, like, "nfs", "address", address)) &&
		       !nfs_export_holds(like, path, &elen))
			;
		ret = config_borrow(ds, like, own, line);
		if (ret == 0)
			ret = config_kv_add(ds, "address", address, line);
		if (ret == 0 && like)
			ret = config_kv_add(ds, "root", path + elen, line);
		else if (ret == 0)
			ret = config_kv_add(ds, "export", path[0] ? path : "/", line);
		if (ret == 0 && !like && q && q[1])
			ret = config_kv_add(ds, "options", q + 1, line);
	}
	free(address);
	free(path);
	return ret;
}

static const char *const nfs_keys[] = { "address", "export", "root", "options", NULL };
static const char *const nfs_schemes[] = { "nfs", NULL };

const struct config_form be_nfs_form = {
	.type = "nfs",
	.keys = nfs_keys,
	.schemes = nfs_schemes,
	.url_keys = nfs_url_keys,
};
