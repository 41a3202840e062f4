/*
 * fs_job.c - the tree of one worker's view, as `mlfs job` mounts it.
 *
 *   input/        one dataset directly, several as folders named after them
 *   checkpoint/   the same rule for checkpoints
 *   models/       the model code, or an empty folder
 *   sources/      the sources the worker maps (Kibernetika's), each by name;
 *                 only when it maps any
 *   output/       read-write: the staging folder of the worker's output
 *   .mlfs/stats   the counters of every backend, as in the gateway
 *   .mlfs/mount   what `mlfs umount` needs to find the output (key=value lines)
 *   .mlfs/uploads every output of the node's state_dir and how far its upload is
 *
 * Every folder above is a view of a source of the config (fs_source_view),
 * so archives, the shared cache and passthrough work here exactly as in
 * the gateway; output/ is a local backend over the staging folder, so the
 * kernel writes it directly (FUSE passthrough) at local-disk speed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "fs_ops_int.h"
#include "log.h"
#include "path.h"

enum {
	FSJ_ROOT,
	FSJ_INPUT,
	FSJ_CHECKPOINT,
	FSJ_MODELS,
	FSJ_SOURCES,
	FSJ_MLFS,
	FSJ_STATS,
	FSJ_MOUNT,
	FSJ_UPLOADS,
	FSJ_COUNT
};

static const struct {
	const char *name;
	int parent;
} fs_job_vtable[FSJ_COUNT] = {
	[FSJ_ROOT] = { "", -1 },
	[FSJ_INPUT] = { "input", FSJ_ROOT },
	[FSJ_CHECKPOINT] = { "checkpoint", FSJ_ROOT },
	[FSJ_MODELS] = { "models", FSJ_ROOT },
	[FSJ_SOURCES] = { "sources", FSJ_ROOT },
	[FSJ_MLFS] = { ".mlfs", FSJ_ROOT },
	[FSJ_STATS] = { "stats", FSJ_MLFS },
	[FSJ_MOUNT] = { "mount", FSJ_MLFS },
	[FSJ_UPLOADS] = { "uploads", FSJ_MLFS },
};

/*
 * The virtual nodes.  A folder that shows exactly one view is replaced by
 * that view's top (made later), so it is left out of the root here.
 */
static int fs_job_vnodes(struct fs *fs, const bool *replaced)
{
	for (int i = 0; i < FSJ_COUNT; i++) {
		struct node *n = &fs->vnodes[i];

		n->kind = i == FSJ_STATS || i == FSJ_MOUNT || i == FSJ_UPLOADS ? NODE_VFILE : NODE_VDIR;
		n->ino = (uint64_t)i + 1;
		n->permanent = true;
		n->write_errno = i == FSJ_ROOT || i == FSJ_MLFS ? EPERM : EROFS;
		n->name = strdup(fs_job_vtable[i].name);
		if (!n->name)
			return -ENOMEM;
		if (fs_job_vtable[i].parent >= 0 && !replaced[i] &&
		    fs_vdir_add(&fs->vnodes[fs_job_vtable[i].parent], n) < 0)
			return -ENOMEM;
	}
	fs->vnodes[FSJ_STATS].content = fs_stats_content;
	fs->vnodes[FSJ_MOUNT].content = fs_mount_content;
	fs->vnodes[FSJ_UPLOADS].content = fs_uploads_content;
	fs->root = &fs->vnodes[FSJ_ROOT];
	fs->root->parent = fs->root;
	return 0;
}

struct fs_job_builder {
	struct fs *fs;
	size_t view;		/* the next free view and view top */
};

/*
 * Shows source @src in folder @dir: as the folder itself (@alone, named
 * @dir's name, in its place in the root) or as a child named after it.
 */
static int fs_job_show(struct fs_job_builder *b, size_t src, int dir, bool alone,
		       bool readonly)
{
	struct fs *fs = b->fs;
	struct view *v = &fs->views[b->view];
	struct node *top = &fs->vnodes[FSJ_COUNT + b->view];
	const struct source_config *s = &fs->cfg->sources[src];
	int ret = fs_source_view(fs, v, s, alone ? fs_job_vtable[dir].name : s->name, readonly);

	if (ret < 0)
		return ret;
	b->view++;
	return fs_view_top(top, v, alone ? fs->root : &fs->vnodes[dir]);
}

static int fs_job_show_all(struct fs_job_builder *b, const size_t *srcs, size_t n, int dir)
{
	for (size_t i = 0; i < n; i++) {
		int ret = fs_job_show(b, srcs[i], dir, n == 1, true);

		if (ret < 0)
			return ret;
	}
	return 0;
}

/* ---- fetching an input folder whole before the worker starts ---- */

#define FSJ_FETCH_DEPTH 64

struct fs_job_names {
	char **name;
	bool *dir;
	size_t n;
	int err;
};

static int fs_job_collect(void *payload, const char *name, const struct stat *st)
{
	struct fs_job_names *l = payload;
	char **name_v = reallocarray(l->name, l->n + 1, sizeof(*name_v));
	bool *dir_v;

	if (!name_v)
		return l->err = -ENOMEM;
	l->name = name_v;
	dir_v = reallocarray(l->dir, l->n + 1, sizeof(*dir_v));
	if (!dir_v)
		return l->err = -ENOMEM;
	l->dir = dir_v;
	l->name[l->n] = strdup(name);
	if (!l->name[l->n])
		return l->err = -ENOMEM;
	l->dir[l->n++] = st && S_ISDIR(st->st_mode);
	return 0;
}

/* Every file beneath @path of @be into the cache, depth first. */
static int fs_job_fetch_dir(struct fs *fs, struct backend *be, const char *path, int depth,
			    uint64_t *files, uint64_t *bytes)
{
	struct fs_job_names l = { 0 };
	int ret = depth > FSJ_FETCH_DEPTH ? -ELOOP : backend_readdir(be, path, fs_job_collect, &l);

	for (size_t i = 0; i < l.n; i++) {
		char *sub = NULL;
		struct stat st;

		if (ret >= 0 && path_join(&sub, path, l.name[i]) < 0)
			ret = -ENOMEM;
		if (ret >= 0 && !l.dir[i] && (ret = backend_getattr(be, sub, &st)) >= 0)
			l.dir[i] = S_ISDIR(st.st_mode);
		if (ret >= 0 && l.dir[i])
			ret = fs_job_fetch_dir(fs, be, sub, depth + 1, files, bytes);
		else if (ret >= 0 && S_ISREG(st.st_mode)) {
			ret = fs_fetch_file(fs, be, sub, 0, bytes);
			++*files;
		}
		if (ret < 0 && !l.err)
			log_err("input: %s: %s", sub ? sub : path, strerror(-ret));
		free(sub);
		free(l.name[i]);
	}
	free(l.name);
	free(l.dir);
	return ret < 0 ? ret : l.err;
}

int fs_job_fetch_view(struct fs *fs, size_t view)
{
	const struct view *v = &fs->views[view];
	uint64_t files = 0, bytes = 0;
	int ret;

	if (!fs->cache || !(v->be->ops->caps & BE_CAP_REMOTE))
		return 0;	/* local data is read in place, as fast as a copy would be */
	ret = fs_job_fetch_dir(fs, v->be, v->root, 0, &files, &bytes);
	if (ret == 0)
		log_info("input: %llu file(s), %.1f MiB fetched into the cache",
			 (unsigned long long)files, (double)bytes / 1048576.0);
	return ret;
}

int fs_job_check_views(struct fs *fs)
{
	for (size_t i = 0; i + 1 < fs->nviews; i++) {	/* the last one is output/ */
		const struct view *v = &fs->views[i];
		struct stat st;
		int ret = fs_getattr_node(fs, &fs->vnodes[FSJ_COUNT + i], NULL, &st);

		if (ret < 0) {
			log_err("%s %s (%s): cannot be read: %s",
				v->src ? config_source_word(v->src->kind) : "source",
				v->src ? v->src->name : v->name, v->src ? v->src->source : v->root,
				strerror(-ret));
			return ret;
		}
	}
	return 0;
}

int fs_create_job(struct fs **out, struct mlfs_config *cfg, const struct fs_job_layout *l)
{
	size_t nviews = l->n_inputs + l->n_checkpoints + (l->model >= 0) + l->n_sources + 1;
	bool replaced[FSJ_COUNT] = {
		[FSJ_INPUT] = l->n_inputs == 1,
		[FSJ_CHECKPOINT] = l->n_checkpoints == 1,
		[FSJ_MODELS] = l->model >= 0,
		[FSJ_SOURCES] = l->n_sources == 0,	/* none: no folder at all */
	};
	struct fs_job_builder b = { 0 };
	int ret = fs_alloc(&b.fs, cfg, FSJ_COUNT + nviews, nviews);

	if (ret == 0) {
		b.fs->private_vnodes = true;
		b.fs->vnode_uid = l->uid;
		b.fs->vnode_gid = l->gid;
		ret = fs_job_vnodes(b.fs, replaced);
	}
	if (ret == 0)
		ret = fs_job_show_all(&b, l->inputs, l->n_inputs, FSJ_INPUT);
	if (ret == 0)
		ret = fs_job_show_all(&b, l->checkpoints, l->n_checkpoints, FSJ_CHECKPOINT);
	if (ret == 0 && l->model >= 0)
		ret = fs_job_show(&b, (size_t)l->model, FSJ_MODELS, true, true);
	for (size_t i = 0; ret == 0 && i < l->n_sources; i++)
		ret = fs_job_show(&b, l->sources[i], FSJ_SOURCES, false, true);
	if (ret == 0) {
		/* output/ sits beside the others in the root, named "output". */
		struct view *v = &b.fs->views[b.view];
		const struct source_config *s = &cfg->sources[l->output];

		ret = fs_source_view(b.fs, v, s, "output", false);
		if (ret == 0) {
			b.view++;
			ret = fs_view_top(&b.fs->vnodes[FSJ_COUNT + b.view - 1], v,
					  b.fs->root);
		}
	}
	if (ret == 0 && l->mount_info && !(b.fs->mount_info = strdup(l->mount_info)))
		ret = -ENOMEM;
	if (ret < 0) {
		if (b.fs)
			b.fs->cfg = NULL;	/* the caller still owns it */
		fs_destroy(b.fs);
		return ret;
	}
	*out = b.fs;
	return 0;
}
