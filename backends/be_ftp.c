/*
 * be_ftp.c - a datastore that is a folder of an FTP or FTPS server,
 * read-only (DESIGN §8), through libcurl by way of remote.h.
 *
 *   - a folder is listed with libcurl's own listing parser (wildcard
 *     matching: "FOLDER/" and "*", one callback per entry, nothing downloaded);
 *     curl answers "no such file" for an empty folder as for a missing one,
 *     so that answer is told apart by entering the folder (a HEAD of
 *     "FOLDER/": CWD);
 *   - stat of a path nothing listed is a HEAD (curl's SIZE and MDTM: the
 *     size and the date to the second), and of "PATH/" when the server has
 *     no such file (a folder);
 *   - reads continue RETRs kept running to the file's end (ftp_stream.h:
 *     one login per sequential reader, not one per fetch), or, when an
 *     open file's streams are all busy, are ranged RETRs (REST, then as
 *     many bytes as asked);
 *   - what a listing or a HEAD said is remembered (remote_memo.h: path ->
 *     type, size, date) for metadata_ttl seconds, and for the mount's
 *     lifetime under the read-only trees (BE_O_TRUST, getattr_known).  The
 *     cache key names the version by size and date, and a listing's date is
 *     to the minute (to the day for old files), which cannot tell apart two
 *     versions of one size written in the same minute: an open takes a
 *     listing's record only of a settled file, dated REMOTE_SETTLED_S or more
 *     before now (a rewrite since shows a later date), and asks the server
 *     (HEAD: SIZE and MDTM, to the second) for any other, as be_http.c does.
 *
 * ftps:// is explicit TLS (AUTH TLS on the control port), required on every
 * connection; `ca_file` names the certificate of a server whose CA the
 * system does not know (a self-signed one).  The login is `username` with
 * `password` or `password_file`, else anonymous.  Nothing here logs a
 * password.
 *
 * Threading: the remote handle and the memo are thread-safe; the memo's
 * lock is never held across a request.  An open file's fields are fixed at open.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "be_ftp.h"
#include "ftp_stream.h"
#include "log.h"
#include "password.h"
#include "path.h"
#include "remote.h"
#include "remote_memo.h"

#define BE_FTP_NAME_MAX		255
#define BE_FTP_PATH_MAX		4096

struct be_ftp {
	struct backend base;
	struct remote *remote;
	char *root;		/* "ftp://HOST[:PORT]/PATH/" */
	time_t created;		/* the date of what no listing dates */
	long timeout;		/* the datastore's, seconds (<= 0: remote.h's default) */
	struct remote_memo memo;
	atomic_bool warned_ctrl;	/* a name curl cannot ask for was left out */
	atomic_bool warned_link;	/* a link to a folder was left out */
};

static struct be_ftp *be_ftp(struct backend *be)
{
	return (struct be_ftp *)be;
}

/* ---- URLs and dates ---- */

int be_ftp_split_url(const char *url, char **root, bool *tls)
{
	size_t slen = strncasecmp(url, "ftps://", 7) == 0 ? 7 :
		      strncasecmp(url, "ftp://", 6) == 0 ? 6 : 0;
	const char *host = url + slen, *path;
	size_t hlen, plen;

	*root = NULL;
	if (!slen)
		return -EINVAL;
	hlen = strcspn(host, "/");
	path = host + hlen;
	plen = strlen(path);
	if (hlen == 0 || memchr(host, '@', hlen) || strpbrk(url, "?#"))
		return -EINVAL;
	*tls = slen == 7;
	while (plen > 0 && path[plen - 1] == '/')
		plen--;
	if (asprintf(root, "ftp://%.*s%.*s/", (int)hlen, host, (int)plen, path) < 0) {
		*root = NULL;
		return -ENOMEM;
	}
	return 0;
}

time_t be_ftp_parse_date(const char *s, time_t now)
{
	struct tm tm = { 0 }, today;
	const char *end;
	time_t t;

	if (!s)
		return -1;
	gmtime_r(&now, &today);
	end = strptime(s, "%b %d %H:%M", &tm);
	if (end && *end == '\0') {
		tm.tm_year = today.tm_year;
		t = timegm(&tm);
		if (t > now + 86400) {		/* a date of last year */
			tm.tm_year--;
			t = timegm(&tm);
		}
		return t;
	}
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%b %d %Y", &tm);
	return end && *end == '\0' ? timegm(&tm) : -1;
}

/*
 * The URL of @path ("" or "a/b"), percent-encoded, with @tail after it: ""
 * for a file, "/" for a folder, "/" then "*" for its listing.
 */
static char *be_ftp_url(const struct be_ftp *fb, const char *path, const char *tail)
{
	char *epath = remote_escape(path, true), *url;

	if (!epath)
		return NULL;
	if (!path[0] && tail[0] == '/')
		tail++;		/* the root ends in '/' already */
	if (asprintf(&url, "%s%s%s", fb->root, epath, tail) < 0)
		url = NULL;
	free(epath);
	return url;
}

/* ---- what is known ---- */

/* HEAD of @url: 0 and what it said, or -errno. */
static int be_ftp_head(struct be_ftp *fb, const char *url, struct remote_meta *m)
{
	struct remote_req req = { .method = REMOTE_HEAD, .url = url, .body_fd = -1 };
	struct remote_resp resp;
	int ret = remote_do(fb->remote, &req, &resp);

	if (ret == 0)
		*m = (struct remote_meta){ .from_head = true, .size = resp.content_length,
					   .mtime = resp.last_modified };
	remote_resp_free(&resp);
	return ret;
}

/* Whether folder @path exists (the server lets us enter it): 0, -ENOENT or -errno. */
static int be_ftp_is_dir(struct be_ftp *fb, const char *path)
{
	char *url = be_ftp_url(fb, path, "/");
	struct remote_meta m;
	int ret = url ? be_ftp_head(fb, url, &m) : -ENOMEM;

	free(url);
	return ret;
}

/* What the server says of @path: a file (HEAD), else a folder. */
static int be_ftp_ask(struct be_ftp *fb, const char *path, struct remote_meta *m)
{
	char *url = be_ftp_url(fb, path, "");
	int ret = url ? be_ftp_head(fb, url, m) : -ENOMEM;

	free(url);
	if (ret == 0 && m->size < 0)
		ret = -ENOENT;		/* no SIZE: not a file */
	if (ret == -ENOENT) {
		ret = be_ftp_is_dir(fb, path);
		if (ret == 0)
			*m = (struct remote_meta){ .is_dir = true, .from_head = true, .mtime = -1 };
	}
	if (ret == 0)
		remote_memo_put(&fb->memo, path, m);
	return ret;
}

static int be_ftp_meta(struct be_ftp *fb, const char *path, struct remote_meta *m, bool trust)
{
	if (!path[0]) {
		*m = (struct remote_meta){ .is_dir = true, .mtime = -1 };
		return 0;
	}
	if (remote_memo_get(&fb->memo, path, m, trust) == 0)
		return 0;
	return be_ftp_ask(fb, path, m);
}

static int be_ftp_getattr(struct backend *be, const char *path, struct stat *st)
{
	struct remote_meta m;
	int ret = be_ftp_meta(be_ftp(be), path, &m, false);

	if (ret == 0)
		remote_meta_stat(&m, path, be_ftp(be)->created, st);
	return ret;
}

static int be_ftp_getattr_known(struct backend *be, const char *path, struct stat *st)
{
	return remote_memo_stat(&be_ftp(be)->memo, path, be_ftp(be)->created, st);
}

/* ---- listing ---- */

/* A symbolic link a listing met, resolved once the listing is over. */
struct be_ftp_link {
	char *name;
	char *target;		/* as the listing wrote it, or NULL */
};

struct be_ftp_walk {
	struct be_ftp *fb;
	const char *dir;
	backend_fill_fn *fill;
	void *payload;
	time_t now;
	int stopped;		/* what fill answered when it asked to stop */
	struct be_ftp_link *links;
	size_t n_links;
};

/* Whether @name holds a control character: curl refuses such an FTP path. */
static bool be_ftp_name_ctrl(const char *name)
{
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		if (*p < 0x20)
			return true;
	return false;
}

/* Hands entry @name, datastore path @path, to the walk's fill. */
static int be_ftp_fill(struct be_ftp_walk *w, const char *name, const char *path,
		       const struct remote_meta *m)
{
	struct stat st;
	int ret;

	remote_meta_stat(m, path, w->fb->created, &st);
	ret = w->fill(w->payload, name, &st);
	if (ret != 0) {
		w->stopped = ret;
		return -ECANCELED;
	}
	return 0;
}

static int be_ftp_entry(void *arg, const struct remote_entry *e)
{
	struct be_ftp_walk *w = arg;
	struct remote_meta m = { .is_dir = e->is_dir, .size = e->size < 0 ? 0 : e->size,
				 .mtime = be_ftp_parse_date(e->date, w->now) };
	struct be_ftp_link *l;
	char *path;
	int ret;

	if (strchr(e->name, '/') || strlen(e->name) > BE_FTP_NAME_MAX)
		return 0;	/* not a name a folder can hold */
	if (be_ftp_name_ctrl(e->name)) {
		char shown[BE_FTP_NAME_MAX + 1];	/* the name, each control character a '?' */
		size_t i;

		for (i = 0; e->name[i]; i++)
			shown[i] = (unsigned char)e->name[i] < 0x20 ? '?' : e->name[i];
		shown[i] = '\0';
		if (!atomic_exchange(&w->fb->warned_ctrl, true))
			log_warn("datastore %s: %s%s%s: a name with a control character, which "
				 "curl cannot ask an FTP server for: not shown (nor any other such "
				 "name)", w->fb->base.name, w->dir, w->dir[0] ? "/" : "", shown);
		return 0;
	}
	if (e->is_link) {	/* its target's type and size are asked once the listing is over */
		l = realloc(w->links, (w->n_links + 1) * sizeof(*l));
		if (!l)
			return -ENOMEM;
		w->links = l;
		l += w->n_links;
		l->name = strdup(e->name);
		l->target = e->target ? strdup(e->target) : NULL;
		if (!l->name || (e->target && !l->target)) {
			free(l->name);
			free(l->target);
			return -ENOMEM;
		}
		w->n_links++;
		return 0;
	}
	if (path_join(&path, w->dir, e->name) < 0)
		return -ENOMEM;
	if (e->is_dir || e->size >= 0)
		remote_memo_put(&w->fb->memo, path, &m);
	ret = be_ftp_fill(w, e->name, path, &m);
	free(path);
	return ret;
}

/* be_ftp.h */
bool be_ftp_link_loops(const char *dir, const char *target)
{
	char at[2 * BE_FTP_PATH_MAX];	/* where the link leads, lexically */
	size_t len = strlen(dir);

	if (!target || !target[0] || target[0] == '/' || len >= sizeof(at))
		return true;
	memcpy(at, dir, len + 1);
	while (*target) {
		size_t n = strcspn(target, "/");

		if (n == 2 && target[0] == '.' && target[1] == '.') {
			if (len == 0)
				return true;	/* above the datastore's folder */
			while (len > 0 && at[len - 1] != '/')
				len--;
			len -= len > 0;
		} else if (n > 0 && !(n == 1 && target[0] == '.')) {
			if (len + 1 + n >= sizeof(at))
				return true;
			if (len > 0)
				at[len++] = '/';
			memcpy(at + len, target, n);
			len += n;
		}
		target += n + (target[n] == '/');
	}
	return len == 0 || (strncmp(dir, at, len) == 0 && (dir[len] == '\0' || dir[len] == '/'));
}

/*
 * The listing's links, in turn: what the server says of each (it follows
 * links: SIZE and RETR read the target, CWD enters it) is what is shown.
 * A link that leads nowhere the server can read is left out, and so is one
 * to a folder that a walk could enter forever (be_ftp_link_loops).
 */
static int be_ftp_links(struct be_ftp_walk *w)
{
	int ret = 0;

	for (size_t i = 0; i < w->n_links && ret == 0; i++) {
		const struct be_ftp_link *l = &w->links[i];
		struct remote_meta m;
		char *path;

		if (path_join(&path, w->dir, l->name) < 0)
			return -ENOMEM;
		ret = be_ftp_ask(w->fb, path, &m);
		if (ret == -ENOENT || ret == -EACCES || ret == -EPERM) {
			log_debug("datastore %s: %s -> %s: the server gives no file or folder "
				  "there (%s): not shown", w->fb->base.name, path,
				  l->target ? l->target : "?", strerror(-ret));
			ret = 0;
		} else if (ret == 0 && m.is_dir && be_ftp_link_loops(w->dir, l->target)) {
			if (!atomic_exchange(&w->fb->warned_link, true))
				log_warn("datastore %s: %s -> %s: a link to a folder outside the "
					 "datastore or above the link: not shown, as a walk of the "
					 "tree might never end (later ones are said at debug level)",
					 w->fb->base.name, path, l->target ? l->target : "?");
			else
				log_debug("datastore %s: %s -> %s: a link to a folder outside the "
					  "datastore or above it: not shown", w->fb->base.name,
					  path, l->target ? l->target : "?");
		} else if (ret == 0) {
			ret = be_ftp_fill(w, l->name, path, &m);
		}
		free(path);
	}
	return ret;
}

static void be_ftp_walk_fini(struct be_ftp_walk *w)
{
	for (size_t i = 0; i < w->n_links; i++) {
		free(w->links[i].name);
		free(w->links[i].target);
	}
	free(w->links);
}

static int be_ftp_readdir(struct backend *be, const char *path, backend_fill_fn *fill,
			  void *payload)
{
	struct be_ftp *fb = be_ftp(be);
	struct be_ftp_walk w = { .fb = fb, .dir = path, .fill = fill, .payload = payload,
				 .now = time(NULL) };
	char *url = be_ftp_url(fb, path, "/*");
	struct remote_req req = { .method = REMOTE_GET, .url = url, .body_fd = -1,
				  .list = be_ftp_entry, .list_arg = &w };
	struct remote_resp resp;
	struct remote_meta m;
	int ret;

	if (!url)
		return -ENOMEM;
	ret = remote_do(fb->remote, &req, &resp);
	remote_resp_free(&resp);
	free(url);
	if (ret == 0)
		ret = be_ftp_links(&w);
	be_ftp_walk_fini(&w);
	if (ret == -ECANCELED && w.stopped)
		return w.stopped;	/* fill's own answer, as the contract says */
	if (ret == -ENOENT)	/* nothing matched (an empty folder), or no such folder */
		ret = be_ftp_is_dir(fb, path);
	if (ret == -ENOENT && path[0] && be_ftp_meta(fb, path, &m, false) == 0 && !m.is_dir)
		return -ENOTDIR;
	if (ret == -ENOENT && !path[0])		/* the datastore's own folder: say what to fix */
		log_err("datastore %s: %s is no folder on the server (an ftp url names a folder; "
			"for one file, name the folder that holds it)", fb->base.name, fb->root);
	return ret;
}

/* ---- reading ---- */

/* An open file: what remote_file knows, and its running RETRs (NULL: none, plain reads). */
struct be_ftp_file {
	struct remote_file rf;
	struct ftp_streams *streams;
};

/*
 * Whether a listing's record of a file names one version: its date is
 * settled (remote_date_settled; a date to the day, midnight here, is that of
 * a file over six months old or ahead of the server's clock, listed with its
 * year) and it gave a size (a listing that gives none records 0: an empty
 * file is asked for).
 */
static bool be_ftp_settled(const struct remote_meta *m)
{
	return !m->is_dir && m->size > 0 && remote_date_settled(m->mtime, m->mtime % 86400 == 0);
}

static int be_ftp_open(struct backend_file **out, struct backend *be, const char *path,
		       int flags)
{
	struct be_ftp *fb = be_ftp(be);
	bool trust = flags & BE_O_TRUST;
	struct be_ftp_file *f;
	struct remote_meta m;
	int ret = remote_memo_get(&fb->memo, path, &m, trust);

	/* a HEAD's date names the version, and a listing's of a settled file */
	if (ret < 0 || (!m.is_dir && !m.from_head && !be_ftp_settled(&m)))
		ret = path[0] ? be_ftp_ask(fb, path, &m) : be_ftp_meta(fb, path, &m, trust);
	if (ret < 0)
		return ret;
	if (m.is_dir)
		return -EISDIR;
	f = calloc(1, sizeof(*f));
	ret = f ? remote_file_init(&f->rf, be, path, be_ftp_url(fb, path, ""), &m) : -ENOMEM;
	if (ret < 0) {
		free(f);
		return ret;
	}
	f->streams = ftp_streams_new(fb->remote, f->rf.url, fb->timeout);
	*out = &f->rf.base;
	return 0;
}

static void be_ftp_release(struct backend_file *bf)
{
	struct be_ftp_file *f = (struct be_ftp_file *)bf;

	ftp_streams_free(f->streams);
	remote_file_fini(&f->rf);
	free(f);
}

static ssize_t be_ftp_pread(struct backend_file *bf, void *buf, size_t len, off_t off)
{
	struct be_ftp_file *f = (struct be_ftp_file *)bf;
	struct remote_req req = { .method = REMOTE_GET, .url = f->rf.url, .body_fd = -1,
				  .range_off = off, .buf = buf };
	struct remote_resp resp;
	ssize_t ret = -EAGAIN;

	if (off < 0)
		return -EINVAL;
	if (off >= f->rf.m.size)
		return 0;
	if ((int64_t)len > f->rf.m.size - off)
		len = (size_t)(f->rf.m.size - off);
	if (len == 0)
		return 0;
	if (f->streams)
		ret = ftp_streams_read(f->streams, buf, len, off);
	if (ret == -EAGAIN) {
		req.range_len = req.buf_size = len;
		ret = remote_do(be_ftp(bf->be)->remote, &req, &resp);
		if (ret == 0)
			ret = (ssize_t)resp.received;
		remote_resp_free(&resp);
	}
	return ret == -ERANGE ? 0 : ret;	/* a REST past the end: the file shrank under us */
}

static int be_ftp_fgetattr(struct backend_file *bf, struct stat *st)
{
	struct remote_file *f = (struct remote_file *)bf;

	remote_meta_stat(&f->m, f->path, be_ftp(bf->be)->created, st);
	return 0;
}

static int be_ftp_cache_key(struct backend_file *bf, char *buf, size_t size)
{
	struct remote_file *f = (struct remote_file *)bf;
	int n;

	if (f->m.mtime < 0)
		return -ENOTSUP;	/* nothing to tell one version from another */
	/* Named by the file's own URL, so a datastore and a URL source share it. */
	n = snprintf(buf, size, "ftp\n%s\n%lld:%lld", f->url, (long long)f->m.size,
		     (long long)f->m.mtime);
	if (n < 0)
		return -EIO;
	return (size_t)n >= size ? -ENAMETOOLONG : n;
}

static int be_ftp_statfs(struct backend *be, const char *path, struct statvfs *sv)
{
	(void)be;
	(void)path;
	remote_statfs_readonly(sv, BE_FTP_NAME_MAX);
	return 0;
}

/* ---- setup ---- */

static int be_ftp_validate(const struct datastore_config *cfg, struct diag *d)
{
	size_t before = d->n;
	int line = cfg->line, cline = cfg->line;
	const char *url = config_get(cfg, "url", &line);
	const char *ca = config_get(cfg, "ca_file", &cline);
	bool tls = false;
	char *root = NULL;

	if (!url)
		diag_add(d, cfg->file, cfg->line, "[datastore %s] url: missing "
			 "(ftp://HOST/FOLDER/ or ftps://HOST/FOLDER/)", cfg->name);
	else if (be_ftp_split_url(url, &root, &tls) == -EINVAL)
		/* the URL itself is not repeated: it may hold a password */
		diag_add(d, cfg->file, line, "[datastore %s] url: not an ftp:// or ftps:// URL of "
			 "a host and a folder, without user info, query or fragment (give "
			 "username and password)", cfg->name);
	free(root);
	if ((config_get(cfg, "password", NULL) || config_get(cfg, "password_file", NULL)) &&
	    !config_get(cfg, "username", NULL))
		diag_add(d, cfg->file, cfg->line, "[datastore %s] username: missing (a password "
			 "is given)", cfg->name);
	password_validate(cfg, false, d);
	if (ca) {
		char *abs = config_resolve_path(cfg->file, ca);

		if (abs && access(abs, R_OK) < 0)
			diag_add(d, cfg->file, cline, "[datastore %s] ca_file: %s: %s", cfg->name,
				 abs, strerror(errno));
		free(abs);
	}
	return d->n > before ? -EINVAL : 0;
}

static void be_ftp_free(struct be_ftp *fb)
{
	remote_destroy(fb->remote);
	remote_memo_destroy(&fb->memo);
	free(fb->root);
	free(fb);
}

static int be_ftp_connect(struct be_ftp *fb, const struct datastore_config *cfg, bool tls)
{
	const char *ca = config_get(cfg, "ca_file", NULL);
	struct remote_opts opts = { .name = cfg->name, .timeout = cfg->timeout,
				    .retries = cfg->retries, .ftp = true, .tls = tls,
				    .requests = &fb->base.stats.requests,
				    .user = config_get(cfg, "username", NULL) };
	char *password = NULL, *ca_abs = ca ? config_resolve_path(cfg->file, ca) : NULL;
	int ret = ca && !ca_abs ? -ENOMEM : password_read(cfg, &password);

	opts.password = password;
	opts.ca_file = ca_abs;
	if (ret == 0)
		ret = remote_create(&fb->remote, &opts);
	if (password)
		explicit_bzero(password, strlen(password));
	free(password);
	free(ca_abs);
	return ret;
}

static int be_ftp_create(struct backend **out, const struct datastore_config *cfg)
{
	const char *url = config_get(cfg, "url", NULL);
	struct be_ftp *fb;
	bool tls = false;
	int ret;

	if (!url)
		return -EINVAL;
	fb = calloc(1, sizeof(*fb));
	if (!fb)
		return -ENOMEM;
	remote_memo_init(&fb->memo, (time_t)config_metadata_ttl(cfg));
	fb->created = time(NULL);
	fb->timeout = cfg->timeout;
	ret = be_ftp_split_url(url, &fb->root, &tls);
	if (ret == 0)
		ret = be_ftp_connect(fb, cfg, tls);
	if (ret < 0) {
		be_ftp_free(fb);
		return ret;
	}
	log_info("datastore %s: %s %s, %s", cfg->name, tls ? "ftps" : "ftp", fb->root,
		 config_get(cfg, "username", NULL) ? "logged in by username" : "anonymous");
	*out = &fb->base;
	return 0;
}

static void be_ftp_destroy(struct backend *be)
{
	be_ftp_free(be_ftp(be));
}

const struct backend_ops be_ftp_ops = {
	.version = BACKEND_OPS_VERSION,
	.scheme = "ftp",
	.caps = BE_CAP_REMOTE | BE_CAP_LONG_FETCH,
	.validate = be_ftp_validate,
	.create = be_ftp_create,
	.destroy = be_ftp_destroy,
	.getattr = be_ftp_getattr,
	.readdir = be_ftp_readdir,
	.open = be_ftp_open,
	.pread = be_ftp_pread,
	.release = be_ftp_release,
	.statfs = be_ftp_statfs,
	.fgetattr = be_ftp_fgetattr,
	.cache_key = be_ftp_cache_key,
	.getattr_known = be_ftp_getattr_known,
};
