/*
 * fuzz_s3_xml.c - libFuzzer target: S3's ListObjectsV2 and error bodies
 * (be_s3_parse_list, be_s3_parse_error) on any bytes.  No name a listing
 * yields may leave its folder: none is empty, ".", "..", or holds a '/' or
 * a NUL, or is longer than NAME_MAX.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <libxml/parser.h>

#include "be_s3.h"
#include "fuzz_name.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	xmlInitParser();
	return 0;
}

static int fuzz_entry(void *arg, const char *name, const struct be_s3_obj *o)
{
	(void)arg;
	(void)o;
	fuzz_check_name(name);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct be_s3_page page = { 0 };
	char code[64];

	be_s3_parse_list((const char *)data, size, "dir/", fuzz_entry, NULL, &page);
	free(page.next_token);
	memset(&page, 0, sizeof(page));
	be_s3_parse_list((const char *)data, size, "", fuzz_entry, NULL, &page);
	free(page.next_token);
	if (be_s3_parse_error((const char *)data, size, code, sizeof(code)) == 0 &&
	    strlen(code) >= sizeof(code))
		abort();
	return 0;
}
