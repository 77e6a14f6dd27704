// SPDX-License-Identifier: GPL-2.0
/* Test plumbing only: VLAN 100 at TC, for kernels built without 802.1Q devices or VLAN-
 * filtering bridges. vlan_out tags what a device sends (the tag goes into skb metadata, as a
 * VLAN device on a NIC with tx VLAN offload does, so the peer's XDP sees the frame without
 * it); vlan_in takes the tag off what arrives tagged 100 and drops what arrives untagged, as
 * a port that carries only that VLAN does. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define VID 100

SEC("classifier/vlan_out")
int vlan_out(struct __sk_buff *skb)
{
	if (!skb->vlan_present)
		bpf_skb_vlan_push(skb, bpf_htons(ETH_P_8021Q), VID);
	return TC_ACT_UNSPEC;
}

SEC("classifier/vlan_in")
int vlan_in(struct __sk_buff *skb)
{
	if (!skb->vlan_present || (skb->vlan_tci & 0xfff) != VID)
		return TC_ACT_SHOT;
	bpf_skb_vlan_pop(skb);
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
