/*
 * be_archive_extract.c - where the archive backend's extracted members live
 * (be_archive.c says what is read in place and what is extracted): under
 * cache_dir/archives/<key>/, one file per member named by its ordinal.  A
 * filtered tar is extracted whole, at the first open of any member, into a
 * temporary folder that is synced and renamed into place; a compressed zip
 * member alone, into a temporary file renamed into place, through the
 * cursor reader that walks the archive in order.  So processes that share
 * the folder see a member whole or not at all.  be_archive_member_fd takes
 * ab->lock around the extraction it needs.
 */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "be_archive_int.h"
#include "dir_cache.h"
#include "log.h"
#include "path.h"

#define BE_ARCHIVE_TMP_STALE_S	(24 * 3600)	/* a temporary folder untouched this long is dead */

/* Sets ab->dir to cache_dir/archives/<sha256 of inner name, path, size, mtime>. */
int be_archive_set_dir(struct be_archive *ab)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	char *id;
	int len = asprintf(&id, "%s\n%s\n%llu\n%lld.%09ld", ab->inner->name, ab->path,
			   (unsigned long long)ab->arch_size, (long long)ab->arch_mtime.tv_sec,
			   ab->arch_mtime.tv_nsec);

	if (len < 0)
		return -ENOMEM;
	if (!EVP_Digest(id, (size_t)len, md, &md_len, EVP_sha256(), NULL)) {
		free(id);
		return -EIO;
	}
	free(id);
	for (unsigned int i = 0; i < md_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return asprintf(&ab->dir, "%s/archives/%s", ab->cache_dir, hex) < 0 ? -ENOMEM : 0;
}

static int be_archive_mkdir(const char *path)
{
	return mkdir(path, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

/* Makes cache_dir and cache_dir/archives when missing. */
static int be_archive_mkdirs(struct be_archive *ab)
{
	char *archives;
	int ret = be_archive_mkdir(ab->cache_dir);

	if (ret < 0)
		return ret;
	if (asprintf(&archives, "%s/archives", ab->cache_dir) < 0)
		return -ENOMEM;
	ret = be_archive_mkdir(archives);
	free(archives);
	return ret;
}

/* Removes the tree at @path (our own temp folders only; never follows a symlink). */
void be_archive_rm_tree(const char *path)
{
	path_remove_tree(path);
}

/* Writes the current member's data into @fd, @size bytes in all. */
static int be_archive_write_data(struct be_archive_reader *r, int fd, uint64_t size)
{
	const void *buf;
	size_t len;
	la_int64_t off;
	int ret;

	while ((ret = archive_read_data_block(r->a, &buf, &len, &off)) == ARCHIVE_OK) {
		for (size_t done = 0; done < len;) {
			ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
					   (off_t)off + (off_t)done);

			if (n < 0)
				return -errno;
			done += (size_t)n;
		}
	}
	if (ret != ARCHIVE_EOF) {
		be_archive_log(r->ab, "corrupt member data", r->a);
		return be_archive_reader_err(r, -EIO);
	}
	return ftruncate(fd, (off_t)size) < 0 ? -errno : 0;
}

/* Writes the current member into a new file @path. */
static int be_archive_write_file(struct be_archive_reader *r, const char *path, uint64_t size,
				 int sync)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int ret;

	if (fd < 0)
		return -errno;
	ret = be_archive_write_data(r, fd, size);
	if (ret == 0 && sync && fdatasync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* Extracts every member in ab->need into folder @tmp, named by ordinal. */
static int be_archive_extract_into(struct be_archive *ab, const char *tmp)
{
	struct be_archive_reader *r;
	struct archive_entry *ae;
	char path[PATH_MAX];
	size_t j = 0;
	int ret = be_archive_reader_open(&r, ab);

	if (ret < 0)
		return ret;
	while (j < ab->n_need && (ret = be_archive_reader_next(r, &ae)) == 1) {
		uint32_t ord = r->next_ord - 1;

		if (ord != ab->need[j].ord)
			continue;	/* libarchive skips its data */
		snprintf(path, sizeof(path), "%s/%u", tmp, ord);
		ret = be_archive_write_file(r, path, ab->need[j].size, 0);
		if (ret < 0)
			break;
		j++;
	}
	be_archive_reader_close(r);
	if (ret >= 0 && j < ab->n_need) {
		log_err("archive %s: members missing on a second reading", ab->base.name);
		ret = -EIO;
	}
	return ret < 0 ? ret : 0;
}

/*
 * Extracts a filtered tar once into ab->dir: into a temp folder beside it,
 * synced, then renamed into place; a folder already there (another process)
 * is used as is.  Caller holds ab->lock.
 */
static int be_archive_extract_tar(struct be_archive *ab)
{
	struct stat st;
	char *tmp;
	int ret, fd;

	if (ab->extracted || (stat(ab->dir, &st) == 0 && S_ISDIR(st.st_mode)))
		return ab->extracted = 1, 0;
	if ((ret = be_archive_mkdirs(ab)) < 0)
		return ret;
	if (asprintf(&tmp, "%s.tmp-XXXXXX", ab->dir) < 0)
		return -ENOMEM;
	if (!mkdtemp(tmp)) {
		ret = -errno;
		free(tmp);
		return ret;
	}
	log_info("archive %s: extracting %zu members into %s", ab->base.name, ab->n_need, ab->dir);
	ret = be_archive_extract_into(ab, tmp);
	fd = ret == 0 ? open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (fd >= 0) {
		syncfs(fd);	/* the renamed folder is whole even after a power loss */
		close(fd);
	}
	if (ret == 0 && rename(tmp, ab->dir) < 0 &&
	    !((errno == ENOTEMPTY || errno == EEXIST) && stat(ab->dir, &st) == 0))
		ret = -errno;
	be_archive_rm_tree(tmp);	/* gone when the rename took it */
	free(tmp);
	if (ret == 0)
		ab->extracted = 1;
	return ret;
}

/*
 * Decompresses zip member @e into ab->dir/<ord> (a temp file renamed into
 * place) with the cursor reader, reopened when @e lies behind it.  Caller
 * holds ab->lock.
 */
static int be_archive_extract_zip_member(struct be_archive *ab, const struct be_archive_entry *e,
					 const char *final)
{
	struct archive_entry *ae;
	char tmp[PATH_MAX];
	int ret;

	if ((ret = be_archive_mkdirs(ab)) < 0 || (ret = be_archive_mkdir(ab->dir)) < 0)
		return ret;
	if (ab->cursor && ab->cursor->next_ord > e->ord) {
		be_archive_reader_close(ab->cursor);
		ab->cursor = NULL;
	}
	if (!ab->cursor && (ret = be_archive_reader_open(&ab->cursor, ab)) < 0)
		return ret;
	while (ab->cursor->next_ord <= e->ord)
		if ((ret = be_archive_reader_next(ab->cursor, &ae)) <= 0)
			goto out_close;
	snprintf(tmp, sizeof(tmp), "%s/.%u.tmp-%d-%lx", ab->dir, e->ord, (int)getpid(),
		 (unsigned long)pthread_self());
	ret = be_archive_write_file(ab->cursor, tmp, e->size, 1);
	if (ret == 0 && rename(tmp, final) < 0)
		ret = -errno;
	if (ret < 0)
		unlink(tmp);
	if (ret == 0)
		return 0;
out_close:
	be_archive_reader_close(ab->cursor);	/* its position is unknown now */
	ab->cursor = NULL;
	return ret < 0 ? ret : -EIO;
}

/*
 * Holds ab->dir as read (dir_cache_hold) from now until destroy, so no
 * evictor removes it under us; before it is looked at.  Caller holds ab->lock.
 */
static int be_archive_hold(struct be_archive *ab)
{
	int ret;

	if (ab->held >= 0)
		return 0;
	if ((ret = be_archive_mkdirs(ab)) < 0 || (ret = dir_cache_hold(ab->dir)) < 0) {
		log_err("archive %s: %s.used: %s", ab->base.name, ab->dir, strerror(-ret));
		return ret;
	}
	ab->held = ret;
	return 0;
}

/* Whether @name, in cache_dir/archives, is an extraction's folder: a key, 64 hex digits. */
static bool be_archive_is_key(const char *name)
{
	return dir_cache_is_hex(name, 64);
}

/*
 * Whether extracting @bytes more calls for a pass over cache_dir/archives:
 * the backend's first, then one each sixteenth of archive_cache_size (a
 * zip's members are decompressed one at a time, and a walk of the folder
 * after each would make a zip of many members quadratic).  Caller holds
 * ab->lock.
 */
static bool be_archive_pass_due(struct be_archive *ab, uint64_t bytes)
{
	ab->since_pass += bytes;
	if (ab->cache_max == 0 || (ab->passed && ab->since_pass < ab->cache_max / 16))
		return false;
	ab->passed = true;
	ab->since_pass = 0;
	return true;
}

/* Opens the extracted file of member @e, extracting what is needed first. */
int be_archive_member_fd(struct be_archive *ab, const struct be_archive_entry *e)
{
	char path[PATH_MAX];
	struct stat st;
	bool due = false;
	int ret, fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/%u", ab->dir, e->ord) >= sizeof(path))
		return -ENAMETOOLONG;
	pthread_mutex_lock(&ab->lock);
	ret = be_archive_hold(ab);
	if (ret == 0 && ab->kind == BE_ARCHIVE_ZIP) {
		if (access(path, F_OK) < 0 && (ret = be_archive_extract_zip_member(ab, e, path)) == 0)
			due = be_archive_pass_due(ab, e->size);
	} else if (ret == 0 && !ab->extracted) {
		ret = be_archive_extract_tar(ab);
		due = ret == 0 && be_archive_pass_due(ab, ab->arch_size);
	}
	pthread_mutex_unlock(&ab->lock);
	if (ret < 0)
		return ret;
	/* the folder grew (or another process made it): the least recently read extractions
	 * no one reads go, while it is too big */
	if (due && snprintf(path, sizeof(path), "%s/archives", ab->cache_dir) < (int)sizeof(path)) {
		/* an extraction's temporary folder unchanged for a day: its process died */
		dir_cache_sweep(path, ".tmp-", BE_ARCHIVE_TMP_STALE_S);
		dir_cache_evict(path, ab->cache_max, be_archive_is_key, "archive cache",
				"archive_cache_size");
		snprintf(path, sizeof(path), "%s/%u", ab->dir, e->ord);
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != e->size) {
		log_err("archive %s: extracted %s is damaged (%s); remove %s", ab->base.name,
			e->path, path, ab->dir);
		close(fd);
		return -EIO;
	}
	return fd;
}
