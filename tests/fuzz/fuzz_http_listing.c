/*
 * fuzz_http_listing.c - libFuzzer target: HTTP index pages (nginx and
 * Apache autoindex HTML, nginx JSON autoindex) through be_http_parse_listing
 * on any bytes.  Every name it yields is one path component (fuzz_name.h).
 */
#define _GNU_SOURCE
#include <stdint.h>

#include "be_http.h"
#include "fuzz_name.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	be_http_list_init();
	return 0;
}

static void fuzz_check(const struct be_http_listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		fuzz_check_name(l->e[i].name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const types[] = { "text/html", "application/json", NULL };

	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		struct be_http_listing l = { 0 };

		if (be_http_parse_listing(&l, (const char *)data, size, types[t]) == 0)
			fuzz_check(&l);
		be_http_listing_free(&l);
	}
	return 0;
}
