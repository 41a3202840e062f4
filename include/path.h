/*
 * path.h - backend paths.
 *
 * Inside a backend every path is canonical and relative to the backend's
 * root: "" is the root, otherwise "a/b/c" with no leading or trailing slash,
 * no empty, "." or ".." component.  Everything that reaches a backend went
 * through these functions, so a backend never sees "..".
 */
#ifndef MLFS_PATH_H
#define MLFS_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Whether the component of @len bytes at @c is "..". */
static inline bool path_is_dotdot(const char *c, size_t len)
{
	return len == 2 && c[0] == '.' && c[1] == '.';
}

/* Whether @path ("a/b", "/a/b/") has a ".." component: the one test of it. */
bool path_has_dotdot(const char *path);

/* 0 if @name is one usable component, else -EINVAL or -ENAMETOOLONG. */
int path_check_name(const char *name);

/* Hands out "@base/@name" (or @name when @base is ""). 0 or -ENOMEM. */
int path_join(char **out, const char *base, const char *name);

/*
 * Canonicalizes a path a user wrote ("/voc2012/", "a//b/./c") into the form
 * above.  A ".." component is refused with -EINVAL, never resolved.
 */
int path_canon(char **out, const char *path);

/* Hands out @name with every space turned into '_' (the name shown in the tree). */
int path_shown_name(char **out, const char *name);

/* Whether @path names an archive by its extension (.zip, .tar, .tar.gz, .tgz, .tar.bz2). */
int path_is_archive(const char *path);

/*
 * An object store's key prefix from a root as written ("/a/b", "a/b/", "/",
 * NULL): "" or "a/b/".  malloc'd; NULL on ENOMEM.
 */
char *path_key_prefix(const char *root);

/*
 * rm -rf of a folder of this machine that is our own (a temporary folder,
 * staged files): never follows a symlink nor crosses a mount; what cannot
 * be removed stays, silently.
 */
void path_remove_tree(const char *path);

/* mkdir -p of a path of this machine (not a backend path): 0 or a negated errno. */
int path_mkdirs(const char *path, mode_t mode);

#endif
