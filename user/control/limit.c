// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Gradient and AIMD limits; the rules are in limit.h. */
#include <math.h>
#include <string.h>
#include "control/limit.h"

void sluice_limit_params_default(struct sluice_limit_params *p)
{
	memset(p, 0, sizeof(*p));
	p->algorithm = SLUICE_LIMIT_GRADIENT;
	p->min = 4;
	p->max = 512;
	p->min_gradient = 0.5;
	p->gate = 0.5;
	p->calm_decay = 0.9;
	p->calm_windows = 10;
	p->calm_floor = 4;
	p->calm_margin = 2;
	p->calm_min = 16;
	p->fast_growth = 1;
	p->aimd_gate = 0.8;
	p->dec_factor = 0.5;
	p->judge_drop = 0.85;
	p->respond_frac = 0.5;
	p->floor_hold_ns = 30000000000ull;
	p->cut_ratio = 1.5;
	p->cut_samples = 20;
}

void sluice_limit_params_from_conf(const struct service_conf *sc, struct sluice_limit_params *p)
{
	sluice_limit_params_default(p);
	if (sc->limit_min > 0)
		p->min = (uint32_t)sc->limit_min;
	if (sc->limit_max > 0)
		p->max = (uint32_t)sc->limit_max;
	if (p->max < p->min)
		p->max = p->min;
	if (sc->limit_fixed > 0)
		p->fixed = (uint32_t)sc->limit_fixed;
	p->little = sc->protocol == SLUICE_PROTO_HTTP;
	/* auto = gradient: chosen by the closed-loop simulations in tests/unit/test_sim.c */
	p->algorithm = sc->limit_algorithm == LIMIT_ALG_AIMD ? SLUICE_LIMIT_AIMD :
		       SLUICE_LIMIT_GRADIENT;
	/* `aimd` in a config is the textbook rule its users know and compare against: +1 below
	 * 0.7 x the objective, no utilisation gate. The gated variant stays for the simulations
	 * that chose the gradient over it (docs/CONTROLLER.md). */
	if (p->algorithm == SLUICE_LIMIT_AIMD) {
		p->classic_band = 1;
		p->aimd_gate = 0;
	}
}

static double clampd(const struct sluice_limit_params *p, double v)
{
	double mn = p->min ? p->min : 1, mx = p->max > mn ? p->max : mn;
	return v < mn ? mn : v > mx ? mx : v;
}

static void set(struct sluice_limit *l, const struct sluice_limit_params *p, double v)
{
	l->est = p->fixed ? p->fixed : clampd(p, v);
	l->limit = (uint32_t)(l->est + 0.5);
}

void sluice_limit_init(struct sluice_limit *l, const struct sluice_limit_params *p)
{
	memset(l, 0, sizeof(*l));
	/* start low and probe upwards: a cold start at max lets the first peak through */
	set(l, p, 0.3 * (double)p->max);
}

void sluice_limit_reconfigure(struct sluice_limit *l, const struct sluice_limit_params *p)
{
	set(l, p, l->est > 0 ? l->est : (double)l->limit);
}

/* Start the event of the limit moving from OLD to NEW (why WHY): 0 when nobody listens. The
 * caller adds the numbers that decided and emits it. */
static int limit_event(struct sluice_event *ev, const struct sluice_event_sink *sink, uint64_t now,
		       int level, const char *why, uint32_t old, uint32_t new)
{
	if (!sink || !sink->fn)
		return 0;
	sluice_event_init(ev, now, level, sink->service, SLUICE_EVM_AIMD, "limit", "limit", why);
	sluice_event_num(ev, "limit_from", old);
	sluice_event_num(ev, "limit_to", new);
	return 1;
}

static void report(const struct sluice_event_sink *sink, uint64_t now, int level, const char *why,
		   uint32_t old, uint32_t new, const struct sluice_limit_input *in)
{
	struct sluice_event ev;

	if (!limit_event(&ev, sink, now, level, why, old, new))
		return;
	sluice_event_num(&ev, "latency_us", in->latency_us);
	sluice_event_num(&ev, "aim_us", in->aim_us);
	sluice_event_num(&ev, "objective_us", in->objective_us);
	sluice_event_num(&ev, "peak_inflight", in->peak_inflight);
	sluice_event_num(&ev, "samples", (double)in->samples);
	sluice_event_emit(sink, &ev);
}

static int gradient(struct sluice_limit *l, const struct sluice_limit_params *p,
		    const struct sluice_limit_input *in, double *v, const char **why)
{
	double g = in->aim_us / in->latency_us, lim = l->est;

	if (g < 1) {
		/* The first descent: before any cut the limit is a guess (0.3 x max at a cold
		 * start, or 4 x the demand it followed down in calm), and when it did not bind a
		 * cut of it does not bind either (the cold start at 154 needed four halvings to
		 * 21, 2.6 s of a 7 s surge). When the objective itself is missed (an overload, not
		 * a calm window's spread around the aim), the first cut is taken from the
		 * concurrency the latency was measured at, with the same clamp: one window's
		 * latency at the start of a surge lags (it read 340 ms for 56 connections on 16 x
		 * 50 ms workers, half the real throughput, and a cut to peak x aim / latency down
		 * to a quarter gave 14, below the workers). Only the first: a later window can
		 * carry latencies of a concurrency that has passed (the backlog of a stall). */
		if (!l->cuts && !in->bound && in->peak_inflight > 0 &&
		    (double)in->peak_inflight < lim && in->objective_us > 0 &&
		    in->latency_us > in->objective_us)
			lim = in->peak_inflight;
		l->calm = 0;
		l->cuts++;
		*v = lim * (g < p->min_gradient ? p->min_gradient : g);
		*why = "latency_above_aim";
		return -1;
	}
	if (!in->full || in->queue_saturated)
		return 0;
	if (in->bound || (double)in->peak_inflight >= p->gate * lim) {
		if (in->no_growth)
			return 0;
		l->calm = 0;
		/* near the knee (a queue shows as latency above the baseline, and in-flight reaches
		 * the limit) probe by one; far from it (no queue, or refusals by the lower classes'
		 * thresholds with in-flight well below the limit) by a jump */
		int far = in->latency_us <= in->base_us || (double)in->peak_inflight < 0.75 * lim;
		*v = lim + (sqrt(lim) > 1 && far ? sqrt(lim) : 1);
		*why = "probe";
		return 1;
	}
	/* application-limited: no evidence that more concurrency would help */
	if (p->calm_margin > 0) {
		/* follow the demand down at once: the limit a surge meets is the concurrency the
		 * backend gets at its start (a cold start's 154 let 150 requests into Apache's queue
		 * ahead of L0 before the first cut; 0.5x load there peaks at 10-15 in flight) */
		double pk = in->calm_peak > in->peak_inflight ? in->calm_peak : in->peak_inflight;

		l->calm = 0;
		*v = p->calm_margin * pk;
		if (*v < p->calm_min)
			*v = p->calm_min;
		if (*v >= lim)
			return 0;
		*why = "follow_demand";
		return 0;
	}
	if (++l->calm < p->calm_windows)
		return 0;
	*v = lim * p->calm_decay;
	if (*v < p->calm_floor * (in->peak_inflight > 4 ? in->peak_inflight : 4))
		*v = p->calm_floor * (in->peak_inflight > 4 ? in->peak_inflight : 4);
	if (*v >= lim)
		return 0;
	*why = "follow_demand";
	return 0;
}

static int aimd(struct sluice_limit *l, const struct sluice_limit_params *p,
		const struct sluice_limit_input *in, double *v, const char **why)
{
	double grow_below = p->classic_band ? 0.7 * in->objective_us : in->aim_us;

	if (in->objective_us > 0 && in->latency_us > in->objective_us) {
		l->cuts++;
		*v = l->est * p->dec_factor;
		*why = "latency_above_target";
		return -1;
	}
	if (!in->full || in->queue_saturated || in->latency_us >= grow_below)
		return 0;
	if (p->aimd_gate > 0 && !in->bound && (double)in->peak_inflight < p->aimd_gate * l->est)
		return 0;
	*v = l->est + 1;
	*why = "latency_below_band";
	return 1;
}

/* Judge the descent under way (rule in limit.h): 1 when it did not lower latency and the
 * evidence floor was set. */
static int judge(struct sluice_limit *l, const struct sluice_limit_params *p,
		 const struct sluice_limit_input *in, uint64_t now_ns)
{
	double c1 = l->ref_peak, cdrop, ldrop, xdrop, f;

	if (l->floor > 0 && now_ns >= l->floor_until_ns)
		l->floor = 0;                    /* held long enough: the next descent tests it */
	if (!l->ref_peak)
		return 0;
	if (in->latency_us <= in->aim_us) {
		l->ref_peak = 0;                 /* the cuts brought it down: it responds */
		return 0;
	}
	ldrop = 1 - in->latency_us / l->ref_latency_us;
	xdrop = l->ref_rate > 0 ? 1 - in->rate / l->ref_rate : 0;   /* unknown: no judgement */
	if (in->peak_inflight && (double)in->peak_inflight <= p->judge_drop * c1) {
		cdrop = 1 - (double)in->peak_inflight / c1;
		f = c1 + (c1 / 4 > 2 ? c1 / 4 : 2);
	} else if (in->bound && xdrop >= 1 - p->judge_drop) {
		/* the limit refused work and the completions fell: what it shed is the rate's
		 * fall (the peak sampled at ticks can miss short turns: 8 clients of one-query
		 * connections showed a peak of 4, and a floor there kept refusing them) */
		cdrop = xdrop;
		f = 2 * (c1 > l->est ? c1 : l->est);
	} else {
		return 0;                        /* the concurrency has not fallen yet */
	}
	l->ref_peak = 0;
	if (ldrop >= p->respond_frac * cdrop || xdrop < p->respond_frac * cdrop)
		return 0;
	if (f > l->ref_est)
		f = l->ref_est;
	if (f > l->floor)
		l->floor = f;
	l->floor_until_ns = now_ns + p->floor_hold_ns;
	l->unhelpful++;
	return 1;
}

uint32_t sluice_limit_decide(struct sluice_limit *l, const struct sluice_limit_params *p,
			     const struct sluice_limit_input *in, uint64_t now_ns,
			     const struct sluice_event_sink *sink)
{
	uint32_t old = l->limit;
	const char *why = NULL;
	double v = l->est;
	int dir;

	l->decisions++;
	l->last_dir = 0;
	if (p->fixed) {
		set(l, p, p->fixed);
		return l->limit;
	}
	if (in->aim_us <= 0 || in->latency_us <= 0)
		return l->limit;                 /* nothing to steer by: hold */
	if (p->respond_frac > 0 && judge(l, p, in, now_ns) && l->est < l->floor) {
		/* latency did not follow the concurrency down: undo the descent */
		set(l, p, l->floor);
		l->last_dir = l->limit > old ? 1 : 0;
		report(sink, now_ns, SLUICE_EV_INFO, "cut_did_not_help", old, l->limit, in);
		return l->limit;
	}
	dir = p->algorithm == SLUICE_LIMIT_AIMD ? aimd(l, p, in, &v, &why) :
						  gradient(l, p, in, &v, &why);
	if (!why)
		return l->limit;
	if (dir < 0 && l->floor > 0 && v < l->floor) {
		/* not below the concurrency latency was found not to respond to */
		if (l->est <= l->floor) {
			l->cuts--;
			return l->limit;
		}
		v = l->floor;
	}
	if (dir < 0 && !l->ref_peak && in->peak_inflight > 0) {
		l->ref_peak = in->peak_inflight;        /* the reference of this descent */
		l->ref_latency_us = in->latency_us;
		l->ref_est = l->est;
		l->ref_rate = in->rate;
		/* a window that began in calm dilutes what the backend did at c1 (L0 alone going
		 * from one client to eight 0.2 s before the window's end read 381 completions/s and
		 * 4.4 ms for the 1000/s and 7.8 ms of its last ticks, and the next window's 570/s
		 * at a limit of 4 then read as a rise): the last tick, at that concurrency, counts
		 * when higher */
		if (in->tick_rate > l->ref_rate)
			l->ref_rate = in->tick_rate;
		if (in->tick_latency_us > l->ref_latency_us)
			l->ref_latency_us = in->tick_latency_us;
	}
	set(l, p, v);
	l->last_dir = l->limit < old ? -1 : l->limit > old ? 1 : dir < 0 ? -1 : 0;
	if (l->limit != old)
		report(sink, now_ns, dir < 0 ? SLUICE_EV_INFO : SLUICE_EV_DEBUG, why, old, l->limit,
		       in);
	return l->limit;
}

int sluice_limit_little(struct sluice_limit *l, const struct sluice_limit_params *p,
			const struct sluice_little_input *in, uint64_t now_ns,
			const struct sluice_event_sink *sink)
{
	uint32_t old = l->limit, m = in->inflight < in->inflight_prev ? in->inflight :
				      in->inflight_prev;
	struct sluice_event ev;
	double v;

	if (p->fixed || p->algorithm != SLUICE_LIMIT_GRADIENT || !p->little || p->cut_ratio <= 0 ||
	    in->samples < p->cut_samples || in->rate <= 0 || in->rate < in->window_rate ||
	    in->window_rate <= 0 || in->aim_us <= 0 ||
	    in->objective_us <= 0 ||
	    in->tick_p50_us <= in->objective_us ||
	    (double)m * 1e6 < p->cut_ratio * in->objective_us * in->rate)
		return 0;
	v = clampd(p, in->rate * in->aim_us / 1e6);
	if (v < l->floor)
		v = l->floor;
	if ((uint32_t)(v + 0.5) >= l->limit)
		return 0;
	/* it starts a descent's reference, as a window's cut does, so that the evidence floor
	 * judges it too (a backend whose latency does not come from this concurrency loses
	 * throughput instead of latency, and the cut is undone) */
	if (!l->ref_peak) {
		l->ref_peak = m;
		l->ref_latency_us = in->tick_p50_us;
		l->ref_est = l->est;
		l->ref_rate = in->rate;
	}
	l->calm = 0;
	l->cuts++;
	set(l, p, v);
	l->last_dir = -1;
	if (l->limit != old && limit_event(&ev, sink, now_ns, SLUICE_EV_INFO,
					   "inflight_above_throughput", old, l->limit)) {
		sluice_event_num(&ev, "inflight", m);
		sluice_event_num(&ev, "rate", in->rate);
		sluice_event_num(&ev, "latency_us", in->tick_p50_us);
		sluice_event_num(&ev, "aim_us", in->aim_us);
		sluice_event_num(&ev, "objective_us", in->objective_us);
		sluice_event_emit(sink, &ev);
	}
	return 1;
}

int sluice_limit_grow(struct sluice_limit *l, const struct sluice_limit_params *p,
		      double latency_us, uint32_t inflight, uint64_t now_ns,
		      const struct sluice_event_sink *sink)
{
	uint32_t old = l->limit;
	struct sluice_event ev;

	if (p->fixed || p->algorithm != SLUICE_LIMIT_GRADIENT || !p->fast_growth || l->ref_peak)
		return 0;
	set(l, p, l->est + (sqrt(l->est) > 1 ? sqrt(l->est) : 1));
	if (l->limit == old)
		return 0;
	l->calm = 0;
	l->last_dir = 1;
	if (limit_event(&ev, sink, now_ns, SLUICE_EV_DEBUG, "bound_without_queue", old, l->limit)) {
		sluice_event_num(&ev, "inflight", inflight);
		sluice_event_num(&ev, "latency_us", latency_us);
		sluice_event_emit(sink, &ev);
	}
	return 1;
}

int sluice_limit_move(struct sluice_limit *l, const struct sluice_limit_params *p, double v,
		      const char *why, double wait_us, double allow_us, double mean_us,
		      uint64_t now_ns, const struct sluice_event_sink *sink)
{
	uint32_t old = l->limit;
	struct sluice_event ev;
	int cut = v < l->est;

	if (p->fixed || p->algorithm != SLUICE_LIMIT_GRADIENT)
		return 0;
	if (cut && l->floor > 0 && v < l->floor)
		v = l->floor;
	set(l, p, v);
	if (l->limit == old)
		return 0;
	l->calm = 0;
	l->last_dir = l->limit < old ? -1 : 1;
	if (l->last_dir < 0)
		l->cuts++;
	if (limit_event(&ev, sink, now_ns, SLUICE_EV_INFO, why, old, l->limit)) {
		sluice_event_num(&ev, "wait_us", wait_us);
		sluice_event_num(&ev, "allowance_us", allow_us);
		sluice_event_num(&ev, "mean_us", mean_us);
		sluice_event_emit(sink, &ev);
	}
	return 1;
}
