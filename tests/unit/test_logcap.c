/* test_logcap.c - a worker's logs within log_size (sched/logcap.c). */
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
#include <unistd.h>
#include <cmocka.h>

#include "logcap.h"

struct fx {
	char dir[64];
	char log[128], old[128], job[128];
};

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/mlfs-logcap.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->log, sizeof(fx->log), "%s/log", fx->dir);
	snprintf(fx->old, sizeof(fx->old), "%s/log.1", fx->dir);
	snprintf(fx->job, sizeof(fx->job), "%s/job", fx->dir);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	unlink(fx->log);
	unlink(fx->old);
	unlink(fx->job);
	rmdir(fx->dir);
	free(fx);
	return 0;
}

/* The whole of @path, NUL-terminated ("" when missing); free it. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text = calloc(1, 1 << 20);
	size_t n = f ? fread(text, 1, (1 << 20) - 1, f) : 0;

	text[n] = '\0';
	if (f)
		fclose(f);
	return text;
}

static struct logcap *start(struct fx *fx, unsigned int worker, uint64_t max)
{
	static struct logcap lc;

	logcap_init(&lc, logcap_open(fx->log), fx->log, logcap_open(fx->job), worker, max);
	return &lc;
}

static void test_logcap_no_limit_copies_and_prefixes(void **state)
{
	struct fx *fx = *state;
	struct logcap *lc = start(fx, 3, 0);
	char *log, *job;

	logcap_write(lc, "one\ntw", 6);
	logcap_write(lc, "o\nthree", 7);
	logcap_end(lc);
	log = slurp(fx->log);
	job = slurp(fx->job);
	assert_string_equal(log, "one\ntwo\nthree");
	assert_string_equal(job, "[3] one\n[3] two\n[3] three\n");	/* the last line ended */
	assert_int_equal(access(fx->old, F_OK), -1);
	free(log);
	free(job);
}

static void test_logcap_rotates_the_worker_log_and_caps_the_job_log(void **state)
{
	struct fx *fx = *state;
	struct logcap *lc = start(fx, 1, 200);
	char line[16], *log, *old, *job, *nl;
	char all[4096] = "";

	for (int i = 0; i < 60; i++) {		/* 60 lines of 9 bytes: 540 bytes */
		snprintf(line, sizeof(line), "line %03d\n", i);
		strcat(all, line);
		logcap_write(lc, line, strlen(line));
	}
	logcap_end(lc);
	log = slurp(fx->log);
	old = slurp(fx->old);
	job = slurp(fx->job);
	/* the new log starts with the note, and holds at most 200 bytes */
	static const char note[] = "mlfs: this log reached log_size (200 bytes): the output "
				   "before this line is in log.1\n";

	assert_true(strncmp(log, note, sizeof(note) - 1) == 0);
	assert_true(strlen(log) <= 200);
	assert_int_equal(strlen(old), 200);
	/* log.1 then log (each less a note) are the output's end, nothing lost between */
	{
		char both[4096];
		const char *o = strncmp(old, "mlfs: ", 6) == 0 ? strchr(old, '\n') + 1 : old;

		nl = strchr(log, '\n');
		snprintf(both, sizeof(both), "%s%s", o, nl + 1);
		assert_true(strlen(both) > 200);
		assert_string_equal(all + strlen(all) - strlen(both), both);
	}
	/* the job log: whole prefixed lines up to 200 bytes, then the note */
	assert_true(strncmp(job, "[1] line 000\n[1] line 001\n", 26) == 0);
	assert_non_null(strstr(job, "[1] mlfs: worker 1 wrote log_size (200 bytes) into this log: "
				    "the rest of its output is only in workers/1/log\n"));
	assert_true(strlen(job) <= 200 + 120);
	free(log);
	free(old);
	free(job);
}

static void test_logcap_counts_from_an_earlier_attempt(void **state)
{
	struct fx *fx = *state;
	struct logcap *lc;
	char *old;
	int fd = logcap_open(fx->log);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "attempt 1 filled 190 bytes...", 29), 29);
	assert_int_equal(ftruncate(fd, 190), 0);
	close(fd);
	lc = start(fx, 1, 200);
	logcap_write(lc, "0123456789abcdef\n", 17);	/* 190 + 17 > 200: rotated at 200 */
	logcap_end(lc);
	old = slurp(fx->old);
	assert_int_equal(access(fx->old, F_OK), 0);
	free(old);
}

static void test_logcap_never_follows_a_link(void **state)
{
	struct fx *fx = *state;

	assert_int_equal(symlink("/etc/passwd", fx->log), 0);
	assert_int_equal(logcap_open(fx->log), -ELOOP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_logcap_no_limit_copies_and_prefixes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_logcap_rotates_the_worker_log_and_caps_the_job_log,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_logcap_counts_from_an_earlier_attempt, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_logcap_never_follows_a_link, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
