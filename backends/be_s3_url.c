/*
 * be_s3_url.c - what a config says of an S3 datastore (be_s3_form) and of
 * a Google Cloud Storage one (be_gcs_form, the same backend with GCS's
 * conventions): the keys of their sections and what s3:// and gs:// URLs
 * mean.  Built with or without libcurl, so a build that leaves the web
 * backends out still knows the types and says they are not compiled in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "be_s3.h"

/*
 * s3://BUCKET/PREFIX, gs://BUCKET/PREFIX: a configured datastore of the
 * bucket (of the same type) lends its endpoint and keys.
 */
static int s3_url_keys(const struct mlfs_config *cfg, struct datastore_config *ds,
		       const char *url, const char *rest, int line)
{
	static const char *const own[] = { "bucket", "root", NULL };
	char *bucket = strndup(rest, strcspn(rest, "/"));
	int ret;

	(void)url;
	if (!bucket)
		return -ENOMEM;
	ret = config_borrow(ds, config_like(cfg, NULL, ds->type, "bucket", bucket), own, line);
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

static const char *const gcs_keys[] = {
	"endpoint", "bucket", "root", "path_style", "access_key_id", "secret_access_key", NULL
};
static const char *const gcs_schemes[] = { "gs", NULL };

const struct config_form be_gcs_form = {
	.type = "gcs",
	.keys = gcs_keys,
	.schemes = gcs_schemes,
	.url_keys = s3_url_keys,
};
