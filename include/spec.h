/*
 * spec.h - the job model every spec format is mapped to.
 *
 * A spec file (native proxiML-style JSON today; OpenPAI, GPULab and
 * Kibernetika later, each by its own parser) becomes one struct spec.  The
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
};

struct spec_worker {
	char *command;			/* run by /bin/sh -c */
	struct spec_resources res;
	struct spec_env *env;		/* variables of this worker's format (PAI_*, ...) */
	size_t n_env;
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
	char **ignored;			/* "field: why", e.g. "data: not yet supported" */
	size_t n_ignored;
};

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

/* "native", "openpai", "gpulab", "kibernetika" */
const char *spec_format_name(enum spec_format f);

#endif
