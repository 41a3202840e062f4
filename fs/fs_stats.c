/*
 * fs_stats.c - the content of .mlfs/stats.
 *
 * One "name value" pair per line, in the manner of /proc/meminfo, so both
 * a person (cat) and a script (awk) read it: the mount's uptime and open
 * files, then each datastore's counters as "datastore.NAME.COUNTER N".
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
		{ "errors", &s->errors },
	};

	fprintf(out, "datastore.%s.type %s\n", be->name, be->ops->scheme);
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++)
		fprintf(out, "datastore.%s.%s %llu\n", be->name, counters[i].name,
			(unsigned long long)atomic_load(counters[i].value));
}

int fs_stats_content(struct fs *fs, char **buf, size_t *len)
{
	FILE *out = open_memstream(buf, len);

	if (!out)
		return -ENOMEM;
	fprintf(out, "mount.uptime_seconds %lld\n", (long long)(time(NULL) - fs->started));
	fprintf(out, "mount.open_files %llu\n",
		(unsigned long long)atomic_load(&fs->open_files));
	fprintf(out, "mount.passthrough %d\n", atomic_load(&fs->passthrough) ? 1 : 0);
	fprintf(out, "mount.datastores %zu\n", fs->nbackends);
	fprintf(out, "mount.views %zu\n", fs->nviews);
	for (size_t i = 0; i < fs->nbackends; i++)
		fs_stats_backend(out, fs->backends[i]);
	return fclose(out) == 0 ? 0 : -ENOMEM;
}
