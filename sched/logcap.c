/*
 * logcap.c - a worker's output into its logs, within log_size (logcap.h).
 *
 * The worker's log is written unchanged.  When it reaches the limit it is
 * renamed LOG.1 (dropping the one before) and a new LOG starts with a note,
 * so a worker's log never takes more than twice log_size on disk, and the
 * end of its output, where errors are, is always kept.  The job's log is
 * shared by every worker of the job, each appending whole lines: it is not
 * rotated (a rename would leave the other workers writing to the old file);
 * instead each worker adds at most log_size to it, then one line saying
 * where the rest is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logcap.h"

static void logcap_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;		/* a full disk drops output, never blocks the worker */
		buf += n;
		len -= (size_t)n;
	}
}

int logcap_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);

	return fd < 0 ? -errno : fd;
}

void logcap_init(struct logcap *lc, int log_fd, const char *log_path, int job_fd,
		 unsigned int worker, uint64_t max)
{
	struct stat st;

	lc->log_fd = log_fd;
	lc->job_fd = job_fd;
	lc->max = max;
	lc->log_size = log_fd >= 0 && fstat(log_fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	lc->job_added = 0;
	lc->line_len = 0;
	lc->prefix_len = (size_t)snprintf(lc->line, 32, "[%u] ", worker);
	snprintf(lc->log_path, sizeof(lc->log_path), "%s", log_path ? log_path : "");
	snprintf(lc->log_old, sizeof(lc->log_old), "%s.1", lc->log_path);
	snprintf(lc->rotated_note, sizeof(lc->rotated_note),
		 "mlfs: this log reached log_size (%llu bytes): the output before this line is in "
		 "log.1\n", (unsigned long long)max);
	snprintf(lc->capped_note, sizeof(lc->capped_note),
		 "[%u] mlfs: worker %u wrote log_size (%llu bytes) into this log: the rest of its "
		 "output is only in workers/%u/log\n", worker, worker, (unsigned long long)max, worker);
}

/* Adds the line held to the job's log, or the note once past the limit. */
static void logcap_job_line(struct logcap *lc)
{
	size_t len = lc->prefix_len + lc->line_len;

	lc->line[len++] = '\n';
	lc->line_len = 0;
	if (lc->job_fd < 0)
		return;
	if (lc->max && lc->job_added + len > lc->max) {
		logcap_write_all(lc->job_fd, lc->capped_note, strlen(lc->capped_note));
		close(lc->job_fd);
		lc->job_fd = -1;
		return;
	}
	logcap_write_all(lc->job_fd, lc->line, len);	/* one write: workers never interleave */
	lc->job_added += len;
}

static void logcap_job_text(struct logcap *lc, const char *buf, size_t len)
{
	while (len > 0 && lc->job_fd >= 0) {
		const char *nl = memchr(buf, '\n', len);
		size_t seg = nl ? (size_t)(nl - buf) : len;
		size_t room = LOGCAP_LINE_MAX - lc->line_len;

		if (seg > room) {
			seg = room;
			nl = NULL;
		}
		memcpy(lc->line + lc->prefix_len + lc->line_len, buf, seg);
		lc->line_len += seg;
		buf += seg;
		len -= seg;
		if (nl) {
			buf++;
			len--;
			logcap_job_line(lc);
		} else if (lc->line_len == LOGCAP_LINE_MAX && len > 0) {
			logcap_job_line(lc);
		}
	}
}

/*
 * LOG becomes LOG.1 and a new LOG starts with a note.  Where no new log can
 * be made, output from here on is dropped rather than overfilling the old.
 */
static void logcap_rotate(struct logcap *lc)
{
	close(lc->log_fd);
	lc->log_fd = -1;
	if (rename(lc->log_path, lc->log_old) < 0)
		return;
	lc->log_fd = open(lc->log_path, O_WRONLY | O_APPEND | O_CREAT | O_TRUNC | O_NOFOLLOW |
			  O_CLOEXEC, 0644);
	if (lc->log_fd < 0)
		return;
	lc->log_size = strlen(lc->rotated_note);
	logcap_write_all(lc->log_fd, lc->rotated_note, (size_t)lc->log_size);
}

static void logcap_log_text(struct logcap *lc, const char *buf, size_t len)
{
	while (len > 0 && lc->log_fd >= 0) {
		size_t n = len;

		if (lc->max && lc->log_size >= lc->max) {
			logcap_rotate(lc);
			continue;
		}
		if (lc->max && n > lc->max - lc->log_size)
			n = (size_t)(lc->max - lc->log_size);
		logcap_write_all(lc->log_fd, buf, n);
		lc->log_size += n;
		buf += n;
		len -= n;
	}
}

void logcap_write(struct logcap *lc, const char *buf, size_t len)
{
	logcap_log_text(lc, buf, len);
	logcap_job_text(lc, buf, len);
}

void logcap_end(struct logcap *lc)
{
	if (lc->job_fd >= 0 && lc->line_len > 0)
		logcap_job_line(lc);
	if (lc->job_fd >= 0)
		close(lc->job_fd);
	if (lc->log_fd >= 0)
		close(lc->log_fd);
	lc->job_fd = lc->log_fd = -1;
}
