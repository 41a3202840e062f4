/*
 * spec_kibernetika.c - the Kibernetika (kuberlab) task format, YAML or
 * JSON: {name, resources: [{name, replicas, command, args, workDir, env,
 * images, resources: {accelerators, requests, limits}, restartPolicy,
 * maxRestartCount, port, volumes, ...}]}.
 *
 * Each resource becomes a role (struct spec_role) of `replicas` workers,
 * in spec order; all of them start together (gang), as the platform starts
 * a task's resources.  Fields are checked one small function each, then,
 * only when nothing was wrong, spec_kibernetika_build makes the workers.
 *
 * Where the documentation (docs.kibernetika.io, "Task management") is
 * silent, the platform's own code (github.com/kuberlab/lib, pkg/mlapp and
 * pkg/kubernetes) decided:
 * - Names: a resource name is 1-63 characters of [a-z0-9-], starting and
 *   ending with [a-z0-9] (the documented rule); the task name follows
 *   mlfs's job-name rules (spec_set_name).
 * - replicas: 1 to 1024, default 1.  command: a string (shell text, run by
 *   /bin/sh -c as the platform runs it with bash -c) or a list of words,
 *   each single-quoted for the shell where it needs it (a list means words
 *   as written, as in Kubernetes, so $VAR in one is not expanded).  args:
 *   the same, appended after one space (the platform appends its string
 *   raw).
 * - Quantities: Kubernetes' syntax: a number and a suffix of m, k, M, G,
 *   T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or a bare YAML/JSON number (cpu: 2,
 *   cpu: 0.5).  A request may not exceed its limit.  A worker holds the
 *   larger of request and limit (the platform's own accounting,
 *   CPUMemLimits): cpu_count = that in millicores rounded up to whole CPUs,
 *   at least 1 (default: the platform's 50m, so 1); memory_gb = bytes /
 *   2^30, which the memory cgroup also enforces, so a worker is never cut
 *   below what the platform allowed it; default not accounted.  Memory in
 *   "m" (thousandths of a byte) is refused as a likely typo.
 * - GPUs: resources.accelerators.gpu (the platform's field), else the
 *   documented limit ("GPU=1": limits.gpu or limits."nvidia.com/gpu", as
 *   the platform writes it for Kubernetes), else requests.gpu; default 0.
 * - restartPolicy: Never, OnFailure or Always.  The platform's pods are
 *   always Never at the Kubernetes level and its worker set re-creates a
 *   failed one up to maxRestartCount times, whatever restartPolicy says;
 *   so retry_count = maxRestartCount (the largest over the resources: a
 *   gang is retried whole).  Always (restart after success too) cannot be
 *   honoured by a batch job: listed as ignored, run as OnFailure.
 * - The task's end: it fails once any replica has failed with its restarts
 *   spent, and the replicas still running are stopped, as a Kubernetes job
 *   of the task would end (the platform's task turns Failed when one of its
 *   pods does); it succeeds once every replica exited 0.  So each role has
 *   min_failed 1 and min_succeeded null (OpenPAI's terms, which the
 *   scheduler applies to every format with roles).
 * - port: each replica gets one free port from the node (a spec_port
 *   "cluster-port"), so replicas on one node do not collide.
 * - timeoutMinutes (deprecated by the platform; the documented "Timeout:
 *   time to wait for a compute resource") is wait_timeout in seconds.
 * - images: a resource asking for GPUs runs in images.gpu, the others in
 *   images.cpu (either one alone serves both).
 * - Sources (spec_sources.c): the task's `sources:` and the config's
 *   [source] sections; a resource maps every one with
 *   default_volume_mapping (under default_mount_path) and the ones its
 *   volumes name; each shows in the worker's view at sources/NAME, its
 *   <NAME>_DIR names where, and workDir may name one ($SRC_DIR).
 * - Listed as ignored, the job still runs: a command holding an unfilled template placeholder ({{ .x }}: the simple
 *   form's values are not filled; run as written), nodes, is_permanent,
 *   autoscale, labels, env valueFromSecret, a task type other than general,
 *   and every unknown field.
 *
 * Variables (DESIGN §5): static, in each worker's env: the resource's own
 * env list, then REPLICA_INDEX (from 1, as the documentation's table of
 * variables says, "1,2,...", and DESIGN §5 asks: "Kibernetika's
 * REPLICA_INDEX as its documentation says".  Beware: the platform's code
 * sets strconv.Itoa(i) for pod i, from 0, the documentation's own <R>_NODES
 * example numbers replicas -0, -1, and its example command passes
 * REPLICA_INDEX as TensorFlow's --task_index, which counts from 0; a script
 * written against the running platform may need $((REPLICA_INDEX - 1))) and
 * TASK_NAME (the job name; the platform sets the task's name).  At run time
 * (spec_kibernetika_runtime_env): <RESOURCE>_NODES and <RESOURCE>_HOSTS for
 * every resource, BUILD_ID and GPU_COUNT; see there.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_int.h"

#define SPEC_KB_MAX_WORKERS 1024
#define SPEC_KB_REPLICA_BASE 1		/* REPLICA_INDEX of a resource's first replica */
#define SPEC_KB_DEFAULT_MILLICPU 50	/* the platform's default request */
#define SPEC_KB_PORT_LABEL "cluster-port"	/* the platform's containerPort name */

/* One entry of resources, as read. */
struct spec_kb_res {
	const char *name;		/* borrowed from the JSON */
	long replicas;
	char *command;			/* with args appended; owned */
	const char *work_dir;		/* borrowed; NULL: the default */
	struct spec_env *env;		/* owned */
	size_t n_env;
	struct spec_resources res;
	bool port;
	struct spec_image image;	/* images.gpu for a resource with GPUs, else images.cpu */
	struct spec_worker vol;		/* only its volumes, all_sources, default_mount_path */
};

struct spec_kb {
	struct spec_ctx *c;
	struct spec_kb_res *res;	/* one per resources entry */
	size_t n_res;
	const char *name;		/* borrowed; NULL: absent */
	bool name_bad;
	bool has_resources;
	long workers;			/* replicas of all resources */
};

/* A quantity's numbers, for the requests <= limits rule. */
struct spec_kb_amounts {
	double cpu, memory;		/* cores, bytes; < 0: not given */
	long gpu;			/* < 0: not given */
};

/* ---- helpers ---- */

static bool spec_kb_name_ok(const char *name)
{
	size_t len = strlen(name);

	return len >= 1 && len <= 63 &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == len &&
	       name[0] != '-' && name[len - 1] != '-';
}

/* Appends @word to *buf (malloc'd), single-quoted when the shell needs it. */
static int spec_kb_quote(char **buf, const char *word)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "0123456789_-+=/.,:@%";
	bool plain = *word && strspn(word, safe) == strlen(word);
	size_t len = *buf ? strlen(*buf) : 0, need = len + 1 + strlen(word) * 4 + 3;
	char *out = realloc(*buf, need), *p;

	if (!out)
		return -1;
	*buf = out;
	p = out + len;
	if (len)
		*p++ = ' ';
	if (!plain)
		*p++ = '\'';
	for (; *word; word++) {
		if (*word == '\'' && !plain) {
			memcpy(p, "'\\''", 4);
			p += 4;
		} else {
			*p++ = *word;
		}
	}
	if (!plain)
		*p++ = '\'';
	*p = '\0';
	return 0;
}

/*
 * The shell text of @v at @path: a non-blank string as it is, or a
 * non-empty list of non-empty strings as quoted words.  malloc'd, or NULL
 * after reporting.
 */
static char *spec_kb_words(struct spec_ctx *c, json_t *v, const char *path)
{
	char elem[SPEC_PATH_MAX + 24], *out = NULL;
	json_t *e;
	size_t i;

	if (json_is_string(v)) {
		if (!spec_blank(json_string_value(v)))
			return spec_strdup(c, json_string_value(v));
		spec_error(c, path, "must not be empty or only whitespace");
		return NULL;
	}
	if (!json_is_array(v) || json_array_size(v) == 0) {
		spec_error(c, path, "must be a command line or a non-empty list of words, got %s",
			   json_is_array(v) ? "an empty list" : spec_json_type(v));
		return NULL;
	}
	json_array_foreach(v, i, e) {
		snprintf(elem, sizeof(elem), "%s[%zu]", path, i);
		if (!json_is_string(e) || !*json_string_value(e)) {
			spec_error(c, elem, "must be a non-empty string, got %s",
				   json_is_string(e) ? "\"\"" : spec_json_type(e));
			free(out);
			return NULL;
		}
		if (spec_kb_quote(&out, json_string_value(e)) < 0) {
			c->nomem = true;
			free(out);
			return NULL;
		}
	}
	return out;
}

/* ---- quantities ---- */

static const struct spec_kb_suffix {
	const char *s;
	double mult;
} spec_kb_suffixes[] = {
	{ "", 1 }, { "m", 1e-3 }, { "k", 1e3 }, { "M", 1e6 }, { "G", 1e9 }, { "T", 1e12 },
	{ "P", 1e15 }, { "E", 1e18 }, { "Ki", 1024.0 }, { "Mi", 1048576.0 },
	{ "Gi", 1073741824.0 }, { "Ti", 1099511627776.0 }, { "Pi", 1125899906842624.0 },
	{ "Ei", 1152921504606846976.0 },
};

/* A Kubernetes quantity from @s ("100m", "8Gi", "1.5"): true and *out. */
static bool spec_kb_quantity_text(const char *s, double *out, bool *milli)
{
	size_t lead = strspn(s, "0123456789"), frac = 0, k;
	const char *suffix;

	if (s[lead] == '.')
		frac = strspn(s + lead + 1, "0123456789");
	if (!lead && !frac)
		return false;
	suffix = s + lead + (s[lead] == '.' ? 1 + frac : 0);
	for (k = 0; k < sizeof(spec_kb_suffixes) / sizeof(spec_kb_suffixes[0]); k++)
		if (strcmp(suffix, spec_kb_suffixes[k].s) == 0)
			break;
	if (k == sizeof(spec_kb_suffixes) / sizeof(spec_kb_suffixes[0]))
		return false;
	*out = strtod(s, NULL) * spec_kb_suffixes[k].mult;
	*milli = strcmp(suffix, "m") == 0;
	return true;
}

/*
 * The quantity @key of @obj (at @parent): 1 and *out, 0 when absent, -1
 * after reporting.  @memory: refuse "m".
 */
static int spec_kb_quantity(struct spec_ctx *c, json_t *obj, const char *parent,
			    const char *key, bool memory, double *out)
{
	json_t *v = json_object_get(obj, key);
	char path[SPEC_PATH_MAX], shown[SPEC_SHOW_MAX];
	bool milli = false, ok;

	spec_path(path, parent, key);
	if (!v || json_is_null(v))
		return 0;
	if (json_is_number(v)) {
		*out = json_number_value(v);
		ok = true;
	} else if (json_is_string(v)) {
		ok = spec_kb_quantity_text(json_string_value(v), out, &milli);
	} else {
		spec_error(c, path, "must be a quantity like \"%s\", got %s",
			   memory ? "8Gi" : "100m", spec_json_type(v));
		return -1;
	}
	if (!ok || *out <= 0 || (memory && milli)) {
		if (json_is_number(v))
			snprintf(shown, sizeof(shown), "%g", json_number_value(v));
		spec_error(c, path, "%s, got %s%s%s", memory && milli ?
			   "is in thousandths of a byte (m); write Mi or M for megabytes" :
			   memory ? "must be a quantity of memory more than 0, like 8Gi, 512Mi or 1G" :
			   "must be a number of CPUs more than 0, like 2, 0.5 or 100m",
			   json_is_string(v) ? "\"" : "",
			   json_is_string(v) ? spec_show(shown, json_string_value(v)) : shown,
			   json_is_string(v) ? "\"" : "");
		return -1;
	}
	return 1;
}

/* A GPU count: an integer 0-4096, or a string of digits; 1, 0 or -1. */
static int spec_kb_gpu(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		       long *out)
{
	json_t *v = json_object_get(obj, key);
	const char *s = json_string_value(v);
	char got[SPEC_SHOW_MAX + 8], shown[SPEC_SHOW_MAX];
	long long n = -1;

	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v))
		n = json_integer_value(v);
	else if (s && *s && strspn(s, "0123456789") == strlen(s) && strlen(s) < 6)
		n = strtoll(s, NULL, 10);
	if (n >= 0 && n <= 4096) {
		*out = (long)n;
		return 1;
	}
	if (s)
		snprintf(got, sizeof(got), "\"%s\"", spec_show(shown, s));
	else if (json_is_integer(v))
		snprintf(got, sizeof(got), "%lld", n);
	else
		snprintf(got, sizeof(got), "%s", spec_json_type(v));
	spec_error_key(c, parent, key, "must be a whole number of GPUs from 0 to 4096, got %s", got);
	return -1;
}

/* cpu, memory and GPUs of requests or limits (@obj at @path) into @a. */
static void spec_kb_amounts(struct spec_ctx *c, json_t *obj, const char *path,
			    struct spec_kb_amounts *a)
{
	static const char *const known[] = { "cpu", "memory", "gpu", "nvidia.com/gpu", NULL };

	spec_ignore_unknown(c, obj, path, known);
	if (spec_kb_quantity(c, obj, path, "cpu", false, &a->cpu) <= 0)
		a->cpu = -1;
	if (spec_kb_quantity(c, obj, path, "memory", true, &a->memory) <= 0)
		a->memory = -1;
	if (spec_kb_gpu(c, obj, path, "gpu", &a->gpu) <= 0 &&
	    spec_kb_gpu(c, obj, path, "nvidia.com/gpu", &a->gpu) <= 0)
		a->gpu = -1;
}

/* A request over its limit: reported at the request. */
static void spec_kb_over(struct spec_ctx *c, const char *at, const char *what, double req,
			 double lim)
{
	char path[SPEC_PATH_MAX];

	if (req >= 0 && lim >= 0 && req > lim) {
		snprintf(path, sizeof(path), "%s.requests.%s", at, what);
		spec_error(c, path, "asks for more than limits.%s allows (%g > %g)", what, req, lim);
	}
}

/* Whole CPUs for @cores: millicores rounded up to whole CPUs, at least 1. */
static long spec_kb_cpus(double cores)
{
	double millis = cores * 1000.0;
	long m = millis > 1e12 ? 1000000000000L : (long)millis;

	if ((double)m < millis)
		m++;
	return m <= 1000 ? 1 : (m + 999) / 1000;
}

/* resources[i].resources: requests, limits, accelerators into @r. */
static void spec_kb_res_request(struct spec_ctx *c, json_t *res, const char *at,
				struct spec_resources *r)
{
	static const char *const known[] = { "requests", "limits", "accelerators", NULL };
	struct spec_kb_amounts req = { -1, -1, -1 }, lim = { -1, -1, -1 };
	char path[SPEC_PATH_MAX];
	json_t *o;
	long acc = -1;

	spec_ignore_unknown(c, res, at, known);
	if (spec_get_object(c, res, at, "requests", &o) > 0)
		spec_kb_amounts(c, o, spec_path(path, at, "requests"), &req);
	if (spec_get_object(c, res, at, "limits", &o) > 0)
		spec_kb_amounts(c, o, spec_path(path, at, "limits"), &lim);
	if (spec_get_object(c, res, at, "accelerators", &o) > 0)
		spec_kb_gpu(c, o, spec_path(path, at, "accelerators"), "gpu", &acc);
	spec_kb_over(c, at, "cpu", req.cpu, lim.cpu);
	spec_kb_over(c, at, "memory", req.memory, lim.memory);
	spec_kb_over(c, at, "gpu", (double)req.gpu, (double)lim.gpu);
	if (acc >= 0 && lim.gpu >= 0 && acc > lim.gpu)
		spec_error(c, spec_path(path, at, "accelerators.gpu"),
			   "asks for more GPUs than limits allows (%ld > %ld)", acc, lim.gpu);
	r->cpu_count = spec_kb_cpus(lim.cpu > req.cpu ? lim.cpu : req.cpu > 0 ? req.cpu :
				    SPEC_KB_DEFAULT_MILLICPU / 1000.0);
	r->memory_gb = lim.memory > req.memory ? lim.memory : req.memory;
	if (r->memory_gb > 0)
		r->memory_gb /= 1073741824.0;
	r->gpu_count = acc >= 0 ? acc : lim.gpu >= 0 ? lim.gpu : req.gpu >= 0 ? req.gpu : 0;
}

/* ---- one resource ---- */

static void spec_kb_res_name(struct spec_kb *k, struct spec_kb_res *r, json_t *o, const char *at)
{
	char path[SPEC_PATH_MAX], shown[SPEC_SHOW_MAX];
	int ret = spec_get_string(k->c, o, at, "name", &r->name);

	spec_path(path, at, "name");
	if (ret == 0)
		spec_error(k->c, path, "missing; each resource needs a name, like \"worker\"");
	if (ret > 0 && !spec_kb_name_ok(r->name))
		spec_error(k->c, path, "\"%s\" must be 1 to 63 characters of a-z, 0-9 and -, starting and ending with a letter or digit",
			   spec_show(shown, r->name));
	for (size_t i = 0; ret > 0 && r->name && i + 1 < k->n_res; i++)
		if (k->res[i].name && strcmp(k->res[i].name, r->name) == 0) {
			spec_error(k->c, path, "\"%s\" names resources[%zu] too; names must differ",
				   spec_show(shown, r->name), i);
			break;
		}
	if (ret <= 0)
		r->name = NULL;
}

/* *cmd + " " + @extra (both malloc'd; @extra freed). */
static void spec_kb_append(struct spec_ctx *c, char **cmd, char *extra)
{
	char *both;

	if (*cmd && extra) {
		if (asprintf(&both, "%s %s", *cmd, extra) < 0) {
			c->nomem = true;
		} else {
			free(*cmd);
			*cmd = both;
		}
	}
	free(extra);
}

static void spec_kb_res_command(struct spec_kb *k, struct spec_kb_res *r, json_t *o,
				const char *at)
{
	char path[SPEC_PATH_MAX], shown[SPEC_SHOW_MAX];
	json_t *cmd = json_object_get(o, "command"), *args = json_object_get(o, "args");

	spec_path(path, at, "command");
	if (!cmd || json_is_null(cmd)) {
		spec_error(k->c, path, "missing; each resource runs a command, like \"python train.py\"");
		return;
	}
	r->command = spec_kb_words(k->c, cmd, path);
	if (args && !json_is_null(args))
		spec_kb_append(k->c, &r->command, spec_kb_words(k->c, args, spec_path(path, at, "args")));
	if (r->command && strstr(r->command, "{{") && strstr(r->command, "}}"))
		spec_ignore(k->c, "%s.command: \"%s\" holds a template placeholder ({{ ... }}), which mlfs does not fill; run as written",
			    at, spec_show(shown, r->command));
}

static void spec_kb_res_replicas(struct spec_kb *k, struct spec_kb_res *r, json_t *o,
				 const char *at)
{
	r->replicas = 1;
	if (spec_get_long(k->c, o, at, "replicas", 1, SPEC_KB_MAX_WORKERS, &r->replicas) < 0)
		r->replicas = 1;
	k->workers += r->replicas;
}

static void spec_kb_res_work_dir(struct spec_kb *k, struct spec_kb_res *r, json_t *o,
				 const char *at)
{
	char path[SPEC_PATH_MAX], shown[SPEC_SHOW_MAX];
	const char *dir;

	if (spec_get_string(k->c, o, at, "workDir", &dir) <= 0)
		return;
	spec_path(path, at, "workDir");
	if (spec_blank(dir))
		spec_error(k->c, path, "must not be empty; leave it out for the default folder");
	else
		r->work_dir = dir;	/* $SRC_DIR and the like: resolved at launch (spec_sources.c) */
	(void)shown;
}

static bool spec_kb_var_name_ok(const char *name)
{
	return name[0] && !(name[0] >= '0' && name[0] <= '9') &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
	       strlen(name);
}

/* One env entry {name, value} at @at into r->env. */
static void spec_kb_env_entry(struct spec_ctx *c, struct spec_kb_res *r, json_t *e, const char *at)
{
	static const char *const known[] = { "name", "value", "valueFromSecret", "secretKey", NULL };
	char path[SPEC_PATH_MAX];
	json_t *v = json_object_get(e, "value");
	const char *name, *secret;
	char *value = NULL;
	int ret;

	spec_ignore_unknown(c, e, at, known);
	ret = spec_get_string(c, e, at, "name", &name);
	spec_path(path, at, "name");
	if (ret == 0)
		spec_error(c, path, "missing");
	else if (ret > 0 && !spec_kb_var_name_ok(name))
		spec_error(c, path, "a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$");
	if (spec_get_string(c, e, at, "valueFromSecret", &secret) > 0)
		spec_ignore(c, "%s.valueFromSecret: the platform's secrets are not available", at);
	if (json_is_string(v))
		value = strdup(json_string_value(v));
	else if (json_is_integer(v))
		value = asprintf(&value, "%lld", (long long)json_integer_value(v)) < 0 ? NULL : value;
	else if (json_is_boolean(v) || !v || json_is_null(v))
		value = strdup(!v || json_is_null(v) ? "" : json_is_true(v) ? "true" : "false");
	else
		spec_error(c, spec_path(path, at, "value"), "must be a string, got %s%s",
			   spec_json_type(v), json_is_real(v) ? " (quote it to keep its exact text)" : "");
	if (ret > 0 && spec_kb_var_name_ok(name) && value) {
		r->env[r->n_env].name = spec_strdup(c, name);
		r->env[r->n_env++].value = value;
	} else {
		free(value);
	}
}

static void spec_kb_res_env(struct spec_kb *k, struct spec_kb_res *r, json_t *o, const char *at)
{
	char path[SPEC_PATH_MAX], elem[SPEC_PATH_MAX + 24];
	json_t *env = json_object_get(o, "env"), *e;
	size_t i;

	spec_path(path, at, "env");
	if (!env || json_is_null(env))
		return;
	if (!json_is_array(env)) {
		spec_error(k->c, path, "must be a list of {name, value}, got %s", spec_json_type(env));
		return;
	}
	r->env = calloc(json_array_size(env) + 1, sizeof(*r->env));
	if (!r->env) {
		k->c->nomem = true;
		return;
	}
	json_array_foreach(env, i, e) {
		snprintf(elem, sizeof(elem), "%s[%zu]", path, i);
		if (json_is_object(e))
			spec_kb_env_entry(k->c, r, e, elem);
		else
			spec_error(k->c, elem, "must be {name, value}, got %s", spec_json_type(e));
	}
}

static void spec_kb_res_restart(struct spec_kb *k, struct spec_kb_res *r, json_t *o,
				const char *at)
{
	char path[SPEC_PATH_MAX], shown[SPEC_SHOW_MAX];
	const char *policy;
	long max = 0;

	(void)r;
	if (spec_get_long(k->c, o, at, "maxRestartCount", 0, 1000, &max) > 0 &&
	    max > k->c->s->retry_count)
		k->c->s->retry_count = max;
	if (spec_get_string(k->c, o, at, "restartPolicy", &policy) <= 0)
		return;
	spec_path(path, at, "restartPolicy");
	if (strcmp(policy, "Always") == 0)
		spec_ignore(k->c, "%s: Always: a worker that succeeded is not restarted; failed ones are, up to maxRestartCount (OnFailure)",
			    path);
	else if (strcmp(policy, "Never") != 0 && strcmp(policy, "OnFailure") != 0)
		spec_error(k->c, path, "must be Never, OnFailure or Always, got \"%s\"",
			   spec_show(shown, policy));
}

static void spec_kb_res_port(struct spec_kb *k, struct spec_kb_res *r, json_t *o, const char *at)
{
	long port;

	r->port = spec_get_long(k->c, o, at, "port", 1, 65535, &port) > 0;
}

static void spec_kb_res_resources(struct spec_kb *k, struct spec_kb_res *r, json_t *o,
				  const char *at)
{
	char path[SPEC_PATH_MAX];
	json_t *res;

	r->res = (struct spec_resources){ .cpu_count = 1, .memory_gb = -1, .disk_size_gb = 10,
					  .max_price = -1 };
	if (spec_get_object(k->c, o, at, "resources", &res) > 0)
		spec_kb_res_request(k->c, res, spec_path(path, at, "resources"), &r->res);
	else
		r->res.cpu_count = spec_kb_cpus(SPEC_KB_DEFAULT_MILLICPU / 1000.0);
}

/*
 * images {cpu, gpu}: the platform runs a resource that asks for GPUs in
 * its gpu image and the others in the cpu one; with one of the two given,
 * that one.
 */
static void spec_kb_res_images(struct spec_kb *k, struct spec_kb_res *r, json_t *o, const char *at)
{
	static const char *const known[] = { "cpu", "gpu", NULL };
	char path[SPEC_PATH_MAX], field[SPEC_PATH_MAX];
	const char *cpu = NULL, *gpu = NULL, *use;
	json_t *images;

	if (spec_get_object(k->c, o, at, "images", &images) <= 0)
		return;
	spec_path(path, at, "images");
	spec_ignore_unknown(k->c, images, path, known);
	spec_get_string(k->c, images, path, "cpu", &cpu);
	spec_get_string(k->c, images, path, "gpu", &gpu);
	use = r->res.gpu_count > 0 ? (gpu ? gpu : cpu) : (cpu ? cpu : gpu);
	if (use)
		spec_set_image(k->c, &r->image, spec_path(field, path, use == gpu ? "gpu" : "cpu"),
			       use, false);
}

/* What cannot be honoured on this node: listed, with why. */
static void spec_kb_res_ignored(struct spec_kb *k, struct spec_kb_res *r, json_t *o,
				const char *at)
{
	static const struct { const char *key, *why; } fields[] = {
		{ "nodes", "node labels do not apply: workers run on this node" },
		{ "is_permanent", "the job ends when every worker has exited" },
		{ "autoscale", "replicas are fixed" },
		{ "labels", "not used" },
	};
	json_t *v;

	(void)r;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		v = json_object_get(o, fields[i].key);
		if (v && !json_is_null(v) && !json_is_false(v))
			spec_ignore(k->c, "%s.%s: %s", at, fields[i].key, fields[i].why);
	}
}

static void spec_kb_res_vols(struct spec_kb *k, struct spec_kb_res *r, json_t *o, const char *at)
{
	spec_kb_res_volumes(k->c, o, at, &r->vol);
}

typedef void spec_kb_field_fn(struct spec_kb *k, struct spec_kb_res *r, json_t *o, const char *at);

static spec_kb_field_fn *const spec_kb_res_fields[] = {
	spec_kb_res_name, spec_kb_res_replicas, spec_kb_res_command, spec_kb_res_work_dir,
	spec_kb_res_env, spec_kb_res_resources, spec_kb_res_restart, spec_kb_res_port,
	spec_kb_res_images, spec_kb_res_vols, spec_kb_res_ignored,
};

static void spec_kb_resource(struct spec_kb *k, size_t i, json_t *o)
{
	static const char *const known[] = {
		"name", "replicas", "command", "args", "workDir", "env", "resources",
		"restartPolicy", "maxRestartCount", "port", "images", "volumes",
		"default_volume_mapping", "default_mount_path", "nodes", "is_permanent",
		"autoscale", "labels", NULL,
	};
	struct spec_kb_res *r = &k->res[i];
	char at[SPEC_PATH_MAX];

	snprintf(at, sizeof(at), "resources[%zu]", i);
	k->n_res = i + 1;
	if (!json_is_object(o)) {
		spec_error(k->c, at, "must be an object like {name, command, replicas}, got %s",
			   spec_json_type(o));
		return;
	}
	spec_ignore_unknown(k->c, o, at, known);
	for (size_t f = 0; f < sizeof(spec_kb_res_fields) / sizeof(spec_kb_res_fields[0]); f++)
		spec_kb_res_fields[f](k, r, o, at);
}

/* ---- the task ---- */

static void spec_kb_resources(struct spec_kb *k, json_t *root)
{
	json_t *a = json_object_get(root, "resources"), *o;
	size_t i;

	k->has_resources = a && !json_is_null(a);
	if (!k->has_resources)
		return;
	if (!json_is_array(a) || json_array_size(a) == 0 ||
	    json_array_size(a) > SPEC_KB_MAX_WORKERS) {
		spec_error(k->c, "resources", "must list 1 to %d resources, like [{name: worker, command: ...}], got %s",
			   SPEC_KB_MAX_WORKERS, json_is_array(a) ? "none" : spec_json_type(a));
		return;
	}
	k->res = calloc(json_array_size(a), sizeof(*k->res));
	if (!k->res) {
		k->c->nomem = true;
		return;
	}
	json_array_foreach(a, i, o)
		spec_kb_resource(k, i, o);
	if (k->workers > SPEC_KB_MAX_WORKERS)
		spec_error(k->c, "resources", "the replicas add up to %ld workers, over the limit of %d",
			   k->workers, SPEC_KB_MAX_WORKERS);
}

/* The task's own fields besides name and resources. */
static void spec_kb_task(struct spec_kb *k, json_t *root)
{
	static const char *const known[] = {
		"name", "resources", "type", "timeoutMinutes", "version", "sources", NULL,
	};
	char shown[SPEC_SHOW_MAX];
	const char *type;
	long minutes;

	spec_ignore_unknown(k->c, root, "", known);
	k->name_bad = spec_get_string(k->c, root, "", "name", &k->name) < 0;
	if (spec_get_string(k->c, root, "", "type", &type) > 0 && strcmp(type, "general") != 0) {
		if (strcmp(type, "init") == 0 || strcmp(type, "export") == 0)
			spec_ignore(k->c, "type: %s: the platform's own steps for it do not apply; run as a general task",
				    type);
		else
			spec_error(k->c, "type", "must be general, init or export, got \"%s\"",
				   spec_show(shown, type));
	}
	if (spec_get_long(k->c, root, "", "timeoutMinutes", 1, LONG_MAX / 60, &minutes) > 0)
		k->c->s->wait_timeout = minutes * 60;
	if (json_object_get(root, "version"))
		spec_ignore(k->c, "version: not used");
}

/* ---- building the workers ---- */

static int spec_kb_env_add(struct spec_env *env, size_t *n, const char *name, const char *value)
{
	env[*n].name = strdup(name);
	env[*n].value = strdup(value);
	if (!env[*n].name || !env[*n].value) {
		free(env[*n].name);
		free(env[*n].value);
		return -1;
	}
	(*n)++;
	return 0;
}

/* Worker @w: replica @index of resource @r. */
static int spec_kb_worker(struct spec_kb *k, const struct spec_kb_res *r, unsigned int index,
			  struct spec_worker *w)
{
	char idx[24];
	int bad = 0;

	w->command = strdup(r->command);
	w->res = r->res;
	w->role = strdup(r->name);
	w->role_index = index;
	w->work_dir = r->work_dir ? strdup(r->work_dir) : NULL;
	w->env = calloc(r->n_env + 2, sizeof(*w->env));
	if (!w->command || !w->role || (r->work_dir && !w->work_dir) || !w->env ||
	    spec_copy_image(k->c, &w->image, &r->image) < 0 || spec_volumes_copy(w, &r->vol) < 0)
		return -1;
	for (size_t i = 0; i < r->n_env; i++)
		bad |= spec_kb_env_add(w->env, &w->n_env, r->env[i].name, r->env[i].value);
	snprintf(idx, sizeof(idx), "%u", index + SPEC_KB_REPLICA_BASE);
	bad |= spec_kb_env_add(w->env, &w->n_env, "REPLICA_INDEX", idx);
	bad |= spec_kb_env_add(w->env, &w->n_env, "TASK_NAME", k->c->s->name);
	if (!r->port)
		return bad;
	w->ports = calloc(1, sizeof(*w->ports));
	if (!w->ports || !(w->ports[0].label = strdup(SPEC_KB_PORT_LABEL)))
		return -1;
	w->ports[0].count = 1;
	w->n_ports = 1;
	return bad;
}

static void spec_kb_build(struct spec_kb *k)
{
	struct spec *s = k->c->s;

	s->workers = calloc((size_t)k->workers, sizeof(*s->workers));
	s->roles = calloc(k->n_res, sizeof(*s->roles));
	if (!s->workers || !s->roles) {
		k->c->nomem = true;
		return;
	}
	for (size_t i = 0; i < k->n_res; i++) {
		const struct spec_kb_res *r = &k->res[i];
		struct spec_role *role = &s->roles[s->n_roles++];

		*role = (struct spec_role){ .name = strdup(r->name), .first = s->n_workers,
					    .n = (size_t)r->replicas, .min_failed = 1,
					    .min_succeeded = -1 };
		if (!role->name)
			k->c->nomem = true;
		for (long j = 0; j < r->replicas; j++)
			if (spec_kb_worker(k, r, (unsigned int)j, &s->workers[s->n_workers++]) < 0)
				k->c->nomem = true;
	}
}

static void spec_kb_free(struct spec_kb *k)
{
	for (size_t i = 0; i < k->n_res; i++) {
		free(k->res[i].command);
		for (size_t j = 0; j < k->res[i].n_env; j++) {
			free(k->res[i].env[j].name);
			free(k->res[i].env[j].value);
		}
		free(k->res[i].env);
		spec_image_free(&k->res[i].image);
		for (size_t j = 0; j < k->res[i].vol.n_volumes; j++) {
			free(k->res[i].vol.volumes[j].name);
			free(k->res[i].vol.volumes[j].sub_path);
			free(k->res[i].vol.volumes[j].mount_path);
		}
		free(k->res[i].vol.volumes);
		free(k->res[i].vol.default_mount_path);
	}
	free(k->res);
}

static void spec_kibernetika_parse(struct spec_ctx *c, json_t *root)
{
	struct spec_kb k = { .c = c };

	c->s->format = SPEC_KIBERNETIKA;
	c->s->type = SPEC_TRAINING;
	c->s->gang = true;
	c->s->wait_timeout = -1;
	c->s->run_timeout = -1;
	spec_kb_task(&k, root);
	spec_kb_task_sources(c, root);
	spec_kb_resources(&k, root);
	if (!k.name_bad)
		spec_set_name(c, k.name, "name");
	if (!k.has_resources)
		spec_error(c, "resources", "missing; a task needs at least one resource, like [{name: worker, command: python train.py}]");
	if (!c->errors && !c->nomem)
		spec_kb_build(&k);
	spec_kb_free(&k);
}

/* ---- variables that depend on the run ---- */

/* "NAME" of a resource in a variable: upper case, others than A-Z 0-9 as _. */
static void spec_kb_var(char *buf, size_t size, const char *role, const char *suffix)
{
	size_t n = 0;

	for (; role[n] && n + strlen(suffix) + 1 < size; n++) {
		char ch = role[n];

		buf[n] = ch >= 'a' && ch <= 'z' ? (char)(ch - 'a' + 'A') :
			 (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ? ch : '_';
	}
	strcpy(buf + n, suffix);
}

/* Sets <ROLE>_NODES (host:port, or host without a port) and <ROLE>_HOSTS. */
static void spec_kb_nodes(const struct spec *s, const struct spec_role *role,
			  const struct spec_runtime *rt, spec_env_fn *set, void *arg)
{
	char name[SPEC_NAME_MAX * 2 + 16];
	char *nodes = NULL, *hosts = NULL;
	size_t nlen = 0, hlen = 0;
	FILE *nf = open_memstream(&nodes, &nlen), *hf = open_memstream(&hosts, &hlen);

	for (size_t j = role->first; nf && hf && j < role->first + role->n; j++) {
		const char *sep = j > role->first ? "," : "";

		fprintf(hf, "%s%s", sep, rt->host);
		if (s->workers[j].n_ports && rt->ports && rt->ports[j])
			fprintf(nf, "%s%s:%d", sep, rt->host, rt->ports[j][0]);
		else
			fprintf(nf, "%s%s", sep, rt->host);
	}
	if (nf)
		fclose(nf);
	if (hf)
		fclose(hf);
	if (nf && hf) {
		spec_kb_var(name, sizeof(name), role->name, "_NODES");
		set(arg, name, nodes);
		spec_kb_var(name, sizeof(name), role->name, "_HOSTS");
		set(arg, name, hosts);
	}
	free(nodes);
	free(hosts);
}

/*
 * At run time, for worker @w: for every resource R, R_NODES (upper case,
 * others than A-Z 0-9 as _): its replicas' addresses in replica order,
 * comma-separated, each "HOST:PORT" when the resource sets port (PORT the
 * one the node gave that replica) else "HOST" (the documentation's "list of
 * dns addresses"; the platform's code leaves the entries empty there); on
 * one node HOST is rt->host for every replica.  R_HOSTS: the same without
 * ports (the platform sets it too).  BUILD_ID: rt->job_id ("id of current
 * task run").  GPU_COUNT: rt->n_gpus[w], the GPUs this replica was given
 * ("available for each replica"; equal to its request).
 */
static void spec_kibernetika_runtime_env(const struct spec *s, size_t w, const struct spec_runtime *rt,
				  spec_env_fn *set, void *arg)
{
	char gpus[16];

	for (size_t i = 0; i < s->n_roles; i++)
		spec_kb_nodes(s, &s->roles[i], rt, set, arg);
	if (rt->job_id)
		set(arg, "BUILD_ID", rt->job_id);
	if (rt->n_gpus) {
		snprintf(gpus, sizeof(gpus), "%u", rt->n_gpus[w]);
		set(arg, "GPU_COUNT", gpus);
	}
}

/*
 * A member "resources" that is an array (Kibernetika's list of resources,
 * each with replicas), or "tasks" that is an array (a project's task list).
 */
static bool spec_kibernetika_detect(const json_t *root)
{
	return json_is_array(json_object_get(root, "resources")) ||
	       json_is_array(json_object_get(root, "tasks"));
}

const struct spec_format_ops spec_kibernetika_format = {
	.name = "kibernetika",
	.detect = spec_kibernetika_detect,
	.parse = spec_kibernetika_parse,
	.runtime_env = spec_kibernetika_runtime_env,
};
