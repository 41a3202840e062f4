/*
 * test_nfs.c - the parts of the NFS backend that need no server: validate's
 * messages, the options checker, the mapping of libnfs's returns to errno,
 * the join of a path with the datastore's root, and a create that contacts
 * nobody.  tests/integration/nfs_test.sh drives the rest against
 * nfs-ganesha.
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
#include <cmocka.h>

#include "be_nfs.h"
#include "cfg_check.h"
#include "config.h"

static void test_nfs_validate_reports_missing_address_and_export(void **state)
{
	const char *want[] = {
		"/etc/mlfs.conf:1: [datastore d] address: missing: the NFS server's host name or IP",
		"/etc/mlfs.conf:1: [datastore d] export: missing: the exported path, e.g. /exports/ml",
		NULL
	};

	(void)state;
	cfg_check_validate(&be_nfs_ops, "[datastore d]\ntype = nfs\n", want);
}

static void test_nfs_validate_reports_each_bad_key_with_its_line(void **state)
{
	const char *want[] = {
		"/etc/mlfs.conf:3: [datastore d] address: a host name or IP, without '/', '?', "
			"'&', '@' or spaces",
		"/etc/mlfs.conf:4: [datastore d] export: an absolute path such as /exports/ml, "
			"without '?', '&' or spaces",
		"/etc/mlfs.conf:5: [datastore d] root: a folder inside the export, without '.' "
			"or '..'",
		"/etc/mlfs.conf:6: [datastore d] options: unknown option 'port' (known: version, "
			"nfsport, mountport, uid, gid)",
		NULL
	};
	const char *want2[] = {
		"/etc/mlfs.conf:5: [datastore d] options: nfsport must be a port (1-65535), not "
			"'20x'",
		NULL
	};
	const char *none[] = { NULL };

	(void)state;
	cfg_check_validate(&be_nfs_ops, "[datastore d]\ntype = nfs\naddress = nfs://srv/x\nexport = exports/ml\n"
		       "root = /a/../b\noptions = version=3&port=2049\n", want);
	cfg_check_validate(&be_nfs_ops, "[datastore d]\ntype = nfs\naddress = 10.0.0.5\nexport = /x\n"
		       "options = version=3&nfsport=20x\n", want2);
	cfg_check_validate(&be_nfs_ops, "[datastore d]\ntype = nfs\naddress = 10.0.0.5\nexport = /exports/ml\n"
		       "root = /dir2\noptions = version=3&nfsport=2049&mountport=20048&uid=1000&"
		       "gid=1000\n", none);
}

static void check_options(const char *options, int want_ret, const char *want_why)
{
	char why[160] = "";

	assert_int_equal(be_nfs_check_options(options, why, sizeof(why)), want_ret);
	if (want_why)
		assert_string_equal(why, want_why);
}

static void test_nfs_options_accepts_known_numeric_keys(void **state)
{
	(void)state;
	check_options("", 0, NULL);
	check_options("version=3", 0, NULL);
	check_options("?version=4&nfsport=2049", 0, NULL);
	check_options("version=3&nfsport=12049&mountport=12048&uid=1001&gid=0", 0, NULL);
	check_options("uid=4294967295", 0, NULL);
}

static void test_nfs_options_refuses_what_libnfs_would_not_take(void **state)
{
	(void)state;
	check_options("version=2", -EINVAL, "version must be 3 or 4, not '2'");
	check_options("nfsport=0", -EINVAL, "nfsport must be a port (1-65535), not '0'");
	check_options("mountport=70000", -EINVAL,
		      "mountport must be a port (1-65535), not '70000'");
	check_options("uid=-1", -EINVAL, "uid must be a number, not '-1'");
	check_options("gid=", -EINVAL, "gid must be a number, not ''");
	check_options("version", -EINVAL, "'version' is not key=value");
	check_options("=3", -EINVAL, "'=3' is not key=value");
	check_options("version=3&&uid=1", -EINVAL, "'' is not key=value");
	check_options("version=3&", -EINVAL, "ends with '&'");
	check_options("sec=krb5", -EINVAL,
		      "unknown option 'sec' (known: version, nfsport, mountport, uid, gid)");
}

static void test_nfs_errno_maps_connection_failures_to_eio(void **state)
{
	(void)state;
	assert_int_equal(be_nfs_errno(0), 0);
	assert_int_equal(be_nfs_errno(4096), 4096);
	assert_int_equal(be_nfs_errno(-EFAULT), -EIO);
	assert_int_equal(be_nfs_errno(-EINTR), -EIO);
	assert_int_equal(be_nfs_errno(-ECONNRESET), -EIO);
	assert_int_equal(be_nfs_errno(-ECONNREFUSED), -EIO);
	assert_int_equal(be_nfs_errno(-ENOTCONN), -EIO);
	assert_int_equal(be_nfs_errno(-EPIPE), -EIO);
	assert_int_equal(be_nfs_errno(-ETIMEDOUT), -ETIMEDOUT);
	assert_int_equal(be_nfs_errno(-ENOENT), -ENOENT);
	assert_int_equal(be_nfs_errno(-EACCES), -EACCES);
	assert_int_equal(be_nfs_errno(-ENOTEMPTY), -ENOTEMPTY);
	assert_int_equal(be_nfs_errno(-ESTALE), -ESTALE);
	assert_int_equal(be_nfs_errno(-100000), -EIO);
	assert_true(be_nfs_is_transport(-ECONNRESET));
	assert_true(be_nfs_is_transport(-ETIMEDOUT));
	assert_false(be_nfs_is_transport(-ENOENT));
	assert_false(be_nfs_is_transport(-EEXIST));
	assert_false(be_nfs_is_transport(0));
}

static void check_join(const char *root, const char *path, const char *want)
{
	char *got = NULL;

	assert_int_equal(be_nfs_join(&got, root, path), 0);
	assert_string_equal(got, want);
	free(got);
}

static void test_nfs_join_puts_paths_beneath_the_root(void **state)
{
	char *got = NULL;

	(void)state;
	check_join("/", "", "/");
	check_join("/", "a/b", "/a/b");
	check_join("", "a", "/a");
	check_join("/dir2", "", "/dir2");
	check_join("/dir2", "a/b", "/dir2/a/b");
	check_join("dir2/", "", "/dir2");
	check_join("dir2/", "a/b", "/dir2/a/b");
	check_join("//x//y/", "f", "/x/y/f");
	assert_int_equal(be_nfs_join(&got, "/dir2/..", "a"), -EINVAL);
	assert_int_equal(be_nfs_join(&got, "../up", ""), -EINVAL);
	assert_int_equal(be_nfs_join(&got, "/./x", ""), -EINVAL);
	assert_null(got);
}

/* A server that is down at mount time is no error: create contacts nobody. */
static void test_nfs_create_contacts_no_server(void **state)
{
	struct mlfs_config *cfg = cfg_check_load("[datastore d]\ntype = nfs\naddress = 127.0.0.1\n"
				       "export = /export\nroot = /dir2\n"
				       "options = version=3&nfsport=1&mountport=1\n");
	struct backend *be = NULL;

	(void)state;
	assert_int_equal(be_nfs_ops.create(&be, cfg_check_ds(cfg, "d")), 0);
	assert_non_null(be);
	be->ops = &be_nfs_ops;
	be->name = "d";
	be_nfs_ops.destroy(be);
	config_free(cfg);
}

/*
 * libnfs 4.0 makes no FIFO or socket over NFSv4: refused as EPERM before
 * any server is asked (ports 1: a server asked would answer EIO).
 */
static void test_nfs_v4_refuses_fifos_and_sockets_at_once(void **state)
{
	struct mlfs_config *cfg = cfg_check_load("[datastore d]\ntype = nfs\naddress = 127.0.0.1\n"
				       "export = /export\n"
				       "options = version=4&nfsport=1\n");
	struct backend_cred cred = { 0 };
	struct backend *be = NULL;

	(void)state;
	assert_int_equal(backend_create(&be, cfg_check_ds(cfg, "d"), 1), 0);
	assert_int_equal(backend_mknod(be, "p", S_IFIFO | 0644, 0, &cred), -EPERM);
	assert_int_equal(backend_mknod(be, "s", S_IFSOCK | 0755, 0, &cred), -EPERM);
	assert_int_equal(be->stats.meta_ops, 2);	/* asked, never sent */
	backend_destroy(be);
	config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nfs_validate_reports_missing_address_and_export),
		cmocka_unit_test(test_nfs_validate_reports_each_bad_key_with_its_line),
		cmocka_unit_test(test_nfs_options_accepts_known_numeric_keys),
		cmocka_unit_test(test_nfs_options_refuses_what_libnfs_would_not_take),
		cmocka_unit_test(test_nfs_errno_maps_connection_failures_to_eio),
		cmocka_unit_test(test_nfs_join_puts_paths_beneath_the_root),
		cmocka_unit_test(test_nfs_create_contacts_no_server),
		cmocka_unit_test(test_nfs_v4_refuses_fifos_and_sockets_at_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
