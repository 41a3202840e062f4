/*
 * json_pos.c - a position index of a JSON text: path -> line and column.
 *
 * The idea: one pass over text that jansson has already accepted, reading
 * tokens only (strings with their escapes, numbers and literals skipped
 * whole, punctuation), with a stack of open containers.  Each value becomes
 * a node {parent node, key or array index, line, column}; nothing is stored
 * per full path, so memory stays linear even for deep nesting of long keys
 * (a path-per-value table would be quadratic there).  The node ids are then
 * sorted by (parent, key) once, and a lookup resolves a path one component
 * at a time by binary search: O(depth * log n), cheap enough for a checker
 * that reports thousands of errors in a 1 MiB spec.
 *
 * Keys are unescaped (\uXXXX and surrogate pairs to UTF-8) into one arena
 * so they compare as jansson sees them.  With duplicate keys (which mlfs's
 * spec parser rejects) the last one is found, as jansson keeps the last.
 *
 * What it does not do: validate.  On text that is not JSON it stops or
 * records nonsense, but never reads or writes out of bounds.  An index is
 * immutable after json_pos_build, so lookups may run from any thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json_pos.h"

#define JSON_POS_NONE	UINT32_MAX	/* the root's parent */
#define JSON_POS_ELEM	UINT32_MAX	/* key_len of an array element */
#define JSON_POS_MAX_LEN (1UL << 30)

struct json_pos_node {
	uint32_t parent;	/* node id, JSON_POS_NONE for the root */
	uint32_t key_len;	/* JSON_POS_ELEM for an array element */
	uint32_t key;		/* offset in keys, or the element's index */
	uint32_t line;
	uint32_t col;
};

struct json_pos {
	struct json_pos_node *nodes;	/* in text order; the root is 0 */
	size_t n;
	size_t cap;
	char *keys;			/* unescaped keys, back to back */
	uint32_t *order;		/* node ids by (parent, kind, key, id) */
	size_t keys_len, keys_cap;	/* json_pos_add_value's arena use */
};

/* One open object or array during the scan. */
struct json_pos_frame {
	uint32_t node;
	uint32_t count;		/* elements seen, for arrays */
	bool array;
	bool want_key;		/* objects: the next string is a key */
};

/* The scanner's state. */
struct json_pos_scan {
	const char *text;
	size_t len;
	size_t i;
	uint32_t line;
	size_t col_at;		/* a byte offset on the current line ... */
	uint32_t col;		/* ... and its column */
	struct json_pos_frame *stack;
	size_t depth;
	size_t stack_cap;
	uint32_t key;		/* the pending key, for the next object member */
	uint32_t key_len;
	size_t keys_len;
};

/* ---- building ---- */

/* The column of byte @i, counting UTF-8 lead bytes only, as jansson does. */
static uint32_t json_pos_column(struct json_pos_scan *s, size_t i)
{
	for (; s->col_at < i; s->col_at++)
		if (((unsigned char)s->text[s->col_at] & 0xc0) != 0x80)
			s->col++;
	return s->col;
}

static int json_pos_add(struct json_pos *p, struct json_pos_scan *s)
{
	struct json_pos_frame *top = s->depth ? &s->stack[s->depth - 1] : NULL;
	struct json_pos_node *node;

	if (!top && p->n)
		return -EINVAL;		/* a second top-level value: not JSON */
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 64;
		struct json_pos_node *nodes = reallocarray(p->nodes, cap, sizeof(*nodes));

		if (!nodes)
			return -ENOMEM;
		p->nodes = nodes;
		p->cap = cap;
	}
	node = &p->nodes[p->n++];
	node->parent = top ? top->node : JSON_POS_NONE;
	node->key_len = top && top->array ? JSON_POS_ELEM : s->key_len;
	node->key = top && top->array ? top->count++ : s->key;
	node->line = s->line;
	node->col = json_pos_column(s, s->i);
	return 0;
}

static int json_pos_push(struct json_pos *p, struct json_pos_scan *s, bool array)
{
	if (s->depth == s->stack_cap) {
		size_t cap = s->stack_cap ? s->stack_cap * 2 : 16;
		struct json_pos_frame *stack = reallocarray(s->stack, cap, sizeof(*stack));

		if (!stack)
			return -ENOMEM;
		s->stack = stack;
		s->stack_cap = cap;
	}
	s->stack[s->depth++] = (struct json_pos_frame){
		.node = (uint32_t)(p->n - 1), .array = array, .want_key = !array,
	};
	return 0;
}

/* Four hex digits at @s, or -1. */
static long json_pos_hex4(const char *s, size_t avail)
{
	long v = 0;

	if (avail < 4)
		return -1;
	for (int k = 0; k < 4; k++) {
		char c = s[k];
		int d = c >= '0' && c <= '9' ? c - '0' :
			c >= 'a' && c <= 'f' ? c - 'a' + 10 :
			c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

static size_t json_pos_utf8(char *out, unsigned long cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * Decodes the escape after the backslash at t[*i] into @out; advances *i
 * past it.  Returns the bytes written (never more than the escape's length).
 */
static size_t json_pos_unescape(const char *t, size_t len, size_t *i, char *out)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *e = *i + 1 < len ? strchr(from, t[*i + 1]) : NULL;
	long cp, lo;

	if (e && *e) {
		*i += 2;
		*out = to[e - from];
		return 1;
	}
	cp = *i + 1 < len && t[*i + 1] == 'u' ? json_pos_hex4(t + *i + 2, len - *i - 2) : -1;
	if (cp < 0) {
		*i += 1;	/* not JSON; skip the backslash */
		return 0;
	}
	*i += 6;
	if (cp >= 0xd800 && cp < 0xdc00 && *i + 1 < len && t[*i] == '\\' && t[*i + 1] == 'u') {
		lo = json_pos_hex4(t + *i + 2, len - *i - 2);
		if (lo >= 0xdc00 && lo < 0xe000) {
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			*i += 6;
		}
	}
	return json_pos_utf8(out, (unsigned long)cp);
}

/* Reads the key string at s->i into the arena and makes it the pending key. */
static void json_pos_key(struct json_pos *p, struct json_pos_scan *s)
{
	size_t start = s->keys_len;

	s->i++;
	while (s->i < s->len && s->text[s->i] != '"') {
		if (s->text[s->i] == '\\')
			s->keys_len += json_pos_unescape(s->text, s->len, &s->i,
							 p->keys + s->keys_len);
		else
			p->keys[s->keys_len++] = s->text[s->i++];
	}
	s->i++;
	s->key = (uint32_t)start;
	s->key_len = (uint32_t)(s->keys_len - start);
}

static void json_pos_skip_string(struct json_pos_scan *s)
{
	s->i++;
	while (s->i < s->len && s->text[s->i] != '"')
		s->i += s->text[s->i] == '\\' ? 2 : 1;
	s->i++;
}

/* Skips a number or literal (at least one byte, so garbage cannot stall). */
static void json_pos_skip_scalar(struct json_pos_scan *s)
{
	s->i++;
	while (s->i < s->len && !strchr(",:]} \t\r\n", s->text[s->i]))
		s->i++;
}

/* Handles the token at s->i.  0 to go on, 1 to stop, or a negated errno. */
static int json_pos_token(struct json_pos *p, struct json_pos_scan *s)
{
	struct json_pos_frame *top = s->depth ? &s->stack[s->depth - 1] : NULL;
	char c = s->text[s->i];
	int ret;

	if (c == ' ' || c == '\t' || c == '\r' || c == ':') {
		s->i++;
	} else if (c == '\n') {
		s->i++;
		s->line++;
		s->col_at = s->i;
		s->col = 1;
	} else if (c == ',') {
		if (top && !top->array)
			top->want_key = true;
		s->i++;
	} else if (c == '}' || c == ']') {
		if (s->depth)
			s->depth--;
		s->i++;
	} else if (c == '"' && top && top->want_key) {
		json_pos_key(p, s);
		top->want_key = false;
	} else {
		ret = json_pos_add(p, s);
		if (ret < 0)
			return ret == -ENOMEM ? ret : 1;
		if (c == '{' || c == '[') {
			s->i++;
			return json_pos_push(p, s, c == '[');
		}
		if (c == '"')
			json_pos_skip_string(s);
		else
			json_pos_skip_scalar(s);
	}
	return 0;
}

static int json_pos_cmp(const void *a, const void *b, void *arg)
{
	const struct json_pos *p = arg;
	const struct json_pos_node *x = &p->nodes[*(const uint32_t *)a];
	const struct json_pos_node *y = &p->nodes[*(const uint32_t *)b];
	uint32_t la = x->key_len, lb = y->key_len;
	int c;

	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	if ((la == JSON_POS_ELEM) != (lb == JSON_POS_ELEM))
		return la == JSON_POS_ELEM ? -1 : 1;
	if (la == JSON_POS_ELEM && x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if (la != JSON_POS_ELEM) {
		c = (la < lb ? la : lb) ? memcmp(p->keys + x->key, p->keys + y->key, la < lb ? la : lb) : 0;
		if (c || la != lb)
			return c ? c : la < lb ? -1 : 1;
	}
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int json_pos_sort(struct json_pos *p)
{
	p->order = reallocarray(NULL, p->n ? p->n : 1, sizeof(*p->order));
	if (!p->order)
		return -ENOMEM;
	for (size_t k = 0; k < p->n; k++)
		p->order[k] = (uint32_t)k;
	qsort_r(p->order, p->n, sizeof(*p->order), json_pos_cmp, p);
	return 0;
}

int json_pos_build(struct json_pos **out, const char *text, size_t len)
{
	struct json_pos_scan s = { .text = text, .len = len, .line = 1, .col = 1 };
	struct json_pos *p;
	int ret = 0;

	if (len > JSON_POS_MAX_LEN)
		return -EFBIG;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->keys = malloc(len + 1))) {
		json_pos_free(p);
		return -ENOMEM;
	}
	while (ret == 0 && s.i < s.len)
		ret = json_pos_token(p, &s);
	free(s.stack);
	if (ret >= 0)
		ret = json_pos_sort(p);
	if (ret < 0) {
		json_pos_free(p);
		return ret;
	}
	*out = p;
	return 0;
}

void json_pos_free(struct json_pos *p)
{
	if (!p)
		return;
	free(p->nodes);
	free(p->keys);
	free(p->order);
	free(p);
}

size_t json_pos_count(const struct json_pos *p)
{
	return p->n;
}

/* ---- lookups ---- */

/* One path component: a key (@key, @key_len) or an index (key_len ELEM). */
struct json_pos_comp {
	const char *key;
	uint32_t key_len;
	uint32_t index;
};

/* The child of @parent named by @c, or JSON_POS_NONE. */
static uint32_t json_pos_child(const struct json_pos *p, uint32_t parent,
			       const struct json_pos_comp *c)
{
	size_t lo = 0, hi = p->n, found = SIZE_MAX;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct json_pos_node *x = &p->nodes[p->order[mid]];
		int cmp;

		if (x->parent != parent)
			cmp = x->parent < parent ? -1 : 1;
		else if ((x->key_len == JSON_POS_ELEM) != (c->key_len == JSON_POS_ELEM))
			cmp = x->key_len == JSON_POS_ELEM ? -1 : 1;
		else if (c->key_len == JSON_POS_ELEM)
			cmp = x->key < c->index ? -1 : x->key > c->index;
		else {
			uint32_t m = x->key_len < c->key_len ? x->key_len : c->key_len;

			cmp = m ? memcmp(p->keys + x->key, c->key, m) : 0;	/* keys may be NULL */
			if (!cmp && x->key_len != c->key_len)
				cmp = x->key_len < c->key_len ? -1 : 1;
		}
		if (cmp <= 0) {		/* keep the last equal one */
			if (cmp == 0)
				found = mid;
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return found == SIZE_MAX ? JSON_POS_NONE : p->order[found];
}

/*
 * Reads the component at *path into @c and advances.  Returns 1 when read,
 * 0 at the end, -ENOENT when the path is malformed.
 */
static int json_pos_next(const char **path, struct json_pos_comp *c, bool first)
{
	const char *s = *path;
	char *end;
	unsigned long v;

	if (!*s)
		return 0;
	if (*s == '[') {
		v = strtoul(s + 1, &end, 10);
		if (end == s + 1 || *end != ']' || v >= JSON_POS_ELEM || s[1] == '-' || s[1] == '+')
			return -ENOENT;
		*c = (struct json_pos_comp){ .key_len = JSON_POS_ELEM, .index = (uint32_t)v };
		*path = end + 1;
		return 1;
	}
	if (!first && *s++ != '.')
		return -ENOENT;
	*c = (struct json_pos_comp){ .key = s, .key_len = (uint32_t)strcspn(s, ".[") };
	*path = s + c->key_len;
	return 1;
}

/*
 * Resolves @path, then @key when not NULL.  *node is the deepest node
 * reached; returns 0 when all of it resolved, 1 when only a prefix did,
 * -ENOENT for an empty index or a malformed path.
 */
static int json_pos_resolve(const struct json_pos *p, const char *path, const char *key,
			    uint32_t *node)
{
	struct json_pos_comp c;
	uint32_t child;
	bool first = true;
	int ret;

	if (!p->n)
		return -ENOENT;
	*node = 0;
	while ((ret = json_pos_next(&path, &c, first)) > 0) {
		first = false;
		child = json_pos_child(p, *node, &c);
		if (child == JSON_POS_NONE)
			return 1;
		*node = child;
	}
	if (ret < 0 || !key)
		return ret;
	c = (struct json_pos_comp){ .key = key, .key_len = (uint32_t)strlen(key) };
	child = json_pos_child(p, *node, &c);
	if (child == JSON_POS_NONE)
		return 1;
	*node = child;
	return 0;
}

static void json_pos_at(const struct json_pos *p, uint32_t node, int *line, int *col)
{
	*line = (int)p->nodes[node].line;
	*col = (int)p->nodes[node].col;
}

int json_pos_find(const struct json_pos *p, const char *path, int *line, int *col)
{
	return json_pos_find_key(p, path, NULL, line, col);
}

int json_pos_find_key(const struct json_pos *p, const char *parent, const char *key,
		      int *line, int *col)
{
	uint32_t node;

	if (json_pos_resolve(p, parent, key, &node) != 0)
		return -ENOENT;
	json_pos_at(p, node, line, col);
	return 0;
}

int json_pos_find_nearest(const struct json_pos *p, const char *path, int *line, int *col)
{
	uint32_t node;
	int ret = json_pos_resolve(p, path, NULL, &node);

	if (ret == -ENOENT && p->n)
		ret = 1;	/* malformed path: node is the last one resolved */
	if (ret < 0)
		return ret;
	json_pos_at(p, node, line, col);
	return ret;
}

/* ---- building by hand (json_pos_new, json_pos_add_value, json_pos_finish) ---- */

int json_pos_new(struct json_pos **out)
{
	struct json_pos *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	*out = p;
	return 0;
}

/* Room for one more node. */
static int json_pos_reserve_node(struct json_pos *p)
{
	size_t cap = p->cap ? p->cap * 2 : 64;
	struct json_pos_node *nodes;

	if (p->n < p->cap)
		return 0;
	if (p->n >= JSON_POS_NONE - 1)
		return -ENOMEM;
	nodes = reallocarray(p->nodes, cap, sizeof(*nodes));
	if (!nodes)
		return -ENOMEM;
	p->nodes = nodes;
	p->cap = cap;
	return 0;
}

/* Copies @key into the arena; its offset in *off. */
static int json_pos_store_key(struct json_pos *p, const char *key, uint32_t len, uint32_t *off)
{
	if (p->keys_len + len > JSON_POS_MAX_LEN)
		return -ENOMEM;
	if (p->keys_len + len > p->keys_cap) {
		size_t cap = (p->keys_cap + len) * 2;
		char *keys = realloc(p->keys, cap);

		if (!keys)
			return -ENOMEM;
		p->keys = keys;
		p->keys_cap = cap;
	}
	if (len)	/* an empty key with no arena yet: nothing to copy, and no NULL + 0 */
		memcpy(p->keys + p->keys_len, key, len);
	*off = (uint32_t)p->keys_len;
	p->keys_len += len;
	return 0;
}

long json_pos_add_value(struct json_pos *p, long parent, const char *key, size_t index,
			int line, int col)
{
	struct json_pos_node node = {
		.parent = parent < 0 ? JSON_POS_NONE : (uint32_t)parent,
		.key_len = key ? (uint32_t)strnlen(key, JSON_POS_MAX_LEN) : JSON_POS_ELEM,
		.key = key ? 0 : (uint32_t)index,
		.line = line > 0 ? (uint32_t)line : 1,
		.col = col > 0 ? (uint32_t)col : 1,
	};
	int ret;

	if ((parent < 0) != (p->n == 0) || (parent >= 0 && (size_t)parent >= p->n) ||
	    (!key && index >= JSON_POS_ELEM))
		return -EINVAL;
	ret = json_pos_reserve_node(p);
	if (ret == 0 && key)
		ret = json_pos_store_key(p, key, node.key_len, &node.key);
	if (ret < 0)
		return ret;
	p->nodes[p->n] = node;
	return (long)p->n++;
}

int json_pos_finish(struct json_pos *p)
{
	free(p->order);
	return json_pos_sort(p);
}
