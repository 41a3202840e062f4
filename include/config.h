/*
 * config.h - the mlfs configuration file (DESIGN §4).
 *
 * One INI file in the style of rclone.conf.  config_load() reads it and
 * checks everything that does not depend on a backend: known sections and
 * keys of [mlfs] and [node], value syntax (sizes, numbers, modes), names,
 * duplicates, and that every source names a datastore or a URL.  Keys that
 * belong to one datastore type are kept as a list of key/value pairs with
 * their line numbers; the backend registry checks them (backend.h).  What
 * a URL or a local path means is each datastore type's own (struct
 * config_form, handed in by the registry): the reader knows no type.
 */
#ifndef MLFS_CONFIG_H
#define MLFS_CONFIG_H

/* The smallest log_size other than 0 (no limit). */
#define CONFIG_LOG_SIZE_MIN (64u << 10)
/* metadata_ttl's default and the most it counts as, in seconds. */
#define CONFIG_METADATA_TTL	5
#define CONFIG_METADATA_TTL_MAX	(365l * 24 * 3600)

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "diag.h"

struct config_kv {
	char *key;
	char *value;
	int line;
};

/* [datastore NAME] */
struct datastore_config {
	const char *file;	/* the config file, borrowed from struct mlfs_config */
	char *name;
	int line;		/* line of the section header */
	char *type;		/* value of `type` */
	int type_line;
	/* Owner and mode shown for files; -1 when not set. */
	long uid, gid;
	long mode;		/* permission bits for files; dirs add x where r is set */
	long timeout;		/* seconds, -1 when not set */
	long retries;		/* -1 when not set */
	long metadata_ttl;	/* seconds a listing's or a HEAD's word on a file is used under
				 * datastores/ (config_metadata_ttl); -1 when not set */
	/* Made by mlfs for a URL source (named "dataset:NAME" etc.), not shown in datastores/. */
	bool implicit;
	/* Made for a job's spec (config_add_job_source): its data is wanted before the worker
	 * starts, so a backend that fetches a whole source (git) does it at create. */
	bool staged;
	/* Borrowed from struct mlfs_config, for backends that stage or cache. */
	const char *state_dir;
	const char *cache_dir;
	uint64_t git_cache_size;	/* the same: cache_dir/git kept under it (be_git_evict) */
	/* Every key of the section, in file order, common keys included. */
	struct config_kv *kv;
	size_t n_kv;
};

enum source_kind {
	SOURCE_DATASET,
	SOURCE_CHECKPOINT,
	SOURCE_MODEL,
	SOURCE_SOURCE,		/* [source NAME]: Kibernetika's sources, GPULab's storage */
};

/* [dataset NAME], [checkpoint NAME], [model NAME] */
struct source_config {
	enum source_kind kind;
	char *name;		/* as written, spaces and all */
	char *shown;		/* the name in the tree: spaces turned into '_' */
	int line;
	char *source;		/* value of `source` as written */
	int source_line;
	/* Parsed source: a datastore and a path inside it, or a URL.  A URL
	 * source of a compiled-in scheme also gets an implicit datastore, named
	 * here, whose root is the URL (config_load makes it). */
	char *datastore;	/* NULL for a URL without an implicit datastore */
	char *path;		/* canonical backend path ("" = root) for DATASTORE:/path */
	char *url_scheme;	/* a URL's scheme, lowercased, one a form reads; else NULL */
	/* [source NAME] only: */
	char *mount_path;	/* where a container sees it: absolute, canonical; NULL: the
				 * default, /workspace/SHOWN (config_mount_path) */
	char *sub_path;		/* the folder of the source shown instead of its top; NULL: none */
};

struct mlfs_config;

/*
 * What a config says of one datastore type, known whether or not its code
 * is built: the keys of its section, and the sources that name such a
 * datastore by themselves (URLs of its schemes; absolute local paths).
 * Each backend keeps its own form in its own file; the registry hands the
 * list to config_load (backend_config_forms()).
 */
struct config_form {
	const char *type;
	const char *const *keys;	/* besides the common ones; NULL-terminated */
	const char *const *schemes;	/* lowercase URL schemes, NULL-terminated; NULL: none */
	bool paths;			/* absolute local paths of a job name it */
	/* Whether this type reads @url whatever its scheme says (Azure's
	 * https://ACCOUNT.blob.core.windows.net/...): asked before the schemes.
	 * Optional. */
	bool (*claims)(const char *url);
	/*
	 * Adds to @ds, the implicit datastore whose root is @url (a URL of one
	 * of @schemes, or a local path), the keys that say where it is; @rest
	 * is what follows "scheme://" (never empty; a path: the path).  It may
	 * borrow a configured datastore's keys (config_like, config_borrow)
	 * where one serves the same place.  Keys are added at @line.  0 or
	 * -ENOMEM.
	 */
	int (*url_keys)(const struct mlfs_config *cfg, struct datastore_config *ds,
			const char *url, const char *rest, int line);
};

struct node_config {
	long gpus;		/* -1 = detect */
	char *gpu_type;
	long gpu_memory_gb;
	char *cuda_version;
	long cpus;
	long memory_gb;
	double price;		/* < 0 = not set */
	char *cluster_id;
	char *name;
};

struct slurm_config {
	char *partition;
	char *account;
	char *sbatch_args;
	long poll_interval;
	char *bin_dir;
};

/* [containers] (DESIGN §10): how workers with an image run. */
struct containers_config {
	char *runtime;		/* podman's path; NULL: found on PATH; "none": no containers */
	char *oci_runtime;	/* runc or crun, a name or a path; NULL: what the cgroups allow */
	char *insecure_registries;	/* HOST:PORT list served over plain HTTP; NULL: none */
	char *auth_file;	/* a Docker config.json for every pull; NULL: none */
	uint64_t cache_size;	/* bytes of images kept */
	bool fallback_host;	/* fallback = host: no runtime, run on the node */
};

/*
 * [environment NAME] (DESIGN §4): a proxiML base environment, chosen by a
 * native spec's environment.python_version, framework and
 * framework_version (spec_env.c), and the image it runs in.
 */
struct environment_config {
	char *name;
	int line;		/* of the section header */
	char *image;		/* a valid image reference (image_ref_parse); required */
	char *python_version;	/* numbers joined by dots ("3.11"); NULL: not set */
	char *framework;	/* compared without case ("PyTorch"); NULL: not set */
	char *framework_version;	/* numbers joined by dots ("2.1.0"); NULL: not set */
	int key_line[4];	/* where image, python_version, framework, framework_version
				 * were given (0: not), a bad value too */
};

struct mlfs_config {
	char *file;		/* path the config was read from */
	char *state_dir;
	char *cache_dir;
	uint64_t cache_size;	/* bytes */
	uint64_t git_cache_size;	/* bytes of cache_dir/git (git backend); 0: no limit */
	uint64_t archive_cache_size;	/* bytes of cache_dir/archives; 0: no limit */
	char *executor;		/* an executor's name (exec.h checks it: exec_check_config);
				 * NULL: not set, the registry's default */
	int executor_line;	/* where it was set; 0 = not set */
	uint64_t log_size;	/* bytes a worker's log grows to before it is rotated; 0 = no limit */
	long max_jobs;		/* unfinished jobs one user may have */
	long timeout;		/* seconds a remote call may take */
	long retries;
	long metadata_ttl;	/* datastores' default (CONFIG_METADATA_TTL) */
	long read_ahead_files;	/* files fetched ahead of a walk's open (fs_prefetch.c); 0 = off */
	char *store;
	struct node_config node;
	struct slurm_config slurm;
	struct containers_config containers;
	struct datastore_config *datastores;
	size_t n_datastores;
	struct source_config *sources;
	size_t n_sources;
	struct environment_config *environments;	/* in file order */
	size_t n_environments;
	const struct config_form *const *forms;	/* as config_load was given them */
};

/*
 * Reads and checks @file.  @forms (NULL-terminated, kept, not copied) say
 * what URLs and local paths name; a URL of a scheme none reads is an error.
 * On success returns 0 and hands out the config in *out (free with
 * config_free).  On failure returns a negated errno: -EINVAL when the file
 * has errors (each one added to @d as "file:line: message"), or the error
 * of opening or reading it (also added to @d).
 */
int config_load(struct mlfs_config **out, const char *file,
		const struct config_form *const *forms, struct diag *d);

/* Same, from text in memory; @file names it in messages. */
int config_parse(struct mlfs_config **out, const char *file, const char *text,
		 size_t len, const struct config_form *const *forms, struct diag *d);

void config_free(struct mlfs_config *cfg);

/*
 * Adds to @cfg a source a job names (mlfs job): as if the config had a
 * section [KIND @name] with source = @value, which is DATASTORE:/path, a
 * URL, or an absolute local path (an implicit local datastore).  An archive
 * is the source's path inside the datastore of its folder.  Problems go to
 * @d as "@file: @field source: message".  Returns the new source's index,
 * -EINVAL or -ENOMEM.  Pointers into cfg->sources and cfg->datastores may
 * move.
 */
int config_add_job_source(struct mlfs_config *cfg, enum source_kind kind, const char *name,
			  const char *value, const char *file, const char *field, struct diag *d);

/* "dataset", "checkpoint", "model" or "source". */
const char *config_source_word(enum source_kind kind);

/* Where a container sees [source] @src: its mount_path, else /workspace/SHOWN, into @buf. */
void config_mount_path(const struct source_config *src, char *buf, size_t size);

/* The index of the source of @kind named @name (as written or as shown), or -1. */
long config_find_source(const struct mlfs_config *cfg, enum source_kind kind, const char *name);

/* Names the config by @file (e.g. made absolute) from now on, in every message. 0 or -ENOMEM. */
int config_rename(struct mlfs_config *cfg, const char *file);

/* The value of @key in a datastore section, or NULL; *line gets its line. */
const char *config_get(const struct datastore_config *ds, const char *key, int *line);

/* @ds's metadata_ttl in seconds: its own, the [mlfs] one, else the default; a year at most. */
static inline long config_metadata_ttl(const struct datastore_config *ds)
{
	long ttl = ds->metadata_ttl >= 0 ? ds->metadata_ttl : CONFIG_METADATA_TTL;

	return ttl < CONFIG_METADATA_TTL_MAX ? ttl : CONFIG_METADATA_TTL_MAX;
}

const struct datastore_config *config_find_datastore(const struct mlfs_config *cfg,
						      const char *name);

/* ---- for a form's url_keys ---- */

/*
 * The next datastore after @prev (NULL: the first) that the file
 * configures (not an implicit one) of @type whose @key is @value.
 */
const struct datastore_config *config_like(const struct mlfs_config *cfg,
					   const struct datastore_config *prev,
					   const char *type, const char *key, const char *value);

/* Copies the keys of @like (NULL: none) into @ds but its type and the ones in @own. */
int config_borrow(struct datastore_config *ds, const struct datastore_config *like,
		  const char *const *own, int line);

/* Appends @key = @value (read at @line) to @ds's kv[]; 0 or -ENOMEM. */
int config_kv_add(struct datastore_config *ds, const char *key, const char *value, int line);

/*
 * Parses a size such as "100G", "512M", "1.5T", "4096", "10GiB" (powers of
 * 1024).  Returns 0 and the byte count in *out, or -EINVAL.
 */
int config_parse_size(const char *s, uint64_t *out);

/* A boolean value: 1 for true/yes/on/1, 0 for false/no/off/0 (any case), -1 else. */
int config_parse_bool(const char *s);

/* Whether @s is numbers joined by dots ("3", "3.11", "2.1.0"), as environment versions are. */
bool config_dotted_version(const char *s);

/*
 * Hands out @value as an absolute path: unchanged when it starts with '/',
 * else taken relative to the folder of the config file @file (made absolute
 * with the current directory when @file is relative).  NULL on ENOMEM.
 */
char *config_resolve_path(const char *file, const char *value);

#endif
