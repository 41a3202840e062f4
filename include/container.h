/*
 * container.h - running a worker in its spec's container image (DESIGN §10).
 *
 * Three parts, each usable alone:
 *
 * - image references: what a spec may name as an image, checked at submit
 *   the way Docker's own reference grammar reads it (image_ref.c);
 * - the node's runtime: podman and the OCI runtime this host's cgroups
 *   allow, and the limits containers may be given, found once at start
 *   (container.c), shown in .mlfs/node;
 * - the plan of one worker: the argv that pulls its image (`mlfs image
 *   pull`, shared by every job of the node that needs it at once) and the
 *   argv that runs its command in it (`podman run ...`), which an executor
 *   runs instead of `/bin/sh -c COMMAND` (exec.h: pull_argv, run_argv).
 *   Both executors use this one seam.
 */
#ifndef MLFS_CONTAINER_H
#define MLFS_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#define IMAGE_REF_MAX	255	/* Docker's limit on a repository name, tag and digest aside */

/* An image reference, split: "127.0.0.1:5000/team/tf:1.15". */
struct image_ref {
	char domain[IMAGE_REF_MAX + 1];	/* "127.0.0.1:5000"; "" = docker.io */
	char path[IMAGE_REF_MAX + 1];	/* "team/tf" */
	char tag[129];			/* "1.15"; "" = none (latest, unless a digest) */
	char digest[160];		/* "sha256:..."; "" = none */
};

/*
 * Parses @s by the grammar of Docker's distribution/reference: an optional
 * registry host[:port], lower-case path components joined by '/' and
 * separated within by '.', '_', '__' or dashes, then ":TAG" and/or
 * "@ALGO:HEX".  Returns 0, or -EINVAL with what is wrong in @why (no
 * credentials: the caller takes "user:password@" off first).
 */
int image_ref_parse(const char *s, struct image_ref *out, char *why, size_t why_len);

/*
 * GPULab's private-registry form "USER:PASSWORD@HOST:PORT/NAME:TAG": when
 * @s starts with credentials, returns their length (up to the '@'), else
 * 0.  A digest ("name@sha256:...") is not taken for credentials.
 */
size_t image_ref_credentials(const char *s);


/* ---- the node's runtime ---- */

#define CONTAINER_DRIVER_FILES 24

/* One file of the NVIDIA driver's, bound read-only into GPU workers. */
struct container_driver_file {
	char host[256];			/* where the node has it (ldconfig -p, PATH) */
	char inside[128];		/* where the image's loader or PATH finds it */
};

struct mlfs_config;

struct container_runtime {
	bool usable;
	char why[256];			/* why not usable, with what to install; "" when usable */
	char podman[256];		/* absolute */
	char oci[256];			/* the OCI runtime, absolute */
	char oci_why[160];		/* how it was chosen */
	unsigned long nofile_soft, nofile_hard;	/* the limits containers get: the node's own */
	unsigned long nproc;		/* the node's hard limit, at most podman's 32768 */
	char registries_conf[4096];	/* made for insecure_registries; "" = none */
	const char *auth_file;		/* [containers] auth_file, else own_auth: always given to
					 * podman, which otherwise reads root's ~/.docker/config.json */
	char own_auth[4096];		/* STATE_DIR/containers/auth.json: no credentials */
	/* the NVIDIA driver's user-space files, bound read-only for GPU workers */
	struct container_driver_file driver_files[CONTAINER_DRIVER_FILES];
	size_t n_driver_files;
};

/*
 * Finds podman and the OCI runtime, and the limits a container may be
 * given, per [containers].  With @make_files (the daemon, at start) it writes
 * STATE_DIR/containers/registries.conf for insecure_registries and the
 * empty auth.json afresh; without (`mlfs image pull`) it makes them only
 * where they are missing.  Never fails: an unusable runtime says why.
 */
void container_runtime_detect(struct container_runtime *rt, const struct mlfs_config *cfg,
			      bool make_files);

/*
 * The same for podman run by an ordinary user, rootless (`mlfs image pull`
 * in a Slurm batch script, which runs as the job's owner): no need to be
 * root; the registries.conf is written in @dir, a folder of the user's;
 * [containers] auth_file only when the user may read it, else none, so
 * podman reads the user's own credentials, as a rootless podman does.
 */
void container_runtime_detect_rootless(struct container_runtime *rt,
				       const struct mlfs_config *cfg, const char *dir);

/*
 * What a GPU worker is given besides its /dev/nvidiaN, each list
 * NULL-terminated: NVIDIA's control devices (where they exist), the
 * driver's user-space libraries (the beginnings of their sonames, found
 * with `ldconfig -p`) and the folders of an image's loader they are bound
 * into, read-only, so that a glibc image of Debian's, Ubuntu's or RHEL's
 * family loads them wherever the node keeps them (/usr/local/nvidia/lib64,
 * /usr/lib/x86_64-linux-gnu ...); nvidia-smi goes to /usr/bin.  The Slurm
 * batch script looks for the same on the compute node.
 */
extern const char *const container_nvidia_devices[];
extern const char *const container_driver_libs[];
extern const char *const container_driver_dirs_inside[];
extern const char container_ldconfig_arch[];	/* "x86-64": ldconfig -p's word for this machine */

/*
 * Adds to @rt's driver files the libraries `ldconfig -p` printed in
 * @text (container_driver_libs, of this machine's word size: the first
 * path of each name), each bound at every folder of
 * container_driver_dirs_inside.  Read by container_runtime_detect; apart
 * for its tests.
 */
void container_driver_libs_parse(struct container_runtime *rt, const char *text);

/* "containers ..." lines for .mlfs/node. */
void container_runtime_render(const struct container_runtime *rt, FILE *f);

/* ---- the images kept on the node (container_cache.c) ---- */

/* FNV-1a of @s as 16 hex digits: a file name for an image's lock or mark. */
void container_name_hash(const char *s, char out[17]);

/* Marks @image used now (STATE_DIR/containers/used/HASH).  0 or a negated errno. */
int container_cache_touch(const struct mlfs_config *cfg, const char *image);

/* The same, recording the size podman gives the image now (after its pull or making). */
int container_cache_measure(const struct container_runtime *rt, const struct mlfs_config *cfg,
			    const char *image);

/*
 * While the images mlfs marked take more than [containers] cache_size,
 * removes the least recently used one no container uses, never @keep;
 * each removal is said on @report (NULL: quiet).  0 or a negated errno.
 */
int container_cache_trim(const struct container_runtime *rt, const struct mlfs_config *cfg,
			 const char *keep, FILE *report);

/* ---- one worker's container ---- */

/* What `podman run` needs for one worker; every pointer borrowed. */
struct container_run {
	const struct container_runtime *rt;
	const char *image;		/* the reference, without credentials */
	const char *name;		/* the container's name, unique on the node */
	const char *command;		/* run by /bin/sh -c; "": the image's own command */
	uid_t uid;
	gid_t gid;
	const char *workdir;		/* inside; NULL: the image's */
	const char *ml_dir;		/* the host folder bound at /opt/ml; NULL: none */
	/* More binds, read-only: host folder binds[i][0] at binds[i][1] inside (sources). */
	const char *const (*binds)[2];
	size_t n_binds;
	const char *env_file;		/* the worker's variables, podman's --env-file format;
					 * NULL: none (the Slurm script adds its own) */
	uint64_t memory;		/* bytes; 0: none */
	long shm_mb;			/* 0: podman's default */
	const int *gpus;		/* the device minors (/dev/nvidiaN) of the GPUs given */
	unsigned int n_gpus;
	/*
	 * podman run by the worker's owner, not root (a Slurm batch script):
	 * no --user (--userns=keep-id keeps the owner's uid and gid inside),
	 * no --memory (rootless podman ignores it on cgroup v1; the cluster's
	 * own limit, Slurm's --mem, holds), no --ulimit (rootless podman gives
	 * the caller's own limits, which it may not exceed).
	 */
	bool rootless;
};

#define CONTAINER_GPUS_MAX	64
#define CONTAINER_ARGV_MAX	(64 + CONTAINER_GPUS_MAX + CONTAINER_DRIVER_FILES)

/*
 * Fills @argv (CONTAINER_ARGV_MAX entries, NULL-terminated) with the
 * `podman run` of @r, its strings in @buf; @cgroup_parent (NULL: none)
 * puts the container under the executor's cgroup of the worker.  Returns
 * 0, or -ENAMETOOLONG when @buf is too small.  The argv ends with the
 * image and what it runs: the last container_argv_tail(@r) entries; an
 * executor that adds options only known where it runs (the Slurm script:
 * the view's folder, the node's GPUs) puts them before those.
 */
int container_argv(const struct container_run *r, const char *cgroup_parent, char **argv,
		   char *buf, size_t buf_len);

/* The image, and "-c COMMAND" when there is a command: 3 entries, else 1. */
static inline size_t container_argv_tail(const struct container_run *r)
{
	return *r->command ? 3 : 1;
}

/* Where one worker's registry credentials come from (container_auth.c); all borrowed. */
struct container_auth {
	const char *image;		/* the reference: inline_creds are for its registry */
	const char *inline_creds;	/* GPULab's "USER:PASSWORD"; NULL: none */
	const char *spec_file;		/* OpenPAI authFile; NULL: none */
	const char *home;		/* the job owner's home: its .docker/config.json; NULL */
	const char *node_file;		/* [containers] auth_file; NULL: none */
	uid_t uid;			/* the job's owner */
};

/*
 * Writes the Docker config.json a worker's pull uses at @path (0600): per
 * registry the first of inline_creds, spec_file, the owner's own, the
 * node's.  A file the spec names must be one its owner may read (else
 * -EACCES, with why in @why); the owner's own is skipped when not.  0 or a
 * negated errno.
 */
int container_auth_file(const char *path, const struct container_auth *a, char *why,
			size_t why_len);

/* ---- packages installed before the command (proxiML's environment.packages) ---- */

#define CONTAINER_ENV_PREFIX	"localhost/mlfs-env/"
#define CONTAINER_ENV_REF_MAX	(sizeof(CONTAINER_ENV_PREFIX) + 32)

struct spec;

/*
 * Writes at @path (mode 0600: variables may be secrets) what the packages
 * of @s are installed from, as `mlfs image pull --packages` reads it: one
 * "apt NAME", "conda NAME" or "pip NAME" line a package, in that order,
 * then one "env NAME=VALUE" line a variable of environment.variables (the
 * package tools read them: PIP_INDEX_URL, a proxy; a value holding a
 * newline is left out, with a warning).  @ref (CONTAINER_ENV_REF_MAX
 * bytes) gets the name of the image @base becomes with them:
 * CONTAINER_ENV_PREFIX and 32 hex digits of the SHA-256 of base and file.
 * The same base, packages and variables give the same name, so later jobs
 * reuse the image; any other input, another user's index for one, gives
 * another.  1 when written, 0 when @s lists no package (nothing written),
 * or a negated errno.
 */
int container_packages_file(const char *path, const struct spec *s, const char *base, char *ref);

/*
 * The worker's variables @envp ("NAME=VALUE", NULL-terminated) in
 * podman's --env-file format at @path (mode 0600): one per line.  A value
 * holding a newline cannot be written so and is left out, with a warning
 * in the log.  0 or a negated errno.
 */
int container_env_file(const char *path, char *const *envp);

#endif
