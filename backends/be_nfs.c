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
 * this file says what each call on a path does on the export, and
 * be_nfs_file.c what the calls on open files and setattr do.  No server is
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


void be_nfs_stat_fill(struct stat *st, const struct nfs_stat_64 *s)
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

/*
 * libnfs 4.0 says 256 bytes a name over NFSv3 without asking the server (over
 * v4 it asks); what the Linux filesystems an NFS server exports take is 255,
 * the NFSv3 limit the kernel's own client assumes when not told, so a name
 * of the length said is one the server accepts.
 */
static int be_nfs_statfs(struct backend *be, const char *path, struct statvfs *sv)
{
	struct be_nfs_args a = { .sv = sv };
	int ret;

	(void)path;
	ret = be_nfs_call(be_nfs(be), "", be_nfs_do_statfs, &a, "statfs");
	if (ret == 0 && !be_nfs(be)->v4 && sv->f_namemax > NAME_MAX)
		sv->f_namemax = NAME_MAX;
	return ret;
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
void be_nfs_set_owner(struct nfs_context *nfs, const char *path,
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

/*
 * libnfs 4.0 encodes a call in 4 KiB: a SYMLINK whose target and name do
 * not fit (a target of about 3,950 bytes) fails there with ENOMEM, never
 * sent.  Such a link is too long for this client: ENAMETOOLONG says so.
 */
#define BE_NFS_SYMLINK_FITS	2048

static int be_nfs_do_symlink(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
{
	const char *name = strrchr(path, '/');
	int ret = nfs_symlink(nfs, a->other, path);

	if (ret == -ENOMEM && strlen(a->other) + strlen(name ? name : path) >= BE_NFS_SYMLINK_FITS)
		return -ENAMETOOLONG;
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
	int ret;

	stat_memo_forget_all(be_nfs(be)->memo);	/* what it said may be wrong now */
	ret = be_nfs_hide_open(be_nfs(be), path);
	if (ret != 0)
		return ret < 0 ? ret : 0;
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
int be_nfs_do_rename(struct nfs_context *nfs, const char *path, struct be_nfs_args *a)
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

	int ret;

	if (flags & ~RENAME_NOREPLACE)
		return -EINVAL;	/* RENAME_EXCHANGE: NFS has no such thing */
	stat_memo_forget_all(be_nfs(be)->memo);	/* what it said may be wrong now */
	/* a file open here that the rename replaces stays readable through its handles */
	if (!(flags & RENAME_NOREPLACE) && strcmp(from, to) != 0 &&
	    (ret = be_nfs_hide_open(be_nfs(be), to)) < 0)
		return ret;
	return be_nfs_two(be, from, to, be_nfs_do_rename, &a, "rename");
}

static int be_nfs_link(struct backend *be, const char *from, const char *to)
{
	struct be_nfs_args a = { 0 };

	stat_memo_forget_all(be_nfs(be)->memo);	/* what it said may be wrong now */
	return be_nfs_two(be, from, to, be_nfs_do_link, &a, "link");
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
	pthread_mutex_destroy(&nb->files_lock);
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
	pthread_mutex_init(&nb->files_lock, NULL);
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
