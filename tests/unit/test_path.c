/* test_path.c - canonical backend paths (core/path.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "path.h"

static void assert_canon(const char *in, const char *want)
{
	char *out = NULL;

	assert_int_equal(path_canon(&out, in), 0);
	assert_string_equal(out, want);
	free(out);
}

static void test_path_canon_strips_slashes_and_dots(void **state)
{
	(void)state;
	assert_canon("/", "");
	assert_canon("", "");
	assert_canon("/voc2012/", "voc2012");
	assert_canon("a//b/./c/", "a/b/c");
	assert_canon("./a", "a");
	assert_canon("a/.hidden/..x/x..", "a/.hidden/..x/x..");
}

static void test_path_canon_refuses_dotdot(void **state)
{
	char *out = NULL;

	(void)state;
	assert_int_equal(path_canon(&out, ".."), -EINVAL);
	assert_int_equal(path_canon(&out, "/a/../b"), -EINVAL);
	assert_int_equal(path_canon(&out, "a/.."), -EINVAL);
	assert_null(out);
}

/* The one test of a ".." component that backends use on paths they are given. */
static void test_path_has_dotdot(void **state)
{
	(void)state;
	assert_true(path_has_dotdot(".."));
	assert_true(path_has_dotdot("../a"));
	assert_true(path_has_dotdot("a/.."));
	assert_true(path_has_dotdot("/a/../b/"));
	assert_true(path_has_dotdot("a//../b"));
	assert_false(path_has_dotdot(""));
	assert_false(path_has_dotdot("a/b"));
	assert_false(path_has_dotdot("..x/x../.../."));
	assert_false(path_has_dotdot("/a/.hidden/"));
}

static void test_path_canon_refuses_overlong_component(void **state)
{
	char name[300];
	char *out = NULL;

	(void)state;
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	assert_int_equal(path_canon(&out, name), -ENAMETOOLONG);
}

static void test_path_check_name(void **state)
{
	char name[300];

	(void)state;
	assert_int_equal(path_check_name("file.txt"), 0);
	assert_int_equal(path_check_name("with space"), 0);
	assert_int_equal(path_check_name("..."), 0);
	assert_int_equal(path_check_name(""), -EINVAL);
	assert_int_equal(path_check_name("."), -EINVAL);
	assert_int_equal(path_check_name(".."), -EINVAL);
	assert_int_equal(path_check_name("a/b"), -EINVAL);
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	assert_int_equal(path_check_name(name), -ENAMETOOLONG);
}

static void test_path_join_at_root_and_below(void **state)
{
	char *out;

	(void)state;
	assert_int_equal(path_join(&out, "", "a"), 0);
	assert_string_equal(out, "a");
	free(out);
	assert_int_equal(path_join(&out, "a/b", "c"), 0);
	assert_string_equal(out, "a/b/c");
	free(out);
	assert_int_equal(path_join(&out, "a", ""), 0);
	assert_string_equal(out, "a");
	free(out);
}

static void test_path_shown_name_turns_spaces_into_underscores(void **state)
{
	char *out;

	(void)state;
	assert_int_equal(path_shown_name(&out, "PASCAL VOC 2012"), 0);
	assert_string_equal(out, "PASCAL_VOC_2012");
	free(out);
}

static void test_path_key_prefix_of_a_root(void **state)
{
	const char *in[] = { NULL, "", "/", "//", "/a/b", "a/b/", "/a//b", NULL };
	const char *want[] = { "", "", "", "", "a/b/", "a/b/", "a//b/" };
	char *got;

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		got = path_key_prefix(in[i]);
		assert_string_equal(got, want[i]);
		free(got);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_canon_strips_slashes_and_dots),
		cmocka_unit_test(test_path_canon_refuses_dotdot),
		cmocka_unit_test(test_path_has_dotdot),
		cmocka_unit_test(test_path_canon_refuses_overlong_component),
		cmocka_unit_test(test_path_check_name),
		cmocka_unit_test(test_path_join_at_root_and_below),
		cmocka_unit_test(test_path_shown_name_turns_spaces_into_underscores),
		cmocka_unit_test(test_path_key_prefix_of_a_root),
	};

	return cmocka_run_group_tests_name("path", tests, NULL, NULL);
}
