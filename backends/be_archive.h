/* be_archive.h - a zip, tar, tar.gz or tar.bz2 file of another backend, shown as a folder (be_archive.c). */
#ifndef MLFS_BE_ARCHIVE_H
#define MLFS_BE_ARCHIVE_H

#include "backend.h"

#define BE_ARCHIVE_PATH_MAX	4095	/* a member's canonical path, at most */
#define BE_ARCHIVE_NAME_MAX	255	/* one component of it */

/*
 * Writes member name @raw's canonical form into @out (BE_ARCHIVE_PATH_MAX
 * + 1 bytes): no "." components, no empty ones.  Returns 0, or -EINVAL with
 * *why set when the member must not be served: empty, absolute, "..", a
 * control character, too long ("zip slip" and friends).
 */
int be_archive_canon(const char *raw, char *out, const char **why);

/*
 * The ops of every archive backend.  Its create() refuses (-EINVAL): an
 * archive lives inside another backend, so it is made with be_archive_create.
 */
extern const struct backend_ops be_archive_ops;

/*
 * Shows the archive at @path inside @inner (borrowed; must outlive the new
 * backend) as a read-only folder.  Reads the archive's member list once,
 * here, through @inner.
 *
 * @cache_dir: where members that cannot be read in place are extracted,
 * under cache_dir/archives/<sha256 of inner name, path, size, mtime>/, shared
 * with other processes and kept across restarts; created when missing.  NULL:
 * a private folder under /tmp, removed by destroy.
 * @cache_max: archive_cache_size: after an extraction, cache_dir/archives is
 * kept under it (dir_cache_evict: the least recently read extractions no
 * archive backend reads go); 0: no limit.
 * @name: the backend's name, for messages and statistics (copied).
 *
 * Returns 0, -EINVAL for a corrupt or unsupported archive (one log line
 * naming it), the inner backend's error unchanged (-ENOENT, -EIO, ...), or
 * -ENOMEM.  Free the backend with backend_destroy().
 */
int be_archive_create(struct backend **out, struct backend *inner, const char *path,
		      const char *cache_dir, uint64_t cache_max, const char *name);

#endif
