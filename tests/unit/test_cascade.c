// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Cascade suppression: the 6th opening within 10 s suspends, the 5th does not; resume by an
 * operator or after suspend_s; suppressed breakers stay closed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "control/cascade.h"
#include "control/breaker.h"
#include "evcap.h"

#define MS 1000000ull
#define S  1000000000ull

static void test_sixth_open_triggers(void **st)
{
	struct sluice_cascade c;
	struct sluice_cascade_params p;
	struct evcap e;
	struct sluice_event_sink sink = evcap_sink(&e, "");
	int i;
	(void)st;
	sluice_cascade_params_default(&p);
	sluice_cascade_init(&c);
	for (i = 0; i < 5; i++)
		assert_int_equal(sluice_cascade_record_open(&c, &p, "svc", (uint64_t)i * S, &sink), 0);
	assert_int_equal(sluice_cascade_tick(&c, &p, 5 * S, &sink), 0);
	assert_int_equal(e.n, 0);
	assert_int_equal(sluice_cascade_record_open(&c, &p, "svc6", 9 * S, &sink), 1);
	assert_int_equal(sluice_cascade_tick(&c, &p, 9 * S, &sink), 1);
	assert_int_equal(c.triggers, 1);
	assert_int_equal(e.n, 1);
	assert_int_equal(e.ev[0].level, SLUICE_EV_ALERT);
	assert_non_null(strstr(e.json[0], "\"machine\":\"cascade\""));
	assert_non_null(strstr(e.json[0], "\"service\":\"svc6\""));
	assert_non_null(strstr(e.json[0], "\"opens_in_window\":6"));
	assert_non_null(strstr(e.json[0], "\"level\":\"alert\""));
	/* further openings while suspended raise no second alert */
	assert_int_equal(sluice_cascade_record_open(&c, &p, "svc7", 9 * S + 1, &sink), 0);
	assert_int_equal(e.n, 1);
}

static void test_spread_out_opens_do_not_trigger(void **st)
{
	struct sluice_cascade c;
	struct sluice_cascade_params p;
	int i;
	(void)st;
	sluice_cascade_params_default(&p);
	sluice_cascade_init(&c);
	for (i = 0; i < 5; i++)
		sluice_cascade_record_open(&c, &p, "s", (uint64_t)i * S, NULL);
	/* at 11 s the openings at 0 s and 1 s are 10 s or more old: 4 in the window */
	assert_int_equal(sluice_cascade_record_open(&c, &p, "s", 11 * S, NULL), 0);
	assert_int_equal(c.last_count, 4);
	assert_int_equal(c.suspended, 0);
	/* 100 openings a minute apart never trigger */
	for (i = 0; i < 100; i++)
		assert_int_equal(sluice_cascade_record_open(&c, &p, "s", (uint64_t)(20 + 60 * i) * S,
							    NULL), 0);
}

static void trigger(struct sluice_cascade *c, const struct sluice_cascade_params *p, uint64_t t)
{
	int i;
	for (i = 0; i < 6; i++)
		sluice_cascade_record_open(c, p, "s", t + (uint64_t)i * 100 * MS, NULL);
	assert_int_equal(c->suspended, 1);
}

static void test_resume_by_operator_and_timeout(void **st)
{
	struct sluice_cascade c;
	struct sluice_cascade_params p;
	struct evcap e;
	struct sluice_event_sink sink = evcap_sink(&e, "");
	(void)st;
	sluice_cascade_params_default(&p);
	p.suspend_s = 0;                         /* operator only */
	sluice_cascade_init(&c);
	trigger(&c, &p, 0);
	assert_int_equal(sluice_cascade_tick(&c, &p, 3600 * S, &sink), 1);
	sluice_cascade_clear(&c, 3600 * S, "alice", &sink);
	assert_int_equal(sluice_cascade_tick(&c, &p, 3600 * S, &sink), 0);
	assert_string_equal(evcap_last(&e)->to, "armed");
	assert_string_equal(evcap_last(&e)->why, "alice");
	/* the old openings are forgotten: one more opening, while they are still inside the
	 * 10 s window, does not re-trigger */
	sluice_cascade_init(&c);
	trigger(&c, &p, 0);
	sluice_cascade_clear(&c, 1 * S, "alice", &sink);
	assert_int_equal(sluice_cascade_record_open(&c, &p, "s", 1 * S, NULL), 0);
	assert_int_equal(c.last_count, 1);

	p.suspend_s = 300;
	sluice_cascade_init(&c);
	trigger(&c, &p, 1000 * S);
	assert_int_equal(sluice_cascade_tick(&c, &p, 1000 * S + 299 * S, &sink), 1);
	assert_int_equal(sluice_cascade_tick(&c, &p, 1000 * S + 300 * S + 500 * MS, &sink), 0);
	assert_string_equal(evcap_last(&e)->why, "suspend_elapsed");
	/* so are they after the suspension elapsed, even when it is shorter than the window */
	p.suspend_s = 1;
	sluice_cascade_init(&c);
	trigger(&c, &p, 2000 * S);
	assert_int_equal(sluice_cascade_tick(&c, &p, 2001 * S + 500 * MS, &sink), 0);
	assert_int_equal(sluice_cascade_record_open(&c, &p, "s", 2001 * S + 500 * MS, NULL), 0);
	assert_int_equal(c.last_count, 1);
}

static void test_breakers_suppressed_after_trigger(void **st)
{
	struct sluice_cascade c;
	struct sluice_cascade_params cp;
	struct sluice_breaker b[8];
	struct sluice_breaker_params bp;
	struct sluice_breaker_input bad = { .completed = 30, .errors = 30 };
	int i, opened = 0;
	(void)st;
	sluice_cascade_params_default(&cp);
	sluice_breaker_params_default(&bp);
	sluice_cascade_init(&c);
	/* one tick, eight failing services: the controller's order is cascade tick, then each
	 * breaker with suppressed = the flag, feeding openings back into the cascade */
	for (i = 0; i < 8; i++) {
		sluice_breaker_init(&b[i], (uint64_t)i, 0);
		bad.suppressed = sluice_cascade_tick(&c, &cp, S, NULL);
		if (sluice_breaker_tick(&b[i], &bp, &bad, S, NULL) & SLUICE_BRK_OPENED) {
			opened++;
			sluice_cascade_record_open(&c, &cp, "s", S, NULL);
		}
	}
	assert_int_equal(opened, 6);             /* the 6th opens and triggers; 7th, 8th don't */
	assert_int_equal(b[5].state, SLUICE_BREAKER_OPEN);
	assert_int_equal(b[6].state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(b[7].state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(c.suspended, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sixth_open_triggers),
		cmocka_unit_test(test_spread_out_opens_do_not_trigger),
		cmocka_unit_test(test_resume_by_operator_and_timeout),
		cmocka_unit_test(test_breakers_suppressed_after_trigger),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
