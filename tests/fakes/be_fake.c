/*
 * be_fake.c - an in-memory backend behind the real contract, for tests.
 *
 * Entries are kept in a flat array of canonical paths; a folder's children
 * are the entries whose path is the folder's plus one component.  Every
 * call is counted; be_fake_fail_next() makes the next call of an operation
 * fail, which is how the core's error paths are tested.  One mutex guards
 * everything: speed is not the point here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "be_fake.h"

struct be_fake_entry {
	char *path;
	bool is_dir;
	mode_t special;		/* S_IFIFO, S_IFSOCK, ... for a special file, else 0 */
	char *data;
	size_t len;
};

struct be_fake {
	struct backend base;
	pthread_mutex_t lock;
	struct be_fake_entry *ents;
	size_t n;
	unsigned int calls[FAKE_NOPS];
	int fail[FAKE_NOPS];
};

struct be_fake_file {
	struct backend_file base;
	char *path;
};

static struct be_fake *be_fake(struct backend *be)
{
	return (struct be_fake *)be;
}

/* Counts a call and returns the injected failure, if any.  Called locked. */
static int be_fake_enter(struct be_fake *fb, enum be_fake_op op)
{
	int err = fb->fail[op];

	fb->calls[op]++;
	fb->fail[op] = 0;
	return err;
}

static struct be_fake_entry *be_fake_find(struct be_fake *fb, const char *path)
{
	for (size_t i = 0; i < fb->n; i++)
		if (strcmp(fb->ents[i].path, path) == 0)
			return &fb->ents[i];
	return NULL;
}

static int be_fake_add_locked(struct be_fake *fb, const char *path, const char *data)
{
	struct be_fake_entry *e = realloc(fb->ents, (fb->n + 1) * sizeof(*e));

	if (!e)
		return -ENOMEM;
	fb->ents = e;
	e = &fb->ents[fb->n];
	memset(e, 0, sizeof(*e));
	e->path = strdup(path);
	e->is_dir = data == NULL;
	if (data) {
		e->data = strdup(data);
		e->len = strlen(data);
	}
	fb->n++;
	return 0;
}

int be_fake_add(struct backend *be, const char *path, const char *data)
{
	struct be_fake *fb = be_fake(be);
	int ret;

	pthread_mutex_lock(&fb->lock);
	ret = be_fake_add_locked(fb, path, data);
	pthread_mutex_unlock(&fb->lock);
	return ret;
}

unsigned int be_fake_calls(struct backend *be, enum be_fake_op op)
{
	return be_fake(be)->calls[op];
}

void be_fake_fail_next(struct backend *be, enum be_fake_op op, int err)
{
	be_fake(be)->fail[op] = err;
}

static int be_fake_create(struct backend **out, const struct datastore_config *cfg)
{
	struct be_fake *fb = calloc(1, sizeof(*fb));

	(void)cfg;
	if (!fb)
		return -ENOMEM;
	pthread_mutex_init(&fb->lock, NULL);
	be_fake_add_locked(fb, "", NULL);
	*out = &fb->base;
	return 0;
}

static void be_fake_destroy(struct backend *be)
{
	struct be_fake *fb = be_fake(be);

	for (size_t i = 0; i < fb->n; i++) {
		free(fb->ents[i].path);
		free(fb->ents[i].data);
	}
	free(fb->ents);
	pthread_mutex_destroy(&fb->lock);
	free(fb);
}

static void be_fake_stat(const struct be_fake_entry *e, size_t index, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = index + 100;
	st->st_mode = e->is_dir ? S_IFDIR | 0755 : e->special ? e->special : S_IFREG | 0644;
	st->st_nlink = 1;
	st->st_size = (off_t)e->len;
}

static int be_fake_getattr(struct backend *be, const char *path, struct stat *st)
{
	struct be_fake *fb = be_fake(be);
	struct be_fake_entry *e;
	int ret;

	pthread_mutex_lock(&fb->lock);
	ret = be_fake_enter(fb, FAKE_GETATTR);
	e = ret ? NULL : be_fake_find(fb, path);
	if (e)
		be_fake_stat(e, (size_t)(e - fb->ents), st);
	else if (!ret)
		ret = -ENOENT;
	pthread_mutex_unlock(&fb->lock);
	return ret;
}

/* The name of @child inside @dir, or NULL when it is not directly inside. */
static const char *be_fake_child_name(const char *dir, const char *child)
{
	size_t len = strlen(dir);

	if (child[0] == '\0')
		return NULL;
	if (len == 0)
		return strchr(child, '/') ? NULL : child;
	if (strncmp(child, dir, len) != 0 || child[len] != '/' || strchr(child + len + 1, '/'))
		return NULL;
	return child + len + 1;
}

static int be_fake_readdir(struct backend *be, const char *path, backend_fill_fn *fill,
			   void *payload)
{
	struct be_fake *fb = be_fake(be);
	int ret;

	pthread_mutex_lock(&fb->lock);
	ret = be_fake_enter(fb, FAKE_READDIR);
	if (!ret && !be_fake_find(fb, path))
		ret = -ENOENT;
	for (size_t i = 0; ret == 0 && i < fb->n; i++) {
		const char *name = be_fake_child_name(path, fb->ents[i].path);
		struct stat st;

		if (!name)
			continue;
		be_fake_stat(&fb->ents[i], i, &st);
		ret = fill(payload, name, &st);
	}
	pthread_mutex_unlock(&fb->lock);
	return ret;
}

static int be_fake_open(struct backend_file **out, struct backend *be, const char *path,
			int flags)
{
	struct be_fake *fb = be_fake(be);
	struct be_fake_file *f;
	struct be_fake_entry *e;
	int ret;

	(void)flags;
	pthread_mutex_lock(&fb->lock);
	ret = be_fake_enter(fb, FAKE_OPEN);
	e = ret ? NULL : be_fake_find(fb, path);
	pthread_mutex_unlock(&fb->lock);
	if (ret)
		return ret;
	if (!e)
		return -ENOENT;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->base.be = be;
	f->path = strdup(path);
	*out = &f->base;
	return 0;
}

static ssize_t be_fake_pread(struct backend_file *file, void *buf, size_t len, off_t off)
{
	struct be_fake_file *f = (struct be_fake_file *)file;
	struct be_fake *fb = be_fake(file->be);
	struct be_fake_entry *e;
	ssize_t n;

	pthread_mutex_lock(&fb->lock);
	n = be_fake_enter(fb, FAKE_PREAD);
	e = n ? NULL : be_fake_find(fb, f->path);
	if (e && (size_t)off < e->len) {
		n = (ssize_t)(e->len - (size_t)off < len ? e->len - (size_t)off : len);
		memcpy(buf, e->data + off, (size_t)n);
	} else if (!n && !e) {
		n = -ENOENT;
	}
	pthread_mutex_unlock(&fb->lock);
	return n;
}

static void be_fake_release(struct backend_file *file)
{
	struct be_fake_file *f = (struct be_fake_file *)file;

	free(f->path);
	free(f);
}

static int be_fake_statfs(struct backend *be, const char *path, struct statvfs *sv)
{
	(void)be;
	(void)path;
	memset(sv, 0, sizeof(*sv));
	sv->f_bsize = sv->f_frsize = 4096;
	sv->f_blocks = 1000;
	sv->f_namemax = 255;
	return 0;
}

static int be_fake_mkdir(struct backend *be, const char *path, mode_t mode,
			 const struct backend_cred *cred)
{
	struct be_fake *fb = be_fake(be);
	int ret;

	(void)mode;
	(void)cred;
	pthread_mutex_lock(&fb->lock);
	ret = be_fake_enter(fb, FAKE_MKDIR);
	if (!ret)
		ret = be_fake_find(fb, path) ? -EEXIST : be_fake_add_locked(fb, path, NULL);
	pthread_mutex_unlock(&fb->lock);
	return ret;
}

/* A special file: no data, its type and mode as given. */
static int be_fake_mknod(struct backend *be, const char *path, mode_t mode, dev_t rdev,
			 const struct backend_cred *cred)
{
	struct be_fake *fb = be_fake(be);
	int ret;

	(void)rdev;
	(void)cred;
	pthread_mutex_lock(&fb->lock);
	ret = be_fake_enter(fb, FAKE_MKNOD);
	if (!ret)
		ret = be_fake_find(fb, path) ? -EEXIST : be_fake_add_locked(fb, path, "");
	if (!ret)
		fb->ents[fb->n - 1].special = mode;
	pthread_mutex_unlock(&fb->lock);
	return ret;
}

static int be_fake_unlink(struct backend *be, const char *path)
{
	struct be_fake *fb = be_fake(be);
	struct be_fake_entry *e;
	int ret;

	pthread_mutex_lock(&fb->lock);
	ret = be_fake_enter(fb, FAKE_UNLINK);
	e = ret ? NULL : be_fake_find(fb, path);
	if (e) {
		free(e->path);
		free(e->data);
		*e = fb->ents[--fb->n];
	} else if (!ret) {
		ret = -ENOENT;
	}
	pthread_mutex_unlock(&fb->lock);
	return ret;
}

static int be_fake_rename(struct backend *be, const char *from, const char *to,
			  unsigned int flags)
{
	struct be_fake *fb = be_fake(be);
	struct be_fake_entry *e;
	int ret;

	pthread_mutex_lock(&fb->lock);
	ret = be_fake_enter(fb, FAKE_RENAME);
	e = ret ? NULL : be_fake_find(fb, from);
	if (!ret && flags)
		ret = -EINVAL;
	else if (e) {
		struct be_fake_entry *old = be_fake_find(fb, to);
		char *copy = strdup(to);

		free(e->path);
		e->path = copy;
		if (old) {	/* replaced, as rename(2) does */
			free(old->path);
			free(old->data);
			*old = fb->ents[--fb->n];
		}
	} else if (!ret) {
		ret = -ENOENT;
	}
	pthread_mutex_unlock(&fb->lock);
	return ret;
}

const struct backend_ops be_fake_ops = {
	.version = BACKEND_OPS_VERSION,
	.scheme = "fake",
	.caps = BE_CAP_WRITE,
	.create = be_fake_create,
	.destroy = be_fake_destroy,
	.getattr = be_fake_getattr,
	.readdir = be_fake_readdir,
	.open = be_fake_open,
	.pread = be_fake_pread,
	.release = be_fake_release,
	.statfs = be_fake_statfs,
	.mkdir = be_fake_mkdir,
	.unlink = be_fake_unlink,
	.rmdir = be_fake_unlink,
	.rename = be_fake_rename,
	.mknod = be_fake_mknod,
};
