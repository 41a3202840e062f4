/*
 * test_exec.c - the local executor, with real processes.
 *
 * Each test gets a scratch folder holding the worker's log, the job's log,
 * the exit file and a working folder, starts workers through
 * exec_local_ops as the scheduler would, and waits for them with a bounded
 * poll loop.  They run as root on Linux: the uid test switches to 65534 and
 * the memory test makes a cgroup (it is skipped, saying why, where none can
 * be made).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "exec.h"
#include "exec_local_int.h"
#include "logcap.h"

struct fx {
	char dir[256];
	char log[320];
	char job_log[320];
	char exit[320];
	char work[320];
	struct executor *ex;
};

static char *const default_env[] = { "PATH=/usr/bin:/bin", "HOME=/", NULL };

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/mlfs-test-exec.XXXXXX");
	if (!mkdtemp(f->dir) || chmod(f->dir, 0755) < 0)
		return -1;
	snprintf(f->log, sizeof(f->log), "%s/worker.log", f->dir);
	snprintf(f->job_log, sizeof(f->job_log), "%s/job.log", f->dir);
	snprintf(f->exit, sizeof(f->exit), "%s/exit", f->dir);
	snprintf(f->work, sizeof(f->work), "%s/work", f->dir);
	if (mkdir(f->work, 0755) < 0)
		return -1;
	if (exec_local_ops.create(&f->ex, NULL) < 0)
		return -1;
	*state = f;
	return 0;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	exec_local_ops.destroy(f->ex);
	nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static struct exec_start fx_req(struct fx *f, const char *command)
{
	struct exec_start w = {
		.job = "testjob", .worker = 1, .attempt = 1, .command = command,
		.envp = default_env, .uid = 0, .gid = 0, .dir = f->work,
		.log_path = f->log, .job_log_path = f->job_log, .exit_path = f->exit,
	};

	return w;
}

static void fx_start(struct fx *f, const struct exec_start *w, struct exec_run *run)
{
	assert_int_equal(exec_local_ops.start(f->ex, w, run), 0);
	assert_true(run->pid > 0);
	assert_true(run->pgid > 1);
	assert_true(run->start_time > 0);
}

/* Polls until the worker ended, for at most @seconds; returns poll's 1 or 0. */
static int fx_wait(struct fx *f, struct exec_run *run, struct exec_result *res, int seconds)
{
	struct timespec pause = { 0, 10 * 1000 * 1000 };
	int i, r = 0;

	for (i = 0; i < seconds * 100 && r == 0; i++) {
		r = exec_local_ops.poll(f->ex, run, res);
		if (r == 0)
			nanosleep(&pause, NULL);
	}
	return r;
}

static void fx_run(struct fx *f, const struct exec_start *w, struct exec_result *res)
{
	struct exec_run run;

	fx_start(f, w, &run);
	assert_int_equal(fx_wait(f, &run, res, 20), 1);
	assert_int_equal(run.pidfd, -1);
}

static char *read_all(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	FILE *fp = fopen(path, "r");
	size_t n;

	if (!fp)
		return NULL;
	fstat(fileno(fp), &st);
	buf = malloc((size_t)st.st_size + 1);
	n = fread(buf, 1, (size_t)st.st_size, fp);
	fclose(fp);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

static void assert_file(const char *path, const char *want)
{
	char *got = read_all(path, NULL);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

/* Waits (at most 10 s) until @path exists and is not empty. */
static void wait_for_file(const char *path)
{
	struct timespec pause = { 0, 10 * 1000 * 1000 };
	struct stat st;
	int i;

	for (i = 0; i < 1000; i++) {
		if (stat(path, &st) == 0 && st.st_size > 0)
			return;
		nanosleep(&pause, NULL);
	}
	fail_msg("%s never appeared", path);
}

static void test_exec_output_reaches_worker_log_and_prefixed_job_log(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "echo out; echo err >&2; printf 'no newline'");
	struct exec_result res;

	w.worker = 2;
	fx_run(f, &w, &res);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 0);
	assert_file(f->log, "out\nerr\nno newline");
	assert_file(f->job_log, "[2] out\n[2] err\n[2] no newline\n");
	assert_file(f->exit, "exited 0\n");
}

static void test_exec_exit_status_is_reported(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "exit 3");
	struct exec_result res;

	memset(&res, 'x', sizeof(res));	/* what a caller's stack may hold */
	fx_run(f, &w, &res);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 3);
	assert_string_equal(res.why, "");	/* no words of its own: the job's reason adds none */
}

static void test_exec_death_by_signal_is_reported(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "kill -USR1 $$");
	struct exec_result res;

	fx_run(f, &w, &res);
	assert_int_equal(res.how, EXEC_SIGNALED);
	assert_int_equal(res.code, SIGUSR1);
}

/* Whether process @pid is gone (or a zombie: this container's pid 1 may not reap). */
static bool process_gone(pid_t pid)
{
	char path[64], state = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fp = fopen(path, "r");
	if (!fp)
		return true;
	if (fscanf(fp, "%*d (%*[^)]) %c", &state) != 1)
		state = 0;
	fclose(fp);
	return state == 'Z' || state == 'X';
}

static void test_exec_sigterm_ends_the_worker_and_its_children(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f,
		"sh -c 'echo $$ > child.pid; while :; do sleep 0.05; done' & sleep 100; wait");
	struct exec_result res;
	struct exec_run run;
	char path[400], *pid;

	fx_start(f, &w, &run);
	snprintf(path, sizeof(path), "%s/child.pid", f->work);
	wait_for_file(path);
	assert_int_equal(exec_local_ops.signal(f->ex, &run, SIGTERM), 0);
	assert_int_equal(fx_wait(f, &run, &res, 10), 1);
	assert_int_equal(res.how, EXEC_SIGNALED);
	assert_int_equal(res.code, SIGTERM);
	/* The background child of the worker is gone too (SIGTERM or the shepherd's sweep). */
	pid = read_all(path, NULL);
	assert_non_null(pid);
	assert_true(process_gone((pid_t)atoi(pid)));
	free(pid);
}

/* The shepherd is outside the worker's group: SIGKILL still gets recorded. */
static void test_exec_sigkill_is_recorded_by_the_shepherd(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "echo up; sleep 100");
	struct exec_result res;
	struct exec_run run;

	fx_start(f, &w, &run);
	wait_for_file(f->log);
	assert_int_equal(exec_local_ops.signal(f->ex, &run, SIGKILL), 0);
	assert_int_equal(fx_wait(f, &run, &res, 10), 1);
	assert_int_equal(res.how, EXEC_SIGNALED);
	assert_int_equal(res.code, SIGKILL);
	/* the group is gone: signalling it again is no error */
	assert_int_equal(exec_local_ops.signal(f->ex, &run, SIGTERM), 0);
}

static void test_exec_signal_refuses_groups_that_are_not_a_worker(void **state)
{
	struct fx *f = *state;
	struct exec_run run = { .pgid = 0 };

	assert_int_equal(exec_local_ops.signal(f->ex, &run, 0), -EINVAL);
	run.pgid = 1;
	assert_int_equal(exec_local_ops.signal(f->ex, &run, 0), -EINVAL);
}

static void test_exec_environment_is_exactly_the_one_given(void **state)
{
	static char *const env[] = { "A=1", "B=two words", "PATH=/usr/bin:/bin", NULL };
	struct fx *f = *state;
	/* what sh was given; sh itself adds PWD for the commands it runs */
	struct exec_start w = fx_req(f, "tr '\\000' '\\n' < /proc/$$/environ | sort;"
				     " env | grep -v '^PWD=' | sort");
	struct exec_result res;

	w.envp = env;
	fx_run(f, &w, &res);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 0);
	assert_file(f->log, "A=1\nB=two words\nPATH=/usr/bin:/bin\n"
		    "A=1\nB=two words\nPATH=/usr/bin:/bin\n");
}

static void test_exec_runs_in_its_folder(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "pwd -P");
	struct exec_result res;
	char want[400];

	fx_run(f, &w, &res);
	snprintf(want, sizeof(want), "%s\n", f->work);
	assert_file(f->log, want);
}

static void test_exec_runs_as_the_given_uid_and_gid(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "id -u; id -g; id -G; touch mine");
	struct exec_result res;
	struct stat st;
	char path[400];

	assert_int_equal(chown(f->work, 65534, 65534), 0);
	w.uid = 65534;
	w.gid = 65534;
	fx_run(f, &w, &res);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 0);
	assert_file(f->log, "65534\n65534\n65534\n");
	assert_file(f->job_log, "[1] 65534\n[1] 65534\n[1] 65534\n");
	snprintf(path, sizeof(path), "%s/mine", f->work);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, 65534);
}

static void test_exec_missing_command_exits_127_with_the_shell_message(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "no-such-command-mlfs");
	struct exec_result res;
	char *log;

	fx_run(f, &w, &res);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 127);
	log = read_all(f->log, NULL);
	assert_non_null(strstr(log, "no-such-command-mlfs"));
	assert_non_null(strstr(log, "not found"));
	free(log);
}

static void test_exec_missing_folder_is_reported_in_the_log(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "true");
	struct exec_result res;
	char dir[400], want[500];

	snprintf(dir, sizeof(dir), "%s/gone", f->dir);
	w.dir = dir;
	fx_run(f, &w, &res);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 127);
	snprintf(want, sizeof(want), "mlfs: cannot enter %s: No such file or directory\n", dir);
	assert_file(f->log, want);
}

static void test_exec_adopt_of_a_running_worker_then_poll_reports_its_exit(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "while [ ! -e go ]; do sleep 0.02; done; exit 4");
	struct exec_result res;
	struct exec_run run, saved;
	char path[400];
	int fd;

	fx_start(f, &w, &run);
	saved = run;
	close(run.pidfd);		/* the daemon that started it is gone */
	saved.pidfd = 9999;		/* a stale number, as persisted */
	assert_int_equal(exec_local_ops.adopt(f->ex, &saved, &res), 0);
	assert_true(saved.pidfd >= 0);
	assert_int_equal(exec_local_ops.poll(f->ex, &saved, &res), 0);
	snprintf(path, sizeof(path), "%s/go", f->work);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(fx_wait(f, &saved, &res, 10), 1);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 4);
}

static void test_exec_adopt_of_a_finished_worker_reads_its_exit_file(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "exit 5");
	struct exec_result res;
	struct exec_run run, saved;

	fx_start(f, &w, &run);
	saved = run;
	saved.pidfd = -1;
	assert_int_equal(fx_wait(f, &run, &res, 10), 1);
	res.how = EXEC_LOST;
	assert_int_equal(exec_local_ops.adopt(f->ex, &saved, &res), 1);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 5);
	assert_int_equal(saved.pidfd, -1);
}

static void test_exec_adopt_without_exit_file_is_lost(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "exit 5");
	struct exec_result res;
	struct exec_run run, saved;

	fx_start(f, &w, &run);
	saved = run;
	assert_int_equal(fx_wait(f, &run, &res, 10), 1);
	assert_int_equal(unlink(f->exit), 0);
	res.how = EXEC_EXITED;
	assert_int_equal(exec_local_ops.adopt(f->ex, &saved, &res), 1);
	assert_int_equal(res.how, EXEC_LOST);
}

/* A live process under the persisted pid but another start time is not ours. */
static void test_exec_adopt_does_not_take_a_reused_pid(void **state)
{
	struct fx *f = *state;
	struct exec_run run = { .pid = getpid(), .pgid = 0, .pidfd = -1 };
	struct exec_result res;
	FILE *fp;

	run.start_time = 1;
	snprintf(run.exit_path, sizeof(run.exit_path), "%s", f->exit);
	fp = fopen(f->exit, "w");
	fputs("exited 7\n", fp);
	fclose(fp);
	assert_int_equal(exec_local_ops.adopt(f->ex, &run, &res), 1);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 7);
}

static void test_exec_memory_limit_kill_is_oom(void **state)
{
	struct fx *f = *state;
	/* tail keeps a line that never ends: 600 MB, all of it touched */
	struct exec_start w = fx_req(f, "head -c 600M /dev/zero | tail");
	struct exec_result res;
	struct exec_run run;
	char cgroup[256];
	struct stat st;

	w.memory_limit = 32ULL << 20;
	fx_start(f, &w, &run);
	if (!run.cgroup[0]) {
		exec_local_ops.signal(f->ex, &run, SIGKILL);
		fx_wait(f, &run, &res, 10);
		print_message("skipped: no memory cgroup could be made here\n");
		skip();
	}
	snprintf(cgroup, sizeof(cgroup), "%s", run.cgroup);
	assert_int_equal(stat(cgroup, &st), 0);
	assert_int_equal(fx_wait(f, &run, &res, 20), 1);
	assert_int_equal(res.how, EXEC_OOM);
	assert_file(f->exit, "oom\n");
	assert_string_equal(run.cgroup, "");
	assert_int_equal(stat(cgroup, &st), -1);
}

static void test_exec_small_worker_under_a_memory_limit_exits_normally(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "head -c 1M /dev/zero | wc -c");
	struct exec_result res;

	w.memory_limit = 64ULL << 20;
	fx_run(f, &w, &res);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 0);
	assert_file(f->log, "1048576\n");
}

static void test_exec_large_output_arrives_complete(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "seq 1 800000");
	struct exec_result res;
	char *want = malloc(8 * 800000), *want_job = malloc(12 * 800000);
	size_t len = 0, job_len = 0, got_len;
	char *got;
	int i;

	for (i = 1; i <= 800000; i++) {
		len += (size_t)sprintf(want + len, "%d\n", i);
		job_len += (size_t)sprintf(want_job + job_len, "[1] %d\n", i);
	}
	fx_run(f, &w, &res);
	assert_int_equal(res.code, 0);
	got = read_all(f->log, &got_len);
	assert_int_equal(got_len, len);
	assert_memory_equal(got, want, len);
	free(got);
	got = read_all(f->job_log, &got_len);
	assert_int_equal(got_len, job_len);
	assert_memory_equal(got, want_job, job_len);
	free(got);
	free(want);
	free(want_job);
}

static void test_exec_long_line_is_split_in_the_job_log(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "head -c 200000 /dev/zero | tr '\\000' x");
	size_t sizes[] = { LOGCAP_LINE_MAX, LOGCAP_LINE_MAX, LOGCAP_LINE_MAX,
			   200000 - 3 * LOGCAP_LINE_MAX };
	struct exec_result res;
	size_t len, i, k;
	char *got, *p;

	fx_run(f, &w, &res);
	got = read_all(f->log, &len);
	assert_int_equal(len, 200000);
	free(got);
	got = read_all(f->job_log, &len);
	p = got;
	for (i = 0; i < 4; i++) {
		assert_memory_equal(p, "[1] ", 4);
		p += 4;
		for (k = 0; k < sizes[i]; k++)
			assert_true(p[k] == 'x');
		p += sizes[i];
		assert_true(*p++ == '\n');
	}
	assert_int_equal((size_t)(p - got), len);
	free(got);
}

/* Checks one job log line, "[W] wW N ppp...p", and counts it for W. */
static void check_line(const char *line, size_t len, int next[3], size_t pad)
{
	int worker, n, used = 0;
	size_t k;

	assert_int_equal(sscanf(line, "[%d] w%*d %d %n", &worker, &n, &used), 2);
	assert_true(worker == 1 || worker == 2);
	assert_int_equal(line[5], '0' + worker);
	assert_int_equal(n, next[worker]);
	next[worker]++;
	assert_int_equal(len - (size_t)used, pad);
	for (k = (size_t)used; k < len; k++)
		assert_true(line[k] == 'p');
}

static void test_exec_concurrent_workers_never_interleave_lines(void **state)
{
	struct fx *f = *state;
	const char *cmd = "p=$(head -c 3000 /dev/zero | tr '\\000' p); i=0;"
		" while [ $i -lt 1500 ]; do echo \"w$W $i $p\"; i=$((i+1)); done";
	static char *const env1[] = { "PATH=/usr/bin:/bin", "W=1", NULL };
	static char *const env2[] = { "PATH=/usr/bin:/bin", "W=2", NULL };
	struct exec_start w1 = fx_req(f, cmd), w2 = fx_req(f, cmd);
	struct exec_run r1, r2;
	struct exec_result res;
	char exit2[400], log2[400];
	int next[3] = { 0, 0, 0 };
	char *got, *line, *nl;

	snprintf(exit2, sizeof(exit2), "%s.2", f->exit);
	snprintf(log2, sizeof(log2), "%s.2", f->log);
	w1.envp = env1;
	w2.envp = env2;
	w2.worker = 2;
	w2.exit_path = exit2;
	w2.log_path = log2;
	fx_start(f, &w1, &r1);
	fx_start(f, &w2, &r2);
	assert_int_equal(fx_wait(f, &r1, &res, 30), 1);
	assert_int_equal(res.code, 0);
	assert_int_equal(fx_wait(f, &r2, &res, 30), 1);
	assert_int_equal(res.code, 0);
	got = read_all(f->job_log, NULL);
	for (line = got; (nl = strchr(line, '\n')); line = nl + 1)
		check_line(line, (size_t)(nl - line), next, 3000);
	assert_int_equal(*line, '\0');
	assert_int_equal(next[1], 1500);
	assert_int_equal(next[2], 1500);
	free(got);
}

/* A process the worker leaves behind neither keeps it running nor survives it. */
static void test_exec_leftover_background_process_is_ended_with_the_worker(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "sleep 100 & echo $! > bg.pid; exit 6");
	struct exec_result res;
	char path[400], *text;
	pid_t bg;

	fx_run(f, &w, &res);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 6);
	snprintf(path, sizeof(path), "%s/bg.pid", f->work);
	text = read_all(path, NULL);
	assert_non_null(text);
	bg = (pid_t)atoi(text);
	free(text);
	assert_true(bg > 1);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)bg);
	text = read_all(path, NULL);
	/* gone, or a zombie its new parent has not reaped yet */
	assert_true(!text || strstr(text, ") Z ") || !strstr(text, "(sleep)"));
	free(text);
}

/* An fd the daemon leaked (no O_CLOEXEC) is not held by the shepherd. */
static void test_exec_shepherd_holds_no_daemon_fds(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "sleep 100");
	struct pollfd pfd = { .events = POLLIN };
	struct exec_result res;
	struct exec_run run;
	int fds[2];
	char c;

	assert_int_equal(pipe(fds), 0);
	fx_start(f, &w, &run);
	close(fds[1]);
	pfd.fd = fds[0];
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	assert_int_equal(read(fds[0], &c, 1), 0);
	close(fds[0]);
	assert_int_equal(exec_local_ops.signal(f->ex, &run, SIGKILL), 0);
	assert_int_equal(fx_wait(f, &run, &res, 10), 1);
	assert_int_equal(res.how, EXEC_SIGNALED);
}

static atomic_bool churn_stop;

static void *churn(void *arg)
{
	FILE *null = fopen("/dev/null", "w");

	(void)arg;
	while (!atomic_load(&churn_stop)) {
		void *p = malloc(1000);

		fprintf(null, "%p\n", p);
		free(p);
	}
	fclose(null);
	return NULL;
}

/*
 * The daemon is multi-threaded: a shepherd or worker that took a lock
 * another thread held at fork() (malloc's, stdio's) would hang.
 */
static void test_exec_start_is_safe_while_other_threads_allocate(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "echo ok");
	struct exec_result res;
	pthread_t threads[2];
	int i;

	atomic_store(&churn_stop, false);
	for (i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&threads[i], NULL, churn, NULL), 0);
	for (i = 0; i < 30; i++) {
		fx_run(f, &w, &res);
		assert_int_equal(res.how, EXEC_EXITED);
		assert_int_equal(res.code, 0);
	}
	atomic_store(&churn_stop, true);
	for (i = 0; i < 2; i++)
		pthread_join(threads[i], NULL);
	assert_int_equal(unlink(f->exit), 0);
}

static atomic_uint fork_handlers_run;

static void count_fork_handler(void)
{
	atomic_fetch_add(&fork_handlers_run, 1);
}

/*
 * Starting a worker runs no fork handlers, so it takes none of the locks
 * glibc's fork() takes around them (every malloc arena, the stdio list):
 * the daemon's FUSE threads go on allocating while a worker is launched.
 */
static void test_exec_start_runs_no_fork_handlers(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "exit 0");
	struct exec_result res;

	assert_int_equal(pthread_atfork(count_fork_handler, NULL, NULL), 0);
	atomic_store(&fork_handlers_run, 0);
	fx_run(f, &w, &res);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 0);
	assert_int_equal(atomic_load(&fork_handlers_run), 0);
}

static void *no_op(void *arg)
{
	return arg;
}

static void *thread_churn(void *arg)
{
	(void)arg;
	while (!atomic_load(&churn_stop)) {
		pthread_t t;

		if (pthread_create(&t, NULL, no_op, NULL) == 0)
			pthread_join(t, NULL);
	}
	return NULL;
}

/*
 * The shepherd is a copy of the daemon made without glibc's fork handlers,
 * so glibc's view of the daemon's threads is frozen in it, perhaps in the
 * middle of a thread's creation; glibc's setuid() would wait on those
 * threads forever (a quarter of such workers hung here).  A worker that
 * hangs ends the test with SIGALRM.
 */
static void test_exec_uid_switch_while_threads_come_and_go(void **state)
{
	struct fx *f = *state;
	struct exec_start w = fx_req(f, "exit 0");
	struct exec_result res;
	pthread_t churner;
	int i;

#ifdef __SANITIZE_THREAD__
	/* ThreadSanitizer's fork of a process whose threads come and go may hang the child */
	skip();
#endif
	assert_int_equal(chown(f->work, 65534, 65534), 0);
	w.uid = 65534;
	w.gid = 65534;
	atomic_store(&churn_stop, false);
	assert_int_equal(pthread_create(&churner, NULL, thread_churn, NULL), 0);
	alarm(60);
	for (i = 0; i < 30; i++) {
		fx_run(f, &w, &res);
		assert_int_equal(res.how, EXEC_EXITED);
		assert_int_equal(res.code, 0);
	}
	alarm(0);
	atomic_store(&churn_stop, true);
	pthread_join(churner, NULL);
}

static void test_exec_parse_stat_counts_fields_after_the_last_paren(void **state)
{
	const char *text = "42 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18"
		" 987654 19 20\n";
	unsigned long long start = 0;
	char st = 0;

	(void)state;
	assert_int_equal(exec_local_parse_stat(text, &st, &start), 0);
	assert_int_equal(st, 'S');
	assert_int_equal(start, 987654);
	assert_int_equal(exec_local_parse_stat("42 (x) S 1 2", &st, &start), -EINVAL);
	assert_int_equal(exec_local_parse_stat("42 x S", &st, &start), -EINVAL);
}

static void test_exec_parse_exit_reads_each_outcome(void **state)
{
	struct exec_result res;

	(void)state;
	exec_local_parse_exit("exited 3\n", &res);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 3);
	exec_local_parse_exit("signaled 15\n", &res);
	assert_int_equal(res.how, EXEC_SIGNALED);
	assert_int_equal(res.code, 15);
	exec_local_parse_exit("oom\n", &res);
	assert_int_equal(res.how, EXEC_OOM);
	exec_local_parse_exit("exited\n", &res);
	assert_int_equal(res.how, EXEC_LOST);
	exec_local_parse_exit("garbage", &res);
	assert_int_equal(res.how, EXEC_LOST);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_exec_output_reaches_worker_log_and_prefixed_job_log),
		T(test_exec_exit_status_is_reported),
		T(test_exec_death_by_signal_is_reported),
		T(test_exec_sigterm_ends_the_worker_and_its_children),
		T(test_exec_sigkill_is_recorded_by_the_shepherd),
		T(test_exec_signal_refuses_groups_that_are_not_a_worker),
		T(test_exec_environment_is_exactly_the_one_given),
		T(test_exec_runs_in_its_folder),
		T(test_exec_runs_as_the_given_uid_and_gid),
		T(test_exec_missing_command_exits_127_with_the_shell_message),
		T(test_exec_missing_folder_is_reported_in_the_log),
		T(test_exec_adopt_of_a_running_worker_then_poll_reports_its_exit),
		T(test_exec_adopt_of_a_finished_worker_reads_its_exit_file),
		T(test_exec_adopt_without_exit_file_is_lost),
		T(test_exec_adopt_does_not_take_a_reused_pid),
		T(test_exec_memory_limit_kill_is_oom),
		T(test_exec_small_worker_under_a_memory_limit_exits_normally),
		T(test_exec_large_output_arrives_complete),
		T(test_exec_long_line_is_split_in_the_job_log),
		T(test_exec_concurrent_workers_never_interleave_lines),
		T(test_exec_leftover_background_process_is_ended_with_the_worker),
		T(test_exec_shepherd_holds_no_daemon_fds),
		T(test_exec_start_is_safe_while_other_threads_allocate),
		T(test_exec_start_runs_no_fork_handlers),
		T(test_exec_uid_switch_while_threads_come_and_go),
		cmocka_unit_test(test_exec_parse_stat_counts_fields_after_the_last_paren),
		cmocka_unit_test(test_exec_parse_exit_reads_each_outcome),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
