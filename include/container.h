/*
 * container.h - running a worker in its spec's container image (DESIGN §10).
 *
 * Three parts, each usable alone:
 *
 * - image references: what a spec may name as an image, checked at submit
 *   the way Docker's own reference grammar reads it (image_ref.c);
 * - the node's runtime: podman and the OCI runtime this host's cgroups
 *   allow, and the limits containers may be given, found once at start
 *   (container.c), shown in .mlfs/node;
 * - the plan of one worker: the argv that pulls its image (`mlfs image
 *   pull`, shared by every job of the node that needs it at once) and the
 *   argv that runs its command in it (`podman run ...`), which an executor
 *   runs instead of `/bin/sh -c COMMAND` (exec.h: pull_argv, run_argv).
 *   Both executors use this one seam.
 */
#ifndef MLFS_CONTAINER_H
#define MLFS_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define IMAGE_REF_MAX	255	/* Docker's limit on a repository name, tag and digest aside */

/* An image reference, split: "127.0.0.1:5000/team/tf:1.15". */
struct image_ref {
	char domain[IMAGE_REF_MAX + 1];	/* "127.0.0.1:5000"; "" = docker.io */
	char path[IMAGE_REF_MAX + 1];	/* "team/tf" */
	char tag[129];			/* "1.15"; "" = none (latest, unless a digest) */
	char digest[160];		/* "sha256:..."; "" = none */
};

/*
 * Parses @s by the grammar of Docker's distribution/reference: an optional
 * registry host[:port], lower-case path components joined by '/' and
 * separated within by '.', '_', '__' or dashes, then ":TAG" and/or
 * "@ALGO:HEX".  Returns 0, or -EINVAL with what is wrong in @why (no
 * credentials: the caller takes "user:password@" off first).
 */
int image_ref_parse(const char *s, struct image_ref *out, char *why, size_t why_len);

/*
 * GPULab's private-registry form "USER:PASSWORD@HOST:PORT/NAME:TAG": when
 * @s starts with credentials, returns their length (up to the '@'), else
 * 0.  A digest ("name@sha256:...") is not taken for credentials.
 */
size_t image_ref_credentials(const char *s);

#endif
