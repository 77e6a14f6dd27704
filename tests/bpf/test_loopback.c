// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The programs attached to the loopback of a private network namespace as sluiced attaches
 * them (XDP in generic mode, as on any device whose driver has no native XDP; TC on both
 * sides), with real sockets: what test runs cannot show.
 *   - Generic XDP copies most frames before its program runs (loopback's are all clones), and
 *     the copy reaches TC ingress with its MAC header out of view: requests are still decided
 *     there, a refused one still gets its 429 on the wire, and tcp turns are still seen; a
 *     SYN refused at XDP gets its RST (XDP_TX in generic mode, or from TC ingress when the
 *     device's RSTs are left to TC).
 *   - TC egress's memo of an http server socket (egress_memo, socket storage): with it, a
 *     response data segment whose ack the last whole look at the flow already saw stops before
 *     the flow table. Each test run has a socket of its own, so only real sockets show it:
 *     every request of a keep-alive connection is still ended by its own response, however many
 *     segments each response takes; a 100 Continue leaves the memo alone, so the final
 *     response, which carries the same ack, still ends the request; the memo holds the ack the
 *     server's stack is at, and a tcp service's socket gets none (its turns end at the
 *     server's new data, which only each segment's seq tells).
 *   - A refused request on a connection whose previous answer is still on its way (a
 *     pipelining client whose full window holds it back in the server) is admitted untracked,
 *     not answered inside that answer; once the client has it all, the next is refused. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sched.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <cmocka.h>

#include "harness.h"
#include "netns.h"
#include "livesock.h"
#include "pktbuild.h"

#define WEB_PORT 8080
#define DB_PORT 5432
#define FULL_PORT 8081

static const char *CONFIG =
	"interface: lo\n"
	"services:\n"
	"  - name: web\n"
	"    port: 8080\n"
	"    protocol: http\n"
	"    limit: { fixed: 64 }\n"
	"    default_class: L0\n"
	"  - name: full\n"          /* one request at a time: the next is refused */
	"    port: 8081\n"
	"    protocol: http\n"
	"    limit: { fixed: 1 }\n"
	"    default_class: L0\n"
	"  - name: shut\n"          /* every connection refused at its SYN */
	"    port: 7001\n"
	"    protocol: tcp\n"
	"    reject: rst\n"
	"    limit: { fixed: 8 }\n"
	"    headroom: { L0: 100, L1: 100, L2: 100, L3: 0 }\n"
	"    headroom_mode: fixed\n"
	"    default_class: L3\n"
	"  - name: db\n"
	"    port: 5432\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 64 }\n"
	"    default_class: L0\n";

/* Every socket a test opens, closed at its teardown (also when an assert cut the test short:
 * a listener left open would fail the next test's bind). */
static int open_fds[32], n_open;

/* Each socket is tracked, and waits at most 2 s for anything: a regression fails its test
 * instead of hanging it. */
static int track(int fd)
{
	struct timeval tv = { .tv_sec = 2 };

	if (fd < 0)
		return fd;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (n_open < (int)(sizeof(open_fds) / sizeof(open_fds[0])))
		open_fds[n_open++] = fd;
	return fd;
}

static int teardown(void **state)
{
	int lo = (int)if_nametoindex("lo");
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = lo,
		    .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);

	/* in the order opened: each client closes before its server side, which so closes
	 * passively and keeps nothing on the port */
	for (int i = 0; i < n_open; i++)
		close(open_fds[i]);
	n_open = 0;
	bpf_xdp_detach(lo, XDP_FLAGS_SKB_MODE, NULL);
	bpf_tc_hook_destroy(&hook);
	return harness_teardown(state);
}

/* The three programs on lo (XDP generic: lo has no driver mode). The namespace goes with the
 * process, and the attachments with it; a setup that fails undoes what it did, since cmocka
 * runs no teardown after it. An object of its own (harness_fixture, not the shared one): real
 * sockets' segments run the attached programs, whose sk_storage a reset could not clear. */
static int setup(void **state)
{
	int lo = (int)if_nametoindex("lo");
	struct fixture *f = lo ? harness_fixture(CONFIG, 0, 3600000000000ull) : NULL;
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = lo, .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, in);
	LIBBPF_OPTS(bpf_tc_opts, out);

	if (!f)
		return -1;
	*state = f;
	if (bpf_xdp_attach(lo, bpf_program__fd(f->skel->progs.sluice_xdp_ingress),
			   XDP_FLAGS_SKB_MODE, NULL) ||
	    (bpf_tc_hook_create(&hook) && errno != EEXIST))
		goto undo;
	hook.attach_point = BPF_TC_INGRESS;
	in.prog_fd = bpf_program__fd(f->skel->progs.sluice_tc_ingress);
	if (bpf_tc_attach(&hook, &in))
		goto undo;
	hook.attach_point = BPF_TC_EGRESS;
	out.prog_fd = bpf_program__fd(f->skel->progs.sluice_tc_egress);
	if (bpf_tc_attach(&hook, &out) == 0)
		return 0;
undo:
	teardown(state);
	return -1;
}


static long long inflight(struct fixture *f, int svc)
{
	struct sluice_inflight in;

	assert_int_equal(maps_read_inflight(&f->m, f->idx[svc], &in), 0);
	return in.total;
}

static struct sluice_class_stats l0_stats(struct fixture *f, int svc)
{
	struct sluice_class_stats st;

	assert_int_equal(maps_read_class_stats(&f->m, f->idx[svc], 0, &st), 0);
	return st;
}

static unsigned long long completed(struct fixture *f)
{
	return l0_stats(f, 0).completed;
}

static void send_all(int fd, const char *s)
{
	assert_int_equal(send(fd, s, strlen(s), 0), (ssize_t)strlen(s));
}

/* Reads what the peer sent (it is all there: loopback delivers within the send). */
static void drain(int fd, size_t want)
{
	char buf[4096];
	size_t got = 0;

	while (got < want) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		assert_true(n > 0);
		got += (size_t)n;
	}
}

struct conn {
	int lsn, cli, srv;
};

/* A listener on 127.0.0.1:port; a its address. */
static int listener(uint16_t port, struct sockaddr_in *a)
{
	int fd = track(socket(AF_INET, SOCK_STREAM, 0)), one = 1;

	*a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(fd, (struct sockaddr *)a, sizeof(*a)), 0);
	assert_int_equal(listen(fd, 4), 0);
	return fd;
}

/* A connection from a client that sends one SYN retry at most: 0, or connect's errno
 * (without an answer it gives up after the 2 s every tracked socket waits, not 2 minutes). */
static int connect_once(const struct sockaddr_in *a)
{
	int cli = track(socket(AF_INET, SOCK_STREAM, 0)), one = 1;

	setsockopt(cli, IPPROTO_TCP, TCP_SYNCNT, &one, sizeof(one));
	return connect(cli, (const struct sockaddr *)a, sizeof(*a)) ? errno : 0;
}

static struct conn connect_to(uint16_t port)
{
	struct sockaddr_in a;
	struct conn c;
	int one = 1;

	c.lsn = listener(port, &a);
	c.cli = track(socket(AF_INET, SOCK_STREAM, 0));
	assert_int_equal(connect(c.cli, (struct sockaddr *)&a, sizeof(a)), 0);
	c.srv = track(accept(c.lsn, NULL, NULL));
	assert_true(c.srv >= 0);
	/* each write its own segment */
	setsockopt(c.srv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c.cli, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return c;
}

/* A second connection to c's listener. */
static struct conn another(const struct conn *c)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	struct conn n = { .lsn = c->lsn };
	int one = 1;

	assert_int_equal(getsockname(c->lsn, (struct sockaddr *)&a, &len), 0);
	n.cli = track(socket(AF_INET, SOCK_STREAM, 0));
	assert_int_equal(connect(n.cli, (struct sockaddr *)&a, sizeof(a)), 0);
	n.srv = track(accept(c->lsn, NULL, NULL));
	assert_true(n.srv >= 0);
	setsockopt(n.srv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return n;
}

/* The memo of the server's socket: 0, or -ENOENT when it has none. */
static int memo_of(struct fixture *f, int fd, uint32_t *ack)
{
	struct { uint64_t jiffies; uint32_t ack, pad; } m;

	if (bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.egress_memo), &fd, &m))
		return -errno;
	*ack = m.ack;
	return 0;
}

/* Where the server's stack is in the client's bytes (read in repair mode, left at once). */
static uint32_t server_rcv_nxt(int srv)
{
	int one = 1, off = 0;
	uint32_t seq;

	assert_int_equal(setsockopt(srv, IPPROTO_TCP, TCP_REPAIR, &one, sizeof(one)), 0);
	seq = repair_queue_seq(srv, TCP_RECV_QUEUE);
	assert_int_equal(setsockopt(srv, IPPROTO_TCP, TCP_REPAIR, &off, sizeof(off)), 0);
	return seq;
}

#define REQ "GET /x HTTP/1.1\r\nHost: t\r\n\r\n"
#define HEAD "HTTP/1.1 200 OK\r\nContent-Length: 8000\r\n\r\n"

static void test_each_request_ended_by_its_own_response(void **state)
{
	struct fixture *f = *state;
	struct conn c = connect_to(WEB_PORT);
	char chunk[2001];
	uint32_t ack = 0;

	memset(chunk, 'b', sizeof(chunk) - 1);
	chunk[sizeof(chunk) - 1] = 0;
	for (int r = 1; r <= 5; r++) {
		send_all(c.cli, REQ);
		drain(c.srv, sizeof(REQ) - 1);
		assert_int_equal(inflight(f, 0), 1);
		send_all(c.srv, HEAD);
		assert_int_equal(inflight(f, 0), 0);
		assert_int_equal(completed(f), (unsigned long long)r);
		/* the rest of the response: segments with the ack the memo holds */
		assert_int_equal(memo_of(f, c.srv, &ack), 0);
		assert_int_equal(ntohl(ack), server_rcv_nxt(c.srv));
		for (int k = 0; k < 4; k++)
			send_all(c.srv, chunk);
		drain(c.cli, sizeof(HEAD) - 1 + 4 * (sizeof(chunk) - 1));
		assert_int_equal(inflight(f, 0), 0);
		assert_int_equal(completed(f), (unsigned long long)r);
	}
}

static void test_interim_response_leaves_the_memo(void **state)
{
	struct fixture *f = *state;
	struct conn c = connect_to(WEB_PORT);
	static const char post[] = "POST /u HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
				   "Content-Length: 4\r\n\r\n";
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	static const char fin[] = "HTTP/1.1 417 Expectation Failed\r\nContent-Length: 0\r\n\r\n";
	uint32_t ack = 0;

	/* A first exchange leaves a memo on the socket. */
	send_all(c.cli, REQ);
	drain(c.srv, sizeof(REQ) - 1);
	send_all(c.srv, HEAD);
	assert_int_equal(memo_of(f, c.srv, &ack), 0);

	send_all(c.cli, post);
	drain(c.srv, sizeof(post) - 1);
	assert_int_equal(inflight(f, 0), 1);
	send_all(c.srv, cont);
	assert_int_equal(inflight(f, 0), 1); /* the final response is still to come */
	/* The server answers without the body: the same ack as the 100's. */
	send_all(c.srv, fin);
	assert_int_equal(inflight(f, 0), 0);
	assert_int_equal(completed(f), 2);
}

static void test_tcp_service_socket_has_no_memo(void **state)
{
	struct fixture *f = *state;
	struct conn c = connect_to(DB_PORT);
	uint32_t ack = 0;

	for (int r = 0; r < 3; r++) {
		send_all(c.cli, "Q1;");
		drain(c.srv, 3);
		send_all(c.srv, "row");
		send_all(c.srv, "row");
		drain(c.cli, 6);
	}
	assert_int_equal(memo_of(f, c.srv, &ack), -ENOENT);
	/* and its turns were seen (a connection's first is held back as its setup) */
	struct sluice_svc_stats all;

	assert_int_equal(maps_read_svc_stats(&f->m, f->idx[3], &all), 0);
	assert_int_equal(all.samples[0], 2);
	assert_int_equal(inflight(f, 3), 1); /* a tcp service's in-flight: its open connection */
}

/* Before sluice put the MAC header back in view, TC ingress parsed generic XDP's copies as
 * frames of no protocol it knew: no request was decided, none refused. */
static void test_requests_decided_after_generic_xdp(void **state)
{
	struct fixture *f = *state;
	struct conn c = connect_to(WEB_PORT), held = connect_to(FULL_PORT), cut = another(&held);
	char buf[256];
	ssize_t n;

	for (int r = 1; r <= 3; r++) {
		send_all(c.cli, REQ);
		drain(c.srv, sizeof(REQ) - 1);
		assert_int_equal(inflight(f, 0), 1);
		send_all(c.srv, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
		drain(c.cli, 38);
		assert_int_equal(inflight(f, 0), 0);
	}
	assert_int_equal(l0_stats(f, 0).arrivals, 3);
	assert_int_equal(l0_stats(f, 0).admitted, 3);
	assert_int_equal(completed(f), 3);

	/* IPv6 alike (::1). */
	{
		struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(WEB_PORT),
					   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
		int one = 1, l6 = track(socket(AF_INET6, SOCK_STREAM, 0)), c6, s6;

		setsockopt(l6, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(l6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		assert_int_equal(bind(l6, (struct sockaddr *)&a6, sizeof(a6)), 0);
		assert_int_equal(listen(l6, 4), 0);
		c6 = track(socket(AF_INET6, SOCK_STREAM, 0));
		assert_int_equal(connect(c6, (struct sockaddr *)&a6, sizeof(a6)), 0);
		s6 = track(accept(l6, NULL, NULL));
		assert_true(s6 >= 0);
		send_all(c6, REQ);
		drain(s6, sizeof(REQ) - 1);
		assert_int_equal(inflight(f, 0), 1);
		send_all(s6, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
		assert_int_equal(inflight(f, 0), 0);
		assert_int_equal(l0_stats(f, 0).arrivals, 4);
	}

	/* One request holds the only slot; the next, on another connection, gets the 429. */
	send_all(held.cli, REQ);
	drain(held.srv, sizeof(REQ) - 1);
	assert_int_equal(inflight(f, 1), 1);
	send_all(cut.cli, REQ);
	n = recv(cut.cli, buf, sizeof(buf) - 1, 0);
	assert_true(n > 12);
	buf[n] = 0;
	assert_memory_equal(buf, "HTTP/1.1 429", 12);
	assert_int_equal(l0_stats(f, 1).arrivals, 2);
	assert_int_equal(inflight(f, 1), 1);
}

/* A refusal is sent at the client's ack. While the server still has bytes of an earlier answer
 * on their way (here a pipelining client whose full window keeps them queued), that is inside the
 * answer, and the refusal's RST would cut it: the request is admitted untracked instead. Once
 * the client has everything the server wrote, its next request is refused as any other. */
static void refusal_never_cuts_an_answer(struct fixture *f, struct conn c, struct conn held)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	char body[4096], buf[4096];
	size_t queued = 0, got = 0;
	ssize_t n;

	/* The first request is admitted; its answer is written until the server's buffer is full:
	 * the client reads nothing yet, so its window closes and the rest waits in the server. */
	send_all(c.cli, REQ);
	drain(c.srv, sizeof(REQ) - 1);
	send_all(c.srv, HEAD);
	queued = sizeof(HEAD) - 1;
	memset(body, 'b', sizeof(body));
	while ((n = send(c.srv, body, sizeof(body), MSG_DONTWAIT)) > 0)
		queued += (size_t)n;
	assert_true(queued > 64 * 1024);
	assert_int_equal(inflight(f, 1), 0); /* the answer's first segment ended the request */

	/* Another connection's request, unanswered, holds the only slot. */
	send_all(held.cli, REQ);
	drain(held.srv, sizeof(REQ) - 1);
	assert_int_equal(inflight(f, 1), 1);

	/* The client pipelines its next request while most of the answer is still queued. It
	 * reaches the server (a refusal's RST would have reset the server's socket). */
	send_all(c.cli, REQ);
	drain(c.srv, sizeof(REQ) - 1);
	assert_int_equal(l0_stats(f, 1).arrivals, 3);
	assert_int_equal(l0_stats(f, 1).admitted, 3);
	assert_int_equal(l0_stats(f, 1).untracked, 1);
	assert_int_equal(inflight(f, 1), 1);

	/* The whole answer arrives as the server wrote it: no 429 inside, no reset. */
	while (got < queued) {
		n = recv(c.cli, buf, sizeof(buf), 0);
		assert_true(n > 0);
		for (ssize_t i = 0; i < n; i++) {
			size_t at = got + (size_t)i;

			if (at < sizeof(HEAD) - 1)
				assert_int_equal(buf[i], HEAD[at]);
			else
				assert_int_equal(buf[i], 'b');
		}
		got += (size_t)n;
	}
	send_all(c.srv, ok);
	drain(c.cli, sizeof(ok) - 1);

	/* The client has all the server wrote: its next request gets the 429. */
	send_all(c.cli, REQ);
	n = recv(c.cli, buf, sizeof(buf) - 1, 0);
	assert_true(n > 12);
	assert_memory_equal(buf, "HTTP/1.1 429", 12);
	assert_int_equal(l0_stats(f, 1).arrivals, 4);
	assert_int_equal(l0_stats(f, 1).untracked, 1);
	assert_int_equal(inflight(f, 1), 1);
}

static void test_refusal_never_cuts_an_answer_in_flight(void **state)
{
	struct conn c = connect_to(FULL_PORT);

	refusal_never_cuts_an_answer(*state, c, another(&c));
}

/* The same over IPv6 (::1): the socket asked for is found by the IPv6 4-tuple. */
static void test_refusal_never_cuts_an_answer_in_flight_ipv6(void **state)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(FULL_PORT),
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int one = 1;
	struct conn c[2];

	c[0].lsn = c[1].lsn = track(socket(AF_INET6, SOCK_STREAM, 0));
	setsockopt(c[0].lsn, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(c[0].lsn, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	assert_int_equal(bind(c[0].lsn, (struct sockaddr *)&a6, sizeof(a6)), 0);
	assert_int_equal(listen(c[0].lsn, 4), 0);
	for (int i = 0; i < 2; i++) {
		c[i].cli = track(socket(AF_INET6, SOCK_STREAM, 0));
		assert_int_equal(connect(c[i].cli, (struct sockaddr *)&a6, sizeof(a6)), 0);
		c[i].srv = track(accept(c[i].lsn, NULL, NULL));
		assert_true(c[i].srv >= 0);
		setsockopt(c[i].srv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(c[i].cli, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	refusal_never_cuts_an_answer(*state, c[0], c[1]);
}

/* Only a real client's ack says an answer is on its way: a crafted request segment whose ack
 * lies behind what its client already acknowledged (the answer's first byte, here) is refused
 * as any other, though the server still has bytes queued, rather than admitted untracked. */
static void test_stale_ack_gets_no_pass_from_an_answer_in_flight(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex("lo"),
				  .sll_halen = ETH_ALEN };
	struct conn c = connect_to(FULL_PORT), held = another(&c);
	struct sluice_class_stats st;
	struct sockaddr_in ca;
	socklen_t alen = sizeof(ca);
	uint8_t frame[512];
	char body[4096];
	int one = 1, off = 0, ps = track(socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)));
	uint32_t first_byte, next_seq;
	unsigned long long rejected = 0;
	size_t len, queued = 0;
	ssize_t n;

	assert_true(ps >= 0);
	assert_int_equal(getsockname(c.cli, (struct sockaddr *)&ca, &alen), 0);
	send_all(c.cli, REQ);
	drain(c.srv, sizeof(REQ) - 1);
	/* where the client is before any answer: the answer's first byte */
	assert_int_equal(setsockopt(c.cli, IPPROTO_TCP, TCP_REPAIR, &one, sizeof(one)), 0);
	first_byte = repair_queue_seq(c.cli, TCP_RECV_QUEUE);
	next_seq = repair_queue_seq(c.cli, TCP_SEND_QUEUE);
	assert_int_equal(setsockopt(c.cli, IPPROTO_TCP, TCP_REPAIR, &off, sizeof(off)), 0);
	send_all(c.srv, HEAD);
	memset(body, 'b', sizeof(body));
	while ((n = send(c.srv, body, sizeof(body), MSG_DONTWAIT)) > 0)
		queued += (size_t)n;
	assert_true(queued > 64 * 1024);
	send_all(held.cli, REQ);
	drain(held.srv, sizeof(REQ) - 1);
	assert_int_equal(inflight(f, 1), 1);

	/* The client's next request, crafted with the ack of the answer's first byte, which the
	 * client has long acknowledged past. */
	struct pkt_spec rq = { .src = "127.0.0.1", .dst = "127.0.0.1", .sport = ntohs(ca.sin_port),
			       .dport = FULL_PORT, .seq = next_seq, .ack = first_byte, .ackf = 1,
			       .psh = 1, .payload = REQ, .payload_len = sizeof(REQ) - 1 };
	len = build_pkt(frame, &rq);
	memset(frame, 0, 12);            /* lo's own address: a frame for this host */
	assert_int_equal(sendto(ps, frame, len, 0, (struct sockaddr *)&to, sizeof(to)),
			 (ssize_t)len);
	for (int i = 0; i < 100 && l0_stats(f, 1).arrivals < 3; i++)
		usleep(10000);
	st = l0_stats(f, 1);
	for (int r = 0; r < SLUICE_REJ_REASONS; r++)
		rejected += st.rejected[r];
	assert_int_equal(st.arrivals, 3);
	assert_int_equal(st.untracked, 0);
	assert_int_equal(rejected, 1);
	assert_int_equal(inflight(f, 1), 1);
}

/* A SYN refused at XDP in generic mode: its RST goes back out of the device (XDP_TX), and the
 * client's connect fails at once. */
static void test_refused_syn_answered_in_generic_mode(void **state)
{
	struct fixture *f = *state;
	struct sluice_pkt_stats ps;
	struct sockaddr_in a;

	listener(7001, &a);
	for (int i = 0; i < 3; i++)
		assert_int_equal(connect_once(&a), ECONNREFUSED);
	assert_int_equal(maps_read_pkt_stats(&f->m, &ps), 0);
	assert_int_equal(ps.rst_sent, 3);
}

/* The same with the device's RSTs left to TC ingress (as for a NIC that strips VLAN tags): XDP
 * marks the SYN in its metadata and passes it, and TC, which sees the frame only once its MAC
 * header is back in view, reads the mark there and sends the RST. */
static void test_refused_syn_answered_from_tc_in_generic_mode(void **state)
{
	struct fixture *f = *state;
	struct sluice_pkt_stats ps;
	struct sockaddr_in a;
	__u32 lo = if_nametoindex("lo"), one = 1;

	assert_int_equal(bpf_map_update_elem(bpf_map__fd(f->skel->maps.syn_reply_tc), &lo, &one, 0),
			 0);
	listener(7001, &a);
	assert_int_equal(connect_once(&a), ECONNREFUSED);
	assert_int_equal(maps_read_pkt_stats(&f->m, &ps), 0);
	assert_int_equal(ps.rst_sent, 1);
	assert_int_equal(ps.reply_failed, 0);
	/* It was TC's RST, not XDP's: with TC ingress gone, XDP passes the marked SYN on and the
	 * connection is made. */
	LIBBPF_OPTS(bpf_tc_hook, in, .ifindex = (int)lo, .attach_point = BPF_TC_INGRESS);
	assert_int_equal(bpf_tc_hook_destroy(&in), 0);
	assert_int_equal(connect_once(&a), 0);
}

/* A frame may carry bytes past its IP length (a trailer the stack trims): a request in such a
 * frame, after generic XDP copied it, is still seen. The request is sent as the client would
 * (its sequence numbers read in repair mode) through a packet socket, with 16 bytes after it. */
static void test_request_with_a_trailer_seen_after_generic_xdp(void **state)
{
	struct fixture *f = *state;
	struct conn c = connect_to(WEB_PORT);
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex("lo"),
				  .sll_halen = ETH_ALEN };
	struct sockaddr_in ca;
	socklen_t alen = sizeof(ca);
	uint8_t frame[512];
	int one = 1, off = 0, ps = track(socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)));
	size_t len;

	assert_true(ps >= 0);
	assert_int_equal(getsockname(c.cli, (struct sockaddr *)&ca, &alen), 0);
	assert_int_equal(setsockopt(c.cli, IPPROTO_TCP, TCP_REPAIR, &one, sizeof(one)), 0);
	struct pkt_spec rq = { .src = "127.0.0.1", .dst = "127.0.0.1", .sport = ntohs(ca.sin_port),
			       .dport = WEB_PORT, .seq = repair_queue_seq(c.cli, TCP_SEND_QUEUE),
			       .ack = repair_queue_seq(c.cli, TCP_RECV_QUEUE), .ackf = 1, .psh = 1,
			       .payload = REQ, .payload_len = sizeof(REQ) - 1 };
	assert_int_equal(setsockopt(c.cli, IPPROTO_TCP, TCP_REPAIR, &off, sizeof(off)), 0);
	len = build_pkt(frame, &rq);
	memset(frame, 0, 12);            /* lo's own address: a frame for this host */
	memset(frame + len, 0xee, 16);   /* the trailer */
	assert_int_equal(sendto(ps, frame, len + 16, 0, (struct sockaddr *)&to, sizeof(to)),
			 (ssize_t)(len + 16));
	drain(c.srv, sizeof(REQ) - 1);
	assert_int_equal(l0_stats(f, 0).arrivals, 1);
	assert_int_equal(inflight(f, 0), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_requests_decided_after_generic_xdp, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_each_request_ended_by_its_own_response, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_interim_response_leaves_the_memo, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tcp_service_socket_has_no_memo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_request_with_a_trailer_seen_after_generic_xdp,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusal_never_cuts_an_answer_in_flight, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refusal_never_cuts_an_answer_in_flight_ipv6,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_ack_gets_no_pass_from_an_answer_in_flight,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_syn_answered_in_generic_mode, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refused_syn_answered_from_tc_in_generic_mode,
						setup, teardown),
	};

	if (private_loopback())
		return 1;
	return cmocka_run_group_tests_name("loopback", tests, NULL, NULL);
}
