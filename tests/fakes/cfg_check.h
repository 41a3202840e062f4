/*
 * cfg_check.h - config helpers for the unit tests of backends: a config from
 * text, one of its datastores, and a backend's validate checked against the
 * exact messages wanted.  Failures are cmocka assertions.
 */
#ifndef MLFS_CFG_CHECK_H
#define MLFS_CFG_CHECK_H

#include "backend.h"
#include "config.h"

/* The config of @text, read as "/etc/mlfs.conf"; free with config_free. */
struct mlfs_config *cfg_check_load(const char *text);

/* The datastore @name of @cfg, which must exist. */
const struct datastore_config *cfg_check_ds(const struct mlfs_config *cfg, const char *name);

/*
 * Runs @ops->validate on the [datastore d] of @text and checks that it adds
 * exactly the messages of @want (NULL-terminated), in order, and returns
 * -EINVAL when it adds any (0 otherwise).
 */
void cfg_check_validate(const struct backend_ops *ops, const char *text,
			const char *const *want);

#endif
