// SPDX-License-Identifier: GPL-2.0
/* Test plumbing only: a clsact filter that counts what it sees and hands every packet on to
 * the next filter (TC_ACT_UNSPEC), to run before or after sluice's on the same hook.
 * counts[0]: packets; counts[1]: TCP-sized packets (at least Ethernet + IPv4 + TCP long) whose
 * linear part is shorter than those headers -- what a driver that leaves headers in page
 * fragments hands the stack. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#define HDRS (14 + 20 + 20)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static void count(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &k);

	if (v)
		__sync_fetch_and_add(v, 1);
}

SEC("tc")
int tc_count(struct __sk_buff *skb)
{
	long linear = (long)skb->data_end - (long)skb->data;

	count(0);
	if (skb->len >= HDRS && linear < HDRS)
		count(1);
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
