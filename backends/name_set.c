/*
 * name_set.c - a set of names: a sorted array, searched by halves
 * (name_set.h says what for).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "name_set.h"

int name_set_add(struct name_set *s, const char *name, size_t len)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		char **v = reallocarray(s->v, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n] = strndup(name, len);
	if (!s->v[s->n])
		return -ENOMEM;
	s->n++;
	return 0;
}

static int name_set_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void name_set_seal(struct name_set *s)
{
	if (s->n > 1)
		qsort(s->v, s->n, sizeof(*s->v), name_set_cmp);
}

bool name_set_has(const struct name_set *s, const char *name)
{
	return s->n && bsearch(&name, s->v, s->n, sizeof(*s->v), name_set_cmp);
}

void name_set_free(struct name_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	*s = (struct name_set){ 0 };
}

bool name_set_twin_hidden(const struct name_set *dirs, const struct name_set *files,
			  const char *name, bool is_dir)
{
	if (name_set_has(files, name))
		return is_dir;
	return !is_dir && name_set_has(dirs, name);
}
