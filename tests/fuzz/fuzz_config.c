/*
 * fuzz_config.c - libFuzzer target: the config file parser (config_parse)
 * on any bytes.  Every problem must come back as -EINVAL with messages, and
 * a config that parses must hold what the parser promises.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "config.h"
#include "diag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mlfs_config *cfg = NULL;
	struct diag d = { 0 };
	int ret = config_parse(&cfg, "fuzz.conf", (const char *)data, size,
			       backend_config_forms(), &d);

	if (ret == 0) {
		if (!cfg || !cfg->state_dir || !cfg->cache_dir)
			abort();
		config_free(cfg);
	} else if (ret != -EINVAL && ret != -ENOMEM && ret != -EFBIG) {
		abort();	/* no other answer is documented */
	}
	diag_free(&d);
	return 0;
}
