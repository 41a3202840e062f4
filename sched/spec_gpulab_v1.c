/*
 * spec_gpulab_v1.c - a GPULab version 1 job definition ("jobDefinition")
 * converted to the version 2 request spec_gpulab.c reads, as GPULab itself
 * does; the mapping of each field is at the top of spec_gpulab.c.  What
 * cannot be converted is reported through the parse context, at the
 * version 1 field.
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_int.h"

/* Copies member @from of @src to @to of @dst, when there. */
static void spec_gpulab_copy(struct spec_ctx *c, json_t *dst, const char *to, json_t *src,
			     const char *from)
{
	json_t *v = json_object_get(src, from);

	if (v && json_object_set(dst, to, v) < 0)
		c->nomem = true;
}

static void spec_gpulab_set_new(struct spec_ctx *c, json_t *dst, const char *to, json_t *v)
{
	if (!v || json_object_set_new(dst, to, v) < 0)
		c->nomem = true;
}

/* systemMemory in MB -> cpuMemoryGb; anything but a positive number is left for the v2 checks. */
static void spec_gpulab_v1_memory(struct spec_ctx *c, json_t *res, json_t *r1)
{
	json_t *mb = json_object_get(r1, "systemMemory");

	if (json_is_number(mb) && json_number_value(mb) > 0)
		spec_gpulab_set_new(c, res, "cpuMemoryGb", json_real(json_number_value(mb) / 1000));
	else
		spec_gpulab_copy(c, res, "cpuMemoryGb", r1, "systemMemory");
}

/* gpuModel: v1 gave one string; v2 wants a list. */
static void spec_gpulab_v1_gpu_model(struct spec_ctx *c, json_t *res, json_t *r1)
{
	json_t *m = json_object_get(r1, "gpuModel");

	if (!json_is_string(m)) {
		spec_gpulab_copy(c, res, "gpuModel", r1, "gpuModel");
	} else if (spec_blank(json_string_value(m))) {
		spec_error(c, "jobDefinition.resources.gpuModel",
			   "must not be empty; leave it out to accept any GPU model");
	} else {
		spec_gpulab_set_new(c, res, "gpuModel", json_pack("[O]", m));
	}
}

/* request.resources for @jd; NULL when it has none (or out of memory). */
static json_t *spec_gpulab_v1_resources(struct spec_ctx *c, json_t *jd)
{
	static const char *const known[] = {
		"gpus", "cpuCores", "systemMemory", "gpuModel", "minCudaVersion", NULL,
	};
	json_t *r1 = json_object_get(jd, "resources");
	json_t *res;

	if (!r1 || json_is_null(r1))
		return NULL;	/* the v2 checks say it is missing */
	if (!json_is_object(r1))
		return json_incref(r1);	/* and that it is no object */
	res = json_object();
	if (!res) {
		c->nomem = true;
		return NULL;
	}
	spec_ignore_unknown(c, r1, "jobDefinition.resources", known);
	spec_gpulab_copy(c, res, "clusterId", jd, "clusterId");
	spec_gpulab_copy(c, res, "gpus", r1, "gpus");
	spec_gpulab_copy(c, res, "cpus", r1, "cpuCores");
	spec_gpulab_copy(c, res, "minCudaVersion", r1, "minCudaVersion");
	spec_gpulab_v1_memory(c, res, r1);
	spec_gpulab_v1_gpu_model(c, res, r1);
	return res;
}

/* One jobDataLocations entry as a storage entry, or NULL after reporting. */
static json_t *spec_gpulab_v1_location(struct spec_ctx *c, json_t *loc, size_t i)
{
	char at[SPEC_PATH_MAX], field[SPEC_PATH_MAX];
	const char *mount, *host = NULL;
	int ret;

	snprintf(at, sizeof(at), "jobDefinition.jobDataLocations[%zu]", i);
	if (!json_is_object(loc)) {
		spec_error(c, at, "must be an object like {\"mountPoint\": \"/project\"}, got %s",
			   spec_json_type(loc));
		return NULL;
	}
	ret = spec_get_string(c, loc, at, "mountPoint", &mount);
	if (ret == 0)
		spec_error(c, spec_path(field, at, "mountPoint"), "missing");
	if (spec_get_string(c, loc, at, "sharePath", &host) < 0 ||
	    spec_get_string(c, loc, at, "hostPath", &host) < 0 || ret <= 0)
		return NULL;
	return host ? json_pack("{s:s, s:s}", "containerPath", mount, "hostPath", host)
		    : json_pack("{s:s}", "containerPath", mount);
}

static void spec_gpulab_v1_storage(struct spec_ctx *c, json_t *docker, json_t *jd)
{
	json_t *locs = json_object_get(jd, "jobDataLocations"), *storage, *loc, *e;
	size_t i;

	if (!json_is_array(locs)) {
		spec_gpulab_copy(c, docker, "storage", jd, "jobDataLocations");
		return;
	}
	storage = json_array();
	if (!storage) {
		c->nomem = true;
		return;
	}
	json_array_foreach(locs, i, loc) {
		e = spec_gpulab_v1_location(c, loc, i);
		if (e && json_array_append_new(storage, e) < 0)
			c->nomem = true;
	}
	spec_gpulab_set_new(c, docker, "storage", storage);
}

static json_t *spec_gpulab_v1_docker(struct spec_ctx *c, json_t *jd)
{
	static const char *const same[] = {
		"command", "environment", "portMappings", "projectGidVariableName",
		"userUidVariableName", NULL,
	};
	json_t *docker = json_object();

	if (!docker) {
		c->nomem = true;
		return NULL;
	}
	spec_gpulab_copy(c, docker, "image", jd, "dockerImage");
	for (int i = 0; same[i]; i++)
		spec_gpulab_copy(c, docker, same[i], jd, same[i]);
	spec_gpulab_v1_storage(c, docker, jd);
	return docker;
}

/*
 * The version 2 request (a new reference) for the version 1 definition
 * @jd, or NULL after reporting why not.
 */
json_t *spec_gpulab_from_v1(struct spec_ctx *c, json_t *jd)
{
	static const char *const known[] = {
		"name", "description", "clusterId", "resources", "dockerImage", "command",
		"environment", "jobDataLocations", "portMappings", "projectGidVariableName",
		"userUidVariableName", NULL,
	};
	json_t *root, *req, *res;

	if (!json_is_object(jd)) {
		spec_error(c, "jobDefinition", "must be an object, got %s", spec_json_type(jd));
		return NULL;
	}
	spec_ignore_unknown(c, jd, "jobDefinition", known);
	root = json_object();
	req = json_object();
	spec_gpulab_set_new(c, root, "request", req);
	if (!root || !req)
		return root;	/* nomem is set */
	spec_gpulab_copy(c, root, "name", jd, "name");
	spec_gpulab_copy(c, root, "description", jd, "description");
	res = spec_gpulab_v1_resources(c, jd);
	if (res)
		spec_gpulab_set_new(c, req, "resources", res);
	spec_gpulab_set_new(c, req, "docker", spec_gpulab_v1_docker(c, jd));
	return root;
}
