/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* What the kernel's own socket table says, read with NETLINK_SOCK_DIAG in sluiced's network
 * namespace:
 *  - the accept-queue signal: connections waiting in a service's listen socket(s) for the
 *    application to accept them. Waiting is what overload is: a busy backend that keeps up
 *    has no queue;
 *  - which connections to the services still exist, so the flow GC never reclaims a flow
 *    that is merely quiet. */
#ifndef SLUICE_SOCKDIAG_H
#define SLUICE_SOCKDIAG_H

#include <stdint.h>
#include "sluice.h"

struct acceptq {
	uint32_t queued;     /* connections waiting to be accepted, summed over listeners */
	uint32_t backlog;    /* the listeners' backlog limit, summed */
	uint32_t listeners;  /* listening sockets found on the port (v4 and v6) */
};

/* Fill out[i] for each ports[i] (host order) from one dump of TCP listeners.
 * Returns 0, or -errno when the netlink query failed (out untouched). */
int acceptq_read(const uint16_t *ports, int n, struct acceptq *out);

/* The same for services by local address: a service at an address counts the listeners
 * bound to that address, or, when there is none, the port's wildcard listeners (whose queue
 * it shares with the port's other services; an IPv4 wildcard listener takes no IPv6
 * connection); a port-only service counts the port's wildcard listeners and those bound to
 * addresses no service of the port is at. */
struct acceptq_want {
	uint16_t port;                   /* host order */
	uint8_t has_addr;
	uint8_t addr[16];                /* v4-mapped for IPv4 */
};
int acceptq_read_at(const struct acceptq_want *want, int n, struct acceptq *out);

/* The same, kept from call to call (sluiced asks every tick): the netlink socket and the
 * sorted ports. The ports are those of the first call's `want`: free the reader (then init
 * it) when the services change. All zero is a reader not yet used. */
struct acceptq_reader {
	int fd, open;                    /* the socket, when open (a zeroed reader is closed) */
	uint32_t *index;                 /* port << 16 | position in want, sorted */
	int n;
	struct acceptq *tmp;             /* 2n: by listener bound, and the wildcard ones */
	int two_dumps;                   /* the kernel takes dumps by family only */
};
void acceptq_reader_init(struct acceptq_reader *r);
void acceptq_reader_free(struct acceptq_reader *r);
int acceptq_reader_read(struct acceptq_reader *r, const struct acceptq_want *want, int n,
			struct acceptq *out);

/* The connections (any state but LISTEN) whose local port is one of ports, as flow keys
 * (local address included), sorted for live_flows_has(). *keys is malloc'd (free it).
 * Returns the count, or -errno. */
int live_flows_read(const uint16_t *ports, int n, struct sluice_flow_key **keys);
int live_flows_has(const struct sluice_flow_key *keys, int count, const struct sluice_flow_key *k);

#endif
