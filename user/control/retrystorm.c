// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Retry-storm detector; see retrystorm.h. */
#include <string.h>
#include "control/retrystorm.h"

void sluice_retrystorm_params_default(struct sluice_retrystorm_params *p)
{
	p->ratio = 0.2;
	p->windows = 3;
	p->window_ns = 1000000000ull;
	p->min_arrivals = 20;
}

void sluice_retrystorm_params_from_conf(const struct retry_storm_conf *rc,
					struct sluice_retrystorm_params *p)
{
	sluice_retrystorm_params_default(p);
	if (rc->ratio > 0)
		p->ratio = rc->ratio;
	if (rc->windows > 0)
		p->windows = (uint32_t)rc->windows;
}

void sluice_retrystorm_init(struct sluice_retrystorm *r, uint64_t now_ns)
{
	memset(r, 0, sizeof(*r));
	r->window_start_ns = now_ns;
}

static void rs_report(const struct sluice_retrystorm *r, const struct sluice_event_sink *sink,
		   uint64_t now, int level, const char *from, const char *to, const char *why,
		   const struct sluice_retrystorm_params *p, uint64_t arrivals, uint64_t retrans)
{
	struct sluice_event ev;

	if (!sink || !sink->fn)
		return;
	sluice_event_init(&ev, now, level, sink->service, SLUICE_EVM_RETRY_STORM, from, to, why);
	sluice_event_num(&ev, "ratio", r->last_ratio);
	sluice_event_num(&ev, "threshold", p->ratio);
	sluice_event_num(&ev, "windows", r->streak);
	sluice_event_num(&ev, "arrivals", (double)arrivals);
	sluice_event_num(&ev, "retransmits", (double)retrans);
	sluice_event_emit(sink, &ev);
}

int sluice_retrystorm_tick(struct sluice_retrystorm *r, const struct sluice_retrystorm_params *p,
			   uint64_t arrivals, uint64_t retransmits, uint64_t now_ns,
			   const struct sluice_event_sink *sink)
{
	uint64_t a, x;

	r->arrivals += arrivals;
	r->retransmits += retransmits;
	if (now_ns >= r->window_start_ns && now_ns - r->window_start_ns < p->window_ns)
		return 0;
	a = r->arrivals;
	x = r->retransmits;
	r->arrivals = r->retransmits = 0;
	r->window_start_ns = now_ns;
	if (a < p->min_arrivals || a == 0)
		return 0;                       /* too little traffic to say anything */
	r->last_ratio = (double)x / (double)a;
	if (r->last_ratio > p->ratio) {
		r->streak++;
		if (!r->active && r->streak >= p->windows) {
			r->active = 1;
			rs_report(r, sink, now_ns, SLUICE_EV_ALERT, "normal", "storm",
			       "retransmit_ratio_above_threshold", p, a, x);
			return 1;
		}
		return 0;
	}
	r->streak = 0;
	if (r->active) {
		r->active = 0;
		rs_report(r, sink, now_ns, SLUICE_EV_INFO, "storm", "normal",
		       "retransmit_ratio_below_threshold", p, a, x);
		return 1;
	}
	return 0;
}
