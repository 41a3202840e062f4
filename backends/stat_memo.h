/*
 * stat_memo.h - what a backend without a metadata cache of its own (NFS,
 * SMB) learned of its files' attributes in this mount, so that an open with
 * BE_O_TRUST (datasets/, checkpoints/, models/: trusted for the mount's
 * lifetime) of a file it has seen asks the server nothing: a lookup or a
 * listing said its size and mtime, which name its cached copy.
 *
 * Paths are the backend's ("a/b.jpg"; a leading '/' is ignored).  Whatever
 * the mount changes on the backend (a write, a rename, a removal, new
 * attributes) empties the memo: changes through mlfs are rare beside the
 * reads of a dataset, and an empty memo is never wrong.  Bounded: past its
 * size the memo is emptied and fills again, as the S3 backend's metadata
 * cache does.  Thread-safe.
 */
#ifndef MLFS_STAT_MEMO_H
#define MLFS_STAT_MEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

struct stat_memo;

/* NULL when out of memory (the backend then works without one). */
struct stat_memo *stat_memo_new(size_t max_entries);
void stat_memo_free(struct stat_memo *m);

void stat_memo_put(struct stat_memo *m, const char *path, const struct stat *st);
/* @dir's entry @name, as a listing gives it. */
void stat_memo_put_child(struct stat_memo *m, const char *dir, const char *name,
			 const struct stat *st);
/* Whether @path is known; its attributes in @st. */
bool stat_memo_get(struct stat_memo *m, const char *path, struct stat *st);
/* Forgets everything: the backend changed something. */
void stat_memo_forget_all(struct stat_memo *m);
size_t stat_memo_count(struct stat_memo *m);

#endif
