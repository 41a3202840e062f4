/*
 * fs_stats.c - the content of .mlfs/stats.
 *
 * One "name value" pair per line, in the manner of /proc/meminfo, so both
 * a person (cat) and a script (awk) read it: the mount's uptime and open
 * files, the shared disk cache as "cache.COUNTER N", then each datastore's
 * counters as "datastore.NAME.COUNTER N" (a URL source's own datastore is
 * named "dataset:NAME", "checkpoint:NAME" or "model:NAME").
 * Made fresh at each open; the counters are atomics bumped by backend.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fs.h"

static void fs_stats_backend(FILE *out, struct backend *be)
{
	const struct backend_stats *s = &be->stats;
	const struct {
		const char *name;
		const atomic_uint_fast64_t *value;
	} counters[] = {
		{ "bytes_read", &s->bytes_read },
		{ "bytes_written", &s->bytes_written },
		{ "reads", &s->reads },
		{ "writes", &s->writes },
		{ "opens", &s->opens },
		{ "passthrough_opens", &s->passthrough_opens },
		{ "meta_ops", &s->meta_ops },
		{ "requests", &s->requests },
		{ "errors", &s->errors },
	};

	const struct {
		const char *name;
		const atomic_uint_fast64_t *value;
	} cached[] = {
		{ "cache_hits", &s->cache.hits },
		{ "cache_misses", &s->cache.misses },
		{ "cache_bytes_hit", &s->cache.bytes_hit },
		{ "cache_bytes_fetched", &s->cache.bytes_fetched },
		{ "prefetched", &s->prefetched },
		{ "listings_remembered", &s->listings_remembered },
	};

	fprintf(out, "datastore.%s.type %s\n", be->name, be->ops->scheme);
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++)
		fprintf(out, "datastore.%s.%s %llu\n", be->name, counters[i].name,
			(unsigned long long)atomic_load(counters[i].value));
	for (size_t i = 0; (be->ops->caps & BE_CAP_REMOTE) && i < sizeof(cached) / sizeof(cached[0]);
	     i++)
		fprintf(out, "datastore.%s.%s %llu\n", be->name, cached[i].name,
			(unsigned long long)atomic_load(cached[i].value));
}

/* The whole disk cache: what this process knows of it. */
static void fs_stats_cache(FILE *out, struct cache *c)
{
	struct cache_info info;

	if (!c)
		return;
	cache_get_info(c, &info);
	fprintf(out, "cache.max_bytes %llu\n", (unsigned long long)info.max_bytes);
	fprintf(out, "cache.used_bytes %llu\n", (unsigned long long)info.used_bytes);
	fprintf(out, "cache.evictions %llu\n", (unsigned long long)info.evictions);
	fprintf(out, "cache.evicted_bytes %llu\n", (unsigned long long)info.evicted_bytes);
	fprintf(out, "cache.bypassed %llu\n", (unsigned long long)info.bypassed);
	fprintf(out, "cache.memory_bytes %llu\n", (unsigned long long)info.memory_bytes);
	fprintf(out, "cache.write_behind_bytes %llu\n",
		(unsigned long long)info.write_behind_bytes);
}

int fs_stats_content(struct fs *fs, char **buf, size_t *len)
{
	FILE *out = open_memstream(buf, len);

	if (!out)
		return -ENOMEM;
	fprintf(out, "mount.uptime_seconds %lld\n", (long long)(time(NULL) - fs->started));
	fprintf(out, "mount.open_files %llu\n",
		(unsigned long long)atomic_load(&fs->open_files));
	fprintf(out, "mount.dir_entries_held %llu\nmount.dir_entries_held_peak %llu\n",
		(unsigned long long)atomic_load(&fs->dir_entries),
		(unsigned long long)atomic_load(&fs->dir_entries_peak));
	fprintf(out, "mount.passthrough %d\n", atomic_load(&fs->passthrough) ? 1 : 0);
	fprintf(out, "mount.prefetch_pending %zu\n", fs_prefetch_pending(fs));
	fprintf(out, "mount.datastores %zu\n", fs->nbackends);
	fprintf(out, "mount.views %zu\n", fs->nviews);
	fs_stats_cache(out, fs->cache);
	for (size_t i = 0; i < fs->nbackends; i++)
		fs_stats_backend(out, fs->backends[i]);
	return fclose(out) == 0 ? 0 : -ENOMEM;
}
