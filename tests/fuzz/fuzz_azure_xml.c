/*
 * fuzz_azure_xml.c - libFuzzer target: Azure's List Blobs and error bodies
 * (be_azure_parse_list, be_azure_parse_error) on any bytes.  Every entry has
 * a name; the marker handed back fits its buffer, NUL-terminated; an error's
 * words fit theirs.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <libxml/parser.h>

#include "be_azure.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	xmlInitParser();
	return 0;
}

static int fuzz_entry(void *arg, const struct be_azure_entry *e)
{
	(void)arg;
	if (!e->name || !e->name[0] || !e->etag)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char marker[32], why[64];

	be_azure_parse_list((const char *)data, size, fuzz_entry, NULL, marker, sizeof(marker));
	if (strnlen(marker, sizeof(marker)) >= sizeof(marker))
		abort();
	if (be_azure_parse_error((const char *)data, size, why, sizeof(why)) == 0 &&
	    strnlen(why, sizeof(why)) >= sizeof(why))
		abort();
	return 0;
}
