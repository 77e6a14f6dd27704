// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Benchmark baseline: the emptiest XDP and TC programs, run side by side with sluice's in
 * tests/bpf/bench_pktcost.c so that per-packet cost is reported as ns over "nothing". */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "stream_ctl.h"

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

/* A stream of new connections, back to back in one BPF_PROG_TEST_RUN (repeat = n): each run
 * writes the next source port into the frame, then tail-calls the program under test
 * (stream_target[0]: sluice's XDP program, or empty_xdp_frags for the baseline). So a new
 * SYN is timed as a burst brings them, one after another on a CPU whose shared tables are
 * warm, and not only one per system call, where every table is cold again. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stream_ctl);
} stream_ctl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stream_target SEC(".maps");

/* What stream_xdp touches for evict_lines: 32 MiB, far beyond the CPU's caches. */
struct evict_line {
	__u64 word[8];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 19);
	__type(key, __u32);
	__type(value, struct evict_line);
} evict_table SEC(".maps");

SEC("xdp.frags")
int stream_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct stream_ctl *c;
	__u32 zero = 0;
	__u16 port;
	__u8 *p;

	c = bpf_map_lookup_elem(&stream_ctl, &zero);
	if (!c)
		return XDP_ABORTED;
	p = data + (c->sport_off & 127);
	if ((void *)(p + 2) > end)
		return XDP_ABORTED;
	port = c->base + c->next * c->stride;
	/* Scattered lines, another set each run (multiplicative hashing of run and line). */
	for (__u32 i = 0; i < 256 && i < c->evict_lines; i++) {
		__u32 k = (c->next * 2654435761u + i * 2246822519u) & ((1 << 19) - 1);
		struct evict_line *l = bpf_map_lookup_elem(&evict_table, &k);

		if (l)
			l->word[0]++;
	}
	c->next++;
	p[0] = port >> 8;
	p[1] = port & 0xff;
	bpf_tail_call(ctx, &stream_target, 0);
	return XDP_ABORTED;
}

/* The same stream for TC programs (stream_target_tc[0]: sluice's TC ingress program, or
 * empty_tc for the baseline): requests on as many established connections, one after another,
 * as a busy NIC queue brings them. A path that rewrites the packet gets it back first in every
 * run (frame_len), on both sides. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stream_target_tc SEC(".maps");

SEC("tc")
int stream_tc(struct __sk_buff *skb)
{
	struct stream_ctl *c;
	__u32 zero = 0, len;
	__be16 port;

	c = bpf_map_lookup_elem(&stream_ctl, &zero);
	if (!c)
		return TC_ACT_SHOT;
	len = c->frame_len;
	if (len) {
		if (len > STREAM_FRAME_MAX || bpf_skb_change_tail(skb, len, 0) ||
		    bpf_skb_store_bytes(skb, 0, c->frame, len, 0))
			return TC_ACT_SHOT;
	}
	port = bpf_htons((__u16)(c->base + c->next++));
	if (bpf_skb_store_bytes(skb, c->sport_off & 127, &port, sizeof(port), 0))
		return TC_ACT_SHOT;
	bpf_tail_call(skb, &stream_target_tc, 0);
	return TC_ACT_SHOT;
}

/* The baseline of a stream: its frame rewrite and tail call cost the same on both sides. */
SEC("xdp.frags")
int empty_xdp_frags(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
