/*
 * be_azure.h - the Azure Blob backend (be_azure.c, be_azure_auth.c), and the
 * pieces of it that need no server, exposed for tests/unit/test_azure.c:
 * where a datastore points and how it signs in (be_azure_addr_init), Shared
 * Key's string to sign, and the listing's XML.
 */
#ifndef MLFS_BE_AZURE_H
#define MLFS_BE_AZURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "backend.h"

extern const struct backend_ops be_azure_ops;
extern const struct config_form be_azure_form;	/* its keys and URLs: config.h */

#define BE_AZURE_VERSION	"2021-08-06"	/* the x-ms-version every request names */
#define BE_AZURE_KEY_MAX	128		/* bytes of a decoded account key */

/* Where a datastore points and how it signs in: built once from its keys. */
struct be_azure_addr {
	char *endpoint;		/* "https://ACCOUNT.blob.core.windows.net", or Azurite's
				 * "http://HOST:PORT/ACCOUNT"; no trailing '/' */
	char *account;
	char *container;
	char *root;		/* a blob name prefix: "" or "a/b/" */
	unsigned char key[BE_AZURE_KEY_MAX];	/* Shared Key, decoded */
	size_t key_len;		/* 0: no Shared Key */
	char *sas;		/* a SAS token without its '?'; NULL: none */
	const char *from;	/* where the credentials came from, for the log */
};

/*
 * Fills @a from @cfg: `endpoint`, `account`, `container`, `root`, one of
 * `key`, `sas`, `connection_string`; where the config is silent,
 * AZURE_STORAGE_CONNECTION_STRING, then AZURE_STORAGE_ACCOUNT with
 * AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN, as the Azure CLI reads them.
 * No credentials at all is anonymous access (a public container).
 * Returns 0, -EBADMSG for an account key (of a connection string or
 * AZURE_STORAGE_KEY) that is not base64, -EINVAL for what else be_azure
 * validate would reject, -ENOMEM.
 * Free with be_azure_addr_free (which wipes the key).
 */
int be_azure_addr_init(struct be_azure_addr *a, const struct datastore_config *cfg);
void be_azure_addr_free(struct be_azure_addr *a);

/* Checks a datastore section offline: "file:line: ..." into @d; 0 or -EINVAL. */
int be_azure_validate(const struct datastore_config *cfg, struct diag *d);

#define BE_AZURE_LIST_MAX	5000	/* entries a listing page holds at most (Azure's rule) */

/* The datastore's list_chunk: 1 to BE_AZURE_LIST_MAX (the most when not given), -1 when bad. */
int be_azure_list_chunk(const struct datastore_config *cfg);

/*
 * Shared Key's string to sign for a request (version 2015-02-21 and later):
 * @method, @url (endpoint, path and query, percent-encoded), the request's
 * headers ("Name: value": Content-Length, Content-Type, If-Match and every
 * x-ms-* header, x-ms-date included) and @range ("bytes=A-B" or NULL).
 * The canonicalized resource is "/ACCOUNT" and the URL's path (so Azurite's
 * path-style endpoint names the account twice, as its docs say), then each
 * query parameter, its name lowercased, sorted, "\nname:value" with the
 * value decoded.  Returns a malloc'd string, or NULL on ENOMEM.
 */
char *be_azure_string_to_sign(const char *account, const char *method, const char *url,
			      const char *const *headers, const char *range);

/* "SharedKey ACCOUNT:SIGNATURE" for @to_sign into @out; 0, -EINVAL or -ENOMEM. */
int be_azure_authorization(const struct be_azure_addr *a, const char *to_sign, char *out,
			   size_t size);

/* One entry of a listing page. */
struct be_azure_entry {
	const char *name;	/* the blob's or prefix's full name (a prefix ends in '/') */
	bool is_dir;		/* a BlobPrefix */
	int64_t size;
	time_t mtime;		/* -1: not said */
	const char *etag;	/* "" for a prefix */
};

/* Called per entry; non-zero stops. */
typedef int be_azure_entry_fn(void *arg, const struct be_azure_entry *e);

/*
 * Parses one page of List Blobs (EnumerationResults XML), calling @fn for
 * each Blob and BlobPrefix; the NextMarker (or "") goes to @marker.
 * Returns 0, -EIO for a body that is not such a page, @fn's non-zero answer
 * (negated errno), -ENOMEM.
 */
int be_azure_parse_list(const char *xml, size_t len, be_azure_entry_fn *fn, void *arg,
			char *marker, size_t marker_size);

/* The <Code> and <Message> of an Azure error body, "Code: Message", into @out; 0 or -ENOENT. */
int be_azure_parse_error(const char *xml, size_t len, char *out, size_t size);

#endif
