/*
 * cmd_logpipe.c - `mlfs logpipe [--max BYTES] LOG JOBLOG WORKER`: copies its
 * standard input into a worker's log and, a line at a time with "[WORKER] ",
 * into its job's log, within log_size (logcap.h), until end of input.  The
 * Slurm batch script pipes each worker's output through it, so a cluster
 * worker's logs are rotated and capped as a local one's are.
 *
 * It never stops before its input ends: a worker whose log reader went away
 * would die of SIGPIPE.  So a log it cannot open is reported once and the
 * output dropped, and the signals that stop a worker (TERM, INT, HUP, USR2)
 * are ignored: it ends with the worker's last words.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "logcap.h"

static const char logpipe_usage[] =
	"usage: mlfs logpipe [--max BYTES] LOG JOBLOG WORKER   (reads standard input)\n";

static int logpipe_open(const char *path)
{
	int fd = logcap_open(path);

	if (fd < 0)
		fprintf(stderr, "mlfs logpipe: %s: %s: its output is dropped\n", path, strerror(-fd));
	return fd < 0 ? -1 : fd;
}

int cmd_logpipe(int argc, char **argv)
{
	static struct logcap lc;	/* 64 KiB of line buffer: not on the stack */
	static char buf[64 * 1024];
	unsigned long long max = 0;
	unsigned long worker;
	char *end;
	int i = 1;
	ssize_t n;

	if (argc > 2 && strcmp(argv[1], "--max") == 0) {
		errno = 0;
		max = strtoull(argv[2], &end, 10);
		if (errno || *end || !argv[2][0]) {
			fprintf(stderr, "mlfs logpipe: --max '%s' is not a number of bytes\n%s",
				argv[2], logpipe_usage);
			return 2;
		}
		i = 3;
	}
	if (argc - i != 3) {
		fputs(logpipe_usage, stderr);
		return 2;
	}
	worker = strtoul(argv[i + 2], &end, 10);
	if (*end || !argv[i + 2][0] || worker == 0 || worker > 1000000) {
		fprintf(stderr, "mlfs logpipe: WORKER '%s' is not a worker number\n%s", argv[i + 2],
			logpipe_usage);
		return 2;
	}
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGUSR2, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	logcap_init(&lc, logpipe_open(argv[i]), argv[i], logpipe_open(argv[i + 1]),
		    (unsigned int)worker, max);
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "mlfs logpipe: reading: %s\n", strerror(errno));
			break;
		}
		logcap_write(&lc, buf, (size_t)n);
	}
	logcap_end(&lc);
	return 0;
}
