// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* One service's controller driven tick by tick with synthetic map contents (cumulative, as
 * the maps are): the first tick is a snapshot, state export/import, no freeze while the
 * objective is missed, written headroom as caps, the status fields, L0's room under an adaptive
 * limit. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "control/controller.h"
#include "control/ctlslot.h"
#include "common/rng.h"
#include "evcap.h"

#define MS 1000000ull
#define S  1000000000ull
#define ONE SLUICE_PROB_ONE

static struct sluice_config cfg;

static void setup_sc(struct service_conf *sc)
{
	sluice_config_defaults(&cfg);
	sluice_service_defaults(sc);
	snprintf(sc->name, sizeof(sc->name), "web");
	sc->protocol = SLUICE_PROTO_HTTP;
}

/* One tick's worth of traffic added to the cumulative counters: n completions of class c at
 * `us` each, `err` of them errors, and the in-flight now. */
static void traffic(struct ctl_inputs *in, int c, uint64_t n, uint64_t err, uint64_t us,
		    int64_t inflight)
{
	in->stats[c].arrivals += n;
	in->stats[c].admitted += n;
	in->stats[c].completed += n;
	in->stats[c].errors += err;
	in->hist[c].bucket[sluice_hist_bucket(us)] += n;
	in->hist[c].sum_us += n * us;
	in->inflight.cls[c] = inflight;
	in->inflight.total = in->inflight.cls[0] + in->inflight.cls[1] + in->inflight.cls[2] +
			     in->inflight.cls[3];
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
		in->switch_admit[k] = ONE;
}

static void test_first_tick_is_a_snapshot(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	int opened;
	(void)st;
	setup_sc(&sc);
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	/* the maps already hold a long history: 100 % errors, all slow */
	traffic(&in, 2, 100000, 100000, 2000000, 0);
	service_ctl_tick(&s, &sc, &in, 0, 100 * MS, NULL, &v, &opened);
	assert_int_equal(opened, 0);
	assert_int_equal(s.brk.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(s.sig.total.completed, 0);          /* nothing was taken as a delta */
	assert_int_equal(v.limit, s.lim.limit);
	assert_int_equal(sluice_prob_complement(v.breaker_shed), ONE);
	/* from the second tick on, deltas: a real burst of failures opens it */
	for (int t = 2; t <= 12 && !opened; t++) {
		traffic(&in, 2, 50, 50, 1000, 0);
		service_ctl_tick(&s, &sc, &in, 0, (uint64_t)t * 100 * MS, NULL, &v, &opened);
	}
	assert_int_equal(opened, 1);
	assert_int_equal(s.brk.state, SLUICE_BREAKER_OPEN);
	assert_int_equal(sluice_prob_complement(v.breaker_shed), 0);
}

/* What status and /metrics show of the ladder comes from the entry's own record: nothing
 * before any cut; while shedding, since when and since the last overload; after every class
 * is back in full, how long it took and how long ago; and nothing made up from a record of
 * another version. */
static void test_slot_reports_shedding_and_recovery(void **st)
{
	static struct sluice_ctl_slot slot;
	struct service_conf sc;
	struct service_ctl s;
	struct sluice_ladder_params p;
	struct sluice_ladder_input over = { .overloaded = 1, .excess = -1,
					    .demand = { 10, 10, 10, 10 }, .feedback_s = 0.1 };
	struct sluice_ladder_input calm = over;
	struct ctl_recovery r;
	uint64_t now = 100 * S, overload_at, cut_at;
	(void)st;
	setup_sc(&sc);
	service_ctl_init(&s, &sc, &cfg, 1, now);
	sluice_ladder_params_default(&p);
	calm.overloaded = 0;
	calm.good_samples = 20;

	ctl_slot_fill(&slot, &s, &sc, 0, 1, now);
	assert_int_equal(ctl_slot_recovery(&slot, now, &r), 0);
	assert_int_equal(r.known, 1);
	assert_true(r.shedding_s < 0 && r.since_overload_s < 0 && r.last_recovery_s < 0 &&
		    r.recovered_ago_s < 0);

	/* two overloaded decisions 1 s apart: L3 and then L3 again are cut */
	cut_at = now;
	sluice_ladder_tick(&s.lad, &p, &over, cut_at, NULL);
	overload_at = now += S;
	sluice_ladder_tick(&s.lad, &p, &over, overload_at, NULL);
	assert_true(s.lad.admit[3] < ONE);
	now += 2 * S;
	ctl_slot_fill(&slot, &s, &sc, 0, 2, now);
	assert_int_equal(ctl_slot_recovery(&slot, now + S / 2, &r), 0);
	assert_true(r.shedding_s > 3.49 && r.shedding_s < 3.51);
	assert_true(r.since_overload_s > 2.49 && r.since_overload_s < 2.51);
	assert_true(r.last_recovery_s < 0 && r.recovered_ago_s < 0);

	/* calm with samples within the objective: step by step back to 100 % */
	while (s.lad.admit[3] < ONE && now < overload_at + 120 * S)
		sluice_ladder_tick(&s.lad, &p, &calm, now += 100 * MS, NULL);
	assert_int_equal(s.lad.admit[3], ONE);
	ctl_slot_fill(&slot, &s, &sc, 0, 3, now);
	assert_int_equal(ctl_slot_recovery(&slot, now + 7 * S, &r), 0);
	assert_true(r.shedding_s < 0);
	assert_true(fabs(r.last_recovery_s - (double)(now - overload_at) / 1e9) < 1e-6);
	assert_true(fabs(r.last_episode_s - (double)(now - cut_at) / 1e9) < 1e-6);
	assert_true(r.last_recovery_s >= 5 * 4);          /* four steps held 5 s each at least */
	assert_true(r.recovered_ago_s > 6.99 && r.recovered_ago_s < 7.01);
	/* a reader whose clock is behind the record's reads 0 s ago, never a negative age */
	assert_int_equal(ctl_slot_recovery(&slot, now - S, &r), 0);
	assert_true(r.recovered_ago_s == 0);

	/* the next episode: shedding again, the last recovery still shown */
	sluice_ladder_tick(&s.lad, &p, &over, now += 10 * S, NULL);
	ctl_slot_fill(&slot, &s, &sc, 0, 4, now);
	assert_int_equal(ctl_slot_recovery(&slot, now, &r), 0);
	assert_true(r.shedding_s == 0 && r.last_recovery_s > 0 && r.recovered_ago_s < 0);

	/* a record this build cannot read is not read */
	slot.state_len--;
	assert_int_equal(ctl_slot_recovery(&slot, now, &r), -1);
	assert_int_equal(r.known, 0);
	slot.state_len++;
	((struct sluice_ctl_state *)(void *)slot.state)->version++;
	assert_int_equal(ctl_slot_recovery(&slot, now, &r), -1);
	assert_int_equal(r.known, 0);
}

/* What a restarted sluiced makes of a's record: a exported at now (into *cs, which the caller
 * may read after), adopted by b, a new controller for the same service. */
static void adopt_record(struct service_ctl *b, const struct service_conf *sc,
			 const struct service_ctl *a, struct sluice_ctl_state *cs, uint64_t now)
{
	ctl_state_export(a, now, cs);
	service_ctl_init(b, sc, &cfg, 2, now);
	assert_int_equal(ctl_state_import(b, cs, now), 0);
}

static void test_state_export_import(void **st)
{
	struct service_conf sc;
	struct service_ctl a, b;
	struct sluice_ctl_state cs;
	struct ctl_inputs in;
	struct sluice_verdict v;
	int opened;
	uint64_t now = 0;
	(void)st;
	setup_sc(&sc);
	memset(&in, 0, sizeof(in));
	service_ctl_init(&a, &sc, &cfg, 1, 0);
	/* learn a baseline (20 ms) and get some state going */
	for (int t = 1; t <= 50; t++) {
		traffic(&in, 1, 40, 0, 20000, 2);
		service_ctl_tick(&a, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_true(a.base.value_us > 18000 && a.base.value_us < 22000);
	assert_true(a.objective_us > 1.19 * a.base.value_us && a.objective_us < 1.21 * a.base.value_us);
	assert_int_equal(a.signal, SLUICE_SIGNAL_OK);
	a.lim.est = a.lim.limit = 77;
	a.lad.admit[3] = ONE / 4;
	a.lad.admit[2] = ONE / 2;
	a.lad.episode_ns = now - S;
	a.brk.state = SLUICE_BREAKER_HALF_OPEN;
	a.brk.step = 2;
	a.brk.opens = 3;
	a.lad.last_change_ns = now + 1000 * S;             /* a time from the future is clamped */
	ctl_state_export(&a, now, &cs);
	assert_int_equal(cs.version, SLUICE_CTL_STATE_VERSION);
	assert_int_equal(cs.size, sizeof(cs));

	/* a new process: fresh init, then import */
	service_ctl_init(&b, &sc, &cfg, 2, now + 5 * S);
	assert_int_equal(ctl_state_import(&b, &cs, now + 5 * S), 0);
	assert_int_equal(b.lim.limit, 77);
	assert_int_equal(b.lad.admit[3], ONE / 4);
	assert_int_equal(b.lad.admit[2], ONE / 2);
	assert_int_equal(b.brk.state, SLUICE_BREAKER_HALF_OPEN);
	assert_int_equal(b.brk.step, 2);
	assert_int_equal(b.brk.opens, 3);
	assert_true(b.base.value_us == a.base.value_us);
	assert_true(b.objective_us == a.objective_us);
	assert_int_equal(b.lad.last_change_ns, now + 5 * S);
	/* the queue baselines come back as their values (their rings stay behind) */
	assert_true(a.base_little.value_us > 0 && a.base_mean.value_us > 0);
	assert_true(b.base_little.value_us == a.base_little.value_us);
	assert_true(b.base_mean.value_us == a.base_mean.value_us);
	assert_int_equal(b.base_little.count, 1);
	assert_true(a.last_top_us > 0 && cs.top_class_us == a.last_top_us);
	assert_true(b.last_top_us == a.last_top_us);
	/* its first tick writes the imported state and takes a snapshot */
	traffic(&in, 1, 100000, 100000, 900000, 2);
	service_ctl_tick(&b, &sc, &in, 0, now + 5 * S + 100 * MS, NULL, &v, &opened);
	assert_int_equal(v.limit, 77);
	assert_int_equal(sluice_prob_complement(v.shed_prob[3]), ONE / 4);
	assert_int_equal(v.breaker_state, SLUICE_BREAKER_HALF_OPEN);
	assert_int_equal(b.brk.state, SLUICE_BREAKER_HALF_OPEN);
	/* bounds of a new config apply to an imported limit */
	sc.limit_max = 50;
	service_ctl_init(&b, &sc, &cfg, 2, 0);
	assert_int_equal(ctl_state_import(&b, &cs, now), 0);
	assert_int_equal(b.lim.limit, 50);
	/* version 2's record (this one's prefix) is adopted, the queue baselines unlearned */
	{
		struct sluice_ctl_state v2 = cs;

		v2.version = 2;
		v2.size = SLUICE_CTL_STATE_V2_SIZE;
		v2.base_little_us = v2.base_mean_us = 0;
		service_ctl_init(&b, &sc, &cfg, 2, 0);
		assert_int_equal(ctl_state_import(&b, &v2, now), 0);
		assert_int_equal(b.lim.limit, 50);
		assert_true(b.base.value_us == a.base.value_us);
		assert_true(b.base_little.value_us == 0 && b.base_mean.value_us == 0);
		/* but not version 2 at this version's size, nor this version at version 2's */
		v2.size = sizeof(v2);
		service_ctl_init(&b, &sc, &cfg, 2, 0);
		assert_int_equal(ctl_state_import(&b, &v2, now), -1);
		v2.version = SLUICE_CTL_STATE_VERSION;
		v2.size = SLUICE_CTL_STATE_V2_SIZE;
		assert_int_equal(ctl_state_import(&b, &v2, now), -1);
		assert_true(b.base.value_us == 0);
	}
	/* another layout or version is refused and changes nothing */
	service_ctl_init(&b, &sc, &cfg, 2, 0);
	cs.size--;
	assert_int_equal(ctl_state_import(&b, &cs, now), -1);
	assert_int_equal(b.lim.limit, 15);
	assert_true(b.base.value_us == 0);
	/* the operator's reset forgets the baseline */
	service_ctl_reset_baseline(&a);
	assert_true(a.base.value_us == 0);
}

/* A record no sluiced of this config writes (another build's, or damaged) with every class at
 * 0, L0 included: adopted with L0 at its floor. With every class at 0 nothing is admitted, no
 * sample comes back, and no recovery step ever passes: the service would be shed whole for as
 * long as sluiced runs. */
static void test_import_keeps_the_l0_floor(void **st)
{
	struct service_conf sc;
	struct service_ctl a, b;
	struct sluice_ctl_state cs;
	uint64_t now = 1000 * S;
	(void)st;
	setup_sc(&sc);
	service_ctl_init(&a, &sc, &cfg, 1, now);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		a.lad.admit[c] = 0;
	adopt_record(&b, &sc, &a, &cs, now);
	assert_int_equal(b.lad.admit[0], (uint32_t)((uint64_t)b.lp.l0_floor_pct * ONE / 100));
	assert_int_equal(b.lad.admit[1], 0);          /* the lower classes as they were */
	assert_int_equal(b.lad.admit[3], 0);
	/* an L0 above the floor is its own */
	a.lad.admit[0] = ONE / 2;
	adopt_record(&b, &sc, &a, &cs, now);
	assert_int_equal(b.lad.admit[0], ONE / 2);
}

/* An open breaker's record whose open-until time lies past what this config opens a breaker
 * for (another build's, a damaged one, or one opened under a longer open_s): adopted open, but
 * for at most this config's longest open time from now, never shedding the service whole for
 * as long as sluiced runs. One within the bounds keeps its own time. */
static void test_import_bounds_an_open_breaker(void **st)
{
	struct service_conf sc;
	struct service_ctl a, b;
	struct sluice_ctl_state cs;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 1000 * S, longest;
	int opened;
	(void)st;
	setup_sc(&sc);
	service_ctl_init(&a, &sc, &cfg, 1, now);
	a.brk.state = SLUICE_BREAKER_OPEN;
	a.brk.since_ns = now;
	a.brk.open_until_ns = UINT64_MAX;
	adopt_record(&b, &sc, &a, &cs, now);
	longest = (uint64_t)(1.2 * b.bp.open_s * 1e9);
	assert_int_equal(b.brk.state, SLUICE_BREAKER_OPEN);
	assert_true(b.brk.open_until_ns > now && b.brk.open_until_ns <= now + longest);
	/* past it, the breaker goes half-open */
	memset(&in, 0, sizeof(in));
	service_ctl_tick(&b, &sc, &in, 0, now + longest + 100 * MS, NULL, &v, &opened);
	service_ctl_tick(&b, &sc, &in, 0, now + longest + 200 * MS, NULL, &v, &opened);
	assert_int_equal(b.brk.state, SLUICE_BREAKER_HALF_OPEN);
	/* within the bounds: its own time */
	a.brk.open_until_ns = now + 2 * S;
	ctl_state_export(&a, now, &cs);
	service_ctl_init(&b, &sc, &cfg, 2, now);
	assert_int_equal(ctl_state_import(&b, &cs, now + S), 0);
	assert_int_equal(b.brk.open_until_ns, now + 2 * S);
}

/* A record whose evidence floor is held longer than this config holds one (written under a
 * longer evidence window, or damaged): the floor is adopted, but held at most this config's
 * floor_hold_ns from now; past that a window far above the objective cuts the limit below it.
 * A floor that is not a number is not adopted. */
static void test_import_bounds_the_evidence_floor(void **st)
{
	struct service_conf sc;
	struct service_ctl a, b;
	struct sluice_ctl_state cs;
	struct sluice_limit_input mi = {
		.latency_us = 100000, .aim_us = 20000, .base_us = 15000, .objective_us = 25000,
		.peak_inflight = 100, .bound = 1, .full = 1, .samples = 100, .rate = 1000,
	};
	uint64_t now = 1000 * S, until;
	(void)st;
	setup_sc(&sc);
	service_ctl_init(&a, &sc, &cfg, 1, now);
	a.lim.est = a.lim.limit = 100;
	a.lim.floor = 90;
	a.lim.floor_until_ns = UINT64_MAX;
	adopt_record(&b, &sc, &a, &cs, now);
	until = now + b.mp.floor_hold_ns;
	assert_true(b.lim.floor == 90);
	assert_true(b.lim.floor_until_ns > now && b.lim.floor_until_ns <= until);
	/* while it holds, a window far above the objective cuts to the floor, not below */
	sluice_limit_decide(&b.lim, &b.mp, &mi, now + S, NULL);
	assert_int_equal(b.lim.limit, 90);
	/* past this config's hold it no longer stands */
	sluice_limit_decide(&b.lim, &b.mp, &mi, until + S, NULL);
	assert_true(b.lim.limit < 90);
	/* a floor that is not a number */
	a.lim.floor = NAN;
	adopt_record(&b, &sc, &a, &cs, now);
	assert_true(b.lim.floor == 0);
}

/* A record whose breaker window holds a bucket of a second still to come (written on another
 * clock, or damaged): that bucket is not adopted. Kept, its failures would count as that
 * second's calls when it came, and open the breaker of a healthy service seconds after the
 * start. The buckets of the seconds gone by are the window's as before. */
static void test_import_drops_breaker_buckets_ahead(void **st)
{
	struct service_conf sc;
	struct service_ctl a, b;
	struct sluice_ctl_state cs;
	struct sluice_breaker_input bi = { .completed = 1 };
	uint64_t now = 1000 * S, later = now + 5 * S;
	struct sluice_brk_bucket *ahead, *past;
	(void)st;
	setup_sc(&sc);
	service_ctl_init(&a, &sc, &cfg, 1, now);
	ahead = &a.brk.ring[(later / S) % SLUICE_BRK_MAX_WINDOW_S];
	ahead->sec = later / S;
	ahead->calls = ahead->errors = 1000;
	past = &a.brk.ring[(now / S - 1) % SLUICE_BRK_MAX_WINDOW_S];
	past->sec = now / S - 1;
	past->calls = 7;
	adopt_record(&b, &sc, &a, &cs, now);
	assert_int_equal(b.brk.ring[(now / S - 1) % SLUICE_BRK_MAX_WINDOW_S].calls, 7);
	/* one good call in that second (the service's counts alone): the breaker stays closed */
	assert_int_equal(sluice_breaker_tick(&b.brk, &b.bp, &bi, later, NULL) & SLUICE_BRK_OPENED,
			 0);
	assert_int_equal(b.brk.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(b.brk.win_calls, 8);            /* that call and the 7 of the past */
	assert_true(b.brk.win_error_rate == 0);
}

/* A record whose breaker has a zero jitter state (a damaged one): xorshift never leaves zero,
 * so every open would last 0.8 x open_s. The start's own seed is kept instead. */
static void test_import_keeps_a_jitter_seed(void **st)
{
	struct service_conf sc;
	struct service_ctl a, b;
	struct sluice_ctl_state cs;
	uint64_t now = 1000 * S;
	double u1, u2;
	(void)st;
	setup_sc(&sc);
	service_ctl_init(&a, &sc, &cfg, 1, now);
	a.brk.rng = 0;
	adopt_record(&b, &sc, &a, &cs, now);
	assert_true(b.brk.rng != 0);
	u1 = sluice_rng_uniform(&b.brk.rng);
	u2 = sluice_rng_uniform(&b.brk.rng);
	assert_true(u1 != u2);
}

/* A record whose baseline is not one the baseline's own rule leaves (damaged). Its head past
 * its entries: the next window went where the percentile does not read and a zero was read
 * instead, a baseline of 0 (no objective, no latency overload seen) for 60 windows; forgotten
 * now, relearned from the next window. A value that is not its ring's (UINT64_MAX: an
 * objective nothing misses): worked out again from the ring. An entry that is not a latency:
 * forgotten. */
static void test_import_checks_the_baseline(void **st)
{
	struct service_conf sc;
	struct service_ctl a, b;
	struct sluice_ctl_state cs;
	struct sluice_baseline_window bw = { .samples = 100, .latency_us = 20000, .calls = 100 };
	uint64_t now = 1000 * S;
	(void)st;
	setup_sc(&sc);
	service_ctl_init(&a, &sc, &cfg, 1, now);
	for (int k = 0; k < 3; k++)
		sluice_baseline_add(&a.base, &a.blp, &bw);
	assert_true(a.base.value_us == 20000);

	a.base.head = 10;
	adopt_record(&b, &sc, &a, &cs, now);
	sluice_baseline_add(&b.base, &b.blp, &bw);
	assert_true(b.base.value_us == 20000);

	a.base.head = 3;
	a.base.value_us = (double)UINT64_MAX;
	adopt_record(&b, &sc, &a, &cs, now);
	assert_int_equal(b.base.count, 3);
	assert_true(b.base.value_us == 20000);
	assert_true(b.objective_us == b.slo_ratio * 20000);

	a.base.ring[1] = NAN;
	adopt_record(&b, &sc, &a, &cs, now);
	assert_int_equal(b.base.count, 0);
	assert_true(b.base.value_us == 0);
}

/* An entry written while the service was overloaded, adopted by a sluiced that starts more
 * than SLUICE_CTL_STATE_MAX_AGE_S later (the data path admitted everything meanwhile): its
 * baselines are adopted, its limit, class cuts and open breaker are not (they would shed a
 * healthy service: the breaker alone answers 503 for up to 1.2 x open_s). Within the age, all
 * of it; an entry dated ahead of the reader's clock is not trusted either. */
static void test_old_entry_keeps_only_its_baselines(void **st)
{
	static struct sluice_ctl_slot slot;
	struct service_conf sc;
	struct service_ctl a, b, fresh;
	struct sluice_baseline_window bw = { .samples = 100, .latency_us = 20000, .calls = 100 };
	uint64_t now = 1000 * S, age = SLUICE_CTL_STATE_MAX_AGE_S * S;
	const char *why;
	(void)st;
	setup_sc(&sc);
	service_ctl_init(&a, &sc, &cfg, 1, now);
	for (int k = 0; k < 3; k++) {
		sluice_baseline_add(&a.base, &a.blp, &bw);
		sluice_baseline_add(&a.base_mean, &a.llp, &bw);
	}
	assert_true(a.base.value_us == 20000 && a.base_mean.value_us == 20000);
	a.lim.est = a.lim.limit = 5;
	a.lad.admit[3] = 0;
	a.lad.admit[2] = ONE / 2;
	a.brk.state = SLUICE_BREAKER_OPEN;
	a.brk.since_ns = now;
	a.brk.open_until_ns = now + 10 * S;
	ctl_slot_fill(&slot, &a, &sc, 0, 1, now);
	service_ctl_init(&fresh, &sc, &cfg, 2, now + age + S);

	/* at the age: all of it */
	service_ctl_init(&b, &sc, &cfg, 2, now + age);
	assert_int_equal(ctl_slot_adopt(&b, &sc, &slot, now + age, &why), 1);
	assert_int_equal(b.lim.limit, 5);
	assert_int_equal(b.lad.admit[3], 0);
	assert_int_equal(b.brk.state, SLUICE_BREAKER_OPEN);

	/* past it: the baselines and the objective they make, nothing it decided */
	service_ctl_init(&b, &sc, &cfg, 2, now + age + S);
	assert_int_equal(ctl_slot_adopt(&b, &sc, &slot, now + age + S, &why), 2);
	assert_non_null(strstr(why, "older than"));
	assert_true(b.base.value_us == 20000 && b.base_mean.value_us == 20000);
	assert_true(b.objective_us == b.slo_ratio * 20000);
	assert_int_equal(b.lim.limit, fresh.lim.limit);
	assert_int_not_equal(b.lim.limit, 5);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		assert_int_equal(b.lad.admit[c], ONE);
	assert_int_equal(b.brk.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(b.have_prev, 0);

	/* dated ahead of the reader (another boot's clock, a damaged entry): the same */
	service_ctl_init(&b, &sc, &cfg, 2, now - S);
	assert_int_equal(ctl_slot_adopt(&b, &sc, &slot, now - S, &why), 2);
	assert_true(b.base.value_us == 20000);
	assert_int_equal(b.brk.state, SLUICE_BREAKER_CLOSED);

	/* an old entry of another version is still refused, not half read */
	slot.state_len -= 8;
	service_ctl_init(&b, &sc, &cfg, 2, now + age + S);
	assert_int_equal(ctl_slot_adopt(&b, &sc, &slot, now + age + S, &why), -1);
	assert_true(b.base.value_us == 0);
}

/* The node's cascade suppression rides in every service's record (version 4): a restart
 * finds it there, as it finds the breakers it suppressed. Version 3's record, its prefix, is
 * adopted and says nothing about it; a record cut short of the length it says is refused. */
static void test_slot_carries_the_cascade(void **st)
{
	static struct sluice_ctl_slot slot;
	struct service_conf sc;
	struct service_ctl a, b;
	struct sluice_ctl_state *cs = (struct sluice_ctl_state *)(void *)slot.state;
	uint64_t now = 1000 * S, since = 1;
	const char *why;
	(void)st;
	setup_sc(&sc);
	service_ctl_init(&a, &sc, &cfg, 1, now);
	a.lim.est = a.lim.limit = 77;
	ctl_slot_fill(&slot, &a, &sc, 0, 1, now);
	assert_int_equal(ctl_slot_cascade(&slot, &since), 1);
	assert_true(since == 0);
	ctl_slot_set_cascade(&slot, now - 3 * S);
	assert_int_equal(ctl_slot_cascade(&slot, &since), 1);
	assert_true(since == now - 3 * S);
	service_ctl_init(&b, &sc, &cfg, 2, now);
	assert_int_equal(ctl_slot_adopt(&b, &sc, &slot, now, &why), 1);
	assert_int_equal(b.lim.limit, 77);

	/* version 3's record: adopted, no suppression known */
	cs->version = 3;
	cs->size = SLUICE_CTL_STATE_V3_SIZE;
	slot.state_len = SLUICE_CTL_STATE_V3_SIZE;
	service_ctl_init(&b, &sc, &cfg, 2, now);
	assert_int_equal(ctl_slot_adopt(&b, &sc, &slot, now, &why), 1);
	assert_int_equal(b.lim.limit, 77);
	assert_int_equal(ctl_slot_cascade(&slot, &since), 0);

	/* this version's record cut to version 3's length is not read */
	cs->version = SLUICE_CTL_STATE_VERSION;
	cs->size = sizeof(*cs);
	service_ctl_init(&b, &sc, &cfg, 2, now);
	assert_int_equal(ctl_slot_adopt(&b, &sc, &slot, now, &why), -1);
	assert_int_not_equal(b.lim.limit, 77);
	assert_int_equal(ctl_slot_cascade(&slot, &since), 0);
}

/* Latency stays far above the objective whatever the limit does (the backend itself became
 * slow, or the limit is not what binds): every decided window either moves the limit or cuts
 * a class -- never a stretch of windows with neither, never zero shedding. ALG is the
 * config's limit_algorithm. */
static void no_freeze_when_cutting_does_not_help(int alg)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	struct evcap c;
	struct sluice_event_sink sink = evcap_sink(&c, "web");
	uint64_t now = 0, last_move = 0, longest = 0;
	uint32_t prev_limit = 0, prev_admit[4] = { ONE, ONE, ONE, ONE };
	int opened;

	setup_sc(&sc);
	sc.target_latency_ms = 40;               /* absolute objective */
	sc.limit_algorithm = alg;
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	assert_int_equal(s.mp.algorithm,
			 alg == LIMIT_ALG_AIMD ? SLUICE_LIMIT_AIMD : SLUICE_LIMIT_GRADIENT);
	if (alg == LIMIT_ALG_AIMD)                /* the classic rule: its band, no gate */
		assert_true(s.mp.classic_band && s.mp.aimd_gate == 0);
	for (int t = 1; t <= 600; t++) {
		int moved = 0;
		for (int k = 0; k < 4; k++)
			traffic(&in, k, 10, 0, 500000, 100);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, &sink, &v, &opened);
		moved = v.limit != prev_limit;
		for (int k = 0; k < 4; k++)
			moved |= sluice_prob_complement(v.shed_prob[k]) != prev_admit[k], prev_admit[k] = sluice_prob_complement(v.shed_prob[k]);
		prev_limit = v.limit;
		if (moved) {
			if (now - last_move > longest)
				longest = now - last_move;
			last_move = now;
		}
	}
	/* the limit went down to its floor, then the ladder took over: L3, L2, L1 off, L0 at
	 * its floor -- and nothing ever stood still for more than the takeover time */
	assert_int_equal(v.limit, 4);
	assert_int_equal(sluice_prob_complement(v.shed_prob[3]), 0);
	assert_int_equal(sluice_prob_complement(v.shed_prob[2]), 0);
	assert_int_equal(sluice_prob_complement(v.shed_prob[1]), 0);
	assert_int_equal(sluice_prob_complement(v.shed_prob[0]), (uint32_t)((uint64_t)10 * ONE / 100));
	assert_true(longest <= 3 * S);
	assert_int_equal(s.signal, SLUICE_SIGNAL_OK);
}

/* The gradient (auto), and `aimd`: the classic rule a config selects halves instead of
 * following the gradient, and the ladder must take over from it all the same. */
static void test_no_freeze_when_cutting_does_not_help(void **st)
{
	(void)st;
	no_freeze_when_cutting_does_not_help(LIMIT_ALG_AUTO);
	no_freeze_when_cutting_does_not_help(LIMIT_ALG_AIMD);
}

/* After a cut, the samples that complete within two latencies were admitted before it: the
 * next decision must not be made on them (a second cut on the same backlog). */
static void test_dead_time_after_a_cut(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0, cuts;
	uint32_t after_cut;
	int opened, t;
	(void)st;
	setup_sc(&sc);
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	for (t = 1; t <= 50; t++) {                    /* baseline: 200 ms */
		traffic(&in, 1, 30, 0, 200000, 10);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_true(s.base.value_us > 180000 && s.base.value_us < 220000);
	/* a backlog: 600 ms until the limit cuts */
	cuts = s.lim.cuts;
	for (t = 0; t < 30 && s.lim.cuts == cuts; t++) {
		traffic(&in, 1, 30, 0, 600000, (int64_t)s.lim.limit);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_int_equal(s.lim.cuts, cuts + 1);
	after_cut = s.lim.limit;
	/* what was admitted before the cut still completes at 600 ms for one second, then the
	 * cut shows: 200 ms. No second cut on the old samples */
	for (t = 0; t < 10; t++) {
		traffic(&in, 1, 30, 0, 600000, (int64_t)s.lim.limit);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	for (t = 0; t < 30; t++) {
		traffic(&in, 1, 30, 0, 200000, (int64_t)s.lim.limit);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_int_equal(s.lim.cuts, cuts + 1);
	assert_true(s.lim.limit >= after_cut);
}

static void test_headroom_caps_and_status(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	int opened;
	(void)st;
	/* nothing written: work-conserving, L3 may use what idle higher classes leave */
	setup_sc(&sc);
	sc.limit_fixed = 36;
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	traffic(&in, 3, 10, 0, 1000, 30);
	service_ctl_tick(&s, &sc, &in, 0, 100 * MS, NULL, &v, &opened);
	service_ctl_tick(&s, &sc, &in, 0, 200 * MS, NULL, &v, &opened);
	assert_int_equal(v.limit, 36);
	assert_int_equal(v.class_threshold[3], 33);
	assert_true(v.flags & SLUICE_VERDICT_PRIORITY_COUNT);
	/* L3: 50 % written: a cap in adaptive mode too (the pooled-database case) */
	sc.headroom[3] = 50;
	sc.headroom_set = 1;
	service_ctl_reconfigure(&s, &sc, &cfg);
	service_ctl_tick(&s, &sc, &in, 0, 300 * MS, NULL, &v, &opened);
	assert_int_equal(v.class_threshold[3], 18);
	assert_int_equal(v.class_threshold[0], 36);
	/* a service that never sees a latency sample says so */
	setup_sc(&sc);
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	for (int t = 1; t <= 120; t++) {
		in.stats[1].arrivals += 5;         /* connections, but no latency samples */
		service_ctl_tick(&s, &sc, &in, 0, (uint64_t)t * 100 * MS, NULL, &v, &opened);
		if (t == 15)
			assert_int_equal(s.signal, SLUICE_SIGNAL_THIN);
	}
	assert_int_equal(s.signal, SLUICE_SIGNAL_NONE);
	assert_true(s.objective_us == 0);
	assert_int_equal(s.windows, 0);
}

/* The listen queue alone: held connections that do not grow, below half the backlog, are
 * not saturation; a queue that has held connections for a window and grows is (at once when
 * it already held them that long, not before a window from an empty queue); one empty tick
 * ends it; the ladder is told once per window. */
static void test_listen_queue_rule(void **st)
{
	struct sluice_listenq q;
	struct sluice_listenq_input in = { .have = 1, .queued = 3, .backlog = 64 };
	uint64_t now = 0;
	double x;
	(void)st;
	sluice_listenq_init(&q);
	for (int t = 0; t < 30; t++)                   /* 3 waiting, steady: a busy backend */
		assert_int_equal(sluice_listenq_tick(&q, &in, S, now += 100 * MS, NULL), 0);
	for (int t = 0; t < 9; t++) {                  /* held for a window already: growing is */
		in.queued++;                           /* saturation from its first tick */
		now += 100 * MS;
		assert_int_equal(sluice_listenq_tick(&q, &in, S, now, NULL), 1);
	}
	in.queued++;
	assert_int_equal(sluice_listenq_tick(&q, &in, S, now += 100 * MS, NULL), 1);
	assert_int_equal(sluice_listenq_overload(&q, S, now, &x), 1);
	assert_true(x > 0.2 && x < 0.25);              /* 14 of 64 */
	assert_int_equal(sluice_listenq_overload(&q, S, now + 500 * MS, &x), 0);
	assert_int_equal(sluice_listenq_overload(&q, S, now + S, &x), 1);
	in.queued = 0;                                 /* accepted everything: over at once */
	assert_int_equal(sluice_listenq_tick(&q, &in, S, now += 100 * MS, NULL), 0);
	assert_int_equal(sluice_listenq_overload(&q, S, now + 2 * S, &x), 0);
	/* from an empty queue, growing at once: not before it has held connections for a window
	 * (every tick from the first non-empty one, 100 ms apart: the 11th is a second on) */
	{
		struct sluice_listenq g;
		struct sluice_listenq_input gi = { .have = 1, .queued = 0, .backlog = 64 };
		uint64_t gt = 0;

		sluice_listenq_init(&g);
		assert_int_equal(sluice_listenq_tick(&g, &gi, S, gt += 100 * MS, NULL), 0);
		for (int t = 1; t <= 11; t++) {
			gi.queued++;
			assert_int_equal(sluice_listenq_tick(&g, &gi, S, gt += 100 * MS, NULL), t == 11);
		}
	}
	/* over half the backlog for a window counts even when it stopped growing */
	in.queued = 40;
	for (int t = 0; t < 11; t++)
		sluice_listenq_tick(&q, &in, S, now += 100 * MS, NULL);
	assert_int_equal(q.saturated, 1);
	in.have = 0;                                   /* no listener found: no signal */
	assert_int_equal(sluice_listenq_tick(&q, &in, S, now += 100 * MS, NULL), 0);
}

/* A backend that stops answering (no response, no latency sample) while connections pile up
 * in its listen queue: the queue is the only evidence. L3 is shed within two windows and
 * keeps being cut while it grows, the limit does not grow; once the queue is gone and answers
 * come back within the objective, everything is admitted again. */
static void test_listen_queue_sheds_a_blind_backend(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0;
	uint32_t limit;
	int opened, t, cut_at = -1;
	(void)st;
	setup_sc(&sc);
	memset(&in, 0, sizeof(in));
	in.listen.have = 1;
	in.listen.backlog = 128;
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	for (t = 1; t <= 50; t++) {                    /* baseline: 20 ms, L0 and L3 */
		traffic(&in, 0, 5, 0, 20000, 1);
		traffic(&in, 3, 20, 0, 20000, 4);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_true(s.objective_us > 0);
	limit = v.limit;
	/* nothing completes any more; arrivals go on, 2 more connections wait per tick */
	for (t = 1; t <= 40; t++) {
		in.stats[0].arrivals += 5;
		in.stats[3].arrivals += 20;
		in.listen.queued += 2;
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		if (cut_at < 0 && sluice_prob_complement(v.shed_prob[3]) < ONE)
			cut_at = t;
		assert_true(v.limit <= limit);
	}
	assert_true(cut_at > 0 && cut_at <= 20);       /* within two windows of the queue */
	assert_true(sluice_prob_complement(v.shed_prob[3]) <= ONE / 4);
	assert_int_equal(sluice_prob_complement(v.shed_prob[0]), ONE);
	/* the backend catches up: queue empty, answers within the objective */
	in.listen.queued = 0;
	for (t = 1; t <= 150; t++) {
		traffic(&in, 0, 5, 0, 20000, 1);
		traffic(&in, 3, 20, 0, 20000, 4);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		assert_int_equal(sluice_prob_complement(v.shed_prob[c]), ONE);
}

/* L0 alone, 8 ms against a 3 ms objective, 2 connections busy whatever the limit: refusing
 * L0 cannot make L0 faster, so the ladder leaves it alone while the backend is not saturated.
 * Once connections pile up in the listen queue it is, and L0 is cut as the last resort. */
static void test_l0_alone_not_cut_unless_saturated(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0;
	int opened, t;
	(void)st;
	setup_sc(&sc);
	sc.target_latency_ms = 3;
	memset(&in, 0, sizeof(in));
	in.listen.have = 1;
	in.listen.backlog = 128;
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	for (t = 1; t <= 300; t++) {
		traffic(&in, 0, 50, 0, 8000, 2);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		assert_int_equal(sluice_prob_complement(v.shed_prob[0]), ONE);
	}
	assert_true(s.ladder_on_latency);               /* the ladder was told, and spared L0 */
	assert_true(v.limit > 2);
	for (t = 1; t <= 30; t++) {
		traffic(&in, 0, 50, 0, 8000, 2);
		in.listen.queued += 2;
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_true(s.lq.saturated);
	assert_true(sluice_prob_complement(v.shed_prob[0]) < ONE);
}

/* A tcp service, day-one adaptive limit: L0's connections are not held to the adaptive limit.
 * L0 alone, 8 connections busy at 8 ms against a 3 ms objective whatever the limit does (the
 * PostgreSQL bench's clients that connect per transaction, whose own connection setup slows
 * their queries): the limit goes below L0's 8, yet an L0 SYN is still admitted (threshold
 * above 8) and the ladder never cuts L0; an L3 flood arriving meanwhile finds no room (its
 * threshold counts L0's busy connections) and the ladder cuts L3. Once connections pile up in
 * the listen queue, L0 is cut as the last resort. An http service keeps L0 at the limit. */
static void test_tcp_l0_not_held_to_the_limit(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0;
	int opened, t;
	(void)st;
	setup_sc(&sc);
	sc.protocol = SLUICE_PROTO_TCP;
	sc.limit_min = 4;
	sc.limit_max = 256;
	sc.target_latency_ms = 3;
	memset(&in, 0, sizeof(in));
	in.listen.have = 1;
	in.listen.backlog = 128;
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	for (t = 1; t <= 300; t++) {
		traffic(&in, 0, 50, 0, 8000, 8);
		if (t > 100) {                          /* the L3 flood: refused SYNs */
			in.stats[3].arrivals += 40;
			in.stats[3].rejected[SLUICE_REJ_HEADROOM] += 40;
		}
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		assert_true(v.class_threshold[0] > 8);  /* an L0 SYN with 8 busy goes through */
		assert_false(v.flags & SLUICE_VERDICT_SHUT(0));
		assert_int_equal(sluice_prob_complement(v.shed_prob[0]), ONE);
	}
	assert_true(v.limit < 8);                        /* the limit was cut below L0's 8 ... */
	assert_true(v.class_threshold[3] <= 8);          /* ... and L3 finds no room beside them */
	assert_true(sluice_prob_complement(v.shed_prob[3]) < ONE / 2);   /* the ladder cut L3 */
	/* L0's own clients waiting to be accepted (2 growing to 5 of 128): saturated by the
	 * listen-queue rule, yet no reason to refuse them */
	for (t = 1; t <= 30; t++) {
		traffic(&in, 0, 50, 0, 8000, 8);
		in.listen.queued = 2 + (uint32_t)t / 10;
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		assert_int_equal(sluice_prob_complement(v.shed_prob[0]), ONE);
	}
	assert_true(s.lq.saturated);
	for (t = 1; t <= 30; t++) {
		traffic(&in, 0, 50, 0, 8000, 8);
		in.listen.queued += 2;
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_true(s.lq.saturated);
	assert_true(sluice_prob_complement(v.shed_prob[0]) < ONE);   /* the last resort stays */
	/* http: a request is the unit, L0 stays held to the limit */
	sc.protocol = SLUICE_PROTO_HTTP;
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	now = 0;
	for (t = 1; t <= 100; t++) {
		traffic(&in, 0, 50, 0, 8000, 8);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_int_equal(v.class_threshold[0], v.limit);
}

/* A few connections waiting to be accepted are not saturation, in any limit or headroom mode:
 * L0 alone (a database's clients connecting per transaction, 3 busy at their unloaded 2 ms),
 * the listen queue holding 1 to 4 of 124 and growing within each window (saturated by the
 * listen-queue rule). With a fixed limit and fixed headroom (the operator's L0 100 %, L3 75 %)
 * the ladder used to cut L0 on it; it is not cut in 30 s, for tcp nor for http with the
 * day-one adaptive limit. Once the queue passes a quarter of the backlog, L0 is cut as the
 * last resort. */
static void test_l0_not_cut_for_a_few_waiting_connections(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now;
	int opened, t, sat, mode;
	(void)st;
	for (mode = 0; mode < 2; mode++) {
		setup_sc(&sc);
		if (mode == 0) {                         /* tcp, as the operator wrote it */
			sc.protocol = SLUICE_PROTO_TCP;
			sc.limit_fixed = 36;
			sc.headroom[0] = 100;
			sc.headroom[1] = 90;
			sc.headroom[2] = 75;
			sc.headroom[3] = 75;
			sc.headroom_set = 1;
			sc.headroom_written = 0xf;
			sc.headroom_mode = HEADROOM_FIXED;
		}
		memset(&in, 0, sizeof(in));
		in.listen.have = 1;
		in.listen.backlog = 124;
		service_ctl_init(&s, &sc, &cfg, 1, 0);
		now = 0;
		for (t = 1; t <= 100; t++) {             /* the baseline */
			traffic(&in, 0, 20, 0, 2000, 3);
			service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		}
		for (t = 0, sat = 0; t < 300; t++) {
			traffic(&in, 0, 20, 0, 2000, 3);
			in.listen.queued = 1 + (uint32_t)(t / 10) % 4;
			service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
			sat += s.lq.saturated;
			assert_int_equal(sluice_prob_complement(v.shed_prob[0]), ONE);
			assert_false(v.flags & SLUICE_VERDICT_SHUT(0));
		}
		assert_true(sat > 0);                    /* the rule did call it saturated */
		for (t = 1; t <= 40; t++) {              /* now it heads for overflow */
			traffic(&in, 0, 20, 0, 2000, 3);
			in.listen.queued += 2;
			service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		}
		assert_true(s.lq.saturated);
		assert_true(sluice_prob_complement(v.shed_prob[0]) < ONE);
	}
}

/* L0 under an adaptive limit (the e2e scenario's shape): the backend serves 400/s, L0 asks
 * for 120/s of it, the lower classes overload it (80 ms answers against a 40 ms objective),
 * so the limit is cut below what L0 alone holds. Fills s and v after `ticks` ticks from
 * *now; l0_inflight < 0 keeps L0's in-flight at the limit in force (a flood fills it). */
static void l0_load(struct service_ctl *s, const struct service_conf *sc, struct ctl_inputs *in,
		    uint64_t *now, int ticks, uint64_t l0_arrivals, uint64_t done, int64_t l0_inflight,
		    struct sluice_verdict *v)
{
	int opened;

	for (int t = 0; t < ticks; t++) {
		traffic(in, 3, done > 12 ? done - 12 : 0, 0, 80000, 3);
		traffic(in, 0, done < 12 ? done : 12, 0, 25000,
			l0_inflight >= 0 ? l0_inflight : (int64_t)v->limit);
		if (l0_arrivals > (done < 12 ? done : 12))       /* arrivals beyond the answered */
			in->stats[0].arrivals += l0_arrivals - (done < 12 ? done : 12);
		service_ctl_tick(s, sc, in, 0, *now += 100 * MS, NULL, v, &opened);
	}
}

static void l0_setup(struct service_conf *sc, struct service_ctl *s, struct ctl_inputs *in)
{
	setup_sc(sc);
	sc->limit_min = 2;
	sc->limit_max = 32;
	sc->target_latency_ms = 40;
	sc->aimd_window_ms = 500;
	memset(in, 0, sizeof(*in));
	service_ctl_init(s, sc, &cfg, 1, 0);
}

static void test_l0_room_under_adaptive_limit(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v = { 0 };
	uint64_t now = 0;
	(void)st;
	/* L0 fits in half of what the backend served: not refused by headroom while its 6 in
	 * flight are above the cut limit; the lower classes stay held to the limit */
	l0_setup(&sc, &s, &in);
	l0_load(&s, &sc, &in, &now, 50, 12, 40, 6, &v);
	assert_true(v.limit < 6);
	assert_int_equal(v.class_threshold[0], 32);
	for (int c = 1; c < SLUICE_NUM_CLASSES; c++)
		assert_true(v.class_threshold[c] <= v.limit);
	/* an L0 flood beyond what the backend serves (1000/s against 400/s) filling whatever it
	 * is given: held to the limit again (at most one unit of averaging lag above it) */
	l0_load(&s, &sc, &in, &now, 30, 100, 40, -1, &v);
	assert_true(v.class_threshold[0] <= v.limit + 1);
	assert_true(v.class_threshold[0] < 32);
	/* L0 back to 120/s while the backend slows to 100/s: what it proved in the last 30 s
	 * (400/s) still counts for 30 s, then only what it serves now, which L0 does not fit
	 * in half of */
	l0_load(&s, &sc, &in, &now, 100, 12, 10, 4, &v);
	assert_int_equal(v.class_threshold[0], 32);
	l0_load(&s, &sc, &in, &now, 220, 12, 10, 4, &v);
	assert_true(v.limit > 4 && 2 * v.limit - 4 < 32);    /* L0 alone: the limit grew */
	assert_int_equal(v.class_threshold[0], 2 * v.limit - 4);
}

/* The operator's caps stay as they are: a fixed limit, fixed headroom, a written L0
 * percentage (100 % too: written, L0 is held to the limit, for http and tcp alike). A written
 * percentage of another class leaves L0's room alone. */
static void test_l0_room_caps_unchanged(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v = { 0 };
	uint64_t now = 0;
	(void)st;
	l0_setup(&sc, &s, &in);
	sc.limit_fixed = 4;
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	l0_load(&s, &sc, &in, &now, 50, 12, 40, 6, &v);
	assert_int_equal(v.limit, 4);
	assert_int_equal(v.class_threshold[0], 4);
	/* written L0: 100 */
	l0_setup(&sc, &s, &in);
	sc.headroom_set = 1;
	sc.headroom_written = 1u << 0;
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	l0_load(&s, &sc, &in, &now, 50, 12, 40, 6, &v);
	assert_true(v.limit < 6);
	assert_int_equal(v.class_threshold[0], v.limit);
	/* the same for a tcp service, whose unwritten L0 would go to the limit's max */
	sc.protocol = SLUICE_PROTO_TCP;
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	l0_load(&s, &sc, &in, &now, 50, 12, 40, 6, &v);
	assert_true(v.limit < 6);
	assert_int_equal(v.class_threshold[0], v.limit);
	sc.protocol = SLUICE_PROTO_HTTP;
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	l0_load(&s, &sc, &in, &now, 50, 12, 40, 6, &v);
	/* written L0: 50 (set by hand, as a caller without the key mask would) */
	sc.headroom_written = 0;
	sc.headroom[0] = 50;
	service_ctl_reconfigure(&s, &sc, &cfg);
	l0_load(&s, &sc, &in, &now, 1, 12, 40, 6, &v);
	assert_int_equal(v.class_threshold[0], v.limit > 1 ? v.limit / 2 : 1);
	/* only L3 written: L0's room as without it */
	sc.headroom[0] = 100;
	sc.headroom[3] = 50;
	sc.headroom_written = 1u << 3;
	service_ctl_reconfigure(&s, &sc, &cfg);
	l0_load(&s, &sc, &in, &now, 1, 12, 40, 6, &v);
	assert_int_equal(v.class_threshold[0], 32);
	/* fixed headroom: limit x 100 % against the total */
	sc.headroom_set = 0;
	sc.headroom_written = 0;
	sc.headroom_mode = HEADROOM_FIXED;
	service_ctl_reconfigure(&s, &sc, &cfg);
	l0_load(&s, &sc, &in, &now, 1, 12, 40, 6, &v);
	assert_int_equal(v.class_threshold[0], v.limit);
	assert_false(v.flags & SLUICE_VERDICT_PRIORITY_COUNT);
}

/* A throughput cut's drain lets L0 keep the limit it had before the cut (the backlog in
 * front of it is the lower classes'), but never past the operator's cap: an L0 percentage
 * written under adaptive headroom, or fixed headroom's, holds during the drain as at any
 * other tick. (The drain is set by hand: a cut that leaves a backlog behind, as the
 * simulations make one.) */
static void test_drain_keeps_the_l0_cap(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0;
	int opened;
	(void)st;
	for (int mode = 0; mode < 2; mode++) {
		uint32_t calm;

		setup_sc(&sc);
		sc.limit_min = 2;
		sc.limit_max = 64;
		sc.headroom[0] = 50;
		if (mode == 0) {
			sc.headroom_set = 1;
			sc.headroom_written = 1u << 0;
		} else {
			sc.headroom_mode = HEADROOM_FIXED;
		}
		memset(&in, 0, sizeof(in));
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			in.switch_admit[c] = SLUICE_PROB_ONE;
		service_ctl_init(&s, &sc, &cfg, 1, 0);
		s.lim.est = 20;
		s.lim.limit = 20;
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		calm = v.class_threshold[0];
		assert_int_equal(v.limit, 20);
		assert_int_equal(calm, 10);
		/* a cut from 40 to 20 whose backlog (30 in flight) drains for the next second */
		s.draining = 1;
		s.drain_l0 = 40;
		s.drain_until_ns = now + 1000 * MS;
		in.inflight.total = 30;
		in.inflight.cls[3] = 30;
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		assert_true(s.draining);
		assert_int_equal(v.limit, 20);
		assert_int_equal(v.class_threshold[0], calm);
	}
}

/* A calm service's few samples per tick wait in the maps (service_ctl_quantile_hold): a
 * controller that reads its histograms only when they hold enough new samples (as sluiced
 * does) decides the same windows at the same ticks, with the same latency, limit and baseline,
 * as one that reads them every tick; once the objective is missed it reads every tick. */
static void test_quantiles_held_in_calm(void **st)
{
	struct service_conf sc;
	struct service_ctl a, b;
	struct ctl_inputs ia, ib;
	struct sluice_verdict va, vb;
	uint64_t now = 0, read_n = 0;
	unsigned held = 0, held_ticks = 0, read_over = 0, ticks_over = 0;
	int opened;
	(void)st;
	setup_sc(&sc);
	memset(&ia, 0, sizeof(ia));
	memset(&ib, 0, sizeof(ib));   /* what the loop does not copy (the wait probe) is off */
	service_ctl_init(&a, &sc, &cfg, 1, 0);
	service_ctl_init(&b, &sc, &cfg, 1, 0);
	for (int t = 1; t <= 400; t++) {
		int over = t > 300;                 /* the last 10 s: 10x the latency */
		uint64_t n, pending;
		uint32_t hold = service_ctl_quantile_hold(&b, now + 100 * MS);

		traffic(&ia, 2, over ? 3 : 1, 0, over ? 20000 : 2000, 1);
		n = sluice_hist_count(&ia.hist[2]);
		pending = n - read_n;
		/* b's inputs: the counters of now, the histogram only when read (a deferred
		 * class's is left stale: the controller must not look at it) */
		memcpy(ib.stats, ia.stats, sizeof(ib.stats));
		ib.inflight = ia.inflight;
		memcpy(ib.switch_admit, ia.switch_admit, sizeof(ib.switch_admit));
		ib.listen = ia.listen;
		ib.hist_same = 0;
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			ib.hist_at[c] = NULL;
		if (t > 1 && pending && pending < hold && held < 4) {
			ib.hist_deferred = 1u << 2;
			ib.hist_same = ~(1u << 2) & 15u;
			held++;
			held_ticks++;
		} else {
			ib.hist_deferred = 0;
			memcpy(ib.hist, ia.hist, sizeof(ib.hist));
			read_n = n;
			held = 0;
			read_over += over;
		}
		ticks_over += over;
		now += 100 * MS;
		service_ctl_tick(&a, &sc, &ia, 0, now, NULL, &va, &opened);
		service_ctl_tick(&b, &sc, &ib, 0, now, NULL, &vb, &opened);
		if (!over) {
			assert_int_equal(a.windows, b.windows);
			assert_true(a.last_latency_us == b.last_latency_us);
			assert_int_equal(a.lim.limit, b.lim.limit);
			assert_true(a.base.value_us == b.base.value_us);
			assert_int_equal(a.above_since_ns, b.above_since_ns);
			/* the samples b has not read yet are all that its window lacks */
			assert_int_equal(a.win.samples, b.win.samples + (n - read_n));
		}
		/* the first window closed on the missed objective: b's at most a tick later
		 * (its samples waited for one) */
		if (a.above_since_ns && !b.above_since_ns)
			assert_true(now < a.above_since_ns + 200 * MS);
		if (b.above_since_ns)
			assert_true(a.above_since_ns && b.above_since_ns <= a.above_since_ns + 100 * MS);
	}
	assert_true(a.windows >= 10);
	assert_true(a.base.value_us > 0);
	assert_true(a.above_since_ns > 0);         /* the objective was missed ... */
	assert_true(held_ticks > 150);             /* calm: most ticks left the histogram */
	assert_true(read_over >= ticks_over - 12); /* missed: read every tick (after a window) */
}

/* One tick of a backend that does not serve its queue in order (Apache's): n responses, `slow`
 * of them at slow_us (the ones that waited), the rest at fast_us; `conn_ends` connections
 * that ended (an http completion counter counts them too); L3 refused `refused` requests at
 * its threshold; in-flight now. */
static void unordered(struct ctl_inputs *in, uint64_t n, uint64_t slow, uint64_t fast_us,
		      uint64_t slow_us, uint64_t conn_ends, uint64_t refused, int64_t inflight)
{
	traffic(in, 3, n - slow, 0, fast_us, inflight);
	traffic(in, 3, slow, 0, slow_us, inflight);
	in->stats[3].completed += conn_ends;
	in->stats[3].arrivals += refused;
	in->stats[3].rejected[SLUICE_REJ_HEADROOM] += refused;
}

/* A baseline: 5 s of 300 responses/s at 50 ms with 15 in flight (Little: 15 / 300 = 50 ms). */
static uint64_t learn_50ms(struct service_ctl *s, const struct service_conf *sc,
			   struct ctl_inputs *in, uint64_t now)
{
	struct sluice_verdict v;
	int opened;

	for (int t = 0; t < 50; t++) {
		unordered(in, 30, 0, 50000, 50000, 0, 0, 15);
		service_ctl_tick(s, sc, in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_true(s->base.value_us > 45000 && s->base.value_us < 60000);
	return now;
}

/* A record whose baseline is not a positive finite number (another build's, or a damaged one:
 * nothing sluiced computes gives one) does not bring it back: the baseline is relearned from
 * the windows after the restart. Adopted, its ring outvoted those windows: a NaN or negative
 * baseline left the objective unknown (the limit held, nothing shed for latency) and an
 * infinite one made it one no latency is above, for 3, 58 and 7 windows; the queue
 * baselines took an infinite value as learned. */
static void test_import_relearns_a_baseline_not_a_number(void **st)
{
	static const double bad[] = { NAN, -50000, INFINITY };
	struct service_conf sc;
	struct service_ctl a, b;
	struct sluice_ctl_state cs;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now, cuts0;
	int opened;
	(void)st;
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		setup_sc(&sc);
		memset(&in, 0, sizeof(in));
		service_ctl_init(&a, &sc, &cfg, 1, 0);
		now = learn_50ms(&a, &sc, &in, 0);
		ctl_state_export(&a, now, &cs);
		for (int i = 0; i < SLUICE_BASELINE_N; i++)
			cs.base.ring[i] = bad[k];
		cs.base.count = SLUICE_BASELINE_N;
		cs.base.value_us = bad[k];
		cs.base_little_us = cs.base_mean_us = bad[k];

		service_ctl_init(&b, &sc, &cfg, 2, now);
		assert_int_equal(ctl_state_import(&b, &cs, now), 0);
		assert_true(b.lim.limit == a.lim.limit);          /* the rest is adopted */
		assert_true(b.base_little.value_us == 0 && b.base_mean.value_us == 0);
		/* the same traffic as before the restart: two windows give the baseline back */
		for (int t = 0; t < 20; t++) {
			unordered(&in, 30, 0, 50000, 50000, 0, 0, 15);
			service_ctl_tick(&b, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		}
		assert_true(b.base.value_us > 45000 && b.base.value_us < 60000);
		assert_true(b.objective_us > 0 && isfinite(b.objective_us));
		/* and a slow backend is held again: above the objective the limit is cut */
		cuts0 = b.lim.cuts;
		for (int t = 0; t < 30; t++) {
			unordered(&in, 30, 0, 200000, 200000, 0, 0, 40);
			service_ctl_tick(&b, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		}
		assert_true(b.lim.cuts > cuts0);
	}
}

/* sluiced does not tick a service while nothing of it moves (service_ctl_settled): the first
 * tick after such a stretch spans all of it. The window it decides is the one every tick of
 * the stretch would have decided: its completion rate is the traffic's, not the traffic spread
 * over the quiet minute (0.5 responses a second for 300, a rate any stall of the backend is
 * above, so the throughput cut's "the backend completes at least as fast" held for a stall). */
static void test_skipped_ticks_are_not_active_time(void **st)
{
	struct service_conf sc;
	struct service_ctl a, b;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0;
	int opened;
	(void)st;
	setup_sc(&sc);
	memset(&in, 0, sizeof(in));
	service_ctl_init(&a, &sc, &cfg, 1, 0);
	now = learn_50ms(&a, &sc, &in, 0);
	/* the traffic stops: within 2 s of ticks the service is settled */
	for (int t = 0; t < 20; t++) {
		traffic(&in, 3, 0, 0, 50000, 0);
		service_ctl_tick(&a, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_true(service_ctl_settled(&a));
	b = a;
	/* a quiet minute: every tick of it for one, none for the other (as sluiced skips it) */
	for (int t = 0; t < 600; t++)
		service_ctl_tick(&a, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	/* the traffic is back, 300 responses a second: both see the same ticks */
	for (int t = 0; t < 5; t++) {
		unordered(&in, 30, 0, 50000, 50000, 0, 0, 15);
		now += 100 * MS;
		service_ctl_tick(&a, &sc, &in, 0, now, NULL, &v, &opened);
		service_ctl_tick(&b, &sc, &in, 0, now, NULL, &v, &opened);
	}
	assert_true(a.windows == b.windows && a.windows > 0);
	assert_true(a.last_rate > 290 && a.last_rate < 310);
	assert_true(b.last_rate > 290 && b.last_rate < 310);
	assert_true(sluice_l0room_served_max(&b.l0room, SLUICE_L0ROOM_SERVED_S, now) > 290);
}

/* A reload that shortens the window while the limit's evidence floor holds: the floor keeps
 * its start and the new config's hold (30 windows) from it, not the old one's. */
static void test_reload_shortens_the_floor_hold(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	uint64_t now = 1000 * S;
	(void)st;
	setup_sc(&sc);
	sc.aimd_window_ms = 10000;
	service_ctl_init(&s, &sc, &cfg, 1, now);
	assert_true(s.mp.floor_hold_ns == 300 * S);
	s.lim.floor = 40;
	s.lim.floor_until_ns = now + 300 * S;        /* set at now under 10 s windows */
	sc.aimd_window_ms = 1000;
	service_ctl_reconfigure(&s, &sc, &cfg);
	assert_true(s.mp.floor_hold_ns == 30 * S);
	assert_true(s.lim.floor_until_ns == now + 30 * S);
	/* one set near the clock's start cannot wrap round to a hold without end */
	sc.aimd_window_ms = 10000;
	service_ctl_reconfigure(&s, &sc, &cfg);
	s.lim.floor_until_ns = 100 * S;
	sc.aimd_window_ms = 1000;
	service_ctl_reconfigure(&s, &sc, &cfg);
	assert_true(s.lim.floor_until_ns == 0);
}

/* A reload that lowers limit_max while a throughput cut's backlog drains: the drain gives L0
 * the limit before the cut (200), set under the old bounds. It is held to the new ones: no
 * class's threshold goes past the limit_max now in force (64). */
static void test_reload_bounds_the_drain(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now;
	int opened, drained = 0;
	(void)st;
	setup_sc(&sc);
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	now = learn_50ms(&s, &sc, &in, 0);
	s.lim.est = 200;
	s.lim.limit = 200;
	/* a surge: 160 ms a response with 150 in flight; the throughput cut takes the limit
	 * down, and while the 150 drain L0 may keep the limit before it, 200 */
	for (int t = 0; t < 20 && !s.draining; t++) {
		unordered(&in, 30, 0, 160000, 160000, 0, 0, 150);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_true(s.draining && s.drain_l0 == 200);
	/* the operator lowers the bounds meanwhile */
	sc.limit_max = 64;
	service_ctl_reconfigure(&s, &sc, &cfg);
	assert_true(s.lim.limit <= 64);
	for (int t = 0; t < 20; t++) {
		unordered(&in, 30, 0, 160000, 160000, 0, 0, 150);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		drained += s.draining;
		assert_true(v.limit <= 64);
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			assert_true(v.class_threshold[c] <= 64);
	}
	assert_true(drained > 0);                   /* the drain went on after the reload */
}

/* The clock leaps in the middle of a descent (a VM paused for ten minutes: its monotonic clock
 * moves on at resume) while the traffic stays as it was. The window holding the gap is not
 * decided: its completion rate over the gap (0.1 a second for 300) is not the backend's, and
 * the evidence floor read that fall as a cut that shed work without lowering latency: the
 * descent was undone (26 -> 40) and the limit held at 40 for 30 windows. */
static void test_clock_leap_is_not_a_rate_fall(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now;
	uint32_t before;
	int opened;
	(void)st;
	setup_sc(&sc);
	sc.protocol = SLUICE_PROTO_TCP;
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	now = learn_50ms(&s, &sc, &in, 0);
	s.lim.est = 40;
	s.lim.limit = 40;
	/* 120 ms a turn at the limit, which refuses 20 a tick: the first cut starts a descent */
	for (int t = 0; t < 30 && !s.lim.ref_peak; t++) {
		unordered(&in, 30, 0, 120000, 120000, 0, 20, s.lim.limit);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_true(s.lim.ref_peak > 0);
	/* past its dead time, the next window under way */
	while (now <= s.dead_until_ns) {
		unordered(&in, 30, 0, 120000, 120000, 0, 20, s.lim.limit);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	unordered(&in, 30, 0, 120000, 120000, 0, 20, s.lim.limit);
	service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	assert_true(s.win.samples > 0);
	before = s.lim.limit;
	now += 600 * S;
	for (int t = 0; t < 5; t++) {
		unordered(&in, 30, 0, 120000, 120000, 0, 20, s.lim.limit);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		assert_true(s.lim.limit <= before);
	}
	assert_int_equal(s.lim.unhelpful, 0);
	assert_true(s.lim.floor == 0);
}

/* Counts the slow_call events by level (every event is seen, however many come). */
struct slow_call_seen {
	int alerts, notes, notes_before_alert;
};

static void slow_call_fn(void *ctx, const struct sluice_event *e)
{
	struct slow_call_seen *c = ctx;

	if (strcmp(e->machine, "breaker"))
		return;
	if (!strcmp(e->to, "slow_call_below_objective") && e->level == SLUICE_EV_ALERT)
		c->alerts++;
	else if (!strcmp(e->to, "slow_call_above_objective") && e->level == SLUICE_EV_INFO)
		c->notes_before_alert += !c->alerts, c->notes++;
}

/* A learned objective above the breaker's slow_call (here 50 ms against a baseline of about
 * 50 ms: objective about 60 ms) is said once, as an alert, when the baseline is learned, not
 * at every window; and said again, as a note, when the objective falls back below it. */
static void test_slow_call_below_learned_objective(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	struct slow_call_seen c = { 0 };
	struct sluice_event_sink sink = { slow_call_fn, &c, "web" };
	uint64_t now = 0;
	int opened;
	(void)st;
	setup_sc(&sc);
	sc.breaker.slow_call_ms = 50;
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	for (int t = 0; t < 100; t++) {
		unordered(&in, 30, 0, 50000, 50000, 0, 0, 15);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, &sink, &v, &opened);
	}
	assert_true(s.objective_us > 50000);
	assert_int_equal(c.alerts, 1);
	assert_int_equal(c.notes, 0);
	/* the baseline rolls down to 30 ms: objective 36 ms, below slow_call again */
	for (int t = 0; t < 1500; t++) {
		unordered(&in, 30, 0, 30000, 30000, 0, 0, 9);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, &sink, &v, &opened);
	}
	assert_true(s.objective_us > 0 && s.objective_us < 50000);
	assert_int_equal(c.alerts, 1);
	assert_int_equal(c.notes, 1);
	assert_int_equal(c.notes_before_alert, 0);
}

/* The limit binds on a backend whose queue is not served in order: the median stays at the
 * baseline (most requests are served at once, a few wait long), but in-flight / throughput
 * and the responses' mean both read 1.6x. The limit comes down to about throughput x aim
 * (300/s x 58 ms = 17.6); the median alone held it at 24 (Apache: 22-24 for 16 workers). */
static void test_limit_sees_an_unordered_queue(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0;
	int opened;
	(void)st;
	setup_sc(&sc);
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	now = learn_50ms(&s, &sc, &in, now);
	s.lim.est = 24;                          /* where the surge met it */
	s.lim.limit = 24;
	for (int t = 0; t < 100; t++) {
		/* 30 responses a tick at 300/s, of which those beyond 16 workers waited (160 ms),
		 * never half of them (the median stays at 52 ms); in-flight is what the limit
		 * admits (Little: 24 -> 80 ms, 18 -> 60 ms) */
		uint32_t lim = s.lim.limit;
		uint64_t slow = lim > 28 ? 12 : lim > 16 ? (uint64_t)(lim - 16) : 0;

		unordered(&in, 30, slow, 52000, 160000, 0, 50, (int64_t)lim);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		assert_true(s.last_latency_us < s.objective_us);   /* the median: within */
	}
	assert_true(s.lim.cuts > 0);
	assert_true(v.limit >= 16 && v.limit <= 20);
}

/* A recovery step's evidence is the samples within the objective, one by one: a tick whose
 * median is within it (18 responses at 50 ms, 12 at 160 ms, against an objective of about
 * 60 ms) gives 18, not its 30. */
static void test_recovery_counts_samples_within(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now;
	int opened;
	(void)st;
	setup_sc(&sc);
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	now = learn_50ms(&s, &sc, &in, 0);
	assert_true(s.objective_us > 57344 && s.objective_us < 65536);   /* in one bucket */
	s.lad.admit[3] = ONE / 2;               /* L3 half way back after an overload */
	s.lad.last_change_ns = now;             /* its step held from now: no step passes yet */
	s.lad.step_good = 0;
	for (int t = 0; t < 3; t++) {
		unordered(&in, 30, 12, 50000, 160000, 0, 0, 15);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		assert_true(s.last_latency_us <= s.objective_us || s.windows == 0);
	}
	assert_int_equal(s.above_since_ns, 0);
	assert_int_equal(s.lad.admit[3], ONE / 2);
	assert_int_equal(s.lad.step_good, 3 * 18);
}

/* Counts the throughput cut's limit events. */
static void little_cut_fn(void *ctx, const struct sluice_event *e)
{
	*(int *)ctx += e->why && !strcmp(e->why, "inflight_above_throughput");
}

/* The throughput cut decides on one tick's samples, and a tick needs as many as the service's
 * min_samples, as a window does: a surge met at a limit of 48 (every response 160 ms, in-flight
 * / rate 160 ms against a 55 ms aim), 30 responses a tick, is cut by it at the default of 20
 * and never at 40 (the windows, with 300 samples a second, still decide). */
static void test_throughput_cut_needs_min_samples(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0;
	int opened;
	(void)st;
	for (int k = 0; k < 2; k++) {
		int little_cuts = 0;
		struct sluice_event_sink sink = { little_cut_fn, &little_cuts, "web" };

		setup_sc(&sc);
		sc.min_samples = k ? 40 : 20;
		memset(&in, 0, sizeof(in));
		service_ctl_init(&s, &sc, &cfg, 1, 0);
		assert_int_equal(s.mp.cut_samples, k ? 40 : 20);
		now = learn_50ms(&s, &sc, &in, 0);
		s.lim.est = 48;
		s.lim.limit = 48;
		for (int t = 0; t < 10; t++) {
			unordered(&in, 30, 30, 52000, 160000, 0, 50, 48);
			service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, &sink, &v, &opened);
		}
		if (k)
			assert_int_equal(little_cuts, 0);
		else
			assert_true(little_cuts > 0);
	}
}

/* The same median, a high mean from a few slow calls (a heavy tail, or the waits of units
 * admitted before a cut) but in-flight / throughput at its unloaded value: not a queue, the
 * limit is not cut. And the other way round: in-flight high, the responses as fast as ever
 * (in-flight holding units that are not the samples' work): not cut either. Nor with both
 * high while the limit refused only a few arrivals (a burst that met the threshold, not an
 * overload it holds back). */
static void test_limit_mean_needs_both_estimates(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0;
	int opened;
	(void)st;
	for (int k = 0; k < 3; k++) {
		setup_sc(&sc);
		memset(&in, 0, sizeof(in));
		service_ctl_init(&s, &sc, &cfg, 1, 0);
		now = learn_50ms(&s, &sc, &in, 0);
		s.lim.est = 24;
		s.lim.limit = 24;
		for (int t = 0; t < 50; t++) {
			if (k == 0)
				unordered(&in, 30, 6, 50000, 200000, 0, 50, 15);
			else if (k == 1)
				unordered(&in, 30, 0, 50000, 50000, 0, 50, 24);
			else   /* 1 refused of 31 arrivals a tick, both estimates at 1.6x */
				unordered(&in, 30, 8, 52000, 160000, 0, 1, 24);
			service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		}
		assert_int_equal(s.lim.cuts, 0);
		assert_true(v.limit >= 24);
	}
}

/* http: the completion counter also counts connections that end; a backend that closes idle
 * keep-alive connections while busy (Apache) reads more completions than responses while
 * overloaded. A cut that takes away queue leaves the responses' rate as it was: the evidence
 * floor must not read the connection ends that stopped as throughput lost and undo it. */
static void test_http_rate_is_responses(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0;
	uint32_t lim0;
	int opened;
	(void)st;
	setup_sc(&sc);
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	now = learn_50ms(&s, &sc, &in, now);
	s.lim.est = 28;
	s.lim.limit = 28;
	lim0 = 28;
	/* a queue served in order above the objective: 30 responses a tick at 80 ms with 24 in
	 * flight, and 10 connections ending a tick while the limit is still 28 */
	for (int t = 0; t < 60; t++) {
		uint32_t lim = s.lim.limit;
		int64_t inflight = lim < 24 ? (int64_t)lim : 24;

		unordered(&in, 30, 0, 75000, 75000, lim >= lim0 ? 10 : 0, 50, inflight);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	assert_true(s.lim.cuts > 0);
	assert_int_equal(s.lim.unhelpful, 0);
	assert_true(v.limit < lim0);
}

/* The wait before the server reads (control/waitknee.h) is a cumulative counter like the
 * others: its first reading is a snapshot (a history of long waits is not one tick's), a
 * tick without it leaves the window without a wait, and counters that went backwards (a new
 * probe) are not a delta. */
static void test_wait_counters_are_deltas(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0;
	int opened;
	(void)st;
	setup_sc(&sc);
	sc.latency_slo_ms = 30;
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	in.wait_have = 1;
	in.wait.count = 1000000;
	in.wait.sum_ns = 1000000ull * 100 * MS;     /* 100 ms each, before this sluiced */
	for (int t = 1; t <= 15; t++) {
		now += 100 * MS;
		traffic(&in, 0, 30, 0, 20000, 4);
		in.wait.count += 30;
		in.wait.sum_ns += 30 * 200000;          /* 0.2 ms each */
		service_ctl_tick(&s, &sc, &in, 0, now, NULL, &v, &opened);
	}
	assert_true(s.windows >= 1);
	assert_true(s.wk.last_wait_us > 150 && s.wk.last_wait_us < 250);
	/* the probe went away for a tick: the window under way has no wait */
	in.wait_have = 0;
	now += 100 * MS;
	traffic(&in, 0, 30, 0, 20000, 4);
	service_ctl_tick(&s, &sc, &in, 0, now, NULL, &v, &opened);
	assert_int_equal(s.win.wait_gap, 1);
	/* a new probe counts from zero: a snapshot again, never a negative delta */
	in.wait_have = 1;
	in.wait.count = 30;
	in.wait.sum_ns = 30 * 300000;
	for (int t = 0; t < 25; t++) {         /* the window with the gap, then a whole one */
		now += 100 * MS;
		traffic(&in, 0, 30, 0, 20000, 4);
		in.wait.count += 30;
		in.wait.sum_ns += 30 * 300000;
		service_ctl_tick(&s, &sc, &in, 0, now, NULL, &v, &opened);
		assert_true(s.win.wait_ns <= s.win.waits * 300000);
	}
	assert_true(s.wk.last_wait_us > 250 && s.wk.last_wait_us < 350);
	assert_int_equal(s.wk.trims, 0);
}

/* One 100 ms tick of 32 answers at 50 ms, each read by the server after `wait_ns` (counted
 * when `probe`); the verdict's flags. */
static uint32_t gate_tick(struct service_ctl *s, const struct service_conf *sc,
			  struct ctl_inputs *in, uint64_t *now, uint64_t wait_ns, int probe)
{
	struct sluice_verdict v;
	int opened;

	*now += 100 * MS;
	traffic(in, 3, 32, 0, 50000, 16);
	in->wait_have = probe;
	if (probe) {
		in->wait.count += 32;
		in->wait.sum_ns += 32 * wait_ns;
	}
	service_ctl_tick(s, sc, in, 0, *now, NULL, &v, &opened);
	return v.flags & SLUICE_VERDICT_READ_GATE;
}

/* The read gate is armed by the wait probe's evidence alone: an http service's tick whose
 * reads waited the gate's age (1 ms) or more on average arms it for 2 s after that tick. Never
 * while the server reads promptly, never without the probe, never for a tcp service. */
static void test_read_gate_armed_by_waits(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	uint64_t now = 0;
	(void)st;
	for (int proto = SLUICE_PROTO_HTTP; proto >= SLUICE_PROTO_TCP; proto--) {
		setup_sc(&sc);
		sc.protocol = proto;
		memset(&in, 0, sizeof(in));
		service_ctl_init(&s, &sc, &cfg, 1, now);
		for (int t = 0; t < 20; t++)            /* prompt reads: 0.9 ms */
			assert_false(gate_tick(&s, &sc, &in, &now, 900000, 1));
		/* one tick of 1 ms waits: armed from that tick on, for 2 s (the tick that ends
		 * them included: 20 ticks) */
		assert_int_equal(gate_tick(&s, &sc, &in, &now, 1000000, 1) != 0,
				 proto == SLUICE_PROTO_HTTP);
		for (int t = 1; t < 20; t++)
			assert_int_equal(gate_tick(&s, &sc, &in, &now, 200000, 1) != 0,
					 proto == SLUICE_PROTO_HTTP);
		assert_false(gate_tick(&s, &sc, &in, &now, 200000, 1));
		/* armed again, then the probe gone: disarmed at once */
		assert_int_equal(gate_tick(&s, &sc, &in, &now, 5000000, 1) != 0,
				 proto == SLUICE_PROTO_HTTP);
		assert_false(gate_tick(&s, &sc, &in, &now, 5000000, 0));
		/* long waits without the probe are no evidence */
		for (int t = 0; t < 3; t++)
			assert_false(gate_tick(&s, &sc, &in, &now, 5000000, 0));
		/* read_gate: off in the config: never armed, whatever the waits */
		sc.read_gate = READ_GATE_OFF;
		for (int t = 0; t < 3; t++)
			assert_false(gate_tick(&s, &sc, &in, &now, 5000000, 1));
	}
}

/* The read gate's refusals are not the limit's. A surge the gate sheds (its refusals counted as
 * headroom refusals by the data path, in-flight at the server's 16 workers, latency at the
 * baseline) leaves the limit where it was: raising a limit the gate refuses under moves
 * nothing, and leaves it far above the workers for whatever comes after the gate. The same
 * refusals made by the limit's thresholds (no gate counts) do raise it: the probe's rule. */
static void test_read_gate_refusals_leave_the_limit(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0;
	uint32_t before, most;
	int opened;
	(void)st;
	setup_sc(&sc);
	for (int gate = 1; gate >= 0; gate--) {
		memset(&in, 0, sizeof(in));
		in.gate_have = 1;                         /* read from the first tick (sluiced) */
		service_ctl_init(&s, &sc, &cfg, 1, 0);
		now = learn_50ms(&s, &sc, &in, 0);
		before = most = s.lim.limit;
		assert_true(s.calm_set);                  /* a limit set in calm: fast growth may */
		for (int t = 0; t < 100; t++) {           /* 10 s: 30 answered, 64 refused a tick */
			traffic(&in, 3, 30, 0, 50000, 14);
			in.stats[3].arrivals += 64;
			in.stats[3].rejected[SLUICE_REJ_HEADROOM] += 64;
			in.gate_refused += gate ? 64 : 0;
			service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
			if (s.lim.limit > most)
				most = s.lim.limit;
		}
		if (gate)
			assert_int_equal(most, before);
		else
			assert_true(most > before);
	}
}

/* One 100 ms tick of 32 answers of L3 at `us` each, `inflight` in flight, each measured as
 * having waited `wait_ns` before the server read it; the controller's events to sink. */
static void wait_tick_to(struct service_ctl *s, const struct service_conf *sc,
			 struct ctl_inputs *in, uint64_t *now, uint64_t us, int64_t inflight,
			 uint64_t wait_ns, const struct sluice_event_sink *sink)
{
	struct sluice_verdict v;
	int opened;

	*now += 100 * MS;
	traffic(in, 3, 32, 0, us, inflight);
	in->wait.count += 32;
	in->wait.sum_ns += 32 * wait_ns;
	service_ctl_tick(s, sc, in, 0, *now, sink, &v, &opened);
}

/* ... with no sink. */
static void wait_tick(struct service_ctl *s, const struct service_conf *sc, struct ctl_inputs *in,
		      uint64_t *now, uint64_t us, int64_t inflight, uint64_t wait_ns)
{
	wait_tick_to(s, sc, in, now, us, inflight, wait_ns, NULL);
}

/* A window whose measured waits show a deep queue (half the requests' time waiting) decides
 * before it is full: the first trim comes within a few ticks of the queue, not at the window's
 * end; the window that judges the trim runs whole (it holds the backlog's drain). A shallow
 * queue waits for the whole window: a short window's mean wait is noisier (a closed loop's
 * clients connecting at once read 11.7 ms of 55 in one), and the whole window still trims. */
static void test_wait_decides_early(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	uint64_t now = 0, trim_at = 0, w0;
	uint32_t before;
	(void)st;
	setup_sc(&sc);
	sc.latency_slo_ms = 150;
	for (int deep = 1; deep >= 0; deep--) {
		memset(&in, 0, sizeof(in));
		service_ctl_init(&s, &sc, &cfg, 1, 0);
		in.wait_have = 1;
		now = 0;
		trim_at = 0;
		/* calm: 0.2 ms waits, 32 answers a tick at 50 ms, 16 in flight */
		for (int t = 1; t <= 9; t++)
			wait_tick(&s, &sc, &in, &now, 50000, 16, 200000);
		assert_int_equal(s.windows, 0);   /* nothing closed a window early */
		for (int t = 0; t < 11; t++)      /* finish whole windows in calm */
			wait_tick(&s, &sc, &in, &now, 50000, 16, 200000);
		/* up to the end of a window: the next whole one ends 10 ticks on */
		w0 = s.windows;
		for (int t = 0; t < 15 && s.windows == w0; t++)
			wait_tick(&s, &sc, &in, &now, 50000, 16, 200000);
		assert_int_equal(s.windows, w0 + 1);
		assert_int_equal(s.wk.trims, 0);
		before = s.lim.limit;
		/* a queue: deep, 28 in flight and each request waiting 45 ms of 90 before the
		 * server reads it; or shallow, 24 in flight waiting 8 ms of 58 */
		for (int t = 1; t <= 9 && !trim_at; t++) {
			if (deep)
				wait_tick(&s, &sc, &in, &now, 90000, 28, 45000000);
			else
				wait_tick(&s, &sc, &in, &now, 58000, 24, 8000000);
			if (s.wk.trims)
				trim_at = (uint64_t)t;
		}
		if (!deep) {
			/* no early decision; the whole window (1 s after the last) trims */
			assert_int_equal(trim_at, 0);
			assert_int_equal(s.windows, w0 + 1);
			for (int t = 10; t <= 14 && !trim_at; t++) {
				wait_tick(&s, &sc, &in, &now, 58000, 24, 8000000);
				if (s.wk.trims)
					trim_at = (uint64_t)t;
			}
			assert_true(trim_at >= 10);
			break;
		}
		/* within 0.6 s of the queue, where the whole window ends after 1 s */
		assert_true(trim_at >= 1 && trim_at <= 6);
		assert_true(s.lim.limit < before && s.lim.limit < 28);  /* below what was in flight */
		/* the judgement's window is not closed early however long the wait stays */
		w0 = s.windows;
		for (int t = 1; t <= 8; t++) {
			wait_tick(&s, &sc, &in, &now, 90000, 20, 45000000);
			assert_int_equal(s.windows, w0);
		}
	}
}

/* The last window event caught, NULL when none. */
static const struct sluice_event *last_window(const struct evcap *c)
{
	for (int i = (c->n < EVCAP_MAX ? c->n : EVCAP_MAX) - 1; i >= 0; i--)
		if (!strcmp(c->ev[i].why, "window"))
			return &c->ev[i];
	return NULL;
}

static double ev_num(const struct sluice_event *ev, const char *key)
{
	for (int i = 0; i < ev->n_nums; i++)
		if (!strcmp(ev->num[i].key, key))
			return ev->num[i].val;
	fail_msg("event %s has no %s", ev->why, key);
	return 0;
}

/* Every decided window of an adaptive limit is one debug event (why `window`) with what it saw
 * and did, the wait -1 while the probe measured none, its mean once it did; a trim's window
 * says so (wait_verdict 2, limit_to below limit_from). */
static void test_window_event(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	struct evcap c;
	struct sluice_event_sink sink = evcap_sink(&c, "web");
	const struct sluice_event *ev;
	uint64_t now = 0, w0;
	int opened;
	(void)st;
	setup_sc(&sc);
	sc.latency_slo_ms = 150;
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	/* no probe: windows decide on latency alone, their wait unmeasured */
	for (int t = 0; t < 25; t++) {
		now += 100 * MS;
		traffic(&in, 3, 32, 0, 50000, 16);
		service_ctl_tick(&s, &sc, &in, 0, now, &sink, &v, &opened);
	}
	assert_true(s.windows >= 1);
	ev = last_window(&c);
	assert_non_null(ev);
	assert_int_equal(ev->level, SLUICE_EV_DEBUG);
	assert_string_equal(ev->service, "web");
	assert_true(ev_num(ev, "wait_us") == -1);
	assert_true(ev_num(ev, "limit_to") == s.lim.limit);
	assert_true(ev_num(ev, "peak_inflight") == 16);
	assert_true(ev_num(ev, "samples") > 0);
	/* the probe: 0.2 ms waits in calm, then a queue of 8 ms of 58 that the window trims */
	in.wait_have = 1;
	for (int t = 0; t < 20; t++)
		wait_tick_to(&s, &sc, &in, &now, 50000, 16, 200000, &sink);
	ev = last_window(&c);
	assert_true(ev_num(ev, "waits") >= 20);
	assert_true(ev_num(ev, "wait_us") > 150 && ev_num(ev, "wait_us") < 250);
	assert_true(ev_num(ev, "allowance_us") >= 500);
	w0 = s.wk.trims;
	for (int t = 0; t < 15 && s.wk.trims == w0; t++)
		wait_tick_to(&s, &sc, &in, &now, 58000, 24, 8000000, &sink);
	assert_int_equal(s.wk.trims, w0 + 1);
	ev = last_window(&c);
	assert_true(ev_num(ev, "wait_verdict") == SLUICE_WAITKNEE_TRIM);
	assert_true(ev_num(ev, "limit_to") < ev_num(ev, "limit_from"));
	assert_true(ev_num(ev, "wait_us") > 7000 && ev_num(ev, "wait_us") < 9000);
	assert_non_null(strstr(evcap_last_json(&c), "\"why\""));
	/* a fixed limit has no windows to explain */
	sc.limit_fixed = 20;
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	sink = evcap_sink(&c, "web");
	for (int t = 0; t < 25; t++)
		wait_tick_to(&s, &sc, &in, &now, 50000, 16, 200000, &sink);
	assert_null(last_window(&c));
}

/* An L3 client has the application fail its requests at will (500s at once, 6 of every 11
 * of the service's calls), L0's succeed: the breaker, which refuses every class when open,
 * stays closed and L0 keeps its full admission. Without the breaker's counts by class it
 * opened 8.5 s into the attack and refused L0 with the rest. */
static void test_lower_class_errors_leave_the_breaker_closed(void **st)
{
	struct service_conf sc;
	struct service_ctl s;
	struct ctl_inputs in;
	struct sluice_verdict v;
	uint64_t now = 0;
	int opened, ever = 0;
	(void)st;
	setup_sc(&sc);
	memset(&in, 0, sizeof(in));
	service_ctl_init(&s, &sc, &cfg, 1, 0);
	for (int t = 1; t <= 100; t++) {          /* calm: L0 at 50/s, 5 ms */
		traffic(&in, 0, 5, 0, 5000, 1);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
	}
	for (int t = 1; t <= 300; t++) {          /* 30 s: L3 at 60/s, every one a 500 */
		traffic(&in, 0, 5, 0, 5000, 1);
		traffic(&in, 3, 6, 6, 1000, 1);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		ever |= opened;
	}
	assert_false(ever);
	assert_int_equal(v.breaker_state, SLUICE_BREAKER_CLOSED);
	assert_true(s.brk.win_error_rate > 0.5);  /* the service's own rate is over the threshold */
	/* and when L0 fails too, it is the backend: the breaker opens */
	for (int t = 1; t <= 300 && !ever; t++) {
		traffic(&in, 0, 5, 5, 5000, 1);
		traffic(&in, 3, 6, 6, 1000, 1);
		service_ctl_tick(&s, &sc, &in, 0, now += 100 * MS, NULL, &v, &opened);
		ever |= opened;
	}
	assert_true(ever);
	assert_int_equal(v.breaker_state, SLUICE_BREAKER_OPEN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_tick_is_a_snapshot),
		cmocka_unit_test(test_window_event),
		cmocka_unit_test(test_listen_queue_rule),
		cmocka_unit_test(test_listen_queue_sheds_a_blind_backend),
		cmocka_unit_test(test_state_export_import),
		cmocka_unit_test(test_import_keeps_the_l0_floor),
		cmocka_unit_test(test_import_bounds_an_open_breaker),
		cmocka_unit_test(test_import_bounds_the_evidence_floor),
		cmocka_unit_test(test_import_drops_breaker_buckets_ahead),
		cmocka_unit_test(test_import_keeps_a_jitter_seed),
		cmocka_unit_test(test_import_checks_the_baseline),
		cmocka_unit_test(test_slot_carries_the_cascade),
		cmocka_unit_test(test_old_entry_keeps_only_its_baselines),
		cmocka_unit_test(test_import_relearns_a_baseline_not_a_number),
		cmocka_unit_test(test_skipped_ticks_are_not_active_time),
		cmocka_unit_test(test_clock_leap_is_not_a_rate_fall),
		cmocka_unit_test(test_slot_reports_shedding_and_recovery),
		cmocka_unit_test(test_no_freeze_when_cutting_does_not_help),
		cmocka_unit_test(test_dead_time_after_a_cut),
		cmocka_unit_test(test_l0_alone_not_cut_unless_saturated),
		cmocka_unit_test(test_tcp_l0_not_held_to_the_limit),
		cmocka_unit_test(test_l0_not_cut_for_a_few_waiting_connections),
		cmocka_unit_test(test_headroom_caps_and_status),
		cmocka_unit_test(test_l0_room_under_adaptive_limit),
		cmocka_unit_test(test_l0_room_caps_unchanged),
		cmocka_unit_test(test_drain_keeps_the_l0_cap),
		cmocka_unit_test(test_reload_bounds_the_drain),
		cmocka_unit_test(test_reload_shortens_the_floor_hold),
		cmocka_unit_test(test_slow_call_below_learned_objective),
		cmocka_unit_test(test_quantiles_held_in_calm),
		cmocka_unit_test(test_limit_sees_an_unordered_queue),
		cmocka_unit_test(test_throughput_cut_needs_min_samples),
		cmocka_unit_test(test_recovery_counts_samples_within),
		cmocka_unit_test(test_limit_mean_needs_both_estimates),
		cmocka_unit_test(test_http_rate_is_responses),
		cmocka_unit_test(test_wait_counters_are_deltas),
		cmocka_unit_test(test_read_gate_armed_by_waits),
		cmocka_unit_test(test_read_gate_refusals_leave_the_limit),
		cmocka_unit_test(test_wait_decides_early),
		cmocka_unit_test(test_lower_class_errors_leave_the_breaker_closed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
