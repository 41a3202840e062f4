/*
 * test_sched.c - unit tests of the scheduler (sched/sched*.c) behind the
 * fake executor (tests/fakes/exec_fake.c), and behind the fake cluster
 * executor (tests/fakes/exec_fake_cluster.c), both found by name in the
 * executor registry as the real ones are.
 *
 * Each test gets a fresh state_dir under /tmp and a node it describes in
 * [node] text; the scheduler runs its real thread, journal and status.json,
 * and only the executor is fake.  A test "ends" a worker through the fake,
 * whose pidfd (an eventfd) wakes the scheduler's thread, and waits for the
 * effect with WAIT_UNTIL: up to 5 s in 10 ms steps, never a bare sleep.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>

#include "backend.h"
#include "config.h"
#include "exec_fake.h"
#include "exec_fake_cluster.h"
#include "scheduler.h"
#include "seed_specs.h"
#include "sched_int.h"

/* ---- the fixture ---- */

#define MAX_FINALS 64

struct fx {
	char dir[64];
	struct mlfs_config *cfg;
	struct sched *s;
	pthread_mutex_t lock;		/* guards finals: the scheduler's thread adds */
	char *finals[MAX_FINALS];
	size_t n_finals;
};

/* 2 x A100, 16 CPUs, 64 GB, price 1.5, CUDA 12.4 */
#define NODE_2_A100 \
	"gpus = 2\ngpu_type = A100\ncpus = 16\nmemory_gb = 64\nprice = 1.5\ncuda_version = 12.4\n"

#define UID 1234
#define GID 5678

/* A one-worker job: @name, the body of "resources", then top-level fields @extra (", ..."). */
#define JOBX(name, res, extra) \
	"{\"name\": \"" name "\", \"resources\": {" res "}" extra \
	", \"workers\": [{\"command\": \"x\"}]}"
#define JOB(name, res) JOBX(name, res, "")
#define GPU_JOB(name) JOB(name, "\"gpu_types\": [\"A100\"], \"gpu_count\": 1")

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Polls @cond every 10 ms for up to 5 s, then asserts it. */
#define WAIT_UNTIL(cond)                                               \
	do {                                                           \
		long long deadline_ = now_ms() + 5000;                 \
		while (!(cond) && now_ms() < deadline_)                \
			sleep_ms(10);                                  \
		assert_true(cond);                                     \
	} while (0)

static void on_final(void *arg, const char *name)
{
	struct fx *fx = arg;

	pthread_mutex_lock(&fx->lock);
	if (fx->n_finals < MAX_FINALS)
		fx->finals[fx->n_finals++] = strdup(name);
	pthread_mutex_unlock(&fx->lock);
}

static size_t finals_of(struct fx *fx, const char *name)
{
	size_t n = 0;

	pthread_mutex_lock(&fx->lock);
	for (size_t i = 0; i < fx->n_finals; i++)
		n += strcmp(fx->finals[i], name) == 0;
	pthread_mutex_unlock(&fx->lock);
	return n;
}

static size_t finals_count(struct fx *fx)
{
	size_t n;

	pthread_mutex_lock(&fx->lock);
	n = fx->n_finals;
	pthread_mutex_unlock(&fx->lock);
	return n;
}

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));

	assert_non_null(fx);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_sched.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	pthread_mutex_init(&fx->lock, NULL);
	exec_fake_reset();
	exec_fake_cluster_reset();
	*state = fx;
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	sched_destroy(fx->s);
	config_free(fx->cfg);
	exec_fake_reset();
	exec_fake_cluster_reset();
	nftw(fx->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	for (size_t i = 0; i < fx->n_finals; i++)
		free(fx->finals[i]);
	pthread_mutex_destroy(&fx->lock);
	free(fx);
	return 0;
}

/*
 * Reads a config with the fixture's folders, @executor (a fake the
 * registry knows) and @node as [node], and starts the scheduler.
 */
static void fx_start_on(struct fx *fx, const char *executor, const char *node)
{
	struct diag d;
	char *text;

	assert_true(asprintf(&text, "[mlfs]\nstate_dir = %s/state\ncache_dir = %s/cache\n"
			     "executor = %s\n[node]\n%s", fx->dir, fx->dir, executor, node) > 0);
	diag_init(&d);
	if (config_parse(&fx->cfg, "test.conf", text, strlen(text), backend_config_forms(), &d) != 0)
		diag_print(&d, stderr);
	diag_free(&d);
	free(text);
	assert_non_null(fx->cfg);
	assert_int_equal(sched_create(&fx->s, fx->cfg, on_final, fx), 0);
}

static void fx_start(struct fx *fx, const char *node)
{
	fx_start_on(fx, "fake", node);
}

/* A restart of the daemon: the same config and state_dir, a new scheduler. */
static void fx_restart(struct fx *fx)
{
	sched_destroy(fx->s);
	fx->s = NULL;
	assert_int_equal(sched_create(&fx->s, fx->cfg, on_final, fx), 0);
}

static int submit_as(struct fx *fx, const char *json, uid_t uid, gid_t gid)
{
	char *name = NULL;
	struct diag d;
	int ret;

	diag_init(&d);
	ret = sched_submit(fx->s, "job.json", json, strlen(json), uid, gid, &name, &d);
	if (ret != 0 && ret != -EEXIST)
		diag_print(&d, stderr);
	diag_free(&d);
	free(name);
	return ret;
}

static void submit(struct fx *fx, const char *json)
{
	assert_int_equal(submit_as(fx, json, UID, GID), 0);
}

/* A status file as text without its final newline; NULL when it cannot be rendered. */
static char *render(struct fx *fx, const char *name, unsigned int worker, const char *what)
{
	char *buf = NULL;
	size_t len;

	if (sched_render(fx->s, name, worker, what, &buf, &len) != 0)
		return NULL;
	if (len && buf[len - 1] == '\n')
		buf[len - 1] = '\0';
	return buf;
}

static bool render_is(struct fx *fx, const char *name, unsigned int worker, const char *what,
		      const char *want)
{
	char *text = render(fx, name, worker, what);
	bool ok = text && strcmp(text, want) == 0;

	if (!ok && getenv("TEST_SCHED_VERBOSE"))
		fprintf(stderr, "%s/%u/%s: \"%s\", want \"%s\"\n", name, worker, what,
			text ? text : "(none)", want);
	free(text);
	return ok;
}

static bool render_has(struct fx *fx, const char *name, unsigned int worker, const char *what,
		       const char *part)
{
	char *text = render(fx, name, worker, what);
	bool ok = text && strstr(text, part);

	free(text);
	return ok;
}

static bool state_is(struct fx *fx, const char *name, const char *state)
{
	return render_is(fx, name, 0, "state", state);
}

static bool reason_has(struct fx *fx, const char *name, const char *part)
{
	return render_has(fx, name, 0, "reason", part);
}

static bool reason_starts(struct fx *fx, const char *name, const char *prefix)
{
	char *text = render(fx, name, 0, "reason");
	bool ok = text && strncmp(text, prefix, strlen(prefix)) == 0;

	free(text);
	return ok;
}

static bool events_have(struct fx *fx, const char *name, const char *part)
{
	char *path = NULL, *text = NULL;
	size_t cap = 0;
	bool ok = false;
	FILE *f;

	if (sched_file_path(fx->s, name, 0, "events", &path) != 0)
		return false;
	f = fopen(path, "re");
	if (f) {
		ok = getdelim(&text, &cap, '\0', f) > 0 && strstr(text, part);
		fclose(f);
	}
	free(text);
	free(path);
	return ok;
}

/*
 * Whether @job's worker runs and its run (pid, start time) is in the
 * status.json a restart adopts from: the job shows RUNNING from its
 * placement, a moment before the executor's start, and its run is written
 * under the same lock hold that makes it visible here.
 */
static bool running_on_disk(struct fx *fx, const char *job)
{
	return render_has(fx, job, 0, "status.json", "\"run\"");
}

static bool started(const char *job, unsigned int worker, unsigned int attempt)
{
	struct exec_fake_run r;

	return exec_fake_find(job, worker, attempt, &r) == 0;
}

/* The fake's record of the latest attempt of worker 1 of @job, which must exist. */
static struct exec_fake_run run_of(const char *job)
{
	struct exec_fake_run r;

	assert_int_equal(exec_fake_find(job, 1, 0, &r), 0);
	return r;
}

static bool got_signal(const char *job, int sig)
{
	struct exec_fake_run r;

	return exec_fake_find(job, 1, 0, &r) == 0 && exec_fake_got_signal(&r, sig);
}

/*
 * Ends @worker of @job.  A job shows RUNNING from the moment its worker is
 * placed, a moment before the executor's start runs: wait for the start.
 */
static void end_nth_worker(const char *job, unsigned int worker, enum exec_end how, int code)
{
	struct timespec pause = { 0, 10 * 1000 * 1000 };
	int ret = -ENOENT;

	for (int i = 0; i < 500 && ret == -ENOENT; i++) {
		ret = exec_fake_end(job, worker, how, code);
		if (ret == -ENOENT)
			nanosleep(&pause, NULL);
	}
	assert_int_equal(ret, 0);
}

static void end_worker(const char *job, enum exec_end how, int code)
{
	end_nth_worker(job, 1, how, code);
}

/* ---- placement ---- */

static void test_sched_two_gpus_start_two_jobs_on_distinct_gpus_and_queue_the_third(void **state)
{
	struct fx *fx = *state;
	struct exec_fake_run a, b;

	fx_start(fx, NODE_2_A100);
	submit(fx, GPU_JOB("a"));
	submit(fx, GPU_JOB("b"));
	submit(fx, GPU_JOB("c"));
	WAIT_UNTIL(started("a", 1, 1) && started("b", 1, 1));
	WAIT_UNTIL(render_is(fx, "c", 0, "reason",
			     "waiting for GPUs: needs 1 x A100, node has 0 x A100 free"));
	assert_true(state_is(fx, "c", "QUEUED"));
	assert_false(started("c", 1, 1));
	a = run_of("a");
	b = run_of("b");
	assert_string_equal(exec_fake_getenv(&a, "CUDA_VISIBLE_DEVICES"), "0");
	assert_string_equal(exec_fake_getenv(&b, "CUDA_VISIBLE_DEVICES"), "1");
	WAIT_UNTIL(state_is(fx, "a", "RUNNING") && state_is(fx, "b", "RUNNING"));
	assert_true(render_is(fx, "a", 1, "state", "RUNNING"));
	assert_int_equal(exec_fake_calls(EXEC_FAKE_START), 2);
}

static void test_sched_ended_worker_frees_its_gpu_for_the_waiting_job(void **state)
{
	struct fx *fx = *state;
	struct exec_fake_run a, c;

	fx_start(fx, NODE_2_A100);
	submit(fx, GPU_JOB("a"));
	submit(fx, GPU_JOB("b"));
	submit(fx, GPU_JOB("c"));
	WAIT_UNTIL(started("a", 1, 1) && started("b", 1, 1));
	WAIT_UNTIL(state_is(fx, "c", "QUEUED") && reason_starts(fx, "c", "waiting for GPUs"));
	a = run_of("a");
	end_worker("a", EXEC_EXITED, 0);
	WAIT_UNTIL(started("c", 1, 1));
	c = run_of("c");
	assert_string_equal(exec_fake_getenv(&c, "CUDA_VISIBLE_DEVICES"),
			    exec_fake_getenv(&a, "CUDA_VISIBLE_DEVICES"));
	WAIT_UNTIL(state_is(fx, "a", "SUCCEEDED") && state_is(fx, "c", "RUNNING"));
	assert_true(render_is(fx, "a", 1, "exit_code", "0"));
	assert_int_equal(exec_fake_n_started(), 3);
}

static void test_sched_gpu_type_the_node_lacks_is_never_satisfiable(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, JOB("v", "\"gpu_types\": [\"V100\"], \"gpu_count\": 1"));
	WAIT_UNTIL(reason_starts(fx, "v", "never satisfiable here"));
	assert_true(state_is(fx, "v", "QUEUED"));
	assert_true(reason_has(fx, "v", "V100"));
	assert_int_equal(exec_fake_calls(EXEC_FAKE_START), 0);
}

static void test_sched_more_gpus_than_the_node_has_is_never_satisfiable(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, JOB("four", "\"gpu_types\": [\"A100\"], \"gpu_count\": 4"));
	WAIT_UNTIL(render_is(fx, "four", 0, "reason",
			     "never satisfiable here: needs 4 GPU(s) per worker, node has 2"));
	assert_true(state_is(fx, "four", "QUEUED"));
	assert_int_equal(exec_fake_calls(EXEC_FAKE_START), 0);
}

static void test_sched_more_cpus_than_the_node_has_is_never_satisfiable(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, JOB("cpu", "\"cpu_count\": 32"));
	WAIT_UNTIL(render_is(fx, "cpu", 0, "reason",
			     "never satisfiable here: needs 32 CPUs, node has 16"));
	assert_true(state_is(fx, "cpu", "QUEUED"));
	assert_int_equal(exec_fake_calls(EXEC_FAKE_START), 0);
}

static void test_sched_cpus_are_accounted_between_running_jobs(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, "gpus = 2\ngpu_type = A100\ncpus = 6\nmemory_gb = 64\nprice = 1\ncuda_version = 12.4\n");
	submit(fx, JOB("c1", "\"cpu_count\": 4"));
	submit(fx, JOB("c2", "\"cpu_count\": 4"));
	WAIT_UNTIL(started("c1", 1, 1));
	WAIT_UNTIL(render_is(fx, "c2", 0, "reason", "waiting for CPUs: needs 4, 2 of 6 free"));
	assert_true(state_is(fx, "c2", "QUEUED"));
	end_worker("c1", EXEC_EXITED, 0);
	WAIT_UNTIL(started("c2", 1, 1));
}

static void test_sched_memory_is_accounted_and_passed_as_the_limit(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, "gpus = 0\ncpus = 16\nmemory_gb = 10\ncuda_version = 12.4\n");
	submit(fx, JOB("m1", "\"cpu_count\": 4, \"memory_gb\": 6"));
	submit(fx, JOB("m2", "\"cpu_count\": 4, \"memory_gb\": 6"));
	submit(fx, JOB("huge", "\"cpu_count\": 4, \"memory_gb\": 11"));
	WAIT_UNTIL(started("m1", 1, 1));
	WAIT_UNTIL(render_is(fx, "m2", 0, "reason",
			     "waiting for memory: needs 6 GB, 4.0 of 10.0 GB free"));
	WAIT_UNTIL(reason_starts(fx, "huge", "never satisfiable here: needs 11 GB of memory"));
	assert_true(run_of("m1").memory_limit == 6ULL << 30);
	end_worker("m1", EXEC_EXITED, 0);
	WAIT_UNTIL(started("m2", 1, 1));
}

static void test_sched_max_price_below_the_node_price_is_never_satisfiable(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, JOB("cheap", "\"gpu_count\": 1, \"max_price\": 1"));
	submit(fx, JOB("ok", "\"gpu_count\": 1, \"max_price\": 2"));
	WAIT_UNTIL(reason_starts(fx, "cheap", "never satisfiable here: max_price 1 is below"));
	WAIT_UNTIL(started("ok", 1, 1));
	assert_false(started("cheap", 1, 1));
}

static void test_sched_min_cuda_version_is_compared_numerically(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);	/* CUDA 12.4 */
	submit(fx, JOB("new", "\"gpu_count\": 1, \"min_cuda_version\": \"12.10\""));
	submit(fx, JOB("old", "\"gpu_count\": 1, \"min_cuda_version\": \"12.3\""));
	WAIT_UNTIL(render_is(fx, "new", 0, "reason",
			     "never satisfiable here: needs CUDA 12.10 or newer, node has 12.4"));
	WAIT_UNTIL(started("old", 1, 1));
	assert_false(started("new", 1, 1));
}

/* ---- ends, retries ---- */

static void test_sched_retry_count_2_makes_three_attempts_then_fails(void **state)
{
	struct fx *fx = *state;
	json_t *st, *att;
	char *text;

	fx_start(fx, NODE_2_A100);
	submit(fx, JOBX("r", "\"gpu_count\": 1", ", \"retry_count\": 2"));
	for (unsigned int a = 1; a <= 3; a++) {
		WAIT_UNTIL(started("r", 1, a));
		end_worker("r", EXEC_EXITED, 3);
	}
	WAIT_UNTIL(state_is(fx, "r", "FAILED"));
	assert_int_equal(exec_fake_n_started(), 3);
	assert_true(render_is(fx, "r", 1, "exit_code", "3"));
	assert_true(reason_has(fx, "r", "exited 3 after 3 attempt(s)"));
	text = render(fx, "r", 0, "status.json");
	assert_non_null(text);
	st = json_loads(text, 0, NULL);
	assert_non_null(st);
	att = json_object_get(json_array_get(json_object_get(st, "workers"), 0), "attempts");
	assert_int_equal(json_array_size(att), 3);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(json_integer_value(json_object_get(json_array_get(att, i), "attempt")), i + 1);
		assert_string_equal(json_string_value(json_object_get(json_array_get(att, i), "end")),
				    "exited 3");
	}
	json_decref(st);
	free(text);
}

static void test_sched_oom_is_not_retried(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, JOBX("o", "\"gpu_count\": 1, \"memory_gb\": 2", ", \"retry_count\": 3"));
	WAIT_UNTIL(started("o", 1, 1));
	end_worker("o", EXEC_OOM, 0);
	WAIT_UNTIL(state_is(fx, "o", "FAILED"));
	assert_true(reason_has(fx, "o", "oom"));
	assert_true(events_have(fx, "o", "killed for memory, not retried"));
	assert_int_equal(exec_fake_n_started(), 1);
	assert_true(render_is(fx, "o", 1, "exit_code", "137"));
}

static void test_sched_exit_0_succeeds_and_frees_the_gpu(void **state)
{
	struct fx *fx = *state;
	char *node;

	fx_start(fx, NODE_2_A100);
	submit(fx, GPU_JOB("s"));
	WAIT_UNTIL(state_is(fx, "s", "RUNNING"));
	assert_int_equal(sched_node_render(fx->s, &node, &(size_t){ 0 }), 0);
	assert_non_null(strstr(node, "gpu.0 s/1\n"));
	assert_non_null(strstr(node, "gpu.1 free\n"));
	free(node);
	end_worker("s", EXEC_EXITED, 0);
	WAIT_UNTIL(state_is(fx, "s", "SUCCEEDED"));
	assert_true(render_is(fx, "s", 1, "state", "SUCCEEDED"));
	assert_true(render_is(fx, "s", 1, "exit_code", "0"));
	assert_int_equal(sched_node_render(fx->s, &node, &(size_t){ 0 }), 0);
	assert_non_null(strstr(node, "gpu.0 free\n"));
	assert_non_null(strstr(node, "cpus_free 16\n"));
	free(node);
}

/* ---- cancel, ctl, remove ---- */

static void test_sched_cancel_of_a_queued_job_is_immediate(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, JOB("q", "\"gpu_types\": [\"A100\"], \"gpu_count\": 2"));
	submit(fx, GPU_JOB("w"));
	WAIT_UNTIL(started("q", 1, 1));
	WAIT_UNTIL(state_is(fx, "w", "QUEUED") && reason_starts(fx, "w", "waiting for GPUs"));
	assert_int_equal(sched_ctl(fx->s, "w", UID, SCHED_CTL_CANCEL), 0);
	assert_true(state_is(fx, "w", "CANCELLED"));	/* at once, not after a pass */
	assert_true(render_is(fx, "w", 1, "state", "CANCELLED"));
	assert_int_equal(sched_ctl(fx->s, "w", UID, SCHED_CTL_CANCEL), -EINVAL);
	end_worker("q", EXEC_EXITED, 0);
	WAIT_UNTIL(state_is(fx, "q", "SUCCEEDED"));
	assert_false(started("w", 1, 1));
}

static void test_sched_cancel_of_a_running_job_sends_sigterm_then_cancels(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	exec_fake_ignore_sigterm(true);
	submit(fx, GPU_JOB("run"));
	WAIT_UNTIL(state_is(fx, "run", "RUNNING") && started("run", 1, 1));
	assert_int_equal(sched_ctl(fx->s, "run", UID, SCHED_CTL_CANCEL), 0);
	WAIT_UNTIL(got_signal("run", SIGTERM));
	assert_false(got_signal("run", SIGKILL));
	assert_true(state_is(fx, "run", "RUNNING"));
	assert_true(reason_has(fx, "run", "cancelled"));
	end_worker("run", EXEC_SIGNALED, SIGTERM);
	WAIT_UNTIL(state_is(fx, "run", "CANCELLED"));
	assert_true(render_is(fx, "run", 1, "state", "CANCELLED"));
	assert_true(render_is(fx, "run", 1, "exit_code", "143"));
	assert_int_equal(exec_fake_n_started(), 1);
}

static void test_sched_ctl_checks_the_user_and_the_command(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, JOB("never", "\"gpu_count\": 8"));
	assert_int_equal(sched_ctl(fx->s, "never", UID + 1, SCHED_CTL_CANCEL), -EPERM);
	assert_int_equal(sched_ctl(fx->s, "never", UID, (enum sched_ctl_cmd)99), -EINVAL);
	assert_int_equal(sched_ctl(fx->s, "nobody", UID, SCHED_CTL_CANCEL), -ENOENT);
	assert_false(state_is(fx, "never", "CANCELLED"));
	assert_int_equal(sched_ctl(fx->s, "never", 0, SCHED_CTL_CANCEL), 0);	/* root may */
	assert_true(state_is(fx, "never", "CANCELLED"));
}

static int ctl_parse(const char *text, size_t len)
{
	enum sched_ctl_cmd cmd = 0;
	int ret = sched_ctl_parse(text, len, &cmd);

	return ret < 0 ? ret : (int)cmd;
}

#define CTL(text) ctl_parse(text, sizeof(text) - 1)

static void test_sched_ctl_parse_takes_one_word(void **state)
{
	char big[SCHED_CTL_MAX + 1];

	(void)state;
	assert_int_equal(CTL("cancel"), SCHED_CTL_CANCEL);
	assert_int_equal(CTL("cancel\n"), SCHED_CTL_CANCEL);
	assert_int_equal(CTL(" \tcancel \r\n"), SCHED_CTL_CANCEL);
	assert_int_equal(CTL(""), -EINVAL);
	assert_int_equal(CTL("\n"), -EINVAL);
	assert_int_equal(CTL("pause\n"), -EINVAL);
	assert_int_equal(CTL("Cancel"), -EINVAL);
	assert_int_equal(CTL("cancel now"), -EINVAL);
	assert_int_equal(CTL("cancel\ncancel\n"), -EINVAL);
	assert_int_equal(CTL("cancel\0junk"), -EINVAL);
	assert_int_equal(CTL("cance"), -EINVAL);
	/* never cut to fit: a long write is refused whole */
	memset(big, ' ', sizeof(big));
	memcpy(big, "cancel", 6);
	assert_int_equal(ctl_parse(big, SCHED_CTL_MAX), SCHED_CTL_CANCEL);
	assert_int_equal(ctl_parse(big, sizeof(big)), -EINVAL);
}

static void test_sched_rerun_output_id_replaces_the_last_rerun_only(void **state)
{
	char id[64] = "x.run.1.1795550908";

	(void)state;
	sched_rerun_output_id(id, sizeof(id), 1);
	assert_string_equal(id, "x.run.1.1795550908.r1");
	sched_rerun_output_id(id, sizeof(id), 2);
	assert_string_equal(id, "x.run.1.1795550908.r2");	/* not ...r1.r2 */
	snprintf(id, sizeof(id), "a.r7.2.17");	/* a name ending ".r7" keeps it */
	sched_rerun_output_id(id, sizeof(id), 3);
	assert_string_equal(id, "a.r7.2.17.r3");
}

static void test_sched_remove_of_a_live_job_is_busy(void **state)
{
	struct fx *fx = *state;
	struct sched_info info;

	fx_start(fx, NODE_2_A100);
	submit(fx, GPU_JOB("live"));
	WAIT_UNTIL(started("live", 1, 1));
	assert_int_equal(sched_remove(fx->s, "live", UID), -EBUSY);
	assert_int_equal(sched_remove(fx->s, "live", UID + 1), -EPERM);
	assert_int_equal(sched_remove(fx->s, "ghost", UID), -ENOENT);
	assert_int_equal(sched_info(fx->s, "live", &info), 0);
}

static void test_sched_remove_of_a_finished_job_forgets_it_across_restarts(void **state)
{
	struct fx *fx = *state;
	struct sched_info info;
	char **names;
	size_t n;

	fx_start(fx, NODE_2_A100);
	submit(fx, GPU_JOB("done"));
	submit(fx, GPU_JOB("kept"));
	WAIT_UNTIL(started("done", 1, 1));
	end_worker("done", EXEC_EXITED, 0);
	WAIT_UNTIL(state_is(fx, "done", "SUCCEEDED"));
	assert_int_equal(sched_remove(fx->s, "done", UID), 0);
	assert_int_equal(sched_info(fx->s, "done", &info), -ENOENT);
	assert_null(render(fx, "done", 0, "state"));
	fx_restart(fx);
	assert_int_equal(sched_info(fx->s, "done", &info), -ENOENT);
	assert_int_equal(sched_names(fx->s, &names, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], "kept");
	sched_names_free(names, n);
	/* the name is free again */
	submit(fx, GPU_JOB("done"));
}

/* ---- timeouts ---- */

static void test_sched_wait_timeout_fails_a_job_that_cannot_start(void **state)
{
	struct fx *fx = *state;
	long long t0;

	fx_start(fx, NODE_2_A100);
	t0 = now_ms();
	submit(fx, JOBX("late", "\"gpu_types\": [\"H100\"], \"gpu_count\": 1",
			", \"wait_timeout_seconds\": 1"));
	WAIT_UNTIL(state_is(fx, "late", "FAILED"));
	assert_true(now_ms() - t0 < 3000);
	assert_true(reason_has(fx, "late", "wait_timeout_seconds"));
	assert_true(render_is(fx, "late", 1, "state", "FAILED"));
	WAIT_UNTIL(finals_of(fx, "late") == 1);
	assert_int_equal(exec_fake_calls(EXEC_FAKE_START), 0);
}

static void test_sched_wait_timeout_fails_a_job_waiting_for_busy_gpus(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, JOB("big", "\"gpu_count\": 2"));
	WAIT_UNTIL(started("big", 1, 1));
	submit(fx, JOBX("small", "\"gpu_count\": 1", ", \"wait_timeout_seconds\": 1"));
	WAIT_UNTIL(state_is(fx, "small", "FAILED"));
	assert_true(reason_has(fx, "small", "wait_timeout_seconds"));
	assert_true(reason_has(fx, "small", "waiting for GPUs"));
	end_worker("big", EXEC_EXITED, 0);
	WAIT_UNTIL(state_is(fx, "big", "SUCCEEDED"));
	assert_false(started("small", 1, 1));
}

static void test_sched_run_timeout_sends_sigterm_and_is_not_retried(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	exec_fake_ignore_sigterm(true);
	submit(fx, JOBX("slow", "\"gpu_count\": 1", ", \"run_timeout_seconds\": 1, \"retry_count\": 2"));
	WAIT_UNTIL(started("slow", 1, 1));
	WAIT_UNTIL(got_signal("slow", SIGTERM));
	assert_false(got_signal("slow", SIGKILL));	/* that comes SCHED_KILL_GRACE later */
	WAIT_UNTIL(events_have(fx, "slow", "run timeout of 1 s reached"));
	end_worker("slow", EXEC_SIGNALED, SIGTERM);
	WAIT_UNTIL(state_is(fx, "slow", "FAILED"));
	assert_true(reason_has(fx, "slow", "run_timeout_seconds"));
	assert_int_equal(exec_fake_n_started(), 1);
}

/* ---- executor failures ---- */

static void test_sched_start_failure_fails_the_worker_and_frees_its_gpu(void **state)
{
	struct fx *fx = *state;
	struct exec_fake_run good;

	fx_start(fx, NODE_2_A100);
	exec_fake_fail_next_starts(1, -EIO);
	submit(fx, GPU_JOB("bad"));
	WAIT_UNTIL(state_is(fx, "bad", "FAILED"));
	assert_true(render_is(fx, "bad", 1, "state", "FAILED"));
	assert_true(events_have(fx, "bad", "worker 1: cannot start: Input/output error"));
	assert_true(reason_has(fx, "bad", "could not be started"));
	assert_int_equal(exec_fake_calls(EXEC_FAKE_START), 1);
	assert_int_equal(exec_fake_n_started(), 0);
	submit(fx, GPU_JOB("good"));
	WAIT_UNTIL(started("good", 1, 1));
	good = run_of("good");
	assert_string_equal(exec_fake_getenv(&good, "CUDA_VISIBLE_DEVICES"), "0");
}

/* ---- what fs/ is told ---- */

static void test_sched_final_callback_is_called_once_per_ended_job(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, GPU_JOB("ok"));
	submit(fx, GPU_JOB("fail"));
	submit(fx, JOB("never", "\"gpu_count\": 8"));
	WAIT_UNTIL(started("ok", 1, 1) && started("fail", 1, 1));
	end_worker("ok", EXEC_EXITED, 0);
	end_worker("fail", EXEC_EXITED, 1);
	assert_int_equal(sched_ctl(fx->s, "never", UID, SCHED_CTL_CANCEL), 0);
	WAIT_UNTIL(finals_count(fx) == 3);
	/* a later job's end proves the earlier ones are not told again */
	submit(fx, GPU_JOB("last"));
	WAIT_UNTIL(started("last", 1, 1));
	end_worker("last", EXEC_EXITED, 0);
	WAIT_UNTIL(finals_of(fx, "last") == 1);
	assert_int_equal(finals_of(fx, "ok"), 1);
	assert_int_equal(finals_of(fx, "fail"), 1);
	assert_int_equal(finals_of(fx, "never"), 1);
	assert_int_equal(finals_count(fx), 4);
}

static void test_sched_duplicate_name_is_eexist(void **state)
{
	struct fx *fx = *state;
	char **names;
	size_t n;

	fx_start(fx, NODE_2_A100);
	submit(fx, GPU_JOB("twin"));
	assert_int_equal(submit_as(fx, GPU_JOB("twin"), UID, GID), -EEXIST);
	assert_int_equal(sched_names(fx->s, &names, &n), 0);
	assert_int_equal(n, 1);
	sched_names_free(names, n);
}

static void test_sched_environment_has_gpus_names_and_spec_variables(void **state)
{
	struct fx *fx = *state;
	struct exec_fake_run r;

	fx_start(fx, NODE_2_A100);
	submit(fx, JOBX("env", "\"gpu_count\": 2",
			", \"environment\": {\"variables\": {\"FOO\": \"bar baz\", \"N\": 8,"
			" \"JOB_NAME\": \"spoofed\"}}"));
	WAIT_UNTIL(started("env", 1, 1));
	r = run_of("env");
	assert_string_equal(exec_fake_getenv(&r, "CUDA_VISIBLE_DEVICES"), "0,1");
	assert_string_equal(exec_fake_getenv(&r, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
	assert_string_equal(exec_fake_getenv(&r, "GPU_COUNT"), "2");
	assert_string_equal(exec_fake_getenv(&r, "JOB_NAME"), "env");	/* mlfs's own win */
	assert_string_equal(exec_fake_getenv(&r, "MLFS_WORKER"), "1");
	assert_string_equal(exec_fake_getenv(&r, "MLFS_ATTEMPT"), "1");
	assert_string_equal(exec_fake_getenv(&r, "FOO"), "bar baz");
	assert_string_equal(exec_fake_getenv(&r, "N"), "8");
	assert_non_null(exec_fake_getenv(&r, "PATH"));
	assert_int_equal(r.worker, 1);
	assert_int_equal(r.attempt, 1);
	assert_string_equal(r.job, "env");
}

static void test_sched_uid_and_gid_are_passed_to_the_executor(void **state)
{
	struct fx *fx = *state;
	struct exec_fake_run r;
	struct sched_info info;

	fx_start(fx, NODE_2_A100);
	assert_int_equal(submit_as(fx, GPU_JOB("mine"), 4321, 8765), 0);
	WAIT_UNTIL(started("mine", 1, 1));
	r = run_of("mine");
	assert_int_equal(r.uid, 4321);
	assert_int_equal(r.gid, 8765);
	assert_true(r.memory_limit == 0);
	assert_int_equal(sched_info(fx->s, "mine", &info), 0);
	assert_int_equal(info.uid, 4321);
	assert_int_equal(info.gid, 8765);
	assert_int_equal(info.n_workers, 1);
}

static void test_sched_workers_of_one_job_get_their_own_gpus_and_numbers(void **state)
{
	struct fx *fx = *state;
	struct exec_fake_run w1, w2;

	fx_start(fx, NODE_2_A100);
	submit(fx, "{\"name\": \"pair\", \"resources\": {\"gpu_count\": 1},"
		   " \"workers\": [{\"command\": \"a\"}, {\"command\": \"b\"}]}");
	WAIT_UNTIL(started("pair", 1, 1) && started("pair", 2, 1));
	assert_int_equal(exec_fake_find("pair", 1, 1, &w1), 0);
	assert_int_equal(exec_fake_find("pair", 2, 1, &w2), 0);
	assert_string_equal(exec_fake_getenv(&w1, "MLFS_WORKER"), "1");
	assert_string_equal(exec_fake_getenv(&w2, "MLFS_WORKER"), "2");
	assert_string_equal(exec_fake_getenv(&w2, "MLFS_WORKER_COUNT"), "2");
	assert_string_not_equal(exec_fake_getenv(&w1, "CUDA_VISIBLE_DEVICES"),
				exec_fake_getenv(&w2, "CUDA_VISIBLE_DEVICES"));
	assert_int_equal(exec_fake_end("pair", 1, EXEC_EXITED, 0), 0);
	WAIT_UNTIL(render_is(fx, "pair", 1, "state", "SUCCEEDED"));
	assert_true(state_is(fx, "pair", "RUNNING"));
	assert_int_equal(exec_fake_end("pair", 2, EXEC_EXITED, 0), 0);
	WAIT_UNTIL(state_is(fx, "pair", "SUCCEEDED"));
}

/* ---- acceptance ---- */

#define CPU_JOB(name) JOB(name, "\"cpu_count\": 4")

/* How many spare job folders are ready in state_dir/spare; their inode numbers into @inodes. */
static size_t spares_ready(struct fx *fx, ino_t *inodes, size_t max)
{
	char path[128];
	struct dirent *e;
	struct stat st;
	size_t n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/state/spare", fx->dir);
	d = opendir(path);
	while (d && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, 0) < 0)
			continue;
		if (inodes && n < max)
			inodes[n] = st.st_ino;
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* The inode number of what @rel names in the fixture's folder; 0 when nothing. */
static ino_t inode_of(struct fx *fx, const char *rel)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", fx->dir, rel);
	return stat(path, &st) == 0 ? st.st_ino : 0;
}

static bool inode_in(ino_t ino, const ino_t *inodes, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (inodes[i] == ino)
			return true;
	return false;
}

/*
 * Whether the spare thread has made all the folders it wants and rests: a
 * folder shows in state_dir/spare a moment before it is counted ready, and
 * the thread goes on filling past takes it sees while filling.
 */
static bool spares_all_made(struct fx *fx)
{
	bool done;

	pthread_mutex_lock(&fx->s->spare_lock);
	done = fx->s->spare_want > 0 && fx->s->n_spares == fx->s->spare_want;
	pthread_mutex_unlock(&fx->s->spare_lock);
	return done;
}

/* Starts the scheduler and accepts a first job, after which SCHED_SPARES_FIRST folders are made. */
static void fx_start_with_spares(struct fx *fx)
{
	fx_start(fx, NODE_2_A100);
	submit(fx, CPU_JOB("first"));
	WAIT_UNTIL(spares_all_made(fx));
	assert_int_equal(spares_ready(fx, NULL, 0), SCHED_SPARES_FIRST);
}

/*
 * Once a spec was accepted, job folders are made ahead: the next job's
 * folder is one of them renamed (acceptance makes no inode while its
 * writer waits in close), with its events; once half are taken, all are
 * made again.
 */
static void test_sched_acceptance_takes_a_folder_made_ahead(void **state)
{
	struct fx *fx = *state;
	ino_t inodes[SCHED_SPARES_FIRST];
	char name[32], json[256];
	size_t n;

	fx_start_with_spares(fx);
	n = spares_ready(fx, inodes, SCHED_SPARES_FIRST);
	submit(fx, CPU_JOB("second"));
	assert_true(inode_in(inode_of(fx, "state/jobs/second"), inodes, n));
	assert_true(events_have(fx, "second", "accepted from job.json"));
	for (int i = 1; i < SCHED_SPARES_FIRST / 2; i++) {
		snprintf(name, sizeof(name), "more%d", i);
		snprintf(json, sizeof(json), "{\"name\": \"%s\", \"resources\": {\"cpu_count\": 4},"
			 " \"workers\": [{\"command\": \"x\"}]}", name);
		submit(fx, json);
	}
	WAIT_UNTIL(spares_all_made(fx));
	assert_int_equal(spares_ready(fx, NULL, 0), SCHED_SPARES_FIRST);
	WAIT_UNTIL(started("second", 1, 1));
	end_worker("second", EXEC_EXITED, 0);
	WAIT_UNTIL(state_is(fx, "second", "SUCCEEDED"));
}

/* A new daemon takes the spares the last one made, completing a half-made one. */
static void test_sched_restart_takes_the_spare_folders_it_finds(void **state)
{
	struct fx *fx = *state;
	ino_t inodes[SCHED_SPARES_FIRST + 1];
	char half[128];
	size_t n;

	fx_start_with_spares(fx);
	snprintf(half, sizeof(half), "%s/state/spare/999999", fx->dir);
	assert_int_equal(mkdir(half, 0711), 0);
	fx_restart(fx);
	n = spares_ready(fx, inodes, SCHED_SPARES_FIRST + 1);
	assert_int_equal(n, SCHED_SPARES_FIRST + 1);
	assert_true(inode_of(fx, "state/spare/999999/events") != 0);
	assert_true(inode_of(fx, "state/spare/999999/status.json") != 0);
	submit(fx, CPU_JOB("second"));
	assert_true(inode_in(inode_of(fx, "state/jobs/second"), inodes, n));
}

/* A folder left with the job's name is not replaced by a spare: what it holds stays. */
static void test_sched_a_folder_left_with_the_jobs_name_is_kept(void **state)
{
	struct fx *fx = *state;
	char path[160];
	int fd;

	fx_start_with_spares(fx);
	snprintf(path, sizeof(path), "%s/state/jobs/left", fx->dir);
	assert_int_equal(mkdir(path, 0711), 0);
	snprintf(path, sizeof(path), "%s/state/jobs/left/kept", fx->dir);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	close(fd);
	submit(fx, CPU_JOB("left"));
	assert_true(inode_of(fx, "state/jobs/left/kept") != 0);
	assert_true(events_have(fx, "left", "accepted from job.json"));
}

/*
 * The scheduler starts workers without its lock: while a start is held,
 * a spec is accepted and a job's state read.  (Were they waiting for the
 * start, they would return only when the fake lets it go by itself, 10 s
 * later, and find it done.)
 */
static void test_sched_a_slow_launch_does_not_delay_an_acceptance(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	exec_fake_hold_starts(true);
	submit(fx, GPU_JOB("slow"));
	WAIT_UNTIL(exec_fake_calls(EXEC_FAKE_START) == 1);	/* its start has begun */
	submit(fx, GPU_JOB("quick"));
	assert_true(state_is(fx, "slow", "RUNNING"));
	assert_int_equal(exec_fake_n_started(), 0);		/* still held */
	exec_fake_hold_starts(false);
	WAIT_UNTIL(started("slow", 1, 1) && started("quick", 1, 1));
}

/* ---- restarts ---- */

static void test_sched_restart_keeps_jobs_and_their_states(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, GPU_JOB("ok"));
	submit(fx, GPU_JOB("bad"));
	submit(fx, JOB("never", "\"gpu_count\": 8"));
	WAIT_UNTIL(started("ok", 1, 1) && started("bad", 1, 1));
	end_worker("ok", EXEC_EXITED, 0);
	end_worker("bad", EXEC_EXITED, 2);
	WAIT_UNTIL(state_is(fx, "ok", "SUCCEEDED") && state_is(fx, "bad", "FAILED"));
	WAIT_UNTIL(reason_starts(fx, "never", "never satisfiable"));
	fx_restart(fx);
	assert_true(state_is(fx, "ok", "SUCCEEDED"));
	assert_true(state_is(fx, "bad", "FAILED"));
	assert_true(render_is(fx, "bad", 1, "exit_code", "2"));
	WAIT_UNTIL(state_is(fx, "never", "QUEUED") && reason_starts(fx, "never", "never satisfiable"));
	assert_int_equal(exec_fake_calls(EXEC_FAKE_ADOPT), 0);
	assert_int_equal(exec_fake_n_started(), 2);
}

static void test_sched_restart_adopts_a_running_worker_and_keeps_its_gpu(void **state)
{
	struct fx *fx = *state;
	struct exec_fake_run next;
	char *node;

	fx_start(fx, NODE_2_A100);
	submit(fx, GPU_JOB("long"));
	WAIT_UNTIL(running_on_disk(fx, "long"));
	exec_fake_set_adopt(0, EXEC_LOST, 0);
	fx_restart(fx);
	assert_int_equal(exec_fake_calls(EXEC_FAKE_ADOPT), 1);
	assert_true(state_is(fx, "long", "RUNNING"));
	assert_true(events_have(fx, "long", "found running again"));
	assert_int_equal(sched_node_render(fx->s, &node, &(size_t){ 0 }), 0);
	assert_non_null(strstr(node, "gpu.0 long/1\n"));
	free(node);
	submit(fx, GPU_JOB("next"));
	WAIT_UNTIL(started("next", 1, 1));
	next = run_of("next");
	assert_string_equal(exec_fake_getenv(&next, "CUDA_VISIBLE_DEVICES"), "1");
	end_worker("long", EXEC_EXITED, 0);	/* wakes the new daemon through the adopted pidfd */
	WAIT_UNTIL(state_is(fx, "long", "SUCCEEDED"));
	assert_int_equal(finals_of(fx, "long"), 1);
}

static void test_sched_restart_with_a_lost_worker_fails_the_job(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, GPU_JOB("gone"));
	WAIT_UNTIL(running_on_disk(fx, "gone"));
	exec_fake_set_adopt(1, EXEC_LOST, 0);
	fx_restart(fx);
	assert_true(state_is(fx, "gone", "FAILED"));
	assert_true(reason_has(fx, "gone", "lost"));
	assert_true(events_have(fx, "gone", "ended while mlfs was down"));
	WAIT_UNTIL(finals_of(fx, "gone") == 1);
	submit(fx, JOB("both", "\"gpu_count\": 2"));	/* its GPU was given back */
	WAIT_UNTIL(started("both", 1, 1));
}

static void test_sched_restart_starts_a_queued_job_later(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, JOB("big", "\"gpu_count\": 2"));
	submit(fx, GPU_JOB("wait"));
	WAIT_UNTIL(running_on_disk(fx, "big"));
	WAIT_UNTIL(reason_starts(fx, "wait", "waiting for GPUs"));
	fx_restart(fx);
	assert_true(state_is(fx, "wait", "QUEUED"));
	end_worker("big", EXEC_EXITED, 0);
	WAIT_UNTIL(started("wait", 1, 1));
	WAIT_UNTIL(state_is(fx, "wait", "RUNNING"));
}

static void test_sched_restart_when_adopt_fails_treats_the_worker_as_lost(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, GPU_JOB("err"));
	WAIT_UNTIL(running_on_disk(fx, "err"));
	exec_fake_set_adopt(-EIO, EXEC_EXITED, 0);
	fx_restart(fx);
	assert_int_equal(exec_fake_calls(EXEC_FAKE_ADOPT), 1);
	assert_true(state_is(fx, "err", "FAILED"));
	assert_true(reason_has(fx, "err", "lost"));
}

static void test_sched_retry_attempts_are_on_disk_while_the_next_one_runs(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, JOBX("again", "\"gpu_count\": 1", ", \"retry_count\": 1"));
	WAIT_UNTIL(started("again", 1, 1));
	end_worker("again", EXEC_EXITED, 3);
	WAIT_UNTIL(started("again", 1, 2));
	WAIT_UNTIL(render_has(fx, "again", 0, "status.json", "\"end\": \"exited 3\""));
	WAIT_UNTIL(running_on_disk(fx, "again"));	/* attempt 2's run, to adopt */
	exec_fake_set_adopt(0, EXEC_LOST, 0);
	fx_restart(fx);		/* what the new daemon reads is what was on disk */
	assert_true(render_has(fx, "again", 0, "status.json", "\"end\": \"exited 3\""));
	assert_int_equal(exec_fake_calls(EXEC_FAKE_ADOPT), 1);
	end_worker("again", EXEC_EXITED, 0);
	WAIT_UNTIL(state_is(fx, "again", "SUCCEEDED"));
	assert_int_equal(exec_fake_n_started(), 2);
}

/* ---- the end rule of each format (docs/jobs.md, "How a job ends") ---- */

static void end_nth(const char *job, unsigned int worker, int code)
{
	end_nth_worker(job, worker, EXEC_EXITED, code);
}

static void test_sched_end_native_job_fails_when_one_worker_failed(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, "{\"name\": \"nat\", \"workers\": [{\"command\": \"a\"}, {\"command\": \"b\"}]}");
	end_nth("nat", 2, 0);
	end_nth("nat", 1, 2);
	WAIT_UNTIL(state_is(fx, "nat", "FAILED"));
	assert_true(reason_has(fx, "nat", "worker 1 exited 2 after 1 attempt(s)"));
}

static void test_sched_end_gpulab_job_fails_when_its_worker_failed(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, "{\"name\": \"gl\", \"request\": {\"resources\": {\"gpus\": 0, \"cpus\": 1, "
		   "\"cpuMemoryGb\": 1}, \"docker\": {\"command\": \"false\"}}}");
	end_nth("gl", 1, 1);
	WAIT_UNTIL(state_is(fx, "gl", "FAILED"));
	assert_true(reason_has(fx, "gl", "worker 1 exited 1 after 1 attempt(s)"));
}

static void test_sched_end_kibernetika_seed_task_whose_command_fails_is_failed(void **state)
{
	struct fx *fx = *state;

	/* its images run nowhere under the fake executor: on the node, as fallback = host says */
	fx_start(fx, NODE_2_A100 "[containers]\nfallback = host\n"
		 /* its workDir: $SRC_DIR names the project's source src */
		 "[datastore d]\ntype = local\nroot = /tmp\n[source src]\nsource = d:/\n");
	submit(fx, SEED_KIBERNETIKA_TEMPLATE);
	end_nth("example", 1, 1);
	WAIT_UNTIL(state_is(fx, "example", "FAILED"));
	assert_true(reason_has(fx, "example", "resource worker: worker 1 exited 1 after 1 attempt(s); "
			       "a task fails at its first failed replica"));
}

/*
 * An image where no runtime can run it: refused at submit, at the image's
 * field, saying why; with fallback = host, run on the node and listed.
 */
static void test_sched_image_without_runtime_is_refused_or_falls_back(void **state)
{
	static const char spec[] =
		"{\"name\": \"img\", \"resources\": {\"cpu_count\": 4},\n"
		" \"environment\": {\"image\": \"reg.lan:5000/team/tf:1.15\"},\n"
		" \"workers\": [{\"command\": \"true\"}]}";
	struct fx *fx = *state;
	char *name = NULL;
	struct diag d;

	fx_start(fx, NODE_2_A100);
	diag_init(&d);
	assert_int_equal(sched_submit(fx->s, "img.json", spec, strlen(spec), UID, GID, &name, &d),
			 -EINVAL);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0], "img.json:2:27: environment.image: this node cannot run "
			    "container images: a test's executor runs no containers");
	diag_free(&d);
	assert_null(name);
	sched_destroy(fx->s);
	config_free(fx->cfg);
	fx_start(fx, NODE_2_A100 "[containers]\nfallback = host\n");
	submit(fx, spec);
	end_nth("img", 1, 0);
	WAIT_UNTIL(state_is(fx, "img", "SUCCEEDED"));
	assert_true(render_has(fx, "img", 0, "status.json", "environment.image: this node runs no "
			       "container images (a test's executor runs no containers); the command "
			       "runs on the node ([containers] fallback = host)"));
}

/*
 * A base environment is resolved at acceptance, shown in spec.json, and
 * kept across a restart whatever the config says by then; no match is
 * EINVAL naming the choices.
 */
static void test_sched_base_environment_is_resolved_at_acceptance_and_kept(void **state)
{
	static const char spec[] =
		"{\"name\": \"env\", \"resources\": {\"cpu_count\": 4},\n"
		" \"environment\": {\"python_version\": \"3.11\", \"packages\": {\"pip\": [\"x\"]}},\n"
		" \"workers\": [{\"command\": \"true\"}]}";
	static const char nomatch[] =
		"{\"name\": \"nomatch\", \"resources\": {\"cpu_count\": 4},\n"
		" \"environment\": {\"python_version\": \"2.7\"},\n"
		" \"workers\": [{\"command\": \"true\"}]}";
	struct fx *fx = *state;
	char *name = NULL;
	struct diag d;

	fx_start(fx, NODE_2_A100 "[containers]\nfallback = host\n"
		 "[environment py311]\nimage = reg.lan/py:3.11\npython_version = 3.11\n");
	diag_init(&d);
	assert_int_equal(sched_submit(fx->s, "nomatch.json", nomatch, strlen(nomatch), UID, GID,
				      &name, &d), -EINVAL);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0], "nomatch.json:2:36: environment.python_version: no base "
			    "environment of this node has python_version 2.7; it has py311 "
			    "(python_version 3.11)");
	diag_free(&d);
	submit(fx, spec);
	assert_true(render_has(fx, "env", 0, "spec.json", "\"image\": \"reg.lan/py:3.11\""));
	assert_true(render_has(fx, "env", 0, "spec.json", "\"base_environment\": \"py311\""));
	assert_true(render_has(fx, "env", 0, "status.json", "environment.packages: not installed"));
	/* the config's section now names another image: the job keeps its own */
	free(fx->cfg->environments[0].image);
	fx->cfg->environments[0].image = strdup("reg.lan/py:3.11-new");
	fx_restart(fx);
	assert_true(render_has(fx, "env", 0, "spec.json", "\"image\": \"reg.lan/py:3.11\""));
	assert_false(render_has(fx, "env", 0, "spec.json", "3.11-new"));
}

/*
 * One failed replica of two fails the task and stops the other; with
 * maxRestartCount 1 the task runs once more, whole, and fails for good at
 * the next failure.
 */
static void test_sched_end_kibernetika_first_failed_replica_fails_once_restarts_are_spent(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, "name: kb2\nresources:\n- name: w\n  replicas: 2\n  command: x\n"
		   "  maxRestartCount: 1\n");
	end_nth("kb2", 1, 3);
	WAIT_UNTIL(started("kb2", 1, 2) && started("kb2", 2, 2));
	assert_true(events_have(fx, "kb2", "resource w: worker 1 exited 3"));
	end_nth("kb2", 2, 4);
	WAIT_UNTIL(state_is(fx, "kb2", "FAILED"));
	assert_true(reason_has(fx, "kb2", "resource w: worker 2 exited 4"));
	assert_true(render_is(fx, "kb2", 1, "state", "CANCELLED") ||
		    render_is(fx, "kb2", 1, "state", "FAILED"));
}

/* OpenPAI task role with minFailedTaskCount null and two tasks. */
#define PAI_NULL_MIN(name) \
	"{\"jobName\": \"" name "\", \"taskRoles\": [{\"name\": \"a\", \"taskNumber\": 2, " \
	"\"cpuNumber\": 1, \"memoryMB\": 128, \"gpuNumber\": 0, \"command\": \"x\", " \
	"\"minFailedTaskCount\": null}]}"

static void test_sched_end_openpai_null_min_failed_succeeds_with_one_failure(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, PAI_NULL_MIN("pai1"));
	end_nth("pai1", 1, 1);
	end_nth("pai1", 2, 0);
	WAIT_UNTIL(state_is(fx, "pai1", "SUCCEEDED"));
	assert_true(reason_has(fx, "pai1", "all 2 task(s) completed; 1 failed, which no "
			       "minFailedTaskCount counts"));
}

static void test_sched_end_openpai_job_whose_every_task_failed_is_failed(void **state)
{
	struct fx *fx = *state;

	fx_start(fx, NODE_2_A100);
	submit(fx, PAI_NULL_MIN("pai2"));
	end_nth("pai2", 1, 1);
	end_nth("pai2", 2, 5);
	WAIT_UNTIL(state_is(fx, "pai2", "FAILED"));
	assert_true(reason_has(fx, "pai2", "all 2 task(s) failed; the first: worker 1 exited 1"));
}

/* ---- behind a cluster executor (the fake cluster) ---- */

/* A two-worker native job of one shape: an array on a cluster. */
#define PAIR_JOB(name) \
	"{\"name\": \"" name "\", \"resources\": {\"gpu_count\": 1}, " \
	"\"workers\": [{\"command\": \"x\"}, {\"command\": \"y\"}]}"

/* Waits until @worker of @job is in the fake cluster's hands (submitted by a submitter thread). */
static void in_cluster(const char *job, unsigned int worker)
{
	char id[64];

	WAIT_UNTIL(exec_fake_cluster_id(job, worker, id, sizeof(id)) == 0);
}

static void test_sched_cluster_job_is_submitted_once_with_all_its_workers(void **state)
{
	struct fx *fx = *state;
	struct exec_fake_submission sub;
	char id[64];

	fx_start_on(fx, "fake-cluster", NODE_2_A100);
	submit(fx, PAIR_JOB("pair"));
	in_cluster("pair", 2);
	assert_int_equal(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_SUBMIT), 1);
	assert_int_equal(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_START), 0);
	assert_true(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_FITS) >= 2);
	assert_int_equal(exec_fake_cluster_submission(0, &sub), 0);
	assert_string_equal(sub.job, "pair");
	assert_int_equal(sub.n, 2);
	assert_false(sub.together);
	assert_int_equal(sub.workers[0], 1);
	assert_int_equal(sub.workers[1], 2);
	assert_int_equal(exec_fake_cluster_id("pair", 2, id, sizeof(id)), 0);
	assert_string_equal(id, "F1_2");	/* an array: one id per worker */
	WAIT_UNTIL(events_have(fx, "pair", "worker 2: attempt 1 submitted to Slurm as job F1_2"));
	/* no node resources are held for a cluster's workers */
	submit(fx, PAIR_JOB("more"));
	in_cluster("more", 2);
	assert_int_equal(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_SUBMIT), 2);
	WAIT_UNTIL(state_is(fx, "pair", "QUEUED") && state_is(fx, "more", "QUEUED"));
	assert_true(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_REFRESH) > 0);
}

static void test_sched_cluster_gang_is_one_submission_of_its_workers_together(void **state)
{
	struct fx *fx = *state;
	struct exec_fake_submission sub;
	char id1[64], id2[64];

	fx_start_on(fx, "fake-cluster", NODE_2_A100);
	submit(fx, PAI_NULL_MIN("gang"));
	in_cluster("gang", 2);
	assert_int_equal(exec_fake_cluster_n_submissions(), 1);
	assert_int_equal(exec_fake_cluster_submission(0, &sub), 0);
	assert_int_equal(sub.n, 2);
	assert_true(sub.together);
	assert_int_equal(exec_fake_cluster_id("gang", 1, id1, sizeof(id1)), 0);
	assert_int_equal(exec_fake_cluster_id("gang", 2, id2, sizeof(id2)), 0);
	assert_string_equal(id1, "F1");		/* one allocation */
	assert_string_equal(id2, "F1");
	assert_int_equal(exec_fake_cluster_running("gang", 1), 0);
	WAIT_UNTIL(render_is(fx, "gang", 2, "state", "RUNNING"));
	exec_fake_cluster_end("gang", 1, EXEC_EXITED, 0);
	exec_fake_cluster_end("gang", 2, EXEC_EXITED, 0);
	WAIT_UNTIL(state_is(fx, "gang", "SUCCEEDED"));
}

static void test_sched_cluster_pending_reason_is_the_jobs_reason(void **state)
{
	struct fx *fx = *state;

	fx_start_on(fx, "fake-cluster", NODE_2_A100);
	submit(fx, JOB("wait", "\"gpu_count\": 1"));
	in_cluster("wait", 1);
	assert_int_equal(exec_fake_cluster_pending("wait", 1, "cluster: waiting for resources "
						   "(Resources)"), 0);
	WAIT_UNTIL(render_is(fx, "wait", 0, "reason", "cluster: waiting for resources (Resources)"));
	assert_true(state_is(fx, "wait", "QUEUED"));
	assert_true(render_is(fx, "wait", 1, "state", "QUEUED"));
	/* a new reason is shown as it comes */
	assert_int_equal(exec_fake_cluster_pending("wait", 1, "cluster: held by its user "
						   "(JobHeldUser)"), 0);
	WAIT_UNTIL(render_is(fx, "wait", 0, "reason", "cluster: held by its user (JobHeldUser)"));
	assert_int_equal(exec_fake_cluster_running("wait", 1), 0);
	WAIT_UNTIL(state_is(fx, "wait", "RUNNING"));
	assert_true(events_have(fx, "wait", "worker 1: running on Slurm as job F1"));
	assert_int_equal(exec_fake_cluster_end("wait", 1, EXEC_EXITED, 3), 0);
	WAIT_UNTIL(state_is(fx, "wait", "FAILED"));
	assert_true(render_is(fx, "wait", 1, "exit_code", "3"));
	assert_int_equal(finals_of(fx, "wait"), 1);
}

static void test_sched_cluster_requeue_is_a_new_attempt_not_a_failure(void **state)
{
	struct fx *fx = *state;

	fx_start_on(fx, "fake-cluster", NODE_2_A100);
	submit(fx, PAIR_JOB("rq"));
	in_cluster("rq", 2);
	exec_fake_cluster_running("rq", 1);
	exec_fake_cluster_running("rq", 2);
	WAIT_UNTIL(render_is(fx, "rq", 0, "reason", "2 of 2 worker(s) running"));
	assert_int_equal(exec_fake_cluster_requeue("rq", 1, "preempted"), 0);
	WAIT_UNTIL(render_is(fx, "rq", 1, "state", "RETRYING"));
	assert_true(events_have(fx, "rq", "worker 1: the fake cluster requeued F1_1: preempted; "
				"it waits to run again"));
	assert_true(state_is(fx, "rq", "RUNNING"));	/* worker 2 still runs */
	assert_true(render_has(fx, "rq", 0, "status.json", "\"requeued\""));
	exec_fake_cluster_running("rq", 1);
	WAIT_UNTIL(render_is(fx, "rq", 1, "state", "RUNNING"));
	exec_fake_cluster_end("rq", 1, EXEC_EXITED, 0);
	exec_fake_cluster_end("rq", 2, EXEC_EXITED, 0);
	WAIT_UNTIL(state_is(fx, "rq", "SUCCEEDED"));
	/* the cluster ran it again: mlfs did not submit it twice */
	assert_int_equal(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_SUBMIT), 1);
	assert_true(render_has(fx, "rq", 0, "status.json", "\"requeued\""));
}

static void test_sched_cluster_cancel_of_a_pending_job_cancels_it(void **state)
{
	struct fx *fx = *state;

	fx_start_on(fx, "fake-cluster", NODE_2_A100);
	submit(fx, JOB("c", "\"gpu_count\": 1"));
	in_cluster("c", 1);
	exec_fake_cluster_pending("c", 1, "cluster: waiting for resources (Resources)");
	WAIT_UNTIL(reason_has(fx, "c", "waiting for resources"));
	assert_int_equal(sched_ctl(fx->s, "c", UID, SCHED_CTL_CANCEL), 0);
	WAIT_UNTIL(state_is(fx, "c", "CANCELLED"));
	assert_true(exec_fake_cluster_got_signal("c", 1, SIGTERM));
}

static void test_sched_cluster_never_fitting_worker_is_never_submitted(void **state)
{
	struct fx *fx = *state;

	exec_fake_cluster_set_max_gpus(2);
	fx_start_on(fx, "fake-cluster", NODE_2_A100);
	submit(fx, JOB("big", "\"gpu_count\": 4"));
	WAIT_UNTIL(render_is(fx, "big", 0, "reason", "never satisfiable on the fake cluster: "
			     "4 GPUs asked, its largest node has 2"));
	assert_true(state_is(fx, "big", "QUEUED"));
	assert_int_equal(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_SUBMIT), 0);
}

static void test_sched_cluster_refused_submission_fails_with_the_clusters_words(void **state)
{
	struct fx *fx = *state;

	exec_fake_cluster_fail_next_submit(-EINVAL, "sbatch refused it: invalid partition");
	fx_start_on(fx, "fake-cluster", NODE_2_A100);
	submit(fx, JOB("no", "\"gpu_count\": 1"));
	WAIT_UNTIL(state_is(fx, "no", "FAILED"));
	assert_true(events_have(fx, "no", "worker 1: cannot start: sbatch refused it: invalid partition"));
}

static void test_sched_cluster_restart_finds_its_workers_again(void **state)
{
	struct fx *fx = *state;

	fx_start_on(fx, "fake-cluster", NODE_2_A100);
	submit(fx, JOB("keep", "\"gpu_count\": 1"));
	in_cluster("keep", 1);
	exec_fake_cluster_running("keep", 1);
	WAIT_UNTIL(state_is(fx, "keep", "RUNNING") && running_on_disk(fx, "keep"));
	fx_restart(fx);
	assert_int_equal(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_ADOPT), 1);
	assert_true(events_have(fx, "keep", "worker 1: found again in Slurm (job F1)"));
	exec_fake_cluster_end("keep", 1, EXEC_EXITED, 0);
	WAIT_UNTIL(state_is(fx, "keep", "SUCCEEDED"));
	assert_int_equal(exec_fake_cluster_calls(EXEC_FAKE_CLUSTER_SUBMIT), 1);
}

/* nvidia-smi's PCI address to the driver's folder, and its "Device Minor:" line */
static void test_sched_node_gpu_minor_from_the_driver(void **state)
{
	char dir[] = "/tmp/mlfs-gpus-XXXXXX", path[256];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/0000:3b:00.0", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/0000:3b:00.0/information", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nBus Location: \t 0000:3b:00.0\n"
	      "Device Minor: \t 2\nGPU Excluded:\t No\n", f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(sched_node_gpu_minor(dir, "00000000:3B:00.0"), 2);
	assert_int_equal(sched_node_gpu_minor(dir, "0000:3b:00.0"), 2);
	assert_int_equal(sched_node_gpu_minor(dir, "00000000:3C:00.0"), -1);	/* no folder */
	assert_int_equal(sched_node_gpu_minor(dir, "3b:00.0"), -1);		/* no domain */
	assert_int_equal(sched_node_gpu_minor(dir, "garbage"), -1);
	unlink(path);
	snprintf(path, sizeof(path), "%s/0000:3b:00.0", dir);
	rmdir(path);
	rmdir(dir);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_sched_two_gpus_start_two_jobs_on_distinct_gpus_and_queue_the_third),
		T(test_sched_ended_worker_frees_its_gpu_for_the_waiting_job),
		T(test_sched_gpu_type_the_node_lacks_is_never_satisfiable),
		T(test_sched_more_gpus_than_the_node_has_is_never_satisfiable),
		T(test_sched_more_cpus_than_the_node_has_is_never_satisfiable),
		T(test_sched_cpus_are_accounted_between_running_jobs),
		T(test_sched_memory_is_accounted_and_passed_as_the_limit),
		T(test_sched_max_price_below_the_node_price_is_never_satisfiable),
		T(test_sched_min_cuda_version_is_compared_numerically),
		T(test_sched_retry_count_2_makes_three_attempts_then_fails),
		T(test_sched_oom_is_not_retried),
		T(test_sched_exit_0_succeeds_and_frees_the_gpu),
		T(test_sched_cancel_of_a_queued_job_is_immediate),
		T(test_sched_cancel_of_a_running_job_sends_sigterm_then_cancels),
		T(test_sched_ctl_checks_the_user_and_the_command),
		cmocka_unit_test(test_sched_ctl_parse_takes_one_word),
		cmocka_unit_test(test_sched_node_gpu_minor_from_the_driver),
		cmocka_unit_test(test_sched_rerun_output_id_replaces_the_last_rerun_only),
		T(test_sched_remove_of_a_live_job_is_busy),
		T(test_sched_remove_of_a_finished_job_forgets_it_across_restarts),
		T(test_sched_wait_timeout_fails_a_job_that_cannot_start),
		T(test_sched_wait_timeout_fails_a_job_waiting_for_busy_gpus),
		T(test_sched_run_timeout_sends_sigterm_and_is_not_retried),
		T(test_sched_start_failure_fails_the_worker_and_frees_its_gpu),
		T(test_sched_final_callback_is_called_once_per_ended_job),
		T(test_sched_duplicate_name_is_eexist),
		T(test_sched_acceptance_takes_a_folder_made_ahead),
		T(test_sched_restart_takes_the_spare_folders_it_finds),
		T(test_sched_a_folder_left_with_the_jobs_name_is_kept),
		T(test_sched_a_slow_launch_does_not_delay_an_acceptance),
		T(test_sched_environment_has_gpus_names_and_spec_variables),
		T(test_sched_uid_and_gid_are_passed_to_the_executor),
		T(test_sched_workers_of_one_job_get_their_own_gpus_and_numbers),
		T(test_sched_restart_keeps_jobs_and_their_states),
		T(test_sched_restart_adopts_a_running_worker_and_keeps_its_gpu),
		T(test_sched_restart_with_a_lost_worker_fails_the_job),
		T(test_sched_restart_starts_a_queued_job_later),
		T(test_sched_restart_when_adopt_fails_treats_the_worker_as_lost),
		T(test_sched_retry_attempts_are_on_disk_while_the_next_one_runs),
		T(test_sched_end_native_job_fails_when_one_worker_failed),
		T(test_sched_end_gpulab_job_fails_when_its_worker_failed),
		T(test_sched_end_kibernetika_seed_task_whose_command_fails_is_failed),
		T(test_sched_image_without_runtime_is_refused_or_falls_back),
		T(test_sched_base_environment_is_resolved_at_acceptance_and_kept),
		T(test_sched_end_kibernetika_first_failed_replica_fails_once_restarts_are_spent),
		T(test_sched_end_openpai_null_min_failed_succeeds_with_one_failure),
		T(test_sched_end_openpai_job_whose_every_task_failed_is_failed),
		T(test_sched_cluster_job_is_submitted_once_with_all_its_workers),
		T(test_sched_cluster_gang_is_one_submission_of_its_workers_together),
		T(test_sched_cluster_pending_reason_is_the_jobs_reason),
		T(test_sched_cluster_requeue_is_a_new_attempt_not_a_failure),
		T(test_sched_cluster_cancel_of_a_pending_job_cancels_it),
		T(test_sched_cluster_never_fitting_worker_is_never_submitted),
		T(test_sched_cluster_refused_submission_fails_with_the_clusters_words),
		T(test_sched_cluster_restart_finds_its_workers_again),
	};

	/* the fakes are found by name, as the real executors are */
	assert_int_equal(exec_register(&exec_fake_ops), 0);
	assert_int_equal(exec_register(&exec_fake_cluster_ops), 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
