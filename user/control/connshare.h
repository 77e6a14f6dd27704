/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The connection cap of an http service's lower classes (map `http_conn_cap`).
 *
 * Why: every request refused with an in-kernel 429 is a connection the server accepted and
 * then lost, and a server that holds its connections in a fixed number of slots (Apache's
 * event MPM) closes idle keep-alive connections -- the highest class's among them -- to make
 * room for the next ones. Under an L3 flood of keep-alive clients that is what queues ahead
 * of L0, not the L3 requests sluice admits: on Apache at 3.5x its capacity L0's p99 stayed at
 * 1.7-2.0x its unloaded value with every refusal a 429, and at 1.0-1.1x once L3's open
 * connections were held at or below the workers (docs/CONTROLLER.md). A SYN refused with an
 * RST from XDP costs the server nothing.
 *
 * How many connections a class may hold is found from the backend's queue, not from its rate.
 * An estimate of the workers from the response rate (rate x the unloaded mean time in the
 * service) errs by one or two from tick to tick, and every connection past the workers is a
 * wait in front of L0; worse, a cap that holds the load lowers the rate it would be read from,
 * and an open loop's cap spiralled down with it (docs/CONTROLLER.md). So the cap moves on what
 * a window of ticks (at least SLUICE_CONNSHARE_WIN_NS and SLUICE_CONNSHARE_WIN_SAMPLES
 * latency samples) shows. Its mean time in the service is read against the unloaded mean, or
 * the lowest window mean of the last SLUICE_CONNSHARE_LOW_NS when that is lower (the unloaded
 * mean is learned from the first windows of a rise and can hold a request's worth of queue of
 * its own, which would hide one connection past the workers):
 *   - a queue (above SLUICE_CONNSHARE_QUEUE x that) while the backend still answers at its
 *     best rate since a cap was set (within SLUICE_CONNSHARE_RATE_KEEP): the lowest capped
 *     class that holds connections, and no more of them than its cap, is lowered by the queue
 *     (the window's in-flight x (1 - 1 / the ratio), Little's law: the requests beyond what
 *     the backend works on), at least 1; never below what the backend served at once without
 *     a queue in the last SLUICE_CONNSHARE_PROVEN_NS, less the other classes' in-flight. A
 *     mean that stays high once the cuts cost the backend its rate is not a queue a cap can
 *     take away (a slower service, a busy host): no further cut then. A class holding more
 *     connections than its cap (opened before it) is not cut either: those connections are
 *     the queue, and the data path closes them one request at a time (bpf/admit.h
 *     `http_conn_over_cap`);
 *   - no queue (at or below SLUICE_CONNSHARE_SPARE) while the class's SYNs were refused by
 *     its cap and its connections were all busy (on average over the window, its open
 *     connections within half of the cap and its in-flight within half of its open ones):
 *     a connection of the class wanted a worker. Until the first queue since the cap was set
 *     the cap grows by a quarter a window (it was set at the class's room when the limit first
 *     refused it, which an open loop's burst can catch small). After that it grows by 1,
 *     and only on evidence of idle workers: at once when the window's rate is below the best
 *     since the cap was set by more than half a request in service (SLUICE_CONNSHARE_IDLE of
 *     the in-flight), else as a probe after `patience` such windows in a row; a probe a
 *     queue undoes within two windows doubles the patience (up to
 *     SLUICE_CONNSHARE_PATIENCE_MAX), one that holds two windows halves it. The highest
 *     class that qualifies is raised, one class a window;
 *   - anything else: held.
 * The cap is set at the first tick that sees the class's requests refused for room (headroom
 * or ladder), at its room under the limit; it is held SLUICE_CONNSHARE_HOLD_NS past the last
 * such refusal or refused SYN (or request refused over the cap) and then lifted, and never
 * above the room (a limit cut takes it down at once). L0 is never capped. Only a class's own
 * connections count against its cap.
 * Pure over its inputs and the clock: no map I/O. */
#ifndef SLUICE_CONNSHARE_H
#define SLUICE_CONNSHARE_H

#include <stdint.h>
#include "sluice.h"

#define SLUICE_CONNSHARE_HOLD_NS (2ull * 1000000000ull)
#define SLUICE_CONNSHARE_MIN     2u      /* a capped class keeps at least this many */
/* A decision's window: at least this long and this many latency samples ... */
#define SLUICE_CONNSHARE_WIN_NS      500000000ull
#define SLUICE_CONNSHARE_WIN_SAMPLES 50u
/* ... and given up (no decision) after this long without them. */
#define SLUICE_CONNSHARE_WIN_MAX_NS  (4ull * 1000000000ull)
/* The window's mean over the unloaded one: above QUEUE a queue, at or below SPARE none. */
#define SLUICE_CONNSHARE_QUEUE       1.04
#define SLUICE_CONNSHARE_SPARE       1.02
/* A cut needs the window's response rate at this much of the best since a cap was set. */
#define SLUICE_CONNSHARE_RATE_KEEP   0.9
/* How long what the backend served without a queue stands as the floor of a cut. */
#define SLUICE_CONNSHARE_PROVEN_NS   (10ull * 1000000000ull)
/* Windows of spare capacity a probe needs: when the cap is set, and at most. */
#define SLUICE_CONNSHARE_PATIENCE_START 8u
#define SLUICE_CONNSHARE_PATIENCE_MAX   32u
/* How long the lowest window mean stands as the time in the service without a queue. */
#define SLUICE_CONNSHARE_LOW_NS      (30ull * 1000000000ull)
/* Idle workers: a window's rate below the best by this many requests in service (of the
 * window's in-flight). */
#define SLUICE_CONNSHARE_IDLE        0.5

struct sluice_connshare {
	uint32_t cap[SLUICE_NUM_CLASSES];        /* 0 = none; cap[0] always 0 */
	uint64_t until_ns[SLUICE_NUM_CLASSES];   /* the cap is lifted at this time */
	uint64_t raised_ns[SLUICE_NUM_CLASSES];  /* its cap was last raised ... */
	uint64_t lowered_ns[SLUICE_NUM_CLASSES]; /* ... and lowered */
	uint32_t spare[SLUICE_NUM_CLASSES];      /* windows of spare capacity in a row */
	uint32_t patience[SLUICE_NUM_CLASSES];   /* how many a probe needs (0: 1) */
	uint8_t judged[SLUICE_NUM_CLASSES];      /* the last raise was judged (held or not) */
	uint8_t cut[SLUICE_NUM_CLASSES];         /* a queue cut the cap since it was set */
	/* the window being gathered */
	uint64_t win_ns;                         /* its start (0: none yet) */
	uint64_t win_samples;
	double win_sum_us;                       /* samples x their mean */
	double win_inflight;                     /* all classes' in-flight, summed over ticks */
	double win_busy[SLUICE_NUM_CLASSES];     /* each class's, likewise */
	double win_open[SLUICE_NUM_CLASSES];     /* each class's open connections, likewise */
	uint32_t win_ticks;
	uint32_t win_open_ticks;                 /* ticks that could read the open connections */
	uint64_t win_cap_refused[SLUICE_NUM_CLASSES];
	/* what earlier windows showed */
	double best_rate;                        /* the best response rate since a cap was
	                                          * set (0 while none is) */
	double low_us;                           /* the lowest window mean ... */
	uint64_t low_ns;                         /* ... and when */
	double proven;                           /* in-flight served without a queue ... */
	uint64_t proven_ns;                      /* ... and when */
};

struct sluice_connshare_input {
	uint64_t refused[SLUICE_NUM_CLASSES];      /* requests refused for room this tick */
	uint64_t cap_refused[SLUICE_NUM_CLASSES];  /* SYNs the cap refused this tick */
	uint32_t room[SLUICE_NUM_CLASSES];         /* the class's threshold under the limit (0:
	                                            * shut); a cap never above it, MIN at least */
	int64_t inflight[SLUICE_NUM_CLASSES];      /* each class's in-flight now */
	int64_t open[SLUICE_NUM_CLASSES];          /* and its open connections */
	int open_unread;                           /* 1: they could not be read this tick (the
	                                            * window takes no sample of them: read as
	                                            * none, a class over its cap would look
	                                            * under it and be cut, one at it not raised) */
	uint64_t samples;                          /* the tick's latency samples, all classes */
	double mean_us;                            /* their mean */
	double base_us;                            /* the unloaded mean time in the service (0:
	                                            * not known: the cap only follows the room) */
};

/* One tick at now_ns. Returns 1 when a cap changed (the map needs writing). */
int sluice_connshare_tick(struct sluice_connshare *cs, const struct sluice_connshare_input *in,
			  uint64_t hold_ns, uint64_t now_ns);

/* Take caps found in the map (a restarted sluiced): each held for hold_ns from now. */
void sluice_connshare_adopt(struct sluice_connshare *cs, const uint32_t cap[SLUICE_NUM_CLASSES],
			    uint64_t hold_ns, uint64_t now_ns);

#endif
