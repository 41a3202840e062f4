/*
 * cmd_image.c - `mlfs image pull CONFIG IMAGE [--progress FILE]`: puts a
 * worker's image on the node, once.
 *
 * The local executor runs it in STAGING_IN, before a worker's view, as
 * root; its output is the worker's log.  Every job that needs the same
 * image at once waits on one lock (STATE_DIR/containers/pull-HASH.lock):
 * the first pulls, the others find the image there when they get the
 * lock, so the registry serves each blob once.  A daemon killed meanwhile
 * does not matter: the pull belongs to the worker's shepherd, which
 * outlives it; a pull killed itself leaves podman's own storage to finish
 * or redo it at the next pull (podman never shows a half-pulled image).
 *
 * Plain-HTTP registries work through mlfs's own registries.conf
 * (container.c), named in CONTAINERS_REGISTRIES_CONF.  --auth-file is the
 * worker's credentials (container_auth.c: the spec's, its owner's, the
 * node's), else [containers] auth_file, else mlfs's empty one: podman is
 * always given one, so it never reads root's ~/.docker/config.json.  The
 * worker's file is removed once the pull is over.  A missing image, a refusing or absent
 * registry: exit 1 with podman's last words, which are the registry's,
 * after podman's own few tries; never a retry loop here.
 *
 * After each pull or find, the images mlfs pulled are trimmed to [containers]
 * cache_size, least recently used first, never one a container uses
 * (container_cache.c).
 *
 * Exit status: 0 once the image is on the node; 1 when it cannot be had;
 * 2 for a bad command line or config.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "config.h"
#include "container.h"
#include "spawn.h"

#define IMAGE_PULL_TIMEOUT_MS	(3600 * 1000)	/* an hour: a pull of many GB on a slow link */
#define IMAGE_CHECK_TIMEOUT_MS	(60 * 1000)

struct image_pull {
	const char *image;
	const char *auth_file;		/* NULL: the node's ([containers] auth_file or mlfs's empty one) */
	const char *progress;		/* NULL: none */
	char last[512];			/* podman's last line that says something */
};

/* Writes @text to the progress file, atomically, for the scheduler's reason. */
static void image_progress(const struct image_pull *ip, const char *text)
{
	char tmp[4200];
	FILE *f;

	if (!ip->progress)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", ip->progress);
	f = fopen(tmp, "we");
	if (!f)
		return;
	fprintf(f, "%s\n", text);
	if (fclose(f) == 0)
		rename(tmp, ip->progress);
}

static void image_on_line(void *arg, const char *line)
{
	struct image_pull *ip = arg;

	printf("%s\n", line);
	fflush(stdout);
	if (!*line)
		return;
	snprintf(ip->last, sizeof(ip->last), "%s", line);
	image_progress(ip, line);
}

/* 1 when @image is in podman's storage, 0 when not, -1 when podman cannot tell. */
static int image_exists(const struct container_runtime *rt, const char *image)
{
	char *argv[] = { (char *)rt->podman, "image", "exists", (char *)image, NULL };
	struct spawn sp = { .argv = argv, .timeout_ms = IMAGE_CHECK_TIMEOUT_MS, .out_max = 4096,
			    .out_fd = -1 };
	struct spawn_out res;
	int ret = spawn_run(&sp, &res);
	int st = res.status;

	spawn_out_free(&res);
	if (ret < 0 || st < 0 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st) == 0 ? 1 : WEXITSTATUS(st) == 1 ? 0 : -1;
}

static int image_do_pull(const struct container_runtime *rt, struct image_pull *ip)
{
	char *argv[8];
	size_t n = 0;
	struct spawn sp = { .argv = argv, .timeout_ms = IMAGE_PULL_TIMEOUT_MS, .out_max = 64 << 10,
			    .out_fd = -1, .on_err_line = image_on_line, .arg = ip };
	struct spawn_out res;
	int ret, st;

	argv[n++] = (char *)rt->podman;
	argv[n++] = "pull";
	if (ip->auth_file || rt->auth_file) {
		argv[n++] = "--authfile";
		argv[n++] = (char *)(ip->auth_file ? ip->auth_file : rt->auth_file);
	}
	argv[n++] = (char *)ip->image;
	argv[n] = NULL;
	ret = spawn_run(&sp, &res);
	st = res.status;
	if (res.timed_out)
		snprintf(ip->last, sizeof(ip->last), "podman pull took more than %d s; stopped",
			 IMAGE_PULL_TIMEOUT_MS / 1000);
	else if (ret < 0)
		snprintf(ip->last, sizeof(ip->last), "cannot run %s: %s", rt->podman, strerror(-ret));
	spawn_out_free(&res);
	return ret == 0 && st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Takes the image's pull lock, saying so when another pull holds it. */
static int image_lock(const struct mlfs_config *cfg, const char *image)
{
	char dir[4096], path[4200], hash[17];
	int fd;

	snprintf(dir, sizeof(dir), "%s/containers", cfg->state_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	container_name_hash(image, hash);
	snprintf(path, sizeof(path), "%s/pull-%s.lock", dir, hash);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return fd;
	printf("mlfs: waiting for the pull of %s another job started\n", image);
	fflush(stdout);
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR) {
			int err = -errno;

			close(fd);
			return err;
		}
	return fd;
}

static int image_pull(const struct mlfs_config *cfg, struct image_pull *ip)
{
	struct container_runtime rt;
	int lock, have;

	container_runtime_detect(&rt, cfg, false);
	if (!rt.usable) {
		printf("mlfs: cannot pull %s: %s\n", ip->image, rt.why);
		return 1;
	}
	if (rt.registries_conf[0])
		setenv("CONTAINERS_REGISTRIES_CONF", rt.registries_conf, 1);
	lock = image_lock(cfg, ip->image);
	if (lock < 0) {
		printf("mlfs: cannot take the pull lock of %s: %s\n", ip->image, strerror(-lock));
		return 1;
	}
	have = image_exists(&rt, ip->image);
	if (have == 1) {
		printf("mlfs: image %s is on the node\n", ip->image);
		image_progress(ip, "on the node");
		container_cache_touch(cfg, ip->image);
		close(lock);
		container_cache_trim(&rt, cfg, ip->image, stdout);
		return 0;
	}
	printf("mlfs: pulling %s\n", ip->image);
	fflush(stdout);
	image_progress(ip, "pulling");
	if (image_do_pull(&rt, ip) < 0) {
		printf("mlfs: cannot pull %s: %s\n", ip->image, ip->last[0] ? ip->last : "podman failed");
		close(lock);
		return 1;
	}
	printf("mlfs: pulled %s\n", ip->image);
	image_progress(ip, "pulled");
	container_cache_touch(cfg, ip->image);
	close(lock);
	container_cache_trim(&rt, cfg, ip->image, stdout);
	return 0;
}

static const char image_usage[] =
	"usage: mlfs image pull CONFIG IMAGE [--progress FILE] [--auth-file FILE]\n";

int cmd_image(int argc, char **argv)
{
	struct image_pull ip = { 0 };
	struct mlfs_config *cfg;
	int ret;

	if (argc < 4 || strcmp(argv[1], "pull") != 0) {
		fputs(image_usage, stderr);
		return 2;
	}
	ip.image = argv[3];
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--progress") == 0 && i + 1 < argc) {
			ip.progress = argv[++i];
		} else if (strcmp(argv[i], "--auth-file") == 0 && i + 1 < argc) {
			ip.auth_file = argv[++i];
		} else {
			fprintf(stderr, "mlfs image: unknown argument '%s'\n%s", argv[i], image_usage);
			return 2;
		}
	}
	if (cmd_load_config(&cfg, argv[2]) < 0)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	ret = image_pull(cfg, &ip);
	if (ip.auth_file)
		unlink(ip.auth_file);	/* the worker's credentials: not kept past their use */
	config_free(cfg);
	return ret;
}
