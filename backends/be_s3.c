/*
 * be_s3.c - a datastore that is an S3 bucket (AWS, MinIO, Wasabi, a test server).
 *
 * Every call is one or a few HTTP requests through remote.h, which owns the
 * curl handles, the retries, the timeouts and the SigV4 signing; this file
 * builds the URLs and query strings (sorted and encoded, as curl 7.88's
 * SigV4 needs them), parses S3's XML with libxml2, and maps S3 onto a
 * filesystem:
 *
 *   - a folder is a key prefix ending in '/': listed with ListObjectsV2 and a
 *     delimiter, page by page (each page handed to the caller as it comes,
 *     never the whole listing in memory); mkdir writes an empty "key/"
 *     marker, rmdir removes it when nothing else is beneath;
 *   - stat comes from a listing or a HEAD, remembered in a small bounded
 *     metadata cache (path -> type, size, mtime, ETag) for about a second,
 *     or for the mount's lifetime when the caller opens with BE_O_TRUST;
 *   - reads are ranged GETs with If-Match on the ETag seen at open, so a
 *     file that changes while open fails (ESTALE) instead of mixing versions;
 *   - writes go to a staging file under state_dir/staging and are uploaded
 *     by flush (close(2)), so close reports a failed upload: one PUT below
 *     8 MiB, else a multipart upload whose parts go up in parallel;
 *   - rename of a file is a server-side copy and a delete; folders are not
 *     renamed (EXDEV: mv copies them).
 *
 * S3 has no owners, modes or times to set: chmod and utimes are accepted and
 * do nothing, chown is refused.  Credentials come from the config, the
 * environment or the credentials file (be_s3_creds_find) and are never
 * logged.  Key names S3's XML 1.0 cannot carry are not supported.
 *
 * Threading: the remote handle is thread-safe; the metadata cache and the
 * list of files open for writing each have a mutex, never held across a
 * request.  An open file's fields are fixed at open, except the staged
 * file's generation counters, which are atomics.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "be_s3.h"
#include "ini.h"
#include "log.h"
#include "remote.h"

#define BE_S3_SMALL_PUT		(8u << 20)	/* below: one PUT; else multipart */
#define BE_S3_MAX_PARTS		9000u		/* S3 allows 10,000 */
#define BE_S3_ETAG_MAX		256		/* bytes of an ETag, quotes included, as remote.h keeps it */
#define BE_S3_PART_THREADS	4
#define BE_S3_META_BUCKETS	4096u
#define BE_S3_META_MAX		100000u		/* entries before the cache is emptied */
#define BE_S3_META_TTL_NS	1000000000ll	/* a remembered stat is fresh this long */
#define BE_S3_LIST_MAX_BODY	(16u << 20)

/* What the backend remembers of one path. */
struct be_s3_meta {
	struct be_s3_meta *next;
	char *path;
	bool is_dir;
	int64_t size;
	time_t mtime;
	char etag[BE_S3_ETAG_MAX];
	int64_t learned;	/* CLOCK_MONOTONIC, ns */
};

struct be_s3_file;

struct be_s3 {
	struct backend base;
	struct be_s3_addr addr;
	struct be_s3_creds creds;
	char *sigv4;			/* "aws:amz:REGION:s3", or NULL when anonymous */
	char *staging;			/* state_dir/staging */
	struct remote *remote;
	time_t created;			/* folders' mtime */
	atomic_bool creds_logged;	/* the credentials problem was logged */
	atomic_bool bucket_logged;	/* NoSuchBucket was logged */
	pthread_mutex_t meta_lock;
	struct be_s3_meta *meta[BE_S3_META_BUCKETS];	/* meta_lock */
	size_t n_meta;					/* meta_lock */
	pthread_mutex_t writers_lock;
	struct be_s3_file *writers;			/* writers_lock: files open for writing */
};

struct be_s3_file {
	struct backend_file base;
	struct be_s3_file *next;	/* in s3->writers */
	char *path;
	char *key;
	int64_t size;			/* at open; reads stop there */
	time_t mtime;
	char etag[BE_S3_ETAG_MAX];
	int fd;				/* the staging file, or -1 when read-only */
	atomic_uint gen;		/* bumped by every change to the staging file */
	atomic_uint uploaded;		/* the gen that was last uploaded */
};

static struct be_s3 *be_s3(struct backend *be)
{
	return (struct be_s3 *)be;
}

static struct be_s3_file *be_s3_file(struct backend_file *f)
{
	return (struct be_s3_file *)f;
}

static int64_t be_s3_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

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

/* 1 true, 0 false, -1 neither. */
static int be_s3_parse_bool(const char *s)
{
	static const char *const yes[] = { "true", "yes", "on", "1", NULL };
	static const char *const no[] = { "false", "no", "off", "0", NULL };

	for (size_t i = 0; yes[i]; i++) {
		if (strcasecmp(s, yes[i]) == 0)
			return 1;
		if (strcasecmp(s, no[i]) == 0)
			return 0;
	}
	return -1;
}

static const char *be_s3_env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* "" or "a/b/" from a root such as "/a/b", "a/b/" or "/". */
static char *be_s3_root_prefix(const char *root)
{
	size_t len;
	char *out;

	while (root && *root == '/')
		root++;
	if (!root || !*root)
		return strdup("");
	len = strlen(root);
	if (root[len - 1] == '/')
		return strdup(root);
	return asprintf(&out, "%s/", root) < 0 ? NULL : out;
}

/*
 * Where the config is silent, the endpoint comes from AWS_ENDPOINT_URL, as
 * the AWS SDKs and CLI do, so an s3:// source with no configured datastore
 * of its bucket can point at MinIO or a test server; else AWS itself.
 */
int be_s3_addr_init(struct be_s3_addr *a, const struct datastore_config *cfg)
{
	const char *endpoint = config_get(cfg, "endpoint", NULL);
	const char *region = config_get(cfg, "region", NULL);
	const char *ps = config_get(cfg, "path_style", NULL);
	const char *bucket = config_get(cfg, "bucket", NULL);
	int style;

	memset(a, 0, sizeof(*a));
	if (!endpoint)
		endpoint = be_s3_env("AWS_ENDPOINT_URL");
	if (!region)
		region = be_s3_env("AWS_REGION");
	if (!region)
		region = be_s3_env("AWS_DEFAULT_REGION");
	style = ps ? be_s3_parse_bool(ps) : endpoint != NULL;
	if (!bucket || !*bucket || strchr(bucket, '/') || style < 0 ||
	    (endpoint && !be_s3_endpoint_ok(endpoint)) || (region && !be_s3_region_ok(region)))
		return -EINVAL;
	a->region = strdup(region ? region : "us-east-1");
	if (endpoint)
		a->endpoint = strdup(endpoint);
	else if (a->region && asprintf(&a->endpoint, "https://s3.%s.amazonaws.com", a->region) < 0)
		a->endpoint = NULL;
	a->bucket = strdup(bucket);
	a->root = be_s3_root_prefix(config_get(cfg, "root", NULL));
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
	const char *want;	/* the profile's name */
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

/* Reads [NAME] (or [profile NAME]) of a credentials file. */
static int be_s3_on_ini(void *payload, const struct ini_event *ev)
{
	struct be_s3_profile *p = payload;

	if (ev->kind == INI_SECTION) {
		const char *s = ev->section;

		if (strncmp(s, "profile ", 8) == 0)
			s += 8 + strspn(s + 8, " \t");
		p->in = strcmp(s, p->want) == 0;
		p->found |= p->in;
	} else if (ev->kind == INI_KEY && p->in) {
		if (strcmp(ev->key, "aws_access_key_id") == 0)
			be_s3_set(&p->c->key_id, ev->value, &p->nomem);
		else if (strcmp(ev->key, "aws_secret_access_key") == 0)
			be_s3_set(&p->c->secret, ev->value, &p->nomem);
		else if (strcmp(ev->key, "aws_session_token") == 0)
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

/* The credentials file's path: AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials. */
static char *be_s3_creds_path(void)
{
	const char *env = be_s3_env("AWS_SHARED_CREDENTIALS_FILE");
	const char *home = be_s3_env("HOME");
	char *path;

	if (env)
		return strdup(env);
	if (!home)
		return NULL;
	return asprintf(&path, "%s/.aws/credentials", home) < 0 ? NULL : path;
}

/*
 * Reads @profile from the credentials file.  A missing file is no error
 * (anonymous access follows) unless the profile was asked for by name.
 */
static int be_s3_creds_file(struct be_s3_creds *c, const char *profile, bool named)
{
	struct be_s3_profile p = { .want = profile, .c = c };
	char *path = be_s3_creds_path(), *text = NULL;
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
	if (!profile && be_s3_env("AWS_ACCESS_KEY_ID") && be_s3_env("AWS_SECRET_ACCESS_KEY"))
		return be_s3_creds_pair(c, be_s3_env("AWS_ACCESS_KEY_ID"),
					be_s3_env("AWS_SECRET_ACCESS_KEY"),
					be_s3_env("AWS_SESSION_TOKEN"), "environment");
	if (!profile)
		profile = be_s3_env("AWS_PROFILE");
	named |= profile != NULL;
	ret = be_s3_creds_file(c, profile ? profile : "default", named);
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

/* ---- S3's XML ---- */

static xmlDocPtr be_s3_xml_read(const char *xml, size_t len)
{
	if (!xml || len == 0 || len > INT_MAX)
		return NULL;
	/* No network, no entity substitution (the default), no noise on stderr. */
	return xmlReadMemory(xml, (int)len, "s3.xml", NULL,
			     XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
}

static bool be_s3_xml_is(xmlNodePtr n, const char *name)
{
	return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

/* The text of @parent's first child element @name (xmlFree it), or NULL. */
static char *be_s3_xml_text(xmlNodePtr parent, const char *name)
{
	for (xmlNodePtr n = parent->children; n; n = n->next)
		if (be_s3_xml_is(n, name))
			return (char *)xmlNodeGetContent(n);
	return NULL;
}

/* Copies the text of @name in @parent into @buf; "" when absent. */
static void be_s3_xml_copy(xmlNodePtr parent, const char *name, char *buf, size_t size)
{
	char *t = be_s3_xml_text(parent, name);

	snprintf(buf, size, "%s", t ? t : "");
	xmlFree(t);
}

time_t be_s3_parse_time(const char *s)
{
	struct tm tm = { 0 };
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;

	if (!end)
		return -1;
	if (*end == '.')
		end += 1 + strspn(end + 1, "0123456789");
	if (*end != 'Z' && *end != '\0')
		return -1;
	return timegm(&tm);
}

/* The name of a listed @key beneath @prefix, or NULL to skip it; @is_dir strips its '/'. */
static char *be_s3_entry_name(const char *key, const char *prefix, bool is_dir)
{
	size_t plen = strlen(prefix), len;
	char *name;

	if (!key || strncmp(key, prefix, plen) != 0)
		return NULL;
	name = strdup(key + plen);
	if (!name)
		return NULL;
	len = strlen(name);
	if (is_dir && len && name[len - 1] == '/')
		name[--len] = '\0';
	if (len == 0 || len > NAME_MAX || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0) {
		free(name);
		return NULL;
	}
	return name;
}

static int be_s3_parse_entry(xmlNodePtr n, const char *prefix, be_s3_entry_fn *fn, void *arg)
{
	bool is_dir = be_s3_xml_is(n, "CommonPrefixes");
	char *key = be_s3_xml_text(n, is_dir ? "Prefix" : "Key");
	char *name = be_s3_entry_name(key, prefix, is_dir);
	struct be_s3_obj o = { .is_dir = is_dir, .etag = "" };
	char size[32], mtime[64], etag[BE_S3_ETAG_MAX];
	int ret = 0;

	if (name && !is_dir) {
		be_s3_xml_copy(n, "Size", size, sizeof(size));
		be_s3_xml_copy(n, "LastModified", mtime, sizeof(mtime));
		be_s3_xml_copy(n, "ETag", etag, sizeof(etag));
		o.size = strtoll(size, NULL, 10);
		o.mtime = be_s3_parse_time(mtime);
		if (o.mtime < 0)
			o.mtime = 0;
		o.etag = etag;
	}
	if (name)
		ret = fn(arg, name, &o);
	free(name);
	xmlFree(key);
	return ret;
}

int be_s3_parse_list(const char *xml, size_t len, const char *prefix, be_s3_entry_fn *fn,
		     void *arg, struct be_s3_page *page)
{
	xmlDocPtr doc = be_s3_xml_read(xml, len);
	xmlNodePtr root = doc ? xmlDocGetRootElement(doc) : NULL;
	int ret = 0;

	memset(page, 0, sizeof(*page));
	if (!root || !be_s3_xml_is(root, "ListBucketResult")) {
		xmlFreeDoc(doc);
		return -EIO;
	}
	for (xmlNodePtr n = root->children; n && ret == 0; n = n->next) {
		if (be_s3_xml_is(n, "Contents") || be_s3_xml_is(n, "CommonPrefixes")) {
			page->n_keys++;
			ret = be_s3_parse_entry(n, prefix, fn, arg);
		} else if (be_s3_xml_is(n, "IsTruncated")) {
			char *t = (char *)xmlNodeGetContent(n);

			page->truncated = t && strcmp(t, "true") == 0;
			xmlFree(t);
		} else if (be_s3_xml_is(n, "NextContinuationToken") && !page->next_token) {
			char *t = (char *)xmlNodeGetContent(n);

			page->next_token = t && *t ? strdup(t) : NULL;
			xmlFree(t);
		}
	}
	xmlFreeDoc(doc);
	return ret;
}

/* The text of the root's child @name when the root is @root_name. 0 or -ENOENT. */
static int be_s3_xml_field(const char *xml, size_t len, const char *root_name,
			   const char *name, char *buf, size_t size)
{
	xmlDocPtr doc = be_s3_xml_read(xml, len);
	xmlNodePtr root = doc ? xmlDocGetRootElement(doc) : NULL;
	int ret = -ENOENT;

	if (root && be_s3_xml_is(root, root_name)) {
		be_s3_xml_copy(root, name, buf, size);
		ret = *buf ? 0 : -ENOENT;
	}
	xmlFreeDoc(doc);
	return ret;
}

int be_s3_parse_error(const char *xml, size_t len, char *code, size_t size)
{
	return be_s3_xml_field(xml, len, "Error", "Code", code, size);
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
static int be_s3_fail(struct be_s3 *s3, int ret, const struct remote_resp *resp,
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

/* ---- the metadata cache ---- */

static size_t be_s3_hash(const char *s)
{
	size_t h = 5381;

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h % BE_S3_META_BUCKETS;
}

/* meta_lock held: the entry of @path, or NULL. */
static struct be_s3_meta **be_s3_meta_find(struct be_s3 *s3, const char *path)
{
	struct be_s3_meta **pp = &s3->meta[be_s3_hash(path)];

	while (*pp && strcmp((*pp)->path, path) != 0)
		pp = &(*pp)->next;
	return pp;
}

/* meta_lock held: forgets everything (the bound on the cache's size). */
static void be_s3_meta_clear(struct be_s3 *s3)
{
	for (size_t i = 0; i < BE_S3_META_BUCKETS; i++) {
		while (s3->meta[i]) {
			struct be_s3_meta *m = s3->meta[i];

			s3->meta[i] = m->next;
			free(m->path);
			free(m);
		}
	}
	s3->n_meta = 0;
}

/* Remembers @o as what @path is now. */
static void be_s3_meta_put(struct be_s3 *s3, const char *path, const struct be_s3_obj *o)
{
	struct be_s3_meta **pp, *m;

	pthread_mutex_lock(&s3->meta_lock);
	pp = be_s3_meta_find(s3, path);
	m = *pp;
	if (!m && s3->n_meta >= BE_S3_META_MAX) {
		be_s3_meta_clear(s3);
		pp = be_s3_meta_find(s3, path);
	}
	if (!m && (m = calloc(1, sizeof(*m))) && !(m->path = strdup(path))) {
		free(m);
		m = NULL;
	}
	if (m && !*pp) {
		*pp = m;
		s3->n_meta++;
	}
	if (m) {
		m->is_dir = o->is_dir;
		m->size = o->size;
		m->mtime = o->mtime;
		snprintf(m->etag, sizeof(m->etag), "%s", o->etag ? o->etag : "");
		m->learned = be_s3_now_ns();
	}
	pthread_mutex_unlock(&s3->meta_lock);
}

/*
 * What is remembered of @path, when learned less than @max_age_ns ago (< 0:
 * at any time in this mount).  0 or -ENOENT.
 */
static int be_s3_meta_get(struct be_s3 *s3, const char *path, int64_t max_age_ns,
			  struct be_s3_meta *out)
{
	struct be_s3_meta *m;
	int ret = -ENOENT;

	pthread_mutex_lock(&s3->meta_lock);
	m = *be_s3_meta_find(s3, path);
	if (m && (max_age_ns < 0 || be_s3_now_ns() - m->learned < max_age_ns)) {
		*out = *m;
		out->next = NULL;
		out->path = NULL;
		ret = 0;
	}
	pthread_mutex_unlock(&s3->meta_lock);
	return ret;
}

static void be_s3_meta_forget(struct be_s3 *s3, const char *path)
{
	struct be_s3_meta **pp, *m;

	pthread_mutex_lock(&s3->meta_lock);
	pp = be_s3_meta_find(s3, path);
	m = *pp;
	if (m) {
		*pp = m->next;
		s3->n_meta--;
		free(m->path);
		free(m);
	}
	pthread_mutex_unlock(&s3->meta_lock);
}

/* Forgets @path and its parent folders, whose existence may hang on it. */
static void be_s3_meta_changed(struct be_s3 *s3, const char *path)
{
	char *p = strdup(path), *slash;

	be_s3_meta_forget(s3, path);
	while (p && (slash = strrchr(p, '/'))) {
		*slash = '\0';
		be_s3_meta_forget(s3, p);
	}
	free(p);
}

/* An inode number of @path's own (FNV-1a), so two names never look like one file. */
static ino_t be_s3_ino(const char *path)
{
	uint64_t h = 14695981039346656037ull;

	while (*path)
		h = (h ^ (unsigned char)*path++) * 1099511628211ull;
	return (ino_t)(h ? h : 1);
}

static void be_s3_stat(struct be_s3 *s3, const char *path, const struct be_s3_obj *o,
		       struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = be_s3_ino(path);
	st->st_mode = o->is_dir ? S_IFDIR | 0755 : S_IFREG | 0644;
	st->st_nlink = o->is_dir ? 2 : 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_size = o->is_dir ? 0 : o->size;
	st->st_blksize = 1 << 20;
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_mtim.tv_sec = o->is_dir || o->mtime <= 0 ? s3->created : o->mtime;
	st->st_atim = st->st_ctim = st->st_mtim;
}

/* ---- requests ---- */

/* The object key of @path (root included), or the folder prefix with @dir ("" for the root). */
static char *be_s3_key(struct be_s3 *s3, const char *path, bool dir)
{
	char *key;

	if (dir && !*path)
		return strdup(s3->addr.root);
	return asprintf(&key, "%s%s%s", s3->addr.root, path, dir ? "/" : "") < 0 ? NULL : key;
}

/* One request on object @key (NULL: the bucket) with @query pairs (NULL: none). */
static int be_s3_do(struct be_s3 *s3, struct remote_req *req, const char *key,
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
static int be_s3_simple(struct be_s3 *s3, enum remote_method method, const char *key,
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
static int be_s3_head(struct be_s3 *s3, const char *key, struct be_s3_obj *o, char *etag,
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

/* HEAD of @path's object, remembered; -ENOENT when there is no such object. */
static int be_s3_head_path(struct be_s3 *s3, const char *path, struct be_s3_meta *m)
{
	char *key = be_s3_key(s3, path, false);
	struct be_s3_obj o;
	int ret = key ? be_s3_head(s3, key, &o, m->etag, sizeof(m->etag)) : -ENOMEM;

	free(key);
	if (ret < 0)
		return ret;
	be_s3_meta_put(s3, path, &o);
	m->is_dir = false;
	m->size = o.size;
	m->mtime = o.mtime;
	return 0;
}

struct be_s3_list {
	const char *prefix;
	bool delimiter;
	const char *max_keys;
	be_s3_entry_fn *fn;
	void *arg;
	unsigned int n_keys;	/* out: entries seen, markers included */
};

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
static int be_s3_list(struct be_s3 *s3, struct be_s3_list *l)
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
static int be_s3_count_beneath(struct be_s3 *s3, const char *path, const char *max,
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

static int be_s3_put_empty(struct be_s3 *s3, const char *key)
{
	struct remote_req req = { .method = REMOTE_PUT, .body = "", .body_fd = -1,
		.max_body = 1 << 20 };
	struct remote_resp resp;
	int ret = be_s3_do(s3, &req, key, NULL, &resp);

	if (ret < 0)
		ret = be_s3_fail(s3, ret, &resp, "PUT", key);
	remote_resp_free(&resp);
	return ret;
}

/* ---- the datastore ---- */

static void be_s3_validate_keys(const struct datastore_config *cfg, struct diag *d)
{
	static const char *const ep_env = "AWS_ENDPOINT_URL";
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
	else if (!v && be_s3_env(ep_env) && !be_s3_endpoint_ok(be_s3_env(ep_env)))
		diag_add(d, cfg->file, cfg->line, "[datastore %s] endpoint: %s is not an http:// "
			 "or https:// URL of a server", cfg->name, ep_env);
	if ((v = config_get(cfg, "path_style", &line)) && be_s3_parse_bool(v) < 0)
		diag_add(d, cfg->file, line, "[datastore %s] path_style: '%s' is not true or false",
			 cfg->name, v);
	if ((v = config_get(cfg, "region", &line)) && !be_s3_region_ok(v))
		diag_add(d, cfg->file, line, "[datastore %s] region: '%s' is not a region name "
			 "(lowercase letters, digits and '-', like us-east-1)", cfg->name, v);
}

static int be_s3_validate(const struct datastore_config *cfg, struct diag *d)
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

static void be_s3_free(struct be_s3 *s3)
{
	remote_destroy(s3->remote);
	be_s3_addr_free(&s3->addr);
	be_s3_creds_free(&s3->creds);
	be_s3_meta_clear(s3);
	pthread_mutex_destroy(&s3->meta_lock);
	pthread_mutex_destroy(&s3->writers_lock);
	free(s3->sigv4);
	free(s3->staging);
	free(s3);
}

static int be_s3_connect(struct be_s3 *s3, const struct datastore_config *cfg)
{
	struct remote_opts opts = { .name = cfg->name, .timeout = cfg->timeout,
		.retries = cfg->retries };

	if (s3->creds.key_id) {
		if (asprintf(&s3->sigv4, "aws:amz:%s:s3", s3->addr.region) < 0) {
			s3->sigv4 = NULL;
			return -ENOMEM;
		}
		opts.sigv4 = s3->sigv4;
		opts.user = s3->creds.key_id;
		opts.password = s3->creds.secret;
		opts.session_token = s3->creds.token;
	}
	return remote_create(&s3->remote, &opts);
}

static int be_s3_create(struct backend **out, const struct datastore_config *cfg)
{
	struct be_s3 *s3 = calloc(1, sizeof(*s3));
	int ret;

	if (!s3)
		return -ENOMEM;
	xmlInitParser();
	pthread_mutex_init(&s3->meta_lock, NULL);
	pthread_mutex_init(&s3->writers_lock, NULL);
	s3->created = time(NULL);
	ret = be_s3_addr_init(&s3->addr, cfg);
	if (ret == 0)
		ret = be_s3_creds_find(&s3->creds, cfg);
	if (ret == 0 && asprintf(&s3->staging, "%s/staging",
				 cfg->state_dir ? cfg->state_dir : "/var/lib/mlfs") < 0) {
		s3->staging = NULL;
		ret = -ENOMEM;
	}
	if (ret == 0)
		ret = be_s3_connect(s3, cfg);
	if (ret < 0) {
		if (ret == -ENOENT)
			log_err("datastore %s: no such profile in the AWS credentials file",
				cfg->name);
		be_s3_free(s3);
		return ret;
	}
	log_info("datastore %s: s3 bucket %s at %s, %s-style, credentials from %s", cfg->name,
		 s3->addr.bucket, s3->addr.endpoint, s3->addr.path_style ? "path" : "virtual-host",
		 s3->creds.from);
	*out = &s3->base;
	return 0;
}

static void be_s3_destroy(struct backend *be)
{
	be_s3_free(be_s3(be));
}

/* ---- metadata ---- */

/* The staged size of @path when a writer has it open: 0, or -ENOENT. */
static int be_s3_staged(struct be_s3 *s3, const char *path, struct stat *st)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&s3->writers_lock);
	for (struct be_s3_file *f = s3->writers; f && ret < 0; f = f->next)
		if (strcmp(f->path, path) == 0 && fstat(f->fd, st) == 0)
			ret = 0;
	pthread_mutex_unlock(&s3->writers_lock);
	if (ret == 0) {
		st->st_ino = be_s3_ino(path);
		st->st_uid = getuid();
		st->st_gid = getgid();
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
	}
	return ret;
}

/* What @path is, from the cache when fresh, else a HEAD, else a one-key listing. */
static int be_s3_lookup(struct be_s3 *s3, const char *path, struct be_s3_meta *m)
{
	struct be_s3_obj dir = { .is_dir = true, .etag = "" };
	unsigned int n;
	int ret, ret2;

	if (be_s3_meta_get(s3, path, BE_S3_META_TTL_NS, m) == 0)
		return 0;
	ret = be_s3_head_path(s3, path, m);
	if (ret != -ENOENT && ret != -EACCES)
		return ret;
	/* Not an object: a folder if anything lies beneath (a 403 is explained there). */
	n = 0;
	ret2 = be_s3_count_beneath(s3, path, "1", &n);
	if (ret2 < 0 || n == 0)
		return ret2 < 0 ? ret2 : ret;
	be_s3_meta_put(s3, path, &dir);
	*m = (struct be_s3_meta){ .is_dir = true };
	return 0;
}

static int be_s3_getattr(struct backend *be, const char *path, struct stat *st)
{
	struct be_s3 *s3 = be_s3(be);
	struct be_s3_meta m;
	struct be_s3_obj o;
	int ret;

	if (!*path) {
		be_s3_stat(s3, path, &(struct be_s3_obj){ .is_dir = true }, st);
		return 0;
	}
	if (be_s3_staged(s3, path, st) == 0)
		return 0;
	ret = be_s3_lookup(s3, path, &m);
	if (ret < 0)
		return ret;
	o = (struct be_s3_obj){ .is_dir = m.is_dir, .size = m.size, .mtime = m.mtime };
	be_s3_stat(s3, path, &o, st);
	return 0;
}

struct be_s3_readdir {
	struct be_s3 *s3;
	const char *dir;	/* the listed folder's path */
	backend_fill_fn *fill;
	void *payload;
};

static int be_s3_readdir_entry(void *arg, const char *name, const struct be_s3_obj *o)
{
	struct be_s3_readdir *r = arg;
	struct stat st;
	char *path;

	if (asprintf(&path, "%s%s%s", r->dir, *r->dir ? "/" : "", name) < 0)
		return -ENOMEM;
	be_s3_meta_put(r->s3, path, o);
	be_s3_stat(r->s3, path, o, &st);
	free(path);
	return r->fill(r->payload, name, &st);
}

static int be_s3_readdir(struct backend *be, const char *path, backend_fill_fn *fill,
			 void *payload)
{
	struct be_s3 *s3 = be_s3(be);
	struct be_s3_readdir r = { .s3 = s3, .dir = path, .fill = fill, .payload = payload };
	char *prefix = be_s3_key(s3, path, true);
	struct be_s3_list l = { .prefix = prefix, .delimiter = true, .max_keys = "1000",
		.fn = be_s3_readdir_entry, .arg = &r };
	int ret;

	if (!prefix)
		return -ENOMEM;
	ret = be_s3_list(s3, &l);
	free(prefix);
	if (ret == 0 && l.n_keys == 0 && *path)
		ret = -ENOENT;
	return ret;
}

static int be_s3_statfs(struct backend *be, const char *path, struct statvfs *sv)
{
	(void)be;
	(void)path;
	/* A bucket has no size: say 1 PiB, all free. */
	memset(sv, 0, sizeof(*sv));
	sv->f_bsize = sv->f_frsize = 4096;
	sv->f_blocks = sv->f_bfree = sv->f_bavail = 1ull << 38;
	sv->f_files = sv->f_ffree = sv->f_favail = 1ull << 32;
	sv->f_namemax = NAME_MAX;
	return 0;
}

/* ---- files: reading ---- */

static int be_s3_file_new(struct be_s3_file **out, struct backend *be, const char *path)
{
	struct be_s3_file *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->base.be = be;
	f->fd = -1;
	f->path = strdup(path);
	f->key = be_s3_key(be_s3(be), path, false);
	if (!f->path || !f->key) {
		free(f->path);
		free(f->key);
		free(f);
		return -ENOMEM;
	}
	*out = f;
	return 0;
}

static void be_s3_file_free(struct be_s3_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	free(f->path);
	free(f->key);
	free(f);
}

/* Fills @f's size, mtime and ETag: trusted from the cache, else a HEAD. */
static int be_s3_file_meta(struct be_s3_file *f, bool trust)
{
	struct be_s3 *s3 = be_s3(f->base.be);
	struct be_s3_meta m;
	int ret = -ENOENT;

	if (trust)
		ret = be_s3_meta_get(s3, f->path, -1, &m);
	if (ret < 0)
		ret = be_s3_head_path(s3, f->path, &m);
	if (ret == 0 && m.is_dir)
		ret = -EISDIR;
	if (ret < 0)
		return ret;
	f->size = m.size;
	f->mtime = m.mtime;
	memcpy(f->etag, m.etag, sizeof(f->etag));
	return 0;
}

static int be_s3_open_write(struct be_s3_file *f, int flags);

static int be_s3_open(struct backend_file **out, struct backend *be, const char *path,
		      int flags)
{
	struct be_s3_file *f;
	int ret = be_s3_file_new(&f, be, path);

	if (ret < 0)
		return ret;
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
		ret = be_s3_open_write(f, flags);
	else
		ret = be_s3_file_meta(f, (flags & BE_O_TRUST) != 0);
	if (ret < 0) {
		be_s3_file_free(f);
		return ret;
	}
	*out = &f->base;
	return 0;
}

/* A ranged GET of @f's object into @buf; If-Match keeps it the version seen at open. */
static ssize_t be_s3_get(struct be_s3_file *f, void *buf, size_t len, off_t off,
			 remote_sink_fn *sink, void *sink_arg)
{
	struct be_s3 *s3 = be_s3(f->base.be);
	char if_match[BE_S3_ETAG_MAX + 16];
	const char *headers[] = { if_match, NULL };
	struct remote_req req = { .method = REMOTE_GET, .range_off = off, .range_len = len,
		.body_fd = -1, .buf = sink ? NULL : buf, .buf_size = sink ? 0 : len, .sink = sink,
		.sink_arg = sink_arg, .headers = f->etag[0] ? headers : NULL };
	struct remote_resp resp;
	ssize_t ret;

	snprintf(if_match, sizeof(if_match), "If-Match: %s", f->etag);
	ret = be_s3_do(s3, &req, f->key, NULL, &resp);
	if (ret == 0)
		ret = (ssize_t)resp.received;
	else if (ret == -ERANGE)
		ret = 0;	/* past the end: the object shrank */
	else
		ret = be_s3_fail(s3, (int)ret, &resp, "GET", f->key);
	if (ret == -ESTALE)
		be_s3_meta_changed(s3, f->path);
	remote_resp_free(&resp);
	return ret;
}

static ssize_t be_s3_pread(struct backend_file *bf, void *buf, size_t len, off_t off)
{
	struct be_s3_file *f = be_s3_file(bf);
	ssize_t n;

	if (f->fd >= 0) {
		n = pread(f->fd, buf, len, off);
		return n < 0 ? -errno : n;
	}
	if (off < 0)
		return -EINVAL;
	if (off >= f->size || len == 0)
		return 0;
	if ((uint64_t)len > (uint64_t)(f->size - off))
		len = (size_t)(f->size - off);
	return be_s3_get(f, buf, len, off, NULL, NULL);
}

static int be_s3_fgetattr(struct backend_file *bf, struct stat *st)
{
	struct be_s3_file *f = be_s3_file(bf);
	struct be_s3_obj o = { .size = f->size, .mtime = f->mtime };

	be_s3_stat(be_s3(bf->be), f->path, &o, st);
	if (f->fd >= 0) {
		struct stat staged;

		if (fstat(f->fd, &staged) < 0)
			return -errno;
		st->st_size = staged.st_size;
		st->st_blocks = staged.st_blocks;
		st->st_mtim = st->st_ctim = staged.st_mtim;
	}
	return 0;
}

static int be_s3_cache_key(struct backend_file *bf, char *buf, size_t size)
{
	struct be_s3_file *f = be_s3_file(bf);
	struct be_s3 *s3 = be_s3(bf->be);
	int n;

	if (f->fd >= 0)
		return -ENOTSUP;	/* a staged file is not the object */
	if (f->etag[0])
		n = snprintf(buf, size, "s3 %s/%s\n%s\n%s", s3->addr.endpoint, s3->addr.bucket,
			     f->key, f->etag);
	else
		n = snprintf(buf, size, "s3 %s/%s\n%s\n%lld %lld", s3->addr.endpoint,
			     s3->addr.bucket, f->key, (long long)f->size, (long long)f->mtime);
	if (n < 0)
		return -EINVAL;
	return (size_t)n >= size ? -ENAMETOOLONG : n;
}

/* ---- files: staging and uploading ---- */

/* An anonymous file in state_dir/staging, gone when closed. */
static int be_s3_staging_fd(struct be_s3 *s3)
{
	char *tmpl = strdup(s3->staging);
	int fd;

	if (!tmpl)
		return -ENOMEM;
	for (char *p = tmpl + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(tmpl, 0700);
		*p = '/';
	}
	mkdir(tmpl, 0700);
	free(tmpl);
	fd = open(s3->staging, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd >= 0 ? fd : -errno;
	if (asprintf(&tmpl, "%s/upload.XXXXXX", s3->staging) < 0)
		return -ENOMEM;
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd >= 0)
		unlink(tmpl);
	free(tmpl);
	return fd >= 0 ? fd : -errno;
}

struct be_s3_to_fd {
	int fd;
	off_t off;
};

static int be_s3_sink_fd(void *arg, const void *data, size_t len)
{
	struct be_s3_to_fd *t = arg;

	while (len > 0) {
		ssize_t n = pwrite(t->fd, data, len, t->off);

		if (n < 0)
			return errno == EINTR ? 0 : -errno;
		data = (const char *)data + n;
		len -= (size_t)n;
		t->off += n;
	}
	return 0;
}

/* Copies the whole object into the staging file, streamed. */
static int be_s3_download(struct be_s3_file *f)
{
	struct be_s3_to_fd t = { .fd = f->fd };
	ssize_t n;

	if (f->size == 0)
		return 0;
	n = be_s3_get(f, NULL, (size_t)f->size, 0, be_s3_sink_fd, &t);
	if (n < 0)
		return (int)n;
	return t.off == f->size ? 0 : -EIO;
}

static void be_s3_writer_add(struct be_s3_file *f)
{
	struct be_s3 *s3 = be_s3(f->base.be);

	pthread_mutex_lock(&s3->writers_lock);
	f->next = s3->writers;
	s3->writers = f;
	pthread_mutex_unlock(&s3->writers_lock);
}

static void be_s3_writer_remove(struct be_s3_file *f)
{
	struct be_s3 *s3 = be_s3(f->base.be);

	pthread_mutex_lock(&s3->writers_lock);
	for (struct be_s3_file **pp = &s3->writers; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	pthread_mutex_unlock(&s3->writers_lock);
}

/*
 * Opens @f for writing: a staging file, empty with O_TRUNC (and then dirty:
 * the truncation itself must reach the bucket), else a copy of the object.
 */
static int be_s3_open_write(struct be_s3_file *f, int flags)
{
	int ret = 0;

	if (!(flags & O_TRUNC))
		ret = be_s3_file_meta(f, false);
	if (ret == 0)
		ret = f->fd = be_s3_staging_fd(be_s3(f->base.be));
	if (ret >= 0 && !(flags & O_TRUNC))
		ret = be_s3_download(f);
	if (ret < 0)
		return ret;
	if (flags & O_TRUNC)
		atomic_store(&f->gen, 1);
	be_s3_writer_add(f);
	return 0;
}

static int be_s3_put_fd(struct be_s3 *s3, const char *key, int fd, size_t size)
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

/* One multipart upload in flight. */
struct be_s3_mpu {
	struct be_s3 *s3;
	const char *key;
	char upload_id[1024];
	int fd;
	size_t size, part_size;
	unsigned int n_parts;
	atomic_uint next;	/* the next part to send, 0-based */
	atomic_int error;	/* the first failure */
	char (*etags)[256];	/* per part; each written by one thread only */
};

static int be_s3_mpu_part(struct be_s3_mpu *u, unsigned int i)
{
	char num[16];
	const char *q[] = { "partNumber", num, "uploadId", u->upload_id, NULL };
	off_t off = (off_t)i * (off_t)u->part_size;
	size_t len = u->size - (size_t)off < u->part_size ? u->size - (size_t)off : u->part_size;
	struct remote_req req = { .method = REMOTE_PUT, .body_fd = u->fd, .body_off = off,
		.body_len = len, .max_body = 1 << 20 };
	struct remote_resp resp;
	int ret;

	snprintf(num, sizeof(num), "%u", i + 1);
	ret = be_s3_do(u->s3, &req, u->key, q, &resp);
	if (ret < 0)
		ret = be_s3_fail(u->s3, ret, &resp, "PUT part", u->key);
	else if (!resp.etag[0])
		ret = -EIO;
	else
		memcpy(u->etags[i], resp.etag, sizeof(u->etags[i]));
	remote_resp_free(&resp);
	return ret;
}

static void *be_s3_mpu_worker(void *arg)
{
	struct be_s3_mpu *u = arg;
	unsigned int i;

	while (atomic_load(&u->error) == 0 && (i = atomic_fetch_add(&u->next, 1)) < u->n_parts) {
		int ret = be_s3_mpu_part(u, i);
		int none = 0;

		if (ret < 0)
			atomic_compare_exchange_strong(&u->error, &none, ret);
	}
	return NULL;
}

/* POST ?uploads: the upload's id into @u. */
static int be_s3_mpu_start(struct be_s3_mpu *u)
{
	const char *q[] = { "uploads", NULL, NULL };
	struct remote_req req = { .method = REMOTE_POST, .body = "", .body_fd = -1,
		.max_body = 1 << 20 };
	struct remote_resp resp;
	int ret = be_s3_do(u->s3, &req, u->key, q, &resp);

	if (ret < 0)
		ret = be_s3_fail(u->s3, ret, &resp, "start multipart upload", u->key);
	else if (be_s3_xml_field(resp.body, resp.body_len, "InitiateMultipartUploadResult",
				 "UploadId", u->upload_id, sizeof(u->upload_id)) < 0)
		ret = -EIO;
	remote_resp_free(&resp);
	return ret;
}

/* The CompleteMultipartUpload body, or NULL on ENOMEM. */
static char *be_s3_mpu_body(struct be_s3_mpu *u, size_t *len)
{
	char *body = NULL;
	FILE *out = open_memstream(&body, len);

	if (!out)
		return NULL;
	fputs("<CompleteMultipartUpload>", out);
	for (unsigned int i = 0; i < u->n_parts; i++) {
		char *etag = (char *)xmlEncodeSpecialChars(NULL, (const xmlChar *)u->etags[i]);

		fprintf(out, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>", i + 1,
			etag ? etag : "");
		xmlFree(etag);
	}
	fputs("</CompleteMultipartUpload>", out);
	if (fclose(out) != 0) {
		free(body);
		return NULL;
	}
	return body;
}

/* POST ?uploadId=: S3 may answer 200 and still put an <Error> in the body. */
static int be_s3_mpu_complete(struct be_s3_mpu *u)
{
	const char *q[] = { "uploadId", u->upload_id, NULL };
	const char *headers[] = { "Content-Type: application/xml", NULL };
	struct remote_req req = { .method = REMOTE_POST, .headers = headers, .body_fd = -1,
		.max_body = 1 << 20 };
	struct remote_resp resp;
	char code[64];
	char *body = be_s3_mpu_body(u, &req.body_len);
	int ret;

	if (!body)
		return -ENOMEM;
	req.body = body;
	ret = be_s3_do(u->s3, &req, u->key, q, &resp);
	if (ret == 0 && resp.body && be_s3_parse_error(resp.body, resp.body_len, code,
						       sizeof(code)) == 0)
		ret = -EIO;
	if (ret < 0)
		ret = be_s3_fail(u->s3, ret, &resp, "complete multipart upload", u->key);
	remote_resp_free(&resp);
	free(body);
	return ret;
}

static int be_s3_mpu_send(struct be_s3_mpu *u)
{
	pthread_t threads[BE_S3_PART_THREADS];
	size_t n = 0;

	while (n < BE_S3_PART_THREADS && n + 1 < u->n_parts &&
	       pthread_create(&threads[n], NULL, be_s3_mpu_worker, u) == 0)
		n++;
	be_s3_mpu_worker(u);
	while (n > 0)
		pthread_join(threads[--n], NULL);
	return atomic_load(&u->error);
}

/* A multipart upload of @size bytes of @fd: parts in parallel, aborted on failure. */
static int be_s3_put_multipart(struct be_s3 *s3, const char *key, int fd, size_t size)
{
	struct be_s3_mpu u = { .s3 = s3, .key = key, .fd = fd, .size = size };
	const char *q[] = { "uploadId", u.upload_id, NULL };
	int ret;

	u.part_size = size / BE_S3_MAX_PARTS + 1;
	if (u.part_size < BE_S3_SMALL_PUT)
		u.part_size = BE_S3_SMALL_PUT;
	u.n_parts = (unsigned int)((size + u.part_size - 1) / u.part_size);
	u.etags = calloc(u.n_parts, sizeof(*u.etags));
	if (!u.etags)
		return -ENOMEM;
	ret = be_s3_mpu_start(&u);
	if (ret == 0)
		ret = be_s3_mpu_send(&u);
	if (ret == 0)
		ret = be_s3_mpu_complete(&u);
	if (ret < 0 && u.upload_id[0])
		be_s3_simple(s3, REMOTE_DELETE, key, q, NULL, "abort multipart upload");
	free(u.etags);
	return ret;
}

/* Uploads @f's staging file when it changed since the last upload. */
static int be_s3_upload(struct be_s3_file *f)
{
	struct be_s3 *s3 = be_s3(f->base.be);
	unsigned int gen = atomic_load(&f->gen);
	struct stat st;
	int ret;

	if (f->fd < 0 || gen == atomic_load(&f->uploaded))
		return 0;
	if (fstat(f->fd, &st) < 0)
		return -errno;
	if ((size_t)st.st_size < BE_S3_SMALL_PUT)
		ret = be_s3_put_fd(s3, f->key, f->fd, (size_t)st.st_size);
	else
		ret = be_s3_put_multipart(s3, f->key, f->fd, (size_t)st.st_size);
	be_s3_meta_changed(s3, f->path);
	if (ret == 0)
		atomic_store(&f->uploaded, gen);
	else
		log_err("datastore %s: upload of %s failed: %s", s3->base.name, f->key,
			strerror(-ret));
	return ret;
}

static int be_s3_flush(struct backend_file *bf)
{
	return be_s3_upload(be_s3_file(bf));
}

static int be_s3_fsync(struct backend_file *bf, int datasync)
{
	(void)datasync;
	return be_s3_upload(be_s3_file(bf));
}

static void be_s3_release(struct backend_file *bf)
{
	struct be_s3_file *f = be_s3_file(bf);

	if (f->fd >= 0) {
		be_s3_writer_remove(f);
		if (atomic_load(&f->gen) != atomic_load(&f->uploaded))
			log_warn("datastore %s: %s: changes after its last close were not uploaded",
				 bf->be->name, f->key);
	}
	be_s3_file_free(f);
}

static ssize_t be_s3_pwrite(struct backend_file *bf, const void *buf, size_t len, off_t off)
{
	struct be_s3_file *f = be_s3_file(bf);
	ssize_t n;

	if (f->fd < 0)
		return -EBADF;
	n = pwrite(f->fd, buf, len, off);
	if (n < 0)
		return -errno;
	atomic_fetch_add(&f->gen, 1);
	return n;
}

/*
 * A new file: staged, and dirty from the start, so even a file nothing is
 * written to (touch) becomes an object at its first close.
 */
static int be_s3_create_file(struct backend_file **out, struct backend *be, const char *path,
			     int flags, mode_t mode, const struct backend_cred *cred)
{
	struct be_s3_file *f;
	int ret = be_s3_file_new(&f, be, path);

	(void)mode;
	(void)cred;
	if (ret < 0)
		return ret;
	ret = be_s3_open_write(f, (flags & ~O_ACCMODE) | O_RDWR | O_TRUNC);
	if (ret < 0) {
		be_s3_file_free(f);
		return ret;
	}
	*out = &f->base;
	return 0;
}

/* ---- namespace changes ---- */

/* Truncates the object of @path to @size: an empty PUT, or download, cut, upload. */
static int be_s3_truncate_path(struct backend *be, const char *path, off_t size)
{
	struct be_s3_file *f;
	int ret;

	if (size == 0) {
		char *key = be_s3_key(be_s3(be), path, false);
		struct be_s3_obj o;
		char etag[BE_S3_ETAG_MAX];

		ret = key ? be_s3_head(be_s3(be), key, &o, etag, sizeof(etag)) : -ENOMEM;
		if (ret == 0)
			ret = be_s3_put_empty(be_s3(be), key);
		be_s3_meta_changed(be_s3(be), path);
		free(key);
		return ret;
	}
	ret = be_s3_file_new(&f, be, path);
	if (ret < 0)
		return ret;
	ret = be_s3_open_write(f, O_RDWR);
	if (ret == 0 && ftruncate(f->fd, size) < 0)
		ret = -errno;
	if (ret == 0) {
		atomic_fetch_add(&f->gen, 1);
		ret = be_s3_upload(f);
	}
	if (f->fd >= 0)
		be_s3_writer_remove(f);
	be_s3_file_free(f);
	return ret;
}

/* S3 keeps no owner, mode or times: chmod and utimes do nothing, chown is refused. */
static int be_s3_setattr(struct backend *be, const char *path, struct backend_file *bf,
			 const struct stat *st, unsigned int to_set)
{
	struct be_s3_file *f = bf ? be_s3_file(bf) : NULL;

	if (to_set & (BE_SET_UID | BE_SET_GID))
		return -EPERM;
	if (!(to_set & BE_SET_SIZE))
		return 0;
	if (st->st_size < 0)
		return -EINVAL;
	if (f && f->fd >= 0) {
		if (ftruncate(f->fd, st->st_size) < 0)
			return -errno;
		atomic_fetch_add(&f->gen, 1);
		return 0;
	}
	return be_s3_truncate_path(be, f ? f->path : path, st->st_size);
}

static int be_s3_mkdir(struct backend *be, const char *path, mode_t mode,
		       const struct backend_cred *cred)
{
	struct be_s3 *s3 = be_s3(be);
	char *key = be_s3_key(s3, path, true);
	int ret;

	(void)mode;
	(void)cred;
	if (!key)
		return -ENOMEM;
	ret = be_s3_put_empty(s3, key);
	be_s3_meta_changed(s3, path);
	free(key);
	return ret;
}

static int be_s3_rmdir(struct backend *be, const char *path)
{
	struct be_s3 *s3 = be_s3(be);
	unsigned int n;
	char *key;
	int ret;

	if (!*path)
		return -EBUSY;
	ret = be_s3_count_beneath(s3, path, "2", &n);
	if (ret < 0)
		return ret;
	if (n == 0)
		return -ENOENT;
	key = be_s3_key(s3, path, true);
	if (!key)
		return -ENOMEM;
	/* Only the marker may be there: one key that is the marker itself. */
	if (n > 1) {
		ret = -ENOTEMPTY;
	} else {
		struct be_s3_obj o;
		char etag[BE_S3_ETAG_MAX];

		ret = be_s3_head(s3, key, &o, etag, sizeof(etag));
		if (ret == -ENOENT)
			ret = -ENOTEMPTY;
		if (ret == 0)
			ret = be_s3_simple(s3, REMOTE_DELETE, key, NULL, NULL, "DELETE");
	}
	be_s3_meta_changed(s3, path);
	free(key);
	return ret;
}

/* Deletes the object of @path, which must exist (S3's DELETE says yes either way). */
static int be_s3_unlink(struct backend *be, const char *path)
{
	struct be_s3 *s3 = be_s3(be);
	char *key = be_s3_key(s3, path, false);
	struct be_s3_obj o;
	char etag[BE_S3_ETAG_MAX];
	int ret;

	if (!key)
		return -ENOMEM;
	ret = be_s3_head(s3, key, &o, etag, sizeof(etag));
	if (ret == 0)
		ret = be_s3_simple(s3, REMOTE_DELETE, key, NULL, NULL, "DELETE");
	be_s3_meta_changed(s3, path);
	free(key);
	return ret;
}

/* A server-side copy of @from to @to; a 200 may still carry an <Error>. */
static int be_s3_copy(struct be_s3 *s3, const char *from, const char *to)
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

/* What is at @path: 0 and *is_dir, or -ENOENT. */
static int be_s3_exists(struct be_s3 *s3, const char *path, bool *is_dir)
{
	struct be_s3_meta m;
	int ret = be_s3_lookup(s3, path, &m);

	*is_dir = ret == 0 && m.is_dir;
	return ret;
}

/* A file is copied and deleted; a folder is not renamed (EXDEV: mv copies it itself). */
static int be_s3_rename(struct backend *be, const char *from, const char *to,
			unsigned int flags)
{
	struct be_s3 *s3 = be_s3(be);
	char *fkey, *tkey;
	bool is_dir;
	int ret;

	if (flags & RENAME_EXCHANGE)
		return -EINVAL;
	be_s3_meta_forget(s3, from);
	ret = be_s3_exists(s3, from, &is_dir);
	if (ret == 0 && is_dir)
		ret = -EXDEV;
	if (ret == 0 && (flags & RENAME_NOREPLACE)) {
		be_s3_meta_forget(s3, to);
		ret = be_s3_exists(s3, to, &is_dir);
		ret = ret == 0 ? -EEXIST : ret == -ENOENT ? 0 : ret;
	}
	if (ret < 0)
		return ret;
	fkey = be_s3_key(s3, from, false);
	tkey = be_s3_key(s3, to, false);
	ret = fkey && tkey ? be_s3_copy(s3, fkey, tkey) : -ENOMEM;
	if (ret == 0)
		ret = be_s3_simple(s3, REMOTE_DELETE, fkey, NULL, NULL, "DELETE");
	be_s3_meta_changed(s3, from);
	be_s3_meta_changed(s3, to);
	free(fkey);
	free(tkey);
	return ret;
}

const struct backend_ops be_s3_ops = {
	.version = BACKEND_OPS_VERSION,
	.scheme = "s3",
	.caps = BE_CAP_WRITE | BE_CAP_REMOTE,
	.validate = be_s3_validate,
	.create = be_s3_create,
	.destroy = be_s3_destroy,
	.getattr = be_s3_getattr,
	.readdir = be_s3_readdir,
	.open = be_s3_open,
	.pread = be_s3_pread,
	.release = be_s3_release,
	.statfs = be_s3_statfs,
	.fgetattr = be_s3_fgetattr,
	.pwrite = be_s3_pwrite,
	.flush = be_s3_flush,
	.fsync = be_s3_fsync,
	.create_file = be_s3_create_file,
	.mkdir = be_s3_mkdir,
	.unlink = be_s3_unlink,
	.rmdir = be_s3_rmdir,
	.rename = be_s3_rename,
	.setattr = be_s3_setattr,
	.cache_key = be_s3_cache_key,
};
