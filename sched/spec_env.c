/*
 * spec_env.c - proxiML's base environments: a native spec's
 * environment.python_version, framework and framework_version choose one of
 * the node's [environment NAME] sections (docs/config.md), whose image every
 * worker of the job then runs in.
 *
 * The rule: each field the spec gives equals the section's key of the same
 * name (versions as written, the framework without regard to case; a
 * section without that key does not match); a field the spec leaves out
 * matches anything.  Among several matches the highest framework_version
 * wins (a section without one ranks lowest), then the highest
 * python_version, then the first in the file; versions compare number by
 * number (strverscmp: 2.10 is above 2.9).  No match is refused with the
 * choices the node has.  The scheduler resolves at acceptance and keeps the
 * answer with the job (sched_store.c), so a config changed later does not
 * move a queued job to another image.
 *
 * What it does not do: look at the image (the worker's pull does).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "spec.h"

static bool spec_env_same(const char *want, const char *have, bool nocase)
{
	if (!want)
		return true;
	if (!have)
		return false;
	return nocase ? strcasecmp(want, have) == 0 : strcmp(want, have) == 0;
}

/* Below 0, 0, above 0 as version @a ranks below, as, above @b; none ranks lowest. */
static int spec_env_rank(const char *a, const char *b)
{
	if (!a || !b)
		return (a != NULL) - (b != NULL);
	return strverscmp(a, b);
}

static const struct environment_config *spec_env_match(const struct spec_base_env *b,
							const struct mlfs_config *cfg)
{
	const struct environment_config *best = NULL;

	for (size_t i = 0; i < cfg->n_environments; i++) {
		const struct environment_config *e = &cfg->environments[i];
		int r;

		if (!spec_env_same(b->python_version, e->python_version, false) ||
		    !spec_env_same(b->framework, e->framework, true) ||
		    !spec_env_same(b->framework_version, e->framework_version, false))
			continue;
		if (!best) {
			best = e;
			continue;
		}
		r = spec_env_rank(e->framework_version, best->framework_version);
		if (r == 0)
			r = spec_env_rank(e->python_version, best->python_version);
		if (r > 0)
			best = e;
	}
	return best;
}

/* "python_version 3.11, framework PyTorch 2.1.0": what @e (or a spec) is chosen by. */
static void spec_env_keys(const char *python, const char *fw, const char *fw_version, char *buf,
			  size_t len)
{
	snprintf(buf, len, "%s%s%s%s%s%s%s", python ? "python_version " : "", python ? python : "",
		 python && (fw || fw_version) ? ", " : "", fw ? "framework " : "", fw ? fw : "",
		 fw_version ? (fw ? " " : "framework_version ") : "", fw_version ? fw_version : "");
}

/* "py311 (python_version 3.11), tf (...)": the sections of @cfg, cut short with "...". */
static void spec_env_choices(const struct mlfs_config *cfg, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < cfg->n_environments && used < len; i++) {
		const struct environment_config *e = &cfg->environments[i];
		char keys[512];
		int n;

		spec_env_keys(e->python_version, e->framework, e->framework_version, keys,
			      sizeof(keys));
		n = snprintf(buf + used, len - used, "%s%s (%s)", i ? ", " : "", e->name, keys);
		if (n < 0 || (size_t)n >= len - used) {
			snprintf(buf + (len > 4 ? len - 4 : 0), len > 4 ? 4 : len, "...");
			return;
		}
		used += (size_t)n;
	}
}

int spec_set_environment(struct spec *s, const char *name, const char *image)
{
	const char *field = s->base_env.field ? s->base_env.field : "environment.python_version";

	free(s->base_env.name);
	s->base_env.name = strdup(name);
	if (!s->base_env.name)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_workers; i++) {
		struct spec_image *img = &s->workers[i].image;

		free(img->ref);
		free(img->ref_field);
		img->ref = strdup(image);
		img->ref_field = strdup(field);
		if (!img->ref || !img->ref_field)
			return -ENOMEM;
	}
	return 0;
}

int spec_check_environment(struct spec *s, const struct mlfs_config *cfg, const char *file,
			   const char *text, size_t len, struct diag *d)
{
	const struct spec_base_env *b = &s->base_env;
	const struct environment_config *e;
	char asked[512], choices[2048], msg[2800];

	if (!b->field)
		return 0;
	e = spec_env_match(b, cfg);
	if (e)
		return spec_set_environment(s, e->name, e->image);
	if (!d)
		return -EINVAL;
	spec_env_keys(b->python_version, b->framework, b->framework_version, asked, sizeof(asked));
	if (cfg->n_environments) {
		spec_env_choices(cfg, choices, sizeof(choices));
		snprintf(msg, sizeof(msg), "no base environment of this node has %s; it has %s",
			 asked, choices);
	} else {
		snprintf(msg, sizeof(msg), "no base environment of this node has %s: it has none "
			 "([environment NAME] in its config); give environment.image instead", asked);
	}
	spec_field_error(d, file, text, len, b->field, msg);
	return -EINVAL;
}
