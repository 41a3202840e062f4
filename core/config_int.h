/*
 * config_int.h - what config.c (reading the file) and config_sources.c
 * (what follows from the whole file) share.
 */
#ifndef MLFS_CONFIG_INT_H
#define MLFS_CONFIG_INT_H

#include "config.h"

/* "dataset", "checkpoint", "model" by enum source_kind. */
extern const char *const config_source_words[];

/* Appends @key = @value (read at @line) to @ds's kv[]; 0 or -ENOMEM. */
int config_kv_add(struct datastore_config *ds, const char *key, const char *value, int line);

/* Fills what follows from the whole file: implicit datastores, inherited values. */
int config_finish(struct mlfs_config *cfg);

/* Appends an implicit datastore of @type named "KIND:SHOWN" for @src; NULL on ENOMEM. */
struct datastore_config *config_add_implicit(struct mlfs_config *cfg, struct source_config *src,
					     const char *type);

/*
 * Where the implicit datastore of @src is rooted: its source, or for an
 * archive the source's folder (the archive then being src->path in it).
 * Sets src->path; hands out the root, or NULL on ENOMEM.
 */
char *config_implicit_root(struct source_config *src);

#endif
