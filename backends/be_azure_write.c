/*
 * be_azure_write.c - what the Azure Blob backend writes: files staged
 * while open (remote_stage.h) and uploaded when they changed (flush,
 * fsync, so close(2) reports a failure), folders as marker blobs, deletes
 * and renames.
 *
 * An upload below 8 MiB is one Put Blob.  A bigger one is a block blob:
 * blocks of 8 MiB (more when that would pass Azure's 50,000 blocks) sent
 * with Put Block from a few threads at once, then committed in order with
 * Put Block List.  A commit counts only once a HEAD finds the blob at its
 * full size.  Block ids are "mlfs" + a random nonce + the block's number,
 * base64: all of one length, as Azure wants, and new for each upload, so
 * two uploads never mix blocks.
 *
 * The ops table's upload (output/) is resumable: after each block it hands
 * the caller a token,
 *
 *	mlfs-azure-blocks 1
 *	size=BYTES
 *	block=BYTES
 *	nonce=16 HEX DIGITS
 *	sent=ONE '0' OR '1' PER BLOCK
 *
 * and given it back, after a crash too, sends only the blocks it does not
 * mark.  Azure keeps uncommitted blocks for a week; when the commit finds
 * them gone (InvalidBlockList, a 400) the upload starts over once, with a
 * new nonce.  A failure is never cleaned up: it stays resumable.
 *
 * Rename is Copy Blob (same account: Shared Key or the SAS authorizes the
 * source), waited for while Azure says "pending", then Delete Blob (a copy
 * that failed deletes its destination and keeps the source); a folder is
 * not renamed (EXDEV: mv copies it itself).  Azure keeps no
 * owner, mode or times: chmod and utimes do nothing, chown is refused.
 *
 * Threading: one upload runs on the calling thread plus a few block
 * threads, which share its saver's lock (the sent marks, calls to save).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "be_azure_int.h"
#include "log.h"
#include "mono.h"

#define BE_AZURE_SMALL_PUT	(8u << 20)	/* below: one Put Blob; else blocks */
#define BE_AZURE_BLOCK		(8u << 20)	/* the smallest block cut here */
#define BE_AZURE_BLOCKS_MAX	50000u		/* Azure's most blocks in a blob */
#define BE_AZURE_BLOCK_THREADS	5
#define BE_AZURE_ID_LEN		36		/* base64 of 27 bytes */

/* ---- small helpers ---- */

void be_azure_changed(struct be_azure *az, const char *path)
{
	remote_memo_forget(&az->memo, path);
}

/* The URL of blob @path with @query (and the SAS, when there is one). */
static char *be_azure_blob_url(const struct be_azure *az, const char *path, const char *query)
{
	char *base = be_azure_url(az, path, NULL), *url = NULL;

	if (base && asprintf(&url, "%s%s%s", base, strchr(base, '?') ? "&" : "?", query) < 0)
		url = NULL;
	free(base);
	return url;
}

/*
 * A request whose answer only matters as success or failure: @method at
 * @url with @extra headers and @len bytes of @fd (-1: none), failures
 * logged as @what of @path.  0 or -errno.
 */
static int be_azure_simple(struct be_azure *az, enum remote_method method, const char *url,
			   const char *const *extra, int fd, off_t off, size_t len,
			   const char *what, const char *path)
{
	struct remote_req req = { .method = method, .url = url, .body_fd = fd, .body_off = off,
				  .body_len = len, .max_body = 1 << 20 };
	struct remote_resp resp;
	int ret;

	if (!url)
		return -ENOMEM;
	ret = be_azure_do(az, &req, extra, &resp);
	if (ret < 0)
		be_azure_fail(az, what, path, ret, &resp);
	remote_resp_free(&resp);
	return ret;
}

/* One Put Blob of @size bytes of @fd at blob @name; @size 0 (any @fd): an empty blob. */
static int be_azure_put(struct be_azure *az, const char *name, int fd, size_t size)
{
	char length[48];
	const char *extra[] = { "x-ms-blob-type: BlockBlob", length, NULL };
	char *url = be_azure_url(az, name, NULL);
	int ret;

	/* Shared Key signs an empty Content-Length for 0 bytes: say none */
	snprintf(length, sizeof(length), "Content-Length: %zu", size);
	if (size == 0)
		extra[1] = NULL;
	ret = be_azure_simple(az, REMOTE_PUT, url, extra, size ? fd : -1, 0, size, "Put Blob",
			      name);
	free(url);
	return ret;
}

/* Whether blob @path is there at @size bytes. */
static bool be_azure_is_there(struct be_azure *az, const char *path, uint64_t size)
{
	struct remote_meta m;

	return be_azure_head(az, path, &m) == 0 && (uint64_t)m.size == size;
}

/* ---- the block upload and its token ---- */

struct be_azure_token {
	uint64_t size;
	uint64_t block;
	unsigned int n_blocks;
	char nonce[17];
	char *sent;		/* n_blocks of '0' or '1', NUL-terminated */
};

static void be_azure_token_free(struct be_azure_token *t)
{
	free(t->sent);
	t->sent = NULL;
}

/* A new plan for @size bytes: the block size, a fresh nonce, nothing sent. */
static int be_azure_token_plan(struct be_azure_token *t, uint64_t size)
{
	unsigned char r[8];

	be_azure_token_free(t);
	t->size = size;
	t->block = BE_AZURE_BLOCK;
	while ((size + t->block - 1) / t->block > BE_AZURE_BLOCKS_MAX)
		t->block *= 2;
	t->n_blocks = (unsigned int)((size + t->block - 1) / t->block);
	if (RAND_bytes(r, sizeof(r)) != 1)
		return -EIO;
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(t->nonce + 2 * i, 3, "%02x", r[i]);
	t->sent = malloc(t->n_blocks + 1);
	if (!t->sent)
		return -ENOMEM;
	memset(t->sent, '0', t->n_blocks);
	t->sent[t->n_blocks] = '\0';
	return 0;
}

/* Reads @text into @t: 0, -EINVAL for text that is not such a token, -ENOMEM. */
static int be_azure_token_parse(struct be_azure_token *t, const char *text)
{
	unsigned long long size, block;
	int nonce_at = 0, nonce_end = 0, sent_at = 0;

	memset(t, 0, sizeof(*t));
	if (sscanf(text, "mlfs-azure-blocks 1\nsize=%llu\nblock=%llu\nnonce=%n%*16[0-9a-f]%n"
		   "\nsent=%n", &size, &block, &nonce_at, &nonce_end, &sent_at) != 2 ||
	    sent_at == 0 || nonce_end - nonce_at != 16)
		return -EINVAL;
	if (block < BE_AZURE_BLOCK || (block & (block - 1)) ||
	    (size + block - 1) / block > BE_AZURE_BLOCKS_MAX)
		return -EINVAL;
	t->size = size;
	t->block = block;
	t->n_blocks = (unsigned int)((size + block - 1) / block);
	memcpy(t->nonce, text + nonce_at, 16);
	if (strspn(text + sent_at, "01") != t->n_blocks ||
	    strcmp(text + sent_at + t->n_blocks, "\n") != 0)
		return -EINVAL;
	t->sent = strndup(text + sent_at, t->n_blocks);
	return t->sent ? 0 : -ENOMEM;
}

/* The token's text (malloc'd) and the bytes its sent blocks hold. */
static int be_azure_token_print(const struct be_azure_token *t, char **out, uint64_t *done)
{
	*done = 0;
	for (unsigned int i = 0; i < t->n_blocks; i++)
		if (t->sent[i] == '1')
			*done += i + 1 < t->n_blocks ? t->block : t->size - i * t->block;
	if (asprintf(out, "mlfs-azure-blocks 1\nsize=%" PRIu64 "\nblock=%" PRIu64
		     "\nnonce=%s\nsent=%s\n", t->size, t->block, t->nonce, t->sent) < 0)
		return -ENOMEM;
	return 0;
}

/* Block @i's id, base64 of "mlfs" NONCE "-" NUMBER (27 bytes: no padding). */
static void be_azure_block_id(const struct be_azure_token *t, unsigned int i,
			      char out[BE_AZURE_ID_LEN + 1])
{
	char raw[32];

	snprintf(raw, sizeof(raw), "mlfs%s-%06u", t->nonce, i);
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)raw, 27);
}

struct be_azure_up {
	struct be_azure *az;
	const char *path;
	int fd;
	struct remote_saver save;	/* where progress is saved */
	struct be_azure_token t;	/* save.lock: sent marks; the rest fixed */
};

/* Marks block @i sent (remote_landed_fn), and prints the token. */
static int be_azure_up_landed(void *arg, unsigned int i, char **token, uint64_t *done)
{
	struct be_azure_up *u = arg;

	u->t.sent[i] = '1';
	return token ? be_azure_token_print(&u->t, token, done) : 0;
}

/* Put Block of block @i (remote_part_fn). */
static int be_azure_up_block(void *arg, unsigned int i)
{
	struct be_azure_up *u = arg;
	uint64_t off = (uint64_t)i * u->t.block;
	size_t len = (size_t)(i + 1 < u->t.n_blocks ? u->t.block : u->t.size - off);
	char id[BE_AZURE_ID_LEN + 1], *eid, *query = NULL, *url = NULL, length[48];
	const char *extra[] = { length, NULL };
	int ret;

	be_azure_block_id(&u->t, i, id);
	eid = remote_escape(id, false);
	if (eid && asprintf(&query, "comp=block&blockid=%s", eid) >= 0)
		url = be_azure_blob_url(u->az, u->path, query);
	snprintf(length, sizeof(length), "Content-Length: %zu", len);
	ret = be_azure_simple(u->az, REMOTE_PUT, url, extra, u->fd, (off_t)off, len, "Put Block",
			      u->path);
	free(url);
	free(query);
	free(eid);
	return ret == 0 ? remote_saver_landed(&u->save, be_azure_up_landed, u, i) : ret;
}

/* Put Block List: every block, in order, as the blob's content. */
static int be_azure_up_commit(struct be_azure_up *u)
{
	size_t cap = 128 + (size_t)u->t.n_blocks * (BE_AZURE_ID_LEN + 18), len;
	char *body = malloc(cap), *url = be_azure_blob_url(u->az, u->path, "comp=blocklist");
	char length[48], id[BE_AZURE_ID_LEN + 1];
	const char *extra[] = { length, "Content-Type: application/xml", NULL };
	struct remote_req req = { .method = REMOTE_PUT, .url = url, .body_fd = -1,
				  .max_body = 1 << 20 };
	struct remote_resp resp;
	int ret;

	if (!body || !url) {
		free(body);
		free(url);
		return -ENOMEM;
	}
	len = (size_t)snprintf(body, cap, "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>");
	for (unsigned int i = 0; i < u->t.n_blocks; i++) {
		be_azure_block_id(&u->t, i, id);
		len += (size_t)snprintf(body + len, cap - len, "<Latest>%s</Latest>", id);
	}
	len += (size_t)snprintf(body + len, cap - len, "</BlockList>");
	snprintf(length, sizeof(length), "Content-Length: %zu", len);
	req.body = body;
	req.body_len = len;
	ret = be_azure_do(u->az, &req, extra, &resp);
	if (ret < 0)
		be_azure_fail(u->az, "Put Block List", u->path, ret, &resp);
	remote_resp_free(&resp);
	free(body);
	free(url);
	return ret;
}

/* Sends the blocks not yet sent, commits them, checks the blob is there whole. */
static int be_azure_up_run(struct be_azure_up *u)
{
	unsigned int *todo = calloc(u->t.n_blocks ? u->t.n_blocks : 1, sizeof(*todo)), n = 0;
	int ret;

	if (!todo)
		return -ENOMEM;
	for (unsigned int i = 0; i < u->t.n_blocks; i++)
		if (u->t.sent[i] != '1')
			todo[n++] = i;
	ret = remote_parts_run(todo, n, BE_AZURE_BLOCK_THREADS, be_azure_up_block, u);
	free(todo);
	if (ret == 0)
		ret = be_azure_up_commit(u);
	if (ret == 0 && !be_azure_is_there(u->az, u->path, u->t.size)) {
		log_err("datastore %s: upload of %s: the server said the block list is committed, "
			"but it does not serve a blob of %" PRIu64 " bytes there", u->az->base.name,
			u->path, u->t.size);
		ret = -EIO;
	}
	return ret;
}

/*
 * A block upload of @size bytes of @fd as @path, resumed from @up->resume
 * when it is a token of this size, saved through @up->save when set.  A
 * resumed upload whose blocks Azure no longer has (the commit's 400) starts
 * over once.
 */
static int be_azure_blocks(struct be_azure *az, const char *path, int fd, uint64_t size,
			   const struct backend_upload *up)
{
	struct be_azure_up u = { .az = az, .path = path, .fd = fd };
	bool resumed = false;
	int ret = -EINVAL;

	remote_saver_init(&u.save, up);
	if (up && up->resume)
		ret = be_azure_token_parse(&u.t, up->resume);
	if (ret == 0 && u.t.size == size)
		resumed = true;
	else if (ret != -ENOMEM)
		ret = be_azure_token_plan(&u.t, size);
	if (ret == 0)
		ret = be_azure_up_run(&u);
	if (resumed && ret == -EINVAL && u.save.error == 0) {
		log_info("datastore %s: upload of %s: Azure no longer holds its blocks; "
			 "starting over", az->base.name, path);
		ret = be_azure_token_plan(&u.t, size);
		if (ret == 0)
			ret = be_azure_up_run(&u);
	}
	be_azure_token_free(&u.t);
	remote_saver_fini(&u.save);
	return ret;
}

int be_azure_upload_fd(struct backend *be, const char *path, int fd, uint64_t size,
		       const struct backend_upload *u)
{
	struct be_azure *az = be_azure(be);
	const char *resume = u ? u->resume : NULL;
	int ret;

	if (!*path)
		return -EISDIR;
	if (resume && strcmp(resume, "done") == 0 && be_azure_is_there(az, path, size))
		ret = 0;
	else if (size < BE_AZURE_SMALL_PUT)
		ret = be_azure_put(az, path, fd, (size_t)size);
	else
		ret = be_azure_blocks(az, path, fd, size, u);
	be_azure_changed(az, path);
	if (ret == 0 && u && u->save)
		ret = u->save(u->arg, "done", size);
	return ret;
}

/* ---- files open for writing ---- */

/*
 * remote_load_fn: the whole blob into staging file @fd, as it was at open
 * (If-Match; a HEAD first when the open did not ask).
 */
static int be_azure_download(void *arg, int fd)
{
	struct be_azure_file *f = arg;
	struct be_azure *az = be_azure(f->r.base.be);
	struct remote_to_fd t = { .fd = fd };
	char if_match[REMOTE_META_ETAG_MAX + 16];
	const char *extra[] = { if_match, NULL };
	struct remote_req req = { .method = REMOTE_GET, .url = f->r.url, .body_fd = -1,
				  .sink = remote_sink_fd, .sink_arg = &t };
	struct remote_resp resp;
	int ret = f->r.m.etag[0] ? 0 : be_azure_file_meta(f, false);

	if (ret < 0 || f->r.m.size == 0)
		return ret;
	snprintf(if_match, sizeof(if_match), "If-Match: %s", f->r.m.etag);
	ret = be_azure_do(az, &req, f->r.m.etag[0] ? extra : NULL, &resp);
	if (ret < 0)
		be_azure_fail(az, "GET", f->r.path, ret, &resp);
	else if (t.off != f->r.m.size)
		ret = -EIO;
	remote_resp_free(&resp);
	return ret;
}

int be_azure_open_write(struct be_azure_file *f, int flags)
{
	struct be_azure *az = be_azure(f->r.base.be);
	int ret = remote_writers_open(&az->writers, az->staging, f->r.path, flags & O_TRUNC,
				      be_azure_download, f, &f->st);

	f->writing = ret == 0;
	return ret;
}

/* remote_upload_fn: the staging file @fd as @f's blob. */
static int be_azure_upload_stage(void *arg, int fd, uint64_t size)
{
	struct be_azure_file *f = arg;
	struct be_azure *az = be_azure(f->r.base.be);
	int ret;

	if (size < BE_AZURE_SMALL_PUT)
		ret = be_azure_put(az, f->r.path, fd, (size_t)size);
	else
		ret = be_azure_blocks(az, f->r.path, fd, size, NULL);
	be_azure_changed(az, f->r.path);
	return ret;
}

int be_azure_upload(struct be_azure_file *f)
{
	return f->writing ? remote_stage_upload(f->st, f->r.base.be->name, be_azure_upload_stage, f)
			  : 0;
}

ssize_t be_azure_pwrite(struct backend_file *bf, const void *buf, size_t len, off_t off)
{
	struct be_azure_file *f = be_azure_file(bf);

	return f->writing ? remote_stage_pwrite(f->st, buf, len, off) : -EBADF;
}

int be_azure_flush(struct backend_file *bf)
{
	return be_azure_upload(be_azure_file(bf));
}

int be_azure_fsync(struct backend_file *bf, int datasync)
{
	(void)datasync;
	return be_azure_upload(be_azure_file(bf));
}

int be_azure_name_check(struct be_azure *az, const char *path)
{
	if (!strchr(path, '\\'))
		return 0;
	log_warn("datastore %s: %s: Azure stores a '\\' in a blob's name as '/' (a folder); "
		 "refused", az->base.name, path);
	return -EINVAL;
}

/* A new file: staged and dirty, so even one never written (touch) becomes a blob. */
int be_azure_create_file(struct backend_file **out, struct backend *be, const char *path,
			 int flags, mode_t mode, const struct backend_cred *cred)
{
	struct be_azure *az = be_azure(be);
	struct remote_meta m = { .mtime = -1 };
	struct be_azure_file *f;
	int ret = be_azure_name_check(az, path);

	(void)mode;
	(void)cred;
	(void)flags;
	if (ret == 0)
		ret = be_azure_file_new(&f, az, path, be_azure_url(az, path, NULL), &m);
	if (ret < 0)
		return ret;
	ret = be_azure_open_write(f, O_RDWR | O_TRUNC);
	if (ret < 0) {
		be_azure_file_free(f);
		return ret;
	}
	*out = &f->r.base;
	return 0;
}

/* ---- the namespace ---- */

/* Truncates blob @path to @size: an empty Put Blob, or download, cut, upload. */
static int be_azure_truncate_path(struct be_azure *az, const char *path, off_t size)
{
	struct remote_meta m;
	struct be_azure_file *f;
	int ret = be_azure_head(az, path, &m);

	if (ret == 0 && size == 0)
		ret = be_azure_put(az, path, -1, 0);
	if (ret < 0 || size == 0) {
		be_azure_changed(az, path);
		return ret;
	}
	ret = be_azure_file_new(&f, az, path, be_azure_url(az, path, NULL), &m);
	if (ret < 0)
		return ret;
	ret = be_azure_open_write(f, O_RDWR);
	if (ret == 0)
		ret = remote_stage_truncate(f->st, size);
	if (ret == 0)
		ret = be_azure_upload(f);
	be_azure_file_free(f);
	return ret;
}

int be_azure_setattr(struct backend *be, const char *path, struct backend_file *bf,
		     const struct stat *st, unsigned int to_set)
{
	struct be_azure_file *f = bf ? be_azure_file(bf) : NULL;
	int ret = remote_stage_setattr(f ? f->st : NULL, st, to_set);

	if (ret != 1)
		return ret;
	return be_azure_truncate_path(be_azure(be), f ? f->r.path : path, st->st_size);
}

/* The marker blob of folder @path: "path/". */
static char *be_azure_marker(const char *path)
{
	char *name = NULL;

	return asprintf(&name, "%s/", path) < 0 ? NULL : name;
}

int be_azure_mkdir(struct backend *be, const char *path, mode_t mode,
		   const struct backend_cred *cred)
{
	struct be_azure *az = be_azure(be);
	char *marker;
	int ret = be_azure_name_check(az, path);

	(void)mode;
	(void)cred;
	if (ret < 0)
		return ret;
	marker = be_azure_marker(path);
	if (!marker)
		return -ENOMEM;
	ret = be_azure_put(az, marker, -1, 0);
	be_azure_changed(az, path);
	free(marker);
	return ret;
}

int be_azure_rmdir(struct backend *be, const char *path)
{
	struct be_azure *az = be_azure(be);
	unsigned int n;
	bool has_marker;
	char *marker, *url;
	int ret;

	if (!*path)
		return -EBUSY;
	if (remote_writers_beneath(&az->writers, path))
		return -ENOTEMPTY;	/* a blob being written there, committed at its close */
	ret = be_azure_count_beneath(az, path, &n, &has_marker);
	if (ret < 0)
		return ret;
	if (n == 0)
		return -ENOENT;
	if (n > 1 || !has_marker)
		return -ENOTEMPTY;	/* only the marker itself may be there */
	marker = be_azure_marker(path);
	url = marker ? be_azure_url(az, marker, NULL) : NULL;
	ret = be_azure_simple(az, REMOTE_DELETE, url, NULL, -1, 0, 0, "Delete Blob", path);
	be_azure_changed(az, path);
	free(url);
	free(marker);
	return ret;
}

int be_azure_unlink(struct backend *be, const char *path)
{
	struct be_azure *az = be_azure(be);
	bool staged = remote_writers_has(&az->writers, path);
	char *url = be_azure_url(az, path, NULL);
	int ret = be_azure_simple(az, REMOTE_DELETE, url, NULL, -1, 0, 0, "Delete Blob", path);

	if (ret == 0 || (ret == -ENOENT && staged)) {	/* a file being written: not uploaded */
		remote_writers_unlink(&az->writers, path);
		ret = 0;
	}
	be_azure_changed(az, path);
	free(url);
	return ret;
}

/* What Copy Blob's answer and each HEAD of its destination say of a copy. */
enum { COPY_STATUS, COPY_ID, COPY_PROGRESS, COPY_WHY };
#define BE_AZURE_COPY_HEADERS { "x-ms-copy-status", "x-ms-copy-id", "x-ms-copy-progress", \
				"x-ms-copy-status-description" }
typedef char be_azure_copy_seen[REMOTE_WANT_MAX][128];

/* Abort Copy Blob of copy @id to @to (Azure then leaves an empty blob there). */
static void be_azure_copy_abort(struct be_azure *az, const char *to, const char *id)
{
	const char *extra[] = { "x-ms-copy-action: abort", NULL };
	char *eid = remote_escape(id, false), *query = NULL, *url = NULL;

	if (eid && asprintf(&query, "comp=copy&copyid=%s", eid) >= 0)
		url = be_azure_blob_url(az, to, query);
	be_azure_simple(az, REMOTE_PUT, url, extra, -1, 0, 0, "Abort Copy Blob", to);
	free(url);
	free(query);
	free(eid);
}

/* Asks @url (a copy's destination) what its copy is at: 0 and @seen updated, or -errno. */
static int be_azure_copy_look(struct be_azure *az, const char *url, be_azure_copy_seen seen,
			      bool *moved)
{
	struct remote_req req = { .method = REMOTE_HEAD, .url = url, .body_fd = -1,
				  .want_header = BE_AZURE_COPY_HEADERS };
	struct remote_resp resp;
	int ret = be_azure_do(az, &req, NULL, &resp);

	if (ret == 0) {
		*moved = strcmp(resp.header[COPY_PROGRESS], seen[COPY_PROGRESS]) != 0;
		for (int i = 0; i < REMOTE_WANT_MAX; i++)
			if (resp.header[i][0] || i != COPY_ID)	/* the id Copy Blob gave stays */
				memcpy(seen[i], resp.header[i], sizeof(seen[i]));
	}
	remote_resp_free(&resp);
	return ret;
}

static void be_azure_copy_log(struct be_azure *az, const char *from, const char *to, int ret,
			      be_azure_copy_seen seen)
{
	const char *why = seen[COPY_WHY];

	if (ret == -EIO)
		log_err("datastore %s: copy of %s to %s: Azure says %s%s%s%s; %s is kept",
			az->base.name, from, to, seen[COPY_STATUS], why[0] ? " (" : "", why,
			why[0] ? ")" : "", from);
	else if (ret == -ETIMEDOUT)
		log_err("datastore %s: copy of %s to %s: still pending after %lld s without "
			"progress (%s bytes copied): aborted; %s is kept", az->base.name, from, to,
			(long long)(az->copy_stall_ns / 1000000000), seen[COPY_PROGRESS][0] ?
			seen[COPY_PROGRESS] : "?", from);
	else if (ret < 0)
		log_err("datastore %s: copy of %s to %s: %s; %s is kept", az->base.name, from, to,
			strerror(-ret), from);
}

/*
 * Waits while Azure says the copy of @from to @to is "pending", asking
 * after 0.1 s, then twice as long each time up to 1 s: 0 once "success".  A
 * copy Azure says "failed" or "aborted" is -EIO; one whose progress stood
 * still for copy_stall_ns is aborted, -ETIMEDOUT.  Either way what Azure
 * left at @to is deleted (a failed copy's destination keeps undefined
 * bytes) and @from is left as it is.
 */
static int be_azure_copy_wait(struct be_azure *az, const char *from, const char *to,
			      be_azure_copy_seen seen)
{
	char *url = be_azure_url(az, to, NULL);
	int64_t moved_at = mono_ns(), delay = 100000000;
	int ret = url ? 0 : -ENOMEM;

	while (ret == 0 && strcmp(seen[COPY_STATUS], "pending") == 0) {
		struct timespec pause = mono_timespec(delay);
		bool moved = false;

		if (mono_ns() - moved_at > az->copy_stall_ns) {
			ret = -ETIMEDOUT;
			if (seen[COPY_ID][0])
				be_azure_copy_abort(az, to, seen[COPY_ID]);
			break;
		}
		nanosleep(&pause, NULL);
		delay = delay * 2 > 1000000000 ? 1000000000 : delay * 2;
		ret = be_azure_copy_look(az, url, seen, &moved);
		if (moved)
			moved_at = mono_ns();
	}
	if (ret == 0 && strcmp(seen[COPY_STATUS], "success") != 0 && seen[COPY_STATUS][0])
		ret = -EIO;
	if (ret == -EIO || ret == -ETIMEDOUT)
		be_azure_simple(az, REMOTE_DELETE, url, NULL, -1, 0, 0, "Delete Blob", to);
	be_azure_copy_log(az, from, to, ret, seen);
	free(url);
	return ret;
}

/* Copy Blob of @from to @to, waited for. */
static int be_azure_copy(struct be_azure *az, const char *from, const char *to)
{
	char *src = be_azure_url(az, from, NULL), *dst = be_azure_url(az, to, NULL), *source = NULL;
	const char *extra[] = { NULL, NULL };
	struct remote_req req = { .method = REMOTE_PUT, .url = dst, .body_fd = -1,
				  .max_body = 1 << 20, .want_header = BE_AZURE_COPY_HEADERS };
	struct remote_resp resp;
	be_azure_copy_seen seen;
	int ret = -ENOMEM;

	if (src && dst && asprintf(&source, "x-ms-copy-source: %s", src) >= 0) {
		extra[0] = source;
		ret = be_azure_do(az, &req, extra, &resp);
		memcpy(seen, resp.header, sizeof(seen));
		if (ret < 0)
			be_azure_fail(az, "Copy Blob", from, ret, &resp);
		remote_resp_free(&resp);
		if (ret == 0)
			ret = be_azure_copy_wait(az, from, to, seen);
	}
	free(source);
	free(src);
	free(dst);
	return ret;
}

int be_azure_rename(struct backend *be, const char *from, const char *to, unsigned int flags)
{
	struct be_azure *az = be_azure(be);
	struct remote_meta m;
	char *url;
	int ret;

	if (flags & RENAME_EXCHANGE)
		return -EINVAL;
	if ((ret = remote_writers_rename_check(&az->writers, be->name, from, to)) < 0 ||
	    (ret = be_azure_name_check(az, to)) < 0)
		return ret;
	be_azure_changed(az, from);
	ret = be_azure_meta(az, from, &m, false);
	if (ret == 0 && m.is_dir)
		ret = -EXDEV;
	if (ret == 0 && (flags & RENAME_NOREPLACE)) {
		be_azure_changed(az, to);
		ret = be_azure_meta(az, to, &m, false);
		ret = ret == 0 ? -EEXIST : ret == -ENOENT ? 0 : ret;
	}
	if (ret == 0)
		ret = be_azure_copy(az, from, to);
	url = ret == 0 ? be_azure_url(az, from, NULL) : NULL;
	if (ret == 0)
		ret = be_azure_simple(az, REMOTE_DELETE, url, NULL, -1, 0, 0, "Delete Blob", from);
	be_azure_changed(az, from);
	be_azure_changed(az, to);
	free(url);
	return ret;
}
