/*
 * be_archive_int.h - what be_archive.c (the index and the operations) and
 * be_archive_extract.c (where extracted members live) share: the archive
 * backend's types, its libarchive readers, and the extraction calls.
 */
#ifndef MLFS_BE_ARCHIVE_INT_H
#define MLFS_BE_ARCHIVE_INT_H

#include <archive.h>
#include <archive_entry.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "be_archive.h"

#define BE_ARCHIVE_BLOCK	(64u << 10)	/* bytes per read of the inner file */
#define BE_ARCHIVE_NONE		UINT32_MAX

enum be_archive_kind {
	BE_ARCHIVE_ZIP,
	BE_ARCHIVE_TAR,		/* plain: members are read in place */
	BE_ARCHIVE_TAR_FILTERED,	/* gz, bz2, ...: extracted whole */
};

struct be_archive_entry {
	char *path;		/* canonical; "" is the root */
	char *target;		/* a symlink's target, as stored; a hard link's, canonical,
				 * until the index is built (hardlink) */
	mode_t mode;		/* type and permission bits */
	uint64_t size;
	struct timespec mtime;
	off_t data_off;		/* >= 0: the bytes lie there in the inner file; -1: extracted */
	uint32_t ord;		/* the member's ordinal in the archive, naming its extracted file */
	uint32_t parent;
	uint32_t first_child;	/* children in path order, linked by next_sibling */
	uint32_t next_sibling;
	int implied;		/* a folder no member names */
	bool hardlink;		/* a hard link not yet given its target's data */
};

struct be_archive_reader;

struct be_archive_need {
	uint32_t ord;
	uint64_t size;
};

struct be_archive {
	struct backend base;
	struct backend *inner;		/* borrowed */
	struct backend_file *inner_file;	/* the archive, open for the backend's lifetime */
	char *path;
	uint64_t arch_size;
	struct timespec arch_mtime;
	enum be_archive_kind kind;
	struct be_archive_entry *ents;	/* sorted by path; ents[0] is the root */
	size_t n;
	struct be_archive_need *need;	/* members to extract, by ordinal ascending */
	size_t n_need;
	char *cache_dir;
	char *dir;			/* cache_dir/archives/<key> */
	char *tmp_root;			/* the private cache_dir made when none was given */
	uint64_t cache_max;		/* archive_cache_size; 0: no limit */

	pthread_mutex_t lock;
	int extracted;			/* lock: a filtered tar's dir is complete */
	struct be_archive_reader *cursor;	/* lock: the zip reader of compressed members */
	bool passed;			/* lock: a pass over cache_dir/archives was made */
	uint64_t since_pass;		/* lock: bytes extracted since (be_archive_pass_due) */
	int held;			/* lock: dir held as read (dir_cache_hold) from the first
					 * extracted member's open until destroy; or -1 */
};

struct be_archive_file {
	struct backend_file base;
	const struct be_archive_entry *ent;
	int fd;				/* the extracted file, or -1: read in place */
};

/* One pass over the archive: a libarchive handle reading the inner file at its own position. */
struct be_archive_reader {
	struct archive *a;
	struct be_archive *ab;
	off_t pos;
	int err;			/* the inner backend's error, returned unchanged */
	uint32_t next_ord;		/* ordinal of the next header */
	unsigned char buf[BE_ARCHIVE_BLOCK];
};

static inline struct be_archive *be_archive(struct backend *be)
{
	return (struct be_archive *)be;
}

static inline struct be_archive_file *be_archive_file(struct backend_file *f)
{
	return (struct be_archive_file *)f;
}

/* ---- readers (be_archive.c) ---- */

/* Opens a reader at the archive's start; -EINVAL (logged) when no format fits. */
int be_archive_reader_open(struct be_archive_reader **out, struct be_archive *ab);
/* Reads the next header; 1 with *e set, 0 at the end, or a negated errno (logged). */
int be_archive_reader_next(struct be_archive_reader *r, struct archive_entry **e);
void be_archive_reader_close(struct be_archive_reader *r);
/* The error of a failed libarchive call: the inner backend's, else libarchive's, mapped. */
int be_archive_reader_err(const struct be_archive_reader *r, int fallback);
/* Logs "archive NAME (INNER:PATH): @what: libarchive's message". */
void be_archive_log(struct be_archive *ab, const char *what, struct archive *a);

/* ---- extraction (be_archive_extract.c) ---- */

/* Sets ab->dir to cache_dir/archives/<sha256 of inner name, path, size, mtime>. */
int be_archive_set_dir(struct be_archive *ab);
/* Removes the tree at @path (our own temp folders only; never follows a symlink). */
void be_archive_rm_tree(const char *path);
/* Opens the extracted file of member @e, extracting what is needed first. */
int be_archive_member_fd(struct be_archive *ab, const struct be_archive_entry *e);

#endif
