/* backoff.c - the wait before a retry (backoff.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "backoff.h"

const struct backoff BACKOFF_REQUEST = { .base_ms = 100, .cap_ms = 2000, .jitter = true };
const struct backoff BACKOFF_UPLOAD = { .base_ms = 1000, .cap_ms = 30000, .jitter = false };

long backoff_ms(const struct backoff *b, long attempt, unsigned int *seed)
{
	long cap = b->base_ms;

	for (long i = 0; i < attempt && cap < b->cap_ms; i++)
		cap *= 2;
	if (cap > b->cap_ms)
		cap = b->cap_ms;
	return b->jitter ? (long)(rand_r(seed) % (unsigned long)(cap + 1)) : cap;
}

void backoff_sleep(const struct backoff *b, long attempt)
{
	static _Thread_local unsigned int seed;

	if (seed == 0)
		seed = (unsigned int)time(NULL) ^ (unsigned int)(uintptr_t)&seed;
	backoff_sleep_ms(backoff_ms(b, attempt, &seed));
}

void backoff_sleep_ms(long ms)
{
	struct timespec ts;

	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
