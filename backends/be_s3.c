/*
 * be_s3.c - a datastore that is an S3 bucket (AWS, MinIO, Wasabi, a test
 * server), or a Google Cloud Storage bucket through GCS's XML API, which
 * speaks S3's protocol with HMAC keys (type gcs: struct be_s3_dialect says
 * whose endpoint, region and credential conventions apply).
 *
 * Every call is one or a few HTTP requests through remote.h, which owns the
 * curl handles, the retries, the timeouts and the SigV4 signing.  This file
 * is the backend itself: the ops table, setup and teardown, the metadata
 * cache, reads, and the mapping of S3 onto a filesystem:
 *
 *   - a folder is a key prefix ending in '/': listed with ListObjectsV2 and a
 *     delimiter, page by page (each page handed to the caller as it comes,
 *     never the whole listing in memory); mkdir writes an empty "key/"
 *     marker, rmdir removes it when nothing else is beneath;
 *   - stat comes from a listing or a HEAD, remembered in a bounded
 *     metadata cache (path -> type, size, mtime, ETag; 4M paths, then
 *     emptied) for about a second; an open takes it when it is at most
 *     five seconds old, or of any age when the caller opens with BE_O_TRUST;
 *   - reads are ranged GETs with If-Match on the ETag seen at open, so a
 *     file that changes while open fails (ESTALE) instead of mixing versions;
 *   - writes go to a staging file under state_dir/staging and are uploaded
 *     by flush (close(2)), so close reports a failed upload: one PUT below
 *     8 MiB, else a multipart upload whose parts go up in parallel;
 *   - rename of a file is a server-side copy and a delete; folders are not
 *     renamed (EXDEV: mv copies them).
 *
 * The rest lives beside it (be_s3_int.h says what they share):
 * be_s3_req.c builds URLs and query strings (sorted and encoded, as curl
 * 7.88's SigV4 needs them), finds the credentials, checks a datastore's
 * keys, sends a request and reads its failure; be_s3_xml.c parses and
 * builds S3's XML with libxml2; be_s3_upload.c stages and uploads what is
 * written.
 *
 * S3 has no owners, modes or times to set: chmod and utimes are accepted and
 * do nothing, a chown to another owner than the one shown is refused.
 * Credentials come from the config, the environment or the credentials
 * file (be_s3_creds_find) and are never logged.  Key names S3's XML 1.0 cannot carry are not supported.
 *
 * Threading: the remote handle is thread-safe; the metadata cache and the
 * list of files open for writing each have a mutex, never held across a
 * request.  An open file's fields are fixed at open, except the staged
 * file's generation counters, which are atomics.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libxml/parser.h>

#include "be_s3_int.h"
#include "log.h"
#include "remote.h"
#include "mono.h"

#define BE_S3_META_MAX		(4u << 20)	/* entries before the cache is emptied */

/* ---- the metadata cache ---- */

/*
 * One remembered path: one allocation of about 100 bytes, its path then its
 * ETag in names[] ("a/b.jpg\0\"9b2c...\"\0"), so that a listing of a
 * million objects costs a hundred megabytes, not the 300 a fixed ETag
 * buffer would.
 */
struct be_s3_memo {
	struct path_map_entry link;
	int64_t size;
	int64_t mtime;
	int64_t learned;	/* CLOCK_MONOTONIC, ns */
	bool is_dir;
	char names[];
};

/* meta_lock held: the entry of @path, or NULL. */
static struct be_s3_memo *be_s3_meta_find(struct be_s3 *s3, const char *path)
{
	return (struct be_s3_memo *)path_map_get(&s3->meta, path);
}

/* Remembers @o as what @path is now. */
static void be_s3_meta_put(struct be_s3 *s3, const char *path, const struct be_s3_obj *o)
{
	const char *etag = o->etag ? o->etag : "";
	size_t plen = strlen(path) + 1, elen = strnlen(etag, BE_S3_ETAG_MAX - 1);
	int64_t now = mono_ns();
	struct be_s3_memo *m, *old;

	pthread_mutex_lock(&s3->meta_lock);
	old = be_s3_meta_find(s3, path);
	/*
	 * The same version again (each walk lists every folder): updated in
	 * place, so that a dataset's records stay where the first listing put
	 * them instead of being scattered among an epoch's freed buffers.
	 */
	if (old && strlen(old->names + plen) == elen && memcmp(old->names + plen, etag, elen) == 0) {
		old->is_dir = o->is_dir;
		old->size = o->size;
		old->mtime = o->mtime;
		old->learned = now;
		pthread_mutex_unlock(&s3->meta_lock);
		return;
	}
	m = malloc(sizeof(*m) + plen + elen + 1);
	if (m) {
		m->is_dir = o->is_dir;
		m->size = o->size;
		m->mtime = o->mtime;
		m->learned = now;
		memcpy(m->names, path, plen);
		memcpy(m->names + plen, etag, elen);
		m->names[plen + elen] = '\0';
		if (old)
			path_map_take(&s3->meta, path);
		else if (s3->meta.n >= BE_S3_META_MAX)
			path_map_clear(&s3->meta);
		if (!path_map_add(&s3->meta, &m->link))
			free(m);
	}
	pthread_mutex_unlock(&s3->meta_lock);
	if (m)
		free(old);
}

/*
 * What is remembered of @path, when learned less than @max_age_ns ago (< 0:
 * at any time in this mount).  0 or -ENOENT.
 */
static int be_s3_meta_get(struct be_s3 *s3, const char *path, int64_t max_age_ns,
			  struct be_s3_meta *out)
{
	struct be_s3_memo *m;
	int ret = -ENOENT;

	pthread_mutex_lock(&s3->meta_lock);
	m = be_s3_meta_find(s3, path);
	if (m && (max_age_ns < 0 || mono_ns() - m->learned < max_age_ns)) {
		out->is_dir = m->is_dir;
		out->size = m->size;
		out->mtime = (time_t)m->mtime;
		out->learned = m->learned;
		snprintf(out->etag, sizeof(out->etag), "%s", m->names + strlen(m->names) + 1);
		ret = 0;
	}
	pthread_mutex_unlock(&s3->meta_lock);
	return ret;
}

static void be_s3_meta_forget(struct be_s3 *s3, const char *path)
{
	struct path_map_entry *e;

	pthread_mutex_lock(&s3->meta_lock);
	e = path_map_take(&s3->meta, path);
	pthread_mutex_unlock(&s3->meta_lock);
	free(e);
}

/* Forgets @path and its parent folders, whose existence may hang on it. */
void be_s3_meta_changed(struct be_s3 *s3, const char *path)
{
	char *p = strdup(path), *slash;

	be_s3_meta_forget(s3, path);
	while (p && (slash = strrchr(p, '/'))) {
		*slash = '\0';
		be_s3_meta_forget(s3, p);
	}
	free(p);
}

static void be_s3_stat(struct be_s3 *s3, const char *path, const struct be_s3_obj *o,
		       struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = remote_path_ino(path);
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

/* ---- the datastore ---- */

static void be_s3_free(struct be_s3 *s3)
{
	remote_destroy(s3->remote);
	be_s3_addr_free(&s3->addr);
	be_s3_creds_free(&s3->creds);
	path_map_clear(&s3->meta);
	pthread_mutex_destroy(&s3->meta_lock);
	remote_writers_destroy(&s3->writers);
	free(s3->sigv4);
	free(s3->staging);
	free(s3);
}

static int be_s3_connect(struct be_s3 *s3, const struct datastore_config *cfg)
{
	struct remote_opts opts = { .name = cfg->name, .timeout = cfg->timeout,
		.retries = cfg->retries, .requests = &s3->base.stats.requests };

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
	path_map_init(&s3->meta, offsetof(struct be_s3_memo, names));
	remote_writers_init(&s3->writers);
	s3->created = time(NULL);
	s3->ttl_ns = config_metadata_ttl(cfg) * 1000000000ll;
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
	log_info("datastore %s: %s bucket %s at %s, %s-style, credentials from %s", cfg->name,
		 be_s3_dialect_of(cfg)->type, s3->addr.bucket, s3->addr.endpoint, s3->addr.path_style ? "path" : "virtual-host",
		 s3->creds.from);
	*out = &s3->base;
	return 0;
}

static void be_s3_destroy(struct backend *be)
{
	be_s3_free(be_s3(be));
}

/* ---- metadata ---- */

/* What @path is, from the cache when fresh, else a HEAD, else a one-key listing. */
static int be_s3_lookup(struct be_s3 *s3, const char *path, struct be_s3_meta *m)
{
	struct be_s3_obj dir = { .is_dir = true, .etag = "" };
	unsigned int n;
	int ret, ret2;

	if (be_s3_meta_get(s3, path, s3->ttl_ns, m) == 0)
		return 0;
	ret = be_s3_head_path(s3, path, m);
	if (ret == 0 && m->size == 0) {
		/* an empty object with keys beneath its name: the folder, as a listing shows */
		n = 0;
		if (be_s3_count_beneath(s3, path, "1", &n) == 0 && n > 0) {
			be_s3_meta_put(s3, path, &dir);
			*m = (struct be_s3_meta){ .is_dir = true };
		}
		return 0;
	}
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
	if (remote_writers_stat(&s3->writers, path, st) == 0)
		return 0;
	ret = be_s3_lookup(s3, path, &m);
	if (ret < 0)
		return ret;
	o = (struct be_s3_obj){ .is_dir = m.is_dir, .size = m.size, .mtime = m.mtime };
	be_s3_stat(s3, path, &o, st);
	return 0;
}

/* A trusted tree's lookup: whatever a listing, a HEAD or an upload said in this mount. */
static int be_s3_getattr_known(struct backend *be, const char *path, struct stat *st)
{
	struct be_s3 *s3 = be_s3(be);
	struct be_s3_meta m;

	if (!*path || remote_writers_stat(&s3->writers, path, st) == 0)
		return *path ? 0 : -EAGAIN;
	if (be_s3_meta_get(s3, path, -1, &m) < 0)
		return -EAGAIN;
	be_s3_stat(s3, path, &(struct be_s3_obj){ .is_dir = m.is_dir, .size = m.size,
						 .mtime = m.mtime }, st);
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
	struct remote_dir_fill d;
	struct be_s3_readdir r = { .s3 = s3, .dir = path, .fill = remote_dir_fill_listed,
				   .payload = &d };
	char *prefix = be_s3_key(s3, path, true);
	struct be_s3_list l = { .prefix = prefix, .delimiter = true, .max_keys = "1000",
		.fn = be_s3_readdir_entry, .arg = &r };
	size_t writing;
	int ret = prefix ? remote_dir_fill_begin(&d, &s3->writers, path, fill, payload) : -ENOMEM;

	if (ret < 0) {
		free(prefix);
		return ret;
	}
	ret = be_s3_list(s3, &l);
	free(prefix);
	ret = remote_dir_fill_end(&d, &s3->writers, path, ret, &writing);
	if (ret == 0 && l.n_keys == 0 && writing == 0 && *path)
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
	if (f->st)
		remote_writers_close(&be_s3(f->base.be)->writers, f->st, f->base.be->name,
				     f->writing);
	free(f->path);
	free(f->key);
	free(f);
}

/*
 * Fills @f's size, mtime and ETag: from the cache when @trust or when a
 * listing or a HEAD said them in the last metadata_ttl (a walk's
 * reads use its folders' listings), else from a HEAD.  The ETag goes with
 * every GET as If-Match, so an object replaced since fails ESTALE (and is
 * forgotten: the next open asks again), never mixes versions.
 */
int be_s3_file_meta(struct be_s3_file *f, bool trust)
{
	struct be_s3 *s3 = be_s3(f->base.be);
	struct be_s3_meta m;
	int ret = be_s3_meta_get(s3, f->path, trust ? -1 : s3->ttl_ns, &m);

	if (ret == 0 && !m.is_dir && !m.etag[0] && !trust)
		ret = -ENOENT;	/* nothing to pin the version with: ask */
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

static int be_s3_open(struct backend_file **out, struct backend *be, const char *path,
		      int flags)
{
	struct be_s3_file *f;
	int ret = be_s3_file_new(&f, be, path);

	if (ret < 0)
		return ret;
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
		ret = be_s3_open_write(f, flags);
	else if (!(f->st = remote_writers_find(&be_s3(be)->writers, path)))
		ret = be_s3_file_meta(f, (flags & BE_O_TRUST) != 0);	/* else: read the stage */
	if (ret < 0) {
		be_s3_file_free(f);
		return ret;
	}
	*out = &f->base;
	return 0;
}

/* A ranged GET of @f's object into @buf; If-Match keeps it the version seen at open. */
ssize_t be_s3_get(struct be_s3_file *f, void *buf, size_t len, off_t off,
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
	/* a server that ignores If-Match is caught by what it sends back */
	if (ret == 0 && ((f->etag[0] && resp.etag[0] && strcmp(resp.etag, f->etag) != 0) ||
			 (resp.total_size >= 0 && resp.total_size != f->size))) {
		log_warn("datastore %s: %s: changed on the server since it was opened",
			 s3->base.name, f->key);
		ret = -ESTALE;
	} else if (ret == 0) {
		ret = (ssize_t)resp.received;
	} else if (ret == -ERANGE) {
		ret = 0;	/* past the end: the object shrank */
	} else {
		ret = be_s3_fail(s3, (int)ret, &resp, "GET", f->key);
	}
	if (ret == -ESTALE)
		be_s3_meta_changed(s3, f->path);
	remote_resp_free(&resp);
	return ret;
}

static ssize_t be_s3_pread(struct backend_file *bf, void *buf, size_t len, off_t off)
{
	struct be_s3_file *f = be_s3_file(bf);
	ssize_t n;

	if (f->st) {
		n = pread(f->st->fd, buf, len, off);
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
	return f->st ? remote_stage_fstat(f->st, st) : 0;
}

static int be_s3_cache_key(struct backend_file *bf, char *buf, size_t size)
{
	struct be_s3_file *f = be_s3_file(bf);
	struct be_s3 *s3 = be_s3(bf->be);
	int n;

	if (f->st)
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

/* ---- files: writing ---- */

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
	be_s3_file_free(be_s3_file(bf));
}

static ssize_t be_s3_pwrite(struct backend_file *bf, const void *buf, size_t len, off_t off)
{
	struct be_s3_file *f = be_s3_file(bf);

	return f->writing ? remote_stage_pwrite(f->st, buf, len, off) : -EBADF;
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
			ret = be_s3_put(be_s3(be), key, -1, 0);
		be_s3_meta_changed(be_s3(be), path);
		free(key);
		return ret;
	}
	ret = be_s3_file_new(&f, be, path);
	if (ret < 0)
		return ret;
	ret = be_s3_open_write(f, O_RDWR);
	if (ret == 0)
		ret = remote_stage_truncate(f->st, size);
	if (ret == 0)
		ret = be_s3_upload(f);
	be_s3_file_free(f);
	return ret;
}

/* S3 keeps no owner, mode or times: remote_stage_setattr says what is done. */
static int be_s3_setattr(struct backend *be, const char *path, struct backend_file *bf,
			 const struct stat *st, unsigned int to_set)
{
	struct be_s3_file *f = bf ? be_s3_file(bf) : NULL;
	int ret = remote_stage_setattr(f ? f->st : NULL, st, to_set);

	if (ret != 1)
		return ret;
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
	ret = be_s3_put(s3, key, -1, 0);
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
	if (remote_writers_beneath(&s3->writers, path))
		return -ENOTEMPTY;	/* a file being written there, uploaded at its close */
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
	bool staged = remote_writers_has(&s3->writers, path);
	int ret;

	if (!key)
		return -ENOMEM;
	ret = be_s3_head(s3, key, &o, etag, sizeof(etag));
	if (ret == 0)
		ret = be_s3_simple(s3, REMOTE_DELETE, key, NULL, NULL, "DELETE");
	if (ret == 0 || (ret == -ENOENT && staged)) {	/* a file being written: not uploaded */
		remote_writers_unlink(&s3->writers, path);
		ret = 0;
	}
	be_s3_meta_changed(s3, path);
	free(key);
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
	if ((ret = remote_writers_rename_check(&s3->writers, be->name, from, to)) < 0)
		return ret;
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
	.caps = BE_CAP_WRITE | BE_CAP_REMOTE | BE_CAP_STREAM_LIST,
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
	.upload = be_s3_upload_fd,
	.getattr_known = be_s3_getattr_known,
};
