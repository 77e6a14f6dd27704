/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The kernel's listen queue of a service as a controller input. Connections waiting in the
 * accept queue are work the backend has not even begun: a backend that keeps up accepts at
 * once, so a queue that stays non-empty and grows means it is saturated -- also when nothing
 * comes back to measure a latency on (every worker held, or connections that wait before
 * their first turn). Read with sock_diag on the listening sockets each tick (idiag_rqueue:
 * connections waiting, idiag_wqueue: the backlog). The SYN queue is no input: Linux drops a new
 * SYN while the accept queue is full instead of queueing it, so a backend that falls behind
 * leaves it empty, and what it does hold (handshakes under way, a SYN flood's forged ones)
 * says nothing of the backend (docs/CONTROLLER.md, "The listen queue").
 *
 * Rule (per tick): the queue is **saturated** once it has held connections at every tick
 * for at least a window, and is now longer than when it began, or over half the backlog.
 * An empty tick ends it at once. While saturated the controller (controller.c) does not
 * grow the limit, does not climb the ladder back, and once per window hands the ladder an
 * overload of excess queued / backlog (the full step from a quarter of the backlog on) unless
 * the window's latency already did. Pure state machine on the caller's clock. */
#ifndef SLUICE_LISTENQ_H
#define SLUICE_LISTENQ_H

#include <stdint.h>
#include "control/events.h"

struct sluice_listenq_input {
	int have;                     /* a listener was found on the port this tick */
	uint32_t queued, backlog;
};

struct sluice_listenq {
	uint64_t since_ns;            /* non-empty at every tick since (0: empty) */
	uint32_t first, last;         /* length when it began, and at the last tick */
	uint32_t backlog;
	uint64_t told_ns;             /* when the ladder was last told (once per window) */
	int saturated;
};

void sluice_listenq_init(struct sluice_listenq *q);
/* One tick. Returns q->saturated; a change is an event (machine accept_queue). */
int sluice_listenq_tick(struct sluice_listenq *q, const struct sluice_listenq_input *in,
			uint64_t window_ns, uint64_t now_ns, const struct sluice_event_sink *sink);
/* While saturated, at most once per window: 1 and the overload's excess (queued / backlog)
 * to hand the ladder now. */
int sluice_listenq_overload(struct sluice_listenq *q, uint64_t window_ns, uint64_t now_ns,
			    double *excess);

#endif
