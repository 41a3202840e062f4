/*
 * config_whole.c - what is checked, and what follows, once the whole config
 * file is read: references that may point forward (a source's datastore,
 * [mlfs] store) and environments (config_check_refs); then (config_finish)
 * each URL source becomes a datastore of its own,
 * "KIND:NAME", of the type whose form (struct config_form) reads the URL's
 * scheme, with the keys that form gives (it may borrow a configured
 * datastore's: config_like, config_borrow); a job's local path one of the
 * type whose form takes paths; and the values every datastore inherits from
 * [mlfs] (timeout, retries, folders).
 */
#define _GNU_SOURCE
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "config_value.h"
#include "container.h"
#include "ini.h"
#include "path.h"
#include "config_int.h"

static void config_check_source(struct config_parser *p, const struct source_config *src)
{
	const char *word = config_source_words[src->kind];
	char mine[4200], theirs[4200];

	if (!src->source_line)
		config_error(p, src->line, "[%s %s]: missing key 'source'", word, src->name);
	else if (src->datastore && !config_find_datastore(p->cfg, src->datastore))
		config_error(p, src->source_line, "[%s %s] source: no datastore named '%s'",
			     word, src->name, src->datastore);
	if (src->kind != SOURCE_SOURCE)
		return;
	/* two sources at one place of a container: one would hide the other */
	config_mount_path(src, mine, sizeof(mine));
	for (const struct source_config *o = p->cfg->sources; o < src; o++) {
		if (o->kind != SOURCE_SOURCE)
			continue;
		config_mount_path(o, theirs, sizeof(theirs));
		if (strcmp(mine, theirs) == 0) {
			config_error(p, src->line, "[source %s]: mount_path %s is [source %s]'s too "
				     "(line %d)", src->name, mine, o->name, o->line);
			break;
		}
	}
}

static bool config_same_text(const char *a, const char *b, bool nocase)
{
	if (!a || !b)
		return !a && !b;
	return nocase ? strcasecmp(a, b) == 0 : strcmp(a, b) == 0;
}

/*
 * An [environment] needs an image and something a spec chooses it by, and
 * no two may be chosen by the same values: a spec could not tell them apart.
 */
static void config_check_environment(struct config_parser *p, size_t i)
{
	const struct environment_config *e = &p->cfg->environments[i];

	if (!e->key_line[0])
		config_error(p, e->line, "[environment %s]: missing key 'image'", e->name);
	if (!e->key_line[1] && !e->key_line[2])
		config_error(p, e->line, "[environment %s]: set python_version or framework "
			     "(a spec chooses an environment by them)", e->name);
	else if (e->key_line[3] && !e->key_line[2])
		config_error(p, e->line, "[environment %s]: framework_version without framework",
			     e->name);
	for (size_t k = 0; k < i; k++) {
		const struct environment_config *o = &p->cfg->environments[k];

		if (config_same_text(e->python_version, o->python_version, false) &&
		    config_same_text(e->framework, o->framework, true) &&
		    config_same_text(e->framework_version, o->framework_version, false)) {
			config_error(p, e->line, "[environment %s]: the same python_version, framework "
				     "and framework_version as [environment %s] at line %d: a spec "
				     "could not choose between them", e->name, o->name, o->line);
			break;
		}
	}
}

/* The checks once the whole file is read: references that may point forward, required keys. */
void config_check_refs(struct config_parser *p)
{
	const struct mlfs_config *cfg = p->cfg;
	int store_line = p->key_line[0][config_key_index(config_mlfs_keys, "store")];

	for (size_t i = 0; i < cfg->n_datastores; i++)
		if (!cfg->datastores[i].type_line)
			config_error(p, cfg->datastores[i].line,
				     "[datastore %s]: missing key 'type'",
				     cfg->datastores[i].name);
	for (size_t i = 0; i < cfg->n_sources; i++)
		config_check_source(p, &cfg->sources[i]);
	for (size_t i = 0; i < cfg->n_environments; i++)
		config_check_environment(p, i);
	if (cfg->store && !config_find_datastore(cfg, cfg->store))
		config_error(p, store_line, "[mlfs] store: no datastore named '%s'", cfg->store);
}

/* ---- what follows from the whole file ---- */

int config_kv_add(struct datastore_config *ds, const char *key, const char *value, int line)
{
	struct config_kv *kv = reallocarray(ds->kv, ds->n_kv + 1, sizeof(*kv));

	if (!kv)
		return -ENOMEM;
	ds->kv = kv;
	kv += ds->n_kv;
	kv->key = strdup(key);
	kv->value = strdup(value);
	kv->line = line;
	if (!kv->key || !kv->value) {
		free(kv->key);
		free(kv->value);
		return -ENOMEM;
	}
	ds->n_kv++;
	return 0;
}

const struct datastore_config *config_like(const struct mlfs_config *cfg,
					   const struct datastore_config *prev,
					   const char *type, const char *key, const char *value)
{
	size_t i = prev ? (size_t)(prev - cfg->datastores) + 1 : 0;

	for (; i < cfg->n_datastores; i++) {
		const struct datastore_config *ds = &cfg->datastores[i];
		const char *v = config_get(ds, key, NULL);

		if (!ds->implicit && ds->type && strcmp(ds->type, type) == 0 && v &&
		    strcmp(v, value) == 0)
			return ds;
	}
	return NULL;
}

int config_borrow(struct datastore_config *ds, const struct datastore_config *like,
		  const char *const *own, int line)
{
	int ret = 0;

	for (size_t i = 0; like && ret == 0 && i < like->n_kv; i++) {
		bool skip = strcmp(like->kv[i].key, "type") == 0;

		for (const char *const *k = own; *k && !skip; k++)
			skip = strcmp(like->kv[i].key, *k) == 0;
		if (!skip)
			ret = config_kv_add(ds, like->kv[i].key, like->kv[i].value, line);
	}
	return ret;
}

const struct config_form *config_form_of_url(const struct mlfs_config *cfg, const char *url,
					     const char *scheme)
{
	for (const struct config_form *const *f = cfg->forms; f && *f; f++)
		if ((*f)->claims && (*f)->claims(url))
			return *f;
	for (const struct config_form *const *f = cfg->forms; f && *f; f++)
		for (const char *const *s = (*f)->schemes; s && *s; s++)
			if (strcmp(*s, scheme) == 0)
				return *f;
	return NULL;
}

/* "s3, http, https or smb": every scheme a form reads, for a message. */
void config_known_schemes(const struct mlfs_config *cfg, char *buf, size_t size)
{
	size_t len = 0, n = 0, i = 0;

	buf[0] = '\0';
	for (const struct config_form *const *f = cfg->forms; f && *f; f++)
		for (const char *const *s = (*f)->schemes; s && *s; s++)
			n++;
	for (const struct config_form *const *f = cfg->forms; f && *f; f++)
		for (const char *const *s = (*f)->schemes; s && *s; s++, i++)
			if (len < size)
				len += (size_t)snprintf(buf + len, size - len, "%s%s",
							i == 0 ? "" : i + 1 == n ? " or " : ", ",
							*s);
}

/* The form that local paths name, or NULL. */
static const struct config_form *config_form_of_paths(const struct mlfs_config *cfg)
{
	for (const struct config_form *const *f = cfg->forms; f && *f; f++)
		if ((*f)->paths)
			return *f;
	return NULL;
}

/* Appends an implicit datastore of @type named "KIND:SHOWN" for @src; NULL on ENOMEM. */
struct datastore_config *config_add_implicit(struct mlfs_config *cfg, struct source_config *src,
					     const char *type)
{
	struct datastore_config *ds;
	char *name;

	if (asprintf(&name, "%s:%s", config_source_words[src->kind], src->shown) < 0)
		return NULL;
	ds = reallocarray(cfg->datastores, cfg->n_datastores + 1, sizeof(*ds));
	if (!ds) {
		free(name);
		return NULL;
	}
	cfg->datastores = ds;
	ds += cfg->n_datastores++;
	*ds = (struct datastore_config){ .file = cfg->file, .name = name, .line = src->line,
		.type = strdup(type), .type_line = src->source_line, .uid = -1, .gid = -1,
		.mode = -1, .timeout = -1, .retries = -1, .metadata_ttl = -1, .implicit = true };
	free(src->datastore);
	src->datastore = strdup(name);
	return ds->type && src->datastore ? ds : NULL;
}

/*
 * Where the implicit datastore of @src is rooted: its source, or for an
 * archive the source's folder (the archive then being src->path in it).
 * Sets src->path; hands out the root, or NULL on ENOMEM.
 */
char *config_implicit_root(struct source_config *src)
{
	const char *base = strrchr(src->source, '/');
	bool archive = base && path_is_archive(src->source);
	char *root = archive ? strndup(src->source, (size_t)(base + 1 - src->source))
			     : strdup(src->source);

	src->path = strdup(archive ? base + 1 : "");
	if (!src->path) {
		free(root);
		return NULL;
	}
	return root;
}

/*
 * Gives a URL source its own datastore, "KIND:NAME", of the type of the
 * form that reads its scheme, whose root is the URL, or for an archive the
 * URL's folder (the archive is then the source's path in it).  The form
 * gives its keys.
 */
static int config_add_url_datastore(struct mlfs_config *cfg, struct source_config *src)
{
	const struct config_form *form = config_form_of_url(cfg, src->source, src->url_scheme);
	struct datastore_config *ds = form ? config_add_implicit(cfg, src, form->type) : NULL;
	char *url = ds ? config_implicit_root(src) : NULL;
	int ret = url ? form->url_keys(cfg, ds, url, url + strlen(src->url_scheme) + 3,
				       src->source_line) : -ENOMEM;

	free(url);
	return ret;
}

int config_add_path_datastore(struct mlfs_config *cfg, struct source_config *src)
{
	const struct config_form *form = config_form_of_paths(cfg);
	struct datastore_config *ds = form ? config_add_implicit(cfg, src, form->type) : NULL;
	char *root = ds ? config_implicit_root(src) : NULL;
	int ret = root ? form->url_keys(cfg, ds, root, root, 0) : -ENOMEM;

	if (!form)
		ret = -ENOTSUP;
	free(root);
	return ret;
}

/* Fills what follows from the whole file: implicit datastores, inherited values. */
int config_finish(struct mlfs_config *cfg)
{
	for (size_t i = 0; i < cfg->n_sources; i++) {
		struct source_config *src = &cfg->sources[i];
		int ret;

		if (!src->url_scheme || src->datastore)
			continue;
		ret = config_add_url_datastore(cfg, src);
		if (ret < 0)
			return ret;
	}
	for (size_t i = 0; i < cfg->n_datastores; i++) {
		struct datastore_config *ds = &cfg->datastores[i];

		ds->state_dir = cfg->state_dir;
		ds->cache_dir = cfg->cache_dir;
		ds->git_cache_size = cfg->git_cache_size;
		if (ds->timeout < 0)
			ds->timeout = cfg->timeout;
		if (ds->retries < 0)
			ds->retries = cfg->retries;
		if (ds->metadata_ttl < 0)
			ds->metadata_ttl = cfg->metadata_ttl;
	}
	return 0;
}

void config_mount_path(const struct source_config *src, char *buf, size_t size)
{
	if (src->mount_path)
		snprintf(buf, size, "%s", src->mount_path);
	else
		snprintf(buf, size, "/workspace/%s", src->shown);
}
