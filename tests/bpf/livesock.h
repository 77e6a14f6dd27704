// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* A real TCP connection on the test's own network namespace's loopback, for the paths that ask
 * the kernel's socket table (a connection sluice never saw the handshake of). Uses cmocka's
 * asserts: include after cmocka.h. */
#ifndef SLUICE_TEST_LIVESOCK_H
#define SLUICE_TEST_LIVESOCK_H
#include <stdint.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <linux/tcp.h>
#include <net/if.h>
#include <sys/ioctl.h>

/* A real connection on this namespace's loopback, established before anything of it went
 * through sluice (as one open when sluiced attached, or whose handshake record a SYN flood
 * pushed out): the server's accepted socket, the client's port, and where the server's stack
 * is in each direction (read in TCP_REPAIR, which leaves the connection established). */
struct live_conn {
	int lsn, cli, srv;
	uint16_t cport;
	uint32_t rcv_nxt, snd_nxt;
};

static inline uint32_t repair_queue_seq(int fd, int queue)
{
	uint32_t seq = 0;
	socklen_t len = sizeof(seq);

	assert_int_equal(setsockopt(fd, IPPROTO_TCP, TCP_REPAIR_QUEUE, &queue, sizeof(queue)), 0);
	assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_QUEUE_SEQ, &seq, &len), 0);
	return seq;
}

/* A listener on this namespace's loopback at port (the loopback brought up first: a fresh
 * namespace has it down). */
static inline int live_listen(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct ifreq ifr = { 0 };
	int s = socket(AF_INET, SOCK_DGRAM, 0), lsn, one = 1;

	assert_true(s >= 0);
	strcpy(ifr.ifr_name, "lo");
	assert_int_equal(ioctl(s, SIOCGIFFLAGS, &ifr), 0);
	ifr.ifr_flags |= IFF_UP;
	assert_int_equal(ioctl(s, SIOCSIFFLAGS, &ifr), 0);
	close(s);
	lsn = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(lsn >= 0);
	setsockopt(lsn, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(lsn, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lsn, 4), 0);
	return lsn;
}

/* One more connection to listener lsn (at port); its lsn is -1 (the caller owns the
 * listener). */
static inline struct live_conn live_connect(int lsn, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct live_conn c = { .lsn = -1 };
	socklen_t len = sizeof(a);
	int one = 1, off = 0;

	c.cli = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(c.cli, (struct sockaddr *)&a, sizeof(a)), 0);
	c.srv = accept(lsn, NULL, NULL);
	assert_true(c.srv >= 0);
	assert_int_equal(getsockname(c.cli, (struct sockaddr *)&a, &len), 0);
	c.cport = ntohs(a.sin_port);
	assert_int_equal(setsockopt(c.srv, IPPROTO_TCP, TCP_REPAIR, &one, sizeof(one)), 0);
	c.rcv_nxt = repair_queue_seq(c.srv, TCP_RECV_QUEUE);
	c.snd_nxt = repair_queue_seq(c.srv, TCP_SEND_QUEUE);
	assert_int_equal(setsockopt(c.srv, IPPROTO_TCP, TCP_REPAIR, &off, sizeof(off)), 0);
	return c;
}

static inline struct live_conn live_connection(uint16_t port)
{
	int lsn = live_listen(port);
	struct live_conn c = live_connect(lsn, port);

	c.lsn = lsn;
	return c;
}

static inline void live_close(struct live_conn *c)
{
	close(c->cli);
	close(c->srv);
	if (c->lsn >= 0)
		close(c->lsn);
}

#endif
