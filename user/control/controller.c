// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* One service's controller; the composition rule is in controller.h. */
#include "control/controller.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "control/verdict.h"

/* the recent peak in-flight that a calm limit follows decays by this per decided window */
#define CALM_PEAK_DECAY 0.9
/* A window decides early on the wait only once this share of its requests' time was waiting
 * (window_shows_queue). */
#define EARLY_WAIT_SHARE 0.5

static void load_params(struct service_ctl *s, const struct service_conf *sc,
			const struct sluice_config *cfg)
{
	uint64_t tick_ns = (uint64_t)(cfg->control_interval_ms > 0 ? cfg->control_interval_ms : 100)
			   * 1000000ull;

	sluice_limit_params_from_conf(sc, &s->mp);
	sluice_baseline_params_default(&s->blp);
	s->llp = s->blp;
	s->llp.q = 0.5;      /* the means' baselines: the median of the ring (in-flight sampled
	                      * at ticks is noisy at low load, a heavy tail's mean moves with its
	                      * few slow calls) */
	sluice_breaker_params_from_conf(&sc->breaker, &s->bp);
	sluice_ladder_params_from_conf(sc, &s->lp);
	sluice_headroom_params_from_pct(sc->headroom, &s->hp);
	/* only the keys written cap their class (a caller that did not say which: all of them) */
	s->hp.caps = !sc->headroom_set ? 0 : sc->headroom_written ? sc->headroom_written : 0xf;
	sluice_retrystorm_params_from_conf(&cfg->retry_storm, &s->rp);
	s->fixed_headroom = sc->headroom_mode == HEADROOM_FIXED;
	s->l0_written = sc->headroom_set && ((sc->headroom_written & 1) || sc->headroom[0] < 100);
	s->quantile = 0.5;
	s->slo_ratio = sc->latency_slo_ratio >= 1 ? sc->latency_slo_ratio : 1.2;
	s->slo_abs_us = sc->latency_slo_ms > 0 ? sc->latency_slo_ms * 1000.0 :
			sc->target_latency_ms > 0 ? sc->target_latency_ms * 1000.0 : 0;
	s->tick_ns = tick_ns;
	s->window_ns = (uint64_t)(sc->aimd_window_ms > 0 ? sc->aimd_window_ms : 1000) * 1000000ull;
	if (s->window_ns < tick_ns)
		s->window_ns = tick_ns;
	s->min_samples = sc->min_samples > 0 ? (uint64_t)sc->min_samples : 20;
	/* the throughput cut decides on one tick's samples: as many as a window needs */
	s->mp.cut_samples = s->min_samples;
	s->blp.min_samples = s->min_samples;
	s->llp.min_samples = s->min_samples;
	s->none_ns = 10 * s->window_ns;
	s->mp.floor_hold_ns = 30 * s->window_ns;
	s->takeover_ns = 2 * s->window_ns;
	sluice_waitknee_params_default(&s->wp, s->window_ns);
	s->wp.min_samples = s->min_samples;
}

void service_ctl_init(struct service_ctl *s, const struct service_conf *sc,
		      const struct sluice_config *cfg, uint64_t seed, uint64_t now_ns)
{
	memset(s, 0, sizeof(*s));
	load_params(s, sc, cfg);
	sluice_limit_init(&s->lim, &s->mp);
	sluice_baseline_reset(&s->base);
	sluice_baseline_reset(&s->base_little);
	sluice_baseline_reset(&s->base_mean);
	sluice_evwin_reset(&s->win, now_ns, NULL);
	sluice_breaker_init(&s->brk, seed, now_ns);
	sluice_ladder_init(&s->lad, now_ns);
	sluice_peak_init(&s->peak);
	sluice_l0room_init(&s->l0room);
	sluice_retrystorm_init(&s->rs, now_ns);
	sluice_listenq_init(&s->lq);
	sluice_waitknee_init(&s->wk);
	s->signal = SLUICE_SIGNAL_NONE;
}

void service_ctl_reconfigure(struct service_ctl *s, const struct service_conf *sc,
			     const struct sluice_config *cfg)
{
	uint64_t hold = s->mp.floor_hold_ns;

	load_params(s, sc, cfg);
	/* A floor held under the old window keeps its start and this config's hold from it: a
	 * window shortened from 10 s to 1 s would otherwise keep the limit from being cut below
	 * it for 300 s, not 30. (A longer window does not stretch a hold already under way.) */
	if (s->lim.floor_until_ns && s->mp.floor_hold_ns < hold) {
		uint64_t less = hold - s->mp.floor_hold_ns;

		s->lim.floor_until_ns = s->lim.floor_until_ns > less ? s->lim.floor_until_ns - less : 0;
	}
	sluice_limit_reconfigure(&s->lim, &s->mp);
}

void service_ctl_reset_baseline(struct service_ctl *s)
{
	sluice_baseline_reset(&s->base);
	sluice_baseline_reset(&s->base_little);
	sluice_baseline_reset(&s->base_mean);
}

/* The latency the limit steers by for a decided window: its quantile (the median), or, in a
 * window in which the limit bound throughout (it refused a tenth of the arrivals or more: an
 * overload, not a burst) and the median is within the objective, the median's baseline x the
 * rise of the mean time in the service over its unloaded value, where that is higher. A median
 * does not see the queue of a backend that does not serve its queue in order: on Apache (16
 * workers x 50 ms, its queue not FIFO) a limit of 24 kept 8 requests waiting while the median
 * read 60 ms against a 53 ms baseline (1.13x, within the 1.2x objective) and the gradient cut
 * by 1 a window and stopped at 22-23; L0's p99 paid 1.87x. The mean time in the service sees
 * it whatever the order: 24 in flight at 310 per second is 77 ms (1.45x), and the gradient's
 * limit x aim / latency is then the throughput x aim, the knee plus the aim's margin. Two
 * estimates of it must agree (the lower rise counts): the samples' mean (after a cut it still
 * carries the long waits of units admitted before it: a few ticks of them moved a window's
 * mean 20 % while its median and in-flight had come down) and Little's law, the window's mean
 * in-flight / its completion rate (in-flight may hold units that are not the samples' work:
 * connections not yet sending, requests that end without an answer). Each is compared with its
 * own unloaded value (base_mean, base_little: the median of the same windows' values, learned
 * by the same rules), never with the median's, so a backend whose mean is naturally above its
 * median is not read as queueing. Only where the limit binds throughout (in calm it does not
 * shape the queue, and a burst of reconnections that meets a calm threshold moves both
 * estimates for a tick or two) and the median is within the objective (above it the median
 * sees the queue already, and a blip's few calls that took ten times as long are not
 * concurrency). */
static double limit_signal(const struct service_ctl *s, const struct sluice_evwin_result *r,
			   double little_us, int bound)
{
	double x, xl, m;

	if (!bound || little_us <= 0 || r->mean_us <= 0 || s->base_little.value_us <= 0 ||
	    s->base_mean.value_us <= 0 || s->base.value_us <= 0 ||
	    r->latency_us > s->objective_us)
		return r->latency_us;
	x = r->mean_us / s->base_mean.value_us;
	xl = little_us / s->base_little.value_us;
	m = (xl < x ? xl : x) * s->base.value_us;
	return m > r->latency_us ? m : r->latency_us;
}

/* Objective and aim from the baseline and the config; 0 = not known. */
static void objective(struct service_ctl *s)
{
	double b = s->base.value_us;

	if (s->slo_abs_us > 0) {
		s->objective_us = s->slo_abs_us;
		s->aim_us = b > 0 && b < s->slo_abs_us ? (b + s->slo_abs_us) / 2 : 0.9 * s->slo_abs_us;
	} else if (b > 0) {
		s->objective_us = s->slo_ratio * b;
		s->aim_us = b * (1 + s->slo_ratio) / 2;
	} else {
		s->objective_us = s->aim_us = 0;
	}
}

/* The breaker counts a call slower than slow_call as a failure, the limiter counts one within
 * the objective as on target: with the objective above slow_call, calls the limiter is
 * content with open the breaker on a healthy backend. `sluiced --check` warns of a written
 * objective below slow_call; a learned one is known only here, so it is said here: an alert
 * when the objective rises past slow_call, a note when it falls back. */
static void slow_call_check(struct service_ctl *s, uint64_t now_ns,
			    const struct sluice_event_sink *sink)
{
	int under = s->objective_us > 0 && s->objective_us > (double)s->bp.slow_call_us;
	struct sluice_event ev;

	if (under == s->slow_call_under)
		return;
	s->slow_call_under = under;
	if (!sink || !sink->fn)
		return;
	sluice_event_init(&ev, now_ns, under ? SLUICE_EV_ALERT : SLUICE_EV_INFO, sink->service,
			  SLUICE_EVM_BREAKER, under ? "slow_call_above_objective" :
			  "slow_call_below_objective", under ? "slow_call_below_objective" :
			  "slow_call_above_objective",
			  under ? "latency objective above breaker slow_call_ms: calls on target "
				  "count as slow; raise slow_call_ms or lower latency_slo" :
				  "latency objective back below breaker slow_call_ms");
	sluice_event_num(&ev, "objective_ms", s->objective_us / 1e3);
	sluice_event_num(&ev, "baseline_ms", s->base.value_us / 1e3);
	sluice_event_num(&ev, "slow_call_ms", (double)s->bp.slow_call_us / 1e3);
	sluice_event_emit(sink, &ev);
}

/* Whether the controller may raise L0's threshold above its headroom share: only under an
 * adaptive limit with adaptive headroom and no L0 percentage written. A fixed limit, fixed
 * headroom or a written L0 percentage is the operator's cap, in every mode and at every
 * moment (a throughput cut's drain included). */
static int l0_threshold_ours(const struct service_ctl *s)
{
	return !s->mp.fixed && !s->fixed_headroom && !s->l0_written;
}

/* A tcp service with an adaptive limit and adaptive headroom does not hold L0 to the limit.
 * Its unit is a connection, refused at the SYN: refusing an L0 connection refuses every
 * transaction the client meant to run on it (a client that connects per transaction counts
 * each refusal as a failed one), and it does not make the admitted L0 connections faster
 * when what slows them is L0's own connection setup (a database forked per connection on
 * shared CPUs). The limit still shapes L1..L3, whose thresholds count L0's busy connections,
 * so a busy L0 leaves them less room and they are shed first; L0 itself stays bounded by the
 * open-connection cap (max_connections) and by the ladder's last resort once the backend's
 * listen queue fills (l0_spared). A fixed limit, fixed headroom or a written L0 percentage is
 * the operator's cap and stays as written. */
static int tcp_l0_unheld(const struct service_ctl *s, const struct service_conf *sc)
{
	return sc->protocol == SLUICE_PROTO_TCP && l0_threshold_ours(s);
}

/* L0's threshold for such a service: the limit's upper bound (never below the limit). */
static void tcp_l0_threshold(const struct service_ctl *s, struct sluice_verdict *out)
{
	if (out->class_threshold[0] && out->class_threshold[0] < s->mp.max)
		out->class_threshold[0] = s->mp.max;
}

/* The ladder spares L0 unless the backend is saturated: its in-flight reached the limit in
 * force, or L0 was refused by it, or its listen queue is past a quarter of the backlog. A few
 * connections waiting to be accepted are not saturation, whatever the limit and headroom
 * modes: a database that forks per connection keeps L0's own reconnecting clients there (2 to
 * 5 of a backlog of 124 with 8 clients connecting per transaction; with a fixed limit and
 * fixed headroom the ladder cut L0 to 78 % on 3 of them, with no other traffic at all), and
 * refusing them makes none faster. Past a quarter (where the listen-queue overload is the
 * ladder's full step) the queue heads for overflow: dropped handshakes, clients waiting a
 * second for their retransmitted SYN. For a tcp service whose L0 the limit does not hold,
 * L0's busy connections above the limit are not saturation either (the limit no longer binds
 * L0): only the queue is. */
static int l0_spared(const struct service_ctl *s, const struct service_conf *sc, int queue_sat)
{
	int queue_full = queue_sat && 4ull * s->lq.last > s->lq.backlog;

	return !queue_full && (tcp_l0_unheld(s, sc) || !s->saturated);
}

/* L0's threshold from its room under an adaptive limit (control/headroom.h): at the limit's
 * max while L0's arrivals fit in half of what the backend served in the last 30 s, else the
 * limit plus what L0 leaves of it. Only with an adaptive limit, adaptive headroom and no L0
 * percentage written: a fixed limit or a written percentage is the operator's cap. */
static void l0_room_threshold(struct service_ctl *s, uint64_t now_ns,
			      struct sluice_verdict *out)
{
	uint32_t room;

	if (!l0_threshold_ours(s) || !out->class_threshold[0])
		return;
	if (s->served_sec != now_ns / 1000000000ull + 1) {
		s->served_max = sluice_l0room_served_max(&s->l0room, SLUICE_L0ROOM_SERVED_S, now_ns);
		s->served_sec = now_ns / 1000000000ull + 1;
	}
	room = sluice_headroom_l0_room(s->lim.limit, s->mp.max, s->l0room.l0_rate,
				       s->l0room.l0_inflight, s->served_max);
	if (room > out->class_threshold[0])
		out->class_threshold[0] = room;
}

/* The read gate (sluice.h, SLUICE_VERDICT_READ_GATE) for an http service: armed while the wait
 * probe runs and, within the last SLUICE_READ_GATE_HOLD_NS, a tick's requests waited on
 * average SLUICE_READ_GATE_AGE_NS or more before the server first read them: the server lets
 * requests queue at its door. A server that reads at once (calm, or one that takes every
 * request in and queues it inside) never arms it. What arms it is the probe's own evidence,
 * not the gate's refusals: a gate that refuses with nothing waiting (were a count ever off)
 * is disarmed by the next ticks' waits. */
static void read_gate_evidence(struct service_ctl *s, int wait_have, uint64_t wait_n,
			       uint64_t wait_ns, uint64_t now_ns)
{
	if (wait_have && wait_n && wait_ns / wait_n >= SLUICE_READ_GATE_AGE_NS)
		s->read_gate_until_ns = now_ns + SLUICE_READ_GATE_HOLD_NS;
}

static int read_gate_armed(const struct service_ctl *s, const struct service_conf *sc,
			   const struct ctl_inputs *in, uint64_t now_ns)
{
	return sc->protocol == SLUICE_PROTO_HTTP && sc->read_gate == READ_GATE_AUTO &&
	       in->wait_have && now_ns < s->read_gate_until_ns;
}

static void write_verdict(struct service_ctl *s, const struct service_conf *sc,
			  const struct ctl_inputs *in, uint64_t now_ns, struct sluice_verdict *out)
{
	uint32_t limit = s->lim.limit;

	memset(out, 0, sizeof(*out));
	out->limit = limit;
	if (s->fixed_headroom) {
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			out->class_threshold[c] = verdict_class_threshold((int)limit, sc->headroom[c]);
	} else {
		sluice_headroom_thresholds(limit, &s->hp, s->peaks, out->class_threshold);
		out->flags |= SLUICE_VERDICT_PRIORITY_COUNT;
		if (tcp_l0_unheld(s, sc))
			tcp_l0_threshold(s, out);
		l0_room_threshold(s, now_ns, out);
	}
	/* While a throughput cut's backlog drains, L0 keeps the limit it had: the backlog in front
	 * of it is the lower classes' (refusing L0 there would not make L0 faster; in the
	 * simulated step to 4x L0 lost 3.5 % of its arrivals to the cut limit during the drain).
	 * Not past the operator's cap: a written L0 percentage stays a cap during the drain too,
	 * and so does limit_max (the limit before the cut was set under the bounds then: a reload
	 * that lowered them since, or an import, leaves it above). */
	if (s->draining && l0_threshold_ours(s) && s->drain_l0 > out->class_threshold[0] &&
	    out->class_threshold[0])
		out->class_threshold[0] = s->drain_l0 < s->mp.max ? s->drain_l0 : s->mp.max;
	sluice_verdict_mark_shut(out);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		out->shed_prob[c] = sluice_prob_complement(s->lad.admit[c]);
		out->switch_shed[c] = sluice_prob_complement(in->switch_admit[c]);
	}
	if (read_gate_armed(s, sc, in, now_ns))
		out->flags |= SLUICE_VERDICT_READ_GATE;
	out->breaker_state = (uint32_t)s->brk.state;
	out->breaker_shed = sluice_prob_complement(sluice_breaker_admit(&s->brk, &s->bp));
	out->retry_after_s = (uint32_t)sc->retry_after_s;
	if (s->brk.state == SLUICE_BREAKER_OPEN) {
		uint32_t ra = sluice_breaker_retry_after_s(&s->brk, now_ns);
		if (ra > out->retry_after_s)
			out->retry_after_s = ra;
	}
}

/* The throughput cut (control/limit.h, sluice_limit_little), tick by tick, for http services
 * (a request's latency is the time it spends in the backend; a tcp turn's need not be), unless
 * a window just decided; once per descent. In-flight and the completion rate are current, so
 * it may cut within a window cut's dead time. Its own dead time (the next tick restarts the
 * evidence window) lasts two latencies, and at least until in-flight has come down to the new
 * limit (or what was in flight could have completed at the tick's rate) and one aim after
 * that: those units were admitted under the old limit, and their samples lag (on Apache a
 * window closed on them cut 26 -> 13, below the knee). */
static void throughput_cut(struct service_ctl *s, const struct service_conf *sc,
			   const struct ctl_inputs *in, uint64_t now_ns, uint64_t dt_ns,
			   uint64_t span_ns, int decided, const struct sluice_event_sink *sink)
{
	const struct sluice_class_signals *t = &s->sig.total;
	uint32_t inflight = in->inflight.total > 0 ?
		(in->inflight.total > UINT32_MAX ? UINT32_MAX : (uint32_t)in->inflight.total) : 0;
	uint64_t dead;
	struct sluice_little_input li = {
		/* responses, from the latency samples: on http the completion counter also counts
		 * connections that end (on Apache at 4x it read 413/s for 313 responses/s) */
		.rate = (double)t->samples * 1e9 / (double)span_ns,
		.inflight_prev = s->prev_inflight[0] < s->prev_inflight[1] ? s->prev_inflight[0] :
				 s->prev_inflight[1],
		.inflight = inflight, .tick_p50_us = t->p50_us,
		.samples = t->samples, .window_rate = s->last_rate, .aim_us = s->aim_us, .objective_us = s->objective_us,
	};

	s->prev_inflight[1] = s->prev_inflight[0];
	s->prev_inflight[0] = inflight;
	if (s->draining && (inflight <= s->lim.limit || now_ns >= s->drain_until_ns)) {
		/* the backlog has drained; what completes within one more aim waited behind its
		 * tail */
		s->draining = 0;
		dead = now_ns + (uint64_t)(s->aim_us * 1e3);
		if (dead > s->dead_until_ns)
			s->dead_until_ns = dead;
	}
	if (!s->lim.ref_peak)
		s->little_spent = 0;          /* no descent under way: the next may cut once */
	if (decided || !dt_ns || !span_ns || s->little_spent ||
	    !sluice_limit_little(&s->lim, &s->mp, &li, now_ns, sink))
		return;
	s->little_spent = 1;
	s->draining = inflight > s->lim.limit;
	s->drain_l0 = s->lim.ref_est > s->lim.limit ? (uint32_t)(s->lim.ref_est + 0.5) : 0;
	s->drain_until_ns = now_ns + (uint64_t)((double)inflight / li.rate * 1e9);
	/* and, as after any cut, the samples of the next two latencies were admitted before it */
	dead = now_ns + (uint64_t)(2 * li.tick_p50_us * 1e3);
	if (dead < s->drain_until_ns)
		dead = s->drain_until_ns;
	if (dead > s->dead_until_ns)
		s->dead_until_ns = dead;
}

/* Recovery evidence: this tick's latency samples within the objective, counted from the
 * histograms sample by sample (interpolated inside the bucket that holds the objective): a
 * tick whose median is within it may hold many that are not. The classes in `skip` did not
 * move (or wait for a later tick); a recreated histogram counts from zero
 * (sluice_hist_delta). */
static uint64_t samples_within(const struct service_ctl *s,
			       const struct sluice_hist *const now_h[SLUICE_NUM_CLASSES],
			       unsigned skip, double objective_us)
{
	static __thread struct sluice_hist d;   /* 840 bytes: not on the stack */
	double n = 0;

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		uint64_t total;

		if (skip & (1u << c))
			continue;
		sluice_hist_delta(&s->prev_h[c], now_h[c], &d);
		total = sluice_hist_count(&d);
		if (total)
			n += (double)total - sluice_hist_above_us(&d, (uint64_t)objective_us);
	}
	return n > 0 ? (uint64_t)(n + 0.5) : 0;
}

/* 1 while the ladder holds any class below full admission (a recovery may be under way). */
static int ladder_below_full(const struct service_ctl *s)
{
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		if (s->lad.admit[c] != SLUICE_PROB_ONE)
			return 1;
	return 0;
}

/* A tick longer than a window and a tick, in a window that has seen something: the clock
 * leapt over a stretch nothing ran in (a VM paused and resumed, its monotonic clock moving on)
 * or sluiced stood still. The window's rates over that gap are not the backend's: a window
 * decided on it read 0.1 responses a second for 300 after a ten-minute pause, and the
 * evidence floor took that fall of the rate for a cut that shed work without lowering
 * latency (the descent undone, the limit pinned for 30 windows). Such a window starts afresh.
 * A window that has seen nothing yet has no gap to carry (sluice_evwin_idle_until). */
static int ticks_stood_still(const struct service_ctl *s, uint64_t dt_ns)
{
	const struct sluice_evwin *w = &s->win;

	return dt_ns > s->window_ns + s->tick_ns &&
	       (w->samples || w->calls || w->arrivals || w->active_ns);
}

/* Class c's histogram this tick: where the caller points, or in->hist[c]. */
static const struct sluice_hist *hist_now(const struct ctl_inputs *in, int c)
{
	return in->hist_at[c] ? in->hist_at[c] : &in->hist[c];
}

/* Fast growth (control/limit.h, sluice_limit_grow), tick by tick. A limit set in calm follows
 * the demand from above with a margin of 2; when the load then rises on a backend far from its
 * knee, the window's probe (sqrt(limit) per window) would refuse healthy work for seconds. So
 * while the limit is still the one set in calm (no cut since, the objective not missed), each
 * tick in which it binds (it refused units, or in-flight reached it) while the backend serves
 * what it admits within the aim (the tick's median, and in-flight / the tick's response rate:
 * by Little's law the time a unit now spends in the backend) grows it by sqrt(limit). At the
 * start of a surge the limit binds too; above the knee in-flight / rate shows the queue (22
 * over 310 responses/s is 71 ms against a 58 ms aim) and it does not grow, but a calm limit
 * within a tenth of the knee cannot be told from a healthy rise there, hence sqrt(limit) per
 * tick and not a factor: on Apache a x 1.5 taken at a surge's first tick (26 -> 39) was then
 * pinned by the evidence floor for the whole surge. The first cut ends the calm. */
static void fast_growth(struct service_ctl *s, const struct ctl_inputs *in, uint64_t now_ns,
			uint64_t span_ns, int decided, int queue_sat, uint64_t gate_n,
			const struct sluice_event_sink *sink)
{
	const struct sluice_class_signals *t = &s->sig.total;
	uint32_t inflight = in->inflight.total > 0 ?
		(in->inflight.total > UINT32_MAX ? UINT32_MAX : (uint32_t)in->inflight.total) : 0;
	/* the read gate's refusals are not the limit binding (see mi.bound) */
	int bound = t->rejected[SLUICE_REJ_HEADROOM] > gate_n ||
		    (inflight && inflight >= s->lim.limit);
	double rate = span_ns ? (double)t->samples * 1e9 / (double)span_ns : 0;

	if (s->lim.cuts != s->calm_cuts || s->above_since_ns)
		s->calm_set = 0;               /* a cut, or the objective missed: not calm */
	if (!bound || !s->calm_set || decided || s->draining || now_ns < s->dead_until_ns ||
	    queue_sat || s->aim_us <= 0 || t->samples < 5 || t->p50_us > s->aim_us ||
	    (double)inflight * 1e6 > s->aim_us * rate)
		return;
	sluice_limit_grow(&s->lim, &s->mp, t->p50_us, inflight, now_ns, sink);
}

/* The counters now become the last ones. The histograms' snapshot is taken by the signals'
 * delta (sluice_signals_step) but on the first tick, whose histograms are copied here: after
 * either, prev_h holds the histograms now (for the classes the caller marked in hist_same,
 * the last tick's, equal to them). */
static void snapshot(struct service_ctl *s, const struct ctl_inputs *in, uint64_t now_ns)
{
	memcpy(s->prev, in->stats, sizeof(s->prev));
	if (!s->have_prev)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			s->prev_h[c] = *hist_now(in, c);
	s->prev_ns = now_ns;
	if (!s->have_prev || !in->hist_deferred)
		s->qspan_ns = now_ns;
	s->have_prev = 1;
}

/* The probe's waits since the last tick into *n, *ns; 0 when there are none to count: no probe
 * this tick, or none at the last (a first reading is a snapshot, never a delta), or counters
 * that went backwards (a new probe counts from zero). */
static int wait_delta(struct service_ctl *s, const struct ctl_inputs *in, uint64_t *n,
		      uint64_t *ns)
{
	int have = in->wait_have && s->have_prev_wait && in->wait.count >= s->prev_wait.count &&
		   in->wait.sum_ns >= s->prev_wait.sum_ns;

	*n = have ? in->wait.count - s->prev_wait.count : 0;
	*ns = have ? in->wait.sum_ns - s->prev_wait.sum_ns : 0;
	s->prev_wait = in->wait_have ? in->wait : (struct sluice_wait_stats){ 0 };
	s->have_prev_wait = in->wait_have;
	return have;
}

/* This tick's read-gate refusals. The counts move only while the gate is armed, so a tick that
 * did not read them (the gate not armed) keeps the last snapshot: the next read's delta is
 * still refusals of this service's gate. Counts that went back (the data path loaded anew:
 * its map is not pinned) are a new snapshot. */
static uint64_t gate_delta(struct service_ctl *s, const struct ctl_inputs *in)
{
	uint64_t d;

	if (!in->gate_have)
		return 0;
	d = s->have_prev_gate && in->gate_refused >= s->prev_gate_refused ?
	    in->gate_refused - s->prev_gate_refused : 0;
	s->prev_gate_refused = in->gate_refused;
	s->have_prev_gate = 1;
	return d;
}

/* The knee from the wait before the server reads (control/waitknee.h) for the window just
 * decided: apply what the rule said after the limit's own decision. A trim goes only below
 * where the limit now is (the median's cut may have gone further: then there is no trim of
 * its own to judge); an undo only when the limit's own rules did not cut in this window. */
static void wait_knee_apply(struct service_ctl *s, int verdict, double to,
			    const struct sluice_evwin_result *r, uint64_t now_ns,
			    const struct sluice_event_sink *sink)
{
	if (verdict == SLUICE_WAITKNEE_TRIM) {
		if (!(to < s->lim.est &&
		      sluice_limit_move(&s->lim, &s->mp, to, "wait_above_allowance", r->wait_us,
					s->wk.last_allow_us, r->mean_us, now_ns, sink)))
			sluice_waitknee_forget(&s->wk);
	} else if (verdict == SLUICE_WAITKNEE_UNDO && s->lim.last_dir >= 0 && to > s->lim.est) {
		sluice_limit_move(&s->lim, &s->mp, to, "wait_did_not_follow", r->wait_us,
				  s->wk.last_allow_us, r->mean_us, now_ns, sink);
	}
}

/* The wait rule (waitknee.h) steers an adaptive gradient limit only. */
static int wait_rule_applies(const struct service_ctl *s)
{
	return !s->mp.fixed && s->mp.algorithm == SLUICE_LIMIT_GRADIENT;
}

/* The wait rule's view of a window, its responses per second given. */
static struct sluice_waitknee_input wait_input(const struct service_ctl *s,
					       const struct sluice_evwin_result *r, double rate)
{
	struct sluice_waitknee_input wi = {
		.waits = r->waits, .wait_us = r->wait_us, .mean_us = r->mean_us,
		.limit = s->lim.limit, .peak_inflight = r->peak_inflight,
		.bound = r->limit_rej > 0, .rate = rate,
	};

	return wi;
}

/* The window so far shows a deep queue in front of the server: queued by the wait rule
 * (waitknee.h) on its own samples, with at least half of the requests' time spent waiting (by
 * Little's law, half of what was in flight waiting). A short window's mean wait is noisier
 * than a whole one's: a closed loop's clients all connecting at the load's start read 11.7 ms
 * of 55 in one early window, whose trim (22 -> 18) then held the limit below the workers for
 * the rest of a 7 s run (88.9 % goodput); a first start's queue is past half within a few
 * ticks. The rate is the responses' (a tcp service's turns may be more, which only makes an
 * early close rarer). */
static int window_shows_queue(const struct service_ctl *s, const struct sluice_evwin_result *r)
{
	struct sluice_waitknee_input wi = wait_input(s, r, r->active_ns ?
					(double)r->samples * 1e9 / (double)r->active_ns : 0);

	return sluice_waitknee_queued(&s->wk, &s->wp, &wi) > 0 &&
	       r->wait_us - s->wk.floor_us >= EARLY_WAIT_SHARE * r->mean_us;
}

/* Early only for a new trim: a trim's judgement needs its whole window, which holds the
 * backlog's drain (the first start's 154 -> 79 moved the wait from 249 to 185 ms, not below
 * half: judged on a short window, two such trims in a row would undo themselves). */
static int wait_may_decide(const struct service_ctl *s, uint64_t now_ns)
{
	return wait_rule_applies(s) && !s->win.wait_gap &&
	       !s->wk.ref_limit && s->win.waits >= s->wp.min_samples &&
	       now_ns >= s->wk.off_until_ns &&
	       (double)s->win.wait_ns / (double)s->win.waits / 1e3 - s->wk.floor_us >
	       s->wp.allow_min_us;
}

/* Every decided window of an adaptive limit, as a debug event (`sluiced -v`, machine `aimd`,
 * why `window`): what the window saw, what the limit did, and what the wait rule said of it.
 * The limit's own events name only the moves; why a limit stays where it is (22 in front of
 * 16 workers, say, while nothing is cut) is in the windows between them: a signal at the aim,
 * a wait within its allowance, a window that was not bound. wait_us is the window's mean wait,
 * -1 where the wait rule found it unmeasured (queued < 0: no probe, or too few waits);
 * wait_verdict is enum sluice_waitknee_verdict (0 the limit's own rules, 1 no growth, 2 trim,
 * 3 undo). */
static void report_window(const struct service_ctl *s, const struct sluice_evwin_result *r,
			  const struct sluice_limit_input *mi, uint32_t before, int queued,
			  int wait_verdict, uint64_t now_ns, const struct sluice_event_sink *sink)
{
	struct sluice_event ev;

	if (!sink || !sink->fn || s->mp.fixed)
		return;
	sluice_event_init(&ev, now_ns, SLUICE_EV_DEBUG, sink->service, SLUICE_EVM_AIMD, "limit",
			  "limit", "window");
	sluice_event_num(&ev, "limit_from", before);
	sluice_event_num(&ev, "limit_to", s->lim.limit);
	sluice_event_num(&ev, "latency_us", mi->latency_us);
	sluice_event_num(&ev, "aim_us", mi->aim_us);
	sluice_event_num(&ev, "peak_inflight", r->peak_inflight);
	sluice_event_num(&ev, "bound", mi->bound);
	sluice_event_num(&ev, "samples", (double)r->samples);
	sluice_event_num(&ev, "waits", (double)r->waits);
	sluice_event_num(&ev, "wait_us", queued >= 0 ? r->wait_us : -1);
	sluice_event_num(&ev, "wait_floor_us", s->wk.floor_us);
	sluice_event_num(&ev, "allowance_us", sluice_waitknee_allowance(&s->wp, r->mean_us));
	sluice_event_num(&ev, "wait_verdict", wait_verdict);
	sluice_event_emit(sink, &ev);
}

/* Decide on the evidence window when it is full, or early on overload evidence: at least one
 * feedback delay old (a tick, and twice the last latency, so the samples show what the last
 * decision did) with enough samples above the objective, or enough measured waits that show a
 * deep queue (window_shows_queue). The wait's early close matters most when an overload
 * begins: the queue is there from the first tick of it, and every request admitted into it
 * waits the whole window out (a first start on Apache: admitted p99 326-328 ms with it,
 * 625-628 ms without; docs/CONTROLLER.md, "Deciding on the wait early"). Fills r; returns 1 to
 * decide. */
static int window_decides(struct service_ctl *s, const struct sluice_hist *cur_h,
			  uint64_t now_ns, uint64_t dt_ns, struct sluice_evwin_result *r, int *full)
{
	uint64_t age = now_ns - s->win.start_ns, delay = dt_ns;
	double lat2 = 2e3 * s->last_latency_us;
	int by_median, by_wait;

	*full = sluice_evwin_full(&s->win, now_ns, s->window_ns, s->min_samples);
	/* an early close is considered only when this tick's own median is above the objective
	 * or the window's mean wait is above the smallest allowance (the tick's signals and the
	 * window's sums have these already; the window's quantiles cost a merge) */
	by_median = s->win.samples >= s->min_samples && s->objective_us > 0 &&
		    s->sig.total.p50_us > s->objective_us;
	by_wait = wait_may_decide(s, now_ns);
	if (!*full && !by_median && !by_wait)
		return 0;
	if (lat2 > (double)delay)
		delay = (uint64_t)lat2;
	if (!*full && age < delay)
		return 0;
	sluice_evwin_result(&s->win, cur_h, s->quantile, s->min_samples, now_ns, r);
	return *full || r->top_us > s->objective_us || r->latency_us > s->objective_us ||
	       (by_wait && window_shows_queue(s, r));
}

void service_ctl_tick(struct service_ctl *s, const struct service_conf *sc,
		      const struct ctl_inputs *in, int suppressed, uint64_t now_ns,
		      const struct sluice_event_sink *sink, struct sluice_verdict *out, int *opened)
{
	struct sluice_service_signals *sig = &s->sig;
	struct sluice_overload_input oi = { 0 };
	struct sluice_ladder_input li = { 0 };
	struct sluice_breaker_input bi;
	struct sluice_evwin_result r;
	const struct sluice_hist *cur_h = s->prev_h;     /* the histograms now, once snapshot */
	uint64_t dt_ns, span_ns, wait_n, wait_ns, gate_n;
	int rc, full, queue_sat, decided, wait_have;
	double qx;
	uint64_t within = 0;

	*opened = 0;
	if (!s->have_prev) {
		/* cumulative counters are not one tick's delta: only remember where they are */
		wait_delta(s, in, &wait_n, &wait_ns);
		gate_delta(s, in);
		snapshot(s, in, now_ns);
		sluice_evwin_reset(&s->win, now_ns, cur_h);
		objective(s);
		write_verdict(s, sc, in, now_ns, out);
		return;
	}
	dt_ns = now_ns - s->prev_ns;
	/* the samples counted this tick are those since the last tick that read every
	 * histogram that moved (the last tick, but for deferred ones): rates of them are over
	 * that span */
	span_ns = in->hist_deferred ? dt_ns : now_ns - (s->qspan_ns ? s->qspan_ns : s->prev_ns);
	{
		const struct sluice_hist *now_h[SLUICE_NUM_CLASSES];

		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			now_h[c] = hist_now(in, c);
		/* read before the step makes prev_h the histograms now; only a recovery uses it */
		if (s->objective_us > 0 && ladder_below_full(s))
			within = samples_within(s, now_h, in->hist_same | in->hist_deferred,
						s->objective_us);
		/* a deferred class is left as it was, as one that did not move: its samples
		 * stay in the maps' histogram for the next tick that reads it */
		sluice_signals_step(s->prev, in->stats, s->prev_h, now_h,
				    in->hist_same | in->hist_deferred, dt_ns,
				    (uint64_t)s->bp.slow_call_us, sig);
		sig->deferred = in->hist_deferred;
	}
	snapshot(s, in, now_ns);
	wait_have = wait_delta(s, in, &wait_n, &wait_ns);
	read_gate_evidence(s, wait_have, wait_n, wait_ns, now_ns);
	gate_n = gate_delta(s, in);
	/* after a cut, samples completing within two latencies were admitted before it: they say
	 * nothing about the new limit (dead time), so the next window starts after them */
	if (now_ns - dt_ns < s->dead_until_ns ||      /* the tick began in the dead time */
	    s->draining ||                            /* a throughput cut's backlog drains */
	    sig->total.reset ||                       /* maps recreated: start afresh */
	    ticks_stood_still(s, dt_ns))              /* a gap in a window under way */
		sluice_evwin_reset(&s->win, now_ns, cur_h);
	else {
		/* a window that has seen nothing yet: its active time begins with the tick that
		 * brings something, at most one tick before now (after a quiet stretch that
		 * sluiced did not tick, this tick's dt is the whole stretch: counted as active,
		 * it read a service that just woke as one serving a trickle) */
		if (now_ns > s->tick_ns)
			sluice_evwin_idle_until(&s->win, now_ns - s->tick_ns);
		sluice_evwin_add(&s->win, sig, in->inflight.total, now_ns);
		sluice_evwin_add_wait(&s->win, wait_have, wait_n, wait_ns);
		sluice_evwin_add_gate(&s->win, gate_n);
	}

	bi.completed = sig->total.completed;
	bi.errors = sig->total.errors;
	bi.resp_429 = sig->total.resp_429;
	bi.slow = sig->total.slow;
	bi.suppressed = suppressed;
	bi.classes = &s->brk_cls;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		bi.class_completed[c] = sig->cls[c].completed;
		bi.class_errors[c] = sig->cls[c].errors;
		bi.class_429[c] = sig->cls[c].resp_429;
		bi.class_slow[c] = sig->cls[c].slow;
	}
	rc = sluice_breaker_tick(&s->brk, &s->bp, &bi, now_ns, sink);
	*opened = (rc & SLUICE_BRK_OPENED) != 0;

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		li.demand[c] = sig->cls[c].arrivals;
	objective(s);
	queue_sat = sluice_listenq_tick(&s->lq, &in->listen, s->window_ns, now_ns, sink);
	decided = window_decides(s, cur_h, now_ns, dt_ns, &r, &full);
	if (decided) {
		struct sluice_baseline_window bw = {
			.samples = r.samples, .latency_us = r.latency_us, .calls = r.calls,
			.errors = r.errors, .resp_429 = r.resp_429,
			.saturated = r.peak_inflight >= 0.9 * s->lim.limit || r.headroom_rej > 0,
		};
		struct sluice_limit_input mi;
		struct sluice_waitknee_input wi;
		int queued, wv = SLUICE_WAITKNEE_NONE;
		double wto = 0;
		int over, limit_helps, http = sc->protocol == SLUICE_PROTO_HTTP;
		double little_us;
		uint64_t cuts0;
		uint32_t lim_in_force = s->lim.limit;

		/* completions: the calls, or the latency samples where those are more (a tcp
		 * service's turns on connections that stay open); on http the responses (the
		 * latency samples) only: its completion counter also counts the connections that
		 * end, and a backend that closes idle keep-alive connections while its workers
		 * are busy (Apache) read 413 completions/s for 313 responses/s, so the rate fell
		 * after a cut that removed only queue, and the evidence floor undid the cut */
		mi.rate = r.active_ns ? (double)(!http && r.calls > r.samples ? r.calls : r.samples) *
					1e9 / (double)r.active_ns : 0;
		little_us = mi.rate > 0 ? r.mean_inflight / mi.rate * 1e6 : 0;
		wi = wait_input(s, &r, mi.rate);
		queued = sluice_waitknee_queued(&s->wk, &s->wp, &wi);
		/* a measured queue never teaches the baseline */
		bw.queued = queued > 0;
		sluice_baseline_add(&s->base, &s->blp, &bw);
		bw.latency_us = little_us;
		sluice_baseline_add(&s->base_little, &s->llp, &bw);
		bw.latency_us = r.mean_us;
		sluice_baseline_add(&s->base_mean, &s->llp, &bw);
		objective(s);
		slow_call_check(s, now_ns, sink);
		mi.latency_us = limit_signal(s, &r, little_us,
					     r.limit_rej > 0 && 10 * r.limit_rej >= r.arrivals);
		mi.aim_us = s->aim_us;
		mi.base_us = s->base.value_us;
		mi.objective_us = s->objective_us;
		mi.peak_inflight = r.peak_inflight;
		/* the limit bound: its own refusals, not the read gate's (raising a limit the gate
		 * refuses under moves nothing, and on the bench's step it took the limit to 42-101
		 * on 16 workers, where it came to 20 without the gate, for whatever follows the
		 * gate's end: docs/CONTROLLER.md, "The gate's refusals are not the limit's") */
		mi.bound = r.limit_rej > 0;
		mi.full = full;
		mi.queue_saturated = queue_sat;
		mi.samples = r.samples;
		/* the recent peak: a window's peak sampled at ticks misses bursts between them,
		 * and one quiet window says little (with x 0.8 per window the simulated 0.5x load
		 * on 16 x 20 ms followed its quietest windows and refused Poisson bursts 10 s
		 * after a surge) */
		s->calm_peak = s->calm_peak * CALM_PEAK_DECAY > r.peak_inflight ?
			       s->calm_peak * CALM_PEAK_DECAY : r.peak_inflight;
		mi.calm_peak = s->calm_peak;
		{
			double calls_r = dt_ns && !http ? (double)sig->total.calls * 1e9 /
							  (double)dt_ns : 0,
			       samples_r = span_ns ? (double)sig->total.samples * 1e9 /
						     (double)span_ns : 0;

			mi.tick_rate = calls_r > samples_r ? calls_r : samples_r;
		}
		mi.tick_latency_us = sig->total.p50_us;
		/* the wait finds the knee near it; above the aim the median's own cut acts (a
		 * wait trim in the same window cut a surge's limit twice, below the workers),
		 * and a trim under way is not judged on that cut's window */
		if (wait_rule_applies(s)) {
			if (s->aim_us <= 0 || mi.latency_us <= s->aim_us)
				wv = sluice_waitknee_decide(&s->wk, &s->wp, &wi, now_ns, &wto);
			else
				sluice_waitknee_forget(&s->wk);
		}
		mi.no_growth = wv == SLUICE_WAITKNEE_HOLD || wv == SLUICE_WAITKNEE_TRIM;
		cuts0 = s->lim.cuts;
		sluice_limit_decide(&s->lim, &s->mp, &mi, now_ns, sink);
		wait_knee_apply(s, wv, wto, &r, now_ns, sink);
		report_window(s, &r, &mi, lim_in_force, queued, wv, now_ns, sink);
		/* a full window within the aim in which the limit did not bind: the limit is one
		 * set in calm (fast growth may raise it) until the next cut */
		if (full && r.latency_us <= s->aim_us && !mi.bound && s->lim.cuts == cuts0 &&
		    r.peak_inflight < s->lim.limit) {
			s->calm_set = 1;
			s->calm_cuts = s->lim.cuts;
		}
		s->last_rate = mi.rate;
		/* what the backend proved it serves: answers that were not errors (a backend
		 * failing fast serves nothing) */
		if (r.active_ns && r.samples > r.errors) {
			sluice_l0room_served(&s->l0room, (double)(r.samples - r.errors) * 1e9 /
					     (double)r.active_ns, now_ns);
			s->served_sec = 0;
		}
		/* a backend whose in-flight stayed below the limit (and no L0 refused by it) is
		 * not saturated: refusing L0 would not make L0 faster */
		s->saturated = r.peak_inflight >= lim_in_force || s->win.cls_headroom_rej[0] > 0;
		if (s->lim.last_dir < 0)
			s->dead_until_ns = now_ns + (uint64_t)(2 * r.latency_us * 1e3);
		s->windows++;
		s->last_latency_us = r.latency_us;
		s->last_top_us = r.top_us;
		s->last_samples = r.samples;

		over = s->objective_us > 0 && r.top_us > s->objective_us;
		if (!over)
			s->above_since_ns = 0;
		else if (!s->above_since_ns)
			s->above_since_ns = now_ns;
		/* the limit can still help while it is adaptive, above its floor, cut this
		 * window, and the objective has not been missed for longer than takeover */
		limit_helps = !s->mp.fixed && s->lim.limit > s->mp.min && s->lim.last_dir < 0 &&
			      now_ns - s->above_since_ns < s->takeover_ns;
		/* and a single window over the objective is noise or a blip, not yet a reason to
		 * refuse a class: the ladder waits until it has been missed for a window's time */
		s->ladder_on_latency = over && !limit_helps &&
				       now_ns - s->above_since_ns >= s->window_ns;
		/* priority inversion is judged over the window too: a blip of refusals within
		 * one window is one decision, not one cut per tick */
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			oi.arrivals[c] = s->win.cls_arrivals[c];
			oi.headroom_rej[c] = s->win.cls_headroom_rej[c];
		}
		if (s->ladder_on_latency) {
			oi.latency_us = r.top_us;
			oi.target_us = s->objective_us;
			li.excess = r.top_us / s->objective_us - 1;
		}
		sluice_evwin_reset(&s->win, now_ns, cur_h);
	}
	throughput_cut(s, sc, in, now_ns, dt_ns, span_ns, decided, sink);
	fast_growth(s, in, now_ns, span_ns, decided, queue_sat, gate_n, sink);
	/* recovery evidence, tick by tick: the samples within the objective, while it is met */
	if (!s->above_since_ns && s->objective_us > 0)
		li.good_samples = within;
	li.feedback_s = 2 * s->last_latency_us / 1e6;
	/* Priority inversion (a higher class refused by headroom while a lower one is admitted,
	 * over the window just decided) is the ladder's in every mode: it moves the lower classes
	 * out by admission probability before their share of the backend shows as latency. */
	li.overloaded = sluice_ladder_overloaded(&s->lad, &s->lp, &oi, NULL);
	if (li.overloaded && !s->ladder_on_latency)
		li.excess = -1;                 /* priority inversion: the full step */
	/* The listen queue: connections the backend has not even accepted. Saturated, it is an
	 * overload of its own once per window (when latency did not already say so: no responses
	 * may come back at all), and no recovery step passes while connections wait. */
	if (queue_sat)
		li.good_samples = 0;
	li.l0_spared = l0_spared(s, sc, queue_sat);
	if (!li.overloaded && sluice_listenq_overload(&s->lq, s->window_ns, now_ns, &qx)) {
		li.overloaded = 1;
		li.excess = qx;
	}
	sluice_ladder_tick(&s->lad, &s->lp, &li, now_ns, sink);
	s->signal = sluice_evwin_signal(&s->win, now_ns, s->window_ns, s->min_samples, s->none_ns);

	{
		int64_t cls_inflight[SLUICE_NUM_CLASSES];
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			cls_inflight[c] = in->inflight.cls[c];
		sluice_peak_update(&s->peak, cls_inflight, now_ns);
		if (s->peaks_sec == now_ns / 1000000000ull + 1) {
			/* the same second: the update raised this second's bucket at most */
			for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
				uint32_t x = cls_inflight[c] > 0 ? (cls_inflight[c] > UINT32_MAX ?
					     UINT32_MAX : (uint32_t)cls_inflight[c]) : 0;

				if (x > s->peaks[c])
					s->peaks[c] = x;
			}
		} else {
			sluice_peak_get(&s->peak, 10, now_ns, s->peaks);
			s->peaks_sec = now_ns / 1000000000ull + 1;
		}
		sluice_l0room_tick(&s->l0room, sig->cls[0].arrivals, cls_inflight[0], dt_ns);
	}
	sluice_retrystorm_tick(&s->rs, &s->rp, sig->total.arrivals, sig->total.retransmits,
			       now_ns, sink);
	write_verdict(s, sc, in, now_ns, out);
}

/* ---- state across restarts ---- */

void ctl_state_export(const struct service_ctl *s, uint64_t now_ns, struct sluice_ctl_state *out)
{
	memset(out, 0, sizeof(*out));
	out->version = SLUICE_CTL_STATE_VERSION;
	out->size = sizeof(*out);
	out->exported_ns = now_ns;
	out->above_since_ns = s->above_since_ns;
	out->lim = s->lim;
	out->base = s->base;
	out->lad = s->lad;
	out->brk = s->brk;
	out->base_little_us = s->base_little.value_us;
	out->base_mean_us = s->base_mean.value_us;
	out->top_class_us = s->last_top_us;
}

/* The ladder's floor of L0, fixed point (control/ladder.h). */
static uint32_t l0_floor(const struct sluice_ladder_params *p)
{
	uint32_t pct = p->l0_floor_pct < 100 ? p->l0_floor_pct : 100;

	return (uint32_t)((uint64_t)pct * SLUICE_PROB_ONE / 100);
}

static void not_after(uint64_t *t, uint64_t now)
{
	if (*t > now)
		*t = now;
}

int ctl_state_adoptable(const struct sluice_ctl_state *st)
{
	if (st->version == SLUICE_CTL_STATE_VERSION && st->size == sizeof(*st))
		return SLUICE_CTL_STATE_VERSION;
	if (st->version == 3 && st->size == SLUICE_CTL_STATE_V3_SIZE)
		return 3;
	if (st->version == 2 && st->size == SLUICE_CTL_STATE_V2_SIZE)
		return 2;
	return 0;
}

/* The limit as the record has it, within this config: its bounds, and the evidence floor
 * (control/limit.h) held at most this config's floor_hold_ns from now. The floor's end is the
 * limit's one time that lies ahead, and a record written under a longer evidence window (30
 * windows of aimd_window_ms, which may be an hour each) or a damaged one would keep the limit
 * from being cut below the floor for as long as it says; a floor that is not a number would
 * compare false with everything, and no descent would ever set one again. */
static void import_limit(struct service_ctl *s, const struct sluice_limit *l, uint64_t now_ns)
{
	s->lim = *l;
	sluice_limit_reconfigure(&s->lim, &s->mp);         /* the bounds of this config */
	if (!(s->lim.floor > 0) || !isfinite(s->lim.floor)) {
		s->lim.floor = 0;
		s->lim.floor_until_ns = 0;
	}
	not_after(&s->lim.floor_until_ns, now_ns + s->mp.floor_hold_ns);
}

/* The breaker as the record has it, when its state and step are ones this build knows (else
 * it stays as initialised: closed), its times no later than now. */
static void import_breaker(struct service_ctl *s, const struct sluice_breaker *b, uint64_t now_ns)
{
	uint64_t sec = now_ns / 1000000000ull, rng = s->brk.rng;

	if (b->state < SLUICE_BREAKER_CLOSED || b->state > SLUICE_BREAKER_HALF_OPEN ||
	    b->step >= SLUICE_BRK_MAX_STEPS)
		return;
	s->brk = *b;
	/* the open time's jitter: a zero state stays zero (common/rng.h), every open would last
	 * 0.8 x open_s, and instances adopting such records would probe in step; this start's
	 * seed instead */
	if (!s->brk.rng)
		s->brk.rng = rng;
	not_after(&s->brk.since_ns, now_ns);
	not_after(&s->brk.step_start_ns, now_ns);
	/* The window's buckets are of the seconds up to now. One of a later second would be
	 * counted as that second's calls once it comes (the bucket is kept while its second
	 * matches): old failures opening the breaker minutes after the start. */
	for (int k = 0; k < SLUICE_BRK_MAX_WINDOW_S; k++)
		if (s->brk.ring[k].sec > sec)
			memset(&s->brk.ring[k], 0, sizeof(s->brk.ring[k]));
	if (s->brk.step >= s->bp.n_steps)
		s->brk.step = 0;
	/* the one time of the record that is meant to lie ahead: an open breaker waits at most
	 * this config's longest open time (open_s x 1.2) from now, whatever the record says (a
	 * longer open_s, another build's record, a damaged one would shed the service whole for
	 * as long as the record wants) */
	if (s->brk.state == SLUICE_BREAKER_OPEN)
		not_after(&s->brk.open_until_ns, now_ns + (uint64_t)(s->bp.open_s * 1.2 * 1e9));
}

int ctl_state_import(struct service_ctl *s, const struct sluice_ctl_state *st, uint64_t now_ns)
{
	int version = ctl_state_adoptable(st);

	if (!version)
		return -1;
	import_limit(s, &st->lim, now_ns);
	s->base = st->base;
	sluice_baseline_adopt(&s->base, &s->blp);          /* or forgotten: relearned */
	s->lad = st->lad;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		if (s->lad.admit[c] > SLUICE_PROB_ONE)
			s->lad.admit[c] = SLUICE_PROB_ONE;
	/* L0 never below its floor, as the ladder itself never cuts it: with every class at 0
	 * nothing is admitted, no sample comes back and no recovery step passes (a record no
	 * sluiced of this config wrote would shed the service whole for as long as it runs) */
	if (s->lad.admit[0] < l0_floor(&s->lp))
		s->lad.admit[0] = l0_floor(&s->lp);
	s->lad.step_good = 0;                              /* a step's evidence starts afresh */
	not_after(&s->lad.last_change_ns, now_ns);
	not_after(&s->lad.last_cut_ns, now_ns);
	not_after(&s->lad.last_overload_ns, now_ns);
	not_after(&s->lad.episode_ns, now_ns);
	import_breaker(s, &st->brk, now_ns);
	s->above_since_ns = st->above_since_ns;
	not_after(&s->above_since_ns, now_ns);
	if (version >= 3) {
		sluice_baseline_seed(&s->base_little, st->base_little_us);
		sluice_baseline_seed(&s->base_mean, st->base_mean_us);
		s->last_top_us = st->top_class_us > 0 ? st->top_class_us : 0;
	}
	/* the first tick after an import takes a snapshot, never a delta */
	s->have_prev = 0;
	objective(s);
	return 0;
}

int ctl_state_import_learned(struct service_ctl *s, const struct sluice_ctl_state *st,
			     uint64_t now_ns)
{
	int version = ctl_state_adoptable(st);

	(void)now_ns;
	if (!version)
		return -1;
	s->base = st->base;
	sluice_baseline_adopt(&s->base, &s->blp);          /* or forgotten: relearned */
	if (version >= 3) {
		sluice_baseline_seed(&s->base_little, st->base_little_us);
		sluice_baseline_seed(&s->base_mean, st->base_mean_us);
	}
	s->have_prev = 0;
	objective(s);
	return 0;
}

uint32_t service_ctl_quantile_hold(const struct service_ctl *s, uint64_t next_ns)
{
	uint64_t lack;

	if (!s->have_prev || s->brk.state != SLUICE_BREAKER_CLOSED || s->lad.overloaded ||
	    s->above_since_ns || s->draining || s->prev_ns < s->dead_until_ns || s->lq.since_ns)
		return 0;        /* (in a cut's dead time each tick starts the window afresh) */
	if (ladder_below_full(s))
		return 0;        /* recovery steps count each tick's good samples */
	if (next_ns - s->win.start_ns < s->window_ns)
		return SLUICE_QUANTILE_HOLD;
	lack = s->win.samples < s->min_samples ? s->min_samples - s->win.samples : 1;
	return lack < SLUICE_QUANTILE_HOLD ? (uint32_t)lack : SLUICE_QUANTILE_HOLD;
}

int service_ctl_settled(const struct service_ctl *s)
{
	if (!s->have_prev || s->brk.state != SLUICE_BREAKER_CLOSED || s->lad.overloaded ||
	    s->rs.active || s->rs.arrivals || s->rs.streak || s->win.samples || s->win.arrivals ||
	    s->above_since_ns || s->lq.since_ns)
		return 0;
	return !ladder_below_full(s);
}

/* Every cache line of [p, p + len) towards the L2 (written soon: prefetch for a write). */
static inline void prefetch_range(const void *p, size_t len)
{
	const char *c = (const char *)((uintptr_t)p & ~(uintptr_t)63), *end = (const char *)p + len;

	for (; c < end; c += 64)
		__builtin_prefetch(c, 1, 2);
}

void service_ctl_prefetch(const struct service_ctl *s, uint64_t now_ns)
{
	uint64_t sec = now_ns / 1000000000ull, w = s->bp.window_s ? s->bp.window_s : 1;

	/* the breaker's buckets of its window, the seconds before now in its ring, and the one
	 * before them whose share it adds: each (two to a line at best; every other one asked
	 * for left one line in six unasked, and the window's sum was an eighth of the tick) */
	if (w > SLUICE_BRK_MAX_WINDOW_S)
		w = SLUICE_BRK_MAX_WINDOW_S;
	for (uint64_t i = 0; i <= w && i <= sec; i++)
		__builtin_prefetch(&s->brk.ring[(sec - i) % SLUICE_BRK_MAX_WINDOW_S], 1, 2);
	/* the baseline's value, parameters, machines, last counters, signals, status and the
	 * breaker's head: one block (the baseline's ring before it is not read) */
	{
		size_t from = offsetof(struct service_ctl, base) + offsetof(struct sluice_baseline, count);

		prefetch_range((const char *)s + from, offsetof(struct service_ctl, brk) +
			       offsetof(struct sluice_breaker, ring) - from);
	}
	/* this second's bucket of the peaks, and L0's averages */
	__builtin_prefetch(&s->peak.sec[sec % SLUICE_PEAK_BUCKETS], 1, 2);
	__builtin_prefetch(&s->peak.max[sec % SLUICE_PEAK_BUCKETS], 1, 2);
	prefetch_range(&s->l0room.l0_rate,
		       sizeof(s->l0room) - offsetof(struct sluice_l0room, l0_rate));
	/* the window's counters before its histograms */
	prefetch_range(&s->win, offsetof(struct sluice_evwin, base));
	/* this second's bucket of the breaker's counts by class (the window's are read only
	 * when the service's counts trip) */
	prefetch_range(&s->brk_cls.ring[sec % SLUICE_BRK_MAX_WINDOW_S],
		       sizeof(s->brk_cls.ring[0]));
}

void service_ctl_prefetch_hists(const struct service_ctl *s, unsigned mask)
{
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		if (mask >> c & 1)
			prefetch_range(&s->prev_h[c], sizeof(s->prev_h[c]));
}
