/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Flow table upkeep from userspace: reclaiming flows whose end BPF never saw, and counting
 * the live ones. */
#ifndef SLUICE_FLOWGC_H
#define SLUICE_FLOWGC_H

#include "kernel/bpfmaps.h"

/* Reclaim flows whose FIN/RST was never seen: SYN-state older than syn_timeout, or silent
 * longer than idle_timeout -- unless still_open (may be NULL) says the kernel still has the
 * connection (a quiet flow is not a dead one). Releases their in-flight slots via
 * inflight_released. Returns the number reclaimed, or -errno. */
typedef int (*flow_alive_fn)(void *ctx, const struct sluice_flow_key *k);
int maps_gc_flows(const struct sluice_maps *m, unsigned long long now_ns,
		  unsigned long long syn_timeout_ns, unsigned long long idle_timeout_ns,
		  flow_alive_fn still_open, void *ctx);

/* Count live flows per service (for status / reconciliation checks). */
int maps_count_flows(const struct sluice_maps *m, int *per_service, int n);

#endif
