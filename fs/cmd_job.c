/*
 * cmd_job.c - `mlfs job`: one worker's view of its job, and `mlfs sync`.
 *
 * mlfs job reads the config and the spec, turns every dataset,
 * checkpoint, model and inference input the spec names into a source of
 * the config (config_add_job_source: a configured name, an output an
 * earlier job registered in the store, a datastore path, a URL or a local
 * path), makes the output's staging folder (output.h) and mounts the view
 * (fs_job.c).  Everything that can be wrong is found before mounting and
 * named as "SPEC: field: message".  The mount holds the output's live.lock
 * until it ends; `mlfs umount` then uploads it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cmd.h"
#include "config.h"
#include "diag.h"
#include "fs.h"
#include "log.h"
#include "output.h"
#include "path.h"
#include "spec.h"
#include "mono.h"

static const char job_usage[] =
	"usage: mlfs job [-f] [-d] [-o OPTS] CONFIG SPEC MOUNTPOINT --worker N\n"
	"  mounts worker N's view of the job in SPEC (workers count from 1):\n"
	"  input/, checkpoint/, models/ and output/, which `mlfs umount` uploads\n"
	"  --owner UID:GID   (root) the worker's user, who owns what it writes\n"
	"  --output-id ID    the name of the output's staging folder (executors)\n"
	"  --sources FILE    writes there which version each source resolved to, as\n"
	"                    NAME=VERSION words (a git model's commit: executors)\n"
	"  -f       stay in the foreground\n"
	"  -d       print every FUSE request (implies -f)\n"
	"  -o OPTS  FUSE mount options (allow_other, ...), and nopassthrough\n";

struct job_opts {
	unsigned int worker;
	const char *output_id;	/* --output-id: the executor names the output folder */
	const char *sources;	/* --sources: where the sources' versions are written */
	bool owned;		/* --owner UID:GID given */
	uid_t uid;
	gid_t gid;
};

/* The value of "--NAME V" or "--NAME=V" at argv[*i], or NULL when it is not that option. */
static const char *job_opt(int argc, char **argv, int *i, const char *name)
{
	size_t len = strlen(name);

	if (strcmp(argv[*i], name) == 0 && *i + 1 < argc)
		return argv[++*i];
	if (strncmp(argv[*i], name, len) == 0 && argv[*i][len] == '=')
		return argv[*i] + len + 1;
	return NULL;
}

/* Takes --worker, --owner, --output-id and --sources out of @argv. 0, or 2 after a message. */
static int job_take_opts(int *argc, char **argv, struct job_opts *o)
{
	const char *worker = NULL, *owner = NULL, *v;
	int out = 0;

	for (int i = 0; i < *argc; i++) {
		if ((v = job_opt(*argc, argv, &i, "--worker")))
			worker = v;
		else if ((v = job_opt(*argc, argv, &i, "--owner")))
			owner = v;
		else if ((v = job_opt(*argc, argv, &i, "--output-id")))
			o->output_id = v;
		else if ((v = job_opt(*argc, argv, &i, "--sources")))
			o->sources = v;
		else
			argv[out++] = argv[i];
	}
	*argc = out;
	if (!worker) {
		fprintf(stderr, "mlfs job: --worker N is needed\n%s", job_usage);
		return 2;
	}
	char *end;
	unsigned long n = strtoul(worker, &end, 10);

	if (*worker < '1' || *worker > '9' || *end || n > 100000) {
		fprintf(stderr, "mlfs job: --worker: '%s' is not a worker number (1, 2, ...)\n",
			worker);
		return 2;
	}
	o->worker = (unsigned int)n;
	if (owner) {
		unsigned long uid, gid;

		if (sscanf(owner, "%lu:%lu", &uid, &gid) != 2) {
			fprintf(stderr, "mlfs job: --owner: '%s' is not UID:GID\n", owner);
			return 2;
		}
		if (geteuid() != 0 && (uid != getuid() || gid != getgid())) {
			fprintf(stderr, "mlfs job: --owner: only root gives the output to another user\n");
			return 2;
		}
		o->owned = true;
		o->uid = (uid_t)uid;
		o->gid = (gid_t)gid;
	}
	if (o->output_id && (!spec_name_valid(o->output_id) || strlen(o->output_id) > 150)) {
		fprintf(stderr, "mlfs job: --output-id: '%s' is not a folder name of letters, "
			"digits, '.', '_', '~' and '-'\n", o->output_id);
		return 2;
	}
	return 0;
}

struct job_ctx {
	struct mlfs_config *cfg;
	const char *spec_file;
	struct diag d;
	size_t *inputs, n_inputs;
	size_t *checkpoints, n_checkpoints;
	long model;
	size_t *sources, n_sources;	/* the worker's mapped sources (Kibernetika's) */
	unsigned int worker;		/* from 1 */
	size_t output;
	struct backend *store;	/* the store's backend, made when first needed */
};

/* Adds a source for the job: @value as config_add_job_source takes it. */
static long job_add(struct job_ctx *c, enum source_kind kind, const char *name,
		    const char *value, const char *field)
{
	int ret;

	if (value[0] == '/') {
		struct stat st;

		if (stat(value, &st) < 0) {
			diag_add(&c->d, c->spec_file, 0, "%s: %s: %s", field, value,
				 strerror(errno));
			return -1;
		}
	}
	ret = config_add_job_source(c->cfg, kind, name, value, c->spec_file, field, &c->d);
	if (ret == -ENOMEM)
		diag_add(&c->d, c->spec_file, 0, "%s: %s", field, strerror(ENOMEM));
	return ret < 0 ? -1 : ret;
}

/* Whether folder @path exists in the store: 0, -ENOENT, or why it cannot be told. */
static int job_registered(struct job_ctx *c, const char *path)
{
	const struct datastore_config *ds = config_find_datastore(c->cfg, c->cfg->store);
	struct stat st;
	int ret;

	if (!c->store) {
		ret = backend_create(&c->store, ds, 0);
		if (ret < 0)
			return ret;
	}
	ret = backend_getattr(c->store, path, &st);
	return ret == 0 && !S_ISDIR(st.st_mode) ? -ENOENT : ret;
}

/* A dataset, checkpoint or model by name: configured, else registered in the store. */
static long job_named(struct job_ctx *c, enum source_kind kind, const char *name,
		      const char *field)
{
	long src = config_find_source(c->cfg, kind, name);
	char *value, *own;
	int ret;

	if (src >= 0)
		return src;
	if (!c->cfg->store) {
		diag_add(&c->d, c->spec_file, 0, "%s: no %s named \"%s\" in %s", field,
			 config_source_word(kind), name, c->cfg->file);
		return -1;
	}
	if (asprintf(&value, "%ss/%s", config_source_word(kind), name) < 0)
		return -1;
	ret = job_registered(c, value);
	free(value);
	if (ret < 0) {
		diag_add(&c->d, c->spec_file, 0, ret == -ENOENT
			 ? "%s: no %s named \"%s\" in %s, nor one registered in store %s"
			 : "%s: %s \"%s\": not in %s, and store %s cannot be read: %s",
			 field, config_source_word(kind), name, c->cfg->file, c->cfg->store,
			 strerror(-ret));
		return -1;
	}
	if (asprintf(&value, "%s:/%ss/%s", c->cfg->store, config_source_word(kind), name) < 0 ||
	    asprintf(&own, "%s (registered)", name) < 0)
		return -1;
	src = job_add(c, kind, own, value, field);
	free(value);
	free(own);
	return src;
}

static int job_push(size_t **list, size_t *n, long src)
{
	size_t *l = reallocarray(*list, *n + 1, sizeof(**list));

	if (!l)
		return -ENOMEM;
	l[(*n)++] = (size_t)src;
	*list = l;
	return 0;
}

/* The source an input or model location names. */
static long job_location(struct job_ctx *c, enum source_kind kind,
			 const struct spec_location *loc, const char *name, const char *field)
{
	const char *t = loc->type;
	char *git = NULL;
	long src;

	if (strcmp(t, "model") == 0 || strcmp(t, "dataset") == 0 || strcmp(t, "checkpoint") == 0)
		return job_named(c, kind, loc->path, field);
	/* a git repository whatever its URL looks like: "git+" says so (git+https://...) */
	if (strcmp(t, "git") == 0 && strncasecmp(loc->path, "git", 3) != 0 &&
	    asprintf(&git, "git+%s", loc->path) < 0)
		return -ENOMEM;
	/* datastore (NAME:/path), local (/path), s3, wasabi, web, azure, http, git (URLs) */
	src = job_add(c, kind, name, git ? git : loc->path, field);
	free(git);
	return src;
}

/*
 * The sources worker c->worker maps (spec_worker_mounts): a task's own
 * added to the config as [source] NAME, a [source] of the config used as it
 * is; each shown in sources/NAME at the mapping's sub path.
 */
static int job_sources(struct job_ctx *c, const struct spec *s)
{
	struct spec_mount *m;
	size_t n = 0, bad = 0;
	char field[128];
	int ret = spec_worker_mounts(s, c->worker - 1, c->cfg, &m, &n, &bad);

	if (ret == -ENOENT)
		diag_add(&c->d, c->spec_file, 0, "volumes[%zu]: no source named \"%s\"", bad,
			 s->workers[c->worker - 1].volumes[bad].name);
	for (size_t i = 0; ret == 0 && i < n; i++) {
		long src = m[i].cfg_src;
		char *sub;

		snprintf(field, sizeof(field), "sources.%s", m[i].name);
		if (m[i].task)
			src = job_add(c, SOURCE_SOURCE, m[i].name, m[i].task->source, field);
		if (src < 0)
			continue;	/* job_add said why */
		sub = m[i].sub_path[0] ? strdup(m[i].sub_path) : NULL;
		if (m[i].sub_path[0] && !sub)
			ret = -ENOMEM;
		free(c->cfg->sources[src].sub_path);
		c->cfg->sources[src].sub_path = sub;
		if (ret == 0)
			ret = job_push(&c->sources, &c->n_sources, src);
	}
	free(m);
	return ret == -ENOENT ? 0 : ret;
}

static int job_resolve(struct job_ctx *c, const struct spec *s, const char *output_files)
{
	const struct spec_data *data = &s->data;
	char field[64];
	long src;

	c->model = -1;
	for (size_t i = 0; i < data->n_datasets; i++) {
		snprintf(field, sizeof(field), "data.datasets[%zu]", i);
		src = job_named(c, SOURCE_DATASET, data->datasets[i], field);
		if (src >= 0 && job_push(&c->inputs, &c->n_inputs, src) < 0)
			return -ENOMEM;
	}
	if (data->input.type) {
		src = job_location(c, SOURCE_DATASET, &data->input, "input", "data.input.path");
		if (src >= 0 && job_push(&c->inputs, &c->n_inputs, src) < 0)
			return -ENOMEM;
	}
	for (size_t i = 0; i < data->n_checkpoints; i++) {
		snprintf(field, sizeof(field), "checkpoints[%zu]", i);
		src = job_named(c, SOURCE_CHECKPOINT, data->checkpoints[i], field);
		if (src >= 0 && job_push(&c->checkpoints, &c->n_checkpoints, src) < 0)
			return -ENOMEM;
	}
	if (data->model.type)
		c->model = job_location(c, SOURCE_MODEL, &data->model, "model", "model.path");
	if (job_sources(c, s) < 0)
		return -ENOMEM;
	src = job_add(c, SOURCE_DATASET, "job output", output_files, "data.output");
	c->output = src >= 0 ? (size_t)src : 0;
	if (c->d.n)
		return -EINVAL;
	/* A source is checked the way the config's own are (types, keys, archives). */
	return backend_check_config(c->cfg, &c->d) < 0 ? -EINVAL : 0;
}

/* .mlfs/mount: what `mlfs umount` reads to find and upload the output. */
static char *job_mount_info(const struct mlfs_config *cfg, const struct output *o,
			    const char *spec_file)
{
	char *info, *spec = realpath(spec_file, NULL);

	if (asprintf(&info, "kind=job\nconfig=%s\nstate_dir=%s\nspec=%s\njob=%s\nworker=%u\n"
		     "output=%s\noutput_dir=%s\ndestination=%s:%s\n", o->config, cfg->state_dir,
		     spec ? spec : spec_file, o->job, o->worker, o->id, o->dir, o->type,
		     o->path) < 0)
		info = NULL;
	free(spec);
	return info;
}

/*
 * An ordinary user (a worker a cluster runs as its owner), or root of a
 * user namespace that is such a user (rootless podman's, where a cluster's
 * script mounts the view of a worker with an image), may not write the
 * config's state_dir or cache_dir: its output is then staged under its
 * own ~/.local/state/mlfs (XDG_STATE_HOME) and its blocks cached under
 * ~/.cache/mlfs (XDG_CACHE_HOME), or in TMPDIR when it has no home.  Only
 * a folder that exists or can be made is taken; one that can be written
 * stays.
 */
static void job_user_dir(char **dir, const char *xdg, const char *home_sub, const char *tmp_name)
{
	const char *home = getenv("HOME"), *x = getenv(xdg), *tmp = getenv("TMPDIR");
	char *cand[3] = { NULL, NULL, NULL };

	if (access(*dir, W_OK | X_OK) == 0 || (access(*dir, F_OK) < 0 && path_mkdirs(*dir, 0755) == 0))
		return;
	if (x && *x == '/' && asprintf(&cand[0], "%s/mlfs", x) < 0)
		cand[0] = NULL;
	if (home && *home == '/' && asprintf(&cand[1], "%s/%s", home, home_sub) < 0)
		cand[1] = NULL;
	if (asprintf(&cand[2], "%s/%s-%u", tmp && *tmp == '/' ? tmp : "/tmp", tmp_name,
		     (unsigned int)getuid()) < 0)
		cand[2] = NULL;
	for (size_t i = 0; i < 3; i++) {
		if (cand[i] && path_mkdirs(cand[i], 0700) == 0 && access(cand[i], W_OK | X_OK) == 0) {
			fprintf(stderr, "mlfs job: %s is not writable by uid %u: using %s\n", *dir,
				(unsigned int)getuid(), cand[i]);
			free(*dir);
			*dir = cand[i];
			cand[i] = NULL;
			break;
		}
	}
	for (size_t i = 0; i < 3; i++)
		free(cand[i]);
}

/* Loads what the job runs with, and checks worker and mountpoint; 0 or -1 (said on stderr). */
static int job_load(struct mount_args *a, unsigned int worker, struct mlfs_config **cfg,
		    struct spec **s)
{
	if (cmd_load_config(cfg, a->config) < 0 || cmd_load_spec(s, a->spec, *cfg) < 0 ||
	    mount_check_mountpoint(a->mountpoint) < 0)
		return -1;
	job_user_dir(&(*cfg)->state_dir, "XDG_STATE_HOME", ".local/state/mlfs", "mlfs-state");
	job_user_dir(&(*cfg)->cache_dir, "XDG_CACHE_HOME", ".cache/mlfs", "mlfs-cache");
	if (mount_make_dirs(*cfg) < 0)
		return -1;
	if (worker > (*s)->n_workers) {
		fprintf(stderr, "mlfs job: %s: --worker %u: job %s has %zu worker(s)\n", a->spec,
			worker, (*s)->name, (*s)->n_workers);
		return -1;
	}
	a->realmount = realpath(a->mountpoint, NULL);
	if (!a->realmount) {
		fprintf(stderr, "mlfs job: mountpoint %s: %s\n", a->mountpoint, strerror(errno));
		return -1;
	}
	return 0;
}

/* The worker's output staging folder; 0 or -1 (said on stderr). */
static int job_output(struct output **o, const struct mlfs_config *cfg, const struct mount_args *a,
		      const struct spec *s, const struct job_opts *opts)
{
	int ret = output_create(o, cfg->state_dir, a->config, s, opts->worker, opts->output_id,
				opts->owned ? opts->uid : getuid(),
				opts->owned ? opts->gid : getgid());

	if (ret == -EEXIST)
		fprintf(stderr, "mlfs job: --output-id %s: that output exists already\n",
			opts->output_id);
	else if (ret < 0)
		fprintf(stderr, "mlfs job: %s/outputs: cannot make the staging folder: %s\n",
			cfg->state_dir, strerror(-ret));
	return ret < 0 ? -1 : 0;
}

/*
 * The worker's view of @s over output files folder @files: its sources
 * resolved in @c, the tree made (owning @cfg on success), an inference
 * input folder fetched whole.  0 or -1 (said on stderr); *@fs NULL on failure.
 */
static int job_view(struct fs **fs, struct job_ctx *c, struct mlfs_config *cfg,
		    const struct spec *s, const struct mount_args *a, const struct job_opts *opts,
		    char *files, char *info)
{
	const struct spec_location *in = &s->data.input;
	int ret = files && info ? job_resolve(c, s, files) : -ENOMEM;

	if (ret < 0) {
		diag_print(&c->d, stderr);
		if (ret == -ENOMEM)
			fprintf(stderr, "mlfs job: %s\n", strerror(ENOMEM));
		return -1;
	}
	struct fs_job_layout l = { .inputs = c->inputs, .n_inputs = c->n_inputs,
		.checkpoints = c->checkpoints, .n_checkpoints = c->n_checkpoints,
		.model = c->model, .sources = c->sources, .n_sources = c->n_sources,
		.output = c->output, .mount_info = info,
		.uid = opts->owned ? opts->uid : getuid(),
		.gid = opts->owned ? opts->gid : getgid() };

	ret = fs_create_job(fs, cfg, &l);
	if (ret < 0) {
		fprintf(stderr, "mlfs job: %s: cannot set up the view: %s\n", a->spec,
			strerror(-ret));
		*fs = NULL;
		return -1;
	}
	/*
	 * A source whose server is down or refuses fails the staging, named
	 * (fs_job_check_views logs which), rather than reach the worker as EIO
	 * under /opt/ml: a script that skips what it cannot read would run on
	 * no data and succeed.
	 */
	ret = fs_job_check_views(*fs);
	/* An inference input folder ("…/") is synced whole before the worker starts. */
	if (ret == 0 && in->type && in->path[0] && in->path[strlen(in->path) - 1] == '/' &&
	    (ret = fs_job_fetch_view(*fs, c->n_inputs - 1)) < 0)
		fprintf(stderr, "mlfs job: %s: data.input: cannot fetch %s: %s\n", a->spec,
			in->path, strerror(-ret));
	if (ret < 0) {
		(*fs)->cfg = NULL;	/* still the caller's: it frees it */
		fs_destroy(*fs);
		*fs = NULL;
		return -1;
	}
	return 0;
}

/*
 * --sources FILE: "NAME=VERSION" for each source of the view whose backend
 * pinned a version (backend_describe: a git commit), space-separated on
 * one line, NAME the source's as the view shows it ("model:model"); written
 * to FILE.tmp, then renamed.  Nothing to say is an empty line.  0 or -1
 * (said on stderr).
 */
static int job_write_sources(const struct fs *fs, const char *file)
{
	const struct mlfs_config *cfg = fs->cfg;
	char *tmp = NULL, version[128];
	FILE *f;
	int fd, ret = 0;

	if (asprintf(&tmp, "%s.tmp", file) < 0)
		return -1;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	for (size_t i = 0; f && i < cfg->n_sources; i++) {
		const struct source_config *src = &cfg->sources[i];

		for (size_t b = 0; src->datastore && b < fs->nbackends; b++)
			if (strcmp(cfg->datastores[b].name, src->datastore) == 0 &&
			    backend_describe(fs->backends[b], version, sizeof(version)) == 0)
				fprintf(f, "%s%s:%s=%s", ret++ ? " " : "",
					config_source_word(src->kind), src->shown, version);
	}
	if (f)
		fputc('\n', f);
	if (!f || fclose(f) != 0 || rename(tmp, file) < 0) {
		fprintf(stderr, "mlfs job: --sources %s: %s\n", file, strerror(errno));
		if (fd >= 0 && !f)
			close(fd);
		unlink(tmp);
		free(tmp);
		return -1;
	}
	free(tmp);
	return 0;
}

int cmd_job(int argc, char **argv)
{
	struct mount_args a = { .spec_wanted = true };
	struct job_opts opts = { 0 };
	struct job_ctx c = { 0 };
	struct mlfs_config *cfg = NULL;
	struct spec *s = NULL;
	struct output *o = NULL;
	struct fs *fs = NULL;
	char *files = NULL, *info = NULL;
	int status;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			printf("%s", job_usage);
			return 0;
		}
	status = job_take_opts(&argc, argv, &opts);
	if (status == 0)
		status = mount_parse_args(&a, argc, argv, job_usage);
	if (status) {
		status = status == 1 ? 0 : status;
		goto out;
	}
	log_init("mlfs", a.debug ? MLFS_LOG_DEBUG : MLFS_LOG_INFO);
	status = 1;
	diag_init(&c.d);
	if (job_load(&a, opts.worker, &cfg, &s) < 0 || job_output(&o, cfg, &a, s, &opts) < 0)
		goto out;
	files = output_files(o);
	info = job_mount_info(cfg, o, a.spec);
	c.cfg = cfg;
	c.worker = opts.worker;
	c.spec_file = a.spec;
	if (job_view(&fs, &c, cfg, s, &a, &opts, files, info) < 0)
		goto out_unstage;
	cfg = NULL;		/* fs owns it now */
	if (opts.sources && job_write_sources(fs, opts.sources) < 0)
		goto out_unstage;
	status = mount_serve(fs, &a);
	if (status != 0)
		goto out_unstage;
	goto out;
out_unstage:
	/* Nothing was mounted, so nothing was written: there is no output to keep. */
	if (o && !fs)
		output_discard(o);
out:
	diag_free(&c.d);
	free(c.inputs);
	free(c.checkpoints);
	free(c.sources);
	backend_destroy(c.store);
	output_free(o);
	fs_destroy(fs);
	config_free(cfg);
	spec_free(s);
	free(files);
	free(info);
	free(a.opts);
	free(a.realmount);
	return status;
}

/* ---- mlfs sync ---- */

/*
 * Progress on stderr: a line a second, rewritten in place on a terminal;
 * the rate is counted from the start of each phase (zipping, uploading).
 */
void cmd_progress(void *arg, const struct output *o, const char *phase, uint64_t done,
		  uint64_t total)
{
	static const struct output *cur;
	static char cur_phase[16];
	static int64_t t0;
	static uint64_t last_done = UINT64_MAX;
	bool tty = isatty(STDERR_FILENO);
	double pct = total ? 100.0 * (double)done / (double)total : 100.0, secs;
	char rate[48];
	const char *cr = tty ? "\r" : "", *nl = tty ? "\033[K" : "\n";
	int64_t now = mono_ns();

	if (arg && strcmp(phase, "done") == 0)
		++*(unsigned int *)arg;		/* mlfs sync counts what it delivered */
	if (o != cur || strcmp(phase, cur_phase) != 0) {
		if (tty && cur)
			fputc('\n', stderr);
		cur = o;
		snprintf(cur_phase, sizeof(cur_phase), "%s", phase);
		t0 = now;
	} else if (done == last_done) {
		return;		/* the same line again says nothing new */
	}
	last_done = done;
	secs = (double)(now - t0) / 1e9;
	rate[0] = '\0';
	if (secs >= 0.5)
		snprintf(rate, sizeof(rate), ", %.1f MiB/s", (double)done / 1048576.0 / secs);
	fprintf(stderr, "%smlfs: job %s worker %u: ", cr, o->job, o->worker);
	if (strcmp(phase, "done") == 0)
		fprintf(stderr, "uploaded to %s %s: %.1f MiB\n", o->type, o->path,
			(double)total / 1048576.0);
	else if (strcmp(phase, "zipping") == 0)
		fprintf(stderr, "zipping: %.1f of %.1f MiB (%.0f%%)%s%s", (double)done / 1048576.0,
			(double)total / 1048576.0, pct, rate, nl);
	else
		fprintf(stderr, "%s to %s %s: %.1f of %.1f MiB (%.0f%%)%s%s", phase, o->type,
			o->path, (double)done / 1048576.0, (double)total / 1048576.0, pct, rate, nl);
	if (strcmp(phase, "done") == 0) {
		cur = NULL;
		last_done = UINT64_MAX;
	}
}

static const char sync_usage[] =
	"usage: mlfs sync CONFIG\n"
	"  uploads every output staged under CONFIG's state_dir that is not uploaded yet\n"
	"  (a failed or interrupted upload, a view unmounted without mlfs umount);\n"
	"  exit status 0 only when every one is safe at its destination\n";

int cmd_sync(int argc, char **argv)
{
	struct mlfs_config *cfg = NULL;
	unsigned int live = 0, delivered = 0;
	int failed;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		printf("%s", sync_usage);
		return 0;
	}
	if (argc != 2 || argv[1][0] == '-') {
		fputs(sync_usage, stderr);
		return 2;
	}
	log_init("mlfs", MLFS_LOG_INFO);
	if (cmd_load_config(&cfg, argv[1]) < 0)
		return 1;
	failed = output_sync_all(cfg, cmd_progress, &delivered, &live);
	if (live)
		fprintf(stderr, "mlfs sync: %u output(s) still mounted by a worker's view; "
			"`mlfs umount` uploads them\n", live);
	if (failed)
		fprintf(stderr, "mlfs sync: %d output(s) not uploaded; their staged files are "
			"kept in %s/outputs\n", failed, cfg->state_dir);
	else if (!live && !delivered)
		fprintf(stderr, "mlfs sync: nothing to upload: no output is staged in %s/outputs\n",
			cfg->state_dir);
	config_free(cfg);
	return failed ? 1 : 0;
}
