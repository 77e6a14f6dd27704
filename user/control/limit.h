/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Concurrency limit of one service, decided once per evidence window (control/window.h).
 * Inputs per window: the latency signal, the aim (where the limit steers latency: half way
 * from the baseline to the objective, so that the spread around it stays within the
 * objective), the objective itself, and the peak in-flight of the window.
 *
 * gradient (the default):
 *   g = clamp(aim / latency, min_gradient (0.5), 1)
 *   g < 1                      -> limit x g (proportional to the excess; any window, also one
 *                                 closed early on overload evidence); the first cut ever, when
 *                                 the limit did not bind (no refusals, peak in-flight below
 *                                 it) and the latency is above the objective: peak in-flight
 *                                 x g instead (a cut of a limit that did not bind would not)
 *   g = 1, full window, the limit refused units or peak in-flight >= gate (0.5) x limit
 *                              -> limit + max(1, sqrt(limit)) far from the knee (latency at
 *                                 the baseline, or peak in-flight below 0.75 x limit: the
 *                                 refusals were the lower classes' thresholds), else + 1
 *   g = 1, full window, peak below that (application-limited: no evidence more helps)
 *                              -> down at once to max(calm_margin (2) x the recent peak,
 *                                 calm_min (16)) (follow demand: a surge meets a limit near
 *                                 what the traffic used, not a cold start's 0.3 x max that
 *                                 lets a whole surge into the backend's queue ahead of L0;
 *                                 twice the peak sampled at ticks leaves room for the bursts
 *                                 between ticks and the burst margins of the headroom).
 *                                 With calm_margin 0 the old rule: after calm_windows (10) in
 *                                 a row, max(limit x 0.9, 4 x max(peak, 4)).
 *   fast growth (sluice_limit_grow, per tick, the caller decides when): a limit set in calm
 *   that binds while the backend serves what it admits within the aim is below the knee: it
 *   grows by sqrt(limit) per tick instead of per window, so following the demand down does
 *   not throttle a healthy service whose load rises for long
 * aimd (`limit_algorithm: aimd` is the classic rule: classic_band, no gate; the gated
 * variant, measured against the gradient in the simulations, is aimd_gate 0.8 and the aim):
 *   latency > objective        -> limit x 0.5
 *   latency < grow_below, full window, the limit refused units or peak in-flight >=
 *   aimd_gate (0.8) x limit     -> limit + 1
 *   grow_below = the aim (0.7 x objective with classic_band); aimd_gate 0 = no gate.
 * Neither grows while the service's listen queue is saturated (control/listenq.h).
 * The evidence floor (both algorithms): a cut is judged by the windows after it. The window
 *   before the first cut of a descent is the reference (its peak in-flight c1, latency l1,
 *   completion rate; the last tick's rate and median where higher, as a window that began in
 *   calm dilutes them);
 *   the first later window whose peak in-flight fell to judge_drop (0.85) x c1 or below
 *   judges it (or, the peak not falling, the first one in which the limit refused units and
 *   the completion rate fell by 1 - judge_drop or more: the rate's fall is then the
 *   concurrency shed, since a peak sampled at ticks misses short turns): when the latency fell by less than respond_frac (0.5) of the concurrency's
 *   fall and the completion rate fell by more than respond_frac of it, latency does not
 *   respond to concurrency there (the backend is at or below its knee, or what makes it
 *   slow is not the work the limit counts), so cutting more only refuses work. (The rate
 *   keeps a draining backlog from reading as no response: a cut above the knee removes
 *   queue, the backend completes as fast as before while the samples still carry the old
 *   queue's wait.) Then the descent is undone and the limit is not cut below
 *   floor = min(the estimate before the descent, c1 + max(2, c1 / 4)) (the burst margin a
 *   busy class keeps in the headroom; judged by refusals 2 x max(c1, limit)) for floor_hold_ns (30 windows); then one descent may
 *   test it again. A window within the aim ends the reference (the cuts helped).
 * Always clamped to [min, max]; fixed > 0 pins it. Without an aim (no baseline yet and no
 * absolute objective) the limit holds. Start: max(min, 0.3 x max). */
#ifndef SLUICE_LIMIT_H
#define SLUICE_LIMIT_H

#include <stdint.h>
#include "sluice.h"
#include "common/config.h"
#include "control/events.h"

enum { SLUICE_LIMIT_GRADIENT = 0, SLUICE_LIMIT_AIMD = 1 };

struct sluice_limit_params {
	int algorithm;                /* SLUICE_LIMIT_* */
	uint32_t min, max;            /* bounds; min >= 1 */
	uint32_t fixed;               /* > 0: static limit */
	double min_gradient;          /* 0.5 */
	double gate;                  /* 0.5 */
	double calm_decay;            /* 0.9 */
	uint32_t calm_windows;        /* 10 */
	double calm_floor;            /* 4: never below this x the peak in-flight (calm_margin 0) */
	double calm_margin;           /* 2: in calm, the limit follows this x the recent peak ... */
	double calm_min;              /* 16: ... but not below this; calm_margin 0 = the old rule */
	int fast_growth;              /* 1: sluice_limit_grow may grow (0 = off) */
	double aimd_gate;             /* 0.8; 0 = the classic rule without a gate */
	double dec_factor;            /* 0.5 */
	int classic_band;               /* aimd grows below 0.7 x objective (the classic band) */
	double judge_drop;            /* 0.85: a descent is judged once peak in-flight <= this x c1 */
	double respond_frac;          /* 0.5; 0 = no evidence floor */
	uint64_t floor_hold_ns;       /* 30 s (the controller: 30 windows) */
	int little;                   /* the throughput cut (http services: a request's latency is
	                               * its time in the backend; a tcp turn's need not be) */
	double cut_ratio;             /* 1.5: the throughput cut (sluice_limit_little); 0 = off */
	uint64_t cut_samples;         /* 20 (a service's min_samples): ... on a tick with at
	                               * least this many samples */
};

struct sluice_limit {
	double est;                   /* the estimate (fractional) */
	uint32_t limit;               /* in force */
	int last_dir;                 /* -1 cut, 0 hold, +1 grow (last decision) */
	uint32_t calm;                /* application-limited windows in a row */
	uint64_t decisions;
	uint64_t cuts;                /* decisions that cut for latency */
	/* the evidence floor (rule above) */
	double floor;                 /* 0 = none */
	uint64_t floor_until_ns;
	uint32_t ref_peak;            /* the reference before a descent, 0 = none */
	double ref_latency_us;
	double ref_est;
	double ref_rate;
	uint64_t unhelpful;           /* descents found not to lower latency */
};

struct sluice_limit_input {
	double latency_us;
	double aim_us;                /* 0 = unknown: hold */
	double base_us;               /* the unloaded baseline, 0 = unknown */
	double objective_us;
	uint32_t peak_inflight;
	int bound;                    /* the limit refused units in the window (it binds) */
	int full;                     /* a full window (growth needs one) */
	int queue_saturated;          /* the listen queue is saturated (control/listenq.h): more
	                               * concurrency would only wait there, no growth */
	int no_growth;                /* the wait before the server reads was just found at this
	                               * limit (control/waitknee.h): no growth */
	uint64_t samples;             /* for events */
	double rate;                  /* completions per second in the window (latency samples) */
	double calm_peak;             /* the recent peak in-flight (decaying over windows), 0 =
	                               * this window's peak */
	double tick_rate;             /* the last tick's completions per second and median: */
	double tick_latency_us;       /* the reference of a descent when the window began calm */
};

/* One tick's view for the throughput cut (sluice_limit_little). */
struct sluice_little_input {
	double rate;                  /* completions per second in the tick */
	uint32_t inflight_prev;       /* in-flight at the tick's start and the tick before (the
	                               * lower of the two) ... */
	uint32_t inflight;            /* ... and at its end */
	double tick_p50_us;           /* the median of the tick's own latency samples */
	uint64_t samples;             /* ... and their number */
	double window_rate;           /* completions per second of the last decided window */
	double aim_us, objective_us;
};

/* Defaults and the mapping from the config (limit bounds, fixed, algorithm). */
void sluice_limit_params_default(struct sluice_limit_params *p);
void sluice_limit_params_from_conf(const struct service_conf *sc, struct sluice_limit_params *p);
void sluice_limit_init(struct sluice_limit *l, const struct sluice_limit_params *p);
/* Config reload or import: keep the limit, clamped to the (new) bounds. */
void sluice_limit_reconfigure(struct sluice_limit *l, const struct sluice_limit_params *p);
/* The throughput cut, tick by tick (gradient only), ahead of the windows: a window's latency
 * samples lag behind the queue they measure (a request reports its wait when it completes), but
 * in-flight and the completion rate do not. By Little's law in-flight / rate is the time a unit
 * now spends in the service; when it is above cut_ratio (1.5) x the objective at three ticks
 * in a row (an overload, not a burst of arrivals) and the tick's own median is above the objective too, and the backend completes at least as fast as in the last decided window (more
 * arrivals than it serves, not a stall: a stall's rate would take the limit to the floor),
 * the limit goes at once to rate x aim: the concurrency at which the throughput the
 * backend just delivered is served within the aim. Never below the evidence floor or min;
 * the caller allows one per descent (the limit's reference of the descent cleared since).
 * Returns 1 when it cut (the caller starts a dead time: what is in flight now was admitted
 * under the old limit). */
int sluice_limit_little(struct sluice_limit *l, const struct sluice_limit_params *p,
			const struct sluice_little_input *in, uint64_t now_ns,
			const struct sluice_event_sink *sink);
/* Fast growth (gradient only): limit + sqrt(limit), unless a descent is under way. The caller
 * gives the tick's latency and in-flight for the event. Returns 1 when the limit grew. */
int sluice_limit_grow(struct sluice_limit *l, const struct sluice_limit_params *p,
		      double latency_us, uint32_t inflight, uint64_t now_ns,
		      const struct sluice_event_sink *sink);
/* A move decided beside the windows' rules (the wait before the server reads,
 * control/waitknee.h; gradient only, a fixed limit does not move): to v. Below the estimate it
 * is a cut (it counts as one, ends calm; the caller starts a dead time), never below the
 * evidence floor; above it, a restore. The event (why) carries the window's mean wait, the
 * allowance and the mean latency. Returns 1 when the limit changed. */
int sluice_limit_move(struct sluice_limit *l, const struct sluice_limit_params *p, double v,
		      const char *why, double wait_us, double allow_us, double mean_us,
		      uint64_t now_ns, const struct sluice_event_sink *sink);
/* One decided window. Returns the limit in force. */
uint32_t sluice_limit_decide(struct sluice_limit *l, const struct sluice_limit_params *p,
			     const struct sluice_limit_input *in, uint64_t now_ns,
			     const struct sluice_event_sink *sink);

#endif
