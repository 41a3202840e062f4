/*
 * exec_local.c - the `local` executor: runs workers on this node.
 *
 * start() forks a *shepherd* that outlives the daemon.  The shepherd starts
 * a new session, forks the worker (/bin/sh -c COMMAND with exactly the
 * environment it was given, in its folder, as its uid and gid, inside its
 * memory cgroup when it has a limit), copies the worker's output into the
 * worker's log unchanged and into the job's log line by line with a "[N] "
 * prefix, and when the worker has ended writes how into the exit file
 * (exit_path.tmp, fsync, rename).  The daemon watches the shepherd, not the
 * worker: run->pid is the shepherd, and a new daemon adopts a shepherd by
 * its pid and start time (/proc/PID/stat field 22), so a pid reused by
 * another process is never taken for it.
 *
 * The worker leads its own process group inside the shepherd's session:
 * run->pgid is the worker's pid, not the shepherd's, so signal() with
 * SIGKILL ends the worker and its children while the shepherd lives on to
 * record "signaled 9" (a group that held the shepherd would lose the
 * outcome to SIGKILL).  The shepherd tells start() the worker's pid through
 * a pipe before start() returns.  When the worker ends, whatever it left
 * running in its group is killed, so a stray background process neither
 * holds the worker open nor keeps its GPUs.
 *
 * Memory limits use a memory cgroup per worker: v1 under
 * /sys/fs/cgroup/memory/mlfs/, v2 under /sys/fs/cgroup/mlfs/.  Where none
 * can be made, workers run without a limit and one warning is logged.
 *
 * The daemon is multi-threaded, so the shepherd and the worker (forked
 * children that never exec, or not yet: exec_local_child.c) only make
 * async-signal-safe calls:
 * everything that needs memory is prepared in a struct exec_local_plan
 * before the fork, numbers are formatted by hand, and they end with _exit().
 *
 * Launching must not hold up the daemon's other threads, which accept specs
 * meanwhile.  So the shepherd is forked with _Fork(), not fork(): glibc's
 * fork() holds every malloc arena lock and the stdio lock while the kernel
 * copies the daemon (hundreds of mappings: a millisecond), which stalled
 * every FUSE thread that allocated, freed or opened a FILE meanwhile, and
 * the children use neither.  And a worker without a view is started the way
 * posix_spawn starts a program, sharing the shepherd's memory until its
 * execve (exec_local_start_worker), instead of copying those mappings once
 * more only for the execve to drop them.
 *
 * Not done here: deciding when a worker runs (the scheduler), retries,
 * removing exit files or logs (the scheduler owns them).  The executor's
 * functions are safe to call from several threads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>

#include "container.h"
#include "exec.h"
#include "exec_local_int.h"
#include "logcap.h"
#include "log.h"

#define EXEC_LOCAL_CG_V1	"/sys/fs/cgroup/memory/mlfs"
#define EXEC_LOCAL_CG_V2	"/sys/fs/cgroup/mlfs"
#define EXEC_LOCAL_CG_V2_ROOT	"/sys/fs/cgroup"

struct exec_local {
	struct executor base;		/* first */
	atomic_flag cg_warned;		/* "no memory cgroup" was logged */
};

/* The soft RLIMIT_NOFILE before exec_raise_nofile(), for the workers; 0 = untouched. */
rlim_t exec_local_nofile_soft;

void exec_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	exec_local_nofile_soft = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		exec_local_nofile_soft = 0;
}

static struct exec_local *exec_local_of(struct executor *ex)
{
	return (struct exec_local *)ex;
}

/* ---- the daemon's side ---- */

static int exec_local_open_log(const char *path, int *fd)
{
	*fd = -1;
	if (!path)
		return 0;
	*fd = logcap_open(path);
	if (*fd < 0) {
		int err = *fd;

		*fd = -1;
		log_err("cannot open worker log %s: %s", path, strerror(-err));
		return err;
	}
	return 0;
}

static void exec_local_plan_free(struct exec_local_plan *p)
{
	int *fds[] = { &p->log_fd, &p->job_log_fd, &p->status[0], &p->status[1], &p->upload_fd };
	size_t i;

	for (i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0)
			close(*fds[i]);
	free(p);
}

static int exec_local_plan_make(struct exec_local_plan **out, const struct exec_start *w)
{
	struct exec_local_plan *p = calloc(1, sizeof(*p));
	int err;

	if (!p)
		return -ENOMEM;
	p->w = w;
	p->argv[0] = "sh";
	p->argv[1] = "-c";
	p->argv[2] = w->command;
	p->log_fd = p->job_log_fd = p->status[0] = p->status[1] = p->upload_fd = -1;
	snprintf(p->exit_tmp, sizeof(p->exit_tmp), "%s.tmp", w->exit_path);
	if ((w->view_argv || w->pull_argv) && w->phase_path)
		snprintf(p->phase_tmp, sizeof(p->phase_tmp), "%s.tmp", w->phase_path);

	err = exec_local_open_log(w->log_path, &p->log_fd);
	if (!err)
		err = exec_local_open_log(w->job_log_path, &p->job_log_fd);
	/* the shepherd's: it may rotate and close them, in its own process */
	logcap_init(&p->log, p->log_fd, w->log_path, p->job_log_fd, w->worker, w->log_max);
	if (!err && w->unview_argv)
		err = exec_local_open_log(w->upload_log, &p->upload_fd);
	if (!err && pipe2(p->status, O_CLOEXEC) < 0)
		err = -errno;
	if (err) {
		exec_local_plan_free(p);
		return err;
	}
	*out = p;
	return 0;
}

static int exec_local_write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int err = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) < 0)
		err = -errno;
	close(fd);
	return err;
}

static int exec_local_mkdir(const char *path)
{
	return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

/* Makes BASE/<job>-<worker>-<attempt> afresh into @dir. */
static int exec_local_cg_leaf(const char *base, const struct exec_start *w, char *dir, size_t size)
{
	char name[200];
	size_t i;
	int err = exec_local_mkdir(base);

	if (err)
		return err;
	snprintf(name, sizeof(name) - 24, "%s", w->job ? w->job : "job");
	for (i = 0; name[i]; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
			    name[i]) || (i == 0 && name[i] == '.'))
			name[i] = '_';
	snprintf(name + i, sizeof(name) - i, "-%u-%u", w->worker, w->attempt);
	if ((size_t)snprintf(dir, size, "%s/%s", base, name) >= size)
		return -ENAMETOOLONG;
	if (mkdir(dir, 0755) == 0)
		return 0;
	/* one left by a worker whose daemon died: its counters would lie */
	if (errno != EEXIST || rmdir(dir) < 0 || mkdir(dir, 0755) < 0)
		return -errno;
	return 0;
}

static int exec_local_cg_set(const char *dir, const char *file, const char *value, bool optional)
{
	char path[320];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (optional && access(path, F_OK) < 0)
		return 0;
	return exec_local_write_file(path, value);
}

static int exec_local_cg_v1(const struct exec_start *w, char *dir, size_t size)
{
	char num[24];
	int err = exec_local_cg_leaf(EXEC_LOCAL_CG_V1, w, dir, size);

	if (err)
		return err;
	snprintf(num, sizeof(num), "%llu", (unsigned long long)w->memory_limit);
	err = exec_local_cg_set(dir, "memory.limit_in_bytes", num, false);
	/* memory plus swap: so swapping does not stretch the limit */
	if (!err)
		err = exec_local_cg_set(dir, "memory.memsw.limit_in_bytes", num, true);
	if (err)
		rmdir(dir);
	return err;
}

static int exec_local_cg_v2(const struct exec_start *w, char *dir, size_t size)
{
	char num[24];
	int err;

	exec_local_mkdir(EXEC_LOCAL_CG_V2);
	/* either may already be on, or refuse: memory.max below tells */
	exec_local_write_file(EXEC_LOCAL_CG_V2_ROOT "/cgroup.subtree_control", "+memory");
	exec_local_write_file(EXEC_LOCAL_CG_V2 "/cgroup.subtree_control", "+memory");
	err = exec_local_cg_leaf(EXEC_LOCAL_CG_V2, w, dir, size);
	if (err)
		return err;
	snprintf(num, sizeof(num), "%llu", (unsigned long long)w->memory_limit);
	err = exec_local_cg_set(dir, "memory.max", num, false);
	if (!err)
		err = exec_local_cg_set(dir, "memory.swap.max", "0", true);
	if (err)
		rmdir(dir);
	return err;
}

/* Makes the worker's memory cgroup, or leaves run->cgroup "" and warns once. */
static void exec_local_cgroup(struct exec_local *el, const struct exec_start *w,
			      struct exec_local_plan *p, struct exec_run *run)
{
	bool v2 = access(EXEC_LOCAL_CG_V2_ROOT "/cgroup.controllers", F_OK) == 0;
	char *dir = run->cgroup;
	int err;

	dir[0] = '\0';
	if (w->memory_limit == 0)
		return;
	err = v2 ? exec_local_cg_v2(w, dir, sizeof(run->cgroup))
		 : exec_local_cg_v1(w, dir, sizeof(run->cgroup));
	if (err) {
		dir[0] = '\0';
		if (!atomic_flag_test_and_set(&el->cg_warned))
			log_warn("memory limits are not enforced: cannot make a memory cgroup under %s: %s",
				 v2 ? EXEC_LOCAL_CG_V2 : EXEC_LOCAL_CG_V1, strerror(-err));
		return;
	}
	snprintf(p->cg_procs, sizeof(p->cg_procs), "%s/cgroup.procs", dir);
	snprintf(p->cg_events, sizeof(p->cg_events), "%s/%s", dir,
		 v2 ? "memory.events" : "memory.oom_control");
	if (!v2) {
		snprintf(p->cg_failcnt, sizeof(p->cg_failcnt), "%s/memory.failcnt", dir);
		snprintf(p->cg_maxuse, sizeof(p->cg_maxuse), "%s/memory.max_usage_in_bytes", dir);
		snprintf(p->cg_limit, sizeof(p->cg_limit), "%s/memory.limit_in_bytes", dir);
	}
}

/*
 * The container's `podman run` (container.c), under the worker's memory
 * cgroup when it has one: the cgroup's limit is then the container's, and
 * its failcnt tells an OOM kill.  Without one, the container gets the
 * limit itself (--memory).
 */
static int exec_local_podman_argv(struct exec_local_plan *p, const struct exec_run *run)
{
	const char *parent = NULL;

	if (run->cgroup[0] && strncmp(run->cgroup, EXEC_LOCAL_CG_V1 "/", strlen(EXEC_LOCAL_CG_V1) + 1) == 0)
		parent = run->cgroup + strlen(EXEC_LOCAL_CG_V1) - strlen("/mlfs");
	else if (run->cgroup[0])
		parent = run->cgroup + strlen(EXEC_LOCAL_CG_V2_ROOT);
	return container_argv(p->w->container, parent, p->podman_argv, p->podman_buf,
			      sizeof(p->podman_buf));
}

/*
 * podman makes the worker's cgroup in every hierarchy (cpu, pids, ...),
 * with conmon's under it, and leaves them when the container is gone.
 */
static void exec_local_cg_remove_podman(const char *leaf)
{
	static const char *const hierarchies[] = {
		"blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "memory", "net_cls",
		"net_prio", "perf_event", "pids", "hugetlb", "rdma", "misc", "systemd", "unified", "",
	};
	char path[512];

	for (size_t i = 0; i < sizeof(hierarchies) / sizeof(hierarchies[0]); i++) {
		const char *sep = hierarchies[i][0] ? "/" : "";

		snprintf(path, sizeof(path), "%s/%s%smlfs/%s/conmon", EXEC_LOCAL_CG_V2_ROOT,
			 hierarchies[i], sep, leaf);
		rmdir(path);
		*strrchr(path, '/') = '\0';
		if (strcmp(hierarchies[i], "memory") != 0)	/* the caller's own */
			rmdir(path);
	}
}

static void exec_local_cg_remove(struct exec_run *run)
{
	char conmon[sizeof(run->cgroup) + 8];

	if (!run->cgroup[0])
		return;
	/* only a container's leaves podman's folders (conmon's is one): no sweep for the others */
	snprintf(conmon, sizeof(conmon), "%s/conmon", run->cgroup);
	if (access(conmon, F_OK) == 0 && strrchr(run->cgroup, '/'))
		exec_local_cg_remove_podman(strrchr(run->cgroup, '/') + 1);
	if (rmdir(run->cgroup) < 0 && errno != ENOENT) {
		log_warn("cannot remove memory cgroup %s: %s", run->cgroup, strerror(errno));
		return;
	}
	run->cgroup[0] = '\0';
}

int exec_local_parse_stat(const char *text, char *state, unsigned long long *start_time)
{
	const char *p = strrchr(text, ')');
	char *end;
	int field;

	if (!p || p[1] != ' ' || !p[2])
		return -EINVAL;
	p += 2;
	*state = *p;
	for (field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EINVAL;
		p++;
	}
	errno = 0;
	*start_time = strtoull(p, &end, 10);
	if (end == p || errno)
		return -EINVAL;
	return 0;
}

static int exec_local_proc(pid_t pid, char *state, unsigned long long *start_time)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = '\0';
	return exec_local_parse_stat(buf, state, start_time);
}

/* Is @pid still the process started at @start_time, and not ended? */
static bool exec_local_alive(pid_t pid, unsigned long long start_time)
{
	unsigned long long t;
	char state;

	if (pid <= 0 || exec_local_proc(pid, &state, &t) < 0)
		return false;
	return t == start_time && state != 'Z' && state != 'X';
}

static int exec_local_pidfd(pid_t pid)
{
	long fd = syscall(SYS_pidfd_open, pid, 0);

	return fd < 0 ? -1 : (int)fd;
}

static void exec_local_fill_run(struct exec_run *run, pid_t shepherd, pid_t worker,
				const struct exec_start *w)
{
	char state;

	run->pid = shepherd;
	run->pgid = worker;
	if (exec_local_proc(shepherd, &state, &run->start_time) < 0)
		run->start_time = 0;
	run->pidfd = exec_local_pidfd(shepherd);
	snprintf(run->exit_path, sizeof(run->exit_path), "%s", w->exit_path);
}

static int exec_local_read_status(int fd, struct exec_local_status *st)
{
	size_t got = 0;

	while (got < sizeof(*st)) {
		ssize_t n = read(fd, (char *)st + got, sizeof(*st) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		got += (size_t)n;
	}
	return 0;
}

static int exec_local_start(struct executor *ex, const struct exec_start *w, struct exec_run *run)
{
	struct exec_local_status st = { 0, 0 };
	struct exec_local_plan *p;
	pid_t pid;
	int err;

	if (!w->command || !w->exit_path || strlen(w->exit_path) >= sizeof(run->exit_path))
		return -EINVAL;
	memset(run, 0, sizeof(*run));
	run->pidfd = -1;
	err = exec_local_plan_make(&p, w);
	if (err)
		return err;
	exec_local_cgroup(exec_local_of(ex), w, p, run);
	if (w->container) {
		err = exec_local_podman_argv(p, run);
		if (err)
			goto out_cgroup;
	}
	pid = _Fork();
	if (pid == 0)
		exec_local_shepherd(p);
	if (pid < 0) {
		err = -errno;
		goto out_cgroup;
	}
	close(p->status[1]);
	p->status[1] = -1;
	err = exec_local_read_status(p->status[0], &st);
	if (!err && st.err)
		err = -st.err;
	if (err) {
		waitpid(pid, NULL, 0);
		goto out_cgroup;
	}
	exec_local_fill_run(run, pid, st.worker, w);
	exec_local_plan_free(p);
	return 0;

out_cgroup:
	log_err("cannot start worker %u of %s: %s", w->worker, w->job ? w->job : "?",
		strerror(-err));
	exec_local_cg_remove(run);
	exec_local_plan_free(p);
	return err;
}

static int exec_local_signal(struct executor *ex, struct exec_run *run, int sig)
{
	(void)ex;
	if (run->pgid <= 1)		/* kill(-1) or kill(0): never */
		return -EINVAL;
	if (kill(-run->pgid, sig) == 0 || errno == ESRCH)
		return 0;
	return -errno;
}

void exec_local_parse_exit(const char *text, struct exec_result *res)
{
	static const struct {
		const char *word;
		enum exec_end how;
	} words[] = {
		{ "exited ", EXEC_EXITED },
		{ "signaled ", EXEC_SIGNALED },
	};
	long long v;
	size_t i;

	const char *up = strstr(text, "\nupload ");

	res->how = EXEC_LOST;
	res->code = 0;
	res->staging_in_failed = false;
	res->upload = -1;
	if (up && (v = exec_local_counter(up + 8, NULL)) >= 0 && v <= 255)
		res->upload = (int)v;
	if (strncmp(text, "staging-in failed\n", 18) == 0) {
		res->how = EXEC_EXITED;
		res->code = 1;
		res->staging_in_failed = true;
		return;
	}
	if (strncmp(text, "oom\n", 4) == 0 || strcmp(text, "oom") == 0) {
		res->how = EXEC_OOM;
		res->code = SIGKILL;
		return;
	}
	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		size_t len = strlen(words[i].word);

		if (strncmp(text, words[i].word, len) != 0)
			continue;
		v = exec_local_counter(text + len, NULL);
		if (v < 0 || v > 255)
			return;
		res->how = words[i].how;
		res->code = (int)v;
	}
}

bool exec_local_read_exit(const char *path, struct exec_result *res)
{
	char buf[128];
	ssize_t n;
	/* a cluster job's folder is its owner's: never through a link, never a FIFO */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	res->how = EXEC_LOST;
	res->code = 0;
	res->staging_in_failed = false;
	res->upload = -1;
	res->why[0] = '\0';
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	exec_local_parse_exit(buf, res);
	return true;
}

/* The shepherd ended: reaps it if ours, reads the outcome, frees the run. */
static void exec_local_finish(struct exec_run *run, struct exec_result *res)
{
	unsigned long long t;
	char state;

	/* a zombie's pid cannot be reused, and the start time says it is ours */
	if (exec_local_proc(run->pid, &state, &t) == 0 && t == run->start_time)
		waitpid(run->pid, NULL, WNOHANG);
	exec_local_read_exit(run->exit_path, res);
	if (run->pidfd >= 0)
		close(run->pidfd);
	run->pidfd = -1;
	exec_local_cg_remove(run);
}

static bool exec_local_ended(const struct exec_run *run)
{
	struct pollfd pfd = { .fd = run->pidfd, .events = POLLIN };
	int n;

	if (run->pidfd >= 0) {
		n = poll(&pfd, 1, 0);
		if (n >= 0)
			return n > 0;
	}
	return !exec_local_alive(run->pid, run->start_time);
}

static int exec_local_poll(struct executor *ex, struct exec_run *run, struct exec_result *res)
{
	(void)ex;
	if (!exec_local_ended(run))
		return 0;
	exec_local_finish(run, res);
	return 1;
}

static int exec_local_adopt(struct executor *ex, struct exec_run *run, struct exec_result *res)
{
	(void)ex;
	run->pidfd = -1;		/* a number from another process's table */
	if (exec_local_alive(run->pid, run->start_time)) {
		run->pidfd = exec_local_pidfd(run->pid);
		/* checked again: the pid may have been reused before the open */
		if (run->pidfd < 0 || exec_local_alive(run->pid, run->start_time))
			return 0;
	}
	exec_local_finish(run, res);
	return 1;
}

static int exec_local_create(struct executor **out, const struct mlfs_config *cfg)
{
	struct exec_local *el = calloc(1, sizeof(*el));

	(void)cfg;
	if (!el)
		return -ENOMEM;
	el->base.ops = &exec_local_ops;
	atomic_flag_clear(&el->cg_warned);
	*out = &el->base;
	return 0;
}

static void exec_local_destroy(struct executor *ex)
{
	free(ex ? exec_local_of(ex) : NULL);
}

const struct exec_ops exec_local_ops = {
	.version = EXEC_OPS_VERSION,
	.name = "local",
	.create = exec_local_create,
	.destroy = exec_local_destroy,
	.start = exec_local_start,
	.signal = exec_local_signal,
	.poll = exec_local_poll,
	.adopt = exec_local_adopt,
};
