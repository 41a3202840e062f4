/*
 * lockfile.c - asking whether a lock file is held, without holding it: a
 * shared lock tried and let go at once, so two processes asking at the same
 * moment never take each other for the holder (only the holder's exclusive
 * lock refuses them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "lockfile.h"

bool lockfile_held(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int err;

	if (fd < 0)
		return false;
	err = flock(fd, LOCK_SH | LOCK_NB) < 0 ? errno : 0;
	close(fd);
	return err == EWOULDBLOCK;
}

int lockfile_wait(const char *path, int seconds)
{
	for (int i = 0; i < seconds * 10; i++) {
		if (!lockfile_held(path))
			return 0;
		usleep(100 * 1000);
	}
	return lockfile_held(path) ? -ETIMEDOUT : 0;
}
