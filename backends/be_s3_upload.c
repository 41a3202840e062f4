/*
 * be_s3_upload.c - what the S3 backend does with a file opened for
 * writing: a staging file under state_dir/staging (O_TMPFILE, else an
 * unlinked mkostemp file, so nothing is left behind by a crash), filled
 * from the object unless opened with O_TRUNC, listed among the datastore's
 * writers so stat sees the staged size, and uploaded when it has changed
 * since the last upload: one PUT below 8 MiB, else a multipart upload
 * whose parts (at most 9000, at least 8 MiB each) go up from a few threads
 * at once, aborted when any part or the completion fails.
 *
 * The upload runs from flush and fsync, never from release, so close(2)
 * reports its failure; release only warns when changes were never
 * uploaded.
 *
 * Not here: the backend ops that call this (be_s3.c); the request, URL and
 * error helpers (be_s3_req.c); the CompleteMultipartUpload body
 * (be_s3_xml.c).
 *
 * Threading: the writers list has its own mutex, never held across I/O.
 * One upload runs on the calling thread plus up to BE_S3_PART_THREADS
 * part threads, which share only the upload's atomics (the next part, the
 * first error) and each write their own part's ETag slot.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "be_s3_int.h"
#include "log.h"
#include "remote.h"

#define BE_S3_SMALL_PUT		(8u << 20)	/* below: one PUT; else multipart */
#define BE_S3_MAX_PARTS		9000u		/* S3 allows 10,000 */
#define BE_S3_PART_THREADS	4

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

void be_s3_writer_remove(struct be_s3_file *f)
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
int be_s3_open_write(struct be_s3_file *f, int flags)
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

/* POST ?uploadId=: S3 may answer 200 and still put an <Error> in the body. */
static int be_s3_mpu_complete(struct be_s3_mpu *u)
{
	const char *q[] = { "uploadId", u->upload_id, NULL };
	const char *headers[] = { "Content-Type: application/xml", NULL };
	struct remote_req req = { .method = REMOTE_POST, .headers = headers, .body_fd = -1,
		.max_body = 1 << 20 };
	struct remote_resp resp;
	char code[64];
	char *body = be_s3_mpu_body(u->etags, u->n_parts, &req.body_len);
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
int be_s3_upload(struct be_s3_file *f)
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
		ret = be_s3_put(s3, f->key, f->fd, (size_t)st.st_size);
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
