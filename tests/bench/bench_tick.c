/* Controller tick cost against the number of services (SPEC "Tests and numbers").
 * Per service and tick: signals (4 classes, 104-bucket histograms), AIMD, breaker, ladder
 * (with overload detection), peak tracking + headroom thresholds, retry-storm, cascade
 * bookkeeping, and the verdict struct the daemon would write. Map reads/writes are not
 * included (they are the daemon's, and cost syscalls this benchmark does not measure).
 * Build (no library needed, the modules are included directly):
 *   gcc -std=gnu11 -O2 -Iinclude -Iuser tests/bench/bench_tick.c -lm -o build/bench_tick
 * Run: build/bench_tick [ticks]   -> one line per size: mean, median and best tick in us */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../../user/events.c"
#include "../../user/signals.c"
#include "../../user/aimd.c"
#include "../../user/breaker.c"
#include "../../user/ladder.c"
#include "../../user/headroom.c"
#include "../../user/cascade.c"
#include "../../user/retrystorm.c"

struct svc {
	struct sluice_class_stats prev[4], cur[4];
	struct sluice_hist prev_h[4], cur_h[4];
	struct sluice_aimd aimd;
	struct sluice_breaker brk;
	struct sluice_ladder lad;
	struct sluice_peak peak;
	struct sluice_retrystorm rs;
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

/* Synthetic BPF side: traffic with some variety so branches are exercised. */
static void traffic(struct svc *s, int i, uint64_t tick)
{
	int c, k;
	memcpy(s->prev, s->cur, sizeof(s->cur));
	memcpy(s->prev_h, s->cur_h, sizeof(s->cur_h));
	for (c = 0; c < 4; c++) {
		uint64_t n = 20 + rnd(40);
		s->cur[c].arrivals += n + rnd(10);
		s->cur[c].admitted += n;
		s->cur[c].completed += n;
		s->cur[c].errors += (i % 50 == 0 && tick % 200 < 50) ? n : rnd(2);
		s->cur[c].retransmits += rnd(5);
		s->cur[c].rejected[SLUICE_REJ_HEADROOM] += rnd(3);
		for (k = 0; k < (int)n; k++) {
			uint64_t us = 500 + rnd(4000) + (tick % 300 > 250 ? 20000 : 0);
			s->cur_h[c].bucket[sluice_hist_bucket(us)]++;
			s->cur_h[c].sum_us += us;
		}
	}
}

static void tick_service(struct svc *s, const struct sluice_aimd_params *ap,
			 const struct sluice_breaker_params *bp, const struct sluice_ladder_params *lp,
			 const struct sluice_headroom_params *hp, const struct sluice_retrystorm_params *rp,
			 struct sluice_cascade *cas, const struct sluice_cascade_params *cp,
			 int suppressed, uint64_t now, uint64_t dt, const struct sluice_event_sink *sink)
{
	struct sluice_service_signals sig;
	struct sluice_breaker_input bi;
	struct sluice_overload_input oi;
	struct sluice_ladder_input li;
	uint32_t peak[4];
	int64_t infl[4];
	int c;

	sluice_signals_compute(s->prev, s->cur, s->prev_h, s->cur_h, dt, bp->slow_call_us, &sig);
	sluice_aimd_tick(&s->aimd, ap, &sig.total_hist, now, sink);

	bi.completed = sig.total.completed;
	bi.errors = sig.total.errors;
	bi.resp_429 = sig.total.resp_429;
	bi.slow = sig.total.slow;
	bi.suppressed = suppressed;
	if (sluice_breaker_tick(&s->brk, bp, &bi, now, sink) & SLUICE_BRK_OPENED)
		sluice_cascade_record_open(cas, cp, sink->service, now, sink);

	memset(&oi, 0, sizeof(oi));
	oi.latency_us = sig.total.p50_us;
	oi.target_us = s->aimd.target_us;
	for (c = 0; c < 4; c++) {
		oi.arrivals[c] = sig.cls[c].arrivals;
		oi.headroom_rej[c] = sig.cls[c].rejected[SLUICE_REJ_HEADROOM];
		li.demand[c] = sig.cls[c].arrivals;
		infl[c] = (int64_t)rnd(s->aimd.limit / 4 + 1);
	}
	li.overloaded = sluice_ladder_overloaded(&s->lad, lp, &oi, NULL);
	sluice_ladder_tick(&s->lad, lp, &li, now, sink);

	sluice_peak_update(&s->peak, infl, now);
	sluice_peak_get(&s->peak, 10, now, peak);
	sluice_retrystorm_tick(&s->rs, rp, sig.total.arrivals, sig.total.retransmits, now, sink);

	s->v.limit = s->aimd.limit;
	sluice_headroom_thresholds(s->aimd.limit, hp, peak, s->v.class_threshold);
	for (c = 0; c < 4; c++)
		s->v.admit_prob[c] = s->lad.admit[c];
	s->v.breaker_state = (uint32_t)s->brk.state;
	s->v.breaker_admit = sluice_breaker_admit(&s->brk, bp);
	s->v.retry_after_s = sluice_breaker_retry_after_s(&s->brk, now);
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
	struct sluice_aimd_params ap;
	struct sluice_breaker_params bp;
	struct sluice_ladder_params lp;
	struct sluice_headroom_params hp;
	struct sluice_retrystorm_params rp;
	struct sluice_cascade_params cp;
	struct sluice_cascade cas;
	struct svc *s = calloc((size_t)nsvc, sizeof(*s));
	const uint64_t dt = 100000000ull;
	double t_ctl = 0, t0, dt_tick;
	double *per = calloc((size_t)ticks, sizeof(double));
	int i, t;

	sluice_aimd_params_default(&ap);
	ap.target_us = 8000;
	sluice_breaker_params_default(&bp);
	sluice_ladder_params_default(&lp);
	sluice_headroom_params_default(&hp);
	sluice_retrystorm_params_default(&rp);
	sluice_cascade_params_default(&cp);
	sluice_cascade_init(&cas);
	for (i = 0; i < nsvc; i++) {
		sluice_aimd_init(&s[i].aimd, &ap, 0);
		sluice_breaker_init(&s[i].brk, (uint64_t)i, 0);
		sluice_ladder_init(&s[i].lad, 0);
		sluice_peak_init(&s[i].peak);
		sluice_retrystorm_init(&s[i].rs, 0);
	}
	for (t = 1; t <= ticks; t++) {
		uint64_t now = (uint64_t)t * dt;
		int supp;
		for (i = 0; i < nsvc; i++)
			traffic(&s[i], i, (uint64_t)t);   /* not timed: the BPF side */
		t0 = now_s();
		supp = sluice_cascade_tick(&cas, &cp, now, NULL);
		for (i = 0; i < nsvc; i++) {
			struct sluice_event_sink sink = { count_ev, NULL, "svc" };
			tick_service(&s[i], &ap, &bp, &lp, &hp, &rp, &cas, &cp, supp, now, dt, &sink);
		}
		dt_tick = now_s() - t0;
		t_ctl += dt_tick;
		per[t - 1] = dt_tick;
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
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		run(sizes[i], ticks);
	printf("events=%llu (goal: < 1000 us per tick at 1000 services)\n",
	       (unsigned long long)events);
	return 0;
}
