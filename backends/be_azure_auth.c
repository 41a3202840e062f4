/*
 * be_azure_auth.c - where an Azure Blob datastore points and how it signs
 * in (be_azure.h): its keys, the Azure CLI's environment
 * (AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY,
 * AZURE_STORAGE_SAS_TOKEN), connection strings, and Shared Key's signature
 * (HMAC-SHA256 with OpenSSL).  A key or token is never logged; the decoded
 * key is wiped when the datastore goes.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "be_azure.h"
#include "path.h"

static const char *be_azure_env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* The value of @key in connection string @cs ("K=V;K=V"), malloc'd, or NULL. */
static char *be_azure_cs_get(const char *cs, const char *key)
{
	size_t klen = strlen(key);

	for (const char *p = cs; p && *p; p = strchr(p, ';') ? strchr(p, ';') + 1 : NULL) {
		while (*p == ' ')
			p++;
		if (strncasecmp(p, key, klen) == 0 && p[klen] == '=')
			return strndup(p + klen + 1, strcspn(p + klen + 1, ";"));
	}
	return NULL;
}

/* A base64 key decoded into @a->key; -EINVAL when it is not base64 of 1..128 bytes. */
static int be_azure_set_key(struct be_azure_addr *a, const char *b64)
{
	size_t len = strlen(b64), pad = 0;
	unsigned char buf[BE_AZURE_KEY_MAX + 3];
	int n;

	if (len == 0 || len % 4 || len / 4 * 3 > sizeof(buf))
		return -EINVAL;
	n = EVP_DecodeBlock(buf, (const unsigned char *)b64, (int)len);
	if (n < 0)
		return -EINVAL;
	pad = (len >= 1 && b64[len - 1] == '=') + (len >= 2 && b64[len - 2] == '=');
	n -= (int)pad;
	if (n <= 0 || (size_t)n > BE_AZURE_KEY_MAX)
		return -EINVAL;
	memcpy(a->key, buf, (size_t)n);
	a->key_len = (size_t)n;
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

/* Where the credentials are: the section's own keys, else the environment. */
struct be_azure_src {
	const char *key, *sas, *cs;
	const char *from;
};

static void be_azure_find_src(const struct datastore_config *cfg, struct be_azure_src *s)
{
	*s = (struct be_azure_src){ .key = config_get(cfg, "key", NULL),
				    .sas = config_get(cfg, "sas", NULL),
				    .cs = config_get(cfg, "connection_string", NULL),
				    .from = "config" };
	if (s->key || s->sas || s->cs)
		return;
	s->from = "environment";
	s->cs = be_azure_env("AZURE_STORAGE_CONNECTION_STRING");
	if (s->cs)
		return;
	s->key = be_azure_env("AZURE_STORAGE_KEY");
	s->sas = be_azure_env("AZURE_STORAGE_SAS_TOKEN");
	if (!s->key && !s->sas)
		s->from = "none (anonymous)";
}

/* The endpoint a connection string names: BlobEndpoint, else PROTOCOL://ACCOUNT.blob.SUFFIX. */
static char *be_azure_cs_endpoint(const char *cs, const char *account)
{
	char *ep = be_azure_cs_get(cs, "BlobEndpoint"), *proto, *suffix;

	if (ep || !account)
		return ep;
	proto = be_azure_cs_get(cs, "DefaultEndpointsProtocol");
	suffix = be_azure_cs_get(cs, "EndpointSuffix");
	if (asprintf(&ep, "%s://%s.blob.%s", proto ? proto : "https", account,
		     suffix ? suffix : "core.windows.net") < 0)
		ep = NULL;
	free(proto);
	free(suffix);
	return ep;
}

/* Account, endpoint and secrets from a connection string. */
static int be_azure_from_cs(struct be_azure_addr *a, const char *cs)
{
	char *key = be_azure_cs_get(cs, "AccountKey"), *sas = be_azure_cs_get(cs, "SharedAccessSignature");
	int ret = 0;

	if (!a->account)
		a->account = be_azure_cs_get(cs, "AccountName");
	if (!a->endpoint)
		a->endpoint = be_azure_cs_endpoint(cs, a->account);
	if (key)
		ret = be_azure_set_key(a, key);
	else if (sas)
		a->sas = strdup(sas[0] == '?' ? sas + 1 : sas);
	if (key)
		explicit_bzero(key, strlen(key));
	free(key);
	free(sas);
	return ret;
}

/* The account of an endpoint https://ACCOUNT.blob.core.windows.net (or any ACCOUNT.blob.HOST). */
static char *be_azure_account_of(const char *endpoint)
{
	const char *host = strstr(endpoint, "://"), *dot;

	if (!host)
		return NULL;
	host += 3;
	dot = strstr(host, ".blob.");
	if (!dot || dot == host || memchr(host, '/', (size_t)(dot - host)))
		return NULL;
	return strndup(host, (size_t)(dot - host));
}

/* The secrets of @s into @a: 0, -EBADMSG for an account key that is not base64, -ENOMEM. */
static int be_azure_secrets(struct be_azure_addr *a, const struct be_azure_src *s)
{
	int ret;

	if (s->cs || s->key) {
		ret = s->cs ? be_azure_from_cs(a, s->cs) : be_azure_set_key(a, s->key);
		return ret == -EINVAL ? -EBADMSG : ret;
	}
	if (s->sas && !(a->sas = strdup(s->sas[0] == '?' ? s->sas + 1 : s->sas)))
		return -ENOMEM;
	return 0;
}

int be_azure_addr_init(struct be_azure_addr *a, const struct datastore_config *cfg)
{
	const char *endpoint = config_get(cfg, "endpoint", NULL);
	const char *account = config_get(cfg, "account", NULL);
	const char *container = config_get(cfg, "container", NULL);
	struct be_azure_src src;
	int ret;

	memset(a, 0, sizeof(*a));
	be_azure_find_src(cfg, &src);
	a->from = src.from;
	if (!container || !*container || strchr(container, '/'))
		return -EINVAL;
	a->container = strdup(container);
	a->root = path_key_prefix(config_get(cfg, "root", NULL));
	a->account = account ? strdup(account) :
		     !src.cs && be_azure_env("AZURE_STORAGE_ACCOUNT") ?
		     strdup(be_azure_env("AZURE_STORAGE_ACCOUNT")) : NULL;
	a->endpoint = endpoint ? strdup(endpoint) : NULL;
	ret = a->container && a->root ? be_azure_secrets(a, &src) : -ENOMEM;
	if (ret == 0 && !a->account && a->endpoint)
		a->account = be_azure_account_of(a->endpoint);
	if (ret == 0 && !a->endpoint && a->account &&
	    asprintf(&a->endpoint, "https://%s.blob.core.windows.net", a->account) < 0)
		a->endpoint = NULL;
	if (ret == 0 && (!a->account || !a->endpoint || !strstr(a->endpoint, "://")))
		ret = -EINVAL;	/* no account named anywhere */
	if (ret < 0) {
		be_azure_addr_free(a);
		return ret;
	}
	while (a->endpoint[strlen(a->endpoint) - 1] == '/')
		a->endpoint[strlen(a->endpoint) - 1] = '\0';
	return 0;
}

void be_azure_addr_free(struct be_azure_addr *a)
{
	explicit_bzero(a->key, sizeof(a->key));
	if (a->sas)
		explicit_bzero(a->sas, strlen(a->sas));
	free(a->endpoint);
	free(a->account);
	free(a->container);
	free(a->root);
	free(a->sas);
	memset(a, 0, sizeof(*a));
}

/* ---- the section's keys, offline ---- */

int be_azure_list_chunk(const struct datastore_config *cfg)
{
	const char *v = config_get(cfg, "list_chunk", NULL);
	char *end;
	long n;

	if (!v)
		return BE_AZURE_LIST_MAX;
	if (!isdigit((unsigned char)v[0]))	/* strtol takes a sign and blanks first */
		return -1;
	errno = 0;
	n = strtol(v, &end, 10);
	return errno || *end || n < 1 || n > BE_AZURE_LIST_MAX ? -1 : (int)n;
}

int be_azure_validate(const struct datastore_config *cfg, struct diag *d)
{
	size_t before = d->n;
	int line = cfg->line, kline = cfg->line;
	const char *v = config_get(cfg, "container", &line);
	int given = 0;
	struct be_azure_addr a;

	if (!v || !*v)
		diag_add(d, cfg->file, cfg->line, "[datastore %s] container: missing (the "
			 "container's name)", cfg->name);
	else if (strchr(v, '/'))
		diag_add(d, cfg->file, line, "[datastore %s] container: '%s' is not a container "
			 "name (a folder inside it goes in root)", cfg->name, v);
	for (const char *const *k = (const char *const[]){ "key", "sas", "connection_string",
							    NULL }; *k; k++) {
		int l = 0;

		if (config_get(cfg, *k, &l)) {
			given++;
			kline = l;	/* the later one is the one too many */
		}
	}
	if (given > 1)
		diag_add(d, cfg->file, kline, "[datastore %s]: give one of key, sas and "
			 "connection_string", cfg->name);
	if ((v = config_get(cfg, "endpoint", &line)) &&
	    strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
		diag_add(d, cfg->file, line, "[datastore %s] endpoint: '%s' is not an http:// or "
			 "https:// URL", cfg->name, v);
	if ((v = config_get(cfg, "list_chunk", &line)) && be_azure_list_chunk(cfg) < 0)
		diag_add(d, cfg->file, line, "[datastore %s] list_chunk: '%s' is not a whole number "
			 "from 1 to %d (the entries one listing asks for)", cfg->name, v,
			 BE_AZURE_LIST_MAX);
	if ((v = config_get(cfg, "root", &line)) && path_has_dotdot(v))
		diag_add(d, cfg->file, line, "[datastore %s] root: '%s' has a '..' component",
			 cfg->name, v);
	if (d->n > before)
		return -EINVAL;
	if ((v = config_get(cfg, "key", &kline)) && be_azure_set_key(&a, v) < 0) {
		diag_add(d, cfg->file, kline, "[datastore %s] key: not a base64 account key",
			 cfg->name);
	} else {
		struct be_azure_src src;
		int ret = be_azure_addr_init(&a, cfg);

		be_azure_find_src(cfg, &src);
		if (ret == -EBADMSG)
			diag_add(d, cfg->file, cfg->line, "[datastore %s]: the AccountKey of %s is "
				 "not a base64 account key", cfg->name,
				 !src.cs ? "AZURE_STORAGE_KEY" : strcmp(src.from, "config") == 0 ?
				 "connection_string" : "AZURE_STORAGE_CONNECTION_STRING");
		else if (ret == -EINVAL)
			diag_add(d, cfg->file, cfg->line, "[datastore %s]: no account: set account, "
				 "an endpoint https://ACCOUNT.blob.core.windows.net, a "
				 "connection_string or AZURE_STORAGE_ACCOUNT", cfg->name);
		else if (ret == 0)
			be_azure_addr_free(&a);
	}
	explicit_bzero(&a, sizeof(a));
	return d->n > before ? -EINVAL : 0;
}

/* ---- Shared Key ---- */

static int be_azure_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Appends @s to the growing string *@buf; false on ENOMEM. */
static bool be_azure_cat(char **buf, size_t *len, const char *s, size_t n)
{
	char *more = realloc(*buf, *len + n + 1);

	if (!more)
		return false;
	memcpy(more + *len, s, n);
	*len += n;
	more[*len] = '\0';
	*buf = more;
	return true;
}

/* The value of header @name in @headers, trimmed, or "". */
static void be_azure_header(const char *const *headers, const char *name, char *out, size_t size)
{
	size_t nlen = strlen(name);

	out[0] = '\0';
	for (; headers && *headers; headers++)
		if (strncasecmp(*headers, name, nlen) == 0 && (*headers)[nlen] == ':') {
			const char *v = *headers + nlen + 1;

			v += strspn(v, " \t");
			snprintf(out, size, "%s", v);
			return;
		}
}

/* The x-ms-* headers, "name:value" lowercased names, sorted, each with '\n'. */
static bool be_azure_ms_headers(const char *const *headers, char **buf, size_t *len)
{
	char *lines[32];
	size_t n = 0;
	bool ok = true;

	for (; headers && *headers && n < 32; headers++) {
		const char *h = *headers, *colon = strchr(h, ':'), *v;

		if (strncasecmp(h, "x-ms-", 5) != 0 || !colon)
			continue;
		v = colon + 1 + strspn(colon + 1, " \t");
		if (asprintf(&lines[n], "%.*s:%s\n", (int)(colon - h), h, v) < 0)
			return false;
		for (char *c = lines[n]; *c != ':'; c++)
			*c = (char)tolower((unsigned char)*c);
		n++;
	}
	qsort(lines, n, sizeof(lines[0]), be_azure_cmp);
	for (size_t i = 0; i < n; i++) {
		ok = ok && be_azure_cat(buf, len, lines[i], strlen(lines[i]));
		free(lines[i]);
	}
	return ok;
}

/* @s (@n bytes) percent-decoded, in a new string; NULL on ENOMEM. */
static char *be_azure_decode(const char *s, size_t n)
{
	char *out = malloc(n + 1), *o = out;

	for (size_t i = 0; out && i < n; i++) {
		if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
		    isxdigit((unsigned char)s[i + 2])) {
			char hex[3] = { s[i + 1], s[i + 2], 0 };

			*o++ = (char)strtol(hex, NULL, 16);
			i += 2;
		} else {
			*o++ = s[i];
		}
	}
	if (out)
		*o = '\0';
	return out;
}

/* "\nname:value" for each query parameter, names lowercased, sorted. */
static bool be_azure_query(const char *query, char **buf, size_t *len)
{
	char *lines[32];
	size_t n = 0;
	bool ok = true;

	for (const char *p = query; p && *p && n < 32;) {
		size_t plen = strcspn(p, "&"), nlen = strcspn(p, "=");
		char *name, *value;

		if (nlen > plen)
			nlen = plen;
		name = be_azure_decode(p, nlen);
		value = be_azure_decode(p + nlen + (nlen < plen), plen - nlen - (nlen < plen));
		if (!name || !value || asprintf(&lines[n], "\n%s:%s", name, value) < 0) {
			free(name);
			free(value);
			return false;
		}
		for (char *c = lines[n] + 1; *c != ':'; c++)
			*c = (char)tolower((unsigned char)*c);
		free(name);
		free(value);
		n++;
		p += plen + (p[plen] == '&');
	}
	qsort(lines, n, sizeof(lines[0]), be_azure_cmp);
	for (size_t i = 0; i < n; i++) {
		ok = ok && be_azure_cat(buf, len, lines[i], strlen(lines[i]));
		free(lines[i]);
	}
	return ok;
}

char *be_azure_string_to_sign(const char *account, const char *method, const char *url,
			      const char *const *headers, const char *range)
{
	const char *host = strstr(url, "://"), *path, *query;
	char cl[32], ct[256], im[300], *buf = NULL, *head = NULL;
	size_t len = 0, plen;
	bool ok;

	host = host ? host + 3 : url;
	path = host + strcspn(host, "/?");
	plen = strcspn(path, "?");
	query = path[plen] == '?' ? path + plen + 1 : NULL;
	be_azure_header(headers, "Content-Length", cl, sizeof(cl));
	if (strcmp(cl, "0") == 0)
		cl[0] = '\0';	/* version 2015-02-21 and later: empty for 0 */
	be_azure_header(headers, "Content-Type", ct, sizeof(ct));
	be_azure_header(headers, "If-Match", im, sizeof(im));
	/* VERB, Content-Encoding, -Language, -Length, -MD5, -Type, Date,
	 * If-Modified-Since, If-Match, If-None-Match, If-Unmodified-Since, Range */
	if (asprintf(&head, "%s\n\n\n%s\n\n%s\n\n\n%s\n\n\n%s\n", method, cl, ct, im,
		     range ? range : "") < 0)
		return NULL;
	ok = be_azure_cat(&buf, &len, head, strlen(head)) &&
	     be_azure_ms_headers(headers, &buf, &len) &&
	     be_azure_cat(&buf, &len, "/", 1) &&
	     be_azure_cat(&buf, &len, account, strlen(account)) &&
	     be_azure_cat(&buf, &len, plen ? path : "/", plen ? plen : 1) &&
	     be_azure_query(query, &buf, &len);
	free(head);
	if (!ok) {
		free(buf);
		return NULL;
	}
	return buf;
}

int be_azure_authorization(const struct be_azure_addr *a, const char *to_sign, char *out,
			   size_t size)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
	unsigned int mlen = 0;

	if (!a->key_len)
		return -EINVAL;
	if (!HMAC(EVP_sha256(), a->key, (int)a->key_len, (const unsigned char *)to_sign,
		  strlen(to_sign), mac, &mlen))
		return -ENOMEM;
	EVP_EncodeBlock(b64, mac, (int)mlen);
	if ((size_t)snprintf(out, size, "SharedKey %s:%s", a->account, b64) >= size)
		return -ENAMETOOLONG;
	return 0;
}
