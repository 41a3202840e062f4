/*
 * fs_tree.c - the nodes of the gateway tree and their paths.
 *
 * Builds the permanent part of the tree from the config (one view per
 * datastore, dataset, checkpoint and model) and keeps the nodes the kernel
 * looked up beneath the views in a hash of (parent, name).  A node holds a
 * reference on its parent, so a folder outlives the nodes inside it even if
 * the kernel forgets it first.  Unlink and rename take a node out of the
 * hash: an open file keeps working through its handle, and a new lookup of
 * the name makes a new node.
 *
 * Locking: fs->lock guards the shape (parent, name, hash, counts).  It is
 * never held across a backend call or a reply to the kernel.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fuse_lowlevel.h>

#include "fs.h"
#include "log.h"
#include "output.h"
#include "path.h"

/* st_ino of backend nodes: the backend's number, with the backend index on top. */
#define FS_INO_BITS 48
#define FS_INO_MASK ((UINT64_C(1) << FS_INO_BITS) - 1)

static uint64_t fs_hash_key(const struct node *parent, const char *name)
{
	uint64_t h = 1469598103934665603ULL ^ (uint64_t)(uintptr_t)parent;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ULL;
	return h;
}

static struct node **fs_hash_slot(struct fs *fs, const struct node *parent, const char *name)
{
	struct node **slot = &fs->hash[fs_hash_key(parent, name) & (fs->hash_size - 1)];

	while (*slot && ((*slot)->parent != parent || strcmp((*slot)->name, name) != 0))
		slot = &(*slot)->hnext;
	return slot;
}

static void fs_hash_grow(struct fs *fs)
{
	size_t size = fs->hash_size * 2;
	struct node **hash = calloc(size, sizeof(*hash));

	if (!hash)
		return;		/* longer chains, still correct */
	for (size_t i = 0; i < fs->hash_size; i++) {
		struct node *n = fs->hash[i], *next;

		for (; n; n = next) {
			struct node **slot = &hash[fs_hash_key(n->parent, n->name) & (size - 1)];

			next = n->hnext;
			n->hnext = *slot;
			*slot = n;
		}
	}
	free(fs->hash);
	fs->hash = hash;
	fs->hash_size = size;
}

static void fs_hash_remove(struct fs *fs, struct node *n)
{
	struct node **slot = fs_hash_slot(fs, n->parent, n->name);

	if (*slot == n) {
		*slot = n->hnext;
		fs->hash_count--;
	}
	n->hnext = NULL;
	n->hashed = false;
}

static void fs_hash_insert(struct fs *fs, struct node *n)
{
	struct node **slot;

	if (fs->hash_count >= fs->hash_size)
		fs_hash_grow(fs);
	slot = &fs->hash[fs_hash_key(n->parent, n->name) & (fs->hash_size - 1)];
	n->hnext = *slot;
	*slot = n;
	n->hashed = true;
	fs->hash_count++;
}

static void fs_list_remove(struct fs *fs, struct node *n)
{
	if (n->lprev)
		n->lprev->lnext = n->lnext;
	else
		fs->all = n->lnext;
	if (n->lnext)
		n->lnext->lprev = n->lprev;
}

/* Frees @n and every parent it was the last reference of.  Called with fs->lock held. */
static void fs_node_put(struct fs *fs, struct node *n)
{
	while (n && !n->permanent && n->nlookup == 0 && n->nchildren == 0) {
		struct node *parent = n->parent;

		if (n->hashed)
			fs_hash_remove(fs, n);
		fs_list_remove(fs, n);
		free(n->name);
		free(n);
		parent->nchildren--;
		n = parent;
	}
}

struct node *fs_node(struct fs *fs, uint64_t nodeid)
{
	return nodeid == FUSE_ROOT_ID ? fs->root : (struct node *)(uintptr_t)nodeid;
}

uint64_t fs_nodeid(struct fs *fs, struct node *n)
{
	return n == fs->root ? FUSE_ROOT_ID : (uint64_t)(uintptr_t)n;
}

struct node *fs_vdir_child(struct node *dir, const char *name)
{
	for (size_t i = 0; i < dir->nentries; i++)
		if (strcmp(dir->entries[i]->name, name) == 0)
			return dir->entries[i];
	return NULL;
}

/* Writes @seg in front of what @p holds from *pos on, with a '/' between. */
static void fs_path_prepend(char *p, size_t *pos, size_t end, const char *seg)
{
	size_t len = strlen(seg);

	if (*pos < end)
		p[--*pos] = '/';
	*pos -= len;
	memcpy(p + *pos, seg, len);
}

static size_t fs_seg_len(const char *seg)
{
	return seg[0] ? strlen(seg) + 1 : 0;
}

int fs_node_path(struct fs *fs, struct node *n, const char *name, char **out)
{
	const char *root = n->view->root;
	size_t len = fs_seg_len(root) + (name ? fs_seg_len(name) : 0);
	size_t pos;
	char *p;

	pthread_rwlock_rdlock(&fs->lock);
	for (struct node *c = n; !c->permanent; c = c->parent) {
		if (!c->hashed) {
			pthread_rwlock_unlock(&fs->lock);
			return -ENOENT;
		}
		len += fs_seg_len(c->name);
	}
	pos = len ? len - 1 : 0;	/* no '/' after the last segment */
	p = malloc(pos + 1);
	if (!p) {
		pthread_rwlock_unlock(&fs->lock);
		return -ENOMEM;
	}
	len = pos;
	p[len] = '\0';
	if (name && name[0])
		fs_path_prepend(p, &pos, len, name);
	for (struct node *c = n; !c->permanent; c = c->parent)
		fs_path_prepend(p, &pos, len, c->name);
	pthread_rwlock_unlock(&fs->lock);
	if (root[0])
		fs_path_prepend(p, &pos, len, root);
	*out = p;
	return 0;
}

int fs_node_get(struct fs *fs, struct node *parent, const char *name, struct node **out)
{
	struct node **slot, *n;

	pthread_rwlock_wrlock(&fs->lock);
	slot = fs_hash_slot(fs, parent, name);
	n = *slot;
	if (!n) {
		n = calloc(1, sizeof(*n));
		if (n)
			n->name = strdup(name);
		if (!n || !n->name) {
			pthread_rwlock_unlock(&fs->lock);
			free(n);
			return -ENOMEM;
		}
		n->kind = parent->kind == NODE_JOBS ? NODE_JOBS : NODE_BACKEND;
		n->view = parent->view;
		n->parent = parent;
		parent->nchildren++;
		fs_hash_insert(fs, n);
		n->lnext = fs->all;
		if (fs->all)
			fs->all->lprev = n;
		fs->all = n;
	}
	n->nlookup++;
	pthread_rwlock_unlock(&fs->lock);
	*out = n;
	return 0;
}

void fs_node_forget(struct fs *fs, struct node *n, uint64_t nlookup)
{
	pthread_rwlock_wrlock(&fs->lock);
	n->nlookup = nlookup < n->nlookup ? n->nlookup - nlookup : 0;
	fs_node_put(fs, n);
	pthread_rwlock_unlock(&fs->lock);
}

/* Takes the node at (parent, name) out of the hash; it lives on while referenced. */
static void fs_node_detach(struct fs *fs, struct node *parent, const char *name)
{
	struct node *n = *fs_hash_slot(fs, parent, name);

	if (!n)
		return;
	fs_hash_remove(fs, n);
	fs_node_put(fs, n);
}

void fs_node_unlinked(struct fs *fs, struct node *parent, const char *name)
{
	pthread_rwlock_wrlock(&fs->lock);
	fs_node_detach(fs, parent, name);
	pthread_rwlock_unlock(&fs->lock);
}

void fs_node_changed(struct fs *fs, struct node *n)
{
	atomic_store(&n->changed, atomic_fetch_add(&fs->gen, 1) + 1);
}

/* Moves @n to (newparent, newname).  Called with fs->lock held. */
static int fs_node_move(struct fs *fs, struct node *n, struct node *newparent,
			const char *newname)
{
	char *copy = strdup(newname);

	if (!copy)
		return -ENOMEM;
	fs_hash_remove(fs, n);
	free(n->name);
	n->name = copy;
	newparent->nchildren++;
	n->parent->nchildren--;
	if (n->parent != newparent && n->parent->nchildren == 0)
		fs_node_put(fs, n->parent);
	n->parent = newparent;
	fs_hash_insert(fs, n);
	fs_node_changed(fs, n);	/* a listing read before holds what had its name */
	return 0;
}

int fs_node_renamed(struct fs *fs, struct node *parent, const char *name,
		    struct node *newparent, const char *newname, unsigned int flags)
{
	struct node *from, *to;
	int ret = 0;

	pthread_rwlock_wrlock(&fs->lock);
	from = *fs_hash_slot(fs, parent, name);
	to = *fs_hash_slot(fs, newparent, newname);
	if (flags & RENAME_EXCHANGE) {
		/* Swap: detach both, then put each under the other's name. */
		if (from)
			fs_hash_remove(fs, from);
		if (to)
			fs_hash_remove(fs, to);
		if (from)
			ret = fs_node_move(fs, from, newparent, newname);
		if (to && ret == 0)
			ret = fs_node_move(fs, to, parent, name);
	} else {
		if (to)
			fs_node_detach(fs, newparent, newname);
		if (from)
			ret = fs_node_move(fs, from, newparent, newname);
	}
	pthread_rwlock_unlock(&fs->lock);
	return ret;
}

void fs_node_attr(const struct node *n, struct stat *st)
{
	const struct view *v = n->view;

	st->st_ino = ((uint64_t)v->be->index << FS_INO_BITS) | ((uint64_t)st->st_ino & FS_INO_MASK);
	if (v->uid >= 0)
		st->st_uid = (uid_t)v->uid;
	if (v->gid >= 0)
		st->st_gid = (gid_t)v->gid;
	if (v->mode >= 0 && (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode))) {
		mode_t mode = (mode_t)v->mode;

		if (S_ISDIR(st->st_mode))
			mode |= (mode & 0444) >> 2;
		st->st_mode = (st->st_mode & S_IFMT) | mode;
	}
}

void fs_vnode_attr(struct fs *fs, const struct node *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_mode = n->kind == NODE_VDIR ? S_IFDIR | 0755
		    : n->kind == NODE_JOBS ? S_IFDIR | 01777 : S_IFREG | 0444;
	st->st_nlink = n->kind == NODE_VFILE ? 1 : 2;
	if (fs->private_vnodes) {
		st->st_uid = fs->vnode_uid;
		st->st_gid = fs->vnode_gid;
		if (n->kind == NODE_VDIR)
			st->st_mode = S_IFDIR | 0700;
	}
	st->st_blksize = 4096;
	st->st_atime = st->st_mtime = st->st_ctime = fs->started;
}

int fs_mount_content(struct fs *fs, char **buf, size_t *len)
{
	*buf = strdup(fs->mount_info ? fs->mount_info : "");
	if (!*buf)
		return -ENOMEM;
	*len = strlen(*buf);
	return 0;
}

int fs_uploads_content(struct fs *fs, char **buf, size_t *len)
{
	return output_status_text(fs->cfg->state_dir, buf, len);
}

/* ---- building the permanent tree ---- */

enum {
	FS_V_ROOT,
	FS_V_DATASTORES,
	FS_V_DATASETS,
	FS_V_CHECKPOINTS,
	FS_V_MODELS,
	FS_V_MLFS,
	FS_V_STATS,
	FS_V_NODE,
	FS_V_MOUNT,
	FS_V_UPLOADS,
	FS_V_JOBS,
	FS_V_SOURCES,		/* in the root only when the config has a [source] */
	FS_V_COUNT
};

static const struct {
	const char *name;
	int parent;
	int write_errno;
} fs_vtable[FS_V_COUNT] = {
	[FS_V_ROOT] = { "", -1, EPERM },
	[FS_V_DATASTORES] = { "datastores", FS_V_ROOT, EPERM },
	[FS_V_DATASETS] = { "datasets", FS_V_ROOT, EROFS },
	[FS_V_CHECKPOINTS] = { "checkpoints", FS_V_ROOT, EROFS },
	[FS_V_MODELS] = { "models", FS_V_ROOT, EROFS },
	[FS_V_MLFS] = { ".mlfs", FS_V_ROOT, EPERM },
	[FS_V_STATS] = { "stats", FS_V_MLFS, EPERM },
	[FS_V_NODE] = { "node", FS_V_MLFS, EPERM },
	[FS_V_MOUNT] = { "mount", FS_V_MLFS, EPERM },
	[FS_V_UPLOADS] = { "uploads", FS_V_MLFS, EPERM },
	[FS_V_JOBS] = { "jobs", FS_V_ROOT, EPERM },
	[FS_V_SOURCES] = { "sources", FS_V_ROOT, EROFS },
};

/* Whether the config has a [source]: sources/ is shown then. */
static bool fs_has_sources(const struct mlfs_config *cfg)
{
	for (size_t i = 0; i < cfg->n_sources; i++)
		if (cfg->sources[i].kind == SOURCE_SOURCE)
			return true;
	return false;
}

int fs_vdir_add(struct node *dir, struct node *child)
{
	struct node **e = realloc(dir->entries, (dir->nentries + 1) * sizeof(*e));

	if (!e)
		return -ENOMEM;
	dir->entries = e;
	e[dir->nentries++] = child;
	child->parent = dir;
	return 0;
}

static int fs_build_vnodes(struct fs *fs)
{
	for (int i = 0; i < FS_V_COUNT; i++) {
		struct node *n = &fs->vnodes[i];

		n->kind = i == FS_V_STATS || i == FS_V_NODE || i == FS_V_MOUNT || i == FS_V_UPLOADS
			? NODE_VFILE
			: i == FS_V_JOBS ? NODE_JOBS : NODE_VDIR;
		n->ino = (uint64_t)i + 1;
		n->permanent = true;
		n->write_errno = fs_vtable[i].write_errno;
		n->name = strdup(fs_vtable[i].name);
		if (!n->name)
			return -ENOMEM;
		if (i == FS_V_SOURCES && !fs_has_sources(fs->cfg))
			continue;
		if (fs_vtable[i].parent >= 0 &&
		    fs_vdir_add(&fs->vnodes[fs_vtable[i].parent], n) < 0)
			return -ENOMEM;
	}
	fs->vnodes[FS_V_STATS].content = fs_stats_content;
	fs->vnodes[FS_V_NODE].content = fs_jobs_node_content;
	fs->vnodes[FS_V_MOUNT].content = fs_mount_content;
	fs->vnodes[FS_V_UPLOADS].content = fs_uploads_content;
	fs->vnodes[FS_V_JOBS].view = &fs->jobs_view;
	fs->root = &fs->vnodes[FS_V_ROOT];
	fs->root->parent = fs->root;
	return 0;
}

static int fs_view_init(struct view *v, struct backend *be, const char *name,
			const char *root, bool readonly, const struct datastore_config *ds)
{
	v->be = be;
	v->readonly = readonly;
	v->timeout = readonly ? 3600.0 : 1.0;
	v->uid = ds->uid;
	v->gid = ds->gid;
	v->mode = ds->mode;
	v->root = strdup(root);
	return path_shown_name(&v->name, name) < 0 || !v->root ? -ENOMEM : 0;
}

/* The number of datastores shown under datastores/ (implicit ones are not). */
static size_t fs_shown_datastores(const struct mlfs_config *cfg)
{
	size_t n = 0;

	for (size_t i = 0; i < cfg->n_datastores; i++)
		n += !cfg->datastores[i].implicit;
	return n;
}

/* An archive source, shown extracted: a be_archive over its datastore's backend. */
static int fs_open_archive(struct fs *fs, struct backend *inner, const struct source_config *src)
{
	struct backend *ab;
	int ret = backend_create_archive(&ab, inner, src->path, fs->cfg->cache_dir,
					 fs->cfg->archive_cache_size, src->name);

	if (ret < 0) {
		if (ret != -EINVAL)	/* a corrupt archive was named by its create */
			log_err("%s %s: %s: cannot read the archive: %s", "source", src->name,
				src->source, strerror(-ret));
		return ret;
	}
	ab->index = (unsigned int)(fs->cfg->n_datastores + fs->narchives + 1);
	fs->archives[fs->narchives++] = ab;
	return 0;
}

int fs_source_view(struct fs *fs, struct view *v, const struct source_config *src,
		   const char *name, bool readonly)
{
	const struct mlfs_config *cfg = fs->cfg;
	size_t b = 0;

	/* config_load gave every source a datastore (a URL source its own): none is a bad config. */
	if (!src->datastore)
		return -ENOTSUP;
	v->src = src;
	while (strcmp(cfg->datastores[b].name, src->datastore) != 0)
		b++;
	if (path_is_archive(src->source)) {
		int ret = fs_open_archive(fs, fs->backends[b], src);

		if (ret < 0)
			return ret;
		return fs_view_init(v, fs->archives[fs->narchives - 1], name,
				    src->sub_path ? src->sub_path : "", true, &cfg->datastores[b]);
	}
	if (src->sub_path) {
		/* a [source]'s sub_path: that folder of it is what is shown */
		char *root = NULL;
		int ret;

		if (asprintf(&root, "%s%s%s", src->path, src->path[0] ? "/" : "",
			     src->sub_path) < 0)
			return -ENOMEM;
		ret = fs_view_init(v, fs->backends[b], name, root, readonly, &cfg->datastores[b]);
		free(root);
		return ret;
	}
	return fs_view_init(v, fs->backends[b], name, src->path, readonly, &cfg->datastores[b]);
}

int fs_view_top(struct node *top, struct view *v, struct node *dir)
{
	top->kind = NODE_BACKEND;
	top->permanent = true;
	top->hashed = true;
	top->view = v;
	top->name = strdup(v->name);
	return !top->name || fs_vdir_add(dir, top) < 0 ? -ENOMEM : 0;
}

static int fs_build_views(struct fs *fs)
{
	struct mlfs_config *cfg = fs->cfg;
	static const int dirs[] = {
		[SOURCE_DATASET] = FS_V_DATASETS,
		[SOURCE_CHECKPOINT] = FS_V_CHECKPOINTS,
		[SOURCE_MODEL] = FS_V_MODELS,
		[SOURCE_SOURCE] = FS_V_SOURCES,
	};
	size_t nshown = 0;

	for (size_t i = 0; i < cfg->n_datastores; i++)
		if (!cfg->datastores[i].implicit &&
		    fs_view_init(&fs->views[nshown++], fs->backends[i], cfg->datastores[i].name, "",
				 false, &cfg->datastores[i]) < 0)
			return -ENOMEM;
	for (size_t i = 0; i < cfg->n_sources; i++) {
		int ret = fs_source_view(fs, &fs->views[nshown + i], &cfg->sources[i],
					 cfg->sources[i].name, true);

		if (ret < 0)
			return ret;
	}
	for (size_t i = 0; i < fs->nviews; i++) {
		int dir = i < nshown ? FS_V_DATASTORES : dirs[cfg->sources[i - nshown].kind];

		if (fs_view_top(&fs->vnodes[FS_V_COUNT + i], &fs->views[i],
				&fs->vnodes[dir]) < 0)
			return -ENOMEM;
	}
	return 0;
}

/*
 * Opens the shared disk cache when a backend is remote.  A cache that cannot
 * be opened (a full or read-only disk) is not fatal: reads go to the backend.
 */
static void fs_open_cache(struct fs *fs)
{
	bool remote = false;
	int ret;

	for (size_t i = 0; i < fs->nbackends; i++)
		remote |= (fs->backends[i]->ops->caps & BE_CAP_REMOTE) != 0;
	if (!remote)
		return;
	ret = cache_create(&fs->cache, fs->cfg->cache_dir, fs->cfg->cache_size);
	if (ret < 0)
		log_warn("cache %s: %s; remote files are read uncached", fs->cfg->cache_dir,
			 strerror(-ret));
}

static int fs_build_backends(struct fs *fs)
{
	for (size_t i = 0; i < fs->cfg->n_datastores; i++) {
		int ret = backend_create(&fs->backends[i], &fs->cfg->datastores[i],
					 (unsigned int)i + 1);

		if (ret < 0) {
			log_err("datastore %s: %s", fs->cfg->datastores[i].name, strerror(-ret));
			return ret;
		}
		fs->nbackends++;
	}
	fs_open_cache(fs);
	return 0;
}

int fs_alloc(struct fs **out, struct mlfs_config *cfg, size_t nvnodes, size_t nviews)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	int ret = -ENOMEM;

	*out = fs;
	if (!fs)
		return -ENOMEM;
	fs->cfg = cfg;
	fs->started = time(NULL);
	fs->nviews = nviews;
	fs->nvnodes = nvnodes;
	fs->hash_size = 1024;
	fs->pt_fd = -1;
	fs->jobs_view.name = "jobs";
	fs->jobs_view.root = "";
	fs->jobs_view.readonly = false;
	pthread_rwlock_init(&fs->lock, NULL);
	pthread_mutex_init(&fs->cache_lock, NULL);
	fs->backends = calloc(cfg->n_datastores + 1, sizeof(*fs->backends));
	fs->archives = calloc(cfg->n_sources + 1, sizeof(*fs->archives));
	fs->views = calloc(fs->nviews + 1, sizeof(*fs->views));
	fs->vnodes = calloc(fs->nvnodes, sizeof(*fs->vnodes));
	fs->hash = calloc(fs->hash_size, sizeof(*fs->hash));
	if (fs->backends && fs->archives && fs->views && fs->vnodes && fs->hash)
		ret = fs_prefetch_create(fs);
	if (ret == 0)
		ret = fs_listing_create(fs);
	if (ret == 0)
		ret = fs_build_backends(fs);
	return ret;
}

int fs_create(struct fs **out, struct mlfs_config *cfg)
{
	struct fs *fs;
	size_t nviews = fs_shown_datastores(cfg) + cfg->n_sources;
	int ret = fs_alloc(&fs, cfg, FS_V_COUNT + nviews, nviews);

	if (ret == 0)
		ret = fs_build_vnodes(fs);
	if (ret == 0)
		ret = fs_build_views(fs);
	if (ret < 0) {
		if (fs)
			fs->cfg = NULL;		/* the caller still owns it */
		fs_destroy(fs);
		return ret;
	}
	*out = fs;
	return 0;
}

void fs_destroy(struct fs *fs)
{
	if (!fs)
		return;
	fs_jobs_stop(fs);
	fs_prefetch_stop(fs);	/* its threads read the backends and the cache */
	fs_release_all(fs);	/* before the nodes, caches and backends the files use */
	for (struct node *n = fs->all, *next; n; n = next) {
		next = n->lnext;
		free(n->name);
		free(n);
	}
	for (size_t i = 0; fs->vnodes && i < fs->nvnodes; i++) {
		free(fs->vnodes[i].name);
		free(fs->vnodes[i].entries);
	}
	for (size_t i = 0; fs->views && i < fs->nviews; i++) {
		free(fs->views[i].name);
		free(fs->views[i].root);
	}
	for (size_t i = 0; i < fs->narchives; i++)
		backend_destroy(fs->archives[i]);	/* before the backends they read through */
	free(fs->archives);
	for (size_t i = 0; i < fs->nbackends; i++)
		backend_destroy(fs->backends[i]);
	cache_destroy(fs->cache);
	fs_listing_destroy(fs);
	free(fs->hash);
	free(fs->vnodes);
	free(fs->views);
	free(fs->backends);
	config_free(fs->cfg);
	free(fs->mount_info);
	pthread_rwlock_destroy(&fs->lock);
	pthread_mutex_destroy(&fs->cache_lock);
	free(fs);
}
