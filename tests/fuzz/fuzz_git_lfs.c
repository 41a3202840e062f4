/*
 * fuzz_git_lfs.c - libFuzzer target: what a repository's content says to
 * the Git LFS client (be_git_lfs.c): a pointer file (be_git_lfs_parse) and
 * a URL an endpoint is derived from (be_git_lfs_endpoint).  A pointer it
 * accepts names 64 lowercase hex digits and a size, and is one
 * be_git_is_lfs_pointer tells from a file; an endpoint is an http(s) URL
 * ending in /info/lfs.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "be_git.h"
#include "be_git_lfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char oid[BE_GIT_LFS_OID_LEN + 1], *src = malloc(size + 1), *ep;
	int64_t len = -1;

	if (!src)
		return 0;
	memcpy(src, data, size);
	src[size] = '\0';
	if (be_git_lfs_parse((const char *)data, size, oid, &len) == 0) {
		if (strlen(oid) != BE_GIT_LFS_OID_LEN ||
		    strspn(oid, "0123456789abcdef") != BE_GIT_LFS_OID_LEN || len < 0)
			abort();
		if (size < 1024 && !be_git_is_lfs_pointer((const char *)data, size))
			abort();
	}
	ep = be_git_lfs_endpoint(src);
	if (ep) {
		size_t n = strlen(ep);

		if ((strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0) ||
		    n < 9 || strcmp(ep + n - 9, "/info/lfs") != 0)
			abort();
	}
	free(ep);
	free(src);
	return 0;
}
