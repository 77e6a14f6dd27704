// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The in-flight accounting alone, as the data path does it (bpf/admit.h): for the contention
 * benchmark (bench_inflight) and the admission-bound test (test_ownership). Service 0,
 * class L2, as an http request takes and gives back its slot. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "sluice.h"
#include "maps.h"
#include "parse.h"
#include "admit.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* 1 when one unit is admitted (its slot taken). */
static __always_inline int admit_one(void)
{
	struct sluice_class_stats *st = class_stats_of(0, 2);
	int reason = 0;

	return st && admit_unit(0, 2, bpf_ktime_get_ns(), st, &reason, 1, NULL);
}

/* One unit admitted and given back at once. */
SEC("xdp")
int unit_cycle(struct xdp_md *ctx)
{
	if (!admit_one())
		return XDP_DROP;
	release_unit(0, 2);
	return XDP_PASS;
}

/* One unit admitted and kept (XDP_PASS), or refused (XDP_DROP). */
SEC("xdp")
int unit_take(struct xdp_md *ctx)
{
	return admit_one() ? XDP_PASS : XDP_DROP;
}

/* One unit given back (taken by unit_take, maybe on another CPU). */
SEC("xdp")
int unit_release(struct xdp_md *ctx)
{
	release_unit(0, 2);
	return XDP_PASS;
}

/* The in-flight estimate filled and turned on, as sluiced does after attaching. */
SEC("syscall")
int sluice_publish_stripes(struct sluice_publish_stripes *arg)
{
	return publish_stripes(arg);
}
