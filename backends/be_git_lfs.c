/*
 * be_git_lfs.c - Git LFS objects in place of their pointers in a commit the
 * git backend writes out (be_git_lfs.h).
 *
 * A repository keeping its big files in Git LFS (most model repositories)
 * holds, in git, a pointer of three lines per file: the spec's version, the
 * object's SHA-256 and its size.  The objects live on an LFS server, found
 * as git-lfs finds it: the `lfs_url` key, else `lfs.url` in the commit's
 * .lfsconfig (read with libgit2's config parser), else derived from the
 * repository's URL.  One batch request per 100 objects asks for their
 * download actions ("basic" transfers); each object is then fetched from
 * the action's href with the action's headers, its bytes checked against
 * the size and the SHA-256, and kept in the repository's store
 * (cache_dir/git/<url>/lfs/<oid>, made under a temporary name, synced,
 * renamed), from which every tree that names it links it: the next commit
 * with the same weights fetches nothing.
 *
 * Credentials go only to the repository's own scheme, host and port (or the
 * configured lfs_url's): an endpoint a commit's .lfsconfig names elsewhere,
 * or an href elsewhere (a storage service's signed URL), gets the action's
 * headers and no more, and a redirect to another host gets none (curl's).
 * Built without libcurl, only the parts that need no server are here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <git2.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "be_git_lfs.h"
#include "log.h"
#include "password.h"
#include "path.h"
#if MLFS_WITH_CURL
#include "remote.h"
#endif

#define LFS_SPEC	"version https://git-lfs.github.com/spec/v1\n"
#define LFS_BATCH_MAX	100	/* objects per batch request, as git-lfs asks */
#define LFS_HEADERS_MAX	16	/* an action's headers kept */
#define LFS_PARALLEL	4	/* objects downloaded at once */
#define LFS_JSON_TYPE	"application/vnd.git-lfs+json"

/* ---- pointers and endpoints ---- */

/* The value of line "@key " of pointer @data, or NULL; its length into *len. */
static const char *lfs_line(const char *data, size_t len, const char *key, size_t *vlen)
{
	size_t klen = strlen(key);

	for (const char *p = data, *end = data + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (!nl)
			return NULL;	/* every line of a pointer ends in '\n' */
		if ((size_t)(nl - p) > klen && memcmp(p, key, klen) == 0) {
			*vlen = (size_t)(nl - p) - klen;
			return p + klen;
		}
		p = nl + 1;
	}
	return NULL;
}

int be_git_lfs_parse(const char *data, size_t len, char oid[BE_GIT_LFS_OID_LEN + 1],
		     int64_t *size)
{
	size_t olen = 0, slen = 0;
	const char *o, *s;
	int64_t v = 0;

	if (len < sizeof(LFS_SPEC) - 1 || memcmp(data, LFS_SPEC, sizeof(LFS_SPEC) - 1) != 0)
		return -EINVAL;
	o = lfs_line(data, len, "oid sha256:", &olen);
	s = lfs_line(data, len, "size ", &slen);
	if (!o || olen != BE_GIT_LFS_OID_LEN || !s || slen == 0 || slen > 18)
		return -EINVAL;
	for (size_t i = 0; i < olen; i++)
		if (!(o[i] >= '0' && o[i] <= '9') && !(o[i] >= 'a' && o[i] <= 'f'))
			return -EINVAL;
	for (size_t i = 0; i < slen; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	memcpy(oid, o, olen);
	oid[olen] = '\0';
	*size = v;
	return 0;
}

char *be_git_lfs_endpoint(const char *remote)
{
	const char *sep = strstr(remote, "://"), *rest, *scheme, *user;
	size_t slen, len, ulen;
	char *out = NULL;

	if (!sep)
		return NULL;
	slen = (size_t)(sep - remote);
	if (slen == 3 && strncasecmp(remote, "git", 3) == 0)
		scheme = "https";	/* git-lfs's lfs.gitprotocol default */
	else if (slen == 4 && strncasecmp(remote, "http", 4) == 0)
		scheme = "http";
	else if (slen == 5 && strncasecmp(remote, "https", 5) == 0)
		scheme = "https";
	else
		return NULL;
	rest = sep + 3;
	if (password_url_userinfo(remote, &user, &ulen))
		rest = user + ulen + 1;	/* credentials go apart (basic auth) */
	len = strlen(rest);
	while (len > 0 && rest[len - 1] == '/')
		len--;
	if (len == 0 || !memchr(rest, '/', len))
		return NULL;	/* a host with no repository path */
	if (asprintf(&out, "%s://%.*s%s", scheme, (int)len, rest,
		     len > 4 && strncasecmp(rest + len - 4, ".git", 4) == 0 ? "/info/lfs" :
		     ".git/info/lfs") < 0)
		return NULL;
	return out;
}

/* ---- one fetch of a tree's objects (libcurl's: none in a build without it) ---- */

#if MLFS_WITH_CURL

struct lfs_run {
	const struct be_git_lfs_opts *o;
	const char *endpoint;
	struct remote *auth;	/* with the credentials: lfs_trusted's URLs */
	struct remote *anon;	/* without: any other */
	size_t fetched;
	int64_t bytes;
};

/* The scheme of @url (its length into *slen) and its host:port, user info left out. */
static const char *lfs_origin(const char *url, size_t *slen, size_t *hlen)
{
	const char *sep = strstr(url, "://"), *host, *user;
	size_t ulen;

	if (!sep)
		return NULL;
	*slen = (size_t)(sep - url);
	host = password_url_userinfo(url, &user, &ulen) ? user + ulen + 1 : sep + 3;
	*hlen = strcspn(host, "/?#");
	return host;
}

/* Whether @a and @b have one scheme, host and port (ignoring case and user info). */
static bool lfs_same_origin(const char *a, const char *b)
{
	size_t sa = 0, ha = 0, sb = 0, hb = 0;
	const char *x = lfs_origin(a, &sa, &ha), *y = lfs_origin(b, &sb, &hb);

	return x && y && sa == sb && ha == hb && strncasecmp(a, b, sa) == 0 &&
	       strncasecmp(x, y, ha) == 0;
}

/*
 * Whether @url may be sent the repository's credentials: it is on the
 * repository's own origin, or on the configured lfs_url's.  Not an origin
 * only the repository's content named (.lfsconfig), nor a storage host.
 */
static bool lfs_trusted(const struct be_git_lfs_opts *o, const char *url)
{
	return lfs_same_origin(url, o->remote) || (o->lfs_url && lfs_same_origin(url, o->lfs_url));
}

/* The endpoint: the configured one, .lfsconfig's lfs.url, or the derived one (malloc'd). */
static char *lfs_endpoint_of(const struct be_git_lfs_opts *o, const char *top)
{
	git_config *cfg = NULL;
	git_buf buf = { 0 };
	char *path = NULL, *url = NULL;
	struct stat st;

	if (o->lfs_url)
		return strdup(o->lfs_url);
	/* the commit's own file: a link in it (to a file of this machine) is not read */
	if (path_join(&path, top, ".lfsconfig") == 0 && lstat(path, &st) == 0 &&
	    S_ISREG(st.st_mode) &&
	    git_config_open_ondisk(&cfg, path) == 0 &&
	    git_config_get_string_buf(&buf, cfg, "lfs.url") == 0 && buf.ptr && buf.ptr[0])
		url = strdup(buf.ptr);
	git_buf_dispose(&buf);
	git_config_free(cfg);
	free(path);
	return url ? url : be_git_lfs_endpoint(o->remote);
}

/* The path of object @oid in the store (malloc'd), or NULL. */
static char *lfs_store_path(const struct be_git_lfs_opts *o, const char *oid, const char *tail)
{
	char *p = NULL;

	return asprintf(&p, "%s/%s%s", o->store, oid, tail) < 0 ? NULL : p;
}

/* Whether the store holds @obj already (checked when it was put there). */
static bool lfs_stored(const struct be_git_lfs_opts *o, const struct be_git_lfs_obj *obj)
{
	char *p = lfs_store_path(o, obj->oid, "");
	struct stat st;
	bool ret = p && stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == obj->size;

	free(p);
	return ret;
}

/* @url as logs show it (password_url_shown: no token, no signature), in @buf. */
#define LFS_SHOWN(buf, url) (password_url_shown((buf), sizeof(buf), (url)), (buf))

/* The server's words from an LFS error body ({"message": ...}), or "". */
static const char *lfs_message(json_t *body)
{
	const char *m = json_string_value(json_object_get(body, "message"));

	return m ? m : "";
}

/* Errno for an LFS status: 404 ENOENT, 401/403 EACCES, else EIO. */
static int lfs_errno(long code)
{
	return code == 404 || code == 410 ? -ENOENT : code == 401 || code == 403 ? -EACCES : -EIO;
}

struct lfs_sink {
	int fd;
	EVP_MD_CTX *md;
	int64_t got, want;
};

static int lfs_sink(void *arg, const void *data, size_t len)
{
	struct lfs_sink *s = arg;

	if (s->got + (int64_t)len > s->want)
		return -EFBIG;		/* more than the pointer's size: not this object */
	for (size_t off = 0; off < len;) {
		ssize_t w = write(s->fd, (const char *)data + off, len - off);

		if (w < 0 && errno != EINTR)
			return -errno;
		if (w > 0)
			off += (size_t)w;
	}
	EVP_DigestUpdate(s->md, data, len);
	s->got += (int64_t)len;
	return 0;
}

/* Whether the SHA-256 of what @md digested is @oid. */
static bool lfs_digest_is(EVP_MD_CTX *md, const char *oid)
{
	unsigned char d[32];
	char hex[BE_GIT_LFS_OID_LEN + 1];

	if (!EVP_DigestFinal_ex(md, d, NULL))
		return false;
	for (size_t i = 0; i < sizeof(d); i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	return strcmp(hex, oid) == 0;
}

/* Logs a failed request of @what at @url: the status and the server's words, or @err. */
static void lfs_said(const struct be_git_lfs_opts *o, const char *what, const char *url,
		     const struct remote_resp *resp, int err)
{
	json_t *body = resp->body ? json_loads(resp->body, 0, NULL) : NULL;
	const char *m = lfs_message(body);
	char shown[1024];

	if (resp->status >= 300)
		log_err("datastore %s: commit %s: %s: HTTP %ld from %s%s%s", o->name, o->commit,
			what, resp->status, LFS_SHOWN(shown, url), m[0] ? ": " : "", m);
	else
		log_err("datastore %s: commit %s: %s from %s: %s", o->name, o->commit, what,
			LFS_SHOWN(shown, url), strerror(-err));
	json_decref(body);
}

/*
 * Downloads @obj (first named at @obj->path) from @href with @headers into
 * the store, checked, synced and renamed into place.  0 or -errno, logged.
 */
static int lfs_download(struct lfs_run *run, const struct be_git_lfs_obj *obj, const char *href,
			const char *const *headers)
{
	const struct be_git_lfs_opts *o = run->o;
	struct lfs_sink s = { .fd = -1, .want = obj->size, .md = EVP_MD_CTX_new() };
	struct remote_req req = { .method = REMOTE_GET, .url = href, .headers = headers,
				  .body_fd = -1, .sink = lfs_sink, .sink_arg = &s };
	struct remote_resp resp = { 0 };
	char *part = lfs_store_path(o, obj->oid, ".part"), *final = lfs_store_path(o, obj->oid, "");
	char what[PATH_MAX + 64], shown[1024];
	const char *bad = NULL;
	int ret = s.md && part && final ? 0 : -ENOMEM;

	snprintf(what, sizeof(what), "Git LFS object of %s", obj->path);
	if (ret == 0 && (s.fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444)) < 0)
		ret = -errno;
	if (ret == 0 && !EVP_DigestInit_ex(s.md, EVP_sha256(), NULL))
		ret = -ENOMEM;
	if (ret == 0)
		ret = remote_do(lfs_trusted(o, href) ? run->auth : run->anon, &req, &resp);
	if (ret == -EFBIG)
		bad = "more bytes than its pointer's size";
	else if (ret == 0 && s.got != obj->size)
		bad = "fewer bytes than its pointer's size";
	else if (ret == 0 && !lfs_digest_is(s.md, obj->oid))
		bad = "bytes whose SHA-256 is not the pointer's";
	if (bad) {
		log_err("datastore %s: commit %s: %s (sha256 %.12s..., %lld bytes): %s sent %s",
			o->name, o->commit, what, obj->oid, (long long)obj->size,
			LFS_SHOWN(shown, href), bad);
		ret = -EIO;
	} else if (ret < 0 && s.fd >= 0) {
		lfs_said(o, what, href, &resp, ret);
	}
	if (ret == 0 && fdatasync(s.fd) < 0)
		ret = -errno;
	if (s.fd >= 0 && close(s.fd) < 0 && ret == 0)
		ret = -errno;
	if (ret == 0 && rename(part, final) < 0)
		ret = -errno;
	if (ret < 0 && part)
		unlink(part);
	remote_resp_free(&resp);
	EVP_MD_CTX_free(s.md);
	free(part);
	free(final);
	return ret;
}

/* The first of @objs[0..n) naming @oid, or NULL. */
static const struct be_git_lfs_obj *lfs_find(const struct be_git_lfs_obj *objs, size_t n,
					     const char *oid)
{
	for (size_t i = 0; oid && i < n; i++)
		if (strcmp(objs[i].oid, oid) == 0)
			return &objs[i];
	return NULL;
}

/* Downloads one object of a batch answer, as its download action says. */
static int lfs_take(struct lfs_run *run, const struct be_git_lfs_obj *obj, json_t *answer)
{
	json_t *err = json_object_get(answer, "error"), *dl, *hdrs, *v;
	const char *href, *key, *lines[LFS_HEADERS_MAX + 1] = { NULL };
	char *owned[LFS_HEADERS_MAX] = { NULL };
	size_t n = 0;
	int ret;

	if (err) {
		json_int_t code = json_integer_value(json_object_get(err, "code"));

		log_err("datastore %s: commit %s: Git LFS object of %s (sha256 %.12s..., %lld "
			"bytes): the server says %lld %s", run->o->name, run->o->commit, obj->path,
			obj->oid, (long long)obj->size, (long long)code, lfs_message(err));
		return lfs_errno((long)code);
	}
	dl = json_object_get(json_object_get(answer, "actions"), "download");
	href = json_string_value(json_object_get(dl, "href"));
	if (!href) {
		log_err("datastore %s: commit %s: Git LFS object of %s: the server's answer has "
			"no download action", run->o->name, run->o->commit, obj->path);
		return -EIO;
	}
	hdrs = json_object_get(dl, "header");
	json_object_foreach(hdrs, key, v) {
		if (n == LFS_HEADERS_MAX || !json_is_string(v))
			continue;
		if (asprintf(&owned[n], "%s: %s", key, json_string_value(v)) < 0)
			break;
		lines[n] = owned[n];
		n++;
	}
	ret = lfs_download(run, obj, href, lines);
	while (n > 0)
		free(owned[--n]);
	return ret;
}

/* Objects of one batch answer downloaded by LFS_PARALLEL threads at once. */
struct lfs_pool {
	struct lfs_run *run;
	const struct be_git_lfs_obj *const *want;
	json_t **answers;	/* the answer for each of @want: read only, shared */
	size_t n, next;		/* lock: the next to take */
	int err;		/* lock: the first failure; nothing new is taken after it */
	pthread_mutex_t lock;
};

static void *lfs_worker(void *arg)
{
	struct lfs_pool *p = arg;

	for (;;) {
		size_t i;
		int ret;

		pthread_mutex_lock(&p->lock);
		i = p->err ? p->n : p->next++;
		pthread_mutex_unlock(&p->lock);
		if (i >= p->n)
			return NULL;
		ret = lfs_take(p->run, p->want[i], p->answers[i]);
		pthread_mutex_lock(&p->lock);
		if (ret < 0 && !p->err)
			p->err = ret;
		if (ret == 0) {
			p->run->fetched++;
			p->run->bytes += p->want[i]->size;
		}
		pthread_mutex_unlock(&p->lock);
	}
}

/*
 * Downloads @want[0..n), @answers[i] saying how, LFS_PARALLEL at a time
 * (git-lfs has 8 transfers going): this thread and up to LFS_PARALLEL - 1
 * more, fewer when threads cannot be had.  0, or the first failure.
 */
static int lfs_take_all(struct lfs_run *run, const struct be_git_lfs_obj *const *want,
			json_t **answers, size_t n)
{
	struct lfs_pool p = { .run = run, .want = want, .answers = answers, .n = n };
	pthread_t t[LFS_PARALLEL - 1];
	size_t started = 0;

	pthread_mutex_init(&p.lock, NULL);
	while (started < LFS_PARALLEL - 1 && started + 1 < n &&
	       pthread_create(&t[started], NULL, lfs_worker, &p) == 0)
		started++;
	lfs_worker(&p);
	while (started > 0)
		pthread_join(t[--started], NULL);
	pthread_mutex_destroy(&p.lock);
	return p.err;
}

/* One batch request for @want (@n objects, none stored yet) and their downloads. */
static int lfs_batch(struct lfs_run *run, const struct be_git_lfs_obj *const *want, size_t n)
{
	const struct be_git_lfs_opts *o = run->o;
	const char *headers[] = { "Accept: " LFS_JSON_TYPE, "Content-Type: " LFS_JSON_TYPE, NULL };
	json_t *objs = json_array(), *answer = NULL, *list, **answers = NULL;
	struct remote_resp resp = { 0 };
	char *url = NULL, *body = NULL, shown[1024];
	size_t i;
	int ret = objs ? 0 : -ENOMEM;

	for (i = 0; ret == 0 && i < n; i++)
		if (json_array_append_new(objs, json_pack("{s:s, s:I}", "oid", want[i]->oid,
							  "size", (json_int_t)want[i]->size)) < 0)
			ret = -ENOMEM;
	if (ret == 0) {
		json_t *root = json_pack("{s:s, s:[s], s:O, s:s}", "operation", "download",
					 "transfers", "basic", "objects", objs, "hash_algo", "sha256");

		body = root ? json_dumps(root, JSON_COMPACT) : NULL;
		json_decref(root);
		ret = body && asprintf(&url, "%s/objects/batch", run->endpoint) >= 0 ? 0 : -ENOMEM;
	}
	if (ret == 0) {
		struct remote_req req = { .method = REMOTE_POST, .url = url, .headers = headers,
					  .body = body, .body_len = strlen(body), .body_fd = -1 };

		ret = remote_do(lfs_trusted(o, url) ? run->auth : run->anon, &req, &resp);
		if (ret < 0) {
			lfs_said(o, "Git LFS batch request", url, &resp, ret);
			if (ret != -EACCES)	/* (refused credentials need no more words) */
				log_err("datastore %s: ... the repository's files kept in Git LFS "
					"(%s, ...) need that server: name another with lfs_url, or "
					"set lfs = false to show their pointers", o->name,
					want[0]->path);
		} else
			answer = resp.body ? json_loads(resp.body, 0, NULL) : NULL;
	}
	list = json_object_get(answer, "objects");
	if (ret == 0 && !json_is_array(list)) {
		log_err("datastore %s: commit %s: Git LFS batch request to %s: the answer is not a "
			"batch response", o->name, o->commit, LFS_SHOWN(shown, url));
		ret = -EIO;
	}
	answers = ret == 0 ? calloc(n, sizeof(*answers)) : NULL;
	if (ret == 0 && !answers)
		ret = -ENOMEM;
	for (i = 0; ret == 0 && i < n; i++) {
		json_t *v;
		size_t k;

		json_array_foreach(list, k, v)
			if (!answers[i] && lfs_find(want[i], 1, json_string_value(
							json_object_get(v, "oid"))))
				answers[i] = v;	/* (a search of one: want[i] names it) */
		if (!answers[i]) {
			log_err("datastore %s: commit %s: Git LFS object of %s: not in the server's "
				"batch answer", o->name, o->commit, want[i]->path);
			ret = -EIO;
		}
	}
	if (ret == 0)
		ret = lfs_take_all(run, want, answers, n);
	free(answers);
	remote_resp_free(&resp);
	json_decref(answer);
	json_decref(objs);
	free(body);
	free(url);
	return ret;
}

/* Copies @src to a new file @dst of mode @mode. */
static int lfs_copy(const char *src, const char *dst, mode_t mode)
{
	int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, ret = 0;
	ssize_t n;

	if (in < 0)
		return -errno;
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (out < 0)
		ret = -errno;
	while (ret == 0 && (n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0)) != 0)
		if (n < 0)
			ret = -errno;
	close(in);
	if (out >= 0 && close(out) < 0 && ret == 0)
		ret = -errno;
	return ret;
}

/* Puts the stored object of @obj in place of its pointer under @top. */
static int lfs_place(const struct be_git_lfs_opts *o, const char *top,
		     const struct be_git_lfs_obj *obj)
{
	char *src = lfs_store_path(o, obj->oid, ""), *dst = NULL;
	int ret = src && path_join(&dst, top, obj->path) == 0 ? 0 : -ENOMEM;

	if (ret == 0 && unlink(dst) < 0)
		ret = -errno;
	/* the store's objects are 0444: an executable gets a copy of its own */
	if (ret == 0)
		ret = obj->exec ? lfs_copy(src, dst, 0555) : link(src, dst) < 0 ? -errno : 0;
	if (ret == -EMLINK)
		ret = lfs_copy(src, dst, 0444);
	if (ret < 0)
		log_err("datastore %s: commit %s: Git LFS object of %s: %s", o->name, o->commit,
			obj->path, strerror(-ret));
	free(src);
	free(dst);
	return ret;
}

int be_git_lfs_fetch(const struct be_git_lfs_opts *o, const char *top,
		     const struct be_git_lfs_obj *objs, size_t n)
{
	struct lfs_run run = { .o = o };
	const struct be_git_lfs_obj **want = calloc(n ? n : 1, sizeof(*want));
	char *endpoint = NULL, shown[1024];
	size_t n_want = 0;
	int ret = want ? path_mkdirs(o->store, 0755) : -ENOMEM;

	for (size_t i = 0; ret == 0 && i < n; i++)
		if (!lfs_stored(o, &objs[i]) && lfs_find(objs, i, objs[i].oid) == NULL)
			want[n_want++] = &objs[i];	/* each object once, by its first path */
	if (ret == 0 && n_want > 0) {
		struct remote_opts ro = { .name = o->name, .timeout = o->timeout,
					  .retries = o->retries, .requests = o->requests };

		endpoint = lfs_endpoint_of(o, top);
		if (!endpoint) {
			log_err("datastore %s: commit %s: %zu Git LFS object(s), the first %s, and no "
				"LFS server for %s: set lfs_url (or lfs = false to keep the "
				"pointers)", o->name, o->commit, n_want, want[0]->path,
				LFS_SHOWN(shown, o->remote));
			ret = -EINVAL;
		}
		run.endpoint = endpoint;
		if (ret == 0)
			ret = remote_create(&run.anon, &ro);
		ro.basic = o->token != NULL;
		ro.user = o->token ? (o->user ? o->user : "git") : NULL;
		ro.password = o->token;
		if (ret == 0)
			ret = remote_create(&run.auth, &ro);
	}
	if (ret == 0 && n_want > 0) {
		int64_t bytes = 0;

		for (size_t i = 0; i < n_want; i++)
			bytes += want[i]->size;
		log_info("datastore %s: commit %s: fetching %zu Git LFS object(s), %lld bytes, from "
			 "%s", o->name, o->commit, n_want, (long long)bytes,
			 LFS_SHOWN(shown, endpoint));
	}
	for (size_t i = 0; ret == 0 && i < n_want; i += LFS_BATCH_MAX)
		ret = lfs_batch(&run, want + i, n_want - i < LFS_BATCH_MAX ? n_want - i :
						LFS_BATCH_MAX);
	for (size_t i = 0; ret == 0 && i < n; i++)
		ret = lfs_place(o, top, &objs[i]);
	if (ret == 0)
		log_info("datastore %s: commit %s: %zu Git LFS object(s) in place, %zu fetched "
			 "(%lld bytes)%s%s", o->name, o->commit, n, run.fetched,
			 (long long)run.bytes, endpoint ? " from " : "",
			 endpoint ? LFS_SHOWN(shown, endpoint) : "");
	if (run.auth)
		remote_destroy(run.auth);
	if (run.anon)
		remote_destroy(run.anon);
	free(endpoint);
	free(want);
	return ret;
}
#endif
