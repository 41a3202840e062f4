/*
 * test_spawn.c - running a program to its end (core/spawn.c): its exit
 * status, its output captured and cut at out_max, its stdin, its stderr
 * line by line, the deadline that kills its whole process group, a
 * program that is not there, its environment, and what the child starts
 * with (its own group, default signals, no descriptor of ours).
 *
 * The children are the system's own programs (sh, cat, env, head).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "spawn.h"

#define ARGV(...) ((char *const[]){ __VA_ARGS__, NULL })

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs @argv with output captured up to 1 MiB; asserts it ran. */
static struct spawn_out run_ok(char *const *argv)
{
	struct spawn sp = { .argv = argv, .out_max = 1 << 20, .out_fd = -1 };
	struct spawn_out res;

	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_non_null(res.out);
	assert_non_null(res.err);
	return res;
}

/* Whether process @pid is gone (or a zombie nobody reaped yet), waiting up to 2 s. */
static bool gone(pid_t pid)
{
	long long until = now_ms() + 2000;
	char path[64], stat[512];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	do {
		FILE *f = fopen(path, "re");
		char *close_paren;

		if (!f)
			return true;
		stat[0] = '\0';
		if (!fgets(stat, sizeof(stat), f))
			stat[0] = '\0';
		fclose(f);
		close_paren = strrchr(stat, ')');
		if (close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z')
			return true;
		usleep(10000);
	} while (now_ms() < until);
	return false;
}

static void test_spawn_exit_status_is_the_wait_status(void **state)
{
	struct spawn_out res;

	(void)state;
	res = run_ok(ARGV("sh", "-c", "exit 3"));
	assert_true(WIFEXITED(res.status));
	assert_int_equal(WEXITSTATUS(res.status), 3);
	assert_false(res.timed_out);
	spawn_out_free(&res);

	res = run_ok(ARGV("/bin/sh", "-c", "kill -TERM $$"));
	assert_true(WIFSIGNALED(res.status));
	assert_int_equal(WTERMSIG(res.status), SIGTERM);
	spawn_out_free(&res);
}

static void test_spawn_stdout_is_captured_and_cut_at_out_max(void **state)
{
	struct spawn sp = { .argv = ARGV("printf", "hello"), .out_max = 3, .out_fd = -1 };
	struct spawn_out res;

	(void)state;
	res = run_ok(ARGV("printf", "hello"));
	assert_string_equal(res.out, "hello");
	assert_int_equal(res.out_len, 5);
	assert_string_equal(res.err, "");
	spawn_out_free(&res);

	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_string_equal(res.out, "hel");
	assert_int_equal(res.out_len, 3);
	spawn_out_free(&res);

	/* 4 MB, far past a pipe's size: the rest is read and dropped, so the child ends */
	sp.argv = ARGV("head", "-c", "4000000", "/dev/zero");
	sp.out_max = 100;
	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_true(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
	assert_int_equal(res.out_len, 100);
	spawn_out_free(&res);

	sp.argv = ARGV("printf", "x");
	sp.out_max = 0;
	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_string_equal(res.out, "");
	spawn_out_free(&res);
}

static void test_spawn_stdin_gets_all_of_in(void **state)
{
	size_t len = 300000;	/* more than a pipe holds: written while the output is read */
	char *in = malloc(len);
	struct spawn sp = { .argv = ARGV("cat"), .out_max = len, .out_fd = -1 };
	struct spawn_out res;

	(void)state;
	assert_non_null(in);
	for (size_t i = 0; i < len; i++)
		in[i] = (char)('a' + i % 26);
	sp.in = in;
	sp.in_len = len;
	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_int_equal(res.out_len, len);
	assert_memory_equal(res.out, in, len);
	spawn_out_free(&res);

	/* without in, stdin is /dev/null */
	sp.in = NULL;
	sp.in_len = 0;
	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_int_equal(res.out_len, 0);
	spawn_out_free(&res);
	free(in);
}

static void test_spawn_stdin_the_child_never_reads_is_no_sigpipe(void **state)
{
	size_t len = 1 << 20;
	char *in = calloc(1, len);
	struct spawn sp = { .argv = ARGV("true"), .in = in, .in_len = len, .out_fd = -1 };
	struct spawn_out res;
	sigset_t pending;

	(void)state;
	assert_non_null(in);
	/* SIGPIPE is at its default here: had it reached this process, the test would have died */
	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_true(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
	sigpending(&pending);
	assert_false(sigismember(&pending, SIGPIPE));
	spawn_out_free(&res);
	free(in);
}

struct lines {
	char *line[8];
	size_t n;
};

static void on_line(void *arg, const char *line)
{
	struct lines *l = arg;

	if (l->n < 8)
		l->line[l->n++] = strdup(line);
}

static void test_spawn_stderr_lines_are_passed_as_they_come(void **state)
{
	struct lines l = { .n = 0 };
	struct spawn sp = {
		.argv = ARGV("sh", "-c", "echo out; echo one >&2; echo >&2; printf 'two\\nthree' >&2"),
		.out_max = 1024, .out_fd = -1, .on_err_line = on_line, .arg = &l,
	};
	struct spawn_out res;

	(void)state;
	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_int_equal(l.n, 4);
	assert_string_equal(l.line[0], "one");
	assert_string_equal(l.line[1], "");
	assert_string_equal(l.line[2], "two");
	assert_string_equal(l.line[3], "three");	/* the unfinished last line, at the end */
	assert_string_equal(res.err, "one\n\ntwo\nthree");
	assert_string_equal(res.out, "out\n");
	for (size_t i = 0; i < l.n; i++)
		free(l.line[i]);
	spawn_out_free(&res);
}

static void test_spawn_stderr_line_longer_than_the_buffer_is_cut(void **state)
{
	struct lines l = { .n = 0 };
	struct spawn sp = {
		.argv = ARGV("sh", "-c", "head -c 10000 /dev/zero | tr '\\0' x >&2; echo >&2; echo end >&2"),
		.out_max = 0, .out_fd = -1, .on_err_line = on_line, .arg = &l,
	};
	struct spawn_out res;

	(void)state;
	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_int_equal(l.n, 2);
	assert_int_equal(strlen(l.line[0]), SPAWN_LINE_MAX - 1);
	assert_string_equal(l.line[1], "end");
	assert_int_equal(res.err_len, 0);	/* out_max 0 keeps none of stderr either */
	for (size_t i = 0; i < l.n; i++)
		free(l.line[i]);
	spawn_out_free(&res);
}

static void test_spawn_deadline_kills_the_child_and_its_grandchild(void **state)
{
	/* the grandchild's pid goes out first, then both sleep */
	struct spawn sp = { .argv = ARGV("sh", "-c", "sleep 100 & echo $!; sleep 100"),
			    .timeout_ms = 300, .out_max = 64, .out_fd = -1 };
	struct spawn_out res;
	long long t0 = now_ms();
	pid_t grandchild;

	(void)state;
	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_true(now_ms() - t0 < 5000);
	assert_true(res.timed_out);
	assert_true(WIFSIGNALED(res.status));
	assert_int_equal(WTERMSIG(res.status), SIGKILL);
	grandchild = (pid_t)atoi(res.out);
	assert_true(grandchild > 1);
	assert_true(gone(grandchild));
	spawn_out_free(&res);

	sp.argv = ARGV("sleep", "100");
	t0 = now_ms();
	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_true(res.timed_out);
	assert_true(now_ms() - t0 < 5000);
	spawn_out_free(&res);
}

static void test_spawn_ends_with_the_child_not_with_what_holds_its_output(void **state)
{
	struct spawn_out res;
	long long t0 = now_ms();
	pid_t left;

	(void)state;
	/* the background sleep keeps stdout open for 30 s; the run ends with sh */
	res = run_ok(ARGV("sh", "-c", "sleep 30 & echo $!"));
	assert_true(now_ms() - t0 < 10000);
	assert_true(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
	assert_false(res.timed_out);
	left = (pid_t)atoi(res.out);
	assert_true(left > 1);
	kill(left, SIGKILL);
	spawn_out_free(&res);
}

static void test_spawn_missing_program_is_enoent(void **state)
{
	struct spawn sp = { .argv = ARGV("/nonexistent/mlfs-no-such-program"), .out_fd = -1 };
	struct spawn_out res;

	(void)state;
	assert_int_equal(spawn_run(&sp, &res), -ENOENT);
	assert_int_equal(res.status, -1);
	spawn_out_free(&res);

	sp.argv = ARGV("mlfs-no-such-program-on-path");
	assert_int_equal(spawn_run(&sp, &res), -ENOENT);
	assert_int_equal(res.status, -1);
	assert_null(res.out);
	spawn_out_free(&res);
}

static void test_spawn_envp_is_the_whole_environment(void **state)
{
	struct spawn sp = { .argv = ARGV("env"), .envp = ARGV("FOO=bar", "B=2"), .out_max = 4096,
			    .out_fd = -1 };
	struct spawn_out res;

	(void)state;
	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_string_equal(res.out, "FOO=bar\nB=2\n");
	spawn_out_free(&res);

	/* NULL: this process's own */
	setenv("MLFS_TEST_SPAWN", "inherited", 1);
	res = run_ok(ARGV("env"));
	assert_non_null(strstr(res.out, "MLFS_TEST_SPAWN=inherited\n"));
	spawn_out_free(&res);
}

static void test_spawn_out_fd_takes_stdout_and_stderr(void **state)
{
	char path[] = "/tmp/test_spawn.XXXXXX", buf[64];
	int fd = mkstemp(path);
	struct spawn sp = { .argv = ARGV("sh", "-c", "echo a; echo b >&2"), .out_fd = fd };
	struct spawn_out res;
	ssize_t n;

	(void)state;
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(spawn_run(&sp, &res), 0);
	assert_null(res.out);
	assert_null(res.err);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	assert_true(n >= 0);
	buf[n] = '\0';
	assert_string_equal(buf, "a\nb\n");
	close(fd);
	spawn_out_free(&res);
}

/* The value of @key in /proc/PID/status text @text, or "". */
static void status_field(const char *text, const char *key, char *buf, size_t len)
{
	const char *at = strstr(text, key);

	buf[0] = '\0';
	if (at)
		snprintf(buf, len, "%.*s", (int)strcspn(at + strlen(key), "\n"), at + strlen(key));
}

static void test_spawn_child_has_its_own_group_default_signals_and_no_fds_of_ours(void **state)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_int, old_usr1;
	sigset_t block, old_mask;
	char pid[32], pgid[32], ign_mask[32], blk_mask[32];
	struct spawn_out res;
	int leak;

	(void)state;
	/* what a daemon has: ignored signals, a blocked one, a descriptor without O_CLOEXEC */
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGUSR1, &ign, &old_usr1);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old_mask);
	leak = dup2(STDERR_FILENO, 57);
	assert_int_equal(leak, 57);

	res = run_ok(ARGV("cat", "/proc/self/status"));
	status_field(res.out, "\nPid:\t", pid, sizeof(pid));
	status_field(res.out, "\nNSpgid:\t", pgid, sizeof(pgid));
	status_field(res.out, "\nSigIgn:\t", ign_mask, sizeof(ign_mask));
	status_field(res.out, "\nSigBlk:\t", blk_mask, sizeof(blk_mask));
	assert_true(pid[0]);
	assert_string_equal(pgid, pid);
	assert_string_equal(ign_mask, "0000000000000000");
	assert_string_equal(blk_mask, "0000000000000000");
	spawn_out_free(&res);

	res = run_ok(ARGV("ls", "/proc/self/fd"));
	assert_null(strstr(res.out, "57\n"));
	spawn_out_free(&res);

	close(leak);
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGUSR1, &old_usr1, NULL);
}

static void *spawn_many(void *arg)
{
	long ok = 0;

	(void)arg;
	for (int i = 0; i < 20; i++) {
		struct spawn sp = { .argv = ARGV("sh", "-c", "echo $$"), .out_max = 64, .out_fd = -1 };
		struct spawn_out res;

		if (spawn_run(&sp, &res) == 0 && WIFEXITED(res.status) && atoi(res.out) > 1)
			ok++;
		spawn_out_free(&res);
	}
	return (void *)ok;
}

static void test_spawn_from_several_threads_at_once(void **state)
{
	pthread_t t[4];

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, spawn_many, NULL), 0);
	for (int i = 0; i < 4; i++) {
		void *ok;

		assert_int_equal(pthread_join(t[i], &ok), 0);
		assert_int_equal((long)ok, 20);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spawn_exit_status_is_the_wait_status),
		cmocka_unit_test(test_spawn_stdout_is_captured_and_cut_at_out_max),
		cmocka_unit_test(test_spawn_stdin_gets_all_of_in),
		cmocka_unit_test(test_spawn_stdin_the_child_never_reads_is_no_sigpipe),
		cmocka_unit_test(test_spawn_stderr_lines_are_passed_as_they_come),
		cmocka_unit_test(test_spawn_stderr_line_longer_than_the_buffer_is_cut),
		cmocka_unit_test(test_spawn_deadline_kills_the_child_and_its_grandchild),
		cmocka_unit_test(test_spawn_ends_with_the_child_not_with_what_holds_its_output),
		cmocka_unit_test(test_spawn_missing_program_is_enoent),
		cmocka_unit_test(test_spawn_envp_is_the_whole_environment),
		cmocka_unit_test(test_spawn_out_fd_takes_stdout_and_stderr),
		cmocka_unit_test(test_spawn_child_has_its_own_group_default_signals_and_no_fds_of_ours),
		cmocka_unit_test(test_spawn_from_several_threads_at_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
