/*
 * spec_sources.c - Kibernetika's sources and volumes (DESIGN §4 [source]):
 * what a task declares (`sources:`), what each resource maps
 * (`default_volume_mapping`, `default_mount_path`, `volumes`), and which
 * sources a worker then sees, where (spec_worker_mounts), for the view
 * (mlfs job), the variables (<NAME>_DIR) and the folder it runs in
 * (workDir: $SRC_DIR).
 *
 * Fields are the [source] section's, in either spelling the platform's
 * YAML uses: name, source, mount_path or mountPath, sub_path or subPath.
 * A path: mount paths absolute, sub paths relative, normalised, no "..".
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "path.h"
#include "spec_int.h"

#define SPEC_SOURCES_MAX	64

/* @key, else its camelCase spelling @camel: 1 and *out, 0 when neither, -1 when bad. */
static int spec_src_string(struct spec_ctx *c, json_t *o, const char *at, const char *key,
			   const char *camel, const char **out)
{
	int ret = spec_get_string(c, o, at, key, out);

	return ret != 0 || !camel ? ret : spec_get_string(c, o, at, camel, out);
}

/*
 * A mount path (absolute) or sub path (relative) at @at.@key, normalised
 * into *out (malloc'd, a mount path with its leading '/'); an error names
 * the field.
 */
static void spec_src_path(struct spec_ctx *c, json_t *o, const char *at, const char *key,
			  const char *camel, char **out)
{
	bool mount = strstr(key, "mount") != NULL;	/* mount_path, default_mount_path */
	char path[SPEC_PATH_MAX], shown[SPEC_SHOW_MAX], *canon = NULL;
	const char *v;
	int ret = spec_src_string(c, o, at, key, camel, &v);

	if (ret <= 0)
		return;
	spec_path(path, at, json_object_get(o, key) ? key : camel);
	if (mount && v[0] != '/') {
		spec_error(c, path, "must be an absolute path, got \"%s\"", spec_show(shown, v));
		return;
	}
	ret = path_canon(&canon, v);
	if (ret == -ENOMEM)
		c->nomem = true;
	else if (ret == -ENAMETOOLONG)
		spec_error(c, path, "a name in it is longer than 255 bytes, got \"%s\"",
			   spec_show(shown, v));
	else if (ret < 0)
		spec_error(c, path, "must be a path without \"..\", got \"%s\"", spec_show(shown, v));
	else if (mount && !canon[0])
		spec_error(c, path, "must not be the container's root");
	else if (mount && asprintf(out, "/%s", canon) < 0)
		c->nomem = true;
	else if (!mount)
		*out = canon, canon = NULL;
	free(canon);
}

/* A source's or volume's name: as Kibernetika's, 1-63 of [a-z0-9-], not starting or ending with '-'. */
static bool spec_src_name_ok(const char *name)
{
	size_t len = strlen(name);

	return len > 0 && len <= 63 && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == len &&
	       name[0] != '-' && name[len - 1] != '-';
}

static const char *spec_src_name(struct spec_ctx *c, json_t *o, const char *at)
{
	char path[SPEC_PATH_MAX], shown[SPEC_SHOW_MAX];
	const char *name = NULL;
	int ret = spec_get_string(c, o, at, "name", &name);

	if (ret == 0)
		spec_error(c, spec_path(path, at, "name"), "missing");
	else if (ret > 0 && !spec_src_name_ok(name))
		spec_error(c, spec_path(path, at, "name"), "must be 1 to 63 of a-z, 0-9 and '-', "
			   "not starting or ending with '-', got \"%s\"", spec_show(shown, name));
	return ret > 0 && spec_src_name_ok(name) ? name : NULL;
}

/* One entry of the task's sources. */
static void spec_src_entry(struct spec_ctx *c, json_t *o, size_t i)
{
	static const char *const known[] = { "name", "source", "mount_path", "mountPath",
					      "sub_path", "subPath", NULL };
	struct spec_source *src = &c->s->sources[c->s->n_sources];
	char at[SPEC_PATH_MAX], path[SPEC_PATH_MAX];
	const char *name, *source = NULL;

	snprintf(at, sizeof(at), "sources[%zu]", i);
	if (!json_is_object(o)) {
		spec_error(c, at, "must be an object like {name: src, source: lab:/code, "
			   "mount_path: /src}, got %s", spec_json_type(o));
		return;
	}
	spec_ignore_unknown(c, o, at, known);
	name = spec_src_name(c, o, at);
	for (size_t k = 0; name && k < c->s->n_sources; k++)
		if (strcmp(c->s->sources[k].name, name) == 0) {
			spec_error(c, spec_path(path, at, "name"), "\"%s\" names sources[%zu] too",
				   name, k);
			name = NULL;
		}
	if (spec_get_string(c, o, at, "source", &source) == 0)
		spec_error(c, spec_path(path, at, "source"), "missing (a datastore path, a URL or "
			   "a git URL, as a [source] section's)");
	*src = (struct spec_source){ 0 };
	spec_src_path(c, o, at, "mount_path", "mountPath", &src->mount_path);
	spec_src_path(c, o, at, "sub_path", "subPath", &src->sub_path);
	src->name = name ? spec_strdup(c, name) : NULL;
	src->source = source ? spec_strdup(c, source) : NULL;
	if (src->name && src->source)
		c->s->n_sources++;
	else {
		free(src->mount_path);
		free(src->sub_path);
		free(src->name);
		free(src->source);
	}
}

void spec_kb_task_sources(struct spec_ctx *c, json_t *root)
{
	json_t *a = json_object_get(root, "sources"), *o;
	size_t i;

	if (!a || json_is_null(a))
		return;
	if (!json_is_array(a) || json_array_size(a) > SPEC_SOURCES_MAX) {
		spec_error(c, "sources", "must list at most %d sources, like [{name: src, source: "
			   "lab:/code}], got %s", SPEC_SOURCES_MAX, spec_json_type(a));
		return;
	}
	c->s->sources = calloc(json_array_size(a) + 1, sizeof(*c->s->sources));
	if (!c->s->sources) {
		c->nomem = true;
		return;
	}
	json_array_foreach(a, i, o)
		spec_src_entry(c, o, i);
}

/* One entry of a resource's volumes into @w. */
static void spec_vol_entry(struct spec_ctx *c, json_t *o, const char *at, struct spec_worker *w)
{
	static const char *const known[] = { "name", "mount_path", "mountPath", "sub_path",
					      "subPath", NULL };
	struct spec_volume *v = &w->volumes[w->n_volumes];
	const char *name;

	if (!json_is_object(o)) {
		spec_error(c, at, "must be an object like {name: data, sub_path: train, "
			   "mount_path: /data}, got %s", spec_json_type(o));
		return;
	}
	spec_ignore_unknown(c, o, at, known);
	name = spec_src_name(c, o, at);
	*v = (struct spec_volume){ 0 };
	spec_src_path(c, o, at, "mount_path", "mountPath", &v->mount_path);
	spec_src_path(c, o, at, "sub_path", "subPath", &v->sub_path);
	v->name = name ? spec_strdup(c, name) : NULL;
	if (v->name)
		w->n_volumes++;
	else {
		free(v->mount_path);
		free(v->sub_path);
	}
}

void spec_kb_res_volumes(struct spec_ctx *c, json_t *o, const char *at, struct spec_worker *w)
{
	char path[SPEC_PATH_MAX], vat[SPEC_PATH_MAX + 24];
	json_t *a = json_object_get(o, "volumes"), *e;
	size_t i;

	spec_get_bool(c, o, at, "default_volume_mapping", &w->all_sources);
	spec_src_path(c, o, at, "default_mount_path", NULL, &w->default_mount_path);
	if (!a || json_is_null(a))
		return;
	spec_path(path, at, "volumes");
	if (!json_is_array(a) || json_array_size(a) > SPEC_SOURCES_MAX) {
		spec_error(c, path, "must list at most %d volumes, like [{name: data, mount_path: "
			   "/data}], got %s", SPEC_SOURCES_MAX, spec_json_type(a));
		return;
	}
	w->volumes = calloc(json_array_size(a) + 1, sizeof(*w->volumes));
	if (!w->volumes) {
		c->nomem = true;
		return;
	}
	json_array_foreach(a, i, e) {
		snprintf(vat, sizeof(vat), "%s[%zu]", path, i);
		spec_vol_entry(c, e, vat, w);
	}
}

int spec_volumes_copy(struct spec_worker *to, const struct spec_worker *from)
{
	to->all_sources = from->all_sources;
	if (from->default_mount_path && !(to->default_mount_path = strdup(from->default_mount_path)))
		return -1;
	to->volumes = calloc(from->n_volumes + 1, sizeof(*to->volumes));
	if (!to->volumes)
		return -1;
	for (size_t i = 0; i < from->n_volumes; i++) {
		const struct spec_volume *f = &from->volumes[i];
		struct spec_volume *t = &to->volumes[to->n_volumes++];

		t->name = f->name ? strdup(f->name) : NULL;
		t->sub_path = f->sub_path ? strdup(f->sub_path) : NULL;
		t->mount_path = f->mount_path ? strdup(f->mount_path) : NULL;
		t->host_path = f->host_path ? strdup(f->host_path) : NULL;
		if ((f->name && !t->name) || (f->sub_path && !t->sub_path) ||
		    (f->mount_path && !t->mount_path) || (f->host_path && !t->host_path))
			return -1;
	}
	return 0;
}

/* ---- which sources a worker sees ---- */

/* @name upper-cased, '-' and ' ' as '_', then "_DIR": the variable Kibernetika sets. */
static void spec_mount_var(const char *name, char *out, size_t size)
{
	size_t n = 0;

	for (; *name && n + 5 < size; name++)
		out[n++] = *name == '-' || *name == ' ' ? '_' : (char)toupper((unsigned char)*name);
	memcpy(out + n, "_DIR", 5);
}

/*
 * Puts @a, then @sep when both are there, then @b (NULL: "") into @out, a
 * path of @m; one too long for it leaves "" and marks @m too_long, which
 * spec_worker_mounts answers with -ENAMETOOLONG: never a shorter path.
 */
static void spec_mount_put(struct spec_mount *m, char *out, size_t size, const char *a,
			   const char *sep, const char *b)
{
	int n;

	a = a ? a : "";
	b = b ? b : "";
	n = snprintf(out, size, "%s%s%s", a, a[0] && b[0] ? sep : "", b);
	if (n < 0 || (size_t)n >= size) {
		out[0] = '\0';
		m->too_long = true;
	}
}

/* Adds (or, for a volume of one already there, replaces) the mount of candidate @name. */
static int spec_mount_add(struct spec_mount **out, size_t *n, const struct spec_mount *m)
{
	struct spec_mount *a;

	for (size_t i = 0; i < *n; i++)
		if (strcmp((*out)[i].name, m->name) == 0) {
			(*out)[i] = *m;
			return 0;
		}
	a = realloc(*out, (*n + 1) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	a[(*n)++] = *m;
	*out = a;
	return 0;
}

/*
 * The candidate source @name (the task's own first, then the config's):
 * its mount filled from it, with no volume's changes; false when there is
 * none.
 */
static bool spec_mount_find(const struct spec *s, const struct mlfs_config *cfg,
			    const char *name, struct spec_mount *m)
{
	*m = (struct spec_mount){ .cfg_src = -1 };
	snprintf(m->name, sizeof(m->name), "%s", name);
	for (size_t i = 0; i < s->n_sources; i++)
		if (strcmp(s->sources[i].name, name) == 0) {
			m->task = &s->sources[i];
			spec_mount_put(m, m->sub_path, sizeof(m->sub_path), m->task->sub_path, "",
				       NULL);
			if (m->task->mount_path)
				spec_mount_put(m, m->mount_path, sizeof(m->mount_path),
					       m->task->mount_path, "", NULL);
			else
				spec_mount_put(m, m->mount_path, sizeof(m->mount_path),
					       "/workspace", "/", name);
			break;
		}
	for (size_t i = 0; !m->task && cfg && i < cfg->n_sources; i++)
		if (cfg->sources[i].kind == SOURCE_SOURCE && strcmp(cfg->sources[i].shown, name) == 0) {
			m->cfg_src = (long)i;
			spec_mount_put(m, m->sub_path, sizeof(m->sub_path), cfg->sources[i].sub_path,
				       "", NULL);
			config_mount_path(&cfg->sources[i], m->mount_path, sizeof(m->mount_path));
		}
	spec_mount_var(name, m->var, sizeof(m->var));
	return m->task || m->cfg_src >= 0;
}

/* Puts the worker's default_mount_path before @m's mount path. */
static void spec_mount_prefix(const struct spec_worker *sw, struct spec_mount *m)
{
	char was[sizeof(m->mount_path)];

	if (!sw->default_mount_path)
		return;
	snprintf(was, sizeof(was), "%s", m->mount_path);
	spec_mount_put(m, m->mount_path, sizeof(m->mount_path), sw->default_mount_path, "", was);
}

/*
 * GPULab storage @v: the [source] whose mount path is the longest prefix
 * of its host path, the rest below it, at its container path, named after
 * the source (NAME-2, NAME-3 when the worker maps it already).  False when
 * no source covers it.
 */
static bool spec_mount_cover(const struct mlfs_config *cfg, const struct spec_volume *v,
			     const struct spec_mount *have, size_t n, struct spec_mount *m)
{
	size_t best = 0, rest;
	long hit = -1;
	char mp[2048];

	for (size_t i = 0; cfg && i < cfg->n_sources; i++) {
		size_t len;

		if (cfg->sources[i].kind != SOURCE_SOURCE)
			continue;
		config_mount_path(&cfg->sources[i], mp, sizeof(mp));
		len = strlen(mp);
		if (len > best && strncmp(v->host_path, mp, len) == 0 &&
		    (v->host_path[len] == '/' || v->host_path[len] == '\0')) {
			best = len;
			hit = (long)i;
		}
	}
	if (hit < 0)
		return false;
	*m = (struct spec_mount){ .cfg_src = hit };
	snprintf(m->name, sizeof(m->name), "%s", cfg->sources[hit].shown);
	for (unsigned int k = 2; k < 1000; k++) {
		bool taken = false;

		for (size_t i = 0; i < n && !taken; i++)
			taken = strcmp(have[i].name, m->name) == 0;
		if (!taken)
			break;
		snprintf(m->name, sizeof(m->name), "%.70s-%u", cfg->sources[hit].shown, k);
	}
	rest = strlen(v->host_path) > best ? best + 1 : best;
	spec_mount_put(m, m->sub_path, sizeof(m->sub_path), cfg->sources[hit].sub_path, "/",
		       v->host_path + rest);
	spec_mount_put(m, m->mount_path, sizeof(m->mount_path),
		       v->mount_path ? v->mount_path : v->host_path, "", NULL);
	spec_mount_var(m->name, m->var, sizeof(m->var));
	return true;
}

int spec_worker_mounts(const struct spec *s, size_t w, const struct mlfs_config *cfg,
		       struct spec_mount **out, size_t *n, size_t *bad_volume)
{
	const struct spec_worker *sw = &s->workers[w];
	struct spec_mount m;
	int ret = 0;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; sw->all_sources && ret == 0 && i < s->n_sources; i++)
		if (spec_mount_find(s, cfg, s->sources[i].name, &m)) {
			spec_mount_prefix(sw, &m);
			ret = spec_mount_add(out, n, &m);
		}
	for (size_t i = 0; sw->all_sources && ret == 0 && cfg && i < cfg->n_sources; i++)
		if (cfg->sources[i].kind == SOURCE_SOURCE &&
		    spec_mount_find(s, cfg, cfg->sources[i].shown, &m) && !m.task) {
			spec_mount_prefix(sw, &m);
			ret = spec_mount_add(out, n, &m);
		}
	for (size_t i = 0; ret == 0 && i < sw->n_volumes; i++) {
		const struct spec_volume *v = &sw->volumes[i];
		char sub[sizeof(m.sub_path)];

		if (v->host_path) {
			if (!spec_mount_cover(cfg, v, *out, *n, &m)) {
				*bad_volume = i;
				ret = -ENOENT;
				break;
			}
			ret = spec_mount_add(out, n, &m);
			continue;
		}
		if (!spec_mount_find(s, cfg, v->name, &m)) {
			*bad_volume = i;
			ret = -ENOENT;
			break;
		}
		snprintf(sub, sizeof(sub), "%s", m.sub_path);
		spec_mount_put(&m, m.sub_path, sizeof(m.sub_path), sub, "/", v->sub_path);
		if (v->mount_path)
			spec_mount_put(&m, m.mount_path, sizeof(m.mount_path), v->mount_path, "",
				       NULL);
		spec_mount_prefix(sw, &m);
		ret = spec_mount_add(out, n, &m);
	}
	for (size_t i = 0; ret == 0 && i < *n; i++)
		if ((*out)[i].too_long) {
			*bad_volume = i;
			ret = -ENAMETOOLONG;
		}
	if (ret < 0 && ret != -ENOENT && ret != -ENAMETOOLONG) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return ret;
}

int spec_resolve_dir(const char *dir, const struct spec_mount *m, size_t n, const char *base,
		     char *out, size_t size, char *unknown, size_t unknown_size)
{
	size_t used = 0;

	for (const char *p = dir; *p && used < size;) {
		bool brace = p[0] == '$' && p[1] == '{';
		size_t len;
		const struct spec_mount *hit = NULL;

		if (*p != '$') {
			out[used++] = *p++;
			continue;
		}
		p += brace ? 2 : 1;
		len = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");
		for (size_t i = 0; i < n && !hit; i++)
			if (strlen(m[i].var) == len && strncmp(m[i].var, p, len) == 0)
				hit = &m[i];
		if (!hit || (brace && p[len] != '}')) {
			snprintf(unknown, unknown_size, "%.*s", (int)len, p);
			return -ENOENT;
		}
		used += (size_t)snprintf(out + used, size - used, "%s%s%s", base ? base : "",
					 base ? "/sources/" : "", base ? hit->name : hit->mount_path);
		p += len + brace;
	}
	if (used >= size)
		return -ENAMETOOLONG;
	out[used] = '\0';
	return 0;
}
