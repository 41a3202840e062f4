/*
 * test_stat_memo.c - the attributes an NFS or SMB backend remembers for
 * trusted opens (backends/stat_memo.c): keys as paths, listings' children,
 * forgetting everything on a change, the bound, many threads at once.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "stat_memo.h"

static struct stat file_of(off_t size)
{
	struct stat st = { .st_mode = S_IFREG | 0644, .st_size = size };

	st.st_mtim.tv_sec = 1700000000;
	st.st_mtim.tv_nsec = 123456789;
	return st;
}

static void test_a_path_and_a_listed_child_are_one_key(void **state)
{
	struct stat_memo *m = stat_memo_new(16);
	struct stat a = file_of(5), b = file_of(7), got;

	(void)state;
	assert_non_null(m);
	assert_false(stat_memo_get(m, "d/f", &got));
	stat_memo_put(m, "/d/f", &a);			/* a leading '/' is ignored */
	assert_true(stat_memo_get(m, "d/f", &got));
	assert_int_equal(got.st_size, 5);
	assert_int_equal(got.st_mtim.tv_nsec, 123456789);
	stat_memo_put_child(m, "d/", "f", &b);		/* a listing of d says f again: it wins */
	assert_true(stat_memo_get(m, "/d/f", &got));
	assert_int_equal(got.st_size, 7);
	stat_memo_put_child(m, "", "top", &a);		/* the root's entries */
	assert_true(stat_memo_get(m, "top", &got));
	assert_int_equal(stat_memo_count(m), 2);
	assert_false(stat_memo_get(m, "d", &got));	/* never seen */
	stat_memo_free(m);
}

static void test_a_change_forgets_everything(void **state)
{
	struct stat_memo *m = stat_memo_new(16);
	struct stat a = file_of(5), got;

	(void)state;
	stat_memo_put(m, "x", &a);
	stat_memo_put(m, "y", &a);
	stat_memo_forget_all(m);
	assert_false(stat_memo_get(m, "x", &got));
	assert_int_equal(stat_memo_count(m), 0);
	stat_memo_put(m, "x", &a);			/* and fills again */
	assert_true(stat_memo_get(m, "x", &got));
	stat_memo_free(m);
	stat_memo_forget_all(NULL);			/* a backend without one: nothing known */
	stat_memo_put(NULL, "x", &a);
	assert_false(stat_memo_get(NULL, "x", &got));
}

static void test_past_its_bound_it_empties_and_fills_again(void **state)
{
	struct stat_memo *m = stat_memo_new(3);
	struct stat a = file_of(1), got;

	(void)state;
	stat_memo_put(m, "a", &a);
	stat_memo_put(m, "b", &a);
	stat_memo_put(m, "c", &a);
	stat_memo_put(m, "a", &a);			/* known: no new entry */
	assert_int_equal(stat_memo_count(m), 3);
	stat_memo_put(m, "d", &a);			/* the fourth: emptied, then d */
	assert_int_equal(stat_memo_count(m), 1);
	assert_true(stat_memo_get(m, "d", &got));
	assert_false(stat_memo_get(m, "a", &got));
	stat_memo_free(m);
}

static void test_a_path_too_long_is_never_remembered(void **state)
{
	struct stat_memo *m = stat_memo_new(3);
	struct stat a = file_of(1), got;
	char name[5000];

	(void)state;
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	stat_memo_put(m, name, &a);
	stat_memo_put_child(m, "d", name, &a);
	assert_int_equal(stat_memo_count(m), 0);
	assert_false(stat_memo_get(m, name, &got));
	stat_memo_free(m);
}

static void *hammer(void *arg)
{
	struct stat_memo *m = arg;
	struct stat a = file_of(9), got;
	char path[32];

	for (int i = 0; i < 20000; i++) {
		snprintf(path, sizeof(path), "f%d", i % 500);
		stat_memo_put(m, path, &a);
		if (stat_memo_get(m, path, &got) && got.st_size != 9)
			return (void *)1;
		if (i % 5000 == 0)
			stat_memo_forget_all(m);
	}
	return NULL;
}

static void test_many_threads_at_once(void **state)
{
	struct stat_memo *m = stat_memo_new(400);
	pthread_t t[4];
	void *ret;

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer, m), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(t[i], &ret), 0);
		assert_null(ret);
	}
	assert_true(stat_memo_count(m) <= 400);
	stat_memo_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_path_and_a_listed_child_are_one_key),
		cmocka_unit_test(test_a_change_forgets_everything),
		cmocka_unit_test(test_past_its_bound_it_empties_and_fills_again),
		cmocka_unit_test(test_a_path_too_long_is_never_remembered),
		cmocka_unit_test(test_many_threads_at_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
