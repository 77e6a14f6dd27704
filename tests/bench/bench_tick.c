// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Controller tick cost against the number of services.
 * Runs exactly what sluiced runs per service and tick -- service_ctl_tick() from
 * user/control/controller.c: signals (4 classes, 104-bucket histograms), AIMD, breaker, ladder with
 * overload detection, peak tracking and work-conserving thresholds, retry storm -- plus the
 * cascade detector once per tick, with every service active. Map reads and writes are not
 * included: tests/bench/bench_daemon.c measures the daemon's whole tick on the real maps.
 * Build (the modules are included directly; only jansson, for the events' JSON, is linked):
 *   make build/bench/bench_tick
 * Run: build/bench/bench_tick [ticks]   -> one line per size: mean, median and best tick in us */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../../user/common/names.c"
#include "../../user/common/errf.c"
#include "../../user/common/utf8.c"
#include "../../user/common/jsonio.c"
#include "../../user/control/events.c"
#include "../../user/control/events_json.c"
#include "../../user/control/signals.c"
#include "../../user/control/window.c"
#include "../../user/control/baseline.c"
#include "../../user/control/limit.c"
#include "../../user/control/breaker.c"
#include "../../user/control/ladder.c"
#include "../../user/control/headroom.c"
#include "../../user/control/cascade.c"
#include "../../user/control/retrystorm.c"
#include "../../user/control/listenq.c"
#include "../../user/control/verdict.c"
#include "../../user/control/waitknee.c"
#include "../../user/control/controller.c"

struct svc {
	struct service_ctl ctl;
	struct ctl_inputs in;        /* cumulative counters, as read from the maps */
	struct sluice_verdict v;
};

static uint64_t events;

/* As sluiced does: debug-level events (AIMD +1 steps) are dropped before formatting unless
 * --verbose; the rest become one JSON line each. */
static void count_ev(void *ctx, const struct sluice_event *ev)
{
	char buf[512];
	(void)ctx;
	if (ev->level == SLUICE_EV_DEBUG)
		return;
	events += (uint64_t)sluice_event_json(ev, buf, sizeof(buf)) > 0;
}

static uint64_t xs = 88172645463325252ull;
static uint64_t rnd(uint64_t n) { return sluice_rng_next(&xs) % n; }

/* Synthetic BPF side (not timed): every class busy every tick, with a latency episode and a
 * failing service now and then, so every branch of the machines is exercised. */
static void traffic(struct svc *s, int i, uint64_t tick)
{
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		struct sluice_class_stats *st = &s->in.stats[c];
		uint64_t n = 20 + rnd(40);

		st->arrivals += n + rnd(10);
		st->admitted += n;
		st->completed += n;
		st->errors += (i % 50 == 0 && tick % 200 < 50) ? n : rnd(2);
		st->retransmits += rnd(5);
		st->rejected[SLUICE_REJ_HEADROOM] += rnd(3);
		for (uint64_t k = 0; k < n; k++) {
			uint64_t us = 500 + rnd(4000) + (tick % 300 > 250 ? 20000 : 0);
			s->in.hist[c].bucket[sluice_hist_bucket(us)]++;
			s->in.hist[c].sum_us += us;
		}
		s->in.inflight.cls[c] = (int64_t)rnd(s->ctl.lim.limit / 4 + 1);
		s->in.switch_admit[c] = SLUICE_PROB_ONE;
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void run(int nsvc, int ticks)
{
	static struct sluice_config cfg;         /* zero fields: every machine's defaults */
	struct service_conf sc;
	struct sluice_cascade_params cp;
	struct sluice_cascade cas;
	const uint64_t dt = 100000000ull;        /* 100 ms ticks */
	struct svc *s = calloc((size_t)nsvc, sizeof(*s));
	double *per = calloc((size_t)ticks, sizeof(double)), t_ctl = 0;

	memset(&sc, 0, sizeof(sc));
	snprintf(sc.name, sizeof(sc.name), "svc");
	sc.limit_min = 4;
	sc.limit_max = 512;
	sc.target_latency_ms = 8;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		sc.headroom[c] = 100 - 15 * c;
	sluice_cascade_params_default(&cp);
	sluice_cascade_init(&cas);
	for (int i = 0; i < nsvc; i++)
		service_ctl_init(&s[i].ctl, &sc, &cfg, (uint64_t)i, 0);
	for (int t = 1; t <= ticks; t++) {
		uint64_t now = (uint64_t)t * dt;
		struct sluice_event_sink sink = { count_ev, NULL, "svc" };
		int supp, opened;
		double t0;

		for (int i = 0; i < nsvc; i++)
			traffic(&s[i], i, (uint64_t)t);
		t0 = now_s();
		supp = sluice_cascade_tick(&cas, &cp, now, &sink);
		for (int i = 0; i < nsvc; i++) {
			service_ctl_tick(&s[i].ctl, &sc, &s[i].in, supp, now, &sink, &s[i].v, &opened);
			if (opened)
				sluice_cascade_record_open(&cas, &cp, sc.name, now, &sink);
		}
		per[t - 1] = now_s() - t0;
		t_ctl += per[t - 1];
	}
	/* the median and the best tick resist preemption by whatever else runs on the host */
	qsort(per, (size_t)ticks, sizeof(double), cmp_d);
	printf("services=%d classes=4 ticks=%d us_per_tick: mean=%.1f median=%.1f min=%.1f"
	       " (median per service %.2f)\n", nsvc, ticks, t_ctl / ticks * 1e6,
	       per[ticks / 2] * 1e6, per[0] * 1e6, per[ticks / 2] / nsvc * 1e6);
	free(per);
	free(s);
}

int main(int argc, char **argv)
{
	int ticks = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 600;
	static const int sizes[] = { 1, 100, 1000 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		run(sizes[i], ticks);
	printf("events=%llu (goal: < 1000 us per tick at 1000 services)\n",
	       (unsigned long long)events);
	return 0;
}
