/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Crafted frames for BPF_PROG_TEST_RUN: Ethernet (+VLAN) / IPv4 or IPv6 / TCP (+options,
 * payload), with correct checksums, and a checksum verifier for replies. */
#ifndef SLUICE_PKTBUILD_H
#define SLUICE_PKTBUILD_H

#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>

struct pkt_spec {
	int v6;
	int vlan;                 /* 802.1Q VID, 0 = untagged */
	const char *src, *dst;    /* textual addresses */
	uint16_t sport, dport;
	uint32_t seq, ack;
	int syn, ackf, fin, rst, psh;
	uint8_t dscp;
	int tcp_opts;             /* bytes of TCP options (multiple of 4; NOPs) */
	int ip_opts;              /* IPv4: bytes of IP options (multiple of 4; NOPs) */
	int frag;                 /* 1: first fragment (more to come), 2: a later one (IPv4 MF /
	                           * offset; IPv6 through an 'F' in ext) */
	const char *ext;          /* IPv6 extension headers in order, 8 bytes each: H hop-by-hop,
	                           * D destination options, R routing (segments left 0),
	                           * F fragment (as frag says) */
	const void *payload;
	size_t payload_len;
};

static const uint8_t MAC_CLIENT[6] = { 0x02, 0, 0, 0, 0, 0x01 };
static const uint8_t MAC_SERVER[6] = { 0x02, 0, 0, 0, 0, 0x02 };

static uint32_t csum_add(uint32_t sum, const void *data, size_t len)
{
	const uint8_t *p = data;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)(p[len - 1] << 8);
	return sum;
}

static uint16_t csum_finish(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Checksum of the TCP segment at tcp (len bytes) under the given IP header: 0 when valid. */
static uint16_t tcp_verify(const void *iph, int v6, const void *tcp, size_t len)
{
	uint32_t sum = 0;

	if (v6) {
		const struct ipv6hdr *ip6 = iph;
		sum = csum_add(sum, &ip6->saddr, 32);
	} else {
		const struct iphdr *ip = iph;
		sum = csum_add(sum, &ip->saddr, 8);
	}
	sum += IPPROTO_TCP + (uint32_t)len;
	sum = csum_add(sum, tcp, len);
	return csum_finish(sum);
}

/* The three segments of the handshake before a client's first segment `first` (seq = client
 * ISN + 1, ack = server ISN + 1): the client's SYN, the server's SYN-ACK, the client's ACK. */
static inline void handshake_of(const struct pkt_spec *first, struct pkt_spec *syn, struct pkt_spec *sa,
			 struct pkt_spec *ack)
{
	*syn = *first, *sa = *first, *ack = *first;
	syn->payload = NULL, syn->payload_len = 0, syn->psh = 0, syn->ackf = 0, syn->ack = 0;
	syn->syn = 1, syn->seq = first->seq - 1, syn->tcp_opts = 20;
	sa->src = first->dst, sa->dst = first->src, sa->sport = first->dport, sa->dport = first->sport;
	sa->payload = NULL, sa->payload_len = 0, sa->psh = 0, sa->syn = 1, sa->ackf = 1;
	sa->tcp_opts = 20, sa->seq = first->ack - 1, sa->ack = first->seq;
	ack->payload = NULL, ack->payload_len = 0, ack->psh = 0, ack->ackf = 1;
}

static size_t build_pkt(uint8_t *buf, const struct pkt_spec *s)
{
	uint8_t *p = buf;
	struct ethhdr *eth = (struct ethhdr *)p;
	size_t tcp_len = sizeof(struct tcphdr) + (size_t)s->tcp_opts + s->payload_len;
	size_t n_ext = s->ext ? strlen(s->ext) : 0;

	memcpy(eth->h_dest, MAC_SERVER, 6);
	memcpy(eth->h_source, MAC_CLIENT, 6);
	p += sizeof(*eth);
	if (s->vlan) {
		eth->h_proto = htons(ETH_P_8021Q);
		uint16_t tci = htons((uint16_t)s->vlan), proto = htons(s->v6 ? ETH_P_IPV6 : ETH_P_IP);
		memcpy(p, &tci, 2);
		memcpy(p + 2, &proto, 2);
		p += 4;
	} else {
		eth->h_proto = htons(s->v6 ? ETH_P_IPV6 : ETH_P_IP);
	}
	void *iph = p;
	if (s->v6) {
		struct ipv6hdr *ip6 = (struct ipv6hdr *)p;
		memset(ip6, 0, sizeof(*ip6));
		ip6->version = 6;
		ip6->priority = s->dscp >> 2;
		ip6->flow_lbl[0] = (uint8_t)((s->dscp & 3) << 6);
		ip6->payload_len = htons((uint16_t)(tcp_len + 8 * n_ext));
		ip6->nexthdr = IPPROTO_TCP;
		ip6->hop_limit = 64;
		inet_pton(AF_INET6, s->src, &ip6->saddr);
		inet_pton(AF_INET6, s->dst, &ip6->daddr);
		p += sizeof(*ip6);
		uint8_t *next = &ip6->nexthdr;
		for (size_t i = 0; i < n_ext; i++) {
			char t = s->ext[i];
			*next = t == 'H' ? 0 : t == 'D' ? 60 : t == 'R' ? 43 : 44;
			memset(p, 0, 8);
			p[0] = IPPROTO_TCP;
			if (t == 'H' || t == 'D') {
				p[2] = 1, p[3] = 4;          /* PadN over the 4 bytes left */
			} else if (t == 'F') {
				uint16_t fo = htons((uint16_t)(s->frag == 2 ? 8 << 3 : 1)); /* M */
				memcpy(p + 2, &fo, 2);
				p[7] = 0x77;                  /* identification */
			}
			next = p;
			p += 8;
		}
	} else {
		struct iphdr *ip = (struct iphdr *)p;
		memset(ip, 0, sizeof(*ip));
		ip->version = 4;
		ip->ihl = (uint8_t)(5 + s->ip_opts / 4);
		ip->tos = (uint8_t)(s->dscp << 2);
		ip->tot_len = htons((uint16_t)(sizeof(*ip) + (size_t)s->ip_opts + tcp_len));
		ip->ttl = 64;
		ip->protocol = IPPROTO_TCP;
		if (s->frag)
			ip->frag_off = htons(s->frag == 2 ? 8 : 0x2000);
		inet_pton(AF_INET, s->src, &ip->saddr);
		inet_pton(AF_INET, s->dst, &ip->daddr);
		memset(p + sizeof(*ip), 1, (size_t)s->ip_opts); /* NOP options */
		ip->check = htons(csum_finish(csum_add(0, ip, sizeof(*ip) + (size_t)s->ip_opts)));
		p += sizeof(*ip) + (size_t)s->ip_opts;
	}
	struct tcphdr *tcp = (struct tcphdr *)p;
	memset(tcp, 0, sizeof(*tcp));
	tcp->source = htons(s->sport);
	tcp->dest = htons(s->dport);
	tcp->seq = htonl(s->seq);
	tcp->ack_seq = htonl(s->ack);
	tcp->doff = (uint16_t)((sizeof(*tcp) + (size_t)s->tcp_opts) / 4);
	tcp->syn = s->syn;
	tcp->ack = s->ackf;
	tcp->fin = s->fin;
	tcp->rst = s->rst;
	tcp->psh = s->psh;
	tcp->window = htons(64240);
	p += sizeof(*tcp);
	memset(p, 1, (size_t)s->tcp_opts); /* NOP options */
	p += s->tcp_opts;
	if (s->payload_len)
		memcpy(p, s->payload, s->payload_len);
	p += s->payload_len;
	tcp->check = htons(tcp_verify(iph, s->v6, tcp, tcp_len)); /* computed with check = 0 */
	return (size_t)(p - buf);
}

#endif
