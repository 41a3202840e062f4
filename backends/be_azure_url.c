/*
 * be_azure_url.c - what a config says of an Azure Blob datastore
 * (be_azure_form): the keys of its section and the URLs that name a blob
 * container, https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH, told by
 * their host before the http backend sees the scheme.  Other endpoints
 * (Azurite, sovereign clouds) are reached through a configured datastore.
 * Built with or without libcurl, so a build that leaves the web backends
 * out still knows the type and says it is not compiled in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "be_azure.h"

#define AZURE_HOST ".blob.core.windows.net"

/* The length of ACCOUNT in http(s)://ACCOUNT.blob.core.windows.net[/...], or 0. */
static size_t azure_account_len(const char *url)
{
	const char *host = strstr(url, "://");
	size_t hlen, alen;

	if (!host || (strncasecmp(url, "https://", 8) != 0 && strncasecmp(url, "http://", 7) != 0))
		return 0;
	host += 3;
	hlen = strcspn(host, "/?#");
	alen = hlen > strlen(AZURE_HOST) ? hlen - strlen(AZURE_HOST) : 0;
	if (!alen || strncasecmp(host + alen, AZURE_HOST, strlen(AZURE_HOST)) != 0 ||
	    memchr(host, '@', hlen) || memchr(host, '.', alen))
		return 0;
	return alen;
}

static bool azure_claims(const char *url)
{
	return azure_account_len(url) > 0;
}

/* Whether configured datastore @ds serves @account (by its account key or its endpoint). */
static bool azure_serves(const struct datastore_config *ds, const char *account)
{
	const char *a = config_get(ds, "account", NULL), *ep = config_get(ds, "endpoint", NULL);
	size_t alen = ep ? azure_account_len(ep) : 0;

	if (a)
		return strcmp(a, account) == 0;
	return alen && strlen(account) == alen && strncmp(strstr(ep, "://") + 3, account, alen) == 0;
}

/*
 * https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH: a configured azure
 * datastore of that account and container lends its endpoint and
 * credentials; else the account's own endpoint, credentials from the
 * environment.
 */
static int azure_url_keys(const struct mlfs_config *cfg, struct datastore_config *ds,
			  const char *url, const char *rest, int line)
{
	static const char *const own[] = { "container", "root", NULL };
	size_t alen = azure_account_len(url);
	const char *path = rest + strcspn(rest, "/");
	const char *c = path[0] ? path + 1 : path;
	char *account = strndup(strstr(url, "://") + 3, alen), *container = strndup(c, strcspn(c, "/"));
	const struct datastore_config *like = NULL;
	int ret = -ENOMEM;

	if (account && container) {
		while ((like = config_like(cfg, like, "azure", "container", container)) &&
		       !azure_serves(like, account))
			;
		ret = config_borrow(ds, like, own, line);
		if (ret == 0 && !like)
			ret = config_kv_add(ds, "account", account, line);
		if (ret == 0)
			ret = config_kv_add(ds, "container", container, line);
		if (ret == 0)
			ret = config_kv_add(ds, "root", c + strlen(container), line);
	}
	free(account);
	free(container);
	return ret;
}

static const char *const azure_keys[] = {
	"endpoint", "account", "key", "sas", "connection_string", "container", "root",
	"list_chunk", NULL
};

const struct config_form be_azure_form = {
	.type = "azure",
	.keys = azure_keys,
	.claims = azure_claims,
	.url_keys = azure_url_keys,
};
