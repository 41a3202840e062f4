/*
 * lockfile.h - whether another process holds a flock(2) lock file: a mount's
 * output (live.lock) or a gateway's state_dir (gateway.lock), each held open
 * for its holder's life and let go when it ends, however it ends.
 */
#ifndef MLFS_LOCKFILE_H
#define MLFS_LOCKFILE_H

#include <stdbool.h>

/* true while a process holds the lock of file @path (false: none, or no such file). */
bool lockfile_held(const char *path);

/* Waits (at most @seconds) until no process holds @path. 0 or -ETIMEDOUT. */
int lockfile_wait(const char *path, int seconds);

#endif
