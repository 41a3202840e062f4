/*
 * test_spec_kibernetika.c - unit tests of the Kibernetika task format
 * (sched/spec_kibernetika.c) and of YAML specs (sched/spec_yaml.c, with the
 * hand-built json_pos index it fills).
 *
 * Specs are strings, one YAML line per C line, so the line and column of
 * each message can be checked by eye.  Bad specs assert every message
 * exactly ("file:line:col: field: message").  The runtime variables are read
 * through spec_runtime_env with a fake struct spec_runtime, as a worker
 * printing its environment would see them.  Nothing touches the disk.
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

#include "diag.h"
#include "json_pos.h"
#include "spec.h"
#include "spec_check.h"
#include "seed_specs.h"
#include "spec_int.h"

/* ---- helpers ---- */

static struct spec *parse_ok(const char *text)
{
	struct spec *s = NULL;
	struct diag d;
	int ret;

	diag_init(&d);
	ret = spec_parse(&s, "t.yaml", text, strlen(text), "t", &d);
	diag_print(&d, stderr);
	assert_int_equal(ret, 0);
	assert_int_equal(d.n, 0);
	assert_non_null(s);
	diag_free(&d);
	return s;
}

#define EXPECT_ERRORS(text, ...) SPEC_EXPECT_ERRORS("t.yaml", "t", (text), __VA_ARGS__)

static const char *wenv(const struct spec_worker *w, const char *name)
{
	for (size_t i = 0; i < w->n_env; i++)
		if (strcmp(w->env[i].name, name) == 0)
			return w->env[i].value;
	return NULL;
}

static bool has_ignored(const struct spec *s, const char *prefix)
{
	for (size_t i = 0; i < s->n_ignored; i++)
		if (strncmp(s->ignored[i], prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

/* A worker's environment as spec_runtime_env sets it: "NAME=value\n"... */
struct env_out {
	char buf[4096];
	size_t len;
};

static void env_collect(void *arg, const char *name, const char *value)
{
	struct env_out *e = arg;

	e->len += (size_t)snprintf(e->buf + e->len, sizeof(e->buf) - e->len, "%s=%s\n", name, value);
}

/* ---- the documentation's execution template ---- */

static const char seed_template[] = SEED_KIBERNETIKA_TEMPLATE;

static void test_kibernetika_seed_template_maps_field_by_field(void **state)
{
	struct spec *s = parse_ok(seed_template);
	const struct spec_worker *w;

	(void)state;
	assert_int_equal(s->format, SPEC_KIBERNETIKA);
	assert_string_equal(s->name, "example");
	assert_true(s->gang);
	assert_int_equal(s->n_workers, 1);
	assert_int_equal(s->n_roles, 1);
	assert_string_equal(s->roles[0].name, "worker");
	assert_int_equal(s->roles[0].first, 0);
	assert_int_equal(s->roles[0].n, 1);
	assert_int_equal(s->roles[0].min_failed, 1);	/* one failed replica fails the task */
	assert_int_equal(s->roles[0].min_succeeded, -1);
	w = &s->workers[0];
	assert_string_equal(w->command, "python example.py --parameter_name {{ .parameter_value }}");
	assert_string_equal(w->role, "worker");
	assert_int_equal(w->role_index, 0);
	assert_string_equal(w->work_dir, "$SRC_DIR");	/* resolved at launch: spec_sources.c */
	assert_true(w->all_sources);			/* default_volume_mapping: true */
	assert_int_equal(w->res.cpu_count, 1);
	assert_true(w->res.memory_gb > 7.999 && w->res.memory_gb < 8.001);
	assert_int_equal(w->res.gpu_count, 0);
	assert_int_equal(s->retry_count, 0);
	assert_int_equal(s->wait_timeout, -1);
	assert_string_equal(wenv(w, "REPLICA_INDEX"), "1");
	assert_string_equal(wenv(w, "TASK_NAME"), "example");
	assert_false(has_ignored(s, "resources[0].workDir"));	/* a source's folder now */
	assert_true(has_ignored(s, "resources[0].command: "));
	/* no GPUs asked: the cpu image */
	assert_string_equal(w->image.ref, "kuberlab/tensorflow:cpu-36-1.7.0-full");
	assert_string_equal(w->image.ref_field, "resources[0].images.cpu");
	assert_false(has_ignored(s, "resources[0].default_volume_mapping"));
	assert_int_equal(s->n_ignored, 1);	/* only the unfilled {{ .parameter_value }} */
	spec_free(s);
}

static void test_kibernetika_json_task_with_two_resources(void **state)
{
	static const char text[] =
		"{\"name\": \"dist\", \"resources\": [\n"
		" {\"name\": \"ps\", \"replicas\": 1, \"command\": [\"python\", \"ps.py\"],\n"
		"  \"args\": [\"--dir=a b\", \"it's\"], \"port\": 2222, \"workDir\": \"/tmp\"},\n"
		" {\"name\": \"worker\", \"replicas\": 2, \"command\": \"python w.py\", \"args\": \"--x $Y\",\n"
		"  \"maxRestartCount\": 3, \"restartPolicy\": \"OnFailure\",\n"
		"  \"env\": [{\"name\": \"A\", \"value\": \"1\"}, {\"name\": \"B\", \"value\": 7}],\n"
		"  \"resources\": {\"accelerators\": {\"gpu\": 2}, \"requests\": {\"cpu\": \"1500m\", \"memory\": \"512Mi\"}}}\n"
		"]}\n";
	struct spec *s = parse_ok(text);

	(void)state;
	assert_int_equal(s->format, SPEC_KIBERNETIKA);
	assert_int_equal(s->n_workers, 3);
	assert_int_equal(s->n_roles, 2);
	assert_int_equal(s->roles[1].first, 1);
	assert_int_equal(s->roles[1].n, 2);
	assert_string_equal(s->workers[0].command, "python ps.py '--dir=a b' 'it'\\''s'");
	assert_string_equal(s->workers[0].work_dir, "/tmp");
	assert_int_equal(s->workers[0].n_ports, 1);
	assert_int_equal(s->workers[0].ports[0].count, 1);
	assert_int_equal(s->workers[1].n_ports, 0);
	assert_string_equal(s->workers[1].command, "python w.py --x $Y");
	assert_int_equal(s->workers[2].role_index, 1);
	assert_string_equal(wenv(&s->workers[2], "REPLICA_INDEX"), "2");
	assert_string_equal(wenv(&s->workers[2], "A"), "1");
	assert_string_equal(wenv(&s->workers[2], "B"), "7");
	assert_int_equal(s->workers[2].res.gpu_count, 2);
	assert_int_equal(s->workers[2].res.cpu_count, 2);
	assert_true(s->workers[2].res.memory_gb == 0.5);
	assert_int_equal(s->retry_count, 3);
	spec_free(s);
}

static void test_kibernetika_quantities(void **state)
{
	static const struct { const char *cpu, *mem; long cpus; double gb; } cases[] = {
		{ "100m", "8Gi", 1, 8 }, { "1500m", "512Mi", 2, 0.5 }, { "\"2\"", "1G", 2, 1e9 / 1073741824.0 },
		{ "2", "1000M", 2, 1e9 / 1073741824.0 }, { "0.5", "2048Ki", 1, 2.0 / 1024 },
		{ "4000m", "1Ti", 4, 1024 },
	};
	char text[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct spec *s;

		snprintf(text, sizeof(text),
			 "resources:\n- name: w\n  command: x\n  resources:\n    requests:\n"
			 "      cpu: %s\n      memory: %s\n", cases[i].cpu, cases[i].mem);
		s = parse_ok(text);
		assert_int_equal(s->workers[0].res.cpu_count, cases[i].cpus);
		assert_true(s->workers[0].res.memory_gb > cases[i].gb - 1e-9 &&
			    s->workers[0].res.memory_gb < cases[i].gb + 1e-9);
		spec_free(s);
	}
}

static void test_kibernetika_gpu_from_limits_and_runtime_env(void **state)
{
	static const char text[] =
		"name: tf\n"
		"resources:\n"
		"- name: ps\n"
		"  command: python ps.py\n"
		"  port: 2222\n"
		"- name: my-worker\n"
		"  replicas: 2\n"
		"  command: python w.py --task_index=$REPLICA_INDEX\n"
		"  resources:\n"
		"    limits:\n"
		"      nvidia.com/gpu: 1\n";
	struct spec *s = parse_ok(text);
	int p0[] = { 40001 };
	int *const ports[] = { p0, NULL, NULL };
	const unsigned int n_gpus[] = { 0, 1, 1 };
	struct spec_runtime rt = { .job_id = "tf-7", .host = "node1", .ports = ports,
				   .n_gpus = n_gpus, .user = "u" };
	struct env_out e = { .len = 0 };

	(void)state;
	assert_int_equal(s->workers[1].res.gpu_count, 1);
	assert_int_equal(s->workers[0].res.gpu_count, 0);
	assert_string_equal(wenv(&s->workers[2], "REPLICA_INDEX"), "2");
	spec_runtime_env(s, 2, &rt, env_collect, &e);
	assert_string_equal(e.buf,
			    "PS_NODES=node1:40001\n"
			    "PS_HOSTS=node1\n"
			    "MY_WORKER_NODES=node1,node1\n"
			    "MY_WORKER_HOSTS=node1,node1\n"
			    "BUILD_ID=tf-7\n"
			    "GPU_COUNT=1\n");
	spec_free(s);
}

/* ---- rules ---- */

static void test_kibernetika_each_rule_names_its_field(void **state)
{
	(void)state;
	EXPECT_ERRORS("name: a\nresources:\n- name: Worker\n  command: x\n",
		      "t.yaml:3:9: resources[0].name: \"Worker\" must be 1 to 63 characters of a-z, 0-9 and -, starting and ending with a letter or digit");
	EXPECT_ERRORS("resources:\n- name: w\n  command: x\n- name: w\n  command: y\n",
		      "t.yaml:4:9: resources[1].name: \"w\" names resources[0] too; names must differ");
	EXPECT_ERRORS("resources:\n- command: x\n",
		      "t.yaml:2:3: resources[0].name: missing; each resource needs a name, like \"worker\"");
	EXPECT_ERRORS("resources:\n- name: w\n  replicas: 0\n  command: x\n",
		      "t.yaml:3:13: resources[0].replicas: must be between 1 and 1024, got 0");
	EXPECT_ERRORS("resources:\n- name: w\n",
		      "t.yaml:2:3: resources[0].command: missing; each resource runs a command, like \"python train.py\"");
	EXPECT_ERRORS("resources:\n- name: w\n  command: \"  \"\n",
		      "t.yaml:3:12: resources[0].command: must not be empty or only whitespace");
	EXPECT_ERRORS("resources:\n- name: w\n  command: x\n  resources:\n    limits:\n      cpu: 100x\n",
		      "t.yaml:6:12: resources[0].resources.limits.cpu: must be a number of CPUs more than 0, like 2, 0.5 or 100m, got \"100x\"");
	EXPECT_ERRORS("resources:\n- name: w\n  command: x\n  resources:\n    limits:\n      memory: 8Gb\n",
		      "t.yaml:6:15: resources[0].resources.limits.memory: must be a quantity of memory more than 0, like 8Gi, 512Mi or 1G, got \"8Gb\"");
	EXPECT_ERRORS("resources:\n- name: w\n  command: x\n  resources:\n    requests:\n      cpu: 2\n    limits:\n      cpu: 1\n",
		      "t.yaml:6:12: resources[0].resources.requests.cpu: asks for more than limits.cpu allows (2 > 1)");
	EXPECT_ERRORS("resources:\n- name: w\n  command: x\n  restartPolicy: Sometimes\n",
		      "t.yaml:4:18: resources[0].restartPolicy: must be Never, OnFailure or Always, got \"Sometimes\"");
	EXPECT_ERRORS("resources:\n- name: w\n  command: x\n  maxRestartCount: -1\n",
		      "t.yaml:4:20: resources[0].maxRestartCount: must be between 0 and 1000, got -1");
	EXPECT_ERRORS("resources:\n- name: w\n  command: x\n  env:\n  - name: 1A\n    value: v\n",
		      "t.yaml:5:11: resources[0].env[0].name: a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$");
	EXPECT_ERRORS("resources: []\n",
		      "t.yaml:1:12: resources: must list 1 to 1024 resources, like [{name: worker, command: ...}], got none");
	EXPECT_ERRORS("name: a/b\nresources:\n- name: w\n  command: x\n",
		      "t.yaml:1:7: name: may hold only A-Z a-z 0-9 . _ ~ -, got '/' at character 2");
}

static void test_kibernetika_always_is_listed_and_run_on_failure(void **state)
{
	struct spec *s = parse_ok("resources:\n- name: w\n  command: x\n  restartPolicy: Always\n"
				  "  maxRestartCount: 2\n");

	(void)state;
	assert_int_equal(s->retry_count, 2);
	assert_true(has_ignored(s, "resources[0].restartPolicy: Always: "));
	assert_string_equal(s->name, "t");
	spec_free(s);
}

/* The task's sources and each resource's volumes, in either spelling the platform writes. */
static void test_kibernetika_sources_and_volumes(void **state)
{
	struct spec *s = parse_ok("sources:\n- name: code\n  source: lab:/repo\n"
				  "  mountPath: /src/\n  sub_path: ./pkg\n"
				  "resources:\n- name: w\n  replicas: 2\n  command: x\n"
				  "  default_mount_path: /mnt\n  volumes:\n"
				  "  - name: data\n    subPath: train\n    mountPath: /data\n");
	const struct spec_worker *w;

	(void)state;
	assert_int_equal(s->n_sources, 1);
	assert_string_equal(s->sources[0].name, "code");
	assert_string_equal(s->sources[0].source, "lab:/repo");
	assert_string_equal(s->sources[0].mount_path, "/src");
	assert_string_equal(s->sources[0].sub_path, "pkg");
	for (size_t i = 0; i < 2; i++) {	/* each replica its own copy */
		w = &s->workers[i];
		assert_false(w->all_sources);
		assert_string_equal(w->default_mount_path, "/mnt");
		assert_int_equal(w->n_volumes, 1);
		assert_string_equal(w->volumes[0].name, "data");
		assert_string_equal(w->volumes[0].sub_path, "train");
		assert_string_equal(w->volumes[0].mount_path, "/data");
	}
	assert_false(has_ignored(s, "volumes"));
	spec_free(s);
	EXPECT_ERRORS("sources:\n- name: Code\n  source: x\n- name: b\n  mount_path: rel\n"
		      "resources:\n- name: w\n  command: x\n  volumes:\n  - name: d\n"
		      "    subPath: ../up\n",
		      "t.yaml:2:9: sources[0].name: must be 1 to 63 of a-z, 0-9 and '-', not starting "
		      "or ending with '-', got \"Code\"",
		      "t.yaml:4:3: sources[1].source: missing (a datastore path, a URL or a git URL, "
		      "as a [source] section's)",
		      "t.yaml:5:15: sources[1].mount_path: must be an absolute path, got \"rel\"",
		      "t.yaml:11:14: resources[0].volumes[0].subPath: must be a path without \"..\", "
		      "got \"../up\"");
#define B64 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	EXPECT_ERRORS("resources:\n- name: w\n  command: x\n  default_mount_path: /x/"
		      B64 B64 B64 B64 B64 "\n",
		      "t.yaml:4:23: resources[0].default_mount_path: a name in it is longer than 255 "
		      "bytes, got \"/x/" B64 "b...\"");
#undef B64
}

/*
 * Which sources a worker maps and where: default_volume_mapping with
 * default_mount_path before each mount path, a volume adding its subPath
 * below the source's and its own mount path; a path past 2047 bytes is
 * -ENAMETOOLONG naming the mount, never a shorter path.
 */
static void test_kibernetika_worker_mounts(void **state)
{
	static const char head[] = "sources:\n- name: code\n  source: lab:/repo\n"
				   "  mountPath: /src\n  subPath: pkg\n"
				   "resources:\n- name: w\n  command: x\n"
				   "  default_volume_mapping: true\n  default_mount_path: /mnt\n";
	struct spec *s = parse_ok(head);
	struct spec_mount *m;
	size_t n, bad = 9;
	char *text, *longsub = malloc(3001);

	(void)state;
	assert_int_equal(spec_worker_mounts(s, 0, NULL, &m, &n, &bad), 0);
	assert_int_equal(n, 1);
	assert_string_equal(m[0].name, "code");
	assert_string_equal(m[0].sub_path, "pkg");
	assert_string_equal(m[0].mount_path, "/mnt/src");
	assert_string_equal(m[0].var, "CODE_DIR");
	free(m);
	spec_free(s);

	assert_true(asprintf(&text, "%s  volumes:\n  - name: code\n    subPath: train\n"
			     "    mountPath: /data\n", head) > 0);
	s = parse_ok(text);
	free(text);
	assert_int_equal(spec_worker_mounts(s, 0, NULL, &m, &n, &bad), 0);
	assert_int_equal(n, 1);		/* the volume replaces the default mapping */
	assert_string_equal(m[0].sub_path, "pkg/train");
	assert_string_equal(m[0].mount_path, "/mnt/data");
	free(m);
	spec_free(s);

	memset(longsub, 'a', 3000);	/* 30 names of 99 bytes */
	for (size_t i = 99; i < 3000; i += 100)
		longsub[i] = '/';
	longsub[3000] = '\0';
	assert_true(asprintf(&text, "%s  volumes:\n  - name: code\n    subPath: %s\n", head,
			     longsub) > 0);
	s = parse_ok(text);
	free(text);
	free(longsub);
	assert_int_equal(spec_worker_mounts(s, 0, NULL, &m, &n, &bad), -ENAMETOOLONG);
	assert_int_equal(bad, 0);
	assert_string_equal(m[bad].name, "code");
	assert_true(m[bad].too_long);
	free(m);
	spec_free(s);
}

/* ---- YAML ---- */

static void test_yaml_scalars_resolve_by_the_core_schema(void **state)
{
	static const char text[] =
		"a: 2\nb: python x.py\nc: 100m\nd: 0.5\ne: true\nf: yes\ng: ~\nh: \"2\"\n"
		"i: 0x1f\nj: !!str 3\nk: 1e3\nl:\n  - x\n";
	struct json_pos *pos = NULL;
	json_t *root = NULL;
	struct diag d;
	int line, col;

	(void)state;
	diag_init(&d);
	assert_int_equal(spec_yaml_load("t.yaml", text, strlen(text), &root, &pos, &d), 0);
	assert_int_equal(json_integer_value(json_object_get(root, "a")), 2);
	assert_string_equal(json_string_value(json_object_get(root, "b")), "python x.py");
	assert_string_equal(json_string_value(json_object_get(root, "c")), "100m");
	assert_true(json_real_value(json_object_get(root, "d")) == 0.5);
	assert_true(json_is_true(json_object_get(root, "e")));
	assert_string_equal(json_string_value(json_object_get(root, "f")), "yes");
	assert_true(json_is_null(json_object_get(root, "g")));
	assert_string_equal(json_string_value(json_object_get(root, "h")), "2");
	assert_int_equal(json_integer_value(json_object_get(root, "i")), 31);
	assert_string_equal(json_string_value(json_object_get(root, "j")), "3");
	assert_true(json_real_value(json_object_get(root, "k")) == 1000.0);
	assert_int_equal(json_pos_find(pos, "l[0]", &line, &col), 0);
	assert_int_equal(line, 13);
	assert_int_equal(col, 5);
	assert_int_equal(json_pos_find(pos, "c", &line, &col), 0);
	assert_int_equal(line, 3);
	assert_int_equal(col, 4);
	json_decref(root);
	json_pos_free(pos);
	diag_free(&d);
}

static void check_yaml_error(const char *text, const char *want)
{
	struct json_pos *pos = NULL;
	json_t *root = NULL;
	struct diag d;

	diag_init(&d);
	assert_int_equal(spec_yaml_load("t.yaml", text, strlen(text), &root, &pos, &d), -EINVAL);
	if (d.n != 1)
		diag_print(&d, stderr);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0], want);
	assert_null(root);
	assert_null(pos);
	diag_free(&d);
}

static void test_yaml_errors_name_line_and_column(void **state)
{
	(void)state;
	check_yaml_error("a: 1\nb: [1, 2\n", "t.yaml:3:1: yaml: did not find expected ',' or ']'");
	check_yaml_error("a: 1\n  b: 2\n", "t.yaml:2:4: yaml: mapping values are not allowed in this context");
	check_yaml_error("a: 1\na: 2\n", "t.yaml:2:1: yaml: duplicate key \"a\"");
	check_yaml_error("a: 1\n---\nb: 2\n", "t.yaml:2:1: yaml: a second document; a spec is one YAML document");
	check_yaml_error("a: !custom 1\n", "t.yaml:1:4: yaml: tag !custom is not supported");
	check_yaml_error("? [a]\n: 1\n", "t.yaml:1:3: yaml: a mapping key must be a plain scalar, not a mapping, list or alias");
}

static void test_yaml_anchors_and_aliases_are_refused(void **state)
{
	(void)state;
	check_yaml_error("a: &x [1, 2]\nb: *x\n", "t.yaml:1:4: yaml: anchors (&x) are not supported");
	check_yaml_error("a: [1]\nb: *x\n", "t.yaml:2:4: yaml: aliases (*x) are not supported");
}

static void test_yaml_depth_is_bounded(void **state)
{
	char text[256];
	size_t n = 0;

	(void)state;
	for (int i = 0; i < 70; i++)
		text[n++] = '[';
	text[n] = '\0';
	check_yaml_error(text, "t.yaml:1:65: yaml: nested deeper than 64 levels");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kibernetika_seed_template_maps_field_by_field),
		cmocka_unit_test(test_kibernetika_json_task_with_two_resources),
		cmocka_unit_test(test_kibernetika_quantities),
		cmocka_unit_test(test_kibernetika_gpu_from_limits_and_runtime_env),
		cmocka_unit_test(test_kibernetika_each_rule_names_its_field),
		cmocka_unit_test(test_kibernetika_always_is_listed_and_run_on_failure),
		cmocka_unit_test(test_kibernetika_sources_and_volumes),
		cmocka_unit_test(test_kibernetika_worker_mounts),
		cmocka_unit_test(test_yaml_scalars_resolve_by_the_core_schema),
		cmocka_unit_test(test_yaml_errors_name_line_and_column),
		cmocka_unit_test(test_yaml_anchors_and_aliases_are_refused),
		cmocka_unit_test(test_yaml_depth_is_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
