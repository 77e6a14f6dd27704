/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluiced's state and its tick: everything between "the maps say" and "the maps get".
 * One struct holds all mutable state (no globals); sluiced.c owns only the process plumbing
 * (arguments, signals, the wait loop). */
#ifndef SLUICE_DAEMON_H
#define SLUICE_DAEMON_H

#include <pthread.h>
#include <stdio.h>
#include "common/config.h"
#include "kernel/bpfmaps.h"
#include "control/controller.h"
#include "control/cascade.h"
#include "control/conncap.h"
#include "daemon/metrics.h"
#include "ops/switchstate.h"
#include "daemon/iowriter.h"
#include "daemon/uidnames.h"
#include "daemon/evstream.h"
#include "kernel/sockdiag.h"
#include "kernel/flowgc.h"
#include "kernel/readwait.h"
#include "daemon/node.h"

struct reload_job;

/* Per-service bookkeeping beyond the controller: the five measures and reply state. */
struct service_books {
	double ew_arrivals, ew_ok, ew_retrans;   /* 60 s exponentially weighted sums */
	double overload_s, managed_s;
	unsigned long long opens, false_opens;
	int prev_state, reopened;                /* breaker state last tick; HALF_OPEN -> OPEN seen */
	unsigned retry_after_written;
	unsigned long long degr_actions, degr_effective;
	int sw_active[SLUICE_NUM_CLASSES], sw_effective[SLUICE_NUM_CLASSES];
	/* The tick's shortcut: the verdict last written, and whether the service is quiet (its
	 * last tick saw no counter change, left the verdict as it was and found the controller
	 * settled): a quiet service is skipped while its counters and switches stay the same
	 * (its in-flight cannot move without a counter, but for a GC release, which clears it). */
	struct sluice_verdict written;
	int have_written, quiet, overloaded;
	int ran;                                 /* the controller ran this tick */
	/* The controller has ticked since it was made or adopted its pinned state (its first
	 * tick reads every histogram): what the tick knows of it without touching its state. */
	int primed;
	unsigned hist_want;                      /* the classes whose histogram this tick reads */
	unsigned hist_held;                      /* ... and those that moved but wait */
	unsigned long long hist_want_tick;       /* ... as worked out at tick d->ticks + 1 */
	/* The controller's quantile hold after its last tick (service_ctl_quantile_hold): new
	 * latency samples below this many wait in the maps, for at most HIST_HOLD_TICKS ticks
	 * in a row (held_ticks). */
	unsigned qhold, held_ticks;
	/* The service's own tick among every HIST_HOLD_TICKS + 1 (its held histograms are read)
	 * and among the ticks of a second (its ctl_state refresh), both from its slot, worked
	 * out for slot turn_slot - 1 and turn_per_s ticks a second (a division each, not per
	 * tick). */
	unsigned hist_turn, ctl_turn, turn_slot, turn_per_s;
	unsigned ctl_reset_ack;                  /* last baseline reset request done */
	unsigned long long ctl_ticks;            /* ticks, as written to the ctl_state entry */
	/* The ctl_state entry is rewritten when what the loop decided moved (this key: the
	 * limit, the ladder, the breaker, the objective missed, a baseline reset), else by the
	 * refresh (daemon_ctl_export_tick: at the service's own tick of the second when it
	 * carries something material, at least every 10 s): a 3.7 KB write per running service
	 * and tick was a fifth of the tick. A decided window that moved none of these (the
	 * baseline's ring, the limit's estimate) and the latency signal's state (shown by
	 * status: ok, thin, none) wait for the refresh: with every service busy they were a
	 * third and a fifth of the writes. */
	struct ctl_export_key {
		uint64_t lad_change_ns, brk_since_ns, brk_step_start_ns, above_since_ns;
		uint32_t limit, brk_state, brk_step, reset_ack;
		uint32_t admit[SLUICE_NUM_CLASSES];
	} exported;
	unsigned long long exported_ns;          /* 0 = never written */
	uint64_t exported_windows;               /* decided windows, and the latency signal's */
	int exported_signal;                     /* state, at the last write */
	uint64_t hist_samples[SLUICE_NUM_CLASSES];  /* latency samples the controller's last
	                                          * histograms held, per class */
	/* http: the lower classes' connection cap (control/conncap.h) */
	struct sluice_conncap conncap;
	int conns_unreadable;                    /* its open connections could not be read
	                                          * (said once) */
};

struct daemon {
	struct sluice_config cfg;
	char cfg_path[512];
	char pin_override[256];                  /* --pin-dir: wins over every config's pin_dir */
	char *cfg_text;                          /* bytes of the config in force, to spot changes */
	size_t cfg_len;
	struct sluice_maps m;
	struct readwait rw;                      /* the wait before the server reads (optional,
	                                          * loaded by main after the data path; off:
	                                          * rw.stats NULL) */
	/* Per service, cfg.n_services of each, on the heap (14 KB a service). */
	int *idx;                                /* map index of cfg.services[i] */
	int *hot;                                /* the tick's slots to read (in idx's block) */
	struct service_ctl *ctl;
	struct service_books *books;
	struct maps_reader rd;                   /* the tick's batched reads */
	/* The tick's writes, put while the controllers run and written in a batch syscall or a
	 * few (tag: the service): verdicts that changed, ctl_state entries due. */
	struct maps_batch vwb, cwb;
	struct recon_state recon;                /* in-flight against the flow table (flowgc.h) */
	/* The operators' requests (ctl_requests): a slice of the slots looked at each tick. With
	 * ctl_rq_listed >= 0 the kernel found the slice's pending ones: ctl_rq holds those, their
	 * slots in ctl_rq_keys; with -1 the whole slice was read, slot first + k at ctl_rq[k]. */
	struct sluice_ctl_request *ctl_rq;
	__u32 *ctl_rq_keys;
	int ctl_rq_listed;
	struct acceptq_want *aq_want;            /* the listeners asked for, per service (built
	                                          * from cfg when NULL) */
	struct acceptq_reader aqr;               /* their reader (socket, port index) and ... */
	struct acceptq *aq_buf;                  /* ... its answer, kept from tick to tick: the
	                                          * services' listen queues, by service (apart
	                                          * from the books: a reading touches only
	                                          * these, 12 bytes a service) */
	uint8_t *aq_alert;                       /* by service: its queue over half the backlog
	                                          * was reported */
	int aq_queued;                           /* some listen queue held connections at the
	                                          * last read (read every tick while so) */
	int aq_fresh;                            /* the services changed: read at this tick */
	/* This tick's turns (struct service_books, hist_turn and ctl_turn): worked out once a
	 * tick from the tick count. */
	unsigned ticks_per_s, hist_turn_now, ctl_turn_now;
	int ctl_rq_first, ctl_rq_n, ctl_rq_next, ctl_rq_cap;
	unsigned long long ticked, skipped;      /* services run / skipped by the tick, in all */
	struct sluice_cascade_params cp;
	struct sluice_cascade cascade;
	uint64_t cascade_written;                /* the suppression the ctl_state entries carry:
	                                          * since when, 0 = none (ctlpersist.h) */
	struct daemon_node node;                 /* node-wide arbitration (off by default) */
	struct switch_state sw;                  /* the set in force (sw.set); only the tick and
	                                          * the operator socket, one thread, touch it */
	struct iowriter iow;                     /* the state directory's one writer */
	struct uid_names names;                  /* operators' user names, looked up off the
	                                          * control loop (uidnames.h) */
	uint64_t sw_sent;                        /* last writer job enqueued */
	struct iow_news news;                    /* what the writer found, taken each tick */
	unsigned long long ticks;                /* ticks done */
	int switch_error_logged;
	int counters_unreadable;                 /* the tick cannot read them: said so */
	struct sluice_globals globals;           /* as last read: where the programs are attached */
	int have_globals, globals_failed;        /* ... read once; reading or writing failed: said */
	unsigned long long beat_ns, beat_real_ns;   /* the heartbeat last written, and when */
	unsigned long long last_gc_ns, last_tick_ns, last_slow_ns;
	unsigned long long reloads_ok, reloads_failed;
	struct reload_job *reload;               /* a reload's parse under way (daemon.c) */
	int verbose;                             /* print debug-level events too */
	FILE *events;                            /* JSON lines, when evs is not on (tests) */
	struct evstream evs;                     /* JSON lines: stdout, never blocking the tick */
	/* The controller's side of /metrics is filled by the tick when a scrape asks for it
	 * (a scrape every few seconds; the tick ten times a second): the scrape sets mx_asked
	 * and waits for mx_gen to move. */
	pthread_mutex_t lock;                    /* guards the metrics copy below */
	pthread_cond_t mx_filled;                /* mx_gen moved (CLOCK_MONOTONIC waits) */
	int mx_asked;                            /* set by a scrape, cleared by the fill */
	unsigned long long mx_gen;               /* fills done */
	struct metrics_extra mx;
};

/* Set up controller state for the loaded config and program the maps; start the file writer
 * (it reads the switch file; waits for that at most half a second). Adopting a live data path
 * (a restart: the previous sluiced's heartbeat within its timeout), it keeps the heartbeat
 * fresh as it goes; otherwise it writes the first one at its end. */
int daemon_init(struct daemon *d, unsigned long long now_ns, char *err, size_t errlen);

/* One control tick: reads every service's counters in one batch, runs the controller for the
 * services whose counters, in-flight or switches changed (or whose controller has a timer
 * under way), writes the verdicts that changed. */
/* Service i's turns (struct service_books: hist_turn, ctl_turn), worked out again when its
 * slot or the ticks a second changed. */
const struct service_books *daemon_service_turns(struct daemon *d, int i);
void daemon_tick(struct daemon *d, unsigned long long now_ns);

/* Between steps of long work over the services (a restart's adoption of the pinned state):
 * the heartbeat moved on by the time passed, once the last one written is 100 ms old. Nothing
 * until this daemon has written one (daemon_init). */
void daemon_beat_if_due(struct daemon *d);

/* Free what daemon_init allocated. */
void daemon_free(struct daemon *d);

/* Reload the config file if its bytes changed (force: even if not), all in this call. An
 * invalid file is refused with its errors on stderr and an event; the running config stays. Returns 1 when a
 * new config took effect, 0 when unchanged, -1 when refused. */
int daemon_reload(struct daemon *d, int force, unsigned long long now_ns);

/* The same, with the read and parse on a thread of their own: a config of 65,000 services
 * parses for seconds, and a tick that waited for it wrote no heartbeat meanwhile (the data
 * path failed open). The ticks go on; daemon_reload_finish, at a tick, applies the result
 * once the parse is over. Returns 0 (started, or done at once when no thread could be had),
 * 1 when one is under way already (nothing started: ask again after it), -1 refused. */
int daemon_reload_start(struct daemon *d, int force, unsigned long long now_ns);
/* Whether a reload's parse is under way or waits to be applied. */
int daemon_reload_busy(const struct daemon *d);
/* Apply the reload started, if its parse is over: as daemon_reload returns; 0 also while it
 * runs or when none was started. */
int daemon_reload_finish(struct daemon *d, unsigned long long now_ns);
/* Wait for the reload under way, if any, and drop it (at the end). */
void daemon_reload_wait(struct daemon *d);

/* Emit a daemon-level event (attach, reload, switch expiry...) as one JSON line; machine is
 * an enum sluice_ev_machine. */
void daemon_event(struct daemon *d, int machine, const char *from, const char *to,
		  const char *why, const char *service, int level);

/* Where the controllers' events about `service` go (stdout, as JSON lines). */
struct sluice_event_sink daemon_sink(struct daemon *d, const char *service);

/* Stop the file writer (at most wait_ms: a thread stuck in a stalled file system is left). */
void daemon_fini(struct daemon *d, int wait_ms);
/* Print a controller-style event built by the caller (a JSON line with wall time). */
void daemon_print_event(struct daemon *d, const struct sluice_event *ev);

/* Send the event lines to fd (stdout) through d->evs, never blocking the tick (evstream.h).
 * Returns 0, or -errno: the lines then go to d->events as they did. */
int daemon_events_open(struct daemon *d, int fd);
/* Write out the lines that wait (each tick); when a run of drops ends, say how many. */
void daemon_events_flush(struct daemon *d);
/* At exit: write out what waits, waiting for the reader at most wait_ms. */
void daemon_events_close(struct daemon *d, int wait_ms);

void daemon_print_event(struct daemon *d, const struct sluice_event *ev);

/* Body for /metrics (called from the HTTP thread). */
int daemon_metrics_body(void *ctx, char **body, size_t *len);

/* The config file's text (NUL-terminated, malloc'd) read as --check reads it, or NULL with the
 * reason in errs (initialised here for path). */
char *daemon_read_config(const char *path, size_t *len, struct doc_errors *errs);

#endif
