/*
 * fs_file.c - the open files of the tree (fs_ops.c dispatches to them
 * through the node's kind): a virtual file's content made at open, a
 * backend file read through the shared disk cache (hot runs and the cache's
 * mapping handed to the kernel without a copy) or handed to the kernel by
 * FUSE passthrough once it is whole, writes, and the kernel's page cache
 * kept across opens while a file's size and mtime are unchanged.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <fuse_lowlevel.h>

#include "fs.h"
#include "fs_ops_int.h"
#include "log.h"
#include "mono.h"
#include "path.h"

#define FS_FMODE_EXEC	0x20	/* the kernel's __FMODE_EXEC, set in an execve's open */

/* Whether the kernel may keep the pages it has of @n, given its attributes now. */
static bool fs_keep_cache(struct fs *fs, struct node *n, const struct stat *st)
{
	bool keep;

	pthread_mutex_lock(&fs->cache_lock);
	keep = n->seen && n->seen_size == st->st_size &&
	       n->seen_mtime.tv_sec == st->st_mtim.tv_sec &&
	       n->seen_mtime.tv_nsec == st->st_mtim.tv_nsec;
	n->seen = true;
	n->seen_size = st->st_size;
	n->seen_mtime = st->st_mtim;
	pthread_mutex_unlock(&fs->cache_lock);
	return keep;
}

int fs_open_virtual(struct fs *fs, struct node *n, struct fs_file *f, struct fuse_file_info *fi)
{
	if (!n->content)
		return -EISDIR;		/* a virtual folder */
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return -n->parent->write_errno;
	fi->direct_io = 1;
	return n->content(fs, &f->buf, &f->len);
}

static ssize_t fs_cache_fetch(void *arg, void *buf, size_t len, off_t off)
{
	return backend_pread(arg, buf, len, off);
}

/*
 * Puts the disk cache between the reader and a remote file.  A backend that
 * cannot name the content (no cache_key) is read directly.  Once the whole
 * object is in the cache the kernel may read the cached file itself.
 */
static int fs_open_cached(struct fs *fs, struct fs_file *f)
{
	struct backend *be = f->bf->be;
	char key[PATH_MAX + 1024];
	struct stat st;
	int ret = backend_cache_key(f->bf, key, sizeof(key));

	if (ret == -ENOTSUP)
		return 0;
	if (ret >= 0)
		ret = backend_fgetattr(f->bf, &st);
	if (ret >= 0)
		ret = cache_file_open(fs->cache, &f->cf, key, (uint64_t)st.st_size,
				      &be->stats.cache, fs_cache_fetch, f->bf);
	if (ret >= 0 && (be->ops->caps & BE_CAP_LONG_FETCH))
		cache_file_long_fetches(f->cf);
	if (ret < 0)
		backend_release(f->bf);
	return ret;
}

int fs_open_backend(struct fs *fs, struct node *n, struct fs_file *f, struct fuse_file_info *fi)
{
	bool writing = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
	struct stat st;
	char *path;
	int ret;

	if (writing && n->view->readonly)
		return -EROFS;
	ret = fs_node_path(fs, n, NULL, &path);
	if (ret < 0)
		return ret;
	/* the kernel's __FMODE_EXEC (an execve's open) is no open(2) flag: openat2 refuses it */
	ret = backend_open(&f->bf, n->view->be, path,
			   (fi->flags & ~FS_FMODE_EXEC) | (n->view->readonly ? BE_O_TRUST : 0));
	free(path);
	if (ret < 0)
		return ret;
	if (!writing && (n->view->be->ops->caps & BE_CAP_REMOTE) && fs->cache) {
		ret = fs_open_cached(fs, f);
		if (ret < 0)
			return ret;
	}
	if (f->cf)
		fs_prefetch_opened(fs, n);
	f->backing_id = fs_passthrough_get(fs, n, f->cf ? cache_file_fd(f->cf)
							 : backend_local_fd(f->bf),
					   n->view->readonly);
	if (f->backing_id > 0) {
		atomic_fetch_add(&n->view->be->stats.passthrough_opens, 1);
		return 0;
	}
	if (n->view->readonly)
		fi->keep_cache = 1;
	else if (backend_fgetattr(f->bf, &st) == 0)
		fi->keep_cache = fs_keep_cache(fs, n, &st) && !(fi->flags & O_TRUNC);
	return 0;
}

static void fs_file_opened(struct fs *fs, struct fs_file *f)
{
	atomic_fetch_add(&fs->open_files, 1);
	pthread_mutex_lock(&fs->cache_lock);
	f->anext = fs->all_opens;
	if (f->anext)
		f->anext->aprev = f;
	fs->all_opens = f;
	if (f->bf) {
		f->onext = f->node->opens;
		if (f->onext)
			f->onext->oprev = f;
		f->node->opens = f;
	}
	pthread_mutex_unlock(&fs->cache_lock);
}

static void fs_file_closing(struct fs *fs, struct fs_file *f)
{
	pthread_mutex_lock(&fs->cache_lock);
	if (f->aprev)
		f->aprev->anext = f->anext;
	else
		fs->all_opens = f->anext;
	if (f->anext)
		f->anext->aprev = f->aprev;
	if (f->bf) {
		if (f->oprev)
			f->oprev->onext = f->onext;
		else
			f->node->opens = f->onext;
		if (f->onext)
			f->onext->oprev = f->oprev;
	}
	pthread_mutex_unlock(&fs->cache_lock);
}

static void fs_release_file(struct fs *fs, struct fs_file *f)
{
	struct stat st;

	fs_file_closing(fs, f);
	if (f->bf)
		fs_passthrough_put(fs, f->node, f->backing_id);
	if (f->bf && f->written && backend_fgetattr(f->bf, &st) == 0)
		fs_keep_cache(fs, f->node, &st);	/* our own writes are in the kernel's cache */
	cache_file_close(f->cf);	/* before the backend file its read-ahead uses */
	backend_release(f->bf);
	free(f->buf);
	free(f);
	atomic_fetch_sub(&fs->open_files, 1);
}

void fs_release_all(struct fs *fs)
{
	while (fs->all_opens)
		fs_release_file(fs, fs->all_opens);
}

static void fs_reply_open(fuse_req_t req, struct fs *fs, struct fs_file *f,
			  struct fuse_file_info *fi)
{
	int ret;

	fs_file_opened(fs, f);
	fi->fh = (uint64_t)(uintptr_t)f;
	ret = f->backing_id > 0 ? fs_passthrough_reply_open(req, fi, f->backing_id)
				: fuse_reply_open(req, fi);
	if (ret == -ENOENT)
		fs_release_file(fs, f);
}

/*
 * An open that failed for want of file descriptors says so once in the
 * log: the opener gets EMFILE (or ENFILE), and mlfs goes on serving.
 */
static void fs_note_fds(int ret)
{
	static atomic_flag said = ATOMIC_FLAG_INIT;
	struct rlimit rl;

	if ((ret != -EMFILE && ret != -ENFILE) || atomic_flag_test_and_set(&said))
		return;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		rl.rlim_cur = 0;
	log_warn("out of file descriptors (%s, the limit is %llu): opens fail with %s until files "
		 "are closed; raise the daemon's RLIMIT_NOFILE (ulimit -Hn) to serve more at once",
		 ret == -EMFILE ? "this process" : "the whole system",
		 (unsigned long long)rl.rlim_cur, ret == -EMFILE ? "EMFILE" : "ENFILE");
}

void fs_open_common(fuse_req_t req, struct node *n, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_file *f = calloc(1, sizeof(*f));
	int ret;

	if (!f) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	f->node = n;
	ret = fs_kind_of(n)->open_file(fs, n, f, fi);
	if (ret < 0) {
		fs_note_fds(ret);
		free(f->buf);
		free(f);
		fuse_reply_err(req, -ret);
		return;
	}
	fs_reply_open(req, fs, f, fi);
}

void fs_create_common(fuse_req_t req, struct node *p, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct backend_cred cred = fs_cred(req);
	struct fs_file *f = calloc(1, sizeof(*f));
	struct fuse_entry_param e = { 0 };
	char *path = NULL;
	int ret = f ? fs_new_path(fs, p, name, &path) : -ENOMEM;

	if (ret == 0)
		ret = backend_create_file(&f->bf, p->view->be, path, fi->flags, mode, &cred);
	free(path);
	if (ret == 0 && (ret = backend_fgetattr(f->bf, &e.attr)) == 0)
		ret = fs_node_get(fs, p, name, &f->node);
	if (ret < 0) {
		fs_note_fds(ret);
		if (f)
			backend_release(f->bf);
		free(f);
		fuse_reply_err(req, -ret);
		return;
	}
	/* The kernel writes a new local file itself from the start, when it can. */
	f->backing_id = fs_passthrough_get(fs, f->node, backend_local_fd(f->bf), false);
	if (f->backing_id > 0)
		atomic_fetch_add(&p->view->be->stats.passthrough_opens, 1);
	fs_keep_cache(fs, f->node, &e.attr);
	fs_node_changed(fs, p);
	fs_node_attr(f->node, &e.attr);
	e.ino = fs_nodeid(fs, f->node);
	e.entry_timeout = fs_timeout(f->node);
	e.attr_timeout = fs_attr_timeout(f->node, &e.attr);
	fs_file_opened(fs, f);
	fi->fh = (uint64_t)(uintptr_t)f;
	if ((f->backing_id > 0 ? fs_passthrough_reply_create(req, &e, fi, f->backing_id)
			       : fuse_reply_create(req, &e, fi)) == -ENOENT) {
		fs_node_forget(fs, f->node, 1);
		fs_release_file(fs, f);
	}
}

/* A per-thread buffer for reads, so a 1 MiB read costs no allocation. */
static pthread_key_t fs_buf_key;
static pthread_once_t fs_buf_once = PTHREAD_ONCE_INIT;

struct fs_buf {
	size_t cap;
	char data[];
};

static void fs_buf_key_init(void)
{
	pthread_key_create(&fs_buf_key, free);
}

static char *fs_thread_buf(size_t size)
{
	struct fs_buf *b;

	pthread_once(&fs_buf_once, fs_buf_key_init);
	b = pthread_getspecific(fs_buf_key);
	if (!b || b->cap < size) {
		free(b);
		b = malloc(sizeof(*b) + size);
		pthread_setspecific(fs_buf_key, b);
		if (!b)
			return NULL;
		b->cap = size;
	}
	return b->data;
}

static void fs_reply_pieces(void *arg, const struct iovec *iov, int cnt)
{
	fuse_reply_iov(arg, iov, cnt);
}

/*
 * Answers a read of a remote file straight from the disk cache: from the
 * blocks just fetched, still in memory, or from the cache's mapping of the
 * data file; the kernel copies the reply from there, with no copy in
 * between.  Returns false to read the usual way.
 */
static bool fs_read_cached(fuse_req_t req, struct fs_file *f, size_t size, off_t off)
{
	ssize_t n = cache_file_read_iov(f->cf, size, off, fs_reply_pieces, req);

	if (n == -ENOTSUP)
		return false;
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	return true;
}

/*
 * Copies what a virtual file holds at @off into @buf.  The reply goes from
 * the copy: once it is written the reader may close the file, and a
 * RELEASE in another thread free f->buf while this thread is still
 * returning from writev (ASan checks the iovec after the call, and
 * reported exactly that).
 */
static ssize_t fs_read_virtual(struct fs_file *f, char *buf, size_t size, off_t off)
{
	size_t start = (size_t)off < f->len ? (size_t)off : f->len;
	size_t len = f->len - start < size ? f->len - start : size;

	memcpy(buf, f->buf + start, len);
	return (ssize_t)len;
}

void fs_read_common(fuse_req_t req, struct node *node, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs_file *f = fs_file_of(fi);
	char *buf;
	ssize_t n;

	(void)node;
	if (f->cf && fs_read_cached(req, f, size, off))
		return;
	buf = fs_thread_buf(size);
	if (!buf)
		n = -ENOMEM;
	else if (!f->bf)
		n = fs_read_virtual(f, buf, size, off);
	else if (f->cf)
		n = cache_file_read(f->cf, buf, size, off);
	else
		n = backend_pread(f->bf, buf, size, off);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

void fs_write_common(fuse_req_t req, struct node *node, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct fs_file *f = fs_file_of(fi);
	ssize_t n = f->bf ? backend_pwrite(f->bf, buf, size, off) : -EBADF;

	(void)node;
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
		return;
	}
	f->written = true;
	fs_node_changed(fs_of(req), f->node);
	fuse_reply_write(req, (size_t)n);
}

void fs_flush_common(fuse_req_t req, struct node *node, struct fuse_file_info *fi)
{
	struct fs_file *f = fs_file_of(fi);

	(void)node;
	fuse_reply_err(req, f->bf ? -backend_flush(f->bf) : 0);
}

void fs_release_common(fuse_req_t req, struct node *node, struct fuse_file_info *fi)
{
	(void)node;
	fs_release_file(fs_of(req), fs_file_of(fi));
	fuse_reply_err(req, 0);
}

void fs_fsync_common(fuse_req_t req, struct node *node, int datasync, struct fuse_file_info *fi)
{
	struct fs_file *f = fs_file_of(fi);

	(void)node;
	fuse_reply_err(req, f->bf ? -backend_fsync(f->bf, datasync) : 0);
}

/* A draft of jobs/ is made durable when it is accepted: nothing to sync. */
void fs_fsync_jobs(fuse_req_t req, struct node *node, int datasync, struct fuse_file_info *fi)
{
	(void)node;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);
}
