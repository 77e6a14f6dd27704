// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Work-conserving per-class thresholds and the recent-peak tracker; see headroom.h. */
#include <math.h>
#include <string.h>
#include "control/headroom.h"

static const uint32_t default_pct[SLUICE_NUM_CLASSES] = { 100, 90, 75, 50 };

void sluice_headroom_params_default(struct sluice_headroom_params *p)
{
	memcpy(p->pct, default_pct, sizeof(p->pct));
	p->margin_pct = 25;
	p->margin_min = 2;
	p->margin_cap_pct = 10;
	p->caps = 0;
}

void sluice_headroom_params_from_pct(const int pct[SLUICE_NUM_CLASSES],
				     struct sluice_headroom_params *p)
{
	int c;

	sluice_headroom_params_default(p);
	for (c = 0; c < SLUICE_NUM_CLASSES; c++)
		if (pct[c] >= 0 && pct[c] <= 100)
			p->pct[c] = (uint32_t)pct[c];
}

void sluice_headroom_thresholds(uint32_t limit, const struct sluice_headroom_params *p,
				const uint32_t peak[SLUICE_NUM_CLASSES],
				uint32_t out[SLUICE_NUM_CLASSES])
{
	uint64_t reserve = 0;
	int k;

	/* The data path compares class k with the in-flight of classes 0..k
	 * (SLUICE_VERDICT_PRIORITY_COUNT): what higher classes use is already counted, so the
	 * threshold only keeps their burst margin free. A percentage of 0 shuts a class out; a
	 * written one caps the class (never a floor: a floor for a lower class would take
	 * exactly the slots a busy higher class needs). */
	for (k = 0; k < SLUICE_NUM_CLASSES; k++) {
		uint64_t t = reserve >= limit ? 0 : limit - reserve;
		uint64_t m;

		if (p->pct[k] == 0)
			t = 0;
		else if ((p->caps >> k & 1) && p->pct[k] < 100) {
			uint64_t cap = (uint64_t)limit * p->pct[k] / 100;
			if (cap < 1)
				cap = 1;
			if (t > cap)
				t = cap;
		}
		if (k > 0 && t > out[k - 1])
			t = out[k - 1];
		out[k] = (uint32_t)t;
		/* An idle class keeps one slot free for its next arrival; a busy one a margin for
		 * bursts beyond its recent peak (which the 100 ms sampling may not see). */
		m = (uint64_t)peak[k] * p->margin_pct / 100;
		/* a peak far above the limit (a backlog while the backend stalled, not demand)
		 * would reserve most of a limit cut since: at most margin_cap_pct of the limit */
		if (m > (uint64_t)limit * p->margin_cap_pct / 100)
			m = (uint64_t)limit * p->margin_cap_pct / 100;
		if (m < p->margin_min)
			m = p->margin_min;
		reserve += peak[k] ? m : 1;
	}
}

void sluice_peak_init(struct sluice_peak *pk)
{
	memset(pk, 0, sizeof(*pk));
	/* sec 0 with max 0 is harmless: a zero bucket never raises a maximum */
}

void sluice_peak_update(struct sluice_peak *pk, const int64_t v[SLUICE_NUM_CLASSES],
			uint64_t now_ns)
{
	uint64_t sec = now_ns / 1000000000ull;
	uint32_t i = (uint32_t)(sec % SLUICE_PEAK_BUCKETS);
	int c;

	if (pk->sec[i] != sec) {
		pk->sec[i] = sec;
		memset(pk->max[i], 0, sizeof(pk->max[i]));
	}
	for (c = 0; c < SLUICE_NUM_CLASSES; c++) {
		uint32_t x = v[c] > 0 ? (v[c] > UINT32_MAX ? UINT32_MAX : (uint32_t)v[c]) : 0;
		if (x > pk->max[i][c])
			pk->max[i][c] = x;
	}
}

void sluice_peak_get(const struct sluice_peak *pk, uint32_t window_s, uint64_t now_ns,
		     uint32_t out[SLUICE_NUM_CLASSES])
{
	uint64_t sec = now_ns / 1000000000ull;
	uint32_t i;
	int c;

	if (window_s < 1)
		window_s = 1;
	if (window_s > SLUICE_PEAK_BUCKETS)
		window_s = SLUICE_PEAK_BUCKETS;
	memset(out, 0, sizeof(uint32_t) * SLUICE_NUM_CLASSES);
	/* only the slots that can hold the last window_s seconds */
	for (i = 0; i < window_s && i <= sec; i++) {
		uint32_t k = (uint32_t)((sec - i) % SLUICE_PEAK_BUCKETS);
		if (pk->sec[k] != sec - i)
			continue;
		for (c = 0; c < SLUICE_NUM_CLASSES; c++)
			if (pk->max[k][c] > out[c])
				out[c] = pk->max[k][c];
	}
}

/* ---- L0's room under an adaptive limit ---- */

void sluice_l0room_init(struct sluice_l0room *r)
{
	memset(r, 0, sizeof(*r));
}

void sluice_l0room_served(struct sluice_l0room *r, double rate, uint64_t now_ns)
{
	uint64_t sec = now_ns / 1000000000ull;
	uint32_t i = (uint32_t)(sec % SLUICE_L0ROOM_BUCKETS);

	if (r->sec[i] != sec) {
		r->sec[i] = sec;
		r->served[i] = 0;
	}
	if (rate > r->served[i])       /* NaN and negatives never raise it */
		r->served[i] = rate;
}

double sluice_l0room_served_max(const struct sluice_l0room *r, uint32_t window_s,
				uint64_t now_ns)
{
	uint64_t sec = now_ns / 1000000000ull;
	double m = 0;
	uint32_t i;

	if (window_s < 1)
		window_s = 1;
	if (window_s > SLUICE_L0ROOM_BUCKETS)
		window_s = SLUICE_L0ROOM_BUCKETS;
	for (i = 0; i < window_s && i <= sec; i++) {
		uint32_t k = (uint32_t)((sec - i) % SLUICE_L0ROOM_BUCKETS);
		if (r->sec[k] == sec - i && r->served[k] > m)
			m = r->served[k];
	}
	return m;
}

void sluice_l0room_tick(struct sluice_l0room *r, uint64_t l0_arrivals, int64_t l0_inflight,
			uint64_t dt_ns)
{
	double rate, inf = l0_inflight > 0 ? (double)l0_inflight : 0, a;

	if (!dt_ns)
		return;
	rate = (double)l0_arrivals * 1e9 / (double)dt_ns;
	/* the weight of this tick grows with its length: a long gap (ticks skipped while the
	 * service was idle) counts as what it measured, not as one short tick */
	a = r->have ? 1 - exp(-(double)dt_ns / (double)SLUICE_L0ROOM_TAU_NS) : 1;
	r->l0_rate += a * (rate - r->l0_rate);
	r->l0_inflight += a * (inf - r->l0_inflight);
	r->have = 1;
}

uint32_t sluice_headroom_l0_room(uint32_t limit, uint32_t limit_max, double l0_rate,
				 double l0_inflight, double served_max)
{
	double room;

	if (limit_max < limit)
		limit_max = limit;
	if (served_max > 0 && l0_rate <= SLUICE_L0ROOM_FITS * served_max)
		return limit_max;
	/* L0 near or beyond what fits: the room above its mean that the limit leaves, again,
	 * for its bursts; an L0 that fills the limit by itself is held to the limit */
	room = 2.0 * limit - (l0_inflight > 0 ? l0_inflight : 0);
	if (!(room > limit))
		return limit;
	return room >= limit_max ? limit_max : (uint32_t)room;
}
