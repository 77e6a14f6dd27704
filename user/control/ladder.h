/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Priority ladder of one service: per-class admit probability.
 *
 * Shedding (an overloaded decision; the controller decides once per evidence window, so cuts
 *   are paced by the feedback delay, and never closer than shed_interval_s): the victim is the
 *   lowest class (L3, then L2, then L1) that still admits something and has demand. Its admit
 *   fraction loses cut[k] x s, s = clamp(excess / full_excess, 0.05, 1) where excess is how far
 *   the latency of the highest busy classes is above the objective (0.25 = 25 % above gives
 *   the full step; priority inversion gives the full step): the first steps are L3 -50 %, then
 *   L2 -30 %. A class below the first recovery step (10 %) goes to 0. L0 is cut only when
 *   L1..L3 are all at 0 or idle, never below l0_floor_pct, and not at all while the caller
 *   says it is spared (l0_spared: refusing the only class left cannot make it faster unless
 *   the backend is saturated).
 * Recovery on evidence: the highest-priority class below 100 % climbs to the next recovery step
 *   (10 -> 30 -> 50 -> 80 -> 100) once the current step has been held step_s (and at least
 *   the feedback delay) since the last change and the last overload AND has seen min_samples latency samples within the
 *   objective; no samples (no traffic), no climb. Reaching 100 % everywhere reports the
 *   recovery time (from the last overload) in the event.
 * Overload (sluice_ladder_overloaded): latency signal above the objective, or priority
 *   inversion: a class k lost more than rej_frac of its arrivals (and at least rej_min units)
 *   to headroom while a lower class still admitted traffic. The controller judges both over
 *   its evidence window, not per tick. */
#ifndef SLUICE_LADDER_H
#define SLUICE_LADDER_H

#include <stdint.h>
#include "sluice.h"
#include "common/config.h"
#include "control/events.h"

#define SLUICE_LADDER_MAX_STEPS 8

struct sluice_ladder_params {
	uint32_t steps[SLUICE_LADDER_MAX_STEPS];   /* percent: 10 30 50 80 100 */
	uint32_t n_steps;
	double step_s;                /* recovery hold: a service's recovery_step_s (0.5 s
	                               * unless configured); 5 s for a caller without one */
	double shed_factor;           /* 0.5 */
	double shed_interval_s;       /* 0.2: minimum time between two cuts */
	uint32_t l0_floor_pct;        /* 10: L0 is never shed below this */
	double rej_frac;              /* 0.02: headroom rejections that count as inversion ... */
	uint32_t rej_min;             /* 5: ... and at least this many (a decision needs evidence) */
	double cut[SLUICE_NUM_CLASSES];   /* full cut per class: 0.2 0.3 0.3 0.5 */
	double full_excess;           /* 0.25 */
	uint64_t min_samples;         /* 20: samples within the objective a recovery step needs */
};

struct sluice_ladder_input {
	int overloaded;
	double excess;                                /* (latency - objective) / objective; < 0 or
						       * inversion: the full step */
	uint64_t demand[SLUICE_NUM_CLASSES];          /* arrivals this tick */
	uint64_t good_samples;                        /* this tick's samples within the objective */
	double feedback_s;                            /* the loop's delay (2 x latency): a step is
						       * held at least this long */
	int l0_spared;                                /* L0 may not be cut: the backend is not
						       * saturated (controller.h) */
};

/* Inputs of the overload decision. */
struct sluice_overload_input {
	double latency_us, target_us;                 /* target 0 = unknown: ignored */
	uint64_t arrivals[SLUICE_NUM_CLASSES];
	uint64_t headroom_rej[SLUICE_NUM_CLASSES];
};

/* What the ladder does with a class, as its events name it (SLUICE_LADDER_STATE_TABLE). */
#define SLUICE_X_LADDER_ENUM(id, ...) SLUICE_LADDER_##id,
enum sluice_ladder_state { SLUICE_LADDER_STATE_TABLE(SLUICE_X_LADDER_ENUM) };

struct sluice_ladder {
	uint32_t admit[SLUICE_NUM_CLASSES];           /* fixed point, SLUICE_PROB_ONE = all */
	uint64_t last_change_ns;
	uint64_t last_cut_ns;
	uint64_t last_overload_ns;
	int overloaded;                               /* last input, for metrics */
	int cut_once;                                 /* a cut happened (last_cut_ns valid) */
	uint64_t step_good;                           /* good samples since the last change */
	uint64_t episode_ns;                          /* first cut of the current episode, 0 none */
	double last_recovery_s;                       /* last overload -> all classes at 100 % */
	double last_episode_s;                        /* first cut -> all classes at 100 % */
};

void sluice_ladder_params_default(struct sluice_ladder_params *p);
void sluice_ladder_params_from_conf(const struct service_conf *sc, struct sluice_ladder_params *p);

void sluice_ladder_init(struct sluice_ladder *l, uint64_t now_ns);

/* 1 when the inputs say the service is overloaded (rule above); why gets a static reason. */
int sluice_ladder_overloaded(const struct sluice_ladder *l, const struct sluice_ladder_params *p,
			     const struct sluice_overload_input *in, const char **why);

/* One tick. Returns 1 when any class's admit fraction changed. */
int sluice_ladder_tick(struct sluice_ladder *l, const struct sluice_ladder_params *p,
		       const struct sluice_ladder_input *in, uint64_t now_ns,
		       const struct sluice_event_sink *sink);

#endif
