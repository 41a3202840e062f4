/*
 * be_http_url.c - what a config says of a web datastore (be_http_form): the
 * key of its section and what an http:// or https:// URL means.  Built with
 * or without libcurl, so a build that leaves the web backends out still
 * knows the type and says it is not compiled in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "be_http.h"

/* http(s)://HOST/PATH/: the URL is the datastore's `url`. */
static int http_url_keys(const struct mlfs_config *cfg, struct datastore_config *ds,
			 const char *url, const char *rest, int line)
{
	(void)cfg;
	(void)rest;
	return config_kv_add(ds, "url", url, line);
}

static const char *const http_keys[] = { "url", NULL };
static const char *const http_schemes[] = { "http", "https", NULL };

const struct config_form be_http_form = {
	.type = "http",
	.keys = http_keys,
	.schemes = http_schemes,
	.url_keys = http_url_keys,
};
