/*
 * fuzz_git_ref.c - libFuzzer target: git sources as a spec writes them
 * (be_git_split: "git+https://HOST/R#REF" and the like).  What it accepts
 * has a URL of a host and a ref git allows: no "..", no control character,
 * space or "~^:?*[\", not starting with '-' or '/'.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "be_git.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *src = malloc(size + 1), *url = NULL, *ref = NULL;

	if (!src)
		return 0;
	memcpy(src, data, size);
	src[size] = '\0';
	if (be_git_split(src, &url, &ref) == 0) {
		const char *host = strstr(url, "://");

		if (!host || !host[3] || host[3] == '/' || strchr(url, '#'))
			abort();
		if (ref[0] && (strstr(ref, "..") || ref[0] == '-' || ref[0] == '/' ||
			       strpbrk(ref, " ~^:?*[\\")))
			abort();
		for (const char *p = ref; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				abort();
		if (!be_git_claims(src))
			abort();
	}
	free(url);
	free(ref);
	free(src);
	return 0;
}
