// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Priority ladder with a fake clock: shedding order, L0 last, shed pacing, stepwise recovery
 * with holds (higher classes first), overload detection. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "control/ladder.h"
#include "evcap.h"

#define MS 1000000ull
#define S  1000000000ull
#define ONE SLUICE_PROB_ONE
#define PCT(x) ((uint32_t)((uint64_t)(x) * ONE / 100))

static struct sluice_ladder_input inp(int over, uint64_t d0, uint64_t d1, uint64_t d2, uint64_t d3)
{
	/* excess < 0: the full step; calm ticks bring plenty of samples within the objective */
	struct sluice_ladder_input i = { .overloaded = over, .excess = -1,
					 .demand = { d0, d1, d2, d3 }, .good_samples = 100 };
	return i;
}

static void test_sheds_in_class_order(void **st)
{
	/* full steps: L3 loses 50 % per cut (50 25 12.5 off), L2 and L1 30 % (70 49 34 24 17 12
	 * off), then L0 down to its floor */
	static const int cuts[4] = { 0, 7, 7, 4 };
	struct sluice_ladder_params p;
	struct sluice_ladder l;
	struct sluice_ladder_input i = inp(1, 10, 10, 10, 10);
	struct evcap c;
	struct sluice_event_sink sink = evcap_sink(&c, "web");
	uint64_t now = 0;
	int k, n, j;
	(void)st;
	sluice_ladder_params_default(&p);
	sluice_ladder_init(&l, 0);
	for (k = 3; k >= 1; k--) {
		uint32_t want = ONE;
		for (n = 0; n < cuts[k]; n++) {
			want = (uint32_t)((double)want * (1 - p.cut[k]));
			if (want < PCT(10))
				want = 0;
			now += 200 * MS;
			assert_int_equal(sluice_ladder_tick(&l, &p, &i, now, &sink), 1);
			assert_int_equal(l.admit[k], want);
			for (j = 0; j < k; j++)
				assert_int_equal(l.admit[j], ONE);   /* higher classes untouched */
			assert_int_equal(evcap_last(&c)->cls, k);
		}
		assert_int_equal(l.admit[k], 0);
	}
	/* only now L0, and never below the 10% floor */
	now += 200 * MS;
	sluice_ladder_tick(&l, &p, &i, now, &sink);
	assert_int_equal(l.admit[0], (uint32_t)(ONE * 0.8));
	for (n = 0; n < 20; n++)
		sluice_ladder_tick(&l, &p, &i, now += 200 * MS, &sink);
	assert_int_equal(l.admit[0], PCT(10));
	assert_non_null(strstr(c.json[0], "\"class\":\"L3\""));
	assert_non_null(strstr(c.json[0], "\"from\":\"full\",\"to\":\"partial\""));
	assert_non_null(strstr(c.json[3], "\"to\":\"off\""));
	assert_non_null(strstr(c.json[4], "\"admit_pct_to\":69.99"));     /* L2's first step */
}

/* L0 is spared while the caller says the backend is not saturated: refusing the only busy
 * class cannot make it faster. The lower classes are cut all the same; L0 only once the
 * backend is saturated. */
static void test_l0_spared_unless_saturated(void **st)
{
	struct sluice_ladder_params p;
	struct sluice_ladder l;
	struct sluice_ladder_input i = inp(1, 10, 0, 0, 10);
	uint64_t now = 0;
	int n;
	(void)st;
	sluice_ladder_params_default(&p);
	sluice_ladder_init(&l, 0);
	i.l0_spared = 1;
	for (n = 0; n < 20; n++)
		sluice_ladder_tick(&l, &p, &i, now += 200 * MS, NULL);
	assert_int_equal(l.admit[3], 0);                  /* L3 still goes */
	assert_int_equal(l.admit[0], ONE);                /* L0 alone is left alone */
	i.l0_spared = 0;                                  /* saturated: the last resort */
	assert_int_equal(sluice_ladder_tick(&l, &p, &i, now += 200 * MS, NULL), 1);
	assert_int_equal(l.admit[0], (uint32_t)(ONE * 0.8));
}

static void test_cut_proportional_to_excess(void **st)
{
	struct sluice_ladder_params p;
	struct sluice_ladder l;
	struct sluice_ladder_input i = inp(1, 10, 10, 10, 10);
	(void)st;
	sluice_ladder_params_default(&p);
	sluice_ladder_init(&l, 0);
	/* 25 % above the objective or more: the full step */
	i.excess = 0.5;
	sluice_ladder_tick(&l, &p, &i, 1 * S, NULL);
	assert_int_equal(l.admit[3], ONE / 2);
	/* 12.5 % above: half the step (L3 loses 25 % of what it had) */
	sluice_ladder_init(&l, 0);
	i.excess = 0.125;
	sluice_ladder_tick(&l, &p, &i, 1 * S, NULL);
	assert_int_equal(l.admit[3], (uint32_t)(ONE * 0.75));
	/* barely above: a twentieth of the step, never nothing */
	sluice_ladder_init(&l, 0);
	i.excess = 0.001;
	sluice_ladder_tick(&l, &p, &i, 1 * S, NULL);
	assert_int_equal(l.admit[3], (uint32_t)(ONE * 0.975));
}

static void test_recovery_needs_evidence(void **st)
{
	struct sluice_ladder_params p;
	struct sluice_ladder l;
	struct sluice_ladder_input over = inp(1, 10, 10, 10, 10), calm = inp(0, 10, 10, 10, 10);
	struct evcap c;
	struct sluice_event_sink sink = evcap_sink(&c, "web");
	uint64_t now = 0;
	int n;
	(void)st;
	sluice_ladder_params_default(&p);
	p.step_s = 1;
	sluice_ladder_init(&l, 0);
	sluice_ladder_tick(&l, &p, &over, now += 200 * MS, &sink);
	assert_int_equal(l.admit[3], ONE / 2);
	/* zero traffic: no samples within the objective, no climb however long it lasts */
	calm.good_samples = 0;
	for (n = 0; n < 600; n++)
		assert_int_equal(sluice_ladder_tick(&l, &p, &calm, now += 100 * MS, &sink), 0);
	assert_int_equal(l.admit[3], ONE / 2);
	/* thin evidence: 19 samples in the step are not enough, the 20th is */
	calm.good_samples = 19;
	assert_int_equal(sluice_ladder_tick(&l, &p, &calm, now += 100 * MS, &sink), 0);
	calm.good_samples = 1;
	assert_int_equal(sluice_ladder_tick(&l, &p, &calm, now += 100 * MS, &sink), 1);
	assert_int_equal(l.admit[3], PCT(80));
	/* each step needs its own samples: a step's count starts at zero */
	calm.good_samples = 0;
	for (n = 0; n < 30; n++)
		sluice_ladder_tick(&l, &p, &calm, now += 100 * MS, &sink);
	assert_int_equal(l.admit[3], PCT(80));
	calm.good_samples = 20;
	sluice_ladder_tick(&l, &p, &calm, now += 100 * MS, &sink);
	assert_int_equal(l.admit[3], ONE);
	/* back to full: the event says how long recovery took since the last overload */
	assert_string_equal(evcap_last(&c)->why, "recovered");
	assert_non_null(strstr(evcap_last_json(&c), "\"recovery_s\":63.3"));
	assert_true(l.last_recovery_s > 63.29 && l.last_recovery_s < 63.31);
	assert_true(l.last_episode_s > 63.29 && l.last_episode_s < 63.31);
}

static void test_idle_classes_skipped_and_pacing(void **st)
{
	struct sluice_ladder_params p;
	struct sluice_ladder l;
	struct sluice_ladder_input i = inp(1, 10, 10, 10, 0);     /* no L3 demand */
	(void)st;
	sluice_ladder_params_default(&p);
	sluice_ladder_init(&l, 0);
	assert_int_equal(sluice_ladder_tick(&l, &p, &i, 100 * MS, NULL), 1);
	assert_int_equal(l.admit[3], ONE);        /* cutting an idle class would do nothing */
	assert_int_equal(l.admit[2], (uint32_t)(ONE * 0.7));
	/* at most one cut per shed_interval_s (0.2 s) */
	assert_int_equal(sluice_ladder_tick(&l, &p, &i, 200 * MS, NULL), 0);
	assert_int_equal(l.admit[2], (uint32_t)(ONE * 0.7));
	assert_int_equal(sluice_ladder_tick(&l, &p, &i, 300 * MS, NULL), 1);
	assert_int_equal(l.admit[2], (uint32_t)((uint32_t)(ONE * 0.7) * 0.7));
	/* L0 is not touched while L1 still admits with demand, even with L2 and L3 idle */
	i = inp(1, 10, 10, 0, 0);
	sluice_ladder_tick(&l, &p, &i, 500 * MS, NULL);
	assert_int_equal(l.admit[1], (uint32_t)(ONE * 0.7));
	assert_int_equal(l.admit[0], ONE);
}

static void test_recovers_stepwise_with_holds(void **st)
{
	/* expected (class, admit) after each hold of 5 s: L2 climbs first, then L3 */
	static const struct { int cls; uint32_t pct; } want[] = {
		{ 2, 80 }, { 2, 100 }, { 3, 10 }, { 3, 30 }, { 3, 50 }, { 3, 80 }, { 3, 100 },
	};
	struct sluice_ladder_params p;
	struct sluice_ladder l;
	struct sluice_ladder_input over = inp(1, 10, 10, 10, 10), calm = inp(0, 10, 10, 10, 10);
	uint64_t now = 0, last;
	int n, t;
	(void)st;
	sluice_ladder_params_default(&p);
	sluice_ladder_init(&l, 0);
	for (n = 0; n < 5; n++)                    /* L3 off, L2 at 70% */
		sluice_ladder_tick(&l, &p, &over, now += 200 * MS, NULL);
	assert_int_equal(l.admit[3], 0);
	assert_int_equal(l.admit[2], (uint32_t)(ONE * 0.7));
	last = now;
	for (n = 0; n < 7; n++) {
		/* nothing moves during the hold */
		for (t = 0; t < 49; t++) {
			now += 100 * MS;
			assert_int_equal(sluice_ladder_tick(&l, &p, &calm, now, NULL), 0);
		}
		now += 100 * MS;
		assert_int_equal(sluice_ladder_tick(&l, &p, &calm, now, NULL), 1);
		assert_int_equal(now - last, 5 * S);
		last = now;
		assert_int_equal(l.admit[want[n].cls], PCT(want[n].pct));
		if (want[n].cls == 3)
			assert_int_equal(l.admit[2], ONE);     /* higher class recovered first */
	}
	for (t = 0; t < 4; t++)
		assert_int_equal(l.admit[t], ONE);
}

static void test_overload_during_recovery_restarts_hold(void **st)
{
	struct sluice_ladder_params p;
	struct sluice_ladder l;
	struct sluice_ladder_input over = inp(1, 0, 0, 0, 10), calm = inp(0, 0, 0, 0, 10);
	(void)st;
	sluice_ladder_params_default(&p);
	sluice_ladder_init(&l, 0);
	sluice_ladder_tick(&l, &p, &over, 0, NULL);
	sluice_ladder_tick(&l, &p, &over, 200 * MS, NULL);
	sluice_ladder_tick(&l, &p, &over, 400 * MS, NULL);
	sluice_ladder_tick(&l, &p, &over, 600 * MS, NULL);
	assert_int_equal(l.admit[3], 0);
	sluice_ladder_tick(&l, &p, &calm, 5600 * MS, NULL);
	assert_int_equal(l.admit[3], PCT(10));
	/* overload again at 8 s: L3 is cut (to off), and the next climb waits 5 s from there */
	sluice_ladder_tick(&l, &p, &over, 8 * S, NULL);
	assert_int_equal(l.admit[3], 0);
	sluice_ladder_tick(&l, &p, &calm, 12 * S, NULL);
	assert_int_equal(l.admit[3], 0);
	sluice_ladder_tick(&l, &p, &calm, 13 * S, NULL);
	assert_int_equal(l.admit[3], PCT(10));
}

static void test_overload_detection(void **st)
{
	struct sluice_ladder_params p;
	struct sluice_ladder l;
	struct sluice_overload_input o;
	const char *why = NULL;
	(void)st;
	sluice_ladder_params_default(&p);
	sluice_ladder_init(&l, 0);
	memset(&o, 0, sizeof(o));
	o.target_us = 10000;
	o.latency_us = 9000;
	assert_int_equal(sluice_ladder_overloaded(&l, &p, &o, &why), 0);
	o.latency_us = 11000;
	assert_int_equal(sluice_ladder_overloaded(&l, &p, &o, &why), 1);
	assert_string_equal(why, "latency_above_objective");
	/* L1 turned away by headroom while L3 is admitted: priority inversion */
	o.latency_us = 0;
	o.arrivals[1] = 100; o.headroom_rej[1] = 10;
	o.arrivals[3] = 50;
	assert_int_equal(sluice_ladder_overloaded(&l, &p, &o, &why), 1);
	assert_string_equal(why, "priority_inversion");
	/* below rej_frac (2%) it is noise */
	o.headroom_rej[1] = 2;
	assert_int_equal(sluice_ladder_overloaded(&l, &p, &o, NULL), 0);
	/* once L3 (and L2) are off there is nothing lower to blame */
	o.headroom_rej[1] = 10;
	l.admit[3] = 0;
	assert_int_equal(sluice_ladder_overloaded(&l, &p, &o, NULL), 0);
	/* L3's own headroom rejections are headroom doing its job, not overload */
	memset(&o, 0, sizeof(o));
	l.admit[3] = ONE;
	o.arrivals[3] = 100; o.headroom_rej[3] = 80;
	assert_int_equal(sluice_ladder_overloaded(&l, &p, &o, NULL), 0);
}

static void test_from_conf(void **st)
{
	struct service_conf sc;
	struct sluice_ladder_params p;
	(void)st;
	memset(&sc, 0, sizeof(sc));
	sluice_ladder_params_from_conf(&sc, &p);
	assert_int_equal(p.n_steps, 5);
	assert_true(p.step_s == 5);
	sc.ladder_steps[0] = 20; sc.ladder_steps[1] = 60; sc.n_ladder_steps = 2;
	sc.recovery_step_s = 120;
	sc.min_samples = 7;
	sluice_ladder_params_from_conf(&sc, &p);
	assert_int_equal(p.min_samples, 7);
	assert_int_equal(p.n_steps, 3);
	assert_int_equal(p.steps[2], 100);
	assert_true(p.step_s == 120);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sheds_in_class_order),
		cmocka_unit_test(test_cut_proportional_to_excess),
		cmocka_unit_test(test_l0_spared_unless_saturated),
		cmocka_unit_test(test_recovery_needs_evidence),
		cmocka_unit_test(test_idle_classes_skipped_and_pacing),
		cmocka_unit_test(test_recovers_stepwise_with_holds),
		cmocka_unit_test(test_overload_during_recovery_restarts_hold),
		cmocka_unit_test(test_overload_detection),
		cmocka_unit_test(test_from_conf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
