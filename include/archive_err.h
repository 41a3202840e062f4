/*
 * archive_err.h - the one mapping of a libarchive failure to an errno, for
 * its readers (be_archive.c) and its writer (an output's zip).
 */
#ifndef MLFS_ARCHIVE_ERR_H
#define MLFS_ARCHIVE_ERR_H

struct archive;

/*
 * The negated errno of @a's last failure: the system's own error when
 * libarchive passed one on (ENOSPC, ENOMEM, EIO, ...), else @fallback, what
 * the caller calls that failure (a damaged archive: libarchive's "file
 * format", "misc" and "programmer" codes are no errno a user can act on).
 */
int mlfs_archive_errno(struct archive *a, int fallback);

#endif
