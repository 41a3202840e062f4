/*
 * config_source.c - the keys of a source section: `source` in [dataset],
 * [checkpoint], [model] and [source] (a URL of a form's scheme, or
 * DATASTORE:/path), and [source]'s own `mount_path` and `sub_path`.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"
#include "path.h"

/* "scheme://rest": keeps the scheme, lowercased, when a form reads it. */
static int config_source_url(struct config_parser *p, struct source_config *src, size_t slen)
{
	char *scheme = strndup(src->source, slen);
	char known[160];

	if (!scheme)
		return -ENOMEM;
	for (char *c = scheme; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	if (!config_form_of_url(p->cfg, src->source, scheme)) {
		config_known_schemes(p->cfg, known, sizeof(known));
		config_key_error(p, src->source_line, "source", "unknown URL scheme '%s' "
				 "(use %s)", scheme, known[0] ? known : "a datastore");
	} else if (src->source[slen + 3] == '\0') {
		config_key_error(p, src->source_line, "source", "nothing after '%s://'",
				 scheme);
	} else {
		src->url_scheme = scheme;
	}
	if (!src->url_scheme)
		free(scheme);
	return 0;
}

/* "DATASTORE:path", @nlen the length of DATASTORE. */
static int config_source_store_path(struct config_parser *p, struct source_config *src,
				    size_t nlen)
{
	int ret = path_canon(&src->path, src->source + nlen + 1);

	if (ret == -EINVAL)
		config_key_error(p, src->source_line, "source",
				 "'..' is not allowed in '%s'", src->source);
	else if (ret == -ENAMETOOLONG)
		config_key_error(p, src->source_line, "source",
				 "a name in '%s' is longer than 255 bytes", src->source);
	if (ret)
		return ret == -ENOMEM ? ret : 0;
	src->datastore = strndup(src->source, nlen);
	return src->datastore ? 0 : -ENOMEM;
}

int config_source_parse(struct config_parser *p, struct source_config *src)
{
	const char *v = src->source;
	const char *sep = strstr(v, "://");
	const char *colon = strchr(v, ':');

	if (sep)
		return config_source_url(p, src, (size_t)(sep - v));
	if (!colon || !config_datastore_name_ok(v, (size_t)(colon - v))) {
		config_key_error(p, src->source_line, "source",
				 "'%s' is neither DATASTORE:/path nor a URL", v);
		return 0;
	}
	return config_source_store_path(p, src, (size_t)(colon - v));
}

/*
 * mount_path: absolute, canonical, not "/"; sub_path: relative, canonical;
 * neither with "..".  Into *@out (malloc'd) or an error.
 */
static int config_source_folder(struct config_parser *p, int line, const char *key,
				const char *value, char **out)
{
	bool mount = strcmp(key, "mount_path") == 0;
	char *canon = NULL;
	int ret;

	if (*out) {
		config_key_error(p, line, key, "duplicate key");
		return 0;
	}
	if (mount && value[0] != '/') {
		config_key_error(p, line, key, "'%s' is not an absolute path", value);
		return 0;
	}
	ret = path_canon(&canon, value);
	if (ret == -EINVAL)
		config_key_error(p, line, key, "'..' is not allowed in '%s'", value);
	else if (ret == -ENAMETOOLONG)
		config_key_error(p, line, key, "a name in '%s' is longer than 255 bytes", value);
	else if (ret == 0 && mount && !canon[0])
		config_key_error(p, line, key, "'%s' is the container's root", value);
	if (ret || (mount && !canon[0])) {
		free(canon);
		return ret == -ENOMEM ? ret : 0;
	}
	if (mount && asprintf(out, "/%s", canon) < 0)
		*out = NULL;
	else if (!mount)
		*out = canon, canon = NULL;
	free(canon);
	return *out ? 0 : -ENOMEM;
}

int config_source_key(struct config_parser *p, int line, const char *key, const char *value)
{
	struct source_config *src = &p->cfg->sources[p->cur];

	if (src->kind == SOURCE_SOURCE && (strcmp(key, "mount_path") == 0 ||
					   strcmp(key, "sub_path") == 0))
		return config_empty(p, line, key, value) ? 0 :
		       config_source_folder(p, line, key, value, key[0] == 'm' ?
					    &src->mount_path : &src->sub_path);
	if (strcmp(key, "source") != 0) {
		struct key_hint h;

		key_hint_init(&h, key);
		key_hint_add(&h, "source");
		if (src->kind == SOURCE_SOURCE) {
			key_hint_add(&h, "mount_path");
			key_hint_add(&h, "sub_path");
		}
		config_error(p, line, "%s: unknown key '%s'%s", p->label, key, key_hint_text(&h));
		return 0;
	}
	if (src->source_line) {
		config_key_error(p, line, key, "duplicate key (first at line %d)",
				 src->source_line);
		return 0;
	}
	if (config_empty(p, line, key, value))
		return 0;
	src->source_line = line;
	src->source = strdup(value);
	if (!src->source)
		return -ENOMEM;
	return config_source_parse(p, src);
}
