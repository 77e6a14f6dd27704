// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The limit algorithms (gradient, AIMD with and without the utilisation gate), the rolling
 * baseline and the evidence window, each alone. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "control/limit.h"
#include "control/baseline.h"
#include "control/window.h"
#include "evcap.h"

#define MS 1000000ull
#define S  1000000000ull

static void params(struct sluice_limit_params *p, int alg, uint32_t min, uint32_t max)
{
	sluice_limit_params_default(p);
	p->algorithm = alg;
	p->min = min;
	p->max = max;
}

static struct sluice_limit_input win(double lat, double aim, double obj, uint32_t peak, int full)
{
	struct sluice_limit_input in = { .latency_us = lat, .aim_us = aim, .base_us = aim / 1.1,
					 .objective_us = obj, .peak_inflight = peak, .full = full,
					 .samples = 100 };
	return in;
}

static void test_start_and_fixed(void **st)
{
	struct sluice_limit_params p;
	struct sluice_limit l;
	struct sluice_limit_input in = win(50000, 11000, 12000, 30, 1);
	(void)st;
	params(&p, SLUICE_LIMIT_GRADIENT, 4, 100);
	sluice_limit_init(&l, &p);
	assert_int_equal(l.limit, 30);          /* 0.3 x max */
	params(&p, SLUICE_LIMIT_GRADIENT, 50, 100);
	sluice_limit_init(&l, &p);
	assert_int_equal(l.limit, 50);          /* at least min */
	p.fixed = 64;
	sluice_limit_init(&l, &p);
	assert_int_equal(l.limit, 64);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, S, NULL), 64);
	/* no aim (no baseline, no absolute objective): hold, whatever the latency */
	params(&p, SLUICE_LIMIT_GRADIENT, 4, 100);
	sluice_limit_init(&l, &p);
	in.aim_us = 0;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, S, NULL), 30);
}

static void test_gradient_cuts_in_proportion(void **st)
{
	struct sluice_limit_params p;
	struct sluice_limit l;
	struct sluice_limit_input in;
	struct evcap c;
	struct sluice_event_sink sink = evcap_sink(&c, "web");
	(void)st;
	params(&p, SLUICE_LIMIT_GRADIENT, 4, 100);
	sluice_limit_init(&l, &p);
	/* latency 25 % above the aim: limit x 0.8 */
	in = win(13750, 11000, 12000, 30, 0);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, S, &sink), 24);
	assert_int_equal(l.last_dir, -1);
	assert_string_equal(c.ev[0].why, "latency_above_aim");
	assert_non_null(strstr(c.json[0], "\"limit_from\":30,\"limit_to\":24"));
	/* far above: never more than halved in one window */
	in = win(110000, 11000, 12000, 24, 0);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 2 * S, &sink), 12);
	/* down to the floor and no further */
	for (int i = 0; i < 5; i++)
		sluice_limit_decide(&l, &p, &in, (3 + (uint64_t)i) * S, &sink);
	assert_int_equal(l.limit, 4);
	assert_int_equal(l.cuts, 7);
	assert_int_equal(l.last_dir, -1);       /* it still tries: the controller sees the floor */
}

/* The evidence floor. 8 clients keep 8 connections busy; the latency (7.5 ms against a
 * 2.64 ms aim) comes from work the limit does not count, so it stays whatever the limit. The
 * first descent (8 x 0.5 = 4) halves the completions and not the latency: undone, to 8 + 2,
 * and no cut below that until the floor was held 30 s; then one descent tests it again. */
static void test_evidence_floor(void **st)
{
	struct sluice_limit_params p;
	struct sluice_limit l;
	struct sluice_limit_input in;
	struct evcap c;
	struct sluice_event_sink sink = evcap_sink(&c, "db");
	uint64_t t;
	(void)st;
	params(&p, SLUICE_LIMIT_GRADIENT, 4, 256);
	sluice_limit_init(&l, &p);
	l.est = 32;
	l.limit = 32;
	in = win(7500, 2640, 2880, 8, 1);
	in.rate = 1000;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, S, &sink), 4);
	in = win(7600, 2640, 2880, 4, 1);                 /* the cut bound: half the work */
	in.rate = 520;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 2 * S, &sink), 10);
	assert_string_equal(evcap_last(&c)->why, "cut_did_not_help");
	assert_int_equal(l.unhelpful, 1);
	assert_true(l.floor == 10);
	for (t = 3; t < 32; t++) {                        /* still above the objective: held */
		in = win(7500, 2640, 2880, 8, 1);
		in.rate = 1000;
		assert_int_equal(sluice_limit_decide(&l, &p, &in, t * S, &sink), 10);
		assert_int_equal(l.last_dir, 0);
	}
	/* the floor was held 30 s: the next descent tests it again */
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 33 * S, &sink), 5);
	assert_true(l.floor == 0);

	/* Short turns: the peak sampled at ticks does not fall below the 4 it read before (8
	 * clients of one-query connections), but the limit now refuses work and the completions
	 * fell by a third while the latency did not: judged by the refusals, floor 2 x 4. */
	sluice_limit_init(&l, &p);
	l.est = 69;
	l.limit = 69;
	in = win(2970, 2585, 2820, 4, 1);
	in.rate = 140;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, S, &sink), 4);
	in = win(4600, 2585, 2820, 4, 1);
	in.rate = 95;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 2 * S, &sink), 4);   /* not bound yet */
	in.bound = 1;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 3 * S, &sink), 8);
	assert_string_equal(evcap_last(&c)->why, "cut_did_not_help");
	/* refusals while the completions held (a queue removed above the knee) are no floor */
	sluice_limit_init(&l, &p);
	l.est = 69;
	l.limit = 69;
	in = win(2970, 2585, 2820, 4, 1);
	in.rate = 140;
	sluice_limit_decide(&l, &p, &in, S, &sink);
	in = win(4600, 2585, 2820, 4, 1);
	in.rate = 135;
	in.bound = 1;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 2 * S, &sink), 4);
	assert_true(l.floor == 0);

	/* A backlog draining after a cut: the concurrency fell, the samples still carry the old
	 * queue's wait, but the backend completes as fast as before. Latency does respond
	 * there: the descent goes on, no floor. */
	sluice_limit_init(&l, &p);
	l.est = 40;
	l.limit = 40;
	l.cuts = 1;                                       /* not the first descent */
	in = win(100000, 22000, 24000, 40, 1);
	in.rate = 400;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, S, &sink), 20);
	in = win(120000, 22000, 24000, 20, 1);
	in.rate = 400;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 2 * S, &sink), 10);
	assert_true(l.floor == 0);
	assert_int_equal(l.unhelpful, 0);
	/* and a descent that brought latency within the aim ends the reference */
	in = win(21000, 22000, 24000, 10, 1);
	in.rate = 400;
	sluice_limit_decide(&l, &p, &in, 3 * S, &sink);
	assert_int_equal(l.ref_peak, 0);
}

/* A saturated listen queue blocks growth in both algorithms (more concurrency would only
 * wait there); it does not block a cut. */
static void test_no_growth_while_listen_queue_saturated(void **st)
{
	struct sluice_limit_params p;
	struct sluice_limit l;
	struct sluice_limit_input in;
	(void)st;
	for (int alg = SLUICE_LIMIT_GRADIENT; alg <= SLUICE_LIMIT_AIMD; alg++) {
		params(&p, alg, 4, 1000);
		sluice_limit_init(&l, &p);
		l.est = 100;
		l.limit = 100;
		in = win(10000, 11000, 12000, 100, 1);
		in.bound = 1;
		in.queue_saturated = 1;
		assert_int_equal(sluice_limit_decide(&l, &p, &in, S, NULL), 100);
		in.queue_saturated = 0;
		assert_true(sluice_limit_decide(&l, &p, &in, 2 * S, NULL) > 100);
		in = win(30000, 11000, 12000, 100, 1);
		in.queue_saturated = 1;
		assert_true(sluice_limit_decide(&l, &p, &in, 3 * S, NULL) < 100);
	}
}

static void test_gradient_grows_only_when_used(void **st)
{
	struct sluice_limit_params p;
	struct sluice_limit l;
	struct sluice_limit_input in;
	(void)st;
	params(&p, SLUICE_LIMIT_GRADIENT, 4, 1000);
	sluice_limit_init(&l, &p);
	l.est = 100;
	l.limit = 100;
	/* latency at the baseline, in-flight reaching half the limit: + sqrt(limit) */
	in = win(10000, 11000, 12000, 60, 1);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, S, NULL), 110);
	/* near the knee (a queue: latency above the baseline, in-flight at the limit): + 1 */
	in = win(10500, 11000, 12000, 110, 1);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 2 * S, NULL), 111);
	/* an early window (closed on overload evidence) never grows */
	in.full = 0;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 3 * S, NULL), 111);
	/* application-limited (peak < limit / 2): no growth, whatever the latency ... (the
	 * rule before the calm margin: calm_margin 0) */
	p.calm_margin = 0;
	in = win(5000, 11000, 12000, 20, 1);
	for (int i = 0; i < 9; i++)
		assert_int_equal(sluice_limit_decide(&l, &p, &in, (4 + (uint64_t)i) * S, NULL), 111);
	/* ... and after 10 such windows it follows demand down, never below 4 x the peak */
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 13 * S, NULL), 100);
	for (int i = 0; i < 40; i++)
		sluice_limit_decide(&l, &p, &in, (14 + (uint64_t)i) * S, NULL);
	assert_int_equal(l.limit, 80);
	/* refusals say the limit binds even when the sampled peak missed the burst */
	in.bound = 1;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 60 * S, NULL), 89);   /* 80 + 8.9 */
}

/* In calm (application-limited windows within the aim) the limit follows the demand down at
 * once to max(2 x the recent peak in-flight, 16): a surge then meets a limit near what the
 * traffic used, not the cold start's 0.3 x max. It never raises the limit, a window that
 * binds or misses the aim does not count as calm, and a quiet service keeps 16. */
static void test_gradient_calm_follows_demand(void **st)
{
	struct sluice_limit_params p;
	struct sluice_limit l;
	struct sluice_limit_input in;
	(void)st;
	params(&p, SLUICE_LIMIT_GRADIENT, 4, 512);
	sluice_limit_init(&l, &p);
	assert_int_equal(l.limit, 154);
	/* the first calm window: the bench's 0.5x load peaks at 12 -> 24 at once */
	in = win(50000, 55000, 60000, 12, 1);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, S, NULL), 24);
	/* the recent peak counts when higher than the window's own (the caller decays it) */
	in.peak_inflight = 9;
	in.calm_peak = 11;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 2 * S, NULL), 22);
	/* never raised by this rule: a recent peak above half the limit leaves it (the probe
	 * grows it once in-flight reaches half the limit) */
	in.peak_inflight = 5;
	in.calm_peak = 15;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 3 * S, NULL), 22);
	/* not calm: refusals (the limit binds), or latency above the aim */
	l.est = 100; l.limit = 100;
	in = win(50000, 55000, 60000, 12, 1);
	in.bound = 1;
	assert_true(sluice_limit_decide(&l, &p, &in, 4 * S, NULL) > 100);
	l.est = 100; l.limit = 100;
	in = win(70000, 55000, 60000, 12, 1);
	assert_true(sluice_limit_decide(&l, &p, &in, 5 * S, NULL) < 100);
	/* low traffic (1 in flight at most): the floor of 16, not 2 */
	sluice_limit_init(&l, &p);
	in = win(50000, 55000, 60000, 1, 1);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 6 * S, NULL), 16);
	/* a window closed early (not full) does not follow demand */
	sluice_limit_init(&l, &p);
	in.full = 0;
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 7 * S, NULL), 154);
	/* bounds: never below min, never above max */
	params(&p, SLUICE_LIMIT_GRADIENT, 20, 512);
	sluice_limit_init(&l, &p);
	in = win(50000, 55000, 60000, 2, 1);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 8 * S, NULL), 20);
}

static void test_aimd_gate_and_classic_rule(void **st)
{
	struct sluice_limit_params p;
	struct sluice_limit l;
	struct sluice_limit_input in;
	(void)st;
	params(&p, SLUICE_LIMIT_AIMD, 4, 100);
	sluice_limit_init(&l, &p);
	/* below the aim with in-flight near the limit: + 1 */
	in = win(10000, 11000, 12000, 28, 1);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, S, NULL), 31);
	/* the gate: in-flight far below the limit, no growth (the old drift to max) */
	in = win(10000, 11000, 12000, 5, 1);
	for (int i = 0; i < 100; i++)
		sluice_limit_decide(&l, &p, &in, (2 + (uint64_t)i) * S, NULL);
	assert_int_equal(l.limit, 31);
	/* between aim and objective: hold; above the objective: halve, every window (no hold
	 * rule: a cut that did not help is followed by the next one) */
	in = win(11500, 11000, 12000, 31, 1);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 200 * S, NULL), 31);
	in = win(50000, 11000, 12000, 31, 1);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 201 * S, NULL), 16);   /* 15.5 */
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 202 * S, NULL), 8);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 203 * S, NULL), 4);
	/* the classic rule: no gate, grows below 0.7 x the objective */
	params(&p, SLUICE_LIMIT_AIMD, 4, 100);
	p.aimd_gate = 0;
	p.classic_band = 1;
	sluice_limit_init(&l, &p);
	in = win(8000, 11000, 12000, 0, 1);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, S, NULL), 31);   /* idle, grows */
	in = win(8500, 11000, 12000, 0, 1);
	assert_int_equal(sluice_limit_decide(&l, &p, &in, 2 * S, NULL), 31);   /* > 0.7 x 12 ms */
}

static void test_from_conf(void **st)
{
	struct service_conf sc;
	struct sluice_limit_params p;
	(void)st;
	sluice_service_defaults(&sc);
	sluice_limit_params_from_conf(&sc, &p);
	assert_int_equal(p.algorithm, SLUICE_LIMIT_GRADIENT);      /* auto */
	assert_int_equal(p.min, 4);
	assert_int_equal(p.max, 512);
	sc.limit_algorithm = LIMIT_ALG_AIMD;
	sc.limit_min = 2;
	sc.limit_max = 1;
	sluice_limit_params_from_conf(&sc, &p);
	assert_int_equal(p.algorithm, SLUICE_LIMIT_AIMD);
	assert_int_equal(p.max, 2);
	/* `aimd` written in a config is the classic rule: the 0.7 x objective band, no gate */
	assert_int_equal(p.classic_band, 1);
	assert_true(p.aimd_gate == 0);
	sc.limit_algorithm = LIMIT_ALG_GRADIENT;
	sluice_limit_params_from_conf(&sc, &p);
	assert_int_equal(p.classic_band, 0);
}

/* ---- baseline ---- */

static struct sluice_baseline_window bw(double lat, uint64_t n, uint64_t errors, int sat)
{
	struct sluice_baseline_window w = { .samples = n, .latency_us = lat, .calls = n,
					    .errors = errors, .saturated = sat };
	return w;
}

static void test_baseline_rolls_both_ways(void **st)
{
	struct sluice_baseline_params p;
	struct sluice_baseline b;
	struct sluice_baseline_window w;
	int i;
	(void)st;
	sluice_baseline_params_default(&p);
	sluice_baseline_reset(&b);
	/* one lucky window does not set it for ever: 63 windows at 50 ms and one at 10 ms */
	w = bw(10000, 100, 0, 0);
	sluice_baseline_add(&b, &p, &w);
	assert_true(b.value_us == 10000);
	w = bw(50000, 100, 0, 0);
	for (i = 0; i < 63; i++)
		sluice_baseline_add(&b, &p, &w);
	assert_true(b.value_us == 50000);
	/* the backend becomes faster: the baseline follows within a few windows */
	w = bw(30000, 100, 0, 0);
	for (i = 0; i < 6; i++)
		sluice_baseline_add(&b, &p, &w);
	assert_true(b.value_us == 50000);
	for (i = 0; i < 2; i++)
		sluice_baseline_add(&b, &p, &w);
	assert_true(b.value_us == 30000);
	/* ... and slower: it rises once nine tenths of the ring are slower */
	w = bw(60000, 100, 0, 0);
	for (i = 0; i < 57; i++)
		sluice_baseline_add(&b, &p, &w);
	assert_true(b.value_us == 30000);
	for (i = 0; i < 2; i++)
		sluice_baseline_add(&b, &p, &w);
	assert_true(b.value_us == 60000);
	assert_int_equal(b.learned, 131);
	sluice_baseline_reset(&b);
	assert_true(b.value_us == 0);
}

static void test_baseline_ignores_bad_windows(void **st)
{
	struct sluice_baseline_params p;
	struct sluice_baseline b;
	struct sluice_baseline_window w;
	(void)st;
	sluice_baseline_params_default(&p);
	sluice_baseline_reset(&b);
	/* thin, failing, 429-answering windows teach nothing */
	w = bw(300, 19, 0, 0);
	assert_int_equal(sluice_baseline_add(&b, &p, &w), 0);
	w = bw(300, 100, 6, 0);                 /* 6 % errors */
	assert_int_equal(sluice_baseline_add(&b, &p, &w), 0);
	w = bw(300, 100, 0, 0);
	w.resp_429 = 10;
	assert_int_equal(sluice_baseline_add(&b, &p, &w), 0);
	assert_true(b.value_us == 0);
	w = bw(20000, 100, 5, 0);               /* 5 %: still qualifies */
	assert_int_equal(sluice_baseline_add(&b, &p, &w), 1);
	assert_true(b.value_us == 20000);
	/* a saturated window (our own queue) may lower it but not raise it ... */
	w = bw(40000, 100, 0, 1);
	for (int i = 0; i < 63; i++)
		assert_int_equal(sluice_baseline_add(&b, &p, &w), 0);
	w = bw(18000, 100, 0, 1);
	assert_int_equal(sluice_baseline_add(&b, &p, &w), 1);
	assert_true(b.value_us == 18000);
	/* ... unless 64 saturated higher windows came in a row: the backend itself changed */
	w = bw(40000, 100, 0, 1);
	for (int i = 0; i < 63; i++)
		assert_int_equal(sluice_baseline_add(&b, &p, &w), 0);
	assert_int_equal(sluice_baseline_add(&b, &p, &w), 1);
}

/* ---- evidence window ---- */

static struct sluice_hist cum[SLUICE_NUM_CLASSES];     /* the maps' cumulative histograms */

static void add(struct sluice_evwin *w, int cls, uint64_t us, uint64_t n, int64_t inflight,
		uint64_t now)
{
	struct sluice_service_signals sig;
	memset(&sig, 0, sizeof(sig));
	sig.cls[cls].samples = n;
	sig.total.samples = n;
	sig.total.calls = n;
	cum[cls].bucket[sluice_hist_bucket(us)] += n;
	sluice_evwin_add(w, &sig, inflight, now);
}

static void test_window_extends_and_signal(void **st)
{
	struct sluice_evwin w;
	struct sluice_evwin_result r;
	(void)st;
	memset(cum, 0, sizeof(cum));
	cum[2].bucket[sluice_hist_bucket(90000)] = 1000;     /* history before the window */
	sluice_evwin_reset(&w, 0, cum);
	assert_int_equal(sluice_evwin_signal(&w, 0, S, 20, 10 * S), SLUICE_SIGNAL_OK);
	add(&w, 2, 1000, 5, 3, 500 * MS);
	assert_int_equal(sluice_evwin_full(&w, 1 * S, S, 20), 0);   /* 5 samples: extends */
	assert_int_equal(sluice_evwin_signal(&w, 1 * S, S, 20, 10 * S), SLUICE_SIGNAL_THIN);
	add(&w, 0, 1000, 15, 9, 3 * S);
	assert_int_equal(sluice_evwin_full(&w, 3 * S, S, 20), 1);
	sluice_evwin_result(&w, cum, 0.5, 20, 3 * S, &r);
	assert_int_equal(r.samples, 20);
	assert_true(r.latency_us < 1100);        /* the 1000 samples before the window do not count */
	assert_int_equal(r.peak_inflight, 9);
	assert_int_equal(r.top_cls, 0);
	assert_int_equal(r.dur_ns, 3 * S);
	/* an idle start (traffic not begun yet) is not active time: a rate over the window
	 * would be diluted by it */
	{
		struct sluice_evwin w2;
		sluice_evwin_reset(&w2, 10 * S, cum);
		add(&w2, 0, 1000, 0, 0, 10 * S + 100 * MS);
		add(&w2, 0, 1000, 0, 0, 10 * S + 200 * MS);
		add(&w2, 0, 1000, 20, 4, 10 * S + 300 * MS);
		sluice_evwin_result(&w2, cum, 0.5, 20, 10 * S + 300 * MS, &r);
		assert_int_equal(r.dur_ns, 300 * MS);
		assert_int_equal(r.active_ns, 100 * MS);
	}
	/* no sample for none_ns: none */
	sluice_evwin_reset(&w, 3 * S, cum);
	assert_int_equal(sluice_evwin_signal(&w, 12 * S, S, 20, 10 * S), SLUICE_SIGNAL_THIN);
	assert_int_equal(sluice_evwin_signal(&w, 13 * S, S, 20, 10 * S), SLUICE_SIGNAL_NONE);
	assert_string_equal(sluice_signal_state_name(SLUICE_SIGNAL_NONE), "none");
}

static void test_window_top_classes(void **st)
{
	struct sluice_evwin w;
	struct sluice_evwin_result r;
	(void)st;
	/* L0 has 10 samples at 50 ms, L1 15 at 50 ms, L3 100 at 1 ms: the highest busy classes
	 * (L0 + L1, 25 >= 20 samples) are at 50 ms although the service's median is 1 ms */
	memset(cum, 0, sizeof(cum));
	sluice_evwin_reset(&w, 0, cum);
	add(&w, 0, 50000, 10, 1, S);
	add(&w, 1, 50000, 15, 1, S);
	add(&w, 3, 1000, 100, 1, S);
	sluice_evwin_result(&w, cum, 0.5, 20, S, &r);
	assert_true(r.top_us > 40000 && r.top_us < 60000);
	assert_true(r.latency_us < 1100);
	/* with enough L0 samples, L0 alone (L1 outnumbers it: merged, the median would be L1's) */
	sluice_evwin_reset(&w, 0, cum);
	add(&w, 0, 2000, 25, 1, S);
	add(&w, 1, 50000, 40, 1, S);
	sluice_evwin_result(&w, cum, 0.5, 20, S, &r);
	assert_true(r.top_us < 2100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_start_and_fixed),
		cmocka_unit_test(test_gradient_cuts_in_proportion),
		cmocka_unit_test(test_evidence_floor),
		cmocka_unit_test(test_gradient_grows_only_when_used),
		cmocka_unit_test(test_gradient_calm_follows_demand),
		cmocka_unit_test(test_aimd_gate_and_classic_rule),
		cmocka_unit_test(test_from_conf),
		cmocka_unit_test(test_no_growth_while_listen_queue_saturated),
		cmocka_unit_test(test_baseline_rolls_both_ways),
		cmocka_unit_test(test_baseline_ignores_bad_windows),
		cmocka_unit_test(test_window_extends_and_signal),
		cmocka_unit_test(test_window_top_classes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
