/*
 * spec_check.c - assertions the spec parser tests share: a bad spec's exact
 * messages, the ignored list, a variable's value.  On a mismatch the whole
 * list is printed first, so a failing test shows what the parser said.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "spec_check.h"

static size_t spec_check_count(const char *const *v)
{
	size_t n = 0;

	while (v[n])
		n++;
	return n;
}

void spec_check_errors(const char *file, const char *default_name, const char *text,
		       const char *const *want)
{
	struct spec untouched;
	struct spec *s = &untouched;
	size_t n = spec_check_count(want);
	struct diag d;
	int ret;

	diag_init(&d);
	ret = spec_parse(&s, file, text, strlen(text), default_name, &d);
	if (d.n != n || ret != -EINVAL)
		diag_print(&d, stderr);
	assert_int_equal(ret, -EINVAL);
	assert_ptr_equal(s, &untouched);
	assert_int_equal(d.n, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(d.msgs[i], want[i]);
	diag_free(&d);
}

void spec_check_ignored(const struct spec *s, const char *const *want)
{
	size_t n = spec_check_count(want);

	if (s->n_ignored != n)
		for (size_t i = 0; i < s->n_ignored; i++)
			fprintf(stderr, "ignored: %s\n", s->ignored[i]);
	assert_int_equal(s->n_ignored, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(s->ignored[i], want[i]);
}

const char *spec_check_env(const struct spec_env *env, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(env[i].name, name) == 0)
			return env[i].value;
	return NULL;
}
