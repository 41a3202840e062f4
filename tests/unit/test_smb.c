/*
 * test_smb.c - the parts of the SMB backend that need no server: validate's
 * messages (a password file others can read among them), the URL builder
 * (root join, percent-encoding), the errno mapping, and that create makes
 * no connection.  tests/integration/smb_test.sh drives the rest against a
 * real smbd.
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

#include "be_smb.h"
#include "cfg_check.h"
#include "config.h"

static char pass_file[64];

static int make_pass_file(void **state)
{
	int fd;

	(void)state;
	snprintf(pass_file, sizeof(pass_file), "/tmp/test_smb.XXXXXX");
	fd = mkstemp(pass_file);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "s3cret\n", 7), 7);
	close(fd);
	return chmod(pass_file, 0600);
}

static int remove_pass_file(void **state)
{
	(void)state;
	return unlink(pass_file);
}

static void test_smb_validate_reports_each_bad_key_with_its_line(void **state)
{
	const char *want[] = {
		"/etc/mlfs.conf:1: [datastore d] address: missing (the server: host or "
			"host:port)",
		"/etc/mlfs.conf:1: [datastore d] share: missing (the share's name)",
		"/etc/mlfs.conf:1: [datastore d] password: missing (password or password_file)",
		NULL
	};
	const char *want2[] = {
		"/etc/mlfs.conf:3: [datastore d] address: 'srv:44x' is not host or host:port "
			"(a port is a number from 1 to 65535)",
		"/etc/mlfs.conf:4: [datastore d] share: 'research/ml' is not a share name (a "
			"folder inside it goes in root)",
		"/etc/mlfs.conf:5: [datastore d] root: '/a/../b' has a '..' component",
		"/etc/mlfs.conf:7: [datastore d] password_file: given with password (give one "
			"of them)",
		"/etc/mlfs.conf:7: [datastore d] password_file: /no/such/file: No such file or "
			"directory",
		NULL
	};
	const char *want3[] = {
		"/etc/mlfs.conf:3: [datastore d] address: 'srv:70000' is not host or host:port "
			"(a port is a number from 1 to 65535)",
		NULL
	};
	const char *none[] = { NULL };

	(void)state;
	cfg_check_validate(&be_smb_ops, "[datastore d]\ntype = smb\n", want);
	cfg_check_validate(&be_smb_ops, "[datastore d]\ntype = smb\naddress = srv:44x\nshare = research/ml\n"
		       "root = /a/../b\npassword = p\npassword_file = /no/such/file\n", want2);
	cfg_check_validate(&be_smb_ops, "[datastore d]\ntype = smb\naddress = srv:70000\nshare = s\n"
		       "password = p\n", want3);
	cfg_check_validate(&be_smb_ops, "[datastore d]\ntype = smb\naddress = srv:4450\nshare = s\nroot = /dir2\n"
		       "username = u\npassword = p\nworkgroup = LAB\n", none);
}

static void test_smb_validate_refuses_a_password_file_others_can_read(void **state)
{
	char text[256], msg[256];
	const char *want[] = { msg, NULL };
	const char *none[] = { NULL };

	(void)state;
	snprintf(text, sizeof(text), "[datastore d]\ntype = smb\naddress = srv\nshare = s\n"
		 "password_file = %s\n", pass_file);
	cfg_check_validate(&be_smb_ops, text, none);
	assert_int_equal(chmod(pass_file, 0644), 0);
	snprintf(msg, sizeof(msg), "/etc/mlfs.conf:5: [datastore d] password_file: %s: others "
		 "can read or change it: refused (chmod 600 it)", pass_file);
	cfg_check_validate(&be_smb_ops, text, want);
	assert_int_equal(chmod(pass_file, 0600), 0);
}

static void test_smb_create_makes_no_connection_and_reads_the_password_file(void **state)
{
	char text[256];
	struct mlfs_config *cfg;
	struct backend *be = NULL;

	(void)state;
	/* Port 1 of 127.0.0.1 has no server: create must still succeed. */
	snprintf(text, sizeof(text), "[datastore d]\ntype = smb\naddress = 127.0.0.1:1\n"
		 "share = s\npassword_file = %s\n", pass_file);
	cfg = cfg_check_load(text);
	assert_int_equal(be_smb_ops.create(&be, cfg_check_ds(cfg, "d")), 0);
	be_smb_ops.destroy(be);
	assert_int_equal(chmod(pass_file, 0640), 0);
	assert_int_equal(be_smb_ops.create(&be, cfg_check_ds(cfg, "d")), -EACCES);
	assert_int_equal(chmod(pass_file, 0600), 0);
	config_free(cfg);
}

static void check_url(const char *text, const char *path, const char *want)
{
	struct mlfs_config *cfg = cfg_check_load(text);
	struct be_smb_addr a;
	char *url;

	assert_int_equal(be_smb_addr_init(&a, cfg_check_ds(cfg, "d")), 0);
	url = be_smb_url(&a, path);
	assert_non_null(url);
	assert_string_equal(url, want);
	free(url);
	be_smb_addr_free(&a);
	config_free(cfg);
}

static void test_smb_url_joins_the_root_and_keeps_the_port_out(void **state)
{
	const char *plain = "[datastore d]\ntype = smb\naddress = 127.0.0.1:4450\nshare = share\n"
			    "password = p\n";
	const char *rooted = "[datastore d]\ntype = smb\naddress = fs.lab\nshare = share\n"
			     "root = /dir2/\npassword = p\n";
	const char *deep = "[datastore d]\ntype = smb\naddress = fs.lab\nshare = share\n"
			   "root = //a/b\npassword = p\n";

	(void)state;
	check_url(plain, "", "smb://127.0.0.1/share");
	check_url(plain, "a/b.txt", "smb://127.0.0.1/share/a/b.txt");
	check_url(rooted, "", "smb://fs.lab/share/dir2");
	check_url(rooted, "subdir2/f", "smb://fs.lab/share/dir2/subdir2/f");
	check_url(deep, "x", "smb://fs.lab/share/a/b/x");
}

static void test_smb_url_percent_encodes_each_component(void **state)
{
	const char *text = "[datastore d]\ntype = smb\naddress = h\nshare = my share\n"
			   "root = /r oot%\npassword = p\n";

	(void)state;
	check_url(text, "with space/100%#1?x=y&z+w.txt",
		  "smb://h/my%20share/r%20oot%25/with%20space/100%25%231%3Fx%3Dy%26z%2Bw.txt");
	check_url(text, "caf\xc3\xa9", "smb://h/my%20share/r%20oot%25/caf%C3%A9");
}

static void test_smb_addr_takes_the_port_or_445(void **state)
{
	struct mlfs_config *cfg = cfg_check_load("[datastore d]\ntype = smb\naddress = h:4450\nshare = s\n"
				       "password = p\n[datastore e]\ntype = smb\naddress = h\n"
				       "share = s\npassword = p\n");
	struct be_smb_addr a;

	(void)state;
	assert_int_equal(be_smb_addr_init(&a, cfg_check_ds(cfg, "d")), 0);
	assert_string_equal(a.host, "h");
	assert_int_equal(a.port, 4450);
	be_smb_addr_free(&a);
	assert_int_equal(be_smb_addr_init(&a, cfg_check_ds(cfg, "e")), 0);
	assert_int_equal(a.port, 445);
	assert_string_equal(a.root, "");
	be_smb_addr_free(&a);
	config_free(cfg);
}

static void test_smb_errno_maps_transport_failures_to_eio(void **state)
{
	const int transport[] = { ECONNREFUSED, ECONNRESET, ENOTCONN, EPIPE,
				  ECONNABORTED, EHOSTUNREACH, ENETUNREACH, 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(transport) / sizeof(transport[0]); i++) {
		assert_int_equal(be_smb_errno(transport[i]), -EIO);
		assert_true(be_smb_transient(transport[i]));
	}
	assert_true(be_smb_transient(EIO));
	/* a timeout is ETIMEDOUT, as over NFS and HTTP, and is retried like the others */
	assert_int_equal(be_smb_errno(ETIMEDOUT), -ETIMEDOUT);
	assert_true(be_smb_transient(ETIMEDOUT));
	assert_int_equal(be_smb_errno(EPERM), -EACCES);
	assert_int_equal(be_smb_errno(EACCES), -EACCES);
	assert_false(be_smb_transient(EACCES));
	assert_false(be_smb_transient(EPERM));
	assert_int_equal(be_smb_errno(ENOENT), -ENOENT);
	assert_false(be_smb_transient(ENOENT));
	assert_int_equal(be_smb_errno(EEXIST), -EEXIST);
	assert_int_equal(be_smb_errno(ENOTEMPTY), -ENOTEMPTY);
}

static void test_smb_is_registered_remote_and_writable(void **state)
{
	const struct backend_ops *ops;

	(void)state;
	assert_int_equal(backend_lookup(&ops, "smb"), 0);
	assert_ptr_equal(ops, &be_smb_ops);
	assert_true(ops->caps & BE_CAP_REMOTE);
	assert_true(ops->caps & BE_CAP_WRITE);
	assert_false(ops->caps & BE_CAP_OWNERS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smb_validate_reports_each_bad_key_with_its_line),
		cmocka_unit_test(test_smb_validate_refuses_a_password_file_others_can_read),
		cmocka_unit_test(test_smb_create_makes_no_connection_and_reads_the_password_file),
		cmocka_unit_test(test_smb_url_joins_the_root_and_keeps_the_port_out),
		cmocka_unit_test(test_smb_url_percent_encodes_each_component),
		cmocka_unit_test(test_smb_addr_takes_the_port_or_445),
		cmocka_unit_test(test_smb_errno_maps_transport_failures_to_eio),
		cmocka_unit_test(test_smb_is_registered_remote_and_writable),
	};

	return cmocka_run_group_tests(tests, make_pass_file, remove_pass_file);
}
