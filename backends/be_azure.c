/*
 * be_azure.c - a datastore that is an Azure Blob container (or a prefix of
 * it), through remote.h (DESIGN §8); what writes is be_azure_write.c.
 *
 *   - a folder is a name prefix ending in '/': listed with List Blobs and a
 *     delimiter, page by page (NextMarker), each page parsed with libxml2
 *     (be_azure_xml.c); an empty folder made here is a zero-length marker
 *     blob named "folder/", as rclone's directory markers;
 *   - stat of a file open for writing from its staged copy (remote_stage.h),
 *     else from what a listing or a HEAD (Get Blob Properties) said
 *     (remote_memo.h), fresh for metadata_ttl seconds and for the
 *     mount's lifetime under the read-only trees (BE_O_TRUST,
 *     getattr_known); a path without a blob is
 *     a folder when a one-entry listing of "path/" finds anything;
 *   - reads are ranged GETs with If-Match on the ETag seen at open, so a
 *     blob replaced while open fails (ESTALE), never a mix of two versions;
 *     the ETag names the version in the shared cache's key.
 *
 * Every request carries x-ms-version; with a Shared Key each attempt is
 * signed (remote_opts.sign: x-ms-date and Authorization, made per attempt
 * so a retried or resumed range is signed as sent); with a SAS the token is
 * the URL's query; with neither, requests are anonymous (and files show
 * read-only).  Errors are
 * remote.c's map (403 EACCES, 404 ENOENT, 412 ESTALE); a refused credential
 * is logged once with Azure's own code and message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libxml/parser.h>

#include "be_azure_int.h"
#include "log.h"

#define BE_AZURE_MARKER_MAX	2048

/* ---- URLs and requests ---- */

char *be_azure_url(const struct be_azure *az, const char *path, const char *query)
{
	char *epath = remote_escape(path, true), *eroot = remote_escape(az->addr.root, true);
	const char *sas = az->addr.sas;
	char *url = NULL;
	int n = -1;

	if (epath && eroot && query)
		n = asprintf(&url, "%s/%s?%s%s%s", az->addr.endpoint, az->addr.container, query,
			     sas ? "&" : "", sas ? sas : "");
	else if (epath && eroot)
		n = asprintf(&url, "%s/%s/%s%s%s%s", az->addr.endpoint, az->addr.container, eroot,
			     epath, sas ? "?" : "", sas ? sas : "");
	free(epath);
	free(eroot);
	return n < 0 ? NULL : url;
}

/* @etag as the ETag header has it, quoted (a listing's XML may leave the quotes out). */
static void be_azure_etag(char *out, size_t size, const char *etag)
{
	if (!etag[0] || etag[0] == '"')
		snprintf(out, size, "%s", etag);
	else
		snprintf(out, size, "\"%s\"", etag);
}

/* The signature of one attempt: x-ms-date, then Authorization over it all. */
static int be_azure_sign(void *arg, const char *method, const char *url,
			 const char *const *headers, const char *range, char **out)
{
	const struct be_azure *az = arg;
	const char *all[24];
	char date[64], auth[256], *date_h = NULL, *to_sign;
	time_t now = time(NULL);
	struct tm tm;
	size_t n = 0;
	int ret;

	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (asprintf(&date_h, "x-ms-date: %s", date) < 0)
		return -ENOMEM;
	for (; headers && headers[n] && n < 22; n++)
		all[n] = headers[n];
	all[n++] = date_h;
	all[n] = NULL;
	to_sign = be_azure_string_to_sign(az->addr.account, method, url, all, range);
	ret = to_sign ? be_azure_authorization(&az->addr, to_sign, auth, sizeof(auth)) : -ENOMEM;
	free(to_sign);
	if (ret < 0) {
		free(date_h);
		return ret;
	}
	out[0] = date_h;
	if (asprintf(&out[1], "Authorization: %s", auth) < 0) {
		free(date_h);
		return -ENOMEM;
	}
	return 2;
}

void be_azure_fail(struct be_azure *az, const char *what, const char *path, int ret,
			  const struct remote_resp *resp)
{
	char why[512] = "";

	if (ret == -ENOENT || ret == -ERANGE)
		return;
	if (resp->body_len)
		be_azure_parse_error(resp->body, resp->body_len, why, sizeof(why));
	if (ret == -EACCES && atomic_exchange(&az->told_denied, true))
		return;
	log_err("datastore %s: %s %s: %s (HTTP %ld)%s", az->base.name, what, path[0] ? path : "/",
		why[0] ? why : strerror(-ret), resp->status,
		ret == -EACCES ? "; check the key, SAS or connection string" : "");
}

int be_azure_do(struct be_azure *az, struct remote_req *req, const char *const *extra,
		struct remote_resp *resp)
{
	const char *headers[8] = { "x-ms-version: " BE_AZURE_VERSION };
	size_t n = 1;

	for (; extra && *extra && n < 7; extra++)
		headers[n++] = *extra;
	headers[n] = NULL;
	req->headers = headers;
	return remote_do(az->remote, req, resp);
}

/* ---- what is known ---- */

/* ---- listing ---- */

/* Whether this datastore signs in, so may write: its files 0644, folders 0755. */
static bool be_azure_writable(const struct be_azure *az)
{
	return az->addr.key_len || az->addr.sas;
}

static void be_azure_stat(const struct be_azure *az, const struct remote_meta *m,
			  const char *path, struct stat *st)
{
	remote_meta_stat(m, path, az->created, st);
	if (be_azure_writable(az))
		st->st_mode |= S_IWUSR;
}

struct be_azure_walk {
	struct be_azure *az;
	const char *dir;	/* "" or "a/b" */
	size_t skip;		/* bytes of the listed prefix in each name */
	backend_fill_fn *fill;	/* NULL: only count, up to enough entries, markers too */
	void *payload;
	size_t n;
	size_t enough;		/* without fill: entries to count (0: 1) */
	bool marker;		/* the folder's own marker blob was seen */
	int stopped;
};

static int be_azure_entry(void *arg, const struct be_azure_entry *e)
{
	struct be_azure_walk *w = arg;
	struct remote_meta m = { .is_dir = e->is_dir, .size = e->size, .mtime = e->mtime };
	size_t nlen = strlen(e->name) - w->skip;
	char name[BE_AZURE_NAME_MAX + 2], *path;
	struct stat st;
	int ret;

	if (strlen(e->name) <= w->skip) {
		/* the folder's own marker: it says the folder is there */
		if (e->is_dir)
			return 0;
		w->marker = true;
		if (w->fill)
			return 0;
		return ++w->n >= (w->enough ? w->enough : 1) ? -ECANCELED : 0;
	}
	if (e->is_dir)
		nlen--;		/* a prefix ends in '/' */
	if (nlen == 0 || nlen > BE_AZURE_NAME_MAX || memchr(e->name + w->skip, '/', nlen))
		return 0;
	memcpy(name, e->name + w->skip, nlen);
	name[nlen] = '\0';
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	w->n++;
	if (!w->fill)
		return w->n >= (w->enough ? w->enough : 1) ? -ECANCELED : 0;
	be_azure_etag(m.etag, sizeof(m.etag), e->etag);
	if (asprintf(&path, "%s%s%s", w->dir, w->dir[0] ? "/" : "", name) < 0)
		return -ENOMEM;
	remote_memo_put(&w->az->memo, path, &m);
	be_azure_stat(w->az, &m, path, &st);
	free(path);
	ret = w->fill(w->payload, name, &st);
	if (ret != 0) {
		w->stopped = ret;
		return -ECANCELED;
	}
	return 0;
}

/* Lists folder @path page by page into @w; 0 or -errno. */
static int be_azure_list(struct be_azure *az, const char *path, struct be_azure_walk *w,
			 int max)
{
	char *prefix = NULL, *eprefix, *query, *url, marker[BE_AZURE_MARKER_MAX] = "", *emarker;
	int ret = 0;

	if (asprintf(&prefix, "%s%s%s", az->addr.root, path, path[0] ? "/" : "") < 0)
		return -ENOMEM;
	w->skip = strlen(prefix);
	eprefix = remote_escape(prefix, false);
	do {
		struct remote_req req = { .method = REMOTE_GET, .max_body = 64u << 20,
					  .body_fd = -1 };
		struct remote_resp resp;

		emarker = remote_escape(marker, false);
		if (!eprefix || !emarker ||
		    asprintf(&query, "restype=container&comp=list&delimiter=%%2F&prefix=%s%s%s"
			     "&maxresults=%d", eprefix, marker[0] ? "&marker=" : "", emarker,
			     max) < 0) {
			free(emarker);
			ret = -ENOMEM;
			break;
		}
		url = be_azure_url(az, "", query);
		req.url = url;
		ret = url ? be_azure_do(az, &req, NULL, &resp) : -ENOMEM;
		if (ret == 0)
			ret = be_azure_parse_list(resp.body, resp.body_len, be_azure_entry, w,
						  marker, sizeof(marker));
		else if (url)
			be_azure_fail(az, "list", path, ret, &resp);
		if (url)
			remote_resp_free(&resp);
		free(url);
		free(query);
		free(emarker);
	} while (ret == 0 && marker[0] && max > 1);
	free(eprefix);
	free(prefix);
	return ret;
}

static int be_azure_readdir(struct backend *be, const char *path, backend_fill_fn *fill,
			    void *payload)
{
	struct be_azure *az = be_azure(be);
	struct remote_dir_fill d;
	struct be_azure_walk w = { .az = az, .dir = path, .fill = remote_dir_fill_listed,
				   .payload = &d };
	struct remote_meta m;
	size_t writing;
	int ret = remote_dir_fill_begin(&d, &az->writers, path, fill, payload);

	if (ret < 0)
		return ret;
	ret = be_azure_list(az, path, &w, az->list_chunk);
	if (ret == -ECANCELED && w.stopped)
		ret = w.stopped;
	ret = remote_dir_fill_end(&d, &az->writers, path, ret, &writing);
	if (ret == 0 && w.n == 0 && writing == 0 && !w.marker && path[0]) {
		/* nothing under it: a blob (ENOTDIR), or nothing at all */
		if (remote_memo_get(&az->memo, path, &m, false) == 0 && !m.is_dir)
			return -ENOTDIR;
		return -ENOENT;
	}
	return ret;
}

int be_azure_count_beneath(struct be_azure *az, const char *path, unsigned int *n,
			   bool *marker)
{
	struct be_azure_walk w = { .az = az, .dir = path, .enough = 2 };
	int ret = be_azure_list(az, path, &w, 2);

	*n = (unsigned int)w.n;
	*marker = w.marker;
	return ret == -ECANCELED ? 0 : ret;
}

/* ---- attributes ---- */


int be_azure_head(struct be_azure *az, const char *path, struct remote_meta *m)
{
	char *url = be_azure_url(az, path, NULL);
	struct remote_req req = { .method = REMOTE_HEAD, .url = url, .body_fd = -1 };
	struct remote_resp resp;
	int ret = url ? be_azure_do(az, &req, NULL, &resp) : -ENOMEM;

	if (ret == 0)
		*m = (struct remote_meta){ .size = resp.content_length,
					     .mtime = resp.last_modified };
	if (ret == 0)
		be_azure_etag(m->etag, sizeof(m->etag), resp.etag);
	else if (url)
		be_azure_fail(az, "HEAD", path, ret, &resp);
	if (url)
		remote_resp_free(&resp);
	free(url);
	return ret;
}

/* What the server says of @path: a blob, else a folder when anything is under it. */
static int be_azure_ask(struct be_azure *az, const char *path, struct remote_meta *m)
{
	struct be_azure_walk w = { .az = az, .dir = path };
	int ret = be_azure_head(az, path, m);

	if (ret == 0 && m->size == 0 && be_azure_list(az, path, &w, 1) == -ECANCELED) {
		/* an empty blob with blobs beneath its name: the folder, as a listing shows */
		*m = (struct remote_meta){ .is_dir = true, .mtime = -1 };
	} else if (ret == -ENOENT) {
		ret = be_azure_list(az, path, &w, 1);
		if (ret == -ECANCELED || (ret == 0 && w.n > 0)) {
			*m = (struct remote_meta){ .is_dir = true, .mtime = -1 };
			ret = 0;
		} else if (ret == 0) {
			ret = -ENOENT;
		}
	}
	if (ret == 0)
		remote_memo_put(&az->memo, path, m);
	return ret;
}

int be_azure_meta(struct be_azure *az, const char *path, struct remote_meta *m, bool trust)
{
	if (!path[0]) {
		*m = (struct remote_meta){ .is_dir = true, .mtime = -1 };
		return 0;
	}
	if (strchr(path, '\\'))
		return -ENOENT;	/* Azure reads '\\' as '/': no blob has this name */
	if (remote_memo_get(&az->memo, path, m, trust) == 0)
		return 0;
	return be_azure_ask(az, path, m);
}

static int be_azure_getattr(struct backend *be, const char *path, struct stat *st)
{
	struct be_azure *az = be_azure(be);
	struct remote_meta m;
	int ret;

	if (path[0] && remote_writers_stat(&az->writers, path, st) == 0)
		return 0;
	ret = be_azure_meta(az, path, &m, false);
	if (ret == 0)
		be_azure_stat(az, &m, path, st);
	return ret;
}

static int be_azure_getattr_known(struct backend *be, const char *path, struct stat *st)
{
	struct be_azure *az = be_azure(be);
	int ret = remote_memo_stat(&az->memo, path, az->created, st);

	if (ret == 0 && be_azure_writable(az))
		st->st_mode |= S_IWUSR;
	return ret;
}

/* ---- files ---- */

int be_azure_file_meta(struct be_azure_file *f, bool trust)
{
	int ret = be_azure_meta(be_azure(f->r.base.be), f->r.path, &f->r.m, trust);

	return ret == 0 && f->r.m.is_dir ? -EISDIR : ret;
}

int be_azure_file_new(struct be_azure_file **out, struct be_azure *az, const char *path,
		      char *url, const struct remote_meta *meta)
{
	struct be_azure_file *f = calloc(1, sizeof(*f));

	if (f)
		f->r.path = strdup(path);
	if (!f || !f->r.path || !url) {
		if (f)
			free(f->r.path);
		free(f);
		free(url);
		return -ENOMEM;
	}
	f->r.base.be = &az->base;
	f->r.url = url;
	f->r.m = *meta;
	*out = f;
	return 0;
}

void be_azure_file_free(struct be_azure_file *f)
{
	if (f->st)
		remote_writers_close(&be_azure(f->r.base.be)->writers, f->st, f->r.base.be->name,
				     f->writing);
	free(f->r.url);
	free(f->r.path);
	free(f);
}

static int be_azure_open(struct backend_file **out, struct backend *be, const char *path,
			 int flags)
{
	struct be_azure *az = be_azure(be);
	struct remote_meta m = { .mtime = -1 };
	struct be_azure_file *f;
	int ret = be_azure_file_new(&f, az, path, be_azure_url(az, path, NULL), &m);

	if (ret < 0)
		return ret;
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
		ret = be_azure_open_write(f, flags);
	else if (!(f->st = remote_writers_find(&az->writers, path)))
		ret = be_azure_file_meta(f, flags & BE_O_TRUST);	/* else: read the stage */
	if (ret < 0) {
		be_azure_file_free(f);
		return ret;
	}
	*out = &f->r.base;
	return 0;
}

static void be_azure_release(struct backend_file *bf)
{
	be_azure_file_free(be_azure_file(bf));
}

static ssize_t be_azure_pread(struct backend_file *bf, void *buf, size_t len, off_t off)
{
	struct remote_file *f = &be_azure_file(bf)->r;
	struct be_azure *az = be_azure(bf->be);
	struct remote_req req = { .method = REMOTE_GET, .url = f->url, .range_off = off,
				  .buf = buf, .body_fd = -1 };
	char if_match[REMOTE_META_ETAG_MAX + 16];
	const char *extra[] = { if_match, NULL };
	struct remote_resp resp;
	ssize_t ret;

	if (be_azure_file(bf)->st) {
		ret = pread(be_azure_file(bf)->st->fd, buf, len, off);
		return ret < 0 ? -errno : ret;
	}
	if (off < 0)
		return -EINVAL;
	if (off >= f->m.size)
		return 0;
	if ((int64_t)len > f->m.size - off)
		len = (size_t)(f->m.size - off);
	if (len == 0)
		return 0;
	req.range_len = req.buf_size = len;
	snprintf(if_match, sizeof(if_match), "If-Match: %s", f->m.etag);
	ret = be_azure_do(az, &req, f->m.etag[0] ? extra : NULL, &resp);
	if (ret == 0)
		ret = (ssize_t)resp.received;
	else if (ret == -ERANGE)
		ret = 0;	/* the blob shrank under us: its end */
	else if (ret == -ESTALE)
		log_err("datastore %s: %s: changed on the server since it was opened",
			az->base.name, f->path);
	else
		be_azure_fail(az, "GET", f->path, (int)ret, &resp);
	if (ret == -ESTALE)
		be_azure_changed(az, f->path);
	remote_resp_free(&resp);
	return ret;
}

static int be_azure_fgetattr(struct backend_file *bf, struct stat *st)
{
	struct be_azure_file *f = be_azure_file(bf);

	be_azure_stat(be_azure(bf->be), &f->r.m, f->r.path, st);
	return f->st ? remote_stage_fstat(f->st, st) : 0;
}

static int be_azure_cache_key(struct backend_file *bf, char *buf, size_t size)
{
	struct be_azure_file *f = be_azure_file(bf);
	struct be_azure *az = be_azure(bf->be);
	int n;

	if (!f->r.m.etag[0] || f->st)
		return -ENOTSUP;	/* nothing names the version, or a staged copy */
	/* the blob's place, without the SAS (which changes), and its ETag */
	n = snprintf(buf, size, "azure %s/%s\n%s%s\n%s", az->addr.endpoint, az->addr.container,
		     az->addr.root, f->r.path, f->r.m.etag);
	if (n < 0)
		return -EIO;
	return (size_t)n >= size ? -ENAMETOOLONG : n;
}

static int be_azure_statfs(struct backend *be, const char *path, struct statvfs *sv)
{
	(void)path;
	remote_statfs_readonly(sv, BE_AZURE_NAME_MAX);
	if (be_azure_writable(be_azure(be))) {
		/* a container has no size: all of the made-up size is free */
		sv->f_flag = 0;
		sv->f_bfree = sv->f_bavail = sv->f_blocks;
		sv->f_ffree = sv->f_favail = sv->f_files;
	}
	return 0;
}

/* ---- setup ---- */

static void be_azure_free(struct be_azure *az)
{
	remote_destroy(az->remote);
	be_azure_addr_free(&az->addr);
	remote_memo_destroy(&az->memo);
	remote_writers_destroy(&az->writers);
	free(az->staging);
	free(az);
}

static int be_azure_create(struct backend **out, const struct datastore_config *cfg)
{
	struct be_azure *az = calloc(1, sizeof(*az));
	struct remote_opts opts = { .name = cfg->name, .timeout = cfg->timeout,
				    .retries = cfg->retries };
	int ret;

	if (!az)
		return -ENOMEM;
	xmlInitParser();
	remote_memo_init(&az->memo, (time_t)config_metadata_ttl(cfg));
	remote_writers_init(&az->writers);
	az->created = time(NULL);
	/* 5 timeouts (2.5 min by default): Azure updates a big copy's progress far more often */
	az->copy_stall_ns = 5 * (cfg->timeout > 0 ? cfg->timeout : 30) * 1000000000ll;
	az->list_chunk = be_azure_list_chunk(cfg);	/* checked by be_azure_validate */
	ret = az->list_chunk < 0 ? -EINVAL : be_azure_addr_init(&az->addr, cfg);
	if (ret == 0 && asprintf(&az->staging, "%s/staging",
				 cfg->state_dir ? cfg->state_dir : "/var/lib/mlfs") < 0) {
		az->staging = NULL;
		ret = -ENOMEM;
	}
	opts.requests = &az->base.stats.requests;
	if (az->addr.key_len) {
		opts.sign = be_azure_sign;
		opts.sign_arg = az;
	}
	if (ret == 0)
		ret = remote_create(&az->remote, &opts);
	if (ret < 0) {
		be_azure_free(az);
		return ret;
	}
	log_info("datastore %s: azure container %s at %s, %s, credentials from %s", cfg->name,
		 az->addr.container, az->addr.endpoint,
		 az->addr.key_len ? "Shared Key" : az->addr.sas ? "SAS" : "anonymous",
		 az->addr.from);
	*out = &az->base;
	return 0;
}

static void be_azure_destroy(struct backend *be)
{
	be_azure_free(be_azure(be));
}

const struct backend_ops be_azure_ops = {
	.version = BACKEND_OPS_VERSION,
	.scheme = "azure",
	.caps = BE_CAP_WRITE | BE_CAP_REMOTE | BE_CAP_LONG_FETCH,
	.validate = be_azure_validate,
	.create = be_azure_create,
	.destroy = be_azure_destroy,
	.getattr = be_azure_getattr,
	.readdir = be_azure_readdir,
	.open = be_azure_open,
	.pread = be_azure_pread,
	.release = be_azure_release,
	.statfs = be_azure_statfs,
	.fgetattr = be_azure_fgetattr,
	.cache_key = be_azure_cache_key,
	.getattr_known = be_azure_getattr_known,
	.pwrite = be_azure_pwrite,
	.flush = be_azure_flush,
	.fsync = be_azure_fsync,
	.create_file = be_azure_create_file,
	.mkdir = be_azure_mkdir,
	.unlink = be_azure_unlink,
	.rmdir = be_azure_rmdir,
	.rename = be_azure_rename,
	.setattr = be_azure_setattr,
	.upload = be_azure_upload_fd,
};
