// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* What NICs and the stack hand the programs besides plain frames, through BPF_PROG_TEST_RUN:
 * BIG TCP lengths (IPv4 tot_len 0; IPv6 payload_len 0 with or without a hop-by-hop jumbo
 * option) parse with the length taken from the frame, so a request in such a packet is decided
 * like any other and nothing counts as malformed; the TC programs hand what they let through
 * to the next filter (TC_ACT_UNSPEC); a refused SYN on an interface whose RSTs belong to TC is
 * passed to TC marked in XDP metadata. Test runs cannot build a packet over 64 KiB, nor an skb
 * with headers outside its linear part (the kernel refuses a linear size in the context):
 * tests/e2e/test_nic.sh covers those on real devices. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <sched.h>
#include <linux/pkt_cls.h>
#include <cmocka.h>

#include "harness.h"
#include "pktbuild.h"

#define SERVER4 "198.18.0.1"
#define SERVER6 "2001:db8::1"

static const char *CONFIG =
	"interface: lo\n"
	"services:\n"
	"  - name: web\n"
	"    port: 8080\n"
	"    protocol: http\n"
	"    limit: { fixed: 8 }\n"
	"    headroom: { L0: 100, L1: 90, L2: 75, L3: 25 }\n"
	"    default_class: L2\n"
	"  - name: db\n"
	"    port: 5432\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 8 }\n"
	"    default_class: L3\n";

static int setup(void **state)
{
	return (*state = harness_shared_fixture(CONFIG, 0, 3600000000000ull)) ? 0 : -1;
}

#define REQ "GET /big HTTP/1.1\r\nHost: t\r\n\r\n"

static struct pkt_spec request(int v6, const char *src, uint16_t sport)
{
	struct pkt_spec s = { .v6 = v6, .src = src, .dst = v6 ? SERVER6 : SERVER4,
			      .sport = sport, .dport = 8080, .seq = 5001, .ack = 9001, .ackf = 1,
			      .psh = 1, .payload = REQ, .payload_len = sizeof(REQ) - 1 };
	return s;
}

static struct run run_frame(int fd, const uint8_t *b, size_t len, int tc)
{
	struct __sk_buff ctx = { .ifindex = 1 };
	struct run r = harness_run(fd, b, len, tc ? &ctx : NULL);

	assert_int_equal(r.err, 0);
	return r;
}

static int xdp_fd(struct fixture *f) { return bpf_program__fd(f->skel->progs.sluice_xdp_ingress); }
static int tci_fd(struct fixture *f) { return bpf_program__fd(f->skel->progs.sluice_tc_ingress); }
static int tce_fd(struct fixture *f) { return bpf_program__fd(f->skel->progs.sluice_tc_egress); }

static void run_spec(struct fixture *f, int fd, const struct pkt_spec *s, int tc, int want)
{
	uint8_t b[1024];
	size_t len = build_pkt(b, s);
	struct run r = run_frame(fd, b, len, tc);

	assert_int_equal(r.ret, want);
	assert_true(harness_unchanged(&r));
}

static void handshake(struct fixture *f, const struct pkt_spec *rq)
{
	struct pkt_spec syn, sa, ack;

	handshake_of(rq, &syn, &sa, &ack);
	run_spec(f, xdp_fd(f), &syn, 0, XDP_PASS);
	run_spec(f, tce_fd(f), &sa, 1, TC_ACT_UNSPEC);
	run_spec(f, xdp_fd(f), &ack, 0, XDP_PASS);
}

static long long inflight(struct fixture *f)
{
	struct sluice_inflight in;

	assert_int_equal(maps_read_inflight(&f->m, f->idx[0], &in), 0);
	return in.total;
}

static unsigned long long malformed(struct fixture *f)
{
	struct sluice_pkt_stats ps;

	assert_int_equal(maps_read_pkt_stats(&f->m, &ps), 0);
	return ps.malformed;
}

/* Where the flow of rq expects the client's next byte. */
static uint32_t client_next(struct fixture *f, const struct pkt_spec *rq)
{
	struct sluice_flow_key k = { 0 };
	struct sluice_flow fl;

	if (rq->v6) {
		inet_pton(AF_INET6, rq->src, k.client_addr);
		inet_pton(AF_INET6, rq->dst, k.local_addr);
	} else {
		k.client_addr[10] = k.client_addr[11] = 0xff;
		inet_pton(AF_INET, rq->src, k.client_addr + 12);
		k.local_addr[10] = k.local_addr[11] = 0xff;
		inet_pton(AF_INET, rq->dst, k.local_addr + 12);
	}
	k.client_port = htons(rq->sport);
	k.service_port = htons(rq->dport);
	assert_int_equal(bpf_map_lookup_elem(f->m.flows, &k, &fl), 0);
	return fl.client_next;
}

/* The request frame of rq with its length field 0, as BIG TCP sends it; v6 with `jumbo`: a
 * hop-by-hop header carrying the jumbo payload option goes in front of TCP. */
static size_t big_frame(uint8_t *b, const struct pkt_spec *rq, int jumbo)
{
	size_t len = build_pkt(b, rq);

	if (!rq->v6) {
		b[14 + 2] = 0, b[14 + 3] = 0;
		return len;
	}
	b[14 + 4] = 0, b[14 + 5] = 0;
	if (jumbo) {
		uint32_t jl = htonl((uint32_t)(len - 14 - 40 + 8));
		uint8_t hbh[8] = { IPPROTO_TCP, 0, 0xc2, 4 };

		memcpy(hbh + 4, &jl, 4);
		memmove(b + 14 + 40 + 8, b + 14 + 40, len - 14 - 40);
		memcpy(b + 14 + 40, hbh, 8);
		b[14 + 6] = IPPROTO_HOPOPTS;
		len += 8;
	}
	return len;
}

/* A request in a BIG TCP packet is a request: decided (admitted, one in flight), the client's
 * mark moved past its bytes; XDP and TC egress count nothing malformed on such frames. */
static void check_big(struct fixture *f, int v6, int jumbo)
{
	struct pkt_spec rq = request(v6, v6 ? "2001:db8::5" : "203.0.113.5", 1000);
	uint8_t b[1024];
	size_t len;
	struct run r;

	handshake(f, &rq);
	assert_int_equal(inflight(f), 0);
	len = big_frame(b, &rq, jumbo);
	r = run_frame(tci_fd(f), b, len, 1);
	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_true(harness_unchanged(&r));
	assert_int_equal(inflight(f), 1);
	assert_int_equal(client_next(f, &rq), rq.seq + rq.payload_len);
	r = run_frame(xdp_fd(f), b, len, 0);
	assert_int_equal(r.ret, XDP_PASS);
	r = run_frame(tce_fd(f), b, len, 1);
	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_int_equal(malformed(f), 0);
	{	/* the server's answer, in a BIG TCP frame too, ends the request (TC egress) */
		static const char rsp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
		struct pkt_spec an = rq;

		an.src = rq.dst, an.dst = rq.src, an.sport = rq.dport, an.dport = rq.sport;
		an.seq = rq.ack, an.ack = rq.seq + rq.payload_len;
		an.payload = rsp, an.payload_len = sizeof(rsp) - 1;
		len = big_frame(b, &an, jumbo);
		r = run_frame(tce_fd(f), b, len, 1);
		assert_int_equal(r.ret, TC_ACT_UNSPEC);
		assert_int_equal(inflight(f), 0);
	}
}

/* A refused request in a BIG TCP IPv6 packet with the jumbo hop-by-hop option is decided like
 * any other: the hop-by-hop header is one the parser follows, the refusal is answered (the
 * frame comes back as the server's RST, rebuilt without the hop-by-hop header, its length
 * field set), nothing is held and nothing counts as malformed. */
static void test_big_tcp_ipv6_jumbo_refused(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request(1, "2001:db8::6", 1001);
	struct sluice_verdict v;
	struct sluice_pkt_stats ps;
	uint8_t b[1024];
	struct run r;

	handshake(f, &rq);
	maps_read_verdict(&f->m, f->idx[0], &v);
	for (int k = 0; k < 4; k++)
		v.flags |= SLUICE_VERDICT_SHUT(k);
	maps_write_verdict(&f->m, f->idx[0], &v);
	r = run_frame(tci_fd(f), b, big_frame(b, &rq, 1), 1);
	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_int_equal(r.out_len, 14 + 40 + 20);
	assert_int_equal(r.out[14 + 6], IPPROTO_TCP);              /* no hop-by-hop header */
	assert_int_equal(r.out[14 + 4] << 8 | r.out[14 + 5], 20);  /* payload_len set */
	assert_true(r.out[14 + 40 + 13] & 0x04);                   /* RST */
	assert_int_equal(inflight(f), 0);
	assert_int_equal(maps_read_pkt_stats(&f->m, &ps), 0);
	assert_int_equal(ps.reply_sent, 1);
	assert_int_equal(malformed(f), 0);
}

static void test_big_tcp_ipv4(void **state) { check_big(*state, 0, 0); }
static void test_big_tcp_ipv6_jumbo(void **state) { check_big(*state, 1, 1); }
static void test_big_tcp_ipv6_no_hbh(void **state) { check_big(*state, 1, 0); }

/* A length field that is not 0 but too short for TCP stays malformed (the BIG TCP reading is
 * for 0 only). */
static void test_short_length_still_malformed(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request(0, "203.0.113.9", 1001);
	uint8_t b[1024];
	size_t len = build_pkt(b, &rq);

	b[14 + 2] = 0, b[14 + 3] = 30; /* 20 of IP, 10 of a 20-byte TCP header */
	assert_int_equal(run_frame(xdp_fd(f), b, len, 0).ret, XDP_PASS);
	assert_int_equal(malformed(f), 1);
}

/* A refused SYN on an interface whose RSTs belong to TC (VLAN tags stripped on receive): XDP
 * passes it, unchanged, with the mark in its metadata; on any other interface XDP answers it
 * itself (XDP_TX). */
static void test_refused_syn_left_to_tc(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec syn = { .src = "203.0.113.7", .dst = SERVER4, .sport = 1234, .dport = 5432,
				.seq = 77, .syn = 1 };
	struct sluice_verdict v;
	uint8_t b[256], out[256];
	size_t len = build_pkt(b, &syn);
	__u32 lo = 1, one = 1, meta;
	struct xdp_md ctx = { .data = 0, .data_meta = 0, .data_end = (__u32)len, .ingress_ifindex = 1 };
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = b, .data_size_in = (__u32)len, .data_out = out,
		    .data_size_out = sizeof(out), .ctx_in = &ctx, .ctx_size_in = sizeof(ctx),
		    .ctx_out = &ctx, .ctx_size_out = sizeof(ctx), .repeat = 1);

	assert_int_equal(maps_read_verdict(&f->m, f->idx[1], &v), 0);
	v.switch_shed[3] = SLUICE_PROB_ONE;
	assert_int_equal(maps_write_verdict(&f->m, f->idx[1], &v), 0);
	assert_int_equal(bpf_prog_test_run_opts(xdp_fd(f), &o), 0);
	assert_int_equal(o.retval, XDP_TX);
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(f->skel->maps.syn_reply_tc), &lo, &one, 0), 0);
	ctx = (struct xdp_md){ .data_end = (__u32)len, .ingress_ifindex = 1 };
	o.data_size_out = sizeof(out);
	o.ctx_size_out = sizeof(ctx);
	assert_int_equal(bpf_prog_test_run_opts(xdp_fd(f), &o), 0);
	assert_int_equal(o.retval, XDP_PASS);
	/* out holds the metadata, then the frame exactly as it came */
	assert_int_equal(ctx.data - ctx.data_meta, 4);
	assert_int_equal(o.data_size_out, len + 4);
	memcpy(&meta, out, 4);
	assert_int_equal(meta, 0x51ce0257u);
	assert_memory_equal(out + 4, b, len);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_big_tcp_ipv4, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_big_tcp_ipv6_jumbo, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_big_tcp_ipv6_no_hbh, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_big_tcp_ipv6_jumbo_refused, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_short_length_still_malformed, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_refused_syn_left_to_tc, setup, harness_teardown),
	};

	return cmocka_run_group_tests_name("nic", tests, NULL, harness_shared_release);
}
