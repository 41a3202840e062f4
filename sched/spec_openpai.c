/*
 * spec_openpai.c - OpenPAI v1 job JSON (jobName, taskRoles, ...) mapped to
 * the job model.
 *
 * Each task of each task role becomes one worker, in role order then task
 * order, with role = the role's name and role_index its task index from 0.
 * The job is a gang (all tasks start together or none does), and each role
 * becomes a struct spec_role carrying minFailedTaskCount and
 * minSucceededTaskCount, which the scheduler applies as OpenPAI documents
 * (the job fails once min_failed tasks of a role failed, succeeds once
 * min_succeeded of a role succeeded; null: never by that rule, so with
 * both null the job ends when every task has ended).
 *
 * The documented rules, each reported at its field: jobName matches
 * ^[A-Za-z0-9\-._~]+$ (and mlfs's own job name rules: at most 64
 * characters, not "." or ".."; the message says which rule); at least one
 * task role; a role's name matches ^[A-Za-z0-9._~]+$ and is unique;
 * taskNumber >= 1, cpuNumber >= 1, memoryMB >= 100, shmMB <= memoryMB,
 * gpuNumber >= 0 (each required but shmMB, 64 by default); command not
 * empty; minFailedTaskCount and minSucceededTaskCount null or >= 1;
 * portList labels match ^[A-Za-z0-9._~]+$; retryCount >= 0.
 *
 * The environment, as OpenPAI's job reference lists it.  Known at parse
 * time, in each worker's env:
 *   PAI_JOB_NAME, PAI_DEFAULT_FS_URI (""), PAI_TASK_ROLE_COUNT,
 *   PAI_TASK_ROLE_LIST, and for every role R: PAI_TASK_ROLE_TASK_COUNT_R,
 *   PAI_RESOURCE_R ("gpuNumber,cpuNumber,memoryMB,shmMB"),
 *   PAI_MIN_FAILED_TASK_COUNT_R, PAI_MIN_SUCCEEDED_TASK_COUNT_R ("" for
 *   null); then PAI_CURRENT_TASK_ROLE_NAME,
 *   PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX (from 0), and PAI_DATA_DIR,
 *   PAI_OUTPUT_DIR, PAI_CODE_DIR when dataDir, outputDir, codeDir are
 *   given: the view's folder when mlfs maps them (below), else as written
 *   (the documentation's example command reads $PAI_DATA_DIR and
 *   $PAI_OUTPUT_DIR).
 * Known once the job is placed (spec_openpai_runtime_env), for every task
 * I of every role R, so that each task can reach all the others:
 *   PAI_USER_NAME (the job's owner), PAI_HOST_IP_R_I (this node: all tasks
 *   share it), PAI_PORT_LIST_R_I_LABEL (that task's ports of that label,
 *   comma-separated), and PAI_TASK_ROLE_R_HOST_LIST (host:port per task,
 *   comma-separated, the port being the task's first port of the role's
 *   first portList entry, or the bare host when the role has no ports),
 *   which the documentation's TensorFlow example passes as --ps_hosts.
 * jobEnvs go to spec->env.
 *
 * Choices where the documentation is silent:
 * - PAI_DEFAULT_FS_URI is "": there is no HDFS, so "$PAI_DEFAULT_FS_URI/x"
 *   reads as the node's own "/x".  dataDir, outputDir and codeDir that mlfs
 *   reads (s3://, gs://, http(s)://, ftp(s)://, an Azure blob URL, a
 *   NAME:/folder of a datastore, an absolute local path) become the view's
 *   input/, output/ (plain files, never zipped; s3, gs, a datastore or a
 *   local folder) and models/, as a native spec's data.input, data.output
 *   and model; others (hdfs://, $PAI_DEFAULT_FS_URI/..., a web output) are
 *   listed as ignored and passed on as written.  No PAI_OUTPUT_DIR default
 *   is made up when outputDir is absent.
 * - A missing minFailedTaskCount is 1 and a missing minSucceededTaskCount
 *   null, OpenPAI's own defaults; either above taskNumber is refused, as
 *   OpenPAI's server does, since it could never be reached.
 * - portList: label and portNumber (1 to 100) are required; beginAt may be
 *   left out (0).  Every port is allocated free on the node: a fixed
 *   beginAt cannot be promised on a shared node, so it is listed as
 *   ignored.  Labels are unique within a role (they name variables).
 * - gpuType is the one accepted GPU type of roles that ask for GPUs ("" is
 *   any); matching is the scheduler's.  memory_gb is memoryMB / 1024.
 * - image is every task's container image, checked as an image name;
 *   authFile the Docker config.json its registry's credentials are read
 *   from (a path on the node, never shown); shmMB sizes /dev/shm in the
 *   container.  image is not required: a job without one runs on the
 *   node, and then an explicit shmMB is listed as ignored.
 * - virtualCluster, extras, and the jobEnvs isDebug and paiAzRDMA (still
 *   exported) are listed as ignored, with why; so are unknown fields.
 * - jobEnvs names match ^[A-Za-z_][A-Za-z0-9_]*$; values are strings,
 *   integers, booleans ("true"), or reals in their shortest exact text.
 * - At most 1024 tasks in all.
 *
 * What it does not do: start anything or decide the job's end; the
 * scheduler reads spec->roles for that.  No state; any thread.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_int.h"

#define SPEC_OPENPAI_MAX_TASKS 1024
#define SPEC_OPENPAI_MAX_PORTS 100	/* portNumber of one portList entry */
#define SPEC_OPENPAI_SHM_MB 64		/* OpenPAI's default shmMB */
#define SPEC_OPENPAI_DIGITS "0123456789"
#define SPEC_OPENPAI_ALPHA "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
#define SPEC_OPENPAI_ROLE_CHARS SPEC_OPENPAI_ALPHA SPEC_OPENPAI_DIGITS "._~"
#define SPEC_OPENPAI_JOB_CHARS SPEC_OPENPAI_ROLE_CHARS "-"

static const char *const spec_openpai_dir_keys[] = { "dataDir", "outputDir", "codeDir" };
static const char *const spec_openpai_dir_vars[] = { "PAI_DATA_DIR", "PAI_OUTPUT_DIR", "PAI_CODE_DIR" };
/* Where the view shows a dir mlfs reads: input/, output/, models/. */
static const char *const spec_openpai_dir_views[] = {
	"/opt/ml/input", "/opt/ml/output", "/opt/ml/models"
};

struct spec_openpai_port {
	const char *label;		/* borrowed from the JSON */
	long count;
};

/* One task role as read; strings borrowed from the JSON. */
struct spec_openpai_role {
	const char *name;
	long tasks, cpus, mem_mb, shm_mb, gpus;
	bool shm_set;			/* shmMB was written */
	const char *command;
	struct spec_openpai_port *ports;
	size_t n_ports;
	long min_failed, min_succeeded;	/* -1: null */
};

/* What the pass over the fields found, for spec_openpai_finish. */
struct spec_openpai {
	struct spec_ctx *c;
	struct spec_image image;	/* image and authFile, for every task */
	const char *name;		/* NULL: absent or bad */
	bool has_name;
	const char *gpu_type;		/* NULL or "": any */
	const char *dirs[3];		/* dataDir, outputDir, codeDir */
	bool mapped[3];			/* ... in the view (input/, output/, models/) */
	struct spec_openpai_role *roles;
	size_t n_roles;
	bool has_roles;
};

/* ---- small checks ---- */

/* true when @s is non-empty and made only of @chars. */
static bool spec_openpai_chars_ok(const char *s, const char *chars)
{
	return *s && strspn(s, chars) == strlen(s);
}

/* Reports @s at @path unless it matches ^[@chars]+$ (@pattern, for the message). */
static bool spec_openpai_pattern(struct spec_ctx *c, const char *path, const char *s,
				 const char *chars, const char *pattern)
{
	char shown[SPEC_SHOW_MAX];

	if (spec_openpai_chars_ok(s, chars))
		return true;
	spec_error(c, path, "must match OpenPAI's pattern %s, got \"%s\"", pattern,
		   spec_show(shown, s));
	return false;
}

/* A required integer member: like spec_get_long, and "missing" when absent. */
static int spec_openpai_required(struct spec_ctx *c, json_t *obj, const char *at, const char *key,
				 long min, long max, long *out)
{
	char path[SPEC_PATH_MAX];
	int ret = spec_get_long(c, obj, at, key, min, max, out);

	if (ret == 0)
		spec_error(c, spec_path(path, at, key), "missing; OpenPAI requires it");
	return ret;
}

/* ---- top-level fields ---- */

static void spec_openpai_name(struct spec_openpai *p, json_t *root)
{
	const char *name;
	int ret = spec_get_string(p->c, root, "", "jobName", &name);

	p->has_name = ret != 0;		/* null is missing */
	if (ret <= 0)
		return;
	if (!spec_openpai_pattern(p->c, "jobName", name, SPEC_OPENPAI_JOB_CHARS,
				  "^[A-Za-z0-9\\-._~]+$"))
		return;
	if (strlen(name) > SPEC_NAME_MAX)
		spec_error(p->c, "jobName", "is %zu characters long; OpenPAI allows that, but an mlfs job name is at most %d",
			   strlen(name), SPEC_NAME_MAX);
	else if (!spec_name_valid(name))
		spec_error(p->c, "jobName", "\"%s\" matches OpenPAI's pattern, but an mlfs job name may not be \".\" or \"..\"",
			   name);
	else
		p->name = name;
}

/* A string member mlfs reads but cannot honour: checked, listed with @why. */
static void spec_openpai_unused(struct spec_openpai *p, json_t *root, const char *key,
				const char *why)
{
	const char *text;

	if (spec_get_string(p->c, root, "", key, &text) > 0)
		spec_ignore(p->c, "%s: %s", key, why);
}

static void spec_openpai_image(struct spec_openpai *p, json_t *root)
{
	const char *text;

	if (spec_get_string(p->c, root, "", "image", &text) > 0)
		spec_set_image(p->c, &p->image, "image", text, false);
}

static void spec_openpai_auth_file(struct spec_openpai *p, json_t *root)
{
	const char *text;

	if (spec_get_string(p->c, root, "", "authFile", &text) <= 0)
		return;
	if (text[0] != '/')	/* OpenPAI keeps it in HDFS */
		spec_ignore(p->c, "authFile: not a path on this node (an HDFS path mlfs does not "
			    "fetch); the registry is reached with the node's and the owner's credentials");
	else
		p->image.auth_file = spec_strdup(p->c, text);
}

static void spec_openpai_cluster(struct spec_openpai *p, json_t *root)
{
	spec_openpai_unused(p, root, "virtualCluster", "mlfs schedules on this node's resources; there are no virtual clusters");
}

/*
 * The location type of a dataDir (0), outputDir (1) or codeDir (2) mlfs
 * reads or writes, as a native spec would name it, or NULL for what it
 * passes on only (hdfs://, $PAI_DEFAULT_FS_URI/..., a web output).
 */
static const char *spec_openpai_dir_type(const char *v, size_t i)
{
	static const struct { const char *prefix, *type; bool output; } urls[] = {
		{ "s3://", "s3", true }, { "gs://", "gcp", true },
		{ "http://", "web", false }, { "https://", "web", false },
		{ "ftp://", "web", false }, { "ftps://", "web", false },
	};
	size_t name = strcspn(v, ":/");

	if (v[0] == '/')
		return "local";
	for (size_t k = 0; k < sizeof(urls) / sizeof(urls[0]); k++)
		if (strncmp(v, urls[k].prefix, strlen(urls[k].prefix)) == 0)
			return v[strlen(urls[k].prefix)] && (i != 1 || urls[k].output) ?
			       urls[k].type : NULL;
	if (name > 0 && v[name] == ':' && v[name + 1] == '/' && strncmp(v, "hdfs", name) != 0)
		return "datastore";	/* NAME:/folder of a configured datastore */
	return NULL;
}

/*
 * dataDir (0), outputDir (1) or codeDir (2): shown in the view (input/,
 * output/, models/) when mlfs reads it, as a native spec's data.input,
 * data.output (plain files) and model; else passed on as written.
 */
static void spec_openpai_dir(struct spec_openpai *p, json_t *root, size_t i)
{
	const char *key = spec_openpai_dir_keys[i], *type;
	struct spec_data *data = &p->c->s->data;
	struct spec_location *loc[] = { &data->input, &data->output, &data->model };

	if (spec_get_string(p->c, root, "", key, &p->dirs[i]) <= 0)
		return;
	type = spec_openpai_dir_type(p->dirs[i], i);
	if (!type && i == 1 && strstr(p->dirs[i], "://") && strncmp(p->dirs[i], "hdfs", 4) != 0) {
		spec_ignore(p->c, "%s: mlfs uploads an output to s3://, gs://, a datastore or a "
			    "local folder; passed on as %s unchanged", key, spec_openpai_dir_vars[i]);
		return;
	}
	if (!type) {
		spec_ignore(p->c, "%s: an HDFS path mlfs does not fetch; passed on as %s unchanged",
			    key, spec_openpai_dir_vars[i]);
		return;
	}
	loc[i]->type = spec_strdup(p->c, type);
	loc[i]->path = spec_strdup(p->c, p->dirs[i]);
	loc[i]->archive = false;	/* OpenPAI's output folder is files, never a zip */
	p->mapped[i] = true;
}

static void spec_openpai_data_dir(struct spec_openpai *p, json_t *root)
{
	spec_openpai_dir(p, root, 0);
}

static void spec_openpai_output_dir(struct spec_openpai *p, json_t *root)
{
	spec_openpai_dir(p, root, 1);
}

static void spec_openpai_code_dir(struct spec_openpai *p, json_t *root)
{
	spec_openpai_dir(p, root, 2);
}

static void spec_openpai_gpu_type(struct spec_openpai *p, json_t *root)
{
	spec_get_string(p->c, root, "", "gpuType", &p->gpu_type);
}

static void spec_openpai_retry(struct spec_openpai *p, json_t *root)
{
	spec_get_long(p->c, root, "", "retryCount", 0, LONG_MAX, &p->c->s->retry_count);
}

static void spec_openpai_extras(struct spec_openpai *p, json_t *root)
{
	json_t *extras;

	if (spec_get_object(p->c, root, "", "extras", &extras) > 0)
		spec_ignore(p->c, "extras: kept for OpenPAI's tools; mlfs does not use it");
}

/* ---- jobEnvs ---- */

/* @r as the shortest text that reads back as the same double (malloc'd). */
static char *spec_openpai_real_text(double r)
{
	char buf[40];

	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, r);
		if (strtod(buf, NULL) == r)
			break;
	}
	return strdup(buf);
}

/* The value of a jobEnvs variable as text (malloc'd), or NULL after reporting. */
static char *spec_openpai_env_value(struct spec_ctx *c, const char *name, json_t *v)
{
	char *text = NULL;

	if (json_is_string(v)) {
		text = strdup(json_string_value(v));
	} else if (json_is_integer(v)) {
		if (asprintf(&text, "%lld", (long long)json_integer_value(v)) < 0)
			text = NULL;
	} else if (json_is_real(v)) {
		text = spec_openpai_real_text(json_real_value(v));
	} else if (json_is_boolean(v)) {
		text = strdup(json_is_true(v) ? "true" : "false");
	} else {
		spec_error_key(c, "jobEnvs", name, "must be a string, number or boolean, got %s",
			       spec_json_type(v));
		return NULL;
	}
	if (!text)
		c->nomem = true;
	return text;
}

static bool spec_openpai_var_name_ok(const char *name)
{
	return (name[0] == '_' || strchr(SPEC_OPENPAI_ALPHA, name[0])) && name[0] &&
	       strspn(name, SPEC_OPENPAI_ALPHA SPEC_OPENPAI_DIGITS "_") == strlen(name);
}

/* jobEnvs that are switches of OpenPAI's own, not only variables. */
static void spec_openpai_env_note(struct spec_ctx *c, const char *name)
{
	if (strcmp(name, "isDebug") == 0)
		spec_ignore(c, "jobEnvs.isDebug: a failed task is not kept for debugging; still exported");
	else if (strcmp(name, "paiAzRDMA") == 0)
		spec_ignore(c, "jobEnvs.paiAzRDMA: no container to make RDMA capable; still exported");
}

static void spec_openpai_job_envs(struct spec_openpai *p, json_t *root)
{
	struct spec *s = p->c->s;
	const char *name;
	json_t *vars, *v;

	if (spec_get_object(p->c, root, "", "jobEnvs", &vars) <= 0)
		return;
	s->env = calloc(json_object_size(vars) + 1, sizeof(*s->env));
	if (!s->env) {
		p->c->nomem = true;
		return;
	}
	json_object_foreach(vars, name, v) {
		char *value;

		if (!spec_openpai_var_name_ok(name)) {
			spec_error_key(p->c, "jobEnvs", name,
				       "a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$");
			continue;
		}
		spec_openpai_env_note(p->c, name);
		value = spec_openpai_env_value(p->c, name, v);
		if (!value)
			continue;
		s->env[s->n_env].value = value;
		s->env[s->n_env++].name = spec_strdup(p->c, name);
	}
}

/* ---- task roles: ports ---- */

/* Reads portList[@k] (@e, at @at) into role->ports[role->n_ports]. */
static void spec_openpai_port(struct spec_openpai *p, struct spec_openpai_role *role,
			      const char *at, json_t *e)
{
	static const char *const known[] = { "label", "beginAt", "portNumber", NULL };
	struct spec_openpai_port *port = &role->ports[role->n_ports];
	struct spec_ctx *c = p->c;
	char path[SPEC_PATH_MAX];
	long begin = 0;
	int ret;

	spec_path(path, at, "label");
	spec_ignore_unknown(c, e, at, known);
	ret = spec_get_string(c, e, at, "label", &port->label);
	if (ret == 0)
		spec_error(c, path, "missing; OpenPAI requires it");
	if (ret > 0 && !spec_openpai_pattern(c, path, port->label,
					     SPEC_OPENPAI_ROLE_CHARS, "^[A-Za-z0-9._~]+$"))
		ret = -1;
	for (size_t k = 0; ret > 0 && k < role->n_ports; k++)
		if (strcmp(role->ports[k].label, port->label) == 0) {
			spec_error(c, path, "\"%s\" is already a label of this role", port->label);
			ret = -1;
		}
	if (spec_get_long(c, e, at, "beginAt", 0, 65535, &begin) > 0 && begin)
		spec_ignore(c, "%s.beginAt: port %ld cannot be promised on a shared node; free ports are allocated",
			    at, begin);
	if (spec_openpai_required(c, e, at, "portNumber", 1, SPEC_OPENPAI_MAX_PORTS,
				  &port->count) > 0 && ret > 0)
		role->n_ports++;
}

static void spec_openpai_ports(struct spec_openpai *p, struct spec_openpai_role *role,
			       json_t *r, const char *at)
{
	char path[SPEC_PATH_MAX], elem[SPEC_PATH_MAX + 24];
	json_t *list = json_object_get(r, "portList"), *e;
	size_t k;

	spec_path(path, at, "portList");
	if (!list || json_is_null(list))
		return;
	if (!json_is_array(list)) {
		spec_error(p->c, path, "must be an array like [{\"label\": \"http\", \"beginAt\": 0, \"portNumber\": 1}], got %s",
			   spec_json_type(list));
		return;
	}
	role->ports = calloc(json_array_size(list) + 1, sizeof(*role->ports));
	if (!role->ports) {
		p->c->nomem = true;
		return;
	}
	json_array_foreach(list, k, e) {
		snprintf(elem, sizeof(elem), "%s[%zu]", path, k);
		if (json_is_object(e))
			spec_openpai_port(p, role, elem, e);
		else
			spec_error(p->c, elem, "must be an object like {\"label\": \"http\", \"beginAt\": 0, \"portNumber\": 1}, got %s",
				   spec_json_type(e));
	}
}

/* ---- task roles ---- */

static void spec_openpai_role_name(struct spec_openpai *p, size_t i, json_t *r, const char *at)
{
	struct spec_openpai_role *role = &p->roles[i];
	char path[SPEC_PATH_MAX];
	int ret = spec_get_string(p->c, r, at, "name", &role->name);

	spec_path(path, at, "name");
	if (ret == 0)
		spec_error(p->c, path, "missing; OpenPAI requires it");
	if (ret <= 0 || !spec_openpai_pattern(p->c, path, role->name, SPEC_OPENPAI_ROLE_CHARS,
					      "^[A-Za-z0-9._~]+$")) {
		role->name = NULL;
		return;
	}
	for (size_t k = 0; k < i; k++)
		if (p->roles[k].name && strcmp(p->roles[k].name, role->name) == 0) {
			spec_error(p->c, path, "\"%s\" is already the name of taskRoles[%zu]; task role names must be unique",
				   role->name, k);
			role->name = NULL;
			return;
		}
}

static void spec_openpai_role_numbers(struct spec_openpai *p, struct spec_openpai_role *role,
				      json_t *r, const char *at)
{
	struct spec_ctx *c = p->c;
	char path[SPEC_PATH_MAX];
	int mem;

	spec_openpai_required(c, r, at, "taskNumber", 1, SPEC_OPENPAI_MAX_TASKS, &role->tasks);
	spec_openpai_required(c, r, at, "cpuNumber", 1, LONG_MAX, &role->cpus);
	mem = spec_openpai_required(c, r, at, "memoryMB", 100, LONG_MAX, &role->mem_mb);
	if (spec_get_long(c, r, at, "shmMB", 0, LONG_MAX, &role->shm_mb) > 0) {
		role->shm_set = true;
		if (mem > 0 && role->shm_mb > role->mem_mb)
			spec_error(c, spec_path(path, at, "shmMB"), "is %ld MB, more than memoryMB (%ld MB)",
				   role->shm_mb, role->mem_mb);
	}
	spec_openpai_required(c, r, at, "gpuNumber", 0, LONG_MAX, &role->gpus);
}

static void spec_openpai_role_command(struct spec_openpai *p, struct spec_openpai_role *role,
				      json_t *r, const char *at)
{
	char path[SPEC_PATH_MAX];
	int ret = spec_get_string(p->c, r, at, "command", &role->command);

	spec_path(path, at, "command");
	if (ret == 0)
		spec_error(p->c, path, "missing; OpenPAI requires it");
	else if (ret > 0 && spec_blank(role->command))
		spec_error(p->c, path, "must not be empty or only whitespace");
}

/* minFailedTaskCount or minSucceededTaskCount: -1 for null, @dflt when absent. */
static long spec_openpai_min_count(struct spec_openpai *p, struct spec_openpai_role *role,
				   json_t *r, const char *at, const char *key, long dflt)
{
	json_t *v = json_object_get(r, key);
	char path[SPEC_PATH_MAX];
	long n = dflt;

	if (json_is_null(v))
		return -1;
	if (spec_get_long(p->c, r, at, key, LONG_MIN, LONG_MAX, &n) <= 0)
		return dflt;
	spec_path(path, at, key);
	if (n < 1)
		spec_error(p->c, path, "must be null or at least 1, got %ld", n);
	else if (role->tasks > 0 && n > role->tasks)
		spec_error(p->c, path, "is %ld, but the role has %ld task(s); it could never be reached",
			   n, role->tasks);
	return n;
}

static void spec_openpai_role(struct spec_openpai *p, size_t i, json_t *r)
{
	static const char *const known[] = {
		"name", "taskNumber", "cpuNumber", "memoryMB", "shmMB", "gpuNumber", "portList",
		"command", "minFailedTaskCount", "minSucceededTaskCount", NULL,
	};
	struct spec_openpai_role *role = &p->roles[i];
	char at[SPEC_PATH_MAX];

	snprintf(at, sizeof(at), "taskRoles[%zu]", i);
	role->shm_mb = SPEC_OPENPAI_SHM_MB;
	if (!json_is_object(r)) {
		spec_error(p->c, at, "must be an object like {\"name\": \"worker\", \"taskNumber\": 1, ...}, got %s",
			   spec_json_type(r));
		return;
	}
	spec_ignore_unknown(p->c, r, at, known);
	spec_openpai_role_name(p, i, r, at);
	spec_openpai_role_numbers(p, role, r, at);
	spec_openpai_ports(p, role, r, at);
	spec_openpai_role_command(p, role, r, at);
	role->min_failed = spec_openpai_min_count(p, role, r, at, "minFailedTaskCount", 1);
	role->min_succeeded = spec_openpai_min_count(p, role, r, at, "minSucceededTaskCount", -1);
}

static void spec_openpai_task_roles(struct spec_openpai *p, json_t *root)
{
	json_t *a = json_object_get(root, "taskRoles"), *r;
	size_t i, len = json_array_size(a);

	if (json_is_null(a))
		return;
	p->has_roles = true;
	if (!json_is_array(a)) {
		spec_error(p->c, "taskRoles", "must be an array of task roles, got %s", spec_json_type(a));
		return;
	}
	if (len == 0) {
		spec_error(p->c, "taskRoles", "must list at least one task role");
		return;
	}
	p->roles = calloc(len, sizeof(*p->roles));
	if (!p->roles) {
		p->c->nomem = true;
		return;
	}
	p->n_roles = len;
	json_array_foreach(a, i, r)
		spec_openpai_role(p, i, r);
}

/* ---- building the workers ---- */

/* Adds NAME=@value (NAME from @fmt) to @w->env, which has room. */
static void spec_openpai_env(struct spec_ctx *c, struct spec_worker *w, const char *value,
			     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void spec_openpai_env(struct spec_ctx *c, struct spec_worker *w, const char *value,
			     const char *fmt, ...)
{
	struct spec_env *e = &w->env[w->n_env];
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = vasprintf(&e->name, fmt, ap);
	va_end(ap);
	if (ret < 0) {
		c->nomem = true;
		return;
	}
	e->value = strdup(value);
	if (!e->value) {
		free(e->name);
		c->nomem = true;
		return;
	}
	w->n_env++;
}

/* Writes @n into @buf, or "" for a null count (< 0); returns @buf. */
static const char *spec_openpai_count(char *buf, size_t size, long n)
{
	if (n < 0)
		*buf = '\0';
	else
		snprintf(buf, size, "%ld", n);
	return buf;
}

/* The variables every task of the job gets alike. */
static void spec_openpai_job_env(struct spec_openpai *p, struct spec_worker *w, const char *list)
{
	struct spec_ctx *c = p->c;
	char num[32], res[128];

	spec_openpai_env(c, w, c->s->name, "PAI_JOB_NAME");
	spec_openpai_env(c, w, "", "PAI_DEFAULT_FS_URI");
	spec_openpai_env(c, w, spec_openpai_count(num, sizeof(num), (long)p->n_roles),
			 "PAI_TASK_ROLE_COUNT");
	spec_openpai_env(c, w, list, "PAI_TASK_ROLE_LIST");
	for (size_t i = 0; i < p->n_roles; i++) {
		const struct spec_openpai_role *r = &p->roles[i];

		spec_openpai_env(c, w, spec_openpai_count(num, sizeof(num), r->tasks),
				 "PAI_TASK_ROLE_TASK_COUNT_%s", r->name);
		snprintf(res, sizeof(res), "%ld,%ld,%ld,%ld", r->gpus, r->cpus, r->mem_mb, r->shm_mb);
		spec_openpai_env(c, w, res, "PAI_RESOURCE_%s", r->name);
		spec_openpai_env(c, w, spec_openpai_count(num, sizeof(num), r->min_failed),
				 "PAI_MIN_FAILED_TASK_COUNT_%s", r->name);
		spec_openpai_env(c, w, spec_openpai_count(num, sizeof(num), r->min_succeeded),
				 "PAI_MIN_SUCCEEDED_TASK_COUNT_%s", r->name);
	}
	for (size_t i = 0; i < 3; i++)
		if (p->dirs[i])
			spec_openpai_env(c, w, p->mapped[i] ? spec_openpai_dir_views[i] : p->dirs[i],
					 "%s", spec_openpai_dir_vars[i]);
}

/* Resources and ports of a task of @r. */
static void spec_openpai_task_res(struct spec_openpai *p, const struct spec_openpai_role *r,
				  struct spec_worker *w)
{
	struct spec_resources *res = &w->res;

	res->gpu_count = r->gpus;
	res->cpu_count = r->cpus;
	res->memory_gb = (double)r->mem_mb / 1024;
	res->disk_size_gb = 10;
	res->max_price = -1;
	if (r->gpus && p->gpu_type && *p->gpu_type) {
		res->gpu_types = calloc(1, sizeof(char *));
		if (!res->gpu_types) {
			p->c->nomem = true;
			return;
		}
		res->gpu_types[res->n_gpu_types++] = spec_strdup(p->c, p->gpu_type);
	}
	w->ports = calloc(r->n_ports + 1, sizeof(*w->ports));
	if (!w->ports) {
		p->c->nomem = true;
		return;
	}
	for (size_t k = 0; k < r->n_ports; k++) {
		w->ports[k].label = spec_strdup(p->c, r->ports[k].label);
		w->ports[k].count = r->ports[k].count;
	}
	w->n_ports = r->n_ports;
}

/* Worker @w is task @index of @r. */
static void spec_openpai_task(struct spec_openpai *p, const struct spec_openpai_role *r,
			      long index, struct spec_worker *w, const char *list)
{
	char num[32];

	w->role = spec_strdup(p->c, r->name);
	w->role_index = (unsigned int)index;
	w->command = spec_strdup(p->c, r->command);
	spec_openpai_task_res(p, r, w);
	spec_copy_image(p->c, &w->image, &p->image);
	if (p->image.ref)
		w->image.shm_mb = r->shm_mb;
	w->env = calloc(4 * p->n_roles + 10, sizeof(*w->env));
	if (!w->env) {
		p->c->nomem = true;
		return;
	}
	spec_openpai_job_env(p, w, list);
	spec_openpai_env(p->c, w, r->name, "PAI_CURRENT_TASK_ROLE_NAME");
	spec_openpai_env(p->c, w, spec_openpai_count(num, sizeof(num), index),
			 "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX");
}

/* "ps_server,worker": the role names, comma-separated (malloc'd). */
static char *spec_openpai_role_list(const struct spec_openpai *p)
{
	size_t size = 1, used = 0;
	char *list;

	for (size_t i = 0; i < p->n_roles; i++)
		size += strlen(p->roles[i].name) + 1;
	list = malloc(size);
	if (!list)
		return NULL;
	*list = '\0';
	for (size_t i = 0; i < p->n_roles; i++)
		used += (size_t)snprintf(list + used, size - used, "%s%s", i ? "," : "",
					 p->roles[i].name);
	return list;
}

static void spec_openpai_build(struct spec_openpai *p, size_t n_tasks)
{
	struct spec *s = p->c->s;
	char *list = spec_openpai_role_list(p);

	s->workers = calloc(n_tasks, sizeof(*s->workers));
	s->roles = calloc(p->n_roles, sizeof(*s->roles));
	if (!list || !s->workers || !s->roles) {
		p->c->nomem = true;
		free(list);
		return;
	}
	s->n_roles = p->n_roles;
	for (size_t i = 0; i < p->n_roles; i++) {
		const struct spec_openpai_role *r = &p->roles[i];
		struct spec_role *sr = &s->roles[i];

		sr->name = spec_strdup(p->c, r->name);
		sr->first = s->n_workers;
		sr->n = (size_t)r->tasks;
		sr->min_failed = r->min_failed;
		sr->min_succeeded = r->min_succeeded;
		for (long t = 0; t < r->tasks; t++)
			spec_openpai_task(p, r, t, &s->workers[s->n_workers++], list);
	}
	free(list);
}

static void spec_openpai_finish(struct spec_openpai *p)
{
	struct spec_ctx *c = p->c;
	size_t n_tasks = 0;

	if (!p->has_name)
		spec_error(c, "jobName", "missing; OpenPAI requires a job name");
	else if (p->name)
		c->s->name = spec_strdup(c, p->name);
	if (!p->has_roles)
		spec_error(c, "taskRoles", "missing; a job needs at least one task role, e.g. \"taskRoles\": [{\"name\": \"main\", \"taskNumber\": 1, \"cpuNumber\": 1, \"memoryMB\": 1024, \"gpuNumber\": 0, \"command\": \"python train.py\"}]");
	for (size_t i = 0; i < p->n_roles; i++)
		n_tasks += (size_t)p->roles[i].tasks;
	if (!c->errors && n_tasks > SPEC_OPENPAI_MAX_TASKS)
		spec_error(c, "taskRoles", "the task roles have %zu tasks in all; the limit is %d",
			   n_tasks, SPEC_OPENPAI_MAX_TASKS);
	for (size_t i = 0; !p->image.ref && i < p->n_roles; i++)
		if (p->roles[i].shm_set)
			spec_ignore(c, "taskRoles[%zu].shmMB: no image, so no container whose /dev/shm it "
				    "would size; only PAI_RESOURCE_%s shows it", i,
				    p->roles[i].name ? p->roles[i].name : "?");
	if (!c->errors && !c->nomem)
		spec_openpai_build(p, n_tasks);
}

/* ---- the whole spec ---- */

static const struct spec_openpai_field {
	const char *key;
	void (*check)(struct spec_openpai *p, json_t *root);
} spec_openpai_fields[] = {
	{ "jobName", spec_openpai_name },
	{ "image", spec_openpai_image },
	{ "authFile", spec_openpai_auth_file },
	{ "dataDir", spec_openpai_data_dir },
	{ "outputDir", spec_openpai_output_dir },
	{ "codeDir", spec_openpai_code_dir },
	{ "virtualCluster", spec_openpai_cluster },
	{ "taskRoles", spec_openpai_task_roles },
	{ "gpuType", spec_openpai_gpu_type },
	{ "retryCount", spec_openpai_retry },
	{ "jobEnvs", spec_openpai_job_envs },
	{ "extras", spec_openpai_extras },
};

#define SPEC_OPENPAI_N_FIELDS (sizeof(spec_openpai_fields) / sizeof(spec_openpai_fields[0]))

static void spec_openpai_parse(struct spec_ctx *c, json_t *root)
{
	struct spec_openpai p = { .c = c };
	struct key_hint h;
	const char *key;
	json_t *v;
	size_t k;

	c->s->type = SPEC_TRAINING;
	c->s->gang = true;
	c->s->wait_timeout = -1;
	c->s->run_timeout = -1;
	json_object_foreach(root, key, v) {
		for (k = 0; k < SPEC_OPENPAI_N_FIELDS && strcmp(spec_openpai_fields[k].key, key); k++)
			;
		if (k < SPEC_OPENPAI_N_FIELDS) {
			spec_openpai_fields[k].check(&p, root);
			continue;
		}
		key_hint_init(&h, key);
		for (k = 0; k < SPEC_OPENPAI_N_FIELDS; k++)
			key_hint_add(&h, spec_openpai_fields[k].key);
		spec_ignore_field(c, "", key, &h);
	}
	spec_openpai_finish(&p);
	for (size_t i = 0; i < p.n_roles; i++)
		free(p.roles[i].ports);
	free(p.roles);
	spec_image_free(&p.image);
}

/* ---- variables that depend on placement ---- */

/* Calls @set with NAME (from @fmt) and @value. */
static void spec_openpai_set(spec_env_fn *set, void *arg, const char *value, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void spec_openpai_set(spec_env_fn *set, void *arg, const char *value, const char *fmt, ...)
{
	char *name;
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = vasprintf(&name, fmt, ap);
	va_end(ap);
	if (ret < 0)
		return;		/* out of memory: the variable is missing, nothing else breaks */
	set(arg, name, value);
	free(name);
}

/* PAI_PORT_LIST_R_I_LABEL of task @t (role @r, index @i); its first port in *first. */
static void spec_openpai_task_ports(const struct spec *s, size_t t, const struct spec_runtime *rt,
				    spec_env_fn *set, void *arg, int *first)
{
	const struct spec_worker *w = &s->workers[t];
	const int *ports = rt->ports ? rt->ports[t] : NULL;
	size_t at = 0;

	for (size_t k = 0; ports && k < w->n_ports; k++) {
		char *list = NULL;
		size_t size = 0;
		FILE *f = open_memstream(&list, &size);

		if (k == 0 && w->ports[0].count > 0)
			*first = ports[0];
		for (long n = 0; f && n < w->ports[k].count; n++)
			fprintf(f, "%s%d", n ? "," : "", ports[at + (size_t)n]);
		at += (size_t)w->ports[k].count;
		if (f && fclose(f) == 0)
			spec_openpai_set(set, arg, list, "PAI_PORT_LIST_%s_%u_%s", w->role,
					 w->role_index, w->ports[k].label);
		free(list);
	}
}

/* Every placement variable of role @r. */
static void spec_openpai_runtime_role(const struct spec *s, const struct spec_role *r,
				      const struct spec_runtime *rt, spec_env_fn *set, void *arg)
{
	const char *host = rt->host ? rt->host : "127.0.0.1";
	char *hosts = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&hosts, &size);

	for (size_t t = r->first; t < r->first + r->n; t++) {
		int first = -1;

		spec_openpai_set(set, arg, host, "PAI_HOST_IP_%s_%zu", r->name, t - r->first);
		spec_openpai_task_ports(s, t, rt, set, arg, &first);
		if (f && first >= 0)
			fprintf(f, "%s%s:%d", t > r->first ? "," : "", host, first);
		else if (f)
			fprintf(f, "%s%s", t > r->first ? "," : "", host);
	}
	if (f && fclose(f) == 0)
		spec_openpai_set(set, arg, hosts, "PAI_TASK_ROLE_%s_HOST_LIST", r->name);
	free(hosts);
}

/*
 * Every task gets the placement of all tasks (that is how they find each
 * other), so the variables are the same for each worker @w.
 */
static void spec_openpai_runtime_env(const struct spec *s, size_t w, const struct spec_runtime *rt,
			      spec_env_fn *set, void *arg)
{
	(void)w;
	if (rt->user)
		set(arg, "PAI_USER_NAME", rt->user);
	for (size_t i = 0; i < s->n_roles; i++)
		spec_openpai_runtime_role(s, &s->roles[i], rt, set, arg);
}

/* OpenPAI v1: a member "taskRoles" or "jobName". */
static bool spec_openpai_detect(const json_t *root)
{
	return json_object_get(root, "taskRoles") || json_object_get(root, "jobName");
}

const struct spec_format_ops spec_openpai_format = {
	.name = "openpai",
	.detect = spec_openpai_detect,
	.parse = spec_openpai_parse,
	.runtime_env = spec_openpai_runtime_env,
};
