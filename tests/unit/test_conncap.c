// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* An http service's connection cap from tick to tick (control/conncap.h) with a fake clock and
 * a fake map, driven in the order sluiced's tick drives it: the cap set at the class's
 * room; the tick's latency and the map's open connections given to the
 * rule (a queue cuts the cap, not while the class holds connections over it); L0 never
 * capped; the caps cleared when the service stops being http or the cap is turned off; a
 * failed write tried again; the map's caps taken over only when the slot is the service's;
 * the map left alone while there is no cap and no refusal; in churn mode (the default) the
 * rule runs only while the refusals churn connections. */
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
	int fail_open_reads;         /* http_conns cannot be read */
	int fail_adopt_reads;        /* the first tick cannot read the caps */
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

	if (sluice_conncap_adopting(c, in) &&
	    sluice_conncap_adopt(c, m->fail_adopt_reads ? NULL : m->cap, m->rejected, now))
		map_write(c, m);
	step = sluice_conncap_begin(c, in, now);
	if (step == SLUICE_CONNCAP_READ) {
		m->reads++;
		step = sluice_conncap_decide(c, in, m->rejected,
					     m->fail_open_reads ? NULL : m->open, now);
	}
	if (step == SLUICE_CONNCAP_WRITE)
		map_write(c, m);
	return sluice_conncap_held(c);
}

/* An http service with the cap on, every class's room 50, the unloaded mean 10 ms, no
 * latency samples this tick. */
static struct sluice_conncap_in http_in(void)
{
	struct sluice_conncap_in in = { .http = 1, .on = 1, .base_us = BASE_US };

	for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
		in.room[k] = 50;
	return in;
}

/* A tick of 100 ms at `rate` responses per second, its mean q x the unloaded one. */
static void latency(struct sluice_conncap_in *in, double rate, double q)
{
	in->samples = (uint64_t)(rate / 10 + 0.5);
	in->mean_us = BASE_US * q;
}

/* n ticks of 100 ms after *t (moved on to the last), the cap refusing syn SYNs in each. */
static void ticks(struct sluice_conncap *c, struct sluice_conncap_in *in, struct fake_map *m,
		  uint64_t *t, int n, __u64 syn)
{
	for (int i = 0; i < n; i++) {
		m->rejected[3] += syn;
		run_tick(c, in, m, *t += TICK);
	}
}

/* L3 capped at t at its room of 20, 22 in flight (2 of them L0's); then its refusals stop
 * while the latency shows a queue: 1.375x the unloaded mean at 320 responses/s, L0 holding 2
 * connections and L3 l3_open. */
static void capped_at_20_then_queued(struct sluice_conncap *c, struct sluice_conncap_in *in,
				     struct fake_map *m, uint64_t t, __s64 l3_open)
{
	in->inflight[0] = 2;
	in->inflight[3] = 20;
	in->room[3] = 20;
	in->refused[3] = 1;
	run_tick(c, in, m, t);
	assert_int_equal(m->cap[3], 20);
	in->refused[3] = 0;
	m->open[0] = 2;
	m->open[3] = l3_open;
	latency(in, 320, 1.375);
}

static void test_cap_set_at_the_room(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = http_in();
	struct fake_map m = { 0 };
	(void)st;

	/* refused with a room of 17: that */
	in.room[3] = 17;
	in.refused[3] = 1;
	run_tick(&c, &in, &m, 1 * S);
	assert_int_equal(c.share.cap[3], 17);
	assert_int_equal(m.cap[3], 17);
	/* within its room: a limit cut takes the cap down at once */
	in.room[3] = 12;
	run_tick(&c, &in, &m, 1 * S + TICK);
	assert_int_equal(m.cap[3], 12);
}

static void test_queue_and_open_connections_reach_the_rule(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = http_in();
	struct fake_map m = { 0 };
	uint64_t t = 1 * S;
	(void)st;

	/* 22 in flight at 1.375x the unloaded mean for half a second, L3 holding its 20
	 * connections: a queue of 6 (22 x (1 - 1/1.375)) */
	capped_at_20_then_queued(&c, &in, &m, t, 20);
	ticks(&c, &in, &m, &t, 5, 0);
	assert_int_equal(m.cap[3], 14);
	/* the same, but L3 holds 30 connections from before its cap: not cut (its connections
	 * over the cap are what queue, and they go one request at a time) */
	m.open[3] = 30;
	ticks(&c, &in, &m, &t, 5, 0);
	assert_int_equal(m.cap[3], 14);
	/* without latency samples nothing moves, and the cap is held while it refuses SYNs */
	in.samples = 0;
	in.mean_us = 0;
	m.open[3] = 14;
	ticks(&c, &in, &m, &t, 50, 5);
	assert_int_equal(m.cap[3], 14);
}

/* A tick whose open connections cannot be read gives the rule no sample of them: a class
 * holding connections over its cap is not cut because that tick read as none open, and one
 * that fills its cap is still raised. */
static void test_unread_open_connections_not_taken_as_none(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = http_in();
	struct fake_map m = { 0 };
	uint64_t t = 1 * S;
	(void)st;

	/* a queue while L3 holds 22 connections, over its cap: not cut, though one tick of
	 * the window cannot read them */
	capped_at_20_then_queued(&c, &in, &m, t, 22);
	for (int n = 0; n < 5; n++) {
		m.rejected[3] += 5;
		m.fail_open_reads = n == 2;
		run_tick(&c, &in, &m, t += TICK);
	}
	assert_int_equal(m.cap[3], 20);
	/* a window in which none could be read decides nothing */
	m.fail_open_reads = 1;
	ticks(&c, &in, &m, &t, 5, 5);
	assert_int_equal(m.cap[3], 20);
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

/* The first tick cannot read the map's caps: whatever caps the map holds are cleared (nobody
 * would lift them otherwise, and they would refuse the class's SYNs for good). */
static void test_unread_caps_cleared_at_adoption(void **st)
{
	struct sluice_conncap_in in = http_in();
	struct sluice_conncap c = { .keep = 1 };
	struct fake_map m = { .cap = { 0, 0, 0, 9 }, .fail_adopt_reads = 1 };
	(void)st;

	run_tick(&c, &in, &m, 1 * S);
	assert_int_equal(m.cap[3], 0);
	assert_int_equal(sluice_conncap_held(&c), 0);
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

/* refusals the map counted while no cap was set (between a lift and the next cap) do not
 * count as the cap's: the re-set cap is not raised on them */
static void test_refusals_between_caps_not_the_caps(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = http_in();
	struct fake_map m = { 0 };
	uint64_t t = 1 * S;
	(void)st;

	in.refused[3] = 1;
	in.inflight[3] = 50;
	m.open[3] = 50;
	latency(&in, 320, 1.0);
	run_tick(&c, &in, &m, t);
	assert_int_equal(m.cap[3], 50);
	in.refused[3] = 0;
	for (int n = 0; n < 1000 && c.share.cap[3]; n++)   /* lifted 2 s after the last refusal */
		run_tick(&c, &in, &m, t += TICK);
	assert_int_equal(c.share.cap[3], 0);
	m.rejected[3] += 500;               /* counted with no cap set */
	run_tick(&c, &in, &m, t += TICK);
	in.refused[3] = 1;                  /* capped again */
	run_tick(&c, &in, &m, t += TICK);
	in.refused[3] = 0;
	for (int n = 0; n < 6; n++) {        /* a window closes: no queue, no raise */
		run_tick(&c, &in, &m, t += TICK);
		assert_int_equal(m.cap[3], 50);
	}
}

/* Churn mode (rule in conncap.h): a tick of 100 ms with `refused` requests of L3 refused
 * for room and `syn` more SYNs refused by the cap (the map's count), at 310 responses/s. */
static void churn_tick(struct sluice_conncap *c, struct sluice_conncap_in *in,
		       struct fake_map *m, uint64_t refused, uint64_t syn, uint64_t now)
{
	in->refused[3] = refused;
	m->rejected[3] += syn;
	run_tick(c, in, m, now);
}

static struct sluice_conncap_in churn_in(void)
{
	struct sluice_conncap_in in = http_in();

	in.on = CONN_CAP_CHURN;
	in.dt_ns = TICK;
	in.inflight[3] = 16;
	latency(&in, 310, 1.0);             /* 31 responses a tick */
	return in;
}

/* Two ticks from t of a closed loop's churn, L3 holding its 16 connections: capped. Returns
 * the second tick's time. */
static uint64_t churned_into_a_cap(struct sluice_conncap *c, struct sluice_conncap_in *in,
				   struct fake_map *m, uint64_t t)
{
	m->open[3] = 16;
	churn_tick(c, in, m, 4000, 0, t);
	churn_tick(c, in, m, 4000, 0, t += TICK);
	assert_int_not_equal(m->cap[3], 0);
	return t;
}

/* A closed loop's churn (4,000 refusals a tick, 129 per response) sets the cap at the second
 * tick in a row, not the first; a tick without churn between two breaks the run. */
static void test_churn_sets_the_cap_on_the_second_tick(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = churn_in();
	struct fake_map m = { 0 };
	uint64_t t = 1 * S;
	(void)st;

	churn_tick(&c, &in, &m, 4000, 0, t);
	assert_int_equal(m.cap[3], 0);
	churn_tick(&c, &in, &m, 0, 0, t += TICK);      /* nothing refused: the run is broken */
	churn_tick(&c, &in, &m, 4000, 0, t += TICK);
	assert_int_equal(m.cap[3], 0);
	churn_tick(&c, &in, &m, 500, 0, t += TICK);    /* 16 per response: not churn */
	churn_tick(&c, &in, &m, 4000, 0, t += TICK);
	assert_int_equal(m.cap[3], 0);
	assert_int_equal(m.writes, 0);
	churn_tick(&c, &in, &m, 4000, 0, t += TICK);
	assert_int_equal(m.cap[3], 50);
	assert_int_equal(c.share.cap[3], 50);
}

/* An open loop's refusals (280 a tick, 9 per response) never set a cap, for 30 s; nor do
 * refusals that outnumber the responses 50 to 1 but come 500 a second (below the rate at
 * which the churn costs the backend anything worth a cap). */
static void test_open_loop_and_slow_refusals_set_no_cap(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = churn_in();
	struct fake_map m = { 0 };
	uint64_t t = 1 * S;
	(void)st;

	for (int n = 0; n < 300; n++)
		churn_tick(&c, &in, &m, 280, 0, t += TICK);
	latency(&in, 10, 1.0);              /* 1 response a tick */
	for (int n = 0; n < 300; n++)
		churn_tick(&c, &in, &m, 50, 0, t += TICK);
	assert_int_equal(m.writes, 0);
	assert_int_equal(c.share.cap[3], 0);
	assert_true(m.reads > 0);           /* the refusals were looked at */
}

/* Once capped, the churn goes on as SYNs the cap refuses (no more 429s): the cap holds for as
 * long; when the clients turn to an open loop's rate (300 SYNs a tick, under 20 per response)
 * the cap is lifted within 2 s and a tick although refusals go on, and is not set again. */
static void test_churn_cap_held_by_refused_syns_lifted_without_churn(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = churn_in();
	struct fake_map m = { 0 };
	uint64_t t = 1 * S, calm;
	(void)st;

	t = churned_into_a_cap(&c, &in, &m, t);
	for (int n = 0; n < 100; n++) {                /* 10 s of refused SYNs only */
		churn_tick(&c, &in, &m, 0, 10000, t += TICK);
		assert_int_not_equal(m.cap[3], 0);
	}
	calm = t;
	while (m.cap[3] && t < calm + 10 * S)
		churn_tick(&c, &in, &m, 100, 200, t += TICK);
	assert_int_equal(m.cap[3], 0);
	assert_true(t <= calm + SLUICE_CONNSHARE_HOLD_NS + TICK);
	assert_true(t > calm + SLUICE_CONNSHARE_HOLD_NS - TICK);
	for (int n = 0; n < 50; n++)
		churn_tick(&c, &in, &m, 100, 200, t += TICK);
	assert_int_equal(m.cap[3], 0);
}

/* A restarted sluiced that takes over its caps holds them as the gate would (2 s), and lifts
 * them without churn. */
static void test_churn_adopted_caps_held_then_lifted(void **st)
{
	struct sluice_conncap c = { .keep = 1 };
	struct sluice_conncap_in in = churn_in();
	struct fake_map m = { .cap = { 0, 0, 0, 12 } };
	uint64_t t = 1 * S;
	(void)st;

	churn_tick(&c, &in, &m, 0, 0, t);
	assert_int_equal(m.cap[3], 12);
	assert_int_equal(c.share.cap[3], 12);
	churn_tick(&c, &in, &m, 200, 0, t += TICK);
	assert_int_equal(m.cap[3], 12);
	while (m.cap[3] && t < 10 * S)
		churn_tick(&c, &in, &m, 200, 0, t += TICK);
	assert_int_equal(m.cap[3], 0);
	assert_true(t >= 1 * S + SLUICE_CONNSHARE_HOLD_NS);
}

/* A reload from churn to auto and back while the gate was open: back in churn mode the gate
 * starts closed, so one churning tick does not hold a cap (two in a row set it again). */
static void test_churn_gate_closed_after_a_mode_change(void **st)
{
	struct sluice_conncap c = { .adopted = 1 };
	struct sluice_conncap_in in = churn_in();
	struct fake_map m = { 0 };
	uint64_t t = 1 * S;
	(void)st;

	t = churned_into_a_cap(&c, &in, &m, t);
	assert_int_not_equal(c.churn_until_ns, 0);
	in.on = CONN_CAP_AUTO;                          /* reloaded to auto */
	churn_tick(&c, &in, &m, 4000, 0, t += TICK);
	assert_int_equal(c.churn_until_ns, 0);
	in.on = CONN_CAP_CHURN;                         /* and back to churn */
	churn_tick(&c, &in, &m, 4000, 0, t += TICK);
	assert_int_equal(c.churn_until_ns, 0);
	assert_int_equal(m.cap[3], 0);
	churn_tick(&c, &in, &m, 4000, 0, t += TICK);
	assert_int_not_equal(m.cap[3], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cap_set_at_the_room),
		cmocka_unit_test(test_queue_and_open_connections_reach_the_rule),
		cmocka_unit_test(test_unread_open_connections_not_taken_as_none),
		cmocka_unit_test(test_l0_never_capped_nor_read),
		cmocka_unit_test(test_cleared_when_not_http_or_off),
		cmocka_unit_test(test_failed_write_retried),
		cmocka_unit_test(test_adopts_only_own_slot),
		cmocka_unit_test(test_unread_caps_cleared_at_adoption),
		cmocka_unit_test(test_cap_refusals_counted_only_under_a_cap),
		cmocka_unit_test(test_refusals_between_caps_not_the_caps),
		cmocka_unit_test(test_churn_sets_the_cap_on_the_second_tick),
		cmocka_unit_test(test_open_loop_and_slow_refusals_set_no_cap),
		cmocka_unit_test(test_churn_cap_held_by_refused_syns_lifted_without_churn),
		cmocka_unit_test(test_churn_adopted_caps_held_then_lifted),
		cmocka_unit_test(test_churn_gate_closed_after_a_mode_change),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
