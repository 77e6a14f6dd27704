/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Priority ladder of one service: per-class admit probability.
 *
 * Shedding (overloaded tick, at most one cut per shed_interval_s): the victim is the lowest
 *   class (L3, then L2, then L1) that still admits something and has demand; its admit
 *   fraction is multiplied by shed_factor (0.5) and drops to 0 once below the first recovery
 *   step (10%). L0 is cut only when L1..L3 are all at 0 or idle, and never below l0_floor_pct.
 * Recovery (no overload for recovery_step_s since the last overload and the last change): the
 *   highest-priority class below 100% climbs to the next recovery step above its current
 *   fraction (10 -> 30 -> 50 -> 80 -> 100); one step per recovery_step_s for the whole
 *   service, so a lower class starts climbing only after every class above it is at 100%.
 * Overload (sluice_ladder_overloaded): latency signal above the AIMD target, or priority
 *   inversion: a class k lost more than rej_frac of its arrivals to headroom while a lower
 *   class still admitted traffic. */
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
	double step_s;                /* recovery hold: 5 */
	double shed_factor;           /* 0.5 */
	double shed_interval_s;       /* 0.2: minimum time between two cuts */
	uint32_t l0_floor_pct;        /* 10: L0 is never shed below this */
	double rej_frac;              /* 0.02: headroom rejections that count as inversion */
};

struct sluice_ladder_input {
	int overloaded;
	uint64_t demand[SLUICE_NUM_CLASSES];          /* arrivals this tick */
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
