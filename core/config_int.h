/*
 * config_int.h - what config.c (reading the file), config_source.c (the keys
 * of a source section) and config_whole.c (what is checked, and what
 * follows, once the whole file is read) share.
 */
#ifndef MLFS_CONFIG_INT_H
#define MLFS_CONFIG_INT_H

#include <stddef.h>

#include "config.h"
#include "config_value.h"

#define CONFIG_KEYS_MAX		16		/* keys of [mlfs], [node] or [slurm] */
#define CONFIG_NAME_MAX		64		/* datastore names */

/* The section the parser is in. */
enum config_section {
	CS_NONE,		/* before the first header */
	CS_SKIP,		/* a header with an error: its keys are ignored */
	CS_MLFS,
	CS_NODE,
	CS_SLURM,
	CS_CONTAINERS,
	CS_DATASTORE,
	CS_SOURCE,
	CS_ENVIRONMENT,
};

#define CS_SINGLES	4	/* CS_MLFS, CS_NODE, CS_SLURM, CS_CONTAINERS: at most once each */

struct config_key {
	const char *key;
	enum config_type type;
	size_t off;		/* of the field, in the section's struct */
};

struct config_error {
	int line;
	size_t seq;		/* keeps the order of errors on one line */
	char *msg;
};

struct config_parser {
	const char *file;
	struct mlfs_config *cfg;
	enum config_section section;
	size_t cur;		/* index of the current datastore or source */
	char *label;		/* "[datastore scratch]" of the current section */
	int single_line[CS_SINGLES];			/* header lines */
	int key_line[CS_SINGLES][CONFIG_KEYS_MAX];	/* where keys were set */
	struct config_error *errs;
	size_t n_errs;
	int nomem;		/* an error message could not be recorded */
};

/* The keys of [mlfs]. */
extern const struct config_key config_mlfs_keys[];

/* Records "file:line: message" for the end of the parse. */
void config_error(struct config_parser *p, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* An error about @key of the current section: "[section] key: ...". */
void config_key_error(struct config_parser *p, int line, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Reports an empty value; true when there is one. */
int config_empty(struct config_parser *p, int line, const char *key, const char *value);

/* A datastore name: 1 to 64 of [A-Za-z0-9._-], and not "." or "..". */
int config_datastore_name_ok(const char *name, size_t len);

/* A key of a [dataset], [checkpoint], [model] or [source] section (config_source.c). */
int config_source_key(struct config_parser *p, int line, const char *key, const char *value);

/* Reads src->source: a URL of a form's scheme, or DATASTORE:/path (config_source.c). */
int config_source_parse(struct config_parser *p, struct source_config *src);

/* The index of @key in @keys (NULL-terminated), or -1. */
int config_key_index(const struct config_key *keys, const char *key);

/* The checks once the whole file is read: references that may point forward, required keys. */
void config_check_refs(struct config_parser *p);

/* "dataset", "checkpoint", "model" by enum source_kind. */
extern const char *const config_source_words[];

/* Fills what follows from the whole file: implicit datastores, inherited values. */
int config_finish(struct mlfs_config *cfg);

/*
 * The form that reads @url, whose scheme is @scheme (lowercased): one that
 * claims it, else the one of its scheme; or NULL.
 */
const struct config_form *config_form_of_url(const struct mlfs_config *cfg, const char *url,
					     const char *scheme);

/* "nfs, smb, s3 or http": every scheme a form reads, into @buf, for a message. */
void config_known_schemes(const struct mlfs_config *cfg, char *buf, size_t size);

/*
 * Gives @src, a job's absolute local path, a datastore of the type whose
 * form takes paths, rooted at the path or for an archive at its folder.
 * 0, -ENOTSUP when no form takes paths, or -ENOMEM.
 */
int config_add_path_datastore(struct mlfs_config *cfg, struct source_config *src);

/* Appends an implicit datastore of @type named "KIND:SHOWN" for @src; NULL on ENOMEM. */
struct datastore_config *config_add_implicit(struct mlfs_config *cfg, struct source_config *src,
					     const char *type);

/*
 * Where the implicit datastore of @src is rooted: its source, or for an
 * archive the source's folder (the archive then being src->path in it).
 * Sets src->path; hands out the root, or NULL on ENOMEM.
 */
char *config_implicit_root(struct source_config *src);

#endif
