/*
 * sched_spare.c - job folders made ahead, so that accepting a spec makes no inode.
 *
 * An accepted job needs its folder, state_dir/jobs/NAME/, with the events
 * file that acceptance writes and the status.json that the scheduler
 * rewrites at each change.  Those are three new inodes, and on a disk such
 * as the benchmarks' (ext4 without a journal, which looks at every recently
 * freed inode of a group before it reuses one) each costs 0.2 to 2 ms, more
 * than the journal's fdatasync: most of a close(2), and more the more jobs
 * the node starts and removes.  So a thread of its own keeps SCHED_SPARES
 * folders made ahead, state_dir/spare/N/ with an empty events and
 * status.json, and acceptance renames one to jobs/NAME: one directory
 * entry, no inode.  The scheduler's pass, under its lock, never makes
 * status.json either.  The thread sleeps until half of them are taken, then
 * makes them all again at the disk's pace, whatever the scheduler's thread
 * is busy with: a burst shorter than half the spares never wakes it, so it
 * takes no CPU from the accepting threads while they need it.
 *
 * They are made on demand: none before the first acceptance (a gateway
 * whose jobs/ is never used makes none), SCHED_SPARES_FIRST then, and twice
 * as many each time an acceptance finds none ready, up to SCHED_SPARES.
 *
 * When none is ready (a burst longer than SCHED_SPARES, a disk that refuses
 * them) or the rename fails (a folder of that name is left from before),
 * acceptance makes the folder itself, as it always did.  An empty
 * status.json reads as none at all: the job is QUEUED.  A new daemon takes
 * the spares it finds, completing any that a killed one left half made.
 *
 * Threading: spare_lock guards the list of ready spares and the counter;
 * no file is touched under it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "sched_int.h"

static const char *const sched_spare_files[] = { "events", "status.json" };

/* Makes spare @n whole (what is there already is kept); -errno. */
static int sched_spare_make(const struct sched *s, unsigned int n)
{
	char path[4200];
	size_t len;
	int fd;

	len = (size_t)snprintf(path, sizeof(path), "%s/%u", s->spare_dir, n);
	if (mkdir(path, 0711) < 0 && errno != EEXIST)
		return -errno;
	for (size_t i = 0; i < sizeof(sched_spare_files) / sizeof(sched_spare_files[0]); i++) {
		snprintf(path + len, sizeof(path) - len, "/%s", sched_spare_files[i]);
		fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
		close(fd);
	}
	return 0;
}

/*
 * Once no more than half the wanted spares are ready, makes them until all
 * are.  After a failure (a full disk) it waits to be woken again before it
 * tries again.
 */
static void *sched_spare_thread(void *arg)
{
	struct sched *s = arg;
	bool failed = false, filling = false;

	pthread_mutex_lock(&s->spare_lock);
	while (!s->spare_stop) {
		unsigned int n = s->spare_next;
		int ret;

		if (s->n_spares >= s->spare_want)
			filling = false;
		else if (s->n_spares <= s->spare_want / 2)
			filling = true;
		if (failed || !filling) {
			failed = false;
			pthread_cond_wait(&s->spare_cond, &s->spare_lock);
			continue;
		}
		pthread_mutex_unlock(&s->spare_lock);
		ret = sched_spare_make(s, n);
		pthread_mutex_lock(&s->spare_lock);
		failed = ret < 0;
		if (!failed) {
			s->spare_next = n + 1;
			s->spares[s->n_spares++] = n;
		}
	}
	pthread_mutex_unlock(&s->spare_lock);
	return NULL;
}

/* Takes the spares a previous daemon left in state_dir/spare/ (before the thread starts). */
static void sched_spare_reuse(struct sched *s)
{
	DIR *d = opendir(s->spare_dir);
	struct dirent *e;

	while (d && (e = readdir(d)) != NULL) {
		char *end;
		unsigned long n = strtoul(e->d_name, &end, 10);

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end || n >= 1UL << 31)
			continue;
		if (n >= s->spare_next)
			s->spare_next = (unsigned int)n + 1;
		if (s->n_spares < SCHED_SPARES && sched_spare_make(s, (unsigned int)n) == 0)
			s->spares[s->n_spares++] = (unsigned int)n;
	}
	if (d)
		closedir(d);
	s->spare_want = s->n_spares;
}

int sched_spare_start(struct sched *s)
{
	int ret;

	if (asprintf(&s->spare_dir, "%s/spare", s->cfg->state_dir) < 0) {
		s->spare_dir = NULL;
		return -ENOMEM;
	}
	/* 0700: nobody else needs to look into folders no job owns yet */
	if (mkdir(s->spare_dir, 0700) < 0 && errno != EEXIST) {
		log_warn("%s: %s; each job's folder is made as it is accepted", s->spare_dir,
			 strerror(errno));
		return 0;
	}
	sched_spare_reuse(s);
	pthread_mutex_init(&s->spare_lock, NULL);
	pthread_cond_init(&s->spare_cond, NULL);
	ret = pthread_create(&s->spare_thread, NULL, sched_spare_thread, s);
	if (ret != 0) {
		log_warn("%s: no thread to make spare job folders: %s; each job's folder is made as "
			 "it is accepted", s->spare_dir, strerror(ret));
		pthread_cond_destroy(&s->spare_cond);
		pthread_mutex_destroy(&s->spare_lock);
		return 0;
	}
	s->spare_started = true;
	return 0;
}

void sched_spare_stop(struct sched *s)
{
	if (s->spare_started) {
		pthread_mutex_lock(&s->spare_lock);
		s->spare_stop = true;
		pthread_cond_signal(&s->spare_cond);
		pthread_mutex_unlock(&s->spare_lock);
		pthread_join(s->spare_thread, NULL);
		pthread_cond_destroy(&s->spare_cond);
		pthread_mutex_destroy(&s->spare_lock);
		s->spare_started = false;
	}
	free(s->spare_dir);
	s->spare_dir = NULL;
}

int sched_spare_take(struct sched *s, struct sched_job *j)
{
	char path[4200];
	unsigned int n = 0;
	bool have = false, wake = false;

	if (s->spare_started) {
		pthread_mutex_lock(&s->spare_lock);
		have = s->n_spares > 0;
		if (have)
			n = s->spares[--s->n_spares];
		else if (s->spare_want < SCHED_SPARES)
			s->spare_want = s->spare_want ? 2 * s->spare_want : SCHED_SPARES_FIRST;
		if (s->spare_want > SCHED_SPARES)
			s->spare_want = SCHED_SPARES;
		wake = s->n_spares <= s->spare_want / 2;
		pthread_mutex_unlock(&s->spare_lock);
	}
	if (wake)	/* after the unlock, so that it does not wake only to wait for it */
		pthread_cond_signal(&s->spare_cond);
	if (have) {
		snprintf(path, sizeof(path), "%s/%u", s->spare_dir, n);
		if (rename(path, j->dir) == 0)
			return 0;
		/* its name is taken by a folder left from before: the spare stays for another */
		pthread_mutex_lock(&s->spare_lock);
		if (s->n_spares < SCHED_SPARES)
			s->spares[s->n_spares++] = n;
		pthread_mutex_unlock(&s->spare_lock);
	}
	return sched_make_dirs(j);
}
