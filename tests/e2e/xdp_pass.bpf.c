// SPDX-License-Identifier: GPL-2.0
/* Test plumbing only: a pass-through XDP program for the client end of a test veth pair.
 * Frames sent with XDP_TX by sluice on the server end are delivered promptly only when the
 * receiving veth runs its own NAPI, which an attached XDP program guarantees (GRO alone left
 * RSTs waiting for hundreds of milliseconds on kernel 6.18). Real NICs need nothing like it. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The same for a client veth whose peer has a jumbo MTU: veth attaches XDP natively beside a
 * peer MTU above a page only for a program that takes multi-buffer frames. */
SEC("xdp.frags")
int xdp_pass_frags(struct xdp_md *ctx)
{
	return XDP_PASS;
}
