/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Packet parsing shared by the XDP and TC programs: Ethernet (+ up to two 802.1Q/802.1ad tags),
 * IPv4 (past its options), IPv6 (past hop-by-hop, routing, destination-options and fragment
 * headers), TCP. The first fragment of a fragmented TCP segment carries the TCP header and is
 * judged like any segment; later fragments carry none and pass (without their first they are
 * never reassembled). A first fragment too short to be judged -- its TCP header, or the first
 * bytes of its data (where a request's method is), in the fragments after it -- is PKT_DEEP,
 * dropped at ingress: were it passed, the host would put the segment back together and take a
 * request or a SYN sluice never saw (no stack splits a segment that early: a link's MTU of 68
 * still leaves a first fragment 48 bytes of TCP, IPv6's 1280 far more).
 * Every header access is bounds-checked against data_end; anything that does not parse is
 * PKT_MALFORMED and the caller passes it untouched (a header past data_end in a frame that goes
 * on past it is PKT_SHORT, below). Works on direct packet pointers, so the
 * same code serves xdp_md (headers in the first buffer) and __sk_buff (TC pulls headers into
 * the linear part first when a driver left them outside it). */
#ifndef SLUICE_PARSE_H
#define SLUICE_PARSE_H

#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>

#ifndef ETH_P_8021AD
#define ETH_P_8021AD 0x88A8
#endif

/* PKT_DEEP: an IPv6 chain of more extension headers than SLUICE_MAX_EXT_HDRS, which sluice
 * cannot follow to its end, or a first fragment too short to judge (SLUICE_FRAG_MIN_DATA):
 * were it passed, a client could put any segment beyond judgement.
 * PKT_SHORT: a header goes on past the bytes the program can read directly while the frame
 * goes on too (XDP's first buffer of a multi-buffer frame, an skb's linear part): long
 * extension headers can put a SYN or a request there. TC pulls the headers in and parses
 * again; XDP cannot, so its parse says PKT_DEEP (a chain it cannot follow: dropped). */
enum pkt_kind { PKT_TCP, PKT_OTHER, PKT_MALFORMED, PKT_DEEP, PKT_SHORT };

/* Bytes of TCP data a first fragment must carry besides the TCP header: a request's method
 * ("OPTIONS ", "CONNECT " are the longest) is judged from them. */
#define SLUICE_FRAG_MIN_DATA 8

#define SLUICE_MAX_EXT_HDRS 4

#ifndef IPPROTO_FRAGMENT
#define IPPROTO_FRAGMENT 44
#endif

struct vlan_hdr {
	__be16 tci;
	__be16 encap_proto;
};

struct pkt {
	struct ethhdr *eth;
	struct iphdr *ip4;               /* exactly one of ip4 / ip6 is set for PKT_TCP */
	struct ipv6hdr *ip6;
	struct tcphdr *tcp;
	__u32 l3_off;                    /* offsets from the start of the frame */
	__u32 l4_off;
	__u32 payload_off;
	__u32 payload_len;
	__u8 dscp;
	__u8 v6;                         /* branch on this, not on ip4/ip6 being NULL: the
					  * verifier follows a known constant, not pointer nullness */
	__u8 ext_hdrs;                   /* IPv6 extension headers skipped */
	__u8 big;                        /* length taken from the frame (BIG TCP, see below) */
};

/* frame_len: the whole frame's length, which may exceed data_end - data (an skb's non-linear
 * part). A length field of 0 -- IPv4 tot_len, IPv6 payload_len -- is how BIG TCP (GRO/GSO
 * packets over 64 KiB) says "the rest of the frame"; IPv6 may also carry a hop-by-hop jumbo
 * option, skipped like any hop-by-hop header (it counts in ext_hdrs and is one of the
 * SLUICE_MAX_EXT_HDRS the walk follows). Such a packet is parsed with its length taken from
 * the frame, never called malformed, and decided like any other. A length field that says more
 * than the frame holds is malformed: the host drops such a packet (a truncated one), so sluice
 * must not count it, start a request on it or end a connection by it. */
static __always_inline enum pkt_kind parse_frame(void *data, void *data_end, __u32 frame_len,
						 enum pkt_kind cut, struct pkt *p)
{
	/* cut: what a header that ends past data_end is -- PKT_MALFORMED when the frame ends
	 * there too, else what the caller makes of headers out of its reach (PKT_SHORT: TC
	 * pulls them in; PKT_DEEP: XDP cannot) */
	struct ethhdr *eth = data;
	void *cur;
	__u16 proto;
	__u32 l4_len;
	int first_frag = 0;

	if ((void *)(eth + 1) > data_end)
		return cut;
	p->eth = eth;
	p->ip4 = 0;
	p->ip6 = 0;
	p->ext_hdrs = 0;
	p->big = 0;
	cur = eth + 1;
	proto = eth->h_proto;

#pragma unroll
	for (int i = 0; i < 2; i++) {
		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		struct vlan_hdr *vh = cur;
		if ((void *)(vh + 1) > data_end)
			return cut;
		proto = vh->encap_proto;
		cur = vh + 1;
	}
	p->l3_off = cur - data;

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = cur;
		__u32 ihl, tot;

		if ((void *)(ip + 1) > data_end)
			return cut;
		ihl = ip->ihl * 4;
		if (ip->version != 4 || ihl < sizeof(*ip))
			return PKT_MALFORMED;
		/* Protocol and fragment offset first: both sit in the fixed header, and a packet
		 * that is not sluice's must pass even when its options run past what the program
		 * can read (a NIC that splits headers from the first bytes on). */
		if (ip->protocol != IPPROTO_TCP)
			return PKT_OTHER;
		/* Fragments other than the first carry no TCP header: nothing to judge. */
		if (ip->frag_off & bpf_htons(0x1fff))
			return PKT_OTHER;
		if ((void *)ip + ihl > data_end)
			return cut;
		first_frag = !!(ip->frag_off & bpf_htons(0x2000));   /* more fragments */

		tot = bpf_ntohs(ip->tot_len);
		if (!tot && frame_len > p->l3_off) {
			tot = frame_len - p->l3_off;
			p->big = 1;
		}
		if (tot < ihl || tot > frame_len - p->l3_off)
			return PKT_MALFORMED;
		p->ip4 = ip;
		p->v6 = 0;
		p->dscp = ip->tos >> 2;
		cur = (void *)ip + ihl;
		l4_len = tot - ihl;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = cur;
		__u32 ip_len, ip_room;
		__u8 nexthdr;

		if ((void *)(ip6 + 1) > data_end)
			return cut;
		if (ip6->version != 6)
			return PKT_MALFORMED;
		p->ip6 = ip6;
		p->v6 = 1;
		p->dscp = ((ip6->priority << 4) | (ip6->flow_lbl[0] >> 4)) >> 2;
		nexthdr = ip6->nexthdr;
		cur = ip6 + 1;
		l4_len = bpf_ntohs(ip6->payload_len);
		if (frame_len < p->l3_off + sizeof(*ip6))
			return PKT_MALFORMED;
		ip_room = frame_len - p->l3_off - sizeof(*ip6);
		if (!l4_len) {
			l4_len = ip_room;
			p->big = 1;
		}
		ip_len = l4_len;
#pragma unroll
		for (int i = 0; i < SLUICE_MAX_EXT_HDRS; i++) {
			if (nexthdr != IPPROTO_HOPOPTS && nexthdr != IPPROTO_ROUTING &&
			    nexthdr != IPPROTO_DSTOPTS)
				break;
			struct ipv6_opt_hdr *oh = cur;
			__u32 len;

			if ((void *)(oh + 1) > data_end)
				return cut;
			len = (oh->hdrlen + 1) * 8;
			if (len > l4_len)
				return PKT_MALFORMED;
			nexthdr = oh->nexthdr;
			cur += len;
			l4_len -= len;
			p->ext_hdrs++;
		}
		/* A fragment header comes after those (8 bytes: next header, reserved, offset and
		 * M flag, id); checked once, outside the loop, to keep the verifier's paths few. */
		if (nexthdr == IPPROTO_FRAGMENT) {
			struct ipv6_opt_hdr *fh = cur;
			__be16 *fo = cur + 2;

			if ((void *)(fo + 1) > data_end)
				return cut;
			if (l4_len < 8)
				return PKT_MALFORMED;
			if (*fo & bpf_htons(0xfff8))
				return PKT_OTHER; /* not the first fragment */
			first_frag = !!(*fo & bpf_htons(1));              /* M: more to come */

			nexthdr = fh->nexthdr;
			cur += 8;
			l4_len -= 8;
		}
		if (nexthdr == IPPROTO_HOPOPTS || nexthdr == IPPROTO_ROUTING ||
		    nexthdr == IPPROTO_DSTOPTS || nexthdr == IPPROTO_FRAGMENT)
			return PKT_DEEP;
		if (nexthdr != IPPROTO_TCP)
			return PKT_OTHER;
		/* checked once the packet is known to be TCP, as for IPv4: a truncated packet of
		 * another protocol is not sluice's, not a malformed one */
		if (ip_len > ip_room)
			return PKT_MALFORMED;
	} else {
		return PKT_OTHER;
	}

	struct tcphdr *tcp = cur;
	__u32 doff;

	if (first_frag && l4_len < sizeof(*tcp) + SLUICE_FRAG_MIN_DATA)
		return PKT_DEEP;
	if ((void *)(tcp + 1) > data_end)
		return cut;
	doff = tcp->doff * 4;
	if (doff < sizeof(*tcp))
		return PKT_MALFORMED;
	if (first_frag && doff + SLUICE_FRAG_MIN_DATA > l4_len)
		return PKT_DEEP;
	if (doff > l4_len)
		return PKT_MALFORMED;
	p->tcp = tcp;
	p->l4_off = cur - data;
	p->payload_off = p->l4_off + doff;
	p->payload_len = l4_len - doff;
	return PKT_TCP;
}

/* A frame whose whole length is in [data, data_end) (XDP's first buffer, a linear skb). */
static __always_inline enum pkt_kind parse_packet(void *data, void *data_end, struct pkt *p)
{
	return parse_frame(data, data_end, data_end - data, PKT_MALFORMED, p);
}

/* What parse_frame found, as offsets and numbers: the result of the verified-once parsers
 * below (a global function may hand back no packet pointer). */
struct pkt_offs {
	__u32 l3_off;
	__u32 l4_off;
	__u32 payload_off;
	__u32 payload_len;
	__u8 dscp;
	__u8 v6;
	__u8 ext_hdrs;
	__u8 big;
};

/* The common frame in a few loads: Ethernet with at most one 802.1Q tag, then IPv4 without
 * options or IPv6 without extension headers, then a TCP header that fits what the IP length
 * says, and an IP length that fits frame_len. 1 with o filled (what parse_frame finds for such a
 * frame), 0 for anything else, which parse_frame then walks in full (its many exits also cost
 * every packet a copy of a zeroed struct pkt, as clang compiles them). */
static __always_inline int parse_plain_tcp(void *data, void *data_end, __u32 frame_len,
					   struct pkt_offs *o)
{
	struct ethhdr *eth = data;
	__u32 l3 = sizeof(*eth), l4, l4_len, doff;
	__u16 proto;
	__u8 *ip;
	struct tcphdr *tcp;

	if ((void *)(eth + 1) > data_end)
		return 0;
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		struct vlan_hdr *vh = (void *)(eth + 1);

		if ((void *)(vh + 1) > data_end)
			return 0;
		proto = vh->encap_proto;
		l3 += sizeof(*vh);
	}
	ip = data + l3;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip4 = (void *)ip;

		if ((void *)(ip4 + 1) > data_end || ip[0] != 0x45 || ip4->protocol != IPPROTO_TCP ||
		    (ip4->frag_off & bpf_htons(0x3fff)))   /* any fragment: the full walk */
			return 0;
		l4_len = bpf_ntohs(ip4->tot_len);
		if (l4_len < sizeof(*ip4) || l3 + l4_len > frame_len)
			return 0; /* BIG TCP's 0, or malformed */
		l4_len -= sizeof(*ip4);
		l4 = l3 + sizeof(*ip4);
		o->dscp = ip4->tos >> 2;
		o->v6 = 0;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)ip;

		if ((void *)(ip6 + 1) > data_end || ip6->version != 6 || ip6->nexthdr != IPPROTO_TCP)
			return 0;
		l4_len = bpf_ntohs(ip6->payload_len);
		if (!l4_len || l3 + sizeof(*ip6) + l4_len > frame_len)
			return 0; /* BIG TCP, or malformed */
		l4 = l3 + sizeof(*ip6);
		o->dscp = ((ip6->priority << 4) | (ip6->flow_lbl[0] >> 4)) >> 2;
		o->v6 = 1;
	} else {
		return 0;
	}
	tcp = data + l4;
	if ((void *)(tcp + 1) > data_end)
		return 0;
	doff = tcp->doff * 4;
	if (doff < sizeof(*tcp) || doff > l4_len)
		return 0;
	o->l3_off = l3;
	o->l4_off = l4;
	o->payload_off = l4 + doff;
	o->payload_len = l4_len - doff;
	o->ext_hdrs = 0;
	o->big = 0;
	return 1;
}

static __always_inline enum pkt_kind parse_to_offs(void *data, void *data_end, __u32 frame_len,
						   enum pkt_kind cut, struct pkt_offs *o)
{
	struct pkt lp = {};
	enum pkt_kind kind = parse_frame(data, data_end, frame_len, cut, &lp);

	o->l3_off = lp.l3_off;
	o->l4_off = lp.l4_off;
	o->payload_off = lp.payload_off;
	o->payload_len = lp.payload_len;
	o->dscp = lp.dscp;
	o->v6 = lp.v6;
	o->ext_hdrs = lp.ext_hdrs;
	o->big = lp.big;
	return kind;
}

/* The parsers over a program's context exist in BPF programs only; what comes before them,
 * plain pointer arithmetic over [data, data_end), also compiles in userspace, where
 * tests/unit/test_parse.c puts data_end wherever a NIC might cut the frame. */
#ifdef __bpf__
/* The full walk as global functions, one per context type: the verifier checks each once, on
 * its own, instead of once for every path the VLAN tags, IPv4 options and IPv6 extension
 * headers open, each followed by the whole rest of the program (that multiplied load time by
 * four). The common frame (parse_plain_tcp) is inlined in the program before them: a call
 * into a function of its own and its return cost every packet 7-10 ns on a host whose
 * returns go through a mitigation thunk, more than the whole of what some paths add. Its
 * shapes reach the rest of the program as one state only when o is memory the verifier does
 * not follow (sluice.bpf.c's parse_offsets, and the frame's pointers read again after). */
/* A multi-buffer frame (xdp.frags) is longer than its first buffer: its length is asked for
 * here, off the common frame's path, which compares with the first buffer's. */
__attribute__((noinline))
int parse_xdp_full(struct xdp_md *ctx, struct pkt_offs *o)
{
	if (!ctx || !o)
		return PKT_MALFORMED;
	__u32 len = bpf_xdp_get_buff_len(ctx);

	/* no pull at XDP: headers past the first buffer are as far as it can follow */
	return parse_to_offs((void *)(long)ctx->data, (void *)(long)ctx->data_end, len,
			     len > ctx->data_end - ctx->data ? PKT_DEEP : PKT_MALFORMED, o);
}

__attribute__((noinline))
int parse_skb_full(struct __sk_buff *skb, struct pkt_offs *o)
{
	if (!skb || !o)
		return PKT_MALFORMED;
	return parse_to_offs((void *)(long)skb->data, (void *)(long)skb->data_end, skb->len,
			     skb->len > skb->data_end - skb->data ? PKT_SHORT : PKT_MALFORMED, o);
}

static __always_inline int parse_xdp_offs(struct xdp_md *ctx, struct pkt_offs *o)
{
	if (parse_plain_tcp((void *)(long)ctx->data, (void *)(long)ctx->data_end,
			    ctx->data_end - ctx->data, o))
		return PKT_TCP;
	return parse_xdp_full(ctx, o);
}

static __always_inline int parse_skb_offs(struct __sk_buff *skb, struct pkt_offs *o)
{
	if (parse_plain_tcp((void *)(long)skb->data, (void *)(long)skb->data_end, skb->len, o))
		return PKT_TCP;
	return parse_skb_full(skb, o);
}
#endif /* __bpf__ */

/* A struct pkt again from a parse's offsets: the pointers from data, each bounds-checked
 * (the parse checked them already; the verifier here knows only the numbers). The IP version
 * is set as a constant on each branch, which later code depends on. */
static __always_inline enum pkt_kind pkt_from_offs(void *data, void *data_end, int kind,
						   const struct pkt_offs *o, struct pkt *p)
{
	__u32 l3 = o->l3_off, l4 = o->l4_off;
	struct tcphdr *tcp;

	if (kind != PKT_TCP)
		return kind;
	/* l3 is at most 22 and l4 some 8 KiB (four 2 KiB extension headers): never rejected */
	if (l3 > 0xff || l4 > 0x7fff || (void *)((struct ethhdr *)data + 1) > data_end)
		return PKT_MALFORMED;
	p->eth = data;
	p->ip4 = 0;
	p->ip6 = 0;
	if (o->v6) {
		struct ipv6hdr *ip6 = data + l3;

		if ((void *)(ip6 + 1) > data_end)
			return PKT_MALFORMED;
		p->ip6 = ip6;
		p->v6 = 1;
	} else {
		struct iphdr *ip = data + l3;

		if ((void *)(ip + 1) > data_end)
			return PKT_MALFORMED;
		p->ip4 = ip;
		p->v6 = 0;
	}
	tcp = data + l4;
	if ((void *)(tcp + 1) > data_end)
		return PKT_MALFORMED;
	p->tcp = tcp;
	p->l3_off = l3;
	p->l4_off = l4;
	p->payload_off = o->payload_off;
	p->payload_len = o->payload_len;
	p->dscp = o->dscp;
	p->ext_hdrs = o->ext_hdrs;
	p->big = o->big;
	return PKT_TCP;
}

/* The client's address, v4-mapped for IPv4, as used in flow keys and source rules. */
static __always_inline void pkt_addr(const struct pkt *p, int source, __u8 out[16])
{
	if (!p->v6) {
		__u32 a = source ? p->ip4->saddr : p->ip4->daddr;
		__builtin_memset(out, 0, 10);
		out[10] = 0xff;
		out[11] = 0xff;
		__builtin_memcpy(out + 12, &a, 4);
	} else {
		/* In 32-bit words: copied as bytes into a key of 2-byte alignment, clang reads an
		 * address 16 bits at a time and shifts the halves together. */
		const __u32 *a = source ? p->ip6->saddr.s6_addr32 : p->ip6->daddr.s6_addr32;
		__u32 w[4] = { a[0], a[1], a[2], a[3] };

		__builtin_memcpy(out, w, 16);
	}
}

#endif
