// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The daemon's CPU per tick against the number of services, configured and active.
 * Runs sluiced's own tick (daemon_tick: batched map reads, controllers, verdict writes,
 * events, switches, flow GC once a simulated second) against the real BPF object loaded with
 * its per-service maps sized for the config, while BPF_PROG_TEST_RUN makes traffic for the
 * active services, per tick and active service either one unit counted and ended (`unit`:
 * a SYN, the handshake and the client's RST: counters move, no latency sample) or the same
 * unit with a tcp turn in it (`turn`: a query and its answer, so also one latency sample:
 * the tick reads that class's histogram and the controller computes its quantiles, as for
 * every service with requests).
 * CPU time is this thread's (CLOCK_THREAD_CPUTIME_ID) around daemon_tick only; the traffic
 * is not counted. The clock given to the tick advances 100 ms per tick, as sluiced's does.
 * For comparison, "old_reads" is what the tick's reads cost before batching: per service,
 * 4 classes x (class_stats + latency_hist) lookups of the per-CPU maps and the in-flight
 * pair, one syscall and one allocation each (maps_read_class_stats and friends).
 * Benchmark, not a test: it never fails on time.
 *   build/bench/bench_daemon [TICKS [CONFIGURED ACTIVE [TURNS]]]   (default 100 ticks, every
 *   size; TURNS 1: `turn` traffic) */
#include <time.h>
#include "scale.h"

static double thread_cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The reads of the tick before batching, for all configured services. */
static double old_reads_us(const struct daemon *d)
{
	double t0 = thread_cpu_us();

	for (int i = 0; i < d->cfg.n_services; i++) {
		struct sluice_class_stats st;
		struct sluice_hist h;
		struct sluice_inflight inf;

		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			maps_read_class_stats(&d->m, d->idx[i], c, &st);
			maps_read_hist(&d->m, d->idx[i], c, &h);
		}
		maps_read_inflight(&d->m, d->idx[i], &inf);
	}
	return thread_cpu_us() - t0;
}

struct row {
	int configured, active, turns;
	double median, mean, p90, min, max, old_reads;
	unsigned long long ticked, skipped;
	long long hist_lookups, writes;      /* batch syscalls of the measured ticks */
};

/* One tick's traffic to active service i (see the top). */
static void traffic(const struct scale *s, int i, uint16_t sport, int turns)
{
	if (!turns) {
		scale_unit(s, i, sport, 1);
		return;
	}
	scale_unit(s, i, sport, 0);
	scale_turn(s, i, sport, 0);
	scale_turn(s, i, sport, 1);
	scale_rst(s, i, sport, sizeof(SCALE_QUERY) - 1);
}

static int run(int configured, int active, int turns, int ticks, struct row *r)
{
	struct scale *s = scale_setup(configured, 0);
	double *per = calloc((size_t)ticks, sizeof(double)), sum = 0, old = 0;
	unsigned long long now = monotonic_ns();
	const unsigned long long dt = 100000000ull;

	if (!s || !per) {
		free(per);
		if (s)
			scale_free(s);
		return -1;
	}
	/* settle: the first ticks run every controller once and find them quiet; then traffic
	 * until every active service has been seen (at rest, the scan reads one of up to
	 * MAPS_SCAN_PARTS parts per tick), so that every measured tick is one of steady traffic */
	for (int t = 0; t < 3; t++)
		daemon_tick(s->d, now += dt);
	for (int t = -MAPS_SCAN_PARTS; t < ticks; t++) {
		double t0;

		if (t == 0) {
			s->d->ticked = s->d->skipped = 0;
			s->d->rd.hist_syscalls = s->d->vwb.syscalls = s->d->cwb.syscalls = 0;
		}
		/* spread the active services over the configured ones */
		for (int a = 0; a < active; a++)
			traffic(s, (int)((long)a * configured / active),
				(uint16_t)(1024 + (t + MAPS_SCAN_PARTS) % 60000), turns);
		t0 = thread_cpu_us();
		daemon_tick(s->d, now += dt);
		if (t < 0)
			continue;
		per[t] = thread_cpu_us() - t0;
		sum += per[t];
	}
	/* turn traffic that made no latency sample measured nothing it claims to */
	if (turns && active) {
		long long got = 0;

		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			got += maps_reader_samples(&s->d->rd, s->d->idx[0], c);
		if (got < ticks) {
			fprintf(stderr, "bench_daemon: %lld latency samples in %d ticks of turns\n", got,
				ticks);
			free(per);
			scale_free(s);
			return -1;
		}
	}
	for (int k = 0; k < 5; k++)
		old += old_reads_us(s->d);
	qsort(per, (size_t)ticks, sizeof(double), cmp_d);
	*r = (struct row){ .configured = configured, .active = active, .turns = turns,
			   .median = per[ticks / 2],
			   .mean = sum / ticks, .p90 = per[ticks * 9 / 10], .min = per[0],
			   .max = per[ticks - 1], .old_reads = old / 5,
			   .ticked = s->d->ticked, .skipped = s->d->skipped,
			   .hist_lookups = s->d->rd.hist_syscalls,
			   .writes = s->d->vwb.syscalls + s->d->cwb.syscalls };
	free(per);
	scale_free(s);
	return 0;
}

int main(int argc, char **argv)
{
	int ticks = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 100;
	/* configured, active, turns */
	static const int sizes[][3] = { { 1, 1, 0 }, { 100, 100, 0 }, { 100, 10, 0 },
					{ 1000, 1000, 0 }, { 1000, 10, 0 }, { 4096, 4096, 0 },
					{ 4096, 10, 0 },
					{ 1, 1, 1 }, { 100, 100, 1 }, { 1000, 1000, 1 }, { 1000, 10, 1 },
					{ 4096, 4096, 1 } };
	struct row rows[sizeof(sizes) / sizeof(sizes[0])];
	int n = 0, failed = 0;

	size_t count = sizeof(sizes) / sizeof(sizes[0]);
	int one[1][3];

	if (argc > 3) {      /* one size only (profiling) */
		one[0][0] = atoi(argv[2]);
		one[0][1] = atoi(argv[3]);
		one[0][2] = argc > 4 && atoi(argv[4]) > 0;
		count = 1;
	}
	for (size_t i = 0; i < count; i++) {
		const int *sz = argc > 3 ? one[i] : sizes[i];

		if (sz[0] < 1 || sz[1] < 0 || sz[1] > sz[0] ||
		    run(sz[0], sz[1], sz[2], ticks, &rows[n])) {
			fprintf(stderr, "bench_daemon: %d/%d services not measured\n", sz[0], sz[1]);
			failed = 1;
			continue;
		}
		n++;
	}
	printf("# daemon tick CPU (this thread), %d ticks of 100 ms each, %d CPUs; per tick each"
	       " active service gets one tcp unit (unit: SYN, RST, no latency sample) or one unit"
	       " with a turn (turn: also a query and its answer, one latency sample); cpu%% and"
	       " ms_per_s: one core at 10 ticks/s (from the mean); x_1 = median / median of 1"
	       " service with the same traffic; x_all = median / median with every configured"
	       " service active, same traffic\n", ticks, libbpf_num_possible_cpus());
	printf("%10s %7s %7s %10s %9s %9s %9s %8s %9s %11s %7s %6s %12s\n", "configured",
	       "active", "traffic", "median_us", "min_us", "max_us", "p90_us", "cpu%", "ms_per_s",
	       "us_per_act", "x_1", "x_all", "old_reads_us");
	for (int i = 0; i < n; i++) {
		double all = rows[i].median, one_svc = rows[i].median;

		for (int j = 0; j < n; j++) {
			if (rows[j].turns != rows[i].turns)
				continue;
			if (rows[j].configured == rows[i].configured &&
			    rows[j].active == rows[j].configured)
				all = rows[j].median;
			if (rows[j].configured == 1)
				one_svc = rows[j].median;
		}
		printf("%10d %7d %7s %10.1f %9.1f %9.1f %9.1f %8.3f %9.2f %11.2f %7.1f %6.2f %12.1f\n",
		       rows[i].configured, rows[i].active, rows[i].turns ? "turn" : "unit",
		       rows[i].median, rows[i].min, rows[i].max,
		       rows[i].p90, rows[i].mean * 10 / 1e6 * 100, rows[i].mean * 10 / 1e3,
		       rows[i].active ? rows[i].median / rows[i].active : 0,
		       rows[i].median / one_svc, rows[i].median / all, rows[i].old_reads);
	}
	for (int i = 0; i < n; i++)
		printf("# %d/%d %s: controllers run %llu, skipped %llu; histogram batch lookups %.1f,"
		       " verdict and ctl_state batch writes %.1f per tick\n", rows[i].configured,
		       rows[i].active, rows[i].turns ? "turn" : "unit", rows[i].ticked,
		       rows[i].skipped, (double)rows[i].hist_lookups / ticks,
		       (double)rows[i].writes / ticks);
	return failed;
}
