/*
 * test_cache_defer.c - small objects written behind (core/cache_defer.c):
 * served from memory from their first read, fetched once however many
 * opens ask at once, on disk after cache_drain or cache_destroy, and
 * nothing kept of a failed fetch.  The remote is a counting fake whose
 * bytes are a function of the offset; "on disk" is proven by reading
 * through a new struct cache with the remote failing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cache.h"

#define KiB	1024u

struct remote {
	uint64_t size;
	unsigned int salt;
	atomic_int calls;		/* fetches that returned bytes */
	atomic_int fail;		/* errno to fail with, 0 for none */
	int slow_ms;
};

static char top[64];

static unsigned char byte_at(const struct remote *r, uint64_t off)
{
	return (unsigned char)((off * 131 + r->salt * 7 + (off >> 9)) & 0xff);
}

static ssize_t remote_fetch(void *arg, void *buf, size_t len, off_t off)
{
	struct remote *r = arg;
	unsigned char *p = buf;
	int err = atomic_load(&r->fail);

	if (err)
		return -err;
	if (r->slow_ms)
		usleep((useconds_t)r->slow_ms * 1000);
	if ((uint64_t)off >= r->size)
		return 0;
	len = len < r->size - (uint64_t)off ? len : (size_t)(r->size - (uint64_t)off);
	for (size_t i = 0; i < len; i++)
		p[i] = byte_at(r, (uint64_t)off + i);
	atomic_fetch_add(&r->calls, 1);
	return (ssize_t)len;
}

/* Reads all of @f in 64 KiB reads: 0 when every byte is the remote's. */
static int differs(struct cache_file *f, const struct remote *r)
{
	static __thread unsigned char buf[64 * KiB];

	for (uint64_t off = 0; off < r->size; off += sizeof(buf)) {
		ssize_t n = cache_file_read(f, buf, sizeof(buf), (off_t)off);
		uint64_t want = r->size - off < sizeof(buf) ? r->size - off : sizeof(buf);

		if (n != (ssize_t)want)
			return 1;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != byte_at(r, off + (uint64_t)i))
				return 1;
	}
	return 0;
}

static uint64_t held(struct cache *c)
{
	struct cache_info info;

	cache_get_info(c, &info);
	return info.write_behind_bytes;
}

static int make_top(void **state)
{
	(void)state;
	snprintf(top, sizeof(top), "/tmp/mlfs-test-defer.XXXXXX");
	return mkdtemp(top) ? 0 : -1;
}

static int remove_top(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_defer_served_from_memory_then_on_disk(void **state)
{
	struct remote r = { .size = 100 * KiB + 3, .salt = 1 };
	struct cache_stats st = { 0 };
	struct cache_file *f, *g;
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, top, 64u << 20), 0);
	assert_int_equal(cache_file_open(c, &f, "k\nsmall\n1", r.size, &st, remote_fetch, &r), 0);
	assert_int_equal(differs(f, &r), 0);
	assert_int_equal(atomic_load(&r.calls), 1);		/* whole, in one fetch */
	assert_int_equal(held(c), r.size);
	assert_int_equal(cache_file_fd(f), -1);			/* not in the files yet */
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.bytes_fetched, r.size);
	cache_file_close(f);

	atomic_store(&r.fail, EIO);		/* from memory or from disk: never the remote */
	assert_int_equal(cache_file_open(c, &g, "k\nsmall\n1", r.size, &st, remote_fetch, &r), 0);
	assert_int_equal(differs(g, &r), 0);
	cache_file_close(g);
	cache_drain(c);
	assert_int_equal(held(c), 0);
	assert_int_equal(cache_file_open(c, &g, "k\nsmall\n1", r.size, &st, remote_fetch, &r), 0);
	assert_true(cache_file_fd(g) >= 0);			/* written: complete on disk */
	assert_int_equal(differs(g, &r), 0);
	cache_file_close(g);
	cache_destroy(c);
	assert_int_equal(atomic_load(&r.calls), 1);
}

struct reader {
	struct cache_file *f;
	struct remote *r;
	int bad;
};

static void *read_thread(void *arg)
{
	struct reader *rd = arg;

	rd->bad = differs(rd->f, rd->r);
	return NULL;
}

static void test_defer_opens_at_once_fetch_once(void **state)
{
	struct remote r = { .size = 700 * KiB, .salt = 2, .slow_ms = 100 };
	struct cache_stats st = { 0 };
	struct reader rd[6];
	pthread_t t[6];
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, top, 64u << 20), 0);
	for (int i = 0; i < 6; i++) {
		rd[i] = (struct reader){ .r = &r };
		assert_int_equal(cache_file_open(c, &rd[i].f, "k\nshared\n1", r.size, &st,
						 remote_fetch, &r), 0);
	}
	for (int i = 0; i < 6; i++)
		assert_int_equal(pthread_create(&t[i], NULL, read_thread, &rd[i]), 0);
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(rd[i].bad, 0);
		cache_file_close(rd[i].f);
	}
	assert_int_equal(atomic_load(&r.calls), 1);
	cache_destroy(c);
}

static void test_defer_failed_fetch_keeps_nothing(void **state)
{
	struct remote r = { .size = 5000, .salt = 3 };
	struct cache_stats st = { 0 };
	unsigned char buf[100];
	struct cache_file *f;
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, top, 64u << 20), 0);
	atomic_store(&r.fail, ETIMEDOUT);
	assert_int_equal(cache_file_open(c, &f, "k\nflaky\n1", r.size, &st, remote_fetch, &r), 0);
	assert_int_equal(cache_file_read(f, buf, sizeof(buf), 0), -ETIMEDOUT);
	atomic_store(&r.fail, 0);
	assert_int_equal(differs(f, &r), 0);		/* the next read tries again */
	cache_file_close(f);
	atomic_store(&r.fail, ETIMEDOUT);
	assert_int_equal(cache_file_open(c, &f, "k\nlost\n1", r.size, &st, remote_fetch, &r), 0);
	assert_int_equal(cache_file_read(f, buf, sizeof(buf), 0), -ETIMEDOUT);
	cache_file_close(f);
	cache_drain(c);
	assert_int_equal(held(c), 0);			/* the failed one is not held */
	cache_destroy(c);

	assert_int_equal(cache_create(&c, top, 64u << 20), 0);	/* nor written */
	assert_int_equal(cache_file_open(c, &f, "k\nlost\n1", r.size, &st, remote_fetch, &r), 0);
	assert_int_equal(cache_file_read(f, buf, sizeof(buf), 0), -ETIMEDOUT);
	cache_file_close(f);
	cache_destroy(c);
}

static void test_defer_destroy_writes_what_waits(void **state)
{
	struct remote r[50];
	struct cache_stats st = { 0 };
	struct cache_file *f;
	struct cache *c;
	char key[32];

	(void)state;
	assert_int_equal(cache_create(&c, top, 64u << 20), 0);
	for (int i = 0; i < 50; i++) {
		r[i] = (struct remote){ .size = 1000 + 997 * (uint64_t)i, .salt = 10 + (unsigned)i };
		snprintf(key, sizeof(key), "k\nmany-%d\n1", i);
		assert_int_equal(cache_file_open(c, &f, key, r[i].size, &st, remote_fetch, &r[i]), 0);
		assert_int_equal(differs(f, &r[i]), 0);
		cache_file_close(f);
	}
	cache_destroy(c);		/* at once: the writer has not started */

	assert_int_equal(cache_create(&c, top, 64u << 20), 0);
	for (int i = 0; i < 50; i++) {
		atomic_store(&r[i].fail, EIO);
		snprintf(key, sizeof(key), "k\nmany-%d\n1", i);
		assert_int_equal(cache_file_open(c, &f, key, r[i].size, &st, remote_fetch, &r[i]), 0);
		assert_true(cache_file_fd(f) >= 0);
		assert_int_equal(differs(f, &r[i]), 0);
		cache_file_close(f);
		assert_int_equal(atomic_load(&r[i].calls), 1);
	}
	cache_destroy(c);
}

/* @key of @r opened in @c, which must work. */
static struct cache_file *opened(struct cache *c, const char *key, struct remote *r)
{
	static struct cache_stats st;
	struct cache_file *f = NULL;

	assert_int_equal(cache_file_open(c, &f, key, r->size, &st, remote_fetch, r), 0);
	return f;
}

/* Makes the cache's objects/ folder unusable (a file in its place), or usable again. */
static void break_objects(bool broken)
{
	char dir[96], gone[96];

	snprintf(dir, sizeof(dir), "%s/objects", top);
	snprintf(gone, sizeof(gone), "%s/objects.gone", top);
	if (broken) {
		assert_int_equal(rename(dir, gone), 0);
		assert_int_equal(close(creat(dir, 0600)), 0);
	} else {
		assert_int_equal(unlink(dir), 0);
		assert_int_equal(rename(gone, dir), 0);
	}
}

/* A cache folder that fails (here ENOTDIR; read-only, gone, EIO alike): reads go uncached. */
static void test_broken_folder_reads_uncached(void **state)
{
	struct remote small = { .size = 100 * KiB, .salt = 4 };
	struct remote big = { .size = 3100 * KiB, .salt = 5 };
	struct cache_info info;
	struct cache_file *f;
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, top, 64u << 20), 0);
	break_objects(true);
	f = opened(c, "k\nbroken-small\n1", &small);
	assert_int_equal(differs(f, &small), 0);
	assert_int_equal(cache_file_fd(f), -1);
	assert_int_equal(held(c), 0);				/* not held either */
	cache_file_close(f);
	f = opened(c, "k\nbroken-big\n1", &big);
	assert_int_equal(differs(f, &big), 0);
	cache_file_close(f);
	cache_get_info(c, &info);
	assert_int_equal(info.bypassed, 2);
	atomic_store(&small.calls, 0);
	f = opened(c, "k\nbroken-small\n1", &small);
	assert_int_equal(differs(f, &small), 0);		/* kept nowhere: fetched again */
	assert_true(atomic_load(&small.calls) > 0);
	cache_file_close(f);
	break_objects(false);
	cache_destroy(c);
}

/* The writer finds the folder broken: the objects it could not write are dropped, not kept half. */
static void test_defer_writer_failure_drops(void **state)
{
	struct remote r[5];
	struct cache_file *f[5];
	struct cache *c;
	char key[32];

	(void)state;
	assert_int_equal(cache_create(&c, top, 64u << 20), 0);
	for (int i = 0; i < 5; i++) {
		r[i] = (struct remote){ .size = 50 * KiB + 17 * (uint64_t)i,
					.salt = 20 + (unsigned)i };
		snprintf(key, sizeof(key), "k\nlost-%d\n1", i);
		f[i] = opened(c, key, &r[i]);
		assert_int_equal(differs(f[i], &r[i]), 0);	/* in memory */
	}
	break_objects(true);
	for (int i = 0; i < 5; i++)
		cache_file_close(f[i]);			/* queued for the writer, which fails */
	cache_drain(c);
	assert_int_equal(held(c), 0);
	break_objects(false);
	for (int i = 0; i < 5; i++) {
		unsigned char buf[16];

		atomic_store(&r[i].fail, EIO);		/* neither in memory nor on disk */
		snprintf(key, sizeof(key), "k\nlost-%d\n1", i);
		f[i] = opened(c, key, &r[i]);
		assert_int_equal(cache_file_read(f[i], buf, sizeof(buf), 0), -EIO);
		atomic_store(&r[i].fail, 0);
		assert_int_equal(differs(f[i], &r[i]), 0);	/* the folder mended: kept again */
		cache_file_close(f[i]);
	}
	cache_destroy(c);
	assert_int_equal(cache_create(&c, top, 64u << 20), 0);
	for (int i = 0; i < 5; i++) {
		atomic_store(&r[i].fail, EIO);
		snprintf(key, sizeof(key), "k\nlost-%d\n1", i);
		f[i] = opened(c, key, &r[i]);
		assert_int_equal(differs(f[i], &r[i]), 0);	/* from disk */
		cache_file_close(f[i]);
	}
	cache_destroy(c);
}

/* The cache folder emptied under a running cache (rm -rf of its objects): made anew, kept again. */
static void test_emptied_folder_is_made_anew(void **state)
{
	struct remote r[2] = { { .size = 2100 * KiB, .salt = 30 },
			       { .size = 70 * KiB, .salt = 31 } };
	const char *keys[2] = { "k\nanew-big\n1", "k\nanew-small\n1" };
	struct cache_file *f;
	struct cache *c;
	char cmd[128];

	(void)state;
	assert_int_equal(cache_create(&c, top, 64u << 20), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/objects'", top);
	assert_int_equal(system(cmd), 0);
	for (int i = 0; i < 2; i++) {
		f = opened(c, keys[i], &r[i]);
		assert_int_equal(differs(f, &r[i]), 0);
		cache_file_close(f);
	}
	cache_drain(c);
	for (int i = 0; i < 2; i++) {
		atomic_store(&r[i].fail, EIO);		/* from disk now */
		f = opened(c, keys[i], &r[i]);
		assert_true(cache_file_fd(f) >= 0);
		assert_int_equal(differs(f, &r[i]), 0);
		cache_file_close(f);
	}
	cache_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, make_top, remove_top)
		T(test_defer_served_from_memory_then_on_disk),
		T(test_defer_opens_at_once_fetch_once),
		T(test_defer_failed_fetch_keeps_nothing),
		T(test_defer_destroy_writes_what_waits),
		T(test_broken_folder_reads_uncached),
		T(test_defer_writer_failure_drops),
		T(test_emptied_folder_is_made_anew),
#undef T
	};

	return cmocka_run_group_tests_name("cache_defer", tests, NULL, NULL);
}
