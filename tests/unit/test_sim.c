// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The controller in closed loop with a simulated backend (tests/unit/sim.h), on a fake clock:
 * overload with closed-loop clients, low traffic, an always-slow backend, a fail-fast
 * backend, a restart in the middle of an overload, a step of the offered load, a short blip,
 * L0 under a cut limit on a loaded host and an L0 flood; with the wait before the server reads:
 * a first start during an overload, a server that reads late, the bench's closed loop and step.
 * `test_sim report` prints the comparison of the limit algorithms (docs/CONTROLLER.md) instead
 * of running the tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "sim.h"

#define MS 1000ull               /* sim time is in microseconds */
#define S  1000000ull
#define ALL 0xf

static struct sim sim;           /* large (the queue): static */

/* The simulated service with the limit bounds a user writes on day one ({ min: 4, max: 512 }),
 * offered RATE; the caller adds what else differs, then starts it. */
static void sim_init_dayone(int workers, double service_ms, sim_rate_fn rate)
{
	sim_init(&sim, workers, service_ms);
	sim.sc.limit_min = 4;
	sim.sc.limit_max = 512;
	sim.rate = rate;
}

/* ---- scenarios ---- */

enum { ALG_GRADIENT, ALG_AIMD, ALG_CLASSIC };
static const char *const alg_names[] = { "gradient", "aimd (gated)", "classic aimd" };

static void use_alg(struct sim *s, int alg)
{
	s->sc.limit_algorithm = alg == ALG_GRADIENT ? LIMIT_ALG_GRADIENT : LIMIT_ALG_AIMD;
	sim_start(s);
	if (alg == ALG_AIMD) {                  /* `aimd` from a config is the classic rule */
		s->ctl.mp.aimd_gate = 0.8;
		s->ctl.mp.classic_band = 0;
	}
}

/* Busy fraction of the workers between two readings of busy_us. */
static double util(const struct sim *s, uint64_t busy0, uint64_t dt)
{
	return (double)(s->busy_us - busy0) / ((double)s->workers * (double)dt);
}

struct closed_result { double p50, p99, util, obj_ms, shed_frac; uint32_t limit; };
static double late_read_ms;      /* closed_loop's server reads this late (0: at once) */
static uint64_t last_undone;     /* the wait rule's undone trims in the last closed_loop */

/* 8 workers x 20 ms (400/s). 10 s of 4 clients (the baseline), then 200 clients without think
 * time for 60 s; measured over the last 30 s. */
static struct closed_result closed_loop(int alg, double target_ms)
{
	struct closed_result r;
	uint64_t b0, a0 = 0, adm0 = 0;
	int c;

	sim_init(&sim, 8, 20);
	sim.read_delay_ms = late_read_ms;
	sim.clients = 4;
	sim.think_ms = 20;
	sim.sc.target_latency_ms = target_ms;
	use_alg(&sim, alg);
	sim_run(&sim, 10 * S);
	sim.clients = 200;
	sim.think_ms = 0;
	sim_run(&sim, 40 * S);
	b0 = sim.busy_us;
	for (c = 0; c < 4; c++) {
		a0 += sim.in.stats[c].arrivals;
		adm0 += sim.in.stats[c].admitted;
	}
	sim_run(&sim, 70 * S);
	r.p50 = sim_quantile(&sim, 40 * S, 70 * S, ALL, 0.5, NULL) / 1000;
	r.p99 = sim_quantile(&sim, 40 * S, 70 * S, ALL, 0.99, NULL) / 1000;
	r.util = util(&sim, b0, 30 * S);
	r.obj_ms = sim.ctl.objective_us / 1000;
	{
		uint64_t a = 0, adm = 0;
		for (c = 0; c < 4; c++) {
			a += sim.in.stats[c].arrivals;
			adm += sim.in.stats[c].admitted;
		}
		r.shed_frac = a > a0 ? 1 - (double)(adm - adm0) / (double)(a - a0) : 0;
	}
	r.limit = sim.v.limit;
	last_undone = sim.ctl.wk.undone;
	sim_free(&sim);
	return r;
}

/* closed_loop (gradient, the objective from the baseline) behind a server that reads each
 * request 5 ms late, with or without the wait; *undone: trims the wait rule undid. */
static struct closed_result closed_loop_late(int wait, uint64_t *undone)
{
	struct closed_result r;
	int saved = sim_wait_probe;

	sim_wait_probe = wait;
	late_read_ms = 5;
	r = closed_loop(ALG_GRADIENT, 0);
	*undone = last_undone;
	late_read_ms = 0;
	sim_wait_probe = saved;
	return r;
}

static void test_closed_loop_overload(void **st)
{
	struct closed_result r = closed_loop(ALG_GRADIENT, 0);
	(void)st;
	/* the backend stays busy, the admitted latency stays within the objective */
	assert_true(r.obj_ms > 20 && r.obj_ms < 27);     /* 1.2 x a baseline of ~20 ms */
	assert_true(r.util >= 0.97);
	assert_true(r.p50 <= r.obj_ms);
	assert_true(r.shed_frac > 0.5);                   /* and it does shed */
}

/* The overload that froze the old AIMD: a 40 ms target, no calm phase, 200 clients. Every
 * rule, the classic one `aimd` selects too: it halves above the target and grows below 0.7 x
 * it, so its latency is brought back with the backend kept busy. */
static void test_no_freeze(void **st)
{
	(void)st;
	for (int alg = ALG_GRADIENT; alg <= ALG_CLASSIC; alg++) {
		struct closed_result r = closed_loop(alg, 40);
		assert_true(r.p50 <= 40);
		assert_true(r.util >= 0.9);
		assert_true(r.shed_frac > 0.5);
	}
}

/* 1 request/s, every third one slow (20 ms / 500 ms), for 300 s. */
static double svc_one_in_three(struct sim *s, uint64_t t, int *err)
{
	static uint64_t n;
	(void)s; (void)t; (void)err;
	return ++n % 3 == 0 ? 500 : 20;
}

static double rate_1ps(struct sim *s, uint64_t t, int c)
{
	(void)s; (void)t;
	return c == 2 ? 1.0 : 0;
}

static void test_low_traffic(void **st)
{
	int seen_thin = 0;
	(void)st;
	sim_init(&sim, 8, 20);
	sim.svc = svc_one_in_three;
	sim.jitter = 0;
	sim.rate = rate_1ps;
	sim_start(&sim);
	for (int i = 1; i <= 300; i++) {
		sim_run(&sim, (uint64_t)i * S);
		seen_thin |= sim.ctl.signal == SLUICE_SIGNAL_THIN;
	}
	/* a window waits for 20 samples (20 s) and then sees the median: 20 ms */
	assert_true(seen_thin);
	assert_true(sim.ctl.windows >= 10);
	assert_true(sim.ctl.base.value_us > 15000 && sim.ctl.base.value_us < 25000);
	assert_int_equal(sim.ctl.lim.cuts, 0);            /* never cut for latency */
	assert_true(sim.min_limit >= 16);                 /* following demand stops at 4 x 4 */
	assert_int_equal(sim.min_admit[2], SLUICE_PROB_ONE);
	assert_int_equal(sim.in.stats[2].rejected[SLUICE_REJ_HEADROOM], 0);
	sim_free(&sim);
}

/* A backend that is always slow (500 ms) at half its capacity: that is its baseline. */
static double rate_half_slow(struct sim *s, uint64_t t, int c)
{
	(void)s; (void)t;
	return c == 1 ? 8.0 : 0;                          /* 16/s capacity (8 x 500 ms) */
}

static void test_always_slow(void **st)
{
	(void)st;
	sim_init(&sim, 8, 500);
	sim.rate = rate_half_slow;
	sim_start(&sim);
	sim_run(&sim, 120 * S);
	assert_true(sim.ctl.base.value_us > 400000 && sim.ctl.base.value_us < 600000);
	assert_int_equal(sim.min_admit[1], SLUICE_PROB_ONE);
	assert_int_equal(sim.in.stats[1].rejected[SLUICE_REJ_HEADROOM], 0);
	assert_true(sim.min_limit > sim.ctl.mp.min);
	sim_free(&sim);
}

/* 20 s of fast errors (0.3 ms), then healthy at 50 ms. */
static double svc_fail_fast(struct sim *s, uint64_t t, int *err)
{
	(void)s;
	if (t < 20 * S) {
		*err = 1;
		return 0.3;
	}
	return 50;
}

static double rate_100(struct sim *s, uint64_t t, int c)
{
	(void)s; (void)t;
	return c == 2 ? 100.0 : 0;
}

static void test_fail_fast_backend(void **st)
{
	(void)st;
	sim_init(&sim, 16, 50);
	sim.svc = svc_fail_fast;
	sim.rate = rate_100;
	sim_start(&sim);
	sim_run(&sim, 20 * S);
	assert_true(sim.ctl.base.value_us == 0);          /* errors taught nothing */
	assert_true(sim.ctl.objective_us == 0);
	sim_run(&sim, 90 * S);
	/* the breaker opened and closed again; the baseline is the healthy 50 ms */
	assert_true(sim.ctl.brk.opens >= 1);
	assert_int_equal(sim.ctl.brk.state, SLUICE_BREAKER_CLOSED);
	assert_true(sim.ctl.base.value_us > 40000 && sim.ctl.base.value_us < 60000);
	assert_true(sim.ctl.objective_us > 48000 && sim.ctl.objective_us < 72000);
	sim_free(&sim);
}

/* Restart in the middle of an overload: export, a new controller imports, the counters go on
 * (cumulative), the first tick is a snapshot. */
static void test_restart_mid_overload(void **st)
{
	struct sluice_ctl_state cs;
	struct sluice_verdict before;
	uint32_t limit;
	double obj, median;
	(void)st;
	sim_init(&sim, 8, 20);
	sim.clients = 4;
	sim.think_ms = 20;
	sim_start(&sim);
	sim_run(&sim, 10 * S);
	sim.clients = 200;
	sim.think_ms = 0;
	sim_run(&sim, 30 * S);
	before = sim.v;
	limit = sim.ctl.lim.limit;
	obj = sim.ctl.objective_us;
	assert_true(limit < 20);                          /* the overload is being held */
	ctl_state_export(&sim.ctl, sim.now_us * 1000, &cs);
	/* plenty of old errors in the cumulative counters: not one tick's worth */
	sim.in.stats[0].errors += 100000;
	sim.in.stats[0].completed += 100000;
	service_ctl_init(&sim.ctl, &sim.sc, &sim.cfg, 99, sim.now_us * 1000);
	assert_int_equal(ctl_state_import(&sim.ctl, &cs, sim.now_us * 1000), 0);
	sim_run(&sim, 30 * S + SIM_TICK_US);
	/* the first tick wrote the imported state, not a cold start */
	assert_int_equal(sim.v.limit, limit);
	assert_memory_equal(sim.v.shed_prob, before.shed_prob, sizeof(before.shed_prob));
	assert_true(sim.ctl.objective_us == obj);
	sim_run(&sim, 40 * S);
	assert_int_equal(sim.ctl.brk.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(sim.ctl.brk.opens, 0);
	median = sim_quantile(&sim, 30 * S, 40 * S, ALL, 0.5, NULL);
	assert_true(median <= obj); /* the objective is on the median */
	assert_true(sim.min_limit >= sim.ctl.mp.min && sim.v.limit < 20);
	/* a version this build does not know is refused */
	cs.version = 99;
	assert_int_equal(ctl_state_import(&sim.ctl, &cs, sim.now_us * 1000), -1);
	sim_free(&sim);
}

/* Open loop, mixed classes (10/20/30/40 %): 0.5x for 30 s, 4x for 20 s, 0.5x for 30 s. */
static double step_x;
static int step_workers = 8;
static double rate_step(struct sim *s, uint64_t t, int c)
{
	static const double share[4] = { 0.1, 0.2, 0.3, 0.4 };
	double x = t < 30 * S ? 0.5 : t < 50 * S ? step_x : 0.5;
	(void)s;
	return 50.0 * step_workers * x * share[c];
}

struct step_result {
	double settle_s;        /* step -> admitted p50 within the objective in every later 1 s */
	double full_s;          /* surge end -> full admission (see step_load) */
	double surge_util, surge_p99_ms, obj_ms, l0_ok;
	uint32_t min_l3_pct;
};

static uint64_t refused(const struct sim *s)
{
	uint64_t n = 0;
	for (int c = 0; c < 4; c++)
		n += s->in.stats[c].arrivals - s->in.stats[c].admitted;
	return n;
}

static uint64_t arrived(const struct sim *s)
{
	uint64_t n = 0;
	for (int c = 0; c < 4; c++)
		n += s->in.stats[c].arrivals;
	return n;
}

static struct step_result step_load(int alg, double x)
{
	struct step_result r = { 0 };
	uint64_t b0, t, last_bad = 30 * S, last_ref = 50 * S, l0a, l0r;
	double obj;

	step_x = x;
	sim_init(&sim, step_workers, 20);
	sim.rate = rate_step;
	use_alg(&sim, alg);
	sim_run(&sim, 30 * S);
	obj = sim.ctl.objective_us;
	b0 = sim.busy_us;
	l0a = sim.in.stats[0].arrivals;
	l0r = sim.in.stats[0].arrivals - sim.in.stats[0].admitted;
	sim_run(&sim, 50 * S);
	r.surge_util = util(&sim, b0, 20 * S);
	r.l0_ok = 1 - (double)(sim.in.stats[0].arrivals - sim.in.stats[0].admitted - l0r) /
		      (double)(sim.in.stats[0].arrivals - l0a);
	/* full admission: the ladder admits everything and no second after it refuses more than
	 * 0.5 % of the arrivals (a unit refused by a burst margin now and then is headroom at
	 * work, not shedding) */
	for (t = 50 * S; t < 80 * S; t += S) {
		uint64_t a0 = arrived(&sim), f0 = refused(&sim);
		int full = 1;
		sim_run(&sim, t + S);
		for (int c = 0; c < 4; c++)
			full &= sluice_prob_complement(sim.v.shed_prob[c]) == SLUICE_PROB_ONE;
		if (!full || (double)(refused(&sim) - f0) > 0.005 * (double)(arrived(&sim) - a0))
			last_ref = t + S;
	}
	/* the objective is on the median (docs/CONTROLLER.md): the admitted median of every
	 * second (by admission time); the p99 over the surge is reported */
	for (t = 30 * S; t < 50 * S; t += S / 2)
		if (sim_quantile(&sim, t, t + S, ALL, 0.5, NULL) > obj)
			last_bad = t + S / 2;
	r.settle_s = (double)(last_bad - 30 * S) / S;
	r.full_s = (double)(last_ref - 50 * S) / S;
	r.surge_p99_ms = sim_quantile(&sim, 32 * S, 50 * S, ALL, 0.99, NULL) / 1000;
	r.obj_ms = obj / 1000;
	r.min_l3_pct = (uint32_t)((uint64_t)sim.min_admit[3] * 100 / SLUICE_PROB_ONE);
	sim_free(&sim);
	return r;
}

static void test_step_load(void **st)
{
	struct step_result r;
	(void)st;
	step_workers = 16;                /* 800/s, like the 16-worker httpd of the benchmarks */
	r = step_load(ALG_GRADIENT, 4);
	step_workers = 8;
	print_message("# step load: settle %.2f s, full %.2f s, util %.3f, L0 ok %.4f, surge p99 "
		      "%.1f ms, objective %.1f ms\n", r.settle_s, r.full_s, r.surge_util, r.l0_ok,
		      r.surge_p99_ms, r.obj_ms);
	assert_true(r.settle_s <= 1.0);
	assert_true(r.full_s <= 10.0);
	assert_true(r.surge_util >= 0.94);
	assert_true(r.l0_ok >= 0.999);
	assert_true(r.surge_p99_ms <= 1.5 * r.obj_ms);
}

/* 0.8x load; the backend's service time goes 20 -> 200 ms for 0.3 s at 30 s. */
static double svc_blip(struct sim *s, uint64_t t, int *err)
{
	(void)s; (void)err;
	return t >= 30 * S && t < 30 * S + 300 * MS ? 200 : 20;
}

static double rate_08(struct sim *s, uint64_t t, int c)
{
	(void)s; (void)t;
	return 400.0 * 0.8 / 4;
}

static void test_blip(void **st)
{
	(void)st;
	sim_init(&sim, 8, 20);
	sim.svc = svc_blip;
	sim.rate = rate_08;
	sim_start(&sim);
	sim_run(&sim, 60 * S);
	assert_true(sim.min_admit[3] > SLUICE_PROB_ONE / 4);
	/* and everything is back to full admission */
	for (int c = 0; c < 4; c++)
		assert_int_equal(sluice_prob_complement(sim.v.shed_prob[c]), SLUICE_PROB_ONE);
	sim_free(&sim);
}

/* ---- the comparison printed for docs/CONTROLLER.md ---- */

/* A cold start into a closed-loop overload, as the HTTP bench meets it: 16 workers x 50 ms
 * (320/s), the day-one limit { min: 4, max: 512 } (start 154, far above the knee), 2 s at
 * 0.5x open loop (the baseline), then 56 closed-loop L3 clients (3.5x the workers, no think
 * time) for 7 s. settle = from the step until the admitted median of a 250 ms first comes
 * within the objective; also the median of everything admitted from then on, the limit at
 * the end and the busy fraction of the 7 s. */
struct cold_result { double settle_s, util, obj_ms, p50_after; uint32_t limit; };

static double rate_warmup(struct sim *s, uint64_t t, int c)
{
	(void)s;
	return c == 3 && t < 2 * S ? 160.0 : 0;
}

static struct cold_result cold_start(void)
{
	struct cold_result r = { 0 };
	const uint64_t step = 2 * S, end = 9 * S, q = 250 * MS;
	uint64_t b0;

	sim_init_dayone(16, 50, rate_warmup);
	sim.client_cls = 3;
	sim_start(&sim);
	sim_run(&sim, step);
	sim.clients = 56;
	for (int i = 0; i < sim.clients; i++)
		sim.next_send[i] = step;
	b0 = sim.busy_us;
	sim_run(&sim, end);
	r.obj_ms = sim.ctl.objective_us / 1000;
	r.settle_s = (double)(end - step) / S;
	for (uint64_t t = step; t < end; t += q) {
		size_t n;
		double p50 = sim_quantile(&sim, t, t + q, ALL, 0.5, &n) / 1000;

		if (n && p50 <= r.obj_ms) {
			r.settle_s = (double)(t - step) / S;
			break;
		}
	}
	r.p50_after = sim_quantile(&sim, step + (uint64_t)(r.settle_s * S), end, ALL, 0.5, NULL) / 1000;
	r.util = util(&sim, b0, end - step);
	r.limit = sim.v.limit;
	sim_free(&sim);
	return r;
}

static void test_cold_start(void **st)
{
	(void)st;
	for (int i = 0; i < 3; i++) {
		struct cold_result r;

		sim_seed = 42 + (uint64_t)i;
		r = cold_start();
		print_message("# cold start: settle %.2f s, p50 after %.1f ms, util %.3f, limit %u, "
			      "objective %.1f ms\n", r.settle_s, r.p50_after, r.util, r.limit, r.obj_ms);
		assert_true(r.obj_ms > 50 && r.obj_ms < 70);
		assert_true(r.settle_s <= 1.25);
		assert_true(r.p50_after <= r.obj_ms);
		assert_true(r.util >= 0.9);
	}
	sim_seed = 42;
}

/* The bench's step (tools/bench.sh, BENCH_SCENARIOS=step) on the fake clock: 16 workers x 50 ms
 * (320/s, like its Apache), the day-one limit { min: 4, max: 512 }, open loop with L0 4 % and L3
 * 96 % of the arrivals: 0.5x for 4 s, 4x for 7 s, 0.5x for 11 s. Measured as the bench does,
 * in slices of 250 ms by arrival time: p99_back = from the step to the first slice from whose
 * start the p99 of the requests admitted in the next second is within the objective, 1.2 x the
 * p99 of the 2 s before the step (p99_rest: of everything admitted from then to the end of the
 * surge, reported); full = from the end of the surge to the first slice after which no slice
 * refuses anything. */
struct bench_step_result { double p99_back_s, p99_rest_ms, p99_1s_ms, full_s, obj_ms, surge_util,
				 l0_ok, l0_p99_x; uint32_t calm_limit, surge_max_limit; };

static double rate_bench_step(struct sim *s, uint64_t t, int c)
{
	double x = t < 4 * S ? 0.5 : t < 11 * S ? 4 : 0.5;
	(void)s;
	return c == 0 ? 320 * x * 0.04 : c == 3 ? 320 * x * 0.96 : 0;
}

static struct bench_step_result bench_step(void)
{
	struct bench_step_result r = { 0 };
	const uint64_t step = 4 * S, end = 11 * S, post = 22 * S, q = 250 * MS;
	uint64_t t, b0, l0a, l0adm, last_ref = end;
	double l0_base;

	sim_init_dayone(16, 50, rate_bench_step);
	sim_start(&sim);
	sim_run(&sim, step);
	r.obj_ms = 1.2 * sim_quantile(&sim, step - 2 * S, step, ALL, 0.99, NULL) / 1000;
	l0_base = sim_quantile(&sim, 0, step, 1, 0.99, NULL);
	b0 = sim.busy_us;
	l0a = sim.in.stats[0].arrivals;
	l0adm = sim.in.stats[0].admitted;
	r.calm_limit = sim.v.limit;
	sim.max_limit = 0;
	sim_run(&sim, end);
	r.surge_max_limit = sim.max_limit;
	r.surge_util = util(&sim, b0, end - step);
	r.l0_ok = (double)(sim.in.stats[0].admitted - l0adm) / (double)(sim.in.stats[0].arrivals - l0a);
	for (t = end; t < post; t += q) {
		uint64_t f0 = refused(&sim);
		sim_run(&sim, t + q);
		if (refused(&sim) != f0)
			last_ref = t + q;
	}
	r.full_s = (double)(last_ref - end) / S;
	r.p99_back_s = (double)(end - step) / S;
	for (t = step; t + S <= end; t += q)
		if (sim_quantile(&sim, t, t + S, ALL, 0.99, NULL) <= r.obj_ms * 1000) {
			r.p99_back_s = (double)(t - step) / S;
			break;
		}
	r.p99_rest_ms = sim_quantile(&sim, step + (uint64_t)(r.p99_back_s * S), end, ALL, 0.99,
				     NULL) / 1000;
	r.p99_1s_ms = sim_quantile(&sim, step + S, end, ALL, 0.99, NULL) / 1000;
	r.l0_p99_x = sim_quantile(&sim, step, end, 1, 0.99, NULL) / l0_base;
	sim_free(&sim);
	return r;
}

static void test_bench_step(void **st)
{
	(void)st;
	for (int i = 0; i < 3; i++) {
		struct bench_step_result r;

		sim_seed = 42 + (uint64_t)i;
		r = bench_step();
		print_message("# bench step: p99 back %.2f s (p99 from then %.1f ms), p99 from 1 s "
			      "after the step %.1f ms, full admission %.2f s, objective %.1f ms, util "
			      "%.3f, L0 ok %.4f, L0 p99 %.2fx, limit %u before the step, <= %u in "
			      "the surge\n",
			      r.p99_back_s, r.p99_rest_ms, r.p99_1s_ms, r.full_s, r.obj_ms,
			      r.surge_util, r.l0_ok, r.l0_p99_x, r.calm_limit, r.surge_max_limit);
		/* the calm limit followed the demand (0.5x peaks at 11-15 in flight), and fast
		 * growth did not take the surge for a healthy rise (without its in-flight / rate
		 * test it did, 23 -> 28, and L0's p99 rose from 1.34x to 1.69x); a window's probe
		 * near the knee adds 1 */
		assert_true(r.calm_limit <= 32);
		assert_true(r.surge_max_limit <= r.calm_limit + 2);
		/* the admitted p99 from a second after the step on: at the aim the gradient holds
		 * the median 10 % above the baseline, which puts the p99 about at the bench's
		 * objective (1.2 x the p99 before the step); the first second within it
		 * (p99_back) is then a matter of luck, and is reported, not asserted */
		assert_true(r.p99_1s_ms <= 1.1 * r.obj_ms);
		assert_true(r.full_s <= 10.0);
		assert_true(r.surge_util >= 0.95);
		assert_true(r.l0_ok >= 0.999);
		/* L0 no longer waits behind a surge let in by the cold start's limit (9.2-9.5x
		 * before the calm limit followed the demand) */
		assert_true(r.l0_p99_x <= 2.0);
	}
	sim_seed = 42;
}

/* The bench's closed loop (tools/bench.sh, BENCH_SCENARIOS=http-closed) on the fake clock: 16
 * workers x 50 ms, the day-one limit { min: 4, max: 512 }, 2 s of its warm-up (0.5x open loop,
 * L0 4 %), then LOAD x 16 clients without think time (4 % of them L0, the rest L3) that resend a
 * refused request at once, like wrk, for 7 s. L0's p99 against the p99 of the same L0 clients
 * alone on the idle backend: over the 7 s, over their first 0.5 s (the limit of the calm meets
 * the surge) and from the second second on (the limit's steady state); the workers' busy
 * fraction over the 7 s. */
struct bench_closed_result { double l0_p99_x, l0_p99_first, l0_p99_late, util; uint32_t limit; };

static double rate_warm(struct sim *s, uint64_t t, int c)
{
	(void)s;
	return t >= 2 * S ? 0 : c == 0 ? 160 * 0.04 : c == 3 ? 160 * 0.96 : 0;
}

static struct bench_closed_result bench_closed(double load)
{
	struct bench_closed_result r;
	int n = (int)(load * 16 + 0.5), l0 = (int)(n * 0.04 + 0.5);
	double alone;
	uint64_t b0;

	if (l0 < 1)
		l0 = 1;
	sim_init(&sim, 16, 50);
	sim.backoff_ms = 0.1;
	sim.clients = sim.l0_clients = l0;
	sim_start(&sim);
	sim_run(&sim, 7 * S);
	alone = sim_quantile(&sim, 0, 7 * S, 1, 0.99, NULL);
	sim_free(&sim);

	sim_init_dayone(16, 50, rate_warm);
	sim.backoff_ms = 0.1;
	sim_start(&sim);
	sim_run(&sim, 2 * S);
	b0 = sim.busy_us;
	sim.clients = n;
	sim.l0_clients = l0;
	sim.client_cls = 3;
	sim_run(&sim, 9 * S);
	r.l0_p99_x = sim_quantile(&sim, 2 * S, 9 * S, 1, 0.99, NULL) / alone;
	r.l0_p99_first = sim_quantile(&sim, 2 * S, 2 * S + 500 * MS, 1, 0.99, NULL) / alone;
	r.l0_p99_late = sim_quantile(&sim, 3 * S, 9 * S, 1, 0.99, NULL) / alone;
	r.util = util(&sim, b0, 7 * S);
	r.limit = sim.v.limit;
	sim_free(&sim);
	return r;
}

/* Where L0's p99 in the bench's closed loop comes from (docs/CONTROLLER.md, "L0's tail in the
 * closed loop"): the first half second, where the calm limit (21-31) meets 56 or 160 clients
 * (1.41-1.72x), and the gradient's steady state, whose median at the aim keeps a tenth of a
 * service time of queue in front of L0 too (1.24-1.35x from the second second on). Asserted:
 * the backend stays busy, and neither part grows (a guard, not the goal of 1.2x). */
static void test_bench_closed(void **st)
{
	static const double loads[] = { 3.5, 10 };
	(void)st;
	for (int l = 0; l < 2; l++)
		for (int i = 0; i < 3; i++) {
			struct bench_closed_result r;

			sim_seed = 42 + (uint64_t)i;
			r = bench_closed(loads[l]);
			print_message("# bench closed %.1fx: L0 p99 %.2fx alone (first 0.5 s %.2fx, from "
				      "1 s on %.2fx), util %.3f, limit %u\n", loads[l], r.l0_p99_x,
				      r.l0_p99_first, r.l0_p99_late, r.util, r.limit);
			assert_true(r.util >= 0.99);
			assert_true(r.l0_p99_late <= 1.4);
			assert_true(r.l0_p99_x <= 1.8);
		}
	sim_seed = 42;
}

/* A healthy service whose load rises, far from its knee: 128 workers x 20 ms (6400/s), 10 s at
 * 300/s (6 in flight: in calm the limit follows the demand down to about 2 x the peak), then
 * 3000/s (60 in flight, under half the capacity) for 5 s. Nothing is overloaded, so refusals
 * are the cost of the calm limit: fast growth keeps them to the first second of the rise. */
static double rate_rise(struct sim *s, uint64_t t, int c)
{
	(void)s;
	return c == 3 ? (t < 10 * S ? 300.0 : 3000.0) : 0;
}

static double healthy_rise(int grow, uint32_t *calm_limit, uint32_t *end_limit)
{
	uint64_t a0, r0;
	double frac;

	sim_init_dayone(128, 20, rate_rise);
	sim_start(&sim);
	sim.ctl.mp.fast_growth = grow;
	sim_run(&sim, 10 * S);
	*calm_limit = sim.v.limit;
	a0 = arrived(&sim);
	r0 = refused(&sim);
	sim_run(&sim, 15 * S);
	frac = (double)(refused(&sim) - r0) / (double)(arrived(&sim) - a0);
	*end_limit = sim.v.limit;
	sim_free(&sim);
	return frac;
}

static void test_healthy_rise_not_throttled(void **st)
{
	uint32_t calm, end, calm0, end0;
	double f, f0;
	(void)st;
	f0 = healthy_rise(0, &calm0, &end0);
	f = healthy_rise(1, &calm, &end);
	print_message("# healthy rise 300 -> 3000/s on 128 x 20 ms: refused %.4f (without fast "
		      "growth %.4f), limit %u -> %u (%u -> %u)\n", f, f0, calm, end, calm0, end0);
	assert_true(calm <= 32);              /* calm followed the demand down from 154 */
	assert_true(f < 0.15);
	assert_true(f < f0 / 5);
	assert_true(end >= 80);
}

/* L0 alone on a backend whose latency does not come from the concurrency sluice counts: a
 * database forked per connection on two shared CPUs (connect, one query, disconnect), where
 * the connections' setup takes the CPU the queries wait for. One L0 client for 20 s (the
 * baseline: 2.4 ms turns), then 8 L0 clients without think time for 10 s (the bench runs 6 s), every query turn
 * taking 4-11 ms whatever the number of busy connections; day-one limit { min: 4, max: 256 }.
 * ok = admitted / arrivals of L0 over the 10 s (a refused client retries after 20 ms). */
struct l0_result { double ok, obj_ms, l3_ok; uint32_t min_limit, end_limit, min_admit0; };

/* The L3 flood beside it (l0_alone's flood): connections per second from 18 s on (the
 * bench's flood starts 2 s before L0's clients), each one cheap query (0.23 ms, the bench's
 * SELECT 1 against L0's 2.4 ms transactions). */
static double flood_rate;

static double rate_flood(struct sim *s, uint64_t t, int c)
{
	(void)s;
	return c == 3 && t >= 18 * S ? flood_rate : 0;
}

static double svc_unresponsive(struct sim *s, uint64_t t, int *err)
{
	(void)err;
	if (s->cur_cls == 3)
		return 0.23;
	return t < 20 * S ? 2.4 : 4 + 7 * sim_u(s);
}

static struct l0_result l0_alone(double respond_frac, int spare, int proto, double flood)
{
	struct l0_result r = { 0 };
	uint64_t a0, adm0, a3, adm3;

	sim_init(&sim, 64, 2.4);
	sim.svc = svc_unresponsive;
	sim.jitter = 0;
	sim.client_cls = 0;
	sim.clients = 1;
	sim.think_ms = 2;
	sim.sc.limit_min = 4;
	sim.sc.limit_max = 256;
	/* held at 1.2 x the 2.4 ms baseline: the bench's 6 s saw that objective throughout;
	 * over a longer run a limit that no longer saturates lets the baseline rise to the new
	 * latency (docs/CONTROLLER.md, the evidence floor) */
	if (!flood)             /* the flood case: day one's 1.2 x the baseline learned */
		sim.sc.latency_slo_ms = 2.88;
	sim.sc.protocol = proto;
	flood_rate = flood;
	sim.rate = rate_flood;
	sim_start(&sim);
	sim.ctl.mp.respond_frac = respond_frac;
	sim_run(&sim, 20 * S);
	sim.clients = 8;
	sim.think_ms = 0;
	for (int i = 1; i < 8; i++)
		sim.next_send[i] = sim.now_us;
	a0 = sim.in.stats[0].arrivals;
	adm0 = sim.in.stats[0].admitted;
	a3 = sim.in.stats[3].arrivals;
	adm3 = sim.in.stats[3].admitted;
	sim.min_limit = UINT32_MAX;
	while (sim.now_us < 30 * S) {
		sim_run(&sim, sim.now_us + SIM_TICK_US);
		if (!spare)                             /* the ladder as before: L0 never spared */
			sim.ctl.saturated = 1;
	}
	r.ok = (double)(sim.in.stats[0].admitted - adm0) / (double)(sim.in.stats[0].arrivals - a0);
	if (sim.in.stats[3].arrivals > a3)
		r.l3_ok = (double)(sim.in.stats[3].admitted - adm3) /
			  (double)(sim.in.stats[3].arrivals - a3);
	r.obj_ms = sim.ctl.objective_us / 1000;
	r.min_limit = sim.min_limit;
	r.end_limit = sim.v.limit;
	r.min_admit0 = sim.min_admit[0];
	sim_free(&sim);
	return r;
}

static void test_l0_alone_unresponsive(void **st)
{
	struct l0_result r, off;
	(void)st;
	off = l0_alone(0, 0, SLUICE_PROTO_HTTP, 0);
	r = l0_alone(0.5, 1, SLUICE_PROTO_HTTP, 0);
	print_message("# L0 alone, latency not from concurrency: ok %.3f (without the floor and "
		      "the L0 rule %.3f), limit >= %u (%u), at the end %u (%u), L0 admit >= %.0f %% "
		      "(%.0f %%), objective %.2f ms\n", r.ok, off.ok, r.min_limit, off.min_limit,
		      r.end_limit, off.end_limit,
		      100.0 * r.min_admit0 / SLUICE_PROB_ONE, 100.0 * off.min_admit0 / SLUICE_PROB_ONE,
		      r.obj_ms);
	assert_true(r.obj_ms > 2.6 && r.obj_ms < 3.2);   /* 1.2 x 2.4 ms: missed throughout */
	assert_int_equal(r.min_admit0, SLUICE_PROB_ONE); /* the ladder never cut L0 */
	assert_true(r.end_limit >= 10);                   /* 8 busy + the burst margin */
	assert_true(r.ok >= 0.97);
}

/* The same backend as a tcp service (each unit a connection: the bench's pgbench -C, one
 * query per connection), alone and beside an L3 flood of 2000 connections per second: L0's
 * connections are not held to the adaptive limit, so none is refused, while the flood is
 * still shed (its threshold counts L0's busy connections). */
static void test_tcp_l0_connect_under_flood(void **st)
{
	struct l0_result alone, flood, http;
	(void)st;
	alone = l0_alone(0.5, 1, SLUICE_PROTO_TCP, 0);
	flood = l0_alone(0.5, 1, SLUICE_PROTO_TCP, 2000);
	http = l0_alone(0.5, 1, SLUICE_PROTO_HTTP, 2000);
	print_message("# tcp L0 -C: ok %.4f alone, %.4f under the flood (L3 admitted %.3f, "
		      "limit >= %u, objective %.2f ms); the same as http: ok %.4f (L3 admitted "
		      "%.3f)\n", alone.ok, flood.ok, flood.l3_ok, flood.min_limit, flood.obj_ms,
		      http.ok, http.l3_ok);
	assert_true(alone.ok == 1.0);
	assert_true(flood.ok == 1.0);
	assert_int_equal(flood.min_admit0, SLUICE_PROB_ONE);
	assert_true(flood.l3_ok < 0.5);                  /* most of the flood is still shed */
	/* as an http service (each unit a request) the same holds */
	assert_true(http.ok == 1.0);
	assert_true(http.l3_ok < 0.5);
}

/* The end-to-end controller scenario (tests/e2e/test_controller.sh) on a loaded host: 8
 * workers x 20 ms (400/s), L0..L3 at 120/240/360/480 per second for 8 s, limit { min: 2,
 * max: 32 }, a 40 ms target, 500 ms windows; every 1.5 s the host stalls the backend for
 * 300 ms (service time 20 ms + up to host_stall_ms). With the limit as L0's threshold the
 * stalls' cuts refused L0 (8 to 45 of ~950 per run at 60 ms stalls in 20 runs); L0 alone
 * fits in half of what the backend served, so headroom refuses none of it now, while the
 * lower classes are still shed. */
static double host_stall_ms;

static double rate_e2e(struct sim *s, uint64_t t, int c)
{
	static const double r[4] = { 120, 240, 360, 480 };
	(void)s;
	return t >= 1 * S && t < 9 * S ? r[c] : 0;
}

static double svc_loaded_host(struct sim *s, uint64_t t, int *err)
{
	(void)err;
	return t % (1500 * MS) < 300 * MS ? 20 + host_stall_ms * sim_u(s) : 20;
}

/* The e2e scenario's shop service: an adaptive limit 2..32, a 40 ms target, 500 ms windows. */
static void l0_scenario_conf(struct sim *s)
{
	s->sc.limit_min = 2;
	s->sc.limit_max = 32;
	s->sc.target_latency_ms = 40;
	s->sc.aimd_window_ms = 500;
}

static void test_l0_fits_not_refused(void **st)
{
	(void)st;
	host_stall_ms = 60;
	for (int i = 0; i < 5; i++) {
		uint64_t l0_rej;
		double l3_ok;

		sim_seed = 100 + (uint64_t)i;
		sim_init(&sim, 8, 20);
		sim.rate = rate_e2e;
		sim.svc = svc_loaded_host;
		l0_scenario_conf(&sim);
		sim_start(&sim);
		sim_run(&sim, 10 * S);
		l0_rej = sim.in.stats[0].arrivals - sim.in.stats[0].admitted;
		l3_ok = (double)sim.in.stats[3].admitted / (double)sim.in.stats[3].arrivals;
		print_message("# e2e scenario, 60 ms host stalls: L0 refused %lu of %lu, L3 admitted "
			      "%.2f, limit >= %u\n", (unsigned long)l0_rej,
			      (unsigned long)sim.in.stats[0].arrivals, l3_ok, sim.min_limit);
		assert_true(sim.min_limit < 8);             /* cut below what L0 alone holds */
		assert_int_equal(l0_rej, 0);
		assert_true(l3_ok < 0.5);
		sim_free(&sim);
	}
	sim_seed = 42;
}

/* L0 alone beyond the backend's capacity (100/s, then 800/s against 400/s for 20 s): it does
 * not fit, and it is held to the limit as before (a threshold at most a few units above it),
 * so the admitted L0 stays within the 40 ms target. */
static double rate_l0_flood(struct sim *s, uint64_t t, int c)
{
	(void)s;
	return c ? 0 : t < 10 * S ? 100 : 800;
}

static void test_l0_flood_capped(void **st)
{
	uint32_t thr_max = 0, lim_max = 0;
	uint64_t a0, adm0;
	double p99;
	(void)st;
	sim_init(&sim, 8, 20);
	sim.rate = rate_l0_flood;
	l0_scenario_conf(&sim);
	sim_start(&sim);
	sim_run(&sim, 15 * S);
	a0 = sim.in.stats[0].arrivals;
	adm0 = sim.in.stats[0].admitted;
	while (sim.now_us < 30 * S) {
		sim_run(&sim, sim.now_us + SIM_TICK_US);
		if (sim.v.class_threshold[0] > thr_max)
			thr_max = sim.v.class_threshold[0];
		if (sim.v.limit > lim_max)
			lim_max = sim.v.limit;
	}
	p99 = sim_quantile(&sim, 15 * S, 30 * S, 1, 0.99, NULL) / 1000;
	print_message("# L0 flood 2x: threshold <= %u (limit <= %u), admitted %.2f, p99 %.1f ms\n",
		      thr_max, lim_max, (double)(sim.in.stats[0].admitted - adm0) /
		      (double)(sim.in.stats[0].arrivals - a0), p99);
	assert_true(thr_max <= lim_max + 3);
	assert_true(thr_max < 32);
	assert_true(sim.in.stats[0].admitted - adm0 < 0.6 * (double)(sim.in.stats[0].arrivals - a0));
	assert_true(p99 <= 40);
	sim_free(&sim);
}

#define RUNS 5

static void report(void)
{
	printf("closed loop: 8 workers x 20 ms, 200 clients, last 30 s of 60 s overload; "
	       "mean of %d runs (worst)\n", RUNS);
	printf("%-14s %8s %13s %13s %13s %6s\n", "algorithm", "obj_ms", "p50_ms", "p99_ms", "util",
	       "shed");
	for (int alg = 0; alg < 3; alg++)
		for (int k = 0; k < 2; k++) {
			struct closed_result m = { 0 }, w = { 0, 0, 1, 0, 0, 0 };
			for (int i = 0; i < RUNS; i++) {
				struct closed_result r;
				sim_seed = 42 + (uint64_t)i;
				r = closed_loop(alg, k ? 40 : 0);
				m.obj_ms += r.obj_ms / RUNS; m.p50 += r.p50 / RUNS;
				m.p99 += r.p99 / RUNS; m.util += r.util / RUNS;
				m.shed_frac += r.shed_frac / RUNS;
				w.p50 = r.p50 > w.p50 ? r.p50 : w.p50;
				w.p99 = r.p99 > w.p99 ? r.p99 : w.p99;
				w.util = r.util < w.util ? r.util : w.util;
			}
			printf("%-14s %8.1f %6.1f (%4.1f) %6.1f (%4.1f) %6.3f (%.3f) %6.3f%s\n",
			       alg_names[alg], m.obj_ms, m.p50, w.p50, m.p99, w.p99, m.util, w.util,
			       m.shed_frac, k ? "  target 40 ms" : "  auto 1.2x");
		}
	printf("\nstep: open loop 0.5x -> Nx (20 s) -> 0.5x, classes 10/20/30/40 %%; "
	       "mean of %d runs (worst)\n", RUNS);
	printf("%-14s %3s %6s %11s %11s %10s %13s %15s\n", "algorithm", "x", "obj_ms",
	       "settle_s", "full_s", "surge_p99", "util", "L0_ok");
	for (int alg = 0; alg < 3; alg++)
		for (int k = 0; k < 2; k++) {
			double x = k ? 10 : 4;
			struct step_result m = { 0 }, w = { 0, 0, 1, 0, 0, 1, 0 };
			for (int i = 0; i < RUNS; i++) {
				struct step_result r;
				sim_seed = 42 + (uint64_t)i;
				r = step_load(alg, x);
				m.obj_ms += r.obj_ms / RUNS; m.settle_s += r.settle_s / RUNS;
				m.full_s += r.full_s / RUNS; m.surge_p99_ms += r.surge_p99_ms / RUNS;
				m.surge_util += r.surge_util / RUNS; m.l0_ok += r.l0_ok / RUNS;
				w.settle_s = r.settle_s > w.settle_s ? r.settle_s : w.settle_s;
				w.full_s = r.full_s > w.full_s ? r.full_s : w.full_s;
				w.surge_util = r.surge_util < w.surge_util ? r.surge_util : w.surge_util;
				w.l0_ok = r.l0_ok < w.l0_ok ? r.l0_ok : w.l0_ok;
			}
			printf("%-14s %3.0f %6.1f %4.1f (%4.1f) %4.1f (%4.1f) %10.1f %6.3f (%.3f) "
			       "%6.4f (%.4f)\n", alg_names[alg], x, m.obj_ms, m.settle_s, w.settle_s,
			       m.full_s, w.full_s, m.surge_p99_ms, m.surge_util, w.surge_util, m.l0_ok,
			       w.l0_ok);
		}
	sim_seed = 42;
	if (getenv("W")) step_workers = atoi(getenv("W"));
}

/* ---- the wait before the server reads (control/waitknee.h) ----
 * Every scenario above runs without it, as for a server whose wait sluice does not see (one
 * that reads at once and queues inside, like nginx or HAProxy). These run with it. */

/* sluiced started fresh into a running overload (docs/RELIABILITY.md): 56 closed-loop clients
 * (2 of them L0) on 16 workers x 50 ms from the first tick, the day-one limits (a start limit of
 * 154 that does not bind). With no calm window, the median's baseline is learned from the
 * backlog; the wait measures that backlog. */
struct first_start_result { double base_ms, p50_ms, util; uint32_t limit; uint64_t trims; };

static struct first_start_result first_start(int wait)
{
	struct first_start_result r;
	uint64_t b0;

	sim_init_dayone(16, 50, NULL);
	sim.backoff_ms = 0.1;
	sim.clients = 56;
	sim.l0_clients = 2;
	sim.client_cls = 3;
	sim.wait_probe = wait;
	sim_start(&sim);
	sim_run(&sim, 10 * S);
	b0 = sim.busy_us;
	sim_run(&sim, 30 * S);
	r.base_ms = sim.ctl.base.value_us / 1000;
	r.p50_ms = sim_quantile(&sim, 10 * S, 30 * S, ALL, 0.5, NULL) / 1000;
	r.util = util(&sim, b0, 20 * S);
	r.limit = sim.v.limit;
	r.trims = sim.ctl.wk.trims;
	sim_free(&sim);
	return r;
}

static void test_first_start_in_overload(void **st)
{
	(void)st;
	for (int i = 0; i < 3; i++) {
		struct first_start_result off, on;

		sim_seed = 42 + (uint64_t)i;
		off = first_start(0);
		on = first_start(1);
		print_message("# first start in overload: without the wait baseline %.1f ms, p50 "
			      "%.1f ms, limit %u, util %.3f; with it baseline %.1f ms, p50 %.1f ms, "
			      "limit %u, util %.3f, %lu trims\n", off.base_ms, off.p50_ms, off.limit,
			      off.util, on.base_ms, on.p50_ms, on.limit, on.util,
			      (unsigned long)on.trims);
		assert_true(off.base_ms > 100);           /* the known limit it fixes */
		assert_true(on.base_ms > 45 && on.base_ms < 56);
		assert_true(on.p50_ms <= 1.2 * on.base_ms);
		assert_true(on.util >= 0.97);
		assert_true(on.limit <= 24);              /* 16 workers + the burst margins */
	}
	sim_seed = 42;
}

/* A server that reads every request 5 ms late whatever its load: a wait that is no queue. The
 * closed-loop overload (8 workers x 20 ms, 200 clients after 10 s of 4): the trim it causes is
 * undone once the wait is found not to follow, and the limit then does what it does without
 * the wait. */
static void test_late_reader(void **st)
{
	struct closed_result off, on;
	uint64_t undone;
	(void)st;
	off = closed_loop_late(0, &undone);
	on = closed_loop_late(1, &undone);
	print_message("# late reader (5 ms): without the wait util %.3f, p50 %.1f ms, limit %u; "
		      "with it util %.3f, p50 %.1f ms, limit %u, undone %lu\n", off.util, off.p50,
		      off.limit, on.util, on.p50, on.limit, (unsigned long)undone);
	assert_true(undone >= 1);
	assert_true(on.util >= 0.97);
	assert_true(on.p50 <= on.obj_ms);
	assert_true(on.limit + 2 >= off.limit && on.limit <= off.limit + 2);
}

/* The bench's closed loop and step with the wait: the limit stops where the wait starts. */
static void test_wait_bench(void **st)
{
	(void)st;
	for (int i = 0; i < 3; i++) {
		struct bench_closed_result c0, c1;
		struct bench_step_result s1;

		sim_seed = 42 + (uint64_t)i;
		c0 = bench_closed(3.5);
		sim_wait_probe = 1;
		c1 = bench_closed(3.5);
		s1 = bench_step();
		sim_wait_probe = 0;
		print_message("# bench with the wait: closed 3.5x L0 p99 from 1 s on %.2fx alone "
			      "(without %.2fx), util %.3f; step p99 back %.2f s, p99 from 1 s after "
			      "%.1f ms (objective %.1f), util %.3f, full admission %.2f s\n",
			      c1.l0_p99_late, c0.l0_p99_late, c1.util, s1.p99_back_s, s1.p99_1s_ms,
			      s1.obj_ms, s1.surge_util, s1.full_s);
		assert_true(c1.util >= 0.99);
		assert_true(c1.l0_p99_late <= c0.l0_p99_late + 0.02);
		assert_true(s1.surge_util >= 0.95);
		assert_true(s1.p99_1s_ms <= 1.1 * s1.obj_ms);
		assert_true(s1.full_s <= 10.0);
		assert_true(s1.l0_ok >= 0.999);
	}
	sim_seed = 42;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_closed_loop_overload),
		cmocka_unit_test(test_no_freeze),
		cmocka_unit_test(test_low_traffic),
		cmocka_unit_test(test_always_slow),
		cmocka_unit_test(test_fail_fast_backend),
		cmocka_unit_test(test_restart_mid_overload),
		cmocka_unit_test(test_step_load),
		cmocka_unit_test(test_blip),
		cmocka_unit_test(test_cold_start),
		cmocka_unit_test(test_l0_alone_unresponsive),
		cmocka_unit_test(test_tcp_l0_connect_under_flood),
		cmocka_unit_test(test_bench_step),
		cmocka_unit_test(test_bench_closed),
		cmocka_unit_test(test_healthy_rise_not_throttled),
		cmocka_unit_test(test_l0_fits_not_refused),
		cmocka_unit_test(test_l0_flood_capped),
		cmocka_unit_test(test_first_start_in_overload),
		cmocka_unit_test(test_late_reader),
		cmocka_unit_test(test_wait_bench),
	};
	if (getenv("W")) step_workers = atoi(getenv("W"));
	if (argc > 1 && !strcmp(argv[1], "report")) {
		report();
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
