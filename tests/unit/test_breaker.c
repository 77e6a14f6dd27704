// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Circuit breaker with a fake clock: thresholds, min_calls, 429s, sliding window, jitter,
 * the half-open walk, fallback to OPEN, suppression. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "control/breaker.h"
#include "evcap.h"

#define MS 1000000ull
#define S  1000000000ull

static struct sluice_breaker_input in(uint64_t completed, uint64_t errors, uint64_t r429,
				      double slow)
{
	struct sluice_breaker_input i = { .completed = completed, .errors = errors,
					  .resp_429 = r429, .slow = slow };
	return i;
}

static int feed(struct sluice_breaker *b, const struct sluice_breaker_params *p, uint64_t now,
		uint64_t completed, uint64_t errors, uint64_t r429, double slow,
		const struct sluice_event_sink *sink)
{
	struct sluice_breaker_input i = in(completed, errors, r429, slow);
	return sluice_breaker_tick(b, p, &i, now, sink);
}

static void setup(struct sluice_breaker *b, struct sluice_breaker_params *p, uint64_t seed)
{
	sluice_breaker_params_default(p);
	sluice_breaker_init(b, seed, 0);
}

static void test_not_below_min_calls(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	(void)st;
	setup(&b, &p, 1);
	assert_int_equal(feed(&b, &p, 100 * MS, 19, 19, 0, 19, NULL), 0);
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(sluice_breaker_admit(&b, &p), SLUICE_PROB_ONE);
	/* the 20th call reaches min_calls: 20/20 errors opens */
	assert_true(feed(&b, &p, 200 * MS, 1, 1, 0, 0, NULL) & SLUICE_BRK_OPENED);
	assert_int_equal(b.state, SLUICE_BREAKER_OPEN);
	assert_int_equal(sluice_breaker_admit(&b, &p), 0);
}

static void test_opens_on_errors(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	struct evcap c;
	struct sluice_event_sink sink = evcap_sink(&c, "pay");
	(void)st;
	setup(&b, &p, 2);
	feed(&b, &p, 100 * MS, 20, 9, 0, 0, &sink);           /* 45%: stays closed */
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(c.n, 0);
	assert_int_equal(feed(&b, &p, 200 * MS, 2, 2, 0, 0, &sink),
			 SLUICE_BRK_OPENED | SLUICE_BRK_CHANGED);   /* 11/22 = 50% */
	assert_int_equal(b.state, SLUICE_BREAKER_OPEN);
	assert_int_equal(b.opens, 1);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.ev[0].why, "error_rate");
	assert_non_null(strstr(c.json[0], "\"service\":\"pay\""));
	assert_non_null(strstr(c.json[0], "\"machine\":\"breaker\""));
	assert_non_null(strstr(c.json[0], "\"from\":\"closed\",\"to\":\"open\""));
	assert_non_null(strstr(c.json[0], "\"calls\":22"));
	assert_non_null(strstr(c.json[0], "\"error_rate\":0.5"));
}

static void test_opens_on_slow_calls_alone(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	(void)st;
	setup(&b, &p, 3);
	feed(&b, &p, 100 * MS, 20, 0, 0, 11, NULL);           /* 55% slow */
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
	feed(&b, &p, 200 * MS, 5, 0, 0, 4, NULL);             /* 15/25 = 60% */
	assert_int_equal(b.state, SLUICE_BREAKER_OPEN);
}

static void test_429_not_failures(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	(void)st;
	setup(&b, &p, 4);
	/* 100 responses of which 90 are 429s: 10 real calls (all errors) < min_calls */
	feed(&b, &p, 100 * MS, 100, 10, 90, 0, NULL);
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(b.win_calls, 10);
	/* 429s do not dilute the rate either: +10 calls, 0 errors -> 10/20 = 50% opens */
	feed(&b, &p, 200 * MS, 60, 0, 50, 0, NULL);
	assert_int_equal(b.win_calls, 20);
	assert_int_equal(b.state, SLUICE_BREAKER_OPEN);
}

static void test_sliding_window(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	(void)st;
	setup(&b, &p, 5);
	feed(&b, &p, 500 * MS, 10, 10, 0, 0, NULL);
	feed(&b, &p, 11 * S + 500 * MS, 10, 10, 0, 0, NULL);  /* first batch aged out (11 s) */
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(b.win_calls, 10);
	feed(&b, &p, 15 * S, 10, 10, 0, 0, NULL);            /* 20 within 10 s */
	assert_int_equal(b.state, SLUICE_BREAKER_OPEN);
}

/* A 1 s window is the last second, not "since the last whole second": 8 failed calls at
 * 0.9 s and 4 at 1.1 s are 4 + 0.9 x 8 = 11 calls in the window at 1.1 s (min_calls 10),
 * and the oldest second's share fades as the window moves on. */
static void test_window_spans_second_boundary(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	(void)st;
	setup(&b, &p, 6);
	p.window_s = 1;
	p.min_calls = 10;
	feed(&b, &p, 900 * MS, 8, 8, 0, 0, NULL);
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(feed(&b, &p, 1 * S + 100 * MS, 4, 4, 0, 0, NULL) & SLUICE_BRK_OPENED,
			 SLUICE_BRK_OPENED);
	assert_int_equal(b.win_calls, 11);

	setup(&b, &p, 7);
	p.window_s = 1;
	p.min_calls = 10;
	feed(&b, &p, 900 * MS, 8, 8, 0, 0, NULL);
	feed(&b, &p, 1 * S + 800 * MS, 4, 4, 0, 0, NULL);    /* 4 + 0.2 x 8 = 5: too few */
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(b.win_calls, 5);
	feed(&b, &p, 2 * S + 100 * MS, 0, 0, 0, 0, NULL);    /* 0.9 x 4, the 8 gone */
	assert_int_equal(b.win_calls, 3);
}

static void test_open_jitter_bounds(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	double lo = 1e9, hi = 0;
	uint64_t seed;
	(void)st;
	for (seed = 0; seed < 2000; seed++) {
		setup(&b, &p, seed);
		feed(&b, &p, 0, 20, 20, 0, 0, NULL);
		assert_int_equal(b.state, SLUICE_BREAKER_OPEN);
		double d = (double)b.open_until_ns / 1e9;
		assert_true(d >= 0.8 * p.open_s && d <= 1.2 * p.open_s);
		assert_true(b.open_dur_s >= 4.0 && b.open_dur_s <= 6.0);
		if (d < lo) lo = d;
		if (d > hi) hi = d;
	}
	/* it really is spread over the interval, not a constant */
	assert_true(lo < 4.05);
	assert_true(hi > 5.95);
}

/* Opens the breaker at t=0 and returns when it entered HALF_OPEN. */
static uint64_t open_then_half_open(struct sluice_breaker *b, struct sluice_breaker_params *p)
{
	uint64_t now = 0;

	feed(b, p, now, 20, 20, 0, 0, NULL);
	assert_int_equal(b->state, SLUICE_BREAKER_OPEN);
	assert_int_equal(sluice_breaker_retry_after_s(b, 0), (uint32_t)((b->open_until_ns + S - 1) / S));
	while (b->state == SLUICE_BREAKER_OPEN) {
		assert_true(now < b->open_until_ns);
		assert_true(sluice_breaker_remaining_ns(b, now) == b->open_until_ns - now);
		now += 100 * MS;
		feed(b, p, now, 3, 3, 0, 0, NULL);          /* stragglers while open: ignored */
	}
	assert_true(now >= b->open_until_ns && now < b->open_until_ns + 100 * MS);
	assert_int_equal(b->state, SLUICE_BREAKER_HALF_OPEN);
	assert_int_equal(sluice_breaker_retry_after_s(b, now), 0);
	return now;
}

static void test_half_open_walk(void **st)
{
	static const uint32_t pct[] = { 10, 30, 60, 100 };
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	struct evcap c;
	struct sluice_event_sink sink = evcap_sink(&c, "web");
	uint64_t now, t0;
	int s;
	(void)st;
	setup(&b, &p, 7);
	now = open_then_half_open(&b, &p);
	for (s = 0; s < 4; s++) {
		assert_int_equal(b.state, SLUICE_BREAKER_HALF_OPEN);
		assert_int_equal(b.step, s);
		assert_int_equal(sluice_breaker_admit(&b, &p), pct[s] * SLUICE_PROB_ONE / 100);
		t0 = now;
		/* 2 calls per tick, 1 error in 40: success 97.5% >= 90% */
		while (b.state == SLUICE_BREAKER_HALF_OPEN && b.step == (uint32_t)s) {
			now += 100 * MS;
			feed(&b, &p, now, 2, (now - t0) == 100 * MS ? 1 : 0, 0, 0, &sink);
		}
		assert_true(now - t0 >= 5 * S);             /* each step held step_s */
		assert_true(now - t0 < 5 * S + 100 * MS);
	}
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(sluice_breaker_admit(&b, &p), SLUICE_PROB_ONE);
	assert_string_equal(evcap_last(&c)->why, "half_open_passed");
	assert_non_null(strstr(evcap_last_json(&c), "\"to\":\"closed\""));
	/* the failures that opened it are gone: a clean window after closing */
	assert_int_equal(b.win_calls, 0);
}

static void test_half_open_failure_reopens(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	uint64_t now, t;
	(void)st;
	setup(&b, &p, 8);
	now = open_then_half_open(&b, &p);
	/* pass step 0 */
	for (t = 0; t < 50; t++) {
		now += 100 * MS;
		feed(&b, &p, now, 1, 0, 0, 0, NULL);
	}
	assert_int_equal(b.step, 1);
	/* step 1: 10 calls, 2 failures (one error, one slow) = 80% < 90%: judged at step end */
	t = now;
	feed(&b, &p, now += 100 * MS, 4, 0, 0, 0, NULL);
	feed(&b, &p, now += 100 * MS, 6, 1, 0, 1, NULL);
	assert_int_equal(b.state, SLUICE_BREAKER_HALF_OPEN);   /* 10 calls: not yet decided */
	while (b.state == SLUICE_BREAKER_HALF_OPEN)
		feed(&b, &p, now += 100 * MS, 0, 0, 0, 0, NULL);
	assert_true(now - t >= 5 * S && now - t < 5 * S + 100 * MS);
	assert_int_equal(b.state, SLUICE_BREAKER_OPEN);
	assert_true(b.open_until_ns >= now + 4 * S && b.open_until_ns <= now + 6 * S);
	/* a clear failure (>= min_calls calls) cuts the step short */
	while (b.state != SLUICE_BREAKER_HALF_OPEN)
		feed(&b, &p, now += 100 * MS, 0, 0, 0, 0, NULL);
	feed(&b, &p, now += 100 * MS, 10, 3, 0, 0, NULL);
	assert_int_equal(b.state, SLUICE_BREAKER_HALF_OPEN);
	feed(&b, &p, now += 100 * MS, 10, 3, 0, 0, NULL);
	assert_int_equal(b.state, SLUICE_BREAKER_OPEN);
	assert_int_equal(b.opens, 1);               /* a re-open is not a new CLOSED->OPEN */
}

static void test_half_open_needs_calls(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	uint64_t now, t;
	(void)st;
	setup(&b, &p, 9);
	now = open_then_half_open(&b, &p);
	/* no traffic for 20 s: the step is held, not passed */
	for (t = 0; t < 200; t++) {
		now += 100 * MS;
		feed(&b, &p, now, 0, 0, 0, 0, NULL);
	}
	assert_int_equal(b.state, SLUICE_BREAKER_HALF_OPEN);
	assert_int_equal(b.step, 0);
	/* 4 good calls are still fewer than ho_min_calls (5); the 5th passes the step */
	feed(&b, &p, now += 100 * MS, 4, 0, 0, 0, NULL);
	assert_int_equal(b.step, 0);
	feed(&b, &p, now += 100 * MS, 1, 0, 0, 0, NULL);
	assert_int_equal(b.step, 1);
}

/* One tick of a service whose class c has calls and errors of its own, the service's counts
 * their sum, with the classes' counts kept in cl. */
struct class_tick {
	uint64_t calls[SLUICE_NUM_CLASSES], errors[SLUICE_NUM_CLASSES];
	double slow[SLUICE_NUM_CLASSES];
};

static int feed_classes(struct sluice_breaker *b, const struct sluice_breaker_params *p,
			struct sluice_brk_classes *cl, uint64_t now, const struct class_tick *t,
			const struct sluice_event_sink *sink)
{
	struct sluice_breaker_input i = { .classes = cl };

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		i.completed += t->calls[c];
		i.errors += t->errors[c];
		i.slow += t->slow[c];
		i.class_completed[c] = t->calls[c];
		i.class_errors[c] = t->errors[c];
		i.class_slow[c] = t->slow[c];
	}
	return sluice_breaker_tick(b, p, &i, now, sink);
}

/* L3's requests all fail (a client that has the application answer 500 at will, one broken
 * endpoint), L0's succeed: the breaker, which would refuse L0 too, stays closed, once said. */
static void test_lower_class_failures_do_not_open(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	struct sluice_brk_classes cl = { 0 };
	struct evcap c;
	struct sluice_event_sink sink = evcap_sink(&c, "api");
	struct class_tick t = { .calls = { 5, 0, 0, 30 }, .errors = { 0, 0, 0, 30 } };
	uint64_t now = 0;
	(void)st;
	setup(&b, &p, 21);
	for (int i = 0; i < 50; i++)        /* 5 s: 86 % of the service's calls are errors */
		assert_int_equal(feed_classes(&b, &p, &cl, now += 100 * MS, &t, &sink), 0);
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
	assert_true(b.win_error_rate > 0.8);       /* the service's rate is still what it is */
	assert_int_equal(c.n, 1);
	assert_string_equal(c.ev[0].why, "lower_class_failures_only");
	/* the same with slow calls instead of errors */
	memset(t.errors, 0, sizeof(t.errors));
	t.slow[3] = 30;
	for (int i = 0; i < 50; i++)
		assert_int_equal(feed_classes(&b, &p, &cl, now += 100 * MS, &t, &sink), 0);
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
	/* L0's calls are slow as well: now it is the backend, and it opens */
	t.slow[0] = 5;
	int rc = 0;
	for (int i = 0; i < 100 && !(rc & SLUICE_BRK_OPENED); i++)   /* the window turns over */
		rc = feed_classes(&b, &p, &cl, now += 100 * MS, &t, &sink);
	assert_true(rc & SLUICE_BRK_OPENED);
	assert_int_equal(b.state, SLUICE_BREAKER_OPEN);
}

/* The highest busy class is the highest one with ho_min_calls in the window: an L0 with too
 * few calls to say anything does not hold the breaker, the next class up does (here L1, which
 * fails with L3); with no class at ho_min_calls (the counts by class lost at a restart) the
 * service's counts decide alone. */
static void test_highest_busy_class_decides(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	struct sluice_brk_classes cl = { 0 };
	struct class_tick t = { .calls = { 0, 3, 0, 30 }, .errors = { 0, 3, 0, 30 } };
	uint64_t now = 0;
	(void)st;
	setup(&b, &p, 22);
	/* one L0 call in the window, healthy: too few to judge on */
	struct class_tick l0 = { .calls = { 1, 0, 0, 0 } };
	feed_classes(&b, &p, &cl, now += 100 * MS, &l0, NULL);
	assert_true(feed_classes(&b, &p, &cl, now += 100 * MS, &t, NULL) & SLUICE_BRK_OPENED);
	/* no counts by class at all: the service's 30 of 30 open it at once */
	setup(&b, &p, 23);
	memset(&cl, 0, sizeof(cl));
	struct sluice_breaker_input i = { .completed = 30, .errors = 30, .classes = &cl };
	assert_true(sluice_breaker_tick(&b, &p, &i, 100 * MS, NULL) & SLUICE_BRK_OPENED);
}

/* Half-open: a step fails on the highest busy class's failures, not on a lower class's. */
static void test_half_open_judges_the_highest_class(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	struct sluice_brk_classes cl = { 0 };
	struct class_tick bad = { .calls = { 10, 0, 0, 10 }, .errors = { 10, 0, 0, 10 } };
	struct class_tick l3_fails = { .calls = { 2, 0, 0, 4 }, .errors = { 0, 0, 0, 4 } };
	uint64_t now = 100 * MS;
	(void)st;
	setup(&b, &p, 24);
	assert_true(feed_classes(&b, &p, &cl, now, &bad, NULL) & SLUICE_BRK_OPENED);
	now = b.open_until_ns;
	feed_classes(&b, &p, &cl, now, &(struct class_tick){ 0 }, NULL);
	assert_int_equal(b.state, SLUICE_BREAKER_HALF_OPEN);
	/* each step: L0 succeeds (6 calls a second), L3 fails all of its (4 a tick... 67 % of
	 * the service's calls): every step passes and the breaker closes */
	for (int i = 0; i < 400 && b.state == SLUICE_BREAKER_HALF_OPEN; i++)
		feed_classes(&b, &p, &cl, now += 100 * MS, &l3_fails, NULL);
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
	/* without the counts by class the same traffic sends it back to open */
	setup(&b, &p, 25);
	now = 100 * MS;
	feed(&b, &p, now, 20, 20, 0, 0, NULL);
	now = b.open_until_ns;
	feed(&b, &p, now, 0, 0, 0, 0, NULL);
	int reopened = 0;
	for (int i = 0; i < 400 && b.state != SLUICE_BREAKER_CLOSED && !reopened; i++) {
		feed(&b, &p, now += 100 * MS, 6, 4, 0, 0, NULL);
		reopened = b.state == SLUICE_BREAKER_OPEN;
	}
	assert_true(reopened);
}

static void test_suppressed(void **st)
{
	struct sluice_breaker b;
	struct sluice_breaker_params p;
	struct evcap c;
	struct sluice_event_sink sink = evcap_sink(&c, "db");
	struct sluice_breaker_input i = in(30, 30, 0, 0);
	(void)st;
	setup(&b, &p, 10);
	i.suppressed = 1;
	assert_int_equal(sluice_breaker_tick(&b, &p, &i, 100 * MS, &sink), SLUICE_BRK_WOULD_OPEN);
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.ev[0].why, "would_open_error_rate_suppressed");
	assert_int_equal(c.ev[0].level, SLUICE_EV_ALERT);
	/* reported once, not every tick */
	assert_int_equal(sluice_breaker_tick(&b, &p, &i, 200 * MS, &sink), 0);
	assert_int_equal(c.n, 1);
	assert_int_equal(b.opens, 0);
	/* suppression lifted: it opens */
	i.suppressed = 0;
	assert_true(sluice_breaker_tick(&b, &p, &i, 300 * MS, &sink) & SLUICE_BRK_OPENED);
	assert_int_equal(b.state, SLUICE_BREAKER_OPEN);
	/* operator reset */
	sluice_breaker_reset(&b, 400 * MS, "operator", &sink);
	assert_int_equal(b.state, SLUICE_BREAKER_CLOSED);
}

static void test_from_conf(void **st)
{
	struct breaker_conf bc;
	struct sluice_breaker_params p;
	(void)st;
	memset(&bc, 0, sizeof(bc));
	sluice_breaker_params_from_conf(&bc, &p);
	assert_int_equal(p.min_calls, 20);
	assert_int_equal(p.n_steps, 4);
	assert_int_equal(p.steps[3], 100);
	bc.half_open_steps[0] = 25; bc.half_open_steps[1] = 50; bc.n_half_open_steps = 2;
	bc.window_s = 30; bc.slow_call_ms = 200;
	sluice_breaker_params_from_conf(&bc, &p);
	assert_int_equal(p.n_steps, 3);             /* 100 appended: the walk must end open */
	assert_int_equal(p.steps[2], 100);
	assert_int_equal(p.window_s, 30);
	assert_int_equal(p.slow_call_us, 200000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_not_below_min_calls),
		cmocka_unit_test(test_opens_on_errors),
		cmocka_unit_test(test_opens_on_slow_calls_alone),
		cmocka_unit_test(test_429_not_failures),
		cmocka_unit_test(test_sliding_window),
		cmocka_unit_test(test_window_spans_second_boundary),
		cmocka_unit_test(test_open_jitter_bounds),
		cmocka_unit_test(test_half_open_walk),
		cmocka_unit_test(test_half_open_failure_reopens),
		cmocka_unit_test(test_half_open_needs_calls),
		cmocka_unit_test(test_suppressed),
		cmocka_unit_test(test_lower_class_failures_do_not_open),
		cmocka_unit_test(test_highest_busy_class_decides),
		cmocka_unit_test(test_half_open_judges_the_highest_class),
		cmocka_unit_test(test_from_conf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
