/* spec_openpai.c - being written: the openpai format. */
#define _GNU_SOURCE
#include "spec_int.h"

void spec_openpai_parse(struct spec_ctx *c, json_t *root)
{
	(void)root;
	spec_error(c, "", "this format is being written");
}

void spec_openpai_runtime_env(const struct spec *s, size_t w, const struct spec_runtime *rt,
			   spec_env_fn *set, void *arg)
{
	(void)s; (void)w; (void)rt; (void)set; (void)arg;
}
