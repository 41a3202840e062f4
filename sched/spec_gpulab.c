/*
 * spec_gpulab.c - GPULab job requests: version 2 ("request") and version 1
 * ("jobDefinition"), mapped to one worker that runs the request's command
 * on the node.
 *
 * A version 1 definition is first converted to a version 2 request
 * (spec_gpulab_from_v1, spec_gpulab_v1.c), as GPULab itself does, then both are read by the
 * same code.  Messages about a converted request still name the field the
 * user wrote and point at it: every path goes through spec_gpulab_where,
 * which for version 1 turns "request.resources.cpus" back into
 * "jobDefinition.resources.cpuCores", and the shared getters are handed a
 * one-member object named that way (spec_gpulab_at).
 *
 * Version 1 -> 2, from GPULab's docs (doc.ilabt.imec.be/ilabt/gpulab,
 * "The Job Definition") and job files users publish:
 *   jobDefinition.name, .description      -> name, description
 *   jobDefinition.clusterId                -> request.resources.clusterId
 *   jobDefinition.resources.gpus           -> request.resources.gpus
 *   jobDefinition.resources.cpuCores       -> request.resources.cpus
 *   jobDefinition.resources.systemMemory   -> request.resources.cpuMemoryGb,
 *                                             MB / 1000 ("2000 means 2GB")
 *   jobDefinition.resources.gpuModel       -> request.resources.gpuModel; a
 *                                             string (v1's form) becomes [it]
 *   jobDefinition.resources.minCudaVersion -> request.resources.minCudaVersion
 *   jobDefinition.dockerImage, .command, .environment, .portMappings,
 *     .projectGidVariableName, .userUidVariableName -> request.docker.*
 *                                             (dockerImage -> image)
 *   jobDefinition.jobDataLocations[]       -> request.docker.storage[]:
 *                                             mountPoint -> containerPath,
 *                                             sharePath or hostPath -> hostPath
 * Other members of a jobDefinition or its resources (jobType, ...) are
 * listed as ignored; a location's protocol and shareHost are not used (the
 * [source] covering its path says where the data is).  Version 1 had no
 * slaveName and no scheduling.
 *
 * The rules checked, each reported at its field: name, description and
 * slaveName strings; gpus >= 0, cpus >= 1, cpuMemoryGb > 0, all three
 * required (GPULab will not queue a request without them); gpuModel an
 * array of non-empty strings, any of which matches as a case-insensitive
 * substring; minCudaVersion "MAJOR[.MINOR[.PATCH]]" or a number; clusterId
 * an integer or a string; docker and its command required, the command a
 * string or an array of strings, non-empty unless there is an image;
 * environment an object
 * of string, integer or boolean values with shell variable names; storage
 * entries objects with an absolute containerPath (and hostPath), no "..",
 * each the worker's volume of the [source] whose mount_path is the longest
 * prefix of its hostPath (else containerPath), found at submit
 * (spec_sources.c), bound at containerPath; portMappings entries with
 * containerPort (and hostPort) 1-65535; scheduling.interactive a boolean.
 *
 * Choices where GPULab's docs are silent or cannot apply here:
 * - The name is also the mlfs job name, so it must follow mlfs's rules;
 *   the message says so.  No name: the file's name, as for native specs.
 * - An empty command means "the image's CMD" in GPULab: the worker's
 *   command is then "" and the container runs the image's own; with no
 *   image it is refused.  An array is joined into one shell command with
 *   every element single-quoted, so nothing in it is expanded.
 * - docker.image is the worker's image, checked as an image name; the
 *   private-registry form USER:PASSWORD@HOST:PORT/NAME:TAG keeps the
 *   credentials apart (spec_image.auth), never shown.  Non-empty
 *   portMappings, and
 *   scheduling.interactive: true, are listed as ignored with the reason;
 *   empty ones ask for nothing and are not listed.  Other scheduling
 *   options (minDuration, maxDuration, ...) are listed as not supported.
 * - clusterId and slaveName go to the resources; the scheduler compares
 *   them with [node] and lists them as ignored where the node sets neither.
 * - Environment values: as in native specs, reals are refused (their text
 *   would not survive), integers and booleans become their JSON text.
 *
 * Variables (DESIGN §5).  Known at parse time, in the worker's env:
 *   GPULAB_CPUS_RESERVED (cpus), GPULAB_MEM_RESERVED (cpuMemoryGb as MB with
 *   GPULab's "m" suffix: 2 GB -> "2000m"), GPULAB_WORKER_ID ("0": GPULab
 *   counts from 0 and a request is one worker), GPULAB_CLUSTER_ID (only when
 *   the request names a clusterId: the scheduler holds the node to it).
 *   projectGidVariableName (and v1's userUidVariableName) name a variable
 *   that gets a placeholder here, replaced when the worker starts.
 * Set when the worker starts (spec_gpulab_runtime_env): GPULAB_JOB_ID (the
 *   mlfs job's id), GPULAB_GPUS_RESERVED (the GPUs it was given),
 *   GPULAB_USERNAME (the job owner), and the project gid variable: the
 *   owner's primary group, the group that owns the files it writes, as
 *   GPULab's project group owns the shared storage (mlfs has no projects).
 * Not set: GPULAB_PROJECT (no projects), GPULAB_SLAVE_* and GPULAB_VERSION
 * (there is no GPULab slave process; a made-up value would mislead).
 *
 * Not done here: deciding whether the node has the GPUs, CUDA version,
 * cluster or name asked for (the scheduler does).  Nothing is kept between
 * calls; the getpwnam_r at start is thread-safe.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "path.h"
#include "spec_int.h"

#define SPEC_GPULAB_GID "<the job owner's group id, set when the worker starts>"
#define SPEC_GPULAB_UID "<the job owner's user id, set when the worker starts>"

/* What the pass over the request found, for spec_gpulab_build. */
struct spec_gpulab {
	struct spec_ctx *c;
	bool v1;			/* paths in messages name jobDefinition's fields */
	struct spec_resources res;
	char *command;			/* malloc'd; NULL: missing or bad; "": the image's own */
	struct spec_image image;
	const char *gid_var, *uid_var;	/* borrowed; NULL: none */
	struct spec_volume *storage;	/* request.docker.storage as volumes (host_path) */
	size_t n_storage;
};

/* ---- where a field is, in the text the user wrote ---- */

/* Version 2 path prefixes and where version 1 keeps them; longest first. */
static const struct spec_gpulab_move {
	const char *v2, *v1;
} spec_gpulab_v1_paths[] = {
	{ "request.resources.clusterId", "jobDefinition.clusterId" },
	{ "request.resources.cpus", "jobDefinition.resources.cpuCores" },
	{ "request.resources.cpuMemoryGb", "jobDefinition.resources.systemMemory" },
	{ "request.resources", "jobDefinition.resources" },
	{ "request.docker.image", "jobDefinition.dockerImage" },
	{ "request.docker.storage", "jobDefinition.jobDataLocations" },
	{ "request.docker", "jobDefinition" },
	{ "request", "jobDefinition" },
	{ "name", "jobDefinition.name" },
	{ "description", "jobDefinition.description" },
};

#define SPEC_GPULAB_N_MOVES (sizeof(spec_gpulab_v1_paths) / sizeof(spec_gpulab_v1_paths[0]))

/* The path to name for the version 2 @path: itself, or its v1 place in @buf. */
static const char *spec_gpulab_where(const struct spec_gpulab *g, const char *path, char *buf)
{
	for (size_t i = 0; g->v1 && i < SPEC_GPULAB_N_MOVES; i++) {
		const struct spec_gpulab_move *m = &spec_gpulab_v1_paths[i];
		size_t len = strlen(m->v2);

		if (strncmp(path, m->v2, len) == 0 && strchr(".[", path[len])) {
			snprintf(buf, SPEC_PATH_MAX, "%s%s", m->v1, path + len);
			return buf;
		}
	}
	return path;
}

static void spec_gpulab_error(struct spec_gpulab *g, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void spec_gpulab_error(struct spec_gpulab *g, const char *path, const char *fmt, ...)
{
	char where[SPEC_PATH_MAX], msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	spec_error(g->c, spec_gpulab_where(g, path, where), "%s", msg);
}

/* Lists @path (a version 2 path) as ignored: "PATH: @why". */
static void spec_gpulab_ignore(struct spec_gpulab *g, const char *path, const char *why)
{
	char where[SPEC_PATH_MAX];

	spec_ignore(g->c, "%s: %s", spec_gpulab_where(g, path, where), why);
}

/*
 * The member @key of @obj (at version 2 path @parent) as the shared getters
 * should see it: for version 1, in a one-member object named with its v1
 * path, so their messages point at what the user wrote.
 */
struct spec_gpulab_at {
	json_t *obj;
	const char *parent, *key;
	json_t *tmp;			/* owned; NULL for version 2 */
	char path[SPEC_PATH_MAX];
};

static bool spec_gpulab_at(struct spec_gpulab *g, json_t *obj, const char *parent,
			   const char *key, struct spec_gpulab_at *at)
{
	char v2[SPEC_PATH_MAX];
	json_t *v = json_object_get(obj, key);
	const char *where;
	char *dot;

	*at = (struct spec_gpulab_at){ .obj = obj, .parent = parent, .key = key };
	if (!g->v1)
		return true;
	where = spec_gpulab_where(g, spec_path(v2, parent, key), at->path);
	if (where != at->path)
		snprintf(at->path, sizeof(at->path), "%s", where);
	dot = strrchr(at->path, '.');
	at->parent = dot ? at->path : "";
	at->key = dot ? dot + 1 : at->path;
	if (dot)
		*dot = '\0';
	at->obj = at->tmp = json_object();
	if (!at->tmp || (v && json_object_set(at->tmp, at->key, v) < 0)) {
		json_decref(at->tmp);
		g->c->nomem = true;
		return false;
	}
	return true;
}

static int spec_gpulab_long(struct spec_gpulab *g, json_t *obj, const char *parent,
			    const char *key, long min, long max, long *out)
{
	struct spec_gpulab_at at;
	int ret;

	if (!spec_gpulab_at(g, obj, parent, key, &at))
		return -1;
	ret = spec_get_long(g->c, at.obj, at.parent, at.key, min, max, out);
	json_decref(at.tmp);
	return ret;
}

static int spec_gpulab_double(struct spec_gpulab *g, json_t *obj, const char *parent,
			      const char *key, double *out)
{
	struct spec_gpulab_at at;
	int ret;

	if (!spec_gpulab_at(g, obj, parent, key, &at))
		return -1;
	ret = spec_get_double(g->c, at.obj, at.parent, at.key, out);
	json_decref(at.tmp);
	return ret;
}

/* *out stays valid after: the string is also held by @obj. */
static int spec_gpulab_string(struct spec_gpulab *g, json_t *obj, const char *parent,
			      const char *key, const char **out)
{
	struct spec_gpulab_at at;
	int ret;

	if (!spec_gpulab_at(g, obj, parent, key, &at))
		return -1;
	ret = spec_get_string(g->c, at.obj, at.parent, at.key, out);
	json_decref(at.tmp);
	return ret;
}

static int spec_gpulab_bool(struct spec_gpulab *g, json_t *obj, const char *parent,
			    const char *key, bool *out)
{
	struct spec_gpulab_at at;
	int ret;

	if (!spec_gpulab_at(g, obj, parent, key, &at))
		return -1;
	ret = spec_get_bool(g->c, at.obj, at.parent, at.key, out);
	json_decref(at.tmp);
	return ret;
}

/* An object member (*out borrowed from @obj). */
static int spec_gpulab_object(struct spec_gpulab *g, json_t *obj, const char *parent,
			      const char *key, json_t **out)
{
	struct spec_gpulab_at at;
	int ret;

	if (!spec_gpulab_at(g, obj, parent, key, &at))
		return -1;
	ret = spec_get_object(g->c, at.obj, at.parent, at.key, out);
	json_decref(at.tmp);
	return ret;
}

/* An array member (*out borrowed from @obj); @what names its entries. */
static int spec_gpulab_array(struct spec_gpulab *g, json_t *obj, const char *parent,
			     const char *key, const char *what, json_t **out)
{
	char path[SPEC_PATH_MAX];
	json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v)) {
		spec_gpulab_error(g, spec_path(path, parent, key), "must be an array of %s, got %s",
				  what, spec_json_type(v));
		return -1;
	}
	*out = v;
	return 1;
}

/* ---- name and description ---- */

static void spec_gpulab_name(struct spec_gpulab *g, json_t *root)
{
	char where[SPEC_PATH_MAX], shown[SPEC_SHOW_MAX];
	const char *name = NULL;

	if (spec_gpulab_string(g, root, "", "name", &name) < 0)
		return;
	if (name && !spec_name_valid(name)) {
		spec_gpulab_error(g, "name",
				  "the GPULab name is also the mlfs job name, which must be 1 to %d of A-Z a-z 0-9 . _ ~ - (not \".\" or \"..\"), got \"%s\"",
				  SPEC_NAME_MAX, spec_show(shown, name));
		return;
	}
	spec_set_name(g->c, name, spec_gpulab_where(g, "name", where));
}

static void spec_gpulab_description(struct spec_gpulab *g, json_t *root)
{
	const char *text;

	if (spec_gpulab_string(g, root, "", "description", &text) > 0)
		g->c->s->description = spec_strdup(g->c, text);
}

/* ---- request.resources ---- */

/* A required integer resource, at least @min. */
static void spec_gpulab_count(struct spec_gpulab *g, json_t *r, const char *key, long min,
			      long *out)
{
	char path[SPEC_PATH_MAX];

	if (spec_gpulab_long(g, r, "request.resources", key, min, LONG_MAX, out) == 0)
		spec_gpulab_error(g, spec_path(path, "request.resources", key), "missing");
}

static void spec_gpulab_memory(struct spec_gpulab *g, json_t *r)
{
	double gb;
	int ret = spec_gpulab_double(g, r, "request.resources", "cpuMemoryGb", &gb);

	if (ret == 0)
		spec_gpulab_error(g, "request.resources.cpuMemoryGb", "missing");
	else if (ret > 0 && gb <= 0)
		spec_gpulab_error(g, "request.resources.cpuMemoryGb", "must be more than 0, got %g", gb);
	else if (ret > 0)
		g->res.memory_gb = gb;
}

static void spec_gpulab_gpu_model(struct spec_gpulab *g, json_t *r)
{
	struct spec_gpulab_at at;
	json_t *models, *m;
	size_t i;
	int ret;

	if (!spec_gpulab_at(g, r, "request.resources", "gpuModel", &at))
		return;
	ret = spec_get_strings(g->c, at.obj, at.parent, at.key, &models);
	json_decref(at.tmp);	/* models is still held by @r */
	if (ret <= 0)
		return;
	g->res.gpu_types = calloc(json_array_size(models) + 1, sizeof(char *));
	if (!g->res.gpu_types) {
		g->c->nomem = true;
		return;
	}
	json_array_foreach(models, i, m)
		g->res.gpu_types[g->res.n_gpu_types++] = spec_strdup(g->c, json_string_value(m));
}

/* true for "MAJOR[.MINOR[.PATCH]]". */
static bool spec_gpulab_version_ok(const char *s)
{
	unsigned a, b, c;
	int end = 0;

	return sscanf(s, "%u%n.%u%n.%u%n", &a, &end, &b, &end, &c, &end) >= 1 && !s[end] &&
	       strspn(s, "0123456789.") == strlen(s);
}

static void spec_gpulab_cuda(struct spec_gpulab *g, json_t *r)
{
	json_t *v = json_object_get(r, "minCudaVersion");
	char buf[64], shown[SPEC_SHOW_MAX];
	const char *s = json_string_value(v);

	if (!v || json_is_null(v))
		return;
	if (json_is_number(v)) {
		snprintf(buf, sizeof(buf), "%g", json_number_value(v));
		s = buf;
	}
	if (!s)
		spec_gpulab_error(g, "request.resources.minCudaVersion",
				  "must be a version like 10 or \"11.8\", got %s", spec_json_type(v));
	else if (!spec_gpulab_version_ok(s))
		spec_gpulab_error(g, "request.resources.minCudaVersion",
				  "must be a version like 10 or \"11.8\", got \"%s\"", spec_show(shown, s));
	else
		g->res.min_cuda_version = spec_strdup(g->c, s);
}

static void spec_gpulab_cluster(struct spec_gpulab *g, json_t *r)
{
	json_t *v = json_object_get(r, "clusterId");
	char buf[32];

	if (!v || json_is_null(v))
		return;
	if (json_is_integer(v)) {
		snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
		g->res.cluster_id = spec_strdup(g->c, buf);
	} else if (json_is_string(v) && !spec_blank(json_string_value(v))) {
		g->res.cluster_id = spec_strdup(g->c, json_string_value(v));
	} else {
		spec_gpulab_error(g, "request.resources.clusterId",
				  "must be a cluster id like 1 (an integer or a non-empty string), got %s",
				  json_is_string(v) ? "an empty string" : spec_json_type(v));
	}
}

static void spec_gpulab_slave(struct spec_gpulab *g, json_t *r)
{
	const char *name;
	int ret = spec_gpulab_string(g, r, "request.resources", "slaveName", &name);

	if (ret > 0 && spec_blank(name))
		spec_gpulab_error(g, "request.resources.slaveName", "must not be empty");
	else if (ret > 0)
		g->res.node_name = spec_strdup(g->c, name);
}

static void spec_gpulab_resources(struct spec_gpulab *g, json_t *req)
{
	static const char *const known[] = {
		"clusterId", "slaveName", "gpus", "cpus", "cpuMemoryGb", "gpuModel",
		"minCudaVersion", NULL,
	};
	json_t *r;
	int ret = spec_gpulab_object(g, req, "request", "resources", &r);

	if (ret == 0)
		spec_gpulab_error(g, "request.resources",
				  "missing; GPULab needs at least gpus, cpus and cpuMemoryGb");
	if (ret <= 0)
		return;
	if (!g->v1)	/* a converted request holds only known fields */
		spec_ignore_unknown(g->c, r, "request.resources", known);
	spec_gpulab_cluster(g, r);
	spec_gpulab_slave(g, r);
	spec_gpulab_count(g, r, "gpus", 0, &g->res.gpu_count);
	spec_gpulab_count(g, r, "cpus", 1, &g->res.cpu_count);
	spec_gpulab_memory(g, r);
	spec_gpulab_gpu_model(g, r);
	spec_gpulab_cuda(g, r);
}

/* ---- request.docker ---- */

/* Appends @s to @out (at *len), single-quoted for /bin/sh; @out has room. */
static void spec_gpulab_quote(char *out, size_t *len, const char *s)
{
	out[(*len)++] = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			memcpy(out + *len, "'\\''", 4);
			*len += 4;
		} else {
			out[(*len)++] = *s;
		}
	}
	out[(*len)++] = '\'';
}

/* The array @cmd as one shell command (malloc'd), or NULL after reporting. */
static char *spec_gpulab_join(struct spec_gpulab *g, json_t *cmd)
{
	char elem[SPEC_PATH_MAX];
	size_t i, size = 1, len = 0;
	json_t *e;
	char *out;

	json_array_foreach(cmd, i, e) {
		snprintf(elem, sizeof(elem), "request.docker.command[%zu]", i);
		if (!json_is_string(e)) {
			spec_gpulab_error(g, elem, "must be a string, got %s", spec_json_type(e));
			return NULL;
		}
		if (i == 0 && spec_blank(json_string_value(e))) {
			spec_gpulab_error(g, elem, "must name the program to run, got an empty string");
			return NULL;
		}
		size += 4 * json_string_length(e) + 3;
	}
	out = malloc(size);
	if (!out) {
		g->c->nomem = true;
		return NULL;
	}
	json_array_foreach(cmd, i, e) {
		if (i)
			out[len++] = ' ';
		spec_gpulab_quote(out, &len, json_string_value(e));
	}
	out[len] = '\0';
	return out;
}

static void spec_gpulab_command(struct spec_gpulab *g, json_t *docker)
{
	static const char *const empty =
		"must not be empty without an image: GPULab runs the image's CMD then";
	json_t *cmd = json_object_get(docker, "command");
	bool none = (json_is_string(cmd) && spec_blank(json_string_value(cmd))) ||
		    (json_is_array(cmd) && json_array_size(cmd) == 0);

	if (!cmd || json_is_null(cmd))
		spec_gpulab_error(g, "request.docker.command",
				  "missing; give the command to run, as a string or an array");
	else if (none && !g->image.ref)
		spec_gpulab_error(g, "request.docker.command", "%s", empty);
	else if (none)
		g->command = spec_strdup(g->c, "");	/* the image's own CMD, as Docker runs it */
	else if (json_is_string(cmd))
		g->command = spec_strdup(g->c, json_string_value(cmd));
	else if (json_is_array(cmd))
		g->command = spec_gpulab_join(g, cmd);
	else
		spec_gpulab_error(g, "request.docker.command",
				  "must be a string or an array of strings, got %s", spec_json_type(cmd));
}

static bool spec_gpulab_var_name_ok(const char *name)
{
	return (name[0] == '_' || (name[0] >= 'A' && name[0] <= 'Z') ||
		(name[0] >= 'a' && name[0] <= 'z')) &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
	       strlen(name);
}

/* The value of variable @name as text (malloc'd), or NULL after reporting. */
static char *spec_gpulab_var_value(struct spec_gpulab *g, const char *at, const char *name,
				   json_t *v)
{
	char *text = NULL;

	if (json_is_string(v)) {
		text = strdup(json_string_value(v));
	} else if (json_is_integer(v)) {
		if (asprintf(&text, "%lld", (long long)json_integer_value(v)) < 0)
			text = NULL;
	} else if (json_is_boolean(v)) {
		text = strdup(json_is_true(v) ? "true" : "false");
	} else {
		spec_error_key(g->c, at, name, "must be a string, got %s%s", spec_json_type(v),
			       json_is_real(v) ? " (quote it to keep its exact text)" : "");
		return NULL;
	}
	if (!text)
		g->c->nomem = true;
	return text;
}

static void spec_gpulab_environment(struct spec_gpulab *g, json_t *docker)
{
	struct spec *s = g->c->s;
	char buf[SPEC_PATH_MAX];
	const char *name, *at = spec_gpulab_where(g, "request.docker.environment", buf);
	json_t *vars, *v;

	if (spec_gpulab_object(g, docker, "request.docker", "environment", &vars) <= 0)
		return;
	s->env = calloc(json_object_size(vars) + 1, sizeof(*s->env));
	if (!s->env) {
		g->c->nomem = true;
		return;
	}
	json_object_foreach(vars, name, v) {
		char *value;

		if (!spec_gpulab_var_name_ok(name)) {
			spec_error_key(g->c, at, name, "a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$");
			continue;
		}
		value = spec_gpulab_var_value(g, at, name, v);
		if (!value)
			continue;
		s->env[s->n_env].value = value;
		s->env[s->n_env++].name = spec_strdup(g->c, name);
	}
}

/* projectGidVariableName or userUidVariableName: a variable name, kept in *out. */
static void spec_gpulab_id_var(struct spec_gpulab *g, json_t *docker, const char *key,
			       const char **out)
{
	char path[SPEC_PATH_MAX];
	const char *name;

	if (spec_gpulab_string(g, docker, "request.docker", key, &name) <= 0)
		return;
	if (spec_gpulab_var_name_ok(name))
		*out = name;
	else
		spec_gpulab_error(g, spec_path(path, "request.docker", key),
				  "must be a variable name matching ^[A-Za-z_][A-Za-z0-9_]*$");
}

static void spec_gpulab_image(struct spec_gpulab *g, json_t *docker)
{
	const char *image;
	int ret = spec_gpulab_string(g, docker, "request.docker", "image", &image);

	char where[SPEC_PATH_MAX];

	if (ret > 0 && spec_blank(image))
		spec_gpulab_error(g, "request.docker.image", "must not be empty");
	else if (ret > 0)	/* "USER:PASSWORD@HOST:PORT/NAME:TAG" for a private registry */
		spec_set_image(g->c, &g->image, spec_gpulab_where(g, "request.docker.image", where),
			       image, true);
}

/* ---- storage (the [source] covering each path: spec_sources.c) and portMappings ---- */

/* Storage entry @i's paths as a volume: its source is found by its host path at submit. */
static void spec_gpulab_storage_add(struct spec_gpulab *g, const char *container, const char *host)
{
	struct spec_volume *v = &g->storage[g->n_storage];
	char *canon = NULL;

	*v = (struct spec_volume){ 0 };
	if (path_canon(&canon, container) < 0 || asprintf(&v->mount_path, "/%s", canon) < 0)
		v->mount_path = NULL;
	free(canon);
	canon = NULL;
	if (path_canon(&canon, host ? host : container) < 0 ||
	    asprintf(&v->host_path, "/%s", canon) < 0)
		v->host_path = NULL;
	free(canon);
	if (v->mount_path && v->host_path)
		g->n_storage++;
	else if (!strstr(host ? host : container, "..") && !strstr(container, ".."))
		g->c->nomem = true;
	if (!v->mount_path || !v->host_path) {
		free(v->mount_path);
		free(v->host_path);
	}
}

static void spec_gpulab_storage_entry(struct spec_gpulab *g, json_t *e, size_t i)
{
	char at[SPEC_PATH_MAX], field[SPEC_PATH_MAX];
	const char *path, *container = NULL, *host = NULL;
	int ret;

	snprintf(at, sizeof(at), "request.docker.storage[%zu]", i);
	if (!json_is_object(e)) {
		spec_gpulab_error(g, at, "must be an object like {\"containerPath\": \"/project\"}, got %s",
				  spec_json_type(e));
		return;
	}
	ret = spec_gpulab_string(g, e, at, "containerPath", &path);
	if (ret == 0)
		spec_gpulab_error(g, spec_path(field, at, "containerPath"), "missing");
	else if (ret > 0 && (path[0] != '/' || strstr(path, "..")))
		spec_gpulab_error(g, spec_path(field, at, "containerPath"),
				  "must be an absolute path (start with /) without \"..\"");
	else if (ret > 0)
		container = path;
	ret = spec_gpulab_string(g, e, at, "hostPath", &path);
	if (ret > 0 && (spec_blank(path) || path[0] != '/' || strstr(path, "..")))
		spec_gpulab_error(g, spec_path(field, at, "hostPath"),
				  "must be an absolute path (start with /) without \"..\"");
	else if (ret > 0)
		host = path;
	if (container && ret >= 0)
		spec_gpulab_storage_add(g, container, host);
}

static void spec_gpulab_storage(struct spec_gpulab *g, json_t *docker)
{
	json_t *list, *e;
	size_t i;

	if (spec_gpulab_array(g, docker, "request.docker", "storage", "objects", &list) <= 0)
		return;
	g->storage = calloc(json_array_size(list) + 1, sizeof(*g->storage));
	if (!g->storage) {
		g->c->nomem = true;
		return;
	}
	json_array_foreach(list, i, e)
		spec_gpulab_storage_entry(g, e, i);
}

static void spec_gpulab_port(struct spec_gpulab *g, json_t *e, size_t i)
{
	char at[SPEC_PATH_MAX], field[SPEC_PATH_MAX];
	long port;

	snprintf(at, sizeof(at), "request.docker.portMappings[%zu]", i);
	if (!json_is_object(e)) {
		spec_gpulab_error(g, at, "must be an object like {\"containerPort\": 80}, got %s",
				  spec_json_type(e));
		return;
	}
	if (spec_gpulab_long(g, e, at, "containerPort", 1, 65535, &port) == 0)
		spec_gpulab_error(g, spec_path(field, at, "containerPort"), "missing");
	spec_gpulab_long(g, e, at, "hostPort", 1, 65535, &port);
}

static void spec_gpulab_ports(struct spec_gpulab *g, json_t *docker)
{
	json_t *list, *e;
	size_t i;

	if (spec_gpulab_array(g, docker, "request.docker", "portMappings", "objects", &list) <= 0)
		return;
	json_array_foreach(list, i, e)
		spec_gpulab_port(g, e, i);
	if (json_array_size(list))
		spec_gpulab_ignore(g, "request.docker.portMappings",
				   "no container network; the command listens on the node's own ports");
}

static void spec_gpulab_docker(struct spec_gpulab *g, json_t *req)
{
	static const char *const known[] = {
		"image", "command", "environment", "storage", "portMappings",
		"projectGidVariableName", "userUidVariableName", NULL,
	};
	json_t *docker;
	int ret = spec_gpulab_object(g, req, "request", "docker", &docker);

	if (ret == 0)
		spec_gpulab_error(g, "request.docker", "missing; it holds the command to run");
	if (ret <= 0)
		return;
	if (!g->v1)
		spec_ignore_unknown(g->c, docker, "request.docker", known);
	spec_gpulab_image(g, docker);
	spec_gpulab_command(g, docker);
	spec_gpulab_environment(g, docker);
	spec_gpulab_storage(g, docker);
	spec_gpulab_ports(g, docker);
	spec_gpulab_id_var(g, docker, "projectGidVariableName", &g->gid_var);
	spec_gpulab_id_var(g, docker, "userUidVariableName", &g->uid_var);
}

/* ---- request.scheduling ---- */

static void spec_gpulab_scheduling(struct spec_gpulab *g, json_t *req)
{
	char path[SPEC_PATH_MAX];
	json_t *sched, *v;
	const char *key;
	bool interactive = false;

	if (spec_gpulab_object(g, req, "request", "scheduling", &sched) <= 0)
		return;
	if (spec_gpulab_bool(g, sched, "request.scheduling", "interactive", &interactive) > 0 &&
	    interactive)
		spec_gpulab_ignore(g, "request.scheduling.interactive",
				   "interactive jobs are not supported; the job is queued and runs as a batch job");
	json_object_foreach(sched, key, v) {
		if (strcmp(key, "interactive") != 0)
			spec_gpulab_ignore(g, spec_path(path, "request.scheduling", key),
					   "GPULab scheduling options are not supported");
	}
}

/* ---- the worker ---- */

static void spec_gpulab_env_add(struct spec_gpulab *g, struct spec_worker *w, const char *name,
				const char *value)
{
	w->env[w->n_env].name = spec_strdup(g->c, name);
	w->env[w->n_env++].value = spec_strdup(g->c, value);
}

/* The GPULAB_* variables known now, and the placeholders set at start. */
static void spec_gpulab_static_env(struct spec_gpulab *g, struct spec_worker *w)
{
	char buf[32];

	w->env = calloc(6, sizeof(*w->env));
	if (!w->env) {
		g->c->nomem = true;
		return;
	}
	if (w->res.cluster_id)
		spec_gpulab_env_add(g, w, "GPULAB_CLUSTER_ID", w->res.cluster_id);
	snprintf(buf, sizeof(buf), "%ld", w->res.cpu_count);
	spec_gpulab_env_add(g, w, "GPULAB_CPUS_RESERVED", buf);
	snprintf(buf, sizeof(buf), "%lldm", (long long)(w->res.memory_gb * 1000 + 0.5));
	spec_gpulab_env_add(g, w, "GPULAB_MEM_RESERVED", buf);
	spec_gpulab_env_add(g, w, "GPULAB_WORKER_ID", "0");
	if (g->gid_var)
		spec_gpulab_env_add(g, w, g->gid_var, SPEC_GPULAB_GID);
	if (g->uid_var)
		spec_gpulab_env_add(g, w, g->uid_var, SPEC_GPULAB_UID);
}

/* One worker with the command and resources; called only when all was well. */
static void spec_gpulab_build(struct spec_gpulab *g)
{
	struct spec *s = g->c->s;
	struct spec_worker *w;

	s->workers = calloc(1, sizeof(*s->workers));
	if (!s->workers) {
		g->c->nomem = true;
		return;
	}
	s->n_workers = 1;
	w = &s->workers[0];
	w->command = g->command;
	w->res = g->res;
	w->image = g->image;
	g->command = NULL;
	g->image = (struct spec_image){ 0 };
	g->res = (struct spec_resources){ 0 };
	w->volumes = g->storage;	/* GPULab's storage: its worker's sources */
	w->n_volumes = g->n_storage;
	g->storage = NULL;
	g->n_storage = 0;
	spec_gpulab_static_env(g, w);
}

/* Reads the version 2 request @root (converted from v1 when g->v1). */
static void spec_gpulab_request(struct spec_gpulab *g, json_t *root)
{
	static const char *const known[] = { "name", "description", "request", NULL };
	json_t *req;

	if (!g->v1)
		spec_ignore_unknown(g->c, root, "", known);
	spec_gpulab_name(g, root);
	spec_gpulab_description(g, root);
	if (spec_gpulab_object(g, root, "", "request", &req) <= 0)
		return;
	spec_gpulab_resources(g, req);
	spec_gpulab_docker(g, req);
	spec_gpulab_scheduling(g, req);
	if (!g->c->errors && !g->c->nomem)
		spec_gpulab_build(g);
}

static void spec_gpulab_parse(struct spec_ctx *c, json_t *root)
{
	struct spec_gpulab g = {
		.c = c,
		.res = { .gpu_type_substring = true, .memory_gb = -1, .disk_size_gb = 10,
			 .max_price = -1 },
	};
	json_t *jd = json_object_get(root, "jobDefinition");
	json_t *v2 = NULL;

	c->s->format = SPEC_GPULAB;
	c->s->type = SPEC_TRAINING;
	c->s->wait_timeout = -1;
	c->s->run_timeout = -1;
	if (jd && json_object_get(root, "request")) {
		spec_error(c, "jobDefinition",
			   "a GPULab job has either request (version 2) or jobDefinition (version 1), not both");
	} else if (jd) {
		g.v1 = true;
		spec_ignore_unknown(c, root, "", (const char *const[]){ "jobDefinition", NULL });
		v2 = spec_gpulab_from_v1(g.c, jd);
	} else if (!json_object_get(root, "request")) {
		spec_error(c, "request",
			   "missing; a GPULab job has request (version 2) or jobDefinition (version 1)");
	}
	if (!g.v1 || v2)
		spec_gpulab_request(&g, v2 ? v2 : root);
	json_decref(v2);
	free(g.command);
	spec_resources_free(&g.res);
	spec_image_free(&g.image);
	for (size_t i = 0; i < g.n_storage; i++) {
		free(g.storage[i].mount_path);
		free(g.storage[i].host_path);
	}
	free(g.storage);
}

/* ---- variables set when the worker starts ---- */

/* The job owner's uid and primary gid, from @user (a name or a uid); false when unknown. */
static bool spec_gpulab_owner(const char *user, uid_t *uid, gid_t *gid)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (!user || getpwnam_r(user, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return false;
	*uid = pw.pw_uid;
	*gid = pw.pw_gid;
	return true;
}

static void spec_gpulab_runtime_env(const struct spec *s, size_t w, const struct spec_runtime *rt,
			     spec_env_fn *set, void *arg)
{
	const struct spec_worker *sw = &s->workers[w];
	bool known;
	char buf[32];
	uid_t uid = 0;
	gid_t gid = 0;

	if (rt->job_id)
		set(arg, "GPULAB_JOB_ID", rt->job_id);
	if (rt->n_gpus) {
		snprintf(buf, sizeof(buf), "%u", rt->n_gpus[w]);
		set(arg, "GPULAB_GPUS_RESERVED", buf);
	}
	if (rt->user)
		set(arg, "GPULAB_USERNAME", rt->user);
	known = spec_gpulab_owner(rt->user, &uid, &gid);
	for (size_t i = 0; i < sw->n_env; i++) {
		bool is_gid = strcmp(sw->env[i].value, SPEC_GPULAB_GID) == 0;

		if (!is_gid && strcmp(sw->env[i].value, SPEC_GPULAB_UID) != 0)
			continue;
		snprintf(buf, sizeof(buf), "%u", is_gid ? (unsigned int)gid : (unsigned int)uid);
		set(arg, sw->env[i].name, known ? buf : "");
	}
}

/*
 * A member "request" (version 2) or "jobDefinition" (version 1), as
 * GPULab's documentation tells its versions apart.
 */
static bool spec_gpulab_detect(const json_t *root)
{
	return json_object_get(root, "request") || json_object_get(root, "jobDefinition");
}

const struct spec_format_ops spec_gpulab_format = {
	.name = "gpulab",
	.detect = spec_gpulab_detect,
	.parse = spec_gpulab_parse,
	.runtime_env = spec_gpulab_runtime_env,
};
