/*
 * fuzz_spec.c - libFuzzer target: every spec format (spec_parse tells them
 * by shape: native JSON, OpenPAI, GPULab v1/v2, Kibernetika YAML or JSON)
 * on any bytes, and spec_to_json of what parses.  A spec that parses has a
 * valid name and at least one worker with a command.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct spec *s = NULL;
	struct diag d = { 0 };
	int ret = spec_parse(&s, "fuzz.json", (const char *)data, size, "fuzz", &d);

	if (ret == 0) {
		char *json = spec_to_json(s);

		if (!spec_name_valid(s->name) || s->n_workers == 0 || !s->workers[0].command)
			abort();
		free(json);
		spec_free(s);
	} else if (ret != -EINVAL && ret != -EFBIG && ret != -ENOMEM) {
		abort();
	}
	diag_free(&d);
	return 0;
}
