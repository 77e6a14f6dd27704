/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Retry-storm signal of one service: ratio = retransmits / arrivals per window
 * (retransmitted SYNs and re-sent requests, as counted by BPF). An alert event when the ratio
 * is above `ratio` (0.2) for `windows` (3) consecutive windows; a clear event at the first
 * window below it. Windows with fewer than min_arrivals arrivals say nothing either way:
 * they neither count towards nor break a streak. */
#ifndef SLUICE_RETRYSTORM_H
#define SLUICE_RETRYSTORM_H

#include <stdint.h>
#include "common/config.h"
#include "control/events.h"

struct sluice_retrystorm_params {
	double ratio;                 /* 0.2 */
	uint32_t windows;             /* 3 */
	uint64_t window_ns;           /* 1 s */
	uint64_t min_arrivals;        /* 20 */
};

struct sluice_retrystorm {
	uint64_t window_start_ns;
	uint64_t arrivals, retransmits;   /* current window */
	uint32_t streak;                  /* consecutive windows above ratio */
	int active;                       /* storm flag (metric) */
	double last_ratio;                /* last completed window (metric) */
};

void sluice_retrystorm_params_default(struct sluice_retrystorm_params *p);
void sluice_retrystorm_params_from_conf(const struct retry_storm_conf *rc,
					struct sluice_retrystorm_params *p);

void sluice_retrystorm_init(struct sluice_retrystorm *r, uint64_t now_ns);

/* Feed one tick's deltas; closes the window when window_ns has passed.
 * Returns 1 when the storm flag changed on this call. */
int sluice_retrystorm_tick(struct sluice_retrystorm *r, const struct sluice_retrystorm_params *p,
			   uint64_t arrivals, uint64_t retransmits, uint64_t now_ns,
			   const struct sluice_event_sink *sink);

#endif
