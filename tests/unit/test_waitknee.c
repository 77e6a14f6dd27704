// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The knee from the wait before the server reads (control/waitknee.h) alone, and the limit's
 * move it drives (control/limit.h, sluice_limit_move). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "control/waitknee.h"
#include "control/limit.h"
#include "control/baseline.h"
#include "evcap.h"

#define S 1000000000ull

/* A decided window at Apache's 310 responses/s in which the limit refused units (bound),
 * unless peak is below it by more than the burst margins. */
static struct sluice_waitknee_input win(uint64_t waits, double wait_us, double mean_us,
					uint32_t limit, uint32_t peak)
{
	struct sluice_waitknee_input in = { .waits = waits, .wait_us = wait_us, .mean_us = mean_us,
					    .limit = limit, .peak_inflight = peak,
					    .bound = peak + 8 > limit, .rate = 310 };
	return in;
}

static void test_allowance_and_queued(void **st)
{
	struct sluice_waitknee_params p;
	struct sluice_waitknee_input in;
	struct sluice_waitknee k;
	(void)st;
	sluice_waitknee_params_default(&p, S);
	sluice_waitknee_init(&k);
	/* a share of the mean latency, with a floor for fast services */
	assert_true(sluice_waitknee_allowance(&p, 57000) > 2000);
	assert_true(sluice_waitknee_allowance(&p, 57000) < 3000);
	assert_true(sluice_waitknee_allowance(&p, 1000) == p.allow_min_us);
	/* Apache at 16 and 17 in flight (16 workers x 50 ms, the closed loop): 0.68 ms of wait
	 * is no queue, 3.7 ms is one */
	in = win(300, 680, 53800, 16, 16);
	assert_int_equal(sluice_waitknee_queued(&k, &p, &in), 0);
	in = win(300, 3700, 57000, 17, 17);
	assert_int_equal(sluice_waitknee_queued(&k, &p, &in), 1);
	/* too few measured waits, or none: not measured */
	in = win(19, 30000, 57000, 17, 17);
	assert_int_equal(sluice_waitknee_queued(&k, &p, &in), -1);
	in = win(0, 0, 57000, 17, 17);
	assert_int_equal(sluice_waitknee_queued(&k, &p, &in), -1);
	/* a wait that holds under half a request is no queue where the limit binds (0.2 x 2
	 * ms), under two where it does not (a slow reader in calm: 90/s x 5 ms) */
	in = win(300, 2000, 21000, 17, 17);
	in.rate = 200;
	assert_int_equal(sluice_waitknee_queued(&k, &p, &in), 0);
	in.rate = 300;
	assert_int_equal(sluice_waitknee_queued(&k, &p, &in), 1);
	in = win(300, 5000, 45000, 154, 3);
	in.rate = 90;
	assert_int_equal(sluice_waitknee_queued(&k, &p, &in), 0);
	in.rate = 400;
	assert_int_equal(sluice_waitknee_queued(&k, &p, &in), 1);
	/* above a floor (the wait a trim did not remove) only the rest counts */
	k.floor_us = 4000;
	assert_int_equal(sluice_waitknee_queued(&k, &p, &in), 0);
}

static void test_trim_takes_the_waiting_share(void **st)
{
	struct sluice_waitknee_params p;
	struct sluice_waitknee k;
	struct sluice_waitknee_input in;
	double to = 0;
	(void)st;
	sluice_waitknee_params_default(&p, S);
	sluice_waitknee_init(&k);
	/* 24 in flight at a limit of 30, a third of the time waiting: 8 come off the limit, which
	 * keeps the 6 it held above in-flight */
	in = win(300, 25000, 75000, 30, 24);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 10 * S, &to), SLUICE_WAITKNEE_TRIM);
	assert_true(to > 21.9 && to < 22.1);
	/* just past the knee: one less, at least */
	sluice_waitknee_init(&k);
	in = win(300, 3700, 57000, 17, 17);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 10 * S, &to), SLUICE_WAITKNEE_TRIM);
	assert_true(to <= 16.0 && to > 15.4);
	/* a backlog behind a limit that did not bind (a first start during an overload: 56
	 * clients, a start limit of 77): from the peak, at most halved */
	sluice_waitknee_init(&k);
	in = win(300, 230000, 285000, 77, 56);
	assert_int_equal(in.bound, 0);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 10 * S, &to), SLUICE_WAITKNEE_TRIM);
	assert_true(to > 27.9 && to < 28.1);
	assert_int_equal(k.trims, 1);                 /* each init starts afresh */
}

static void test_hold_then_probe(void **st)
{
	struct sluice_waitknee_params p;
	struct sluice_waitknee k;
	struct sluice_waitknee_input in;
	double to = 0;
	(void)st;
	sluice_waitknee_params_default(&p, S);
	sluice_waitknee_init(&k);
	in = win(300, 3700, 57000, 17, 17);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 10 * S, &to), SLUICE_WAITKNEE_TRIM);
	/* at 16 the wait is gone: the trim is judged helpful, and the limit holds for hold_ns */
	in = win(300, 500, 53500, 16, 16);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 11 * S, &to), SLUICE_WAITKNEE_HOLD);
	assert_int_equal(k.ref_limit, 0);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 14 * S, &to), SLUICE_WAITKNEE_HOLD);
	/* a window without measured waits holds too while the hold lasts */
	in = win(3, 500, 53500, 16, 16);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 14 * S, &to), SLUICE_WAITKNEE_HOLD);
	assert_true(k.last_wait_us < 0);
	/* then the limit's own rules (which probe by one near the knee) */
	in = win(300, 500, 53500, 16, 16);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 15 * S, &to), SLUICE_WAITKNEE_NONE);
	assert_int_equal(k.undone, 0);
}

static void test_late_reader_undone(void **st)
{
	struct sluice_waitknee_params p;
	struct sluice_waitknee k;
	struct sluice_waitknee_input in;
	double to = 0;
	(void)st;
	sluice_waitknee_params_default(&p, S);
	sluice_waitknee_init(&k);
	/* a server that reads every request 5 ms late whatever its load: a trim ... */
	in = win(300, 5000, 55000, 16, 16);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 10 * S, &to), SLUICE_WAITKNEE_TRIM);
	/* ... leaves the wait where it was: unclear once, so one more trim ... */
	in = win(300, 4900, 55000, 15, 15);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 11 * S, &to), SLUICE_WAITKNEE_TRIM);
	assert_int_equal(k.undone, 0);
	/* ... and the same wait again: back to where the first began (16), the rule is off for
	 * off_ns, and that wait is the floor: no queue */
	in = win(300, 4950, 55000, 14, 14);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 12 * S, &to), SLUICE_WAITKNEE_UNDO);
	assert_true(to == 16);
	assert_int_equal(k.undone, 1);
	assert_true(k.floor_us == 4950);
	assert_int_equal(sluice_waitknee_queued(&k, &p, &in), 0);
	in = win(300, 9000, 60000, 18, 18);      /* a queue above the floor */
	assert_int_equal(sluice_waitknee_queued(&k, &p, &in), 1);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 20 * S, &to), SLUICE_WAITKNEE_NONE);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 41 * S, &to), SLUICE_WAITKNEE_NONE);
	/* after it, a trim may test it again: by the queue's share above the floor */
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 42 * S + 1, &to),
			 SLUICE_WAITKNEE_TRIM);
	assert_true(to > 16.7 && to < 16.8);      /* 18 - 18 x 4.05 / 60 */
	/* a trim whose wait halved was helpful, even if some wait is left */
	sluice_waitknee_init(&k);
	in = win(300, 20000, 70000, 24, 24);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 10 * S, &to), SLUICE_WAITKNEE_TRIM);
	in = win(300, 6000, 58000, 18, 18);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 11 * S, &to), SLUICE_WAITKNEE_TRIM);
	assert_int_equal(k.strikes, 0);
	/* an unclear judgement followed by a helpful one starts afresh */
	in = win(300, 5900, 58000, 17, 17);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 12 * S, &to), SLUICE_WAITKNEE_TRIM);
	assert_int_equal(k.strikes, 1);
	in = win(300, 500, 53000, 16, 16);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 13 * S, &to), SLUICE_WAITKNEE_HOLD);
	assert_int_equal(k.strikes, 0);
	assert_int_equal(k.undone, 0);
	/* a trim the limit could not make (forgotten) is not judged */
	in = win(300, 5900, 58000, 18, 18);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 14 * S, &to), SLUICE_WAITKNEE_TRIM);
	sluice_waitknee_forget(&k);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 15 * S, &to), SLUICE_WAITKNEE_TRIM);
	assert_int_equal(k.strikes, 0);
}

/* A big trim's backlog drains before it is judged: a first start's 154 -> 79 read 249 ->
 * 185 ms in the window after it (on Apache), with in-flight still above the new limit. */
static void test_judged_after_the_drain(void **st)
{
	struct sluice_waitknee_params p;
	struct sluice_waitknee k;
	struct sluice_waitknee_input in;
	double to = 0;
	(void)st;
	sluice_waitknee_params_default(&p, S);
	sluice_waitknee_init(&k);
	in = win(300, 249000, 289000, 154, 154);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 10 * S, &to), SLUICE_WAITKNEE_TRIM);
	assert_true(to > 76.9 && to < 77.1);      /* at most halved */
	/* the next window: in-flight still above the new limit, the old backlog's wait */
	in = win(300, 185000, 237000, 77, 120);
	for (int i = 1; i <= 5; i++)
		assert_int_equal(sluice_waitknee_decide(&k, &p, &in, (10 + (uint64_t)i) * S, &to),
				 SLUICE_WAITKNEE_HOLD);
	assert_int_equal(k.undone, 0);
	assert_int_equal(k.ref_limit, 154);
	/* drained: judged (unclear once), and trimmed again */
	in = win(300, 185000, 237000, 77, 77);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 16 * S, &to), SLUICE_WAITKNEE_TRIM);
	assert_int_equal(k.strikes, 1);
	in = win(300, 60000, 110000, 40, 40);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 17 * S, &to), SLUICE_WAITKNEE_TRIM);
	assert_int_equal(k.strikes, 0);
	assert_int_equal(k.undone, 0);
	/* a drain that never ends (L0's room above the limit) is judged after judge_wait */
	sluice_waitknee_init(&k);
	in = win(300, 20000, 70000, 24, 24);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 10 * S, &to), SLUICE_WAITKNEE_TRIM);
	in = win(300, 2000, 55000, 20, 30);
	for (int i = 1; i <= 5; i++)
		assert_int_equal(sluice_waitknee_decide(&k, &p, &in, (10 + (uint64_t)i) * S, &to),
				 SLUICE_WAITKNEE_HOLD);
	assert_int_equal(k.ref_limit, 24);
	assert_int_equal(sluice_waitknee_decide(&k, &p, &in, 16 * S, &to), SLUICE_WAITKNEE_NONE);
	assert_int_equal(k.ref_limit, 0);
}

static void test_limit_move(void **st)
{
	struct sluice_limit_params p;
	struct sluice_limit l;
	struct sluice_event_sink sink;
	struct evcap c;
	uint64_t cuts;
	(void)st;
	sluice_limit_params_default(&p);
	p.min = 4;
	p.max = 256;
	sluice_limit_init(&l, &p);
	sink = evcap_sink(&c, "web");
	cuts = l.cuts;
	assert_int_equal(sluice_limit_move(&l, &p, 15.9, "wait_above_allowance", 3700, 1710, 57000,
					   S, &sink), 1);
	assert_int_equal(l.limit, 16);
	assert_int_equal(l.last_dir, -1);
	assert_int_equal(l.cuts, cuts + 1);
	assert_string_equal(evcap_last(&c)->why, "wait_above_allowance");
	assert_non_null(strstr(evcap_last_json(&c), "\"wait_us\":3700"));
	/* a restore is not a cut */
	assert_int_equal(sluice_limit_move(&l, &p, 17, "wait_did_not_follow", 3700, 1710, 57000,
					   2 * S, &sink), 1);
	assert_int_equal(l.limit, 17);
	assert_int_equal(l.last_dir, 1);
	assert_int_equal(l.cuts, cuts + 1);
	/* never below the evidence floor or min; a fixed limit or AIMD does not move */
	l.floor = 12;
	sluice_limit_move(&l, &p, 8, "wait_above_allowance", 9000, 1710, 57000, 3 * S, &sink);
	assert_int_equal(l.limit, 12);
	l.floor = 0;
	sluice_limit_move(&l, &p, 1, "wait_above_allowance", 9000, 1710, 57000, 4 * S, &sink);
	assert_int_equal(l.limit, 4);
	p.algorithm = SLUICE_LIMIT_AIMD;
	assert_int_equal(sluice_limit_move(&l, &p, 10, "wait_did_not_follow", 0, 0, 0, 5 * S,
					   &sink), 0);
	p.algorithm = SLUICE_LIMIT_GRADIENT;
	p.fixed = 40;
	assert_int_equal(sluice_limit_move(&l, &p, 10, "wait_above_allowance", 0, 0, 0, 6 * S,
					   &sink), 0);
	assert_int_equal(l.limit, 4);
}

/* A window that carries a measured queue never sets or raises the baseline; it may lower it. */
static void test_queued_window_never_teaches(void **st)
{
	struct sluice_baseline_params p;
	struct sluice_baseline b;
	struct sluice_baseline_window w = { .samples = 100, .latency_us = 285000, .calls = 100,
					    .queued = 1 };
	(void)st;
	sluice_baseline_params_default(&p);
	sluice_baseline_reset(&b);
	for (int i = 0; i < 200; i++)
		assert_int_equal(sluice_baseline_add(&b, &p, &w), 0);
	assert_true(b.value_us == 0);                  /* not even the first one */
	w.queued = 0;
	w.latency_us = 53000;
	assert_int_equal(sluice_baseline_add(&b, &p, &w), 1);
	w.queued = 1;
	w.latency_us = 60000;
	for (int i = 0; i < 200; i++)
		assert_int_equal(sluice_baseline_add(&b, &p, &w), 0);
	assert_true(b.value_us == 53000);
	w.latency_us = 40000;                          /* lower: it may */
	assert_int_equal(sluice_baseline_add(&b, &p, &w), 1);
	assert_true(b.value_us == 40000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allowance_and_queued),
		cmocka_unit_test(test_trim_takes_the_waiting_share),
		cmocka_unit_test(test_hold_then_probe),
		cmocka_unit_test(test_late_reader_undone),
		cmocka_unit_test(test_judged_after_the_drain),
		cmocka_unit_test(test_limit_move),
		cmocka_unit_test(test_queued_window_never_teaches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
