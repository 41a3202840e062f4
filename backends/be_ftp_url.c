/*
 * be_ftp_url.c - what a config says of an FTP datastore (be_ftp_form): the
 * keys of its section and what ftp:// and ftps:// URLs mean.  Built with or
 * without libcurl, so a build that leaves the web backends out still knows
 * the type and says it is not compiled in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "be_ftp.h"

/*
 * ftp(s)://HOST[:PORT]/PATH/: the URL is the datastore's `url`; a configured
 * ftp datastore of the same server (its URL up to the path) lends its login
 * and the certificate it trusts.
 */
static int ftp_url_keys(const struct mlfs_config *cfg, struct datastore_config *ds,
			const char *url, const char *rest, int line)
{
	static const char *const own[] = { "url", NULL };
	size_t server = (size_t)(rest - url) + strcspn(rest, "/");
	const struct datastore_config *like = NULL;
	int ret;

	for (size_t i = 0; !like && i < cfg->n_datastores; i++) {
		const struct datastore_config *c = &cfg->datastores[i];
		const char *u = config_get(c, "url", NULL);

		if (!c->implicit && c->type && strcmp(c->type, "ftp") == 0 && u &&
		    strncasecmp(u, url, server) == 0 && (u[server] == '/' || u[server] == '\0'))
			like = c;
	}
	ret = config_borrow(ds, like, own, line);
	return ret == 0 ? config_kv_add(ds, "url", url, line) : ret;
}

static const char *const ftp_keys[] = {
	"url", "username", "password", "password_file", "ca_file", NULL
};
static const char *const ftp_schemes[] = { "ftp", "ftps", NULL };

const struct config_form be_ftp_form = {
	.type = "ftp",
	.keys = ftp_keys,
	.schemes = ftp_schemes,
	.url_keys = ftp_url_keys,
};
