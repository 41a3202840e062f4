/*
 * be_s3_req.c - how the S3 backend makes a request: where it goes (the
 * address, the URL, the query string), who signs it (the credential chain),
 * which datastore keys are valid, and the few shapes of request the backend
 * sends (HEAD, a listing page, an empty PUT, a copy, a DELETE), each with
 * its failure turned into an errno in one place (be_s3_fail).
 *
 * URLs and query strings are built here, not by curl: SigV4 in curl 7.88
 * signs the query as given, so pairs are sorted by name and both halves
 * percent-encoded ('/' as %2F).  Credentials are read in the order the AWS
 * tools use (config, environment, credentials file) and never logged; the
 * secret is wiped before it is freed.
 *
 * Not here: the retries, timeouts, curl handles and signing themselves
 * (remote.c); parsing the XML answers (be_s3_xml.c); what the answers mean
 * to the filesystem (be_s3.c); uploads (be_s3_upload.c).
 *
 * Threading: the address and credentials are built once, at create, and
 * only read afterwards; the request helpers share nothing but the remote
 * handle, which is thread-safe, and the two log-once flags, which are
 * atomics.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "be_s3_int.h"
#include "ini.h"
#include "log.h"
#include "path.h"
#include "remote.h"

#define BE_S3_LIST_MAX_BODY	(16u << 20)

/* ---- addresses, URLs and query strings ---- */

static bool be_s3_endpoint_ok(const char *e)
{
	const char *host;

	if (strncmp(e, "http://", 7) == 0)
		host = e + 7;
	else if (strncmp(e, "https://", 8) == 0)
		host = e + 8;
	else
		return false;
	if (*host == '\0' || *host == '/' || *host == ':')
		return false;
	for (const char *p = e; *p; p++)
		if (*p == '?' || *p == '#' || *p == '@' || isspace((unsigned char)*p) ||
		    (unsigned char)*p < 0x20)
			return false;
	return true;
}

static bool be_s3_region_ok(const char *r)
{
	if (*r == '\0')
		return false;
	for (; *r; r++)
		if (!islower((unsigned char)*r) && !isdigit((unsigned char)*r) && *r != '-')
			return false;
	return true;
}

static const char *be_s3_env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static const struct be_s3_dialect be_s3_aws = {
	.type = "s3",
	.endpoint_env = "AWS_ENDPOINT_URL",
	.region = "us-east-1",
	.region_env = true,
	.id_env = "AWS_ACCESS_KEY_ID",
	.secret_env = "AWS_SECRET_ACCESS_KEY",
	.token_env = "AWS_SESSION_TOKEN",
	.file_env = "AWS_SHARED_CREDENTIALS_FILE",
	.file_home = ".aws/credentials",
	.file_id = "aws_access_key_id",
	.file_secret = "aws_secret_access_key",
	.file_token = "aws_session_token",
};

/* GCS's XML API: SigV4 with HMAC keys, region "auto", either addressing (path-style here). */
static const struct be_s3_dialect be_s3_gcs = {
	.type = "gcs",
	.endpoint = "https://storage.googleapis.com",
	.region = "auto",
	.path_style = true,
	.id_env = "GCS_ACCESS_KEY_ID",
	.secret_env = "GCS_SECRET_ACCESS_KEY",
	.file_env = "BOTO_CONFIG",
	.file_home = ".boto",
	.file_section = "Credentials",
	.file_id = "gs_access_key_id",
	.file_secret = "gs_secret_access_key",
};

const struct be_s3_dialect *be_s3_dialect_of(const struct datastore_config *cfg)
{
	return cfg->type && strcmp(cfg->type, "gcs") == 0 ? &be_s3_gcs : &be_s3_aws;
}

/*
 * Where the config is silent, the endpoint comes from AWS_ENDPOINT_URL, as
 * the AWS SDKs and CLI do, so an s3:// source with no configured datastore
 * of its bucket can point at MinIO or a test server; else AWS itself.
 */
int be_s3_addr_init(struct be_s3_addr *a, const struct datastore_config *cfg)
{
	const struct be_s3_dialect *dialect = be_s3_dialect_of(cfg);
	const char *endpoint = config_get(cfg, "endpoint", NULL);
	const char *region = config_get(cfg, "region", NULL);
	const char *ps = config_get(cfg, "path_style", NULL);
	const char *bucket = config_get(cfg, "bucket", NULL);
	int style;

	memset(a, 0, sizeof(*a));
	if (!endpoint && dialect->endpoint_env)
		endpoint = be_s3_env(dialect->endpoint_env);
	if (!region && dialect->region_env)
		region = be_s3_env("AWS_REGION");
	if (!region && dialect->region_env)
		region = be_s3_env("AWS_DEFAULT_REGION");
	style = ps ? config_parse_bool(ps) : endpoint != NULL || dialect->path_style;
	if (!endpoint)
		endpoint = dialect->endpoint;
	if (!bucket || !*bucket || strchr(bucket, '/') || style < 0 ||
	    (endpoint && !be_s3_endpoint_ok(endpoint)) || (region && !be_s3_region_ok(region)))
		return -EINVAL;
	a->region = strdup(region ? region : dialect->region);
	if (endpoint)
		a->endpoint = strdup(endpoint);
	else if (a->region && asprintf(&a->endpoint, "https://s3.%s.amazonaws.com", a->region) < 0)
		a->endpoint = NULL;
	a->bucket = strdup(bucket);
	a->root = path_key_prefix(config_get(cfg, "root", NULL));
	a->path_style = style == 1;
	if (!a->region || !a->endpoint || !a->bucket || !a->root) {
		be_s3_addr_free(a);
		return -ENOMEM;
	}
	while (a->endpoint[strlen(a->endpoint) - 1] == '/')
		a->endpoint[strlen(a->endpoint) - 1] = '\0';
	return 0;
}

void be_s3_addr_free(struct be_s3_addr *a)
{
	free(a->endpoint);
	free(a->bucket);
	free(a->root);
	free(a->region);
	memset(a, 0, sizeof(*a));
}

char *be_s3_url(const struct be_s3_addr *a, const char *key, const char *query)
{
	const char *host = strstr(a->endpoint, "://") + 3;
	int scheme_len = (int)(host - a->endpoint);
	char *ekey = remote_escape(key ? key : "", true);
	char *url = NULL;
	int ret;

	if (!ekey)
		return NULL;
	if (a->path_style)
		ret = asprintf(&url, "%s/%s%s%s%s%s", a->endpoint, a->bucket, key ? "/" : "",
			       ekey, query ? "?" : "", query ? query : "");
	else
		ret = asprintf(&url, "%.*s%s.%s/%s%s%s", scheme_len, a->endpoint, a->bucket, host,
			       ekey, query ? "?" : "", query ? query : "");
	free(ekey);
	return ret < 0 ? NULL : url;
}

static int be_s3_pair_cmp(const void *x, const void *y)
{
	const char *const *a = x, *const *b = y;

	return strcmp(a[0], b[0]);
}

char *be_s3_query(const char *const *pairs)
{
	size_t n = 0, len = 1, done = 0;
	const char **sorted;
	char **esc, *out = NULL, *p;

	while (pairs[2 * n])
		n++;
	sorted = malloc((2 * n + 1) * sizeof(*sorted));
	esc = calloc(2 * n + 1, sizeof(*esc));
	if (!sorted || !esc)
		goto out;
	memcpy(sorted, pairs, 2 * n * sizeof(*sorted));
	qsort(sorted, n, 2 * sizeof(*sorted), be_s3_pair_cmp);
	for (; done < 2 * n; done++) {
		esc[done] = remote_escape(sorted[done] ? sorted[done] : "", false);
		if (!esc[done])
			goto out;
		len += strlen(esc[done]) + 1;
	}
	out = malloc(len);
	p = out;
	for (size_t i = 0; out && i < n; i++)
		p += sprintf(p, "%s%s=%s", i ? "&" : "", esc[2 * i], esc[2 * i + 1]);
	if (out)
		*p = '\0';
out:
	for (size_t i = 0; esc && i < done; i++)
		free(esc[i]);
	free(esc);
	free(sorted);
	return out;
}

/* ---- credentials ---- */

struct be_s3_profile {
	const struct be_s3_dialect *dialect;	/* the keys to read */
	const char *want;	/* the profile's (or section's) name */
	bool in;		/* inside its section */
	bool found;
	struct be_s3_creds *c;
	bool nomem;
};

static void be_s3_set(char **dst, const char *value, bool *nomem)
{
	free(*dst);
	*dst = strdup(value);
	if (!*dst)
		*nomem = true;
}

/* Reads [NAME] (or [profile NAME]) of a credentials file; a boto file's [Credentials]. */
static int be_s3_on_ini(void *payload, const struct ini_event *ev)
{
	struct be_s3_profile *p = payload;
	const struct be_s3_dialect *dl = p->dialect;

	if (ev->kind == INI_SECTION) {
		const char *s = ev->section;

		if (!dl->file_section && strncmp(s, "profile ", 8) == 0)
			s += 8 + strspn(s + 8, " \t");
		p->in = strcmp(s, p->want) == 0;
		p->found |= p->in;
	} else if (ev->kind == INI_KEY && p->in) {
		if (strcmp(ev->key, dl->file_id) == 0)
			be_s3_set(&p->c->key_id, ev->value, &p->nomem);
		else if (strcmp(ev->key, dl->file_secret) == 0)
			be_s3_set(&p->c->secret, ev->value, &p->nomem);
		else if (dl->file_token && strcmp(ev->key, dl->file_token) == 0)
			be_s3_set(&p->c->token, ev->value, &p->nomem);
	}
	return 0;
}

static int be_s3_read_all(int fd, char **out, size_t *len)
{
	size_t cap = 4096;
	char *buf = malloc(cap);
	ssize_t n;

	*len = 0;
	while (buf && (n = read(fd, buf + *len, cap - *len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return -errno;
		}
		*len += (size_t)n;
		if (*len == cap) {
			char *more = cap < (1u << 20) ? realloc(buf, cap *= 2) : NULL;

			if (!more)
				free(buf);
			buf = more;
		}
	}
	*out = buf;
	return buf ? 0 : -ENOMEM;
}

/* The credentials file's path: AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials (s3). */
static char *be_s3_creds_path(const struct be_s3_dialect *dl)
{
	const char *env = be_s3_env(dl->file_env);
	const char *home = be_s3_env("HOME");
	char *path;

	if (env)
		return strdup(env);
	if (!home)
		return NULL;
	return asprintf(&path, "%s/%s", home, dl->file_home) < 0 ? NULL : path;
}

/*
 * Reads @profile from the credentials file.  A missing file is no error
 * (anonymous access follows) unless the profile was asked for by name.
 */
static int be_s3_creds_file(struct be_s3_creds *c, const struct be_s3_dialect *dl,
			    const char *profile, bool named)
{
	struct be_s3_profile p = { .dialect = dl, .want = profile, .c = c };
	char *path = be_s3_creds_path(dl), *text = NULL;
	struct stat st;
	size_t len;
	int fd, ret;

	fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0) {
		free(path);
		return named ? -ENOENT : 0;
	}
	if (fstat(fd, &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH | S_IWGRP | S_IWOTH))) {
		log_err("%s: others can read or change this credentials file: refused "
			"(chmod 600 it)", path);
		ret = -EACCES;
	} else {
		ret = be_s3_read_all(fd, &text, &len);
		if (ret == 0) {
			ret = ini_parse(text, len, be_s3_on_ini, &p);
			free(text);
		}
	}
	close(fd);
	free(path);
	if (ret == 0 && p.nomem)
		ret = -ENOMEM;
	if (ret == 0 && named && !p.found)
		ret = -ENOENT;
	if (ret == 0 && (!c->key_id || !c->secret))
		be_s3_creds_free(c);	/* half a pair is no pair: anonymous */
	if (ret == 0 && c->key_id)
		c->from = "credentials file";
	return ret;
}

static int be_s3_creds_pair(struct be_s3_creds *c, const char *id, const char *secret,
			    const char *token, const char *from)
{
	c->key_id = strdup(id);
	c->secret = strdup(secret);
	c->token = token ? strdup(token) : NULL;
	c->from = from;
	if (!c->key_id || !c->secret || (token && !c->token)) {
		be_s3_creds_free(c);
		return -ENOMEM;
	}
	return 0;
}

/*
 * The order is config, environment, file.  A `profile` key in the config is
 * the config speaking: it goes straight to the file, whatever the
 * environment holds.
 */
int be_s3_creds_find(struct be_s3_creds *c, const struct datastore_config *cfg)
{
	const struct be_s3_dialect *dl = be_s3_dialect_of(cfg);
	const char *id = config_get(cfg, "access_key_id", NULL);
	const char *secret = config_get(cfg, "secret_access_key", NULL);
	const char *token = config_get(cfg, "session_token", NULL);
	const char *profile = config_get(cfg, "profile", NULL);
	bool named = profile != NULL;
	int ret;

	memset(c, 0, sizeof(*c));
	c->from = "none";
	if (id && secret)
		return be_s3_creds_pair(c, id, secret, token, "config");
	if (id || secret)
		return -EINVAL;
	if (!profile && be_s3_env(dl->id_env) && be_s3_env(dl->secret_env))
		return be_s3_creds_pair(c, be_s3_env(dl->id_env), be_s3_env(dl->secret_env),
					dl->token_env ? be_s3_env(dl->token_env) : NULL,
					"environment");
	if (dl->file_section) {
		profile = dl->file_section;	/* a boto file keeps its keys in one section */
	} else {
		if (!profile)
			profile = be_s3_env("AWS_PROFILE");
		named |= profile != NULL;
	}
	ret = be_s3_creds_file(c, dl, profile ? profile : "default", named);
	if (ret < 0)
		be_s3_creds_free(c);
	return ret;
}

void be_s3_creds_free(struct be_s3_creds *c)
{
	/* Wipe the secret before freeing; it never reaches a log either. */
	if (c->secret)
		explicit_bzero(c->secret, strlen(c->secret));
	if (c->token)
		explicit_bzero(c->token, strlen(c->token));
	free(c->key_id);
	free(c->secret);
	free(c->token);
	c->key_id = c->secret = c->token = NULL;
	c->from = "none";
}

/* ---- a datastore's keys ---- */

static void be_s3_validate_keys(const struct datastore_config *cfg, struct diag *d)
{
	const char *ep_env = be_s3_dialect_of(cfg)->endpoint_env;
	int line = cfg->line;
	const char *v;

	v = config_get(cfg, "bucket", &line);
	if (!v || !*v)
		diag_add(d, cfg->file, cfg->line, "[datastore %s] bucket: missing (the bucket's name)",
			 cfg->name);
	else if (strchr(v, '/'))
		diag_add(d, cfg->file, line, "[datastore %s] bucket: '%s' is not a bucket name "
			 "(a folder inside it goes in root)", cfg->name, v);
	if ((v = config_get(cfg, "endpoint", &line)) && !be_s3_endpoint_ok(v))
		diag_add(d, cfg->file, line, "[datastore %s] endpoint: '%s' is not an http:// or "
			 "https:// URL of a server", cfg->name, v);
	else if (!v && ep_env && be_s3_env(ep_env) && !be_s3_endpoint_ok(be_s3_env(ep_env)))
		diag_add(d, cfg->file, cfg->line, "[datastore %s] endpoint: %s is not an http:// "
			 "or https:// URL of a server", cfg->name, ep_env);
	if ((v = config_get(cfg, "path_style", &line)) && config_parse_bool(v) < 0)
		diag_add(d, cfg->file, line, "[datastore %s] path_style: '%s' is not true or false",
			 cfg->name, v);
	if ((v = config_get(cfg, "region", &line)) && !be_s3_region_ok(v))
		diag_add(d, cfg->file, line, "[datastore %s] region: '%s' is not a region name "
			 "(lowercase letters, digits and '-', like us-east-1)", cfg->name, v);
}

int be_s3_validate(const struct datastore_config *cfg, struct diag *d)
{
	size_t before = d->n;
	int id_line = cfg->line, secret_line = cfg->line;
	const char *id = config_get(cfg, "access_key_id", &id_line);
	const char *secret = config_get(cfg, "secret_access_key", &secret_line);

	be_s3_validate_keys(cfg, d);
	if (id && !secret)
		diag_add(d, cfg->file, id_line, "[datastore %s] access_key_id: given without "
			 "secret_access_key", cfg->name);
	if (secret && !id)
		diag_add(d, cfg->file, secret_line, "[datastore %s] secret_access_key: given "
			 "without access_key_id", cfg->name);
	return d->n > before ? -EINVAL : 0;
}

/* ---- errors ---- */

static bool be_s3_is_cred_code(const char *code)
{
	static const char *const codes[] = { "InvalidAccessKeyId", "SignatureDoesNotMatch",
		"AccessDenied", "InvalidToken", "ExpiredToken", "TokenRefreshRequired", NULL };

	for (size_t i = 0; codes[i]; i++)
		if (strcmp(code, codes[i]) == 0)
			return true;
	return false;
}

/*
 * Turns a failed request into the errno the caller returns, reading S3's
 * <Code> where the answer had a body, and logs what a user must act on:
 * refused credentials and a missing bucket once per datastore, other
 * failures (not ENOENT) each time.
 */
int be_s3_fail(struct be_s3 *s3, int ret, const struct remote_resp *resp,
	       const char *what, const char *key)
{
	char code[64] = "";

	if (resp->body)
		be_s3_parse_error(resp->body, resp->body_len, code, sizeof(code));
	if (ret == -EACCES && !*code) {
		/* A HEAD's 403 has no body to say why: the next listing will. */
		log_debug("datastore %s: %s %s: HTTP 403", s3->base.name, what, key ? key : "/");
		return -EACCES;
	}
	if (be_s3_is_cred_code(code) || ret == -EACCES) {
		if (!atomic_exchange(&s3->creds_logged, true))
			log_err("datastore %s: bucket %s refused the request (%s): check the "
				"credentials (access_key_id, secret_access_key, session_token or "
				"profile; from %s)", s3->base.name, s3->addr.bucket,
				*code ? code : "HTTP 403", s3->creds.from);
		return -EACCES;
	}
	if (strcmp(code, "NoSuchBucket") == 0) {
		if (!atomic_exchange(&s3->bucket_logged, true))
			log_err("datastore %s: no bucket %s at %s", s3->base.name, s3->addr.bucket,
				s3->addr.endpoint);
		return -ENOENT;
	}
	if (strcmp(code, "NoSuchKey") == 0 || strcmp(code, "NoSuchUpload") == 0)
		return -ENOENT;
	if (ret != -ENOENT && ret != -ERANGE)
		log_warn("datastore %s: %s %s: %s (HTTP %ld%s%s)", s3->base.name, what,
			 key && *key ? key : "/", strerror(-ret), resp->status, *code ? ", " : "",
			 code);
	return ret;
}

/* ---- requests ---- */

/* The object key of @path (root included), or the folder prefix with @dir ("" for the root). */
char *be_s3_key(struct be_s3 *s3, const char *path, bool dir)
{
	char *key;

	if (dir && !*path)
		return strdup(s3->addr.root);
	return asprintf(&key, "%s%s%s", s3->addr.root, path, dir ? "/" : "") < 0 ? NULL : key;
}

/* One request on object @key (NULL: the bucket) with @query pairs (NULL: none). */
int be_s3_do(struct be_s3 *s3, struct remote_req *req, const char *key,
	     const char *const *query, struct remote_resp *resp)
{
	char *q = query ? be_s3_query(query) : NULL;
	char *url = (q || !query) ? be_s3_url(&s3->addr, key, q) : NULL;
	int ret;

	memset(resp, 0, sizeof(*resp));
	free(q);
	if (!url)
		return -ENOMEM;
	req->url = url;
	ret = remote_do(s3->remote, req, resp);
	req->url = NULL;
	free(url);
	return ret;
}

/* A request whose answer only matters as success or failure. */
int be_s3_simple(struct be_s3 *s3, enum remote_method method, const char *key,
		 const char *const *query, const char *const *headers, const char *what)
{
	struct remote_req req = { .method = method, .headers = headers, .body_fd = -1,
		.max_body = 1 << 20 };
	struct remote_resp resp;
	int ret = be_s3_do(s3, &req, key, query, &resp);

	if (ret < 0)
		ret = be_s3_fail(s3, ret, &resp, what, key);
	remote_resp_free(&resp);
	return ret;
}

/* HEAD of @key into @o (etag copied to @etag). */
int be_s3_head(struct be_s3 *s3, const char *key, struct be_s3_obj *o, char *etag,
	       size_t etag_size)
{
	struct remote_req req = { .method = REMOTE_HEAD, .body_fd = -1 };
	struct remote_resp resp;
	int ret = be_s3_do(s3, &req, key, NULL, &resp);

	if (ret == 0) {
		snprintf(etag, etag_size, "%s", resp.etag);
		*o = (struct be_s3_obj){ .size = resp.content_length < 0 ? 0 : resp.content_length,
			.mtime = resp.last_modified < 0 ? 0 : resp.last_modified, .etag = etag };
	} else {
		ret = be_s3_fail(s3, ret, &resp, "HEAD", key);
	}
	remote_resp_free(&resp);
	return ret;
}

/* One page of ListObjectsV2 after @token (NULL: the first); *next gets the next token. */
static int be_s3_list_page(struct be_s3 *s3, struct be_s3_list *l, const char *token,
			   char **next)
{
	const char *q[12] = { "list-type", "2", "prefix", l->prefix, "max-keys", l->max_keys };
	struct remote_req req = { .method = REMOTE_GET, .body_fd = -1,
		.max_body = BE_S3_LIST_MAX_BODY };
	struct remote_resp resp;
	struct be_s3_page page;
	size_t n = 6;
	int ret;

	if (l->delimiter) {
		q[n++] = "delimiter";
		q[n++] = "/";
	}
	if (token) {
		q[n++] = "continuation-token";
		q[n++] = token;
	}
	ret = be_s3_do(s3, &req, NULL, q, &resp);
	if (ret < 0) {
		ret = be_s3_fail(s3, ret, &resp, "list", l->prefix);
	} else {
		ret = be_s3_parse_list(resp.body, resp.body_len, l->prefix, l->fn, l->arg, &page);
		l->n_keys += page.n_keys;
		*next = page.truncated ? page.next_token : NULL;
		if (!page.truncated)
			free(page.next_token);
		if (ret == -EIO)
			log_warn("datastore %s: list %s: the answer is not a listing",
				 s3->base.name, l->prefix);
	}
	remote_resp_free(&resp);
	return ret;
}

/* Lists @l->prefix to the end, page by page; each page goes to @l->fn as it comes. */
int be_s3_list(struct be_s3 *s3, struct be_s3_list *l)
{
	char *token = NULL, *next = NULL;
	int ret;

	do {
		ret = be_s3_list_page(s3, l, token, &next);
		free(token);
		token = next;
		next = NULL;
	} while (ret == 0 && token);
	free(token);
	return ret;
}

static int be_s3_count_entry(void *arg, const char *name, const struct be_s3_obj *o)
{
	(void)arg;
	(void)name;
	(void)o;
	return 0;
}

/* How many keys (up to @max, a few) lie beneath folder @path, its marker included. */
int be_s3_count_beneath(struct be_s3 *s3, const char *path, const char *max,
			unsigned int *count)
{
	char *prefix = be_s3_key(s3, path, true);
	struct be_s3_list l = { .prefix = prefix, .max_keys = max, .fn = be_s3_count_entry };
	char *next = NULL;
	int ret;

	if (!prefix)
		return -ENOMEM;
	ret = be_s3_list_page(s3, &l, NULL, &next);
	free(next);
	free(prefix);
	*count = l.n_keys;
	return ret;
}

int be_s3_put(struct be_s3 *s3, const char *key, int fd, size_t size)
{
	struct remote_req req = { .method = REMOTE_PUT, .body = size ? NULL : "", .body_fd = fd,
		.body_len = size, .max_body = 1 << 20 };
	struct remote_resp resp;
	int ret = be_s3_do(s3, &req, key, NULL, &resp);

	if (ret < 0)
		ret = be_s3_fail(s3, ret, &resp, "PUT", key);
	remote_resp_free(&resp);
	return ret;
}

/* A server-side copy of @from to @to; a 200 may still carry an <Error>. */
int be_s3_copy(struct be_s3 *s3, const char *from, const char *to)
{
	char *src = remote_escape(from, true), *header = NULL;
	const char *headers[] = { NULL, NULL };
	struct remote_req req = { .method = REMOTE_PUT, .headers = headers, .body = "",
		.body_fd = -1, .max_body = 1 << 20 };
	struct remote_resp resp;
	char code[64];
	int ret = -ENOMEM;

	if (src && asprintf(&header, "x-amz-copy-source: /%s/%s", s3->addr.bucket, src) >= 0) {
		headers[0] = header;
		ret = be_s3_do(s3, &req, to, NULL, &resp);
		if (ret == 0 && resp.body && be_s3_parse_error(resp.body, resp.body_len, code,
							       sizeof(code)) == 0)
			ret = -EIO;
		if (ret < 0)
			ret = be_s3_fail(s3, ret, &resp, "copy to", to);
		remote_resp_free(&resp);
	} else {
		header = NULL;
	}
	free(header);
	free(src);
	return ret;
}
