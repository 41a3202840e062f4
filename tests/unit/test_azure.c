/*
 * test_azure.c - the azure backend's offline pieces: Shared Key's string to
 * sign and its signature (checked against openssl's HMAC of the same
 * string), where a datastore points and how it signs in (its keys, a
 * connection string, the Azure CLI's environment), the checks of a
 * section, the List Blobs and error XML, and the URLs the azure type
 * claims from the http one.
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
#include <cmocka.h>

#include "be_azure.h"
#include "cfg_check.h"

#define KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#define AZURITE "http://127.0.0.1:10000/devstoreaccount1"

static void clear_env(void)
{
	unsetenv("AZURE_STORAGE_ACCOUNT");
	unsetenv("AZURE_STORAGE_KEY");
	unsetenv("AZURE_STORAGE_CONNECTION_STRING");
	unsetenv("AZURE_STORAGE_SAS_TOKEN");
}

static void test_azure_string_to_sign_has_every_line_and_the_canonical_resource(void **state)
{
	const char *headers[] = { "x-ms-version: 2021-08-06", "If-Match: \"0x1\"",
				  "X-MS-Date: Fri, 27 Nov 2026 15:00:00 GMT", NULL };
	char *s;

	(void)state;
	/* Azurite's path-style endpoint: the account twice; query sorted, decoded */
	s = be_azure_string_to_sign("devstoreaccount1", "GET",
				    AZURITE "/data/a%20b.txt?restype=container&comp=list", headers,
				    "bytes=0-99");
	assert_string_equal(s, "GET\n\n\n\n\n\n\n\n\"0x1\"\n\n\nbytes=0-99\n"
			    "x-ms-date:Fri, 27 Nov 2026 15:00:00 GMT\nx-ms-version:2021-08-06\n"
			    "/devstoreaccount1/devstoreaccount1/data/a%20b.txt\ncomp:list\n"
			    "restype:container");
	free(s);
	/* a PUT's length and type; 0 is written empty */
	{
		const char *put[] = { "Content-Length: 0", "Content-Type: text/plain",
				      "x-ms-blob-type: BlockBlob", NULL };

		s = be_azure_string_to_sign("acct", "PUT",
					    "https://acct.blob.core.windows.net/c/x?prefix=a%2Fb",
					    put, NULL);
		assert_string_equal(s, "PUT\n\n\n\n\ntext/plain\n\n\n\n\n\n\n"
				    "x-ms-blob-type:BlockBlob\n/acct/c/x\nprefix:a/b");
		free(s);
	}
}

static void test_azure_signature_is_hmac_sha256_of_the_decoded_key(void **state)
{
	struct be_azure_addr a = { .account = "devstoreaccount1" };
	const char *to_sign = "GET\n\n\n\n\n\n\n\n\"0x1\"\n\n\nbytes=0-99\n"
			      "x-ms-date:Fri, 27 Nov 2026 15:00:00 GMT\nx-ms-version:2021-08-06\n"
			      "/devstoreaccount1/devstoreaccount1/data/a%20b.txt\ncomp:list\n"
			      "restype:container";
	struct mlfs_config *cfg = cfg_check_load("[datastore d]\ntype = azure\ncontainer = c\n"
						 "account = devstoreaccount1\nkey = " KEY "\n");
	char out[256];

	(void)state;
	clear_env();
	assert_int_equal(be_azure_authorization(&a, to_sign, out, sizeof(out)), -EINVAL);
	assert_int_equal(be_azure_addr_init(&a, cfg_check_ds(cfg, "d")), 0);
	assert_int_equal(a.key_len, 64);
	/* the value `openssl dgst -sha256 -mac HMAC` gives for the same string and key */
	assert_int_equal(be_azure_authorization(&a, to_sign, out, sizeof(out)), 0);
	assert_string_equal(out, "SharedKey devstoreaccount1:"
			    "AAwYAQCgfn97x5/SsLioqWh2+fD+JadlQ0XFYz/sX5o=");
	assert_string_equal(a.endpoint, "https://devstoreaccount1.blob.core.windows.net");
	assert_string_equal(a.from, "config");
	be_azure_addr_free(&a);
	config_free(cfg);
}

static void test_azure_addresses_from_keys_connection_strings_and_the_environment(void **state)
{
	struct mlfs_config *cfg = cfg_check_load(
		"[datastore cs]\ntype = azure\ncontainer = c\nroot = /sets\n"
		"connection_string = DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
		"AccountKey=" KEY ";BlobEndpoint=" AZURITE "/;\n"
		"[datastore sas]\ntype = azure\ncontainer = c\n"
		"endpoint = https://lab.blob.core.windows.net\nsas = ?sv=2021&sig=x%2Fy\n"
		"[datastore env]\ntype = azure\ncontainer = c\n"
		"[datastore suffix]\ntype = azure\ncontainer = c\n"
		"connection_string = AccountName=gov;EndpointSuffix=core.usgovcloudapi.net;"
		"SharedAccessSignature=sv=1\n");
	struct be_azure_addr a;

	(void)state;
	clear_env();
	assert_int_equal(be_azure_addr_init(&a, cfg_check_ds(cfg, "cs")), 0);
	assert_string_equal(a.endpoint, AZURITE);
	assert_string_equal(a.account, "devstoreaccount1");
	assert_string_equal(a.root, "sets/");
	assert_int_equal(a.key_len, 64);
	be_azure_addr_free(&a);
	/* the account from the endpoint's host; a SAS without its '?' */
	assert_int_equal(be_azure_addr_init(&a, cfg_check_ds(cfg, "sas")), 0);
	assert_string_equal(a.account, "lab");
	assert_string_equal(a.sas, "sv=2021&sig=x%2Fy");
	assert_int_equal(a.key_len, 0);
	be_azure_addr_free(&a);
	assert_int_equal(be_azure_addr_init(&a, cfg_check_ds(cfg, "suffix")), 0);
	assert_string_equal(a.endpoint, "https://gov.blob.core.usgovcloudapi.net");
	assert_string_equal(a.sas, "sv=1");
	be_azure_addr_free(&a);
	/* nothing in the section: the Azure CLI's variables; none at all names no account */
	assert_int_equal(be_azure_addr_init(&a, cfg_check_ds(cfg, "env")), -EINVAL);
	setenv("AZURE_STORAGE_ACCOUNT", "envacct", 1);
	setenv("AZURE_STORAGE_KEY", KEY, 1);
	assert_int_equal(be_azure_addr_init(&a, cfg_check_ds(cfg, "env")), 0);
	assert_string_equal(a.account, "envacct");
	assert_string_equal(a.from, "environment");
	assert_int_equal(a.key_len, 64);
	be_azure_addr_free(&a);
	setenv("AZURE_STORAGE_CONNECTION_STRING", "AccountName=csacct;AccountKey=" KEY, 1);
	assert_int_equal(be_azure_addr_init(&a, cfg_check_ds(cfg, "env")), 0);
	assert_string_equal(a.account, "csacct");	/* the connection string wins */
	assert_string_equal(a.endpoint, "https://csacct.blob.core.windows.net");
	be_azure_addr_free(&a);
	clear_env();
	config_free(cfg);
}

static void test_azure_sections_are_checked_with_lines(void **state)
{
	static const char *const want[] = {
		"/etc/mlfs.conf:1: [datastore d] container: missing (the container's name)",
		"/etc/mlfs.conf:4: [datastore d]: give one of key, sas and connection_string",
		"/etc/mlfs.conf:5: [datastore d] endpoint: 'ftp://x' is not an http:// or https:// URL",
		NULL
	};
	static const char *const want2[] = {
		"/etc/mlfs.conf:4: [datastore d] key: not a base64 account key", NULL
	};
	static const char *const want3[] = {
		"/etc/mlfs.conf:1: [datastore d]: no account: set account, an endpoint "
		"https://ACCOUNT.blob.core.windows.net, a connection_string or AZURE_STORAGE_ACCOUNT",
		NULL
	};
	static const char *const want4[] = {
		"/etc/mlfs.conf:1: [datastore d]: the AccountKey of connection_string is not a "
		"base64 account key", NULL
	};
	static const char *const want5[] = {
		"/etc/mlfs.conf:1: [datastore d]: the AccountKey of AZURE_STORAGE_KEY is not a "
		"base64 account key", NULL
	};
	static const char *const none[] = { NULL };

	(void)state;
	clear_env();
	cfg_check_validate(&be_azure_ops, "[datastore d]\ntype = azure\nkey = " KEY "\n"
			   "sas = x\nendpoint = ftp://x\n", want);
	/* a bad key is named as such wherever it came from, never "no account" */
	cfg_check_validate(&be_azure_ops, "[datastore d]\ntype = azure\ncontainer = c\n"
			   "connection_string = AccountName=a;AccountKey=not*base64\n", want4);
	setenv("AZURE_STORAGE_ACCOUNT", "a", 1);
	setenv("AZURE_STORAGE_KEY", "%%%%", 1);
	cfg_check_validate(&be_azure_ops, "[datastore d]\ntype = azure\ncontainer = c\n", want5);
	clear_env();
	cfg_check_validate(&be_azure_ops, "[datastore d]\ntype = azure\ncontainer = c\n"
			   "key = not*base64\naccount = a\n", want2);
	cfg_check_validate(&be_azure_ops, "[datastore d]\ntype = azure\ncontainer = c\n", want3);
	cfg_check_validate(&be_azure_ops, "[datastore d]\ntype = azure\ncontainer = c\n"
			   "endpoint = " AZURITE "\naccount = devstoreaccount1\nkey = " KEY "\n",
			   none);
}

static void test_azure_list_chunk_is_a_page_size_up_to_azures_most(void **state)
{
	static const char *const bad[] = { "0", "5001", "-3", "+7", "12x", "99999999999" };
	struct mlfs_config *cfg = cfg_check_load(
		"[datastore def]\ntype = azure\ncontainer = c\naccount = a\n"
		"[datastore small]\ntype = azure\ncontainer = c\naccount = a\nlist_chunk = 1\n"
		"[datastore most]\ntype = azure\ncontainer = c\naccount = a\nlist_chunk = 5000\n");

	(void)state;
	clear_env();
	assert_int_equal(be_azure_list_chunk(cfg_check_ds(cfg, "def")), 5000);
	assert_int_equal(be_azure_list_chunk(cfg_check_ds(cfg, "small")), 1);
	assert_int_equal(be_azure_list_chunk(cfg_check_ds(cfg, "most")), 5000);
	config_free(cfg);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char conf[256], line[256];
		const char *want[] = { line, NULL };

		snprintf(conf, sizeof(conf), "[datastore d]\ntype = azure\ncontainer = c\n"
			 "account = a\nlist_chunk = %s\n", bad[i]);
		snprintf(line, sizeof(line), "/etc/mlfs.conf:5: [datastore d] list_chunk: '%s' is "
			 "not a whole number from 1 to 5000 (the entries one listing asks for)",
			 bad[i]);
		cfg_check_validate(&be_azure_ops, conf, want);
	}
}

struct got {
	char names[8][64];
	int64_t sizes[8];
	bool dirs[8];
	int n;
};

static int collect(void *arg, const struct be_azure_entry *e)
{
	struct got *g = arg;

	snprintf(g->names[g->n], sizeof(g->names[0]), "%s|%s", e->name, e->etag);
	g->sizes[g->n] = e->size;
	g->dirs[g->n++] = e->is_dir;
	return 0;
}

static void test_azure_list_and_error_xml(void **state)
{
	static const char page[] =
		"\xef\xbb\xbf<?xml version=\"1.0\" encoding=\"utf-8\"?>"
		"<EnumerationResults ServiceEndpoint=\"http://127.0.0.1:10000/devstoreaccount1\" "
		"ContainerName=\"data\"><Prefix>sets/</Prefix><Delimiter>/</Delimiter><Blobs>"
		"<Blob><Name>sets/a &amp; b.txt</Name><Properties>"
		"<Last-Modified>Fri, 27 Nov 2026 15:53:00 GMT</Last-Modified>"
		"<Etag>0x8DB1</Etag><Content-Length>12</Content-Length></Properties></Blob>"
		"<BlobPrefix><Name>sets/many/</Name></BlobPrefix>"
		"</Blobs><NextMarker>2!72!MDAw</NextMarker></EnumerationResults>";
	static const char err[] =
		"<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>AuthorizationFailure</Code>"
		"<Message>Server failed to authenticate the request.\nRequestId:1\nTime:2</Message>"
		"</Error>";
	char marker[64], why[128];
	struct got g = { .n = 0 };

	(void)state;
	assert_int_equal(be_azure_parse_list(page, sizeof(page) - 1, collect, &g, marker,
					     sizeof(marker)), 0);
	assert_int_equal(g.n, 2);
	assert_string_equal(g.names[0], "sets/a & b.txt|0x8DB1");
	assert_int_equal(g.sizes[0], 12);
	assert_false(g.dirs[0]);
	assert_string_equal(g.names[1], "sets/many/|");
	assert_true(g.dirs[1]);
	assert_string_equal(marker, "2!72!MDAw");
	assert_int_equal(be_azure_parse_list("<Error/>", 8, collect, &g, marker, sizeof(marker)),
			 -EIO);
	assert_int_equal(be_azure_parse_list("not xml", 7, collect, &g, marker, sizeof(marker)),
			 -EIO);
	assert_int_equal(be_azure_parse_error(err, sizeof(err) - 1, why, sizeof(why)), 0);
	assert_string_equal(why, "AuthorizationFailure: Server failed to authenticate the request.");
	assert_int_equal(be_azure_parse_error("<x/>", 4, why, sizeof(why)), -ENOENT);
}

/* A blob and blobs beneath its name: one entry, the folder unless the blob holds bytes. */
static void test_azure_list_shows_a_blob_and_a_folder_of_one_name_once(void **state)
{
	static const char page[] =
		"<EnumerationResults><Blobs>"
		"<Blob><Name>d/marker</Name><Properties><Content-Length>0</Content-Length>"
		"</Properties></Blob>"
		"<BlobPrefix><Name>d/marker/</Name></BlobPrefix>"
		"<Blob><Name>d/real</Name><Properties><Content-Length>7</Content-Length>"
		"</Properties></Blob>"
		"<BlobPrefix><Name>d/real/</Name></BlobPrefix>"
		"<Blob><Name>d/zero</Name><Properties><Content-Length>0</Content-Length>"
		"</Properties></Blob>"
		"</Blobs></EnumerationResults>";
	char marker[64];
	struct got g = { .n = 0 };

	(void)state;
	assert_int_equal(be_azure_parse_list(page, sizeof(page) - 1, collect, &g, marker,
					     sizeof(marker)), 0);
	assert_int_equal(g.n, 3);
	assert_string_equal(g.names[0], "d/marker/|");	/* the folder hides the empty blob */
	assert_true(g.dirs[0]);
	assert_string_equal(g.names[1], "d/real|");	/* its bytes hide the folder */
	assert_false(g.dirs[1]);
	assert_string_equal(g.names[2], "d/zero|");	/* an empty file of its own */
	assert_false(g.dirs[2]);
}

static void test_azure_claims_blob_urls_from_the_http_type(void **state)
{
	struct mlfs_config *cfg = cfg_check_load(
		"[datastore lab]\ntype = azure\nendpoint = " AZURITE "\n"
		"account = acct\nkey = " KEY "\ncontainer = data\n"
		"[dataset d]\nsource = https://acct.blob.core.windows.net/data/sets/mnist/\n"
		"[dataset other]\nsource = https://other.blob.core.windows.net/data/x\n"
		"[dataset web]\nsource = https://blob.core.windows.net.example.org/data/\n");
	const struct datastore_config *ds = cfg_check_ds(cfg, "dataset:d");

	(void)state;
	assert_string_equal(ds->type, "azure");
	assert_string_equal(config_get(ds, "endpoint", NULL), AZURITE);	/* borrowed */
	assert_string_equal(config_get(ds, "container", NULL), "data");
	assert_string_equal(config_get(ds, "root", NULL), "/sets/mnist/");
	ds = cfg_check_ds(cfg, "dataset:other");
	assert_string_equal(ds->type, "azure");
	assert_string_equal(config_get(ds, "account", NULL), "other");
	assert_null(config_get(ds, "key", NULL));	/* another account: nothing borrowed */
	assert_string_equal(cfg_check_ds(cfg, "dataset:web")->type, "http");
	config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_azure_string_to_sign_has_every_line_and_the_canonical_resource),
		cmocka_unit_test(test_azure_signature_is_hmac_sha256_of_the_decoded_key),
		cmocka_unit_test(test_azure_addresses_from_keys_connection_strings_and_the_environment),
		cmocka_unit_test(test_azure_sections_are_checked_with_lines),
		cmocka_unit_test(test_azure_list_chunk_is_a_page_size_up_to_azures_most),
		cmocka_unit_test(test_azure_list_and_error_xml),
		cmocka_unit_test(test_azure_list_shows_a_blob_and_a_folder_of_one_name_once),
		cmocka_unit_test(test_azure_claims_blob_urls_from_the_http_type),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
