/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Restarts invisible to the loop: each service's controller state lives in the pinned map
 * `ctl_state` (one entry per service slot, control/ctlslot.h). sluiced writes the entry after
 * every tick of the service (a kill -9 loses at most one tick), adopts it at start, and does
 * the operator's baseline resets asked through `ctl_requests`. */
#ifndef SLUICE_CTLPERSIST_H
#define SLUICE_CTLPERSIST_H

#include "daemon/daemon.h"

/* At start, after daemon_init(): adopt every service's pinned state that belongs to it (same
 * name and port); one event per service says adopted or why not. The cascade suppression the
 * newest adopted entry carries is in force again (with an alert event): only an operator or
 * suspend_s lifts it, never a restart. */
void daemon_ctl_import(struct daemon *d, unsigned long long now_ns);

/* After the tick's services: when the cascade suppression began or ended since the entries
 * were last written, every service's entry is written again, so that whichever one a restart
 * finds newest carries it. */
void daemon_ctl_cascade(struct daemon *d, unsigned long long now_ns);

/* Once a tick, before the services: read a slice of the request slots (all of them up to
 * 8192 services), so a request costs no lookup per service and reaches a settled service
 * (one the tick skips) too. */
void daemon_ctl_poll(struct daemon *d, int n_used);

/* Service i has a baseline reset waiting in the slice read this tick: it must run. */
int daemon_ctl_pending(const struct daemon *d, int i);

/* Before service i's tick: a baseline reset an operator asked for. */
void daemon_ctl_requests(struct daemon *d, int i, unsigned long long now_ns);

/* After service i's tick: write its entry. */
void daemon_ctl_export(struct daemon *d, int i, unsigned long long now_ns);

/* Every service's entry (on SIGTERM, after the last tick). */
/* The tick's export: only when the decided state moved since the last write (limit, ladder,
 * breaker, baseline windows, objective missed, reset acknowledged) or a second has passed; a
 * restart continues from state at most a second old in what no decision changed (the
 * breaker's error ring, the ladder's recovery evidence). */
void daemon_ctl_export_tick(struct daemon *d, int i, unsigned long long now_ns);
void daemon_ctl_export_all(struct daemon *d, unsigned long long now_ns);
/* Write the entries the tick's exports put in d->cwb (a failed one is due again). */
void daemon_ctl_flush(struct daemon *d);

#endif
