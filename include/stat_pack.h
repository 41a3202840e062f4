/*
 * stat_pack.h - the attributes getattr gives back, packed for keeping by
 * the million: struct stat without its padding and unused fields (about 100
 * bytes, not 144).  What a listing or a lookup said is kept this way by
 * stat_memo (NFS, SMB) and by the mount's trusted listings (fs_listing.c).
 */
#ifndef MLFS_STAT_PACK_H
#define MLFS_STAT_PACK_H

#include <stdint.h>
#include <sys/stat.h>

struct stat_pack {
	int64_t ino, size, blocks;
	int64_t atime, mtime, ctime;
	uint32_t atime_ns, mtime_ns, ctime_ns;
	uint32_t mode, nlink, uid, gid, blksize;
	uint64_t dev, rdev;
};

void stat_pack(struct stat_pack *p, const struct stat *st);
/* The struct stat @p was packed from (fields it does not keep are 0). */
void stat_unpack(const struct stat_pack *p, struct stat *st);

#endif
