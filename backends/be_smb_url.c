/*
 * be_smb_url.c - what a config says of an SMB datastore (be_smb_form): the
 * keys of its section and what an smb:// URL means.  Built with or without
 * libsmbclient, so a build that leaves SMB out still knows the type and
 * says it is not compiled in.
 *
 * smb://HOST[:PORT]/SHARE/PATH: a configured datastore of that share lends
 * its user and password; PATH is the root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "be_smb.h"

static int smb_url_keys(const struct mlfs_config *cfg, struct datastore_config *ds,
			const char *url, const char *rest, int line)
{
	static const char *const own[] = { "address", "share", "root", NULL };
	size_t alen = strcspn(rest, "/");
	const char *sh = rest[alen] ? rest + alen + 1 : rest + alen;
	char *address = strndup(rest, alen), *share = strndup(sh, strcspn(sh, "/"));
	const struct datastore_config *like = NULL;
	int ret = -ENOMEM;

	(void)url;
	if (address && share) {
		while ((like = config_like(cfg, like, "smb", "address", address)) &&
		       strcmp(config_get(like, "share", NULL) ?: "", share) != 0)
			;
		ret = config_borrow(ds, like, own, line);
		if (ret == 0)
			ret = config_kv_add(ds, "address", address, line);
		if (ret == 0)
			ret = config_kv_add(ds, "share", share, line);
		if (ret == 0)
			ret = config_kv_add(ds, "root", sh + strlen(share), line);
	}
	free(address);
	free(share);
	return ret;
}

static const char *const smb_keys[] = {
	"address", "share", "root", "username", "password", "password_file", "workgroup", NULL
};
static const char *const smb_schemes[] = { "smb", NULL };

const struct config_form be_smb_form = {
	.type = "smb",
	.keys = smb_keys,
	.schemes = smb_schemes,
	.url_keys = smb_url_keys,
};
