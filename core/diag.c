/*
 * diag.c - a growing list of "file:line: message" strings.
 *
 * Checkers (config, specs, backends) add every problem they find; the caller
 * prints them all and fails once.  Messages are formatted when added, so a
 * diag owns no pointers into the things it describes.
 *
 * What it does not do: decide severity, or report its own failure.  When
 * memory runs out a message is dropped; the checker still fails, because it
 * counts its errors itself rather than trusting the list.  Not thread-safe.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"

void diag_init(struct diag *d)
{
	d->msgs = NULL;
	d->n = 0;
	d->cap = 0;
}

void diag_free(struct diag *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free(d->msgs[i]);
	free(d->msgs);
	diag_init(d);
}

/* Makes room for one more message; 0 or -1. */
static int diag_grow(struct diag *d)
{
	size_t cap = d->cap ? d->cap * 2 : 8;
	char **msgs;

	if (d->n < d->cap)
		return 0;
	msgs = reallocarray(d->msgs, cap, sizeof(*msgs));
	if (!msgs)
		return -1;
	d->msgs = msgs;
	d->cap = cap;
	return 0;
}

void diag_add(struct diag *d, const char *file, int line, const char *fmt, ...)
{
	char *text, *msg;
	va_list ap;
	int ret;

	assert(d && file && fmt);
	va_start(ap, fmt);
	ret = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (ret < 0)
		return;
	if (line > 0)
		ret = asprintf(&msg, "%s:%d: %s", file, line, text);
	else
		ret = asprintf(&msg, "%s: %s", file, text);
	free(text);
	if (ret < 0)
		return;
	if (diag_grow(d) < 0) {
		free(msg);
		return;
	}
	d->msgs[d->n++] = msg;
}

void diag_print(const struct diag *d, FILE *out)
{
	for (size_t i = 0; i < d->n; i++)
		fprintf(out, "%s\n", d->msgs[i]);
}
