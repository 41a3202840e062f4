/*
 * cmd_image.c - `mlfs image pull CONFIG IMAGE [--progress FILE]`: puts a
 * worker's image on the node, once.  With `--packages FILE --as TARGET`
 * (proxiML's environment.packages) it puts TARGET there: IMAGE with the
 * packages installed, made once (cmd_image_env.c) under TARGET's own lock
 * and kept for the next job with the same packages.
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
 * After each pull, the images mlfs pulled are trimmed to [containers]
 * cache_size, least recently used first, never one a container uses
 * (container_cache.c).
 *
 * The Slurm executor's batch script runs it on the compute node as the
 * job's owner.  Run by an ordinary user, it pulls rootless, into that
 * user's own storage (~/.local/share/containers): its locks and its
 * registries.conf are then in a folder of the user's
 * ($XDG_RUNTIME_DIR/mlfs, else /tmp/mlfs-UID), not in the state_dir,
 * which is root's; without --auth-file, [containers] auth_file is used
 * when the user may read it, else podman reads the user's own
 * credentials; cache_size is about the node's storage, not a user's.
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
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "config.h"
#include "container.h"
#include "spawn.h"
#include "mono.h"

#define IMAGE_PULL_TIMEOUT_MS	(3600 * 1000)	/* an hour: a pull of many GB on a slow link */
#define IMAGE_CHECK_TIMEOUT_MS	(60 * 1000)

#define IMAGE_BLOBS_MAX		64	/* layers whose progress is followed */
#define IMAGE_PROGRESS_NS	500000000LL	/* the progress file at most this often */

/* One blob podman is copying, as its progress bar says. */
struct image_blob {
	char id[72];
	double done, total;		/* bytes */
	bool finished;			/* its "done" or "skipped" line is in the log */
};

struct image_pull {
	const char *image;
	const char *auth_file;		/* NULL: the node's ([containers] auth_file or mlfs's empty one) */
	const char *progress;		/* NULL: none */
	const char *packages, *target;	/* --packages FILE --as TARGET; NULL: none */
	char last[512];			/* podman's last line that says something */
	struct image_blob blobs[IMAGE_BLOBS_MAX];
	size_t n_blobs;
	long long progress_ns;		/* when the progress file was last written */
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

/* "21.1MiB" (go-units' sizes, as podman's bars print them) in bytes; < 0 when not one. */
static double image_size(const char *s)
{
	static const struct { const char *unit; double mult; } units[] = {
		{ "GiB", 1073741824.0 }, { "MiB", 1048576.0 }, { "KiB", 1024.0 }, { "b", 1.0 },
		{ "B", 1.0 }, { "GB", 1e9 }, { "MB", 1e6 }, { "kB", 1e3 },
	};
	char *end;
	double v = strtod(s, &end);

	if (end == s)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strncmp(end, units[i].unit, strlen(units[i].unit)) == 0)
			return v * units[i].mult;
	return -1;
}

static struct image_blob *image_blob(struct image_pull *ip, const char *id, size_t len)
{
	for (size_t i = 0; i < ip->n_blobs; i++)
		if (strlen(ip->blobs[i].id) == len && memcmp(ip->blobs[i].id, id, len) == 0)
			return &ip->blobs[i];
	if (ip->n_blobs == IMAGE_BLOBS_MAX || len >= sizeof(ip->blobs[0].id))
		return NULL;
	memcpy(ip->blobs[ip->n_blobs].id, id, len);
	ip->blobs[ip->n_blobs].id[len] = '\0';
	return &ip->blobs[ip->n_blobs++];
}

/* "1.2 of 3.4 GB" into the progress file, at most every IMAGE_PROGRESS_NS. */
static void image_bytes(struct image_pull *ip, bool now)
{
	double done = 0, total = 0;
	long long t = mono_ns();
	char text[96];

	if (!now && t - ip->progress_ns < IMAGE_PROGRESS_NS)
		return;
	ip->progress_ns = t;
	for (size_t i = 0; i < ip->n_blobs; i++) {
		done += ip->blobs[i].done;
		total += ip->blobs[i].total;
	}
	if (total >= 1e9)
		snprintf(text, sizeof(text), "%.1f of %.1f GB", done / 1e9, total / 1e9);
	else
		snprintf(text, sizeof(text), "%.1f of %.1f MB", done / 1e6, total / 1e6);
	image_progress(ip, text);
}

/*
 * One line podman wrote to its terminal, escapes taken out.  A progress
 * bar ("Copying blob 249af98ff060 [==>---] 21.1MiB / 300.0MiB", redrawn
 * several times a second; "Copying config" likewise) updates the blob's
 * bytes; "... done" or "... skipped: already exists" completes it, once in
 * the log; every other line is podman's words, for the log.
 */
static void image_tty_line(struct image_pull *ip, const char *line)
{
	const char *id, *sp, *bar, *slash;
	struct image_blob *b;

	while (*line == ' ')
		line++;
	if (!*line)
		return;
	if (strncmp(line, "Copying blob ", 13) == 0)
		id = line + 13;
	else if (strncmp(line, "Copying config ", 15) == 0)
		id = line + 15;
	else
		id = NULL;
	if (!id || !(sp = strchr(id, ' ')) || strncmp(id, "sha256:", 7) == 0) {
		image_on_line(ip, line);	/* not a bar: podman's own words */
		return;
	}
	b = image_blob(ip, id, (size_t)(sp - id));
	if (!b)
		return;
	if (strncmp(sp, " done", 5) == 0 || strncmp(sp, " skipped", 8) == 0) {
		if (!b->finished) {
			b->finished = true;
			b->done = b->total;
			printf("%s\n", line);
			image_bytes(ip, true);
		}
		return;
	}
	bar = strchr(sp, ']');
	slash = bar ? strstr(bar, " / ") : NULL;
	if (slash && image_size(bar + 1 + strspn(bar + 1, " ")) >= 0 && image_size(slash + 3) > 0) {
		b->done = image_size(bar + 1 + strspn(bar + 1, " "));
		b->total = image_size(slash + 3);
		image_bytes(ip, false);
	}
}

/* Splits what came from the terminal into lines, dropping escape sequences. */
static void image_tty_feed(struct image_pull *ip, char *line, size_t *len, const char *buf,
			   size_t n, size_t max)
{
	for (size_t i = 0; i < n; i++) {
		char c = buf[i];

		if (c == '\033') {	/* CSI: ESC [ params final */
			size_t k = i + 1;

			if (k < n && buf[k] == '[')
				for (k++; k < n && !(buf[k] >= 0x40 && buf[k] <= 0x7e); k++)
					;
			i = k < n ? k : n - 1;
			continue;
		}
		if (c == '\n' || c == '\r') {
			line[*len] = '\0';
			image_tty_line(ip, line);
			*len = 0;
		} else if (*len + 1 < max && (unsigned char)c >= ' ') {
			line[(*len)++] = c;
		}
	}
}

/*
 * Runs @argv on a pseudo-terminal 200 columns wide: podman prints its
 * progress bars only to a terminal.  Returns the wait status, -1 when it
 * could not run; past IMAGE_PULL_TIMEOUT_MS its group is killed.
 */
static int image_tty_run(char *const *argv, struct image_pull *ip, bool *timed_out)
{
	struct winsize ws = { .ws_row = 50, .ws_col = 200 };
	char buf[4096], line[1024];
	size_t len = 0;
	long long deadline;
	int master, status = -1;
	pid_t pid = forkpty(&master, NULL, NULL, &ws);

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execvp(argv[0], argv);
		_exit(127);
	}
	deadline = mono_ns() / 1000000 + IMAGE_PULL_TIMEOUT_MS;
	for (;;) {
		struct pollfd pfd = { .fd = master, .events = POLLIN };
		ssize_t n;

		if (mono_ns() / 1000000 > deadline) {
			*timed_out = true;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			break;
		}
		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		n = read(master, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;		/* EIO: the child and its terminal are gone */
		image_tty_feed(ip, line, &len, buf, (size_t)n, sizeof(line));
	}
	if (len) {
		line[len] = '\0';
		image_tty_line(ip, line);
	}
	close(master);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

/* "pulled (2.1 MB)": the log's line and the progress file's last words. */
static void image_pulled(struct image_pull *ip)
{
	double total = 0;
	char text[64];

	for (size_t i = 0; i < ip->n_blobs; i++)
		total += ip->blobs[i].total;
	if (total >= 1e9)
		snprintf(text, sizeof(text), "pulled (%.1f GB)", total / 1e9);
	else
		snprintf(text, sizeof(text), "pulled (%.1f MB)", total / 1e6);
	printf("mlfs: %s %s\n", text, ip->image);
	image_progress(ip, text);
}

static int image_do_pull(const struct container_runtime *rt, struct image_pull *ip)
{
	char *argv[8];
	size_t n = 0;
	bool timed_out = false;
	int st;

	argv[n++] = (char *)rt->podman;
	argv[n++] = "pull";
	if (ip->auth_file || rt->auth_file) {
		argv[n++] = "--authfile";
		argv[n++] = (char *)(ip->auth_file ? ip->auth_file : rt->auth_file);
	}
	argv[n++] = (char *)ip->image;
	argv[n] = NULL;
	fflush(stdout);
	st = image_tty_run(argv, ip, &timed_out);
	if (timed_out)
		snprintf(ip->last, sizeof(ip->last), "podman pull took more than %d s; stopped",
			 IMAGE_PULL_TIMEOUT_MS / 1000);
	else if (st == -1)
		snprintf(ip->last, sizeof(ip->last), "cannot run %s: %s", rt->podman, strerror(errno));
	if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		image_bytes(ip, true);
		return 0;
	}
	return -1;
}

/* Takes the lock of @image in @dir, saying so when another pull holds it. */
/*
 * Takes the lock of @image's pull (or making) in @dir: its fd, or a negated
 * errno.  A job that had to wait gets in *@waited_ns when it began (else 0),
 * so that image_lock_made() can tell it the one it waited for made the image.
 */
static long long image_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);	/* shared by the waiters' processes, across boots */
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int image_lock(const char *dir, const char *image, long long *waited_ns)
{
	char path[4200], hash[17];
	int fd;

	*waited_ns = 0;
	container_name_hash(image, hash);
	snprintf(path, sizeof(path), "%s/pull-%s.lock", dir, hash);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return fd;
	*waited_ns = image_now_ns();
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

/* Under the lock @fd: the image is made now (pulled, or its packages installed). */
static void image_lock_note_made(int fd)
{
	char text[32];
	int n = snprintf(text, sizeof(text), "made %lld\n", image_now_ns());

	if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)n, 0) != n)
		return;		/* the next waiter asks podman instead */
}

/*
 * Whether the job that held the lock while this one waited (since
 * @waited_ns) made the image: then the waiter need not ask podman
 * (`podman image exists`, 30 ms each, one waiter after the other).
 */
static bool image_lock_made(int fd, long long waited_ns)
{
	char text[32] = "";
	long long made;
	ssize_t n;

	if (!waited_ns || (n = pread(fd, text, sizeof(text) - 1, 0)) <= 0)
		return false;
	text[n] = '\0';
	return sscanf(text, "made %lld", &made) == 1 && made >= waited_ns;
}

/*
 * An ordinary user's folder for its pulls' locks and registries.conf:
 * $XDG_RUNTIME_DIR/mlfs, else /tmp/mlfs-UID; made here, or found the
 * user's own and closed to others (never one planted by someone else).
 */
static int image_user_dir(char *dir, size_t len)
{
	const char *run = getenv("XDG_RUNTIME_DIR");
	struct stat st;

	if (run && *run == '/')
		snprintf(dir, len, "%s/mlfs", run);
	else
		snprintf(dir, len, "/tmp/mlfs-%u", (unsigned int)geteuid());
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (lstat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
		return -EPERM;
	return 0;
}

/*
 * The runtime a pull uses, and the folder of its locks (@dir): root's, the
 * daemon's, in STATE_DIR/containers; an ordinary user's (a Slurm batch
 * script runs as the job's owner) rootless, in image_user_dir.  Unusable:
 * rt->why says why.
 */
static void image_runtime(const struct mlfs_config *cfg, struct container_runtime *rt, char *dir,
			  size_t len)
{
	int ret;

	if (geteuid() != 0) {
		ret = image_user_dir(dir, len);
		if (ret < 0) {
			memset(rt, 0, sizeof(*rt));
			snprintf(rt->why, sizeof(rt->why), "%.180s: %s", dir, ret == -EPERM ?
				 "not a folder of this user's alone" : strerror(-ret));
			return;
		}
		container_runtime_detect_rootless(rt, cfg, dir);
		return;
	}
	container_runtime_detect(rt, cfg, false);
	snprintf(dir, len, "%s/containers", cfg->state_dir);
	if (rt->usable && mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(rt->why, sizeof(rt->why), "cannot make %.180s: %s", dir, strerror(errno));
		rt->usable = false;
	}
}

/*
 * The node's image cache (container_cache.c): @image used now; when it was
 * just pulled or made (@made), its size measured and the cache trimmed.  A
 * user's own storage (a Slurm script's rootless pull) is not the node's.
 */
static void image_kept(const struct container_runtime *rt, const struct mlfs_config *cfg,
		       const char *image, bool made)
{
	if (geteuid() != 0)
		return;
	if (!made) {		/* no new bytes: no trim (podman images takes a quarter second) */
		container_cache_touch(cfg, image);
		return;
	}
	container_cache_measure(rt, cfg, image);
	container_cache_trim(rt, cfg, image, stdout);
}

static int image_pull(const struct mlfs_config *cfg, struct image_pull *ip)
{
	struct container_runtime rt;
	char dir[4096];
	long long waited;
	int lock;

	image_runtime(cfg, &rt, dir, sizeof(dir));
	if (!rt.usable) {
		printf("mlfs: cannot pull %s: %s\n", ip->image, rt.why);
		return 1;
	}
	if (rt.registries_conf[0])
		setenv("CONTAINERS_REGISTRIES_CONF", rt.registries_conf, 1);
	lock = image_lock(dir, ip->image, &waited);
	if (lock < 0) {
		printf("mlfs: cannot take the pull lock of %s: %s\n", ip->image, strerror(-lock));
		return 1;
	}
	if (image_lock_made(lock, waited)) {
		printf("mlfs: image %s was pulled while this job waited\n", ip->image);
		image_progress(ip, "on the node");
		close(lock);
		image_kept(&rt, cfg, ip->image, false);
		return 0;
	}
	if (image_exists(&rt, ip->image) == 1) {
		printf("mlfs: image %s is on the node\n", ip->image);
		image_progress(ip, "on the node");
		close(lock);
		image_kept(&rt, cfg, ip->image, false);
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
	image_pulled(ip);
	image_lock_note_made(lock);
	close(lock);
	image_kept(&rt, cfg, ip->image, true);
	return 0;
}

/* A line of the packages' installation: into the log, and the progress shown as reason. */
static void image_env_line(void *arg, const char *line)
{
	struct image_pull *ip = arg;
	char text[600];

	printf("%s\n", line);
	fflush(stdout);
	if (!*line)
		return;
	snprintf(text, sizeof(text), "installing packages: %.560s", line);
	image_progress(ip, text);
}

/*
 * --packages: ip->target, made of ip->image with the packages installed
 * (cmd_image_env.c), under its own lock, so that every job of the same
 * packages waits for one build and then finds it made; the base is pulled
 * (under its lock) only when the target is not there.
 */
static int image_prepare(const struct mlfs_config *cfg, struct image_pull *ip)
{
	struct container_runtime rt;
	struct image_env env = { .base = ip->image, .target = ip->target, .packages = ip->packages,
				 .on_line = image_env_line, .arg = ip };
	char dir[4096];
	long long waited;
	int lock, ret;

	image_runtime(cfg, &rt, dir, sizeof(dir));
	if (!rt.usable) {
		printf("mlfs: cannot prepare %s: %s\n", ip->image, rt.why);
		return 1;
	}
	lock = image_lock(dir, ip->target, &waited);
	if (lock < 0) {
		printf("mlfs: cannot take the lock of %s: %s\n", ip->target, strerror(-lock));
		return 1;
	}
	if (image_lock_made(lock, waited) || image_exists(&rt, ip->target) == 1) {
		printf("mlfs: the packages are installed already: %s (%s with the same packages and "
		       "variables)\n", ip->target, ip->image);
		image_progress(ip, "on the node");
		close(lock);
		image_kept(&rt, cfg, ip->target, false);
		return 0;
	}
	ret = image_pull(cfg, ip);
	if (ret == 0) {
		printf("mlfs: installing the packages in %s, as %s\n", ip->image, ip->target);
		fflush(stdout);
		image_progress(ip, "installing packages");
		if (image_env_build(&rt, &env) < 0) {
			printf("mlfs: cannot prepare %s: %s\n", ip->image, env.why);
			ret = 1;
		} else {
			printf("mlfs: made %s\n", ip->target);
			image_progress(ip, "on the node");
			image_lock_note_made(lock);
		}
	}
	close(lock);
	if (ret == 0)	/* kept within cache_size as the images pulled are */
		image_kept(&rt, cfg, ip->target, true);
	return ret;
}

static const char image_usage[] =
	"usage: mlfs image pull CONFIG IMAGE [--progress FILE] [--auth-file FILE]\n"
	"       mlfs image pull CONFIG IMAGE --packages FILE --as TARGET [--progress FILE]\n"
	"                       [--auth-file FILE]\n";

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
		} else if (strcmp(argv[i], "--packages") == 0 && i + 1 < argc) {
			ip.packages = argv[++i];
		} else if (strcmp(argv[i], "--as") == 0 && i + 1 < argc) {
			ip.target = argv[++i];
		} else {
			fprintf(stderr, "mlfs image: unknown argument '%s'\n%s", argv[i], image_usage);
			return 2;
		}
	}
	if (!ip.packages != !ip.target) {
		fprintf(stderr, "mlfs image: --packages and --as go together\n%s", image_usage);
		return 2;
	}
	if (cmd_load_config(&cfg, argv[2]) < 0)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	ret = ip.packages ? image_prepare(cfg, &ip) : image_pull(cfg, &ip);
	if (ip.auth_file)
		unlink(ip.auth_file);	/* the worker's credentials: not kept past their use */
	config_free(cfg);
	return ret;
}
