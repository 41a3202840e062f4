/*
 * ftp_stream.c - reads of one open FTP file through RETRs kept running
 * (ftp_stream.h says why and what not).
 *
 * A stream is a thread in remote_do() of a GET from its start offset to the
 * end of the file, whose sink copies each piece curl receives into the
 * buffer of the reader that took the stream, and waits (curl waits, the
 * server's writes wait on the socket) while no reader is there.  `end` is
 * where the stream's next reader must start: the taker's offset plus its
 * length as soon as it takes it, so a read that starts there can wait for
 * the stream rather than open another.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftp_stream.h"
#include "mono.h"

/*
 * A read that starts past a running stream's end by at most a read-ahead
 * (the disk cache's fetches, issued in order, can arrive out of order)
 * waits this long for the reads between to take the stream up to it before
 * it starts its own RETR (a new login).
 */
#define FTP_FOLLOW_AHEAD	(64 << 20)
#define FTP_FOLLOW_WAIT_NS	20000000ll	/* 20 ms */

struct ftp_stream {
	struct ftp_streams *ss;
	pthread_t thread;
	off_t start;		/* where its RETR starts; fixed */
	off_t end;		/* where its next reader starts */
	bool busy;		/* a reader took it and waits for its bytes */
	bool over;		/* the transfer ended (done, failed, stopped) */
	bool cancel;		/* asked to stop: its sink aborts */
	int err;		/* remote_do's answer, once over */
	unsigned char *dst;	/* the reader's buffer, while busy */
	size_t want, got;
};

struct ftp_streams {
	struct remote *remote;
	char *url;
	int64_t idle_ns;		/* a parked stream is dropped after this */
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* CLOCK_MONOTONIC: any stream's state changed */
	struct ftp_stream *s[FTP_STREAMS_MAX];
};

struct ftp_streams *ftp_streams_new(struct remote *remote, const char *url, long timeout)
{
	struct ftp_streams *ss = calloc(1, sizeof(*ss));

	if (!ss)
		return NULL;
	ss->url = strdup(url);
	if (!ss->url) {
		free(ss);
		return NULL;
	}
	ss->remote = remote;
	ss->idle_ns = (timeout > 0 ? timeout : 30) * 500000000ll;	/* half the timeout */
	pthread_mutex_init(&ss->lock, NULL);
	mono_cond_init(&ss->cond);
	return ss;
}

/* ---- a stream's own thread ---- */

/* Waits on ss->cond until @deadline (mono_ns); whether the deadline passed. */
static bool ftp_streams_wait_until(struct ftp_streams *ss, int64_t deadline)
{
	struct timespec ts = mono_timespec(deadline);

	return pthread_cond_timedwait(&ss->cond, &ss->lock, &ts) == ETIMEDOUT &&
	       mono_ns() >= deadline;
}

/* remote_do's sink: hands @len bytes to readers, waiting for them. */
static int ftp_stream_sink(void *arg, const void *data, size_t len)
{
	struct ftp_stream *s = arg;
	struct ftp_streams *ss = s->ss;
	const unsigned char *p = data;
	int64_t parked = 0;

	pthread_mutex_lock(&ss->lock);
	while (len > 0 && !s->cancel) {
		size_t n;

		if (!s->dst || s->got == s->want) {
			if (!parked)
				parked = mono_ns();
			if (ftp_streams_wait_until(ss, parked + ss->idle_ns)) {
				if (!s->dst)
					s->cancel = true;	/* nobody came: let the server go */
				else
					parked = 0;	/* its reader has yet to leave: a new wait */
			}
			continue;
		}
		parked = 0;
		n = s->want - s->got < len ? s->want - s->got : len;
		memcpy(s->dst + s->got, p, n);
		s->got += n;
		p += n;
		len -= n;
		if (s->got == s->want)
			pthread_cond_broadcast(&ss->cond);
	}
	pthread_mutex_unlock(&ss->lock);
	return len > 0 ? -ECANCELED : 0;
}

static void *ftp_stream_main(void *arg)
{
	struct ftp_stream *s = arg;
	struct ftp_streams *ss = s->ss;
	struct remote_req req = { .method = REMOTE_GET, .url = ss->url, .body_fd = -1,
				  .range_off = s->start, .sink = ftp_stream_sink, .sink_arg = s };
	struct remote_resp resp;
	int ret = remote_do(ss->remote, &req, &resp);

	remote_resp_free(&resp);
	pthread_mutex_lock(&ss->lock);
	s->over = true;
	s->err = ret;
	pthread_cond_broadcast(&ss->cond);
	pthread_mutex_unlock(&ss->lock);
	return NULL;
}

/* ---- readers ---- */

/* Slot @i's stream, stopped, out of the table; join it without the lock. */
static struct ftp_stream *ftp_streams_take_out(struct ftp_streams *ss, int i)
{
	struct ftp_stream *s = ss->s[i];

	s->cancel = true;
	ss->s[i] = NULL;
	pthread_cond_broadcast(&ss->cond);
	return s;
}

static void ftp_stream_join(struct ftp_stream *s)
{
	if (s) {
		pthread_join(s->thread, NULL);
		free(s);
	}
}

/* A new stream from @off in a free slot, else NULL (-errno in *err). */
static struct ftp_stream *ftp_streams_start(struct ftp_streams *ss, off_t off, int *err)
{
	struct ftp_stream *s;
	int i = 0;

	while (i < FTP_STREAMS_MAX && ss->s[i])
		i++;
	*err = -EAGAIN;
	if (i == FTP_STREAMS_MAX)
		return NULL;
	s = calloc(1, sizeof(*s));
	*err = -ENOMEM;
	if (!s)
		return NULL;
	*s = (struct ftp_stream){ .ss = ss, .start = off, .end = off };
	*err = -pthread_create(&s->thread, NULL, ftp_stream_main, s);
	if (*err) {
		free(s);
		return NULL;
	}
	ss->s[i] = s;
	return s;
}

/*
 * The stream for a read at @off, taken (busy), or NULL with -errno in *err;
 * under the lock.  Streams that ended, and a parked one whose slot a new
 * stream needs, go to @drop (*n_drop of them) to be joined after the lock.
 */
static struct ftp_stream *ftp_streams_pick(struct ftp_streams *ss, off_t off, int *err,
					   struct ftp_stream **drop, int *n_drop)
{
	int64_t deadline = 0;

	for (;;) {
		struct ftp_stream *s = NULL;
		int parked = -1;
		bool behind = false;

		for (int i = 0; i < FTP_STREAMS_MAX; i++) {
			struct ftp_stream *t = ss->s[i];

			if (t && t->over && !t->busy && *n_drop < FTP_STREAMS_MAX)
				drop[(*n_drop)++] = ftp_streams_take_out(ss, i);
			else if (t && t->end == off && !t->over && (!s || s->busy))
				s = t;
			else if (t && !t->busy && !t->over)
				parked = i;
			if (t && !t->over && t->end < off && off - t->end <= FTP_FOLLOW_AHEAD)
				behind = true;
		}
		if (s && !s->busy)
			return s;
		if (s) {	/* a read under way stops where this one starts: follow it */
			pthread_cond_wait(&ss->cond, &ss->lock);
			continue;
		}
		if (behind) {	/* the reads before this one may be on their way */
			if (!deadline)
				deadline = mono_ns() + FTP_FOLLOW_WAIT_NS;
			if (mono_ns() < deadline && !ftp_streams_wait_until(ss, deadline))
				continue;
		}
		s = ftp_streams_start(ss, off, err);
		if (s || *err != -EAGAIN || parked < 0 || *n_drop == FTP_STREAMS_MAX)
			return s;
		drop[(*n_drop)++] = ftp_streams_take_out(ss, parked);	/* a new need first */
		return ftp_streams_start(ss, off, err);
	}
}

ssize_t ftp_streams_read(struct ftp_streams *ss, void *buf, size_t len, off_t off)
{
	struct ftp_stream *s, *drop[FTP_STREAMS_MAX];
	int err, n_drop = 0;
	ssize_t ret;

	pthread_mutex_lock(&ss->lock);
	s = ftp_streams_pick(ss, off, &err, drop, &n_drop);
	if (s) {
		s->busy = true;
		s->end = off + (off_t)len;
		s->dst = buf;
		s->want = len;
		s->got = 0;
		pthread_cond_broadcast(&ss->cond);
		while (s->got < s->want && !s->over)
			pthread_cond_wait(&ss->cond, &ss->lock);
		ret = s->got > 0 || s->err == 0 ? (ssize_t)s->got : s->err;
		if (s->got < s->want)
			s->end = off + (off_t)s->got;	/* over: nobody follows it */
		s->busy = false;
		s->dst = NULL;
		pthread_cond_broadcast(&ss->cond);
	} else {
		ret = err;
	}
	pthread_mutex_unlock(&ss->lock);
	while (n_drop > 0)
		ftp_stream_join(drop[--n_drop]);
	return ret;
}

void ftp_streams_free(struct ftp_streams *ss)
{
	struct ftp_stream *out[FTP_STREAMS_MAX] = { NULL };

	if (!ss)
		return;
	pthread_mutex_lock(&ss->lock);
	for (int i = 0; i < FTP_STREAMS_MAX; i++)
		if (ss->s[i])
			out[i] = ftp_streams_take_out(ss, i);
	pthread_mutex_unlock(&ss->lock);
	for (int i = 0; i < FTP_STREAMS_MAX; i++)
		ftp_stream_join(out[i]);
	pthread_cond_destroy(&ss->cond);
	pthread_mutex_destroy(&ss->lock);
	free(ss->url);
	free(ss);
}
