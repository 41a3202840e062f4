/*
 * spec_yaml.c - a YAML spec read into the same JSON value and position
 * index a JSON spec gets, so every parser and every message works
 * unchanged ("x.yaml:7:9: resources[0].replicas: ...").
 *
 * The idea: libyaml's event parser, walked by recursive descent (one
 * function per node kind); each value is added to a hand-built json_pos
 * (json_pos_new/json_pos_add_value) at its event's start mark, before its
 * members, so ids follow document order as json_pos_build's do.
 *
 * Scalars (the YAML 1.2 core schema, what a reader of the spec expects):
 * - quoted ('x', "x") and block (|, >) scalars are strings, always;
 * - a plain scalar is null for "", "~", "null", "Null", "NULL"; a boolean
 *   for true/True/TRUE/false/False/FALSE; an integer for [-+]?[0-9]+,
 *   0x[0-9a-fA-F]+ and 0o[0-7]+ (one that overflows 64 bits becomes a
 *   real); a real for [-+]?(.N|N[.N])([eE][-+]?N), .inf, -.inf, .nan;
 *   else a string.  So `replicas: 2` is an integer, `cpu: 100m`,
 *   `command: python x.py` and `memory: 8Gi` are strings, `cpu: 0.5` a
 *   real, and YAML 1.1's yes/no/on/off stay strings (no "Norway problem").
 * - an explicit !!str tag makes a string; other core tags (!!int, !!bool,
 *   ...) resolve as a plain scalar would; any other tag is refused.
 * - mapping keys are scalars, taken as text whatever they look like.
 *
 * Refused, each with "file:line:col: yaml: message" at the place: syntax
 * errors (libyaml's problem and problem_mark), anchors and aliases (an
 * alias can multiply a 1 MiB text into gigabytes: "billion laughs"; no spec
 * needs them), non-scalar keys, duplicate keys (as spec.c refuses them in
 * JSON), nesting deeper than SPEC_YAML_MAX_DEPTH, a second document, and a
 * text with no document at all.  Every event is deleted on every path.
 *
 * What it does not do: YAML 1.1 sexagesimals, merge keys (<<, which need
 * aliases), or any schema beyond the core one.  Nothing is kept between
 * calls; libyaml's parser is per call, so this is safe from any thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "spec_int.h"

#define SPEC_YAML_MAX_DEPTH 64
#define SPEC_YAML_TAG "tag:yaml.org,2002:"

struct spec_yaml {
	yaml_parser_t parser;
	const char *file;
	struct diag *d;
	struct json_pos *pos;
	int depth;
	int err;		/* the first error; parsing stops at it */
};

/* Reports "file:line:col: yaml: message" at @mark (0-based, as libyaml's). */
static void spec_yaml_error(struct spec_yaml *y, yaml_mark_t mark, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void spec_yaml_error(struct spec_yaml *y, yaml_mark_t mark, const char *fmt, ...)
{
	char *where, *msg;
	va_list ap;
	int ret;

	y->err = -EINVAL;
	va_start(ap, fmt);
	ret = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (ret < 0) {
		y->err = -ENOMEM;
		return;
	}
	if (asprintf(&where, "%s:%zu:%zu", y->file, mark.line + 1, mark.column + 1) >= 0) {
		diag_add(y->d, where, 0, "yaml: %s", msg);
		free(where);
	} else {
		y->err = -ENOMEM;
	}
	free(msg);
}

/* The next event into *ev: 0, or the error reported (nothing to delete). */
static int spec_yaml_next(struct spec_yaml *y, yaml_event_t *ev)
{
	if (yaml_parser_parse(&y->parser, ev))
		return 0;
	if (y->parser.error == YAML_MEMORY_ERROR) {
		y->err = -ENOMEM;
		return y->err;
	}
	spec_yaml_error(y, y->parser.problem_mark, "%s",
			y->parser.problem ? y->parser.problem : "syntax error");
	return y->err;
}

/* ---- scalars ---- */

static bool spec_yaml_is(const char *s, const char *const *words)
{
	for (; *words; words++)
		if (strcmp(s, *words) == 0)
			return true;
	return false;
}

/* An integer per the core schema, or NULL (not one).  Overflow: a real. */
static json_t *spec_yaml_int(const char *s)
{
	const char *digits = s + (*s == '-' || *s == '+');
	int base = 10;
	long long v;
	char *end;

	if (strncmp(s, "0x", 2) == 0 || strncmp(s, "0o", 2) == 0) {
		base = s[1] == 'x' ? 16 : 8;
		digits = s + 2;
	}
	if (!*digits || strspn(digits, base == 16 ? "0123456789abcdefABCDEF" :
			       base == 8 ? "01234567" : "0123456789") != strlen(digits))
		return NULL;
	errno = 0;
	v = strtoll(base == 10 ? s : digits, &end, base);
	if (errno == ERANGE)
		return base == 10 ? json_real(strtod(s, NULL)) : NULL;
	return json_integer(v);
}

/* A real per the core schema, or NULL. */
static json_t *spec_yaml_real(const char *s)
{
	static const char *const inf[] = { ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", NULL };
	static const char *const ninf[] = { "-.inf", "-.Inf", "-.INF", NULL };
	static const char *const nan[] = { ".nan", ".NaN", ".NAN", NULL };
	const char *p = s + (*s == '-' || *s == '+');
	size_t lead = strspn(p, "0123456789"), frac = 0;
	char *end;

	if (spec_yaml_is(s, inf) || spec_yaml_is(s, ninf) || spec_yaml_is(s, nan))
		return NULL;	/* jansson holds no infinity or NaN: a string */
	if (p[lead] == '.')
		frac = strspn(p + lead + 1, "0123456789");
	if (!lead && !frac)
		return NULL;
	p += lead + (p[lead] == '.' ? 1 + frac : 0);
	if (*p == 'e' || *p == 'E') {
		p += 1 + (p[1] == '-' || p[1] == '+');
		if (!strspn(p, "0123456789"))
			return NULL;
		p += strspn(p, "0123456789");
	}
	if (*p)
		return NULL;
	return json_real(strtod(s, &end));
}

/* A plain scalar's value under the core schema (new reference, or NULL: ENOMEM). */
static json_t *spec_yaml_plain(const char *s)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
	static const char *const trues[] = { "true", "True", "TRUE", NULL };
	static const char *const falses[] = { "false", "False", "FALSE", NULL };
	json_t *v;

	if (spec_yaml_is(s, nulls))
		return json_null();
	if (spec_yaml_is(s, trues))
		return json_true();
	if (spec_yaml_is(s, falses))
		return json_false();
	v = spec_yaml_int(s);
	if (!v)
		v = spec_yaml_real(s);
	return v ? v : json_string(s);
}

/* The scalar of @ev as JSON; NULL after reporting (bad tag, ENOMEM). */
static json_t *spec_yaml_scalar(struct spec_yaml *y, const yaml_event_t *ev)
{
	const char *text = (const char *)ev->data.scalar.value;
	const char *tag = (const char *)ev->data.scalar.tag;
	json_t *v;

	if (tag && strncmp(tag, SPEC_YAML_TAG, strlen(SPEC_YAML_TAG)) != 0 && strcmp(tag, "!") != 0) {
		spec_yaml_error(y, ev->start_mark, "tag %s is not supported", tag);
		return NULL;
	}
	if ((tag && strcmp(tag, SPEC_YAML_TAG "str") == 0) || (tag && strcmp(tag, "!") == 0) ||
	    (!tag && ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE))
		v = json_stringn(text, ev->data.scalar.length);
	else
		v = spec_yaml_plain(text);
	if (!v && !y->err) {
		/* json_stringn refuses text that is not UTF-8 (libyaml checks it) */
		spec_yaml_error(y, ev->start_mark, "a scalar holds a NUL byte or is not UTF-8");
	}
	return v;
}

/* ---- nodes ---- */

static json_t *spec_yaml_node(struct spec_yaml *y, yaml_event_t *ev, long parent,
			      const char *key, size_t index);

/* Adds @ev's position under @parent; the new id, or -1 (reported). */
static long spec_yaml_place(struct spec_yaml *y, const yaml_event_t *ev, long parent,
			    const char *key, size_t index)
{
	long id = json_pos_add_value(y->pos, parent, key, index, (int)ev->start_mark.line + 1,
				     (int)ev->start_mark.column + 1);

	if (id < 0)
		y->err = id == -ENOMEM ? -ENOMEM : -EINVAL;
	return id < 0 ? -1 : id;
}

/* The members of a mapping, after its start event; 0 or an error. */
static int spec_yaml_members(struct spec_yaml *y, json_t *obj, long id)
{
	yaml_event_t ev;
	json_t *v;
	char *key;

	while (spec_yaml_next(y, &ev) == 0) {
		if (ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		if (ev.type != YAML_SCALAR_EVENT || ev.data.scalar.anchor) {
			spec_yaml_error(y, ev.start_mark, "%s", ev.type == YAML_SCALAR_EVENT ?
					"anchors (&name) are not supported" :
					"a mapping key must be a plain scalar, not a mapping, list or alias");
			yaml_event_delete(&ev);
			return y->err;
		}
		key = strdup((const char *)ev.data.scalar.value);
		if (key && json_object_get(obj, key))
			spec_yaml_error(y, ev.start_mark, "duplicate key \"%s\"", key);
		yaml_event_delete(&ev);
		if (!key)
			y->err = -ENOMEM;
		if (!y->err && spec_yaml_next(y, &ev) == 0) {
			v = spec_yaml_node(y, &ev, id, key, 0);
			if (v && json_object_set_new(obj, key, v) < 0)
				y->err = -EINVAL;	/* a key that is not UTF-8 */
		}
		free(key);
		if (y->err)
			return y->err;
	}
	return y->err;
}

/* The elements of a sequence, after its start event; 0 or an error. */
static int spec_yaml_elements(struct spec_yaml *y, json_t *arr, long id)
{
	yaml_event_t ev;
	size_t i = 0;
	json_t *v;

	while (spec_yaml_next(y, &ev) == 0) {
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		v = spec_yaml_node(y, &ev, id, NULL, i++);
		if (!v || json_array_append_new(arr, v) < 0)
			return y->err ? y->err : -ENOMEM;
	}
	return y->err;
}

/* The anchor of @ev, when it has one. */
static const char *spec_yaml_anchor(const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		return (const char *)ev->data.scalar.anchor;
	case YAML_SEQUENCE_START_EVENT:
		return (const char *)ev->data.sequence_start.anchor;
	case YAML_MAPPING_START_EVENT:
		return (const char *)ev->data.mapping_start.anchor;
	default:
		return NULL;
	}
}

/* Refuses what no spec needs; true when @ev may be read. */
static bool spec_yaml_allowed(struct spec_yaml *y, const yaml_event_t *ev)
{
	const char *anchor = spec_yaml_anchor(ev);

	if (ev->type == YAML_ALIAS_EVENT)
		spec_yaml_error(y, ev->start_mark, "aliases (*%s) are not supported",
				(const char *)ev->data.alias.anchor);
	else if (anchor)
		spec_yaml_error(y, ev->start_mark, "anchors (&%s) are not supported", anchor);
	else if (y->depth >= SPEC_YAML_MAX_DEPTH &&
		 (ev->type == YAML_MAPPING_START_EVENT || ev->type == YAML_SEQUENCE_START_EVENT))
		spec_yaml_error(y, ev->start_mark, "nested deeper than %d levels",
				SPEC_YAML_MAX_DEPTH);
	return !y->err;
}

/*
 * The node that starts with @ev (deleted here), placed under @parent as
 * @key or element @index.  A new reference, or NULL with y->err set.
 */
static json_t *spec_yaml_node(struct spec_yaml *y, yaml_event_t *ev, long parent,
			      const char *key, size_t index)
{
	bool map = ev->type == YAML_MAPPING_START_EVENT;
	json_t *v = NULL;
	long id;

	if (!spec_yaml_allowed(y, ev) || (id = spec_yaml_place(y, ev, parent, key, index)) < 0) {
		yaml_event_delete(ev);
		return NULL;
	}
	if (ev->type == YAML_SCALAR_EVENT) {
		v = spec_yaml_scalar(y, ev);
		yaml_event_delete(ev);
		return v;
	}
	yaml_event_delete(ev);
	v = map ? json_object() : json_array();
	if (!v) {
		y->err = -ENOMEM;
		return NULL;
	}
	y->depth++;
	if ((map ? spec_yaml_members(y, v, id) : spec_yaml_elements(y, v, id)) < 0) {
		json_decref(v);
		v = NULL;
	}
	y->depth--;
	return v;
}

/* ---- the stream ---- */

/*
 * Skips to the first document's content: its first node event in *ev, 1
 * when the stream holds no document, or an error.
 */
static int spec_yaml_start(struct spec_yaml *y, yaml_event_t *ev)
{
	while (spec_yaml_next(y, ev) == 0) {
		yaml_event_type_t t = ev->type;

		if (t != YAML_STREAM_START_EVENT && t != YAML_DOCUMENT_START_EVENT) {
			if (t != YAML_STREAM_END_EVENT)
				return 0;
			spec_yaml_error(y, ev->start_mark, "the spec holds no YAML document");
			yaml_event_delete(ev);
			return y->err;
		}
		yaml_event_delete(ev);
	}
	return y->err;
}

/* After the root node: the document must end, and no other follow. */
static int spec_yaml_end(struct spec_yaml *y)
{
	yaml_event_t ev;

	while (spec_yaml_next(y, &ev) == 0) {
		yaml_event_type_t t = ev.type;

		if (t == YAML_DOCUMENT_START_EVENT)
			spec_yaml_error(y, ev.start_mark,
					"a second document; a spec is one YAML document");
		yaml_event_delete(&ev);
		if (t == YAML_STREAM_END_EVENT || y->err)
			break;
	}
	return y->err;
}

int spec_yaml_load(const char *file, const char *text, size_t len, json_t **root,
		   struct json_pos **pos, struct diag *d)
{
	struct spec_yaml y = { .file = file, .d = d };
	yaml_event_t ev;
	json_t *v = NULL;
	int ret;

	if (!yaml_parser_initialize(&y.parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&y.parser, (const unsigned char *)text, len);
	yaml_parser_set_encoding(&y.parser, YAML_UTF8_ENCODING);
	ret = json_pos_new(&y.pos);
	if (ret == 0 && spec_yaml_start(&y, &ev) == 0)
		v = spec_yaml_node(&y, &ev, JSON_POS_TOP, NULL, 0);
	if (v && spec_yaml_end(&y) == 0)
		y.err = json_pos_finish(y.pos);
	yaml_parser_delete(&y.parser);
	if (ret == 0)
		ret = y.err;
	if (ret < 0 || !v) {
		json_decref(v);
		json_pos_free(y.pos);
		return ret < 0 ? ret : -EINVAL;
	}
	*root = v;
	*pos = y.pos;
	return 0;
}
