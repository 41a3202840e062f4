/*
 * spec_data.c - a spec's data checked against a config: every dataset,
 * checkpoint and model it names by name is configured (or may be one an
 * earlier job registered in the store), every datastore it names in a
 * NAME:/path exists, and an output registered as a dataset, checkpoint or
 * model has a store to go to.  jobs/ runs this at submit, `mlfs check -c`
 * offline, so a job that could never get its data is refused at once
 * instead of failing later in STAGING_IN.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "json_pos.h"
#include "spec.h"

/* Where problems are reported: the file, and the spec's text when known. */
struct spec_data_ctx {
	const struct mlfs_config *cfg;
	const char *file;
	struct json_pos *pos;	/* NULL: no positions (text not given, or not JSON) */
	struct diag *d;
};

__attribute__((format(printf, 3, 4)))
static void spec_data_error(struct spec_data_ctx *c, const char *field, const char *fmt, ...)
{
	char where[4200], msg[1024];
	int line = 1, col = 1;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->pos && json_pos_find_nearest(c->pos, field, &line, &col) >= 0)
		snprintf(where, sizeof(where), "%s:%d:%d", c->file, line, col);
	else
		snprintf(where, sizeof(where), "%s", c->file);
	diag_add(c->d, where, 0, "%s: %s", field, msg);
}

static bool spec_data_named(const struct mlfs_config *cfg, enum source_kind kind,
			    const char *name)
{
	/* Not configured, it may be registered in the store: the view looks there. */
	return config_find_source(cfg, kind, name) >= 0 || cfg->store != NULL;
}

static void spec_data_name(struct spec_data_ctx *c, enum source_kind kind, const char *name,
			   const char *field)
{
	if (!spec_data_named(c->cfg, kind, name))
		spec_data_error(c, field, "no %s named \"%s\" in %s", config_source_word(kind), name,
				c->cfg->file);
}

/* A NAME:/path location names a configured datastore. */
static void spec_data_store(struct spec_data_ctx *c, const struct spec_location *loc,
			    const char *field)
{
	const struct mlfs_config *cfg = c->cfg;
	const char *colon;
	char name[256];

	if (!loc->type || strcmp(loc->type, "datastore") != 0 || !(colon = strchr(loc->path, ':')))
		return;
	snprintf(name, sizeof(name), "%.*s", (int)(colon - loc->path), loc->path);
	if (!config_find_datastore(cfg, name) || config_find_datastore(cfg, name)->implicit)
		spec_data_error(c, field, "no datastore named \"%s\" in %s", name, cfg->file);
}

static const struct spec_output_kind spec_output_kinds[] = {
	{ .type = "none", .kept = true },
	{ .type = "s3", .as_written = true, .zips = true },
	{ .type = "gcp", .as_written = true, .zips = true },	/* gs://: the gcs backend */
	{ .type = "azure", .as_written = true, .zips = true },	/* a blob URL: azure */
	{ .type = "datastore", .as_written = true },
	{ .type = "local", .as_written = true, .zips = true, .makes_folder = true },
	{ .type = "dataset", .registered = true },
	{ .type = "checkpoint", .registered = true },
	{ .type = "model", .registered = true },
};

const struct spec_output_kind *spec_output_kind(const char *type)
{
	for (size_t i = 0; type && i < sizeof(spec_output_kinds) / sizeof(spec_output_kinds[0]); i++)
		if (strcmp(spec_output_kinds[i].type, type) == 0)
			return &spec_output_kinds[i];
	return NULL;
}

/*
 * Kibernetika's sources: each volume names a source (the task's or a
 * [source] of the config), a workDir's $VAR one the resource maps, a
 * task source's NAME:/path a datastore.
 */
/* Worker @w's volume @bad names nothing the config or task has: which, and why. */
static void spec_data_volume(struct spec_data_ctx *c, const struct spec *s, size_t group,
			     const struct spec_volume *v, size_t bad)
{
	char field[128];

	if (v->host_path) {	/* GPULab storage */
		snprintf(field, sizeof(field), "request.docker.storage[%zu]", bad);
		spec_data_error(c, field, "no [source] of %s covers %s (one whose mount_path is it "
				"or a folder above it)", c->cfg->file, v->host_path);
		return;
	}
	(void)s;
	snprintf(field, sizeof(field), "resources[%zu].volumes[%zu].name", group, bad);
	spec_data_error(c, field, "no source named \"%s\": neither the task's sources nor a "
			"[source] of %s", v->name, c->cfg->file);
}

/*
 * Sources: each volume names a source (Kibernetika: the task's or a
 * [source]; GPULab storage: a [source] covering its path), a workDir's
 * $VAR one the worker maps, a task source's NAME:/path a datastore.  The
 * first worker of each role (or each worker) speaks for its role.
 */
static void spec_data_sources(struct spec_data_ctx *c, const struct spec *s)
{
	char field[128], unknown[96], dir[4096];
	size_t group = 0;

	for (size_t wi = 0; wi < s->n_workers; wi++) {
		const struct spec_worker *w = &s->workers[wi];
		struct spec_mount *m;
		size_t n, bad = 0;
		int ret;

		if (s->n_roles && (group >= s->n_roles || s->roles[group].first != wi))
			continue;	/* not the first of its role */
		ret = spec_worker_mounts(s, wi, c->cfg, &m, &n, &bad);
		if (ret == -ENOENT) {
			spec_data_volume(c, s, group, &w->volumes[bad], bad);
		} else if (ret == -ENAMETOOLONG) {
			if (s->format == SPEC_GPULAB)
				snprintf(field, sizeof(field), "request.docker.storage");
			else
				snprintf(field, sizeof(field), "resources[%zu]", group);
			spec_data_error(c, field, "source %s: its path in the source or where it is "
					"mounted is longer than 2047 bytes", m[bad].name);
		} else if (ret == 0 && w->work_dir && strchr(w->work_dir, '$') &&
			   spec_resolve_dir(w->work_dir, m, n, "/opt/ml", dir, sizeof(dir), unknown,
					    sizeof(unknown)) == -ENOENT) {
			snprintf(field, sizeof(field), "resources[%zu].workDir", group);
			spec_data_error(c, field, "$%s names no source this resource maps (map them "
					"with default_volume_mapping: true, or one by volumes)", unknown);
		}
		free(m);
		group += s->n_roles != 0;
	}
	for (size_t i = 0; i < s->n_sources; i++) {
		const char *src = s->sources[i].source, *colon = strchr(src, ':');
		char name[256];

		if (strstr(src, "://") || !colon)
			continue;	/* a URL, or no datastore: the view's config load says */
		snprintf(name, sizeof(name), "%.*s", (int)(colon - src), src);
		if (!config_find_datastore(c->cfg, name) ||
		    config_find_datastore(c->cfg, name)->implicit) {
			snprintf(field, sizeof(field), "sources[%zu].source", i);
			spec_data_error(c, field, "no datastore named \"%s\" in %s", name, c->cfg->file);
		}
	}
}

int spec_check_data(const struct spec *s, const struct mlfs_config *cfg, const char *file,
		    const char *text, size_t len, struct diag *d)
{
	const struct spec_data *data = &s->data;
	const struct spec_output_kind *out = spec_output_kind(data->output.type);
	struct spec_data_ctx c = { .cfg = cfg, .file = file, .d = d };
	size_t before = d->n;
	char field[64];

	if (text && s->format == SPEC_NATIVE && json_pos_build(&c.pos, text, len) < 0)
		c.pos = NULL;
	for (size_t i = 0; i < data->n_datasets; i++) {
		snprintf(field, sizeof(field), "data.datasets[%zu]", i);
		spec_data_name(&c, SOURCE_DATASET, data->datasets[i], field);
	}
	for (size_t i = 0; i < data->n_checkpoints; i++) {
		snprintf(field, sizeof(field), "checkpoints[%zu]", i);
		spec_data_name(&c, SOURCE_CHECKPOINT, data->checkpoints[i], field);
	}
	if (data->model.type && strcmp(data->model.type, "model") == 0)
		spec_data_name(&c, SOURCE_MODEL, data->model.path, "model.path");
	spec_data_store(&c, &data->model, "model.path");
	spec_data_store(&c, &data->input, "data.input.path");
	spec_data_store(&c, &data->output, "data.output.path");
	spec_data_sources(&c, s);
	if (out && out->registered && !cfg->store)
		spec_data_error(&c, "data.output.type", "a %s output is kept in the datastore "
				"[mlfs] store names, and %s sets none", data->output.type, cfg->file);
	json_pos_free(c.pos);
	return d->n > before ? -EINVAL : 0;
}
