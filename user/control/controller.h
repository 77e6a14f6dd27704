/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* One service's controller: composes signals, the evidence window, the baseline, the limit
 * (gradient or AIMD), breaker, ladder, headroom and the retry-storm detector into the verdict
 * BPF enforces. Pure over its inputs and the clock (no map I/O), so sluiced and the tests drive
 * it the same way.
 *
 * The objective: keep the latency of the highest busy classes within the objective --
 * latency_slo x the unloaded baseline (1.2x), or an absolute latency -- while the backend stays
 * busy. The limit steers the service's latency to the aim (half way from the baseline to the
 * objective); the ladder cuts the lowest classes when the objective has been missed for a
 * window's time and the limit cannot help: the limit is fixed or at its floor, it did not cut,
 * or the objective has been missed for takeover_ns (2 windows) in a row. So while latency stays above the objective
 * the limit keeps moving or the ladder takes over, never neither. Neither cuts what cannot
 * help: the limit is not cut below the concurrency latency was found not to respond to
 * (control/limit.h, the evidence floor), and the ladder cuts L0 -- the last resort, after
 * L1..L3 -- only while the backend is saturated (its listen queue saturated, or the last
 * window's in-flight reached the limit or the limit refused L0). A tcp service with an
 * adaptive limit does not hold L0's connections to the limit at all (the limit shapes
 * L1..L3), and cuts L0 only once its listen queue is saturated past a quarter of the backlog
 * (controller.c, tcp_l0_unheld). Any service with an adaptive limit and adaptive headroom
 * gives L0 room above the limit while L0 alone fits in what the backend has served
 * (control/headroom.h, sluice_headroom_l0_room): a limit cut for the lower classes' overload
 * does not refuse L0. */
#ifndef SLUICE_CONTROLLER_H
#define SLUICE_CONTROLLER_H

#include <stddef.h>
#include "sluice.h"
#include "common/config.h"
#include "control/events.h"
#include "control/signals.h"
#include "control/window.h"
#include "control/baseline.h"
#include "control/limit.h"
#include "control/breaker.h"
#include "control/ladder.h"
#include "control/headroom.h"
#include "control/retrystorm.h"
#include "control/cascade.h"
#include "control/listenq.h"
#include "control/waitknee.h"

struct service_ctl {
	/* In the order a tick touches it: everything from the baseline's value to brk.ring every
	 * tick (parameters, machines, last counters, signals, status), of the breaker's, the
	 * peaks' and L0's rings a few buckets, the window's histograms and the last histograms
	 * only when a window starts or ends, or a class moved. The baseline comes first: its
	 * ring is read and written only when a window is decided, so the tick's block (what
	 * service_ctl_prefetch asks for) starts after it, at its value (the objective, every
	 * tick). base_little and base_mean, read and written with it, come before it. */
	struct sluice_baseline base_little;  /* the same windows' in-flight / completion rate
	                                      * (Little's law) and their samples' mean: the
	                                      * limit's queue signal (limit_signal in
	                                      * controller.c); kept only while sluiced runs:
	                                      * relearned after a restart */
	struct sluice_baseline base_mean;
	struct sluice_baseline base;
	struct sluice_limit_params mp;
	struct sluice_breaker_params bp;
	struct sluice_ladder_params lp;
	struct sluice_headroom_params hp;
	struct sluice_retrystorm_params rp;
	double slo_ratio;             /* objective = ratio x baseline ... */
	double slo_abs_us;            /* ... or this, when > 0 */
	double quantile;              /* the latency signal: 0.5 */
	uint64_t window_ns, min_samples, none_ns, takeover_ns;
	uint64_t tick_ns;             /* the daemon's tick (control_interval_ms) */
	int fixed_headroom;
	int l0_written;               /* the config wrote L0's headroom percentage: a cap */
	int slow_call_under;          /* the objective (learned) is above the breaker's slow_call:
	                               * said once, as an alert, when it crosses */

	struct sluice_limit lim;
	struct sluice_ladder lad;
	struct sluice_retrystorm rs;
	struct sluice_listenq lq;     /* the kernel's listen queue (control/listenq.h) */
	int have_prev;
	uint64_t prev_ns;
	uint64_t qspan_ns;            /* the last tick that read every histogram that moved: the
	                               * tick's quantiles and sample rates are of the samples
	                               * since then (see ctl_inputs, hist_deferred) */
	struct sluice_class_stats prev[SLUICE_NUM_CLASSES];
	struct sluice_service_signals sig;    /* last tick's signals, for status and metrics */
	uint32_t peaks[SLUICE_NUM_CLASSES];
	/* Worked out again only when they can have changed: peaks over the last 10 s when the
	 * second turns (within one, a tick can only raise them), L0's proven completion rate
	 * over the last 30 s when the second turns or a window recorded a rate. The second they
	 * are of, plus 1 (0: not worked out yet). */
	uint64_t peaks_sec;
	uint64_t served_sec;
	double served_max;

	/* for status and metrics */
	int signal;                   /* enum sluice_signal_state */
	double objective_us;          /* 0 = not known yet (no baseline) */
	double aim_us;
	double last_latency_us;       /* last decided window: the service's signal */
	double last_top_us;           /* ... and the highest busy classes' */
	uint64_t last_samples;
	uint64_t windows;             /* decided windows */
	uint64_t above_since_ns;      /* objective missed since (decided windows), 0 = met */
	uint64_t dead_until_ns;       /* samples before this show the limit before the last cut */
	uint64_t read_gate_until_ns;  /* http: the read gate stays armed until then (0 = never
	                               * armed): SLUICE_READ_GATE_HOLD_NS after the last tick whose
	                               * reads waited SLUICE_READ_GATE_AGE_NS on average */
	int ladder_on_latency;        /* the last decision handed latency to the ladder */
	int saturated;                /* the last decided window: in-flight reached the limit, or
				       * the limit refused L0 */
	uint32_t prev_inflight[2];    /* in-flight at the last two ticks (the throughput cut) */
	int draining;                 /* a throughput cut's backlog is still in flight ... */
	uint32_t drain_l0;            /* ... and L0's threshold meanwhile: the limit before it */
	uint64_t drain_until_ns;      /* the drain ends by then at the latest */
	double last_rate;             /* completions per second of the last decided window */
	int little_spent;             /* a throughput cut was made in the descent under way */
	double calm_peak;             /* recent peak in-flight: each window's, decaying x 0.8 */
	int calm_set;                 /* the limit was last set in calm (no cut since) ... */
	uint64_t calm_cuts;           /* ... when the limit's count of cuts was this */

	struct sluice_breaker brk;    /* its head every tick, of its ring the window's seconds */
	/* of their rings a tick touches this second's bucket, and L0's averages at the end of
	 * l0room; the rest when the second turns */
	struct sluice_peak peak;
	struct sluice_l0room l0room;  /* L0's room under an adaptive limit (control/headroom.h) */
	struct sluice_evwin win;      /* its counters every tick, its histograms last */
	struct sluice_baseline_params blp;   /* when a window is decided */
	struct sluice_baseline_params llp;   /* ... and base_little's, base_mean's */
	struct sluice_hist prev_h[SLUICE_NUM_CLASSES];  /* the classes that moved */
	/* the wait before the server reads (control/waitknee.h): read every tick while the probe
	 * runs, decided on with the window; kept only while sluiced runs */
	struct sluice_wait_stats prev_wait;   /* the probe's counters at the last tick */
	int have_prev_wait;
	uint64_t prev_gate_refused;   /* the read gate's refusals at the last tick that read them */
	int have_prev_gate;
	struct sluice_waitknee wk;
	struct sluice_waitknee_params wp;
	/* the breaker's counts by class (control/breaker.h): this second's bucket every tick;
	 * kept only while sluiced runs (the saved record has no room for them) */
	struct sluice_brk_classes brk_cls;
};

/* What the maps say this tick. */
struct ctl_inputs {
	struct sluice_class_stats stats[SLUICE_NUM_CLASSES];
	struct sluice_hist hist[SLUICE_NUM_CLASSES];
	struct sluice_inflight inflight;
	uint32_t switch_admit[SLUICE_NUM_CLASSES];   /* SLUICE_PROB_ONE = no switch */
	struct sluice_listenq_input listen;          /* the service's accept queue this tick */
	unsigned hist_same;          /* bit c: class c's histogram did not move since the last
	                              * tick (the caller did not read it, hist[c] need not be
	                              * filled in: the last tick's is used); 0 = read them all */
	const struct sluice_hist *hist_at[SLUICE_NUM_CLASSES];
	                             /* not NULL: class c's histogram is there instead of in
	                              * hist[c] (the daemon's reader holds it: not copied) */
	unsigned hist_deferred;      /* bit c: class c has new latency samples but the caller did
	                              * not read its histogram (hist[c] not filled in): they stay
	                              * in the cumulative histogram and are counted, with their
	                              * quantiles, by the next tick that reads it. Only when
	                              * service_ctl_quantile_hold allowed it; 0 = none */
	struct sluice_wait_stats wait;  /* cumulative waits before the server's first read
	                              * (user/kernel/readwait.h), read when wait_have */
	int wait_have;                /* the wait probe runs: 0 = no wait signal this tick */
	uint64_t gate_refused;        /* cumulative read-gate refusals, all classes (struct
	                              * sluice_unread), read when gate_have: the caller reads
	                              * them while the verdict in force arms the gate */
	int gate_have;
};

void service_ctl_init(struct service_ctl *s, const struct service_conf *sc,
		      const struct sluice_config *cfg, uint64_t seed, uint64_t now_ns);
/* 0 until a tick had the read gate's refusal counts (ctl_inputs.gate_have): the caller reads
 * them once before the gate is first armed, then only while it is. */
static inline int service_ctl_gate_counted(const struct service_ctl *s)
{
	return s->have_prev_gate;
}
/* New config for the same service: keeps learned state (limit, baseline, breaker). */
void service_ctl_reconfigure(struct service_ctl *s, const struct service_conf *sc,
			     const struct sluice_config *cfg);
/* Operator: forget the baseline (relearned from the next qualifying windows). */
void service_ctl_reset_baseline(struct service_ctl *s);

/* One tick: returns the verdict to write. `suppressed` comes from the cascade detector;
 * *opened is set when the breaker went CLOSED -> OPEN (the caller feeds the detector).
 * The first tick after init or import only takes a snapshot of the cumulative counters (no
 * decision: they are not one tick's delta) and writes the verdict of the state in force. */
void service_ctl_tick(struct service_ctl *s, const struct service_conf *sc,
		      const struct ctl_inputs *in, int suppressed, uint64_t now_ns,
		      const struct sluice_event_sink *sink, struct sluice_verdict *out, int *opened);

/* ---- State across restarts ----
 * Everything the loop learned, as one plain struct (fixed layout, no pointers) the daemon can
 * keep in a pinned map: the limit, baseline, ladder and breaker machines as they are (each is
 * plain data already). Times are
 * CLOCK_MONOTONIC ns, valid while the host has not rebooted (pinned maps do not survive one
 * either); an import clamps any time in the future to now. */
#define SLUICE_CTL_STATE_VERSION 4

struct sluice_ctl_state {
	uint32_t version;             /* SLUICE_CTL_STATE_VERSION */
	uint32_t size;                /* sizeof(struct sluice_ctl_state): any other layout refuses,
	                               * but versions 2's and 3's, this one's prefixes */
	uint64_t exported_ns;
	uint64_t above_since_ns;
	struct sluice_limit lim;
	struct sluice_baseline base;
	struct sluice_ladder lad;
	struct sluice_breaker brk;
	/* since version 3: the baselines of in-flight / rate and of the responses' mean, by which
	 * the limit sees a queue the median does not (their rings do not fit the pinned record:
	 * their values, each a ring of one window again). A restart during an overload could not
	 * learn them afresh (a saturated window may not raise a baseline). 0 = not learned. */
	double base_little_us;
	double base_mean_us;
	/* since version 3, for status only: the last decided window's latency of the highest
	 * busy classes, the one the objective is judged on (0 = none decided yet) */
	double top_class_us;
	/* since version 4, the node's, not the controller's: when the cascade suppression of
	 * breakers in force as the record was written began (control/cascade.h), 0 = none. It
	 * lasts until an operator lifts it (or suspend_s), not until sluiced restarts: the daemon
	 * writes it into every service's record (ctl_slot_set_cascade) and a restarted one takes
	 * it from the newest record it adopts (daemon_ctl_import). */
	uint64_t cascade_since_ns;
};
/* What version 2 wrote: the same record up to the version 3 fields (adopted, those unlearned). */
#define SLUICE_CTL_STATE_V2_SIZE offsetof(struct sluice_ctl_state, base_little_us)
/* What version 3 wrote: up to the version 4 field (adopted, no cascade suppression known). */
#define SLUICE_CTL_STATE_V3_SIZE offsetof(struct sluice_ctl_state, cascade_since_ns)

void ctl_state_export(const struct service_ctl *s, uint64_t now_ns, struct sluice_ctl_state *out);
/* The record's version when this sluiced adopts it (SLUICE_CTL_STATE_VERSION, or 2 or 3 for
 * those versions' records, this one's prefixes), else 0. */
int ctl_state_adoptable(const struct sluice_ctl_state *st);
/* Adopt `st` into a controller initialised for the same service. Returns 0, or -1 (nothing
 * changed) when the version or size does not match. */
int ctl_state_import(struct service_ctl *s, const struct sluice_ctl_state *st, uint64_t now_ns);
/* Adopt only what `st` learned of the backend (the baselines: the unloaded latency, mean and
 * queue), not what it decided (limit, ladder, breaker, objective missed): for a record too old
 * to say anything of the traffic now. Returns 0, or -1 as ctl_state_import. */
int ctl_state_import_learned(struct service_ctl *s, const struct sluice_ctl_state *st,
			     uint64_t now_ns);

/* Ask the CPU for the parts of s a tick reads and writes (hints only, no effect on the
 * result): the tick runs the services one after the other, each's state in lines of its
 * own 18 KB (18,392 bytes, of which a steady tick touches about 3 KB), so asking for the
 * next ones' while one runs hides most of the cache misses.
 * now_ns: the tick's clock (which of the breaker's buckets it reads). */
void service_ctl_prefetch(const struct service_ctl *s, uint64_t now_ns);
/* The same for the last tick's histograms of the classes in mask (bit c: class c), the ones
 * the next tick will read (its delta reads them, the snapshot writes them): 14 lines each,
 * asked for only for the classes whose histogram moved. */
void service_ctl_prefetch_hists(const struct service_ctl *s, unsigned mask);

/* The number of new latency samples below which the next tick (at next_ns) may leave the
 * histograms unread (ctl_inputs.hist_deferred): a tick's quantiles from one or two samples
 * decide nothing (every per-tick use of them asks for 5 or more, or for a window's worth),
 * so a service in calm lets them gather over a few ticks and its histograms are read, and
 * its quantiles taken, once there are this many. 0: read them whenever they moved -- the
 * ladder, the breaker, the objective or a cut's dead time are under way, whose per-tick
 * steps ask for every tick's evidence. A window due (its time is up) asks for the samples
 * it lacks, at least 1: it decides when it would have with every histogram read. */
uint32_t service_ctl_quantile_hold(const struct service_ctl *s, uint64_t next_ns);
#define SLUICE_QUANTILE_HOLD 5

/* 1 when no clock-driven change is pending: a tick without traffic would leave the state and
 * the verdict as they are (breaker closed, ladder admitting everything, nothing gathered in
 * the evidence window, objective not missed, no retry-storm window under way). The daemon skips such a
 * service while its counters and in-flight stay the same. */
int service_ctl_settled(const struct service_ctl *s);

#endif
