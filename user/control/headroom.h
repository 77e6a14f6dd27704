/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Work-conserving headroom. Class k is admitted while the
 * service's total in-flight < threshold[k]. A fixed threshold (limit x headroom[k]%) keeps L0
 * fast but wastes what L0 does not use; here each threshold comes from measured demand:
 *   threshold[k] = limit - sum over j < k of (peak[j] + margin(peak[j]))
 *   margin(x)    = max(margin_min, min(x x margin_pct / 100, limit x margin_cap_pct / 100))
 * made non-increasing in k (a lower class never gets more room than a higher one). With
 * `caps` (the config wrote its percentages) threshold[k] is also at most
 * max(1, limit x headroom[k] / 100): a written percentage is honoured in every mode; without
 * it the allocation is work-conserving (a lower class uses what the higher ones leave, minus
 * their burst margin). peak[j] is class j's recent peak in-flight, tracked by
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
	int caps;                           /* the percentages were written: caps */
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

#endif
