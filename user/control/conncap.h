/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* One http service's connection cap from tick to tick: what sluiced decides each tick around
 * the rule of control/connshare.h -- the inputs it gives the rule (the cap's refusals since
 * the last read, each class's open connections), when the caps are cleared, taken over or
 * written again. Pure over its inputs and the clock: the caller reads and writes the maps when
 * a step asks for it, so that a service with no cap and no refusal costs no map access:
 *
 *   if (sluice_conncap_adopting(c, in)) {       the first tick as http
 *           read the map's caps (NULL when unreadable) and the cap's refusal counts
 *           (zeros when unreadable);
 *           if (sluice_conncap_adopt(c, caps, rejected, now)) write zero caps, then
 *                   sluice_conncap_written(c, ok);
 *   }
 *   step = sluice_conncap_begin(c, in, now);
 *   if (step == SLUICE_CONNCAP_READ) {
 *           read the cap's refusal counts and the open connections (each NULL when
 *           unreadable); step = sluice_conncap_decide(c, in, rejected, open, now);
 *   }
 *   if (step == SLUICE_CONNCAP_WRITE) write c->share.cap, then sluice_conncap_written(c, ok);
 *   return sluice_conncap_held(c);              the service is not quiet while 1
 *
 * When (the service's connection_cap):
 *   auto    the rule runs whenever a lower class is refused for room (headroom or ladder);
 *   churn   (the default) only while the refusals churn connections: each in-kernel 429
 *           closes its connection, so a client that sends again at once makes the backend
 *           accept and lose a connection per refusal (on Apache, 16 workers x 50 ms, a
 *           keep-alive closed loop at 10x made 39,000-42,000 of them a second, and the goodput
 *           fell to 77.8-89.8 % of capacity; capped, the same clients cost one RST from XDP
 *           per try and the goodput was 98.8-99.1 %). A cap also costs: clients that send
 *           each request on the first free connection (an open loop) lost 2.6-9.2 points of
 *           goodput under it at 3.5x and 10x, where they were refused 750-2,800 times a
 *           second, 2.4-9 times the responses. So the rule starts only on two ticks in a row
 *           whose refusals (requests for room, and SYNs the cap refused) number at least
 *           SLUICE_CONNCAP_CHURN_RATIO (20) times the tick's responses and at least
 *           SLUICE_CONNCAP_CHURN_MIN_RATE (1000) a second, and runs until such ticks have
 *           been absent for SLUICE_CONNSHARE_HOLD_NS (2 s): then the caps are lifted (a
 *           reload into churn from another mode starts with the gate closed);
 *   off     never.
 */
#ifndef SLUICE_CONNCAP_H
#define SLUICE_CONNCAP_H

#include <stdint.h>
#include "common/config.h"
#include "control/connshare.h"

struct sluice_conncap {
	struct sluice_connshare share;           /* the caps and the rule's timers */
	uint64_t rejected[SLUICE_NUM_CLASSES];   /* the cap's refusals as last read (map
	                                          * conn_cap): a tick's are the difference */
	int adopted;                             /* the map's caps were looked at */
	int dirty;                               /* the map does not hold share.cap yet (a
	                                          * write failed): written again each tick */
	int keep;                                /* the slot's pinned controller state is this
	                                          * service's (a restart): its caps are taken
	                                          * over; another's are cleared */
	/* churn mode's gate */
	uint32_t churn_ticks;                    /* churning ticks in a row */
	uint64_t churn_until_ns;                 /* the rule runs until then (0: gate closed) */
	uint64_t churn_refusals;                 /* the last tick's refusals and responses, for */
	uint64_t churn_samples;                  /* the event of the gate's opening */
};

#define SLUICE_CONNCAP_CHURN_RATIO 20        /* refusals per response that churn */
#define SLUICE_CONNCAP_CHURN_MIN_RATE 1000   /* ... and per second at least */
#define SLUICE_CONNCAP_CHURN_TICKS 2         /* ticks in a row that open the gate */

/* A tick's inputs, none from the cap's maps. */
struct sluice_conncap_in {
	int http;                                /* the service is http */
	int on;                                  /* connection_cap (CONN_CAP_*) */
	uint64_t dt_ns;                          /* the tick's length (churn's rate) */
	uint32_t room[SLUICE_NUM_CLASSES];       /* each class's threshold under the verdict, or
	                                          * the limit when it has none (0: shut) */
	uint64_t refused[SLUICE_NUM_CLASSES];    /* requests refused for room this tick
	                                          * (headroom or ladder) */
	int64_t inflight[SLUICE_NUM_CLASSES];    /* each class's in-flight now */
	double base_us;                          /* the unloaded mean time in the service (0:
	                                          * not known yet) */
	uint64_t samples;                        /* the tick's latency samples, all classes */
	double mean_us;                          /* their mean */
};

enum { SLUICE_CONNCAP_IDLE, SLUICE_CONNCAP_READ, SLUICE_CONNCAP_WRITE };

/* Whether the map's caps are to be looked at first (the service's first tick as http). */
int sluice_conncap_adopting(const struct sluice_conncap *c, const struct sluice_conncap_in *in);
/* Take the caps found in the map when they are the service's own (c->keep), and the cap's
 * refusal counts as they stand. Returns 1 when the map's caps are another service's, or could
 * not be read (cap NULL), and are to be cleared (written as c->share.cap, all 0). */
int sluice_conncap_adopt(struct sluice_conncap *c, const uint32_t cap[SLUICE_NUM_CLASSES],
			 const __u64 rejected[SLUICE_NUM_CLASSES], uint64_t now_ns);
/* The tick up to the map reads: SLUICE_CONNCAP_IDLE (nothing to do), _WRITE (the caps were
 * cleared: the service is not http, or the cap was turned off), _READ (a cap is set or a class
 * is refused: the rule runs with the map's counts). */
int sluice_conncap_begin(struct sluice_conncap *c, const struct sluice_conncap_in *in,
			 uint64_t now_ns);
/* The rest of the tick: rejected is the cap's refusal counts (NULL: not read), open each
 * class's open connections (map http_conns; NULL: not read, the rule's window takes no
 * sample of them). Returns SLUICE_CONNCAP_WRITE when the caps are
 * to be written, else SLUICE_CONNCAP_IDLE. */
int sluice_conncap_decide(struct sluice_conncap *c, const struct sluice_conncap_in *in,
			  const __u64 *rejected, const __s64 open[SLUICE_NUM_CLASSES],
			  uint64_t now_ns);
/* A write of c->share.cap done (ok 1) or failed (ok 0: written again at the next tick). */
void sluice_conncap_written(struct sluice_conncap *c, int ok);
/* 1 while a cap is set or a write is due. */
int sluice_conncap_held(const struct sluice_conncap *c);

#endif
