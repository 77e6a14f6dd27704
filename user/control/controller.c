// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "control/controller.h"

#include <string.h>
#include "control/verdict.h"

static void load_params(struct service_ctl *s, const struct service_conf *sc,
			const struct sluice_config *cfg)
{
	sluice_aimd_params_from_conf(sc, &s->ap);
	sluice_breaker_params_from_conf(&sc->breaker, &s->bp);
	sluice_ladder_params_from_conf(sc, &s->lp);
	sluice_headroom_params_from_pct(sc->headroom, &s->hp);
	sluice_retrystorm_params_from_conf(&cfg->retry_storm, &s->rp);
}

void service_ctl_init(struct service_ctl *s, const struct service_conf *sc,
		      const struct sluice_config *cfg, uint64_t seed, uint64_t now_ns)
{
	memset(s, 0, sizeof(*s));
	load_params(s, sc, cfg);
	sluice_aimd_init(&s->aimd, &s->ap, now_ns);
	sluice_breaker_init(&s->brk, seed, now_ns);
	sluice_ladder_init(&s->lad, now_ns);
	sluice_peak_init(&s->peak);
	sluice_retrystorm_init(&s->rs, now_ns);
}

void service_ctl_reconfigure(struct service_ctl *s, const struct service_conf *sc,
			     const struct sluice_config *cfg)
{
	load_params(s, sc, cfg);
	sluice_aimd_reconfigure(&s->aimd, &s->ap);
}

void service_ctl_tick(struct service_ctl *s, const struct service_conf *sc,
		      const struct ctl_inputs *in, int suppressed, uint64_t now_ns,
		      const struct sluice_event_sink *sink, struct sluice_verdict *out, int *opened)
{
	struct sluice_service_signals *sig = &s->sig;
	struct sluice_overload_input oi = { 0 };
	struct sluice_ladder_input li = { 0 };
	struct sluice_breaker_input bi;
	const char *why = NULL;
	uint32_t limit;
	int rc;

	sluice_signals_compute(s->have_prev ? s->prev : NULL, in->stats,
			       s->have_prev ? s->prev_h : NULL, in->hist,
			       s->have_prev ? now_ns - s->prev_ns : 0,
			       (uint64_t)s->bp.slow_call_us, sig);
	memcpy(s->prev, in->stats, sizeof(s->prev));
	memcpy(s->prev_h, in->hist, sizeof(s->prev_h));
	s->prev_ns = now_ns;
	s->have_prev = 1;

	limit = sluice_aimd_tick(&s->aimd, &s->ap, &sig->total_hist, now_ns, sink);

	bi.completed = sig->total.completed;
	bi.errors = sig->total.errors;
	bi.resp_429 = sig->total.resp_429;
	bi.slow = sig->total.slow;
	bi.suppressed = suppressed;
	rc = sluice_breaker_tick(&s->brk, &s->bp, &bi, now_ns, sink);
	*opened = (rc & SLUICE_BRK_OPENED) != 0;

	/* Latency above target is the AIMD limit's to fix while it can still go down; the
	 * ladder takes it up only for a fixed limit or a limit already at its floor, so the two
	 * loops do not both cut for the same cause. Priority inversion is always the ladder's. */
	if (sc->limit_fixed > 0 || limit <= s->ap.min) {
		oi.latency_us = sig->total.p50_us;
		oi.target_us = s->aimd.target_us;
	}
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		oi.arrivals[c] = sig->cls[c].arrivals;
		oi.headroom_rej[c] = sig->cls[c].rejected[SLUICE_REJ_HEADROOM];
		li.demand[c] = sig->cls[c].arrivals;
	}
	li.overloaded = sluice_ladder_overloaded(&s->lad, &s->lp, &oi, &why);
	sluice_ladder_tick(&s->lad, &s->lp, &li, now_ns, sink);

	{
		int64_t cls_inflight[SLUICE_NUM_CLASSES];
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			cls_inflight[c] = in->inflight.cls[c];
		sluice_peak_update(&s->peak, cls_inflight, now_ns);
		sluice_peak_get(&s->peak, 10, now_ns, s->peaks);
	}

	sluice_retrystorm_tick(&s->rs, &s->rp, sig->total.arrivals, sig->total.retransmits,
			       now_ns, sink);

	memset(out, 0, sizeof(*out));
	out->limit = limit;
	if (sc->headroom_mode == HEADROOM_FIXED) {
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			out->class_threshold[c] = verdict_class_threshold((int)limit, sc->headroom[c]);
	} else {
		sluice_headroom_thresholds(limit, &s->hp, s->peaks, out->class_threshold);
		out->flags |= SLUICE_VERDICT_PRIORITY_COUNT;
	}
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		out->admit_prob[c] = s->lad.admit[c];
		out->switch_admit[c] = in->switch_admit[c];
	}
	out->breaker_state = (uint32_t)s->brk.state;
	out->breaker_admit = sluice_breaker_admit(&s->brk, &s->bp);
	out->retry_after_s = (uint32_t)sc->retry_after_s;
	if (s->brk.state == SLUICE_BREAKER_OPEN) {
		uint32_t ra = sluice_breaker_retry_after_s(&s->brk, now_ns);
		if (ra > out->retry_after_s)
			out->retry_after_s = ra;
	}
}

int service_ctl_settled(const struct service_ctl *s)
{
	if (s->brk.state != SLUICE_BREAKER_CLOSED || s->lad.overloaded || s->rs.active ||
	    s->rs.arrivals || s->rs.streak || (!s->ap.fixed && sluice_hist_count(&s->aimd.win)))
		return 0;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		if (s->lad.admit[c] != SLUICE_PROB_ONE)
			return 0;
	return 1;
}
