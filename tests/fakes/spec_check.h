/*
 * spec_check.h - assertions the spec parser tests share (test_spec*.c).
 */
#ifndef MLFS_SPEC_CHECK_H
#define MLFS_SPEC_CHECK_H

#include <stddef.h>

#include "spec.h"

/*
 * Parses @text as the file @file (job named @default_name when it names none)
 * and asserts it is refused: -EINVAL, the output pointer untouched, and
 * exactly the messages @want (NULL-terminated), in order.
 */
void spec_check_errors(const char *file, const char *default_name, const char *text,
		       const char *const *want);
/* Asserts that @s lists exactly @want (NULL-terminated) as ignored, in order. */
void spec_check_ignored(const struct spec *s, const char *const *want);
/* The value of @name among @n variables, or NULL. */
const char *spec_check_env(const struct spec_env *env, size_t n, const char *name);

#define SPEC_EXPECT_ERRORS(file, name, text, ...) \
	spec_check_errors((file), (name), (text), (const char *const[]){ __VA_ARGS__, NULL })
#define EXPECT_IGNORED(s, ...) spec_check_ignored((s), (const char *const[]){ __VA_ARGS__, NULL })

#endif
