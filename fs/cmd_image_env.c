/*
 * cmd_image_env.c - proxiML's environment.packages put into an image of
 * their own: `mlfs image pull CONFIG BASE --packages FILE --as TARGET`
 * (cmd_image.c) runs this once BASE is on the node, holding TARGET's lock.
 *
 * The idea: the command runs as the spec owner's uid, and apt needs root.
 * So a preparation container runs the installs as root in BASE (apt-get,
 * then conda, then pip, each step announced in the worker's log and its
 * output there), and `podman commit` keeps the result as TARGET, a local
 * image named after what went into it (container.h:
 * container_packages_file), which the worker then runs in and later jobs
 * with the same base, packages and variables reuse.  BASE's ENTRYPOINT,
 * CMD and USER are given back to TARGET (the preparation's own would stick
 * otherwise).
 *
 * The spec's variables reach the package tools on the container's stdin,
 * exported by the script: never through --env (podman commit would keep
 * them in TARGET's config, for every later user of it) nor on a command
 * line.  pip gets PIP_BREAK_SYSTEM_PACKAGES=1 unless the spec says
 * otherwise (PEP 668: Debian 12's pip refuses the system's python without
 * it; TARGET is the job's own image, so installing there is what was
 * asked), no cache and no warning about root.  apt's lists and archives are
 * cleaned out of TARGET.  conda runs only where the image has it.
 *
 * A failure ends the build with the step's name and the tool's last words
 * ("apt-get install: E: Unable to locate package x").  The container is
 * removed either way; one left by a preparation killed with its job (podman
 * runs in a process group of its own) is removed by the next preparation
 * of TARGET, since its name is TARGET's.
 *
 * What it does not do: remove old prepared images (they stay, as pulled
 * ones do, until `podman rmi`), or read a requirements.txt of the model.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cmd.h"
#include "container.h"
#include "spawn.h"

#define IMAGE_ENV_TIMEOUT_MS	(3600 * 1000)	/* an hour: a big pip install on a slow link */
#define IMAGE_ENV_CALL_MS	(120 * 1000)	/* inspect, commit, rm */

/*
 * Run as root in BASE by /bin/sh: the variables come on stdin, one
 * NAME=VALUE a line, the packages as arguments "apt:NAME", "conda:NAME",
 * "pip:NAME" (no blanks: spec_native.c checks), globbing off.
 */
static const char image_env_script[] =
	"exec 1>&2\n"
	"set -f\n"
	"while IFS= read -r v; do export \"$v\"; done\n"
	"exec </dev/null\n"
	"apt= conda= pip=\n"
	"for a; do\n"
	"  case $a in\n"
	"  apt:*) apt=\"$apt ${a#apt:}\" ;;\n"
	"  conda:*) conda=\"$conda ${a#conda:}\" ;;\n"
	"  pip:*) pip=\"$pip ${a#pip:}\" ;;\n"
	"  esac\n"
	"done\n"
	"if [ -n \"$apt\" ]; then\n"
	"  export DEBIAN_FRONTEND=noninteractive\n"
	"  echo \"mlfs-step: apt-get update\"\n"
	"  apt-get update || exit\n"
	"  echo \"mlfs-step: apt-get install:$apt\"\n"
	"  apt-get install -y --no-install-recommends $apt || exit\n"
	"  apt-get clean\n"
	"  set +f; rm -rf /var/lib/apt/lists/*; set -f\n"
	"fi\n"
	"if [ -n \"$conda\" ]; then\n"
	"  echo \"mlfs-step: conda install:$conda\"\n"
	"  command -v conda >/dev/null || { echo \"conda: not in this image\"; exit 127; }\n"
	"  conda install -y $conda || exit\n"
	"  conda clean -a -y >/dev/null 2>&1 || :\n"
	"fi\n"
	"if [ -n \"$pip\" ]; then\n"
	"  echo \"mlfs-step: pip install:$pip\"\n"
	"  if command -v pip >/dev/null; then set -- pip\n"
	"  elif command -v pip3 >/dev/null; then set -- pip3\n"
	"  else set -- python3 -m pip; fi\n"
	"  export PIP_BREAK_SYSTEM_PACKAGES=\"${PIP_BREAK_SYSTEM_PACKAGES:-1}\"\n"
	"  export PIP_ROOT_USER_ACTION=\"${PIP_ROOT_USER_ACTION:-ignore}\"\n"
	"  export PIP_DISABLE_PIP_VERSION_CHECK=\"${PIP_DISABLE_PIP_VERSION_CHECK:-1}\"\n"
	"  \"$@\" install --no-cache-dir $pip || exit\n"
	"fi\n";

/* The words of one podman call: its lines go to @e's log as they come. */
struct image_env_run {
	struct image_env *e;
	char step[64];			/* the step under way ("apt-get install"); "" = none */
	char last[400];			/* the last line that says something */
};

static void image_env_on_line(void *arg, const char *line)
{
	struct image_env_run *r = arg;
	const char *step = strncmp(line, "mlfs-step: ", 11) == 0 ? line + 11 : NULL;
	char shown[SPAWN_LINE_MAX + 8];

	if (step) {
		snprintf(r->step, sizeof(r->step), "%.*s", (int)strcspn(step, ":"), step);
		snprintf(shown, sizeof(shown), "mlfs: %s", step);
		line = shown;
	} else if (*line) {
		snprintf(r->last, sizeof(r->last), "%s", line);
	}
	r->e->on_line(r->e->arg, line);
}

/* Runs @argv (podman), its stderr to the log; 0 when it exits 0, else why in e->why. */
static int image_env_podman(struct image_env *e, char *const *argv, const char *in,
			    int timeout_ms, const char *what)
{
	struct image_env_run r = { .e = e };
	struct spawn sp = { .argv = argv, .in = in, .in_len = in ? strlen(in) : 0,
			    .timeout_ms = timeout_ms, .out_max = 64 << 10, .out_fd = -1,
			    .on_err_line = image_env_on_line, .arg = &r };
	struct spawn_out res;
	int ret = spawn_run(&sp, &res);
	int st = res.status;

	if (res.timed_out)
		snprintf(r.last, sizeof(r.last), "took more than %d s; stopped", timeout_ms / 1000);
	else if (ret < 0)
		snprintf(r.last, sizeof(r.last), "cannot run %s: %s", argv[0], strerror(-ret));
	spawn_out_free(&res);
	if (ret == 0 && st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	snprintf(e->why, sizeof(e->why), "%s: %s", r.step[0] ? r.step : what,
		 r.last[0] ? r.last : "it failed, saying nothing");
	return -1;
}

/* Removes the preparation container @name, whatever is left of it. */
static void image_env_rm(const struct container_runtime *rt, const char *name)
{
	char *argv[] = { (char *)rt->podman, "rm", "--force", "--ignore", "--time=2", (char *)name, NULL };
	struct spawn sp = { .argv = argv, .timeout_ms = IMAGE_ENV_CALL_MS, .out_max = 4096,
			    .out_fd = -1 };
	struct spawn_out res;

	spawn_run(&sp, &res);
	spawn_out_free(&res);
}

/*
 * Reads @file: the packages become "apt:NAME" arguments appended to @argv
 * from @n (room for them made), the variables NAME=VALUE lines of *@in.
 * Returns the new count, or -1 (ENOMEM, or the file unreadable, in why).
 */
static int image_env_read(struct image_env *e, char ***argv, size_t n, char **in)
{
	FILE *f = fopen(e->packages, "re");
	char *line = NULL;
	size_t cap = 0, in_len = 0;
	ssize_t len;
	int ret = (int)n;

	*in = NULL;
	if (!f) {
		snprintf(e->why, sizeof(e->why), "cannot read %s: %s", e->packages, strerror(errno));
		return -1;
	}
	while (ret >= 0 && (len = getline(&line, &cap, f)) > 0) {
		char **grown;
		char *sp = strchr(line, ' ');

		if (line[len - 1] == '\n')
			line[--len] = '\0';
		if (!sp)
			continue;
		*sp = '\0';
		if (strcmp(line, "env") == 0) {
			char *more = realloc(*in, in_len + strlen(sp + 1) + 2);

			if (!more) {
				ret = -1;
				break;
			}
			*in = more;
			in_len += (size_t)sprintf(more + in_len, "%s\n", sp + 1);
			continue;
		}
		grown = realloc(*argv, ((size_t)ret + 2) * sizeof(char *));
		if (!grown) {
			ret = -1;
			break;
		}
		*argv = grown;
		grown[ret] = grown[ret + 1] = NULL;
		if (asprintf(&grown[ret], "%s:%s", line, sp + 1) < 0) {
			grown[ret] = NULL;
			ret = -1;
			break;
		}
		ret++;
	}
	free(line);
	fclose(f);
	if (ret < 0 && !e->why[0])
		snprintf(e->why, sizeof(e->why), "%s", strerror(ENOMEM));
	return ret;
}

/* The preparation: the script in BASE as root, the packages its arguments. */
static int image_env_install(const struct container_runtime *rt, struct image_env *e,
			     const char *name)
{
	char names[300], nofile[64], nproc[64], runtime[300];
	char *in = NULL;
	int ret = -1;

	snprintf(names, sizeof(names), "--name=%s", name);
	snprintf(runtime, sizeof(runtime), "--runtime=%s", rt->oci);
	/* the node's limits, as every container of mlfs's (container.c) */
	snprintf(nofile, sizeof(nofile), "--ulimit=nofile=%lu:%lu", rt->nofile_soft, rt->nofile_hard);
	snprintf(nproc, sizeof(nproc), "--ulimit=nproc=%lu:%lu", rt->nproc, rt->nproc);
	const char *const head[] = {
		rt->podman, "run", names, "--pull=never", runtime, nofile, nproc, "--user=0:0",
		"--network=host", "--log-driver=none", "--interactive", "--entrypoint=/bin/sh",
		e->base, "-c", image_env_script, "mlfs-prepare",
	};
	size_t n = sizeof(head) / sizeof(head[0]);
	char **argv = calloc(n + 1, sizeof(char *));	/* the packages are appended */

	if (!argv) {
		snprintf(e->why, sizeof(e->why), "%s", strerror(ENOMEM));
		return -1;
	}
	memcpy(argv, head, sizeof(head));
	if (image_env_read(e, &argv, n, &in) >= 0)
		ret = image_env_podman(e, argv, in ? in : "", IMAGE_ENV_TIMEOUT_MS, "podman run");
	for (size_t i = n; argv[i]; i++)	/* the packages; the head is borrowed */
		free(argv[i]);
	free(argv);
	free(in);
	return ret;
}

/* "ENTRYPOINT [...]", "CMD [...]", "USER u" of @base, for podman commit --change. */
static int image_env_config(const struct container_runtime *rt, struct image_env *e,
			    char *entry, char *cmd, char *user, size_t len)
{
	char *argv[] = { (char *)rt->podman, "image", "inspect", "--format",
			 "{{json .Config.Entrypoint}}\n{{json .Config.Cmd}}\n{{.Config.User}}",
			 (char *)e->base, NULL };
	struct spawn sp = { .argv = argv, .timeout_ms = IMAGE_ENV_CALL_MS, .out_max = 64 << 10,
			    .out_fd = -1 };
	struct spawn_out res;
	int ret = spawn_run(&sp, &res);
	char *save = NULL, *lines[3] = { 0 };

	if (ret < 0 || res.status < 0 || !WIFEXITED(res.status) || WEXITSTATUS(res.status) != 0 ||
	    !res.out) {
		snprintf(e->why, sizeof(e->why), "podman image inspect %s: %s", e->base,
			 res.err && *res.err ? res.err : "failed");
		e->why[strcspn(e->why, "\n")] = '\0';
		spawn_out_free(&res);
		return -1;
	}
	lines[0] = strtok_r(res.out, "\n", &save);
	lines[1] = lines[0] ? strtok_r(NULL, "\n", &save) : NULL;
	lines[2] = lines[1] ? strtok_r(NULL, "\n", &save) : NULL;
	/* none ("null") is given back as none: the preparation's own would stay */
	snprintf(entry, len, "ENTRYPOINT %s", lines[0] && strcmp(lines[0], "null") ? lines[0] : "[]");
	snprintf(cmd, len, "CMD %s", lines[1] && strcmp(lines[1], "null") ? lines[1] : "[]");
	snprintf(user, len, "USER %s", lines[2] && *lines[2] ? lines[2] : "0");
	spawn_out_free(&res);
	return 0;
}

static int image_env_commit(const struct container_runtime *rt, struct image_env *e,
			    const char *name)
{
	char entry[4096], cmd[4096], user[4096];
	char *argv[] = { (char *)rt->podman, "commit", "--quiet", "--change", entry, "--change",
			 cmd, "--change", user, (char *)name, (char *)e->target, NULL };

	if (image_env_config(rt, e, entry, cmd, user, sizeof(user)) < 0)
		return -1;
	return image_env_podman(e, argv, NULL, IMAGE_ENV_CALL_MS, "podman commit");
}

int image_env_build(const struct container_runtime *rt, struct image_env *e)
{
	char name[128];
	int ret;

	e->why[0] = '\0';
	/* a container name is [a-zA-Z0-9][a-zA-Z0-9_.-]*: the target's, its '/' and ':' turned */
	snprintf(name, sizeof(name), "mlfs-prepare-%s", e->target);
	for (char *c = name; *c; c++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", *c))
			*c = '_';
	image_env_rm(rt, name);		/* one a killed preparation left */
	ret = image_env_install(rt, e, name);
	if (ret == 0)
		ret = image_env_commit(rt, e, name);
	image_env_rm(rt, name);
	return ret;
}
