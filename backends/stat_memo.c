/*
 * stat_memo.c - a path -> struct stat map for trusted opens (stat_memo.h):
 * FNV-1a buckets under one mutex; an entry is one allocation, its path
 * after its attributes.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stat_memo.h"

#define STAT_MEMO_BUCKETS	16384u

struct stat_memo_entry {
	struct stat_memo_entry *next;
	struct stat st;
	char path[];
};

struct stat_memo {
	pthread_mutex_t lock;
	size_t n, max;
	struct stat_memo_entry *bucket[STAT_MEMO_BUCKETS];
};

struct stat_memo *stat_memo_new(size_t max_entries)
{
	struct stat_memo *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	pthread_mutex_init(&m->lock, NULL);
	m->max = max_entries ? max_entries : 1;
	return m;
}

/* Empties @m; under its lock. */
static void stat_memo_clear(struct stat_memo *m)
{
	for (size_t i = 0; i < STAT_MEMO_BUCKETS; i++)
		while (m->bucket[i]) {
			struct stat_memo_entry *e = m->bucket[i];

			m->bucket[i] = e->next;
			free(e);
		}
	m->n = 0;
}

void stat_memo_free(struct stat_memo *m)
{
	if (!m)
		return;
	stat_memo_clear(m);
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

static size_t stat_memo_hash(const char *key)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h % STAT_MEMO_BUCKETS;
}

static struct stat_memo_entry **stat_memo_find(struct stat_memo *m, const char *key)
{
	struct stat_memo_entry **pp = &m->bucket[stat_memo_hash(key)];

	while (*pp && strcmp((*pp)->path, key) != 0)
		pp = &(*pp)->next;
	return pp;
}

static void stat_memo_set(struct stat_memo *m, const char *key, const struct stat *st)
{
	struct stat_memo_entry **pp, *e;
	size_t len = strlen(key) + 1;

	pthread_mutex_lock(&m->lock);
	pp = stat_memo_find(m, key);
	if (*pp) {
		(*pp)->st = *st;
	} else {
		if (m->n >= m->max) {
			stat_memo_clear(m);
			pp = stat_memo_find(m, key);
		}
		e = malloc(sizeof(*e) + len);
		if (e) {
			e->next = NULL;
			e->st = *st;
			memcpy(e->path, key, len);
			*pp = e;
			m->n++;
		}
	}
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
	struct stat_memo_entry **pp;
	char key[4096];
	bool found = false;

	if (!m || !stat_memo_key(key, sizeof(key), path, NULL))
		return false;
	pthread_mutex_lock(&m->lock);
	pp = stat_memo_find(m, key);
	if (*pp) {
		*st = (*pp)->st;
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
	stat_memo_clear(m);
	pthread_mutex_unlock(&m->lock);
}

size_t stat_memo_count(struct stat_memo *m)
{
	size_t n;

	if (!m)
		return 0;
	pthread_mutex_lock(&m->lock);
	n = m->n;
	pthread_mutex_unlock(&m->lock);
	return n;
}
