/*
 * be_s3_upload.c - what the S3 backend does with a file opened for
 * writing: a staging file under state_dir/staging (O_TMPFILE, else an
 * unlinked mkostemp file, so nothing is left behind by a crash), filled
 * from the object unless opened with O_TRUNC, listed among the datastore's
 * writers so stat sees the staged size, and uploaded when it has changed
 * since the last upload: one PUT below 8 MiB, else a multipart upload
 * whose parts (at most 3,964, at least 8 MiB each) go up from a few threads
 * at once, aborted when any part or the completion fails.  A completion
 * counts only once a HEAD finds the object at its full size.
 *
 * The upload runs from flush and fsync, never from release, so close(2)
 * reports its failure; release only warns when changes were never
 * uploaded.
 *
 * It also holds the ops table's upload (be_s3_upload_fd): a local file
 * sent the same way, but resumable.  After each part it hands the caller a
 * token (be_s3.h: the upload id, the sizes, each part sent and its ETag);
 * given that token back, a later upload, in this process or after a crash,
 * sends only the parts it does not list.  So this upload is never aborted:
 * a failure leaves it for the next attempt to finish.  When S3 no longer
 * knows it (NoSuchUpload), one new upload starts from the first part.
 *
 * Not here: the backend ops that call this (be_s3.c); the request, URL and
 * error helpers (be_s3_req.c); the CompleteMultipartUpload body
 * (be_s3_xml.c); where tokens are kept (the caller).
 *
 * Threading: the writers list has its own mutex, never held across I/O.
 * One upload runs on the calling thread plus up to BE_S3_PART_THREADS
 * part threads, which share the upload's atomics (the next part, the
 * first error) and, under its saver's lock, the parts' ETag slots and the
 * calls to save (which write the caller's disk, never the network).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "be_s3_int.h"
#include "log.h"
#include "remote.h"

#define BE_S3_SMALL_PUT		(8u << 20)	/* below: one PUT; else multipart */
#define BE_S3_PART_SIZE		(8u << 20)	/* the smallest part cut here */
#define BE_S3_PART_MIN		(5u << 20)	/* S3's smallest part, but for the last */
#define BE_S3_PART_MAX		(5ull << 30)	/* S3's largest part */
/*
 * Parts at most (S3 allows 10,000): few enough that a token listing every
 * one ("NNNN=ETAG\n" each, after a header shorter than two ids) fits in
 * BACKEND_RESUME_MAX: 3,964 parts, so 8 MiB parts up to 31 GiB.
 */
#define BE_S3_MAX_PARTS	((BACKEND_RESUME_MAX - 2 * BE_S3_UPLOAD_ID_MAX) / (BE_S3_ETAG_MAX + 8))
#define BE_S3_PART_THREADS	4

/* ---- files opened for writing: staging ---- */

/* remote_load_fn: the whole object as it is now (a HEAD) into staging file @fd, streamed. */
static int be_s3_download(void *arg, int fd)
{
	struct be_s3_file *f = arg;
	struct remote_to_fd t = { .fd = fd };
	int ret = be_s3_file_meta(f, false);
	ssize_t n;

	if (ret < 0 || f->size == 0)
		return ret;
	n = be_s3_get(f, NULL, (size_t)f->size, 0, remote_sink_fd, &t);
	if (n < 0)
		return (int)n;
	return t.off == f->size ? 0 : -EIO;
}

/*
 * Opens @f for writing: the stage its path's other opens share, else a new
 * one, empty with O_TRUNC (and then dirty: the truncation itself must reach
 * the bucket), else a copy of the object.
 */
int be_s3_open_write(struct be_s3_file *f, int flags)
{
	struct be_s3 *s3 = be_s3(f->base.be);
	int ret = remote_writers_open(&s3->writers, s3->staging, f->path, flags & O_TRUNC,
				      be_s3_download, f, &f->st);

	f->writing = ret == 0;
	return ret;
}

/* ---- the resume token (be_s3.h says its format) ---- */

/*
 * The value of the line "NAME=VALUE" at *p, its length in *len (0 when the
 * line is not there, and NULL returned); *p moves past the line.
 */
static const char *be_s3_token_value(const char **p, const char *name, size_t *len)
{
	size_t n = strlen(name);
	const char *v;

	*len = 0;
	if (strncmp(*p, name, n) != 0 || (*p)[n] != '=')
		return NULL;
	v = *p + n + 1;
	*len = strcspn(v, "\n");
	*p = v + *len + (v[*len] == '\n');
	return v;
}

/* @len decimal digits at @v, no sign, no overflow (19 digits at most). 0 or -EINVAL. */
static int be_s3_token_number(const char *v, size_t len, uint64_t *out)
{
	uint64_t n = 0;

	if (len == 0 || len > 19)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -EINVAL;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	*out = n;
	return 0;
}

int be_s3_token_plan(struct be_s3_token *t, uint64_t size)
{
	memset(t, 0, sizeof(*t));
	t->size = size;
	t->part_size = size / BE_S3_MAX_PARTS + 1;
	if (t->part_size < BE_S3_PART_SIZE)
		t->part_size = BE_S3_PART_SIZE;
	t->n_parts = (unsigned int)((size + t->part_size - 1) / t->part_size);
	t->etags = calloc(t->n_parts ? t->n_parts : 1, sizeof(*t->etags));
	return t->etags ? 0 : -ENOMEM;
}

/* The header lines of a token into @t. 0 or -EINVAL. */
static int be_s3_token_header(struct be_s3_token *t, const char **p)
{
	const char *id, *part_size, *size;
	size_t id_len, part_size_len, size_len;
	uint64_t n_parts;

	if (strncmp(*p, "mpu 1\n", 6) != 0)
		return -EINVAL;
	*p += 6;
	id = be_s3_token_value(p, "id", &id_len);
	part_size = be_s3_token_value(p, "part_size", &part_size_len);
	size = be_s3_token_value(p, "size", &size_len);
	if (!id || !part_size || !size || id_len == 0 || id_len >= sizeof(t->upload_id) ||
	    be_s3_token_number(part_size, part_size_len, &t->part_size) < 0 ||
	    be_s3_token_number(size, size_len, &t->size) < 0)
		return -EINVAL;
	memcpy(t->upload_id, id, id_len);
	if (t->part_size < BE_S3_PART_MIN || t->part_size > BE_S3_PART_MAX || t->size == 0)
		return -EINVAL;
	n_parts = (t->size + t->part_size - 1) / t->part_size;
	if (n_parts > BE_S3_MAX_PARTS)
		return -EINVAL;
	t->n_parts = (unsigned int)n_parts;
	return 0;
}

/* One "PART=ETAG" line into its slot. 0 or -EINVAL. */
static int be_s3_token_part(struct be_s3_token *t, const char **p)
{
	size_t num_len = strcspn(*p, "=\n"), etag_len;
	const char *etag = *p + num_len + 1;
	uint64_t part;

	if ((*p)[num_len] != '=' || be_s3_token_number(*p, num_len, &part) < 0 ||
	    part == 0 || part > t->n_parts || t->etags[part - 1][0])
		return -EINVAL;
	etag_len = strcspn(etag, "\n");
	if (etag_len == 0 || etag_len >= sizeof(t->etags[0]))
		return -EINVAL;
	memcpy(t->etags[part - 1], etag, etag_len);
	*p = etag + etag_len + (etag[etag_len] == '\n');
	return 0;
}

int be_s3_token_parse(struct be_s3_token *t, const char *text)
{
	const char *p = text;
	int ret;

	memset(t, 0, sizeof(*t));
	ret = be_s3_token_header(t, &p);
	if (ret < 0)
		return ret;
	t->etags = calloc(t->n_parts, sizeof(*t->etags));
	if (!t->etags)
		return -ENOMEM;
	while (ret == 0 && *p)
		ret = be_s3_token_part(t, &p);
	if (ret < 0)
		be_s3_token_free(t);
	return ret;
}

int be_s3_token_print(const struct be_s3_token *t, char **out, uint64_t *done)
{
	char *text = NULL;
	size_t len = 0;
	uint64_t sum = 0;
	bool bad = !t->upload_id[0] || strchr(t->upload_id, '\n');
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return -ENOMEM;
	fprintf(f, "mpu 1\nid=%s\npart_size=%" PRIu64 "\nsize=%" PRIu64 "\n", t->upload_id,
		t->part_size, t->size);
	for (unsigned int i = 0; i < t->n_parts; i++) {
		if (!t->etags[i][0])
			continue;
		bad |= strchr(t->etags[i], '\n') != NULL;
		fprintf(f, "%u=%s\n", i + 1, t->etags[i]);
		sum += be_s3_token_part_len(t, i);
	}
	if (fclose(f) != 0) {
		free(text);
		return -ENOMEM;
	}
	if (bad || len >= BACKEND_RESUME_MAX) {
		free(text);
		return bad ? -EINVAL : -EOVERFLOW;
	}
	*out = text;
	*done = sum;
	return 0;
}

uint64_t be_s3_token_part_len(const struct be_s3_token *t, unsigned int i)
{
	uint64_t off = (uint64_t)i * t->part_size;

	return t->size - off < t->part_size ? t->size - off : t->part_size;
}

void be_s3_token_free(struct be_s3_token *t)
{
	free(t->etags);
	memset(t, 0, sizeof(*t));
}

/* ---- multipart upload ---- */

/* One multipart upload in flight. */
struct be_s3_mpu {
	struct be_s3 *s3;
	const char *key;
	int fd;
	struct remote_saver save;	/* where progress is saved */
	struct be_s3_token t;		/* the id and sizes, fixed while parts go up;
					 * save.lock: the ETag slots */
	unsigned int *todo;		/* the parts to send (indexes into t.etags) */
};

static void be_s3_mpu_init(struct be_s3_mpu *u, struct be_s3 *s3, const char *key, int fd,
			   const struct backend_upload *up)
{
	*u = (struct be_s3_mpu){ .s3 = s3, .key = key, .fd = fd };
	remote_saver_init(&u->save, up);
}

static void be_s3_mpu_fini(struct be_s3_mpu *u)
{
	be_s3_token_free(&u->t);
	free(u->todo);
	remote_saver_fini(&u->save);
}

/* A part that landed: its multipart upload and ETag. */
struct be_s3_landed {
	struct be_s3_mpu *u;
	const char *etag;
};

/* Records part @i's ETag (remote_landed_fn), and prints the token that lists it. */
static int be_s3_mpu_landed(void *arg, unsigned int i, char **token, uint64_t *done)
{
	struct be_s3_landed *l = arg;

	snprintf(l->u->t.etags[i], sizeof(l->u->t.etags[i]), "%s", l->etag);
	return token ? be_s3_token_print(&l->u->t, token, done) : 0;
}

static int be_s3_mpu_part(void *arg, unsigned int i)
{
	struct be_s3_mpu *u = arg;
	char num[16];
	const char *q[] = { "partNumber", num, "uploadId", u->t.upload_id, NULL };
	struct remote_req req = { .method = REMOTE_PUT, .body_fd = u->fd,
		.body_off = (off_t)((uint64_t)i * u->t.part_size),
		.body_len = (size_t)be_s3_token_part_len(&u->t, i), .max_body = 1 << 20 };
	struct remote_resp resp;
	int ret;

	snprintf(num, sizeof(num), "%u", i + 1);
	ret = be_s3_do(u->s3, &req, u->key, q, &resp);
	if (ret < 0)
		ret = be_s3_fail(u->s3, ret, &resp, "PUT part", u->key);
	else if (!resp.etag[0])
		ret = -EIO;
	else
		ret = remote_saver_landed(&u->save, be_s3_mpu_landed,
					  &(struct be_s3_landed){ .u = u, .etag = resp.etag }, i);
	remote_resp_free(&resp);
	return ret;
}

/* POST ?uploads: the upload's id into @u. */
static int be_s3_mpu_start(struct be_s3_mpu *u)
{
	const char *q[] = { "uploads", NULL, NULL };
	/* Else curl's POST says form data, and S3 keeps that as the object's type. */
	const char *headers[] = { "Content-Type: application/octet-stream", NULL };
	struct remote_req req = { .method = REMOTE_POST, .headers = headers, .body = "",
		.body_fd = -1, .max_body = 1 << 20 };
	struct remote_resp resp;
	int ret = be_s3_do(u->s3, &req, u->key, q, &resp);

	if (ret < 0)
		ret = be_s3_fail(u->s3, ret, &resp, "start multipart upload", u->key);
	else if (be_s3_xml_field(resp.body, resp.body_len, "InitiateMultipartUploadResult",
				 "UploadId", u->t.upload_id, sizeof(u->t.upload_id)) < 0)
		ret = -EIO;
	remote_resp_free(&resp);
	return ret;
}

/* POST ?uploadId=: S3 may answer 200 and still put an <Error> in the body. */
static int be_s3_mpu_complete(struct be_s3_mpu *u)
{
	const char *q[] = { "uploadId", u->t.upload_id, NULL };
	const char *headers[] = { "Content-Type: application/xml", NULL };
	struct remote_req req = { .method = REMOTE_POST, .headers = headers, .body_fd = -1,
		.max_body = 1 << 20 };
	struct remote_resp resp;
	char code[64];
	char *body = be_s3_mpu_body(u->t.etags, u->t.n_parts, &req.body_len);
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

/* DELETE ?uploadId=: S3 drops the parts sent; best effort (be_s3_fail logs a failure). */
static void be_s3_mpu_abort(struct be_s3_mpu *u)
{
	const char *q[] = { "uploadId", u->t.upload_id, NULL };

	be_s3_simple(u->s3, REMOTE_DELETE, u->key, q, NULL, "abort multipart upload");
}

/* Sends the parts that have no ETag yet, from this thread and a few more. */
static int be_s3_mpu_send(struct be_s3_mpu *u)
{
	unsigned int n_todo = 0;

	free(u->todo);
	u->todo = calloc(u->t.n_parts, sizeof(*u->todo));
	if (!u->todo)
		return -ENOMEM;
	for (unsigned int i = 0; i < u->t.n_parts; i++)
		if (!u->t.etags[i][0])
			u->todo[n_todo++] = i;
	return remote_parts_run(u->todo, n_todo, BE_S3_PART_THREADS + 1, be_s3_mpu_part, u);
}

/* Whether @key is already an object of @size bytes (a "done" token: saved, then a crash). */
static bool be_s3_upload_is_there(struct be_s3 *s3, const char *key, uint64_t size)
{
	struct be_s3_obj o;
	char etag[BE_S3_ETAG_MAX];

	return be_s3_head(s3, key, &o, etag, sizeof(etag)) == 0 && !o.is_dir &&
	       (uint64_t)o.size == size;
}

/*
 * After the server said @u is complete: a HEAD must find the object whole
 * (its size), else the upload is not done (-EIO) and stays resumable.  So an
 * upload is never called safe, nor a sync ends 0, on the word of a server
 * that answers before it serves the object, or never does.  One request per
 * multipart upload.
 */
static int be_s3_mpu_check(struct be_s3_mpu *u)
{
	if (be_s3_upload_is_there(u->s3, u->key, u->t.size))
		return 0;
	log_err("datastore %s: upload of %s: the server said multipart upload %.40s is complete, "
		"but it does not serve an object of %" PRIu64 " bytes there", u->s3->base.name,
		u->key, u->t.upload_id, u->t.size);
	return -EIO;
}

/* Starts @u unless it has an id already, sends the parts it lacks, completes it. */
static int be_s3_mpu_run(struct be_s3_mpu *u)
{
	int ret = u->t.upload_id[0] ? 0 : be_s3_mpu_start(u);

	if (ret == 0)
		ret = be_s3_mpu_send(u);
	if (ret == 0)
		ret = be_s3_mpu_complete(u);
	if (ret == 0)
		ret = be_s3_mpu_check(u);
	return ret;
}

/*
 * Sets @u up from the token @resume for an upload of @size bytes.  Returns
 * 1 when @u goes on with the token's upload (the parts it lists are not
 * sent again), 0 when @u starts afresh (no token, or one that does not
 * parse or names another size: then its upload, if any, is aborted), or
 * -ENOMEM.
 */
static int be_s3_mpu_resume(struct be_s3_mpu *u, const char *resume, uint64_t size)
{
	int ret;

	if (!resume)
		return be_s3_token_plan(&u->t, size);
	ret = be_s3_token_parse(&u->t, resume);
	if (ret == 0 && u->t.size == size)
		return 1;
	if (ret == -ENOMEM)
		return ret;
	log_debug("datastore %s: upload of %s: the resume token %s; starting afresh",
		  u->s3->base.name, u->key, ret == 0 ? "is for another size" : "does not parse");
	if (ret == 0) {
		be_s3_mpu_abort(u);
		be_s3_token_free(&u->t);
	}
	return be_s3_token_plan(&u->t, size);
}

/*
 * Whether the failure @ret of @u's upload says the upload itself is gone
 * (NoSuchUpload, or a 404), or, when @resumed, that S3 refuses a part the
 * token listed (InvalidPart, a 400): a new upload then succeeds where
 * resuming again would fail for ever.
 */
static bool be_s3_mpu_gone(const struct be_s3_mpu *u, int ret, bool resumed)
{
	return u->t.upload_id[0] && u->save.error == 0 &&
	       (ret == -ENOENT || (resumed && ret == -EINVAL));
}

/*
 * A multipart upload of @size bytes of @fd as @key.  With @up->save it is
 * resumable: it goes on from @up->resume, saves a token after each part
 * and is left as it is on failure, for a later attempt to finish; without,
 * a failure aborts it.  Either way an upload S3 no longer knows (or one
 * whose resumed parts it refuses) is started over once.
 */
static int be_s3_mpu_upload(struct be_s3 *s3, const char *key, int fd, uint64_t size,
			    const struct backend_upload *up)
{
	bool resumable = up && up->save, resumed;
	struct be_s3_mpu u;
	int ret;

	be_s3_mpu_init(&u, s3, key, fd, resumable ? up : NULL);
	ret = be_s3_mpu_resume(&u, up ? up->resume : NULL, size);
	resumed = ret == 1;
	if (ret >= 0)
		ret = be_s3_mpu_run(&u);
	if (be_s3_mpu_gone(&u, ret, resumed)) {
		log_info("datastore %s: upload of %s: multipart upload %.40s is gone (%s); "
			 "starting over", s3->base.name, key, u.t.upload_id, strerror(-ret));
		be_s3_token_free(&u.t);
		ret = be_s3_token_plan(&u.t, size);
		if (ret == 0)
			ret = be_s3_mpu_run(&u);
	}
	if (ret < 0 && !resumable && u.t.upload_id[0])
		be_s3_mpu_abort(&u);
	be_s3_mpu_fini(&u);
	return ret;
}

/* ---- the upload of a staged file (flush, fsync) ---- */

/* remote_upload_fn: the staging file @fd as @f's object. */
static int be_s3_upload_stage(void *arg, int fd, uint64_t size)
{
	struct be_s3_file *f = arg;
	struct be_s3 *s3 = be_s3(f->base.be);
	int ret;

	if (size < BE_S3_SMALL_PUT)
		ret = be_s3_put(s3, f->key, fd, (size_t)size);
	else
		ret = be_s3_mpu_upload(s3, f->key, fd, size, NULL);
	be_s3_meta_changed(s3, f->path);
	return ret;
}

/* Uploads @f's stage when it changed since the last upload (a writer's; a reader's never). */
int be_s3_upload(struct be_s3_file *f)
{
	return f->writing ? remote_stage_upload(f->st, f->base.be->name, be_s3_upload_stage, f) : 0;
}

/* ---- the ops table's upload: a local file, resumable ---- */

int be_s3_upload_fd(struct backend *be, const char *path, int fd, uint64_t size,
		    const struct backend_upload *u)
{
	struct be_s3 *s3 = be_s3(be);
	const char *resume = u ? u->resume : NULL;
	char *key;
	int ret;

	if (!*path)
		return -EISDIR;
	key = be_s3_key(s3, path, false);
	if (!key)
		return -ENOMEM;
	if (resume && strcmp(resume, "done") == 0 && be_s3_upload_is_there(s3, key, size))
		ret = 0;
	else if (size < BE_S3_SMALL_PUT)
		ret = be_s3_put(s3, key, fd, (size_t)size);
	else
		ret = be_s3_mpu_upload(s3, key, fd, size, u);
	be_s3_meta_changed(s3, path);
	if (ret == 0 && u && u->save)
		ret = u->save(u->arg, "done", size);
	free(key);
	return ret;
}
