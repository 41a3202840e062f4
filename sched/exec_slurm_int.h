/*
 * exec_slurm_int.h - the pieces of the slurm executor that need no cluster:
 * the batch script and sbatch command line (exec_slurm_script.c), the
 * node list and the fit of a request on it.  Unit-tested on their own.
 */
#ifndef MLFS_EXEC_SLURM_INT_H
#define MLFS_EXEC_SLURM_INT_H

#include <stddef.h>

#include "exec.h"

struct mlfs_config;
struct spec_resources;

/* One node as `scontrol -o show node` describes it. */
struct exec_slurm_node {
	char *name;
	long cpus;			/* CPUTot */
	long memory_mb;			/* RealMemory */
	long tmp_mb;			/* TmpDisk */
	char *features;			/* AvailableFeatures, "" = none */
	struct exec_slurm_gres {
		char *type;		/* "" = untyped */
		long count;
	} *gpus;			/* the node's gpu gres, by type */
	size_t n_gpus;
	char *state;
};

/* Parses `scontrol -o show node` output.  0 or -ENOMEM. */
int exec_slurm_parse_nodes(const char *text, struct exec_slurm_node **out, size_t *n);
void exec_slurm_nodes_free(struct exec_slurm_node *nodes, size_t n);

/*
 * Whether some node could ever hold one worker asking @res: 1, or -1 with
 * the reason in @why ("never satisfiable on the Slurm cluster: ...").
 */
int exec_slurm_node_fit(const struct exec_slurm_node *nodes, size_t n,
			const struct spec_resources *res, char *why, size_t why_len);

/*
 * The cluster's GPU types (gres types) that the accepted types of @res
 * match, into @out (at most @max, borrowed from @nodes).  Returns how
 * many; 0 when @res accepts any type or none matched.
 */
size_t exec_slurm_gpu_types(const struct exec_slurm_node *nodes, size_t n,
			    const struct spec_resources *res, const char **out, size_t max);

/*
 * The batch script for workers @w[0..n) of one job (see exec_slurm.c) and
 * the sbatch command line that submits it (argv[0] = "sbatch"; the script
 * goes to its standard input), both malloc'd: free each argv[i] (@argc of
 * them) and argv.  @types: the cluster's GPU types to ask for (see
 * exec_slurm_gpu_types); none: as the spec names them.  @ask_tmp: the
 * cluster declares nodes' TmpDisk, so disk_size_gb becomes --tmp (a
 * cluster that declares none would refuse every --tmp).  0, or -EINVAL
 * with why in @why, or -ENOMEM.
 */
int exec_slurm_script(const struct mlfs_config *cfg, const struct exec_start *w, size_t n,
		      bool together, const char *const *types, size_t n_types, bool ask_tmp,
		      char **script, char ***argv, size_t *argc, char *why, size_t why_len);

/* Slurm's pending reason @reason ("Resources") in words. */
const char *exec_slurm_reason_words(const char *reason);

#endif
