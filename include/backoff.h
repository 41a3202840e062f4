/*
 * backoff.h - how long to wait before trying a failed call again.
 *
 * One rule, exponential with a cap: before retry @attempt (0, 1, ...) the
 * wait is at most base << attempt, never over cap; a jittered policy waits a
 * uniformly random time up to that ("full jitter"), so clients that failed
 * together do not come back together.  Two policies are named:
 *   BACKOFF_REQUEST  a request to a server (HTTP, S3, NFS, SMB calls): 100 ms
 *                    doubling to 2 s, jittered;
 *   BACKOFF_UPLOAD   a whole output upload tried again: 1, 2, 4, 8, 16, then
 *                    30 s, as its log line says.
 */
#ifndef MLFS_BACKOFF_H
#define MLFS_BACKOFF_H

#include <stdbool.h>

struct backoff {
	long base_ms;
	long cap_ms;
	bool jitter;
};

extern const struct backoff BACKOFF_REQUEST;
extern const struct backoff BACKOFF_UPLOAD;

/* The wait before retry @attempt, in ms; @seed (rand_r's) is used when jittered. */
long backoff_ms(const struct backoff *b, long attempt, unsigned int *seed);

/* Sleeps backoff_ms (a per-thread seed), the whole of it through signals. */
void backoff_sleep(const struct backoff *b, long attempt);
/* Sleeps @ms, the whole of it through signals (a wait backoff_ms gave, once said). */
void backoff_sleep_ms(long ms);

#endif
