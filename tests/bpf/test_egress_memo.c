// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* TC egress's memo of an http server socket (egress_memo, socket storage): with it, a response
 * data segment whose ack the last whole look at the flow already saw stops before the flow
 * table. Test runs cannot show it (each run has a socket of its own), so these tests attach
 * the programs to the loopback of a private network namespace and talk over real sockets:
 *   - every request of a keep-alive connection is still ended by its own response, however
 *     many segments each response takes and whatever the memo held;
 *   - a 100 Continue leaves the memo alone, so the final response, which carries the same ack,
 *     still ends the request;
 *   - the memo holds the ack the server's stack is at, and a tcp service's socket gets none
 *     (its turns end at the server's new data, which only each segment's seq tells). */
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
#include <cmocka.h>

#include "harness.h"
#include "livesock.h"

#define WEB_PORT 8080
#define DB_PORT 5432

static const char *CONFIG =
	"interface: lo\n"
	"services:\n"
	"  - name: web\n"
	"    port: 8080\n"
	"    protocol: http\n"
	"    limit: { fixed: 64 }\n"
	"    default_class: L0\n"
	"  - name: db\n"
	"    port: 5432\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 64 }\n"
	"    default_class: L0\n";

/* The TC programs on lo. No XDP: the connections are taken on from the kernel's socket table
 * at their first request, as ones open before sluiced attached. The namespace goes with the
 * process, and the attachments with it. */
static int setup(void **state)
{
	struct fixture *f = harness_fixture(CONFIG, 0, 3600000000000ull);
	int lo = (int)if_nametoindex("lo");
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = lo, .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, in);
	LIBBPF_OPTS(bpf_tc_opts, out);

	if (!f || !lo)
		return -1;
	*state = f;
	if (bpf_tc_hook_create(&hook) && errno != EEXIST)
		return -1;
	hook.attach_point = BPF_TC_INGRESS;
	in.prog_fd = bpf_program__fd(f->skel->progs.sluice_tc_ingress);
	if (bpf_tc_attach(&hook, &in))
		return -1;
	hook.attach_point = BPF_TC_EGRESS;
	out.prog_fd = bpf_program__fd(f->skel->progs.sluice_tc_egress);
	return bpf_tc_attach(&hook, &out) ? -1 : 0;
}

static int teardown(void **state)
{
	int lo = (int)if_nametoindex("lo");
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = lo,
		    .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);

	bpf_tc_hook_destroy(&hook);
	return harness_teardown(state);
}

static long long inflight(struct fixture *f, int svc)
{
	struct sluice_inflight in;

	assert_int_equal(maps_read_inflight(&f->m, f->idx[svc], &in), 0);
	return in.total;
}

static unsigned long long completed(struct fixture *f)
{
	struct sluice_class_stats st;

	assert_int_equal(maps_read_class_stats(&f->m, f->idx[0], 0, &st), 0);
	return st.completed;
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

static struct conn connect_to(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct conn c;
	int one = 1;

	c.lsn = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(c.lsn >= 0);
	setsockopt(c.lsn, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(c.lsn, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(c.lsn, 4), 0);
	c.cli = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(c.cli, (struct sockaddr *)&a, sizeof(a)), 0);
	c.srv = accept(c.lsn, NULL, NULL);
	assert_true(c.srv >= 0);
	/* each write its own segment */
	setsockopt(c.srv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c.cli, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return c;
}

static void conn_close(struct conn *c)
{
	close(c->cli);
	close(c->srv);
	close(c->lsn);
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
	conn_close(&c);
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
	conn_close(&c);
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
	conn_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_each_request_ended_by_its_own_response, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_interim_response_leaves_the_memo, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tcp_service_socket_has_no_memo, setup, teardown),
	};
	struct ifreq ifr = { 0 };
	int s;

	/* A private netns: its loopback is the test's alone. */
	if (unshare(CLONE_NEWNET) != 0) {
		perror("unshare(CLONE_NEWNET)");
		return 1;
	}
	s = socket(AF_INET, SOCK_DGRAM, 0);
	strcpy(ifr.ifr_name, "lo");
	ioctl(s, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP;
	ioctl(s, SIOCSIFFLAGS, &ifr);
	close(s);
	return cmocka_run_group_tests_name("egress_memo", tests, NULL, NULL);
}
