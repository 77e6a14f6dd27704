/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Internet checksums for the replies the data path builds (RST, HTTP 429/503). */
#ifndef SLUICE_CSUM_H
#define SLUICE_CSUM_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static __always_inline __u16 csum_fold(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

struct pseudo_v4 {
	__be32 saddr, daddr;
	__u8 zero, proto;
	__be16 len;
};

struct pseudo_v6 {
	struct in6_addr saddr, daddr;
	__be32 len;
	__u8 zero[3], nexthdr;
};

/* Checksum of a 20-byte IPv4 header (no options) with its check field zeroed. */
static __always_inline __u16 ipv4_csum(struct iphdr *ip)
{
	ip->check = 0;
	return csum_fold((__u32)bpf_csum_diff(0, 0, (__be32 *)ip, sizeof(*ip), 0));
}

/* TCP checksum over pseudo-header + 20-byte header (+ a payload whose partial sum is given).
 * tcp->check must be zero. */
static __always_inline __u16 tcp_csum_v4(struct iphdr *ip, struct tcphdr *tcp, __u32 tcp_len,
					 __u32 payload_sum)
{
	struct pseudo_v4 ph = {
		.saddr = ip->saddr, .daddr = ip->daddr, .proto = IPPROTO_TCP,
		.len = bpf_htons(tcp_len),
	};
	__u64 s = (__u32)bpf_csum_diff(0, 0, (__be32 *)&ph, sizeof(ph), 0);

	s += (__u32)bpf_csum_diff(0, 0, (__be32 *)tcp, sizeof(*tcp), 0);
	s += payload_sum;
	return csum_fold(s);
}

static __always_inline __u16 tcp_csum_v6(struct ipv6hdr *ip6, struct tcphdr *tcp, __u32 tcp_len,
					 __u32 payload_sum)
{
	struct pseudo_v6 ph = { .len = bpf_htonl(tcp_len), .nexthdr = IPPROTO_TCP };
	__u64 s;

	__builtin_memcpy(&ph.saddr, &ip6->saddr, 16);
	__builtin_memcpy(&ph.daddr, &ip6->daddr, 16);
	s = (__u32)bpf_csum_diff(0, 0, (__be32 *)&ph, sizeof(ph), 0);
	s += (__u32)bpf_csum_diff(0, 0, (__be32 *)tcp, sizeof(*tcp), 0);
	s += payload_sum;
	return csum_fold(s);
}

#endif
