/*
 * config.c - reads and checks the mlfs configuration file (DESIGN §4); the
 * checks once the whole file is read, and what follows from it (URL sources
 * as datastores), are config_whole.c's.
 *
 * ini.c turns the text into events (sections, keys, bad lines); this file
 * gives them meaning.  Each known section has a table of its keys, each key
 * a value type, and each type one small parser; a value that does not
 * parse becomes "[section] key: bad size '12Q' (hint)".  Value parsers are
 * strict: digits only where a number is meant (no sign, spaces, hex or
 * exponent), decimals read exactly without the locale or floating point,
 * overflow refused.  Every problem is
 * recorded with its line and the reading goes on, so one run reports them
 * all.  References that may point forward (a source naming a datastore
 * declared further down, [mlfs] store) and required keys are checked once
 * the whole file is read; the messages are then sorted by line, one per
 * line at most, and handed to the caller's struct diag.
 *
 * What it does not do: check the keys that belong to one datastore type
 * (root, address, bucket, ...).  Those are kept, with their lines, in each
 * datastore's kv[] for the backend registry (backend.h), which knows the
 * types.  Nor does it touch the disk, except to read the file and to look
 * up user and group names.  No static mutable state; one parse is one
 * struct config_parser on the stack.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "config_int.h"
#include "config_value.h"
#include "container.h"
#include "ini.h"
#include "path.h"

#define CONFIG_MAX_BYTES	(16u << 20)	/* a config larger than this is a mistake */
/* ---- errors ---- */

static void config_verror(struct config_parser *p, int line, const char *fmt, va_list ap)
{
	struct config_error *errs;
	char *msg;

	if (vasprintf(&msg, fmt, ap) < 0) {
		p->nomem = 1;
		return;
	}
	errs = reallocarray(p->errs, p->n_errs + 1, sizeof(*errs));
	if (!errs) {
		free(msg);
		p->nomem = 1;
		return;
	}
	p->errs = errs;
	errs[p->n_errs] = (struct config_error){ .line = line, .seq = p->n_errs, .msg = msg };
	p->n_errs++;
}

__attribute__((format(printf, 3, 4)))
void config_error(struct config_parser *p, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	config_verror(p, line, fmt, ap);
	va_end(ap);
}

void config_key_error(struct config_parser *p, int line, const char *key,
			     const char *fmt, ...)
{
	va_list ap;
	char *msg;
	int ret;

	va_start(ap, fmt);
	ret = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (ret < 0) {
		p->nomem = 1;
		return;
	}
	config_error(p, line, "%s %s: %s", p->label, key, msg);
	free(msg);
}

static int config_error_cmp(const void *a, const void *b)
{
	const struct config_error *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Hands the errors to @d in line order, the first one of each line only. */
static void config_flush_errors(struct config_parser *p, struct diag *d)
{
	if (p->n_errs == 0)
		return;
	qsort(p->errs, p->n_errs, sizeof(*p->errs), config_error_cmp);
	for (size_t i = 0; i < p->n_errs; i++)
		if (i == 0 || p->errs[i].line != p->errs[i - 1].line)
			diag_add(d, p->file, p->errs[i].line, "%s", p->errs[i].msg);
}

static void config_parser_free(struct config_parser *p)
{
	for (size_t i = 0; i < p->n_errs; i++)
		free(p->errs[i].msg);
	free(p->errs);
	free(p->label);
}

/* ---- names ---- */

static int config_is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

int config_datastore_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > CONFIG_NAME_MAX)
		return 0;
	if (name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.')))
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!config_is_name_char(name[i]))
			return 0;
	return 1;
}

/* Why @name cannot be a dataset, checkpoint or model name; NULL if it can. */
static const char *config_source_name_problem(const char *name)
{
	if (strlen(name) > NAME_MAX)
		return "longer than 255 bytes";
	if (name[0] == '.')
		return "starts with '.'";
	if (strchr(name, '/'))
		return "holds a '/'";
	for (const char *c = name; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return "holds a control character";
	return NULL;
}

/* ---- the keys of each section ---- */

#define CONFIG_AT(field)	offsetof(struct mlfs_config, field)
#define DATASTORE_AT(field)	offsetof(struct datastore_config, field)

const struct config_key config_mlfs_keys[] = {
	{ "state_dir", CT_PATH, CONFIG_AT(state_dir) },
	{ "cache_dir", CT_PATH, CONFIG_AT(cache_dir) },
	{ "cache_size", CT_SIZE, CONFIG_AT(cache_size) },
	{ "git_cache_size", CT_SIZE, CONFIG_AT(git_cache_size) },
	{ "archive_cache_size", CT_SIZE, CONFIG_AT(archive_cache_size) },
	{ "executor", CT_STRING, CONFIG_AT(executor) },	/* checked by exec_check_config */
	{ "log_size", CT_LOG_SIZE, CONFIG_AT(log_size) },
	{ "max_jobs", CT_POSITIVE, CONFIG_AT(max_jobs) },
	{ "timeout", CT_POSITIVE, CONFIG_AT(timeout) },
	{ "retries", CT_NONNEG, CONFIG_AT(retries) },
	{ "metadata_ttl", CT_NONNEG, CONFIG_AT(metadata_ttl) },
	{ "read_ahead_files", CT_NONNEG, CONFIG_AT(read_ahead_files) },
	{ "store", CT_STRING, CONFIG_AT(store) },
	{ NULL, CT_STRING, 0 },
};

static const struct config_key config_node_keys[] = {
	{ "gpus", CT_NONNEG, CONFIG_AT(node.gpus) },
	{ "gpu_type", CT_STRING, CONFIG_AT(node.gpu_type) },
	{ "gpu_memory_gb", CT_NONNEG, CONFIG_AT(node.gpu_memory_gb) },
	{ "cuda_version", CT_VERSION, CONFIG_AT(node.cuda_version) },
	{ "cpus", CT_NONNEG, CONFIG_AT(node.cpus) },
	{ "memory_gb", CT_NONNEG, CONFIG_AT(node.memory_gb) },
	{ "price", CT_PRICE, CONFIG_AT(node.price) },
	{ "cluster_id", CT_STRING, CONFIG_AT(node.cluster_id) },
	{ "name", CT_STRING, CONFIG_AT(node.name) },
	{ NULL, CT_STRING, 0 },
};

static const struct config_key config_slurm_keys[] = {
	{ "partition", CT_STRING, CONFIG_AT(slurm.partition) },
	{ "account", CT_STRING, CONFIG_AT(slurm.account) },
	{ "sbatch_args", CT_STRING, CONFIG_AT(slurm.sbatch_args) },
	{ "poll_interval", CT_POSITIVE, CONFIG_AT(slurm.poll_interval) },
	{ "bin_dir", CT_STRING, CONFIG_AT(slurm.bin_dir) },
	{ NULL, CT_STRING, 0 },
};

static const struct config_key config_containers_keys[] = {
	{ "runtime", CT_STRING, CONFIG_AT(containers.runtime) },
	{ "oci_runtime", CT_STRING, CONFIG_AT(containers.oci_runtime) },
	{ "insecure_registries", CT_HOSTS, CONFIG_AT(containers.insecure_registries) },
	{ "auth_file", CT_PATH, CONFIG_AT(containers.auth_file) },
	{ "cache_size", CT_SIZE, CONFIG_AT(containers.cache_size) },
	{ "fallback", CT_FALLBACK, CONFIG_AT(containers.fallback_host) },
	{ NULL, CT_STRING, 0 },
};

#define ENVIRONMENT_AT(field)	offsetof(struct environment_config, field)

static const struct config_key config_environment_keys[] = {
	{ "image", CT_STRING, ENVIRONMENT_AT(image) },	/* checked by image_ref_parse first */
	{ "python_version", CT_DOTTED, ENVIRONMENT_AT(python_version) },
	{ "framework", CT_STRING, ENVIRONMENT_AT(framework) },
	{ "framework_version", CT_DOTTED, ENVIRONMENT_AT(framework_version) },
	{ NULL, CT_STRING, 0 },
};

/* The keys every datastore type has, other than `type`. */
static const struct config_key config_datastore_keys[] = {
	{ "uid", CT_UID, DATASTORE_AT(uid) },
	{ "gid", CT_GID, DATASTORE_AT(gid) },
	{ "mode", CT_MODE, DATASTORE_AT(mode) },
	{ "timeout", CT_POSITIVE, DATASTORE_AT(timeout) },
	{ "retries", CT_NONNEG, DATASTORE_AT(retries) },
	{ "metadata_ttl", CT_NONNEG, DATASTORE_AT(metadata_ttl) },
	{ NULL, CT_STRING, 0 },
};

#define CONFIG_N(a)	(sizeof(a) / sizeof((a)[0]))
_Static_assert(CONFIG_N(config_mlfs_keys) <= CONFIG_KEYS_MAX, "too many [mlfs] keys");
_Static_assert(CONFIG_N(config_node_keys) <= CONFIG_KEYS_MAX, "too many [node] keys");
_Static_assert(CONFIG_N(config_slurm_keys) <= CONFIG_KEYS_MAX, "too many [slurm] keys");
_Static_assert(CONFIG_N(config_containers_keys) <= CONFIG_KEYS_MAX, "too many [containers] keys");
_Static_assert(CONFIG_N(config_environment_keys) - 1 ==
	       sizeof(((struct environment_config *)0)->key_line) / sizeof(int),
	       "a key_line for each [environment] key");

/* Indexed by section - CS_MLFS. */
static const struct config_key *const config_single_keys[CS_SINGLES] = {
	config_mlfs_keys, config_node_keys, config_slurm_keys, config_containers_keys,
};

static const struct config_section_type {
	const char *word;
	enum config_section section;
	enum source_kind kind;
	int named;		/* [word NAME] rather than [word] */
} config_section_types[] = {
	{ "mlfs", CS_MLFS, SOURCE_DATASET, 0 },
	{ "node", CS_NODE, SOURCE_DATASET, 0 },
	{ "slurm", CS_SLURM, SOURCE_DATASET, 0 },
	{ "containers", CS_CONTAINERS, SOURCE_DATASET, 0 },
	{ "datastore", CS_DATASTORE, SOURCE_DATASET, 1 },
	{ "dataset", CS_SOURCE, SOURCE_DATASET, 1 },
	{ "checkpoint", CS_SOURCE, SOURCE_CHECKPOINT, 1 },
	{ "model", CS_SOURCE, SOURCE_MODEL, 1 },
	{ "source", CS_SOURCE, SOURCE_SOURCE, 1 },
	{ "environment", CS_ENVIRONMENT, SOURCE_DATASET, 1 },
};

const char *const config_source_words[] = {
	[SOURCE_DATASET] = "dataset",
	[SOURCE_CHECKPOINT] = "checkpoint",
	[SOURCE_MODEL] = "model",
	[SOURCE_SOURCE] = "source",
};

const char *config_source_word(enum source_kind kind)
{
	return config_source_words[kind];
}

int config_key_index(const struct config_key *keys, const char *key)
{
	for (int i = 0; keys[i].key; i++)
		if (strcmp(keys[i].key, key) == 0)
			return i;
	return -1;
}

/* "[section]: unknown key 'KEY'", with the key of @keys it is likely a typo of, or all of them. */
static void config_unknown_key(struct config_parser *p, int line, const char *key,
			       const struct config_key *keys)
{
	struct key_hint h;

	key_hint_init(&h, key);
	for (int i = 0; keys[i].key; i++)
		key_hint_add(&h, keys[i].key);
	config_error(p, line, "%s: unknown key '%s'%s", p->label, key, key_hint_text(&h));
}

/* Parses @value into the field @k names in @base; reports a bad value. */
static int config_set(struct config_parser *p, int line, const struct config_key *k,
		      void *base, const char *value)
{
	int ret = config_value_set(k->type, value, (char *)base + k->off, p->file);
	const char *problem, *hint;

	if (ret != -EINVAL)
		return ret;
	config_value_explain(k->type, &problem, &hint);
	config_key_error(p, line, k->key, "%s '%s' (%s)", problem, value, hint);
	return 0;
}

/* ---- section headers ---- */

static const struct config_section_type *config_find_section_type(const char *word,
								   size_t len)
{
	for (size_t i = 0; i < CONFIG_N(config_section_types); i++) {
		const char *w = config_section_types[i].word;

		if (strlen(w) == len && memcmp(w, word, len) == 0)
			return &config_section_types[i];
	}
	return NULL;
}

static int config_open_single(struct config_parser *p, enum config_section s, int line)
{
	int *first = &p->single_line[s - CS_MLFS];

	if (*first) {
		config_error(p, line, "duplicate %s (first at line %d)", p->label, *first);
		return 0;
	}
	*first = line;
	p->section = s;
	return 0;
}

static int config_open_datastore(struct config_parser *p, const char *name, int line)
{
	struct mlfs_config *cfg = p->cfg;
	const struct datastore_config *old = config_find_datastore(cfg, name);
	struct datastore_config *ds;

	if (!config_datastore_name_ok(name, strlen(name))) {
		config_error(p, line, "%s: bad datastore name (use 1 to 64 letters, digits, "
			     "'.', '_' or '-')", p->label);
		return 0;
	}
	if (old) {
		config_error(p, line, "duplicate %s (first at line %d)", p->label, old->line);
		return 0;
	}
	ds = reallocarray(cfg->datastores, cfg->n_datastores + 1, sizeof(*ds));
	if (!ds)
		return -ENOMEM;
	cfg->datastores = ds;
	ds += cfg->n_datastores;
	*ds = (struct datastore_config){ .file = cfg->file, .line = line, .uid = -1,
		.gid = -1, .mode = -1, .timeout = -1, .retries = -1, .metadata_ttl = -1 };
	p->cur = cfg->n_datastores++;
	ds->name = strdup(name);
	if (!ds->name)
		return -ENOMEM;
	p->section = CS_DATASTORE;
	return 0;
}

/* [environment NAME]: a datastore's alphabet, since specs and messages name it. */
static int config_open_environment(struct config_parser *p, const char *name, int line)
{
	struct mlfs_config *cfg = p->cfg;
	struct environment_config *env;

	if (!config_datastore_name_ok(name, strlen(name))) {
		config_error(p, line, "%s: bad environment name (use 1 to 64 letters, digits, "
			     "'.', '_' or '-')", p->label);
		return 0;
	}
	for (size_t i = 0; i < cfg->n_environments; i++)
		if (strcmp(cfg->environments[i].name, name) == 0) {
			config_error(p, line, "duplicate %s (first at line %d)", p->label,
				     cfg->environments[i].line);
			return 0;
		}
	env = reallocarray(cfg->environments, cfg->n_environments + 1, sizeof(*env));
	if (!env)
		return -ENOMEM;
	cfg->environments = env;
	env += cfg->n_environments;
	*env = (struct environment_config){ .line = line };
	p->cur = cfg->n_environments++;
	env->name = strdup(name);
	if (!env->name)
		return -ENOMEM;
	p->section = CS_ENVIRONMENT;
	return 0;
}

/* Reports an earlier source of @kind with the same name or shown name. */
static int config_source_clash(struct config_parser *p, enum source_kind kind,
			       const char *name, const char *shown, int line)
{
	for (size_t i = 0; i < p->cfg->n_sources; i++) {
		const struct source_config *src = &p->cfg->sources[i];

		if (src->kind != kind)
			continue;
		if (strcmp(src->name, name) == 0) {
			config_error(p, line, "duplicate %s (first at line %d)", p->label,
				     src->line);
			return 1;
		}
		if (strcmp(src->shown, shown) == 0) {
			config_error(p, line, "%s: shown as '%s' in the tree, the same as "
				     "[%s %s] at line %d", p->label, shown,
				     config_source_words[kind], src->name, src->line);
			return 1;
		}
	}
	return 0;
}

/* Appends a source; takes @shown. */
static int config_add_source(struct config_parser *p, enum source_kind kind,
			     const char *name, char *shown, int line)
{
	struct mlfs_config *cfg = p->cfg;
	struct source_config *src;

	src = reallocarray(cfg->sources, cfg->n_sources + 1, sizeof(*src));
	if (!src) {
		free(shown);
		return -ENOMEM;
	}
	cfg->sources = src;
	src += cfg->n_sources;
	*src = (struct source_config){ .kind = kind, .shown = shown, .line = line };
	p->cur = cfg->n_sources++;
	src->name = strdup(name);
	if (!src->name)
		return -ENOMEM;
	p->section = CS_SOURCE;
	return 0;
}

static int config_open_source(struct config_parser *p, enum source_kind kind,
			      const char *name, int line)
{
	const char *problem = config_source_name_problem(name);
	char *shown;
	int ret;

	if (problem) {
		config_error(p, line, "%s: bad name: %s", p->label, problem);
		return 0;
	}
	ret = path_shown_name(&shown, name);
	if (ret)
		return ret;
	if (config_source_clash(p, kind, name, shown, line)) {
		free(shown);
		return 0;
	}
	return config_add_source(p, kind, name, shown, line);
}

/* Sets the label of a header with no error in its word and name. */
static int config_set_label(struct config_parser *p, const char *word, const char *name)
{
	int ret;

	if (*name)
		ret = asprintf(&p->label, "[%s %s]", word, name);
	else
		ret = asprintf(&p->label, "[%s]", word);
	if (ret < 0) {
		p->label = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int config_on_section(struct config_parser *p, int line, const char *text)
{
	size_t wlen = strcspn(text, " \t");
	const char *name = text + wlen + strspn(text + wlen, " \t");
	const struct config_section_type *t = config_find_section_type(text, wlen);

	p->section = CS_SKIP;
	free(p->label);
	p->label = NULL;
	if (!t) {
		config_error(p, line, "unknown section [%s] (use mlfs, node, slurm, "
			     "containers, datastore, dataset, checkpoint, model, source or "
			     "environment)",
			     text);
		return 0;
	}
	if (t->named != (*name != '\0')) {
		config_error(p, line, t->named ? "[%s] needs a name: [%s NAME]" :
			     "[%s] takes no name: [%s]", t->word, t->word);
		return 0;
	}
	if (config_set_label(p, t->word, name) < 0)
		return -ENOMEM;
	if (t->section == CS_DATASTORE)
		return config_open_datastore(p, name, line);
	if (t->section == CS_SOURCE)
		return config_open_source(p, t->kind, name, line);
	if (t->section == CS_ENVIRONMENT)
		return config_open_environment(p, name, line);
	return config_open_single(p, t->section, line);
}

/* ---- keys ---- */

int config_empty(struct config_parser *p, int line, const char *key, const char *value)
{
	if (*value)
		return 0;
	config_key_error(p, line, key, "empty value");
	return 1;
}

static int config_single_key(struct config_parser *p, int line, const char *key,
			     const char *value)
{
	const struct config_key *keys = config_single_keys[p->section - CS_MLFS];
	int *lines = p->key_line[p->section - CS_MLFS];
	int i = config_key_index(keys, key);

	if (i < 0) {
		config_unknown_key(p, line, key, keys);
		return 0;
	}
	if (lines[i]) {
		config_key_error(p, line, key, "duplicate key (first at line %d)", lines[i]);
		return 0;
	}
	lines[i] = line;
	if (config_empty(p, line, key, value))
		return 0;
	return config_set(p, line, &keys[i], p->cfg, value);
}

static int config_add_kv(struct datastore_config *ds, const char *key, const char *value,
			 int line)
{
	struct config_kv *kv = reallocarray(ds->kv, ds->n_kv + 1, sizeof(*kv));

	if (!kv)
		return -ENOMEM;
	ds->kv = kv;
	kv += ds->n_kv++;
	kv->key = strdup(key);
	kv->value = strdup(value);
	kv->line = line;
	return kv->key && kv->value ? 0 : -ENOMEM;
}

static int config_datastore_key(struct config_parser *p, int line, const char *key,
				const char *value)
{
	struct datastore_config *ds = &p->cfg->datastores[p->cur];
	int first, i, ret;

	if (config_get(ds, key, &first)) {
		config_key_error(p, line, key, "duplicate key (first at line %d)", first);
		return 0;
	}
	if (config_empty(p, line, key, value))
		return 0;
	ret = config_add_kv(ds, key, value, line);
	if (ret)
		return ret;
	if (strcmp(key, "type") == 0) {
		ds->type_line = line;
		return config_value_set(CT_STRING, value, &ds->type, NULL);
	}
	i = config_key_index(config_datastore_keys, key);
	return i < 0 ? 0 : config_set(p, line, &config_datastore_keys[i], ds, value);
}

static int config_environment_key(struct config_parser *p, int line, const char *key,
				  const char *value)
{
	struct environment_config *env = &p->cfg->environments[p->cur];
	int i = config_key_index(config_environment_keys, key);
	struct image_ref ref;
	char why[256];

	if (i < 0) {
		config_unknown_key(p, line, key, config_environment_keys);
		return 0;
	}
	if (env->key_line[i]) {
		config_key_error(p, line, key, "duplicate key (first at line %d)", env->key_line[i]);
		return 0;
	}
	env->key_line[i] = line;
	if (config_empty(p, line, key, value))
		return 0;
	if (strcmp(key, "image") == 0 && image_ref_parse(value, &ref, why, sizeof(why)) < 0) {
		config_key_error(p, line, key, "not a valid image name: %s", why);
		return 0;
	}
	return config_set(p, line, &config_environment_keys[i], env, value);
}

static int config_on_key(struct config_parser *p, int line, const char *key,
			 const char *value)
{
	switch (p->section) {
	case CS_SKIP:
		return 0;
	case CS_NONE:
		config_error(p, line, "key '%s' is outside any section", key);
		return 0;
	case CS_DATASTORE:
		return config_datastore_key(p, line, key, value);
	case CS_SOURCE:
		return config_source_key(p, line, key, value);
	case CS_ENVIRONMENT:
		return config_environment_key(p, line, key, value);
	default:
		return config_single_key(p, line, key, value);
	}
}

static int config_on_event(void *payload, const struct ini_event *ev)
{
	struct config_parser *p = payload;

	switch (ev->kind) {
	case INI_SECTION:
		return config_on_section(p, ev->line, ev->section);
	case INI_KEY:
		return config_on_key(p, ev->line, ev->key, ev->value);
	case INI_BAD_HEADER:
		p->section = CS_SKIP;
		config_error(p, ev->line, "%s", ev->error);
		return 0;
	case INI_BAD_LINE:
		if (p->section == CS_NONE || p->section == CS_SKIP)
			config_error(p, ev->line, "%s", ev->error);
		else
			config_error(p, ev->line, "%s: %s", p->label, ev->error);
		return 0;
	}
	return 0;
}

/* ---- the whole file ---- */

/* A config with every default set; *out is set even on failure. */
static int config_new(struct mlfs_config **out, const char *file)
{
	struct mlfs_config *cfg = calloc(1, sizeof(*cfg));

	*out = cfg;
	if (!cfg)
		return -ENOMEM;
	cfg->cache_size = 10ull << 30;
	cfg->git_cache_size = 20ull << 30;
	cfg->archive_cache_size = 20ull << 30;
	cfg->log_size = 256ull << 20;
	cfg->max_jobs = 1000;
	cfg->read_ahead_files = 32;
	cfg->timeout = 30;
	cfg->metadata_ttl = CONFIG_METADATA_TTL;
	cfg->retries = 3;
	cfg->node = (struct node_config){ .gpus = -1, .gpu_memory_gb = -1, .cpus = -1,
		.memory_gb = -1, .price = -1 };
	cfg->slurm.poll_interval = 5;
	cfg->containers.cache_size = 20ull << 30;
	cfg->file = strdup(file);
	cfg->state_dir = strdup("/var/lib/mlfs");
	cfg->cache_dir = strdup("/var/cache/mlfs");
	if (!cfg->file || !cfg->state_dir || !cfg->cache_dir)
		return -ENOMEM;
	return 0;
}

int config_parse(struct mlfs_config **out, const char *file, const char *text,
		 size_t len, const struct config_form *const *forms, struct diag *d)
{
	struct config_parser p = { .file = file, .section = CS_NONE };
	int ret;

	assert(file && (text || len == 0) && d);
	ret = config_new(&p.cfg, file);
	if (ret == 0)
		p.cfg->forms = forms;
	if (ret == 0)
		ret = ini_parse(text ? text : "", len, config_on_event, &p);
	if (ret == 0)
		config_check_refs(&p);
	if (ret == 0)
		p.cfg->executor_line = p.key_line[0][config_key_index(config_mlfs_keys, "executor")];
	if (ret == 0 && p.nomem)
		ret = -ENOMEM;
	if (ret == 0 && p.n_errs)
		ret = -EINVAL;
	if (ret == 0)
		ret = config_finish(p.cfg);
	config_flush_errors(&p, d);
	if (ret == -ENOMEM)
		diag_add(d, file, 0, "%s", strerror(ENOMEM));
	config_parser_free(&p);
	if (ret) {
		config_free(p.cfg);
		return ret;
	}
	*out = p.cfg;
	return 0;
}

int config_add_job_source(struct mlfs_config *cfg, enum source_kind kind, const char *name,
			  const char *value, const char *file, const char *field, struct diag *d)
{
	struct config_parser p = { .file = file, .cfg = cfg, .section = CS_NONE };
	struct source_config *src;
	char *shown;
	int ret = path_shown_name(&shown, name);

	if (ret == 0)
		ret = config_add_source(&p, kind, name, shown, 0);
	if (ret == 0)
		ret = (p.label = strdup(field)) ? 0 : -ENOMEM;
	if (ret < 0)
		goto out;
	src = &cfg->sources[p.cur];
	src->source = strdup(value);
	if (!src->source) {
		ret = -ENOMEM;
		goto out;
	}
	if (value[0] == '/')
		ret = config_add_path_datastore(cfg, src);
	else
		ret = config_source_parse(&p, src);
	if (ret == -ENOTSUP) {
		config_error(&p, 0, "%s: %s: no datastore type reads a local path", field, value);
		ret = 0;
	}
	if (ret == 0 && src->datastore && !config_find_datastore(cfg, src->datastore))
		config_error(&p, 0, "%s: no datastore named '%s' in %s", field, src->datastore,
			     cfg->file);
	if (ret == 0 && p.nomem)
		ret = -ENOMEM;
	if (ret == 0 && p.n_errs)
		ret = -EINVAL;
	if (ret == 0)
		ret = config_finish(cfg);
	for (size_t i = 0; ret == 0 && src->datastore && i < cfg->n_datastores; i++)
		if (cfg->datastores[i].implicit &&
		    strcmp(cfg->datastores[i].name, src->datastore) == 0)
			cfg->datastores[i].staged = true;
	config_flush_errors(&p, d);
out:
	config_parser_free(&p);
	return ret < 0 ? ret : (int)p.cur;
}

/* Reads all of @fd into a new buffer. */
static int config_read_fd(int fd, char **out, size_t *outlen)
{
	size_t cap = 0, len = 0;
	char *buf = NULL;

	for (;;) {
		ssize_t n;

		if (len == cap) {
			char *bigger = len < CONFIG_MAX_BYTES ?
				realloc(buf, cap = cap ? cap * 2 : 4096) : NULL;

			if (!bigger) {
				free(buf);
				return len < CONFIG_MAX_BYTES ? -ENOMEM : -EFBIG;
			}
			buf = bigger;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int ret = n < 0 ? -errno : 0;

			if (ret == 0) {
				*out = buf;
				*outlen = len;
			} else {
				free(buf);
			}
			return ret;
		}
		len += (size_t)n;
	}
}

int config_load(struct mlfs_config **out, const char *file,
		const struct config_form *const *forms, struct diag *d)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	char *text = NULL;
	int ret;

	ret = fd < 0 ? -errno : config_read_fd(fd, &text, &len);
	if (fd >= 0)
		close(fd);
	if (ret) {
		diag_add(d, file, 0, "%s", strerror(-ret));
		return ret;
	}
	ret = config_parse(out, file, text, len, forms, d);
	free(text);
	return ret;
}

void config_free(struct mlfs_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->n_datastores; i++) {
		struct datastore_config *ds = &cfg->datastores[i];

		for (size_t j = 0; j < ds->n_kv; j++) {
			free(ds->kv[j].key);
			free(ds->kv[j].value);
		}
		free(ds->kv);
		free(ds->name);
		free(ds->type);
	}
	for (size_t i = 0; i < cfg->n_sources; i++) {
		struct source_config *src = &cfg->sources[i];

		free(src->name);
		free(src->shown);
		free(src->source);
		free(src->datastore);
		free(src->path);
		free(src->url_scheme);
		free(src->mount_path);
		free(src->sub_path);
	}
	for (size_t i = 0; i < cfg->n_environments; i++) {
		struct environment_config *e = &cfg->environments[i];

		free(e->name);
		free(e->image);
		free(e->python_version);
		free(e->framework);
		free(e->framework_version);
	}
	free(cfg->environments);
	free(cfg->datastores);
	free(cfg->sources);
	free(cfg->node.gpu_type);
	free(cfg->node.cuda_version);
	free(cfg->node.cluster_id);
	free(cfg->node.name);
	free(cfg->slurm.partition);
	free(cfg->slurm.account);
	free(cfg->slurm.sbatch_args);
	free(cfg->slurm.bin_dir);
	free(cfg->containers.runtime);
	free(cfg->containers.oci_runtime);
	free(cfg->containers.insecure_registries);
	free(cfg->containers.auth_file);
	free(cfg->file);
	free(cfg->state_dir);
	free(cfg->cache_dir);
	free(cfg->executor);
	free(cfg->store);
	free(cfg);
}

long config_find_source(const struct mlfs_config *cfg, enum source_kind kind, const char *name)
{
	for (size_t i = 0; i < cfg->n_sources; i++)
		if (cfg->sources[i].kind == kind && (strcmp(cfg->sources[i].name, name) == 0 ||
						     strcmp(cfg->sources[i].shown, name) == 0))
			return (long)i;
	return -1;
}

int config_rename(struct mlfs_config *cfg, const char *file)
{
	char *old = cfg->file, *copy = strdup(file);

	if (!copy)
		return -ENOMEM;
	cfg->file = copy;
	for (size_t i = 0; i < cfg->n_datastores; i++)
		if (cfg->datastores[i].file == old)
			cfg->datastores[i].file = copy;
	free(old);
	return 0;
}

const char *config_get(const struct datastore_config *ds, const char *key, int *line)
{
	for (size_t i = 0; i < ds->n_kv; i++) {
		if (strcmp(ds->kv[i].key, key) == 0) {
			if (line)
				*line = ds->kv[i].line;
			return ds->kv[i].value;
		}
	}
	if (line)
		*line = 0;
	return NULL;
}

const struct datastore_config *config_find_datastore(const struct mlfs_config *cfg,
						      const char *name)
{
	for (size_t i = 0; i < cfg->n_datastores; i++)
		if (strcmp(cfg->datastores[i].name, name) == 0)
			return &cfg->datastores[i];
	return NULL;
}
