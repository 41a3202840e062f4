/*
 * be_git.c - a datastore that is one commit of a git repository (DESIGN
 * §8), fetched with libgit2 (never the git program) into the shared cache
 * and shown read-only.
 *
 * Where it lives: cache_dir/git/<sha256 of the URL>/ holds a bare
 * repository (repo.git, kept across jobs: the next fetch of the same
 * repository brings only what is new) and one folder per commit written
 * out (trees/<commit>, made under a temporary name and renamed into place,
 * so a reader never sees half of one).  A fetch and the writing out of a
 * tree happen under flock(LOCK_EX) of the folder's `lock` file, so two
 * datastores of one repository, in one process or two, take turns: the
 * second finds what the first brought and writes nothing.
 * The folder is kept under git_cache_size by be_git_evict.c: the tree a
 * datastore reads is held (dir_cache_hold) for as long as the datastore lives.
 *
 * What a ref means: a full commit id is used as it is, and when its tree
 * is written out already nothing is asked of the server at all; a branch or
 * tag (or none: the server's HEAD) is resolved by listing the server's refs
 * (one round trip, no objects), and only a commit not held yet is fetched:
 * that one ref, with its history, since Debian's libgit2 1.5 cannot fetch
 * shallow.  A ref the server does not have fails with ENOENT and a log line
 * naming it and the URL.
 *
 * When: a datastore made for a job's source (staged) fetches in create,
 * so a bad URL or ref fails the job's view at staging, named; a configured
 * one fetches at its first use, so the mount does not wait, and a failure
 * is tried again at most every BE_GIT_RETRY_S seconds.  Then every call goes
 * to a local backend on the commit's folder (be_local.c), read-only, its
 * files handed to the kernel where passthrough works.
 *
 * Credentials, for HTTP(S): `username` (default "git") and a token as
 * `password` or `password_file` (password.h), else a `credentials_file` in
 * git's credential-store format (https://USER:TOKEN@HOST lines); never
 * logged.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "be_git.h"
#include "be_git_lfs.h"
#include "be_local.h"
#include "dir_cache.h"
#include "config.h"
#include "log.h"
#include "mono.h"
#include "password.h"
#include "path.h"

#define BE_GIT_RETRY_S	10	/* a configured datastore's failed fetch is tried again after */
#if MLFS_WITH_CURL
#define BE_GIT_LFS_FETCH 1	/* Git LFS objects are fetched (be_git_lfs.c, libcurl) */
#else
#define BE_GIT_LFS_FETCH 0	/* ... or, without libcurl, the pointers stay */
#endif

struct be_git {
	struct backend base;
	char *url;
	char *shown;		/* the URL as logs show it: no user info (a token) */
	char *ref;		/* "" for the server's HEAD */
	char *dir;		/* cache_dir/git/<sha256 of url> */
	char *user;
	char *token;		/* the password or token; NULL: none */
	bool lfs;		/* Git LFS objects fetched in place of their pointers */
	char *lfs_url;		/* the configured LFS endpoint, or NULL */
	long timeout, retries;
	uint64_t cache_max;	/* git_cache_size: cache_dir/git kept under it; 0: no limit */
	pthread_mutex_t lock;
	struct backend *tree;	/* the local backend of the commit; NULL until fetched; set
				 * once under lock (release), read without it (acquire) */
	int error;		/* lock: the last failure */
	time_t failed_at;	/* lock: when (CLOCK_MONOTONIC seconds) */
	int auth_tries;		/* lock: credentials handed out in this fetch */
	bool wrote;		/* lock: this load wrote a tree out */
	int held;		/* the tree's stamp, held while @tree lives (dir_cache_hold); or -1 */
	char commit[GIT_OID_HEXSZ + 1];
};

static struct be_git *be_git(struct backend *be)
{
	return (struct be_git *)be;
}

/* Why libgit2 failed with @code, for a log line. */
static const char *be_git_why(int code)
{
	const git_error *e = git_error_last();

	if (code == GIT_EAUTH)	/* libgit2 leaves an unrelated message behind then */
		return "the server refused the credentials (check username and the password, "
		       "password_file or credentials_file)";
	return e && e->message ? e->message : "unknown error";
}

/* An errno for a libgit2 failure @code. */
static int be_git_errno(int code)
{
	switch (code) {
	case GIT_ENOTFOUND:
		return -ENOENT;
	case GIT_EAUTH:
		return -EACCES;
	case GIT_ECERTIFICATE:
		return -EACCES;
	default:
		return -EIO;
	}
}

/* ---- credentials ---- */

/* The password of @url's host in a git credential-store file, malloc'd; NULL: none. */
static char *be_git_cred_file(const char *file, const char *url, char **user)
{
	const char *host = strstr(url, "://");
	size_t hlen;
	char line[1024];
	char *pass = NULL;
	FILE *f;

	if (!file || !host)
		return NULL;
	host += 3;
	hlen = strcspn(host, "/");
	f = fopen(file, "re");
	if (!f)
		return NULL;
	while (!pass && fgets(line, sizeof(line), f)) {
		char *u = strstr(line, "://"), *colon, *at;

		line[strcspn(line, "\r\n")] = '\0';
		if (!u)
			continue;
		u += 3;
		at = strrchr(u, '@');
		colon = strchr(u, ':');
		if (!at || !colon || colon > at || strncmp(at + 1, host, hlen) != 0 ||
		    (at[1 + hlen] != '\0' && at[1 + hlen] != '/'))
			continue;
		*colon = *at = '\0';
		free(*user);
		*user = strdup(u);
		pass = strdup(colon + 1);
	}
	fclose(f);
	return pass;
}

static int be_git_credentials(git_credential **out, const char *url, const char *user_from_url,
			      unsigned int allowed, void *payload)
{
	struct be_git *g = payload;

	(void)user_from_url;
	(void)url;
	if (!(allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT) || !g->token)
		return GIT_PASSTHROUGH;
	if (++g->auth_tries > 4)	/* the server refused them: stop asking it */
		return GIT_EAUTH;
	return git_credential_userpass_plaintext_new(out, g->user ? g->user : "git", g->token);
}

/* ---- fetching a commit ---- */

/* The commit @g->ref names, from the server's list of refs, into @oid; the ref's name into @name. */
static int be_git_resolve(struct be_git *g, git_remote *remote, git_oid *oid, char *name,
			  size_t size)
{
	const git_remote_head **heads;
	const char *const forms[] = { "refs/heads/%s", "refs/tags/%s^{}", "refs/tags/%s", "%s" };
	size_t n;
	char want[512];

	if (git_remote_ls(&heads, &n, remote) < 0)
		return be_git_errno(-1);
	for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
		snprintf(want, sizeof(want), forms[f], g->ref[0] ? g->ref : "HEAD");
		for (size_t i = 0; i < n; i++) {
			if (strcmp(heads[i]->name, want) != 0)
				continue;
			git_oid_cpy(oid, &heads[i]->oid);
			snprintf(name, size, "%s", heads[i]->name);
			/* a peeled tag's own ref is fetched; its "^{}" names the commit */
			name[strcspn(name, "^")] = '\0';
			return 0;
		}
	}
	log_err("datastore %s: %s has no branch or tag '%s'", g->base.name, g->shown,
		g->ref[0] ? g->ref : "HEAD");
	return -ENOENT;
}

/* Fetches @refspec from @remote into the repository; 0 or -errno (logged). */
static int be_git_fetch(struct be_git *g, git_remote *remote, const char *refspec)
{
	git_fetch_options opts;
	char *specs[] = { (char *)refspec };
	git_strarray arr = { specs, 1 };
	int ret;

	git_fetch_options_init(&opts, GIT_FETCH_OPTIONS_VERSION);
	opts.callbacks.credentials = be_git_credentials;
	opts.callbacks.payload = g;
	opts.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
	opts.update_fetchhead = 0;
	ret = git_remote_fetch(remote, &arr, &opts, NULL);
	if (ret < 0) {
		log_err("datastore %s: fetching %s: %s", g->base.name, g->shown, be_git_why(ret));
		return be_git_errno(ret);
	}
	return 0;
}

#define BE_GIT_LFS_SPEC	"version https://git-lfs.github.com/spec/v1\n"
#define BE_GIT_LFS_MAX	1024	/* a Git LFS pointer is smaller than this */

/*
 * Whether blob bytes @data are a Git LFS pointer (the spec's first line,
 * an "oid sha256:" line): what git stores in place of a big file kept in
 * Git LFS, whose object be_git_lfs.c puts in its place.
 */
bool be_git_is_lfs_pointer(const char *data, size_t len)
{
	size_t spec = sizeof(BE_GIT_LFS_SPEC) - 1;

	return len > spec && len < BE_GIT_LFS_MAX && memcmp(data, BE_GIT_LFS_SPEC, spec) == 0 &&
	       memmem(data, len, "\noid sha256:", 12) != NULL;
}

/* Writes blob @entry of @repo as @path, its mode as git says (a link as a link). */
static int be_git_write_blob(git_repository *repo, const git_tree_entry *entry, const char *path,
			     struct be_git_lfs_obj *lfs)
{
	git_filemode_t mode = git_tree_entry_filemode(entry);
	git_blob *blob;
	const char *data;
	size_t len;
	int fd, ret = 0;

	if (git_blob_lookup(&blob, repo, git_tree_entry_id(entry)) < 0)
		return -EIO;
	data = git_blob_rawcontent(blob);
	len = (size_t)git_blob_rawsize(blob);
	if (mode == GIT_FILEMODE_LINK) {
		char *target = strndup(data, len);

		ret = !target ? -ENOMEM : symlink(target, path) < 0 ? -errno : 0;
		free(target);
	} else {
		if (be_git_is_lfs_pointer(data, len) &&
		    be_git_lfs_parse(data, len, lfs->oid, &lfs->size) < 0)
			lfs->oid[0] = '-';	/* a pointer, not one of the spec's */
		lfs->exec = mode == GIT_FILEMODE_BLOB_EXECUTABLE;
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			  mode == GIT_FILEMODE_BLOB_EXECUTABLE ? 0555 : 0444);
		if (fd < 0)
			ret = -errno;
		for (size_t off = 0; ret == 0 && off < len;) {
			ssize_t w = write(fd, data + off, len - off);

			if (w < 0)
				ret = -errno;
			else
				off += (size_t)w;
		}
		if (fd >= 0)
			close(fd);
	}
	git_blob_free(blob);
	return ret;
}

struct be_git_walk {
	git_repository *repo;
	const char *top;	/* the folder written into */
	int error;
	struct be_git_lfs_obj *lfs;	/* the Git LFS pointers written */
	size_t n_lfs, cap_lfs;
	size_t n_bad;		/* ... and the pointers this mlfs cannot read */
};

/* Adds pointer @obj, at @root@name, to @w's list. */
static int be_git_walk_lfs(struct be_git_walk *w, struct be_git_lfs_obj *obj, const char *root,
			   const char *name)
{
	if (obj->oid[0] == '-') {
		w->n_bad++;
		return 0;
	}
	if (w->n_lfs == w->cap_lfs) {
		size_t cap = w->cap_lfs ? 2 * w->cap_lfs : 16;
		struct be_git_lfs_obj *v = realloc(w->lfs, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		w->lfs = v;
		w->cap_lfs = cap;
	}
	if (asprintf(&obj->path, "%s%s", root, name) < 0)
		return -ENOMEM;
	w->lfs[w->n_lfs++] = *obj;
	return 0;
}

static int be_git_walk_entry(const char *root, const git_tree_entry *entry, void *payload)
{
	struct be_git_walk *w = payload;
	const char *name = git_tree_entry_name(entry);
	char *path = NULL;
	int ret = 0;

	if (strchr(name, '/') || strcmp(name, "..") == 0 || strcmp(name, ".") == 0 ||
	    asprintf(&path, "%s/%s%s", w->top, root, name) < 0) {
		w->error = path ? -EINVAL : -ENOMEM;
		return -1;
	}
	switch (git_tree_entry_type(entry)) {
	case GIT_OBJECT_TREE:
		ret = mkdir(path, 0755) < 0 ? -errno : 0;
		break;
	case GIT_OBJECT_BLOB: {
		struct be_git_lfs_obj obj = { .oid = "" };

		ret = be_git_write_blob(w->repo, entry, path, &obj);
		if (ret == 0 && obj.oid[0])
			ret = be_git_walk_lfs(w, &obj, root, name);
		break;
	}
	default:	/* a submodule: an empty folder, as git clone leaves it */
		ret = mkdir(path, 0755) < 0 ? -errno : 0;
		break;
	}
	free(path);
	w->error = ret;
	return ret < 0 ? -1 : 0;
}

/*
 * The Git LFS pointers the walk @w wrote: fetched and put in their place
 * (be_git_lfs.c), or, with lfs = false or no libcurl, left and said once.
 */
static int be_git_lfs_objects(struct be_git *g, struct be_git_walk *w)
{
	if (w->n_bad > 0)
		log_warn("datastore %s: commit %s: %zu file(s) begin as Git LFS pointers but their "
			 "oid or size line is not the spec's: shown as git stores them",
			 g->base.name, g->commit, w->n_bad);
	if (w->n_lfs == 0)
		return 0;
#if BE_GIT_LFS_FETCH
	if (g->lfs) {
		struct be_git_lfs_opts o = { .name = g->base.name, .commit = g->commit,
					     .remote = g->url, .lfs_url = g->lfs_url,
					     .user = g->user, .token = g->token,
					     .timeout = g->timeout, .retries = g->retries,
					     .requests = &g->base.stats.requests };
		char *store = NULL;
		int ret = asprintf(&store, "%s/lfs", g->dir) < 0 ? -ENOMEM : 0;

		o.store = store;
		if (ret == 0)
			ret = be_git_lfs_fetch(&o, w->top, w->lfs, w->n_lfs);
		free(store);
		return ret;
	}
#endif
	log_warn("datastore %s: commit %s: Git LFS pointers in place of %zu file(s), the first %s "
		 "(%s): each shows the pointer's few lines, not the data, as after git clone "
		 "without git-lfs", g->base.name, g->commit, w->n_lfs, w->lfs[0].path,
		 g->lfs ? "this mlfs is built without libcurl" : "lfs = false");
	return 0;
}

/* Writes commit @oid's tree out as @final (be_git_have_tree's path), atomically. */
static int be_git_write_tree(struct be_git *g, git_repository *repo, const git_oid *oid,
			     const char *final)
{
	struct be_git_walk w = { .repo = repo };
	git_commit *commit = NULL;
	git_tree *tree = NULL;
	char *tmp = NULL;
	int ret = git_commit_lookup(&commit, repo, oid) < 0 ? -ENOENT : 0;

	if (ret == 0)
		ret = git_commit_tree(&tree, commit) < 0 ? -EIO : 0;
	if (ret == 0 && asprintf(&tmp, "%s.tmp.%ld", final, (long)getpid()) < 0)
		ret = -ENOMEM;
	if (ret == 0) {
		path_remove_tree(tmp);
		ret = mkdir(tmp, 0755) < 0 ? -errno : 0;
	}
	w.top = tmp;
	if (ret == 0 && git_tree_walk(tree, GIT_TREEWALK_PRE, be_git_walk_entry, &w) < 0)
		ret = w.error ? w.error : -EIO;
	if (ret == 0)
		ret = be_git_lfs_objects(g, &w);
	if (ret == 0 && rename(tmp, final) < 0 && errno != EEXIST && errno != ENOTEMPTY)
		ret = -errno;
	if (tmp)
		path_remove_tree(tmp);	/* gone when renamed; else ours, or another's won */
	if (ret < 0)
		log_err("datastore %s: writing out commit %s: %s", g->base.name, g->commit,
			strerror(-ret));
	free(tmp);
	for (size_t i = 0; i < w.n_lfs; i++)
		free(w.lfs[i].path);
	free(w.lfs);
	git_tree_free(tree);
	git_commit_free(commit);
	return ret;
}

/* Whether the folder of commit @hex is written out already: its path into @path. */
static bool be_git_have_tree(const struct be_git *g, const char *hex, char *path, size_t size)
{
	struct stat st;

	/* a tree with LFS objects in place is not the same folder as one with pointers */
	snprintf(path, size, "%s/trees/%s%s", g->dir, hex, g->lfs && BE_GIT_LFS_FETCH ? "+lfs" : "");
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * Finds the commit @g names, asking the server only what the cache lacks,
 * and has its tree written out: 0 and @g->commit set, or -errno (logged).
 */
static int be_git_get(struct be_git *g, git_repository *repo, char *tree_path, size_t size)
{
	git_remote *remote = NULL;
	git_remote_callbacks cb;
	git_commit *have = NULL;
	char name[512], spec[1100];
	git_oid oid;
	int ret = 0;

	git_remote_init_callbacks(&cb, GIT_REMOTE_CALLBACKS_VERSION);
	if (be_git_is_commit(g->ref)) {
		snprintf(g->commit, sizeof(g->commit), "%s", g->ref);
		if (be_git_have_tree(g, g->commit, tree_path, size))
			return 0;	/* nothing to ask anyone */
		git_oid_fromstr(&oid, g->ref);
	}
	if (git_remote_create_anonymous(&remote, repo, g->url) < 0) {
		log_err("datastore %s: %s: %s", g->base.name, g->shown, be_git_why(-1));
		return -EINVAL;
	}
	cb.credentials = be_git_credentials;
	cb.payload = g;
	if (be_git_is_commit(g->ref)) {
		if (git_commit_lookup(&have, repo, &oid) < 0)
			ret = be_git_fetch(g, remote, "+refs/heads/*:refs/mlfs/heads/*");
	} else if ((ret = git_remote_connect(remote, GIT_DIRECTION_FETCH, &cb, NULL, NULL)) < 0) {
		log_err("datastore %s: %s: %s", g->base.name, g->shown, be_git_why(ret));
		ret = be_git_errno(ret);
	} else {
		ret = be_git_resolve(g, remote, &oid, name, sizeof(name));
		git_remote_disconnect(remote);
		git_oid_tostr(g->commit, sizeof(g->commit), &oid);
		if (ret == 0 && !be_git_have_tree(g, g->commit, tree_path, size) &&
		    git_commit_lookup(&have, repo, &oid) < 0) {
			snprintf(spec, sizeof(spec), "+%s:refs/mlfs/%s", name,
				 strncmp(name, "refs/", 5) == 0 ? name + 5 : name);
			ret = be_git_fetch(g, remote, spec);
		}
	}
	git_commit_free(have);
	git_remote_free(remote);
	if (ret == 0 && !be_git_have_tree(g, g->commit, tree_path, size)) {
		ret = be_git_write_tree(g, repo, &oid, tree_path);
		g->wrote = ret == 0;
	}
	return ret;
}

/* Opens (or makes) the cache's bare repository of @g; under its lock. */
static int be_git_repo(struct be_git *g, git_repository **repo)
{
	char *path = NULL;
	FILE *f;
	int ret;

	if (asprintf(&path, "%s/trees", g->dir) < 0)
		return -ENOMEM;
	ret = path_mkdirs(path, 0755);
	free(path);
	if (ret < 0 || asprintf(&path, "%s/repo.git", g->dir) < 0)
		return ret < 0 ? ret : -ENOMEM;
	if (git_repository_open_bare(repo, path) < 0 && git_repository_init(repo, path, 1) < 0) {
		log_err("datastore %s: %s: %s", g->base.name, path, be_git_why(-1));
		ret = -EIO;
	}
	free(path);
	path = NULL;
	/* which repository the folder is, for people and the evictor's log (once) */
	if (ret == 0 && asprintf(&path, "%s/url", g->dir) < 0)
		path = NULL;
	if (path && access(path, F_OK) < 0 && (f = fopen(path, "we"))) {
		fprintf(f, "%s\n", g->shown);
		fclose(f);
	}
	free(path);
	return ret;
}

/*
 * be_git_get under flock(LOCK_EX) of @g->dir/lock (be_git_lock): one fetch
 * and one writer of a tree at a time, and no evictor; the tree found is
 * held (dir_cache_hold) before the lock goes.
 */
static int be_git_get_locked(struct be_git *g, char *tree_path, size_t size)
{
	git_repository *repo = NULL;
	int fd = be_git_lock(g->dir, true), ret = fd < 0 ? fd : 0;

	if (ret < 0)
		log_err("datastore %s: %s/lock: %s", g->base.name, g->dir, strerror(-ret));
	if (ret == 0)
		ret = be_git_repo(g, &repo);
	if (ret == 0)
		ret = be_git_get(g, repo, tree_path, size);
	if (ret == 0 && (g->held = dir_cache_hold(tree_path)) < 0) {
		ret = g->held;
		log_err("datastore %s: %s.used: %s", g->base.name, tree_path, strerror(-ret));
	}
	git_repository_free(repo);
	if (fd >= 0)
		close(fd);	/* and the lock with it */
	return ret;
}

/* Fetches what @g names and opens its local backend; under g->lock. */
static int be_git_load(struct be_git *g)
{
	struct datastore_config ds = { .file = NULL, .name = g->base.name, .uid = -1, .gid = -1,
				       .mode = -1, .timeout = -1, .retries = -1 };
	struct backend *tree = NULL;
	char tree_path[PATH_MAX];
	int ret;

	g->auth_tries = 0;
	g->wrote = false;
	ret = be_git_get_locked(g, tree_path, sizeof(tree_path));
	if (ret == 0)
		ret = config_kv_add(&ds, "root", tree_path, 0);
	if (ret == 0)
		ret = be_local_ops.create(&tree, &ds);
	if (ret == 0) {
		tree->ops = &be_local_ops;	/* backend_create's part: not called here */
		tree->name = g->base.name;	/* borrowed: destroyed with ops->destroy */
		tree->index = g->base.index;
		__atomic_store_n(&g->tree, tree, __ATOMIC_RELEASE);
	}
	if (ret < 0 && g->held >= 0) {
		close(g->held);
		g->held = -1;
	}
	for (size_t i = 0; i < ds.n_kv; i++) {
		free(ds.kv[i].key);
		free(ds.kv[i].value);
	}
	free(ds.kv);
	if (ret == 0)
		log_info("datastore %s: git %s%s%s at commit %s", g->base.name, g->shown,
			 g->ref[0] ? " " : "", g->ref, g->commit);
	/* the folder grew: the least recently read trees no one reads go, while it is too big */
	if (ret == 0 && g->wrote && g->cache_max > 0) {
		char *top = strdup(g->dir);

		if (top && strrchr(top, '/'))
			*strrchr(top, '/') = '\0';
		if (top)
			be_git_evict(top, g->cache_max);
		free(top);
	}
	return ret;
}

/* The commit's local backend, fetched first when needed: 0 and *out, or -errno. */
static int be_git_ready(struct be_git *g, struct backend **out)
{
	time_t now;
	int ret = 0;

	/* once fetched, every call: no lock (the tree is set once, never changed) */
	*out = __atomic_load_n(&g->tree, __ATOMIC_ACQUIRE);
	if (*out)
		return 0;
	now = (time_t)(mono_ns() / 1000000000);
	pthread_mutex_lock(&g->lock);
	if (!g->tree && g->error && now - g->failed_at < BE_GIT_RETRY_S)
		ret = g->error;
	else if (!g->tree && (ret = be_git_load(g)) < 0) {
		g->error = ret;
		g->failed_at = now;
	}
	*out = g->tree;
	pthread_mutex_unlock(&g->lock);
	return ret;
}

/* ---- the ops: each goes to the commit's local backend ---- */

static int be_git_getattr(struct backend *be, const char *path, struct stat *st)
{
	struct backend *t;
	int ret = be_git_ready(be_git(be), &t);

	return ret < 0 ? ret : t->ops->getattr(t, path, st);
}

static int be_git_readdir(struct backend *be, const char *path, backend_fill_fn *fill,
			  void *payload)
{
	struct backend *t;
	int ret = be_git_ready(be_git(be), &t);

	return ret < 0 ? ret : t->ops->readdir(t, path, fill, payload);
}

static int be_git_readlink(struct backend *be, const char *path, char *buf, size_t size)
{
	struct backend *t;
	int ret = be_git_ready(be_git(be), &t);

	return ret < 0 ? ret : t->ops->readlink(t, path, buf, size);
}

static int be_git_statfs(struct backend *be, const char *path, struct statvfs *sv)
{
	struct backend *t;
	int ret = be_git_ready(be_git(be), &t);

	if (ret == 0)
		ret = t->ops->statfs(t, path, sv);
	if (ret == 0)
		sv->f_flag |= ST_RDONLY;
	return ret;
}

/* An open file is the local backend's: its own calls below use it, never g. */
static int be_git_open(struct backend_file **out, struct backend *be, const char *path,
		       int flags)
{
	struct backend *t;
	int ret = be_git_ready(be_git(be), &t);

	if (ret == 0 && ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)))
		ret = -EROFS;
	return ret < 0 ? ret : t->ops->open(out, t, path, flags & ~BE_O_TRUST);
}

static ssize_t be_git_pread(struct backend_file *f, void *buf, size_t len, off_t off)
{
	return f->be->ops->pread(f, buf, len, off);
}

static void be_git_release(struct backend_file *f)
{
	f->be->ops->release(f);
}

static int be_git_fgetattr(struct backend_file *f, struct stat *st)
{
	return f->be->ops->fgetattr(f, st);
}

static int be_git_local_fd(struct backend_file *f)
{
	return f->be->ops->local_fd ? f->be->ops->local_fd(f) : -ENOTSUP;
}

/* The commit served, once resolved. */
static int be_git_describe(struct backend *be, char *buf, size_t size)
{
	struct be_git *g = be_git(be);
	int ret = -EAGAIN;

	pthread_mutex_lock(&g->lock);
	if (g->tree) {
		snprintf(buf, size, "%s", g->commit);
		ret = 0;
	}
	pthread_mutex_unlock(&g->lock);
	return ret;
}

/* ---- setup ---- */

/* Whether @src (a url key, "git+" added when its form does not say git) splits: 0, or -errno. */
static int be_git_try_split(const char *src, bool add_git, char **ref)
{
	char *joined = NULL, *url = NULL;
	int ret;

	*ref = NULL;
	if (asprintf(&joined, "%s%s", add_git ? "git+" : "", src) < 0)
		return -ENOMEM;
	ret = be_git_split(joined, &url, ref);
	free(joined);
	free(url);
	return ret;
}

/* The keys lfs (true or false) and lfs_url (an http(s) URL). */
static void be_git_validate_lfs(const struct datastore_config *cfg, struct diag *d)
{
	int line = cfg->line, uline = cfg->line;
	const char *lfs = config_get(cfg, "lfs", &line), *url = config_get(cfg, "lfs_url", &uline);

	if (lfs && config_parse_bool(lfs) < 0)
		diag_add(d, cfg->file, line, "[datastore %s] lfs: '%s' is not true or false",
			 cfg->name, lfs);
	if (url && strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
		diag_add(d, cfg->file, uline, "[datastore %s] lfs_url: '%s' is not an http:// or "
			 "https:// URL (a Git LFS server's endpoint, .../info/lfs)", cfg->name, url);
}

static int be_git_validate(const struct datastore_config *cfg, struct diag *d)
{
	size_t before = d->n;
	int line = cfg->line, rline = cfg->line, cline = cfg->line;
	const char *url = config_get(cfg, "url", &line), *ref = config_get(cfg, "ref", &rline);
	const char *creds = config_get(cfg, "credentials_file", &cline);
	char *r = NULL, *one = NULL;

	if (!url)
		diag_add(d, cfg->file, cfg->line, "[datastore %s] url: missing (a repository: "
			 "https://HOST/REPO.git, git://HOST/REPO.git)", cfg->name);
	else if (be_git_try_split(url, !be_git_claims(url), &r) == -EINVAL)
		diag_add(d, cfg->file, line, "[datastore %s] url: not a git repository URL "
			 "(https://HOST/REPO.git, git://HOST/REPO.git, git+https://HOST/REPO)",
			 cfg->name);
	else if (r && r[0] && ref)
		diag_add(d, cfg->file, rline, "[datastore %s] ref: given twice (url has #%s)",
			 cfg->name, r);
	free(r);
	r = NULL;
	if (ref && (asprintf(&one, "git://h/r.git#%s", ref) < 0 ||
		    be_git_try_split(one, false, &r) == -EINVAL))
		diag_add(d, cfg->file, rline, "[datastore %s] ref: '%s' is not a branch, tag or "
			 "commit name git allows", cfg->name, ref);
	free(one);
	free(r);
	password_validate(cfg, false, d);
	be_git_validate_lfs(cfg, d);
	if (creds) {
		char *abs = config_resolve_path(cfg->file, creds);

		if (abs && access(abs, R_OK) < 0)
			diag_add(d, cfg->file, cline, "[datastore %s] credentials_file: %s: %s",
				 cfg->name, abs, strerror(errno));
		free(abs);
	}
	return d->n > before ? -EINVAL : 0;
}

/* cache_dir/git/<sha256 of @url, hex>. */
static char *be_git_dir(const char *cache_dir, const char *url)
{
	unsigned char md[32];
	char hex[65], *dir = NULL;

	EVP_Digest(url, strlen(url), md, NULL, EVP_sha256(), NULL);
	for (size_t i = 0; i < sizeof(md); i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	if (asprintf(&dir, "%s/git/%s", cache_dir ? cache_dir : "/var/cache/mlfs", hex) < 0)
		return NULL;
	return dir;
}

static void be_git_free(struct be_git *g)
{
	if (g->tree)
		g->tree->ops->destroy(g->tree);
	if (g->held >= 0)
		close(g->held);	/* the tree may go now */
	pthread_mutex_destroy(&g->lock);
	free(g->url);
	free(g->shown);
	free(g->ref);
	free(g->dir);
	free(g->user);
	free(g->lfs_url);
	if (g->token)
		explicit_bzero(g->token, strlen(g->token));
	free(g->token);
	free(g);
}

/* @g's URL and ref from its `url` (git+, #REF) and `ref` keys. */
static int be_git_where(struct be_git *g, const struct datastore_config *cfg)
{
	const char *url = config_get(cfg, "url", NULL), *ref = config_get(cfg, "ref", NULL);
	char *joined = NULL;
	int ret;

	if (!url)
		return -EINVAL;
	if (asprintf(&joined, "%s%s", be_git_claims(url) ? "" : "git+", url) < 0)
		return -ENOMEM;
	ret = be_git_split(joined, &g->url, &g->ref);
	free(joined);
	if (ret == 0 && ref && !g->ref[0]) {
		free(g->ref);
		g->ref = strdup(ref);
		ret = g->ref ? 0 : -ENOMEM;
	}
	return ret;
}

/*
 * Credentials the URL holds (https://USER:TOKEN@HOST/..., as GitLab's CI
 * writes them) as @g's, so Git LFS requests, whose URLs do not carry them,
 * are sent them too; libgit2 reads them from the URL itself.
 */
static int be_git_url_credentials(struct be_git *g)
{
	const char *user, *colon;
	size_t len;

	if (!password_url_userinfo(g->url, &user, &len) || !(colon = memchr(user, ':', len)))
		return 0;
	free(g->user);
	g->user = strndup(user, (size_t)(colon - user));
	g->token = strndup(colon + 1, len - (size_t)(colon + 1 - user));
	return g->user && g->token ? 0 : -ENOMEM;
}

static int be_git_create(struct backend **out, const struct datastore_config *cfg)
{
	struct be_git *g = calloc(1, sizeof(*g));
	const char *user = config_get(cfg, "username", NULL);
	const char *lfs = config_get(cfg, "lfs", NULL), *lfs_url = config_get(cfg, "lfs_url", NULL);
	int ret;

	if (!g)
		return -ENOMEM;
	g->lfs = !lfs || config_parse_bool(lfs) != 0;
	g->held = -1;
	g->cache_max = cfg->git_cache_size;
	g->timeout = cfg->timeout;
	g->retries = cfg->retries;
	git_libgit2_init();
	pthread_mutex_init(&g->lock, NULL);
	g->base.name = cfg->name;
	ret = be_git_where(g, cfg);
	if (ret == 0 && !(g->shown = strdup(g->url)))	/* as long as it can get */
		ret = -ENOMEM;
	if (ret == 0)
		password_url_shown(g->shown, strlen(g->url) + 1, g->url);
	if (ret == 0)
		ret = (g->dir = be_git_dir(cfg->cache_dir, g->url)) ? 0 : -ENOMEM;
	if (ret == 0 && user)
		ret = (g->user = strdup(user)) ? 0 : -ENOMEM;
	if (ret == 0 && lfs_url)
		ret = (g->lfs_url = strdup(lfs_url)) ? 0 : -ENOMEM;
	if (ret == 0)
		ret = password_read(cfg, &g->token);
	if (ret == 0 && !g->token)
		ret = be_git_url_credentials(g);
	if (ret == 0 && !g->token) {
		char *file = config_get(cfg, "credentials_file", NULL) ?
			     config_resolve_path(cfg->file, config_get(cfg, "credentials_file",
								       NULL)) : NULL;

		g->token = be_git_cred_file(file, g->url, &g->user);
		free(file);
	}
	/* a job's source is fetched now: a bad URL or ref fails its view at staging */
	if (ret == 0 && cfg->staged) {
		struct backend *t;

		ret = be_git_ready(g, &t);
	}
	if (ret < 0) {
		be_git_free(g);
		return ret;
	}
	*out = &g->base;
	return 0;
}

static void be_git_destroy(struct backend *be)
{
	be_git_free(be_git(be));
}

const struct backend_ops be_git_ops = {
	.version = BACKEND_OPS_VERSION,
	.scheme = "git",
	.caps = 0,
	.validate = be_git_validate,
	.create = be_git_create,
	.destroy = be_git_destroy,
	.getattr = be_git_getattr,
	.readdir = be_git_readdir,
	.open = be_git_open,
	.pread = be_git_pread,
	.release = be_git_release,
	.statfs = be_git_statfs,
	.fgetattr = be_git_fgetattr,
	.readlink = be_git_readlink,
	.local_fd = be_git_local_fd,
	.describe = be_git_describe,
};
