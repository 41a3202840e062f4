/*
 * be_s3_url.c - what a config says of an S3 datastore (be_s3_form): the
 * keys of its section and what an s3:// URL means.  Built with or without
 * libcurl, so a build that leaves the web backends out still knows the type
 * and says it is not compiled in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "be_s3.h"

/* s3://BUCKET/PREFIX: a configured datastore of the bucket lends its endpoint and keys. */
static int s3_url_keys(const struct mlfs_config *cfg, struct datastore_config *ds,
		       const char *url, const char *rest, int line)
{
	static const char *const own[] = { "bucket", "root", NULL };
	char *bucket = strndup(rest, strcspn(rest, "/"));
	int ret;

	(void)url;
	if (!bucket)
		return -ENOMEM;
	ret = config_borrow(ds, config_like(cfg, NULL, "s3", "bucket", bucket), own, line);
	if (ret == 0)
		ret = config_kv_add(ds, "bucket", bucket, line);
	if (ret == 0)
		ret = config_kv_add(ds, "root", rest + strlen(bucket), line);
	free(bucket);
	return ret;
}

static const char *const s3_keys[] = {
	"endpoint", "bucket", "root", "region", "path_style", "access_key_id",
	"secret_access_key", "session_token", "profile", NULL
};
static const char *const s3_schemes[] = { "s3", NULL };

const struct config_form be_s3_form = {
	.type = "s3",
	.keys = s3_keys,
	.schemes = s3_schemes,
	.url_keys = s3_url_keys,
};
