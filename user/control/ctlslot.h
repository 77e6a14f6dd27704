/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The controller's entry in the pinned map `ctl_state` (struct sluice_ctl_slot in sluice.h):
 * a summary status and /metrics read, and the controller's own record (ctl_state_export())
 * a restarted sluiced adopts. Pure: fills and reads the struct; the daemon does the map I/O. */
#ifndef SLUICE_CTLSLOT_H
#define SLUICE_CTLSLOT_H

#include "control/controller.h"

_Static_assert(sizeof(struct sluice_ctl_state) <= SLUICE_CTL_STATE_LEN,
	       "struct sluice_ctl_state outgrew the pinned map's record (SLUICE_CTL_STATE_LEN)");
/* Version 2's record is adopted as this one's prefix: only while that prefix is the 2,904
 * bytes version 2 wrote. A change to it (the limit, baseline, ladder or breaker machines) is
 * a new version that no longer adopts version 2's record. */
_Static_assert(SLUICE_CTL_STATE_V2_SIZE == 2904,
	       "the record's version 2 prefix changed: drop version 2's adoption (ctlslot.c)");
/* Version 3's likewise: the 2,928 bytes it wrote. */
_Static_assert(SLUICE_CTL_STATE_V3_SIZE == 2928,
	       "the record's version 3 prefix changed: drop version 3's adoption (ctlslot.c)");

/* The entry for service sc as s stands at now_ns. reset_ack: the last baseline reset done;
 * ticks: the service's ticks so far (status and `sluicectl baseline reset` watch it move). */
void ctl_slot_fill(struct sluice_ctl_slot *out, const struct service_ctl *s,
		   const struct service_conf *sc, uint32_t reset_ack, uint64_t ticks,
		   uint64_t now_ns);

/* The node's cascade suppression into an entry ctl_slot_fill filled: when the one in force
 * began, 0 for none (controller.h, cascade_since_ns). */
void ctl_slot_set_cascade(struct sluice_ctl_slot *slot, uint64_t since_ns);

/* The cascade suppression the entry's record carries: 1 with *since_ns (0: none in force when
 * it was written), or 0 when the record does not say (another version, an older one). */
int ctl_slot_cascade(const struct sluice_ctl_slot *slot, uint64_t *since_ns);

/* Does the entry belong to service sc (same name and port)? A slot once given to another
 * service, or never written, does not. */
int ctl_slot_belongs(const struct sluice_ctl_slot *slot, const struct service_conf *sc);

/* How old an entry may be and still say how to shed now. While no sluiced runs, the data path
 * admits everything (the heartbeat lapses), so what an entry decided (a limit, a class cut, an
 * open breaker) was about traffic that has long gone by the time a sluiced stopped for longer
 * comes back: adopted, it would refuse a healthy service's requests until the evidence undid
 * it (an open breaker answers every request 503 for up to 1.2 x open_s). What it learned of the
 * backend (the baselines) still holds. A crash or a rolling upgrade comes back well within it. */
#define SLUICE_CTL_STATE_MAX_AGE_S 300

/* Adopt the entry into s (initialised for sc). Returns 1 when adopted, 2 when only the
 * baselines were (the entry was written more than SLUICE_CTL_STATE_MAX_AGE_S before now_ns,
 * or after it: why says so), 0 when the entry is not this service's (why says so), -1 when its
 * record cannot be read by this sluiced (another version or size: s is left as initialised). */
int ctl_slot_adopt(struct service_ctl *s, const struct service_conf *sc,
		   const struct sluice_ctl_slot *slot, uint64_t now_ns, const char **why);

/* Where the priority ladder stands in shedding and recovering, read back from an entry's own
 * record (what status and /metrics show; the event log has each step). Seconds; -1 = none. */
struct ctl_recovery {
	int known;                    /* 0: the record is another sluiced version's: unread */
	double shedding_s;            /* a class is cut: since the episode's first cut */
	double since_overload_s;      /* since the last overloaded decision */
	double last_recovery_s;       /* the last recovery: last overload -> every class at 100 % */
	double last_episode_s;        /* ... and from that episode's first cut */
	double recovered_ago_s;       /* since that recovery (-1 while shedding again) */
};

/* Nothing known: every time -1 (a record not read, or nothing happened yet). */
#define CTL_RECOVERY_NONE ((struct ctl_recovery){ .shedding_s = -1, .since_overload_s = -1, \
	.last_recovery_s = -1, .last_episode_s = -1, .recovered_ago_s = -1 })

/* Fill out from the entry's record as it stood when written (ages from now_ns, the same
 * CLOCK_MONOTONIC; a time after now_ns reads as 0 s ago). Returns 0, or -1 with out->known
 * 0 when the record is not one this build can read. */
int ctl_slot_recovery(const struct sluice_ctl_slot *slot, uint64_t now_ns,
		      struct ctl_recovery *out);

/* The entry's last decided window's latency of the highest busy classes (the one the
 * objective is judged on), µs; 0 when none was decided or the record does not carry it. */
unsigned ctl_slot_top_class_us(const struct sluice_ctl_slot *slot);

/* A pending baseline reset for sc: the request's generation when it is for this service and
 * newer than ack, else 0. */
uint32_t ctl_request_reset_gen(const struct sluice_ctl_request *rq,
			       const struct service_conf *sc, uint32_t ack);

#endif
