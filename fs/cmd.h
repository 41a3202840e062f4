/* cmd.h - the mlfs commands, one function each (fs/main.c dispatches). */
#ifndef MLFS_CMD_H
#define MLFS_CMD_H

#include <stdbool.h>
#include <stdint.h>

struct mlfs_config;
struct fs;

/* What `mlfs mount` and `mlfs job` are told (cmd_mount.c). */
struct mount_args {
	bool foreground;
	bool debug;
	char *opts;		/* -o values joined with ',' */
	const char *config;
	bool spec_wanted;	/* mlfs job: CONFIG SPEC MOUNTPOINT */
	const char *spec;
	const char *mountpoint;
	char *realmount;	/* the mountpoint, canonical, resolved before mounting */
	char *realconfig;	/* the config file, canonical (the gateway's background sync) */
	bool nopassthrough;	/* -o nopassthrough: every read and write through the daemon */
};

/* Parses [-f] [-d] [-o OPTS] and the positionals in any order: 0, 1 (help shown) or 2. */
int mount_parse_args(struct mount_args *a, int argc, char **argv, const char *usage);
/* A folder that is not a mount already; else prints why and returns -1. */
int mount_check_mountpoint(const char *mp);
/* Creates state_dir and cache_dir; prints why not. */
int mount_make_dirs(const struct mlfs_config *cfg);
/* Mounts @fs and serves it until unmounted (the gateway also schedules). The exit status. */
int mount_serve(struct fs *fs, const struct mount_args *a);

/* Each takes the arguments after the verb (argv[0] is the verb) and returns the exit status. */
int cmd_mount(int argc, char **argv);
int cmd_umount(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_job(int argc, char **argv);
int cmd_sync(int argc, char **argv);
int cmd_logpipe(int argc, char **argv);
int cmd_image(int argc, char **argv);

/* proxiML's environment.packages installed in an image of their own (cmd_image_env.c). */
struct container_runtime;
struct image_env {
	const char *base;		/* on the node already */
	const char *target;		/* the image to make (container.h: localhost/mlfs-env/HASH) */
	const char *packages;		/* the file container_packages_file wrote */
	void (*on_line)(void *arg, const char *line);	/* each line of the steps, for the log */
	void *arg;
	char why[512];			/* once failed: "STEP: the tool's last words" */
};

/*
 * Makes e->target of e->base with the packages installed, as root in a
 * preparation container, then `podman commit`.  The caller holds
 * e->target's lock.  0, or -1 with why in e->why ("apt-get install: E:
 * Unable to locate package x").
 */
int image_env_build(const struct container_runtime *rt, struct image_env *e);

/*
 * Prints upload progress on stderr (an output_progress_fn, cmd_job.c); @arg
 * is NULL, or an unsigned int that counts the outputs delivered.
 */
struct output;
void cmd_progress(void *arg, const struct output *o, const char *phase, uint64_t done,
		  uint64_t total);

/*
 * Reads and parses the spec in @file as jobs/ would (the job named after
 * the file when the spec names none), and with @cfg checks its data against
 * that config; prints every error on stderr.  0 and *out, or a negated errno.
 */
struct spec;
int cmd_load_spec(struct spec **out, const char *file, const struct mlfs_config *cfg);

/* Loads @file and checks it against the backend registry; prints every error. */
int cmd_load_config(struct mlfs_config **out, const char *file);

#endif
