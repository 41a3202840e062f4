/*
 * mono.h - the one monotonic clock: nanoseconds since an arbitrary start,
 * for intervals and deadlines within one process (never for what is
 * written down or compared across processes: that is CLOCK_REALTIME).
 * Every interval and deadline in mlfs is read from here.
 */
#ifndef MLFS_MONO_H
#define MLFS_MONO_H

#include <stdint.h>
#include <time.h>

static inline int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* @ns of mono_ns as a deadline for a condition variable on CLOCK_MONOTONIC. */
static inline struct timespec mono_timespec(int64_t ns)
{
	return (struct timespec){ .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
}

#endif
