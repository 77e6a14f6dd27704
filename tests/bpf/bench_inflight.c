// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Contention of the in-flight accounting across CPUs (benchmark, not a test: it never fails
 * on time). One thread pinned per CPU runs the accounting of one admitted unit (slot taken
 * against a threshold, then given back: tests/bpf/inflight_unit.bpf.c) REPEAT times in the
 * kernel with BPF_PROG_TEST_RUN, first on CPU 0 alone, then on every CPU at once.
 *
 *   build/bench/bench_inflight [REPEAT] [ROUNDS]
 *
 * Prints the median of ROUNDS (default 5) rounds (a round on every CPU counts only when the
 * threads ran together for at least 90 % of the longest run; `rounds` says how many did; when
 * none did, a comment line says so and every round counts):
 *   inflight: cpus N ns_per_unit X units_per_s_per_core Y rounds K
 *   inflight_scaling: cpus N per_core_vs_one_cpu R
 * and checks that in-flight is back to exactly 0 after each round (exit 1 otherwise). */
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

/* In-flight of service 0 as admission sees it: the shared count and the per-CPU stripes. */
static long long inflight_now(struct inflight_unit_bpf *sk)
{
	struct sluice_maps m;
	struct sluice_inflight in;

	memset(&m, -1, sizeof(m));
	m.ncpus = libbpf_num_possible_cpus();
	m.inflight = bpf_map__fd(sk->maps.inflight);
	m.inflight_released = bpf_map__fd(sk->maps.inflight_released);
	m.inflight_pcpu = bpf_map__fd(sk->maps.inflight_pcpu);
	if (maps_read_inflight(&m, 0, &in))
		return -1000000;
	return in.total;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
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
	double got[2][64], apart[64];
	int n_got[2] = { 0, 0 }, n_apart = 0;
	int ns_cpus[2] = { 1, online };

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
		v.class_threshold[c] = 1000000;
	g.heartbeat_ns = monotonic_ns();
	if (bpf_map_update_elem(bpf_map__fd(sk->maps.verdicts), &zero, &v, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(sk->maps.globals), &zero, &g, BPF_ANY))
		return 1;
	if (rounds > 64)
		rounds = 64;
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < 2; i++) {
			double ns, overlap;

			if (round_on(ns_cpus[i], bpf_program__fd(sk->progs.unit_cycle), repeat, &ns,
				     &overlap))
				return 1;
			if (i == 0 || overlap >= 0.9)
				got[i][n_got[i]++] = ns;
			else
				apart[n_apart++] = ns;
			long long left = inflight_now(sk);
			if (left != 0) {
				fprintf(stderr, "in-flight after the round: %lld, not 0\n", left);
				return 1;
			}
		}
	}
	double med[2];
	for (int i = 0; i < 2; i++) {
		if (!n_got[i]) {
			/* the host never let them run together: say so, report what ran */
			printf("# no round ran on every CPU together (other work on the host)\n");
			memcpy(got[i], apart, sizeof(apart));
			n_got[i] = n_apart;
		}
		qsort(got[i], (size_t)n_got[i], sizeof(double), cmp_double);
		med[i] = got[i][n_got[i] / 2];
		printf("inflight: cpus %d ns_per_unit %.1f units_per_s_per_core %.0f rounds %d\n",
		       ns_cpus[i], med[i], 1e9 / med[i], n_got[i]);
	}
	printf("inflight_scaling: cpus %d per_core_vs_one_cpu %.2f\n", online, med[0] / med[1]);
	inflight_unit_bpf__destroy(sk);
	return 0;
}
