// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The data path's frame parse (bpf/parse.h), compiled here as plain C: the programs see a
 * frame through [data, data_end), and on a real NIC data_end may stop anywhere (header split,
 * a first buffer of a multi-buffer frame, a short linear skb), which BPF_PROG_TEST_RUN cannot
 * arrange: it hands XDP 3.5 KiB before its first cut and TC a linear skb. Here the frame is
 * cut at every byte.
 *
 * What must hold wherever the cut falls:
 *   - a packet that is not sluice's (another protocol, a later fragment) is PKT_OTHER as soon
 *     as the bytes that say so are readable: it passes, never dropped for being cut;
 *   - a TCP packet whose headers reach past the cut is the caller's `cut` kind (TC pulls and
 *     parses again, XDP drops), never PKT_TCP with headers unread, never PKT_OTHER;
 *   - the fast parse (parse_plain_tcp) finds what the full walk finds, or leaves the frame to it. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "pktbuild.h"
#include "parse.h"

static const char *const payload = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

static size_t frame_of(uint8_t *buf, struct pkt_spec s)
{
	s.src = s.v6 ? "2001:db8::1" : "198.18.0.1";
	s.dst = s.v6 ? "2001:db8::2" : "198.19.0.1";
	s.sport = 40000, s.dport = 80, s.seq = 1000, s.ack = 2000, s.ackf = 1, s.psh = 1;
	s.payload = payload;
	s.payload_len = strlen(payload);
	return build_pkt(buf, &s);
}

/* The frame's parse with data_end `linear` bytes in and the rest beyond reach. */
static enum pkt_kind parse_cut(uint8_t *buf, size_t len, size_t linear, enum pkt_kind cut,
			       struct pkt *p)
{
	memset(p, 0, sizeof(*p));
	return parse_frame(buf, buf + linear, (uint32_t)len, linear < len ? cut : PKT_MALFORMED, p);
}

/* The frame's offset of the IP protocol byte (IPv4) for rewriting it. */
static size_t ip4_off(const struct pkt_spec *s)
{
	return sizeof(struct ethhdr) + (s->vlan ? 4 : 0);
}

/* A UDP datagram with 40 bytes of IPv4 options: PKT_OTHER from the fixed header's 20 bytes on,
 * whether its options are in reach or not. Before, a cut inside the options called it `cut`,
 * which XDP drops: a NIC's header split took non-TCP traffic down. */
static void test_ip4_other_protocol_passes_when_options_cut(void **state)
{
	struct pkt_spec s = { .ip_opts = 40 };
	uint8_t buf[256];
	size_t len = frame_of(buf, s), l3 = ip4_off(&s);
	struct pkt p;

	buf[l3 + 9] = IPPROTO_UDP;
	for (size_t lin = l3 + sizeof(struct iphdr); lin <= len; lin++) {
		assert_int_equal(parse_cut(buf, len, lin, PKT_DEEP, &p), PKT_OTHER);
		assert_int_equal(parse_cut(buf, len, lin, PKT_SHORT, &p), PKT_OTHER);
	}
}

/* A later fragment of a TCP segment (no TCP header in it) with options: PKT_OTHER likewise. */
static void test_ip4_later_fragment_passes_when_options_cut(void **state)
{
	struct pkt_spec s = { .ip_opts = 40, .frag = 2, .vlan = 7 };
	uint8_t buf[256];
	size_t len = frame_of(buf, s), l3 = ip4_off(&s);
	struct pkt p;

	for (size_t lin = l3 + sizeof(struct iphdr); lin <= len; lin++)
		assert_int_equal(parse_cut(buf, len, lin, PKT_DEEP, &p), PKT_OTHER);
}

/* A TCP segment with IPv4 options: `cut` while any header is out of reach, PKT_TCP with the
 * right offsets once the TCP header is in, and PKT_MALFORMED only where the frame itself ends
 * inside a header. */
static void test_ip4_tcp_with_options_cut_everywhere(void **state)
{
	struct pkt_spec s = { .ip_opts = 40, .tcp_opts = 12 };
	uint8_t buf[256];
	size_t len = frame_of(buf, s), l3 = ip4_off(&s);
	size_t l4 = l3 + 60, pay = l4 + 32;
	struct pkt p;

	for (size_t lin = 0; lin <= len; lin++) {
		enum pkt_kind k = parse_cut(buf, len, lin, PKT_SHORT, &p);

		if (lin < pay - 12) {
			assert_int_equal(k, lin < len ? PKT_SHORT : PKT_MALFORMED);
			continue;
		}
		assert_int_equal(k, PKT_TCP);
		assert_int_equal(p.l3_off, l3);
		assert_int_equal(p.l4_off, l4);
		assert_int_equal(p.payload_off, pay);
		assert_int_equal(p.payload_len, strlen(payload));
		assert_ptr_equal(p.ip4, buf + l3);
		assert_ptr_equal(p.tcp, buf + l4);
	}
	/* the whole frame, cut where it ends: a truncated frame is malformed, not out of reach */
	for (size_t end = l3 + sizeof(struct iphdr); end < l4 + sizeof(struct tcphdr); end++) {
		memset(&p, 0, sizeof(p));
		assert_int_equal(parse_packet(buf, buf + end, &p), PKT_MALFORMED);
	}
}

/* The first fragment of a TCP segment, options and all, is judged (or `cut`), never passed. */
static void test_ip4_first_fragment_never_other(void **state)
{
	struct pkt_spec s = { .ip_opts = 20, .frag = 1 };
	uint8_t buf[256];
	size_t len = frame_of(buf, s);
	struct pkt p;

	for (size_t lin = 0; lin <= len; lin++) {
		enum pkt_kind k = parse_cut(buf, len, lin, PKT_DEEP, &p);

		assert_int_not_equal(k, PKT_OTHER);
		if (lin == len)
			assert_int_equal(k, PKT_TCP);
	}
}

/* IPv6: the protocol is known only at the end of the extension header chain, so a chain cut
 * short is `cut` whatever follows it (the documented price: XDP drops such a frame); a later
 * fragment says so in its fragment header and passes once that is in reach. */
static void test_ip6_chain_cut(void **state)
{
	struct pkt_spec s = { .v6 = 1, .ext = "HD" };
	uint8_t buf[256];
	size_t len = frame_of(buf, s), l3 = sizeof(struct ethhdr);
	struct pkt p;

	/* each header's first two bytes (next header, length) are what the walk reads */
	buf[l3 + 48] = IPPROTO_UDP;   /* the D header's next header */
	for (size_t lin = l3; lin < l3 + 50; lin++)
		assert_int_equal(parse_cut(buf, len, lin, PKT_DEEP, &p), PKT_DEEP);
	for (size_t lin = l3 + 50; lin <= len; lin++)
		assert_int_equal(parse_cut(buf, len, lin, PKT_DEEP, &p), PKT_OTHER);

	struct pkt_spec f = { .v6 = 1, .ext = "F", .frag = 2 };
	len = frame_of(buf, f);
	for (size_t lin = l3 + 40 + 4; lin <= len; lin++)
		assert_int_equal(parse_cut(buf, len, lin, PKT_DEEP, &p), PKT_OTHER);
}

/* The fast parse agrees with the full walk on every plain frame it takes, and takes the common
 * ones (no options, no extension headers, at most one tag). */
static void test_plain_parse_agrees(void **state)
{
	const struct pkt_spec specs[] = {
		{ 0 }, { .vlan = 5 }, { .v6 = 1 }, { .v6 = 1, .vlan = 5 }, { .tcp_opts = 12 },
		{ .ip_opts = 8 }, { .v6 = 1, .ext = "D" }, { .frag = 1 },
	};

	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		uint8_t buf[256];
		size_t len = frame_of(buf, specs[i]);
		int plain_kind = !specs[i].ip_opts && !specs[i].ext && !specs[i].frag;
		struct pkt_offs fast = { 0 }, full = { 0 };

		assert_int_equal(parse_plain_tcp(buf, buf + len, (uint32_t)len, &fast), plain_kind);
		assert_int_equal(parse_to_offs(buf, buf + len, (uint32_t)len, PKT_MALFORMED, &full),
				 PKT_TCP);
		if (!plain_kind)
			continue;
		assert_int_equal(fast.l3_off, full.l3_off);
		assert_int_equal(fast.l4_off, full.l4_off);
		assert_int_equal(fast.payload_off, full.payload_off);
		assert_int_equal(fast.payload_len, full.payload_len);
		assert_int_equal(fast.v6, full.v6);
		assert_int_equal(fast.dscp, full.dscp);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ip4_other_protocol_passes_when_options_cut),
		cmocka_unit_test(test_ip4_later_fragment_passes_when_options_cut),
		cmocka_unit_test(test_ip4_tcp_with_options_cut_everywhere),
		cmocka_unit_test(test_ip4_first_fragment_never_other),
		cmocka_unit_test(test_ip6_chain_cut),
		cmocka_unit_test(test_plain_parse_agrees),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
