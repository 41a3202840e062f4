/*
 * cmd_umount.c - `mlfs umount`: unmount a gateway or a worker's view, then
 * upload what it staged.
 *
 * Before unmounting, .mlfs/mount of the mount says what it is: a worker's
 * view names its output folder and config, a gateway its config.  As root
 * the mount is detached with umount2(); a user goes through fusermount3,
 * which checks that the user mounted it.  A busy mount is refused, never
 * detached lazily, so nothing is cut off mid-write.  Once the view's
 * process has let go of the output (its live.lock), the output is
 * uploaded with progress on stderr: unmounting first means the worker can
 * no longer change what is being sent.  The exit status is 0 only when the
 * output is safe at its destination; otherwise it stays staged for
 * `mlfs sync`.  A gateway's daemon goes on a moment after its unmount;
 * `mlfs umount` returns once it has ended, so the same config mounts again
 * at once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"
#include "config.h"
#include "lockfile.h"
#include "log.h"
#include "output.h"
#include "spawn.h"
#include "spec.h"

/* fusermount3 -u, which checks that this user mounted it; its words shown as its own. */
static int umount_as_user(const char *mp)
{
	struct spawn_out res;
	int ret;

	ret = spawn_run(&(struct spawn){ .argv = (char *const[]){ "fusermount3", "-u", "--",
								    (char *)mp, NULL },
					 .out_max = 64 * 1024, .out_fd = -1 }, &res);
	if (ret < 0) {
		fprintf(stderr, "mlfs umount: fusermount3: %s\n", strerror(-ret));
	} else {
		fwrite(res.out, 1, res.out_len, stdout);
		fflush(stdout);
		fwrite(res.err, 1, res.err_len, stderr);
	}
	spawn_out_free(&res);
	return ret == 0 && WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0 ? 0 : 1;
}

#define UMOUNT_FUSE_MAGIC 0x65735546
#define UMOUNT_WAIT_S	60	/* for a view's or a gateway's process to end */

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

/* The value of @key in the .mlfs/mount text @info, malloc'd, or NULL. */
static char *umount_info_get(const char *info, const char *key)
{
	size_t klen = strlen(key);

	for (const char *l = info; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (strncmp(l, key, klen) == 0 && l[klen] == '=')
			return strndup(l + klen + 1, strcspn(l + klen + 1, "\n"));
	return NULL;
}

/* Reads MP/.mlfs/mount; NULL when it has none (an older or dead mount). */
static char *umount_read_info(const char *mp)
{
	char *path, *text = NULL;
	size_t len = 0;
	FILE *f;

	if (asprintf(&path, "%s/.mlfs/mount", mp) < 0)
		return NULL;
	f = fopen(path, "re");
	free(path);
	if (!f)
		return NULL;
	text = calloc(1, 8192);
	if (text)
		len = fread(text, 1, 8191, f);
	fclose(f);
	if (text)
		text[len] = '\0';
	return text;
}

/* After the view is gone: its output to its destination.  The exit status. */
static int umount_upload_view(const char *info)
{
	char *dir = umount_info_get(info, "output_dir");
	char *config = umount_info_get(info, "config");
	struct mlfs_config *cfg = NULL;
	struct output *o = NULL;
	char err[512] = "";
	int ret = -ENOMEM;

	if (!dir || !config)
		goto out;
	if (output_wait_unmounted(dir, UMOUNT_WAIT_S) < 0) {
		fprintf(stderr, "mlfs umount: the view's process still holds %s after %d s; "
			"run 'mlfs sync %s' once it has ended\n", dir, UMOUNT_WAIT_S, config);
		ret = -ETIMEDOUT;
		goto out;
	}
	if (cmd_load_config(&cfg, config) < 0) {
		ret = -EINVAL;
		goto out;
	}
	ret = output_open(&o, dir);
	if (ret < 0) {
		fprintf(stderr, "mlfs umount: %s: %s\n", dir, strerror(-ret));
		goto out;
	}
	ret = output_upload(o, cfg, cmd_progress, NULL, err, sizeof(err));
	if (ret == 0 && o->kind && o->kind->kept)
		fprintf(stderr, "mlfs umount: job %s worker %u names no output destination; "
			"its output is kept in %s/files\n", o->job, o->worker, dir);
	if (ret < 0)
		fprintf(stderr, "mlfs umount: output of job %s worker %u not uploaded to %s: %s\n"
			"mlfs umount: staged output kept in %s; 'mlfs sync %s' uploads it\n",
			o->job, o->worker, o->path, err, dir, config);
out:
	if (ret == -ENOMEM)
		fprintf(stderr, "mlfs umount: %s\n", strerror(ENOMEM));
	output_free(o);
	config_free(cfg);
	free(dir);
	free(config);
	return ret < 0 ? 1 : 0;
}

/*
 * Waits for the gateway's daemon to end: it goes on after the unmount
 * (the prefetch threads joined, the cache's writes synced, the backends
 * closed) and holds state_dir/gateway.lock until it has.  So a mount of the
 * same config right after `mlfs umount` is not refused as a second gateway,
 * and finds every cache object the daemon finished.  0, or 1 after saying why.
 */
static int umount_wait_gateway(const struct mlfs_config *cfg, const char *config)
{
	char *lock;
	int ret;

	if (asprintf(&lock, "%s/gateway.lock", cfg->state_dir) < 0)
		return 1;
	ret = lockfile_wait(lock, 1);
	if (ret == -ETIMEDOUT) {
		fprintf(stderr, "mlfs umount: waiting for the daemon to finish with %s\n",
			cfg->state_dir);
		ret = lockfile_wait(lock, UMOUNT_WAIT_S);
	}
	if (ret == -ETIMEDOUT)
		fprintf(stderr, "mlfs umount: the daemon still holds %s after %d s; run 'mlfs sync "
			"%s' once it has ended\n", lock, UMOUNT_WAIT_S + 1, config);
	free(lock);
	return ret < 0;
}

/* After a gateway is gone: every output staged under its state_dir. */
static int umount_sync_gateway(const char *info)
{
	char *config = umount_info_get(info, "config");
	struct mlfs_config *cfg = NULL;
	int failed = 1;

	if (config && cmd_load_config(&cfg, config) == 0 && umount_wait_gateway(cfg, config) == 0) {
		failed = output_sync_all(cfg, cmd_progress, NULL, NULL);
		if (failed)
			fprintf(stderr, "mlfs umount: %d output(s) not uploaded; kept in %s/outputs; "
				"'mlfs sync %s' uploads them\n", failed, cfg->state_dir, config);
	}
	config_free(cfg);
	free(config);
	return failed ? 1 : 0;
}

/* Unmounts @mp: 0, or 1 after saying why. */
static int umount_detach(const char *mp)
{
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

int cmd_umount(int argc, char **argv)
{
	const char *mp;
	char *info, *kind;
	int status;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: mlfs umount MOUNTPOINT\n");
		return 2;
	}
	mp = argv[1];
	if (umount_check_fuse(mp) < 0)
		return 1;
	log_init("mlfs", MLFS_LOG_INFO);
	info = umount_read_info(mp);
	status = umount_detach(mp);
	kind = info ? umount_info_get(info, "kind") : NULL;
	if (status == 0 && kind && strcmp(kind, "job") == 0)
		status = umount_upload_view(info);
	else if (status == 0 && kind && strcmp(kind, "gateway") == 0)
		status = umount_sync_gateway(info);
	free(kind);
	free(info);
	return status;
}
