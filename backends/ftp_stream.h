/*
 * ftp_stream.h - reads of one open FTP file through RETRs kept running
 * (be_ftp.c).
 *
 * Every ranged RETR that stops short of the file's end costs the next one
 * a new login: libcurl closes the control connection after a download it
 * cut short (the server's 426 after ABOR leaves nothing to reuse), so a
 * file read 16 MiB at a time paid a TCP connect, USER/PASS, PASV and a data
 * connection per 16 MiB.  Instead a read starts a RETR at its offset that
 * runs to the file's end, takes the bytes it asked for, and leaves the
 * transfer parked where it stopped (the server waits on a full socket); the
 * next read that starts there continues it.  Reads of the disk cache's
 * read-ahead come from several threads at once, in order: a read that
 * starts where a running read will stop waits for it and continues the same
 * RETR, so a sequential reader's blocks come down one stream.
 *
 * What not: streams are the open file's own (at most FTP_STREAMS_MAX;
 * past that, a read asks the server with a plain ranged RETR), a parked
 * stream is dropped after half the datastore's timeout unused (before the
 * server's idle timer or curl's stall timer give up on it), and nothing is
 * read ahead here: the bytes past a read stay in the sockets.
 *
 * Threading: each stream is a thread running remote_do() whose sink hands
 * the bytes to the reader waiting for them; every field is guarded by the
 * open file's one lock.  ftp_streams_read may be called from any thread.
 */
#ifndef MLFS_FTP_STREAM_H
#define MLFS_FTP_STREAM_H

#include <sys/types.h>

#include "remote.h"

#define FTP_STREAMS_MAX 4

struct ftp_streams;

/* The streams of one open file at @url (copied) of @remote (borrowed); NULL when out of memory. */
struct ftp_streams *ftp_streams_new(struct remote *remote, const char *url, long timeout);
/*
 * Reads @len bytes at @off (the caller keeps them within the file):
 * bytes (fewer only where the transfer ended early), or -EAGAIN when every
 * stream is busy (ask the server plainly), or another -errno.
 */
ssize_t ftp_streams_read(struct ftp_streams *ss, void *buf, size_t len, off_t off);
/* Stops every stream (a parked one at once) and frees @ss; NULL is fine. */
void ftp_streams_free(struct ftp_streams *ss);

#endif
