/*
 * password.h - a datastore's password given as `password` or `password_file`
 * (smb, ftp): the offline check and the read at create.  The file's first
 * line is the password; a file others can read or change is refused, as
 * ssh refuses a key.  The password is never logged, nor the secrets a URL
 * holds (password_url_shown).
 */
#ifndef MLFS_PASSWORD_H
#define MLFS_PASSWORD_H

#include <stdbool.h>

#include "config.h"
#include "diag.h"

/*
 * Checks `password` and `password_file` of @cfg: not both, the file usable;
 * with @required, one of them.  Adds "file:line: ..." to @d.
 */
void password_validate(const struct datastore_config *cfg, bool required, struct diag *d);

/*
 * The password of @cfg into *out (malloc'd; NULL when neither key is set):
 * `password`, or the first line of `password_file` (relative to the config
 * file's folder).  0, -EACCES (logged) for a file that cannot be used, or
 * -ENOMEM.
 */
int password_read(const struct datastore_config *cfg, char **out);

/*
 * Where the user info of @url is (scheme://USER[:PASSWORD]@HOST/...): its
 * start into *start, its length (the '@' left out) into *len.  False when
 * @url has none (no scheme, or no '@' before the path, query or fragment).
 */
bool password_url_userinfo(const char *url, const char **start, size_t *len);

/*
 * @url as a log line shows it, into @out (@size bytes, cut if longer):
 * without its user info (https://USER:TOKEN@HOST), query (a signed URL's
 * signature) and fragment.
 */
void password_url_shown(char *out, size_t size, const char *url);

#endif
