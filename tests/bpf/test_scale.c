// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* 4096 services on the real programs and the real daemon tick: the maps sized for them at
 * load, traffic to the last service counted and its verdict enforced, and the tick running
 * the controller only for the services that moved. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include "scale.h"

#define N 4096

static void test_4096_services(void **st)
{
	struct scale *s = scale_setup(N, 1);
	struct sluice_class_stats cs;
	int last, t;
	(void)st;

	assert_non_null(s);
	assert_int_equal(s->d->m.n_slots, 4096);
	assert_int_equal(s->d->cfg.n_services, N);
	last = s->d->idx[N - 1];
	assert_true(last >= 0 && last < N);

	/* ticks with no traffic: the first runs every controller, later ones skip them all */
	for (int t = 0; t < 3; t++)
		daemon_tick(s->d, monotonic_ns());
	assert_int_equal(s->d->ticked, 2 * N);      /* tick 1 and the quiet tick 2 */
	assert_int_equal(s->d->skipped, N);         /* tick 3 */

	/* the last service: admitted, counted, busy with a query (a tcp service's limit counts
	 * busy connections), then its limit of 1 refuses the next SYN */
	assert_int_equal(scale_unit(s, N - 1, 40000, 0), XDP_PASS);
	assert_int_equal(scale_turn(s, N - 1, 40000, 0), 0);
	assert_int_equal(scale_unit(s, N - 1, 40001, 0), XDP_TX);   /* RST to the client */
	assert_int_equal(maps_read_class_stats(&s->d->m, last, 0, &cs), 0);
	assert_int_equal(cs.arrivals, 2);
	assert_int_equal(cs.admitted, 1);

	/* a tick soon runs that service's controller, and only it: the services at rest are
	 * read a part per tick (MAPS_SCAN_PARTS parts) */
	s->d->ticked = s->d->skipped = 0;
	for (t = 1; t <= MAPS_SCAN_PARTS; t++) {
		daemon_tick(s->d, monotonic_ns());
		if (s->d->ticked)
			break;
	}
	assert_true(t <= MAPS_SCAN_PARTS);
	assert_int_equal(s->d->ticked, 1);
	assert_int_equal(s->d->skipped, (unsigned long long)t * N - 1);
	assert_int_equal(s->d->rd.n_changed, 1);

	/* what the tick's batched reads saw is what entry-by-entry lookups see */
	{
		struct sluice_class_stats batched[SLUICE_NUM_CLASSES], one;
		struct sluice_hist hb[SLUICE_NUM_CLASSES], h1;
		struct sluice_inflight ib, i1;

		maps_reader_stats(&s->d->rd, last, batched);
		assert_int_equal(maps_reader_hists(&s->d->rd, &s->d->m, last, hb), 0);
		assert_int_equal(maps_reader_inflight(&s->d->rd, &s->d->m, last, &ib), 0);
		assert_int_equal(maps_read_inflight(&s->d->m, last, &i1), 0);
		assert_memory_equal(&ib, &i1, sizeof(ib));
		assert_int_equal(ib.total, 1);
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			assert_int_equal(maps_read_class_stats(&s->d->m, last, c, &one), 0);
			assert_int_equal(maps_read_hist(&s->d->m, last, c, &h1), 0);
			assert_memory_equal(&batched[c], &one, sizeof(one));
			assert_memory_equal(&hb[c], &h1, sizeof(h1));
		}
		assert_int_equal(batched[0].arrivals, 2);
		assert_int_equal(maps_reader_busy(&s->d->rd, &s->d->m, last, &ib), 0);
		assert_int_equal(maps_read_busy(&s->d->m, last, &i1), 0);
		assert_memory_equal(&ib, &i1, sizeof(ib));
		assert_int_equal(ib.total, 1);
	}

	/* The answer ends the turn: a latency sample and busy - 1, no counter moves. The read
	 * that covers the slot still sees it changed (so a quiet tcp service runs), and only it. */
	{
		struct sluice_inflight ib;
		int seen = 0;

		for (t = 0; t < MAPS_SCAN_PARTS; t++)   /* every part read since the query */
			assert_int_equal(maps_reader_read(&s->d->rd, &s->d->m, N, NULL, 0), 0);
		assert_int_equal(scale_turn(s, N - 1, 40000, 1), 0);
		for (t = 0; t < MAPS_SCAN_PARTS && !seen; t++) {
			assert_int_equal(maps_reader_read(&s->d->rd, &s->d->m, N, NULL, 0), 0);
			seen = maps_reader_changed(&s->d->rd, last);
		}
		assert_true(seen);
		assert_int_equal(s->d->rd.n_changed, 1);
		assert_int_equal(maps_reader_busy(&s->d->rd, &s->d->m, last, &ib), 0);
		assert_int_equal(ib.total, 0);
	}
	scale_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_4096_services),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
