/*
 * test_git.c - the git backend's offline pieces: which sources name a
 * repository, how one splits into the URL libgit2 is given and its ref,
 * which refs git allows (the fuzzed input: a spec's "#REF"), the checks of
 * a datastore section, a git source borrowing a configured datastore's
 * credentials, Git LFS: a pointer's object and size, and the endpoint
 * git-lfs derives from a repository's URL; and cache_dir/git kept under its
 * size (be_git_evict.c) on real folders, locks and links.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "be_git.h"
#include "be_git_lfs.h"
#include "dir_cache.h"
#include "cfg_check.h"
#include "password.h"
#include "path.h"

static void check_split(const char *src, const char *url, const char *ref)
{
	char *u = NULL, *r = NULL;

	assert_int_equal(be_git_split(src, &u, &r), 0);
	assert_string_equal(u, url);
	assert_string_equal(r, ref);
	free(u);
	free(r);
}

static void check_refused(const char *src)
{
	char *u = (char *)"x", *r = (char *)"x";

	assert_int_equal(be_git_split(src, &u, &r), -EINVAL);
	assert_null(u);
	assert_null(r);
}

static void test_git_sources_split_into_url_and_ref(void **state)
{
	(void)state;
	check_split("https://github.com/a/b.git", "https://github.com/a/b.git", "");
	check_split("https://github.com/a/b.git#v1.2", "https://github.com/a/b.git", "v1.2");
	check_split("git+https://gitlab.example/a/b#feature/x", "https://gitlab.example/a/b",
		    "feature/x");
	check_split("GIT+HTTP://h:8080/r#0123456789abcdef0123456789abcdef01234567",
		    "HTTP://h:8080/r", "0123456789abcdef0123456789abcdef01234567");
	check_split("git://127.0.0.1:9418/r.git#main", "git://127.0.0.1:9418/r.git", "main");
	check_split("https://h/r.git/", "https://h/r.git/", "");
	/* not a repository by its form, or not a URL of a host */
	check_refused("https://h/file.tar.gz");
	check_refused("s3://b/r.git");
	check_refused("git+https://");
	check_refused("git:///r.git");
	assert_true(be_git_claims("https://h/r.git#x"));
	assert_true(be_git_claims("git+ssh://h/r"));
	assert_false(be_git_claims("https://h/r.github.io/"));
	assert_false(be_git_claims("ftp://h/r.git"));
}

static void test_git_refs_are_what_git_allows(void **state)
{
	static const char *const bad[] = {
		"", "a..b", "-x", "/x", "x/", "x.", "x.lock", "a b", "a~1", "a^", "a:b", "a?",
		"a*", "a[", "a\\b", "a@{1}", "a//b", "a\x01", "a\x7f",
	};
	char src[64];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(src, sizeof(src), "git://h/r.git#%s", bad[i]);
		check_refused(src);
	}
	check_split("git://h/r.git#release/2024.1-rc_2", "git://h/r.git", "release/2024.1-rc_2");
	assert_true(be_git_is_commit("0123456789abcdef0123456789abcdef01234567"));
	assert_false(be_git_is_commit("0123456789ABCDEF0123456789abcdef01234567"));
	assert_false(be_git_is_commit("0123456"));
}

static void test_git_lfs_pointers_are_told_from_files(void **state)
{
	static const char ptr[] = "version https://git-lfs.github.com/spec/v1\n"
		"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
		"size 12345\n";
	static const char other[] = "version https://git-lfs.github.com/spec/v1\nnot a pointer\n";
	char big[2048];

	(void)state;
	assert_true(be_git_is_lfs_pointer(ptr, sizeof(ptr) - 1));
	assert_false(be_git_is_lfs_pointer(ptr, 20));		/* cut short */
	assert_false(be_git_is_lfs_pointer(other, sizeof(other) - 1));
	assert_false(be_git_is_lfs_pointer("hello\n", 6));
	memset(big, ' ', sizeof(big));
	memcpy(big, ptr, sizeof(ptr) - 1);
	assert_false(be_git_is_lfs_pointer(big, sizeof(big)));	/* no pointer is 2 KiB */
}

static void test_git_lfs_pointers_name_an_object_and_a_size(void **state)
{
	static const char oid[] = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";
	char got[BE_GIT_LFS_OID_LEN + 1], text[512];
	int64_t size = -1;
	/* what git-lfs writes, and what a pointer may add (ext lines, sorted keys) */
	static const char *const good[] = {
		"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 12345\n",
		"version https://git-lfs.github.com/spec/v1\next-0-foo sha256:aa\noid sha256:%s\n"
		"size 12345\n",
	};
	static const char *const bad[] = {
		"version https://git-lfs.github.com/spec/v1\noid sha256:%s\n",	/* no size */
		"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 12x45\n",
		"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 12345",	/* no \n */
		"version https://git-lfs.github.com/spec/v1\noid sha256:%.63s\nsize 1\n",
		"version https://git-lfs.github.com/spec/v1\noid md5:%s\nsize 1\n",
		"version https://hawser.github.com/spec/v1\noid sha256:%s\nsize 1\n",
		"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 1234567890123456789\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(text, sizeof(text), good[i], oid);
		assert_int_equal(be_git_lfs_parse(text, strlen(text), got, &size), 0);
		assert_string_equal(got, oid);
		assert_int_equal(size, 12345);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), bad[i], oid);
		assert_int_equal(be_git_lfs_parse(text, strlen(text), got, &size), -EINVAL);
	}
	snprintf(text, sizeof(text), good[0], "4D7A214614AB2935C943F9E0FF69D22EADBB8F32B1258DAAA5E2CA"
		 "24D17E2393");
	assert_int_equal(be_git_lfs_parse(text, strlen(text), got, &size), -EINVAL);
}

static void check_endpoint(const char *remote, const char *want)
{
	char *got = be_git_lfs_endpoint(remote);

	if (!want) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void test_git_lfs_endpoints_are_derived_as_git_lfs_does(void **state)
{
	(void)state;
	check_endpoint("https://git-server.com/foo/bar", "https://git-server.com/foo/bar.git/info/lfs");
	check_endpoint("https://git-server.com/foo/bar.git",
		       "https://git-server.com/foo/bar.git/info/lfs");
	check_endpoint("https://huggingface.co/gpt2/", "https://huggingface.co/gpt2.git/info/lfs");
	check_endpoint("http://127.0.0.1:8080/git/r.git", "http://127.0.0.1:8080/git/r.git/info/lfs");
	/* git:// has no LFS of its own: git-lfs asks the same host over https */
	check_endpoint("git://127.0.0.1:9418/r.git", "https://127.0.0.1:9418/r.git/info/lfs");
	/* credentials in the URL are not part of the endpoint (they go as basic auth) */
	check_endpoint("https://oauth2:glpat-x@gitlab.example.org/team/r.git",
		       "https://gitlab.example.org/team/r.git/info/lfs");
	check_endpoint("HTTPS://Host/r", "https://Host/r.git/info/lfs");
	check_endpoint("ssh://git@host/r.git", NULL);
	check_endpoint("https://host", NULL);
	check_endpoint("no-scheme/r.git", NULL);
}

static void check_shown(const char *url, const char *want)
{
	char out[256];

	password_url_shown(out, sizeof(out), url);
	assert_string_equal(out, want);
}

/* The user info git and LFS take credentials from, and log lines leave out (password.c). */
static void test_git_urls_give_credentials_and_are_logged_without(void **state)
{
	const char *user;
	size_t len;

	(void)state;
	assert_true(password_url_userinfo("https://oauth2:tok@gitlab.example.org/t/r.git", &user,
					  &len));
	assert_int_equal(len, strlen("oauth2:tok"));
	assert_memory_equal(user, "oauth2:tok", len);
	assert_true(password_url_userinfo("git://me@h/r.git", &user, &len));
	assert_int_equal(len, 2);
	assert_false(password_url_userinfo("https://h/a@b/r.git", &user, &len));	/* in the path */
	assert_false(password_url_userinfo("https://h/r?x=a@b", &user, &len));	/* in the query */
	assert_false(password_url_userinfo("me:tok@h/r.git", &user, &len));	/* no scheme */
	check_shown("https://oauth2:tok@gitlab.example.org/t/r.git", "https://gitlab.example.org/t/r.git");
	check_shown("https://h/o?X-Amz-Signature=abc", "https://h/o");
	check_shown("https://u:p@h/o#frag", "https://h/o");
	check_shown("http://127.0.0.1:8080/git/r.git", "http://127.0.0.1:8080/git/r.git");
}

static void test_git_datastore_sections_are_checked_with_lines(void **state)
{
	static const char *const want[] = {
		"/etc/mlfs.conf:4: [datastore d] ref: given twice (url has #main)",
		NULL
	};
	static const char *const want2[] = {
		"/etc/mlfs.conf:1: [datastore d] url: missing (a repository: "
		"https://HOST/REPO.git, git://HOST/REPO.git)",
		"/etc/mlfs.conf:3: [datastore d] ref: 'x..y' is not a branch, tag or commit name "
		"git allows",
		NULL
	};
	static const char *const none[] = { NULL };

	(void)state;
	cfg_check_validate(&be_git_ops, "[datastore d]\ntype = git\nurl = https://h/r.git#main\n"
			   "ref = dev\n", want);
	cfg_check_validate(&be_git_ops, "[datastore d]\ntype = git\nref = x..y\n", want2);
	/* a URL without ".git" is a repository in a git datastore */
	cfg_check_validate(&be_git_ops, "[datastore d]\ntype = git\nurl = https://h/team/r\n"
			   "ref = v1\nusername = u\npassword = t\n", none);
}

static void test_git_source_borrows_its_repositorys_credentials(void **state)
{
	struct mlfs_config *cfg = cfg_check_load(
		"[datastore code]\ntype = git\nurl = https://git.lab/team/r.git\nusername = u\n"
		"password = t\n"
		"[model m]\nsource = https://git.lab/team/r.git#v2\n"
		"[model other]\nsource = git+https://git.lab/team/s#main\n");
	const struct datastore_config *ds = cfg_check_ds(cfg, "model:m");

	(void)state;
	assert_string_equal(ds->type, "git");
	assert_string_equal(config_get(ds, "url", NULL), "https://git.lab/team/r.git");
	assert_string_equal(config_get(ds, "ref", NULL), "v2");
	assert_string_equal(config_get(ds, "username", NULL), "u");
	ds = cfg_check_ds(cfg, "model:other");
	assert_string_equal(ds->type, "git");
	assert_string_equal(config_get(ds, "url", NULL), "https://git.lab/team/s");
	assert_null(config_get(ds, "username", NULL));
	config_free(cfg);
}

/* ---- cache_dir/git under git_cache_size ---- */

#define REPO_A	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define REPO_B	"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define OID_1	"1111111111111111111111111111111111111111"
#define OID_2	"2222222222222222222222222222222222222222"
#define OID_3	"3333333333333333333333333333333333333333"

static void put_file(const char *top, const char *name, size_t size)
{
	char *path = NULL, *data = calloc(1, size ? size : 1);
	int fd;

	assert_true(asprintf(&path, "%s/%s", top, name) > 0);
	memset(data, 'x', size);
	assert_int_equal(path_mkdirs(dirname(strdupa(path)), 0755), 0);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, size), (ssize_t)size);
	close(fd);
	free(data);
	free(path);
}

static bool there(const char *top, const char *name)
{
	char *path = NULL;
	bool ret;

	assert_true(asprintf(&path, "%s/%s", top, name) > 0);
	ret = access(path, F_OK) == 0;
	free(path);
	return ret;
}

/* Holds tree @name (dir_cache_hold), then dates its last use @when seconds after 1970. */
static int hold_at(const char *top, const char *name, time_t when, bool keep)
{
	struct timespec ts[2] = { { .tv_sec = when }, { .tv_sec = when } };
	char *path = NULL, *stamp = NULL;
	int fd;

	assert_true(asprintf(&path, "%s/%s", top, name) > 0);
	assert_true(asprintf(&stamp, "%s.used", path) > 0);
	fd = dir_cache_hold(path);
	assert_true(fd >= 0);
	assert_int_equal(utimensat(AT_FDCWD, stamp, ts, 0), 0);
	if (!keep) {
		close(fd);
		fd = -1;
	}
	free(path);
	free(stamp);
	return fd;
}

static void test_git_cache_keeps_what_is_read_and_evicts_the_oldest(void **state)
{
	char top[] = "/tmp/test_git_evict.XXXXXX", *path = NULL, *obj = NULL, *link_ = NULL;
	uint64_t all, now;
	int held, held2, lock;

	(void)state;
	assert_non_null(mkdtemp(top));
	/* A: tree 1 (Git LFS object linked in), tree 2; B: tree 3; 256 KiB files */
	put_file(top, REPO_A "/repo.git/objects/pack", 4096);
	put_file(top, REPO_A "/trees/" OID_1 "+lfs/weights.bin", 0);
	put_file(top, REPO_A "/trees/" OID_1 "+lfs/a.txt", 256 << 10);
	put_file(top, REPO_A "/lfs/" "cafe", 512 << 10);
	assert_true(asprintf(&obj, "%s/%s/lfs/cafe", top, REPO_A) > 0);
	assert_true(asprintf(&link_, "%s/%s/trees/%s+lfs/weights.bin", top, REPO_A, OID_1) > 0);
	assert_int_equal(unlink(link_), 0);
	assert_int_equal(link(obj, link_), 0);
	put_file(top, REPO_A "/trees/" OID_2 "/b.txt", 256 << 10);
	put_file(top, REPO_B "/repo.git/objects/pack", 4096);
	put_file(top, REPO_B "/trees/" OID_3 "/c.txt", 256 << 10);
	/* what crashes leave: a half-written tree and object, a half-removed repository */
	put_file(top, REPO_A "/trees/" OID_2 ".tmp.99999/x", 16);
	put_file(top, REPO_A "/lfs/beef.part", 16);
	put_file(top, ".gone." REPO_B ".99999/trees/x", 16);
	/* the oldest is read now; B's is next */
	held = hold_at(top, REPO_A "/trees/" OID_1 "+lfs", 1000, true);
	hold_at(top, REPO_B "/trees/" OID_3, 2000, false);
	hold_at(top, REPO_A "/trees/" OID_2, 3000, false);

	/* no limit, or under it: nothing goes; the LFS object counts once */
	all = be_git_evict(top, 0);
	assert_true(all >= (uint64_t)(256 + 512 + 256 + 256) << 10);
	assert_true(all < (uint64_t)(256 + 512 + 512 + 256 + 256) << 10);
	assert_int_equal(be_git_evict(top, all + 65536), all);
	assert_true(there(top, REPO_B "/trees/" OID_3));
	assert_false(there(top, ".gone." REPO_B ".99999"));	/* ... but that */

	/* a busy repository (a fetch holds its lock) is passed over: with tree 2 read too,
	 * nothing goes */
	assert_true(asprintf(&path, "%s/%s", top, REPO_B) > 0);
	lock = be_git_lock(path, false);
	assert_true(lock >= 0);
	assert_int_equal(be_git_lock(path, false), -EWOULDBLOCK);
	held2 = hold_at(top, REPO_A "/trees/" OID_2, 3000, true);
	assert_int_equal(be_git_evict(top, all - (128 << 10)), all);
	assert_true(there(top, REPO_B "/trees/" OID_3));
	close(lock);
	close(held2);
	free(path);
	/* ... and so is the oldest, read: B's tree goes, and B with its last tree */
	now = be_git_evict(top, all - (128 << 10));
	assert_true(there(top, REPO_A "/trees/" OID_1 "+lfs/weights.bin"));
	assert_false(there(top, REPO_B));
	assert_true(there(top, REPO_A "/trees/" OID_2));
	assert_true(now <= all - (128 << 10) && now + (256 << 10) <= all);
	assert_true(there(top, REPO_A "/lfs/beef.part"));	/* A was not touched */

	/* once no one reads it, the oldest goes, and its LFS object with it */
	close(held);
	now = be_git_evict(top, 600 << 10);
	assert_false(there(top, REPO_A "/trees/" OID_1 "+lfs"));
	assert_false(there(top, REPO_A "/trees/" OID_1 "+lfs.used"));
	assert_false(there(top, REPO_A "/lfs/cafe"));
	assert_false(there(top, REPO_A "/lfs/beef.part"));
	assert_false(there(top, REPO_A "/trees/" OID_2 ".tmp.99999"));
	assert_true(there(top, REPO_A "/trees/" OID_2 "/b.txt"));
	assert_true(there(top, REPO_A "/repo.git/objects/pack"));
	assert_true(now <= 600 << 10);

	/* a reader of tree 2 keeps it even over the limit: all of A stays */
	held = hold_at(top, REPO_A "/trees/" OID_2, 4000, true);
	assert_int_equal(be_git_evict(top, 1), now);
	assert_true(there(top, REPO_A "/trees/" OID_2 "/b.txt"));
	close(held);
	/* ... and without it, A goes with its last tree */
	assert_int_equal(be_git_evict(top, 1), 0);
	assert_false(there(top, REPO_A));
	/* an evictor's lock of a repository gone makes nothing */
	assert_true(asprintf(&path, "%s/%s", top, REPO_A) > 0);
	assert_int_equal(be_git_lock(path, false), -ENOENT);
	assert_false(there(top, REPO_A));
	free(path);
	path_remove_tree(top);
	free(obj);
	free(link_);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_git_sources_split_into_url_and_ref),
		cmocka_unit_test(test_git_refs_are_what_git_allows),
		cmocka_unit_test(test_git_lfs_pointers_are_told_from_files),
		cmocka_unit_test(test_git_lfs_pointers_name_an_object_and_a_size),
		cmocka_unit_test(test_git_lfs_endpoints_are_derived_as_git_lfs_does),
		cmocka_unit_test(test_git_urls_give_credentials_and_are_logged_without),
		cmocka_unit_test(test_git_datastore_sections_are_checked_with_lines),
		cmocka_unit_test(test_git_source_borrows_its_repositorys_credentials),
		cmocka_unit_test(test_git_cache_keeps_what_is_read_and_evicts_the_oldest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
