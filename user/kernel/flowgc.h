/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Flow table upkeep from userspace: reclaiming flows whose end BPF never saw, and counting
 * the live ones. */
#ifndef SLUICE_FLOWGC_H
#define SLUICE_FLOWGC_H

#include "kernel/bpfmaps.h"

/* Reclaim flows whose FIN/RST was never seen: SYN-state older than syn_timeout, or silent
 * longer than idle_timeout -- unless still_open (may be NULL) says the kernel still has the
 * connection (a quiet flow is not a dead one). Each is ended by the data path's own program
 * (m->reclaim_prog), which checks it again and gives back what its ownership word holds.
 * Orphaned DEAD entries are deleted. Returns the number reclaimed, or -errno. */
typedef int (*flow_alive_fn)(void *ctx, const struct sluice_flow_key *k);
int maps_gc_flows(const struct sluice_maps *m, unsigned long long now_ns,
		  unsigned long long syn_timeout_ns, unsigned long long idle_timeout_ns,
		  flow_alive_fn still_open, void *ctx);

/* Reconciliation: the in-flight counters compared with what the flow table's ownership words
 * hold, per service slot and class. A sweep reads the data path's change counts, the
 * counters, the table, the counters and the change counts again; it tells something about a
 * slot only when nothing of that slot (its bucket of change counts) moved while it ran and no
 * request was half decided. A difference is corrected (booked in inflight_released /
 * busy_released, which only the controller writes) when two such sweeps in a row, with
 * nothing moving in between, saw the same one: a change in flight cannot look like that.
 * Returns the number of slots corrected (those whose release was written before a failure
 * too: the caller re-reads the releases on it), or -errno. Expected: 0, always. */
struct recon_slot {
	int have;                        /* the last sweep saw this slot at rest with a difference */
	__u64 ops;                       /* ... at these change counts */
	struct sluice_inflight d_in, d_busy;
	unsigned long long corrections;  /* units corrected since start (the metric) */
};
struct recon_state {
	int n_slots;
	struct recon_slot *slot;
};
int recon_init(struct recon_state *r, int n_slots);
void recon_free(struct recon_state *r);
int maps_reconcile(const struct sluice_maps *m, struct recon_state *r);

/* Count live flows per service (for status / reconciliation checks). */
int maps_count_flows(const struct sluice_maps *m, int *per_service, int n);

#endif
