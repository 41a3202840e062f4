/*
 * be_http.h - the read-only http backend (be_http.c), and the pieces of it
 * the unit tests drive directly: the listing parsers and the URL splitting.
 */
#ifndef MLFS_BE_HTTP_H
#define MLFS_BE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "backend.h"

extern const struct backend_ops be_http_ops;
extern const struct config_form be_http_form;	/* its keys and URLs: config.h */

#define BE_HTTP_NAME_MAX	255	/* bytes of one name */

/* One entry of a folder listing. */
struct be_http_entry {
	char *name;		/* percent-decoded, one component: no '/', no NUL, not "." or ".." */
	bool is_dir;
	bool size_known;	/* size is an exact byte count */
	int64_t size;
	time_t mtime;		/* -1 when the listing gives none */
};

struct be_http_listing {
	struct be_http_entry *e;	/* sorted by name, no duplicates */
	size_t n;
	size_t cap;
};

/*
 * Parses a folder listing: JSON (nginx autoindex_format json) when
 * @content_type says json or the body starts with '[', else HTML (nginx or
 * Apache autoindex).  Links that are not a relative single component are
 * skipped.  Returns 0 (entries in @out, free with be_http_listing_free), -EIO
 * for a JSON body that does not parse, -ENOMEM.
 */
int be_http_parse_listing(struct be_http_listing *out, const char *body, size_t len,
			  const char *content_type);
int be_http_parse_json(struct be_http_listing *out, const char *body, size_t len);
int be_http_parse_html(struct be_http_listing *out, const char *body, size_t len);
void be_http_listing_free(struct be_http_listing *l);
/* Initialises the HTML parser; call once before threads parse (any number of calls is fine). */
void be_http_list_init(void);

/*
 * Percent-decodes @len bytes of @s into *out (malloc'd).  Returns 0, or
 * -EINVAL when the result is empty, "." or "..", or holds a '/' or a NUL.
 */
int be_http_decode_name(char **out, const char *s, size_t len);

/*
 * Splits a datastore URL.  A folder URL (ending in '/') gives *root = @url
 * and *file = NULL; a URL with no path at all gives *root = @url + "/".  A
 * file URL gives *root = @url and *file = its percent-decoded last component
 * (query left out): the name the file has in the backend's root folder.
 * Returns 0, -EINVAL for a URL that is not http(s)://HOST... or whose last
 * component is not a usable name, -ENOMEM.
 */
int be_http_split_url(const char *url, char **root, char **file);

#endif
