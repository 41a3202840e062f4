/*
 * cmd_umount.c - `mlfs umount`: unmount a gateway.
 *
 * As root the mount is detached with umount2(); a user goes through
 * fusermount3, which checks that the user mounted it.  There is no pending
 * output yet to sync first (that comes with job output); a busy mount is
 * refused, never detached lazily, so nothing is cut off mid-write.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"

static int umount_as_user(const char *mp)
{
	pid_t pid = fork();
	int status;

	if (pid < 0) {
		perror("mlfs umount: fork");
		return 1;
	}
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "--", mp, (char *)NULL);
		perror("mlfs umount: fusermount3");
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return 1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

#define UMOUNT_FUSE_MAGIC 0x65735546

/* Refuses to unmount what is not a FUSE mount; a dead one (ENOTCONN) is fine. */
static int umount_check_fuse(const char *mp)
{
	struct statfs sf;

	if (statfs(mp, &sf) < 0) {
		if (errno == ENOTCONN)
			return 0;
		fprintf(stderr, "mlfs umount: %s: %s\n", mp, strerror(errno));
		return -1;
	}
	if (sf.f_type != UMOUNT_FUSE_MAGIC) {
		fprintf(stderr, "mlfs umount: %s: not an mlfs mount\n", mp);
		return -1;
	}
	return 0;
}

int cmd_umount(int argc, char **argv)
{
	const char *mp;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: mlfs umount MOUNTPOINT\n");
		return 2;
	}
	mp = argv[1];
	if (umount_check_fuse(mp) < 0)
		return 1;
	if (geteuid() != 0)
		return umount_as_user(mp);
	if (umount2(mp, UMOUNT_NOFOLLOW) == 0)
		return 0;
	if (errno == EBUSY)
		fprintf(stderr, "mlfs umount: %s: busy (a process has a file open or its "
			"working folder there)\n", mp);
	else if (errno == EINVAL)
		fprintf(stderr, "mlfs umount: %s: not a mount point\n", mp);
	else
		fprintf(stderr, "mlfs umount: %s: %s\n", mp, strerror(errno));
	return 1;
}
