// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Retry-storm signal: fires after 3 consecutive windows above 20%, clears when it drops. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "control/retrystorm.h"
#include "evcap.h"

#define MS 1000000ull
#define S  1000000000ull

/* One 1 s window as 10 ticks of 100 ms; returns the result of the closing tick. */
static int window(struct sluice_retrystorm *r, const struct sluice_retrystorm_params *p,
		  uint64_t *now, uint64_t arrivals, uint64_t retrans,
		  const struct sluice_event_sink *sink)
{
	int i, rc = 0;
	for (i = 0; i < 10; i++) {
		*now += 100 * MS;
		rc = sluice_retrystorm_tick(r, p, arrivals / 10, retrans / 10, *now, sink);
		if (i < 9)
			assert_int_equal(rc, 0);
	}
	return rc;
}

static void test_fires_after_three_windows(void **st)
{
	struct sluice_retrystorm r;
	struct sluice_retrystorm_params p;
	struct evcap c;
	struct sluice_event_sink sink = evcap_sink(&c, "web");
	uint64_t now = 0;
	(void)st;
	sluice_retrystorm_params_default(&p);
	sluice_retrystorm_init(&r, 0);
	assert_int_equal(window(&r, &p, &now, 1000, 300, &sink), 0);
	assert_int_equal(window(&r, &p, &now, 1000, 300, &sink), 0);
	assert_int_equal(r.active, 0);
	assert_int_equal(c.n, 0);
	assert_int_equal(window(&r, &p, &now, 1000, 300, &sink), 1);
	assert_int_equal(r.active, 1);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.ev[0].level, SLUICE_EV_ALERT);
	assert_non_null(strstr(c.json[0], "\"machine\":\"retry_storm\""));
	assert_non_null(strstr(c.json[0], "\"ratio\":0.3"));
	/* staying above: no repeated alert */
	assert_int_equal(window(&r, &p, &now, 1000, 300, &sink), 0);
	assert_int_equal(c.n, 1);
	/* drops: clear event */
	assert_int_equal(window(&r, &p, &now, 1000, 100, &sink), 1);
	assert_int_equal(r.active, 0);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.ev[1].to, "normal");
}

static void test_streak_must_be_consecutive(void **st)
{
	struct sluice_retrystorm r;
	struct sluice_retrystorm_params p;
	uint64_t now = 0;
	(void)st;
	sluice_retrystorm_params_default(&p);
	sluice_retrystorm_init(&r, 0);
	window(&r, &p, &now, 1000, 300, NULL);
	window(&r, &p, &now, 1000, 300, NULL);
	window(&r, &p, &now, 1000, 200, NULL);      /* exactly 20% is not above */
	window(&r, &p, &now, 1000, 300, NULL);
	window(&r, &p, &now, 1000, 300, NULL);
	assert_int_equal(r.active, 0);
	window(&r, &p, &now, 1000, 300, NULL);
	assert_int_equal(r.active, 1);
}

static void test_low_traffic_says_nothing(void **st)
{
	struct sluice_retrystorm r;
	struct sluice_retrystorm_params p;
	uint64_t now = 0;
	(void)st;
	sluice_retrystorm_params_default(&p);
	sluice_retrystorm_init(&r, 0);
	window(&r, &p, &now, 1000, 500, NULL);
	window(&r, &p, &now, 10, 10, NULL);         /* 10 arrivals < min_arrivals: ignored */
	window(&r, &p, &now, 0, 0, NULL);
	assert_int_equal(r.streak, 1);
	window(&r, &p, &now, 1000, 500, NULL);
	window(&r, &p, &now, 1000, 500, NULL);
	assert_int_equal(r.active, 1);
}

static void test_from_conf(void **st)
{
	struct retry_storm_conf rc = { 0.5, 2 };
	struct sluice_retrystorm_params p;
	(void)st;
	sluice_retrystorm_params_from_conf(&rc, &p);
	assert_true(p.ratio == 0.5);
	assert_int_equal(p.windows, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fires_after_three_windows),
		cmocka_unit_test(test_streak_must_be_consecutive),
		cmocka_unit_test(test_low_traffic_says_nothing),
		cmocka_unit_test(test_from_conf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
