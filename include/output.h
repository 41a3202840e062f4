/*
 * output.h - a worker's output: staged on local disk, then uploaded to its
 * destination, and never lost on the way (DESIGN §7).
 *
 * Each output is a folder state_dir/outputs/<id>/ that any mlfs process of
 * the node can find and finish:
 *
 *   output.json    what it is: job, worker, destination, config (written once)
 *   files/         the staged output, as the worker wrote it
 *   <job>.zip      the zip of files/ when the destination is zipped
 *   journal        append-only JSON lines, fdatasync'd: files that are safe
 *                  at the destination, the zip made, the upload complete
 *   resume.json    the backend's resume token of the file being uploaded
 *   progress.json  phase, bytes done and total, error: for .mlfs/ and sync
 *   live.lock      flock'd by the `mlfs job` that mounts it, while mounted
 *   upload.lock    flock'd by the process uploading it
 *
 * Two processes never upload one output at once (upload.lock); an output
 * is only uploaded once no mount holds it (live.lock).  Nothing under
 * files/ is removed before the journal says the upload is complete.
 */
#ifndef MLFS_OUTPUT_H
#define MLFS_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct spec_output_kind;

struct mlfs_config;
struct spec;

struct output {
	char *dir;		/* state_dir/outputs/<id> */
	char *id;
	char *job;
	unsigned int worker;	/* from 1 */
	unsigned int workers;	/* the job's worker count: names the zip */
	char *type;		/* s3, datastore, local, dataset, checkpoint, model; none */
	const struct spec_output_kind *kind;	/* type's; NULL: one mlfs does not know */
	char *path;
	bool archive;		/* zipped (s3 and local only) */
	char *config;		/* the config file it was made under */
	uid_t uid;		/* the owner: files made at the destination get it */
	gid_t gid;
	int live_fd;		/* live.lock while this process mounts it; else -1 */
};

/*
 * Makes a new output folder for worker @worker of @s under @state_dir,
 * named @id (NULL: one is made up), whose files/ @uid and @gid own, and
 * holds its live.lock.  Without a data.output in @s the output's type is
 * "none": its files are kept in the staging folder, never sent anywhere.
 * Returns 0, -EEXIST when output @id was made before, or a negated errno.
 */
int output_create(struct output **out, const char *state_dir, const char *config_file,
		  const struct spec *s, unsigned int worker, const char *id, uid_t uid, gid_t gid);

/* Reads the output in folder @dir.  0, -ENOENT, -EINVAL (not an output), -ENOMEM. */
int output_open(struct output **out, const char *dir);
void output_free(struct output *o);

/* Removes the folder of an output that was never mounted (files/ still empty). */
void output_discard(struct output *o);

/* The staged files: "DIR/files", malloc'd. */
char *output_files(const struct output *o);

/* true while a mount holds the output in folder @dir. */
bool output_live(const char *dir);

/* Waits (at most @seconds) until no mount holds @dir. 0, -ETIMEDOUT or -ENOMEM. */
int output_wait_unmounted(const char *dir, int seconds);

/* Progress reports, at most about once a second and once at the end. */
typedef void output_progress_fn(void *arg, const struct output *o, const char *phase,
				uint64_t done, uint64_t total);

/*
 * Uploads @o to its destination, resolved in @cfg (which gains the
 * datastore of an s3:// or local destination): zips files/ first when the
 * destination is zipped, sends only what the journal does not list as
 * safe, retries failures with backoff (cfg->retries times), and never
 * follows a symlink in files/ (each is skipped with a warning).  Waits for
 * another process's upload of @o to end first.  Returns 0 once everything
 * is at the destination (then the staged files are removed), -EBUSY while
 * a mount holds @o, or the error that ended the last attempt, with a
 * message in @err.
 */
int output_upload(struct output *o, struct mlfs_config *cfg, output_progress_fn *fn, void *arg,
		  char *err, size_t errsize);

/* true when the journal of @o says its upload is complete. */
bool output_complete(const struct output *o);
/* The same for the output kept in folder @dir (state_dir/outputs/<id>). */
bool output_complete_dir(const char *dir);

/*
 * Uploads every output under cfg->state_dir/outputs that no mount holds
 * and whose upload is not complete.  Returns the number that failed (each
 * reported with log_err), 0 when all are safe; *n_live gets the number
 * skipped because still mounted.
 */
int output_sync_all(struct mlfs_config *cfg, output_progress_fn *fn, void *arg,
		    unsigned int *n_live);

/*
 * One line per output under @state_dir/outputs, for .mlfs/uploads:
 * "ID JOB WORKER PHASE DONE TOTAL DESTINATION [error]".
 */
int output_status_text(const char *state_dir, char **buf, size_t *len);

/* The zip's name: "<job>.zip" for a one-worker job, else "<job>_<worker>.zip". */
int output_zip_name(const struct output *o, char *buf, size_t size);

#endif
