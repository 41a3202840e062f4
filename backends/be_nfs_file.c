/*
 * be_nfs_file.c - the nfs backend's open files and attribute changes
 * (be_nfs.c says how calls reach the server): an open file keeps its own
 * context and handle, reopened on a fresh context when the connection
 * breaks (be_nfs_file_call); reads and writes go in chunks of at most
 * BE_NFS_CHUNK_MAX; setattr changes size, mode, owner and times through the
 * handle when there is one, else on the path, never following a symlink.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <poll.h>
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

#include "be_nfs_int.h"
#include "log.h"
#include "mono.h"

#define BE_NFS_SET_TIMES (BE_SET_ATIME | BE_SET_MTIME | BE_SET_ATIME_NOW | BE_SET_MTIME_NOW)

static void be_nfs_tv(struct timeval *tv, const struct timespec *ts)
{
	tv->tv_sec = ts->tv_sec;
	tv->tv_usec = ts->tv_nsec / 1000;
}

/* utimes without UTIME_OMIT: a time left alone is set to what it is now. */
static int be_nfs_set_times(struct nfs_context *nfs, const char *path, const struct stat *st,
			    unsigned int to_set)
{
	struct timeval tv[2], now;
	struct nfs_stat_64 cur;
	int ret;

	gettimeofday(&now, NULL);
	if ((to_set & (BE_SET_ATIME | BE_SET_ATIME_NOW)) == 0 ||
	    (to_set & (BE_SET_MTIME | BE_SET_MTIME_NOW)) == 0) {
		ret = nfs_lstat64(nfs, path, &cur);
		if (ret < 0)
			return ret;
		tv[0] = (struct timeval){ (time_t)cur.nfs_atime, (suseconds_t)(cur.nfs_atime_nsec / 1000) };
		tv[1] = (struct timeval){ (time_t)cur.nfs_mtime, (suseconds_t)(cur.nfs_mtime_nsec / 1000) };
	}
	if (to_set & BE_SET_ATIME)
		be_nfs_tv(&tv[0], &st->st_atim);
	if (to_set & BE_SET_MTIME)
		be_nfs_tv(&tv[1], &st->st_mtim);
	if (to_set & BE_SET_ATIME_NOW)
		tv[0] = now;
	if (to_set & BE_SET_MTIME_NOW)
		tv[1] = now;
	return nfs_lutimes(nfs, path, tv);
}

/* Makes the changes of @to_set: through @fh when not NULL, else on @path (never followed). */
static int be_nfs_set(struct nfs_context *nfs, struct nfsfh *fh, const char *path,
		      const struct stat *st, unsigned int to_set)
{
	int uid = (to_set & BE_SET_UID) ? (int)st->st_uid : -1;
	int gid = (to_set & BE_SET_GID) ? (int)st->st_gid : -1;
	int ret = 0;

	if (to_set & BE_SET_SIZE)
		ret = fh ? nfs_ftruncate(nfs, fh, (uint64_t)st->st_size)
			 : nfs_truncate(nfs, path, (uint64_t)st->st_size);
	if (ret == 0 && (to_set & BE_SET_MODE))
		ret = fh ? nfs_fchmod(nfs, fh, (int)(st->st_mode & 07777))
			 : nfs_lchmod(nfs, path, (int)(st->st_mode & 07777));
	if (ret == 0 && (to_set & (BE_SET_UID | BE_SET_GID)))
		ret = fh ? nfs_fchown(nfs, fh, uid, gid) : nfs_lchown(nfs, path, uid, gid);
	if (ret == 0 && (to_set & BE_NFS_SET_TIMES))
		ret = be_nfs_set_times(nfs, path, st, to_set);
	return ret;
}

static int be_nfs_do_setattr(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	return be_nfs_set(nfs, NULL, path, a->set, a->to_set);
}

/* ---- open files ---- */

static int be_nfs_file_new(struct be_nfs_file **out, struct backend *be, const char *full,
			   int flags)
{
	struct be_nfs_file *f = calloc(1, sizeof(*f));

	if (!f || !(f->path = strdup(full))) {
		free(f);
		return -ENOMEM;
	}
	pthread_mutex_init(&f->lock, NULL);
	f->base.be = be;
	f->flags = flags & O_ACCMODE;
	f->trust = (flags & BE_O_TRUST) != 0;
	*out = f;
	return 0;
}

static void be_nfs_file_free(struct be_nfs_file *f)
{
	if (!f)
		return;
	be_nfs_file_drop(f, false);
	pthread_mutex_destroy(&f->lock);
	free(f->path);
	free(f->shown_path);
	free(f);
}

/* ---- the open files: an unlink of one hides it until its last close ---- */

static void be_nfs_files_add(struct be_nfs_file *f)
{
	struct be_nfs *nb = be_nfs(f->base.be);

	pthread_mutex_lock(&nb->files_lock);
	f->prev_open = NULL;
	f->next_open = nb->files;
	if (nb->files)
		nb->files->prev_open = f;
	nb->files = f;
	f->listed = true;
	pthread_mutex_unlock(&nb->files_lock);
}

/* Takes @f out of the open files: true when it was the last open of a hidden name. */
static bool be_nfs_files_del(struct be_nfs_file *f)
{
	struct be_nfs *nb = be_nfs(f->base.be);
	bool last;

	if (!f->listed)
		return false;
	pthread_mutex_lock(&nb->files_lock);
	if (f->prev_open)
		f->prev_open->next_open = f->next_open;
	else
		nb->files = f->next_open;
	if (f->next_open)
		f->next_open->prev_open = f->prev_open;
	f->listed = false;
	last = f->hidden;
	for (struct be_nfs_file *g = nb->files; last && g; g = g->next_open)
		if (strcmp(g->path, f->path) == 0)
			last = false;
	pthread_mutex_unlock(&nb->files_lock);
	return last;
}

/* The hidden name's tag: random, so two mounts of one export never pick the same. */
static uint64_t be_nfs_hidden_tag(void)
{
	uint64_t tag;

	if (getrandom(&tag, sizeof(tag), GRND_NONBLOCK) != sizeof(tag))
		tag = (uint64_t)mono_ns() ^ ((uint64_t)getpid() << 32);
	return tag;
}

/*
 * NFS removes a file whatever has it open (a handle to it then answers
 * ESTALE), so an unlink of a file open here renames it instead, as the
 * kernel's NFS client does (its .nfsXXXX files), and its last close
 * removes it.
 */
int be_nfs_hide_open(struct be_nfs *nb, const char *path)
{
	struct be_nfs_args a = { .flags = RENAME_NOREPLACE };	/* never over another file */
	char *full, *hidden = NULL, **copies = NULL;
	size_t n = 0, k = 0;
	int ret = be_nfs_join(&full, nb->root, path);

	if (ret < 0)
		return ret;
	pthread_mutex_lock(&nb->files_lock);
	for (struct be_nfs_file *g = nb->files; g; g = g->next_open)
		n += !g->hidden && strcmp(g->path, full) == 0;
	if (n == 0)
		goto out;
	ret = -ENOMEM;
	if (asprintf(&hidden, "%.*s/.mlfs-unlinked-%016" PRIx64,
		     (int)(strrchr(full, '/') - full), full, be_nfs_hidden_tag()) < 0) {
		hidden = NULL;
		goto out;
	}
	if (!(copies = calloc(n, sizeof(*copies))))
		goto out;
	for (k = 0; k < n; k++)
		if (!(copies[k] = strdup(hidden)))
			goto out;
	a.other = hidden;
	ret = be_nfs_call(nb, path, be_nfs_do_rename, &a, "unlink");
	if (ret < 0)
		goto out;
	for (struct be_nfs_file *g = nb->files; g; g = g->next_open) {
		if (g->hidden || strcmp(g->path, full) != 0)
			continue;
		pthread_mutex_lock(&g->lock);
		g->shown_path = g->path;	/* kept: a log line may still be reading it */
		g->path = copies[--k];
		g->hidden = true;
		pthread_mutex_unlock(&g->lock);
	}
	ret = 1;
out:
	pthread_mutex_unlock(&nb->files_lock);
	while (k > 0)
		free(copies[--k]);
	free(copies);
	free(hidden);
	free(full);
	return ret;
}

static int be_nfs_do_remove(struct be_nfs_file *f, struct nfs_context *nfs, void *arg)
{
	(void)arg;
	return nfs_unlink(nfs, f->path);
}

/* What an open needs: how, and for a creation who and with which mode. */
struct be_nfs_open_args {
	int flags;
	bool create;
	mode_t mode;
	const struct backend_cred *cred;
};

/* Opens or creates f->path on @nfs into f->fh; the attributes at open when trusted. */
static int be_nfs_do_open(struct be_nfs_file *f, struct nfs_context *nfs, void *arg)
{
	struct be_nfs_open_args *o = arg;
	int open_flags = (o->flags & (O_ACCMODE | O_TRUNC | O_SYNC)) | O_NOFOLLOW;
	struct nfs_stat_64 s;
	int ret = -EEXIST;

	if (o->create) {
		backend_request(f->base.be);
		ret = nfs_create(nfs, f->path, (open_flags & ~O_NOFOLLOW) | O_EXCL,
				 (int)(o->mode & 07777), &f->fh);
		if (ret == 0)
			be_nfs_set_owner(nfs, f->path, o->cred);
	}
	if (ret == -EEXIST && !(o->create && (o->flags & O_EXCL))) {
		backend_request(f->base.be);
		ret = nfs_open2(nfs, f->path, open_flags, 0, &f->fh);
	}
	if (ret < 0) {
		f->fh = NULL;
		return ret;
	}
	o->create = false;	/* a retry after this opens what was made */
	if (!f->trust)
		return 0;
	backend_request(f->base.be);
	ret = nfs_fstat64(nfs, f->fh, &s);
	if (ret < 0)
		return ret;
	f->size = (int64_t)s.nfs_size;
	f->mtime_ns = (int64_t)s.nfs_mtime * 1000000000ll + (int64_t)s.nfs_mtime_nsec;
	return 0;
}

/* Takes a context for the new file and opens it there, again on a fresh one if it breaks. */
static int be_nfs_open_with(struct backend_file **out, struct backend *be, const char *path,
			    struct be_nfs_open_args *o)
{
	struct be_nfs *nb = be_nfs(be);
	struct be_nfs_file *f;
	int64_t started;
	char *full;
	int ret = be_nfs_join(&full, nb->root, path);

	if (ret < 0)
		return ret;
	ret = be_nfs_file_new(&f, be, full, o->flags);
	free(full);
	if (ret < 0)
		return ret;
	if ((o->flags & O_ACCMODE) != O_RDONLY || o->create) {
		stat_memo_forget_all(nb->memo);		/* it may change */
	} else if (f->trust && stat_memo_get(nb->memo, path, &f->st) && S_ISREG(f->st.st_mode)) {
		/* seen in this mount and trusted: its version is known, the server is asked
		 * nothing until a read misses the cache (be_nfs_file_call opens it then) */
		f->remembered = true;
		f->size = (int64_t)f->st.st_size;
		f->mtime_ns = (int64_t)f->st.st_mtim.tv_sec * 1000000000ll + f->st.st_mtim.tv_nsec;
		be_nfs_files_add(f);
		*out = &f->base;
		return 0;
	}
	started = mono_ns();
	for (int attempt = 0; !(ret = be_nfs_is_down(nb) ? -EIO : 0);) {
		int64_t t0 = mono_ns();
		bool proven = false;

		ret = be_nfs_ctx_get(nb, &f->ctx);
		if (ret == 0) {
			proven = f->ctx->proven;
			ret = be_nfs_do_open(f, f->ctx->nfs, o);
		} else {
			f->ctx = NULL;
		}
		if (!be_nfs_is_transport(ret))
			break;
		be_nfs_file_drop(f, true);
		if (!be_nfs_again(nb, ret, proven, t0, &attempt))
			break;
	}
	be_nfs_mark_down(nb, ret, started);
	ret = be_nfs_errno(ret);
	if (ret < 0) {
		be_nfs_log(nb, o->create ? "create" : "open", f->path, ret);
		be_nfs_file_drop(f, be_nfs_is_transport(ret));
		be_nfs_file_free(f);
		return ret;
	}
	be_nfs_files_add(f);
	*out = &f->base;
	return 0;
}

int be_nfs_open(struct backend_file **out, struct backend *be, const char *path,
		       int flags)
{
	struct be_nfs_open_args o = { .flags = flags };

	return be_nfs_open_with(out, be, path, &o);
}

int be_nfs_create_file(struct backend_file **out, struct backend *be, const char *path,
			      int flags, mode_t mode, const struct backend_cred *cred)
{
	struct be_nfs_open_args o = { .flags = flags, .create = true, .mode = mode, .cred = cred };

	return be_nfs_open_with(out, be, path, &o);
}

/* One READ or WRITE of a piece of the caller's buffer. */
struct be_nfs_io {
	void *buf;
	const void *cbuf;
	uint64_t len;
	uint64_t off;
};

static int be_nfs_do_pread(struct be_nfs_file *f, struct nfs_context *nfs, void *arg)
{
	struct be_nfs_io *io = arg;

	return nfs_pread(nfs, f->fh, io->off, io->len, io->buf);
}

static int be_nfs_do_pwrite(struct be_nfs_file *f, struct nfs_context *nfs, void *arg)
{
	struct be_nfs_io *io = arg;

	f->written = true;
	return nfs_pwrite(nfs, f->fh, io->off, io->len, io->cbuf);
}

/*
 * One READ of a file opened read-only under a source tree, on a context of
 * the pool rather than the file's own: the disk cache's read-ahead fetches
 * several pieces of one file at once, and on the file's context they would
 * queue behind its lock.  Any failure is left to the caller, which tries
 * again on the file's own context (with its retries and reopening).
 */
static int be_nfs_pread_pooled(struct be_nfs_file *f, struct be_nfs_io *io)
{
	struct be_nfs *nb = be_nfs(f->base.be);
	struct be_nfs_ctx *c;
	struct nfsfh *fh;
	int ret = be_nfs_ctx_get(nb, &c);

	if (ret < 0)
		return ret;
	backend_request(&nb->base);
	ret = nfs_open2(c->nfs, f->path, O_RDONLY | O_NOFOLLOW, 0, &fh);
	if (ret == 0) {
		backend_request(&nb->base);
		ret = nfs_pread(c->nfs, fh, io->off, io->len, io->buf);
		nfs_close(c->nfs, fh);
	}
	be_nfs_ctx_put(nb, c, be_nfs_is_transport(ret));
	return ret;
}

ssize_t be_nfs_pread(struct backend_file *bf, void *buf, size_t len, off_t off)
{
	struct be_nfs_file *f = be_nfs_file(bf);
	bool pooled = f->trust && (f->flags & O_ACCMODE) == O_RDONLY;
	size_t done = 0;

	while (done < len) {
		struct be_nfs_io io = { .buf = (char *)buf + done, .off = (uint64_t)off + done };
		int n = -1;

		io.len = len - done < BE_NFS_CHUNK_MAX ? len - done : BE_NFS_CHUNK_MAX;
		if (pooled && !be_nfs_is_down(be_nfs(bf->be)))
			n = be_nfs_pread_pooled(f, &io);
		if (n < 0)
			n = be_nfs_file_call(f, be_nfs_do_pread, &io, "read");
		if (n < 0)
			return done ? (ssize_t)done : n;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t be_nfs_pwrite(struct backend_file *bf, const void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		struct be_nfs_io io = { .cbuf = (const char *)buf + done,
					.off = (uint64_t)off + done };
		int n;

		io.len = len - done < BE_NFS_CHUNK_MAX ? len - done : BE_NFS_CHUNK_MAX;
		n = be_nfs_file_call(be_nfs_file(bf), be_nfs_do_pwrite, &io, "write");
		if (n < 0)
			return done ? (ssize_t)done : n;
		if (n == 0)
			return done ? (ssize_t)done : -EIO;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int be_nfs_do_fstat(struct be_nfs_file *f, struct nfs_context *nfs, void *arg)
{
	return nfs_fstat64(nfs, f->fh, arg);
}

int be_nfs_fgetattr(struct backend_file *bf, struct stat *st)
{
	struct nfs_stat_64 s;
	int ret;

	if (be_nfs_file(bf)->remembered) {	/* read-only and trusted: what the memo said */
		*st = be_nfs_file(bf)->st;
		ret = 0;
	} else if ((ret = be_nfs_file_call(be_nfs_file(bf), be_nfs_do_fstat, &s, "stat")) == 0) {
		be_nfs_stat_fill(st, &s);
	}
	pthread_mutex_lock(&be_nfs_file(bf)->lock);
	if (ret == 0 && be_nfs_file(bf)->hidden && st->st_nlink > 0)
		st->st_nlink--;		/* its hidden name is no link of the user's */
	pthread_mutex_unlock(&be_nfs_file(bf)->lock);
	return ret;
}

static int be_nfs_do_fsync(struct be_nfs_file *f, struct nfs_context *nfs, void *arg)
{
	(void)arg;
	return nfs_fsync(nfs, f->fh);
}

int be_nfs_fsync(struct backend_file *bf, int datasync)
{
	(void)datasync;
	return be_nfs_file_call(be_nfs_file(bf), be_nfs_do_fsync, NULL, "fsync");
}

/* close(2) reports a failed COMMIT of what was written. */
int be_nfs_flush(struct backend_file *bf)
{
	return be_nfs_file(bf)->written ? be_nfs_fsync(bf, 0) : 0;
}

void be_nfs_release(struct backend_file *bf)
{
	struct be_nfs_file *f = be_nfs_file(bf);

	if (be_nfs_files_del(f))	/* the last close of a file unlinked while open */
		be_nfs_file_call(f, be_nfs_do_remove, NULL, "unlink");
	if (f->written)	/* its size and mtime changed: stats taken meanwhile too */
		stat_memo_forget_all(be_nfs(bf->be)->memo);
	be_nfs_file_free(f);
}

static int be_nfs_do_fsetattr(struct be_nfs_file *f, struct nfs_context *nfs, void *arg)
{
	struct be_nfs_args *a = arg;

	return be_nfs_set(nfs, f->fh, f->path, a->set, a->to_set);
}

int be_nfs_setattr(struct backend *be, const char *path, struct backend_file *f,
			  const struct stat *st, unsigned int to_set)
{
	struct be_nfs_args a = { .set = st, .to_set = to_set };

	stat_memo_forget_all(be_nfs(be)->memo);
	if (f)
		return be_nfs_file_call(be_nfs_file(f), be_nfs_do_fsetattr, &a, "setattr");
	return be_nfs_call(be_nfs(be), path, be_nfs_do_setattr, &a, "setattr");
}

int be_nfs_cache_key(struct backend_file *bf, char *buf, size_t size)
{
	struct be_nfs_file *f = be_nfs_file(bf);
	struct be_nfs *nb = be_nfs(bf->be);
	int n;

	if (!f->trust || f->written)
		return -ENOTSUP;	/* datastores/ is read directly */
	n = snprintf(buf, size, "nfs\n%s:%s\n%s\n%" PRId64 ":%" PRId64, nb->address, nb->export,
		     f->path, f->size, f->mtime_ns);
	if (n < 0)
		return -EINVAL;
	return (size_t)n >= size ? -ENAMETOOLONG : n;
}
