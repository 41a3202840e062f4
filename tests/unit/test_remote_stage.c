/*
 * test_remote_stage.c - the writers list of the object-store backends
 * (backends/remote_stage.c): a file being written is stat'd and listed at
 * its staged size, an unlink of it stops its upload, a rename from or onto
 * it is EBUSY, and a listing that meets a writer closing meanwhile still
 * shows the file as the server listed it.
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

#include "remote_stage.h"

struct seen {
	char names[8][32];
	off_t sizes[8];
	int n;
};

static int seen_fill(void *payload, const char *name, const struct stat *st)
{
	struct seen *s = payload;

	assert_true(s->n < 8);
	snprintf(s->names[s->n], sizeof(s->names[s->n]), "%s", name);
	s->sizes[s->n++] = st ? st->st_size : -1;
	return 0;
}

/* A staging folder of its own, removed at the end (the stages are anonymous files). */
static int setup(void **state)
{
	char *dir = strdup("/tmp/mlfs-test-stage.XXXXXX");

	if (!dir || !mkdtemp(dir))
		return -1;
	*state = dir;
	return 0;
}

static int teardown(void **state)
{
	rmdir(*state);
	free(*state);
	return 0;
}

static void stage(struct remote_writers *w, struct remote_stage *s, const char *dir,
		  const char *path, const char *bytes)
{
	assert_int_equal(remote_stage_open(s, dir, path, true), 0);
	assert_int_equal(remote_stage_pwrite(s, bytes, strlen(bytes), 0), (ssize_t)strlen(bytes));
	remote_writers_add(w, s);
}

/* The writer's close: off the list, its stage closed. */
static void unstage(struct remote_writers *w, struct remote_stage *s)
{
	remote_writers_remove(w, s);
	remote_stage_close(s);
}

static void test_listing_shows_writers_of_the_folder(void **state)
{
	struct remote_writers w;
	struct remote_stage a, b, c;
	struct remote_dir_fill d;
	struct stat listed = { .st_mode = S_IFREG | 0644, .st_size = 1 };
	struct seen s = { 0 };
	size_t added;

	remote_writers_init(&w);
	stage(&w, &a, *state, "d/new", "12345");
	stage(&w, &b, *state, "d/sub/deeper", "x");
	stage(&w, &c, *state, "e/new", "xy");
	assert_int_equal(remote_dir_fill_begin(&d, &w, "d", seen_fill, &s), 0);
	/* the server lists an old version of d/new, and d/old */
	assert_int_equal(remote_dir_fill_listed(&d, "new", &listed), 0);
	assert_int_equal(remote_dir_fill_listed(&d, "old", &listed), 0);
	assert_int_equal(remote_dir_fill_end(&d, &w, "d", 0, &added), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.names[0], "old");
	assert_string_equal(s.names[1], "new");
	assert_int_equal(s.sizes[1], 5);	/* the staged size, not the listed one */
	assert_int_equal(added, 1);
	unstage(&w, &a);
	unstage(&w, &b);
	unstage(&w, &c);
	remote_writers_destroy(&w);
}

static void test_writer_closed_meanwhile_keeps_the_listed_entry(void **state)
{
	struct remote_writers w;
	struct remote_stage a, b;
	struct remote_dir_fill d;
	struct stat listed = { .st_mode = S_IFREG | 0644, .st_size = 7 };
	struct seen s = { 0 };
	size_t added;

	remote_writers_init(&w);
	stage(&w, &a, *state, "up", "uploaded");
	stage(&w, &b, *state, "never", "x");
	assert_int_equal(remote_dir_fill_begin(&d, &w, "", seen_fill, &s), 0);
	/* both close before the listing ends; only "up" reached the server */
	remote_writers_remove(&w, &a);
	remote_writers_remove(&w, &b);
	assert_int_equal(remote_dir_fill_listed(&d, "up", &listed), 0);
	assert_int_equal(remote_dir_fill_end(&d, &w, "", 0, &added), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.names[0], "up");
	assert_int_equal(s.sizes[0], 7);
	assert_int_equal(added, 0);
	remote_stage_close(&a);
	remote_stage_close(&b);
	remote_writers_destroy(&w);
}

static void test_unlink_stops_the_upload_and_rename_is_busy(void **state)
{
	struct remote_writers w;
	struct remote_stage a;
	struct stat st;
	unsigned int gen;

	remote_writers_init(&w);
	stage(&w, &a, *state, "d/f", "abc");
	assert_true(remote_writers_has(&w, "d/f"));
	assert_true(remote_writers_beneath(&w, "d"));
	assert_false(remote_writers_beneath(&w, "d/f"));
	assert_false(remote_writers_beneath(&w, "e"));
	assert_int_equal(remote_writers_stat(&w, "d/f", &st), 0);
	assert_int_equal(st.st_size, 3);
	assert_true(remote_stage_dirty(&a, &gen));
	assert_int_equal(remote_writers_rename_check(&w, "t", "d/f", "d/g"), -EBUSY);
	assert_int_equal(remote_writers_rename_check(&w, "t", "d/g", "d/f"), -EBUSY);
	assert_int_equal(remote_writers_rename_check(&w, "t", "d/g", "d/h"), 0);
	assert_int_equal(remote_writers_unlink(&w, "d/f"), 1);
	assert_int_equal(remote_writers_unlink(&w, "d/f"), 0);	/* once */
	assert_false(remote_writers_has(&w, "d/f"));
	assert_false(remote_writers_beneath(&w, "d"));
	assert_int_equal(remote_writers_stat(&w, "d/f", &st), -ENOENT);
	assert_false(remote_stage_dirty(&a, &gen));		/* never uploaded */
	/* its writer still writes and reads its stage */
	assert_int_equal(remote_stage_pwrite(&a, "defg", 4, 3), 4);
	assert_int_equal(remote_stage_fstat(&a, &st), 0);
	assert_int_equal(st.st_size, 7);
	assert_false(remote_stage_dirty(&a, &gen));
	assert_int_equal(remote_writers_rename_check(&w, "t", "d/f", "d/g"), 0);
	unstage(&w, &a);
	remote_writers_destroy(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_listing_shows_writers_of_the_folder, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_writer_closed_meanwhile_keeps_the_listed_entry,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlink_stops_the_upload_and_rename_is_busy,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
