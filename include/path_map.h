/*
 * path_map.h - a hash table of entries named by a path, that grows with
 * what it holds: what a backend remembers of each file a listing named (the
 * S3 and HTTP metadata caches, stat_memo), at millions of entries.
 *
 * Entries are the caller's own allocations, each beginning with a struct
 * path_map_entry and holding its key, a NUL-terminated path, at the offset
 * given to path_map_init (a flexible array member at the end, so that an
 * entry, its attributes and its path are one allocation).  The table never
 * copies a key and frees entries only in path_map_clear (with free(3)).
 *
 * Buckets double when the entries outnumber them, so a lookup stays a
 * handful of comparisons however many paths a dataset has; a table that
 * cannot grow (ENOMEM) keeps working with longer chains.  Not thread-safe:
 * the owner holds its own lock around every call.
 */
#ifndef MLFS_PATH_MAP_H
#define MLFS_PATH_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct path_map_entry {
	struct path_map_entry *next;
	uint32_t hash;
};

struct path_map {
	struct path_map_entry **bucket;
	size_t n_buckets;	/* a power of two, or 0 before the first add */
	size_t n;		/* entries */
	size_t key_off;		/* offset of the key in an entry */
};

void path_map_init(struct path_map *m, size_t key_off);

/* The entry named @key, or NULL. */
struct path_map_entry *path_map_get(const struct path_map *m, const char *key);

/* Adds @e, whose key must not be in @m yet; false (not kept: the caller frees it) on ENOMEM. */
bool path_map_add(struct path_map *m, struct path_map_entry *e);

/* Takes the entry named @key out of @m and returns it (the caller frees it), or NULL. */
struct path_map_entry *path_map_take(struct path_map *m, const char *key);

/* Frees every entry (free(3)) and the buckets: @m is empty and may be used again. */
void path_map_clear(struct path_map *m);

#endif
