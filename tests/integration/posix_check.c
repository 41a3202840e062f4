/*
 * posix_check.c - POSIX behaviour of a folder, checked with raw syscalls.
 *
 * Run against a plain local folder it proves the checks themselves; run
 * against a folder inside an mlfs mount it proves that datastores/ behaves
 * as the folder behind it does.  The folder is the first argument (or
 * $MLFS_POSIX_DIR); each test works in a fresh subfolder of it.  Needs root
 * for the chown test.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

static const char *posix_base;
static char posix_dir[4096];

static char *P(const char *name)
{
	static __thread char buf[4][8192];
	static __thread int slot;
	char *p = buf[slot++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s", posix_dir, name);
	return p;
}

static void write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	assert_int_equal(close(fd), 0);
}

static void assert_content(const char *path, const char *want)
{
	char buf[256] = { 0 };
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_true(read(fd, buf, sizeof(buf) - 1) >= 0);
	close(fd);
	assert_string_equal(buf, want);
}

static int setup(void **state)
{
	static int n;

	(void)state;
	snprintf(posix_dir, sizeof(posix_dir), "%s/posix.%d.%d", posix_base, (int)getpid(), n++);
	return mkdir(posix_dir, 0755);
}

static int teardown(void **state)
{
	char cmd[4200];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", posix_dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_rename_replaces_existing_file(void **state)
{
	int fd;
	char buf[16] = { 0 };

	(void)state;
	write_file(P("old"), "old");
	write_file(P("new"), "new");
	fd = open(P("old"), O_RDONLY);
	assert_int_equal(rename(P("new"), P("old")), 0);
	assert_content(P("old"), "new");
	assert_int_equal(access(P("new"), F_OK), -1);
	assert_int_equal(errno, ENOENT);
	/* the replaced file lives on through its descriptor */
	assert_int_equal(read(fd, buf, sizeof(buf)), 3);
	assert_string_equal(buf, "old");
	close(fd);
}

static void test_rename_noreplace_and_exchange(void **state)
{
	(void)state;
	write_file(P("a"), "A");
	write_file(P("b"), "B");
	assert_int_equal(renameat2(AT_FDCWD, P("a"), AT_FDCWD, P("b"), RENAME_NOREPLACE), -1);
	assert_int_equal(errno, EEXIST);
	assert_int_equal(renameat2(AT_FDCWD, P("a"), AT_FDCWD, P("b"), RENAME_EXCHANGE), 0);
	assert_content(P("a"), "B");
	assert_content(P("b"), "A");
}

static void test_unlink_of_open_file_keeps_data(void **state)
{
	char buf[16] = { 0 };
	struct stat st;
	int fd;

	(void)state;
	fd = open(P("f"), O_RDWR | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(unlink(P("f")), 0);
	assert_int_equal(pwrite(fd, "still here", 10, 0), 10);
	assert_int_equal(pread(fd, buf, sizeof(buf), 0), 10);
	assert_string_equal(buf, "still here");
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 10);
	assert_int_equal(st.st_nlink, 0);	/* no name left */
	assert_int_equal(ftruncate(fd, 5), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 5);
	close(fd);
	assert_int_equal(access(P("f"), F_OK), -1);
}

static void test_truncate_shrinks_and_extends(void **state)
{
	struct stat st;
	char buf[16];
	int fd;

	(void)state;
	write_file(P("t"), "0123456789");
	assert_int_equal(truncate(P("t"), 4), 0);
	assert_content(P("t"), "0123");
	assert_int_equal(truncate(P("t"), 8), 0);
	assert_int_equal(stat(P("t"), &st), 0);
	assert_int_equal(st.st_size, 8);
	fd = open(P("t"), O_RDONLY);
	assert_int_equal(read(fd, buf, sizeof(buf)), 8);
	assert_memory_equal(buf, "0123\0\0\0\0", 8);
	close(fd);
	fd = open(P("t"), O_WRONLY | O_TRUNC);
	close(fd);
	assert_int_equal(stat(P("t"), &st), 0);
	assert_int_equal(st.st_size, 0);
}

static void test_chmod_chown_utimens(void **state)
{
	struct timespec ts[2] = { { 1000000000, 123456789 }, { 1200000000, 987654321 } };
	struct stat st;

	(void)state;
	write_file(P("m"), "x");
	assert_int_equal(chmod(P("m"), 0600), 0);
	assert_int_equal(stat(P("m"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(chown(P("m"), 65534, 65534), 0);
	assert_int_equal(stat(P("m"), &st), 0);
	assert_int_equal(st.st_uid, 65534);
	assert_int_equal(st.st_gid, 65534);
	assert_int_equal(utimensat(AT_FDCWD, P("m"), ts, 0), 0);
	assert_int_equal(stat(P("m"), &st), 0);
	assert_int_equal(st.st_atim.tv_sec, 1000000000);
	assert_int_equal(st.st_mtim.tv_sec, 1200000000);
	assert_int_equal(st.st_mtim.tv_nsec, 987654321);
}

static void test_symlink_is_shown_and_resolved_by_the_client(void **state)
{
	char buf[64] = { 0 };
	struct stat st;

	(void)state;
	write_file(P("target"), "through the link");
	assert_int_equal(symlink("target", P("link")), 0);
	assert_int_equal(symlink("nowhere", P("dangling")), 0);
	assert_int_equal(lstat(P("link"), &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(readlink(P("link"), buf, sizeof(buf)), 6);
	assert_string_equal(buf, "target");
	assert_content(P("link"), "through the link");
	assert_int_equal(open(P("dangling"), O_RDONLY), -1);
	assert_int_equal(errno, ENOENT);
	/* lutimes on the link itself */
	struct timespec ts[2] = { { 5, 0 }, { 7, 0 } };
	assert_int_equal(utimensat(AT_FDCWD, P("link"), ts, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(lstat(P("link"), &st), 0);
	assert_int_equal(st.st_mtim.tv_sec, 7);
}

static void test_hard_link_shares_data_and_inode(void **state)
{
	struct stat a, b;

	(void)state;
	write_file(P("one"), "shared");
	assert_int_equal(link(P("one"), P("two")), 0);
	assert_int_equal(stat(P("one"), &a), 0);
	assert_int_equal(stat(P("two"), &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(a.st_nlink, 2);
	write_file(P("two"), "changed");
	assert_content(P("one"), "changed");
	assert_int_equal(unlink(P("one")), 0);
	assert_int_equal(stat(P("two"), &b), 0);
	assert_int_equal(b.st_nlink, 1);
}

static void test_o_append_and_o_excl(void **state)
{
	int a, b;

	(void)state;
	a = open(P("log"), O_WRONLY | O_CREAT | O_APPEND, 0644);
	b = open(P("log"), O_WRONLY | O_APPEND);
	assert_true(a >= 0 && b >= 0);
	assert_int_equal(write(a, "1", 1), 1);
	assert_int_equal(write(b, "2", 1), 1);
	assert_int_equal(write(a, "3", 1), 1);
	close(a);
	close(b);
	assert_content(P("log"), "123");
	assert_int_equal(open(P("log"), O_WRONLY | O_CREAT | O_EXCL, 0644), -1);
	assert_int_equal(errno, EEXIST);
	a = open(P("fresh"), O_WRONLY | O_CREAT | O_EXCL, 0640);
	assert_true(a >= 0);
	close(a);
}

static void test_large_sparse_file(void **state)
{
	const off_t off = (off_t)5 << 30;	/* 5 GiB */
	char buf[8] = { 0 };
	struct stat st;
	int fd;

	(void)state;
	fd = open(P("big"), O_RDWR | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "tail", 4, off), 4);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, off + 4);
	close(fd);
	fd = open(P("big"), O_RDONLY);
	assert_int_equal(pread(fd, buf, 4, off), 4);
	assert_string_equal(buf, "tail");
	assert_int_equal(pread(fd, buf, 4, off - 4), 4);
	assert_memory_equal(buf, "\0\0\0\0", 4);
	close(fd);
	assert_int_equal(stat(P("big"), &st), 0);
	assert_int_equal(st.st_size, off + 4);
}

static void test_mmap_shared_read_and_write(void **state)
{
	char *map;
	int fd;

	(void)state;
	write_file(P("map"), "abcdefgh");
	fd = open(P("map"), O_RDWR);
	assert_true(fd >= 0);
	map = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	assert_memory_equal(map, "abcdefgh", 8);
	memcpy(map, "ABCD", 4);
	assert_int_equal(msync(map, 8, MS_SYNC), 0);
	munmap(map, 8);
	close(fd);
	assert_content(P("map"), "ABCDefgh");
}

/* Forks a process that tries @fn on the file and returns its exit status. */
static int in_child(const char *path, int (*fn)(int fd))
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		int fd = open(path, O_RDWR);

		_exit(fd < 0 ? 99 : fn(fd));
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 98;
}

static int try_fcntl_lock(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };

	if (fcntl(fd, F_SETLK, &fl) == 0)
		return 0;
	return errno == EAGAIN || errno == EACCES ? 1 : 2;
}

static int try_flock(int fd)
{
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	return errno == EWOULDBLOCK ? 1 : 2;
}

static void test_fcntl_and_flock_locks_exclude_others(void **state)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
	int fd;

	(void)state;
	write_file(P("lock"), "0123456789");
	fd = open(P("lock"), O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(in_child(P("lock"), try_fcntl_lock), 0);
	assert_int_equal(fcntl(fd, F_SETLK, &fl), 0);
	assert_int_equal(in_child(P("lock"), try_fcntl_lock), 1);
	fl.l_type = F_UNLCK;
	assert_int_equal(fcntl(fd, F_SETLK, &fl), 0);
	assert_int_equal(in_child(P("lock"), try_fcntl_lock), 0);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	assert_int_equal(in_child(P("lock"), try_flock), 1);
	assert_int_equal(flock(fd, LOCK_UN), 0);
	assert_int_equal(in_child(P("lock"), try_flock), 0);
	close(fd);
}

static void test_folders_mkdir_rmdir_rename(void **state)
{
	struct stat st;

	(void)state;
	assert_int_equal(mkdir(P("d"), 0750), 0);
	assert_int_equal(stat(P("d"), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0750);
	write_file(P("d/inside"), "in");
	assert_int_equal(rmdir(P("d")), -1);
	assert_int_equal(errno, ENOTEMPTY);
	assert_int_equal(rename(P("d"), P("e")), 0);
	assert_content(P("e/inside"), "in");
	assert_int_equal(mkdir(P("e"), 0755), -1);
	assert_int_equal(errno, EEXIST);
	assert_int_equal(unlink(P("e/inside")), 0);
	assert_int_equal(rmdir(P("e")), 0);
	assert_int_equal(stat(P("e"), &st), -1);
	assert_int_equal(errno, ENOENT);
}

static void test_fsync_and_fdatasync(void **state)
{
	int fd;

	(void)state;
	fd = open(P("sync"), O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "data", 4), 4);
	assert_int_equal(fsync(fd), 0);
	assert_int_equal(fdatasync(fd), 0);
	close(fd);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rename_replaces_existing_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_noreplace_and_exchange, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlink_of_open_file_keeps_data, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncate_shrinks_and_extends, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chmod_chown_utimens, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_is_shown_and_resolved_by_the_client,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_hard_link_shares_data_and_inode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_o_append_and_o_excl, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_sparse_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mmap_shared_read_and_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fcntl_and_flock_locks_exclude_others, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_folders_mkdir_rmdir_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsync_and_fdatasync, setup, teardown),
	};

	posix_base = argc > 1 ? argv[1] : getenv("MLFS_POSIX_DIR");
	if (!posix_base) {
		fprintf(stderr, "usage: posix_check FOLDER\n");
		return 2;
	}
	return cmocka_run_group_tests_name("posix", tests, NULL, NULL);
}
