/*
 * test_ftp.c - the ftp backend's offline pieces: a datastore URL split
 * into the folder curl is given and whether it asks for TLS, a listing's
 * date read as a Unix listing writes it, the checks of a datastore section,
 * and an ftp:// source borrowing a configured server's login.
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
#include <time.h>
#include <cmocka.h>

#include "be_ftp.h"
#include "cfg_check.h"

static void check_split(const char *url, const char *root, bool tls)
{
	char *got = NULL;
	bool got_tls = !tls;

	assert_int_equal(be_ftp_split_url(url, &got, &got_tls), 0);
	assert_string_equal(got, root);
	assert_int_equal(got_tls, tls);
	free(got);
}

static void test_ftp_url_is_a_folder_and_ftps_asks_for_tls(void **state)
{
	char *got = NULL;
	bool tls;

	(void)state;
	check_split("ftp://127.0.0.1:2121/pub/sets", "ftp://127.0.0.1:2121/pub/sets/", false);
	check_split("FTP://host/pub//", "ftp://host/pub/", false);
	check_split("ftp://host", "ftp://host/", false);
	/* explicit TLS on the control port: curl is given ftp:// and told to require TLS */
	check_split("ftps://host:21/x/", "ftp://host:21/x/", true);
	assert_int_equal(be_ftp_split_url("http://host/x/", &got, &tls), -EINVAL);
	assert_int_equal(be_ftp_split_url("ftp:///x/", &got, &tls), -EINVAL);
	/* a password in the URL would end up in logs and status: username and password */
	assert_int_equal(be_ftp_split_url("ftp://u:secret@host/x/", &got, &tls), -EINVAL);
	assert_int_equal(be_ftp_split_url("ftp://host/x/?type=a", &got, &tls), -EINVAL);
	assert_null(got);
}

static void test_ftp_listing_dates_are_read_as_unix_listings_write_them(void **state)
{
	struct tm now_tm = { .tm_year = 126, .tm_mon = 10, .tm_mday = 27, .tm_hour = 15 };
	time_t now = timegm(&now_tm);	/* 2026-11-27 15:00 UTC */
	struct tm want = { .tm_year = 126, .tm_mon = 10, .tm_mday = 27, .tm_hour = 14,
			   .tm_min = 30 };

	(void)state;
	assert_int_equal(be_ftp_parse_date("Nov 27 14:30", now), timegm(&want));
	/* a recent date without a year ahead of now is last year's */
	want = (struct tm){ .tm_year = 125, .tm_mon = 11, .tm_mday = 30, .tm_hour = 23,
			    .tm_min = 59 };
	assert_int_equal(be_ftp_parse_date("Dec 30 23:59", now), timegm(&want));
	/* an older one has its year and no time */
	want = (struct tm){ .tm_year = 124, .tm_mon = 0, .tm_mday = 2 };
	assert_int_equal(be_ftp_parse_date("Jan  2  2024", now), timegm(&want));
	assert_int_equal(be_ftp_parse_date("2024-01-02", now), -1);
	assert_int_equal(be_ftp_parse_date("Nov 27 14:30 extra", now), -1);
	assert_int_equal(be_ftp_parse_date("", now), -1);
	assert_int_equal(be_ftp_parse_date(NULL, now), -1);
}

static void test_ftp_folder_links_that_could_loop_are_told(void **state)
{
	(void)state;
	/* its own folder, or one above it */
	assert_true(be_ftp_link_loops("a/b", "."));
	assert_true(be_ftp_link_loops("a/b", ".."));
	assert_true(be_ftp_link_loops("a/b", "../"));
	assert_true(be_ftp_link_loops("a/b", "./.."));
	assert_true(be_ftp_link_loops("a/b", "../../a"));
	assert_true(be_ftp_link_loops("a/b", "../b"));
	assert_true(be_ftp_link_loops("a/b", "../b/../.."));
	assert_true(be_ftp_link_loops("a/b", "c/../.."));
	assert_true(be_ftp_link_loops("", "."));
	/* out of the datastore, absolute, or nothing said */
	assert_true(be_ftp_link_loops("a/b", "../../.."));
	assert_true(be_ftp_link_loops("", "../x"));
	assert_true(be_ftp_link_loops("a", "/srv/ftp/a"));
	assert_true(be_ftp_link_loops("a", ""));
	assert_true(be_ftp_link_loops("a", NULL));
	/* beside it or below it: a walk enters it once */
	assert_false(be_ftp_link_loops("a/b", "c"));
	assert_false(be_ftp_link_loops("a/b", "./c/"));
	assert_false(be_ftp_link_loops("a/b", "../c"));
	assert_false(be_ftp_link_loops("a/b", "../bc"));
	assert_false(be_ftp_link_loops("a/b", "../../ab"));
	assert_false(be_ftp_link_loops("", "real"));
	assert_false(be_ftp_link_loops("ab", "../a/x"));
}

static void test_ftp_datastore_sections_are_checked_with_lines(void **state)
{
	static const char *const want[] = {
		"/etc/mlfs.conf:3: [datastore d] url: not an ftp:// or ftps:// URL of a host and a "
		"folder, without user info, query or fragment (give username and password)",
		"/etc/mlfs.conf:1: [datastore d] username: missing (a password is given)",
		"/etc/mlfs.conf:5: [datastore d] ca_file: /nonexistent/ca.pem: No such file or "
		"directory",
		NULL
	};
	static const char *const want2[] = {
		"/etc/mlfs.conf:1: [datastore d] url: missing (ftp://HOST/FOLDER/ or "
		"ftps://HOST/FOLDER/)",
		"/etc/mlfs.conf:4: [datastore d] password_file: given with password (give one of them)",
		"/etc/mlfs.conf:4: [datastore d] password_file: /etc/hostname: others can read or "
		"change it: refused (chmod 600 it)",
		NULL
	};
	static const char *const none[] = { NULL };

	(void)state;
	cfg_check_validate(&be_ftp_ops, "[datastore d]\ntype = ftp\nurl = ftp://u:p@h/x/\n"
			   "password = p\nca_file = /nonexistent/ca.pem\n", want);
	cfg_check_validate(&be_ftp_ops, "[datastore d]\ntype = ftp\nusername = u\n"
			   "password_file = /etc/hostname\npassword = p\n", want2);
	cfg_check_validate(&be_ftp_ops, "[datastore d]\ntype = ftp\nurl = ftps://h:2121/pub/\n"
			   "username = u\npassword = p\n", none);
}

static void test_ftp_url_source_borrows_its_servers_login(void **state)
{
	struct mlfs_config *cfg = cfg_check_load(
		"[datastore lab]\ntype = ftp\nurl = ftps://files.lab:2121/pub/\nusername = u\n"
		"password = p\nca_file = /etc/ssl/lab.pem\n"
		"[dataset d]\nsource = ftps://files.lab:2121/sets/mnist/\n"
		"[dataset other]\nsource = ftp://files.lab:21/sets/\n");
	const struct datastore_config *ds = cfg_check_ds(cfg, "dataset:d");

	(void)state;
	assert_string_equal(ds->type, "ftp");
	assert_string_equal(config_get(ds, "url", NULL), "ftps://files.lab:2121/sets/mnist/");
	assert_string_equal(config_get(ds, "username", NULL), "u");
	assert_string_equal(config_get(ds, "ca_file", NULL), "/etc/ssl/lab.pem");
	/* another port is another server: anonymous */
	ds = cfg_check_ds(cfg, "dataset:other");
	assert_null(config_get(ds, "username", NULL));
	config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ftp_url_is_a_folder_and_ftps_asks_for_tls),
		cmocka_unit_test(test_ftp_listing_dates_are_read_as_unix_listings_write_them),
		cmocka_unit_test(test_ftp_folder_links_that_could_loop_are_told),
		cmocka_unit_test(test_ftp_datastore_sections_are_checked_with_lines),
		cmocka_unit_test(test_ftp_url_source_borrows_its_servers_login),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
