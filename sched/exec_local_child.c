/*
 * exec_local_child.c - the local executor's children (exec_local.c says
 * what they are for): the shepherd, forked with _Fork() and never exec'ing,
 * and the worker it starts, which shares the shepherd's memory until its
 * execve.  Both run in a copy of a multi-threaded daemon, so everything here
 * makes only async-signal-safe calls: what needs memory was prepared in the
 * struct exec_local_plan before the fork, numbers are formatted by hand,
 * and each ends with _exit().
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
#include "mono.h"

/* ---- async-signal-safe helpers, for the shepherd and the worker ---- */

static size_t exec_local_cat(char *buf, size_t size, size_t len, const char *s)
{
	while (s && *s && len + 1 < size)
		buf[len++] = *s++;
	buf[len] = '\0';
	return len;
}

/* Formats @v at the end of @buf (24 bytes are enough); returns its start. */
static const char *exec_local_utoa(char *buf, size_t size, unsigned long long v)
{
	char *p = buf + size - 1;

	*p = '\0';
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v && p > buf);
	return p;
}

static void exec_local_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

static time_t exec_local_now(void)
{
	return (time_t)(mono_ns() / 1000000000);
}

static void exec_local_close_range(unsigned int lo, unsigned int hi)
{
	struct rlimit rl;
	unsigned int fd;

	if (lo > hi || close_range(lo, hi, 0) == 0)
		return;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur > 65536)
		rl.rlim_cur = 65536;
	for (fd = lo; fd <= hi && fd < rl.rlim_cur; fd++)
		close((int)fd);
}

/* Closes every fd from 3 up except the @n in @keep (-1 entries ignored). */
static void exec_local_close_except(int *keep, int n)
{
	unsigned int lo = 3;
	int i, j, t;

	for (i = 1; i < n; i++)
		for (j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			t = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	for (i = 0; i < n; i++) {
		if (keep[i] < (int)lo)
			continue;
		exec_local_close_range(lo, (unsigned int)keep[i] - 1);
		lo = (unsigned int)keep[i] + 1;
	}
	exec_local_close_range(lo, ~0U);
}

static void exec_local_default_signals(void)
{
	struct sigaction sa;
	int sig;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		sigaction(sig, &sa, NULL);	/* SIGKILL, SIGSTOP: fail, fine */
}

/*
 * The value after "KEY " at the start of a line of @text (KEY NULL: the
 * number @text starts with); -1 when there is none.
 */
long long exec_local_counter(const char *text, const char *key)
{
	size_t klen = key ? strlen(key) : 0;
	const char *p = text;
	long long v = 0;

	while (key && p && !(strncmp(p, key, klen) == 0 && p[klen] == ' ')) {
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	if (!p)
		return -1;
	p += key ? klen + 1 : 0;
	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (*p++ - '0');
	return v;
}

static long long exec_local_file_counter(const char *path, const char *key)
{
	char buf[2048];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return exec_local_counter(buf, key);
}

/* ---- the worker: a child of the shepherd, until execve() ---- */

/* Writes "mlfs: cannot WHAT ARG: ERROR" to the worker's output; exits 127. */
static _Noreturn void exec_local_fail(const char *what, const char *arg, int err)
{
	const char *desc = strerrordesc_np(err);
	char msg[1024];
	size_t len = 0;

	len = exec_local_cat(msg, sizeof(msg), len, "mlfs: cannot ");
	len = exec_local_cat(msg, sizeof(msg), len, what);
	if (arg) {
		len = exec_local_cat(msg, sizeof(msg), len, " ");
		len = exec_local_cat(msg, sizeof(msg), len, arg);
	}
	len = exec_local_cat(msg, sizeof(msg), len, ": ");
	len = exec_local_cat(msg, sizeof(msg), len, desc ? desc : "unknown error");
	len = exec_local_cat(msg, sizeof(msg), len, "\n");
	exec_local_write_all(STDERR_FILENO, msg, len);
	_exit(127);
}

static void exec_local_worker_cgroup(const struct exec_local_plan *p)
{
	char num[24];
	const char *s;
	int fd;

	if (!p->cg_procs[0])
		return;
	s = exec_local_utoa(num, sizeof(num), (unsigned long long)getpid());
	fd = open(p->cg_procs, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, s, strlen(s)) < 0)
		exec_local_fail("join memory cgroup", p->cg_procs, errno);
	close(fd);
}

/*
 * Takes the worker's uid and gid, and no supplementary groups.  Through
 * syscall(): glibc's setuid() and the like, in a process it believes has
 * threads (a copy of the daemon made by _Fork, or one sharing the
 * shepherd's memory), take its thread-list lock to change every thread's
 * ids, a lock some thread of the daemon may have held at the fork.  The
 * worker is one thread: the system calls alone are the whole change.
 */
static void exec_local_worker_ids(const struct exec_start *w)
{
	char num[24];

	if (exec_local_nofile_soft) {
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
			rl.rlim_cur = exec_local_nofile_soft;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	if (w->uid == geteuid() && w->gid == getegid())
		return;
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		exec_local_fail("drop supplementary groups", NULL, errno);
	if (syscall(SYS_setgid, w->gid) < 0)
		exec_local_fail("run as gid", exec_local_utoa(num, sizeof(num), w->gid), errno);
	if (syscall(SYS_setuid, w->uid) < 0)
		exec_local_fail("run as uid", exec_local_utoa(num, sizeof(num), w->uid), errno);
}

/* Writes @phase to the worker's phase file, atomically (the view's workers only). */
static void exec_local_phase(const struct exec_local_plan *p, const char *phase)
{
	int fd;

	if (!p->phase_tmp[0])
		return;
	fd = open(p->phase_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	exec_local_write_all(fd, phase, strlen(phase));
	exec_local_write_all(fd, "\n", 1);
	close(fd);
	rename(p->phase_tmp, p->w->phase_path);
}

/* Reads the phase file: true when it says @phase. */
static bool exec_local_phase_is(const struct exec_local_plan *p, const char *phase)
{
	char buf[64];
	size_t len = strlen(phase);
	ssize_t n;
	int fd;

	if (!p->phase_tmp[0] || (fd = open(p->w->phase_path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	return n == (ssize_t)len + 1 && memcmp(buf, phase, len) == 0;
}

/*
 * Runs @argv (a path, then its arguments) with the executor's own
 * environment and every signal unblocked, its output on @out; returns its
 * wait status, or -1 when it could not run.
 */
static int exec_local_run(char *const *argv, int out)
{
	sigset_t none;
	pid_t pid = _Fork();
	int status;

	if (pid == 0) {
		exec_local_default_signals();
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (out >= 0 && (dup2(out, STDOUT_FILENO) < 0 || dup2(out, STDERR_FILENO) < 0))
			_exit(127);
		exec_local_close_range(3, ~0U);
		execve(argv[0], argv, environ);
		exec_local_fail("run", argv[0], errno);
	}
	if (pid < 0)
		return -1;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return status;
}

/*
 * Pulls the worker's image (once per node: `mlfs image pull` waits for a
 * pull of the same image another worker started), its words in the
 * worker's log.  An image that cannot be had ends the worker, as a view
 * that does not come up does.
 */
static void exec_local_pull(const struct exec_local_plan *p)
{
	int status;

	if (!p->w->pull_argv)
		return;
	exec_local_phase(p, "staging_in");
	status = exec_local_run(p->w->pull_argv, STDOUT_FILENO);
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		exec_local_phase(p, "staging_in_failed");
		_exit(1);
	}
}

/*
 * Mounts the worker's view (still as root, before the cgroup and the
 * uid), then with view_bind enters a private mount namespace where the
 * view is bound at /opt/ml for this worker alone.  A view that does not
 * come up ends the worker: the command never runs without its data.
 */
static void exec_local_view(const struct exec_local_plan *p)
{
	const struct exec_start *w = p->w;
	int status;

	if (!w->view_argv)
		return;
	exec_local_phase(p, "staging_in");
	status = exec_local_run(w->view_argv, STDOUT_FILENO);
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		exec_local_phase(p, "staging_in_failed");
		_exit(1);
	}
	if (!w->view_bind)
		return;
	if (unshare(CLONE_NEWNS) < 0)
		exec_local_fail("make a private mount namespace", NULL, errno);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		exec_local_fail("make mounts private", NULL, errno);
	mkdir("/opt", 0755);
	mkdir("/opt/ml", 0755);
	if (mount(w->view_dir, "/opt/ml", NULL, MS_BIND, NULL) < 0)
		exec_local_fail("bind the view at /opt/ml", w->view_dir, errno);
}

/*
 * Starts with every signal blocked (the shepherd forks it so): a signal
 * sent to its group before the dispositions are reset stays pending
 * instead of being ignored, and arrives once they are.
 */
static _Noreturn void exec_local_worker(const struct exec_local_plan *p, int out)
{
	const struct exec_start *w = p->w;
	sigset_t none;

	setpgid(0, 0);
	exec_local_default_signals();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(out, STDOUT_FILENO) < 0 || dup2(out, STDERR_FILENO) < 0)
		_exit(127);
	exec_local_pull(p);
	/* The view's daemon must not join the worker's memory cgroup: first. */
	exec_local_view(p);
	if (p->podman_argv[0]) {
		/* podman, as root, starts the container as uid:gid; its limits are the container's */
		exec_local_phase(p, "running");
		exec_local_close_range(3, ~0U);
		execve(p->podman_argv[0], p->podman_argv, environ);
		exec_local_fail("run", p->podman_argv[0], errno);
	}
	exec_local_worker_cgroup(p);
	exec_local_phase(p, "running");		/* while still allowed to write it */
	exec_local_worker_ids(w);
	/* after giving up root: the worker enters only what its user may */
	if (w->dir && chdir(w->dir) < 0)
		exec_local_fail("enter", w->dir, errno);
	exec_local_close_range(3, ~0U);
	execve("/bin/sh", (char *const *)p->argv, w->envp);
	exec_local_fail("run", "/bin/sh", errno);
}

static int exec_local_worker_main(void *arg)
{
	struct exec_local_plan *p = arg;

	exec_local_worker(p, p->worker_out);
}

/*
 * Starts the worker, every signal blocked; returns its pid or -1.  Without
 * a view it runs on p->stack in the shepherd's memory, the shepherd held
 * until its execve (CLONE_VFORK), as posix_spawn does: nothing of the
 * shepherd is copied, and the worker changes nothing the shepherd reads
 * (its errno aside, which the shepherd does not look at).  A worker with a
 * view mounts it first, for seconds, while the shepherd must report it and
 * copy its output: it gets a copy of the shepherd.
 */
static pid_t exec_local_start_worker(struct exec_local_plan *p, int out)
{
	pid_t pid;

	if (!p->w->view_argv && !p->w->pull_argv) {
		p->worker_out = out;
		return clone(exec_local_worker_main, p->stack + sizeof(p->stack),
			     CLONE_VM | CLONE_VFORK | SIGCHLD, p);
	}
	pid = _Fork();
	if (pid == 0)
		exec_local_worker(p, out);
	return pid;
}

/* ---- the shepherd: a child of the daemon that never execs ---- */

/*
 * Copies the worker's output until EOF; returns its wait status (-1 when
 * unknown).  Once the worker has ended, what it left in its group is
 * killed and the output is drained for at most EXEC_LOCAL_DRAIN_S.
 */
static int exec_local_pump(struct exec_local_plan *p, int fd, pid_t worker)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	time_t deadline = 0;
	bool done = false;
	int status = -1;
	ssize_t n;

	for (;;) {
		if (!done && waitpid(worker, &status, WNOHANG) == worker) {
			done = true;
			kill(-worker, SIGKILL);
			deadline = exec_local_now() + EXEC_LOCAL_DRAIN_S;
		}
		if (done && exec_local_now() > deadline)
			break;
		n = poll(&pfd, 1, 1000);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		n = read(fd, p->chunk, sizeof(p->chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		logcap_write(&p->log, p->chunk, (size_t)n);
	}
	logcap_end(&p->log);
	close(fd);
	while (!done && waitpid(worker, &status, 0) < 0 && errno == EINTR)
		;
	kill(-worker, SIGKILL);
	return status;
}

/* Did the memory cgroup kill the worker (or, seen by sh, its command)? */
static bool exec_local_oom(const struct exec_local_plan *p, int status)
{
	bool killed = (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
		(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL);
	long long kills;

	if (!killed || !p->cg_events[0])
		return false;
	kills = exec_local_file_counter(p->cg_events, "oom_kill");
	if (kills > 0 || (kills >= 0 && !p->podman_argv[0]))
		return kills > 0;
	/*
	 * v1 counts oom_kill in the victim's own cgroup: a container's is
	 * below the worker's, and gone with it.  The worker's failcnt, or
	 * (where the kernel does not count it) its peak usage at the limit,
	 * says the limit was hit.
	 */
	if (p->cg_failcnt[0] && exec_local_file_counter(p->cg_failcnt, NULL) > 0)
		return true;
	return p->podman_argv[0] && p->cg_maxuse[0] &&
	       exec_local_file_counter(p->cg_maxuse, NULL) >= exec_local_file_counter(p->cg_limit, NULL);
}

/*
 * Writes how the worker ended to the exit file, atomically: one line, and
 * for a worker with a view "upload N" (unview's exit status) after it.
 */
static void exec_local_record(const struct exec_local_plan *p, int status, int upload)
{
	char text[64], num[24];
	size_t len = 0;
	int fd;

	if (status == -1)
		return;
	if (exec_local_phase_is(p, "staging_in_failed")) {
		len = exec_local_cat(text, sizeof(text), len, "staging-in failed");
	} else if (exec_local_oom(p, status)) {
		len = exec_local_cat(text, sizeof(text), len, "oom");
	} else if (WIFSIGNALED(status)) {
		len = exec_local_cat(text, sizeof(text), len, "signaled ");
		len = exec_local_cat(text, sizeof(text), len,
				     exec_local_utoa(num, sizeof(num), (unsigned)WTERMSIG(status)));
	} else {
		len = exec_local_cat(text, sizeof(text), len, "exited ");
		len = exec_local_cat(text, sizeof(text), len,
				     exec_local_utoa(num, sizeof(num), (unsigned)WEXITSTATUS(status)));
	}
	len = exec_local_cat(text, sizeof(text), len, "\n");
	if (upload >= 0) {
		len = exec_local_cat(text, sizeof(text), len, "upload ");
		len = exec_local_cat(text, sizeof(text), len,
				     exec_local_utoa(num, sizeof(num), (unsigned)upload));
		len = exec_local_cat(text, sizeof(text), len, "\n");
	}
	fd = open(p->exit_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	exec_local_write_all(fd, text, len);
	fsync(fd);
	close(fd);
	rename(p->exit_tmp, p->w->exit_path);
}

/* Detaches from the daemon: signals, stdio on /dev/null, no fds of its. */
static void exec_local_shepherd_detach(struct exec_local_plan *p)
{
	static const int ignored[] = { SIGTERM, SIGINT, SIGHUP, SIGPIPE };
	int keep[4] = { p->log_fd, p->job_log_fd, p->status[1], p->upload_fd };
	struct sigaction sa;
	size_t i;
	int null;

	setsid();
	exec_local_default_signals();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	for (i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		sigaction(ignored[i], &sa, NULL);
	exec_local_close_except(keep, 4);
	null = open("/dev/null", O_RDWR);	/* no O_CLOEXEC: it may land on 0-2 */
	for (i = 0; null >= 0 && i < 3; i++)
		if ((int)i != null)
			dup2(null, (int)i);
	if (null > 2)
		close(null);
}

static void exec_local_shepherd_report(struct exec_local_plan *p, pid_t worker, int err)
{
	struct exec_local_status st = { .worker = worker, .err = err };

	exec_local_write_all(p->status[1], (const char *)&st, sizeof(st));
	close(p->status[1]);
}

_Noreturn void exec_local_shepherd(struct exec_local_plan *p)
{
	sigset_t all, none;
	pid_t worker;
	int out[2], status, upload = -1;

	exec_local_shepherd_detach(p);
	if (pipe2(out, O_CLOEXEC) < 0) {
		exec_local_shepherd_report(p, 0, errno);
		_exit(1);
	}
	sigfillset(&all);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &all, NULL);
	worker = exec_local_start_worker(p, out[1]);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (worker < 0) {
		exec_local_shepherd_report(p, 0, errno);
		_exit(1);
	}
	setpgid(worker, worker);	/* before start() hears of the group */
	close(out[1]);
	exec_local_shepherd_report(p, worker, 0);
	status = exec_local_pump(p, out[0], worker);
	if (p->w->cleanup_argv)
		exec_local_run(p->w->cleanup_argv, -1);
	if (p->w->unview_argv && p->phase_tmp[0] && !exec_local_phase_is(p, "staging_in_failed")) {
		/* The output goes up however the command ended: nothing is lost. */
		exec_local_phase(p, "staging_out");
		upload = exec_local_run(p->w->unview_argv, p->upload_fd);
		upload = upload == -1 ? 255 : WIFEXITED(upload) ? WEXITSTATUS(upload) : 255;
	}
	exec_local_record(p, status, upload);
	_exit(0);
}
