/*
 * sched_int.h - the scheduler's own structures, shared by sched*.c only.
 *
 * Every field below is guarded by sched->lock unless it says otherwise.
 */
#ifndef MLFS_SCHED_INT_H
#define MLFS_SCHED_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "container.h"
#include "exec.h"
#include "scheduler.h"
#include "spec.h"

#define SCHED_MAX_RETRIES 10	/* cap on retry_count, whatever a spec asks */
#define SCHED_MAX_GPUS 64
#define SCHED_DEPTH 100		/* waiting jobs looked at per scheduling pass */
#define SCHED_PORT_FIRST 30000	/* ports handed to jobs that ask (OpenPAI portList) */
#define SCHED_PORT_COUNT 10000
#define SCHED_SUBMITTERS 8	/* threads submitting to a cluster at once */
#define SCHED_MAX_GROUP 1024	/* a job's workers submitted together, at most */
#define SCHED_SPARES 1024	/* job folders made ahead, at most (sched_spare.c): 4 MiB */
#define SCHED_SPARES_FIRST 32	/* ... after the first acceptance; doubled each time they run out */

/* One attempt of one worker, kept for status.json. */
struct sched_attempt {
	long long started_ns, ended_ns;
	char end[32];		/* "exited 0", "signaled 15", "oom", "lost", "" while running */
	unsigned char gpus[SCHED_MAX_GPUS];	/* the node's GPUs it ran on (local executor) */
	unsigned int n_gpus;
};

/* Where a worker with a view stands (the executor's phase file). */
enum sched_phase {
	SCHED_PHASE_NONE,		/* no view, or not started */
	SCHED_PHASE_STAGING_IN,
	SCHED_PHASE_RUNNING,
	SCHED_PHASE_STAGING_OUT,
};

struct sched_worker {
	unsigned int n;			/* from 1 */
	enum sched_state state;		/* QUEUED, RUNNING, RETRYING or a final state */
	int exit_code;			/* of the last attempt; -1 = none */
	struct sched_attempt *attempts;
	unsigned int n_attempts;
	bool running;			/* run is live: resources below are held */
	bool starting;			/* placed, resources held, being started */
	struct exec_run run;
	int gpus[SCHED_MAX_GPUS];	/* indices held while running */
	unsigned int n_gpus;
	bool term_sent;			/* SIGTERM sent; SIGKILL at kill_at */
	long long kill_at_ns;		/* CLOCK_MONOTONIC; 0 = none */
	bool timed_out;
	/* A worker with a view (mlfs job): */
	enum sched_phase phase;		/* read from the executor's phase file */
	bool staging_in_failed;		/* the last attempt's view never came up */
	bool upload_failed;		/* the last attempt's output is not at its destination */
	char output_id[160];		/* the last attempt's output folder, "" = none */
	/* With a cluster executor (exec_ops.submit): */
	bool pending;			/* submitted, waiting in the cluster's queue (run is live) */
	char wait_why[256];		/* the cluster's words for why it waits */
	char pull[160];			/* its image pull's last words, while staging in */
	char sources[512];		/* its view's workers/N/sources: "NAME=VERSION ..." */
	char cluster_id[64];		/* the last attempt's id in the cluster, kept after it ends */
	char end_why[256];		/* the executor's words for how the last attempt ended */
};

struct sched_job {
	char *name;
	char *file;			/* the file name it was written as */
	uid_t uid;
	gid_t gid;
	char *text;			/* the spec as written (kept to re-read it after a restart) */
	size_t text_len;
	struct spec *spec;
	enum sched_state state;
	char *reason;
	long long accepted_ns, started_ns, ended_ns;	/* CLOCK_REALTIME; 0 = not yet */
	long long accepted_mono_ns;	/* CLOCK_MONOTONIC, for the wait timeout */
	struct sched_worker *workers;
	size_t n_workers;
	bool cancelled;
	bool stopping;			/* a role's min count decided the job: the rest are stopped */
	unsigned int job_attempt;	/* gang jobs: whole-job retries so far */
	enum sched_state verdict;	/* what the job ends as once stopped */
	char *verdict_reason;
	int **ports;			/* ports[w]: worker w's ports (spec_runtime); NULL until placed */
	size_t n_ports;			/* total held, for release */
	bool visible;			/* false while its acceptance is being made durable */
	char *dir;			/* state_dir/jobs/NAME */
	struct sched_job *next;		/* in acceptance order */
	struct sched_job *hnext;	/* in sched->hash */
	uint64_t fit_gen;		/* sched->res_gen when it last did not fit */
	bool never;			/* cannot fit on this node, whatever frees up */
	bool upload_pending;		/* FAILED for an upload that a later sync may deliver */
	long long upload_checked_ns;	/* CLOCK_MONOTONIC of the last look at its outputs */
};

/* The node's resources (sched_node.c). */
struct sched_node {
	unsigned int gpus;
	int gpu_minor[SCHED_MAX_GPUS];		/* GPU i is /dev/nvidia<gpu_minor[i]> */
	char gpu_bus[SCHED_MAX_GPUS][24];	/* its PCI address as nvidia-smi says it; "" unknown */
	char *gpu_type;
	double gpu_memory_gb;
	char *cuda_version;		/* NULL = unknown */
	long cpus;
	double memory_gb;		/* <= 0: not accounted */
	double price;			/* < 0: not set */
	char *cluster_id, *name;
	/* Held by running workers: */
	char *gpu_holder[SCHED_MAX_GPUS];	/* "job/worker" or NULL */
	unsigned char port_held[SCHED_PORT_COUNT / 8];	/* of SCHED_PORT_FIRST.. */
	unsigned int port_next;
	long cpus_used;
	double memory_used_gb;
};

struct sched {
	const struct mlfs_config *cfg;		/* borrowed */
	struct executor *ex;
	char *jobs_dir;				/* state_dir/jobs */
	char *journal_path;
	int journal_fd;				/* guarded by journal_lock */
	pthread_mutex_t journal_lock;
	sched_final_fn *final;
	void *final_arg;
	sched_output_done_fn *output_done;	/* under lock; NULL until set */
	void *output_done_arg;

	pthread_mutex_t lock;
	struct sched_job *jobs, **jobs_tail;
	size_t n_jobs;
	struct sched_job **hash;		/* by name */
	size_t hash_size;
	uint64_t res_gen;			/* bumped when resources free up */
	struct sched_node node;
	bool stop;
	bool started_any;			/* in this pass (sched_run.c) */
	struct sched_launch *launches;		/* placed, to start without the lock */
	char **finals;				/* jobs that ended, for sched_final_fn */
	size_t n_finals, cap_finals;
	int wake_fd;				/* eventfd, wakes the thread */
	pthread_t thread;
	bool thread_started;
	/* Cluster submissions (sched_run.c), guarded by sub_lock: */
	pthread_mutex_t sub_lock;
	pthread_cond_t sub_cond;
	struct sched_launch *sub_queue, **sub_tail;
	bool sub_stop, sub_inited;
	pthread_t submitters[SCHED_SUBMITTERS];
	size_t n_submitters;
	/* Job folders made ahead by their own thread (sched_spare.c), guarded by spare_lock: */
	pthread_mutex_t spare_lock;
	pthread_cond_t spare_cond;		/* half were taken, or stop */
	unsigned int spares[SCHED_SPARES];	/* ready: state_dir/spare/N */
	size_t n_spares;
	size_t spare_want;			/* how many to keep ready */
	unsigned int spare_next;		/* the next N made */
	bool spare_stop, spare_started;
	pthread_t spare_thread;
	char *spare_dir;			/* state_dir/spare; set once */
	/* Workers' views: the mlfs binary and the config, absolute; NULL: no views (fakes). */
	char *mlfs_bin;
	char *config_path;
	/* Podman and what it may be given (container.h); found once, at start. */
	struct container_runtime containers;
};

/* Whether the executor places workers itself (a cluster: exec_ops.submit). */
static inline bool sched_cluster(const struct sched *s)
{
	return s->ex && exec_is_cluster(s->ex);
}

long long sched_now_ns(void);		/* CLOCK_REALTIME */
long long sched_mono_ns(void);		/* CLOCK_MONOTONIC */
void sched_wake(struct sched *s);
struct sched_job *sched_find(struct sched *s, const char *name);
/* Adds @j at the end of the list and to the name hash, and takes it out again. */
void sched_link(struct sched *s, struct sched_job *j);
void sched_unlink(struct sched *s, struct sched_job *j);
/* Sets the job's state and reason and records the change in events and status.json. */
void sched_set_state(struct sched *s, struct sched_job *j, enum sched_state st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void sched_event(struct sched_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Lists as ignored what the spec asks of the node that the node does not declare. */
void sched_node_ignored(struct sched *s, struct spec *sp);
/*
 * Workers with an image where this node cannot run one: refused, each
 * image field as "file:line:col: FIELD: ..." in @d (-EINVAL), or with
 * [containers] fallback = host run on the node, listed as ignored.  With
 * @d NULL (a job read back at start) nothing is refused.
 */
/* Why this scheduler cannot run images, or NULL when it can. */
const char *sched_images_why(const struct sched *s);
int sched_images_check(struct sched *s, struct spec *sp, const char *file, const char *text,
		       size_t len, struct diag *d);
/* A new job of @spec (taken over, also on failure), not linked anywhere. */
int sched_job_new(struct sched *s, struct spec *spec, const char *file, const char *text,
		  size_t len, uid_t uid, gid_t gid, struct sched_job **out);
void sched_job_free(struct sched_job *j);

/* sched_node.c */
int sched_node_init(struct sched_node *node, const struct mlfs_config *cfg);
void sched_node_free(struct sched_node *node);

/*
 * The device minor (/dev/nvidiaN) of the GPU at PCI address @bus as
 * nvidia-smi writes it ("00000000:3B:00.0"), from the "Device Minor:"
 * line of the driver's @proc_dir/<address>/information
 * (/proc/driver/nvidia/gpus); -1 when it does not say.
 */
int sched_node_gpu_minor(const char *proc_dir, const char *bus);
/*
 * Whether @w fits the node now: 1 and the GPU indices it would get in
 * @gpus, 0 with the reason it waits in @why, or -1 when it never can here
 * (@why says why).
 */
int sched_node_fit(const struct sched_node *node, const struct spec_resources *res,
		   int *gpus, char *why, size_t why_len);
void sched_node_hold(struct sched_node *node, const struct spec_resources *res,
		     const int *gpus, unsigned int n_gpus, const char *holder);
void sched_node_release(struct sched_node *node, const struct spec_resources *res,
			const int *gpus, unsigned int n_gpus);
/* Holds @n TCP ports free on the node into @out; -EADDRINUSE when there are not that many. */
int sched_node_ports(struct sched_node *node, size_t n, int *out);
void sched_node_ports_release(struct sched_node *node, const int *ports, size_t n);

/* sched_store.c */
int sched_store_open(struct sched *s);
void sched_store_close(struct sched *s);
/* Appends a record and makes it durable. */
int sched_store_accept(struct sched *s, const struct sched_job *j);
int sched_store_remove(struct sched *s, const char *name);
/* Reads the journal and each job's status.json into s->jobs. */
int sched_store_load(struct sched *s);
/* Writes the job's status.json (atomically; called with s->lock held). */
void sched_store_status(struct sched_job *j);
char *sched_status_json(const struct sched_job *j);
int sched_make_dirs(struct sched_job *j);
int sched_rmtree(const char *path);

/* sched_spare.c */
/* Takes the spares found in state_dir/spare and starts the thread that makes more. */
int sched_spare_start(struct sched *s);
void sched_spare_stop(struct sched *s);
/* Makes @j's folder: a spare renamed to j->dir, else a new one (sched_make_dirs); -errno. */
int sched_spare_take(struct sched *s, struct sched_job *j);

/* sched_run.c, sched_launch.c */
struct sched_launch;
/* Starts the workers a pass placed, without the lock; frees @list. */
void sched_run_launch(struct sched *s, struct sched_launch *list);
/* Places what fits (to be started by sched_run_launch), reaps what ended, enforces timeouts; returns the ms until the next deadline. */
int sched_run_pass(struct sched *s);
/* The threads that submit to a cluster executor; stop submits what is queued, then joins them. */
int sched_submitters_start(struct sched *s);
void sched_submitters_stop(struct sched *s);
/* Takes over the workers a previous daemon left running (after sched_store_load). */
void sched_run_adopt(struct sched *s);
int sched_run_cancel(struct sched *s, struct sched_job *j);
/* Forgets the ports of @j (already released to the node, or never held). */
void sched_job_ports_release(struct sched *s, struct sched_job *j);
/* The job's state from its workers'. */
void sched_run_update(struct sched *s, struct sched_job *j);

/* sched_launch.c */
/* Whether @j's workers get a view: the spec names data, and this mlfs can mount one. */
bool sched_has_view(const struct sched *s, const struct sched_job *j);
/*
 * Prepares the start of worker @w of @j, placed by a pass (under the lock):
 * its ports, a new attempt, what the executor is given; queued on
 * s->launches for sched_run_launch.  0 or -errno.
 */
int sched_launch_prepare(struct sched *s, struct sched_job *j, struct sched_worker *w);
/*
 * The output id of restart @restarts of a cluster worker whose output id is
 * @id (of @size bytes), as its batch script names it: ID.rN, any earlier
 * ".rN" replaced.
 */
void sched_rerun_output_id(char *id, size_t size, unsigned int restarts);

#endif
