/*
 * path.c - canonical backend paths.
 *
 * The one place where a path a user or the kernel gave becomes a path a
 * backend sees.  Components are checked here so that no backend ever
 * receives "..", "." or an empty component: confinement to a datastore's
 * root starts with never asking for a way out of it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "path.h"

bool path_has_dotdot(const char *path)
{
	for (const char *p = path; *p;) {
		size_t len = strcspn(p, "/");

		if (path_is_dotdot(p, len))
			return true;
		p += len;
		p += *p == '/';
	}
	return false;
}

int path_check_name(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || strchr(name, '/'))
		return -EINVAL;
	if (strcmp(name, ".") == 0 || path_is_dotdot(name, len))
		return -EINVAL;
	if (len > NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

int path_join(char **out, const char *base, const char *name)
{
	char *p;

	if (base[0] == '\0')
		p = strdup(name);
	else if (name[0] == '\0')
		p = strdup(base);
	else if (asprintf(&p, "%s/%s", base, name) < 0)
		p = NULL;
	if (!p)
		return -ENOMEM;
	*out = p;
	return 0;
}

int path_canon(char **out, const char *path)
{
	size_t len = strlen(path);
	char *res = malloc(len + 1);
	size_t n = 0;
	const char *p = path;

	if (!res)
		return -ENOMEM;
	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t clen = (size_t)(end - p);

		if (path_is_dotdot(p, clen)) {
			free(res);
			return -EINVAL;
		}
		if (clen > NAME_MAX) {
			free(res);
			return -ENAMETOOLONG;
		}
		if (clen > 0 && !(clen == 1 && p[0] == '.')) {
			if (n > 0)
				res[n++] = '/';
			memcpy(res + n, p, clen);
			n += clen;
		}
		p = *end ? end + 1 : end;
	}
	res[n] = '\0';
	*out = res;
	return 0;
}

int path_shown_name(char **out, const char *name)
{
	char *s = strdup(name);

	if (!s)
		return -ENOMEM;
	for (char *c = s; *c; c++)
		if (*c == ' ')
			*c = '_';
	*out = s;
	return 0;
}

int path_is_archive(const char *path)
{
	static const char *const ext[] = { ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", NULL };
	size_t len = strlen(path);

	for (const char *const *e = ext; *e; e++) {
		size_t elen = strlen(*e);

		if (len > elen && strcasecmp(path + len - elen, *e) == 0)
			return 1;
	}
	return 0;
}

int path_mkdirs(const char *path, mode_t mode)
{
	char *p = strdup(path);
	int ret = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; ret == 0; s++) {
		bool end = *s == '\0';

		if (*s != '/' && !end)
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			ret = -errno;
		if (end)
			break;
		*s = '/';
	}
	free(p);
	return ret;
}

char *path_key_prefix(const char *root)
{
	size_t len;
	char *out;

	while (root && *root == '/')
		root++;
	if (!root || !*root)
		return strdup("");
	len = strlen(root);
	if (root[len - 1] == '/')
		return strdup(root);
	return asprintf(&out, "%s/", root) < 0 ? NULL : out;
}

static int path_remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void path_remove_tree(const char *path)
{
	nftw(path, path_remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}
