/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* AIMD concurrency limit of one service. Once per window (aimd_window_ms):
 *   latency <  0.7 x target  -> limit + 1
 *   latency >  target        -> limit x 0.5
 *   otherwise                -> hold
 * clamped to [min, max], starting at max(min, 0.3 x max). The latency signal is the window's
 * p50 (configurable quantile) from the histogram deltas the caller feeds every tick. Target is
 * configured or auto = 2 x the long-run minimum windowed p50 (windows with >= min_samples);
 * until that baseline exists the limit holds. A window without samples holds (never shrinks
 * a limit on no evidence). limit_fixed > 0: the limit is that, always. */
#ifndef SLUICE_AIMD_H
#define SLUICE_AIMD_H

#include <stdint.h>
#include "sluice.h"
#include "common/config.h"
#include "control/events.h"

struct sluice_aimd_params {
	uint32_t min, max;            /* bounds; min >= 1 */
	uint32_t fixed;               /* > 0: static limit */
	double target_us;             /* 0 = auto */
	uint64_t window_ns;           /* 1 s */
	uint64_t min_samples;         /* samples a window needs to update the auto baseline: 20 */
	double quantile;              /* latency signal quantile: 0.5 */
	double inc_below;             /* 0.7: increase while latency < inc_below x target */
	double dec_factor;            /* 0.5 */
	double auto_mult;             /* 2.0: auto target = auto_mult x min p50 */
};

struct sluice_aimd {
	uint32_t limit;
	double target_us;             /* in force: configured, or auto (0 until known) */
	double min_p50_us;            /* auto baseline, 0 = unknown */
	uint64_t window_start_ns;
	struct sluice_hist win;       /* histogram accumulated over the current window */
	uint64_t windows;             /* completed windows (for tests and metrics) */
	double last_latency_us;       /* signal of the last completed window */
	double cut_latency_us;        /* latency that triggered the last cut, 0 = none pending */
	uint64_t last_samples;
};

/* Defaults and the mapping from the config; zero config fields -> defaults. */
void sluice_aimd_params_default(struct sluice_aimd_params *p);
void sluice_aimd_params_from_conf(const struct service_conf *sc, struct sluice_aimd_params *p);

void sluice_aimd_init(struct sluice_aimd *a, const struct sluice_aimd_params *p, uint64_t now_ns);

/* Feed one tick's histogram delta (all classes of the service, or whatever the caller
 * chooses as the latency signal). When the window has elapsed, decides on it (see
 * sluice_aimd_window) and starts a new one. Returns the limit in force. */
uint32_t sluice_aimd_tick(struct sluice_aimd *a, const struct sluice_aimd_params *p,
			  const struct sluice_hist *delta, uint64_t now_ns,
			  const struct sluice_event_sink *sink);

/* Decide on one completed window with `samples` samples and latency signal `latency_us`.
 * `p50_us` feeds the auto baseline (pass latency_us when the signal is p50). */
uint32_t sluice_aimd_window(struct sluice_aimd *a, const struct sluice_aimd_params *p,
			    uint64_t samples, double latency_us, double p50_us, uint64_t now_ns,
			    const struct sluice_event_sink *sink);

/* Config reload: keep the limit (clamped to the new bounds) and the learned baseline. */
void sluice_aimd_reconfigure(struct sluice_aimd *a, const struct sluice_aimd_params *p);

#endif
