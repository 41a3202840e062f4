/*
 * remote_attr.c - the attributes a remote server does not keep, made up the
 * same way by every backend over remote.c (remote.h): an inode number of
 * the path's own, one date for all three times, owner root, 1 MiB blocks,
 * and a statfs of 16 TiB for a read-only server that says nothing of its
 * space; and when a date a listing gave names one version of a file.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "remote.h"

ino_t remote_path_ino(const char *path)
{
	uint64_t h = 14695981039346656037ull;	/* FNV-1a, 64 bits */

	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return (ino_t)(h ? h : 1);
}

void remote_stat(struct stat *st, const char *path, mode_t mode, int64_t size, time_t t)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = remote_path_ino(path);
	st->st_mode = mode;
	st->st_nlink = S_ISDIR(mode) ? 2 : 1;
	st->st_size = S_ISDIR(mode) ? 0 : size;
	st->st_blksize = 1 << 20;
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_mtim.tv_sec = st->st_atim.tv_sec = st->st_ctim.tv_sec = t;
}

void remote_statfs_readonly(struct statvfs *sv, unsigned long namemax)
{
	memset(sv, 0, sizeof(*sv));
	sv->f_bsize = sv->f_frsize = 4096;
	sv->f_blocks = 1ull << 32;
	sv->f_files = 1ull << 24;
	sv->f_namemax = namemax;
	sv->f_flag = ST_RDONLY;
}

bool remote_date_settled(time_t date, bool day)
{
	return date > 0 && date + (day ? 86400 : 0) + REMOTE_SETTLED_S <= time(NULL);
}
