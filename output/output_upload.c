/*
 * output_upload.c - sending one staged output to its destination.
 *
 * The destination (DESIGN §5) becomes a backend and a folder in it:
 *   s3          s3://BUCKET/PREFIX/: a datastore of that bucket lends its
 *               endpoint and keys (config_add_job_source), else AWS_*
 *   datastore   NAME:/folder/ of any configured datastore
 *   local       an absolute folder, made when missing
 *   dataset, checkpoint, model   STORE:/datasets/NAME/ (and so on), in the
 *               datastore `[mlfs] store` names, where later jobs and the
 *               gateway find it by name
 * s3 and local are zipped (libarchive) as <job>.zip or <job>_<worker>.zip
 * unless "archive": false; the rest are plain files.
 *
 * Each file goes up resumably: through the backend's own upload (S3:
 * multipart, the finished parts named in its token) or else written to
 * NAME.mlfs-part with pwrite, fsync'd and its offset saved every
 * OUT_SAVE_EVERY bytes, then renamed over NAME.  The journal (output.c)
 * records each file once it is in place, so a later attempt, `mlfs sync`
 * or the next mount sends only what is missing.
 *
 * Symlinks left in files/ are never followed: the walk opens every name
 * beneath files/ with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) and
 * skips links with a warning, so an upload running as root cannot be made
 * to read what a link names.
 */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "archive_err.h"
#include "backoff.h"
#include "backend.h"
#include "config.h"
#include "diag.h"
#include "log.h"
#include "output_int.h"
#include "path.h"
#include "mono.h"
#include "spec.h"

#define OUT_CHUNK	(4u << 20)	/* bytes per pwrite of a plain upload */
#define OUT_SAVE_EVERY	(64u << 20)	/* fsync and save the offset this often */

/* ---- the staged files ---- */

struct out_entry {
	char *rel;		/* path beneath files/ */
	bool dir;
	uint64_t size;
	time_t mtime;
	mode_t mode;
};

struct out_walk {
	struct out_entry *e;
	size_t n, cap;
	uint64_t total;
	unsigned int skipped;
};

/* Opens @rel beneath @root without following any symlink on the way. */
static int out_open_beneath(int root, const char *rel, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));

	if (fd < 0 && errno == ENOSYS)
		fd = openat(root, rel, flags | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int out_walk_add(struct out_walk *w, const char *rel, const struct stat *st)
{
	struct out_entry *e;

	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;

		e = reallocarray(w->e, cap, sizeof(*e));
		if (!e)
			return -ENOMEM;
		w->e = e;
		w->cap = cap;
	}
	e = &w->e[w->n];
	e->rel = strdup(rel);
	if (!e->rel)
		return -ENOMEM;
	e->dir = S_ISDIR(st->st_mode);
	e->size = e->dir ? 0 : (uint64_t)st->st_size;
	e->mtime = st->st_mtime;
	e->mode = st->st_mode & 07777;
	w->total += e->size;
	w->n++;
	return 0;
}

static void out_walk_free(struct out_walk *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->e[i].rel);
	free(w->e);
	memset(w, 0, sizeof(*w));
}

/* Lists folder @rel ("" for files/ itself) of @root, depth first, sorted by name. */
static int out_walk_dir(struct out_walk *w, int root, const char *rel, const struct output *o)
{
	int fd = rel[0] ? out_open_beneath(root, rel, O_RDONLY | O_DIRECTORY) : dup(root);
	struct dirent **names = NULL;
	int n, ret = 0;

	if (fd < 0)
		return rel[0] ? fd : -errno;
	n = scandirat(fd, ".", &names, NULL, alphasort);
	if (n < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		struct stat st;
		char *sub = NULL;

		if (ret < 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			goto next;
		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			ret = -errno;
			goto next;
		}
		if (path_join(&sub, rel, name) < 0) {
			ret = -ENOMEM;
			goto next;
		}
		if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
			ret = out_walk_add(w, sub, &st);
			if (ret == 0 && S_ISDIR(st.st_mode))
				ret = out_walk_dir(w, root, sub, o);
		} else {
			log_warn("output %s: %s is %s; not uploaded (links are never followed)",
				 o->id, sub, S_ISLNK(st.st_mode) ? "a symlink" : "not a file or folder");
			w->skipped++;
		}
next:
		free(sub);
		free(names[i]);
	}
	free(names);
	close(fd);
	return ret;
}

/* ---- one attempt ---- */

struct out_run {
	struct output *o;
	struct mlfs_config *cfg;
	output_progress_fn *fn;
	void *arg;
	char *err;
	size_t errsize;

	int files_fd;		/* files/ */
	struct backend *be;	/* the destination */
	char *base;		/* the folder in it */
	char **done;		/* journal: files in place */
	size_t n_done;
	bool zipped;
	bool complete;		/* journal: the upload was done before */
	uint64_t total, sent;	/* bytes: all, and in place before the current file */
	int64_t last_ns;	/* the last progress report (mono_ns) */
	const char *phase;
};

__attribute__((format(printf, 3, 4)))
static int out_fail(struct out_run *r, int ret, const char *fmt, ...)
{
	va_list ap;

	if (r->err && r->errsize && !r->err[0]) {
		va_start(ap, fmt);
		vsnprintf(r->err, r->errsize, fmt, ap);
		va_end(ap);
	}
	return ret;
}

static void out_progress(struct out_run *r, uint64_t done, bool force)
{
	int64_t now = mono_ns();

	if (!force && now - r->last_ns < 1000000000)
		return;
	r->last_ns = now;
	output_progress_write(r->o, r->phase, done, r->total, NULL);
	if (r->fn)
		r->fn(r->arg, r->o, r->phase, done, r->total);
}

static void out_journal_fn(void *arg, json_t *e)
{
	struct out_run *r = arg;
	const char *rel = json_string_value(json_object_get(e, "done"));
	char **done;

	if (json_object_get(e, "zipped"))
		r->zipped = true;
	if (json_object_get(e, "complete"))
		r->complete = true;
	if (!rel)
		return;
	done = reallocarray(r->done, r->n_done + 1, sizeof(*done));
	if (!done)
		return;		/* sent again: slower, still correct */
	r->done = done;
	done[r->n_done] = strdup(rel);
	if (done[r->n_done])
		r->n_done++;
}

static int out_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether the journal lists @rel as in place (r->done is sorted once it is read). */
static bool out_is_done(const struct out_run *r, const char *rel)
{
	return r->n_done && bsearch(&rel, r->done, r->n_done, sizeof(*r->done), out_cmp);
}

/* The resume token saved for @rel, or NULL. */
static char *out_resume_load(struct out_run *r, const char *rel)
{
	char *path, *token = NULL;
	json_t *j;

	if (asprintf(&path, "%s/resume.json", r->o->dir) < 0)
		return NULL;
	j = json_load_file(path, 0, NULL);
	free(path);
	if (j && json_string_value(json_object_get(j, "file")) &&
	    strcmp(json_string_value(json_object_get(j, "file")), rel) == 0 &&
	    json_string_value(json_object_get(j, "token")))
		token = strdup(json_string_value(json_object_get(j, "token")));
	json_decref(j);
	return token;
}

struct out_saver {
	struct out_run *r;
	const char *rel;
};

static int out_resume_save(void *arg, const char *token, uint64_t done)
{
	struct out_saver *s = arg;
	json_t *j = json_pack("{s:s, s:s, s:I}", "file", s->rel, "token", token,
			      "done", (json_int_t)done);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int ret = text ? output_write_file(s->r->o->dir, "resume.json", text, true) : -ENOMEM;

	free(text);
	json_decref(j);
	out_progress(s->r, s->r->sent + done, false);
	return ret;
}

/* The generic way: NAME.mlfs-part written from @off on, fsync'd, renamed over NAME. */
static int out_put_plain(struct out_run *r, const char *dst, int fd, uint64_t size,
			 struct out_saver *saver, const char *resume)
{
	struct backend_cred cred = { r->o->uid, r->o->gid };
	struct backend_file *bf = NULL;
	uint64_t off = 0, saved = 0;
	char *part, token[64], *buf = NULL;
	struct stat st;
	int ret;

	if (asprintf(&part, "%s.mlfs-part", dst) < 0)
		return -ENOMEM;
	if (resume && sscanf(resume, "offset=%" SCNu64, &off) == 1 &&
	    backend_open(&bf, r->be, part, O_WRONLY) == 0 && backend_fgetattr(bf, &st) == 0 &&
	    (uint64_t)st.st_size >= off) {
		saved = off;	/* what was fsync'd before is there: go on after it */
	} else {
		backend_release(bf);
		bf = NULL;
		off = 0;
		ret = backend_create_file(&bf, r->be, part, O_WRONLY | O_CREAT | O_TRUNC, 0644,
					  &cred);
		if (ret < 0)
			goto out;
	}
	buf = malloc(OUT_CHUNK);
	ret = buf ? 0 : -ENOMEM;
	while (ret == 0 && off < size) {
		size_t want = size - off < OUT_CHUNK ? (size_t)(size - off) : OUT_CHUNK;
		ssize_t n = pread(fd, buf, want, (off_t)off);
		ssize_t w;

		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;	/* shrank under us: staging is not a live file */
			break;
		}
		for (ssize_t put = 0; ret == 0 && put < n; put += w) {
			w = backend_pwrite(bf, buf + put, (size_t)(n - put), (off_t)(off + (uint64_t)put));
			if (w <= 0)
				ret = w < 0 ? (int)w : -EIO;
		}
		off += (uint64_t)n;
		if (ret == 0 && (off - saved >= OUT_SAVE_EVERY || off == size)) {
			ret = backend_fsync(bf, 0);
			snprintf(token, sizeof(token), "offset=%" PRIu64, off);
			if (ret == 0)
				ret = out_resume_save(saver, token, off);
			saved = off;
		}
		out_progress(r, r->sent + off, false);
	}
	if (ret == 0)
		ret = backend_flush(bf);
	backend_release(bf);
	bf = NULL;
	if (ret == 0)
		ret = backend_rename(r->be, part, dst, 0);
out:
	backend_release(bf);
	free(buf);
	free(part);
	return ret;
}

/* Sends one local file @fd of @size as @rel beneath the destination's folder. */
static int out_put(struct out_run *r, const char *rel, int fd, uint64_t size)
{
	struct out_saver saver = { r, rel };
	struct backend_upload u = { .save = out_resume_save, .arg = &saver };
	char *dst, *resume = out_resume_load(r, rel);
	int ret;

	if (path_join(&dst, r->base, rel) < 0) {
		free(resume);
		return -ENOMEM;
	}
	u.resume = resume;
	ret = backend_upload(r->be, dst, fd, size, &u);
	if (ret == -ENOTSUP)
		ret = out_put_plain(r, dst, fd, size, &saver, resume);
	if (ret == 0)
		ret = output_journal_add(r->o, json_pack("{s:s, s:I}", "done", rel,
							 "bytes", (json_int_t)size));
	else
		out_fail(r, ret, "%s: %s", dst, strerror(-ret));
	if (ret == 0)
		r->sent += size;
	free(dst);
	free(resume);
	return ret;
}

/* mkdir -p @path in the destination; what exists already is fine. */
static int out_mkdirs(struct out_run *r, const char *path)
{
	struct backend_cred cred = { r->o->uid, r->o->gid };
	char *p = strdup(path);
	int ret = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p; ret == 0 && *s; s++) {
		bool end = s[1] == '\0';

		if (*s != '/' && !end)
			continue;
		if (!end)
			*s = '\0';
		ret = backend_mkdir(r->be, p, 0755, &cred);
		if (ret == -EEXIST)
			ret = 0;
		if (!end)
			*s = '/';
	}
	free(p);
	return ret;
}

/* ---- zipping ---- */

static int out_zip_fail(struct out_run *r, struct archive *a, const char *what)
{
	int err = -mlfs_archive_errno(a, -EIO);
	const char *msg = archive_error_string(a);

	/* "Write error" alone would not say the disk is full */
	if (msg && err != EIO && !strstr(msg, strerror(err)))
		return out_fail(r, -err, "zip %s: %s: %s", what, msg, strerror(err));
	return out_fail(r, -err, "zip %s: %s", what, msg ?: strerror(err));
}

#define OUT_SAMPLE	(64u << 10)	/* bytes looked at to tell if a file compresses */

/*
 * Whether the file in @fd looks incompressible (weights, images, archives):
 * the entropy of its first OUT_SAMPLE bytes is over 7.5 bits a byte.  Such
 * a file is stored, not deflated: deflate would spend a second per 50 MB to
 * save nothing.
 */
static bool out_incompressible(int fd, char *buf)
{
	unsigned int count[256] = { 0 };
	ssize_t n = pread(fd, buf, OUT_SAMPLE, 0);
	double bits = 0;

	if (n < 4096)
		return false;
	for (ssize_t i = 0; i < n; i++)
		count[(unsigned char)buf[i]]++;
	for (int i = 0; i < 256; i++) {
		double p = (double)count[i] / (double)n;

		if (count[i])
			bits -= p * log2(p);
	}
	return bits > 7.5;
}

static int out_zip_entry(struct out_run *r, struct archive *a, const struct out_entry *e,
			 char *buf)
{
	struct archive_entry *ae = archive_entry_new();
	int fd = -1, ret = 0;

	if (!ae)
		return -ENOMEM;
	archive_entry_set_pathname(ae, e->rel);
	archive_entry_set_filetype(ae, e->dir ? AE_IFDIR : AE_IFREG);
	archive_entry_set_perm(ae, e->mode);
	archive_entry_set_size(ae, (la_int64_t)e->size);
	archive_entry_set_mtime(ae, e->mtime, 0);
	if (!e->dir) {
		fd = out_open_beneath(r->files_fd, e->rel, O_RDONLY);
		if (fd < 0) {
			ret = out_fail(r, fd, "%s: %s", e->rel, strerror(-fd));
			goto out;
		}
		/* Per entry, between entries (the writer's HEADER state, hence finish_entry). */
		if (archive_write_finish_entry(a) != ARCHIVE_OK ||
		    (out_incompressible(fd, buf) ? archive_write_zip_set_compression_store(a)
						 : archive_write_zip_set_compression_deflate(a))
		    != ARCHIVE_OK) {
			ret = out_zip_fail(r, a, e->rel);
			goto out;
		}
	}
	if (archive_write_header(a, ae) != ARCHIVE_OK) {
		ret = out_zip_fail(r, a, e->rel);
		goto out;
	}
	for (uint64_t off = 0; fd >= 0 && off < e->size;) {
		ssize_t n = pread(fd, buf, OUT_CHUNK, (off_t)off);

		if (n <= 0) {
			ret = out_fail(r, n < 0 ? -errno : -EIO, "%s: %s", e->rel,
				       n < 0 ? strerror(errno) : "shorter than when listed");
			break;
		}
		if (archive_write_data(a, buf, (size_t)n) != n) {
			ret = out_zip_fail(r, a, e->rel);
			break;
		}
		off += (uint64_t)n;
		out_progress(r, r->sent + off, false);
	}
	r->sent += e->size;
out:
	if (fd >= 0)
		close(fd);
	archive_entry_free(ae);
	return ret;
}

/* Zips @w into the output folder as @name: a temporary name, fsync, rename. */
static int out_zip(struct out_run *r, const struct out_walk *w, const char *name)
{
	struct archive *a = archive_write_new();
	char *tmp = NULL, *final = NULL, *buf = malloc(OUT_CHUNK);
	int fd = -1, ret = -ENOMEM;

	r->phase = "zipping";
	r->sent = 0;
	if (!a || !buf || asprintf(&tmp, "%s/.%s.tmp", r->o->dir, name) < 0 ||
	    asprintf(&final, "%s/%s", r->o->dir, name) < 0)
		goto out;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = out_fail(r, -errno, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	/* Level 1: model weights and logs barely shrink; time matters more. */
	if (archive_write_set_format_zip(a) != ARCHIVE_OK ||
	    archive_write_set_options(a, "zip:compression=deflate,zip:compression-level=1") != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
	    archive_write_open_fd(a, fd) != ARCHIVE_OK) {
		ret = out_zip_fail(r, a, name);
		goto out;
	}
	ret = 0;
	for (size_t i = 0; ret == 0 && i < w->n; i++)
		ret = out_zip_entry(r, a, &w->e[i], buf);
	if (ret == 0 && archive_write_close(a) != ARCHIVE_OK)
		ret = out_zip_fail(r, a, name);
	if (ret == 0 && fsync(fd) < 0)
		ret = out_fail(r, -errno, "%s: %s", tmp, strerror(errno));
	if (ret == 0 && rename(tmp, final) < 0)
		ret = out_fail(r, -errno, "%s: %s", final, strerror(errno));
	if (ret == 0) {
		struct stat st;

		ret = stat(final, &st) < 0 ? -errno
			: output_journal_add(r->o, json_pack("{s:I}", "zipped",
							     (json_int_t)st.st_size));
		r->zipped = ret == 0;	/* a retry sends this zip, never makes another */
		if (ret == 0)
			out_progress(r, r->sent, true);
	}
out:
	if (a)
		archive_write_free(a);
	if (fd >= 0)
		close(fd);
	if (ret < 0 && tmp)
		unlink(tmp);
	free(buf);
	free(tmp);
	free(final);
	return ret;
}

/* ---- the destination ---- */

/* What config_add_job_source is given for the destination of @o. */
static char *out_dest_value(struct out_run *r)
{
	const struct output *o = r->o;
	char *v;

	if (o->kind && o->kind->registered) {
		if (!r->cfg->store) {
			out_fail(r, -EINVAL, "a %s output needs [mlfs] store in %s: the datastore "
				 "that keeps registered outputs", o->type, r->cfg->file);
			return NULL;
		}
		return asprintf(&v, "%s:/%ss/%s", r->cfg->store, o->type, o->path) < 0 ? NULL : v;
	}
	if (o->kind && o->kind->as_written)
		return strdup(o->path);
	out_fail(r, -EINVAL, "output type '%s' is not one mlfs uploads to", o->type);
	return NULL;
}

static int out_dest_open(struct out_run *r)
{
	struct mlfs_config *cfg = r->cfg;
	char *value = out_dest_value(r), *name = NULL;
	struct diag d;
	size_t b;
	int src, ret;

	if (!value)
		return r->err[0] ? -EINVAL : -ENOMEM;
	diag_init(&d);
	if (r->o->kind->makes_folder && (ret = path_mkdirs(value, 0755)) < 0) {
		out_fail(r, ret, "%s: %s", value, strerror(-ret));
		goto out;
	}
	ret = asprintf(&name, "upload %s", r->o->id) < 0 ? -ENOMEM : 0;
	if (ret == 0)
		ret = src = config_add_job_source(cfg, SOURCE_DATASET, name, value, r->o->config,
						  "data.output.path", &d);
	if (ret < 0) {
		out_fail(r, ret, "%s", d.n ? d.msgs[0] : strerror(-ret));
		goto out;
	}
	for (b = 0; strcmp(cfg->datastores[b].name, cfg->sources[src].datastore) != 0; b++)
		;
	ret = backend_create(&r->be, &cfg->datastores[b], (unsigned int)b + 1);
	if (ret < 0) {
		out_fail(r, ret, "datastore %s: %s", cfg->datastores[b].name, strerror(-ret));
		goto out;
	}
	r->base = strdup(cfg->sources[src].path);
	ret = r->base ? 0 : -ENOMEM;
	if (ret == 0 && r->base[0] && (ret = out_mkdirs(r, r->base)) < 0)
		out_fail(r, ret, "%s: cannot make %s: %s", value, r->base, strerror(-ret));
out:
	diag_free(&d);
	free(name);
	free(value);
	return ret;
}

/* ---- one attempt, then the retries ---- */

static int out_send_zip(struct out_run *r, const struct out_walk *w)
{
	char name[NAME_MAX + 1], *path;
	struct stat st;
	int fd, ret;

	ret = output_zip_name(r->o, name, sizeof(name));
	if (ret < 0)
		return out_fail(r, ret, "job name too long for a zip name");
	if (asprintf(&path, "%s/%s", r->o->dir, name) < 0)
		return -ENOMEM;
	if (!r->zipped || stat(path, &st) < 0)
		ret = out_zip(r, w, name);
	r->phase = "uploading";
	r->sent = 0;
	fd = ret == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (ret == 0 && (fd < 0 || fstat(fd, &st) < 0))
		ret = out_fail(r, -errno, "%s: %s", path, strerror(errno));
	if (ret == 0) {
		r->total = (uint64_t)st.st_size;
		ret = out_is_done(r, name) ? 0 : out_put(r, name, fd, (uint64_t)st.st_size);
	}
	if (fd >= 0)
		close(fd);
	free(path);
	return ret;
}

static int out_send_files(struct out_run *r, const struct out_walk *w)
{
	int ret = 0;

	r->phase = "uploading";
	r->sent = 0;
	for (size_t i = 0; ret == 0 && i < w->n; i++) {
		const struct out_entry *e = &w->e[i];
		char *dst;
		int fd;

		if (out_is_done(r, e->rel)) {
			r->sent += e->size;
			continue;
		}
		if (e->dir) {
			if (path_join(&dst, r->base, e->rel) < 0)
				return -ENOMEM;
			/* Object stores have no folders: a file's key makes its folder. */
			ret = r->be->ops->upload ? 0 : out_mkdirs(r, dst);
			if (ret < 0)
				out_fail(r, ret, "%s: %s", dst, strerror(-ret));
			free(dst);
			continue;
		}
		fd = out_open_beneath(r->files_fd, e->rel, O_RDONLY);
		if (fd < 0)
			return out_fail(r, fd, "%s: %s", e->rel, strerror(-fd));
		ret = out_put(r, e->rel, fd, e->size);
		close(fd);
	}
	return ret;
}

static int out_attempt(struct out_run *r)
{
	struct out_walk w = { 0 };
	char *files = output_files(r->o);
	int ret;

	r->err[0] = '\0';
	if (!files)
		return -ENOMEM;
	r->files_fd = open(files, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (r->files_fd < 0) {
		ret = out_fail(r, -errno, "%s: %s", files, strerror(errno));
		free(files);
		return ret;
	}
	free(files);
	ret = out_walk_dir(&w, r->files_fd, "", r->o);
	if (ret < 0)
		out_fail(r, ret, "listing the staged output: %s", strerror(-ret));
	r->total = w.total;
	if (ret == 0 && !r->be)
		ret = out_dest_open(r);
	if (ret == 0)
		ret = r->o->archive && r->o->kind->zips ? out_send_zip(r, &w) : out_send_files(r, &w);
	out_walk_free(&w);
	close(r->files_fd);
	r->files_fd = -1;
	return ret;
}

/* Failures worth another attempt: the network, a server restarting. */
static bool out_retryable(int err)
{
	switch (-err) {
	case EIO: case ETIMEDOUT: case ECONNREFUSED: case ECONNRESET: case ECONNABORTED:
	case EHOSTUNREACH: case ENETUNREACH: case ENETDOWN: case EAGAIN: case ENOTCONN:
	case EPIPE: case ESTALE:
		return true;
	default:
		return false;
	}
}

/* Once everything is safe: the staged copies go, the record stays. */
static void out_cleanup(struct output *o)
{
	char *files = output_files(o), name[NAME_MAX + 1], *zip = NULL;

	if (files)
		path_remove_tree(files);
	if (output_zip_name(o, name, sizeof(name)) == 0 &&
	    asprintf(&zip, "%s/%s", o->dir, name) >= 0)
		unlink(zip);
	free(zip);
	free(files);
}

int output_upload(struct output *o, struct mlfs_config *cfg, output_progress_fn *fn, void *arg,
		  char *err, size_t errsize)
{
	char scratch[512];
	struct out_run r = { .o = o, .cfg = cfg, .fn = fn, .arg = arg, .err = err ? err : scratch,
		.errsize = err ? errsize : sizeof(scratch), .files_fd = -1, .phase = "uploading" };
	long retries = cfg->retries >= 0 ? cfg->retries : 3;
	int lock, ret;

	r.err[0] = '\0';
	if (output_live(o->dir))
		return out_fail(&r, -EBUSY, "still mounted: unmount the worker's view first");
	lock = output_lock(o->dir, "upload.lock", false);
	if (lock == -EWOULDBLOCK) {
		log_info("output %s: another process is uploading it; waiting", o->id);
		lock = output_lock(o->dir, "upload.lock", true);
	}
	if (lock < 0)
		return out_fail(&r, lock, "upload.lock: %s", strerror(-lock));
	ret = output_journal_read(o, out_journal_fn, &r);
	if (r.n_done)
		qsort(r.done, r.n_done, sizeof(*r.done), out_cmp);
	if (ret == 0 && r.complete)
		goto out;
	if (ret == 0 && o->kind && o->kind->kept) {
		/* No destination named: the staged files stay where they are, for the user. */
		ret = output_journal_add(o, json_pack("{s:I, s:b}", "complete", (json_int_t)time(NULL),
						      "kept", 1));
		if (ret == 0)
			output_progress_write(o, "kept", 0, 0, NULL);
		goto out;
	}
	for (long attempt = 0; ret == 0; attempt++) {
		ret = out_attempt(&r);
		if (ret == 0 || !out_retryable(ret) || attempt >= retries)
			break;
		unsigned int seed = 0;	/* not jittered */
		long wait_ms = backoff_ms(&BACKOFF_UPLOAD, attempt, &seed);

		log_warn("output %s: %s; trying again in %ld s (%ld of %ld)", o->id, r.err,
			 wait_ms / 1000, attempt + 1, retries);
		output_progress_write(o, "retrying", r.sent, r.total, r.err);
		backoff_sleep_ms(wait_ms);
		ret = 0;
	}
	if (ret == 0)
		ret = output_journal_add(o, json_pack("{s:I}", "complete", (json_int_t)time(NULL)));
	if (ret == 0) {
		r.phase = "done";
		out_progress(&r, r.total, true);
		out_cleanup(o);
	} else {
		if (!r.err[0])
			out_fail(&r, ret, "%s", strerror(-ret));
		output_progress_write(o, "failed", r.sent, r.total, r.err);
	}
out:
	for (size_t i = 0; i < r.n_done; i++)
		free(r.done[i]);
	free(r.done);
	backend_destroy(r.be);
	free(r.base);
	close(lock);
	return ret;
}

/* ---- every pending output ---- */

struct out_sync {
	struct mlfs_config *cfg;
	output_progress_fn *fn;
	void *arg;
	int failed;
	unsigned int live;
};

static int out_sync_one(void *arg, const char *dir)
{
	struct out_sync *s = arg;
	struct output *o;
	char err[512];
	int ret;

	if (output_open(&o, dir) < 0)
		return 0;	/* not an output folder, or one still being made */
	if (output_complete(o)) {
		output_free(o);
		return 0;
	}
	if (output_live(dir)) {
		s->live++;
		output_free(o);
		return 0;
	}
	ret = output_upload(o, s->cfg, s->fn, s->arg, err, sizeof(err));
	if (ret < 0) {
		log_err("output %s (job %s, worker %u) to %s %s: %s; staged output kept in %s",
			o->id, o->job, o->worker, o->type, o->path, err, dir);
		s->failed++;
	}
	output_free(o);
	return 0;
}

int output_sync_all(struct mlfs_config *cfg, output_progress_fn *fn, void *arg,
		    unsigned int *n_live)
{
	struct out_sync s = { .cfg = cfg, .fn = fn, .arg = arg };
	int ret = output_each(cfg->state_dir, out_sync_one, &s);

	if (n_live)
		*n_live = s.live;
	if (ret < 0) {
		log_err("%s/outputs: %s", cfg->state_dir, strerror(-ret));
		return s.failed + 1;
	}
	return s.failed;
}
