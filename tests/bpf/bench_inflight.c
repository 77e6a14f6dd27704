// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Contention of the in-flight accounting across CPUs (benchmark, not a test: it never fails
 * on time). One thread pinned per CPU runs the accounting of one admitted unit (slot taken
 * against a threshold, then given back: tests/bpf/inflight_unit.bpf.c) REPEAT times in the
 * kernel with BPF_PROG_TEST_RUN, first on CPU 0 alone, then on every CPU at once; each round
 * twice, alternately: with the in-flight estimate on (as sluiced runs it: a take far below its
 * threshold reads no other CPU's stripe) and off (what every take near its threshold does:
 * read every CPU's stripe).
 *
 *   build/bench/bench_inflight [REPEAT] [ROUNDS]
 *
 * Prints, per mode, the median of ROUNDS (default 5) rounds (a round on every CPU counts only
 * when the threads ran together for at least 90 % of the longest run; `rounds` says how many
 * did; when none did, a comment line says so and every round counts):
 *   inflight: estimate on|off cpus N ns_per_unit X units_per_s_per_core Y rounds K
 *   inflight_scaling: estimate on|off cpus N per_core_vs_one_cpu R
 * and, with two CPUs or more, units taken on CPU 0 and given back on CPU 1 at once, against
 * both halves on CPU 0 alone (BENCH_INFLIGHT_DEBUG=1 prints each round's times to stderr):
 *   inflight_scaling: estimate on|off, taken on cpu 0 and given back on cpu 1 per_core_vs_one_cpu R
 * It checks that in-flight is back to exactly 0 after each round (exit 1 otherwise). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sluice.h"
#include "common/clock.h"
#include "kernel/bpfmaps.h"
#include "inflight_unit.skel.h"

struct worker {
	pthread_t t;
	int cpu, prog_fd, err;
	unsigned repeat;
	double ns;
	unsigned long long t0, t1;       /* CLOCK_MONOTONIC around the run */
	pthread_barrier_t *go;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	unsigned char pkt[64] = { 0 };
	cpu_set_t set;
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = sizeof(pkt),
		    .repeat = w->repeat);

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	w->err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	pthread_barrier_wait(w->go);
	w->t0 = monotonic_ns();
	if (!w->err && bpf_prog_test_run_opts(w->prog_fd, &o))
		w->err = -1;
	w->t1 = monotonic_ns();
	if (!w->err && o.retval != 2 /* XDP_PASS: admitted */)
		w->err = -2;
	w->ns = o.duration; /* mean ns per run */
	return NULL;
}

/* One round on cpus 0..n-1 at once: mean ns per unit over the threads, and how much of the
 * longest run all of them ran together (other work on the host can keep them apart). */
static int round_on(int n, int prog_fd, unsigned repeat, double *ns, double *overlap)
{
	unsigned long long first_end = ~0ull, last_start = 0, longest = 1;

	struct worker w[n];
	pthread_barrier_t go;

	pthread_barrier_init(&go, NULL, (unsigned)n);
	for (int i = 0; i < n; i++) {
		w[i] = (struct worker){ .cpu = i, .prog_fd = prog_fd, .repeat = repeat, .go = &go };
		pthread_create(&w[i].t, NULL, work, &w[i]);
	}
	*ns = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(w[i].t, NULL);
		if (w[i].err) {
			fprintf(stderr, "cpu %d: run failed (%d)\n", i, w[i].err);
			return -1;
		}
		*ns += w[i].ns / n;
		first_end = w[i].t1 < first_end ? w[i].t1 : first_end;
		last_start = w[i].t0 > last_start ? w[i].t0 : last_start;
		longest = w[i].t1 - w[i].t0 > longest ? w[i].t1 - w[i].t0 : longest;
	}
	*overlap = first_end > last_start ? (double)(first_end - last_start) / (double)longest : 0;
	pthread_barrier_destroy(&go);
	return 0;
}

/* Units taken on CPU 0 and given back on CPU 1 at once (a request read on one CPU and
 * answered from another): the mean ns of each thread's operation, n_take takes and n_release
 * releases, sized by the caller so that both threads run about as long; overlap: how much of
 * the shorter run the two ran together. */
static int round_cross(int take_fd, int release_fd, unsigned n_take, unsigned n_release,
		       double *take_ns, double *release_ns, double *overlap)
{
	unsigned long long first_end, last_start, shortest;
	struct worker w[2];
	pthread_barrier_t go;

	pthread_barrier_init(&go, NULL, 2);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct worker){ .cpu = i, .prog_fd = i ? release_fd : take_fd,
					.repeat = i ? n_release : n_take, .go = &go };
		pthread_create(&w[i].t, NULL, work, &w[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(w[i].t, NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < 2; i++)
		if (w[i].err) {
			fprintf(stderr, "cpu %d: run failed (%d)\n", i, w[i].err);
			return -1;
		}
	*take_ns = w[0].ns;
	*release_ns = w[1].ns;
	first_end = w[0].t1 < w[1].t1 ? w[0].t1 : w[1].t1;
	last_start = w[0].t0 > w[1].t0 ? w[0].t0 : w[1].t0;
	shortest = w[0].t1 - w[0].t0 < w[1].t1 - w[1].t0 ? w[0].t1 - w[0].t0 : w[1].t1 - w[1].t0;
	*overlap = first_end > last_start ? (double)(first_end - last_start) / (double)(shortest ?: 1) : 0;
	return 0;
}

/* n runs of prog on CPU 0, untimed beyond the mean ns it returns. */
static double run_on_cpu0(int prog_fd, unsigned n)
{
	pthread_barrier_t go;
	struct worker w = { .cpu = 0, .prog_fd = prog_fd, .repeat = n, .go = &go };

	if (!n)
		return 0;
	pthread_barrier_init(&go, NULL, 1);
	pthread_create(&w.t, NULL, work, &w);
	pthread_join(w.t, NULL);
	pthread_barrier_destroy(&go);
	return w.err ? -1 : w.ns;
}

/* The maps of the loaded object that reading in-flight and the estimate's program need. */
static void unit_maps(struct inflight_unit_bpf *sk, struct sluice_maps *m)
{
	memset(m, -1, sizeof(*m));
	m->ncpus = libbpf_num_possible_cpus();
	m->inflight = bpf_map__fd(sk->maps.inflight);
	m->inflight_released = bpf_map__fd(sk->maps.inflight_released);
	m->inflight_pcpu = bpf_map__fd(sk->maps.inflight_pcpu);
	m->publish_prog = bpf_program__fd(sk->progs.sluice_publish_stripes);
}

/* In-flight of service 0 as admission sees it: the shared count and the per-CPU stripes. */
static long long inflight_now(struct inflight_unit_bpf *sk)
{
	struct sluice_maps m;
	struct sluice_inflight in;

	unit_maps(sk, &m);
	if (maps_read_inflight(&m, 0, &in))
		return -1000000;
	return in.total;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The estimate on (filled as sluiced does after attaching: maps_fold_estimate) or off. */
static int set_estimate(struct inflight_unit_bpf *sk, int on)
{
	struct sluice_maps m;

	if (!on) {
		sk->bss->sluice_estimate_cpus = 0;
		return 0;
	}
	unit_maps(sk, &m);
	if (maps_fold_estimate(&m) <= 0) {
		fprintf(stderr, "cannot turn the in-flight estimate on\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned repeat = argc > 1 ? (unsigned)atoi(argv[1]) : 2000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	int online = (int)sysconf(_SC_NPROCESSORS_ONLN);
	struct inflight_unit_bpf *sk = inflight_unit_bpf__open();
	struct sluice_verdict v = { .limit = 1000000 };
	struct sluice_globals g = { .heartbeat_timeout_ns = 3600ull * 1000000000ull };
	struct bpf_map *map;
	__u32 zero = 0;
	/* [mode: 0 off, 1 on][0: one CPU, 1: every CPU] */
	static double got[2][2][64], apart[2][64];
	int n_got[2][2] = { { 0, 0 }, { 0, 0 } }, n_apart[2] = { 0, 0 };
	int ns_cpus[2] = { 1, online };
	static const char *const mode_name[2] = { "off", "on" };

	if (!sk)
		return 1;
	bpf_object__for_each_map(map, sk->obj)
		bpf_map__set_pin_path(map, NULL);
	if (inflight_unit_bpf__load(sk)) {
		fprintf(stderr, "cannot load the BPF object\n");
		return 1;
	}
	/* A threshold every class is compared with (so admission reads the count), never
	 * reached: every unit is admitted. */
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		v.class_threshold[c] = 1u << 30;
	g.heartbeat_ns = monotonic_ns();
	if (bpf_map_update_elem(bpf_map__fd(sk->maps.verdicts), &zero, &v, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(sk->maps.globals), &zero, &g, BPF_ANY))
		return 1;
	if (rounds > 64)
		rounds = 64;
	for (int r = 0; r < rounds; r++) {
		for (int mode = 0; mode < 2; mode++) {
			if (set_estimate(sk, mode))
				return 1;
			for (int i = 0; i < 2; i++) {
				double ns, overlap;

				if (round_on(ns_cpus[i], bpf_program__fd(sk->progs.unit_cycle), repeat,
					     &ns, &overlap))
					return 1;
				if (i == 0 || overlap >= 0.9)
					got[mode][i][n_got[mode][i]++] = ns;
				else
					apart[mode][n_apart[mode]++] = ns;
				long long left = inflight_now(sk);
				if (left != 0) {
					fprintf(stderr, "in-flight after the round: %lld, not 0\n", left);
					return 1;
				}
			}
		}
	}
	for (int mode = 1; online >= 2 && mode >= 0; mode--) {
		/* what one unit's take and release cost split over two CPUs, against both on one */
		double ratio[64];
		int n_ratio = 0, tfd = bpf_program__fd(sk->progs.unit_take),
		    rfd = bpf_program__fd(sk->progs.unit_release);

		if (set_estimate(sk, mode))
			return 1;
		for (int r = 0; r < rounds; r++) {
			double a = run_on_cpu0(tfd, repeat), b = run_on_cpu0(rfd, repeat), x, y, ov;
			unsigned n_rel;

			if (a <= 0 || b <= 0)
				return 1;
			n_rel = (unsigned)(repeat * a / b);
			if (round_cross(tfd, rfd, repeat, n_rel, &x, &y, &ov))
				return 1;
			/* give back or take what the two runs left apart: in-flight to 0 */
			if ((n_rel > repeat && run_on_cpu0(tfd, n_rel - repeat) < 0) ||
			    (n_rel < repeat && run_on_cpu0(rfd, repeat - n_rel) < 0))
				return 1;
			long long left = inflight_now(sk);
			if (left != 0) {
				fprintf(stderr, "in-flight after the round: %lld, not 0\n", left);
				return 1;
			}
			if (getenv("BENCH_INFLIGHT_DEBUG"))
				fprintf(stderr, "estimate %s: take %.0f release %.0f ns alone; %.0f %.0f "
					"across, overlap %.2f\n", mode_name[mode], a, b, x, y, ov);
			if (ov >= 0.9)
				ratio[n_ratio++] = (a + b) / (x + y);
		}
		if (n_ratio) {
			qsort(ratio, (size_t)n_ratio, sizeof(double), cmp_double);
			printf("inflight_scaling: estimate %s, taken on cpu 0 and given back on cpu 1 "
			       "per_core_vs_one_cpu %.2f rounds %d\n", mode_name[mode],
			       ratio[n_ratio / 2], n_ratio);
		} else {
			printf("# estimate %s, across cpus: no round ran on both CPUs together\n",
			       mode_name[mode]);
		}
	}
	for (int mode = 1; mode >= 0; mode--) {
		double med[2];

		for (int i = 0; i < 2; i++) {
			if (!n_got[mode][i]) {
				/* the host never let them run together: say so, report what ran */
				printf("# estimate %s: no round ran on every CPU together (other work "
				       "on the host)\n", mode_name[mode]);
				memcpy(got[mode][i], apart[mode], sizeof(apart[mode]));
				n_got[mode][i] = n_apart[mode];
			}
			qsort(got[mode][i], (size_t)n_got[mode][i], sizeof(double), cmp_double);
			med[i] = got[mode][i][n_got[mode][i] / 2];
			printf("inflight: estimate %s cpus %d ns_per_unit %.1f units_per_s_per_core "
			       "%.0f rounds %d\n", mode_name[mode], ns_cpus[i], med[i], 1e9 / med[i],
			       n_got[mode][i]);
		}
		printf("inflight_scaling: estimate %s cpus %d per_core_vs_one_cpu %.2f\n",
		       mode_name[mode], online, med[0] / med[1]);
	}
	inflight_unit_bpf__destroy(sk);
	return 0;
}
