/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Turn a refused SYN, in place, into the RST+ACK its sender expects (RFC 9293 §3.10.7.1:
 * seq 0, ack = SEG.SEQ + SEG.LEN), so connect() fails at once with ECONNREFUSED.
 * The frame keeps its VLAN tags; IP options, IPv6 extension headers, TCP options and any
 * payload are cut, so the RST is never longer than the SYN it answers. */
#ifndef SLUICE_TCP_RESET_H
#define SLUICE_TCP_RESET_H

#include "parse.h"
#include "csum.h"

/* Replies carry no IPv4 options and no IPv6 extension headers: move the TCP header of p back
 * over them, right behind the fixed IP header, and make that header say so (ihl 5, next header
 * TCP). Lengths and checksums are the caller's to set; it also cuts what lies behind the TCP
 * header. Returns 0, or -1 when the frame is not as parsed. */
static __always_inline int drop_ip_options(struct pkt *p, void *data_end)
{
	struct tcphdr th, *dst;

	if (p->l4_off == p->l3_off + (p->v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr)))
		return 0;
	dst = p->v6 ? (void *)(p->ip6 + 1) : (void *)(p->ip4 + 1);
	if ((void *)(dst + 1) > data_end)
		return -1;
	th = *p->tcp;
	*dst = th;
	p->tcp = dst;
	p->l4_off = p->l3_off + (p->v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	if (p->v6) {
		p->ip6->nexthdr = IPPROTO_TCP;
		p->ext_hdrs = 0;
	} else {
		p->ip4->ihl = 5;
	}
	return 0;
}

/* Rewrite headers of p into the RST (does not resize). Returns the new frame length, or 0
 * when this packet cannot be answered. */
static __always_inline __u32 build_syn_reset(struct pkt *p, void *data_end)
{
	struct tcphdr *tcp;
	__u32 seg_len = p->payload_len + 1; /* SYN occupies one sequence number */
	__u32 ack;
	__u16 sport;
	__u8 mac[ETH_ALEN];

	if (drop_ip_options(p, data_end))
		return 0;
	tcp = p->tcp;
	ack = bpf_ntohl(tcp->seq) + seg_len;
	sport = tcp->source;

	__builtin_memcpy(mac, p->eth->h_source, ETH_ALEN);
	__builtin_memcpy(p->eth->h_source, p->eth->h_dest, ETH_ALEN);
	__builtin_memcpy(p->eth->h_dest, mac, ETH_ALEN);

	tcp->source = tcp->dest;
	tcp->dest = sport;
	tcp->seq = 0;
	tcp->ack_seq = bpf_htonl(ack);
	((__u16 *)tcp)[6] = 0;             /* doff, reserved and flags */
	tcp->doff = 5;
	tcp->rst = 1;
	tcp->ack = 1;
	tcp->window = 0;
	tcp->urg_ptr = 0;
	tcp->check = 0;

	if (!p->v6) {
		struct iphdr *ip = p->ip4;
		__be32 a = ip->saddr;

		ip->saddr = ip->daddr;
		ip->daddr = a;
		ip->tot_len = bpf_htons(sizeof(*ip) + sizeof(*tcp));
		ip->id = 0;
		ip->frag_off = bpf_htons(0x4000); /* DF */
		ip->ttl = 64;
		ip->tos = 0;
		ip->check = ipv4_csum(ip);
		tcp->check = tcp_csum_v4(ip, tcp, sizeof(*tcp), 0);
	} else {
		struct ipv6hdr *ip6 = p->ip6;
		struct in6_addr a = ip6->saddr;

		ip6->saddr = ip6->daddr;
		ip6->daddr = a;
		ip6->payload_len = bpf_htons(sizeof(*tcp));
		ip6->hop_limit = 64;
		ip6->priority = 0;
		ip6->flow_lbl[0] = 0;
		ip6->flow_lbl[1] = 0;
		ip6->flow_lbl[2] = 0;
		tcp->check = tcp_csum_v6(ip6, tcp, sizeof(*tcp), 0);
	}
	return p->l4_off + sizeof(*tcp);
}

#endif
