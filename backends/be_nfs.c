/*
 * be_nfs.c - a datastore that is an NFS export, reached through libnfs.
 *
 * No kernel mount and no root on the server's side: libnfs speaks NFS over
 * its own TCP connection (NFSv3 by default; `options = version=4` for v4,
 * whose libnfs 4.0 client has rough edges, notes/servers.md §2).  The
 * datastore's keys make one URL, nfs://ADDRESS/EXPORT?OPTIONS, which every
 * connection is set up from; the options (version, nfsport, mountport,
 * uid, gid) are libnfs's own URL options.
 *
 * The root rule of CloudBender: with root /dir2, backend path "a/b" is
 * /dir2/a/b on the export, and nothing above the root can be named (paths
 * from fs/ are canonical, with no ".."; be_nfs_join refuses a root with
 * one).  mlfs never follows a symlink on the last component: stat is
 * lstat, chmod/chown/utimes are the l* calls, open asks for O_NOFOLLOW,
 * readlink returns the link.  libnfs itself follows a symlink met in the
 * middle of a path, which fs/ never sends (the kernel looked up every
 * folder on the way), except in a race with a change on the server.
 *
 * Every call runs through be_nfs_conn.c, which holds the pool of libnfs
 * contexts (one mounted connection each), retries a call whose connection
 * broke on a fresh one, maps libnfs's returns to errno and logs failures;
 * this file says what each call does on the export.  No server is
 * contacted at create.
 *
 * Threading: a libnfs context is not thread-safe; a call on a path borrows
 * one from the pool for its duration.  Each open file holds a context of
 * its own for its lifetime (its file handle is bound to it), with a mutex
 * of its own held across the file's RPCs (taken by be_nfs_file_call): it
 * serializes the calls on that one context and on nothing else.
 *
 * Caching: libnfs's directory cache is off (others change the export).
 * cache_key names a file's content only for opens with BE_O_TRUST (the
 * read-only source trees); datastores/ is read directly.
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

#define BE_NFS_MEMO_MAX		(4u << 20)	/* files remembered for trusted opens */
#define BE_NFS_CHUNK_MAX	(1u << 20)	/* bytes per READ or WRITE at most */
#define BE_NFS_DEFAULT_TIMEOUT	30
#define BE_NFS_DEFAULT_RETRIES	3

/* libnfs's nfsdirent.type values (NFSv3's ftype3, libnfs-raw-nfs.h). */
enum { BE_NFS_NF3REG = 1, BE_NFS_NF3DIR, BE_NFS_NF3BLK, BE_NFS_NF3CHR, BE_NFS_NF3LNK,
       BE_NFS_NF3SOCK, BE_NFS_NF3FIFO };

/* ---- what needs no server ---- */

/* Checks one "key=value" of @len bytes. */
static int be_nfs_check_option(const char *opt, size_t len, char *why, size_t size)
{
	static const char *const keys[] = { "version", "nfsport", "mountport", "uid", "gid" };
	static const unsigned long max[] = { 4, 65535, 65535, 4294967295ul, 4294967295ul };
	const char *eq = memchr(opt, '=', len);
	char value[32], *end;
	unsigned long v;

	if (!eq || eq == opt) {
		snprintf(why, size, "'%.*s' is not key=value", (int)len, opt);
		return -EINVAL;
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strlen(keys[i]) != (size_t)(eq - opt) || strncmp(opt, keys[i], (size_t)(eq - opt)))
			continue;
		snprintf(value, sizeof(value), "%.*s", (int)(len - (size_t)(eq - opt) - 1), eq + 1);
		errno = 0;
		v = strtoul(value, &end, 10);
		if (!value[0] || *end || errno || value[0] == '-' || v > max[i] ||
		    (i == 0 && v != 3 && v != 4) || (i > 0 && i < 3 && v == 0)) {
			snprintf(why, size, "%s must be %s, not '%.*s'", keys[i],
				 i == 0 ? "3 or 4" : i < 3 ? "a port (1-65535)" : "a number",
				 (int)(len - (size_t)(eq - opt) - 1), eq + 1);
			return -EINVAL;
		}
		return 0;
	}
	snprintf(why, size, "unknown option '%.*s' (known: version, nfsport, mountport, uid, gid)",
		 (int)(eq - opt), opt);
	return -EINVAL;
}

int be_nfs_check_options(const char *options, char *why, size_t size)
{
	const char *p = options;

	if (*p == '?')
		p++;
	while (*p) {
		size_t len = strcspn(p, "&");
		int ret = be_nfs_check_option(p, len, why, size);

		if (ret < 0)
			return ret;
		p += len;
		if (*p == '&' && !*++p) {
			snprintf(why, size, "ends with '&'");
			return -EINVAL;
		}
	}
	return 0;
}

/* Appends root's components to @out (size >= strlen(root) + 1): "" or "/a/b". */
static int be_nfs_root_norm(char *out, const char *root)
{
	const char *p = root;

	*out = '\0';
	while (*p) {
		size_t len = strcspn(p, "/");

		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
			return -EINVAL;
		if (len) {
			strcat(out, "/");
			strncat(out, p, len);
		}
		p += len;
		p += strspn(p, "/");
	}
	return 0;
}

int be_nfs_join(char **out, const char *root, const char *path)
{
	size_t rlen = strlen(root), plen = strlen(path);
	char *s = malloc(rlen + plen + 3);
	int ret;

	if (!s)
		return -ENOMEM;
	ret = be_nfs_root_norm(s, root);
	if (ret < 0) {
		free(s);
		return ret;
	}
	if (plen || !s[0]) {
		strcat(s, "/");
		strcat(s, path);
	}
	*out = s;
	return 0;
}

/* ---- checking a datastore section offline ---- */

/* Adds "[datastore NAME] KEY: MESSAGE" at @line (the section's when 0: a missing key). */
static void be_nfs_diag(struct diag *d, const struct datastore_config *cfg, int line,
			const char *key, const char *msg)
{
	diag_add(d, cfg->file, line > 0 ? line : cfg->line, "[datastore %s] %s: %s", cfg->name,
		 key, msg);
}

static int be_nfs_validate_address(const struct datastore_config *cfg, struct diag *d)
{
	int line = cfg->line;
	const char *v = config_get(cfg, "address", &line);

	if (!v || !*v) {
		be_nfs_diag(d, cfg, line, "address", "missing: the NFS server's host name or IP");
		return -EINVAL;
	}
	if (strpbrk(v, "/?&@ \t")) {
		be_nfs_diag(d, cfg, line, "address", "a host name or IP, without '/', '?', '&', '@' or spaces");
		return -EINVAL;
	}
	return 0;
}

static int be_nfs_validate_export(const struct datastore_config *cfg, struct diag *d)
{
	int line = cfg->line;
	const char *v = config_get(cfg, "export", &line);

	if (!v || !*v) {
		be_nfs_diag(d, cfg, line, "export", "missing: the exported path, e.g. /exports/ml");
		return -EINVAL;
	}
	if (v[0] != '/' || strpbrk(v, "?& \t")) {
		be_nfs_diag(d, cfg, line, "export",
			    "an absolute path such as /exports/ml, without '?', '&' or spaces");
		return -EINVAL;
	}
	return 0;
}

static int be_nfs_validate(const struct datastore_config *cfg, struct diag *d)
{
	int line = cfg->line, ret = 0;
	const char *root = config_get(cfg, "root", &line);
	const char *options;
	char why[160], *joined;

	if (be_nfs_validate_address(cfg, d) < 0)
		ret = -EINVAL;
	if (be_nfs_validate_export(cfg, d) < 0)
		ret = -EINVAL;
	if (root && be_nfs_join(&joined, root, "") == 0) {
		free(joined);
	} else if (root) {
		be_nfs_diag(d, cfg, line, "root", "a folder inside the export, without '.' or '..'");
		ret = -EINVAL;
	}
	line = cfg->line;
	options = config_get(cfg, "options", &line);
	if (options && be_nfs_check_options(options, why, sizeof(why)) < 0) {
		be_nfs_diag(d, cfg, line, "options", why);
		ret = -EINVAL;
	}
	return ret;
}

/* ---- calls on paths ---- */

/* What a call needs besides the context and the path. */
struct be_nfs_args {
	struct nfs_stat_64 *st;			/* getattr */
	const char *other;			/* rename, link: the second path; symlink: the target */
	unsigned int flags;			/* rename */
	mode_t mode;				/* mkdir, mknod */
	dev_t rdev;				/* mknod */
	const struct backend_cred *cred;	/* mkdir, symlink, mknod */
	char *buf;				/* readlink */
	size_t size;
	struct statvfs *sv;			/* statfs */
	backend_fill_fn *fill;			/* readdir */
	void *payload;
	int fill_ret;
	const struct stat *set;			/* setattr */
	unsigned int to_set;
	struct be_nfs_page *page;		/* readdir */
};

static void be_nfs_stat_fill(struct stat *st, const struct nfs_stat_64 *s)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = (dev_t)s->nfs_dev;
	st->st_ino = (ino_t)s->nfs_ino;
	st->st_mode = (mode_t)s->nfs_mode;
	st->st_nlink = (nlink_t)s->nfs_nlink;
	st->st_uid = (uid_t)s->nfs_uid;
	st->st_gid = (gid_t)s->nfs_gid;
	st->st_rdev = (dev_t)s->nfs_rdev;
	st->st_size = (off_t)s->nfs_size;
	st->st_blksize = (blksize_t)s->nfs_blksize;
	st->st_blocks = (blkcnt_t)((s->nfs_used + 511) / 512);
	st->st_atim.tv_sec = (time_t)s->nfs_atime;
	st->st_atim.tv_nsec = (long)s->nfs_atime_nsec;
	st->st_mtim.tv_sec = (time_t)s->nfs_mtime;
	st->st_mtim.tv_nsec = (long)s->nfs_mtime_nsec;
	st->st_ctim.tv_sec = (time_t)s->nfs_ctime;
	st->st_ctim.tv_nsec = (long)s->nfs_ctime_nsec;
}

static int be_nfs_do_getattr(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	return nfs_lstat64(nfs, path, a->st);
}

static int be_nfs_getattr(struct backend *be, const char *path, struct stat *st)
{
	struct nfs_stat_64 s;
	struct be_nfs_args a = { .st = &s };
	int ret = be_nfs_call(be_nfs(be), path, be_nfs_do_getattr, &a, "stat");

	if (ret == 0) {
		be_nfs_stat_fill(st, &s);
		stat_memo_put(be_nfs(be)->memo, path, st);
	}
	return ret;
}

static int be_nfs_getattr_known(struct backend *be, const char *path, struct stat *st)
{
	return stat_memo_get(be_nfs(be)->memo, path, st) ? 0 : -EAGAIN;
}

static mode_t be_nfs_type_mode(uint32_t type)
{
	static const mode_t types[] = {
		[BE_NFS_NF3REG] = S_IFREG, [BE_NFS_NF3DIR] = S_IFDIR, [BE_NFS_NF3BLK] = S_IFBLK,
		[BE_NFS_NF3CHR] = S_IFCHR, [BE_NFS_NF3LNK] = S_IFLNK, [BE_NFS_NF3SOCK] = S_IFSOCK,
		[BE_NFS_NF3FIFO] = S_IFIFO,
	};

	return type < sizeof(types) / sizeof(types[0]) ? types[type] : 0;
}

/* The attributes READDIRPLUS gave with @e; 0, or -ENOENT when it gave none. */
static int be_nfs_dirent_stat(struct stat *st, const struct nfsdirent *e)
{
	mode_t type = be_nfs_type_mode(e->type);

	if (!type)
		return -ENOENT;
	memset(st, 0, sizeof(*st));
	st->st_ino = (ino_t)e->inode;
	st->st_mode = type | (e->mode & 07777);
	st->st_nlink = e->nlink;
	st->st_uid = e->uid;
	st->st_gid = e->gid;
	st->st_size = (off_t)e->size;
	st->st_blksize = (blksize_t)e->blksize;
	st->st_blocks = (blkcnt_t)((e->used + 511) / 512);
	st->st_rdev = (dev_t)e->rdev;
	st->st_atim.tv_sec = e->atime.tv_sec;
	st->st_atim.tv_nsec = e->atime_nsec;
	st->st_mtim.tv_sec = e->mtime.tv_sec;
	st->st_mtim.tv_nsec = e->mtime_nsec;
	st->st_ctim.tv_sec = e->ctime.tv_sec;
	st->st_ctim.tv_nsec = e->ctime_nsec;
	return 0;
}

/*
 * Listing a folder.  NFSv3 is read a READDIRPLUS page at a time, each on a
 * pooled context that goes back to the pool before the page's entries are
 * handed to fill: fill may wait (the tree streams a long listing,
 * BE_CAP_STREAM_LIST), and a folder of a million files is never held whole.
 * A page that fails on a broken connection is asked again on a fresh
 * context from the same cookie (NFSv3 handles and cookies outlive it).
 * NFSv4 is read whole by libnfs's nfs_opendir, copied out, and handed to
 * fill the same way, outside the context.
 */
#define BE_NFS_PAGE_BYTES	131072	/* READDIRPLUS maxcount: some 400 entries a call */

/*
 * What nfs_get_fh() points to.  libnfs 4.0 exports the function, so that an
 * nfs_open()ed handle can be used with raw RPCs, but keeps the struct in
 * its private header: this is its layout there.  The handle is checked
 * (1 to NFS3_FHSIZE bytes) before use, and a folder whose handle looks
 * wrong is listed whole through nfs_opendir instead.
 */
struct nfs_fh {
	int len;
	char *val;
};

struct be_nfs_dirent {
	char *name;
	struct stat st;
	bool has_st;
};

struct be_nfs_page {
	char fh[NFS3_FHSIZE];		/* the folder's handle */
	size_t fh_len;
	uint64_t cookie;		/* where the next page starts */
	char verf[NFS3_COOKIEVERFSIZE];
	bool eof;
	int timeout_ms;
	struct be_nfs_dirent *e;	/* this page's entries */
	size_t n, cap;
	bool done;			/* the RPC answered */
	int status;			/* its errno, negated */
};

static int be_nfs_page_add(struct be_nfs_page *pg, const char *name, const struct stat *st)
{
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	if (pg->n == pg->cap) {
		size_t cap = pg->cap ? pg->cap * 2 : 256;
		struct be_nfs_dirent *e = reallocarray(pg->e, cap, sizeof(*e));

		if (!e)
			return -ENOMEM;
		pg->e = e;
		pg->cap = cap;
	}
	pg->e[pg->n].name = strdup(name);
	if (!pg->e[pg->n].name)
		return -ENOMEM;
	pg->e[pg->n].has_st = st != NULL;
	if (st)
		pg->e[pg->n].st = *st;
	pg->n++;
	return 0;
}

static void be_nfs_page_clear(struct be_nfs_page *pg)
{
	for (size_t i = 0; i < pg->n; i++)
		free(pg->e[i].name);
	pg->n = 0;
}

/* A READDIRPLUS entry's attributes, as be_nfs_dirent_stat gives nfs_readdir's. */
static int be_nfs_fattr_stat(struct stat *st, const fattr3 *f)
{
	mode_t type = be_nfs_type_mode((uint32_t)f->type);

	if (!type)
		return -ENOENT;
	memset(st, 0, sizeof(*st));
	st->st_ino = (ino_t)f->fileid;
	st->st_mode = type | (f->mode & 07777);
	st->st_nlink = f->nlink;
	st->st_uid = f->uid;
	st->st_gid = f->gid;
	st->st_size = (off_t)f->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((f->used + 511) / 512);
	st->st_rdev = makedev(f->rdev.specdata1, f->rdev.specdata2);
	st->st_atim.tv_sec = f->atime.seconds;
	st->st_atim.tv_nsec = f->atime.nseconds;
	st->st_mtim.tv_sec = f->mtime.seconds;
	st->st_mtim.tv_nsec = f->mtime.nseconds;
	st->st_ctim.tv_sec = f->ctime.seconds;
	st->st_ctim.tv_nsec = f->ctime.nseconds;
	return 0;
}

/* The folder's handle, from an nfs_open of it. */
static int be_nfs_do_dir_fh(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	struct nfsfh *fh;
	struct nfs_fh *h;
	int ret = nfs_open(nfs, path, O_RDONLY, &fh);

	if (ret < 0)
		return ret;
	h = nfs_get_fh(fh);
	if (!h || h->len <= 0 || (size_t)h->len > sizeof(a->page->fh) || !h->val) {
		a->page->fh_len = 0;	/* be_nfs_readdir lists it whole */
	} else {
		memcpy(a->page->fh, h->val, (size_t)h->len);
		a->page->fh_len = (size_t)h->len;
	}
	nfs_close(nfs, fh);
	return ret;
}

/*
 * The answer to one READDIRPLUS.  libnfs 4.0's decoder may place a struct
 * at an address its alignment does not allow (UBSan says so): each is
 * copied to one of ours before its members are read.
 */
static void be_nfs_page_cb(struct rpc_context *rpc, int status, void *data, void *arg)
{
	struct be_nfs_page *pg = arg;
	READDIRPLUS3res res;
	entryplus3 e;
	struct stat st;

	(void)rpc;
	pg->done = true;
	if (status != RPC_STATUS_SUCCESS) {
		pg->status = status == RPC_STATUS_TIMEOUT ? -ETIMEDOUT : -EIO;
		return;
	}
	memcpy(&res, data, sizeof(res));
	if (res.status != NFS3_OK) {
		pg->status = -nfsstat3_to_errno((int)res.status);
		return;
	}
	for (const entryplus3 *next = res.READDIRPLUS3res_u.resok.reply.entries; next;
	     next = e.nextentry) {
		bool has;

		memcpy(&e, next, sizeof(e));
		has = e.name_attributes.attributes_follow &&
		      be_nfs_fattr_stat(&st, &e.name_attributes.post_op_attr_u.attributes) == 0;
		if (be_nfs_page_add(pg, e.name, has ? &st : NULL) < 0) {
			pg->status = -ENOMEM;
			return;
		}
		pg->cookie = e.cookie;
	}
	memcpy(pg->verf, res.READDIRPLUS3res_u.resok.cookieverf, sizeof(pg->verf));
	pg->eof = res.READDIRPLUS3res_u.resok.reply.eof;
}

/* One READDIRPLUS from pg->cookie, waited for here (at most the datastore's timeout). */
static int be_nfs_do_dir_page(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	struct be_nfs_page *pg = a->page;
	struct rpc_context *rpc = nfs_get_rpc_context(nfs);
	READDIRPLUS3args args = { .cookie = pg->cookie, .dircount = BE_NFS_PAGE_BYTES / 4,
				  .maxcount = BE_NFS_PAGE_BYTES };
	int64_t deadline = mono_ns() + (int64_t)pg->timeout_ms * 1000000;

	(void)path;
	args.dir.data.data_len = (u_int)pg->fh_len;
	args.dir.data.data_val = pg->fh;
	memcpy(args.cookieverf, pg->verf, sizeof(args.cookieverf));
	be_nfs_page_clear(pg);
	pg->done = false;
	pg->status = 0;
	if (rpc_nfs3_readdirplus_async(rpc, be_nfs_page_cb, &args, pg) != 0)
		return -EIO;
	while (!pg->done) {
		struct pollfd pfd = { .fd = rpc_get_fd(rpc), .events = (short)rpc_which_events(rpc) };
		int64_t left = (deadline - mono_ns()) / 1000000;
		int n;

		if (left <= 0)
			return -ETIMEDOUT;	/* a transport error: the context is dropped */
		n = poll(&pfd, 1, left < 100 ? (int)left : 100);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (rpc_service(rpc, n > 0 ? pfd.revents : 0) < 0)
			return -EIO;
	}
	return pg->status;
}

/* NFSv4: the whole listing through nfs_opendir, copied out. */
static int be_nfs_do_dir_all(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	struct nfsdir *dir;
	struct nfsdirent *e;
	struct stat st;
	int ret = nfs_opendir(nfs, path, &dir);

	if (ret < 0)
		return ret;
	be_nfs_page_clear(a->page);
	while (ret == 0 && (e = nfs_readdir(nfs, dir)))
		ret = be_nfs_page_add(a->page, e->name, be_nfs_dirent_stat(&st, e) == 0 ? &st : NULL);
	nfs_closedir(nfs, dir);
	a->page->eof = true;
	return ret;
}

static int be_nfs_readdir(struct backend *be, const char *path, backend_fill_fn *fill,
			  void *payload)
{
	struct be_nfs *nb = be_nfs(be);
	struct be_nfs_page pg = { .timeout_ms = nb->timeout_ms };
	struct be_nfs_args a = { .page = &pg };
	int ret, filled = 0;

	ret = nb->v4 ? 0 : be_nfs_call(nb, path, be_nfs_do_dir_fh, &a, "list");
	while (ret == 0 && filled == 0) {
		ret = be_nfs_call(nb, path, pg.fh_len ? be_nfs_do_dir_page : be_nfs_do_dir_all, &a,
				  "list");
		for (size_t i = 0; ret == 0 && filled == 0 && i < pg.n; i++) {
			if (pg.e[i].has_st)
				stat_memo_put_child(nb->memo, path, pg.e[i].name, &pg.e[i].st);
			filled = fill(payload, pg.e[i].name, pg.e[i].has_st ? &pg.e[i].st : NULL);
		}
		be_nfs_page_clear(&pg);
		if (pg.eof)
			break;
	}
	free(pg.e);
	return ret < 0 ? ret : filled;
}

static int be_nfs_do_statfs(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	return nfs_statvfs(nfs, path, a->sv);
}

static int be_nfs_statfs(struct backend *be, const char *path, struct statvfs *sv)
{
	struct be_nfs_args a = { .sv = sv };

	(void)path;
	return be_nfs_call(be_nfs(be), "", be_nfs_do_statfs, &a, "statfs");
}

static int be_nfs_do_readlink(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	char *target = NULL;
	int ret = nfs_readlink2(nfs, path, &target);

	if (ret < 0)
		return ret;
	snprintf(a->buf, a->size, "%s", target);
	free(target);
	return 0;
}

static int be_nfs_readlink(struct backend *be, const char *path, char *buf, size_t size)
{
	struct be_nfs_args a = { .buf = buf, .size = size };

	if (size == 0)
		return -EINVAL;
	return be_nfs_call(be_nfs(be), path, be_nfs_do_readlink, &a, "readlink");
}

/* Gives a new entry the asker's owner (as root only; a user's mount owns what it makes). */
static void be_nfs_set_owner(struct nfs_context *nfs, const char *path,
			     const struct backend_cred *cred)
{
	if (geteuid() != 0 || !cred || (cred->uid == 0 && cred->gid == 0))
		return;
	nfs_lchown(nfs, path, (int)cred->uid, (int)cred->gid);	/* made all the same if not */
}

static int be_nfs_do_mkdir(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	int ret = nfs_mkdir2(nfs, path, (int)(a->mode & 07777));

	if (ret == 0)
		be_nfs_set_owner(nfs, path, a->cred);
	return ret;
}

static int be_nfs_mkdir(struct backend *be, const char *path, mode_t mode,
			const struct backend_cred *cred)
{
	struct be_nfs_args a = { .mode = mode, .cred = cred };

	stat_memo_forget_all(be_nfs(be)->memo);	/* what it said may be wrong now */
	return be_nfs_call(be_nfs(be), path, be_nfs_do_mkdir, &a, "mkdir");
}

static int be_nfs_do_symlink(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	int ret = nfs_symlink(nfs, a->other, path);

	if (ret == 0)
		be_nfs_set_owner(nfs, path, a->cred);
	return ret;
}

static int be_nfs_symlink(struct backend *be, const char *target, const char *path,
			  const struct backend_cred *cred)
{
	struct be_nfs_args a = { .other = target, .cred = cred };

	stat_memo_forget_all(be_nfs(be)->memo);	/* what it said may be wrong now */
	return be_nfs_call(be_nfs(be), path, be_nfs_do_symlink, &a, "symlink");
}

static int be_nfs_do_mknod(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	int ret = nfs_mknod(nfs, path, (int)a->mode, (int)a->rdev);

	if (ret == 0)
		be_nfs_set_owner(nfs, path, a->cred);
	return ret;
}

/*
 * libnfs 4.0 makes FIFOs, sockets and devices over NFSv3 (MKNOD), only
 * devices over NFSv4 (CREATE of NF4CHR or NF4BLK): a FIFO or a socket on
 * a v4 datastore is refused as a type it cannot hold.  Only the
 * permission bits reach the server (no setuid, setgid or sticky bit).
 */
static int be_nfs_mknod(struct backend *be, const char *path, mode_t mode, dev_t rdev,
			const struct backend_cred *cred)
{
	struct be_nfs_args a = { .mode = mode, .rdev = rdev, .cred = cred };
	bool device = S_ISCHR(mode) || S_ISBLK(mode);

	if (!device && (be_nfs(be)->v4 || !(S_ISFIFO(mode) || S_ISSOCK(mode))))
		return -ENOTSUP;
	stat_memo_forget_all(be_nfs(be)->memo);	/* what it said may be wrong now */
	return be_nfs_call(be_nfs(be), path, be_nfs_do_mknod, &a, "mknod");
}

static int be_nfs_do_unlink(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	(void)a;
	return nfs_unlink(nfs, path);
}

static int be_nfs_unlink(struct backend *be, const char *path)
{
	stat_memo_forget_all(be_nfs(be)->memo);	/* what it said may be wrong now */
	return be_nfs_call(be_nfs(be), path, be_nfs_do_unlink, NULL, "unlink");
}

static int be_nfs_do_rmdir(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	(void)a;
	return nfs_rmdir(nfs, path);
}

static int be_nfs_rmdir(struct backend *be, const char *path)
{
	stat_memo_forget_all(be_nfs(be)->memo);	/* what it said may be wrong now */
	return be_nfs_call(be_nfs(be), path, be_nfs_do_rmdir, NULL, "rmdir");
}

/* RENAME_NOREPLACE is checked, then renamed: not atomic, NFSv3 has no such flag. */
static int be_nfs_do_rename(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	struct nfs_stat_64 s;
	int ret;

	if (a->flags & RENAME_NOREPLACE) {
		ret = nfs_lstat64(nfs, a->other, &s);
		if (ret == 0)
			return -EEXIST;
		if (ret != -ENOENT)
			return ret;
	}
	return nfs_rename(nfs, path, a->other);
}

static int be_nfs_do_link(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	return nfs_link(nfs, path, a->other);
}

/* Runs a two-path call: @to joined with the root, passed in a->other. */
static int be_nfs_two(struct backend *be, const char *from, const char *to, be_nfs_fn *fn,
		      struct be_nfs_args *a, const char *what)
{
	struct be_nfs *nb = be_nfs(be);
	char *full_to;
	int ret = be_nfs_join(&full_to, nb->root, to);

	if (ret < 0)
		return ret;
	a->other = full_to;
	ret = be_nfs_call(nb, from, fn, a, what);
	free(full_to);
	return ret;
}

static int be_nfs_rename(struct backend *be, const char *from, const char *to,
			 unsigned int flags)
{
	struct be_nfs_args a = { .flags = flags };

	if (flags & ~RENAME_NOREPLACE)
		return -EINVAL;	/* RENAME_EXCHANGE: NFS has no such thing */
	stat_memo_forget_all(be_nfs(be)->memo);	/* what it said may be wrong now */
	return be_nfs_two(be, from, to, be_nfs_do_rename, &a, "rename");
}

static int be_nfs_link(struct backend *be, const char *from, const char *to)
{
	struct be_nfs_args a = { 0 };

	stat_memo_forget_all(be_nfs(be)->memo);	/* what it said may be wrong now */
	return be_nfs_two(be, from, to, be_nfs_do_link, &a, "link");
}

/* ---- setattr ---- */

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
	free(f);
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
	*out = &f->base;
	return 0;
}

static int be_nfs_open(struct backend_file **out, struct backend *be, const char *path,
		       int flags)
{
	struct be_nfs_open_args o = { .flags = flags };

	return be_nfs_open_with(out, be, path, &o);
}

static int be_nfs_create_file(struct backend_file **out, struct backend *be, const char *path,
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

static ssize_t be_nfs_pread(struct backend_file *bf, void *buf, size_t len, off_t off)
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

static ssize_t be_nfs_pwrite(struct backend_file *bf, const void *buf, size_t len, off_t off)
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

static int be_nfs_fgetattr(struct backend_file *bf, struct stat *st)
{
	struct nfs_stat_64 s;
	int ret;

	if (be_nfs_file(bf)->remembered) {	/* read-only and trusted: what the memo said */
		*st = be_nfs_file(bf)->st;
		return 0;
	}
	ret = be_nfs_file_call(be_nfs_file(bf), be_nfs_do_fstat, &s, "stat");

	if (ret == 0)
		be_nfs_stat_fill(st, &s);
	return ret;
}

static int be_nfs_do_fsync(struct be_nfs_file *f, struct nfs_context *nfs, void *arg)
{
	(void)arg;
	return nfs_fsync(nfs, f->fh);
}

static int be_nfs_fsync(struct backend_file *bf, int datasync)
{
	(void)datasync;
	return be_nfs_file_call(be_nfs_file(bf), be_nfs_do_fsync, NULL, "fsync");
}

/* close(2) reports a failed COMMIT of what was written. */
static int be_nfs_flush(struct backend_file *bf)
{
	return be_nfs_file(bf)->written ? be_nfs_fsync(bf, 0) : 0;
}

static void be_nfs_release(struct backend_file *bf)
{
	if (be_nfs_file(bf)->written)	/* its size and mtime changed: stats taken meanwhile too */
		stat_memo_forget_all(be_nfs(bf->be)->memo);
	be_nfs_file_free(be_nfs_file(bf));
}

static int be_nfs_do_fsetattr(struct be_nfs_file *f, struct nfs_context *nfs, void *arg)
{
	struct be_nfs_args *a = arg;

	return be_nfs_set(nfs, f->fh, f->path, a->set, a->to_set);
}

static int be_nfs_setattr(struct backend *be, const char *path, struct backend_file *f,
			  const struct stat *st, unsigned int to_set)
{
	struct be_nfs_args a = { .set = st, .to_set = to_set };

	stat_memo_forget_all(be_nfs(be)->memo);
	if (f)
		return be_nfs_file_call(be_nfs_file(f), be_nfs_do_fsetattr, &a, "setattr");
	return be_nfs_call(be_nfs(be), path, be_nfs_do_setattr, &a, "setattr");
}

static int be_nfs_cache_key(struct backend_file *bf, char *buf, size_t size)
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

/* ---- setup ---- */

static void be_nfs_destroy(struct backend *be)
{
	struct be_nfs *nb = be_nfs(be);

	if (!nb)
		return;
	while (nb->idle) {
		struct be_nfs_ctx *c = nb->idle;

		nb->idle = c->next;
		be_nfs_ctx_free(c);
	}
	pthread_mutex_destroy(&nb->lock);
	stat_memo_free(nb->memo);
	free(nb->url);
	free(nb->address);
	free(nb->export);
	free(nb->root);
	free(nb);
}

/* Contacts no server: the first call does. */
static int be_nfs_create(struct backend **out, const struct datastore_config *cfg)
{
	const char *address = config_get(cfg, "address", NULL);
	const char *export = config_get(cfg, "export", NULL);
	const char *root = config_get(cfg, "root", NULL);
	const char *options = config_get(cfg, "options", NULL);
	struct be_nfs *nb;
	char *probe;

	if (!address || !export)
		return -EINVAL;
	if (be_nfs_join(&probe, root ? root : "/", "") < 0)
		return -EINVAL;
	free(probe);
	nb = calloc(1, sizeof(*nb));
	if (!nb)
		return -ENOMEM;
	pthread_mutex_init(&nb->lock, NULL);
	nb->memo = stat_memo_new(BE_NFS_MEMO_MAX);	/* NULL: every open asks the server */
	nb->timeout_ms = (int)(cfg->timeout > 0 ? cfg->timeout : BE_NFS_DEFAULT_TIMEOUT) * 1000;
	nb->retries = (int)(cfg->retries >= 0 ? cfg->retries : BE_NFS_DEFAULT_RETRIES);
	if (options && *options == '?')
		options++;
	for (const char *o = options; o && *o; o += strcspn(o, "&"), o += *o == '&')
		if (strncmp(o, "version=4", 9) == 0 && (o[9] == '&' || !o[9]))
			nb->v4 = true;
	if (asprintf(&nb->url, "nfs://%s%s%s%s", address, export, options && *options ? "?" : "",
		     options ? options : "") < 0)
		nb->url = NULL;
	nb->address = strdup(address);
	nb->export = strdup(export);
	nb->root = strdup(root ? root : "/");
	if (!nb->url || !nb->address || !nb->export || !nb->root) {
		be_nfs_destroy(&nb->base);
		return -ENOMEM;
	}
	*out = &nb->base;
	return 0;
}

const struct backend_ops be_nfs_ops = {
	.version = BACKEND_OPS_VERSION,
	.scheme = "nfs",
	.caps = BE_CAP_WRITE | BE_CAP_OWNERS | BE_CAP_REMOTE | BE_CAP_STREAM_LIST,
	.validate = be_nfs_validate,
	.create = be_nfs_create,
	.destroy = be_nfs_destroy,
	.getattr = be_nfs_getattr,
	.readdir = be_nfs_readdir,
	.open = be_nfs_open,
	.pread = be_nfs_pread,
	.release = be_nfs_release,
	.statfs = be_nfs_statfs,
	.fgetattr = be_nfs_fgetattr,
	.readlink = be_nfs_readlink,
	.pwrite = be_nfs_pwrite,
	.flush = be_nfs_flush,
	.fsync = be_nfs_fsync,
	.create_file = be_nfs_create_file,
	.mkdir = be_nfs_mkdir,
	.symlink = be_nfs_symlink,
	.link = be_nfs_link,
	.unlink = be_nfs_unlink,
	.rmdir = be_nfs_rmdir,
	.rename = be_nfs_rename,
	.setattr = be_nfs_setattr,
	.cache_key = be_nfs_cache_key,
	.mknod = be_nfs_mknod,
	.getattr_known = be_nfs_getattr_known,
};
