/*
 * cmd_mount.c - `mlfs mount`: check everything, mount, serve, unwind.
 *
 * Everything that can be wrong with the command line, the config or the
 * mountpoint is found before the kernel is asked to mount, so a failure
 * leaves nothing mounted and says what is wrong in one line.  The session
 * is mounted before the process daemonizes, so a mount error still reaches
 * the terminal.  The gateway then runs the multithreaded loop with a
 * cloned /dev/fuse descriptor per thread until it is unmounted or signalled.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fuse_lowlevel.h>

#include "backend.h"
#include "cmd.h"
#include "config.h"
#include "diag.h"
#include "exec.h"
#include "fs.h"
#include "log.h"
#include "mono.h"
#include "output.h"
#include "path.h"

/* Kernel readahead for the mount: one 1 MiB request at a time, not 128 KiB. */
#define MOUNT_READAHEAD_KB 1024

/* Takes mlfs's own options out of @opts (in place); the rest go to libfuse. */
static void mount_take_own_opts(struct mount_args *a, char *opts)
{
	char *out = opts, *save = NULL;

	for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		if (strcmp(o, "nopassthrough") == 0) {
			a->nopassthrough = true;
			continue;
		}
		if (out != opts)
			*out++ = ',';
		memmove(out, o, strlen(o));
		out += strlen(o);
	}
	*out = '\0';
}

static int mount_add_opts(struct mount_args *a, const char *given)
{
	char *joined, *opts = strdup(given);

	if (!opts)
		return -ENOMEM;
	mount_take_own_opts(a, opts);
	if (opts[0] == '\0') {
		free(opts);
		return 0;
	}

	if (a->opts ? asprintf(&joined, "%s,%s", a->opts, opts) < 0
		    : !(joined = strdup(opts))) {
		free(opts);
		return -ENOMEM;
	}
	free(opts);
	free(a->opts);
	a->opts = joined;
	return 0;
}

static const char mount_usage[] =
	"usage: mlfs mount [-f] [-d] [-o OPTS] CONFIG MOUNTPOINT\n"
	"  -f       stay in the foreground\n"
	"  -d       print every FUSE request (implies -f)\n"
	"  -o OPTS  FUSE mount options, comma-separated (ro, allow_other, ...), and\n"
	"           nopassthrough: serve local files through mlfs, not the kernel\n";

int mount_parse_args(struct mount_args *a, int argc, char **argv, const char *usage)
{
	const char *verb = a->spec_wanted ? "job" : "mount";

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];

		if (strcmp(arg, "-f") == 0) {
			a->foreground = true;
		} else if (strcmp(arg, "-d") == 0) {
			a->debug = a->foreground = true;
		} else if (strncmp(arg, "-o", 2) == 0) {
			const char *opts = arg[2] ? arg + 2 : (i + 1 < argc ? argv[++i] : NULL);

			if (!opts) {
				fprintf(stderr, "mlfs %s: -o needs a value\n", verb);
				return 2;
			}
			if (mount_add_opts(a, opts) < 0)
				return 2;
		} else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			printf("%s", usage);
			return 1;
		} else if (arg[0] == '-') {
			fprintf(stderr, "mlfs %s: unknown option '%s'\n%s", verb, arg, usage);
			return 2;
		} else if (!a->config) {
			a->config = arg;
		} else if (a->spec_wanted && !a->spec) {
			a->spec = arg;
		} else if (!a->mountpoint) {
			a->mountpoint = arg;
		} else {
			fprintf(stderr, "mlfs %s: unexpected argument '%s'\n", verb, arg);
			return 2;
		}
	}
	if (!a->mountpoint) {
		fputs(usage, stderr);
		return 2;
	}
	return 0;
}

/* A mountpoint must be a folder that is not a mount already. */
int mount_check_mountpoint(const char *mp)
{
	struct statx stx;

	if (statx(AT_FDCWD, mp, 0, STATX_TYPE, &stx) < 0) {
		if (errno == ENOTCONN)
			fprintf(stderr, "mlfs: mountpoint %s: a dead mount is still there "
				"(Transport endpoint is not connected); run 'mlfs umount %s'\n",
				mp, mp);
		else
			fprintf(stderr, "mlfs: mountpoint %s: %s\n", mp, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(stx.stx_mode)) {
		fprintf(stderr, "mlfs: mountpoint %s: not a folder\n", mp);
		return -1;
	}
	if ((stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	    (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
		fprintf(stderr, "mlfs: mountpoint %s: already a mount point; unmount it first\n",
			mp);
		return -1;
	}
	return 0;
}

int mount_make_dirs(const struct mlfs_config *cfg)
{
	const char *dirs[] = { cfg->state_dir, cfg->cache_dir };

	for (size_t i = 0; i < 2; i++) {
		int ret = path_mkdirs(dirs[i], 0755);

		if (ret < 0) {
			fprintf(stderr, "mlfs: %s: cannot create %s: %s\n", cfg->file, dirs[i],
				strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/*
 * One gateway per state_dir: its jobs journal, its jobs' folders and the
 * shepherds it adopts belong to one scheduler, and a second gateway would
 * run the same queued jobs again.  A flock (it dies with its holder) of
 * state_dir/gateway.lock, held open for the daemon's life: O_CLOEXEC, and a
 * shepherd closes every descriptor of the daemon's, so a job that outlives
 * a killed daemon does not hold it.  The file says where its holder
 * mounted, for the refusal.  The descriptor, or -1 (said on stderr).
 */
static int mount_lock_state(const struct mlfs_config *cfg, const char *mountpoint)
{
	char *path = NULL, held[PATH_MAX] = "";
	int fd = -1;
	ssize_t n;

	if (asprintf(&path, "%s/gateway.lock", cfg->state_dir) < 0)
		return -1;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		fprintf(stderr, "mlfs: %s: %s\n", path, strerror(errno));
	} else if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno;

		n = err == EWOULDBLOCK ? pread(fd, held, sizeof(held) - 1, 0) : 0;
		held[n > 0 ? n : 0] = '\0';
		held[strcspn(held, "\n")] = '\0';
		if (err == EWOULDBLOCK)
			fprintf(stderr, "mlfs: %s: state_dir %s is another running mlfs's (mounted at "
				"%s): one gateway per state_dir; unmount it, or give this config "
				"a state_dir of its own\n", cfg->file, cfg->state_dir,
				held[0] ? held : "?");
		else
			fprintf(stderr, "mlfs: %s: %s\n", path, strerror(err));
		close(fd);
		fd = -1;
	} else if (ftruncate(fd, 0) < 0 || pwrite(fd, mountpoint, strlen(mountpoint), 0) < 0 ||
		   pwrite(fd, "\n", 1, (off_t)strlen(mountpoint)) < 0) {
		log_warn("%s: %s", path, strerror(errno));	/* only the message needs it */
	}
	free(path);
	return fd;
}

static int mount_fuse_args(struct fuse_args *fa, const struct mount_args *a)
{
	const char *defaults = geteuid() == 0
		? "default_permissions,allow_other,fsname=mlfs,subtype=mlfs"
		: "default_permissions,fsname=mlfs,subtype=mlfs";

	if (fuse_opt_add_arg(fa, "mlfs") < 0 || fuse_opt_add_arg(fa, "-o") < 0 ||
	    fuse_opt_add_arg(fa, defaults) < 0)
		return -ENOMEM;
	if (a->opts && (fuse_opt_add_arg(fa, "-o") < 0 || fuse_opt_add_arg(fa, a->opts) < 0))
		return -ENOMEM;
	if (a->debug && fuse_opt_add_arg(fa, "-d") < 0)
		return -ENOMEM;
	return 0;
}

/* Undoes mountinfo's octal escapes ("\\040" for a space) in place. */
static void mount_unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] && s[3]) {
			*out++ = (char)(((s[1] - '0') << 6) | ((s[2] - '0') << 3) | (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/* The device number ("0:53") of the newest fuse.mlfs mount at @mp, from mountinfo. */
static int mount_find_dev(const char *mp, char *dev, size_t size)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char *line = NULL, *sep;
	size_t cap = 0;
	int found = -ENOENT;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char majmin[32], point[4096], fstype[64];

		sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %31s %*s %4095s", majmin, point) != 2 ||
		    sscanf(sep + 3, "%63s", fstype) != 1)
			continue;
		mount_unescape(point);
		if (strcmp(point, mp) == 0 && strcmp(fstype, "fuse.mlfs") == 0) {
			snprintf(dev, size, "%s", majmin);
			found = 0;
		}
	}
	free(line);
	fclose(f);
	return found;
}

/*
 * Raises the kernel's readahead window for the mount from its default of
 * 128 KiB to MOUNT_READAHEAD_KB, so sequential reads arrive as 1 MiB
 * requests.  Root only (sysfs); without it reads still work, in smaller
 * requests, so a failure is only logged.
 */
static void mount_tune_readahead(const char *mp)
{
	char dev[32], path[96];
	FILE *f;

	if (geteuid() != 0 || mount_find_dev(mp, dev, sizeof(dev)) < 0)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(path, "w");
	if (!f) {
		log_debug("cannot set %s: %s", path, strerror(errno));
		return;
	}
	fprintf(f, "%d\n", MOUNT_READAHEAD_KB);
	if (fclose(f) != 0)
		log_debug("cannot set %s: %s", path, strerror(errno));
}

/*
 * Uploads, in the background, what earlier mounts and views left staged
 * (DESIGN §2: "a mount does this too").  With its own copy of the config:
 * finding a destination adds datastores to the config it is given.
 */
static void *mount_sync_thread(void *arg)
{
	char *file = arg;
	struct mlfs_config *cfg = NULL;
	struct diag d;
	unsigned int live = 0;

	diag_init(&d);
	if (config_load(&cfg, file, backend_config_forms(), &d) == 0) {
		int failed = output_sync_all(cfg, NULL, NULL, &live);

		if (failed)
			log_warn("%d staged output(s) not uploaded; 'mlfs sync %s' tries again",
				 failed, file);
	}
	config_free(cfg);
	diag_free(&d);
	free(file);
	return NULL;
}

static void mount_start_sync(const char *config)
{
	char *file = strdup(config);
	pthread_t t;

	if (!file || pthread_create(&t, NULL, mount_sync_thread, file) != 0) {
		free(file);
		log_warn("cannot start the upload of staged outputs; run 'mlfs sync %s'", config);
		return;
	}
	pthread_detach(t);
}

/*
 * Keeps the daemon's memory to what it holds.  A read of a remote file
 * borrows buffers of 1 to 4 MiB (a fetch's, a FUSE thread's); glibc would
 * serve them from its arenas once the first was freed (its mmap threshold
 * rises to the largest block freed), and each arena's heap would then hold
 * them between the small records that stay (a file's node, what a listing
 * said): after 100,000 files the daemon kept 240 MB more than the 50 it
 * used.  So blocks of MOUNT_MMAP_MIN and more are always mapped on their own
 * and unmapped when freed.  What small buffers leave free is given back by
 * malloc_trim every MOUNT_TRIM_S seconds, when more than MOUNT_TRIM_FREE
 * bytes sit free in the arenas (a walk of the free chunks: milliseconds),
 * after the cache has let go of the fetch buffers it keeps while reading.
 */
#define MOUNT_MMAP_MIN		(128u << 10)
#define MOUNT_TRIM_S		5
#define MOUNT_TRIM_FREE		(8u << 20)

/* The trim thread, stopped and joined before the tree whose cache it asks is freed. */
struct mount_trim {
	struct fs *fs;
	pthread_t thread;
	bool on;
	bool stop;			/* guarded by lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* CLOCK_MONOTONIC: stop was asked */
};

static void *mount_trim_thread(void *arg)
{
	struct mount_trim *t = arg;

	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		struct timespec ts = mono_timespec(mono_ns() + MOUNT_TRIM_S * 1000000000ll);
		struct mallinfo2 mi;

		if (pthread_cond_timedwait(&t->cond, &t->lock, &ts) != ETIMEDOUT || t->stop)
			continue;
		pthread_mutex_unlock(&t->lock);
		cache_release_idle(t->fs->cache);	/* its spare fetch buffers, once idle */
		mi = mallinfo2();
		if (mi.fordblks > MOUNT_TRIM_FREE)
			malloc_trim(0);
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

static void mount_start_trim(struct mount_trim *t, struct fs *fs)
{
	*t = (struct mount_trim){ .fs = fs };
	pthread_mutex_init(&t->lock, NULL);
	mono_cond_init(&t->cond);
	t->on = pthread_create(&t->thread, NULL, mount_trim_thread, t) == 0;
}

static void mount_stop_trim(struct mount_trim *t)
{
	if (!t->on)
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	t->on = false;
}

static int mount_loop(struct fuse_session *se)
{
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	int ret;

	if (!lc)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, 1);
	fuse_loop_cfg_set_idle_threads(lc, 8);
	fuse_loop_cfg_set_max_threads(lc, 32);
	ret = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	return ret;
}

int mount_serve(struct fs *fs, const struct mount_args *a)
{
	struct fuse_args fa = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	struct mount_trim trim = { .on = false };
	int status = 1;

	exec_raise_nofile();
	mallopt(M_MMAP_THRESHOLD, MOUNT_MMAP_MIN);	/* see MOUNT_MMAP_MIN */
	/*
	 * The daemon holds the datastores' passwords and keys: no core dump of
	 * it, and no other process of its user reads its memory (ptrace,
	 * /proc/PID/mem, environ).  Workers are exec'd, which resets this.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		log_warn("cannot make the daemon non-dumpable: %s", strerror(errno));
	if (mount_fuse_args(&fa, a) == 0)
		se = fuse_session_new(&fa, &fs_ops, sizeof(fs_ops), fs);
	if (!se)
		goto out_args;		/* libfuse said why */
	fs->se = se;
	if (fuse_set_signal_handlers(se) < 0)
		goto out_session;
	/*
	 * At its absolute path: fuse_daemonize leaves the folder (chdir "/",
	 * in the foreground too), and libfuse unmounts at a signal the path it
	 * mounted: a relative one was left mounted, dead (ENOTCONN).
	 */
	if (fuse_session_mount(se, a->realmount) < 0) {
		fprintf(stderr, "mlfs: cannot mount %s\n", a->mountpoint);
		goto out_signals;
	}
	mount_tune_readahead(a->realmount);
	if (!a->nopassthrough && fs_passthrough_setup(fs, se) < 0)
		log_warn("FUSE passthrough not set up; reads and writes go through mlfs");
	if (fuse_daemonize(a->foreground) < 0)
		goto out_unmount;
	if (!a->foreground)
		log_to_syslog();
	/* After the fork of daemonizing, which would leave its thread behind. */
	if (!a->spec_wanted && fs_jobs_start(fs) < 0) {
		log_err("cannot start the scheduler; unmounting");
		goto out_unmount;
	}
	if (!a->spec_wanted)
		mount_start_sync(a->realconfig);
	mount_start_trim(&trim, fs);	/* after daemonizing: a fork keeps no thread */
	log_info("serving %s at %s", fs->cfg->file, a->realmount);
	status = mount_loop(se) < 0 ? 1 : 0;
out_unmount:
	mount_stop_trim(&trim);
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_args:
	fuse_opt_free_args(&fa);
	return status;
}

/* .mlfs/mount of a gateway: what `mlfs umount` needs to sync its outputs. */
static int mount_gateway_info(struct fs *fs, struct mount_args *a)
{
	a->realconfig = realpath(fs->cfg->file, NULL);
	if (!a->realconfig)
		return -errno;
	/* The daemon leaves its folder; what it starts later finds the config by this. */
	if (config_rename(fs->cfg, a->realconfig) < 0 || asprintf(&fs->mount_info, "kind=gateway\nconfig=%s\nstate_dir=%s\n",
				       a->realconfig, fs->cfg->state_dir) < 0) {
		fs->mount_info = NULL;
		return -ENOMEM;
	}
	return 0;
}

int cmd_mount(int argc, char **argv)
{
	struct mount_args a = { 0 };
	struct mlfs_config *cfg = NULL;
	struct fs *fs = NULL;
	int status = mount_parse_args(&a, argc, argv, mount_usage);
	int ret, lock = -1;

	if (status) {
		status = status == 1 ? 0 : status;
		goto out;
	}
	log_init("mlfs", a.debug ? MLFS_LOG_DEBUG : MLFS_LOG_INFO);
	status = 1;
	if (cmd_load_config(&cfg, a.config) < 0 || mount_check_mountpoint(a.mountpoint) < 0 ||
	    mount_make_dirs(cfg) < 0)
		goto out;
	/* Resolved now: once mounted, resolving it would ask this very process. */
	a.realmount = realpath(a.mountpoint, NULL);
	if (!a.realmount) {
		fprintf(stderr, "mlfs: mountpoint %s: %s\n", a.mountpoint, strerror(errno));
		goto out;
	}
	lock = mount_lock_state(cfg, a.realmount);
	if (lock < 0)
		goto out;
	ret = fs_create(&fs, cfg);
	if (ret < 0) {
		fprintf(stderr, "mlfs: %s: cannot set up the tree: %s\n", cfg->file, strerror(-ret));
		goto out;
	}
	cfg = NULL;		/* fs owns it now */
	ret = mount_gateway_info(fs, &a);
	if (ret < 0) {
		fprintf(stderr, "mlfs: %s: %s\n", fs->cfg->file, strerror(-ret));
		goto out;
	}
	status = mount_serve(fs, &a);
out:
	fs_destroy(fs);
	if (lock >= 0)
		close(lock);	/* after the scheduler stopped (fs_destroy) */
	config_free(cfg);
	free(a.opts);
	free(a.realmount);
	free(a.realconfig);
	return status;
}
