/*
 * mono.h - the one monotonic clock: nanoseconds since an arbitrary start,
 * for intervals and deadlines within one process (never for what is
 * written down or compared across processes: that is CLOCK_REALTIME).
 * Every interval and deadline in mlfs is read from here.
 */
#ifndef MLFS_MONO_H
#define MLFS_MONO_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * @ns as a struct timespec: a mono_ns deadline for a condition variable made
 * by mono_cond_init, or a duration (nanosleep).
 */
static inline struct timespec mono_timespec(int64_t ns)
{
	return (struct timespec){ .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
}

/* A condition variable whose timed waits take mono_timespec deadlines. */
static inline void mono_cond_init(pthread_cond_t *cond)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
}

#endif
