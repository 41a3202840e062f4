/*
 * cfg_check.c - config helpers shared by the backends' unit tests
 * (cfg_check.h).  Not thread-safe; cmocka runs tests one at a time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "backend.h"
#include "cfg_check.h"

struct mlfs_config *cfg_check_load(const char *text)
{
	struct mlfs_config *cfg = NULL;
	struct diag d;

	diag_init(&d);
	if (config_parse(&cfg, "/etc/mlfs.conf", text, strlen(text), backend_config_forms(), &d) != 0)
		diag_print(&d, stderr);
	diag_free(&d);
	assert_non_null(cfg);
	return cfg;
}

const struct datastore_config *cfg_check_ds(const struct mlfs_config *cfg, const char *name)
{
	const struct datastore_config *d = config_find_datastore(cfg, name);

	assert_non_null(d);
	return d;
}

void cfg_check_validate(const struct backend_ops *ops, const char *text,
			const char *const *want)
{
	struct mlfs_config *cfg = cfg_check_load(text);
	struct diag d;
	size_t n = 0;
	int ret;

	diag_init(&d);
	ret = ops->validate(cfg_check_ds(cfg, "d"), &d);
	for (; want[n]; n++) {
		assert_true(n < d.n);
		assert_string_equal(d.msgs[n], want[n]);
	}
	if (d.n != n)
		diag_print(&d, stderr);
	assert_int_equal(d.n, n);
	assert_int_equal(ret, n ? -EINVAL : 0);
	diag_free(&d);
	config_free(cfg);
}
