/*
 * test_spec_openpai.c - unit tests of the OpenPAI v1 format
 * (sched/spec_openpai.c) and of what spec.c does for every format: comment
 * blanking before jansson, and detecting the format from the document's
 * shape.
 *
 * OpenPAI's distributed TensorFlow example is kept exactly as its job
 * reference prints it, // comments and all, and checked field by field.
 * A worker's environment is checked twice: as the model holds it (the
 * static PAI_* variables plus what spec_runtime_env adds for a fake
 * placement), and by running /bin/sh with exactly that environment, as a
 * worker that prints its environment would.  Bad specs assert every
 * message exactly ("file:line:col: field: message"), so positions are
 * tested with the words.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>

#include "diag.h"
#include "spec.h"
#include "spec_check.h"

/* OpenPAI's job reference, "A complete example", as printed. */
static const char tf_example[] =
	"{\n"
	"  \"jobName\": \"tensorflow-distributed-jobguid\",\n"
	"  // customized tensorflow docker image with hdfs, cuda and cudnn support\n"
	"  \"image\": \"your_docker_registry/pai.run.tensorflow\",\n"
	"  // this example uses cifar10 dataset, which is available from\n"
	"  // http://www.cs.toronto.edu/~kriz/cifar.html\n"
	"  \"dataDir\": \"$PAI_DEFAULT_FS_URI/path/tensorflow-distributed-jobguid/data\",\n"
	"  \"outputDir\": \"$PAI_DEFAULT_FS_URI/path/tensorflow-distributed-jobguid/output\",\n"
	"  // this example uses code from tensorflow benchmark https://git.io/vF4wT\n"
	"  \"codeDir\": \"$PAI_DEFAULT_FS_URI/path/tensorflow-distributed-jobguid/code\",\n"
	"  \"virtualCluster\": \"your_virtual_cluster\",\n"
	"  \"taskRoles\": [\n"
	"    {\n"
	"      \"name\": \"ps_server\",\n"
	"      // use 2 ps servers in this job\n"
	"      \"taskNumber\": 2,\n"
	"      \"cpuNumber\": 2,\n"
	"      \"memoryMB\": 8192,\n"
	"      \"gpuNumber\": 0,\n"
	"      \"portList\": [\n"
	"        {\n"
	"          \"label\": \"http\",\n"
	"          \"beginAt\": 0,\n"
	"          \"portNumber\": 1\n"
	"        },\n"
	"        {\n"
	"          \"label\": \"ssh\",\n"
	"          \"beginAt\": 0,\n"
	"          \"portNumber\": 1\n"
	"        }\n"
	"      ],\n"
	"      // run tf_cnn_benchmarks.py in code directory\n"
	"      // please refer to https://www.tensorflow.org/performance/performance_models#executing_the_script for arguments' detail\n"
	"      // if there's no `scipy` in the docker image, need to install it first\n"
	"      \"command\": \"pip --quiet install scipy && python code/tf_cnn_benchmarks.py --local_parameter_device=cpu --batch_size=$batch_size --model=$job_model --variable_update=parameter_server --data_dir=$PAI_DATA_DIR --data_name=cifar10 --train_dir=$PAI_OUTPUT_DIR --ps_hosts=$PAI_TASK_ROLE_ps_server_HOST_LIST --worker_hosts=$PAI_TASK_ROLE_worker_HOST_LIST --job_name=ps --task_index=$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX\"\n"
	"    },\n"
	"    {\n"
	"      \"name\": \"worker\",\n"
	"      // use 2 workers in this job\n"
	"      \"taskNumber\": 2,\n"
	"      \"cpuNumber\": 2,\n"
	"      \"memoryMB\": 16384,\n"
	"      \"gpuNumber\": 4,\n"
	"      \"portList\": [\n"
	"        {\n"
	"          \"label\": \"http\",\n"
	"          \"beginAt\": 0,\n"
	"          \"portNumber\": 1\n"
	"        },\n"
	"        {\n"
	"          \"label\": \"ssh\",\n"
	"          \"beginAt\": 0,\n"
	"          \"portNumber\": 1\n"
	"        }\n"
	"      ],\n"
	"      \"command\": \"pip --quiet install scipy && python code/tf_cnn_benchmarks.py --local_parameter_device=cpu --batch_size=$batch_size --model=$job_model --variable_update=parameter_server --data_dir=$PAI_DATA_DIR --data_name=cifar10 --train_dir=$PAI_OUTPUT_DIR --ps_hosts=$PAI_TASK_ROLE_ps_server_HOST_LIST --worker_hosts=$PAI_TASK_ROLE_worker_HOST_LIST --job_name=worker --task_index=$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX\",\n"
	"      // kill the entire job when 2 worker tasks completed\n"
	"      \"minSucceededTaskCount\": 2\n"
	"    }\n"
	"  ],\n"
	"  \"retryCount\": 0,\n"
	"  \"jobEnvs\": {\n"
	"    \"batch_size\": 32,\n"
	"    \"job_model\": \"resnet20\"\n"
	"  },\n"
	"  \"extras\": {\n"
	"  }\n"
	"}\n";

static const char ps_command[] =
	"pip --quiet install scipy && python code/tf_cnn_benchmarks.py --local_parameter_device=cpu "
	"--batch_size=$batch_size --model=$job_model --variable_update=parameter_server "
	"--data_dir=$PAI_DATA_DIR --data_name=cifar10 --train_dir=$PAI_OUTPUT_DIR "
	"--ps_hosts=$PAI_TASK_ROLE_ps_server_HOST_LIST --worker_hosts=$PAI_TASK_ROLE_worker_HOST_LIST "
	"--job_name=ps --task_index=$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX";

/* ---- helpers ---- */

static struct spec *parse_ok(const char *text)
{
	struct spec *s = NULL;
	struct diag d;
	int ret;

	diag_init(&d);
	ret = spec_parse(&s, "x.json", text, strlen(text), "x", &d);
	diag_print(&d, stderr);
	assert_int_equal(ret, 0);
	assert_int_equal(d.n, 0);
	assert_non_null(s);
	diag_free(&d);
	return s;
}

#define EXPECT_ERRORS(text, ...) SPEC_EXPECT_ERRORS("x.json", "x", (text), __VA_ARGS__)

/* Checks @env (@n entries) is exactly NAME, VALUE, ... of @want, in order. */
static void check_env(const struct spec_env *env, size_t n, const char *const *want)
{
	size_t k = 0;

	while (want[k])
		k++;
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "env: %s=%s\n", env[i].name, env[i].value);
	assert_int_equal(n * 2, k);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(env[i].name, want[2 * i]);
		assert_string_equal(env[i].value, want[2 * i + 1]);
	}
}

#define EXPECT_ENV(env, n, ...) check_env((env), (n), (const char *const[]){ __VA_ARGS__, NULL })

/* A worker's whole environment: its own, the job's, then the runtime's. */
struct env_list {
	struct spec_env vars[256];
	size_t n;
};

static void env_list_add(void *arg, const char *name, const char *value)
{
	struct env_list *l = arg;

	assert_true(l->n < 256);
	l->vars[l->n].name = strdup(name);
	l->vars[l->n++].value = strdup(value);
}

static void env_list_free(struct env_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->vars[i].name);
		free(l->vars[i].value);
	}
	l->n = 0;
}

static const char *env_list_get(const struct env_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->vars[i].name, name) == 0)
			return l->vars[i].value;
	return NULL;
}

static void worker_env(const struct spec *s, size_t w, const struct spec_runtime *rt,
		       struct env_list *l)
{
	const struct spec_worker *sw = &s->workers[w];

	for (size_t i = 0; i < sw->n_env; i++)
		env_list_add(l, sw->env[i].name, sw->env[i].value);
	for (size_t i = 0; i < s->n_env; i++)
		env_list_add(l, s->env[i].name, s->env[i].value);
	spec_runtime_env(s, w, rt, env_list_add, l);
}

/* Runs /bin/sh -c @cmd with exactly @l as its environment; its stdout (malloc'd). */
static char *run_worker(const struct env_list *l, const char *cmd)
{
	char *out = calloc(1, 65536);
	int fds[2], status;
	size_t used = 0;
	ssize_t got;
	pid_t pid;

	assert_non_null(out);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		clearenv();
		for (size_t i = 0; i < l->n; i++)
			setenv(l->vars[i].name, l->vars[i].value, 1);
		dup2(fds[1], 1);
		close(fds[0]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	while ((got = read(fds[0], out + used, 65535 - used)) > 0)
		used += (size_t)got;
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return out;
}

/* A fake placement: every worker on @host, worker w's ports from @ports[w]. */
static struct spec_runtime fake_rt(const char *host, int *const *ports)
{
	struct spec_runtime rt = { .job_id = "7", .host = host, .ports = ports, .user = "alice" };

	return rt;
}

/* ---- the documentation's example ---- */

static void test_openpai_tensorflow_example_maps_roles_workers_and_resources(void **state)
{
	struct spec *s = parse_ok(tf_example);

	(void)state;
	assert_int_equal(s->format, SPEC_OPENPAI);
	assert_string_equal(s->name, "tensorflow-distributed-jobguid");
	assert_int_equal(s->type, SPEC_TRAINING);
	assert_true(s->gang);
	assert_int_equal(s->retry_count, 0);
	assert_int_equal(s->wait_timeout, -1);
	assert_int_equal(s->run_timeout, -1);
	assert_int_equal(s->n_roles, 2);
	assert_string_equal(s->roles[0].name, "ps_server");
	assert_int_equal(s->roles[0].first, 0);
	assert_int_equal(s->roles[0].n, 2);
	assert_int_equal(s->roles[0].min_failed, 1);
	assert_int_equal(s->roles[0].min_succeeded, -1);
	assert_string_equal(s->roles[1].name, "worker");
	assert_int_equal(s->roles[1].first, 2);
	assert_int_equal(s->roles[1].n, 2);
	assert_int_equal(s->roles[1].min_failed, 1);
	assert_int_equal(s->roles[1].min_succeeded, 2);
	assert_int_equal(s->n_workers, 4);
	for (size_t i = 0; i < 4; i++) {
		const struct spec_worker *w = &s->workers[i];
		bool ps = i < 2;

		assert_string_equal(w->role, ps ? "ps_server" : "worker");
		assert_int_equal(w->role_index, i % 2);
		assert_int_equal(w->res.gpu_count, ps ? 0 : 4);
		assert_int_equal(w->res.cpu_count, 2);
		assert_true(w->res.memory_gb == (ps ? 8.0 : 16.0));
		assert_int_equal(w->res.n_gpu_types, 0);
		assert_true(w->res.max_price < 0);
		assert_null(w->res.min_cuda_version);
		assert_int_equal(w->n_ports, 2);
		assert_string_equal(w->ports[0].label, "http");
		assert_int_equal(w->ports[0].count, 1);
		assert_string_equal(w->ports[1].label, "ssh");
		assert_int_equal(w->ports[1].count, 1);
		assert_null(w->work_dir);
	}
	assert_string_equal(s->workers[0].command, ps_command);
	assert_non_null(strstr(s->workers[3].command, "--job_name=worker --task_index="));
	assert_int_equal(s->n_env, 2);
	assert_string_equal(s->env[0].name, "batch_size");
	assert_string_equal(s->env[0].value, "32");
	assert_string_equal(s->env[1].name, "job_model");
	assert_string_equal(s->env[1].value, "resnet20");
	for (size_t i = 0; i < s->n_workers; i++) {
		assert_string_equal(s->workers[i].image.ref, "your_docker_registry/pai.run.tensorflow");
		assert_int_equal(s->workers[i].image.shm_mb, 64);	/* OpenPAI's default */
	}
	EXPECT_IGNORED(s,
		"dataDir: an HDFS path mlfs does not fetch; passed on as PAI_DATA_DIR unchanged",
		"outputDir: an HDFS path mlfs does not fetch; passed on as PAI_OUTPUT_DIR unchanged",
		"codeDir: an HDFS path mlfs does not fetch; passed on as PAI_CODE_DIR unchanged",
		"virtualCluster: mlfs schedules on this node's resources; there are no virtual clusters",
		"extras: kept for OpenPAI's tools; mlfs does not use it");
	spec_free(s);
}

static void test_openpai_tensorflow_example_gives_every_pai_variable(void **state)
{
	struct spec *s = parse_ok(tf_example);

	(void)state;
	EXPECT_ENV(s->workers[3].env, s->workers[3].n_env,
		"PAI_JOB_NAME", "tensorflow-distributed-jobguid",
		"PAI_DEFAULT_FS_URI", "",
		"PAI_TASK_ROLE_COUNT", "2",
		"PAI_TASK_ROLE_LIST", "ps_server,worker",
		"PAI_TASK_ROLE_TASK_COUNT_ps_server", "2",
		"PAI_RESOURCE_ps_server", "0,2,8192,64",
		"PAI_MIN_FAILED_TASK_COUNT_ps_server", "1",
		"PAI_MIN_SUCCEEDED_TASK_COUNT_ps_server", "",
		"PAI_TASK_ROLE_TASK_COUNT_worker", "2",
		"PAI_RESOURCE_worker", "4,2,16384,64",
		"PAI_MIN_FAILED_TASK_COUNT_worker", "1",
		"PAI_MIN_SUCCEEDED_TASK_COUNT_worker", "2",
		"PAI_DATA_DIR", "$PAI_DEFAULT_FS_URI/path/tensorflow-distributed-jobguid/data",
		"PAI_OUTPUT_DIR", "$PAI_DEFAULT_FS_URI/path/tensorflow-distributed-jobguid/output",
		"PAI_CODE_DIR", "$PAI_DEFAULT_FS_URI/path/tensorflow-distributed-jobguid/code",
		"PAI_CURRENT_TASK_ROLE_NAME", "worker",
		"PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX", "1");
	assert_string_equal(s->workers[0].env[15].name, "PAI_CURRENT_TASK_ROLE_NAME");
	assert_string_equal(s->workers[0].env[15].value, "ps_server");
	assert_string_equal(s->workers[0].env[16].value, "0");
	spec_free(s);
}

/* The example's own command line, expanded by a shell as each task sees it. */
static void test_openpai_tensorflow_example_command_expands_in_a_worker(void **state)
{
	int p0[] = { 20000, 20001 }, p1[] = { 20002, 20003 }, p2[] = { 20004, 20005 },
	    p3[] = { 20006, 20007 };
	int *const ports[] = { p0, p1, p2, p3 };
	struct spec_runtime rt = fake_rt("10.1.2.3", ports);
	struct spec *s = parse_ok(tf_example);
	struct env_list l = { .n = 0 };
	char *out;

	(void)state;
	worker_env(s, 1, &rt, &l);
	out = run_worker(&l, "echo --batch_size=$batch_size --model=$job_model "
			     "--ps_hosts=$PAI_TASK_ROLE_ps_server_HOST_LIST "
			     "--worker_hosts=$PAI_TASK_ROLE_worker_HOST_LIST "
			     "--task_index=$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX "
			     "$PAI_USER_NAME $PAI_HOST_IP_worker_1 $PAI_PORT_LIST_worker_1_ssh");
	assert_string_equal(out, "--batch_size=32 --model=resnet20 "
			    "--ps_hosts=10.1.2.3:20000,10.1.2.3:20002 "
			    "--worker_hosts=10.1.2.3:20004,10.1.2.3:20006 --task_index=1 "
			    "alice 10.1.2.3 20007\n");
	free(out);
	env_list_free(&l);
	spec_free(s);
}

/* ---- dataDir, outputDir and codeDir mlfs reads: the view's input/, output/, models/ ---- */

static void test_openpai_dirs_mlfs_reads_are_the_views_folders(void **state)
{
	struct spec *s = parse_ok(
		"{\"jobName\": \"dirs\", \"dataDir\": \"s3://bucket/sets/mnist/\",\n"
		" \"outputDir\": \"gs://out/runs/\", \"codeDir\": \"code:/resnet/\",\n"
		" \"taskRoles\": [{\"name\": \"w\", \"taskNumber\": 1, \"cpuNumber\": 1,\n"
		"  \"memoryMB\": 100, \"gpuNumber\": 0, \"command\": \"true\"}]}\n");
	static const char *const none[] = { NULL };

	(void)state;
	assert_string_equal(s->data.input.type, "s3");
	assert_string_equal(s->data.input.path, "s3://bucket/sets/mnist/");
	assert_string_equal(s->data.output.type, "gcp");
	assert_string_equal(s->data.output.path, "gs://out/runs/");
	assert_false(s->data.output.archive);	/* files, as OpenPAI writes them */
	assert_string_equal(s->data.model.type, "datastore");
	assert_string_equal(s->data.model.path, "code:/resnet/");
	/* the variables name where the worker finds them */
	assert_string_equal(spec_check_env(s->workers[0].env, s->workers[0].n_env, "PAI_DATA_DIR"),
			    "/opt/ml/input");
	assert_string_equal(spec_check_env(s->workers[0].env, s->workers[0].n_env,
					   "PAI_OUTPUT_DIR"), "/opt/ml/output");
	assert_string_equal(spec_check_env(s->workers[0].env, s->workers[0].n_env, "PAI_CODE_DIR"),
			    "/opt/ml/models");
	spec_check_ignored(s, none);
	spec_free(s);
	/* an output to the web is not one mlfs writes: passed on, said why */
	s = parse_ok("{\"jobName\": \"web\", \"outputDir\": \"https://h/out/\",\n"
		     " \"dataDir\": \"hdfs://nn:9000/d\",\n"
		     " \"taskRoles\": [{\"name\": \"w\", \"taskNumber\": 1, \"cpuNumber\": 1,\n"
		     "  \"memoryMB\": 100, \"gpuNumber\": 0, \"command\": \"true\"}]}\n");
	assert_null(s->data.output.type);
	assert_null(s->data.input.type);
	assert_string_equal(spec_check_env(s->workers[0].env, s->workers[0].n_env,
					   "PAI_OUTPUT_DIR"), "https://h/out/");
	{
		static const char *const want[] = {
			"outputDir: mlfs uploads an output to s3://, gs://, a datastore or a local "
			"folder; passed on as PAI_OUTPUT_DIR unchanged",
			"dataDir: an HDFS path mlfs does not fetch; passed on as PAI_DATA_DIR unchanged",
			NULL
		};

		spec_check_ignored(s, want);
	}
	spec_free(s);
}

/* ---- two roles of 2 and 3 tasks ---- */

static const char two_roles[] =
	"{\"jobName\": \"two\", \"gpuType\": \"A100\", \"retryCount\": 3,\n"
	" \"taskRoles\": [\n"
	"  {\"name\": \"a\", \"taskNumber\": 2, \"cpuNumber\": 4, \"memoryMB\": 2048, \"shmMB\": 128,\n"
	"   \"gpuNumber\": 1, \"command\": \"run a\", \"minFailedTaskCount\": 2,\n"
	"   \"portList\": [{\"label\": \"p\", \"beginAt\": 0, \"portNumber\": 2},\n"
	"                {\"label\": \"q\", \"beginAt\": 0, \"portNumber\": 1}]},\n"
	"  {\"name\": \"b_x\", \"taskNumber\": 3, \"cpuNumber\": 1, \"memoryMB\": 100, \"gpuNumber\": 0,\n"
	"   \"command\": \"run b\", \"minFailedTaskCount\": null, \"minSucceededTaskCount\": 3}]}\n";

static void test_openpai_two_roles_get_their_static_variables(void **state)
{
	struct spec *s = parse_ok(two_roles);
	static const char *const common[] = {
		"PAI_JOB_NAME", "two", "PAI_DEFAULT_FS_URI", "", "PAI_TASK_ROLE_COUNT", "2",
		"PAI_TASK_ROLE_LIST", "a,b_x",
		"PAI_TASK_ROLE_TASK_COUNT_a", "2", "PAI_RESOURCE_a", "1,4,2048,128",
		"PAI_MIN_FAILED_TASK_COUNT_a", "2", "PAI_MIN_SUCCEEDED_TASK_COUNT_a", "",
		"PAI_TASK_ROLE_TASK_COUNT_b_x", "3", "PAI_RESOURCE_b_x", "0,1,100,64",
		"PAI_MIN_FAILED_TASK_COUNT_b_x", "", "PAI_MIN_SUCCEEDED_TASK_COUNT_b_x", "3",
	};

	(void)state;
	assert_int_equal(s->n_workers, 5);
	assert_int_equal(s->retry_count, 3);
	assert_int_equal(s->roles[1].first, 2);
	assert_int_equal(s->roles[1].n, 3);
	assert_int_equal(s->roles[1].min_failed, -1);
	assert_int_equal(s->roles[1].min_succeeded, 3);
	for (size_t w = 0; w < 5; w++) {
		const struct spec_worker *sw = &s->workers[w];

		assert_int_equal(sw->n_env, 14);
		for (size_t i = 0; i < 12; i++) {
			assert_string_equal(sw->env[i].name, common[2 * i]);
			assert_string_equal(sw->env[i].value, common[2 * i + 1]);
		}
		assert_string_equal(sw->env[12].name, "PAI_CURRENT_TASK_ROLE_NAME");
		assert_string_equal(sw->env[12].value, w < 2 ? "a" : "b_x");
		assert_string_equal(sw->env[13].name, "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX");
		assert_int_equal(atoi(sw->env[13].value), w < 2 ? w : w - 2);
	}
	/* gpuType goes to the roles that ask for GPUs */
	assert_int_equal(s->workers[1].res.n_gpu_types, 1);
	assert_string_equal(s->workers[1].res.gpu_types[0], "A100");
	assert_int_equal(s->workers[4].res.n_gpu_types, 0);
	assert_true(s->workers[4].res.memory_gb == 100.0 / 1024);
	EXPECT_IGNORED(s, "taskRoles[0].shmMB: no image, so no container whose /dev/shm it would size; only PAI_RESOURCE_a shows it");
	spec_free(s);
}

static void test_openpai_two_roles_get_hosts_and_ports_of_every_task(void **state)
{
	int p0[] = { 100, 101, 102 }, p1[] = { 110, 111, 112 };
	int *const ports[] = { p0, p1, NULL, NULL, NULL };
	struct spec_runtime rt = fake_rt("node7", ports);
	struct spec *s = parse_ok(two_roles);
	struct env_list l = { .n = 0 };
	char *out;

	(void)state;
	spec_runtime_env(s, 4, &rt, env_list_add, &l);
	EXPECT_ENV(l.vars, l.n,
		"PAI_USER_NAME", "alice",
		"PAI_HOST_IP_a_0", "node7",
		"PAI_PORT_LIST_a_0_p", "100,101",
		"PAI_PORT_LIST_a_0_q", "102",
		"PAI_HOST_IP_a_1", "node7",
		"PAI_PORT_LIST_a_1_p", "110,111",
		"PAI_PORT_LIST_a_1_q", "112",
		"PAI_TASK_ROLE_a_HOST_LIST", "node7:100,node7:110",
		"PAI_HOST_IP_b_x_0", "node7",
		"PAI_HOST_IP_b_x_1", "node7",
		"PAI_HOST_IP_b_x_2", "node7",
		"PAI_TASK_ROLE_b_x_HOST_LIST", "node7,node7,node7");
	env_list_free(&l);
	/* what task b_x #2 prints of its environment */
	worker_env(s, 4, &rt, &l);
	assert_string_equal(env_list_get(&l, "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"), "2");
	out = run_worker(&l, "env | grep '^PAI_' | sort");
	assert_string_equal(out,
		"PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX=2\n"
		"PAI_CURRENT_TASK_ROLE_NAME=b_x\n"
		"PAI_DEFAULT_FS_URI=\n"
		"PAI_HOST_IP_a_0=node7\n"
		"PAI_HOST_IP_a_1=node7\n"
		"PAI_HOST_IP_b_x_0=node7\n"
		"PAI_HOST_IP_b_x_1=node7\n"
		"PAI_HOST_IP_b_x_2=node7\n"
		"PAI_JOB_NAME=two\n"
		"PAI_MIN_FAILED_TASK_COUNT_a=2\n"
		"PAI_MIN_FAILED_TASK_COUNT_b_x=\n"
		"PAI_MIN_SUCCEEDED_TASK_COUNT_a=\n"
		"PAI_MIN_SUCCEEDED_TASK_COUNT_b_x=3\n"
		"PAI_PORT_LIST_a_0_p=100,101\n"
		"PAI_PORT_LIST_a_0_q=102\n"
		"PAI_PORT_LIST_a_1_p=110,111\n"
		"PAI_PORT_LIST_a_1_q=112\n"
		"PAI_RESOURCE_a=1,4,2048,128\n"
		"PAI_RESOURCE_b_x=0,1,100,64\n"
		"PAI_TASK_ROLE_COUNT=2\n"
		"PAI_TASK_ROLE_LIST=a,b_x\n"
		"PAI_TASK_ROLE_TASK_COUNT_a=2\n"
		"PAI_TASK_ROLE_TASK_COUNT_b_x=3\n"
		"PAI_TASK_ROLE_a_HOST_LIST=node7:100,node7:110\n"
		"PAI_TASK_ROLE_b_x_HOST_LIST=node7,node7,node7\n"
		"PAI_USER_NAME=alice\n");
	free(out);
	env_list_free(&l);
	spec_free(s);
}

static void test_openpai_spec_to_json_shows_roles_and_ports(void **state)
{
	struct spec *s = parse_ok(two_roles);
	char *text = spec_to_json(s);
	json_t *o = json_loads(text, 0, NULL), *w;

	(void)state;
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "format")), "openpai");
	assert_true(json_is_true(json_object_get(o, "gang")));
	assert_int_equal(json_array_size(json_object_get(o, "roles")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(o, "roles"), 1), "first_worker")), 2);
	assert_true(json_is_null(json_object_get(json_array_get(json_object_get(o, "roles"), 1), "min_failed")));
	w = json_array_get(json_object_get(o, "workers"), 1);
	assert_string_equal(json_string_value(json_object_get(w, "role")), "a");
	assert_int_equal(json_integer_value(json_object_get(w, "role_index")), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(w, "ports"), 0), "count")), 2);
	assert_string_equal(json_string_value(json_object_get(json_object_get(w, "environment"), "PAI_RESOURCE_a")),
			    "1,4,2048,128");
	json_decref(o);
	free(text);
	spec_free(s);
}

static void test_openpai_port_begin_at_and_job_envs_kinds(void **state)
{
	struct spec *s = parse_ok("{\"jobName\": \"p\", \"taskRoles\": [{\"name\": \"r\", \"taskNumber\": 1,\n"
				  "  \"cpuNumber\": 1, \"memoryMB\": 100, \"gpuNumber\": 0, \"command\": \"x\",\n"
				  "  \"portList\": [{\"label\": \"http\", \"beginAt\": 8080, \"portNumber\": 1}], \"color\": 1}],\n"
				  " \"jobEnvs\": {\"lr\": 0.1, \"big\": 1e21, \"on\": true, \"isDebug\": false, \"s\": \"\"},\n"
				  " \"authFile\": \"hdfs://a\", \"killAllOnCompletedTaskNumber\": 1}");

	(void)state;
	EXPECT_ENV(s->env, s->n_env, "lr", "0.1", "big", "1e+21", "on", "true", "isDebug", "false",
		   "s", "");
	EXPECT_IGNORED(s,
		"taskRoles[0].color: unknown field, not used",
		"taskRoles[0].portList[0].beginAt: port 8080 cannot be promised on a shared node; free ports are allocated",
		"jobEnvs.isDebug: a failed task is not kept for debugging; still exported",
		"authFile: not a path on this node (an HDFS path mlfs does not fetch); the registry is reached with the node's and the owner's credentials",
		"killAllOnCompletedTaskNumber: unknown field, not used");
	assert_int_equal(s->workers[0].n_ports, 1);
	spec_free(s);
}

/* ---- every documented rule, broken once ---- */

#define ROLES_MISSING "missing; a job needs at least one task role, e.g. \"taskRoles\": " \
	"[{\"name\": \"main\", \"taskNumber\": 1, \"cpuNumber\": 1, \"memoryMB\": 1024, " \
	"\"gpuNumber\": 0, \"command\": \"python train.py\"}]"

static void test_openpai_each_rule_broken_is_reported_at_its_field(void **state)
{
	(void)state;
	EXPECT_ERRORS("{\"jobName\": \"bad name\",\n"
		      " \"taskRoles\": [\n"
		      "  {\"name\": \"a b\", \"taskNumber\": 0, \"cpuNumber\": 0, \"memoryMB\": 99, \"gpuNumber\": -1, \"command\": \" \"},\n"
		      "  {\"name\": \"r\", \"taskNumber\": 2, \"cpuNumber\": 1, \"memoryMB\": 200, \"shmMB\": 300, \"gpuNumber\": 0,\n"
		      "   \"command\": \"x\", \"minFailedTaskCount\": 0, \"minSucceededTaskCount\": 0},\n"
		      "  {\"name\": \"r\", \"taskNumber\": 1, \"cpuNumber\": 1, \"memoryMB\": 100, \"gpuNumber\": 0, \"command\": \"x\",\n"
		      "   \"minSucceededTaskCount\": 2}],\n"
		      " \"retryCount\": -1}\n",
		      "x.json:1:13: jobName: must match OpenPAI's pattern ^[A-Za-z0-9\\-._~]+$, got \"bad name\"",
		      "x.json:3:12: taskRoles[0].name: must match OpenPAI's pattern ^[A-Za-z0-9._~]+$, got \"a b\"",
		      "x.json:3:33: taskRoles[0].taskNumber: must be between 1 and 1024, got 0",
		      "x.json:3:49: taskRoles[0].cpuNumber: must be at least 1, got 0",
		      "x.json:3:64: taskRoles[0].memoryMB: must be at least 100, got 99",
		      "x.json:3:81: taskRoles[0].gpuNumber: must be at least 0, got -1",
		      "x.json:3:96: taskRoles[0].command: must not be empty or only whitespace",
		      "x.json:4:76: taskRoles[1].shmMB: is 300 MB, more than memoryMB (200 MB)",
		      "x.json:5:42: taskRoles[1].minFailedTaskCount: must be null or at least 1, got 0",
		      "x.json:5:70: taskRoles[1].minSucceededTaskCount: must be null or at least 1, got 0",
		      "x.json:6:12: taskRoles[2].name: \"r\" is already the name of taskRoles[1]; task role names must be unique",
		      "x.json:7:29: taskRoles[2].minSucceededTaskCount: is 2, but the role has 1 task(s); it could never be reached",
		      "x.json:8:16: retryCount: must be at least 0, got -1");
}

static void test_openpai_empty_task_roles_and_missing_fields(void **state)
{
	(void)state;
	EXPECT_ERRORS("{\"jobName\": \"j\", \"taskRoles\": []}", "x.json:1:31: taskRoles: must list at least one task role");
	EXPECT_ERRORS("{\"jobName\": \"j\",\n \"taskRoles\": [{\"name\": \"a\"}, 3]}", "x.json:2:16: taskRoles[0].taskNumber: missing; OpenPAI requires it",
		      "x.json:2:16: taskRoles[0].cpuNumber: missing; OpenPAI requires it",
		      "x.json:2:16: taskRoles[0].memoryMB: missing; OpenPAI requires it",
		      "x.json:2:16: taskRoles[0].gpuNumber: missing; OpenPAI requires it",
		      "x.json:2:16: taskRoles[0].command: missing; OpenPAI requires it",
		      "x.json:2:31: taskRoles[1]: must be an object like {\"name\": \"worker\", \"taskNumber\": 1, ...}, got integer");
	EXPECT_ERRORS("{\"taskRoles\": null}", "x.json:1:1: jobName: missing; OpenPAI requires a job name",
		      "x.json:1:15: taskRoles: " ROLES_MISSING);
	EXPECT_ERRORS("{\"jobName\": \"" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" "\"}", "x.json:1:13: jobName: is 70 characters long; OpenPAI allows that, but an mlfs job name is at most 64",
		      "x.json:1:1: taskRoles: " ROLES_MISSING);
	EXPECT_ERRORS("{\"jobName\": \"..\", \"taskRoles\": [{\"name\": \"a\", \"taskNumber\": 1, \"cpuNumber\": 1,\n"
		      " \"memoryMB\": 100, \"gpuNumber\": 0, \"command\": \"x\", \"minFailedTaskCount\": 2}]}", "x.json:1:13: jobName: \"..\" matches OpenPAI's pattern, but an mlfs job name may not be \".\" or \"..\"",
		      "x.json:2:73: taskRoles[0].minFailedTaskCount: is 2, but the role has 1 task(s); it could never be reached");
}

static void test_openpai_wrong_types_are_all_reported(void **state)
{
	(void)state;
	EXPECT_ERRORS("{\"jobName\": 5, \"image\": [], \"dataDir\": 1, \"gpuType\": 2, \"retryCount\": 0.5,\n"
		      " \"jobEnvs\": [], \"extras\": \"e\", \"taskRoles\": {}}", "x.json:1:13: jobName: must be a string, got integer",
		      "x.json:1:25: image: must be a string, got array",
		      "x.json:1:40: dataDir: must be a string, got integer",
		      "x.json:1:54: gpuType: must be a string, got integer",
		      "x.json:1:71: retryCount: must be an integer, got 0.5",
		      "x.json:2:13: jobEnvs: must be an object, got array",
		      "x.json:2:27: extras: must be an object, got string",
		      "x.json:2:45: taskRoles: must be an array of task roles, got object");
	EXPECT_ERRORS("{\"jobName\": \"j\", \"jobEnvs\": {\"a-b\": 1, \"ok\": null, \"o\": {}},\n"
		      " \"taskRoles\": [{\"name\": 1, \"taskNumber\": \"2\", \"cpuNumber\": 1.5, \"memoryMB\": true,\n"
		      "  \"shmMB\": \"64\", \"gpuNumber\": null, \"command\": [\"x\"], \"minFailedTaskCount\": \"1\",\n"
		      "  \"portList\": {}}, \"w\"]}", "x.json:1:37: jobEnvs.a-b: a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$",
		      "x.json:1:46: jobEnvs.ok: must be a string, number or boolean, got null",
		      "x.json:1:57: jobEnvs.o: must be a string, number or boolean, got object",
		      "x.json:2:25: taskRoles[0].name: must be a string, got integer",
		      "x.json:2:42: taskRoles[0].taskNumber: must be an integer, got string",
		      "x.json:2:60: taskRoles[0].cpuNumber: must be an integer, got 1.5",
		      "x.json:2:77: taskRoles[0].memoryMB: must be an integer, got boolean",
		      "x.json:3:12: taskRoles[0].shmMB: must be an integer, got string",
		      "x.json:3:31: taskRoles[0].gpuNumber: missing; OpenPAI requires it",
		      "x.json:4:15: taskRoles[0].portList: must be an array like [{\"label\": \"http\", \"beginAt\": 0, \"portNumber\": 1}], got object",
		      "x.json:3:48: taskRoles[0].command: must be a string, got array",
		      "x.json:3:77: taskRoles[0].minFailedTaskCount: must be an integer, got string",
		      "x.json:4:20: taskRoles[1]: must be an object like {\"name\": \"worker\", \"taskNumber\": 1, ...}, got string");
	EXPECT_ERRORS("{\"jobName\": \"j\", \"taskRoles\": [{\"name\": \"a\", \"taskNumber\": 1, \"cpuNumber\": 1,\n"
		      " \"memoryMB\": 100, \"gpuNumber\": 0, \"command\": \"x\",\n"
		      " \"portList\": [{\"label\": \"a b\", \"portNumber\": 1}, {\"label\": \"h\", \"portNumber\": 0},\n"
		      "  {\"label\": \"h\", \"portNumber\": 1}, {\"label\": \"h\", \"portNumber\": 1}, {\"portNumber\": 1}, 7]}]}",
		      "x.json:3:25: taskRoles[0].portList[0].label: must match OpenPAI's pattern ^[A-Za-z0-9._~]+$, got \"a b\"",
		      "x.json:3:79: taskRoles[0].portList[1].portNumber: must be between 1 and 100, got 0",
		      "x.json:4:46: taskRoles[0].portList[3].label: \"h\" is already a label of this role",
		      "x.json:4:69: taskRoles[0].portList[4].label: missing; OpenPAI requires it",
		      "x.json:4:88: taskRoles[0].portList[5]: must be an object like {\"label\": \"http\", \"beginAt\": 0, \"portNumber\": 1}, got integer");
}

/* ---- comments, for every JSON spec ---- */

static void test_spec_comments_are_blanked_and_positions_kept(void **state)
{
	static const char text[] =
		"{\n"
		"  // a comment with \"quotes\", a { and a // inside\n"
		"  \"jobName\": \"c\", /* caf\xc3\xa9 \xe2\x82\xac */ \"retryCount\": RETRY,\n"
		"  \"taskRoles\": [{\"name\": \"r\", \"taskNumber\": 1, \"cpuNumber\": 1, \"memoryMB\": 100,\n"
		"    /* two\n"
		"       lines */ \"gpuNumber\": 0, \"command\": \"echo http://x // kept /* kept */\"}]\n"
		"}  // the end, no newline";
	char *bad = strdup(text), *good = strdup(text);
	struct spec *s;

	(void)state;
	memcpy(strstr(bad, "RETRY"), "   -1", 5);
	memcpy(strstr(good, "RETRY"), "    2", 5);
	EXPECT_ERRORS(bad, "x.json:3:49: retryCount: must be at least 0, got -1");
	s = parse_ok(good);
	assert_string_equal(s->workers[0].command, "echo http://x // kept /* kept */");
	assert_int_equal(s->retry_count, 2);
	spec_free(s);
	free(bad);
	free(good);
}

static void test_spec_comments_alone_or_unclosed_are_errors(void **state)
{
	(void)state;
	EXPECT_ERRORS("// nothing\n/* at all */\n",
		      "x.json:1:1: json: the spec holds only comments; it must be a JSON object ({ ... })");
	EXPECT_ERRORS("{\"jobName\": \"a\" /* oops\n", "x.json:2:1: json: '}' expected near end of file");
	EXPECT_ERRORS("{\"jobName\": \"a\" / 2}", "x.json:1:17: json: '}' expected near '/'");
}

static void test_spec_byte_order_mark_is_skipped(void **state)
{
	char text[sizeof(two_roles) + 3] = "\xef\xbb\xbf";
	struct spec *s;

	(void)state;
	strcat(text, two_roles);
	s = parse_ok(text);
	assert_int_equal(s->format, SPEC_OPENPAI);
	spec_free(s);
}

/* ---- detection ---- */

/*
 * @text must be read as @want.  While that format's parser is still being
 * written the parse may fail; then it must not have been read as native or
 * OpenPAI (whose complaints would show).
 */
static void check_detected(const char *text, enum spec_format want)
{
	struct spec *s = NULL;
	struct diag d;
	int ret;

	diag_init(&d);
	ret = spec_parse(&s, "x.json", text, strlen(text), "x", &d);
	diag_print(&d, stderr);
	if (ret == 0) {
		assert_int_equal(s->format, want);
		spec_free(s);
	}
	for (size_t i = 0; ret != 0 && i < d.n; i++) {
		assert_null(strstr(d.msgs[i], "workers: missing"));
		assert_null(strstr(d.msgs[i], "resources: must be an object"));
		assert_null(strstr(d.msgs[i], "jobName"));
		assert_null(strstr(d.msgs[i], "taskRoles"));
		assert_null(strstr(d.msgs[i], ": json:"));	/* YAML is not read as JSON */
	}
	diag_free(&d);
}

static void test_spec_detects_each_format_from_its_shape(void **state)
{
	struct spec *s;

	(void)state;
	check_detected("{\"name\": \"HelloWorld\", \"description\": \"Hello world!\",\n"
		       " \"request\": {\"resources\": {\"clusterId\": 1, \"gpus\": 1, \"cpus\": 2, \"cpuMemoryGb\": 1},\n"
		       "  \"docker\": {\"image\": \"debian:stable\", \"command\": \"echo 'Hello World!'\",\n"
		       "   \"environment\": { }, \"storage\": [ ], \"portMappings\": [ ]},\n"
		       "  \"scheduling\": {\"interactive\": true}}}", SPEC_GPULAB);
	check_detected("{\"jobDefinition\": {\"name\": \"v1\", \"dockerImage\": \"debian:stable\", \"command\": \"true\"}}",
		       SPEC_GPULAB);
	check_detected("{\"name\": \"example\", \"resources\": [{\"name\": \"worker\", \"replicas\": 1,\n"
		       "  \"command\": \"python example.py\", \"workDir\": \"$SRC_DIR\"}]}", SPEC_KIBERNETIKA);
	check_detected("name: example\n"
		       "resources:\n"
		       "- workDir: $SRC_DIR\n"
		       "  command: python example.py --parameter_name 1\n"
		       "  default_volume_mapping: true\n"
		       "  images:\n"
		       "    cpu: kuberlab/tensorflow:cpu-36-1.7.0-full\n"
		       "    gpu: kuberlab/tensorflow:gpu-36-1.7.0-full\n"
		       "  name: worker\n"
		       "  replicas: 1\n"
		       "  resources:\n"
		       "    limits:\n"
		       "      cpu: \"1\"\n"
		       "      memory: 8Gi\n"
		       "    requests:\n"
		       "      cpu: 100m\n"
		       "      memory: 64Mi\n"
		       "  restartPolicy: Never\n", SPEC_KIBERNETIKA);
	s = parse_ok("{\"name\": \"n\", \"resources\": {\"gpu_count\": 1}, \"workers\": [\"x\"]}");
	assert_int_equal(s->format, SPEC_NATIVE);
	spec_free(s);
	/* jobName alone, or taskRoles alone, is enough to read it as OpenPAI */
	EXPECT_ERRORS("{\"jobName\": \"j\"}", "x.json:1:1: taskRoles: " ROLES_MISSING);
	EXPECT_ERRORS("{\"taskRoles\": [{\"name\": \"a\", \"taskNumber\": 1, \"cpuNumber\": 1, \"memoryMB\": 100,\n"
		      " \"gpuNumber\": 0, \"command\": \"x\"}]}", "x.json:1:1: jobName: missing; OpenPAI requires a job name");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_openpai_tensorflow_example_maps_roles_workers_and_resources),
		cmocka_unit_test(test_openpai_tensorflow_example_gives_every_pai_variable),
		cmocka_unit_test(test_openpai_tensorflow_example_command_expands_in_a_worker),
		cmocka_unit_test(test_openpai_dirs_mlfs_reads_are_the_views_folders),
		cmocka_unit_test(test_openpai_two_roles_get_their_static_variables),
		cmocka_unit_test(test_openpai_two_roles_get_hosts_and_ports_of_every_task),
		cmocka_unit_test(test_openpai_spec_to_json_shows_roles_and_ports),
		cmocka_unit_test(test_openpai_port_begin_at_and_job_envs_kinds),
		cmocka_unit_test(test_openpai_each_rule_broken_is_reported_at_its_field),
		cmocka_unit_test(test_openpai_empty_task_roles_and_missing_fields),
		cmocka_unit_test(test_openpai_wrong_types_are_all_reported),
		cmocka_unit_test(test_spec_comments_are_blanked_and_positions_kept),
		cmocka_unit_test(test_spec_comments_alone_or_unclosed_are_errors),
		cmocka_unit_test(test_spec_byte_order_mark_is_skipped),
		cmocka_unit_test(test_spec_detects_each_format_from_its_shape),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

