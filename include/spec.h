/*
 * spec.h - the job model every spec format is mapped to.
 *
 * A spec file (native proxiML-style, OpenPAI v1, GPULab or Kibernetika, in
 * JSON or YAML, each read by its own parser) becomes one struct spec.  The
 * scheduler and the executors only ever see this model.  Fields a parser
 * reads but mlfs cannot honour yet are listed in `ignored`, never dropped.
 *
 * Errors are collected in a struct diag as "file:line:col: field: message",
 * one per problem, so a user fixes a spec in one pass.
 */
#ifndef MLFS_SPEC_H
#define MLFS_SPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "diag.h"

#define SPEC_MAX_SIZE (1024 * 1024)	/* bytes; a bigger spec is refused with EFBIG */
#define SPEC_NAME_MAX 64

enum spec_format {
	SPEC_NATIVE,
	SPEC_OPENPAI,
	SPEC_GPULAB,
	SPEC_KIBERNETIKA,
};

enum spec_type {
	SPEC_TRAINING,
	SPEC_INFERENCE,
};

struct spec_env {
	char *name;
	char *value;
};

/* What one worker needs from a node. */
struct spec_resources {
	char **gpu_types;		/* any of; none = any type */
	size_t n_gpu_types;
	bool gpu_type_substring;	/* GPULab: partial matches, case-insensitive */
	long gpu_count;
	long cpu_count;
	double memory_gb;		/* < 0: not accounted */
	long disk_size_gb;
	double max_price;		/* < 0: no limit */
	char *min_cuda_version;		/* "12.4"; NULL: no minimum */
	char *cluster_id;		/* GPULab clusterId: must equal [node] cluster_id; NULL: any */
	char *node_name;		/* GPULab slaveName: must equal [node] name; NULL: any */
};

/* Ports a worker asks for: @count free TCP ports labelled @label (OpenPAI's portList). */
struct spec_port {
	char *label;
	long count;
};

/*
 * The container image a worker runs in (DESIGN §10), or none: then it runs
 * on the node.  Credentials a spec carries are kept apart from the name and
 * never shown (spec_json leaves them out).
 */
struct spec_image {
	char *ref;			/* as written, credentials taken off; NULL: no image */
	char *ref_field;		/* the spec field it came from, for messages */
	char *auth;			/* GPULab "USER:PASSWORD" of its image name; NULL: none */
	char *auth_file;		/* OpenPAI authFile: a Docker config.json on the node; NULL */
	long shm_mb;			/* /dev/shm size, OpenPAI shmMB; 0: the runtime's default */
};

/* A source a Kibernetika task declares (its `sources:`), with a [source] section's fields. */
struct spec_source {
	char *name;
	char *source;			/* as [source] `source` */
	char *mount_path;		/* NULL: /workspace/NAME */
	char *sub_path;			/* NULL: the source's top */
};

/*
 * One source a worker maps (Kibernetika `volumes`, or every source with
 * `default_volume_mapping`): by name, a [source] of the config or the
 * task's own, with its sub_path and mount_path when they differ.
 */
struct spec_volume {
	char *name;			/* NULL for a GPULab storage entry (@host_path) */
	char *sub_path;			/* NULL: the source's own */
	char *mount_path;		/* NULL: the source's own */
	/* GPULab storage: its hostPath (else its containerPath), canonical: the source is the
	 * [source] whose mount_path is its longest prefix, the rest a path below it */
	char *host_path;
};

struct spec_worker {
	char *command;			/* run by /bin/sh -c; "" = the image's own (GPULab) */
	struct spec_image image;
	struct spec_resources res;
	struct spec_env *env;		/* variables of this worker's format known at parse time */
	size_t n_env;
	char *role;			/* task role / resource name; NULL for native workers */
	unsigned int role_index;	/* index within its role, from 0 */
	struct spec_port *ports;
	size_t n_ports;
	char *work_dir;			/* Kibernetika workDir, $VARs unresolved; NULL: the default */
	struct spec_volume *volumes;	/* Kibernetika volumes */
	size_t n_volumes;
	bool all_sources;		/* default_volume_mapping: every source, besides volumes */
	char *default_mount_path;	/* a prefix of every mapped source's mount path; NULL: none */
};

/*
 * A group of workers (OpenPAI task role, Kibernetika resource): workers
 * [first, first + n) of spec->workers, in order.
 */
struct spec_role {
	char *name;
	size_t first, n;
	long min_failed;		/* the job fails once this many failed; < 0: null */
	long min_succeeded;		/* the job succeeds once this many succeeded; < 0: null */
};

/*
 * A place data comes from or goes to: native data.input, data.output and
 * model.  @type is as written ("s3", "datastore", "local", "dataset", ...);
 * NULL when the spec has none.  @path is as written too ("s3://b/p/",
 * "NAME:/folder", "/abs", a name).
 */
struct spec_location {
	char *type;
	char *path;
	bool archive;			/* data.output: zip it (s3, local); default true */
};

/* What a worker sees and where its output goes (DESIGN §5, §7). */
struct spec_data {
	char **datasets;		/* names as written, in spec order */
	size_t n_datasets;
	char **checkpoints;
	size_t n_checkpoints;
	struct spec_location input;	/* inference input */
	struct spec_location output;
	struct spec_location model;
};

/*
 * proxiML's base environment: native environment.python_version, framework
 * and framework_version, chosen among the node's [environment NAME]
 * sections at acceptance (spec_check_environment), which gives every worker
 * that section's image.  All NULL when the spec asks for none.
 */
struct spec_base_env {
	char *python_version;		/* as written; a JSON number as its shortest text */
	char *framework;
	char *framework_version;
	char *field;			/* the first of them the spec gives, for messages */
	char *name;			/* the section chosen; NULL until then */
};

/*
 * Packages installed in the worker's image before its command, apt then
 * conda then pip (native environment.packages; container.h).  Each name has
 * no blank or control character and does not start with '-'.
 */
struct spec_packages {
	char **apt, **conda, **pip;
	size_t n_apt, n_conda, n_pip;
};

struct spec {
	enum spec_format format;
	char *name;			/* matches ^[A-Za-z0-9._~-]{1,64}$, not "." or ".." */
	enum spec_type type;
	struct spec_worker *workers;	/* at least one */
	size_t n_workers;
	bool gang;			/* all workers start together or none does */
	struct spec_env *env;		/* environment.variables, in spec order */
	size_t n_env;
	long retry_count;		/* >= 0 */
	long wait_timeout;		/* seconds; < 0: none */
	long run_timeout;		/* seconds; < 0: none */
	char **ignored;			/* "field: why", e.g. "environment.packages: needs a container runtime" */
	size_t n_ignored;
	struct spec_role *roles;	/* none for native specs */
	size_t n_roles;
	char *description;		/* NULL when none */
	struct spec_data data;		/* empty for formats without data sections */
	struct spec_base_env base_env;	/* native only */
	struct spec_packages packages;	/* native only */
	struct spec_source *sources;	/* Kibernetika's task sources */
	size_t n_sources;
};

/*
 * What a started job got from the node, for the variables that depend on
 * it (hosts and ports of every task, GPUs given): spec_runtime_env.
 */
struct spec_runtime {
	const char *job_id;		/* unique for the job on this node */
	const char *host;		/* the node's address as workers reach each other */
	/* ports[w] holds worker w's ports: for each spec_port of it in order, count of them */
	int *const *ports;
	const unsigned int *n_gpus;	/* GPUs given to each worker */
	const char *user;		/* the job owner's name */
};

typedef void spec_env_fn(void *arg, const char *name, const char *value);

/*
 * Sets, through @set, the variables of worker @w (from 0) that its
 * format promises and that depend on @rt (PAI_HOST_IP_*, PAI_PORT_LIST_*,
 * GPULAB_GPUS_RESERVED, ...).  Nothing for native specs.
 */
void spec_runtime_env(const struct spec *s, size_t w, const struct spec_runtime *rt,
		      spec_env_fn *set, void *arg);

/*
 * Parses the spec in @text (@len bytes, need not be NUL-terminated), which
 * came from the file @file (used in messages).  @default_name names the job
 * when the spec has no name (the file name without its extension).
 * Returns 0 and hands out *out (free with spec_free), -EFBIG when @len is
 * over SPEC_MAX_SIZE, or -EINVAL with every problem added to @d.
 */
int spec_parse(struct spec **out, const char *file, const char *text, size_t len,
	       const char *default_name, struct diag *d);

void spec_free(struct spec *s);

/* true when @name is a valid job name. */
bool spec_name_valid(const char *name);

/*
 * The spec as mlfs understood it, as pretty JSON (malloc'd, NUL-terminated),
 * with the values of variables whose names look secret (PASSWORD, SECRET,
 * TOKEN, KEY, CREDENTIAL) replaced by "<redacted>".  NULL on ENOMEM.
 */
char *spec_to_json(const struct spec *s);

struct mlfs_config;
/*
 * Checks the data of @s against @cfg (spec_data.c): datasets, checkpoints
 * and models named by name exist (or a store may hold them), datastores
 * named in NAME:/path exist, a registered output has a store.  Every
 * problem goes to @d as "@file:line:col: field: message" (the position
 * found in @text, the spec as written, when it is JSON; NULL: none).
 * 0 or -EINVAL.
 */
int spec_check_data(const struct spec *s, const struct mlfs_config *cfg, const char *file,
		    const char *text, size_t len, struct diag *d);

/*
 * A kind of output destination (data.output.type, "none" when a spec names
 * none), and what each implies, so that the type is compared in one place
 * (spec_output_kind) and the upload, the checks and `mlfs umount` ask the
 * kind.
 */
struct spec_output_kind {
	const char *type;	/* as specs and output.json write it */
	bool registered;	/* dataset, checkpoint, model: kept under [mlfs] store, TYPEs/PATH */
	bool as_written;	/* s3, datastore, local: the path is the destination */
	bool zips;		/* s3, local: zipped into one file unless archive is false */
	bool makes_folder;	/* local: the folder is made before the upload */
	bool kept;		/* none: the staged files stay where they are, for the user */
};

/*
 * One source a worker sees (spec_sources.c): a task's own (@task) or a
 * [source] of the config (@cfg_src), at sources/@name in its view, with
 * @sub_path ("" for the source's top) and, in a container, at @mount_path;
 * @var is the variable naming where it is (Kibernetika's <NAME>_DIR).
 */
struct spec_mount {
	char name[80];
	const struct spec_source *task;
	long cfg_src;			/* index into cfg->sources, or -1 */
	char sub_path[2048];
	char mount_path[2048];
	char var[96];
	bool too_long;			/* a path did not fit: spec_worker_mounts says -ENAMETOOLONG */
};

/*
 * The sources worker @w (from 0) of @s maps, given @cfg's [source]
 * sections (NULL: none): every one with default_volume_mapping (the task's
 * own before the config's of the same name), then its volumes (one naming
 * a source already mapped replaces that mapping; a GPULab storage entry
 * maps the [source] covering its host path, under a name of its own).  0
 * and *@out (malloc'd) and *@n; -ENOENT with *@bad_volume when a volume
 * names no source or no source covers its host path (*@out holds the ones
 * before); -ENAMETOOLONG with *@bad_volume the index in *@out of the first
 * mount whose sub path or mount path would pass 2047 bytes (*@out holds
 * all); -ENOMEM.
 */
int spec_worker_mounts(const struct spec *s, size_t w, const struct mlfs_config *cfg,
		       struct spec_mount **out, size_t *n, size_t *bad_volume);

/*
 * @dir (a workDir) with each $VAR and ${VAR} naming one of @m's variables
 * replaced by where the worker finds that source: @base/sources/NAME (its
 * view at @base), or with @base NULL its mount path (in a container).  0,
 * -ENOENT with the unknown variable's name in @unknown, -ENAMETOOLONG.
 */
int spec_resolve_dir(const char *dir, const struct spec_mount *m, size_t n, const char *base,
		     char *out, size_t size, char *unknown, size_t unknown_size);

/* The kind named @type, or NULL when it is none mlfs knows. */
const struct spec_output_kind *spec_output_kind(const char *type);

/*
 * Gives the workers of @s the image of the [environment NAME] of @cfg its
 * base environment asks for (spec_env.c), and names it in
 * s->base_env.name; nothing when it asks for none.  When no section
 * matches: -EINVAL, "@file:line:col: FIELD: message" in @d naming the
 * sections @cfg has (@text as for spec_check_data; @d NULL: no message).
 * -ENOMEM.
 */
int spec_check_environment(struct spec *s, const struct mlfs_config *cfg, const char *file,
			   const char *text, size_t len, struct diag *d);

/*
 * Gives the workers of @s the image @image of the [environment] @name: a
 * job read back keeps what it was given at acceptance.  0 or -ENOMEM.
 */
int spec_set_environment(struct spec *s, const char *name, const char *image);

/*
 * Adds "file:line:col: FIELD: MSG" to @d, the position that of @field in
 * the spec's @text (JSON or YAML), for checks made after parsing.
 */
void spec_field_error(struct diag *d, const char *file, const char *text, size_t len,
		      const char *field, const char *msg);

/* Whether two workers ask for the same resources (a cluster may run them as one array). */
bool spec_same_resources(const struct spec_resources *a, const struct spec_resources *b);

/* "native", "openpai", "gpulab", "kibernetika" */
const char *spec_format_name(enum spec_format f);

#endif
