/*
 * ini.c - a small INI reader with line numbers and no line length limit.
 *
 * Why our own: the libinih that distributions ship truncates lines past a
 * fixed buffer (200 bytes in Debian's build) and gives its handler no line
 * numbers, and config values (URLs, paths, sbatch arguments) are long while
 * every error must say where it is.
 *
 * The idea: copy the text once, cut it into lines in place, and hand each
 * meaningful line to the caller as an event.  The syntax:
 *
 *   - lines end with LF or CRLF; a UTF-8 byte order mark at the start is
 *     skipped; a NUL byte in a line makes it a bad line;
 *   - a line whose first non-blank character is ';' or '#' is a comment;
 *   - "[text]" is a section header; a comment may follow the ']';
 *   - "key = value" splits at the first '='; key and value are trimmed of
 *     blanks (spaces and tabs);
 *   - in a value, ';' or '#' at its start or after a blank starts a comment;
 *   - a value wholly enclosed in double quotes (a comment may follow the
 *     closing quote) loses the quotes and keeps everything between them, so
 *     it can hold " ; ".  There are no escapes.
 *
 * What it does not do: meaning.  Unknown sections, repeated keys and empty
 * values are passed on for the caller to judge.  Not thread-safe to share a
 * payload, but holds no state of its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ini.h"

static bool ini_is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static char *ini_skip_blanks(char *s)
{
	while (ini_is_blank(*s))
		s++;
	return s;
}

static void ini_trim_end(char *s)
{
	size_t n = strlen(s);

	while (n > 0 && ini_is_blank(s[n - 1]))
		s[--n] = '\0';
}

/* True when @s holds only blanks, possibly followed by a comment. */
static bool ini_rest_is_empty(char *s)
{
	s = ini_skip_blanks(s);
	return *s == '\0' || *s == ';' || *s == '#';
}

static int ini_bad(ini_handler_fn *fn, void *payload, enum ini_event_kind kind,
		   int line, const char *error)
{
	struct ini_event ev = { .kind = kind, .line = line, .error = error };

	return fn(payload, &ev);
}

static int ini_header(char *s, int line, ini_handler_fn *fn, void *payload)
{
	char *close = strchr(s, ']');
	struct ini_event ev = { .kind = INI_SECTION, .line = line };

	if (!close)
		return ini_bad(fn, payload, INI_BAD_HEADER, line,
			       "section header has no closing ']'");
	if (!ini_rest_is_empty(close + 1))
		return ini_bad(fn, payload, INI_BAD_HEADER, line,
			       "unexpected text after ']'");
	*close = '\0';
	s = ini_skip_blanks(s + 1);
	ini_trim_end(s);
	if (*s == '\0')
		return ini_bad(fn, payload, INI_BAD_HEADER, line, "empty section header");
	ev.section = s;
	return fn(payload, &ev);
}

/* Unquotes @v when it is wholly quoted; returns the value, in place. */
static char *ini_unquote(char *v)
{
	for (char *q = strchr(v + 1, '"'); q; q = strchr(q + 1, '"')) {
		if (ini_rest_is_empty(q + 1)) {
			*q = '\0';
			return v + 1;
		}
	}
	return NULL;
}

/* Cuts an inline comment off @v (blanks already skipped) and trims it. */
static char *ini_value(char *v)
{
	char *unquoted = *v == '"' ? ini_unquote(v) : NULL;

	if (unquoted)
		return unquoted;
	for (char *c = v; *c; c++) {
		if ((*c == ';' || *c == '#') && (c == v || ini_is_blank(c[-1]))) {
			*c = '\0';
			break;
		}
	}
	ini_trim_end(v);
	return v;
}

static int ini_pair(char *s, int line, ini_handler_fn *fn, void *payload)
{
	char *eq = strchr(s, '=');
	struct ini_event ev = { .kind = INI_KEY, .line = line };

	if (!eq)
		return ini_bad(fn, payload, INI_BAD_LINE, line,
			       "expected 'key = value', a [section] or a comment");
	*eq = '\0';
	ini_trim_end(s);
	if (*s == '\0')
		return ini_bad(fn, payload, INI_BAD_LINE, line, "empty key before '='");
	ev.key = s;
	ev.value = ini_value(ini_skip_blanks(eq + 1));
	return fn(payload, &ev);
}

/* One line, NUL-terminated, without its line ending. */
static int ini_line(char *s, int line, ini_handler_fn *fn, void *payload)
{
	s = ini_skip_blanks(s);
	if (*s == '\0' || *s == ';' || *s == '#')
		return 0;
	if (*s == '[')
		return ini_header(s, line, fn, payload);
	return ini_pair(s, line, fn, payload);
}

/* Cuts the line at @s (of @len bytes) and hands it on. */
static int ini_cut(char *s, size_t len, int line, ini_handler_fn *fn, void *payload)
{
	if (len > 0 && s[len - 1] == '\r')
		len--;
	if (memchr(s, '\0', len))
		return ini_bad(fn, payload, INI_BAD_LINE, line, "line holds a NUL byte");
	s[len] = '\0';
	return ini_line(s, line, fn, payload);
}

int ini_parse(const char *text, size_t len, ini_handler_fn *fn, void *payload)
{
	char *buf = malloc(len + 1);
	size_t pos = 0;
	int line = 0, ret = 0;

	if (!buf)
		return -ENOMEM;
	memcpy(buf, text, len);
	buf[len] = '\0';
	if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
		pos = 3;
	while (ret == 0 && pos < len) {
		char *nl = memchr(buf + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - buf) : len;

		ret = ini_cut(buf + pos, end - pos, ++line, fn, payload);
		pos = end + 1;
	}
	free(buf);
	return ret;
}
