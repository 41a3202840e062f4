/*
 * diag.h - a list of user-facing error messages, each tied to a place in a file.
 *
 * Config and spec checking collect every problem they find instead of
 * stopping at the first, so a user fixes a file in one pass.  Messages are
 * stored fully formatted as "file:line: message" (line 0 omits the line).
 */
#ifndef MLFS_DIAG_H
#define MLFS_DIAG_H

#include <stddef.h>
#include <stdio.h>

struct diag {
	char **msgs;		/* formatted messages, owned */
	size_t n;
	size_t cap;
};

void diag_init(struct diag *d);
void diag_free(struct diag *d);

/* Adds "file:line: fmt..." (or "file: fmt..." when line is 0). */
void diag_add(struct diag *d, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Prints every message, one per line, to @out. */
void diag_print(const struct diag *d, FILE *out);

#endif
