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
#include <ctype.h>
#include <stdint.h>
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

/* Levenshtein distance of @a and @b, '-' taken for '_' and case ignored; at most 64 bytes each. */
static size_t key_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[65];

	if (la > 64 || lb > 64)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			int ca = tolower((unsigned char)(a[i - 1] == '-' ? '_' : a[i - 1]));
			int cb = tolower((unsigned char)(b[j - 1] == '-' ? '_' : b[j - 1]));
			size_t best = diag + (ca != cb);

			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = row[j];
			row[j] = best;
		}
	}
	return row[lb];
}

void key_hint_init(struct key_hint *h, const char *key)
{
	h->key = key;
	h->near = NULL;
	h->near_dist = SIZE_MAX;
	h->known[0] = '\0';
	h->len = 0;
}

void key_hint_add(struct key_hint *h, const char *known)
{
	size_t dist = key_distance(h->key, known);
	size_t room = sizeof(h->known) - h->len;
	int n;

	if (dist < h->near_dist) {
		h->near = known;
		h->near_dist = dist;
	}
	if (room <= 4)
		return;		/* already cut short */
	n = snprintf(h->known + h->len, room, "%s%s", h->len ? ", " : "", known);
	if (n > 0 && (size_t)n < room - 4) {
		h->len += (size_t)n;
	} else {
		h->known[h->len] = '\0';
		snprintf(h->known + h->len, room, "%s", h->len ? ", ..." : "...");
		h->len = sizeof(h->known);
	}
}

const char *key_hint_near(const struct key_hint *h)
{
	size_t most = strlen(h->key) / 2;	/* a short key: fewer edits */

	return h->near && h->near_dist <= (most < 2 ? most : 2) ? h->near : NULL;
}

const char *key_hint_text(struct key_hint *h)
{
	const char *near = key_hint_near(h);

	if (near)
		snprintf(h->text, sizeof(h->text), " (did you mean '%s'?)", near);
	else if (h->near)
		snprintf(h->text, sizeof(h->text), " (known: %s)", h->known);
	else
		h->text[0] = '\0';
	return h->text;
}
