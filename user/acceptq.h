/* The accept-queue signal (SPEC: queue signal): how many completed connections wait in a
 * service's listen socket(s) for the application to accept them, read with NETLINK_SOCK_DIAG
 * in sluiced's network namespace. Waiting is what overload is (seed 001 §2). */
#ifndef SLUICE_ACCEPTQ_H
#define SLUICE_ACCEPTQ_H

#include <stdint.h>

struct acceptq {
	uint32_t queued;     /* connections waiting to be accepted, summed over listeners */
	uint32_t backlog;    /* the listeners' backlog limit, summed */
	uint32_t listeners;  /* listening sockets found on the port (v4 and v6) */
};

/* Fill out[i] for each ports[i] (host order) from one dump of TCP listeners.
 * Returns 0, or -errno when the netlink query failed (out untouched). */
int acceptq_read(const uint16_t *ports, int n, struct acceptq *out);

#endif
