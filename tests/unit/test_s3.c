/*
 * test_s3.c - the parts of the S3 backend that need no server: the
 * ListObjectsV2 and error parsers, URL and query building, the credential
 * chain, validate's messages, and the resume token of an upload.
 * tests/integration/s3_test.sh and s3_upload_test.sh drive the rest
 * against a real S3 server.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "be_s3.h"
#include "cfg_check.h"
#include "config.h"

/* ---- helpers ---- */

struct listed {
	char names[16][300];
	bool dirs[16];
	int64_t sizes[16];
	time_t mtimes[16];
	char etags[16][80];
	int n;
};

static int collect(void *arg, const char *name, const struct be_s3_obj *o)
{
	struct listed *l = arg;

	assert_true(l->n < 16);
	snprintf(l->names[l->n], sizeof(l->names[0]), "%s", name);
	l->dirs[l->n] = o->is_dir;
	l->sizes[l->n] = o->size;
	l->mtimes[l->n] = o->mtime;
	snprintf(l->etags[l->n], sizeof(l->etags[0]), "%s", o->etag);
	l->n++;
	return 0;
}

static int stop_at_first(void *arg, const char *name, const struct be_s3_obj *o)
{
	(void)arg;
	(void)name;
	(void)o;
	return -EINTR;
}

static int parse(const char *xml, const char *prefix, struct listed *l, struct be_s3_page *page)
{
	memset(l, 0, sizeof(*l));
	return be_s3_parse_list(xml, strlen(xml), prefix, collect, l, page);
}

static void clear_aws_env(void)
{
	static const char *const vars[] = { "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ENDPOINT_URL",
		"AWS_REGION", "AWS_DEFAULT_REGION", NULL };

	for (size_t i = 0; vars[i]; i++)
		unsetenv(vars[i]);
}

static int setup(void **state)
{
	(void)state;
	clear_aws_env();
	setenv("HOME", "/nonexistent-mlfs-home", 1);
	return 0;
}

/* ---- the listing parser ---- */

static const char page1[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	"<Name>testbucket</Name><Prefix>data/</Prefix><KeyCount>4</KeyCount>"
	"<MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>"
	"<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
	"<Contents><Key>data/</Key><LastModified>2024-01-02T03:04:05.000Z</LastModified>"
	"<ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>0</Size>"
	"<StorageClass>STANDARD</StorageClass></Contents>"
	"<Contents><Key>data/a.txt</Key><LastModified>2024-01-02T03:04:05.000Z</LastModified>"
	"<ETag>\"0cc175b9c0f1b6a831c399e269772661\"</ETag><Size>6</Size></Contents>"
	"<Contents><Key>data/big.bin</Key><LastModified>2023-12-31T23:59:59Z</LastModified>"
	"<ETag>\"9b2cf535f27731c974343645a3985328-3\"</ETag><Size>41943040</Size></Contents>"
	"<CommonPrefixes><Prefix>data/sub/</Prefix></CommonPrefixes>"
	"</ListBucketResult>";

static void test_s3_list_maps_contents_to_files_and_common_prefixes_to_dirs(void **state)
{
	struct be_s3_page page;
	struct listed l;

	(void)state;
	assert_int_equal(parse(page1, "data/", &l, &page), 0);
	assert_int_equal(l.n, 3);	/* the folder's own marker is skipped */
	assert_string_equal(l.names[0], "a.txt");
	assert_false(l.dirs[0]);
	assert_int_equal(l.sizes[0], 6);
	assert_int_equal(l.mtimes[0], 1704164645);
	assert_string_equal(l.etags[0], "\"0cc175b9c0f1b6a831c399e269772661\"");
	assert_string_equal(l.names[1], "big.bin");
	assert_int_equal(l.sizes[1], 41943040);
	assert_int_equal(l.mtimes[1], 1704067199);
	assert_string_equal(l.names[2], "sub");
	assert_true(l.dirs[2]);
	assert_int_equal(page.n_keys, 4);
	assert_true(page.truncated);
	assert_string_equal(page.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
	free(page.next_token);
}

/* An object and keys beneath its name: one entry, the folder unless the object holds bytes. */
static void test_s3_list_shows_an_object_and_a_folder_of_one_name_once(void **state)
{
	static const char xml[] =
		"<ListBucketResult>"
		"<Contents><Key>d/marker</Key><Size>0</Size></Contents>"
		"<Contents><Key>d/real</Key><Size>7</Size><ETag>\"e\"</ETag></Contents>"
		"<Contents><Key>d/alone</Key><Size>0</Size></Contents>"
		"<CommonPrefixes><Prefix>d/marker/</Prefix></CommonPrefixes>"
		"<CommonPrefixes><Prefix>d/real/</Prefix></CommonPrefixes>"
		"<CommonPrefixes><Prefix>d/sub/</Prefix></CommonPrefixes>"
		"<IsTruncated>false</IsTruncated></ListBucketResult>";
	struct be_s3_page page;
	struct listed l;

	static const char *const shown[] = { "real", "alone", "marker/", "sub/" };

	(void)state;
	assert_int_equal(parse(xml, "d/", &l, &page), 0);
	/* its bytes hide the folder; an empty file alone; the folder hides the empty object */
	assert_int_equal(l.n, 4);
	for (int i = 0; i < 4; i++) {
		size_t len = strlen(shown[i]);
		bool dir = shown[i][len - 1] == '/';

		assert_int_equal(strlen(l.names[i]), len - dir);
		assert_int_equal(strncmp(l.names[i], shown[i], len - dir), 0);
		assert_int_equal(l.dirs[i], dir);
	}
	assert_int_equal(l.sizes[0], 7);
	assert_int_equal(page.n_keys, 6);
	free(page.next_token);
}

static void test_s3_list_last_page_has_no_token(void **state)
{
	static const char xml[] =
		"<ListBucketResult><Name>b</Name><Prefix></Prefix><IsTruncated>false</IsTruncated>"
		"<Contents><Key>top</Key><Size>1</Size></Contents></ListBucketResult>";
	struct be_s3_page page;
	struct listed l;

	(void)state;
	assert_int_equal(parse(xml, "", &l, &page), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.names[0], "top");
	assert_int_equal(l.mtimes[0], 0);	/* no LastModified */
	assert_string_equal(l.etags[0], "");
	assert_false(page.truncated);
	assert_null(page.next_token);
}

static void test_s3_list_decodes_xml_entities_in_names(void **state)
{
	static const char xml[] =
		"<ListBucketResult><IsTruncated>false</IsTruncated>"
		"<Contents><Key>p/a &amp; b &lt;c&gt; &quot;d&quot; &#233;t&#xE9;.txt</Key>"
		"<Size>3</Size></Contents>"
		"<CommonPrefixes><Prefix>p/x&amp;y/</Prefix></CommonPrefixes></ListBucketResult>";
	struct be_s3_page page;
	struct listed l;

	(void)state;
	assert_int_equal(parse(xml, "p/", &l, &page), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.names[0], "a & b <c> \"d\" \xc3\xa9t\xc3\xa9.txt");
	assert_string_equal(l.names[1], "x&y");
	free(page.next_token);
}

static void test_s3_list_skips_hostile_and_empty_names(void **state)
{
	char xml[4096];
	char longname[300];
	struct be_s3_page page;
	struct listed l;

	(void)state;
	memset(longname, 'x', 256);
	longname[256] = '\0';
	snprintf(xml, sizeof(xml),
		 "<ListBucketResult><IsTruncated>false</IsTruncated>"
		 "<Contents><Key>d/..</Key><Size>1</Size></Contents>"
		 "<Contents><Key>d/.</Key><Size>1</Size></Contents>"
		 "<Contents><Key>d/a/b</Key><Size>1</Size></Contents>"
		 "<Contents><Key>elsewhere</Key><Size>1</Size></Contents>"
		 "<Contents><Key>d/%s</Key><Size>1</Size></Contents>"
		 "<Contents><Key></Key><Size>1</Size></Contents>"
		 "<Contents><Size>1</Size></Contents>"
		 "<CommonPrefixes><Prefix>d//</Prefix></CommonPrefixes>"
		 "<CommonPrefixes><Prefix>d/../</Prefix></CommonPrefixes>"
		 "<Contents><Key>d/ok</Key><Size>1</Size></Contents>"
		 "</ListBucketResult>", longname);
	assert_int_equal(parse(xml, "d/", &l, &page), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.names[0], "ok");
	assert_int_equal(page.n_keys, 10);	/* all counted: the folder is not empty */
	free(page.next_token);
}

static void test_s3_list_rejects_what_is_not_a_listing(void **state)
{
	static const char err[] = "<Error><Code>AccessDenied</Code></Error>";
	static const char bad[] = "<ListBucketResult><Contents><Key>x";
	static const char ent[] = "<!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>"
		"<ListBucketResult><Contents><Key>d/&e;</Key></Contents></ListBucketResult>";
	struct be_s3_page page;
	struct listed l;

	(void)state;
	assert_int_equal(parse(err, "", &l, &page), -EIO);
	assert_int_equal(parse(bad, "", &l, &page), -EIO);
	assert_int_equal(be_s3_parse_list("", 0, "", collect, &l, &page), -EIO);
	/* An external entity is never fetched: the name is not /etc/passwd's text. */
	assert_int_equal(parse(ent, "d/", &l, &page), 0);
	assert_true(l.n == 0 || strstr(l.names[0], "root:") == NULL);
	free(page.next_token);
}

static void test_s3_list_stops_when_fill_says_so(void **state)
{
	struct be_s3_page page;

	(void)state;
	assert_int_equal(be_s3_parse_list(page1, strlen(page1), "data/", stop_at_first, NULL,
					  &page), -EINTR);
	free(page.next_token);
}

/* ---- errors and times ---- */

static void test_s3_error_code_is_read_from_the_error_body(void **state)
{
	static const char xml[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we "
		"calculated does not match</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>";
	char code[64];

	(void)state;
	assert_int_equal(be_s3_parse_error(xml, strlen(xml), code, sizeof(code)), 0);
	assert_string_equal(code, "SignatureDoesNotMatch");
	assert_int_equal(be_s3_parse_error("<html>502</html>", 16, code, sizeof(code)), -ENOENT);
	assert_int_equal(be_s3_parse_error("<Error></Error>", 15, code, sizeof(code)), -ENOENT);
	assert_int_equal(be_s3_parse_error("not xml", 7, code, sizeof(code)), -ENOENT);
	assert_int_equal(be_s3_parse_error(NULL, 0, code, sizeof(code)), -ENOENT);
}

static void test_s3_times_are_iso8601_utc(void **state)
{
	(void)state;
	assert_int_equal(be_s3_parse_time("1970-01-01T00:00:00.000Z"), 0);
	assert_int_equal(be_s3_parse_time("2024-01-02T03:04:05Z"), 1704164645);
	assert_int_equal(be_s3_parse_time("2024-01-02T03:04:05.123456Z"), 1704164645);
	assert_int_equal(be_s3_parse_time("yesterday"), -1);
	assert_int_equal(be_s3_parse_time("2024-01-02T03:04:05+02:00"), -1);
}

/* ---- URLs and queries ---- */

static void test_s3_query_is_sorted_and_encoded(void **state)
{
	const char *q[] = { "prefix", "a b/c+d&é", "list-type", "2", "delimiter", "/",
		"continuation-token", "1ue/x=+", NULL };
	const char *uploads[] = { "uploads", NULL, NULL };
	const char *none[] = { NULL };
	char *s = be_s3_query(q);

	(void)state;
	assert_string_equal(s, "continuation-token=1ue%2Fx%3D%2B&delimiter=%2F&list-type=2&"
			    "prefix=a%20b%2Fc%2Bd%26%C3%A9");
	free(s);
	s = be_s3_query(uploads);
	assert_string_equal(s, "uploads=");
	free(s);
	s = be_s3_query(none);
	assert_string_equal(s, "");
	free(s);
}

static void test_s3_path_style_urls_put_the_bucket_in_the_path(void **state)
{
	struct mlfs_config *cfg = cfg_check_load("[datastore d]\ntype = s3\nendpoint = http://127.0.0.1:4569/\n"
				       "bucket = tb\nroot = /data\n");
	struct be_s3_addr a;
	char *url;

	(void)state;
	assert_int_equal(be_s3_addr_init(&a, cfg_check_ds(cfg, "d")), 0);
	assert_true(a.path_style);
	assert_string_equal(a.endpoint, "http://127.0.0.1:4569");
	assert_string_equal(a.root, "data/");
	assert_string_equal(a.region, "us-east-1");
	url = be_s3_url(&a, "data/a b/c+d.txt", NULL);
	assert_string_equal(url, "http://127.0.0.1:4569/tb/data/a%20b/c%2Bd.txt");
	free(url);
	url = be_s3_url(&a, NULL, "list-type=2");
	assert_string_equal(url, "http://127.0.0.1:4569/tb?list-type=2");	/* no '/' */
	free(url);
	be_s3_addr_free(&a);
	config_free(cfg);
}

static void test_s3_aws_urls_are_virtual_host_style(void **state)
{
	struct mlfs_config *cfg = cfg_check_load("[datastore d]\ntype = s3\nbucket = tb\nregion = eu-west-3\n"
				       "[datastore p]\ntype = s3\nbucket = tb\nendpoint = "
				       "https://minio.lab:9000\npath_style = false\n");
	struct be_s3_addr a;
	char *url;

	(void)state;
	assert_int_equal(be_s3_addr_init(&a, cfg_check_ds(cfg, "d")), 0);
	assert_false(a.path_style);
	assert_string_equal(a.root, "");
	url = be_s3_url(&a, "k/x", "partNumber=1&uploadId=u");
	assert_string_equal(url, "https://tb.s3.eu-west-3.amazonaws.com/k/x?partNumber=1&uploadId=u");
	free(url);
	url = be_s3_url(&a, NULL, "list-type=2");
	assert_string_equal(url, "https://tb.s3.eu-west-3.amazonaws.com/?list-type=2");
	free(url);
	be_s3_addr_free(&a);
	assert_int_equal(be_s3_addr_init(&a, cfg_check_ds(cfg, "p")), 0);
	url = be_s3_url(&a, "k", NULL);
	assert_string_equal(url, "https://tb.minio.lab:9000/k");
	free(url);
	be_s3_addr_free(&a);
	config_free(cfg);
}

static void test_s3_endpoint_and_region_come_from_the_environment_when_unset(void **state)
{
	struct mlfs_config *cfg = cfg_check_load("[datastore d]\ntype = s3\nbucket = tb\n");
	struct be_s3_addr a;

	(void)state;
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9", 1);
	setenv("AWS_DEFAULT_REGION", "ap-south-1", 1);
	assert_int_equal(be_s3_addr_init(&a, cfg_check_ds(cfg, "d")), 0);
	assert_string_equal(a.endpoint, "http://127.0.0.1:9");
	assert_true(a.path_style);
	assert_string_equal(a.region, "ap-south-1");
	be_s3_addr_free(&a);
	setenv("AWS_REGION", "eu-north-1", 1);	/* AWS_REGION wins over AWS_DEFAULT_REGION */
	assert_int_equal(be_s3_addr_init(&a, cfg_check_ds(cfg, "d")), 0);
	assert_string_equal(a.region, "eu-north-1");
	be_s3_addr_free(&a);
	clear_aws_env();
	config_free(cfg);
}

/* ---- credentials ---- */

static char creds_file[64];

static void write_creds(mode_t mode)
{
	static const char text[] =
		"[default]\naws_access_key_id = DEFID\naws_secret_access_key = defsecret\n"
		"[other]\naws_access_key_id = OTHERID\naws_secret_access_key = othersecret\n"
		"aws_session_token = othertoken\n"
		"[profile half]\naws_access_key_id = HALF\n";
	int fd;

	snprintf(creds_file, sizeof(creds_file), "/tmp/test_s3_creds.XXXXXX");
	fd = mkstemp(creds_file);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	fchmod(fd, mode);
	close(fd);
	setenv("AWS_SHARED_CREDENTIALS_FILE", creds_file, 1);
}

static void check_creds(const struct datastore_config *d, int want_ret, const char *id,
			const char *secret, const char *token, const char *from)
{
	struct be_s3_creds c;

	assert_int_equal(be_s3_creds_find(&c, d), want_ret);
	if (want_ret == 0) {
		if (id) {
			assert_string_equal(c.key_id, id);
			assert_string_equal(c.secret, secret);
		} else {
			assert_null(c.key_id);
		}
		if (token)
			assert_string_equal(c.token, token);
		else
			assert_null(c.token);
		assert_string_equal(c.from, from);
		be_s3_creds_free(&c);
	}
}

static void test_s3_credentials_config_then_env_then_file(void **state)
{
	struct mlfs_config *cfg = cfg_check_load(
		"[datastore keys]\ntype = s3\nbucket = b\naccess_key_id = CFGID\n"
		"secret_access_key = cfgsecret\nsession_token = cfgtoken\n"
		"[datastore plain]\ntype = s3\nbucket = b\n"
		"[datastore prof]\ntype = s3\nbucket = b\nprofile = other\n"
		"[datastore nosuch]\ntype = s3\nbucket = b\nprofile = nosuch\n");

	(void)state;
	write_creds(0600);
	setenv("AWS_ACCESS_KEY_ID", "ENVID", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	check_creds(cfg_check_ds(cfg, "keys"), 0, "CFGID", "cfgsecret", "cfgtoken", "config");
	check_creds(cfg_check_ds(cfg, "plain"), 0, "ENVID", "envsecret", NULL, "environment");
	setenv("AWS_SESSION_TOKEN", "envtoken", 1);
	check_creds(cfg_check_ds(cfg, "plain"), 0, "ENVID", "envsecret", "envtoken", "environment");
	/* A profile named in the config is the config speaking: the file, not the env. */
	check_creds(cfg_check_ds(cfg, "prof"), 0, "OTHERID", "othersecret", "othertoken",
		    "credentials file");
	check_creds(cfg_check_ds(cfg, "nosuch"), -ENOENT, NULL, NULL, NULL, NULL);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	check_creds(cfg_check_ds(cfg, "plain"), 0, "DEFID", "defsecret", NULL, "credentials file");
	setenv("AWS_PROFILE", "other", 1);
	check_creds(cfg_check_ds(cfg, "plain"), 0, "OTHERID", "othersecret", "othertoken",
		    "credentials file");
	setenv("AWS_PROFILE", "half", 1);	/* half a pair: anonymous */
	check_creds(cfg_check_ds(cfg, "plain"), 0, NULL, NULL, NULL, "none");
	unsetenv("AWS_PROFILE");
	unlink(creds_file);
	check_creds(cfg_check_ds(cfg, "plain"), 0, NULL, NULL, NULL, "none");	/* no file: anonymous */
	clear_aws_env();
	config_free(cfg);
}

static void test_s3_credentials_file_others_can_read_is_refused(void **state)
{
	struct mlfs_config *cfg = cfg_check_load("[datastore plain]\ntype = s3\nbucket = b\n");

	(void)state;
	write_creds(0644);
	check_creds(cfg_check_ds(cfg, "plain"), -EACCES, NULL, NULL, NULL, NULL);
	unlink(creds_file);
	clear_aws_env();
	config_free(cfg);
}

/* ---- validate ---- */

static void test_s3_validate_reports_each_bad_key_with_its_line(void **state)
{
	const char *want[] = {
		"/etc/mlfs.conf:1: [datastore d] bucket: missing (the bucket's name)",
		"/etc/mlfs.conf:3: [datastore d] endpoint: 'ftp://x' is not an http:// or "
			"https:// URL of a server",
		"/etc/mlfs.conf:4: [datastore d] path_style: 'maybe' is not true or false",
		"/etc/mlfs.conf:5: [datastore d] region: 'US East' is not a region name "
			"(lowercase letters, digits and '-', like us-east-1)",
		"/etc/mlfs.conf:6: [datastore d] secret_access_key: given without access_key_id",
		NULL
	};
	const char *want2[] = {
		"/etc/mlfs.conf:3: [datastore d] bucket: 'b/sub' is not a bucket name (a folder "
			"inside it goes in root)",
		"/etc/mlfs.conf:4: [datastore d] access_key_id: given without secret_access_key",
		NULL
	};
	const char *none[] = { NULL };

	(void)state;
	cfg_check_validate(&be_s3_ops, "[datastore d]\ntype = s3\nendpoint = ftp://x\npath_style = maybe\n"
		       "region = US East\nsecret_access_key = s\n", want);
	cfg_check_validate(&be_s3_ops, "[datastore d]\ntype = s3\nbucket = b/sub\naccess_key_id = K\n", want2);
	cfg_check_validate(&be_s3_ops, "[datastore d]\ntype = s3\nbucket = b\nendpoint = https://s3.lab:9000\n"
		       "path_style = true\nregion = eu-west-1\naccess_key_id = K\n"
		       "secret_access_key = S\n", none);
}

static void test_s3_url_source_borrows_its_buckets_datastore(void **state)
{
	struct mlfs_config *cfg = cfg_check_load("[datastore b]\ntype = s3\nendpoint = http://127.0.0.1:1\n"
				       "bucket = tb\naccess_key_id = K\nsecret_access_key = S\n"
				       "[dataset d]\nsource = s3://tb/data/\n");
	struct be_s3_addr a;
	struct be_s3_creds c;

	(void)state;
	assert_int_equal(be_s3_addr_init(&a, cfg_check_ds(cfg, "dataset:d")), 0);
	assert_string_equal(a.endpoint, "http://127.0.0.1:1");
	assert_string_equal(a.root, "data/");
	assert_true(a.path_style);
	be_s3_addr_free(&a);
	assert_int_equal(be_s3_creds_find(&c, cfg_check_ds(cfg, "dataset:d")), 0);
	assert_string_equal(c.key_id, "K");
	be_s3_creds_free(&c);
	config_free(cfg);
}

/* ---- Google Cloud Storage: the same backend, GCS's conventions ---- */

static void test_gcs_defaults_are_googles_endpoint_path_style_and_region_auto(void **state)
{
	struct mlfs_config *cfg = cfg_check_load(
		"[datastore g]\ntype = gcs\nbucket = tb\nroot = /sets\n"
		"[datastore local]\ntype = gcs\nbucket = tb\nendpoint = http://127.0.0.1:4569\n");
	struct be_s3_addr a;
	char *url;

	(void)state;
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1", 1);	/* AWS's, not GCS's */
	setenv("AWS_REGION", "eu-west-3", 1);
	assert_int_equal(be_s3_addr_init(&a, cfg_check_ds(cfg, "g")), 0);
	assert_string_equal(a.endpoint, "https://storage.googleapis.com");
	assert_string_equal(a.region, "auto");
	assert_true(a.path_style);
	url = be_s3_url(&a, "sets/x.jpg", NULL);
	assert_string_equal(url, "https://storage.googleapis.com/tb/sets/x.jpg");
	free(url);
	be_s3_addr_free(&a);
	/* the endpoint overridden: how the tests point it at the local S3 server */
	assert_int_equal(be_s3_addr_init(&a, cfg_check_ds(cfg, "local")), 0);
	assert_string_equal(a.endpoint, "http://127.0.0.1:4569");
	be_s3_addr_free(&a);
	unsetenv("AWS_ENDPOINT_URL");
	unsetenv("AWS_REGION");
	config_free(cfg);
}

static void test_gcs_credentials_config_then_gcs_env_then_boto_file(void **state)
{
	static const char boto[] = "[Boto]\ndebug = 0\n[Credentials]\n"
		"gs_access_key_id = GOOGBOTO\ngs_secret_access_key = botosecret\n";
	struct mlfs_config *cfg = cfg_check_load(
		"[datastore keys]\ntype = gcs\nbucket = b\naccess_key_id = GOOGCFG\n"
		"secret_access_key = cfgsecret\n"
		"[datastore plain]\ntype = gcs\nbucket = b\n");
	char path[] = "/tmp/test_s3_boto.XXXXXX";
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, boto, strlen(boto)), (ssize_t)strlen(boto));
	close(fd);
	setenv("BOTO_CONFIG", path, 1);
	setenv("AWS_ACCESS_KEY_ID", "AWSID", 1);	/* never a GCS key */
	setenv("AWS_SECRET_ACCESS_KEY", "awssecret", 1);
	check_creds(cfg_check_ds(cfg, "keys"), 0, "GOOGCFG", "cfgsecret", NULL, "config");
	check_creds(cfg_check_ds(cfg, "plain"), 0, "GOOGBOTO", "botosecret", NULL,
		    "credentials file");
	setenv("GCS_ACCESS_KEY_ID", "GOOGENV", 1);
	setenv("GCS_SECRET_ACCESS_KEY", "envsecret", 1);
	check_creds(cfg_check_ds(cfg, "plain"), 0, "GOOGENV", "envsecret", NULL, "environment");
	unsetenv("GCS_ACCESS_KEY_ID");
	unsetenv("GCS_SECRET_ACCESS_KEY");
	unlink(path);
	check_creds(cfg_check_ds(cfg, "plain"), 0, NULL, NULL, NULL, "none");
	unsetenv("BOTO_CONFIG");
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	config_free(cfg);
}

static void test_gcs_url_source_borrows_its_buckets_gcs_datastore_only(void **state)
{
	struct mlfs_config *cfg = cfg_check_load(
		"[datastore aws]\ntype = s3\nendpoint = http://127.0.0.1:1\nbucket = tb\n"
		"access_key_id = AWSK\nsecret_access_key = S\n"
		"[datastore goog]\ntype = gcs\nendpoint = http://127.0.0.1:2\nbucket = tb\n"
		"access_key_id = GOOGK\nsecret_access_key = S\n"
		"[dataset d]\nsource = gs://tb/data/\n"
		"[dataset other]\nsource = GS://elsewhere\n");
	const struct datastore_config *ds = cfg_check_ds(cfg, "dataset:d");
	struct be_s3_addr a;

	(void)state;
	assert_string_equal(ds->type, "gcs");
	assert_string_equal(config_get(ds, "access_key_id", NULL), "GOOGK");
	assert_int_equal(be_s3_addr_init(&a, ds), 0);
	assert_string_equal(a.endpoint, "http://127.0.0.1:2");
	assert_string_equal(a.root, "data/");
	be_s3_addr_free(&a);
	ds = cfg_check_ds(cfg, "dataset:other");
	assert_int_equal(be_s3_addr_init(&a, ds), 0);
	assert_string_equal(a.endpoint, "https://storage.googleapis.com");
	assert_string_equal(a.bucket, "elsewhere");
	assert_string_equal(a.root, "");
	be_s3_addr_free(&a);
	config_free(cfg);
}

/* ---- the resume token of an upload ---- */

#define MIB (UINT64_C(1) << 20)

static void test_s3_token_plans_8_mib_parts(void **state)
{
	struct be_s3_token t;

	(void)state;
	assert_int_equal(be_s3_token_plan(&t, 100 * MIB), 0);
	assert_int_equal(t.part_size, 8 * MIB);
	assert_int_equal(t.n_parts, 13);
	assert_string_equal(t.upload_id, "");
	for (unsigned int i = 0; i < t.n_parts; i++)
		assert_string_equal(t.etags[i], "");
	assert_int_equal(be_s3_token_part_len(&t, 0), 8 * MIB);
	assert_int_equal(be_s3_token_part_len(&t, 12), 4 * MIB);
	be_s3_token_free(&t);
}

static void test_s3_token_lists_the_parts_sent_and_reads_back(void **state)
{
	const char *want = "mpu 1\nid=2~x.Yz_-=\npart_size=8388608\nsize=104857600\n"
			   "1=\"0123abcd\"\n2=\"e=f\"\n13=\"last\"\n";
	struct be_s3_token t, back;
	uint64_t done = 0;
	char *text = NULL;

	(void)state;
	assert_int_equal(be_s3_token_plan(&t, 100 * MIB), 0);
	strcpy(t.upload_id, "2~x.Yz_-=");
	strcpy(t.etags[0], "\"0123abcd\"");
	strcpy(t.etags[1], "\"e=f\"");
	strcpy(t.etags[12], "\"last\"");
	assert_int_equal(be_s3_token_print(&t, &text, &done), 0);
	assert_string_equal(text, want);
	assert_int_equal(done, 2 * 8 * MIB + 4 * MIB);

	assert_int_equal(be_s3_token_parse(&back, text), 0);
	assert_string_equal(back.upload_id, t.upload_id);
	assert_int_equal(back.size, t.size);
	assert_int_equal(back.part_size, t.part_size);
	assert_int_equal(back.n_parts, t.n_parts);
	for (unsigned int i = 0; i < t.n_parts; i++)
		assert_string_equal(back.etags[i], t.etags[i]);
	be_s3_token_free(&back);
	free(text);
	be_s3_token_free(&t);
}

static void test_s3_token_without_parts_or_last_newline_parses(void **state)
{
	struct be_s3_token t;

	(void)state;
	assert_int_equal(be_s3_token_parse(&t, "mpu 1\nid=U\npart_size=5242880\nsize=5242881\n"), 0);
	assert_int_equal(t.n_parts, 2);
	assert_string_equal(t.etags[0], "");
	assert_string_equal(t.etags[1], "");
	be_s3_token_free(&t);
	assert_int_equal(be_s3_token_parse(&t, "mpu 1\nid=U\npart_size=5242880\nsize=5242881\n"
					      "2=\"e\""), 0);
	assert_string_equal(t.etags[1], "\"e\"");
	be_s3_token_free(&t);
}

static void test_s3_token_refuses_what_is_not_one(void **state)
{
	static const char *const bad[] = {
		"",
		"done",
		"offset=123",
		"mpu 2\nid=U\npart_size=8388608\nsize=104857600\n",
		"mpu 1\npart_size=8388608\nsize=104857600\n",			/* no id */
		"mpu 1\nid=\npart_size=8388608\nsize=104857600\n",		/* empty id */
		"mpu 1\nsize=104857600\nid=U\npart_size=8388608\n",		/* out of order */
		"mpu 1\nid=U\npart_size=4194304\nsize=104857600\n",		/* parts too small for S3 */
		"mpu 1\nid=U\npart_size=8388608\nsize=0\n",
		"mpu 1\nid=U\npart_size=8388608\nsize=-1\n",
		"mpu 1\nid=U\npart_size=8388608\nsize=1e9\n",
		"mpu 1\nid=U\npart_size=8388608\nsize=99999999999999999999\n",	/* overflows */
		"mpu 1\nid=U\npart_size=5242880\nsize=1099511627776\n",		/* too many parts */
		"mpu 1\nid=U\npart_size=8388608\nsize=104857600\n0=\"e\"\n",	/* parts count from 1 */
		"mpu 1\nid=U\npart_size=8388608\nsize=104857600\n14=\"e\"\n",	/* past the last */
		"mpu 1\nid=U\npart_size=8388608\nsize=104857600\n3=\"e\"\n3=\"e\"\n",
		"mpu 1\nid=U\npart_size=8388608\nsize=104857600\n3=\n",		/* no ETag */
		"mpu 1\nid=U\npart_size=8388608\nsize=104857600\n3\n",
		"mpu 1\nid=U\npart_size=8388608\nsize=104857600\nx=\"e\"\n",
		"mpu 1\nid=U\npart_size=8388608\nsize=104857600\n\n",		/* an empty line */
		NULL
	};
	struct be_s3_token t;
	char *text;

	(void)state;
	for (size_t i = 0; bad[i]; i++) {
		if (be_s3_token_parse(&t, bad[i]) != -EINVAL)
			fail_msg("token %zu parsed: '%s'", i, bad[i]);
	}
	/* An id of 1,024 bytes does not fit, nor an ETag of 256. */
	assert_true(asprintf(&text, "mpu 1\nid=%01024d\npart_size=8388608\nsize=104857600\n", 0) > 0);
	assert_int_equal(be_s3_token_parse(&t, text), -EINVAL);
	free(text);
	assert_true(asprintf(&text, "mpu 1\nid=U\npart_size=8388608\nsize=104857600\n1=%0256d\n",
			     0) > 0);
	assert_int_equal(be_s3_token_parse(&t, text), -EINVAL);
	free(text);
}

static void test_s3_token_of_every_part_of_5_tib_fits_resume_max(void **state)
{
	const uint64_t sizes[] = { 8 * MIB, 100 * MIB, 31 * 1024 * MIB, 32 * 1024 * MIB,
				   5 * 1024 * 1024 * MIB };
	struct be_s3_token t, back;

	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		char *text = NULL;
		uint64_t done = 0;

		assert_int_equal(be_s3_token_plan(&t, sizes[k]), 0);
		assert_true(t.part_size >= 8 * MIB);
		assert_true(t.part_size <= 5 * 1024 * MIB);
		assert_true(t.n_parts <= 10000);
		assert_true((uint64_t)t.n_parts * t.part_size >= sizes[k]);
		memset(t.upload_id, 'u', sizeof(t.upload_id) - 1);
		for (unsigned int i = 0; i < t.n_parts; i++)
			memset(t.etags[i], 'e', sizeof(t.etags[i]) - 1);
		assert_int_equal(be_s3_token_print(&t, &text, &done), 0);
		assert_true(strlen(text) < BACKEND_RESUME_MAX);
		assert_int_equal(done, sizes[k]);
		assert_int_equal(be_s3_token_parse(&back, text), 0);
		assert_int_equal(back.n_parts, t.n_parts);
		be_s3_token_free(&back);
		free(text);
		be_s3_token_free(&t);
	}
}

static void test_s3_token_print_refuses_a_newline_or_no_id(void **state)
{
	struct be_s3_token t;
	uint64_t done;
	char *text = NULL;

	(void)state;
	assert_int_equal(be_s3_token_plan(&t, 100 * MIB), 0);
	assert_int_equal(be_s3_token_print(&t, &text, &done), -EINVAL);
	strcpy(t.upload_id, "U\nsize=1");
	assert_int_equal(be_s3_token_print(&t, &text, &done), -EINVAL);
	strcpy(t.upload_id, "U");
	strcpy(t.etags[4], "\"e\"\n9=\"f\"");
	assert_int_equal(be_s3_token_print(&t, &text, &done), -EINVAL);
	assert_null(text);
	be_s3_token_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_s3_list_maps_contents_to_files_and_common_prefixes_to_dirs),
		cmocka_unit_test(test_s3_list_shows_an_object_and_a_folder_of_one_name_once),
		cmocka_unit_test(test_s3_list_last_page_has_no_token),
		cmocka_unit_test(test_s3_list_decodes_xml_entities_in_names),
		cmocka_unit_test(test_s3_list_skips_hostile_and_empty_names),
		cmocka_unit_test(test_s3_list_rejects_what_is_not_a_listing),
		cmocka_unit_test(test_s3_list_stops_when_fill_says_so),
		cmocka_unit_test(test_s3_error_code_is_read_from_the_error_body),
		cmocka_unit_test(test_s3_times_are_iso8601_utc),
		cmocka_unit_test(test_s3_query_is_sorted_and_encoded),
		cmocka_unit_test(test_s3_path_style_urls_put_the_bucket_in_the_path),
		cmocka_unit_test(test_s3_aws_urls_are_virtual_host_style),
		cmocka_unit_test(test_s3_endpoint_and_region_come_from_the_environment_when_unset),
		cmocka_unit_test(test_s3_credentials_config_then_env_then_file),
		cmocka_unit_test(test_s3_credentials_file_others_can_read_is_refused),
		cmocka_unit_test(test_s3_validate_reports_each_bad_key_with_its_line),
		cmocka_unit_test(test_s3_url_source_borrows_its_buckets_datastore),
		cmocka_unit_test(test_gcs_defaults_are_googles_endpoint_path_style_and_region_auto),
		cmocka_unit_test(test_gcs_credentials_config_then_gcs_env_then_boto_file),
		cmocka_unit_test(test_gcs_url_source_borrows_its_buckets_gcs_datastore_only),
		cmocka_unit_test(test_s3_token_plans_8_mib_parts),
		cmocka_unit_test(test_s3_token_lists_the_parts_sent_and_reads_back),
		cmocka_unit_test(test_s3_token_without_parts_or_last_newline_parses),
		cmocka_unit_test(test_s3_token_refuses_what_is_not_one),
		cmocka_unit_test(test_s3_token_of_every_part_of_5_tib_fits_resume_max),
		cmocka_unit_test(test_s3_token_print_refuses_a_newline_or_no_id),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
