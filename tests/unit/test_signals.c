// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Signals: percentiles from known histograms, deltas, 429 exclusion, resets, zero traffic. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>
#include "control/signals.h"

static void add(struct sluice_hist *h, uint64_t us, uint64_t n)
{
	h->bucket[sluice_hist_bucket(us)] += n;
	h->sum_us += us * n;
}

static void test_bucket_bounds_are_contiguous(void **st)
{
	uint32_t i;
	(void)st;
	for (i = 1; i < SLUICE_HIST_BUCKETS; i++) {
		assert_int_equal(sluice_hist_lower_us(i), sluice_hist_upper_us(i - 1));
		assert_int_equal(sluice_hist_bucket(sluice_hist_lower_us(i)), i);
		assert_int_equal(sluice_hist_bucket(sluice_hist_upper_us(i) - 1),
				 i);
	}
}

static void test_percentiles_known_histogram(void **st)
{
	struct sluice_hist h;
	(void)st;
	memset(&h, 0, sizeof(h));
	add(&h, 100, 50);    /* bucket [96,112) */
	add(&h, 1000, 40);   /* bucket [896,1024) */
	add(&h, 10000, 10);  /* bucket [8192,10240) */
	assert_int_equal(sluice_hist_count(&h), 100);
	/* rank 50 is the last of 50 in [96,112): interpolates to the top of the bucket */
	assert_true(fabs(sluice_hist_quantile_us(&h, 0.50) - 112.0) < 1e-9);
	assert_true(fabs(sluice_hist_quantile_us(&h, 0.25) - (96 + 16 * 25.0 / 50)) < 1e-9);
	assert_true(fabs(sluice_hist_quantile_us(&h, 0.90) - 1024.0) < 1e-9);
	assert_true(fabs(sluice_hist_quantile_us(&h, 0.99) - (8192 + 2048 * 0.9)) < 1e-9);
	/* exact small buckets */
	memset(&h, 0, sizeof(h));
	add(&h, 2, 10);
	assert_true(sluice_hist_quantile_us(&h, 0.5) == 2.0);
	memset(&h, 0, sizeof(h));
	assert_true(sluice_hist_quantile_us(&h, 0.99) == 0.0);
}

static void test_above_threshold(void **st)
{
	struct sluice_hist h;
	(void)st;
	memset(&h, 0, sizeof(h));
	add(&h, 100, 50);
	add(&h, 1000, 40);
	add(&h, 10000, 10);
	assert_true(fabs(sluice_hist_above_us(&h, 5000) - 10.0) < 1e-9);
	assert_true(fabs(sluice_hist_above_us(&h, 50) - 100.0) < 1e-9);
	assert_true(sluice_hist_above_us(&h, 20000) == 0.0);
	/* threshold 960 inside [896,1024): values 961..1023 are 63 of 128 */
	assert_true(fabs(sluice_hist_above_us(&h, 960) - (10 + 40 * 63.0 / 128)) < 1e-9);
}

static void stats_zero(struct sluice_class_stats *s, struct sluice_hist *h)
{
	memset(s, 0, sizeof(*s) * SLUICE_NUM_CLASSES);
	memset(h, 0, sizeof(*h) * SLUICE_NUM_CLASSES);
}

static void test_compute_deltas(void **st)
{
	struct sluice_class_stats prev[4], cur[4];
	struct sluice_hist ph[4], ch[4];
	struct sluice_service_signals out;
	(void)st;
	stats_zero(prev, ph);
	prev[0].arrivals = 1000; prev[0].completed = 900; prev[0].errors = 5;
	add(&ph[0], 100, 900);
	memcpy(cur, prev, sizeof(cur));
	memcpy(ch, ph, sizeof(ch));
	cur[0].arrivals += 500;
	cur[0].completed += 100;
	cur[0].resp_429 += 20;              /* excluded: 80 real calls */
	cur[0].errors += 40;
	cur[0].retransmits += 50;
	cur[0].rejected[SLUICE_REJ_HEADROOM] += 7;
	add(&ch[0], 100, 50);
	add(&ch[0], 1000, 40);
	add(&ch[0], 10000, 10);
	cur[3].arrivals = 100;
	cur[3].completed = 100;
	add(&ch[3], 10000, 100);

	sluice_signals_compute(prev, cur, ph, ch, 500000000ull, 5000, &out);
	assert_true(fabs(out.dt_s - 0.5) < 1e-12);
	assert_int_equal(out.cls[0].arrivals, 500);
	assert_true(fabs(out.cls[0].rate_per_s - 1000.0) < 1e-9);
	assert_int_equal(out.cls[0].calls, 80);
	assert_true(fabs(out.cls[0].error_rate - 0.5) < 1e-12);
	assert_int_equal(out.cls[0].samples, 100);
	assert_true(fabs(out.cls[0].p50_us - 112.0) < 1e-9);
	assert_true(fabs(out.cls[0].slow_rate - 0.1) < 1e-12);
	assert_true(fabs(out.cls[0].retransmit_ratio - 0.1) < 1e-12);
	assert_int_equal(out.cls[0].rejected_total, 7);
	assert_int_equal(out.cls[0].reset, 0);
	/* total = all classes */
	assert_int_equal(out.total.arrivals, 600);
	assert_int_equal(out.total.samples, 200);
	assert_int_equal(out.total.calls, 180);
	assert_true(fabs(out.total.error_rate - 40.0 / 180) < 1e-12);
	assert_true(fabs(out.total.slow_rate - 110.0 / 200) < 1e-12);
	assert_true(out.total.p99_us > 8192 && out.total.p99_us <= 10240);
	assert_true(fabs(out.cls[3].p50_us - (8192 + 2048 * 0.5)) < 1e-9);
}

static void test_counter_reset_and_zero_traffic(void **st)
{
	struct sluice_class_stats prev[4], cur[4];
	struct sluice_hist ph[4], ch[4];
	struct sluice_service_signals out;
	(void)st;
	stats_zero(prev, ph);
	stats_zero(cur, ch);
	/* zero traffic: everything 0, nothing NaN */
	sluice_signals_compute(prev, cur, ph, ch, 100000000ull, 800000, &out);
	assert_true(out.total.error_rate == 0 && out.total.slow_rate == 0);
	assert_true(out.total.p99_us == 0 && out.total.rate_per_s == 0);
	assert_false(isnan(out.total.retransmit_ratio));
	/* reset: counters went backwards -> the new values are the delta */
	prev[1].arrivals = 1000; prev[1].completed = 1000;
	add(&ph[1], 100, 1000);
	cur[1].arrivals = 30; cur[1].completed = 30;
	add(&ch[1], 200, 30);
	sluice_signals_compute(prev, cur, ph, ch, 100000000ull, 800000, &out);
	assert_int_equal(out.cls[1].reset, 1);
	assert_int_equal(out.total.reset, 1);
	assert_int_equal(out.cls[1].arrivals, 30);
	assert_int_equal(out.cls[1].samples, 30);
	assert_true(out.cls[1].p50_us >= 192 && out.cls[1].p50_us <= 224);
	/* no previous snapshot at all */
	sluice_signals_compute(NULL, cur, NULL, ch, 0, 0, &out);
	assert_int_equal(out.cls[1].arrivals, 30);
	assert_true(out.cls[1].rate_per_s == 0);   /* dt 0: no rate */
}

/* Told which classes' histograms did not move, the signals are exactly those computed from
 * the histograms themselves: the tick passes the hint for the classes it did not re-read. */
static void test_unchanged_hint_gives_the_same_signals(void **st)
{
	struct sluice_class_stats prev[4], cur[4];
	struct sluice_hist ph[4], ch[4];
	struct sluice_service_signals plain, hinted;
	(void)st;
	stats_zero(prev, ph);
	for (int c = 0; c < 4; c++) {
		prev[c].arrivals = prev[c].completed = 100u * (unsigned)(c + 1);
		add(&ph[c], 300u * (unsigned)(c + 1), 50);
	}
	memcpy(cur, prev, sizeof(cur));
	memcpy(ch, ph, sizeof(ch));
	cur[0].arrivals += 40;               /* class 0: requests and samples */
	cur[0].completed += 30;
	add(&ch[0], 9000, 30);
	cur[2].arrivals += 9;                /* class 2: arrivals and errors, no sample */
	cur[2].errors += 2;
	memset(&plain, 0x5a, sizeof(plain));
	memset(&hinted, 0x5a, sizeof(hinted));
	sluice_signals_compute(prev, cur, ph, ch, 100000000ull, 5000, &plain);
	sluice_signals_compute_same(prev, cur, ph, ch, 0xe, 100000000ull, 5000, &hinted);
	assert_memory_equal(&plain, &hinted, sizeof(plain));
	assert_int_equal(hinted.total.samples, 30);
	assert_int_equal(hinted.cls[2].arrivals, 9);
	assert_int_equal(hinted.total.arrivals, 49);
}

/* The tick's own call keeps one service's signals from tick to tick and writes only the
 * classes that moved: over a long run of ticks where classes move, rest, take samples or
 * count from zero again, it gives what a fresh computation gives, byte for byte. */
static uint64_t xs = 88172645463325252ull;
static uint64_t rnd(void)
{
	xs ^= xs << 13;
	xs ^= xs >> 7;
	xs ^= xs << 17;
	return xs;
}

/* One random tick from prev/ph to cur/ch: each class's counters move, rest or count from zero
 * again, its histogram takes samples (under 100 ms, or with slow_too some up to 70 s) or starts
 * again. Returns the classes whose histogram did not move that the caller says so of (not
 * always: the hint is optional); given is ch with those poisoned, as they must not be read. */
static unsigned random_tick(const struct sluice_class_stats *prev, const struct sluice_hist *ph,
			    struct sluice_class_stats *cur, struct sluice_hist *ch,
			    struct sluice_hist *given, int slow_too)
{
	const int n64 = (int)(sizeof(cur[0]) / sizeof(uint64_t));
	unsigned same = 0;

	memcpy(cur, prev, 4 * sizeof(cur[0]));
	memcpy(ch, ph, 4 * sizeof(ch[0]));
	for (int c = 0; c < 4; c++) {
		int mode = (int)(rnd() % 6);
		uint64_t *u = (uint64_t *)&cur[c];

		if (mode >= 2)
			u[rnd() % (uint64_t)n64] += rnd() % 5;
		if (mode >= 4)
			for (int j = (int)(rnd() % 4); j > 0; j--)
				add(&ch[c], slow_too ? rnd() % (rnd() % 2 ? 100000 : 70000000) :
					rnd() % 100000, 1 + rnd() % 3);
		if (rnd() % 300 == 0)
			u[rnd() % (uint64_t)n64] = 0;          /* counters from zero */
		if (rnd() % 300 == 0) {
			memset(&ch[c], 0, sizeof(ch[c]));      /* histogram from zero */
			add(&ch[c], 50, 1);
		}
		if (!memcmp(&ch[c], &ph[c], sizeof(ch[c])) && rnd() % 4)
			same |= 1u << c;
	}
	memcpy(given, ch, 4 * sizeof(given[0]));
	for (int c = 0; c < 4; c++)
		if (same >> c & 1)   /* not read by the caller: must not be looked at */
			memset(&given[c], 0x77, sizeof(given[c]));
	return same;
}

static void test_update_gives_what_compute_gives(void **st)
{
	struct sluice_class_stats prev[4], cur[4];
	struct sluice_hist ph[4], ch[4], given[4];
	struct sluice_service_signals kept, fresh;
	(void)st;
	stats_zero(prev, ph);
	memset(&kept, 0, sizeof(kept));
	for (int t = 0; t < 20000; t++) {
		unsigned same;
		uint64_t dt = (rnd() % 3) * 100000000ull, slow = (rnd() % 2) * (rnd() % 200000);

		same = random_tick(prev, ph, cur, ch, given, 0);
		memset(&fresh, 0x5a, sizeof(fresh));
		sluice_signals_compute(prev, cur, ph, ch, dt, slow, &fresh);
		sluice_signals_update(prev, cur, ph, given, same, dt, slow, &kept);
		assert_memory_equal(&fresh, &kept, sizeof(kept));
		{
			/* the total's latency numbers are those of all classes' deltas together */
			struct sluice_hist all, d;

			memset(&all, 0, sizeof(all));
			for (int c = 0; c < 4; c++) {
				sluice_hist_delta(&ph[c], &ch[c], &d);
				for (int i = 0; i < SLUICE_HIST_BUCKETS; i++)
					all.bucket[i] += d.bucket[i];
				all.sum_us += d.sum_us;
			}
			assert_int_equal(kept.total.samples, sluice_hist_count(&all));
			assert_true(fabs(kept.total.p50_us - sluice_hist_quantile_us(&all, 0.5)) < 1e-6);
			assert_true(fabs(kept.total.p99_us - sluice_hist_quantile_us(&all, 0.99)) < 1e-6);
			assert_true(fabs(kept.total.slow - (slow && kept.total.samples ?
				    sluice_hist_above_us(&all, slow) : 0)) < 1e-6);
		}
		memcpy(prev, cur, sizeof(prev));
		memcpy(ph, ch, sizeof(ph));
	}
}

/* The tick's step (the delta and the snapshot in one pass, the histograms by pointer, the
 * delta's scans limited to the buckets that moved) gives what a fresh computation gives,
 * byte for byte, and leaves the histograms now as the last ones. */
static void test_step_gives_what_compute_gives(void **st)
{
	struct sluice_class_stats prev[4], cur[4];
	struct sluice_hist ph[4], ch[4], given[4], snap[4];
	struct sluice_service_signals kept, fresh;
	(void)st;
	stats_zero(prev, ph);
	memcpy(snap, ph, sizeof(snap));
	memset(&kept, 0, sizeof(kept));
	for (int t = 0; t < 20000; t++) {
		unsigned same;
		uint64_t dt = (rnd() % 3) * 100000000ull, slow = (rnd() % 2) * (rnd() % 200000);
		const struct sluice_hist *at[4];

		same = random_tick(prev, ph, cur, ch, given, 1);
		for (int c = 0; c < 4; c++)
			at[c] = &given[c];
		memset(&fresh, 0x5a, sizeof(fresh));
		sluice_signals_compute(prev, cur, ph, ch, dt, slow, &fresh);
		sluice_signals_step(prev, cur, snap, at, same, dt, slow, &kept);
		assert_memory_equal(&fresh, &kept, sizeof(kept));
		assert_memory_equal(snap, ch, sizeof(snap));
		memcpy(prev, cur, sizeof(prev));
		memcpy(ph, ch, sizeof(ph));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket_bounds_are_contiguous),
		cmocka_unit_test(test_percentiles_known_histogram),
		cmocka_unit_test(test_above_threshold),
		cmocka_unit_test(test_compute_deltas),
		cmocka_unit_test(test_counter_reset_and_zero_traffic),
		cmocka_unit_test(test_unchanged_hint_gives_the_same_signals),
		cmocka_unit_test(test_update_gives_what_compute_gives),
		cmocka_unit_test(test_step_gives_what_compute_gives),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
