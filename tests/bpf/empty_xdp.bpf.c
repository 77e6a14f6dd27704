// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Benchmark baseline: the emptiest XDP and TC programs, run side by side with sluice's in
 * tests/bpf/bench_pktcost.c so that per-packet cost is reported as ns over "nothing". */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#define SEC(name) __attribute__((section(name), used))

SEC("xdp")
int empty_xdp(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("tc")
int empty_tc(struct __sk_buff *skb)
{
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
