// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* AIMD limit; see aimd.h for the rule. */
#include <string.h>
#include "control/aimd.h"
#include "control/signals.h"

void sluice_aimd_params_default(struct sluice_aimd_params *p)
{
	memset(p, 0, sizeof(*p));
	p->min = 4;
	p->max = 512;
	p->window_ns = 1000000000ull;
	p->min_samples = 20;
	p->quantile = 0.5;
	p->inc_below = 0.7;
	p->dec_factor = 0.5;
	p->auto_mult = 2.0;
}

void sluice_aimd_params_from_conf(const struct service_conf *sc, struct sluice_aimd_params *p)
{
	sluice_aimd_params_default(p);
	if (sc->limit_min > 0)
		p->min = (uint32_t)sc->limit_min;
	if (sc->limit_max > 0)
		p->max = (uint32_t)sc->limit_max;
	if (p->max < p->min)
		p->max = p->min;
	if (sc->limit_fixed > 0)
		p->fixed = (uint32_t)sc->limit_fixed;
	if (sc->target_latency_ms > 0)
		p->target_us = sc->target_latency_ms * 1000.0;
	if (sc->aimd_window_ms > 0)
		p->window_ns = (uint64_t)sc->aimd_window_ms * 1000000ull;
}

static uint32_t clamp(const struct sluice_aimd_params *p, double v)
{
	uint32_t mn = p->min ? p->min : 1;
	if (v < mn)
		return mn;
	if (v > p->max)
		return p->max > mn ? p->max : mn;
	return (uint32_t)v;
}

static uint32_t start_limit(const struct sluice_aimd_params *p)
{
	if (p->fixed)
		return p->fixed;
	/* start low and probe upwards: a cold start at max lets the first peak through */
	return clamp(p, 0.3 * (double)p->max + 0.5);
}

void sluice_aimd_init(struct sluice_aimd *a, const struct sluice_aimd_params *p, uint64_t now_ns)
{
	memset(a, 0, sizeof(*a));
	a->limit = start_limit(p);
	a->target_us = p->target_us;
	a->window_start_ns = now_ns;
}

void sluice_aimd_reconfigure(struct sluice_aimd *a, const struct sluice_aimd_params *p)
{
	a->limit = p->fixed ? p->fixed : clamp(p, (double)a->limit);
	a->target_us = p->target_us > 0 ? p->target_us :
		       (a->min_p50_us > 0 ? p->auto_mult * a->min_p50_us : 0);
}

static void aimd_report(const struct sluice_event_sink *sink, uint64_t now, int level,
		   const char *from, const char *to, const char *why, uint32_t old, uint32_t new,
		   double lat, double target, uint64_t samples)
{
	struct sluice_event ev;

	if (!sink || !sink->fn)
		return;
	sluice_event_init(&ev, now, level, sink->service, SLUICE_EVM_AIMD, from, to, why);
	sluice_event_num(&ev, "limit_from", old);
	sluice_event_num(&ev, "limit_to", new);
	sluice_event_num(&ev, "latency_us", lat);
	sluice_event_num(&ev, "target_us", target);
	sluice_event_num(&ev, "samples", (double)samples);
	sluice_event_emit(sink, &ev);
}

uint32_t sluice_aimd_window(struct sluice_aimd *a, const struct sluice_aimd_params *p,
			    uint64_t samples, double latency_us, double p50_us, uint64_t now_ns,
			    const struct sluice_event_sink *sink)
{
	uint32_t old = a->limit;
	double target;

	a->windows++;
	a->last_latency_us = latency_us;
	a->last_samples = samples;
	if (p->fixed) {
		a->limit = p->fixed;
		return a->limit;
	}
	/* auto baseline: the lowest p50 ever seen over a window with enough samples */
	if (p->target_us <= 0 && samples >= p->min_samples && p50_us > 0 &&
	    (a->min_p50_us == 0 || p50_us < a->min_p50_us)) {
		a->min_p50_us = p50_us;
		a->target_us = p->auto_mult * p50_us;
		aimd_report(sink, now_ns, SLUICE_EV_DEBUG, "target", "target", "auto_baseline",
		       a->limit, a->limit, p50_us, a->target_us, samples);
	} else if (p->target_us > 0) {
		a->target_us = p->target_us;
	}
	target = a->target_us;
	if (target <= 0 || samples == 0)
		return a->limit;                /* no target yet / no evidence: hold */

	if (latency_us > target) {
		/* Cut only while cutting helps: if the last cut did not bring latency down by a
		 * tenth, the waiting is not in our queue (the backend itself got slower) and a
		 * smaller limit would only idle its workers. Hold until latency changes. */
		if (a->cut_latency_us > 0 && latency_us > 0.9 * a->cut_latency_us) {
			a->cut_latency_us = latency_us > a->cut_latency_us ? a->cut_latency_us : latency_us;
			return a->limit;
		}
		a->limit = clamp(p, (double)a->limit * p->dec_factor);
		a->cut_latency_us = latency_us;
		if (a->limit != old)
			aimd_report(sink, now_ns, SLUICE_EV_INFO, "limit", "limit", "latency_above_target",
			       old, a->limit, latency_us, target, samples);
		return a->limit;
	}
	a->cut_latency_us = 0;
	if (latency_us < p->inc_below * target) {
		a->limit = clamp(p, (double)a->limit + 1);
		if (a->limit != old)
			aimd_report(sink, now_ns, SLUICE_EV_DEBUG, "limit", "limit", "latency_below_band",
			       old, a->limit, latency_us, target, samples);
	}
	return a->limit;
}

uint32_t sluice_aimd_tick(struct sluice_aimd *a, const struct sluice_aimd_params *p,
			  const struct sluice_hist *delta, uint64_t now_ns,
			  const struct sluice_event_sink *sink)
{
	uint32_t i;

	if (delta) {
		for (i = 0; i < SLUICE_HIST_BUCKETS; i++)
			a->win.bucket[i] += delta->bucket[i];
		a->win.sum_us += delta->sum_us;
	}
	if (now_ns - a->window_start_ns < p->window_ns && now_ns >= a->window_start_ns)
		return a->limit;
	{
		uint64_t n = sluice_hist_count(&a->win);
		double p50 = sluice_hist_quantile_us(&a->win, 0.5);
		double lat = p->quantile == 0.5 ? p50 : sluice_hist_quantile_us(&a->win, p->quantile);

		sluice_aimd_window(a, p, n, lat, p50, now_ns, sink);
	}
	memset(&a->win, 0, sizeof(a->win));
	a->window_start_ns = now_ns;
	return a->limit;
}
