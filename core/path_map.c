/*
 * path_map.c - a path-keyed hash table that grows (path_map.h): FNV-1a
 * hashes kept in each entry, so doubling the buckets rehashes no key.
 */
#include <stdlib.h>
#include <string.h>

#include "path_map.h"

#define PATH_MAP_FIRST	1024u	/* buckets at the first add */

static uint32_t path_map_hash(const char *key)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

static const char *path_map_key(const struct path_map *m, const struct path_map_entry *e)
{
	return (const char *)e + m->key_off;
}

void path_map_init(struct path_map *m, size_t key_off)
{
	*m = (struct path_map){ .key_off = key_off };
}

/* Doubles the buckets (or makes the first ones); on ENOMEM the chains just get longer. */
static void path_map_grow(struct path_map *m)
{
	size_t n = m->n_buckets ? m->n_buckets * 2 : PATH_MAP_FIRST;
	struct path_map_entry **b = calloc(n, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < m->n_buckets; i++) {
		while (m->bucket[i]) {
			struct path_map_entry *e = m->bucket[i];

			m->bucket[i] = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	free(m->bucket);
	m->bucket = b;
	m->n_buckets = n;
}

static struct path_map_entry **path_map_slot(const struct path_map *m, const char *key)
{
	uint32_t h = path_map_hash(key);
	struct path_map_entry **pp = &m->bucket[h & (m->n_buckets - 1)];

	while (*pp && ((*pp)->hash != h || strcmp(path_map_key(m, *pp), key) != 0))
		pp = &(*pp)->next;
	return pp;
}

struct path_map_entry *path_map_get(const struct path_map *m, const char *key)
{
	return m->n_buckets ? *path_map_slot(m, key) : NULL;
}

bool path_map_add(struct path_map *m, struct path_map_entry *e)
{
	struct path_map_entry **b;

	if (m->n >= m->n_buckets)
		path_map_grow(m);
	if (!m->n_buckets)
		return false;	/* no memory for even the first buckets */
	e->hash = path_map_hash(path_map_key(m, e));
	b = &m->bucket[e->hash & (m->n_buckets - 1)];
	e->next = *b;
	*b = e;
	m->n++;
	return true;
}

struct path_map_entry *path_map_take(struct path_map *m, const char *key)
{
	struct path_map_entry **pp, *e;

	if (!m->n_buckets)
		return NULL;
	pp = path_map_slot(m, key);
	e = *pp;
	if (e) {
		*pp = e->next;
		m->n--;
	}
	return e;
}

void path_map_clear(struct path_map *m)
{
	for (size_t i = 0; i < m->n_buckets; i++) {
		while (m->bucket[i]) {
			struct path_map_entry *e = m->bucket[i];

			m->bucket[i] = e->next;
			free(e);
		}
	}
	free(m->bucket);
	path_map_init(m, m->key_off);
}
