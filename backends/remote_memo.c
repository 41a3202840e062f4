/*
 * remote_memo.c - what a read-only remote backend learned of its paths
 * (remote_memo.h): one allocation per path, its path and ETag after the
 * fields ("PATH\0ETAG\0"), in a path_map.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mono.h"
#include "remote.h"
#include "remote_memo.h"

struct remote_memo_node {
	struct path_map_entry link;
	time_t fresh_until;	/* CLOCK_MONOTONIC seconds */
	int64_t size;
	int64_t mtime;
	bool is_dir, from_head;
	char names[];		/* "PATH\0ETAG\0" */
};

static time_t remote_memo_now(void)
{
	return (time_t)(mono_ns() / 1000000000);
}

void remote_memo_init(struct remote_memo *m, time_t ttl)
{
	m->ttl = ttl;
	pthread_mutex_init(&m->lock, NULL);
	path_map_init(&m->map, offsetof(struct remote_memo_node, names));
}

void remote_memo_destroy(struct remote_memo *m)
{
	path_map_clear(&m->map);
	pthread_mutex_destroy(&m->lock);
}

int remote_memo_get(struct remote_memo *m, const char *path, struct remote_meta *meta, bool trust)
{
	const struct remote_memo_node *n;
	int ret = -ENOENT;

	pthread_mutex_lock(&m->lock);
	n = (const struct remote_memo_node *)path_map_get(&m->map, path);
	if (n && (trust || n->fresh_until > remote_memo_now())) {
		*meta = (struct remote_meta){ .is_dir = n->is_dir, .from_head = n->from_head,
					      .size = n->size, .mtime = (time_t)n->mtime };
		snprintf(meta->etag, sizeof(meta->etag), "%s", n->names + strlen(n->names) + 1);
		ret = 0;
	}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

void remote_memo_put(struct remote_memo *m, const char *path, const struct remote_meta *meta)
{
	size_t plen = strlen(path) + 1, elen = strnlen(meta->etag, sizeof(meta->etag) - 1) + 1;
	struct remote_memo_node *n = malloc(sizeof(*n) + plen + elen), *old;

	if (!n)
		return;
	/* the fields first: names[] may begin inside the struct's tail padding */
	*n = (struct remote_memo_node){ .fresh_until = remote_memo_now() + m->ttl,
					.size = meta->size, .mtime = meta->mtime,
					.is_dir = meta->is_dir, .from_head = meta->from_head };
	memcpy(n->names, path, plen);
	memcpy(n->names + plen, meta->etag, elen - 1);
	n->names[plen + elen - 1] = '\0';
	pthread_mutex_lock(&m->lock);
	old = (struct remote_memo_node *)path_map_take(&m->map, path);
	if (!old && m->map.n >= REMOTE_MEMO_MAX)
		path_map_clear(&m->map);
	if (!path_map_add(&m->map, &n->link))
		free(n);
	pthread_mutex_unlock(&m->lock);
	free(old);
}

void remote_memo_forget(struct remote_memo *m, const char *path)
{
	char *p = strdup(path), *slash;

	if (!p)
		return;
	pthread_mutex_lock(&m->lock);
	for (;;) {
		free(path_map_take(&m->map, p));
		slash = strrchr(p, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	free(path_map_take(&m->map, ""));
	pthread_mutex_unlock(&m->lock);
	free(p);
}

void remote_meta_stat(const struct remote_meta *meta, const char *path, time_t created,
		      struct stat *st)
{
	remote_stat(st, path, meta->is_dir ? S_IFDIR | 0555 : S_IFREG | 0444, meta->size,
		    meta->mtime >= 0 ? meta->mtime : created);
}

int remote_memo_stat(struct remote_memo *m, const char *path, time_t created, struct stat *st)
{
	struct remote_meta meta;

	if (remote_memo_get(m, path, &meta, true) < 0)
		return -EAGAIN;
	remote_meta_stat(&meta, path, created, st);
	return 0;
}

int remote_file_init(struct remote_file *f, struct backend *be, const char *path, char *url,
		     const struct remote_meta *meta)
{
	*f = (struct remote_file){ .base.be = be, .url = url, .path = strdup(path), .m = *meta };
	if (!f->path || !url) {
		free(f->path);
		free(url);
		return -ENOMEM;
	}
	return 0;
}

void remote_file_fini(struct remote_file *f)
{
	free(f->url);
	free(f->path);
}

int remote_file_new(struct backend_file **out, struct backend *be, const char *path, char *url,
		    const struct remote_meta *meta)
{
	struct remote_file *f = calloc(1, sizeof(*f));
	int ret = f ? remote_file_init(f, be, path, url, meta) : -ENOMEM;

	if (ret < 0) {
		if (!f)
			free(url);
		free(f);
		return ret;
	}
	*out = &f->base;
	return 0;
}

void remote_file_release(struct backend_file *bf)
{
	struct remote_file *f = (struct remote_file *)bf;

	remote_file_fini(f);
	free(f);
}
