// SPDX-License-Identifier: GPL-2.0
/* Benchmark plumbing only: an XDP program that drops every frame, for the client end of the
 * veth pair in the raw SYN flood of tools/bench/refusal.sh. The flood's client has no socket
 * for the RSTs that come back: passed up its stack, each would cost the client more than the
 * server spent to send it, and at a few hundred thousand a second the client veth's ring
 * overflows and the RSTs are lost before they are counted. The veth counts every frame it
 * receives before the program runs (rx_packets), so dropping here leaves that count intact.
 * Like xdp_pass.bpf.c, an attached program also makes the veth receive in its own NAPI. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_drop(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
