/* archive_err.c - a libarchive failure as an errno (archive_err.h). */
#include <errno.h>

#include <archive.h>

#include "archive_err.h"

int mlfs_archive_errno(struct archive *a, int fallback)
{
	int e = archive_errno(a);

	/* ARCHIVE_ERRNO_FILE_FORMAT is EILSEQ, _PROGRAMMER EINVAL, _MISC -1 on Linux */
	if (e <= 0 || e == EILSEQ || e == EINVAL)
		return fallback;
	return -e;
}
