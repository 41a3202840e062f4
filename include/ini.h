/*
 * ini.h - a small INI reader (config.c; the s3 backend reads ~/.aws/credentials with it).
 *
 * Turns text into a stream of events, one per meaningful line, each with its
 * line number.  It knows only the syntax (sections, `key = value`, comments,
 * quotes); what the sections and keys mean is the caller's business.  Lines
 * may be of any length.
 */
#ifndef MLFS_INI_H
#define MLFS_INI_H

#include <stddef.h>

enum ini_event_kind {
	INI_SECTION,		/* "[text]": section is the text, trimmed */
	INI_KEY,		/* "key = value": value may be "" */
	INI_BAD_HEADER,		/* a line starting with '[' that is not a header */
	INI_BAD_LINE,		/* any other line that is not understood */
};

struct ini_event {
	enum ini_event_kind kind;
	int line;		/* 1-based */
	const char *section;	/* INI_SECTION */
	const char *key;	/* INI_KEY, trimmed, never "" */
	const char *value;	/* INI_KEY: trimmed, comment removed, unquoted */
	const char *error;	/* INI_BAD_*: what is wrong, a constant string */
};

/*
 * Called once per event; the strings are valid only during the call.  A
 * non-zero return stops the reading and is returned by ini_parse.
 */
typedef int ini_handler_fn(void *payload, const struct ini_event *ev);

/*
 * Reads @len bytes of @text (no terminating NUL needed) and calls @fn for
 * every section header, key and bad line, in order.  Blank lines and
 * comments give no event.  Returns 0, -ENOMEM, or what @fn returned.
 */
int ini_parse(const char *text, size_t len, ini_handler_fn *fn, void *payload);

#endif
