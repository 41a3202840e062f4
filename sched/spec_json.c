/*
 * spec_json.c - the job model back to JSON, for jobs/<name>/spec.json
 * (spec_to_json): what mlfs understood of a spec, in one shape whatever
 * its format.  Members a format does not use, such as "roles" or "data",
 * are left out when empty; the value of a variable whose name says it is a
 * secret, and the password of a URL in any value, are shown as <redacted>.
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_int.h"

/* A variable whose name says it holds a secret, in any case. */
static bool spec_secret(const char *name)
{
	static const char *const words[] = { "PASS", "SECRET", "TOKEN", "KEY", "CREDENTIAL", "AUTH",
					     "PRIVATE", "COOKIE" };

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasestr(name, words[i]))
			return true;
	return false;
}

/*
 * A value as spec.json shows it: whole, or with the password of a URL in it
 * (scheme://user:PASSWORD@host) replaced, whatever the variable's name.
 */
static json_t *spec_env_value(const char *v)
{
	const char *scheme = strstr(v, "://"), *auth, *colon, *at;
	json_t *out;
	char *text;

	if (!scheme)
		return json_string(v);
	auth = scheme + 3;
	at = auth + strcspn(auth, "/@");
	colon = memchr(auth, ':', (size_t)(at - auth));
	if (*at != '@' || !colon)
		return json_string(v);
	if (asprintf(&text, "%.*s<redacted>%s", (int)(colon + 1 - v), v, at) < 0)
		return NULL;
	out = json_string(text);
	free(text);
	return out;
}

static json_t *spec_env_json(const struct spec_env *env, size_t n)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < n; i++)
		json_object_set_new(o, env[i].name, spec_secret(env[i].name)
				    ? json_string("<redacted>") : spec_env_value(env[i].value));
	return o;
}

/* @v when >= 0, else null. */
static json_t *spec_json_limit(double v, bool integer)
{
	if (v < 0)
		return json_null();
	return integer ? json_integer((json_int_t)v) : json_real(v);
}

static json_t *spec_resources_json(const struct spec_resources *r)
{
	json_t *types = json_array();

	for (size_t i = 0; types && i < r->n_gpu_types; i++)
		json_array_append_new(types, json_string(r->gpu_types[i]));
	json_t *o;

	o = json_pack("{s:o?, s:b, s:I, s:I, s:o, s:I, s:o, s:s?}",
		      "gpu_types", types, "gpu_type_substring", r->gpu_type_substring,
		      "gpu_count", (json_int_t)r->gpu_count, "cpu_count", (json_int_t)r->cpu_count,
		      "memory_gb", spec_json_limit(r->memory_gb, false),
		      "disk_size_gb", (json_int_t)r->disk_size_gb,
		      "max_price", spec_json_limit(r->max_price, false),
		      "min_cuda_version", r->min_cuda_version);
	/* shown only when set, so a spec that does not use them reads as before */
	if (o && r->cluster_id)
		json_object_set_new(o, "cluster_id", json_string(r->cluster_id));
	if (o && r->node_name)
		json_object_set_new(o, "node_name", json_string(r->node_name));
	return o;
}

static json_t *spec_ports_json(const struct spec_worker *w)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < w->n_ports; i++)
		json_array_append_new(a, json_pack("{s:s, s:I}", "label", w->ports[i].label,
						   "count", (json_int_t)w->ports[i].count));
	return a;
}

/* The members of a worker that only some formats use, when set. */
static void spec_worker_extra_json(json_t *o, const struct spec_worker *w)
{
	if (w->role) {
		json_object_set_new(o, "role", json_string(w->role));
		json_object_set_new(o, "role_index", json_integer(w->role_index));
	}
	if (w->n_ports)
		json_object_set_new(o, "ports", spec_ports_json(w));
	if (w->work_dir)
		json_object_set_new(o, "work_dir", json_string(w->work_dir));
	if (w->image.ref)	/* never its credentials */
		json_object_set_new(o, "image", json_string(w->image.ref));
	if (w->image.shm_mb > 0)
		json_object_set_new(o, "shm_mb", json_integer(w->image.shm_mb));
}

static json_t *spec_workers_json(const struct spec *s)
{
	json_t *a = json_array(), *w;

	for (size_t i = 0; a && i < s->n_workers; i++) {
		const struct spec_worker *sw = &s->workers[i];

		w = json_pack("{s:s, s:o}", "command", sw->command,
			      "resources", spec_resources_json(&sw->res));
		if (w)
			spec_worker_extra_json(w, sw);
		if (w && sw->n_env)
			json_object_set_new(w, "environment", spec_env_json(sw->env, sw->n_env));
		if (!w || json_array_append_new(a, w) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *spec_roles_json(const struct spec *s)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < s->n_roles; i++) {
		const struct spec_role *r = &s->roles[i];

		json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:o, s:o}", "name", r->name,
			"first_worker", (json_int_t)r->first, "workers", (json_int_t)r->n,
			"min_failed", spec_json_limit((double)r->min_failed, true),
			"min_succeeded", spec_json_limit((double)r->min_succeeded, true)));
	}
	return a;
}

static json_t *spec_names_json(char *const *names, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_string(names[i]));
	return a;
}

/*
 * Adds @l as {"type", "path"} (and "archive" when @archive) under @key, when
 * set; the password of a URL path redacted.
 */
static void spec_location_json(json_t *o, const char *key, const struct spec_location *l,
			       bool archive)
{
	json_t *v;

	if (!l->type)
		return;
	/* a URL's password (a git or web source's token) shown as the environment's are */
	v = json_pack("{s:s, s:o?}", "type", l->type, "path",
		      l->path ? spec_env_value(l->path) : NULL);
	if (v && archive)
		json_object_set_new(v, "archive", json_boolean(l->archive));
	json_object_set_new(o, key, v);
}

/* The data a job reads and writes, with what it lacks left out; NULL when none. */
static json_t *spec_data_json(const struct spec_data *d)
{
	json_t *o = json_object();

	if (o && d->n_datasets)
		json_object_set_new(o, "datasets", spec_names_json(d->datasets, d->n_datasets));
	if (o && d->n_checkpoints)
		json_object_set_new(o, "checkpoints",
				    spec_names_json(d->checkpoints, d->n_checkpoints));
	if (o) {
		spec_location_json(o, "input", &d->input, false);
		spec_location_json(o, "output", &d->output, true);
		spec_location_json(o, "model", &d->model, false);
	}
	if (o && json_object_size(o) == 0) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/* environment's members beside variables: the base environment and the packages, when set. */
static void spec_environment_json(json_t *env, const struct spec *s)
{
	const struct spec_base_env *b = &s->base_env;
	const struct spec_packages *p = &s->packages;

	if (!env)
		return;
	if (b->python_version)
		json_object_set_new(env, "python_version", json_string(b->python_version));
	if (b->framework)
		json_object_set_new(env, "framework", json_string(b->framework));
	if (b->framework_version)
		json_object_set_new(env, "framework_version", json_string(b->framework_version));
	if (b->name)	/* the [environment NAME] it was given; the image is each worker's */
		json_object_set_new(env, "base_environment", json_string(b->name));
	if (p->n_apt + p->n_conda + p->n_pip)
		json_object_set_new(env, "packages", json_pack("{s:o, s:o, s:o}",
			"apt", spec_names_json(p->apt, p->n_apt),
			"conda", spec_names_json(p->conda, p->n_conda),
			"pip", spec_names_json(p->pip, p->n_pip)));
}

char *spec_to_json(const struct spec *s)
{
	json_t *o, *data;
	char *text;

	o = json_pack("{s:s, s:s, s:s, s:o, s:b, s:{s:o}, s:I, s:o, s:o, s:o}",
		      "format", spec_format_name(s->format), "name", s->name,
		      "type", s->type == SPEC_INFERENCE ? "inference" : "training",
		      "workers", spec_workers_json(s), "gang", s->gang,
		      "environment", "variables", spec_env_json(s->env, s->n_env),
		      "retry_count", (json_int_t)s->retry_count,
		      "wait_timeout_seconds", spec_json_limit((double)s->wait_timeout, true),
		      "run_timeout_seconds", spec_json_limit((double)s->run_timeout, true),
		      "ignored", spec_names_json(s->ignored, s->n_ignored));
	if (!o)
		return NULL;
	spec_environment_json(json_object_get(o, "environment"), s);
	if (s->n_roles)
		json_object_set_new(o, "roles", spec_roles_json(s));
	if (s->description)
		json_object_set_new(o, "description", json_string(s->description));
	data = spec_data_json(&s->data);
	if (data)
		json_object_set_new(o, "data", data);
	text = json_dumps(o, JSON_INDENT(2));
	json_decref(o);
	return text;
}

