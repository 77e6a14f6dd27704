/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Cascade suppression: when more than max_opens breakers open (CLOSED ->
 * OPEN) within window_s, the cause is probably shared (a database blip), and opening even more
 * breakers does more harm than the blip. The opening that makes it max_opens + 1 (the 6th)
 * sets `suspended`: breakers then stay CLOSED (they report "would open"), an alert event is
 * raised and the flag is exported as a metric. It ends when an operator clears it
 * (sluice_cascade_clear) or, if suspend_s > 0, suspend_s after it began. Re-opens from
 * HALF_OPEN are not counted: they are the same incident of the same service. */
#ifndef SLUICE_CASCADE_H
#define SLUICE_CASCADE_H

#include <stdint.h>
#include "common/config.h"
#include "control/events.h"

#define SLUICE_CASCADE_MAX_OPENS 64
_Static_assert(SLUICE_MAX_CASCADE_OPENS <= SLUICE_CASCADE_MAX_OPENS - 1,
	       "the config must not accept more opens than the ring tells apart");

struct sluice_cascade_params {
	uint32_t max_opens;           /* 5 */
	double window_s;              /* 10 */
	double suspend_s;             /* 0 (default) = until an operator clears it */
};

struct sluice_cascade {
	uint64_t open_ns[SLUICE_CASCADE_MAX_OPENS];   /* ring of recent opening times */
	uint32_t head, n;
	int suspended;
	uint64_t suspended_since_ns;
	uint64_t triggers;            /* times suspension began (metric) */
	uint32_t last_count;          /* openings in the window at the last record */
};

void sluice_cascade_params_default(struct sluice_cascade_params *p);
void sluice_cascade_params_from_conf(const struct cascade_conf *cc, struct sluice_cascade_params *p);

void sluice_cascade_init(struct sluice_cascade *c);

/* A breaker of `service` opened at now_ns. Returns 1 when this opening began suspension. */
int sluice_cascade_record_open(struct sluice_cascade *c, const struct sluice_cascade_params *p,
			       const char *service, uint64_t now_ns,
			       const struct sluice_event_sink *sink);

/* Call every tick before the breakers: ends suspension after suspend_s. Returns the flag
 * the breakers must get as `suppressed`. */
int sluice_cascade_tick(struct sluice_cascade *c, const struct sluice_cascade_params *p,
			uint64_t now_ns, const struct sluice_event_sink *sink);

/* Operator decision: resume automatic opening now, forgetting the openings seen so far. */
void sluice_cascade_clear(struct sluice_cascade *c, uint64_t now_ns, const char *who,
			  const struct sluice_event_sink *sink);

#endif
