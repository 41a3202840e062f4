/*
 * sched_node.c - the node's resources and the question "does this worker fit".
 *
 * What [node] sets is taken as written (it may declare more CPUs than the
 * machine has, as Slurm allows); what it leaves out is detected: GPUs,
 * their type and memory and the driver's CUDA version from nvidia-smi when
 * it is on the PATH (run with spawn_run, with a deadline: a wedged driver
 * hangs it), CPUs from sysconf, memory from /proc/meminfo.
 *
 * A fit check answers three ways: fits now (with the GPU indices to give,
 * lowest free first), waits (with the numbers of what is missing), or never
 * fits on this node (with what the node lacks), so `reason` can say which.
 * Called with sched->lock held; nothing here blocks except detection at start.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "config.h"
#include "log.h"
#include "sched_int.h"
#include "spawn.h"

#define SCHED_NODE_SMI_S	30		/* a hung driver makes nvidia-smi hang: not the daemon */

/*
 * The standard output of nvidia-smi with @argv (argv[0] "nvidia-smi"),
 * malloc'd, whatever its exit status; NULL when it is not on the PATH or
 * ran past SCHED_NODE_SMI_S.  Its stderr is dropped.
 */
static char *sched_node_smi(char *const *argv)
{
	struct spawn_out res;
	char *out = NULL;

	if (spawn_run(&(struct spawn){ .argv = argv, .timeout_ms = SCHED_NODE_SMI_S * 1000,
				       .out_max = 1 << 20, .out_fd = -1 }, &res) == 0 &&
	    !res.timed_out) {
		out = res.out;
		res.out = NULL;
	} else if (res.timed_out) {
		log_warn("node: nvidia-smi ran past %d s and was killed; GPUs not detected",
			 SCHED_NODE_SMI_S);
	}
	spawn_out_free(&res);
	return out;
}

int sched_node_gpu_minor(const char *proc_dir, const char *bus)
{
	const char *colon = strchr(bus, ':');
	char dir[32], path[512], line[256];
	size_t dom;
	int minor = -1;
	FILE *f;

	/* nvidia-smi's domain has 8 hex digits, the driver's folder 4, in lower case */
	if (!colon || (dom = (size_t)(colon - bus)) < 4 ||
	    snprintf(dir, sizeof(dir), "%.4s%s", colon - 4, colon) >= (int)sizeof(dir))
		return -1;
	for (char *c = dir; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	snprintf(path, sizeof(path), "%s/%s/information", proc_dir, dir);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Device Minor: %d", &minor) == 1)
			break;
	fclose(f);
	return minor;
}

/*
 * Reads GPUs from `nvidia-smi`; leaves @node as it is when there is none.
 * nvidia-smi numbers them in PCI order, the driver names their devices by
 * minor number: the two differ where GPUs were excluded or a VM's slots
 * are sparse, so each GPU's minor comes from the driver.
 */
static void sched_node_detect_gpus(struct sched_node *node)
{
	char *out = sched_node_smi((char *const[]){ "nvidia-smi",
		"--query-gpu=index,name,memory.total,pci.bus_id", "--format=csv,noheader,nounits",
		NULL });
	char *line, *save = NULL;

	for (line = out ? strtok_r(out, "\n", &save) : NULL; line && node->gpus < SCHED_MAX_GPUS;
	     line = strtok_r(NULL, "\n", &save)) {
		char *name = strchr(line, ','), *mem = name ? strchr(name + 1, ',') : NULL;
		char *bus = mem ? strchr(mem + 1, ',') : NULL;
		unsigned int i = node->gpus;

		if (!mem)
			continue;
		*mem++ = '\0';
		if (bus)
			*bus++ = '\0';
		else
			bus = "";
		name++;
		while (*name == ' ')
			name++;
		bus += strspn(bus, " ");
		bus[strcspn(bus, " \r")] = '\0';
		if (!node->gpu_type)
			node->gpu_type = strdup(name);
		if (node->gpu_memory_gb <= 0)
			node->gpu_memory_gb = strtod(mem, NULL) / 1024.0;
		snprintf(node->gpu_bus[i], sizeof(node->gpu_bus[i]), "%s", bus);
		node->gpu_minor[i] = *bus ? sched_node_gpu_minor("/proc/driver/nvidia/gpus", bus) : -1;
		if (node->gpu_minor[i] < 0) {
			log_warn("node: GPU %u (%s): the driver does not say its device minor; "
				 "taking /dev/nvidia%u", i, bus, i);
			node->gpu_minor[i] = (int)i;
		}
		node->gpus++;
	}
	free(out);
}

/* The driver's CUDA version from the banner of `nvidia-smi`. */
static char *sched_node_detect_cuda(void)
{
	char *out = sched_node_smi((char *const[]){ "nvidia-smi", NULL });
	char *at = out ? strstr(out, "CUDA Version:") : NULL, v[32], *version = NULL;

	if (at && sscanf(at + 13, " %31[0-9.]", v) == 1)
		version = strdup(v);
	free(out);
	return version;
}

static double sched_node_meminfo_gb(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	double gb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long kb;

		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			gb = (double)kb / (1024.0 * 1024.0);
	}
	fclose(f);
	return gb;
}

static char *sched_strdup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

int sched_node_init(struct sched_node *node, const struct mlfs_config *cfg)
{
	const struct node_config *nc = &cfg->node;

	memset(node, 0, sizeof(*node));
	node->gpu_type = sched_strdup_or_null(nc->gpu_type);
	node->gpu_memory_gb = nc->gpu_memory_gb > 0 ? (double)nc->gpu_memory_gb : 0;
	node->cuda_version = sched_strdup_or_null(nc->cuda_version);
	for (unsigned int i = 0; i < SCHED_MAX_GPUS; i++)
		node->gpu_minor[i] = (int)i;	/* [node] gpus: GPU i is /dev/nvidiaI */
	if (nc->gpus >= 0)
		node->gpus = nc->gpus > SCHED_MAX_GPUS ? SCHED_MAX_GPUS : (unsigned int)nc->gpus;
	else
		sched_node_detect_gpus(node);
	if (node->gpus > 0 && !node->cuda_version && nc->gpus < 0)
		node->cuda_version = sched_node_detect_cuda();
	node->cpus = nc->cpus > 0 ? nc->cpus : sysconf(_SC_NPROCESSORS_ONLN);
	node->memory_gb = nc->memory_gb > 0 ? (double)nc->memory_gb : sched_node_meminfo_gb();
	node->price = nc->price;
	node->cluster_id = sched_strdup_or_null(nc->cluster_id);
	node->name = sched_strdup_or_null(nc->name);
	log_info("node: %u GPU(s)%s%s, %ld CPUs, %.1f GB memory", node->gpus,
		 node->gpu_type ? " of type " : "", node->gpu_type ? node->gpu_type : "",
		 node->cpus, node->memory_gb);
	return 0;
}

void sched_node_free(struct sched_node *node)
{
	free(node->gpu_type);
	free(node->cuda_version);
	free(node->cluster_id);
	free(node->name);
	for (unsigned int i = 0; i < SCHED_MAX_GPUS; i++)
		free(node->gpu_holder[i]);
}

/* Compares dotted versions numerically: <0, 0, >0. */
static int sched_version_cmp(const char *a, const char *b)
{
	while (*a || *b) {
		char *ea, *eb;
		long x = strtol(a, &ea, 10), y = strtol(b, &eb, 10);

		if (x != y)
			return x < y ? -1 : 1;
		a = *ea == '.' ? ea + 1 : ea;
		b = *eb == '.' ? eb + 1 : eb;
		if (ea == a && eb == b)
			break;
	}
	return 0;
}

/*
 * Whether @want names @have as a whole: equal, or found in it between word
 * boundaries, ignoring case, so "A100" and "RTX 3090" match what nvidia-smi
 * calls them ("NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 3090") but "A10"
 * does not match an A100.
 */
static bool sched_gpu_name_match(const char *have, const char *want)
{
	size_t len = strlen(want);

	if (!len)
		return false;
	for (const char *at = strcasestr(have, want); at; at = strcasestr(at + 1, want)) {
		bool start = at == have || !isalnum((unsigned char)at[-1]);
		bool end = !isalnum((unsigned char)at[len]);

		if (start && end)
			return true;
	}
	return false;
}

static bool sched_gpu_type_ok(const struct sched_node *node, const struct spec_resources *res)
{
	if (res->n_gpu_types == 0)
		return true;
	if (!node->gpu_type)
		return false;
	for (size_t i = 0; i < res->n_gpu_types; i++) {
		const char *t = res->gpu_types[i];

		if (res->gpu_type_substring ? strcasestr(node->gpu_type, t) != NULL
					    : sched_gpu_name_match(node->gpu_type, t))
			return true;
	}
	return false;
}

/* The GPU types asked for, "A100 or V100", into @buf. */
static const char *sched_types_text(const struct spec_resources *res, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < res->n_gpu_types && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? " or " : "", res->gpu_types[i]);
	if (res->n_gpu_types == 0)
		snprintf(buf, len, "%s", "any type");
	return buf;
}

/* -1 with @why when the node can never run @res. */
static int sched_node_never(const struct sched_node *node, const struct spec_resources *res,
			    char *why, size_t len)
{
	char types[256];

	if (res->gpu_count > 0 && !sched_gpu_type_ok(node, res))
		snprintf(why, len, "never satisfiable here: needs %ld x %s, node has %s%s%s", res->gpu_count,
			 sched_types_text(res, types, sizeof(types)), node->gpus ? "" : "no GPUs",
			 node->gpus && node->gpu_type ? "only " : "",
			 node->gpus ? (node->gpu_type ? node->gpu_type : "GPUs of unknown type") : "");
	else if (res->gpu_count > (long)node->gpus)
		snprintf(why, len, "never satisfiable here: needs %ld GPU(s) per worker, node has %u",
			 res->gpu_count, node->gpus);
	else if (res->cpu_count > node->cpus)
		snprintf(why, len, "never satisfiable here: needs %ld CPUs, node has %ld",
			 res->cpu_count, node->cpus);
	else if (res->memory_gb > 0 && node->memory_gb > 0 && res->memory_gb > node->memory_gb)
		snprintf(why, len, "never satisfiable here: needs %g GB of memory, node has %.1f GB",
			 res->memory_gb, node->memory_gb);
	else if (res->max_price >= 0 && node->price >= 0 && res->gpu_count > 0 &&
		 node->price > res->max_price)
		snprintf(why, len, "never satisfiable here: max_price %g is below the node's price %g "
			 "per GPU-hour", res->max_price, node->price);
	else if (res->cluster_id && node->cluster_id && strcmp(res->cluster_id, node->cluster_id) != 0)
		snprintf(why, len, "never satisfiable here: needs cluster %s, this node is in cluster %s",
			 res->cluster_id, node->cluster_id);
	else if (res->node_name && node->name && strcmp(res->node_name, node->name) != 0)
		snprintf(why, len, "never satisfiable here: needs node %s, this node is %s",
			 res->node_name, node->name);
	else if (res->min_cuda_version && res->gpu_count > 0 &&
		 (!node->cuda_version || sched_version_cmp(node->cuda_version, res->min_cuda_version) < 0))
		snprintf(why, len, "never satisfiable here: needs CUDA %s or newer, node has %s",
			 res->min_cuda_version, node->cuda_version ? node->cuda_version : "no known CUDA version");
	else
		return 0;
	return -1;
}

int sched_node_fit(const struct sched_node *node, const struct spec_resources *res,
		   int *gpus, char *why, size_t why_len)
{
	unsigned int nfree = 0;
	char types[256];

	if (sched_node_never(node, res, why, why_len) < 0)
		return -1;
	for (unsigned int i = 0; i < node->gpus; i++)
		if (!node->gpu_holder[i] && nfree < (unsigned long)res->gpu_count)
			gpus[nfree++] = (int)i;
		else if (!node->gpu_holder[i])
			nfree++;
	if ((long)nfree < res->gpu_count) {
		snprintf(why, why_len, "waiting for GPUs: needs %ld x %s, node has %u x %s free",
			 res->gpu_count, sched_types_text(res, types, sizeof(types)), nfree,
			 node->gpu_type ? node->gpu_type : "GPU");
		return 0;
	}
	if (res->cpu_count > node->cpus - node->cpus_used) {
		snprintf(why, why_len, "waiting for CPUs: needs %ld, %ld of %ld free", res->cpu_count,
			 node->cpus - node->cpus_used, node->cpus);
		return 0;
	}
	if (res->memory_gb > 0 && node->memory_gb > 0 &&
	    res->memory_gb > node->memory_gb - node->memory_used_gb) {
		snprintf(why, why_len, "waiting for memory: needs %g GB, %.1f of %.1f GB free",
			 res->memory_gb, node->memory_gb - node->memory_used_gb, node->memory_gb);
		return 0;
	}
	return 1;
}

void sched_node_hold(struct sched_node *node, const struct spec_resources *res,
		     const int *gpus, unsigned int n_gpus, const char *holder)
{
	for (unsigned int i = 0; i < n_gpus; i++) {
		free(node->gpu_holder[gpus[i]]);
		node->gpu_holder[gpus[i]] = strdup(holder);
	}
	node->cpus_used += res->cpu_count;
	if (res->memory_gb > 0)
		node->memory_used_gb += res->memory_gb;
}

void sched_node_release(struct sched_node *node, const struct spec_resources *res,
			const int *gpus, unsigned int n_gpus)
{
	for (unsigned int i = 0; i < n_gpus; i++) {
		free(node->gpu_holder[gpus[i]]);
		node->gpu_holder[gpus[i]] = NULL;
	}
	node->cpus_used -= res->cpu_count;
	if (res->memory_gb > 0)
		node->memory_used_gb -= res->memory_gb;
}

/* Whether nothing listens on, or holds, TCP @port on any address. */
static bool sched_port_free(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

int sched_node_ports(struct sched_node *node, size_t n, int *out)
{
	size_t got = 0;

	for (unsigned int tries = 0; got < n && tries < SCHED_PORT_COUNT; tries++) {
		unsigned int i = node->port_next++ % SCHED_PORT_COUNT;

		if (node->port_held[i / 8] & (1u << (i % 8)) || !sched_port_free(SCHED_PORT_FIRST + (int)i))
			continue;
		node->port_held[i / 8] |= (unsigned char)(1u << (i % 8));
		out[got++] = SCHED_PORT_FIRST + (int)i;
	}
	if (got == n)
		return 0;
	sched_node_ports_release(node, out, got);
	return -EADDRINUSE;
}

void sched_node_ports_release(struct sched_node *node, const int *ports, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		unsigned int i = (unsigned int)(ports[k] - SCHED_PORT_FIRST);

		if (i < SCHED_PORT_COUNT)
			node->port_held[i / 8] &= (unsigned char)~(1u << (i % 8));
	}
}

int sched_node_render(struct sched *s, char **buf, size_t *len)
{
	const struct sched_node *node = &s->node;
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	if (!f)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	fprintf(f, "gpus %u\ngpu_type %s\ngpu_memory_gb %g\ncuda_version %s\n", node->gpus,
		node->gpu_type ? node->gpu_type : "-", node->gpu_memory_gb,
		node->cuda_version ? node->cuda_version : "-");
	fprintf(f, "cpus %ld\ncpus_free %ld\nmemory_gb %.1f\nmemory_free_gb %.1f\n", node->cpus,
		node->cpus - node->cpus_used, node->memory_gb, node->memory_gb - node->memory_used_gb);
	if (node->price >= 0)
		fprintf(f, "price %g\n", node->price);
	container_runtime_render(&s->containers, f);
	for (unsigned int i = 0; i < node->gpus; i++)
		fprintf(f, "gpu.%u %s\n", i, node->gpu_holder[i] ? node->gpu_holder[i] : "free");
	for (unsigned int i = 0; i < node->gpus; i++)
		fprintf(f, "gpu_device.%u /dev/nvidia%d%s%s\n", i, node->gpu_minor[i],
			node->gpu_bus[i][0] ? " " : "", node->gpu_bus[i]);
	for (struct sched_job *j = s->jobs; j; j = j->next)
		for (size_t i = 0; i < j->n_workers; i++)
			if (j->workers[i].running)
				fprintf(f, "held %s/%zu cpus %ld memory_gb %g gpus %u\n", j->name, i + 1,
					j->spec->workers[i].res.cpu_count,
					j->spec->workers[i].res.memory_gb > 0 ? j->spec->workers[i].res.memory_gb : 0,
					j->workers[i].n_gpus);
	pthread_mutex_unlock(&s->lock);
	if (fclose(f) != 0) {
		free(text);
		return -ENOMEM;
	}
	*buf = text;
	*len = size;
	return 0;
}
