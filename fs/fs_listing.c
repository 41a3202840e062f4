/*
 * fs_listing.c - what a trusted folder's listing said, kept for the mount's
 * lifetime, so the kernel may forget it for free.
 *
 * Why: a folder of datasets/, checkpoints/ or models/ is trusted for the
 * mount's lifetime, and the kernel keeps its listing (cache_readdir).  But
 * the kernel keeps it in the folder's page cache, which an epoch of a large
 * dataset pushes out: at 100,000 files a second epoch listed 17 to 76 of its
 * 100 folders again, each a request (on S3 a LIST of 1,000 keys).  So each
 * complete listing of a remote backend's folder under a trusted view is kept
 * here, and a folder listed again is answered from it with no request.
 *
 * What: one entry per (backend, folder path), holding the backend's own
 * answers (names and attributes, before a view applies its uid, gid and
 * mode) in listing order, packed: a fixed record and the name, about 100
 * bytes and the name per file.  Only a listing seen whole from its start
 * is kept: the backend's pass returned 0 with nothing stopped on the way
 * (a folder over the open folder's window is listed again whole by its
 * lister thread, and that pass is the one kept).  A datastores/ view never
 * uses or fills it: it is not trusted.
 *
 * Listed ahead: a folder listed from its backend for the first time (a
 * miss) queues its subfolders to the prefetch threads (fs_prefetch.c,
 * FS_PREFETCH_FOLDERS at most), which list and keep them
 * (fs_listing_fetch); a walk then finds them kept.  While one is being
 * listed ahead its key is in `busy`, and a reader of that folder waits for
 * it, so each folder is still asked for once.
 *
 * Bounds: FS_LISTING_MAX entries over all folders; the one that would
 * pass it empties the memo (folders are then listed by their backends
 * again, and kept anew).  A single listing over the bound is not kept.
 *
 * Threading: one mutex around the map; a replay copies the entry's records
 * out first, so no fill callback runs under it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "path_map.h"
#include "stat_pack.h"

#define FS_LISTING_MAX	(4u << 20)	/* files over all kept listings */
#define FS_LISTING_BUSY	16		/* folders listed ahead at once, at most */

/* What is kept of one listed file, followed by its name (no NUL). */
struct fs_lrec {
	struct stat_pack st;
	uint32_t name_len;
};

struct fs_lkept {
	struct path_map_entry e;
	char *recs;		/* packed: struct fs_lrec, name, ... */
	size_t len;
	size_t count;
	char key[];		/* "INDEX:PATH" */
};

struct fs_listing {
	pthread_mutex_t lock;
	pthread_cond_t done;	/* a folder listed ahead is kept (or failed) */
	struct path_map map;
	size_t files;		/* in every kept listing */
	char *busy[FS_LISTING_BUSY];	/* keys being listed ahead now */
};

/* A listing being recorded on its way from the backend to a fill. */
struct fs_lrecorder {
	backend_fill_fn *fill;
	void *payload;
	char *recs;
	size_t len, cap, count;
	bool over;		/* past FS_LISTING_MAX or out of memory: not kept */
};

int fs_listing_create(struct fs *fs)
{
	struct fs_listing *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->done, NULL);
	path_map_init(&l->map, offsetof(struct fs_lkept, key));
	fs->listing = l;
	return 0;
}

static void fs_listing_empty(struct fs_listing *l)
{
	for (size_t b = 0; b < l->map.n_buckets; b++)
		for (struct path_map_entry *e = l->map.bucket[b]; e; e = e->next)
			free(((struct fs_lkept *)e)->recs);
	path_map_clear(&l->map);
	l->files = 0;
}

void fs_listing_destroy(struct fs *fs)
{
	struct fs_listing *l = fs->listing;

	if (!l)
		return;
	fs_listing_empty(l);
	pthread_cond_destroy(&l->done);
	pthread_mutex_destroy(&l->lock);
	free(l);
	fs->listing = NULL;
}

static bool fs_listing_used(const struct fs *fs, const struct view *v)
{
	return fs->listing && v->readonly && (v->be->ops->caps & BE_CAP_REMOTE);
}

static char *fs_listing_key(const struct backend *be, const char *path)
{
	char *key;

	return asprintf(&key, "%u:%s", be->index, path) < 0 ? NULL : key;
}

/* The slot of @key among the folders being listed ahead, or -1.  l->lock held. */
static int fs_listing_busy_slot(struct fs_listing *l, const char *key)
{
	for (int i = 0; i < FS_LISTING_BUSY; i++)
		if (l->busy[i] && strcmp(l->busy[i], key) == 0)
			return i;
	return -1;
}

/* The backend's fill: records what it says (a listing without attributes is not kept), then passes it on. */
static int fs_lrecord(void *payload, const char *name, const struct stat *st)
{
	struct fs_lrecorder *rc = payload;
	size_t name_len = strlen(name);
	size_t need = sizeof(struct fs_lrec) + name_len;

	if (!st || rc->count >= FS_LISTING_MAX)
		rc->over = true;
	if (!rc->over && rc->len + need > rc->cap) {
		size_t cap = rc->cap ? rc->cap * 2 : 16384;
		char *p;

		while (cap < rc->len + need)
			cap *= 2;
		p = realloc(rc->recs, cap);
		if (p) {
			rc->recs = p;
			rc->cap = cap;
		} else {
			rc->over = true;
		}
	}
	if (!rc->over) {
		struct fs_lrec r;

		memset(&r, 0, sizeof(r));	/* no stray bytes in the padding */
		stat_pack(&r.st, st);
		r.name_len = (uint32_t)name_len;
		memcpy(rc->recs + rc->len, &r, sizeof(r));
		memcpy(rc->recs + rc->len + sizeof(r), name, name_len);
		rc->len += need;
		rc->count++;
	}
	return rc->fill(rc->payload, name, st);
}

/* Keeps a whole listing recorded by fs_lrecord (its records are taken). */
static void fs_listing_keep(struct fs_listing *l, char *key, struct fs_lrecorder *rc)
{
	size_t klen = strlen(key) + 1;
	struct fs_lkept *k = malloc(sizeof(*k) + klen);

	if (!k)
		return;
	k->recs = rc->recs;
	k->len = rc->len;
	k->count = rc->count;
	memcpy(k->key, key, klen);
	pthread_mutex_lock(&l->lock);
	if (path_map_get(&l->map, key)) {	/* listed twice at once: one is enough */
		pthread_mutex_unlock(&l->lock);
		free(k);
		return;
	}
	if (l->files + k->count > FS_LISTING_MAX)
		fs_listing_empty(l);
	if (path_map_add(&l->map, &k->e)) {
		l->files += k->count;
		rc->recs = NULL;
	} else {
		free(k);
	}
	pthread_mutex_unlock(&l->lock);
}

/* Copies out the listing kept under @key; false when none is. */
static bool fs_listing_copy(struct fs_listing *l, const char *key, char **recs, size_t *len)
{
	struct fs_lkept *k;
	bool found = false;

	pthread_mutex_lock(&l->lock);
	k = (struct fs_lkept *)path_map_get(&l->map, key);
	if (k) {
		*recs = malloc(k->len ? k->len : 1);
		if (*recs) {
			memcpy(*recs, k->recs, k->len);
			*len = k->len;
			found = true;
		}
	}
	pthread_mutex_unlock(&l->lock);
	return found;
}

static int fs_listing_replay(const char *recs, size_t len, backend_fill_fn *fill, void *payload)
{
	char *name = NULL;
	size_t cap = 0;
	int ret = 0;

	for (size_t off = 0; ret == 0 && off < len;) {
		struct fs_lrec r;
		struct stat st;

		memcpy(&r, recs + off, sizeof(r));
		off += sizeof(r);
		if (r.name_len >= cap) {
			char *p = realloc(name, r.name_len + 1);

			if (!p) {
				ret = -ENOMEM;
				break;
			}
			name = p;
			cap = r.name_len + 1;
		}
		memcpy(name, recs + off, r.name_len);
		name[r.name_len] = '\0';
		off += r.name_len;
		stat_unpack(&r.st, &st);
		ret = fill(payload, name, &st);
	}
	free(name);
	return ret;
}

/*
 * The subfolders of folder @path, whose listing @rc recorded, go to the
 * prefetch threads to be listed ahead: a walk lists them next.
 */
static void fs_listing_ahead(struct fs *fs, struct backend *be, const char *path,
			     const struct fs_lrecorder *rc)
{
	char *names[FS_PREFETCH_FOLDERS];
	size_t n = 0;

	for (size_t off = 0; off < rc->len && n < sizeof(names) / sizeof(names[0]);) {
		struct fs_lrec r;
		struct stat st;

		memcpy(&r, rc->recs + off, sizeof(r));
		off += sizeof(r);
		stat_unpack(&r.st, &st);
		if (S_ISDIR(st.st_mode)) {
			names[n] = strndup(rc->recs + off, r.name_len);
			n += names[n] != NULL;
		}
		off += r.name_len;
	}
	if (n)
		fs_prefetch_folders(fs, be, path, names, n);
	while (n > 0)
		free(names[--n]);
}

int fs_listing_readdir(struct fs *fs, const struct view *v, const char *path,
		       backend_fill_fn *fill, void *payload)
{
	struct fs_lrecorder rc = { .fill = fill, .payload = payload };
	char *key, *recs;
	size_t len;
	int ret;

	if (!fs_listing_used(fs, v))
		return backend_readdir(v->be, path, fill, payload);
	key = fs_listing_key(v->be, path);
	if (!key)
		return -ENOMEM;
	pthread_mutex_lock(&fs->listing->lock);
	while (fs_listing_busy_slot(fs->listing, key) >= 0)	/* listed ahead now: wait */
		pthread_cond_wait(&fs->listing->done, &fs->listing->lock);
	pthread_mutex_unlock(&fs->listing->lock);
	if (fs_listing_copy(fs->listing, key, &recs, &len)) {
		free(key);
		atomic_fetch_add(&v->be->stats.listings_remembered, 1);
		ret = fs_listing_replay(recs, len, fill, payload);
		free(recs);
		return ret;
	}
	ret = backend_readdir(v->be, path, fs_lrecord, &rc);
	if (ret == 0 && !rc.over) {
		fs_listing_ahead(fs, v->be, path, &rc);
		fs_listing_keep(fs->listing, key, &rc);
	}
	free(rc.recs);
	free(key);
	return ret;
}

/* A fill that takes nothing: a listing read ahead is only kept. */
static int fs_lsink(void *payload, const char *name, const struct stat *st)
{
	(void)payload;
	(void)name;
	(void)st;
	return 0;
}

void fs_listing_fetch(struct fs *fs, struct backend *be, const char *path)
{
	struct fs_lrecorder rc = { .fill = fs_lsink };
	struct fs_listing *l = fs->listing;
	char *key = fs_listing_key(be, path);
	int slot = -1;

	if (!key)
		return;
	pthread_mutex_lock(&l->lock);
	if (!path_map_get(&l->map, key) && fs_listing_busy_slot(l, key) < 0)
		for (int i = 0; i < FS_LISTING_BUSY && slot < 0; i++)
			if (!l->busy[i])
				slot = i;
	if (slot >= 0)
		l->busy[slot] = key;
	pthread_mutex_unlock(&l->lock);
	if (slot < 0) {			/* kept, being listed, or too many at once */
		free(key);
		return;
	}
	if (backend_readdir(be, path, fs_lrecord, &rc) == 0 && !rc.over)
		fs_listing_keep(l, key, &rc);
	free(rc.recs);
	pthread_mutex_lock(&l->lock);
	l->busy[slot] = NULL;
	pthread_cond_broadcast(&l->done);
	pthread_mutex_unlock(&l->lock);
	free(key);
}
