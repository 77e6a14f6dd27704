/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluiced's file writer: the one thread that touches the state directory.
 *
 * The tick must never wait for a disk: a stalled state directory (a full or hung file system,
 * an audit log replaced by a FIFO) would otherwise stop the heartbeat, and the data path fails
 * open when the heartbeat is old. So the tick and the operator socket only change the switch
 * set in memory (which the next tick writes into the verdict map) and enqueue a job: the
 * changes, for the switch file, and the audit records. This thread takes the jobs in order:
 * lock the switch file, re-read it (another writer, or an edit of the ConfigMap, may have
 * changed it), apply the changes, save it, append the audit records. Between jobs it watches
 * the file: an edit made outside sluiced is loaded, audited as a diff (user "file", command
 * "file edit", one record per switch that differs, old -> new), and handed to the tick; so is
 * the sweep of expired switches (command "expire"). A job the disk refuses (no space, a lock
 * that cannot be taken) is reported, and its changes stay in force in memory.
 *
 * The tick collects what the thread found with iow_take(), which only copies under a mutex
 * that the thread never holds across I/O. A set the thread read is adopted only when it
 * includes every job the daemon has enqueued (iow_take's `sent` argument), so a write still
 * in the queue is never undone by an older read. */
#ifndef SLUICE_IOWRITER_H
#define SLUICE_IOWRITER_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include "ops/audit.h"
#include "ops/switches.h"

#define IOW_MAX_QUEUE   64      /* jobs waiting; beyond this changes are refused (iow_reserve) */
#define IOW_MAX_MSGS    16
#define IOW_MSG_LEN     1280
#define IOW_FAILS       16      /* the last jobs that could not be saved or audited */
#define IOW_HELD_MAX    256     /* audit records the log refused, kept to write later */

struct iow_change {
	char service[SLUICE_NAME_LEN];
	int cls;
	int present;                 /* 1: put sw; 0: clear (service, cls) */
	struct sw_switch sw;
};

struct iow_job {
	struct iow_job *next;
	uint64_t seq;
	int n_changes, n_audit;
	struct iow_change *changes;
	struct audit_entry *audit;
};

/* What the thread hands to the tick (see iow_take). */
struct iow_news {
	int have_set;                /* set holds the file's set (adopt it) */
	int external;                /* ... because the file was changed outside sluiced */
	int corrupt;                 /* the file is damaged: set is empty ("normal") */
	struct sw_set set;
	int n_expired;
	struct sw_switch expired[SW_MAX];
	int n_msgs;
	char msgs[IOW_MAX_MSGS][IOW_MSG_LEN];   /* errors to log and report */
};

struct iowriter {
	char state_dir[256];
	long group_gid;              /* owner group of the state dir and audit log; -1 none */
	int group_warned;            /* giving them to the group failed once: said so */
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct iow_job *head, *tail;
	int queued, stop, exited, first_read;
	uint64_t done_seq;           /* last job fully handled (file and audit) */
	unsigned long long busy_since_ns;   /* 0 when idle */
	struct { uint64_t seq; char why[IOW_MSG_LEN]; } fails[IOW_FAILS];   /* ring, by seq */
	struct iow_news *news;       /* guarded by mu; the tick takes it */
	uint64_t news_seq;           /* jobs included in news->set */
	/* the thread's own */
	struct sw_set *known;        /* what the file held when last read or written */
	int unsaved;                 /* known holds changes the file refused: it is the truth */
	int known_unread;            /* known was emptied by a read of the file that failed: it is
				      * not the file's set, and nothing is saved from it */
	unsigned long long resave_ns;   /* when saving them was last tried (monotonic) */
	struct audit_entry *held;    /* records the audit log refused, oldest first */
	int n_held;
	unsigned long long reaudit_ns;  /* when writing them was last tried (monotonic) */
	int sweep_warned;            /* an expiry sweep could not open the file: said so */
	int load_failed;             /* the last read of the file failed: tried again each second */
	int fail_audited;            /* ... and the switches it put out of force were audited */
	unsigned long long reload_ns;   /* when it was last read after a failure (monotonic) */
	unsigned long long retry_ns;    /* how often what failed is tried again: 0 = each second
					 * (set after iow_start; the tests shorten it) */
	char load_err[1024];         /* what that failure said (said once, while the same) */
	struct iow_job *spare;       /* the enqueuer's: the job iow_reserve made room for */
	int have_file;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
};

/* Start the thread; it reads the switch file first. group_gid: chown the state dir (0750)
 * and the audit log (0640) to root:group_gid when >= 0. Waits up to wait_ms for that first
 * read so a restart keeps shedding from its first tick. 0, or -1 with err. */
int iow_start(struct iowriter *w, const char *state_dir, long group_gid, int wait_ms,
	      char *err, size_t errlen);
/* Ask the thread to end and wait up to wait_ms (a thread stuck in a stalled file system is
 * left behind: the process is exiting). */
void iow_stop(struct iowriter *w, int wait_ms);

/* Take a place for the next job before changing anything in memory: 0 when the next
 * iow_enqueue is sure to take its job, -1 with err when the queue is full (a slow or stuck
 * disk) or memory ran out; the caller then refuses the change and changes nothing. A change
 * made in memory with no job would be undone by the thread's next news (a set that does not
 * count it), without a word. Called by the thread that enqueues, as iow_enqueue. */
int iow_reserve(struct iowriter *w, char *err, size_t errlen);

/* Enqueue a job (ownership of changes/audit passes to the writer; they are malloc()ed).
 * Returns its sequence number (> 0), or 0 when the queue is full or memory ran out (nothing
 * enqueued; the caller frees them). Never 0 after iow_reserve returned 0. */
uint64_t iow_enqueue(struct iowriter *w, struct iow_change *changes, int n_changes,
		     struct audit_entry *audit, int n_audit);

/* Take what the thread found since the last call into *out (out->have_set only when its set
 * includes job `sent`, the last one enqueued). Never blocks on I/O. */
void iow_take(struct iowriter *w, uint64_t sent, struct iow_news *out);

/* Whether job seq (already done) failed to reach the disk: 1 and why, or 0. A change the file
 * did not take stays in force in memory (the set the thread hands back keeps it). */
int iow_job_failed(struct iowriter *w, uint64_t seq, char *why, size_t len);

/* The last job fully written, and for how long the thread has been busy with the current
 * batch (0 when idle). */
void iow_progress(struct iowriter *w, uint64_t *done_seq, unsigned long long *busy_ns,
		  int *queued);

#endif
