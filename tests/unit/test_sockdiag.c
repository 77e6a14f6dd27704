// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sock_diag against real sockets on loopback: a listener nobody accepts from shows exactly
 * the connections made to it; live connections are found by their flow key. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "kernel/sockdiag.h"

static int listener(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0);

	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s, 16), 0);
	getsockname(s, (struct sockaddr *)&a, &l);
	*port = ntohs(a.sin_port);
	return s;
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
	usleep(10000);
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

	n = live_flows_read(&port, 1, &keys);
	assert_true(n >= 1);
	assert_true(live_flows_has(keys, n, &k));
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts_unaccepted_connections),
		cmocka_unit_test(test_live_flows),
	};
	return cmocka_run_group_tests_name("sockdiag", tests, NULL, NULL);
}
