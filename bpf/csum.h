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

/* Sum of n 32-bit words at p, n a constant (headers of a fixed size): a few adds inline,
 * where a bpf_csum_diff call costs a helper call and csum_partial's setup for each header. The
 * 64-bit sum keeps every carry; csum_fold folds them back in, as csum_partial would. The words
 * are read as may_alias: the caller has just zeroed the check field through a 16-bit store,
 * which strict aliasing would otherwise let the compiler move after these 32-bit loads. */
typedef __u32 __attribute__((may_alias)) csum_word;   /* reads the header's own stores */

static __always_inline __u64 sum_words(const void *p, int n)
{
	const csum_word *w = p;
	__u64 s = 0;

#pragma unroll
	for (int i = 0; i < n; i++)
		s += w[i];
	return s;
}

/* Checksum of a 20-byte IPv4 header (no options) with its check field zeroed. */
static __always_inline __u16 ipv4_csum(struct iphdr *ip)
{
	ip->check = 0;
	return csum_fold(sum_words(ip, sizeof(*ip) / 4));
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
	__u64 s = sum_words(&ph, sizeof(ph) / 4) + sum_words(tcp, sizeof(*tcp) / 4);

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
	s = sum_words(&ph, sizeof(ph) / 4) + sum_words(tcp, sizeof(*tcp) / 4);
	s += payload_sum;
	return csum_fold(s);
}

#endif
