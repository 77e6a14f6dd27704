// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Services by local address through BPF_PROG_TEST_RUN: two services on port 80 at different
 * local addresses (and one at an IPv6 address) get their own service index, a port-only
 * service on the same port takes the other addresses, the egress side finds the service by
 * the source address, and a port without address-specific services is unchanged. One client
 * address and port towards two local addresses of one port at once: two flows, each tracked
 * by its own service and released exactly (its FIN, the server's RST, the GC). */
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

static const char *CONFIG =
	"interface: lo\n"
	"services:\n"
	"  - { name: a, port: \"198.18.0.1:80\", protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: b, port: \"198.18.0.5:80\", protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: c, port: \"[2001:db8::1]:80\", protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: any, port: 80, protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: only, port: \"198.18.0.5:81\", protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: plain, port: 82, protocol: tcp, limit: { fixed: 10 } }\n";
enum { A, B, C, ANY, ONLY, PLAIN, N_SVC };

static int setup(void **state)
{
	return (*state = harness_shared_fixture(CONFIG, 0, 1000000000ull)) ? 0 : -1;
}

/* A class_stats counter (at offset off) of a service, summed over its classes. */
static unsigned long long stat_sum(struct fixture *f, int svc, size_t off)
{
	struct sluice_class_stats st;
	unsigned long long n = 0;

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		assert_int_equal(maps_read_class_stats(&f->m, f->idx[svc], c, &st), 0);
		n += *(const __u64 *)((const char *)&st + off);
	}
	return n;
}

static unsigned long long arrivals(struct fixture *f, int svc)
{
	return stat_sum(f, svc, offsetof(struct sluice_class_stats, arrivals));
}

static unsigned long long service_pkts(struct fixture *f)
{
	struct sluice_pkt_stats p;

	assert_int_equal(maps_read_pkt_stats(&f->m, &p), 0);
	return p.service;
}

static void syn_to(struct fixture *f, int v6, const char *src, const char *dst, uint16_t sport,
		   uint16_t dport)
{
	uint8_t buf[512];
	struct pkt_spec s = { .v6 = v6, .src = src, .dst = dst, .sport = sport, .dport = dport,
			      .seq = 1000u + sport, .syn = 1, .tcp_opts = 20 };
	struct run r = harness_run(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), buf,
				   build_pkt(buf, &s), NULL);

	assert_int_equal(r.err, 0);
	assert_int_equal(r.ret, XDP_PASS);
}

/* The per-service arrivals, in config order, as a string: "a b c any only plain". */
static const char *all_arrivals(struct fixture *f)
{
	static char buf[128];

	buf[0] = 0;
	for (int i = 0; i < N_SVC; i++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%llu", i ? " " : "",
			 arrivals(f, i));
	return buf;
}

static void test_same_port_different_addresses(void **state)
{
	struct fixture *f = *state;

	syn_to(f, 0, "198.18.1.2", "198.18.0.1", 40001, 80);
	assert_string_equal(all_arrivals(f), "1 0 0 0 0 0");
	syn_to(f, 0, "198.18.1.2", "198.18.0.5", 40002, 80);
	syn_to(f, 0, "198.18.1.3", "198.18.0.5", 40003, 80);
	assert_string_equal(all_arrivals(f), "1 2 0 0 0 0");
	syn_to(f, 1, "2001:db8::9", "2001:db8::1", 40004, 80);
	assert_string_equal(all_arrivals(f), "1 2 1 0 0 0");
	/* another local address on :80: the port-only service */
	syn_to(f, 0, "198.18.1.2", "198.18.0.9", 40005, 80);
	syn_to(f, 1, "2001:db8::9", "2001:db8::2", 40006, 80);
	assert_string_equal(all_arrivals(f), "1 2 1 2 0 0");
	/* a port whose only service is at one address: other addresses are not a service */
	syn_to(f, 0, "198.18.1.2", "198.18.0.1", 40007, 81);
	assert_string_equal(all_arrivals(f), "1 2 1 2 0 0");
	syn_to(f, 0, "198.18.1.2", "198.18.0.5", 40008, 81);
	assert_string_equal(all_arrivals(f), "1 2 1 2 1 0");
	/* a port-only service: any address */
	syn_to(f, 0, "198.18.1.2", "198.18.0.77", 40010, 82);
	assert_string_equal(all_arrivals(f), "1 2 1 2 1 1");
}

static void test_egress_by_source_address(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[512];
	struct pkt_spec sa = { .src = "198.18.0.9", .dst = "198.18.1.2", .sport = 81,
			       .dport = 40001, .seq = 77, .ack = 1, .syn = 1, .ackf = 1,
			       .tcp_opts = 20 };
	int fd = bpf_program__fd(f->skel->progs.sluice_tc_egress);
	unsigned long long before = service_pkts(f);
	struct run r = harness_run(fd, buf, build_pkt(buf, &sa), NULL);

	assert_int_equal(r.err, 0);
	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	/* from an address with no service on :81: not a service packet */
	assert_int_equal(service_pkts(f), before);
	sa.src = "198.18.0.5";
	r = harness_run(fd, buf, build_pkt(buf, &sa), NULL);
	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_int_equal(service_pkts(f), before + 1);
	/* :80 from an address with no service of its own: the port-only one (any) */
	sa.src = "198.18.0.9", sa.sport = 80;
	r = harness_run(fd, buf, build_pkt(buf, &sa), NULL);
	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_int_equal(service_pkts(f), before + 2);
	/* and :82, a port-only service, from any address */
	sa.src = "198.18.0.77", sa.sport = 82;
	r = harness_run(fd, buf, build_pkt(buf, &sa), NULL);
	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_int_equal(service_pkts(f), before + 3);
}

static int prog(struct fixture *f, int which)
{
	return bpf_program__fd(which == 0 ? f->skel->progs.sluice_xdp_ingress :
			       which == 1 ? f->skel->progs.sluice_tc_ingress :
					    f->skel->progs.sluice_tc_egress);
}

/* One frame through XDP (0), TC ingress (1) or TC egress (2); its verdict. */
static int send_pkt(struct fixture *f, int which, const struct pkt_spec *s)
{
	uint8_t buf[512];
	struct run r = harness_run(prog(f, which), buf, build_pkt(buf, s), NULL);

	assert_int_equal(r.err, 0);
	return r.ret;
}

/* The client's packet of a connection from src:sport to dst:80 with client sequence seq
 * (server sequence sseq): flags and payload set by the caller. */
static struct pkt_spec cpkt(int v6, const char *src, const char *dst, uint16_t sport,
			    uint32_t seq, uint32_t sseq)
{
	struct pkt_spec s = { .v6 = v6, .src = src, .dst = dst, .sport = sport, .dport = 80,
			      .seq = seq, .ack = sseq, .ackf = 1 };
	return s;
}

static struct pkt_spec spkt(const struct pkt_spec *c)
{
	struct pkt_spec s = *c;

	s.src = c->dst, s.dst = c->src, s.sport = c->dport, s.dport = c->sport;
	s.seq = c->ack, s.ack = c->seq;
	return s;
}

/* A tcp connection opened as a real client and server do: SYN (XDP), SYN-ACK (TC egress),
 * ACK (XDP). The client's ISN is isn, the server's sisn. */
static void open_conn(struct fixture *f, int v6, const char *src, const char *dst,
		      uint16_t sport, uint32_t isn, uint32_t sisn)
{
	struct pkt_spec syn = cpkt(v6, src, dst, sport, isn, 0), sa, ack;

	syn.ackf = 0, syn.syn = 1, syn.tcp_opts = 20;
	assert_int_equal(send_pkt(f, 0, &syn), XDP_PASS);
	sa = spkt(&syn);
	sa.seq = sisn, sa.ack = isn + 1, sa.ackf = 1;
	assert_int_equal(send_pkt(f, 2, &sa), TC_ACT_UNSPEC);
	ack = cpkt(v6, src, dst, sport, isn + 1, sisn + 1);
	assert_int_equal(send_pkt(f, 0, &ack), XDP_PASS);
}

/* In-flight (tcp: open connections) or busy of a service: the total, net of releases. */
static long long total(struct fixture *f, int svc,
		       int (*rd)(const struct sluice_maps *, int, struct sluice_inflight *))
{
	struct sluice_inflight in;

	assert_int_equal(rd(&f->m, f->idx[svc], &in), 0);
	return in.total;
}
#define conns(f, svc) total(f, svc, maps_read_inflight)
#define busy_of(f, svc) total(f, svc, maps_read_busy)

static unsigned long long completed(struct fixture *f, int svc)
{
	return stat_sum(f, svc, offsetof(struct sluice_class_stats, completed));
}

static int n_flows(struct fixture *f)
{
	int per[SLUICE_MIN_SERVICE_SLOTS];

	return maps_count_flows(&f->m, per, SLUICE_MIN_SERVICE_SLOTS);
}

/* "in-flight a b c any, busy a b, flows": the counts the test follows, as one string. */
static const char *counts(struct fixture *f)
{
	static char buf[128];

	snprintf(buf, sizeof(buf), "%lld %lld %lld %lld, %lld %lld, %d", conns(f, A), conns(f, B),
		 conns(f, C), conns(f, ANY), busy_of(f, A), busy_of(f, B), n_flows(f));
	return buf;
}

static void test_one_client_port_two_local_addresses(void **state)
{
	struct fixture *f = *state;
	static const char q[] = "query", r[] = "reply";
	const char *cl = "198.18.1.2", *cl6 = "2001:db8:9::9";
	struct pkt_spec d, fin;

	/* 198.18.1.2:40100 to 198.18.0.1:80 (a) and to 198.18.0.5:80 (b) at once */
	open_conn(f, 0, cl, "198.18.0.1", 40100, 1000, 70000);
	open_conn(f, 0, cl, "198.18.0.5", 40100, 5000, 90000);
	assert_string_equal(counts(f), "1 1 0 0, 0 0, 2");

	/* a query to b opens b's turn only (TC ingress), b's reply ends it (TC egress) */
	d = cpkt(0, cl, "198.18.0.5", 40100, 5001, 90001);
	d.psh = 1, d.payload = q, d.payload_len = sizeof(q) - 1;
	assert_int_equal(send_pkt(f, 1, &d), TC_ACT_UNSPEC);
	assert_string_equal(counts(f), "1 1 0 0, 0 1, 2");
	d = spkt(&d);
	d.payload = r, d.payload_len = sizeof(r) - 1, d.ack += sizeof(q) - 1;
	assert_int_equal(send_pkt(f, 2, &d), TC_ACT_UNSPEC);
	assert_string_equal(counts(f), "1 1 0 0, 0 0, 2");

	/* the client's FIN to a ends a's flow only */
	fin = cpkt(0, cl, "198.18.0.1", 40100, 1001, 70001);
	fin.fin = 1;
	assert_int_equal(send_pkt(f, 0, &fin), XDP_PASS);
	assert_string_equal(counts(f), "0 1 0 0, 0 0, 1");
	assert_int_equal(completed(f, A), 1);
	assert_int_equal(completed(f, B), 0);
	/* the server's RST from b ends b's */
	fin = spkt(&fin);
	fin.src = "198.18.0.5", fin.seq = 90001 + sizeof(r) - 1, fin.ack = 5001 + sizeof(q) - 1;
	fin.fin = 0, fin.rst = 1;
	assert_int_equal(send_pkt(f, 2, &fin), TC_ACT_UNSPEC);
	assert_string_equal(counts(f), "0 0 0 0, 0 0, 0");
	assert_int_equal(completed(f, B), 1);

	/* IPv6: [2001:db8:9::9]:40200 to [2001:db8::1]:80 (c) and [2001:db8::2]:80 (the
	 * port-only service), ended by the GC (their ends never seen): both given back */
	open_conn(f, 1, cl6, "2001:db8::1", 40200, 3000, 11000);
	open_conn(f, 1, cl6, "2001:db8::2", 40200, 4000, 12000);
	assert_string_equal(counts(f), "0 0 1 1, 0 0, 2");
	assert_int_equal(maps_gc_flows(&f->m, monotonic_ns() + 7200ull * 1000000000ull,
				       1000000000ull, 1000000000ull, NULL, NULL), 2);
	assert_string_equal(counts(f), "0 0 0 0, 0 0, 0");
}

static void test_config_refuses_same_address_twice(void **state)
{
	static struct sluice_config c;
	struct doc_errors e;
	const char *dup = "interface: lo\nservices:\n"
			  "  - { name: a, port: \"198.18.0.1:80\" }\n"
			  "  - { name: b, port: \"198.18.0.1:80\" }\n";
	const char *fine = "interface: lo\nservices:\n"
			   "  - { name: a, port: \"198.18.0.1:80\" }\n"
			   "  - { name: b, port: \"198.18.0.2:80\" }\n"
			   "  - { name: c, port: 80 }\n";
	const char *bad = "interface: lo\nservices:\n  - { name: a, port: \"2001:db8::1:80\" }\n";

	assert_int_not_equal(sluice_config_parse(dup, strlen(dup), "t", &c, &e), 0);
	assert_non_null(strstr(e.e[0].msg, "duplicate port 80"));
	sluice_config_free(&c);
	assert_int_equal(sluice_config_parse(fine, strlen(fine), "t", &c, &e), 0);
	assert_int_equal(c.services[0].has_addr, 1);
	assert_int_equal(c.services[2].has_addr, 0);
	sluice_config_free(&c);
	assert_int_not_equal(sluice_config_parse(bad, strlen(bad), "t", &c, &e), 0);
	assert_non_null(strstr(e.e[0].msg, "[ADDR]:PORT"));
	sluice_config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_same_port_different_addresses, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_egress_by_source_address, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_one_client_port_two_local_addresses, setup,
						harness_teardown),
		cmocka_unit_test(test_config_refuses_same_address_twice),
	};

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root\n");
		return 0;
	}
	/* A private network namespace: nothing here touches the host's interfaces. */
	if (unshare(CLONE_NEWNET) != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, harness_shared_release);
}
