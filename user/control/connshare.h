/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The connection cap of an http service's lower classes (map `http_conn_cap`).
 *
 * Why: every request refused with an in-kernel 429 is a connection the server accepted and
 * then lost, and a server that holds its connections in a fixed number of slots (Apache's
 * event MPM) closes idle keep-alive connections -- the highest class's among them -- to make
 * room for the next ones. Under an L3 flood of keep-alive clients that is what queues ahead
 * of L0, not the L3 requests sluice admits: on Apache at 3.5x its capacity L0's p99 stayed at
 * 1.7-2.0x its unloaded value with every refusal a 429, and at 1.0-1.1x once L3's open
 * connections were held at about the limit (docs/CONTROLLER.md). A SYN refused with an RST
 * from XDP costs the server nothing.
 *
 * What a class may hold, its share (worked out by the caller each tick): its room under the
 * limit (its threshold) and under the backend's own concurrency, less what the higher classes
 * held at their peak over the last seconds, plus the class's idle open connections (a
 * keep-alive connection between requests sends nothing). The backend's concurrency is the
 * completions per second times the unloaded mean time in the service: how many requests it
 * works on at once (Little's law) -- all it can when it is saturated, and then a request more
 * only waits. While the mean time in the service shows no queue, one more is allowed, which
 * is how the cap finds a backend that can do more. The limit alone is not enough: once the
 * cap binds, the limit no longer does and drifts up, and on Apache (16 workers, 50 ms) every
 * connection past the workers was L0's wait: with the lower class held to 11-13 connections L0's
 * p99 was 1.01-1.10x its unloaded value, with 16-18 1.44-1.61x (docs/CONTROLLER.md).
 * The rule, per class k >= 1 (L0 is never capped), once a tick:
 *   - k's requests were refused for lack of room (headroom or ladder): the class has more
 *     connections asking than room, so its cap is set to its share, or lowered to it, and
 *     held for hold_ns;
 *   - the cap refused k's SYNs: the demand is still there, the cap is held for hold_ns; it
 *     follows its share down at once, and up by a quarter (at least 1) at most every
 *     SLUICE_CONNSHARE_GROW_NS once none of k's requests was refused for half of hold_ns;
 *   - neither for hold_ns: the cap is lifted.
 * Only a class's own connections count against its cap, so connections of a lower class
 * never hold a higher class back. Connections open when a cap is set stay open; they only
 * keep new ones out until they close.
 * Pure over its inputs and the clock: no map I/O. */
#ifndef SLUICE_CONNSHARE_H
#define SLUICE_CONNSHARE_H

#include <stdint.h>
#include "sluice.h"

#define SLUICE_CONNSHARE_HOLD_NS (2ull * 1000000000ull)
#define SLUICE_CONNSHARE_MIN     2u      /* a capped class keeps at least this many */
#ifndef SLUICE_CONNSHARE_GROW_NS
#define SLUICE_CONNSHARE_GROW_NS 500000000ull
#endif

struct sluice_connshare {
	uint32_t cap[SLUICE_NUM_CLASSES];        /* 0 = none; cap[0] always 0 */
	uint64_t until_ns[SLUICE_NUM_CLASSES];   /* the cap is lifted at this time */
	uint64_t refused_ns[SLUICE_NUM_CLASSES]; /* the class's requests were last refused */
	uint64_t grown_ns[SLUICE_NUM_CLASSES];   /* its cap last grew */
};

struct sluice_connshare_input {
	uint64_t refused[SLUICE_NUM_CLASSES];      /* requests refused for room this tick */
	uint64_t cap_refused[SLUICE_NUM_CLASSES];  /* SYNs the cap refused this tick */
	uint32_t share[SLUICE_NUM_CLASSES];        /* the connections the class may hold (see
	                                            * above); SLUICE_CONNSHARE_MIN at least */
};

/* The share of class k (see above): room is its threshold under the limit (0: shut), knee the
 * concurrency the backend is given (its own, plus the probe; 0: not known yet), above the
 * higher classes' peak in-flight, idle the class's open connections with no request. */
uint32_t sluice_connshare_share(uint32_t room, double knee, uint32_t above, uint32_t idle);

/* One tick at now_ns. Returns 1 when a cap changed (the map needs writing). */
int sluice_connshare_tick(struct sluice_connshare *cs, const struct sluice_connshare_input *in,
			  uint64_t hold_ns, uint64_t now_ns);

/* Take caps found in the map (a restarted sluiced): each held for hold_ns from now. */
void sluice_connshare_adopt(struct sluice_connshare *cs, const uint32_t cap[SLUICE_NUM_CLASSES],
			    uint64_t hold_ns, uint64_t now_ns);

#endif
