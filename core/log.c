/*
 * log.c - one log for the daemon and the commands.
 *
 * Messages go to stderr until the daemon detaches, then to syslog.  The
 * level is set once at start-up (-d raises it to debug).  Thread-safe: each
 * message is formatted into one buffer and written with one call.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "log.h"

static const char *log_ident = "mlfs";
static int log_level = MLFS_LOG_INFO;
static int log_syslog;

void log_init(const char *ident, int level)
{
	log_ident = ident;
	log_level = level;
}

void log_to_syslog(void)
{
	openlog(log_ident, LOG_PID, LOG_DAEMON);
	log_syslog = 1;
}

static int log_priority(int level)
{
	static const int prio[] = {
		[MLFS_LOG_ERR] = LOG_ERR,
		[MLFS_LOG_WARN] = LOG_WARNING,
		[MLFS_LOG_INFO] = LOG_INFO,
		[MLFS_LOG_DEBUG] = LOG_DEBUG,
	};

	return prio[level];
}

void log_msg(int level, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (log_syslog)
		syslog(log_priority(level), "%s", buf);
	else
		fprintf(stderr, "%s: %s\n", log_ident, buf);
}
