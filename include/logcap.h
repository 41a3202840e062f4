/*
 * logcap.h - a worker's output into its log and its job's log, within
 * log_size: the worker's log is rotated to LOG.1 each time it reaches the
 * limit, and the job's log takes at most the limit from each worker, each
 * line prefixed "[N] ", then one note.  Used by the local executor's
 * shepherd and by `mlfs logpipe` in a Slurm batch script.
 *
 * logcap_init prepares everything (it may format text); logcap_write and
 * logcap_end only make system calls on what the struct holds, so a forked
 * child of a threaded process may call them.
 */
#ifndef MLFS_LOGCAP_H
#define MLFS_LOGCAP_H

#include <stddef.h>
#include <stdint.h>

/* Longest line the job log gets; a longer one is split into several. */
#define LOGCAP_LINE_MAX	(64 * 1024)

struct logcap {
	int log_fd;			/* the worker's log, O_APPEND; -1 = none */
	int job_fd;			/* the job's log, O_APPEND; -1 = none */
	uint64_t max;			/* log_size; 0 = no limit */
	uint64_t log_size;		/* bytes in the worker's log now */
	uint64_t job_added;		/* bytes this worker added to the job's log */
	size_t prefix_len;		/* "[N] " at the start of line */
	size_t line_len;		/* bytes of the current line after it */
	char log_path[4096];		/* the worker's log, rotated by rename */
	char log_old[4100];		/* LOG.1 */
	char rotated_note[128];		/* the first line of a rotated log */
	char capped_note[192];		/* the job log's last line from this worker */
	char line[LOGCAP_LINE_MAX + 32];
};

/*
 * Takes the two open logs (either may be -1; they are the struct's now,
 * closed by logcap_end) of worker @worker, the worker's log being
 * @log_path.  The worker's log counts from its present size.
 */
void logcap_init(struct logcap *lc, int log_fd, const char *log_path, int job_fd,
		 unsigned int worker, uint64_t max);

/* Adds output: unchanged to the worker's log, a whole line at a time to the job's. */
void logcap_write(struct logcap *lc, const char *buf, size_t len);

/* Writes what is left of a last line without a newline, and closes both logs. */
void logcap_end(struct logcap *lc);

/* Opens a log for logcap: append, create (0644), never through a link; -errno. */
int logcap_open(const char *path);

#endif
