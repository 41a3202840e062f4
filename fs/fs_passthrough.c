/*
 * fs_passthrough.c - kernel FUSE passthrough for files of local datastores.
 *
 * Linux 6.9 can serve the reads and writes of an open FUSE file straight
 * from a "backing" file the daemon names at open (FOPEN_PASSTHROUGH): no
 * request reaches the daemon, and the data is the backing file's own page
 * cache, so a local datastore reads as fast as the folder itself.  libfuse
 * 3.14 (Debian 12) predates it, so this file speaks the two missing words
 * of the protocol itself: it watches the INIT request through libfuse's
 * custom I/O hooks, adds FUSE_PASSTHROUGH to libfuse's INIT reply when the
 * kernel offered it, and builds the OPEN reply with the backing id.
 *
 * The kernel wants every open file of an inode in one mode, and all the
 * passthrough ones on one backing file.  So a node counts its opens of each
 * kind: while any open of it goes through the daemon (one opened before
 * passthrough could be set up, say), every open does; otherwise its opens share one backing file, opened
 * read-write (read-only in a read-only view) from the first open's
 * descriptor and released with the last.
 *
 * A file made by CREATE gets its backing file at once too: the CREATE reply
 * (an entry and an open, libfuse's fuse_reply_create) is built here with
 * the backing id, so a worker writing a new file into output/ writes at the
 * disk's speed.  What it does not do: passthrough for any backend without a
 * local descriptor.
 * Registering a backing file needs CAP_SYS_ADMIN; without it, or on an
 * older kernel, every open goes through the daemon as before.
 *
 * Threading: the I/O hooks run on every worker thread; the state they share
 * is atomic.  The per-node counts are guarded by fs->cache_lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>
#include <fuse_lowlevel.h>

#include "fs.h"
#include "log.h"

/* From the kernel's uapi <linux/fuse.h> (7.40), newer than Debian 12's headers. */
#define FS_PT_OPCODE_INIT	26
#define FS_PT_INIT_EXT		(1u << 30)	/* flags: flags2 is valid */
#define FS_PT_PASSTHROUGH2	(1u << 5)	/* flags2: FUSE_PASSTHROUGH (bit 37) */
#define FS_PT_FOPEN		(1u << 7)	/* FOPEN_PASSTHROUGH */

struct fs_pt_in_header {
	uint32_t len;
	uint32_t opcode;
	uint64_t unique;
	uint64_t nodeid;
	uint32_t uid, gid, pid;
	uint16_t total_extlen;
	uint16_t padding;
};

struct fs_pt_init_in {
	uint32_t major, minor, max_readahead, flags, flags2;
};

struct fs_pt_out_header {
	uint32_t len;
	int32_t error;
	uint64_t unique;
};

struct fs_pt_init_out {
	uint32_t major, minor, max_readahead, flags;
	uint16_t max_background, congestion_threshold;
	uint32_t max_write, time_gran;
	uint16_t max_pages, map_alignment;
	uint32_t flags2, max_stack_depth;
	uint32_t unused[6];
};

struct fs_pt_open_out {
	uint64_t fh;
	uint32_t open_flags;
	int32_t backing_id;
};

struct fs_pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};

#define FS_PT_IOC_BACKING_OPEN	_IOW(229, 1, struct fs_pt_backing_map)
#define FS_PT_IOC_BACKING_CLOSE	_IOW(229, 2, uint32_t)

struct fs_pt_attr {
	uint64_t ino, size, blocks, atime, mtime, ctime;
	uint32_t atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev, blksize, flags;
};

struct fs_pt_entry_out {
	uint64_t nodeid, generation, entry_valid, attr_valid;
	uint32_t entry_valid_nsec, attr_valid_nsec;
	struct fs_pt_attr attr;
};

_Static_assert(sizeof(struct fs_pt_in_header) == 40, "fuse_in_header");
_Static_assert(sizeof(struct fs_pt_attr) == 88, "fuse_attr");
_Static_assert(sizeof(struct fs_pt_entry_out) == 128, "fuse_entry_out");
_Static_assert(sizeof(struct fs_pt_init_out) == 64, "fuse_init_out");
_Static_assert(sizeof(struct fs_pt_open_out) == 16, "fuse_open_out");

static ssize_t fs_pt_read(int fd, void *buf, size_t len, void *userdata)
{
	struct fs *fs = userdata;
	ssize_t n = read(fd, buf, len);
	const struct fs_pt_in_header *in = buf;

	if (n >= (ssize_t)(sizeof(*in) + sizeof(struct fs_pt_init_in)) &&
	    in->opcode == FS_PT_OPCODE_INIT) {
		const struct fs_pt_init_in *init = (const void *)(in + 1);

		if ((init->flags & FS_PT_INIT_EXT) && (init->flags2 & FS_PT_PASSTHROUGH2))
			atomic_store(&fs->pt_init_unique, in->unique);
	}
	return n;
}

/* Adds FUSE_PASSTHROUGH to libfuse's INIT reply when the kernel offered it. */
static void fs_pt_patch_init(struct fs *fs, struct iovec *iov, int count)
{
	const struct fs_pt_out_header *out = iov[0].iov_base;
	struct fs_pt_init_out *init;

	if (iov[0].iov_len != sizeof(*out) || count < 2 || out->error != 0 ||
	    out->unique != atomic_load(&fs->pt_init_unique) || out->unique == 0 ||
	    iov[1].iov_len < sizeof(*init))
		return;
	init = iov[1].iov_base;
	if (!(init->flags & FS_PT_INIT_EXT))
		return;
	init->flags2 |= FS_PT_PASSTHROUGH2;
	init->max_stack_depth = 1;
	atomic_store(&fs->passthrough, true);
}

static ssize_t fs_pt_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fs *fs = userdata;

	if (atomic_load(&fs->pt_init_unique) && !atomic_load(&fs->passthrough))
		fs_pt_patch_init(fs, iov, count);
	return writev(fd, iov, count);
}

static const struct fuse_custom_io fs_pt_io = {
	.read = fs_pt_read,
	.writev = fs_pt_writev,
};

int fs_passthrough_setup(struct fs *fs, struct fuse_session *se)
{
	fs->pt_fd = fuse_session_fd(se);
	if (geteuid() != 0)
		return 0;	/* backing files need CAP_SYS_ADMIN */
	return fuse_session_custom_io(se, &fs_pt_io, fs->pt_fd) < 0 ? -EIO : 0;
}

/* A descriptor of the same open file as @fd, with @flags; never re-resolves a path. */
static int fs_pt_reopen(int fd, int flags)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return open(proc, flags | O_CLOEXEC);
}

/* Gives @n a backing file registered with the kernel.  Called with cache_lock held. */
static int fs_pt_start(struct fs *fs, struct node *n, int fd, bool readonly)
{
	struct fs_pt_backing_map map = { .fd = fs_pt_reopen(fd, readonly ? O_RDONLY : O_RDWR) };
	int id;

	if (map.fd < 0)
		return -errno;
	id = ioctl(fs->pt_fd, FS_PT_IOC_BACKING_OPEN, &map);
	if (id <= 0) {
		int err = id < 0 ? -errno : -EIO;

		close(map.fd);
		return err;
	}
	n->backing_fd = map.fd;
	n->backing_id = id;
	return 0;
}

int fs_passthrough_get(struct fs *fs, struct node *n, int fd, bool readonly)
{
	int id = 0;

	pthread_mutex_lock(&fs->cache_lock);
	if (atomic_load(&fs->passthrough) && fd >= 0 && n->cached_users == 0 &&
	    (n->pt_users > 0 || fs_pt_start(fs, n, fd, readonly) == 0)) {
		n->pt_users++;
		id = n->backing_id;
	} else {
		n->cached_users++;
	}
	pthread_mutex_unlock(&fs->cache_lock);
	return id;
}

void fs_passthrough_put(struct fs *fs, struct node *n, int backing_id)
{
	uint32_t id = (uint32_t)backing_id;

	pthread_mutex_lock(&fs->cache_lock);
	if (backing_id == 0) {
		n->cached_users--;
	} else if (--n->pt_users == 0) {
		if (ioctl(fs->pt_fd, FS_PT_IOC_BACKING_CLOSE, &id) < 0)
			log_debug("backing id %d: %s", backing_id, strerror(errno));
		close(n->backing_fd);
		n->backing_id = 0;
	}
	pthread_mutex_unlock(&fs->cache_lock);
}

int fs_passthrough_reply_open(fuse_req_t req, const struct fuse_file_info *fi, int backing_id)
{
	struct fs_pt_open_out out = {
		.fh = fi->fh,
		.open_flags = FS_PT_FOPEN,
		.backing_id = backing_id,
	};
	struct iovec iov = { .iov_base = &out, .iov_len = sizeof(out) };

	return fuse_reply_iov(req, &iov, 1);
}

/* A timeout in seconds as the protocol's whole seconds and nanoseconds. */
static void fs_pt_timeout(double t, uint64_t *sec, uint32_t *nsec)
{
	if (t <= 0) {
		*sec = 0;
		*nsec = 0;
		return;
	}
	*sec = t >= 1e18 ? (uint64_t)1e18 : (uint64_t)t;
	*nsec = (uint32_t)((t - (double)*sec) * 1e9);
}

int fs_passthrough_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
				const struct fuse_file_info *fi, int backing_id)
{
	const struct stat *st = &e->attr;
	struct fs_pt_entry_out entry = {
		.nodeid = e->ino,
		.generation = e->generation,
		.attr = {
			.ino = st->st_ino, .size = (uint64_t)st->st_size,
			.blocks = (uint64_t)st->st_blocks,
			.atime = (uint64_t)st->st_atim.tv_sec, .mtime = (uint64_t)st->st_mtim.tv_sec,
			.ctime = (uint64_t)st->st_ctim.tv_sec,
			.atimensec = (uint32_t)st->st_atim.tv_nsec,
			.mtimensec = (uint32_t)st->st_mtim.tv_nsec,
			.ctimensec = (uint32_t)st->st_ctim.tv_nsec,
			.mode = st->st_mode, .nlink = (uint32_t)st->st_nlink, .uid = st->st_uid,
			.gid = st->st_gid, .rdev = (uint32_t)st->st_rdev,
			.blksize = (uint32_t)st->st_blksize,
		},
	};
	struct fs_pt_open_out open = {
		.fh = fi->fh,
		.open_flags = FS_PT_FOPEN,
		.backing_id = backing_id,
	};
	struct iovec iov[2] = {
		{ .iov_base = &entry, .iov_len = sizeof(entry) },
		{ .iov_base = &open, .iov_len = sizeof(open) },
	};

	fs_pt_timeout(e->entry_timeout, &entry.entry_valid, &entry.entry_valid_nsec);
	fs_pt_timeout(e->attr_timeout, &entry.attr_valid, &entry.attr_valid_nsec);
	return fuse_reply_iov(req, iov, 2);
}
