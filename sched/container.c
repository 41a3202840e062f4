/*
 * container.c - the node's container runtime, and the `podman run` of one
 * worker (DESIGN §10).
 *
 * Detection reads files (and runs `ldconfig -p` on a node with NVIDIA's
 * control device, nothing on others): podman where
 * [containers] runtime says or on PATH; the OCI runtime named, or the one
 * this host's cgroups allow (crun refuses a hybrid layout, cgroup v1
 * controllers beside a v2 `unified`, which these machines have, so runc
 * is preferred wherever it is installed); the limits containers get, no
 * higher than the node's own hard limits (podman's defaults, nofile
 * 1048576 and nproc 32768, exceed them where the daemon has no
 * CAP_SYS_RESOURCE, and runc's setrlimit then fails); the NVIDIA driver's
 * user-space files, found as NVIDIA's container toolkit (not in Debian)
 * finds them and bound read-only where the image's loader looks.  Plain-HTTP registries named in
 * insecure_registries get a registries.conf of mlfs's own, which pulls
 * name through CONTAINERS_REGISTRIES_CONF: podman's files stay untouched.
 *
 * container_argv() is the one place a worker's `podman run` is made: the
 * worker runs as its owner's uid:gid inside, with host networking (its
 * ports stay the node's, as PAI_PORT_LIST_* and the like say), its view
 * bound at /opt/ml, its variables from an --env-file (never on a command
 * line, where `ps` would show them), its memory and /dev/shm sizes, and
 * exactly the GPUs it was given: their /dev/nvidiaN plus the control
 * devices.  `--pull never`: the image was pulled before, once per node
 * (`mlfs image pull`), so a container never pulls by itself.
 *
 * Rootless (struct container_run's rootless): the Slurm batch script runs
 * as the job's owner, so its podman is the user's own, rootless; the
 * uid stays the user's inside through --userns=keep-id, and the limits
 * are the cluster's (container.h).  Its detection
 * (container_runtime_detect_rootless) needs no root, and keeps its files
 * in a folder of the user's.
 *
 * A worker whose spec lists packages (proxiML's environment.packages) runs
 * in an image of its own, made once per node from its base image by `mlfs
 * image pull --packages` (fs/cmd_image_env.c) and named after what went
 * into it (container_env_ref): the packages and the spec's variables,
 * which steer the package tools (PIP_INDEX_URL).  Jobs asking for the same
 * reuse it; a job asking with another index never gets what another
 * user's index gave.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "config.h"
#include "container.h"
#include "log.h"
#include "spawn.h"
#include "spec.h"

/* ---- detection ---- */

#define CONTAINER_NPROC_MAX	32768UL	/* podman's own RLIMIT_NPROC while it runs */

/* @name as an executable: itself when it has a '/', else the first on PATH (and sbin). */
static bool container_find_program(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char dirs[4096];
	char *save = NULL;

	if (strchr(name, '/')) {
		snprintf(out, len, "%s", name);
		return access(out, X_OK) == 0;
	}
	snprintf(dirs, sizeof(dirs), "%s:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		 path ? path : "");
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		if (*d != '/')
			continue;
		snprintf(out, len, "%s/%s", d, name);
		if (access(out, X_OK) == 0)
			return true;
	}
	out[0] = '\0';
	return false;
}

/* v1 controllers beside a v2 hierarchy at /sys/fs/cgroup/unified. */
static bool container_cgroups_hybrid(void)
{
	return access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK) == 0 &&
	       access("/sys/fs/cgroup/memory", F_OK) == 0;
}

static void container_pick_oci(struct container_runtime *rt, const char *want)
{
	bool hybrid = container_cgroups_hybrid();

	if (want) {
		if (!container_find_program(want, rt->oci, sizeof(rt->oci))) {
			snprintf(rt->why, sizeof(rt->why), "[containers] oci_runtime %s: not found "
				 "(install it: apt-get install %s)", want, strstr(want, "crun") ? "crun" : "runc");
			return;
		}
		snprintf(rt->oci_why, sizeof(rt->oci_why), "set in [containers] oci_runtime");
		return;
	}
	if (container_find_program("runc", rt->oci, sizeof(rt->oci))) {
		snprintf(rt->oci_why, sizeof(rt->oci_why), hybrid ?
			 "cgroups are hybrid (v1 and v2): crun refuses them" : "found first");
		return;
	}
	if (!hybrid && container_find_program("crun", rt->oci, sizeof(rt->oci))) {
		snprintf(rt->oci_why, sizeof(rt->oci_why), "no runc; cgroups allow crun");
		return;
	}
	snprintf(rt->why, sizeof(rt->why), "no OCI runtime: install runc (apt-get install "
		 "--no-install-recommends podman runc)%s", hybrid ? "; crun refuses this host's "
		 "hybrid cgroups" : "");
}

static void container_limits(struct container_runtime *rt)
{
	struct rlimit rl;

	rt->nofile_soft = rt->nofile_hard = 1024;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rt->nofile_hard = rl.rlim_max == RLIM_INFINITY ? 1048576 : (unsigned long)rl.rlim_max;
		rt->nofile_soft = rl.rlim_cur == RLIM_INFINITY ? rt->nofile_hard : (unsigned long)rl.rlim_cur;
	}
	/* the daemon raised its own soft limit to the hard one: workers get 1024, as a login does */
	if (rt->nofile_soft > 1024)
		rt->nofile_soft = 1024;
	/* podman lowers its own nproc to 32768 before it starts runc: no container gets more */
	rt->nproc = CONTAINER_NPROC_MAX;
	if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
	    rl.rlim_max < CONTAINER_NPROC_MAX)
		rt->nproc = (unsigned long)rl.rlim_max;
}

const char *const container_nvidia_devices[] = {
	"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", NULL,
};
const char *const container_driver_libs[] = {
	"libnvidia-ml.so.", "libnvidia-cfg.so.", "libcuda.so.", "libcudadebugger.so.",
	"libnvidia-ptxjitcompiler.so.", "libnvidia-nvvm.so.", "libnvidia-gpucomp.so.", NULL,
};
#if defined(__aarch64__)
#define CONTAINER_MULTIARCH	"aarch64-linux-gnu"
#define CONTAINER_LDCONFIG_ARCH	"AArch64"
#else
#define CONTAINER_MULTIARCH	"x86_64-linux-gnu"
#define CONTAINER_LDCONFIG_ARCH	"x86-64"
#endif
/* Debian's and Ubuntu's loader looks in the first, RHEL's in the second. */
const char *const container_driver_dirs_inside[] = {
	"/usr/lib/" CONTAINER_MULTIARCH, "/usr/lib64", NULL,
};

#define CONTAINER_LDCONFIG_S	10

const char container_ldconfig_arch[] = CONTAINER_LDCONFIG_ARCH;

static void container_driver_add(struct container_runtime *rt, const char *host, const char *inside)
{
	struct container_driver_file *d = &rt->driver_files[rt->n_driver_files];

	if (rt->n_driver_files >= CONTAINER_DRIVER_FILES ||
	    snprintf(d->host, sizeof(d->host), "%s", host) >= (int)sizeof(d->host) ||
	    snprintf(d->inside, sizeof(d->inside), "%s", inside) >= (int)sizeof(d->inside))
		return;
	rt->n_driver_files++;
}

static bool container_driver_known(const struct container_runtime *rt, const char *name)
{
	for (size_t i = 0; i < rt->n_driver_files; i++) {
		const char *base = strrchr(rt->driver_files[i].inside, '/');

		if (base && strcmp(base + 1, name) == 0)
			return true;
	}
	return false;
}

void container_driver_libs_parse(struct container_runtime *rt, const char *text)
{
	char *copy = strdup(text), *save = NULL;

	if (!copy)
		return;
	/* "\tlibcuda.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libcuda.so.1" */
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[128], arch[64], path[256];
		bool wanted = false;

		if (sscanf(line, " %127s (%63[^)]) => %255s", name, arch, path) != 3 ||
		    !strstr(arch, CONTAINER_LDCONFIG_ARCH) || path[0] != '/' || strchr(name, '/'))
			continue;
		for (size_t i = 0; container_driver_libs[i] && !wanted; i++)
			wanted = strncmp(name, container_driver_libs[i],
					 strlen(container_driver_libs[i])) == 0;
		if (!wanted || container_driver_known(rt, name))	/* the first path wins */
			continue;
		for (size_t i = 0; container_driver_dirs_inside[i]; i++) {
			char inside[sizeof(name) + 32];

			snprintf(inside, sizeof(inside), "%s/%s", container_driver_dirs_inside[i], name);
			container_driver_add(rt, path, inside);
		}
	}
	free(copy);
}

/*
 * nvidia-smi from PATH and the driver's libraries from `ldconfig -p`, as
 * NVIDIA's container toolkit finds them: a driver kept outside the usual
 * folders (/usr/local/nvidia/lib64 on many GPU hosts) is found through
 * the loader's own configuration.  Only on a node with NVIDIA's control
 * device, so that others run no program at start.
 */
static void container_driver_files(struct container_runtime *rt)
{
	char path[256];
	struct spawn_out res;
	size_t before;

	if (access("/dev/nvidiactl", F_OK) != 0)
		return;
	if (container_find_program("nvidia-smi", path, sizeof(path)))
		container_driver_add(rt, path, "/usr/bin/nvidia-smi");
	if (!container_find_program("ldconfig", path, sizeof(path))) {
		log_warn("containers: no ldconfig on PATH: the NVIDIA driver's libraries are not "
			 "found, and GPU workers' containers get none");
		return;
	}
	before = rt->n_driver_files;
	if (spawn_run(&(struct spawn){ .argv = (char *[]){ path, "-p", NULL },
				       .timeout_ms = CONTAINER_LDCONFIG_S * 1000,
				       .out_max = 4 << 20, .out_fd = -1 }, &res) == 0 &&
	    !res.timed_out && res.out)
		container_driver_libs_parse(rt, res.out);
	spawn_out_free(&res);
	if (rt->n_driver_files == before)
		log_warn("containers: `ldconfig -p` names none of the NVIDIA driver's libraries "
			 "(libnvidia-ml.so.1, libcuda.so.1): GPU workers' containers get none");
}

/*
 * Puts @text at @path: written aside, then renamed over it (@replace: the
 * daemon, at start) or linked in when there is none (a pull run without
 * the daemon), so a reader never sees it half-written.  0 or -1.
 */
static int container_put_file(const char *path, const char *text, bool replace)
{
	char tmp[4300];
	size_t len = strlen(text);
	int fd, ret = -1;

	if (!replace && access(path, F_OK) == 0)
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0 && write(fd, text, len) == (ssize_t)len &&
	    (replace ? rename(tmp, path) : link(tmp, path)) == 0)
		ret = 0;
	else if (errno == EEXIST)
		ret = 0;	/* another pull made it meanwhile */
	else
		log_err("cannot write %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return ret;
}

/* STATE_DIR/containers, made when missing; @dir gets its path.  0 or -1. */
static int container_dir(const struct mlfs_config *cfg, char *dir, size_t len)
{
	snprintf(dir, len, "%s/containers", cfg->state_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		log_err("cannot make %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* DIR/registries.conf: each insecure registry, plain HTTP. */
static void container_registries_conf(struct container_runtime *rt, const struct mlfs_config *cfg,
				      const char *dir, bool make_files)
{
	const char *p = cfg->containers.insecure_registries;
	char *text = NULL;
	size_t size = 0;
	FILE *f;

	if (!p)
		return;
	snprintf(rt->registries_conf, sizeof(rt->registries_conf), "%s/registries.conf", dir);
	f = open_memstream(&text, &size);
	if (!f) {
		rt->registries_conf[0] = '\0';
		return;
	}
	fprintf(f, "# made by mlfs from [containers] insecure_registries; rewritten at each start\n"
		"unqualified-search-registries = [\"docker.io\"]\n");
	while (*p) {
		size_t len = strcspn(p, " \t,");

		if (len)
			fprintf(f, "\n[[registry]]\nlocation = \"%.*s\"\ninsecure = true\n", (int)len, p);
		p += len;
		p += strspn(p, " \t,");
	}
	if (fclose(f) != 0 || container_put_file(rt->registries_conf, text, make_files) < 0)
		rt->registries_conf[0] = '\0';
	free(text);
}

/* STATE_DIR/containers/auth.json with no credentials, for pulls without an auth_file. */
static void container_own_auth(struct container_runtime *rt, const struct mlfs_config *cfg,
			       bool make_files)
{
	char dir[3900];

	if (rt->auth_file || !cfg->state_dir || container_dir(cfg, dir, sizeof(dir)) < 0)
		return;
	snprintf(rt->own_auth, sizeof(rt->own_auth), "%s/auth.json", dir);
	if (container_put_file(rt->own_auth, "{\"auths\": {}}\n", make_files) == 0)
		rt->auth_file = rt->own_auth;
}

/* podman, per [containers] runtime: false, with why, when there is none. */
static bool container_find_podman(struct container_runtime *rt, const struct containers_config *c)
{
	if (c->runtime && strcmp(c->runtime, "none") == 0) {
		snprintf(rt->why, sizeof(rt->why), "containers are off here ([containers] runtime = none)");
		return false;
	}
	if (!container_find_program(c->runtime ? c->runtime : "podman", rt->podman,
				    sizeof(rt->podman))) {
		snprintf(rt->why, sizeof(rt->why), "%s%s: not found; install Podman "
			 "(apt-get install --no-install-recommends podman runc)",
			 c->runtime ? "[containers] runtime " : "podman on PATH",
			 c->runtime ? c->runtime : "");
		return false;
	}
	return true;
}

/* The OCI runtime, the limits and the driver's files: false, with why, without an OCI runtime. */
static bool container_find_oci(struct container_runtime *rt, const struct containers_config *c)
{
	container_pick_oci(rt, c->oci_runtime);
	if (rt->why[0])
		return false;
	container_limits(rt);
	container_driver_files(rt);
	return true;
}

void container_runtime_detect(struct container_runtime *rt, const struct mlfs_config *cfg,
			      bool make_files)
{
	const struct containers_config *c = &cfg->containers;
	char dir[3900];

	memset(rt, 0, sizeof(*rt));
	rt->auth_file = c->auth_file;
	if (!container_find_podman(rt, c))
		return;
	if (geteuid() != 0) {
		snprintf(rt->why, sizeof(rt->why), "the daemon is not root: it runs podman as root to "
			 "start workers as their owners");
		return;
	}
	if (!container_find_oci(rt, c))
		return;
	if (c->insecure_registries && cfg->state_dir && container_dir(cfg, dir, sizeof(dir)) == 0)
		container_registries_conf(rt, cfg, dir, make_files);
	container_own_auth(rt, cfg, make_files);
	rt->usable = true;
}

void container_runtime_detect_rootless(struct container_runtime *rt,
				       const struct mlfs_config *cfg, const char *dir)
{
	const struct containers_config *c = &cfg->containers;

	memset(rt, 0, sizeof(*rt));
	if (!container_find_podman(rt, c) || !container_find_oci(rt, c))
		return;
	container_registries_conf(rt, cfg, dir, true);
	/* the node's credentials when the user may read them; else podman reads the user's own */
	if (c->auth_file && access(c->auth_file, R_OK) == 0)
		rt->auth_file = c->auth_file;
	rt->usable = true;
}

void container_runtime_render(const struct container_runtime *rt, FILE *f)
{
	if (!rt->usable) {
		fprintf(f, "containers none (%s)\n", rt->why);
		return;
	}
	fprintf(f, "containers podman %s\n", rt->podman);
	fprintf(f, "containers_oci_runtime %s (%s)\n", rt->oci, rt->oci_why);
	fprintf(f, "containers_limits nofile %lu:%lu nproc %lu (no more than the node's hard limits "
		"and podman's own)\n", rt->nofile_soft, rt->nofile_hard, rt->nproc);
	if (rt->registries_conf[0])
		fprintf(f, "containers_registries_conf %s\n", rt->registries_conf);
	if (rt->auth_file)
		fprintf(f, "containers_auth_file %s\n", rt->auth_file);
	for (size_t i = 0; i < rt->n_driver_files; i++)
		fprintf(f, "containers_driver_file %s %s\n", rt->driver_files[i].host,
			rt->driver_files[i].inside);
}

/* ---- one worker's `podman run` ---- */

struct container_args {
	char **argv;
	size_t n;
	char *buf;
	size_t len, used;
	bool full;
};

__attribute__((format(printf, 2, 3)))
static void container_arg(struct container_args *a, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (a->full || a->n + 1 >= CONTAINER_ARGV_MAX) {
		a->full = true;
		return;
	}
	va_start(ap, fmt);
	n = vsnprintf(a->buf + a->used, a->len - a->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= a->len - a->used) {
		a->full = true;
		return;
	}
	a->argv[a->n++] = a->buf + a->used;
	a->used += (size_t)n + 1;
}

static void container_gpu_args(struct container_args *a, const struct container_run *r)
{
	const struct container_runtime *rt = r->rt;

	if (!r->n_gpus)
		return;
	for (unsigned int i = 0; i < r->n_gpus; i++) {
		char dev[32];

		snprintf(dev, sizeof(dev), "/dev/nvidia%d", r->gpus[i]);
		if (access(dev, F_OK) == 0)
			container_arg(a, "--device=%s", dev);
		else	/* a node whose [node] gpus has no devices behind it: podman would refuse */
			log_warn("container %s: GPU %d has no %s on this node; not passed", r->name,
				 r->gpus[i], dev);
	}
	for (size_t i = 0; container_nvidia_devices[i]; i++)
		if (access(container_nvidia_devices[i], F_OK) == 0)
			container_arg(a, "--device=%s", container_nvidia_devices[i]);
	for (size_t i = 0; i < rt->n_driver_files; i++)
		container_arg(a, "--volume=%s:%s:ro", rt->driver_files[i].host,
			      rt->driver_files[i].inside);
}

int container_argv(const struct container_run *r, const char *cgroup_parent, char **argv,
		   char *buf, size_t buf_len)
{
	const struct container_runtime *rt = r->rt;
	struct container_args a = { .argv = argv, .buf = buf, .len = buf_len };

	container_arg(&a, "%s", rt->podman);
	container_arg(&a, "run");
	container_arg(&a, "--rm");
	container_arg(&a, "--pull=never");
	container_arg(&a, "--name=%s", r->name);
	container_arg(&a, "--runtime=%s", rt->oci);
	if (r->rootless) {
		container_arg(&a, "--userns=keep-id");
	} else {
		container_arg(&a, "--ulimit=nofile=%lu:%lu", rt->nofile_soft, rt->nofile_hard);
		container_arg(&a, "--ulimit=nproc=%lu:%lu", rt->nproc, rt->nproc);
		container_arg(&a, "--user=%u:%u", (unsigned int)r->uid, (unsigned int)r->gid);
	}
	container_arg(&a, "--network=host");
	container_arg(&a, "--log-driver=none");		/* the executor keeps the output */
	if (r->env_file)
		container_arg(&a, "--env-file=%s", r->env_file);
	if (cgroup_parent && !r->rootless)
		container_arg(&a, "--cgroup-parent=%s", cgroup_parent);
	if (r->memory && !r->rootless) {	/* the container sees it; the parent's, the same, tells an OOM */
		container_arg(&a, "--memory=%llu", (unsigned long long)r->memory);
		/* memory plus swap: swapping does not stretch the limit */
		container_arg(&a, "--memory-swap=%llu", (unsigned long long)r->memory);
	}
	if (r->shm_mb > 0)
		container_arg(&a, "--shm-size=%ldm", r->shm_mb);
	if (r->ml_dir)
		container_arg(&a, "--volume=%s:/opt/ml", r->ml_dir);
	for (size_t i = 0; i < r->n_binds; i++)
		container_arg(&a, "--volume=%s:%s:ro", r->binds[i][0], r->binds[i][1]);
	if (r->workdir)
		container_arg(&a, "--workdir=%s", r->workdir);
	container_gpu_args(&a, r);
	if (*r->command) {
		/* the command replaces the image's entrypoint, as Kubernetes' `command` does */
		container_arg(&a, "--entrypoint=/bin/sh");
		container_arg(&a, "%s", r->image);
		container_arg(&a, "-c");
		container_arg(&a, "%s", r->command);
	} else {
		container_arg(&a, "%s", r->image);
	}
	if (a.full)
		return -ENAMETOOLONG;
	argv[a.n] = NULL;
	return 0;
}

/* ---- packages ---- */

static bool container_text_add(char **text, size_t *len, const char *kind, const char *a,
			       const char *b)
{
	char *line;
	int n = asprintf(&line, "%s %s%s%s\n", kind, a, b ? "=" : "", b ? b : "");
	char *grown;

	if (n < 0)
		return false;
	grown = realloc(*text, *len + (size_t)n + 1);
	if (!grown) {
		free(line);
		return false;
	}
	memcpy(grown + *len, line, (size_t)n + 1);
	*text = grown;
	*len += (size_t)n;
	free(line);
	return true;
}

/* The text of container_packages_file; NULL when @s lists no package, or on ENOMEM (*@nomem). */
static char *container_packages_text(const struct spec *s, bool *nomem)
{
	const struct spec_packages *p = &s->packages;
	const struct {
		const char *kind;
		char *const *names;
		size_t n;
	} lists[] = { { "apt", p->apt, p->n_apt }, { "conda", p->conda, p->n_conda },
		      { "pip", p->pip, p->n_pip } };
	char *text = NULL;
	size_t len = 0;
	bool ok = true;

	*nomem = false;
	if (p->n_apt + p->n_conda + p->n_pip == 0)
		return NULL;
	for (size_t l = 0; l < 3; l++)
		for (size_t i = 0; ok && i < lists[l].n; i++)
			ok = container_text_add(&text, &len, lists[l].kind, lists[l].names[i], NULL);
	for (size_t i = 0; ok && i < s->n_env; i++) {
		if (strchr(s->env[i].value, '\n')) {
			log_warn("job %s: %s holds a newline, which the package step cannot carry: "
				 "left out", s->name, s->env[i].name);
			continue;
		}
		ok = container_text_add(&text, &len, "env", s->env[i].name, s->env[i].value);
	}
	if (!ok) {
		free(text);
		*nomem = true;
		return NULL;
	}
	return text;
}

static int container_env_ref(const char *base, const char *packages, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t len = strlen(CONTAINER_ENV_PREFIX);
	bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
		  EVP_DigestUpdate(ctx, base, strlen(base) + 1) &&	/* its NUL parts it from the rest */
		  EVP_DigestUpdate(ctx, packages, strlen(packages)) &&
		  EVP_DigestFinal_ex(ctx, md, &n);

	EVP_MD_CTX_free(ctx);
	if (!ok)
		return -ENOMEM;
	memcpy(out, CONTAINER_ENV_PREFIX, len);
	for (int i = 0; i < 16; i++)
		snprintf(out + len + 2 * (size_t)i, 3, "%02x", md[i]);
	return 0;
}

int container_packages_file(const char *path, const struct spec *s, const char *base, char *ref)
{
	bool nomem;
	char *text = container_packages_text(s, &nomem);
	size_t len = text ? strlen(text) : 0;
	int fd, ret;

	if (!text)
		return nomem ? -ENOMEM : 0;
	ret = container_env_ref(base, text, ref);
	fd = ret < 0 ? -1 : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (ret == 0 && fd < 0)
		ret = -errno;
	if (fd >= 0 && write(fd, text, len) != (ssize_t)len)
		ret = -EIO;
	if (fd >= 0 && close(fd) < 0 && ret == 0)
		ret = -errno;
	free(text);
	return ret < 0 ? ret : 1;
}

int container_env_file(const char *path, char *const *envp)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	FILE *f;

	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	for (size_t i = 0; envp[i]; i++) {
		if (strchr(envp[i], '\n')) {
			log_warn("%s: %.*s holds a newline, which podman's --env-file cannot carry: "
				 "left out", path, (int)strcspn(envp[i], "="), envp[i]);
			continue;
		}
		fprintf(f, "%s\n", envp[i]);
	}
	return fclose(f) == 0 ? 0 : -EIO;
}
