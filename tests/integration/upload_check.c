/*
 * upload_check.c - drives one backend_upload of a local file, as the
 * output uploader would, for s3_upload_test.sh.
 *
 *   upload_check [-d] [-x N] [-f N] CONFIG DATASTORE FILE PATH TOKEN
 *
 * Creates the backend of DATASTORE (from CONFIG) and uploads FILE as PATH
 * (a path inside the datastore).  The token is kept in the file TOKEN as
 * the uploader keeps it (written to TOKEN.tmp, fsync'd, renamed): read
 * back as the resume token when TOKEN exists, replaced at each save.
 * Prints one line per save, "save N done=BYTES parts=P" (P: the part lines
 * of the token, or "done"), then "upload: 0" or "upload: -ERRNO (text)".
 * -x N: _exit(9) right after the Nth save is kept, as a crash would;
 * -f N: the Nth save fails with EIO (and TOKEN keeps the one before);
 * -d: debug logging.  Exits 0 when the upload succeeded, else 1 (2 on
 * bad usage or setup).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "config.h"
#include "diag.h"
#include "log.h"

struct check_saver {
	const char *token_file;
	unsigned int saves;
	unsigned int exit_after;	/* 0: never */
	unsigned int fail_at;		/* 0: never */
};

/* Writes all of @len bytes of @buf to @fd. 0 or -errno. */
static int check_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* @text into @file, durably: FILE.tmp, fsync, rename, fsync of the folder. */
static int check_keep(const char *file, const char *text)
{
	char *tmp, *copy;
	int fd, ret;

	if (asprintf(&tmp, "%s.tmp", file) < 0)
		return -ENOMEM;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ret = fd < 0 ? -errno : check_write_all(fd, text, strlen(text));
	if (ret == 0 && fsync(fd) < 0)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	if (ret == 0 && rename(tmp, file) < 0)
		ret = -errno;
	free(tmp);
	copy = strdup(file);
	if (ret == 0 && copy) {
		fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			fsync(fd);
			close(fd);
		}
	}
	free(copy);
	return ret;
}

static unsigned int check_parts(const char *token)
{
	unsigned int n = 0;

	for (const char *line = token; line && *line; line = strchr(line, '\n')) {
		line += *line == '\n';
		n += *line >= '1' && *line <= '9';
	}
	return n;
}

static int check_save(void *arg, const char *token, uint64_t done)
{
	struct check_saver *s = arg;
	int ret;

	s->saves++;
	if (s->saves == s->fail_at) {
		printf("save %u failed on purpose\n", s->saves);
		fflush(stdout);
		return -EIO;
	}
	ret = check_keep(s->token_file, token);
	if (ret < 0)
		return ret;
	if (strcmp(token, "done") == 0)
		printf("save %u done=%" PRIu64 " parts=done\n", s->saves, done);
	else
		printf("save %u done=%" PRIu64 " parts=%u\n", s->saves, done, check_parts(token));
	fflush(stdout);
	if (s->saves == s->exit_after)
		_exit(9);
	return 0;
}

/* The whole of @file, NUL-terminated and malloc'd, or NULL when it does not exist. */
static char *check_read(const char *file)
{
	FILE *f = fopen(file, "re");
	char *text = NULL;
	size_t size = 0;
	ssize_t n;

	if (!f)
		return NULL;
	n = getdelim(&text, &size, '\0', f);
	fclose(f);
	if (n < 0) {
		free(text);
		return strdup("");
	}
	return text;
}

static int check_usage(void)
{
	fprintf(stderr, "usage: upload_check [-d] [-x N] [-f N] CONFIG DATASTORE FILE PATH TOKEN\n");
	return 2;
}

/* The backend of datastore @name in @config, or NULL (with a message). */
static struct backend *check_backend(const char *config, const char *name,
				     struct mlfs_config **cfg)
{
	const struct datastore_config *ds;
	struct backend *be = NULL;
	struct diag d;
	int ret;

	diag_init(&d);
	ret = config_load(cfg, config, backend_config_forms(), &d);
	diag_print(&d, stderr);
	diag_free(&d);
	if (ret < 0)
		return NULL;
	ds = config_find_datastore(*cfg, name);
	if (!ds)
		fprintf(stderr, "upload_check: no datastore %s in %s\n", name, config);
	else if ((ret = backend_create(&be, ds, 1)) < 0)
		fprintf(stderr, "upload_check: datastore %s: %s\n", name, strerror(-ret));
	return be;
}

int main(int argc, char **argv)
{
	struct check_saver saver = { 0 };
	struct backend_upload u = { .save = check_save, .arg = &saver };
	struct mlfs_config *cfg = NULL;
	struct backend *be;
	struct stat st;
	char *resume;
	int opt, fd, ret;
	bool debug = false;

	while ((opt = getopt(argc, argv, "dx:f:")) != -1) {
		if (opt == 'd')
			debug = true;
		else if (opt == 'x')
			saver.exit_after = (unsigned int)strtoul(optarg, NULL, 10);
		else if (opt == 'f')
			saver.fail_at = (unsigned int)strtoul(optarg, NULL, 10);
		else
			return check_usage();
	}
	if (argc - optind != 5)
		return check_usage();
	log_init("upload_check", debug ? MLFS_LOG_DEBUG : MLFS_LOG_INFO);
	saver.token_file = argv[optind + 4];
	fd = open(argv[optind + 2], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(argv[optind + 2]);
		return 2;
	}
	be = check_backend(argv[optind], argv[optind + 1], &cfg);
	if (!be) {
		config_free(cfg);
		return 2;
	}
	resume = check_read(saver.token_file);
	u.resume = resume;
	printf("resume: %s\n", !resume ? "none" : strcmp(resume, "done") == 0 ? "done" : "token");
	ret = backend_upload(be, argv[optind + 3], fd, (uint64_t)st.st_size, &u);
	printf("upload: %d%s%s%s\n", ret, ret ? " (" : "", ret ? strerror(-ret) : "", ret ? ")" : "");
	free(resume);
	close(fd);
	backend_destroy(be);
	config_free(cfg);
	return ret == 0 ? 0 : 1;
}
