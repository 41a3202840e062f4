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

/*
 * What to say after "unknown key 'KEY'": the known key it is most likely a
 * typo of, " (did you mean 'state_dir'?)" (at most two edits away, '-'
 * taken for '_' and case ignored), else the known keys, " (known: a, b)".
 * Fed one known key at a time (key_hint_add), so any table can list them.
 */
struct key_hint {
	const char *key;	/* the unknown key, borrowed */
	const char *near;	/* the closest known key so far, borrowed */
	size_t near_dist;
	char known[384];	/* "a, b, ..." (cut short with "...") */
	size_t len;
	char text[416];		/* what key_hint_text says */
};

void key_hint_init(struct key_hint *h, const char *key);
void key_hint_add(struct key_hint *h, const char *known);
/* The text to append (in @h, valid while it is); "" when no key was added. */
const char *key_hint_text(struct key_hint *h);

/* The known key the unknown one is likely a typo of, or NULL. */
const char *key_hint_near(const struct key_hint *h);

#endif
