/*
 * log.h - the daemon's log: stderr in the foreground, syslog once daemonized.
 *
 * Log an error once, where the context is richest.  Secrets never reach a
 * log line: callers pass names and paths, never credentials.
 */
#ifndef MLFS_LOG_H
#define MLFS_LOG_H

enum mlfs_log_level {
	MLFS_LOG_ERR,
	MLFS_LOG_WARN,
	MLFS_LOG_INFO,
	MLFS_LOG_DEBUG,
};

void log_init(const char *ident, int level);
void log_to_syslog(void);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...)	log_msg(MLFS_LOG_ERR, __VA_ARGS__)
#define log_warn(...)	log_msg(MLFS_LOG_WARN, __VA_ARGS__)
#define log_info(...)	log_msg(MLFS_LOG_INFO, __VA_ARGS__)
#define log_debug(...)	log_msg(MLFS_LOG_DEBUG, __VA_ARGS__)

#endif
