/*
 * json_pos.h - where each value of a JSON text starts, by its path.
 *
 * jansson gives a line and column only for syntax errors.  After jansson
 * has accepted a text, json_pos_build scans it once and records, for every
 * value, its path and the line and column of its first character, so a
 * checker can say "x.json:7:20: resources.cpu_count: ...".
 *
 * Paths: "" is the top-level value; an object member appends ".KEY" (no dot
 * at the start: "resources.cpu_count"), an array element "[N]" from 0
 * ("workers[1].command").  Keys are matched after JSON unescaping.  A key
 * that holds '.' or '[' cannot be written in a path: look it up with
 * json_pos_find_key.  Lines and columns start at 1; columns count
 * characters (UTF-8 sequences), as jansson's json_error_t does.
 */
#ifndef MLFS_JSON_POS_H
#define MLFS_JSON_POS_H

#include <stddef.h>

struct json_pos;

/*
 * Indexes the JSON text @text (@len bytes, need not be NUL-terminated),
 * which must be valid JSON (jansson accepted it; garbage gives a partial
 * index, never a crash).  Returns 0 and hands out *out (free with
 * json_pos_free), -ENOMEM, or -EFBIG for a text over 1 GiB.
 */
int json_pos_build(struct json_pos **out, const char *text, size_t len);

void json_pos_free(struct json_pos *p);

/* The number of values indexed. */
size_t json_pos_count(const struct json_pos *p);

/* The position of the value at @path: 0, or -ENOENT when there is none. */
int json_pos_find(const struct json_pos *p, const char *path, int *line, int *col);

/*
 * Like json_pos_find for the member @key (taken literally, dots and all) of
 * the object at @parent.
 */
int json_pos_find_key(const struct json_pos *p, const char *parent, const char *key,
		      int *line, int *col);

/*
 * The position of @path, else of its deepest ancestor that exists: an
 * error about a missing field points at the enclosing object's opening
 * brace.  Returns 0 (found), 1 (an ancestor's position), or -ENOENT when the
 * index holds no value at all.
 */
int json_pos_find_nearest(const struct json_pos *p, const char *path, int *line, int *col);

/*
 * Building an index by hand, for values that come from another syntax
 * (YAML, spec_yaml.c): json_pos_new, then json_pos_add_value for every
 * value in document order (a container before its members), then
 * json_pos_finish once; lookups work only after that.  @parent is the id
 * json_pos_add_value returned for the enclosing object or array, or
 * JSON_POS_TOP for the top-level value (which must come first, once);
 * @key names an object member (taken literally, copied), or is NULL for
 * the array element number @index (from 0).  Returns the new
 * value's id (>= 0), -ENOMEM, or -EINVAL for a second top-level value or an
 * unknown parent.  (Appended: the functions above are unchanged.)
 */
#define JSON_POS_TOP (-1L)

int json_pos_new(struct json_pos **out);
long json_pos_add_value(struct json_pos *p, long parent, const char *key, size_t index,
			int line, int col);
int json_pos_finish(struct json_pos *p);

#endif
