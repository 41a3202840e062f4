/*
 * be_git_url.c - what a config says of a git datastore (be_git_form): the
 * keys of its section, and which URLs name a repository: git:// and
 * git+http(s):// URLs, and http(s):// ones whose path ends in ".git", each
 * with an optional "#REF".  Built with or without libgit2, so a build that
 * leaves git out still knows the type and says it is not compiled in.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "be_git.h"
#include "config.h"

bool be_git_is_commit(const char *ref)
{
	return strlen(ref) == 40 && strspn(ref, "0123456789abcdef") == 40;
}

/* Whether @ref is a name git allows for a branch or tag (git check-ref-format's rules). */
static bool be_git_ref_ok(const char *ref)
{
	size_t len = strlen(ref);

	if (len == 0 || len > 255 || ref[0] == '-' || ref[0] == '/' || ref[len - 1] == '/' ||
	    ref[len - 1] == '.' || strstr(ref, "..") || strstr(ref, "//") || strstr(ref, "@{") ||
	    (len >= 5 && strcmp(ref + len - 5, ".lock") == 0))
		return false;
	for (const unsigned char *p = (const unsigned char *)ref; *p; p++)
		if (*p < 0x21 || *p == 0x7f || strchr("~^:?*[\\", *p))
			return false;
	return true;
}

/* The part of @src after "git+" when it has it. */
static const char *be_git_bare(const char *src)
{
	return strncasecmp(src, "git+", 4) == 0 ? src + 4 : src;
}

bool be_git_claims(const char *src)
{
	const char *s = be_git_bare(src), *end;
	size_t len;

	if (s != src || strncasecmp(s, "git://", 6) == 0)
		return true;
	if (strncasecmp(s, "http://", 7) != 0 && strncasecmp(s, "https://", 8) != 0)
		return false;
	end = strchr(s, '#');
	len = end ? (size_t)(end - s) : strlen(s);
	while (len > 0 && s[len - 1] == '/')
		len--;
	return len > 4 && strncasecmp(s + len - 4, ".git", 4) == 0;
}

/* Whether @s (@len bytes) is SCHEME://HOST..., the scheme of letters, digits, '+', '-', '.'. */
static bool be_git_url_ok(const char *s, size_t len)
{
	const char *sep = strstr(s, "://");
	size_t slen = sep ? (size_t)(sep - s) : 0;

	if (!sep || slen == 0 || slen + 3 >= len || s[slen + 3] == '/' ||
	    !isalpha((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < slen; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("+-.", s[i]))
			return false;
	return true;
}

int be_git_split(const char *src, char **url, char **ref)
{
	const char *s = be_git_bare(src), *hash = strchr(s, '#');
	size_t len = hash ? (size_t)(hash - s) : strlen(s);

	*url = *ref = NULL;
	if (!be_git_claims(src) || !be_git_url_ok(s, len) || (hash && !be_git_ref_ok(hash + 1)))
		return -EINVAL;
	*url = strndup(s, len);
	*ref = strdup(hash ? hash + 1 : "");
	if (!*url || !*ref) {
		free(*url);
		free(*ref);
		*url = *ref = NULL;
		return -ENOMEM;
	}
	return 0;
}

/*
 * A git URL: the datastore's `url` (without "git+" and the fragment) and
 * `ref` (the fragment); a configured git datastore of the same URL lends
 * its credentials.
 */
static int git_url_keys(const struct mlfs_config *cfg, struct datastore_config *ds,
			const char *src, const char *rest, int line)
{
	static const char *const own[] = { "url", "ref", NULL };
	const struct datastore_config *like = NULL;
	char *url, *ref;
	int ret = be_git_split(src, &url, &ref);

	(void)rest;
	if (ret < 0)
		return ret == -EINVAL ? config_kv_add(ds, "url", src, line) : ret;
	for (size_t i = 0; !like && i < cfg->n_datastores; i++) {
		const struct datastore_config *c = &cfg->datastores[i];
		const char *u = config_get(c, "url", NULL);

		if (!c->implicit && c->type && strcmp(c->type, "git") == 0 && u &&
		    strcmp(u, url) == 0)
			like = c;
	}
	ret = config_borrow(ds, like, own, line);
	if (ret == 0)
		ret = config_kv_add(ds, "url", url, line);
	if (ret == 0 && ref[0])
		ret = config_kv_add(ds, "ref", ref, line);
	free(url);
	free(ref);
	return ret;
}

static const char *const git_keys[] = {
	"url", "ref", "username", "password", "password_file", "credentials_file", "lfs",
	"lfs_url", NULL
};
static const char *const git_schemes[] = { "git", "git+https", "git+http", NULL };

const struct config_form be_git_form = {
	.type = "git",
	.keys = git_keys,
	.schemes = git_schemes,
	.claims = be_git_claims,
	.url_keys = git_url_keys,
};
