/* The real BPF programs run through BPF_PROG_TEST_RUN on crafted frames: parsing (v4, v6,
 * VLAN, truncated, garbage), SYN admission by class headroom, the RST reply byte by byte,
 * unit accounting at FIN/RST, fail-open, a full flow table. Runs in a private netns. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <sched.h>
#include <unistd.h>
#include <cmocka.h>
#include <linux/pkt_cls.h>

#include "harness.h"
#include "pktbuild.h"
#include "config.h"
#include "verdict.h"
#include "daemon.h"

#define SERVER4 "198.18.0.1"
#define SERVER6 "2001:db8::1"

static const char *CONFIG =
	"interface: lo\n"
	"services:\n"
	"  - name: db\n"
	"    port: 5432\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 4 }\n"
	"    headroom: { L0: 100, L1: 90, L2: 75, L3: 50 }\n"
	"    default_class: L3\n"
	"    classify:\n"
	"      - { source: 198.18.1.0/24, class: L0 }\n"
	"      - { source: 198.18.0.0/15, class: L2 }\n"
	"      - { source: 2001:db8:1::/48, class: L0 }\n"
	"      - { dscp: 46, class: L1 }\n"
	"  - name: quiet\n"
	"    port: 6000\n"
	"    protocol: tcp\n"
	"    reject: drop\n"
	"    limit: { fixed: 1 }\n"
	"    default_class: L0\n"
	"  - name: tenant\n"
	"    port: 7000\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 100 }\n"
	"    default_class: L0\n"
	"    client_limit: { max_in_flight: 2 }\n"
	"  - name: metered\n"
	"    port: 7001\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 100 }\n"
	"    default_class: L0\n"
	"    client_limit: { rate: 1, burst: 2 }\n";

static void set_heartbeat(struct fixture *f, unsigned long long age_ns)
{
	struct sluice_globals g = { .heartbeat_ns = monotonic_ns() - age_ns,
				    .heartbeat_timeout_ns = 1000000000ull };
	assert_int_equal(maps_write_globals(&f->m, &g), 0);
}

static int setup_flows(void **state, unsigned max_flows)
{
	return (*state = harness_fixture(CONFIG, max_flows, 1000000000ull)) ? 0 : -1;
}

static int setup(void **state) { return setup_flows(state, 0); }
static int setup_small_table(void **state) { return setup_flows(state, 4); }

static struct run run_prog(int prog_fd, const uint8_t *frame, size_t len)
{
	struct run r = harness_run(prog_fd, frame, len, NULL);

	assert_int_equal(r.err, 0);
	return r;
}

static struct run xdp(struct fixture *f, const struct pkt_spec *s)
{
	uint8_t buf[512];
	return run_prog(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), buf, build_pkt(buf, s));
}

static struct run tc_egress(struct fixture *f, const struct pkt_spec *s)
{
	uint8_t buf[512];
	return run_prog(bpf_program__fd(f->skel->progs.sluice_tc_egress), buf, build_pkt(buf, s));
}

static struct pkt_spec syn4(const char *src, uint16_t sport, uint16_t dport)
{
	struct pkt_spec s = { .src = src, .dst = SERVER4, .sport = sport, .dport = dport,
			      .seq = 1000u + sport, .syn = 1, .tcp_opts = 20 };
	return s;
}

static struct sluice_class_stats stats(struct fixture *f, int svc, int cls)
{
	struct sluice_class_stats st;
	assert_int_equal(maps_read_class_stats(&f->m, f->idx[svc], cls, &st), 0);
	return st;
}

static long long inflight_total(struct fixture *f, int svc)
{
	struct sluice_inflight in;
	assert_int_equal(maps_read_inflight(&f->m, f->idx[svc], &in), 0);
	return in.total;
}

static struct sluice_pkt_stats pstats(struct fixture *f)
{
	struct sluice_pkt_stats p;
	assert_int_equal(maps_read_pkt_stats(&f->m, &p), 0);
	return p;
}

/* ---- parsing ---- */

static void test_non_service_passes_untouched(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec s = syn4("198.18.1.2", 40000, 80);
	uint8_t in[512];
	size_t len = build_pkt(in, &s);
	struct run r = run_prog(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), in, len);

	assert_int_equal(r.ret, XDP_PASS);
	assert_int_equal(r.out_len, len);
	assert_memory_equal(r.out, in, len);
	assert_int_equal(pstats(f).service, 0);
	assert_int_equal(pstats(f).malformed, 0);
}

static void test_truncated_and_garbage_pass_and_count(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec s = syn4("198.18.1.2", 40000, 5432);
	uint8_t full[512], junk[512];
	size_t len = build_pkt(full, &s);
	int xdp_fd = bpf_program__fd(f->skel->progs.sluice_xdp_ingress);
	int tc_fd = bpf_program__fd(f->skel->progs.sluice_tc_egress);
	unsigned long long malformed = 0;

	/* Every truncation of a service SYN between a full Ethernet header and the end of
	 * the TCP header: passes, never rejected, never admitted. */
	for (size_t cut = 15; cut < 14 + 20 + 20; cut++) {
		struct run r = run_prog(xdp_fd, full, cut);
		assert_int_equal(r.ret, XDP_PASS);
		malformed++;
	}
	/* Bad IHL, bad doff, wrong IP version. */
	uint8_t bad[512];
	memcpy(bad, full, len);
	bad[14] = 0x43; /* ihl 3 */
	assert_int_equal(run_prog(xdp_fd, bad, len).ret, XDP_PASS);
	memcpy(bad, full, len);
	bad[14 + 20 + 12] = 0x20; /* doff 2 */
	assert_int_equal(run_prog(xdp_fd, bad, len).ret, XDP_PASS);
	memcpy(bad, full, len);
	bad[14] = 0x65; /* version 6 in an IPv4 ethertype */
	assert_int_equal(run_prog(xdp_fd, bad, len).ret, XDP_PASS);
	malformed += 3;
	assert_int_equal(pstats(f).malformed, malformed);

	/* Garbage: random bytes with IPv4 and IPv6 ethertypes, through XDP and TC. */
	srand(7);
	for (int i = 0; i < 500; i++) {
		size_t n = 14 + (size_t)(rand() % 120);
		for (size_t j = 0; j < n; j++)
			junk[j] = (uint8_t)rand();
		junk[12] = 0x08;
		junk[13] = i & 1 ? 0x00 : 0xdd;
		if (i & 1)
			junk[12] = 0x86, junk[13] = 0xdd;
		int rx = run_prog(xdp_fd, junk, n).ret;
		assert_true(rx == XDP_PASS || rx == XDP_TX || rx == XDP_DROP);
		/* BPF_PROG_TEST_RUN itself refuses skbs too short for the IP header they claim
		 * (EINVAL before our program runs); every frame it accepts must pass. */
		uint8_t out[512];
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = junk, .data_size_in = (uint32_t)n,
			    .data_out = out, .data_size_out = sizeof(out), .repeat = 1);
		int err = bpf_prog_test_run_opts(tc_fd, &o);
		if (err == -EINVAL && n < 14 + 40)
			continue;
		assert_int_equal(err, 0);
		assert_int_equal(o.retval, TC_ACT_OK);
	}
	assert_int_equal(stats(f, 0, 0).admitted + stats(f, 0, 3).admitted +
			 stats(f, 0, 2).admitted + stats(f, 0, 1).admitted,
			 stats(f, 0, 0).arrivals + stats(f, 0, 3).arrivals +
			 stats(f, 0, 2).arrivals + stats(f, 0, 1).arrivals -
			 (stats(f, 0, 0).rejected[SLUICE_REJ_HEADROOM] + stats(f, 0, 1).rejected[SLUICE_REJ_HEADROOM] +
			  stats(f, 0, 2).rejected[SLUICE_REJ_HEADROOM] + stats(f, 0, 3).rejected[SLUICE_REJ_HEADROOM]));
}

/* ---- admission ---- */

static void test_syn_admitted_counted_once(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec s = syn4("198.18.1.2", 40001, 5432);

	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	assert_int_equal(xdp(f, &s).ret, XDP_PASS); /* retransmitted SYN */
	assert_int_equal(inflight_total(f, 0), 1);
	assert_int_equal(stats(f, 0, 0).arrivals, 1);
	assert_int_equal(stats(f, 0, 0).admitted, 1);
	assert_int_equal(stats(f, 0, 0).retransmits, 1);
}

static void test_headroom_rejects_l3_first_and_rst_bytes(void **state)
{
	struct fixture *f = *state;
	/* limit 4: L3 (default) may use 2 slots, L0 (198.18.1/24) all 4. */
	for (uint16_t p = 1; p <= 2; p++) {
		struct pkt_spec s = syn4("203.0.113.9", p, 5432);
		assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	}
	struct pkt_spec s = syn4("203.0.113.9", 3, 5432);
	s.seq = 0xfffffff0u; /* ack must wrap */
	uint8_t in[512];
	size_t len = build_pkt(in, &s);
	struct run r = run_prog(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), in, len);

	assert_int_equal(r.ret, XDP_TX);
	assert_int_equal(stats(f, 0, 3).rejected[SLUICE_REJ_HEADROOM], 1);
	assert_int_equal(pstats(f).rst_sent, 1);

	/* The reply, field by field. */
	assert_int_equal(r.out_len, 14 + 20 + 20);
	const struct ethhdr *eth = (const void *)r.out;
	const struct iphdr *ip = (const void *)(r.out + 14);
	const struct tcphdr *tcp = (const void *)(r.out + 34);
	const struct iphdr *oip = (const void *)(in + 14);
	const struct tcphdr *otcp = (const void *)(in + 34);
	assert_memory_equal(eth->h_dest, MAC_CLIENT, 6);
	assert_memory_equal(eth->h_source, MAC_SERVER, 6);
	assert_int_equal(ntohs(eth->h_proto), ETH_P_IP);
	assert_int_equal(ip->version, 4);
	assert_int_equal(ip->ihl, 5);
	assert_int_equal(ntohs(ip->tot_len), 40);
	assert_int_equal(ip->protocol, IPPROTO_TCP);
	assert_int_equal(ip->saddr, oip->daddr);
	assert_int_equal(ip->daddr, oip->saddr);
	assert_int_equal(csum_finish(csum_add(0, ip, 20)), 0);
	assert_int_equal(tcp->source, otcp->dest);
	assert_int_equal(tcp->dest, otcp->source);
	assert_int_equal(ntohl(tcp->seq), 0);
	assert_int_equal(ntohl(tcp->ack_seq), 0xfffffff1u);
	assert_int_equal(tcp->doff, 5);
	assert_true(tcp->rst && tcp->ack);
	assert_false(tcp->syn || tcp->fin || tcp->psh);
	assert_int_equal(tcp_verify(ip, 0, tcp, 20), 0);

	/* L0 still gets in up to the full limit. */
	struct pkt_spec l0 = syn4("198.18.1.7", 10, 5432);
	assert_int_equal(xdp(f, &l0).ret, XDP_PASS);
	l0.sport = 11;
	assert_int_equal(xdp(f, &l0).ret, XDP_PASS);
	l0.sport = 12;
	assert_int_equal(xdp(f, &l0).ret, XDP_TX); /* 5th: over the limit even for L0 */
	assert_int_equal(stats(f, 0, 0).admitted, 2);
	assert_int_equal(inflight_total(f, 0), 4);

	/* A retransmit of the refused SYN is seen as one (retry-storm signal). */
	assert_int_equal(xdp(f, &s).ret, XDP_TX);
	assert_int_equal(stats(f, 0, 3).retransmits, 1);
}

static void test_v6_vlan_dscp_classified_and_rst(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec s = { .v6 = 1, .vlan = 42, .src = "2001:db8:9::5", .dst = SERVER6,
			      .sport = 5555, .dport = 5432, .seq = 77, .syn = 1, .dscp = 46,
			      .tcp_opts = 20 };

	/* DSCP 46 -> L1: threshold 90% of 4 = 3. */
	for (uint16_t p = 0; p < 3; p++) {
		s.sport = 5555 + p;
		assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	}
	assert_int_equal(stats(f, 0, 1).admitted, 3);
	s.sport = 6000;
	uint8_t in[512];
	size_t len = build_pkt(in, &s);
	struct run r = run_prog(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), in, len);
	assert_int_equal(r.ret, XDP_TX);
	assert_int_equal(r.out_len, 14 + 4 + 40 + 20);
	assert_int_equal(r.out[12], 0x81); /* tag kept */
	assert_int_equal(r.out[15], 42);
	const struct ipv6hdr *ip6 = (const void *)(r.out + 18);
	const struct ipv6hdr *oip6 = (const void *)(in + 18);
	const struct tcphdr *tcp = (const void *)(r.out + 58);
	assert_memory_equal(&ip6->saddr, &oip6->daddr, 16);
	assert_memory_equal(&ip6->daddr, &oip6->saddr, 16);
	assert_int_equal(ntohs(ip6->payload_len), 20);
	assert_int_equal(ntohs(tcp->source), 5432);
	assert_int_equal(ntohs(tcp->dest), 6000);
	assert_int_equal(ntohl(tcp->ack_seq), 78);
	assert_true(tcp->rst && tcp->ack);
	assert_int_equal(tcp_verify(ip6, 1, tcp, 20), 0);

	/* v6 source rule: 2001:db8:1::/48 is L0. */
	struct pkt_spec l0 = s;
	l0.src = "2001:db8:1::9";
	l0.dscp = 0;
	assert_int_equal(xdp(f, &l0).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).admitted, 1);
}

static void test_first_matching_source_rule_wins(void **state)
{
	struct fixture *f = *state;
	/* 198.18.1.0/24 (rule 0, L0) is inside 198.18.0.0/15 (rule 1, L2): rule 0 wins. */
	struct pkt_spec a = syn4("198.18.1.50", 1, 5432), b = syn4("198.18.7.50", 2, 5432);

	xdp(f, &a);
	xdp(f, &b);
	assert_int_equal(stats(f, 0, 0).arrivals, 1);
	assert_int_equal(stats(f, 0, 2).arrivals, 1);
}

static void test_drop_mode(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 1, 6000), b = syn4("198.18.1.2", 2, 6000);

	assert_int_equal(xdp(f, &a).ret, XDP_PASS);
	assert_int_equal(xdp(f, &b).ret, XDP_DROP);
	assert_int_equal(stats(f, 1, 0).rejected[SLUICE_REJ_HEADROOM], 1);
}

static void test_priority_count_never_blocks_higher_class(void **state)
{
	struct fixture *f = *state;
	struct sluice_verdict v;

	verdict_default(&f->cfg.services[0], 4, &v);
	v.flags = SLUICE_VERDICT_PRIORITY_COUNT;
	v.class_threshold[0] = 4, v.class_threshold[1] = 3;
	v.class_threshold[2] = 3, v.class_threshold[3] = 2;
	maps_write_verdict(&f->m, f->idx[0], &v);
	/* L3 fills its 2; a third is refused (L0..L3 in-flight 2 >= 2). */
	for (uint16_t p = 1; p <= 3; p++) {
		struct pkt_spec s = syn4("203.0.113.9", p, 5432);
		assert_int_equal(xdp(f, &s).ret, p <= 2 ? XDP_PASS : XDP_TX);
	}
	/* L0 is compared with L0's own in-flight only: all 4 get in although the service's
	 * total is already 2 -- lower classes never hold a slot L0 needs. */
	for (uint16_t p = 10; p < 15; p++) {
		struct pkt_spec s = syn4("198.18.1.7", p, 5432);
		assert_int_equal(xdp(f, &s).ret, p < 14 ? XDP_PASS : XDP_TX);
	}
	assert_int_equal(inflight_total(f, 0), 6);
	/* L3 now sees L0's 4 as well: still refused; L2 (198.18.7.x) too (4+0+... >= 3). */
	struct pkt_spec l3 = syn4("203.0.113.9", 20, 5432), l2 = syn4("198.18.7.1", 21, 5432);
	assert_int_equal(xdp(f, &l3).ret, XDP_TX);
	assert_int_equal(xdp(f, &l2).ret, XDP_TX);
	assert_int_equal(stats(f, 0, 2).rejected[SLUICE_REJ_HEADROOM], 1);
}

static void test_client_concurrency_cap(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 1, 7000), b = syn4("198.18.1.2", 2, 7000);
	struct pkt_spec c = syn4("198.18.1.2", 3, 7000), other = syn4("198.18.1.3", 4, 7000);

	assert_int_equal(xdp(f, &a).ret, XDP_PASS);
	assert_int_equal(xdp(f, &b).ret, XDP_PASS);
	assert_int_equal(xdp(f, &c).ret, XDP_TX);      /* third of one client: refused */
	assert_int_equal(xdp(f, &other).ret, XDP_PASS); /* another client is not */
	assert_int_equal(stats(f, 2, 0).rejected[SLUICE_REJ_CLIENT_LIMIT], 1);
	assert_int_equal(inflight_total(f, 2), 3);      /* the refused one gave its slot back */
	/* One of the client's connections ends: it may connect again. */
	struct pkt_spec fin = a;
	fin.syn = 0, fin.fin = 1, fin.ackf = 1, fin.tcp_opts = 0;
	xdp(f, &fin);
	c.sport = 5;
	assert_int_equal(xdp(f, &c).ret, XDP_PASS);
}

static void test_client_token_bucket(void **state)
{
	struct fixture *f = *state;

	/* 1 per second, burst 2: two at once pass, the third waits for a token. */
	for (uint16_t p = 1; p <= 3; p++) {
		struct pkt_spec s = syn4("198.18.1.2", p, 7001);
		assert_int_equal(xdp(f, &s).ret, p <= 2 ? XDP_PASS : XDP_TX);
	}
	struct pkt_spec other = syn4("198.18.1.9", 9, 7001);
	assert_int_equal(xdp(f, &other).ret, XDP_PASS);
	assert_int_equal(stats(f, 3, 0).rejected[SLUICE_REJ_CLIENT_LIMIT], 1);
	usleep(1100000);
	struct pkt_spec later = syn4("198.18.1.2", 10, 7001);
	assert_int_equal(xdp(f, &later).ret, XDP_PASS);
}

static void test_client_limits_off_when_controller_silent(void **state)
{
	struct fixture *f = *state;

	set_heartbeat(f, 2000000000ull);
	for (uint16_t p = 1; p <= 4; p++) {
		struct pkt_spec s = syn4("198.18.1.2", p, 7000);
		assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	}
}

/* ---- accounting ---- */

static void test_fin_rst_end_units_exactly_once(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 100, 5432), b = syn4("198.18.1.2", 101, 5432);

	xdp(f, &a);
	xdp(f, &b);
	assert_int_equal(inflight_total(f, 0), 2);

	/* Client FIN on a: -1. Server FIN on a afterwards: nothing more. */
	struct pkt_spec fin = a;
	fin.syn = 0, fin.fin = 1, fin.ackf = 1, fin.tcp_opts = 0;
	assert_int_equal(xdp(f, &fin).ret, XDP_PASS);
	assert_int_equal(inflight_total(f, 0), 1);
	struct pkt_spec sfin = { .src = SERVER4, .dst = "198.18.1.2", .sport = 5432, .dport = 100,
				 .fin = 1, .ackf = 1 };
	assert_int_equal(tc_egress(f, &sfin).ret, TC_ACT_OK);
	assert_int_equal(inflight_total(f, 0), 1);

	/* Server RST on b: -1 and an error. */
	struct pkt_spec srst = sfin;
	srst.dport = 101, srst.fin = 0, srst.rst = 1;
	assert_int_equal(tc_egress(f, &srst).ret, TC_ACT_OK);
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(stats(f, 0, 0).completed, 2);
	assert_int_equal(stats(f, 0, 0).errors, 1);

	/* Data packets of a flow that ended pass untouched. */
	struct pkt_spec data = a;
	data.syn = 0, data.ackf = 1, data.tcp_opts = 0, data.payload = "hello", data.payload_len = 5;
	assert_int_equal(xdp(f, &data).ret, XDP_PASS);
	assert_int_equal(inflight_total(f, 0), 0);
}

static void test_stale_heartbeat_fails_open(void **state)
{
	struct fixture *f = *state;

	set_heartbeat(f, 2000000000ull); /* 2 s old, timeout 1 s */
	for (uint16_t p = 1; p <= 6; p++) {
		struct pkt_spec s = syn4("203.0.113.9", p, 5432); /* L3: 2 slots normally */
		assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	}
	assert_int_equal(stats(f, 0, 3).admitted, 6);
	assert_int_equal(stats(f, 0, 3).fail_open, 6);
	assert_int_equal(inflight_total(f, 0), 6); /* still counted */
	set_heartbeat(f, 0);
	struct pkt_spec s = syn4("203.0.113.9", 7, 5432);
	assert_int_equal(xdp(f, &s).ret, XDP_TX);
}

static void test_full_flow_table_admits_untracked_and_drains_to_zero(void **state)
{
	struct fixture *f = *state; /* flows table of 4 entries; quiet has limit 1, db 4 */
	struct sluice_verdict v;

	verdict_default(&f->cfg.services[0], 100, &v);
	maps_write_verdict(&f->m, f->idx[0], &v);
	for (uint16_t p = 1; p <= 7; p++) {
		struct pkt_spec s = syn4("198.18.1.2", p, 5432);
		assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	}
	assert_int_equal(stats(f, 0, 0).admitted, 7);
	assert_int_equal(stats(f, 0, 0).untracked, 3);
	assert_int_equal(inflight_total(f, 0), 4);
	for (uint16_t p = 1; p <= 7; p++) {
		struct pkt_spec s = syn4("198.18.1.2", p, 5432);
		s.syn = 0, s.rst = 1, s.tcp_opts = 0;
		xdp(f, &s);
	}
	assert_int_equal(inflight_total(f, 0), 0);
}

static int always_open(void *ctx, const struct sluice_flow_key *k)
{
	return 1;
}

static void test_gc_reclaims_silent_flows(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 200, 5432), b = syn4("198.18.1.2", 201, 5432);

	xdp(f, &a);
	xdp(f, &b);
	assert_int_equal(inflight_total(f, 0), 2);
	/* Nothing is old yet. */
	assert_int_equal(maps_gc_flows(&f->m, monotonic_ns(), 30000000000ull, 600000000000ull,
				       NULL, NULL), 0);
	/* Old, but the kernel still has the connections: kept. */
	assert_int_equal(maps_gc_flows(&f->m, monotonic_ns() + 31000000000ull, 30000000000ull,
				       600000000000ull, always_open, NULL), 0);
	assert_int_equal(inflight_total(f, 0), 2);
	/* 31 s later both SYN-state flows are reclaimed, in-flight back to 0, exactly. */
	assert_int_equal(maps_gc_flows(&f->m, monotonic_ns() + 31000000000ull, 30000000000ull,
				       600000000000ull, NULL, NULL), 2);
	assert_int_equal(inflight_total(f, 0), 0);
	/* A late FIN for a reclaimed flow changes nothing. */
	struct pkt_spec fin = a;
	fin.syn = 0, fin.fin = 1, fin.ackf = 1, fin.tcp_opts = 0;
	xdp(f, &fin);
	assert_int_equal(inflight_total(f, 0), 0);
}

/* Flow stamps come from bpf_ktime_get_ns(), i.e. CLOCK_MONOTONIC: time since boot. The GC
 * tests place every stamp relative to the clock as the programs read it now, never at an
 * absolute value, so they hold on a host booted a minute ago as on one up for weeks. */
#define S_NS 1000000000ull
#define IDLE_NS (600 * S_NS)
#define SYN_NS (30 * S_NS)

static void put_flow(struct fixture *f, uint32_t id, uint8_t state, unsigned long long admitted_ns,
		     unsigned long long last_seen_ns, uint8_t tracked)
{
	struct sluice_flow_key k = { .client_port = htons((uint16_t)id), .service_port = htons(5432) };
	struct sluice_flow v = { .svc = (uint16_t)f->idx[0], .state = state, .class = 0,
				 .admitted_ns = admitted_ns, .last_seen_ns = last_seen_ns,
				 .tracked_inflight = tracked };

	k.client_addr[10] = k.client_addr[11] = 0xff;
	memcpy(k.client_addr + 12, &id, sizeof(id));
	assert_int_equal(bpf_map_update_elem(f->m.flows, &k, &v, BPF_NOEXIST), 0);
}

static void test_walks_thousands_of_flows(void **state)
{
	struct fixture *f = *state;
	int per[SLUICE_MAX_SERVICES];
	unsigned long long t0 = monotonic_ns(), gc_at = t0 + IDLE_NS + S_NS;

	/* More flows than one batch (1024): count and GC see every one. 3000 fall silent at
	 * t0; 500 are still talking when the GC runs an idle timeout and a second later. */
	for (uint32_t i = 0; i < 3500; i++)
		put_flow(f, i, SLUICE_FLOW_OPEN, t0, i < 3000 ? t0 : gc_at - S_NS, 0);
	assert_int_equal(maps_count_flows(&f->m, per, SLUICE_MAX_SERVICES), 3500);
	assert_int_equal(per[f->idx[0]], 3500);
	/* At t0 nothing is idle, not even on a host whose clock is younger than the timeout. */
	assert_int_equal(maps_gc_flows(&f->m, t0, SYN_NS, IDLE_NS, NULL, NULL), 0);
	assert_int_equal(maps_gc_flows(&f->m, gc_at, SYN_NS, IDLE_NS, NULL, NULL), 3000);
	assert_int_equal(maps_count_flows(&f->m, per, SLUICE_MAX_SERVICES), 500);
	assert_int_equal(inflight_total(f, 0), 0); /* untracked entries released nothing */
}

/* sluiced's own tick (GC included) with a clock younger than the idle timeout, as on a host
 * that booted seconds ago: quiet flows are kept until their timeout has really passed, none
 * is reclaimed because "now - timeout" would be negative, and in-flight never goes below 0. */
static void test_daemon_gc_on_young_clock(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	char err[256], dir[] = "/tmp/sluice-test-gc.XXXXXX", rm[64];
	struct sluice_inflight in = { .total = 4, .cls = { 4 } };
	__u32 k = (__u32)f->idx[0];
	int per[SLUICE_MAX_SERVICES];

	assert_non_null(mkdtemp(dir));
	memset(&d, 0, sizeof(d));
	d.cfg = f->cfg;
	assert_int_equal(d.cfg.flow_idle_timeout_s, 600);
	assert_int_equal(d.cfg.syn_timeout_s, 30);
	snprintf(d.cfg.state_dir, sizeof(d.cfg.state_dir), "%s", dir);
	d.m = f->m;
	d.events = fopen("/dev/null", "w");
	assert_non_null(d.events);
	assert_int_equal(daemon_init(&d, 2 * S_NS, err, sizeof(err)), 0);

	/* Four connections holding four slots, stamped on a clock that started 2 s ago. */
	put_flow(f, 1, SLUICE_FLOW_OPEN, 1, 1, 1);                 /* seen at boot */
	put_flow(f, 2, SLUICE_FLOW_OPEN, S_NS, 4 * S_NS, 1);       /* seen at 4 s */
	put_flow(f, 3, SLUICE_FLOW_SYN, 3 * S_NS, 3 * S_NS, 1);    /* handshake since 3 s */
	put_flow(f, 4, SLUICE_FLOW_OPEN, S_NS, 20 * S_NS + 5, 1);  /* stamped just after the tick read its clock */
	assert_int_equal(bpf_map_update_elem(f->m.inflight, &k, &in, BPF_ANY), 0);

	daemon_tick(&d, 20 * S_NS);
	assert_int_equal(maps_count_flows(&f->m, per, SLUICE_MAX_SERVICES), 4);
	assert_int_equal(inflight_total(f, 0), 4);
	/* 34 s: only the handshake that never completed (31 s old, SYN timeout 30 s) goes. */
	daemon_tick(&d, 34 * S_NS);
	assert_int_equal(maps_count_flows(&f->m, per, SLUICE_MAX_SERVICES), 3);
	assert_int_equal(inflight_total(f, 0), 3);
	/* 603 s: silent since boot (603 s) goes; silent since 4 s (599 s) stays. */
	daemon_tick(&d, 603 * S_NS);
	assert_int_equal(maps_count_flows(&f->m, per, SLUICE_MAX_SERVICES), 2);
	assert_int_equal(inflight_total(f, 0), 2);
	/* 605 s: the one silent since 4 s goes; the one stamped at 20 s stays. */
	daemon_tick(&d, 605 * S_NS);
	assert_int_equal(maps_count_flows(&f->m, per, SLUICE_MAX_SERVICES), 1);
	assert_int_equal(inflight_total(f, 0), 1);

	fclose(d.events);
	snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
	assert_int_equal(system(rm), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_non_service_passes_untouched, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_truncated_and_garbage_pass_and_count, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_syn_admitted_counted_once, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_headroom_rejects_l3_first_and_rst_bytes, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_v6_vlan_dscp_classified_and_rst, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_first_matching_source_rule_wins, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_drop_mode, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_priority_count_never_blocks_higher_class, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_client_concurrency_cap, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_client_token_bucket, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_client_limits_off_when_controller_silent, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_fin_rst_end_units_exactly_once, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_stale_heartbeat_fails_open, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_full_flow_table_admits_untracked_and_drains_to_zero,
						setup_small_table, harness_teardown),
		cmocka_unit_test_setup_teardown(test_gc_reclaims_silent_flows, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_walks_thousands_of_flows, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_daemon_gc_on_young_clock, setup, harness_teardown),
	};

	/* Replies may be redirected: keep them inside a private network namespace. */
	if (unshare(CLONE_NEWNET) != 0)
		perror("unshare(CLONE_NEWNET)");
	return cmocka_run_group_tests_name("datapath", tests, NULL, NULL);
}
