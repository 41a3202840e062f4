/*
 * config_value.h - value parsers of the config file, private to core/.
 *
 * config.c maps each key to a type; config_value.c parses a value of that
 * type into the key's field and says what is wrong when it cannot.
 */
#ifndef MLFS_CONFIG_VALUE_H
#define MLFS_CONFIG_VALUE_H

/* The value types of keys; config_value_types[] says how each is parsed. */
enum config_type {
	CT_STRING,	/* char *, strdup'd */
	CT_PATH,	/* char *, made absolute with config_resolve_path */
	CT_SIZE,	/* uint64_t, config_parse_size */
	CT_LOG_SIZE,	/* uint64_t, 0 (no limit) or at least CONFIG_LOG_SIZE_MIN */
	CT_POSITIVE,	/* long, 1 or more */
	CT_NONNEG,	/* long, 0 or more */
	CT_VERSION,	/* char *, MAJOR.MINOR */
	CT_PRICE,	/* double, 0 or more */
	CT_UID,		/* long, a number or a user name */
	CT_GID,		/* long, a number or a group name */
	CT_MODE,	/* long, octal, at most 07777 */
	CT_FALLBACK,	/* bool, "refuse" (false) or "host" (true) */
	CT_HOSTS,	/* char *, HOST:PORT entries separated by blanks or commas */
	CT_DOTTED,	/* char *, numbers joined by dots: "3", "3.11", "2.1.0" */
};

/* Parses @s as @type into @field (whose C type the enum comments give). 0 or -EINVAL. */
int config_value_set(enum config_type type, const char *s, void *field, const char *file);

/* What a value of @type that does not parse is called, and a hint ("" for none). */
void config_value_explain(enum config_type type, const char **problem, const char **hint);

#endif
