/*
 * test_path_map.c - the growing path-keyed hash table (core/path_map.c):
 * entries found by their key after the buckets double many times, taken out,
 * a key that shares a bucket, clearing and use after it.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "path_map.h"

struct ent {
	struct path_map_entry link;
	int value;
	char path[];
};

static struct ent *ent_new(const char *path, int value)
{
	size_t len = strlen(path) + 1;
	struct ent *e = malloc(sizeof(*e) + len);

	assert_non_null(e);
	e->value = value;
	memcpy(e->path, path, len);
	return e;
}

static int value_of(struct path_map *m, const char *path)
{
	struct ent *e = (struct ent *)path_map_get(m, path);

	return e ? e->value : -1;
}

static void test_a_hundred_thousand_paths_are_found_as_it_grows(void **state)
{
	struct path_map m;
	char key[64];

	(void)state;
	path_map_init(&m, offsetof(struct ent, path));
	assert_int_equal(value_of(&m, "nothing/yet"), -1);	/* no buckets before the first add */
	for (int i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "d%03d/f%06d.jpg", i % 100, i);
		assert_true(path_map_add(&m, &ent_new(key, i)->link));
	}
	assert_int_equal(m.n, 100000);
	assert_true(m.n_buckets >= 100000);			/* grew: short chains */
	for (int i = 0; i < 100000; i += 7) {
		snprintf(key, sizeof(key), "d%03d/f%06d.jpg", i % 100, i);
		assert_int_equal(value_of(&m, key), i);
	}
	assert_int_equal(value_of(&m, "d000/f000001.jpg"), -1);	/* 1 is in d001 */
	path_map_clear(&m);
	assert_int_equal(m.n, 0);
	assert_int_equal(value_of(&m, "d001/f000001.jpg"), -1);
}

static void test_take_removes_only_its_key(void **state)
{
	struct path_map m;
	struct path_map_entry *e;

	(void)state;
	path_map_init(&m, offsetof(struct ent, path));
	path_map_add(&m, &ent_new("a", 1)->link);
	path_map_add(&m, &ent_new("a/b", 2)->link);
	path_map_add(&m, &ent_new("", 3)->link);		/* the root's key */
	e = path_map_take(&m, "a");
	assert_non_null(e);
	assert_int_equal(((struct ent *)e)->value, 1);
	free(e);
	assert_null(path_map_take(&m, "a"));
	assert_int_equal(value_of(&m, "a/b"), 2);
	assert_int_equal(value_of(&m, ""), 3);
	assert_int_equal(m.n, 2);
	path_map_clear(&m);
	path_map_add(&m, &ent_new("again", 4)->link);		/* usable after a clear */
	assert_int_equal(value_of(&m, "again"), 4);
	path_map_clear(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_hundred_thousand_paths_are_found_as_it_grows),
		cmocka_unit_test(test_take_removes_only_its_key),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
