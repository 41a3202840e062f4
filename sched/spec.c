/*
 * spec.c - from a spec file's text to the job model (struct spec); the way
 * back, to jobs/<name>/spec.json, is spec_json.c.
 *
 * spec_parse refuses a text over SPEC_MAX_SIZE, skips a UTF-8 byte order
 * mark, and reads the text as JSON or YAML:
 * - JSON when its first character that is not blank or inside a comment is
 *   '{' or '[', or when jansson accepts the whole text (a lone scalar, which
 *   is then refused as "not an object" in JSON's words).  Before jansson
 *   sees it, every // line comment and slash-star block comment outside a
 *   string is blanked (spec_strip_comments): each of its characters becomes
 *   a space, newlines stay, so every line and column after a comment is
 *   where the user sees it.  OpenPAI's own example carries // comments;
 *   every format's JSON gets the same treatment.  jansson's syntax errors
 *   are reported as field "json" at its line and column; duplicate keys are
 *   refused, since a spec that says a thing twice is a mistake.  Then
 *   json_pos.c indexes where each value starts.
 * - YAML otherwise, through spec_yaml_load, which hands out the same JSON
 *   value and position index.
 *
 * Formats are a table (spec_formats: struct spec_format_ops, one per
 * format file, with its name, detect, parse and runtime_env); spec_detect
 * picks the format from the document's shape, asking each format's detect
 * in the table's order, first match wins:
 * 1. OpenPAI v1 (spec_openpai.c: a member "taskRoles" or "jobName");
 * 2. GPULab (spec_gpulab.c: a member "request" or "jobDefinition");
 * 3. Kibernetika (spec_kibernetika.c: "resources" or "tasks" an array);
 * 4. anything else: native (whose "resources" is an object).
 * The format's parser then reports every problem through spec_error, which
 * turns a JSON path into "file:line:col: path: message"; spec_parse fails
 * once at the end, with -EINVAL when any was reported, so a user sees them
 * all.
 *
 * Columns count characters, as jansson's do (not bytes), so syntax and
 * value errors in one file agree.  The shared helpers (typed getters, the
 * "ignored" list, the job name rules) live here so each format's parser is
 * only its own rules.  Nothing here keeps state between calls.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "spec_int.h"

/*
 * The formats by enum spec_format.  Detection asks each with a detect in
 * this order, first match wins; native, with none, is what is left.
 */
static const struct spec_format_ops *const spec_formats[] = {
	[SPEC_NATIVE] = &spec_native_format,
	[SPEC_OPENPAI] = &spec_openpai_format,
	[SPEC_GPULAB] = &spec_gpulab_format,
	[SPEC_KIBERNETIKA] = &spec_kibernetika_format,
};

#define SPEC_N_FORMATS	(sizeof(spec_formats) / sizeof(spec_formats[0]))

static const struct spec_format_ops *spec_format(enum spec_format f)
{
	return (size_t)f < SPEC_N_FORMATS ? spec_formats[f] : NULL;
}

void spec_runtime_env(const struct spec *s, size_t w, const struct spec_runtime *rt,
		      spec_env_fn *set, void *arg)
{
	const struct spec_format_ops *f = spec_format(s->format);

	if (f && f->runtime_env)
		f->runtime_env(s, w, rt, set, arg);
}

const char *spec_format_name(enum spec_format f)
{
	return spec_format(f) ? spec_format(f)->name : "unknown";
}

/* Which format @root is written in, from its shape (the rules: top of file). */
static enum spec_format spec_detect(const json_t *root)
{
	if (!json_is_object(root))
		return SPEC_NATIVE;	/* refused by spec_run in any case */
	for (size_t f = 0; f < SPEC_N_FORMATS; f++)
		if (spec_formats[f]->detect && spec_formats[f]->detect(root))
			return (enum spec_format)f;
	return SPEC_NATIVE;
}

/* ---- reporting ---- */

/*
 * Adds "file:line:col: field: message".  diag_add knows no columns and puts
 * a space after "line:", so the place goes in as the file name.
 */
static void spec_diag(struct diag *d, const char *file, int line, int col, const char *field,
		      const char *msg)
{
	char *where;

	if (asprintf(&where, "%s:%d:%d", file, line, col) < 0)
		return;		/* the caller counted the error */
	diag_add(d, where, 0, "%s: %s", field, msg);
	free(where);
}

static void spec_report(struct spec_ctx *c, int line, int col, const char *field,
			const char *fmt, va_list ap)
{
	char *msg;

	c->errors++;
	if (vasprintf(&msg, fmt, ap) < 0) {
		c->nomem = true;
		return;
	}
	spec_diag(c->d, c->file, line, col, *field ? field : "json", msg);
	free(msg);
}

void spec_error(struct spec_ctx *c, const char *path, const char *fmt, ...)
{
	int line = 1, col = 1;
	va_list ap;

	json_pos_find_nearest(c->pos, path, &line, &col);
	va_start(ap, fmt);
	spec_report(c, line, col, path, fmt, ap);
	va_end(ap);
}

void spec_error_key(struct spec_ctx *c, const char *parent, const char *key,
		    const char *fmt, ...)
{
	char shown[SPEC_SHOW_MAX], *field;
	int line = 1, col = 1;
	va_list ap;

	if (json_pos_find_key(c->pos, parent, key, &line, &col) < 0)
		json_pos_find_nearest(c->pos, parent, &line, &col);
	if (asprintf(&field, "%s%s%s", parent, *parent ? "." : "", spec_show(shown, key)) < 0) {
		c->errors++;
		c->nomem = true;
		return;
	}
	va_start(ap, fmt);
	spec_report(c, line, col, field, fmt, ap);
	va_end(ap);
	free(field);
}

void spec_ignore(struct spec_ctx *c, const char *fmt, ...)
{
	struct spec *s = c->s;
	char **ignored;
	char *msg;
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = vasprintf(&msg, fmt, ap);
	va_end(ap);
	ignored = ret < 0 ? NULL : reallocarray(s->ignored, s->n_ignored + 1, sizeof(*ignored));
	if (!ignored) {
		if (ret >= 0)
			free(msg);
		c->nomem = true;
		return;
	}
	s->ignored = ignored;
	s->ignored[s->n_ignored++] = msg;
}

void spec_ignore_field(struct spec_ctx *c, const char *path, const char *key,
		       const struct key_hint *h)
{
	char shown[SPEC_SHOW_MAX];
	const char *near = key_hint_near(h);

	spec_ignore(c, "%s%s%s: unknown field, not used%s%s%s", path, *path ? "." : "",
		    spec_show(shown, key), near ? " (did you mean '" : "", near ? near : "",
		    near ? "'?)" : "");
}

void spec_ignore_unknown(struct spec_ctx *c, json_t *obj, const char *path,
			 const char *const *known)
{
	struct key_hint h;
	const char *key;
	json_t *v;
	size_t k;

	json_object_foreach(obj, key, v) {
		for (k = 0; known[k] && strcmp(known[k], key) != 0; k++)
			;
		if (known[k])
			continue;
		key_hint_init(&h, key);
		for (k = 0; known[k]; k++)
			key_hint_add(&h, known[k]);
		spec_ignore_field(c, path, key, &h);
	}
}

char *spec_strdup(struct spec_ctx *c, const char *s)
{
	char *dup = strdup(s);

	if (!dup)
		c->nomem = true;
	return dup;
}

char *spec_path(char *buf, const char *parent, const char *key)
{
	snprintf(buf, SPEC_PATH_MAX, "%s%s%s", parent, *parent ? "." : "", key);
	return buf;
}

const char *spec_json_type(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
		return "integer";
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	default:
		return "null";
	}
}

const char *spec_show(char *buf, const char *s)
{
	size_t n = 0;

	for (; s[n] && n < SPEC_SHOW_MAX - 4; n++)
		buf[n] = (unsigned char)s[n] < ' ' || s[n] == 0x7f ? '?' : s[n];
	while (s[n] && n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;	/* cut before a whole UTF-8 character */
	strcpy(buf + n, s[n] ? "..." : "");
	return buf;
}

bool spec_blank(const char *s)
{
	return s[strspn(s, " \t\r\n\f\v")] == '\0';
}

/* ---- typed getters ---- */

/* The member @key of @obj, NULL when absent or null; @path is set. */
static json_t *spec_member(json_t *obj, const char *parent, const char *key, char *path)
{
	json_t *v = json_object_get(obj, key);

	spec_path(path, parent, key);
	return json_is_null(v) ? NULL : v;
}

/* @v as a whole number in *out; false when it is not one. */
static bool spec_integral(const json_t *v, long long *out)
{
	double r;

	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return true;
	}
	if (!json_is_real(v))
		return false;
	r = json_real_value(v);
	if (!(r > -4e18 && r < 4e18) || (double)(long long)r != r)
		return false;	/* (no libm: mlfs_sched does not link it) */
	*out = (long long)r;
	return true;
}

int spec_get_long(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		  long min, long max, long *out)
{
	char path[SPEC_PATH_MAX];
	json_t *v = spec_member(obj, parent, key, path);
	long long n;

	if (!v)
		return 0;
	if (!spec_integral(v, &n)) {
		if (json_is_real(v))
			spec_error(c, path, "must be an integer, got %g", json_real_value(v));
		else
			spec_error(c, path, "must be an integer, got %s", spec_json_type(v));
		return -1;
	}
	if (n < min || n > max) {
		if (max == LONG_MAX)
			spec_error(c, path, "must be at least %ld, got %lld", min, n);
		else
			spec_error(c, path, "must be between %ld and %ld, got %lld", min, max, n);
		return -1;
	}
	*out = (long)n;
	return 1;
}

int spec_get_double(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		    double *out)
{
	char path[SPEC_PATH_MAX];
	json_t *v = spec_member(obj, parent, key, path);

	if (!v)
		return 0;
	if (!json_is_number(v)) {
		spec_error(c, path, "must be a number, got %s", spec_json_type(v));
		return -1;
	}
	*out = json_number_value(v);
	return 1;
}

int spec_get_string(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		    const char **out)
{
	char path[SPEC_PATH_MAX];
	json_t *v = spec_member(obj, parent, key, path);

	if (!v)
		return 0;
	if (!json_is_string(v)) {
		spec_error(c, path, "must be a string, got %s", spec_json_type(v));
		return -1;
	}
	*out = json_string_value(v);
	return 1;
}

int spec_get_bool(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		  bool *out)
{
	char path[SPEC_PATH_MAX];
	json_t *v = spec_member(obj, parent, key, path);

	if (!v)
		return 0;
	if (!json_is_boolean(v)) {
		spec_error(c, path, "must be true or false, got %s", spec_json_type(v));
		return -1;
	}
	*out = json_is_true(v);
	return 1;
}

int spec_get_object(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		    json_t **out)
{
	char path[SPEC_PATH_MAX];
	json_t *v = spec_member(obj, parent, key, path);

	if (!v)
		return 0;
	if (!json_is_object(v)) {
		spec_error(c, path, "must be an object, got %s", spec_json_type(v));
		return -1;
	}
	*out = v;
	return 1;
}

int spec_get_strings(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		     json_t **out)
{
	char path[SPEC_PATH_MAX], elem[SPEC_PATH_MAX + 24];
	json_t *v = spec_member(obj, parent, key, path), *e;
	int bad = 0;
	size_t i;

	if (!v)
		return 0;
	if (!json_is_array(v)) {
		spec_error(c, path, "must be an array of strings, got %s", spec_json_type(v));
		return -1;
	}
	json_array_foreach(v, i, e) {
		snprintf(elem, sizeof(elem), "%s[%zu]", path, i);
		if (!json_is_string(e)) {
			spec_error(c, elem, "must be a string, got %s", spec_json_type(e));
			bad = 1;
		} else if (spec_blank(json_string_value(e))) {
			spec_error(c, elem, "must not be empty");
			bad = 1;
		}
	}
	if (bad)
		return -1;
	*out = v;
	return 1;
}

/* ---- the job name ---- */

/* What is wrong with @name as a job name, in @buf; NULL when it is valid. */
static const char *spec_name_problem(const char *name, char *buf, size_t size)
{
	size_t len = strlen(name), bad;

	if (len == 0)
		return "must not be empty";
	if (len > SPEC_NAME_MAX) {
		snprintf(buf, size, "is %zu characters long, the limit is %d", len, SPEC_NAME_MAX);
		return buf;
	}
	bad = strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-");
	if (bad < len) {
		unsigned char ch = (unsigned char)name[bad];

		if (ch >= ' ' && ch < 0x7f)
			snprintf(buf, size, "may hold only A-Z a-z 0-9 . _ ~ -, got '%c' at character %zu",
				 ch, bad + 1);
		else
			snprintf(buf, size, "may hold only A-Z a-z 0-9 . _ ~ -, got byte 0x%02x at character %zu",
				 ch, bad + 1);
		return buf;
	}
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return "must not be \".\" or \"..\"";
	return NULL;
}

bool spec_name_valid(const char *name)
{
	char buf[128];

	return name && !spec_name_problem(name, buf, sizeof(buf));
}

void spec_set_name(struct spec_ctx *c, const char *name, const char *path)
{
	const char *from = name ? name : c->default_name;
	char buf[128], shown[SPEC_SHOW_MAX];
	const char *problem;

	if (!from) {
		spec_error(c, path, "missing, and there is no file name to name the job after");
		return;
	}
	problem = spec_name_problem(from, buf, sizeof(buf));
	if (problem && name)
		spec_error(c, path, "%s", problem);
	else if (problem)
		spec_error(c, path, "missing, so the file name \"%s\" was used as the job name, but it %s; add a \"%s\" field",
			   spec_show(shown, from), problem, path);
	else
		c->s->name = spec_strdup(c, from);
}

/* ---- comments, BOM, JSON or YAML ---- */

enum spec_lex { SPEC_CODE, SPEC_STRING, SPEC_LINE_COMMENT, SPEC_BLOCK_COMMENT };

/*
 * Appends comment character @ch to @out: a newline (or CR) stays, a UTF-8
 * continuation byte is dropped (its character already became one space),
 * anything else becomes a space.
 */
static void spec_blank_char(char *out, size_t *o, char ch)
{
	if (ch == '\n' || ch == '\r')
		out[(*o)++] = ch;
	else if (((unsigned char)ch & 0xc0) != 0x80)
		out[(*o)++] = ' ';
}

/*
 * Copies @text to @out (room for @len bytes) with every comment outside a
 * string blanked, keeping each line and column; returns the new length.
 * An unterminated block comment runs to the end, and jansson says what is
 * missing.
 */
static size_t spec_strip_comments(const char *text, size_t len, char *out)
{
	enum spec_lex st = SPEC_CODE;
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		char ch = text[i], next = i + 1 < len ? text[i + 1] : '\0';

		if (st == SPEC_CODE && ch == '/' && (next == '/' || next == '*')) {
			st = next == '/' ? SPEC_LINE_COMMENT : SPEC_BLOCK_COMMENT;
			out[o++] = ' ';
			out[o++] = ' ';
			i++;
		} else if (st == SPEC_BLOCK_COMMENT && ch == '*' && next == '/') {
			st = SPEC_CODE;
			out[o++] = ' ';
			out[o++] = ' ';
			i++;
		} else if (st == SPEC_LINE_COMMENT || st == SPEC_BLOCK_COMMENT) {
			if (ch == '\n' && st == SPEC_LINE_COMMENT)
				st = SPEC_CODE;
			spec_blank_char(out, &o, ch);
		} else {
			out[o++] = ch;
			if (st == SPEC_STRING && ch == '\\' && i + 1 < len)
				out[o++] = text[++i];
			else if (ch == '"')
				st = st == SPEC_STRING ? SPEC_CODE : SPEC_STRING;
		}
	}
	return o;
}

static bool spec_text_blank(const char *text, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!strchr(" \t\r\n", text[i]) || !text[i])
			return false;
	return true;
}

/* The first character of @text (comments blanked) that is not blank, or 0. */
static char spec_first_char(const char *text, size_t len)
{
	size_t i = 0;

	while (i < len && strchr(" \t\r\n", text[i]) && text[i])
		i++;
	return i < len ? text[i] : '\0';
}

/* ---- parse ---- */

static int spec_syntax_error(const char *file, const json_error_t *e, struct diag *d)
{
	spec_diag(d, file, e->line > 0 ? e->line : 1, e->column > 0 ? e->column : 1, "json",
		  e->text);
	return -EINVAL;
}

/* Runs the format's parser over @root into @s; 0, -EINVAL or -ENOMEM. */
static int spec_run(struct spec_ctx *c, json_t *root, bool yaml)
{
	enum spec_format f = spec_detect(root);

	c->s->format = f;
	if (!json_is_object(root)) {
		if (yaml)
			spec_error(c, "", "the spec must be a YAML mapping (key: value lines), got %s",
				   spec_json_type(root));
		else
			spec_error(c, "", "the spec must be a JSON object ({ ... }), got %s",
				   spec_json_type(root));
	} else {
		spec_formats[f]->parse(c, root);
	}
	if (c->nomem)
		return -ENOMEM;
	return c->errors ? -EINVAL : 0;
}

/*
 * Reads @text as JSON (comments blanked) into *root and *pos, or returns 1
 * when it is not JSON and should be read as YAML.  0, 1, -EINVAL (reported
 * in @d) or -ENOMEM.
 */
static int spec_load_json(const char *file, const char *text, size_t len, json_t **root,
			  struct json_pos **pos, struct diag *d)
{
	char *clean = malloc(len + 1);
	json_error_t jerr;
	char first;
	int ret;

	if (!clean)
		return -ENOMEM;
	len = spec_strip_comments(text, len, clean);
	if (spec_text_blank(clean, len)) {
		free(clean);
		spec_diag(d, file, 1, 1, "json", "the spec holds only comments; it must be a JSON object ({ ... })");
		return -EINVAL;
	}
	first = spec_first_char(clean, len);
	*root = json_loadb(clean, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!*root) {
		ret = first == '{' || first == '[' ? spec_syntax_error(file, &jerr, d) : 1;
	} else {
		ret = json_pos_build(pos, clean, len);
		if (ret < 0) {
			json_decref(*root);
			*root = NULL;
		}
	}
	free(clean);
	return ret;
}

/* Reads @text as JSON or YAML (see the top of the file). */
static int spec_load(const char *file, const char *text, size_t len, json_t **root,
		     struct json_pos **pos, bool *yaml, struct diag *d)
{
	int ret;

	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		text += 3;
		len -= 3;
	}
	if (spec_text_blank(text, len)) {
		spec_diag(d, file, 1, 1, "json", "the spec is empty; it must be a JSON object ({ ... })");
		return -EINVAL;
	}
	ret = spec_load_json(file, text, len, root, pos, d);
	*yaml = ret == 1;
	if (ret == 1)
		ret = spec_yaml_load(file, text, len, root, pos, d);
	return ret < 0 ? ret : 0;
}

void spec_field_error(struct diag *d, const char *file, const char *text, size_t len,
		      const char *field, const char *msg)
{
	struct json_pos *pos = NULL;
	struct diag quiet;
	json_t *root = NULL;
	int line = 1, col = 1;
	bool yaml;

	diag_init(&quiet);
	if (spec_load(file, text, len, &root, &pos, &yaml, &quiet) == 0 &&
	    json_pos_find_nearest(pos, field, &line, &col) < 0)
		line = col = 1;
	json_decref(root);
	json_pos_free(pos);
	diag_free(&quiet);
	spec_diag(d, file, line, col, field, msg);
}

int spec_parse(struct spec **out, const char *file, const char *text, size_t len,
	       const char *default_name, struct diag *d)
{
	struct spec_ctx c = { .file = file, .default_name = default_name, .d = d };
	struct json_pos *pos = NULL;
	json_t *root = NULL;
	bool yaml = false;
	int ret;

	if (len > SPEC_MAX_SIZE) {
		char msg[96];

		snprintf(msg, sizeof(msg), "the spec is %zu bytes, over the limit of %d (1 MiB)",
			 len, SPEC_MAX_SIZE);
		spec_diag(d, file, 1, 1, "json", msg);
		return -EFBIG;
	}
	ret = spec_load(file, text, len, &root, &pos, &yaml, d);
	if (ret < 0)
		return ret;
	c.pos = pos;
	c.s = calloc(1, sizeof(*c.s));
	ret = c.s ? spec_run(&c, root, yaml) : -ENOMEM;
	json_decref(root);
	json_pos_free(pos);
	if (ret < 0) {
		spec_free(c.s);
		return ret;
	}
	*out = c.s;
	return 0;
}

/* ---- free ---- */

static void spec_env_free(struct spec_env *env, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(env[i].name);
		free(env[i].value);
	}
	free(env);
}

void spec_resources_free(struct spec_resources *r)
{
	for (size_t i = 0; i < r->n_gpu_types; i++)
		free(r->gpu_types[i]);
	free(r->gpu_types);
	free(r->min_cuda_version);
	free(r->cluster_id);
	free(r->node_name);
}

int spec_set_image(struct spec_ctx *c, struct spec_image *img, const char *path,
		   const char *value, bool credentials)
{
	size_t cred = credentials ? image_ref_credentials(value) : 0;
	struct image_ref ref;
	char why[256];

	if (spec_blank(value)) {
		spec_error(c, path, "must not be empty: name an image like registry:5000/team/tf:1.15");
		return -1;
	}
	if (image_ref_parse(value + (cred ? cred + 1 : 0), &ref, why, sizeof(why)) < 0) {
		spec_error(c, path, "not a valid image name: %s", why);
		return -1;
	}
	img->ref = spec_strdup(c, value + (cred ? cred + 1 : 0));
	img->ref_field = spec_strdup(c, path);
	if (cred) {
		img->auth = strndup(value, cred);
		if (!img->auth)
			c->nomem = true;
	}
	return img->ref && img->ref_field && (!cred || img->auth) ? 0 : -1;
}

int spec_copy_image(struct spec_ctx *c, struct spec_image *to, const struct spec_image *from)
{
	*to = (struct spec_image){ .shm_mb = from->shm_mb };
	if (from->ref)
		to->ref = spec_strdup(c, from->ref);
	if (from->ref_field)
		to->ref_field = spec_strdup(c, from->ref_field);
	if (from->auth)
		to->auth = spec_strdup(c, from->auth);
	if (from->auth_file)
		to->auth_file = spec_strdup(c, from->auth_file);
	return (!from->ref || to->ref) && (!from->ref_field || to->ref_field) &&
	       (!from->auth || to->auth) && (!from->auth_file || to->auth_file) ? 0 : -1;
}

void spec_image_free(struct spec_image *img)
{
	free(img->ref);
	free(img->ref_field);
	if (img->auth)
		explicit_bzero(img->auth, strlen(img->auth));
	free(img->auth);
	free(img->auth_file);
	*img = (struct spec_image){ 0 };
}

static void spec_worker_free(struct spec_worker *w)
{
	free(w->command);
	spec_resources_free(&w->res);
	spec_env_free(w->env, w->n_env);
	free(w->role);
	for (size_t i = 0; i < w->n_ports; i++)
		free(w->ports[i].label);
	free(w->ports);
	free(w->work_dir);
	spec_image_free(&w->image);
	for (size_t i = 0; i < w->n_volumes; i++) {
		free(w->volumes[i].name);
		free(w->volumes[i].sub_path);
		free(w->volumes[i].mount_path);
		free(w->volumes[i].host_path);
	}
	free(w->volumes);
	free(w->default_mount_path);
}

static void spec_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static void spec_location_free(struct spec_location *l)
{
	free(l->type);
	free(l->path);
}

static void spec_data_free(struct spec_data *d)
{
	spec_names_free(d->datasets, d->n_datasets);
	spec_names_free(d->checkpoints, d->n_checkpoints);
	spec_location_free(&d->input);
	spec_location_free(&d->output);
	spec_location_free(&d->model);
}

static void spec_base_env_free(struct spec_base_env *b)
{
	free(b->python_version);
	free(b->framework);
	free(b->framework_version);
	free(b->field);
	free(b->name);
}

static void spec_packages_free(struct spec_packages *p)
{
	spec_names_free(p->apt, p->n_apt);
	spec_names_free(p->conda, p->n_conda);
	spec_names_free(p->pip, p->n_pip);
}

void spec_free(struct spec *s)
{
	if (!s)
		return;
	free(s->name);
	for (size_t i = 0; s->workers && i < s->n_workers; i++)
		spec_worker_free(&s->workers[i]);
	free(s->workers);
	for (size_t i = 0; s->roles && i < s->n_roles; i++)
		free(s->roles[i].name);
	free(s->roles);
	free(s->description);
	spec_env_free(s->env, s->n_env);
	for (size_t i = 0; i < s->n_ignored; i++)
		free(s->ignored[i]);
	free(s->ignored);
	spec_data_free(&s->data);
	spec_base_env_free(&s->base_env);
	spec_packages_free(&s->packages);
	for (size_t i = 0; i < s->n_sources; i++) {
		free(s->sources[i].name);
		free(s->sources[i].source);
		free(s->sources[i].mount_path);
		free(s->sources[i].sub_path);
	}
	free(s->sources);
	free(s);
}

bool spec_same_resources(const struct spec_resources *a, const struct spec_resources *b)
{
	if (a->gpu_count != b->gpu_count || a->cpu_count != b->cpu_count ||
	    a->memory_gb != b->memory_gb || a->disk_size_gb != b->disk_size_gb ||
	    a->n_gpu_types != b->n_gpu_types || a->gpu_type_substring != b->gpu_type_substring)
		return false;
	for (size_t i = 0; i < a->n_gpu_types; i++)
		if (strcmp(a->gpu_types[i], b->gpu_types[i]) != 0)
			return false;
	return true;
}
