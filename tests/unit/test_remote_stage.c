/*
 * test_remote_stage.c - the writers list of the object-store backends
 * (backends/remote_stage.c): a file being written is stat'd and listed at
 * its staged size, an unlink of it stops its upload, a rename from or onto
 * it is EBUSY, and a listing that meets a writer closing meanwhile still
 * shows the file as the server listed it; every open of one path shares
 * its stage (a load waited for, its failure shared), uploaded by one flush
 * at a time; a rename waits for a close on its way.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
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

/* A load that must not be called: the open truncates, or joins a loaded stage. */
static int no_load(void *arg, int fd)
{
	(void)arg;
	(void)fd;
	fail_msg("a stage was loaded where none should be");
	return -EIO;
}

/* A new file @path opened for writing (a create) holding @bytes. */
static struct remote_stage *stage(struct remote_writers *w, const char *dir, const char *path,
				  const char *bytes)
{
	struct remote_stage *s;

	assert_int_equal(remote_writers_open(w, dir, path, true, no_load, NULL, &s), 0);
	assert_non_null(s);
	assert_int_equal(remote_stage_pwrite(s, bytes, strlen(bytes), 0), (ssize_t)strlen(bytes));
	return s;
}

/* The writer's close. */
static void unstage(struct remote_writers *w, struct remote_stage *s)
{
	remote_writers_close(w, s, NULL, true);
}

static void test_listing_shows_writers_of_the_folder(void **state)
{
	struct remote_writers w;
	struct remote_stage *a, *b, *c;
	struct remote_dir_fill d;
	struct stat listed = { .st_mode = S_IFREG | 0644, .st_size = 1 };
	struct seen s = { 0 };
	size_t added;

	remote_writers_init(&w);
	a = stage(&w, *state, "d/new", "12345");
	b = stage(&w, *state, "d/sub/deeper", "x");
	c = stage(&w, *state, "e/new", "xy");
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
	unstage(&w, a);
	unstage(&w, b);
	unstage(&w, c);
	remote_writers_destroy(&w);
}

static void test_writer_closed_meanwhile_keeps_the_listed_entry(void **state)
{
	struct remote_writers w;
	struct remote_stage *a, *b;
	struct remote_dir_fill d;
	struct stat listed = { .st_mode = S_IFREG | 0644, .st_size = 7 };
	struct seen s = { 0 };
	size_t added;

	remote_writers_init(&w);
	a = stage(&w, *state, "up", "uploaded");
	b = stage(&w, *state, "never", "x");
	assert_int_equal(remote_dir_fill_begin(&d, &w, "", seen_fill, &s), 0);
	/* both close before the listing ends; only "up" reached the server */
	unstage(&w, a);
	unstage(&w, b);
	assert_int_equal(remote_dir_fill_listed(&d, "up", &listed), 0);
	assert_int_equal(remote_dir_fill_end(&d, &w, "", 0, &added), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.names[0], "up");
	assert_int_equal(s.sizes[0], 7);
	assert_int_equal(added, 0);
	remote_writers_destroy(&w);
}

static void test_unlink_stops_the_upload_and_rename_is_busy(void **state)
{
	struct remote_writers w;
	struct remote_stage *a, *b;
	struct stat st;

	remote_writers_init(&w);
	a = stage(&w, *state, "d/f", "abc");
	assert_true(remote_writers_has(&w, "d/f"));
	assert_true(remote_writers_beneath(&w, "d"));
	assert_false(remote_writers_beneath(&w, "d/f"));
	assert_false(remote_writers_beneath(&w, "e"));
	assert_int_equal(remote_writers_stat(&w, "d/f", &st), 0);
	assert_int_equal(st.st_size, 3);
	assert_true(remote_stage_dirty(a));
	assert_int_equal(remote_writers_rename_check(&w, "t", "d/f", "d/g"), -EBUSY);
	assert_int_equal(remote_writers_rename_check(&w, "t", "d/g", "d/f"), -EBUSY);
	assert_int_equal(remote_writers_rename_check(&w, "t", "d/g", "d/h"), 0);
	assert_int_equal(remote_writers_unlink(&w, "d/f"), 1);
	assert_int_equal(remote_writers_unlink(&w, "d/f"), 0);	/* once */
	assert_false(remote_writers_has(&w, "d/f"));
	assert_false(remote_writers_beneath(&w, "d"));
	assert_int_equal(remote_writers_stat(&w, "d/f", &st), -ENOENT);
	assert_false(remote_stage_dirty(a));		/* never uploaded */
	/* its writer still writes and reads its stage */
	assert_int_equal(remote_stage_pwrite(a, "defg", 4, 3), 4);
	assert_int_equal(remote_stage_fstat(a, &st), 0);
	assert_int_equal(st.st_size, 7);
	assert_false(remote_stage_dirty(a));
	assert_int_equal(remote_writers_rename_check(&w, "t", "d/f", "d/g"), 0);
	/* a new file of that name is a stage of its own */
	assert_null(remote_writers_find(&w, "d/f"));
	b = stage(&w, *state, "d/f", "new");
	assert_ptr_not_equal(a, b);
	assert_int_equal(remote_writers_stat(&w, "d/f", &st), 0);
	assert_int_equal(st.st_size, 3);
	unstage(&w, a);
	unstage(&w, b);
	remote_writers_destroy(&w);
}

static void test_opens_of_one_path_share_its_stage(void **state)
{
	struct remote_writers w;
	struct remote_stage *a, *b, *r, *other;
	char buf[16] = { 0 };
	struct stat st;

	remote_writers_init(&w);
	a = stage(&w, *state, "f", "abc");
	/* a second writer without O_TRUNC: the same stage, what the first wrote */
	assert_int_equal(remote_writers_open(&w, *state, "f", false, no_load, NULL, &b), 0);
	assert_ptr_equal(a, b);
	assert_int_equal(pread(b->fd, buf, sizeof(buf), 0), 3);
	assert_string_equal(buf, "abc");
	assert_int_equal(remote_stage_pwrite(b, "XY", 2, 4), 2);
	/* a reader reads the stage */
	r = remote_writers_find(&w, "f");
	assert_ptr_equal(r, a);
	assert_int_equal(remote_stage_fstat(r, &st), 0);
	assert_int_equal(st.st_size, 6);
	other = stage(&w, *state, "g", "g");
	assert_ptr_not_equal(other, a);
	/* the first close leaves it to the others */
	unstage(&w, a);
	assert_true(remote_writers_has(&w, "f"));
	assert_int_equal(remote_writers_stat(&w, "f", &st), 0);
	assert_int_equal(st.st_size, 6);
	/* a third with O_TRUNC empties it for all */
	assert_int_equal(remote_writers_open(&w, *state, "f", true, no_load, NULL, &a), 0);
	assert_ptr_equal(a, b);
	assert_int_equal(remote_stage_fstat(b, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(remote_stage_pwrite(a, "new", 3, 0), 3);
	unstage(&w, a);
	unstage(&w, b);
	/* the writers gone, the reader keeps its copy, which nothing else sees any more:
	 * stat asks the server, a rename is not held up, a new open makes a stage of its own */
	assert_false(remote_writers_has(&w, "f"));
	assert_int_equal(remote_writers_stat(&w, "f", &st), -ENOENT);
	assert_int_equal(remote_writers_rename_check(&w, "t", "f", "h"), 0);
	assert_null(remote_writers_find(&w, "f"));
	assert_int_equal(pread(r->fd, buf, sizeof(buf), 0), 3);
	assert_memory_equal(buf, "new", 3);
	a = stage(&w, *state, "f", "x");
	assert_ptr_not_equal(a, r);
	unstage(&w, a);
	remote_writers_close(&w, r, NULL, false);
	unstage(&w, other);
	remote_writers_destroy(&w);
}

/* A load that waits until the stage has @refs opens (the others wait for it), then fails
 * with @ret or writes "server". */
struct loader {
	struct remote_writers *w;
	unsigned int refs;
	int ret;
};

/* Waits (at most 2 s) until @w's first stage has @refs opens. */
static void wait_refs(struct remote_writers *w, unsigned int refs)
{
	for (int i = 0; i < 200; i++) {
		unsigned int n;

		pthread_mutex_lock(&w->lock);
		n = w->head ? w->head->refs : 0;
		pthread_mutex_unlock(&w->lock);
		if (n == refs)
			return;
		usleep(10000);
	}
	fail_msg("the stage never had %u opens", refs);
}

static int slow_load(void *arg, int fd)
{
	struct loader *l = arg;

	assert_false(remote_writers_has(l->w, "f"));	/* stat asks the server meanwhile */
	wait_refs(l->w, l->refs);
	if (l->ret < 0)
		return l->ret;
	return pwrite(fd, "server", 6, 0) == 6 ? 0 : -EIO;
}

struct opener {
	struct remote_writers *w;
	const char *dir;
	struct loader *l;
	struct remote_stage *s;
	int ret;
};

static void *open_in_thread(void *arg)
{
	struct opener *o = arg;

	o->ret = remote_writers_open(o->w, o->dir, "f", false, slow_load, o->l, &o->s);
	return NULL;
}

static void test_a_load_is_waited_for_and_its_failure_shared(void **state)
{
	struct remote_writers w;
	struct loader l = { .w = &w, .refs = 2 };
	struct opener o1 = { .w = &w, .dir = *state, .l = &l };
	struct opener o2 = o1;
	pthread_t t1, t2;
	struct stat st;

	remote_writers_init(&w);
	/* one open loads the server's bytes, the other waits for them */
	assert_int_equal(pthread_create(&t1, NULL, open_in_thread, &o1), 0);
	assert_int_equal(pthread_create(&t2, NULL, open_in_thread, &o2), 0);
	assert_int_equal(pthread_join(t1, NULL), 0);
	assert_int_equal(pthread_join(t2, NULL), 0);
	assert_int_equal(o1.ret, 0);
	assert_int_equal(o2.ret, 0);
	assert_ptr_equal(o1.s, o2.s);
	assert_int_equal(remote_writers_stat(&w, "f", &st), 0);
	assert_int_equal(st.st_size, 6);
	assert_false(remote_stage_dirty(o1.s));	/* loaded, not changed */
	unstage(&w, o1.s);
	unstage(&w, o2.s);
	/* a load that fails fails the open waiting for it too, and is not joined again */
	l.ret = -EIO;
	assert_int_equal(pthread_create(&t1, NULL, open_in_thread, &o1), 0);
	assert_int_equal(pthread_create(&t2, NULL, open_in_thread, &o2), 0);
	assert_int_equal(pthread_join(t1, NULL), 0);
	assert_int_equal(pthread_join(t2, NULL), 0);
	assert_int_equal(o1.ret, -EIO);
	assert_int_equal(o2.ret, -EIO);
	assert_null(o1.s);
	assert_null(o2.s);
	assert_null(w.head);
	l.ret = 0;
	l.refs = 1;
	assert_int_equal(remote_writers_open(&w, *state, "f", false, slow_load, &l, &o1.s), 0);
	unstage(&w, o1.s);
	remote_writers_destroy(&w);
}

struct closer {
	struct remote_writers *w;
	struct remote_stage *s;
};

static void *close_later(void *arg)
{
	struct closer *c = arg;

	usleep(50000);
	unstage(c->w, c->s);
	return NULL;
}

/* close(2) returns before the daemon hears of it: a rename right after waits for the close. */
static void test_rename_waits_for_a_close_on_its_way(void **state)
{
	struct remote_writers w;
	struct closer c = { .w = &w };
	pthread_t t;

	remote_writers_init(&w);
	c.s = stage(&w, *state, "d/f", "abc");
	assert_int_equal(pthread_create(&t, NULL, close_later, &c), 0);
	assert_int_equal(remote_writers_rename_check(&w, "t", "d/f", "d/g"), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	c.s = stage(&w, *state, "d/g", "abc");
	assert_int_equal(pthread_create(&t, NULL, close_later, &c), 0);
	assert_int_equal(remote_writers_rename_check(&w, "t", "d/h", "d/g"), 0);	/* onto */
	assert_int_equal(pthread_join(t, NULL), 0);
	remote_writers_destroy(&w);
}

struct uploads {
	atomic_int in_flight, most, calls, fail;
};

static int count_upload(void *arg, int fd, uint64_t size)
{
	struct uploads *u = arg;
	int now = atomic_fetch_add(&u->in_flight, 1) + 1;

	(void)fd;
	(void)size;
	if (now > atomic_load(&u->most))
		atomic_store(&u->most, now);
	usleep(20000);
	atomic_fetch_add(&u->calls, 1);
	atomic_fetch_sub(&u->in_flight, 1);
	return atomic_load(&u->fail);
}

struct flusher {
	struct remote_stage *s;
	struct uploads *u;
};

static void *flush_in_thread(void *arg)
{
	struct flusher *f = arg;

	for (int i = 0; i < 5; i++) {
		assert_int_equal(remote_stage_pwrite(f->s, "x", 1, i), 1);
		assert_int_equal(remote_stage_upload(f->s, "t", count_upload, f->u), 0);
	}
	return NULL;
}

static void test_one_upload_at_a_time_and_only_when_changed(void **state)
{
	struct remote_writers w;
	struct uploads u = { 0 };
	struct flusher f = { .u = &u };
	pthread_t t[3];

	remote_writers_init(&w);
	f.s = stage(&w, *state, "f", "abc");
	atomic_store(&u.fail, -EIO);
	assert_int_equal(remote_stage_upload(f.s, "t", count_upload, &u), -EIO);
	assert_true(remote_stage_dirty(f.s));	/* a failed upload leaves it to the next */
	atomic_store(&u.fail, 0);
	assert_int_equal(remote_stage_upload(f.s, "t", count_upload, &u), 0);
	assert_false(remote_stage_dirty(f.s));
	assert_int_equal(remote_stage_upload(f.s, "t", count_upload, &u), 0);
	assert_int_equal(atomic_load(&u.calls), 2);	/* nothing changed: no call */
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&t[i], NULL, flush_in_thread, &f), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(atomic_load(&u.most), 1);
	assert_false(remote_stage_dirty(f.s));
	unstage(&w, f.s);
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
		cmocka_unit_test_setup_teardown(test_opens_of_one_path_share_its_stage, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_load_is_waited_for_and_its_failure_shared,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_upload_at_a_time_and_only_when_changed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_waits_for_a_close_on_its_way, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
