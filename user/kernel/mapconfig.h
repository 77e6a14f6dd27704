/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Turning a configuration into map contents: service slots, port table, source rules and
 * reply texts. The one place where the map layer meets the configuration. */
#ifndef SLUICE_MAPCONFIG_H
#define SLUICE_MAPCONFIG_H

#include "common/config.h"
#include "kernel/bpfmaps.h"

/* Service slots of the per-service maps for a config of n services: a power of two, at least
 * SLUICE_MIN_SERVICE_SLOTS, at most SLUICE_MAX_SERVICES, so that a reload adding a few
 * services fits without a restart (a config beyond the slots needs one). */
unsigned maps_service_slots(int n_services);

/* Stable service indices across reloads and restarts: a service keeps the index its name
 * already has in the `services` map; new names take free slots: never named ones first, then
 * removed services' slots where no unit is still open, then the others. idx[i] for
 * cfg->services[i].
 * Returns 0, or -1 when no slot is free (more services than m->n_slots). */
int maps_assign_indices(const struct sluice_maps *m, const struct sluice_config *cfg, int *idx);

/* Write services, port_to_service (and the bitmap of its ports, where m->service_ports is
 * open), source_rules and replies for cfg (indices from maps_assign_indices). Removed
 * services lose their port and rules; their counters stay. A slot new to its service (another
 * service's or none's, or its own that a reload removed it from) keeps no decision, record,
 * request, counter or client entry of before: the service starts there as a new one. Only
 * its counts of units still open stay (the previous service's, given back there when they
 * end), a client's among them. */
int maps_program_services(const struct sluice_maps *m, const struct sluice_config *cfg,
			  const int *idx);
/* The same, calling beat(ctx) after every `every` services: a reload of tens of thousands of
 * services writes for a second or more, and the daemon's heartbeat must not age meanwhile. */
int maps_program_services_beat(const struct sluice_maps *m, const struct sluice_config *cfg,
			       const int *idx, int every, void (*beat)(void *ctx), void *ctx);

/* Rewrite the service ports' bitmap (`service_ports`, not pinned) from port_to_service: a bit
 * for every port whose value is not 0. When the array cannot be read, every bit is set, so
 * that every packet asks the array as it would with no bitmap. Returns 0, or -errno when the
 * array could not be read (the bitmap then all ones) or the bitmap not written. */
int maps_derive_port_bits(int port_to_service, int service_ports);

#endif
