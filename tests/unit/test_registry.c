/*
 * test_registry.c - the backend registry and the wrappers fs/ calls,
 * driven through a fake backend registered behind the real contract; the
 * executor registry and the wrappers the scheduler calls, through the fake
 * executors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "backend.h"
#include "be_fake.h"
#include "config.h"
#include "exec.h"
#include "exec_fake.h"
#include "exec_fake_cluster.h"

static int setup_group(void **state)
{
	(void)state;
	if (exec_register(&exec_fake_ops) < 0 || exec_register(&exec_fake_cluster_ops) < 0)
		return -1;
	return backend_register(&be_fake_ops);
}

static void test_registry_knows_every_scheme_of_the_design(void **state)
{
	const char *want[] = { "local", "nfs", "smb", "s3", "gcs", "azure", "http", "ftp",
			       "git", "archive" };
	const char *const *names = backend_schemes();
	size_t n = 0;

	(void)state;
	for (; names[n]; n++)
		assert_string_equal(names[n], want[n]);
	assert_int_equal(n, 10);
}

static void test_registry_tells_not_compiled_in_from_unknown(void **state)
{
	const struct backend_ops *ops = NULL;

	(void)state;
	assert_int_equal(backend_lookup(&ops, "local"), 0);
	assert_string_equal(ops->scheme, "local");
	assert_int_equal(backend_lookup(&ops, "archive"), 0);	/* always built */
	assert_int_equal(backend_lookup(&ops, "sftp"), -ENOENT);
#ifdef MLFS_WITH_CURL
	/* gcs is the s3 backend with GCS's conventions (be_s3_dialect) */
	assert_int_equal(backend_lookup(&ops, "gcs"), 0);
	assert_string_equal(ops->scheme, "s3");
#else
	assert_int_equal(backend_lookup(&ops, "gcs"), -ENOTSUP);
#endif
	assert_int_equal(backend_lookup(&ops, "fake"), 0);
	assert_ptr_equal(ops, &be_fake_ops);
}

static void test_registry_checks_the_ops_version_once(void **state)
{
	struct backend_ops old = be_fake_ops;

	(void)state;
	old.version = BACKEND_OPS_VERSION + 1;
	old.scheme = "fake-v2";
	assert_int_equal(backend_register(&old), -EINVAL);
	old.version = 0;
	assert_int_equal(backend_register(&old), -EINVAL);
	assert_int_equal(backend_register(&be_fake_ops), -EEXIST);
	old = be_fake_ops;
	old.scheme = "local";
	assert_int_equal(backend_register(&old), -EEXIST);
}

/* A version-1 table ends before cache_key: it registers, and is never asked for one. */
static void test_registry_accepts_version_1_ops_without_cache_key(void **state)
{
	static struct backend_ops v1;
	struct backend be = { .ops = &v1 };
	struct backend_file f = { .be = &be };
	char key[64];

	(void)state;
	v1 = be_fake_ops;
	v1.version = 1;
	v1.scheme = "fake-v1";
	v1.cache_key = (int (*)(struct backend_file *, char *, size_t))abort;
	assert_int_equal(backend_register(&v1), 0);
	assert_int_equal(backend_cache_key(&f, key, sizeof(key)), -ENOTSUP);
}

static struct mlfs_config *parse(const char *text, struct diag *d)
{
	struct mlfs_config *cfg = NULL;

	diag_init(d);
	assert_int_equal(config_parse(&cfg, "reg.conf", text, strlen(text), backend_config_forms(), d), 0);
	return cfg;
}

static void test_registry_reports_types_keys_and_sources_with_lines(void **state)
{
	const char *text =
		"[datastore lab]\n"			/* 1 */
		"type = archive\n"			/* 2 */
		"; a source kind, not a datastore\n"	/* 3 */
		"[datastore odd]\n"			/* 4 */
		"type = sftp\n"				/* 5 */
		"[datastore here]\n"			/* 6 */
		"type = local\n"			/* 7 */
		"root = /tmp\n"				/* 8 */
		"rooot = /tmp\n"			/* 9 */
		"[dataset remote]\n"			/* 10 */
		"source = https://host/data.tar\n"	/* 11 */
		"[dataset packed]\n"			/* 12 */
		"source = here:/mnist.tar.gz\n";	/* 13 */
	struct diag d;
	struct mlfs_config *cfg = parse(text, &d);
#ifdef MLFS_WITH_CURL
	size_t i = 0;
#else
	size_t i = 1;	/* the https:// source: not compiled in */
#endif

	(void)state;
	assert_int_equal(backend_check_config(cfg, &d), -EINVAL);
	assert_int_equal(d.n, i + 4);
	assert_string_equal(d.msgs[0], "reg.conf:2: [datastore lab] type: archive is not a datastore "
			    "type: name an archive as a source (DATASTORE:/path/x.zip)");
	assert_string_equal(d.msgs[1], "reg.conf:5: [datastore odd] type: unknown type 'sftp' "
			    "(known: local, nfs, smb, s3, gcs, azure, http, ftp, git)");
	assert_string_equal(d.msgs[2], "reg.conf:9: [datastore here]: unknown key 'rooot' for type "
			    "local (did you mean 'root'?)");
	/* An archive at a URL is fine: its folder is the datastore, the archive a path in it. */
#ifndef MLFS_WITH_CURL
	assert_string_equal(d.msgs[3], "reg.conf:11: [dataset remote] source: http backend not "
			    "compiled in");
#endif
	assert_string_equal(d.msgs[3 + i], "reg.conf:13: [dataset packed] source: "
			    "here:/mnist.tar.gz: No such file or directory");
	config_free(cfg);
	diag_free(&d);
}

/*
 * nfs, smb, s3 and http, git are build options (MLFS_WITH_NFS, MLFS_WITH_SMB,
 * MLFS_WITH_CURL, MLFS_WITH_GIT): a build that left one out knows its name and keys, and a datastore of that type is
 * told it is not compiled in, never that the type is unknown.  The build
 * matrix (scripts/build_matrix.sh) runs this in a build without both.
 */
static void test_registry_optional_backends_as_built(void **state)
{
	const char *text =
		"[datastore lab]\n"			/* 1 */
		"type = nfs\n"				/* 2 */
		"address = 127.0.0.1\n"			/* 3 */
		"export = /export\n"			/* 4 */
		"[datastore share]\n"			/* 5 */
		"type = smb\n"				/* 6 */
		"address = 127.0.0.1\n"			/* 7 */
		"share = data\n"			/* 8 */
		"password = x\n"			/* 9 */
		"[model m]\n"				/* 10 */
		"source = nfs://127.0.0.1/export/m\n"	/* 11 */
		"[dataset s]\n"				/* 12 */
		"source = smb://127.0.0.1/data/s\n"	/* 13 */
		"[model g]\n"				/* 14 */
		"source = https://h/r.git#v1\n";	/* 15 */
	const struct backend_ops *ops = NULL;
	struct diag d;
	struct mlfs_config *cfg = parse(text, &d);
	size_t i = 0;

	(void)state;
#ifdef MLFS_WITH_NFS
	assert_int_equal(backend_lookup(&ops, "nfs"), 0);
#else
	assert_int_equal(backend_lookup(&ops, "nfs"), -ENOTSUP);
#endif
#ifdef MLFS_WITH_SMB
	assert_int_equal(backend_lookup(&ops, "smb"), 0);
#else
	assert_int_equal(backend_lookup(&ops, "smb"), -ENOTSUP);
#endif
#ifdef MLFS_WITH_CURL
	assert_int_equal(backend_lookup(&ops, "s3"), 0);
	assert_int_equal(backend_lookup(&ops, "http"), 0);
#else
	assert_int_equal(backend_lookup(&ops, "s3"), -ENOTSUP);
	assert_int_equal(backend_lookup(&ops, "http"), -ENOTSUP);
#endif
#ifdef MLFS_WITH_GIT
	assert_int_equal(backend_lookup(&ops, "git"), 0);
#else
	assert_int_equal(backend_lookup(&ops, "git"), -ENOTSUP);
#endif
	backend_check_config(cfg, &d);
#ifndef MLFS_WITH_NFS
	assert_true(i < d.n);
	assert_string_equal(d.msgs[i++], "reg.conf:2: [datastore lab] type: nfs backend not compiled in");
#endif
#ifndef MLFS_WITH_SMB
	assert_true(i < d.n);
	assert_string_equal(d.msgs[i++], "reg.conf:6: [datastore share] type: smb backend not compiled in");
#endif
	/* a URL of its scheme too: the form is known without the code */
#ifndef MLFS_WITH_NFS
	assert_true(i < d.n);
	assert_string_equal(d.msgs[i++], "reg.conf:11: [model m] source: nfs backend not compiled in");
#endif
#ifndef MLFS_WITH_SMB
	assert_true(i < d.n);
	assert_string_equal(d.msgs[i++], "reg.conf:13: [dataset s] source: smb backend not compiled in");
#endif
#ifndef MLFS_WITH_GIT
	assert_true(i < d.n);
	assert_string_equal(d.msgs[i++], "reg.conf:15: [model g] source: git backend not compiled in");
#endif
	assert_int_equal(d.n, i);
	/* an https:// URL of a repository (".git") is git's, never http's */
	assert_string_equal(config_find_datastore(cfg, "model:g")->type, "git");
	/* either way the URL made a datastore of the form's type, borrowing the configured one */
	assert_string_equal(config_find_datastore(cfg, "model:m")->type, "nfs");
	assert_string_equal(config_get(config_find_datastore(cfg, "model:m"), "root", NULL), "/m");
	assert_string_equal(config_get(config_find_datastore(cfg, "dataset:s"), "password", NULL),
			    "x");
	config_free(cfg);
	diag_free(&d);
}

/* Makes the scratch root of a local datastore with the folders @dirs in it. */
static void make_root(char *root, const char *const *dirs)
{
	char path[600];

	assert_non_null(mkdtemp(root));
	for (; *dirs; dirs++) {
		snprintf(path, sizeof(path), "%s/%s", root, *dirs);
		assert_int_equal(mkdir(path, 0755), 0);
	}
}

static void remove_root(const char *root)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

static void test_registry_accepts_a_good_local_config(void **state)
{
	static const char *const dirs[] = { "models", "models/m", NULL };
	char root[] = "/tmp/mlfs-test-reg.XXXXXX";
	char text[512];
	struct diag d;
	struct mlfs_config *cfg;

	(void)state;
	make_root(root, dirs);
	snprintf(text, sizeof(text), "[datastore t]\ntype = local\nroot = %s\n"
		 "[model m]\nsource = t:/models/m\n", root);
	cfg = parse(text, &d);
	assert_int_equal(backend_check_config(cfg, &d), 0);
	assert_int_equal(d.n, 0);
	config_free(cfg);
	diag_free(&d);
	remove_root(root);
}

static void test_registry_reports_a_local_source_that_is_missing_or_behind_a_symlink(void **state)
{
	static const char *const dirs[] = { "real", NULL };
	char root[] = "/tmp/mlfs-test-reg.XXXXXX";
	char text[512], path[600];
	struct diag d;
	struct mlfs_config *cfg;

	(void)state;
	make_root(root, dirs);
	snprintf(path, sizeof(path), "%s/link", root);
	assert_int_equal(symlink("real", path), 0);
	snprintf(text, sizeof(text), "[datastore t]\ntype = local\nroot = %s\n"
		 "[dataset gone]\nsource = t:/nowhere\n"
		 "[dataset linked]\nsource = t:/link/x\n", root);
	cfg = parse(text, &d);
	assert_int_equal(backend_check_config(cfg, &d), -EINVAL);
	assert_int_equal(d.n, 2);
	assert_string_equal(d.msgs[0], "reg.conf:5: [dataset gone] source: t:/nowhere: "
			    "No such file or directory");
	assert_string_equal(d.msgs[1], "reg.conf:7: [dataset linked] source: t:/link/x: "
			    "a symlink on the way (never followed)");
	config_free(cfg);
	diag_free(&d);
	remove_root(root);
}

static struct backend *make_fake(const char *type)
{
	struct config_kv kv = { .key = "type", .value = (char *)type, .line = 2 };
	struct datastore_config ds = {
		.file = "x.conf", .name = "f", .type = (char *)type, .uid = -1, .gid = -1,
		.mode = -1, .kv = &kv, .n_kv = 1,
	};
	struct backend *be = NULL;

	assert_int_equal(backend_create(&be, &ds, 3), 0);
	assert_string_equal(be->name, "f");
	assert_int_equal(be->index, 3);
	return be;
}

static void test_wrappers_count_calls_and_errors(void **state)
{
	struct backend *be = make_fake("fake");
	struct backend_file *f;
	struct stat st;
	char buf[8];

	(void)state;
	assert_int_equal(be_fake_add(be, "x", "12345"), 0);
	assert_int_equal(backend_getattr(be, "x", &st), 0);
	assert_int_equal(backend_getattr(be, "missing", &st), -ENOENT);
	assert_int_equal(be_fake_calls(be, FAKE_GETATTR), 2);
	assert_int_equal(be->stats.meta_ops, 2);
	assert_int_equal(be->stats.requests, 2);	/* no server: each call reached its folder */
	assert_int_equal(be->stats.errors, 0);	/* ENOENT is an answer, not an error */
	be_fake_fail_next(be, FAKE_GETATTR, -EIO);
	assert_int_equal(backend_getattr(be, "x", &st), -EIO);
	assert_int_equal(be->stats.errors, 1);
	assert_int_equal(backend_open(&f, be, "x", O_RDONLY), 0);
	assert_int_equal(backend_pread(f, buf, sizeof(buf), 0), 5);
	be_fake_fail_next(be, FAKE_PREAD, -ETIMEDOUT);
	assert_int_equal(backend_pread(f, buf, sizeof(buf), 0), -ETIMEDOUT);
	assert_int_equal(be->stats.bytes_read, 5);
	assert_int_equal(be->stats.errors, 2);
	backend_release(f);
	backend_destroy(be);
}

static void test_wrappers_answer_for_missing_optional_methods(void **state)
{
	struct backend *be = make_fake("fake");
	struct backend_cred cred = { 0 };
	struct backend_file *f;
	char buf[8];

	(void)state;
	assert_int_equal(be_fake_add(be, "x", "abc"), 0);
	assert_int_equal(backend_open(&f, be, "x", O_RDWR), 0);
	assert_int_equal(backend_pwrite(f, "z", 1, 0), -EROFS);
	assert_int_equal(backend_flush(f), 0);
	assert_int_equal(backend_fsync(f, 0), 0);
	backend_release(f);
	/* writable, without links (as s3, azure): EPERM, not EROFS */
	assert_int_equal(backend_symlink(be, "t", "l", &cred), -EPERM);
	assert_int_equal(backend_link(be, "x", "l"), -EPERM);
	assert_int_equal(backend_readlink(be, "x", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(backend_create_file(&f, be, "y", O_RDWR, 0644, &cred), -EROFS);
	backend_destroy(be);
}

static void test_wrappers_refuse_writes_to_a_read_only_backend(void **state)
{
	static struct backend_ops ro;
	struct backend_file *f = NULL;
	struct backend *be;

	(void)state;
	ro = be_fake_ops;
	ro.scheme = "fake-ro";
	ro.caps = 0;
	assert_int_equal(backend_register(&ro), 0);
	be = make_fake("fake-ro");
	assert_int_equal(be_fake_add(be, "x", "abc"), 0);
	assert_int_equal(backend_open(&f, be, "x", O_WRONLY), -EROFS);
	assert_int_equal(be_fake_calls(be, FAKE_OPEN), 0);
	assert_int_equal(backend_mknod(be, "p", S_IFIFO | 0644, 0, &(struct backend_cred){ 0 }),
			 -EPERM);	/* it holds no special file: the same answer as SMB's */
	assert_int_equal(be_fake_calls(be, FAKE_MKNOD), 0);
	assert_int_equal(backend_symlink(be, "t", "l", &(struct backend_cred){ 0 }), -EROFS);
	assert_int_equal(backend_link(be, "x", "l"), -EROFS);
	assert_int_equal(backend_open(&f, be, "x", O_RDONLY), 0);
	backend_release(f);
	backend_destroy(be);
}

/* Runs @fn with stderr (the log, in a test) going to a file; returns what it wrote. */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
	static char text[4096];
	FILE *tmp = tmpfile();
	int saved = dup(2);
	ssize_t n;

	assert_non_null(tmp);
	fflush(stderr);
	dup2(fileno(tmp), 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fileno(tmp), text, sizeof(text) - 1, 0);
	text[n > 0 ? n : 0] = '\0';
	fclose(tmp);
	return text;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void test_wrappers_make_special_files_through_mknod(void **state)
{
	struct backend *be = make_fake("fake");
	struct backend_cred cred = { 0 };
	struct stat st;

	(void)state;
	assert_int_equal(backend_mknod(be, "fifo", S_IFIFO | 0640, 0, &cred), 0);
	assert_int_equal(backend_mknod(be, "fifo", S_IFIFO | 0640, 0, &cred), -EEXIST);
	assert_int_equal(be_fake_calls(be, FAKE_MKNOD), 2);
	assert_int_equal(be->stats.meta_ops, 2);
	assert_int_equal(backend_getattr(be, "fifo", &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0640);
	backend_destroy(be);
}

/* Three special files asked of one datastore; the answers in ->ret (no assert while captured). */
struct mknod_tries {
	struct backend *be;
	int ret[3];
};

static void mknod_three_times(void *arg)
{
	struct mknod_tries *t = arg;
	struct backend_cred cred = { 0 };

	t->ret[0] = backend_mknod(t->be, "p", S_IFIFO | 0644, 0, &cred);
	t->ret[1] = backend_mknod(t->be, "s", S_IFSOCK | 0755, 0, &cred);
	t->ret[2] = backend_mknod(t->be, "d", S_IFCHR | 0600, 0x103, &cred);
}

/*
 * The log of three tries on a new datastore of type @scheme; with
 * @fail_first the backend refuses the first one's type (-ENOTSUP).
 */
static const char *mknod_log(const char *scheme, bool fail_first)
{
	struct mknod_tries t = { .be = make_fake(scheme) };
	const char *log;

	if (fail_first)
		be_fake_fail_next(t.be, FAKE_MKNOD, -ENOTSUP);
	log = capture_stderr(mknod_three_times, &t);
	assert_int_equal(t.ret[0], -EPERM);
	assert_int_equal(t.ret[1], fail_first ? 0 : -EPERM);
	assert_int_equal(t.ret[2], fail_first ? 0 : -EPERM);
	assert_int_equal(be_fake_calls(t.be, FAKE_MKNOD), fail_first ? 3 : 0);
	backend_destroy(t.be);
	return log;
}

static void test_wrappers_refuse_special_files_with_eperm_said_once(void **state)
{
	static struct backend_ops v3, none;
	const char *log;

	(void)state;
	v3 = be_fake_ops;	/* a version-3 table ends before mknod */
	v3.version = 3;
	v3.scheme = "fake-v3";
	none = be_fake_ops;	/* a version-4 table without it */
	none.mknod = NULL;
	none.scheme = "fake-nomknod";
	assert_int_equal(backend_register(&v3), 0);
	assert_int_equal(backend_register(&none), 0);
	log = mknod_log("fake-v3", false);
	assert_int_equal(count_lines(log), 1);
	assert_non_null(strstr(log, "datastore f (fake-v3): special files"));
	assert_non_null(strstr(log, "EPERM"));
	assert_int_equal(count_lines(mknod_log("fake-nomknod", false)), 1);
	/* a backend that cannot hold one type says -ENOTSUP for it: EPERM too */
	assert_int_equal(count_lines(mknod_log("fake", true)), 1);
}

/* What a backend learned, for the trusted trees: asked first, the server only without it. */
static int known_x(struct backend *be, const char *path, struct stat *st)
{
	(void)be;
	if (strcmp(path, "x") != 0)
		return -EAGAIN;
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFREG | 0644;
	st->st_size = 5;
	return 0;
}

static void test_getattr_trusted_asks_what_the_backend_knows_first(void **state)
{
	static struct backend_ops knows, v4;
	struct backend *be;
	struct stat st;

	(void)state;
	knows = be_fake_ops;
	knows.scheme = "fake-knows";
	knows.getattr_known = known_x;
	v4 = knows;	/* a version-4 table has no such member: not called */
	v4.version = 4;
	v4.scheme = "fake-knows-v4";
	assert_int_equal(backend_register(&knows), 0);
	assert_int_equal(backend_register(&v4), 0);
	be = make_fake("fake-knows");
	assert_int_equal(be_fake_add(be, "x", "12345"), 0);
	assert_int_equal(be_fake_add(be, "y", "1"), 0);
	assert_int_equal(backend_getattr_trusted(be, "x", &st), 0);
	assert_int_equal(st.st_size, 5);
	assert_int_equal(be_fake_calls(be, FAKE_GETATTR), 0);	/* known: nothing asked */
	assert_int_equal(be->stats.meta_ops, 1);
	assert_int_equal(be->stats.requests, 0);
	assert_int_equal(backend_getattr_trusted(be, "y", &st), 0);	/* unknown: asked */
	assert_int_equal(be_fake_calls(be, FAKE_GETATTR), 1);
	assert_int_equal(be->stats.meta_ops, 2);
	backend_destroy(be);
	be = make_fake("fake-knows-v4");
	assert_int_equal(be_fake_add(be, "x", "12345"), 0);
	assert_int_equal(backend_getattr_trusted(be, "x", &st), 0);
	assert_int_equal(be_fake_calls(be, FAKE_GETATTR), 1);
	backend_destroy(be);
}

/* ---- executors ---- */

static void test_executors_are_found_by_name(void **state)
{
	const char *const *names = exec_names();
	const struct exec_ops *ops = NULL;

	(void)state;
	assert_string_equal(names[0], "local");
	assert_string_equal(names[1], "slurm");
	assert_null(names[2]);		/* the built-in ones: fakes are not offered to users */
	assert_int_equal(exec_lookup(&ops, "local"), 0);
	assert_ptr_equal(ops, &exec_local_ops);
	assert_int_equal(exec_lookup(&ops, "slurm"), 0);
	assert_ptr_equal(ops, &exec_slurm_ops);
	assert_int_equal(exec_lookup(&ops, "fake-cluster"), 0);
	assert_ptr_equal(ops, &exec_fake_cluster_ops);
	assert_int_equal(exec_lookup(&ops, "kubernetes"), -ENOENT);
	assert_true(exec_builtin(&exec_local_ops));
	assert_true(exec_builtin(&exec_slurm_ops));
	assert_false(exec_builtin(&exec_fake_ops));
}

static void test_executors_are_checked_once_at_registration(void **state)
{
	struct exec_ops bad = exec_fake_ops;

	(void)state;
	bad.name = "bad";
	bad.version = 0;
	assert_int_equal(exec_register(&bad), -EINVAL);
	bad.version = EXEC_OPS_VERSION + 1;
	assert_int_equal(exec_register(&bad), -EINVAL);
	bad.version = EXEC_OPS_VERSION;
	bad.poll = NULL;
	assert_int_equal(exec_register(&bad), -EINVAL);
	bad = exec_fake_cluster_ops;
	bad.name = "half-cluster";
	bad.refresh = NULL;		/* the scheduler asks a cluster for all three */
	assert_int_equal(exec_register(&bad), -EINVAL);
	bad = exec_fake_ops;
	bad.name = "";
	assert_int_equal(exec_register(&bad), -EINVAL);
	assert_int_equal(exec_register(NULL), -EINVAL);
	/* the built-in tables pass the same check: the name is what is refused */
	assert_int_equal(exec_register(&exec_local_ops), -EEXIST);
	assert_int_equal(exec_register(&exec_slurm_ops), -EEXIST);
	assert_int_equal(exec_register(&exec_fake_ops), -EEXIST);
}

static void test_executor_wrappers_answer_for_a_version_1_table(void **state)
{
	/* a cluster's table declared as version 1: its version 2 methods are never called */
	static struct exec_ops old;
	struct executor ex = { .ops = &old };
	struct exec_run run = { .pidfd = -1 };
	char why[64] = "";

	(void)state;
	old = exec_fake_cluster_ops;
	old.version = 1;
	old.name = "old-cluster";
	assert_int_equal(exec_register(&old), 0);
	exec_fake_cluster_reset();
	assert_false(exec_is_cluster(&ex));
	assert_int_equal(exec_refresh(&ex), -1);
	assert_int_equal(exec_fits(&ex, NULL, 0, why, sizeof(why)), 1);
	assert_int_equal(exec_submit(&ex, NULL, 0, false, &run, why, sizeof(why)), -ENOTSUP);
	assert_int_equal(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_REFRESH), 0);
	assert_int_equal(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_FITS), 0);
	assert_int_equal(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_SUBMIT), 0);

	ex.ops = &exec_fake_cluster_ops;
	assert_true(exec_is_cluster(&ex));
	assert_int_equal(exec_refresh(&ex), EXEC_FAKE_CLUSTER_INTERVAL_MS);
	assert_int_equal(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_REFRESH), 1);
	exec_fake_cluster_reset();
}

static void test_executor_of_the_config_is_checked_with_its_file_and_line(void **state)
{
	struct diag d;
	struct mlfs_config *cfg = parse("[mlfs]\nstate_dir = /tmp/x\nexecutor = kubernetes\n", &d);
	struct executor *ex = NULL;

	(void)state;
	/* the config reader takes any name: the registry knows which exist */
	assert_string_equal(cfg->executor, "kubernetes");
	assert_int_equal(exec_check_config(cfg, &d), -EINVAL);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0], "reg.conf:3: [mlfs] executor: unknown executor 'kubernetes' "
			    "(use local or slurm)");
	assert_int_equal(exec_create(&ex, cfg), -ENOENT);
	diag_free(&d);
	config_free(cfg);

	cfg = parse("[mlfs]\nexecutor = slurm\n", &d);
	assert_int_equal(exec_check_config(cfg, &d), 0);
	config_free(cfg);
	cfg = parse("[mlfs]\nstate_dir = /tmp/x\n", &d);	/* local, unsaid */
	assert_int_equal(exec_check_config(cfg, &d), 0);
	assert_int_equal(d.n, 0);
	config_free(cfg);

	cfg = parse("[mlfs]\nexecutor = fake\n", &d);
	exec_fake_reset();
	assert_int_equal(exec_check_config(cfg, &d), 0);
	assert_int_equal(exec_create(&ex, cfg), 0);
	assert_ptr_equal(ex->ops, &exec_fake_ops);
	exec_destroy(ex);
	exec_destroy(NULL);
	assert_int_equal(exec_fake_calls(EXEC_FAKE_CREATE), 1);
	assert_int_equal(exec_fake_calls(EXEC_FAKE_DESTROY), 1);
	diag_free(&d);
	config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry_knows_every_scheme_of_the_design),
		cmocka_unit_test(test_registry_tells_not_compiled_in_from_unknown),
		cmocka_unit_test(test_registry_optional_backends_as_built),
		cmocka_unit_test(test_registry_checks_the_ops_version_once),
		cmocka_unit_test(test_registry_accepts_version_1_ops_without_cache_key),
		cmocka_unit_test(test_registry_reports_types_keys_and_sources_with_lines),
		cmocka_unit_test(test_registry_accepts_a_good_local_config),
		cmocka_unit_test(test_registry_reports_a_local_source_that_is_missing_or_behind_a_symlink),
		cmocka_unit_test(test_wrappers_count_calls_and_errors),
		cmocka_unit_test(test_wrappers_answer_for_missing_optional_methods),
		cmocka_unit_test(test_wrappers_refuse_writes_to_a_read_only_backend),
		cmocka_unit_test(test_wrappers_make_special_files_through_mknod),
		cmocka_unit_test(test_wrappers_refuse_special_files_with_eperm_said_once),
		cmocka_unit_test(test_getattr_trusted_asks_what_the_backend_knows_first),
		cmocka_unit_test(test_executors_are_found_by_name),
		cmocka_unit_test(test_executors_are_checked_once_at_registration),
		cmocka_unit_test(test_executor_wrappers_answer_for_a_version_1_table),
		cmocka_unit_test(test_executor_of_the_config_is_checked_with_its_file_and_line),
	};

	return cmocka_run_group_tests_name("registry", tests, setup_group, NULL);
}
