/*
 * spawn.h - run a program to its end: its input given, its output captured,
 * a deadline, its exit status.
 *
 * The one way mlfs's daemon and commands start a program and wait for it
 * (Slurm's tools, fusermount3).  Safe in a multi-threaded process: the
 * child is made with posix_spawn, never fork().  Not for the local
 * executor's shepherd and worker, which run after a fork and may only make
 * async-signal-safe calls (exec_local.c).
 *
 * The child gets its own process group, every signal at its default
 * disposition, an empty signal mask, and no descriptor of ours above 2.
 */
#ifndef MLFS_SPAWN_H
#define MLFS_SPAWN_H

/*
 * This file has the name of POSIX's <spawn.h>, and include/ is searched
 * before the system's folders: the system's is included from here, so that
 * <spawn.h> anywhere in the tree still declares posix_spawn.
 */
#include_next <spawn.h>
#include <stdbool.h>
#include <stddef.h>

/* on_err_line gets a longer line of stderr cut to its first SPAWN_LINE_MAX - 1 bytes. */
#define SPAWN_LINE_MAX 4096

struct spawn {
	char *const *argv;		/* argv[0]: a path, or a name looked up in PATH */
	char *const *envp;		/* NULL: this process's environment */
	const char *in;			/* written to its stdin, then closed; NULL: stdin is /dev/null */
	size_t in_len;
	int timeout_ms;			/* past it the child's process group gets SIGKILL; <= 0: none */
	size_t out_max;			/* bytes of stdout kept, and of stderr (the rest read and dropped) */
	int out_fd;			/* >= 0: stdout and stderr go to this fd instead of being captured */
	/* optional: called with each line of stderr (without its newline) as it comes */
	void (*on_err_line)(void *arg, const char *line);
	void *arg;
};

struct spawn_out {
	int status;			/* wait status; -1 when it did not run */
	bool timed_out;
	char *out;			/* NUL-terminated, malloc'd; NULL with out_fd */
	size_t out_len;
	char *err;
	size_t err_len;
};

/*
 * Runs it to its end.  0, or a negated errno when it could not start (@res->status -1).
 *
 * A program that does not exist (a path that is not there, a name not on
 * PATH) is -ENOENT, never a status of 127.  The run ends when the child
 * has exited: what it wrote by then is read, and a process it left behind
 * holding its output does not hold up the caller.  Past the deadline its
 * whole process group gets SIGKILL and @res->timed_out is set; the status
 * is then that of the killed child.  -ECHILD (status -1) when its end could
 * not be collected (SIGCHLD ignored, or another thread reaped it).
 *
 * on_err_line is called from this thread, with stderr only when it is
 * captured (out_fd < 0); an unfinished last line is passed at the end.
 * @res is always filled; free it with spawn_out_free, also after an error.
 */
int spawn_run(const struct spawn *sp, struct spawn_out *res);
void spawn_out_free(struct spawn_out *res);

#endif
