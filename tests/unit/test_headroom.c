// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Work-conserving headroom thresholds, the recent-peak tracker and L0's room under an adaptive
 * limit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "control/headroom.h"

#define S 1000000000ull

static void thr(uint32_t limit, uint32_t p0, uint32_t p1, uint32_t p2, uint32_t p3, uint32_t *out)
{
	struct sluice_headroom_params p;
	uint32_t peak[4] = { p0, p1, p2, p3 };

	sluice_headroom_params_default(&p);
	sluice_headroom_thresholds(limit, &p, peak, out);
}

static void test_idle_higher_classes_leave_room(void **st)
{
	uint32_t o[4];
	(void)st;
	/* nobody above is busy: only the minimum margin (2 per class above) is reserved */
	thr(100, 0, 0, 0, 0, o);
	assert_int_equal(o[0], 100);
	assert_int_equal(o[1], 99);
	assert_int_equal(o[2], 98);
	assert_int_equal(o[3], 97);                 /* far above the fixed 50% */
}

static void test_reserves_burst_margin_of_busy_classes(void **st)
{
	uint32_t o[4];
	(void)st;
	/* Thresholds apply to the in-flight of classes 0..k (their usage is counted there);
	 * each busy class above keeps max(2, 25% of its peak) free: L0 +2, L1 +2, L2 +2 */
	thr(100, 4, 2, 8, 0, o);
	assert_int_equal(o[0], 100);
	assert_int_equal(o[1], 98);
	assert_int_equal(o[2], 96);
	assert_int_equal(o[3], 94);
	/* margin is 25% of a large peak: L0 peak 80 -> 20 kept free */
	thr(200, 80, 0, 0, 0, o);
	assert_int_equal(o[1], 180);
	/* below the 10% cap (40 of 400), so the 25% itself shows */
	thr(400, 80, 0, 0, 0, o);
	assert_int_equal(o[1], 380);
}

static void test_busy_higher_classes_win(void **st)
{
	uint32_t o[4];
	(void)st;
	/* busy L0 (margin 25% of 80 = 20, capped at 10% of the limit: 10) and L1, L2 (2 each) */
	thr(100, 80, 10, 10, 10, o);
	assert_int_equal(o[0], 100);
	assert_int_equal(o[1], 90);
	assert_int_equal(o[3], 86);
	/* peaks left over from a stall, far above a limit cut since, do not eat the limit:
	 * 3 classes x 10% of 12 (rounded down, at least 2 each) */
	thr(12, 19, 13, 7, 6, o);
	assert_int_equal(o[1], 10);
	assert_int_equal(o[2], 8);
	assert_int_equal(o[3], 6);
	/* idle classes keep one slot each for their next arrival; never increasing */
	thr(10, 0, 0, 0, 0, o);
	assert_int_equal(o[0], 10);
	assert_int_equal(o[1], 9);
	assert_int_equal(o[2], 8);
	assert_int_equal(o[3], 7);
	thr(4, 0, 0, 0, 0, o);
	assert_int_equal(o[3], 1);                  /* a small limit still serves L3 */
	thr(0, 5, 5, 5, 5, o);
	assert_true(o[0] == 0 && o[3] == 0);
}

static void test_zero_percent_shuts_a_class_out(void **st)
{
	struct sluice_headroom_params p;
	int pct[4] = { 100, 90, 75, 0 };
	uint32_t peak[4] = { 0 }, o[4];
	(void)st;
	sluice_headroom_params_from_pct(pct, &p);
	sluice_headroom_thresholds(20, &p, peak, o);
	assert_int_equal(o[2], 18);
	assert_int_equal(o[3], 0);
}

static void test_written_percentages_are_caps(void **st)
{
	struct sluice_headroom_params p;
	uint32_t o[4], peak[4] = { 0, 0, 0, 0 };
	int pct[4] = { 100, 90, 75, 50 };
	(void)st;
	/* written: each class at most its percentage of the limit, in adaptive mode too */
	sluice_headroom_params_from_pct(pct, &p);
	p.caps = 0xf;
	sluice_headroom_thresholds(36, &p, peak, o);
	assert_int_equal(o[0], 36);
	assert_int_equal(o[1], 32);
	assert_int_equal(o[2], 27);
	assert_int_equal(o[3], 18);
	/* a cap never raises a threshold the margins lowered, and never rounds a class to 0 */
	peak[0] = 30;
	sluice_headroom_thresholds(36, &p, peak, o);
	assert_int_equal(o[1], 32);                /* 90 % of 36 is below 36 - 3 */
	peak[0] = 0;
	p.pct[1] = 100;
	p.pct[2] = 100;
	peak[1] = 30;
	sluice_headroom_thresholds(36, &p, peak, o);
	assert_int_equal(o[2], 36 - 1 - 3);        /* L0 idle: 1, L1 busy: 10 % of 36 */
	sluice_headroom_thresholds(1, &p, peak, o);
	assert_int_equal(o[0], 1);
	/* not written: the same percentages play no part */
	p.caps = 0;
	peak[1] = 0;
	sluice_headroom_thresholds(36, &p, peak, o);
	assert_int_equal(o[3], 33);
	/* only L3 written (headroom: { L3: 50 }): L1 and L2 keep the work-conserving room, not
	 * the 90 % and 75 % nobody wrote */
	p.pct[1] = 90;
	p.pct[2] = 75;
	p.caps = 1u << 3;
	sluice_headroom_thresholds(36, &p, peak, o);
	assert_int_equal(o[1], 35);
	assert_int_equal(o[2], 34);
	assert_int_equal(o[3], 18);
}

static void test_peak_tracker(void **st)
{
	struct sluice_peak pk;
	uint32_t out[4];
	int64_t v[4] = { 5, 1, -3, 0 };
	(void)st;
	sluice_peak_init(&pk);
	sluice_peak_update(&pk, v, 100 * S);
	v[0] = 2; v[1] = 7;
	sluice_peak_update(&pk, v, 103 * S + 5);
	sluice_peak_get(&pk, 10, 105 * S, out);
	assert_int_equal(out[0], 5);
	assert_int_equal(out[1], 7);
	assert_int_equal(out[2], 0);                /* negative counts as 0 */
	/* the 100 s peak leaves the 10 s window at 110 s */
	sluice_peak_get(&pk, 10, 110 * S, out);
	assert_int_equal(out[0], 2);
	sluice_peak_get(&pk, 10, 113 * S, out);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 0);
}

/* L0's threshold under an adaptive limit: the limit's max while L0's arrivals fit in half of
 * what the backend proved it serves, else the limit plus what L0 leaves of it, within
 * [limit, max]. */
static void test_l0_room(void **st)
{
	(void)st;
	/* the e2e scenario: L0 120/s, the backend served 400/s, the limit cut to 4 */
	assert_int_equal(sluice_headroom_l0_room(4, 32, 120, 2.4, 400), 32);
	assert_int_equal(sluice_headroom_l0_room(4, 32, 200, 2.4, 400), 32);     /* exactly half */
	/* beyond half: 4 + (4 - 2.4), rounded down */
	assert_int_equal(sluice_headroom_l0_room(4, 32, 201, 2.4, 400), 5);
	assert_int_equal(sluice_headroom_l0_room(10, 32, 300, 2, 400), 18);
	assert_int_equal(sluice_headroom_l0_room(20, 32, 300, 2, 400), 32);      /* at most max */
	/* nothing proved yet (no window decided): the second form */
	assert_int_equal(sluice_headroom_l0_room(10, 32, 1, 0, 0), 20);
	/* an L0 flood that fills the limit by itself is held to the limit, never below it */
	assert_int_equal(sluice_headroom_l0_room(10, 32, 900, 10, 400), 10);
	assert_int_equal(sluice_headroom_l0_room(10, 32, 900, 25, 400), 10);
	assert_int_equal(sluice_headroom_l0_room(10, 32, 900, -3, 400), 20);     /* a racing count */
	/* a max below the limit (never configured so) does not lower it */
	assert_int_equal(sluice_headroom_l0_room(10, 8, 1, 0, 400), 10);
}

/* The highest window completion rate of the last 30 s: kept per second, decays as seconds
 * leave the window; L0's rate and mean in-flight are averaged over about a second. */
static void test_l0_room_served_and_rate(void **st)
{
	struct sluice_l0room r;
	(void)st;
	sluice_l0room_init(&r);
	assert_true(sluice_l0room_served_max(&r, 30, 0) == 0);
	sluice_l0room_served(&r, 400, 100 * S);
	sluice_l0room_served(&r, 350, 100 * S + 500000000ull);   /* same second: the higher */
	sluice_l0room_served(&r, 200, 110 * S);
	sluice_l0room_served(&r, -5, 111 * S);                   /* never raises a second */
	assert_true(sluice_l0room_served_max(&r, 30, 110 * S) == 400);
	assert_true(sluice_l0room_served_max(&r, 30, 129 * S) == 400);
	/* 30 s later the 400 has left the window; the 200 stays until 140 s */
	assert_true(sluice_l0room_served_max(&r, 30, 130 * S) == 200);
	assert_true(sluice_l0room_served_max(&r, 30, 139 * S + 999999999ull) == 200);
	assert_true(sluice_l0room_served_max(&r, 30, 140 * S) == 0);
	/* a slot reused 32 s later holds only the new second */
	sluice_l0room_served(&r, 50, 132 * S);
	assert_true(sluice_l0room_served_max(&r, 30, 132 * S) == 200);
	assert_true(sluice_l0room_served_max(&r, 1, 132 * S) == 50);
	/* the rate: the first tick sets it, then an average over ~1 s of 100 ms ticks */
	sluice_l0room_tick(&r, 12, 3, 0);                        /* no time: nothing */
	assert_int_equal(r.have, 0);
	sluice_l0room_tick(&r, 12, 3, 100000000ull);
	assert_true(r.l0_rate == 120 && r.l0_inflight == 3);
	for (int i = 0; i < 10; i++)
		sluice_l0room_tick(&r, 60, -1, 100000000ull);     /* a surge to 600/s */
	assert_true(r.l0_rate > 400 && r.l0_rate < 450);         /* 1 - e^-1 of the way */
	assert_true(r.l0_inflight > 0.9 && r.l0_inflight < 1.2);  /* -1 counts as 0 */
	/* a long gap (ticks skipped while idle) weighs as what it measured */
	sluice_l0room_tick(&r, 100, 0, 10 * S);
	assert_true(r.l0_rate > 9.9 && r.l0_rate < 10.1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_higher_classes_leave_room),
		cmocka_unit_test(test_reserves_burst_margin_of_busy_classes),
		cmocka_unit_test(test_busy_higher_classes_win),
		cmocka_unit_test(test_zero_percent_shuts_a_class_out),
		cmocka_unit_test(test_written_percentages_are_caps),
		cmocka_unit_test(test_peak_tracker),
		cmocka_unit_test(test_l0_room),
		cmocka_unit_test(test_l0_room_served_and_rate),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
