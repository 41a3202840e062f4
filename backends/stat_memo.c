/*
 * stat_memo.c - a path -> attributes map for trusted opens (stat_memo.h):
 * a path_map under one mutex; an entry is one allocation, the attributes
 * getattr gives back (about 100 bytes, not struct stat's 144) then its path.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "path_map.h"
#include "stat_memo.h"
#include "stat_pack.h"

/* What getattr gives back, without struct stat's padding and unused fields. */
struct stat_memo_entry {
	struct path_map_entry link;
	struct stat_pack st;
	char path[];
};

struct stat_memo {
	pthread_mutex_t lock;
	size_t max;
	struct path_map map;	/* of stat_memo_entry */
};

struct stat_memo *stat_memo_new(size_t max_entries)
{
	struct stat_memo *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	pthread_mutex_init(&m->lock, NULL);
	m->max = max_entries ? max_entries : 1;
	path_map_init(&m->map, offsetof(struct stat_memo_entry, path));
	return m;
}

void stat_memo_free(struct stat_memo *m)
{
	if (!m)
		return;
	path_map_clear(&m->map);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

/* @dir and @name joined into @out ("" + "a" is "a"), leading '/' dropped; false if too long. */
static bool stat_memo_key(char *out, size_t len, const char *dir, const char *name)
{
	size_t n;

	while (*dir == '/')
		dir++;
	n = strlen(dir);
	while (n && dir[n - 1] == '/')
		n--;
	if (!name)
		return (size_t)snprintf(out, len, "%.*s", (int)n, dir) < len;
	return (size_t)snprintf(out, len, "%.*s%s%s", (int)n, dir, n ? "/" : "", name) < len;
}

static void stat_memo_set(struct stat_memo *m, const char *key, const struct stat *st)
{
	struct stat_memo_entry *e;
	size_t len = strlen(key) + 1;

	pthread_mutex_lock(&m->lock);
	e = (struct stat_memo_entry *)path_map_get(&m->map, key);
	if (!e) {
		if (m->map.n >= m->max)
			path_map_clear(&m->map);
		e = malloc(sizeof(*e) + len);
		if (e) {
			memcpy(e->path, key, len);
			if (!path_map_add(&m->map, &e->link)) {
				free(e);
				e = NULL;
			}
		}
	}
	if (e)
		stat_pack(&e->st, st);
	pthread_mutex_unlock(&m->lock);
}

void stat_memo_put(struct stat_memo *m, const char *path, const struct stat *st)
{
	char key[4096];

	if (m && stat_memo_key(key, sizeof(key), path, NULL))
		stat_memo_set(m, key, st);
}

void stat_memo_put_child(struct stat_memo *m, const char *dir, const char *name,
			 const struct stat *st)
{
	char key[4096];

	if (m && stat_memo_key(key, sizeof(key), dir, name))
		stat_memo_set(m, key, st);
}

bool stat_memo_get(struct stat_memo *m, const char *path, struct stat *st)
{
	const struct stat_memo_entry *e;
	char key[4096];
	bool found = false;

	if (!m || !stat_memo_key(key, sizeof(key), path, NULL))
		return false;
	pthread_mutex_lock(&m->lock);
	e = (const struct stat_memo_entry *)path_map_get(&m->map, key);
	if (e) {
		stat_unpack(&e->st, st);
		found = true;
	}
	pthread_mutex_unlock(&m->lock);
	return found;
}

void stat_memo_forget_all(struct stat_memo *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	path_map_clear(&m->map);
	pthread_mutex_unlock(&m->lock);
}

size_t stat_memo_count(struct stat_memo *m)
{
	size_t n;

	if (!m)
		return 0;
	pthread_mutex_lock(&m->lock);
	n = m->map.n;
	pthread_mutex_unlock(&m->lock);
	return n;
}
