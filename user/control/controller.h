/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* One service's controller: composes signals, AIMD, breaker, ladder, work-conserving headroom
 * and the retry-storm detector into the verdict BPF enforces. Pure over its inputs and the
 * clock (no map I/O), so sluiced and the tests drive it the same way. */
#ifndef SLUICE_CONTROLLER_H
#define SLUICE_CONTROLLER_H

#include "sluice.h"
#include "common/config.h"
#include "control/events.h"
#include "control/signals.h"
#include "control/aimd.h"
#include "control/breaker.h"
#include "control/ladder.h"
#include "control/headroom.h"
#include "control/retrystorm.h"
#include "control/cascade.h"

struct service_ctl {
	struct sluice_aimd_params ap;
	struct sluice_breaker_params bp;
	struct sluice_ladder_params lp;
	struct sluice_headroom_params hp;
	struct sluice_retrystorm_params rp;
	struct sluice_aimd aimd;
	struct sluice_breaker brk;
	struct sluice_ladder lad;
	struct sluice_peak peak;
	struct sluice_retrystorm rs;
	int have_prev;
	uint64_t prev_ns;
	struct sluice_class_stats prev[SLUICE_NUM_CLASSES];
	struct sluice_hist prev_h[SLUICE_NUM_CLASSES];
	struct sluice_service_signals sig;    /* last tick's signals, for status and metrics */
	uint32_t peaks[SLUICE_NUM_CLASSES];
};

/* What the maps say this tick. */
struct ctl_inputs {
	struct sluice_class_stats stats[SLUICE_NUM_CLASSES];
	struct sluice_hist hist[SLUICE_NUM_CLASSES];
	struct sluice_inflight inflight;
	uint32_t switch_admit[SLUICE_NUM_CLASSES];   /* SLUICE_PROB_ONE = no switch */
};

void service_ctl_init(struct service_ctl *s, const struct service_conf *sc,
		      const struct sluice_config *cfg, uint64_t seed, uint64_t now_ns);
/* New config for the same service: keeps learned state (limit, baseline, breaker). */
void service_ctl_reconfigure(struct service_ctl *s, const struct service_conf *sc,
			     const struct sluice_config *cfg);

/* One tick: returns the verdict to write. `suppressed` comes from the cascade detector;
 * *opened is set when the breaker went CLOSED -> OPEN (the caller feeds the detector). */
void service_ctl_tick(struct service_ctl *s, const struct service_conf *sc,
		      const struct ctl_inputs *in, int suppressed, uint64_t now_ns,
		      const struct sluice_event_sink *sink, struct sluice_verdict *out, int *opened);

/* 1 when no clock-driven change is pending: a tick without traffic would leave the state and
 * the verdict as they are (breaker closed, ladder admitting everything, no latency samples
 * waiting in the AIMD window, no retry-storm window under way). The daemon skips such a
 * service while its counters and in-flight stay the same. */
int service_ctl_settled(const struct service_ctl *s);

#endif
