/*
 * fuzz_name.h - the promise every remote listing parser makes about the
 * names it yields, checked by the fuzz targets: one path component, never
 * empty, ".", "..", holding a '/', or longer than NAME_MAX.  (A NUL cannot
 * be seen in a C string: the parsers refuse names that decode to one.)
 */
#ifndef MLFS_FUZZ_NAME_H
#define MLFS_FUZZ_NAME_H

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static inline void fuzz_check_name(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (len == 0 || len > NAME_MAX || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		abort();
}

#endif
