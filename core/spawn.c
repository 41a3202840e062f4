/*
 * spawn.c - run a program to its end with pipes and a deadline (spawn.h).
 *
 * The idea: one loop over poll(2) that writes the child's stdin, reads its
 * stdout and stderr as they come (so a child that writes more than a pipe
 * holds never blocks on us, nor we on it), and watches the child itself
 * through a pidfd, so the run ends when the child does, not when the last
 * holder of its pipes lets go.  The child is started with posix_spawn
 * (glibc: clone with CLONE_VM | CLONE_VFORK, no copy of the caller's
 * memory map and no fork handlers), which is safe from any thread of a
 * multi-threaded daemon.
 *
 * A write to a stdin the child closed would raise SIGPIPE in the caller:
 * the signal is blocked in the calling thread for the run, and one it
 * raised is taken back before the mask is restored.
 *
 * What it does not do: change the child's user (callers put setpriv in
 * argv), kill what the child leaves behind when it ends by itself, or log.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spawn.h"
#include "mono.h"

#define SPAWN_CHUNK	16384
#define SPAWN_FIRST_CAP	4096		/* a capture buffer's first size */
#define SPAWN_DRAIN_MAX	(1 << 20)	/* read after the child's end, per stream, at most */
#define SPAWN_STEP_MS	50		/* without a pidfd: how often the child is looked at */

/* A captured stream: the first @max bytes kept, the rest dropped. */
struct spawn_buf {
	char *p;			/* NUL-terminated */
	size_t len, cap, max;
};

/* One run, on the caller's stack. */
struct spawn_run {
	const struct spawn *sp;
	pid_t pid;
	int in_w, out_r, err_r;		/* our ends of the pipes; -1 = closed */
	int pidfd;			/* -1: none (the child is looked at with WNOHANG) */
	size_t in_off;
	bool exited;			/* the child has ended (maybe not yet reaped) */
	bool reaped;
	bool epipe;			/* a write to its stdin raised SIGPIPE */
	int status;
	struct spawn_buf out, err;
	char line[SPAWN_LINE_MAX];	/* the stderr line being gathered for on_err_line */
	size_t line_len;
};

static long long spawn_mono_ms(void)
{
	return mono_ns() / 1000000;
}

static void spawn_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/*
 * A close-on-exec pipe whose ends are above 2: in a process started with
 * a standard stream closed, pipe2 may hand out 0, 1 or 2, which the
 * child's dup2 onto its standard streams would then clobber.
 */
static int spawn_pipe(int p[2])
{
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	for (int i = 0; i < 2; i++) {
		if (p[i] > 2)
			continue;
		int fd = fcntl(p[i], F_DUPFD_CLOEXEC, 3);

		if (fd < 0) {
			int err = -errno;

			close(p[0]);
			close(p[1]);
			p[0] = p[1] = -1;
			return err;
		}
		close(p[i]);
		p[i] = fd;
	}
	return 0;
}

static int spawn_buf_init(struct spawn_buf *b, size_t max)
{
	b->max = max < SIZE_MAX / 2 ? max : SIZE_MAX / 2;
	b->cap = (b->max < SPAWN_FIRST_CAP ? b->max : SPAWN_FIRST_CAP) + 1;
	b->len = 0;
	b->p = malloc(b->cap);
	if (!b->p)
		return -ENOMEM;
	b->p[0] = '\0';
	return 0;
}

/* Keeps what fits under max; when memory runs out, what it has (and no more). */
static void spawn_buf_add(struct spawn_buf *b, const char *data, size_t n)
{
	if (!b->p)
		return;
	if (n > b->max - b->len)
		n = b->max - b->len;
	if (n == 0)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap * 2 > b->len + n + 1 ? b->cap * 2 : b->len + n + 1;
		char *p;

		if (cap > b->max + 1)
			cap = b->max + 1;
		p = realloc(b->p, cap);
		if (!p) {
			b->max = b->len;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* Hands complete lines of stderr to on_err_line; a line past the buffer is cut. */
static void spawn_err_lines(struct spawn_run *r, const char *p, size_t n)
{
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;
		size_t room = sizeof(r->line) - 1 - r->line_len;
		size_t keep = take < room ? take : room;

		memcpy(r->line + r->line_len, p, keep);
		r->line_len += keep;
		if (!nl)
			return;
		r->line[r->line_len] = '\0';
		r->sp->on_err_line(r->sp->arg, r->line);
		r->line_len = 0;
		p = nl + 1;
		n -= take + 1;
	}
}

/* The child's stdin, stdout and stderr, and no other descriptor of ours. */
static int spawn_actions(posix_spawn_file_actions_t *fa, const struct spawn *sp, int in_r,
			 int out_w, int err_w)
{
	int out = sp->out_fd >= 0 ? sp->out_fd : out_w;
	int err = sp->out_fd >= 0 ? sp->out_fd : err_w;
	int ret;

	/* stdout and stderr first: out_fd may be 0, which stdin then replaces */
	ret = posix_spawn_file_actions_adddup2(fa, out, STDOUT_FILENO);
	if (ret == 0)
		ret = posix_spawn_file_actions_adddup2(fa, err, STDERR_FILENO);
	if (ret == 0 && in_r >= 0)
		ret = posix_spawn_file_actions_adddup2(fa, in_r, STDIN_FILENO);
	else if (ret == 0)
		ret = posix_spawn_file_actions_addopen(fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
	/* ours are close-on-exec; this catches any a library opened without it */
	if (ret == 0)
		ret = posix_spawn_file_actions_addclosefrom_np(fa, 3);
#endif
	return ret;
}

/* Its own process group, every signal at its default, none blocked. */
static int spawn_attrs(posix_spawnattr_t *attr)
{
	sigset_t none, all;
	int ret;

	sigemptyset(&none);
	/*
	 * Every bit, not sigfillset: glibc's leaves out its two internal
	 * signals (32 and 33), and posix_spawn then sets those to SIG_IGN in
	 * the child, which the program would keep across its execve.
	 */
	memset(&all, 0xff, sizeof(all));
	ret = posix_spawnattr_setpgroup(attr, 0);
	if (ret == 0)
		ret = posix_spawnattr_setsigmask(attr, &none);
	if (ret == 0)
		ret = posix_spawnattr_setsigdefault(attr, &all);
	if (ret == 0)
		ret = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
						      POSIX_SPAWN_SETSIGDEF);
	return ret;
}

/* Starts the child with the child's ends of the pipes (-1: none).  0 or a negated errno. */
static int spawn_start(struct spawn_run *r, int in_r, int out_w, int err_w)
{
	const struct spawn *sp = r->sp;
	char *const *envp = sp->envp ? sp->envp : environ;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int ret = posix_spawn_file_actions_init(&fa);

	if (ret)
		return -ret;
	ret = posix_spawnattr_init(&attr);
	if (ret) {
		posix_spawn_file_actions_destroy(&fa);
		return -ret;
	}
	ret = spawn_actions(&fa, sp, in_r, out_w, err_w);
	if (ret == 0)
		ret = spawn_attrs(&attr);
	if (ret == 0 && strchr(sp->argv[0], '/'))
		ret = posix_spawn(&r->pid, sp->argv[0], &fa, &attr, sp->argv, envp);
	else if (ret == 0)
		ret = posix_spawnp(&r->pid, sp->argv[0], &fa, &attr, sp->argv, envp);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	return -ret;
}

static void spawn_write_in(struct spawn_run *r)
{
	ssize_t n = write(r->in_w, r->sp->in + r->in_off, r->sp->in_len - r->in_off);

	if (n > 0)
		r->in_off += (size_t)n;
	if (n < 0 && errno == EPIPE)
		r->epipe = true;
	if ((n < 0 && errno != EAGAIN && errno != EINTR) || r->in_off == r->sp->in_len)
		spawn_close(&r->in_w);
}

/* Reads one chunk of stdout or stderr (@fd points at out_r or err_r); closes it at its end. */
static size_t spawn_read(struct spawn_run *r, int *fd)
{
	char chunk[SPAWN_CHUNK];
	ssize_t n = read(*fd, chunk, sizeof(chunk));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		spawn_close(fd);
		return 0;
	}
	if (fd == &r->out_r) {
		spawn_buf_add(&r->out, chunk, (size_t)n);
	} else {
		spawn_buf_add(&r->err, chunk, (size_t)n);
		if (r->sp->on_err_line)
			spawn_err_lines(r, chunk, (size_t)n);
	}
	return (size_t)n;
}

/* After the child ended: what it wrote is in the pipes; read it, not what others go on writing. */
static void spawn_drain(struct spawn_run *r)
{
	int *fds[] = { &r->out_r, &r->err_r };

	for (size_t i = 0; i < 2; i++) {
		size_t total = 0, n = 1;

		while (*fds[i] >= 0 && n > 0 && total < SPAWN_DRAIN_MAX) {
			n = spawn_read(r, fds[i]);
			total += n;
		}
	}
}

/* Without a pidfd: whether the child ended, reaping it. */
static void spawn_look(struct spawn_run *r)
{
	if (r->pidfd < 0 && waitpid(r->pid, &r->status, WNOHANG) == r->pid)
		r->exited = r->reaped = true;
}

/* Feeds and reads the child until it ends or @deadline (ms, 0 = none) passes. */
static void spawn_pump(struct spawn_run *r, long long deadline)
{
	while (!r->exited) {
		struct pollfd pfd[4];
		nfds_t n = 0;
		long long now = spawn_mono_ms();
		int timeout = -1;

		if (deadline && now >= deadline) {
			kill(-r->pid, SIGKILL);
			return;
		}
		if (deadline)
			timeout = (int)(deadline - now);
		if (r->pidfd < 0 && (timeout < 0 || timeout > SPAWN_STEP_MS))
			timeout = SPAWN_STEP_MS;
		if (r->pidfd >= 0)
			pfd[n++] = (struct pollfd){ .fd = r->pidfd, .events = POLLIN };
		if (r->out_r >= 0)
			pfd[n++] = (struct pollfd){ .fd = r->out_r, .events = POLLIN };
		if (r->err_r >= 0)
			pfd[n++] = (struct pollfd){ .fd = r->err_r, .events = POLLIN };
		if (r->in_w >= 0)
			pfd[n++] = (struct pollfd){ .fd = r->in_w, .events = POLLOUT };
		if (poll(pfd, n, timeout) < 0 && errno != EINTR) {
			kill(-r->pid, SIGKILL);
			return;
		}
		for (nfds_t i = 0; i < n; i++) {
			if (!pfd[i].revents)
				continue;
			if (pfd[i].fd == r->pidfd)
				r->exited = true;
			else if (pfd[i].fd == r->in_w)
				spawn_write_in(r);
			else
				spawn_read(r, pfd[i].fd == r->out_r ? &r->out_r : &r->err_r);
		}
		spawn_look(r);
	}
	spawn_drain(r);
}

/* Collects the child's end: 0, or -ECHILD when someone else did. */
static int spawn_reap(struct spawn_run *r)
{
	while (!r->reaped) {
		if (waitpid(r->pid, &r->status, 0) == r->pid)
			r->reaped = true;
		else if (errno != EINTR)
			return -ECHILD;
	}
	return 0;
}

/* Makes the pipes of @r and starts the child; closes the child's ends either way. */
static int spawn_begin(struct spawn_run *r)
{
	const struct spawn *sp = r->sp;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 };
	int *ours[] = { &r->in_w, &r->out_r, &r->err_r };
	int ret = 0;

	if (sp->in)
		ret = spawn_pipe(in);
	if (ret == 0 && sp->out_fd < 0)
		ret = spawn_pipe(out);
	if (ret == 0 && sp->out_fd < 0)
		ret = spawn_pipe(err);
	if (ret == 0)
		ret = spawn_start(r, in[0], out[1], err[1]);
	spawn_close(&in[0]);
	spawn_close(&out[1]);
	spawn_close(&err[1]);
	r->in_w = in[1];
	r->out_r = out[0];
	r->err_r = err[0];
	if (ret < 0)
		return ret;
	for (size_t i = 0; i < 3; i++)
		if (*ours[i] >= 0)
			fcntl(*ours[i], F_SETFL, O_NONBLOCK);
	r->pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0);
	if (r->in_w >= 0 && sp->in_len == 0)
		spawn_close(&r->in_w);
	return 0;
}

static void spawn_run_end(struct spawn_run *r, struct spawn_out *res, int ret)
{
	spawn_close(&r->in_w);
	spawn_close(&r->out_r);
	spawn_close(&r->err_r);
	spawn_close(&r->pidfd);
	if (ret < 0) {
		free(r->out.p);
		free(r->err.p);
		r->out = r->err = (struct spawn_buf){ 0 };
	}
	res->status = ret < 0 ? -1 : r->status;
	res->out = r->out.p;
	res->out_len = r->out.len;
	res->err = r->err.p;
	res->err_len = r->err.len;
}

int spawn_run(const struct spawn *sp, struct spawn_out *res)
{
	struct spawn_run r = { .sp = sp, .in_w = -1, .out_r = -1, .err_r = -1, .pidfd = -1 };
	sigset_t pipe_set, old, pending;
	bool was_pending;
	int ret = 0;

	*res = (struct spawn_out){ .status = -1 };
	if (!sp->argv || !sp->argv[0])
		return -EINVAL;
	if (sp->out_fd < 0 &&
	    (spawn_buf_init(&r.out, sp->out_max) < 0 || spawn_buf_init(&r.err, sp->out_max) < 0)) {
		spawn_run_end(&r, res, -ENOMEM);
		return -ENOMEM;
	}
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	sigpending(&pending);
	was_pending = sigismember(&pending, SIGPIPE);
	ret = spawn_begin(&r);
	if (ret == 0) {
		spawn_pump(&r, sp->timeout_ms > 0 ? spawn_mono_ms() + sp->timeout_ms : 0);
		res->timed_out = !r.exited;
		ret = spawn_reap(&r);
	}
	if (r.line_len && sp->on_err_line) {
		r.line[r.line_len] = '\0';
		sp->on_err_line(sp->arg, r.line);
	}
	if (r.epipe && !was_pending)
		sigtimedwait(&pipe_set, NULL, &(struct timespec){ 0, 0 });
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	spawn_run_end(&r, res, ret);
	return ret;
}

void spawn_out_free(struct spawn_out *res)
{
	if (!res)
		return;
	free(res->out);
	free(res->err);
	res->out = res->err = NULL;
	res->out_len = res->err_len = 0;
}
