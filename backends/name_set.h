/*
 * name_set.h - a set of names: path_map.h's table, each entry a name.
 *
 * What for: an object store's listing page may name a folder ("a/", keys
 * beneath it) and an object ("a") alike, and a folder cannot hold two
 * entries of one name.  The page's parsers (be_s3_xml.c, be_azure_xml.c)
 * put its folders' names, and its non-empty objects', in sets first, then
 * leave out what name_set_twin_hidden says.
 *
 * A set zeroed ({ 0 }) is empty.  Not thread-safe: one parser's, for one page.
 */
#ifndef MLFS_NAME_SET_H
#define MLFS_NAME_SET_H

#include <stdbool.h>
#include <stddef.h>

#include "path_map.h"

struct name_set {
	struct path_map map;
};

/* Adds the @len bytes of @name (copied; a name already there is kept once).  0 or -ENOMEM. */
int name_set_add(struct name_set *s, const char *name, size_t len);
bool name_set_has(const struct name_set *s, const char *name);
void name_set_free(struct name_set *s);
/*
 * The rule for twins, over a page's @dirs (its folders' names) and @files
 * (its objects of one byte or more): whether entry @name, a folder when
 * @is_dir, is left out.  A folder hides an empty object of its name (a
 * marker some tools write); an object with bytes hides the folder.
 */
bool name_set_twin_hidden(const struct name_set *dirs, const struct name_set *files,
			  const char *name, bool is_dir);

#endif
