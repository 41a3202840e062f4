/*
 * container_auth.c - the registry credentials one worker's pull may use,
 * gathered into one Docker config.json of its own.
 *
 * podman takes one --authfile.  A worker's pull gets a file (mode 0600,
 * root's, in the worker's folder) holding, per registry, the first of:
 *
 *   1. GPULab's USER:PASSWORD from the spec's image name;
 *   2. OpenPAI's authFile, a Docker config.json on the node;
 *   3. the job owner's ~/.docker/config.json (the Docker convention);
 *   4. [containers] auth_file, the node's.
 *
 * A file a spec names, or the owner's own, is read only when the owner
 * could read it: owned by the owner, or readable by everyone.  A user
 * never borrows root's or another user's credentials by naming their
 * file.  Nothing of this is ever written to spec.json, status.json or a
 * log.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "container.h"
#include "log.h"

#define CONTAINER_AUTH_MAX	(1 << 20)	/* a config.json larger than this is not one */

/* The "auths" object of the config.json at @path, if @uid may read it; NULL otherwise. */
static json_t *container_auths_of(const char *path, uid_t uid, bool as_owner, char *why,
				  size_t why_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	json_error_t err;
	struct stat st;
	json_t *root, *auths;

	if (fd < 0) {
		if (errno != ENOENT || !as_owner)
			snprintf(why, why_len, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > CONTAINER_AUTH_MAX ||
	    (as_owner && st.st_uid != uid && !(st.st_mode & S_IROTH))) {
		snprintf(why, why_len, "%s: not a file the job's owner may read", path);
		close(fd);
		return NULL;
	}
	root = json_loadfd(fd, 0, &err);
	close(fd);
	if (!root) {
		snprintf(why, why_len, "%s:%d: not a Docker config.json: %s", path, err.line, err.text);
		return NULL;
	}
	auths = json_incref(json_object_get(root, "auths"));
	json_decref(root);
	if (!json_is_object(auths)) {
		json_decref(auths);
		return NULL;
	}
	return auths;
}

/* Adds the registries of @from not yet in @to. */
static void container_auths_add(json_t *to, json_t *from)
{
	const char *key;
	json_t *v;

	json_object_foreach(from, key, v)
		if (!json_object_get(to, key))
			json_object_set(to, key, v);
	json_decref(from);
}

/* {"auth": base64(USER:PASSWORD)} under the image's registry. */
static int container_auths_inline(json_t *auths, const char *image, const char *creds)
{
	struct image_ref ref;
	char why[160];
	size_t len = strlen(creds);
	unsigned char *b64 = malloc(4 * ((len + 2) / 3) + 1);
	json_t *entry;

	if (!b64)
		return -ENOMEM;
	if (image_ref_parse(image, &ref, why, sizeof(why)) < 0) {
		free(b64);
		return -EINVAL;
	}
	EVP_EncodeBlock(b64, (const unsigned char *)creds, (int)len);
	entry = json_pack("{s:s}", "auth", (const char *)b64);
	explicit_bzero(b64, strlen((char *)b64));
	free(b64);
	if (!entry)
		return -ENOMEM;
	json_object_set_new(auths, ref.domain[0] ? ref.domain : "docker.io", entry);
	return 0;
}

int container_auth_file(const char *path, const struct container_auth *a, char *why,
			size_t why_len)
{
	json_t *auths = json_object(), *got, *root;
	char home_auth[4200];
	char *text;
	int fd, ret = 0;

	why[0] = '\0';
	if (!auths)
		return -ENOMEM;
	if (a->inline_creds)
		ret = container_auths_inline(auths, a->image, a->inline_creds);
	if (ret == 0 && a->spec_file) {
		got = container_auths_of(a->spec_file, a->uid, true, why, why_len);
		if (!got) {
			json_decref(auths);
			return -EACCES;		/* named by the spec: it must be there and readable */
		}
		container_auths_add(auths, got);
	}
	if (ret == 0 && a->home) {
		snprintf(home_auth, sizeof(home_auth), "%s/.docker/config.json", a->home);
		got = container_auths_of(home_auth, a->uid, true, why, why_len);
		if (got)
			container_auths_add(auths, got);
		else if (why[0])
			log_warn("job of uid %u: its %s is not used: %s", (unsigned int)a->uid,
				 home_auth, why);
		why[0] = '\0';
	}
	if (ret == 0 && a->node_file) {
		got = container_auths_of(a->node_file, 0, false, why, why_len);
		if (got)
			container_auths_add(auths, got);
		why[0] = '\0';
	}
	root = ret == 0 ? json_pack("{s:o}", "auths", auths) : (json_decref(auths), NULL);
	if (!root)
		return ret ? ret : -ENOMEM;
	text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (!text)
		return -ENOMEM;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		ret = -errno;
	else if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		ret = -EIO;
	if (fd >= 0 && close(fd) < 0 && !ret)
		ret = -errno;
	explicit_bzero(text, strlen(text));
	free(text);
	return ret;
}
