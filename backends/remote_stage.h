/*
 * remote_stage.h - what the object-store backends (s3, azure) share to
 * write: a file opened for writing is staged in an anonymous local file
 * and uploaded whole when it changed (flush, fsync); the datastore's open
 * writers are listed so a stat of the path sees the staged size; a big
 * upload's parts go up from a few threads at once.
 *
 * Threading: a writers list has its own mutex, never held across I/O; a
 * stage's counters are atomics; remote_parts_run's part function is called
 * from several threads at once.
 */
#ifndef MLFS_REMOTE_STAGE_H
#define MLFS_REMOTE_STAGE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "backend.h"

/*
 * The staged copy of one file open for writing, shared by every open of its
 * path (as a local file is): what one writer wrote, the others read, and
 * whichever flushes uploads it all.
 */
struct remote_stage {
	int fd;			/* the staging file */
	char *path;		/* the datastore path */
	atomic_uint gen;	/* bumped by every change to the staging file */
	atomic_uint uploaded;	/* the gen that was last uploaded */
	atomic_bool gone;	/* its path was unlinked: never uploaded, no longer stat'd */
	pthread_mutex_t upload;	/* one upload of it at a time */
	/* guarded by the writers list's lock: */
	unsigned int refs;	/* the opens sharing it */
	unsigned int writers;	/* those open for writing; at 0 it leaves the list */
	int state;		/* REMOTE_STAGE_LOADING, 0 (ready) or the load's -errno */
	bool listed;		/* on the writers list (new opens of the path find it) */
	struct remote_stage *next;	/* in the writers list */
};

#define REMOTE_STAGE_LOADING	1

/* The stages of a datastore's files open for writing. */
struct remote_writers {
	pthread_mutex_t lock;
	pthread_cond_t loaded;		/* a stage's load ended */
	pthread_cond_t closed;		/* a stage's last open closed */
	struct remote_stage *head;	/* guarded by lock */
};

void remote_writers_init(struct remote_writers *w);
void remote_writers_destroy(struct remote_writers *w);

/* Fills the new stage @fd with the server's bytes of the path: 0 or -errno. */
typedef int remote_load_fn(void *arg, int fd);

/*
 * An open of @path for writing: joins the stage another open has of it
 * (waiting for its load; emptied with @trunc), else makes a new one, an
 * anonymous file under @dir (made when missing; O_TMPFILE, else an
 * unlinked mkostemp file, so a crash leaves nothing behind): empty and
 * dirty with @trunc (a new or truncated file must reach the server even
 * unwritten), else filled by @load(@arg, fd) while other opens of the path
 * wait.  0 with *@out, or -errno (a failed load, this open's or the one it
 * waited for) and *@out NULL.
 */
int remote_writers_open(struct remote_writers *w, const char *dir, const char *path, bool trunc,
			remote_load_fn *load, void *arg, struct remote_stage **out);

/*
 * A read-only open of @path: the stage of it being written, ready (the
 * reader sees what the writers wrote), a reference the caller gives back
 * with remote_writers_close (@writer false); NULL when none.  Once its
 * last writer closed, a stage is a reader's copy only: off the list, no
 * longer stat'd, renamed around or joined.
 */
struct remote_stage *remote_writers_find(struct remote_writers *w, const char *path);

/*
 * Gives back an open's reference to @s, @writer when it came from
 * remote_writers_open.  The last writer's close logs for datastore @name
 * when @s holds changes no upload took; the last reference frees it.
 */
void remote_writers_close(struct remote_writers *w, struct remote_stage *s, const char *name,
			  bool writer);

/* Whether a writer has @path open (and it was not unlinked since). */
bool remote_writers_has(struct remote_writers *w, const char *path);

/* Whether a writer has a file open anywhere beneath folder @dir: an rmdir of it is ENOTEMPTY. */
bool remote_writers_beneath(struct remote_writers *w, const char *dir);

/*
 * An unlink of @path, open for writing: its writers go on writing to their
 * staged files, which are never uploaded, and @path is no longer stat'd
 * from them.  The caller removes the server's object, when there is one,
 * first.  Returns how many writers had it.
 */
unsigned int remote_writers_unlink(struct remote_writers *w, const char *path);

/*
 * A rename from or onto a file open for writing, which an object store
 * cannot make: the writer's upload at close would bring back the old name,
 * or replace what was renamed onto it.  -EBUSY, logged for datastore
 * @name, when a writer has @from or @to open; else 0.  A writer that closed
 * just before (close(2) returns before FUSE's RELEASE reaches the daemon:
 * write, close, rename is how rsync and editors save) is waited for,
 * REMOTE_RENAME_WAIT_MS at most.
 */
#define REMOTE_RENAME_WAIT_MS	500
int remote_writers_rename_check(struct remote_writers *w, const char *name, const char *from,
				const char *to);

/*
 * When a writer has @path open: its staged attributes (size, blocks,
 * times) into @st as a 0644 file of the mount's owner, and 0; else -ENOENT.
 */
int remote_writers_stat(struct remote_writers *w, const char *path, struct stat *st);

/*
 * A folder's listing with the files being written in it, which the server
 * does not hold until their close: remote_dir_fill_begin notes the names
 * of folder @dir's writers; the listing fills through remote_dir_fill_listed
 * (@d its payload), which leaves those names out; remote_dir_fill_end adds
 * them with their staged attributes (a writer closed meanwhile: as the
 * listing had it, if it did), counts them in *@added and frees what begin
 * took.  Each returns 0, -ENOMEM, or (end) @ret or the fill's.
 */
struct remote_dir_fill {
	backend_fill_fn *fill;
	void *payload;
	char **writing;		/* NULL-terminated names; NULL when none */
	struct stat *listed;	/* what the listing said of writing[i], when listed[i].st_mode */
};
int remote_dir_fill_begin(struct remote_dir_fill *d, struct remote_writers *w, const char *dir,
			  backend_fill_fn *fill, void *payload);
int remote_dir_fill_listed(void *d, const char *name, const struct stat *st);
int remote_dir_fill_end(struct remote_dir_fill *d, struct remote_writers *w, const char *dir,
			int ret, size_t *added);

/* pwrite(2) and ftruncate(2) of the staged file, marking it changed. */
ssize_t remote_stage_pwrite(struct remote_stage *s, const void *buf, size_t len, off_t off);
int remote_stage_truncate(struct remote_stage *s, off_t size);

/* The staged file's size and blocks and mtime into @st (a writer's fgetattr). */
int remote_stage_fstat(struct remote_stage *s, struct stat *st);

/* Whether @s changed since its last upload and was not unlinked. */
bool remote_stage_dirty(struct remote_stage *s);

/*
 * Uploads @s when it changed since its last upload (and was not unlinked):
 * @up(@arg, fd, size) sends the staging file's @size bytes, one upload of
 * @s at a time (a flush waits for another open's), and what it sent is
 * clean once it succeeds.  0, or @up's -errno, logged for datastore @name.
 */
typedef int remote_upload_fn(void *arg, int fd, uint64_t size);
int remote_stage_upload(struct remote_stage *s, const char *name, remote_upload_fn *up,
			void *arg);

/*
 * The setattr of a server that keeps no owners, modes or times, for an
 * open file's stage @s (NULL when not written: the caller's path): chmod and
 * utimes change nothing, chown is remote_chown_check's, a size truncates
 * @s.  0 when done, 1 when the caller must truncate the path itself to
 * @st->st_size, or -errno.
 */
int remote_stage_setattr(struct remote_stage *s, const struct stat *st, unsigned int to_set);

/*
 * A server that keeps no owners: a chown to the owner every file shows
 * (root, or the daemon's user) changes nothing and is 0, as cp -p and mv
 * across file systems ask for; any other is -EPERM.  @to_set: BE_SET_*.
 */
int remote_chown_check(const struct stat *st, unsigned int to_set);

/* A remote_sink_fn writing at @off of @fd, moving @off on. */
struct remote_to_fd {
	int fd;
	off_t off;
};
int remote_sink_fd(void *arg, const void *data, size_t len);

/*
 * Where a resumable upload's progress goes (struct backend_upload), for
 * parts landing from several threads: @up NULL or without save, nowhere.
 */
struct remote_saver {
	const struct backend_upload *up;
	pthread_mutex_t lock;
	int error;		/* lock: a save failed; no more are made */
};

/*
 * Records part @i as landed in the caller's plan and, when @token is not
 * NULL, prints the plan's token (malloc'd) and the bytes it holds as safe.
 */
typedef int remote_landed_fn(void *arg, unsigned int i, char **token, uint64_t *done);

void remote_saver_init(struct remote_saver *s, const struct backend_upload *up);
void remote_saver_fini(struct remote_saver *s);

/*
 * Part @i landed: @fn records it, under the saver's lock, and the token is
 * saved unless an earlier save failed (parts still in flight then land
 * unsaved: the caller hears of one failure, and a resume sends them again).
 * 0, or the error of @fn or of the save.
 */
int remote_saver_landed(struct remote_saver *s, remote_landed_fn *fn, void *arg, unsigned int i);

/*
 * Calls @part(@arg, @todo[k]) for every k < @n_todo, from this thread and
 * up to @threads - 1 more, until one fails: its error (the first), or 0.
 */
typedef int remote_part_fn(void *arg, unsigned int i);
int remote_parts_run(const unsigned int *todo, unsigned int n_todo, unsigned int threads,
		     remote_part_fn *part, void *arg);

#endif
