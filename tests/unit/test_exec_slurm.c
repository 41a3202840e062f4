/*
 * test_exec_slurm.c - the parts of the slurm executor that need no cluster:
 * `scontrol -o show node` parsing, whether a request could ever fit, the
 * GPU types asked for, Slurm's pending reasons in words, and the batch
 * script and sbatch command line for single workers, arrays and task roles
 * (each script also goes through `bash -n`); with stand-in `squeue` and
 * `scancel` scripts in [slurm] bin_dir, what a PREEMPTED job means to a
 * daemon that adopted it, signals that never wait for scancel, and a stop
 * sent again while the job is RUNNING.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "container.h"
#include "exec.h"
#include "exec_slurm_int.h"
#include "spec.h"

/* what container.c's ldconfig lines and library folders are on this machine */
#if defined(__aarch64__)
#define CONTAINER_LDCONFIG_ARCH_TEST	"AArch64"
#define CONTAINER_MULTIARCH_TEST	"aarch64-linux-gnu"
#else
#define CONTAINER_LDCONFIG_ARCH_TEST	"x86-64"
#define CONTAINER_MULTIARCH_TEST	"x86_64-linux-gnu"
#endif

static const char nodes_text[] =
	"NodeName=n1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=8 AvailableFeatures=a100 "
	"ActiveFeatures=a100 Gres=gpu:a100:4(S:0-1),shard:8 NodeAddr=10.0.0.1 RealMemory=64000 "
	"State=IDLE TmpDisk=100000 Weight=1\n"
	"NodeName=n2 CPUTot=32 AvailableFeatures=(null) Gres=gpu:rtx_3090:2,gpu:t4:1 RealMemory=128000 "
	"State=MIXED TmpDisk=0\n"
	"NodeName=n3 CPUTot=4 Gres=(null) RealMemory=8000 State=DOWN+DRAIN TmpDisk=0\n";

static void test_parse_nodes(void **state)
{
	struct exec_slurm_node *n;
	size_t count;

	(void)state;
	assert_int_equal(exec_slurm_parse_nodes(nodes_text, &n, &count), 0);
	assert_int_equal(count, 3);
	assert_string_equal(n[0].name, "n1");
	assert_int_equal(n[0].cpus, 8);
	assert_int_equal(n[0].memory_mb, 64000);
	assert_int_equal(n[0].tmp_mb, 100000);
	assert_string_equal(n[0].features, "a100");
	assert_int_equal(n[0].n_gpus, 1);	/* shard is not a GPU */
	assert_string_equal(n[0].gpus[0].type, "a100");
	assert_int_equal(n[0].gpus[0].count, 4);
	assert_int_equal(n[1].n_gpus, 2);
	assert_string_equal(n[1].gpus[0].type, "rtx_3090");
	assert_int_equal(n[1].gpus[1].count, 1);
	assert_int_equal(n[2].n_gpus, 0);
	assert_string_equal(n[2].state, "DOWN+DRAIN");
	exec_slurm_nodes_free(n, count);

	assert_int_equal(exec_slurm_parse_nodes("", &n, &count), 0);
	assert_int_equal(count, 0);
	assert_int_equal(exec_slurm_parse_nodes("NodeName=u Gres=gpu:2 CPUTot=2\n", &n, &count), 0);
	assert_string_equal(n[0].gpus[0].type, "");
	assert_int_equal(n[0].gpus[0].count, 2);
	exec_slurm_nodes_free(n, count);
}

static void test_fit(void **state)
{
	struct exec_slurm_node *n;
	size_t count;
	char why[512];
	char *types_a100[] = { "A100" }, *types_rtx[] = { "RTX 3090" }, *types_sub[] = { "3090" };
	struct spec_resources r = { .gpu_count = 4, .cpu_count = 8, .memory_gb = 32, .disk_size_gb = 10,
				    .max_price = -1 };
	const char *types[4];

	(void)state;
	assert_int_equal(exec_slurm_parse_nodes(nodes_text, &n, &count), 0);
	assert_int_equal(exec_slurm_node_fit(n, count, &r, why, sizeof(why)), 1);
	r.gpu_count = 5;
	assert_int_equal(exec_slurm_node_fit(n, count, &r, why, sizeof(why)), -1);
	assert_string_equal(why, "never satisfiable on the Slurm cluster: a worker needs 5 GPU(s) on one "
			    "node, the most any of its 3 node(s) has is 4");
	r.gpu_count = 0;
	r.cpu_count = 64;
	assert_int_equal(exec_slurm_node_fit(n, count, &r, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "needs 64 CPUs, the most any of its 3 node(s) has is 32"));
	r.cpu_count = 4;
	r.memory_gb = 200;
	assert_int_equal(exec_slurm_node_fit(n, count, &r, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "200 GB of memory"));
	/* a node that declares no TmpDisk is not held to the disk size */
	r.memory_gb = 100;
	r.disk_size_gb = 500;
	assert_int_equal(exec_slurm_node_fit(n, count, &r, why, sizeof(why)), 1);

	/* types: case, spaces and underscores do not matter; GPULab matches substrings */
	r = (struct spec_resources){ .gpu_count = 2, .gpu_types = types_rtx, .n_gpu_types = 1 };
	assert_int_equal(exec_slurm_node_fit(n, count, &r, why, sizeof(why)), 1);
	assert_int_equal(exec_slurm_gpu_types(n, count, &r, types, 4), 1);
	assert_string_equal(types[0], "rtx_3090");
	r.gpu_types = types_sub;
	assert_int_equal(exec_slurm_node_fit(n, count, &r, why, sizeof(why)), -1);
	r.gpu_type_substring = true;
	assert_int_equal(exec_slurm_node_fit(n, count, &r, why, sizeof(why)), 1);
	r = (struct spec_resources){ .gpu_count = 3, .gpu_types = types_rtx, .n_gpu_types = 1 };
	assert_int_equal(exec_slurm_node_fit(n, count, &r, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "needs 3 RTX 3090 GPU(s)"));
	r = (struct spec_resources){ .gpu_count = 1, .gpu_types = types_a100, .n_gpu_types = 1 };
	assert_int_equal(exec_slurm_gpu_types(n, count, &r, types, 4), 1);
	assert_string_equal(types[0], "a100");
	r.n_gpu_types = 0;
	assert_int_equal(exec_slurm_gpu_types(n, count, &r, types, 4), 0);	/* any type */
	exec_slurm_nodes_free(n, count);
	assert_int_equal(exec_slurm_node_fit(NULL, 0, &r, why, sizeof(why)), -1);
	assert_string_equal(why, "never satisfiable on the Slurm cluster: it has no nodes");
}

static void test_reasons(void **state)
{
	(void)state;
	assert_string_equal(exec_slurm_reason_words("Resources"), "waiting for resources");
	assert_string_equal(exec_slurm_reason_words("Priority"), "waiting behind jobs of higher priority");
	assert_string_equal(exec_slurm_reason_words("SomethingNew"), "waiting");
}

/* ---- scripts ---- */

struct sfx {
	struct spec *spec;
	struct mlfs_config cfg;
	char *envp[8];
	struct exec_start w[3];
};

static const char spec_text[] =
	"{\"name\": \"j\", \"run_timeout_seconds\": 90, \"retry_count\": 2,\n"
	" \"resources\": {\"gpu_count\": 1, \"gpu_types\": [\"A100\", \"H100\"], \"cpu_count\": 2, \"memory_gb\": 1.5},\n"
	" \"workers\": [{\"command\": \"echo 'it''s' \\\"$X\\\"\"}, {\"command\": \"true\"}, {\"command\": \"false\"}],\n"
	" \"data\": {\"output\": {\"type\": \"local\", \"path\": \"/o\"}}}\n"
	"MLFS_SPEC_END_0\n";

static int sfx_setup(void **state)
{
	struct sfx *f = calloc(1, sizeof(*f));
	struct diag d = { 0 };

	if (!f || spec_parse(&f->spec, "j.json", spec_text, strlen(spec_text) - 16, "j", &d) < 0) {
		diag_free(&d);
		return -1;
	}
	diag_free(&d);
	f->envp[0] = "PATH=/usr/bin:/bin";
	f->envp[1] = "CUDA_VISIBLE_DEVICES=";
	f->envp[2] = "X=a 'quoted' $value";
	f->envp[3] = "odd.name=1";
	f->envp[4] = "ML_DATA_PATH=/opt/ml/input";
	for (unsigned int i = 0; i < 3; i++)
		f->w[i] = (struct exec_start){
			.job = "j", .worker = i + 1, .attempt = 1, .command = f->spec->workers[i].command,
			.envp = f->envp, .dir = "/opt/ml/models", .exit_path = "/s/jobs/j/workers/1/exit.1",
			.spec = f->spec, .spec_file = "j.json", .spec_text = spec_text,
			.spec_len = strlen(spec_text), .job_dir = "/s/jobs/j", .output_id = "j.1.a1.5",
			.config_path = "/etc/mlfs.conf", .mlfs_bin = "/usr/bin/mlfs",
		};
	*state = f;
	return 0;
}

static int sfx_teardown(void **state)
{
	struct sfx *f = *state;

	spec_free(f->spec);
	free(f);
	return 0;
}

/* bash -n SCRIPT: 0 when bash can parse it. */
static int bash_parses(const char *script)
{
	char path[] = "/tmp/mlfs-slurm-script.XXXXXX", cmd[128];
	int fd = mkstemp(path), ret;

	if (fd < 0)
		return -1;
	ret = write(fd, script, strlen(script)) == (ssize_t)strlen(script) ? 0 : -1;
	close(fd);
	snprintf(cmd, sizeof(cmd), "bash -n %s", path);
	if (ret == 0)
		ret = system(cmd);
	unlink(path);
	return ret;
}

static void free_argv(char **argv, size_t argc)
{
	for (size_t i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
}

static void test_script_array(void **state)
{
	struct sfx *f = *state;
	char *script, **argv, why[256];
	size_t argc;
	const char *types[] = { "a100", "h100" };

	f->cfg.slurm.partition = "gpu";
	f->cfg.slurm.account = "ml";
	f->cfg.slurm.sbatch_args = "  --qos=high   --nice=5 ";
	assert_int_equal(exec_slurm_script(&f->cfg, f->w, 3, false, types, 2, true, &script, &argv,
					   &argc, why, sizeof(why)), 0);
	assert_int_equal(argc, 8);
	assert_string_equal(argv[0], "sbatch");
	assert_string_equal(argv[1], "--parsable");
	assert_string_equal(argv[3], "gpu");
	assert_string_equal(argv[5], "ml");
	assert_string_equal(argv[6], "--qos=high");
	assert_string_equal(argv[7], "--nice=5");
	assert_null(argv[8]);
	free(script);
	free_argv(argv, argc);
	/* as many one-letter words as its length allows: none dropped */
	f->cfg.slurm.sbatch_args = "a b";
	assert_int_equal(exec_slurm_script(&f->cfg, f->w, 3, false, types, 2, true, &script, &argv,
					   &argc, why, sizeof(why)), 0);
	assert_int_equal(argc, 8);
	assert_string_equal(argv[6], "a");
	assert_string_equal(argv[7], "b");
	assert_null(argv[8]);
	assert_non_null(strstr(script, "#SBATCH --job-name=j\n"));
	assert_non_null(strstr(script, "#SBATCH --array=1,2,3\n"));
	assert_non_null(strstr(script, "#SBATCH --output=/s/jobs/j/workers/%a/log\n"));
	assert_non_null(strstr(script, "#SBATCH --cpus-per-task=2\n"));
	assert_non_null(strstr(script, "#SBATCH --mem=1536M\n"));
	assert_non_null(strstr(script, "#SBATCH --gres=gpu:1\n#SBATCH --constraint=a100|h100\n"));
	assert_non_null(strstr(script, "#SBATCH --tmp=10G\n"));
	assert_non_null(strstr(script, "#SBATCH --time=32\n"));	/* 90 s -> 2 min, + 30 */
	assert_non_null(strstr(script, "#SBATCH --requeue\n"));
	assert_non_null(strstr(script, "mlfs_run \"$SLURM_ARRAY_TASK_ID\"\n"));
	/* values are single-quoted, Slurm's CUDA_VISIBLE_DEVICES stands, odd names go through env */
	assert_non_null(strstr(script, "export X='a '\\''quoted'\\'' $value'\n"));
	assert_null(strstr(script, "export CUDA_VISIBLE_DEVICES"));
	assert_null(strstr(script, "\nCUDA_VISIBLE_DEVICES="));
	assert_non_null(strstr(script, "MLFS_ENV+=('odd.name=1')\n"));
	assert_non_null(strstr(script, "export GPU_COUNT=1\n"));
	/* the spec's own "MLFS_SPEC_END_0" line cannot end the here-document */
	assert_non_null(strstr(script, "<<'MLFS_SPEC_END_1'\n"));
	assert_int_equal(bash_parses(script), 0);
	free(script);
	free_argv(argv, argc);

	/* one type of the cluster: a typed gres; no TmpDisk on the cluster: no --tmp */
	f->cfg = (struct mlfs_config){ 0 };
	assert_int_equal(exec_slurm_script(&f->cfg, &f->w[1], 1, false, types, 1, false, &script, &argv,
					   &argc, why, sizeof(why)), 0);
	assert_int_equal(argc, 2);
	assert_non_null(strstr(script, "#SBATCH --gres=gpu:a100:1\n"));
	assert_null(strstr(script, "--constraint"));
	assert_null(strstr(script, "--tmp"));
	assert_null(strstr(script, "--array"));
	assert_non_null(strstr(script, "#SBATCH --output=/s/jobs/j/workers/2/log\n"));
	assert_non_null(strstr(script, "mlfs_run 2\n"));
	assert_int_equal(bash_parses(script), 0);
	free(script);
	free_argv(argv, argc);
}

static void test_script_gang(void **state)
{
	struct sfx *f = *state;
	char *script, **argv, why[256];
	size_t argc;

	assert_int_equal(exec_slurm_script(NULL, f->w, 2, true, NULL, 0, true, &script, &argv, &argc,
					   why, sizeof(why)), 0);
	assert_non_null(strstr(script, "#SBATCH --ntasks=2\n"));
	assert_non_null(strstr(script, "#SBATCH --mem-per-cpu=768M\n"));
	assert_non_null(strstr(script, "#SBATCH --gpus-per-task=1\n#SBATCH --constraint=A100|H100\n"));
	assert_non_null(strstr(script, "#SBATCH --output=/s/jobs/j/slurm.log\n"));
	assert_non_null(strstr(script, "exec srun --kill-on-bad-exit=0 --export=ALL,MLFS_TASK=1"));
	assert_non_null(strstr(script, "mlfs_w1() {"));
	assert_non_null(strstr(script, "mlfs_w2() {"));
	assert_int_equal(bash_parses(script), 0);
	free(script);
	free_argv(argv, argc);

	/* GPULab's slaveName is --nodelist, and never a line of its own */
	f->spec->workers[0].res.node_name = strdup("gpu-07");
	assert_int_equal(exec_slurm_script(NULL, f->w, 1, false, NULL, 0, true, &script, &argv, &argc,
					   why, sizeof(why)), 0);
	assert_non_null(strstr(script, "#SBATCH --nodelist=gpu-07\n"));
	free(script);
	free_argv(argv, argc);
	free(f->spec->workers[0].res.node_name);
	f->spec->workers[0].res.node_name = strdup("x\n#SBATCH --uid=0");
	assert_int_equal(exec_slurm_script(NULL, f->w, 1, false, NULL, 0, true, &script, &argv, &argc,
					   why, sizeof(why)), 0);
	assert_null(strstr(script, "--nodelist"));
	assert_null(strstr(script, "--uid"));
	free(script);
	free_argv(argv, argc);
}

static void test_script_refused(void **state)
{
	struct sfx *f = *state;
	char *script, **argv, why[256];
	size_t argc;
	struct exec_start w = f->w[0];

	w.job_dir = NULL;
	assert_int_equal(exec_slurm_script(NULL, &w, 1, false, NULL, 0, true, &script, &argv, &argc,
					   why, sizeof(why)), -EINVAL);
	assert_null(script);
	f->spec->workers[1].res.gpu_count = 2;
	assert_int_equal(exec_slurm_script(NULL, f->w, 2, false, NULL, 0, true, &script, &argv, &argc,
					   why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "workers 1 and 2 differ in shape: not one array");
}

/*
 * A worker adopted after a restart of mlfs keeps its --requeue: Slurm's
 * PREEMPTED then means "queued again", and without it, "ended".  (Adoption
 * used to forget it, and a preempted job with retries counted as lost.)
 */
static void test_adopt_keeps_requeue(void **state)
{
	char dir[] = "/tmp/mlfs-squeue-XXXXXX", path[sizeof(dir) + 16];
	struct mlfs_config cfg = { .slurm = { .poll_interval = 5 } };
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	cfg.slurm.bin_dir = dir;
	snprintf(path, sizeof(path), "%s/squeue", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("#!/bin/sh\necho '4242|PREEMPTED|None|0|'\n", f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, 0755), 0);
	for (int requeue = 0; requeue <= 1; requeue++) {
		struct exec_run run = { .pidfd = -1, .requeue = requeue };
		struct exec_result res;
		struct executor *ex;

		snprintf(run.cluster_id, sizeof(run.cluster_id), "4242");
		snprintf(run.exit_path, sizeof(run.exit_path), "%s/exit.1", dir);	/* none */
		assert_int_equal(exec_slurm_ops.create(&ex, &cfg), 0);
		assert_int_equal(exec_slurm_ops.adopt(ex, &run, &res), 0);
		exec_slurm_ops.refresh(ex);
		if (requeue) {
			assert_int_equal(exec_slurm_ops.poll(ex, &run, &res), EXEC_PENDING);
		} else {
			assert_int_equal(exec_slurm_ops.poll(ex, &run, &res), 1);
			assert_int_equal(res.how, EXEC_LOST);
			assert_non_null(strstr(res.why, "ended PREEMPTED"));
		}
		exec_slurm_ops.destroy(ex);
	}
	unlink(path);
	rmdir(dir);
}

/* Writes @text as the executable @dir/@name. */
static void write_tool(const char *dir, const char *name, const char *text)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, 0755), 0);
}

/* Removes the stand-in squeue and scancel of folder @dir, the log @log, then @dir. */
static void remove_tools(const char *dir, const char *log)
{
	char tool[4096];

	unlink(log);
	snprintf(tool, sizeof(tool), "%s/scancel", dir);
	unlink(tool);
	snprintf(tool, sizeof(tool), "%s/squeue", dir);
	unlink(tool);
	rmdir(dir);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * signal() returns at once although scancel takes 0.3 s (the scheduler
 * calls it with its lock held), and destroy() still sends everything, in
 * order: cancels of pending jobs (consecutive ones may share a call), then
 * USR2 to the batch shell of a running one.
 */
static void test_signal_does_not_wait_for_scancel(void **state)
{
	char dir[] = "/tmp/mlfs-scancel-XXXXXX", tool[256], log[64], text[4096], *a, *b, *c;
	struct mlfs_config cfg = { .slurm = { .poll_interval = 5 } };
	struct exec_run p1 = { .pidfd = -1 }, p2 = { .pidfd = -1 }, r = { .pidfd = -1 };
	struct exec_result res;
	struct executor *ex;
	double t0;
	size_t n;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	cfg.slurm.bin_dir = dir;
	snprintf(log, sizeof(log), "%s/scancel.log", dir);
	write_tool(dir, "squeue", "#!/bin/sh\necho '7003|RUNNING|None|0|'\n");
	snprintf(tool, sizeof(tool), "#!/bin/sh\nsleep 0.3\necho \"$*\" >>%s\n", log);
	write_tool(dir, "scancel", tool);
	snprintf(p1.cluster_id, sizeof(p1.cluster_id), "7001");
	snprintf(p2.cluster_id, sizeof(p2.cluster_id), "7002");
	snprintf(r.cluster_id, sizeof(r.cluster_id), "7003");
	assert_int_equal(exec_slurm_ops.create(&ex, &cfg), 0);
	assert_int_equal(exec_slurm_ops.adopt(ex, &r, &res), 0);
	exec_slurm_ops.refresh(ex);			/* 7003 is RUNNING */
	t0 = now_s();
	assert_int_equal(exec_slurm_ops.signal(ex, &p1, SIGKILL), 0);
	assert_int_equal(exec_slurm_ops.signal(ex, &p2, SIGTERM), 0);
	assert_int_equal(exec_slurm_ops.signal(ex, &r, SIGTERM), 0);
	assert_true(now_s() - t0 < 0.25);
	exec_slurm_ops.destroy(ex);
	f = fopen(log, "r");
	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	a = strstr(text, "7001");
	b = strstr(text, "7002");
	c = strstr(text, "-b -s USR2 7003\n");
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_true(a < b && b < c);
	assert_null(strstr(text, "-s KILL"));		/* KILL cancels the whole job */
	assert_int_equal(strlen(c), strlen("-b -s USR2 7003\n"));	/* sent last */
	remove_tools(dir, log);
}

/* The lines of file @path that are exactly @line. */
static int count_lines(const char *path, const char *line)
{
	char buf[256];
	int n = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(buf, sizeof(buf), f))
		n += strcmp(buf, line) == 0;
	fclose(f);
	return n;
}

/*
 * A stop's USR2 is sent again at each snapshot that still has the job
 * RUNNING (one sent before slurmd ran the batch shell is lost), not once it
 * has ended, and not after a KILL (which cancels the whole job).
 */
static void test_stop_is_sent_again_while_running(void **state)
{
	char dir[] = "/tmp/mlfs-restop-XXXXXX", tool[512], log[64], flag[64];
	struct mlfs_config cfg = { .slurm = { .poll_interval = 1 } };
	struct exec_run r = { .pidfd = -1 };
	struct exec_result res;
	struct executor *ex;

	(void)state;
	assert_non_null(mkdtemp(dir));
	cfg.slurm.bin_dir = dir;
	snprintf(log, sizeof(log), "%s/scancel.log", dir);
	snprintf(flag, sizeof(flag), "%s/running", dir);
	snprintf(tool, sizeof(tool), "#!/bin/sh\nif [ -e %s ]; then echo '7005|RUNNING|None|0|'; "
		 "else echo '7005|CANCELLED|None|0|'; fi\n", flag);
	write_tool(dir, "squeue", tool);
	snprintf(tool, sizeof(tool), "#!/bin/sh\necho \"$*\" >>%s\n", log);
	write_tool(dir, "scancel", tool);
	write_tool(dir, "running", "");
	snprintf(r.cluster_id, sizeof(r.cluster_id), "7005");
	assert_int_equal(exec_slurm_ops.create(&ex, &cfg), 0);
	assert_int_equal(exec_slurm_ops.adopt(ex, &r, &res), 0);
	exec_slurm_ops.refresh(ex);
	assert_int_equal(exec_slurm_ops.signal(ex, &r, SIGTERM), 0);
	for (int i = 0; i < 2; i++) {		/* two snapshots still RUNNING */
		usleep(1100000);
		exec_slurm_ops.refresh(ex);
	}
	unlink(flag);				/* then it ended */
	usleep(1100000);
	exec_slurm_ops.refresh(ex);
	usleep(1100000);
	exec_slurm_ops.refresh(ex);
	usleep(200000);				/* the killer thread sends */
	assert_int_equal(count_lines(log, "-b -s USR2 7005\n"), 3);
	/* running again (a requeue): not asked again; killed: a cancel of the whole job */
	write_tool(dir, "running", "");
	usleep(1100000);
	exec_slurm_ops.refresh(ex);
	assert_int_equal(exec_slurm_ops.signal(ex, &r, SIGKILL), 0);
	usleep(1100000);
	exec_slurm_ops.refresh(ex);
	exec_slurm_ops.destroy(ex);
	assert_int_equal(count_lines(log, "-b -s USR2 7005\n"), 3);
	assert_int_equal(count_lines(log, "7005\n"), 1);
	unlink(flag);
	remove_tools(dir, log);
}

/*
 * A running job's exit file (a gang's task that ended before its job) is
 * looked for once a snapshot, not at every poll: the scheduler polls at
 * each of its passes, and every submission makes one.
 */
static void test_exit_file_once_a_snapshot(void **state)
{
	char dir[] = "/tmp/mlfs-squeue-XXXXXX", path[4096];
	struct mlfs_config cfg = { .slurm = { .poll_interval = 1 } };
	struct exec_run run = { .pidfd = -1 };
	struct exec_result res;
	struct executor *ex;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	cfg.slurm.bin_dir = dir;
	write_tool(dir, "squeue", "#!/bin/sh\necho '7100|RUNNING|None|0|'\n");
	snprintf(run.cluster_id, sizeof(run.cluster_id), "7100");
	snprintf(run.exit_path, sizeof(run.exit_path), "%s/exit.1", dir);
	assert_int_equal(exec_slurm_ops.create(&ex, &cfg), 0);
	assert_int_equal(exec_slurm_ops.adopt(ex, &run, &res), 0);
	exec_slurm_ops.refresh(ex);
	assert_int_equal(exec_slurm_ops.poll(ex, &run, &res), 0);	/* running, no exit file */
	f = fopen(run.exit_path, "w");
	assert_non_null(f);
	fputs("exited 3\nupload 0\n", f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(exec_slurm_ops.poll(ex, &run, &res), 0);	/* same snapshot: not looked */
	usleep(1100 * 1000);
	exec_slurm_ops.refresh(ex);					/* poll_interval later */
	assert_int_equal(exec_slurm_ops.poll(ex, &run, &res), 1);
	assert_int_equal(res.how, EXEC_EXITED);
	assert_int_equal(res.code, 3);
	exec_slurm_ops.destroy(ex);
	unlink(run.exit_path);
	snprintf(path, sizeof(path), "%s/squeue", dir);
	unlink(path);
	rmdir(dir);
}

/* ---- a worker with an image ---- */

/* What the scheduler hands a worker with an image (sched_container_prepare's), in @f->w[0]. */
struct cfx {
	struct container_runtime rt;
	struct container_run run;
	int gpus[1];
	char *pull[10], *rm[7];
};

static void cfx_fill(struct cfx *c, struct sfx *f, const char *podman, const char *mlfs)
{
	char *pull[] = { (char *)mlfs, "image", "pull", "/etc/mlfs.conf", "127.0.0.1:5000/team/tf:1.15",
			 "--progress", "/s/jobs/j/workers/1/pull", NULL };
	char *rm[] = { (char *)podman, "rm", "--force", "--ignore", "--time=2", "mlfs-j-1-a1-5", NULL };

	*c = (struct cfx){ .gpus = { 0 } };
	c->rt.usable = true;
	snprintf(c->rt.podman, sizeof(c->rt.podman), "%s", podman);
	snprintf(c->rt.oci, sizeof(c->rt.oci), "/usr/sbin/runc");
	c->rt.nofile_soft = 1024;
	c->rt.nofile_hard = 4096;
	c->rt.nproc = 4096;
	c->run = (struct container_run){
		.rt = &c->rt, .image = "127.0.0.1:5000/team/tf:1.15", .name = "mlfs-j-1-a1-5",
		.command = f->w[0].command, .uid = 1000, .gid = 1000, .workdir = "/opt/ml/models",
		.ml_dir = "/s/jobs/j/workers/1/view", .env_file = "/s/jobs/j/workers/1/env.1",
		.memory = 1536ULL << 20, .gpus = c->gpus, .n_gpus = 1,
	};
	memcpy(c->pull, pull, sizeof(pull));
	memcpy(c->rm, rm, sizeof(rm));
	f->w[0].container = &c->run;
	f->w[0].pull_argv = c->pull;
	f->w[0].cleanup_argv = c->rm;
	f->w[0].uid = 1000;
	f->w[0].gid = 1000;
}

/*
 * The script's lines for a worker with an image: container.c's `podman
 * run`, rootless for an ordinary owner (no --user, --memory, --ulimit; the
 * gateway's view path, env file and GPUs left for the node to add), rootful
 * for root; the pull and the cleanup as the scheduler made them; the
 * variables as --env-file text, not exported; a worker without an image
 * beside it unchanged.
 */
static void test_script_container_lines(void **state)
{
	struct sfx *f = *state;
	struct cfx c;
	char *script, **argv, why[256], *w2;
	size_t argc;

	f->envp[5] = "NL=two\nlines";
	cfx_fill(&c, f, "/usr/bin/podman", "/usr/bin/mlfs");
	assert_int_equal(exec_slurm_script(NULL, f->w, 2, true, NULL, 0, true, &script, &argv, &argc,
					   why, sizeof(why)), 0);
	assert_non_null(strstr(script, "\tIMAGE='127.0.0.1:5000/team/tf:1.15'\n"));
	assert_non_null(strstr(script, "\tPODMAN=('/usr/bin/podman' 'run' '--rm' '--pull=never' "
			       "'--name=mlfs-j-1-a1-5' '--runtime=/usr/sbin/runc' '--userns=keep-id' "
			       "'--network=host' '--log-driver=none' '--workdir=/opt/ml/models' "
			       "'--entrypoint=/bin/sh')\n"));
	assert_non_null(strstr(script, "\tPODMAN_TAIL=('127.0.0.1:5000/team/tf:1.15' '-c' "
			       "'echo '\\''it'\\'''\\''s'\\'' \"$X\"')\n"));
	assert_non_null(strstr(script, "\tPULL=('/usr/bin/mlfs' 'image' 'pull' '/etc/mlfs.conf' "
			       "'127.0.0.1:5000/team/tf:1.15' '--progress' '/s/jobs/j/workers/1/pull')\n"));
	assert_non_null(strstr(script, "\tPODMAN_RM=('/usr/bin/podman' 'rm' '--force' '--ignore' "
			       "'--time=2' 'mlfs-j-1-a1-5')\n"));
	assert_non_null(strstr(script, "\tPODMAN_STOP=('/usr/bin/podman' 'stop' '--ignore' '--time=2' "
			       "'mlfs-j-1-a1-5')\n"));
	/* its view is mounted in rootless podman's namespaces, which its containers see */
	assert_non_null(strstr(script, "\tPODMAN_NS=('/usr/bin/podman' 'unshare')\n"));
	assert_null(strstr(script, "--user="));
	assert_null(strstr(script, "--memory"));
	assert_null(strstr(script, "--ulimit"));
	assert_null(strstr(script, "/s/jobs/j/workers/1/view"));
	assert_null(strstr(script, "env.1"));
	assert_null(strstr(script, "--device=/dev/nvidia0"));
	/* its variables for the env file, quoted; Slurm's GPUs stand; a newline's cannot be carried */
	assert_non_null(strstr(script, "\tCENV='PATH=/usr/bin:/bin\nX=a '\\''quoted'\\'' $value\n"
			       "odd.name=1\nML_DATA_PATH=/opt/ml/input\nGPU_COUNT=1\n'\n"));
	assert_non_null(strstr(script, "\tCENV_LEFT='NL'\n"));
	assert_non_null(strstr(script, "NV_DEVICES=('/dev/nvidiactl' "));
	assert_non_null(strstr(script, "NV_LIBS=('libnvidia-ml.so.' "));
	assert_non_null(strstr(script, "NV_DIRS=('/usr/lib/"));
	assert_non_null(strstr(script, "NV_ARCH="));
	/* not exported to the batch shell, whose podman they would steer; worker 2's are */
	w2 = strstr(script, "mlfs_w2() {");
	assert_non_null(w2);
	assert_true(strstr(script, "export X=") > w2);
	assert_int_equal(bash_parses(script), 0);
	free(script);
	free_argv(argv, argc);

	/* root's job: rootful podman, as the local executor's, with its memory */
	f->w[0].uid = f->w[0].gid = 0;
	c.run.uid = c.run.gid = 0;
	assert_int_equal(exec_slurm_script(NULL, f->w, 1, false, NULL, 0, true, &script, &argv, &argc,
					   why, sizeof(why)), 0);
	assert_non_null(strstr(script, "'--ulimit=nofile=1024:4096' '--ulimit=nproc=4096:4096' "
			       "'--user=0:0' '--network=host'"));
	assert_non_null(strstr(script, "'--memory=1610612736' '--memory-swap=1610612736'"));
	assert_null(strstr(script, "--userns"));
	assert_null(strstr(script, "PODMAN_NS=('"));
	assert_int_equal(bash_parses(script), 0);
	free(script);
	free_argv(argv, argc);
}

/* @path's text into @buf ("" when it cannot be read). */
static const char *slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

/* Whether @text ends with @tail. */
static bool ends_with(const char *text, const char *tail)
{
	size_t a = strlen(text), b = strlen(tail);

	return a >= b && strcmp(text + a - b, tail) == 0;
}

/*
 * The script run with stand-ins for mlfs and podman, as Slurm would run
 * it: the pull first, then `podman run` with what only the node knows
 * before the image (the env file, the scratch folders at /opt/ml, Slurm's
 * GPUs, a missing one said in the log), the env file holding the worker's
 * variables and Slurm's, the container removed after and its exit status
 * the exit file's; a pull that fails ends it staging-in failed, with the
 * pull's words the log's last line.
 */
static void test_script_container_runs(void **state)
{
	struct sfx *f = *state;
	char dir[] = "/tmp/mlfs-ctr-test-XXXXXX", podman[4200], mlfs[4200], path[4200], cmd[8192];
	char text[8192], *script, **argv, why[256], *envf;
	struct cfx c;
	size_t argc;
	FILE *sf;

	assert_non_null(mkdtemp(dir));
	snprintf(podman, sizeof(podman), "%s/podman", dir);
	snprintf(mlfs, sizeof(mlfs), "%s/mlfs", dir);
	snprintf(cmd, sizeof(cmd), "#!/bin/sh\nif [ \"$1\" = run ]; then\n\tprintf '%%s\\n' \"$@\" >%s/args\n"
		 "\tfor a; do case $a in --env-file=*) cp \"${a#--env-file=}\" %s/env;; esac; done\n"
		 "\techo inside; exit 3\nfi\necho \"$@\" >>%s/rm\n", dir, dir, dir);
	write_tool(dir, "podman", cmd);
	/* the driver's libraries as `ldconfig -p` lists them: 64-bit, first path, sonames only */
	write_tool(dir, "ldconfig", "#!/bin/sh\nprintf '%s\\n' '123 libs found in cache' "
		   "'\tlibcuda.so.1 (libc6) => /drv32/libcuda.so.1' "
		   "'\tlibcuda.so.1 (libc6," CONTAINER_LDCONFIG_ARCH_TEST ") => /drv/libcuda.so.1' "
		   "'\tlibcuda.so (libc6," CONTAINER_LDCONFIG_ARCH_TEST ") => /drv/libcuda.so' "
		   "'\tlibnvidia-ml.so.1 (libc6," CONTAINER_LDCONFIG_ARCH_TEST ", OS ABI: Linux 3.2.0) => "
		   "/drv/libnvidia-ml.so.1' "
		   "'\tlibfoo.so.1 (libc6," CONTAINER_LDCONFIG_ARCH_TEST ") => /lib/libfoo.so.1' "
		   "'\tlibcuda.so.1 (libc6," CONTAINER_LDCONFIG_ARCH_TEST ") => /second/libcuda.so.1'\n");
	write_tool(dir, "mlfs", "#!/bin/sh\ncase $1 in\nlogpipe) exec cat >>\"$4\";;\n"
		   "image) [ -z \"${FAIL_PULL:-}\" ] && echo 'mlfs: pulled' && exit 0\n"
		   "\techo \"mlfs: cannot pull $4: manifest unknown\"; exit 1;;\nesac\nexit 9\n");
	cfx_fill(&c, f, podman, mlfs);
	snprintf(path, sizeof(path), "%s/jobs/j", dir);
	f->w[0].job_dir = path;
	f->w[0].output_id = NULL;
	f->w[0].mlfs_bin = mlfs;
	assert_int_equal(exec_slurm_script(NULL, f->w, 1, false, NULL, 0, true, &script, &argv, &argc,
					   why, sizeof(why)), 0);
	snprintf(path, sizeof(path), "%s/job.sh", dir);
	sf = fopen(path, "w");
	assert_non_null(sf);
	fputs(script, sf);
	assert_int_equal(fclose(sf), 0);
	free(script);
	free_argv(argv, argc);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/jobs/j/workers/1 && cd %s && env -i TMPDIR=%s "
		 "MLFS_LDCONFIG=%s/ldconfig SLURM_JOB_ID=7 SLURM_JOB_GPUS=5,7 CUDA_VISIBLE_DEVICES=5,7 "
		 "bash job.sh", dir, dir, dir, dir);
	assert_int_not_equal(system(cmd), 0);		/* the command exited 3 */

	snprintf(path, sizeof(path), "%s/args", dir);
	slurp(path, text, sizeof(text));
	assert_non_null(strstr(text, "run\n--rm\n--pull=never\n"));
	assert_non_null(strstr(text, "--userns=keep-id\n"));
	/* each library bound where a Debian and a RHEL image's loader look, from its first path */
	assert_non_null(strstr(text, "--volume=/drv/libcuda.so.1:/usr/lib/" CONTAINER_MULTIARCH_TEST
			       "/libcuda.so.1:ro\n--volume=/drv/libcuda.so.1:/usr/lib64/libcuda.so.1:ro\n"));
	assert_non_null(strstr(text, "--volume=/drv/libnvidia-ml.so.1:/usr/lib64/libnvidia-ml.so.1:ro\n"));
	assert_null(strstr(text, "/drv32/"));
	assert_null(strstr(text, "/second/"));
	assert_null(strstr(text, "libfoo"));
	assert_null(strstr(text, "libcuda.so:"));
	envf = strstr(text, "--entrypoint=/bin/sh\n--env-file=");
	assert_non_null(envf);
	snprintf(cmd, sizeof(cmd), "\n--volume=%s/jobs/j/workers/1/ml:/opt/ml\n--volume=/drv/", dir);
	assert_non_null(strstr(envf, cmd));
	assert_true(ends_with(envf, ":ro\n127.0.0.1:5000/team/tf:1.15\n-c\necho 'it''s' \"$X\"\n"));
	snprintf(path, sizeof(path), "%s/env", dir);
	slurp(path, text, sizeof(text));
	assert_non_null(strstr(text, "PATH=/usr/bin:/bin\nX=a 'quoted' $value\nodd.name=1\n"));
	assert_non_null(strstr(text, "GPU_COUNT=1\n"));
	assert_non_null(strstr(text, "SLURM_JOB_ID=7\n"));
	assert_non_null(strstr(text, "SLURM_JOB_GPUS=5,7\n"));
	/* inside, its two GPUs are the only ones: 0 and 1 */
	assert_non_null(strstr(text, "CUDA_VISIBLE_DEVICES=0,1\n"));
	snprintf(path, sizeof(path), "%s/jobs/j/workers/1/log", dir);
	slurp(path, text, sizeof(text));
	assert_non_null(strstr(text, "mlfs: pulled\n"));
	assert_non_null(strstr(text, "mlfs: Slurm gave GPU 5, and "));
	assert_non_null(strstr(text, "inside\n"));
	snprintf(path, sizeof(path), "%s/jobs/j/workers/1/exit.1", dir);
	assert_string_equal(slurp(path, text, sizeof(text)), "exited 3\n");
	snprintf(path, sizeof(path), "%s/jobs/j/workers/1/phase", dir);
	assert_string_equal(slurp(path, text, sizeof(text)), "running\n");
	snprintf(path, sizeof(path), "%s/rm", dir);
	assert_string_equal(slurp(path, text, sizeof(text)), "rm --force --ignore --time=2 mlfs-j-1-a1-5\n");
	snprintf(path, sizeof(path), "%s/jobs/j/workers/1/ml/output", dir);
	assert_int_equal(access(path, F_OK), 0);
	snprintf(cmd, sizeof(cmd), "! ls -d %s/mlfs-ctr.* 2>/dev/null | grep -q .", dir);
	assert_int_equal(system(cmd), 0);			/* the env file went with it */

	/* a pull that fails: staging-in failed, and the pull's words last in the log */
	snprintf(cmd, sizeof(cmd), "cd %s && env -i TMPDIR=%s FAIL_PULL=1 bash job.sh", dir, dir);
	assert_int_not_equal(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/jobs/j/workers/1/exit.1", dir);
	assert_string_equal(slurp(path, text, sizeof(text)), "staging-in failed\n");
	snprintf(path, sizeof(path), "%s/jobs/j/workers/1/phase", dir);
	assert_string_equal(slurp(path, text, sizeof(text)), "staging_in_failed\n");
	snprintf(path, sizeof(path), "%s/jobs/j/workers/1/log", dir);
	assert_true(ends_with(slurp(path, text, sizeof(text)),
			      "\nmlfs: cannot pull 127.0.0.1:5000/team/tf:1.15: manifest unknown\n"));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_nodes),
		cmocka_unit_test(test_fit),
		cmocka_unit_test(test_reasons),
		cmocka_unit_test_setup_teardown(test_script_array, sfx_setup, sfx_teardown),
		cmocka_unit_test_setup_teardown(test_script_gang, sfx_setup, sfx_teardown),
		cmocka_unit_test_setup_teardown(test_script_refused, sfx_setup, sfx_teardown),
		cmocka_unit_test(test_adopt_keeps_requeue),
		cmocka_unit_test(test_signal_does_not_wait_for_scancel),
		cmocka_unit_test(test_stop_is_sent_again_while_running),
		cmocka_unit_test(test_exit_file_once_a_snapshot),
		cmocka_unit_test_setup_teardown(test_script_container_lines, sfx_setup, sfx_teardown),
		cmocka_unit_test_setup_teardown(test_script_container_runs, sfx_setup, sfx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
