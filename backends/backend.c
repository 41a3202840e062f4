/*
 * backend.c - the registry of backend types.
 *
 * Every type of DESIGN §8 is known here, by its form (struct config_form,
 * kept in the backend's own file: its keys, its URLs), whether or not its
 * code is compiled in: a config naming `type = nfs` or an nfs:// URL in a
 * build without NFS gets "nfs backend not compiled in", never "unknown
 * type".  The table has one line per type; a type's ops pointer is NULL
 * when its code is not built (CMake options: MLFS_WITH_NFS, MLFS_WITH_SMB,
 * MLFS_WITH_CURL for s3, gcs, azure, http and ftp, MLFS_WITH_GIT; `mlfs
 * --version` lists what a build has).  The forms are what config_load is given (backend_config_forms).  Tests add fakes
 * with backend_register(), behind the same contract as the real ones.
 *
 * The registry is filled before any thread starts and only read after.
 * The one wrapper that logs (backend_mknod) lives here too, so the inline
 * ones in backend.h need no log.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "log.h"
#include "path.h"
#include "be_archive.h"
#include "be_azure.h"
#include "be_ftp.h"
#include "be_git.h"
#include "be_http.h"
#include "be_local.h"
#include "be_s3.h"
#include "be_nfs.h"
#include "be_smb.h"
#ifdef MLFS_WITH_CURL
#define BE_S3_OPS	(&be_s3_ops)
#define BE_HTTP_OPS	(&be_http_ops)
#define BE_FTP_OPS	(&be_ftp_ops)
#define BE_AZURE_OPS	(&be_azure_ops)
#else
#define BE_S3_OPS	NULL	/* -DMLFS_WITH_CURL=OFF */
#define BE_HTTP_OPS	NULL
#define BE_FTP_OPS	NULL
#define BE_AZURE_OPS	NULL
#endif
#ifdef MLFS_WITH_GIT
#define BE_GIT_OPS	(&be_git_ops)
#else
#define BE_GIT_OPS	NULL	/* -DMLFS_WITH_GIT=OFF */
#endif
#ifdef MLFS_WITH_NFS
#define BE_NFS_OPS	(&be_nfs_ops)
#else
#define BE_NFS_OPS	NULL	/* -DMLFS_WITH_NFS=OFF */
#endif
#ifdef MLFS_WITH_SMB
#define BE_SMB_OPS	(&be_smb_ops)
#else
#define BE_SMB_OPS	NULL	/* -DMLFS_WITH_SMB=OFF */
#endif

struct backend_scheme {
	const struct config_form *form;	/* its type, keys and URLs */
	const struct backend_ops *ops;	/* NULL: not compiled in */
};

static const struct config_form archive_form = { .type = "archive" };

static const struct backend_scheme backend_builtin[] = {
	{ &be_local_form, &be_local_ops },
	{ &be_nfs_form, BE_NFS_OPS },
	{ &be_smb_form, BE_SMB_OPS },
	{ &be_s3_form, BE_S3_OPS },
	{ &be_gcs_form, BE_S3_OPS },	/* GCS's XML API: the s3 backend, GCS's conventions */
	{ &be_azure_form, BE_AZURE_OPS },
	{ &be_http_form, BE_HTTP_OPS },
	{ &be_ftp_form, BE_FTP_OPS },
	{ &be_git_form, BE_GIT_OPS },
	{ &archive_form, &be_archive_ops },
};

#define BACKEND_NBUILTIN (sizeof(backend_builtin) / sizeof(backend_builtin[0]))
#define BACKEND_MAX_EXTRA 8

static const char *const backend_common_keys[] = {
	"type", "uid", "gid", "mode", "timeout", "retries", "metadata_ttl", NULL
};

static const struct backend_ops *backend_extra[BACKEND_MAX_EXTRA];
static size_t backend_nextra;

static const struct backend_scheme *backend_find_builtin(const char *scheme)
{
	for (size_t i = 0; i < BACKEND_NBUILTIN; i++)
		if (strcmp(backend_builtin[i].form->type, scheme) == 0)
			return &backend_builtin[i];
	return NULL;
}

static const struct backend_ops *backend_find_extra(const char *scheme)
{
	for (size_t i = 0; i < backend_nextra; i++)
		if (strcmp(backend_extra[i]->scheme, scheme) == 0)
			return backend_extra[i];
	return NULL;
}

int backend_register(const struct backend_ops *ops)
{
	if (!ops || ops->version < 1 || ops->version > BACKEND_OPS_VERSION || !ops->scheme || !ops->create ||
	    !ops->destroy || !ops->getattr || !ops->readdir || !ops->open || !ops->pread ||
	    !ops->release || !ops->statfs)
		return -EINVAL;
	if (backend_find_extra(ops->scheme) || backend_find_builtin(ops->scheme))
		return -EEXIST;
	if (backend_nextra == BACKEND_MAX_EXTRA)
		return -ENOSPC;
	backend_extra[backend_nextra++] = ops;
	return 0;
}

int backend_lookup(const struct backend_ops **out, const char *scheme)
{
	const struct backend_scheme *s = backend_find_builtin(scheme);
	const struct backend_ops *extra = backend_find_extra(scheme);

	if (extra) {
		*out = extra;
		return 0;
	}
	if (!s)
		return -ENOENT;
	if (!s->ops)
		return -ENOTSUP;
	*out = s->ops;
	return 0;
}

const char *const *backend_schemes(void)
{
	static const char *names[BACKEND_NBUILTIN + 1];

	for (size_t i = 0; i < BACKEND_NBUILTIN; i++)
		names[i] = backend_builtin[i].form->type;
	names[BACKEND_NBUILTIN] = NULL;
	return names;
}

const struct config_form *const *backend_config_forms(void)
{
	static const struct config_form *forms[BACKEND_NBUILTIN + 1];

	for (size_t i = 0; i < BACKEND_NBUILTIN; i++)
		forms[i] = backend_builtin[i].form;
	forms[BACKEND_NBUILTIN] = NULL;
	return forms;
}

static int backend_key_in(const char *const *keys, const char *key)
{
	for (; keys && *keys; keys++)
		if (strcmp(*keys, key) == 0)
			return 1;
	return 0;
}

/* Reports the type of @ds that cannot be used; returns its ops or NULL. */
static const struct backend_ops *backend_check_type(const struct datastore_config *ds,
						    struct diag *d)
{
	const struct backend_ops *ops;
	int ret = backend_lookup(&ops, ds->type);

	if (ret == 0 && strcmp(ds->type, "archive") == 0) {
		diag_add(d, ds->file, ds->type_line, "[datastore %s] type: archive is not a datastore "
			 "type: name an archive as a source (DATASTORE:/path/x.zip)", ds->name);
		return NULL;
	}
	if (ret == -ENOENT) {
		char known[128] = "";
		size_t len = 0;

		/* the registry's own list; archive is a source's kind, not a datastore's type */
		for (const char *const *k = backend_schemes(); *k; k++)
			if (strcmp(*k, "archive") != 0 && len < sizeof(known))
				len += (size_t)snprintf(known + len, sizeof(known) - len, "%s%s",
							len ? ", " : "", *k);
		diag_add(d, ds->file, ds->type_line, "[datastore %s] type: unknown type '%s' (known: %s)",
			 ds->name, ds->type, known);
	}
	else if (ret == -ENOTSUP)
		diag_add(d, ds->file, ds->type_line,
			 "[datastore %s] type: %s backend not compiled in", ds->name, ds->type);
	return ret == 0 ? ops : NULL;
}

static void backend_check_keys(const struct datastore_config *ds, struct diag *d)
{
	const struct backend_scheme *s = backend_find_builtin(ds->type);
	const struct backend_ops *extra = backend_find_extra(ds->type);

	if (!s && !extra)
		return;
	for (size_t i = 0; i < ds->n_kv; i++) {
		const char *key = ds->kv[i].key;

		struct key_hint h;

		if (backend_key_in(backend_common_keys, key) ||
		    (s && backend_key_in(s->form->keys, key)) || extra)
			continue;
		key_hint_init(&h, key);
		for (const char *const *k = s->form->keys; k && *k; k++)
			key_hint_add(&h, *k);
		for (const char *const *k = backend_common_keys; *k; k++)
			key_hint_add(&h, *k);
		diag_add(d, ds->file, ds->kv[i].line, "[datastore %s]: unknown key '%s' for type %s%s",
			 ds->name, key, ds->type, key_hint_text(&h));
	}
}

static void backend_check_scheme(const char *scheme, const struct source_config *src,
				 const char *file, struct diag *d)
{
	const struct backend_ops *ops;

	if (backend_lookup(&ops, scheme) == -ENOTSUP)
		diag_add(d, file, src->source_line, "[%s %s] source: %s backend not compiled in",
			 config_source_word(src->kind), src->name, scheme);
}

static void backend_check_source(const struct mlfs_config *cfg, const struct source_config *src,
				 struct diag *d)
{
	const char *file = cfg->file;
	const struct datastore_config *ds;
	const struct backend_ops *ops;

	if (src->datastore && (ds = config_find_datastore(cfg, src->datastore)) &&
	    backend_lookup(&ops, ds->type) == 0 && ops->validate_source)
		ops->validate_source(ds, src, d);
	/* a URL source's datastore is implicit, of the type of its form: checked here */
	if (src->url_scheme && src->datastore && (ds = config_find_datastore(cfg, src->datastore)))
		backend_check_scheme(ds->type, src, file, d);
	if (path_is_archive(src->source))
		backend_check_scheme("archive", src, file, d);
}

int backend_check_config(const struct mlfs_config *cfg, struct diag *d)
{
	size_t before = d->n;

	for (size_t i = 0; i < cfg->n_datastores; i++) {
		const struct datastore_config *ds = &cfg->datastores[i];
		const struct backend_ops *ops = NULL;

		/* An implicit datastore's type is its source's scheme, reported there. */
		if (ds->implicit && backend_lookup(&ops, ds->type) < 0)
			continue;
		if (!ds->implicit)
			ops = backend_check_type(ds, d);
		backend_check_keys(ds, d);
		if (ops && ops->validate)
			ops->validate(ds, d);
	}
	for (size_t i = 0; i < cfg->n_sources; i++)
		backend_check_source(cfg, &cfg->sources[i], d);
	return d->n > before ? -EINVAL : 0;
}

int backend_create(struct backend **out, const struct datastore_config *cfg,
		   unsigned int index)
{
	const struct backend_ops *ops;
	struct backend *be;
	char *name = strdup(cfg->name);
	int ret;

	if (!name)
		return -ENOMEM;
	ret = backend_lookup(&ops, cfg->type);
	if (ret == 0)
		ret = ops->create(&be, cfg);
	if (ret < 0) {
		free(name);
		return ret;
	}
	be->ops = ops;
	be->name = name;
	be->index = index;
	*out = be;
	return 0;
}

int backend_create_archive(struct backend **out, struct backend *inner, const char *path,
			   const char *cache_dir, uint64_t cache_max, const char *name)
{
	return be_archive_create(out, inner, path, cache_dir, cache_max, name);
}

void backend_destroy(struct backend *be)
{
	if (!be)
		return;
	free(be->name);
	be->ops->destroy(be);
}

int backend_mknod(struct backend *be, const char *path, mode_t mode, dev_t rdev,
		  const struct backend_cred *cred)
{
	int ret = -ENOTSUP;

	/* a read-only backend (http) holds no special file either: EPERM too, as the issue asks */
	if ((be->ops->caps & BE_CAP_WRITE) && be->ops->version >= 4 && be->ops->mknod) {
		atomic_fetch_add(&be->stats.meta_ops, 1);
		backend_request_local(be);
		ret = be->ops->mknod(be, path, mode, rdev, cred);
	}
	if (ret != -ENOTSUP)
		return backend_count(be, ret);
	if (!atomic_exchange(&be->mknod_refused, true))
		log_warn("datastore %s (%s): special files (FIFOs, sockets, devices) cannot be "
			 "made there; mknod answers EPERM", be->name, be->ops->scheme);
	return backend_count(be, -EPERM);
}
