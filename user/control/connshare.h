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
 * The rule, per class k >= 1 (L0 is never capped), once a tick:
 *   - k's requests were refused for lack of room (headroom or ladder): the class has more
 *     connections asking than room, so its cap is set to its share of the limit (its
 *     threshold), or lowered to it, and held for hold_ns;
 *   - the cap refused k's SYNs: the demand is still there, the cap is held for hold_ns; and
 *     where the requests in flight leave a tenth of the limit unused while none of k's was
 *     refused for half of hold_ns, the cap grows by a quarter (at least 1), at most every
 *     SLUICE_CONNSHARE_GROW_NS: a cap must not keep a backend idle while clients wait at it
 *     (idle keep-alive connections of the class hold places without sending). In-flight is
 *     read once a tick and a closed-loop client's connection is idle between a response and
 *     its next request, so a tick's dip alone proves nothing: hence the quiet time and the
 *     pace;
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
#define SLUICE_CONNSHARE_GROW_NS 500000000ull

struct sluice_connshare {
	uint32_t cap[SLUICE_NUM_CLASSES];        /* 0 = none; cap[0] always 0 */
	uint64_t until_ns[SLUICE_NUM_CLASSES];   /* the cap is lifted at this time */
	uint64_t refused_ns[SLUICE_NUM_CLASSES]; /* the class's requests were last refused */
	uint64_t grown_ns[SLUICE_NUM_CLASSES];   /* its cap last grew */
};

struct sluice_connshare_input {
	uint64_t refused[SLUICE_NUM_CLASSES];      /* requests refused for room this tick */
	uint64_t cap_refused[SLUICE_NUM_CLASSES];  /* SYNs the cap refused this tick */
	uint32_t share[SLUICE_NUM_CLASSES];        /* the class's room: its threshold, or the
	                                            * limit without one; 0 = none known */
	uint32_t limit;                            /* 0 = no limit: nothing to leave unused */
	int64_t in_flight;                         /* requests in flight, every class */
};

/* One tick at now_ns. Returns 1 when a cap changed (the map needs writing). */
int sluice_connshare_tick(struct sluice_connshare *cs, const struct sluice_connshare_input *in,
			  uint64_t hold_ns, uint64_t now_ns);

/* Take caps found in the map (a restarted sluiced): each held for hold_ns from now. */
void sluice_connshare_adopt(struct sluice_connshare *cs, const uint32_t cap[SLUICE_NUM_CLASSES],
			    uint64_t hold_ns, uint64_t now_ns);

#endif
