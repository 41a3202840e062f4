/*
 * fs_prefetch.c - read-ahead across files: a job that walks a dataset's
 * folder (a listing, then its files read in turn by one or several loader
 * processes) finds the files it reads next already in the disk cache.
 *
 * The order: nodes are made in the order a listing names them (readdirplus
 * makes one per entry), and fs->all keeps them newest first, so the files a
 * folder listed after @n are n->lprev, n->lprev->lprev ... while their
 * parent is n's.  An open of a file of a trusted remote view (datasets/,
 * checkpoints/, models/, a worker's inputs) looks [mlfs] read_ahead_files
 * nodes (32 by default, 0: off, FS_PREFETCH_AHEAD at most) down that chain
 * and queues each not queued before (a node's `prefetched`
 * flag, also set by its own open), so a walk queues about one file per open
 * and one that stops leaves at most read_ahead_files files fetched past
 * where it stopped.  It fills in for the parallelism a walk lacks: while
 * FS_PREFETCH_READERS files or more are open through the mount (a loader's
 * workers reading at once), an open marks the files ahead as weighed and
 * queues none, since fetching each file twice over (the prefetch's open and
 * the reader's) only costs CPU there: on 2 CPUs, 8 readers' first epoch was
 * 15-30% slower with it.  A file is weighed once, at the first open that
 * looks at it, so what a second epoch fetches ahead never depends on how
 * many readers the first had at each moment: it fetches nothing new.
 *
 * FS_PREFETCH_THREADS threads fetch the queued files whole through the
 * cache (fs_fetch_file: the same single flight as any reader, which waits
 * for a block a prefetch is fetching instead of asking again); a file
 * over FS_PREFETCH_MAX bytes is left to the in-file read-ahead, a folder or
 * a file the backend cannot name is skipped.  The queue holds at most
 * FS_PREFETCH_QUEUE paths; past that a file is not queued (its reader
 * fetches it).  A prefetch error is dropped: the reader that needs the file
 * gets it.  `datastore.NAME.prefetched` counts the files fetched this way,
 * `mount.prefetch_pending` those queued or being fetched now.
 *
 * The same queue and threads list folders ahead (fs_prefetch_folders, from
 * fs_listing.c): a task marked `folder` is a listing to make and keep.
 *
 * Threads start at the first queued file (after mlfs mount has forked into
 * the background) and are joined by fs_prefetch_stop, before the backends
 * and the cache they use go.  The queue owns copies of paths, never nodes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"
#include "log.h"
#include "path.h"

#define FS_PREFETCH_THREADS	8
#define FS_PREFETCH_AHEAD	256		/* files past the one opened, at most ([mlfs] read_ahead_files) */
#define FS_PREFETCH_QUEUE	256		/* paths waiting */
#define FS_PREFETCH_MAX		(16u << 20)	/* bytes: bigger files are not fetched ahead */
#define FS_PREFETCH_READERS	4		/* open files from which readers need no help */
#define FS_FETCH_CHUNK		(4u << 20)

struct fs_prefetch_task {
	struct fs_prefetch_task *next;
	struct backend *be;
	bool folder;		/* a folder to list (fs_listing_fetch), not a file to fetch */
	char path[];
};

struct fs_prefetch {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fs_prefetch_task *head, *tail;	/* guarded by lock */
	size_t queued;				/* guarded by lock */
	size_t active;				/* guarded by lock: being fetched */
	bool stopping;				/* guarded by lock */
	pthread_t threads[FS_PREFETCH_THREADS];
	int n_threads;				/* guarded by lock */
};

static ssize_t fs_fetch_pread(void *arg, void *buf, size_t len, off_t off)
{
	return backend_pread(arg, buf, len, off);
}

/* Fetching is all a prefetch wants: the bytes are not needed here. */
static void fs_fetch_ignore(void *arg, const struct iovec *iov, int cnt)
{
	(void)arg;
	(void)iov;
	(void)cnt;
}

int fs_fetch_file(struct fs *fs, struct backend *be, const char *path, uint64_t max_size,
		  uint64_t *bytes)
{
	char key[PATH_MAX + 1024];
	struct backend_file *bf;
	struct cache_file *cf = NULL;
	struct stat st;
	ssize_t n = 0;
	int ret = backend_open(&bf, be, path, O_RDONLY | BE_O_TRUST);

	if (ret < 0)
		return ret;
	ret = backend_cache_key(bf, key, sizeof(key));
	if (ret >= 0)
		ret = backend_fgetattr(bf, &st);
	if (ret >= 0 && max_size && (uint64_t)st.st_size > max_size)
		ret = -EFBIG;
	if (ret >= 0)
		ret = cache_file_open(fs->cache, &cf, key, (uint64_t)st.st_size, &be->stats.cache,
				      fs_fetch_pread, bf);
	if (ret >= 0 && (be->ops->caps & BE_CAP_LONG_FETCH))
		cache_file_long_fetches(cf);
	for (off_t off = 0; ret >= 0 && off < st.st_size; off += n) {
		n = cache_file_read_iov(cf, FS_FETCH_CHUNK, off, fs_fetch_ignore, NULL);
		if (n == -ENOTSUP) {	/* too big for the cache: nothing to keep */
			ret = 0;
			break;
		}
		if (n <= 0)
			ret = n < 0 ? (int)n : -EIO;
		else
			*bytes += (uint64_t)n;
	}
	cache_file_close(cf);
	backend_release(bf);
	return ret == -ENOTSUP ? 0 : ret;
}

static void *fs_prefetch_thread(void *arg)
{
	struct fs *fs = arg;
	struct fs_prefetch *p = fs->prefetch;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct fs_prefetch_task *t;
		uint64_t bytes = 0;

		while (!p->head && !p->stopping)
			pthread_cond_wait(&p->cond, &p->lock);
		if (p->stopping)
			break;
		t = p->head;
		p->head = t->next;
		if (!p->head)
			p->tail = NULL;
		p->queued--;
		p->active++;
		pthread_mutex_unlock(&p->lock);
		if (t->folder)
			fs_listing_fetch(fs, t->be, t->path);
		else if (fs_fetch_file(fs, t->be, t->path, FS_PREFETCH_MAX, &bytes) == 0 && bytes)
			atomic_fetch_add(&t->be->stats.prefetched, 1);
		free(t);
		pthread_mutex_lock(&p->lock);
		p->active--;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int fs_prefetch_create(struct fs *fs)
{
	struct fs_prefetch *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	fs->prefetch = p;
	return 0;
}

/* Queues @be's @path, a file or a @folder (p->lock held); starts the threads the first time. */
static void fs_prefetch_queue(struct fs *fs, struct backend *be, char *path, bool folder)
{
	struct fs_prefetch *p = fs->prefetch;
	struct fs_prefetch_task *t;
	size_t len = strlen(path) + 1;

	if (p->stopping || p->queued >= FS_PREFETCH_QUEUE || !(t = malloc(sizeof(*t) + len)))
		return;
	while (p->n_threads < FS_PREFETCH_THREADS &&
	       pthread_create(&p->threads[p->n_threads], NULL, fs_prefetch_thread, fs) == 0)
		p->n_threads++;
	if (!p->n_threads) {
		free(t);
		return;
	}
	t->next = NULL;
	t->be = be;
	t->folder = folder;
	memcpy(t->path, path, len);
	if (p->tail)
		p->tail->next = t;
	else
		p->head = t;
	p->tail = t;
	p->queued++;
	pthread_cond_signal(&p->cond);
}

void fs_prefetch_opened(struct fs *fs, struct node *n)
{
	char *names[FS_PREFETCH_AHEAD], *dir = NULL;
	struct backend *be = n->view->be;
	struct node *parent;
	size_t k = 0, ahead = 0, want;
	bool help;

	if (!fs->prefetch || !fs->cache || !n->view->readonly || !(be->ops->caps & BE_CAP_REMOTE) ||
	    fs->cfg->read_ahead_files <= 0)
		return;
	want = fs->cfg->read_ahead_files < FS_PREFETCH_AHEAD ? (size_t)fs->cfg->read_ahead_files
							     : FS_PREFETCH_AHEAD;
	atomic_store(&n->prefetched, true);	/* its reader fetches it */
	/* readers in parallel already: a prefetch would only cost CPU */
	help = atomic_load(&fs->open_files) < FS_PREFETCH_READERS;
	pthread_rwlock_rdlock(&fs->lock);
	parent = n->parent;
	for (struct node *c = n->lprev; c && ahead++ < want; c = c->lprev) {
		if (c->parent != parent)
			break;		/* past the files its folder listed after it */
		if (!c->hashed || atomic_exchange(&c->prefetched, true) || !help)
			continue;	/* each file is weighed once: at the first open before it */
		names[k] = strdup(c->name);
		if (names[k])
			k++;
	}
	pthread_rwlock_unlock(&fs->lock);
	if (k && fs_node_path(fs, parent, NULL, &dir) == 0) {
		pthread_mutex_lock(&fs->prefetch->lock);
		for (size_t i = 0; i < k; i++) {
			char *path = NULL;

			if (path_join(&path, dir, names[i]) == 0)
				fs_prefetch_queue(fs, be, path, false);
			free(path);
		}
		pthread_mutex_unlock(&fs->prefetch->lock);
	}
	for (size_t i = 0; i < k; i++)
		free(names[i]);
	free(dir);
}

void fs_prefetch_folders(struct fs *fs, struct backend *be, const char *dir, char **names,
			 size_t n)
{
	if (!fs->prefetch || fs->cfg->read_ahead_files <= 0)
		return;
	pthread_mutex_lock(&fs->prefetch->lock);
	for (size_t i = 0; i < n && i < FS_PREFETCH_FOLDERS; i++) {
		char *path = NULL;

		if (path_join(&path, dir, names[i]) == 0)
			fs_prefetch_queue(fs, be, path, true);
		free(path);
	}
	pthread_mutex_unlock(&fs->prefetch->lock);
}

size_t fs_prefetch_pending(struct fs *fs)
{
	struct fs_prefetch *p = fs->prefetch;
	size_t n;

	if (!p)
		return 0;
	pthread_mutex_lock(&p->lock);
	n = p->queued + p->active;
	pthread_mutex_unlock(&p->lock);
	return n;
}

void fs_prefetch_stop(struct fs *fs)
{
	struct fs_prefetch *p = fs->prefetch;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; i < p->n_threads; i++)
		pthread_join(p->threads[i], NULL);
	while (p->head) {
		struct fs_prefetch_task *t = p->head;

		p->head = t->next;
		free(t);
	}
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
	fs->prefetch = NULL;
}
