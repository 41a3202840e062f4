/*
 * fs_jobs_int.h - what the files of jobs/ share: fs_jobs.c (what a path
 * names, attributes, drafts, start and stop), fs_jobs_io.c (open, read,
 * write) and fs_jobs_dir.c (folders, removing and renaming).
 */
#ifndef MLFS_FS_JOBS_INT_H
#define MLFS_FS_JOBS_INT_H

#include <stdbool.h>
#include <sys/stat.h>
#include <fuse_lowlevel.h>

#include "fs.h"
#include "scheduler.h"

#define JOBS_ERROR_LINES 100	/* messages kept in a .error file */

struct jobs_draft {
	char *name;
	uid_t uid;
	gid_t gid;
	mode_t mode;
	char *data;
	size_t len, cap;
	bool too_big;			/* a write went past SPEC_MAX_SIZE */
	bool dirty;			/* written since it was last checked */
	bool readonly;			/* a .error file */
	struct timespec mtime;
	unsigned int opens;
	bool unlinked;			/* out of the list; freed at the last release */
	struct jobs_draft *next;
};

struct jobs_waiter {
	fuse_req_t req;
	char *job;
	bool armed;			/* set once fuse_req_interrupt_func returned */
	bool interrupted;
	struct jobs_waiter *next;
};

struct fs_jobs {
	struct fs *fs;
	struct sched *sched;
	struct node *dir;		/* jobs/ */
	pthread_mutex_t lock;
	struct jobs_draft *drafts;	/* guarded by lock */
	struct jobs_waiter *waiters;	/* guarded by lock */
};

enum jobs_what { J_ROOT, J_DRAFT, J_JOB, J_FILE, J_WORKERS, J_WORKER, J_WFILE };

/* What a path below jobs/ names. */
struct jobs_path {
	enum jobs_what what;
	char *job;			/* J_DRAFT: the draft's name */
	unsigned int worker;
	const char *file;
	char *buf;			/* owns job */
	struct sched_info info;
};

/* An open file under jobs/. */
struct jobs_handle {
	enum jobs_what what;
	struct jobs_draft *draft;	/* J_DRAFT */
	char *job;
	unsigned int worker;
	const char *file;
	char *text;			/* rendered at open */
	size_t len;
	int fd;				/* events and logs; set once, atomically */
	char *path;			/* of fd, opened at the first read when it did not exist yet */
};

/* The files of a job's folder and of a worker's, as ls shows them. */
#define JOBS_N_JOB_FILES	9
#define JOBS_N_WORKER_FILES	5
extern const char *const jobs_job_files[JOBS_N_JOB_FILES];
extern const char *const jobs_worker_files[JOBS_N_WORKER_FILES];

/* The draft named @name, or NULL.  fj->lock held. */
struct jobs_draft *jobs_draft_find(struct fs_jobs *fj, const char *name);

/* Takes @d out of the list; freed now or at its last release.  Lock held. */
void jobs_draft_unlink(struct fs_jobs *fj, struct jobs_draft *d);

/* The mount a request of jobs/ is for. */
struct fs *jobs_fs(fuse_req_t req);

/* A log, the events, or a worker's rotated log: a file of the job folder served as it is. */
bool jobs_grows(const char *file);

/* An open file of jobs/: made at open, freed at release. */
void jobs_handle_free(struct fs_jobs *fj, struct jobs_handle *h);

struct jobs_handle *jobs_handle_new(enum jobs_what what);

/* What node @n (or its child @name, when not NULL) of jobs/ is, in @p; 0 or -errno. */
int jobs_node_classify(struct fs *fs, struct node *n, const char *name, struct jobs_path *p);

/* A scratch name (".x", "x~"): kept as written, never checked, until renamed. */
bool jobs_scratch(const char *name);

/* Replies @n's attributes, those of what @p names, or error @ret when set; frees p->buf. */
void jobs_reply_stat(fuse_req_t req, struct fs *fs, struct node *n, struct jobs_path *p, int ret);

/* The attributes of what @p names; 0 or -errno. */
int jobs_stat(struct fs *fs, const struct jobs_path *p, struct stat *st);

/*
 * Submits @text as written to jobs/@file by @uid/@gid.  On success the
 * draft @d (when given) and any FILE.error go away; on failure FILE.error
 * tells why.  Returns 0 or the negated errno close or rename reports.
 */
int jobs_submit(struct fs *fs, const char *file, const char *text, size_t len, bool too_big,
		uid_t uid, gid_t gid, struct jobs_draft *d);

/* fs_jobs_io.c: the scheduler's sched_final_fn (@job ended): answers its parked reads. */
void jobs_final(void *arg, const char *job);

#endif
