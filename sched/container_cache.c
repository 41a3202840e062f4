/*
 * container_cache.c - the images mlfs pulled, kept within [containers]
 * cache_size.
 *
 * Every pull of an image (or a find that it is there) marks its use:
 * STATE_DIR/containers/used/HASH, holding the image's name and its size as
 * measured after its pull, its mtime the last use.  After a pull,
 * container_cache_trim() sums those sizes; only when they are over the
 * budget does it ask podman for the images' sizes and the containers that
 * use them (`podman images` takes a quarter second), and, while the sum is
 * over the budget,
 * removes the least recently used one that no container uses: `podman rmi`
 * without --force, which refuses an image a container (running or not)
 * still has, and is never asked to remove the image just pulled.  Images
 * mlfs never pulled (an admin's own) are neither counted nor removed.
 * One trim at a time on the node (a lock beside the marks).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "container.h"
#include "spawn.h"

#define CONTAINER_CACHE_TIMEOUT_MS	(120 * 1000)
#define CONTAINER_CACHE_MAX		4096	/* marks read at most */

struct container_cached {
	char name[IMAGE_REF_MAX * 2 + 2];
	char mark[4096 + 1 + 256];	/* DIR/NAME: a folder path and a file name at their longest */
	long long used;			/* mtime of the mark, ns */
	unsigned long long size;	/* podman's Size; 0: not on the node */
	long containers;		/* podman's Containers */
};

void container_name_hash(const char *s, char out[17])
{
	unsigned long long h = 1469598103934665603ULL;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	snprintf(out, 17, "%016llx", h);
}

static int container_used_dir(const struct mlfs_config *cfg, char *dir, size_t len)
{
	snprintf(dir, len, "%s/containers", cfg->state_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	snprintf(dir, len, "%s/containers/used", cfg->state_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* The size a mark records (its second line), 0 when none. */
static unsigned long long container_mark_size(const char *path)
{
	char buf[IMAGE_REF_MAX * 2 + 64];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t got = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	const char *nl;

	if (fd >= 0)
		close(fd);
	if (got <= 0)
		return 0;
	buf[got] = '\0';
	nl = strchr(buf, '\n');
	return nl ? strtoull(nl + 1, NULL, 10) : 0;
}

/* Writes the mark of @image: its name, then @size (0: the size it recorded before). */
static int container_cache_mark(const struct mlfs_config *cfg, const char *image,
				unsigned long long size)
{
	char dir[4096], path[4200], hash[17], text[IMAGE_REF_MAX * 2 + 64];
	int fd, len, ret = container_used_dir(cfg, dir, sizeof(dir));

	if (ret < 0)
		return ret;
	container_name_hash(image, hash);
	snprintf(path, sizeof(path), "%s/%s", dir, hash);
	if (!size)
		size = container_mark_size(path);
	len = snprintf(text, sizeof(text), "%s\n%llu\n", image, size);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (len < 0 || (size_t)len >= sizeof(text) || write(fd, text, (size_t)len) != len)
		ret = -EIO;
	close(fd);		/* the write moved its mtime: the last use */
	return ret;
}

int container_cache_touch(const struct mlfs_config *cfg, const char *image)
{
	return container_cache_mark(cfg, image, 0);
}

int container_cache_measure(const struct container_runtime *rt, const struct mlfs_config *cfg,
			    const char *image)
{
	char *argv[] = { (char *)rt->podman, "image", "inspect", "--format", "{{.Size}}",
			 (char *)image, NULL };
	struct spawn sp = { .argv = argv, .timeout_ms = CONTAINER_CACHE_TIMEOUT_MS, .out_max = 4096,
			    .out_fd = -1 };
	struct spawn_out res;
	unsigned long long size = 0;
	int ret = spawn_run(&sp, &res);

	if (ret == 0 && res.status >= 0 && WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0 &&
	    res.out)
		size = strtoull(res.out, NULL, 10);
	spawn_out_free(&res);
	return container_cache_mark(cfg, image, size);
}

/* Reads the marks into @out (at most @max); their count. */
static size_t container_read_marks(const char *dir, struct container_cached *out, size_t max)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	while (d && n < max && (e = readdir(d))) {
		struct container_cached *c = &out[n];
		struct stat st;
		ssize_t got;
		int fd;

		if (e->d_name[0] == '.')
			continue;
		snprintf(c->mark, sizeof(c->mark), "%s/%s", dir, e->d_name);
		fd = open(c->mark, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		got = fstat(fd, &st) == 0 ? read(fd, c->name, sizeof(c->name) - 1) : -1;
		close(fd);
		if (got <= 0)
			continue;
		c->name[got] = '\0';
		c->size = 0;
		if (strchr(c->name, '\n')) {	/* NAME, then the size measured at its pull */
			c->size = strtoull(strchr(c->name, '\n') + 1, NULL, 10);
			*strchr(c->name, '\n') = '\0';
		}
		c->used = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
		c->containers = 0;
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* Whether podman's name @name is the mark's image (podman adds docker.io/ and :latest). */
static bool container_same_image(const char *podman_name, const char *image)
{
	size_t len = strlen(image);
	const char *p = strstr(podman_name, image);

	if (!p || (p != podman_name && p[-1] != '/'))
		return false;
	return p[len] == '\0' || strcmp(p + len, ":latest") == 0;
}

/* Fills each mark's size and container count from `podman images --format json`. */
static int container_sizes(const struct container_runtime *rt, struct container_cached *c, size_t n)
{
	char *argv[] = { (char *)rt->podman, "images", "--format", "json", NULL };
	struct spawn sp = { .argv = argv, .timeout_ms = CONTAINER_CACHE_TIMEOUT_MS,
			    .out_max = 16 << 20, .out_fd = -1 };
	struct spawn_out res;
	json_t *list, *img, *names, *name;
	size_t i, k, m;
	int ret = spawn_run(&sp, &res);

	if (ret == 0 && (res.status < 0 || !WIFEXITED(res.status) || WEXITSTATUS(res.status) != 0))
		ret = -EIO;
	list = ret == 0 ? json_loads(res.out, 0, NULL) : NULL;
	spawn_out_free(&res);
	if (!json_is_array(list)) {
		json_decref(list);
		return ret ? ret : -EIO;
	}
	json_array_foreach(list, i, img) {
		names = json_object_get(img, "Names");
		json_array_foreach(names, k, name) {
			for (m = 0; m < n; m++) {
				if (!json_is_string(name) ||
				    !container_same_image(json_string_value(name), c[m].name))
					continue;
				c[m].size = (unsigned long long)json_integer_value(json_object_get(img, "Size"));
				c[m].containers = (long)json_integer_value(json_object_get(img, "Containers"));
			}
		}
	}
	json_decref(list);
	return 0;
}

static int container_older(const void *a, const void *b)
{
	const struct container_cached *x = a, *y = b;

	return x->used < y->used ? -1 : x->used > y->used;
}

static bool container_rmi(const struct container_runtime *rt, const char *image)
{
	char *argv[] = { (char *)rt->podman, "rmi", (char *)image, NULL };
	struct spawn sp = { .argv = argv, .timeout_ms = CONTAINER_CACHE_TIMEOUT_MS, .out_max = 4096,
			    .out_fd = -1 };
	struct spawn_out res;
	int ret = spawn_run(&sp, &res);
	bool ok = ret == 0 && res.status >= 0 && WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0;

	spawn_out_free(&res);
	return ok;
}

int container_cache_trim(const struct container_runtime *rt, const struct mlfs_config *cfg,
			 const char *keep, FILE *report)
{
	struct container_cached *c;
	unsigned long long total = 0, budget = cfg->containers.cache_size;
	char dir[4096], lock_path[4200];
	size_t n;
	int lock, ret = container_used_dir(cfg, dir, sizeof(dir));

	if (ret < 0 || budget == 0)
		return ret;
	snprintf(lock_path, sizeof(lock_path), "%s.lock", dir);
	lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0)
		return -errno;
	while (flock(lock, LOCK_EX) < 0 && errno == EINTR)
		;
	c = calloc(CONTAINER_CACHE_MAX, sizeof(*c));
	n = c ? container_read_marks(dir, c, CONTAINER_CACHE_MAX) : 0;
	for (size_t i = 0; i < n; i++)
		total += c[i].size;
	/* under the budget by the sizes measured at each pull: podman need not be asked */
	ret = !c ? -ENOMEM : total > budget ? container_sizes(rt, c, n) : 0;
	total = 0;
	for (size_t i = 0; ret == 0 && i < n; i++)
		total += c[i].size;
	if (ret == 0 && total > budget)
		qsort(c, n, sizeof(*c), container_older);
	for (size_t i = 0; ret == 0 && i < n && total > budget; i++) {
		if (!c[i].size) {
			unlink(c[i].mark);	/* not on the node any more */
			continue;
		}
		if (strcmp(c[i].name, keep) == 0 || c[i].containers > 0 || !container_rmi(rt, c[i].name))
			continue;	/* in use: never removed */
		total -= c[i].size;
		unlink(c[i].mark);
		if (report)
			fprintf(report, "mlfs: images over [containers] cache_size (%llu bytes): removed %s "
				"(%llu bytes), the least recently used\n", budget, c[i].name, c[i].size);
	}
	free(c);
	close(lock);
	return ret;
}
