// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Services by local address through BPF_PROG_TEST_RUN: two services on port 80 at different
 * local addresses (and one at an IPv6 address) get their own service index, a port-only
 * service on the same port takes the other addresses, the egress side finds the service by
 * the source address, and a port without address-specific services is unchanged. */
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
	return (*state = harness_fixture(CONFIG, 0, 1000000000ull)) ? 0 : -1;
}

static unsigned long long arrivals(struct fixture *f, int svc)
{
	struct sluice_class_stats st;
	unsigned long long n = 0;

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		assert_int_equal(maps_read_class_stats(&f->m, f->idx[svc], c, &st), 0);
		n += st.arrivals;
	}
	return n;
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
		cmocka_unit_test(test_config_refuses_same_address_twice),
	};

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root\n");
		return 0;
	}
	/* A private network namespace: nothing here touches the host's interfaces. */
	if (unshare(CLONE_NEWNET) != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
