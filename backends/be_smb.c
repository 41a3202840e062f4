/*
 * be_smb.c - a datastore that is a folder in an SMB share (Samba, Windows,
 * a NAS), reached in user space through libsmbclient: no kernel mount.
 *
 * A path of the datastore becomes a URL smb://HOST/SHARE/ROOT/PATH
 * (be_smb_url).  The root rule of CloudBender holds by construction: fs/
 * sends canonical paths with no "..", and the URL always starts with the
 * root, so nothing above it can be named.  The server resolves any symlink
 * on its own side (SMB2 shows none to clients); mlfs never follows one
 * itself.
 *
 * Every call runs through be_smb_conn.c, which holds the pool of
 * libsmbclient contexts and the process-wide library lock, logs in,
 * retries a call whose connection broke on a fresh context, maps
 * libsmbclient's errno and logs failures; this file says what each call
 * does on the share, and checks and reads a datastore's keys.  Nothing
 * touches the network at create: a server down at mount time answers EIO
 * until it is back.
 *
 * Threading.  A call on a path borrows a context from the pool.  An open
 * file keeps the context it was opened on for its lifetime (an SMBCFILE
 * belongs to one context) and a mutex that serialises its calls, held
 * across network I/O; so is be_smb_lib, which every call into the library
 * holds (be_smb_conn.c says why): SMB calls of all datastores are
 * serialised in this process.
 *
 * SMB has no Unix owners: uid/gid/mode come from the datastore's keys
 * (fs/ applies them; no BE_CAP_OWNERS), chown is EPERM, chmod is passed to
 * the server and ignored where it refuses, symlink and link are EPERM.
 * libsmbclient has no fsync; its writes return once the server has them,
 * so flush and fsync are left to the wrappers (no-ops).  The password is
 * kept in memory only for the auth callback and never logged.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <libsmbclient.h>

#include "be_smb_int.h"
#include "log.h"
#include "mono.h"
#include "password.h"
#include "path.h"

#define BE_SMB_OPEN_FLAGS	(O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC)

/* ---- validation ---- */

static void be_smb_validate_address(const struct datastore_config *cfg, struct diag *d)
{
	int line = cfg->line;
	const char *v = config_get(cfg, "address", &line);
	unsigned int port;
	char *host = NULL;

	if (!v) {
		diag_add(d, cfg->file, cfg->line, "[datastore %s] address: missing (the server: host "
			 "or host:port)", cfg->name);
	} else if (be_smb_parse_address(v, &host, &port) == -EINVAL) {
		diag_add(d, cfg->file, line, "[datastore %s] address: '%s' is not host or "
			 "host:port (a port is a number from 1 to 65535)", cfg->name, v);
	}
	free(host);
}

static void be_smb_validate_share(const struct datastore_config *cfg, struct diag *d)
{
	int line = cfg->line;
	const char *v = config_get(cfg, "share", &line);

	if (!v || !*v)
		diag_add(d, cfg->file, v ? line : cfg->line, "[datastore %s] share: missing (the share's name)",
			 cfg->name);
	else if (strpbrk(v, "/\\"))
		diag_add(d, cfg->file, line, "[datastore %s] share: '%s' is not a share name "
			 "(a folder inside it goes in root)", cfg->name, v);
	line = cfg->line;
	v = config_get(cfg, "root", &line);
	if (v && path_has_dotdot(v))
		diag_add(d, cfg->file, line, "[datastore %s] root: '%s' has a '..' component",
			 cfg->name, v);
}

static int be_smb_validate(const struct datastore_config *cfg, struct diag *d)
{
	size_t before = d->n;

	be_smb_validate_address(cfg, d);
	be_smb_validate_share(cfg, d);
	password_validate(cfg, true, d);
	return d->n > before ? -EINVAL : 0;
}

/* ---- setup ---- */

static char *be_smb_dup_key(const struct datastore_config *cfg, const char *key, bool *nomem)
{
	const char *v = config_get(cfg, key, NULL);
	char *s = v ? strdup(v) : NULL;

	if (v && !s)
		*nomem = true;
	return s;
}

static void be_smb_free(struct be_smb *sb)
{
	be_smb_lib_lock();
	for (unsigned int i = 0; i < sb->n_idle; i++)
		smbc_free_context(sb->idle[i], 1);
	be_smb_lib_unlock();
	be_smb_addr_free(&sb->addr);
	if (sb->password) {
		explicit_bzero(sb->password, strlen(sb->password));
		free(sb->password);
	}
	free(sb->user);
	free(sb->workgroup);
	stat_memo_free(sb->memo);
	pthread_cond_destroy(&sb->close_cond);
	pthread_mutex_destroy(&sb->open_lock);
	pthread_mutex_destroy(&sb->lock);
	free(sb);
}

static int be_smb_create(struct backend **out, const struct datastore_config *cfg)
{
	struct be_smb *sb = calloc(1, sizeof(*sb));
	bool nomem = false;
	int ret;

	if (!sb)
		return -ENOMEM;
	pthread_mutex_init(&sb->lock, NULL);
	pthread_mutex_init(&sb->open_lock, NULL);
	mono_cond_init(&sb->close_cond);
	sb->memo = stat_memo_new(BE_SMB_MEMO_MAX);	/* NULL: every open asks the server */
	sb->timeout_ms = (int)(cfg->timeout > 0 ? cfg->timeout : 30) * 1000;
	sb->retries = (int)(cfg->retries >= 0 ? cfg->retries : 3);
	ret = be_smb_addr_init(&sb->addr, cfg);
	sb->user = be_smb_dup_key(cfg, "username", &nomem);
	sb->workgroup = be_smb_dup_key(cfg, "workgroup", &nomem);
	if (ret == 0)
		ret = password_read(cfg, &sb->password);
	if (ret == 0 && nomem)
		ret = -ENOMEM;
	if (ret < 0) {
		be_smb_free(sb);
		return ret;
	}
	*out = &sb->base;
	return 0;
}

static void be_smb_destroy(struct backend *be)
{
	be_smb_free(be_smb(be));
}

/* ---- metadata ---- */

static int be_smb_do_stat(SMBCCTX *ctx, char *url, void *arg)
{
	return smbc_getFunctionStat(ctx)(ctx, url, arg) < 0 ? be_smb_raw() : 0;
}

static int be_smb_getattr(struct backend *be, const char *path, struct stat *st)
{
	int ret = be_smb_call(be_smb(be), "stat", path, be_smb_do_stat, st);

	if (ret == 0)
		stat_memo_put(be_smb(be)->memo, path, st);
	return ret;
}

static int be_smb_getattr_known(struct backend *be, const char *path, struct stat *st)
{
	return stat_memo_get(be_smb(be)->memo, path, st) ? 0 : -EAGAIN;
}

struct be_smb_list {
	struct stat_memo *memo;
	const char *path;
	backend_fill_fn *fill;
	void *payload;
	int filled;		/* what fill returned to stop the listing */
};

/* libsmbclient fetches the whole listing at opendir: no network after it. */
static int be_smb_do_readdir(SMBCCTX *ctx, char *url, void *arg)
{
	struct be_smb_list *l = arg;
	SMBCFILE *dir = smbc_getFunctionOpendir(ctx)(ctx, url);
	const struct libsmb_file_info *e;
	struct stat st;

	if (!dir)
		return be_smb_raw();
	while (!l->filled && (memset(&st, 0, sizeof(st)),
			      e = smbc_getFunctionReaddirPlus2(ctx)(ctx, dir, &st))) {
		if (!e->name || strcmp(e->name, ".") == 0 || strcmp(e->name, "..") == 0)
			continue;
		stat_memo_put_child(l->memo, l->path, e->name, &st);
		l->filled = l->fill(l->payload, e->name, &st);
	}
	smbc_getFunctionClosedir(ctx)(ctx, dir);
	return 0;
}

static int be_smb_readdir(struct backend *be, const char *path, backend_fill_fn *fill,
			  void *payload)
{
	struct be_smb_list l = { .memo = be_smb(be)->memo, .path = path, .fill = fill,
				 .payload = payload };
	int ret = be_smb_call(be_smb(be), "list", path, be_smb_do_readdir, &l);

	return ret < 0 ? ret : l.filled;
}

static int be_smb_do_statvfs(SMBCCTX *ctx, char *url, void *arg)
{
	return smbc_getFunctionStatVFS(ctx)(ctx, url, arg) < 0 ? be_smb_raw() : 0;
}

/*
 * libsmbclient 4.17 gives the server's bytes a sector as f_bsize and its
 * sectors an allocation unit as f_frsize (512 and 2 from a Samba share on
 * ext4), and no name length: df would say the share is 1/512 of its size,
 * and pathconf(_PC_NAME_MAX) 0.  So the unit is their product, in bytes,
 * as statvfs means it, and a name is 255 bytes at most (SMB's 255
 * characters of UTF-16; Samba on Linux, 255 bytes).
 */
static int be_smb_statfs(struct backend *be, const char *path, struct statvfs *sv)
{
	int ret;

	(void)path;
	memset(sv, 0, sizeof(*sv));
	ret = be_smb_call(be_smb(be), "statvfs", "", be_smb_do_statvfs, sv);
	if (ret < 0)
		return ret;
	if (sv->f_frsize > 0 && sv->f_frsize < sv->f_bsize)	/* a count of sectors */
		sv->f_frsize *= sv->f_bsize;
	if (sv->f_frsize > 0)
		sv->f_bsize = sv->f_frsize;
	if (sv->f_namemax == 0)
		sv->f_namemax = NAME_MAX;
	return 0;
}

static int be_smb_do_mkdir(SMBCCTX *ctx, char *url, void *arg)
{
	return smbc_getFunctionMkdir(ctx)(ctx, url, *(mode_t *)arg) < 0 ? be_smb_raw() : 0;
}

static int be_smb_mkdir(struct backend *be, const char *path, mode_t mode,
			const struct backend_cred *cred)
{
	(void)cred;	/* no owners on SMB: the share's user owns what we make */
	stat_memo_forget_all(be_smb(be)->memo);	/* what it said may be wrong now */
	return be_smb_call(be_smb(be), "mkdir", path, be_smb_do_mkdir, &mode);
}

static int be_smb_do_rmdir(SMBCCTX *ctx, char *url, void *arg)
{
	(void)arg;
	return smbc_getFunctionRmdir(ctx)(ctx, url) < 0 ? be_smb_raw() : 0;
}

static int be_smb_rmdir(struct backend *be, const char *path)
{
	stat_memo_forget_all(be_smb(be)->memo);	/* what it said may be wrong now */
	return be_smb_call(be_smb(be), "rmdir", path, be_smb_do_rmdir, NULL);
}

/*
 * ---- files open here ----
 *
 * SMB keeps a file open anywhere from being removed or replaced, this
 * daemon's opens included (libsmbclient opens without FILE_SHARE_DELETE).
 * A close(2) returns before the daemon hears of it (FUSE's RELEASE is sent
 * after), and Samba can answer a removal a few milliseconds after our close
 * of the file as if it were still open, so an unlink or rename right after
 * a close (sqlite removing its journal at each commit, an editor replacing
 * what it read) would fail with EBUSY.  When this daemon has the path open,
 * or closed it in the last 2 s, a busy unlink or rename waits for the
 * close and tries again a few times.
 */
static uint64_t be_smb_path_hash(const char *path)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */

	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h;
}

static void be_smb_opens_add(struct be_smb *sb, struct be_smb_file *f)
{
	pthread_mutex_lock(&sb->open_lock);
	f->next_open = sb->opens;
	if (sb->opens)
		sb->opens->prev_open = &f->next_open;
	f->prev_open = &sb->opens;
	sb->opens = f;
	pthread_mutex_unlock(&sb->open_lock);
}

static void be_smb_opens_remove(struct be_smb *sb, struct be_smb_file *f)
{
	struct be_smb_closed *c;

	if (!f->prev_open)
		return;
	pthread_mutex_lock(&sb->open_lock);
	*f->prev_open = f->next_open;
	if (f->next_open)
		f->next_open->prev_open = f->prev_open;
	f->prev_open = NULL;
	c = &sb->closed[sb->n_closed++ % BE_SMB_CLOSED_RING];
	c->path_hash = be_smb_path_hash(f->path);
	c->at_ns = mono_ns();
	pthread_cond_broadcast(&sb->close_cond);
	pthread_mutex_unlock(&sb->open_lock);
}

/* Whether a file of @path or @path2 (NULL: none) is open here. Under open_lock. */
static bool be_smb_is_open(struct be_smb *sb, const char *path, const char *path2)
{
	for (struct be_smb_file *f = sb->opens; f; f = f->next_open)
		if (strcmp(f->path, path) == 0 || (path2 && strcmp(f->path, path2) == 0))
			return true;
	return false;
}

/* Whether @hash was closed here in the last BE_SMB_CLOSED_RECENT_NS. Under open_lock. */
static bool be_smb_closed_lately(struct be_smb *sb, uint64_t hash, int64_t now)
{
	unsigned int n = sb->n_closed < BE_SMB_CLOSED_RING ? sb->n_closed : BE_SMB_CLOSED_RING;

	for (unsigned int i = 0; i < n; i++)
		if (sb->closed[i].path_hash == hash && now - sb->closed[i].at_ns < BE_SMB_CLOSED_RECENT_NS)
			return true;
	return false;
}

/*
 * After EBUSY: waits at most BE_SMB_CLOSE_WAIT_MS for this daemon's opens
 * of @path and @path2 to close.  true when the call is worth making again:
 * none is open here now, and one was, or was closed here lately.
 */
static bool be_smb_closed_here(struct be_smb *sb, const char *path, const char *path2)
{
	struct timespec until = mono_timespec(mono_ns() + BE_SMB_CLOSE_WAIT_MS * 1000000ll);
	bool open, ours;

	pthread_mutex_lock(&sb->open_lock);
	ours = open = be_smb_is_open(sb, path, path2);
	while (open && pthread_cond_timedwait(&sb->close_cond, &sb->open_lock, &until) == 0)
		open = be_smb_is_open(sb, path, path2);
	open = open && be_smb_is_open(sb, path, path2);
	ours = ours || be_smb_closed_lately(sb, be_smb_path_hash(path), mono_ns()) ||
	       (path2 && be_smb_closed_lately(sb, be_smb_path_hash(path2), mono_ns()));
	pthread_mutex_unlock(&sb->open_lock);
	return ours && !open;
}

/* Sleeps before busy try @i (from 1): 20, 40, 80, 160 ms. */
static void be_smb_busy_pause(int i)
{
	struct timespec ts = mono_timespec(10000000ll << i);

	nanosleep(&ts, NULL);
}

static int be_smb_do_unlink(SMBCCTX *ctx, char *url, void *arg)
{
	(void)arg;
	return smbc_getFunctionUnlink(ctx)(ctx, url) < 0 ? be_smb_raw() : 0;
}

static int be_smb_unlink(struct backend *be, const char *path)
{
	struct be_smb *sb = be_smb(be);
	int ret;

	stat_memo_forget_all(sb->memo);	/* what it said may be wrong now */
	ret = be_smb_call(sb, "unlink", path, be_smb_do_unlink, NULL);
	for (int i = 1; ret == -EBUSY && i < BE_SMB_BUSY_TRIES && be_smb_closed_here(sb, path, NULL);
	     i++) {
		be_smb_busy_pause(i);
		ret = be_smb_call(sb, "unlink", path, be_smb_do_unlink, NULL);
	}
	return ret;
}

static int be_smb_do_rename(SMBCCTX *ctx, char *url, void *arg)
{
	return smbc_getFunctionRename(ctx)(ctx, url, ctx, arg) < 0 ? be_smb_raw() : 0;
}

/*
 * libsmbclient replaces an existing target.  RENAME_NOREPLACE is checked
 * with a stat first, which races with other clients of the share: SMB2 can
 * refuse to replace, but libsmbclient does not expose it.
 */
static int be_smb_rename(struct backend *be, const char *from, const char *to,
			 unsigned int flags)
{
	struct be_smb *sb = be_smb(be);
	char *to_url;
	struct stat st;
	int ret;

	if (flags & RENAME_EXCHANGE)
		return -EINVAL;
	if (flags & RENAME_NOREPLACE) {
		ret = be_smb_getattr(be, to, &st);
		if (ret != -ENOENT)
			return ret < 0 ? ret : -EEXIST;
	}
	to_url = be_smb_url(&sb->addr, to);
	if (!to_url)
		return -ENOMEM;
	stat_memo_forget_all(sb->memo);
	for (int i = 0; i < BE_SMB_BUSY_TRIES; i++) {
		if (i > 0)
			be_smb_busy_pause(i);
		ret = be_smb_call(sb, "rename", from, be_smb_do_rename, to_url);
		/*
		 * A file SMB cannot replace is one open somewhere (this mount
		 * included), which libsmbclient says as EEXIST; EBUSY is what
		 * unlink of it says.  A folder not empty stays EEXIST, as POSIX
		 * allows.
		 */
		if (ret == -EEXIST && !(flags & RENAME_NOREPLACE) &&
		    be_smb_getattr(be, to, &st) == 0 && !S_ISDIR(st.st_mode))
			ret = -EBUSY;
		if (ret != -EBUSY || !be_smb_closed_here(sb, from, to))
			break;
	}
	free(to_url);
	return ret;
}

/* SMB2 shows no symlinks or hard links to clients. */
static int be_smb_symlink(struct backend *be, const char *target, const char *path,
			  const struct backend_cred *cred)
{
	(void)be;
	(void)target;
	(void)path;
	(void)cred;
	return -EPERM;
}

static int be_smb_link(struct backend *be, const char *from, const char *to)
{
	(void)be;
	(void)from;
	(void)to;
	return -EPERM;
}

/* ---- files ---- */

/* libsmbclient's fstat fails (EINVAL) on a write-only handle: then stat by URL. */
static ssize_t be_smb_do_fstat(struct be_smb_file *f, void *arg)
{
	int ret = smbc_getFunctionFstat(f->ctx)(f->ctx, f->fh, arg) < 0 ? be_smb_raw() : 0;

	if (ret < 0 && !be_smb_transient(-ret)) {
		errno = 0;
		ret = smbc_getFunctionStat(f->ctx)(f->ctx, f->url, arg) < 0 ? be_smb_raw() : 0;
	}
	return ret;
}

static void be_smb_file_free(struct be_smb_file *f)
{
	be_smb_lib_lock();
	if (f->fh) {
		backend_request(f->base.be);	/* SMB2 CLOSE */
		smbc_getFunctionClose(f->ctx)(f->ctx, f->fh);
	}
	be_smb_ctx_put(be_smb(f->base.be), f->ctx, false);
	be_smb_lib_unlock();
	be_smb_opens_remove(be_smb(f->base.be), f);
	pthread_mutex_destroy(&f->lock);
	free(f->url);
	free(f->path);
	free(f);
}

/* Opens (or creates, per @flags) @path; reads its size and mtime for cache_key. */
static int be_smb_file_open(struct backend_file **out, struct backend *be, const char *path,
			    int flags, mode_t mode)
{
	struct be_smb_file *f = calloc(1, sizeof(*f));
	struct stat st;
	ssize_t ret;

	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->lock, NULL);
	f->base.be = be;
	f->trust = flags & BE_O_TRUST;
	f->flags = flags & BE_SMB_OPEN_FLAGS;
	f->mode = mode;
	f->url = be_smb_url(&be_smb(be)->addr, path);
	f->path = strdup(path);
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_CREAT)) {
		stat_memo_forget_all(be_smb(be)->memo);		/* it may change */
	} else if (f->trust && f->url && f->path && stat_memo_get(be_smb(be)->memo, path, &f->st) &&
		   S_ISREG(f->st.st_mode)) {
		/* seen in this mount and trusted: its version is known, the server is asked
		 * nothing until a read misses the cache (be_smb_file_io opens it then) */
		f->remembered = true;
		f->size = f->st.st_size;
		f->mtime = f->st.st_mtim;
		*out = &f->base;
		return 0;
	}
	ret = f->url && f->path ? be_smb_file_io(f, "open", be_smb_do_fstat, &st) : -ENOMEM;
	if (ret < 0) {
		be_smb_file_free(f);
		return (int)ret;
	}
	if (S_ISDIR(st.st_mode) && (flags & O_ACCMODE) != O_RDONLY) {
		be_smb_file_free(f);
		return -EISDIR;
	}
	f->size = st.st_size;
	f->mtime = st.st_mtim;
	be_smb_opens_add(be_smb(be), f);
	*out = &f->base;
	return 0;
}

static int be_smb_open(struct backend_file **out, struct backend *be, const char *path,
		       int flags)
{
	return be_smb_file_open(out, be, path, flags & ~(O_CREAT | O_EXCL), 0);
}

static int be_smb_create_file(struct backend_file **out, struct backend *be, const char *path,
			      int flags, mode_t mode, const struct backend_cred *cred)
{
	(void)cred;	/* no owners on SMB */
	return be_smb_file_open(out, be, path, (flags & ~BE_O_TRUST) | O_CREAT, mode);
}

struct be_smb_io {
	void *buf;
	size_t len;
	off_t off;
};

/* Reads or writes until done, EOF or an error; a partial transfer counts. */
static ssize_t be_smb_do_io(struct be_smb_file *f, struct be_smb_io *io, bool write)
{
	size_t done = 0;
	ssize_t n = 0;

	if (smbc_getFunctionLseek(f->ctx)(f->ctx, f->fh, io->off, SEEK_SET) < 0)
		return be_smb_raw();
	while (done < io->len) {
		errno = 0;
		n = write ? smbc_getFunctionWrite(f->ctx)(f->ctx, f->fh, (char *)io->buf + done,
							   io->len - done)
			  : smbc_getFunctionRead(f->ctx)(f->ctx, f->fh, (char *)io->buf + done,
							  io->len - done);
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	if (n < 0 && done == 0)
		return be_smb_raw();
	return (ssize_t)done;
}

static ssize_t be_smb_do_read(struct be_smb_file *f, void *arg)
{
	return be_smb_do_io(f, arg, false);
}

static ssize_t be_smb_do_write(struct be_smb_file *f, void *arg)
{
	return be_smb_do_io(f, arg, true);
}

static ssize_t be_smb_pread(struct backend_file *bf, void *buf, size_t len, off_t off)
{
	struct be_smb_io io = { .buf = buf, .len = len, .off = off };

	return be_smb_file_io(be_smb_file(bf), "read", be_smb_do_read, &io);
}

static ssize_t be_smb_pwrite(struct backend_file *bf, const void *buf, size_t len, off_t off)
{
	struct be_smb_io io = { .buf = (void *)buf, .len = len, .off = off };

	return be_smb_file_io(be_smb_file(bf), "write", be_smb_do_write, &io);
}

static int be_smb_fgetattr(struct backend_file *bf, struct stat *st)
{
	if (be_smb_file(bf)->remembered) {	/* read-only and trusted: what the memo said */
		*st = be_smb_file(bf)->st;
		return 0;
	}
	return (int)be_smb_file_io(be_smb_file(bf), "fstat", be_smb_do_fstat, st);
}

static void be_smb_release(struct backend_file *bf)
{
	if ((be_smb_file(bf)->flags & O_ACCMODE) != O_RDONLY)	/* it may have changed */
		stat_memo_forget_all(be_smb(bf->be)->memo);
	be_smb_file_free(be_smb_file(bf));
}

/* "smb\nHOST:PORT/SHARE\n/ROOT/PATH\nSIZE:MTIME_NS", for trusted opens only. */
static int be_smb_cache_key(struct backend_file *bf, char *buf, size_t size)
{
	struct be_smb_file *f = be_smb_file(bf);
	struct be_smb_addr *a = &be_smb(bf->be)->addr;
	long long mtime_ns = (long long)f->mtime.tv_sec * 1000000000LL + f->mtime.tv_nsec;
	int n;

	if (!f->trust)
		return -ENOTSUP;	/* datastores/ is write-through and read directly */
	n = snprintf(buf, size, "smb\n%s:%u/%s\n/%s%s%s\n%lld:%lld", a->host, a->port, a->share,
		     a->root, a->root[0] && f->path[0] ? "/" : "", f->path,
		     (long long)f->size, mtime_ns);
	if (n < 0)
		return -EINVAL;
	return (size_t)n >= size ? -ENAMETOOLONG : n;
}

/* ---- setattr ---- */

static ssize_t be_smb_do_ftruncate(struct be_smb_file *f, void *arg)
{
	return smbc_getFunctionFtruncate(f->ctx)(f->ctx, f->fh, *(off_t *)arg) < 0 ?
		be_smb_raw() : 0;
}

static int be_smb_do_truncate(SMBCCTX *ctx, char *url, void *arg)
{
	SMBCFILE *fh = smbc_getFunctionOpen(ctx)(ctx, url, O_WRONLY, 0);
	int ret = 0;

	if (!fh)
		return be_smb_raw();
	if (smbc_getFunctionFtruncate(ctx)(ctx, fh, *(off_t *)arg) < 0)
		ret = be_smb_raw();
	smbc_getFunctionClose(ctx)(ctx, fh);
	return ret;
}

static int be_smb_do_utimes(SMBCCTX *ctx, char *url, void *arg)
{
	return smbc_getFunctionUtimes(ctx)(ctx, url, arg) < 0 ? be_smb_raw() : 0;
}

/* The server decides what a mode means (a DOS read-only bit at most): refusals are ignored. */
static int be_smb_do_chmod(SMBCCTX *ctx, char *url, void *arg)
{
	int ret = smbc_getFunctionChmod(ctx)(ctx, url, *(mode_t *)arg) < 0 ? be_smb_raw() : 0;

	return ret == -ENOENT || be_smb_transient(-ret) ? ret : 0;
}

static struct timeval be_smb_tv(struct timespec ts)
{
	return (struct timeval){ .tv_sec = ts.tv_sec, .tv_usec = ts.tv_nsec / 1000 };
}

/* Sets atime and mtime; the one not asked for is kept as it is. */
static int be_smb_set_times(struct be_smb *sb, const char *path, const struct stat *st,
			    unsigned int to_set)
{
	struct timeval tv[2], now;
	struct stat cur;
	int ret = 0;

	gettimeofday(&now, NULL);
	if (!(to_set & (BE_SET_ATIME | BE_SET_ATIME_NOW)) ||
	    !(to_set & (BE_SET_MTIME | BE_SET_MTIME_NOW)))
		ret = be_smb_getattr(&sb->base, path, &cur);
	if (ret < 0)
		return ret;
	tv[0] = to_set & BE_SET_ATIME_NOW ? now :
		to_set & BE_SET_ATIME ? be_smb_tv(st->st_atim) : be_smb_tv(cur.st_atim);
	tv[1] = to_set & BE_SET_MTIME_NOW ? now :
		to_set & BE_SET_MTIME ? be_smb_tv(st->st_mtim) : be_smb_tv(cur.st_mtim);
	return be_smb_call(sb, "utimes", path, be_smb_do_utimes, tv);
}

static int be_smb_setattr(struct backend *be, const char *path, struct backend_file *f,
			  const struct stat *st, unsigned int to_set)
{
	struct be_smb *sb = be_smb(be);
	off_t size = st->st_size;
	mode_t mode = st->st_mode & 07777;
	int ret = 0;

	if (to_set & (BE_SET_UID | BE_SET_GID))
		return -EPERM;	/* SMB has no Unix owners */
	stat_memo_forget_all(sb->memo);
	if (f)
		path = be_smb_file(f)->path;
	if ((to_set & BE_SET_SIZE) && f)
		ret = (int)be_smb_file_io(be_smb_file(f), "truncate", be_smb_do_ftruncate, &size);
	else if (to_set & BE_SET_SIZE)
		ret = be_smb_call(sb, "truncate", path, be_smb_do_truncate, &size);
	if (ret == 0 && (to_set & (BE_SET_ATIME | BE_SET_MTIME | BE_SET_ATIME_NOW |
				   BE_SET_MTIME_NOW)))
		ret = be_smb_set_times(sb, path, st, to_set);
	if (ret == 0 && (to_set & BE_SET_MODE))
		ret = be_smb_call(sb, "chmod", path, be_smb_do_chmod, &mode);
	return ret;
}

const struct backend_ops be_smb_ops = {
	.version = BACKEND_OPS_VERSION,
	.scheme = "smb",
	.caps = BE_CAP_WRITE | BE_CAP_REMOTE,
	.validate = be_smb_validate,
	.create = be_smb_create,
	.destroy = be_smb_destroy,
	.getattr = be_smb_getattr,
	.readdir = be_smb_readdir,
	.open = be_smb_open,
	.pread = be_smb_pread,
	.release = be_smb_release,
	.statfs = be_smb_statfs,
	.fgetattr = be_smb_fgetattr,
	.pwrite = be_smb_pwrite,
	.create_file = be_smb_create_file,
	.mkdir = be_smb_mkdir,
	.symlink = be_smb_symlink,
	.link = be_smb_link,
	.unlink = be_smb_unlink,
	.rmdir = be_smb_rmdir,
	.rename = be_smb_rename,
	.setattr = be_smb_setattr,
	.cache_key = be_smb_cache_key,
	.getattr_known = be_smb_getattr_known,
};
