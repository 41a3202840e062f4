/*
 * name_set.c - a set of names over path_map (name_set.h says what for).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "name_set.h"

struct name_set_entry {
	struct path_map_entry e;
	char name[];
};

int name_set_add(struct name_set *s, const char *name, size_t len)
{
	struct name_set_entry *n = malloc(sizeof(*n) + len + 1);

	if (!n)
		return -ENOMEM;
	s->map.key_off = offsetof(struct name_set_entry, name);	/* a zeroed set's too */
	memcpy(n->name, name, len);
	n->name[len] = '\0';
	if (path_map_get(&s->map, n->name)) {
		free(n);	/* there already */
		return 0;
	}
	if (path_map_add(&s->map, &n->e))
		return 0;
	free(n);
	return -ENOMEM;
}

bool name_set_has(const struct name_set *s, const char *name)
{
	return path_map_get(&s->map, name) != NULL;
}

void name_set_free(struct name_set *s)
{
	path_map_clear(&s->map);
}

bool name_set_twin_hidden(const struct name_set *dirs, const struct name_set *files,
			  const char *name, bool is_dir)
{
	if (name_set_has(files, name))
		return is_dir;
	return !is_dir && name_set_has(dirs, name);
}
