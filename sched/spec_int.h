/*
 * spec_int.h - what the spec parsers (spec_native.c, spec_openpai.c,
 * spec_gpulab.c, spec_kibernetika.c) share with spec.c: a format's entry in
 * its table (struct spec_format_ops), the parse context, error and
 * "ignored" reporting by JSON path, and typed getters that report a wrong
 * type themselves.
 *
 * Paths are json_pos paths ("resources.cpu_count", "workers[1].command");
 * an error about a missing field is placed at the enclosing object.
 */
#ifndef MLFS_SPEC_INT_H
#define MLFS_SPEC_INT_H

#include <jansson.h>
#include <stdbool.h>

#include "json_pos.h"
#include "spec.h"

#define SPEC_PATH_MAX 256	/* paths the parsers build from known names */

struct spec_ctx {
	const char *file;		/* for messages */
	const char *default_name;	/* may be NULL */
	struct diag *d;
	const struct json_pos *pos;
	struct spec *s;			/* being filled */
	int errors;			/* counted here, not trusted to the diag */
	bool nomem;
};

/* A format's parser: fills c->s from @root, reporting through @c. */
typedef void spec_parse_fn(struct spec_ctx *c, json_t *root);

/*
 * A spec format, as spec.c dispatches to it: a new format is its own file,
 * one of these at its end, and a line in spec.c's table.
 */
struct spec_format_ops {
	const char *name;		/* as status.json and messages say it */
	/* Whether object @root is written in it; NULL: the format of anything else. */
	bool (*detect)(const json_t *root);
	spec_parse_fn *parse;
	/* The variables a worker gets when it starts (spec_runtime_env); NULL: none. */
	void (*runtime_env)(const struct spec *s, size_t w, const struct spec_runtime *rt,
			    spec_env_fn *set, void *arg);
};

extern const struct spec_format_ops spec_native_format;
extern const struct spec_format_ops spec_openpai_format;
extern const struct spec_format_ops spec_gpulab_format;
extern const struct spec_format_ops spec_kibernetika_format;

/*
 * The GPULab version 2 request (a new reference) for version 1 definition
 * @jd (spec_gpulab_v1.c), or NULL after reporting why not.
 */
json_t *spec_gpulab_from_v1(struct spec_ctx *c, json_t *jd);

/*
 * Reads YAML @text into a JSON value (mappings become objects, sequences
 * arrays, plain scalars that read as integers, reals, booleans or null
 * become those, everything else strings) and the position of every value
 * in *pos, for the same messages JSON specs get.  Returns 0, or -EINVAL
 * with "file:line:col: yaml: message" in @d.  (spec_yaml.c)
 */
int spec_yaml_load(const char *file, const char *text, size_t len, json_t **root,
		   struct json_pos **pos, struct diag *d);

/* Adds "file:line:col: PATH: message" at the value @path (or its parent). */
void spec_error(struct spec_ctx *c, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Like spec_error for the member @key of the object at @parent. */
void spec_error_key(struct spec_ctx *c, const char *parent, const char *key,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Appends "fmt..." to s->ignored. */
void spec_ignore(struct spec_ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Lists PATH.KEY (KEY when @path is "") as an unknown field, not used, with
 * the known field @h says it is likely a typo of.
 */
void spec_ignore_field(struct spec_ctx *c, const char *path, const char *key,
		       const struct key_hint *h);

/* Lists every member of @obj not in @known (NULL-terminated) as ignored, with a near field. */
void spec_ignore_unknown(struct spec_ctx *c, json_t *obj, const char *path,
			 const char *const *known);

/* strdup that records ENOMEM in @c (and returns NULL). */
char *spec_strdup(struct spec_ctx *c, const char *s);

/* Writes PARENT.KEY (or KEY at the top) into @buf; returns @buf. */
char *spec_path(char *buf, const char *parent, const char *key);

/* "object", "array", "string", "integer", "number", "boolean", "null". */
const char *spec_json_type(const json_t *v);

/*
 * Typed getters of the member @key of @obj, whose path is @parent.KEY.
 * Each returns 1 when the member is there and valid (stored in *out), 0
 * when it is absent or null (*out untouched), -1 when it is invalid (the
 * error is reported).  Integers accept integral reals (2.0), as JSON does
 * not tell them apart.
 */
int spec_get_long(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		  long min, long max, long *out);
int spec_get_double(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		    double *out);
int spec_get_string(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		    const char **out);
int spec_get_bool(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		  bool *out);
/* An object member: *out borrowed from @obj. */
int spec_get_object(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		    json_t **out);
/* An array of non-empty strings (may be empty); *out borrowed from @obj. */
int spec_get_strings(struct spec_ctx *c, json_t *obj, const char *parent, const char *key,
		     json_t **out);

/*
 * Names the job: @name from the spec (NULL when absent, then the default
 * name, with an error at @path saying so when that is not valid either).
 */
void spec_set_name(struct spec_ctx *c, const char *name, const char *path);

void spec_resources_free(struct spec_resources *r);

/*
 * Reads @value, the image the spec field @path names, into @img: takes
 * GPULab's "USER:PASSWORD@" off into img->auth when @credentials, checks
 * the rest as an image reference (container.h) and reports a bad one at
 * @path.  0, or -1 when it is not valid.
 */
int spec_set_image(struct spec_ctx *c, struct spec_image *img, const char *path,
		   const char *value, bool credentials);

void spec_image_free(struct spec_image *img);

/* Copies @from into @to (each worker of a role owns its copy). 0 or -1 (ENOMEM, recorded). */
int spec_copy_image(struct spec_ctx *c, struct spec_image *to, const struct spec_image *from);

/* Kibernetika's task `sources:` into c->s->sources (spec_sources.c). */
void spec_kb_task_sources(struct spec_ctx *c, json_t *root);

/* A resource's default_volume_mapping, default_mount_path and volumes into @w. */
void spec_kb_res_volumes(struct spec_ctx *c, json_t *o, const char *at, struct spec_worker *w);

/* Copies @from's volumes and mapping into @to (a replica's own). 0 or -1 (ENOMEM). */
int spec_volumes_copy(struct spec_worker *to, const struct spec_worker *from);

/* @s for a message: control characters as '?', cut to about 60 bytes. */
#define SPEC_SHOW_MAX 72
const char *spec_show(char *buf, const char *s);

/* true when @s is empty or only whitespace. */
bool spec_blank(const char *s);

#endif
