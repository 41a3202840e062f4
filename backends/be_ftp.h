/*
 * be_ftp.h - the FTP backend (be_ftp.c): a folder of an FTP or FTPS server,
 * read-only, through libcurl; and the pieces of it that need no server,
 * exposed for tests/unit/test_ftp.c.
 */
#ifndef MLFS_BE_FTP_H
#define MLFS_BE_FTP_H

#include <stdbool.h>
#include <time.h>

#include "backend.h"

extern const struct backend_ops be_ftp_ops;
extern const struct config_form be_ftp_form;	/* its keys and URLs: config.h */

/*
 * Splits an ftp:// or ftps:// URL (scheme in any case) into the URL curl is
 * given for its folder, "ftp://HOST[:PORT]/PATH/" (a '/' added at the end),
 * and whether it asks for TLS (ftps://: explicit TLS, AUTH TLS on the
 * control port, 21 unless given; never implicit TLS on 990).  0, -EINVAL for
 * another scheme, no host, user info in the URL (use username and
 * password), a query or fragment; -ENOMEM.
 */
int be_ftp_split_url(const char *url, char **root, bool *tls);

/*
 * The time of a listing's date as a Unix listing writes it, in UTC: "Nov 27
 * 15:30" (this year, or last year when that would be more than a day ahead
 * of @now) or "Nov 27  2025" (midnight).  -1 when it is neither.
 */
time_t be_ftp_parse_date(const char *s, time_t now);

/*
 * Whether a link to a folder, met in folder @dir ("" or "a/b") with
 * @target as the listing wrote it, is one a walk of the tree could enter
 * forever: its target, resolved lexically from @dir, is @dir itself or a
 * folder above it, or leaves the datastore's folder; an absolute target
 * (the server's root is not the datastore's) or none counts as one.
 */
bool be_ftp_link_loops(const char *dir, const char *target);

#endif
