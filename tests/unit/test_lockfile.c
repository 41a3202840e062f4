/*
 * test_lockfile.c - asking whether a lock file is held (core/lockfile.c):
 * held while another process has it locked, free once that process ends or
 * lets go, never by the asking itself; lockfile_wait returns when the
 * holder ends, or -ETIMEDOUT while it goes on.
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
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "lockfile.h"

static char path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/mlfs-lockfile-%d", (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

/* A child that locks @path and holds it for @ms (forever when < 0); its PID once it holds it. */
static pid_t hold(int ms)
{
	int ready[2];
	char c;
	pid_t pid;

	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(path, O_RDWR | O_CLOEXEC);

		if (fd < 0 || flock(fd, LOCK_EX) < 0 || write(ready[1], "x", 1) != 1)
			_exit(1);
		if (ms < 0)
			pause();
		usleep((useconds_t)ms * 1000);
		_exit(0);
	}
	close(ready[1]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	return pid;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_free_file_and_no_file(void **state)
{
	(void)state;
	assert_false(lockfile_held(path));
	assert_false(lockfile_held(path));	/* the asking took nothing */
	assert_false(lockfile_held("/nonexistent/mlfs.lock"));
	assert_int_equal(lockfile_wait("/nonexistent/mlfs.lock", 1), 0);
}

static void test_held_until_its_holder_ends(void **state)
{
	pid_t pid = hold(-1);
	int status;

	(void)state;
	assert_true(lockfile_held(path));
	assert_true(lockfile_held(path));
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_false(lockfile_held(path));
}

static void test_wait_returns_when_the_holder_ends(void **state)
{
	pid_t pid = hold(400);
	double t0 = now();
	int status;

	(void)state;
	assert_int_equal(lockfile_wait(path, 5), 0);
	assert_true(now() - t0 >= 0.35);	/* it waited for the holder ... */
	assert_true(now() - t0 < 3);		/* ... and not for the whole 5 s */
	waitpid(pid, &status, 0);
}

static void test_wait_times_out(void **state)
{
	pid_t pid = hold(-1);
	int status;

	(void)state;
	assert_int_equal(lockfile_wait(path, 1), -ETIMEDOUT);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_free_file_and_no_file),
		cmocka_unit_test(test_held_until_its_holder_ends),
		cmocka_unit_test(test_wait_returns_when_the_holder_ends),
		cmocka_unit_test(test_wait_times_out),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
