/*
 * fuzz_archive_name.c - libFuzzer target: archive member names
 * (be_archive_canon), the guard against "zip slip".  A name it accepts is
 * relative, has no "..", "." or empty component and no control character,
 * and fits BE_ARCHIVE_PATH_MAX.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "be_archive.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *raw = malloc(size + 1), out[BE_ARCHIVE_PATH_MAX + 1];
	const char *why = NULL;

	if (!raw)
		return 0;
	memcpy(raw, data, size);
	raw[size] = '\0';
	if (be_archive_canon(raw, out, &why) == 0) {
		size_t len = strlen(out);

		if (!len || len > BE_ARCHIVE_PATH_MAX || out[0] == '/' || out[len - 1] == '/')
			abort();
		for (const char *p = out; *p;) {
			size_t c = strcspn(p, "/");

			if (c == 0 || (c == 1 && p[0] == '.') || (c == 2 && p[0] == '.' && p[1] == '.'))
				abort();
			for (size_t i = 0; i < c; i++)
				if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
					abort();
			p += c;
			p += *p == '/';
		}
	} else if (!why) {
		abort();
	}
	free(raw);
	return 0;
}
