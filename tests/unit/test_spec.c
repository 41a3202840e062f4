/*
 * test_spec.c - unit tests of the spec parser (sched/spec.c, the native
 * format in sched/spec_native.c) and the JSON position index
 * (sched/json_pos.c).
 *
 * Specs are given as strings, one JSON line per C line, so each test shows
 * the text it is about and the line and column of each message can be
 * checked by eye.  Bad specs assert the return code and every message
 * exactly, in order ("file:line:col: field: message"), so positions are
 * tested along with the words.  Nothing touches the disk.
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

#include <cmocka.h>

#include <jansson.h>

#include "backend.h"
#include "config.h"
#include "diag.h"
#include "json_pos.h"
#include "spec.h"
#include "spec_check.h"

/* ---- helpers ---- */

/* A spec whose lines 2.. are @body, then one worker running "x". */
#define WITH_WORKER(body) "{\n" body "  \"workers\": [{\"command\": \"x\"}]\n}\n"

static struct spec *parse_named(const char *text, const char *default_name)
{
	struct spec *s = NULL;
	struct diag d;
	int ret;

	diag_init(&d);
	ret = spec_parse(&s, "x.json", text, strlen(text), default_name, &d);
	diag_print(&d, stderr);
	assert_int_equal(ret, 0);
	assert_int_equal(d.n, 0);
	assert_non_null(s);
	diag_free(&d);
	return s;
}

static struct spec *parse_ok(const char *text)
{
	return parse_named(text, "x");
}

/* Parses a bad spec: @want_ret, *out untouched, exactly the messages @want. */
static void check_errors(const char *text, size_t len, const char *default_name, int want_ret,
			 const char *const *want)
{
	struct spec untouched;
	struct spec *s = &untouched;
	struct diag d;
	size_t n = 0;
	int ret;

	diag_init(&d);
	ret = spec_parse(&s, "x.json", text, len, default_name, &d);
	while (want[n])
		n++;
	if (d.n != n || ret != want_ret)
		diag_print(&d, stderr);
	assert_int_equal(ret, want_ret);
	assert_ptr_equal(s, &untouched);
	assert_int_equal(d.n, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(d.msgs[i], want[i]);
	diag_free(&d);
}

#define EXPECT_ERRORS(text, ...) \
	check_errors((text), strlen(text), "x", -EINVAL, (const char *const[]){ __VA_ARGS__, NULL })

static const char *env_value(const struct spec *s, const char *name)
{
	for (size_t i = 0; i < s->n_env; i++)
		if (strcmp(s->env[i].name, name) == 0)
			return s->env[i].value;
	return NULL;
}

/* ---- good specs ---- */

static void test_spec_minimal_spec_gets_every_default(void **state)
{
	struct spec *s = parse_ok("{\"name\": \"job1\", \"workers\": [{\"command\": \"python t.py\"}]}");
	const struct spec_resources *r = &s->workers[0].res;

	(void)state;
	assert_int_equal(s->format, SPEC_NATIVE);
	assert_string_equal(s->name, "job1");
	assert_int_equal(s->type, SPEC_TRAINING);
	assert_int_equal(s->n_workers, 1);
	assert_string_equal(s->workers[0].command, "python t.py");
	assert_int_equal(s->workers[0].n_env, 0);
	assert_int_equal(r->n_gpu_types, 0);
	assert_false(r->gpu_type_substring);
	assert_int_equal(r->gpu_count, 0);
	assert_int_equal(r->cpu_count, 4);
	assert_true(r->memory_gb < 0);
	assert_int_equal(r->disk_size_gb, 10);
	assert_true(r->max_price < 0);
	assert_null(r->min_cuda_version);
	assert_false(s->gang);
	assert_int_equal(s->n_env, 0);
	assert_int_equal(s->retry_count, 0);
	assert_int_equal(s->wait_timeout, -1);
	assert_int_equal(s->run_timeout, -1);
	assert_int_equal(s->n_ignored, 0);
	spec_free(s);
}

static void test_spec_gpu_types_default_to_one_gpu_and_one_cpu_per_gpu(void **state)
{
	struct spec *s = parse_ok(WITH_WORKER("  \"resources\": {\"gpu_types\": [\"A100\", \"H100\"]},\n"));
	const struct spec_resources *r = &s->workers[0].res;

	(void)state;
	assert_int_equal(r->n_gpu_types, 2);
	assert_string_equal(r->gpu_types[0], "A100");
	assert_string_equal(r->gpu_types[1], "H100");
	assert_int_equal(r->gpu_count, 1);
	assert_int_equal(r->cpu_count, 1);
	spec_free(s);
	s = parse_ok(WITH_WORKER("  \"resources\": {\"gpu_count\": 3},\n"));
	assert_int_equal(s->workers[0].res.gpu_count, 3);
	assert_int_equal(s->workers[0].res.cpu_count, 3);
	assert_int_equal(s->workers[0].res.n_gpu_types, 0);
	spec_free(s);
}

static void test_spec_reads_every_field(void **state)
{
	struct spec *s = parse_ok("{\n"
				  "  \"name\": \"big-run_2.v~1\",\n"
				  "  \"type\": \"inference\",\n"
				  "  \"resources\": {\"gpu_types\": [\"RTX 3090\"], \"gpu_count\": 2,\n"
				  "    \"cpu_count\": 6, \"memory_gb\": 31.5, \"disk_size_gb\": 1000,\n"
				  "    \"max_price\": 0, \"min_cuda_version\": \"12.4\"},\n"
				  "  \"workers\": [{\"command\": \"a\"}],\n"
				  "  \"retry_count\": 2,\n"
				  "  \"wait_timeout_seconds\": 60,\n"
				  "  \"run_timeout_seconds\": 3600.0\n"
				  "}\n");
	const struct spec_resources *r = &s->workers[0].res;

	(void)state;
	assert_string_equal(s->name, "big-run_2.v~1");
	assert_int_equal(s->type, SPEC_INFERENCE);
	assert_int_equal(r->gpu_count, 2);
	assert_int_equal(r->cpu_count, 6);	/* a multiple of 4 only when CPU-only */
	assert_true(r->memory_gb == 31.5);
	assert_int_equal(r->disk_size_gb, 1000);
	assert_true(r->max_price == 0);
	assert_string_equal(r->min_cuda_version, "12.4");
	assert_int_equal(s->retry_count, 2);
	assert_int_equal(s->wait_timeout, 60);
	assert_int_equal(s->run_timeout, 3600);
	spec_free(s);
}

static void test_spec_min_cuda_version_as_number_is_stored_as_text(void **state)
{
	struct spec *s = parse_ok(WITH_WORKER("  \"resources\": {\"min_cuda_version\": 11.8},\n"));

	(void)state;
	assert_string_equal(s->workers[0].res.min_cuda_version, "11.8");
	spec_free(s);
	s = parse_ok(WITH_WORKER("  \"resources\": {\"min_cuda_version\": 12},\n"));
	assert_string_equal(s->workers[0].res.min_cuda_version, "12");
	spec_free(s);
}

static void test_spec_worker_count_repeats_the_one_command(void **state)
{
	struct spec *s = parse_ok("{\"worker_count\": 3, \"workers\": [{\"command\": \"run\"}],\n"
				  " \"resources\": {\"gpu_types\": [\"T4\"], \"min_cuda_version\": \"11\"}}");

	(void)state;
	assert_int_equal(s->n_workers, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_string_equal(s->workers[i].command, "run");
		assert_int_equal(s->workers[i].res.gpu_count, 1);
		assert_int_equal(s->workers[i].res.n_gpu_types, 1);
		assert_string_equal(s->workers[i].res.gpu_types[0], "T4");
		assert_string_equal(s->workers[i].res.min_cuda_version, "11");
	}
	/* each worker owns its copy */
	assert_ptr_not_equal(s->workers[0].res.gpu_types, s->workers[1].res.gpu_types);
	assert_ptr_not_equal(s->workers[0].res.gpu_types[0], s->workers[1].res.gpu_types[0]);
	spec_free(s);
}

static void test_spec_workers_list_gives_one_worker_per_entry_and_takes_strings(void **state)
{
	struct spec *s = parse_ok("{\"workers\": [{\"command\": \"a --lr 1\"}, \"b --lr 2\", {\"command\": \"c\"}]}");

	(void)state;
	assert_int_equal(s->n_workers, 3);
	assert_string_equal(s->workers[0].command, "a --lr 1");
	assert_string_equal(s->workers[1].command, "b --lr 2");
	assert_string_equal(s->workers[2].command, "c");
	assert_int_equal(s->workers[2].res.cpu_count, 4);
	spec_free(s);
}

static void test_spec_environment_variables_keep_order_and_convert_ints_and_bools(void **state)
{
	struct spec *s = parse_ok(WITH_WORKER(
		"  \"environment\": {\"variables\": {\"B\": \"two words\", \"_a1\": 8, \"FLAG\": true,\n"
		"    \"OFF\": false, \"EMPTY\": \"\"}},\n"));

	(void)state;
	assert_int_equal(s->n_env, 5);
	assert_string_equal(s->env[0].name, "B");
	assert_string_equal(s->env[1].name, "_a1");
	assert_string_equal(s->env[4].name, "EMPTY");
	assert_string_equal(env_value(s, "B"), "two words");
	assert_string_equal(env_value(s, "_a1"), "8");
	assert_string_equal(env_value(s, "FLAG"), "true");
	assert_string_equal(env_value(s, "OFF"), "false");
	assert_string_equal(env_value(s, "EMPTY"), "");
	assert_int_equal(s->workers[0].n_env, 0);
	spec_free(s);
}

static void test_spec_ignored_lists_unsupported_and_unknown_fields_in_order(void **state)
{
	struct spec *s = parse_ok(WITH_WORKER(
		"  \"color\": \"blue\",\n"
		"  \"data\": {\"datasets\": [\"PASCAL VOC\"], \"output\": {\"type\": \"s3\",\n"
		"    \"path\": \"s3://b/out/\", \"archive\": false, \"region\": \"x\"}, \"extra\": 1},\n"
		"  \"model\": {\"type\": \"datastore\", \"path\": \"code:/m/\", \"ref\": \"main\"},\n"
		"  \"checkpoints\": [\"ck1\"],\n"
		"  \"resources\": {\"gpu_count\": 1, \"shm\": 2, \"gpu_typ\": \"x\"},\n"
		"  \"enviroment\": {},\n"
		"  \"environment\": {\"type\": \"DEEPLEARNING_PY39\", \"worker_key_types\": [\"aws\"],\n"
		"    \"packages\": {\"pip\": [\"numpy==1.26\"], \"npm\": []}, \"x\": {},\n"
		"    \"image\": \"debian:12\"},\n"));

	(void)state;
	EXPECT_IGNORED(s,
		"color: unknown field, not used",
		"data.extra: unknown field, not used",
		"data.output.region: unknown field, not used",
		"model.ref: unknown field, not used",
		"resources.shm: unknown field, not used",
		"resources.gpu_typ: unknown field, not used (did you mean 'gpu_types'?)",
		"enviroment: unknown field, not used (did you mean 'environment'?)",
		"environment.x: unknown field, not used",
		"environment.packages.npm: unknown field, not used",
		"environment.type: not used; workers run in the node's own environment",
		"environment.worker_key_types: third-party keys are not yet supported");
	spec_free(s);
}

static void test_spec_accepts_every_output_and_input_path_form(void **state)
{
	static const char *const outputs[] = {
		"\"s3\", \"path\": \"s3://bucket/prefix/\"",
		"\"local\", \"path\": \"/data/out\"",
		"\"datastore\", \"path\": \"nas:/results/\"",
		"\"dataset\", \"path\": \"my new dataset\"",
		"\"checkpoint\", \"path\": \"ck\"",
		"\"model\", \"path\": \"m\"",
	};
	static const char *const inputs[] = {
		"\"web\", \"path\": \"https://host/x.tar.gz\"", "\"web\", \"path\": \"http://h/d/\"",
		"\"azure\", \"path\": \"https://a.blob/x\"", "\"wasabi\", \"path\": \"s3://w/\"",
		"\"s3\", \"path\": \"s3://b/in/\"", "\"datastore\", \"path\": \"nas:/in/\"",
		"\"local\", \"path\": \"/data/in\"",
	};
	static const char *const models[] = {
		"\"datastore\", \"path\": \"code:/m/\"", "\"s3\", \"path\": \"s3://b/m.zip\"",
		"\"http\", \"path\": \"https://h/m.tar.gz\"", "\"local\", \"path\": \"/src/m\"",
		"\"model\", \"path\": \"resnet\"",
	};
	char text[512];

	(void)state;
	for (size_t i = 0; i < sizeof(outputs) / sizeof(outputs[0]); i++) {
		snprintf(text, sizeof(text), WITH_WORKER("  \"data\": {\"output\": {\"type\": %s}},\n"),
			 outputs[i]);
		spec_free(parse_ok(text));
	}
	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		snprintf(text, sizeof(text), WITH_WORKER("  \"type\": \"inference\", \"data\": {\"input\": {\"type\": %s}},\n"),
			 inputs[i]);
		spec_free(parse_ok(text));
	}
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		snprintf(text, sizeof(text), WITH_WORKER("  \"model\": {\"type\": %s},\n"), models[i]);
		spec_free(parse_ok(text));
	}
}

static void test_spec_data_model_and_checkpoints_are_kept_in_spec_order(void **state)
{
	struct spec *s = parse_ok(WITH_WORKER(
		"  \"type\": \"inference\",\n"
		"  \"data\": {\"datasets\": [\"PASCAL VOC\", \"mnist\", \"a_b\"],\n"
		"    \"input\": {\"type\": \"web\", \"path\": \"https://h/x.tar.gz\"},\n"
		"    \"output\": {\"type\": \"dataset\", \"path\": \"new set\"}},\n"
		"  \"model\": {\"type\": \"model\", \"path\": \"resnet\"},\n"
		"  \"checkpoints\": [\"ck2\", \"ck1\"],\n"));
	const struct spec_data *d = &s->data;

	(void)state;
	assert_int_equal(d->n_datasets, 3);
	assert_string_equal(d->datasets[0], "PASCAL VOC");
	assert_string_equal(d->datasets[1], "mnist");
	assert_string_equal(d->datasets[2], "a_b");
	assert_int_equal(d->n_checkpoints, 2);
	assert_string_equal(d->checkpoints[0], "ck2");
	assert_string_equal(d->checkpoints[1], "ck1");
	assert_string_equal(d->input.type, "web");
	assert_string_equal(d->input.path, "https://h/x.tar.gz");
	assert_string_equal(d->output.type, "dataset");
	assert_string_equal(d->output.path, "new set");
	assert_false(d->output.archive);	/* a dataset is plain files */
	assert_string_equal(d->model.type, "model");
	assert_string_equal(d->model.path, "resnet");
	assert_int_equal(s->n_ignored, 0);
	spec_free(s);
}

static void test_spec_without_data_leaves_the_data_model_empty(void **state)
{
	struct spec *s = parse_ok(WITH_WORKER("  \"data\": {\"datasets\": []}, \"checkpoints\": [],\n"));
	const struct spec_data *d = &s->data;

	(void)state;
	assert_int_equal(d->n_datasets, 0);
	assert_null(d->datasets);
	assert_int_equal(d->n_checkpoints, 0);
	assert_null(d->input.type);
	assert_null(d->output.type);
	assert_null(d->output.path);
	assert_null(d->model.type);
	spec_free(s);
}

static void test_spec_input_may_come_before_the_type_that_allows_it(void **state)
{
	struct spec *s = parse_ok(WITH_WORKER(
		"  \"data\": {\"input\": {\"type\": \"s3\", \"path\": \"s3://b/x\"}, \"datasets\": [\"d\"]},\n"
		"  \"type\": \"inference\",\n"));

	(void)state;
	assert_int_equal(s->type, SPEC_INFERENCE);
	assert_string_equal(s->data.input.path, "s3://b/x");
	assert_int_equal(s->data.n_datasets, 1);	/* datasets on an inference job are fine */
	spec_free(s);
}

static void test_spec_output_archive_defaults_to_true_for_s3_and_local(void **state)
{
	struct spec *s = parse_ok(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"s3\", \"path\": \"s3://b/o/\"}},\n"));

	(void)state;
	assert_true(s->data.output.archive);
	spec_free(s);
	s = parse_ok(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"local\", \"path\": \"/o\", \"archive\": null}},\n"));
	assert_true(s->data.output.archive);
	spec_free(s);
	s = parse_ok(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"local\", \"path\": \"/o\", \"archive\": false}},\n"));
	assert_false(s->data.output.archive);
	assert_int_equal(s->n_ignored, 0);
	spec_free(s);
	s = parse_ok(WITH_WORKER("  \"data\": {\"output\": {\"archive\": true, \"type\": \"s3\", \"path\": \"s3://b/o/\"}},\n"));
	assert_true(s->data.output.archive);
	spec_free(s);
}

static void test_spec_archive_on_a_datastore_output_is_listed_as_ignored(void **state)
{
	struct spec *s = parse_ok(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"datastore\", \"path\": \"nas:/o/\",\n"
					      "    \"archive\": true}},\n"));

	(void)state;
	assert_string_equal(s->data.output.type, "datastore");
	assert_string_equal(s->data.output.path, "nas:/o/");
	assert_false(s->data.output.archive);
	EXPECT_IGNORED(s, "data.output.archive: only s3 and local outputs are zipped; a datastore output is always plain files");
	spec_free(s);
	s = parse_ok(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"checkpoint\", \"path\": \"ck\", \"archive\": false}},\n"));
	assert_false(s->data.output.archive);
	EXPECT_IGNORED(s, "data.output.archive: only s3 and local outputs are zipped; a checkpoint output is always plain files");
	spec_free(s);
	/* not given: nothing to ignore */
	s = parse_ok(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"datastore\", \"path\": \"nas:/o/\"}},\n"));
	assert_false(s->data.output.archive);
	assert_int_equal(s->n_ignored, 0);
	spec_free(s);
}

static void test_spec_name_comes_from_the_file_when_absent(void **state)
{
	struct spec *s = parse_named("{\"workers\": [\"x\"]}", "from-file");

	(void)state;
	assert_string_equal(s->name, "from-file");
	spec_free(s);
	s = parse_named("{\"name\": \"own\", \"workers\": [\"x\"]}", "bad name ignored");
	assert_string_equal(s->name, "own");
	spec_free(s);
}

static void test_spec_null_means_absent_for_optional_fields(void **state)
{
	struct spec *s = parse_ok(WITH_WORKER(
		"  \"name\": null, \"resources\": {\"max_price\": null, \"gpu_types\": null},\n"
		"  \"run_timeout_seconds\": null, \"data\": null,\n"));

	(void)state;
	assert_string_equal(s->name, "x");
	assert_true(s->workers[0].res.max_price < 0);
	assert_int_equal(s->run_timeout, -1);
	assert_int_equal(s->n_ignored, 0);
	spec_free(s);
}

static void test_spec_reads_text_that_is_not_nul_terminated(void **state)
{
	const char text[] = "{\"workers\": [\"x\"]}GARBAGE";
	struct spec *s = NULL;
	struct diag d;

	(void)state;
	diag_init(&d);
	assert_int_equal(spec_parse(&s, "x.json", text, strlen(text) - 7, "n", &d), 0);
	assert_string_equal(s->workers[0].command, "x");
	spec_free(s);
	diag_free(&d);
}

static void test_spec_exactly_1_mib_is_accepted(void **state)
{
	const char head[] = "{\"workers\": [\"x\"]}";
	char *text = malloc(SPEC_MAX_SIZE);
	struct spec *s = NULL;
	struct diag d;

	(void)state;
	assert_non_null(text);
	memset(text, ' ', SPEC_MAX_SIZE);
	memcpy(text, head, strlen(head));
	diag_init(&d);
	assert_int_equal(spec_parse(&s, "x.json", text, SPEC_MAX_SIZE, "n", &d), 0);
	spec_free(s);
	diag_free(&d);
	free(text);
}

static void test_spec_to_json_shows_the_model_and_redacts_secrets(void **state)
{
	struct spec *s = parse_ok("{\"name\": \"j\", \"workers\": [\"run\"],\n"
				  " \"resources\": {\"gpu_types\": [\"A100\"], \"memory_gb\": 8},\n"
				  " \"environment\": {\"variables\": {\"WANDB_API_KEY\": \"k1\", \"db_password\": \"p\",\n"
				  "   \"MY_Token\": \"t\", \"AWS_SECRET_ACCESS_KEY\": \"s\", \"GCP_CREDENTIALS\": \"c\",\n"
				  "   \"LR\": \"0.1\"}},\n"
				  " \"run_timeout_seconds\": 10, \"checkpoints\": [], \"notes\": \"n\"}");
	char *text = spec_to_json(s);

	(void)state;
	assert_non_null(text);
	assert_string_equal(text,
		"{\n"
		"  \"format\": \"native\",\n"
		"  \"name\": \"j\",\n"
		"  \"type\": \"training\",\n"
		"  \"workers\": [\n"
		"    {\n"
		"      \"command\": \"run\",\n"
		"      \"resources\": {\n"
		"        \"gpu_types\": [\n"
		"          \"A100\"\n"
		"        ],\n"
		"        \"gpu_type_substring\": false,\n"
		"        \"gpu_count\": 1,\n"
		"        \"cpu_count\": 1,\n"
		"        \"memory_gb\": 8.0,\n"
		"        \"disk_size_gb\": 10,\n"
		"        \"max_price\": null,\n"
		"        \"min_cuda_version\": null\n"
		"      }\n"
		"    }\n"
		"  ],\n"
		"  \"gang\": false,\n"
		"  \"environment\": {\n"
		"    \"variables\": {\n"
		"      \"WANDB_API_KEY\": \"<redacted>\",\n"
		"      \"db_password\": \"<redacted>\",\n"
		"      \"MY_Token\": \"<redacted>\",\n"
		"      \"AWS_SECRET_ACCESS_KEY\": \"<redacted>\",\n"
		"      \"GCP_CREDENTIALS\": \"<redacted>\",\n"
		"      \"LR\": \"0.1\"\n"
		"    }\n"
		"  },\n"
		"  \"retry_count\": 0,\n"
		"  \"wait_timeout_seconds\": null,\n"
		"  \"run_timeout_seconds\": 10,\n"
		"  \"ignored\": [\n"
		"    \"notes: unknown field, not used\"\n"
		"  ]\n"
		"}");
	/* the model itself keeps the values */
	assert_string_equal(env_value(s, "WANDB_API_KEY"), "k1");
	free(text);
	spec_free(s);
}

static void test_spec_to_json_shows_the_data_object(void **state)
{
	struct spec *s = parse_ok(WITH_WORKER(
		"  \"type\": \"inference\",\n"
		"  \"data\": {\"datasets\": [\"PASCAL VOC\", \"mnist\"],\n"
		"    \"input\": {\"type\": \"web\", \"path\": \"https://me:tok@h/x.tar.gz\"},\n"
		"    \"output\": {\"type\": \"s3\", \"path\": \"s3://b/out/\", \"archive\": false}},\n"
		"  \"model\": {\"type\": \"datastore\", \"path\": \"code:/m/\"},\n"
		"  \"checkpoints\": [\"ck1\"],\n"));
	char *text = spec_to_json(s);
	const char *data;

	(void)state;
	assert_non_null(text);
	data = strstr(text, "  \"data\": {");
	assert_non_null(data);
	assert_string_equal(data,
		"  \"data\": {\n"
		"    \"datasets\": [\n"
		"      \"PASCAL VOC\",\n"
		"      \"mnist\"\n"
		"    ],\n"
		"    \"checkpoints\": [\n"
		"      \"ck1\"\n"
		"    ],\n"
		"    \"input\": {\n"
		"      \"type\": \"web\",\n"
		"      \"path\": \"https://me:<redacted>@h/x.tar.gz\"\n"
		"    },\n"
		"    \"output\": {\n"
		"      \"type\": \"s3\",\n"
		"      \"path\": \"s3://b/out/\",\n"
		"      \"archive\": false\n"
		"    },\n"
		"    \"model\": {\n"
		"      \"type\": \"datastore\",\n"
		"      \"path\": \"code:/m/\"\n"
		"    }\n"
		"  }\n"
		"}");
	/* the model itself keeps the password */
	assert_string_equal(s->data.input.path, "https://me:tok@h/x.tar.gz");
	free(text);
	spec_free(s);
	/* absent parts are left out */
	s = parse_ok(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"local\", \"path\": \"/o\"}},\n"));
	text = spec_to_json(s);
	assert_non_null(text);
	data = strstr(text, "  \"data\": {");
	assert_non_null(data);
	assert_string_equal(data,
		"  \"data\": {\n"
		"    \"output\": {\n"
		"      \"type\": \"local\",\n"
		"      \"path\": \"/o\",\n"
		"      \"archive\": true\n"
		"    }\n"
		"  }\n"
		"}");
	free(text);
	spec_free(s);
}

static void test_spec_name_valid_follows_the_name_rule(void **state)
{
	char long_name[SPEC_NAME_MAX + 2];

	(void)state;
	assert_true(spec_name_valid("a"));
	assert_true(spec_name_valid("A-z_0.9~"));
	assert_true(spec_name_valid("..."));
	assert_false(spec_name_valid(""));
	assert_false(spec_name_valid("."));
	assert_false(spec_name_valid(".."));
	assert_false(spec_name_valid("a/b"));
	assert_false(spec_name_valid("a b"));
	assert_false(spec_name_valid("caf\xc3\xa9"));
	assert_false(spec_name_valid(NULL));
	memset(long_name, 'a', SPEC_NAME_MAX);
	long_name[SPEC_NAME_MAX] = '\0';
	assert_true(spec_name_valid(long_name));
	long_name[SPEC_NAME_MAX] = 'a';
	long_name[SPEC_NAME_MAX + 1] = '\0';
	assert_false(spec_name_valid(long_name));
}

static void test_spec_format_names(void **state)
{
	(void)state;
	assert_string_equal(spec_format_name(SPEC_NATIVE), "native");
	assert_string_equal(spec_format_name(SPEC_OPENPAI), "openpai");
	assert_string_equal(spec_format_name(SPEC_GPULAB), "gpulab");
	assert_string_equal(spec_format_name(SPEC_KIBERNETIKA), "kibernetika");
	assert_string_equal(spec_format_name((enum spec_format)99), "unknown");
}

/* ---- bad specs: the document ---- */

static void test_spec_malformed_json_reports_jansson_line_and_column(void **state)
{
	(void)state;
	EXPECT_ERRORS("{\n"
		      "  \"name\": \"a\",\n"
		      "  \"workers\": [}\n",
		      "x.json:3:15: json: unexpected token near '}'");
	EXPECT_ERRORS("{\"name\": \"a\",}", "x.json:1:14: json: string or '}' expected near '}'");
	EXPECT_ERRORS("", "x.json:1:1: json: the spec is empty; it must be a JSON object ({ ... })");
}

static void test_spec_duplicate_key_is_a_json_error(void **state)
{
	(void)state;
	EXPECT_ERRORS("{\"name\": \"a\",\n \"name\": \"b\"}",
		      "x.json:2:7: json: duplicate object key near '\"name\"'");
}

static void test_spec_top_level_must_be_an_object(void **state)
{
	(void)state;
	EXPECT_ERRORS("[{\"command\": \"x\"}]",
		      "x.json:1:1: json: the spec must be a JSON object ({ ... }), got array");
	EXPECT_ERRORS("\n  42\n", "x.json:2:3: json: the spec must be a JSON object ({ ... }), got integer");
	EXPECT_ERRORS("\"s\"", "x.json:1:1: json: the spec must be a JSON object ({ ... }), got string");
}

static void test_spec_over_1_mib_is_efbig(void **state)
{
	size_t len = SPEC_MAX_SIZE + 1;
	char *text = malloc(len);

	(void)state;
	assert_non_null(text);
	memset(text, ' ', len);
	text[0] = '{';
	text[len - 1] = '}';
	check_errors(text, len, "x", -EFBIG, (const char *const[]){
		"x.json:1:1: json: the spec is 1048577 bytes, over the limit of 1048576 (1 MiB)", NULL });
	free(text);
}

/* ---- bad specs: types ---- */

static void test_spec_wrong_top_level_types_are_all_reported(void **state)
{
	(void)state;
	EXPECT_ERRORS("{\n"
		      "  \"name\": 7,\n"
		      "  \"type\": [\"training\"],\n"
		      "  \"resources\": \"big\",\n"
		      "  \"data\": [],\n"
		      "  \"model\": \"m\",\n"
		      "  \"checkpoints\": \"ck\",\n"
		      "  \"workers\": {\"command\": \"x\"},\n"
		      "  \"worker_count\": \"2\",\n"
		      "  \"environment\": [],\n"
		      "  \"retry_count\": 1.5,\n"
		      "  \"wait_timeout_seconds\": \"60\",\n"
		      "  \"run_timeout_seconds\": false\n"
		      "}\n",
		      "x.json:2:11: name: must be a string, got integer",
		      "x.json:3:11: type: must be a string, got array",
		      "x.json:4:16: resources: must be an object, got string",
		      "x.json:5:11: data: must be an object, got array",
		      "x.json:6:12: model: must be an object, got string",
		      "x.json:7:18: checkpoints: must be an array of strings, got string",
		      "x.json:8:14: workers: must be an array like [{\"command\": \"...\"}], got object",
		      "x.json:9:19: worker_count: must be an integer, got string",
		      "x.json:10:18: environment: must be an object, got array",
		      "x.json:11:18: retry_count: must be an integer, got 1.5",
		      "x.json:12:27: wait_timeout_seconds: must be an integer, got string",
		      "x.json:13:26: run_timeout_seconds: must be an integer, got boolean");
}

static void test_spec_wrong_resource_types_are_all_reported(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER(
		"  \"resources\": {\n"
		"    \"gpu_types\": \"A100\",\n"
		"    \"gpu_count\": \"2\",\n"
		"    \"cpu_count\": 2.5,\n"
		"    \"memory_gb\": \"16G\",\n"
		"    \"disk_size_gb\": true,\n"
		"    \"max_price\": [],\n"
		"    \"min_cuda_version\": {}\n"
		"  },\n"),
		"x.json:3:18: resources.gpu_types: must be an array of strings, got string",
		"x.json:4:18: resources.gpu_count: must be an integer, got string",
		"x.json:5:18: resources.cpu_count: must be an integer, got 2.5",
		"x.json:6:18: resources.memory_gb: must be a number, got string",
		"x.json:7:21: resources.disk_size_gb: must be an integer, got boolean",
		"x.json:8:18: resources.max_price: must be a number, got array",
		"x.json:9:25: resources.min_cuda_version: must be a version like \"11.8\", got object");
}

static void test_spec_gpu_types_elements_must_be_non_empty_strings(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"resources\": {\"gpu_types\": [\"A100\", 3, \" \"]},\n"),
		      "x.json:2:39: resources.gpu_types[1]: must be a string, got integer",
		      "x.json:2:42: resources.gpu_types[2]: must not be empty");
	EXPECT_ERRORS(WITH_WORKER("  \"resources\": {\"gpu_types\": []},\n"),
		      "x.json:2:30: resources.gpu_types: must list at least one GPU type; leave it out for any type or a CPU-only job");
}

static void test_spec_gpu_count_0_contradicts_gpu_types(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"resources\": {\"gpu_types\": [\"T4\"], \"gpu_count\": 0},\n"),
		      "x.json:2:51: resources.gpu_count: is 0 but gpu_types lists 1 GPU type(s); leave gpu_types out for a CPU-only job");
}

static void test_spec_min_cuda_version_must_look_like_a_version(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"resources\": {\"min_cuda_version\": \"11.8.x\"},\n"),
		      "x.json:2:37: resources.min_cuda_version: must be a version like \"11.8\", got \"11.8.x\"");
	EXPECT_ERRORS(WITH_WORKER("  \"resources\": {\"min_cuda_version\": -1}, \n"),
		      "x.json:2:37: resources.min_cuda_version: must be a version like \"11.8\", got \"-1\"");
}

static void test_spec_type_must_be_training_or_inference(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"type\": \"notebook\",\n"),
		      "x.json:2:11: type: must be \"training\" or \"inference\", got \"notebook\"");
}

/* ---- bad specs: numbers ---- */

static void test_spec_negative_and_zero_counts_are_refused(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER(
		"  \"resources\": {\"gpu_count\": -1, \"cpu_count\": 0, \"memory_gb\": 0, \"max_price\": -0.5},\n"
		"  \"retry_count\": -1, \"wait_timeout_seconds\": 0, \"run_timeout_seconds\": -5,\n"),
		"x.json:2:30: resources.gpu_count: must be at least 0, got -1",
		"x.json:2:47: resources.cpu_count: must be at least 1, got 0",
		"x.json:2:63: resources.memory_gb: must be more than 0, got 0",
		"x.json:2:79: resources.max_price: must be at least 0, got -0.5",
		"x.json:3:18: retry_count: must be at least 0, got -1",
		"x.json:3:46: wait_timeout_seconds: must be at least 1, got 0",
		"x.json:3:72: run_timeout_seconds: must be at least 1, got -5");
}

static void test_spec_cpu_only_cpu_count_must_be_multiple_of_4(void **state)
{
	struct spec *s;

	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"resources\": {\"cpu_count\": 6},\n"),
		      "x.json:2:30: resources.cpu_count: a CPU-only job needs a multiple of 4 CPUs, got 6");
	EXPECT_ERRORS(WITH_WORKER("  \"resources\": {\"cpu_count\": 6, \"gpu_count\": 0},\n"),
		      "x.json:2:30: resources.cpu_count: a CPU-only job needs a multiple of 4 CPUs, got 6");
	s = parse_ok(WITH_WORKER("  \"resources\": {\"cpu_count\": 8},\n"));
	assert_int_equal(s->workers[0].res.cpu_count, 8);
	spec_free(s);
}

static void test_spec_disk_size_must_be_10_to_1000(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"resources\": {\"disk_size_gb\": 5},\n"),
		      "x.json:2:33: resources.disk_size_gb: must be between 10 and 1000, got 5");
	EXPECT_ERRORS(WITH_WORKER("  \"resources\": {\"disk_size_gb\": 2000},\n"),
		      "x.json:2:33: resources.disk_size_gb: must be between 10 and 1000, got 2000");
}

/* ---- bad specs: workers ---- */

static void test_spec_missing_workers_points_at_the_top_level_brace(void **state)
{
	(void)state;
	EXPECT_ERRORS("\n  {\"name\": \"a\"}",
		      "x.json:2:3: workers: missing; a job needs at least one worker, e.g. \"workers\": [{\"command\": \"python train.py\"}]");
}

static void test_spec_missing_command_points_at_the_worker_brace(void **state)
{
	(void)state;
	EXPECT_ERRORS("{\"workers\": [\"a\",\n"
		      "   {\"cmd\": \"b\"}]}",
		      "x.json:2:4: workers[1].command: missing");
}

static void test_spec_workers_must_not_be_empty(void **state)
{
	(void)state;
	EXPECT_ERRORS("{\"workers\": []}", "x.json:1:13: workers: must list 1 to 1024 workers, got 0");
}

static void test_spec_empty_and_whitespace_commands_are_refused(void **state)
{
	(void)state;
	EXPECT_ERRORS("{\"workers\": [{\"command\": \"\"},\n"
		      "  {\"command\": \" \\t\\n \"}, \"  \", {\"command\": 5}, 7, null]}",
		      "x.json:1:26: workers[0].command: must not be empty or only whitespace",
		      "x.json:2:15: workers[1].command: must not be empty or only whitespace",
		      "x.json:2:26: workers[2]: must not be empty or only whitespace",
		      "x.json:2:44: workers[3].command: must be a string, got integer",
		      "x.json:2:48: workers[4]: must be an object like {\"command\": \"...\"} or a string, got integer",
		      "x.json:2:51: workers[5]: must be an object like {\"command\": \"...\"} or a string, got null");
}

static void test_spec_worker_count_needs_exactly_one_workers_entry(void **state)
{
	(void)state;
	EXPECT_ERRORS("{\"workers\": [\"a\", \"b\"],\n"
		      " \"worker_count\": 2}",
		      "x.json:2:18: worker_count: 2 workers repeat the one command of workers, but workers has 2 entries; give one entry, or leave worker_count out");
}

static void test_spec_worker_count_must_be_1_to_1024(void **state)
{
	(void)state;
	EXPECT_ERRORS("{\"workers\": [\"a\"], \"worker_count\": 0}",
		      "x.json:1:36: worker_count: must be between 1 and 1024, got 0");
	EXPECT_ERRORS("{\"workers\": [\"a\"], \"worker_count\": 1025}",
		      "x.json:1:36: worker_count: must be between 1 and 1024, got 1025");
}

/* ---- bad specs: name ---- */

static void test_spec_name_with_bad_characters_is_refused(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"name\": \"my job\",\n"),
		      "x.json:2:11: name: may hold only A-Z a-z 0-9 . _ ~ -, got ' ' at character 3");
	EXPECT_ERRORS(WITH_WORKER("  \"name\": \"a/b\",\n"),
		      "x.json:2:11: name: may hold only A-Z a-z 0-9 . _ ~ -, got '/' at character 2");
	EXPECT_ERRORS(WITH_WORKER("  \"name\": \"caf\\u00e9\",\n"),
		      "x.json:2:11: name: may hold only A-Z a-z 0-9 . _ ~ -, got byte 0xc3 at character 4");
	EXPECT_ERRORS(WITH_WORKER("  \"name\": \"\",\n"), "x.json:2:11: name: must not be empty");
}

static void test_spec_name_longer_than_64_is_refused(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"name\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\n"),
		      "x.json:2:11: name: is 65 characters long, the limit is 64");
}

static void test_spec_name_dot_dot_is_refused(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"name\": \"..\",\n"), "x.json:2:11: name: must not be \".\" or \"..\"");
	EXPECT_ERRORS(WITH_WORKER("  \"name\": \".\",\n"), "x.json:2:11: name: must not be \".\" or \"..\"");
}

static void test_spec_bad_file_name_is_reported_under_name_when_spec_has_none(void **state)
{
	const char text[] = "{\"workers\": [\"a\"]}";

	(void)state;
	check_errors(text, strlen(text), "my job", -EINVAL, (const char *const[]){
		"x.json:1:1: name: missing, so the file name \"my job\" was used as the job name, but it may hold only A-Z a-z 0-9 . _ ~ -, got ' ' at character 3; add a \"name\" field",
		NULL });
	check_errors(text, strlen(text), NULL, -EINVAL, (const char *const[]){
		"x.json:1:1: name: missing, and there is no file name to name the job after", NULL });
}

/* ---- bad specs: environment ---- */

static void test_spec_bad_environment_variable_names_and_values_are_refused(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER(
		"  \"environment\": {\"variables\": {\"1ABC\": \"x\", \"A-B\": \"y\",\n"
		"    \"A.B\": \"z\", \"OK\": {}, \"PI\": 3.14, \"N\": null, \"\": \"e\"}},\n"),
		"x.json:2:41: environment.variables.1ABC: a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$",
		"x.json:2:53: environment.variables.A-B: a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$",
		"x.json:3:12: environment.variables.A.B: a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$",
		"x.json:3:23: environment.variables.OK: must be a string, got object",
		"x.json:3:33: environment.variables.PI: must be a string, got number (quote it to keep its exact text)",
		"x.json:3:44: environment.variables.N: must be a string, got null",
		"x.json:3:54: environment.variables.: a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$");
}

static void test_spec_bad_packages_are_refused(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"environment\": {\"packages\": {\"apt\": \"curl\", \"pip\": [1]}},\n"),
		      "x.json:2:39: environment.packages.apt: must be an array of strings, got string",
		      "x.json:2:55: environment.packages.pip[0]: must be a string, got integer");
}

static void test_spec_packages_are_one_name_an_entry_and_need_an_image(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"environment\": {\"image\": \"debian:12\", \"packages\": {\"apt\": [\"-o\",\n"
				  "    \"a b\", \"ok=1\"], \"pip\": [\"x\\ny\"]}},\n"),
		      "x.json:2:62: environment.packages.apt[0]: \"-o\" starts with '-': a package, not "
		      "an option of apt",
		      "x.json:3:5: environment.packages.apt[1]: \"a b\" is not one package name: one "
		      "entry per package, without blanks, such as \"numpy==1.26.4\"",
		      "x.json:3:29: environment.packages.pip[0]: \"x?y\" is not one package name: "
		      "one entry per package, without blanks, such as \"numpy==1.26.4\"");
	EXPECT_ERRORS(WITH_WORKER("  \"environment\": {\"packages\": {\"pip\": [\"torch\"]}},\n"),
		      "x.json:2:31: environment.packages: they are installed in the job's image, and "
		      "it names none: give environment.image, or a base environment "
		      "(environment.python_version, framework, framework_version)");
}

static void test_spec_base_environment_is_kept_with_its_packages_in_order(void **state)
{
	struct spec *s = parse_ok(WITH_WORKER(
		"  \"environment\": {\"python_version\": 3.9, \"framework\": \"PyTorch\",\n"
		"    \"framework_version\": \"2.10\", \"packages\": {\"pip\": [\"b\", \"a==1\"],\n"
		"    \"apt\": [\"libgl1\"], \"conda\": []}},\n"));
	char *text;

	(void)state;
	assert_string_equal(s->base_env.python_version, "3.9");
	assert_string_equal(s->base_env.framework, "PyTorch");
	assert_string_equal(s->base_env.framework_version, "2.10");
	assert_string_equal(s->base_env.field, "environment.python_version");
	assert_null(s->base_env.name);
	assert_null(s->workers[0].image.ref);	/* until the scheduler resolves it */
	assert_int_equal(s->packages.n_apt, 1);
	assert_string_equal(s->packages.apt[0], "libgl1");
	assert_int_equal(s->packages.n_conda, 0);
	assert_int_equal(s->packages.n_pip, 2);
	assert_string_equal(s->packages.pip[0], "b");
	assert_string_equal(s->packages.pip[1], "a==1");
	assert_int_equal(s->n_ignored, 0);
	text = spec_to_json(s);
	assert_non_null(strstr(text, "\"python_version\": \"3.9\",\n    \"framework\": \"PyTorch\",\n"
				     "    \"framework_version\": \"2.10\",\n    \"packages\": {\n"
				     "      \"apt\": [\n        \"libgl1\"\n      ],\n"
				     "      \"conda\": [],\n      \"pip\": [\n        \"b\",\n        \"a==1\"\n"));
	free(text);
	spec_free(s);
}

static void test_spec_base_environment_and_image_exclude_each_other(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"environment\": {\"image\": \"debian:12\", \"framework\": \"tf\"},\n"),
		      "x.json:2:54: environment.framework: a base environment and environment.image "
		      "exclude each other: give one (environment.image is proxiML's Customer Provided "
		      "image)");
	EXPECT_ERRORS(WITH_WORKER("  \"environment\": {\"python_version\": \"3.x\", \"framework\": \"\",\n"
				  "    \"framework_version\": [2]},\n"),
		      "x.json:2:37: environment.python_version: must be a version like \"3.11\", got \"3.x\"",
		      "x.json:2:57: environment.framework: must not be empty",
		      "x.json:3:26: environment.framework_version: must be a version like \"3.11\", got array");
	EXPECT_ERRORS(WITH_WORKER("  \"environment\": {\"framework_version\": \"2.1\"},\n"),
		      "x.json:2:40: environment.framework_version: a framework's version needs "
		      "environment.framework");
}

/* The base environment of @spec_env (an "environment" object's members) resolved against @conf. */
static int resolve(const char *conf, const char *spec_env, struct spec **out, struct diag *d)
{
	struct mlfs_config *cfg = NULL;
	char text[1024];
	struct diag cd;
	int ret;

	diag_init(&cd);
	assert_int_equal(config_parse(&cfg, "n.conf", conf, strlen(conf), backend_config_forms(), &cd), 0);
	diag_free(&cd);
	snprintf(text, sizeof(text), "{\"environment\": {%s},\n \"workers\": [\"x\", \"y\"]}",
		 spec_env);
	*out = parse_ok(text);
	diag_init(d);
	ret = spec_check_environment(*out, cfg, "x.json", text, strlen(text), d);
	config_free(cfg);
	return ret;
}

static const char resolve_conf[] =
	"[environment py39]\nimage = r/py:3.9\npython_version = 3.9\n"
	"[environment torch-old]\nimage = r/torch:1.9\npython_version = 3.9\nframework = PyTorch\n"
	"framework_version = 1.9\n"
	"[environment torch-new]\nimage = r/torch:1.13\npython_version = 3.9\nframework = pytorch\n"
	"framework_version = 1.13\n"
	"[environment torch-py310]\nimage = r/torch:1.13-py310\npython_version = 3.10\n"
	"framework = pytorch\nframework_version = 1.13\n";

static void test_spec_environment_resolves_to_the_matching_section(void **state)
{
	static const struct {
		const char *spec, *name;
	} cases[] = {
		/* every field given: that one */
		{ "\"python_version\": \"3.9\", \"framework\": \"PYTORCH\", \"framework_version\": \"1.9\"",
		  "torch-old" },
		/* no framework_version: the highest, 1.13 above 1.9, then the highest python */
		{ "\"framework\": \"pytorch\"", "torch-py310" },
		{ "\"python_version\": 3.9, \"framework\": \"pytorch\"", "torch-new" },
		/* a python_version alone: any framework, the highest framework_version */
		{ "\"python_version\": 3.9", "torch-new" },
		{ "\"python_version\": \"3.10\"", "torch-py310" },
	};
	struct spec *s;
	struct diag d;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(resolve(resolve_conf, cases[i].spec, &s, &d), 0);
		assert_int_equal(d.n, 0);
		assert_string_equal(s->base_env.name, cases[i].name);
		for (size_t w = 0; w < s->n_workers; w++) {
			assert_non_null(strstr(s->workers[w].image.ref, "r/"));
			assert_string_equal(s->workers[w].image.ref_field, s->base_env.field);
		}
		diag_free(&d);
		spec_free(s);
	}
	assert_int_equal(resolve(resolve_conf, "\"framework\": \"PyTorch\", \"framework_version\": \"1.9\"",
				 &s, &d), 0);
	assert_string_equal(s->workers[1].image.ref, "r/torch:1.9");
	diag_free(&d);
	spec_free(s);
}

static void test_spec_environment_without_a_match_names_the_choices(void **state)
{
	struct spec *s;
	struct diag d;

	(void)state;
	assert_int_equal(resolve(resolve_conf, "\"python_version\": \"3.11\", \"framework\": \"tf\"",
				 &s, &d), -EINVAL);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0], "x.json:1:36: environment.python_version: no base environment "
			    "of this node has python_version 3.11, framework tf; it has py39 "
			    "(python_version 3.9), torch-old (python_version 3.9, framework PyTorch "
			    "1.9), torch-new (python_version 3.9, framework pytorch 1.13), torch-py310 "
			    "(python_version 3.10, framework pytorch 1.13)");
	assert_null(s->workers[0].image.ref);
	diag_free(&d);
	spec_free(s);
	assert_int_equal(resolve("[mlfs]\n", "\"framework\": \"tf\"", &s, &d), -EINVAL);
	assert_string_equal(d.msgs[0], "x.json:1:31: environment.framework: no base environment of "
			    "this node has framework tf: it has none ([environment NAME] in its "
			    "config); give environment.image instead");
	diag_free(&d);
	spec_free(s);
}

/* ---- bad specs: data and model paths ---- */

static void test_spec_bad_output_path_for_each_type_is_refused(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"s3\", \"path\": \"bucket/x\"}},\n"),
		      "x.json:2:45: data.output.path: a s3 path must start with s3://, got \"bucket/x\"");
	EXPECT_ERRORS(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"s3\", \"path\": \"s3://\"}},\n"),
		      "x.json:2:45: data.output.path: a s3 path must start with s3://, got \"s3://\"");
	EXPECT_ERRORS(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"local\", \"path\": \"out/\"}},\n"),
		      "x.json:2:48: data.output.path: a local path must be an absolute path (start with /), got \"out/\"");
	EXPECT_ERRORS(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"datastore\", \"path\": \"/results\"}},\n"),
		      "x.json:2:52: data.output.path: a datastore path must be NAME:/folder, NAME a configured datastore, got \"/results\"");
	EXPECT_ERRORS(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"dataset\", \"path\": \" \"}},\n"),
		      "x.json:2:50: data.output.path: a dataset path must be the dataset's name, got \" \"");
	EXPECT_ERRORS(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"checkpoint\", \"path\": \"\"}},\n"),
		      "x.json:2:53: data.output.path: a checkpoint path must be the checkpoint's name, got \"\"");
	EXPECT_ERRORS(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"model\", \"path\": \"\"}},\n"),
		      "x.json:2:48: data.output.path: a model path must be the model's name, got \"\"");
}

static void test_spec_output_type_must_be_known_and_fields_present(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"data\": {\"output\": {\"type\": \"wasabi\", \"path\": \"https://x\", \"archive\": \"no\"}},\n"),
		      "x.json:2:31: data.output.type: must be one of s3, gcp, azure, datastore, local, dataset, checkpoint, model, got \"wasabi\"",
		      "x.json:2:73: data.output.archive: must be true or false, got string");
	EXPECT_ERRORS(WITH_WORKER("  \"data\": {\"output\": {}},\n"),
		      "x.json:2:22: data.output.type: missing",
		      "x.json:2:22: data.output.path: missing");
}

static void test_spec_bad_input_and_model_paths_are_refused(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"type\": \"inference\",\n"
				  "  \"data\": {\"input\": {\"type\": \"web\", \"path\": \"s3://b/x\"},\n"
				  "    \"datasets\": [\"\"]},\n"
				  "  \"model\": {\"type\": \"http\", \"path\": \"github.com/a/b\"},\n"),
		      "x.json:4:18: data.datasets[0]: must not be empty",
		      "x.json:3:45: data.input.path: a web path must start with http:// or https:// or ftp:// or ftps://, got \"s3://b/x\"",
		      "x.json:5:37: model.path: a http path must start with http:// or https://, got \"github.com/a/b\"");
}

static void test_spec_a_name_listed_twice_is_refused_at_its_later_index(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"data\": {\"datasets\": [\"x\", \"y\", \"x\", \"y\"]},\n"
				  "  \"checkpoints\": [\"c\", \"c\"],\n"),
		      "x.json:2:35: data.datasets[2]: \"x\" is listed twice",
		      "x.json:2:40: data.datasets[3]: \"y\" is listed twice",
		      "x.json:3:24: checkpoints[1]: \"c\" is listed twice");
}

/* {"checkpoints": ["n0", ... "n<count-1>"], "workers": ["x"]}, malloc'd */
static char *spec_with_checkpoints(size_t count)
{
	char *text = malloc(count * 16 + 64);
	size_t used;

	assert_non_null(text);
	used = (size_t)sprintf(text, "{\"checkpoints\": [");
	for (size_t i = 0; i < count; i++)
		used += (size_t)sprintf(text + used, "%s\"n%zu\"", i ? ", " : "", i);
	sprintf(text + used, "], \"workers\": [\"x\"]}");
	return text;
}

static void test_spec_more_than_1024_names_are_refused(void **state)
{
	char *text = spec_with_checkpoints(1024);
	struct spec *s = parse_ok(text);

	(void)state;
	assert_int_equal(s->data.n_checkpoints, 1024);
	assert_string_equal(s->data.checkpoints[1023], "n1023");
	spec_free(s);
	free(text);
	text = spec_with_checkpoints(1025);
	EXPECT_ERRORS(text, "x.json:1:17: checkpoints: must list at most 1024 names, got 1025");
	free(text);
}

static void test_spec_input_on_a_training_job_is_refused(void **state)
{
	(void)state;
	EXPECT_ERRORS(WITH_WORKER("  \"data\": {\"input\": {\"type\": \"s3\", \"path\": \"s3://b/x\"}},\n"),
		      "x.json:2:21: data.input: only an inference job takes an input; set \"type\": \"inference\" or list datasets");
	EXPECT_ERRORS(WITH_WORKER("  \"data\": {\"input\": {\"type\": \"s3\", \"path\": \"s3://b/x\"}},\n"
				  "  \"type\": \"training\",\n"),
		      "x.json:2:21: data.input: only an inference job takes an input; set \"type\": \"inference\" or list datasets");
	/* a bad type is reported once, not again as a training job's input */
	EXPECT_ERRORS(WITH_WORKER("  \"type\": \"serve\",\n"
				  "  \"data\": {\"input\": {\"type\": \"s3\", \"path\": \"s3://b/x\"}},\n"),
		      "x.json:2:11: type: must be \"training\" or \"inference\", got \"serve\"");
}

static void test_spec_paths_of_the_newer_types_are_checked(void **state)
{
	(void)state;
	/* gcp is read now (the gcs backend): a gs:// path is its one form */
	EXPECT_ERRORS(WITH_WORKER("  \"type\": \"inference\",\n"
				  "  \"data\": {\"input\": {\"type\": \"gcp\", \"path\": \"b/x\"}},\n"),
		      "x.json:3:45: data.input.path: a gcp path must start with gs://, got \"b/x\"");
	/* web's ftp:// and ftps:// are read now (the ftp backend); any other scheme is not */
	EXPECT_ERRORS(WITH_WORKER("  \"type\": \"inference\",\n"
				  "  \"data\": {\"input\": {\"type\": \"web\", \"path\": \"sftp://h/d/\"}},\n"),
		      "x.json:3:45: data.input.path: a web path must start with http:// or https:// or ftp:// or ftps://, got \"sftp://h/d/\"");
	/* git is read now (the git backend): ssh is not among its forms */
	EXPECT_ERRORS(WITH_WORKER("  \"model\": {\"type\": \"git\", \"path\": \"ssh://github.com/a/b.git\"},\n"),
		      "x.json:2:36: model.path: a git path must start with https:// or http:// or git:// or git+, got \"ssh://github.com/a/b.git\"");
}

/* ---- json_pos ---- */

static struct json_pos *pos_build(const char *text)
{
	struct json_pos *p = NULL;

	assert_int_equal(json_pos_build(&p, text, strlen(text)), 0);
	assert_non_null(p);
	return p;
}

static void pos_expect(const struct json_pos *p, const char *path, int want_line, int want_col)
{
	int line = 0, col = 0;

	if (json_pos_find(p, path, &line, &col) != 0)
		fail_msg("no value at \"%s\"", path);
	if (line != want_line || col != want_col)
		fail_msg("\"%s\": got %d:%d, want %d:%d", path, line, col, want_line, want_col);
}

static void test_json_pos_finds_values_in_nested_arrays_and_objects(void **state)
{
	struct json_pos *p = pos_build("{\"a\": [1, [2, {\"b\": [true, null]}]],\n"
				       " \"c\": {\"d\": {\"e\": -1.5e3}},\n"
				       " \"workers\": [{\"command\": \"x\"}, {\"command\": \"y\"}]}");
	int line, col;

	(void)state;
	assert_int_equal(json_pos_count(p), 17);
	pos_expect(p, "", 1, 1);
	pos_expect(p, "a", 1, 7);
	pos_expect(p, "a[0]", 1, 8);
	pos_expect(p, "a[1]", 1, 11);
	pos_expect(p, "a[1][0]", 1, 12);
	pos_expect(p, "a[1][1]", 1, 15);
	pos_expect(p, "a[1][1].b", 1, 21);
	pos_expect(p, "a[1][1].b[0]", 1, 22);
	pos_expect(p, "a[1][1].b[1]", 1, 28);
	pos_expect(p, "c", 2, 7);
	pos_expect(p, "c.d", 2, 13);
	pos_expect(p, "c.d.e", 2, 19);
	pos_expect(p, "workers[1]", 3, 32);
	pos_expect(p, "workers[1].command", 3, 44);
	assert_int_equal(json_pos_find(p, "a[2]", &line, &col), -ENOENT);
	assert_int_equal(json_pos_find(p, "c.x", &line, &col), -ENOENT);
	assert_int_equal(json_pos_find(p, "a.b", &line, &col), -ENOENT);
	assert_int_equal(json_pos_find(p, "c[0]", &line, &col), -ENOENT);
	assert_int_equal(json_pos_find(p, "a[x]", &line, &col), -ENOENT);
	json_pos_free(p);
}

static void test_json_pos_nearest_gives_the_enclosing_object_of_a_missing_field(void **state)
{
	struct json_pos *p = pos_build("{\n  \"resources\": {\n    \"gpu_count\": 1\n  }\n}");
	int line, col;

	(void)state;
	assert_int_equal(json_pos_find_nearest(p, "resources.cpu_count", &line, &col), 1);
	assert_int_equal(line, 2);
	assert_int_equal(col, 16);
	assert_int_equal(json_pos_find_nearest(p, "workers[0].command", &line, &col), 1);
	assert_int_equal(line, 1);
	assert_int_equal(col, 1);
	assert_int_equal(json_pos_find_nearest(p, "resources.gpu_count", &line, &col), 0);
	assert_int_equal(line, 3);
	assert_int_equal(col, 18);
	json_pos_free(p);
	p = pos_build("  ");
	assert_int_equal(json_pos_find_nearest(p, "", &line, &col), -ENOENT);
	json_pos_free(p);
}

static void test_json_pos_skips_escapes_in_strings_and_unescapes_keys(void **state)
{
	struct json_pos *p = pos_build("{\"s\": \"a\\\"b\\\\\", \"t\": \"}]{[,:\",\n"
				       " \"k\\u0065y\": 1, \"a.b\": 2, \"\\ud83d\\ude00\": 3, \"q\\\"\\n\": [4]}");
	int line, col;

	(void)state;
	pos_expect(p, "s", 1, 7);
	pos_expect(p, "t", 1, 22);
	pos_expect(p, "key", 2, 14);
	assert_int_equal(json_pos_find_key(p, "", "a.b", &line, &col), 0);
	assert_int_equal(line, 2);
	assert_int_equal(col, 24);
	assert_int_equal(json_pos_find(p, "a.b", &line, &col), -ENOENT);
	pos_expect(p, "\xf0\x9f\x98\x80", 2, 43);
	assert_int_equal(json_pos_find_key(p, "", "q\"\n", &line, &col), 0);
	assert_int_equal(col, 55);
	json_pos_free(p);
}

static void test_json_pos_counts_utf8_characters_in_columns_like_jansson(void **state)
{
	const char text[] = "{\"caf\xc3\xa9\": \"\xe2\x82\xac\xf0\x9f\x98\x80\", \"n\": 1, \"m\": x}";
	struct json_pos *p = pos_build("{\"caf\xc3\xa9\": \"\xe2\x82\xac\xf0\x9f\x98\x80\", \"n\": 1}");
	json_error_t err;

	(void)state;
	pos_expect(p, "caf\xc3\xa9", 1, 10);
	pos_expect(p, "n", 1, 21);
	json_pos_free(p);
	/* jansson counts the same way: "x" is at column 29 */
	assert_null(json_loadb(text, strlen(text), 0, &err));
	assert_int_equal(err.column, 29);
}

static void test_json_pos_top_level_array_and_duplicates_take_the_last(void **state)
{
	struct json_pos *p = pos_build("[{\"a\": 1, \"a\": 2}, \"x\"]");

	(void)state;
	pos_expect(p, "[0]", 1, 2);
	pos_expect(p, "[0].a", 1, 16);
	pos_expect(p, "[1]", 1, 20);
	json_pos_free(p);
}

static void test_json_pos_survives_text_that_is_not_json(void **state)
{
	static const char *const junk[] = { "}}]]", "\"unterminated", "{\"k", "1 2 3", "[\"\\", "{\"a\":\"\\u12" };

	(void)state;
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		struct json_pos *p = NULL;

		assert_int_equal(json_pos_build(&p, junk[i], strlen(junk[i])), 0);
		json_pos_free(p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spec_minimal_spec_gets_every_default),
		cmocka_unit_test(test_spec_gpu_types_default_to_one_gpu_and_one_cpu_per_gpu),
		cmocka_unit_test(test_spec_reads_every_field),
		cmocka_unit_test(test_spec_min_cuda_version_as_number_is_stored_as_text),
		cmocka_unit_test(test_spec_worker_count_repeats_the_one_command),
		cmocka_unit_test(test_spec_workers_list_gives_one_worker_per_entry_and_takes_strings),
		cmocka_unit_test(test_spec_environment_variables_keep_order_and_convert_ints_and_bools),
		cmocka_unit_test(test_spec_ignored_lists_unsupported_and_unknown_fields_in_order),
		cmocka_unit_test(test_spec_accepts_every_output_and_input_path_form),
		cmocka_unit_test(test_spec_data_model_and_checkpoints_are_kept_in_spec_order),
		cmocka_unit_test(test_spec_without_data_leaves_the_data_model_empty),
		cmocka_unit_test(test_spec_input_may_come_before_the_type_that_allows_it),
		cmocka_unit_test(test_spec_output_archive_defaults_to_true_for_s3_and_local),
		cmocka_unit_test(test_spec_archive_on_a_datastore_output_is_listed_as_ignored),
		cmocka_unit_test(test_spec_name_comes_from_the_file_when_absent),
		cmocka_unit_test(test_spec_null_means_absent_for_optional_fields),
		cmocka_unit_test(test_spec_reads_text_that_is_not_nul_terminated),
		cmocka_unit_test(test_spec_exactly_1_mib_is_accepted),
		cmocka_unit_test(test_spec_to_json_shows_the_model_and_redacts_secrets),
		cmocka_unit_test(test_spec_to_json_shows_the_data_object),
		cmocka_unit_test(test_spec_name_valid_follows_the_name_rule),
		cmocka_unit_test(test_spec_format_names),
		cmocka_unit_test(test_spec_malformed_json_reports_jansson_line_and_column),
		cmocka_unit_test(test_spec_duplicate_key_is_a_json_error),
		cmocka_unit_test(test_spec_top_level_must_be_an_object),
		cmocka_unit_test(test_spec_over_1_mib_is_efbig),
		cmocka_unit_test(test_spec_wrong_top_level_types_are_all_reported),
		cmocka_unit_test(test_spec_wrong_resource_types_are_all_reported),
		cmocka_unit_test(test_spec_gpu_types_elements_must_be_non_empty_strings),
		cmocka_unit_test(test_spec_gpu_count_0_contradicts_gpu_types),
		cmocka_unit_test(test_spec_min_cuda_version_must_look_like_a_version),
		cmocka_unit_test(test_spec_type_must_be_training_or_inference),
		cmocka_unit_test(test_spec_negative_and_zero_counts_are_refused),
		cmocka_unit_test(test_spec_cpu_only_cpu_count_must_be_multiple_of_4),
		cmocka_unit_test(test_spec_disk_size_must_be_10_to_1000),
		cmocka_unit_test(test_spec_missing_workers_points_at_the_top_level_brace),
		cmocka_unit_test(test_spec_missing_command_points_at_the_worker_brace),
		cmocka_unit_test(test_spec_workers_must_not_be_empty),
		cmocka_unit_test(test_spec_empty_and_whitespace_commands_are_refused),
		cmocka_unit_test(test_spec_worker_count_needs_exactly_one_workers_entry),
		cmocka_unit_test(test_spec_worker_count_must_be_1_to_1024),
		cmocka_unit_test(test_spec_name_with_bad_characters_is_refused),
		cmocka_unit_test(test_spec_name_longer_than_64_is_refused),
		cmocka_unit_test(test_spec_name_dot_dot_is_refused),
		cmocka_unit_test(test_spec_bad_file_name_is_reported_under_name_when_spec_has_none),
		cmocka_unit_test(test_spec_bad_environment_variable_names_and_values_are_refused),
		cmocka_unit_test(test_spec_bad_packages_are_refused),
		cmocka_unit_test(test_spec_packages_are_one_name_an_entry_and_need_an_image),
		cmocka_unit_test(test_spec_base_environment_is_kept_with_its_packages_in_order),
		cmocka_unit_test(test_spec_base_environment_and_image_exclude_each_other),
		cmocka_unit_test(test_spec_environment_resolves_to_the_matching_section),
		cmocka_unit_test(test_spec_environment_without_a_match_names_the_choices),
		cmocka_unit_test(test_spec_bad_output_path_for_each_type_is_refused),
		cmocka_unit_test(test_spec_output_type_must_be_known_and_fields_present),
		cmocka_unit_test(test_spec_bad_input_and_model_paths_are_refused),
		cmocka_unit_test(test_spec_a_name_listed_twice_is_refused_at_its_later_index),
		cmocka_unit_test(test_spec_more_than_1024_names_are_refused),
		cmocka_unit_test(test_spec_input_on_a_training_job_is_refused),
		cmocka_unit_test(test_spec_paths_of_the_newer_types_are_checked),
		cmocka_unit_test(test_json_pos_finds_values_in_nested_arrays_and_objects),
		cmocka_unit_test(test_json_pos_nearest_gives_the_enclosing_object_of_a_missing_field),
		cmocka_unit_test(test_json_pos_skips_escapes_in_strings_and_unescapes_keys),
		cmocka_unit_test(test_json_pos_counts_utf8_characters_in_columns_like_jansson),
		cmocka_unit_test(test_json_pos_top_level_array_and_duplicates_take_the_last),
		cmocka_unit_test(test_json_pos_survives_text_that_is_not_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
