// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* An experiment, not part of sluice (tests/bench/qdelay.bpf.c says what it measures): attach
 * the first-read probe beside a running sluiced, whose pinned `flows` map it reads, for a
 * number of seconds; then print one JSON line of the waits it saw.
 *   qdelay PIN_DIR PORT SECONDS */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "qdelay.skel.h"

#define QD_BUCKETS 128
struct qd_hist {
	__u64 bucket[QD_BUCKETS];
	__u64 count, sum_ns, reads, no_flow;
};

/* The lower bound of bucket b in ns (4 buckets per power of two). */
static double bucket_low(int b)
{
	int lg = b / 4 + 1, sub = b % 4;

	if (b < 4)
		return b;
	return (double)(1ull << lg) * (1.0 + sub / 4.0);
}

/* The q-quantile, interpolated inside its bucket, in µs. */
static double quantile_us(const struct qd_hist *h, double q)
{
	__u64 rank = (__u64)ceil(q * (double)h->count), seen = 0;

	if (!h->count)
		return 0;
	for (int b = 0; b < QD_BUCKETS; b++) {
		if (seen + h->bucket[b] >= rank) {
			double lo = bucket_low(b), hi = b + 1 < QD_BUCKETS ? bucket_low(b + 1) : lo;

			return (lo + (hi - lo) * (double)(rank - seen) / (double)h->bucket[b]) / 1e3;
		}
		seen += h->bucket[b];
	}
	return bucket_low(QD_BUCKETS - 1) / 1e3;
}

int main(int argc, char **argv)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts);
	struct qdelay_bpf *skel;
	int ncpu = libbpf_num_possible_cpus(), secs;
	struct qd_hist *pc, sum;
	__u32 zero = 0;

	if (argc != 4 || (secs = atoi(argv[3])) <= 0) {
		fprintf(stderr, "usage: qdelay PIN_DIR PORT SECONDS\n");
		return 2;
	}
	opts.pin_root_path = argv[1];
	skel = qdelay_bpf__open_opts(&opts);
	if (!skel)
		return fprintf(stderr, "qdelay: open: %s\n", strerror(errno)), 1;
	skel->rodata->service_port = (__u16)atoi(argv[2]);
	if (qdelay_bpf__load(skel) || qdelay_bpf__attach(skel)) {
		fprintf(stderr, "qdelay: load/attach failed (is sluiced running with pins in %s?)\n",
			argv[1]);
		qdelay_bpf__destroy(skel);
		return 1;
	}
	sleep((unsigned)secs);
	pc = calloc((size_t)ncpu, sizeof(*pc));
	memset(&sum, 0, sizeof(sum));
	if (pc && !bpf_map_lookup_elem(bpf_map__fd(skel->maps.hist), &zero, pc))
		for (int c = 0; c < ncpu; c++) {
			for (int b = 0; b < QD_BUCKETS; b++)
				sum.bucket[b] += pc[c].bucket[b];
			sum.count += pc[c].count;
			sum.sum_ns += pc[c].sum_ns;
			sum.reads += pc[c].reads;
			sum.no_flow += pc[c].no_flow;
		}
	printf("{\"waits\":%llu,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f,"
	       "\"reads\":%llu,\"reads_untracked\":%llu}\n", (unsigned long long)sum.count,
	       quantile_us(&sum, 0.5), quantile_us(&sum, 0.9), quantile_us(&sum, 0.99),
	       sum.count ? (double)sum.sum_ns / (double)sum.count / 1e3 : 0,
	       (unsigned long long)sum.reads, (unsigned long long)sum.no_flow);
	free(pc);
	qdelay_bpf__destroy(skel);
	return 0;
}
