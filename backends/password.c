/*
 * password.c - a datastore's password from `password` or `password_file`,
 * and URLs as logs show them, without the secrets they may hold (password.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "password.h"

#define PASSWORD_MAX	1024

/* Why the password file at @path cannot be used, or NULL when it can. */
static const char *password_file_problem(const char *path, struct stat *st)
{
	if (stat(path, st) < 0)
		return strerror(errno);
	if (!S_ISREG(st->st_mode))
		return "not a file";
	if (st->st_mode & (S_IRGRP | S_IROTH | S_IWGRP | S_IWOTH))
		return "others can read or change it: refused (chmod 600 it)";
	return NULL;
}

void password_validate(const struct datastore_config *cfg, bool required, struct diag *d)
{
	int pline = cfg->line, fline = cfg->line;
	const char *pass = config_get(cfg, "password", &pline);
	const char *file = config_get(cfg, "password_file", &fline);
	const char *why;
	struct stat st;
	char *abs;

	if (pass && file)
		diag_add(d, cfg->file, fline, "[datastore %s] password_file: given with password "
			 "(give one of them)", cfg->name);
	if (required && !pass && !file)
		diag_add(d, cfg->file, cfg->line, "[datastore %s] password: missing (password or "
			 "password_file)", cfg->name);
	if (!file)
		return;
	abs = config_resolve_path(cfg->file, file);
	if (abs && (why = password_file_problem(abs, &st)))
		diag_add(d, cfg->file, fline, "[datastore %s] password_file: %s: %s", cfg->name,
			 abs, why);
	free(abs);
}

/* The first line of the password file (no network: create may do this). */
static int password_read_file(const struct datastore_config *cfg, const char *file, char **out)
{
	char *abs = config_resolve_path(cfg->file, file), buf[PASSWORD_MAX];
	const char *why;
	struct stat st;
	ssize_t n = -1;
	int fd;

	if (!abs)
		return -ENOMEM;
	why = password_file_problem(abs, &st);
	fd = why ? -1 : open(abs, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n < 0) {
		log_err("datastore %s: password_file %s: %s", cfg->name, abs,
			why ? why : strerror(errno));
		free(abs);
		return -EACCES;
	}
	free(abs);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	*out = strdup(buf);
	explicit_bzero(buf, sizeof(buf));
	return *out ? 0 : -ENOMEM;
}

int password_read(const struct datastore_config *cfg, char **out)
{
	const char *pass = config_get(cfg, "password", NULL);
	const char *file = config_get(cfg, "password_file", NULL);

	*out = NULL;
	if (file)
		return password_read_file(cfg, file, out);
	if (pass && !(*out = strdup(pass)))
		return -ENOMEM;
	return 0;
}

bool password_url_userinfo(const char *url, const char **start, size_t *len)
{
	const char *auth = strstr(url, "://"), *at;

	if (!auth)
		return false;
	auth += 3;
	at = memchr(auth, '@', strcspn(auth, "/?#"));
	if (!at)
		return false;
	*start = auth;
	*len = (size_t)(at - auth);
	return true;
}

void password_url_shown(char *out, size_t size, const char *url)
{
	const char *end = url + strcspn(url, "?#"), *user;
	size_t len;

	if (password_url_userinfo(url, &user, &len))
		snprintf(out, size, "%.*s%.*s", (int)(user - url), url,
			 (int)(end - (user + len + 1)), user + len + 1);
	else
		snprintf(out, size, "%.*s", (int)(end - url), url);
}
