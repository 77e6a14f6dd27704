// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sock_diag against real sockets on loopback: a listener nobody accepts from shows exactly
 * the connections made to it, per local address for services at an address; live
 * connections are found by their flow key, local address included. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <setjmp.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <errno.h>
#include <cmocka.h>

#include "kernel/sockdiag.h"

static int listener_at(in_addr_t addr, uint16_t *port);
static int connect_to(in_addr_t addr, uint16_t port);

/* Connections reach the listener's accept queue asynchronously after connect() returns (the
 * handshake's last ACK): wait for entry i of the reading to show `queued`, at most 2 s, and
 * leave the asserting to the caller. */
static void await_queued_at(const struct acceptq_want *want, int n, int i, unsigned queued)
{
	struct acceptq out[8];

	for (int t = 0; t < 2000; t++) {
		if (acceptq_read_at(want, n, out) == 0 && out[i].queued == queued)
			return;
		usleep(1000);
	}
}

static void await_queued(const uint16_t *ports, int n, int i, unsigned queued)
{
	struct acceptq q[8];

	for (int t = 0; t < 2000; t++) {
		if (acceptq_read(ports, n, q) == 0 && q[i].queued == queued)
			return;
		usleep(1000);
	}
}

/* The reader's recv(), here so a test can have a signal interrupt the next one (EINTR). */
static int interrupt_next_recv;

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	if (interrupt_next_recv) {
		interrupt_next_recv = 0;
		errno = EINTR;
		return -1;
	}
	return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

static int listener(uint16_t *port)
{
	*port = 0;
	return listener_at(INADDR_LOOPBACK, port);
}

static void test_counts_unaccepted_connections(void **st)
{
	uint16_t port, ports[2];
	int ls = listener(&port), c[3];
	struct acceptq q[2];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	(void)st;
	ports[0] = port;
	ports[1] = 1; /* nothing listens on port 1 */
	assert_int_equal(acceptq_read(ports, 2, q), 0);
	assert_int_equal(q[0].listeners, 1);
	assert_int_equal(q[0].queued, 0);
	assert_int_equal(q[0].backlog, 16);
	assert_int_equal(q[1].listeners, 0);
	a.sin_port = htons(port);
	for (int i = 0; i < 3; i++) {
		c[i] = socket(AF_INET, SOCK_STREAM, 0);
		assert_int_equal(connect(c[i], (struct sockaddr *)&a, sizeof(a)), 0);
	}
	await_queued(ports, 2, 0, 3);
	assert_int_equal(acceptq_read(ports, 2, q), 0);
	assert_int_equal(q[0].queued, 3);
	close(accept(ls, NULL, NULL));
	assert_int_equal(acceptq_read(ports, 2, q), 0);
	assert_int_equal(q[0].queued, 2);
	for (int i = 0; i < 3; i++)
		close(c[i]);
	close(ls);
}

static void test_live_flows(void **st)
{
	uint16_t port;
	int ls = listener(&port), c, a;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in me;
	socklen_t l = sizeof(me);
	struct sluice_flow_key *keys = NULL, k;
	int n;

	(void)st;
	to.sin_port = htons(port);
	c = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&to, sizeof(to)), 0);
	a = accept(ls, NULL, NULL);
	getsockname(c, (struct sockaddr *)&me, &l);
	memset(&k, 0, sizeof(k));
	k.client_addr[10] = k.client_addr[11] = 0xff;
	memcpy(k.client_addr + 12, &me.sin_addr, 4);
	k.client_port = me.sin_port;
	k.service_port = htons(port);
	memcpy(k.local_addr, k.client_addr, 16); /* 127.0.0.1 to 127.0.0.1 */

	n = live_flows_read(&port, 1, &keys);
	assert_true(n >= 1);
	assert_true(live_flows_has(keys, n, &k));
	k.local_addr[15] = 2; /* the same client address and port at another local address */
	assert_false(live_flows_has(keys, n, &k));
	k.local_addr[15] = 1;
	free(keys);
	/* Both ends closed (and the server's side gone): no longer live. */
	close(c);
	close(a);
	usleep(20000);
	n = live_flows_read(&port, 1, &keys);
	assert_true(n >= 0);
	/* The client's end may linger in TIME-WAIT, but on its own port: not the service's. */
	assert_false(live_flows_has(keys, n, &k));
	free(keys);
	close(ls);
}

static int listener6_any(uint16_t *port, int v6only);

/* The listeners read in one walk of the kernel's table for both families (what sluiced asks)
 * and family by family (what a kernel that refuses the first is asked) agree: queues,
 * backlogs, IPv4 and IPv6 listeners. */
static void test_one_walk_and_two_agree(void **st)
{
	uint16_t p4, p6 = 0, ports[3];
	int l4 = listener(&p4), l6 = listener6_any(&p6, 1), c[2];
	struct acceptq one[3], two[3];
	struct acceptq_want want[3];
	struct acceptq_reader r1, r2;

	(void)st;
	ports[0] = p4;
	ports[1] = p6;
	ports[2] = 1;
	for (int i = 0; i < 3; i++)
		want[i] = (struct acceptq_want){ .port = ports[i] };
	for (int i = 0; i < 2; i++)
		c[i] = connect_to(INADDR_LOOPBACK, p4);
	await_queued(ports, 3, 0, 2);
	acceptq_reader_init(&r1);
	acceptq_reader_init(&r2);
	r2.two_dumps = 1;
	assert_int_equal(acceptq_reader_read(&r1, want, 3, one), 0);
	assert_int_equal(r1.two_dumps, 0);         /* this kernel takes the one-walk request */
	assert_int_equal(acceptq_reader_read(&r2, want, 3, two), 0);
	assert_memory_equal(one, two, sizeof(one));
	assert_int_equal(one[0].queued, 2);
	assert_int_equal(one[0].listeners, 1);
	assert_int_equal(one[1].listeners, 1);     /* the IPv6 one */
	assert_int_equal(one[1].backlog, 16);
	assert_int_equal(one[2].listeners, 0);
	acceptq_reader_free(&r1);
	acceptq_reader_free(&r2);
	for (int i = 0; i < 2; i++)
		close(c[i]);
	close(l4);
	close(l6);
}

/* A listener on addr:port (host order; port 0: any), backlog 16; its port in *port. */
static int listener_at(in_addr_t addr, uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(addr),
				 .sin_port = htons(*port) };
	socklen_t l = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0);

	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s, 16), 0);
	getsockname(s, (struct sockaddr *)&a, &l);
	*port = ntohs(a.sin_port);
	return s;
}

/* An IPv6 wildcard listener ([::]:port, port 0: any), IPV6_V6ONLY set to v6only. */
static int listener6_any(uint16_t *port, int v6only)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT,
				  .sin6_port = htons(*port) };
	socklen_t l = sizeof(a);
	int s = socket(AF_INET6, SOCK_STREAM, 0);

	assert_true(s >= 0);
	assert_int_equal(setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)), 0);
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s, 16), 0);
	getsockname(s, (struct sockaddr *)&a, &l);
	*port = ntohs(a.sin6_port);
	return s;
}

static int connect_to(in_addr_t addr, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(addr),
				 .sin_port = htons(port) };
	int c = socket(AF_INET, SOCK_STREAM, 0);

	assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	return c;
}

static struct acceptq_want want4(uint16_t port, in_addr_t addr)
{
	struct acceptq_want w = { .port = port, .has_addr = addr != 0 };
	__be32 a = htonl(addr);

	if (addr) {
		w.addr[10] = w.addr[11] = 0xff;
		memcpy(w.addr + 12, &a, 4);
	}
	return w;
}

#define LO(n) (0x7f000000u + (n))

/* Two services on one port at two local addresses, each with its own listener: each sees its
 * own queue; a port-only service on that port sees neither (both addresses are services'); a
 * service at an address with no listener of its own and no wildcard one sees none. Then, in
 * a network namespace of its own (a wildcard listener there binds nothing of the host's), a
 * wildcard listener serves a service at an address without its own listener and the
 * port-only one, not a service at an IPv6 address. */
static void test_listen_queue_by_address(void **st)
{
	uint16_t p = 0, q = 0;
	int a = listener_at(LO(2), &p), b = listener_at(LO(3), &p), c[3], w, d;
	struct acceptq_want want[5] = { want4(p, LO(2)), want4(p, LO(3)), want4(p, 0),
					want4(p, LO(4)), want4(1, 0) };
	struct acceptq out[5];
	struct ifreq ifr = { 0 };

	(void)st;
	for (int i = 0; i < 3; i++)
		c[i] = connect_to(LO(3), p);
	await_queued_at(want, 5, 1, 3);
	assert_int_equal(acceptq_read_at(want, 5, out), 0);
	assert_int_equal(out[0].listeners, 1);
	assert_int_equal(out[0].queued, 0);
	assert_int_equal(out[1].listeners, 1);
	assert_int_equal(out[1].queued, 3);
	assert_int_equal(out[1].backlog, 16);
	assert_int_equal(out[2].listeners, 0);
	assert_int_equal(out[3].listeners, 0);
	assert_int_equal(out[4].listeners, 0);
	for (int i = 0; i < 3; i++)
		close(c[i]);
	close(a);
	close(b);

	/* The wildcard half needs a network namespace of its own: without root it is a skip
	 * (tests/run.sh counts it as one), never a pass; as root, no namespace is a failure. */
	if (geteuid() != 0) {
		print_message("# skip reason: needs root (the wildcard half: a network namespace of its own)\n");
		skip();
	}
	assert_int_equal(unshare(CLONE_NEWNET), 0);
	strcpy(ifr.ifr_name, "lo");
	ifr.ifr_flags = IFF_UP;
	d = socket(AF_INET, SOCK_DGRAM, 0);
	assert_int_equal(ioctl(d, SIOCSIFFLAGS, &ifr), 0);
	close(d);
	w = listener_at(0, &q);
	c[0] = connect_to(LO(5), q);
	want[0] = want4(q, LO(5));
	want[1] = want4(q, 0);
	want[2] = want4(q, 0);
	want[2].has_addr = 1;
	memset(want[2].addr, 0, 16);
	want[2].addr[0] = 0x20, want[2].addr[1] = 0x01, want[2].addr[15] = 1; /* 2001::1 */
	await_queued_at(want, 3, 0, 1);
	assert_int_equal(acceptq_read_at(want, 3, out), 0);
	assert_int_equal(out[0].listeners, 1);
	assert_int_equal(out[0].queued, 1);
	assert_int_equal(out[1].listeners, 1);
	assert_int_equal(out[1].queued, 1);
	assert_int_equal(out[2].listeners, 0);
	close(c[0]);
	close(w);

	/* An IPv6 wildcard listener takes the port's IPv4 connections too unless it is set
	 * IPV6_V6ONLY: a service at an IPv4 address without a listener of its own counts it only
	 * then (a service at an IPv6 address counts it either way). The reader kept from call
	 * to call (socket, port index) says the same as a fresh one, call after call. */
	for (int only = 0; only < 2; only++) {
		struct acceptq_reader rd;
		struct acceptq again[3];

		q = 0;
		w = listener6_any(&q, only);
		want[0] = want4(q, LO(5));
		want[1] = want4(q, 0);
		want[2].port = q;
		assert_int_equal(acceptq_read_at(want, 3, out), 0);
		assert_int_equal(out[0].listeners, only ? 0 : 1);
		assert_int_equal(out[1].listeners, 1);
		assert_int_equal(out[2].listeners, 1);
		acceptq_reader_init(&rd);
		for (int k = 0; k < 3; k++) {
			assert_int_equal(acceptq_reader_read(&rd, want, 3, again), 0);
			assert_memory_equal(again, out, sizeof(out[0]) * 3);
		}
		acceptq_reader_free(&rd);
		close(w);
	}
}

/* A signal that interrupts the dump is not its end: what was not read yet is still live.
 * Taken for the whole answer, a partial list has the flow GC reclaim admitted connections. */
static void test_live_flows_interrupted(void **st)
{
	uint16_t port;
	int ls = listener(&port), c = connect_to(INADDR_LOOPBACK, port), a = accept(ls, NULL, NULL);
	struct sockaddr_in me;
	socklen_t l = sizeof(me);
	struct sluice_flow_key *keys = NULL, k;
	int n;

	(void)st;
	getsockname(c, (struct sockaddr *)&me, &l);
	memset(&k, 0, sizeof(k));
	k.client_addr[10] = k.client_addr[11] = 0xff;
	memcpy(k.client_addr + 12, &me.sin_addr, 4);
	k.client_port = me.sin_port;
	k.service_port = htons(port);
	memcpy(k.local_addr, k.client_addr, 16);
	interrupt_next_recv = 1;
	n = live_flows_read(&port, 1, &keys);
	assert_int_equal(interrupt_next_recv, 0);
	assert_true(n >= 1);
	assert_true(live_flows_has(keys, n, &k));
	free(keys);
	close(c);
	close(a);
	close(ls);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts_unaccepted_connections),
		cmocka_unit_test(test_live_flows),
		cmocka_unit_test(test_live_flows_interrupted),
		cmocka_unit_test(test_one_walk_and_two_agree),
		cmocka_unit_test(test_listen_queue_by_address), /* last: it leaves the namespace */
	};
	return cmocka_run_group_tests_name("sockdiag", tests, NULL, NULL);
}
