/* stat_pack.c - struct stat packed for keeping (stat_pack.h). */
#define _GNU_SOURCE
#include <string.h>

#include "stat_pack.h"

void stat_pack(struct stat_pack *p, const struct stat *st)
{
	p->ino = (int64_t)st->st_ino;
	p->size = st->st_size;
	p->blocks = st->st_blocks;
	p->atime = st->st_atim.tv_sec;
	p->mtime = st->st_mtim.tv_sec;
	p->ctime = st->st_ctim.tv_sec;
	p->atime_ns = (uint32_t)st->st_atim.tv_nsec;
	p->mtime_ns = (uint32_t)st->st_mtim.tv_nsec;
	p->ctime_ns = (uint32_t)st->st_ctim.tv_nsec;
	p->mode = st->st_mode;
	p->nlink = (uint32_t)st->st_nlink;
	p->uid = st->st_uid;
	p->gid = st->st_gid;
	p->blksize = (uint32_t)st->st_blksize;
	p->dev = st->st_dev;
	p->rdev = st->st_rdev;
}

void stat_unpack(const struct stat_pack *p, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = (ino_t)p->ino;
	st->st_size = p->size;
	st->st_blocks = p->blocks;
	st->st_atim.tv_sec = p->atime;
	st->st_mtim.tv_sec = p->mtime;
	st->st_ctim.tv_sec = p->ctime;
	st->st_atim.tv_nsec = p->atime_ns;
	st->st_mtim.tv_nsec = p->mtime_ns;
	st->st_ctim.tv_nsec = p->ctime_ns;
	st->st_mode = p->mode;
	st->st_nlink = p->nlink;
	st->st_uid = p->uid;
	st->st_gid = p->gid;
	st->st_blksize = p->blksize;
	st->st_dev = p->dev;
	st->st_rdev = p->rdev;
}
