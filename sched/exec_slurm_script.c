/*
 * exec_slurm_script.c - what the slurm executor hands to sbatch, and what
 * it knows of the cluster's nodes.
 *
 * The batch script is bash and carries everything a compute node needs
 * that is not already there: the spec as written (a here-document), each
 * worker's command, folder and environment.  The mlfs binary and its
 * config must be at the same paths on every node (DESIGN §6).  For each
 * worker it runs:
 *
 *   0. for a worker with an image, `mlfs image pull` (as the job's owner:
 *      rootless podman, the user's own storage, unless the owner is root);
 *   1. `mlfs job` to mount the worker's view in a fresh folder under
 *      $TMPDIR (the compute node's state_dir stages its output);
 *   2. the command at /opt/ml: in its container, `podman run` as
 *      container.c makes it (rootless: --userns=keep-id), with the view or
 *      scratch folders, an env file and Slurm's GPUs added on the node;
 *      else as root, in a private mount namespace with
 *      the view bound at /opt/ml (`unshare -m`); as an ordinary user, in a
 *      user and mount namespace (`unshare -U -m -r` cannot keep the user's
 *      id, so `--map-current-user`) where /opt/ml exists, else where the
 *      view is, through the ML_*_PATH variables;
 *   3. `mlfs umount`, which uploads the output (upload.log);
 *   4. the exit file ("exited N" or "signaled N", then "upload N").
 *
 * Its phase file (staging_in, running, staging_out) and exit file go to
 * the worker's folder under the job's folder, as the local executor's do;
 * its output to the worker's log, and line by line with "[N] " to the
 * job's log.  USR2 (mlfs's `scancel -b -s USR2`: cancel, run timeout) or
 * TERM (Slurm's own: time limit, requeue, scancel) stops the command (a
 * container's with `podman stop` too: its first process ignores TERM),
 * never the upload; after a stop by mlfs the script cancels its own Slurm
 * job, so Slurm too records it CANCELLED.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "container.h"
#include "exec_slurm_int.h"
#include "spec.h"

/* ---- nodes ---- */

/* The value of KEY= in one `scontrol -o` line, into @buf; "" when absent. */
static char *exec_slurm_field(const char *line, const char *key, char *buf, size_t len)
{
	size_t klen = strlen(key);

	buf[0] = '\0';
	for (const char *p = line; (p = strstr(p, key)); p += klen) {
		if ((p == line || p[-1] == ' ') && p[klen] == '=') {
			const char *v = p + klen + 1;

			snprintf(buf, len, "%.*s", (int)strcspn(v, " \n"), v);
			break;
		}
	}
	return buf;
}

/* "gpu:tesla:2,gpu:4(S:0-1),shard:8" -> the gpu entries. */
static int exec_slurm_parse_gres(struct exec_slurm_node *node, char *gres)
{
	for (char *save = NULL, *tok = strtok_r(gres, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon, *end, *type;
		long count;

		tok[strcspn(tok, "(")] = '\0';
		if (strncmp(tok, "gpu:", 4) != 0 && strcmp(tok, "gpu") != 0)
			continue;
		colon = strrchr(tok, ':');
		count = colon ? strtol(colon + 1, &end, 10) : 1;
		if (colon && (*end || end == colon + 1)) {
			count = 1;	/* "gpu:type" */
			colon = NULL;
		}
		if (colon)
			*colon = '\0';
		type = strchr(tok, ':') ? strchr(tok, ':') + 1 : "";
		struct exec_slurm_gres *g = realloc(node->gpus, (node->n_gpus + 1) * sizeof(*g));

		if (!g)
			return -ENOMEM;
		node->gpus = g;
		g[node->n_gpus].type = strdup(type);
		g[node->n_gpus].count = count;
		if (!g[node->n_gpus].type)
			return -ENOMEM;
		node->n_gpus++;
	}
	return 0;
}

int exec_slurm_parse_nodes(const char *text, struct exec_slurm_node **out, size_t *n)
{
	struct exec_slurm_node *nodes = NULL;
	size_t count = 0;
	char line[8192], v[4096];

	*out = NULL;
	*n = 0;
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		size_t len = strcspn(p, "\n");
		struct exec_slurm_node *node, *grown;

		if (len >= sizeof(line))
			len = sizeof(line) - 1;
		memcpy(line, p, len);
		line[len] = '\0';
		if (!exec_slurm_field(line, "NodeName", v, sizeof(v))[0])
			continue;
		grown = realloc(nodes, (count + 1) * sizeof(*nodes));
		if (!grown)
			goto nomem;
		nodes = grown;
		node = &nodes[count++];
		*node = (struct exec_slurm_node){ .name = strdup(v) };
		node->cpus = strtol(exec_slurm_field(line, "CPUTot", v, sizeof(v)), NULL, 10);
		node->memory_mb = strtol(exec_slurm_field(line, "RealMemory", v, sizeof(v)), NULL, 10);
		node->tmp_mb = strtol(exec_slurm_field(line, "TmpDisk", v, sizeof(v)), NULL, 10);
		node->features = strdup(exec_slurm_field(line, "AvailableFeatures", v, sizeof(v)));
		node->state = strdup(exec_slurm_field(line, "State", v, sizeof(v)));
		if (!node->name || !node->features || !node->state ||
		    exec_slurm_parse_gres(node, exec_slurm_field(line, "Gres", v, sizeof(v))) < 0)
			goto nomem;
	}
	*out = nodes;
	*n = count;
	return 0;
nomem:
	exec_slurm_nodes_free(nodes, count);
	return -ENOMEM;
}

void exec_slurm_nodes_free(struct exec_slurm_node *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(nodes[i].name);
		free(nodes[i].features);
		free(nodes[i].state);
		for (size_t k = 0; k < nodes[i].n_gpus; k++)
			free(nodes[i].gpus[k].type);
		free(nodes[i].gpus);
	}
	free(nodes);
}

/* Lower case, letters and digits only: "RTX 3090" and "rtx_3090" are one type. */
static void exec_slurm_fold(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	for (; *s && n + 1 < len; s++)
		if (isalnum((unsigned char)*s))
			buf[n++] = (char)tolower((unsigned char)*s);
	buf[n] = '\0';
}

static bool exec_slurm_type_ok(const struct spec_resources *res, const char *type)
{
	char t[128], want[128];

	if (!res->n_gpu_types)
		return true;
	exec_slurm_fold(type, t, sizeof(t));
	for (size_t i = 0; i < res->n_gpu_types; i++) {
		exec_slurm_fold(res->gpu_types[i], want, sizeof(want));
		if (*t && (strcmp(t, want) == 0 || (res->gpu_type_substring && strstr(t, want))))
			return true;
	}
	return false;
}

size_t exec_slurm_gpu_types(const struct exec_slurm_node *nodes, size_t n,
			    const struct spec_resources *res, const char **out, size_t max)
{
	size_t count = 0;

	if (!res->n_gpu_types)
		return 0;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < nodes[i].n_gpus; k++) {
			const char *t = nodes[i].gpus[k].type;
			bool dup = false;

			for (size_t d = 0; d < count; d++)
				dup |= strcmp(out[d], t) == 0;
			if (!dup && count < max && exec_slurm_type_ok(res, t))
				out[count++] = t;
		}
	return count;
}

int exec_slurm_node_fit(const struct exec_slurm_node *nodes, size_t n,
			const struct spec_resources *res, char *why, size_t why_len)
{
	long best_gpus = 0, best_cpus = 0, best_mem = 0;

	for (size_t i = 0; i < n; i++) {
		const struct exec_slurm_node *node = &nodes[i];
		long gpus = 0;

		for (size_t k = 0; k < node->n_gpus; k++)
			if (exec_slurm_type_ok(res, node->gpus[k].type))
				gpus += node->gpus[k].count;
		best_gpus = gpus > best_gpus ? gpus : best_gpus;
		best_cpus = node->cpus > best_cpus ? node->cpus : best_cpus;
		best_mem = node->memory_mb > best_mem ? node->memory_mb : best_mem;
		if (gpus >= res->gpu_count && node->cpus >= res->cpu_count &&
		    (res->memory_gb <= 0 || node->memory_mb >= (long)ceil(res->memory_gb * 1024)) &&
		    (res->disk_size_gb <= 0 || node->tmp_mb == 0 || node->tmp_mb >= res->disk_size_gb * 1024))
			return 1;
	}
	if (n == 0)
		snprintf(why, why_len, "never satisfiable on the Slurm cluster: it has no nodes");
	else if (best_gpus < res->gpu_count)
		snprintf(why, why_len, "never satisfiable on the Slurm cluster: a worker needs %ld %s%sGPU(s) "
			 "on one node, the most any of its %zu node(s) has is %ld", res->gpu_count,
			 res->n_gpu_types ? res->gpu_types[0] : "", res->n_gpu_types > 1 ? " (or other listed) "
			 : res->n_gpu_types ? " " : "", n, best_gpus);
	else if (best_cpus < res->cpu_count)
		snprintf(why, why_len, "never satisfiable on the Slurm cluster: a worker needs %ld CPUs, "
			 "the most any of its %zu node(s) has is %ld", res->cpu_count, n, best_cpus);
	else if (res->memory_gb > 0 && best_mem < (long)ceil(res->memory_gb * 1024))
		snprintf(why, why_len, "never satisfiable on the Slurm cluster: a worker needs %g GB of "
			 "memory, the most any of its %zu node(s) has is %.1f GB", res->memory_gb, n,
			 best_mem / 1024.0);
	else
		snprintf(why, why_len, "never satisfiable on the Slurm cluster: no node has at once the "
			 "GPUs, CPUs, memory and %ld GB of local disk a worker needs", res->disk_size_gb);
	return -1;
}

/* ---- the script ---- */

/* Appends @len bytes of @s as they are written inside single quotes. */
static void exec_slurm_quoted(FILE *f, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\'')
			fputs("'\\''", f);
		else
			fputc(s[i], f);
	}
}

/* Appends @s single-quoted for the shell. */
static void exec_slurm_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	exec_slurm_quoted(f, s, strlen(s));
	fputc('\'', f);
}

/* A folded type name Slurm accepts in a gres or a feature. */
static void exec_slurm_type_word(const char *t, char *buf, size_t len)
{
	size_t n = 0;

	for (; *t && n + 1 < len; t++)
		if (isalnum((unsigned char)*t) || *t == '_' || *t == '-' || *t == '.')
			buf[n++] = *t;
	buf[n] = '\0';
}

/* The #SBATCH lines of the resources and limits (DESIGN §6's mapping). */
static void exec_slurm_options(FILE *f, const struct exec_start *w, size_t n, bool together,
			       const char *const *types, size_t n_types, bool ask_tmp)
{
	const struct spec *sp = w[0].spec;
	struct spec_resources big = sp->workers[w[0].worker - 1].res;
	const struct spec_resources *res = &big;
	char word[128];

	/* one allocation of tasks of one shape: the largest of each resource (not a heterogeneous job) */
	for (size_t i = 1; together && i < n; i++) {
		const struct spec_resources *r = &sp->workers[w[i].worker - 1].res;

		big.gpu_count = r->gpu_count > big.gpu_count ? r->gpu_count : big.gpu_count;
		big.cpu_count = r->cpu_count > big.cpu_count ? r->cpu_count : big.cpu_count;
		big.memory_gb = r->memory_gb > big.memory_gb ? r->memory_gb : big.memory_gb;
		big.disk_size_gb = r->disk_size_gb > big.disk_size_gb ? r->disk_size_gb : big.disk_size_gb;
	}
	const char *one = NULL;

	if (n_types == 1)
		one = types[0];
	else if (n_types == 0 && res->n_gpu_types == 1 && !res->gpu_type_substring)
		one = res->gpu_types[0];
	if (together)
		fprintf(f, "#SBATCH --ntasks=%zu\n", n);
	if (res->cpu_count > 0)
		fprintf(f, "#SBATCH --cpus-per-task=%ld\n", res->cpu_count);
	if (res->memory_gb > 0) {
		long mb = (long)ceil(res->memory_gb * 1024);

		if (together)
			fprintf(f, "#SBATCH --mem-per-cpu=%ldM\n",
				(mb + (res->cpu_count > 0 ? res->cpu_count : 1) - 1) /
				(res->cpu_count > 0 ? res->cpu_count : 1));
		else
			fprintf(f, "#SBATCH --mem=%ldM\n", mb);
	}
	if (res->gpu_count > 0) {
		if (one)
			exec_slurm_type_word(one, word, sizeof(word));
		if (together)
			fprintf(f, "#SBATCH --gpus-per-task=%s%s%ld\n", one ? word : "", one ? ":" : "",
				res->gpu_count);
		else
			fprintf(f, "#SBATCH --gres=gpu:%s%s%ld\n", one ? word : "", one ? ":" : "",
				res->gpu_count);
		if (!one && (n_types > 1 || res->n_gpu_types > 1)) {
			fprintf(f, "#SBATCH --constraint=");
			for (size_t i = 0; i < (n_types ? n_types : res->n_gpu_types); i++) {
				exec_slurm_type_word(n_types ? types[i] : res->gpu_types[i], word, sizeof(word));
				fprintf(f, "%s%s", i ? "|" : "", word);
			}
			fprintf(f, "\n");
		}
	}
	if (res->disk_size_gb > 0 && ask_tmp)
		fprintf(f, "#SBATCH --tmp=%ldG\n", res->disk_size_gb);
	if (sp->run_timeout > 0)	/* minutes, with room for staging: mlfs stops it on time itself */
		fprintf(f, "#SBATCH --time=%ld\n", (sp->run_timeout + 59) / 60 + 30);
	fprintf(f, "#SBATCH --%s\n", sp->retry_count > 0 ? "requeue" : "no-requeue");
	if (res->node_name && *res->node_name &&	/* GPULab's slaveName, a host name */
	    strspn(res->node_name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") ==
	    strlen(res->node_name))
		fprintf(f, "#SBATCH --nodelist=%s\n", res->node_name);
}

/* NAME=('ARG' ...): @argv[0..n), or up to its NULL when sooner. */
static void exec_slurm_array(FILE *f, const char *name, const char *const *argv, size_t n)
{
	fprintf(f, "\t%s=(", name);
	for (size_t i = 0; i < n && argv[i]; i++) {
		if (i)
			fputc(' ', f);
		exec_slurm_quote(f, argv[i]);
	}
	fprintf(f, ")\n");
}

/*
 * A worker with an image: its pull, its `podman run` (container.c's, with
 * the view's folder, its variables and its GPUs added by the script on the
 * compute node, where they are known) and its cleanup; its variables as
 * podman's --env-file text, never exported to the batch shell, whose
 * podman they would steer (HOME, PATH, TMPDIR).  The script runs as the
 * job's owner: podman is rootless unless that is root.
 */
static int exec_slurm_container_fn(FILE *f, const struct exec_start *w, char *const *env, size_t n_env)
{
	struct container_run r = *w->container;
	size_t len = strlen(r.command) + strlen(r.image) + 16384, n = 0, tail;
	char *argv[CONTAINER_ARGV_MAX], *buf = malloc(len);
	bool left = false;
	int ret;

	if (!buf)
		return -ENOMEM;
	r.ml_dir = r.env_file = NULL;
	r.gpus = NULL;
	r.n_gpus = 0;
	r.rootless = w->uid != 0;
	ret = container_argv(&r, NULL, argv, buf, len);
	if (ret < 0) {
		free(buf);
		return ret;
	}
	while (argv[n])
		n++;
	tail = container_argv_tail(&r);
	fprintf(f, "\tIMAGE=");
	exec_slurm_quote(f, r.image);
	fprintf(f, "\n");
	exec_slurm_array(f, "PODMAN", (const char *const *)argv, n - tail);
	exec_slurm_array(f, "PODMAN_TAIL", (const char *const *)argv + n - tail, tail);
	free(buf);
	if (w->pull_argv)
		exec_slurm_array(f, "PULL", (const char *const *)w->pull_argv, SIZE_MAX);
	if (w->cleanup_argv)
		exec_slurm_array(f, "PODMAN_RM", (const char *const *)w->cleanup_argv, SIZE_MAX);
	/* a stop (mlfs_stop): TERM, then KILL after 2 s, to a first process that ignores TERM */
	exec_slurm_array(f, "PODMAN_STOP", (const char *const[]){ r.rt->podman, "stop", "--ignore",
				 "--time=2", r.name, NULL }, SIZE_MAX);
	/* where the view is mounted (mlfs_run) */
	if (r.rootless)
		exec_slurm_array(f, "PODMAN_NS", (const char *const[]){ r.rt->podman, "unshare", NULL },
				 SIZE_MAX);
	fprintf(f, "\tCENV_LEFT='");
	for (size_t i = 0; i < n_env; i++)
		if (strchr(env[i], '\n')) {
			if (left)
				fputs(", ", f);
			exec_slurm_quoted(f, env[i], strcspn(env[i], "="));
			left = true;
		}
	/* podman's --env-file: a value holding a newline cannot be carried (container_env_file) */
	fprintf(f, "'\n\tCENV='");
	for (size_t i = 0; i < n_env; i++)
		if (!strchr(env[i], '\n')) {
			exec_slurm_quoted(f, env[i], strlen(env[i]));
			fputc('\n', f);
		}
	fprintf(f, "GPU_COUNT=%ld\n'\n", w->spec->workers[w->worker - 1].res.gpu_count);
	return 0;
}

/* One function per worker that sets what differs between them. */
static int exec_slurm_worker_fn(FILE *f, const struct exec_start *w)
{
	const struct spec_worker *sw = &w->spec->workers[w->worker - 1];
	char *env[512];			/* the scheduler gives at most SCHED_ENV_MAX (256) */
	size_t n_env = 0;
	int ret;

	fprintf(f, "mlfs_w%u() {\n\tA=%u\n\tOUTPUT_ID=", w->worker, w->attempt);
	exec_slurm_quote(f, w->output_id ? w->output_id : "");
	fprintf(f, "\n\tWORKDIR=");
	exec_slurm_quote(f, sw->work_dir ? sw->work_dir : w->dir ? w->dir : "/");
	fprintf(f, "\n\tCMD=");
	exec_slurm_quote(f, w->command);
	fprintf(f, "\n");
	for (char *const *e = w->envp; e && *e && n_env < sizeof(env) / sizeof(env[0]); e++) {
		size_t nlen = strcspn(*e, "=");

		/* Slurm gives the GPUs: its CUDA_VISIBLE_DEVICES stands */
		if ((*e)[nlen] == '=' && strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0 &&
		    strncmp(*e, "GPU_COUNT=", 10) != 0)
			env[n_env++] = *e;
	}
	if (w->container) {
		ret = exec_slurm_container_fn(f, w, env, n_env);
		fprintf(f, "}\n");
		return ret;
	}
	for (size_t i = 0; i < n_env; i++) {
		size_t nlen = strcspn(env[i], "=");
		/* names the shell cannot export are passed by env(1) */
		bool plain = nlen > 0 && !isdigit((unsigned char)env[i][0]);

		for (size_t k = 0; k < nlen; k++)
			plain &= isalnum((unsigned char)env[i][k]) || env[i][k] == '_';
		if (plain) {
			fprintf(f, "\texport %.*s=", (int)nlen, env[i]);
			exec_slurm_quote(f, env[i] + nlen + 1);
			fprintf(f, "\n");
		} else {
			fprintf(f, "\tMLFS_ENV+=(");
			exec_slurm_quote(f, env[i]);
			fprintf(f, ")\n");
		}
	}
	fprintf(f, "\texport GPU_COUNT=%ld\n}\n", sw->res.gpu_count);
	return 0;
}

/* What every worker runs: view, command, upload, exit file. */
static const char exec_slurm_body[] =
	"mlfs_phase() {\n"
	"\tprintf '%s\\n' \"$1\" >\"$DIR/phase.tmp.$$\" && mv -f \"$DIR/phase.tmp.$$\" "
	"\"$DIR/phase\"\n"
	"}\n"
	"mlfs_exit() {\n"
	"\tprintf \"$@\" >\"$EXITF.tmp\" && sync \"$EXITF.tmp\" 2>/dev/null; mv -f \"$EXITF.tmp\" "
	"\"$EXITF\"\n"
	"}\n"
	"# stops the command: TERM to its group; a container through podman stop (TERM, then KILL "
	"after 2 s, since\n"
	"# its first process ignores TERM unless it handles it; rootless podman run ends at a TERM "
	"and leaves it\n"
	"# running), again while podman run lasts, for a container it had not made yet\n"
	"mlfs_stop() {\n"
	"\t[ -n \"$pid\" ] || return 0\n"
	"\t[ -n \"$IMAGE\" ] || { kill -TERM -- -\"$pid\" 2>/dev/null; return 0; }\n"
	"\t(while kill -0 \"$pid\" 2>/dev/null; do \"${PODMAN_STOP[@]}\" >/dev/null 2>&1; sleep 1; "
	"done) &\n"
	"}\n"
	"# the container's variables: the worker's, and Slurm's own; inside, the GPUs it sees are "
	"numbered from 0\n"
	"mlfs_cenv() {\n"
	"\tlocal v i n=0 l=\n"
	"\tprintf '%s' \"$CENV\"\n"
	"\tfor v in $(compgen -e); do\n"
	"\t\tcase $v in SLURM_*) [[ ${!v} == *$'\\n'* ]] || printf '%s=%s\\n' \"$v\" \"${!v}\" ;; "
	"esac\n"
	"\tdone\n"
	"\t[ -n \"${CUDA_VISIBLE_DEVICES+set}\" ] || return 0\n"
	"\tfor i in ${CUDA_VISIBLE_DEVICES//,/ }; do [[ $i =~ ^[0-9]+$ ]] && l+=\"${l:+,}$((n++))\"; "
	"done\n"
	"\tprintf 'CUDA_VISIBLE_DEVICES=%s\\n' \"$l\"\n"
	"}\n"
	"# the image on this node, pulled as the job's owner (rootless, but for root), and the "
	"container's variables in a file of its own\n"
	"mlfs_pull() {\n"
	"\tmlfs_phase staging_in\n"
	"\t# a requeued run where the last one was killed: its container goes first\n"
	"\t[ \"${SLURM_RESTART_COUNT:-0}\" = 0 ] || \"${PODMAN_RM[@]}\" >/dev/null 2>&1\n"
	"\t[ -z \"$CENV_LEFT\" ] || echo \"mlfs: $CENV_LEFT: a value holding a newline, which "
	"podman's --env-file cannot carry: left out\"\n"
	"\tctr=$(mktemp -d \"${TMPDIR:-/tmp}/mlfs-ctr.XXXXXX\") && mlfs_cenv >\"$ctr/env\" && [ -z "
	"\"$STOP\" ] && \"${PULL[@]}\" && [ -z \"$STOP\" ] && return 0\n"
	"\tmlfs_phase staging_in_failed\n"
	"\t[ -z \"$ctr\" ] || rm -rf \"$ctr\"\n"
	"\tmlfs_exit 'staging-in failed\\n'\n"
	"\texit 1\n"
	"}\n"
	"# the GPUs Slurm gave, as the local executor gives them: /dev/nvidiaN, the control devices, "
	"the driver's files read-only\n"
	"mlfs_gpus() {\n"
	"\tlocal i f d name arch path seen= ids=${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-}}\n"
	"\t[ -n \"$ids\" ] || return 0\n"
	"\tfor i in ${ids//,/ }; do\n"
	"\t\tif [ -c \"/dev/nvidia$i\" ]; then gpu+=(\"--device=/dev/nvidia$i\"); else echo \"mlfs: "
	"Slurm gave GPU $i, and $(hostname) has no /dev/nvidia$i for the container\"; fi\n"
	"\tdone\n"
	"\tfor f in \"${NV_DEVICES[@]}\"; do [ ! -e \"$f\" ] || gpu+=(\"--device=$f\"); done\n"
	"\tf=$(command -v nvidia-smi) && gpu+=(\"--volume=$f:/usr/bin/nvidia-smi:ro\")\n"
	"\t# the driver's libraries where the loader finds them, bound where the image's loader "
	"looks\n"
	"\twhile read -r name arch _ path; do\n"
	"\t\tpath=${path##* }\n"
	"\t\t[[ $arch == *\"$NV_ARCH\"* && $path == /* && \" $seen \" != *\" $name \"* ]] || "
	"continue\n"
	"\t\tfor f in \"${NV_LIBS[@]}\"; do\n"
	"\t\t\t[[ $name == \"$f\"* ]] || continue\n"
	"\t\t\tseen+=\" $name\"\n"
	"\t\t\tfor d in \"${NV_DIRS[@]}\"; do gpu+=(\"--volume=$path:$d/$name:ro\"); done\n"
	"\t\tdone\n"
	"\tdone < <(\"${MLFS_LDCONFIG:-ldconfig}\" -p 2>/dev/null)\n"
	"\treturn 0\n"
	"}\n"
	"mlfs_run() {\n"
	"\tW=$1 DIR=\"$JOBDIR/workers/$1\" MLFS_ENV=() STOP= pid=\n"
	"\tIMAGE= PULL=() PODMAN=() PODMAN_TAIL=() PODMAN_STOP=() PODMAN_RM=() PODMAN_NS=() CENV= "
	"CENV_LEFT=\n"
	"\t\"mlfs_w$W\" || exit 1\n"
	"\tmkdir -p \"$DIR\"\n"
	"\texec >>\"$DIR/log\" 2>&1\n"
	"\tEXITF=\"$DIR/exit.$((A + ${SLURM_RESTART_COUNT:-0}))\"\n"
	"\t# a requeued run stages a new output (a job without data has none: no view)\n"
	"\t[ -n \"$OUTPUT_ID\" ] && [ -n \"${SLURM_RESTART_COUNT:-}\" ] && [ "
	"\"$SLURM_RESTART_COUNT\" != 0 ] && OUTPUT_ID=\"$OUTPUT_ID.r$SLURM_RESTART_COUNT\"\n"
	"\trm -f \"$EXITF\"\n"
	"\t# USR2: mlfs stops it (cancel, run timeout); TERM: Slurm does (time limit, requeue, "
	"scancel)\n"
	"\t# (mlfs sends USR2 again while Slurm says RUNNING: one sent before the batch shell "
	"ran is lost)\n"
	"\ttrap '[ \"$STOP\" = mlfs ] || { STOP=mlfs; mlfs_stop; }' USR2\n"
	"\ttrap 'STOP=slurm; mlfs_stop' TERM INT\n"
	"\tlocal view= spec= rc up=-1 end ctr= ml gpu=() ns=()\n"
	"\t[ -z \"$IMAGE\" ] || mlfs_pull\n"
	"\tif [ -n \"$OUTPUT_ID\" ]; then\n"
	"\t\tmlfs_phase staging_in\n"
	"\t\tview=$(mktemp -d \"${TMPDIR:-/tmp}/mlfs-view.XXXXXX\") && spec=$(mktemp -d "
	"\"${TMPDIR:-/tmp}/mlfs-spec.XXXXXX\") || exit 1\n"
	"\t\tmlfs_spec >\"$spec/$SPEC_FILE\"\n"
	"\t\tlocal owner=()\n"
	"\t\t[ \"$(id -u)\" = 0 ] && owner=(-o allow_other --owner 0:0)\n"
	"\t\t# rootless podman's containers see only the mounts of its own namespaces, where the "
	"user is root:\n"
	"\t\t# the view is mounted there, open to the container's other ids\n"
	"\t\t[ ${#PODMAN_NS[@]} = 0 ] || ns=(\"${PODMAN_NS[@]}\") owner=(-o allow_other --owner "
	"0:0)\n"
	"\t\tif [ -n \"$STOP\" ] || ! \"${ns[@]}\" \"$MLFS\" job \"${owner[@]}\" --output-id "
	"\"$OUTPUT_ID\" \"$CONFIG\" \"$spec/$SPEC_FILE\" \"$view\" --worker \"$W\"; then\n"
	"\t\t\tmlfs_phase staging_in_failed\n"
	"\t\t\trmdir \"$view\"; rm -rf \"$spec\" ${ctr:+\"$ctr\"}\n"
	"\t\t\tmlfs_exit 'staging-in failed\\n'\n"
	"\t\t\texit 1\n"
	"\t\tfi\n"
	"\tfi\n"
	"\t[ -z \"$OUTPUT_ID$IMAGE\" ] || mlfs_phase running\n"
	"\tset -m\n"
	"\tif [ -n \"$IMAGE\" ]; then\n"
	"\t\t# podman binds the view, or the scratch folders in the worker's folder, at /opt/ml\n"
	"\t\tml=${view:-$DIR/ml}\n"
	"\t\t[ -n \"$view\" ] || mkdir -p \"$ml/input\" \"$ml/models\" \"$ml/checkpoint\" "
	"\"$ml/output\"\n"
	"\t\tmlfs_gpus\n"
	"\t\t\"${PODMAN[@]}\" --env-file=\"$ctr/env\" --volume=\"$ml:/opt/ml\" \"${gpu[@]}\" "
	"\"${PODMAN_TAIL[@]}\" > >(exec \"$MLFS\" logpipe --max \"$LOG_MAX\" \"$DIR/log\" "
	"\"$JOBDIR/log\" \"$W\") 2>&1 &\n"
	"\telif [ -n \"$view\" ] && [ \"$(id -u)\" = 0 ]; then\n"
	"\t\tmkdir -p /opt/ml\n"
	"\t\tenv \"${MLFS_ENV[@]}\" unshare -m --propagation private /bin/sh -c 'mount --bind \"$1\" "
	"/opt/ml && cd \"$2\" && exec /bin/sh -c \"$3\"' mlfs \"$view\" \"$WORKDIR\" \"$CMD\" > "
	">(exec \"$MLFS\" logpipe --max \"$LOG_MAX\" \"$DIR/log\" \"$JOBDIR/log\" \"$W\") 2>&1 &\n"
	"\telif [ -n \"$view\" ] && [ -d /opt/ml ] && unshare -r -m /bin/sh -c 'mount --bind \"$1\" "
	"/opt/ml' mlfs \"$view\" 2>/dev/null; then\n"
	"\t\t# a user namespace where it is root binds /opt/ml; a nested one gives the user's ids "
	"back\n"
	"\t\tenv \"${MLFS_ENV[@]}\" unshare -r -m --propagation private /bin/sh -c 'mount --bind "
	"\"$1\" /opt/ml && exec unshare -U --map-user=\"$4\" --map-group=\"$5\" /bin/sh -c \"cd "
	"\\\"\\$0\\\" && exec /bin/sh -c \\\"\\$1\\\"\" \"$2\" \"$3\"' mlfs \"$view\" \"$WORKDIR\" "
	"\"$CMD\" \"$(id -u)\" \"$(id -g)\" > >(exec \"$MLFS\" logpipe --max \"$LOG_MAX\" "
	"\"$DIR/log\" \"$JOBDIR/log\" \"$W\") 2>&1 &\n"
	"\telse\n"
	"\t\t# no view: scratch folders in the worker's folder; no /opt/ml: the view where it is\n"
	"\t\t[ -z \"$view\" ] && mkdir -p \"$ML_DATA_PATH\" \"$ML_MODEL_PATH\" "
	"\"$ML_CHECKPOINT_PATH\" \"$ML_OUTPUT_PATH\"\n"
	"\t\t[ -n \"$view\" ] && echo \"mlfs: /opt/ml cannot be bound on $(hostname) (no /opt/ml, or "
	"no user namespaces): the view is at $view, named by ML_DATA_PATH, ML_OUTPUT_PATH, ...\"\n"
	"\t\t[ -n \"$view\" ] && for v in DATA:input MODEL:models CHECKPOINT:checkpoint "
	"OUTPUT:output; do\n"
	"\t\t\texport \"ML_${v%%:*}_PATH=$view/${v#*:}\" \"PROXIML_${v%%:*}_PATH=$view/${v#*:}\"\n"
	"\t\tdone\n"
	"\t\t[ -n \"$view\" ] && [ \"${WORKDIR#/opt/ml}\" != \"$WORKDIR\" ] && "
	"WORKDIR=$view${WORKDIR#/opt/ml}\n"
	"\t\t(cd \"$WORKDIR\" && exec env \"${MLFS_ENV[@]}\" /bin/sh -c \"$CMD\") > >(exec \"$MLFS\" "
	"logpipe --max \"$LOG_MAX\" \"$DIR/log\" \"$JOBDIR/log\" \"$W\") 2>&1 &\n"
	"\tfi\n"
	"\tpid=$!\n"
	"\tset +m\n"
	"\t[ -z \"$STOP\" ] || mlfs_stop\n"
	"\twait \"$pid\"; rc=$?\n"
	"\twhile kill -0 \"$pid\" 2>/dev/null; do wait \"$pid\"; rc=$?; done\n"
	"\tif [ -n \"$IMAGE\" ]; then\n"
	"\t\t# gone before its view is unmounted; a stopped one did not succeed, whatever podman run "
	"said\n"
	"\t\t\"${PODMAN_RM[@]}\" >/dev/null 2>&1; rm -rf \"$ctr\"\n"
	"\t\t[ -z \"$STOP\" ] || [ \"$rc\" != 0 ] || rc=143\n"
	"\t\t# podman tells a signal N as exit 128+N, and so does the local executor\n"
	"\t\tend=\"exited $rc\"\n"
	"\telif [ \"$rc\" -gt 128 ] && [ \"$rc\" -le 192 ]; then end=\"signaled $((rc - 128))\"; "
	"else end=\"exited $rc\"; fi\n"
	"\tif [ -n \"$view\" ]; then\n"
	"\t\tmlfs_phase staging_out\n"
	"\t\ttrap '' TERM INT USR2\n"
	"\t\t\"${ns[@]}\" \"$MLFS\" umount \"$view\" >>\"$DIR/upload.log\" 2>&1; up=$?\n"
	"\t\trmdir \"$view\" 2>/dev/null; rm -rf \"$spec\"\n"
	"\t\tmlfs_exit '%s\\nupload %d\\n' \"$end\" \"$up\"\n"
	"\telse\n"
	"\t\tmlfs_exit '%s\\n' \"$end\"\n"
	"\tfi\n"
	"\t# stopped through mlfs (cancel, run timeout): Slurm records it as cancelled too\n"
	"\t[ \"$STOP\" = mlfs ] && [ -z \"${MLFS_TASK:-}\" ] && scancel \"$SLURM_JOB_ID\" "
	"2>/dev/null\n"
	"\t[ \"$rc\" = 0 ] && [ \"$up\" -le 0 ]\n"
	"}\n";

/* Whether workers @w[0..n) can be one submission: an array needs one shape.  0 or -EINVAL. */
static int exec_slurm_one_shape(const struct exec_start *w, size_t n, bool together, char *why,
				size_t why_len)
{
	if (n == 0 || !w[0].spec || !w[0].job_dir) {
		snprintf(why, why_len, "nothing to submit");
		return -EINVAL;
	}
	for (size_t i = 1; i < n; i++)
		if (!together && !spec_same_resources(&w[0].spec->workers[w[0].worker - 1].res,
							&w[i].spec->workers[w[i].worker - 1].res)) {
			snprintf(why, why_len, "workers %u and %u differ in shape: not one array",
				 w[0].worker, w[i].worker);
			return -EINVAL;
		}
	return 0;
}

/* The #SBATCH lines: name, logs, the array of workers, then the resources. */
static void exec_slurm_header(FILE *f, const struct exec_start *w, size_t n, bool together,
			      const char *const *types, size_t n_types, bool ask_tmp)
{
	fprintf(f, "#!/bin/bash\n# mlfs job %s: made by mlfs for sbatch; the spec is carried at the end.\n",
		w[0].job);
	fprintf(f, "#SBATCH --job-name=%s\n", w[0].job);
	if (together)
		fprintf(f, "#SBATCH --output=%s/slurm.log\n", w[0].job_dir);
	else if (n > 1)
		fprintf(f, "#SBATCH --output=%s/workers/%%a/log\n", w[0].job_dir);
	else
		fprintf(f, "#SBATCH --output=%s/workers/%u/log\n", w[0].job_dir, w[0].worker);
	fprintf(f, "#SBATCH --open-mode=append\n#SBATCH --export=NONE\n");
	if (!together && n > 1) {
		fprintf(f, "#SBATCH --array=");
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%s%u", i ? "," : "", w[i].worker);
		fprintf(f, "\n");
	}
	exec_slurm_options(f, w, n, together, types, n_types, ask_tmp);
}

/* The script's variables, and what a container needs of the compute node's GPUs. */
static void exec_slurm_vars(FILE *f, const struct exec_start *w, size_t n)
{
	bool images = false;

	fprintf(f, "set -u\nexport PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
	/* Slurm gives none where it cannot load the user's login environment (--export=NONE) */
	fprintf(f, "[ -n \"${HOME:-}\" ] || export HOME=\"$(getent passwd \"$(id -u)\" | cut -d: -f6)\"\n");
	fprintf(f, "MLFS=");
	exec_slurm_quote(f, w[0].mlfs_bin ? w[0].mlfs_bin : "mlfs");
	fprintf(f, "\nCONFIG=");
	exec_slurm_quote(f, w[0].config_path ? w[0].config_path : "");
	fprintf(f, "\nJOBDIR=");
	exec_slurm_quote(f, w[0].job_dir);
	fprintf(f, "\nLOG_MAX=%llu", (unsigned long long)w[0].log_max);
	fprintf(f, "\nSPEC_FILE=");
	exec_slurm_quote(f, w[0].spec_file ? w[0].spec_file : w[0].job);
	fprintf(f, "\n");
	for (size_t i = 0; i < n; i++)
		images |= w[i].container != NULL;
	if (images) {	/* what mlfs_gpus looks for on the compute node: container.c's lists */
		exec_slurm_array(f, "NV_DEVICES", container_nvidia_devices, SIZE_MAX);
		exec_slurm_array(f, "NV_LIBS", container_driver_libs, SIZE_MAX);
		exec_slurm_array(f, "NV_DIRS", container_driver_dirs_inside, SIZE_MAX);
		fprintf(f, "NV_ARCH=%s\n", container_ldconfig_arch);
	}
}

/* The spec, in a here-document ended by a line it does not hold, and the line that runs. */
static void exec_slurm_tail(FILE *f, const struct exec_start *w, size_t n, bool together)
{
	char delim[64];

	for (unsigned int k = 0;; k++) {
		snprintf(delim, sizeof(delim), "MLFS_SPEC_END_%u", k);
		if (!w[0].spec_text || !memmem(w[0].spec_text, w[0].spec_len, delim, strlen(delim)))
			break;
	}
	fprintf(f, "mlfs_spec() {\n\tcat <<'%s'\n", delim);
	if (w[0].spec_text)
		fwrite(w[0].spec_text, 1, w[0].spec_len, f);
	if (!w[0].spec_len || w[0].spec_text[w[0].spec_len - 1] != '\n')
		fputc('\n', f);
	fprintf(f, "%s\n}\n", delim);
	if (together)
		fprintf(f, "if [ -n \"${MLFS_TASK:-}\" ]; then mlfs_run $((SLURM_PROCID + 1)); exit; fi\n"
			"copy=${TMPDIR:-/tmp}/mlfs-job-$SLURM_JOB_ID.sh\n"
			"sbcast -f \"$0\" \"$copy\" || exit 1\n"
			"exec srun --kill-on-bad-exit=0 --export=ALL,MLFS_TASK=1 /bin/bash \"$copy\"\n");
	else if (n > 1)
		fprintf(f, "mlfs_run \"$SLURM_ARRAY_TASK_ID\"\n");
	else
		fprintf(f, "mlfs_run %u\n", w[0].worker);
}

/* sbatch --parsable [--partition=P] [--account=A] [sbatch_args split at blanks...]; -ENOMEM. */
static int exec_slurm_argv(const struct mlfs_config *cfg, char ***argv, size_t *argc)
{
	const char *args = cfg && cfg->slurm.sbatch_args ? cfg->slurm.sbatch_args : "";
	size_t ac = 0, cap = 6 + (strlen(args) + 1) / 2 + 1;	/* words of one letter: (len + 1) / 2 */
	char **av = calloc(cap, sizeof(*av));

	if (!av)
		return -ENOMEM;
	av[ac++] = strdup("sbatch");
	av[ac++] = strdup("--parsable");
	if (cfg && cfg->slurm.partition && *cfg->slurm.partition)
		av[ac++] = strdup("--partition"), av[ac++] = strdup(cfg->slurm.partition);
	if (cfg && cfg->slurm.account && *cfg->slurm.account)
		av[ac++] = strdup("--account"), av[ac++] = strdup(cfg->slurm.account);
	for (const char *p = args; *p;) {
		size_t l;

		p += strspn(p, " \t");
		l = strcspn(p, " \t");
		if (l)
			av[ac++] = strndup(p, l);
		p += l;
	}
	for (size_t i = 0; i < ac; i++)
		if (!av[i]) {
			for (size_t k = 0; k < ac; k++)
				free(av[k]);
			free(av);
			return -ENOMEM;
		}
	*argv = av;
	*argc = ac;
	return 0;
}

int exec_slurm_script(const struct mlfs_config *cfg, const struct exec_start *w, size_t n,
		      bool together, const char *const *types, size_t n_types, bool ask_tmp,
		      char **script, char ***argv, size_t *argc, char *why, size_t why_len)
{
	char *text = NULL;
	size_t len = 0;
	int ret;
	FILE *f;

	*script = NULL;
	*argv = NULL;
	*argc = 0;
	ret = exec_slurm_one_shape(w, n, together, why, why_len);
	if (ret < 0)
		return ret;
	f = open_memstream(&text, &len);
	if (!f)
		return -ENOMEM;
	exec_slurm_header(f, w, n, together, types, n_types, ask_tmp);
	exec_slurm_vars(f, w, n);
	for (size_t i = 0; i < n && ret == 0; i++)
		ret = exec_slurm_worker_fn(f, &w[i]);
	fputs(exec_slurm_body, f);
	exec_slurm_tail(f, w, n, together);
	if (fclose(f) != 0 || !text || ret < 0) {
		free(text);
		if (ret == -ENAMETOOLONG) {
			snprintf(why, why_len, "its podman command line is too long");
			return -EINVAL;
		}
		return ret < 0 ? ret : -ENOMEM;
	}
	ret = exec_slurm_argv(cfg, argv, argc);
	if (ret < 0) {
		free(text);
		return ret;
	}
	*script = text;
	return 0;
}
