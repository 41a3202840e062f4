/*
 * executor.c - the registry of executors.
 *
 * One table names the built-in executors (local, slurm); tests add fakes
 * with exec_register(), behind the same contract.  A table is checked once,
 * when it is registered: its version is one this build knows, and it has
 * every method its kind needs.  The config reader knows no executor's name:
 * `[mlfs] executor` is checked here (exec_check_config, run by
 * cmd_load_config beside backend_check_config, and again when the
 * scheduler makes its executor), with the same "file:line:" message a bad
 * value of any other key gets.
 *
 * The registry is filled before any thread starts and only read after.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "diag.h"
#include "exec.h"

#define EXEC_MAX_EXTRA 8

static const struct exec_ops *const exec_builtins[] = { &exec_local_ops, &exec_slurm_ops };

#define EXEC_NBUILTIN (sizeof(exec_builtins) / sizeof(exec_builtins[0]))

static const struct exec_ops *exec_extra[EXEC_MAX_EXTRA];
static size_t exec_nextra;

/* Whether @ops is a table this build can call: known version, required methods. */
static bool exec_ops_ok(const struct exec_ops *ops)
{
	bool cluster;

	if (!ops || ops->version < 1 || ops->version > EXEC_OPS_VERSION || !ops->name ||
	    !ops->name[0] || !ops->create || !ops->destroy || !ops->start || !ops->signal ||
	    !ops->poll || !ops->adopt)
		return false;
	if (ops->version < 2)
		return true;
	/* a cluster's methods come together: the scheduler asks for all three */
	cluster = ops->submit || ops->refresh || ops->fits;
	return !cluster || (ops->submit && ops->refresh && ops->fits);
}

static const struct exec_ops *exec_find(const char *name)
{
	for (size_t i = 0; i < EXEC_NBUILTIN; i++)
		if (strcmp(exec_builtins[i]->name, name) == 0) {
			assert(exec_ops_ok(exec_builtins[i]));
			return exec_builtins[i];
		}
	for (size_t i = 0; i < exec_nextra; i++)
		if (strcmp(exec_extra[i]->name, name) == 0)
			return exec_extra[i];
	return NULL;
}

int exec_register(const struct exec_ops *ops)
{
	if (!exec_ops_ok(ops))
		return -EINVAL;
	if (exec_find(ops->name))
		return -EEXIST;
	if (exec_nextra == EXEC_MAX_EXTRA)
		return -ENOSPC;
	exec_extra[exec_nextra++] = ops;
	return 0;
}

int exec_lookup(const struct exec_ops **out, const char *name)
{
	const struct exec_ops *ops = exec_find(name);

	if (!ops)
		return -ENOENT;
	*out = ops;
	return 0;
}

const char *const *exec_names(void)
{
	static const char *names[EXEC_NBUILTIN + 1];

	for (size_t i = 0; i < EXEC_NBUILTIN; i++)
		names[i] = exec_builtins[i]->name;
	names[EXEC_NBUILTIN] = NULL;
	return names;
}

bool exec_builtin(const struct exec_ops *ops)
{
	for (size_t i = 0; i < EXEC_NBUILTIN; i++)
		if (exec_builtins[i] == ops)
			return true;
	return false;
}

/* "local or slurm": the built-in names, for a message. */
static void exec_names_words(char *buf, size_t len)
{
	const char *const *names = exec_names();
	size_t n = 0, at = 0;

	while (names[n])
		n++;
	buf[0] = '\0';
	for (size_t i = 0; i < n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
				       names[i]);
}

int exec_check_config(const struct mlfs_config *cfg, struct diag *d)
{
	const struct exec_ops *ops;
	char words[128];

	if (!cfg->executor || exec_lookup(&ops, cfg->executor) == 0)
		return 0;
	exec_names_words(words, sizeof(words));
	diag_add(d, cfg->file, cfg->executor_line, "[mlfs] executor: unknown executor '%s' (use %s)",
		 cfg->executor, words);
	return -EINVAL;
}

int exec_create(struct executor **out, const struct mlfs_config *cfg)
{
	const struct exec_ops *ops;
	int ret = exec_lookup(&ops, cfg->executor ? cfg->executor : "local");

	if (ret == 0)
		ret = ops->create(out, cfg);
	if (ret == 0)
		(*out)->ops = ops;
	return ret;
}

void exec_destroy(struct executor *ex)
{
	if (ex)
		ex->ops->destroy(ex);
}
