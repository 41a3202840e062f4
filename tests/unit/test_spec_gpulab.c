/*
 * test_spec_gpulab.c - unit tests of the GPULab job request parser
 * (sched/spec_gpulab.c), through spec_parse: spec.c's detection sends an
 * object with "request" or "jobDefinition" there.
 *
 * The documentation's HelloWorld request is parsed exactly as printed and
 * checked field by field; the variables are checked both as the parser
 * leaves them in the worker and as spec_runtime_env sets them for a fake
 * struct spec_runtime.  Every documented rule is broken once, asserting the
 * whole "file:line:col: field: message", so positions are tested with the
 * words; version 1 errors must name the v1 field where the user wrote it.
 * Specs are one JSON line per C line so columns can be checked by eye.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cfg_check.h"
#include "config.h"

#include "diag.h"
#include "spec.h"
#include "spec_check.h"

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
	assert_int_equal(s->format, SPEC_GPULAB);
	diag_free(&d);
	return s;
}

#define EXPECT_ERRORS(text, ...) SPEC_EXPECT_ERRORS("x.json", "x", (text), __VA_ARGS__)


static const char *worker_env(const struct spec *s, const char *name)
{
	return spec_check_env(s->workers[0].env, s->workers[0].n_env, name);
}

/* What spec_runtime_env set, in order. */
struct collected {
	struct spec_env v[32];
	size_t n;
};

static void collect(void *arg, const char *name, const char *value)
{
	struct collected *c = arg;

	assert_true(c->n < 32);
	c->v[c->n].name = strdup(name);
	c->v[c->n++].value = strdup(value);
}

static void collected_free(struct collected *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].name);
		free(c->v[i].value);
	}
}

/* A version 2 request: lines 3 and 4 are resources and docker, @more after. */
#define V2(res, docker, more) \
	"{\n" \
	"  \"request\": {\n" \
	"    \"resources\": " res ",\n" \
	"    \"docker\": " docker more "\n" \
	"  }\n" \
	"}\n"

#define RES_OK "{\"gpus\": 1, \"cpus\": 2, \"cpuMemoryGb\": 4}"
#define DOCKER_OK "{\"command\": \"x\"}"

/* ---- the documentation's examples ---- */

/* "The Job Request", exactly as printed (its leading space included). */
static const char hello_world[] =
	" {\n"
	"    \"name\": \"HelloWorld\",\n"
	"    \"description\": \"Hello world!\",\n"
	"    \"request\": {\n"
	"        \"resources\": {\n"
	"            \"clusterId\": 1,\n"
	"            \"gpus\": 1,\n"
	"            \"cpus\": 2,\n"
	"            \"cpuMemoryGb\": 1\n"
	"        },\n"
	"        \"docker\": {\n"
	"            \"image\": \"debian:stable\",\n"
	"            \"command\": \"echo 'Hello World!'\",\n"
	"            \"environment\": { },\n"
	"            \"storage\": [ ],\n"
	"            \"portMappings\": [ ]\n"
	"        },\n"
	"        \"scheduling\": {\n"
	"            \"interactive\": true\n"
	"        }\n"
	"    }\n"
	"}\n";

static void test_gpulab_hello_world_request_maps_field_by_field(void **state)
{
	struct spec *s = parse_ok(hello_world);
	const struct spec_resources *r = &s->workers[0].res;

	(void)state;
	assert_int_equal(s->format, SPEC_GPULAB);
	assert_string_equal(s->name, "HelloWorld");
	assert_string_equal(s->description, "Hello world!");
	assert_int_equal(s->type, SPEC_TRAINING);
	assert_int_equal(s->n_workers, 1);
	assert_false(s->gang);
	assert_int_equal(s->n_roles, 0);
	assert_string_equal(s->workers[0].command, "echo 'Hello World!'");
	assert_int_equal(r->gpu_count, 1);
	assert_int_equal(r->cpu_count, 2);
	assert_true(r->memory_gb == 1.0);
	assert_string_equal(r->cluster_id, "1");
	assert_null(r->node_name);
	assert_int_equal(r->n_gpu_types, 0);
	assert_true(r->gpu_type_substring);
	assert_null(r->min_cuda_version);
	assert_true(r->max_price < 0);
	assert_int_equal(s->n_env, 0);
	assert_int_equal(s->retry_count, 0);
	assert_int_equal(s->wait_timeout, -1);
	assert_int_equal(s->run_timeout, -1);
	assert_int_equal(s->workers[0].n_env, 4);
	assert_string_equal(worker_env(s, "GPULAB_CLUSTER_ID"), "1");
	assert_string_equal(worker_env(s, "GPULAB_CPUS_RESERVED"), "2");
	assert_string_equal(worker_env(s, "GPULAB_MEM_RESERVED"), "1000m");
	assert_string_equal(worker_env(s, "GPULAB_WORKER_ID"), "0");
	assert_string_equal(s->workers[0].image.ref, "debian:stable");
	assert_string_equal(s->workers[0].image.ref_field, "request.docker.image");
	assert_null(s->workers[0].image.auth);
	EXPECT_IGNORED(s, "request.scheduling.interactive: interactive jobs are not supported; the job is queued and runs as a batch job");
	spec_free(s);
}

static void test_gpulab_resources_example_gives_substring_models_cuda_and_slave(void **state)
{
	struct spec *s = parse_ok(V2("{\"gpus\": 2, \"cpus\": 1, \"cpuMemoryGb\": 2.5, \"gpuModel\": [\"V100\", \"1080\"], \"minCudaVersion\": 10, \"slaveName\": \"slave7A\"}",
				     DOCKER_OK, ""));
	const struct spec_resources *r = &s->workers[0].res;

	(void)state;
	assert_int_equal(r->gpu_count, 2);
	assert_int_equal(r->cpu_count, 1);
	assert_true(r->memory_gb == 2.5);
	assert_int_equal(r->n_gpu_types, 2);
	assert_string_equal(r->gpu_types[0], "V100");
	assert_string_equal(r->gpu_types[1], "1080");
	assert_true(r->gpu_type_substring);
	assert_string_equal(r->min_cuda_version, "10");
	assert_string_equal(r->node_name, "slave7A");
	assert_null(r->cluster_id);
	assert_null(worker_env(s, "GPULAB_CLUSTER_ID"));
	assert_string_equal(worker_env(s, "GPULAB_MEM_RESERVED"), "2500m");
	assert_string_equal(s->name, "x");	/* the file's name */
	assert_int_equal(s->n_ignored, 0);
	spec_free(s);
	s = parse_ok(V2("{\"gpus\": 0, \"cpus\": 4, \"cpuMemoryGb\": 8, \"minCudaVersion\": \"11.8\", \"clusterId\": \"gpu-a\"}",
			DOCKER_OK, ""));
	assert_string_equal(s->workers[0].res.min_cuda_version, "11.8");
	assert_string_equal(s->workers[0].res.cluster_id, "gpu-a");
	assert_int_equal(s->workers[0].res.gpu_count, 0);
	spec_free(s);
}

/* ---- commands ---- */

static void test_gpulab_command_array_is_single_quoted_for_sh(void **state)
{
	struct spec *s = parse_ok(V2(RES_OK,
				     "{\"command\": [\"printf\", \"%s|\", \"a b\", \"it's\", \"$HOME\", \"`id`\", \"\"]}", ""));
	char out[128] = "";
	FILE *p;

	(void)state;
	assert_string_equal(s->workers[0].command,
			    "'printf' '%s|' 'a b' 'it'\\''s' '$HOME' '`id`' ''");
	/* The shell hands each element over unchanged, as docker's exec form would. */
	p = popen(s->workers[0].command, "r");
	assert_non_null(p);
	assert_non_null(fgets(out, sizeof(out), p));
	assert_int_equal(pclose(p), 0);
	assert_string_equal(out, "a b|it's|$HOME|`id`||");
	spec_free(s);
}

static void test_gpulab_command_string_is_kept_as_written(void **state)
{
	struct spec *s = parse_ok(V2(RES_OK,
				     "{\"command\": \"bash -c 'nvidia-smi; for i in `seq 1 5`; do echo $i; sleep 1; done;'\"}", ""));

	(void)state;
	assert_string_equal(s->workers[0].command,
			    "bash -c 'nvidia-smi; for i in `seq 1 5`; do echo $i; sleep 1; done;'");
	spec_free(s);
}

/* ---- variables ---- */

static void test_gpulab_environment_and_project_gid_variable(void **state)
{
	struct spec *s = parse_ok(V2(RES_OK,
				     "{\"command\": \"x\", \"environment\": {\"DEMO_A\": 1, \"DEMO_B\": \"two\", \"DEMO_C\": true}, \"projectGidVariableName\": \"DEMO_PROJECT_GID\"}", ""));
	struct passwd *pw = getpwuid(getuid());
	unsigned int given[1] = { 1 };
	struct spec_runtime rt = { .job_id = "job-7", .host = "127.0.0.1", .n_gpus = given };
	struct collected got = { .n = 0 };
	char gid[32];

	(void)state;
	assert_non_null(pw);
	rt.user = pw->pw_name;
	assert_int_equal(s->n_env, 3);
	assert_string_equal(spec_check_env(s->env, s->n_env, "DEMO_A"), "1");
	assert_string_equal(spec_check_env(s->env, s->n_env, "DEMO_B"), "two");
	assert_string_equal(spec_check_env(s->env, s->n_env, "DEMO_C"), "true");
	/* Known only when the worker starts: a placeholder until then. */
	assert_non_null(strstr(worker_env(s, "DEMO_PROJECT_GID"), "set when the worker starts"));
	spec_runtime_env(s, 0, &rt, collect, &got);
	snprintf(gid, sizeof(gid), "%u", (unsigned int)pw->pw_gid);
	assert_string_equal(spec_check_env(got.v, got.n, "DEMO_PROJECT_GID"), gid);
	assert_string_equal(spec_check_env(got.v, got.n, "GPULAB_USERNAME"), pw->pw_name);
	collected_free(&got);
	spec_free(s);
}

static void test_gpulab_gpus_reserved_equals_the_gpus_given(void **state)
{
	struct spec *s = parse_ok(V2("{\"gpus\": 3, \"cpus\": 6, \"cpuMemoryGb\": 16}", DOCKER_OK, ""));
	unsigned int given[1] = { 3 };
	struct spec_runtime rt = { .job_id = "train-1", .host = "127.0.0.1", .n_gpus = given,
				   .user = "nobody-here" };
	struct collected got = { .n = 0 };
	char want[16];

	(void)state;
	spec_runtime_env(s, 0, &rt, collect, &got);
	snprintf(want, sizeof(want), "%ld", s->workers[0].res.gpu_count);
	assert_string_equal(spec_check_env(got.v, got.n, "GPULAB_GPUS_RESERVED"), want);
	assert_string_equal(spec_check_env(got.v, got.n, "GPULAB_GPUS_RESERVED"), "3");
	assert_string_equal(spec_check_env(got.v, got.n, "GPULAB_JOB_ID"), "train-1");
	assert_string_equal(spec_check_env(got.v, got.n, "GPULAB_USERNAME"), "nobody-here");
	assert_int_equal(got.n, 3);	/* no id variables asked for */
	assert_string_equal(worker_env(s, "GPULAB_CPUS_RESERVED"), "6");
	assert_string_equal(worker_env(s, "GPULAB_MEM_RESERVED"), "16000m");
	collected_free(&got);
	spec_free(s);
}

/* ---- version 1 ---- */

static void test_gpulab_v1_definition_is_converted_to_v2(void **state)
{
	struct spec *s = parse_ok(
		"{\n"
		"  \"jobDefinition\": {\n"
		"    \"name\": \"helloworld\",\n"
		"    \"description\": \"Hello world!\",\n"
		"    \"clusterId\": 1,\n"
		"    \"resources\": {\"gpus\": 1, \"systemMemory\": 2000, \"cpuCores\": 2, \"gpuModel\": \"V100\", \"minCudaVersion\": \"10\"},\n"
		"    \"dockerImage\": \"gpulab.ilabt.imec.be:5000/sample:nvidia-smi\",\n"
		"    \"jobType\": \"BATCH\",\n"
		"    \"command\": [\"nvidia-smi\", \"-L\"],\n"
		"    \"jobDataLocations\": [{\"mountPoint\": \"/project\"}],\n"
		"    \"portMappings\": [ ],\n"
		"    \"environment\": {\"A\": \"b\"},\n"
		"    \"userUidVariableName\": \"USER_UID\",\n"
		"    \"projectGidVariableName\": \"PROJ_GID\"\n"
		"  }\n"
		"}\n");
	const struct spec_resources *r = &s->workers[0].res;
	unsigned int given[1] = { 1 };
	struct spec_runtime rt = { .job_id = "helloworld", .n_gpus = given, .user = "root" };
	struct collected got = { .n = 0 };

	(void)state;
	assert_string_equal(s->name, "helloworld");
	assert_string_equal(s->description, "Hello world!");
	assert_string_equal(s->workers[0].command, "'nvidia-smi' '-L'");
	assert_int_equal(r->gpu_count, 1);
	assert_int_equal(r->cpu_count, 2);
	assert_true(r->memory_gb == 2.0);
	assert_string_equal(r->cluster_id, "1");
	assert_int_equal(r->n_gpu_types, 1);
	assert_string_equal(r->gpu_types[0], "V100");
	assert_true(r->gpu_type_substring);
	assert_string_equal(r->min_cuda_version, "10");
	assert_string_equal(spec_check_env(s->env, s->n_env, "A"), "b");
	assert_string_equal(worker_env(s, "GPULAB_MEM_RESERVED"), "2000m");	/* as GPULab's example */
	assert_string_equal(s->workers[0].image.ref, "gpulab.ilabt.imec.be:5000/sample:nvidia-smi");
	assert_string_equal(s->workers[0].image.ref_field, "jobDefinition.dockerImage");
	EXPECT_IGNORED(s, "jobDefinition.jobType: unknown field, not used");
	/* its storage: the [source] covering /project, found at submit (spec_worker_mounts) */
	assert_int_equal(s->workers[0].n_volumes, 1);
	assert_null(s->workers[0].volumes[0].name);
	assert_string_equal(s->workers[0].volumes[0].host_path, "/project");
	assert_string_equal(s->workers[0].volumes[0].mount_path, "/project");
	spec_runtime_env(s, 0, &rt, collect, &got);
	assert_string_equal(spec_check_env(got.v, got.n, "USER_UID"), "0");
	assert_string_equal(spec_check_env(got.v, got.n, "PROJ_GID"), "0");
	collected_free(&got);
	spec_free(s);
}

static void test_gpulab_v1_errors_name_the_v1_fields(void **state)
{
	(void)state;
	EXPECT_ERRORS("{\"jobDefinition\": {\n"
		      "  \"resources\": {\"gpus\": 1, \"systemMemory\": -5, \"cpuCores\": 0, \"gpuModel\": \"\"},\n"
		      "  \"dockerImage\": 5,\n"
		      "  \"command\": \"\",\n"
		      "  \"jobDataLocations\": [{\"sharePath\": \"/x\"}],\n"
		      "  \"name\": \"a b\"\n"
		      "}}\n",
		      "x.json:2:75: jobDefinition.resources.gpuModel: must not be empty; leave it out to accept any GPU model",
		      "x.json:5:24: jobDefinition.jobDataLocations[0].mountPoint: missing",
		      "x.json:6:11: jobDefinition.name: the GPULab name is also the mlfs job name, which must be 1 to 64 of A-Z a-z 0-9 . _ ~ - (not \".\" or \"..\"), got \"a b\"",
		      "x.json:2:60: jobDefinition.resources.cpuCores: must be at least 1, got 0",
		      "x.json:2:44: jobDefinition.resources.systemMemory: must be more than 0, got -5",
		      "x.json:3:18: jobDefinition.dockerImage: must be a string, got integer",
		      "x.json:4:14: jobDefinition.command: must not be empty without an image: GPULab runs the image's CMD then");
	EXPECT_ERRORS("{\"jobDefinition\": {\"command\": \"x\"}}",
		      "x.json:1:19: jobDefinition.resources: missing; GPULab needs at least gpus, cpus and cpuMemoryGb");
	EXPECT_ERRORS("{\"jobDefinition\": {\"command\": \"x\", \"resources\": {\"gpus\": 1, \"cpuCores\": 1}}}",
		      "x.json:1:49: jobDefinition.resources.systemMemory: missing");
	EXPECT_ERRORS("{\"jobDefinition\": []}",
		      "x.json:1:19: jobDefinition: must be an object, got array");
}

/* ---- every documented rule, broken once ---- */

static void test_gpulab_resource_rules_name_the_field(void **state)
{
	(void)state;
	EXPECT_ERRORS(V2("{\"gpus\": -1, \"cpus\": 1, \"cpuMemoryGb\": 1}", DOCKER_OK, ""),
		      "x.json:3:27: request.resources.gpus: must be at least 0, got -1");
	EXPECT_ERRORS(V2("{\"gpus\": 1, \"cpus\": 0, \"cpuMemoryGb\": 1}", DOCKER_OK, ""),
		      "x.json:3:38: request.resources.cpus: must be at least 1, got 0");
	EXPECT_ERRORS(V2("{\"gpus\": 1, \"cpus\": 1, \"cpuMemoryGb\": 0}", DOCKER_OK, ""),
		      "x.json:3:56: request.resources.cpuMemoryGb: must be more than 0, got 0");
	EXPECT_ERRORS(V2("{\"gpus\": 1.5, \"cpus\": 1, \"cpuMemoryGb\": 1}", DOCKER_OK, ""),
		      "x.json:3:27: request.resources.gpus: must be an integer, got 1.5");
	EXPECT_ERRORS(V2("{\"gpus\": 1, \"cpus\": 1, \"cpuMemoryGb\": \"1G\"}", DOCKER_OK, ""),
		      "x.json:3:56: request.resources.cpuMemoryGb: must be a number, got string");
	EXPECT_ERRORS(V2("{\"cpus\": 1}", DOCKER_OK, ""),
		      "x.json:3:18: request.resources.gpus: missing",
		      "x.json:3:18: request.resources.cpuMemoryGb: missing");
	EXPECT_ERRORS(V2("{\"gpus\": 1, \"cpuMemoryGb\": 1}", DOCKER_OK, ""),
		      "x.json:3:18: request.resources.cpus: missing");
	EXPECT_ERRORS(V2("{\"gpus\": 1, \"cpus\": 1, \"cpuMemoryGb\": 1, \"gpuModel\": \"V100\"}", DOCKER_OK, ""),
		      "x.json:3:71: request.resources.gpuModel: must be an array of strings, got string");
	EXPECT_ERRORS(V2("{\"gpus\": 1, \"cpus\": 1, \"cpuMemoryGb\": 1, \"gpuModel\": [\"V100\", \"\"]}", DOCKER_OK, ""),
		      "x.json:3:80: request.resources.gpuModel[1]: must not be empty");
	EXPECT_ERRORS(V2("{\"gpus\": 1, \"cpus\": 1, \"cpuMemoryGb\": 1, \"minCudaVersion\": \"ten\"}", DOCKER_OK, ""),
		      "x.json:3:77: request.resources.minCudaVersion: must be a version like 10 or \"11.8\", got \"ten\"");
	EXPECT_ERRORS(V2("{\"gpus\": 1, \"cpus\": 1, \"cpuMemoryGb\": 1, \"minCudaVersion\": [10]}", DOCKER_OK, ""),
		      "x.json:3:77: request.resources.minCudaVersion: must be a version like 10 or \"11.8\", got array");
	EXPECT_ERRORS(V2("{\"gpus\": 1, \"cpus\": 1, \"cpuMemoryGb\": 1, \"clusterId\": true}", DOCKER_OK, ""),
		      "x.json:3:72: request.resources.clusterId: must be a cluster id like 1 (an integer or a non-empty string), got boolean");
	EXPECT_ERRORS(V2("{\"gpus\": 1, \"cpus\": 1, \"cpuMemoryGb\": 1, \"slaveName\": 7}", DOCKER_OK, ""),
		      "x.json:3:72: request.resources.slaveName: must be a string, got integer");
	EXPECT_ERRORS(V2("[]", DOCKER_OK, ""),
		      "x.json:3:18: request.resources: must be an object, got array");
}

/* GPULab's private-registry form, and an empty command: the image's own CMD. */
static void test_gpulab_image_credentials_are_kept_apart_and_never_shown(void **state)
{
	struct spec *s = parse_ok(V2(RES_OK, "{\"command\": \"\", \"image\": "
				     "\"gitlab+deploy-token-3:s3cr@t@gitlab.example.be:4567/proj/sample:v1\"}", ""));
	char *json = spec_to_json(s);

	(void)state;
	assert_string_equal(s->workers[0].image.ref, "gitlab.example.be:4567/proj/sample:v1");
	assert_string_equal(s->workers[0].image.auth, "gitlab+deploy-token-3:s3cr@t");
	assert_string_equal(s->workers[0].command, "");
	assert_non_null(json);
	assert_null(strstr(json, "s3cr"));
	assert_non_null(strstr(json, "\"image\": \"gitlab.example.be:4567/proj/sample:v1\""));
	free(json);
	spec_free(s);
}

static void test_gpulab_docker_rules_name_the_field(void **state)
{
	(void)state;
	EXPECT_ERRORS(V2(RES_OK, "{\"image\": \"debian\"}", ""),
		      "x.json:4:15: request.docker.command: missing; give the command to run, as a string or an array");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": \" \"}", ""),
		      "x.json:4:27: request.docker.command: must not be empty without an image: GPULab runs the image's CMD then");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": []}", ""),
		      "x.json:4:27: request.docker.command: must not be empty without an image: GPULab runs the image's CMD then");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": [\"ls\", 1]}", ""),
		      "x.json:4:34: request.docker.command[1]: must be a string, got integer");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": [\"\", \"x\"]}", ""),
		      "x.json:4:28: request.docker.command[0]: must name the program to run, got an empty string");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": {}}", ""),
		      "x.json:4:27: request.docker.command: must be a string or an array of strings, got object");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": \"x\", \"image\": \"\"}", ""),
		      "x.json:4:41: request.docker.image: must not be empty");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": \"x\", \"image\": \"Debian:stable\"}", ""),
		      "x.json:4:41: request.docker.image: not a valid image name: the path component 'Debian' is not lower-case letters and digits joined by '.', '_', '__' or '-'");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": \"x\", \"image\": \"u:p@reg.example:99999/a:b\"}", ""),
		      "x.json:4:41: request.docker.image: not a valid image name: the registry 'reg.example:99999' is not a host name or address with an optional :PORT");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": \"x\", \"environment\": []}", ""),
		      "x.json:4:47: request.docker.environment: must be an object, got array");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": \"x\", \"environment\": {\"1X\": \"a\", \"F\": 0.5}}", ""),
		      "x.json:4:54: request.docker.environment.1X: a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$",
		      "x.json:4:64: request.docker.environment.F: must be a string, got number (quote it to keep its exact text)");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": \"x\", \"projectGidVariableName\": \"1GID\"}", ""),
		      "x.json:4:58: request.docker.projectGidVariableName: must be a variable name matching ^[A-Za-z_][A-Za-z0-9_]*$");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": \"x\", \"storage\": {}}", ""),
		      "x.json:4:43: request.docker.storage: must be an array of objects, got object");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": \"x\", \"storage\": [{\"hostPath\": \"/project/a\"}, {\"containerPath\": \"work\"}, \"/p\"]}", ""),
		      "x.json:4:44: request.docker.storage[0].containerPath: missing",
		      "x.json:4:90: request.docker.storage[1].containerPath: must be an absolute path (start with /) without \"..\"",
		      "x.json:4:99: request.docker.storage[2]: must be an object like {\"containerPath\": \"/project\"}, got string");
	EXPECT_ERRORS(V2(RES_OK, "{\"command\": \"x\", \"portMappings\": [{\"containerPort\": 70000}, {\"hostPort\": 8080}]}", ""),
		      "x.json:4:67: request.docker.portMappings[0].containerPort: must be between 1 and 65535, got 70000",
		      "x.json:4:75: request.docker.portMappings[1].containerPort: missing");
	EXPECT_ERRORS(V2(RES_OK, "\"ls\"", ""),
		      "x.json:4:15: request.docker: must be an object, got string");
}

static void test_gpulab_request_rules_name_the_field(void **state)
{
	(void)state;
	EXPECT_ERRORS(V2(RES_OK, DOCKER_OK, ",\n    \"scheduling\": {\"interactive\": \"yes\"}"),
		      "x.json:5:35: request.scheduling.interactive: must be true or false, got string");
	EXPECT_ERRORS("{\"name\": \"Hello World\", \"request\": {\"resources\": " RES_OK ", \"docker\": " DOCKER_OK "}}",
		      "x.json:1:10: name: the GPULab name is also the mlfs job name, which must be 1 to 64 of A-Z a-z 0-9 . _ ~ - (not \".\" or \"..\"), got \"Hello World\"");
	EXPECT_ERRORS("{\"name\": 1, \"description\": [], \"request\": {\"resources\": " RES_OK ", \"docker\": " DOCKER_OK "}}",
		      "x.json:1:10: name: must be a string, got integer",
		      "x.json:1:28: description: must be a string, got array");
	EXPECT_ERRORS("{\"request\": {\"docker\": " DOCKER_OK "}}",
		      "x.json:1:13: request.resources: missing; GPULab needs at least gpus, cpus and cpuMemoryGb");
	EXPECT_ERRORS("{\"request\": {\"resources\": " RES_OK "}}",
		      "x.json:1:13: request.docker: missing; it holds the command to run");
	EXPECT_ERRORS("{\"request\": 1}",
		      "x.json:1:13: request: must be an object, got integer");
	EXPECT_ERRORS("{\"request\": {}, \"jobDefinition\": {}}",
		      "x.json:1:34: jobDefinition: a GPULab job has either request (version 2) or jobDefinition (version 1), not both",
		      "x.json:1:13: request.resources: missing; GPULab needs at least gpus, cpus and cpuMemoryGb",
		      "x.json:1:13: request.docker: missing; it holds the command to run");
}

/* ---- what cannot be honoured is listed ---- */

static void test_gpulab_storage_maps_sources_and_ports_and_scheduling_are_listed(void **state)
{
	struct mlfs_config *cfg = cfg_check_load("[datastore d]\ntype = local\nroot = /tmp\n"
						 "[source project]\nsource = d:/p\nmount_path = /project\n");
	struct spec_mount *m;
	size_t n = 0, bad = 0;
	struct spec *s = parse_ok(V2("{\"gpus\": 1, \"cpus\": 1, \"cpuMemoryGb\": 1, \"vram\": 8}",
				     "{\"command\": \"x\", \"image\": \"debian:stable\", \"storage\": [{\"containerPath\": \"/project\"}, {\"hostPath\": \"/project/mycode/\", \"containerPath\": \"/work/code/\"}], \"portMappings\": [{\"containerPort\": 80, \"hostPort\": 8080}], \"shm\": 1}",
				     ",\n    \"scheduling\": {\"interactive\": false, \"maxDuration\": \"2 weeks\"}"));

	(void)state;
	EXPECT_IGNORED(s, "request.resources.vram: unknown field, not used",
		       "request.docker.shm: unknown field, not used",
		       "request.docker.portMappings: no container network; the command listens on the node's own ports",
		       "request.scheduling.maxDuration: GPULab scheduling options are not supported");
	/* storage: the [source] whose mount_path covers each path, the rest below it */
	assert_int_equal(spec_worker_mounts(s, 0, cfg, &m, &n, &bad), 0);
	assert_int_equal(n, 2);
	assert_string_equal(m[0].name, "project");
	assert_string_equal(m[0].sub_path, "");
	assert_string_equal(m[0].mount_path, "/project");
	assert_string_equal(m[1].name, "project-2");
	assert_string_equal(m[1].sub_path, "mycode");
	assert_string_equal(m[1].mount_path, "/work/code");
	free(m);
	/* a path no source covers */
	config_free(cfg);
	cfg = cfg_check_load("[datastore d]\ntype = local\nroot = /tmp\n[source other]\n"
			     "source = d:/o\nmount_path = /projects\n");
	assert_int_equal(spec_worker_mounts(s, 0, cfg, &m, &n, &bad), -ENOENT);
	assert_int_equal(bad, 0);
	free(m);
	config_free(cfg);
	spec_free(s);
}

static void test_gpulab_spec_json_says_gpulab(void **state)
{
	struct spec *s = parse_ok(hello_world);
	char *json = spec_to_json(s);

	(void)state;
	assert_non_null(json);
	assert_non_null(strstr(json, "\"format\": \"gpulab\""));
	assert_non_null(strstr(json, "\"GPULAB_MEM_RESERVED\": \"1000m\""));
	free(json);
	spec_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpulab_hello_world_request_maps_field_by_field),
		cmocka_unit_test(test_gpulab_resources_example_gives_substring_models_cuda_and_slave),
		cmocka_unit_test(test_gpulab_command_array_is_single_quoted_for_sh),
		cmocka_unit_test(test_gpulab_command_string_is_kept_as_written),
		cmocka_unit_test(test_gpulab_environment_and_project_gid_variable),
		cmocka_unit_test(test_gpulab_gpus_reserved_equals_the_gpus_given),
		cmocka_unit_test(test_gpulab_v1_definition_is_converted_to_v2),
		cmocka_unit_test(test_gpulab_v1_errors_name_the_v1_fields),
		cmocka_unit_test(test_gpulab_resource_rules_name_the_field),
		cmocka_unit_test(test_gpulab_docker_rules_name_the_field),
		cmocka_unit_test(test_gpulab_image_credentials_are_kept_apart_and_never_shown),
		cmocka_unit_test(test_gpulab_request_rules_name_the_field),
		cmocka_unit_test(test_gpulab_storage_maps_sources_and_ports_and_scheduling_are_listed),
		cmocka_unit_test(test_gpulab_spec_json_says_gpulab),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
