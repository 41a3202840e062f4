/*
 * test_local.c - the local backend: confinement first, then each call.
 *
 * A scratch root holds files, a folder, and symlinks planted to escape it
 * (to /etc, to "..", to a folder inside).  The backend must show the links
 * as links and never follow one, nor a "..", itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "backend.h"
#include "be_local.h"

static char root[256];
static char outside[300];
static struct backend *be;
static struct config_kv kv[2];
static struct datastore_config ds;

static void make_file(const char *rel, const char *data)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(data, f);
	fclose(f);
}

static int setup(void **state)
{
	char path[512];

	(void)state;
	snprintf(root, sizeof(root), "/tmp/mlfs-test-local.XXXXXX");
	if (!mkdtemp(root))
		return -1;
	snprintf(path, sizeof(path), "%s/sub", root);
	mkdir(path, 0755);
	make_file("a.txt", "alpha");
	make_file("sub/b.txt", "beta");
	snprintf(outside, sizeof(outside), "%s.outside", root);
	mkdir(outside, 0755);
	snprintf(path, sizeof(path), "%s/secret", outside);
	FILE *f = fopen(path, "w");
	fputs("secret", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/esc", root);
	assert_int_equal(symlink(outside, path), 0);
	snprintf(path, sizeof(path), "%s/up", root);
	assert_int_equal(symlink("..", path), 0);
	snprintf(path, sizeof(path), "%s/lnkdir", root);
	assert_int_equal(symlink("sub", path), 0);
	kv[0] = (struct config_kv){ .key = "type", .value = "local", .line = 2 };
	kv[1] = (struct config_kv){ .key = "root", .value = root, .line = 3 };
	ds = (struct datastore_config){
		.file = "test.conf", .name = "scratch", .line = 1, .type = "local",
		.type_line = 2, .uid = -1, .gid = -1, .mode = -1, .timeout = -1,
		.retries = -1, .kv = kv, .n_kv = 2,
	};
	return backend_create(&be, &ds, 1);
}

static int teardown(void **state)
{
	char cmd[700];

	(void)state;
	backend_destroy(be);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", root, outside);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_local_shows_symlinks_as_symlinks(void **state)
{
	struct stat st;
	char buf[512];

	(void)state;
	assert_int_equal(backend_getattr(be, "esc", &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(backend_readlink(be, "esc", buf, sizeof(buf)), 0);
	assert_string_equal(buf, outside);
	assert_int_equal(backend_getattr(be, "up", &st), 0);
	assert_true(S_ISLNK(st.st_mode));
}

static void test_local_never_follows_a_symlink_in_a_path(void **state)
{
	struct backend_file *f = NULL;
	struct stat st;

	(void)state;
	assert_int_equal(backend_getattr(be, "esc/secret", &st), -ELOOP);
	assert_int_equal(backend_open(&f, be, "esc/secret", O_RDONLY), -ELOOP);
	assert_int_equal(backend_open(&f, be, "lnkdir/b.txt", O_RDONLY), -ELOOP);
	assert_int_equal(backend_open(&f, be, "up/etc", O_RDONLY), -ELOOP);
	/* a symlink as the last component is not followed either */
	assert_int_equal(backend_open(&f, be, "esc", O_RDONLY), -ELOOP);
	assert_null(f);
}

static void test_local_refuses_dotdot(void **state)
{
	struct backend_file *f = NULL;
	struct stat st;

	(void)state;
	assert_int_equal(backend_getattr(be, "..", &st), -EINVAL);
	assert_int_equal(backend_getattr(be, "sub/../a.txt", &st), -EINVAL);
	assert_int_equal(backend_open(&f, be, "../etc/passwd", O_RDONLY), -EINVAL);
	assert_int_equal(backend_unlink(be, "sub/../a.txt"), -EINVAL);
	assert_int_equal(backend_getattr(be, "a.txt", &st), 0);
}

static void test_local_changes_never_reach_through_a_symlink(void **state)
{
	struct stat before, after, st = { .st_mode = 0777, .st_size = 0 };
	char secret[512];

	(void)state;
	snprintf(secret, sizeof(secret), "%s/secret", outside);
	assert_int_equal(stat(secret, &before), 0);
	assert_int_equal(backend_setattr(be, "esc", NULL, &st, BE_SET_MODE), -EOPNOTSUPP);
	assert_int_equal(backend_setattr(be, "esc/secret", NULL, &st, BE_SET_MODE), -ELOOP);
	assert_int_equal(backend_setattr(be, "esc/secret", NULL, &st, BE_SET_SIZE), -ELOOP);
	assert_int_equal(backend_unlink(be, "esc/secret"), -ELOOP);
	assert_int_equal(backend_rename(be, "esc/secret", "stolen", 0), -ELOOP);
	assert_int_equal(stat(secret, &after), 0);
	assert_int_equal(after.st_mode, before.st_mode);
	assert_int_equal(after.st_size, before.st_size);
}

static int collect(void *payload, const char *name, const struct stat *st)
{
	char *names = payload;

	assert_non_null(st);
	strcat(names, name);
	strcat(names, S_ISLNK(st->st_mode) ? "@ " : " ");
	return 0;
}

static void test_local_readdir_lists_entries_with_attributes(void **state)
{
	char names[256] = "";

	(void)state;
	assert_int_equal(backend_readdir(be, "sub", collect, names), 0);
	assert_string_equal(names, "b.txt ");
	names[0] = '\0';
	assert_int_equal(backend_readdir(be, "", collect, names), 0);
	assert_non_null(strstr(names, "a.txt "));
	assert_non_null(strstr(names, "esc@ "));
	assert_null(strstr(names, ". "));
	assert_int_equal(backend_readdir(be, "lnkdir", collect, names), -ELOOP);
}

static void test_local_read_write_create(void **state)
{
	struct backend_cred cred = { .uid = 65534, .gid = 65534 };
	struct backend_file *f;
	char buf[16] = { 0 };
	struct stat st;

	(void)state;
	assert_int_equal(backend_open(&f, be, "sub/b.txt", O_RDONLY), 0);
	assert_int_equal(backend_pread(f, buf, sizeof(buf), 1), 3);
	assert_string_equal(buf, "eta");
	backend_release(f);
	assert_int_equal(backend_create_file(&f, be, "sub/new", O_RDWR, 0640, &cred), 0);
	assert_int_equal(backend_pwrite(f, "hello", 5, 0), 5);
	assert_int_equal(backend_fgetattr(f, &st), 0);
	assert_int_equal(st.st_size, 5);
	assert_int_equal(st.st_mode & 0777, 0640);
	if (geteuid() == 0)
		assert_int_equal(st.st_uid, 65534);
	backend_release(f);
	assert_int_equal(backend_create_file(&f, be, "sub/new", O_RDWR | O_EXCL, 0640, &cred),
			 -EEXIST);
	assert_int_equal(be->stats.bytes_read, 3);
	assert_int_equal(be->stats.bytes_written, 5);
}

static void test_local_namespace_calls(void **state)
{
	struct backend_cred cred = { .uid = 0, .gid = 0 };
	struct stat st = { 0 };
	char buf[64];

	(void)state;
	assert_int_equal(backend_mkdir(be, "d", 0700, &cred), 0);
	assert_int_equal(backend_mkdir(be, "d", 0700, &cred), -EEXIST);
	assert_int_equal(backend_rename(be, "a.txt", "d/a.txt", 0), 0);
	assert_int_equal(backend_link(be, "d/a.txt", "d/hard"), 0);
	assert_int_equal(backend_getattr(be, "d/hard", &st), 0);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(backend_symlink(be, "a.txt", "d/soft", &cred), 0);
	assert_int_equal(backend_readlink(be, "d/soft", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "a.txt");
	assert_int_equal(backend_rmdir(be, "d"), -ENOTEMPTY);
	st.st_size = 2;
	assert_int_equal(backend_setattr(be, "d/hard", NULL, &st, BE_SET_SIZE), 0);
	assert_int_equal(backend_getattr(be, "d/a.txt", &st), 0);
	assert_int_equal(st.st_size, 2);
	st.st_mode = 0600;
	st.st_mtim.tv_sec = 1234567890;
	st.st_mtim.tv_nsec = 0;
	assert_int_equal(backend_setattr(be, "d/a.txt", NULL, &st, BE_SET_MODE | BE_SET_MTIME),
			 0);
	assert_int_equal(backend_getattr(be, "d/a.txt", &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_mtim.tv_sec, 1234567890);
	assert_int_equal(backend_unlink(be, "d/a.txt"), 0);
	assert_int_equal(backend_unlink(be, "d/a.txt"), -ENOENT);
}

/* The real path of @rel beneath the root, stat'ed without following. */
static int lstat_rel(const char *rel, struct stat *st)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	return lstat(path, st);
}

static void test_local_mknod_makes_special_files_with_exact_modes(void **state)
{
	struct backend_cred cred = { .uid = 65534, .gid = 65534 };
	mode_t old = umask(077);	/* the daemon's own umask never applies */
	struct stat st;

	(void)state;
	assert_int_equal(backend_mknod(be, "sub/p", S_IFIFO | 0666, 0, &cred), 0);
	assert_int_equal(lstat_rel("sub/p", &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0666);
	assert_int_equal(backend_mknod(be, "sub/s", S_IFSOCK | 0751, 0, &cred), 0);
	assert_int_equal(lstat_rel("sub/s", &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0751);
	assert_int_equal(backend_mknod(be, "sub/p", S_IFIFO | 0666, 0, &cred), -EEXIST);
	assert_int_equal(backend_mknod(be, "esc", S_IFIFO | 0666, 0, &cred), -EEXIST);
	if (geteuid() == 0) {
		assert_int_equal(lstat_rel("sub/p", &st), 0);
		assert_int_equal(st.st_uid, 65534);
		assert_int_equal(backend_mknod(be, "c", S_IFCHR | 0600, makedev(1, 3), &cred), 0);
		assert_int_equal(lstat_rel("c", &st), 0);
		assert_true(S_ISCHR(st.st_mode));
		assert_int_equal(st.st_rdev, makedev(1, 3));
	}
	umask(old);
}

static void test_local_mknod_never_reaches_through_a_symlink(void **state)
{
	struct backend_cred cred = { 0 };
	struct stat st;
	char path[512];

	(void)state;
	assert_int_equal(backend_mknod(be, "esc/p", S_IFIFO | 0644, 0, &cred), -ELOOP);
	assert_int_equal(backend_mknod(be, "lnkdir/p", S_IFIFO | 0644, 0, &cred), -ELOOP);
	assert_int_equal(backend_mknod(be, "up/p", S_IFIFO | 0644, 0, &cred), -ELOOP);
	assert_int_equal(backend_mknod(be, "sub/../p", S_IFIFO | 0644, 0, &cred), -EINVAL);
	snprintf(path, sizeof(path), "%s/p", outside);
	assert_int_equal(lstat(path, &st), -1);
	assert_int_equal(lstat_rel("sub/p", &st), -1);
}

/* chown of a new entry to its maker clears setuid and setgid; they are put back. */
static void test_local_new_entries_keep_setuid_and_setgid(void **state)
{
	struct backend_cred cred = { .uid = 65534, .gid = 65534 };
	struct backend_file *f;
	struct stat st;

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_int_equal(backend_create_file(&f, be, "suid", O_RDWR, 04755, &cred), 0);
	backend_release(f);
	assert_int_equal(lstat_rel("suid", &st), 0);
	assert_int_equal(st.st_mode & 07777, 04755);
	assert_int_equal(st.st_uid, 65534);
	assert_int_equal(backend_mknod(be, "sgid-fifo", S_IFIFO | 02770, 0, &cred), 0);
	assert_int_equal(lstat_rel("sgid-fifo", &st), 0);
	assert_int_equal(st.st_mode & 07777, 02770);
	assert_int_equal(st.st_gid, 65534);
}

/* Nothing to change but the change time: chown(f, -1, -1). */
static void test_local_setattr_marks_the_change_time(void **state)
{
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	struct stat before, after, none = { 0 };

	(void)state;
	assert_int_equal(lstat_rel("a.txt", &before), 0);
	nanosleep(&pause, NULL);
	assert_int_equal(backend_setattr(be, "a.txt", NULL, &none, BE_SET_CTIME), 0);
	assert_int_equal(lstat_rel("a.txt", &after), 0);
	assert_true(after.st_ctim.tv_sec > before.st_ctim.tv_sec ||
		    (after.st_ctim.tv_sec == before.st_ctim.tv_sec &&
		     after.st_ctim.tv_nsec > before.st_ctim.tv_nsec));
	assert_int_equal(after.st_uid, before.st_uid);
	assert_int_equal(after.st_mode, before.st_mode);
}

static void test_local_validate_names_the_missing_root(void **state)
{
	struct config_kv bad[2] = {
		{ .key = "type", .value = "local", .line = 2 },
		{ .key = "root", .value = "/nonexistent/mlfs-root", .line = 7 },
	};
	struct datastore_config cfg = ds;
	struct diag d;

	(void)state;
	cfg.kv = bad;
	diag_init(&d);
	assert_int_equal(be_local_ops.validate(&cfg, &d), -ENOENT);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0], "test.conf:7: [datastore scratch] root: "
			    "/nonexistent/mlfs-root: No such file or directory");
	diag_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_local_shows_symlinks_as_symlinks, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_local_never_follows_a_symlink_in_a_path, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_local_refuses_dotdot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_changes_never_reach_through_a_symlink,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_readdir_lists_entries_with_attributes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_read_write_create, setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_namespace_calls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_mknod_makes_special_files_with_exact_modes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_mknod_never_reaches_through_a_symlink,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_new_entries_keep_setuid_and_setgid, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_local_setattr_marks_the_change_time, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_local_validate_names_the_missing_root, setup,
						teardown),
	};

	return cmocka_run_group_tests_name("local", tests, NULL, NULL);
}
