/*
 * spec_native.c - the native spec format: proxiML's job sections as JSON.
 *
 * The top-level members are checked in the order the spec lists them, one
 * small function each (spec_native_fields); then spec_native_finish applies
 * the defaults that depend on several fields (gpu_count from gpu_types,
 * cpu_count from gpu_count), checks the rules that span fields (a CPU-only
 * cpu_count is a multiple of 4; worker_count needs exactly one workers
 * entry; a job needs workers and a name; data.input needs an inference
 * job), and, only when nothing was wrong, builds the workers, each with a
 * copy of the job's resources.
 *
 * Choices where the rules are silent:
 * - null means absent, for every optional field ("max_price": null is no
 *   limit), so specs exported by tools that write every key still read.
 * - A workers entry may be a bare string, proxiML's SDK shorthand for
 *   {"command": "..."}.  At most 1024 workers, as for worker_count.
 * - Integers accept integral reals (2.0); JSON does not tell them apart.
 * - resources.gpu_types must list at least one type when given, and then
 *   gpu_count may not be 0 (a CPU-only job names no GPU type).
 * - Environment variable values: strings; integers and booleans become
 *   their JSON text ("8", "true"); reals and anything else are refused, so
 *   no float formatting silently changes what the user wrote.
 * - min_cuda_version: "MAJOR[.MINOR[.PATCH]]", or a number, stored as its
 *   shortest text (11.8 -> "11.8"; write "12.10" as a string).
 * - Paths: local paths must be absolute (proxiML's "~/" and "$VAR" forms
 *   name the submitter's machine, not the node); URL paths need something
 *   after the scheme (s3:// needs a bucket).
 * - data, model and checkpoints fill struct spec_data, types and paths
 *   as written, once their shape is right.  A name listed twice in
 *   data.datasets or checkpoints is an error (the view could not show
 *   both); each lists at most 1024 names, as workers.
 *   data.input is for inference jobs only (checked at the end, as "type"
 *   may come later in the file).  A model of type git is a repository
 *   (https://, git://, git+...: the git backend), "#REF" naming its commit.
 *   data.output.archive applies to s3, gcp, azure and local outputs (default
 *   true); given for another type it is listed as ignored, and
 *   data.output.archive is false, which is what happens.
 * - environment.image (or proxiML's SDK name custom_image) is every
 *   worker's container image; environment.python_version, framework and
 *   framework_version ask for a base environment instead, which the
 *   scheduler resolves to an [environment NAME] of its config
 *   (spec_env.c): one or the other, not both.  environment.packages (apt,
 *   conda, pip: one package an entry) needs one of them.  proxiML's
 *   environment.type and worker_key_types are listed as ignored.  Unknown
 *   fields are listed as ignored, not refused.
 *
 * What it does not do: decide whether a GPU type or dataset exists (the
 * scheduler and the data sources know that).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "spec_int.h"

#define SPEC_NATIVE_MAX_WORKERS 1024
#define SPEC_NATIVE_MAX_NAMES 1024	/* datasets, checkpoints; keeps the duplicate check cheap */

/* What the pass over the fields found, for spec_native_finish. */
struct spec_native {
	struct spec_ctx *c;
	struct spec_resources res;	/* the job's; copied to each worker */
	bool has_gpu_count, has_cpu_count, res_bad;
	const char *name;		/* borrowed; NULL: absent */
	bool name_bad;
	bool type_bad;
	bool has_input;			/* data.input given; for inference jobs only */
	const char **cmds;		/* borrowed; one per workers entry */
	size_t n_cmds;
	bool has_workers;
	long worker_count;		/* 0: not given */
	bool worker_count_bad;
	struct spec_image image;	/* environment.image; copied to each worker */
};

/* ---- name, type, counts ---- */

static void spec_native_name(struct spec_native *n, json_t *root)
{
	n->name_bad = spec_get_string(n->c, root, "", "name", &n->name) < 0;
}

static void spec_native_type(struct spec_native *n, json_t *root)
{
	char shown[SPEC_SHOW_MAX];
	const char *t;
	int ret;

	ret = spec_get_string(n->c, root, "", "type", &t);
	n->type_bad = ret < 0;
	if (ret <= 0)
		return;
	if (strcmp(t, "training") == 0) {
		n->c->s->type = SPEC_TRAINING;
	} else if (strcmp(t, "inference") == 0) {
		n->c->s->type = SPEC_INFERENCE;
	} else {
		spec_error(n->c, "type", "must be \"training\" or \"inference\", got \"%s\"",
			   spec_show(shown, t));
		n->type_bad = true;
	}
}

static void spec_native_retry(struct spec_native *n, json_t *root)
{
	spec_get_long(n->c, root, "", "retry_count", 0, LONG_MAX, &n->c->s->retry_count);
}

static void spec_native_wait(struct spec_native *n, json_t *root)
{
	spec_get_long(n->c, root, "", "wait_timeout_seconds", 1, LONG_MAX, &n->c->s->wait_timeout);
}

static void spec_native_run(struct spec_native *n, json_t *root)
{
	spec_get_long(n->c, root, "", "run_timeout_seconds", 1, LONG_MAX, &n->c->s->run_timeout);
}

static void spec_native_worker_count(struct spec_native *n, json_t *root)
{
	n->worker_count_bad = spec_get_long(n->c, root, "", "worker_count", 1,
					    SPEC_NATIVE_MAX_WORKERS, &n->worker_count) < 0;
}

/* ---- resources ---- */

static void spec_native_gpu_types(struct spec_native *n, json_t *r)
{
	json_t *types, *t;
	size_t i;

	int ret = spec_get_strings(n->c, r, "resources", "gpu_types", &types);

	n->res_bad |= ret < 0;
	if (ret <= 0)
		return;
	if (json_array_size(types) == 0) {
		spec_error(n->c, "resources.gpu_types",
			   "must list at least one GPU type; leave it out for any type or a CPU-only job");
		n->res_bad = true;
		return;
	}
	n->res.gpu_types = calloc(json_array_size(types), sizeof(char *));
	if (!n->res.gpu_types) {
		n->c->nomem = true;
		return;
	}
	json_array_foreach(types, i, t)
		n->res.gpu_types[n->res.n_gpu_types++] = spec_strdup(n->c, json_string_value(t));
}

static void spec_native_cuda(struct spec_native *n, json_t *r)
{
	json_t *v = json_object_get(r, "min_cuda_version");
	const char *s = json_string_value(v);
	char buf[64], shown[SPEC_SHOW_MAX];
	unsigned a, b, c;
	int end = 0;

	if (json_is_integer(v) || json_is_real(v)) {
		snprintf(buf, sizeof(buf), "%g", json_number_value(v));
		s = buf;
	} else if (!v || json_is_null(v)) {
		return;
	} else if (!s) {
		spec_error(n->c, "resources.min_cuda_version", "must be a version like \"11.8\", got %s",
			   spec_json_type(v));
		return;
	}
	if (!(sscanf(s, "%u%n.%u%n.%u%n", &a, &end, &b, &end, &c, &end) >= 1 && !s[end] &&
	      strspn(s, "0123456789.") == strlen(s))) {
		spec_error(n->c, "resources.min_cuda_version", "must be a version like \"11.8\", got \"%s\"",
			   spec_show(shown, s));
		return;
	}
	n->res.min_cuda_version = spec_strdup(n->c, s);
}

static void spec_native_res_numbers(struct spec_native *n, json_t *r)
{
	struct spec_ctx *c = n->c;
	int ret;

	ret = spec_get_long(c, r, "resources", "gpu_count", 0, LONG_MAX, &n->res.gpu_count);
	n->has_gpu_count = ret > 0;
	n->res_bad |= ret < 0;
	ret = spec_get_long(c, r, "resources", "cpu_count", 1, LONG_MAX, &n->res.cpu_count);
	n->has_cpu_count = ret > 0;
	n->res_bad |= ret < 0;
	if (spec_get_double(c, r, "resources", "memory_gb", &n->res.memory_gb) > 0 &&
	    n->res.memory_gb <= 0) {
		spec_error(c, "resources.memory_gb", "must be more than 0, got %g", n->res.memory_gb);
		n->res.memory_gb = -1;
	}
	spec_get_long(c, r, "resources", "disk_size_gb", 10, 1000, &n->res.disk_size_gb);
	if (spec_get_double(c, r, "resources", "max_price", &n->res.max_price) > 0 &&
	    n->res.max_price < 0) {
		spec_error(c, "resources.max_price", "must be at least 0, got %g", n->res.max_price);
		n->res.max_price = -1;
	}
}

static void spec_native_resources(struct spec_native *n, json_t *root)
{
	static const char *const known[] = {
		"gpu_types", "gpu_count", "cpu_count", "memory_gb", "disk_size_gb",
		"max_price", "min_cuda_version", NULL,
	};
	json_t *r;

	if (spec_get_object(n->c, root, "", "resources", &r) <= 0)
		return;
	spec_ignore_unknown(n->c, r, "resources", known);
	spec_native_gpu_types(n, r);
	spec_native_res_numbers(n, r);
	spec_native_cuda(n, r);
}

/* Defaults that depend on other fields, and the rules across them. */
static void spec_native_res_finish(struct spec_native *n)
{
	struct spec_resources *r = &n->res;

	if (!n->has_gpu_count)
		r->gpu_count = r->n_gpu_types ? 1 : 0;
	else if (r->gpu_count == 0 && r->n_gpu_types)
		spec_error(n->c, "resources.gpu_count",
			   "is 0 but gpu_types lists %zu GPU type(s); leave gpu_types out for a CPU-only job",
			   r->n_gpu_types);
	if (!n->has_cpu_count)
		r->cpu_count = r->gpu_count ? r->gpu_count : 4;
	else if (r->gpu_count == 0 && !n->res_bad && r->cpu_count % 4)
		spec_error(n->c, "resources.cpu_count",
			   "a CPU-only job needs a multiple of 4 CPUs, got %ld", r->cpu_count);
}

/* ---- data, model, checkpoints ---- */

enum spec_native_rule { SPEC_URL, SPEC_ABSOLUTE, SPEC_DATASTORE, SPEC_NAME };

/* A location type and what its path must look like. */
struct spec_native_kind {
	const char *type;
	enum spec_native_rule rule;
	const char *prefixes[4];	/* SPEC_URL: any of these, then more */
};

static const struct spec_native_kind spec_native_outputs[] = {
	{ .type = "s3", .rule = SPEC_URL, .prefixes = { "s3://" } },
	{ .type = "gcp", .rule = SPEC_URL, .prefixes = { "gs://" } },
	{ .type = "azure", .rule = SPEC_URL, .prefixes = { "https://" } },
	{ .type = "datastore", .rule = SPEC_DATASTORE },
	{ .type = "local", .rule = SPEC_ABSOLUTE },
	{ .type = "dataset", .rule = SPEC_NAME },
	{ .type = "checkpoint", .rule = SPEC_NAME },
	{ .type = "model", .rule = SPEC_NAME },
	{ .type = NULL },
};

/* wasabi, gcp and azure through the s3, gcs and http backends; web's ftp(s):// through ftp. */
static const struct spec_native_kind spec_native_inputs[] = {
	{ .type = "s3", .rule = SPEC_URL, .prefixes = { "s3://" } },
	{ .type = "wasabi", .rule = SPEC_URL, .prefixes = { "s3://" } },
	{ .type = "azure", .rule = SPEC_URL, .prefixes = { "https://" } },
	{ .type = "gcp", .rule = SPEC_URL, .prefixes = { "gs://" } },
	{ .type = "web", .rule = SPEC_URL, .prefixes = { "http://", "https://", "ftp://", "ftps://" } },
	{ .type = "datastore", .rule = SPEC_DATASTORE },
	{ .type = "local", .rule = SPEC_ABSOLUTE },
	{ .type = NULL },
};

static const struct spec_native_kind spec_native_models[] = {
	{ .type = "datastore", .rule = SPEC_DATASTORE },
	{ .type = "s3", .rule = SPEC_URL, .prefixes = { "s3://" } },
	{ .type = "http", .rule = SPEC_URL, .prefixes = { "http://", "https://" } },
	{ .type = "git", .rule = SPEC_URL, .prefixes = { "https://", "http://", "git://", "git+" } },
	{ .type = "local", .rule = SPEC_ABSOLUTE },
	{ .type = "model", .rule = SPEC_NAME },
	{ .type = NULL },
};

/*
 * The index of the prefix of @k that @path starts with and goes on past,
 * or -1.
 */
static int spec_native_url_prefix(const struct spec_native_kind *k, const char *path)
{
	for (int i = 0; i < 4 && k->prefixes[i]; i++) {
		size_t len = strlen(k->prefixes[i]);

		if (strncmp(path, k->prefixes[i], len) == 0 && path[len] && path[len] != '/')
			return i;
	}
	return -1;
}

/* true for NAME:/folder. */
static bool spec_native_datastore_ok(const char *path)
{
	size_t name = strcspn(path, ":/");

	return name > 0 && path[name] == ':' && path[name + 1] == '/';
}

/* What a path of kind @k must look like, for a message. */
static void spec_native_expect(const struct spec_native_kind *k, char *buf, size_t size)
{
	size_t used = 0;

	switch (k->rule) {
	case SPEC_URL:
		used = (size_t)snprintf(buf, size, "must start with ");
		for (int i = 0; i < 4 && k->prefixes[i] && used < size; i++)
			used += (size_t)snprintf(buf + used, size - used, "%s%s",
						 i ? " or " : "", k->prefixes[i]);
		break;
	case SPEC_ABSOLUTE:
		snprintf(buf, size, "must be an absolute path (start with /)");
		break;
	case SPEC_DATASTORE:
		snprintf(buf, size, "must be NAME:/folder, NAME a configured datastore");
		break;
	case SPEC_NAME:
		snprintf(buf, size, "must be the %s's name", k->type);
		break;
	}
}

static bool spec_native_path_ok(const struct spec_native_kind *k, const char *path)
{
	switch (k->rule) {
	case SPEC_URL:
		return spec_native_url_prefix(k, path) >= 0;
	case SPEC_ABSOLUTE:
		return path[0] == '/';
	case SPEC_DATASTORE:
		return spec_native_datastore_ok(path);
	default:
		return !spec_blank(path);
	}
}

/* The kind named @type in @kinds, or NULL after reporting the choices. */
static const struct spec_native_kind *spec_native_kind(struct spec_ctx *c, const char *at,
							const struct spec_native_kind *kinds,
							const char *type)
{
	char choices[160] = "", shown[SPEC_SHOW_MAX], field[SPEC_PATH_MAX];
	size_t used = 0;

	for (const struct spec_native_kind *k = kinds; k->type; k++) {
		if (strcmp(k->type, type) == 0)
			return k;
		used += (size_t)snprintf(choices + used, sizeof(choices) - used, "%s%s",
					 used ? ", " : "", k->type);
	}
	spec_error(c, spec_path(field, at, "type"), "must be one of %s, got \"%s\"", choices,
		   spec_show(shown, type));
	return NULL;
}

/*
 * Checks @path at @at.path against kind @k; true when it has the shape
 * @k demands and mlfs can fetch it.
 */
static bool spec_native_path_check(struct spec_ctx *c, const char *at,
				   const struct spec_native_kind *k, const char *path)
{
	char field[SPEC_PATH_MAX], expect[128], shown[SPEC_SHOW_MAX];

	spec_path(field, at, "path");
	if (!spec_native_path_ok(k, path)) {
		spec_native_expect(k, expect, sizeof(expect));
		spec_error(c, field, "a %s path %s, got \"%s\"", k->type, expect,
			   spec_show(shown, path));
		return false;
	}
	return true;
}

/*
 * Checks {type, path} at @at against @kinds (@extra: one more known
 * member) and, when both are good, copies them into @loc.  Returns the
 * kind, or NULL when the type is missing, unknown or refused.
 */
static const struct spec_native_kind *spec_native_location(struct spec_ctx *c, json_t *obj,
							    const char *at,
							    const struct spec_native_kind *kinds,
							    const char *extra,
							    struct spec_location *loc)
{
	const char *known[] = { "type", "path", extra, NULL };
	char field[SPEC_PATH_MAX];
	const struct spec_native_kind *k = NULL;
	const char *type, *path;
	int has_type, has_path;

	spec_ignore_unknown(c, obj, at, known);
	has_type = spec_get_string(c, obj, at, "type", &type);
	has_path = spec_get_string(c, obj, at, "path", &path);
	if (has_type == 0)
		spec_error(c, spec_path(field, at, "type"), "missing");
	if (has_path == 0)
		spec_error(c, spec_path(field, at, "path"), "missing");
	if (has_type > 0)
		k = spec_native_kind(c, at, kinds, type);
	if (!k || has_path <= 0 || !spec_native_path_check(c, at, k, path))
		return k;
	loc->type = spec_strdup(c, type);
	loc->path = spec_strdup(c, path);
	return k;
}

/*
 * Copies the array of names at @parent.KEY into *@out, refusing a name
 * listed twice (at its later index) and more than SPEC_NATIVE_MAX_NAMES
 * names (the check for twice is quadratic, and anyone may submit).
 */
static void spec_native_names(struct spec_ctx *c, json_t *obj, const char *parent,
			      const char *key, char ***out, size_t *n)
{
	char field[SPEC_PATH_MAX], elem[SPEC_PATH_MAX + 24], shown[SPEC_SHOW_MAX];
	json_t *names;
	size_t i, j;

	if (spec_get_strings(c, obj, parent, key, &names) <= 0 || json_array_size(names) == 0)
		return;
	spec_path(field, parent, key);
	if (json_array_size(names) > SPEC_NATIVE_MAX_NAMES) {
		spec_error(c, field, "must list at most %d names, got %zu", SPEC_NATIVE_MAX_NAMES,
			   json_array_size(names));
		return;
	}
	*out = calloc(json_array_size(names), sizeof(char *));
	if (!*out) {
		c->nomem = true;
		return;
	}
	for (i = 0; i < json_array_size(names); i++) {
		const char *name = json_string_value(json_array_get(names, i));

		for (j = 0; j < i && strcmp(json_string_value(json_array_get(names, j)), name); j++)
			;
		if (j < i) {
			snprintf(elem, sizeof(elem), "%s[%zu]", field, i);
			spec_error(c, elem, "\"%s\" is listed twice", spec_show(shown, name));
			continue;
		}
		(*out)[(*n)++] = spec_strdup(c, name);
	}
}

/* data.output: a location, and whether it is zipped (its spec_output_kind's zips). */
static void spec_native_output(struct spec_ctx *c, json_t *io)
{
	struct spec_location *out = &c->s->data.output;
	const struct spec_native_kind *k;
	bool archive = true, zips;
	int has_archive;

	k = spec_native_location(c, io, "data.output", spec_native_outputs, "archive", out);
	has_archive = spec_get_bool(c, io, "data.output", "archive", &archive);
	if (!k)
		return;
	zips = spec_output_kind(k->type) && spec_output_kind(k->type)->zips;
	out->archive = zips && archive;
	if (has_archive > 0 && !zips)
		spec_ignore(c, "data.output.archive: only s3 and local outputs are zipped; a %s output is always plain files",
			    k->type);
}

static void spec_native_data(struct spec_native *n, json_t *root)
{
	static const char *const known[] = { "datasets", "input", "output", NULL };
	struct spec_ctx *c = n->c;
	struct spec_data *d = &c->s->data;
	json_t *data, *io;

	if (spec_get_object(c, root, "", "data", &data) <= 0)
		return;
	spec_ignore_unknown(c, data, "data", known);
	spec_native_names(c, data, "data", "datasets", &d->datasets, &d->n_datasets);
	if (spec_get_object(c, data, "data", "input", &io) > 0) {
		n->has_input = true;
		spec_native_location(c, io, "data.input", spec_native_inputs, NULL, &d->input);
	}
	if (spec_get_object(c, data, "data", "output", &io) > 0)
		spec_native_output(c, io);
}

static void spec_native_model(struct spec_native *n, json_t *root)
{
	json_t *model;

	if (spec_get_object(n->c, root, "", "model", &model) > 0)
		spec_native_location(n->c, model, "model", spec_native_models, NULL,
				     &n->c->s->data.model);
}

static void spec_native_checkpoints(struct spec_native *n, json_t *root)
{
	struct spec_data *d = &n->c->s->data;

	spec_native_names(n->c, root, "", "checkpoints", &d->checkpoints, &d->n_checkpoints);
}

/* ---- workers ---- */

/* The command of workers[@i] (@w), or NULL after reporting why not. */
static const char *spec_native_command(struct spec_ctx *c, size_t i, json_t *w)
{
	static const char *const known[] = { "command", NULL };
	char at[SPEC_PATH_MAX], field[SPEC_PATH_MAX];
	const char *cmd = json_string_value(w);
	int ret;

	snprintf(at, sizeof(at), "workers[%zu]", i);
	spec_path(field, at, "command");
	if (json_is_object(w)) {
		spec_ignore_unknown(c, w, at, known);
		ret = spec_get_string(c, w, at, "command", &cmd);
		if (ret == 0)
			spec_error(c, field, "missing");
		if (ret <= 0)
			return NULL;
	} else if (!cmd) {
		spec_error(c, at, "must be an object like {\"command\": \"...\"} or a string, got %s",
			   spec_json_type(w));
		return NULL;
	}
	if (spec_blank(cmd)) {
		spec_error(c, json_is_object(w) ? field : at, "must not be empty or only whitespace");
		return NULL;
	}
	return cmd;
}

static void spec_native_workers(struct spec_native *n, json_t *root)
{
	json_t *a = json_object_get(root, "workers"), *w;
	size_t i, len = json_array_size(a);

	if (json_is_null(a))
		return;
	n->has_workers = true;
	if (!json_is_array(a)) {
		spec_error(n->c, "workers", "must be an array like [{\"command\": \"...\"}], got %s",
			   spec_json_type(a));
		return;
	}
	if (len == 0 || len > SPEC_NATIVE_MAX_WORKERS) {
		spec_error(n->c, "workers", "must list 1 to %d workers, got %zu",
			   SPEC_NATIVE_MAX_WORKERS, len);
		return;
	}
	n->cmds = calloc(len, sizeof(*n->cmds));
	if (!n->cmds) {
		n->c->nomem = true;
		return;
	}
	n->n_cmds = len;
	json_array_foreach(a, i, w)
		n->cmds[i] = spec_native_command(n->c, i, w);
}

/* ---- environment ---- */

static bool spec_native_var_name_ok(const char *name)
{
	return (name[0] == '_' || (name[0] >= 'A' && name[0] <= 'Z') ||
		(name[0] >= 'a' && name[0] <= 'z')) &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
	       strlen(name);
}

/* The value of a variable as text (malloc'd), or NULL after reporting. */
static char *spec_native_var_value(struct spec_ctx *c, const char *name, json_t *v)
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
		spec_error_key(c, "environment.variables", name,
			       "must be a string, got %s%s", spec_json_type(v),
			       json_is_real(v) ? " (quote it to keep its exact text)" : "");
		return NULL;
	}
	if (!text)
		c->nomem = true;
	return text;
}

static void spec_native_variables(struct spec_native *n, json_t *vars)
{
	struct spec *s = n->c->s;
	const char *name;
	json_t *v;

	s->env = calloc(json_object_size(vars) ? json_object_size(vars) : 1, sizeof(*s->env));
	if (!s->env) {
		n->c->nomem = true;
		return;
	}
	json_object_foreach(vars, name, v) {
		char *value;

		if (!spec_native_var_name_ok(name)) {
			spec_error_key(n->c, "environment.variables", name,
				       "a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$");
			continue;
		}
		value = spec_native_var_value(n->c, name, v);
		if (!value)
			continue;
		s->env[s->n_env].value = value;
		s->env[s->n_env++].name = spec_strdup(n->c, name);
	}
}

/*
 * One list of environment.packages: each entry one package, as its tool
 * reads it ("numpy==1.26.4", "libgl1=1.6.0-1"), handed to the tool as one
 * argument, so no blank, no control character, no leading '-'.
 */
static void spec_native_package_list(struct spec_ctx *c, json_t *p, const char *tool,
				     char ***out, size_t *n_out)
{
	char path[64], shown[SPEC_SHOW_MAX];
	json_t *list, *e;
	size_t i;

	if (spec_get_strings(c, p, "environment.packages", tool, &list) <= 0)
		return;
	if (json_array_size(list) > SPEC_NATIVE_MAX_NAMES) {
		spec_error(c, "environment.packages", "%s lists %zu packages; at most %d", tool,
			   json_array_size(list), SPEC_NATIVE_MAX_NAMES);
		return;
	}
	*out = calloc(json_array_size(list) + 1, sizeof(char *));
	if (!*out) {
		c->nomem = true;
		return;
	}
	json_array_foreach(list, i, e) {
		const char *name = json_string_value(e);
		bool odd = false;

		for (const char *ch = name; *ch; ch++)
			odd |= (unsigned char)*ch <= ' ' || *ch == 0x7f;
		snprintf(path, sizeof(path), "environment.packages.%s[%zu]", tool, i);
		if (name[0] == '-')
			spec_error(c, path, "\"%s\" starts with '-': a package, not an option of %s",
				   spec_show(shown, name), tool);
		else if (odd || strlen(name) > 512)
			spec_error(c, path, "\"%s\" is not one package name: one entry per package, "
				   "without blanks, such as \"numpy==1.26.4\"", spec_show(shown, name));
		else
			(*out)[(*n_out)++] = spec_strdup(c, name);
	}
}

static void spec_native_packages(struct spec_native *n, json_t *env)
{
	static const char *const known[] = { "apt", "pip", "conda", NULL };
	struct spec_packages *pk = &n->c->s->packages;
	json_t *p;

	if (spec_get_object(n->c, env, "environment", "packages", &p) <= 0)
		return;
	spec_ignore_unknown(n->c, p, "environment.packages", known);
	spec_native_package_list(n->c, p, "apt", &pk->apt, &pk->n_apt);
	spec_native_package_list(n->c, p, "conda", &pk->conda, &pk->n_conda);
	spec_native_package_list(n->c, p, "pip", &pk->pip, &pk->n_pip);
}

/*
 * A version of the base environment: numbers joined by dots as a string, or
 * a JSON number (its shortest text: write "3.10" as a string).  NULL when
 * absent or bad (reported).
 */
static char *spec_native_version(struct spec_ctx *c, json_t *env, const char *key)
{
	json_t *v = json_object_get(env, key);
	char buf[64], path[64], shown[SPEC_SHOW_MAX];
	const char *s = json_string_value(v);

	snprintf(path, sizeof(path), "environment.%s", key);
	if (json_is_integer(v) || json_is_real(v)) {
		snprintf(buf, sizeof(buf), "%g", json_number_value(v));
		s = buf;
	} else if (!v || json_is_null(v)) {
		return NULL;
	} else if (!s) {
		spec_error(c, path, "must be a version like \"3.11\", got %s", spec_json_type(v));
		return NULL;
	}
	if (!config_dotted_version(s)) {
		spec_error(c, path, "must be a version like \"3.11\", got \"%s\"", spec_show(shown, s));
		return NULL;
	}
	return spec_strdup(c, s);
}

/* proxiML's base environment: python_version, framework, framework_version. */
static void spec_native_base_env(struct spec_native *n, json_t *env)
{
	struct spec_base_env *b = &n->c->s->base_env;
	const char *fw;
	int ret;

	b->python_version = spec_native_version(n->c, env, "python_version");
	ret = spec_get_string(n->c, env, "environment", "framework", &fw);
	if (ret > 0 && spec_blank(fw))
		spec_error(n->c, "environment.framework", "must not be empty");
	else if (ret > 0)
		b->framework = spec_strdup(n->c, fw);
	b->framework_version = spec_native_version(n->c, env, "framework_version");
	if (b->framework_version && ret == 0)
		spec_error(n->c, "environment.framework_version",
			   "a framework's version needs environment.framework");
	if (b->python_version || b->framework || b->framework_version)
		b->field = spec_strdup(n->c, b->python_version ? "environment.python_version" :
				       b->framework ? "environment.framework" :
				       "environment.framework_version");
}

/*
 * environment.image, proxiML's Customer Provided image (its SDK calls it
 * custom_image: either name, not both), for every worker.
 */
static void spec_native_image(struct spec_native *n, json_t *env)
{
	const char *image = NULL, *custom = NULL;
	int a = spec_get_string(n->c, env, "environment", "image", &image);
	int b = spec_get_string(n->c, env, "environment", "custom_image", &custom);

	if (a > 0 && b > 0)
		spec_error(n->c, "environment.custom_image", "the same as environment.image: give one");
	else if (a > 0)
		spec_set_image(n->c, &n->image, "environment.image", image, false);
	else if (b > 0)
		spec_set_image(n->c, &n->image, "environment.custom_image", custom, false);
}

/*
 * A base environment or a Customer Provided image, not both (proxiML's
 * form offers one or the other); packages need one of them to go into.
 */
static void spec_native_env_rules(struct spec_native *n)
{
	const struct spec *s = n->c->s;
	const struct spec_packages *pk = &s->packages;

	if (s->base_env.field && n->image.ref)
		spec_error(n->c, s->base_env.field, "a base environment and %s exclude each other: "
			   "give one (%s is proxiML's Customer Provided image)", n->image.ref_field,
			   n->image.ref_field);
	else if (pk->n_apt + pk->n_conda + pk->n_pip && !s->base_env.field && !n->image.ref)
		spec_error(n->c, "environment.packages", "they are installed in the job's image, and "
			   "it names none: give environment.image, or a base environment "
			   "(environment.python_version, framework, framework_version)");
}

static void spec_native_environment(struct spec_native *n, json_t *root)
{
	static const char *const known[] = {
		"variables", "packages", "type", "image", "custom_image", "worker_key_types",
		"python_version", "framework", "framework_version", NULL,
	};
	struct spec_ctx *c = n->c;
	json_t *env, *vars, *list;
	const char *text;

	if (spec_get_object(c, root, "", "environment", &env) <= 0)
		return;
	spec_ignore_unknown(c, env, "environment", known);
	if (spec_get_object(c, env, "environment", "variables", &vars) > 0)
		spec_native_variables(n, vars);
	spec_native_packages(n, env);
	if (spec_get_string(c, env, "environment", "type", &text) > 0)
		spec_ignore(c, "environment.type: not used; workers run in the node's own environment");
	spec_native_image(n, env);
	spec_native_base_env(n, env);
	if (spec_get_strings(c, env, "environment", "worker_key_types", &list) > 0)
		spec_ignore(c, "environment.worker_key_types: third-party keys are not yet supported");
	spec_native_env_rules(n);
}

/* ---- the whole spec ---- */

static const struct spec_native_field {
	const char *key;
	void (*check)(struct spec_native *n, json_t *root);
} spec_native_fields[] = {
	{ "name", spec_native_name },
	{ "type", spec_native_type },
	{ "resources", spec_native_resources },
	{ "data", spec_native_data },
	{ "model", spec_native_model },
	{ "checkpoints", spec_native_checkpoints },
	{ "workers", spec_native_workers },
	{ "worker_count", spec_native_worker_count },
	{ "environment", spec_native_environment },
	{ "retry_count", spec_native_retry },
	{ "wait_timeout_seconds", spec_native_wait },
	{ "run_timeout_seconds", spec_native_run },
};

#define SPEC_NATIVE_N_FIELDS (sizeof(spec_native_fields) / sizeof(spec_native_fields[0]))

/* Gives each worker its command and a copy of the job's resources. */
static void spec_native_build(struct spec_native *n)
{
	struct spec *s = n->c->s;
	size_t count = n->worker_count ? (size_t)n->worker_count : n->n_cmds;

	s->workers = calloc(count, sizeof(*s->workers));
	if (!s->workers) {
		n->c->nomem = true;
		return;
	}
	s->n_workers = count;
	for (size_t i = 0; i < count; i++) {
		struct spec_worker *w = &s->workers[i];

		w->command = spec_strdup(n->c, n->cmds[n->worker_count ? 0 : i]);
		spec_copy_image(n->c, &w->image, &n->image);
		w->res = n->res;
		w->res.gpu_types = calloc(n->res.n_gpu_types + 1, sizeof(char *));
		w->res.n_gpu_types = 0;
		w->res.min_cuda_version = NULL;
		if (!w->res.gpu_types) {
			n->c->nomem = true;
			return;
		}
		for (size_t t = 0; t < n->res.n_gpu_types; t++)
			w->res.gpu_types[w->res.n_gpu_types++] = spec_strdup(n->c, n->res.gpu_types[t]);
		if (n->res.min_cuda_version)
			w->res.min_cuda_version = spec_strdup(n->c, n->res.min_cuda_version);
	}
}

static void spec_native_finish(struct spec_native *n)
{
	struct spec_ctx *c = n->c;

	if (!n->name_bad)
		spec_set_name(c, n->name, "name");
	spec_native_res_finish(n);
	if (n->has_input && !n->type_bad && c->s->type != SPEC_INFERENCE)
		spec_error(c, "data.input",
			   "only an inference job takes an input; set \"type\": \"inference\" or list datasets");
	if (!n->has_workers)
		spec_error(c, "workers", "missing; a job needs at least one worker, e.g. \"workers\": [{\"command\": \"python train.py\"}]");
	else if (n->worker_count && n->n_cmds && n->n_cmds != 1)
		spec_error(c, "worker_count",
			   "%ld workers repeat the one command of workers, but workers has %zu entries; give one entry, or leave worker_count out",
			   n->worker_count, n->n_cmds);
	if (!c->errors && !c->nomem)
		spec_native_build(n);
}

static void spec_native_parse(struct spec_ctx *c, json_t *root)
{
	struct spec_native n = {
		.c = c,
		.res = { .memory_gb = -1, .disk_size_gb = 10, .max_price = -1 },
	};
	struct key_hint h;
	const char *key;
	json_t *v;
	size_t k;

	c->s->type = SPEC_TRAINING;
	c->s->wait_timeout = -1;
	c->s->run_timeout = -1;
	json_object_foreach(root, key, v) {
		for (k = 0; k < SPEC_NATIVE_N_FIELDS && strcmp(spec_native_fields[k].key, key); k++)
			;
		if (k < SPEC_NATIVE_N_FIELDS) {
			spec_native_fields[k].check(&n, root);
			continue;
		}
		key_hint_init(&h, key);
		for (k = 0; k < SPEC_NATIVE_N_FIELDS; k++)
			key_hint_add(&h, spec_native_fields[k].key);
		spec_ignore_field(c, "", key, &h);
	}
	spec_native_finish(&n);
	spec_resources_free(&n.res);
	spec_image_free(&n.image);
	free(n.cmds);
}

const struct spec_format_ops spec_native_format = {
	.name = "native",
	.parse = spec_native_parse,
};
