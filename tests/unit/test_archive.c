/*
 * test_archive.c - an archive on the local backend, shown as a read-only folder.
 *
 * The archives are written here with libarchive's writer, so member names no
 * tool would write ("../evil", "/abs", a control character) can be planted.
 * Every format (zip with stored and deflated members, tar, tar.gz, tar.bz2)
 * holds the same members and is checked the same way: listing, attributes,
 * bytes at odd offsets, symlinks, confinement, writes refused.  Then what
 * differs: zip and plain tar serve members in place, compressed tars are
 * extracted once into the cache folder and reused by a second backend; corrupt
 * archives fail cleanly; several threads read at once.
 */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "archive_err.h"
#include "backend.h"
#include "be_archive.h"

#define BIG_SIZE	(5u << 20)
#define MID_SIZE	(100u << 10)

enum fmt { FMT_ZIP, FMT_TAR, FMT_TGZ, FMT_TBZ2 };

static const char *const fmt_file[] = {
	[FMT_ZIP] = "t.zip", [FMT_TAR] = "t.tar", [FMT_TGZ] = "t.tar.gz", [FMT_TBZ2] = "t.tar.bz2",
};

struct member {
	const char *name;
	mode_t type;		/* AE_IFREG, AE_IFDIR, AE_IFLNK */
	mode_t perm;
	const unsigned char *data;
	size_t len;
	const char *target;
	int deflate;		/* zip: deflated, else stored */
	int tar_only;		/* zip cannot hold it (a duplicate name) */
};

static char root[256];
static char cache[300];
static struct backend *local;
static struct config_kv kv[2];
static struct datastore_config ds;
static unsigned char *big, *mid;
static const unsigned char hello[] = "hello world\n";

static struct member members[] = {
	{ "a.txt", AE_IFREG, 0644, hello, sizeof(hello) - 1, NULL, 0, 0 },
	{ "secret.txt", AE_IFREG, 0600, hello, 5, NULL, 1, 0 },
	{ "big.bin", AE_IFREG, 0644, NULL, BIG_SIZE, NULL, 0, 0 },
	{ "sub/deep/mid.bin", AE_IFREG, 0644, NULL, MID_SIZE, NULL, 1, 0 },
	{ "sub/empty", AE_IFREG, 0644, hello, 0, NULL, 0, 0 },
	{ "sub/link", AE_IFLNK, 0777, NULL, 0, "../a.txt", 0, 0 },
	{ "explicit/", AE_IFDIR, 0750, NULL, 0, NULL, 0, 0 },
	{ "./c/./d//e.txt", AE_IFREG, 0644, hello, 3, NULL, 1, 0 },
	{ "../evil", AE_IFREG, 0644, hello, 4, NULL, 0, 0 },
	{ "/abs", AE_IFREG, 0644, hello, 4, NULL, 0, 0 },
	{ "x/../../b", AE_IFREG, 0644, hello, 4, NULL, 0, 0 },
	{ "ctl\001name", AE_IFREG, 0644, hello, 4, NULL, 0, 0 },
	{ "a.txt/under", AE_IFREG, 0644, hello, 4, NULL, 0, 0 },
	{ "dup.txt", AE_IFREG, 0644, hello, 2, NULL, 0, 1 },
	{ "dup.txt", AE_IFREG, 0644, hello, 7, NULL, 0, 1 },
};

#define N_MEMBERS (sizeof(members) / sizeof(members[0]))

static void fill_random(unsigned char *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (unsigned char)(seed >> 16);
	}
}

static void write_archive(const char *path, enum fmt fmt)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();

	assert_non_null(a);
	if (fmt == FMT_ZIP)
		assert_int_equal(archive_write_set_format_zip(a), ARCHIVE_OK);
	else
		assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	if (fmt == FMT_TGZ)
		assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	if (fmt == FMT_TBZ2)
		assert_int_equal(archive_write_add_filter_bzip2(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (size_t i = 0; i < N_MEMBERS; i++) {
		const struct member *m = &members[i];

		if (fmt == FMT_ZIP && m->tar_only)
			continue;
		if (fmt == FMT_ZIP)
			assert_int_equal(m->deflate ? archive_write_zip_set_compression_deflate(a)
						    : archive_write_zip_set_compression_store(a),
					 ARCHIVE_OK);
		archive_entry_clear(e);
		archive_entry_set_pathname(e, m->name);
		archive_entry_set_filetype(e, m->type);
		archive_entry_set_perm(e, m->perm);
		archive_entry_set_mtime(e, 1700000000, 0);
		archive_entry_set_size(e, m->type == AE_IFREG ? (la_int64_t)m->len : 0);
		if (m->target)
			archive_entry_set_symlink(e, m->target);
		if (archive_write_header(a, e) != ARCHIVE_OK)
			fail_msg("writing %s: %s", m->name, archive_error_string(a));
		if (m->len)
			assert_int_equal(archive_write_data(a, m->data, m->len), (la_ssize_t)m->len);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	archive_entry_free(e);
}

static void write_bytes(const char *rel, const void *data, size_t len)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* Copies the first @len bytes of @from into @to, both in root. */
static void truncated_copy(const char *from, const char *to, size_t len)
{
	char path[512];
	unsigned char *buf = malloc(len);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, from);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fread(buf, 1, len, f), len);
	fclose(f);
	write_bytes(to, buf, len);
	free(buf);
}

static int setup_group(void **state)
{
	char path[512];

	(void)state;
	snprintf(root, sizeof(root), "/tmp/mlfs-test-archive.XXXXXX");
	if (!mkdtemp(root))
		return -1;
	snprintf(cache, sizeof(cache), "%s/cache", root);
	big = malloc(BIG_SIZE);
	mid = malloc(MID_SIZE);
	fill_random(big, BIG_SIZE, 1);
	fill_random(mid, MID_SIZE, 2);
	members[2].data = big;
	members[3].data = mid;
	members[14].data = (const unsigned char *)"second";
	members[14].len = 6;
	for (int f = FMT_ZIP; f <= FMT_TBZ2; f++) {
		snprintf(path, sizeof(path), "%s/%s", root, fmt_file[f]);
		write_archive(path, (enum fmt)f);
	}
	kv[0] = (struct config_kv){ .key = "type", .value = "local", .line = 2 };
	kv[1] = (struct config_kv){ .key = "root", .value = root, .line = 3 };
	ds = (struct datastore_config){
		.file = "test.conf", .name = "scratch", .line = 1, .type = "local",
		.type_line = 2, .uid = -1, .gid = -1, .mode = -1, .timeout = -1,
		.retries = -1, .kv = kv, .n_kv = 2,
	};
	return backend_create(&local, &ds, 1);
}

static int teardown_group(void **state)
{
	char cmd[400];

	(void)state;
	backend_destroy(local);
	free(big);
	free(mid);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static struct backend *open_archive(const char *rel, const char *cache_dir)
{
	struct backend *be = NULL;

	assert_int_equal(be_archive_create(&be, local, rel, cache_dir, 0, "arch"), 0);
	assert_non_null(be);
	return be;
}

/* ---- listing ---- */

struct listing {
	char names[32][64];
	int n;
};

static int collect(void *payload, const char *name, const struct stat *st)
{
	struct listing *l = payload;

	assert_non_null(st);
	assert_true(l->n < 32);
	snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", name);
	return 0;
}

static int listed(const struct listing *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->names[i], name) == 0)
			return 1;
	return 0;
}

static void check_listing(struct backend *be, int tar)
{
	struct listing l = { .n = 0 };

	assert_int_equal(backend_readdir(be, "", collect, &l), 0);
	assert_int_equal(l.n, tar ? 7 : 6);
	assert_true(listed(&l, "a.txt") && listed(&l, "secret.txt") && listed(&l, "big.bin"));
	assert_true(listed(&l, "sub") && listed(&l, "explicit") && listed(&l, "c"));
	assert_int_equal(listed(&l, "dup.txt"), tar);
	/* zip slip: none of the escaping members, nor folders they would imply */
	assert_false(listed(&l, "evil") || listed(&l, "..") || listed(&l, "abs"));
	assert_false(listed(&l, "b") || listed(&l, "x") || listed(&l, "ctl\001name"));
	l.n = 0;
	assert_int_equal(backend_readdir(be, "sub", collect, &l), 0);
	assert_int_equal(l.n, 3);
	assert_true(listed(&l, "deep") && listed(&l, "empty") && listed(&l, "link"));
	l.n = 0;
	assert_int_equal(backend_readdir(be, "c/d", collect, &l), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.names[0], "e.txt");
	l.n = 0;
	assert_int_equal(backend_readdir(be, "explicit", collect, &l), 0);
	assert_int_equal(l.n, 0);
	assert_int_equal(backend_readdir(be, "nope", collect, &l), -ENOENT);
	assert_int_equal(backend_readdir(be, "a.txt", collect, &l), -ENOTDIR);
}

static void check_attrs(struct backend *be)
{
	struct stat st;

	assert_int_equal(backend_getattr(be, "", &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(backend_getattr(be, "a.txt", &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(st.st_size, sizeof(hello) - 1);
	assert_int_equal(st.st_mtime, 1700000000);
	assert_int_equal(backend_getattr(be, "secret.txt", &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(backend_getattr(be, "big.bin", &st), 0);
	assert_int_equal(st.st_size, BIG_SIZE);
	assert_int_equal(backend_getattr(be, "sub/empty", &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(backend_getattr(be, "explicit", &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0750);
	assert_int_equal(backend_getattr(be, "sub/deep", &st), 0);	/* implied */
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0755);
	assert_int_equal(backend_getattr(be, "c/d/e.txt", &st), 0);
	assert_int_equal(st.st_size, 3);
	assert_int_equal(backend_getattr(be, "nope", &st), -ENOENT);
	assert_int_equal(backend_getattr(be, "a.txt/under", &st), -ENOENT);
	assert_int_equal(backend_getattr(be, "b", &st), -ENOENT);
	assert_int_equal(backend_getattr(be, "evil", &st), -ENOENT);
	assert_int_equal(backend_getattr(be, "abs", &st), -ENOENT);
}

/* ---- reading ---- */

static void check_range(struct backend_file *f, const unsigned char *want, size_t size,
			off_t off, size_t len)
{
	unsigned char *buf = malloc(len + 1);
	size_t expect = (size_t)off >= size ? 0 : len < size - (size_t)off ? len
									 : size - (size_t)off;

	assert_non_null(buf);
	assert_int_equal(backend_pread(f, buf, len, off), (ssize_t)expect);
	if (expect)
		assert_memory_equal(buf, want + off, expect);
	free(buf);
}

static void check_file(struct backend *be, const char *path, const unsigned char *want,
		       size_t size)
{
	struct backend_file *f = NULL;
	struct stat st;

	assert_int_equal(backend_open(&f, be, path, O_RDONLY), 0);
	assert_int_equal(backend_fgetattr(f, &st), 0);
	assert_int_equal(st.st_size, size);
	if (size) {
		check_range(f, want, size, 0, size);
		check_range(f, want, size, (off_t)size / 3, size / 2 + 7);
		check_range(f, want, size, (off_t)size - 1, 100);
		check_range(f, want, size, 1, 1);
	}
	check_range(f, want, size, (off_t)size, 10);
	check_range(f, want, size, (off_t)size + 1000, 10);
	backend_release(f);
}

static void check_reads(struct backend *be, int tar)
{
	char buf[64];

	check_file(be, "a.txt", hello, sizeof(hello) - 1);
	check_file(be, "secret.txt", hello, 5);
	check_file(be, "big.bin", big, BIG_SIZE);
	check_file(be, "sub/deep/mid.bin", mid, MID_SIZE);
	check_file(be, "sub/empty", hello, 0);
	check_file(be, "c/d/e.txt", hello, 3);
	if (tar)	/* the last of two members of one name wins */
		check_file(be, "dup.txt", (const unsigned char *)"second", 6);
	assert_int_equal(backend_readlink(be, "sub/link", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "../a.txt");
	assert_int_equal(backend_readlink(be, "a.txt", buf, sizeof(buf)), -EINVAL);
}

static void check_symlink_and_refusals(struct backend *be)
{
	struct backend_file *f = NULL;
	struct backend_cred cred = { 0, 0 };
	struct stat st;

	assert_int_equal(backend_getattr(be, "sub/link", &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(st.st_size, strlen("../a.txt"));
	/* mlfs never follows a link itself: the kernel does, within the mount */
	assert_int_equal(backend_open(&f, be, "sub/link", O_RDONLY), -ELOOP);
	assert_int_equal(backend_open(&f, be, "sub", O_RDONLY), -EISDIR);
	assert_int_equal(backend_open(&f, be, "nope", O_RDONLY), -ENOENT);
	assert_int_equal(backend_open(&f, be, "evil", O_RDONLY), -ENOENT);
	assert_int_equal(backend_open(&f, be, "a.txt", O_WRONLY), -EROFS);
	assert_int_equal(backend_open(&f, be, "a.txt", O_RDWR), -EROFS);
	assert_int_equal(backend_create_file(&f, be, "new", O_WRONLY, 0644, &cred), -EROFS);
	assert_int_equal(backend_mkdir(be, "newdir", 0755, &cred), -EROFS);
	assert_int_equal(backend_unlink(be, "a.txt"), -EROFS);
	assert_int_equal(backend_rename(be, "a.txt", "z.txt", 0), -EROFS);
	assert_null(f);
	assert_int_equal(backend_open(&f, be, "a.txt", O_RDONLY), 0);
	assert_int_equal(backend_pwrite(f, "x", 1, 0), -EROFS);
	assert_int_equal(backend_cache_key(f, (char[64]){ 0 }, 64), -ENOTSUP);
	backend_release(f);
}

static void check_statfs(struct backend *be)
{
	struct statvfs sv;

	assert_int_equal(backend_statfs(be, "", &sv), 0);
	assert_true(sv.f_flag & ST_RDONLY);
	assert_true(sv.f_files > 0);
}

static void check_format(enum fmt fmt, const char *cache_dir)
{
	struct backend *be = open_archive(fmt_file[fmt], cache_dir);
	int tar = fmt != FMT_ZIP;

	check_listing(be, tar);
	check_attrs(be);
	check_reads(be, tar);
	check_symlink_and_refusals(be);
	check_statfs(be);
	backend_destroy(be);
}

static void test_archive_zip_stored_and_deflated_members(void **state)
{
	(void)state;
	check_format(FMT_ZIP, cache);
}

static void test_archive_tar(void **state)
{
	(void)state;
	check_format(FMT_TAR, cache);
}

static void test_archive_tar_gz(void **state)
{
	(void)state;
	check_format(FMT_TGZ, cache);
}

static void test_archive_tar_bz2(void **state)
{
	(void)state;
	check_format(FMT_TBZ2, cache);
}

static int count_private_folders(void)
{
	FILE *p = popen("ls -d /tmp/mlfs-archive-* 2>/dev/null | wc -l", "r");
	int n = -1;

	assert_non_null(p);
	assert_int_equal(fscanf(p, "%d", &n), 1);
	pclose(p);
	return n;
}

static void test_archive_without_cache_dir_uses_a_private_folder(void **state)
{
	int before = count_private_folders();

	(void)state;
	check_format(FMT_ZIP, NULL);
	check_format(FMT_TGZ, NULL);
	assert_int_equal(count_private_folders(), before);	/* removed by destroy */
}

/* 1 when @path of @be is served from an extracted local file, 0 when read in place. */
static int extracted(struct backend *be, const char *path)
{
	struct backend_file *f = NULL;
	int fd;

	assert_int_equal(backend_open(&f, be, path, O_RDONLY), 0);
	fd = backend_local_fd(f);
	backend_release(f);
	assert_true(fd >= 0 || fd == -ENOTSUP);
	return fd >= 0;
}

static void test_archive_zip_stored_and_plain_tar_members_are_read_in_place(void **state)
{
	struct backend *zip = open_archive("t.zip", cache);
	struct backend *tar = open_archive("t.tar", cache);
	struct backend *tgz = open_archive("t.tar.gz", cache);

	(void)state;
	assert_false(extracted(zip, "a.txt"));
	assert_false(extracted(zip, "big.bin"));
	assert_false(extracted(zip, "sub/empty"));
	assert_true(extracted(zip, "secret.txt"));		/* deflated */
	assert_true(extracted(zip, "sub/deep/mid.bin"));
	assert_false(extracted(tar, "big.bin"));
	assert_false(extracted(tar, "sub/deep/mid.bin"));
	assert_true(extracted(tgz, "big.bin"));
	backend_destroy(zip);
	backend_destroy(tar);
	backend_destroy(tgz);
}

/* Finds the one folder cache/archives/<key> (no temp folder left beside it; its stamp, key.used). */
static void key_dir(const char *cache_dir, char *out, size_t size)
{
	char name[128], line[128];
	char *cmd;
	FILE *p;

	assert_true(asprintf(&cmd, "ls -A '%s/archives' | grep -v '[.]used$'", cache_dir) > 0);
	p = popen(cmd, "r");
	free(cmd);
	assert_non_null(p);
	assert_non_null(fgets(name, sizeof(name), p));
	name[strcspn(name, "\n")] = '\0';
	assert_null(fgets(line, sizeof(line), p));	/* exactly one entry */
	pclose(p);
	assert_true((size_t)snprintf(out, size, "%s/archives/%s", cache_dir, name) < size);
}

static void test_archive_tar_gz_is_extracted_once(void **state)
{
	char cache2[400], dir[512], marker[600];
	struct backend *be;
	struct stat st1, st2;

	(void)state;
	snprintf(cache2, sizeof(cache2), "%s/cache-once", root);
	be = open_archive("t.tar.gz", cache2);
	check_file(be, "a.txt", hello, sizeof(hello) - 1);
	key_dir(cache2, dir, sizeof(dir));
	assert_int_equal(stat(dir, &st1), 0);
	snprintf(marker, sizeof(marker), "%s/marker", dir);
	assert_int_equal(close(open(marker, O_CREAT | O_WRONLY, 0600)), 0);
	backend_destroy(be);

	be = open_archive("t.tar.gz", cache2);	/* a second backend, as another process would */
	check_file(be, "big.bin", big, BIG_SIZE);
	check_file(be, "c/d/e.txt", hello, 3);
	assert_int_equal(stat(dir, &st2), 0);
	assert_int_equal(st1.st_ino, st2.st_ino);
	assert_int_equal(access(marker, F_OK), 0);	/* not extracted again */
	backend_destroy(be);
}

/* The files in folder @dir. */
static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += de->d_type == DT_REG;
	closedir(d);
	return n;
}

/* REL under root: a tar (gzipped when @gz) of "f", hard links to it, one to a link, one to nothing. */
static void write_links(const char *rel, bool gz)
{
	static const struct { const char *name, *link; } ents[] = {
		{ "f", NULL }, { "d/l1", "f" }, { "l2", "d/l1" }, { "dangling", "nowhere" },
	};
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	if (gz)
		assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
		archive_entry_clear(e);
		archive_entry_set_pathname(e, ents[i].name);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, ents[i].link ? 0 : MID_SIZE);
		if (ents[i].link)
			archive_entry_set_hardlink(e, ents[i].link);
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
		if (!ents[i].link)
			assert_int_equal(archive_write_data(a, mid, MID_SIZE), MID_SIZE);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	archive_entry_free(e);
}

/*
 * A hard link member reads as the file it names, read in place (plain tar)
 * or extracted once (tar.gz), a link to a link too; one naming nothing is
 * not shown.
 */
static void test_archive_hard_links_read_as_their_file(void **state)
{
	char cache2[400], dir[512];
	struct backend *be;
	struct stat st;

	(void)state;
	write_links("links.tar", false);
	write_links("links.tar.gz", true);
	be = open_archive("links.tar", cache);
	check_file(be, "d/l1", mid, MID_SIZE);
	check_file(be, "l2", mid, MID_SIZE);
	assert_int_equal(backend_getattr(be, "dangling", &st), -ENOENT);
	backend_destroy(be);
	snprintf(cache2, sizeof(cache2), "%s/cache-links", root);
	be = open_archive("links.tar.gz", cache2);
	check_file(be, "l2", mid, MID_SIZE);
	check_file(be, "f", mid, MID_SIZE);
	check_file(be, "d/l1", mid, MID_SIZE);
	assert_int_equal(backend_getattr(be, "dangling", &st), -ENOENT);
	key_dir(cache2, dir, sizeof(dir));
	assert_int_equal(count_files(dir), 1);	/* the bytes extracted once */
	backend_destroy(be);
}

/* dead_tmp CACHE NAME PATH SIZE: into PATH, a temporary folder of cache/archives nothing changed for 25 hours. */
static void dead_tmp(const char *cache_dir, const char *name, char *path, size_t size)
{
	snprintf(path, size, "%s/archives/%s.tmp-dead", cache_dir, name);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(utimensat(AT_FDCWD, path, (struct timespec[]){ { .tv_sec = 1000 },
			 { .tv_sec = time(NULL) - 25 * 3600 } }, 0), 0);
}

/*
 * archive_cache_size: an extraction a backend reads stays over the size; once
 * none reads it, the next extraction removes it, and it is extracted again
 * when read again.
 */
static void test_archive_extractions_unread_are_evicted(void **state)
{
	char cache3[400], tgz_dir[512], used[600], marker[600];
	struct backend *tgz, *zip;
	struct backend_file *f = NULL;
	struct stat st;

	(void)state;
	snprintf(cache3, sizeof(cache3), "%s/cache-evict", root);
	assert_int_equal(be_archive_create(&tgz, local, "t.tar.gz", cache3, 1, "tgz"), 0);
	check_file(tgz, "a.txt", hello, sizeof(hello) - 1);
	key_dir(cache3, tgz_dir, sizeof(tgz_dir));
	assert_int_equal(be_archive_create(&zip, local, "t.zip", cache3, 1, "zip"), 0);
	check_file(zip, "sub/deep/mid.bin", mid, MID_SIZE);	/* an extraction: a pass */
	assert_int_equal(stat(tgz_dir, &st), 0);		/* read by tgz: kept */
	check_file(tgz, "big.bin", big, BIG_SIZE);

	backend_destroy(tgz);
	/* what dead extractions left: a day untouched goes at the next pass, a fresh one stays */
	dead_tmp(cache3, "0123456789abcdef", marker, sizeof(marker));
	snprintf(used, sizeof(used), "%s/archives/%s.tmp-live01", cache3, "0123456789abcdef");
	assert_int_equal(mkdir(used, 0700), 0);
	check_file(zip, "secret.txt", hello, 5);		/* the next extraction's pass */
	assert_int_equal(access(used, F_OK), 0);
	assert_int_equal(access(marker, F_OK), -1);
	assert_int_equal(stat(tgz_dir, &st), -1);		/* ... removed it */
	snprintf(used, sizeof(used), "%s.used", tgz_dir);
	assert_int_equal(access(used, F_OK), -1);		/* and its stamp */
	check_file(zip, "sub/deep/mid.bin", mid, MID_SIZE);	/* zip's, read, stays */

	assert_int_equal(be_archive_create(&tgz, local, "t.tar.gz", cache3, 1, "tgz"), 0);
	check_file(tgz, "big.bin", big, BIG_SIZE);		/* extracted again */
	assert_int_equal(stat(tgz_dir, &st), 0);
	backend_destroy(tgz);

	/* a stamp that cannot be made: the member's open fails, named, and extracts nothing */
	snprintf(used, sizeof(used), "%s.used", tgz_dir);
	assert_int_equal(unlink(used), 0);
	assert_int_equal(mkdir(used, 0700), 0);
	snprintf(marker, sizeof(marker), "rm -rf '%s'", tgz_dir);
	assert_int_equal(system(marker), 0);
	assert_int_equal(be_archive_create(&tgz, local, "t.tar.gz", cache3, 1, "tgz"), 0);
	assert_int_equal(backend_open(&f, tgz, "big.bin", O_RDONLY), -EISDIR);
	assert_int_equal(stat(tgz_dir, &st), -1);
	backend_destroy(tgz);
	backend_destroy(zip);
}

/*
 * A zip's members are extracted one by one: the pass over cache_dir/archives
 * comes at the first, then once a sixteenth of archive_cache_size more is
 * extracted, not after each (seen by what a pass sweeps).
 */
static void test_archive_zip_members_do_not_each_make_a_pass(void **state)
{
	char cache5[400], first[600], second[600];
	struct backend *zip;

	(void)state;
	snprintf(cache5, sizeof(cache5), "%s/cache-passes", root);
	assert_int_equal(be_archive_create(&zip, local, "t.zip", cache5, 1ull << 30, "zip"), 0);
	check_file(zip, "a.txt", hello, sizeof(hello) - 1);	/* stored: read in place */
	snprintf(first, sizeof(first), "mkdir -p '%s/archives'", cache5);
	assert_int_equal(system(first), 0);
	dead_tmp(cache5, "one", first, sizeof(first));
	check_file(zip, "sub/deep/mid.bin", mid, MID_SIZE);	/* the first extraction: a pass */
	assert_int_equal(access(first, F_OK), -1);
	dead_tmp(cache5, "two", second, sizeof(second));
	check_file(zip, "secret.txt", hello, 5);		/* 5 bytes more: none */
	assert_int_equal(access(second, F_OK), 0);
	backend_destroy(zip);
}

static void test_archive_corrupt_archives_fail_cleanly(void **state)
{
	struct backend *be = NULL;
	unsigned char junk[4096];
	struct stat st;
	char path[512];

	(void)state;
	fill_random(junk, sizeof(junk), 3);
	write_bytes("junk.zip", junk, sizeof(junk));
	write_bytes("empty.tar", "", 0);
	snprintf(path, sizeof(path), "%s/t.tar.gz", root);
	assert_int_equal(stat(path, &st), 0);
	truncated_copy("t.tar.gz", "half.tar.gz", (size_t)st.st_size / 2);
	truncated_copy("t.tar", "half.tar", BIG_SIZE / 2);
	snprintf(path, sizeof(path), "%s/t.zip", root);
	assert_int_equal(stat(path, &st), 0);
	truncated_copy("t.zip", "half.zip", (size_t)st.st_size - 100);	/* central directory cut */
	assert_int_equal(be_archive_create(&be, local, "junk.zip", cache, 0, "j"), -EINVAL);
	assert_int_equal(be_archive_create(&be, local, "empty.tar", cache, 0, "j"), -EINVAL);
	assert_int_equal(be_archive_create(&be, local, "half.tar.gz", cache, 0, "j"), -EINVAL);
	assert_int_equal(be_archive_create(&be, local, "half.tar", cache, 0, "j"), -EINVAL);
	assert_int_equal(be_archive_create(&be, local, "half.zip", cache, 0, "j"), -EINVAL);
	assert_int_equal(be_archive_create(&be, local, "missing.zip", cache, 0, "j"), -ENOENT);
	assert_int_equal(be_archive_create(&be, local, "sub-missing/x.tar", cache, 0, "j"), -ENOENT);
	assert_null(be);
}

/* ---- threads ---- */

struct reader_arg {
	struct backend *be;
	const char *path;
	const unsigned char *want;
	size_t size;
	int seed;
	int failures;
};

static void *reader(void *p)
{
	struct reader_arg *a = p;
	unsigned char buf[70000];

	for (int i = 0; i < 40; i++) {
		struct backend_file *f = NULL;
		size_t off = ((size_t)(a->seed * 7919 + i * 104729) * 613) % a->size;
		size_t len = sizeof(buf) < a->size - off ? sizeof(buf) : a->size - off;

		if (backend_open(&f, a->be, a->path, O_RDONLY) < 0) {
			a->failures++;
			continue;
		}
		if (backend_pread(f, buf, len, (off_t)off) != (ssize_t)len ||
		    memcmp(buf, a->want + off, len) != 0)
			a->failures++;
		backend_release(f);
	}
	return NULL;
}

static void read_in_threads(struct backend *be)
{
	struct reader_arg args[6] = {
		{ be, "big.bin", NULL, BIG_SIZE, 1, 0 },
		{ be, "big.bin", NULL, BIG_SIZE, 2, 0 },
		{ be, "sub/deep/mid.bin", NULL, MID_SIZE, 3, 0 },
		{ be, "sub/deep/mid.bin", NULL, MID_SIZE, 4, 0 },
		{ be, "a.txt", hello, sizeof(hello) - 1, 5, 0 },
		{ be, "secret.txt", hello, 5, 6, 0 },
	};
	pthread_t t[6];

	for (int i = 0; i < 6; i++) {
		if (!args[i].want)
			args[i].want = args[i].size == BIG_SIZE ? big : mid;
		assert_int_equal(pthread_create(&t[i], NULL, reader, &args[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(args[i].failures, 0);
	}
}

static void test_archive_threads_read_at_once(void **state)
{
	char fresh[400];

	(void)state;
	for (int f = FMT_ZIP; f <= FMT_TBZ2; f++) {
		/* a fresh cache each time, so first opens race on the extraction */
		snprintf(fresh, sizeof(fresh), "%s/cache-threads-%d", root, f);
		struct backend *be = open_archive(fmt_file[f], fresh);

		read_in_threads(be);
		backend_destroy(be);
	}
}

static void test_archive_is_not_a_datastore_type(void **state)
{
	struct backend *be = NULL;
	struct datastore_config cfg = { .name = "x", .type = "archive" };

	(void)state;
	assert_int_equal(be_archive_ops.create(&be, &cfg), -EINVAL);
	assert_int_equal(be_archive_ops.version, BACKEND_OPS_VERSION);
	assert_false(be_archive_ops.caps & BE_CAP_WRITE);
}

/* The one mapping of a libarchive failure: the system's errno, else the caller's name for it. */
static void test_archive_errno_mapping(void **state)
{
	struct archive *a = archive_read_new();

	(void)state;
	assert_non_null(a);
	archive_set_error(a, ENOSPC, "write failed");
	assert_int_equal(mlfs_archive_errno(a, -EIO), -ENOSPC);
	archive_set_error(a, ENOMEM, "no memory");
	assert_int_equal(mlfs_archive_errno(a, -EINVAL), -ENOMEM);
	archive_set_error(a, EILSEQ, "unrecognized format");	/* ARCHIVE_ERRNO_FILE_FORMAT */
	assert_int_equal(mlfs_archive_errno(a, -EINVAL), -EINVAL);
	archive_set_error(a, -1, "misc");			/* ARCHIVE_ERRNO_MISC */
	assert_int_equal(mlfs_archive_errno(a, -EIO), -EIO);
	archive_read_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_archive_errno_mapping),
		cmocka_unit_test(test_archive_zip_stored_and_deflated_members),
		cmocka_unit_test(test_archive_tar),
		cmocka_unit_test(test_archive_tar_gz),
		cmocka_unit_test(test_archive_tar_bz2),
		cmocka_unit_test(test_archive_without_cache_dir_uses_a_private_folder),
		cmocka_unit_test(test_archive_zip_stored_and_plain_tar_members_are_read_in_place),
		cmocka_unit_test(test_archive_tar_gz_is_extracted_once),
		cmocka_unit_test(test_archive_hard_links_read_as_their_file),
		cmocka_unit_test(test_archive_extractions_unread_are_evicted),
		cmocka_unit_test(test_archive_zip_members_do_not_each_make_a_pass),
		cmocka_unit_test(test_archive_corrupt_archives_fail_cleanly),
		cmocka_unit_test(test_archive_threads_read_at_once),
		cmocka_unit_test(test_archive_is_not_a_datastore_type),
	};

	return cmocka_run_group_tests_name("archive", tests, setup_group, teardown_group);
}
