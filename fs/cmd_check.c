/*
 * cmd_check.c - `mlfs check`: validate files offline with the mount's code.
 *
 * Each FILE is told apart by its content: an INI file whose first line of
 * substance is a [section] is a config; anything else is a job spec, read
 * by spec_parse exactly as jobs/ reads it at close.  Errors are
 * "file:line[:col]: ..." on stderr, one per line; "FILE: ok" goes to
 * stdout.  Exit 1 if any error.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cmd.h"
#include "config.h"
#include "diag.h"
#include "exec.h"
#include "spec.h"

int cmd_load_config(struct mlfs_config **out, const char *file)
{
	struct diag d;
	int ret;

	diag_init(&d);
	ret = config_load(out, file, backend_config_forms(), &d);
	if (ret == 0) {
		/* the registries check what the config reader does not know: executors, types */
		bool bad = exec_check_config(*out, &d) < 0;

		bad |= backend_check_config(*out, &d) < 0;
		if (bad) {
			config_free(*out);
			*out = NULL;
			ret = -EINVAL;
		}
	}
	diag_print(&d, stderr);
	diag_free(&d);
	return ret;
}

/* 1 if @file looks like a config: its first non-blank, non-comment line is "[word". */
static int check_is_config(const char *file)
{
	FILE *f = fopen(file, "r");
	char line[256];
	int is_config = 1;	/* unreadable: let the config loader say why */

	if (!f)
		return 1;
	while (fgets(line, sizeof(line), f)) {
		char *p = line;

		if (strncmp(p, "\xef\xbb\xbf", 3) == 0)
			p += 3;
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '\0' || *p == ';' || *p == '#')
			continue;
		is_config = p[0] == '[' && isalpha((unsigned char)p[1]);
		break;
	}
	fclose(f);
	return is_config;
}

/* Reads all of @file, up to one byte over SPEC_MAX_SIZE. */
static int check_read(const char *file, char **text, size_t *len)
{
	FILE *f = fopen(file, "re");
	char *buf = malloc(SPEC_MAX_SIZE + 2);
	size_t n = 0;

	if (!f || !buf) {
		int err = f ? ENOMEM : errno;

		if (f)
			fclose(f);
		free(buf);
		return -err;
	}
	n = fread(buf, 1, SPEC_MAX_SIZE + 1, f);
	fclose(f);
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

/* The job name a spec file gives when its spec has none: its name without extension. */
static char *check_default_name(const char *file)
{
	const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
	const char *dot = strrchr(base, '.');

	return strndup(base, dot && dot != base ? (size_t)(dot - base) : strlen(base));
}

int cmd_load_spec(struct spec **out, const char *file, const struct mlfs_config *cfg)
{
	char *text = NULL, *name = check_default_name(file);
	struct diag d;
	size_t len = 0;
	int ret = name ? check_read(file, &text, &len) : -ENOMEM;

	*out = NULL;
	if (ret < 0) {
		fprintf(stderr, "%s: %s\n", file, strerror(-ret));
		free(name);
		return ret;
	}
	diag_init(&d);
	ret = spec_parse(out, file, text, len, name, &d);
	if (ret == -EFBIG)
		fprintf(stderr, "%s: over %d bytes: %s\n", file, SPEC_MAX_SIZE, strerror(EFBIG));
	if (ret == 0 && cfg && (ret = spec_check_data(*out, cfg, file, text, len, &d)) < 0) {
		spec_free(*out);
		*out = NULL;
	}
	diag_print(&d, stderr);
	diag_free(&d);
	free(text);
	free(name);
	return ret;
}

/* @cfg: with -c, the config the spec's data is checked against; else NULL. */
/* With -c, the [environment] its base environment resolves to (jobs/ checks it at close). */
static int check_environment(struct spec *spec, const char *file, const struct mlfs_config *cfg)
{
	char *text = NULL;
	size_t len = 0;
	struct diag d;
	int ret;

	if (!cfg || !spec->base_env.field)
		return 0;
	ret = check_read(file, &text, &len);
	if (ret < 0)
		return ret;
	diag_init(&d);
	ret = spec_check_environment(spec, cfg, file, text, len, &d);
	diag_print(&d, stderr);
	diag_free(&d);
	free(text);
	return ret;
}

static int check_spec(const char *file, const struct mlfs_config *cfg)
{
	struct spec *spec;
	int ret = cmd_load_spec(&spec, file, cfg);

	if (ret == 0)
		ret = check_environment(spec, file, cfg);

	if (ret == 0)
		printf("%s: ok (%s spec, job %s, %zu worker(s))\n", file,
		       spec_format_name(spec->format), spec->name, spec->n_workers);
	spec_free(spec);
	return ret;
}

static int check_file(const char *file, const struct mlfs_config *against)
{
	struct mlfs_config *cfg;

	if (!check_is_config(file))
		return check_spec(file, against);
	if (cmd_load_config(&cfg, file) < 0)
		return -EINVAL;
	config_free(cfg);
	printf("%s: ok\n", file);
	return 0;
}

int cmd_check(int argc, char **argv)
{
	int opt, failed = 0;
	const char *config = NULL;
	struct mlfs_config *cfg = NULL;

	optind = 1;
	while ((opt = getopt(argc, argv, "+c:")) != -1) {
		if (opt != 'c') {
			fprintf(stderr, "usage: mlfs check [-c CONFIG] FILE...\n");
			return 2;
		}
		config = optarg;
	}
	if (!config && optind >= argc) {
		fprintf(stderr, "usage: mlfs check [-c CONFIG] FILE...\n");
		return 2;
	}
	if (config && cmd_load_config(&cfg, config) < 0)
		return 1;
	if (config && optind >= argc)
		printf("%s: ok\n", config);
	for (int i = optind; i < argc; i++)
		if (check_file(argv[i], cfg) < 0)
			failed = 1;
	config_free(cfg);
	return failed;
}
