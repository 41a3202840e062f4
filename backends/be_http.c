/*
 * be_http.c - a read-only datastore over plain HTTP(S): a web folder with an
 * index page, or a single file URL.
 *
 * The idea: a URL ending in '/' is a folder whose listing (nginx or Apache
 * autoindex, HTML or nginx's JSON) names its files and subfolders; any other
 * URL is one file, shown as the only entry of the backend's root under its
 * percent-decoded name.  Files are read with ranged GETs straight into the
 * caller's buffer, never buffered whole; attributes come from a HEAD or from
 * the listing.  Every request goes through remote.c (pooled connections,
 * timeouts, bounded retries) with the datastore's timeout and retries.
 *
 * Folder or file?  A listing marks folders with a trailing '/'.  For a HEAD
 * of a path not seen in a listing, the URL curl ended on after redirects
 * decides: nginx and Apache answer ".../sub" with a redirect to ".../sub/",
 * so an effective URL ending in '/' is a folder.  A text/html answer that
 * was not redirected is confirmed by a second HEAD of the URL with '/'
 * appended: a folder answers it on a URL ending in '/', a page named "sub"
 * answers 404 (or a URL without the '/').  Anything else is a file.
 *
 * A metadata cache (path -> folder or file, size, mtime, ETag) keeps getattr
 * off the network: entries are fresh for metadata_ttl seconds.  Opens with
 * BE_O_TRUST (datasets/ and friends trust what this mount has already seen)
 * take, at any age, what a HEAD said, or what a listing said of a settled
 * file: its size and a date at least REMOTE_SETTLED_S old.  Such a file is
 * opened with no request, its cached copy named by URL, size and that date
 * (an index page dates to the minute and gives no ETag; a file rewritten
 * after the date settled shows a later minute, so a new copy), and each GET
 * checks that Content-Range's total is still that size.  Other opens take
 * the same when it is fresh (a walk's reads use its folders' listings), else
 * HEAD again.  The cache is bounded (BE_HTTP_CACHE_MAX): when full it is emptied.
 *
 * A server that ignores Range (200 with the whole body) is caught by
 * remote.c: a read from offset 0 keeps the first bytes, any other read fails
 * with EIO and one log line.  A strong ETag is sent as If-Match, so bytes of
 * a newer version are never mixed into a file opened as an older one.
 *
 * What it does not do: write (no write ops: the wrappers answer EROFS),
 * follow links in pages beyond one folder level, or parse anything but
 * autoindex-style pages.  A file whose size no server header gives reads as
 * empty.
 *
 * Threading: the metadata cache is guarded by cache_lock, never held across
 * a request; struct remote keeps its own pool; open files are immutable.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>


#include "be_http.h"
#include "log.h"
#include "path_map.h"
#include "remote.h"
#include "mono.h"

#define BE_HTTP_CACHE_MAX	(4u << 20)	/* entries before the cache is emptied */
#define BE_HTTP_LISTING_MAX	(64u << 20)	/* bytes of one index page */

/* What is known of one path. */
struct be_http_meta {
	bool is_dir;
	bool size_known;
	bool from_head;		/* made by a HEAD in this mount (trusted by BE_O_TRUST opens) */
	int64_t size;
	time_t mtime;		/* -1: unknown */
	char etag[256];		
};

/*
 * One remembered path: one allocation of about 60 bytes and its path, then
 * its ETag when a HEAD gave one (names[] is "PATH\0ETAG\0"), so that a
 * listing of a million files costs tens of megabytes.
 */
struct be_http_node {
	struct path_map_entry link;
	time_t fresh_until;	/* CLOCK_MONOTONIC seconds */
	int64_t size;
	int64_t mtime;
	bool is_dir, size_known, from_head;
	char names[];
};

struct be_http {
	struct backend base;
	struct remote *remote;
	char *root;		/* the URL: a folder ending in '/', or the one file */
	char *file;		/* the file's name in the root folder; NULL for a folder URL */
	time_t created;		/* the mtime of folders nobody dates */
	time_t ttl;		/* metadata_ttl: seconds a listed or HEADed attribute is fresh */
	pthread_mutex_t cache_lock;
	struct path_map cache;	/* guarded by cache_lock: of struct be_http_node */
};

struct be_http_file {
	struct backend_file base;
	char *url;
	char *path;
	struct be_http_meta m;
};

static struct be_http *be_http(struct backend *be)
{
	return (struct be_http *)be;
}

static struct be_http_file *be_http_file(struct backend_file *f)
{
	return (struct be_http_file *)f;
}

/* ---- URLs ---- */


/* The URL of @path: a folder's ends in '/'.  NULL on ENOMEM. */
static char *be_http_url(const struct be_http *hb, const char *path, bool dir)
{
	char *esc, *url;

	if (hb->file || path[0] == '\0')
		return strdup(hb->root);
	esc = remote_escape(path, true);
	if (!esc)
		return NULL;
	if (asprintf(&url, "%s%s%s", hb->root, esc, dir ? "/" : "") < 0)
		url = NULL;
	free(esc);
	return url;
}

/* ---- the metadata cache ---- */

static time_t be_http_now(void)
{
	return (time_t)(mono_ns() / 1000000000);
}

/* Empties the cache; cache_lock held. */
static void be_http_cache_clear(struct be_http *hb)
{
	path_map_clear(&hb->cache);
}

/* @n's ETag: after its path in names[]. */
static const char *be_http_node_etag(const struct be_http_node *n)
{
	return n->names + strlen(n->names) + 1;
}

static void be_http_node_meta(const struct be_http_node *n, struct be_http_meta *m)
{
	*m = (struct be_http_meta){ .is_dir = n->is_dir, .size_known = n->size_known,
				    .from_head = n->from_head, .size = n->size,
				    .mtime = (time_t)n->mtime };
	snprintf(m->etag, sizeof(m->etag), "%s", be_http_node_etag(n));
}

/* Whether a listing's record of a file names one version: its size known, its date settled. */
static bool be_http_settled(const struct be_http_meta *m)
{
	return !m->is_dir && m->size_known && remote_date_settled(m->mtime, false);
}

/*
 * Copies the cached attributes of @path into @m: fresh ones, or, with
 * @trust, any made by a HEAD or naming a settled file, however old.
 * 0 or -ENOENT.
 */
static int be_http_cache_get(struct be_http *hb, const char *path, struct be_http_meta *m,
			     bool trust)
{
	time_t now = be_http_now();
	const struct be_http_node *n;
	int ret = -ENOENT;

	pthread_mutex_lock(&hb->cache_lock);
	n = (const struct be_http_node *)path_map_get(&hb->cache, path);
	if (n) {
		be_http_node_meta(n, m);
		if (n->fresh_until > now || (trust && (m->from_head || be_http_settled(m))))
			ret = 0;
	}
	pthread_mutex_unlock(&hb->cache_lock);
	return ret;
}

static void be_http_cache_put(struct be_http *hb, const char *path, const struct be_http_meta *m)
{
	size_t plen = strlen(path) + 1, elen = strnlen(m->etag, sizeof(m->etag) - 1);
	time_t fresh_until = be_http_now() + hb->ttl;
	struct be_http_node *n, *old;

	pthread_mutex_lock(&hb->cache_lock);
	old = (struct be_http_node *)path_map_get(&hb->cache, path);
	/*
	 * Known already: updated in place (a walk lists every folder again;
	 * a new record each time would scatter a dataset's records among the
	 * epoch's freed buffers, which malloc could then not give back).  A
	 * listing does not overwrite a HEAD's richer record of an unchanged file.
	 */
	if (old && ((old->from_head && !m->from_head && old->is_dir == m->is_dir &&
		     (!m->size_known || old->size == m->size)) ||
		    strcmp(be_http_node_etag(old), m->etag) == 0)) {
		if (!(old->from_head && !m->from_head)) {
			old->size = m->size;
			old->mtime = m->mtime;
			old->is_dir = m->is_dir;
			old->size_known = m->size_known;
			old->from_head = m->from_head;
		}
		old->fresh_until = fresh_until;
		pthread_mutex_unlock(&hb->cache_lock);
		return;
	}
	n = malloc(sizeof(*n) + plen + elen + 1);
	if (!n) {
		pthread_mutex_unlock(&hb->cache_lock);
		return;
	}
	/* the fields first: names[] may begin inside the struct's tail padding */
	*n = (struct be_http_node){ .fresh_until = fresh_until, .size = m->size,
				    .mtime = m->mtime, .is_dir = m->is_dir,
				    .size_known = m->size_known, .from_head = m->from_head };
	memcpy(n->names, path, plen);
	memcpy(n->names + plen, m->etag, elen);
	n->names[plen + elen] = '\0';
	if (old)
		path_map_take(&hb->cache, path);
	else if (hb->cache.n >= BE_HTTP_CACHE_MAX)
		be_http_cache_clear(hb);
	if (!path_map_add(&hb->cache, &n->link))
		free(n);
	pthread_mutex_unlock(&hb->cache_lock);
	free(old);
}

/* ---- attributes ---- */

static void be_http_stat(const struct be_http *hb, const char *path,
			 const struct be_http_meta *m, struct stat *st)
{
	remote_stat(st, path, m->is_dir ? S_IFDIR | 0555 : S_IFREG | 0444, m->size,
		    m->mtime >= 0 ? m->mtime : hb->created);
}

static void be_http_meta_from_resp(struct be_http_meta *m, const struct remote_resp *resp)
{
	*m = (struct be_http_meta){ .mtime = resp->last_modified, .from_head = true };
	snprintf(m->etag, sizeof(m->etag), "%s", resp->etag);
	if (resp->total_size >= 0) {
		m->size_known = true;
		m->size = resp->total_size;
	} else if (resp->content_length >= 0) {
		m->size_known = true;
		m->size = resp->content_length;
	}
}

static bool be_http_ends_in_slash(const char *url)
{
	size_t len = url ? strcspn(url, "?#") : 0;

	return len > 0 && url[len - 1] == '/';
}

/* Whether @url + "/" answers as a folder (see the top comment). */
static bool be_http_confirm_dir(struct be_http *hb, const char *url)
{
	struct remote_req req = { .method = REMOTE_HEAD, .body_fd = -1 };
	struct remote_resp resp;
	char *dir;
	bool is_dir;

	if (asprintf(&dir, "%s/", url) < 0)
		return false;
	req.url = dir;
	is_dir = remote_do(hb->remote, &req, &resp) == 0 &&
		 be_http_ends_in_slash(resp.effective_url);
	remote_resp_free(&resp);
	free(dir);
	return is_dir;
}

/* A GET of byte 0, for servers that refuse HEAD or give no Content-Length. */
static int be_http_probe(struct be_http *hb, const char *url, struct be_http_meta *m)
{
	char byte;
	struct remote_req req = { .method = REMOTE_GET, .url = url, .body_fd = -1,
				  .range_len = 1, .buf = &byte, .buf_size = 1 };
	struct remote_resp resp;
	int ret = remote_do(hb->remote, &req, &resp);

	if (ret == 0 || ret == -ERANGE) {
		be_http_meta_from_resp(m, &resp);
		if (ret == -ERANGE || (resp.range_ignored && resp.content_length < 0 &&
				       resp.received == 0)) {
			m->size_known = true;	/* 416 to bytes=0-0: empty */
			m->size = 0;
		}
		ret = 0;
	}
	remote_resp_free(&resp);
	return ret;
}

/* HEADs @url: what it is, its size, mtime and ETag. */
static int be_http_head(struct be_http *hb, const char *url, struct be_http_meta *m)
{
	struct remote_req req = { .method = REMOTE_HEAD, .url = url, .body_fd = -1 };
	struct remote_resp resp;
	int ret = remote_do(hb->remote, &req, &resp);

	if (ret == -ENOTSUP || ret == -EACCES) {	/* HEAD refused: try a GET */
		remote_resp_free(&resp);
		return be_http_probe(hb, url, m);
	}
	if (ret == 0) {
		be_http_meta_from_resp(m, &resp);
		m->is_dir = be_http_ends_in_slash(resp.effective_url) ||
			    (strncasecmp(resp.content_type, "text/html", 9) == 0 &&
			     !be_http_ends_in_slash(url) && be_http_confirm_dir(hb, url));
		if (!m->is_dir && !m->size_known)
			ret = be_http_probe(hb, url, m);
	}
	remote_resp_free(&resp);
	return ret;
}

/* Checks that @path can exist here: -ENOENT for anything but the file of a file URL. */
static int be_http_check_path(const struct be_http *hb, const char *path)
{
	return hb->file && path[0] && strcmp(path, hb->file) != 0 ? -ENOENT : 0;
}

/* How be_http_meta may use the cache. */
enum be_http_want {
	BE_HTTP_FRESH,		/* getattr: a fresh entry will do */
	BE_HTTP_TRUST,		/* a BE_O_TRUST open: any HEAD this mount made, or a
				 * listing's record of a settled file, will do */
	BE_HTTP_REVALIDATE,	/* any other open: a fresh entry from a HEAD, or a
				 * listing's of a settled file, will do; else HEAD */
};

/* Attributes of @path, from the cache as @want allows, else from a HEAD. */
static int be_http_meta(struct be_http *hb, const char *path, struct be_http_meta *m,
			enum be_http_want want)
{
	char *url;
	int ret = be_http_check_path(hb, path);

	if (ret < 0)
		return ret;
	if (path[0] == '\0') {
		*m = (struct be_http_meta){ .is_dir = true, .mtime = -1 };
		return 0;
	}
	/* a listed file whose size the index page did not give is HEADed for it */
	if (be_http_cache_get(hb, path, m, want == BE_HTTP_TRUST) == 0 &&
	    ((want == BE_HTTP_FRESH && (m->is_dir || m->size_known)) || m->from_head ||
	     be_http_settled(m)))
		return 0;
	url = be_http_url(hb, path, false);
	if (!url)
		return -ENOMEM;
	ret = be_http_head(hb, url, m);
	free(url);
	if (ret == 0)
		be_http_cache_put(hb, path, m);
	return ret == -ERANGE ? -EIO : ret;
}

static int be_http_getattr(struct backend *be, const char *path, struct stat *st)
{
	struct be_http *hb = be_http(be);
	struct be_http_meta m;
	int ret = be_http_meta(hb, path, &m, BE_HTTP_FRESH);

	if (ret == 0)
		be_http_stat(hb, path, &m, st);
	return ret;
}

/* A trusted tree's lookup: a fresh listing's entry, or any HEAD's of this mount. */
static int be_http_getattr_known(struct backend *be, const char *path, struct stat *st)
{
	struct be_http *hb = be_http(be);
	struct be_http_meta m;

	if (!path[0] || be_http_check_path(hb, path) < 0 ||
	    be_http_cache_get(hb, path, &m, true) < 0 || !(m.is_dir || m.size_known))
		return -EAGAIN;
	be_http_stat(hb, path, &m, st);
	return 0;
}

/* ---- readdir ---- */

/* GETs and parses the listing of folder @path. */
static int be_http_fetch_listing(struct be_http *hb, const char *path,
				 struct be_http_listing *l)
{
	struct remote_req req = { .method = REMOTE_GET, .body_fd = -1,
				  .max_body = BE_HTTP_LISTING_MAX };
	struct remote_resp resp;
	char *url = be_http_url(hb, path, true);
	int ret;

	if (!url)
		return -ENOMEM;
	req.url = url;
	ret = remote_do(hb->remote, &req, &resp);
	if (ret == 0 && resp.effective_url && !be_http_ends_in_slash(resp.effective_url))
		ret = -ENOTDIR;	/* redirected to a file */
	if (ret == 0) {
		ret = be_http_parse_listing(l, resp.body ? resp.body : "", resp.body_len,
					    resp.content_type);
		if (ret == -EIO)
			log_err("%s: %s: not a folder listing this backend can read",
				hb->base.name, path[0] ? path : "/");
	}
	remote_resp_free(&resp);
	free(url);
	return ret;
}

static void be_http_entry_meta(const struct be_http_entry *e, struct be_http_meta *m)
{
	*m = (struct be_http_meta){ .is_dir = e->is_dir, .size_known = e->size_known,
				    .size = e->size, .mtime = e->mtime };
}

/* Caches what the listing says of each entry and passes it on. */
static int be_http_fill_listing(struct be_http *hb, const char *path,
				const struct be_http_listing *l, backend_fill_fn *fill,
				void *payload)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct be_http_entry *e = &l->e[i];
		struct be_http_meta m;
		struct stat st;
		char *child;
		int ret;

		be_http_entry_meta(e, &m);
		if (asprintf(&child, "%s%s%s", path, path[0] ? "/" : "", e->name) < 0)
			return -ENOMEM;
		be_http_cache_put(hb, child, &m);
		be_http_stat(hb, child, &m, &st);
		free(child);
		ret = fill(payload, e->name, e->is_dir || e->size_known ? &st : NULL);
		if (ret != 0)
			return ret;
	}
	return 0;
}

static int be_http_readdir(struct backend *be, const char *path, backend_fill_fn *fill,
			   void *payload)
{
	struct be_http *hb = be_http(be);
	struct be_http_listing l;
	struct be_http_meta m;
	struct stat st;
	int ret;

	if (hb->file) {		/* a file URL: its root holds that one file, HEADed */
		if (path[0])
			return strcmp(path, hb->file) == 0 ? -ENOTDIR : -ENOENT;
		ret = be_http_meta(hb, hb->file, &m, BE_HTTP_FRESH);
		if (ret < 0)
			return ret;
		be_http_stat(hb, hb->file, &m, &st);
		return fill(payload, hb->file, &st);
	}
	ret = be_http_fetch_listing(hb, path, &l);
	if (ret < 0)
		return ret == -ERANGE ? -EIO : ret;
	ret = be_http_fill_listing(hb, path, &l, fill, payload);
	be_http_listing_free(&l);
	return ret;
}

/* ---- reading ---- */

static int be_http_open(struct backend_file **out, struct backend *be, const char *path,
			int flags)
{
	struct be_http *hb = be_http(be);
	struct be_http_file *f;
	struct be_http_meta m;
	int ret = be_http_meta(hb, path, &m,
			       flags & BE_O_TRUST ? BE_HTTP_TRUST : BE_HTTP_REVALIDATE);

	if (ret < 0)
		return ret;
	if (m.is_dir)
		return -EISDIR;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->base.be = be;
	f->m = m;
	f->url = be_http_url(hb, path, false);
	f->path = strdup(path);
	if (!f->url || !f->path) {
		free(f->url);
		free(f->path);
		free(f);
		return -ENOMEM;
	}
	*out = &f->base;
	return 0;
}

static void be_http_release(struct backend_file *bf)
{
	struct be_http_file *f = be_http_file(bf);

	if (!f)
		return;
	free(f->url);
	free(f->path);
	free(f);
}

/* Ranged GET of @len bytes at @off into @buf; If-Match pins the version opened. */
static ssize_t be_http_get(struct be_http *hb, struct be_http_file *f, void *buf, size_t len,
			   off_t off)
{
	char if_match[sizeof(f->m.etag) + 16];
	const char *headers[2] = { NULL, NULL };
	struct remote_req req = { .method = REMOTE_GET, .url = f->url, .body_fd = -1,
				  .range_off = off, .range_len = len, .buf = buf,
				  .buf_size = len, .headers = headers };
	struct remote_resp resp;
	ssize_t ret;

	if (f->m.etag[0] == '"') {	/* a strong ETag; a weak one never matches */
		snprintf(if_match, sizeof(if_match), "If-Match: %s", f->m.etag);
		headers[0] = if_match;
	}
	ret = remote_do(hb->remote, &req, &resp);
	if (ret == 0 && !f->m.from_head && resp.total_size >= 0 && resp.total_size != f->m.size)
		ret = -ESTALE;	/* opened from a listing: not the size it said */
	if (ret == 0)
		ret = (ssize_t)resp.received;
	else if (ret == -ERANGE)
		ret = 0;	/* the file shrank under us: its end */
	else if (ret == -ESTALE)
		log_err("%s: %s: changed on the server since it was opened", hb->base.name,
			f->path);
	remote_resp_free(&resp);
	return ret;
}

static ssize_t be_http_pread(struct backend_file *bf, void *buf, size_t len, off_t off)
{
	struct be_http_file *f = be_http_file(bf);

	if (off < 0)
		return -EINVAL;
	if (f->m.size_known) {
		if (off >= f->m.size)
			return 0;
		if ((int64_t)len > f->m.size - off)
			len = (size_t)(f->m.size - off);
	}
	if (len == 0)
		return 0;
	return be_http_get(be_http(bf->be), f, buf, len, off);
}

static int be_http_fgetattr(struct backend_file *bf, struct stat *st)
{
	be_http_stat(be_http(bf->be), be_http_file(bf)->path, &be_http_file(bf)->m, st);
	return 0;
}

static int be_http_cache_key(struct backend_file *bf, char *buf, size_t size)
{
	struct be_http_file *f = be_http_file(bf);
	int n;

	/* Named by the file's own URL, so a datastore and a file URL source share it. */
	if (!f->m.size_known)
		return -ENOTSUP;	/* nothing to tell one version from another */
	if (f->m.etag[0])
		n = snprintf(buf, size, "http\n%s\n%s", f->url, f->m.etag);
	else
		n = snprintf(buf, size, "http\n%s\n%lld:%lld", f->url, (long long)f->m.size,
			     (long long)f->m.mtime);
	if (n < 0)
		return -EIO;
	return (size_t)n >= size ? -ENAMETOOLONG : n;
}

static int be_http_statfs(struct backend *be, const char *path, struct statvfs *sv)
{
	(void)be;
	(void)path;
	remote_statfs_readonly(sv, BE_HTTP_NAME_MAX);
	return 0;
}

/* ---- setup ---- */

static void be_http_diag(const struct datastore_config *cfg, struct diag *d, int line,
			 const char *msg)
{
	const char *colon = strchr(cfg->name, ':');

	if (cfg->implicit && colon)	/* "dataset:NAME" made from a source URL */
		diag_add(d, cfg->file, line, "[%.*s %s] source: %s", (int)(colon - cfg->name),
			 cfg->name, colon + 1, msg);
	else
		diag_add(d, cfg->file, line, "[datastore %s] url: %s", cfg->name, msg);
}

static int be_http_validate(const struct datastore_config *cfg, struct diag *d)
{
	int line = cfg->line;
	const char *url = config_get(cfg, "url", &line);
	char *root, *file;

	if (!url) {
		be_http_diag(cfg, d, line, "missing (http://HOST/FOLDER/ or http://HOST/FILE)");
		return -EINVAL;
	}
	if (be_http_split_url(url, &root, &file) < 0) {
		/* The URL itself is not repeated: it may hold a password. */
		be_http_diag(cfg, d, line, "not an http:// or https:// URL with a host and, "
			     "for a file, a usable last component");
		return -EINVAL;
	}
	free(root);
	free(file);
	return 0;
}

static int be_http_create(struct backend **out, const struct datastore_config *cfg)
{
	const char *url = config_get(cfg, "url", NULL);
	struct remote_opts opts = { .name = cfg->name, .timeout = cfg->timeout,
				    .retries = cfg->retries };
	struct be_http *hb;
	int ret;

	if (!url)
		return -EINVAL;
	hb = calloc(1, sizeof(*hb));
	if (!hb)
		return -ENOMEM;
	pthread_mutex_init(&hb->cache_lock, NULL);
	path_map_init(&hb->cache, offsetof(struct be_http_node, names));
	hb->created = time(NULL);
	hb->ttl = (time_t)config_metadata_ttl(cfg);
	be_http_list_init();
	ret = be_http_split_url(url, &hb->root, &hb->file);
	opts.requests = &hb->base.stats.requests;
	if (ret == 0)
		ret = remote_create(&hb->remote, &opts);
	if (ret < 0) {
		free(hb->root);
		free(hb->file);
		pthread_mutex_destroy(&hb->cache_lock);
		free(hb);
		return ret;
	}
	*out = &hb->base;
	return 0;
}

static void be_http_destroy(struct backend *be)
{
	struct be_http *hb = be_http(be);

	remote_destroy(hb->remote);
	be_http_cache_clear(hb);
	pthread_mutex_destroy(&hb->cache_lock);
	free(hb->root);
	free(hb->file);
	free(hb);
}

const struct backend_ops be_http_ops = {
	.version = BACKEND_OPS_VERSION,
	.scheme = "http",
	.caps = BE_CAP_REMOTE | BE_CAP_STREAM_LIST,
	.validate = be_http_validate,
	.create = be_http_create,
	.destroy = be_http_destroy,
	.getattr = be_http_getattr,
	.readdir = be_http_readdir,
	.open = be_http_open,
	.pread = be_http_pread,
	.release = be_http_release,
	.statfs = be_http_statfs,
	.fgetattr = be_http_fgetattr,
	.cache_key = be_http_cache_key,
	.getattr_known = be_http_getattr_known,
};
