/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Userspace view of the pinned BPF maps: open them, read counters summed over CPUs, write
 * verdicts and globals. Used by sluiced (through the skeleton's fds) and by sluicectl
 * (through the pins). No skeleton dependency here, so sluicectl works without loading BPF. */
#ifndef SLUICE_BPFMAPS_H
#define SLUICE_BPFMAPS_H

#include "sluice.h"

struct sluice_maps {
	int port_to_service, services, source_rules, verdicts, globals, replies;
	int flows, rejected_syns, clients, inflight, inflight_released, busy, busy_released;
	int class_stats, latency_hist, pkt_stats;
	int ncpus;
};

/* Map names as pinned (LIBBPF_PIN_BY_NAME uses the map's name). */
#define SLUICE_MAP_NAMES \
	X(port_to_service) X(services) X(source_rules) X(verdicts) X(globals) X(replies) \
	X(flows) X(rejected_syns) X(clients) X(inflight) X(inflight_released) X(class_stats) \
	X(latency_hist) X(pkt_stats) X(busy) X(busy_released)

/* Open every pinned map under pin_dir. Returns 0, or -errno of the first missing one (with
 * all fds closed). */
int maps_open_pinned(const char *pin_dir, struct sluice_maps *m);
void maps_close(struct sluice_maps *m);

/* Counters: summed over CPUs. */
int maps_read_class_stats(const struct sluice_maps *m, int svc, int cls,
			  struct sluice_class_stats *out);
int maps_read_hist(const struct sluice_maps *m, int svc, int cls, struct sluice_hist *out);
int maps_read_pkt_stats(const struct sluice_maps *m, struct sluice_pkt_stats *out);
/* In-flight as admission sees it: BPF's count minus what the controller's GC released.
 * http: requests; tcp: open connections (for a connection cap). */
int maps_read_inflight(const struct sluice_maps *m, int svc, struct sluice_inflight *out);
/* tcp: connections with a turn open (the concurrency of a tcp service), net of the GC's. */
int maps_read_busy(const struct sluice_maps *m, int svc, struct sluice_inflight *out);
/* The concurrency the controller limits: requests (http) or busy connections (tcp). */
int maps_read_concurrency(const struct sluice_maps *m, int svc, int protocol,
			  struct sluice_inflight *out);

int maps_read_service(const struct sluice_maps *m, int svc, struct sluice_service *out);
int maps_read_verdict(const struct sluice_maps *m, int svc, struct sluice_verdict *out);
int maps_write_verdict(const struct sluice_maps *m, int svc, const struct sluice_verdict *v);
int maps_read_globals(const struct sluice_maps *m, struct sluice_globals *out);
int maps_write_globals(const struct sluice_maps *m, const struct sluice_globals *g);

#endif
