/*
 * main.c - the mlfs command: parse the verb, run it.
 *
 * `mlfs CONFIG MOUNTPOINT -o OPTS` without a verb is `mount`: that is how
 * mount.fuse3 runs a filesystem for an fstab line of type fuse.mlfs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "config.h"
#include "cmd.h"

static const char mlfs_usage[] =
	"usage: mlfs mount [-f] [-d] [-o OPTS] CONFIG MOUNTPOINT\n"
	"       mlfs CONFIG MOUNTPOINT [-o OPTS]        (the same, as mount.fuse3 calls it)\n"
	"       mlfs job [-f] [-o OPTS] CONFIG SPEC MOUNTPOINT --worker N\n"
	"       mlfs umount MOUNTPOINT\n"
	"       mlfs sync CONFIG\n"
	"       mlfs check [-c CONFIG] FILE...\n"
	"       mlfs logpipe [--max BYTES] LOG JOBLOG WORKER\n"
	"       mlfs image pull CONFIG IMAGE [--progress FILE] [--auth-file FILE]\n"
	"       mlfs image pull CONFIG IMAGE --packages FILE --as TARGET [--progress FILE]\n"
	"                       [--auth-file FILE]\n"
	"       mlfs --help | --version\n"
	"\n"
	"  mount    mount the gateway tree of CONFIG at MOUNTPOINT (daemonizes unless -f;\n"
	"           -d prints every FUSE request; -o passes FUSE mount options)\n"
	"  job      mount worker N's view of the job in SPEC (input/ checkpoint/ models/\n"
	"           output/), e.g. at /opt/ml\n"
	"  umount   unmount a gateway or a worker's view, then upload its output with\n"
	"           progress; exit 0 only once the output is safe at its destination\n"
	"  sync     upload every output a failure or a crash left staged\n"
	"  check    validate config files offline, with the code the mount uses\n"
	"  logpipe  copy standard input into a worker's logs within log_size (what a\n"
	"           Slurm batch script pipes each worker's output through)\n"
	"  image    pull a worker's container image onto the node, once for every job\n"
	"           that needs it at the same time (what a worker's start runs); with\n"
	"           --packages, that image with a spec's packages installed, made once\n"
	"\n"
	"See mlfs(1) for the tree, the config file and the exit statuses.\n";

/*
 * The version, then what this build can read, as curl -V lists its
 * protocols: the backends built in, and those left out (a CMake option).
 */
static void mlfs_version(void)
{
	const struct backend_ops *ops;
	bool out = false;

	printf("mlfs %s\nbackends:", MLFS_VERSION);
	for (const char *const *k = backend_schemes(); *k; k++)
		if (backend_lookup(&ops, *k) == 0)
			printf(" %s", *k);
	for (const char *const *k = backend_schemes(); *k; k++)
		if (backend_lookup(&ops, *k) == -ENOTSUP) {
			printf("%s %s", out ? "" : "\nnot built:", *k);
			out = true;
		}
	printf("\n");
}

int main(int argc, char **argv)
{
	const char *verb = argc > 1 ? argv[1] : NULL;

	if (!verb) {
		fputs(mlfs_usage, stderr);
		return 2;
	}
	if (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0) {
		fputs(mlfs_usage, stdout);
		return 0;
	}
	if (strcmp(verb, "--version") == 0 || strcmp(verb, "-V") == 0) {
		mlfs_version();
		return 0;
	}
	if (strcmp(verb, "mount") == 0)
		return cmd_mount(argc - 1, argv + 1);
	if (strcmp(verb, "umount") == 0 || strcmp(verb, "unmount") == 0)
		return cmd_umount(argc - 1, argv + 1);
	if (strcmp(verb, "job") == 0)
		return cmd_job(argc - 1, argv + 1);
	if (strcmp(verb, "sync") == 0)
		return cmd_sync(argc - 1, argv + 1);
	if (strcmp(verb, "check") == 0)
		return cmd_check(argc - 1, argv + 1);
	if (strcmp(verb, "logpipe") == 0)
		return cmd_logpipe(argc - 1, argv + 1);
	if (strcmp(verb, "image") == 0)
		return cmd_image(argc - 1, argv + 1);
	if (verb[0] != '-' && access(verb, F_OK) < 0 && errno == ENOENT) {
		/* neither a verb nor the config of `mlfs CONFIG MOUNTPOINT`: a typo */
		fprintf(stderr, "mlfs: '%s' is neither a command (mount, job, umount, sync, check, "
			"logpipe, image) nor a config file; see mlfs --help\n", verb);
		return 2;
	}
	if (verb[0] != '-')
		return cmd_mount(argc, argv);	/* no verb: argv[0] stands in for it */
	fprintf(stderr, "mlfs: unknown option '%s'\n%s", verb, mlfs_usage);
	return 2;
}
