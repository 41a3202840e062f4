/*
 * be_archive.c - a zip, tar, tar.gz/tgz or tar.bz2 file of another backend,
 * shown as a read-only folder.
 *
 * The idea: at create the archive is read once, through the inner backend
 * (backend_pread, never a local path), with libarchive over read, seek and
 * skip callbacks; every member becomes an entry of an in-memory index, a
 * sorted array of canonical paths (path.h's form) in which each folder knows
 * its children.  Folders that members imply ("a/b/c" implies "a" and "a/b")
 * exist too.  When a path appears twice the last member wins, as tar does.
 * The index is never changed after create.
 *
 * Reading a member, by format:
 *  - zip (read with the central directory, libarchive's zip_seekable): a
 *    stored (uncompressed) member is served in place: its bytes are read from
 *    the inner file at the member's data offset.  libarchive has no call that
 *    gives that offset, but right after a header is read the bytes consumed
 *    from the file (archive_filter_bytes, with no filter) are exactly the
 *    local header's end, where the data starts; whether a member is stored is
 *    read from archive_format_name ("ZIP 1.0 (uncompressed)").  Both facts
 *    are checked by the tests.  A compressed member is decompressed, at its
 *    first open, into cache_dir/archives/<key>/<ordinal> (a temp file renamed
 *    into place), then served from that file with pread; never held in memory.
 *  - plain tar: served in place like a stored zip member (a GNU sparse member
 *    is extracted instead).
 *  - compressed tar: has no random access, so at the first open of any
 *    member the whole archive is extracted once into a temp folder renamed to
 *    cache_dir/archives/<key>/; a crash never leaves a half tree there, and
 *    another process that finds the folder uses it.
 * Extracted files are named by the member's ordinal in the archive, never by
 * its name, so no member name ever reaches the local filesystem.  The key is
 * the sha256 of the inner backend's name, the path, the size and the mtime,
 * so a changed archive is never served from an old extraction.
 *
 * Confinement ("zip slip", DESIGN §8): a member whose name is absolute, has
 * a ".." component, is empty once "." components and repeated slashes are
 * dropped, has a control character, or is too long is skipped with a
 * warning, never listed nor served; so is a member below a member that is
 * not a folder.  A symlink member is shown as a symlink whose target is
 * given as stored: the kernel resolves it on the client, mlfs never follows
 * one.  A hard link member is shown as a file of its own with the bytes of
 * the member it names (not as a second name of one inode: its own st_ino,
 * one link).  Devices, fifos and encrypted members are skipped.
 *
 * Threading: the index is read-only after create, and each reader of the
 * archive has its own libarchive handle and position (the inner file is read
 * with pread), so getattr, readdir and reads of in-place members take no
 * lock.  lock guards extraction: the extracted flag, and the cursor reader
 * with which compressed zip members are decompressed (kept between opens, so
 * opening members in archive order walks the archive once).  It is held
 * while a member or a whole tar is extracted: a second open that needs the
 * same extraction has to wait for it anyway.
 *
 * What it does not do: write (no write ops: the wrappers answer EROFS),
 * keep what it extracted past archive_cache_size while no one reads it
 * (be_archive_extract.c holds the key's folder, dir_cache.h, and evicts),
 * show hard links as one inode, or cache in-place reads of a remote inner backend itself
 * (cache_key is -ENOTSUP: fs/ reads it directly).  Opening the compressed zip
 * member k for the first time after member j > k walks the central directory
 * from its start again.
 */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_err.h"
#include "be_archive_int.h"
#include "log.h"
#include "path.h"

/* ---- reading the inner file through libarchive ---- */

static la_ssize_t be_archive_read_cb(struct archive *a, void *data, const void **out)
{
	struct be_archive_reader *r = data;
	ssize_t n = backend_pread(r->ab->inner_file, r->buf, sizeof(r->buf), r->pos);

	if (n < 0) {
		r->err = (int)n;
		archive_set_error(a, (int)-n, "reading the archive: %s", strerror((int)-n));
		return ARCHIVE_FATAL;
	}
	r->pos += n;
	*out = r->buf;
	return n;
}

static la_int64_t be_archive_seek_cb(struct archive *a, void *data, la_int64_t off, int whence)
{
	struct be_archive_reader *r = data;
	la_int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? r->pos
						       : (la_int64_t)r->ab->arch_size;

	(void)a;
	if (base + off < 0)
		return ARCHIVE_FATAL;
	r->pos = base + off;
	return r->pos;
}

static la_int64_t be_archive_skip_cb(struct archive *a, void *data, la_int64_t request)
{
	struct be_archive_reader *r = data;
	la_int64_t left = (la_int64_t)r->ab->arch_size - r->pos;

	(void)a;
	if (request > left)
		request = left > 0 ? left : 0;
	r->pos += request;
	return request;
}

void be_archive_reader_close(struct be_archive_reader *r)
{
	if (!r)
		return;
	archive_read_free(r->a);
	free(r);
}

/*
 * The error of a failed libarchive call: the inner backend's (a read of the
 * archive failed), else libarchive's own as mlfs_archive_errno maps it.
 */
int be_archive_reader_err(const struct be_archive_reader *r, int fallback)
{
	return r->err ? r->err : mlfs_archive_errno(r->a, fallback);
}

void be_archive_log(struct be_archive *ab, const char *what, struct archive *a)
{
	log_err("archive %s (%s:%s): %s: %s", ab->base.name, ab->inner->name, ab->path, what,
		archive_error_string(a) ? archive_error_string(a) : "unknown error");
}

/* Opens a reader at the archive's start; -EINVAL (logged) when no format fits. */
int be_archive_reader_open(struct be_archive_reader **out, struct be_archive *ab)
{
	struct be_archive_reader *r = calloc(1, sizeof(*r));
	int ret;

	if (!r || !(r->a = archive_read_new())) {
		free(r);
		return -ENOMEM;
	}
	r->ab = ab;
	archive_read_support_filter_all(r->a);
	archive_read_support_format_tar(r->a);
	archive_read_support_format_zip_seekable(r->a);
	archive_read_set_read_callback(r->a, be_archive_read_cb);
	archive_read_set_seek_callback(r->a, be_archive_seek_cb);
	archive_read_set_skip_callback(r->a, be_archive_skip_cb);
	archive_read_set_callback_data(r->a, r);
	if (archive_read_open1(r->a) != ARCHIVE_OK) {
		be_archive_log(ab, "cannot be read", r->a);
		ret = be_archive_reader_err(r, -EINVAL);
		be_archive_reader_close(r);
		return ret;
	}
	*out = r;
	return 0;
}

/* Reads the next header; 1 with *e set, 0 at the end, or a negated errno (logged). */
int be_archive_reader_next(struct be_archive_reader *r, struct archive_entry **e)
{
	int ret = archive_read_next_header(r->a, e);

	if (ret == ARCHIVE_EOF)
		return 0;
	if (ret == ARCHIVE_WARN)
		log_warn("archive %s: %s", r->ab->base.name, archive_error_string(r->a));
	else if (ret != ARCHIVE_OK) {
		be_archive_log(r->ab, "corrupt", r->a);
		return be_archive_reader_err(r, -EINVAL);
	}
	r->next_ord++;
	return 1;
}

/* ---- the index ---- */

/*
 * Writes @raw's canonical form into @out (BE_ARCHIVE_PATH_MAX + 1 bytes).
 * Returns 0, or -EINVAL with *why set when the member must not be served.
 */
int be_archive_canon(const char *raw, char *out, const char **why)
{
	size_t n = 0;

	if (!raw || !raw[0])
		return *why = "empty name", -EINVAL;
	if (raw[0] == '/')
		return *why = "absolute name", -EINVAL;
	for (const char *p = raw; *p;) {
		size_t len = strcspn(p, "/");

		for (size_t i = 0; i < len; i++)
			if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
				return *why = "control character in name", -EINVAL;
		if (path_is_dotdot(p, len))
			return *why = "\"..\" in name", -EINVAL;
		if (len > BE_ARCHIVE_NAME_MAX || n + len + 1 > BE_ARCHIVE_PATH_MAX)
			return *why = "name too long", -EINVAL;
		if (len && !(len == 1 && p[0] == '.')) {
			if (n)
				out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p += len;
		p += *p == '/';
	}
	out[n] = '\0';
	if (!n)
		return *why = "empty name", -EINVAL;
	return 0;
}

/* A growing array of entries, before sorting. */
struct be_archive_list {
	struct be_archive_entry *v;
	size_t n, cap;
	char *last_parent;	/* the folder whose ancestors were added last */
};

static struct be_archive_entry *be_archive_list_add(struct be_archive_list *l, const char *path,
						   size_t len)
{
	struct be_archive_entry *e;

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		void *v = realloc(l->v, cap * sizeof(*l->v));

		if (!v)
			return NULL;
		l->v = v;
		l->cap = cap;
	}
	e = &l->v[l->n];
	memset(e, 0, sizeof(*e));
	if (!(e->path = strndup(path, len)))
		return NULL;
	l->n++;
	e->data_off = -1;
	e->parent = e->first_child = e->next_sibling = BE_ARCHIVE_NONE;
	return e;
}

/* Adds every folder @path implies ("a/b/c": "a", "a/b") as implied folders. */
static int be_archive_list_ancestors(struct be_archive_list *l, const char *path,
				     const struct timespec *mtime)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return 0;
	if (l->last_parent && strlen(l->last_parent) == (size_t)(slash - path) &&
	    strncmp(l->last_parent, path, (size_t)(slash - path)) == 0)
		return 0;	/* the previous member's folder: added already */
	free(l->last_parent);
	if (!(l->last_parent = strndup(path, (size_t)(slash - path))))
		return -ENOMEM;
	for (const char *p = path; (p = strchr(p, '/')); p++) {
		struct be_archive_entry *e = be_archive_list_add(l, path, (size_t)(p - path));

		if (!e)
			return -ENOMEM;
		e->mode = S_IFDIR | 0755;
		e->mtime = *mtime;
		e->implied = 1;
	}
	return 0;
}

static void be_archive_list_free(struct be_archive_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].path);
		free(l->v[i].target);
	}
	free(l->v);
	free(l->last_parent);
}

/* Whether @e's data can be read in place, and where: sets e->data_off. */
static int be_archive_locate(struct be_archive_reader *r, struct archive_entry *ae,
			     struct be_archive_entry *e)
{
	struct be_archive *ab = r->ab;
	int64_t off = archive_filter_bytes(r->a, 0);
	const char *fmt = archive_format_name(r->a);

	if (ab->kind == BE_ARCHIVE_ZIP && !(fmt && strstr(fmt, "(uncompressed)")))
		return 0;
	if (ab->kind == BE_ARCHIVE_TAR_FILTERED || archive_entry_sparse_count(ae) > 0 ||
	    !archive_entry_size_is_set(ae))
		return 0;
	if (off < 0 || (uint64_t)off > ab->arch_size || e->size > ab->arch_size - (uint64_t)off) {
		log_err("archive %s (%s:%s): corrupt: member %s lies past the end", ab->base.name,
			ab->inner->name, ab->path, e->path);
		return -EINVAL;
	}
	e->data_off = off;
	return 0;
}

/* Why member @ae is not shown, or NULL when it is. */
static const char *be_archive_unshown(struct archive_entry *ae)
{
	mode_t type = archive_entry_filetype(ae);

	if (archive_entry_hardlink(ae))
		return NULL;	/* a file of its own, with its target's bytes (be_archive_link) */
	if (archive_entry_is_encrypted(ae))
		return "encrypted";
	if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
		return "not a file, folder or symlink";
	if (type == AE_IFLNK && !archive_entry_symlink(ae))
		return "symlink without a target";
	return NULL;
}

/* Copies @raw into @out for a log line, control characters made '?'. */
static const char *be_archive_printable(char *out, size_t size, const char *raw)
{
	size_t i = 0;

	for (; raw && raw[i] && i + 1 < size; i++)
		out[i] = (unsigned char)raw[i] < 0x20 || raw[i] == 0x7f ? '?' : raw[i];
	out[i] = '\0';
	return out;
}

/* Adds member @ae (ordinal @ord) to @l when it may be shown; logs why not. */
static int be_archive_add_member(struct be_archive_reader *r, struct archive_entry *ae,
				 uint32_t ord, struct be_archive_list *l)
{
	char canon[BE_ARCHIVE_PATH_MAX + 1], link[BE_ARCHIVE_PATH_MAX + 1];
	const char *raw = archive_entry_pathname(ae);
	const char *why = NULL;
	struct be_archive_entry *e;
	mode_t perm = archive_entry_perm(ae) & 0777;

	if (!raw)
		raw = archive_entry_pathname_utf8(ae);
	if (be_archive_canon(raw, canon, &why) < 0 || (why = be_archive_unshown(ae))) {
		/* "./" or "/" as a folder is the root itself: nothing to warn of. */
		if (!(archive_entry_filetype(ae) == AE_IFDIR && why && strcmp(why, "empty name") == 0))
			log_warn("archive %s: member \"%s\" skipped: %s", r->ab->base.name,
				 be_archive_printable(canon, sizeof(canon), raw), why);
		return 0;
	}
	if (archive_entry_hardlink(ae) &&
	    be_archive_canon(archive_entry_hardlink(ae), link, &why) < 0) {
		log_warn("archive %s: member \"%s\" skipped: a hard link to a name not shown (%s)",
			 r->ab->base.name, canon, why);
		return 0;
	}
	if (!(e = be_archive_list_add(l, canon, strlen(canon))))
		return -ENOMEM;
	e->ord = ord;
	e->mode = (archive_entry_filetype(ae) & S_IFMT) |
		  (perm ? perm : archive_entry_filetype(ae) == AE_IFDIR ? 0755 : 0644);
	e->mtime.tv_sec = archive_entry_mtime(ae);
	e->mtime.tv_nsec = archive_entry_mtime_nsec(ae);
	if (archive_entry_hardlink(ae)) {
		e->mode = S_IFREG | (perm ? perm : 0644);
		e->hardlink = true;
		if (!(e->target = strdup(link)))
			return -ENOMEM;
	} else if (S_ISLNK(e->mode)) {
		if (!(e->target = strdup(archive_entry_symlink(ae))))
			return -ENOMEM;
		e->size = strlen(e->target);
	} else if (S_ISREG(e->mode)) {
		e->size = archive_entry_size(ae) > 0 ? (uint64_t)archive_entry_size(ae) : 0;
		if (be_archive_locate(r, ae, e) < 0)
			return -EINVAL;
	}
	return be_archive_list_ancestors(l, e->path, &r->ab->arch_mtime);
}

/* Path order; at one path, implied folders first, then members in archive order. */
static int be_archive_cmp(const void *a, const void *b)
{
	const struct be_archive_entry *x = a, *y = b;
	int c = strcmp(x->path, y->path);

	if (c)
		return c;
	if (x->implied != y->implied)
		return y->implied - x->implied;
	return x->ord < y->ord ? -1 : x->ord > y->ord;
}

static int be_archive_path_cmp(const void *key, const void *ent)
{
	return strcmp(key, ((const struct be_archive_entry *)ent)->path);
}

static const struct be_archive_entry *be_archive_find(const struct be_archive_entry *v, size_t n,
						      const char *path)
{
	return bsearch(path, v, n, sizeof(*v), be_archive_path_cmp);
}

static void be_archive_entry_free(struct be_archive_entry *e)
{
	free(e->path);
	free(e->target);
}

/* Keeps an entry when its parent is a kept folder; returns its parent's index, or NONE. */
static uint32_t be_archive_parent(struct be_archive *ab, const struct be_archive_entry *e)
{
	const char *slash = strrchr(e->path, '/');
	char parent[BE_ARCHIVE_PATH_MAX + 1];
	const struct be_archive_entry *p;
	size_t len = slash ? (size_t)(slash - e->path) : 0;

	memcpy(parent, e->path, len);
	parent[len] = '\0';
	p = be_archive_find(ab->ents, ab->n, parent);
	return p && S_ISDIR(p->mode) ? (uint32_t)(p - ab->ents) : BE_ARCHIVE_NONE;
}

/*
 * Gives each hard link member the bytes of the file it names (its ordinal,
 * size and place: it reads the same data, extracted once), on @l sorted by
 * path: the winner of that path, a regular file, a link given its own
 * first (a few rounds).  What stays a link names no file shown.
 */
static void be_archive_link(struct be_archive_list *l)
{
	bool more = true;

	for (int round = 0; round < 8 && more; round++) {
		more = false;
		for (size_t i = 0; i < l->n; i++) {
			struct be_archive_entry *e = &l->v[i], *t;

			if (!e->hardlink)
				continue;
			t = bsearch(e->target, l->v, l->n, sizeof(*l->v), be_archive_path_cmp);
			while (t && t + 1 < l->v + l->n && strcmp(t[1].path, t->path) == 0)
				t++;	/* the last of that path wins, as in the index */
			if (!t || t == e || t->hardlink || !S_ISREG(t->mode)) {
				more |= t && t != e && t->hardlink;
				continue;
			}
			e->ord = t->ord;
			e->size = t->size;
			e->data_off = t->data_off;
			free(e->target);
			e->target = NULL;
			e->hardlink = false;
			more = true;
		}
	}
}

/*
 * Turns @l into the index: sorted, one entry per path (the last member
 * wins), members under a non-folder dropped, children linked.  Takes @l's
 * entries.
 */
static int be_archive_index(struct be_archive *ab, struct be_archive_list *l)
{
	qsort(l->v, l->n, sizeof(*l->v), be_archive_cmp);
	be_archive_link(l);
	ab->ents = l->v;
	ab->n = 0;
	for (size_t i = 0; i < l->n; i++) {
		struct be_archive_entry *e = &l->v[i];

		if (i + 1 < l->n && strcmp(e->path, l->v[i + 1].path) == 0) {
			be_archive_entry_free(e);	/* a later one wins */
			continue;
		}
		if (e->hardlink) {
			log_warn("archive %s: member \"%s\" skipped: a hard link to \"%s\", which "
				 "is not a file shown", ab->base.name, e->path, e->target);
			be_archive_entry_free(e);
			continue;
		}
		if (e->path[0] && (e->parent = be_archive_parent(ab, e)) == BE_ARCHIVE_NONE) {
			log_warn("archive %s: member \"%s\" skipped: under a member that is not "
				 "a folder", ab->base.name, e->path);
			be_archive_entry_free(e);
			continue;
		}
		l->v[ab->n++] = *e;
	}
	l->v = NULL;
	l->n = 0;
	for (size_t i = ab->n; i-- > 1;) {
		struct be_archive_entry *p = &ab->ents[ab->ents[i].parent];

		ab->ents[i].next_sibling = p->first_child;
		p->first_child = (uint32_t)i;
	}
	return 0;
}

static int be_archive_ord_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct be_archive_need *)a)->ord;
	uint32_t y = ((const struct be_archive_need *)b)->ord;

	return x < y ? -1 : x > y;
}

/* Lists the ordinals of members to extract (those not read in place), ascending. */
static int be_archive_list_need(struct be_archive *ab)
{
	size_t n = 0;

	for (size_t i = 0; i < ab->n; i++)
		n += S_ISREG(ab->ents[i].mode) && ab->ents[i].data_off < 0;
	if (!n)
		return 0;
	if (!(ab->need = malloc(n * sizeof(*ab->need))))
		return -ENOMEM;
	for (size_t i = 0; i < ab->n; i++)
		if (S_ISREG(ab->ents[i].mode) && ab->ents[i].data_off < 0)
			ab->need[ab->n_need++] = (struct be_archive_need){
				.ord = ab->ents[i].ord, .size = ab->ents[i].size };
	qsort(ab->need, ab->n_need, sizeof(*ab->need), be_archive_ord_cmp);
	n = ab->n_need;		/* a file and its hard links share one ordinal: extracted once */
	ab->n_need = 0;
	for (size_t i = 0; i < n; i++)
		if (!ab->n_need || ab->need[ab->n_need - 1].ord != ab->need[i].ord)
			ab->need[ab->n_need++] = ab->need[i];
	return 0;
}

/* Sets ab->kind from the format and filters of the first header read. */
static void be_archive_set_kind(struct be_archive *ab, struct archive *a)
{
	if ((archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_ZIP)
		ab->kind = BE_ARCHIVE_ZIP;
	else if (archive_filter_count(a) > 1)	/* the reading of the file itself counts as one */
		ab->kind = BE_ARCHIVE_TAR_FILTERED;
	else
		ab->kind = BE_ARCHIVE_TAR;
}

/* Reads every member's header once into @l. */
static int be_archive_scan(struct be_archive *ab, struct be_archive_list *l)
{
	struct be_archive_reader *r;
	struct archive_entry *ae;
	int ret = be_archive_reader_open(&r, ab);

	if (ret < 0)
		return ret;
	while ((ret = be_archive_reader_next(r, &ae)) == 1) {
		if (r->next_ord == 1)
			be_archive_set_kind(ab, r->a);
		ret = be_archive_add_member(r, ae, r->next_ord - 1, l);
		if (ret == 0 && archive_read_data_skip(r->a) != ARCHIVE_OK) {
			be_archive_log(ab, "corrupt", r->a);
			ret = be_archive_reader_err(r, -EINVAL);
		}
		if (ret < 0)
			break;
	}
	be_archive_reader_close(r);
	return ret;
}

static int be_archive_build_index(struct be_archive *ab)
{
	struct be_archive_list l = { 0 };
	struct be_archive_entry *root = be_archive_list_add(&l, "", 0);
	int ret = -ENOMEM;

	if (root) {
		root->mode = S_IFDIR | 0755;
		root->mtime = ab->arch_mtime;
		root->implied = 1;
		ret = be_archive_scan(ab, &l);
	}
	if (ret == 0)
		ret = be_archive_index(ab, &l);
	be_archive_list_free(&l);
	return ret < 0 ? ret : be_archive_list_need(ab);
}

/* ---- the operations ---- */

/* The entry's attributes; st_ino is its place in the index, so every member has its own. */
static void be_archive_stat(const struct be_archive *ab, const struct be_archive_entry *e,
			    struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = (ino_t)(e - ab->ents) + 1;
	st->st_mode = e->mode;
	st->st_nlink = S_ISDIR(e->mode) ? 2 : 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_size = (off_t)e->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((e->size + 511) / 512);
	st->st_atim = st->st_mtim = st->st_ctim = e->mtime;
}

static const struct be_archive_entry *be_archive_lookup(struct be_archive *ab, const char *path)
{
	return be_archive_find(ab->ents, ab->n, path);
}

static int be_archive_getattr(struct backend *be, const char *path, struct stat *st)
{
	const struct be_archive_entry *e = be_archive_lookup(be_archive(be), path);

	if (!e)
		return -ENOENT;
	be_archive_stat(be_archive(be), e, st);
	return 0;
}

static int be_archive_readdir(struct backend *be, const char *path, backend_fill_fn *fill,
			      void *payload)
{
	struct be_archive *ab = be_archive(be);
	const struct be_archive_entry *e = be_archive_lookup(ab, path);
	struct stat st;
	int ret = 0;

	if (!e)
		return -ENOENT;
	if (!S_ISDIR(e->mode))
		return -ENOTDIR;
	for (uint32_t i = e->first_child; ret == 0 && i != BE_ARCHIVE_NONE;
	     i = ab->ents[i].next_sibling) {
		const char *slash = strrchr(ab->ents[i].path, '/');

		be_archive_stat(ab, &ab->ents[i], &st);
		ret = fill(payload, slash ? slash + 1 : ab->ents[i].path, &st);
	}
	return ret;
}

static int be_archive_open(struct backend_file **out, struct backend *be, const char *path,
			   int flags)
{
	struct be_archive *ab = be_archive(be);
	const struct be_archive_entry *e = be_archive_lookup(ab, path);
	struct be_archive_file *f;

	if (!e)
		return -ENOENT;
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_TRUNC | O_CREAT)))
		return -EROFS;
	if (S_ISDIR(e->mode))
		return -EISDIR;
	if (S_ISLNK(e->mode))
		return -ELOOP;	/* as O_NOFOLLOW: the kernel resolves links, not us */
	if (!(f = calloc(1, sizeof(*f))))
		return -ENOMEM;
	f->base.be = be;
	f->ent = e;
	f->fd = -1;
	if (e->data_off < 0 && (f->fd = be_archive_member_fd(ab, e)) < 0) {
		int ret = f->fd;

		free(f);
		return ret;
	}
	*out = &f->base;
	return 0;
}

/* Reads from the inner file at the member's data offset, as much as there is. */
static ssize_t be_archive_pread_inner(struct be_archive *ab, const struct be_archive_entry *e,
				      char *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = backend_pread(ab->inner_file, buf + done, len - done,
					  e->data_off + off + (off_t)done);

		if (n < 0)
			return n;
		if (n == 0) {
			log_err("archive %s (%s:%s): shorter than when it was read", ab->base.name,
				ab->inner->name, ab->path);
			return -EIO;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static ssize_t be_archive_pread(struct backend_file *bf, void *buf, size_t len, off_t off)
{
	struct be_archive_file *f = be_archive_file(bf);
	size_t done = 0;

	if (off < 0)
		return -EINVAL;
	if ((uint64_t)off >= f->ent->size)
		return 0;
	if (len > f->ent->size - (uint64_t)off)
		len = (size_t)(f->ent->size - (uint64_t)off);
	if (f->fd < 0)
		return be_archive_pread_inner(be_archive(bf->be), f->ent, buf, len, off);
	while (done < len) {
		ssize_t n = pread(f->fd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static void be_archive_release(struct backend_file *bf)
{
	struct be_archive_file *f = be_archive_file(bf);

	if (f->fd >= 0)
		close(f->fd);
	free(f);
}

static int be_archive_fgetattr(struct backend_file *bf, struct stat *st)
{
	be_archive_stat(be_archive(bf->be), be_archive_file(bf)->ent, st);
	return 0;
}

static int be_archive_readlink(struct backend *be, const char *path, char *buf, size_t size)
{
	const struct be_archive_entry *e = be_archive_lookup(be_archive(be), path);

	if (!e)
		return -ENOENT;
	if (!S_ISLNK(e->mode))
		return -EINVAL;
	if (size == 0)
		return -EINVAL;
	snprintf(buf, size, "%s", e->target);	/* truncated like readlink(2) */
	return 0;
}

static int be_archive_statfs(struct backend *be, const char *path, struct statvfs *sv)
{
	struct be_archive *ab = be_archive(be);

	(void)path;
	memset(sv, 0, sizeof(*sv));
	sv->f_bsize = sv->f_frsize = 4096;
	sv->f_blocks = (ab->arch_size + 4095) / 4096;
	sv->f_files = ab->n;
	sv->f_namemax = BE_ARCHIVE_NAME_MAX;
	sv->f_flag = ST_RDONLY;
	return 0;
}

/* An extracted member is a local file the kernel may read itself (FUSE passthrough). */
static int be_archive_local_fd(struct backend_file *bf)
{
	return be_archive_file(bf)->fd >= 0 ? be_archive_file(bf)->fd : -ENOTSUP;
}

/* Not cached by fs/: members in place are read from the inner backend, the rest are local. */
static int be_archive_cache_key(struct backend_file *bf, char *buf, size_t size)
{
	(void)bf;
	(void)buf;
	(void)size;
	return -ENOTSUP;
}

/* ---- setup ---- */

static int be_archive_create_cfg(struct backend **out, const struct datastore_config *cfg)
{
	(void)out;
	log_err("[datastore %s]: an archive is a source inside another datastore, not a type",
		cfg->name);
	return -EINVAL;
}

/* Frees everything but base.name (backend_destroy frees that). */
static void be_archive_destroy(struct backend *be)
{
	struct be_archive *ab = be_archive(be);

	be_archive_reader_close(ab->cursor);
	for (size_t i = 0; i < ab->n; i++)
		be_archive_entry_free(&ab->ents[i]);
	free(ab->ents);
	free(ab->need);
	backend_release(ab->inner_file);
	if (ab->held >= 0)
		close(ab->held);	/* the extraction may be evicted now */
	if (ab->tmp_root)
		be_archive_rm_tree(ab->tmp_root);
	free(ab->tmp_root);
	free(ab->cache_dir);
	free(ab->dir);
	free(ab->path);
	pthread_mutex_destroy(&ab->lock);
	free(ab);
}

/* Opens the archive in the inner backend and learns its size and mtime. */
static int be_archive_open_inner(struct be_archive *ab)
{
	struct stat st;
	int ret = backend_open(&ab->inner_file, ab->inner, ab->path, O_RDONLY);

	if (ret < 0) {
		log_err("archive %s: %s:%s: %s", ab->base.name, ab->inner->name, ab->path,
			strerror(-ret));
		return ret;
	}
	ret = backend_fgetattr(ab->inner_file, &st);
	if (ret == -ENOSYS)
		ret = backend_getattr(ab->inner, ab->path, &st);
	if (ret < 0)
		return ret;
	if (!S_ISREG(st.st_mode)) {
		log_err("archive %s: %s:%s: not a file", ab->base.name, ab->inner->name, ab->path);
		return -EINVAL;
	}
	ab->arch_size = (uint64_t)st.st_size;
	ab->arch_mtime = st.st_mtim;
	return 0;
}

static int be_archive_set_cache_dir(struct be_archive *ab, const char *cache_dir)
{
	if (cache_dir)
		return (ab->cache_dir = strdup(cache_dir)) ? 0 : -ENOMEM;
	if (!(ab->tmp_root = strdup("/tmp/mlfs-archive-XXXXXX")))
		return -ENOMEM;
	if (!mkdtemp(ab->tmp_root)) {
		int ret = -errno;

		free(ab->tmp_root);
		ab->tmp_root = NULL;
		return ret;
	}
	return (ab->cache_dir = strdup(ab->tmp_root)) ? 0 : -ENOMEM;
}

int be_archive_create(struct backend **out, struct backend *inner, const char *path,
		      const char *cache_dir, uint64_t cache_max, const char *name)
{
	struct be_archive *ab = calloc(1, sizeof(*ab));
	int ret = -ENOMEM;

	if (!ab)
		return -ENOMEM;
	pthread_mutex_init(&ab->lock, NULL);
	ab->held = -1;
	ab->cache_max = cache_dir ? cache_max : 0;	/* a private folder goes at destroy */
	ab->base.ops = &be_archive_ops;
	ab->inner = inner;
	if (!(ab->base.name = strdup(name)) || !(ab->path = strdup(path)))
		goto out_free;
	if ((ret = be_archive_open_inner(ab)) < 0 || (ret = be_archive_build_index(ab)) < 0 ||
	    (ret = be_archive_set_cache_dir(ab, cache_dir)) < 0 || (ret = be_archive_set_dir(ab)) < 0)
		goto out_free;
	*out = &ab->base;
	return 0;
out_free:
	free(ab->base.name);
	be_archive_destroy(&ab->base);
	return ret;
}

const struct backend_ops be_archive_ops = {
	.version = BACKEND_OPS_VERSION,
	.scheme = "archive",
	.caps = BE_CAP_STREAM_LIST,
	.create = be_archive_create_cfg,
	.destroy = be_archive_destroy,
	.getattr = be_archive_getattr,
	.readdir = be_archive_readdir,
	.open = be_archive_open,
	.pread = be_archive_pread,
	.release = be_archive_release,
	.statfs = be_archive_statfs,
	.fgetattr = be_archive_fgetattr,
	.readlink = be_archive_readlink,
	.local_fd = be_archive_local_fd,
	.cache_key = be_archive_cache_key,
};
