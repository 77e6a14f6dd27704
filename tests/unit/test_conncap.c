// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* An http service's connection cap from tick to tick (control/conncap.h) with a fake clock and
 * a fake map, driven in the order sluiced's tick drives it: the backend's concurrency read
 * only from ticks that show a queue, averaged and kept 30 s, one more while no queue shows;
 * the higher classes' average in-flight and the idle connections in a class's share; L0 never
 * capped; the caps cleared when the service stops being http or the cap is turned off; a
 * failed write tried again; the map's caps taken over only when the slot is the service's;
 * the map left alone while there is no cap and no refusal. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "control/conncap.h"

#define MS 1000000ull
#define S  1000000000ull
#define TICK (100 * MS)
#define BASE_US 10000.0

/* The maps http_conn_cap, conn_cap's refusal counts and http_conns of one slot. */
struct fake_map {
	uint32_t cap[SLUICE_NUM_CLASSES];
	__u64 rejected[SLUICE_NUM_CLASSES];
	__s64 open[SLUICE_NUM_CLASSES];
	int fail_writes, writes, reads;
};

static void map_write(struct sluice_conncap *c, struct fake_map *m)
{
	m->writes++;
	if (!m->fail_writes)
		memcpy(m->cap, c->share.cap, sizeof(m->cap));
	sluice_conncap_written(c, !m->fail_writes);
}

/* One tick as sluiced runs it; returns whether the service stays not quiet. */
static int run_tick(struct sluice_conncap *c, const struct sluice_conncap_in *in,
		    struct fake_map *m, uint64_t now)
{
	int step;

	if (sluice_conncap_adopting(c, in) && sluice_conncap_adopt(c, m->cap, m->rejected, now))
		map_write(c, m);
	step = sluice_conncap_begin(c, in, now);
	if (step == SLUICE_CONNCAP_READ) {
		m->reads++;
		step = sluice_conncap_decide(c, in, m->rejected, m->open, now);
	}
	if (step == SLUICE_CONNCAP_WRITE)
		map_write(c, m);
	return sluice_conncap_held(c);
}

/* An http service with the cap on, every class's room 50, the unloaded mean 10 ms, no
 * latency samples this tick. */
static struct sluice_conncap_in http_in(void)
{
	struct sluice_conncap_in in = { .http = 1, .on = 1, .base_us = BASE_US, .dt_s = 0.1 };

	for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
		in.room[k] = 50;
	return in;
}

/* A tick that shows a queue: mean 20% over the unloaded one, `rate` responses per second
 * (the backend's concurrency read from it: rate x 10 ms). */
static void queued(struct sluice_conncap_in *in, double rate)
{
	in->samples = (uint64_t)(rate * in->dt_s + 0.5);
	in->mean_us = BASE_US * 1.2;
}

/* L3's share as the rule would take it now: the cap a refusal sets from no cap, on a copy. */
static uint32_t share3(const struct sluice_conncap *c, const struct sluice_conncap_in *in,
		       const struct fake_map *m, uint64_t now)
{
	struct sluice_conncap probe = *c;
	struct sluice_conncap_in pin = *in;

	memset(probe.share.cap, 0, sizeof(probe.share.cap));
	pin.refused[3] = 1;
	sluice_conncap_decide(&probe, &pin, m->rejected, m->open, now);
	return probe.share.cap[3];
}

static void test_knee_only_from_queued_ticks(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = http_in();
	struct fake_map m = { 0 };
	(void)st;

	in.refused[3] = 1;
	/* a tick at 1.05x the unloaded mean is no queue: nothing read, the room alone */
	in.samples = 300;
	in.mean_us = BASE_US * 1.05;
	run_tick(&c, &in, &m, 1 * S);
	assert_true(c.knee == 0);
	assert_int_equal(c.share.cap[3], 50);
	/* a queue, but too few samples to say so */
	in.samples = SLUICE_CONNCAP_MEAN_SAMPLES - 1;
	in.mean_us = BASE_US * 2;
	run_tick(&c, &in, &m, 1 * S + TICK);
	assert_true(c.knee == 0);
	/* the base not known yet: nothing */
	queued(&in, 1000);
	in.base_us = 0;
	run_tick(&c, &in, &m, 1 * S + 2 * TICK);
	assert_true(c.knee == 0);
	/* a queue: 1000 responses/s x 10 ms = 10 at once; the cap follows it down */
	in.base_us = BASE_US;
	run_tick(&c, &in, &m, 1 * S + 3 * TICK);
	assert_true(c.knee > 9.999 && c.knee < 10.001);
	assert_int_equal(c.share.cap[3], 10);
	assert_int_equal(m.cap[3], 10);
}

static void test_knee_averaged_and_kept_30s(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = http_in();
	struct fake_map m = { 0 };
	uint64_t t = 5 * S;
	(void)st;

	in.refused[3] = 1;
	queued(&in, 2000);                      /* 20 */
	run_tick(&c, &in, &m, t);
	assert_int_equal(c.share.cap[3], 20);
	queued(&in, 1000);                      /* 10: a fifth of the way, 18 */
	run_tick(&c, &in, &m, t += TICK);
	assert_true(c.knee > 17.999 && c.knee < 18.001);
	assert_int_equal(c.share.cap[3], 18);
	/* no queue seen any more: the last value stands for 30 s (plus the probe's one) */
	in.samples = 0;
	in.mean_us = 0;
	assert_int_equal(share3(&c, &in, &m, t + SLUICE_CONNCAP_KNEE_NS), 18);
	assert_int_equal(share3(&c, &in, &m, t + SLUICE_CONNCAP_KNEE_NS + 1), 50);
	/* a queue after the 30 s starts the average afresh */
	queued(&in, 1000);
	assert_int_equal(share3(&c, &in, &m, t + SLUICE_CONNCAP_KNEE_NS + 1), 10);
	assert_int_equal(share3(&c, &in, &m, t + SLUICE_CONNCAP_KNEE_NS - 1), 16);
}

static void test_one_more_without_queue(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = http_in();
	struct fake_map m = { 0 };
	(void)st;

	in.refused[3] = 1;
	queued(&in, 1000);
	run_tick(&c, &in, &m, 1 * S);
	assert_int_equal(share3(&c, &in, &m, 1 * S + TICK), 10);  /* still queued: the knee */
	in.mean_us = BASE_US;                   /* measured, no queue: one more */
	assert_int_equal(share3(&c, &in, &m, 1 * S + TICK), 11);
	in.samples = SLUICE_CONNCAP_MEAN_SAMPLES - 1;  /* not measured: the knee alone */
	assert_int_equal(share3(&c, &in, &m, 1 * S + TICK), 10);
}

static void test_higher_classes_and_idle(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = http_in();
	struct fake_map m = { 0 };
	(void)st;

	/* L0 holds 10 in flight, L1 5: their averages move a tenth of the way each tick */
	in.inflight[0] = 10;
	in.inflight[1] = 5;
	in.refused[1] = in.refused[2] = in.refused[3] = 1;
	run_tick(&c, &in, &m, 1 * S);
	/* averages 1.0, 0.5 (rounds up to 1), 0 */
	assert_int_equal(c.share.cap[1], 50 - 1);
	assert_int_equal(c.share.cap[2], 50 - 2);
	assert_int_equal(c.share.cap[3], 50 - 2);
	for (int n = 0; n < 100; n++)
		run_tick(&c, &in, &m, 1 * S + (uint64_t)(n + 1) * TICK);
	assert_int_equal(c.share.cap[1], 50 - 10);
	assert_int_equal(c.share.cap[3], 50 - 15);
	/* L3's idle connections (open, none in flight) come on top of its share */
	in.inflight[3] = 2;
	m.open[3] = 9;
	assert_int_equal(share3(&c, &in, &m, 20 * S), 50 - 15 + 7);
	/* under the knee, not the room */
	queued(&in, 2000);
	assert_int_equal(share3(&c, &in, &m, 20 * S), 20 - 15 + 7);
}

static void test_l0_never_capped_nor_read(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = http_in();
	struct fake_map m = { 0 };
	(void)st;

	/* L0 refused alone: the cap's maps are not even read */
	in.refused[0] = 100;
	for (uint64_t t = 0; t < 5 * S; t += TICK)
		assert_int_equal(run_tick(&c, &in, &m, t), 0);
	assert_int_equal(m.reads + m.writes, 0);
	/* with L3 refused too, only L3 is capped */
	in.refused[3] = 1;
	m.rejected[0] = 50;
	assert_int_equal(run_tick(&c, &in, &m, 5 * S), 1);
	assert_int_equal(c.share.cap[0], 0);
	assert_int_equal(c.share.cap[3], 50);
	assert_int_equal(m.cap[0], 0);
}

static void test_cleared_when_not_http_or_off(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = http_in();
	struct fake_map m = { 0 };
	(void)st;

	in.refused[2] = 1;
	run_tick(&c, &in, &m, 1 * S);
	assert_int_equal(m.cap[2], 50);
	/* a reload made it tcp: cleared at once, not quiet until written */
	in.http = 0;
	assert_int_equal(run_tick(&c, &in, &m, 1 * S + TICK), 0);
	assert_int_equal(m.cap[2], 0);
	m.writes = m.reads = 0;
	assert_int_equal(run_tick(&c, &in, &m, 1 * S + 2 * TICK), 0);
	assert_int_equal(m.reads + m.writes, 0);
	/* http again, capped, then the cap turned off: cleared */
	in.http = 1;
	run_tick(&c, &in, &m, 2 * S);
	assert_int_equal(m.cap[2], 50);
	in.on = 0;
	assert_int_equal(run_tick(&c, &in, &m, 2 * S + TICK), 0);
	assert_int_equal(m.cap[2], 0);
	m.writes = m.reads = 0;
	run_tick(&c, &in, &m, 2 * S + 2 * TICK);
	assert_int_equal(m.writes + m.reads, 0);
}

static void test_failed_write_retried(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = http_in();
	struct fake_map m = { 0 };
	uint64_t t = 1 * S;
	(void)st;

	in.refused[3] = 1;
	run_tick(&c, &in, &m, t);
	assert_int_equal(m.cap[3], 50);
	/* the refusals stop; the lift's write fails: tried at every tick until it is done, and
	 * the service stays not quiet meanwhile */
	in.refused[3] = 0;
	m.fail_writes = 1;
	while (c.share.cap[3])
		run_tick(&c, &in, &m, t += TICK);
	assert_int_equal(m.cap[3], 50);
	m.writes = 0;
	assert_int_equal(run_tick(&c, &in, &m, t += TICK), 1);
	assert_int_equal(run_tick(&c, &in, &m, t += TICK), 1);
	assert_int_equal(m.writes, 2);
	m.fail_writes = 0;
	assert_int_equal(run_tick(&c, &in, &m, t += TICK), 0);
	assert_int_equal(m.cap[3], 0);
	m.writes = 0;
	run_tick(&c, &in, &m, t += TICK);
	assert_int_equal(m.writes, 0);

	/* so is the write that clears the caps of a service no longer http */
	in.refused[3] = 1;
	run_tick(&c, &in, &m, t += TICK);
	assert_int_equal(m.cap[3], 50);
	in.http = 0;
	m.fail_writes = 1;
	assert_int_equal(run_tick(&c, &in, &m, t += TICK), 1);
	assert_int_equal(run_tick(&c, &in, &m, t += TICK), 1);
	m.fail_writes = 0;
	assert_int_equal(run_tick(&c, &in, &m, t += TICK), 0);
	assert_int_equal(m.cap[3], 0);
}

static void test_adopts_only_own_slot(void **st)
{
	struct sluice_conncap_in in = http_in();
	(void)st;

	/* another service's caps in the slot: cleared, its refusal counts the baseline */
	{
		struct sluice_conncap c = { 0 };
		struct fake_map m = { .cap = { 0, 0, 7, 4 }, .rejected = { 0, 0, 30, 40 } };

		assert_true(sluice_conncap_adopting(&c, &in));
		assert_int_equal(run_tick(&c, &in, &m, 1 * S), 0);
		assert_int_equal(m.cap[2] | m.cap[3], 0);
		assert_int_equal(c.rejected[3], 40);
		assert_false(sluice_conncap_adopting(&c, &in));
	}
	/* ... and tried again when the clearing write fails */
	{
		struct sluice_conncap c = { 0 };
		struct fake_map m = { .cap = { 0, 0, 0, 4 }, .fail_writes = 1 };

		assert_int_equal(run_tick(&c, &in, &m, 1 * S), 1);
		m.fail_writes = 0;
		assert_int_equal(run_tick(&c, &in, &m, 1 * S + TICK), 0);
		assert_int_equal(m.cap[3], 0);
	}
	/* the service's own (a restart): taken over and held, the cap's refusals counted
	 * from what the map held */
	{
		struct sluice_conncap c = { .keep = 1 };
		struct fake_map m = { .cap = { 0, 0, 0, 4 }, .rejected = { 0, 0, 0, 100 } };
		uint64_t t = 10 * S;

		in.room[3] = 4;                 /* its share: no growth to watch */
		assert_int_equal(run_tick(&c, &in, &m, t), 1);
		assert_int_equal(c.share.cap[3], 4);
		assert_int_equal(m.writes, 0);
		/* SYNs refused since: held past the first hold */
		m.rejected[3] = 107;
		run_tick(&c, &in, &m, t + SLUICE_CONNSHARE_HOLD_NS - TICK);
		run_tick(&c, &in, &m, t + SLUICE_CONNSHARE_HOLD_NS + TICK);
		assert_int_equal(c.share.cap[3], 4);
		assert_int_equal(c.rejected[3], 107);
		/* none since: lifted once that hold is over */
		run_tick(&c, &in, &m, t + 2 * SLUICE_CONNSHARE_HOLD_NS - 2 * TICK);
		assert_int_equal(c.share.cap[3], 4);
		run_tick(&c, &in, &m, t + 2 * SLUICE_CONNSHARE_HOLD_NS);
		assert_int_equal(c.share.cap[3], 0);
		assert_int_equal(m.cap[3], 0);
	}
	/* not http: nothing looked at until it is */
	{
		struct sluice_conncap c = { 0 };

		in.http = 0;
		assert_false(sluice_conncap_adopting(&c, &in));
	}
}

static void test_cap_refusals_counted_only_under_a_cap(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = http_in();
	struct fake_map m = { 0 };
	(void)st;

	/* refusals the map counted while no cap was set move nothing */
	in.refused[3] = 1;
	m.rejected[3] = 500;
	run_tick(&c, &in, &m, 1 * S);
	assert_int_equal(c.rejected[3], 500);
	assert_int_equal(c.share.until_ns[3], 1 * S + SLUICE_CONNSHARE_HOLD_NS);
	/* a count that went back (a map made anew) moved by what it holds: held on */
	in.refused[3] = 0;
	m.rejected[3] = 3;
	run_tick(&c, &in, &m, 2 * S);
	assert_int_equal(c.share.until_ns[3], 2 * S + SLUICE_CONNSHARE_HOLD_NS);
	assert_int_equal(c.rejected[3], 3);
	/* unchanged: no hold */
	run_tick(&c, &in, &m, 3 * S);
	assert_int_equal(c.share.until_ns[3], 2 * S + SLUICE_CONNSHARE_HOLD_NS);
	assert_int_equal(c.share.cap[3], 50);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_knee_only_from_queued_ticks),
		cmocka_unit_test(test_knee_averaged_and_kept_30s),
		cmocka_unit_test(test_one_more_without_queue),
		cmocka_unit_test(test_higher_classes_and_idle),
		cmocka_unit_test(test_l0_never_capped_nor_read),
		cmocka_unit_test(test_cleared_when_not_http_or_off),
		cmocka_unit_test(test_failed_write_retried),
		cmocka_unit_test(test_adopts_only_own_slot),
		cmocka_unit_test(test_cap_refusals_counted_only_under_a_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
