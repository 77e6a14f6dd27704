/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Work-conserving headroom. Class k is admitted while the
 * service's total in-flight < threshold[k]. A fixed threshold (limit x headroom[k]%) keeps L0
 * fast but wastes what L0 does not use; here each threshold comes from measured demand:
 *   threshold[k] = limit - sum over j < k of (peak[j] + margin(peak[j]))
 *   margin(x)    = max(margin_min, min(x x margin_pct / 100, limit x margin_cap_pct / 100))
 * made non-increasing in k (a lower class never gets more room than a higher one). For each
 * class k in `caps` (the config wrote its percentage) threshold[k] is also at most
 * max(1, limit x headroom[k] / 100): a written percentage is honoured in every mode; a class
 * whose percentage was not written is allocated work-conserving (it uses what the higher ones
 * leave, minus their burst margin), even when another class's was written. peak[j] is class j's recent peak in-flight, tracked by
 * struct sluice_peak over a sliding window of one-second buckets. */
#ifndef SLUICE_HEADROOM_H
#define SLUICE_HEADROOM_H

#include <stdint.h>
#include "sluice.h"

#define SLUICE_PEAK_BUCKETS 32

struct sluice_headroom_params {
	uint32_t pct[SLUICE_NUM_CLASSES];   /* floors, percent of limit: 100 90 75 50 */
	uint32_t margin_pct;                /* 25 */
	uint32_t margin_min;                /* 2 */
	uint32_t margin_cap_pct;            /* 10 */
	unsigned caps;                      /* bit k: class k's percentage was written: a cap */
};

void sluice_headroom_params_default(struct sluice_headroom_params *p);
/* From service_conf.headroom (values <= 0 or > 100 keep the default). */
void sluice_headroom_params_from_pct(const int pct[SLUICE_NUM_CLASSES],
				     struct sluice_headroom_params *p);

void sluice_headroom_thresholds(uint32_t limit, const struct sluice_headroom_params *p,
				const uint32_t peak[SLUICE_NUM_CLASSES],
				uint32_t out[SLUICE_NUM_CLASSES]);

/* Recent peak of a per-class counter (in-flight): max over the last window_s seconds. */
struct sluice_peak {
	uint64_t sec[SLUICE_PEAK_BUCKETS];
	uint32_t max[SLUICE_PEAK_BUCKETS][SLUICE_NUM_CLASSES];
};

void sluice_peak_init(struct sluice_peak *pk);
/* Record one sample per class (negative values, e.g. a racing counter, count as 0). */
void sluice_peak_update(struct sluice_peak *pk, const int64_t v[SLUICE_NUM_CLASSES],
			uint64_t now_ns);
/* out[c] = max over samples in the last window_s seconds (1..SLUICE_PEAK_BUCKETS). */
void sluice_peak_get(const struct sluice_peak *pk, uint32_t window_s, uint64_t now_ns,
		     uint32_t out[SLUICE_NUM_CLASSES]);

/* ---- L0's room under an adaptive limit ----
 * Adaptive headroom gives L0 the limit as its threshold, and the limit is cut during an
 * overload: L0's own in-flight then reaches it and L0 is refused although L0 alone is a small
 * part of what the backend serves (the lower classes are what overloads it). With an adaptive
 * limit and no L0 percentage written, L0's threshold is therefore
 *   limit_max                                 while L0's arrival rate <= fits (0.5) x the
 *                                             highest window completion rate of the last
 *                                             served_s (30) seconds: L0 alone clearly fits
 *                                             in what the backend proved it serves
 *   limit + (limit - L0's mean in-flight)     otherwise, within [limit, limit_max]
 * Never below the limit (L0 is refused by headroom no more than with the limit alone); the
 * lower classes' thresholds still count L0's in-flight, so they give way to a busy L0. */
#define SLUICE_L0ROOM_BUCKETS 32
#define SLUICE_L0ROOM_SERVED_S 30       /* seconds a proven completion rate counts */
#define SLUICE_L0ROOM_FITS 0.5          /* L0 fits below this share of it */
#define SLUICE_L0ROOM_TAU_NS 1000000000ull  /* smoothing of L0's rate and mean in-flight */

struct sluice_l0room {
	uint64_t sec[SLUICE_L0ROOM_BUCKETS];
	double served[SLUICE_L0ROOM_BUCKETS];   /* highest window completion rate in that second */
	double l0_rate;                         /* L0 arrivals per second, smoothed over ~1 s */
	double l0_inflight;                     /* L0's mean in-flight, likewise */
	int have;                               /* l0_rate / l0_inflight hold a first value */
};

void sluice_l0room_init(struct sluice_l0room *r);
/* A decided window's completion rate (responses per second the backend served). */
void sluice_l0room_served(struct sluice_l0room *r, double rate, uint64_t now_ns);
/* The highest completion rate recorded in the last window_s seconds (1..32), 0 = none. */
double sluice_l0room_served_max(const struct sluice_l0room *r, uint32_t window_s,
				uint64_t now_ns);
/* One tick: L0's arrivals over dt_ns and its in-flight now (an exponential average with time
 * constant SLUICE_L0ROOM_TAU_NS; the first tick with dt_ns > 0 sets it). */
void sluice_l0room_tick(struct sluice_l0room *r, uint64_t l0_arrivals, int64_t l0_inflight,
			uint64_t dt_ns);
/* L0's threshold by the rule above (served_max 0: nothing proved yet, the second form). */
uint32_t sluice_headroom_l0_room(uint32_t limit, uint32_t limit_max, double l0_rate,
				 double l0_inflight, double served_max);

#endif
