/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The daemon's side of node-wide arbitration (user/control/nodearb.h): reads the CPU pressure
 * file once a tick (one pread of an fd kept open), turns its stall total into the share of the
 * last second some task waited for a CPU, feeds the arbiter, and applies its admit fractions
 * to every service's verdict. The pressure is measured from the file's running total rather
 * than taken from its avg10: avg10 trails by ten seconds, so a cut's effect would show only
 * after several more cuts made on old news. */
#ifndef SLUICE_DAEMON_NODE_H
#define SLUICE_DAEMON_NODE_H

#include <stdint.h>
#include "control/nodearb.h"
#include "sluice.h"

struct daemon;

struct daemon_node {
	int on;                          /* arbitration asked for and the file readable */
	int fd;                          /* the pressure file, -1 when closed */
	struct sluice_node_params p;
	struct sluice_node_arb arb;
	int have_anchor;                 /* the reading the next observation is measured from */
	uint64_t anchor_total_us, anchor_ns;
	uint64_t arrivals;               /* at all services since the anchor */
	uint64_t unreadable_since_ns;    /* the first of the failed reads in a row, 0: none */
};

/* Reads that fail this long in a row turn arbitration off (the cuts lifted), as a file that
 * cannot be read at start does: a gap is no evidence, but cuts held on none would last. */
#define NODE_UNREADABLE_NS (10 * 1000000000ull)

/* (Re)configure from d->cfg.node (at start and on reload). Arbitration asked for but a file
 * that cannot be read: off, with a warning and an event. Keeps the arbiter's state while it
 * stays on. */
void daemon_node_configure(struct daemon *d, uint64_t now_ns);
/* Once a tick, before the services: observe (at most once a second) and decide. A change of
 * an admit fraction wakes every service so each writes its verdict. */
void daemon_node_tick(struct daemon *d, uint64_t now_ns);
/* The node's admit fractions applied to a verdict the service's controller wrote. */
void daemon_node_apply(const struct daemon *d, struct sluice_verdict *v);
void daemon_node_close(struct daemon *d);

#endif
