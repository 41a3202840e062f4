/*
 * test_cache.c - the shared disk cache, against a fake remote.
 *
 * The fake fetch serves a pattern computed from the offset and a seed, counts
 * calls, bytes and fetches per block in memory shared across fork (so two
 * processes are counted together), and can sleep or fail on demand.  Each
 * test gets a fresh cache folder.  Processes forked here create their own
 * struct cache after the fork and report through their exit status.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <openssl/evp.h>

#include "cache.h"
#include "../../core/cache_int.h"	/* the map header: the durable flag */

#define MiB		(1024u * 1024u)
#define MAX_BLOCKS	128

/* Shared with forked children. */
struct counts {
	atomic_uint calls;
	atomic_uint_fast64_t bytes;
	atomic_uint_fast64_t bytes_from_watch;	/* fetched at or past watch */
	atomic_uint_fast64_t watch;		/* set while fetch threads read it */
	atomic_uint block[MAX_BLOCKS];		/* fetches of each 1 MiB block */
	atomic_int flag[4];			/* handshakes between processes */
};

struct fake {
	uint64_t seed, size;
	int delay_us;
	atomic_int fail;			/* errno to fail with, 0 for none */
};

static struct counts *cnt;
static char dir[256];

static unsigned char pattern(uint64_t seed, uint64_t off)
{
	uint64_t x = off * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;

	x ^= x >> 29;
	return (unsigned char)(x >> 21);
}

static ssize_t fake_fetch(void *arg, void *buf, size_t len, off_t off)
{
	struct fake *fk = arg;
	int fail = atomic_load(&fk->fail);

	if (fail)
		return -fail;
	if (fk->delay_us)
		usleep((useconds_t)fk->delay_us);
	if ((uint64_t)off >= fk->size)
		return 0;
	if (len > fk->size - (uint64_t)off)
		len = (size_t)(fk->size - (uint64_t)off);
	for (size_t i = 0; i < len; i++)
		((unsigned char *)buf)[i] = pattern(fk->seed, (uint64_t)off + i);
	atomic_fetch_add(&cnt->calls, 1);
	atomic_fetch_add(&cnt->bytes, len);
	if ((uint64_t)off >= atomic_load(&cnt->watch))
		atomic_fetch_add(&cnt->bytes_from_watch, len);
	for (uint64_t b = (uint64_t)off / MiB; len && b <= ((uint64_t)off + len - 1) / MiB; b++)
		if (b < MAX_BLOCKS)
			atomic_fetch_add(&cnt->block[b], 1);
	return (ssize_t)len;
}

static void counts_reset(void)
{
	memset(cnt, 0, sizeof(*cnt));
	atomic_store(&cnt->watch, UINT64_MAX);
}

static int setup(void **state)
{
	(void)state;
	counts_reset();
	snprintf(dir, sizeof(dir), "/tmp/mlfs-test-cache.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* 0 when [off, off+n) of the object holds the pattern, else 1. */
static int check(const struct fake *fk, const unsigned char *buf, size_t n, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		if (buf[i] != pattern(fk->seed, off + i))
			return 1;
	return 0;
}

/* Reads the whole object in @chunk-sized reads from @start, wrapping; 0 if all correct. */
static int read_all(struct cache_file *f, const struct fake *fk, size_t chunk, uint64_t start)
{
	unsigned char *buf = malloc(chunk);
	uint64_t n_chunks = (fk->size + chunk - 1) / chunk;
	int bad = 0;

	for (uint64_t i = 0; i < n_chunks && !bad; i++) {
		uint64_t off = ((start / chunk + i) % n_chunks) * chunk;
		size_t want = fk->size - off < chunk ? (size_t)(fk->size - off) : chunk;
		ssize_t n = cache_file_read(f, buf, chunk, (off_t)off);

		bad = n != (ssize_t)want || check(fk, buf, want, off);
	}
	free(buf);
	return bad;
}

/* Opens, reads all of and closes one object through @c. */
static void read_object(struct cache *c, const char *key, struct fake *fk)
{
	struct cache_stats st = { 0 };
	struct cache_file *f;

	assert_int_equal(cache_file_open(c, &f, key, fk->size, &st, fake_fetch, fk), 0);
	assert_int_equal(read_all(f, fk, 256 * 1024, 0), 0);
	cache_file_close(f);
}

static void object_path(const char *key, const char *suffix, char *out, size_t size)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	char hex[65];
	unsigned int n;

	EVP_Digest(key, strlen(key), md, &n, EVP_sha256(), NULL);
	for (unsigned int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	snprintf(out, size, "%s/objects/%.2s/%s%s", dir, hex, hex, suffix);
}

static bool object_exists(const char *key)
{
	char path[512];

	object_path(key, ".map", path, sizeof(path));
	return access(path, F_OK) == 0;
}

/* Bytes the cache's files take on disk. */
static uint64_t disk_use(void)
{
	char pat[300];
	uint64_t total = 0;
	struct stat st;
	glob_t g;

	snprintf(pat, sizeof(pat), "%s/objects/*/*", dir);
	if (glob(pat, 0, NULL, &g) != 0)
		return 0;
	for (size_t i = 0; i < g.gl_pathc; i++)
		if (stat(g.gl_pathv[i], &st) == 0)
			total += (uint64_t)st.st_blocks * 512;
	globfree(&g);
	return total;
}

static size_t object_files(void)
{
	char pat[300];
	size_t n = 0;
	glob_t g;

	snprintf(pat, sizeof(pat), "%s/objects/*/*", dir);
	if (glob(pat, 0, NULL, &g) == 0)
		n = g.gl_pathc;
	globfree(&g);
	return n;
}

static void test_cache_whole_and_random_reads_equal_the_object(void **state)
{
	struct fake fk = { .seed = 1, .size = 5 * MiB + 12345 };
	struct fake empty = { .seed = 2, .size = 0 };
	struct cache_stats st = { 0 };
	unsigned char buf[300 * 1024];
	struct cache_file *f;
	struct cache *c;

	(void)state;
	srand(42);
	assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
	assert_int_equal(cache_file_open(c, &f, "s\nrandom\nv1", fk.size, &st, fake_fetch, &fk), 0);
	for (int i = 0; i < 300; i++) {
		uint64_t off = (uint64_t)rand() % (fk.size + 100000);
		size_t len = (size_t)rand() % sizeof(buf);
		size_t want = off >= fk.size ? 0 : len < fk.size - off ? len : fk.size - off;

		assert_int_equal(cache_file_read(f, buf, len, (off_t)off), want);
		assert_int_equal(check(&fk, buf, want, off), 0);
	}
	assert_int_equal(cache_file_read(f, buf, 0, 0), 0);
	assert_int_equal(read_all(f, &fk, 128 * 1024, 0), 0);
	cache_file_close(f);

	assert_int_equal(cache_file_open(c, &f, "s\nempty\nv1", 0, &st, fake_fetch, &empty), 0);
	assert_int_equal(cache_file_read(f, buf, sizeof(buf), 0), 0);
	assert_true(cache_file_fd(f) >= 0);
	cache_file_close(f);
	cache_destroy(c);
}

static void test_cache_second_open_and_restart_fetch_nothing(void **state)
{
	struct fake fk = { .seed = 3, .size = 3 * MiB + 7 };
	struct cache_stats st = { 0 };
	struct cache_file *f;
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
	read_object(c, "s\nagain\nv1", &fk);
	assert_true(atomic_load(&cnt->calls) > 0);
	counts_reset();
	read_object(c, "s\nagain\nv1", &fk);
	assert_int_equal(atomic_load(&cnt->calls), 0);
	cache_destroy(c);

	assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
	assert_int_equal(cache_file_open(c, &f, "s\nagain\nv1", fk.size, &st, fake_fetch, &fk), 0);
	assert_int_equal(read_all(f, &fk, 64 * 1024, 0), 0);
	cache_file_close(f);
	assert_int_equal(atomic_load(&cnt->calls), 0);
	assert_int_equal(st.misses, 0);
	assert_int_equal(st.hits, (fk.size + 65535) / 65536);
	assert_int_equal(st.bytes_hit, fk.size);
	cache_destroy(c);
}

static void test_cache_different_keys_never_share_data(void **state)
{
	struct fake v1 = { .seed = 10, .size = 2 * MiB };
	struct fake v2 = { .seed = 11, .size = 2 * MiB };
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
	read_object(c, "s\nfile\netag1", &v1);
	read_object(c, "s\nfile\netag2", &v2);
	counts_reset();
	read_object(c, "s\nfile\netag1", &v1);	/* asserts v1's bytes, not v2's */
	read_object(c, "s\nfile\netag2", &v2);
	assert_int_equal(atomic_load(&cnt->calls), 0);
	cache_destroy(c);
}

struct reader {
	struct cache *c;
	struct fake *fk;
	pthread_barrier_t *start;
	uint64_t from;
	int bad;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	struct cache_stats st = { 0 };
	struct cache_file *f;

	pthread_barrier_wait(r->start);
	r->bad = cache_file_open(r->c, &f, "s\nshared\nv1", r->fk->size, &st, fake_fetch, r->fk);
	if (r->bad == 0) {
		r->bad = read_all(f, r->fk, 128 * 1024, r->from);
		cache_file_close(f);
	}
	return NULL;
}

static void test_cache_threads_missing_a_block_fetch_it_once(void **state)
{
	struct fake fk = { .seed = 20, .size = 16 * MiB + 100, .delay_us = 3000 };
	pthread_barrier_t start;
	struct reader r[8];
	pthread_t t[8];
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
	pthread_barrier_init(&start, NULL, 8);
	for (int i = 0; i < 8; i++) {
		r[i] = (struct reader){ .c = c, .fk = &fk, .start = &start,
					.from = i < 4 ? 0 : (uint64_t)i * 3 * MiB };
		pthread_create(&t[i], NULL, reader_main, &r[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].bad, 0);
	}
	pthread_barrier_destroy(&start);
	for (unsigned int b = 0; b <= fk.size / MiB; b++)
		assert_int_equal(atomic_load(&cnt->block[b]), 1);
	assert_int_equal(atomic_load(&cnt->bytes), fk.size);
	cache_destroy(c);
}

/* A forked process: its own cache, one read of the object from @from. Exit 0 if right. */
static int child_read_shared(struct fake *fk, uint64_t from)
{
	struct cache_stats st = { 0 };
	struct cache_file *f;
	struct cache *c;
	int bad;

	atomic_fetch_add(&cnt->flag[0], 1);
	while (atomic_load(&cnt->flag[0]) < 2)
		;
	if (cache_create(&c, dir, 256 * MiB) < 0)
		return 2;
	bad = cache_file_open(c, &f, "s\nprocs\nv1", fk->size, &st, fake_fetch, fk);
	if (bad == 0) {
		bad = read_all(f, fk, 128 * 1024, from);
		cache_file_close(f);
	}
	cache_destroy(c);
	return bad ? 1 : 0;
}

static void test_cache_two_processes_fetch_each_block_once(void **state)
{
	struct fake fk = { .seed = 30, .size = 24 * MiB + 4097, .delay_us = 3000 };
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_read_shared(&fk, 0));
	assert_int_equal(child_read_shared(&fk, 0), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	for (unsigned int b = 0; b <= fk.size / MiB; b++)
		assert_int_equal(atomic_load(&cnt->block[b]), 1);
	assert_int_equal(atomic_load(&cnt->bytes), fk.size);
}

static void test_cache_stays_under_max_and_evicts_least_recently_used(void **state)
{
	struct fake fk[24];
	struct cache_info info;
	char key[24][32];
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, dir, 8 * MiB), 0);
	for (int i = 0; i < 24; i++) {
		fk[i] = (struct fake){ .seed = 100 + (uint64_t)i, .size = MiB + 1000 };
		snprintf(key[i], sizeof(key[i]), "s\nobj%d\nv1", i);
		read_object(c, key[i], &fk[i]);
		usleep(5000);		/* file times tick at the kernel's clock */
		read_object(c, key[0], &fk[0]);	/* object 0 stays in use */
		usleep(5000);
		assert_true(disk_use() <= 8 * MiB + 2 * MiB + 64 * 1024);
	}
	assert_true(disk_use() <= 8 * MiB);
	cache_get_info(c, &info);
	assert_true(info.evictions >= 16);
	assert_true(info.used_bytes <= 8 * MiB + 2 * MiB);
	assert_true(object_exists(key[0]));
	assert_false(object_exists(key[1]));
	assert_false(object_exists(key[10]));
	assert_true(object_exists(key[23]));
	counts_reset();
	read_object(c, key[0], &fk[0]);
	assert_int_equal(atomic_load(&cnt->calls), 0);
	cache_destroy(c);
}

/* A forked reader: holds the object open while the parent fills the cache. */
static int child_hold_open(struct fake *fk)
{
	struct cache_stats st = { 0 };
	struct cache_file *f;
	unsigned char buf[4096];
	struct cache *c;
	int bad;

	if (cache_create(&c, dir, 8 * MiB) < 0)
		return 2;
	bad = cache_file_open(c, &f, "s\npinned\nv1", fk->size, &st, fake_fetch, fk);
	if (bad == 0) {
		bad = cache_file_read(f, buf, sizeof(buf), 0) != sizeof(buf) ||
		      check(fk, buf, sizeof(buf), 0);
		atomic_store(&cnt->flag[1], 1);
		while (!atomic_load(&cnt->flag[2]))
			usleep(1000);
		bad = bad || read_all(f, fk, 100 * 1000, 0);
		cache_file_close(f);
	}
	cache_destroy(c);
	return bad ? 1 : 0;
}

static void test_cache_object_open_in_another_process_is_not_evicted(void **state)
{
	struct fake pinned = { .seed = 40, .size = 2 * MiB };
	struct fake fk[16];
	struct cache_info info;
	struct cache *c;
	char key[32];
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_hold_open(&pinned));
	while (!atomic_load(&cnt->flag[1]))
		usleep(1000);
	assert_int_equal(cache_create(&c, dir, 8 * MiB), 0);
	for (int i = 0; i < 16; i++) {
		fk[i] = (struct fake){ .seed = 200 + (uint64_t)i, .size = MiB };
		snprintf(key, sizeof(key), "s\nfill%d\nv1", i);
		read_object(c, key, &fk[i]);
	}
	cache_get_info(c, &info);
	assert_true(info.evictions > 0);
	assert_true(object_exists("s\npinned\nv1"));
	atomic_store(&cnt->flag[2], 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	cache_destroy(c);
}

static void test_cache_too_large_objects_bypass(void **state)
{
	struct fake fk = { .seed = 50, .size = 3 * MiB };
	struct cache_stats st = { 0 };
	struct cache_info info;
	struct cache_file *f;
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, dir, 8 * MiB), 0);
	assert_int_equal(cache_file_open(c, &f, "s\nbig\nv1", fk.size, &st, fake_fetch, &fk), 0);
	assert_int_equal(read_all(f, &fk, 128 * 1024, 0), 0);
	assert_int_equal(cache_file_fd(f), -1);
	cache_file_close(f);
	cache_get_info(c, &info);
	assert_int_equal(info.bypassed, 1);
	assert_int_equal(object_files(), 0);
	assert_int_equal(atomic_load(&cnt->bytes), fk.size);
	read_object(c, "s\nbig\nv1", &fk);
	assert_int_equal(atomic_load(&cnt->bytes), 2 * fk.size);
	cache_destroy(c);
}

static void test_cache_fd_is_given_only_once_complete(void **state)
{
	struct fake fk = { .seed = 60, .size = 3 * MiB + MiB / 2 };
	struct cache_stats st = { 0 };
	unsigned char *buf = malloc(fk.size);
	struct cache_file *f;
	struct cache *c;
	struct stat sb;
	int fd;

	(void)state;
	assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
	assert_int_equal(cache_file_open(c, &f, "s\nfd\nv1", fk.size, &st, fake_fetch, &fk), 0);
	assert_int_equal(cache_file_fd(f), -1);
	assert_int_equal(cache_file_read(f, buf, 4096, 0), 4096);
	assert_int_equal(cache_file_fd(f), -1);
	assert_int_equal(read_all(f, &fk, MiB, 0), 0);
	fd = cache_file_fd(f);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	assert_int_equal(sb.st_size, fk.size);
	assert_int_equal(pread(fd, buf, fk.size, 0), fk.size);
	assert_int_equal(check(&fk, buf, fk.size, 0), 0);
	assert_int_equal(write(fd, "x", 1), -1);	/* the kernel gets it read-only */
	cache_file_close(f);
	assert_int_equal(cache_file_open(c, &f, "s\nfd\nv1", fk.size, &st, fake_fetch, &fk), 0);
	assert_true(cache_file_fd(f) >= 0);
	cache_file_close(f);
	free(buf);
	cache_destroy(c);
}

/* What cache_file_read_iov handed over: the bytes joined, and how. */
struct got {
	unsigned char buf[16 * MiB + 2];
	size_t n;
	int calls, pieces;
};

static void got_use(void *arg, const struct iovec *iov, int n_iov)
{
	struct got *g = arg;

	g->calls++;
	g->pieces += n_iov;
	for (int i = 0; i < n_iov; i++) {
		memcpy(g->buf + g->n, iov[i].iov_base, iov[i].iov_len);
		g->n += iov[i].iov_len;
	}
}

static ssize_t read_iov(struct cache_file *f, struct got *g, size_t len, uint64_t off)
{
	g->n = 0;
	g->calls = g->pieces = 0;
	return cache_file_read_iov(f, len, (off_t)off, got_use, g);
}

static void test_cache_read_iov_hands_over_the_right_bytes(void **state)
{
	struct fake fk = { .seed = 65, .size = 9 * MiB + 123 };
	struct cache_stats st = { 0 };
	struct got *g = malloc(sizeof(*g));
	struct cache_file *f;
	struct cache *c;

	(void)state;
	counts_reset();
	assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
	assert_int_equal(cache_file_open(c, &f, "s\nmap\nv1", fk.size, &st, fake_fetch, &fk), 0);
	/* a cold read fetches, then hands the bytes over once */
	assert_int_equal(read_iov(f, g, 300000, 2 * MiB + 7), 300000);
	assert_int_equal(g->calls, 1);
	assert_int_equal(g->n, 300000);
	assert_int_equal(check(&fk, g->buf, 300000, 2 * MiB + 7), 0);
	/* across the end of one fetched run into the next, and over 16 MiB: cut to 16 */
	assert_int_equal(read_iov(f, g, 2 * MiB, 3 * MiB + MiB / 2), 2 * MiB);
	assert_int_equal(check(&fk, g->buf, 2 * MiB, 3 * MiB + MiB / 2), 0);
	assert_int_equal(read_iov(f, g, 20 * MiB, 1), fk.size - 1);
	assert_int_equal(check(&fk, g->buf, g->n, 1), 0);
	/* the last bytes: a short count; at the end: 0, and @use still called */
	assert_int_equal(read_iov(f, g, MiB, fk.size - 100), 100);
	assert_int_equal(check(&fk, g->buf, 100, fk.size - 100), 0);
	assert_int_equal(read_iov(f, g, MiB, fk.size), 0);
	assert_int_equal(g->calls, 1);
	assert_int_equal(g->pieces, 0);
	cache_file_close(f);
	/* too large for the cache: read through, never handed over */
	assert_int_equal(cache_file_open(c, &f, "s\nbig\nv1", 200 * MiB, &st, fake_fetch, &fk),
			 0);
	assert_int_equal(read_iov(f, g, 4096, 0), -ENOTSUP);
	assert_int_equal(g->calls, 0);
	cache_file_close(f);
	cache_destroy(c);
	free(g);
}

/*
 * A first read is answered from the fetched blocks in memory, which are
 * written to the data file meanwhile (O_DIRECT where the folder allows it)
 * and let go once read: memory stays bounded and is all given back at
 * close, and what was written is the object, read back by a new open
 * without a fetch and from the data file itself.
 */
static void test_cache_fetched_blocks_are_held_briefly_and_written(void **state)
{
	struct fake fk = { .seed = 66, .size = 96 * MiB + 5 };
	struct cache_stats st = { 0 };
	struct got *g = malloc(sizeof(*g));
	struct cache_info info;
	uint64_t peak = 0;
	struct cache_file *f;
	struct cache *c;
	glob_t gl;
	char pat[300];
	int fd;

	(void)state;
	counts_reset();
	assert_int_equal(cache_create(&c, dir, 1024 * MiB), 0);
	assert_int_equal(cache_file_open(c, &f, "s\nhot\nv1", fk.size, &st, fake_fetch, &fk), 0);
	for (uint64_t off = 0; off < fk.size; off += g->n) {
		assert_true(read_iov(f, g, MiB, off) > 0);
		assert_int_equal(check(&fk, g->buf, g->n, off), 0);
		cache_get_info(c, &info);
		peak = info.memory_bytes > peak ? info.memory_bytes : peak;
	}
	assert_true(peak > 0);
	assert_true(peak <= 16 * 4 * MiB);	/* CACHE_HOT_RUNS runs of 4 MiB */
	cache_file_close(f);
	cache_get_info(c, &info);
	assert_int_equal(info.memory_bytes, 0);
	assert_int_equal(atomic_load(&cnt->bytes), fk.size);

	assert_int_equal(cache_file_open(c, &f, "s\nhot\nv1", fk.size, &st, fake_fetch, &fk), 0);
	assert_int_equal(read_all(f, &fk, 1000 * 1000, 0), 0);
	fd = cache_file_fd(f);
	assert_true(fd >= 0);
	cache_file_close(f);
	assert_int_equal(atomic_load(&cnt->bytes), fk.size);
	snprintf(pat, sizeof(pat), "%s/objects/*/*.data", dir);
	assert_int_equal(glob(pat, 0, NULL, &gl), 0);
	assert_int_equal(gl.gl_pathc, 1);
	fd = open(gl.gl_pathv[0], O_RDONLY);
	globfree(&gl);
	assert_true(fd >= 0);
	for (uint64_t off = 0; off < fk.size; off += MiB) {
		ssize_t n = pread(fd, g->buf, MiB, (off_t)off);

		assert_true(n > 0);
		assert_int_equal(check(&fk, g->buf, (size_t)n, off), 0);
	}
	close(fd);
	cache_destroy(c);
	free(g);
}

/* Reads that seek keep nothing in memory: what they fetch is in the page cache. */
static void test_cache_random_reads_hold_no_memory(void **state)
{
	static const uint64_t offs[] = { 0, 5 * MiB, 2 * MiB, 7 * MiB + 3, 4 * MiB + 100, MiB };
	struct fake fk = { .seed = 68, .size = 9 * MiB };
	struct cache_stats st = { 0 };
	unsigned char *buf = malloc(64 * 1024);
	struct cache_info info;
	struct cache_file *f;
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, dir, 1024 * MiB), 0);
	assert_int_equal(cache_file_open(c, &f, "s\nseeks\nv1", fk.size, &st, fake_fetch, &fk), 0);
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		assert_int_equal(cache_file_read(f, buf, 64 * 1024, (off_t)offs[i]), 64 * 1024);
		assert_int_equal(check(&fk, buf, 64 * 1024, offs[i]), 0);
		cache_get_info(c, &info);
		assert_int_equal(info.memory_bytes, 0);
	}
	cache_file_close(f);
	cache_destroy(c);
	free(buf);
}

/*
 * Past its memory budget (an eighth of the cache's size here) the cache
 * writes fetched blocks through the page cache and answers from there:
 * the same bytes, the same single fetch per block, and a failed fetch
 * still fails the read and is tried again by the next.
 */
static void test_cache_reads_past_the_memory_budget_are_the_same(void **state)
{
	struct fake fk = { .seed = 67, .size = 15 * MiB + 77 };
	struct cache_stats st = { 0 };
	unsigned char *buf = malloc(MiB);
	struct cache_info info;
	struct cache_file *f;
	struct cache *c;

	(void)state;
	counts_reset();
	assert_int_equal(cache_create(&c, dir, 64 * MiB), 0);
	assert_int_equal(cache_file_open(c, &f, "s\nbudget\nv1", fk.size, &st, fake_fetch, &fk),
			 0);
	for (uint64_t off = 0; off < fk.size; off += MiB) {
		ssize_t n = cache_file_read(f, buf, MiB, (off_t)off);

		assert_true(n > 0);
		assert_int_equal(check(&fk, buf, (size_t)n, off), 0);
		cache_get_info(c, &info);
		assert_true(info.memory_bytes <= 8 * MiB);
	}
	cache_file_close(f);
	for (unsigned int b = 0; b <= fk.size / MiB; b++)
		assert_int_equal(atomic_load(&cnt->block[b]), 1);

	counts_reset();
	assert_int_equal(cache_file_open(c, &f, "s\nbudget\nv2", fk.size, &st, fake_fetch, &fk),
			 0);
	atomic_store(&fk.fail, EIO);
	assert_int_equal(cache_file_read(f, buf, MiB, 9 * MiB), -EIO);
	atomic_store(&fk.fail, 0);
	assert_int_equal(read_all(f, &fk, MiB, 0), 0);
	cache_file_close(f);
	assert_int_equal(cache_file_open(c, &f, "s\nbudget\nv2", fk.size, &st, fake_fetch, &fk),
			 0);
	counts_reset();
	assert_int_equal(read_all(f, &fk, 300000, 0), 0);
	assert_int_equal(atomic_load(&cnt->calls), 0);
	cache_file_close(f);
	cache_destroy(c);
	free(buf);
}

static void test_cache_sequential_reads_grow_readahead_and_a_seek_drops_it(void **state)
{
	struct fake fk = { .seed = 70, .size = 64 * MiB };
	struct cache_stats st = { 0 };
	unsigned char buf[128 * 1024];
	struct cache_file *f;
	struct cache *c;
	unsigned int reads = 0;

	(void)state;
	assert_int_equal(cache_create(&c, dir, 1024 * MiB), 0);
	assert_int_equal(cache_file_open(c, &f, "s\nseq\nv1", fk.size, &st, fake_fetch, &fk), 0);
	for (uint64_t off = 0; off < 16 * MiB; off += sizeof(buf), reads++) {
		assert_int_equal(cache_file_read(f, buf, sizeof(buf), (off_t)off), sizeof(buf));
		assert_int_equal(check(&fk, buf, sizeof(buf), off), 0);
	}
	assert_true(st.hits > st.misses * 8);
	for (int i = 0; i < 500 && atomic_load(&cnt->bytes) < 48 * MiB; i++)
		usleep(10000);
	/* it ran 32 MiB ahead of the reader, in fetches of several blocks */
	assert_int_equal(atomic_load(&cnt->bytes), 48 * MiB);
	assert_true(atomic_load(&cnt->calls) * 4 <= reads);
	assert_true(atomic_load(&cnt->bytes) / atomic_load(&cnt->calls) >= 2 * MiB);
	atomic_store(&cnt->watch, 56 * MiB);		/* far past anything read ahead so far */
	assert_int_equal(cache_file_read(f, buf, sizeof(buf), 60 * MiB), sizeof(buf));
	assert_int_equal(check(&fk, buf, sizeof(buf), 60 * MiB), 0);
	cache_file_close(f);		/* waits for read-ahead */
	assert_int_equal(atomic_load(&cnt->bytes_from_watch), MiB);
	cache_destroy(c);
}

/* Reads all of a 64 MiB object through a new cache file, @long fetches or not: the fetches made. */
static unsigned int long_read(struct cache *c, const char *key, bool long_fetches)
{
	struct fake fk = { .seed = 71, .size = 64 * MiB };
	struct cache_stats st = { 0 };
	struct cache_file *f;

	counts_reset();
	assert_int_equal(cache_file_open(c, &f, key, fk.size, &st, fake_fetch, &fk), 0);
	if (long_fetches)
		cache_file_long_fetches(f);
	assert_int_equal(read_all(f, &fk, 1024 * 1024, 0), 0);
	cache_file_long_fetches(f);	/* after the first read: a no-op */
	cache_file_close(f);		/* waits for read-ahead */
	/* every byte once, none twice */
	assert_int_equal(atomic_load(&cnt->bytes), 64 * MiB);
	for (unsigned int b = 0; b < 64; b++)
		assert_int_equal(atomic_load(&cnt->block[b]), 1);
	return (unsigned int)atomic_load(&cnt->calls);
}

/* A backend that pays per request (BE_CAP_LONG_FETCH): the same bytes in runs of 16 MiB. */
static void test_cache_long_fetches_ask_fewer(void **state)
{
	unsigned int usual, longer;
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, dir, 1024 * MiB), 0);
	usual = long_read(c, "s\nusual\nv1", false);
	longer = long_read(c, "s\nlong\nv1", true);
	/* the reader's own first blocks either way, then runs of 4 or 16 blocks */
	assert_true(usual >= 16);
	assert_true(longer * 3 <= usual * 2);
	cache_destroy(c);
}

static void test_cache_fetch_error_is_returned_and_retry_succeeds(void **state)
{
	struct fake fk = { .seed = 80, .size = 4 * MiB };
	struct cache_stats st = { 0 };
	unsigned char buf[4096];
	struct cache_file *f;
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
	assert_int_equal(cache_file_open(c, &f, "s\nflaky\nv1", fk.size, &st, fake_fetch, &fk), 0);
	atomic_store(&fk.fail, ETIMEDOUT);
	assert_int_equal(cache_file_read(f, buf, sizeof(buf), MiB), -ETIMEDOUT);
	assert_int_equal(cache_file_read(f, buf, sizeof(buf), MiB), -ETIMEDOUT);
	atomic_store(&fk.fail, 0);
	assert_int_equal(cache_file_read(f, buf, sizeof(buf), MiB), sizeof(buf));
	assert_int_equal(check(&fk, buf, sizeof(buf), MiB), 0);
	assert_int_equal(read_all(f, &fk, 128 * 1024, 0), 0);
	cache_file_close(f);
	cache_destroy(c);
}

/* Whether the object named @key's map is sealed (complete and durable: CACHE_SEALED). */
static bool map_sealed(const char *key)
{
	char path[512];
	struct stat st;

	object_path(key, ".map", path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	return st.st_mode & CACHE_SEALED;
}

static void test_cache_map_with_garbage_is_ignored(void **state)
{
	struct fake fk = { .seed = 90, .size = 2 * MiB + 3 };
	char path[512], junk[700];
	struct cache *c;
	int fd;

	(void)state;
	assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
	read_object(c, "s\ngarbage\nv1", &fk);
	/* the map is spoilt while nobody holds the object: not even its sync after close */
	cache_destroy(c);
	assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
	object_path("s\ngarbage\nv1", ".map", path, sizeof(path));
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	memset(junk, 0x5a, sizeof(junk));
	assert_int_equal(pwrite(fd, junk, sizeof(junk), 0), sizeof(junk));
	close(fd);
	counts_reset();
	read_object(c, "s\ngarbage\nv1", &fk);
	assert_int_equal(atomic_load(&cnt->bytes), fk.size);
	counts_reset();
	read_object(c, "s\ngarbage\nv1", &fk);
	assert_int_equal(atomic_load(&cnt->calls), 0);
	cache_destroy(c);
	/*
	 * A sealed map (complete, durable) is not read at open: bytes of its own
	 * size spoilt in place do not matter.  Unsealed, the same map is read,
	 * found bad and the object fetched again.
	 */
	{
		struct stat st;

		assert_int_equal(stat(path, &st), 0);
		assert_true(st.st_mode & CACHE_SEALED);
		fd = open(path, O_WRONLY);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, junk, 64, 0), 64);
		close(fd);
		assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
		counts_reset();
		read_object(c, "s\ngarbage\nv1", &fk);
		assert_int_equal(atomic_load(&cnt->calls), 0);
		cache_destroy(c);
		assert_int_equal(chmod(path, 0600), 0);
		assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
		counts_reset();
		read_object(c, "s\ngarbage\nv1", &fk);
		assert_int_equal(atomic_load(&cnt->bytes), fk.size);
		cache_destroy(c);
		assert_true(map_sealed("s\ngarbage\nv1"));	/* fetched anew, sealed again */
	}
}

/* The DURABLE flag of the object named @key's map. */
static uint32_t map_flags(const char *key)
{
	char path[512];
	uint32_t flags = 0;
	int fd;

	object_path(key, ".map", path, sizeof(path));
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &flags, sizeof(flags), offsetof(struct cache_map_hdr, flags)),
			 sizeof(flags));
	close(fd);
	return flags;
}

/*
 * A complete object is made durable (data synced, then flagged, then sealed) once
 * closed, by a writer thread rather than the closing one, and at the latest
 * by cache_destroy; a partial one never is: after a reboot it is fetched
 * again.  Many small objects closed at once (a writer syncs them together)
 * each become durable.
 */
static void test_cache_complete_objects_become_durable(void **state)
{
	struct fake whole = { .seed = 91, .size = 3 * MiB + 5 };
	struct fake part = { .seed = 92, .size = 32 * MiB + 5 };	/* read-ahead never completes it */
	struct cache_stats st = { 0 };
	struct cache_file *f;
	char buf[4096];
	struct cache *c;

	(void)state;
	assert_int_equal(cache_create(&c, dir, 256 * MiB), 0);
	read_object(c, "s\ndurable\nv1", &whole);
	assert_int_equal(cache_file_open(c, &f, "s\npartial\nv1", part.size, &st, fake_fetch,
					 &part), 0);
	assert_int_equal(cache_file_read(f, buf, sizeof(buf), 0), sizeof(buf));
	cache_file_close(f);
	for (int i = 0; i < 40; i++) {
		struct fake small = { .seed = 100 + i, .size = 4096 + i };
		char key[64];

		snprintf(key, sizeof(key), "s\nsmall-%d\nv1", i);
		read_object(c, key, &small);
	}
	for (int i = 0; i < 5; i++) {	/* opened again while it waits: queued once */
		struct fake again = { .seed = 99, .size = 5000 };
		int n;

		read_object(c, "s\nagain\nv1", &again);
		pthread_mutex_lock(&c->qlock);
		n = 0;		/* pairs of entries naming one object */
		for (struct cache_sync *q = c->shead; q; q = q->next)
			for (struct cache_sync *r = q->next; r; r = r->next)
				n += strcmp(q->hash, r->hash) == 0;
		pthread_mutex_unlock(&c->qlock);
		assert_int_equal(n, 0);
	}
	cache_destroy(c);
	assert_true(map_flags("s\ndurable\nv1") & CACHE_DURABLE);
	assert_true(map_sealed("s\ndurable\nv1"));
	assert_false(map_flags("s\npartial\nv1") & CACHE_DURABLE);
	assert_false(map_sealed("s\npartial\nv1"));
	for (int i = 0; i < 40; i++) {
		char key[64];

		snprintf(key, sizeof(key), "s\nsmall-%d\nv1", i);
		assert_true(map_flags(key) & CACHE_DURABLE);
		assert_true(map_sealed(key));	/* by the writers' syncfs */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_cache_whole_and_random_reads_equal_the_object),
		T(test_cache_second_open_and_restart_fetch_nothing),
		T(test_cache_complete_objects_become_durable),
		T(test_cache_different_keys_never_share_data),
		T(test_cache_threads_missing_a_block_fetch_it_once),
		T(test_cache_two_processes_fetch_each_block_once),
		T(test_cache_stays_under_max_and_evicts_least_recently_used),
		T(test_cache_object_open_in_another_process_is_not_evicted),
		T(test_cache_too_large_objects_bypass),
		T(test_cache_fd_is_given_only_once_complete),
		T(test_cache_read_iov_hands_over_the_right_bytes),
		T(test_cache_fetched_blocks_are_held_briefly_and_written),
		T(test_cache_random_reads_hold_no_memory),
		T(test_cache_reads_past_the_memory_budget_are_the_same),
		T(test_cache_sequential_reads_grow_readahead_and_a_seek_drops_it),
		T(test_cache_long_fetches_ask_fewer),
		T(test_cache_fetch_error_is_returned_and_retry_succeeds),
		T(test_cache_map_with_garbage_is_ignored),
#undef T
	};

	cnt = mmap(NULL, sizeof(*cnt), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (cnt == MAP_FAILED)
		return 1;
	return cmocka_run_group_tests_name("cache", tests, NULL, NULL);
}
