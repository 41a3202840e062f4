/*
 * name_set.h - a set of names, filled, then sealed and asked.
 *
 * What for: an object store's listing page may name a folder ("a/", keys
 * beneath it) and an object ("a") alike, and a folder cannot hold two
 * entries of one name.  The page's parsers (be_s3_xml.c, be_azure_xml.c)
 * put its folders' names, and its non-empty objects', in sets first, then
 * leave out what name_set_twin_hidden says.
 *
 * Not thread-safe: one parser's, for one page.
 */
#ifndef MLFS_NAME_SET_H
#define MLFS_NAME_SET_H

#include <stdbool.h>
#include <stddef.h>

struct name_set {
	char **v;
	size_t n, cap;
};

/* Adds the @len bytes of @name (copied).  0 or -ENOMEM. */
int name_set_add(struct name_set *s, const char *name, size_t len);
/* Sorts the set, after which name_set_has may be asked. */
void name_set_seal(struct name_set *s);
bool name_set_has(const struct name_set *s, const char *name);
void name_set_free(struct name_set *s);
/*
 * The rule for twins, over a page's sealed @dirs (its folders' names) and
 * @files (its objects of one byte or more): whether entry @name, a folder
 * when @is_dir, is left out.  A folder hides an empty object of its name (a
 * marker some tools write); an object with bytes hides the folder.
 */
bool name_set_twin_hidden(const struct name_set *dirs, const struct name_set *files,
			  const char *name, bool is_dir);

#endif
