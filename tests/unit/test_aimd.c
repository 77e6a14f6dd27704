// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* AIMD: start point, +1 per window, halving, clamps, hold band, no-sample hold, auto target. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "control/aimd.h"
#include "evcap.h"

#define MS 1000000ull
#define S  1000000000ull

static void params(struct sluice_aimd_params *p, uint32_t min, uint32_t max, double target_us)
{
	sluice_aimd_params_default(p);
	p->min = min;
	p->max = max;
	p->target_us = target_us;
}

static void test_start_point(void **st)
{
	struct sluice_aimd_params p;
	struct sluice_aimd a;
	(void)st;
	params(&p, 4, 100, 10000);
	sluice_aimd_init(&a, &p, 0);
	assert_int_equal(a.limit, 30);
	params(&p, 50, 100, 10000);
	sluice_aimd_init(&a, &p, 0);
	assert_int_equal(a.limit, 50);          /* at least min */
	params(&p, 4, 100, 10000);
	p.fixed = 64;
	sluice_aimd_init(&a, &p, 0);
	assert_int_equal(a.limit, 64);
	assert_int_equal(sluice_aimd_window(&a, &p, 100, 1e9, 1e9, S, NULL), 64);
	assert_int_equal(sluice_aimd_window(&a, &p, 100, 1, 1, 2 * S, NULL), 64);
}

/* Drives the tick path with a fake 100 ms clock: 30 samples of `us` per tick. */
static uint64_t run_ticks(struct sluice_aimd *a, const struct sluice_aimd_params *p,
			  uint64_t now, int ticks, uint64_t us, uint64_t per_tick)
{
	struct sluice_hist d;
	int i;

	memset(&d, 0, sizeof(d));
	d.bucket[sluice_hist_bucket(us)] = per_tick;
	d.sum_us = us * per_tick;
	for (i = 0; i < ticks; i++) {
		now += 100 * MS;
		sluice_aimd_tick(a, p, &d, now, NULL);
	}
	return now;
}

static void test_rises_one_per_window(void **st)
{
	struct sluice_aimd_params p;
	struct sluice_aimd a;
	uint64_t now;
	(void)st;
	params(&p, 4, 100, 10000);              /* target 10 ms, increase below 7 ms */
	sluice_aimd_init(&a, &p, 0);
	now = run_ticks(&a, &p, 0, 9, 1000, 30);
	assert_int_equal(a.limit, 30);          /* window not over yet */
	now = run_ticks(&a, &p, now, 1, 1000, 30);
	assert_int_equal(a.limit, 31);
	now = run_ticks(&a, &p, now, 40, 1000, 30);
	assert_int_equal(a.limit, 35);          /* exactly one per window */
	assert_int_equal(a.windows, 5);
	assert_true(a.last_latency_us > 896 && a.last_latency_us <= 1024);
}

static void test_halves_and_clamps(void **st)
{
	struct sluice_aimd_params p;
	struct sluice_aimd a;
	struct evcap c;
	struct sluice_event_sink sink = evcap_sink(&c, "web");
	(void)st;
	params(&p, 4, 100, 10000);
	sluice_aimd_init(&a, &p, 0);
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 20000, 20000, 1 * S, &sink), 15);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.ev[0].why, "latency_above_target");
	assert_non_null(strstr(c.json[0], "\"limit_from\":30"));
	assert_non_null(strstr(c.json[0], "\"limit_to\":15"));
	/* each cut helps (latency down by more than a tenth): keep cutting */
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 17000, 17000, 2 * S, &sink), 7);
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 15000, 15000, 3 * S, &sink), 4);
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 13000, 13000, 4 * S, &sink), 4); /* min */
	for (int i = 0; i < 200; i++)
		sluice_aimd_window(&a, &p, 50, 1000, 1000, (5 + i) * S, &sink);
	assert_int_equal(a.limit, 100);          /* max */
}

static void test_holds_when_cutting_does_not_help(void **st)
{
	struct sluice_aimd_params p;
	struct sluice_aimd a;
	(void)st;
	/* The backend got slower by itself: latency stays 50 ms whatever the limit. One cut,
	 * then hold -- a smaller limit would only idle the backend's workers. */
	params(&p, 4, 100, 10000);
	sluice_aimd_init(&a, &p, 0);
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 50000, 50000, 1 * S, NULL), 15);
	for (int i = 2; i < 10; i++)
		assert_int_equal(sluice_aimd_window(&a, &p, 50, 49000, 49000, i * S, NULL), 15);
	/* It recovers: below the band the limit climbs again. */
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 3000, 3000, 10 * S, NULL), 16);
	/* A new overload where cutting does help is cut again, step after step. */
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 40000, 40000, 11 * S, NULL), 8);
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 20000, 20000, 12 * S, NULL), 4);
}

static void test_holds_in_band_and_without_samples(void **st)
{
	struct sluice_aimd_params p;
	struct sluice_aimd a;
	(void)st;
	params(&p, 4, 100, 10000);
	sluice_aimd_init(&a, &p, 0);
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 8000, 8000, 1 * S, NULL), 30);
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 7000, 7000, 2 * S, NULL), 30); /* = 0.7 t */
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 10000, 10000, 3 * S, NULL), 30); /* = t */
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 6999, 6999, 4 * S, NULL), 31);
	/* a window with no samples never shrinks the limit (nor grows it) */
	assert_int_equal(sluice_aimd_window(&a, &p, 0, 0, 0, 5 * S, NULL), 31);
	run_ticks(&a, &p, 5 * S, 30, 1000, 0);
	assert_int_equal(a.limit, 31);
}

static void test_auto_target(void **st)
{
	struct sluice_aimd_params p;
	struct sluice_aimd a;
	(void)st;
	params(&p, 4, 100, 0);                  /* auto */
	sluice_aimd_init(&a, &p, 0);
	/* not enough samples for a baseline: hold, whatever the latency */
	assert_int_equal(sluice_aimd_window(&a, &p, 10, 100, 100, 1 * S, NULL), 30);
	assert_int_equal(sluice_aimd_window(&a, &p, 10, 99999, 99999, 2 * S, NULL), 30);
	assert_true(a.target_us == 0);
	/* first good window: baseline 1 ms, target 2 ms, 1 ms < 1.4 ms -> +1 */
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 1000, 1000, 3 * S, NULL), 31);
	assert_true(a.min_p50_us == 1000 && a.target_us == 2000);
	assert_int_equal(sluice_aimd_window(&a, &p, 50, 3000, 3000, 4 * S, NULL), 15);
	assert_true(a.target_us == 2000);       /* a higher p50 never raises the baseline */
	/* a low p50 from too few samples does not move the baseline */
	sluice_aimd_window(&a, &p, 5, 200, 200, 5 * S, NULL);
	assert_true(a.min_p50_us == 1000);
	/* a lower p50 with enough samples does */
	sluice_aimd_window(&a, &p, 50, 500, 500, 6 * S, NULL);
	assert_true(a.min_p50_us == 500 && a.target_us == 1000);
}

static void test_from_conf(void **st)
{
	struct service_conf sc;
	struct sluice_aimd_params p;
	(void)st;
	memset(&sc, 0, sizeof(sc));
	sluice_aimd_params_from_conf(&sc, &p);
	assert_int_equal(p.min, 4);
	assert_int_equal(p.max, 512);
	assert_true(p.target_us == 0 && p.window_ns == S);
	sc.limit_min = 2; sc.limit_max = 64; sc.target_latency_ms = 25; sc.aimd_window_ms = 500;
	sluice_aimd_params_from_conf(&sc, &p);
	assert_int_equal(p.min, 2);
	assert_int_equal(p.max, 64);
	assert_true(p.target_us == 25000 && p.window_ns == 500 * MS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_start_point),
		cmocka_unit_test(test_rises_one_per_window),
		cmocka_unit_test(test_halves_and_clamps),
		cmocka_unit_test(test_holds_when_cutting_does_not_help),
		cmocka_unit_test(test_holds_in_band_and_without_samples),
		cmocka_unit_test(test_auto_target),
		cmocka_unit_test(test_from_conf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
